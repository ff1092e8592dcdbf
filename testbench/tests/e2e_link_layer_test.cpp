// The lossless link layer at exact times (issue 29, "Tests"): credit-based flow control
// throttles a stream to the rate its credit round trip predicts, back to back and through a
// switch; VL arbitration splits an output by its table's weights; the SL-to-VL tables set the
// LRH's VL hop by hop and discard an SL mapped to VL15; the IBA port counters count what was
// sent, and VL15Dropped the SMPs a full VL15 buffer drops; min-hop on a ring of switches
// deadlocks and the run stops naming the cycle, up/down delivers. A test module sends raw RC SEND ONLY packets from a node's port as fast as the port
// takes them (tx_backpressure, as the transport engine does), and a recorder bound as the far
// port's receiver logs what it accepts.
#include <gtest/gtest.h>
#include <systemc>

#include <unistd.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "testbench/tests/fixtures.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/ib_headers.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace sc_core;
using hcasim::test::kPropNs;
using hcasim::test::kRxPipeNs;

namespace {

// 4 KiB RC SEND ONLY: LRH 8 + BTH 12 + 4096 + ICRC 4 + VCRC 2 = 4122 bytes = 65 credit blocks,
// 329.76 ns at EDR 4x (0.08 ns a byte).
constexpr uint32_t kPayload = 4096;
constexpr uint32_t kWireBytes = 4122;
constexpr double kSerNs = kWireBytes * 0.08;
constexpr double kFcNs = 6 * 0.08;         // a flow-control packet (6 bytes) on the wire
constexpr double kSwitchNs = 90.0;         // fabric.switch.latency_ns by default
constexpr const char* kSmallBuf = "6144";  // 96 blocks: one 65-block packet fits, two do not

/// What a port accepted, in order.
class recorder : public rx_sink {
public:
    struct rx {
        sc_time at;
        uint8_t vl, sl;
        uint16_t slid;
        uint32_t wire_len;
    };
    std::vector<rx> got;
    void receive(const rx_packet& p) override {
        got.push_back({sc_time_stamp(), p.h.l.vl, p.h.l.sl, p.h.l.slid, p.wire_len});
    }
};

/// Sends `count` packets of `payload` bytes on service level `sl` from node `from`'s port to
/// `dlid`, each as soon as the port takes it (a VL15 packet if `vl15`).
class stream : public sc_module {
public:
    SC_HAS_PROCESS(stream);
    stream(sc_module_name n, port& tx, uint16_t slid, uint16_t dlid, unsigned count, uint8_t sl,
           bool vl15 = false, uint32_t payload = kPayload)
        : sc_module(n),
          tx_(tx),
          slid_(slid),
          dlid_(dlid),
          count_(count),
          sl_(sl),
          vl15_(vl15),
          payload_(payload) {
        SC_THREAD(main);
    }
    ~stream() override { packet_pool::give(buf_); }
    bool done = false;

private:
    void main() {
        for (unsigned i = 0; i < count_; ++i) {
            for (;;) {
                const sc_time bp = tx_.tx_backpressure(sl_);
                if (tx_blocked(bp))
                    wait(tx_.tx_unblocked());
                else if (bp != SC_ZERO_TIME)
                    wait(bp);
                else
                    break;
            }
            wire::headers h;
            h.l.vl = vl15_ ? VL15 : 0;
            h.l.sl = sl_;
            h.l.dlid = dlid_;
            h.l.slid = slid_;
            h.b.opcode = wire::op::RC_SEND_ONLY;
            h.b.dest_qp = 0x11;
            h.b.psn = i;
            const size_t hdr = wire::encode_headers(h, payload_, buf_->bytes);
            tx_.transmit(buf_, uint32_t(hdr + payload_), SC_ZERO_TIME);
        }
        done = true;
    }
    port& tx_;
    uint16_t slid_, dlid_;
    unsigned count_;
    uint8_t sl_;
    bool vl15_;
    uint32_t payload_;
    packet* buf_ = packet_pool::take();
};

uint64_t count(const std::string& key) {
    const counter* c = stats_registry::instance().find(key);
    EXPECT_NE(c, nullptr) << key;
    return c ? c->value() : 0;
}

/// Packets node1's port took in (PortRcvPkts counts every packet that came in, kept or not).
uint64_t vl15_kept() { return count("node1.hca.port.PortRcvPkts") - count("node1.hca.port.VL15Dropped"); }

/// A machine with `keys`, a recorder on node `to`, and one stream per entry of `from`
/// ({node, SL}), each of `n` packets to node `to`.
struct bench {
    struct src {
        unsigned node;
        uint8_t sl;
        int to = -1;  ///< the stream's destination node; -1: the bench's
    };
    bench(const std::vector<std::pair<std::string, std::string>>& keys, std::vector<src> from, unsigned to,
          unsigned n, bool vl15 = false, uint32_t payload = kPayload) {
        for (const auto& kv : keys) broker::instance().set(kv.first, kv.second, "test");
        m = std::make_unique<machine>();
        m->at(to).adapter.port0.bind_receiver(rec);
        for (const src& s : from) {
            const unsigned dst = s.to < 0 ? to : unsigned(s.to);
            tx.push_back(std::make_unique<stream>(
                ("stream" + std::to_string(s.node) + "_" + std::to_string(dst) + "_sl" + std::to_string(s.sl))
                    .c_str(),
                m->at(s.node).adapter.port0, m->at(s.node).lid(), m->at(dst).lid(), n, s.sl, vl15, payload));
        }
        broker::instance().check_unused();
    }
    void run(double ns) {
        sc_start(sc_time(ns, SC_NS));
        for (const auto& t : tx) EXPECT_TRUE(t->done);
    }
    /// Expects packet k to arrive at first_ns + k x period_ns, for every k.
    void expect_arrivals(double first_ns, double period_ns, unsigned n) const {
        ASSERT_EQ(rec.got.size(), n);
        for (unsigned k = 0; k < n; ++k)
            EXPECT_EQ(rec.got[k].at, sc_time(first_ns + k * period_ns, SC_NS)) << "packet " << k;
    }
    std::unique_ptr<machine> m;
    recorder rec;
    std::vector<std::unique_ptr<stream>> tx;
};

}  // namespace

