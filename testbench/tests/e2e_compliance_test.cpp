// IBA Vol. 1 chapter 10 compliance tests on the real model: two nodes back to back, one RC QP
// each (bench_harness.h). Completion semantics, flushes, QP state behaviour on the wire,
// memory protection, CQ notification and P_Key checking. Each test names the statement IDs
// it asserts (docs/compliance-status.tsv, scripts/compliance.py).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/hca/pkey_checker.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"
#include "tlm_if/cqe.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

/// Node i's QP: Reset, then Init with `pkey_index`, up to `upto` (Init, RTR or RTS) towards the
/// peer, with the harness's attributes (PSNs restart from the configured ones).
int reconnect(rc_harness& h, unsigned i, ibv_qp_state upto, uint16_t pkey_index = 0) {
    if (int rc = to_state(h.s[i].qp, IBV_QPS_RESET)) return rc;
    return h.connect(i, upto, pkey_index);
}

}  // namespace

// ------------------------------------------------------------------ 10.3 QP states on the wire

SIM_TEST(E2eCompliance, C10_23_packets_to_a_qp_in_reset_are_silently_dropped) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        const uint64_t dropped = ctr(1, "transport_engine.dropped_bad_qp");
        const uint64_t acks = ctr(1, "transport_engine.acks_sent") + ctr(1, "transport_engine.naks_sent");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 256, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        h.expect_no_wc(h.s[0].scq, kQuietNs, "no ACK comes back from a QP in Reset");
        EXPECT_EQ(ctr(1, "transport_engine.dropped_bad_qp"), dropped + 1);
        EXPECT_EQ(ctr(1, "transport_engine.acks_sent") + ctr(1, "transport_engine.naks_sent"), acks);
        h.expect_no_wc(h.s[1].rcq, 1000, "responder");
        h.expect_fill(1, b.dst, 4096, kGuardByte, "target of the dropped write");
    });
}

SIM_TEST(E2eCompliance, C10_26_packets_to_a_qp_in_init_are_discarded) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096);
        ASSERT_EQ(reconnect(h, 1, IBV_QPS_INIT), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 7), 0);
        const uint64_t dropped = ctr(1, "transport_engine.dropped_bad_qp");
        const uint64_t rnr = ctr(1, "transport_engine.rnr_naks_sent");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 300, b.smr->lkey}}, 1), 0);
        h.expect_no_wc(h.s[0].scq, kQuietNs, "no ACK from a QP in Init");
        EXPECT_EQ(ctr(1, "transport_engine.dropped_bad_qp"), dropped + 1);
        EXPECT_EQ(ctr(1, "transport_engine.rnr_naks_sent"), rnr);
        h.expect_no_wc(h.s[1].rcq, 1000, "the receive posted in Init is not used");
        h.expect_fill(1, b.dst, 4096, kGuardByte, "receive buffer");
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_INIT);
    });
}

SIM_TEST(E2eCompliance, C10_24_C10_27_C10_28_receives_posted_in_init_and_rtr_are_used_in_rtr) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 1024, 24);
        ASSERT_EQ(reconnect(h, 1, IBV_QPS_INIT), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 1024, b.dmr->lkey}}, 20), 0);  // C10-24: accepted in Init
        h.expect_no_wc(h.s[1].rcq, 10'000, "receive in Init is queued, not used");
        // Init -> RTR without Reset (the harness's RTR attributes).
        {
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_RTR;
            a.path_mtu = ibv_mtu(__builtin_ctz(h.config().mtu) - 7);
            a.dest_qp_num = h.s[0].qp->qp_num;
            a.rq_psn = h.s[0].psn;
            a.min_rnr_timer = 12;
            a.ah_attr.dlid = h.s[0].lid;
            a.ah_attr.port_num = 1;
            ASSERT_EQ(ibv_modify_qp(h.s[1].qp, &a,
                                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                        IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
                      0);
        }
        ASSERT_EQ(h.post_recv(1, {{b.dst + 1024, 1024, b.dmr->lkey}}, 21), 0);  // C10-27: accepted in RTR
        EXPECT_EQ(h.post_send(1, IBV_WR_SEND, {}, 99), EINVAL);                 // ... a send is not
        // C10-28: node1 in RTR processes incoming messages normally.
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 100, b.smr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src + 1024, 200, b.smr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 2, "receives in RTR");
        ASSERT_EQ(rwc.size(), 2u);
        EXPECT_EQ(rwc[0].wr_id, 20u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 100u);
        EXPECT_EQ(rwc[1].wr_id, 21u);
        EXPECT_EQ(rwc[1].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[1].byte_len, 200u);
        auto swc = h.expect_wc(h.s[0].scq, 2, "sends acknowledged by the RTR responder");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 100), "first message");
        h.expect_mem(1, b.dst + 1024, h.read_mem(0, b.src + 1024, 200), "second message");
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTR);
    });
}

SIM_TEST(E2eCompliance, C10_30_C10_31_C10_32_rts_accepts_and_processes_work_and_incoming_messages) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 31);
        const uint64_t back = h.alloc(0, 4096, 64);
        ibv_mr* bmr = h.reg(0, back, 4096);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_recv(0, {{back, 4096, bmr->lkey}}, 2), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 500, b.smr->lkey}}, 3), 0);
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND, {{b.dst + 2048, 600, b.dmr->lkey}}, 4), 0);
        auto w1 = h.expect_wc(h.s[1].rcq, 1, "node1 receive");
        auto w0 = h.expect_wc(h.s[0].rcq, 1, "node0 receive");
        auto s0 = h.expect_wc(h.s[0].scq, 1, "node0 send");
        auto s1 = h.expect_wc(h.s[1].scq, 1, "node1 send");
        ASSERT_TRUE(w1.size() == 1 && w0.size() == 1 && s0.size() == 1 && s1.size() == 1);
        EXPECT_EQ(w1[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(w1[0].byte_len, 500u);
        EXPECT_EQ(w0[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(w0[0].byte_len, 600u);
        EXPECT_EQ(s0[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(s1[0].status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 500), "node0 -> node1");
    });
}

SIM_TEST(E2eCompliance, C10_34_incoming_messages_to_a_qp_in_sqd_are_processed) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 34);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_SQD), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 3000, b.smr->lkey}}, 2), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 1000, b.smr->lkey}}, 3, IBV_SEND_SIGNALED,
                              b.dst + 5000, b.dmr->rkey),
                  0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive in SQD");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 3000u);
        auto swc = h.expect_wc(h.s[0].scq, 2, "requests acknowledged by the SQD responder");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 3000), "send into SQD");
        h.expect_mem(1, b.dst + 5000, h.read_mem(0, b.src, 1000), "write into SQD");
    });
}

