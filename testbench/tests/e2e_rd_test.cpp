// Reliable datagram end to end (IBA 10.2.2.2, 10.2.7, 10.2.8, 10.3.1, 10.10.3.2): two nodes back
// to back, each with a reliable datagram domain, EE contexts connected pairwise and RD QPs that
// send through them. Test names carry the compliance IDs they assert.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <fstream>
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

constexpr uint32_t kQkey = 0x11112222;

/// Moves an EE context to `upto` towards `dest_eecn` at `dlid`, receiving from `rq_psn`, sending
/// from `sq_psn` (path MTU `mtu`, P_Key table entry `pkey_index`).
int connect_eec(ibv_eec* e, ibv_qp_state upto, uint32_t dest_eecn, uint16_t dlid, uint32_t rq_psn,
                uint32_t sq_psn, uint8_t timeout = 14, uint8_t retry_cnt = 7, ibv_mtu mtu = IBV_MTU_1024,
                uint16_t pkey_index = 0) {
    ibv_eec_attr a{};
    a.eec_state = IBV_QPS_INIT;
    a.pkey_index = pkey_index;
    a.port_num = 1;
    if (int rc = ibv_modify_eec(e, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT)) return rc;
    if (upto == IBV_QPS_INIT) return 0;
    a = ibv_eec_attr{};
    a.eec_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.ah_attr.dlid = dlid;
    a.ah_attr.port_num = 1;
    a.dest_eecn = dest_eecn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 1;
    if (int rc = ibv_modify_eec(e, &a,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return rc;
    if (upto == IBV_QPS_RTR) return 0;
    a = ibv_eec_attr{};
    a.eec_state = IBV_QPS_RTS;
    a.sq_psn = sq_psn;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    return ibv_modify_eec(e, &a,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

/// An RD QP of `rdd` on node i, taken to RTS with Q_Key `qkey`.
ibv_qp* make_rd_qp(rc_harness& h, unsigned i, ibv_rdd* rdd, ibv_cq* cq, uint32_t qkey = kQkey) {
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = IBV_QPT_RD;
    a.rdd = rdd;
    a.cap.max_send_wr = 32;
    a.cap.max_recv_wr = 32;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 2;
    ibv_qp* qp = ibv_create_qp(h.s[i].pd, &a);
    EXPECT_NE(qp, nullptr) << "RD QP, errno " << errno;
    if (!qp) return nullptr;
    ibv_qp_attr m{};
    m.qp_state = IBV_QPS_INIT;
    m.port_num = 1;
    m.qkey = qkey;
    m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    EXPECT_EQ(ibv_modify_qp(
                  qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS),
              0);
    m = ibv_qp_attr{};
    m.qp_state = IBV_QPS_RTR;
    EXPECT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE), 0);
    m.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(qp, &m, IBV_QP_STATE), 0);
    return qp;
}

/// Per node: a domain, an EE context connected to the other node's, two RD QPs, one CQ.
struct rd_side {
    ibv_rdd* rdd = nullptr;
    ibv_eec* eec = nullptr;
    ibv_cq* cq = nullptr;
    ibv_qp* qp[2] = {};
};
struct rd_pair {
    rd_side s[2];
};

rd_pair make_rd(rc_harness& h) {
    rd_pair p;
    for (unsigned i = 0; i < 2; ++i) {
        p.s[i].rdd = ibv_alloc_rdd(h.s[i].ctx);
        EXPECT_NE(p.s[i].rdd, nullptr) << "ibv_alloc_rdd, errno " << errno;
        p.s[i].eec = ibv_create_eec(p.s[i].rdd);
        EXPECT_NE(p.s[i].eec, nullptr) << "ibv_create_eec, errno " << errno;
        p.s[i].cq = ibv_create_cq(h.s[i].ctx, 128);
        for (int q = 0; q < 2; ++q) p.s[i].qp[q] = make_rd_qp(h, i, p.s[i].rdd, p.s[i].cq);
    }
    if (!p.s[0].eec || !p.s[1].eec) return p;
    EXPECT_EQ(connect_eec(p.s[0].eec, IBV_QPS_RTS, p.s[1].eec->eecn, h.s[1].lid, 0x500, 0x700), 0);
    EXPECT_EQ(connect_eec(p.s[1].eec, IBV_QPS_RTS, p.s[0].eec->eecn, h.s[0].lid, 0x700, 0x500), 0);
    return p;
}

/// A registered buffer of n bytes on node i, filled with `fill` (atomics allowed).
using buf = reg_buf;
buf make_buf(rc_harness& h, unsigned i, size_t n, uint8_t fill = kGuardByte) {
    return make_reg_buf(h, i, n, fill, nullptr, kTargetAccess | IBV_ACCESS_REMOTE_ATOMIC);
}

int post_rd(ibv_qp* qp, ibv_eec* eec, uint32_t remote_qpn, ibv_wr_opcode op, uint64_t src, uint32_t len,
            uint32_t lkey, uint64_t wr_id, uint32_t qkey = kQkey, uint64_t remote = 0, uint32_t rkey = 0) {
    ibv_sge sge{src, len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.rd.eec = eec;
    wr.rd.remote_qpn = remote_qpn;
    wr.rd.remote_qkey = qkey;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

ibv_qp_state qp_state(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
    return a.qp_state;
}

ibv_qp_state eec_state(ibv_eec* e) {
    ibv_eec_attr a{};
    EXPECT_EQ(ibv_query_eec(e, &a), 0);
    return a.eec_state;
}

}  // namespace

// ---------------------------------------------------------------- data transfer

SIM_TEST(E2eRd,
         o10_4_o10_38_o10_18_o10_16_a_multi_packet_send_through_an_ee_context_lands_once_with_its_source) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        EXPECT_GT(da.max_ee, 0) << "Query HCA reports RD";
        EXPECT_GT(da.max_rdd, 0);
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[1]);
        buf d = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 8192, 0x5C);
        ASSERT_EQ(post_recv_on(p.s[1].qp[1], d.va, 8192, d.mr->lkey, 77), 0);
        // 5000 bytes over a 1024-byte path MTU: five packets, segmented and reassembled (o10-38).
        ASSERT_EQ(
            post_rd(p.s[0].qp[0], p.s[0].eec, p.s[1].qp[1]->qp_num, IBV_WR_SEND, s.va, 5000, s.mr->lkey, 1),
            0);
        const ibv_wc sc = one_wc(h, p.s[0].cq, "send");
        EXPECT_EQ(sc.status, IBV_WC_SUCCESS);
        EXPECT_EQ(sc.wr_id, 1u);
        const ibv_wc r = one_wc(h, p.s[1].cq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.wr_id, 77u);
        EXPECT_EQ(r.byte_len, 5000u);
        EXPECT_EQ(r.qp_num, p.s[1].qp[1]->qp_num);
        EXPECT_EQ(r.src_qp, p.s[0].qp[0]->qp_num) << "the datagram's source QP";
        h.expect_fill(1, d.va, 5000, 0x5C, "payload");
        h.expect_fill(1, d.va + 5000, 8192 - 5000, kGuardByte, "beyond");
        // The EE contexts' PSNs moved by the five packets (the responder's too).
        ibv_eec_attr a{};
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x705u);
        ASSERT_EQ(ibv_query_eec(p.s[1].eec, &a), 0);
        EXPECT_EQ(a.rq_psn, 0x705u);
        EXPECT_EQ(ctr(1, "transport_engine.rd_dropped"), 0u);
    });
}

SIM_TEST(E2eRd, o10_52_o10_53_two_qps_share_an_ee_context_and_each_completes_in_posting_order) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[0].qp[1] && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 64 * 1024);
        buf s = make_buf(h, 0, 16384, 0);
        for (int i = 0; i < 8; ++i) h.fill_mem(0, s.va + i * 1024, 1024, uint8_t(0x10 + i));
        for (int i = 0; i < 8; ++i)
            ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va + i * 4096, 4096, d.mr->lkey, 100 + i), 0);
        // Both QPs of node 0 send four messages each to one QP of node 1, interleaved, through
        // the one EE context: the context carries one message at a time, each QP's complete in
        // the order posted (o10-52), the receiver's in the order they arrive from each (o10-53).
        for (int i = 0; i < 4; ++i)
            for (int q = 0; q < 2; ++q)
                ASSERT_EQ(post_rd(p.s[0].qp[q], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND,
                                  s.va + (q * 4 + i) * 1024, 1500, s.mr->lkey, uint64_t(q * 10 + i)),
                          0);
        const auto sc = h.expect_wc(p.s[0].cq, 8, "sends");
        std::vector<uint64_t> order[2];
        for (const ibv_wc& w : sc) {
            EXPECT_EQ(w.status, IBV_WC_SUCCESS);
            order[w.qp_num == p.s[0].qp[1]->qp_num].push_back(w.wr_id);
        }
        EXPECT_EQ(order[0], (std::vector<uint64_t>{0, 1, 2, 3}));
        EXPECT_EQ(order[1], (std::vector<uint64_t>{10, 11, 12, 13}));
        const auto rc = h.expect_wc(p.s[1].cq, 8, "receives");
        std::vector<uint32_t> last_from(2, 0);
        for (size_t k = 0; k < rc.size(); ++k) {
            EXPECT_EQ(rc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(rc[k].wr_id, 100 + k) << "receive WRs complete in posting order";
            EXPECT_EQ(rc[k].byte_len, 1500u);
            // Which message landed in receive buffer k: its first byte names it.
            const uint8_t tag = h.read_mem(1, d.va + k * 4096, 1)[0];
            const unsigned q = rc[k].src_qp == p.s[0].qp[1]->qp_num;
            EXPECT_EQ(unsigned(tag - 0x10) / 4, q) << "the message came from the QP the CQE names";
            EXPECT_GE(uint32_t(tag), last_from[q]) << "one QP's messages arrive in order";
            last_from[q] = tag;
        }
    });
}

SIM_TEST(E2eRd, o10_39_o10_45_rdma_write_read_and_atomics_on_rd_qps) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        buf t = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 8192, 0x6A);
        buf back = make_buf(h, 0, 8192, 0);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va, 3000, s.mr->lkey, 1, kQkey,
                          t.va, t.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "write").status, IBV_WC_SUCCESS);
        h.expect_fill(1, t.va, 3000, 0x6A, "written");
        h.expect_fill(1, t.va + 3000, 8192 - 3000, kGuardByte, "beyond");
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_READ, back.va, 3000, back.mr->lkey, 2,
                          kQkey, t.va, t.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "read").status, IBV_WC_SUCCESS);
        h.expect_fill(0, back.va, 3000, 0x6A, "read back");
        // Fetch and add 1 on the word 0x6A6A...: the original comes back, the word grows by one.
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_ATOMIC_FETCH_AND_ADD, back.va + 4096, 8,
                          back.mr->lkey, 3, kQkey, t.va, t.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "fetch and add").status, IBV_WC_SUCCESS);
        EXPECT_EQ(h.read_mem(0, back.va + 4096, 8), std::vector<uint8_t>(8, 0x6A));
        EXPECT_EQ(h.read_mem(1, t.va, 1)[0], 0x6A + 1);
        h.expect_no_wc(p.s[1].cq, kQuietNs, "no receive WQE used");
    });
}

