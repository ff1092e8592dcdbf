// XRC end to end (IBA 10.2.10, 10.10.3.6): two nodes back to back. Node1 holds an XRC domain,
// XRC SRQs in it (their completions on their own CQs) and an XRC target QP; node0 an XRC
// initiator QP connected to the target, naming an XRC SRQ in each work request. Test names carry
// the compliance IDs they assert.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

/// An XRC SRQ on node1 in `xrcd`, completing on `cq`, in `pd` (default: the harness PD).
ibv_srq* make_xsrq(rc_harness& h, ibv_xrcd* xrcd, ibv_cq* cq, uint32_t max_wr = 16, ibv_pd* pd = nullptr) {
    ibv_srq_init_attr a{};
    a.attr.max_wr = max_wr;
    a.attr.max_sge = 2;
    a.srq_type = IBV_SRQT_XRC;
    a.xrcd = xrcd;
    a.cq = cq;
    ibv_srq* srq = ibv_create_srq(pd ? pd : h.s[1].pd, &a);
    EXPECT_NE(srq, nullptr) << "ibv_create_srq (XRC), errno " << errno;
    return srq;
}

int post_xsrq(ibv_srq* srq, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id) {
    return post_one_srq_recv(srq, addr, len, lkey, wr_id);
}

/// A registered buffer of n bytes on node i, filled with `fill` (atomics allowed).
using buf = reg_buf;
buf make_buf(rc_harness& h, unsigned i, size_t n, uint8_t fill = kGuardByte, ibv_pd* pd = nullptr) {
    return make_reg_buf(h, i, n, fill, pd, kTargetAccess | IBV_ACCESS_REMOTE_ATOMIC);
}

/// An XRC domain with two SRQs (each its own CQ) and a target QP on node1; an initiator on node0.
struct xrc_link {
    ibv_xrcd* xrcd = nullptr;
    ibv_cq* cq[2] = {};     ///< node1: the SRQs' CQs
    ibv_srq* srq[2] = {};   ///< node1: XRC SRQs
    ibv_qp* tgt = nullptr;  ///< node1
    ibv_qp* ini = nullptr;  ///< node0
    ibv_cq* scq = nullptr;  ///< node0: the initiator's send completions
};

xrc_link make_xrc(rc_harness& h) {
    static uint32_t psn = 0x2000;
    xrc_link l;
    l.xrcd = ibv_open_xrcd(h.s[1].ctx);
    EXPECT_NE(l.xrcd, nullptr) << "ibv_open_xrcd, errno " << errno;
    for (int i = 0; i < 2; ++i) {
        l.cq[i] = ibv_create_cq(h.s[1].ctx, 64);
        l.srq[i] = make_xsrq(h, l.xrcd, l.cq[i]);
    }
    ibv_qp_init_attr t{};
    t.qp_type = IBV_QPT_XRC_RECV;
    t.xrcd = l.xrcd;
    l.tgt = ibv_create_qp(nullptr, &t);
    EXPECT_NE(l.tgt, nullptr) << "XRC target, errno " << errno;
    l.scq = ibv_create_cq(h.s[0].ctx, 64);
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_XRC_SEND;
    a.send_cq = l.scq;
    a.cap.max_send_wr = 32;
    a.cap.max_send_sge = 2;
    a.cap.max_inline_data = 64;
    l.ini = ibv_create_qp(h.s[0].pd, &a);
    EXPECT_NE(l.ini, nullptr) << "XRC initiator, errno " << errno;
    if (!l.tgt || !l.ini) return l;
    const uint32_t sp = psn += 0x100, rp = psn += 0x100;
    EXPECT_EQ(h.connect_qp(l.ini, IBV_QPS_RTS, l.tgt->qp_num, h.s[1].lid, rp, sp), 0);
    EXPECT_EQ(h.connect_qp(l.tgt, IBV_QPS_RTS, l.ini->qp_num, h.s[0].lid, sp, rp), 0);
    return l;
}

uint32_t srq_num(ibv_srq* srq) {
    uint32_t n = ~0u;
    EXPECT_EQ(ibv_get_srq_num(srq, &n), 0);
    return n;
}

