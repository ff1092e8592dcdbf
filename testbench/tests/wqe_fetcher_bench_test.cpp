// Bench of the WQE fetcher alone: its DMA port on a recording host memory, the transport
// engine replaced by a fake send_queue_sink that records what it is handed and when. Checks
// the DMA reads a doorbell leads to and the parsed WQEs the engine gets, at exact times.
#include <gtest/gtest.h>

#include <systemc>

#include <vector>

#include "model/hca/send_queue_sink.h"
#include "model/hca/wqe_fetcher.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/contexts.h"
#include "tlm_if/wqe.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;
using sc_core::sc_time_stamp;

namespace {

// At kBenchClock (800 MHz): parse_cycles 4 = 5 ns per WQE (the unit's default).
const sc_time kLatency(100, SC_NS);     // every host memory access
constexpr uint64_t kQpcBase = 0x10000;  // QP context table
constexpr uint64_t kSqBase = 0x20000;   // QP 3's send ring: 16 slots of 64 bytes
constexpr uint64_t kRqBase = 0x30000;   // its receive ring: 16 slots of 64 bytes
constexpr uint32_t kQpn = 3;

/// The transport engine as the fetcher sees it: room per QP, and a log of what it is given.
struct fake_engine final : send_queue_sink {
    struct pushed {
        sc_time at;
        uint32_t qpn;
        send_wqe w;
    };
    unsigned room_left = 16;
    std::vector<pushed> sends;
    std::vector<std::pair<sc_time, uint16_t>> rq_posts;

    unsigned room(uint32_t) override { return room_left; }
    bool has_room(uint32_t) const override { return room_left != 0; }
    void push_send(uint32_t qpn, const send_wqe& w) override {
        sends.push_back({sc_time_stamp(), qpn, w});
        --room_left;
    }
    void rq_posted(uint32_t, uint16_t producer) override { rq_posts.emplace_back(sc_time_stamp(), producer); }
    void expect(uint32_t) override {}
};

struct bench : sc_core::sc_module {
    recording_memory mem{"memory", 1 << 20, kLatency};
    wqe_fetcher fetcher{"wqe_fetcher", kBenchClock, 8, 2};
    fake_engine engine;

    bench() : sc_module("bench") {
        fetcher.dma.socket.bind(mem.socket);
        fetcher.bind_engine(engine);
        fetcher.set_qpc_table(kQpcBase);
        hw::qp_context c{};
        c.qpn = kQpn;
        c.state = hw::QPS_RTS;
        c.transport = hw::QPT_RC;
        c.sq_base = kSqBase;
        c.sq_log_size = 4;
        c.sq_log_stride = 6;
        c.rq_base = kRqBase;
        c.rq_log_size = 4;
        c.rq_log_stride = 6;
        mem.put(kQpcBase + kQpn * sizeof c, c);
        fetcher.load_qp(c);
    }

    /// An RDMA WRITE of `len` bytes from 0x5000 (L_Key 0x11) to 0x9000 (R_Key 0x22) in slot `index`.
    void put_write_wqe(uint16_t index, uint32_t len) {
        struct {
            hw::wqe_ctrl_seg c;
            hw::wqe_raddr_seg r;
            hw::wqe_data_seg d;
        } w{};
        w.c.opcode = hw::WQE_OP_RDMA_WRITE;
        w.c.flags = hw::WQE_FLAG_SIGNALED;
        w.c.ds_count = sizeof w / 16;
        w.c.qpn = kQpn;
        w.c.wqe_index = index;
        w.c.wr_id = 0x1000 + index;
        w.r.remote_va = 0x9000;
        w.r.rkey = 0x22;
        w.d = {len, 0x11, 0x5000};
        mem.put(kSqBase + (index % 16) * 64, w);
    }
};

}  // namespace

SIM_TEST(WqeFetcherBench, doorbell_reads_the_qp_context_then_the_wqe_and_hands_it_parsed_to_the_engine) {
    bench b;
    b.put_write_wqe(0, 300);
    run_bench([&] {
        b.fetcher.sq_doorbell(kQpn, 1);
        sc_core::wait(1, sc_core::SC_US);
    });
    // The ring location is not known yet: the QP's context first, then the WQE slot.
    ASSERT_EQ(b.mem.log.size(), 2u);
    EXPECT_EQ(b.mem.log[0].at, sc_time(0, SC_NS));
    EXPECT_EQ(b.mem.log[0].addr, kQpcBase + kQpn * sizeof(hw::qp_context));
    EXPECT_EQ(b.mem.log[0].len, sizeof(hw::qp_context));
    EXPECT_FALSE(b.mem.log[0].write);
    EXPECT_EQ(b.mem.log[1].at, sc_time(100, SC_NS));
    EXPECT_EQ(b.mem.log[1].addr, kSqBase);
    EXPECT_EQ(b.mem.log[1].len, 64u);
    ASSERT_EQ(b.engine.sends.size(), 1u);
    const send_wqe& w = b.engine.sends[0].w;
    EXPECT_EQ(b.engine.sends[0].at, sc_time(100, SC_NS));  // handed on as its read is issued ...
    EXPECT_EQ(w.ready, sc_time(205, SC_NS));               // ... usable once read and parsed
    EXPECT_EQ(b.engine.sends[0].qpn, kQpn);
    EXPECT_EQ(w.opcode, hw::WQE_OP_RDMA_WRITE);
    EXPECT_EQ(w.wr_id, 0x1000u);
    EXPECT_EQ(w.remote_va, 0x9000u);
    EXPECT_EQ(w.rkey, 0x22u);
    ASSERT_EQ(w.num_sge, 1u);
    EXPECT_EQ(w.sg[0].addr, 0x5000u);
    EXPECT_EQ(w.sg[0].lkey, 0x11u);
    EXPECT_EQ(w.length, 300u);
    EXPECT_FALSE(w.malformed);
    EXPECT_EQ(b.fetcher.wqes_fetched.value(), 1u);
}