// Back to back, the receiver's buffer holds one packet (65 of 96 blocks), so packet k+1 may
// start only when packet k's blocks are back at the sender:
//   start(k) + serialisation (329.76) + propagation (10) + receive pipeline (20: the packet
//   leaves the buffer when it enters the pipeline's last stage) + FC packet (0.48) +
//   propagation back (10) = start(k) + 370.24 ns,
// so the stream runs at one packet every 370.24 ns (89.07 Gb/s of wire bytes, not 100), and
// packet k arrives at k x 370.24 + 329.76 + 10 + 20.
SIM_TEST(LinkLayer, a_buffer_below_two_packets_throttles_back_to_back_to_the_credit_round_trip) {
    bench b({{"hca.port.vl_buffer_bytes", kSmallBuf}}, {{0, 0}}, 1, 20);
    b.run(20000);
    const double round_trip = kSerNs + kPropNs + kRxPipeNs + kFcNs + kPropNs;
    EXPECT_DOUBLE_EQ(round_trip, 370.24);
    b.expect_arrivals(kSerNs + kPropNs + kRxPipeNs, round_trip, 20);
    // Each packet but the first waited 40.48 ns past the end of the one before for its credit
    // (PortXmitWait, in ns ticks): 19 x 40.48 = 769.12.
    EXPECT_EQ(count("node0.hca.port.PortXmitWait"), 769u);
    EXPECT_EQ(count("node1.hca.port.fc_packets"), 20u);
}

// Through a switch whose input buffer holds one packet: the switch starts sending packet k
// 90 ns after its first bit arrived, start(k) + 10 + 90; its blocks go back to node0 when its
// last bit has left the output (+ 329.76) and the FC packet crossed the cable (+ 0.48 + 10):
// start(k+1) = start(k) + 100 + 329.76 + 10.48 = start(k) + 440.24. Node1 gets packet k at
// start(k) + 100 + 329.76 + 10 + 20 = k x 440.24 + 459.76.
SIM_TEST(LinkLayer, a_switch_buffer_below_two_packets_throttles_to_the_credit_round_trip) {
    bench b({{"fabric.nodes", "3"}, {"fabric.switch.vl_buffer_bytes", kSmallBuf}}, {{0, 0}}, 1, 20);
    b.run(20000);
    const double cut_through = kPropNs + kSwitchNs;
    b.expect_arrivals(cut_through + kSerNs + kPropNs + kRxPipeNs, cut_through + kSerNs + kFcNs + kPropNs, 20);
    EXPECT_GT(count("node0.hca.port.PortXmitWait"), 0u);
}

