#include "testbench/replay/replay.h"

#include <systemc>

#include <boost/program_options.hpp>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/core/text_file.h"
#include "model/core/timeline.h"
#include "model/system/fabric.h"
#include "testbench/host_software.h"
#include "testbench/replay/trace_file.h"
#include "testbench/replay/verbs_trace.h"
#include "testbench/workloads.h"

namespace hcasim {

using namespace sc_core;
using namespace verbs;
using trace::json;
using namespace replay;

namespace {

/// One difference between the recording and the replay.
struct divergence {
    std::string kind;  // return value, completion, event, memory, time
    std::string text;
};

/// The replaying application: one process issuing the trace's calls in order.
class replayer : public sc_module {
public:
    SC_HAS_PROCESS(replayer);
    replayer(sc_module_name n, machine& m, const trace_file& t, trace::recorder& rec, bool recorded_timing,
             double tolerance)
        : sc_module(n), m_(m), t_(t), rec_(rec), recorded_(recorded_timing), tolerance_(tolerance) {
        fw::driver_options opts;
        for (unsigned i = 0; i < t.nodes; ++i) sw_.push_back(std::make_unique<host_software>(m.at(i), opts));
        objs_.resize(t.nodes);
        events_.resize(t.nodes);
        SC_THREAD(run);
    }

    std::vector<divergence> diffs;
    size_t calls_run = 0, completions = 0, compared = 0;
    bool finished = false;
    std::string failure;  // could not go on (e.g. a device would not open)

