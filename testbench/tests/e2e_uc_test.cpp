// Unreliable Connected service end to end (two nodes back to back, bench_harness.h with
// qp_type UC): SEND and RDMA WRITE with and without immediate data, no acknowledgements, a lost
// packet drops its whole message at the responder, the SQEr state after a send error, receive
// errors, and memory window binds on UC. Test names carry the compliance IDs they assert.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

rc_config uc(unsigned mtu = 1024) {
    rc_config c;
    c.qp_type = IBV_QPT_UC;
    c.mtu = mtu;
    return c;
}

}  // namespace

SIM_TEST(E2eUc, C10_84_uc_send_and_rdma_write_with_and_without_immediate_are_never_acknowledged) {
    rc_harness h(uc(1024));
    h.run([](rc_harness& h) {
        const size_t n = 64 * 1024;
        bufs b = make_bufs(h, n, 84);
        const uint64_t acks = ctr(1, "transport_engine.acks_sent");
        uint64_t off = 0;
        uint64_t wr = 1;
        for (uint32_t len : {1u, 1024u, 1025u, 5000u}) {
            // SEND and SEND with immediate into a receive WQE each.
            for (bool imm : {false, true}) {
                ASSERT_EQ(h.post_recv(1, {{b.dst + off, len, b.dmr->lkey}}, 100 + wr), 0);
                ASSERT_EQ(h.post_send(0, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
                                      {{b.src + off, len, b.smr->lkey}}, wr, IBV_SEND_SIGNALED, 0, 0,
                                      0xC0DE0000u + uint32_t(wr)),
                          0);
                const ibv_wc s = one_wc(h, h.s[0].scq, "send");
                EXPECT_EQ(s.status, IBV_WC_SUCCESS);
                EXPECT_EQ(s.opcode, IBV_WC_SEND);
                EXPECT_EQ(s.wr_id, wr);
                const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
                EXPECT_EQ(r.status, IBV_WC_SUCCESS);
                EXPECT_EQ(r.opcode, IBV_WC_RECV);
                EXPECT_EQ(r.wr_id, 100 + wr);
                EXPECT_EQ(r.byte_len, len);
                EXPECT_EQ(r.qp_num, h.s[1].qp->qp_num);
                EXPECT_EQ(r.src_qp, h.s[0].qp->qp_num);
                EXPECT_EQ(bool(r.wc_flags & IBV_WC_WITH_IMM), imm);
                if (imm) {
                    EXPECT_EQ(r.imm_data, 0xC0DE0000u + uint32_t(wr));
                }
                off += len;
                ++wr;
            }
            // RDMA WRITE, then WRITE with immediate (which takes a receive WQE).
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src + off, len, b.smr->lkey}}, wr,
                                  IBV_SEND_SIGNALED, b.dst + off, b.dmr->rkey),
                      0);
            EXPECT_EQ(one_wc(h, h.s[0].scq, "write").opcode, IBV_WC_RDMA_WRITE);
            off += len;
            ++wr;
            ASSERT_EQ(h.post_recv(1, {}, 100 + wr), 0);
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE_WITH_IMM, {{b.src + off, len, b.smr->lkey}}, wr,
                                  IBV_SEND_SIGNALED, b.dst + off, b.dmr->rkey, 0xABCD),
                      0);
            EXPECT_EQ(one_wc(h, h.s[0].scq, "write with immediate").status, IBV_WC_SUCCESS);
            const ibv_wc r = one_wc(h, h.s[1].rcq, "write with immediate at the responder");
            EXPECT_EQ(r.status, IBV_WC_SUCCESS);
            EXPECT_EQ(r.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
            EXPECT_EQ(r.byte_len, len);
            EXPECT_EQ(r.imm_data, 0xABCDu);
            off += len;
            ++wr;
        }
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, off), "every message's bytes");
        h.expect_fill(1, b.dst + off, n - off, kGuardByte, "nothing beyond");
        EXPECT_EQ(ctr(1, "transport_engine.acks_sent"), acks) << "UC is never acknowledged";
        EXPECT_EQ(ctr(0, "transport_engine.acks_received"), 0u);
        EXPECT_EQ(ctr(1, "transport_engine.uc_dropped"), 0u);
    });
}

