// Shared receive queues end to end (IBA 10.2.9, 10.8.2, 10.8.3.2, 10.8.5): two nodes back to
// back; the harness QPs are left alone, and each test builds SRQs on node1 with receiving QPs
// (RC, UC, UD) attached, each connected to a sending QP of the same type on node0. Test names
// carry the compliance IDs they assert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
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

/// An SRQ on node `node` in `pd` (default: the node's harness PD).
ibv_srq* make_srq(rc_harness& h, unsigned node, uint32_t max_wr, ibv_pd* pd = nullptr, uint32_t max_sge = 2) {
    ibv_srq_init_attr a{};
    a.attr.max_wr = max_wr;
    a.attr.max_sge = max_sge;
    ibv_srq* srq = ibv_create_srq(pd ? pd : h.s[node].pd, &a);
    EXPECT_NE(srq, nullptr) << "ibv_create_srq, errno " << errno;
    if (srq) {
        EXPECT_GE(a.attr.max_wr, max_wr) << "10.2.9.2: at least the requested capacity";
    }
    return srq;
}

int post_srq(ibv_srq* srq, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id) {
    return post_one_srq_recv(srq, addr, len, lkey, wr_id);
}

/// A sending QP on node0 and a receiving QP on node1 taking its receive WQEs from `srq`.
struct link_qp {
    ibv_qp* snd = nullptr;
    ibv_qp* rcv = nullptr;
    ibv_cq* scq = nullptr;  ///< node0: send completions
    ibv_cq* rcq = nullptr;  ///< node1: receive completions
    ibv_ah* ah = nullptr;   ///< UD: node0 -> node1
};

ibv_qp* make_qp(rc_harness&, unsigned node, ibv_pd* pd, ibv_qp_type t, ibv_cq* scq, ibv_cq* rcq, ibv_srq* srq,
                uint32_t create_flags = 0) {
    ibv_qp_init_attr a{};
    a.send_cq = scq;
    a.recv_cq = rcq;
    a.srq = srq;
    a.qp_type = t;
    a.cap.max_send_wr = 64;
    a.cap.max_recv_wr = 16;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 2;
    a.create_flags = create_flags;
    ibv_qp* qp = ibv_create_qp(pd, &a);
    EXPECT_NE(qp, nullptr) << "node" << node << ": ibv_create_qp, errno " << errno;
    return qp;
}

/// Builds and connects one link; `rcq` shared if given (else a new CQ); `rpd` the receiving
/// QP's PD (default: node1's harness PD).
link_qp make_link(rc_harness& h, ibv_srq* srq, ibv_qp_type t, ibv_cq* rcq = nullptr, ibv_pd* rpd = nullptr,
                  uint32_t rcv_flags = 0) {
    static uint32_t psn = 0x1000;
    link_qp l;
    l.scq = ibv_create_cq(h.s[0].ctx, 256);
    l.rcq = rcq ? rcq : ibv_create_cq(h.s[1].ctx, 256);
    l.snd = make_qp(h, 0, h.s[0].pd, t, l.scq, ibv_create_cq(h.s[0].ctx, 4), nullptr);
    l.rcv = make_qp(h, 1, rpd ? rpd : h.s[1].pd, t, ibv_create_cq(h.s[1].ctx, 4), l.rcq, srq, rcv_flags);
    if (!l.snd || !l.rcv) return l;
    const uint32_t sp = psn += 0x100, rp = psn += 0x100;
    EXPECT_EQ(h.connect_qp(l.snd, IBV_QPS_RTS, l.rcv->qp_num, h.s[1].lid, rp, sp), 0);
    EXPECT_EQ(h.connect_qp(l.rcv, IBV_QPS_RTS, l.snd->qp_num, h.s[0].lid, sp, rp), 0);
    if (t == IBV_QPT_UD) l.ah = h.ah_to(0, 1);
    return l;
}

/// Posts one SEND (with immediate `imm` if nonzero) on the link.
int send_on(rc_harness& h, const link_qp& l, uint64_t addr, uint32_t len, uint32_t lkey, uint64_t wr_id,
            uint32_t imm = 0) {
    ibv_sge sge{addr, len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
    wr.imm_data = imm;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (l.ah) {
        wr.wr.ud.ah = l.ah;
        wr.wr.ud.remote_qpn = l.rcv->qp_num;
        wr.wr.ud.remote_qkey = h.config().qkey;
    }
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(l.snd, &wr, &bad);
}

/// Posts one signaled RDMA WRITE of `len` bytes from `src` (lkey) to `remote` (rkey) on the
/// link's sending QP.
int write_on(const link_qp& l, uint64_t src, uint32_t len, uint32_t lkey, uint64_t remote, uint32_t rkey,
             uint64_t wr_id = 0) {
    return post_write_on(l.snd, {src, len, lkey}, remote, rkey, wr_id);
}

int next_event(rc_harness& h, unsigned i, ibv_async_event* ev, uint64_t ns = 1'000'000) {
    return next_async_event(h, i, ev, ns);
}

using buf = reg_buf;
buf make_buf(rc_harness& h, unsigned i, size_t n, uint8_t fill = kGuardByte, ibv_pd* pd = nullptr,
             int access = kTargetAccess) {
    return make_reg_buf(h, i, n, fill, pd, access);
}

}  // namespace

// ---------------------------------------------------------------- create, PDs, posting rules

SIM_TEST(E2eSrq, o10_2_2_1_C10_11_2_2_an_srq_belongs_to_one_pd_shared_with_qps_and_holds_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_GT(da.max_srq, 0) << "Query HCA reports SRQ support";
        EXPECT_GT(da.max_srq_wr, 0);
        EXPECT_GT(da.max_srq_sge, 0);
        EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
        ibv_pd* pd = ibv_alloc_pd(h.s[1].ctx);
        ASSERT_NE(pd, nullptr);
        // Several SRQs and a QP in one PD.
        ibv_srq* a = make_srq(h, 1, 10, pd);
        ibv_srq* b = make_srq(h, 1, 100, pd);
        ASSERT_TRUE(a && b);
        EXPECT_NE(a->handle, b->handle);
        EXPECT_EQ(a->pd, pd);
        ibv_cq* cq = ibv_create_cq(h.s[1].ctx, 16);
        ibv_qp* qp = make_qp(h, 1, pd, IBV_QPT_RC, cq, cq, a);
        ASSERT_NE(qp, nullptr);
        ibv_qp_attr qa{};
        ibv_qp_init_attr qia{};
        ASSERT_EQ(ibv_query_qp(qp, &qa, 0, &qia), 0);
        EXPECT_EQ(qia.srq, a);
        // C10-11.2.2: the PD cannot go while the QP or an SRQ uses it; it stays allocated.
        EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
        ASSERT_EQ(ibv_destroy_qp(qp), 0);
        EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "two SRQs still use it";
        ASSERT_EQ(ibv_destroy_srq(a), 0);
        EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY) << "one SRQ still uses it";
        ibv_srq* c = make_srq(h, 1, 4, pd);  // the PD is still usable
        ASSERT_NE(c, nullptr);
        ASSERT_EQ(ibv_destroy_srq(b), 0);
        ASSERT_EQ(ibv_destroy_srq(c), 0);
        EXPECT_EQ(ibv_dealloc_pd(pd), 0);
        ASSERT_EQ(ibv_destroy_cq(cq), 0);
        // Bad requests.
        ibv_srq_init_attr bad{};
        bad.attr.max_wr = uint32_t(da.max_srq_wr) + 1;
        bad.attr.max_sge = 1;
        errno = 0;
        EXPECT_EQ(ibv_create_srq(h.s[1].pd, &bad), nullptr);
        EXPECT_EQ(errno, EINVAL);
        bad.attr.max_wr = 4;
        bad.attr.max_sge = uint32_t(da.max_srq_sge) + 1;
        EXPECT_EQ(ibv_create_srq(h.s[1].pd, &bad), nullptr);
        bad.attr.max_sge = 1;
        bad.attr.srq_limit = 2;
        EXPECT_EQ(ibv_create_srq(h.s[1].pd, &bad), nullptr) << "libibverbs: no limit at create";
    });
}

