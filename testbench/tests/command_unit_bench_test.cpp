// Bench of the command unit alone: its DMA port on a recording host memory holding the command
// mailbox and the context tables, and fakes for the units it loads (WQE fetcher, transport
// engine, translation unit, CQ writer, P_Key table), recording each call with its time. Checks
// the mailbox read, the context table writes, the calls to the units and the status written
// back, at exact times, and the status of commands it must refuse.
#include <gtest/gtest.h>

#include <systemc>

#include <cstddef>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "model/hca/command_unit.h"
#include "model/hca/cq_writer.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/qp_control.h"
#include "model/hca/translation_unit.h"
#include "model/hca/wqe_fetcher.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/commands.h"
#include "tlm_if/contexts.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;
using sc_core::sc_time_stamp;

namespace {

// At kBenchClock (800 MHz): exec_cycles 200 = 250 ns per command besides its DMA (the unit's default).
const sc_time kLatency(100, SC_NS);  // every host memory access
constexpr uint64_t kMailbox = 0x1000;
constexpr uint64_t kQpcBase = 0x10000, kCqcBase = 0x20000, kEqcBase = 0x30000, kMptBase = 0x40000,
                   kMttBase = 0x50000;

struct fake_fetcher final : fetch_control {
    call_log& log;
    explicit fake_fetcher(call_log& l) : log(l) {}
    void set_qpc_table(uint64_t base) override {
        log.add("fetcher.set_qpc_table(" + std::to_string(base) + ")");
    }
    void load_qp(const hw::qp_context& c) override {
        log.add("fetcher.load_qp(" + std::to_string(c.qpn) + ", state " + std::to_string(c.state) + ")");
    }
    void set_state(uint32_t qpn, uint8_t) override {
        log.add("fetcher.set_state(" + std::to_string(qpn) + ")");
    }
    void create_srq(const hw::srq_context&) override { log.add("fetcher.create_srq"); }
    void destroy_srq(uint32_t) override { log.add("fetcher.destroy_srq"); }
    bool srq_valid(uint32_t) const override { return false; }
    hw::srq_context srq_ctx(uint32_t) const override { return {}; }
    void srq_attach(uint32_t, int) override { log.add("fetcher.srq_attach"); }
    uint8_t modify_srq(uint32_t, uint32_t, const hw::modify_srq_in&, sc_time&) override { return hw::CMD_OK; }
};

struct fake_engine final : qp_control {
    call_log& log;
    explicit fake_engine(call_log& l) : log(l) {}
    void set_qpc_table(uint64_t base) override {
        log.add("engine.set_qpc_table(" + std::to_string(base) + ")");
    }
    void load_qp(const hw::qp_context& c, uint32_t mask, sc_time&) override {
        log.add("engine.load_qp(" + std::to_string(c.qpn) + ", state " + std::to_string(c.state) + ", mask " +
                std::to_string(mask) + ")");
    }
    void destroy_qp(uint32_t qpn) override { log.add("engine.destroy_qp(" + std::to_string(qpn) + ")"); }
    uint8_t state(uint32_t) const override { return hw::QPS_RESET; }
    bool draining(uint32_t) const override { return false; }
    void current_psns(uint32_t, uint32_t& sq, uint32_t& rq) const override { sq = rq = 0; }
    void load_eec(const hw::eec_context& c, uint32_t, sc_time&) override {
        log.add("engine.load_eec(" + std::to_string(c.eecn) + ", state " + std::to_string(c.state) + ")");
    }
    void destroy_eec(uint32_t eecn) override { log.add("engine.destroy_eec(" + std::to_string(eecn) + ")"); }
    uint8_t eec_state(uint32_t) const override { return hw::QPS_RESET; }
    void eec_psns(uint32_t, uint32_t& sq, uint32_t& rq) const override { sq = rq = 0; }
    void eec_paths(uint32_t, hw::eec_context&) const override {}
};

struct fake_tables final : memory_tables {
    call_log& log;
    explicit fake_tables(call_log& l) : log(l) {}
    void set_tables(uint64_t mpt_base, uint32_t num_mpts, uint64_t, uint64_t, uint32_t) override {
        log.add("xlate.set_tables(" + std::to_string(mpt_base) + ", " + std::to_string(num_mpts) + ")");
    }
    bool read_mpt(uint32_t, hw::mpt_entry&, sc_time&) override { return false; }
    bool write_mpt(uint32_t, const hw::mpt_entry&, sc_time&) override {
        log.add("xlate.write_mpt");
        return true;
    }
    bool write_mtt(uint64_t, const hw::mtt_entry*, uint32_t, sc_time&) override {
        log.add("xlate.write_mtt");
        return true;
    }
    xlate_status destroy(uint32_t, sc_time&) override { return xlate_status::ok; }
    uint32_t windows_bound_to(uint32_t) const override { return 0; }
};

struct fake_cqs final : cq_control {
    call_log& log;
    std::vector<uint32_t> valid;  // CQs loaded
    explicit fake_cqs(call_log& l) : log(l) {}
    void set_cqc_table(uint64_t base) override { log.add("cq.set_cqc_table(" + std::to_string(base) + ")"); }
    void load_cq(uint32_t cqn, const hw::cq_context&) override {
        log.add("cq.load_cq(" + std::to_string(cqn) + ")");
        valid.push_back(cqn);
    }
    void destroy_cq(uint32_t cqn) override { log.add("cq.destroy_cq(" + std::to_string(cqn) + ")"); }
    bool cq_valid(uint32_t cqn) const override {
        return std::find(valid.begin(), valid.end(), cqn) != valid.end();
    }
    void load_eq(uint32_t, const hw::eq_context&) override { log.add("cq.load_eq"); }
    bool resize_cq(uint32_t, uint64_t, uint8_t, uint32_t, sc_time&) override { return false; }
    bool query_cq(uint32_t, hw::cq_context&) const override { return false; }
};

struct fake_pkeys final : pkey_control {
    call_log& log;
    explicit fake_pkeys(call_log& l) : log(l) {}
    unsigned size() const override { return 4; }
    bool set_pkey(unsigned, uint16_t) override { return true; }
    uint16_t pkey(unsigned) const override { return 0xFFFF; }
    void bind_qp(uint32_t qpn, uint16_t index) override {
        log.add("pkeys.bind_qp(" + std::to_string(qpn) + ", " + std::to_string(index) + ")");
    }
    void unbind_qp(uint32_t qpn) override { log.add("pkeys.unbind_qp(" + std::to_string(qpn) + ")"); }
    uint16_t pkey_violation_count() const override { return 0; }
    uint16_t qkey_violation_count() const override { return 0; }
};

hca_identity identity() {
    hca_identity id;
    id.caps.max_qp = 64;
    id.caps.max_cq = 64;
    id.caps.max_cqe = 4095;
    id.caps.max_mr = 256;
    id.caps.max_mtt = 4096;
    return id;
}

struct bench : sc_core::sc_module {
    recording_memory mem{"memory", 1 << 20, kLatency};
    hca_identity id = identity();
    command_unit cmd{"command_unit", kBenchClock, id, 16, 16};
    call_log log;
    fake_fetcher fetcher{log};
    fake_engine engine{log};
    fake_tables xlate{log};
    fake_cqs cqs{log};
    fake_pkeys pkeys{log};