// ---------------------------------------------------------------- Q_Keys, domains, states

SIM_TEST(E2eRd, o10_3_o10_61_o10_63_a_qkey_mismatch_is_naked_and_stops_the_senders_send_queue) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 5), 0);
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey,
                          1, 0x1234),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "send").status, IBV_WC_REM_INV_RD_REQ_ERR);
        EXPECT_EQ(qp_state(p.s[0].qp[0]), IBV_QPS_SQE) << "o10-61: the send queue stops";
        h.expect_no_wc(p.s[1].cq, kQuietNs, "the receive WQE stays");
        h.expect_fill(1, d.va, 4096, kGuardByte, "nothing placed");
        EXPECT_EQ(eec_state(p.s[0].eec), IBV_QPS_RTS) << "o10-63: the EE contexts go on";
        EXPECT_EQ(eec_state(p.s[1].eec), IBV_QPS_RTS);
        // The other QP sends through the same EE context with the right Q_Key: it lands.
        ASSERT_EQ(
            post_rd(p.s[0].qp[1], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey, 2), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "send").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, p.s[1].cq, "receive").wr_id, 5u);
    });
}

SIM_TEST(E2eRd, o10_8_an_ee_context_of_another_domain_is_a_local_rdd_violation) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ibv_rdd* other = ibv_alloc_rdd(h.s[0].ctx);
        ASSERT_NE(other, nullptr) << "o10-9: a second domain";
        ibv_eec* foreign = ibv_create_eec(other);
        ASSERT_NE(foreign, nullptr);
        ASSERT_EQ(connect_eec(foreign, IBV_QPS_RTS, p.s[1].eec->eecn, h.s[1].lid, 0, 0), 0);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 5), 0);
        ASSERT_EQ(post_rd(p.s[0].qp[0], foreign, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey, 1),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "send").status, IBV_WC_LOC_RDD_VIOL_ERR);
        h.expect_no_wc(p.s[1].cq, kQuietNs, "the target receive queue is untouched");
        EXPECT_EQ(ibv_dealloc_rdd(other), EBUSY) << "o10-10: the EE context is in it";
        ASSERT_EQ(ibv_destroy_eec(foreign), 0);
        EXPECT_EQ(ibv_dealloc_rdd(other), 0);
    });
}

SIM_TEST(E2eRd, o10_12_o10_15_o10_17_o10_21_a_wr_naming_an_ee_context_not_in_rts_completes_in_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        buf s = make_buf(h, 0, 4096, 0x42);
        const ibv_qp_state states[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_ERR};
        for (int i = 0; i < 4; ++i) {
            ibv_eec* e = ibv_create_eec(p.s[0].rdd);
            ASSERT_NE(e, nullptr);
            if (states[i] != IBV_QPS_RESET) {
                const ibv_qp_state upto = states[i] == IBV_QPS_ERR ? IBV_QPS_RTS : states[i];
                ASSERT_EQ(connect_eec(e, upto, p.s[1].eec->eecn, h.s[1].lid, 0, 0), 0);
            }
            if (states[i] == IBV_QPS_ERR) {  // o10-21: an EE context in Error
                ibv_eec_attr a{};
                a.eec_state = IBV_QPS_ERR;
                ASSERT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE), 0);
            }
            ibv_qp* qp = make_rd_qp(h, 0, p.s[0].rdd, p.s[0].cq);
            ASSERT_EQ(post_rd(qp, e, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey, 1), 0);
            const ibv_wc w = one_wc(h, p.s[0].cq, "send");
            EXPECT_EQ(w.status, IBV_WC_INV_EEC_STATE_ERR) << "EE context in state " << states[i];
            EXPECT_EQ(qp_state(qp), IBV_QPS_SQE);
            EXPECT_EQ(eec_state(e), states[i]) << "the EE context's state stays";
        }
    });
}

SIM_TEST(E2eRd, o10_13_o10_14_requests_to_an_ee_context_in_reset_or_init_are_dropped_silently) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 5), 0);
        for (ibv_qp_state st : {IBV_QPS_RESET, IBV_QPS_INIT}) {
            // The far end's EE context goes back to `st`: what arrives for it is dropped.
            ibv_eec_attr a{};
            a.eec_state = IBV_QPS_RESET;
            ASSERT_EQ(ibv_modify_eec(p.s[1].eec, &a, IBV_QP_STATE), 0);
            if (st == IBV_QPS_INIT) {
                ASSERT_EQ(connect_eec(p.s[1].eec, IBV_QPS_INIT, p.s[0].eec->eecn, h.s[0].lid, 0, 0), 0);
            }
            const uint64_t before = ctr(1, "transport_engine.rd_dropped");
            ASSERT_EQ(
                post_rd(p.s[0].qp[0], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey, 1),
                0);
            h.sleep(0, 50'000);
            EXPECT_GT(ctr(1, "transport_engine.rd_dropped"), before) << "dropped in " << st;
            h.expect_no_wc(p.s[1].cq, kQuietNs, "nothing delivered");
            // The sender's message times out after its retries (timeout 14: 67 ms each) - not
            // waited for here: reset it for the next round.
            ASSERT_EQ(to_state(p.s[0].qp[0], IBV_QPS_RESET), 0);
            ibv_qp_attr m{};
            m.qp_state = IBV_QPS_INIT;
            m.port_num = 1;
            m.qkey = kQkey;
            ASSERT_EQ(
                ibv_modify_qp(p.s[0].qp[0], &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY),
                0);
            ASSERT_EQ(to_state(p.s[0].qp[0], IBV_QPS_RTR), 0);
            ASSERT_EQ(to_state(p.s[0].qp[0], IBV_QPS_RTS), 0);
        }
        h.expect_fill(1, d.va, 4096, kGuardByte, "nothing placed");
    });
}

SIM_TEST(E2eRd, o10_11_o10_19_o10_20_ee_context_states_follow_figure_126_and_sqd_holds_new_messages) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ibv_eec* e = ibv_create_eec(p.s[0].rdd);
        ASSERT_NE(e, nullptr);
        ibv_eec_attr a{};
        // Illegal arcs are refused: Reset -> RTR, Reset -> RTS, and SQEr exists for no EE context.
        a.eec_state = IBV_QPS_RTR;
        EXPECT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE), EINVAL);
        a.eec_state = IBV_QPS_SQE;
        EXPECT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE), EINVAL);
        // Reset -> Init needs the P_Key index and port (o10-58).
        a.eec_state = IBV_QPS_INIT;
        EXPECT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE), EINVAL);
        a.pkey_index = 200;
        a.port_num = 1;
        EXPECT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL)
            << "no such P_Key table entry";
        EXPECT_EQ(eec_state(e), IBV_QPS_RESET);
        ASSERT_EQ(ibv_destroy_eec(e), 0);
        // SQD: messages posted meanwhile wait (o10-20); arriving ones are still processed (o10-19).
        buf d = make_buf(h, 1, 4096), d0 = make_buf(h, 0, 4096);
        buf s = make_buf(h, 0, 4096, 0x42), s1 = make_buf(h, 1, 4096, 0x24);
        a = ibv_eec_attr{};
        a.eec_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_eec(p.s[0].eec, &a, IBV_QP_STATE), 0);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 5), 0);
        ASSERT_EQ(
            post_rd(p.s[0].qp[0], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey, 1), 0);
        h.expect_no_wc(p.s[0].cq, kQuietNs, "held in SQD");
        ASSERT_EQ(post_recv_on(p.s[0].qp[1], d0.va, 4096, d0.mr->lkey, 9), 0);
        ASSERT_EQ(
            post_rd(p.s[1].qp[1], p.s[1].eec, p.s[0].qp[1]->qp_num, IBV_WR_SEND, s1.va, 32, s1.mr->lkey, 3),
            0);
        const ibv_wc in = one_wc(h, p.s[0].cq, "a message arriving at the EE context in SQD");
        EXPECT_EQ(in.wr_id, 9u);
        EXPECT_EQ(in.status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, p.s[1].cq, "its send").status, IBV_WC_SUCCESS);
        a.eec_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_eec(p.s[0].eec, &a, IBV_QP_STATE), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "sent once back in RTS").wr_id, 1u);
        EXPECT_EQ(one_wc(h, p.s[1].cq, "received").wr_id, 5u);
        h.expect_fill(1, d.va, 64, 0x42, "payload");
    });
}

SIM_TEST(E2eRd,
         o10_1_o10_6_o10_7_o10_9_o10_10_rd_objects_belong_to_one_domain_and_wrs_must_name_an_ee_context) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_rdd* a = ibv_alloc_rdd(h.s[0].ctx);
        ibv_rdd* b = ibv_alloc_rdd(h.s[0].ctx);
        ASSERT_TRUE(a && b) << "o10-9: at least two domains";
        EXPECT_NE(a->handle, b->handle);
        ibv_cq* cq = ibv_create_cq(h.s[0].ctx, 16);
        ibv_qp* q1 = make_rd_qp(h, 0, a, cq);
        ibv_qp* q2 = make_rd_qp(h, 0, a, cq);
        ibv_eec* e1 = ibv_create_eec(a);
        ibv_eec* e2 = ibv_create_eec(a);
        ASSERT_TRUE(q1 && q2 && e1 && e2) << "o10-6, o10-7: many QPs and EE contexts share a domain";
        EXPECT_EQ(e1->rdd, a);
        ibv_qp_init_attr qa{};
        qa.send_cq = qa.recv_cq = cq;
        qa.qp_type = IBV_QPT_RD;
        qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
        qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
        errno = 0;
        EXPECT_EQ(ibv_create_qp(h.s[0].pd, &qa), nullptr) << "an RD QP needs its domain";
        EXPECT_EQ(errno, EINVAL);
        // o10-1: every RD WR names an EE context.
        buf s = make_buf(h, 0, 4096, 1);
        EXPECT_EQ(post_rd(q1, nullptr, 5, IBV_WR_SEND, s.va, 8, s.mr->lkey, 1), EINVAL);
        // o10-10: the domain stays while QPs or EE contexts use it.
        EXPECT_EQ(ibv_dealloc_rdd(a), EBUSY);
        ASSERT_EQ(ibv_destroy_qp(q1), 0);
        ASSERT_EQ(ibv_destroy_qp(q2), 0);
        EXPECT_EQ(ibv_dealloc_rdd(a), EBUSY);
        ASSERT_EQ(ibv_destroy_eec(e1), 0);
        ASSERT_EQ(ibv_destroy_eec(e2), 0);
        EXPECT_EQ(ibv_dealloc_rdd(a), 0);
        EXPECT_EQ(ibv_dealloc_rdd(b), 0);
        EXPECT_EQ(ibv_destroy_cq(cq), 0);
    });
}

