#include "testbench/replay/replayer.h"

#include <algorithm>

namespace hcasim::replay {

replayer::replayer(sc_module_name n, machine& m, const trace_file& t, trace::recorder& rec,
                   bool recorded_timing, double tolerance)
    : sc_module(n), m_(m), t_(t), rec_(rec), recorded_(recorded_timing), tolerance_(tolerance) {
    fw::driver_options opts;
    for (unsigned i = 0; i < t.nodes; ++i) sw_.push_back(std::make_unique<host_software>(m.at(i), opts));
    objs_.resize(t.nodes);
    events_.resize(t.nodes);
    SC_THREAD(run);
}

void replayer::compare_end(const json& actual_memory) {
    std::vector<std::vector<const step*>> want(t_.nodes);
    for (const step& e : t_.events) want[e.j["node"].get<unsigned>()].push_back(&e);
    for (unsigned n = 0; n < t_.nodes; ++n) {
        const auto& got = events_[n];
        const size_t k = std::min(got.size(), want[n].size());
        for (size_t i = 0; i < k; ++i) {
            json w = want[n][i]->j, g = got[i];
            w.erase("t_ps");
            g.erase("t_ps");
            if (w != g)
                diff("event", want[n][i]->line,
                     "asynchronous event " + std::to_string(i + 1) + " of node " + std::to_string(n) +
                         ": expected " + w.dump() + ", got " + g.dump());
        }
        if (got.size() != want[n].size() && (compare_events_ || !want[n].empty()))
            diff("event", want[n].empty() ? 0 : want[n].back()->line,
                 "node " + std::to_string(n) + ": " + std::to_string(want[n].size()) +
                     " asynchronous events recorded, " + std::to_string(got.size()) + " in the replay" +
                     (got.size() > want[n].size() ? " (first extra: " + got[want[n].size()].dump() + ")"
                                                  : ""));
    }
    if (t_.end.is_object() && t_.end.contains("memory"))
        for (auto& kv : t_.end["memory"].items()) {
            const json a = actual_memory.value(kv.key(), json());
            if (a != kv.value())
                diff("memory", 0,
                     "memory of " + kv.key() + " at the end: expected " + kv.value().dump() + ", got " +
                         (a.is_null() ? std::string("no such buffer") : a.dump()));
        }
}

void replayer::diff(const std::string& kind, size_t line, const std::string& text) {
    diffs.push_back({kind, (line ? t_.path + ":" + std::to_string(line) + ": " : t_.path + ": ") + text});
}

void replayer::expect(const step& s, const char* key, const json& actual) {
    if (!s.j.contains(key)) return;
    ++compared;
    if (s.j[key] != actual)
        diff("return value", s.line,
             std::string(s.j["call"]) + " node " + std::to_string(s.j["node"].get<unsigned>()) + ": " + key +
                 " expected " + s.j[key].dump() + ", got " + actual.dump());
}

void replayer::exec(const step& s) {
    try {
        exec_checked(s);
    } catch (const std::exception& e) {  // a value the checks let through and the verbs choke on
        diff("run", s.line, std::string("cannot issue this call: ") + e.what());
    }
}

bool replayer::live(unsigned node, const std::string& kind, const std::string& name) {
    node_objs& o = objs_.at(node);
    if (kind == "pd") return find(o.pd, name) != nullptr;
    if (kind == "mr") return find(o.mr, name) != nullptr;
    if (kind == "cq") return find(o.cq, name) != nullptr;
    if (kind == "qp") return find(o.qp, name) != nullptr;
    if (kind == "srq") return find(o.srq, name) != nullptr;
    if (kind == "ah") return find(o.ah, name) != nullptr;
    if (kind == "xrcd") return find(o.xrcd, name) != nullptr;
    if (kind == "rdd") return find(o.rdd, name) != nullptr;
    if (kind == "eec") return find(o.eec, name) != nullptr;
    if (kind == "buf") return o.buf.count(name) > 0;
    return false;
}

void replayer::exec_checked(const step& s) {
    const json& j = s.j;
    {
        const unsigned node = j["node"];
        const call_spec* c = spec_of(j["call"]);
        std::vector<std::pair<std::string, std::string>> refs;  // kind, name
        for (const auto& r : c->refs)
            if (j.contains(r.first)) refs.emplace_back(r.second, j[r.first].get<std::string>());
        for (const auto& r : c->opt_refs)
            if (j.contains(r.first)) refs.emplace_back(r.second, j[r.first].get<std::string>());
        if (j.contains("wr"))
            for (const json& w : j["wr"]) {
                if (w.contains("ah")) refs.emplace_back("ah", w["ah"].get<std::string>());
                if (w.contains("eec")) refs.emplace_back("eec", w["eec"].get<std::string>());
            }
        for (const auto& r : refs)
            if (!live(node, r.first, r.second)) {
                diff("return value", s.line,
                     std::string(j["call"]) + " node " + std::to_string(node) + ": its " + r.first + " \"" +
                         r.second +
                         "\" does not exist in the replay (its creation failed or it was destroyed); "
                         "the call is skipped");
                return;
            }
    }
    const sc_time issued = sc_time_stamp();
    const unsigned node = j["node"];
    const std::string call = j["call"];
    json out;  // the arguments as given, the outcome as found
    for (auto& kv : j.items())
        if (kv.key() != "t_ps" && kv.key() != "node" && kv.key() != "call" && kv.key() != "wc" &&
            kv.key() != "ret" && kv.key() != "addr_out" && kv.key() != "qp_num" && kv.key() != "lkey" &&
            kv.key() != "rkey" && kv.key() != "errno" && kv.key() != "srq_num" && kv.key() != "eecn" &&
            !(call == "query_eec" &&
              (kv.key() == "eec_state" || kv.key() == "sq_psn" || kv.key() == "rq_psn")))
            out[kv.key()] = kv.value();
    const auto h = handlers().find(call);
    if (h != handlers().end()) (this->*h->second)(s, node, out);
    rec_.call(node, call.c_str(), out, issued);
    ++calls_run;
}

bool replayer::open(unsigned i) {
    ctx_[i] = ibv_open_device(sw_[i]->driver, sw_[i]->as);
    if (!ctx_[i]) {
        failure = "node" + std::to_string(i) + ": ibv_open_device failed: " + sw_[i]->driver.last_error();
        sc_stop();
        return false;
    }
    ibv_set_async_event_handler(ctx_[i], [this, i](const ibv_async_event& e) {
        json j = rec_.event(i, e);
        j.erase("t_ps");
        events_[i].push_back(j);
    });
    return true;
}

void replayer::run() {
    ctx_.assign(t_.nodes, nullptr);
    // The global order: by issue time when every call has one (a recording writes a call
    // when it returns), else the file's. Each node's calls run in a process of their own; a
    // call starts once every call before it in that order, on any node, has returned —
    // or, for the calls that wait (poll_cq, wait_byte, sleep), has started: so a node
    // waiting for completions does not hold up the others. With --timing recorded a call
    // also waits for its recorded time, and needs the calls before it only to have started.
    bool timed = true;
    for (const step& s : t_.steps) timed &= s.j.contains("t_ps");
    order_.resize(t_.steps.size());
    for (size_t k = 0; k < order_.size(); ++k) order_[k] = k;
    if (timed)
        std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
            return t_.steps[a].j["t_ps"].get<uint64_t>() < t_.steps[b].j["t_ps"].get<uint64_t>();
        });
    state_.assign(order_.size(), 0);
    waits_.assign(order_.size(), false);
    per_node_.assign(t_.nodes, {});
    for (size_t g = 0; g < order_.size(); ++g) {
        const json& j = t_.steps[order_[g]].j;
        per_node_[j["node"].get<unsigned>()].push_back(g);
        const std::string c = j["call"];
        waits_[g] = c == "poll_cq" || c == "wait_byte" || c == "sleep";
    }
    running_ = t_.nodes;
    for (unsigned n = 0; n < t_.nodes; ++n)
        sc_spawn([this, n] { node_main(n); }, ("node" + std::to_string(n)).c_str());
}