SIM_TEST(E2eSrq, o10_51_2_2_post_recv_to_a_qp_attached_to_an_srq_is_an_immediate_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 8);
        link_qp l = make_link(h, srq, IBV_QPT_RC);
        ASSERT_TRUE(l.rcv);
        buf d = make_buf(h, 1, 4096);
        ibv_sge sge{d.va, 64, d.mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 1;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_recv(l.rcv, &wr, &bad), EINVAL);
        EXPECT_EQ(bad, &wr);
        // Nothing was queued: a SEND now finds the SRQ empty (RNR), then takes the SRQ's WQE.
        buf s = make_buf(h, 0, 4096, 0x3C);
        ASSERT_EQ(send_on(h, l, s.va, 64, s.mr->lkey, 7), 0);
        h.sleep(0, 20'000);
        EXPECT_TRUE(h.wait_wc(l.rcq, 1, 1).empty());
        EXPECT_GE(ctr(1, "transport_engine.rnr_naks_sent"), 1u);
        ASSERT_EQ(post_srq(srq, d.va, 64, d.mr->lkey, 99), 0);
        const ibv_wc r = one_wc(h, l.rcq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.wr_id, 99u);
        EXPECT_EQ(r.qp_num, l.rcv->qp_num);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        h.expect_fill(1, d.va, 64, 0x3C, "payload");
    });
}

SIM_TEST(E2eSrq, o10_51_2_1_srq_posts_beyond_capacity_fail_and_are_used_only_by_qps_that_can_receive) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 7);  // capacity 7 exactly (a ring of 8)
        ASSERT_NE(srq, nullptr);
        ibv_srq_attr q{};
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_EQ(q.max_wr, 7u);
        buf d = make_buf(h, 1, 16 * 256);
        // Accepted while no QP is attached; a list past the capacity: the first seven are
        // queued, the eighth is the immediate error (10.8.2.1).
        std::vector<ibv_sge> sg(10);
        std::vector<ibv_recv_wr> wrs(10);
        for (size_t k = 0; k < wrs.size(); ++k) {
            sg[k] = {d.va + k * 256, 256, d.mr->lkey};
            wrs[k].wr_id = 100 + k;
            wrs[k].sg_list = &sg[k];
            wrs[k].num_sge = 1;
            wrs[k].next = k + 1 < wrs.size() ? &wrs[k + 1] : nullptr;
        }
        ibv_recv_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_srq_recv(srq, &wrs[0], &bad), ENOMEM);
        EXPECT_EQ(bad, &wrs[7]);
        // A QP in Init attached to the SRQ takes nothing (no message reaches it); in RTS it does.
        ibv_cq* cq = ibv_create_cq(h.s[1].ctx, 16);
        ibv_qp* idle = make_qp(h, 1, h.s[1].pd, IBV_QPT_RC, cq, cq, srq);
        ASSERT_EQ(h.connect_qp(idle, IBV_QPS_INIT, 0, 0, 0, 0), 0);
        link_qp l = make_link(h, srq, IBV_QPT_RC);
        buf s = make_buf(h, 0, 4096, 0x11);
        for (int k = 0; k < 7; ++k) ASSERT_EQ(send_on(h, l, s.va, 100, s.mr->lkey, k), 0);
        auto r = h.expect_wc(l.rcq, 7, "seven receives");
        for (size_t k = 0; k < r.size(); ++k) {
            EXPECT_EQ(r[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(r[k].wr_id, 100 + k) << "o10-53.2.1: SRQ order";
            EXPECT_EQ(r[k].byte_len, 100u);
        }
        EXPECT_TRUE(h.wait_wc(cq, 1, 1).empty()) << "the Init QP completed nothing";
        // Too many SGEs: EINVAL (the SRQ is empty now).
        ibv_sge three[3] = {sg[0], sg[1], sg[2]};
        ibv_recv_wr w3{};
        w3.sg_list = three;
        w3.num_sge = 3;
        EXPECT_EQ(ibv_post_srq_recv(srq, &w3, &bad), EINVAL);
        EXPECT_EQ(bad, &w3);
        // o10-53.2.2: polling those completions made room for seven more posts.
        wrs[6].next = nullptr;
        bad = nullptr;
        EXPECT_EQ(ibv_post_srq_recv(srq, &wrs[0], &bad), 0);
        EXPECT_EQ(bad, nullptr);
        EXPECT_EQ(post_srq(srq, d.va, 8, d.mr->lkey, 1), ENOMEM);
    });
}

// ---------------------------------------------------------------- WQE order and completions