    /// Recorded events vs. the replay's, and memory digests; after the run.
    void compare_end(const json& actual_memory) {
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
    bool compare_events_ = false;  // the trace has outcomes: an event it lacks is a divergence

private:
    struct node_objs {
        std::map<std::string, ibv_pd*> pd;
        std::map<std::string, ibv_mr*> mr;
        std::map<std::string, ibv_cq*> cq;
        std::map<std::string, ibv_qp*> qp;
        std::map<std::string, ibv_srq*> srq;
        std::map<std::string, ibv_ah*> ah;
        std::map<std::string, std::pair<uint64_t, uint64_t>> buf;
    };

    void diff(const std::string& kind, size_t line, const std::string& text) {
        diffs.push_back({kind, (line ? t_.path + ":" + std::to_string(line) + ": " : t_.path + ": ") + text});
    }

    template <class T>
    T* find(std::map<std::string, T*>& m, const std::string& name) {
        auto it = m.find(name);
        return it == m.end() ? nullptr : it->second;
    }
    node_objs& objs_of(const std::string& ref, unsigned own, std::string* name) {
        unsigned n = own;
        split_ref(ref, own, &n, name);
        return objs_.at(n);
    }

    uint64_t buf_addr(unsigned node, const json& j) {
        if (j.contains("buf")) {
            auto& b = objs_[node].buf[j["buf"].get<std::string>()];
            return b.first + j.value("offset", uint64_t(0));
        }
        return j.value("addr", uint64_t(0));
    }

    std::vector<ibv_sge> sges(unsigned node, const json& sg) {
        std::vector<ibv_sge> out;
        for (const json& s : sg) {
            ibv_sge e{};
            e.length = s["len"].get<uint32_t>();
            if (s.contains("mr")) {
                std::string name;
                ibv_mr* mr = find(objs_of(s["mr"], node, &name).mr, name);
                e.addr = (mr ? mr->addr : 0) + s.value("offset", uint64_t(0));
                e.lkey = mr ? mr->lkey : 0;
            } else {
                e.addr = s["addr"];
                e.lkey = s["lkey"];
            }
            out.push_back(e);
        }
        return out;
    }

    uint32_t qp_num_of(const std::string& ref, unsigned own) {
        std::string name;
        ibv_qp* q = find(objs_of(ref, own, &name).qp, name);
        return q ? q->qp_num : 0;
    }

    uint16_t lid_of(unsigned node) { return m_.at(node).lid(); }

    /// Compares the recorded outcome field `key` of the step with the replay's.
    void expect(const step& s, const char* key, const json& actual) {
        if (!s.j.contains(key)) return;
        ++compared;
        if (s.j[key] != actual)
            diff("return value", s.line,
                 std::string(s.j["call"]) + " node " + std::to_string(s.j["node"].get<unsigned>()) + ": " +
                     key + " expected " + s.j[key].dump() + ", got " + actual.dump());
    }

    void exec(const step& s) {
        try {
            exec_checked(s);
        } catch (const std::exception& e) {  // a value the checks let through and the verbs choke on
            diff("run", s.line, std::string("cannot issue this call: ") + e.what());
        }
    }

    /// True if node `node` holds a live object `name` of `kind` (a creation may fail in the
    /// replay that succeeded in the recording).
    bool live(unsigned node, const std::string& kind, const std::string& name) {
        node_objs& o = objs_.at(node);
        if (kind == "pd") return find(o.pd, name) != nullptr;
        if (kind == "mr") return find(o.mr, name) != nullptr;
        if (kind == "cq") return find(o.cq, name) != nullptr;
        if (kind == "qp") return find(o.qp, name) != nullptr;
        if (kind == "srq") return find(o.srq, name) != nullptr;
        if (kind == "ah") return find(o.ah, name) != nullptr;
        if (kind == "buf") return o.buf.count(name) > 0;
        return false;
    }

    void exec_checked(const step& s) {
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
                for (const json& w : j["wr"])
                    if (w.contains("ah")) refs.emplace_back("ah", w["ah"].get<std::string>());
            for (const auto& r : refs)
                if (!live(node, r.first, r.second)) {
                    diff("return value", s.line,
                         std::string(j["call"]) + " node " + std::to_string(node) + ": its " + r.first +
                             " \"" + r.second +
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
                kv.key() != "rkey" && kv.key() != "errno")
                out[kv.key()] = kv.value();
        const auto h = handlers().find(call);
        if (h != handlers().end()) (this->*h->second)(s, node, out);
        rec_.call(node, call.c_str(), out, issued);
        ++calls_run;
    }

    using handler = void (replayer::*)(const step& s, unsigned node, json& out);
    /// One handler per call of a trace (replay::calls()): issues it, compares its outcome
    /// (expect) and adds the outcome to `out`, the replay's own record of the call.
    static const std::map<std::string, handler>& handlers() {
        static const std::map<std::string, handler> h = {
            {"alloc", &replayer::call_alloc},
            {"fill", &replayer::call_fill},
            {"wait_byte", &replayer::call_wait_byte},
            {"sleep", &replayer::call_sleep},
            {"alloc_pd", &replayer::call_alloc_pd},
            {"reg_mr", &replayer::call_reg_mr},
            {"dereg_mr", &replayer::call_dereg_mr},
            {"create_cq", &replayer::call_create_cq},
            {"create_srq", &replayer::call_create_srq},
            {"modify_srq", &replayer::call_modify_srq},
            {"create_qp", &replayer::call_create_qp},
            {"modify_qp", &replayer::call_modify_qp},
            {"destroy_qp", &replayer::call_destroy_qp},
            {"create_ah", &replayer::call_create_ah},
            {"attach_mcast", &replayer::call_attach_mcast},
            {"post_send", &replayer::call_post_send},
            {"post_recv", &replayer::call_post_recv},
            {"post_srq_recv", &replayer::call_post_recv},
            {"poll_cq", &replayer::call_poll_cq},
        };
        return h;
    }

    /// The name a creating call gives its object (its "ret"), or null if the creation failed.
    json created(const step& s, unsigned node, const void* obj, const char* kind) {
        const json& j = s.j;
        const std::string name = j["ret"].is_string() ? j["ret"].get<std::string>() : "";
        if (!obj) return json();
        return rec_.add(node, obj, kind, name);
    }

    void call_alloc(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        host_software& sw = *sw_[node];
        node_objs& o = objs_[node];
        const uint64_t len = j.value("len", uint64_t(4096)), align = j.value("align", uint64_t(4096));
        const uint64_t va = sw.as.alloc(len, align);
        json r;
        if (va) {
            r = rec_.add_buffer(node, va, len, j["ret"].is_string() ? j["ret"].get<std::string>() : "");
            o.buf[r] = {va, len};
        }
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_fill(const step& s, unsigned node, json&) {
        const json& j = s.j;
        host_software& sw = *sw_[node];
        node_objs& o = objs_[node];
        const auto& b = o.buf[j["buf"].get<std::string>()];
        const uint64_t off = j.value("offset", uint64_t(0));
        const uint64_t len = j.value("len", b.second > off ? b.second - off : 0);
        const uint64_t va = b.first + off;
        if (j.contains("hex")) {
            std::vector<uint8_t> bytes;
            trace::unhex(j["hex"], &bytes);  // checked when the trace was read
            sw.as.write(va, bytes.data(), bytes.size());
        } else if (j.contains("byte")) {
            sw.as.fill_byte(va, len, j["byte"].get<uint8_t>());
        } else if (j.contains("key")) {
            std::vector<uint8_t> bytes(len);
            verify::fill(j["key"].get<uint64_t>(), bytes.data(), len);
            sw.as.write(va, bytes.data(), len);
        } else {
            sw.as.fill(va, len, uint8_t(j.value("seed", 0u)));
        }
    }
    void call_wait_byte(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        host_software& sw = *sw_[node];
        node_objs& o = objs_[node];
        const uint64_t va = o.buf[j["buf"].get<std::string>()].first + j.value("offset", uint64_t(0));
        const uint8_t v = j.value("value", uint8_t(0));
        uint64_t pa = 0;
        sw.as.translate(va, &pa);
        int r = 0;
        for (;;) {
            uint8_t b = 0;
            sw.as.read(va, &b, 1);
            if (b == v) break;
            if (!m_.at(node).cpu.wait_write(pa, 1, j.value("timeout_ns", uint64_t(10'000'000)))) {
                r = -1;
                break;
            }
        }
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_sleep(const step& s, unsigned, json&) {
        const json& j = s.j;
        wait(sc_time(double(j.value("ns", uint64_t(0))), SC_NS));
    }
    void call_alloc_pd(const step& s, unsigned node, json& out) {
        node_objs& o = objs_[node];
        ibv_context* ctx = ctx_[node];
        ibv_pd* pd = ibv_alloc_pd(ctx);
        const json r = created(s, node, pd, "pd");
        if (pd) o.pd[r] = pd;
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_reg_mr(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        unsigned access = 0;
        std::string why;
        if (j.contains("access")) trace::access_flags_of(j["access"], &access, &why);
        const uint64_t va = buf_addr(node, j);
        const uint64_t len =
            j.value("len", j.contains("buf") ? o.buf[j["buf"].get<std::string>()].second : 0);
        ibv_mr* mr = ibv_reg_mr(o.pd[j["pd"].get<std::string>()], va, len, int(access));
        json r;
        if (mr) {
            r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "mr");
            rec_.add_mr(node, mr, r);
            o.mr[r] = mr;
            out["lkey"] = mr->lkey;
            out["rkey"] = mr->rkey;
        } else {
            out["errno"] = errno;
        }
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_dereg_mr(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        std::string name = j["mr"];
        const int r = ibv_dereg_mr(o.mr[name]);
        if (r == 0) o.mr.erase(name);
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_create_cq(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_context* ctx = ctx_[node];
        ibv_cq* cq = ibv_create_cq(ctx, j.value("cqe", 64));
        const json r = created(s, node, cq, "cq");
        if (cq) o.cq[r] = cq;
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_create_srq(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_srq_init_attr a{};
        a.attr.max_wr = j.value("max_wr", 64u);
        a.attr.max_sge = j.value("max_sge", 1u);
        ibv_srq* srq = ibv_create_srq(o.pd[j["pd"].get<std::string>()], &a);
        const json r = created(s, node, srq, "srq");
        if (srq) o.srq[r] = srq;
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_modify_srq(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_srq_attr a{};
        a.srq_limit = j.value("srq_limit", 0u);
        const int r = ibv_modify_srq(o.srq[j["srq"].get<std::string>()], &a, IBV_SRQ_LIMIT);
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_create_qp(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_qp_init_attr a{};
        trace::qp_type_of(j["type"], &a.qp_type);
        a.send_cq = o.cq[j["send_cq"].get<std::string>()];
        a.recv_cq = o.cq[j["recv_cq"].get<std::string>()];
        if (j.contains("srq")) a.srq = o.srq[j["srq"].get<std::string>()];
        const json cap = j.value("cap", json::object());
        a.cap.max_send_wr = cap.value("max_send_wr", 64u);
        a.cap.max_recv_wr = cap.value("max_recv_wr", 64u);
        a.cap.max_send_sge = cap.value("max_send_sge", 1u);
        a.cap.max_recv_sge = cap.value("max_recv_sge", 1u);
        a.cap.max_inline_data = cap.value("max_inline_data", 0u);
        a.sq_sig_all = j.value("sq_sig_all", false) ? 1 : 0;
        ibv_qp* qp = ibv_create_qp(o.pd[j["pd"].get<std::string>()], &a);
        json r;
        if (qp) {
            r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "qp");
            rec_.add_qp(node, qp, r);
            o.qp[r] = qp;
            out["qp_num"] = qp->qp_num;
        } else {
            out["errno"] = errno;
        }
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_destroy_qp(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_qp* qp = o.qp[j["qp"].get<std::string>()];
        int r = 0;
        r = ibv_destroy_qp(qp);
        if (r == 0) o.qp.erase(j["qp"].get<std::string>());
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_modify_qp(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_qp* qp = o.qp[j["qp"].get<std::string>()];
        int r = 0;
        const json& a = j["attr"];
        ibv_qp_attr at{};
        int mask = 0;
        if (a.contains("qp_state")) {
            trace::qp_state_of(a["qp_state"], &at.qp_state);
            mask |= IBV_QP_STATE;
        }
        auto num = [&](const char* k, auto& field, int bit) {
            if (a.contains(k)) {
                field = a[k].get<std::remove_reference_t<decltype(field)>>();
                mask |= bit;
            }
        };
        num("pkey_index", at.pkey_index, IBV_QP_PKEY_INDEX);
        num("port_num", at.port_num, IBV_QP_PORT);
        num("qkey", at.qkey, IBV_QP_QKEY);
        num("rq_psn", at.rq_psn, IBV_QP_RQ_PSN);
        num("sq_psn", at.sq_psn, IBV_QP_SQ_PSN);
        num("max_rd_atomic", at.max_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC);
        num("max_dest_rd_atomic", at.max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC);
        num("min_rnr_timer", at.min_rnr_timer, IBV_QP_MIN_RNR_TIMER);
        num("timeout", at.timeout, IBV_QP_TIMEOUT);
        num("retry_cnt", at.retry_cnt, IBV_QP_RETRY_CNT);
        num("rnr_retry", at.rnr_retry, IBV_QP_RNR_RETRY);
        num("dest_qp_num", at.dest_qp_num, IBV_QP_DEST_QPN);
        if (a.contains("qp_access_flags")) {
            std::string why;
            trace::access_flags_of(a["qp_access_flags"], &at.qp_access_flags, &why);
            mask |= IBV_QP_ACCESS_FLAGS;
        }
        if (a.contains("path_mtu")) {
            const unsigned mtu = a["path_mtu"];
            at.path_mtu = ibv_mtu(mtu >= 256 ? __builtin_ctz(mtu) - 7 : 0);
            mask |= IBV_QP_PATH_MTU;
        }
        if (a.contains("dest_qp")) {
            at.dest_qp_num = qp_num_of(a["dest_qp"], node);
            mask |= IBV_QP_DEST_QPN;
        }
        if (a.contains("dlid") || a.contains("dest_node")) {
            at.ah_attr.dlid =
                a.contains("dlid") ? a["dlid"].get<uint16_t>() : lid_of(a["dest_node"].get<unsigned>());
            at.ah_attr.sl = a.value("sl", uint8_t(0));
            at.ah_attr.port_num = 1;
            mask |= IBV_QP_AV;
        }
        r = ibv_modify_qp(qp, &at, mask);
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_create_ah(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_ah_attr a{};
        a.dlid = j.contains("dlid") ? j["dlid"].get<uint16_t>() : lid_of(j.value("dest_node", 0u));
        a.sl = j.value("sl", uint8_t(0));
        a.port_num = 1;
        if (j.contains("dgid")) {  // a global route (multicast needs it)
            a.is_global = 1;
            trace::gid_of(j["dgid"], &a.grh.dgid);
            a.grh.hop_limit = j.value("hop_limit", uint8_t(1));
        }
        ibv_ah* ah = ibv_create_ah(o.pd[j["pd"].get<std::string>()], &a);
        const json r = created(s, node, ah, "ah");
        if (ah) o.ah[r] = ah;
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_attach_mcast(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_gid g{};
        trace::gid_of(j["gid"], &g);
        const int r = ibv_attach_mcast(o.qp[j["qp"].get<std::string>()], &g, j["lid"].get<uint16_t>());
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_post_send(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        const json& list = j["wr"];
        std::vector<ibv_send_wr> wrs(list.size());
        std::vector<std::vector<ibv_sge>> sg(list.size());
        for (size_t k = 0; k < list.size(); ++k) {
            const json& w = list[k];
            ibv_send_wr& wr = wrs[k];
            wr.wr_id = w["wr_id"];
            trace::wr_opcode_of(w["opcode"], &wr.opcode);
            std::string why;
            if (w.contains("flags")) trace::send_flags_of(w["flags"], &wr.send_flags, &why);
            sg[k] = sges(node, w.value("sg", json::array()));
            wr.sg_list = sg[k].empty() ? nullptr : sg[k].data();
            wr.num_sge = int(sg[k].size());
            wr.imm_data = w.value("imm", 0u);
            wr.invalidate_rkey = w.value("invalidate_rkey", 0u);
            if (w.contains("remote")) {
                const json& r = w["remote"];
                uint64_t addr = r.value("addr", uint64_t(0));
                uint32_t rkey = r.value("rkey", 0u);
                if (r.contains("mr")) {
                    std::string name;
                    ibv_mr* mr = find(objs_of(r["mr"], node, &name).mr, name);
                    addr = (mr ? mr->addr : 0) + r.value("offset", uint64_t(0));
                    rkey = mr ? mr->rkey : 0;
                }
                wr.wr.rdma.remote_addr = wr.wr.atomic.remote_addr = addr;
                wr.wr.rdma.rkey = wr.wr.atomic.rkey = rkey;
            }
            wr.wr.atomic.compare_add = w.value("compare_add", uint64_t(0));
            wr.wr.atomic.swap = w.value("swap", uint64_t(0));
            if (w.contains("ah")) {
                wr.wr.ud.ah = o.ah[w["ah"].get<std::string>()];
                wr.wr.ud.remote_qpn =
                    w.contains("remote_qp") ? qp_num_of(w["remote_qp"], node) : w.value("remote_qpn", 0u);
                wr.wr.ud.remote_qkey = w.value("remote_qkey", 0u);
            }
            wr.next = k + 1 < list.size() ? &wrs[k + 1] : nullptr;
            producers_[{node, j["qp"].get<std::string>(), wr.wr_id}] = s.line;
        }
        ibv_send_wr* bad = nullptr;
        const int r = ibv_post_send(o.qp[j["qp"].get<std::string>()], wrs.data(), &bad);
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_post_recv(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        const std::string call = j["call"];
        node_objs& o = objs_[node];
        const json& list = j["wr"];
        std::vector<ibv_recv_wr> wrs(list.size());
        std::vector<std::vector<ibv_sge>> sg(list.size());
        const std::string owner =
            call == "post_recv" ? j["qp"].get<std::string>() : j["srq"].get<std::string>();
        for (size_t k = 0; k < list.size(); ++k) {
            wrs[k].wr_id = list[k]["wr_id"];
            sg[k] = sges(node, list[k].value("sg", json::array()));
            wrs[k].sg_list = sg[k].empty() ? nullptr : sg[k].data();
            wrs[k].num_sge = int(sg[k].size());
            wrs[k].next = k + 1 < list.size() ? &wrs[k + 1] : nullptr;
            producers_[{node, owner, wrs[k].wr_id}] = s.line;
        }
        ibv_recv_wr* bad = nullptr;
        const int r = call == "post_recv" ? ibv_post_recv(o.qp[owner], wrs.data(), &bad)
                                          : ibv_post_srq_recv(o.srq[owner], wrs.data(), &bad);
        expect(s, "ret", r);
        out["ret"] = r;
    }
    void call_poll_cq(const step& s, unsigned node, json& out) {
        const json& j = s.j;
        node_objs& o = objs_[node];
        ibv_cq* cq = o.cq[j["cq"].get<std::string>()];
        const size_t want = j.contains("wc") ? j["wc"].size() : j["count"].get<size_t>();
        const uint64_t timeout = j.value("timeout_ns", uint64_t(10'000'000));
        json got = json::array();
        std::vector<ibv_wc> wcs(std::max<size_t>(want, 1));
        while (got.size() < want) {
            const int n = ibv_poll_cq(cq, int(want - got.size()), wcs.data());
            if (n < 0) break;
            for (int k = 0; k < n; ++k) got.push_back(rec_.wc(node, wcs[k]));
            if (got.size() < want && n == 0 && ibv_wait_cq(cq, timeout) != 0) break;
        }
        completions += got.size();
        if (j.contains("wc")) {
            const json& exp = j["wc"];
            for (size_t k = 0; k < exp.size(); ++k) {
                ++compared;
                if (k >= got.size()) {
                    diff("completion", s.line,
                         "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() +
                             ": completion " + std::to_string(k + 1) + " of " + std::to_string(exp.size()) +
                             " never came (timed out after " + std::to_string(timeout) + " ns); expected " +
                             exp[k].dump());
                    break;
                }
                if (exp[k] != got[k]) {
                    std::string field;
                    for (auto& kv : exp[k].items())
                        if (got[k].value(kv.key(), json()) != kv.value()) {
                            field = kv.key() + " expected " + kv.value().dump() + ", got " +
                                    got[k].value(kv.key(), json()).dump();
                            break;
                        }
                    if (field.empty()) field = "expected " + exp[k].dump() + ", got " + got[k].dump();
                    std::string ctx_line;
                    const std::string owner = exp[k].value("qp", std::string());
                    auto it = producers_.find({node, owner, exp[k].value("wr_id", uint64_t(0))});
                    if (it == producers_.end())  // an SRQ's WR: any owner on the node
                        for (auto p = producers_.begin(); p != producers_.end(); ++p)
                            if (std::get<0>(p->first) == node &&
                                std::get<2>(p->first) == exp[k].value("wr_id", uint64_t(0)))
                                it = p;
                    if (it != producers_.end())
                        ctx_line = "\n  produced by " + t_.path + ":" + std::to_string(it->second) + ": " +
                                   line_text(it->second);
                    diff("completion", s.line,
                         "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() +
                             ": completion " + std::to_string(k + 1) + " of " + std::to_string(exp.size()) +
                             ": " + field + "\n  expected " + exp[k].dump() + "\n  got      " +
                             got[k].dump() + ctx_line);
                    break;
                }
            }
            if (tolerance_ >= 0 && j.contains("t_done_ps")) {
                const double e = j["t_done_ps"].get<double>(), a = double(sc_time_stamp().value());
                if (std::abs(a - e) > tolerance_ * e) {
                    char b[200];
                    std::snprintf(b, sizeof b,
                                  "poll_cq node %u: the completions were there at %.3f ns, recorded at "
                                  "%.3f ns (tolerance %g%%)",
                                  node, a / 1000.0, e / 1000.0, tolerance_ * 100.0);
                    diff("time", s.line, b);
                }
            }
        } else if (got.size() < want) {
            diff("completion", s.line,
                 "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() + ": " +
                     std::to_string(got.size()) + " of " + std::to_string(want) + " completions within " +
                     std::to_string(timeout) + " ns");
        }
        out.erase("count");
        out.erase("t_done_ps");
        out["ret"] = got.size();
        out["wc"] = got;
        out["t_done_ps"] = uint64_t(sc_time_stamp().value());
    }

    std::string line_text(size_t line) const {
        for (const step& s : t_.steps)
            if (s.line == line) {
                std::string d = s.j.dump();
                return d.size() > 240 ? d.substr(0, 240) + "..." : d;
            }
        return "";
    }

    /// Opens node i's device (as an application does first; not a call of the trace) and
    /// installs the handler that records its asynchronous events.
    bool open(unsigned i) {
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

    void run() {
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

    void advance() {
        // --timing recorded: the recorded times order the calls; a call only needs the calls
        // before it to have started (so the nodes overlap as they did).
        while (prefix_ < state_.size() &&
               (state_[prefix_] == 2 || (state_[prefix_] == 1 && (waits_[prefix_] || recorded_))))
            ++prefix_;
        progress_.notify(SC_ZERO_TIME);
    }

    void node_main(unsigned n) {
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

    std::vector<size_t> order_;                  // global position -> index into t_.steps
    std::vector<uint8_t> state_;                 // by global position: 0 waiting, 1 started, 2 returned
    std::vector<bool> waits_;                    // by global position: a call that waits
    std::vector<std::vector<size_t>> per_node_;  // global positions of each node's calls
    size_t prefix_ = 0;                          // every call before this position may be passed
    sc_event progress_;
    unsigned running_ = 0;

    machine& m_;
    const trace_file& t_;
    trace::recorder& rec_;
    bool recorded_;
    double tolerance_;
    std::vector<std::unique_ptr<host_software>> sw_;
    std::vector<ibv_context*> ctx_;
    std::vector<node_objs> objs_;
    std::vector<std::vector<json>> events_;
    std::map<std::tuple<unsigned, std::string, uint64_t>, size_t> producers_;

public:
    host_software& sw(unsigned i) { return *sw_[i]; }
};

}  // namespace

int replay_main(int argc, const char* const* argv) {
    namespace po = boost::program_options;
    po::options_description desc("Usage: hcasim replay FILE [options]\nOptions", 110);
    // clang-format off
    desc.add_options()
        ("help,h", "print this help and exit")
        ("timing", po::value<std::string>()->default_value("asap"),
         "asap: each node's calls in trace order, a call once the calls before it (any node) have returned, or "
         "for waiting calls (poll_cq, wait_byte, sleep) started; recorded: each call at its recorded time, once "
         "the calls before it have started")
        ("time-tolerance", po::value<std::string>(), "also compare the times completions were polled: P% of the recorded time")
        ("update", "run the trace and write its outcome back into FILE (freezes a hand-written trace, or refreshes "
                   "one after an intended change)")
        ("record", po::value<std::string>(), "write the replay's own trace (calls and outcomes) to this file")
        ("pcap", po::value<std::string>(), "also write one wire capture per cable into this directory (docs/traces.md)")
        ("timeline", po::value<std::string>(), "also write the replay's timeline (Chrome trace-event JSON) to this file")
        ("timeline-window", po::value<std::string>(), "--timeline keeps only START_NS:END_NS of simulated time")
        ("timeline-nodes", po::value<std::string>(), "--timeline keeps only these nodes, e.g. 0,1")
        ("config,c", po::value<std::vector<std::string>>()->composing(), "load an INI file after the trace's configuration")
        ("set,s", po::value<std::vector<std::string>>()->composing(), "override one key after the trace's configuration")
        ("file", po::value<std::string>(), "the trace");
    // clang-format on
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc - 1, const_cast<char**>(argv + 1))
                      .options(desc)
                      .positional(pos)
                      .run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << " (see hcasim replay --help)\n";
        return 2;
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return 0;
    }
    if (!vm.count("file")) {
        std::cerr << "hcasim: error: replay: which trace? (hcasim replay FILE)\n";
        return 2;
    }
    const std::string path = vm["file"].as<std::string>();
    const std::string timing = vm["timing"].as<std::string>();
    if (timing != "recorded" && timing != "asap") {
        std::cerr << "hcasim: error: replay: --timing: expected recorded|asap, got '" << timing << "'\n";
        return 2;
    }
    double tolerance = -1;
    if (vm.count("time-tolerance")) {
        std::string t = vm["time-tolerance"].as<std::string>();
        const bool pct = !t.empty() && t.back() == '%';
        if (pct) t.pop_back();
        char* end = nullptr;
        tolerance = std::strtod(t.c_str(), &end);
        if (t.empty() || *end || tolerance < 0) {
            std::cerr << "hcasim: error: replay: --time-tolerance: expected a percentage like 5%, got '"
                      << vm["time-tolerance"].as<std::string>() << "'\n";
            return 2;
        }
        tolerance /= 100.0;
    }
    const bool update = vm.count("update") > 0;
    std::string record = vm.count("record") ? vm["record"].as<std::string>() : "";
    if (update && !record.empty()) {
        std::cerr << "hcasim: error: replay: --update writes FILE itself; it takes no --record\n";
        return 2;
    }

    trace_file t;
    std::unique_ptr<machine> m;
    std::unique_ptr<trace::recorder> rec;
    std::unique_ptr<replayer> app;
    std::unique_ptr<timeline> tl;
    // --update writes FILE whole once the replay has run to its end, or leaves it as it was.
    const std::string out_path = update ? path : vm.count("record") ? record : "/dev/null";
    const char* const out_what = update ? "--update" : "--record";
    timeline_filter timeline_only;
    try {  // the outputs, before anything runs
        auto given = [&vm](const char* option) {
            return vm.count(option) ? &vm[option].as<std::string>() : nullptr;
        };
        timeline_only =
            timeline_filter::parse(given("timeline-window"), given("timeline-nodes"), vm.count("timeline"));
        output_file::check(out_path, out_what);
        if (vm.count("timeline")) output_file::check(vm["timeline"].as<std::string>(), "--timeline");
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << "\n";
        return 2;
    }
    try {
        t = load(path);
        broker& b = broker::instance();
        if (t.header.contains("config"))
            for (auto& kv : t.header["config"].items())
                b.set(kv.key(), kv.value().is_string() ? kv.value().get<std::string>() : kv.value().dump(),
                      path + ":header");
        if (!t.header.contains("config") || !t.header["config"].contains("fabric.nodes"))
            b.set("fabric.nodes", std::to_string(t.nodes), path + ":header");
        if (vm.count("config"))
            for (const auto& f : vm["config"].as<std::vector<std::string>>()) b.load_ini(f);
        if (vm.count("set"))
            for (const auto& s : vm["set"].as<std::vector<std::string>>()) b.set_override(s);
        m = std::make_unique<machine>();
        if (m->size() != t.nodes)
            throw trace_error(path + ": the trace has " + std::to_string(t.nodes) +
                              " nodes, its configuration makes " + std::to_string(m->size()));
        rec = std::make_unique<trace::recorder>(out_path, t.nodes, out_what);
        if (vm.count("pcap")) m->capture_to(vm["pcap"].as<std::string>());
        if (vm.count("timeline")) {
            timeline_only.check_nodes(t.nodes);
            tl = std::make_unique<timeline>(vm["timeline"].as<std::string>(), timeline_only);
            for (unsigned i = 0; i < t.nodes; ++i) {
                m->at(i).adapter.set_timeline(tl.get(), i);
                m->at(i).pcie.set_timeline(tl.get(), i);
            }
        }
        app = std::make_unique<replayer>("replay", *m, t, *rec, timing == "recorded", tolerance);
        b.check_unused();
        // The trace's own header, with the effective configuration of the machine.
        rec->header(trace::effective_config(), t.header.value("seed", uint64_t(1)),
                    t.header.value("workload", std::string("replay")));
        for (const std::string& c : t.comments) rec->comment(c);
    } catch (const trace_error& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: " << path << ": " << e.what() << "\n";
        return 2;
    }
    // A recorded trace (or one frozen with --update) ends with its end record; a hand-written one
    // may hold only calls.
    const bool has_outcome = t.end.is_object();
    app->compare_events_ = has_outcome;

    sc_start();
    try {
        // The timeline and the captures show what was simulated, whether the replay failed or not.
        if (tl) tl->close();
        if (!m->captures().empty()) {
            if (const std::string e = m->close_captures(); !e.empty()) throw config_error(e);
            std::printf(" pcap:");
            for (const auto& c : m->captures())
                std::printf(" %s (%llu packets)", c->path().c_str(),
                            static_cast<unsigned long long>(c->packets()));
            std::printf("\n");
        }
        if (!app->failure.empty()) {
            std::cerr << "hcasim: run failed: replay: " << app->failure << "\n";
            return 1;
        }
        if (update && !app->finished) {
            std::cerr << "hcasim: run failed: replay: " << path
                      << ": the replay stopped before its last call (" << path << " is left as it was)\n";
            return 1;
        }
        // The end: memory digests of every buffer, the counters; the trace is written.
        trace::json counters = trace::json::object();
        for (const counter* c : stats_registry::instance().counters())
            if (c->value()) counters[c->key()] = c->value();
        const trace::json memory = rec->end(
            [&](unsigned node, uint64_t va, uint8_t* dst, uint64_t n) { app->sw(node).as.read(va, dst, n); },
            counters);
        app->compare_end(memory);
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << "\n";
        return 2;
    }
    if (!app->finished && app->diffs.empty())
        app->diffs.push_back({"run", path + ": the replay stopped before its last call"});
    std::printf("replay: %s: %zu calls, %zu completions, %zu events recorded", path.c_str(), app->calls_run,
                app->completions, t.events.size());
    if (update) {
        std::printf("; outcome written to %s (--update)\n", path.c_str());
        return 0;
    }
    if (app->diffs.empty()) {
        std::printf(has_outcome ? "; %zu outcomes compared: equal to the recording\n"
                                : "; no recorded outcome to compare (--update records one)\n",
                    app->compared);
        return 0;
    }
    std::printf("\n");
    std::map<std::string, size_t> by_kind;
    for (const divergence& d : app->diffs) ++by_kind[d.kind];
    std::cout << "first divergence: " << app->diffs.front().text << "\n";
    std::cout << "replay: " << app->diffs.size() << " divergence" << (app->diffs.size() == 1 ? "" : "s")
              << " (";
    bool first = true;
    for (auto& kv : by_kind) {
        std::cout << (first ? "" : ", ") << kv.first << ": " << kv.second;
        first = false;
    }
    std::cout << ")\n";
    return 1;
}

}  // namespace hcasim
