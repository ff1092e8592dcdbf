// Fault injection on the cables (link.drop_rate, bit_error_rate, dup_rate, reorder_rate,
// reorder_hold_ns, down_at_ns, seed): a test module sends raw RC SEND ONLY packets from one
// node's port at fixed times, and a recorder bound as the far port's receiver logs what it
// accepts (PSN, time, payload check). Back to back and through a switch (fabric.nodes=3);
// linkN./nodeN.link./link. precedence; bad values; determinism per seed.
#include <gtest/gtest.h>
#include <systemc>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/ib_headers.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace sc_core;
using hcasim::test::config_error_of;
using hcasim::test::kPropNs;
using hcasim::test::kRxPipeNs;

namespace {

constexpr uint32_t kPayload = 256;
// RC SEND ONLY, 256 B: LRH 8 + BTH 12 + payload + ICRC 4 + VCRC 2 = 282 B, 22.56 ns at EDR 4x.
constexpr uint32_t kWireBytes = 282;
constexpr double kSerNs = kWireBytes * 0.08;
constexpr double kGapNs = 100.0;  // one packet every 100 ns: the wire is idle in between

uint8_t payload_byte(uint32_t psn, uint32_t i) { return uint8_t(psn * 131u + i * 7u + 3u); }

/// What a port accepted (CRCs good), in order.
class recorder : public rx_sink {
public:
    struct rx {
        uint32_t psn;
        sc_time at;
        const uint8_t* payload;  // where the port holds it: which buffer came through
    };
    std::vector<rx> got;
    unsigned bad_payload = 0;  // accepted packets whose bytes differ from what was sent
    uint32_t payload_bytes = kPayload;