void replayer::advance() {
    // --timing recorded: the recorded times order the calls; a call only needs the calls
    // before it to have started (so the nodes overlap as they did).
    while (prefix_ < state_.size() &&
           (state_[prefix_] == 2 || (state_[prefix_] == 1 && (waits_[prefix_] || recorded_))))
        ++prefix_;
    progress_.notify(SC_ZERO_TIME);
}

void replayer::node_main(unsigned n) {
    if (!open(n)) return;
    for (size_t g : per_node_[n]) {
        while (prefix_ < g) wait(progress_);
        const step& s = t_.steps[order_[g]];
        if (recorded_ && s.j.contains("t_ps")) {
            const sc_time at(double(s.j["t_ps"].get<uint64_t>()), SC_PS);
            if (at > sc_time_stamp()) wait(at - sc_time_stamp());
        }
        state_[g] = 1;
        advance();
        exec(s);
        state_[g] = 2;
        advance();
    }
    if (--running_) return;
    // The last node done: asynchronous events still on their way (e.g. after the last
    // completion) arrive, then each node's EQ is processed (the handlers record them).
    wait(sc_time(10, SC_US));
    for (ibv_context* c : ctx_) ibv_process_events(c, 1);
    finished = true;
    sc_stop();
}

}  // namespace hcasim::replay
