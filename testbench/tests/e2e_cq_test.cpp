// Completion queues end to end (IBA 10.2.6, 10.8.5.2, 10.8.7, 10.2.4.5, 10.8.2.1): the resize and
// query commands and verbs, resize while work is outstanding (10.2.6.3), the rules after a CQ
// error, completion event handlers (C10-109.2.1, o10-54.2.1, C10-110.2.1, o10-54.2.2), the
// poll / arm / poll sequence of 10.8.7 against traffic arriving at random times, CQ sharing of
// the special QPs, and work request lists.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>
#include <systemc>

#include <algorithm>
#include <cerrno>
#include <random>
#include <utility>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"
#include "tlm_if/contexts.h"

extern "C" int sc_main(int, char*[]) { return 0; }

#ifdef E2E_CQ_WRITER_IMPL
// Built again as e2e_cq_rtl_test and e2e_cq_both_test (testbench/tests/CMakeLists.txt): every
// scenario with the CQ writer's RTL (hca.cq_writer.impl=rtl|both, docs/cosim.md).
namespace {
struct cq_writer_impl : ::testing::Environment {
    void SetUp() override {
        hcasim::broker::instance().set("hca.cq_writer.impl", E2E_CQ_WRITER_IMPL, "test");
    }
};
const ::testing::Environment* const cq_writer_env = ::testing::AddGlobalTestEnvironment(new cq_writer_impl);
}  // namespace
#endif

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

/// node0's sending side of a stream: SEND_WITH_IMM of 64 bytes, wr_id = imm = message number.
struct stream_state {
    bool done = false;
    unsigned completed = 0;  ///< send completions polled
    unsigned errors = 0;     ///< of those, not successful
};

/// Runs node0's sender in a SystemC process of its own: `n` messages on the harness QP, at most
/// 64 outstanding, gap(k) ns of think time before message k. Polls its send CQ itself.
void spawn_sender(rc_harness& h, stream_state& st, unsigned n, uint64_t src, uint32_t lkey,
                  std::function<uint64_t(unsigned)> gap) {
    sc_core::sc_spawn([&h, &st, n, src, lkey, gap] {
        unsigned posted = 0;
        while (st.completed < n) {
            while (posted < n && posted - st.completed < 64) {
                if (uint64_t g = gap(posted)) h.sleep(0, g);
                const int rc = h.post_send(0, IBV_WR_SEND_WITH_IMM, {{src, 64, lkey}}, posted,
                                           IBV_SEND_SIGNALED, 0, 0, posted);
                if (rc) {
                    ADD_FAILURE() << "sender: post_send " << posted << " returned " << rc;
                    st.done = true;
                    return;
                }
                ++posted;
            }
            ibv_wc wc[16];
            const int got = ibv_poll_cq(h.s[0].scq, 16, wc);
            for (int i = 0; i < got; ++i) st.errors += wc[i].status != IBV_WC_SUCCESS;
            st.completed += unsigned(std::max(got, 0));
            if (got == 0 && (posted == n || posted - st.completed >= 64) &&
                ibv_wait_cq(h.s[0].scq, 50'000'000) != 0) {
                ADD_FAILURE() << "sender: no send completion within 50 ms";
                break;
            }
        }
        st.done = true;
    });
}

/// Posts `count` receives of 64 bytes on node1's harness QP, wr_id first.. (buffers reused mod 64).
void post_receives(rc_harness& h, unsigned first, unsigned count, uint64_t dst, uint32_t lkey) {
    for (unsigned k = first; k < first + count; ++k)
        ASSERT_EQ(h.post_recv(1, {{dst + (k % 64) * 64, 64, lkey}}, k), 0) << "receive " << k;
}

/// One 16-byte SEND from node0's q0 into a receive posted on node1's q1 (wr_id `id` both sides).
void send_one(rc_harness&, std::pair<ibv_qp*, ibv_qp*> p, const bufs& b, uint64_t id) {
    ibv_sge rs{b.dst, 16, b.dmr->lkey};
    ibv_recv_wr rw{};
    rw.wr_id = id;
    rw.sg_list = &rs;
    rw.num_sge = 1;
    ibv_recv_wr* rbad = nullptr;
    ASSERT_EQ(ibv_post_recv(p.second, &rw, &rbad), 0);
    ibv_sge ss{b.src, 16, b.smr->lkey};
    ibv_send_wr sw{};
    sw.wr_id = id;
    sw.sg_list = &ss;
    sw.num_sge = 1;
    sw.opcode = IBV_WR_SEND;
    sw.send_flags = 0;  // unsignaled: only the receive completes
    ibv_send_wr* sbad = nullptr;
    ASSERT_EQ(ibv_post_send(p.first, &sw, &sbad), 0);
}

/// Runs ibv_process_events on node1 until `calls` changes or timeout_ns passes; true if it changed.
bool await_handler(rc_harness& h, const unsigned& calls, uint64_t timeout_ns = 10'000'000) {
    const unsigned before = calls;
    const uint64_t deadline = h.now_ns() + timeout_ns;
    while (calls == before) {
        const uint64_t now = h.now_ns();
        if (now >= deadline || ibv_process_events(h.s[1].ctx, deadline - now) != 0) break;
    }
    return calls != before;
}

uint8_t log2_of(int cap) { return uint8_t(__builtin_ctz(unsigned(cap) + 1)); }

}  // namespace