SIM_TEST(E2eCompliance, C10_33_C10_37_sends_posted_in_sqd_stay_queued_until_rts) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 37);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_SQD), 0);
        const uint64_t tx = ctr(0, "transport_engine.tx_packets");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 700, b.smr->lkey}}, 5), 0);  // C10-33: accepted
        h.expect_no_wc(h.s[0].scq, kQuietNs, "send posted in SQD");
        h.expect_no_wc(h.s[1].rcq, 1000, "nothing arrives");
        EXPECT_EQ(ctr(0, "transport_engine.tx_packets"), tx) << "not executed in SQD";
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RTS), 0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "send after SQD -> RTS");
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive after SQD -> RTS");
        ASSERT_EQ(swc.size(), 1u);
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(swc[0].wr_id, 5u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 700u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 700), "payload");
    });
}

// C10-35: a multi-packet message in progress when the QP enters SQD is finished (every packet
// sent and acknowledged), and no new message starts until the QP is back in RTS.
SIM_TEST(E2eCompliance, C10_35_sqd_finishes_the_message_in_progress_and_starts_no_new_one) {
    rc_config cfg;
    cfg.mtu = 256;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint32_t big = 512 * 1024;  // 2048 packets
        bufs b = make_bufs(h, big + 4096, 35);
        const uint64_t tx = ctr(0, "transport_engine.tx_packets");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, big, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 2, IBV_SEND_SIGNALED,
                              b.dst + big, b.dmr->rkey),
                  0);
        h.sleep(0, 5'000);
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_SQD), 0);
        const uint64_t sent_at_sqd = ctr(0, "transport_engine.tx_packets") - tx;
        ASSERT_GT(sent_at_sqd, 0u);
        ASSERT_LT(sent_at_sqd, big / 256u)
            << "the first message must still be in progress when SQD is entered";
        auto wc = h.expect_wc(h.s[0].scq, 1, "message in progress completes in SQD", 20'000'000ull);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        h.expect_no_wc(h.s[0].scq, kQuietNs, "the unstarted message stays unstarted");
        EXPECT_EQ(ctr(0, "transport_engine.tx_packets") - tx, big / 256u);
        h.expect_fill(1, b.dst + big, 64, kGuardByte, "target of the unstarted write");
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RTS), 0);
        auto wc2 = h.expect_wc(h.s[0].scq, 1, "second write after RTS");
        ASSERT_EQ(wc2.size(), 1u);
        EXPECT_EQ(wc2[0].wr_id, 2u);
        EXPECT_EQ(wc2[0].status, IBV_WC_SUCCESS);
    });
}

// ------------------------------------------------------------------ 10.3.1.7 / 10.10 errors

SIM_TEST(E2eCompliance, C10_41_C10_42_C10_105_error_wr_status_then_flush_signaled_or_not) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 41);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 128, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey ^ 0x77),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 2, 0, b.dst, b.dmr->rkey), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 3, IBV_SEND_SIGNALED), 0);
        auto wc = h.expect_wc(h.s[0].scq, 3, "error then flushes");
        ASSERT_EQ(wc.size(), 3u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);  // C10-41: its specific status
        EXPECT_EQ(wc[1].wr_id, 2u);                      // C10-105: unsignaled, still completes
        EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(wc[2].wr_id, 3u);
        EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR);
        // C10-42: WRs posted after the QP entered Error are flushed too, signaled or not.
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 8, b.smr->lkey}}, 4, 0), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, 5, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        auto fl = h.expect_wc(h.s[0].scq, 2, "posted in Error");
        ASSERT_EQ(fl.size(), 2u);
        EXPECT_EQ(fl[0].wr_id, 4u);
        EXPECT_EQ(fl[0].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(fl[1].wr_id, 5u);
        EXPECT_EQ(fl[1].status, IBV_WC_WR_FLUSH_ERR);
        h.expect_no_wc(h.s[0].scq, 10'000, "each WR completes exactly once");
        h.sleep(1, 10'000);
        h.expect_fill(1, b.dst, 4096, kGuardByte, "no flushed write reached the target");
    });
}

SIM_TEST(E2eCompliance, C10_105_unsignaled_wr_completing_in_error_yields_a_completion) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 105);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 0x105, 0, b.dst,
                              b.dmr->rkey + 0x100),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "unsignaled WR in error");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 0x105u);
        EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(wc[0].qp_num, h.s[0].qp->qp_num);
    });
}

SIM_TEST(E2eCompliance, C10_137_receive_completion_error_then_later_receives_flush) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 143);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 100, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst + 1024, 1024, b.dmr->lkey}}, 2), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst + 2048, 1024, b.dmr->lkey}}, 3), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 200, b.smr->lkey}}, 9), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 3, "receive error and flushes");
        ASSERT_EQ(rwc.size(), 3u);
        EXPECT_EQ(rwc[0].wr_id, 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_LOC_LEN_ERR);
        EXPECT_EQ(rwc[1].wr_id, 2u);
        EXPECT_EQ(rwc[1].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(rwc[2].wr_id, 3u);
        EXPECT_EQ(rwc[2].status, IBV_WC_WR_FLUSH_ERR);
        auto swc = h.expect_wc(h.s[0].scq, 1, "requester");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_REM_INV_REQ_ERR);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 64, b.dmr->lkey}}, 4), 0);
        auto late = h.expect_wc(h.s[1].rcq, 1, "receive posted after the error");
        ASSERT_EQ(late.size(), 1u);
        EXPECT_EQ(late[0].wr_id, 4u);
        EXPECT_EQ(late[0].status, IBV_WC_WR_FLUSH_ERR);
        h.expect_fill(1, b.dst + 1024, 2048, kGuardByte, "flushed receive buffers");
    });
}

