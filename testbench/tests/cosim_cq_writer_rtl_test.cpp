// The CQ writer's RTL (rtl/cq_writer.sv) at its pins, beside the TLM cq_writer: a SystemC
// harness drives the verilated model's request, context, doorbell and MSI ports, answers its
// host memory writes into a byte array with random back-pressure (mw_ready low for random
// cycles, responses after random delays, an address window that answers mwr_err), and sends
// every operation to the TLM unit too, whose DMA goes to a second byte array with the same
// failing window. Each operation's answers are compared (written or not, why, EQE, MSI) and the
// two host memories byte for byte. docs/cosim.md has the pin contract.
#include <gtest/gtest.h>

#include <systemc>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "Vcq_writer.h"
#include "Vcq_writer_broken.h"
#include "model/hca/cq_writer.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;

namespace {

constexpr uint64_t kMemBytes = 1 << 20;
constexpr uint64_t kFailFrom = 0xF0000, kFailTo = 0xF8000;  // both memories answer errors here
constexpr unsigned kEqs = 16;                               // as the HCA builds its cq_writer

/// The RTL's answer to one completion or event.
struct rtl_answer {
    unsigned tag = 0, reason = 0;
    bool written = false, eqe = false, msi = false, disarmed = false;
};

/// What the harness's memory saw the RTL write (for counting back-pressure).
struct bus_stats {
    uint64_t writes = 0, stalled_cycles = 0, errors = 0;
};

/// The verilated CQ writer with its pins as signals, a memory answering its write master, and
/// driver calls (from an SC_THREAD) that run one operation at a time.
class rtl_bench : public sc_core::sc_module {
public:
    sc_core::sc_clock clk{"clk", 10, SC_NS};
    sc_core::sc_signal<bool> rst_n{"rst_n"}, cmp_valid{"cmp_valid"}, cmp_ready{"cmp_ready"},
        cmp_solicited{"cmp_solicited"}, ev_valid{"ev_valid"}, ev_ready{"ev_ready"}, rsp_valid{"rsp_valid"},
        rsp_written{"rsp_written"}, rsp_eqe{"rsp_eqe"}, rsp_msi{"rsp_msi"}, rsp_disarmed{"rsp_disarmed"},
        cqc_we{"cqc_we"}, eqc_we{"eqc_we"}, cqdb_valid{"cqdb_valid"}, msi_we{"msi_we"}, mw_valid{"mw_valid"},
        mw_ready{"mw_ready"}, mwr_valid{"mwr_valid"}, mwr_err{"mwr_err"}, idle{"idle"};
    sc_core::sc_signal<uint32_t> cmp_tag{"cmp_tag"}, cmp_cqn{"cmp_cqn"}, ev_tag{"ev_tag"}, ev_type{"ev_type"},
        ev_subtype{"ev_subtype"}, ev_resource{"ev_resource"}, rsp_tag{"rsp_tag"}, rsp_reason{"rsp_reason"},
        cqc_op{"cqc_op"}, cqc_cqn{"cqc_cqn"}, cqc_log_size{"cqc_log_size"}, cqc_eqn{"cqc_eqn"},
        cqc_consumer{"cqc_consumer"}, eqc_eqn{"eqc_eqn"}, eqc_log_size{"eqc_log_size"}, cqdb_cqn{"cqdb_cqn"},
        cqdb_consumer{"cqdb_consumer"}, cqdb_arm{"cqdb_arm"}, msi_data_in{"msi_data_in"}, mw_len{"mw_len"};
    sc_core::sc_signal<uint64_t> cqc_base{"cqc_base"}, eqc_base{"eqc_base"}, msi_addr_in{"msi_addr_in"},
        mw_addr{"mw_addr"};
    sc_core::sc_signal<sc_dt::sc_bv<512>> cmp_cqe{"cmp_cqe"}, mw_data{"mw_data"};

    std::vector<uint8_t> mem = std::vector<uint8_t>(kMemBytes);
    bus_stats bus;
    /// Cycle numbers (the falling edge a thing was seen at) of the last operation, for latency.
    struct {
        uint64_t accept = 0, mw_first = 0, handshake = 0, rsp = 0;
    } last;
    std::vector<uint64_t> mw_firsts, handshakes;  ///< every write's
    uint64_t cycle() const { return sc_core::sc_time_stamp().value() / clk.period().value(); }
    unsigned ready_percent = 50;  ///< chance that mw_ready is high in a cycle
    unsigned max_resp_delay = 4;  ///< cycles after the handshake, at most, before mwr_valid

    SC_HAS_PROCESS(rtl_bench);
    rtl_bench(const sc_core::sc_module_name& n, bool broken, unsigned seed) : sc_module(n), rng_(seed) {
        if (broken)
            bind(broken_ = std::make_unique<Vcq_writer_broken>("rtl"));
        else
            bind(ref_ = std::make_unique<Vcq_writer>("rtl"));
        SC_THREAD(memory);
    }

    /// Reset: rst_n low for 3 cycles, then one more cycle for cmp_ready.
    void reset() {
        rst_n.write(false);
        for (int i = 0; i < 3; ++i) wait(clk.negedge_event());
        rst_n.write(true);
        wait(clk.negedge_event());
        wait(clk.negedge_event());
        EXPECT_TRUE(cmp_ready.read()) << "cmp_ready after reset";
        EXPECT_TRUE(idle.read());
    }

