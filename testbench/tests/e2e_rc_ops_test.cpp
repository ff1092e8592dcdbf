// RC operations and reliability on the real model (two nodes back to back, bench_harness.h):
// RDMA READ, atomics, fences, the READ/atomic limit, unsignalled completions, local ACK
// timeout, SQD draining and the asynchronous events the transport engine raises. Test names
// carry the compliance IDs they assert (docs/compliance-status.tsv).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

uint64_t load64(rc_harness& h, unsigned node, uint64_t va) {
    const auto v = h.read_mem(node, va, 8);
    uint64_t x = 0;
    std::memcpy(&x, v.data(), 8);
    return x;
}

void store64(rc_harness& h, unsigned node, uint64_t va, uint64_t x) {
    std::vector<uint8_t> v(8);
    std::memcpy(v.data(), &x, 8);
    h.write_mem(node, va, v);
}

rc_config mtu(unsigned bytes) {
    rc_config c;
    c.mtu = bytes;
    return c;
}

}  // namespace

// ------------------------------------------------------------------ RDMA READ

SIM_TEST(E2eRcOps, C10_83_C10_94_read_of_many_packets_scatters_into_three_sges) {
    rc_harness h(mtu(1024));
    h.run([](rc_harness& h) {
        const size_t n = 10'000;  // 10 response packets: FIRST, 8 x MIDDLE, LAST
        const uint64_t remote = h.alloc(1, n, 4096);
        const auto data = pattern(n, 83);
        h.write_mem(1, remote, data);
        ibv_mr* rmr = h.reg(1, remote, n);
        const uint64_t local = h.alloc(0, 3 * 8192, 4096);
        h.fill_mem(0, local, 3 * 8192, kGuardByte);
        ibv_mr* lmr = h.reg(0, local, 3 * 8192);
        // Three SGEs in separate pages, sizes 3000 + 4000 + 3000.
        const std::vector<ibv_sge> sg = {{local, 3000, lmr->lkey},
                                         {local + 8192, 4000, lmr->lkey},
                                         {local + 16384 + 100, 3000, lmr->lkey}};
        const uint64_t sent = ctr(1, "transport_engine.read_responses_sent");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, sg, 7, IBV_SEND_SIGNALED, remote, rmr->rkey), 0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "read completion");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
        EXPECT_EQ(wc[0].wr_id, 7u);
        EXPECT_EQ(wc[0].byte_len, n);
        EXPECT_EQ(ctr(1, "transport_engine.read_responses_sent") - sent, 10u);
        h.expect_mem(0, local, {data.begin(), data.begin() + 3000}, "SGE 0");
        h.expect_mem(0, local + 8192, {data.begin() + 3000, data.begin() + 7000}, "SGE 1");
        h.expect_mem(0, local + 16384 + 100, {data.begin() + 7000, data.end()}, "SGE 2");
        h.expect_fill(0, local + 3000, 8192 - 3000, kGuardByte, "beyond SGE 0");
        h.expect_fill(0, local + 16384, 100, kGuardByte, "before SGE 2");
        h.expect_fill(0, local + 16384 + 3100, 100, kGuardByte, "beyond SGE 2");
    });
}

SIM_TEST(E2eRcOps, C10_85_read_consumes_no_receive_wqe) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 8192, 4096);
        h.write_mem(1, remote, pattern(8192, 85));
        ibv_mr* rmr = h.reg(1, remote, 8192);
        const uint64_t local = h.alloc(0, 8192, 4096);
        ibv_mr* lmr = h.reg(0, local, 8192);
        ASSERT_EQ(h.post_recv(1, {{remote + 4096, 4096, rmr->lkey}}, 55), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local, 4096, lmr->lkey}}, 1, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        h.expect_wc(h.s[0].scq, 1, "read");
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "READ completes nothing at the responder");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 100, lmr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "the SEND gets the receive WQE the READ did not use");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].wr_id, 55u);
        EXPECT_EQ(rwc[0].byte_len, 100u);
    });
}

SIM_TEST(E2eRcOps, C10_83_zero_length_read_completes) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        ibv_mr* rmr = h.reg(1, remote, 4096);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {}, 3, IBV_SEND_SIGNALED, remote, rmr->rkey), 0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "zero-length read");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].byte_len, 0u);
    });
}

