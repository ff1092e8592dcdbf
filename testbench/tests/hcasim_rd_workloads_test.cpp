// The reliable datagram workloads (rd_send_lat, rd_send_bw; docs/usage.md#reliable-datagram) as
// users run them: perftest tables, --verify, what one EE context per node allows in flight
// (one message at a time) against workload.eecs of them, retransmission through the EE context
// on a lossy link, and a bad workload.eecs.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <string>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::expect_verified;
using hcasim::test::result;

result run_json(const std::string& args, nlohmann::json* j) {
    return hcasim::test::run_hcasim_stats(args, "rd_workloads", j);
}

/// The first result's field `key` of a run's stats JSON (the run must have succeeded).
double first(const std::string& args, const char* key) {
    nlohmann::json j;
    const result r = run_json(args, &j);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    if (r.code != 0 || j.is_null() || j["results"].empty()) return -1;
    return j["results"][0][key].get<double>();
}

}  // namespace

TEST(HcasimRdWorkloads, rd_send_lat_and_rd_send_bw_print_perftest_tables_and_pass_verify) {
    nlohmann::json j;
    const result lat = run_json("--workload rd_send_lat --size 2,8K --iters 20 --verify", &j);
    ASSERT_EQ(lat.code, 0) << lat.err;
    EXPECT_NE(lat.out.find(" hcasim rd_send_lat (seed 1)\n"), std::string::npos) << lat.out;
    EXPECT_NE(lat.out.find(" #bytes     #iterations  t_min[usec]"), std::string::npos) << lat.out;
    expect_verified(j, "rd_send_lat");
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][1]["size_bytes"], 8192);
    // 8 KiB at MTU 4096 is two packets each way: RD messages span packets, unlike UD's.
    EXPECT_GT(j["results"][1]["lat_typical_us"].get<double>(),
              j["results"][0]["lat_typical_us"].get<double>());

    const result bw =
        run_json("--workload rd_send_bw --size 64,8K --iters 50 --qps 2 --mtu 1024 --verify", &j);
    ASSERT_EQ(bw.code, 0) << bw.err;
    EXPECT_NE(bw.out.find(" #bytes     #iterations  BW average[Gb/sec]   MsgRate[Mpps]    #messages\n"),
              std::string::npos)
        << bw.out;
    expect_verified(j, "rd_send_bw");
    for (const auto& e : j["results"]) {
        EXPECT_EQ(e["iters"], 50) << "--iters per QP";
        EXPECT_EQ(e["messages"], 100);
        EXPECT_GT(e["msg_rate_mpps"].get<double>(), 0.0);
    }
    // Node1 received every message through its EE context, and sent no NAK.
    const auto& c = j["counters"];
    EXPECT_EQ(c.value("node1.hca.transport_engine.rd_dropped", 0), 0);
    EXPECT_EQ(c.value("node0.hca.transport_engine.retransmits", 0), 0);
}

// One EE context per node carries one message at a time, so QPs sharing it take turns: four
// QPs through one EE context send at one message per round trip, through four about four times
// as fast. An RD QP also has one message in flight, so one QP gains nothing from more EE contexts.
TEST(HcasimRdWorkloads, one_ee_context_carries_one_message_at_a_time) {
    const std::string base = "--workload rd_send_bw --size 64 --iters 100";
    const double one = first(base + " --qps 4", "msg_rate_mpps");
    const double four = first(base + " --qps 4 --set workload.eecs=4", "msg_rate_mpps");
    ASSERT_GT(one, 0.0);
    EXPECT_GT(four, 3.5 * one) << "one EE context: " << one << " Mpps, four: " << four;
    EXPECT_LT(four, 4.2 * one);
    const double qp1 = first(base + " --qps 1", "msg_rate_mpps");
    const double qp1_eecs4 = first(base + " --qps 1 --set workload.eecs=4", "msg_rate_mpps");
    EXPECT_DOUBLE_EQ(qp1_eecs4, qp1) << "one RD QP: one message in flight, whatever the EE contexts";
    EXPECT_NEAR(qp1, one, one * 0.05) << "four QPs through one EE context: no faster than one QP";
    // RC's send_bw keeps workload.tx_depth messages in flight on one QP.
    EXPECT_GT(first("--workload send_bw --size 64 --iters 400", "msg_rate_mpps"), 4.0 * qp1);
}

