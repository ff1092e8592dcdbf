// Run report output; see report.h.
#include "report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim {

namespace {

const char* const rule =
    "---------------------------------------------------------------------------------------";

void print_header(std::ostream& os, bool latency) {
    char line[256];
    if (latency)
        std::snprintf(line, sizeof line, " %-10s %-12s %-14s %-14s %-17s %-14s %s", "#bytes", "#iterations",
                      "t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "99% percentile[usec]");
    else
        std::snprintf(line, sizeof line, " %-10s %-12s %-20s %s", "#bytes", "#iterations", "BW average[Gb/sec]",
                      "MsgRate[Mpps]");
    os << line << "\n";
}

void print_row(std::ostream& os, const size_result& s) {
    char line[256];
    if (s.latency)
        std::snprintf(line, sizeof line, " %-10llu %-12llu %-14.2f %-14.2f %-17.2f %-14.2f %.2f",
                      static_cast<unsigned long long>(s.size_bytes), static_cast<unsigned long long>(s.iters),
                      s.lat_min_us, s.lat_max_us, s.lat_typical_us, s.lat_avg_us, s.lat_p99_us);
    else
        std::snprintf(line, sizeof line, " %-10llu %-12llu %-20.2f %.6f",
                      static_cast<unsigned long long>(s.size_bytes), static_cast<unsigned long long>(s.iters),
                      s.bw_gbps, s.msg_rate_mpps);
    os << line << "\n";
}

}  // namespace

void print_table(std::ostream& os, const run_report& r) {
    os << rule << "\n";
    os << " hcasim " << (r.workload.empty() ? "demo" : r.workload) << " (seed " << r.seed << ")\n";
    os << rule << "\n";
    bool have_header = false, header_latency = false;
    for (const auto& s : r.results) {
        if (!have_header || header_latency != s.latency) {
            print_header(os, s.latency);
            have_header = true;
            header_latency = s.latency;
        }
        print_row(os, s);
    }
    os << rule << "\n";
    os << " simulated time " << r.sim_time_ns << " ns, " << r.wire_packets << " wire packets\n";
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
        os << " multicast: " << sent << " datagrams sent to " << receivers << " receivers, " << delivered << " of "
           << sent * receivers << " delivered, " << lost << " lost\n";
        os << " lost per receiver:";
        for (size_t k = 0; k < per_receiver.size(); ++k)
            os << (k ? ", " : " ") << "node" << k + 1 << " " << per_receiver[k];
        os << "\n";
    } else if (lost)
        os << " datagrams lost: " << lost << " of " << sent
           << " sent (UD does not retransmit; counters ud_dropped, link.dropped)\n";
    // srq_bw, ud_srq_bw: what the shared receive queue did, one line per size.
    for (const auto& s : r.results)
        if (s.srq)
            os << " SRQ " << s.size_bytes << " B: " << s.srq_qps << " QPs, " << s.srq_wqes_taken << " WQEs taken, "
               << s.srq_rnr_naks << " RNR NAKs sent, empty " << s.srq_empty << " times\n";
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
        os << " verify: data not applicable (the DMA read data is discarded), " << bad << " transfer errors\n";
    os << rule << "\n";
}

void write_json(const std::string& path, const run_report& r) { write_json(path, std::vector<run_report>{r}); }

void write_json(const std::string& path, const std::vector<run_report>& reports) {
    using json = nlohmann::ordered_json;
    if (reports.empty()) throw config_error("no results to write to '" + path + "'");
    const run_report& r = reports.front();
    json j;
    j["workload"] = reports.size() == 1 ? r.workload : std::string("demo");
    j["seed"] = r.seed;
    json results = json::array();
    for (const run_report& rep : reports)
    for (const auto& s : rep.results) {
        json e;
        if (reports.size() > 1) e["workload"] = rep.workload;
        e["size_bytes"] = s.size_bytes;
        e["iters"] = s.iters;
        if (s.latency) {
            e["lat_typical_us"] = s.lat_typical_us;
            e["lat_min_us"] = s.lat_min_us;
            e["lat_p99_us"] = s.lat_p99_us;
            e["lat_max_us"] = s.lat_max_us;
            e["lat_avg_us"] = s.lat_avg_us;
        } else {
            e["bw_gbps"] = s.bw_gbps;
            e["msg_rate_mpps"] = s.msg_rate_mpps;
        }
        if (s.datagrams)
            e["datagrams_lost"] = s.datagrams_lost;
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
        if (s.verified) {
            json v = {{"bytes_checked", s.bytes_checked},
                      {"mismatches", s.mismatches},
                      {"bad_completions", s.bad_completions}};
            if (!s.verify_data) v["applicable"] = false;
            e["verify"] = std::move(v);
        }
        results.push_back(std::move(e));
    }
    j["results"] = std::move(results);
    uint64_t sim_ns = 0, packets = 0;
    for (const run_report& rep : reports) {
        sim_ns += rep.sim_time_ns;
        packets += rep.wire_packets;
    }
    j["sim"] = {{"sim_time_ns", sim_ns},
                {"wall_s", r.wall_s},
                {"wire_packets", packets},
                {"wire_packets_per_wall_s", r.wall_s > 0 ? static_cast<double>(packets) / r.wall_s : 0.0}};
    json counters = json::object();
    json config = json::object();
    if (!r.counters.empty() || !r.config.empty()) {
        for (const auto& [k, v] : r.counters) counters[k] = v;
        for (const auto& [k, v] : r.config) config[k] = v;
    } else {
        for (const counter* c : stats_registry::instance().counters()) counters[c->key()] = c->value();
        for (const param_base* p : broker::instance().params()) config[p->key()] = p->str();
    }
    j["counters"] = std::move(counters);
    j["config"] = std::move(config);

    std::ofstream out(path);
    if (!out) throw config_error("cannot write stats JSON '" + path + "'");
    out << j.dump(2) << "\n";
    if (!out) throw config_error("cannot write stats JSON '" + path + "'");
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
    return s;
}

}  // namespace hcasim