// Through a switch to a receiver whose buffer holds one packet: the switch output is the one
// throttled. Output start(k+1) = output start(k) + 329.76 + 10 + 20 + 0.48 + 10 (node1's
// round trip, as back to back); node0 fills the switch's 64 KiB input and is then held to the
// same rate. Node1 gets packet k at k x 370.24 + 10 + 90 + 329.76 + 10 + 20.
SIM_TEST(LinkLayer, a_receiver_buffer_below_two_packets_throttles_the_switch_output) {
    bench b({{"fabric.nodes", "3"}, {"hca.port.vl_buffer_bytes", kSmallBuf}}, {{0, 0}}, 1, 40);
    b.run(40000);
    b.expect_arrivals(kPropNs + kSwitchNs + kSerNs + kPropNs + kRxPipeNs,
                      kSerNs + kPropNs + kRxPipeNs + kFcNs + kPropNs, 40);
    // The switch output waited for node1's credit (PortXmitWait counts it there).
    EXPECT_GT(count("fabric.switch.out1.PortXmitWait"), 0u);
}

// A buffer of 15 packets (64 KiB, the default) covers the 370.24 ns round trip: packets follow
// each other at their serialisation time, 329.76 ns, back to back and through the switch.
SIM_TEST(LinkLayer, a_buffer_of_many_packets_does_not_throttle) {
    bench b({}, {{0, 0}}, 1, 40);
    b.run(40000);
    b.expect_arrivals(kSerNs + kPropNs + kRxPipeNs, kSerNs, 40);
    EXPECT_EQ(count("node0.hca.port.PortXmitWait"), 0u);
}

SIM_TEST(LinkLayer, a_buffer_of_many_packets_does_not_throttle_through_a_switch) {
    bench b({{"fabric.nodes", "3"}}, {{0, 0}}, 1, 40);
    b.run(40000);
    b.expect_arrivals(kPropNs + kSwitchNs + kSerNs + kPropNs + kRxPipeNs, kSerNs, 40);
    EXPECT_EQ(count("node0.hca.port.PortXmitWait"), 0u);
    EXPECT_EQ(count("fabric.switch.out1.PortXmitWait"), 0u);
}

// Cables between switches (fabric.isl.*). A two-level fat tree of 6 nodes on radix-4 switches:
// node0 reaches node5 over leaf, spine, leaf (two inter-switch cables). By default they are
// node 0's link: each hop cuts through 90 ns after the first bit, so the packet's last bit is
// at node5 after 4 cables (10 ns each), 3 switches and one serialisation, then the pipeline.
std::vector<std::pair<std::string, std::string>> isl_fat_tree(
    std::vector<std::pair<std::string, std::string>> keys) {
    keys.insert(keys.end(),
                {{"fabric.nodes", "6"}, {"fabric.topology", "fat_tree"}, {"fabric.switch.radix", "4"}});
    return keys;
}

SIM_TEST(InterSwitchLinks, by_default_cables_between_switches_run_as_node0s_link) {
    bench b(isl_fat_tree({}), {{0, 0}}, 5, 1);
    b.run(5000);
    b.expect_arrivals(4 * kPropNs + 3 * kSwitchNs + kSerNs + kRxPipeNs, 0, 1);
}

// At 50 Gb/s and 110 ns between switches: the first leaf starts 90 ns after the first bit
// (its tail, 659.52 ns at 50 Gb/s, cannot outrun the input) and the spine too; the last leaf
// must wait until its 100 Gb/s output cannot outrun the slow input: it sends the last bit 90 ns
// after the last bit came in. Last bit at the last leaf: 10 + 90 + 110 + 90 + 110 + 659.52;
// at node5 90 + 10 later, then the pipeline: 329.76 (the slower serialisation) + 200 (the
// longer cables) later than by default.
SIM_TEST(InterSwitchLinks,
         isl_rate_and_propagation_change_the_latency_across_switches_by_the_predicted_amount) {
    bench b(isl_fat_tree({{"fabric.isl.rate_gbps", "50"}, {"fabric.isl.propagation_ns", "110"}}), {{0, 0}}, 5,
            1);
    b.run(5000);
    const double isl_ser = kWireBytes * 0.16;
    b.expect_arrivals(10 + 90 + 110 + 90 + 110 + isl_ser + 90 + 10 + kRxPipeNs, 0, 1);
    b.expect_arrivals(4 * kPropNs + 3 * kSwitchNs + kSerNs + kRxPipeNs + (isl_ser - kSerNs) + 200, 0, 1);
}