// ------------------------------------------------------------------ commands (model)

SIM_TEST(E2eCq, resize_and_query_commands_move_cqes_by_dma_and_keep_the_cqc_table_in_sync) {
    rc_config cfg;
    cfg.max_send_wr = 256;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        fw::hca_driver& drv = h.s[0].sw->driver;
        ibv_cq* cq = h.s[0].scq;  // 511 CQEs
        ASSERT_EQ(cq->log_size, 9u);
        EXPECT_TRUE(drv.caps().flags & hw::CAP_RESIZE_CQ);
        bufs b = make_bufs(h, 4096, 6);
        for (unsigned k = 0; k < 200; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, k, IBV_SEND_SIGNALED,
                                  b.dst, b.dmr->rkey),
                      0);
        h.sleep(0, 200'000);
        hw::cq_context q{};
        ASSERT_EQ(drv.exec(hw::CMD_QUERY_CQ, cq->handle, 0, nullptr, 0, &q, sizeof q), hw::CMD_OK);
        EXPECT_EQ(q.cqn, cq->handle);
        EXPECT_EQ(q.valid, 1u);
        EXPECT_EQ(q.log_size, 9u);
        EXPECT_EQ(q.base, cq->ring_pa);
        EXPECT_EQ(q.producer, 200u);
        EXPECT_EQ(q.consumer, 0u);
        EXPECT_EQ(q.overrun, 0u);
        EXPECT_EQ(drv.exec(hw::CMD_QUERY_CQ, drv.num_cqs() - 1, 0, nullptr, 0, &q, sizeof q),
                  hw::CMD_BAD_RESOURCE);
        // Refused resizes leave the CQ as it was.
        hw::resize_cq_in in{};
        in.base = cq->ring_pa;  // never used: every one of these fails
        for (uint8_t log :
             {uint8_t(23), uint8_t(17), uint8_t(7)}) {  // too large, > max_cqe + 1, 200 do not fit 128
            in.log_size = log;
            EXPECT_EQ(drv.exec(hw::CMD_RESIZE_CQ, cq->handle, 0, &in, sizeof in), hw::CMD_BAD_PARAM)
                << int(log);
        }
        in.log_size = 10;
        EXPECT_EQ(drv.exec(hw::CMD_RESIZE_CQ, drv.num_cqs() - 1, 0, &in, sizeof in), hw::CMD_BAD_RESOURCE);
        ASSERT_EQ(drv.exec(hw::CMD_QUERY_CQ, cq->handle, 0, nullptr, 0, &q, sizeof q), hw::CMD_OK);
        EXPECT_EQ(q.base, cq->ring_pa);
        EXPECT_EQ(q.log_size, 9u);
        EXPECT_EQ(ctr(0, "cq_writer.resizes"), 0u);
        // The verb moves the 200 CQEs by DMA: read + write of 12.8 KB over PCIe.
        const uint64_t old_ring = cq->ring_pa;
        uint64_t t0 = h.now_ns();
        ASSERT_EQ(ibv_resize_cq(cq, 1000), 0);
        const uint64_t t_moved = h.now_ns() - t0;
        EXPECT_EQ(cq->cqe, 1023);
        EXPECT_NE(cq->ring_pa, old_ring);
        EXPECT_EQ(ctr(0, "cq_writer.resizes"), 1u);
        EXPECT_EQ(ctr(0, "cq_writer.resize_moved"), 200u);
        hw::cq_context t{};  // the context table in host memory follows
        h.bus(0).mem_read(drv.cqc_base() + cq->handle * sizeof t, &t, sizeof t);
        EXPECT_EQ(t.cqn, cq->handle);
        EXPECT_EQ(t.valid, 1u);
        EXPECT_EQ(t.base, cq->ring_pa);
        EXPECT_EQ(t.log_size, 10u);
        EXPECT_EQ(t.producer, 200u);
        EXPECT_EQ(t.consumer, 0u);
        auto wc = h.expect_wc(cq, 200, "the moved completions");
        for (unsigned k = 0; k < wc.size(); ++k) {
            EXPECT_EQ(wc[k].wr_id, k);
            EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(wc[k].opcode, IBV_WC_RDMA_WRITE);
        }
        h.expect_no_wc(cq, 10'000, "nothing beyond the 200");
        // The same resize (to 1024 entries) with nothing to move is faster by the DMA of the move.
        ASSERT_EQ(ibv_resize_cq(cq, 255), 0);
        h.bus(0).mem_read(drv.cqc_base() + cq->handle * sizeof t, &t, sizeof t);
        EXPECT_EQ(t.log_size, 8u);
        EXPECT_EQ(t.base, cq->ring_pa);
        EXPECT_EQ(t.consumer, 200u);
        t0 = h.now_ns();
        ASSERT_EQ(ibv_resize_cq(cq, 1000), 0);
        const uint64_t t_empty = h.now_ns() - t0;
        EXPECT_EQ(ctr(0, "cq_writer.resizes"), 3u);
        EXPECT_EQ(ctr(0, "cq_writer.resize_moved"), 200u);
        EXPECT_GT(t_moved, t_empty + 500) << "moved " << t_moved << " ns, empty " << t_empty << " ns";
    });
}

// ------------------------------------------------------------------ resize and query verbs