// C10-142, C10-143: after a completion error the HCA has moved the QP to Error on its own, and
// Query QP reports that state.
SIM_TEST(E2eCompliance, C10_142_C10_143_query_qp_reports_error_after_a_completion_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 142);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 100, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 200, b.smr->lkey}}, 9), 0);
        h.expect_wc(h.s[1].rcq, 1, "receive error");
        h.expect_wc(h.s[0].scq, 1, "send error");
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR) << "C10-142: requester QP enters Error";
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR) << "C10-143: responder QP enters Error";
    });
}

SIM_TEST(E2eCompliance, C10_141_immediate_error_does_not_affect_the_rc_qp) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 141);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        std::vector<ibv_sge> five(5, ibv_sge{b.src, 8, b.smr->lkey});  // max_send_sge is 4
        EXPECT_EQ(h.post_send(0, IBV_WR_SEND, five, 100), EINVAL);
        EXPECT_EQ(h.post_send(0, ibv_wr_opcode(0x7F), {{b.src, 8, b.smr->lkey}}, 101),
                  EINVAL);                                           // no such opcode
        EXPECT_EQ(h.post_send(0, IBV_WR_BIND_MW, {}, 102), EINVAL);  // no window to bind
        EXPECT_EQ(h.s[0].qp->sq.producer, 0u);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 77, b.smr->lkey}}, 103), 0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "the valid WR");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].wr_id, 103u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].byte_len, 77u);
        h.expect_no_wc(h.s[0].scq, 10'000, "the refused WRs were never posted");
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
    });
}

// ------------------------------------------------------------------ 10.7 / 10.8 completions

SIM_TEST(E2eCompliance, C10_90_C10_91_C10_92_signaled_and_unsignaled_completions) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 90);
        for (unsigned k = 0; k < 6; ++k)
            ASSERT_EQ(h.post_recv(1, {{b.dst + 1024 * k, 1024, b.dmr->lkey}}, 50 + k), 0);
        const unsigned flags[6] = {0, IBV_SEND_SIGNALED, 0, IBV_SEND_SIGNALED, 0, 0};
        for (unsigned k = 0; k < 6; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src + 64 * k, 64, b.smr->lkey}}, k, flags[k]), 0);
        // C10-91: every receive WR yields a CQE.
        auto rwc = h.expect_wc(h.s[1].rcq, 6, "receives");
        ASSERT_EQ(rwc.size(), 6u);
        for (unsigned k = 0; k < 6; ++k) EXPECT_EQ(rwc[k].wr_id, 50u + k);
        // C10-91/92: a CQE only for the WRs that asked for one.
        auto swc = h.expect_wc(h.s[0].scq, 2, "signaled sends");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].wr_id, 1u);
        EXPECT_EQ(swc[1].wr_id, 3u);
        // The last two are unsignaled and succeeded: no CQE, even after they are done.
        h.expect_no_wc(h.s[0].scq, kQuietNs, "unsignaled successful sends");
        EXPECT_EQ(ctr(0, "transport_engine.send_completions"), 2u);
    });
}

SIM_TEST(E2eCompliance, C10_91_all_signaled_send_queue_yields_a_cqe_per_wr) {
    rc_config cfg;
    cfg.sq_sig_all = 1;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 91);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);  // for the send
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 2), 0);  // for the write with immediate
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 10, b.smr->lkey}}, 1, 0, b.dst, b.dmr->rkey), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 10, b.smr->lkey}}, 2, 0), 0);
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE_WITH_IMM, {{b.src, 10, b.smr->lkey}}, 3, 0, b.dst, b.dmr->rkey),
            0);
        auto swc = h.expect_wc(h.s[0].scq, 3, "all signaled");
        ASSERT_EQ(swc.size(), 3u);
        for (unsigned k = 0; k < 3; ++k) {
            EXPECT_EQ(swc[k].wr_id, k + 1);
            EXPECT_EQ(swc[k].status, IBV_WC_SUCCESS);
        }
    });
}

SIM_TEST(E2eCompliance, C10_99_2_1_C10_104_C10_106_2_1_every_wr_completes_once_in_posting_order) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const unsigned n = 12;
        bufs b = make_bufs(h, n * 4096, 99);
        for (unsigned k = 0; k < n; ++k)
            ASSERT_EQ(h.post_recv(1, {{b.dst + 4096 * k, 4096, b.dmr->lkey}}, 1000 + k), 0);
        for (unsigned k = 0; k < n; ++k) {
            const uint32_t len = (k % 3 == 0) ? 4000 : 1 + 97 * k;  // big and small interleaved
            ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src + 4096 * k, len, b.smr->lkey}}, k), 0);
        }
        auto rwc = h.expect_wc(h.s[1].rcq, n, "receives");
        auto swc = h.expect_wc(h.s[0].scq, n, "signaled sends");
        ASSERT_EQ(rwc.size(), n);
        ASSERT_EQ(swc.size(), n);
        for (unsigned k = 0; k < n; ++k) {
            const uint32_t len = (k % 3 == 0) ? 4000 : 1 + 97 * k;
            EXPECT_EQ(rwc[k].wr_id, 1000u + k) << "receive completions in posting order";
            EXPECT_EQ(rwc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(rwc[k].byte_len, len);
            EXPECT_EQ(swc[k].wr_id, k);
            EXPECT_EQ(swc[k].status, IBV_WC_SUCCESS);
        }
        h.expect_no_wc(h.s[1].rcq, 10'000, "no receive completes twice");
        h.expect_no_wc(h.s[0].scq, 1000, "no send completes twice");
    });
}