SIM_TEST(E2eRcOps, read_limit_makes_excess_reads_wait_without_error) {
    rc_config cfg;
    cfg.max_rd_atomic = 2;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const size_t n = 64 * 1024;
        const uint64_t remote = h.alloc(1, n, 4096);
        const auto data = pattern(n, 9);
        h.write_mem(1, remote, data);
        ibv_mr* rmr = h.reg(1, remote, n);
        const uint64_t local = h.alloc(0, n, 4096);
        ibv_mr* lmr = h.reg(0, local, n);
        for (unsigned i = 0; i < 16; ++i)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local + i * 4096, 4096, lmr->lkey}}, i,
                                  IBV_SEND_SIGNALED, remote + i * 4096, rmr->rkey),
                      0);
        auto wc = h.expect_wc(h.s[0].scq, 16, "16 reads with 2 outstanding at a time");
        ASSERT_EQ(wc.size(), 16u);
        for (unsigned i = 0; i < 16; ++i) {
            EXPECT_EQ(wc[i].wr_id, i) << "completions in posting order";
            EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
        }
        h.expect_mem(0, local, data, "every read landed");
    });
}

SIM_TEST(E2eRcOps,
         C10_144_C10_160_2_2_read_beyond_the_remote_region_is_rem_access_and_an_access_error_event) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 8192, 4096);
        ibv_mr* rmr = h.reg(1, remote, 4096);
        const uint64_t local = h.alloc(0, 8192, 4096);
        ibv_mr* lmr = h.reg(0, local, 8192);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local, 8192, lmr->lkey}}, 1, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local, 8, lmr->lkey}}, 2, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "error then flush");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        ibv_async_event ev{};
        if (next_event(h, 1, ev)) {
            EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << "responder: local access violation WQ error";
            EXPECT_EQ(ev.element.qp, h.s[1].qp);
        }
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
    });
}

// ------------------------------------------------------------------ atomics

SIM_TEST(E2eRcOps, o10_41_o10_42_o10_47_fetch_add_wraps_and_returns_the_original_value) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        store64(h, 1, remote, 0xFFFFFFFFFFFFFFFEull);
        ibv_mr* rmr = h.reg(1, remote, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
        const uint64_t local = h.alloc(0, 4096, 4096);
        h.fill_mem(0, local, 16, kGuardByte);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, local, lmr->lkey, 1, remote, rmr->rkey, 5),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "fetch and add");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
        EXPECT_EQ(wc[0].byte_len, 8u);
        EXPECT_EQ(load64(h, 0, local), 0xFFFFFFFFFFFFFFFEull) << "o10-47: original value in the local SGE";
        EXPECT_EQ(load64(h, 1, remote), 3u) << "o10-42: two's complement, carry discarded";
        h.expect_fill(0, local + 8, 8, kGuardByte, "nothing beyond the 8-byte result");
    });
}

SIM_TEST(E2eRcOps, o10_40_o10_44_o10_47_compare_swap_swaps_only_on_match) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        store64(h, 1, remote, 100);
        ibv_mr* rmr = h.reg(1, remote, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_CMP_AND_SWP, local, lmr->lkey, 1, remote, rmr->rkey, 99, 7),
                  0);
        ASSERT_EQ(
            h.post_atomic(0, IBV_WR_ATOMIC_CMP_AND_SWP, local + 8, lmr->lkey, 2, remote, rmr->rkey, 100, 42),
            0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "two compare and swaps");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
        EXPECT_EQ(load64(h, 0, local), 100u) << "no match: original returned, nothing stored";
        EXPECT_EQ(load64(h, 0, local + 8), 100u) << "match: original returned";
        EXPECT_EQ(load64(h, 1, remote), 42u);
    });
}