    rtl_answer complete(uint32_t cqn, const hw::cqe& e, bool solicited) {
        sc_dt::sc_bv<512> bv;
        uint32_t w[16];
        std::memcpy(w, &e, sizeof w);
        for (int i = 0; i < 16; ++i) bv.range(32 * i + 31, 32 * i) = w[i];
        cmp_tag.write(++tag_ & 0xFF);
        cmp_cqn.write(cqn);
        cmp_solicited.write(solicited);
        cmp_cqe.write(bv);
        cmp_valid.write(true);
        take(cmp_ready);
        cmp_valid.write(false);
        return answer();
    }
    rtl_answer post_event(uint8_t type, uint32_t resource, uint8_t subtype) {
        ev_tag.write(++tag_ & 0xFF);
        ev_type.write(type);
        ev_subtype.write(subtype);
        ev_resource.write(resource);
        ev_valid.write(true);
        take(ev_ready);
        ev_valid.write(false);
        return answer();
    }
    void cq_context(unsigned op, uint32_t cqn, uint64_t base, unsigned log_size, unsigned eqn,
                    uint32_t consumer) {
        cqc_op.write(op);
        cqc_cqn.write(cqn);
        cqc_base.write(base);
        cqc_log_size.write(log_size);
        cqc_eqn.write(eqn);
        cqc_consumer.write(consumer);
        pulse(cqc_we);
    }
    void eq_context(uint32_t eqn, uint64_t base, unsigned log_size) {
        eqc_eqn.write(eqn);
        eqc_base.write(base);
        eqc_log_size.write(log_size);
        pulse(eqc_we);
    }
    void doorbell(uint32_t cqn, uint32_t consumer, unsigned arm) {
        cqdb_cqn.write(cqn);
        cqdb_consumer.write(consumer);
        cqdb_arm.write(arm);
        pulse(cqdb_valid);
    }
    void set_msi(uint64_t addr, uint32_t data) {
        msi_addr_in.write(addr);
        msi_data_in.write(data);
        pulse(msi_we);
    }

private:
    template <class V>
    void bind(const std::unique_ptr<V>& m) {
        m->clk(clk);
        m->rst_n(rst_n);
        m->cmp_valid(cmp_valid);
        m->cmp_ready(cmp_ready);
        m->cmp_tag(cmp_tag);
        m->cmp_cqn(cmp_cqn);
        m->cmp_solicited(cmp_solicited);
        m->cmp_cqe(cmp_cqe);
        m->ev_valid(ev_valid);
        m->ev_ready(ev_ready);
        m->ev_tag(ev_tag);
        m->ev_type(ev_type);
        m->ev_subtype(ev_subtype);
        m->ev_resource(ev_resource);
        m->rsp_valid(rsp_valid);
        m->rsp_tag(rsp_tag);
        m->rsp_written(rsp_written);
        m->rsp_reason(rsp_reason);
        m->rsp_eqe(rsp_eqe);
        m->rsp_msi(rsp_msi);
        m->rsp_disarmed(rsp_disarmed);
        m->cqc_we(cqc_we);
        m->cqc_op(cqc_op);
        m->cqc_cqn(cqc_cqn);
        m->cqc_base(cqc_base);
        m->cqc_log_size(cqc_log_size);
        m->cqc_eqn(cqc_eqn);
        m->cqc_consumer(cqc_consumer);
        m->eqc_we(eqc_we);
        m->eqc_eqn(eqc_eqn);
        m->eqc_base(eqc_base);
        m->eqc_log_size(eqc_log_size);
        m->cqdb_valid(cqdb_valid);
        m->cqdb_cqn(cqdb_cqn);
        m->cqdb_consumer(cqdb_consumer);
        m->cqdb_arm(cqdb_arm);
        m->msi_we(msi_we);
        m->msi_addr_in(msi_addr_in);
        m->msi_data_in(msi_data_in);
        m->mw_valid(mw_valid);
        m->mw_ready(mw_ready);
        m->mw_addr(mw_addr);
        m->mw_data(mw_data);
        m->mw_len(mw_len);
        m->mwr_valid(mwr_valid);
        m->mwr_err(mwr_err);
        m->idle(idle);
    }

    /// At a falling edge, with `valid` driven: waits for the rising edge that takes the request
    /// (its ready, a function of registers, is stable from the falling edge on).
    void take(const sc_core::sc_signal<bool>& ready) {
        for (int cycles = 0;; ++cycles) {
            wait(sc_core::SC_ZERO_TIME);  // ev_ready follows cmp_valid combinationally:
            wait(sc_core::SC_ZERO_TIME);  // the input's update, then the model's output
            const bool taken = ready.read();
            last.accept = cycle();  // taken at the rising edge after this falling edge
            wait(clk.negedge_event());
            if (taken) return;
            ASSERT_LT(cycles, 1000) << "request never taken";
        }
    }
    rtl_answer answer() {
        for (int cycles = 0; !rsp_valid.read(); ++cycles) {
            wait(clk.negedge_event());
            if (cycles > 10000) {
                ADD_FAILURE() << "no response after 10000 cycles";
                return {};
            }
        }
        rtl_answer a;
        last.rsp = cycle();
        a.tag = rsp_tag.read();
        a.reason = rsp_reason.read();
        a.written = rsp_written.read();
        a.eqe = rsp_eqe.read();
        a.msi = rsp_msi.read();
        a.disarmed = rsp_disarmed.read();
        EXPECT_EQ(a.tag, tag_ & 0xFF) << "responses in request order";
        wait(clk.negedge_event());
        EXPECT_FALSE(rsp_valid.read()) << "rsp_valid lasts one cycle";
        // Wait until the RTL takes requests again (ports are written only while idle: the TLM's
        // calls are atomic, docs/cosim.md).
        for (int cycles = 0; !idle.read() && cycles < 10; ++cycles) wait(clk.negedge_event());
        EXPECT_TRUE(idle.read());
        return a;
    }
    void pulse(sc_core::sc_signal<bool>& we) {
        we.write(true);
        wait(clk.negedge_event());
        we.write(false);
    }

