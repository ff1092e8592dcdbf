// Co-simulation of the P_Key checker (issue 8, docs/cosim.md): the verilated RTL of
// rtl/pkey_checker.sv behind the unit's TLM-side interface. A randomised stream of 100,000
// packets with random P_Key tables, random QP bindings and table writes in between runs with
// impl=both (the TLM model and the RTL check every packet, the comparator stops at the first
// disagreement) and shows zero divergences; the deliberately broken RTL build (two limited
// members match) is caught with a readable report; the RTL's verdict latency, clock gating and
// FST waveform are checked exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "gtkwave/fstapi.h"  // Verilator's copy of GTKWave's FST reader/writer
#include "model/core/param.h"
#include "model/hca/pkey_checker.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/mad.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace sc_core;

namespace {

/// Records what passes the checker: every packet, by reason, with its arrival time.
struct recording_sink : rx_sink, pkey_violation_sink {
    uint64_t received = 0, smps = 0, traps = 0, gsi = 0, gsi_index_sum = 0;
    sc_time last_time = SC_ZERO_TIME;
    void receive(const rx_packet& p) override {
        ++received;
        last_time = sc_time_stamp();
        if (p.h.b.dest_qp == pkey_checker::GSI_QPN) {
            ++gsi;
            gsi_index_sum += p.pkey_index;
        }
    }
    void bad_pkey(const rx_packet&, uint16_t) override { ++traps; }
};

struct smi_sink : rx_sink {
    uint64_t n = 0;
    void receive(const rx_packet&) override { ++n; }
};

/// Drives a random stream into one checker: packets (some at the same instant, most a few ns
/// apart), P_Key table writes and QP rebinds in between.
struct stream_driver : sc_module {
    pkey_checker& pk;
    unsigned packets;
    unsigned sent = 0;
    bool done = false;
    std::mt19937 rng{20261203};
    std::array<uint8_t, 256> smp{}, plain{};

    SC_HAS_PROCESS(stream_driver);
    stream_driver(sc_module_name n, pkey_checker& k, unsigned count) : sc_module(n), pk(k), packets(count) {
        smp[1] = wire::MGMT_CLASS_SUBN_LID_ROUTED;
        SC_THREAD(run);
    }
    uint16_t key() {
        // A few partitions, each as full and limited member, plus invalid keys and noise.
        static const uint16_t keys[] = {0xFFFF, 0x7FFF, 0x8001, 0x0001, 0x8002, 0x0002,
                                        0x8003, 0x0003, 0x8000, 0x0000, 0x1234};
        return keys[rng() % std::size(keys)];
    }
    void run() {
        wait(10, SC_NS);
        for (unsigned i = 0; i < 16; ++i) pk.set_pkey(i, key());
        for (uint32_t q = 2; q < 12; ++q) pk.bind_qp(q, uint16_t(rng() % 16));
        while (sent < packets) {
            const unsigned r = rng() % 100;
            if (r < 3) pk.set_pkey(rng() % 16, key());
            if (r >= 3 && r < 5) pk.bind_qp(2 + rng() % 10, uint16_t(rng() % 16));
            if (r == 5) pk.unbind_qp(2 + rng() % 10);
            if (r == 6) pk.qkey_violation();
            rx_packet p{};
            const unsigned q = rng() % 16;  // 0: SMI, 1: GSI, 2..11 bound (mostly), 12..15 never bound
            p.h.b.dest_qp = q;
            p.h.b.pkey = key();
            p.h.b.opcode = wire::op::UD_SEND_ONLY;
            p.h.b.psn = sent;
            p.h.l.slid = uint16_t(1 + rng() % 8);
            const unsigned d = rng() % 8;
            p.h.l.dlid = d == 0 ? 0xC000 + uint16_t(rng() % 16) : d == 1 ? 0xFFFF : 1;
            p.payload = (q == 0 && rng() % 2) ? smp.data() : plain.data();
            p.payload_len = 256;
            p.wire_len = 300;
            pk.receive(p);
            ++sent;
            const unsigned gap = rng() % 4;  // 0: the next one at the same instant
            if (gap) wait(gap * 1.0, SC_NS);
        }
        wait(1, SC_US);  // every verdict is in, the clock has stopped
        done = true;
        sc_stop();
    }
};

struct bench {
    pkey_checker pk;
    recording_sink sink;
    smi_sink smi;
    stream_driver drv;
    explicit bench(unsigned packets) : pk("pkey_checker", 64), drv("driver", pk, packets) {
        pk.bind_receiver(sink);
        pk.bind_smi(smi);
        pk.bind_violation_sink(sink);
    }
};

void set(const char* key, const std::string& value) { broker::instance().set(key, value, "test"); }

}  // namespace