    void receive(const rx_packet& p) override {
        got.push_back({p.h.b.psn, sc_time_stamp(), p.payload});
        bool ok = p.payload_len == payload_bytes;
        for (uint32_t i = 0; ok && i < payload_bytes; ++i) ok = p.payload[i] == payload_byte(p.h.b.psn, i);
        bad_payload += ok ? 0 : 1;
    }
    bool times_non_decreasing() const {
        for (size_t i = 1; i < got.size(); ++i)
            if (got[i].at < got[i - 1].at) return false;
        return true;
    }
    std::vector<uint32_t> psns() const {
        std::vector<uint32_t> v;
        for (const rx& r : got) v.push_back(r.psn);
        return v;
    }
};

/// Sends `count` packets (PSN 0..count-1) from `tx` to `dlid`, packet i at i * gap_ns.
/// `handoff`: each from a packet_pool buffer, offered to the receiver (port::transmit(packet*&),
/// as the transport engine sends); `sent` keeps which buffer each was built in.
class sender : public sc_module {
public:
    SC_HAS_PROCESS(sender);
    sender(sc_module_name n, port& tx, uint16_t slid, uint16_t dlid, unsigned count, double gap_ns = kGapNs,
           bool handoff = false, uint32_t payload = kPayload)
        : sc_module(n),
          tx_(tx),
          slid_(slid),
          dlid_(dlid),
          count_(count),
          gap_(gap_ns, SC_NS),
          handoff_(handoff),
          payload_(payload) {
        SC_THREAD(main);
    }
    ~sender() override { packet_pool::give(buf_); }
    bool done = false;
    std::vector<const packet*> sent;

private:
    void main() {
        for (unsigned i = 0; i < count_; ++i) {
            const sc_time at = gap_ * double(i);
            if (at > sc_time_stamp()) wait(at - sc_time_stamp());
            wire::headers h;
            h.l.dlid = dlid_;
            h.l.slid = slid_;
            h.b.opcode = wire::op::RC_SEND_ONLY;
            h.b.dest_qp = 0x11;
            h.b.psn = i;
            packet& pkt = handoff_ ? *buf_ : pkt_;
            const size_t hdr = wire::encode_headers(h, payload_, pkt.bytes);
            for (uint32_t b = 0; b < payload_; ++b) pkt.bytes[hdr + b] = payload_byte(i, b);
            sent.push_back(&pkt);
            if (handoff_)
                tx_.transmit(buf_, uint32_t(hdr + payload_), SC_ZERO_TIME);  // buf_: a free buffer back
            else
                tx_.transmit(pkt_, uint32_t(hdr + payload_), SC_ZERO_TIME);
        }
        done = true;
    }
    port& tx_;
    uint16_t slid_, dlid_;
    unsigned count_;
    sc_time gap_;
    bool handoff_;
    uint32_t payload_;
    packet pkt_;
    packet* buf_ = packet_pool::take();
};

void set_keys(const std::vector<std::pair<std::string, std::string>>& keys) {
    for (const auto& kv : keys) broker::instance().set(kv.first, kv.second, "test");
}

uint64_t count(const std::string& key) {
    const counter* c = stats_registry::instance().find(key);
    EXPECT_NE(c, nullptr) << key;
    return c ? c->value() : 0;
}

/// Expected time the recorder sees packet `i` when it is delivered as sent (+ extra ns).
sc_time seen_at(unsigned i, double extra_ns = 0) {
    return sc_time(i * kGapNs + kSerNs + kPropNs + kRxPipeNs + extra_ns, SC_NS);
}

/// A machine with `keys`; node `from` sends `n` packets to node `to`, recorded there.
struct bench {
    bench(const std::vector<std::pair<std::string, std::string>>& keys, unsigned from, unsigned to,
          unsigned n, double gap_ns = kGapNs, bool handoff = false, uint32_t payload = kPayload) {
        set_keys(keys);
        m = std::make_unique<machine>();
        rec.payload_bytes = payload;
        m->at(to).adapter.port0.bind_receiver(rec);
        tx = std::make_unique<sender>("sender", m->at(from).adapter.port0, m->at(from).lid(), m->at(to).lid(),
                                      n, gap_ns, handoff, payload);
        broker::instance().check_unused();
    }
    void run(double ns) {
        sc_start(sc_time(ns, SC_NS));
        EXPECT_TRUE(tx->done);
        EXPECT_TRUE(rec.times_non_decreasing());
        EXPECT_EQ(rec.bad_payload, 0u) << "a corrupted packet was accepted";
    }
    std::unique_ptr<machine> m;
    recorder rec;
    std::unique_ptr<sender> tx;
};

/// Runs `f` in a child process and returns the number it writes (for comparing runs).
uint64_t in_child(const std::function<uint64_t()>& f) {
    int fds[2];
    if (pipe(fds) != 0) return ~0ull;
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        const uint64_t v = f();
        const ssize_t w = write(fds[1], &v, sizeof v);
        _exit(w == ssize_t(sizeof v) ? 0 : 1);
    }
    close(fds[1]);
    uint64_t v = ~0ull;
    const ssize_t r = read(fds[0], &v, sizeof v);
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return r == ssize_t(sizeof v) ? v : ~0ull;
}

/// Packets node0's link drops with link.drop_rate=0.1 over 10,000 packets, in a fresh process.
uint64_t dropped_of_10k(const std::string& seed) {
    return in_child([seed]() -> uint64_t {
        bench b({{"link.drop_rate", "0.1"}, {"link.seed", seed}}, 0, 1, 10000);
        b.run(10000 * kGapNs + 1000);
        if (b.rec.got.size() + count("node0.link.dropped") != 10000) return ~0ull;
        return count("node0.link.dropped");
    });
}

}  // namespace

// --- no faults: nothing changes --------------------------------------------------------------

SIM_TEST(FabricFault, no_faults_delivers_everything_at_the_exact_time) {
    bench b({}, 0, 1, 20);
    b.run(5000);
    ASSERT_EQ(b.rec.got.size(), 20u);
    for (unsigned i = 0; i < 20; ++i) {
        EXPECT_EQ(b.rec.got[i].psn, i);
        EXPECT_EQ(b.rec.got[i].at, seen_at(i));
    }
    EXPECT_FALSE(b.m->at(0).cable.faults.active());
    for (const char* c : {"dropped", "dropped_down", "corrupted", "bit_errors", "duplicated", "reordered",
                          "reorder_timeouts"})
        EXPECT_EQ(count(std::string("node0.link.") + c), 0u) << c;
    EXPECT_EQ(count("node0.link.packets"), 20u);
}