SIM_TEST(E2eCompliance, C10_102_completion_goes_to_the_cq_of_the_wrs_work_queue) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 102);
        ASSERT_NE(h.s[0].scq, h.s[0].rcq);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive CQ");
        auto swc = h.expect_wc(h.s[0].scq, 1, "send CQ");
        ASSERT_EQ(rwc.size(), 1u);
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV);
        EXPECT_EQ(swc[0].opcode, IBV_WC_SEND);
        h.expect_no_wc(h.s[0].rcq, 1000, "node0 receive CQ");
        h.expect_no_wc(h.s[1].scq, 1000, "node1 send CQ");
    });
}

SIM_TEST(E2eCompliance, C10_103_a_completion_is_retrieved_only_once) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 103);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 7, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        ASSERT_EQ(ibv_wait_cq(h.s[0].scq, 10'000'000), 0);
        ibv_wc wc[4];
        ASSERT_EQ(ibv_poll_cq(h.s[0].scq, 4, wc), 1);
        EXPECT_EQ(wc[0].wr_id, 7u);
        h.sleep(0, 20'000);
        EXPECT_EQ(ibv_poll_cq(h.s[0].scq, 4, wc), 0);
        EXPECT_EQ(ibv_poll_cq(h.s[0].scq, 4, wc), 0);
    });
}

SIM_TEST(E2eCompliance, C10_107_buffers_are_not_touched_after_their_completion_is_retrieved) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint32_t len = 64 * 1024;
        bufs b = make_bufs(h, 2 * len, 107);
        const auto sent = h.read_mem(0, b.src, len);
        ASSERT_EQ(h.post_recv(1, {{b.dst, len, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, len, b.smr->lkey}}, 2), 0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "send");
        ASSERT_EQ(swc.size(), 1u);
        h.fill_mem(0, b.src, len, 0x00);  // the consumer reuses the send buffer at once
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        h.expect_mem(1, b.dst, sent, "payload is what was there before the send completed");
        h.fill_mem(1, b.dst, len, 0x5A);  // the consumer reuses the receive buffer
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, len, 0x5A, "receive buffer after its completion");
    });
}

SIM_TEST(E2eCompliance, C10_108_later_completion_releases_earlier_unsignaled_buffers) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint32_t len = 32 * 1024;
        bufs b = make_bufs(h, 2 * len, 108);
        const auto a_data = h.read_mem(0, b.src, len);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, len, b.smr->lkey}}, 1, 0, b.dst, b.dmr->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src + len, 64, b.smr->lkey}}, 2, IBV_SEND_SIGNALED,
                              b.dst + len, b.dmr->rkey),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "the signaled WR");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 2u);
        h.fill_mem(0, b.src, len, 0x00);  // reuse the unsignaled WR's buffer
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, a_data, "the earlier unsignaled write carried the original data");
        EXPECT_EQ(h.s[0].qp->sq.completed, h.s[0].qp->sq.producer);
    });
}

// ------------------------------------------------------------------ 10.2.6 / 10.8.7 CQs

SIM_TEST(E2eCompliance, C10_16_C10_111_C10_112_C10_113_C10_114_completion_notification) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // A second QP pair; node1's new QP has one CQ (on a channel) for both its queues, node0's
        // new QP shares node0's CQs with the harness QP.
        ibv_comp_channel* ch = ibv_create_comp_channel(h.s[1].ctx);
        ibv_cq* ccq = ibv_create_cq(h.s[1].ctx, 63, (void*)0xC0FFEE, ch);
        ibv_cq* idle = ibv_create_cq(h.s[1].ctx, 63, (void*)0x1D1E, ch);
        ASSERT_TRUE(ch && ccq && idle);
        ibv_qp* old0 = h.s[0].qp;
        for (unsigned i = 0; i < 2; ++i) {
            ibv_qp_init_attr a{};
            a.send_cq = i ? ccq : h.s[0].scq;
            a.recv_cq = i ? ccq : h.s[0].rcq;
            a.qp_type = IBV_QPT_RC;
            a.cap = {16, 16, 1, 1, 0};
            h.s[i].qp = ibv_create_qp(h.s[i].pd, &a);
            ASSERT_NE(h.s[i].qp, nullptr);
        }
        h.s[1].scq = h.s[1].rcq = ccq;
        ASSERT_EQ(h.to_rts(0), 0);
        ASSERT_EQ(h.to_rts(1), 0);
        bufs b = make_bufs(h, 8192, 111);
        for (unsigned k = 0; k < 4; ++k)
            ASSERT_EQ(h.post_recv(1, {{b.dst + 1024 * k, 1024, b.dmr->lkey}}, k), 0);
        ibv_cq* got = nullptr;
        void* gctx = nullptr;
        // C10-113: an entry already on the CQ does not fire a request made after it.
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 16, b.smr->lkey}}, 100), 0);
        ASSERT_EQ(ibv_wait_cq(ccq, 10'000'000), 0);
        ASSERT_EQ(ibv_req_notify_cq(ccq, 0), 0);
        EXPECT_EQ(ibv_get_cq_event(ch, &got, &gctx, kQuietNs), ETIMEDOUT) << "fired for an existing CQE";
        // C10-111/112: armed twice, then two new CQEs: exactly one event.
        ASSERT_EQ(ibv_req_notify_cq(ccq, 0), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 16, b.smr->lkey}}, 101), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 16, b.smr->lkey}}, 102), 0);
        ASSERT_EQ(ibv_get_cq_event(ch, &got, &gctx, 10'000'000), 0);
        EXPECT_EQ(got, ccq);  // C10-114: the event names its CQ
        EXPECT_EQ(gctx, (void*)0xC0FFEE);
        ibv_ack_cq_events(ccq, 1);
        h.sleep(1, kQuietNs);
        EXPECT_EQ(ibv_get_cq_event(ch, &got, &gctx, kQuietNs), ETIMEDOUT) << "a second event for one request";
        auto rwc = h.wait_wc(ccq, 3);
        ASSERT_EQ(rwc.size(), 3u);
        for (unsigned k = 0; k < 3; ++k) {
            EXPECT_EQ(rwc[k].wr_id, k);
            EXPECT_EQ(rwc[k].opcode, IBV_WC_RECV);
        }
        // Re-armed: the next CQE (a send completion of node1 on the same CQ, C10-16) fires once.
        ASSERT_EQ(ibv_req_notify_cq(ccq, 0), 0);
        const uint64_t back = h.alloc(0, 4096, 64);
        ibv_mr* bmr = h.reg(0, back, 4096);
        ASSERT_EQ(h.post_recv(0, {{back, 4096, bmr->lkey}}, 200), 0);
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND, {{b.dst, 32, b.dmr->lkey}}, 300), 0);
        ASSERT_EQ(ibv_get_cq_event(ch, &got, &gctx, 10'000'000), 0);
        EXPECT_EQ(got, ccq);
        auto swc = h.wait_wc(ccq, 1);
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].wr_id, 300u);
        EXPECT_EQ(swc[0].opcode, IBV_WC_SEND);
        EXPECT_EQ(swc[0].qp_num, h.s[1].qp->qp_num);
        // node0's CQs serve both of node0's QPs (C10-16).
        auto r0 = h.expect_wc(h.s[0].rcq, 1, "node0 receive of the new QP");
        ASSERT_EQ(r0.size(), 1u);
        EXPECT_EQ(r0[0].qp_num, h.s[0].qp->qp_num);
        EXPECT_NE(r0[0].qp_num, old0->qp_num);
        auto s0 = h.expect_wc(h.s[0].scq, 3, "node0 sends of the new QP");
        for (auto& w : s0) EXPECT_EQ(w.qp_num, h.s[0].qp->qp_num);
    });
}