SIM_TEST(E2eUc, uc_completes_at_the_requester_when_the_last_packet_is_on_the_wire) {
    // A 2-byte UC SEND completes without a round trip: sooner than the same SEND on RC, whose
    // completion waits for the ACK.
    rc_harness h(uc(4096));
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 11);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 64, b.dmr->lkey}}, 1), 0);
        const uint64_t t0 = h.now_ns();
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 2, b.smr->lkey}}, 1), 0);
        const ibv_wc s = one_wc(h, h.s[0].scq, "send");
        const uint64_t t_send = h.now_ns() - t0;
        const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
        const uint64_t t_recv = h.now_ns() - t0;
        EXPECT_EQ(s.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_LE(t_send, t_recv) << "the sender does not wait for the responder";
    });
}

SIM_TEST(E2eUc, lost_packets_drop_their_whole_message_and_later_messages_arrive_intact) {
    // 200 three-packet SENDs over a cable losing 5 % of packets: every receive completion holds
    // one whole message (never a partial or mixed one), in sending order; a dropped message
    // consumes no receive WQE and produces no completion; the sender completes every WR.
    rc_config c = uc(256);
    c.keys = {{"link.drop_rate", "0.05"}, {"link.seed", "7"}};
    c.max_recv_wr = 256;
    c.max_send_wr = 256;
    c.cqe = 512;
    rc_harness h(c);
    h.run([](rc_harness& h) {
        const unsigned msgs = 200;
        const uint32_t len = 700;  // three packets at MTU 256
        const uint64_t src = h.alloc(0, size_t(msgs) * len, 4096);
        for (unsigned m = 0; m < msgs; ++m) h.write_mem(0, src + uint64_t(m) * len, pattern(len, 1000 + m));
        ibv_mr* smr = h.reg(0, src, size_t(msgs) * len);
        const uint64_t dst = h.alloc(1, size_t(msgs) * 1024, 4096);
        h.fill_mem(1, dst, size_t(msgs) * 1024, kGuardByte);
        ibv_mr* dmr = h.reg(1, dst, size_t(msgs) * 1024);
        for (unsigned m = 0; m < msgs; ++m)
            ASSERT_EQ(h.post_recv(1, {{dst + uint64_t(m) * 1024, 1024, dmr->lkey}}, m), 0);
        for (unsigned m = 0; m < msgs; ++m) {
            ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src + uint64_t(m) * len, len, smr->lkey}}, m), 0);
            if (m % 32 == 31) {
                auto done = h.expect_wc(h.s[0].scq, 32, "a batch of sends");
                for (const ibv_wc& w : done)
                    EXPECT_EQ(w.status, IBV_WC_SUCCESS) << "UC senders learn nothing of losses";
            }
        }
        h.expect_wc(h.s[0].scq, msgs % 32, "the last sends");
        h.sleep(1, 200'000);
        auto got = h.wait_wc(h.s[1].rcq, msgs, 1'000);
        const uint64_t dropped = ctr(1, "transport_engine.uc_dropped");
        EXPECT_GT(dropped, 0u) << "5 % loss over 600 packets loses some";
        EXPECT_LT(got.size(), size_t(msgs));
        EXPECT_GT(got.size(), size_t(msgs) / 2);
        unsigned next_msg = 0;
        for (size_t k = 0; k < got.size(); ++k) {
            const ibv_wc& w = got[k];
            ASSERT_EQ(w.status, IBV_WC_SUCCESS);
            EXPECT_EQ(w.wr_id, k) << "receive WQEs are used in order, one per delivered message";
            EXPECT_EQ(w.byte_len, len);
            // Which message landed in this buffer: the next one in sending order that matches.
            const auto bytes = h.read_mem(1, dst + k * 1024, len);
            unsigned m = next_msg;
            while (m < msgs && bytes != pattern(len, 1000 + m)) ++m;
            ASSERT_LT(m, msgs) << "receive " << k << " holds no whole message";
            next_msg = m + 1;
            h.expect_fill(1, dst + k * 1024 + len, 1024 - len, kGuardByte, "after the message");
        }
        EXPECT_EQ(ctr(1, "transport_engine.recv_completions"), got.size());
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS) << "losses are no error on UC";
    });
}