/// Posts one signaled WR on the initiator towards XRC SRQ `srqn`.
int post_to(const xrc_link& l, uint32_t srqn, ibv_wr_opcode op, uint64_t src, uint32_t len, uint32_t lkey,
            uint64_t wr_id, uint64_t remote = 0, uint32_t rkey = 0) {
    ibv_sge sge{src, len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.xrc_remote_srqn = srqn;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    wr.wr.atomic.remote_addr = remote;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 5;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(l.ini, &wr, &bad);
}

ibv_qp_state state_of(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia), 0);
    return a.qp_state;
}

int next_event(rc_harness& h, unsigned i, ibv_async_event* ev, uint64_t ns = 1'000'000) {
    return next_async_event(h, i, ev, ns);
}

}  // namespace

// ---------------------------------------------------------------- objects

SIM_TEST(E2eXrc, domains_srqs_and_target_qps_hold_their_domain_and_query_hca_reports_xrc) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_XRC) << "Query HCA reports XRC";
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini && l.srq[0] && l.srq[1]);
        EXPECT_NE(srq_num(l.srq[0]), srq_num(l.srq[1]));
        ibv_srq_init_attr basic{};
        basic.attr.max_wr = 4;
        basic.attr.max_sge = 1;
        ibv_srq* plain = ibv_create_srq(h.s[1].pd, &basic);
        ASSERT_NE(plain, nullptr);
        uint32_t n = 0;
        EXPECT_EQ(ibv_get_srq_num(plain, &n), EINVAL) << "only XRC SRQs are named by number";
        // An XRC SRQ needs a domain and a CQ; a target QP a domain and no PD.
        ibv_srq_init_attr bad{};
        bad.attr.max_wr = 4;
        bad.srq_type = IBV_SRQT_XRC;
        bad.cq = l.cq[0];
        errno = 0;
        EXPECT_EQ(ibv_create_srq(h.s[1].pd, &bad), nullptr);
        EXPECT_EQ(errno, EINVAL);
        ibv_qp_init_attr t{};
        t.qp_type = IBV_QPT_XRC_RECV;
        EXPECT_EQ(ibv_create_qp(nullptr, &t), nullptr) << "no domain";
        t.xrcd = l.xrcd;
        EXPECT_EQ(ibv_create_qp(h.s[1].pd, &t), nullptr) << "a target has no PD";
        // Receive WRs go to XRC SRQs only; a target has no send queue.
        ibv_recv_wr rwr{};
        ibv_recv_wr* rbad = nullptr;
        EXPECT_EQ(ibv_post_recv(l.ini, &rwr, &rbad), EINVAL);
        EXPECT_EQ(ibv_post_recv(l.tgt, &rwr, &rbad), EINVAL);
        buf s = make_buf(h, 1, 4096, 1);
        ibv_sge sge{s.va, 8, s.mr->lkey};
        ibv_send_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_send_wr* sbad = nullptr;
        EXPECT_EQ(ibv_post_send(l.tgt, &wr, &sbad), EINVAL);
        ibv_qp_attr qa{};
        ibv_qp_init_attr qia{};
        ASSERT_EQ(ibv_query_qp(l.tgt, &qa, 0, &qia), 0);
        EXPECT_EQ(qia.qp_type, IBV_QPT_XRC_RECV);
        EXPECT_EQ(qia.xrcd, l.xrcd);
        EXPECT_EQ(qa.qp_state, IBV_QPS_RTS) << "10.2.10: a target goes to RTS though it never sends";
        // The domain stays while its SRQs and target QPs exist; the CQ while an SRQ uses it.
        EXPECT_EQ(ibv_close_xrcd(l.xrcd), EBUSY);
        EXPECT_EQ(ibv_destroy_cq(l.cq[0]), EBUSY);
        ASSERT_EQ(ibv_destroy_qp(l.tgt), 0);
        EXPECT_EQ(ibv_close_xrcd(l.xrcd), EBUSY) << "two SRQs left";
        ASSERT_EQ(ibv_destroy_srq(l.srq[0]), 0);
        ASSERT_EQ(ibv_destroy_srq(l.srq[1]), 0);
        EXPECT_EQ(ibv_close_xrcd(l.xrcd), 0);
        EXPECT_EQ(ibv_destroy_cq(l.cq[0]), 0);
        EXPECT_EQ(ibv_destroy_srq(plain), 0);
    });
}

// ---------------------------------------------------------------- data transfer