namespace {

/// Two data VLs on every port; node0 sends on SL0 (VL0), node2 on SL1 (VL1), both to node1
/// through one switch output, `n` packets each, as fast as credits allow (both saturate: 200
/// Gb/s offered to a 100 Gb/s output), with the switch's VL arbitration `keys`.
std::vector<std::pair<std::string, std::string>> two_vls(
    std::vector<std::pair<std::string, std::string>> keys) {
    keys.insert(keys.end(), {{"fabric.nodes", "3"}, {"link.data_vls", "2"}, {"fabric.switch.data_vls", "2"}});
    return keys;
}

/// Bytes node1 received on `vl` among its first `n` packets.
uint64_t vl_bytes(const recorder& r, unsigned vl, size_t n) {
    uint64_t b = 0;
    for (size_t k = 0; k < n && k < r.got.size(); ++k) b += r.got[k].vl == vl ? r.got[k].wire_len : 0;
    return b;
}

/// The VLs of node1's first `n` packets, as a string ("1101...").
std::string vl_sequence(const recorder& r, size_t n) {
    std::string s;
    for (size_t k = 0; k < n && k < r.got.size(); ++k) s += char('0' + r.got[k].vl);
    return s;
}

/// Node1 got 400 packets, and VL0 carried 25% and VL1 75% of the bytes of the first 200, within 1%.
void expect_25_and_75_percent(const recorder& r) {
    ASSERT_EQ(r.got.size(), 400u);
    const double v0 = double(vl_bytes(r, 0, 200)), v1 = double(vl_bytes(r, 1, 200));
    EXPECT_NEAR(v0 / (v0 + v1), 0.25, 0.01) << vl_sequence(r, 200);
    EXPECT_NEAR(v1 / (v0 + v1), 0.75, 0.01);
}

/// VL1 in the high-priority table with LimitOfHighPriority 255 (unbounded), VL0 in the low one:
/// the keys of `port` (fabric.switch or hca.port).
std::vector<std::pair<std::string, std::string>> unbounded_high_vl1(const std::string& port) {
    return {
        {port + ".vlarb_high", "1:255"}, {port + ".vlarb_low", "0:255"}, {port + ".vlarb_high_limit", "255"}};
}

/// Node1 got 100 packets on each VL, every VL1 packet before any VL0 packet.
void expect_all_of_vl1_first(const recorder& r) {
    ASSERT_EQ(r.got.size(), 200u);
    EXPECT_EQ(vl_sequence(r, 200), std::string(100, '1') + std::string(100, '0'));
}

}  // namespace

// Low-priority weights 64 and 192 blocks: a 65-block packet uses up VL0's entry, VL1's sends
// three (192 -> 127 -> 62 -> -3), so while both VLs are backlogged the output sends 1 of every
// 4 packets on VL0. Counted over the first 200 packets node1 receives (VL1's 200 last until
// about the 267th).
SIM_TEST(VlArbitration, low_priority_weights_1_to_3_give_25_and_75_percent_of_the_link) {
    bench b(two_vls({{"fabric.switch.vlarb_low", "0:64,1:192"}}), {{0, 0}, {2, 1}}, 1, 200);
    b.run(400000);
    expect_25_and_75_percent(b.rec);
    // The switch's output to node1 carried all of it, at the link's full rate.
    EXPECT_EQ(count("fabric.switch.out1.PortXmitPkts"), 400u);
}

// A high-priority VL with LimitOfHighPriority 255 (unbounded) takes the output while it has
// packets: node1 gets every VL1 packet before any VL0 packet.
SIM_TEST(VlArbitration, an_unbounded_high_priority_vl_goes_first) {
    bench b(two_vls(unbounded_high_vl1("fabric.switch")), {{0, 0}, {2, 1}}, 1, 100);
    b.run(200000);
    expect_all_of_vl1_first(b.rec);
}

// LimitOfHighPriority 2: 2 x 4096 bytes = 128 blocks of high-priority packets may go before a
// waiting low one; a packet starts while the budget is not below 0 (128 -> 63 -> -2), so the
// output sends VL1, VL1, VL0, ... (2/3 of the link to the high VL).
SIM_TEST(VlArbitration, the_limit_of_high_priority_lets_a_low_packet_through) {
    bench b(two_vls({{"fabric.switch.vlarb_high", "1:255"},
                     {"fabric.switch.vlarb_low", "0:255"},
                     {"fabric.switch.vlarb_high_limit", "2"}}),
            {{0, 0}, {2, 1}}, 1, 100);
    b.run(200000);
    ASSERT_EQ(b.rec.got.size(), 200u);
    std::string pattern;
    for (int k = 0; k < 50; ++k) pattern += "110";
    EXPECT_EQ(vl_sequence(b.rec, 150), pattern);
}

