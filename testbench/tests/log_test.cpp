// Per-module logging (model/core/log.h): --log patterns, levels, errors and the line format.
#include <gtest/gtest.h>

#include <systemc>

#include "model/core/log.h"
#include "model/core/param.h"
#include "tlm_if/wire/ib_headers.h"
#include "testbench/tests/sim_fork.h"

using namespace hcasim;

namespace {

/// A module that logs one info and one debug line when run.
struct chatty : sc_core::sc_module {
    module_log log;
    SC_HAS_PROCESS(chatty);
    explicit chatty(const sc_core::sc_module_name& n) : sc_core::sc_module(n) { SC_METHOD(speak); }
    void speak() {
        if (sc_core::sc_time_stamp() == sc_core::SC_ZERO_TIME) {
            next_trigger(sc_core::sc_time(1500, sc_core::SC_PS));
            return;
        }
        HCASIM_LOG(log, info, "QP 0x" << std::hex << 17 << " go-back-N");
        HCASIM_LOG(log, debug, "packet PSN " << 42);
    }
};

struct top : sc_core::sc_module {
    chatty engine;
    explicit top(const sc_core::sc_module_name& n) : sc_core::sc_module(n), engine("transport_engine") {}
};

}  // namespace

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

SIM_TEST(Log, a_module_logs_nothing_by_default) {
    top node("node0");
    EXPECT_EQ(node.engine.log.name(), "node0.transport_engine");
    EXPECT_FALSE(node.engine.log.on(log_level::info));
    EXPECT_FALSE(node.engine.log.on(log_level::debug));
    testing::internal::CaptureStderr();
    sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

SIM_TEST(Log, debug_lines_carry_simulated_time_and_the_hierarchical_name) {
    log_settings::instance().set("node0.transport_engine=debug");
    top node("node0");
    EXPECT_TRUE(node.engine.log.on(log_level::debug));
    broker::instance().check_unused();
    testing::internal::CaptureStderr();
    sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "[         1.500 ns] node0.transport_engine: QP 0x11 go-back-N\n"
              "[         1.500 ns] node0.transport_engine: packet PSN 42\n");
}

SIM_TEST(Log, info_level_leaves_debug_lines_out) {
    log_settings::instance().set("node0.transport_engine=info");
    top node("node0");
    testing::internal::CaptureStderr();
    sc_core::sc_start(sc_core::sc_time(10, sc_core::SC_NS));
    EXPECT_EQ(testing::internal::GetCapturedStderr(),
              "[         1.500 ns] node0.transport_engine: QP 0x11 go-back-N\n");
}

SIM_TEST(Log, a_pattern_without_node_names_that_module_in_every_node_and_the_last_match_wins) {
    log_settings::instance().set("transport_engine=debug");
    log_settings::instance().set("node1.*=off");
    top a("node0"), b("node1");
    EXPECT_TRUE(a.engine.log.on(log_level::debug));
    EXPECT_FALSE(b.engine.log.on(log_level::info));
    broker::instance().check_unused();
}

SIM_TEST(Log, a_pattern_that_names_no_module_fails_like_an_unknown_key) {
    log_settings::instance().set("node0.transport_engin=debug");
    top node("node0");
    try {
        broker::instance().check_unused();
        FAIL() << "no error";
    } catch (const config_error& e) {
        EXPECT_STREQ(e.what(),
                     "--log 'node0.transport_engin=debug': no module that logs is named "
                     "'node0.transport_engin' (modules that log: transport_engine)");
    }
}

SIM_TEST(Log, bad_syntax_and_unknown_levels_name_the_argument) {
    EXPECT_THROW(
        {
            try {
                log_settings::instance().set("node0.transport_engine");
            } catch (const config_error& e) {
                EXPECT_STREQ(e.what(),
                             "--log 'node0.transport_engine': expected MODULE=LEVEL, e.g. "
                             "node0.hca.transport_engine=debug");
                throw;
            }
        },
        config_error);
    EXPECT_THROW(
        {
            try {
                log_settings::instance().set("node0.hca=verbose");
            } catch (const config_error& e) {
                EXPECT_STREQ(e.what(), "--log 'node0.hca=verbose': unknown level 'verbose' (off|info|debug)");
                throw;
            }
        },
        config_error);
}

TEST(Log, packets_are_named_by_their_lrh_and_bth) {
    uint8_t pkt[64] = {};
    wire::lrh l;
    l.dlid = 0x2;
    l.slid = 0x1;
    l.sl = 3;
    l.pkt_len_words = 16;
    wire::encode(l, pkt);
    wire::bth b;
    b.opcode = 0x0a;
    b.dest_qp = 0x11;
    b.psn = 42;
    wire::encode(b, pkt + wire::LRH_BYTES);
    EXPECT_EQ(wire::describe_packet(pkt, 64), "SLID 0x1 DLID 0x2 SL 3 opcode 0x0a QP 0x11 PSN 42 (64 bytes)");
    EXPECT_EQ(wire::describe_packet(pkt, 12), "SLID 0x1 DLID 0x2 SL 3 (12 bytes)");
    EXPECT_EQ(wire::describe_packet(pkt, 5), "a 5-byte fragment");
}