    /// The host memory: at each falling edge, drives mw_ready (random), takes the write whose
    /// handshake happens at the next rising edge, and answers it a random number of cycles later.
    void memory() {
        std::uniform_int_distribution<unsigned> pct(0, 99), delay(0, max_resp_delay);
        int resp_in = -1;  // cycles until mwr_valid; -1: nothing outstanding
        bool resp_err = false, outstanding = false, presented = false;
        for (;;) {
            wait(clk.negedge_event());
            mwr_valid.write(false);
            if (resp_in == 0) {
                mwr_valid.write(true);
                mwr_err.write(resp_err);
                resp_in = -1;
                outstanding = false;
            } else if (resp_in > 0) {
                --resp_in;
            }
            const bool ready = pct(rng_) < ready_percent;
            mw_ready.write(ready);
            if (!mw_valid.read()) {
                presented = false;
                continue;
            }
            if (!presented) {
                last.mw_first = cycle();
                mw_firsts.push_back(last.mw_first);
            }
            presented = true;
            if (outstanding) {
                ADD_FAILURE() << "a second write presented while one is outstanding";
                continue;
            }
            if (!ready) {
                ++bus.stalled_cycles;
                continue;
            }
            // The handshake happens at the next rising edge.
            const uint64_t a = mw_addr.read();
            const unsigned n = mw_len.read();
            const sc_dt::sc_bv<512> d = mw_data.read();
            ++bus.writes;
            last.handshake = cycle();
            handshakes.push_back(last.handshake);
            presented = false;
            EXPECT_TRUE(n == 64 || n == 32 || n == 4) << "write of " << n << " bytes";
            resp_err = (a < kFailTo && a + n > kFailFrom) || a + n > mem.size();
            if (resp_err) {
                ++bus.errors;
            } else {
                for (unsigned i = 0; i < n; ++i) mem[a + i] = uint8_t(d.range(8 * i + 7, 8 * i).to_uint());
                for (unsigned i = n; i < 64; ++i)
                    EXPECT_EQ(d.range(8 * i + 7, 8 * i).to_uint(), 0u) << "byte " << i << " beyond mw_len";
            }
            outstanding = true;
            resp_in = int(delay(rng_));  // 0: mwr_valid at the edge right after the handshake
        }
    }

    std::unique_ptr<Vcq_writer> ref_;
    std::unique_ptr<Vcq_writer_broken> broken_;
    std::mt19937 rng_;
    unsigned tag_ = 0;
};

/// The TLM cq_writer on its own memory, and the RTL bench, driven together.
struct pair_bench {
    rtl_bench rtl;
    recording_memory tlm_mem{"tlm_mem", kMemBytes, sc_time(0, SC_NS)};
    recording_memory cqc_mem{"cqc_mem", 1 << 16, sc_time(0, SC_NS)};  // the CQC table (cache misses)
    cq_writer tlm{"tlm_cq_writer", kBenchClock, 64, kEqs};
    /// The control path's copy of each CQ's producer (from the RTL's answers; for resize).
    std::vector<uint64_t> producer = std::vector<uint64_t>(64);
    std::vector<uint32_t> consumer = std::vector<uint32_t>(64);
    std::vector<uint8_t> log_size = std::vector<uint8_t>(64);
    std::vector<uint64_t> base = std::vector<uint64_t>(64);
    uint64_t compared = 0;

    explicit pair_bench(bool broken = false, unsigned seed = 1) : rtl("rtl_bench", broken, seed) {
        tlm.dma.socket.bind(tlm_mem.socket);
        tlm.cqc_dma.socket.bind(cqc_mem.socket);
        tlm_mem.fail_from = kFailFrom;
        tlm_mem.fail_to = kFailTo;
    }

