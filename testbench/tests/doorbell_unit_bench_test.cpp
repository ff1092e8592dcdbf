// Bench of the doorbell unit alone: MMIO writes and reads into its BAR0 from a bench initiator
// (the PCIe link), and fakes for the WQE fetcher, the CQ writer and the command unit recording
// what each is handed and when. Checks decode, dispatch order and times, and refused accesses.
#include <gtest/gtest.h>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <string>
#include <vector>

#include "model/hca/command_unit.h"
#include "model/hca/cq_writer.h"
#include "model/hca/doorbell_unit.h"
#include "model/hca/wqe_fetcher.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/mmio_map.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;
using sc_core::sc_time_stamp;

namespace {

// At kBenchClock (800 MHz): decode_cycles 4 = 5 ns from arrival to dispatch (the unit's default).
constexpr uint64_t kUar2 = hw::UAR_BASE + 2 * hw::UAR_STRIDE;

std::string args(uint64_t a, uint64_t b) { return "(" + std::to_string(a) + ", " + std::to_string(b) + ")"; }

struct fake_fetcher final : wqe_doorbell_sink {
    call_log& log;
    explicit fake_fetcher(call_log& l) : log(l) {}
    void sq_doorbell(uint32_t qpn, uint16_t producer) override {
        log.add("sq_doorbell" + args(qpn, producer));
    }
    void rq_doorbell(uint32_t qpn, uint16_t producer) override {
        log.add("rq_doorbell" + args(qpn, producer));
    }
    void srq_doorbell(uint32_t srqn, uint16_t producer) override {
        log.add("srq_doorbell" + args(srqn, producer));
    }
    void inline_wqe(const uint8_t*, uint32_t len) override {
        log.add("inline_wqe(" + std::to_string(len) + ")");
    }
    void expect(uint32_t qpn) override { log.add("expect(" + std::to_string(qpn) + ")"); }
};

struct fake_cq final : cq_doorbell_sink {
    call_log& log;
    explicit fake_cq(call_log& l) : log(l) {}
    void doorbell(uint32_t cqn, uint32_t consumer, hw::cq_arm arm) override {
        log.add("cq_doorbell" + args(cqn, consumer) + " arm " + std::to_string(int(arm)));
    }
    void eq_doorbell(uint32_t eqn, uint32_t consumer) override {
        log.add("eq_doorbell" + args(eqn, consumer));
    }
    void set_msi(uint64_t addr, uint32_t data) override { log.add("set_msi" + args(addr, data)); }
};

struct fake_command final : command_mailbox {
    call_log& log;
    uint64_t pa = 0;
    explicit fake_command(call_log& l) : log(l) {}
    void set_mailbox(uint64_t p) override {
        pa = p;
        log.add("set_mailbox(" + std::to_string(p) + ")");
    }
    uint64_t mailbox() const override { return pa; }
    void doorbell(uint32_t token) override { log.add("cmd_doorbell(" + std::to_string(token) + ")"); }
    uint32_t status() const override { return 0x4201; }
};

struct bench : sc_core::sc_module {
    tlm_utils::simple_initiator_socket<bench> mmio{"mmio"};
    doorbell_unit db{"doorbell_unit", kBenchClock};
    call_log log;
    fake_fetcher fetcher{log};
    fake_cq cq{log};
    fake_command cmd{log};

    bench() : sc_module("bench") {
        mmio.bind(db.bar0);
        db.bind(fetcher, cq, cmd);
    }