SIM_TEST(E2eXrc, sends_through_one_target_land_in_the_srq_each_wr_names_and_complete_on_its_cq) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        buf d0 = make_buf(h, 1, 8192), d1 = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 8192, 0x3C);
        ASSERT_EQ(post_xsrq(l.srq[0], d0.va, 8192, d0.mr->lkey, 100), 0);
        ASSERT_EQ(post_xsrq(l.srq[1], d1.va, 8192, d1.mr->lkey, 200), 0);
        // A multi-packet SEND to SRQ 1, then a one-packet SEND to SRQ 0.
        ASSERT_EQ(post_to(l, srq_num(l.srq[1]), IBV_WR_SEND, s.va, 5000, s.mr->lkey, 1), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[0]), IBV_WR_SEND, s.va, 300, s.mr->lkey, 2), 0);
        const auto sc = h.expect_wc(l.scq, 2, "sends");
        for (const ibv_wc& w : sc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        const ibv_wc r1 = one_wc(h, l.cq[1], "SRQ 1's CQ");
        EXPECT_EQ(r1.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r1.wr_id, 200u);
        EXPECT_EQ(r1.byte_len, 5000u);
        EXPECT_EQ(r1.opcode, IBV_WC_RECV);
        EXPECT_EQ(r1.qp_num, l.tgt->qp_num) << "the completion names the target QP";
        const ibv_wc r0 = one_wc(h, l.cq[0], "SRQ 0's CQ");
        EXPECT_EQ(r0.wr_id, 100u);
        EXPECT_EQ(r0.byte_len, 300u);
        h.expect_fill(1, d1.va, 5000, 0x3C, "SRQ 1's buffer");
        h.expect_fill(1, d1.va + 5000, 8192 - 5000, kGuardByte, "beyond the message");
        h.expect_fill(1, d0.va, 300, 0x3C, "SRQ 0's buffer");
        h.expect_no_wc(l.cq[0], kQuietNs, "SRQ 0");
        // The polled completions freed their SRQ slots (o10-53.2.2 through the CQE's SRQ).
        EXPECT_EQ(l.srq[0]->ring.completed, 1u);
        EXPECT_EQ(l.srq[1]->ring.completed, 1u);
        // On the wire: XRC opcodes with an XRCETH naming the SRQ, XRC ACKs back.
        EXPECT_GE(ctr(1, "transport_engine.rx_packets"), 3u);
        EXPECT_EQ(ctr(1, "transport_engine.dropped_bad_qp"), 0u);
    });
}

SIM_TEST(E2eXrc, o10_39_1_1_o10_45_1_1_rdma_write_read_and_atomics_on_xrc_check_the_named_srqs_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        // SRQ 0 is in the harness PD; a region there is the target of every RDMA operation.
        buf t = make_buf(h, 1, 4096, kGuardByte);
        buf s = make_buf(h, 0, 4096, 0x77);
        buf back = make_buf(h, 0, 4096, 0);
        const uint32_t n0 = srq_num(l.srq[0]);
        ASSERT_EQ(post_to(l, n0, IBV_WR_RDMA_WRITE, s.va, 3000, s.mr->lkey, 1, t.va, t.mr->rkey), 0);
        EXPECT_EQ(one_wc(h, l.scq, "write").status, IBV_WC_SUCCESS);
        h.expect_fill(1, t.va, 3000, 0x77, "written");
        h.expect_fill(1, t.va + 3000, 1096, kGuardByte, "beyond");
        ASSERT_EQ(post_to(l, n0, IBV_WR_RDMA_READ, back.va, 3000, back.mr->lkey, 2, t.va, t.mr->rkey), 0);
        EXPECT_EQ(one_wc(h, l.scq, "read").status, IBV_WC_SUCCESS);
        h.expect_fill(0, back.va, 3000, 0x77, "read back");
        // Fetch and add on the first 8 bytes (0x7777...): the original comes back, 5 is added.
        ASSERT_EQ(post_to(l, n0, IBV_WR_ATOMIC_FETCH_AND_ADD, back.va + 3000, 8, back.mr->lkey, 3, t.va,
                          t.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, l.scq, "fetch and add").status, IBV_WC_SUCCESS);
        const auto orig = h.read_mem(0, back.va + 3000, 8);
        EXPECT_EQ(orig, std::vector<uint8_t>(8, 0x77));
        const auto now = h.read_mem(1, t.va, 8);
        EXPECT_EQ(now[0], 0x77 + 5) << "little-endian word + 5";
        // Compare and swap with a compare value (5) that does not match: the original comes back,
        // the word stays.
        ASSERT_EQ(
            post_to(l, n0, IBV_WR_ATOMIC_CMP_AND_SWP, back.va + 3008, 8, back.mr->lkey, 4, t.va, t.mr->rkey),
            0);
        EXPECT_EQ(one_wc(h, l.scq, "compare and swap").status, IBV_WC_SUCCESS);
        EXPECT_EQ(h.read_mem(0, back.va + 3008, 8), now);
        EXPECT_EQ(h.read_mem(1, t.va, 8), now);
        // No receive WQE was used by any of them.
        h.expect_no_wc(l.cq[0], kQuietNs, "SRQ 0");
        EXPECT_EQ(l.srq[0]->ring.completed, 0u);
    });
}