SIM_TEST(E2eCq, resize_cq_verb_rules_query_cq_capacity_and_the_arm_survives_a_resize) {
    rc_harness h;
    h.run([](rc_harness& h) {
        fw::hca_driver& drv = h.s[0].sw->driver;
        ibv_cq* cq = h.s[0].scq;
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        int cap = -1;
        ASSERT_EQ(ibv_query_cq(cq, &cap), 0);
        EXPECT_EQ(cap, 511);
        EXPECT_EQ(ibv_resize_cq(cq, 0), EINVAL);
        EXPECT_EQ(ibv_resize_cq(cq, da.max_cqe + 1), EINVAL);
        EXPECT_EQ(ibv_resize_cq(nullptr, 16), EINVAL);
        EXPECT_EQ(ibv_query_cq(nullptr, &cap), EINVAL);
        EXPECT_EQ(ibv_query_cq(cq, nullptr), EINVAL);
        bufs b = make_bufs(h, 4096, 7);
        for (unsigned k = 0; k < 10; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, k, IBV_SEND_SIGNALED,
                                  b.dst, b.dmr->rkey),
                      0);
        h.sleep(0, 50'000);
        EXPECT_EQ(ibv_resize_cq(cq, 9), EINVAL) << "10 completions not polled";
        ASSERT_EQ(ibv_query_cq(cq, &cap), 0);
        EXPECT_EQ(cap, 511) << "unchanged";
        ASSERT_EQ(ibv_resize_cq(cq, 10), 0);
        EXPECT_EQ(cq->cqe, 15);
        ASSERT_EQ(ibv_query_cq(cq, &cap), 0);
        EXPECT_EQ(cap, 15);
        const uint64_t cmds = drv.commands_issued();
        ASSERT_EQ(ibv_resize_cq(cq, 12), 0) << "the same ring size";
        EXPECT_EQ(drv.commands_issued(), cmds) << "no command for the same ring size";
        EXPECT_EQ(cq->cqe, 15);
        // Armed before the resize: the next CQE (on the new ring) raises the event.
        ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
        ASSERT_EQ(ibv_resize_cq(cq, 63), 0);
        ASSERT_EQ(ibv_query_cq(cq, &cap), 0);
        EXPECT_EQ(cap, 63);
        EXPECT_EQ(drv.pending_cq_events(cq->handle), 0u);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, 10, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        h.sleep(0, 50'000);
        drv.process_eq();
        EXPECT_EQ(drv.pending_cq_events(cq->handle), 1u) << "no channel, no handler: the event stays pending";
        auto wc = h.expect_wc(cq, 11, "every completion across two resizes");
        for (unsigned k = 0; k < wc.size(); ++k) EXPECT_EQ(wc[k].wr_id, k);
        h.expect_no_wc(cq, 10'000, "no duplicate");
        EXPECT_EQ(ctr(0, "cq_writer.resizes"), 2u);
        EXPECT_EQ(ctr(0, "cq_writer.overruns"), 0u);
    });
}

SIM_TEST(E2eCq, resize_up_and_down_while_2000_sends_stream_in_loses_and_duplicates_no_completion) {
    // IBA 10.2.6.3: the capacity can change while work is outstanding, without completion errors.
    rc_config cfg;
    cfg.max_recv_wr = 2048;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        constexpr unsigned kMsgs = 2000;
        const uint64_t src = h.alloc(0, 64, 64);
        ibv_mr* smr = h.reg(0, src, 64);
        const uint64_t dst = h.alloc(1, 64 * 64, 64);
        ibv_mr* dmr = h.reg(1, dst, 64 * 64);
        post_receives(h, 0, kMsgs, dst, dmr->lkey);
        stream_state st;
        spawn_sender(h, st, kMsgs, src, smr->lkey, [](unsigned) { return 0; });
        ibv_cq* cq = h.s[1].rcq;
        // Up and down; the smallest still holds what arrives during a resize (about 7 us at up to
        // ~30 million 64-byte messages per second).
        const std::vector<int> sizes = {1023, 4095, 511, 2047, 1023, 8191, 511, 4095, 1023};
        std::vector<int> seen(kMsgs, 0);
        unsigned got = 0, next_resize = 200;
        size_t ri = 0;
        while (got < kMsgs) {
            ibv_wc wc[32];
            const int n = ibv_poll_cq(cq, 32, wc);
            ASSERT_GE(n, 0);
            for (int i = 0; i < n; ++i) {
                const ibv_wc& w = wc[i];
                ASSERT_LT(w.wr_id, kMsgs);
                EXPECT_EQ(w.status, IBV_WC_SUCCESS) << w.wr_id;
                EXPECT_EQ(w.opcode, IBV_WC_RECV);
                EXPECT_EQ(w.byte_len, 64u);
                EXPECT_TRUE(w.wc_flags & IBV_WC_WITH_IMM);
                EXPECT_EQ(w.imm_data, uint32_t(w.wr_id)) << "receive k holds message k";
                EXPECT_EQ(w.wr_id, got + unsigned(i)) << "in order";
                ++seen[w.wr_id];
            }
            got += unsigned(n);
            if (got >= next_resize && ri < sizes.size()) {
                h.sleep(1, 2'000);  // let completions pile up: the resize has CQEs to move
                ASSERT_EQ(ibv_resize_cq(cq, sizes[ri]), 0)
                    << "resize " << ri << " to " << sizes[ri] << " after " << got;
                int cap = 0;
                ASSERT_EQ(ibv_query_cq(cq, &cap), 0) << "resize " << ri << " after " << got << " overruns "
                                                     << ctr(1, "cq_writer.overruns") << " at " << h.now_ns();
                EXPECT_EQ(cap, (1 << log2_of(sizes[ri])) - 1);
                EXPECT_EQ(cap, cq->cqe);
                ++ri;
                next_resize += 200;
                continue;
            }
            if (n == 0 && ibv_wait_cq(cq, 50'000'000) != 0) break;
        }
        while (!st.done) h.sleep(1, 10'000);
        EXPECT_EQ(got, kMsgs);
        EXPECT_EQ(ri, sizes.size());
        for (unsigned k = 0; k < kMsgs; ++k) EXPECT_EQ(seen[k], 1) << "message " << k;
        h.expect_no_wc(cq, 10'000, "no duplicate after the last");
        EXPECT_EQ(st.completed, kMsgs);
        EXPECT_EQ(st.errors, 0u);
        EXPECT_EQ(ctr(1, "cq_writer.resizes"), sizes.size());
        EXPECT_GT(ctr(1, "cq_writer.resize_moved"), 0u) << "no resize found completions to move";
        EXPECT_EQ(ctr(1, "cq_writer.overruns"), 0u);
    });
}

// ------------------------------------------------------------------ 10.8.5.2 CQ errors

SIM_TEST(E2eCq, cq_error_rules_of_10_8_5_2_poll_then_empty_resize_and_query_fail_no_events_destroy_allowed) {
    rc_config cfg;
    cfg.cqe = 3;  // rings of 4
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        fw::hca_driver& drv = h.s[0].sw->driver;
        ibv_cq* cq = h.s[0].scq;
        unsigned handler_calls = 0;
        ASSERT_EQ(ibv_set_comp_event_handler(h.s[0].ctx, 0, [&](ibv_cq*, void*) { ++handler_calls; }), 0);
        bufs b = make_bufs(h, 4096, 52);
        for (unsigned k = 0; k < 6; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, k, IBV_SEND_SIGNALED,
                                  b.dst, b.dmr->rkey),
                      0);
        h.sleep(0, kQuietNs);
        EXPECT_GE(ctr(0, "cq_writer.overruns"), 2u);
        // The HCA refuses both commands on a CQ in error.
        hw::cq_context q{};
        EXPECT_EQ(drv.exec(hw::CMD_QUERY_CQ, cq->handle, 0, nullptr, 0, &q, sizeof q), hw::CMD_BAD_STATE);
        hw::resize_cq_in in{};
        in.base = cq->ring_pa;
        in.log_size = 4;
        EXPECT_EQ(drv.exec(hw::CMD_RESIZE_CQ, cq->handle, 0, &in, sizeof in), hw::CMD_BAD_STATE);
        // The verbs: immediate errors (the EQ is processed first, so the CQ error is known).
        int cap = -1;
        EXPECT_EQ(ibv_query_cq(cq, &cap), EIO);
        EXPECT_EQ(cap, -1);
        EXPECT_EQ(ibv_resize_cq(cq, 63), EIO);
        EXPECT_TRUE(cq->error);
        // What was in the CQ at the error is retrieved, then the CQ reads empty.
        ibv_wc wc[16];
        const int n = ibv_poll_cq(cq, 16, wc);
        ASSERT_EQ(n, 4);
        for (int k = 0; k < n; ++k) {
            EXPECT_EQ(wc[k].wr_id, uint64_t(k));
            EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS);
        }
        EXPECT_EQ(ibv_poll_cq(cq, 16, wc), 0);
        // Arming is no error but reports nothing.
        EXPECT_EQ(ibv_req_notify_cq(cq, 0), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, 6, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        h.sleep(0, kQuietNs);
        drv.process_eq();
        EXPECT_EQ(handler_calls, 0u);
        EXPECT_EQ(drv.pending_cq_events(cq->handle), 0u);
        EXPECT_EQ(ibv_poll_cq(cq, 16, wc), 0);
        EXPECT_EQ(ibv_wait_cq(cq, 1000), EIO);
        ibv_async_event ev{};
        ASSERT_EQ(ibv_get_async_event(h.s[0].ctx, &ev, 1), 0);
        EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
        EXPECT_EQ(ev.element.cq, cq);
        ibv_ack_async_event(&ev);
        // QPs may still be created on it, and destroyed; the CQ is destroyed once no QP uses it.
        ibv_qp_init_attr a{};
        a.qp_type = IBV_QPT_RC;
        a.cap = {4, 4, 1, 1, 0};
        a.send_cq = a.recv_cq = cq;
        ibv_qp* extra = ibv_create_qp(h.s[0].pd, &a);
        ASSERT_NE(extra, nullptr);
        EXPECT_EQ(ibv_destroy_cq(cq), EBUSY);  // C10-18
        EXPECT_EQ(ibv_destroy_qp(extra), 0);
        EXPECT_EQ(ibv_destroy_qp(h.s[0].qp), 0);
        EXPECT_EQ(ibv_destroy_cq(cq), 0);
        h.s[0].scq = nullptr;
        // To be used again it is created anew.
        ibv_cq* fresh = ibv_create_cq(h.s[0].ctx, 3);
        ASSERT_NE(fresh, nullptr);
        ASSERT_EQ(ibv_query_cq(fresh, &cap), 0);
        EXPECT_EQ(cap, 3);
    });
}