namespace {

/// `keys` and two data VLs back to back (each stream from node0 as fast as its VL's queue
/// takes packets).
std::vector<std::pair<std::string, std::string>> hca_two_vls(
    std::vector<std::pair<std::string, std::string>> keys) {
    keys.push_back({"link.data_vls", "2"});
    return keys;
}

}  // namespace

// The HCA port arbitrates between its VLs as a switch output does (IBA 7.6.9: every port that
// transmits has VL arbitration tables): one node, two flows on SL0 (VL0) and SL1 (VL1), low
// weights 64 and 192 blocks: 1 packet of every 4 on VL0 while both are backlogged.
SIM_TEST(HcaVlArbitration, hca_port_weights_1_to_3_give_25_and_75_percent_of_its_link) {
    bench b(hca_two_vls({{"hca.port.vlarb_low", "0:64,1:192"}}), {{0, 0}, {0, 1}}, 1, 200);
    b.run(400000);
    expect_25_and_75_percent(b.rec);
    // Exactly: VL0, then VL1 three times (192 -> 127 -> 62 -> -3), over and over.
    std::string pattern;
    for (int k = 0; k < 50; ++k) pattern += "0111";
    EXPECT_EQ(vl_sequence(b.rec, 200), pattern);
    // The wire never idles: packet k arrives at k x 329.76 + 329.76 + 10 + 20.
    b.expect_arrivals(kSerNs + kPropNs + kRxPipeNs, kSerNs, 400);
}

// The table picks the VL the weights apply to: SL5 maps to VL1 (weight 192), SL2 to VL0 (64).
SIM_TEST(HcaVlArbitration, the_hca_sl2vl_table_chooses_the_vl_whose_weight_an_sl_gets) {
    bench b(hca_two_vls({{"hca.port.sl2vl", "0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0"},
                         {"hca.port.vlarb_low", "0:64,1:192"}}),
            {{0, 2}, {0, 5}}, 1, 200);
    b.run(400000);
    for (const recorder::rx& r : b.rec.got) EXPECT_EQ(r.vl, r.sl == 5 ? 1 : 0) << "SL " << unsigned(r.sl);
    expect_25_and_75_percent(b.rec);  // SL2 25%, SL5 75%
}

// An unbounded high-priority VL on the HCA port goes first while it has packets.
SIM_TEST(HcaVlArbitration, an_unbounded_high_priority_vl_of_the_hca_port_goes_first) {
    bench b(hca_two_vls(unbounded_high_vl1("hca.port")), {{0, 0}, {0, 1}}, 1, 100);
    b.run(200000);
    expect_all_of_vl1_first(b.rec);
}

// A VL with no credit (the far end's VL1 buffer stays full, as behind a stalled receiver)
// does not stop the flow on VL0: its 40 packets leave back to back at the wire's rate while
// VL1's 40 wait in their queue (which holds them all: both streams hand every packet over).
SIM_TEST(HcaVlArbitration, a_vl_without_credit_does_not_stop_a_flow_on_another_vl) {
    bench b(hca_two_vls({}), {{0, 1}, {0, 0}}, 1, 40);
    credit_counter& c = b.m->at(0).adapter.port0.tx_credits();
    c.take(1, c.capacity_blocks(), SC_ZERO_TIME);  // VL1's buffer at node1 is full, and stays so
    b.run(40000);
    b.expect_arrivals(kSerNs + kPropNs + kRxPipeNs, kSerNs, 40);
    for (const recorder::rx& r : b.rec.got) EXPECT_EQ(r.vl, 0);
    EXPECT_EQ(count("node0.hca.port.PortXmitPkts"), 40u);
}