SIM_TEST(E2eSrq, o10_53_2_1_o10_53_2_2_messages_at_several_qps_take_the_srq_wqes_in_order) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 64);
        std::vector<link_qp> links;
        for (int k = 0; k < 3; ++k) links.push_back(make_link(h, srq, IBV_QPT_RC));
        buf d = make_buf(h, 1, 64 * 512);
        for (uint64_t k = 0; k < 30; ++k)
            ASSERT_EQ(post_srq(srq, d.va + k * 512, 512, d.mr->lkey, 1000 + k), 0);
        buf s = make_buf(h, 0, 30 * 512, 0);
        for (int k = 0; k < 30; ++k) h.fill_mem(0, s.va + uint64_t(k) * 512, 512, uint8_t(k + 1));
        // One message at a time, round robin over the QPs: message k takes SRQ WQE k.
        for (int k = 0; k < 30; ++k) {
            const link_qp& l = links[size_t(k) % 3];
            ASSERT_EQ(send_on(h, l, s.va + uint64_t(k) * 512, 300, s.mr->lkey, uint64_t(k)), 0);
            EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
            const ibv_wc r = one_wc(h, l.rcq, "receive");
            EXPECT_EQ(r.status, IBV_WC_SUCCESS);
            EXPECT_EQ(r.wr_id, 1000u + uint64_t(k)) << "message " << k << " takes the next SRQ WQE";
            EXPECT_EQ(r.qp_num, l.rcv->qp_num) << "o10-53.2.6: on the receiving QP's CQ, naming it";
            EXPECT_EQ(r.src_qp, l.snd->qp_num);
            h.expect_fill(1, d.va + uint64_t(k) * 512, 300, uint8_t(k + 1), "message in its WQE's buffer");
            h.expect_fill(1, d.va + uint64_t(k) * 512 + 300, 212, kGuardByte, "nothing past it");
        }
        // Bursts on all three QPs at once: each QP's receive completions come in its sender's
        // order (RC, o10-53.2.2), every WQE is used exactly once.
        for (uint64_t k = 0; k < 30; ++k)
            ASSERT_EQ(post_srq(srq, d.va + k * 512, 512, d.mr->lkey, 2000 + k), 0);
        for (int k = 0; k < 30; ++k)
            ASSERT_EQ(
                send_on(h, links[size_t(k) % 3], s.va + uint64_t(k) * 512, 200 + k, s.mr->lkey, uint64_t(k)),
                0);
        std::vector<uint64_t> used;
        for (int q = 0; q < 3; ++q) {
            auto r = h.expect_wc(links[size_t(q)].rcq, 10, "burst receives");
            uint32_t last_len = 0;
            for (const ibv_wc& w : r) {
                EXPECT_EQ(w.status, IBV_WC_SUCCESS);
                EXPECT_GT(w.byte_len, last_len) << "in the sender's order on QP " << q;
                last_len = w.byte_len;
                used.push_back(w.wr_id);
            }
            h.expect_wc(links[size_t(q)].scq, 10, "burst sends");
        }
        std::sort(used.begin(), used.end());
        ASSERT_EQ(used.size(), 30u);
        for (size_t k = 0; k < used.size(); ++k) EXPECT_EQ(used[k], 2000u + k);
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_taken"), 60u);
    });
}

SIM_TEST(E2eSrq, o10_53_2_5_o10_53_2_6_rc_uc_and_ud_qps_share_one_srq_each_completing_on_its_cq) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 32);
        link_qp rc = make_link(h, srq, IBV_QPT_RC);
        link_qp uc = make_link(h, srq, IBV_QPT_UC);
        link_qp ud = make_link(h, srq, IBV_QPT_UD);
        ASSERT_TRUE(rc.rcv && uc.rcv && ud.rcv);
        buf d = make_buf(h, 1, 16 * 1024);
        for (uint64_t k = 0; k < 12; ++k)
            ASSERT_EQ(post_srq(srq, d.va + k * 1024, 1024, d.mr->lkey, 50 + k), 0);
        buf s = make_buf(h, 0, 4096, 0x77);
        const link_qp* order[12] = {&rc, &uc, &ud, &ud, &uc, &rc, &rc, &ud, &uc, &uc, &ud, &rc};
        for (int k = 0; k < 12; ++k) {
            ASSERT_EQ(
                send_on(h, *order[k], s.va, 100 + uint32_t(k), s.mr->lkey, uint64_t(k), 0xABC0 + uint32_t(k)),
                0);
            EXPECT_EQ(one_wc(h, order[k]->scq, "send").status, IBV_WC_SUCCESS);
            const ibv_wc r = one_wc(h, order[k]->rcq, "receive");  // o10-53.2.6: the QP's receive CQ
            EXPECT_EQ(r.status, IBV_WC_SUCCESS);
            EXPECT_EQ(r.wr_id, 50u + uint64_t(k)) << "o10-53.2.1";
            EXPECT_EQ(r.qp_num, order[k]->rcv->qp_num);
            EXPECT_EQ(r.imm_data, 0xABC0u + uint32_t(k));
            const uint32_t grh = order[k] == &ud ? 40u : 0u;
            EXPECT_EQ(r.byte_len, grh + 100u + uint32_t(k));
            h.expect_fill(1, d.va + uint64_t(k) * 1024 + grh, 100 + size_t(k), 0x77, "payload");
        }
        // o10-53.2.5: every completed SRQ WR gave exactly one completion, nowhere else.
        for (const link_qp* l : {&rc, &uc, &ud}) EXPECT_TRUE(h.wait_wc(l->rcq, 1, 1).empty());
        EXPECT_EQ(ctr(1, "transport_engine.recv_completions"), 12u);
    });
}

// ---------------------------------------------------------------- protection domains

SIM_TEST(E2eSrq, o10_2_2_2_o10_37_2_12_receive_sges_check_the_srq_pd_and_rdma_checks_the_qp_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_pd* srq_pd = ibv_alloc_pd(h.s[1].ctx);
        ibv_pd* qp_pd = ibv_alloc_pd(h.s[1].ctx);
        ASSERT_TRUE(srq_pd && qp_pd);
        ibv_srq* srq = make_srq(h, 1, 16, srq_pd);
        link_qp l = make_link(h, srq, IBV_QPT_RC, nullptr, qp_pd);
        ASSERT_TRUE(l.rcv);
        buf in_srq_pd = make_buf(h, 1, 4096, kGuardByte, srq_pd);
        buf in_qp_pd = make_buf(h, 1, 4096, kGuardByte, qp_pd);
        buf s = make_buf(h, 0, 4096, 0x5A);
        // A SEND lands in a region of the SRQ's PD.
        ASSERT_EQ(post_srq(srq, in_srq_pd.va, 256, in_srq_pd.mr->lkey, 1), 0);
        ASSERT_EQ(send_on(h, l, s.va, 200, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, l.rcq, "receive into the SRQ's PD").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        h.expect_fill(1, in_srq_pd.va, 200, 0x5A, "payload");
        // RDMA WRITE targets a region of the QP's PD.
        ASSERT_EQ(write_on(l, s.va, 128, s.mr->lkey, in_qp_pd.va, in_qp_pd.mr->rkey, 2), 0);
        EXPECT_EQ(one_wc(h, l.scq, "write into the QP's PD").status, IBV_WC_SUCCESS);
        h.expect_fill(1, in_qp_pd.va, 128, 0x5A, "written");
        // A receive SGE of the QP's PD (not the SRQ's): a protection error at the responder.
        ASSERT_EQ(post_srq(srq, in_qp_pd.va + 1024, 256, in_qp_pd.mr->lkey, 3), 0);
        ASSERT_EQ(send_on(h, l, s.va, 100, s.mr->lkey, 3), 0);
        const ibv_wc r = one_wc(h, l.rcq, "receive into the wrong PD");
        EXPECT_EQ(r.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(r.wr_id, 3u);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_REM_OP_ERR);
        h.expect_fill(1, in_qp_pd.va + 1024, 256, kGuardByte, "nothing placed");
    });
}

