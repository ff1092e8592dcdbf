// The --report directory (see report.h's write_report): results.csv, results.json, flows.csv
// and the gnuplot script with the PNG plots drawn from it.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
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

/// A label for a series: "write_bw, 16 QPs".
std::string series_label(const std::string& workload, unsigned qps) {
    return workload + ", " + std::to_string(qps) + (qps == 1 ? " QP" : " QPs");
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

/// Runs `gnuplot plots.gp` in `dir`; "" or why it failed.
std::string run_gnuplot(const std::string& dir) {
    const pid_t pid = fork();
    if (pid < 0) return "fork failed";
    if (pid == 0) {
        if (chdir(dir.c_str()) != 0) _exit(126);
        const int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
        execlp("gnuplot", "gnuplot", "plots.gp", static_cast<char*>(nullptr));
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) return "waitpid failed";
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return "gnuplot not found (install Debian's gnuplot-nox)";
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return "gnuplot failed on plots.gp (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
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
            warning = run_gnuplot(tmp_);
            if (!warning.empty()) return;
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
/// min, p99).
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

/// What the report shows: the CSV, and the plots' series keyed in first-appearance order.
struct report_data {
    std::vector<series> bw, lat, by_qps, by_threads;
    std::vector<util_series> util;
    std::vector<unsigned> qps_seen, threads_seen;
    std::ostringstream csv;
    std::ostringstream flows_csv;  ///< many-node runs: one row per flow (empty: none ran)
    std::vector<series> flows;     ///< per (run, size): x flow number, a its Gb/s
};

/// Many-node rows: each flow's throughput into the flows CSV and a series of the flows plot.
void collect_flows(const std::string& workload, unsigned qps, const ojson& r, report_data& d) {
    if (d.flows_csv.tellp() == 0)
        d.flows_csv << "workload,qps,size_bytes,flow,src,dst,victim,messages,lost,gbps\n";
    series s{workload + ", " + std::to_string(r.at("size_bytes").get<uint64_t>()) + " B, " +
                 std::to_string(qps) + (qps == 1 ? " QP" : " QPs") + " per pair",
             {}};
    const ojson& flows = r.at("fabric").at("flows");
    for (size_t k = 0; k < flows.size(); ++k) {
        const ojson& f = flows[k];
        d.flows_csv << workload << "," << qps << "," << r.at("size_bytes").get<uint64_t>() << "," << k << ","
                    << f.at("src").get<int>() << "," << f.at("dst").get<int>() << ","
                    << (f.value("victim", false) ? 1 : 0) << "," << f.at("messages").get<uint64_t>() << ","
                    << f.at("lost").get<uint64_t>() << "," << num(f.at("gbps").get<double>()) << "\n";
        s.pts.push_back({double(k), f.at("gbps").get<double>(), 0, 0});
    }
    d.flows.push_back(std::move(s));
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
void collect(const ojson& runs, report_data& d) {
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
    for (const ojson& run : runs) {
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
            csv << w << "," << qps << "," << r.at("size_bytes").get<uint64_t>() << ","
                << r.at("iters").get<uint64_t>();
            if (latency) {
                csv << ",,," << num(r["lat_typical_us"]) << "," << num(r["lat_min_us"]) << ","
                    << num(r["lat_p99_us"]) << "," << num(r["lat_avg_us"]) << "," << num(r["lat_max_us"])
                    << "," << threads << tail << "\n";
                find(lat, series_label(w, qps))
                    .pts.push_back({size, r["lat_typical_us"].get<double>(), r["lat_min_us"].get<double>(),
                                    r["lat_p99_us"].get<double>()});
                continue;
            }
            if (r.contains("fabric")) collect_flows(w, qps, r, d);
            const double gbps = r.at("bw_gbps").get<double>(), mpps = r.at("msg_rate_mpps").get<double>();
            csv << "," << num(gbps) << "," << num(mpps) << ",,,,,," << threads << tail << "\n";
            find(bw, series_label(w, qps)).pts.push_back({size, gbps, mpps, 0});
            const std::string by_size = w + ", " + std::to_string(r.at("size_bytes").get<uint64_t>()) + " B";
            find(by_qps, by_size).pts.push_back({double(qps), gbps, mpps, 0});
            find(by_threads, by_size).pts.push_back({double(threads), gbps, mpps, 0});
            if (r.contains("util")) {
                const std::string label = series_label(w, qps);
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

/// The gnuplot script: data inline, one PNG per figure that has data (their names in `pngs`).
class gnuplot_script {
public:
    std::ostringstream gp;
    std::vector<std::string> pngs;

    gnuplot_script() {
        gp << "# hcasim --report: regenerate the plots with `gnuplot plots.gp` in this directory.\n"
              "set terminal pngcairo size 960,600 noenhanced font ',11'\n"
              "set grid\nset key outside right top\nset style data linespoints\nset pointsize 0.8\n";
    }
    void size_axis() {
        gp << "set logscale x 2\nset xlabel 'message size (bytes)'\n"
              "set format x '%.0b%B'\nunset logscale y\nset yrange [0:*]\n";
    }
    /// Writes `rows` as the next datablock; returns its name.
    std::string block(const std::vector<std::vector<double>>& rows) {
        std::string name = "d" + std::to_string(block_++);
        datablock(gp, name, rows);
        return name;
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
    void plot(const std::string& png, const std::string& title, const std::string& ylabel,
              const std::vector<series>& ss, int col, bool logx_size) {
        const std::vector<std::string> names = blocks(ss);
        gp << "set output " << quoted(png) << "\nset title " << quoted(title) << "\nset ylabel "
           << quoted(ylabel) << "\n";
        if (logx_size) size_axis();
        gp << "plot ";
        for (size_t k = 0; k < ss.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:" << col << " title "
               << quoted(ss[k].label);
        gp << "\n";
        pngs.push_back(png);
    }
    /// Typical with min .. p99 as the error bar.
    void latency(const std::vector<series>& lat) {
        const std::vector<std::string> names = blocks(lat);
        gp << "set output 'latency.png'\nset title 'Latency vs message size (simulated; typical, bars "
              "min..p99)'\n"
              "set ylabel 'microseconds'\n";
        size_axis();
        gp << "plot ";
        for (size_t k = 0; k < lat.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:2:3:4 with yerrorlines title "
               << quoted(lat[k].label);
        gp << "\n";
        pngs.push_back("latency.png");
    }
    /// Message rate (and bandwidth on the right axis) against a count: qps.png against queue
    /// pairs, threads.png against application threads (`what` names the axis and the title).
    void by_count(const std::string& png, const std::string& what, const std::vector<series>& by) {
        gp << "set logscale x 2\nset xlabel " << quoted(what) << "\nset format x '%g'\nset yrange [0:*]\n";
        std::vector<std::string> names;
        for (const auto& s : by) {
            std::vector<std::vector<double>> rows;
            for (const auto& p : s.pts) rows.push_back({p.x, p.a, p.b});
            names.push_back(block(rows));
        }
        gp << "set output " << quoted(png) << "\nset title "
           << quoted("Throughput vs " + what + " (simulated)")
           << "\nset ylabel 'Mpps'\nset y2label 'Gb/s'\nset ytics nomirror\nset y2tics\nset y2range "
              "[0:*]\nplot ";
        for (size_t k = 0; k < by.size(); ++k)
            gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:3 title "
               << quoted(by[k].label + " Mpps") << ", $" << names[k]
               << " using 1:2 axes x1y2 dashtype 2 title " << quoted(by[k].label + " Gb/s");
        gp << "\nunset y2label\nunset y2tics\nset ytics mirror\n";
        pngs.push_back(png);
    }
    void utilisation(const std::vector<util_series>& util) {
        for (size_t u = 0; u < util.size(); ++u) {
            std::string png = "utilisation_" + std::to_string(u) + ".png";
            if (util.size() == 1) png = "utilisation.png";
            std::vector<std::string> names;
            for (const auto& [unit, pts] : util[u].second) {
                std::vector<std::vector<double>> rows;
                for (const auto& [x, y] : pts) rows.push_back({x, 100.0 * y});
                names.push_back(block(rows));
            }
            gp << "set output " << quoted(png) << "\nset title "
               << quoted(
                      "Unit utilisation (busy % of the measured "
                      "interval), " +
                      util[u].first)
               << "\nset ylabel 'busy %'\n";
            size_axis();
            gp << "set yrange [0:105]\nplot ";
            for (size_t k = 0; k < names.size(); ++k)
                gp << (k ? ", \\\n     " : "") << "$" << names[k] << " using 1:2 title "
                   << quoted(util[u].second[k].first);
            gp << "\n";
            pngs.push_back(png);
        }
    }

private:
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
    report_data d;
    collect(runs, d);
    gnuplot_script script;
    if (!d.bw.empty()) {
        script.plot("bandwidth.png", "Bandwidth vs message size (simulated)", "Gb/s", d.bw, 2, true);
        script.plot("msg_rate.png", "Message rate vs message size (simulated)", "Mpps", d.bw, 3, true);
    }
    if (!d.lat.empty()) script.latency(d.lat);
    // A thread sweep (whose QPs follow the thread count unless --qps fixes them) plots against
    // threads; runs that differ in QPs alone, against QPs.
    if (d.threads_seen.size() > 1 && !d.by_threads.empty())
        script.by_count("threads.png", "application threads", d.by_threads);
    else if (d.qps_seen.size() > 1 && !d.by_qps.empty())
        script.by_count("qps.png", "queue pairs", d.by_qps);
    script.utilisation(d.util);
    if (!d.flows.empty()) {
        script.gp
            << "unset logscale x\nset xlabel 'flow'\nset format x '%g'\nset yrange [0:*]\n"
               "set style data boxes\nset style fill solid 0.6\nset boxwidth 0.8\nset offsets 1,1,0,0\n";
        script.plot("flows.png", "Per-flow throughput (simulated)", "Gb/s", d.flows, 2, false);
        script.gp << "set style data linespoints\nset offsets 0,0,0,0\n";
    }
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