SIM_TEST(WqeFetcherBench, wqes_of_one_doorbell_are_one_read_and_parsed_one_after_another) {
    bench b;
    for (uint16_t i = 0; i < 3; ++i) b.put_write_wqe(i, 100 * (i + 1));
    run_bench([&] {
        b.fetcher.sq_doorbell(kQpn, 3);
        sc_core::wait(1, sc_core::SC_US);
    });
    ASSERT_EQ(b.mem.log.size(), 2u);
    EXPECT_EQ(b.mem.log[1].addr, kSqBase);
    EXPECT_EQ(b.mem.log[1].len, 3 * 64u);
    ASSERT_EQ(b.engine.sends.size(), 3u);
    for (unsigned i = 0; i < 3; ++i) {
        EXPECT_EQ(b.engine.sends[i].w.wqe_index, i);
        EXPECT_EQ(b.engine.sends[i].w.length, 100 * (i + 1));
        EXPECT_EQ(b.engine.sends[i].w.ready, sc_time(200 + 5 * (i + 1), SC_NS)) << "WQE " << i;
    }
}

SIM_TEST(WqeFetcherBench, a_full_engine_gets_nothing_until_it_credits_the_qp) {
    bench b;
    b.put_write_wqe(0, 64);
    b.engine.room_left = 0;
    run_bench([&] {
        b.fetcher.sq_doorbell(kQpn, 1);
        sc_core::wait(500, SC_NS);
        EXPECT_TRUE(b.mem.log.empty()) << "fetched although the engine had no room";
        b.engine.room_left = 4;
        b.fetcher.credit(kQpn);
        sc_core::wait(1, sc_core::SC_US);
    });
    ASSERT_EQ(b.mem.log.size(), 2u);
    EXPECT_EQ(b.mem.log[0].at, sc_time(500, SC_NS));
    EXPECT_EQ(b.mem.log[1].at, sc_time(600, SC_NS));
    ASSERT_EQ(b.engine.sends.size(), 1u);
    EXPECT_EQ(b.engine.sends[0].w.ready, sc_time(705, SC_NS));
}

SIM_TEST(WqeFetcherBench, an_unreadable_send_ring_hands_on_a_wqe_marked_fetch_error) {
    bench b;
    b.mem.fail_from = kSqBase;
    b.mem.fail_to = kSqBase + 64;
    run_bench([&] {
        b.fetcher.sq_doorbell(kQpn, 1);
        sc_core::wait(1, sc_core::SC_US);
    });
    ASSERT_EQ(b.engine.sends.size(), 1u);
    EXPECT_TRUE(b.engine.sends[0].w.malformed);
    EXPECT_TRUE(b.engine.sends[0].w.fetch_error);
    EXPECT_EQ(b.engine.sends[0].w.wqe_index, 0u);
    EXPECT_EQ(b.fetcher.malformed.value(), 1u);
}

SIM_TEST(WqeFetcherBench, receive_doorbell_goes_to_the_engine_at_once_and_receive_wqes_are_read_on_demand) {
    bench b;
    struct {
        hw::wqe_recv_header h;
        hw::wqe_data_seg d[2];
    } r{};
    r.h.wr_id = 0x77;
    r.h.wqe_index = 5;
    r.h.num_sge = 2;
    r.d[0] = {256, 0x11, 0x6000};
    r.d[1] = {128, 0x11, 0x7000};
    b.mem.put(kRqBase + 5 * 64, r);
    recv_wqe out;
    bool ok = false;
    sc_time done;
    run_bench([&] {
        sc_core::wait(10, SC_NS);
        b.fetcher.rq_doorbell(kQpn, 6);
        sc_time delay = sc_core::SC_ZERO_TIME;
        ok = b.fetcher.fetch_recv(kQpn, 5, out, delay);
        done = sc_time_stamp() + delay;
    });
    ASSERT_EQ(b.engine.rq_posts.size(), 1u);
    EXPECT_EQ(b.engine.rq_posts[0], std::make_pair(sc_time(10, SC_NS), uint16_t(6)));
    ASSERT_TRUE(ok);
    // The context (not loaded yet) and the receive slot, back to back; then one parse.
    ASSERT_EQ(b.mem.log.size(), 2u);
    EXPECT_EQ(b.mem.log[1].at, sc_time(110, SC_NS));
    EXPECT_EQ(b.mem.log[1].addr, kRqBase + 5 * 64);
    EXPECT_EQ(done, sc_time(215, SC_NS));
    EXPECT_EQ(out.wr_id, 0x77u);
    EXPECT_EQ(out.num_sge, 2u);
    EXPECT_EQ(out.capacity, 384u);
    EXPECT_EQ(out.sg[1].addr, 0x7000u);
}