namespace {

/// The LRH VL and SL of every packet a --pcap file holds for direction `dir`: pcap records
/// (16-byte header) of ERF records (16-byte header, direction in the flags byte's low bits)
/// around the packet from its LRH on (model/fabric/wire_capture.h).
std::vector<std::pair<unsigned, unsigned>> vl_sl_on_wire(const std::string& file, unsigned dir) {
    const std::string s = hcasim::test::slurp(file);
    auto le32 = [&](size_t at) {
        return uint32_t(uint8_t(s[at])) | uint32_t(uint8_t(s[at + 1])) << 8 |
               uint32_t(uint8_t(s[at + 2])) << 16 | uint32_t(uint8_t(s[at + 3])) << 24;
    };
    std::vector<std::pair<unsigned, unsigned>> v;
    for (size_t at = 24; at + 16 <= s.size();) {
        const uint32_t len = le32(at + 8);
        const size_t erf = at + 16, lrh = erf + 16;
        if ((uint8_t(s[erf + 9]) & 3) == dir) v.emplace_back(uint8_t(s[lrh]) >> 4, uint8_t(s[lrh + 1]) >> 4);
        at = erf + len;
    }
    return v;
}

// Node0's port maps SL3 to VL1 and SL5 to VL15; every switch output maps SL3 to VL0 and SL6 to
// VL15 (two data VLs everywhere).
std::vector<std::pair<std::string, std::string>> sl2vl_keys() {
    return {{"fabric.nodes", "3"},
            {"link.data_vls", "2"},
            {"fabric.switch.data_vls", "2"},
            {"hca.port.sl2vl", "0,0,0,1,0,15,0,0,0,0,0,0,0,0,0,0"},
            {"fabric.switch.sl2vl", "1,1,1,0,1,1,15,1,1,1,1,1,1,1,1,1"}};
}

}  // namespace

// The LRH's VL is the SL's VL in the table of the port that sends it, hop by hop: VL1 from
// node0 to the switch, VL0 from the switch to node1; the SL stays 3.
SIM_TEST(Sl2Vl, the_lrh_vl_on_each_hop_is_the_senders_table_entry_for_the_sl) {
    bench b(sl2vl_keys(), {{0, 3}}, 1, 10);
    const std::string dir = ::testing::TempDir() + "sl2vl_pcap_" + std::to_string(getpid());
    b.m->capture_to(dir);
    b.run(20000);
    EXPECT_EQ(b.m->close_captures(), "");
    const std::vector<std::pair<unsigned, unsigned>> vl1(10, {1, 3}), vl0(10, {0, 3});
    EXPECT_EQ(vl_sl_on_wire(dir + "/link0.pcap", 0), vl1);  // node0 to the switch
    EXPECT_EQ(vl_sl_on_wire(dir + "/link1.pcap", 1), vl0);  // the switch to node1
    ASSERT_EQ(b.rec.got.size(), 10u);                       // with a good VCRC after the rewrite
    for (const recorder::rx& r : b.rec.got)
        EXPECT_EQ(std::make_pair(r.vl, r.sl), std::make_pair(uint8_t(0), uint8_t(3)));
    std::filesystem::remove_all(dir);
}

// An SL the sending HCA's table maps to VL15 never reaches the wire: discarded and counted.
SIM_TEST(Sl2Vl, an_sl_mapped_to_vl15_by_the_hca_is_discarded_and_counted) {
    bench b(sl2vl_keys(), {{0, 5}}, 1, 10);
    b.run(20000);
    EXPECT_TRUE(b.rec.got.empty());
    EXPECT_EQ(count("node0.hca.port.PortXmitDiscards"), 10u);
    EXPECT_EQ(count("node0.hca.port.PortXmitPkts"), 0u);
    EXPECT_EQ(count("fabric.switch.out0.PortRcvPkts"), 0u);
}

// An SL a switch output's table maps to VL15 is discarded by the switch (counted on the port
// it came in by: ib_switch's PortXmitDiscards) and gives its credit back: all 10 went out of
// node0, with a buffer of one packet.
SIM_TEST(Sl2Vl, an_sl_mapped_to_vl15_by_a_switch_is_discarded_and_counted) {
    auto keys = sl2vl_keys();
    keys.push_back({"fabric.switch.vl_buffer_bytes", kSmallBuf});
    bench b(keys, {{0, 6}}, 1, 10);
    b.run(20000);
    EXPECT_TRUE(b.rec.got.empty());
    EXPECT_EQ(count("node0.hca.port.PortXmitPkts"), 10u);
    EXPECT_EQ(count("fabric.switch.out0.PortRcvPkts"), 10u);
    EXPECT_EQ(count("fabric.switch.out0.PortXmitDiscards"), 10u);
    EXPECT_EQ(count("fabric.switch.out1.PortXmitPkts"), 0u);
}