    void load_cq(uint32_t cqn, uint64_t b, unsigned log, unsigned eqn) {
        hw::cq_context c{};
        c.cqn = cqn;
        c.log_size = uint8_t(log);
        c.valid = 1;
        c.eqn = uint16_t(eqn);
        c.base = b;
        tlm.load_cq(cqn, c);
        rtl.cq_context(1, cqn, b, log, eqn, 0);
        producer.at(cqn) = 0;
        consumer.at(cqn) = 0;
        log_size.at(cqn) = uint8_t(log);
        base.at(cqn) = b;
    }
    void destroy_cq(uint32_t cqn) {
        tlm.destroy_cq(cqn);
        rtl.cq_context(2, cqn, 0, 0, 0, 0);
    }
    void load_eq(uint32_t eqn, uint64_t b, unsigned log) {
        hw::eq_context e{};
        e.base = b;
        e.log_size = uint8_t(log);
        e.valid = 1;
        tlm.load_eq(eqn, e);
        rtl.eq_context(eqn, b, log);
    }
    void doorbell(uint32_t cqn, uint32_t cons, hw::cq_arm arm) {
        tlm.doorbell(cqn, cons, arm);
        rtl.doorbell(cqn, cons, arm);
        if (cqn < consumer.size() && tlm.cq_valid(cqn)) consumer[cqn] = cons & 0xFFFFFF;
    }
    void set_msi(uint64_t addr, uint32_t data) {
        tlm.set_msi(addr, data);
        rtl.set_msi(addr, data);
    }

