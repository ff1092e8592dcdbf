// hcasim --sweep KEY=LIST over any configuration key (issue 31): keys and values checked before
// any point runs, the cross product of several sweeps (the first outermost), points run in
// parallel (--jobs) with the same output for any --jobs, the swept values in the merged JSON and
// the report's CSV; and --report DIR refusing a non-empty directory unless --replace.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;
using nlohmann::json;

result run(const std::string& args, const std::string& shell = "") {
    return hcasim::test::run_hcasim(args, "sweep", shell);
}

std::vector<std::string> lines(const std::string& text) { return hcasim::test::lines_of(text); }
std::vector<std::string> split(const std::string& s, char sep) { return hcasim::test::split_fields(s, sep); }

/// A merged sweep JSON without what two runs of one configuration may differ in: the "run"
/// block and each run's wall-clock figures.
json deterministic_sweep(json j) {
    j.erase("run");
    for (json& r : j["runs"]) r = hcasim::test::deterministic_part(r);
    return j;
}

/// Runs `args` with --stats-json; the JSON it wrote.
json stats_of(const std::string& args, const std::string& tag, result* r) {
    json j;
    *r = hcasim::test::run_hcasim_stats(args, tag, &j);
    return j;
}

}  // namespace

TEST(HcasimSweep, an_unknown_sweep_key_exits_2_naming_it_before_any_point_runs) {
    const result r = run("--workload write_bw --size 64 --iters 10 --sweep pcie.lane=8,16");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --sweep pcie.lane=8: unknown configuration key 'pcie.lane' (--sweep); --sweep "
              "takes size, qps, threads or a key hcasim --help-config lists\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimSweep, a_bad_value_exits_2_naming_key_and_value_before_any_point_runs) {
    // 8 is a good value, 3 is not a power of two: the point with 8 does not run either.
    const result r = run("--workload write_bw --size 64 --iters 10 --sweep pcie.lanes=8,3");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --sweep pcie.lanes=3: bad value '3' for key 'node0.pcie.lanes' (--sweep): "
              "expected a power of 2\n");
    EXPECT_EQ(r.out, "");
    // The wrong type, in the second key of a cross product; node-prefixed keys as --set takes them.
    const result t =
        run("--workload write_bw --size 64 --iters 10 --sweep pcie.lanes=8 --sweep node1.link.width=4,x");
    EXPECT_EQ(t.code, 2);
    EXPECT_EQ(t.err.rfind("hcasim: error: --sweep pcie.lanes=8 node1.link.width=x: bad value 'x' for key "
                          "'node1.link.width' (--sweep): expected",
                          0),
              0u)
        << t.err;
    EXPECT_EQ(t.out, "");
}

TEST(HcasimSweep, an_empty_list_an_empty_value_and_a_key_swept_twice_exit_2) {
    struct bad {
        const char* args;
        const char* err;
    };
    const bad cases[] = {
        {"--sweep pcie.lanes=", "hcasim: error: --sweep pcie.lanes=: an empty list\n"},
        {"--sweep pcie.lanes=8,,16",
         "hcasim: error: --sweep pcie.lanes=8,,16: an empty value (expected a comma-separated list)\n"},
        {"--sweep pcie.lanes=8 --sweep link.width=1 --sweep pcie.lanes=16",
         "hcasim: error: --sweep pcie.lanes: swept twice (one --sweep per key)\n"},
        {"--sweep link.drop_rate=0,0.1..0.5",
         "hcasim: error: --sweep link.drop_rate=0,0.1..0.5: '0.1..0.5': A..B takes whole numbers (the powers "
         "of "
         "two from A to B)\n"},
        {"--sweep =4",
         "hcasim: error: --sweep: expected KEY=LIST (size, qps, threads or a configuration key), "
         "got '=4'\n"},
        {"--sweep pcie.lanes=4,8 --record /dev/null",
         "hcasim: error: --record records one run; --sweep pcie.lanes makes several\n"},
        {"--jobs 2",
         "hcasim: error: --jobs runs the points of a --sweep qps, threads or KEY (or qp_scale) at "
         "once; this run has one point\n"},
        {"--sweep pcie.lanes=4,8 --jobs 0",
         "hcasim: error: --jobs: expected an integer in [1,1024], got '0'\n"},
    };
    for (const bad& c : cases) {
        const result r = run(std::string("--workload write_bw --size 64 --iters 10 ") + c.args);
        EXPECT_EQ(r.code, 2) << c.args;
        EXPECT_EQ(r.err, c.err) << c.args;
        EXPECT_EQ(r.out, "") << c.args;
    }
}