// --- drop ------------------------------------------------------------------------------------

SIM_TEST(FabricFault, drop_rate_one_drops_every_packet) {
    bench b({{"link.drop_rate", "1"}}, 0, 1, 100);
    b.run(100 * kGapNs + 1000);
    EXPECT_TRUE(b.rec.got.empty());
    EXPECT_EQ(count("node0.link.dropped"), 100u);
    EXPECT_EQ(count("node0.link.packets"), 100u);
    EXPECT_EQ(count("node1.hca.port.rx_packets"), 0u);
}

SIM_TEST(FabricFault, drop_rate_tenth_over_10k_packets_is_in_band_and_exact_per_seed) {
    bench b({{"link.drop_rate", "0.1"}}, 0, 1, 10000);
    b.run(10000 * kGapNs + 1000);
    const uint64_t dropped = count("node0.link.dropped");
    EXPECT_GE(dropped, 850u);  // 1000 expected, sigma 30
    EXPECT_LE(dropped, 1150u);
    EXPECT_EQ(b.rec.got.size() + dropped, 10000u);
    EXPECT_EQ(count("node1.hca.port.rx_packets"), 10000u - dropped);
    EXPECT_EQ(dropped, 1012u);  // recorded for link.seed=1 (the default)
    // What is left arrives in order at its own time.
    for (size_t i = 1; i < b.rec.got.size(); ++i) ASSERT_LT(b.rec.got[i - 1].psn, b.rec.got[i].psn);
    for (const recorder::rx& r : b.rec.got) ASSERT_EQ(r.at, seen_at(r.psn));
}

TEST(FabricFault, drop_count_repeats_with_the_same_seed_and_changes_with_another) {
    const uint64_t a = dropped_of_10k("1");
    const uint64_t again = dropped_of_10k("1");
    const uint64_t other = dropped_of_10k("2");
    EXPECT_EQ(a, 1012u);
    EXPECT_EQ(again, a);
    EXPECT_NE(other, a);
    EXPECT_EQ(other, 992u);  // recorded for link.seed=2
    EXPECT_GE(other, 850u);
    EXPECT_LE(other, 1150u);
}

// --- bit errors ------------------------------------------------------------------------------

SIM_TEST(FabricFault, bit_errors_are_caught_by_the_receivers_crc_checks) {
    const unsigned n = 4000;
    bench b({{"link.bit_error_rate", "1e-4"}}, 0, 1, n);
    b.run(n * kGapNs + 1000);
    const uint64_t corrupted = count("node0.link.corrupted");
    const uint64_t flipped = count("node0.link.bit_errors");
    // P(packet hit) = 1 - (1 - 1e-4)^2256 = 20.2 %: 808 of 4000 expected, sigma 25.
    EXPECT_GE(corrupted, 700u);
    EXPECT_LE(corrupted, 920u);
    EXPECT_GE(flipped, corrupted);
    // 0.2256 flips per packet expected: 902, sigma 30.
    EXPECT_GE(flipped, 780u);
    EXPECT_LE(flipped, 1030u);
    // Every corrupted packet is dropped by the receiver: a CRC mismatch, or (bits of the LRH
    // length or version) as malformed. Nothing corrupted is accepted (recorder checks bytes).
    const uint64_t caught = count("node1.hca.port.rx_bad_vcrc") + count("node1.hca.port.rx_bad_icrc") +
                            count("node1.hca.port.rx_malformed");
    EXPECT_EQ(caught, corrupted);
    EXPECT_GT(count("node1.hca.port.rx_bad_vcrc"), corrupted / 2);
    EXPECT_EQ(b.rec.got.size(), n - corrupted);
    EXPECT_EQ(count("node1.hca.port.rx_packets"), n - corrupted);
    EXPECT_EQ(count("node0.link.dropped"), 0u);
}