SIM_TEST(E2eRd, o10_62_a_receive_error_completes_that_wr_in_error_and_later_receive_wrs_are_unaffected) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[0].qp[1] && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 4096, 0x42);
        // A 100-byte receive buffer for a 200-byte message: Local Length Error at the receiver.
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 100, d.mr->lkey, 1), 0);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va + 4096, 4096, d.mr->lkey, 2), 0);
        ASSERT_EQ(
            post_rd(p.s[0].qp[0], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 200, s.mr->lkey, 1),
            0);
        const ibv_wc r = one_wc(h, p.s[1].cq, "the failing receive WR");
        EXPECT_EQ(r.status, IBV_WC_LOC_LEN_ERR);
        EXPECT_EQ(r.wr_id, 1u);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "the send").status, IBV_WC_REM_INV_REQ_ERR);
        EXPECT_EQ(qp_state(p.s[1].qp[0]), IBV_QPS_RTS) << "the receiving RD QP goes on";
        EXPECT_EQ(eec_state(p.s[1].eec), IBV_QPS_RTS) << "o10-63";
        // The next receive WR serves the next message (from the other QP, through the same EE context).
        ASSERT_EQ(
            post_rd(p.s[0].qp[1], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va, 200, s.mr->lkey, 2),
            0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "the second send").status, IBV_WC_SUCCESS);
        const ibv_wc r2 = one_wc(h, p.s[1].cq, "the next receive WR");
        EXPECT_EQ(r2.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r2.wr_id, 2u);
        h.expect_fill(1, d.va + 4096, 200, 0x42, "payload");
    });
}

SIM_TEST(E2eRd, eec_commands_reject_bad_numbers_domains_and_states) {
    rc_harness h;
    h.run([](rc_harness& h) {
        fw::hca_driver& drv = h.s[1].sw->driver;
        hw::eec_context c{};
        c.rdd = 1;
        EXPECT_EQ(drv.exec(hw::CMD_CREATE_EEC, 0, 0, &c, sizeof c), hw::CMD_BAD_PARAM)
            << "EECN 0 is never used";
        EXPECT_EQ(drv.exec(hw::CMD_CREATE_EEC, 1u << 20, 0, &c, sizeof c), hw::CMD_BAD_PARAM)
            << "beyond max_ee";
        c.rdd = 0;
        EXPECT_EQ(drv.exec(hw::CMD_CREATE_EEC, 200, 0, &c, sizeof c), hw::CMD_BAD_PARAM) << "no domain";
        hw::eec_context q{};
        EXPECT_EQ(drv.exec(hw::CMD_QUERY_EEC, 200, 0, nullptr, 0, &q, sizeof q), hw::CMD_BAD_RESOURCE);
        c.rdd = 7;
        ASSERT_EQ(drv.exec(hw::CMD_CREATE_EEC, 200, 0, &c, sizeof c), hw::CMD_OK);
        EXPECT_EQ(drv.exec(hw::CMD_CREATE_EEC, 200, 0, &c, sizeof c), hw::CMD_BAD_RESOURCE) << "exists";
        hw::modify_eec_in m{};
        m.ctx = c;
        m.ctx.port = 1;
        EXPECT_EQ(drv.exec(hw::CMD_MODIFY_EEC, 200, hw::QPS_SQE, &m, sizeof m), hw::CMD_BAD_STATE)
            << "no SQEr";
        m.ctx.port = 2;
        EXPECT_EQ(drv.exec(hw::CMD_MODIFY_EEC, 200, hw::QPS_INIT, &m, sizeof m), hw::CMD_BAD_PARAM) << "port";
        m.ctx.port = 1;
        m.ctx.rdd = 9;  // the domain is fixed at create
        ASSERT_EQ(drv.exec(hw::CMD_MODIFY_EEC, 200, hw::QPS_INIT, &m, sizeof m), hw::CMD_OK);
        ASSERT_EQ(drv.exec(hw::CMD_QUERY_EEC, 200, 0, nullptr, 0, &q, sizeof q), hw::CMD_OK);
        EXPECT_EQ(q.state, hw::QPS_INIT);
        EXPECT_EQ(q.rdd, 7u);
        EXPECT_EQ(drv.exec(hw::CMD_DESTROY_EEC, 200, 0, nullptr, 0), hw::CMD_OK);
        EXPECT_EQ(drv.exec(hw::CMD_DESTROY_EEC, 200, 0, nullptr, 0), hw::CMD_BAD_RESOURCE);
    });
}

// ---------------------------------------------------------------- RESYNC (a failed message)

SIM_TEST(E2eRd, resync_after_a_send_that_fails_mid_message_the_next_message_is_not_taken_for_its_rest) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[0].qp[1] && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 16384);
        buf s = make_buf(h, 0, 8192, 0x11);
        h.fill_mem(0, s.va + 4096, 4096, 0x77);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 8192, d.mr->lkey, 5), 0);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va + 8192, 8192, d.mr->lkey, 6), 0);
        // A 4096-byte SEND (four 1024-byte packets) whose second SGE has no region: its first two
        // packets go out (the far EE context is then inside the message, expecting PSN 0x702),
        // the third fails locally. The other QP's SEND waits in line for the EE context.
        ibv_sge sg[2] = {{s.va, 2048, s.mr->lkey}, {s.va + 2048, 2048, 0x00DEAD00}};
        ibv_send_wr wr{};
        wr.wr_id = 1;
        wr.sg_list = sg;
        wr.num_sge = 2;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.rd.eec = p.s[0].eec;
        wr.rd.remote_qpn = p.s[1].qp[0]->qp_num;
        wr.rd.remote_qkey = kQkey;
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(p.s[0].qp[0], &wr, &bad), 0);
        ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_SEND, s.va + 4096, 3000,
                          s.mr->lkey, 2),
                  0);
        const auto sc = h.expect_wc(p.s[0].cq, 2, "sends");
        ASSERT_EQ(sc.size(), 2u);
        EXPECT_EQ(sc[0].wr_id, 1u);
        EXPECT_EQ(sc[0].status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(sc[1].wr_id, 2u);
        EXPECT_EQ(sc[1].status, IBV_WC_SUCCESS);
        // The far end: the abandoned message's receive WR completes Remote Aborted with what had
        // arrived; the next message lands whole in the next receive WR, not after those bytes.
        const auto rc = h.expect_wc(p.s[1].cq, 2, "receives");
        ASSERT_EQ(rc.size(), 2u);
        EXPECT_EQ(rc[0].wr_id, 5u);
        EXPECT_EQ(rc[0].status, IBV_WC_REM_ABORT_ERR);
        EXPECT_EQ(rc[1].wr_id, 6u);
        EXPECT_EQ(rc[1].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rc[1].byte_len, 3000u);
        EXPECT_EQ(rc[1].src_qp, p.s[0].qp[1]->qp_num);
        h.expect_fill(1, d.va, 2048, 0x11, "the abandoned message's first two packets");
        h.expect_fill(1, d.va + 2048, 8192 - 2048, kGuardByte, "nothing after them");
        h.expect_fill(1, d.va + 8192, 3000, 0x77, "the next message");
        h.expect_fill(1, d.va + 8192 + 3000, 8192 - 3000, kGuardByte, "beyond it");
        EXPECT_EQ(ctr(0, "transport_engine.rd_resyncs_sent"), 1u);
        EXPECT_EQ(ctr(1, "transport_engine.rd_resyncs_received"), 1u);
        // PSNs: 0x700 and 0x701 sent, the RESYNC at 0x702, the next message 0x703..0x705.
        ibv_eec_attr a{};
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x706u);
        ASSERT_EQ(ibv_query_eec(p.s[1].eec, &a), 0);
        EXPECT_EQ(a.rq_psn, 0x706u);
        EXPECT_EQ(eec_state(p.s[0].eec), IBV_QPS_RTS);
        EXPECT_EQ(eec_state(p.s[1].eec), IBV_QPS_RTS);
    });
}

SIM_TEST(E2eRd, resync_after_a_write_naked_at_its_first_packet_with_the_rest_in_flight) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[0].qp[1] && p.s[1].qp[0]);
        buf t = make_buf(h, 1, 16384);
        buf s = make_buf(h, 0, 16384, 0x33);
        h.fill_mem(0, s.va + 8192, 4096, 0x6A);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        // An 8 KiB WRITE (eight packets) with a wrong R_Key: NAKed Remote Access Error at its
        // first packet while the other seven are on their way; a 3000-byte WRITE from the other
        // QP follows through the same EE context.
        const uint64_t t0 = h.now_ns();
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va, 8192, s.mr->lkey, 1, kQkey,
                          t.va, t.mr->rkey ^ 0x80),
                  0);
        ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va + 8192, 3000, s.mr->lkey, 2,
                          kQkey, t.va + 4096, t.mr->rkey),
                  0);
        const ibv_wc w1 = one_wc(h, p.s[0].cq, "the failing write");
        EXPECT_EQ(w1.wr_id, 1u);
        EXPECT_EQ(w1.status, IBV_WC_REM_ACCESS_ERR);
        const uint64_t t1 = h.now_ns();
        const ibv_wc w2 = one_wc(h, p.s[0].cq, "the next write");
        EXPECT_EQ(w2.wr_id, 2u);
        EXPECT_EQ(w2.status, IBV_WC_SUCCESS);
        const uint64_t t2 = h.now_ns();
        // The NAK comes back 2.019 us after the post; the next write completes 2.307 us later:
        // the RESYNC's round trip (0.6 us) before its packets (1.708 us without a RESYNC).
        EXPECT_EQ(t1 - t0, 2019u);
        EXPECT_EQ(t2 - t1, 2307u);
        EXPECT_EQ(qp_state(p.s[0].qp[0]), IBV_QPS_SQE);
        EXPECT_EQ(qp_state(p.s[0].qp[1]), IBV_QPS_RTS);
        h.expect_fill(1, t.va, 4096, kGuardByte, "nothing of the refused write");
        h.expect_fill(1, t.va + 4096, 3000, 0x6A, "the next write, whole");
        h.expect_fill(1, t.va + 4096 + 3000, 16384 - 4096 - 3000, kGuardByte, "beyond it");
        h.expect_no_wc(p.s[1].cq, kQuietNs, "writes complete nothing at the far end");
        EXPECT_EQ(ctr(0, "transport_engine.rd_resyncs_sent"), 1u);
        EXPECT_EQ(ctr(1, "transport_engine.rd_resyncs_received"), 1u);
        // 0x700..0x707 sent, the RESYNC at 0x708, the next write 0x709..0x70B.
        ibv_eec_attr a{};
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x70Cu);
        ASSERT_EQ(ibv_query_eec(p.s[1].eec, &a), 0);
        EXPECT_EQ(a.rq_psn, 0x70Cu);
        EXPECT_EQ(eec_state(p.s[1].eec), IBV_QPS_RTS);
    });
}