SIM_TEST(CosimPkey, C10_120_C10_131_C10_132_random_stream_of_100000_packets_tlm_and_rtl_agree) {
    set("pkey_checker.impl", "both");
    set("pkey_checker.table_len", "16");
    bench b(100000);
    broker::instance().check_unused();
    sc_start();
    EXPECT_TRUE(b.drv.done);
    EXPECT_EQ(b.pk.divergence(), "");
    EXPECT_EQ(b.pk.divergences.value(), 0u);
    EXPECT_EQ(b.pk.checked.value(), 100000u);
    EXPECT_EQ(b.pk.rtl_checks.value(), 100000u);
    EXPECT_EQ(b.pk.rtl_compared.value(), 100000u);
    // Nothing lost: every packet was forwarded (to the transport engine or the SMA) or dropped
    // as a violation, and every violation was reported for a trap.
    EXPECT_EQ(b.sink.received + b.smi.n + b.pk.violations.value(), 100000u);
    EXPECT_EQ(b.sink.traps, b.pk.violations.value());
    // The stream exercises every rule: drops, SMPs, QP1 matches at entries other than 0.
    EXPECT_GT(b.pk.violations.value(), 20000u);
    EXPECT_GT(b.sink.received, 20000u);
    EXPECT_GT(b.smi.n, 1000u);
    EXPECT_GT(b.sink.gsi, 1000u);
    EXPECT_GT(b.sink.gsi_index_sum, b.sink.gsi) << "QP1 matched entries beyond 0";
    // The counters agree (compared whenever the RTL went idle) and saturate at 0xFFFF.
    const uint64_t v = b.pk.violations.value();
    EXPECT_EQ(b.pk.pkey_violation_count(), v > 0xFFFF ? 0xFFFFu : v);
    EXPECT_GT(b.pk.rtl_cycles.value(), 100000u);
}

SIM_TEST(CosimPkey, the_broken_rtl_build_is_caught_with_a_readable_report) {
    set("pkey_checker.impl", "both");
    set("pkey_checker.rtl_variant", "broken_membership");
    set("pkey_checker.table_len", "16");
    bench b(100000);
    broker::instance().check_unused();
    sc_start();
    EXPECT_FALSE(b.drv.done) << "the first divergence stops the simulation";
    EXPECT_EQ(b.pk.divergences.value(), 1u);
    const std::string& r = b.pk.divergence();
    ASSERT_NE(r, "");
    // The report: where and when, the packet's headers, both verdicts, the waveform.
    EXPECT_NE(r.find("pkey_checker: TLM and RTL diverge at "), std::string::npos) << r;
    EXPECT_NE(r.find(" ns: the verdicts differ"), std::string::npos) << r;
    EXPECT_NE(r.find("BTH opcode 0x64 P_Key 0x"), std::string::npos) << r;
    const size_t tlm = r.find("TLM verdict: "), rtl = r.find("RTL verdict: ");
    ASSERT_NE(tlm, std::string::npos) << r;
    ASSERT_NE(rtl, std::string::npos) << r;
    EXPECT_NE(r.substr(tlm + 13, r.find('\n', tlm) - tlm - 13),
              r.substr(rtl + 13, r.find('\n', rtl) - rtl - 13))
        << r;
    EXPECT_NE(r.find("waveform: none (run with --waves FILE.fst)"), std::string::npos) << r;
    // The packet in question was held back: the RTL's verdict no longer counts after the stop.
    EXPECT_LT(b.pk.rtl_compared.value(), 100000u);
}