SIM_TEST(E2eRcOps, o10_48_pipelined_atomics_on_one_word_are_serialised) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        store64(h, 1, remote, 1000);
        ibv_mr* rmr = h.reg(1, remote, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
        const unsigned n = 48;
        const uint64_t local = h.alloc(0, n * 8, 4096);
        ibv_mr* lmr = h.reg(0, local, n * 8);
        for (unsigned i = 0; i < n; ++i)
            ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, local + 8 * i, lmr->lkey, i, remote,
                                    rmr->rkey, 1),
                      0);
        auto wc = h.expect_wc(h.s[0].scq, n, "48 fetch-and-adds, 16 outstanding");
        ASSERT_EQ(wc.size(), n);
        for (unsigned i = 0; i < n; ++i) {
            EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
            EXPECT_EQ(load64(h, 0, local + 8 * i), 1000u + i) << "atomic " << i << " saw every earlier one";
        }
        EXPECT_EQ(load64(h, 1, remote), 1000u + n);
        EXPECT_EQ(ctr(1, "transport_engine.atomics_executed"), n);
    });
}

SIM_TEST(E2eRcOps, o10_43_misaligned_atomic_is_an_immediate_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        ibv_mr* rmr = h.reg(1, remote, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        EXPECT_EQ(
            h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, local, lmr->lkey, 1, remote + 4, rmr->rkey, 1),
            EINVAL);
        h.expect_no_wc(h.s[0].scq, kQuietNs, "nothing was posted");
        EXPECT_EQ(ctr(1, "transport_engine.atomics_executed"), 0u);
    });
}

SIM_TEST(E2eRcOps, o10_37_atomic_without_remote_atomic_right_is_a_remote_access_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        store64(h, 1, remote, 5);
        ibv_mr* rmr = h.reg(1, remote, 4096);  // local write + remote read/write, no atomic
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, local, lmr->lkey, 1, remote, rmr->rkey, 1),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "atomic");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(load64(h, 1, remote), 5u) << "not executed";
    });
}

// ------------------------------------------------------------------ ordering

// A SEND gathering from the buffer an earlier READ fills: with the fence it starts after the READ
// completed and carries the READ's data; without, it gathers the buffer before the data arrived.
static void fence_case(bool fence) {
    rc_harness h;
    h.run([fence](rc_harness& h) {
        const size_t n = 64 * 1024;
        const uint64_t remote = h.alloc(1, 2 * n, 4096);
        const auto data = pattern(n, 100);
        h.write_mem(1, remote, data);
        ibv_mr* rmr = h.reg(1, remote, 2 * n);
        const uint64_t local = h.alloc(0, n, 4096);
        h.fill_mem(0, local, n, kGuardByte);
        ibv_mr* lmr = h.reg(0, local, n);
        ASSERT_EQ(h.post_recv(1, {{remote + n, uint32_t(n), rmr->lkey}}, 1), 0);
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_READ, {{local, uint32_t(n), lmr->lkey}}, 1, 0, remote, rmr->rkey), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, uint32_t(n), lmr->lkey}}, 2,
                              IBV_SEND_SIGNALED | (fence ? IBV_SEND_FENCE : 0)),
                  0);
        h.expect_wc(h.s[0].scq, 1, "send");
        h.expect_wc(h.s[1].rcq, 1, "receive");
        if (fence)
            h.expect_mem(1, remote + n, data, "C10-100: the fenced SEND carries the READ's data");
        else
            EXPECT_FALSE(h.read_mem(1, remote + n, n) == data) << "unfenced SEND overtakes the READ's data";
    });
}

SIM_TEST(E2eRcOps, C10_100_fence_waits_for_earlier_reads) { fence_case(true); }
SIM_TEST(E2eRcOps, C10_100_control_without_fence_the_send_does_not_wait) { fence_case(false); }

