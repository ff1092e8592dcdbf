// hcasim --sweep threads=LIST: one child process per thread count (a QP per thread unless --qps
// is given), their tables in order, one merged JSON, a summary and, with --report, threads.png
// (message rate and bandwidth vs threads). A run with --threads N > 1 reports each thread's own
// figures from its own completions: messages, active time, message rate, and their spread.
// Sweep values above node0's cpu.cores or --qps are refused before any point runs.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "testbench/tests/hcasim_run.h"

// It runs the hcasim binary; libsystemc still wants an sc_main to link.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

result run(const std::string& args) { return hcasim::test::run_hcasim(args, "threads_sweep"); }

bool is_png(const std::string& path) {
    const std::string b = slurp(path);
    return b.size() > 1000 && b.compare(0, 8, std::string("\x89PNG\r\n\x1a\n", 8)) == 0;
}

}  // namespace

// 64 B WRITEs from one core are bound by the host CPU (the HCA and PCIe are far from busy): the
// second thread, on a core of its own with a QP of its own, raises the message rate.
TEST(HcasimThreadsSweep,
     sweep_threads_1_2_runs_two_points_and_two_threads_beat_one_where_the_host_is_the_bound) {
    const std::string dir = hcasim::test::empty_dir("threads_sweep_report");
    nlohmann::json j;
    const result r = hcasim::test::run_hcasim_stats(
        "--workload msg_rate --iters 2000 --sweep threads=1,2 --set cpu.cores=2 --report '" + dir + "'",
        "threads_sweep", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    const size_t a = r.out.find("== --sweep threads=1\n"), b = r.out.find("== --sweep threads=2\n");
    ASSERT_NE(a, std::string::npos) << r.out;
    ASSERT_NE(b, std::string::npos) << r.out;
    EXPECT_LT(a, b);
    EXPECT_NE(r.out.find(" --sweep threads: message rate per application thread count\n"), std::string::npos)
        << r.out;
    EXPECT_EQ(j["sweep"], nlohmann::json::array({"threads"}));
    ASSERT_EQ(j["runs"].size(), 2u);
    // Without --qps each thread gets a QP of its own; one thread has no per-thread figures.
    EXPECT_EQ(j["runs"][0]["qps"], 1);
    EXPECT_FALSE(j["runs"][0].contains("threads"));
    EXPECT_FALSE(j["runs"][0]["results"][0].contains("threads"));
    EXPECT_EQ(j["runs"][1]["qps"], 2);
    EXPECT_EQ(j["runs"][1]["threads"], 2);
    EXPECT_EQ(j["runs"][1]["results"][0]["threads"].size(), 2u);
    const double one = j["runs"][0]["results"][0]["msg_rate_mpps"].get<double>();
    const double two = j["runs"][1]["results"][0]["msg_rate_mpps"].get<double>();
    ASSERT_GT(one, 0);
    EXPECT_GT(two, 1.5 * one);
    // The report: a CSV row per point (the thread count, then the label), the rate plotted against threads
    // (not against QPs, which only follow the threads here).
    const std::string csv = slurp(dir + "/results.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
    EXPECT_EQ(std::count(csv.begin(), csv.end(), ','), 3 * 12) << "13 fields a line: " << csv;
    EXPECT_NE(csv.find("\nmsg_rate,1,64,"), std::string::npos) << csv;
    EXPECT_NE(csv.find(",1,cpu.cores=2\nmsg_rate,2,64,"), std::string::npos) << csv;
    EXPECT_EQ(csv.substr(csv.size() - 15), ",2,cpu.cores=2\n") << csv;
    EXPECT_NE(r.out.find(", threads.png"), std::string::npos) << r.out;
    EXPECT_TRUE(is_png(dir + "/threads.png"));
    EXPECT_FALSE(std::filesystem::exists(dir + "/qps.png"));
    EXPECT_NE(slurp(dir + "/plots.gp").find("set output 'threads.png'"), std::string::npos);
    std::filesystem::remove_all(dir);
}

// 3 threads over 4 QPs: thread 0 drives QPs 0 and 3, threads 1 and 2 one each, so thread 0
// completes twice the messages of each other. The threads' messages add up to the WRITEs the
// HCA sent (one packet each); each thread's rate is its messages over its own active time, and
// the row's interval is the longest of those.
TEST(HcasimThreadsSweep, per_thread_messages_sum_to_the_total_and_each_rate_is_over_its_own_time) {
    nlohmann::json j;
    const result r = hcasim::test::run_hcasim_stats(
        "--workload write_bw --size 64 --iters 3000 --qps 4 --threads 3 --set cpu.cores=3", "threads_sweep",
        &j);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(j["threads"], 3);
    const auto& row = j["results"][0];
    const auto& th = row["threads"];
    ASSERT_EQ(th.size(), 3u);
    uint64_t sum = 0, longest = 0;
    double lo = 1e300, hi = 0, mean = 0;
    for (unsigned t = 0; t < 3; ++t) {
        EXPECT_EQ(th[t]["thread"], t);
        EXPECT_EQ(th[t]["qps"], t == 0 ? 2 : 1);
        const uint64_t m = th[t]["messages"].get<uint64_t>(), ns = th[t]["active_ns"].get<uint64_t>();
        const double mpps = th[t]["msg_rate_mpps"].get<double>();
        ASSERT_GT(ns, 0u);
        EXPECT_NEAR(mpps, double(m) * 1000.0 / double(ns), 1e-9 * mpps);
        sum += m;
        longest = std::max(longest, ns);
        lo = std::min(lo, mpps);
        hi = std::max(hi, mpps);
        mean += mpps / 3;
    }
    EXPECT_EQ(th[0]["messages"].get<uint64_t>(), 2 * th[1]["messages"].get<uint64_t>());
    EXPECT_EQ(th[1]["messages"], th[2]["messages"]);
    EXPECT_EQ(sum, j["counters"]["node0.hca.transport_engine.tx_packets"].get<uint64_t>());
    const double row_mpps = row["msg_rate_mpps"].get<double>();
    EXPECT_NEAR(row_mpps, double(sum) * 1000.0 / double(longest), 1e-9 * row_mpps);
    EXPECT_LE(longest, j["sim"]["sim_time_ns"].get<uint64_t>());
    const auto& sp = row["thread_spread"]["msg_rate_mpps"];
    EXPECT_DOUBLE_EQ(sp["min"].get<double>(), lo);
    EXPECT_DOUBLE_EQ(sp["max"].get<double>(), hi);
    EXPECT_NEAR(sp["mean"].get<double>(), mean, 1e-12 * mean);
    EXPECT_EQ(row["thread_spread"]["messages"]["max"].get<double>(),
              double(th[0]["messages"].get<uint64_t>()));
    // The text line under the table.
    char line[160];
    std::snprintf(line, sizeof line, " threads 64 B: 3 threads, messages %llu (per thread min %llu, ",
                  static_cast<unsigned long long>(sum),
                  static_cast<unsigned long long>(th[1]["messages"].get<uint64_t>()));
    EXPECT_NE(r.out.find(line), std::string::npos) << r.out;
}

TEST(HcasimThreadsSweep, a_sweep_value_above_cpu_cores_exits_2_naming_cpu_cores_and_the_value) {
    const result r = run("--workload write_bw --size 64 --sweep threads=1,4 --set cpu.cores=2");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --sweep threads: 4 threads: more than node0.cpu.cores (2); each application "
              "thread runs on a core of its own (--set cpu.cores=4)\n");
    EXPECT_EQ(r.out, "") << "refused before any point ran";
}

TEST(HcasimThreadsSweep, a_sweep_value_above_qps_exits_2_naming_both) {
    const result r = run("--workload send_bw --size 64 --qps 2 --sweep threads=1,2,4 --set cpu.cores=4");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --sweep threads: 4 threads with --qps 2: each application thread needs a QP of "
              "its own\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimThreadsSweep, a_qps_sweep_below_threads_exits_2_before_any_point_runs) {
    const result r = run("--workload write_bw --size 64 --threads 2 --set cpu.cores=2 --sweep qps=4,1");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --sweep qps: 1 QP with --threads 2: each application thread needs a QP of its "
              "own\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimThreadsSweep, sweep_threads_with_threads_given_exits_2) {
    const result r = run("--workload write_bw --threads 2 --sweep threads=1,2");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --sweep threads=...: the thread count is already given (--threads)\n");
}

TEST(HcasimThreadsSweep, a_latency_workload_refuses_a_thread_sweep) {
    const result r = run("--workload read_lat --sweep threads=1,2");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --sweep threads: read_lat runs one application thread per node; the bandwidth "
              "workloads take --threads\n");
}

TEST(HcasimThreadsSweep, a_thread_sweep_refuses_a_one_run_output) {
    const result r = run("--workload write_bw --sweep threads=1,2 --record /dev/null");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --record records one run; --sweep threads makes several\n");
}
