// The credit round trip docs/fabric.md ("Link layer") works through: back to back at EDR, a
// receive buffer of one 4 KiB WRITE packet lets one packet go per round trip (serialisation,
// propagation, receive pipeline, the FC packet's 6 bytes, propagation back), and the sender's
// PortXmitWait is the rest of each round trip, to the nanosecond.
#include <gtest/gtest.h>

#include <string>

#include "testbench/tests/hcasim_run.h"

// Linked with the model (SystemC) for hcasim_run.h; the tests run the hcasim binary.
extern "C" int sc_main(int, char*[]) { return 0; }

TEST(HcasimLinkLayer, a_one_packet_receive_buffer_sends_one_packet_per_credit_round_trip) {
    nlohmann::json stats;
    const hcasim::test::result r = hcasim::test::run_hcasim_stats(
        "--workload write_bw --size 4K --iters 1000 --set hca.port.vl_buffer_bytes=4224", "link_layer",
        &stats);
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json& c = stats["counters"];
    // 1000 RDMA WRITE ONLY packets of 4138 bytes (LRH 8, BTH 12, RETH 16, 4096, ICRC 4, VCRC 2).
    EXPECT_EQ(c["node0.hca.port.PortXmitPkts"], 1000);
    EXPECT_EQ(c["node0.hca.port.PortXmitData"], 1000 * (4138 / 4));
    EXPECT_EQ(c["node1.hca.port.fc_packets"], 1000);
    // Round trip 331.04 (4138 x 8 / 100 Gb/s) + 10 + 20 + 0.48 (6 bytes) + 10 = 371.52 ns; every
    // packet after the first waits 371.52 - 331.04 = 40.48 ns: 999 x 40.48 = 40439.52 ns.
    EXPECT_EQ(c["node0.hca.port.PortXmitWait"], 40439);
    EXPECT_NE(r.out.find(" 4096       1000         87.63 "), std::string::npos) << r.out;
}

TEST(HcasimLinkLayer, the_default_receive_buffer_covers_the_round_trip_and_nothing_waits) {
    nlohmann::json stats;
    const hcasim::test::result r =
        hcasim::test::run_hcasim_stats("--workload write_bw --size 4K --iters 1000", "link_layer", &stats);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(stats["counters"]["node0.hca.port.PortXmitWait"], 0);
    EXPECT_NE(r.out.find(" 4096       1000         98.25 "), std::string::npos) << r.out;
}

// The HCA port's VL arbitration tables are checked against its link: a VL the link does not
// have, and a VL an SL maps to that neither table weighs (it would never send), are refused
// naming the keys, before anything runs.
TEST(HcasimLinkLayer, an_hca_vlarb_table_naming_a_vl_the_link_lacks_is_refused_naming_the_key) {
    const hcasim::test::result r = hcasim::test::run_hcasim(
        "--workload write_bw --set link.data_vls=2 --set hca.port.vlarb_low=0:64,2:192", "hca_vlarb");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("hcasim: error: bad value '0:64,2:192' for key 'node0.hca.port.vlarb_low': VL 2 is "
                         "not a data VL of the link (0..1)"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
}

TEST(HcasimLinkLayer, an_hca_vl_without_weight_in_either_vlarb_table_is_refused_naming_the_keys) {
    const hcasim::test::result r = hcasim::test::run_hcasim(
        "--workload write_bw --set link.data_vls=2 --set hca.port.vlarb_high=0:10", "hca_vlarb");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("hcasim: error: bad value for keys 'node0.hca.port.vlarb_high' and "
                         "'node0.hca.port.vlarb_low': VL 1 (SL 1, node0.hca.port.sl2vl) has no entry with a "
                         "weight above 0 in either table, so its packets would never be sent"),
              std::string::npos)
        << r.err;
}

// fabric.isl.propagation_ns takes -1 (node 0's link) or 0..1e6; anything else is refused naming
// the key before anything runs.
TEST(HcasimLinkLayer, a_negative_isl_propagation_other_than_minus_one_is_refused_naming_the_key) {
    const hcasim::test::result r = hcasim::test::run_hcasim(
        "--workload write_bw --set fabric.nodes=3 --set fabric.isl.propagation_ns=-0.5", "isl");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(
        r.err.find("hcasim: error: bad value '-0.5' for key 'fabric.isl.propagation_ns': expected -1 (node "
                   "0's link) or 0..1e6 ns"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
}