SIM_TEST(E2eRcOps, C10_98_2_1_C10_101_2_1_mixed_operations_execute_and_complete_in_posting_order) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 64 * 1024, 4096);
        ibv_mr* rmr = h.reg(1, remote, 64 * 1024,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                IBV_ACCESS_REMOTE_ATOMIC);
        const uint64_t local = h.alloc(0, 64 * 1024, 4096);
        h.write_mem(0, local, pattern(16384, 98));
        ibv_mr* lmr = h.reg(0, local, 64 * 1024);
        for (unsigned i = 0; i < 4; ++i)
            ASSERT_EQ(h.post_recv(1, {{remote + 32768 + i * 4096, 4096, rmr->lkey}}, 100 + i), 0);
        // WRITE 8K, READ it back, FETCH_ADD, SEND, READ, WRITE: each READ must see the WRITE
        // before it (the responder executes in order).
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, 8192, lmr->lkey}}, 0, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local + 16384, 8192, lmr->lkey}}, 1, IBV_SEND_SIGNALED,
                              remote, rmr->rkey),
                  0);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, local + 30000 - 30000 % 8, lmr->lkey, 2,
                                remote + 16384, rmr->rkey, 3),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 1000, lmr->lkey}}, 3), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local + 8192, 4096, lmr->lkey}}, 4, IBV_SEND_SIGNALED,
                              remote + 8192, rmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local + 24576, 4096, lmr->lkey}}, 5, IBV_SEND_SIGNALED,
                              remote + 8192, rmr->rkey),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 6, "six operations");
        ASSERT_EQ(wc.size(), 6u);
        const ibv_wc_opcode ops[6] = {IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,  IBV_WC_FETCH_ADD,
                                      IBV_WC_SEND,       IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ};
        for (unsigned i = 0; i < 6; ++i) {
            EXPECT_EQ(wc[i].wr_id, i);
            EXPECT_EQ(wc[i].opcode, ops[i]);
            EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
        }
        const auto src = pattern(16384, 98);
        h.expect_mem(0, local + 16384, {src.begin(), src.begin() + 8192}, "READ after WRITE sees the write");
        h.expect_mem(0, local + 24576, {src.begin() + 8192, src.begin() + 12288}, "second READ after WRITE");
    });
}

// ------------------------------------------------------------------ completions

SIM_TEST(E2eRcOps, C10_90_C10_92_unsignalled_writes_give_no_completion) {
    rc_config cfg;
    cfg.max_send_wr = 16;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        ibv_mr* rmr = h.reg(1, remote, 4096);
        const uint64_t local = h.alloc(0, 4096, 4096);
        h.write_mem(0, local, pattern(4096, 90));
        ibv_mr* lmr = h.reg(0, local, 4096);
        // Three rounds of 15 unsignalled + 1 signalled fill a 16-slot ring: only a retired
        // ring (C10-108) lets the next round post.
        for (unsigned round = 0; round < 3; ++round) {
            for (unsigned i = 0; i < 15; ++i)
                ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local + i * 256, 256, lmr->lkey}},
                                      round * 100 + i, 0, remote + i * 256, rmr->rkey),
                          0)
                    << "round " << round << " WR " << i;
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local + 15 * 256, 256, lmr->lkey}},
                                  round * 100 + 15, IBV_SEND_SIGNALED, remote + 15 * 256, rmr->rkey),
                      0);
            auto wc = h.expect_wc(h.s[0].scq, 1, "the signalled WR");
            ASSERT_EQ(wc.size(), 1u);
            EXPECT_EQ(wc[0].wr_id, round * 100 + 15u);
            h.expect_no_wc(h.s[0].scq, 20'000, "C10-92: no CQE for the unsignalled ones");
        }
        h.expect_mem(1, remote, pattern(4096, 90), "every unsignalled write landed");
    });
}

// ------------------------------------------------------------------ timeout and retries

SIM_TEST(E2eRcOps, C10_160_2_1_local_ack_timeout_retries_retry_cnt_times_then_retry_exc_and_flush) {
    rc_config cfg;
    cfg.timeout = 10;   // 4.096 us x 2^10 = 4.194304 ms
    cfg.retry_cnt = 2;  // 1 send + 2 retries, then RETRY_EXC_ERR
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        h.fill_mem(1, remote, 4096, kGuardByte);
        ibv_mr* rmr = h.reg(1, remote, 4096);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_ERR), 0);  // the responder drops everything silently
        const uint64_t t0 = h.now_ns();
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, 256, lmr->lkey}}, 1, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 16, lmr->lkey}}, 2, 0), 0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "retry exceeded then flush", 100'000'000);
        if (wc.size() != 2) std::fputs(rc_harness::all_counters().c_str(), stderr);
        const uint64_t t1 = h.now_ns();
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
        EXPECT_EQ(wc[1].wr_id, 2u);
        EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR) << "C10-42: the unsignalled WR after it is flushed";
        const uint64_t timeout_ns = 4'194'304;
        EXPECT_GE(t1 - t0, 3 * timeout_ns) << "three timeouts: the first send and two retries";
        EXPECT_LT(t1 - t0, 3 * timeout_ns + 200'000);
        EXPECT_EQ(ctr(0, "transport_engine.timeouts"), 3u);
        EXPECT_EQ(ctr(0, "transport_engine.retransmits"), 2u);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR) << "C10-142";
        h.expect_fill(1, remote, 4096, kGuardByte, "nothing written");
    });
}

