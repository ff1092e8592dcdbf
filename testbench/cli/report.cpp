// Run report output; see report.h.
#include "report.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <nlohmann/json.hpp>

#include "model/core/output_file.h"
#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim {

namespace {

/// The interval a bandwidth row's rate was measured over: its messages over its rate. The
/// streams time whole nanoseconds, so this recovers their interval exactly.
uint64_t stream_interval_ns(const size_result& s) {
    return s.msg_rate_mpps > 0 ? uint64_t(std::llround(double(s.messages) * 1000.0 / s.msg_rate_mpps)) : 0;
}

const char* const rule =
    "---------------------------------------------------------------------------------------";

void print_header(std::ostream& os, bool latency, bool msg_rate) {
    char line[256];
    if (msg_rate)
        std::snprintf(line, sizeof line, " %-10s %-12s %-16s %-20s %s", "#bytes", "#messages",
                      "MsgRate[Mpps]", "BW average[Gb/sec]", "interval[ns]");
    else if (latency)
        std::snprintf(line, sizeof line, " %-10s %-12s %-14s %-14s %-17s %-14s %s", "#bytes", "#iterations",
                      "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "99% percentile[usec]");
    else
        std::snprintf(line, sizeof line, " %-10s %-12s %-20s %-16s %s", "#bytes", "#iterations",
                      "BW average[Gb/sec]", "MsgRate[Mpps]", "#messages");  // iterations per QP
    os << line << "\n";
}

void print_row(std::ostream& os, const size_result& s, bool msg_rate) {
    char line[256];
    if (msg_rate)
        std::snprintf(line, sizeof line, " %-10llu %-12llu %-16.6f %-20.2f %llu",
                      static_cast<unsigned long long>(s.size_bytes),
                      static_cast<unsigned long long>(s.messages), s.msg_rate_mpps, s.bw_gbps,
                      static_cast<unsigned long long>(stream_interval_ns(s)));
    else if (s.latency)
        std::snprintf(line, sizeof line, " %-10llu %-12llu %-14.2f %-14.2f %-17.2f %-14.2f %.2f",
                      static_cast<unsigned long long>(s.size_bytes), static_cast<unsigned long long>(s.iters),
                      s.lat_min_us, s.lat_max_us, s.lat_typical_us, s.lat_avg_us, s.lat_p99_us);
    else
        std::snprintf(line, sizeof line, " %-10llu %-12llu %-20.2f %-16.6f %llu",
                      static_cast<unsigned long long>(s.size_bytes), static_cast<unsigned long long>(s.iters),
                      s.bw_gbps, s.msg_rate_mpps, static_cast<unsigned long long>(s.messages));
    os << line << "\n";
}

/// "name value, name value" (values as integers).
std::string counts(const std::vector<std::pair<std::string, uint64_t>>& v) {
    std::string s;
    for (const auto& [k, n] : v) s += (s.empty() ? "" : ", ") + k + " " + std::to_string(n);
    return s;
}

/// A node's name, or "any" for a flow whose messages each go their own way (dst -1).
std::string node_name(int n) { return n < 0 ? std::string("any") : "node" + std::to_string(n); }

/// The many-node figures of one row (incast, alltoall, ...).
void print_fabric(std::ostream& os, const std::string& workload, const size_result& s) {
    const fabric_result& f = *s.fabric;
    char line[256];
    double lo = 0, hi = 0;
    for (size_t k = 0; k < f.flows.size(); ++k) {
        lo = k ? std::min(lo, f.flows[k].gbps) : f.flows[k].gbps;
        hi = k ? std::max(hi, f.flows[k].gbps) : f.flows[k].gbps;
    }
    std::string tr = f.transport;
    for (char& c : tr) c = char(std::toupper(static_cast<unsigned char>(c)));
    os << " " << workload << ": " << f.flows.size() << (f.flows.size() == 1 ? " flow" : " flows") << " over "
       << tr << ", " << f.nodes << " nodes, " << f.messages << " of " << f.messages + f.lost
       << " messages completed, " << f.lost << " lost\n";
    std::snprintf(line, sizeof line,
                  " aggregate %.2f Gb/s (link %.2f Gb/s); per flow min %.2f, max %.2f Gb/s; Jain's fairness "
                  "index %.4f\n",
                  f.aggregate_gbps, f.link_gbps, lo, hi, f.jain);
    os << line;
    if (f.victim_gbps > 0) {
        std::snprintf(line, sizeof line, " victim flows (never to the hot node0): %.2f Gb/s together\n",
                      f.victim_gbps);
        os << line;
    }
    os << " received per node, Gb/s:";
    for (size_t n = 0; n < f.node_rx_gbps.size(); ++n) {
        std::snprintf(line, sizeof line, "%s node%zu %.2f", n ? "," : "", n, f.node_rx_gbps[n]);
        os << line;
    }
    std::snprintf(line, sizeof line, "\n message completion time, us: p50 %.3f, p99 %.3f, max %.3f\n",
                  f.mct_p50_us, f.mct_p99_us, f.mct_max_us);
    os << line;
    os << " packets dropped: " << f.dropped << " (" << counts(f.drops) << ")\n";
    os << " congestion tree (most PortXmitWait): "
       << (f.xmit_wait.empty() ? std::string("none (no port waited for credit)") : counts(f.xmit_wait))
       << "\n";
    os << " congestion control: "
       << (f.cc.empty() ? std::string("no congestion control counter in this model") : counts(f.cc)) << "\n";
    if (f.flows.size() > 64) {
        os << " per-flow throughput: " << f.flows.size() << " flows, see --stats-json\n";
        return;
    }
    os << " flow   src     dst     messages  Gb/s\n";
    for (size_t k = 0; k < f.flows.size(); ++k) {
        const flow_result& fl = f.flows[k];
        std::snprintf(line, sizeof line, " %-6zu %-7s %-7s %-9llu %.2f%s\n", k,
                      node_name(int(fl.src)).c_str(), node_name(fl.dst).c_str(),
                      static_cast<unsigned long long>(fl.messages), fl.gbps, fl.victim ? " (victim)" : "");
        os << line;
    }
}

double thread_messages(const thread_result& t) { return double(t.messages); }
double thread_mpps(const thread_result& t) { return t.msg_rate_mpps; }

/// --threads N > 1: one line per bandwidth row, the spread of the threads' own figures.
void print_threads(std::ostream& os, const size_result& s) {
    const spread m = thread_spread(s.threads, thread_messages), p = thread_spread(s.threads, thread_mpps);
    uint64_t sum = 0;
    for (const thread_result& t : s.threads) sum += t.messages;
    char line[256];
    std::snprintf(line, sizeof line,
                  " threads %llu B: %zu threads, messages %llu (per thread min %.0f, mean %.1f, max %.0f); "
                  "Mpps per thread min %.3f, mean %.3f, max %.3f\n",
                  static_cast<unsigned long long>(s.size_bytes), s.threads.size(),
                  static_cast<unsigned long long>(sum), m.min, m.mean, m.max, p.min, p.mean, p.max);
    os << line;
}

}  // namespace

spread thread_spread(const std::vector<thread_result>& threads, double (*field)(const thread_result&)) {
    spread s;
    for (size_t k = 0; k < threads.size(); ++k) {
        const double v = field(threads[k]);
        s.min = k ? std::min(s.min, v) : v;
        s.max = k ? std::max(s.max, v) : v;
        s.mean += v;
    }
    if (!threads.empty()) s.mean /= double(threads.size());
    return s;
}

void print_table(std::ostream& os, const run_report& r) {
    table_printer t(os);
    t.begin(r);
    for (const auto& s : r.results) t.row(r, s);
    t.end(r);
}

void table_printer::begin(const run_report& r) {
    if (r.op.empty()) title(r);  // msg_rate's title names the iterations: it waits for the first row
}

void table_printer::title(const run_report& r) {
    if (titled_) return;
    titled_ = true;
    os_ << rule << "\n";
    os_ << " hcasim " << (r.workload.empty() ? "demo" : r.workload) << " (seed " << r.seed << ")";
    if (!r.op.empty()) {
        os_ << ": " << r.op << " (as " << r.op_workload << "), " << r.qps << (r.qps == 1 ? " QP" : " QPs");
        if (!r.results.empty()) os_ << " x " << r.results.front().iters << " iterations";  // --iters: per QP
    }
    os_ << "\n" << rule << "\n";
}

void table_printer::row(const run_report& r, const size_result& s) {
    title(r);
    const bool msg_rate = !r.op.empty();
    if (!have_header_ || header_latency_ != s.latency) {
        print_header(os_, s.latency, msg_rate);
        have_header_ = true;
        header_latency_ = s.latency;
    }
    print_row(os_, s, msg_rate);
}

void table_printer::end(const run_report& r) {
    title(r);
    std::ostream& os = os_;
    os << rule << "\n";
    os << " simulated time " << r.sim_time_ns << " ns, " << r.wire_packets << " wire packets\n";
    for (const auto& s : r.results)
        if (s.fabric) print_fabric(os, r.workload, s);
    for (const auto& s : r.results)
        if (!s.threads.empty()) print_threads(os, s);
    // Datagrams that never arrived: one line, only if there were any (UD does not retransmit).
    uint64_t sent = 0, lost = 0, delivered = 0;
    unsigned receivers = 0;
    std::vector<uint64_t> per_receiver;
    for (const auto& s : r.results) {
        sent += s.datagrams_sent;
        lost += s.datagrams_lost;
        delivered += s.datagrams_delivered;
        receivers = std::max(receivers, s.receivers);
        per_receiver.resize(std::max(per_receiver.size(), s.lost_per_receiver.size()), 0);
        for (size_t k = 0; k < s.lost_per_receiver.size(); ++k) per_receiver[k] += s.lost_per_receiver[k];
    }
    if (receivers) {
        // mcast_bw: every receiver should take every datagram sent.
        os << " multicast: " << sent << " datagrams sent to " << receivers << " receivers, " << delivered
           << " of " << sent * receivers << " delivered, " << lost << " lost\n";
        os << " lost per receiver:";
        for (size_t k = 0; k < per_receiver.size(); ++k)
            os << (k ? ", " : " ") << "node" << k + 1 << " " << per_receiver[k];
        os << "\n";
    } else if (lost)
        os << " datagrams lost: " << lost << " of " << sent
           << " sent (UD does not retransmit; counters ud_dropped, link.dropped)\n";
    // Latency workloads: where the latency goes (the traced middle iteration); write_lat and
    // send_lat report half a round trip, read_lat and atomic_lat the whole one.
    const bool round_trip = r.workload == "read_lat" || r.workload == "atomic_lat";
    for (const auto& s : r.results)
        if (!s.breakdown.empty()) {
            double sum = 0;
            char line[96];
            os << " breakdown " << s.size_bytes << " B, " << (round_trip ? "round trip" : "one way")
               << ", us:";
            for (const auto& [stage, us] : s.breakdown) {
                std::snprintf(line, sizeof line, " %s %.3f;", stage.c_str(), us);
                os << line;
                sum += us;
            }
            std::snprintf(line, sizeof line, " sum %.3f", sum);
            os << line << "\n";
        }
    // srq_bw, ud_srq_bw: what the shared receive queue did, one line per size.
    for (const auto& s : r.results)
        if (s.srq)
            os << " SRQ " << s.size_bytes << " B: " << s.srq_qps << " QPs, " << s.srq_wqes_taken
               << " WQEs taken, " << s.srq_rnr_naks << " RNR NAKs sent, empty " << s.srq_empty << " times\n";
    // --verify: one summary line (the figures above do not depend on it).
    bool verified = false, data = false;
    uint64_t checked = 0, mismatches = 0, bad = 0;
    for (const auto& s : r.results) {
        verified |= s.verified;
        data |= s.verify_data;
        checked += s.bytes_checked;
        mismatches += s.mismatches;
        bad += s.bad_completions;
    }
    if (verified && data)
        os << " verify: " << checked << " bytes checked, " << mismatches << " mismatches, " << bad
           << " bad completions\n";
    else if (verified)
        os << " verify: data not applicable (the DMA read data is discarded), " << bad
           << " transfer errors\n";
    os << rule << "\n";
}

void write_json(const std::string& path, const run_report& r) {
    write_json(path, std::vector<run_report>{r});
}

void write_json(const std::string& path, const std::vector<run_report>& reports) {
    if (reports.empty()) throw config_error("no results to write to '" + path + "'");
    write_json_file(path, to_json(reports));
}

std::string run_date() {
    std::time_t t = std::time(nullptr);
    if (const char* e = std::getenv("SOURCE_DATE_EPOCH")) {
        const std::string s = e;
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(s.c_str(), &end, 10);
        if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE ||
            *end != '\0' || v > 253402300799LL)  // 9999-12-31T23:59:59Z
            throw config_error("SOURCE_DATE_EPOCH: '" + s +
                               "' is not a whole number of seconds since 1970-01-01 (UTC)");
        t = std::time_t(v);
    }
    std::tm utc{};
    gmtime_r(&t, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return buf;
}

nlohmann::ordered_json with_run(nlohmann::ordered_json stats, const std::vector<std::string>& command_line,
                                const std::string& date) {
    nlohmann::ordered_json j;
    j["run"] = {{"version", HCASIM_VERSION}, {"command_line", command_line}, {"date", date}};
    for (auto& [k, v] : stats.items()) j[k] = std::move(v);
    return j;
}

void write_json_file(const std::string& path, const nlohmann::ordered_json& j, const char* what) {
    output_file out(path, what);
    out.write(j.dump(2) + "\n");
    out.commit();
}

namespace {

/// A list of (name, count) as a JSON object.
nlohmann::ordered_json count_object(const std::vector<std::pair<std::string, uint64_t>>& v) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& [k, n] : v) o[k] = n;
    return o;
}

