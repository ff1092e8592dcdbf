// hcasim compare A.json B.json: the same run twice is equal (exit 0), a changed parameter is a
// difference beyond the tolerance (exit 1, naming the figure and its change), a tolerance above
// the largest change passes; files that cannot be compared (other workload, other sizes, sweep
// against one run, missing or garbled file, bad option) exit 2 with one line naming the culprit.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;
using json = nlohmann::json;

result compare(const std::string& args) { return hcasim::test::run_hcasim("compare " + args, "compare"); }

/// A file in the test temp dir named after `name` and the process.
std::string temp_path(const std::string& name) {
    return ::testing::TempDir() + "hcasim_compare_" + name + "_" + std::to_string(getpid()) + ".json";
}

const char* const write_bw = "--workload write_bw --size 64,64K --iters 200";

/// The largest relative change |B - A| / |A| over what compare compares: every number of the
/// result rows (but size_bytes), the simulated time and wire packets, every counter.
double largest_change(const json& a, const json& b) {
    double most = 0;
    auto walk = [&most](auto& self, const json& x, const json& y) -> void {
        if (x.is_number()) {
            const double va = x.get<double>(), vb = y.get<double>();
            if (va != vb) most = std::max(most, std::fabs(vb - va) / std::fabs(va));
        } else if (x.is_structured())
            for (auto it = x.begin(); it != x.end(); ++it)
                if (x.is_object() ? it.key() != "size_bytes" : true)
                    self(self, *it, x.is_object() ? y.at(it.key()) : y.at(size_t(it - x.begin())));
    };
    walk(walk, a["results"], b["results"]);
    for (const char* k : {"sim_time_ns", "wire_packets"}) walk(walk, a["sim"][k], b["sim"][k]);
    walk(walk, a["counters"], b["counters"]);
    return most;
}

/// The change as compare prints it ("-46.70%").
std::string printed_change(double a, double b) {
    char s[64];
    std::snprintf(s, sizeof s, "%+.2f%%", (b - a) / std::fabs(a) * 100.0);
    return s;
}

}  // namespace

/// Removes the files a test wrote.
class HcasimCompare : public ::testing::Test {
protected:
    /// Runs hcasim with `args` and --stats-json; returns the file's path.
    std::string stats(const std::string& args, const std::string& name) {
        const std::string path = file(name);
        const result r = hcasim::test::run_hcasim(args + " --stats-json '" + path + "'", "compare_" + name);
        EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
        return path;
    }
    /// A file name of the test's (not created; removed at the end).
    std::string file(const std::string& name) {
        files_.push_back(temp_path(name));
        std::remove(files_.back().c_str());
        return files_.back();
    }
    void TearDown() override {
        for (const std::string& f : files_) std::remove(f.c_str());
    }

private:
    std::vector<std::string> files_;
};