SIM_TEST(E2eSrq, o10_2_2_2_rdma_write_to_a_region_of_the_srq_pd_is_refused) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_pd* srq_pd = ibv_alloc_pd(h.s[1].ctx);
        ibv_srq* srq = make_srq(h, 1, 16, srq_pd);
        link_qp l = make_link(h, srq, IBV_QPT_RC);  // QP in the harness PD
        buf in_srq_pd = make_buf(h, 1, 4096, kGuardByte, srq_pd);
        buf s = make_buf(h, 0, 4096, 0x5A);
        ASSERT_EQ(write_on(l, s.va, 128, s.mr->lkey, in_srq_pd.va, in_srq_pd.mr->rkey, 2), 0);
        EXPECT_EQ(one_wc(h, l.scq, "write").status, IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(1, in_srq_pd.va, 4096, kGuardByte, "nothing written");
    });
}

// ---------------------------------------------------------------- limit, resize, destroy

SIM_TEST(E2eSrq, srq_limit_reached_fires_once_when_the_count_drops_below_it_and_disarms) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 16);
        link_qp l = make_link(h, srq, IBV_QPT_RC);
        buf d = make_buf(h, 1, 16 * 128);
        for (uint64_t k = 0; k < 8; ++k) ASSERT_EQ(post_srq(srq, d.va + k * 128, 128, d.mr->lkey, k), 0);
        ibv_srq_attr a{};
        a.srq_limit = 4;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
        ibv_srq_attr q{};
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_EQ(q.srq_limit, 4u) << "armed";
        buf s = make_buf(h, 0, 4096, 1);
        ibv_async_event ev{};
        for (int k = 0; k < 4; ++k) ASSERT_EQ(send_on(h, l, s.va, 16, s.mr->lkey, uint64_t(k)), 0);
        h.expect_wc(l.rcq, 4, "four receives");
        EXPECT_EQ(next_event(h, 1, &ev, 100'000), -1) << "4 left: not below the limit";
        ASSERT_EQ(send_on(h, l, s.va, 16, s.mr->lkey, 4), 0);
        h.expect_wc(l.rcq, 1, "fifth receive");
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_SRQ_LIMIT_REACHED)) << "3 left: below the limit";
        EXPECT_EQ(ev.element.srq, srq);
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_EQ(q.srq_limit, 0u) << "10.2.9.3: the CI resets the limit to zero";
        ASSERT_EQ(send_on(h, l, s.va, 16, s.mr->lkey, 5), 0);
        h.expect_wc(l.rcq, 1, "sixth receive");
        EXPECT_EQ(next_event(h, 1, &ev, 100'000), -1) << "disarmed: no second event";
        // Armed again (twice: the later value overwrites) below the current count: the next
        // consumption fires it.
        a.srq_limit = 1;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
        a.srq_limit = 3;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
        ASSERT_EQ(send_on(h, l, s.va, 16, s.mr->lkey, 6), 0);
        h.expect_wc(l.rcq, 1, "seventh receive");
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_SRQ_LIMIT_REACHED));
        EXPECT_EQ(next_event(h, 1, &ev, 100'000), -1) << "one event per arming";
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_limit_events"), 2u);
        // A limit above the capacity is refused.
        a.srq_limit = 100;
        EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL);
    });
}

SIM_TEST(E2eSrq, o10_10_2_1_o10_10_2_2_resize_keeps_outstanding_wrs_and_refuses_only_below_count_or_limit) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 15);
        link_qp l = make_link(h, srq, IBV_QPT_RC);
        buf d = make_buf(h, 1, 256 * 64);
        buf s = make_buf(h, 0, 256 * 64, 0);
        for (int k = 0; k < 256; ++k) h.fill_mem(0, s.va + uint64_t(k) * 64, 64, uint8_t(k));
        uint64_t posted = 0, received = 0;
        auto post = [&](int n) {
            for (int k = 0; k < n; ++k, ++posted)
                ASSERT_EQ(post_srq(srq, d.va + (posted % 256) * 64, 64, d.mr->lkey, posted), 0);
        };
        std::function<void(int)> exchange = [&](int n) {
            while (n > 32) {  // the sender's queue holds 64
                exchange(32);
                n -= 32;
            }
            for (int k = 0; k < n; ++k)
                ASSERT_EQ(send_on(h, l, s.va + (received + uint64_t(k)) % 256 * 64, 64, s.mr->lkey, 0), 0);
            auto r = h.expect_wc(l.rcq, size_t(n), "receives");
            for (const ibv_wc& w : r) {
                EXPECT_EQ(w.status, IBV_WC_SUCCESS);
                EXPECT_EQ(w.wr_id, received) << "no WR lost or repeated across a resize";
                h.expect_fill(1, d.va + (received % 256) * 64, 64, uint8_t(received % 256), "payload");
                ++received;
            }
            h.expect_wc(l.scq, size_t(n), "sends");
        };
        post(12);
        exchange(2);  // 10 outstanding, the ring has wrapped past none yet
        ibv_srq_attr a{};
        a.max_wr = 200;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0) << "o10-10.2.1: with WRs outstanding";
        EXPECT_GE(a.max_wr, 200u);
        ibv_srq_attr q{};
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_EQ(q.max_wr, a.max_wr);
        post(150);
        exchange(100);  // the 10 moved WRs first, then the new ones
        // o10-10.2.2: below the WRs outstanding (60): immediate error, SRQ unchanged.
        a.max_wr = 40;
        EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL);
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_GE(q.max_wr, 200u) << "unchanged";
        // Below the limit (the size is checked as allocated: a ring of 32 holds 31): immediate
        // error, SRQ unchanged.
        exchange(30);  // 30 outstanding
        a.srq_limit = 40;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
        a.max_wr = 31;
        EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), EINVAL) << "holds the 30, but not the limit of 40";
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_GE(q.max_wr, 200u) << "unchanged";
        EXPECT_EQ(q.srq_limit, 40u) << "unchanged";
        // Shrink and lower the limit in one call: both apply.
        a.max_wr = 31;
        a.srq_limit = 20;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
        EXPECT_EQ(a.max_wr, 31u) << "shrunk";
        ASSERT_EQ(ibv_query_srq(srq, &q), 0);
        EXPECT_EQ(q.max_wr, 31u);
        EXPECT_EQ(q.srq_limit, 20u);
        exchange(30);  // everything outstanding, from the shrunk ring; the limit fires on the way
        ibv_async_event ev{};
        EXPECT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_SRQ_LIMIT_REACHED));
        EXPECT_EQ(received, posted);
        post(30);
        exchange(30);  // the shrunk ring wraps
        EXPECT_EQ(received, posted);
    });
}