SIM_TEST(FabricFault, bit_error_rate_one_corrupts_every_packet) {
    bench b({{"link.bit_error_rate", "1"}}, 0, 1, 50);
    b.run(50 * kGapNs + 1000);
    EXPECT_TRUE(b.rec.got.empty());
    EXPECT_EQ(count("node0.link.corrupted"), 50u);
    EXPECT_EQ(count("node0.link.bit_errors"), 50u * kWireBytes * 8);
    EXPECT_EQ(count("node1.hca.port.rx_bad_vcrc") + count("node1.hca.port.rx_bad_icrc") +
                  count("node1.hca.port.rx_malformed"),
              50u);
}

// --- duplicates ------------------------------------------------------------------------------

SIM_TEST(FabricFault, dup_rate_one_delivers_each_packet_twice_back_to_back) {
    bench b({{"link.dup_rate", "1"}}, 0, 1, 10);
    b.run(10 * kGapNs + 1000);
    ASSERT_EQ(b.rec.got.size(), 20u);
    for (unsigned i = 0; i < 10; ++i) {
        EXPECT_EQ(b.rec.got[2 * i].psn, i);
        EXPECT_EQ(b.rec.got[2 * i + 1].psn, i);
        EXPECT_EQ(b.rec.got[2 * i].at, seen_at(i));
        EXPECT_EQ(b.rec.got[2 * i + 1].at, seen_at(i));
    }
    EXPECT_EQ(count("node0.link.duplicated"), 10u);
    EXPECT_EQ(count("node1.hca.port.rx_packets"), 20u);
}

SIM_TEST(FabricFault, dup_rate_half_duplicates_about_half) {
    bench b({{"link.dup_rate", "0.5"}}, 0, 1, 2000);
    b.run(2000 * kGapNs + 1000);
    const uint64_t dups = count("node0.link.duplicated");
    EXPECT_GE(dups, 900u);  // 1000 expected, sigma 22
    EXPECT_LE(dups, 1100u);
    EXPECT_EQ(b.rec.got.size(), 2000u + dups);
}

// --- reorder ---------------------------------------------------------------------------------

SIM_TEST(FabricFault, reorder_swaps_with_the_next_packet_and_releases_a_lone_one_after_the_hold) {
    bench b({{"link.reorder_rate", "1"}}, 0, 1, 5);
    b.run(5 * kGapNs + 3000);
    // 0 held, 1 overtakes it, 0 right behind; the same for 3 and 2; 4 has no next packet and
    // goes after reorder_hold_ns (1000).
    EXPECT_EQ(b.rec.psns(), (std::vector<uint32_t>{1, 0, 3, 2, 4}));
    ASSERT_EQ(b.rec.got.size(), 5u);
    EXPECT_EQ(b.rec.got[0].at, seen_at(1));
    EXPECT_EQ(b.rec.got[1].at, seen_at(1));
    EXPECT_EQ(b.rec.got[2].at, seen_at(3));
    EXPECT_EQ(b.rec.got[3].at, seen_at(3));
    EXPECT_EQ(b.rec.got[4].at, seen_at(4, 1000));
    EXPECT_EQ(count("node0.link.reordered"), 2u);
    EXPECT_EQ(count("node0.link.reorder_timeouts"), 1u);
}