SIM_TEST(E2eCompliance, C10_17_cq_overrun_is_reported_as_an_async_cq_error) {
    rc_config cfg;
    cfg.cqe = 3;  // a ring of 4 entries
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 17);
        auto cq_errors = [&] {  // CQ errors delivered to node0's context since the last call
            unsigned n = 0;
            ibv_async_event ev;
            while (ibv_get_async_event(h.s[0].ctx, &ev, 1) == 0) {
                n += ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == h.s[0].scq;
                ibv_ack_async_event(&ev);
            }
            return n;
        };
        for (unsigned k = 0; k < 4; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, k, IBV_SEND_SIGNALED,
                                  b.dst, b.dmr->rkey),
                      0);
        h.sleep(0, kQuietNs);
        EXPECT_EQ(cq_errors(), 0u) << "the CQ is full, not overrun";
        EXPECT_EQ(ctr(0, "cq_writer.overruns"), 0u);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, 4, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  0);
        h.sleep(0, kQuietNs);
        // Reported before the consumer extracts the next work completion.
        EXPECT_EQ(cq_errors(), 1u);
        EXPECT_GE(ctr(0, "cq_writer.overruns"), 1u);
    });
}

// ------------------------------------------------------------------ 10.6 memory protection

SIM_TEST(E2eCompliance, C10_9_2_1_local_mr_of_another_pd_is_a_protection_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 9);
        ibv_pd* other = ibv_alloc_pd(h.s[0].ctx);
        ibv_mr* foreign = ibv_reg_mr(other, b.src, 4096, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(foreign, nullptr);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, foreign->lkey}}, 2), 0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "send from another PD's MR");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
        h.expect_no_wc(h.s[1].rcq, 10'000, "nothing sent");
        h.expect_fill(1, b.dst, 4096, kGuardByte, "receive buffer");
    });
}

SIM_TEST(E2eCompliance, C10_54_2_1_local_reference_outside_the_mr_is_a_protection_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 54);
        ibv_mr* part = h.reg(0, b.src, 1000);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src + 900, 101, part->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst, b.dmr->rkey),
                  0);  // one byte past the region
        auto wc = h.expect_wc(h.s[0].scq, 1, "write with an SGE past the MR");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
        h.sleep(1, 10'000);
        h.expect_fill(1, b.dst, 8192, kGuardByte, "target");
    });
}

SIM_TEST(E2eCompliance, C10_54_1_1_zero_length_segments_are_not_protection_checked) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 541);
        const ibv_sge bogus{0xDEAD0000ull, 0, 0x00BADBAD};
        ASSERT_EQ(h.post_recv(1, {bogus, {b.dst, 4096, b.dmr->lkey}, bogus}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {bogus, {b.src, 100, b.smr->lkey}, bogus}, 2), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 50, b.smr->lkey}, bogus}, 3, IBV_SEND_SIGNALED,
                              b.dst + 2048, b.dmr->rkey),
                  0);
        auto swc = h.expect_wc(h.s[0].scq, 2, "sends with zero-length bogus segments");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 100u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 100), "send payload");
        h.expect_mem(1, b.dst + 2048, h.read_mem(0, b.src, 50), "write payload");
    });
}

SIM_TEST(E2eCompliance, C10_54_1_2_zero_length_rc_message_does_no_receive_checks) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ASSERT_EQ(h.post_recv(1, {{0xDEAD0000ull, 100, 0x00BADBAD}}, 1), 0);  // invalid key and address
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "zero-length receive");
        auto swc = h.expect_wc(h.s[0].scq, 1, "zero-length send");
        ASSERT_EQ(rwc.size(), 1u);
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 0u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
    });
}

SIM_TEST(E2eCompliance, C10_47_local_read_is_implicit_in_a_region_registered_without_rights) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 47);
        ibv_mr* ro = h.reg(0, b.src, 4096, 0);
        ASSERT_NE(ro, nullptr);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 1024, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 500, ro->lkey}}, 2), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 700, ro->lkey}}, 3, IBV_SEND_SIGNALED,
                              b.dst + 2048, b.dmr->rkey),
                  0);
        auto swc = h.expect_wc(h.s[0].scq, 2, "sources read through a no-rights MR");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        h.expect_wc(h.s[1].rcq, 1, "receive");
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 500), "send payload");
        h.expect_mem(1, b.dst + 2048, h.read_mem(0, b.src, 700), "write payload");
    });
}