SIM_TEST(E2eSrq, o10_10_2_3_o10_10_2_4_o10_10_2_5_destroy_refused_while_attached_then_releases_posted_wrs) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 16);
        link_qp l = make_link(h, srq, IBV_QPT_UD);
        buf d = make_buf(h, 1, 16 * 256);
        for (uint64_t k = 0; k < 10; ++k) ASSERT_EQ(post_srq(srq, d.va + k * 256, 256, d.mr->lkey, k), 0);
        EXPECT_EQ(ibv_destroy_srq(srq), EBUSY) << "o10-10.2.3: a QP is still associated";
        const uint32_t number = srq->handle;
        ASSERT_EQ(to_state(l.rcv, IBV_QPS_ERR), 0);
        ibv_async_event ev{};
        EXPECT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_QP_LAST_WQE_REACHED));
        ASSERT_EQ(ibv_destroy_qp(l.rcv), 0);
        EXPECT_EQ(ibv_destroy_srq(srq), 0) << "o10-10.2.4: with ten WRs outstanding";
        EXPECT_TRUE(h.wait_wc(l.rcq, 1, kQuietNs).empty()) << "released without completions";
        // o10-10.2.5: nothing of it survives: the same SRQ number again is empty.
        ibv_srq* again = make_srq(h, 1, 16);
        ASSERT_NE(again, nullptr);
        EXPECT_EQ(again->handle, number);
        ibv_qp* rcv = make_qp(h, 1, h.s[1].pd, IBV_QPT_UD, l.rcq, l.rcq, again);
        ASSERT_EQ(h.connect_qp(rcv, IBV_QPS_RTS, 0, 0, 0, 0), 0);
        l.rcv = rcv;
        buf s = make_buf(h, 0, 4096, 9);
        const uint64_t empty_before = ctr(1, "wqe_fetcher.srq_empty");
        ASSERT_EQ(send_on(h, l, s.va, 64, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_TRUE(h.wait_wc(l.rcq, 1, kQuietNs).empty()) << "no WR of the destroyed SRQ is used";
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_empty"), empty_before + 1) << "the datagram found the SRQ empty";
        h.expect_fill(1, d.va, 16 * 256, kGuardByte, "no buffer of the destroyed SRQ written");
    });
}

// ---------------------------------------------------------------- error state, teardown

SIM_TEST(E2eSrq, srq_catastrophic_error_sets_the_error_state_which_only_destroy_leaves) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 8);
        link_qp l = make_link(h, srq, IBV_QPT_UD);
        // Point the SRQ's ring at memory that does not exist (as a misprogrammed context would):
        // the next WQE cannot be read.
        hw::modify_srq_in m{};
        m.max_wr = 7;
        m.log_size = 3;
        m.base = 0xFFFFF00000000000ull;
        ASSERT_EQ(h.s[1].sw->driver.exec(hw::CMD_MODIFY_SRQ, srq->handle, hw::SRQ_MODIFY_SIZE, &m, sizeof m),
                  hw::CMD_OK);
        buf d = make_buf(h, 1, 4096);
        ASSERT_EQ(post_srq(srq, d.va, 256, d.mr->lkey, 1), 0);
        buf s = make_buf(h, 0, 4096, 3);
        ASSERT_EQ(send_on(h, l, s.va, 64, s.mr->lkey, 1), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        ibv_async_event ev{};
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_SRQ_ERR));
        EXPECT_EQ(ev.element.srq, srq);
        EXPECT_TRUE(srq->error);
        // 10.2.9.5: posts are still accepted, but no WQE is retrieved; query and modify fail.
        EXPECT_EQ(post_srq(srq, d.va + 256, 256, d.mr->lkey, 2), 0);
        ASSERT_EQ(send_on(h, l, s.va, 64, s.mr->lkey, 2), 0);
        EXPECT_EQ(one_wc(h, l.scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_TRUE(h.wait_wc(l.rcq, 1, kQuietNs).empty());
        ibv_srq_attr a{};
        EXPECT_EQ(ibv_query_srq(srq, &a), EINVAL);
        a.srq_limit = 1;
        EXPECT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL);
        hw::srq_context c{};
        EXPECT_EQ(h.s[1].sw->driver.exec(hw::CMD_QUERY_SRQ, srq->handle, 0, nullptr, 0, &c, sizeof c),
                  hw::CMD_BAD_STATE);
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_errors"), 1u);
        h.expect_fill(1, d.va, 4096, kGuardByte, "nothing placed");
        ASSERT_EQ(ibv_destroy_qp(l.rcv), 0);
        EXPECT_EQ(ibv_destroy_srq(srq), 0) << "the way out of the error state";
    });
}

SIM_TEST(E2eSrq, last_wqe_reached_and_the_10_3_1_teardown_sequence) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 32);
        ibv_cq* shared = ibv_create_cq(h.s[1].ctx, 64);
        link_qp a = make_link(h, srq, IBV_QPT_RC, shared);
        link_qp b = make_link(h, srq, IBV_QPT_RC, shared);
        buf d = make_buf(h, 1, 32 * 8192);
        for (uint64_t k = 0; k < 20; ++k) ASSERT_EQ(post_srq(srq, d.va + k * 8192, 8192, d.mr->lkey, k), 0);
        buf s = make_buf(h, 0, 8192, 0x42);
        for (int k = 0; k < 3; ++k) ASSERT_EQ(send_on(h, a, s.va, 8192, s.mr->lkey, uint64_t(k)), 0);
        h.expect_wc(a.scq, 3, "sends on a");
        // 10.3.1: put the QP in Error, wait for Last WQE Reached, drain the CQ, then destroy.
        ASSERT_EQ(to_state(a.rcv, IBV_QPS_ERR), 0);
        ibv_async_event ev{};
        ASSERT_EQ(next_event(h, 1, &ev), int(IBV_EVENT_QP_LAST_WQE_REACHED));
        EXPECT_EQ(ev.element.qp, a.rcv);
        auto drained = h.wait_wc(shared, 64, 20'000);
        ASSERT_EQ(drained.size(), 3u) << "the three messages; the SRQ's other WRs are not flushed";
        for (const ibv_wc& w : drained) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        ASSERT_EQ(ibv_destroy_qp(a.rcv), 0);
        // The other QP keeps using the SRQ's remaining WRs, in order.
        for (int k = 0; k < 2; ++k) ASSERT_EQ(send_on(h, b, s.va, 100, s.mr->lkey, uint64_t(k)), 0);
        h.expect_wc(b.scq, 2, "b's sends");
        auto r = h.expect_wc(shared, 2, "b's receives");
        ASSERT_EQ(r.size(), 2u);
        EXPECT_EQ(r[0].wr_id, 3u);
        EXPECT_EQ(r[1].wr_id, 4u);
        EXPECT_EQ(r[0].qp_num, b.rcv->qp_num);
        // A QP that dies on its own (a remote access error) also reports Last WQE Reached.
        ASSERT_EQ(write_on(b, s.va, 8, s.mr->lkey, d.va, d.mr->rkey ^ 0xFF), 0);  // a bad key
        EXPECT_EQ(one_wc(h, b.scq, "bad write").status, IBV_WC_REM_ACCESS_ERR);
        bool last = false;
        for (int k = 0; k < 3 && !last; ++k) {
            const int t = next_event(h, 1, &ev);
            if (t == int(IBV_EVENT_QP_LAST_WQE_REACHED)) {
                last = true;
                EXPECT_EQ(ev.element.qp, b.rcv);
            } else {
                EXPECT_EQ(t, int(IBV_EVENT_QP_ACCESS_ERR));
            }
        }
        EXPECT_TRUE(last);
        ASSERT_EQ(ibv_destroy_qp(b.rcv), 0);
        EXPECT_EQ(ibv_destroy_srq(srq), 0);
    });
}