    bench() : sc_module("bench") {
        cmd.dma.socket.bind(mem.socket);
        cmd.bind(fetcher, engine, xlate, cqs, pkeys);
        cmd.set_mailbox(kMailbox);
    }

    /// Writes the command into the mailbox, rings the doorbell with `token` now, and waits
    /// until the unit is idle again; returns the status word it wrote to the mailbox.
    template <class In>
    uint32_t run_command(uint16_t opcode, uint32_t in_mod, uint32_t op_mod, const In& in, uint32_t token) {
        hw::cmd_mailbox m{};
        m.opcode = opcode;
        m.in_mod = in_mod;
        m.op_mod = op_mod;
        m.token = token;
        std::memcpy(m.in, &in, sizeof in);
        mem.put(kMailbox, m);
        cmd.doorbell(token);
        do sc_core::wait(10, SC_NS);
        while (cmd.status() & 1);
        EXPECT_EQ(cmd.status(), token << 8) << "not idle with the command's token";
        EXPECT_EQ(mem.get<uint32_t>(kMailbox + offsetof(hw::cmd_mailbox, done_token)), token);
        return mem.get<uint32_t>(kMailbox + offsetof(hw::cmd_mailbox, status));
    }

    uint32_t init_hca(uint32_t token = 1) {
        hw::init_hca_in t{};
        t.qpc_base = kQpcBase;
        t.cqc_base = kCqcBase;
        t.eqc_base = kEqcBase;
        t.mpt_base = kMptBase;
        t.mtt_base = kMttBase;
        t.log_num_qps = 4;
        t.log_num_cqs = 4;
        t.log_num_eqs = 1;
        t.log_num_mpts = 6;
        t.log_num_mtts = 8;
        return run_command(hw::CMD_INIT_HCA, 0, 0, t, token);
    }
};

using mem_access = recording_memory::access;
const uint32_t kInLen = offsetof(hw::cmd_mailbox, out);
const uint64_t kOut = kMailbox + offsetof(hw::cmd_mailbox, out),
               kStatus = kMailbox + offsetof(hw::cmd_mailbox, status);

}  // namespace