/// Fills a JSON object key by key as `o[key] = value` would (a repeated key keeps its first
/// place and takes the last value), without ordered_map's linear search per key: the counters
/// and parameters of a 1,024-node fabric (hundreds of thousands) took longer than the run.
class object_filler {
public:
    explicit object_filler(nlohmann::ordered_json& o) : m_(o.get_ref<nlohmann::ordered_json::object_t&>()) {}
    template <class V>
    void set(const std::string& key, V&& value) {
        const auto [it, fresh] = at_.emplace(key, m_.size());
        if (fresh)
            m_.emplace_back(key, std::forward<V>(value));
        else
            (m_.begin() + std::ptrdiff_t(it->second))->second = std::forward<V>(value);
    }

private:
    nlohmann::ordered_json::object_t& m_;
    std::unordered_map<std::string, size_t> at_;
};

/// A row's many-node figures (JSON "fabric").
nlohmann::ordered_json fabric_json(const fabric_result& f) {
    using json = nlohmann::ordered_json;
    json flows = json::array();
    for (const flow_result& fl : f.flows) {
        json e = {{"src", fl.src},   {"dst", fl.dst},     {"messages", fl.messages},
                  {"lost", fl.lost}, {"bytes", fl.bytes}, {"gbps", fl.gbps}};
        if (fl.victim) e["victim"] = true;
        flows.push_back(std::move(e));
    }
    return {{"transport", f.transport},
            {"nodes", f.nodes},
            {"messages", f.messages},
            {"lost", f.lost},
            {"aggregate_gbps", f.aggregate_gbps},
            {"victim_gbps", f.victim_gbps},
            {"jain", f.jain},
            {"link_gbps", f.link_gbps},
            {"node_rx_gbps", f.node_rx_gbps},
            {"mct_us", {{"p50", f.mct_p50_us}, {"p99", f.mct_p99_us}, {"max", f.mct_max_us}}},
            {"dropped", f.dropped},
            {"drops", count_object(f.drops)},
            {"port_xmit_wait", count_object(f.xmit_wait)},
            {"cc", count_object(f.cc)},
            {"flows", std::move(flows)}};
}