TEST(HcasimSweep, two_sweeps_give_their_cross_product_first_outermost_with_point_values_and_csv_columns) {
    const std::string dir = hcasim::test::empty_dir("sweep_cross");
    result r;
    const json j = stats_of(
        "--workload write_bw --size 64,4K --iters 20 --set cpu.cores=4 --sweep "
        "link.width=1,4 --sweep qps=1,2 --report '" +
            dir + "'",
        "cross", &r);
    ASSERT_EQ(r.code, 0) << r.err;
    const char* labels[] = {"link.width=1 qps=1", "link.width=1 qps=2", "link.width=4 qps=1",
                            "link.width=4 qps=2"};
    size_t at = 0;
    for (const char* l : labels) {
        const size_t p = r.out.find(std::string("== --sweep ") + l + "\n", at);
        ASSERT_NE(p, std::string::npos) << l << "\n" << r.out;
        at = p + 1;
    }
    EXPECT_EQ(j["sweep"], json::array({"link.width", "qps"}));
    ASSERT_EQ(j["runs"].size(), 4u);
    for (size_t k = 0; k < 4; ++k) {
        const std::string width = k < 2 ? "1" : "4", qps = k % 2 ? "2" : "1";
        EXPECT_EQ(j["runs"][k]["point"], json({{"link.width", width}, {"qps", qps}})) << k;
        EXPECT_EQ(j["runs"][k]["qps"], std::stoi(qps)) << k;
        EXPECT_EQ(j["runs"][k]["config"]["node0.link.width"], width) << k;
        ASSERT_EQ(j["runs"][k]["results"].size(), 2u) << "each point runs every size";
    }
    // The report: the swept configuration key a column after the label (qps has its own).
    const auto csv = lines(slurp(dir + "/results.csv"));
    ASSERT_EQ(csv.size(), 1u + 4 * 2);
    EXPECT_EQ(
        csv[0],
        "workload,qps,size_bytes,iters,bw_gbps,msg_rate_mpps,lat_typical_us,lat_min_us,lat_p99_us,lat_avg_us,"
        "lat_max_us,threads,label,link.width");
    for (size_t k = 1; k < csv.size(); ++k) {
        const auto f = split(csv[k], ',');
        ASSERT_EQ(f.size(), 14u) << csv[k];
        const size_t run = (k - 1) / 2;
        EXPECT_EQ(f[1], run % 2 ? "2" : "1") << csv[k];
        EXPECT_EQ(f[2], k % 2 ? "64" : "4096") << csv[k];
        EXPECT_EQ(f[12], "cpu.cores=4") << csv[k];
        EXPECT_EQ(f[13], run < 2 ? "1" : "4") << csv[k];
    }
    const json report = json::parse(slurp(dir + "/results.json"));
    EXPECT_EQ(report["sweep"], j["sweep"]);
    EXPECT_EQ(report["runs"][3]["point"], j["runs"][3]["point"]);
    EXPECT_EQ(report["runs"][3]["label"], "cpu.cores=4");
    std::filesystem::remove_all(dir);
}