    /// An MMIO access of `len` bytes at `offset` issued `at` after now; the TLM response.
    tlm::tlm_response_status access(bool write, uint64_t offset, void* data, uint32_t len,
                                    const sc_time& at = sc_core::SC_ZERO_TIME) {
        tlm::tlm_generic_payload gp;
        gp.set_command(write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
        gp.set_address(offset);
        gp.set_data_ptr(static_cast<unsigned char*>(data));
        gp.set_data_length(len);
        gp.set_streaming_width(len);
        sc_time delay = at;
        mmio->b_transport(gp, delay);
        return gp.get_response_status();
    }
    tlm::tlm_response_status write64(uint64_t offset, uint64_t v, const sc_time& at = sc_core::SC_ZERO_TIME) {
        return access(true, offset, &v, 8, at);
    }
};

}  // namespace

SIM_TEST(DoorbellUnitBench, send_doorbell_hints_the_fetcher_at_once_and_reaches_it_after_the_decode) {
    bench b;
    run_bench([&] {
        sc_core::wait(100, SC_NS);
        EXPECT_EQ(b.write64(kUar2 + hw::UAR_SQ_DOORBELL, hw::sq_doorbell(3, 17)), tlm::TLM_OK_RESPONSE);
        sc_core::wait(100, SC_NS);
    });
    const std::vector<timed_call> expected = {
        {sc_time(100, SC_NS), "expect(3)"},
        {sc_time(105, SC_NS), "sq_doorbell(3, 17)"},
    };
    EXPECT_EQ(b.log.calls, expected);
    EXPECT_EQ(b.db.sq_doorbells.value(), 1u);
}

SIM_TEST(DoorbellUnitBench, doorbells_are_dispatched_in_arrival_order_each_after_its_own_decode) {
    bench b;
    run_bench([&] {
        // Posted writes arriving 2 ns apart (the writer's local time offsets).
        b.write64(kUar2 + hw::UAR_CQ_DOORBELL, hw::cq_doorbell(4, 9, hw::CQ_ARM_NEXT));
        b.write64(kUar2 + hw::UAR_RQ_DOORBELL, hw::rq_doorbell(3, 2), sc_time(2, SC_NS));
        b.write64(kUar2 + hw::UAR_SRQ_DOORBELL, hw::srq_doorbell(1, 6), sc_time(4, SC_NS));
        sc_core::wait(100, SC_NS);
    });
    const std::vector<timed_call> expected = {
        {sc_time(5, SC_NS), "cq_doorbell(4, 9) arm " + std::to_string(int(hw::CQ_ARM_NEXT))},
        {sc_time(7, SC_NS), "rq_doorbell(3, 2)"},
        {sc_time(9, SC_NS), "srq_doorbell(1, 6)"},
    };
    EXPECT_EQ(b.log.calls, expected);
    EXPECT_EQ(b.db.fifo_peak.value(), 3u);
}

SIM_TEST(DoorbellUnitBench, command_registers_go_to_the_command_unit_and_status_reads_at_once) {
    bench b;
    uint32_t status = 0;
    uint64_t mailbox = 0;
    run_bench([&] {
        b.write64(hw::REG_CMD_MAILBOX, 0x12340);
        uint32_t token = 0x42;
        b.access(true, hw::REG_CMD_DOORBELL, &token, 4, sc_time(1, SC_NS));
        sc_core::wait(50, SC_NS);
        b.access(false, hw::REG_CMD_STATUS, &status, 4);
        b.access(false, hw::REG_CMD_MAILBOX, &mailbox, 8);
    });
    const std::vector<timed_call> expected = {
        {sc_time(5, SC_NS), "set_mailbox(" + std::to_string(0x12340) + ")"},
        {sc_time(6, SC_NS), "cmd_doorbell(66)"},
    };
    EXPECT_EQ(b.log.calls, expected);
    EXPECT_EQ(status, 0x4201u);
    EXPECT_EQ(mailbox, 0x12340u);
}

SIM_TEST(DoorbellUnitBench, access_to_no_register_gets_an_address_error_and_reaches_no_unit) {
    bench b;
    tlm::tlm_response_status bad_offset{}, short_doorbell{}, read_only{}, beyond{};
    run_bench([&] {
        bad_offset = b.write64(kUar2 + 0x40, 1);
        uint32_t v = 1;
        short_doorbell = b.access(true, kUar2 + hw::UAR_SQ_DOORBELL, &v, 4);
        beyond = b.write64(hw::BAR0_BYTES, 1);
        read_only = b.access(true, hw::REG_CMD_STATUS, &v, 4);  // accepted, refused at dispatch
        sc_core::wait(100, SC_NS);
    });
    EXPECT_EQ(bad_offset, tlm::TLM_ADDRESS_ERROR_RESPONSE);
    EXPECT_EQ(short_doorbell, tlm::TLM_ADDRESS_ERROR_RESPONSE);
    EXPECT_EQ(beyond, tlm::TLM_ADDRESS_ERROR_RESPONSE);
    EXPECT_EQ(read_only, tlm::TLM_OK_RESPONSE);
    EXPECT_TRUE(b.log.calls.empty());
    EXPECT_EQ(b.db.bad_accesses.value(), 4u);
}