/// A row's per-thread figures (JSON "threads") and their spread ("thread_spread").
nlohmann::ordered_json threads_json(const std::vector<thread_result>& threads) {
    using json = nlohmann::ordered_json;
    json a = json::array();
    for (const thread_result& t : threads)
        a.push_back({{"thread", t.thread},
                     {"qps", t.qps},
                     {"messages", t.messages},
                     {"active_ns", t.active_ns},
                     {"msg_rate_mpps", t.msg_rate_mpps}});
    return a;
}

/// The spread of the threads' messages and message rates (JSON "thread_spread").
nlohmann::ordered_json spread_json(const std::vector<thread_result>& threads) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    for (const auto& [name, field] :
         {std::pair{"messages", &thread_messages}, std::pair{"msg_rate_mpps", &thread_mpps}}) {
        const spread s = thread_spread(threads, field);
        j[name] = {{"min", s.min}, {"mean", s.mean}, {"max", s.max}};
    }
    return j;
}

}  // namespace

nlohmann::ordered_json to_json(const std::vector<run_report>& reports) {
    using json = nlohmann::ordered_json;
    const run_report& r = reports.front();
    json j;
    j["workload"] = reports.size() == 1 ? r.workload : std::string("demo");
    j["seed"] = r.seed;
    j["qps"] = r.qps;
    if (r.threads > 1) j["threads"] = r.threads;
    if (!r.op.empty()) {
        j["op"] = r.op;
        j["bandwidth_workload"] = r.op_workload;
    }
    json results = json::array();
    for (const run_report& rep : reports)
        for (const auto& s : rep.results) {
            json e;
            if (reports.size() > 1) e["workload"] = rep.workload;
            e["size_bytes"] = s.size_bytes;
            e["iters"] = s.iters;
            if (!s.latency) e["messages"] = s.messages;  // over every QP (flow): iters x QPs
            if (s.latency) {
                e["lat_typical_us"] = s.lat_typical_us;
                e["lat_min_us"] = s.lat_min_us;
                e["lat_p99_us"] = s.lat_p99_us;
                e["lat_max_us"] = s.lat_max_us;
                e["lat_avg_us"] = s.lat_avg_us;
                if (!s.lat_cdf_us.empty()) e["lat_cdf_us"] = s.lat_cdf_us;
            } else {
                e["bw_gbps"] = s.bw_gbps;
                e["msg_rate_mpps"] = s.msg_rate_mpps;
                if (!r.op.empty()) e["interval_ns"] = stream_interval_ns(s);  // msg_rate: messages / rate
            }
            if (s.datagrams) e["datagrams_lost"] = s.datagrams_lost;
            if (s.receivers) {
                e["receivers"] = s.receivers;
                e["datagrams_delivered"] = s.datagrams_delivered;
                e["datagrams_lost_per_receiver"] = s.lost_per_receiver;
            }
            if (s.srq)
                e["srq"] = {{"qps", s.srq_qps},
                            {"wqes_taken", s.srq_wqes_taken},
                            {"rnr_naks_sent", s.srq_rnr_naks},
                            {"empty", s.srq_empty}};
            if (!s.breakdown.empty()) {
                json b = json::object();
                for (const auto& [stage, us] : s.breakdown) b[stage] = us;
                e["breakdown_us"] = std::move(b);
            }
            if (s.fabric) e["fabric"] = fabric_json(*s.fabric);
            if (!s.threads.empty()) {
                e["threads"] = threads_json(s.threads);
                e["thread_spread"] = spread_json(s.threads);
            }
            if (!s.util.empty()) {
                json u = json::object();
                for (const auto& [unit, frac] : s.util) u[unit] = frac;
                e["util"] = std::move(u);
            }
            if (s.verified) {
                json v = {{"bytes_checked", s.bytes_checked},
                          {"mismatches", s.mismatches},
                          {"bad_completions", s.bad_completions}};
                if (!s.verify_data) v["applicable"] = false;
                e["verify"] = std::move(v);
            }
            // What changed while this size was measured (its share of measured_counters).
            if (!s.counters.empty()) e["counters"] = count_object(s.counters);
            results.push_back(std::move(e));
        }
    j["results"] = std::move(results);
    uint64_t sim_ns = 0, packets = 0;
    double traffic_wall = 0;
    for (const run_report& rep : reports) {
        sim_ns += rep.sim_time_ns;
        packets += rep.wire_packets;
        traffic_wall += rep.traffic_wall_s;
    }
    j["sim"] = {{"sim_time_ns", sim_ns},
                {"wall_s", r.wall_s},
                {"traffic_wall_s", traffic_wall},
                {"wire_packets", packets},
                {"wire_packets_per_wall_s", r.wall_s > 0 ? static_cast<double>(packets) / r.wall_s : 0.0}};
    json counters = json::object();
    json config = json::object();
    object_filler cf(counters), pf(config);
    if (!r.counters.empty() || !r.config.empty()) {
        for (const auto& [k, v] : r.counters) cf.set(k, v);
        for (const auto& [k, v] : r.config) pf.set(k, v);
    } else {
        for (const counter* c : stats_registry::instance().counters()) cf.set(c->key(), c->value());
        for (const param_base* p : broker::instance().params()) pf.set(p->key(), p->str());
    }
    j["counters"] = std::move(counters);
    // Summed over the phases, as sim_time_ns and wire_packets are.
    std::vector<std::pair<std::string, uint64_t>> sums;
    std::unordered_map<std::string, size_t> at;
    for (const run_report& rep : reports)
        for (const auto& [k, v] : rep.measured_counters) {
            const auto [it, fresh] = at.emplace(k, sums.size());
            if (fresh)
                sums.emplace_back(k, v);
            else
                sums[it->second].second += v;
        }
    if (!sums.empty()) {
        json measured = json::object();
        object_filler mf(measured);
        for (auto& [k, v] : sums) mf.set(k, v);
        j["measured_counters"] = std::move(measured);
    }
    j["config"] = std::move(config);
    return j;
}