SIM_TEST(E2eUc, C10_38_C10_39_C10_40_C10_147_uc_send_error_moves_the_qp_to_sqe_and_receiving_goes_on) {
    rc_harness h(uc());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 147);
        const uint64_t in = h.alloc(0, 4096, 4096);
        h.fill_mem(0, in, 4096, kGuardByte);
        ibv_mr* imr = h.reg(0, in, 4096);
        // A local protection error (an L_Key of nothing) on node0's second WR; the third follows.
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 100, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 100, 0xDEAD00u}}, 2, IBV_SEND_SIGNALED,
                              b.dst + 100, b.dmr->rkey),
                  0);
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 100, b.smr->lkey}}, 3, 0, b.dst + 200, b.dmr->rkey),
            0);
        auto wc = h.expect_wc(h.s[0].scq, 3, "three send completions");
        ASSERT_EQ(wc.size(), 3u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[1].status, IBV_WC_LOC_PROT_ERR)
            << "C10-39: the WR that caused SQEr reports its own error";
        EXPECT_EQ(wc[1].wr_id, 2u);
        EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR) << "C10-40: later WRs flush (unsignaled ones too)";
        EXPECT_EQ(wc[2].wr_id, 3u);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_SQE) << "C10-147";
        // C10-40: WRs posted in SQEr complete with flush errors.
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 10, b.smr->lkey}}, 4), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "posted in SQEr").status, IBV_WC_WR_FLUSH_ERR);
        // C10-38: receives are posted and used in SQEr.
        ASSERT_EQ(h.post_recv(0, {{in, 4096, imr->lkey}}, 50), 0);
        const uint64_t reply = h.alloc(1, 64, 64);
        h.write_mem(1, reply, pattern(64, 5));
        ibv_mr* rmr = h.reg(1, reply, 64);
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND, {{reply, 64, rmr->lkey}}, 60), 0);
        const ibv_wc r = one_wc(h, h.s[0].rcq, "receive in SQEr");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.byte_len, 64u);
        h.expect_mem(0, in, pattern(64, 5), "received in SQEr");
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_SQE);
        // SQEr -> RTS: sending works again.
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RTS), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src + 300, 100, b.smr->lkey}}, 5, IBV_SEND_SIGNALED,
                              b.dst + 300, b.dmr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "after SQEr -> RTS").status, IBV_WC_SUCCESS);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 100), "the first WRITE");
        h.expect_fill(1, b.dst + 100, 200, kGuardByte, "neither the failed nor the flushed WRITE");
        h.expect_mem(1, b.dst + 300, h.read_mem(0, b.src + 300, 100), "the WRITE after recovery");
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS) << "the responder knows nothing of it";
    });
}

SIM_TEST(E2eUc, C10_148_uc_receive_completion_error_moves_the_qp_to_error) {
    rc_harness h(uc());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 148);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 100, b.dmr->lkey}}, 7), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst + 100, 100, b.dmr->lkey}}, 8), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 200, b.smr->lkey}}, 1), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS) << "the UC sender learns nothing";
        auto r = h.expect_wc(h.s[1].rcq, 2, "receive error, then the flush");
        ASSERT_EQ(r.size(), 2u);
        EXPECT_EQ(r[0].status, IBV_WC_LOC_LEN_ERR);
        EXPECT_EQ(r[0].wr_id, 7u);
        EXPECT_EQ(r[1].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(r[1].wr_id, 8u);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
    });
}

SIM_TEST(E2eUc, C10_149_uc_write_with_a_bad_rkey_or_without_a_receive_wqe_is_dropped_silently) {
    rc_harness h(uc());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 149);
        // A WRITE through an R_Key of nothing: dropped, no error anywhere.
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 2000, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey ^ 0x100u),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "write, bad R_Key").status, IBV_WC_SUCCESS);
        // A SEND with no receive WQE posted: dropped (UC has no RNR).
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 2), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send without a receive WQE").status, IBV_WC_SUCCESS);
        h.sleep(1, kQuietNs);
        EXPECT_EQ(ctr(1, "transport_engine.uc_dropped"), 2u);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "nothing completes at the responder");
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS);
        // The next messages are received normally.
        ASSERT_EQ(h.post_recv(1, {{b.dst + 2048, 64, b.dmr->lkey}}, 9), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src + 100, 64, b.smr->lkey}}, 3), 0);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "the next SEND").status, IBV_WC_SUCCESS);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 4, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        h.expect_wc(h.s[0].scq, 2, "both sent");
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "the good WRITE");
        h.expect_fill(1, b.dst + 64, 2048 - 64, kGuardByte, "nothing of the refused WRITE");
        h.expect_mem(1, b.dst + 2048, h.read_mem(0, b.src + 100, 64), "the next SEND");
    });
}