SIM_TEST(E2eRcOps, timeout_zero_waits_forever) {
    rc_config cfg;
    cfg.timeout = 0;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        ibv_mr* rmr = h.reg(1, remote, 4096);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_ERR), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, 256, lmr->lkey}}, 1, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        h.expect_no_wc(h.s[0].scq, 50'000'000, "no timer: no completion");
        EXPECT_EQ(ctr(0, "transport_engine.timeouts"), 0u);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
    });
}

// ------------------------------------------------------------------ SQD and events

SIM_TEST(E2eRcOps, C10_35_C10_36_C10_37_sqd_finishes_the_message_raises_sq_drained_and_holds_new_work) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t n = 1 << 20;
        const uint64_t remote = h.alloc(1, n, 4096);
        ibv_mr* rmr = h.reg(1, remote, n);
        const uint64_t local = h.alloc(0, n, 4096);
        const auto data = pattern(n, 35);
        h.write_mem(0, local, data);
        ibv_mr* lmr = h.reg(0, local, n);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, uint32_t(n), lmr->lkey}}, 1, IBV_SEND_SIGNALED,
                              remote, rmr->rkey),
                  0);
        h.sleep(0, 5'000);  // the 1 MiB write (about 90 us on the wire) is under way
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_SQD;
        a.en_sqd_async_notify = 1;
        ASSERT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, 64, lmr->lkey}}, 2, IBV_SEND_SIGNALED,
                              remote + n - 64, rmr->rkey),
                  0);
        ibv_async_event ev{};
        ASSERT_TRUE(next_event(h, 0, ev));
        EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
        EXPECT_EQ(ev.element.qp, h.s[0].qp);
        auto wc = h.expect_wc(h.s[0].scq, 1, "C10-35: the message in flight completes");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        h.expect_mem(1, remote, data, "the whole message landed");
        h.expect_no_wc(h.s[0].scq, kQuietNs, "C10-37: the WR posted in SQD is not executed");
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE), 0);
        wc = h.expect_wc(h.s[0].scq, 1, "after SQD -> RTS the held WR runs");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 2u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    });
}

SIM_TEST(E2eRcOps, comm_est_event_when_a_qp_in_rtr_receives_its_first_packet) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t buf = h.alloc(1, 4096, 4096);
        ibv_mr* mr1 = h.reg(1, buf, 4096);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect(1, IBV_QPS_RTR), 0);
        ASSERT_EQ(h.post_recv(1, {{buf, 4096, mr1->lkey}}, 9), 0);
        ASSERT_EQ(h.post_recv(1, {{buf, 4096, mr1->lkey}}, 10), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 32, lmr->lkey}}, 1), 0);
        h.expect_wc(h.s[1].rcq, 1, "RTR receives");
        ibv_async_event ev{};
        ASSERT_TRUE(next_event(h, 1, ev));
        EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
        EXPECT_EQ(ev.element.qp, h.s[1].qp);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 32, lmr->lkey}}, 2), 0);
        h.expect_wc(h.s[0].scq, 2, "both sends acknowledged");
        EXPECT_EQ(ibv_get_async_event(h.s[1].ctx, &ev, 100'000), ETIMEDOUT)
            << "only the first packet raises it";
    });
}

// ------------------------------------------------------------------ NAK codes and statuses

SIM_TEST(
    E2eRcOps,
    C10_145_C10_160_2_2_receive_with_a_bad_lkey_is_loc_prot_at_the_responder_and_rem_op_at_the_requester) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t buf = h.alloc(1, 4096, 4096);
        ibv_mr* mr1 = h.reg(1, buf, 4096);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(h.post_recv(1, {{buf, 4096, mr1->lkey ^ 0x55}}, 1), 0);  // a key byte no MR has
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 64, lmr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_LOC_PROT_ERR);
        auto swc = h.expect_wc(h.s[0].scq, 1, "send");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_REM_OP_ERR) << "NAK Remote Operational Error";
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
    });
}