SIM_TEST(E2eXrc, rdma_uses_the_pd_of_the_srq_the_request_names_not_another) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        // A third XRC SRQ in another PD: a region of that PD is writable only through it.
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ibv_srq* far = make_xsrq(h, l.xrcd, l.cq[0], 4, other);
        ASSERT_TRUE(other && far);
        buf t = make_buf(h, 1, 4096, kGuardByte, other);
        buf s = make_buf(h, 0, 4096, 0x11);
        ASSERT_EQ(post_to(l, srq_num(far), IBV_WR_RDMA_WRITE, s.va, 512, s.mr->lkey, 1, t.va, t.mr->rkey), 0);
        EXPECT_EQ(one_wc(h, l.scq, "write through the SRQ of the region's PD").status, IBV_WC_SUCCESS);
        h.expect_fill(1, t.va, 512, 0x11, "written");
        ASSERT_EQ(post_to(l, srq_num(l.srq[0]), IBV_WR_RDMA_WRITE, s.va, 512, s.mr->lkey, 2, t.va + 1024,
                          t.mr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, l.scq, "write naming an SRQ of another PD").status, IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(1, t.va + 1024, 512, kGuardByte, "nothing written");
    });
}

// ---------------------------------------------------------------- errors (10.10.3.6)

SIM_TEST(E2eXrc, o10_66_1_1_immediate_errors_leave_the_initiator_and_the_xrc_srq_working) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        // A WR naming a 25-bit SRQ number, a WR with too many SGEs: refused, nothing posted.
        EXPECT_EQ(post_to(l, 1u << 24, IBV_WR_SEND, s.va, 64, s.mr->lkey, 9), EINVAL);
        ibv_sge sges[3] = {{s.va, 8, s.mr->lkey}, {s.va, 8, s.mr->lkey}, {s.va, 8, s.mr->lkey}};
        ibv_send_wr wr{};
        wr.sg_list = sges;
        wr.num_sge = 3;
        wr.xrc_remote_srqn = srq_num(l.srq[0]);
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_send(l.ini, &wr, &bad), EINVAL);
        EXPECT_EQ(bad, &wr);
        ibv_recv_wr rwr{};
        rwr.sg_list = sges;
        rwr.num_sge = 3;
        ibv_recv_wr* rbad = nullptr;
        EXPECT_EQ(ibv_post_srq_recv(l.srq[0], &rwr, &rbad), EINVAL) << "more SGEs than the SRQ takes";
        // Both go on as if nothing happened.
        ASSERT_EQ(post_xsrq(l.srq[0], d.va, 4096, d.mr->lkey, 5), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[0]), IBV_WR_SEND, s.va, 64, s.mr->lkey, 6), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, l.cq[0], "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.wr_id, 5u);
        h.expect_fill(1, d.va, 64, 0x42, "payload");
        EXPECT_EQ(state_of(l.ini), IBV_QPS_RTS);
    });
}