SIM_TEST(CommandUnitBench, init_hca_gives_every_unit_its_table_and_writes_the_status_last) {
    bench b;
    uint32_t status = 0;
    run_bench([&] { status = b.init_hca(7); });
    EXPECT_EQ(status, hw::CMD_DONE | hw::CMD_OK);
    // Mailbox read at the doorbell; the units loaded when it has arrived (100 ns); the output
    // area, then the status, written after the execution time (250 ns).
    const std::vector<mem_access> expected = {
        {sc_time(0, SC_NS), false, kMailbox, kInLen},
        {sc_time(350, SC_NS), true, kOut, uint32_t(hw::CMD_OUT_BYTES)},
        {sc_time(450, SC_NS), true, kStatus, 8},
    };
    EXPECT_EQ(b.mem.log, expected);
    const std::vector<timed_call> calls = {
        {sc_time(100, SC_NS), "xlate.set_tables(" + std::to_string(kMptBase) + ", 64)"},
        {sc_time(100, SC_NS), "fetcher.set_qpc_table(" + std::to_string(kQpcBase) + ")"},
        {sc_time(100, SC_NS), "engine.set_qpc_table(" + std::to_string(kQpcBase) + ")"},
        {sc_time(100, SC_NS), "cq.set_cqc_table(" + std::to_string(kCqcBase) + ")"},
    };
    EXPECT_EQ(b.log.calls, calls);
    EXPECT_EQ(b.cmd.commands.value(), 1u);
    EXPECT_EQ(b.cmd.failed.value(), 0u);
}

SIM_TEST(CommandUnitBench, create_cq_writes_its_context_table_entry_before_the_status) {
    bench b;
    uint32_t status = 0;
    sc_time start;
    run_bench([&] {
        b.init_hca();
        start = sc_time_stamp();
        hw::cq_context c{};
        c.log_size = 6;
        c.base = 0x60000;
        c.eqn = 1;
        status = b.run_command(hw::CMD_CREATE_CQ, 5, 0, c, 2);
    });
    EXPECT_EQ(status, hw::CMD_DONE | hw::CMD_OK);
    ASSERT_EQ(b.mem.log.size(), 7u);
    const std::vector<mem_access> expected = {
        {start, false, kMailbox, kInLen},
        {start + sc_time(350, SC_NS), true, kCqcBase + 5 * sizeof(hw::cq_context), sizeof(hw::cq_context)},
        {start + sc_time(450, SC_NS), true, kOut, uint32_t(hw::CMD_OUT_BYTES)},
        {start + sc_time(550, SC_NS), true, kStatus, 8},
    };
    EXPECT_EQ(std::vector<mem_access>(b.mem.log.begin() + 3, b.mem.log.end()), expected);
    const hw::cq_context written = b.mem.get<hw::cq_context>(kCqcBase + 5 * sizeof(hw::cq_context));
    EXPECT_EQ(written.cqn, 5u);
    EXPECT_EQ(written.valid, 1u);
    EXPECT_EQ(written.base, 0x60000u);
    EXPECT_EQ(b.log.calls.back(), timed_call(start + sc_time(100, SC_NS), "cq.load_cq(5)"));
}

SIM_TEST(CommandUnitBench, command_before_init_hca_gets_not_init_and_reaches_no_unit) {
    bench b;
    uint32_t status = 0;
    run_bench([&] {
        hw::cq_context c{};
        c.log_size = 6;
        status = b.run_command(hw::CMD_CREATE_CQ, 5, 0, c, 3);
    });
    EXPECT_EQ(status, hw::CMD_DONE | hw::CMD_NOT_INIT);
    EXPECT_TRUE(b.log.calls.empty());
    ASSERT_EQ(b.mem.log.size(), 3u) << "only the mailbox is read and written";
    EXPECT_EQ(b.mem.log[2].at, sc_time(450, SC_NS));
    EXPECT_EQ(b.cmd.failed.value(), 1u);
}

