// hcasim --sweep and --report: a size sweep (the same as --size), a QP sweep (one child process
// per QP count, tables in order, one merged JSON), and the report directory: results.csv,
// results.json, the gnuplot script and its PNG plots (bandwidth, message rate, latency,
// throughput vs QPs, unit utilisation). Deterministic; one-line errors for bad requests.
#include <gtest/gtest.h>

#include "testbench/cli/report.h"
#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

/// Runs hcasim with `args` (shell words), capturing stdout and stderr.
result run(const std::string& args) { return hcasim::test::run_hcasim(args, "report"); }

/// A fresh directory name under the test temp dir (not created).
std::string fresh_dir(const std::string& name) {
    const std::string d = ::testing::TempDir() + "hcasim_report_" + name + "_" + std::to_string(getpid());
    std::filesystem::remove_all(d);
    return d;
}

bool is_png(const std::string& path) {
    const std::string b = slurp(path);
    return b.size() > 1000 && b.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0;
}

std::vector<std::string> lines(const std::string& text) { return hcasim::test::lines_of(text); }
std::vector<std::string> split(const std::string& s, char sep) { return hcasim::test::split_fields(s, sep); }

/// The rows of datablock `$name` in a gnuplot script (comment lines left out), each split at
/// spaces; empty if there is no such block.
std::vector<std::vector<std::string>> datablock(const std::string& gp, const std::string& name) {
    std::vector<std::vector<std::string>> rows;
    const size_t at = gp.find("$" + name + " << EOD\n");
    if (at == std::string::npos) return rows;
    std::istringstream in(gp.substr(gp.find('\n', at) + 1));
    for (std::string l; std::getline(in, l) && l != "EOD";)
        if (!l.empty() && l[0] != '#') rows.push_back(split(l, ' '));
    return rows;
}

/// The script's lines that start with `prefix`.
std::vector<std::string> lines_starting(const std::string& text, const std::string& prefix) {
    std::vector<std::string> v;
    for (const std::string& l : lines(text))
        if (l.rfind(prefix, 0) == 0) v.push_back(l);
    return v;
}

/// Whether `text` says "warning" in any case.
bool warns(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(), ::tolower);
    return text.find("warning") != std::string::npos;
}

/// Runs gnuplot on DIR/plots.gp in DIR; its stderr.
std::string gnuplot_stderr(const std::string& dir) {
    const std::string err = dir + ".gnuplot_err";
    EXPECT_EQ(std::system(("cd '" + dir + "' && gnuplot plots.gp 2>'" + err + "'").c_str()), 0);
    const std::string said = slurp(err);
    std::remove(err.c_str());
    return said;
}

}  // namespace