// A switch has an SL-to-VL table per (input, output) pair: with node2's input to node1's output
// mapping SL3 to VL1, node2's packets leave toward node1 on VL1 while node0's, by the table all
// other inputs share (SL3 to VL0), leave on VL0.
SIM_TEST(Sl2Vl, an_input_output_specific_entry_sends_one_inputs_sl_to_another_vl) {
    bench b(sl2vl_keys(), {{0, 3}, {2, 3}}, 1, 5);
    ib_switch& sw = *b.m->net.switches.front();
    const unsigned to1 = sw.lft_entry(b.m->at(1).lid()), from2 = sw.lft_entry(b.m->at(2).lid());
    std::array<uint8_t, 16> t = sw.sl2vl(to1);
    ASSERT_EQ(t[3], 0);
    t[3] = 1;
    sw.set_sl2vl(from2, to1, t);
    EXPECT_EQ(sw.sl2vl(from2, to1)[3], 1);
    EXPECT_EQ(sw.sl2vl(sw.lft_entry(b.m->at(0).lid()), to1)[3], 0);
    b.run(20000);
    ASSERT_EQ(b.rec.got.size(), 10u);
    unsigned from0 = 0, from2n = 0;
    for (const recorder::rx& r : b.rec.got) {
        EXPECT_EQ(r.sl, 3);
        if (r.slid == b.m->at(0).lid()) {
            ++from0;
            EXPECT_EQ(r.vl, 0) << "from node0";
        } else {
            ++from2n;
            EXPECT_EQ(r.vl, 1) << "from node2";
        }
    }
    EXPECT_EQ(from0, 5u);
    EXPECT_EQ(from2n, 5u);
}

// PortXmitData and PortRcvData count data octets divided by 4 (reference fabric.md §6): a
// packet's LRH through ICRC, 4120 bytes = 1030 words (its 2-byte VCRC does not make a word), at
// every port on the way; PortXmitPkts and PortRcvPkts count the packets.
SIM_TEST(PortCounters, data_counters_count_the_words_sent_at_every_port) {
    bench b({{"fabric.nodes", "3"}}, {{0, 0}}, 1, 25);
    b.run(40000);
    ASSERT_EQ(b.rec.got.size(), 25u);
    const uint64_t words = 25 * (kWireBytes - 2) / 4;
    EXPECT_EQ(words, 25750u);
    EXPECT_EQ(count("node0.hca.port.PortXmitData"), words);
    EXPECT_EQ(count("node0.hca.port.PortXmitPkts"), 25u);
    EXPECT_EQ(count("fabric.switch.out0.PortRcvData"), words);
    EXPECT_EQ(count("fabric.switch.out0.PortRcvPkts"), 25u);
    EXPECT_EQ(count("fabric.switch.out1.PortXmitData"), words);
    EXPECT_EQ(count("fabric.switch.out1.PortXmitPkts"), 25u);
    EXPECT_EQ(count("node1.hca.port.PortRcvData"), words);
    EXPECT_EQ(count("node1.hca.port.PortRcvPkts"), 25u);
    EXPECT_EQ(count("node1.hca.port.PortXmitData"), 0u);
}

namespace {

/// configs/topologies/ring4x2.topo (4 switches in a ring, 2 hosts each) routed by `engine`,
/// every buffer one packet (4224 bytes), a credit wait of 5 us checked for a loop; every host
/// streams `n` packets to each host of the switch opposite its own (two hops either way round).
struct ring_bench : bench {
    static std::vector<src> opposite() {
        std::vector<src> v;
        for (unsigned h = 0; h < 8; ++h)
            for (unsigned d : {(h + 4) % 8, (h + 4) % 8 ^ 1u}) v.push_back({h, 0, int(d)});
        return v;
    }
    ring_bench(const std::string& engine, unsigned n)
        : bench(
              {{"fabric.topology", "file"},
               {"fabric.topology_file", std::string(HCASIM_SOURCE_DIR) + "/configs/topologies/ring4x2.topo"},
               {"fabric.routing", engine},
               {"fabric.subnet_manager", "false"},
               {"fabric.switch.vl_buffer_bytes", "4224"},
               {"hca.port.vl_buffer_bytes", "4224"},
               {"fabric.switch.deadlock_timeout_us", "5"}},
              opposite(), 0, n) {}
    uint64_t received() const {
        uint64_t r = 0;
        for (unsigned h = 0; h < 8; ++h) r += count("node" + std::to_string(h) + ".hca.port.PortRcvPkts");
        return r;
    }
};

}  // namespace