SIM_TEST(CommandUnitBench, unknown_opcode_and_out_of_range_cqn_get_their_status) {
    bench b;
    uint32_t bad_opcode = 0, bad_cqn = 0, duplicate = 0;
    run_bench([&] {
        b.init_hca();
        bad_opcode = b.run_command(0x7FF, 0, 0, uint32_t(0), 2);
        hw::cq_context c{};
        c.log_size = 6;
        bad_cqn = b.run_command(hw::CMD_CREATE_CQ, 16, 0, c, 3);  // the table has 2^4 entries
        b.run_command(hw::CMD_CREATE_CQ, 4, 0, c, 4);
        duplicate = b.run_command(hw::CMD_CREATE_CQ, 4, 0, c, 5);
    });
    EXPECT_EQ(bad_opcode, hw::CMD_DONE | hw::CMD_BAD_OPCODE);
    EXPECT_EQ(bad_cqn, hw::CMD_DONE | hw::CMD_BAD_PARAM);
    EXPECT_EQ(duplicate, hw::CMD_DONE | hw::CMD_BAD_RESOURCE);
    EXPECT_EQ(b.cqs.valid, std::vector<uint32_t>{4});
    EXPECT_EQ(b.cmd.failed.value(), 3u);
}

SIM_TEST(CommandUnitBench, modify_qp_to_init_binds_the_pkey_and_loads_the_fetcher_and_engine) {
    bench b;
    uint32_t created = 0, modified = 0, bad_cq = 0;
    sc_time start;
    run_bench([&] {
        b.init_hca();
        hw::cq_context cq{};
        cq.log_size = 6;
        b.run_command(hw::CMD_CREATE_CQ, 1, 0, cq, 2);
        hw::qp_context c{};
        c.transport = hw::QPT_RC;
        c.sq_log_stride = 6;
        c.rq_log_stride = 4;
        created = b.run_command(hw::CMD_CREATE_QP, 3, 0, c, 3);
        hw::modify_qp_in m{};
        m.attr_mask = hw::QP_ATTR_STATE;
        m.ctx = c;
        m.ctx.port = 1;
        m.ctx.pkey_index = 2;
        m.ctx.send_cqn = m.ctx.recv_cqn = 9;  // no such CQ
        bad_cq = b.run_command(hw::CMD_MODIFY_QP, 3, hw::QPS_INIT, m, 4);
        m.ctx.send_cqn = m.ctx.recv_cqn = 1;
        start = sc_time_stamp();
        modified = b.run_command(hw::CMD_MODIFY_QP, 3, hw::QPS_INIT, m, 5);
    });
    EXPECT_EQ(created, hw::CMD_DONE | hw::CMD_OK);
    EXPECT_EQ(bad_cq, hw::CMD_DONE | hw::CMD_BAD_RESOURCE);
    EXPECT_EQ(modified, hw::CMD_DONE | hw::CMD_OK);
    const std::string mask = std::to_string(hw::QP_ATTR_STATE);
    const std::vector<timed_call> tail = {
        {start + sc_time(100, SC_NS), "pkeys.bind_qp(3, 2)"},
        {start + sc_time(100, SC_NS), "fetcher.load_qp(3, state " + std::to_string(hw::QPS_INIT) + ")"},
        {start + sc_time(100, SC_NS),
         "engine.load_qp(3, state " + std::to_string(hw::QPS_INIT) + ", mask " + mask + ")"},
    };
    ASSERT_GE(b.log.calls.size(), 3u);
    EXPECT_EQ(std::vector<timed_call>(b.log.calls.end() - 3, b.log.calls.end()), tail);
    // The QPC entry as written: the new state, the QPN filled in.
    const hw::qp_context written = b.mem.get<hw::qp_context>(kQpcBase + 3 * sizeof(hw::qp_context));
    EXPECT_EQ(written.state, hw::QPS_INIT);
    EXPECT_EQ(written.qpn, 3u);
    EXPECT_EQ(written.pkey_index, 2u);
}

SIM_TEST(CommandUnitBench, doorbell_while_a_command_runs_is_ignored_and_counted) {
    bench b;
    run_bench([&] {
        b.init_hca();
        hw::cq_context c{};
        c.log_size = 6;
        hw::cmd_mailbox m{};
        m.opcode = hw::CMD_CREATE_CQ;
        m.in_mod = 2;
        std::memcpy(m.in, &c, sizeof c);
        b.mem.put(kMailbox, m);
        b.cmd.doorbell(8);
        sc_core::wait(50, SC_NS);
        EXPECT_EQ(b.cmd.status(), (1u << 8) | 1u) << "busy, the last finished command's token";
        b.cmd.doorbell(9);  // ignored: the unit is busy
        sc_core::wait(2, sc_core::SC_US);
        EXPECT_EQ(b.cmd.status(), 8u << 8);
    });
    EXPECT_EQ(b.cmd.ignored_busy.value(), 1u);
    EXPECT_EQ(b.cmd.commands.value(), 2u);
}
