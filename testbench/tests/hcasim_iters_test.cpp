// --iters counts per QP (since issue 30), as perftest's -n does with -q: a bandwidth workload
// with --qps N and --iters K sends N x K messages per size; the report gives iters K (per QP)
// and messages N x K. msg_rate and qp_scale default to about 20,000 messages over the QPs, at
// least 4 per QP. A total beyond the largest (10^7) is refused before anything runs, naming
// --iters and --qps.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

uint64_t counter(const nlohmann::json& j, const std::string& key) {
    return j.at("counters").at(key).get<uint64_t>();
}

}  // namespace

TEST(HcasimIters, iters_count_per_qp_as_perftest_n_with_q) {
    nlohmann::json j;
    const result r = hcasim::test::run_hcasim_stats("--workload write_bw --size 64 --qps 4 --iters 100",
                                                    "iters_write", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    // 4 QPs x 100: 400 WQEs (each 64 B WRITE posted alone goes through the inline window), one
    // packet and one acknowledgement each.
    EXPECT_EQ(counter(j, "node0.hca.wqe_fetcher.inline_wqes"), 400u);
    EXPECT_EQ(counter(j, "node0.hca.transport_engine.tx_packets"), 400u);
    EXPECT_EQ(counter(j, "node0.hca.transport_engine.acks_received"), 400u);
    ASSERT_EQ(j["results"].size(), 1u);
    EXPECT_EQ(j["qps"], 4);
    EXPECT_EQ(j["results"][0]["iters"], 100);
    EXPECT_EQ(j["results"][0]["messages"], 400);
    // The table: #iterations per QP, #messages in all (the rate is over the messages).
    EXPECT_NE(r.out.find(" #bytes     #iterations  BW average[Gb/sec]   MsgRate[Mpps]    #messages\n"
                         " 64         100          "),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(" 400\n"), std::string::npos) << r.out;

    // send_bw: node1 completes every QP's 100 receives.
    nlohmann::json s;
    ASSERT_EQ(
        hcasim::test::run_hcasim_stats("--workload send_bw --size 64 --qps 4 --iters 100", "iters_send", &s)
            .code,
        0);
    EXPECT_EQ(counter(s, "node1.hca.transport_engine.recv_completions"), 400u);
    EXPECT_EQ(s["results"][0]["messages"], 400);
}

TEST(HcasimIters, msg_rate_and_qp_scale_default_to_about_20000_messages_and_at_least_4_per_qp) {
    nlohmann::json m;
    ASSERT_EQ(hcasim::test::run_hcasim_stats("--workload msg_rate --qps 4", "iters_msg_rate", &m).code, 0);
    EXPECT_EQ(m["results"][0]["iters"], 5000);
    EXPECT_EQ(m["results"][0]["messages"], 20000);
    EXPECT_EQ(counter(m, "node0.hca.transport_engine.tx_packets"), 20000u);
    // 8,192 QPs: 4 each (32,768 messages), not 20,000 / 8,192 (some QPs would send 2, others 3).
    nlohmann::json q;
    ASSERT_EQ(
        hcasim::test::run_hcasim_stats("--workload qp_scale --sweep qps=8192", "iters_qp_scale", &q).code, 0);
    ASSERT_EQ(q["runs"].size(), 2u);
    for (const auto& run : q["runs"]) {
        EXPECT_EQ(run["qps"], 8192);
        EXPECT_EQ(run["results"][0]["iters"], 4) << run["workload"];
        EXPECT_EQ(run["results"][0]["messages"], 4 * 8192) << run["workload"];
    }
}

TEST(HcasimIters, iters_times_qps_beyond_the_largest_total_exits_2_naming_both) {
    const std::string want =
        "hcasim: error: --iters 2500001 with --qps 4: 10000004 messages per size (--iters counts per QP) "
        "exceed the largest total, 10000000\n";
    for (const std::string args :
         {"--workload write_bw --qps 4 --iters 2500001", "--workload msg_rate --qps 4 --iters 2500001",
          // every point is checked before the first runs
          "--workload send_bw --sweep qps=1,4 --iters 2500001",
          "--workload qp_scale --sweep qps=1,4 --iters 2500001"}) {
        const result r = hcasim::test::run_hcasim(args, "iters_bound");
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err, want) << args;
        EXPECT_EQ(r.out, "") << args;
    }
    // At the bound it is accepted (--help-config elaborates the run without running it).
    const result ok = hcasim::test::run_hcasim("--workload write_bw --qps 4 --iters 2500000 --help-config",
                                               "iters_bound_ok");
    EXPECT_EQ(ok.code, 0) << ok.err;
    // The many-node workloads count per flow: --qps (QPs per pair) does not multiply.
    const result flows = hcasim::test::run_hcasim(
        "--workload alltoall --set fabric.nodes=4 --qps 4 --iters 10000000 --help-config", "iters_flows");
    EXPECT_EQ(flows.code, 0) << flows.err;
}