const std::vector<quantile>& lat_cdf_quantiles() {
    static const std::vector<quantile> q = [] {
        std::vector<quantile> v;
        for (unsigned k = 0; k <= 99; ++k) v.push_back({k, 100});
        v.push_back({999, 1000});
        v.push_back({1, 1});
        return v;
    }();
    return q;
}

size_result latency_stats(uint64_t size, const std::vector<double>& samples_us) {
    size_result s;
    s.size_bytes = size;
    s.iters = samples_us.size();
    s.latency = true;
    if (samples_us.empty()) return s;
    std::vector<double> v = samples_us;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    s.lat_min_us = v.front();
    s.lat_max_us = v.back();
    s.lat_typical_us = v[n / 2];  // perftest: median of the sorted deltas
    const auto rank = static_cast<std::size_t>(std::ceil(0.99 * static_cast<double>(n)));
    s.lat_p99_us = v[std::min(n, std::max<std::size_t>(rank, 1)) - 1];
    double sum = 0;
    for (double x : v) sum += x;  // sorted order: deterministic summation
    s.lat_avg_us = sum / static_cast<double>(n);
    for (const quantile& q : lat_cdf_quantiles()) {
        const uint64_t rank = (uint64_t(q.num) * n + q.den - 1) / q.den;  // ceil(q n), at least 1
        s.lat_cdf_us.push_back(v[std::max<uint64_t>(rank, 1) - 1]);
    }
    return s;
}

}  // namespace hcasim