SIM_TEST(E2eRcOps, write_with_immediate_to_a_bad_rkey_is_loc_access_on_the_receive_wqe) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t buf = h.alloc(1, 4096, 4096);
        h.fill_mem(1, buf, 4096, kGuardByte);
        ibv_mr* mr1 = h.reg(1, buf, 4096, IBV_ACCESS_LOCAL_WRITE);  // no remote write
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(h.post_recv(1, {}, 5), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE_WITH_IMM, {{local, 128, lmr->lkey}}, 1, IBV_SEND_SIGNALED,
                              buf, mr1->rkey, 0x1234),
                  0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive WQE reports it");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].wr_id, 5u);
        EXPECT_EQ(rwc[0].status, IBV_WC_LOC_ACCESS_ERR);
        auto swc = h.expect_wc(h.s[0].scq, 1, "requester");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(1, buf, 4096, kGuardByte, "nothing written");
    });
}

SIM_TEST(E2eRcOps, C10_160_2_1_rnr_retry_exhausted_is_rnr_retry_exc) {
    rc_config cfg;
    cfg.rnr_retry = 2;
    cfg.min_rnr_timer = 1;  // 10 us
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        const uint64_t t0 = h.now_ns();
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{local, 64, lmr->lkey}}, 1), 0);  // no receive posted
        auto swc = h.expect_wc(h.s[0].scq, 1, "send");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
        EXPECT_EQ(ctr(1, "transport_engine.rnr_naks_sent"), 3u) << "the first try and two retries";
        EXPECT_GE(h.now_ns() - t0, 20'000u) << "two RNR waits of 10 us";
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
    });
}

SIM_TEST(E2eRcOps, ack_coalescing_sends_fewer_acks_and_loses_no_completion) {
    rc_config cfg;
    cfg.keys = {{"hca.transport_engine.ack_coalesce", "8"}, {"hca.transport_engine.ack_coalesce_ns", "2000"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 64 * 1024, 4096);
        ibv_mr* rmr = h.reg(1, remote, 64 * 1024);
        const uint64_t local = h.alloc(0, 64 * 1024, 4096);
        h.write_mem(0, local, pattern(64 * 1024, 8));
        ibv_mr* lmr = h.reg(0, local, 64 * 1024);
        for (unsigned i = 0; i < 36; ++i)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local + (i % 16) * 4096, 4096, lmr->lkey}}, i,
                                  IBV_SEND_SIGNALED, remote + (i % 16) * 4096, rmr->rkey),
                      0);
        auto wc = h.expect_wc(h.s[0].scq, 36, "36 writes, 4 of them after the last full group of 8");
        ASSERT_EQ(wc.size(), 36u);
        for (unsigned i = 0; i < 36; ++i) EXPECT_EQ(wc[i].status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(1, "transport_engine.acks_sent"), 5u) << "4 groups of 8 + one held-back ACK after 2 us";
        EXPECT_EQ(ctr(0, "transport_engine.timeouts"), 0u);
    });
}

SIM_TEST(E2eRcOps, port_goes_down_with_its_link_and_raises_port_err_on_both_nodes) {
    rc_config cfg;
    cfg.keys = {{"link1.down_at_ns", "300000"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        ibv_port_attr pa{};
        ASSERT_EQ(ibv_query_port(h.s[0].ctx, 1, &pa), 0);
        EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
        h.sleep(0, 400'000 - h.now_ns());
        for (unsigned i = 0; i < 2; ++i) {
            ibv_async_event ev{};
            ASSERT_TRUE(next_event(h, i, ev));
            EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
            EXPECT_EQ(ev.element.port_num, 1);
            ASSERT_EQ(ibv_query_port(h.s[i].ctx, 1, &pa), 0);
            EXPECT_EQ(pa.state, IBV_PORT_DOWN) << "node" << i;
        }
    });
}

SIM_TEST(E2eRcOps, C10_41_2_1_requests_to_a_qp_in_error_are_dropped_silently) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t remote = h.alloc(1, 4096, 4096);
        h.fill_mem(1, remote, 4096, kGuardByte);
        ibv_mr* rmr = h.reg(1, remote, 4096);
        const uint64_t local = h.alloc(0, 4096, 4096);
        ibv_mr* lmr = h.reg(0, local, 4096);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_ERR), 0);
        const uint64_t dropped = ctr(1, "transport_engine.dropped_bad_qp");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, 256, lmr->lkey}}, 1, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{local, 256, lmr->lkey}}, 2, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        h.expect_no_wc(h.s[0].scq, kQuietNs, "no response from a QP in Error");
        EXPECT_EQ(ctr(1, "transport_engine.dropped_bad_qp"), dropped + 2);
        EXPECT_EQ(ctr(1, "transport_engine.acks_sent") + ctr(1, "transport_engine.naks_sent"), 0u);
        EXPECT_EQ(ctr(1, "transport_engine.read_responses_sent"), 0u);
        h.expect_fill(1, remote, 4096, kGuardByte, "untouched");
    });
}