// ------------------------------------------------------------------ 10.8.7 completion event handlers

SIM_TEST(E2eCq, C10_109_2_1_o10_54_2_1_handler_identifiers_counted_by_query_device_and_chosen_at_create_cq) {
    rc_config cfg;
    cfg.keys = {{"hca.num_comp_vectors", "3"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        ibv_context* ctx = h.s[1].ctx;
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(ctx, &da), 0);
        EXPECT_EQ(da.num_comp_vectors, 3);
        EXPECT_EQ(ctx->num_comp_vectors, 3);
        auto noop = [](ibv_cq*, void*) {};
        EXPECT_EQ(ibv_set_comp_event_handler(ctx, 3, noop), EINVAL);
        EXPECT_EQ(ibv_set_comp_event_handler(ctx, -1, noop), EINVAL);
        EXPECT_EQ(ibv_set_comp_event_handler(nullptr, 0, noop), EINVAL);
        for (int v : {3, -1, 100}) {
            errno = 0;
            EXPECT_EQ(ibv_create_cq(ctx, 15, nullptr, nullptr, v), nullptr) << v;
            EXPECT_EQ(errno, EINVAL) << v;
        }
        ibv_cq* cqa = ibv_create_cq(ctx, 63, (void*)0xA, nullptr, 0);
        ibv_cq* cqb = ibv_create_cq(ctx, 63, (void*)0xB, nullptr, 1);
        ibv_cq* cqc = ibv_create_cq(ctx, 63, (void*)0xC, nullptr, 2);
        ASSERT_TRUE(cqa && cqb && cqc);
        EXPECT_EQ(cqc->comp_vector, 2);
        std::vector<std::pair<ibv_cq*, void*>> calls0, calls2;
        unsigned calls = 0;
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 0,
                                             [&](ibv_cq* c, void* cc) {
                                                 calls0.emplace_back(c, cc);
                                                 ++calls;
                                             }),
                  0);
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 2,
                                             [&](ibv_cq* c, void* cc) {
                                                 calls2.emplace_back(c, cc);
                                                 ++calls;
                                             }),
                  0);
        // Identifier 1 has no handler.
        auto pa = extra_rc_pair(h, 0x1000, cqa), pb = extra_rc_pair(h, 0x2000, cqb),
             pc = extra_rc_pair(h, 0x3000, cqc);
        ASSERT_TRUE(pa.first && pb.first && pc.first);
        bufs b = make_bufs(h, 4096, 109);
        for (ibv_cq* c : {cqa, cqb, cqc}) ASSERT_EQ(ibv_req_notify_cq(c, 0), 0);
        send_one(h, pa, b, 1);
        send_one(h, pb, b, 2);
        send_one(h, pc, b, 3);
        h.sleep(1, kQuietNs);
        while (calls < 2 && await_handler(h, calls)) {}
        h.sleep(1, kQuietNs);
        ibv_process_events(h.s[1].ctx, 1);
        ASSERT_EQ(calls0.size(), 1u) << "one call per event";
        EXPECT_EQ(calls0[0].first, cqa);
        EXPECT_EQ(calls0[0].second, (void*)0xA);
        ASSERT_EQ(calls2.size(), 1u);
        EXPECT_EQ(calls2[0].first, cqc);
        EXPECT_EQ(calls2[0].second, (void*)0xC);
        EXPECT_EQ(h.s[1].sw->driver.pending_cq_events(cqb->handle), 1u) << "no handler: pending";
        EXPECT_EQ(h.s[1].sw->driver.pending_cq_events(cqa->handle), 0u);
        for (auto [c, id] : {std::pair{cqa, 1u}, std::pair{cqb, 2u}, std::pair{cqc, 3u}}) {
            auto wc = h.expect_wc(c, 1, "receive");
            ASSERT_EQ(wc.size(), 1u);
            EXPECT_EQ(wc[0].wr_id, id);
            EXPECT_EQ(wc[0].opcode, IBV_WC_RECV);
        }
        EXPECT_EQ(calls, 2u);
    });
}