// ---------------------------------------------------------------- EE contexts, P_Keys, immediate errors

SIM_TEST(E2eRd, o10_5_several_ee_contexts_with_different_attributes_connect_the_same_two_ports) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        // A second pair of EE contexts between the same two ports: a 256-byte path MTU, its own
        // PSNs, a shorter timeout and fewer retries than the first pair (1024 bytes, 0x700/0x500).
        ibv_eec* e0 = ibv_create_eec(p.s[0].rdd);
        ibv_eec* e1 = ibv_create_eec(p.s[1].rdd);
        ASSERT_TRUE(e0 && e1);
        ASSERT_EQ(connect_eec(e0, IBV_QPS_RTS, e1->eecn, h.s[1].lid, 0x90, 0x30, 10, 3, IBV_MTU_256), 0);
        ASSERT_EQ(connect_eec(e1, IBV_QPS_RTS, e0->eecn, h.s[0].lid, 0x30, 0x90, 10, 3, IBV_MTU_256), 0);
        buf d = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 4096, 0x21);
        h.fill_mem(0, s.va + 2048, 2048, 0x42);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 1), 0);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va + 4096, 4096, d.mr->lkey, 2), 0);
        // The same QP sends one message through each: 1500 bytes are 2 packets on the first pair,
        // 6 on the second.
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_SEND, s.va, 1500, s.mr->lkey, 10), 0);
        ASSERT_EQ(post_rd(p.s[0].qp[0], e0, dq, IBV_WR_SEND, s.va + 2048, 1500, s.mr->lkey, 11), 0);
        const auto sc = h.expect_wc(p.s[0].cq, 2, "sends");
        for (const ibv_wc& w : sc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        const auto rc = h.expect_wc(p.s[1].cq, 2, "receives");
        ASSERT_EQ(rc.size(), 2u);
        EXPECT_EQ(rc[0].wr_id, 1u);
        EXPECT_EQ(rc[1].wr_id, 2u);
        h.expect_fill(1, d.va, 1500, 0x21, "through the first pair");
        h.expect_fill(1, d.va + 4096, 1500, 0x42, "through the second pair");
        ibv_eec_attr a{};
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x702u) << "two 1024-byte packets";
        EXPECT_EQ(a.path_mtu, IBV_MTU_1024);
        ASSERT_EQ(ibv_query_eec(e0, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x36u) << "six 256-byte packets";
        EXPECT_EQ(a.path_mtu, IBV_MTU_256);
        EXPECT_EQ(a.timeout, 10u);
        EXPECT_EQ(a.retry_cnt, 3u);
        ASSERT_EQ(ibv_query_eec(e1, &a), 0);
        EXPECT_EQ(a.rq_psn, 0x36u);
        ASSERT_EQ(ibv_query_eec(p.s[1].eec, &a), 0);
        EXPECT_EQ(a.rq_psn, 0x702u);
    });
}

SIM_TEST(E2eRd, o10_50_memory_windows_bind_on_rd_qps_and_rd_writes_go_through_them) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        buf t = make_reg_buf(h, 1, 8192, kGuardByte, nullptr, kTargetAccess | IBV_ACCESS_MW_BIND);
        buf s = make_buf(h, 0, 4096, 0x5A);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        // A type 1 window bound by the Bind MW verb on node 1's RD QP, a type 2 window by a bind
        // WR on it (a memory operation: no EE context named, none used).
        ibv_mw* w1 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ibv_mw* w2 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_TRUE(w1 && w2);
        ibv_mw_bind b{};
        b.wr_id = 50;
        b.send_flags = IBV_SEND_SIGNALED;
        b.bind_info = {t.mr, t.va, 1024, IBV_ACCESS_REMOTE_WRITE};
        ASSERT_EQ(ibv_bind_mw(p.s[1].qp[0], w1, &b), 0);
        const ibv_wc c1 = one_wc(h, p.s[1].cq, "type 1 bind");
        EXPECT_EQ(c1.status, IBV_WC_SUCCESS);
        EXPECT_EQ(c1.opcode, IBV_WC_BIND_MW);
        ASSERT_EQ(post_bind2(p.s[1].qp[0], w2, 0x3C, t.mr, t.va + 4096, 1024, IBV_ACCESS_REMOTE_WRITE), 0);
        const ibv_wc c2 = one_wc(h, p.s[1].cq, "type 2 bind WR");
        EXPECT_EQ(c2.status, IBV_WC_SUCCESS);
        EXPECT_EQ(c2.opcode, IBV_WC_BIND_MW);
        EXPECT_EQ(qp_state(p.s[1].qp[0]), IBV_QPS_RTS);
        // RD WRITEs from node 0 through each window land in it.
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va, 1000, s.mr->lkey, 1, kQkey,
                          t.va + 10, w1->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "write through the type 1 window").status, IBV_WC_SUCCESS);
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va, 1000, s.mr->lkey, 2, kQkey,
                          t.va + 4096 + 20, (w2->rkey & ~0xFFu) | 0x3C),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "write through the type 2 window").status, IBV_WC_SUCCESS);
        h.expect_fill(1, t.va + 10, 1000, 0x5A, "type 1 window");
        h.expect_fill(1, t.va + 4096 + 20, 1000, 0x5A, "type 2 window");
        h.expect_fill(1, t.va, 10, kGuardByte, "before the first write");
        // Beyond the type 1 window's 1024 bytes: a remote access error.
        ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va, 64, s.mr->lkey, 3, kQkey,
                          t.va + 1000, w1->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "write past the window").status, IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(1, t.va + 1010, 64, kGuardByte, "nothing past the window");
    });
}

SIM_TEST(E2eRd, o10_58_modify_eec_refuses_a_pkey_index_outside_the_ports_table) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        const unsigned len = port_of(h, 0).pkey_tbl_len;
        ASSERT_GT(len, 1u);
        ibv_eec* e = ibv_create_eec(p.s[0].rdd);
        ASSERT_NE(e, nullptr);
        ibv_eec_attr a{};
        a.eec_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.pkey_index = uint16_t(len);  // one past the table
        EXPECT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
        EXPECT_EQ(eec_state(e), IBV_QPS_RESET) << "refused: the EE context is unchanged";
        a.pkey_index = uint16_t(len - 1);  // the table's last entry
        ASSERT_EQ(ibv_modify_eec(e, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0);
        EXPECT_EQ(eec_state(e), IBV_QPS_INIT);
        ibv_eec_attr q{};
        ASSERT_EQ(ibv_query_eec(e, &q), 0);
        EXPECT_EQ(q.pkey_index, len - 1);
        // A connected EE context in SQD takes a new P_Key index (SQD -> SQD) only from the table.
        a = ibv_eec_attr{};
        a.eec_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_eec(p.s[0].eec, &a, IBV_QP_STATE), 0);
        a.pkey_index = uint16_t(len + 5);
        EXPECT_EQ(ibv_modify_eec(p.s[0].eec, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX), EINVAL);
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &q), 0);
        EXPECT_EQ(q.pkey_index, 0u);
        EXPECT_EQ(q.eec_state, IBV_QPS_SQD);
        a.pkey_index = 1;
        ASSERT_EQ(ibv_modify_eec(p.s[0].eec, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX), 0);
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &q), 0);
        EXPECT_EQ(q.pkey_index, 1u);
    });
}

SIM_TEST(E2eRd, o10_59_rd_packets_carry_the_ee_contexts_pkey_and_a_mismatch_is_dropped_silently) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // Both ports hold 0xFFFF (index 0) and 0x8002 (index 1).
        ASSERT_EQ(set_pkey(h, 0, 1, 0x8002), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 1, 1, 0x8002), hw::CMD_OK);
        rd_pair p = make_rd(h);  // the RD QPs use P_Key index 0
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        ibv_eec* e0 = ibv_create_eec(p.s[0].rdd);
        ibv_eec* e1 = ibv_create_eec(p.s[1].rdd);
        ASSERT_TRUE(e0 && e1);
        ASSERT_EQ(connect_eec(e0, IBV_QPS_RTS, e1->eecn, h.s[1].lid, 0, 0, 14, 7, IBV_MTU_1024, 1), 0);
        ASSERT_EQ(connect_eec(e1, IBV_QPS_RTS, e0->eecn, h.s[0].lid, 0, 0, 14, 7, IBV_MTU_1024, 1), 0);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x66);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 1), 0);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        // Through the EE contexts of index 1: the packets carry 0x8002 (not the QP's 0xFFFF),
        // which the far EE context takes.
        ASSERT_EQ(post_rd(p.s[0].qp[0], e0, dq, IBV_WR_SEND, s.va, 100, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "send on 0x8002").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, p.s[1].cq, "received").status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(1, "transport_engine.rd_dropped"), 0u);
        // The far EE context moves to index 0 (0xFFFF): the next packets (0x8002, which the
        // port accepts) are not its P_Key and are dropped without a NAK.
        ibv_eec_attr a{};
        a.eec_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_eec(e1, &a, IBV_QP_STATE), 0);
        a.pkey_index = 0;
        ASSERT_EQ(ibv_modify_eec(e1, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX), 0);  // SQD -> SQD
        a.eec_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_eec(e1, &a, IBV_QP_STATE), 0);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va + 2048, 2048, d.mr->lkey, 2), 0);
        const uint64_t naks = ctr(1, "transport_engine.naks_sent");
        ASSERT_EQ(post_rd(p.s[0].qp[1], e0, dq, IBV_WR_SEND, s.va, 100, s.mr->lkey, 2), 0);
        h.sleep(0, 50'000);
        EXPECT_GE(ctr(1, "transport_engine.rd_dropped"), 1u);
        EXPECT_EQ(ctr(1, "transport_engine.naks_sent"), naks) << "silently";
        h.expect_no_wc(p.s[1].cq, kQuietNs, "nothing delivered");
        h.expect_no_wc(p.s[0].cq, kQuietNs, "no answer: the sender waits for its timer");
        h.expect_fill(1, d.va + 2048, 2048, kGuardByte, "nothing placed");
    });
}