SIM_TEST(FabricFault, reorder_hold_shorter_than_the_gap_delays_but_keeps_order) {
    bench b({{"link.reorder_rate", "1"}, {"link.reorder_hold_ns", "50"}}, 0, 1, 6);
    b.run(6 * kGapNs + 1000);
    EXPECT_EQ(b.rec.psns(), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
    for (unsigned i = 0; i < b.rec.got.size(); ++i) EXPECT_EQ(b.rec.got[i].at, seen_at(i, 50));
    EXPECT_EQ(count("node0.link.reordered"), 0u);
    EXPECT_EQ(count("node0.link.reorder_timeouts"), 6u);
}

SIM_TEST(FabricFault, reorder_with_back_to_back_packets_keeps_arrival_times_non_decreasing) {
    // Packets queued on the wire (gap 0): each pair swaps, nothing is lost or stuck.
    bench b({{"link.reorder_rate", "0.3"}, {"link.dup_rate", "0.1"}, {"link.drop_rate", "0.05"}}, 0, 1, 200,
            0);
    b.run(200 * kSerNs + 5000);
    const uint64_t delivered = 200 - count("node0.link.dropped") + count("node0.link.duplicated");
    EXPECT_EQ(b.rec.got.size(), delivered);
    EXPECT_GT(count("node0.link.reordered"), 20u);
    EXPECT_FALSE(b.m->at(0).cable.faults.holding());
}

// --- link down -------------------------------------------------------------------------------

SIM_TEST(FabricFault, down_at_stops_delivery_at_that_time_exactly) {
    // Packet 5's last bit reaches node1 at 5 x 100 + 22.56 + 10 = 532.56 ns: lost from there on.
    bench b({{"link.down_at_ns", "532.56"}}, 0, 1, 10);
    b.run(10 * kGapNs + 1000);
    EXPECT_EQ(b.rec.psns(), (std::vector<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(count("node0.link.dropped_down"), 5u);
    EXPECT_EQ(count("node0.link.dropped"), 0u);
    EXPECT_EQ(b.rec.got.back().at, seen_at(4));
}

SIM_TEST(FabricFault, down_a_picosecond_later_lets_that_packet_through) {
    bench b({{"link.down_at_ns", "532.561"}}, 0, 1, 10);
    b.run(10 * kGapNs + 1000);
    EXPECT_EQ(b.rec.psns(), (std::vector<uint32_t>{0, 1, 2, 3, 4, 5}));
    EXPECT_EQ(count("node0.link.dropped_down"), 4u);
}

SIM_TEST(FabricFault, down_only_affects_the_cable_it_is_set_for) {
    // link1 is node1's cable: node0 -> node1 back to back is node0's cable and stays up.
    bench b({{"link1.down_at_ns", "0"}}, 0, 1, 10);
    b.run(10 * kGapNs + 1000);
    EXPECT_EQ(b.rec.got.size(), 10u);
    EXPECT_EQ(count("node1.link.dropped_down"), 0u);
    EXPECT_TRUE(b.m->at(1).cable.faults.active());
    EXPECT_FALSE(b.m->at(0).cable.faults.active());
}

// --- keys ------------------------------------------------------------------------------------

SIM_TEST(FabricFault, node_link_beats_link_n_beats_link_whatever_the_order) {
    // 3 nodes: node1.link.X given first still wins over link1.X and link.X.
    bench b({{"fabric.nodes", "3"},
             {"node1.link.drop_rate", "1"},
             {"link1.drop_rate", "0.5"},
             {"link.drop_rate", "0.25"},
             {"link2.drop_rate", "0.75"},
             {"link2.dup_rate", "0.125"},
             {"link.seed", "7"},
             {"link0.seed", "8"}},
            1, 0, 20);
    EXPECT_DOUBLE_EQ(b.m->at(0).cable.drop_rate.get(), 0.25);
    EXPECT_DOUBLE_EQ(b.m->at(1).cable.drop_rate.get(), 1.0);
    EXPECT_DOUBLE_EQ(b.m->at(2).cable.drop_rate.get(), 0.75);
    EXPECT_DOUBLE_EQ(b.m->at(2).cable.dup_rate.get(), 0.125);
    EXPECT_DOUBLE_EQ(b.m->at(0).cable.dup_rate.get(), 0.0);
    EXPECT_EQ(b.m->at(0).cable.seed.get(), 8u);
    EXPECT_EQ(b.m->at(1).cable.seed.get(), 7u);
    EXPECT_EQ(b.m->at(1).cable.fault_config().node, 1u);
    EXPECT_DOUBLE_EQ(b.m->at(1).cable.fault_config().drop_rate, 1.0);
    // node1's transmissions: all lost on its own cable.
    b.run(20 * kGapNs + 1000);
    EXPECT_TRUE(b.rec.got.empty());
    EXPECT_EQ(count("node1.link.dropped"), 20u);
    EXPECT_EQ(count("fabric.switch.forwarded"), 0u);
}

SIM_TEST(FabricFault, help_lists_generic_link_fault_keys) {
    machine m;
    std::vector<std::string> keys;
    for (const param_info& p : broker::instance().help()) keys.push_back(p.key);
    for (const char* k : {"link.drop_rate", "link.bit_error_rate", "link.dup_rate", "link.reorder_rate",
                          "link.reorder_hold_ns", "link.down_at_ns", "link.seed"})
        EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
}

SIM_TEST(FabricFault, rates_outside_zero_one_are_rejected_naming_the_key) {
    EXPECT_EQ(config_error_of({{"link.drop_rate", "1.5"}}),
              "bad value '1.5' for key 'node0.link.drop_rate' (test): expected number in [0,1]");
}

SIM_TEST(FabricFault, negative_rate_for_one_link_is_rejected_naming_its_key) {
    EXPECT_EQ(config_error_of({{"link1.reorder_rate", "-0.1"}}),
              "bad value '-0.1' for key 'node1.link.reorder_rate' (test): expected number in [0,1]");
}

SIM_TEST(FabricFault, bad_bit_error_rate_rejected) {
    EXPECT_NE(config_error_of({{"node0.link.bit_error_rate", "2"}}).find("'node0.link.bit_error_rate'"),
              std::string::npos);
}

SIM_TEST(FabricFault, bad_dup_rate_rejected) {
    EXPECT_NE(config_error_of({{"link.dup_rate", "nan"}}).find("for key 'node0.link.dup_rate'"),
              std::string::npos);
}

SIM_TEST(FabricFault, bad_down_at_rejected) {
    EXPECT_EQ(config_error_of({{"link.down_at_ns", "-2"}}),
              "bad value '-2' for key 'node0.link.down_at_ns' (test): expected number in [0,1e+15] or -1");
}

SIM_TEST(FabricFault, unknown_link_keys_rejected) {
    EXPECT_EQ(config_error_of({{"link1.bogus", "1"}}), "unknown configuration key 'link1.bogus' (test)");
}

SIM_TEST(FabricFault, link_of_a_missing_node_rejected) {
    EXPECT_EQ(config_error_of({{"link7.drop_rate", "0.1"}}),
              "unknown configuration key 'link7.drop_rate' (test)");
}

// --- switch topology -------------------------------------------------------------------------

SIM_TEST(FabricFault, switch_applies_link_n_faults_toward_node_n) {
    // node0 -> switch -> node1: node0's cable is clean, node1's cable (switch to node1) drops all.
    bench b({{"fabric.nodes", "3"}, {"link1.drop_rate", "1"}}, 0, 1, 30);
    b.run(30 * kGapNs + 1000);
    EXPECT_TRUE(b.rec.got.empty());
    EXPECT_EQ(count("node0.link.dropped"), 0u);
    EXPECT_EQ(count("fabric.switch.forwarded"), 30u);
    EXPECT_EQ(count("fabric.switch.out1.dropped"), 30u);
    EXPECT_EQ(count("fabric.switch.out0.dropped"), 0u);
    EXPECT_EQ(count("node1.link.dropped"), 0u);  // node1 itself sent nothing
    EXPECT_EQ(b.m->net.sw->faults(2).settings().drop_rate, 1.0);
}

SIM_TEST(FabricFault, switch_duplicates_and_reorders_toward_node_n) {
    bench b({{"fabric.nodes", "3"}, {"link1.reorder_rate", "1"}, {"link1.dup_rate", "1"}}, 0, 1, 4);
    b.run(4 * kGapNs + 3000);
    // Each packet twice; 1 overtakes 0, 3 overtakes 2.
    EXPECT_EQ(b.rec.psns(), (std::vector<uint32_t>{1, 1, 0, 0, 3, 3, 2, 2}));
    EXPECT_EQ(count("fabric.switch.out1.duplicated"), 4u);
    EXPECT_EQ(count("fabric.switch.out1.reordered"), 2u);
    EXPECT_EQ(count("node0.link.duplicated"), 0u);
}

SIM_TEST(FabricFault, switch_releases_a_lone_held_packet_after_the_hold) {
    bench b({{"fabric.nodes", "3"}, {"link1.reorder_rate", "1"}, {"link1.reorder_hold_ns", "500"}}, 0, 1, 1);
    b.run(3000);
    ASSERT_EQ(b.rec.got.size(), 1u);
    // Through the switch: the first bit crosses the cable, the switch starts sending it 90 ns
    // later (cut-through) and serialises it, cable; then held 500 ns.
    EXPECT_EQ(b.rec.got[0].at, sc_time(kPropNs + 90 + kSerNs + kPropNs + kRxPipeNs + 500, SC_NS));
    EXPECT_EQ(count("fabric.switch.out1.reorder_timeouts"), 1u);
}

SIM_TEST(FabricFault, switch_bit_errors_toward_node_are_caught) {
    bench b({{"fabric.nodes", "3"}, {"link1.bit_error_rate", "1e-4"}}, 0, 1, 2000);
    b.run(2000 * kGapNs + 1000);
    const uint64_t corrupted = count("fabric.switch.out1.corrupted");
    EXPECT_GT(corrupted, 300u);
    EXPECT_EQ(count("node0.link.corrupted"), 0u);
    EXPECT_EQ(count("node1.hca.port.rx_bad_vcrc") + count("node1.hca.port.rx_bad_icrc") +
                  count("node1.hca.port.rx_malformed"),
              corrupted);
    EXPECT_EQ(b.rec.got.size(), 2000u - corrupted);
}

SIM_TEST(FabricFault, switch_link_down_toward_node) {
    // Through the switch (cut-through) packet i reaches node1 at i x 100 + 10 + 90 + 22.56 + 10.
    bench b({{"fabric.nodes", "3"}, {"link1.down_at_ns", "432.56"}}, 0, 1, 8);
    b.run(8 * kGapNs + 1000);
    EXPECT_EQ(b.rec.psns(), (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(count("fabric.switch.out1.dropped_down"), 5u);
    EXPECT_EQ(count("node0.link.dropped_down"), 0u);
}

// Packet buffers: a sender's buffer offered with packet_handoff_ext travels to the receiving
// port itself, back to back and through the switch (no copy); what a cable alters or delivers
// twice is copied. Times are those of a copy.
SIM_TEST(FabricFault, the_senders_buffer_reaches_the_receiver_itself_back_to_back_and_through_the_switch) {
    for (const char* nodes : {"2", "3"}) {
        const bool sw = nodes[0] == '3';
        hcasim::test::run_forked([&] {
            bench b({{"fabric.nodes", nodes}}, 0, 1, 20, kGapNs, true);
            b.run(5000);
            ASSERT_EQ(b.rec.got.size(), 20u);
            ASSERT_EQ(b.tx->sent.size(), 20u);
            const size_t hdr = wire::LRH_BYTES + wire::BTH_BYTES;
            for (unsigned i = 0; i < 20; ++i) {
                EXPECT_EQ(b.rec.got[i].psn, i);
                EXPECT_EQ(b.rec.got[i].payload, b.tx->sent[i]->bytes + hdr)
                    << "packet " << i << " was copied";
                EXPECT_EQ(b.rec.got[i].at, sw ? seen_at(i, 90 + kPropNs) : seen_at(i));
            }
            if (sw) {
                EXPECT_EQ(count("fabric.switch.forwarded"), 20u);
            }
        });
    }
}

SIM_TEST(FabricFault,
         a_packet_of_up_to_224_bytes_is_copied_into_the_receive_slot_and_the_sender_keeps_its_buffer) {
    // 64-byte payload: LRH 8 + BTH 12 + 64 + ICRC 4 + VCRC 2 = 90 bytes, 7.2 ns at EDR 4x;
    // 196 bytes of payload make 222 bytes on the wire, which a slot holds; 200 make 226, which
    // go into a packet buffer (the sender's).
    for (const uint32_t payload : {64u, 196u, 200u}) {
        for (const char* nodes : {"2", "3"}) {
            hcasim::test::run_forked([&] {
                const bool sw = nodes[0] == '3';
                const bool in_slot = payload <= 196;
                bench b({{"fabric.nodes", nodes}}, 0, 1, 10, kGapNs, true, payload);
                b.run(3000);
                ASSERT_EQ(b.rec.got.size(), 10u);
                const size_t hdr = wire::LRH_BYTES + wire::BTH_BYTES;
                const double ser = (hdr + payload + 6) * 0.08;
                for (unsigned i = 0; i < 10; ++i) {
                    EXPECT_EQ(b.rec.got[i].psn, i);
                    EXPECT_EQ(b.rec.got[i].payload == b.tx->sent[i]->bytes + hdr, !in_slot)
                        << payload << " B, packet " << i;
                    EXPECT_EQ(
                        b.rec.got[i].at,
                        sc_time(i * kGapNs + ser + kPropNs + (sw ? 90 + kPropNs : 0) + kRxPipeNs, SC_NS));
                    if (in_slot && !sw) {  // back to back the sender built every packet in the same buffer
                        EXPECT_EQ(b.tx->sent[i], b.tx->sent[0]);
                    }
                }
            });
        }
    }
}

SIM_TEST(FabricFault, a_buffer_handed_through_the_switch_reaches_a_duplicating_cable_intact_twice) {
    // The switch's output to node1 duplicates every packet: the first delivery takes the
    // buffer, the second copies it (the recorder checks every payload byte).
    bench b({{"fabric.nodes", "3"}, {"link1.dup_rate", "1"}}, 0, 1, 10, kGapNs, true);
    b.run(3000);
    ASSERT_EQ(b.rec.got.size(), 20u);
    const size_t hdr = wire::LRH_BYTES + wire::BTH_BYTES;
    for (unsigned i = 0; i < 10; ++i) {
        EXPECT_EQ(b.rec.got[2 * i].psn, i);
        EXPECT_EQ(b.rec.got[2 * i + 1].psn, i);
        EXPECT_EQ(b.rec.got[2 * i].payload, b.tx->sent[i]->bytes + hdr);
        EXPECT_NE(b.rec.got[2 * i + 1].payload, b.tx->sent[i]->bytes + hdr);
        EXPECT_EQ(b.rec.got[2 * i].at, b.rec.got[2 * i + 1].at);
    }
    EXPECT_EQ(count("fabric.switch.out1.duplicated"), 10u);
}

SIM_TEST(FabricFault, directions_have_their_own_streams) {
    // Both directions of cable 1 at drop 0.5 (node1 -> switch and switch -> node1), and the
    // other nodes' cables: independent draws, so the loss patterns differ.
    bench b({{"fabric.nodes", "3"}, {"link.drop_rate", "0.5"}}, 0, 1, 400);
    b.run(400 * kGapNs + 1000);
    const uint64_t at_node0 = count("node0.link.dropped");
    const uint64_t at_switch = count("fabric.switch.out1.dropped");
    EXPECT_EQ(count("fabric.switch.forwarded"), 400u - at_node0);
    EXPECT_EQ(b.rec.got.size(), 400u - at_node0 - at_switch);
    EXPECT_GT(at_node0, 150u);
    EXPECT_LT(at_node0, 250u);
    EXPECT_GT(at_switch, 50u);
}