TEST_F(HcasimCompare, same_run_twice_is_within_the_default_exact_tolerance) {
    const std::string a = stats(write_bw, "same_a"), b = stats(write_bw, "same_b");
    const size_t counters = json::parse(slurp(a))["counters"].size();
    const result r = compare("'" + a + "' '" + b + "'");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("configuration: the same\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("counters: 0 of " + std::to_string(counters) + " differ\n"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(" write_bw 65536 B  bw_gbps "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("beyond  "), std::string::npos) << r.out;
    // wall_s and the like differ from run to run and are not compared.
    EXPECT_EQ(r.out.find("wall_s"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" counters compared; all within the tolerance of 0%\n"), std::string::npos) << r.out;
}

TEST_F(HcasimCompare, changed_parameter_exits_1_naming_the_changed_figure_and_its_change) {
    const std::string a = stats(write_bw, "lanes16"),
                      b = stats(std::string(write_bw) + " --set pcie.lanes=8", "lanes8");
    const json ja = json::parse(slurp(a)), jb = json::parse(slurp(b));
    const double bw_a = ja["results"][1]["bw_gbps"], bw_b = jb["results"][1]["bw_gbps"];
    ASSERT_LT(bw_b, bw_a) << "8 PCIe lanes carry less than the 100 Gb/s link";
    const result r = compare("'" + a + "' '" + b + "'");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    // The configuration difference is information, in the output.
    EXPECT_NE(
        r.out.find("configuration: 2 keys differ (information, not compared)\n node0.pcie.lanes 16 -> 8\n"
                   " node1.pcie.lanes 16 -> 8\n"),
        std::string::npos)
        << r.out;
    const std::string change = printed_change(bw_a, bw_b);
    EXPECT_NE(r.out.find(" write_bw 65536 B bw_gbps " + change), std::string::npos) << change << "\n"
                                                                                    << r.out;
    EXPECT_NE(r.out.find(" beyond the tolerance of 0%: "), std::string::npos) << r.out;
    // The counters that differ are listed, the largest change first.
    EXPECT_NE(r.out.find("\n node0.pcie.downstream_busy_ps "), std::string::npos) << r.out;
}

TEST_F(HcasimCompare, tolerance_that_covers_the_largest_change_exits_0_and_one_just_below_exits_1) {
    const std::string a = stats(write_bw, "tol16"),
                      b = stats(std::string(write_bw) + " --set pcie.lanes=8", "tol8");
    const double most = largest_change(json::parse(slurp(a)), json::parse(slurp(b))) * 100.0;
    ASSERT_GT(most, 1.0);
    ASSERT_TRUE(std::isfinite(most)) << "a counter from 0 is beyond every tolerance";
    char above[32], below[32];
    std::snprintf(above, sizeof above, "%.3f%%", most + 0.01);
    std::snprintf(below, sizeof below, "%.3f", most - 0.01);  // a bare number is a percentage too
    const result ok = compare("'" + a + "' '" + b + "' --tolerance " + above);
    EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
    EXPECT_NE(ok.out.find("all within the tolerance of " + std::string(above) + "\n"), std::string::npos)
        << ok.out;
    const result bad = compare("'" + a + "' '" + b + "' --tolerance " + below);
    EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
    EXPECT_NE(bad.out.find("beyond the tolerance of " + std::string(below) + "%"), std::string::npos)
        << bad.out;
}

TEST_F(HcasimCompare, only_results_leaves_the_counters_out) {
    const std::string a = stats(write_bw, "only16"),
                      b = stats(std::string(write_bw) + " --set pcie.lanes=8", "only8");
    const result r = compare("--only-results '" + a + "' '" + b + "'");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_EQ(r.out.find("counters"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("node0.pcie.downstream_busy_ps"), std::string::npos) << r.out;
}

TEST_F(HcasimCompare, mismatched_workloads_exit_2_with_the_reason) {
    const std::string a = stats(write_bw, "wbw"),
                      b = stats("--workload read_bw --size 64,64K --iters 200", "rbw");
    const result r = compare("'" + a + "' '" + b + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "hcasim: error: compare: cannot compare '" + a + "' with '" + b + "': '" + a +
                         "' ran write_bw, '" + b + "' read_bw\n");
}

TEST_F(HcasimCompare, mismatched_sizes_exit_2_naming_the_missing_row) {
    const std::string a = stats(write_bw, "two_sizes"),
                      b = stats("--workload write_bw --size 64 --iters 200", "one_size");
    const result r = compare("'" + a + "' '" + b + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: compare: cannot compare '" + a + "' with '" + b + "': '" + b +
                         "' has no result write_bw 65536 B (row 2 of '" + a + "'; '" + b + "' has 1 row)\n");
}

TEST_F(HcasimCompare, sweep_against_a_single_run_exits_2_and_sweeps_pair_point_by_point) {
    const std::string one = stats("--workload write_bw --size 64 --iters 50", "single"),
                      s12 = stats("--workload write_bw --size 64 --iters 50 --sweep qps=1,2", "sweep12"),
                      s14 = stats("--workload write_bw --size 64 --iters 50 --sweep qps=1,4", "sweep14");
    const result r = compare("'" + one + "' '" + s12 + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: compare: cannot compare '" + one + "' with '" + s12 + "': '" + one +
                         "' is a single run, '" + s12 + "' a qps sweep of 2 runs\n");
    const result points = compare("'" + s12 + "' '" + s14 + "'");
    EXPECT_EQ(points.code, 2);
    EXPECT_EQ(points.err, "hcasim: error: compare: cannot compare '" + s12 + "' with '" + s14 +
                              "': run 2: '" + s12 + "' ran write_bw qps=2, '" + s14 + "' write_bw qps=4\n");
    const result same = compare("'" + s12 + "' '" + s12 + "'");
    EXPECT_EQ(same.code, 0) << same.out << same.err;
    EXPECT_NE(same.out.find(" write_bw qps=2 64 B  msg_rate_mpps "), std::string::npos) << same.out;
}

TEST_F(HcasimCompare, missing_file_exits_2_naming_it) {
    const std::string a = stats("--workload write_bw --size 64 --iters 50", "present"), gone = file("gone");
    const result r = compare("'" + a + "' '" + gone + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err,
              "hcasim: error: compare: cannot open stats JSON '" + gone + "': No such file or directory\n");
}

TEST_F(HcasimCompare, garbled_or_foreign_file_exits_2_naming_it) {
    const std::string a = stats("--workload write_bw --size 64 --iters 50", "good");
    const std::string cut = file("cut"), other = file("other");
    const std::string text = slurp(a);
    std::ofstream(cut) << text.substr(0, text.size() / 2);
    std::ofstream(other) << "{\"runs\": 3}\n";
    const result r = compare("'" + cut + "' '" + a + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err.rfind("hcasim: error: compare: '" + cut + "' is not JSON: parse error at line ", 0), 0u)
        << r.err;
    const result f = compare("'" + a + "' '" + other + "'");
    EXPECT_EQ(f.code, 2);
    EXPECT_EQ(f.err,
              "hcasim: error: compare: '" + other + "' is not an hcasim stats JSON (no \"results\" array)\n");
    const result dir = compare("'" + a + "' '" + ::testing::TempDir() + "'");
    EXPECT_EQ(dir.code, 2);
    EXPECT_NE(dir.err.find("Is a directory"), std::string::npos) << dir.err;
}

TEST_F(HcasimCompare, bad_tolerance_or_one_file_exits_2) {
    const std::string a = stats("--workload write_bw --size 64 --iters 50", "opts");
    const result t = compare("'" + a + "' '" + a + "' --tolerance 2x%");
    EXPECT_EQ(t.code, 2);
    EXPECT_EQ(t.err,
              "hcasim: error: compare: --tolerance: expected a percentage like 2% (or 2), got '2x%'\n");
    const result one = compare("'" + a + "'");
    EXPECT_EQ(one.code, 2);
    EXPECT_EQ(one.err,
              "hcasim: error: compare: expected two stats JSON files, got 1 (hcasim compare A.json B.json "
              "[--tolerance P%])\n");
}

TEST_F(HcasimCompare, figures_of_one_file_only_are_counted_not_compared) {
    const std::string plain = stats("--workload write_bw --size 64 --iters 50", "plain"),
                      verified = stats("--workload write_bw --size 64 --iters 50 --verify", "verified");
    const result r = compare("'" + plain + "' '" + verified + "'");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    // verify.bytes_checked, verify.mismatches, verify.bad_completions
    EXPECT_NE(r.out.find("\n (3 figures in one file only, not compared)\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("verify."), std::string::npos) << r.out;
}

TEST_F(HcasimCompare, latency_rows_compare_their_summary_figures_not_each_quantile_of_the_distribution) {
    const std::string lat = "--workload write_lat --size 64 --iters 100";
    const std::string a = stats(lat, "lat_a"), b = stats(lat + " --set pcie.lanes=8", "lat_b");
    const result r = compare("'" + a + "' '" + b + "' --only-results");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.out.find(" write_lat 64 B  lat_p99_us "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("lat_cdf_us"), std::string::npos) << r.out;
    EXPECT_EQ(json::parse(slurp(a))["results"][0]["lat_cdf_us"].size(), 102u);
}