SIM_TEST(E2eCompliance, C10_55_receive_into_mr_without_local_write_is_a_protection_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 55);
        ibv_mr* ro = h.reg(1, b.dst, 4096, IBV_ACCESS_REMOTE_READ);
        ASSERT_NE(ro, nullptr);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, ro->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_LOC_PROT_ERR);
        auto swc = h.expect_wc(h.s[0].scq, 1, "send");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_NE(swc[0].status, IBV_WC_SUCCESS);
        h.expect_fill(1, b.dst, 4096, kGuardByte, "read-only receive buffer");
    });
}

namespace {
/// One RDMA WRITE from node0 that the responder must refuse: REM_ACCESS_ERR, target untouched.
void expect_refused_write(rc_harness& h, const bufs& b, uint64_t va, uint32_t len, uint32_t rkey,
                          const std::string& what) {
    ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, len, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, va, rkey),
              0);
    auto wc = h.expect_wc(h.s[0].scq, 1, what);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << what;
    h.sleep(1, 10'000);
    h.expect_fill(1, b.dst, 8192, kGuardByte, what + ": target");
}
}  // namespace

SIM_TEST(E2eCompliance, C10_44_2_1_unregistered_remote_memory_is_not_accessed) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 44);
        expect_refused_write(h, b, b.dst, 256, 0x00FFFF00u, "write with an R_Key no region has");
    });
}

SIM_TEST(E2eCompliance, C10_56_remote_range_must_lie_inside_the_mr_to_the_byte) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 56);
        ibv_mr* small = h.reg(1, b.dst + 100, 1000);
        ASSERT_NE(small, nullptr);
        expect_refused_write(h, b, b.dst + 100 + 1000 - 99, 100, small->rkey,
                             "write ending one byte past the MR");
    });
}

SIM_TEST(E2eCompliance, C10_56_remote_range_before_the_mr_start_is_refused) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 561);
        ibv_mr* small = h.reg(1, b.dst + 100, 1000);
        ASSERT_NE(small, nullptr);
        expect_refused_write(h, b, b.dst + 99, 10, small->rkey, "write starting one byte before the MR");
    });
}

SIM_TEST(E2eCompliance, C10_56_remote_mr_of_another_pd_is_refused) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 562);
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ibv_mr* foreign = ibv_reg_mr(other, b.dst, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        ASSERT_NE(foreign, nullptr);
        expect_refused_write(h, b, b.dst, 64, foreign->rkey, "write through another PD's MR");
    });
}

SIM_TEST(E2eCompliance, C10_56_write_exactly_covering_the_mr_is_allowed) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 563);
        ibv_mr* small = h.reg(1, b.dst + 100, 1000);
        ASSERT_NE(small, nullptr);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 1000, b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst + 100, small->rkey),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "write of exactly the MR");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        h.sleep(1, 10'000);
        h.expect_mem(1, b.dst + 100, h.read_mem(0, b.src, 1000), "payload");
        h.expect_fill(1, b.dst, 100, kGuardByte, "before the MR");
        h.expect_fill(1, b.dst + 1100, 8192 - 1100, kGuardByte, "after the MR");
    });
}

SIM_TEST(E2eCompliance, C10_57_remote_write_needs_the_mr_remote_write_right) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 57);
        ibv_mr* nowrite = h.reg(1, b.dst, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        ASSERT_NE(nowrite, nullptr);
        expect_refused_write(h, b, b.dst, 64, nowrite->rkey, "write into an MR without remote write");
    });
}

SIM_TEST(E2eCompliance, C10_88_rdma_write_needs_remote_write_enabled_on_the_target_qp) {
    rc_config cfg;
    cfg.qp_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 88);
        expect_refused_write(h, b, b.dst, 64, b.dmr->rkey, "write to a QP without remote write");
    });
}

SIM_TEST(E2eCompliance, C10_58_C10_60_deregistered_region_fails_overlapping_one_still_works) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 58);
        ibv_mr* a = h.reg(0, b.src, 4096);
        ibv_mr* c = h.reg(0, b.src + 1000, 4096);  // overlaps a
        ASSERT_TRUE(a && c);
        const uint32_t dead = a->lkey;
        ASSERT_EQ(ibv_dereg_mr(a), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src + 1000, 3000, c->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst, b.dmr->rkey),
                  0);
        auto ok = h.expect_wc(h.s[0].scq, 1, "through the overlapping region");
        ASSERT_EQ(ok.size(), 1u);
        EXPECT_EQ(ok[0].status, IBV_WC_SUCCESS);  // C10-58
        h.sleep(1, 10'000);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src + 1000, 3000), "payload");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, dead}}, 2, IBV_SEND_SIGNALED, b.dst + 4096,
                              b.dmr->rkey),
                  0);
        auto bad = h.expect_wc(h.s[0].scq, 1, "through the deregistered region");
        ASSERT_EQ(bad.size(), 1u);
        EXPECT_EQ(bad[0].status, IBV_WC_LOC_PROT_ERR);  // C10-60
        h.sleep(1, 10'000);
        h.expect_fill(1, b.dst + 4096, 4096, kGuardByte, "target of the refused write");
    });
}

SIM_TEST(E2eCompliance, C10_60_remote_access_to_a_deregistered_region_fails) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 60);
        const uint32_t rkey = b.dmr->rkey;
        ASSERT_EQ(ibv_dereg_mr(b.dmr), 0);
        expect_refused_write(h, b, b.dst, 64, rkey, "write with the R_Key of a deregistered region");
    });
}

SIM_TEST(E2eCompliance, C10_49_overlapping_registrations_are_each_usable) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 49);
        ibv_mr* x = h.reg(1, b.dst, 6000);
        ibv_mr* y = h.reg(1, b.dst + 2000, 6000);
        ASSERT_TRUE(x && y);
        EXPECT_NE(x->rkey, y->rkey);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 1000, b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst + 3000, x->rkey),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src + 1000, 1000, b.smr->lkey}}, 2, IBV_SEND_SIGNALED,
                              b.dst + 4000, y->rkey),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "writes through both registrations");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
        h.sleep(1, 10'000);
        h.expect_mem(1, b.dst + 3000, h.read_mem(0, b.src, 2000), "payload in the overlap");
    });
}

