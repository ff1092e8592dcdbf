// The lossless fabric seen from the hcasim program (issue 29, "Tests"): an incast of 15 senders
// through one switch loses nothing, retransmits nothing and keeps the bottleneck link busy; a
// fat-tree alltoall and an incast rerun byte for byte (stdout and --stats-json).
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "testbench/tests/hcasim_run.h"

// Linked with the model (SystemC) for hcasim_run.h; the tests run the hcasim binary.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using nlohmann::json;

/// Runs `args` with --stats-json; fails the test unless it exits 0.
json stats_of(const std::string& args, result* out = nullptr) {
    json stats;
    const result r = hcasim::test::run_hcasim_stats(args, "fabric", &stats);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err << r.out;
    if (out) *out = r;
    return stats;
}

/// The sum of every counter whose key ends in `suffix`.
uint64_t sum_of(const json& stats, const std::string& suffix) {
    uint64_t s = 0;
    for (const auto& [k, v] : stats["counters"].items())
        if (k.size() >= suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0)
            s += v.get<uint64_t>();
    return s;
}

}  // namespace

// 15 senders x 16 outstanding 4 KiB WRITEs into node0's one link: the switch's output to node0
// is the bottleneck, credits hold the senders back (their engines wait for credit), and RC
// sees no loss: no packet dropped, no retransmission, no timeout, no NAK. Node0 receives at
// the link's rate: payload 4096 of every 4136 wire bytes (LRH, BTH, RETH, ICRC, VCRC) is
// 99.03 Gb/s at most, and over the run (ramp included) it gets within 2% of 100 Gb/s.
TEST(FabricIncast, fifteen_senders_through_one_switch_lose_nothing_retransmit_nothing_and_fill_the_link) {
    result r;
    const json s = stats_of(
        "--workload incast --size 4K --iters 200 --set fabric.nodes=16 --set workload.tx_depth=16", &r);
    ASSERT_TRUE(s.contains("results")) << r.out;
    const json& f = s["results"][0]["fabric"];
    EXPECT_EQ(f["flows"].size(), 15u);
    EXPECT_EQ(f["messages"], 15 * 200);
    EXPECT_EQ(f["lost"], 0);
    EXPECT_EQ(f["dropped"], 0);
    EXPECT_EQ(sum_of(s, ".transport_engine.retransmits"), 0u);
    EXPECT_EQ(sum_of(s, ".transport_engine.timeouts"), 0u);
    EXPECT_EQ(sum_of(s, ".transport_engine.naks_sent"), 0u);
    EXPECT_EQ(sum_of(s, ".transport_engine.seq_errors"), 0u);
    EXPECT_EQ(sum_of(s, ".overruns"), 0u);  // no packet arrived at a switch without room
    // Every sender was held back by credit at some point: the fabric pushed back, it did not drop.
    for (unsigned n = 1; n < 16; ++n)
        EXPECT_GT(
            s["counters"]["node" + std::to_string(n) + ".hca.transport_engine.stall_credit"].get<uint64_t>(),
            0u)
            << "node" << n;
    // The switch's port to node0 (port 1, out0) sent every data packet: 4136 bytes = 1034 words.
    EXPECT_EQ(s["counters"]["fabric.switch.out0.PortXmitPkts"], 3000);
    EXPECT_EQ(s["counters"]["fabric.switch.out0.PortXmitData"], 3000 * 1034);
    const double link = f["link_gbps"].get<double>(), node0 = f["node_rx_gbps"][0].get<double>();
    EXPECT_EQ(link, 100.0);
    EXPECT_LE(node0, link * 4096 / 4136);
    EXPECT_GE(node0, 0.98 * link);
}

// Two runs of the same fabric and workload print the same bytes and write the same statistics
// (wall-clock time and the run block aside): a two-level fat tree of radix 8 with 16 nodes running alltoall, and
// an incast through one switch.
TEST(FabricReruns, a_fat_tree_alltoall_and_an_incast_are_byte_identical_twice) {
    // Each with a counter of its fabric: leaf0 is the fat tree's first switch.
    for (const auto& [args, port] :
         {std::pair<std::string, std::string>{
              "--workload alltoall --size 4K --iters 20 --set fabric.topology=fat_tree "
              "--set fabric.nodes=16 --set fabric.switch.radix=8",
              "fabric.leaf0.out0.PortXmitPkts"},
          {"--workload incast --size 4K --iters 50 --set fabric.nodes=16 --set "
           "workload.tx_depth=16",
           "fabric.switch.out0.PortXmitPkts"}}) {
        result a, b;
        const json sa = stats_of(args, &a), sb = stats_of(args, &b);
        ASSERT_TRUE(sa.contains("counters")) << args;
        EXPECT_GT(sa["counters"][port].get<uint64_t>(), 0u) << args;
        EXPECT_EQ(sa["results"][0]["fabric"]["lost"], 0) << args;
        EXPECT_EQ(a.out, b.out) << args;
        EXPECT_EQ(a.err, b.err) << args;
        EXPECT_EQ(hcasim::test::deterministic_part(sa), hcasim::test::deterministic_part(sb)) << args;
    }
}

namespace {

/// An alltoall on configs/topologies/ring4x2.topo (4 switches in a ring, 2 hosts each) routed
/// by `engine`, every buffer one packet, a credit wait of 5 us checked for a loop.
std::string ring_alltoall(const std::string& engine) {
    return "--workload alltoall --size 4K --iters 50 --set fabric.topology=file --set "
           "fabric.topology_file=configs/topologies/ring4x2.topo --set fabric.subnet_manager=false --set "
           "fabric.routing=" +
           engine +
           " --set fabric.switch.vl_buffer_bytes=4224 --set hca.port.vl_buffer_bytes=4224 --set "
           "fabric.switch.deadlock_timeout_us=5";
}

}  // namespace

// Min-hop on the ring has a credit loop; the alltoall fills it within 100 us, nothing moves for
// 5 us, and the run stops: exit 1, the cycle of switch outputs named, no result row.
TEST(FabricDeadlock, minhop_on_a_ring_exits_1_naming_the_cycle_of_ports) {
    const result r = hcasim::test::run_hcasim(ring_alltoall("minhop"), "fabric_deadlock");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_EQ(
        r.err,
        "hcasim: run failed: fabric deadlock: 18 packets held in switches and no progress for "
        "fabric.switch.deadlock_timeout_us=5 us at 104.419899 us; switch outputs waiting for credit in a "
        "cycle (fabric.routing=minhop): switch0/p4 -> switch3/p4 -> switch2/p4 -> switch1/p4\n");
    EXPECT_EQ(r.out.find("messages completed"), std::string::npos) << r.out;
}

// Up/down routing on the same ring and traffic has no credit loop: every message completes.
TEST(FabricDeadlock, updn_on_a_ring_completes_the_same_alltoall) {
    json s = stats_of(ring_alltoall("updn"));
    ASSERT_TRUE(s.contains("results"));
    EXPECT_EQ(s["results"][0]["fabric"]["messages"], 56 * 50);
    EXPECT_EQ(s["results"][0]["fabric"]["lost"], 0);
}