SIM_TEST(E2eSrq, reserved_lkey_wqe_from_an_srq_errors_only_the_qp_without_reserved_lkey_10_8_3) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        ASSERT_TRUE(da.reserved_lkey_supported);
        ibv_srq* srq = make_srq(h, 1, 16);
        link_qp with = make_link(h, srq, IBV_QPT_RC, nullptr, nullptr, IBV_QP_CREATE_RESERVED_LKEY);
        link_qp without = make_link(h, srq, IBV_QPT_RC);
        buf d = make_buf(h, 1, 8192);
        const uint64_t pa = h.pa_of(1, d.va);
        // WQE 0 names physical memory through the reserved L_Key; WQEs 1 and 2 are ordinary.
        ASSERT_EQ(post_srq(srq, pa, 256, da.reserved_lkey, 0), 0);
        ASSERT_EQ(post_srq(srq, d.va + 1024, 256, d.mr->lkey, 1), 0);
        ASSERT_EQ(post_srq(srq, d.va + 2048, 256, d.mr->lkey, 2), 0);
        buf s = make_buf(h, 0, 4096, 0x6B);
        ASSERT_EQ(send_on(h, without, s.va, 64, s.mr->lkey, 0), 0);
        const ibv_wc r = one_wc(h, without.rcq, "reserved L_Key on a QP without it");
        EXPECT_NE(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.wr_id, 0u);
        EXPECT_EQ(query_state(without.rcv), IBV_QPS_ERR);
        h.expect_fill(1, d.va, 256, kGuardByte, "nothing placed");
        // The other WQEs are unaffected: the QP with the reserved L_Key enabled takes WQE 1.
        ASSERT_EQ(send_on(h, with, s.va, 64, s.mr->lkey, 1), 0);
        const ibv_wc ok = one_wc(h, with.rcq, "ordinary WQE on the other QP");
        EXPECT_EQ(ok.status, IBV_WC_SUCCESS);
        EXPECT_EQ(ok.wr_id, 1u);
        h.expect_fill(1, d.va + 1024, 64, 0x6B, "payload");
    });
}

// ---------------------------------------------------------------- scale

/// 64 QPs (32 RC, 32 UD) on one SRQ; bursty senders (every sender posts two messages at once,
/// then all are idle); the receiver refills the SRQ (one posted list) only when
/// SRQ_LIMIT_REACHED arrives and re-arms it. No message is lost (UD datagrams would be, had the
/// SRQ run dry), each arrives once with its bytes, on its QP in its sender's order, and each
/// burst of 128 messages takes the count below the limit of 128 exactly once: one event per burst.
SIM_TEST(E2eSrq, srq_64_qps_rc_and_ud_bursty_senders_lose_nothing_and_limit_events_match_armings) {
    rc_config cfg;
    cfg.sim_limit_ns = 1'000'000'000ull;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        constexpr int kQps = 64, kBursts = 12, kPerBurst = 2;
        constexpr uint32_t kMsg = 256, kSlot = 512, kCap = 255, kLimit = 128;
        ibv_srq* srq = make_srq(h, 1, kCap);
        ASSERT_EQ(srq->ring.max_wr, kCap);
        ibv_cq* rcq = ibv_create_cq(h.s[1].ctx, 1024);
        std::vector<link_qp> links;
        for (int q = 0; q < kQps; ++q)
            links.push_back(make_link(h, srq, q % 2 ? IBV_QPT_UD : IBV_QPT_RC, rcq));
        const size_t slots = 512;
        buf d = make_buf(h, 1, slots * kSlot);
        buf s = make_buf(h, 0, size_t(kQps) * kBursts * kPerBurst * kMsg, 0);
        auto seed = [](int q, int m) { return uint64_t(q) * 1000 + uint64_t(m); };
        for (int q = 0; q < kQps; ++q)
            for (int m = 0; m < kBursts * kPerBurst; ++m)
                h.write_mem(0, s.va + (uint64_t(q) * kBursts * kPerBurst + uint64_t(m)) * kMsg,
                            pattern(kMsg, seed(q, m)));
        uint64_t posted = 0;
        std::vector<ibv_sge> sg(kCap);
        std::vector<ibv_recv_wr> wrs(kCap);
        auto refill = [&] {  // one list up to the capacity
            size_t n = 0;
            while (posted + n - srq->ring.completed < srq->ring.max_wr) {
                sg[n] = {d.va + ((posted + n) % slots) * kSlot, kSlot, d.mr->lkey};
                wrs[n] = ibv_recv_wr{};
                wrs[n].wr_id = posted + n;
                wrs[n].sg_list = &sg[n];
                wrs[n].num_sge = 1;
                if (n) wrs[n - 1].next = &wrs[n];
                ++n;
            }
            if (!n) return;
            ibv_recv_wr* bad = nullptr;
            ASSERT_EQ(ibv_post_srq_recv(srq, &wrs[0], &bad), 0);
            posted += n;
        };
        refill();
        ibv_srq_attr a{};
        a.srq_limit = kLimit;
        ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
        int armings = 1, events = 0;
        std::map<uint32_t, int> qp_index;
        for (int q = 0; q < kQps; ++q) qp_index[links[size_t(q)].rcv->qp_num] = q;
        std::vector<int> got(kQps, 0);
        int received = 0;
        for (int burst = 0; burst < kBursts; ++burst) {
            for (int q = 0; q < kQps; ++q)
                for (int k = 0; k < kPerBurst; ++k) {
                    const int m = burst * kPerBurst + k;
                    ASSERT_EQ(send_on(h, links[size_t(q)],
                                      s.va + (uint64_t(q) * kBursts * kPerBurst + uint64_t(m)) * kMsg, kMsg,
                                      s.mr->lkey, uint64_t(m)),
                              0);
                }
            // Receive the burst; check each message against what its sender sent.
            const int want = received + kQps * kPerBurst;
            const uint64_t deadline = h.now_ns() + 10'000'000;
            ibv_wc wc[64];
            while (received < want) {
                const int n = ibv_poll_cq(rcq, 64, wc);
                ASSERT_GE(n, 0);
                for (int k = 0; k < n; ++k) {
                    ASSERT_EQ(wc[k].status, IBV_WC_SUCCESS);
                    const int q = qp_index.at(wc[k].qp_num);
                    const int m = got[size_t(q)]++;         // each QP's messages arrive in its sender's order
                    const uint32_t grh = q % 2 ? 40u : 0u;  // UD: the GRH area comes first
                    ASSERT_EQ(wc[k].byte_len, kMsg + grh);
                    ASSERT_TRUE(h.expect_mem(1, d.va + (wc[k].wr_id % slots) * kSlot + grh,
                                             pattern(kMsg, seed(q, m)), "message bytes"));
                    ++received;
                }
                if (n == 0) {
                    ASSERT_LT(h.now_ns(), deadline)
                        << "burst " << burst << ": " << received << " of " << want << " received, srq_empty "
                        << ctr(1, "wqe_fetcher.srq_empty");
                    ibv_wait_cq(rcq, deadline - h.now_ns());
                }
            }
            for (auto& l : links) h.expect_wc(l.scq, kPerBurst, "sends");
            ibv_async_event ev{};
            while (ibv_get_async_event(h.s[1].ctx, &ev, 1'000) == 0) {
                ibv_ack_async_event(&ev);
                ASSERT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED);
                EXPECT_EQ(ev.element.srq, srq);
                ++events;
                refill();
                ASSERT_EQ(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), 0);
                ++armings;
            }
            EXPECT_EQ(events, burst + 1) << "one limit event per burst";
            h.sleep(1, 20'000);  // idle between bursts
        }
        for (int q = 0; q < kQps; ++q) EXPECT_EQ(got[size_t(q)], kBursts * kPerBurst) << "QP " << q;
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_taken"), uint64_t(received)) << "one WQE per message";
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_limit_events"), uint64_t(events))
            << "every event reached the consumer";
        EXPECT_EQ(events, kBursts);
        EXPECT_EQ(armings, events + 1) << "each event answered one arming; the last arming is still pending";
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_empty"), 0u) << "no message found the SRQ empty";
        EXPECT_EQ(ctr(0, "transport_engine.retransmits"), 0u);
    });
}