SIM_TEST(E2eXrc,
         o10_66_1_3_o10_66_1_4_a_receive_error_completes_the_srq_wqe_in_error_and_leaves_the_target_in_rts) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        // A 100-byte receive buffer for a 200-byte SEND: Local Length Error at the SRQ's WQE.
        ASSERT_EQ(post_xsrq(l.srq[1], d.va, 100, d.mr->lkey, 7), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[1]), IBV_WR_SEND, s.va, 200, s.mr->lkey, 1), 0);
        const ibv_wc r = one_wc(h, l.cq[1], "the SRQ WQE");
        EXPECT_EQ(r.status, IBV_WC_LOC_LEN_ERR) << "o10-66.1.3";
        EXPECT_EQ(r.wr_id, 7u);
        EXPECT_EQ(one_wc(h, l.scq, "the initiator's WR").status, IBV_WC_REM_INV_REQ_ERR);
        EXPECT_EQ(state_of(l.tgt), IBV_QPS_RTS) << "o10-66.1.4: a completion error leaves the target's state";
        EXPECT_EQ(state_of(l.ini), IBV_QPS_ERR);
        ibv_async_event ev{};
        EXPECT_EQ(next_event(h, 1, &ev, kQuietNs), -1) << "no affiliated event at the target";
        // The target still serves: a fresh initiator continues at the PSN the target expects.
        ibv_qp_attr ta{};
        ibv_qp_init_attr tia{};
        ASSERT_EQ(ibv_query_qp(l.tgt, &ta, IBV_QP_RQ_PSN, &tia), 0);
        ASSERT_EQ(to_state(l.ini, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect_qp(l.ini, IBV_QPS_RTS, l.tgt->qp_num, h.s[1].lid, 0, ta.rq_psn), 0);
        ASSERT_EQ(post_xsrq(l.srq[1], d.va + 1024, 1024, d.mr->lkey, 8), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[1]), IBV_WR_SEND, s.va, 200, s.mr->lkey, 2), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send again").status, IBV_WC_SUCCESS);
        const ibv_wc r2 = one_wc(h, l.cq[1], "the next SRQ WQE");
        EXPECT_EQ(r2.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r2.wr_id, 8u);
        h.expect_fill(1, d.va + 1024, 200, 0x42, "payload");
    });
}

SIM_TEST(E2eXrc,
         o10_66_1_2_o10_66_1_5_an_access_error_moves_both_ends_to_error_and_later_wrs_complete_in_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        buf t = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        const uint32_t n0 = srq_num(l.srq[0]);
        // A WRITE with a wrong R_Key, then two more WRs behind it.
        ASSERT_EQ(post_to(l, n0, IBV_WR_RDMA_WRITE, s.va, 64, s.mr->lkey, 1, t.va, t.mr->rkey ^ 0xFF), 0);
        ASSERT_EQ(post_to(l, n0, IBV_WR_RDMA_WRITE, s.va, 64, s.mr->lkey, 2, t.va, t.mr->rkey), 0);
        ASSERT_EQ(post_to(l, n0, IBV_WR_SEND, s.va, 64, s.mr->lkey, 3), 0);
        const auto w = h.expect_wc(l.scq, 3, "the initiator's WRs");
        ASSERT_EQ(w.size(), 3u);
        EXPECT_EQ(w[0].wr_id, 1u);
        EXPECT_EQ(w[0].status, IBV_WC_REM_ACCESS_ERR) << "o10-66.1.2: the failing WR completes in error";
        EXPECT_EQ(w[1].status, IBV_WC_WR_FLUSH_ERR) << "later WRs complete in error";
        EXPECT_EQ(w[2].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(state_of(l.ini), IBV_QPS_ERR);
        // o10-66.1.5, o10-66.1.6: the target's affiliated error moves it to Error.
        ibv_async_event ev{};
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_QP_ACCESS_ERR));
        EXPECT_EQ(ev.element.qp, l.tgt);
        EXPECT_EQ(state_of(l.tgt), IBV_QPS_ERR);
        h.expect_fill(1, t.va, 4096, kGuardByte, "nothing written");
        // A WR posted to the initiator in Error completes in error at once.
        ASSERT_EQ(post_to(l, n0, IBV_WR_SEND, s.va, 64, s.mr->lkey, 4), 0);
        const ibv_wc f = one_wc(h, l.scq, "posted in Error");
        EXPECT_EQ(f.wr_id, 4u);
        EXPECT_EQ(f.status, IBV_WC_WR_FLUSH_ERR);
    });
}

