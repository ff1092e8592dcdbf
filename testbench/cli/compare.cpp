// `hcasim compare A.json B.json`: two --stats-json files side by side (docs/usage.md, "Comparing
// runs"): each result figure and each counter that differs, with its relative change; exit 1
// when one is beyond the tolerance, 2 when the files cannot be compared.
#include <boost/program_options.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/core/param.h"
#include "model/core/text_file.h"
#include "testbench/cli/commands.h"

namespace hcasim::cli {

namespace {

namespace po = boost::program_options;
using json = nlohmann::ordered_json;

/// A bad file or a pair that cannot be compared: one line, exit status 2.
struct compare_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// One stats JSON: its runs (one, or a sweep's), in file order.
struct stats_file {
    std::string path;
    std::string kind;  ///< "" (one run), else the sweep ("qps", "threads") or "qp_scale"
    std::vector<json> runs;
};

/// "1 row", "2 rows".
std::string count(size_t n, const std::string& thing) {
    return std::to_string(n) + " " + thing + (n == 1 ? "" : "s");
}

/// A number of a stats JSON, whole or fractional.
double number(const json& v) { return v.is_number_unsigned() ? double(v.get<uint64_t>()) : v.get<double>(); }

/// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string json_reason(const std::exception& e) {
    const std::string w = e.what();
    const size_t at = w.rfind("] ", w.find(' '));
    return at == std::string::npos ? w : w.substr(at + 2);
}

/// A run's workload (msg_rate: and its op) and, with `counts`, its QPs and threads, which a
/// sweep's runs differ in: "write_bw qps=4".
std::string run_label(const json& run, bool counts = true) {
    std::string s = run.value("workload", std::string("?"));
    if (run.contains("op")) s += " op=" + run["op"].get<std::string>();
    if (!counts) return s;
    s += " qps=" + std::to_string(run.value("qps", 1u));
    if (run.contains("threads")) s += " threads=" + std::to_string(run.value("threads", 1u));
    if (run.contains("point") && run["point"].is_object())  // a sweep's configuration keys
        for (const auto& [k, v] : run["point"].items())
            if (k != "qps" && k != "threads")
                s += " " + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
    return s;
}

/// A result row's workload (the demo's rows name their own) and size: "write_bw 64 B".
std::string size_label(const json& row) { return std::to_string(row["size_bytes"].get<uint64_t>()) + " B"; }
std::string row_key(const json& run, const json& row) {
    return row.value("workload", run.value("workload", std::string("?"))) + " " + size_label(row);
}

/// Throws compare_error unless `run` is a stats JSON's: an array of result rows, each with its
/// size, and the fields the compare reads of the types it reads them as.
void check_run(const json& run, const std::string& path) {
    const std::string not_stats = "'" + path + "' is not an hcasim stats JSON (";
    if (!run.is_object() || !run.contains("results") || !run["results"].is_array())
        throw compare_error(not_stats + "no \"results\" array)");
    for (const json& row : run["results"])
        if (!row.is_object() || !row.contains("size_bytes") || !row["size_bytes"].is_number_unsigned())
            throw compare_error(not_stats + "a result without \"size_bytes\")");
    try {
        run_label(run);
        for (const json& row : run["results"]) row_key(run, row);
    } catch (const json::exception& e) {
        throw compare_error(not_stats + json_reason(e) + ")");
    }
}

stats_file load(const std::string& path) {
    std::string text, l;
    try {  // a directory, a binary file, a read error: refused with the path
        text_file in(path, "stats JSON", std::size_t(1) << 30);
        while (in.next(l)) text += l + "\n";
    } catch (const config_error& e) {
        throw compare_error(e.what());
    }
    stats_file f;
    f.path = path;
    json j;
    try {
        j = json::parse(text);
    } catch (const json::exception& e) {
        throw compare_error("'" + path + "' is not JSON: " + json_reason(e));
    }
    if (j.is_object() && j.contains("runs") && j["runs"].is_array()) {
        const json& kind = j.contains("sweep")      ? j["sweep"]
                           : j.contains("workload") ? j["workload"]
                                                    : json("runs");
        f.kind = kind.is_string() ? kind.get<std::string>() : kind.dump();
        if (kind.is_array()) {  // a sweep's keys: "qps", "pcie.lanes x qps"
            f.kind.clear();
            for (const json& k : kind)
                f.kind += (f.kind.empty() ? "" : " x ") + (k.is_string() ? k.get<std::string>() : k.dump());
        }
        for (const json& r : j["runs"]) f.runs.push_back(r);
    } else
        f.runs.push_back(j);
    for (const json& r : f.runs) check_run(r, path);
    return f;
}

/// Throws compare_error unless `a` and `b` ran the same workloads and sizes (and, for a sweep,
/// the same points in the same order).
void check_comparable(const stats_file& a, const stats_file& b) {
    const std::string both = "cannot compare '" + a.path + "' with '" + b.path + "': ";
    auto what = [](const stats_file& f) {
        return f.kind.empty() ? std::string("a single run")
                              : "a " + f.kind + " sweep of " + count(f.runs.size(), "run");
    };
    if (a.kind != b.kind || a.runs.size() != b.runs.size())
        throw compare_error(both + "'" + a.path + "' is " + what(a) + ", '" + b.path + "' " + what(b));
    for (size_t k = 0; k < a.runs.size(); ++k) {
        const json &ra = a.runs[k], &rb = b.runs[k];
        const std::string where = a.runs.size() > 1 ? "run " + std::to_string(k + 1) + ": " : "";
        const bool counts = a.runs.size() > 1;  // one run: its QPs are a parameter like any other
        if (run_label(ra, counts) != run_label(rb, counts))
            throw compare_error(both + where + "'" + a.path + "' ran " + run_label(ra, counts) + ", '" +
                                b.path + "' " + run_label(rb, counts));
        const json &xa = ra["results"], &xb = rb["results"];
        for (size_t r = 0; r < std::max(xa.size(), xb.size()); ++r) {
            if (r < xa.size() && r < xb.size() && row_key(ra, xa[r]) == row_key(rb, xb[r])) continue;
            const bool in_a = r < xa.size();  // the file that has row r, and the one that lacks it
            const stats_file &has = in_a ? a : b, &lacks = in_a ? b : a;
            const json &rh = in_a ? ra : rb, &rl = in_a ? rb : ra;
            throw compare_error(both + where + "'" + lacks.path + "' has no result " +
                                row_key(rh, rh["results"][r]) + " (row " + std::to_string(r + 1) + " of '" +
                                has.path + "'; " +
                                (r < rl["results"].size()
                                     ? "'" + lacks.path + "' has " + row_key(rl, rl["results"][r]) + " there"
                                     : "'" + lacks.path + "' has " + count(rl["results"].size(), "row")) +
                                ")");
        }
    }
}

/// Every number under `v`, by path ("util.node0 link tx", "fabric.flows.3.gbps").
void flatten(const json& v, const std::string& path, std::vector<std::pair<std::string, double>>& out) {
    if (path == "lat_cdf_us") return;  // 102 quantiles, for the plots: lat_min/typical/p99/max compare them
    if (v.is_number())
        out.emplace_back(path, number(v));
    else if (v.is_object())
        for (const auto& [k, x] : v.items()) flatten(x, path.empty() ? k : path + "." + k, out);
    else if (v.is_array())
        for (size_t k = 0; k < v.size(); ++k) flatten(v[k], path + "." + std::to_string(k), out);
}

/// One compared figure or counter.
struct line {
    std::string row, figure;  ///< row: "write_bw 64 B" (results) or "" (counters)
    double a = 0, b = 0;
    bool beyond = false;
};

/// Both values as text: whole numbers in full, others with enough digits (6 or more) that two
/// different values never print alike.
std::pair<std::string, std::string> both_values(double a, double b) {
    char x[64], y[64];
    auto whole = [](double v) { return v == std::floor(v) && std::fabs(v) < 1e15; };
    if (whole(a) && whole(b)) {
        std::snprintf(x, sizeof x, "%.0f", a);
        std::snprintf(y, sizeof y, "%.0f", b);
        return {x, y};
    }
    for (int digits = 6;; ++digits) {
        std::snprintf(x, sizeof x, "%.*g", digits, a);
        std::snprintf(y, sizeof y, "%.*g", digits, b);
        if (a == b || std::string(x) != y || digits == 17) return {x, y};
    }
}

/// The relative change from a to b: "+1.25%", "-0.0042%", "0%", "from 0".
std::string change(double a, double b) {
    if (a == b) return "0%";
    if (a == 0) return "from 0";
    const double pct = (b - a) / std::fabs(a) * 100.0;
    char s[64];
    std::snprintf(s, sizeof s, std::fabs(pct) < 0.01 ? "%+.2g%%" : "%+.2f%%", pct);
    return s;
}

/// Prints `lines` as a table with columns `heads` (the row column only for results).
void print_lines(const std::vector<line>& lines, bool results) {
    size_t wr = 8, wf = results ? 6 : 7, wa = 1, wb = 1;
    for (const line& l : lines) {
        const auto [x, y] = both_values(l.a, l.b);
        wr = std::max(wr, l.row.size());
        wf = std::max(wf, l.figure.size());
        wa = std::max(wa, x.size());
        wb = std::max(wb, y.size());
    }
    auto put = [&](const std::string& r, const std::string& f, const std::string& x, const std::string& y,
                   const std::string& c) {
        std::string s = " ";
        if (results) s += r + std::string(wr - r.size() + 2, ' ');
        s += f + std::string(wf - f.size() + 2, ' ') + std::string(wa - x.size(), ' ') + x + "  " +
             std::string(wb - y.size(), ' ') + y + "  " + c;
        std::cout << s << "\n";
    };
    put("result", results ? "figure" : "counter", "A", "B", "change");
    for (const line& l : lines) {
        const auto [x, y] = both_values(l.a, l.b);
        put(l.row, l.figure, x, y, change(l.a, l.b) + (l.beyond ? "  beyond" : ""));
    }
}

/// What `hcasim compare` was asked for.
struct compare_options {
    std::vector<std::string> files;
    double tolerance = 0;  ///< a fraction of A's value
    std::string tolerance_text = "0%";
    bool only_results = false;
};

/// "2%", "2" or "0.5%" as a fraction; throws compare_error otherwise.
double parse_tolerance(const std::string& text) {
    const std::string t = !text.empty() && text.back() == '%' ? text.substr(0, text.size() - 1) : text;
    size_t used = 0;
    double v = -1;
    try {
        v = std::stod(t, &used);
    } catch (const std::exception&) {}
    if (t.empty() || used != t.size() || !(v >= 0) || !std::isfinite(v))
        throw compare_error("--tolerance: expected a percentage like 2% (or 2), got '" + text + "'");
    return v / 100.0;
}

/// Parses argv (argv[1] is "compare"); returns -1 to go on, else the exit status.
int parse_options(int argc, char* argv[], compare_options& o) {
    po::options_description desc(
        "Usage: hcasim compare A.json B.json [options]\n"
        "Compares two --stats-json files (A the reference): the result figures and the counters that "
        "differ, with the relative change (B - A) / A. Exit status 0: all within the tolerance, 1: some "
        "beyond it, 2: a file is unreadable or the runs cannot be compared.\nOptions",
        110);
    // clang-format off
    desc.add_options()
        ("help,h", "print this help and exit")
        ("tolerance", po::value<std::string>(), "largest relative change that passes, e.g. 2% or 2 (default 0%: exact)")
        ("only-results", "compare the result figures only (not the counters)");
    // clang-format on
    po::options_description all;  // the files are positional, not an option of the help
    all.add(desc).add_options()("file", po::value<std::vector<std::string>>());
    po::positional_options_description pos;
    pos.add("file", -1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc - 1, argv + 1).options(all).positional(pos).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        throw compare_error(std::string(e.what()) + " (see hcasim compare --help)");
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return 0;
    }
    if (vm.count("file")) o.files = vm["file"].as<std::vector<std::string>>();
    if (o.files.size() != 2)
        throw compare_error("expected two stats JSON files, got " + std::to_string(o.files.size()) +
                            " (hcasim compare A.json B.json [--tolerance P%])");
    if (vm.count("tolerance")) {
        o.tolerance_text = vm["tolerance"].as<std::string>();
        o.tolerance = parse_tolerance(o.tolerance_text);
        if (o.tolerance_text.back() != '%') o.tolerance_text += "%";
    }
    o.only_results = vm.count("only-results") > 0;
    return -1;
}