SIM_TEST(E2eRd, o10_60_immediate_errors_on_rd_posts_leave_the_qp_and_ee_context_working) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x17);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        // Refused at the post, none of them queued: no EE context, a destination QPN of more
        // than 24 bits, more SGEs than the QP has, an opcode RD does not carry, and a receive WR
        // with too many SGEs.
        EXPECT_EQ(post_rd(p.s[0].qp[0], nullptr, dq, IBV_WR_SEND, s.va, 8, s.mr->lkey, 1), EINVAL);
        EXPECT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, 1u << 24, IBV_WR_SEND, s.va, 8, s.mr->lkey, 2), EINVAL);
        ibv_sge sg[3] = {{s.va, 8, s.mr->lkey}, {s.va, 8, s.mr->lkey}, {s.va, 8, s.mr->lkey}};
        ibv_send_wr wr{};
        wr.wr_id = 3;
        wr.sg_list = sg;
        wr.num_sge = 3;  // max_send_sge 2
        wr.opcode = IBV_WR_SEND;
        wr.rd.eec = p.s[0].eec;
        wr.rd.remote_qpn = dq;
        wr.rd.remote_qkey = kQkey;
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_send(p.s[0].qp[0], &wr, &bad), EINVAL);
        EXPECT_EQ(bad, &wr);
        wr.num_sge = 1;
        wr.opcode = IBV_WR_SEND_WITH_INV;  // RC only
        EXPECT_EQ(ibv_post_send(p.s[0].qp[0], &wr, &bad), EINVAL);
        ibv_recv_wr rw{};
        rw.wr_id = 9;
        rw.sg_list = sg;
        rw.num_sge = 3;  // max_recv_sge 2
        ibv_recv_wr* rbad = nullptr;
        EXPECT_EQ(ibv_post_recv(p.s[1].qp[0], &rw, &rbad), EINVAL);
        h.expect_no_wc(p.s[0].cq, kQuietNs, "nothing of the refused WRs completes");
        EXPECT_EQ(qp_state(p.s[0].qp[0]), IBV_QPS_RTS);
        EXPECT_EQ(qp_state(p.s[1].qp[0]), IBV_QPS_RTS);
        EXPECT_EQ(eec_state(p.s[0].eec), IBV_QPS_RTS);
        // Both go on: the next message goes through with the EE context's next PSN.
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 10), 0);
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_SEND, s.va, 64, s.mr->lkey, 4), 0);
        const ibv_wc w = one_wc(h, p.s[0].cq, "the next send");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        EXPECT_EQ(w.wr_id, 4u);
        EXPECT_EQ(one_wc(h, p.s[1].cq, "its receive").wr_id, 10u);
        h.expect_fill(1, d.va, 64, 0x17, "payload");
        ibv_eec_attr a{};
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x701u) << "only the one message used a PSN";
    });
}

SIM_TEST(E2eRd, resync_unanswered_is_resent_then_fails_its_wr_and_the_next_owner_resyncs_a_far_end_set_anew) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        // EE contexts with an 8.192 us ACK timeout and one retry.
        for (unsigned i = 0; i < 2; ++i) {
            ibv_eec_attr a{};
            a.eec_state = IBV_QPS_RESET;
            ASSERT_EQ(ibv_modify_eec(p.s[i].eec, &a, IBV_QP_STATE), 0);
        }
        ASSERT_EQ(connect_eec(p.s[0].eec, IBV_QPS_RTS, p.s[1].eec->eecn, h.s[1].lid, 0x500, 0x700, 1, 1), 0);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x4E);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        // The far EE context is in Reset: the first message's packets are dropped until its
        // retries run out; its EE context then owes a RESYNC.
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_SEND, s.va, 2000, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "the first send").status, IBV_WC_RETRY_EXC_ERR);
        EXPECT_EQ(ctr(0, "transport_engine.rd_resyncs_sent"), 0u);
        // The next message's RESYNC is dropped too: sent, resent once, then its WR fails.
        ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, dq, IBV_WR_SEND, s.va, 2000, s.mr->lkey, 2), 0);
        const ibv_wc w2 = one_wc(h, p.s[0].cq, "the second send");
        EXPECT_EQ(w2.status, IBV_WC_RETRY_EXC_ERR);
        EXPECT_EQ(w2.wr_id, 2u);
        EXPECT_EQ(ctr(0, "transport_engine.rd_resyncs_sent"), 2u);
        EXPECT_EQ(ctr(1, "transport_engine.rd_resyncs_received"), 0u);
        // The far EE context comes up expecting a PSN of its own (0x123): the RESYNC a third
        // QP's message sends first sets it, and the message lands.
        ASSERT_EQ(connect_eec(p.s[1].eec, IBV_QPS_RTS, p.s[0].eec->eecn, h.s[0].lid, 0x123, 0x500), 0);
        ibv_qp* q3 = make_rd_qp(h, 0, p.s[0].rdd, p.s[0].cq);
        ASSERT_NE(q3, nullptr);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 7), 0);
        ASSERT_EQ(post_rd(q3, p.s[0].eec, dq, IBV_WR_SEND, s.va, 2000, s.mr->lkey, 3), 0);
        const ibv_wc w3 = one_wc(h, p.s[0].cq, "the third send");
        EXPECT_EQ(w3.status, IBV_WC_SUCCESS);
        EXPECT_EQ(w3.wr_id, 3u);
        const ibv_wc r = one_wc(h, p.s[1].cq, "its receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.byte_len, 2000u);
        h.expect_fill(1, d.va, 2000, 0x4E, "payload");
        EXPECT_EQ(ctr(0, "transport_engine.rd_resyncs_sent"), 3u);
        EXPECT_EQ(ctr(1, "transport_engine.rd_resyncs_received"), 1u);
        // 0x700, 0x701 sent (and resent), the RESYNC at 0x702, the message 0x703, 0x704.
        ibv_eec_attr a{};
        ASSERT_EQ(ibv_query_eec(p.s[0].eec, &a), 0);
        EXPECT_EQ(a.sq_psn, 0x705u);
        ASSERT_EQ(ibv_query_eec(p.s[1].eec, &a), 0);
        EXPECT_EQ(a.rq_psn, 0x705u);
    });
}

// ---------------------------------------------------------------- affiliated asynchronous errors

SIM_TEST(E2eRd, o10_64_o10_65_an_rd_qps_affiliated_error_stops_the_qp_and_leaves_its_ee_context_working) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ibv_qp* victim = p.s[0].qp[1];
        ASSERT_TRUE(p.s[0].qp[0] && victim && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x2D);
        buf in = make_buf(h, 0, 4096);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        ASSERT_EQ(post_recv_on(victim, in.va, 4096, in.mr->lkey, 7), 0);  // outstanding on its RQ
        // Its send ring now points beyond host memory: the next WQEs cannot be read, a Local
        // Work Queue Catastrophic Error (an affiliated asynchronous error of the RD QP).
        hw::modify_qp_in m{};
        m.cur_state = uint8_t(IBV_QPS_RTS);
        m.ctx = victim->hw_ctx;
        m.ctx.sq_base = 0xFFFFF00000000000ull;
        ASSERT_EQ(
            h.s[0].sw->driver.exec(hw::CMD_MODIFY_QP, victim->qp_num, uint32_t(IBV_QPS_RTS), &m, sizeof m),
            hw::CMD_OK);
        ibv_sge sge{s.va, 64, s.mr->lkey};
        std::vector<ibv_send_wr> wrs(2);
        for (unsigned k = 0; k < 2; ++k) {
            wrs[k].wr_id = 2 + k;
            wrs[k].sg_list = &sge;
            wrs[k].num_sge = 1;
            wrs[k].opcode = IBV_WR_SEND;
            wrs[k].send_flags = IBV_SEND_SIGNALED;
            wrs[k].rd.eec = p.s[0].eec;
            wrs[k].rd.remote_qpn = dq;
            wrs[k].rd.remote_qkey = kQkey;
        }
        ASSERT_EQ(post_list(victim, wrs), 0);
        ibv_qp* qp = nullptr;
        EXPECT_EQ(next_event_type(h, 0, &qp), int(IBV_EVENT_QP_FATAL)) << "o10-64";
        EXPECT_EQ(qp, victim);
        EXPECT_EQ(qp_state(victim), IBV_QPS_ERR) << "o10-64: processing halts, the QP goes to Error";
        const ibv_wc r = one_wc(h, p.s[0].cq, "the outstanding receive");
        EXPECT_EQ(r.status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(r.wr_id, 7u);
        // o10-65: a QP's error leaves the EE context alone: another QP sends through it.
        EXPECT_EQ(eec_state(p.s[0].eec), IBV_QPS_RTS);
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 4096, d.mr->lkey, 9), 0);
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_SEND, s.va, 64, s.mr->lkey, 5), 0);
        const ibv_wc w = one_wc(h, p.s[0].cq, "a send of another QP");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        EXPECT_EQ(w.wr_id, 5u);
        EXPECT_EQ(one_wc(h, p.s[1].cq, "its receive").wr_id, 9u);
        h.expect_fill(1, d.va, 64, 0x2D, "payload");
    });
}

SIM_TEST(E2eRd, o10_65_an_ee_contexts_own_error_moves_it_to_error_with_an_event_naming_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        // The far EE context takes no RDMA READ (max_dest_rd_atomic 0: the EE context's own
        // responder resources).
        ibv_eec_attr a{};
        a.eec_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_eec(p.s[1].eec, &a, IBV_QP_STATE), 0);
        a.max_dest_rd_atomic = 0;
        ASSERT_EQ(ibv_modify_eec(p.s[1].eec, &a, IBV_QP_STATE | IBV_QP_MAX_DEST_RD_ATOMIC), 0);
        a.eec_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_eec(p.s[1].eec, &a, IBV_QP_STATE), 0);
        buf t = make_buf(h, 1, 4096, 0x3E);
        buf back = make_buf(h, 0, 4096, 0);
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_RDMA_READ, back.va, 256,
                          back.mr->lkey, 1, kQkey, t.va, t.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "the read").status, IBV_WC_REM_INV_REQ_ERR);
        // The far end: an event naming its EE context, which is in Error; its RD QP is not.
        ibv_async_event ev{};
        ASSERT_EQ(ibv_get_async_event(h.s[1].ctx, &ev, 1'000'000), 0);
        EXPECT_EQ(ev.event_type, IBV_EVENT_EEC_ERR);
        EXPECT_EQ(ev.element.eec, p.s[1].eec);
        ibv_ack_async_event(&ev);
        EXPECT_EQ(p.s[1].eec->state, IBV_QPS_ERR) << "the verbs layer knows before a query";
        EXPECT_EQ(eec_state(p.s[1].eec), IBV_QPS_ERR);
        EXPECT_EQ(qp_state(p.s[1].qp[0]), IBV_QPS_RTS) << "its RD QP is unaffected";
        EXPECT_EQ(eec_state(p.s[0].eec), IBV_QPS_RTS) << "the requesting EE context goes on";
        EXPECT_NE(ibv_get_async_event(h.s[0].ctx, &ev, 100'000), 0) << "no event at the requester";
        h.expect_fill(0, back.va, 256, 0, "nothing read");
        ASSERT_EQ(ibv_destroy_eec(p.s[1].eec), 0);
    });
}