SIM_TEST(E2eUc, C10_146_uc_immediate_error_leaves_the_qp_unaffected) {
    rc_harness h(uc());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 146);
        // READ and atomics are not UC operations (C10-83, o10-46): refused when posted.
        EXPECT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{b.src, 64, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  EINVAL);
        EXPECT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, b.src, b.smr->lkey, 2, b.dst, b.dmr->rkey, 1),
                  EINVAL);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 64, b.dmr->lkey}}, 5), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 3), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "receive").status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "the SEND after the refused posts");
    });
}

SIM_TEST(E2eUc, C10_89_memory_window_binds_on_a_uc_qp) {
    rc_harness h(uc());
    h.run([](rc_harness& h) {
        const uint64_t dst = h.alloc(1, 4096, 4096);
        h.fill_mem(1, dst, 4096, kGuardByte);
        ibv_mr* dmr =
            h.reg(1, dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND);
        const uint64_t src = h.alloc(0, 4096, 4096);
        h.write_mem(0, src, pattern(4096, 89));
        ibv_mr* smr = h.reg(0, src, 4096);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_NE(mw, nullptr);
        ibv_mw_bind bind;
        bind.wr_id = 77;
        bind.send_flags = IBV_SEND_SIGNALED;
        bind.bind_info = {dmr, dst + 1000, 500, IBV_ACCESS_REMOTE_WRITE};
        ASSERT_EQ(ibv_bind_mw(h.s[1].qp, mw, &bind), 0);
        const ibv_wc bw = one_wc(h, h.s[1].scq, "bind on the UC QP");
        EXPECT_EQ(bw.status, IBV_WC_SUCCESS);
        EXPECT_EQ(bw.opcode, IBV_WC_BIND_MW);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 500, smr->lkey}}, 1, IBV_SEND_SIGNALED, dst + 1000,
                              mw->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "write through the window").status, IBV_WC_SUCCESS);
        // One byte past the window: dropped at the responder (UC), nothing written.
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 2, smr->lkey}}, 2, IBV_SEND_SIGNALED, dst + 1499,
                              mw->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "write past the window").status, IBV_WC_SUCCESS);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, dst, 1000, kGuardByte, "before the window");
        h.expect_mem(1, dst + 1000, h.read_mem(0, src, 500), "through the window");
        h.expect_fill(1, dst + 1500, 4096 - 1500, kGuardByte, "after the window");
        EXPECT_EQ(ctr(1, "transport_engine.uc_dropped"), 1u);
    });
}

SIM_TEST(E2eUc, C10_150_uc_affiliated_async_error_halts_the_qp_and_errors_outstanding_work) {
    rc_harness h(uc());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 150);
        const uint64_t in = h.alloc(0, 256, 64);
        ibv_mr* imr = h.reg(0, in, 256);
        ASSERT_EQ(h.post_recv(0, {{in, 256, imr->lkey}}, 7), 0);  // outstanding on node0's RQ
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "before").status, IBV_WC_SUCCESS);
        break_send_ring(h, 0);
        ibv_sge sge{b.src, 64, b.smr->lkey};
        std::vector<ibv_send_wr> wrs(2);
        for (unsigned k = 0; k < 2; ++k) {
            wrs[k].wr_id = 2 + k;
            wrs[k].sg_list = &sge;
            wrs[k].num_sge = 1;
            wrs[k].opcode = IBV_WR_RDMA_WRITE;
            wrs[k].send_flags = IBV_SEND_SIGNALED;
            wrs[k].wr.rdma.remote_addr = b.dst + 64;
            wrs[k].wr.rdma.rkey = b.dmr->rkey;
        }
        ASSERT_EQ(post_list(h.s[0].qp, wrs), 0);
        ibv_qp* qp = nullptr;
        EXPECT_EQ(next_event_type(h, 0, &qp), int(IBV_EVENT_QP_FATAL))
            << "a Local Work Queue Catastrophic Error";
        EXPECT_EQ(qp, h.s[0].qp);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR) << "processing halts, the QP goes to Error";
        const ibv_wc r = one_wc(h, h.s[0].rcq, "the outstanding receive");
        EXPECT_EQ(r.status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(r.wr_id, 7u);
        h.expect_no_wc(h.s[0].scq, 20'000, "the unreadable WQEs cannot be completed");
        EXPECT_EQ(ctr(0, "transport_engine.wq_catastrophic"), 1u);
        h.sleep(1, 20'000);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "the WRITE before");
        h.expect_fill(1, b.dst + 64, 64, kGuardByte, "nothing of the unreadable WQE");
    });
}