/// The configuration of a run as text by key; the run's seed, QPs and threads first.
std::map<std::string, std::string> config_of(const json& run) {
    std::map<std::string, std::string> m;
    for (const char* k : {"seed", "qps", "threads"})
        if (run.contains(k)) m[k] = run[k].dump();
    if (run.contains("config") && run["config"].is_object())
        for (const auto& [k, v] : run["config"].items())
            m[k] = v.is_string() ? v.get<std::string>() : v.dump();
    return m;
}

/// A counter's value: a number, or an object's "value".
bool counter_value(const json& v, double& out) {
    const json& n = v.is_object() && v.contains("value") ? v["value"] : v;
    if (!n.is_number()) return false;
    out = number(n);
    return true;
}

/// Prints the configuration keys whose values differ (information: a compare of two
/// configurations is the usual point).
void print_config(const stats_file& a, const stats_file& b) {
    std::vector<std::string> diffs;
    for (size_t k = 0; k < a.runs.size(); ++k) {
        const auto ca = config_of(a.runs[k]), cb = config_of(b.runs[k]);
        const std::string where = a.runs.size() > 1 ? run_label(a.runs[k]) + ": " : "";
        for (const auto& [key, va] : ca) {
            const auto it = cb.find(key);
            if (it == cb.end())
                diffs.push_back(where + key + " " + va + " -> (none)");
            else if (it->second != va)
                diffs.push_back(where + key + " " + va + " -> " + it->second);
        }
        for (const auto& [key, vb] : cb)
            if (!ca.count(key)) diffs.push_back(where + key + " (none) -> " + vb);
    }
    if (diffs.empty()) {
        std::cout << "configuration: the same\n";
        return;
    }
    std::cout << "configuration: " << diffs.size() << (diffs.size() == 1 ? " key differs" : " keys differ")
              << " (information, not compared)\n";
    for (const std::string& d : diffs) std::cout << " " << d << "\n";
}