TEST(HcasimReport, size_sweep_writes_csv_json_and_bandwidth_plots_with_utilisation) {
    const std::string dir = fresh_dir("size");
    const result r = run("--workload write_bw --sweep size=64..4K --iters 200 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" report: " + dir +
                         "/results.csv, results.json, bandwidth.png, msg_rate.png, utilisation.png\n"),
              std::string::npos)
        << r.out;
    const auto csv = lines(slurp(dir + "/results.csv"));
    ASSERT_EQ(csv.size(), 1u + 7u) << "a header and 64, 128, ... 4096";
    EXPECT_EQ(
        csv[0],
        "workload,qps,size_bytes,iters,bw_gbps,msg_rate_mpps,lat_typical_us,lat_min_us,lat_p99_us,lat_avg_us,"
        "lat_max_us,threads,label");
    uint64_t size = 64;
    for (size_t k = 1; k < csv.size(); ++k, size *= 2) {
        const auto f = split(csv[k], ',');
        ASSERT_EQ(f.size(), 13u) << csv[k];
        EXPECT_EQ(f[0], "write_bw");
        EXPECT_EQ(f[1], "1");
        EXPECT_EQ(f[2], std::to_string(size));
        EXPECT_EQ(f[3], "200");
        EXPECT_GT(std::stod(f[4]), 0.0);
        EXPECT_TRUE(f[6].empty()) << "no latency on a bandwidth row";
        EXPECT_EQ(f[11], "1") << "one application thread";
        EXPECT_EQ(f[12], "default") << "no --config, no --set";
    }
    const auto j = nlohmann::json::parse(slurp(dir + "/results.json"));
    ASSERT_EQ(j["runs"].size(), 1u);
    const auto& last = j["runs"][0]["results"].back();
    EXPECT_EQ(last["size_bytes"], 4096);
    // At 4 KiB node0's wire is the bottleneck of a one-QP WRITE stream: near 100% busy.
    EXPECT_GT(last["util"]["node0 link tx"].get<double>(), 0.9);
    EXPECT_LT(last["util"]["node0 link tx"].get<double>(), 1.0 + 1e-9);
    EXPECT_LT(last["util"]["node1 link tx"].get<double>(), 0.1) << "node1 sends only ACKs";
    for (const char* png : {"bandwidth.png", "msg_rate.png", "utilisation.png"})
        EXPECT_TRUE(is_png(dir + "/" + png)) << png;
    EXPECT_FALSE(std::filesystem::exists(dir + "/latency.png")) << "no latency rows";
    EXPECT_NE(slurp(dir + "/plots.gp").find("set output 'bandwidth.png'"), std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST(HcasimReport, latency_sweep_plots_latency) {
    const std::string dir = fresh_dir("lat");
    const result r = run("--workload send_lat --sweep size=2..64 --iters 50 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto csv = lines(slurp(dir + "/results.csv"));
    ASSERT_EQ(csv.size(), 1u + 6u);
    const auto f = split(csv[1], ',');
    EXPECT_EQ(f[0], "send_lat");
    EXPECT_TRUE(f[4].empty()) << "no bandwidth on a latency row";
    EXPECT_GT(std::stod(f[6]), 0.0);
    EXPECT_LE(std::stod(f[7]), std::stod(f[6])) << "min <= typical";
    EXPECT_TRUE(is_png(dir + "/latency.png"));
    EXPECT_FALSE(std::filesystem::exists(dir + "/bandwidth.png"));
    std::filesystem::remove_all(dir);
}

TEST(HcasimReport, qps_sweep_runs_each_count_in_order_and_merges_the_results) {
    const std::string dir = fresh_dir("qps");
    const std::string json = dir + ".json";
    const result r = run("--workload write_bw --size 64 --iters 100 --sweep qps=1..4 --report '" + dir +
                         "' --stats-json '" + json + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const size_t a = r.out.find("== --sweep qps=1\n"), b = r.out.find("== --sweep qps=2\n"),
                 c = r.out.find("== --sweep qps=4\n");
    ASSERT_NE(a, std::string::npos) << r.out;
    ASSERT_NE(b, std::string::npos);
    ASSERT_NE(c, std::string::npos);
    EXPECT_LT(a, b);
    EXPECT_LT(b, c);
    const auto j = nlohmann::json::parse(slurp(json));
    EXPECT_EQ(j["sweep"], nlohmann::json::array({"qps"}));
    EXPECT_EQ(j["runs"][2]["point"], nlohmann::json({{"qps", "4"}}));
    ASSERT_EQ(j["runs"].size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
        EXPECT_EQ(j["runs"][k]["qps"], 1u << k);
        EXPECT_EQ(j["runs"][k]["workload"], "write_bw");
        EXPECT_EQ(j["runs"][k]["results"][0]["size_bytes"], 64);
        // Each point: --iters per QP.
        EXPECT_EQ(j["runs"][k]["results"][0]["iters"], 100);
        EXPECT_EQ(j["runs"][k]["results"][0]["messages"], 100u << k);
    }
    const auto csv = lines(slurp(dir + "/results.csv"));
    ASSERT_EQ(csv.size(), 4u);
    EXPECT_EQ(split(csv[3], ',')[1], "4");
    EXPECT_TRUE(is_png(dir + "/qps.png"));
    std::filesystem::remove_all(dir);
    std::remove(json.c_str());
}

TEST(HcasimReport, the_report_is_deterministic) {
    const std::string d1 = fresh_dir("det1"), d2 = fresh_dir("det2");
    ASSERT_EQ(run("--workload write_bw --sweep size=64..256 --iters 100 --report '" + d1 + "'").code, 0);
    ASSERT_EQ(run("--workload write_bw --sweep size=64..256 --iters 100 --report '" + d2 + "'").code, 0);
    EXPECT_EQ(slurp(d1 + "/results.csv"), slurp(d2 + "/results.csv"));
    EXPECT_EQ(slurp(d1 + "/plots.gp"), slurp(d2 + "/plots.gp"));
    std::filesystem::remove_all(d1);
    std::filesystem::remove_all(d2);
}

TEST(HcasimReport, bad_sweeps_and_report_paths_are_one_line_errors) {
    struct bad {
        const char* args;
        const char* err;
    };
    const bad cases[] = {
        {"--workload write_bw --sweep iters=1..4",
         "hcasim: error: --sweep iters=1: unknown configuration key 'iters' (--sweep); --sweep takes size, "
         "qps, "
         "threads or a key hcasim --help-config lists\n"},
        {"--workload write_bw --sweep size",
         "hcasim: error: --sweep: expected KEY=LIST (size, qps, threads or a configuration key), got "
         "'size'\n"},
        {"--workload write_bw --size 64 --sweep size=2..8",
         "hcasim: error: --sweep size=...: the sizes are already given (--size or another --sweep size)\n"},
        {"--workload write_bw --qps 2 --sweep qps=1..4",
         "hcasim: error: --sweep qps=...: the QP count is already given (--qps or another --sweep qps)\n"},
        {"--workload dma_read_bw --sweep qps=1..4",
         "hcasim: error: --sweep qps: dma_read_bw moves data over PCIe only and has no QPs\n"},
        {"--workload attack_suite --report /tmp/x",
         "hcasim: error: attack_suite takes no --size, --iters, --sweep, --report or --stats-json (it runs a "
         "fixed "
         "table of cases)\n"},
    };
    for (const bad& c : cases) {
        const result r = run(c.args);
        EXPECT_EQ(r.code, 2) << c.args;
        EXPECT_EQ(r.err, c.err) << c.args;
    }
    const result q = run("--workload write_bw --sweep qps=0,2");
    EXPECT_EQ(q.code, 2);
    EXPECT_NE(q.err.find("--sweep qps"), std::string::npos) << q.err;
    // A report directory that cannot be created: an error before the run.
    const result d = run("--workload write_bw --size 64 --iters 10 --report /proc/hcasim-report");
    EXPECT_EQ(d.code, 2);
    EXPECT_EQ(d.err.rfind("hcasim: error: --report: cannot create directory '/proc/hcasim-report'", 0), 0u)
        << d.err;
}

// Issue 27: the report's files are written whole or not at all; the old ones stay (--replace:
// the directory holds an earlier report).
TEST(HcasimReport, report_on_a_full_disk_leaves_no_truncated_file_and_exits_2) {
    HCASIM_SKIP_WHERE_ASAN_MISREADS_A_THROW_AFTER_THE_RUN();
    const std::string d = hcasim::test::empty_dir("hcasim_report_disk");
    const std::vector<std::string> names = {"bandwidth.png", "msg_rate.png", "plots.gp",
                                            "results.csv",   "results.json", "utilisation.png"};
    for (const std::string& n : names) std::ofstream(d + "/" + n) << "old " << n;
    const std::string args =
        "--workload write_bw --sweep size=64..4K --iters 20 --replace --report '" + d + "'";
    // Files stop growing at 16 KiB: results.json (the runs' counters and configuration, 32 KB) is larger.
    const result r = hcasim::test::run_hcasim(args, "report", hcasim::test::file_limit(16));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --report: cannot write '" + d + "/results.json': File too large\n");
    for (const std::string& n : names) EXPECT_EQ(slurp(d + "/" + n), "old " + n);
    EXPECT_EQ(hcasim::test::dir_entries(d), names);
    // Files stop growing past the other files' sizes (measured in a run with room): every file
    // fits but utilisation.png, the largest. gnuplot does not notice; the report does.
    const std::string room = fresh_dir("room");
    ASSERT_EQ(run("--workload write_bw --sweep size=64..4K --iters 20 --report '" + room + "'").code, 0);
    uintmax_t others = 0;
    for (const std::string& n : names)
        if (n != "utilisation.png") others = std::max(others, std::filesystem::file_size(room + "/" + n));
    const unsigned kib = unsigned(others / 1024 + 1);
    ASSERT_GT(std::filesystem::file_size(room + "/utilisation.png"), uintmax_t(kib) * 1024);
    std::filesystem::remove_all(room);
    const result png = hcasim::test::run_hcasim(args, "report", hcasim::test::file_limit(kib));
    EXPECT_EQ(png.code, 2);
    EXPECT_EQ(png.err, "hcasim: error: --report: cannot write '" + d +
                           "/utilisation.png': gnuplot did not write it whole (is the disk full?)\n");
    for (const std::string& n : names) EXPECT_EQ(slurp(d + "/" + n), "old " + n);
    EXPECT_EQ(hcasim::test::dir_entries(d), names);
    // With room, every file is replaced.
    const result ok = run(args);
    ASSERT_EQ(ok.code, 0) << ok.err;
    for (const char* n : {"bandwidth.png", "msg_rate.png", "utilisation.png"})
        EXPECT_TRUE(is_png(d + "/" + n)) << n;
    EXPECT_EQ(nlohmann::json::parse(slurp(d + "/results.json"))["runs"].size(), 1u);
    EXPECT_EQ(hcasim::test::dir_entries(d), names);
    std::filesystem::remove_all(d);
}

// Issue 31: the latency plot on a log axis, the breakdown stacked per size and the
// distribution (the stats JSON's lat_cdf_us) as plotted.
TEST(HcasimReport, latency_plots_a_log_axis_a_stacked_breakdown_and_the_cdf_of_the_json_quantiles) {
    const std::string dir = fresh_dir("latplots");
    const result r = run("--workload write_lat --sweep size=2..64K --iters 200 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" report: " + dir +
                         "/results.csv, results.json, latency.png, breakdown.png, latency_cdf.png\n"),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(warns(r.err)) << r.err;
    for (const char* png : {"latency.png", "breakdown.png", "latency_cdf.png"})
        EXPECT_TRUE(is_png(dir + "/" + png)) << png;
    const std::string gp = slurp(dir + "/plots.gp");
    // 0.7 .. 7 us: a log axis, 0.7 a labelled tic.
    EXPECT_NE(gp.find("set logscale y 10\n"), std::string::npos);
    EXPECT_NE(gp.find("'0.7' 0.7"), std::string::npos);
    EXPECT_NE(gp.find("set style histogram rowstacked\n"), std::string::npos);

    // Ordered: the breakdown's stages in the file's order.
    const auto results = nlohmann::ordered_json::parse(slurp(dir + "/results.json"))["runs"][0]["results"];
    ASSERT_EQ(results.size(), 16u);
    // The distribution: 102 quantiles (0, 1% .. 99%, 99.9%, 1), non-decreasing from the minimum
    // to the maximum; the plot's datablock holds the same values, one column per size.
    const auto cdf = datablock(gp, "cdf0");
    ASSERT_EQ(cdf.size(), 102u);
    for (size_t k = 0; k < cdf.size(); ++k) {
        ASSERT_EQ(cdf[k].size(), 2u + results.size()) << k;
        EXPECT_DOUBLE_EQ(std::stod(cdf[k][0]), k < 100 ? k / 100.0 : k == 100 ? 0.999 : 1.0) << k;
    }
    for (size_t s = 0; s < results.size(); ++s) {
        const auto& q = results[s]["lat_cdf_us"];
        ASSERT_EQ(q.size(), 102u) << s;
        EXPECT_EQ(q.front(), results[s]["lat_min_us"]);
        EXPECT_EQ(q.back(), results[s]["lat_max_us"]);
        for (size_t k = 0; k < q.size(); ++k) {
            if (k) {
                EXPECT_GE(q[k].get<double>(), q[k - 1].get<double>()) << s << " " << k;
            }
            EXPECT_NEAR(std::stod(cdf[k][2 + s]), q[k].get<double>(), 1e-6 * q[k].get<double>())
                << s << " " << k;
        }
    }
    // The breakdown: every size a row of its stages (the JSON's breakdown_us) and their sum.
    const auto bars = datablock(gp, "breakdown0");  // every size ("breakdown0_small": the left panel's)
    ASSERT_EQ(bars.size(), results.size()) << gp;
    EXPECT_EQ(bars[0][0], "2");
    EXPECT_EQ(bars[10][0], "2K");
    for (size_t s = 0; s < results.size(); ++s) {
        const auto& b = results[s]["breakdown_us"];
        ASSERT_EQ(bars[s].size(), 2 + b.size());
        double sum = 0;
        size_t col = 1;
        for (const auto& [stage, us] : b.items()) {
            EXPECT_NEAR(std::stod(bars[s][col]), us.get<double>(), 1e-5) << stage;
            sum += us.get<double>();
            ++col;
        }
        EXPECT_NEAR(std::stod(bars[s].back()), sum, 1e-5);
    }
    EXPECT_EQ(gnuplot_stderr(dir), "");
    std::filesystem::remove_all(dir);
}

TEST(HcasimReport, single_size_and_sweep_reports_plot_without_a_gnuplot_warning) {
    struct report_case {
        std::string args;
        std::vector<std::string> pngs;
    };
    const report_case cases[] = {
        {"--workload write_bw --size 4K --iters 100", {"bandwidth.png", "msg_rate.png", "utilisation.png"}},
        {"--workload write_lat --size 64 --iters 100", {"latency.png", "breakdown.png", "latency_cdf.png"}},
        {"--workload write_bw --size 64 --sweep qps=1,2 --iters 50",
         {"bandwidth.png", "msg_rate.png", "qps.png", "utilisation_0.png", "utilisation_1.png"}},
        {"--workload incast --size 4K --iters 50 --set fabric.nodes=4",
         {"bandwidth.png", "msg_rate.png", "flows.png"}},
    };
    for (const report_case& c : cases) {
        const std::string dir = fresh_dir("nowarn");
        const result r = run(c.args + " --report '" + dir + "'");
        ASSERT_EQ(r.code, 0) << c.args << "\n" << r.err;
        EXPECT_FALSE(warns(r.err)) << c.args << "\n" << r.err;
        std::string listed = " report: " + dir + "/results.csv, results.json";
        for (const std::string& png : c.pngs) {
            listed += ", " + png;
            EXPECT_TRUE(is_png(dir + "/" + png)) << c.args << " " << png;
        }
        EXPECT_NE(r.out.find(listed + "\n"), std::string::npos) << r.out;
        EXPECT_EQ(gnuplot_stderr(dir), "") << c.args;
        // Every plot states its x range (one size: bars): none left to gnuplot to widen.
        bool xrange = false;
        for (const std::string& l : lines(slurp(dir + "/plots.gp"))) {
            if (l.rfind("plot ", 0) == 0) {
                EXPECT_TRUE(xrange) << c.args << ": " << l;
                xrange = false;
            }
            xrange |= l.rfind("set xrange [", 0) == 0;
        }
        std::filesystem::remove_all(dir);
    }
}

TEST(HcasimReport, gnuplots_warnings_reach_stderr_and_its_failure_names_the_line) {
    // A gnuplot ahead of the real one on PATH that warns, then one that fails.
    const std::string bin = hcasim::test::empty_dir("hcasim_report_fakebin"), dir = fresh_dir("fake");
    const std::string fake = bin + "/gnuplot", path = "PATH='" + bin + "':\"$PATH\"; export PATH; ";
    std::ofstream(fake) << "#!/bin/sh\necho '\"plots.gp\" line 7: warning: injected by the test' >&2\n"
                           "PATH=\"${PATH#*:}\"; exec gnuplot \"$@\"\n";
    std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
    const std::string args = "--workload write_bw --size 64 --iters 20 --report '" + dir + "'";
    const result w = hcasim::test::run_hcasim(args, "report", path);
    ASSERT_EQ(w.code, 0) << w.err;
    EXPECT_EQ(w.err,
              "hcasim: warning: --report: gnuplot: \"plots.gp\" line 7: warning: injected by the test\n");
    EXPECT_TRUE(is_png(dir + "/bandwidth.png"));
    std::ofstream(fake)
        << "#!/bin/sh\necho 'set xrange [0:1]]' >&2\necho '\"plots.gp\" line 9: unexpected token' >&2\n"
           "exit 1\n";
    const std::string dir2 = fresh_dir("fake2");
    const result f = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 20 --report '" + dir2 + "'", "report", path);
    EXPECT_EQ(f.code, 0) << "the CSV and JSON are written";
    EXPECT_EQ(f.err,
              "hcasim: warning: --report: no plots: gnuplot failed on plots.gp (exit status 1): \"plots.gp\" "
              "line 9: "
              "unexpected token\n");
    EXPECT_FALSE(std::filesystem::exists(dir2 + "/bandwidth.png"));
    std::filesystem::remove_all(bin);
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(dir2);
}

TEST(HcasimReport, every_title_names_the_configuration_and_lines_differ_in_colour_dash_or_marker) {
    const std::string dir = fresh_dir("titles");
    const result r =
        run("--config hdr-cx6 --workload write_bw --sweep size=64..256 --iters 50 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string gp = slurp(dir + "/plots.gp");
    const auto outputs = lines_starting(gp, "set output "), titles = lines_starting(gp, "set title ");
    ASSERT_EQ(outputs.size(), 3u);
    ASSERT_EQ(titles.size(), outputs.size());
    EXPECT_EQ(titles[0],
              "set title \"Bandwidth vs message size\\nhdr-cx6, HDR 4x, PCIe Gen4 x16, seed 1, 50 iters\"");
    for (const std::string& t : titles)
        EXPECT_NE(t.find("\\nhdr-cx6, HDR 4x, PCIe Gen4 x16, seed 1, 50 iters\""), std::string::npos) << t;
    // 30 line types, no two alike in colour, dash and marker.
    const auto types = lines_starting(gp, "set linetype ");
    ASSERT_EQ(types.size(), 31u);
    EXPECT_EQ(types.back(), "set linetype cycle 30");
    std::vector<std::string> looks;
    for (size_t k = 0; k < 30; ++k) {
        const std::string prefix = "set linetype " + std::to_string(k + 1) + " ";
        ASSERT_EQ(types[k].rfind(prefix, 0), 0u) << types[k];
        looks.push_back(types[k].substr(prefix.size()));
    }
    std::sort(looks.begin(), looks.end());
    EXPECT_EQ(std::unique(looks.begin(), looks.end()), looks.end());
    // Utilisation: a unit keeps its line type's colour on both nodes (node1 10 types on).
    const std::string util = gp.substr(gp.find("set output 'utilisation.png'"));
    EXPECT_NE(util.find("lt 1 title 'node0 link tx'"), std::string::npos) << util;
    EXPECT_NE(util.find("lt 11 title 'node1 link tx'"), std::string::npos) << util;
    EXPECT_NE(util.find("lt 18 title 'node1 CQ writer'"), std::string::npos) << util;
    EXPECT_EQ(types[0].substr(15, 16), "lc rgb '#1f77b4'");
    EXPECT_EQ(types[10].substr(16, 16), "lc rgb '#1f77b4'");
    std::filesystem::remove_all(dir);
}

TEST(HcasimReport, titles_name_the_presets_and_sets_a_run_records_and_legends_its_sweep_point) {
    // Runs as a sweep merges them: each with its command line and its point (read when present).
    auto run = [](int lanes) {
        return nlohmann::ordered_json{
            {"run", {{"command_line", {"hcasim", "--config", "configs/hdr-cx6.ini", "--set=cpu.cores=4"}}}},
            {"point", {{"pcie.lanes", std::to_string(lanes)}}},
            {"workload", "write_bw"},
            {"seed", 7},
            {"qps", 1},
            {"results",
             {{{"size_bytes", 64},
               {"iters", 10},
               {"messages", 10},
               {"bw_gbps", 1.5},
               {"msg_rate_mpps", 2.5}}}},
            {"config",
             {{"node0.link.speed", "hdr"},
              {"node0.link.width", "4"},
              {"node0.pcie.generation", "4"},
              {"node0.pcie.lanes", std::to_string(lanes)},
              {"fabric.nodes", "2"}}}};
    };
    const std::string dir = fresh_dir("context");
    std::string warning;
    const auto pngs = hcasim::write_report(dir, nlohmann::ordered_json::array({run(8), run(16)}), warning);
    EXPECT_EQ(warning, "");
    EXPECT_EQ(pngs, (std::vector<std::string>{"bandwidth.png", "msg_rate.png"}));
    const std::string gp = slurp(dir + "/plots.gp");
    EXPECT_EQ(lines_starting(gp, "set title ")[0],
              "set title \"Bandwidth, 64 B messages\\nhdr-cx6, HDR 4x, cpu.cores=4, seed 7, 10 iters\"");
    EXPECT_NE(gp.find("set xtics ('write_bw, 1 QP, pcie.lanes=8' 0, 'write_bw, 1 QP, pcie.lanes=16' 1)"),
              std::string::npos)
        << gp;
    // A report's runs record no command line: their label (--config names, --set overrides) names
    // the configuration instead.
    nlohmann::ordered_json labelled = run(8);
    labelled.erase("run");
    labelled.erase("point");
    labelled["label"] = "hdr-cx6 cpu.cores=4";
    std::filesystem::remove_all(dir);
    hcasim::write_report(dir, nlohmann::ordered_json::array({labelled}), warning);
    EXPECT_EQ(lines_starting(slurp(dir + "/plots.gp"), "set title ")[0],
              "set title \"Bandwidth, 64 B messages\\nhdr-cx6, HDR 4x, PCIe Gen4 x8, cpu.cores=4, seed 7, 10 "
              "iters\"");
    std::filesystem::remove_all(dir);
}

TEST(HcasimSpeed, speed_prints_packets_per_second_slowdown_and_event_equivalents) {
    // Wall-clock figures: only their form is checked (benchmarks print the numbers).
    const result r = run("--workload write_bw --size 4096 --iters 200 --speed");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" speed: 400 wire packets in "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" packets per wall second; slowdown "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" SystemC timed events per second: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" event-equivalents per wire packet\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" speed: max RSS "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" speed: node0.hca: "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" bytes per QP (1 QPs), plus "), std::string::npos) << r.out;
    const result e = run("--bench-events 1000");
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(e.out.rfind("SystemC timed events: 1000 in ", 0), 0u) << e.out;
    EXPECT_EQ(run("--bench-events 1000 --workload write_bw").code, 2);
    const result s = run("--workload write_bw --sweep qps=1,2 --speed");
    EXPECT_EQ(s.code, 2);
    EXPECT_EQ(s.err,
              "hcasim: error: --speed measures one run; with --sweep qps run each QP count on its own\n");
}

TEST(HcasimSpeed, lazy_crcs_change_nothing_but_speed) {
    // hca.port.lazy_crc (default true) leaves the CRCs of a packet nothing alters uncomputed;
    // with bit errors injected the link seals the copy it corrupts, so the receiver still drops
    // it. Same table, same counters either way.
    const std::string common =
        "--workload send_bw --size 64,4K --iters 400 --set link.bit_error_rate=1e-6 --seed 5";
    const std::string ja = ::testing::TempDir() + "lazy_a.json", jb = ::testing::TempDir() + "lazy_b.json";
    const result a = run(common + " --stats-json '" + ja + "'");
    const result b = run(common + " --set hca.port.lazy_crc=false --stats-json '" + jb + "'");
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    const auto ca = nlohmann::json::parse(slurp(ja))["counters"],
               cb = nlohmann::json::parse(slurp(jb))["counters"];
    EXPECT_EQ(ca, cb);
    const uint64_t corrupted =
        ca["node0.link.corrupted"].get<uint64_t>() + ca["node1.link.corrupted"].get<uint64_t>();
    EXPECT_GT(corrupted, 0u) << "bit errors happened";
    uint64_t bad = 0;
    for (const char* k : {"node0.hca.port.rx_bad_vcrc", "node0.hca.port.rx_bad_icrc",
                          "node1.hca.port.rx_bad_vcrc", "node1.hca.port.rx_bad_icrc"})
        bad += ca[k].get<uint64_t>();
    EXPECT_EQ(bad, corrupted) << "every corrupted packet failed a CRC";
    std::remove(ja.c_str());
    std::remove(jb.c_str());
}

TEST(HcasimSpeed, huge_pages_change_nothing_but_speed) {
    // memory.huge_pages (default true) backs simulated host memory with 2 MiB aligned slabs that
    // ask for transparent huge pages; the bytes, the table and every counter are the same.
    const std::string common = "--workload write_bw --size 64,4K --qps 64 --iters 16 --verify";
    const std::string ja = ::testing::TempDir() + "huge_a.json", jb = ::testing::TempDir() + "huge_b.json";
    const result a = run(common + " --stats-json '" + ja + "'");
    const result b = run(common + " --set memory.huge_pages=false --stats-json '" + jb + "'");
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(a.out, b.out);
    const auto ca = nlohmann::json::parse(slurp(ja))["counters"],
               cb = nlohmann::json::parse(slurp(jb))["counters"];
    EXPECT_EQ(ca, cb);
    EXPECT_GT(ca["node1.memory.pages"].get<uint64_t>(), 64u) << "every QP has its own buffer pages";
    std::remove(ja.c_str());
    std::remove(jb.c_str());
}

TEST(HcasimQpScale, write_and_read_at_each_qp_count_with_a_summary_and_report) {
    const std::string dir = fresh_dir("qpscale");
    const result r = run("--workload qp_scale --sweep qps=1,4 --iters 100 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    // Four child runs, in order: write_bw at 1 and 4 QPs, then read_bw.
    size_t at = 0;
    for (const char* label : {"== qp_scale write_bw qps=1\n", "== qp_scale write_bw qps=4\n",
                              "== qp_scale read_bw qps=1\n", "== qp_scale read_bw qps=4\n"}) {
        const size_t p = r.out.find(label, at);
        ASSERT_NE(p, std::string::npos) << label << r.out;
        at = p + 1;
    }
    EXPECT_NE(r.out.find(" qp_scale: message rate [Mpps] at 64 B vs QPs\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" #QPs     write_bw       read_bw\n"), std::string::npos) << r.out;
    const auto j = nlohmann::json::parse(slurp(dir + "/results.json"));
    ASSERT_EQ(j["runs"].size(), 4u);
    EXPECT_EQ(j["runs"][3]["workload"], "read_bw");
    EXPECT_EQ(j["runs"][3]["qps"], 4);
    EXPECT_EQ(j["runs"][3]["results"][0]["size_bytes"], 64);
    EXPECT_EQ(j["runs"][3]["results"][0]["iters"], 100);  // per QP
    EXPECT_EQ(j["runs"][3]["results"][0]["messages"], 400);
    EXPECT_TRUE(is_png(dir + "/qps.png"));
    std::filesystem::remove_all(dir);
    const result q = run("--workload qp_scale --qps 4");
    EXPECT_EQ(q.code, 2);
    EXPECT_EQ(
        q.err,
        "hcasim: error: qp_scale sweeps the QP count: give the counts with --sweep qps=LIST, not --qps\n");
    // A configuration that fixes the QP budget stands: too few QPs is the workload's clear error.
    const result b = run("--workload qp_scale --sweep qps=2048 --iters 10 --set hca.max_qps=1024");
    EXPECT_EQ(b.code, 1);
    EXPECT_NE(b.err.find("--qps 2048: node"), std::string::npos) << b.err;
    EXPECT_NE(b.err.find("raise hca.max_qps"), std::string::npos) << b.err;
}

TEST(HcasimStats, pcie_traffic_is_counted_by_kind) {
    const std::string js = ::testing::TempDir() + "kinds.json";
    const result r = run("--workload send_bw --size 64 --iters 1000 --stats-json '" + js + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto c = nlohmann::json::parse(slurp(js))["counters"];
    auto v = [&](const char* k) { return c[k].get<uint64_t>(); };
    // Receiver: each SEND's 64 payload bytes written and one 64-byte CQE; a 32-byte receive WQE
    // read for each (posted ahead, so at least as many as were consumed).
    EXPECT_EQ(v("node1.hca.dma_mux.payload_write_bytes"), 64u * 1000u);
    EXPECT_EQ(v("node1.hca.dma_mux.cqe_write_bytes"), 64u * 1000u);
    EXPECT_GE(v("node1.hca.dma_mux.wqe_fetch_bytes"), 32u * 1000u);
    EXPECT_EQ(v("node1.hca.dma_mux.payload_read_bytes"), 0u);
    // Sender: the payload read once per SEND; its single WQEs come through the inline window.
    EXPECT_EQ(v("node0.hca.dma_mux.payload_read_bytes"), 64u * 1000u);
    EXPECT_EQ(v("node0.hca.dma_mux.payload_write_bytes"), 0u);
    std::remove(js.c_str());
}

TEST(HcasimBreakdown, write_and_send_latency_break_down_into_stages_that_sum_to_the_latency) {
    for (const char* w : {"write_lat", "send_lat"}) {
        const std::string js = ::testing::TempDir() + "breakdown.json";
        const result r =
            run(std::string("--workload ") + w + " --size 2,4096 --iters 101 --stats-json '" + js + "'");
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_NE(r.out.find(" breakdown 2 B, one way, us: host post + MMIO doorbell "), std::string::npos)
            << r.out;
        const auto j = nlohmann::json::parse(slurp(js));
        for (const auto& res : j["results"]) {
            ASSERT_TRUE(res.contains("breakdown_us")) << w;
            const auto& b = res["breakdown_us"];
            EXPECT_EQ(b.size(), 7u);
            double sum = 0;
            for (const auto& [stage, us] : b.items()) {
                EXPECT_GE(us.get<double>(), 0.0) << stage;
                sum += us.get<double>();
            }
            // The traced iteration is one of identical ping-pongs: its stages add up to the
            // typical latency (half the round trip).
            EXPECT_NEAR(sum, res["lat_typical_us"].get<double>(), 0.01) << w << " " << res["size_bytes"];
            // A 4 KiB message spends longer in the requester (payload read, serialisation) than 2 B.
            if (res["size_bytes"] == 4096) {
                EXPECT_GT(
                    b["requester: pipeline, payload DMA read, serialisation"].get<double>(),
                    j["results"][0]["breakdown_us"]["requester: pipeline, payload DMA read, serialisation"]
                        .get<double>());
            }
        }
        std::remove(js.c_str());
    }
}

TEST(HcasimBreakdown, read_and_atomic_latency_break_the_round_trip_down) {
    for (const char* w : {"read_lat", "atomic_lat"}) {
        const bool read = std::string(w) == "read_lat";
        const std::string js = ::testing::TempDir() + "breakdown_rt.json";
        const result r = run(std::string("--workload ") + w + (read ? " --size 8,4096" : "") +
                             " --iters 101 --stats-json '" + js + "'");
        ASSERT_EQ(r.code, 0) << r.err;
        EXPECT_NE(r.out.find(" breakdown 8 B, round trip, us: host post + MMIO doorbell "), std::string::npos)
            << r.out;
        const auto j = nlohmann::json::parse(slurp(js));
        const std::string responder = read ? "responder: pipeline, payload DMA read, serialisation"
                                           : "responder: pipeline, atomic at host memory, serialisation";
        for (const auto& res : j["results"]) {
            ASSERT_TRUE(res.contains("breakdown_us")) << w;
            const auto& b = res["breakdown_us"];
            EXPECT_EQ(b.size(), 8u);
            double sum = 0;
            for (const auto& [stage, us] : b.items()) {
                EXPECT_GE(us.get<double>(), 0.0) << stage;
                sum += us.get<double>();
            }
            // perftest reports the whole round trip for READ and atomics: the stages add up to it.
            EXPECT_NEAR(sum, res["lat_typical_us"].get<double>(), 0.01) << w << " " << res["size_bytes"];
            // The responder's part holds a host memory round trip (pcie.read_latency_ns = 535 ns).
            EXPECT_GT(b[responder].get<double>(), 0.535) << w;
            EXPECT_NEAR(b["cable, switch and receive pipeline"].get<double>(),
                        b["cable back, receive pipeline"].get<double>(), 0.001);
        }
        if (read) {  // 4 KiB: more responder (read and serialise) and requester (write) time than 8 B
            const auto& small = j["results"][0]["breakdown_us"];
            const auto& big = j["results"][1]["breakdown_us"];
            EXPECT_GT(big[responder].get<double>(), small[responder].get<double>());
            EXPECT_GT(big["requester: data DMA write, CQE"].get<double>(),
                      small["requester: data DMA write, CQE"].get<double>());
        }
        std::remove(js.c_str());
    }
}