// The RD headers (RDETH, DETH: 12 bytes) and the EE context's acknowledgement make a ping-pong no
// faster than RC's.
TEST(HcasimRdWorkloads, rd_send_lat_is_no_faster_than_rc_send_lat) {
    const double rd = first("--workload rd_send_lat --size 2 --iters 50", "lat_typical_us");
    const double rc = first("--workload send_lat --size 2 --iters 50", "lat_typical_us");
    EXPECT_GE(rd, rc);
    EXPECT_LT(rd, rc * 1.25);
}

// A lossy cable: the EE context retransmits (go back N, timeouts) and every byte arrives once.
TEST(HcasimRdWorkloads, a_lossy_link_is_recovered_by_the_ee_context) {
    nlohmann::json j;
    const result r = run_json(
        "--workload rd_send_bw --size 16K --iters 40 --qps 2 --set workload.eecs=2 --set link.drop_rate=0.02 "
        "--seed 5 --verify",
        &j);
    ASSERT_EQ(r.code, 0) << r.err;
    expect_verified(j, "rd_send_bw over a lossy link");
    const auto& c = j["counters"];
    EXPECT_GT(c.value("node0.hca.transport_engine.retransmits", 0) +
                  c.value("node1.hca.transport_engine.retransmits", 0),
              0)
        << "packets were lost and resent";
}

TEST(HcasimRdWorkloads, workload_eecs_beyond_the_device_is_refused_naming_both_keys) {
    const result r =
        hcasim::test::run_hcasim("--workload rd_send_bw --iters 2 --set workload.eecs=300", "rd_workloads");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("hcasim: run failed: workload.eecs=300: node"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("'s HCA holds 255 EE contexts (raise hca.max_eecs)"), std::string::npos) << r.err;
    const result zero =
        hcasim::test::run_hcasim("--workload rd_send_bw --iters 2 --set workload.eecs=0", "rd_workloads");
    EXPECT_EQ(zero.code, 2);
    EXPECT_NE(zero.err.find("workload.eecs"), std::string::npos) << zero.err;
    // Without reliable datagram on the HCA (hca.max_eecs=1 leaves no EE context) the run says so.
    const result none =
        hcasim::test::run_hcasim("--workload rd_send_lat --iters 2 --set hca.max_eecs=1", "rd_workloads");
    EXPECT_NE(none.code, 0);
    EXPECT_NE(none.err.find("has no reliable datagram"), std::string::npos) << none.err;
}

// --record writes the domain, the EE contexts (connected by modify_eec, dest_eec naming the
// peer's), the RD QPs and their WRs; the trace replays equal, also with the recorded timing.
TEST(HcasimRdWorkloads, a_recorded_rd_workload_replays_equal) {
    const std::string trace = ::testing::TempDir() + "rd_record_" + std::to_string(getpid()) + ".jsonl";
    const result rec = hcasim::test::run_hcasim(
        "--workload rd_send_bw --size 64,5000 --iters 6 --qps 2 --set workload.eecs=2 --set "
        "workload.rx_depth=8 "
        "--verify --record '" +
            trace + "'",
        "rd_workloads");
    ASSERT_EQ(rec.code, 0) << rec.err;
    const std::string text = hcasim::test::slurp(trace);
    for (const char* s : {"\"call\":\"alloc_rdd\"", "\"call\":\"create_eec\",\"rdd\":\"rdd0\"",
                          "\"dest_eec\":\"1/eec1\"", "\"type\":\"RD\"", "\"rdd\":\"rdd0\"",
                          "\"eec\":\"eec1\"", "\"remote_qp\":\"1/qp1\"", "\"remote_qkey\":286331153"})
        EXPECT_NE(text.find(s), std::string::npos) << s;
    for (const char* timing : {"asap", "recorded --time-tolerance 1%"}) {
        const result r =
            hcasim::test::run_hcasim("replay '" + trace + "' --timing " + timing, "rd_workloads");
        EXPECT_EQ(r.code, 0) << timing << ": " << r.out << r.err;
        EXPECT_NE(r.out.find("equal to the recording"), std::string::npos) << timing << ": " << r.out;
    }
    std::remove(trace.c_str());
}