SIM_TEST(E2eCq, C10_110_2_1_o10_54_2_2_a_handler_replaces_the_earlier_one_and_an_empty_one_clears_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_context* ctx = h.s[1].ctx;
        fw::hca_driver& drv = h.s[1].sw->driver;
        ibv_cq* cq = ibv_create_cq(ctx, 63, (void*)0x5E7, nullptr, 1);
        ASSERT_NE(cq, nullptr);
        auto p = extra_rc_pair(h, 0x4000, cq);
        ASSERT_TRUE(p.first);
        bufs b = make_bufs(h, 4096, 110);
        unsigned a = 0, bb = 0, c = 0, calls = 0;
        auto event = [&](uint64_t id) {  // arm, one receive completion, its event processed
            ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
            send_one(h, p, b, id);
            auto wc = h.expect_wc(cq, 1, "receive");
            ASSERT_EQ(wc.size(), 1u);
            EXPECT_EQ(wc[0].wr_id, id);
            h.sleep(1, 10'000);
            ibv_process_events(ctx, 1);
        };
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 1,
                                             [&](ibv_cq* q, void* cc) {
                                                 EXPECT_EQ(q, cq);
                                                 EXPECT_EQ(cc, (void*)0x5E7);
                                                 ++a;
                                                 ++calls;
                                             }),
                  0);
        event(1);
        EXPECT_EQ(a, 1u);
        // A non-empty handler replaces the earlier one.
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 1,
                                             [&](ibv_cq*, void*) {
                                                 ++bb;
                                                 ++calls;
                                             }),
                  0);
        event(2);
        EXPECT_EQ(a, 1u);
        EXPECT_EQ(bb, 1u);
        // An empty one clears it: the event stays pending, nobody is called.
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 1, nullptr), 0);
        event(3);
        EXPECT_EQ(calls, 2u);
        EXPECT_EQ(drv.pending_cq_events(cq->handle), 1u);
        // A new handler gets later events only.
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 1,
                                             [&](ibv_cq*, void*) {
                                                 ++c;
                                                 ++calls;
                                             }),
                  0);
        EXPECT_EQ(c, 0u) << "the pending event is not passed to a handler set later";
        event(4);
        EXPECT_EQ(c, 1u);
        EXPECT_EQ(calls, 3u);
        EXPECT_EQ(drv.pending_cq_events(cq->handle), 1u);
    });
}