SIM_TEST(E2eXrc, o10_66_1_6_an_srq_error_leaves_the_target_qp_alone) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        // Point SRQ 0's ring at memory that does not exist: its next WQE cannot be read.
        hw::modify_srq_in m{};
        m.max_wr = 7;
        m.log_size = 3;
        m.base = 0xFFFFF00000000000ull;
        ASSERT_EQ(
            h.s[1].sw->driver.exec(hw::CMD_MODIFY_SRQ, l.srq[0]->handle, hw::SRQ_MODIFY_SIZE, &m, sizeof m),
            hw::CMD_OK);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        ASSERT_EQ(post_xsrq(l.srq[0], d.va, 256, d.mr->lkey, 1), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[0]), IBV_WR_SEND, s.va, 64, s.mr->lkey, 1), 0);
        ibv_async_event ev{};
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_SRQ_ERR));
        EXPECT_EQ(ev.element.srq, l.srq[0]);
        EXPECT_EQ(state_of(l.tgt), IBV_QPS_RTS) << "an SRQ-only error leaves the target QP";
        EXPECT_EQ(next_event(h, 1, &ev, kQuietNs), -1) << "no event for the target QP";
        h.expect_fill(1, d.va, 4096, kGuardByte, "nothing placed");
    });
}

SIM_TEST(E2eXrc, an_xrceth_naming_an_srq_of_another_domain_is_an_invalid_request) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        ibv_xrcd* other = ibv_open_xrcd(h.s[1].ctx);
        ASSERT_NE(other, nullptr);
        ibv_srq* foreign = make_xsrq(h, other, l.cq[0], 4);
        ASSERT_NE(foreign, nullptr);
        buf d = make_buf(h, 1, 4096);
        buf s = make_buf(h, 0, 4096, 0x42);
        ASSERT_EQ(post_xsrq(foreign, d.va, 4096, d.mr->lkey, 1), 0);
        // IBA 10.2.10: processed only if the SRQ is in the target's domain.
        ASSERT_EQ(post_to(l, srq_num(foreign), IBV_WR_SEND, s.va, 64, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_REM_INV_REQ_ERR);
        h.expect_no_wc(l.cq[0], kQuietNs, "the foreign SRQ's WQE stays");
        h.expect_fill(1, d.va, 4096, kGuardByte, "nothing placed");
        ibv_async_event ev{};
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_QP_REQ_ERR));
        EXPECT_EQ(ev.element.qp, l.tgt);
        // A plain SRQ number (not XRC) is refused the same way.
        EXPECT_EQ(state_of(l.tgt), IBV_QPS_ERR);
    });
}

SIM_TEST(E2eXrc, o10_66_1_7_initiator_errors_follow_the_rc_rows_and_srq_errors_stay_with_the_srq) {
    rc_harness h;
    h.run([](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        buf s = make_buf(h, 0, 4096, 0x42);
        // Table 91 (initiator): a local protection error (a bad L_Key) completes the WR with
        // LOC_PROT_ERR and moves the initiator to Error, as on RC; nothing reaches the target
        // (no receive WQE is used: a local error is found before any packet).
        buf d = make_buf(h, 1, 4096);
        ASSERT_EQ(post_xsrq(l.srq[0], d.va, 4096, d.mr->lkey, 1), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[0]), IBV_WR_SEND, s.va, 64, s.mr->lkey ^ 0xFF, 1), 0);
        EXPECT_EQ(one_wc(h, l.scq, "bad L_Key").status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(state_of(l.ini), IBV_QPS_ERR);
        h.expect_no_wc(l.cq[0], kQuietNs, "the SRQ WQE stays");
        EXPECT_EQ(state_of(l.tgt), IBV_QPS_RTS);
        // Table 92 (XRC SRQ): the WQE stays posted and serves the next message.
        ASSERT_EQ(to_state(l.ini, IBV_QPS_RESET), 0);
        ibv_qp_attr ta{};
        ibv_qp_init_attr tia{};
        ASSERT_EQ(ibv_query_qp(l.tgt, &ta, IBV_QP_RQ_PSN, &tia), 0);
        ASSERT_EQ(h.connect_qp(l.ini, IBV_QPS_RTS, l.tgt->qp_num, h.s[1].lid, 0, ta.rq_psn), 0);
        ASSERT_EQ(post_to(l, srq_num(l.srq[0]), IBV_WR_SEND, s.va, 64, s.mr->lkey, 2), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, l.cq[0], "receive").wr_id, 1u);
    });
}