// Min-hop on the ring has a credit loop (routing_test: sw0/p4 -> sw3/p4 -> sw2/p4 -> sw1/p4):
// saturating streams two hops round fill it, the fabric stops moving, and after
// deadlock_timeout_us the run stops naming the cycle of switch outputs.
SIM_TEST(Deadlock, minhop_on_a_ring_stops_the_run_naming_the_cycle_of_ports) {
    ring_bench b("minhop", 400);
    sc_start(sc_time(2, SC_MS));
    // The routes' cycle (as dependency_cycle finds it at setup) ...
    EXPECT_EQ(describe_channels(b.m->net.graph, dependency_cycle(b.m->net.graph, b.m->net.routes)),
              "switch0/p4 -> switch3/p4 -> switch2/p4 -> switch1/p4");
    // ... is the loop the run stopped in, 5 us after the last packet moved, named from the
    // first output whose watch found it.
    EXPECT_EQ(
        b.m->fabric_error(),
        "fabric deadlock: 12 packets held in switches and no progress for "
        "fabric.switch.deadlock_timeout_us=5 us at 360.429760 us; switch outputs waiting for credit in a "
        "cycle (fabric.routing=minhop): switch0/p4 -> switch3/p4 -> switch2/p4 -> switch1/p4");
    EXPECT_EQ(sc_time_stamp(), sc_time(360429.760, SC_NS));
    EXPECT_LT(b.received(), 16u * 400u);
}

// Up/down routes the same traffic without a credit loop: every packet arrives.
SIM_TEST(Deadlock, updn_on_a_ring_delivers_the_same_traffic) {
    ring_bench b("updn", 400);
    sc_start(sc_time(2, SC_MS));
    EXPECT_EQ(b.m->fabric_error(), "");
    for (const auto& t : b.tx) EXPECT_TRUE(t->done);
    EXPECT_EQ(b.received(), 16u * 400u);
}

// VL15 is not flow controlled: an SMP that finds the VL15 receive buffer full is dropped and
// counted (VL15Dropped). An SMP holds its place from its first bit in until it enters the
// receive pipeline's last stage, as a data packet holds its credits: 90-byte packets (64-byte
// payload) back to back start every 7.2 ns and each stays 7.2 + 20 ns, so the packets at 4
// places and fewer overlap 3 earlier ones at their first bit. A buffer of 1 keeps packets 0, 4,
// 8 of 10 and drops 7; the default 4 keeps all 10.
SIM_TEST(PortCounters, vl15_dropped_counts_smps_that_find_the_vl15_buffer_full) {
    bench b({{"hca.port.vl15_buffer_packets", "1"}}, {{0, 0}}, 1, 10, true, 64);
    b.run(2000);
    EXPECT_EQ(count("node1.hca.port.PortRcvPkts"), 10u);
    EXPECT_EQ(count("node1.hca.port.VL15Dropped"), 7u);
    EXPECT_EQ(vl15_kept(), 3u);
    EXPECT_EQ(count("node0.hca.port.PortXmitWait"), 0u);  // never waits for credit
}

// A switch's VL15 buffer follows arrival too: an SMP for the switch's own agent holds its
// input's VL15 buffer from its first bit in until the agent is done with it (its last bit +
// fabric.switch.sma_process_ns, 50 here). 16 SMPs of 90 bytes back to back into the default
// buffer of 4: SMP k's first bit arrives at 10 + 7.2k and it is held until 67.2 + 7.2k, so 0-3
// are kept, 4-7 find 4 held and are dropped, 8 arrives (67.6) just after 0 left (67.2) and 8-11
// are kept, 12-15 dropped: exactly the excess, decided at arrival.
SIM_TEST(PortCounters, a_vl15_burst_beyond_the_switch_buffer_drops_exactly_the_excess_at_arrival) {
    bench b({{"fabric.nodes", "3"}, {"fabric.switch.sma_process_ns", "50"}}, {}, 1, 0);
    const uint16_t sw_lid = b.m->net.agents.front()->lid();
    stream s("smps", b.m->at(0).adapter.port0, b.m->at(0).lid(), sw_lid, 16, 0, true, 64);
    b.run(2000);
    EXPECT_TRUE(s.done);
    EXPECT_EQ(count("fabric.switch.out0.PortRcvPkts"), 16u);
    EXPECT_EQ(count("fabric.switch.out0.VL15Dropped"), 8u);
    // The kept ones reach the agent (which drops them: RC SENDs, no SMPs).
    EXPECT_EQ(b.m->net.agents.front()->dropped, 8u);
}

SIM_TEST(PortCounters, vl15_smps_back_to_back_fit_a_buffer_of_4) {
    bench b({}, {{0, 0}}, 1, 10, true, 64);
    b.run(2000);
    EXPECT_EQ(count("node1.hca.port.PortRcvPkts"), 10u);
    EXPECT_EQ(count("node1.hca.port.VL15Dropped"), 0u);
}
