// RTL plug-in libraries (rtl/abi/hcasim_rtl.h, docs/cosim.md "Plug-in libraries") behind the
// P_Key checker: the reference RTL built as a plug-in runs beside the built-in verilated build
// on the same random stream and equals it verdict for verdict and cycle for cycle; the broken
// build as a plug-in is caught by impl=both with the divergence report.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/hca/pkey_checker.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/mad.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace sc_core;

namespace {

/// What passes a checker, in order, with times.
struct recording_sink : rx_sink, pkey_violation_sink {
    std::vector<std::pair<uint32_t, sc_time>> received;  // PSN, when
    uint64_t traps = 0;
    void receive(const rx_packet& p) override { received.emplace_back(p.h.b.psn, sc_time_stamp()); }
    void bad_pkey(const rx_packet&, uint16_t) override { ++traps; }
};

/// A random stream into one checker with limited members in the table (as CosimPkey's):
/// packets, some at the same instant, table writes, QP rebinds, Q_Key violations.
struct stream_driver : sc_module {
    pkey_checker& pk;
    unsigned packets, sent = 0;
    bool done = false;
    std::mt19937 rng{20261207};
    std::array<uint8_t, 256> plain{};

    SC_HAS_PROCESS(stream_driver);
    stream_driver(sc_module_name n, pkey_checker& k, unsigned count) : sc_module(n), pk(k), packets(count) {
        SC_THREAD(run);
    }
    uint16_t key() {
        static const uint16_t keys[] = {0xFFFF, 0x7FFF, 0x8001, 0x0001, 0x8002, 0x0002, 0x0000, 0x1234};
        return keys[rng() % std::size(keys)];
    }
    void run() {
        wait(10, SC_NS);
        for (unsigned i = 0; i < 16; ++i) pk.set_pkey(i, key());
        for (uint32_t q = 2; q < 12; ++q) pk.bind_qp(q, uint16_t(rng() % 16));
        while (sent < packets && pk.divergence().empty()) {
            const unsigned r = rng() % 100;
            if (r < 3) pk.set_pkey(rng() % 16, key());
            if (r >= 3 && r < 5) pk.bind_qp(2 + rng() % 10, uint16_t(rng() % 16));
            if (r == 6) pk.qkey_violation();
            rx_packet p{};
            p.h.b.dest_qp = rng() % 14;
            p.h.b.pkey = key();
            p.h.b.opcode = wire::op::UD_SEND_ONLY;
            p.h.b.psn = sent;
            p.h.l.slid = 1;
            p.h.l.dlid = rng() % 8 == 0 ? 0xC000 + uint16_t(rng() % 16) : 1;
            p.payload = plain.data();
            p.payload_len = 256;
            p.wire_len = 300;
            pk.receive(p);
            ++sent;
            const unsigned gap = rng() % 4;
            if (gap) wait(gap * 1.0, SC_NS);
        }
        wait(1, SC_US);
        done = true;
    }
};

struct side {
    pkey_checker pk;
    recording_sink sink;
    stream_driver drv;
    side(const char* name, const char* driver, unsigned packets) : pk(name, 64), drv(driver, pk, packets) {
        pk.bind_receiver(sink);
        pk.bind_violation_sink(sink);
    }
};

void set(const std::string& key, const std::string& value) { broker::instance().set(key, value, "test"); }

}  // namespace

SIM_TEST(CosimPlugin,
         the_reference_pkey_checker_plugin_equals_the_builtin_build_verdict_for_verdict_and_cycle_for_cycle) {
    for (const char* u : {"builtin", "plugin"}) {
        set(std::string(u) + ".impl", "both");
        set(std::string(u) + ".table_len", "16");
    }
    set("plugin.rtl_lib", HCASIM_RTL_PKEY_CHECKER_LIB);
    side a("builtin", "drv_a", 20000), b("plugin", "drv_b", 20000);
    broker::instance().check_unused();
    sc_start(sc_time(1, SC_SEC));
    ASSERT_TRUE(a.drv.done && b.drv.done);
    EXPECT_EQ(b.pk.divergence(), "");
    EXPECT_EQ(b.pk.rtl_compared.value(), 20000u);
    EXPECT_GT(b.pk.violations.value(), 2000u);
    EXPECT_GT(b.sink.received.size(), 2000u);
    // The same packets passed at the same times, the same counters, the same cycles.
    EXPECT_TRUE(a.sink.received == b.sink.received);
    EXPECT_EQ(a.sink.traps, b.sink.traps);
    EXPECT_EQ(a.pk.violations.value(), b.pk.violations.value());
    EXPECT_EQ(a.pk.pkey_violation_count(), b.pk.pkey_violation_count());
    EXPECT_EQ(a.pk.qkey_violation_count(), b.pk.qkey_violation_count());
    EXPECT_EQ(a.pk.rtl_cycles.value(), b.pk.rtl_cycles.value());
    EXPECT_GT(b.pk.rtl_cycles.value(), 20000u);
}

SIM_TEST(CosimPlugin, the_broken_pkey_checker_plugin_is_caught_with_the_divergence_report) {
    set("plugin.impl", "both");
    set("plugin.table_len", "16");
    set("plugin.rtl_lib", HCASIM_RTL_PKEY_CHECKER_BROKEN_LIB);
    side b("plugin", "drv", 20000);
    broker::instance().check_unused();
    sc_start(sc_time(1, SC_SEC));
    EXPECT_EQ(b.pk.divergences.value(), 1u);
    const std::string& r = b.pk.divergence();
    EXPECT_NE(r.find("plugin: TLM and RTL diverge at "), std::string::npos) << r;
    EXPECT_NE(r.find(" ns: the verdicts differ"), std::string::npos) << r;
    // The broken rule: two limited members match, so the RTL accepts what the TLM drops.
    EXPECT_NE(r.find("TLM verdict: DROP"), std::string::npos) << r;
    EXPECT_NE(r.find("RTL verdict: ACCEPT"), std::string::npos) << r;
    EXPECT_LT(b.drv.sent, 20000u) << "the first divergence stops the stream";
}