/// The compare once both files are loaded and comparable; returns the exit status.
int compare(const stats_file& a, const stats_file& b, const compare_options& o) {
    std::cout << "compare: A " << a.path << ", B " << b.path << ", tolerance " << o.tolerance_text << "\n";
    print_config(a, b);
    auto beyond = [&o](double x, double y) { return std::fabs(y - x) > o.tolerance * std::fabs(x); };
    const bool sweep = a.runs.size() > 1;
    // Results: every figure of each row's own (the table's), the nested ones (util, breakdown_us,
    // fabric, threads, ...) when they differ; the run's simulated time and wire packets.
    std::vector<line> results;
    size_t figures = 0, results_one_file = 0;  // figures of one file only (--verify in one run, ...)
    for (size_t k = 0; k < a.runs.size(); ++k) {
        const json &ra = a.runs[k], &rb = b.runs[k];
        const std::string prefix = sweep ? run_label(ra) + " " : "";
        auto add = [&](const std::string& row, const json& xa, const json& xb, bool all_top) {
            std::vector<std::pair<std::string, double>> fa, fb;
            flatten(xa, "", fa);
            flatten(xb, "", fb);
            std::map<std::string, double> mb(fb.begin(), fb.end());
            size_t in_a_only = 0;
            for (const auto& [name, va] : fa) {
                const auto it = mb.find(name);
                in_a_only += it == mb.end();
                if (it == mb.end() || name == "size_bytes") continue;
                ++figures;
                const bool top = all_top && xa.contains(name) && !xa[name].is_structured();
                if (top || va != it->second)
                    results.push_back({row, name, va, it->second, beyond(va, it->second)});
            }
            results_one_file += in_a_only + (fb.size() - (fa.size() - in_a_only));  // ... and in B only
        };
        for (size_t r = 0; r < ra["results"].size(); ++r) {
            const json& row = ra["results"][r];  // in a sweep the run's label names its workload
            // A size's counters are no result figures: the run's counters (below) are compared.
            json xa = row, xb = rb["results"][r];
            xa.erase("counters");
            xb.erase("counters");
            add(prefix + (sweep && !row.contains("workload") ? size_label(row) : row_key(ra, row)), xa, xb,
                true);
        }
        json sa = json::object(), sb = json::object();  // wall_s and the like differ from run to run
        for (const char* s : {"sim_time_ns", "wire_packets"}) {
            if (ra.contains("sim") && ra["sim"].contains(s)) sa[s] = ra["sim"][s];
            if (rb.contains("sim") && rb["sim"].contains(s)) sb[s] = rb["sim"][s];
        }
        add(prefix + "run", sa, sb, true);
    }
    std::cout << "results (A, B, change (B - A) / A; beyond: outside the tolerance):\n";
    print_lines(results, true);
    if (results_one_file)
        std::cout << " (" << count(results_one_file, "figure") << " in one file only, not compared)\n";
    // Counters: those that differ, the largest change first.
    std::vector<line> counters;
    size_t compared_counters = 0, only_one = 0;
    if (!o.only_results) {
        for (size_t k = 0; k < a.runs.size(); ++k) {
            const json empty = json::object();
            const json& ca = a.runs[k].contains("counters") ? a.runs[k]["counters"] : empty;
            const json& cb = b.runs[k].contains("counters") ? b.runs[k]["counters"] : empty;
            const std::string prefix = sweep ? run_label(a.runs[k]) + ": " : "";
            for (const auto& [name, v] : ca.items()) {
                double va = 0, vb = 0;
                if (!counter_value(v, va) || !cb.contains(name) || !counter_value(cb[name], vb)) {
                    ++only_one;
                    continue;
                }
                ++compared_counters;
                if (va != vb) counters.push_back({"", prefix + name, va, vb, beyond(va, vb)});
            }
            for (const auto& [name, v] : cb.items()) only_one += !ca.contains(name);
        }
        auto size = [](const line& l) { return l.a == 0 ? INFINITY : std::fabs(l.b - l.a) / std::fabs(l.a); };
        std::stable_sort(counters.begin(), counters.end(),
                         [&](const line& x, const line& y) { return size(x) > size(y); });
        std::cout << "counters: " << counters.size() << " of " << compared_counters << " differ";
        if (only_one) std::cout << " (" << only_one << " in one file only, not compared)";
        std::cout << (counters.empty() ? "\n" : ":\n");
        if (!counters.empty()) print_lines(counters, false);
    }
    size_t bad_results = 0, bad_counters = 0;
    std::string names;  // the first few result figures beyond the tolerance, the rows' own first
    std::vector<line> listed = results;
    std::stable_partition(listed.begin(), listed.end(),
                          [](const line& l) { return l.figure.find('.') == std::string::npos; });
    for (const line& l : listed)
        if (l.beyond && ++bad_results <= 8)
            names += (names.empty() ? "" : ", ") + l.row + " " + l.figure + " " + change(l.a, l.b);
    if (bad_results > 8) names += " and " + std::to_string(bad_results - 8) + " more (beyond, above)";
    for (const line& l : counters) bad_counters += l.beyond;
    std::cout << "compare: " << count(figures, "result figure")
              << (o.only_results ? "" : " and " + count(compared_counters, "counter")) << " compared; ";
    if (bad_results + bad_counters == 0) {
        std::cout << "all within the tolerance of " << o.tolerance_text << "\n";
        return 0;
    }
    std::cout << count(bad_results, "result figure")
              << (o.only_results ? "" : " and " + count(bad_counters, "counter"))
              << " beyond the tolerance of " << o.tolerance_text << (names.empty() ? "" : ": " + names)
              << "\n";
    return 1;
}

}  // namespace

int compare_main(int argc, char* argv[]) {
    try {
        compare_options o;
        if (const int status = parse_options(argc, argv, o); status >= 0) return status;
        const stats_file a = load(o.files[0]), b = load(o.files[1]);
        check_comparable(a, b);
        return compare(a, b, o);
    } catch (const compare_error& e) {
        std::cerr << "hcasim: error: compare: " << e.what() << "\n";
        return 2;
    } catch (const json::exception& e) {  // a stats JSON with a field of the wrong type
        std::cerr << "hcasim: error: compare: not a stats JSON: " << json_reason(e) << "\n";
        return 2;
    }
}

}  // namespace hcasim::cli