SIM_TEST(E2eRcOps, sqd_to_sqd_attribute_change_waits_for_the_drain_but_sqd_to_rts_does_not) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t n = 1 << 20;
        const uint64_t remote = h.alloc(1, n, 4096);
        ibv_mr* rmr = h.reg(1, remote, n);
        const uint64_t local = h.alloc(0, n, 4096);
        ibv_mr* lmr = h.reg(0, local, n);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, uint32_t(n), lmr->lkey}}, 1, IBV_SEND_SIGNALED,
                              remote, rmr->rkey),
                  0);
        h.sleep(0, 5'000);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE), 0);
        ibv_qp_attr q{};
        ibv_qp_init_attr qi{};
        ASSERT_EQ(ibv_query_qp(h.s[0].qp, &q, 0, &qi), 0);
        EXPECT_EQ(q.qp_state, IBV_QPS_SQD);
        EXPECT_EQ(q.sq_draining, 1) << "the 1 MiB write is still in flight";
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_SQD;
        a.retry_cnt = 3;
        EXPECT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_RETRY_CNT), EBUSY) << "still draining";
        h.expect_wc(h.s[0].scq, 1, "the write completes");
        ASSERT_EQ(ibv_query_qp(h.s[0].qp, &q, 0, &qi), 0);
        EXPECT_EQ(q.sq_draining, 0) << "drained";
        EXPECT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_RETRY_CNT), 0) << "drained: allowed";
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        EXPECT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE), 0);
    });
}

SIM_TEST(E2eRcOps, C10_35_sqd_drain_survives_loss_by_resending_what_it_had_started) {
    rc_config cfg;
    cfg.timeout = 6;  // 262 us
    cfg.keys = {{"link.drop_rate", "0.05"}, {"link.seed", "5"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const size_t n = 1 << 20;
        const uint64_t remote = h.alloc(1, n, 4096);
        ibv_mr* rmr = h.reg(1, remote, n);
        const uint64_t local = h.alloc(0, n, 4096);
        const auto data = pattern(n, 36);
        h.write_mem(0, local, data);
        ibv_mr* lmr = h.reg(0, local, n);
        for (unsigned i = 0; i < 4; ++i)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local + i * (n / 4), uint32_t(n / 4), lmr->lkey}},
                                  i, IBV_SEND_SIGNALED, remote + i * (n / 4), rmr->rkey),
                      0);
        h.sleep(0, 30'000);  // all four are on the wire (about 85 us for 1 MiB)
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_SQD;
        a.en_sqd_async_notify = 1;
        ASSERT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{local, 64, lmr->lkey}}, 9, IBV_SEND_SIGNALED, remote,
                              rmr->rkey),
                  0);
        ibv_async_event ev{};
        ASSERT_TRUE(next_event(h, 0, ev, 200'000'000));
        EXPECT_EQ(ev.event_type, IBV_EVENT_SQ_DRAINED);
        auto wc = h.wait_wc(h.s[0].scq, 5, 2'000'000);
        ASSERT_GE(wc.size(), 1u);
        EXPECT_LE(wc.size(), 4u) << "the WR posted in SQD is not executed";
        for (const auto& w : wc) {
            EXPECT_EQ(w.status, IBV_WC_SUCCESS);
            EXPECT_LT(w.wr_id, 4u);
        }
        EXPECT_GT(ctr(0, "transport_engine.retransmits"), 0u) << "the loss did bite";
        const uint64_t started = wc.size();
        h.expect_mem(1, remote, {data.begin(), data.begin() + started * (n / 4)},
                     "the started messages landed");
    });
}