// ---------------------------------------------------------------- message size

SIM_TEST(E2eRd, o10_51_an_rd_wr_longer_than_the_rd_maximum_message_size_is_refused) {
    rc_config cfg;
    cfg.keys = {{"hca.max_rd_msg", "4096"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        EXPECT_EQ(da.max_rd_msg_sz, 4096u) << "Query HCA reports it (hca.max_rd_msg)";
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        buf d = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 8192, 0x71);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        // 4097 bytes in two SGEs: the total counts. Refused at the post; nothing queued.
        ibv_sge sg[2] = {{s.va, 4000, s.mr->lkey}, {s.va + 4000, 97, s.mr->lkey}};
        ibv_send_wr wr{};
        wr.wr_id = 1;
        wr.sg_list = sg;
        wr.num_sge = 2;
        wr.opcode = IBV_WR_SEND;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.rd.eec = p.s[0].eec;
        wr.rd.remote_qpn = dq;
        wr.rd.remote_qkey = kQkey;
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_send(p.s[0].qp[0], &wr, &bad), EINVAL);
        EXPECT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_WRITE, s.va, 4097, s.mr->lkey, 2, kQkey,
                          d.va, d.mr->rkey),
                  EINVAL);
        EXPECT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_RDMA_READ, s.va, 8192, s.mr->lkey, 3, kQkey,
                          d.va, d.mr->rkey),
                  EINVAL);
        h.expect_no_wc(p.s[0].cq, kQuietNs, "nothing was queued");
        // Exactly the maximum goes.
        sg[1].length = 96;
        ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va, 8192, d.mr->lkey, 9), 0);
        ASSERT_EQ(ibv_post_send(p.s[0].qp[0], &wr, &bad), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "the 4096-byte send").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, p.s[1].cq, "its receive");
        EXPECT_EQ(r.byte_len, 4096u);
        h.expect_fill(1, d.va, 4096, 0x71, "payload");
        // The limit is RD's: the harness's RC QP sends 8192 bytes in one message.
        const uint64_t rc_dst = h.alloc(1, 8192, 64);
        ibv_mr* rc_mr = h.reg(1, rc_dst, 8192);
        ASSERT_NE(rc_mr, nullptr);
        ASSERT_EQ(post_write_on(h.s[0].qp, {s.va, 8192, s.mr->lkey}, rc_dst, rc_mr->rkey, 4), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "an RC write of 8192 bytes").status, IBV_WC_SUCCESS);
    });
}

SIM_TEST(E2eRd, o10_51_query_hca_reports_the_default_rd_maximum_message_size) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        EXPECT_EQ(da.max_rd_msg_sz, 1u << 31);
    });
}

SIM_TEST(E2eRd, o10_54_an_rd_receive_completion_returns_the_count_of_receive_wrs_it_freed) {
    rc_harness h;
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ibv_qp* rq = p.s[1].qp[0];
        ASSERT_TRUE(p.s[0].qp[0] && rq);
        buf d = make_buf(h, 1, 64 * 1024);
        buf s = make_buf(h, 0, 4096, 0x19);
        // The receive queue full (32 WRs): one more post is refused.
        for (unsigned k = 0; k < 32; ++k)
            ASSERT_EQ(post_recv_on(rq, d.va + k * 2048, 2048, d.mr->lkey, k), 0);
        EXPECT_EQ(post_recv_on(rq, d.va, 2048, d.mr->lkey, 99), ENOMEM);
        // A message, and a message too long for its receive WR (Local Length Error): each
        // completion frees one receive WR, and one more post fits per completion.
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, rq->qp_num, IBV_WR_SEND, s.va, 100, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "send").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, p.s[1].cq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.freed_recv_wrs, 1u);
        ASSERT_EQ(post_recv_on(rq, d.va, 2048, d.mr->lkey, 100), 0);
        EXPECT_EQ(post_recv_on(rq, d.va, 2048, d.mr->lkey, 101), ENOMEM);
        ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, rq->qp_num, IBV_WR_SEND, s.va, 3000, s.mr->lkey, 2), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "long send").status, IBV_WC_REM_INV_REQ_ERR);
        const ibv_wc r2 = one_wc(h, p.s[1].cq, "the receive in error");
        EXPECT_EQ(r2.status, IBV_WC_LOC_LEN_ERR);
        EXPECT_EQ(r2.freed_recv_wrs, 1u);
        ASSERT_EQ(post_recv_on(rq, d.va, 2048, d.mr->lkey, 102), 0);
        EXPECT_EQ(post_recv_on(rq, d.va, 2048, d.mr->lkey, 103), ENOMEM);
        // A send completion frees no receive WR.
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, rq->qp_num, IBV_WR_SEND, s.va, 10, s.mr->lkey, 3), 0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "send").freed_recv_wrs, 0u);
    });
}

// ---------------------------------------------------------------- automatic path migration (o10-23)
//
// With fabric.lmc = 1 every port owns two LIDs (node0 2 and 3, node1 4 and 5): the EE contexts'
// primary paths use the base LIDs (source path bits 0), their alternate paths the second LIDs
// (source path bits 1), as the RC QPs' in e2e_apm_test.cpp.

namespace {

rc_config rd_lmc1(std::vector<std::pair<std::string, std::string>> more = {}) {
    rc_config c;
    c.keys = {{"fabric.lmc", "1"}};
    c.keys.insert(c.keys.end(), more.begin(), more.end());
    return c;
}

/// RTS -> RTS of an EE context with `mask` (besides the state) and the attributes in `a`.
int eec_rts_modify(ibv_eec* e, ibv_eec_attr a, int mask) {
    a.eec_state = IBV_QPS_RTS;
    return ibv_modify_eec(e, &a, IBV_QP_STATE | mask);
}

/// Node i's alternate path towards the other node: its second LID, sent from source path bits 1.
ibv_eec_attr eec_alt_path_of(rc_harness& h, unsigned i) {
    ibv_eec_attr a{};
    a.alt_ah_attr.dlid = uint16_t(h.s[h.peer_of(i)].lid + 1);
    a.alt_ah_attr.src_path_bits = 1;
    a.alt_ah_attr.port_num = 1;
    a.alt_port_num = 1;
    a.alt_pkey_index = 0;
    a.alt_timeout = 10;
    return a;
}

ibv_eec_attr query_eec(ibv_eec* e) {
    ibv_eec_attr a{};
    EXPECT_EQ(ibv_query_eec(e, &a), 0);
    return a;
}

/// The next asynchronous event of node i (within 1 ms): its type, and that it names EE context e.
int eec_event_of(rc_harness& h, unsigned i, ibv_eec* e) {
    ibv_async_event ev{};
    if (ibv_get_async_event(h.s[i].ctx, &ev, 1'000'000) != 0) return -1;
    EXPECT_EQ(ev.element.eec, e) << "node" << i << ": the event names the EE context";
    const int t = int(ev.event_type);
    ibv_ack_async_event(&ev);
    return t;
}

/// Both EE contexts load their alternate paths and go to Rearm; one SEND node0 -> node1 (its
/// packets one way, the ACK the other) arms both in lock-step.
void arm_both_eecs(rc_harness& h, rd_pair& p) {
    for (unsigned i = 0; i < 2; ++i) {
        ibv_eec_attr a = eec_alt_path_of(h, i);
        a.path_mig_state = IBV_MIG_REARM;
        ASSERT_EQ(eec_rts_modify(p.s[i].eec, a, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE), 0);
        ASSERT_EQ(query_eec(p.s[i].eec).path_mig_state, IBV_MIG_REARM);
    }
    buf s = make_buf(h, 0, 64, 0x11);
    buf d = make_buf(h, 1, 64);
    ASSERT_EQ(post_recv_on(p.s[1].qp[1], d.va, 64, d.mr->lkey, 999), 0);
    ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, p.s[1].qp[1]->qp_num, IBV_WR_SEND, s.va, 64, s.mr->lkey, 999),
              0);
    ASSERT_EQ(one_wc(h, p.s[0].cq, "arming send").status, IBV_WC_SUCCESS);
    ASSERT_EQ(one_wc(h, p.s[1].cq, "arming receive").status, IBV_WC_SUCCESS);
    ASSERT_EQ(query_eec(p.s[0].eec).path_mig_state, IBV_MIG_ARMED);
    ASSERT_EQ(query_eec(p.s[1].eec).path_mig_state, IBV_MIG_ARMED);
}

}  // namespace