SIM_TEST(CosimPkey, the_rtl_verdict_takes_one_and_a_half_cycles_after_the_clock_edge) {
    // Contract: accepted at the first rising edge at or after arrival, verdict registered at the
    // next rising edge, taken by the transactor at the falling edge after it.
    set("pkey_checker.impl", "rtl");
    set("pkey_checker.clock_mhz", "500");  // 2 ns cycle
    pkey_checker pk("pkey_checker", 16);
    recording_sink sink;
    pk.bind_receiver(sink);
    struct one : sc_module {
        SC_HAS_PROCESS(one);
        pkey_checker& pk;
        std::vector<sc_time> sent;
        one(sc_module_name n, pkey_checker& k) : sc_module(n), pk(k) { SC_THREAD(run); }
        void run() {
            rx_packet p{};
            p.h.b.dest_qp = 7;
            p.h.b.pkey = 0xFFFF;
            for (double at : {100.0, 201.0}) {  // on the 2 ns grid, then half-way between edges
                wait(sc_time(at, SC_NS) - sc_time_stamp());
                pk.receive(p);
                wait(50, SC_NS);
                sent.push_back(sink_time);
            }
        }
        sc_time sink_time;
    } drv("one", pk);
    struct timed_sink : rx_sink {
        one* d = nullptr;
        void receive(const rx_packet&) override { d->sink_time = sc_time_stamp(); }
    } ts;
    ts.d = &drv;
    pk.bind_receiver(ts);
    sc_start(1, SC_US);
    ASSERT_EQ(drv.sent.size(), 2u);
    EXPECT_EQ(drv.sent[0], sc_time(103, SC_NS)) << "edge at 100, verdict at 102, taken at 103";
    EXPECT_EQ(drv.sent[1], sc_time(205, SC_NS)) << "next edge 202, verdict at 204, taken at 205";
    // Clock gating: after the reset (3 cycles) each lone packet runs the clock for two cycles.
    EXPECT_EQ(pk.rtl_cycles.value(), 3u + 2u + 2u);
}

SIM_TEST(CosimPkey, waves_writes_an_fst_of_the_rtl_pins_with_a_gated_clock) {
    const std::string file =
        (std::filesystem::temp_directory_path() / "hcasim_cosim_waves_test.fst").string();
    std::filesystem::remove(file);
    set("pkey_checker.impl", "rtl");
    set("pkey_checker.waves", file);
    set("pkey_checker.table_len", "16");
    uint64_t cycles = 0;
    {
        bench b(200);
        broker::instance().check_unused();
        sc_start();
        ASSERT_TRUE(b.drv.done);
        EXPECT_EQ(b.pk.rtl_checks.value(), 200u);
        cycles = b.pk.rtl_cycles.value();
    }
    ASSERT_TRUE(std::filesystem::exists(file));
    void* r = fstReaderOpen(file.c_str());
    ASSERT_NE(r, nullptr) << file << " is no FST file";
    std::vector<std::string> names;
    fstHandle clk = 0;
    while (fstHier* h = fstReaderIterateHier(r))
        if (h->htyp == FST_HT_VAR) {
            std::string n(h->u.var.name, h->u.var.name_length);
            n = n.substr(0, n.find(' '));  // "req_pkey [15:0]"
            if (n == "clk" && !clk) clk = h->u.var.handle;
            names.push_back(n);
        }
    auto has = [&](const char* n) { return std::find(names.begin(), names.end(), n) != names.end(); };
    for (const char* pin : {"clk", "rst_n", "req_valid", "req_pkey", "vrd_valid", "vrd_reason", "tbl_we",
                            "pkey_viol_count", "trap_valid"})
        EXPECT_TRUE(has(pin)) << pin << " not among " << ::testing::PrintToString(names);
    EXPECT_GT(fstReaderGetEndTime(r), 0u);
    // The clock in the file rises exactly once per cycle the RTL ran: gated while idle.
    ASSERT_NE(clk, 0u);
    struct edges {
        uint64_t rising = 0;
    } e;
    fstReaderClrFacProcessMaskAll(r);
    fstReaderSetFacProcessMask(r, clk);
    fstReaderIterBlocks(
        r,
        [](void* user, uint64_t, fstHandle, const unsigned char* v) {
            if (v && v[0] == '1') ++static_cast<edges*>(user)->rising;
        },
        &e, nullptr);
    EXPECT_EQ(e.rising, cycles);
    // At most two cycles per packet plus the reset; an ungated clock would tick 800 times in the
    // final microsecond alone.
    EXPECT_LE(cycles, 200u * 2 + 3);
    EXPECT_GE(cycles, 200u / 2);
    fstReaderClose(r);
    std::filesystem::remove(file);
}

SIM_TEST(CosimPkey, rtl_configuration_errors_are_one_line) {
    set("pkey_checker.impl", "rtl");
    set("pkey_checker.table_len", "129");
    try {
        pkey_checker pk("pkey_checker", 16);
        FAIL() << "a table larger than the RTL's was taken";
    } catch (const config_error& e) {
        EXPECT_STREQ(
            e.what(),
            "pkey_checker.table_len: 129 entries, but the RTL (impl=rtl) is built with 128 per port");
    }
}
