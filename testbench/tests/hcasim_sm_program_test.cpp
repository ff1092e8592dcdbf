// hcasim --set fabric.sm.program=smp: the subnet manager programs the switches of a fat tree
// with directed-route SMPs before any traffic, and the workload's figures (measured from the
// start of traffic) equal those of fabric.sm.program=direct, where the tables are written at
// elaboration and no SMP is sent. A sweep that gets no answer fails the run naming the switch,
// its directed route and the SMP.
#include <gtest/gtest.h>

#include <string>

#include "testbench/tests/hcasim_run.h"

// Linked with the model (SystemC) for hcasim_run.h; the tests run the hcasim binary.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using nlohmann::json;

// 6 nodes and the SM on radix-4 switches: 4 leaves and 2 spines.
const std::string kFatTree =
    "--workload alltoall --size 4K --iters 20 --set fabric.nodes=6 --set fabric.topology=fat_tree "
    "--set fabric.switch.radix=4";

json stats_of(const std::string& args) {
    json stats;
    const result r = hcasim::test::run_hcasim_stats(args, "sm_program", &stats);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err << r.out;
    return stats;
}

}  // namespace

TEST(HcasimSmProgram, smp_programmed_fat_tree_runs_alltoall_with_the_same_figures_as_direct_mode) {
    const json direct = stats_of(kFatTree + " --set fabric.sm.program=direct");
    const json smp = stats_of(kFatTree + " --set fabric.sm.program=smp");
    ASSERT_TRUE(direct.contains("results") && smp.contains("results"));
    const json& fd = direct["results"][0]["fabric"];
    const json& fs = smp["results"][0]["fabric"];
    EXPECT_EQ(fs["messages"], 600);
    EXPECT_EQ(fs["dropped"], 0);
    EXPECT_EQ(fs["aggregate_gbps"], fd["aggregate_gbps"]);
    EXPECT_EQ(fs["flows"], fd["flows"]);
    EXPECT_EQ(fs["mct_us"], fd["mct_us"]);
    EXPECT_EQ(smp["results"][0]["bw_gbps"], direct["results"][0]["bw_gbps"]);
    // Six switches, each NodeInfo, one LinearForwardingTable block (LIDs below 64), SwitchInfo.
    EXPECT_EQ(smp["counters"]["fabric.sm.smps_sent"], 18);
    EXPECT_EQ(smp["counters"]["fabric.sm.responses"], 18);
    EXPECT_EQ(smp["counters"]["fabric.sm.timeouts"], 0);
    EXPECT_EQ(direct["counters"]["fabric.sm.smps_sent"], 0);
}

TEST(HcasimSmProgram, a_sweep_without_answers_fails_the_run_naming_the_switch_route_and_smp) {
    // 0.5 us is less than one SMP's round trip (1.16 us to the SM's own leaf).
    const result r = hcasim::test::run_hcasim(
        kFatTree + " --set fabric.sm.program=smp --set fabric.sm.response_timeout_us=0.5", "sm_program");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("subnet manager: switch 'leaf0' (directed route 1,3,1): no GetResp to "
                         "SubnGet(NodeInfo) in fabric.sm.response_timeout_us"),
              std::string::npos)
        << r.err;
}

TEST(HcasimSmProgram, bad_program_value_exits_2_naming_the_key) {
    const result r = hcasim::test::run_hcasim(kFatTree + " --set fabric.sm.program=opensm", "sm_program");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(
        r.err.find("bad value 'opensm' for key 'fabric.sm.program' (--set): expected one of direct|smp"),
        std::string::npos)
        << r.err;
}