SIM_TEST(E2eRd, o10_23_o10_26_ee_context_path_migration_states_follow_figure_127_with_immediate_errors) {
    rc_harness h(rd_lmc1());
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].eec && p.s[1].eec);
        ibv_eec* e = p.s[0].eec;
        EXPECT_EQ(query_eec(e).path_mig_state, IBV_MIG_MIGRATED) << "in RTS, never given a state";
        // The alternate path loads and reads back; bad ones are immediate errors.
        ibv_eec_attr a = eec_alt_path_of(h, 0);
        a.alt_ah_attr.sl = 3;
        a.alt_timeout = 12;
        ASSERT_EQ(eec_rts_modify(e, a, IBV_QP_ALT_PATH), 0);
        ibv_eec_attr q = query_eec(e);
        EXPECT_EQ(q.alt_ah_attr.dlid, 5);
        EXPECT_EQ(q.alt_ah_attr.sl, 3);
        EXPECT_EQ(q.alt_ah_attr.src_path_bits, 1);
        EXPECT_EQ(q.alt_port_num, 1);
        EXPECT_EQ(q.alt_pkey_index, 0);
        EXPECT_EQ(q.alt_timeout, 12);
        EXPECT_EQ(q.ah_attr.dlid, 4) << "the primary path is unchanged";
        ibv_eec_attr bad = eec_alt_path_of(h, 0);
        bad.alt_port_num = 2;
        EXPECT_EQ(eec_rts_modify(e, bad, IBV_QP_ALT_PATH), EINVAL) << "no port 2";
        bad = eec_alt_path_of(h, 0);
        bad.alt_pkey_index = 0xFFFF;
        EXPECT_EQ(eec_rts_modify(e, bad, IBV_QP_ALT_PATH), EINVAL) << "P_Key index past the table";
        bad = eec_alt_path_of(h, 0);
        bad.alt_timeout = 32;
        EXPECT_EQ(eec_rts_modify(e, bad, IBV_QP_ALT_PATH), EINVAL) << "timeout code past 31";
        EXPECT_EQ(query_eec(e).alt_timeout, 12);
        // Figure 127's arcs only.
        ibv_eec_attr m{};
        m.path_mig_state = IBV_MIG_ARMED;
        EXPECT_EQ(eec_rts_modify(e, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "Migrated -> Armed";
        // Migrated -> Rearm only going to RTS: not on SQD -> SQD, then on SQD -> RTS.
        m = ibv_eec_attr{};
        m.eec_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_eec(e, &m, IBV_QP_STATE), 0);
        m.path_mig_state = IBV_MIG_REARM;
        EXPECT_EQ(ibv_modify_eec(e, &m, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE), EINVAL) << "SQD -> SQD";
        EXPECT_EQ(query_eec(e).path_mig_state, IBV_MIG_MIGRATED);
        m.eec_state = IBV_QPS_RTS;
        ASSERT_EQ(ibv_modify_eec(e, &m, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE), 0) << "SQD -> RTS";
        EXPECT_EQ(query_eec(e).path_mig_state, IBV_MIG_REARM);
        m.path_mig_state = IBV_MIG_MIGRATED;
        EXPECT_EQ(eec_rts_modify(e, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "Rearm -> Migrated";
        m.path_mig_state = ibv_mig_state(3);
        EXPECT_EQ(eec_rts_modify(e, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "no such state";
        EXPECT_EQ(query_eec(e).path_mig_state, IBV_MIG_REARM);
        m.path_mig_state = IBV_MIG_ARMED;  // the consumer may arm it itself (10.4.1.1)
        ASSERT_EQ(eec_rts_modify(e, m, IBV_QP_PATH_MIG_STATE), 0);
        m.path_mig_state = IBV_MIG_REARM;
        EXPECT_EQ(eec_rts_modify(e, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "Armed -> Rearm";
        EXPECT_EQ(query_eec(e).path_mig_state, IBV_MIG_ARMED);
        // Armed -> Migrated by Modify EEC: the paths swap at once, with an event naming it.
        m.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(eec_rts_modify(e, m, IBV_QP_PATH_MIG_STATE), 0);
        q = query_eec(e);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 5);
        EXPECT_EQ(q.ah_attr.src_path_bits, 1);
        EXPECT_EQ(q.ah_attr.sl, 3);
        EXPECT_EQ(q.timeout, 12);
        EXPECT_EQ(q.alt_ah_attr.dlid, 4);
        EXPECT_EQ(q.alt_ah_attr.src_path_bits, 0);
        EXPECT_EQ(eec_event_of(h, 0, e), IBV_EVENT_EEC_PATH_MIG);
        EXPECT_EQ(ctr(0, "transport_engine.path_migrations"), 1u);
        // Init -> RTR takes no path migration state (the RC table); Reset clears it all.
        ibv_eec* f = ibv_create_eec(p.s[0].rdd);
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(connect_eec(f, IBV_QPS_INIT, p.s[1].eec->eecn, h.s[1].lid, 0, 0), 0);
        ibv_eec_attr r = eec_alt_path_of(h, 0);
        r.eec_state = IBV_QPS_RTR;
        r.path_mtu = IBV_MTU_1024;
        r.ah_attr.dlid = h.s[1].lid;
        r.ah_attr.port_num = 1;
        r.dest_eecn = p.s[1].eec->eecn;
        r.max_dest_rd_atomic = 4;
        r.min_rnr_timer = 1;
        r.path_mig_state = IBV_MIG_REARM;
        constexpr int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                            IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        EXPECT_EQ(ibv_modify_eec(f, &r, rtr | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE), EINVAL);
        ASSERT_EQ(ibv_modify_eec(f, &r, rtr | IBV_QP_ALT_PATH), 0) << "the alternate path is allowed";
        EXPECT_EQ(query_eec(f).alt_ah_attr.dlid, 5);
        ibv_eec_attr z{};
        z.eec_state = IBV_QPS_RESET;
        ASSERT_EQ(ibv_modify_eec(e, &z, IBV_QP_STATE), 0);
        q = query_eec(e);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.alt_ah_attr.dlid, 0);
        EXPECT_EQ(q.alt_port_num, 0);
        ASSERT_EQ(ibv_destroy_eec(f), 0);
    });
}

SIM_TEST(E2eRd, o10_23_a_migration_request_off_the_alternate_path_raises_eec_path_mig_err_once) {
    rc_harness h(rd_lmc1());
    h.run([](rc_harness& h) {
        rd_pair p = make_rd(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[1].qp[0]);
        // node1's alternate path names node0's base LID: node0's migrated packets (from its
        // second LID) are not on it.
        for (unsigned i = 0; i < 2; ++i) {
            ibv_eec_attr a = eec_alt_path_of(h, i);
            if (i == 1) a.alt_ah_attr.dlid = h.s[0].lid;
            a.path_mig_state = IBV_MIG_REARM;
            ASSERT_EQ(eec_rts_modify(p.s[i].eec, a, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE), 0);
        }
        buf s = make_buf(h, 0, 4096, 0x21);
        buf d = make_buf(h, 1, 3 * 4096);
        const uint32_t dq = p.s[1].qp[0]->qp_num;
        for (unsigned k = 0; k < 3; ++k)
            ASSERT_EQ(post_recv_on(p.s[1].qp[0], d.va + k * 4096, 4096, d.mr->lkey, k), 0);
        // One message arms both (o10-32 as for QPs).
        ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_SEND, s.va, 1000, s.mr->lkey, 1), 0);
        ASSERT_EQ(one_wc(h, p.s[0].cq, "arming send").status, IBV_WC_SUCCESS);
        ASSERT_EQ(query_eec(p.s[0].eec).path_mig_state, IBV_MIG_ARMED);
        ASSERT_EQ(query_eec(p.s[1].eec).path_mig_state, IBV_MIG_ARMED);
        // node0 migrates by hand; its next messages carry MigReq 1 from its second LID.
        ibv_eec_attr m{};
        m.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(eec_rts_modify(p.s[0].eec, m, IBV_QP_PATH_MIG_STATE), 0);
        EXPECT_EQ(eec_event_of(h, 0, p.s[0].eec), IBV_EVENT_EEC_PATH_MIG);
        for (uint64_t k = 2; k <= 3; ++k) {
            ASSERT_EQ(post_rd(p.s[0].qp[0], p.s[0].eec, dq, IBV_WR_SEND, s.va, 1000, s.mr->lkey, k), 0);
            EXPECT_EQ(one_wc(h, p.s[0].cq, "send after the migration").status, IBV_WC_SUCCESS)
                << "the packet is processed either way";
        }
        EXPECT_EQ(h.expect_wc(p.s[1].cq, 3, "receives").size(), 3u);
        // The far end raises EEC_PATH_MIG_ERR once, naming its EE context, and stays Armed on
        // its primary path.
        EXPECT_EQ(eec_event_of(h, 1, p.s[1].eec), IBV_EVENT_EEC_PATH_MIG_ERR);
        ibv_async_event ev{};
        EXPECT_NE(ibv_get_async_event(h.s[1].ctx, &ev, 100'000), 0) << "raised once";
        const ibv_eec_attr q = query_eec(p.s[1].eec);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_ARMED);
        EXPECT_EQ(q.ah_attr.dlid, h.s[0].lid);
        EXPECT_EQ(ctr(1, "transport_engine.path_mig_errors"), 1u);
        EXPECT_EQ(ctr(1, "transport_engine.path_migrations"), 0u);
    });
}

// --- a stream of RD messages through two switches loses its primary path's cable -----------------

namespace {

/// Two switches joined by two cables (ports 3 and 4), node0 on switch0 and node1 on switch1
/// (as e2e_apm_test.cpp's): with LMC 1 each node's base LID routes over the cables on port 3,
/// its second LID over port 4, so primary and alternate paths share no inter-switch cable.
std::string rd_two_switch_topology() {
    const std::string path =
        ::testing::TempDir() + "rd_apm_two_switches_" + std::to_string(getpid()) + ".topo";
    std::ofstream f(path);
    f << "Switch\t4 \"S-e41d2d0300000001\"\t\t# \"switch0\" enhanced port 0 lid 0 lmc 0\n"
         "[1]\t\"H-0002c90300000010\"[1](2c90300000011) \t\t# \"node0\" lid 1 4xEDR\n"
         "[3]\t\"S-e41d2d0300000002\"[3]\t\t# \"switch1\" lid 0 4xEDR\n"
         "[4]\t\"S-e41d2d0300000002\"[4]\t\t# \"switch1\" lid 0 4xEDR\n"
         "\n"
         "Switch\t4 \"S-e41d2d0300000002\"\t\t# \"switch1\" enhanced port 0 lid 0 lmc 0\n"
         "[1]\t\"H-0002c90300000020\"[1](2c90300000021) \t\t# \"node1\" lid 2 4xEDR\n"
         "\n"
         "Ca\t1 \"H-0002c90300000010\"\t\t# \"node0\"\n"
         "[1](2c90300000011) \t\"S-e41d2d0300000001\"[1]\t\t# lid 1 lmc 0 \"switch0\" lid 0 4xEDR\n"
         "\n"
         "Ca\t1 \"H-0002c90300000020\"\t\t# \"node1\"\n"
         "[1](2c90300000021) \t\"S-e41d2d0300000002\"[1]\t\t# lid 2 lmc 0 \"switch1\" lid 0 4xEDR\n";
    return path;
}

constexpr uint64_t kRdDownNs = 1'000'000;  // the primary path's cable goes down at 1 ms
constexpr uint64_t kRdStartNs = 980'000;   // the stream starts 20 us before
constexpr unsigned kRdWrites = 24;         // RDMA WRITEs of QP 0 (16 KiB each)
constexpr unsigned kRdSends = 8;           // SENDs of QP 1 (4 KiB each), interleaved on the EE context
constexpr uint32_t kRdWriteBytes = 16 * 1024;
constexpr uint32_t kRdSendBytes = 4 * 1024;

rc_config rd_cable_loss() {
    return rd_lmc1({{"fabric.topology", "file"},
                    {"fabric.topology_file", rd_two_switch_topology()},
                    {"fabric.isl.down_cable", "switch0/3"},
                    {"fabric.isl.down_at_ns", std::to_string(kRdDownNs)}});
}

/// RD pair with EE contexts of a 4.2 ms ACK timeout and 3 retries.
rd_pair make_rd_slow(rc_harness& h) {
    rd_pair p = make_rd(h);
    for (unsigned i = 0; i < 2; ++i) {
        ibv_eec_attr a{};
        a.eec_state = IBV_QPS_RESET;
        EXPECT_EQ(ibv_modify_eec(p.s[i].eec, &a, IBV_QP_STATE), 0);
    }
    EXPECT_EQ(connect_eec(p.s[0].eec, IBV_QPS_RTS, p.s[1].eec->eecn, h.s[1].lid, 0x500, 0x700, 10, 3), 0);
    EXPECT_EQ(connect_eec(p.s[1].eec, IBV_QPS_RTS, p.s[0].eec->eecn, h.s[0].lid, 0x700, 0x500, 10, 3), 0);
    return p;
}

struct rd_stream_bufs {
    buf src, dst, ssrc, sdst;
};

rd_stream_bufs make_stream_bufs(rc_harness& h) {
    rd_stream_bufs b;
    b.src = make_buf(h, 0, size_t(kRdWrites) * kRdWriteBytes, 0);
    h.write_mem(0, b.src.va, pattern(size_t(kRdWrites) * kRdWriteBytes, 7));
    b.dst = make_buf(h, 1, size_t(kRdWrites) * kRdWriteBytes + 4096);
    b.ssrc = make_buf(h, 0, size_t(kRdSends) * kRdSendBytes, 0);
    h.write_mem(0, b.ssrc.va, pattern(size_t(kRdSends) * kRdSendBytes, 9));
    b.sdst = make_buf(h, 1, size_t(kRdSends) * kRdSendBytes);
    return b;
}

/// From kRdStartNs: QP 0 of node0 streams kRdWrites WRITEs (consecutive pieces of one buffer)
/// and QP 1 kRdSends SENDs, all through the one EE context to node1. Returns node0's send
/// completions (kRdWrites + kRdSends expected).
std::vector<ibv_wc> rd_stream(rc_harness& h, rd_pair& p, const rd_stream_bufs& b) {
    for (unsigned k = 0; k < kRdSends; ++k)
        EXPECT_EQ(
            post_recv_on(p.s[1].qp[1], b.sdst.va + k * kRdSendBytes, kRdSendBytes, b.sdst.mr->lkey, 100 + k),
            0);
    EXPECT_LT(h.now_ns(), kRdStartNs) << "setup ran past the stream's start";
    h.sleep(0, kRdStartNs - h.now_ns());
    std::vector<ibv_send_wr> w(kRdWrites), s(kRdSends);
    std::vector<ibv_sge> wg(kRdWrites), sg(kRdSends);
    for (unsigned k = 0; k < kRdWrites; ++k) {
        wg[k] = {b.src.va + uint64_t(k) * kRdWriteBytes, kRdWriteBytes, b.src.mr->lkey};
        w[k] = ibv_send_wr{};
        w[k].wr_id = k;
        w[k].sg_list = &wg[k];
        w[k].num_sge = 1;
        w[k].opcode = IBV_WR_RDMA_WRITE;
        w[k].send_flags = IBV_SEND_SIGNALED;
        w[k].rd = {p.s[0].eec, p.s[1].qp[0]->qp_num, kQkey};
        w[k].wr.rdma.remote_addr = b.dst.va + uint64_t(k) * kRdWriteBytes;
        w[k].wr.rdma.rkey = b.dst.mr->rkey;
    }
    for (unsigned k = 0; k < kRdSends; ++k) {
        sg[k] = {b.ssrc.va + uint64_t(k) * kRdSendBytes, kRdSendBytes, b.ssrc.mr->lkey};
        s[k] = ibv_send_wr{};
        s[k].wr_id = 100 + k;
        s[k].sg_list = &sg[k];
        s[k].num_sge = 1;
        s[k].opcode = IBV_WR_SEND;
        s[k].send_flags = IBV_SEND_SIGNALED;
        s[k].rd = {p.s[0].eec, p.s[1].qp[1]->qp_num, kQkey};
    }
    EXPECT_EQ(post_list(p.s[0].qp[0], w), 0);
    EXPECT_EQ(post_list(p.s[0].qp[1], s), 0);
    return h.wait_wc(p.s[0].cq, kRdWrites + kRdSends, 200'000'000);
}

}  // namespace

SIM_TEST(E2eRd, o10_23_an_rd_stream_survives_the_loss_of_its_ee_contexts_primary_path_cable) {
    rc_harness h(rd_cable_loss());
    h.run([](rc_harness& h) {
        rd_pair p = make_rd_slow(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[0].qp[1] && p.s[1].qp[0] && p.s[1].qp[1]);
        arm_both_eecs(h, p);
        const rd_stream_bufs b = make_stream_bufs(h);
        const std::vector<ibv_wc> wc = rd_stream(h, p, b);
        ASSERT_EQ(wc.size(), kRdWrites + kRdSends);
        std::vector<uint64_t> order[2];
        for (const ibv_wc& c : wc) {
            EXPECT_EQ(c.status, IBV_WC_SUCCESS) << "wr_id " << c.wr_id;
            order[c.qp_num == p.s[0].qp[1]->qp_num].push_back(c.wr_id);
        }
        for (unsigned k = 0; k < kRdWrites; ++k) EXPECT_EQ(order[0].size() > k ? order[0][k] : ~0ull, k);
        for (unsigned k = 0; k < kRdSends; ++k) EXPECT_EQ(order[1].size() > k ? order[1][k] : ~0ull, 100 + k);
        // Every byte once and in order: the WRITEs' buffer, nothing past it, and each SEND in
        // its receive WR (posting order), no receive completing twice.
        h.expect_mem(1, b.dst.va, h.read_mem(0, b.src.va, size_t(kRdWrites) * kRdWriteBytes),
                     "WRITEs, in order");
        h.expect_fill(1, b.dst.va + size_t(kRdWrites) * kRdWriteBytes, 4096, kGuardByte, "nothing past them");
        const auto r = h.expect_wc(p.s[1].cq, kRdSends, "the SENDs' receives");
        for (size_t k = 0; k < r.size(); ++k) {
            EXPECT_EQ(r[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(r[k].wr_id, 100 + k);
            EXPECT_EQ(r[k].byte_len, kRdSendBytes);
        }
        h.expect_mem(1, b.sdst.va, h.read_mem(0, b.ssrc.va, size_t(kRdSends) * kRdSendBytes),
                     "SENDs, in order");
        h.expect_no_wc(p.s[1].cq, kQuietNs, "a message received twice");
        EXPECT_GT(h.counter_value("fabric.switch0.out2.dropped_down"), 0u) << "the primary path lost packets";
        EXPECT_GT(ctr(0, "transport_engine.timeouts"), 0u);
        EXPECT_EQ(ctr(0, "transport_engine.path_migrations"), 1u);
        EXPECT_EQ(ctr(1, "transport_engine.path_migrations"), 1u);
        // Both EE contexts migrated, each raising hcasim's EEC_PATH_MIG naming it; the
        // alternate path is the primary one now. The RD QPs never left RTS.
        EXPECT_EQ(eec_event_of(h, 0, p.s[0].eec), IBV_EVENT_EEC_PATH_MIG);
        EXPECT_EQ(eec_event_of(h, 1, p.s[1].eec), IBV_EVENT_EEC_PATH_MIG);
        ibv_eec_attr q = query_eec(p.s[0].eec);
        EXPECT_EQ(q.eec_state, IBV_QPS_RTS);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 5);
        EXPECT_EQ(q.alt_ah_attr.dlid, 4);
        q = query_eec(p.s[1].eec);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 3);
        EXPECT_EQ(q.alt_ah_attr.dlid, 2);
        EXPECT_EQ(qp_state(p.s[0].qp[0]), IBV_QPS_RTS);
        EXPECT_EQ(qp_state(p.s[0].qp[1]), IBV_QPS_RTS);
        // A later message of either QP goes over the new path at once.
        const uint64_t t0 = ctr(0, "transport_engine.timeouts");
        ASSERT_EQ(post_rd(p.s[0].qp[1], p.s[0].eec, p.s[1].qp[0]->qp_num, IBV_WR_RDMA_WRITE, b.src.va, 512,
                          b.src.mr->lkey, 7, kQkey, b.dst.va, b.dst.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, p.s[0].cq, "a WRITE after the migration").status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(0, "transport_engine.timeouts"), t0) << "no timeout: the new path works";
    });
}

SIM_TEST(E2eRd, o10_23_without_an_armed_alternate_path_the_same_cable_loss_ends_in_retry_exc_err) {
    rc_harness h(rd_cable_loss());
    h.run([](rc_harness& h) {
        rd_pair p = make_rd_slow(h);
        ASSERT_TRUE(p.s[0].qp[0] && p.s[0].qp[1] && p.s[1].qp[0] && p.s[1].qp[1]);
        // The alternate path is loaded but never armed (Migrated).
        ASSERT_EQ(eec_rts_modify(p.s[0].eec, eec_alt_path_of(h, 0), IBV_QP_ALT_PATH), 0);
        const rd_stream_bufs b = make_stream_bufs(h);
        const std::vector<ibv_wc> wc = rd_stream(h, p, b);
        ASSERT_EQ(wc.size(), kRdWrites + kRdSends);
        unsigned retry_exc = 0, ok = 0;
        for (const ibv_wc& c : wc) {
            if (c.status == IBV_WC_SUCCESS) ++ok;
            if (c.status == IBV_WC_RETRY_EXC_ERR)
                ++retry_exc;
            else
                EXPECT_TRUE(c.status == IBV_WC_SUCCESS || c.status == IBV_WC_WR_FLUSH_ERR) << c.status;
        }
        EXPECT_GE(retry_exc, 1u) << "the message on the EE context when the cable went";
        EXPECT_LT(ok, kRdWrites + kRdSends) << "some message must have been cut off by the cable";
        EXPECT_EQ(query_eec(p.s[0].eec).path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(query_eec(p.s[0].eec).ah_attr.dlid, 4) << "still the primary path";
        EXPECT_EQ(ctr(0, "transport_engine.path_migrations"), 0u);
        EXPECT_GT(h.counter_value("fabric.switch0.out2.dropped_down"), 0u);
    });
}