SIM_TEST(E2eCq, completion_handler_may_poll_rearm_and_destroy_a_cq_whose_event_is_queued) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_context* ctx = h.s[1].ctx;
        ibv_cq* cqa = ibv_create_cq(ctx, 63, (void*)0xA, nullptr, 0);
        ibv_cq* cqb = ibv_create_cq(ctx, 63, (void*)0xB, nullptr, 0);
        ASSERT_TRUE(cqa && cqb);
        auto pa = extra_rc_pair(h, 0x1000, cqa), pb = extra_rc_pair(h, 0x2000, cqb);
        ASSERT_TRUE(pa.first && pb.first);
        bufs b = make_bufs(h, 4096, 54);
        std::vector<void*> seen;
        unsigned calls = 0, polled = 0;
        int destroy_qp_rc = -1, destroy_cq_rc = -1;
        ASSERT_EQ(ibv_set_comp_event_handler(ctx, 0,
                                             [&](ibv_cq* c, void* cc) {
                                                 ++calls;
                                                 seen.push_back(cc);
                                                 ibv_wc wc[4];
                                                 const int n = ibv_poll_cq(c, 4, wc);
                                                 polled += unsigned(std::max(n, 0));
                                                 EXPECT_EQ(ibv_req_notify_cq(c, 0), 0);
                                                 if (calls == 1) {  // cqb's event is queued behind this one
                                                     destroy_qp_rc = ibv_destroy_qp(pb.second);
                                                     destroy_cq_rc = ibv_destroy_cq(cqb);
                                                 }
                                             }),
                  0);
        ASSERT_EQ(ibv_req_notify_cq(cqa, 0), 0);
        ASSERT_EQ(ibv_req_notify_cq(cqb, 0), 0);
        send_one(h, pa, b, 1);
        h.sleep(1, 20'000);
        send_one(h, pb, b, 2);
        h.sleep(1, 20'000);  // both events in the EQ, neither processed
        ASSERT_EQ(ibv_process_events(ctx, 1'000'000), 0);
        EXPECT_EQ(calls, 1u) << "no call for the CQ destroyed by the handler";
        EXPECT_EQ(destroy_qp_rc, 0);
        EXPECT_EQ(destroy_cq_rc, 0);
        EXPECT_EQ(polled, 1u);
        ASSERT_EQ(seen.size(), 1u);
        EXPECT_EQ(seen[0], (void*)0xA);
        // The handler re-armed cqa: the next completion calls it again.
        send_one(h, pa, b, 3);
        EXPECT_TRUE(await_handler(h, calls));
        EXPECT_EQ(calls, 2u);
        EXPECT_EQ(polled, 2u);
    });
}