    /// One completion to both; their answers compared. Returns the RTL's.
    rtl_answer complete(uint32_t cqn, hw::cqe e, bool solicited) {
        const uint64_t events = tlm.events.value(), msis = tlm.msi_writes.value(),
                       overruns = tlm.overruns.value();
        sc_time delay = sc_core::SC_ZERO_TIME;
        hw::cqe t = e;
        const bool tlm_written = tlm.complete(cqn, t, solicited, delay);
        const rtl_answer a = rtl.complete(cqn, e, solicited);
        EXPECT_EQ(a.written, tlm_written) << "CQ " << cqn << " completion " << compared;
        EXPECT_EQ(a.eqe, tlm.events.value() > events) << "CQ " << cqn << " completion " << compared;
        EXPECT_EQ(a.msi, tlm.msi_writes.value() > msis) << "CQ " << cqn << " completion " << compared;
        EXPECT_EQ(a.reason == 2 || a.reason == 3, tlm.overruns.value() > overruns) << "CQ " << cqn;
        EXPECT_EQ(a.written, a.reason == 0);
        if (a.written) ++producer.at(cqn);
        ++compared;
        return a;
    }
    rtl_answer post_event(uint8_t type, uint32_t resource, uint8_t subtype = 0) {
        const uint64_t events = tlm.events.value(), msis = tlm.msi_writes.value();
        sc_time delay = sc_core::SC_ZERO_TIME;
        tlm.post_event(type, resource, delay, subtype);
        const rtl_answer a = rtl.post_event(type, resource, subtype);
        EXPECT_EQ(a.written, tlm.events.value() > events) << "event " << compared;
        EXPECT_EQ(a.eqe, a.written);
        EXPECT_EQ(a.msi, tlm.msi_writes.value() > msis) << "event " << compared;
        ++compared;
        return a;
    }
    /// CMD_RESIZE_CQ: the TLM decides and copies; the RTL side does what the transactor will:
    /// copies [consumer, producer) from the RTL's memory with the new owner bits, then the port.
    bool resize_cq(uint32_t cqn, uint64_t nb, unsigned nlog, uint32_t cons) {
        sc_time delay = sc_core::SC_ZERO_TIME;
        if (!tlm.resize_cq(cqn, nb, uint8_t(nlog), cons, delay)) return false;
        cons &= 0xFFFFFF;
        const uint64_t p = producer.at(cqn), moved = (p - cons) & 0xFFFFFF;
        const uint64_t old_size = 1ull << log_size[cqn], new_size = 1ull << nlog;
        std::vector<hw::cqe> buf(moved);
        for (uint64_t i = 0; i < moved; ++i)
            std::memcpy(&buf[i], &rtl.mem.at(base[cqn] + ((p - moved + i) & (old_size - 1)) * 64), 64);
        for (uint64_t i = 0; i < moved; ++i) {
            buf[i].owner =
                uint8_t((buf[i].owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(p - moved + i, nlog));
            std::memcpy(&rtl.mem.at(nb + ((p - moved + i) & (new_size - 1)) * 64), &buf[i], 64);
        }
        rtl.cq_context(3, cqn, nb, nlog, 0, cons);
        base[cqn] = nb;
        log_size[cqn] = uint8_t(nlog);
        consumer[cqn] = cons;
        return true;
    }

    /// The two host memories, byte for byte; reports the first differing bytes.
    void expect_memories_equal(const std::string& where) {
        unsigned reported = 0;
        for (uint64_t a = 0; a < kMemBytes && reported < 8; ++a) {
            const uint8_t t = tlm_mem.get<uint8_t>(a);
            if (t != rtl.mem[a]) {
                ADD_FAILURE() << where << ": memory differs at 0x" << std::hex << a << ": TLM 0x"
                              << unsigned(t) << ", RTL 0x" << unsigned(rtl.mem[a]);
                ++reported;
            }
        }
    }
    uint64_t memory_differences() {
        uint64_t n = 0;
        for (uint64_t a = 0; a < kMemBytes; ++a) n += tlm_mem.get<uint8_t>(a) != rtl.mem[a];
        return n;
    }
};

hw::cqe random_cqe(std::mt19937& rng, uint8_t status = 0) {
    hw::cqe e;
    uint8_t* b = reinterpret_cast<uint8_t*>(&e);
    for (size_t i = 0; i < sizeof e; ++i) b[i] = uint8_t(rng());
    e.status = status;
    return e;
}

hw::cqe cqe_at(const std::vector<uint8_t>& mem, uint64_t a) {
    hw::cqe e;
    std::memcpy(&e, &mem.at(a), sizeof e);
    return e;
}
hw::eqe eqe_at(const std::vector<uint8_t>& mem, uint64_t a) {
    hw::eqe e;
    std::memcpy(&e, &mem.at(a), sizeof e);
    return e;
}

constexpr uint64_t kCqBase = 0x1000, kEq0Base = 0x8000, kEq2Base = 0x9000, kMsi = 0xE000;
constexpr uint32_t kMsiData = 0xC0DE0042;

/// 12 completions on a 4-entry ring (three passes), software consuming as it goes.
void two_wraps(pair_bench& b, std::mt19937& rng) {
    b.load_eq(0, kEq0Base, 3);
    b.load_cq(5, kCqBase, 2, 0);
    for (uint32_t n = 0; n < 12; ++n) {
        const hw::cqe e = random_cqe(rng);
        EXPECT_TRUE(b.complete(5, e, false).written) << "CQE " << n;
        if (n % 2 == 1) b.doorbell(5, n + 1, hw::CQ_ARM_NONE);
    }
}

}  // namespace

SIM_TEST(CosimCqWriterRtl, cqes_and_owner_bits_across_two_wraps_of_a_small_ring_equal_the_tlm) {
    pair_bench b(false, 11);
    std::mt19937 rng(5);
    run_bench([&] {
        b.rtl.reset();
        std::mt19937 check(5);
        two_wraps(b, rng);
        // The last pass (CQEs 8..11) is in the ring; owner bit 1 - ((n >> 2) & 1), the rest as given.
        for (uint32_t n = 8; n < 12; ++n) {
            const hw::cqe e = cqe_at(b.rtl.mem, kCqBase + (n % 4) * 64);
            EXPECT_EQ(e.owner & hw::CQE_OWNER_BIT, hw::cqe_owner_for(n, 2)) << "CQE " << n;
        }
        for (uint32_t n = 0; n < 12; ++n) {
            hw::cqe want = random_cqe(check);
            want.owner = uint8_t((want.owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(n, 2));
            if (n >= 8) {
                EXPECT_EQ(std::memcmp(&want, &b.rtl.mem[kCqBase + (n % 4) * 64], 64), 0) << "CQE " << n;
            }
        }
        b.expect_memories_equal("two wraps");
        EXPECT_EQ(b.rtl.bus.writes, 12u) << "no EQE, no MSI";
        EXPECT_GT(b.rtl.bus.stalled_cycles, 0u) << "the bus pushed back";
    });
}

SIM_TEST(CosimCqWriterRtl, overrun_writes_exactly_one_cq_error_eqe_and_answers_not_written) {
    pair_bench b(false, 12);
    std::mt19937 rng(6);
    run_bench([&] {
        b.rtl.reset();
        b.load_eq(0, kEq0Base, 3);
        b.set_msi(kMsi, kMsiData);
        b.load_cq(7, kCqBase, 2, 0);
        for (int n = 0; n < 4; ++n) EXPECT_TRUE(b.complete(7, random_cqe(rng), false).written);
        for (int n = 0; n < 3; ++n) {
            const rtl_answer a = b.complete(7, random_cqe(rng), false);
            EXPECT_FALSE(a.written);
            EXPECT_EQ(a.reason, 2u) << "overrun";
            EXPECT_EQ(a.eqe, n == 0) << "only the first lost completion raises the CQ error";
            EXPECT_EQ(a.msi, n == 0);
        }
        // Software catches up: the CQ stays in error.
        b.doorbell(7, 4, hw::CQ_ARM_NONE);
        const rtl_answer a = b.complete(7, random_cqe(rng), false);
        EXPECT_EQ(a.reason, 2u);
        EXPECT_FALSE(a.eqe);
        const hw::eqe ev = eqe_at(b.rtl.mem, kEq0Base);
        EXPECT_EQ(ev.type, hw::EQE_CQ_ERROR);
        EXPECT_EQ(ev.resource, 7u);
        EXPECT_EQ(ev.owner, 1u);
        EXPECT_EQ(eqe_at(b.rtl.mem, kEq0Base + 32).owner, 0u) << "exactly one EQE";
        EXPECT_EQ(b.rtl.mem[kMsi] | b.rtl.mem[kMsi + 1] << 8 | b.rtl.mem[kMsi + 2] << 16 |
                      uint32_t(b.rtl.mem[kMsi + 3]) << 24,
                  kMsiData);
        EXPECT_EQ(b.tlm.overruns.value(), 4u);
        b.expect_memories_equal("overrun");
    });
}

SIM_TEST(CosimCqWriterRtl, arm_next_and_solicited_raise_a_completion_eqe_on_the_cqs_eq_and_an_msi) {
    pair_bench b(false, 13);
    std::mt19937 rng(7);
    run_bench([&] {
        b.rtl.reset();
        b.load_eq(0, kEq0Base, 3);
        b.load_eq(2, kEq2Base, 2);
        b.set_msi(kMsi, kMsiData);
        b.load_cq(9, kCqBase, 4, 2);
        uint32_t cons = 0;
        auto next = [&](bool solicited, uint8_t status) {
            const rtl_answer a = b.complete(9, random_cqe(rng, status), solicited);
            b.doorbell(9, ++cons, hw::CQ_ARM_NONE);
            return a;
        };
        EXPECT_FALSE(next(false, 0).eqe) << "not armed";
        b.doorbell(9, cons, hw::CQ_ARM_NEXT);
        rtl_answer a = next(false, 0);
        EXPECT_TRUE(a.eqe && a.msi && a.disarmed) << "armed NEXT";
        EXPECT_FALSE(next(false, 0).eqe) << "the arm is used up";
        b.doorbell(9, cons, hw::CQ_ARM_SOLICITED);
        EXPECT_FALSE(next(false, 0).eqe) << "SOLICITED: an unsolicited success does not";
        a = next(true, 0);
        EXPECT_TRUE(a.eqe && a.disarmed) << "SOLICITED: a solicited one does";
        b.doorbell(9, cons, hw::CQ_ARM_SOLICITED);
        a = next(false, hw::CQE_REM_ACCESS_ERR);
        EXPECT_TRUE(a.eqe && a.disarmed) << "SOLICITED: an error completion does";
        // Two completion EQEs on EQ 2 (4 entries), then the third in slot 2.
        for (unsigned i = 0; i < 3; ++i) {
            const hw::eqe ev = eqe_at(b.rtl.mem, kEq2Base + i * 32);
            EXPECT_EQ(ev.type, hw::EQE_COMPLETION) << i;
            EXPECT_EQ(ev.resource, 9u) << i;
            EXPECT_EQ(ev.owner, 1u) << i;
        }
        EXPECT_EQ(eqe_at(b.rtl.mem, kEq0Base).owner, 0u) << "nothing on EQ 0";
        EXPECT_EQ(b.tlm.msi_writes.value(), 3u);
        b.expect_memories_equal("arming");
    });
}

SIM_TEST(CosimCqWriterRtl, write_errors_put_the_cq_in_error_and_lose_events_as_the_tlm_does) {
    pair_bench b(false, 14);
    std::mt19937 rng(8);
    run_bench([&] {
        b.rtl.reset();
        b.load_eq(0, kEq0Base, 3);
        b.load_eq(1, kFailFrom + 0x100, 2);  // an EQ outside host memory
        b.set_msi(kMsi, kMsiData);
        // A completion event whose EQE write fails: the CQE is written, the event lost, no MSI.
        b.load_cq(3, kCqBase, 3, 1);
        b.doorbell(3, 0, hw::CQ_ARM_NEXT);
        rtl_answer a = b.complete(3, random_cqe(rng), false);
        EXPECT_TRUE(a.written && a.disarmed);
        EXPECT_FALSE(a.eqe || a.msi);
        // A CQ outside host memory: not written, reason 3, the CQ error EQE on EQ 0.
        b.load_cq(4, kFailFrom, 2, 0);
        a = b.complete(4, random_cqe(rng), false);
        EXPECT_FALSE(a.written);
        EXPECT_EQ(a.reason, 3u);
        EXPECT_TRUE(a.eqe && a.msi);
        a = b.complete(4, random_cqe(rng), false);
        EXPECT_EQ(a.reason, 2u) << "then in error";
        EXPECT_FALSE(a.eqe);
        // Events: EQ 0 written; after EQ 0 moves outside memory, lost (reason 5); unloaded CQ: 1.
        a = b.post_event(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_ACTIVE);
        EXPECT_TRUE(a.written && a.eqe && a.msi);
        EXPECT_EQ(a.reason, 0u);
        b.load_eq(0, kFailTo - 32, 1);
        a = b.post_event(hw::EQE_QP_FATAL, 0x123, 0);
        EXPECT_FALSE(a.written || a.msi);
        EXPECT_EQ(a.reason, 5u);
        EXPECT_EQ(b.complete(40, random_cqe(rng), false).reason, 1u) << "not loaded";
        EXPECT_EQ(b.complete(1000, random_cqe(rng), false).reason, 1u) << "beyond the TLM's 64 CQs";
        // The MSI itself failing is not reported further (the TLM counts it).
        b.load_eq(0, kEq0Base + 0x400, 3);
        b.set_msi(kFailFrom + 8, kMsiData);
        a = b.post_event(hw::EQE_SRQ_LIMIT, 5, 0);
        EXPECT_TRUE(a.written && a.msi);
        EXPECT_EQ(b.rtl.bus.errors, 4u) << "EQ 1's EQE, CQ 4's CQE, EQ 0's EQE, the MSI";
        const hw::eqe ev = eqe_at(b.rtl.mem, kEq0Base + 32);
        EXPECT_EQ(ev.type, hw::EQE_PORT_CHANGE);
        EXPECT_EQ(ev.subtype, hw::EQE_PORT_ACTIVE);
        b.expect_memories_equal("write errors");
    });
}

SIM_TEST(CosimCqWriterRtl, resize_keeps_the_producer_and_destroy_forgets_the_cq) {
    pair_bench b(false, 15);
    std::mt19937 rng(9);
    run_bench([&] {
        b.rtl.reset();
        b.load_eq(0, kEq0Base, 3);
        b.load_cq(2, kCqBase, 2, 0);
        for (int n = 0; n < 6; ++n) {
            EXPECT_TRUE(b.complete(2, random_cqe(rng), false).written);
            if (n == 1 || n == 3) b.doorbell(2, uint32_t(n + 1), hw::CQ_ARM_NONE);
        }
        // 6 written, 4 consumed: move CQEs 4 and 5 to an 8-entry ring (slots 4, 5).
        b.doorbell(2, 4, hw::CQ_ARM_NEXT);
        EXPECT_FALSE(b.resize_cq(2, 0x3000, 1, 3)) << "CQEs 3..5 do not fit in 2 entries";
        EXPECT_TRUE(b.resize_cq(2, 0x3000, 3, 4));
        hw::cq_context q{};
        ASSERT_TRUE(b.tlm.query_cq(2, q));
        EXPECT_EQ(q.producer, 6u);
        for (int n = 6; n < 14; ++n) {
            const rtl_answer a = b.complete(2, random_cqe(rng), n == 6);
            EXPECT_TRUE(a.written) << n;
            EXPECT_EQ(a.eqe, n == 6) << "the arm survives the resize";
            b.doorbell(2, uint32_t(n - 1), hw::CQ_ARM_NONE);
        }
        EXPECT_EQ(cqe_at(b.rtl.mem, 0x3000 + 4 * 64).owner & 1, hw::cqe_owner_for(12, 3)) << "wrapped once";
        b.expect_memories_equal("resize");
        b.destroy_cq(2);
        EXPECT_EQ(b.complete(2, random_cqe(rng), false).reason, 1u) << "destroyed";
        b.doorbell(2, 0, hw::CQ_ARM_NEXT);  // ignored: not loaded
        b.load_cq(2, 0x5000, 2, 0);
        const rtl_answer a = b.complete(2, random_cqe(rng), false);
        EXPECT_TRUE(a.written);
        EXPECT_FALSE(a.eqe) << "a fresh context is not armed";
        EXPECT_EQ(cqe_at(b.rtl.mem, 0x5000).owner & 1, 1u) << "producer 0 again";
        b.expect_memories_equal("destroy and reload");
    });
}

SIM_TEST(CosimCqWriterRtl, a_random_stream_of_20000_operations_equals_the_tlm_byte_for_byte) {
    pair_bench b(false, 16);
    b.rtl.ready_percent = 35;
    b.rtl.max_resp_delay = 6;
    std::mt19937 rng(10);
    run_bench(
        [&] {
            b.rtl.reset();
            std::uniform_int_distribution<unsigned> pick(0, 99), cq(0, 7), small(0, 3);
            b.set_msi(kMsi, kMsiData);
            for (unsigned e = 0; e < 4; ++e) b.load_eq(e, kEq0Base + e * 0x800, 2 + e);
            auto place = [&](uint32_t cqn) { return 0x20000 + cqn * 0x4000 + small(rng) * 0x1000; };
            for (uint32_t c = 0; c < 8; ++c) b.load_cq(c, place(c), 1 + small(rng), small(rng));
            unsigned written = 0, lost = 0, events = 0, disarmed = 0;
            std::array<unsigned, 8> reasons{};
            for (unsigned op = 0; op < 20000; ++op) {
                const unsigned p = pick(rng);
                const uint32_t c = cq(rng);
                if (p < 50) {
                    const hw::cqe e = random_cqe(rng, pick(rng) < 10 ? hw::CQE_LOC_LEN_ERR : 0);
                    const rtl_answer a = b.complete(c, e, pick(rng) < 30);
                    (a.written ? written : lost)++;
                    events += a.eqe;
                    ++reasons.at(a.reason);
                    disarmed += a.disarmed;
                } else if (p < 80) {  // software consumes some or all of what is there
                    const uint32_t used = uint32_t(b.producer[c] - b.consumer[c]);
                    const uint32_t take = pick(rng) < 50 ? used : used ? uint32_t(rng() % (used + 1)) : 0;
                    b.doorbell(c, b.consumer[c] + take, hw::cq_arm(pick(rng) % 3));
                } else if (p < 88) {
                    events +=
                        b.post_event(uint8_t(1 + small(rng)), rng() & 0xFFFFFF, uint8_t(small(rng))).eqe;
                } else if (p < 93) {  // one load in 20 puts the ring outside host memory
                    b.load_cq(c, pick(rng) < 5 ? kFailFrom + 0x1000 : place(c), 1 + small(rng), small(rng));
                } else if (p < 96) {
                    b.resize_cq(c, place(c), 1 + small(rng), b.consumer[c]);
                } else if (p < 97) {
                    b.destroy_cq(c);
                } else if (p < 98) {
                    b.load_eq(small(rng), kEq0Base + small(rng) * 0x800, 2 + small(rng));
                } else {
                    b.set_msi(pick(rng) < 20 ? 0 : kMsi + 4 * small(rng), uint32_t(rng()));
                }
                if (op % 1000 == 999) b.expect_memories_equal("after operation " + std::to_string(op));
                if (::testing::Test::HasFailure()) {
                    ADD_FAILURE() << "stopped at operation " << op;
                    return;
                }
            }
            b.expect_memories_equal("random stream");
            std::printf(
                "%u CQEs written, %u completions lost, %u EQEs; %llu bus writes, %llu stalled cycles, "
                "%llu write errors\n",
                written, lost, events, (unsigned long long)b.rtl.bus.writes,
                (unsigned long long)b.rtl.bus.stalled_cycles, (unsigned long long)b.rtl.bus.errors);
            EXPECT_GT(written, 3000u);
            EXPECT_GT(reasons[1], 100u) << "completions to destroyed CQs";
            EXPECT_GT(reasons[2], 1000u) << "overruns";
            EXPECT_GT(reasons[3], 5u) << "CQE write errors";
            EXPECT_GT(disarmed, 500u) << "completion events";
            EXPECT_GT(events, 1000u);
            EXPECT_EQ(b.tlm.cqes.value(), written);
            EXPECT_GT(b.rtl.bus.stalled_cycles, b.rtl.bus.writes) << "heavy back-pressure";
        },
        sc_time(1, sc_core::SC_SEC));
}

SIM_TEST(CosimCqWriterRtl,
         a_cqe_write_starts_write_cycles_plus_one_edges_after_the_request_and_costs_13_cycles) {
    pair_bench b(false, 18);
    b.rtl.ready_percent = 100;  // the bus takes every write at once
    b.rtl.max_resp_delay = 0;   // and answers in the next cycle
    std::mt19937 rng(3);
    run_bench([&] {
        b.rtl.reset();
        b.load_cq(1, kCqBase, 4, 0);
        uint64_t prev_accept = 0;
        for (int n = 0; n < 3; ++n) {
            EXPECT_TRUE(b.complete(1, random_cqe(rng), false).written);
            const auto& l = b.rtl.last;
            // Taken at edge k (after falling edge k): mw_valid registered at edge k+1+8, so
            // first seen at falling edge k+2+8; handshake at that rising edge; response taken
            // at the next; rsp_valid from that edge (seen one falling edge later).
            EXPECT_EQ(l.mw_first - l.accept, 2u + 8u) << n;
            EXPECT_EQ(l.handshake, l.mw_first) << n;
            EXPECT_EQ(l.rsp - l.handshake, 2u) << n;
            if (n > 0) {
                EXPECT_EQ(l.accept - prev_accept, 8u + 5u) << "write_cycles + 5 per CQE";
            }
            prev_accept = l.accept;
        }
        // Armed: the EQE's mw_valid rises at the edge after the CQE's response (seen 3 falling
        // edges after the CQE's handshake was decided), the MSI's at the EQE response's edge.
        b.load_eq(0, kEq0Base, 3);
        b.set_msi(kMsi, kMsiData);
        b.doorbell(1, 3, hw::CQ_ARM_NEXT);
        const size_t w = b.rtl.handshakes.size();
        EXPECT_TRUE(b.complete(1, random_cqe(rng), false).eqe);
        ASSERT_EQ(b.rtl.handshakes.size(), w + 3) << "CQE, EQE, MSI";
        EXPECT_EQ(b.rtl.mw_firsts[w + 1] - b.rtl.handshakes[w], 3u) << "the EQE";
        EXPECT_EQ(b.rtl.mw_firsts[w + 2] - b.rtl.handshakes[w + 1], 2u)
            << "the MSI: at the EQE response's edge";
        EXPECT_EQ(b.rtl.last.rsp - b.rtl.handshakes[w + 2], 2u);
        // An event taken at edge k: mw_valid from edge k+1.
        EXPECT_TRUE(b.post_event(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN).written);
        EXPECT_EQ(b.rtl.mw_firsts[w + 3] - b.rtl.last.accept, 2u);
        // An overrun's CQ error EQE: mw_valid from edge k+2.
        b.load_cq(2, 0x4000, 0, 0);
        EXPECT_TRUE(b.complete(2, random_cqe(rng), false).written);
        const size_t v = b.rtl.mw_firsts.size();
        EXPECT_FALSE(b.complete(2, random_cqe(rng), false).written);
        ASSERT_EQ(b.rtl.mw_firsts.size(), v + 2) << "EQE, MSI";
        EXPECT_EQ(b.rtl.mw_firsts[v] - b.rtl.last.accept, 3u);
    });
}

SIM_TEST(CosimCqWriterRtl, the_broken_build_differs_from_the_tlm_only_after_the_ring_wraps) {
    pair_bench b(true, 17);
    std::mt19937 rng(5);
    run_bench([&] {
        b.rtl.reset();
        b.load_eq(0, kEq0Base, 3);
        b.load_cq(5, kCqBase, 2, 0);
        for (uint32_t n = 0; n < 12; ++n) {
            EXPECT_TRUE(b.complete(5, random_cqe(rng), false).written) << "CQE " << n;
            if (n % 2 == 1) b.doorbell(5, n + 1, hw::CQ_ARM_NONE);
            if (n == 3) {
                EXPECT_EQ(b.memory_differences(), 0u) << "the first pass is right";
            }
            if (n == 4) {
                EXPECT_EQ(b.memory_differences(), 1u) << "CQE 4 (second pass): its owner bit is wrong";
            }
            if (n == 7) {
                EXPECT_EQ(b.memory_differences(), 4u) << "the whole second pass is wrong";
            }
        }
        // The third pass (owner bit 1 again) overwrote the second: right again, as the
        // P_Key checker's broken build, only a stream that looks at the right moment notices.
        EXPECT_EQ(b.memory_differences(), 0u);
    });
}
