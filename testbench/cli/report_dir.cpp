// The --report directory (see report.h's write_report): results.csv, results.json, flows.csv
// and the gnuplot script with the PNG plots drawn from it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <utility>
#include <nlohmann/json.hpp>

#include "model/core/output_file.h"
#include "model/core/param.h"
#include "testbench/cli/report.h"

namespace hcasim {

namespace {

using ojson = nlohmann::ordered_json;

std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
}

/// Writes one gnuplot datablock.
void datablock(std::ostream& gp, const std::string& name, const std::vector<std::vector<double>>& rows) {
    gp << "$" << name << " << EOD\n";
    for (const auto& r : rows) {
        for (size_t k = 0; k < r.size(); ++k) gp << (k ? " " : "") << num(r[k]);
        gp << "\n";
    }
    gp << "EOD\n";
}

/// The one quote character gnuplot strings may not contain here.
std::string quoted(std::string s) {
    std::replace(s.begin(), s.end(), '\'', '"');
    return "'" + s + "'";
}

/// Runs `gnuplot plots.gp` in `dir`; "" or why it failed. What gnuplot says on stderr (its
/// warnings) goes into `said`.
std::string run_gnuplot(const std::string& dir, std::string& said) {
    const std::string err = dir + "/gnuplot.err";
    const pid_t pid = fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        if (chdir(dir.c_str()) != 0) _exit(126);
        const int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        const int errfd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (errfd >= 0) dup2(errfd, STDERR_FILENO);
        execlp("gnuplot", "gnuplot", "plots.gp", static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return "waitpid failed";
    std::ifstream f(err);
    said.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return "gnuplot not found (install Debian's gnuplot-nox)";
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        // gnuplot echoes the failing command, then says what is wrong: '"plots.gp" line N: ...'.
        std::string why, line;
        std::istringstream lines(said);
        while (why.empty() && std::getline(lines, line))
            if (line.rfind("\"plots.gp\" line ", 0) == 0) why = line;
        return "gnuplot failed on plots.gp (exit status " + std::to_string(WEXITSTATUS(status)) + ")" +
               (why.empty() ? "" : ": " + why);
    }
    return "";
}

/// A PNG that ends with its IEND chunk (gnuplot did not stop half-way).
bool whole_png(const std::string& path) {
    static const unsigned char iend[12] = {0, 0, 0, 0, 'I', 'E', 'N', 'D', 0xAE, 0x42, 0x60, 0x82};
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    if (!f || f.tellg() < std::streamoff(8 + sizeof iend)) return false;
    char tail[sizeof iend];
    f.seekg(-std::streamoff(sizeof iend), std::ios::end);
    return f.read(tail, sizeof tail) && std::memcmp(tail, iend, sizeof iend) == 0;
}

/// The plots drawn by gnuplot in a directory of their own inside the report's (removed at the
/// end), so that a plot replaces its old copy only when it is whole.
class plot_dir {
public:
    /// Runs `script`, which draws `pngs` (none: nothing to do), in a new directory in `dir`;
    /// `warning`: gnuplot is missing or failed. Throws config_error when a plot is not whole
    /// (a write error).
    plot_dir(const std::string& dir, const std::string& script, const std::vector<std::string>& pngs,
             std::string& warning)
        : dir_(dir) {
        if (pngs.empty()) return;
        std::string tmp = dir + "/.plots.XXXXXX";
        if (!mkdtemp(tmp.data()))
            throw config_error("--report: cannot write in '" + dir + "': " + std::strerror(errno));
        tmp_ = tmp;
        try {
            output_file gp(tmp_ + "/plots.gp", "--report");
            gp.write(script);
            gp.commit();
            std::string said;
            warning = run_gnuplot(tmp_, said);
            if (!warning.empty()) return;
            // The plots were drawn; what gnuplot warned about is passed on (plots.gp's line).
            std::istringstream lines(said);
            for (std::string line; std::getline(lines, line);)
                if (line.find_first_not_of(" \t") != std::string::npos)
                    std::cerr << "hcasim: warning: --report: gnuplot: " << line << "\n";
            for (const std::string& png : pngs)
                if (!whole_png(tmp_ + "/" + png))
                    throw config_error("--report: cannot write '" + dir + "/" + png +
                                       "': gnuplot did not write it whole (is the disk full?)");
        } catch (...) {
            remove();
            throw;
        }
    }
    ~plot_dir() { remove(); }
    /// Moves a drawn plot into the report's directory (over its old copy).
    void move(const std::string& png) const {
        if (std::rename((tmp_ + "/" + png).c_str(), (dir_ + "/" + png).c_str()) != 0)
            throw config_error("--report: cannot write '" + dir_ + "/" + png + "': " + std::strerror(errno));
    }

private:
    void remove() const {
        std::error_code ec;
        if (!tmp_.empty()) std::filesystem::remove_all(tmp_, ec);
    }
    std::string dir_, tmp_;
};

/// One point of a series: x and up to three values (bandwidth: Gb/s, Mpps; latency: typical,
/// min, p99; flows: Gb/s, source and destination node).
struct point {
    double x, a, b, c;
};
struct series {
    std::string label;
    std::vector<point> pts;
};
/// Per series label, each unit's utilisation by message size.
using util_series =
    std::pair<std::string, std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>>;

/// A latency series' figures by size beyond typical, min and p99: the breakdown of its traced
/// iteration (JSON breakdown_us) and its distribution (lat_cdf_us).
struct lat_detail {
    std::string label;
    bool round_trip = false;          ///< read_lat, atomic_lat: the breakdown is of the round trip
    std::vector<std::string> stages;  ///< the breakdown's stages, in the JSON's order
    std::vector<std::pair<double, std::vector<double>>> breakdown;  ///< size, us per stage
    std::vector<std::pair<double, std::vector<double>>> cdf;        ///< size, us per quantile
};

/// What the report shows: the CSV, and the plots' series keyed in first-appearance order.
struct report_data {
    std::vector<series> bw, lat, by_qps, by_threads;
    std::vector<util_series> util;
    std::vector<lat_detail> lat_details;
    std::vector<unsigned> qps_seen, threads_seen;
    std::ostringstream csv;
    std::ostringstream flows_csv;  ///< many-node runs: one row per flow (empty: none ran)
    std::vector<series> flows;     ///< per (run, size): x flow number, a its Gb/s, b source, c destination
};

/// A configuration value as text (a string, or an object whose "value" is one).
std::string config_value(const ojson& config, const std::string& key) {
    const auto it = config.find(key);
    if (it == config.end()) return "";
    const ojson& v = it->is_object() ? it->value("value", ojson()) : *it;
    return v.is_string() ? v.get<std::string>() : v.is_null() ? "" : v.dump();
}

/// What a run's plots are of, in parts a title or legend joins: the presets and --set
/// overrides of its command line (when it records one) or its label, node0's link and PCIe (and any node's
/// that differ), the fabric's size.
std::vector<std::string> run_context(const ojson& run) {
    std::vector<std::string> parts, sets;
    std::string presets;
    const auto rb = run.find("run");
    const ojson cmd =
        rb != run.end() && rb->is_object() ? rb->value("command_line", ojson::array()) : ojson();
    auto add = [&](const std::string& option, const std::string& v) {
        if (option == "--config" || option == "-c")
            presets += (presets.empty() ? "" : "+") + std::filesystem::path(v).stem().string();
        else if (option == "--set" || option == "-s")
            sets.push_back(v);
    };
    // Without a command line (a report's runs), the run's label names them: the --config names
    // and --set overrides, space-separated ("hdr-cx6 cpu.cores=4"; "default": none).
    const std::string label = run.value("label", std::string());
    if (!cmd.is_array() && !label.empty() && label != "default") {
        std::istringstream words(label);
        for (std::string w; words >> w;) add(w.find('=') == std::string::npos ? "--config" : "--set", w);
    }
    if (cmd.is_array())
        for (size_t k = 0; k < cmd.size(); ++k) {
            if (!cmd[k].is_string()) continue;
            const std::string a = cmd[k].get<std::string>();
            if (const size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos)
                add(a.substr(0, eq), a.substr(eq + 1));  // --set=KEY=VALUE
            else if (k + 1 < cmd.size() && cmd[k + 1].is_string())
                add(a, cmd[k + 1].get<std::string>());
        }
    if (!presets.empty()) parts.push_back(presets);
    const auto cit = run.find("config");
    const ojson config = cit != run.end() && cit->is_object() ? *cit : ojson::object();
    auto hardware = [&](const std::string& node) {
        std::string speed = config_value(config, node + ".link.speed");
        std::transform(speed.begin(), speed.end(), speed.begin(), ::toupper);
        const std::string width = config_value(config, node + ".link.width"),
                          gen = config_value(config, node + ".pcie.generation"),
                          lanes = config_value(config, node + ".pcie.lanes");
        std::vector<std::string> hw;
        if (!speed.empty()) hw.push_back(speed + (width.empty() ? "" : " " + width + "x"));
        if (!gen.empty()) hw.push_back("PCIe Gen" + gen + (lanes.empty() ? "" : " x" + lanes));
        return hw;
    };
    const std::vector<std::string> hw0 = hardware("node0");
    parts.insert(parts.end(), hw0.begin(), hw0.end());
    const std::string nodes = config_value(config, "fabric.nodes");
    for (unsigned n = 1; !nodes.empty() && n < std::strtoul(nodes.c_str(), nullptr, 10); ++n) {
        const std::string node = "node" + std::to_string(n);
        for (const std::string& h : hardware(node))
            if (std::find(hw0.begin(), hw0.end(), h) == hw0.end()) parts.push_back(node + " " + h);
    }
    if (!nodes.empty() && nodes != "2") {
        const std::string topology = config_value(config, "fabric.topology");
        parts.push_back(nodes + " nodes" + (topology.empty() || topology == "auto" ? "" : " " + topology));
    }
    for (const std::string& kv : sets) parts.push_back(kv);
    return parts;
}

/// What a title says of a run beyond its setup (run_context) but a legend does not: the seed and
/// the iterations (when every row ran the same number).
std::vector<std::string> run_extras(const ojson& run) {
    std::vector<std::string> parts;
    if (run.contains("seed")) parts.push_back("seed " + run["seed"].dump());
    uint64_t iters = 0;
    bool same = true;
    if (run.contains("results") && run["results"].is_array())
        for (const ojson& r : run["results"]) {
            const uint64_t i = r.value("iters", uint64_t(0));
            same &= iters == 0 || i == iters;
            iters = i;
        }
    if (same && iters) parts.push_back(std::to_string(iters) + " iters");
    return parts;
}

/// A sweep point's values (run "point": {"key": value, ...}) but its size and QPs, which the
/// plots show already: "pcie.lanes=8".
std::string point_text(const ojson& run) {
    const auto it = run.find("point");
    if (it == run.end()) return "";
    if (it->is_string()) return it->get<std::string>();
    std::string s;
    if (it->is_object())
        for (const auto& [k, v] : it->items()) {
            if (k == "size" || k == "qps" || k == "threads") continue;
            s += (s.empty() ? "" : ", ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
        }
    return s;
}

/// The runs' context: the parts every run shares (the plots' titles) and, per run, what tells it
/// from the others in a legend (its sweep point, else the parts the others do not share).
struct report_context {
    std::string common;
    std::vector<std::string> per_run;
};
report_context context_of(const ojson& runs) {
    std::vector<std::vector<std::string>> parts, extras;
    for (const ojson& run : runs) {
        parts.push_back(run_context(run));
        extras.push_back(run_extras(run));
    }
    report_context c;
    auto shared = [](const std::vector<std::vector<std::string>>& all, const std::string& p) {
        for (const auto& q : all)
            if (std::find(q.begin(), q.end(), p) == q.end()) return false;
        return true;
    };
    for (const auto* all : {&parts, &extras})
        if (!all->empty())
            for (const std::string& p : all->front())
                if (shared(*all, p)) c.common += (c.common.empty() ? "" : ", ") + p;
    for (size_t k = 0; k < parts.size(); ++k) {
        std::string own = point_text(runs[k]);
        if (own.empty())
            for (const std::string& p : parts[k])
                if (!shared(parts, p)) own += (own.empty() ? "" : ", ") + p;
        c.per_run.push_back(own);
    }
    return c;
}

/// A label for a series: "write_bw, 16 QPs", with the run's threads and what tells it apart.
std::string series_label(const std::string& workload, unsigned qps, unsigned threads,
                         const std::string& own) {
    return workload + ", " + std::to_string(qps) + (qps == 1 ? " QP" : " QPs") +
           (threads > 1 ? ", " + std::to_string(threads) + " threads" : "") + (own.empty() ? "" : ", " + own);
}

/// A message size as the command line writes it: 512, 4K, 1M.
std::string size_text(double x) {
    const auto s = static_cast<uint64_t>(std::llround(x));
    if (s >= (1u << 20) && s % (1u << 20) == 0) return std::to_string(s >> 20) + "M";
    if (s >= 1024 && s % 1024 == 0) return std::to_string(s >> 10) + "K";
    return std::to_string(s);
}

/// A message size in words: "64 B", "4 KiB", "1 MiB".
std::string bytes_text(double x) {
    const std::string t = size_text(x);
    return t.back() == 'K' || t.back() == 'M' ? t.substr(0, t.size() - 1) + " " + t.back() + "iB" : t + " B";
}

/// Many-node rows: each flow's throughput into the flows CSV and a series of the flows plot.
void collect_flows(const std::string& workload, unsigned qps, const std::string& own, const ojson& r,
                   report_data& d) {
    if (d.flows_csv.tellp() == 0)
        d.flows_csv << "workload,qps,size_bytes,flow,src,dst,victim,messages,lost,gbps\n";
    series s{workload + ", " + bytes_text(r.at("size_bytes").get<double>()) + ", " + std::to_string(qps) +
                 (qps == 1 ? " QP" : " QPs") + " per pair" + (own.empty() ? "" : ", " + own),
             {}};
    const ojson& flows = r.at("fabric").at("flows");
    for (size_t k = 0; k < flows.size(); ++k) {
        const ojson& f = flows[k];
        d.flows_csv << workload << "," << qps << "," << r.at("size_bytes").get<uint64_t>() << "," << k << ","
                    << f.at("src").get<int>() << "," << f.at("dst").get<int>() << ","
                    << (f.value("victim", false) ? 1 : 0) << "," << f.at("messages").get<uint64_t>() << ","
                    << f.at("lost").get<uint64_t>() << "," << num(f.at("gbps").get<double>()) << "\n";
        s.pts.push_back({double(k), f.at("gbps").get<double>(), double(f.at("src").get<int>()),
                         double(f.at("dst").get<int>())});
    }
    if (!s.pts.empty()) d.flows.push_back(std::move(s));
}

/// A latency row's breakdown and distribution, into its series' lat_detail.
void collect_lat_detail(const std::string& label, const std::string& workload, const ojson& r,
                        report_data& d) {
    const bool has_breakdown =
        r.contains("breakdown_us") && r["breakdown_us"].is_object() && !r["breakdown_us"].empty();
    const bool has_cdf = r.contains("lat_cdf_us") && r["lat_cdf_us"].size() == lat_cdf_quantiles().size();
    if (!has_breakdown && !has_cdf) return;
    auto it = std::find_if(d.lat_details.begin(), d.lat_details.end(),
                           [&](const lat_detail& l) { return l.label == label; });
    if (it == d.lat_details.end()) {
        d.lat_details.push_back({label, workload == "read_lat" || workload == "atomic_lat", {}, {}, {}});
        it = d.lat_details.end() - 1;
    }
    const double size = r.at("size_bytes").get<double>();
    if (has_breakdown) {
        const ojson& b = r["breakdown_us"];
        if (it->stages.empty())
            for (const auto& [stage, us] : b.items()) it->stages.push_back(stage);
        std::vector<double> us;
        for (const std::string& stage : it->stages) us.push_back(b.value(stage, 0.0));
        it->breakdown.push_back({size, us});
    }
    if (has_cdf) it->cdf.push_back({size, r["lat_cdf_us"].get<std::vector<double>>()});
}

/// A CSV field, quoted (RFC 4180) when it holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

/// The swept keys of a sweep's runs (their "point"), in --sweep order; none for other runs.
std::vector<std::string> swept_keys(const ojson& runs) {
    std::vector<std::string> keys;
    if (!runs.empty() && runs[0].contains("point"))
        for (const auto& [k, v] : runs[0]["point"].items()) keys.push_back(k);
    return keys;
}

/// The CSV's last columns of a run's rows: its label (the --config names and --set overrides)
/// and its value of each swept configuration key (qps and threads have columns of their own).
std::string csv_tail(const ojson& run, const std::vector<std::string>& keys) {
    std::string t = "," + csv_field(run.value("label", std::string("default")));
    for (const std::string& k : keys)
        if (k != "qps" && k != "threads") t += "," + csv_field(run.at("point").value(k, std::string()));
    return t;
}

/// One row per (run, result): the CSV line and the points of the plots' series.
void collect(const ojson& runs, const report_context& ctx, report_data& d) {
    std::vector<series>&bw = d.bw, &lat = d.lat, &by_qps = d.by_qps, &by_threads = d.by_threads;
    std::vector<util_series>& util = d.util;
    std::vector<unsigned>& qps_seen = d.qps_seen;
    std::ostringstream& csv = d.csv;
    auto find = [](std::vector<series>& v, const std::string& label) -> series& {
        for (auto& s : v)
            if (s.label == label) return s;
        v.push_back({label, {}});
        return v.back();
    };
    const std::vector<std::string> keys = swept_keys(runs);
    csv << "workload,qps,size_bytes,iters,bw_gbps,msg_rate_mpps,lat_typical_us,lat_min_us,lat_p99_us,lat_avg_"
           "us,"
           "lat_max_us,threads,label";
    for (const std::string& k : keys)
        if (k != "qps" && k != "threads") csv << "," << csv_field(k);
    csv << "\n";
    size_t run_index = 0;
    for (const ojson& run : runs) {
        const std::string& own = ctx.per_run[run_index++];
        const unsigned qps = run.value("qps", 1u), threads = run.value("threads", 1u);
        if (std::find(qps_seen.begin(), qps_seen.end(), qps) == qps_seen.end()) qps_seen.push_back(qps);
        if (std::find(d.threads_seen.begin(), d.threads_seen.end(), threads) == d.threads_seen.end())
            d.threads_seen.push_back(threads);
        const std::string run_workload = run.value("workload", std::string("demo"));
        const std::string tail = csv_tail(run, keys);
        for (const ojson& r : run.at("results")) {
            const std::string w = r.value("workload", run_workload);
            const double size = r.at("size_bytes").get<double>();
            const bool latency = r.contains("lat_typical_us");
            const std::string label = series_label(w, qps, threads, own);
            csv << w << "," << qps << "," << r.at("size_bytes").get<uint64_t>() << ","
                << r.at("iters").get<uint64_t>();
            if (latency) {
                csv << ",,," << num(r["lat_typical_us"]) << "," << num(r["lat_min_us"]) << ","
                    << num(r["lat_p99_us"]) << "," << num(r["lat_avg_us"]) << "," << num(r["lat_max_us"])
                    << "," << threads << tail << "\n";
                find(lat, label)
                    .pts.push_back({size, r["lat_typical_us"].get<double>(), r["lat_min_us"].get<double>(),
                                    r["lat_p99_us"].get<double>()});
                collect_lat_detail(label, w, r, d);
                continue;
            }
            if (r.contains("fabric")) collect_flows(w, qps, own, r, d);
            const double gbps = r.at("bw_gbps").get<double>(), mpps = r.at("msg_rate_mpps").get<double>();
            csv << "," << num(gbps) << "," << num(mpps) << ",,,,,," << threads << tail << "\n";
            find(bw, label).pts.push_back({size, gbps, mpps, 0});
            const std::string by_size = w + ", " + bytes_text(size) + (own.empty() ? "" : ", " + own);
            find(by_qps, by_size).pts.push_back({double(qps), gbps, mpps, 0});
            find(by_threads, by_size).pts.push_back({double(threads), gbps, mpps, 0});
            if (r.contains("util")) {
                auto it =
                    std::find_if(util.begin(), util.end(), [&](const auto& u) { return u.first == label; });
                if (it == util.end()) {
                    util.push_back({label, {}});
                    it = util.end() - 1;
                }
                for (const auto& [unit, frac] : r["util"].items()) {
                    auto u = std::find_if(it->second.begin(), it->second.end(),
                                          [&](const auto& e) { return e.first == unit; });
                    if (u == it->second.end()) {
                        it->second.push_back({unit, {}});
                        u = it->second.end() - 1;
                    }
                    u->second.push_back({size, frac.get<double>()});
                }
            }
        }
    }
}

/// A gnuplot string in double quotes: "\n" starts a second line.
std::string dquoted(const std::string& s) {
    std::string q = "\"";
    for (char c : s) {
        if (c == '\n')
            q += "\\n";
        else {
            if (c == '"' || c == '\\') q += '\\';
            q += c;
        }
    }
    return q + "\"";
}

/// The line styles: linetype 1-10 ten distinct colours, solid lines and filled markers; 11-20
/// the same colours dashed with open markers; 21-30 dotted with line markers (+, x, *). A plot's
/// k-th line takes linetype k, so up to 30 lines differ in colour, dash or marker.
constexpr int style_colours = 10, style_count = 30;
std::string palette() {
    static const char* colour[style_colours] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                                "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
    static const int filled[6] = {7, 5, 9, 11, 13, 15}, open[6] = {6, 4, 8, 10, 12, 14}, line[3] = {1, 2, 3};
    std::ostringstream gp;
    for (int k = 0; k < style_count; ++k) {
        const int c = k % style_colours, v = k / style_colours;
        const int pt = v == 0 ? filled[c % 6] : v == 1 ? open[c % 6] : line[c % 3];
        gp << "set linetype " << k + 1 << " lc rgb '" << colour[c] << "' lw 1.5 pt " << pt << " dt "
           << (v == 0   ? "1"
               : v == 1 ? "2"
                        : "3")
           << "\n";
    }
    gp << "set linetype cycle " << style_count << "\n";
    return gp.str();
}

/// Tics of a log axis over [lo, hi]: 1, 1.5, 2, 3, 5 and 7 times the powers of ten labelled (over
/// more than 2.5 decades 1, 2 and 5 only), the other integer multiples minor.
std::string log_tics(double lo, double hi) {
    const int first = int(std::floor(std::log10(lo))), last = int(std::ceil(std::log10(hi)));
    auto tics = [&](const std::vector<double>& major, int& labelled) {
        std::string t;
        labelled = 0;
        for (int e = first; e <= last; ++e)
            for (double m : {1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0}) {
                const bool is_major = std::find(major.begin(), major.end(), m) != major.end();
                const double v = m * std::pow(10.0, e);
                if ((m == 1.5 && !is_major) || v < lo || v > hi) continue;
                labelled += is_major;
                t += (t.empty() ? "" : ", ") +
                     (is_major ? "'" + num(v) + "' " + num(v) : "'' " + num(v) + " 1");
            }
        return "(" + t + ")";
    };
    int labelled = 0;
    const std::string coarse = tics({1, 2, 5}, labelled);
    return labelled >= 4 && hi / lo > std::pow(10.0, 2.5) ? coarse : tics({1, 1.5, 2, 3, 5, 7}, labelled);
}

/// The gnuplot script: data inline, one PNG per figure that has data (their names in `pngs`).
/// Each figure starts from gnuplot's defaults (reset) and titles itself with what it shows and,
/// on a second line, the configuration it was run with.
class gnuplot_script {
public:
    std::ostringstream gp;
    std::vector<std::string> pngs;

    explicit gnuplot_script(std::string context) : context_(std::move(context)) {
        if (context_.size() > 140) context_ = context_.substr(0, 137) + "...";
        gp << "# hcasim --report: regenerate the plots with `gnuplot plots.gp` in this directory.\n"
           << palette();
    }
    /// Writes `rows` as the next datablock; returns its name.
    std::string block(const std::vector<std::vector<double>>& rows, const std::string& prefix = "d") {
        std::string name = prefix + std::to_string(block_++);
        datablock(gp, name, rows);
        return name;
    }
    /// Starts a figure: `png` at `w` x `h` pixels, titled `title` over the context line (no
    /// title: a multiplot titles itself).
    void figure(const std::string& png, const std::string& title, int w = 960, int h = 600) {
        gp << "reset\nset terminal pngcairo size " << w << "," << h << " noenhanced font ',11'\nset output "
           << quoted(png)
           << "\nset grid\nset key outside right top\nset style data linespoints\nset pointsize 0.8\n";
        if (!title.empty()) gp << "set title " << dquoted(titled(title)) << "\n";
        pngs.push_back(png);
    }
    /// `title` with the configuration on a second line.
    std::string titled(const std::string& title) const {
        return context_.empty() ? title : title + "\n" + context_;
    }
    /// A log2 x axis through `xs` (sizes, or counts), each labelled (every other one when
    /// there are many), the range a little wider than the data so that one value plots too.
    void log2_axis(std::vector<double> xs, const std::string& label, bool sizes) {
        std::sort(xs.begin(), xs.end());
        xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
        const size_t every = (xs.size() + 11) / 12;
        gp << "set logscale x 2\nset xlabel " << quoted(label) << "\nset xrange [" << num(xs.front() / 1.5)
           << ":" << num(xs.back() * 1.5) << "]\nset xtics (";
        for (size_t k = 0; k < xs.size(); ++k)
            gp << (k ? ", " : "") << "'"
               << (k % every ? ""
                   : sizes   ? size_text(xs[k])
                             : num(xs[k]))
               << "' " << num(xs[k]) << (k % every ? " 1" : "");
        gp << ")\n";
    }
    void size_axis(const std::vector<series>& ss) {
        std::vector<double> xs;
        for (const auto& s : ss)
            for (const auto& p : s.pts) xs.push_back(p.x);
        log2_axis(xs, "message size (bytes)", true);
    }
    /// A latency axis (`axis` x or y) over [lo, hi] us: log when it spans 4x or more, else linear
    /// from 0; the range explicit so that a single value plots too.
    void latency_axis(char axis, double lo, double hi) {
        if (lo > 0 && hi >= 4 * lo) {
            lo /= 1.2;
            hi *= 1.2;
            gp << "set logscale " << axis << " 10\nset " << axis << "range [" << num(lo) << ":" << num(hi)
               << "]\nset " << axis << "tics " << log_tics(lo, hi) << "\nset grid " << axis << "tics m"
               << axis << "tics\n";
        } else
            gp << "set " << axis << "range [0:" << num(hi > 0 ? hi * 1.15 : 1) << "]\n";
    }
    /// One value per series against size (column `col` of the series' points: 2 a, 3 b); one
    /// size only: a bar per series.
    void plot(const std::string& png, const std::string& what, const std::string& ylabel,
              const std::vector<series>& ss, int col) {
        if (const double size = single_size(ss)) {
            std::vector<bar> items;
            for (size_t k = 0; k < ss.size(); ++k)
                items.push_back({ss[k].label, col == 2 ? ss[k].pts[0].a : ss[k].pts[0].b, k % style_count});
            figure(png, what + ", " + bytes_text(size) + " messages");
            bars(items, ylabel, 0);
            return;
        }
        const std::vector<std::string> names = blocks(ss);
        figure(png, what + " vs message size");
        gp << "set ylabel " << quoted(ylabel) << "\nset yrange [0:*]\n";
        size_axis(ss);
        gp << "plot ";
        for (size_t k = 0; k < ss.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:" << col << " title "
               << quoted(ss[k].label);
        gp << "\n";
    }
    /// Typical with min .. p99 as the error bar, on a log axis when the sizes span a range of
    /// latencies (2 B .. 1 MiB: 0.7 .. 90 us); one size only: a bar per series.
    void latency(const std::vector<series>& lat) {
        if (const double size = single_size(lat)) {
            std::vector<bar> items;
            for (size_t k = 0; k < lat.size(); ++k)
                items.push_back({lat[k].label, lat[k].pts[0].a, k % style_count});
            figure("latency.png", "Latency (typical), " + bytes_text(size) + " messages");
            bars(items, "microseconds", 0);
            return;
        }
        const std::vector<std::string> names = blocks(lat);
        double lo = 0, hi = 0;
        for (const auto& s : lat)
            for (const auto& p : s.pts) {
                lo = lo == 0 ? p.b : std::min(lo, p.b);
                hi = std::max(hi, p.c);
            }
        figure("latency.png", "Latency vs message size (typical; bars min..p99)");
        gp << "set ylabel 'microseconds'\n";
        size_axis(lat);
        latency_axis('y', lo, hi);
        gp << "plot ";
        for (size_t k = 0; k < lat.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:2:3:4 with yerrorlines title "
               << quoted(lat[k].label);
        gp << "\n";
    }
    /// Message rate (and bandwidth on the right axis) against a count: qps.png against queue
    /// pairs, threads.png against application threads (`what` names the axis and the title).
    /// Each size one colour: Mpps solid, Gb/s dashed.
    void by_count(const std::string& png, const std::string& what, const std::vector<series>& by) {
        std::vector<std::string> names;
        std::vector<double> xs;
        for (const auto& s : by) {
            std::vector<std::vector<double>> rows;
            for (const auto& p : s.pts) {
                rows.push_back({p.x, p.a, p.b});
                xs.push_back(p.x);
            }
            names.push_back(block(rows));
        }
        figure(png, "Throughput vs " + what + " (Mpps solid, Gb/s dashed)");
        log2_axis(xs, what, false);
        gp << "set yrange [0:*]\nset ylabel 'Mpps'\nset y2label 'Gb/s'\nset ytics nomirror\nset y2tics\nset "
              "y2range [0:*]\nplot ";
        for (size_t k = 0; k < by.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:3 lt " << k % style_colours + 1
               << " title " << quoted(by[k].label + " Mpps") << ", $" << names[k]
               << " using 1:2 axes x1y2 lt " << k % style_colours + 1 + style_colours << " title "
               << quoted(by[k].label + " Gb/s");
        gp << "\n";
    }
    /// Each unit's busy share by size; a unit kind ("link tx", "PCIe up", ...) keeps its colour
    /// and marker on every node, nodes differ in dash and fill (node0 solid, node1 dashed).
    void utilisation(const std::vector<util_series>& util) {
        for (size_t u = 0; u < util.size(); ++u) {
            const auto& units = util[u].second;
            // "node0 link tx": node "node0", kind " link tx".
            std::vector<std::pair<std::string, std::string>> split;
            std::vector<std::string> kinds, nodes;
            for (const auto& [unit, pts] : units) {
                const size_t sp = unit.find(' ');
                split.push_back({unit.substr(0, sp), sp == std::string::npos ? "" : unit.substr(sp)});
                if (std::find(kinds.begin(), kinds.end(), split.back().second) == kinds.end())
                    kinds.push_back(split.back().second);
                if (std::find(nodes.begin(), nodes.end(), split.back().first) == nodes.end())
                    nodes.push_back(split.back().first);
            }
            const bool by_node = kinds.size() <= style_colours && nodes.size() <= 3;
            std::vector<size_t> lt;
            for (size_t k = 0; k < units.size(); ++k)
                lt.push_back(
                    by_node
                        ? size_t(std::find(nodes.begin(), nodes.end(), split[k].first) - nodes.begin()) *
                                  style_colours +
                              size_t(std::find(kinds.begin(), kinds.end(), split[k].second) - kinds.begin())
                        : k % style_count);
            const std::string png =
                util.size() == 1 ? "utilisation.png" : "utilisation_" + std::to_string(u) + ".png";
            const std::string title = "Unit utilisation (busy % of the measured interval), " + util[u].first;
            std::vector<double> xs;
            for (const auto& [unit, pts] : units)
                for (const auto& p : pts) xs.push_back(p.first);
            std::sort(xs.begin(), xs.end());
            if (!xs.empty() && xs.front() == xs.back()) {  // one size: a bar per unit
                std::vector<bar> items;
                for (size_t k = 0; k < units.size(); ++k)
                    items.push_back({units[k].first, 100.0 * units[k].second.front().second, lt[k]});
                figure(png, title + ", " + bytes_text(xs.front()) + " messages");
                bars(items, "busy %", 105, "%.1f");
                continue;
            }
            std::vector<std::string> names;
            for (const auto& [unit, pts] : units) {
                std::vector<std::vector<double>> rows;
                for (const auto& [x, y] : pts) rows.push_back({x, 100.0 * y});
                names.push_back(block(rows));
            }
            figure(png, title);
            gp << "set ylabel 'busy %'\n";
            log2_axis(xs, "message size (bytes)", true);
            gp << "set yrange [0:105]\nplot ";
            for (size_t k = 0; k < names.size(); ++k)
                gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:2 lt " << lt[k] + 1
                   << " title " << quoted(units[k].first);
            gp << "\n";
        }
    }
    /// Per latency series, where the latency goes at each size (the traced iteration's stages,
    /// stacked): on the left in microseconds for the sizes that take at most 4x the smallest's
    /// time (where the stages compare), on the right as shares of every size's latency, its
    /// total above the bar.
    void breakdown(const std::vector<lat_detail>& details) {
        std::vector<const lat_detail*> with;
        for (const auto& l : details)
            if (!l.breakdown.empty()) with.push_back(&l);
        for (size_t n = 0; n < with.size(); ++n) {
            const lat_detail& l = *with[n];
            const size_t stages = l.stages.size();
            double smallest = 0;
            std::vector<double> totals;
            for (const auto& [size, us] : l.breakdown) {
                double t = 0;
                for (double v : us) t += v;
                totals.push_back(t);
                smallest = smallest == 0 ? t : std::min(smallest, t);
            }
            // Two datablocks, the small sizes and every size; columns: size, the stages, total.
            std::vector<size_t> small_rows, all_rows;
            for (size_t k = 0; k < l.breakdown.size(); ++k) {
                all_rows.push_back(k);
                if (totals[k] <= 4 * smallest) small_rows.push_back(k);
            }
            std::string names[2];
            for (int pass = 0; pass < 2; ++pass) {
                names[pass] = "breakdown" + std::to_string(n) + (pass ? "" : "_small");
                gp << "$" << names[pass] << " << EOD\n";
                for (size_t k : pass ? all_rows : small_rows) {
                    gp << size_text(l.breakdown[k].first);
                    for (double v : l.breakdown[k].second) gp << " " << num(v);
                    gp << " " << num(totals[k]) << "\n";
                }
                gp << "EOD\n";
            }
            const std::string png =
                with.size() == 1 ? "breakdown.png" : "breakdown_" + std::to_string(n) + ".png";
            figure(png, "", 1200, 700);
            gp << "set multiplot title "
               << dquoted(titled("Latency breakdown, " + l.label + " (" +
                                 (l.round_trip ? "round trip" : "one way") + ", the traced iteration)"))
               << "\nset style data histograms\nset style histogram rowstacked\nset style fill solid 0.85 "
                  "border -1\nset boxwidth 0.75\nset grid noxtics ytics\nset xlabel 'message size (bytes)'\n"
                  "unset key\nset tmargin at screen 0.86\nset bmargin at screen 0.3\n";
            // Left: microseconds, the small sizes.
            gp << "set lmargin at screen 0.07\nset rmargin at screen 0.47\nset ylabel 'microseconds'\n"
                  "set title 'sizes up to 4x the smallest latency'\nset yrange [0:*]\nset xrange "
               << bar_range(small_rows.size()) << "\n"
               << (small_rows.size() > 10 ? "set xtics rotate by 90 right\n" : "") << "plot ";
            for (size_t s = 0; s < stages; ++s)
                gp << (s ? ", \\\n     " : "") << "$" << names[0] << " using " << s + 2
                   << (s ? "" : ":xtic(1)") << " lt " << s + 1;
            // Right: each stage's share of every size's latency, the total above the bar.
            gp << "\nset lmargin at screen 0.56\nset rmargin at screen 0.97\nset ylabel '% of the latency'\n"
                  "set title 'every size: share of its latency (total us above)'\nset yrange [0:115]\n"
                  "set ytics 0,20,100\nset xrange "
               << bar_range(all_rows.size()) << "\n"
               << (all_rows.size() > 10 ? "set xtics rotate by 90 right\n" : "set xtics norotate\n")
               << "plot ";
            for (size_t s = 0; s < stages; ++s)
                gp << (s ? ", \\\n     " : "") << "$" << names[1] << " using (100*$" << s + 2 << "/$"
                   << stages + 2 << ")" << (s ? "" : ":xtic(1)") << " lt " << s + 1;
            gp << ", \\\n     $" << names[1] << " using 0:(100):(sprintf('%.3g', $" << stages + 2
               << ")) with labels " << (all_rows.size() > 10 ? "rotate by 90 left" : "center")
               << " offset 0,0.5 font ',9'\n";
            // The stages' key across the bottom, in a plot of its own (the panels are too narrow).
            gp << "set lmargin at screen 0.05\nset rmargin at screen 0.95\nset tmargin at screen 0.17\n"
                  "set bmargin at screen 0.01\nunset border\nunset tics\nunset xlabel\nunset ylabel\nunset "
                  "title\nunset grid\nset xrange [0:1]\nset yrange [0:1]\nset key center center horizontal "
                  "maxcols 2 samplen 2\n";
            // gnuplot 5.4 asserts on a plot of keyentries alone: a line above the range comes first.
            gp << "plot 2 with lines notitle";
            for (size_t s = 0; s < stages; ++s)
                gp << ", \\\n     keyentry with boxes lt " << s + 1 << " title " << quoted(l.stages[s]);
            gp << "\nunset multiplot\n";
        }
    }
    /// Per latency series, the latency's distribution at each size (lat_cdf_us): the share of
    /// iterations that took at most x, on an axis that stretches the tail (0%, 90%, 99%, 99.9% and
    /// the slowest iteration equally apart: -log10(1 - quantile), the maximum at 4), where a
    /// simulation's few slow iterations are.
    void cdf(const std::vector<lat_detail>& details) {
        std::vector<const lat_detail*> with;
        for (const auto& l : details)
            if (!l.cdf.empty()) with.push_back(&l);
        const std::vector<quantile>& q = lat_cdf_quantiles();
        for (size_t n = 0; n < with.size(); ++n) {
            const lat_detail& l = *with[n];
            const std::string name = "cdf" + std::to_string(n);
            double lo = 0, hi = 0;
            gp << "$" << name
               << " << EOD\n# quantile, its height (-log10(1 - quantile); 4: the maximum), then "
                  "the latency (us) at";
            for (const auto& [size, us] : l.cdf) gp << " " << size_text(size);
            gp << " bytes\n";
            for (size_t k = 0; k < q.size(); ++k) {
                gp << num(q[k].value()) << " "
                   << num(q[k].num < q[k].den ? -std::log10(1 - q[k].value()) : 4);
                for (const auto& [size, us] : l.cdf) {
                    gp << " " << num(us[k]);
                    lo = lo == 0 ? us[k] : std::min(lo, us[k]);
                    hi = std::max(hi, us[k]);
                }
                gp << "\n";
            }
            gp << "EOD\n";
            figure(with.size() == 1 ? "latency_cdf.png" : "latency_cdf_" + std::to_string(n) + ".png",
                   "Latency distribution (CDF), " + l.label);
            gp << "set xlabel 'microseconds'\nset ylabel 'iterations at most x'\nset yrange [0:4.1]\nset "
                  "ytics "
                  "('0%%' 0, '50%%' 0.30103, '75%%' 0.60206, '90%%' 1, '99%%' 2, '99.9%%' 3, 'max' 4)\n"
                  "set key title 'bytes'\n";
            if (lo > 0 && hi >= 4 * lo)
                latency_axis('x', lo, hi);
            else {  // a narrow range: linear, around the data
                const double margin = hi > lo ? (hi - lo) * 0.05 : lo * 0.1;
                gp << "set xrange [" << num(lo - margin) << ":" << num(hi + margin) << "]\n";
            }
            gp << "plot ";
            for (size_t k = 0; k < l.cdf.size(); ++k)
                gp << (k ? ", \\\n     " : "") << "$" << name << " using " << k + 3 << ":2 with steps lt "
                   << k % style_count + 1 << " title " << quoted(size_text(l.cdf[k].first));
            gp << "\n";
        }
    }
    /// Many-node runs: a bar per flow (source>destination), each run's bars side by side.
    void flows(const std::vector<series>& fs) {
        const std::vector<std::string> names = blocks(fs);
        const series* widest = &fs.front();
        for (const auto& s : fs)
            if (s.pts.size() > widest->pts.size()) widest = &s;
        const size_t n = widest->pts.size(), every = (n + 31) / 32;
        const double width = 0.8 / double(fs.size());
        figure("flows.png", "Per-flow throughput (source>destination node; * a destination per message)");
        gp << "set key below\nset xlabel 'flow'\nset ylabel 'Gb/s'\nset yrange [0:*]\nset style fill solid "
              "0.6 border -1\n"
              "set boxwidth "
           << num(width) << "\nset grid noxtics ytics\nset xrange " << bar_range(n) << "\n"
           << (n > 16 ? "set xtics rotate by 90 right (" : "set xtics (");
        for (size_t k = 0; k < n; ++k) {
            const point& p = widest->pts[k];
            gp << (k ? ", " : "") << "'"
               << (k % every ? "" : num(p.b) + ">" + (p.c < 0 ? std::string("*") : num(p.c))) << "' " << k;
        }
        gp << ")\nplot ";
        for (size_t k = 0; k < fs.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using ($1+"
               << num((double(k) - (fs.size() - 1) / 2.0) * width) << "):2 with boxes lt " << k + 1
               << " title " << quoted(fs[k].label);
        gp << "\n";
    }

private:
    struct bar {
        std::string label;
        double value;
        size_t style;  ///< linetype - 1
    };
    /// The x range of `n` bars at 0 .. n - 1, as wide as three at least (a lone bar not a wall).
    static std::string bar_range(size_t n) {
        const double pad = n < 3 ? double(3 - n) / 2 : 0;
        return "[" + num(-0.6 - pad) + ":" + num(double(n) - 0.4 + pad) + "]";
    }
    /// The one size every series' points are at; 0: none or several.
    static double single_size(const std::vector<series>& ss) {
        double size = 0;
        for (const auto& s : ss)
            for (const auto& p : s.pts) {
                if (size != 0 && p.x != size) return 0;
                size = p.x;
            }
        return size;
    }
    /// A bar per item, its value above it (printf `format`), its label below (slanted when they
    /// would not fit side by side); `ymax` 0: a little above the largest value.
    void bars(const std::vector<bar>& items, const std::string& ylabel, double ymax,
              const char* format = "%.3g") {
        std::vector<std::vector<double>> rows;
        double top = 0;
        size_t longest = 0;  // label, in characters: slanted when they would not fit side by side
        for (const bar& b : items) longest = std::max(longest, b.label.size());
        for (size_t k = 0; k < items.size(); ++k) {
            rows.push_back({double(k), items[k].value, double(items[k].style + 1)});
            top = std::max(top, items[k].value);
        }
        const std::string name = block(rows);
        gp << "set ylabel " << quoted(ylabel) << "\nset yrange [0:"
           << num(ymax > 0  ? ymax
                  : top > 0 ? top * 1.15
                            : 1)
           << "]\nset xrange " << bar_range(items.size())
           << "\nset style fill solid 0.7 border -1\nset boxwidth 0.7\nset grid noxtics ytics\nunset key\n"
           << (items.size() * longest > 90 ? "set xtics rotate by 30 right (" : "set xtics (");
        for (size_t k = 0; k < items.size(); ++k) gp << (k ? ", " : "") << quoted(items[k].label) << " " << k;
        gp << ")\nplot $" << name << " using 1:2:3 with boxes lc variable, $" << name
           << " using 1:2:(sprintf('" << format << "', $2)) with labels offset 0,0.7\n";
    }
    /// One datablock per series of columns x, a, b, c.
    std::vector<std::string> blocks(const std::vector<series>& ss) {
        std::vector<std::string> names;
        for (const auto& s : ss) {
            std::vector<std::vector<double>> rows;
            for (const auto& p : s.pts) rows.push_back({p.x, p.a, p.b, p.c});
            names.push_back(block(rows));
        }
        return names;
    }
    std::string context_;
    int block_ = 0;
};

}  // namespace

std::vector<std::string> write_report(const std::string& dir, const ojson& runs, std::string& warning) {
    warning.clear();
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
        throw config_error("--report: cannot create directory '" + dir + "'" +
                           (ec ? ": " + ec.message() : ""));
    const report_context ctx = context_of(runs);
    report_data d;
    collect(runs, ctx, d);
    gnuplot_script script(ctx.common);
    if (!d.bw.empty()) {
        script.plot("bandwidth.png", "Bandwidth", "Gb/s", d.bw, 2);
        script.plot("msg_rate.png", "Message rate", "Mpps", d.bw, 3);
    }
    if (!d.lat.empty()) script.latency(d.lat);
    script.breakdown(d.lat_details);
    script.cdf(d.lat_details);
    // A thread sweep (whose QPs follow the thread count unless --qps fixes them) plots against
    // threads; runs that differ in QPs alone, against QPs.
    if (d.threads_seen.size() > 1 && !d.by_threads.empty())
        script.by_count("threads.png", "application threads", d.by_threads);
    else if (d.qps_seen.size() > 1 && !d.by_qps.empty())
        script.by_count("qps.png", "queue pairs", d.by_qps);
    script.utilisation(d.util);
    if (!d.flows.empty()) script.flows(d.flows);
    std::vector<std::string>& pngs = script.pngs;
    const std::string gp = script.gp.str();

    // Every file whole before any replaces its old copy; the plots are drawn aside first.
    output_file json_file(dir + "/results.json", "--report"), csv_file(dir + "/results.csv", "--report"),
        gp_file(dir + "/plots.gp", "--report");
    ojson results = ojson::object();
    if (const std::vector<std::string> keys = swept_keys(runs); !keys.empty()) results["sweep"] = keys;
    results["runs"] = runs;
    json_file.write(results.dump(2) + "\n");
    csv_file.write(d.csv.str());
    gp_file.write(gp);
    std::vector<output_file*> files = {&json_file, &csv_file, &gp_file};
    std::unique_ptr<output_file> flows_file;
    if (!d.flows.empty()) {
        flows_file = std::make_unique<output_file>(dir + "/flows.csv", "--report");
        flows_file->write(d.flows_csv.str());
        files.push_back(flows_file.get());
    }
    for (output_file* f : files) f->finish();
    const plot_dir plots(dir, gp, pngs, warning);
    if (!warning.empty()) pngs.clear();
    for (output_file* f : files) f->commit();
    for (const std::string& png : pngs) plots.move(png);
    // An earlier report's files this one did not write again (--replace: a stale plot) go.
    std::vector<std::string> written = {"results.json", "results.csv", "plots.gp"};
    if (flows_file) written.push_back("flows.csv");
    written.insert(written.end(), pngs.begin(), pngs.end());
    std::vector<std::filesystem::path> stale;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (report_file(name) && std::find(written.begin(), written.end(), name) == written.end())
            stale.push_back(it->path());
    }
    for (const auto& path : stale)
        if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
    return pngs;
}

bool report_file(const std::string& name) {
    const auto ends = [&name](const char* tail) {
        const std::string t = tail;
        return name.size() > t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0;
    };
    return name == "results.json" || name == "results.csv" || name == "flows.csv" || name == "plots.gp" ||
           (ends(".png") && name[0] != '.');
}

}  // namespace hcasim