// ---------------------------------------------------------------- the wire, dissected

/// tshark 4.0 names the XRC opcodes but has no XRCETH dissector: the header sequence is shown as
/// vendor data (`infiniband.vendor`), whose first 4 bytes are the XRCETH (Rsv 8, XRCSRQ 24).
SIM_TEST(E2eXrc, a_capture_of_xrc_traffic_dissects_with_xrc_opcodes_and_the_xrceth_naming_each_wrs_srq) {
    if (std::system("command -v tshark >/dev/null 2>&1") != 0) GTEST_SKIP() << "tshark is not installed";
    const std::string dir = ::testing::TempDir() + "e2e_xrc_pcap_" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    rc_harness h;
    h.mach().capture_to(dir);
    uint32_t n0 = 0, n1 = 0;
    h.run([&](rc_harness& h) {
        xrc_link l = make_xrc(h);
        ASSERT_TRUE(l.tgt && l.ini);
        n0 = srq_num(l.srq[0]);
        n1 = srq_num(l.srq[1]);
        buf d0 = make_buf(h, 1, 8192), d1 = make_buf(h, 1, 8192);
        buf s = make_buf(h, 0, 8192, 0x3C);
        ASSERT_EQ(post_xsrq(l.srq[0], d0.va, 8192, d0.mr->lkey, 100), 0);
        ASSERT_EQ(post_xsrq(l.srq[1], d1.va, 8192, d1.mr->lkey, 200), 0);
        ASSERT_EQ(post_to(l, n1, IBV_WR_SEND, s.va, 5000, s.mr->lkey, 1), 0);
        ASSERT_EQ(post_to(l, n0, IBV_WR_SEND, s.va, 300, s.mr->lkey, 2), 0);
        ASSERT_EQ(post_to(l, n1, IBV_WR_RDMA_WRITE, s.va, 100, s.mr->lkey, 3, d1.va + 6000, d1.mr->rkey), 0);
        for (const ibv_wc& w : h.expect_wc(l.scq, 3, "sends and the write"))
            EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    });
    ASSERT_NE(n0, n1);
    ASSERT_EQ(h.mach().close_captures(), "");
    const std::string file = dir + "/link0.pcap";
    // node0's requests (direction 0): opcode, its name, and the XRCETH's SRQ number.
    const std::string f =
        tshark("-r '" + file +
               "' -Y 'erf.flags.cap == 0' -T fields -E separator=, -e infiniband.bth.opcode "
               "-e infiniband.vendor");
    std::vector<std::string> got;
    std::istringstream in(f);
    for (std::string l; std::getline(in, l);) {
        const size_t comma = l.find(',');
        ASSERT_NE(comma, std::string::npos) << l;
        ASSERT_GE(l.size(), comma + 9) << "no XRCETH after the BTH: " << l;
        const uint32_t srqn = uint32_t(std::stoul(l.substr(comma + 1, 8), nullptr, 16)) & 0xFFFFFFu;
        got.push_back(l.substr(0, comma) + " srq " + std::to_string(srqn));
    }
    // 5000 bytes at the harness's MTU of 4096: SEND First and Last (0xA0, 0xA2) to SRQ 1, SEND Only
    // (0xA4) to SRQ 0, RDMA WRITE Only (0xAA) to SRQ 1.
    const std::string s1 = " srq " + std::to_string(n1), s0 = " srq " + std::to_string(n0);
    EXPECT_EQ(got, (std::vector<std::string>{"160" + s1, "162" + s1, "164" + s0, "170" + s1})) << f;
    const std::string text = tshark("-r '" + file + "' -Y 'erf.flags.cap == 0' -V");
    EXPECT_NE(text.find("Extended Reliable Connection (XRC) - SEND First"), std::string::npos)
        << text.substr(0, 3000);
    EXPECT_NE(text.find("Extended Reliable Connection (XRC) - RDMA WRITE Only"), std::string::npos);
    // node1's responses are XRC ACKs (0xB1) and nothing is malformed.
    EXPECT_NE(tshark("-r '" + file + "' -Y 'erf.flags.cap == 1 && infiniband.bth.opcode == 177'"), "");
    EXPECT_EQ(tshark("-r '" + file + "' -Y '_ws.malformed || _ws.expert.severity >= error'"), "");
    std::filesystem::remove_all(dir);
}