// ------------------------------------------------------------------ 10.7 operations

SIM_TEST(E2eCompliance, C10_80_send_receive_on_every_supported_transport) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 4096, 80);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 1234, b.smr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "RC receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 1234u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 1234), "RC send payload");
        // UC and UD (QUERY_HCA reports both): a new QP pair of each type takes the harness's place.
        uint64_t at = 4096;
        for (ibv_qp_type t : {IBV_QPT_UC, IBV_QPT_UD}) {
            for (unsigned i = 0; i < 2; ++i) {
                ibv_qp_init_attr a{};
                a.send_cq = h.s[i].scq;
                a.recv_cq = h.s[i].rcq;
                a.qp_type = t;
                a.cap = {4, 4, 1, 1, 0};
                h.s[i].qp = ibv_create_qp(h.s[i].pd, &a);
                ASSERT_NE(h.s[i].qp, nullptr) << "type " << int(t) << ": errno " << errno;
            }
            for (unsigned i = 0; i < 2; ++i) ASSERT_EQ(h.connect(i, IBV_QPS_RTS), 0) << "type " << int(t);
            ASSERT_EQ(h.post_recv(1, {{b.dst + at, 4096, b.dmr->lkey}}, 10 + t), 0);
            const bool ud = t == IBV_QPT_UD;
            ASSERT_EQ(ud ? h.post_ud(0, h.ah_to_peer(0), {{b.src + at, 1234, b.smr->lkey}}, 20 + t)
                         : h.post_send(0, IBV_WR_SEND, {{b.src + at, 1234, b.smr->lkey}}, 20 + t),
                      0);
            auto swc = h.expect_wc(h.s[0].scq, 1, "send");
            ASSERT_EQ(swc.size(), 1u);
            EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
            auto r = h.expect_wc(h.s[1].rcq, 1, "receive");
            ASSERT_EQ(r.size(), 1u);
            EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
            EXPECT_EQ(r[0].byte_len, ud ? 40u + 1234u : 1234u) << "UD: the GRH area counts";
            EXPECT_EQ(r[0].src_qp, h.s[0].qp->qp_num);
            h.expect_mem(1, b.dst + at + (ud ? 40 : 0), h.read_mem(0, b.src + at, 1234), "payload");
            at += 4096;
        }
    });
}

SIM_TEST(E2eCompliance, C10_82_rc_messages_are_segmented_and_reassembled) {
    rc_config cfg;
    cfg.mtu = 256;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint32_t len = 10000;  // 40 packets at MTU 256
        bufs b = make_bufs(h, 2 * 16384, 82);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 16384, b.dmr->lkey}}, 1), 0);
        uint64_t tx = ctr(0, "transport_engine.tx_packets");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, len, b.smr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "reassembled send");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, len);
        h.expect_wc(h.s[0].scq, 1, "send");
        EXPECT_EQ(ctr(0, "transport_engine.tx_packets") - tx, 40u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, len), "send payload");
        tx = ctr(0, "transport_engine.tx_packets");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, len, b.smr->lkey}}, 3, IBV_SEND_SIGNALED,
                              b.dst + 16384, b.dmr->rkey),
                  0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "segmented write");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(0, "transport_engine.tx_packets") - tx, 40u);
        h.sleep(1, 10'000);
        h.expect_mem(1, b.dst + 16384, h.read_mem(0, b.src, len), "write payload");
    });
}

SIM_TEST(E2eCompliance, C10_95_gather_lists_for_send_and_rdma_write) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 4096, 95);
        std::vector<ibv_sge> g = {{b.src + 4000, 300, b.smr->lkey},
                                  {b.src + 11, 7, b.smr->lkey},
                                  {b.src + 2 * 4096 + 5, 2000, b.smr->lkey},
                                  {b.src + 9000, 1, b.smr->lkey}};
        std::vector<uint8_t> expect;
        for (auto& s : g) {
            auto v = h.read_mem(0, s.addr, s.length);
            expect.insert(expect.end(), v.begin(), v.end());
        }
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, g, 2), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, g, 3, IBV_SEND_SIGNALED, b.dst + 5000, b.dmr->rkey), 0);
        auto swc = h.expect_wc(h.s[0].scq, 2, "gathered send and write");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].byte_len, expect.size());
        h.sleep(1, 10'000);
        h.expect_mem(1, b.dst, expect, "gathered send");
        h.expect_mem(1, b.dst + 5000, expect, "gathered write");
    });
}

// ------------------------------------------------------------------ 10.9 partitioning

SIM_TEST(E2eCompliance, C10_115_C10_121_C10_123_default_pkey_table) {
    rc_harness h;
    h.run([](rc_harness& h) {
        for (unsigned n = 0; n < 2; ++n) {
            pkey_checker& pk = pkeys(h, n);
            const unsigned len = pk.table_len;
            EXPECT_GE(len, 1u);
            EXPECT_LE(len, 65535u);
            ibv_port_attr pa{};
            ASSERT_EQ(ibv_query_port(h.s[n].ctx, 1, &pa), 0);
            EXPECT_EQ(pa.pkey_tbl_len, len);
            EXPECT_EQ(pk.pkey(0), 0xFFFF) << "entry 0 is the default P_Key";
            for (unsigned i = 1; i < len; ++i)
                EXPECT_EQ(pk.pkey(i) & 0x7FFF, 0) << "entry " << i << " invalid";
        }
        // QPs at index 0 talk in the default partition.
        bufs b = make_bufs(h, 4096, 115);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 2), 0);
        EXPECT_EQ(h.expect_wc(h.s[1].rcq, 1, "default partition").size(), 1u);
        EXPECT_EQ(ctr(1, "pkey_checker.violations"), 0u);
        EXPECT_GE(ctr(1, "pkey_checker.checked"), 1u);
    });
}