/// RC messages that find the SRQ empty are RNR-NAKed and delivered once the consumer posts.
SIM_TEST(E2eSrq, rc_messages_finding_the_srq_empty_are_rnr_naked_and_complete_after_a_post) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 64);
        std::vector<link_qp> links;
        for (int q = 0; q < 8; ++q) links.push_back(make_link(h, srq, IBV_QPT_RC));
        buf d = make_buf(h, 1, 64 * 512);
        buf s = make_buf(h, 0, 4096, 0x21);
        for (auto& l : links)
            for (int k = 0; k < 4; ++k) ASSERT_EQ(send_on(h, l, s.va, 256, s.mr->lkey, uint64_t(k)), 0);
        h.sleep(1, 10'000);
        for (auto& l : links) EXPECT_TRUE(h.wait_wc(l.rcq, 1, 1).empty());
        EXPECT_GE(ctr(1, "transport_engine.rnr_naks_sent"), 8u) << "one RNR NAK per QP at least";
        for (uint64_t k = 0; k < 32; ++k) ASSERT_EQ(post_srq(srq, d.va + k * 512, 512, d.mr->lkey, k), 0);
        std::vector<uint64_t> used;
        for (auto& l : links) {
            auto r = h.expect_wc(l.rcq, 4, "receives after the RNR wait", 10'000'000);
            for (const ibv_wc& w : r) {
                EXPECT_EQ(w.status, IBV_WC_SUCCESS);
                used.push_back(w.wr_id);
            }
            auto sc = h.expect_wc(l.scq, 4, "sends", 10'000'000);
            for (const ibv_wc& w : sc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        }
        std::sort(used.begin(), used.end());
        ASSERT_EQ(used.size(), 32u);
        for (size_t k = 0; k < used.size(); ++k) EXPECT_EQ(used[k], k) << "every WQE used once";
        EXPECT_EQ(ctr(0, "transport_engine.error_completions"), 0u);
    });
}