SIM_TEST(E2eCq, poll_arm_poll_sequence_of_10_8_7_with_traffic_at_random_times_loses_no_completion) {
    rc_config cfg;
    cfg.max_recv_wr = 512;
    cfg.cqe = 1023;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        constexpr unsigned kMsgs = 400;
        const uint64_t src = h.alloc(0, 64, 64);
        ibv_mr* smr = h.reg(0, src, 64);
        const uint64_t dst = h.alloc(1, 64 * 64, 64);
        ibv_mr* dmr = h.reg(1, dst, 64 * 64);
        post_receives(h, 0, kMsgs, dst, dmr->lkey);
        ibv_cq* cq = h.s[1].rcq;
        unsigned events = 0;
        ASSERT_EQ(ibv_set_comp_event_handler(h.s[1].ctx, 0,
                                             [&](ibv_cq* c, void*) {
                                                 EXPECT_EQ(c, cq);
                                                 ++events;
                                             }),
                  0);
        // Bursts and pauses: a quarter of the messages follow the previous one at once, the rest
        // after up to 20 us.
        auto rng = std::make_shared<std::mt19937>(7);
        stream_state st;
        spawn_sender(h, st, kMsgs, src, smr->lkey,
                     [rng](unsigned) -> uint64_t { return (*rng)() % 4 == 0 ? 0 : (*rng)() % 20'000; });
        std::mt19937 think(11);
        std::vector<int> seen(kMsgs, 0);
        unsigned got = 0, waits = 0;
        auto drain = [&] {  // poll until empty
            for (;;) {
                ibv_wc wc[8];
                const int n = ibv_poll_cq(cq, 8, wc);
                ASSERT_GE(n, 0);
                if (n == 0) return;
                for (int i = 0; i < n; ++i) {
                    ASSERT_LT(wc[i].wr_id, kMsgs);
                    EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
                    EXPECT_EQ(wc[i].imm_data, uint32_t(wc[i].wr_id));
                    EXPECT_EQ(wc[i].wr_id, got + unsigned(i));
                    ++seen[wc[i].wr_id];
                }
                got += unsigned(n);
            }
        };
        while (got < kMsgs) {
            drain();                      // 1) poll until the CQ is empty
            h.sleep(1, think() % 3'000);  // consumer work widens the windows between the steps
            const unsigned at_arm = events;
            ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);  // 2) request notification
            h.sleep(1, think() % 3'000);
            drain();  // 3) poll again: entries added since 1)
            if (got == kMsgs) break;
            // Then wait for the event: more messages are coming, so one must fire.
            const uint64_t deadline = h.now_ns() + 50'000'000;
            while (events == at_arm && h.now_ns() < deadline)
                ibv_process_events(h.s[1].ctx, deadline - h.now_ns());
            ASSERT_GT(events, at_arm)
                << "no completion event after " << got << " completions: a wake-up was lost";
            ++waits;
        }
        while (!st.done) h.sleep(1, 10'000);
        EXPECT_EQ(got, kMsgs);
        for (unsigned k = 0; k < kMsgs; ++k) EXPECT_EQ(seen[k], 1) << "message " << k;
        EXPECT_GT(waits, 20u) << "the receiver should have slept on events many times";
        EXPECT_EQ(st.completed, kMsgs);
        EXPECT_EQ(st.errors, 0u);
        h.expect_no_wc(cq, 10'000, "no duplicate");
    });
}

// ------------------------------------------------------------------ 10.2.4.5 special QPs

SIM_TEST(E2eCq, special_qps_10_2_4_5_qp0_and_qp1_complete_on_one_shared_cq_which_no_other_qp_may_use) {
    rc_harness h;
    h.run([](rc_harness& h) {
        h.as(0).privileged = true;
        ibv_cq* sp = ibv_create_cq(h.s[0].ctx, 16);
        ASSERT_NE(sp, nullptr);
        auto special = [&](ibv_qp_type t, ibv_cq* scq, ibv_cq* rcq) {
            ibv_qp_init_attr a{};
            a.send_cq = scq;
            a.recv_cq = rcq;
            a.qp_type = t;
            a.cap = {4, 4, 1, 1, 0};
            return ibv_create_qp(h.s[0].pd, &a);
        };
        errno = 0;
        EXPECT_EQ(special(IBV_QPT_SMI, sp, h.s[0].rcq), nullptr) << "receive CQ of an ordinary QP";
        EXPECT_EQ(errno, EINVAL);
        ibv_qp* qp0 = special(IBV_QPT_SMI, sp, sp);
        ibv_qp* qp1 = special(IBV_QPT_GSI, sp, sp);
        ASSERT_TRUE(qp0 && qp1);
        EXPECT_EQ(sp->special_refs, 4u);
        ibv_qp_init_attr ua{};
        ua.send_cq = h.s[0].scq;
        ua.recv_cq = sp;
        ua.qp_type = IBV_QPT_UD;
        ua.cap = {4, 4, 1, 1, 0};
        errno = 0;
        EXPECT_EQ(ibv_create_qp(h.s[0].pd, &ua), nullptr) << "an ordinary QP on the special QPs' CQ";
        EXPECT_EQ(errno, EINVAL);
        for (ibv_qp* q : {qp0, qp1}) {
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = 1;
            a.qkey = q == qp1 ? 0x80010000u : 0;
            ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
            ASSERT_EQ(to_state(q, IBV_QPS_RTR), 0);
            a = ibv_qp_attr{};
            a.qp_state = IBV_QPS_RTS;
            ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
        }
        const uint64_t mad = h.alloc(0, 256, 64);
        ibv_mr* mr = h.reg(0, mad, 256);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_TRUE(mr && ah);
        for (ibv_qp* q : {qp0, qp1}) {
            ibv_sge sge{mad, 256, mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = 10 + q->qp_num;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.wr.ud.ah = ah;
            wr.wr.ud.remote_qpn = q->qp_num;
            wr.wr.ud.remote_qkey = q == qp1 ? 0x80010000u : 0;
            ibv_send_wr* bad = nullptr;
            ASSERT_EQ(ibv_post_send(q, &wr, &bad), 0);
        }
        auto wc = h.expect_wc(sp, 2, "QP0 and QP1 sends on the shared CQ");
        ASSERT_EQ(wc.size(), 2u);
        std::sort(wc.begin(), wc.end(), [](const ibv_wc& x, const ibv_wc& y) { return x.qp_num < y.qp_num; });
        for (unsigned k = 0; k < 2; ++k) {
            EXPECT_EQ(wc[k].qp_num, k);
            EXPECT_EQ(wc[k].wr_id, 10u + k);
            EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(wc[k].opcode, IBV_WC_SEND);
        }
        h.expect_no_wc(sp, 20'000, "nothing else on the special QPs' CQ");
        h.expect_no_wc(h.s[0].scq, 1'000, "nothing on the ordinary QP's CQ");
        EXPECT_EQ(ibv_destroy_cq(sp), EBUSY);
        ASSERT_EQ(ibv_destroy_qp(qp0), 0);
        ASSERT_EQ(ibv_destroy_qp(qp1), 0);
        EXPECT_EQ(sp->special_refs, 0u);
        EXPECT_EQ(ibv_destroy_cq(sp), 0);
    });
}

// ------------------------------------------------------------------ 10.8.2.1 work request lists

SIM_TEST(E2eCq, wr_lists_10_8_2_1_queue_every_wr_before_the_first_bad_one_and_return_its_error) {
    rc_config cfg;
    cfg.max_send_wr = 8;
    cfg.max_recv_wr = 8;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t dst = h.alloc(1, 4096, 64);
        ibv_mr* dmr = h.reg(1, dst, 4096);
        // Receive list of 10 on an RQ of 8: the 9th does not fit.
        std::vector<ibv_sge> rsge(10);
        std::vector<ibv_recv_wr> rw(10);
        for (unsigned k = 0; k < 10; ++k) {
            rsge[k] = {dst + 64 * k, 64, dmr->lkey};
            rw[k].wr_id = k;
            rw[k].sg_list = &rsge[k];
            rw[k].num_sge = 1;
            rw[k].next = k + 1 < 10 ? &rw[k + 1] : nullptr;
        }
        ibv_recv_wr* rbad = nullptr;
        EXPECT_EQ(ibv_post_recv(h.s[1].qp, &rw[0], &rbad), ENOMEM);
        ASSERT_EQ(rbad, &rw[8]);
        EXPECT_EQ(rbad - &rw[0], 8) << "the count queued follows from bad_wr";
        // Send list of 5 whose third WR is bad (more SGEs than the QP takes).
        std::vector<ibv_sge> ssge(5, ibv_sge{src, 64, smr->lkey});
        std::vector<ibv_send_wr> sw(5);
        for (unsigned k = 0; k < 5; ++k) {
            sw[k].wr_id = 100 + k;
            sw[k].sg_list = &ssge[k];
            sw[k].num_sge = 1;
            sw[k].opcode = IBV_WR_SEND_WITH_IMM;
            sw[k].imm_data = 100 + k;
            sw[k].send_flags = IBV_SEND_SIGNALED;
        }
        sw[2].num_sge = 5;  // max_send_sge is 4
        ibv_send_wr* sbad = nullptr;
        for (unsigned k = 0; k + 1 < 5; ++k) sw[k].next = &sw[k + 1];
        EXPECT_EQ(ibv_post_send(h.s[0].qp, &sw[0], &sbad), EINVAL);
        ASSERT_EQ(sbad, &sw[2]);
        auto s1 = h.expect_wc(h.s[0].scq, 2, "the two sends before the bad one");
        auto r1 = h.expect_wc(h.s[1].rcq, 2, "their receives");
        ASSERT_EQ(r1.size(), 2u);
        for (unsigned k = 0; k < 2; ++k) {
            EXPECT_EQ(s1[k].wr_id, 100u + k);
            EXPECT_EQ(r1[k].wr_id, k);
            EXPECT_EQ(r1[k].imm_data, 100u + k);
        }
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "the bad WR and those after it were not queued");
        // Send list of 12 on an SQ of 8 (empty now): WRs 0..7 go, the 9th is ENOMEM.
        std::vector<ibv_send_wr> big(12);
        for (unsigned k = 0; k < 12; ++k) {
            big[k] = sw[0];
            big[k].wr_id = 200 + k;
            big[k].imm_data = 200 + k;
            big[k].next = k + 1 < 12 ? &big[k + 1] : nullptr;
        }
        EXPECT_EQ(ibv_post_send(h.s[0].qp, &big[0], &sbad), ENOMEM);
        ASSERT_EQ(sbad, &big[8]);
        auto r2 = h.expect_wc(h.s[1].rcq, 6, "the 6 receives left of the 8 queued");
        ASSERT_EQ(r2.size(), 6u);
        for (unsigned k = 0; k < 6; ++k) {
            EXPECT_EQ(r2[k].wr_id, 2u + k) << "receives 0..7 were queued, in order";
            EXPECT_EQ(r2[k].imm_data, 200u + k);
        }
        // Receives 8 and 9 were not queued: the next receive posted takes message 206.
        ASSERT_EQ(h.post_recv(1, {{dst, 64, dmr->lkey}}, 50), 0);
        auto r3 = h.expect_wc(h.s[1].rcq, 1, "message 206");
        ASSERT_EQ(r3.size(), 1u);
        EXPECT_EQ(r3[0].wr_id, 50u);
        EXPECT_EQ(r3[0].imm_data, 206u);
        ASSERT_EQ(h.post_recv(1, {{dst, 64, dmr->lkey}}, 51), 0);
        auto r4 = h.expect_wc(h.s[1].rcq, 1, "message 207");
        ASSERT_EQ(r4.size(), 1u);
        EXPECT_EQ(r4[0].wr_id, 51u);
        EXPECT_EQ(r4[0].imm_data, 207u);
        auto s2 = h.expect_wc(h.s[0].scq, 8, "the 8 that fit (the last two after RNR retries)");
        for (unsigned k = 0; k < s2.size(); ++k) {
            EXPECT_EQ(s2[k].wr_id, 200u + k);
            EXPECT_EQ(s2[k].status, IBV_WC_SUCCESS);
        }
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "nothing beyond the 8 sends queued");
        h.expect_no_wc(h.s[0].scq, 1'000, "no completion for WRs 8..11");
    });
}