namespace {
/// node0 sends one 64-byte message: it must be dropped at node1 for a P_Key mismatch.
void expect_pkey_drop(rc_harness& h, const bufs& b, const std::string& what) {
    const uint64_t viol = ctr(1, "pkey_checker.violations");
    const uint64_t acks = ctr(1, "transport_engine.acks_sent") + ctr(1, "transport_engine.naks_sent") +
                          ctr(1, "transport_engine.rnr_naks_sent");
    const uint64_t rx = ctr(1, "transport_engine.rx_packets");
    ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 0xD0), 0);
    h.expect_no_wc(h.s[0].scq, kQuietNs, what + ": no ACK for a dropped packet");
    h.expect_no_wc(h.s[1].rcq, 1000, what + ": receiver");
    EXPECT_EQ(ctr(1, "pkey_checker.violations"), viol + 1) << what;
    EXPECT_EQ(ctr(1, "transport_engine.acks_sent") + ctr(1, "transport_engine.naks_sent") +
                  ctr(1, "transport_engine.rnr_naks_sent"),
              acks)
        << what;
    EXPECT_EQ(ctr(1, "transport_engine.rx_packets"), rx) << what;
    h.expect_fill(1, b.dst, 4096, kGuardByte, what + ": receive buffer");
}
void expect_delivered(rc_harness& h, const bufs& b, uint64_t id, const std::string& what) {
    ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, id), 0);
    auto rwc = h.expect_wc(h.s[1].rcq, 1, what);
    ASSERT_EQ(rwc.size(), 1u);
    EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
    auto swc = h.expect_wc(h.s[0].scq, 1, what + " (sender)");
    ASSERT_EQ(swc.size(), 1u);
    EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
}
}  // namespace

SIM_TEST(E2eCompliance, C10_119_C10_124_C10_128_mismatched_pkey_is_dropped_without_ack_and_counted) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 119);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        // C10-128: the CI answers a table change with success or failure.
        EXPECT_EQ(set_pkey(h, 1, 0, 0x8001), hw::CMD_OK);
        EXPECT_EQ(set_pkey(h, 1, pkeys(h, 1).table_len, 0x8001), hw::CMD_BAD_PARAM);
        EXPECT_EQ(pkeys(h, 1).pkey(0), 0x8001);
        expect_pkey_drop(h, b, "0xFFFF against 0x8001");
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS) << "no other effect";
    });
}

SIM_TEST(E2eCompliance, C10_124_limited_member_matches_full_member_but_not_limited) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // The rule itself (10.9.3).
        EXPECT_TRUE(pkey_checker::match(0xFFFF, 0xFFFF));
        EXPECT_TRUE(pkey_checker::match(0x7FFF, 0xFFFF));
        EXPECT_TRUE(pkey_checker::match(0xFFFF, 0x7FFF));
        EXPECT_FALSE(pkey_checker::match(0x7FFF, 0x7FFF));
        EXPECT_FALSE(pkey_checker::match(0x8001, 0x8002));
        EXPECT_TRUE(pkey_checker::match(0x8123, 0x0123));
        bufs b = make_bufs(h, 4096, 124);
        for (unsigned k = 0; k < 2; ++k) ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, k), 0);
        ASSERT_EQ(set_pkey(h, 1, 0, 0x7FFF), hw::CMD_OK);  // node1 limited, node0 full: match
        expect_delivered(h, b, 1, "full member to limited member");
        h.fill_mem(1, b.dst, 4096, kGuardByte);
        ASSERT_EQ(set_pkey(h, 0, 0, 0x7FFF), hw::CMD_OK);  // both limited: no match
        expect_pkey_drop(h, b, "limited to limited");
    });
}

SIM_TEST(E2eCompliance, C10_116_pkey_with_zero_low_bits_is_invalid) {
    rc_harness h;
    h.run([](rc_harness& h) {
        EXPECT_FALSE(pkey_checker::match(0x8000, 0x8000));
        EXPECT_FALSE(pkey_checker::match(0x0000, 0x0000));
        EXPECT_FALSE(pkey_checker::match(0x8000, 0xFFFF));
        bufs b = make_bufs(h, 4096, 116);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(set_pkey(h, 1, 0, 0x8000), hw::CMD_OK);  // entry 0 invalidated
        expect_pkey_drop(h, b, "to an invalidated entry");
    });
}

SIM_TEST(E2eCompliance, C10_129_updated_pkey_table_governs_subsequent_packets) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 129);
        for (unsigned k = 0; k < 2; ++k) ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, k), 0);
        expect_delivered(h, b, 1, "before the change");
        h.fill_mem(1, b.dst, 4096, kGuardByte);
        ASSERT_EQ(set_pkey(h, 1, 0, 0x8042), hw::CMD_OK);
        expect_pkey_drop(h, b, "after the change");
    });
}

SIM_TEST(E2eCompliance, C10_126_C10_127_packets_carry_and_are_checked_against_the_qp_pkey) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 126);
        for (unsigned n = 0; n < 2; ++n) ASSERT_EQ(set_pkey(h, n, 1, 0x8005), hw::CMD_OK);
        // Both QPs at index 1: node0's packets carry 0x8005 and node1 checks against 0x8005.
        ASSERT_EQ(reconnect(h, 1, IBV_QPS_RTR, 1), 0);
        ASSERT_EQ(reconnect(h, 0, IBV_QPS_RTS, 1), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        expect_delivered(h, b, 1, "both at index 1");
        EXPECT_EQ(ctr(1, "pkey_checker.violations"), 0u);
        // node1's QP back at index 0 (0xFFFF): 0x8005 is still in node1's table (index 1), but
        // the packet is checked against the QP's own P_Key and dropped.
        h.fill_mem(1, b.dst, 4096, kGuardByte);
        ASSERT_EQ(reconnect(h, 1, IBV_QPS_RTR, 0), 0);
        ASSERT_EQ(reconnect(h, 0, IBV_QPS_RTS, 1), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 2), 0);
        expect_pkey_drop(h, b, "0x8005 to a QP bound to 0xFFFF");
    });
}