/// The SRQ commands refuse what the interface does not allow, whatever the driver sends.
SIM_TEST(E2eSrq, srq_commands_reject_bad_contexts_and_keep_attached_srqs) {
    rc_harness h;
    h.run([](rc_harness& h) {
        fw::hca_driver& drv = h.s[1].sw->driver;
        auto create = [&](uint32_t srqn, uint8_t log_size, uint8_t log_stride, uint32_t max_wr,
                          uint32_t limit = 0) {
            hw::srq_context c{};
            c.log_size = log_size;
            c.log_stride = log_stride;
            c.max_wr = max_wr;
            c.limit = limit;
            c.pd = h.s[1].pd->handle;
            c.base = h.pa_of(1, h.alloc(1, 1u << (log_size + std::min<uint8_t>(log_stride, 9)), 4096));
            return drv.exec(hw::CMD_CREATE_SRQ, srqn, 0, &c, sizeof c);
        };
        EXPECT_EQ(create(5, 4, 3, 8), hw::CMD_BAD_PARAM) << "slot smaller than a receive WQE header";
        EXPECT_EQ(create(5, 4, 10, 8), hw::CMD_BAD_PARAM) << "slot larger than any receive WQE";
        EXPECT_EQ(create(5, 4, 5, 16), hw::CMD_BAD_PARAM) << "capacity must be below the slot count";
        EXPECT_EQ(create(5, 4, 5, 0), hw::CMD_BAD_PARAM);
        EXPECT_EQ(create(5, 16, 5, 8), hw::CMD_BAD_PARAM) << "ring beyond 2^15 slots";
        EXPECT_EQ(create(5, 4, 5, 8, 9), hw::CMD_BAD_PARAM) << "limit above the capacity";
        EXPECT_EQ(create(100000, 4, 5, 8), hw::CMD_BAD_PARAM) << "SRQN beyond the table";
        ASSERT_EQ(create(5, 4, 5, 15), hw::CMD_OK);
        EXPECT_EQ(create(5, 4, 5, 15), hw::CMD_BAD_RESOURCE) << "exists";
        hw::srq_context q{};
        ASSERT_EQ(drv.exec(hw::CMD_QUERY_SRQ, 5, 0, nullptr, 0, &q, sizeof q), hw::CMD_OK);
        EXPECT_EQ(q.srqn, 5u);
        EXPECT_EQ(q.max_wr, 15u);
        EXPECT_EQ(q.attached, 0u);
        EXPECT_EQ(drv.exec(hw::CMD_QUERY_SRQ, 6, 0, nullptr, 0, &q, sizeof q), hw::CMD_BAD_RESOURCE);
        hw::modify_srq_in m{};
        EXPECT_EQ(drv.exec(hw::CMD_MODIFY_SRQ, 5, 4, &m, sizeof m), hw::CMD_BAD_PARAM) << "unknown mask bit";
        // A QP naming an SRQ that does not exist is refused; one naming SRQ 5 holds it.
        hw::qp_context c = h.s[1].qp->hw_ctx;
        c.state = hw::QPS_RESET;
        c.srqn = 7 + 1;
        uint32_t qpn = 0;
        ASSERT_TRUE(drv.alloc_qpn(&qpn));
        EXPECT_EQ(drv.exec(hw::CMD_CREATE_QP, qpn, 0, &c, sizeof c), hw::CMD_BAD_RESOURCE);
        c.srqn = 5 + 1;
        ASSERT_EQ(drv.exec(hw::CMD_CREATE_QP, qpn, 0, &c, sizeof c), hw::CMD_OK);
        ASSERT_EQ(drv.exec(hw::CMD_QUERY_SRQ, 5, 0, nullptr, 0, &q, sizeof q), hw::CMD_OK);
        EXPECT_EQ(q.attached, 1u);
        EXPECT_EQ(drv.exec(hw::CMD_DESTROY_SRQ, 5, 0, nullptr, 0), hw::CMD_BAD_STATE)
            << "o10-10.2.3 in hardware too";
        // MODIFY_QP cannot move the QP to another SRQ: the association stays.
        hw::modify_qp_in mi{};
        mi.ctx = c;
        mi.ctx.srqn = 0;
        mi.ctx.state = hw::QPS_ERR;
        ASSERT_EQ(drv.exec(hw::CMD_MODIFY_QP, qpn, hw::QPS_ERR, &mi, sizeof mi), hw::CMD_OK);
        hw::qp_context back{};
        ASSERT_EQ(drv.exec(hw::CMD_QUERY_QP, qpn, 0, nullptr, 0, &back, sizeof back), hw::CMD_OK);
        EXPECT_EQ(back.srqn, 6u);
        ASSERT_EQ(drv.exec(hw::CMD_DESTROY_QP, qpn, 0, nullptr, 0), hw::CMD_OK);
        EXPECT_EQ(drv.exec(hw::CMD_DESTROY_SRQ, 5, 0, nullptr, 0), hw::CMD_OK);
        EXPECT_EQ(drv.exec(hw::CMD_DESTROY_SRQ, 5, 0, nullptr, 0), hw::CMD_BAD_RESOURCE);
    });
}

/// IBA 10.5.x (multicast with SRQs): every attached UD QP of the group receives the datagram and
/// takes its own WQE from the SRQ they share; without a WQE left, that QP's copy is dropped.
SIM_TEST(E2eSrq, multicast_to_ud_qps_sharing_an_srq_takes_one_wqe_per_member_qp) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_srq* srq = make_srq(h, 1, 16);
        link_qp l = make_link(h, srq, IBV_QPT_UD);  // l.rcv is the first member
        ibv_cq* cq2 = ibv_create_cq(h.s[1].ctx, 16);
        ibv_qp* second = make_qp(h, 1, h.s[1].pd, IBV_QPT_UD, cq2, cq2, srq);
        ASSERT_EQ(h.connect_qp(second, IBV_QPS_RTS, 0, 0, 0, 0), 0);
        ibv_gid g{};
        g.raw[0] = 0xFF;
        g.raw[1] = 0x12;
        g.raw[15] = 9;
        const uint16_t mlid = 0xC009;
        ASSERT_EQ(ibv_attach_mcast(l.rcv, &g, mlid), 0);
        ASSERT_EQ(ibv_attach_mcast(second, &g, mlid), 0);
        ibv_ah_attr aa{};
        aa.dlid = mlid;
        aa.port_num = 1;
        aa.is_global = 1;
        aa.grh.dgid = g;
        aa.grh.hop_limit = 1;
        l.ah = ibv_create_ah(h.s[0].pd, &aa);
        ASSERT_NE(l.ah, nullptr);
        buf d = make_buf(h, 1, 4 * 1024);
        for (uint64_t k = 0; k < 3; ++k) ASSERT_EQ(post_srq(srq, d.va + k * 1024, 1024, d.mr->lkey, k), 0);
        buf s = make_buf(h, 0, 4096, 0x4D);
        ibv_sge sge{s.va, 100, s.mr->lkey};
        ibv_send_wr w{};
        w.sg_list = &sge;
        w.num_sge = 1;
        w.opcode = IBV_WR_SEND;
        w.send_flags = IBV_SEND_SIGNALED;
        w.wr.ud.ah = l.ah;
        w.wr.ud.remote_qpn = 0xFFFFFF;
        w.wr.ud.remote_qkey = h.config().qkey;
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(l.snd, &w, &bad), 0);
        EXPECT_EQ(one_wc(h, l.scq, "multicast send").status, IBV_WC_SUCCESS);
        const ibv_wc a = one_wc(h, l.rcq, "first member");
        const ibv_wc b = one_wc(h, cq2, "second member");
        EXPECT_EQ(a.status, IBV_WC_SUCCESS);
        EXPECT_EQ(b.status, IBV_WC_SUCCESS);
        EXPECT_EQ(a.qp_num, l.rcv->qp_num);
        EXPECT_EQ(b.qp_num, second->qp_num);
        EXPECT_NE(a.wr_id, b.wr_id) << "each member took its own WQE";
        EXPECT_EQ(a.wr_id + b.wr_id, 1u) << "WQEs 0 and 1, in the SRQ's order";
        for (const ibv_wc* c : {&a, &b}) {
            EXPECT_EQ(c->byte_len, 140u);
            h.expect_fill(1, d.va + c->wr_id * 1024 + 40, 100, 0x4D, "payload");
        }
        // One WQE left: one member gets the next datagram, the other's copy is dropped.
        const uint64_t empty_before = ctr(1, "wqe_fetcher.srq_empty");
        ASSERT_EQ(ibv_post_send(l.snd, &w, &bad), 0);
        EXPECT_EQ(one_wc(h, l.scq, "multicast send").status, IBV_WC_SUCCESS);
        auto r1 = h.wait_wc(l.rcq, 1, kQuietNs);
        auto r2 = h.wait_wc(cq2, 1, kQuietNs);
        ASSERT_EQ(r1.size() + r2.size(), 1u);
        EXPECT_EQ((r1.empty() ? r2 : r1)[0].wr_id, 2u);
        EXPECT_EQ(ctr(1, "wqe_fetcher.srq_empty"), empty_before + 1);
        ASSERT_EQ(ibv_detach_mcast(l.rcv, &g, mlid), 0);
        ASSERT_EQ(ibv_detach_mcast(second, &g, mlid), 0);
    });
}
