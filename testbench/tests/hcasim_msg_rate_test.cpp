// hcasim --workload msg_rate: the message rate of 64 B messages (any --size) of workload.op
// (write, read, send, ud_send), run as the matching bandwidth workload. The report's message
// count is the messages the HCA sent (its counters), its rate is that count over the measured
// interval, which lies within the run's simulated time; --sweep qps gives a row per count
// (--sweep threads: hcasim_threads_sweep_test.cpp); a bad operation, the key without msg_rate, an
// oversized datagram and two swept dimensions are one-line errors with exit status 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>

#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

result run(const std::string& args) { return hcasim::test::run_hcasim(args, "msg_rate"); }

/// A msg_rate run of `op` over 3 QPs, 1000 messages each (--iters counts per QP): 3000 in all;
/// fails the test unless it exits 0 cleanly.
nlohmann::json run_op(const std::string& op) {
    nlohmann::json j;
    const result r = hcasim::test::run_hcasim_stats(
        "--workload msg_rate --set workload.op=" + op + " --qps 3 --iters 1000", "msg_rate", &j);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(
        r.out.find(" hcasim msg_rate (seed 1): " + op + " (as " + op + "_bw), 3 QPs x 1000 iterations\n"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(" #bytes     #messages    MsgRate[Mpps]"), std::string::npos) << r.out;
    return j;
}

/// The row's figures agree exactly: 64 B messages, `messages` of them, rate = messages over the
/// interval (ns), bandwidth = 64 B per message at that rate; the interval within the run.
void expect_consistent_row(const nlohmann::json& j, const std::string& op) {
    ASSERT_TRUE(j.contains("results")) << op;
    EXPECT_EQ(j["workload"], "msg_rate");
    EXPECT_EQ(j["op"], op);
    EXPECT_EQ(j["bandwidth_workload"], op + "_bw");
    EXPECT_EQ(j["config"]["workload.op"], op);
    const auto& row = j["results"][0];
    EXPECT_EQ(row["size_bytes"].get<uint64_t>(), 64u);
    EXPECT_EQ(row["iters"].get<uint64_t>(), 1000u);
    EXPECT_EQ(row["messages"].get<uint64_t>(), 3000u);
    const uint64_t interval = row["interval_ns"].get<uint64_t>();
    const double mpps = row["msg_rate_mpps"].get<double>();
    ASSERT_GT(interval, 0u);
    EXPECT_LE(interval, j["sim"]["sim_time_ns"].get<uint64_t>());
    EXPECT_NEAR(mpps, 3000.0 * 1000.0 / double(interval), 1e-9 * mpps);
    EXPECT_NEAR(row["bw_gbps"].get<double>(), mpps * 64 * 8 / 1000.0, 1e-9 * mpps);
}

uint64_t counter(const nlohmann::json& j, const std::string& key) {
    return j["counters"][key].get<uint64_t>();
}

}  // namespace

TEST(HcasimMsgRate, write_reports_the_exact_message_count_and_a_rate_of_the_simulated_interval) {
    const nlohmann::json j = run_op("write");
    expect_consistent_row(j, "write");
    // One 64 B WRITE is one packet: the requester sent exactly the reported messages.
    EXPECT_EQ(counter(j, "node0.hca.transport_engine.tx_packets"), 3000u);
    EXPECT_EQ(counter(j, "node0.hca.transport_engine.acks_received"), 3000u);
}

TEST(HcasimMsgRate, read_reports_the_exact_message_count_and_a_rate_of_the_simulated_interval) {
    const nlohmann::json j = run_op("read");
    expect_consistent_row(j, "read");
    EXPECT_EQ(counter(j, "node0.hca.transport_engine.read_requests"), 3000u);
    EXPECT_EQ(counter(j, "node0.hca.transport_engine.read_responses_received"), 3000u);
}

TEST(HcasimMsgRate, ud_send_reports_the_exact_message_count_and_a_rate_of_the_simulated_interval) {
    const nlohmann::json j = run_op("ud_send");
    expect_consistent_row(j, "ud_send");
    // The receiver completed every datagram and one end-of-stream marker per QP.
    EXPECT_EQ(counter(j, "node1.hca.transport_engine.recv_completions"), 3000u + 3u);
}

TEST(HcasimMsgRate, any_size_and_the_default_write) {
    nlohmann::json j;
    const result r =
        hcasim::test::run_hcasim_stats("--workload msg_rate --size 256 --iters 500", "msg_rate", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(j["op"], "write");
    EXPECT_EQ(j["results"][0]["size_bytes"].get<uint64_t>(), 256u);
    EXPECT_EQ(j["results"][0]["messages"].get<uint64_t>(), 500u);
}

TEST(HcasimMsgRate, sweep_qps_1_2_produces_two_rows) {
    nlohmann::json j;
    const std::string dir = hcasim::test::empty_dir("msg_rate_report");
    const result r = hcasim::test::run_hcasim_stats(
        "--workload msg_rate --iters 500 --sweep qps=1,2 --report '" + dir + "'", "msg_rate", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("== --sweep qps=1\n"), std::string::npos);
    EXPECT_NE(r.out.find("== --sweep qps=2\n"), std::string::npos);
    ASSERT_EQ(j["runs"].size(), 2u);
    for (unsigned k = 0; k < 2; ++k) {
        EXPECT_EQ(j["runs"][k]["workload"], "msg_rate");
        EXPECT_EQ(j["runs"][k]["qps"].get<unsigned>(), k + 1);
        ASSERT_EQ(j["runs"][k]["results"].size(), 1u);
        // Each point: --iters per QP.
        EXPECT_EQ(j["runs"][k]["results"][0]["iters"].get<uint64_t>(), 500u);
        EXPECT_EQ(j["runs"][k]["results"][0]["messages"].get<uint64_t>(), 500u * (k + 1));
    }
    // The report: one CSV row per QP count, the rate against QPs plotted.
    const std::string csv = hcasim::test::slurp(dir + "/results.csv");
    EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
    EXPECT_NE(csv.find("\nmsg_rate,1,64,500,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("\nmsg_rate,2,64,500,"), std::string::npos) << csv;
    if (r.err.find("no plots") == std::string::npos) {  // gnuplot installed
        EXPECT_NE(hcasim::test::slurp(dir + "/plots.gp").find("set output 'qps.png'"), std::string::npos);
    }
    std::filesystem::remove_all(dir);
}

TEST(HcasimMsgRate, bad_op_name_exits_2_naming_the_key) {
    const result r = run("--workload msg_rate --set workload.op=ud_snd");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: bad value 'ud_snd' for key 'workload.op' (--set): expected one of "
              "write|read|send|ud_send\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimMsgRate, op_without_msg_rate_is_an_unknown_key) {
    const result r = run("--workload write_bw --iters 10 --set workload.op=read");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: unknown configuration key 'workload.op' (--set)\n");
}

TEST(HcasimMsgRate, ud_send_larger_than_the_mtu_exits_2_naming_the_op) {
    const result r = run("--workload msg_rate --set workload.op=ud_send --size 8K");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --size: 8192 bytes exceeds the MTU (4096 bytes, --mtu): ud_send_bw sends each "
              "message as one UD datagram (msg_rate, workload.op=ud_send)\n");
}

TEST(HcasimMsgRate, sweep_qps_and_sweep_threads_together_exit_2) {
    const result both = run("--workload msg_rate --sweep qps=1,2 --sweep threads=1,2");
    EXPECT_EQ(both.code, 2);
    EXPECT_EQ(both.err,
              "hcasim: error: --sweep threads=...: one dimension per run (another --sweep qps or threads is "
              "given)\n");
}