TEST(HcasimSweep, the_label_column_names_configs_and_sets_and_is_quoted_when_it_holds_a_comma) {
    const std::string dir = hcasim::test::empty_dir("sweep_quote");
    const std::string ini = ::testing::TempDir() + "sweep,quote_" + std::to_string(getpid()) + ".ini";
    std::ofstream(ini) << "[link]\nwidth = 4\n";
    const result r = run("--workload write_bw --size 64 --iters 10 --config '" + ini +
                         "' --set link.seed=7 --sweep pcie.lanes=8,16 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const auto csv = lines(slurp(dir + "/results.csv"));
    ASSERT_EQ(csv.size(), 3u);
    const std::string tail = ",1,\"" + ini + " link.seed=7\",16";
    ASSERT_GT(csv[2].size(), tail.size());
    EXPECT_EQ(csv[2].substr(csv[2].size() - tail.size()), tail) << csv[2];
    std::remove(ini.c_str());
    std::filesystem::remove_all(dir);
}

TEST(HcasimSweep, jobs_1_and_jobs_2_give_identical_stdout_and_merged_json) {
    const std::string args =
        "--workload write_bw --size 64,1K --iters 20 --sweep pcie.lanes=4,8,16 --sweep qps=1,2";
    result one, two;
    const json a = stats_of(args + " --jobs 1", "jobs1", &one),
               b = stats_of(args + " --jobs 2", "jobs2", &two);
    ASSERT_EQ(one.code, 0) << one.err;
    ASSERT_EQ(two.code, 0) << two.err;
    EXPECT_EQ(one.out, two.out);
    EXPECT_EQ(one.err, two.err);
    ASSERT_EQ(a["runs"].size(), 6u);
    EXPECT_EQ(deterministic_sweep(a), deterministic_sweep(b));
}

TEST(HcasimSweep, sweeping_link_width_changes_the_bandwidth) {
    result r;
    const json j = stats_of("--workload write_bw --size 64K --iters 20 --sweep link.width=1,4", "width", &r);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(j["runs"].size(), 2u);
    const double x1 = j["runs"][0]["results"][0]["bw_gbps"], x4 = j["runs"][1]["results"][0]["bw_gbps"];
    ASSERT_GT(x1, 0);
    // Four lanes carry about four times one lane's data (the link is the bottleneck at 64 KiB).
    EXPECT_GT(x4, 3.5 * x1) << x1 << " vs " << x4;
    EXPECT_LT(x4, 4.1 * x1) << x1 << " vs " << x4;
}

TEST(HcasimSweep, a_failing_point_stops_the_sweep_with_its_exit_status_naming_it) {
    // link.drop_rate=1 is a valid value that drops every packet: that point's run fails (RC retries
    // exhausted); with --jobs 1 the point after it never starts.
    const result r = run("--workload write_bw --size 64 --iters 10 --jobs 1 --sweep link.drop_rate=0,1,0.5");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.out.find("== --sweep link.drop_rate=0\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("== --sweep link.drop_rate=1\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("link.drop_rate=0.5"), std::string::npos) << r.out;
    const auto err = lines(r.err);
    ASSERT_FALSE(err.empty());
    EXPECT_EQ(err.back(), "hcasim: run failed: --sweep link.drop_rate=1: exit status 1; 1 point not run");
}

TEST(HcasimSweep, progress_shows_points_done_on_stderr_when_asked) {
    const result r = run("--workload write_bw --size 64 --iters 10 --sweep pcie.lanes=8,16 --jobs 1",
                         "export HCASIM_PROGRESS=1; ");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.err.find("\rsweep: 0/2 points done\x1b[K"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\rsweep: 2/2 points done"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find('\r'), std::string::npos) << "stdout stays clean";
}

TEST(HcasimSweep, a_non_empty_report_directory_exits_2_naming_it) {
    const std::string dir = hcasim::test::empty_dir("sweep_nonempty");
    std::ofstream(dir + "/results.csv") << "old";
    const result r = run("--workload write_bw --size 64 --iters 10 --report '" + dir + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --report: '" + dir +
                  "' is not empty (results.csv); give a new or empty directory, or --replace to replace "
                  "the report in it\n");
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(slurp(dir + "/results.csv"), "old");
    // A file a report never writes: refused even with --replace, and nothing is deleted.
    std::ofstream(dir + "/notes.txt") << "mine";
    const result f = run("--workload write_bw --size 64 --iters 10 --replace --report '" + dir + "'");
    EXPECT_EQ(f.code, 2);
    EXPECT_EQ(f.err, "hcasim: error: --report --replace: '" + dir +
                         "/notes.txt' is not a file a report writes (results.*, flows.csv, plots.gp, *.png): "
                         "remove it or give another directory\n");
    EXPECT_EQ(slurp(dir + "/results.csv"), "old");
    EXPECT_EQ(slurp(dir + "/notes.txt"), "mine");
    std::filesystem::remove_all(dir);
}

TEST(HcasimSweep, replace_removes_a_stale_latency_png) {
    const std::string dir = hcasim::test::empty_dir("sweep_replace");
    ASSERT_EQ(run("--workload send_lat --size 2,64 --iters 20 --report '" + dir + "'").code, 0);
    const bool plots = std::filesystem::exists(dir + "/latency.png");  // gnuplot installed
    if (!plots) std::ofstream(dir + "/latency.png") << "a plot";       // as an earlier report left it
    const result r = run("--workload write_bw --size 64,4K --iters 20 --replace --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(std::filesystem::exists(dir + "/latency.png")) << "stale plot survived";
    const auto csv = lines(slurp(dir + "/results.csv"));
    ASSERT_EQ(csv.size(), 3u);
    EXPECT_EQ(csv[1].rfind("write_bw,", 0), 0u) << csv[1];
    if (plots) {
        EXPECT_TRUE(std::filesystem::exists(dir + "/bandwidth.png"));
    }
    std::filesystem::remove_all(dir);
}

TEST(HcasimSweep, compare_pairs_config_sweeps_point_by_point_and_refuses_other_points) {
    const std::string a = ::testing::TempDir() + "sweep_cmp_a_" + std::to_string(getpid()) + ".json",
                      b = ::testing::TempDir() + "sweep_cmp_b_" + std::to_string(getpid()) + ".json";
    const std::string args = "--workload write_bw --size 64 --iters 10 --sweep pcie.lanes=";
    ASSERT_EQ(run(args + "8,16 --stats-json '" + a + "'").code, 0);
    ASSERT_EQ(run(args + "8,4 --stats-json '" + b + "'").code, 0);
    const result same = run("compare '" + a + "' '" + a + "'");
    EXPECT_EQ(same.code, 0) << same.err;
    EXPECT_NE(same.out.find(" write_bw qps=1 pcie.lanes=16 64 B "), std::string::npos) << same.out;
    const result other = run("compare '" + a + "' '" + b + "'");
    EXPECT_EQ(other.code, 2);
    EXPECT_EQ(other.err, "hcasim: error: compare: cannot compare '" + a + "' with '" + b + "': run 2: '" + a +
                             "' ran write_bw qps=1 pcie.lanes=16, '" + b + "' write_bw qps=1 pcie.lanes=4\n");
    std::remove(a.c_str());
    std::remove(b.c_str());
}

TEST(HcasimSweep, a_range_of_whole_numbers_sweeps_the_powers_of_two) {
    const result r = run("--workload write_bw --size 64 --iters 10 --sweep pcie.lanes=4..16");
    ASSERT_EQ(r.code, 0) << r.err;
    std::string labels;
    for (const std::string& l : lines(r.out))
        if (l.rfind("== ", 0) == 0) labels += l + "\n";
    EXPECT_EQ(labels, "== --sweep pcie.lanes=4\n== --sweep pcie.lanes=8\n== --sweep pcie.lanes=16\n");
}
