// IBA Vol. 1 chapter 10 compliance tests of the firmware (verbs + driver) against the fake HCA
// bus: immediate errors and firmware-only semantics. Each test names the statement IDs it
// asserts (docs/compliance-status.tsv, scripts/compliance.py).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <set>

#include "firmware/hca_driver.h"
#include "firmware/verbs.h"
#include "fw_env.h"
#include "fw_fake_bus.h"
#include "fw_qp_setup.h"
#include "tlm_if/wqe.h"

using namespace hcasim;
using namespace hcasim::verbs;
using hcasim::fw::hca_driver;

namespace {

/// Firmware over fake_hca_bus; `tweak` edits the fake device (caps, port) before the driver
/// initialises from it.
struct env : test::fw_env {
    explicit env(const std::function<void(test::fake_hca_bus&)>& tweak = {})
        : fw_env(test::no_window(), tweak) {}
    ibv_qp* qp(ibv_qp_type t = IBV_QPT_RC, ibv_pd* on = nullptr, uint32_t wr = 8, uint32_t sge = 4) {
        return make_qp(t, {wr, wr, sge, sge, 0}, on);
    }
    hw::mpt_entry last_mpt() {
        auto v = bus.commands_of(hw::CMD_CREATE_MPT);
        hw::mpt_entry m{};
        if (!v.empty()) std::memcpy(&m, v.back().in.data(), sizeof m);
        return m;
    }
};

hw::modify_qp_in last_modify(env& e) {
    auto v = e.bus.commands_of(hw::CMD_MODIFY_QP);
    hw::modify_qp_in mi{};
    if (!v.empty()) std::memcpy(&mi, v.back().in.data(), sizeof mi);
    return mi;
}

ibv_send_wr send_wr(ibv_sge* sg, int n, ibv_wr_opcode op = IBV_WR_SEND) {
    ibv_send_wr w{};
    w.sg_list = sg;
    w.num_sge = n;
    w.opcode = op;
    return w;
}

}  // namespace

// ------------------------------------------------------------------ 10.2 addressing, PDs

TEST(FwCompliance, C10_4_connected_destination_is_set_only_through_modify_qp) {
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC}) {
        env e;
        ibv_qp* q = e.qp(t);
        ASSERT_NE(q, nullptr);
        // On creation the context holds no destination.
        hw::qp_context c;
        std::memcpy(&c, e.bus.commands_of(hw::CMD_CREATE_QP).at(0).in.data(), sizeof c);
        EXPECT_EQ(c.dlid, 0);
        EXPECT_EQ(c.dest_qpn, 0u);
        e.bring(q, IBV_QPS_RTR);
        // The destination arrives in the context through MODIFY_QP (Init -> RTR).
        hw::modify_qp_in mi = last_modify(e);
        EXPECT_EQ(mi.ctx.dlid, 2);
        EXPECT_EQ(mi.ctx.dest_qpn, 0x77u);
        EXPECT_EQ(e.bus.qps[q->qp_num].dest_qpn, 0x77u);
        e.bring(q, IBV_QPS_RTS);
        // Posting work does not carry or change a destination (no address in the WQE, no command).
        size_t cmds = e.bus.cmds.size();
        uint64_t va = e.as.alloc(256);
        ibv_mr* mr = ibv_reg_mr(e.pd, va, 256, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(mr, nullptr);
        cmds = e.bus.cmds.size();
        ibv_sge sg{va, 64, mr->lkey};
        ibv_send_wr w = send_wr(&sg, 1);
        ibv_send_wr* bad;
        ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
        hw::wqe_ctrl_seg ctrl = e.bus.read<hw::wqe_ctrl_seg>(q->sq.pa);
        EXPECT_EQ(ctrl.ds_count, 3);  // control + one data segment: no address segment
        EXPECT_EQ(e.bus.cmds.size(), cmds);
        EXPECT_EQ(q->hw_ctx.dest_qpn, 0x77u);
        // RTS -> RTS may not change the destination; SQD -> SQD may (Modify QP again).
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RTS;
        a.dest_qp_num = 0x99;
        EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_DEST_QPN), EINVAL);
        a.ah_attr.dlid = 9;
        a.ah_attr.port_num = 1;
        EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV), EINVAL);
        EXPECT_EQ(e.bus.cmds.size(), cmds);
        EXPECT_EQ(e.bus.qps[q->qp_num].dlid, 2);
        ASSERT_EQ(e.to(q, IBV_QPS_SQD), 0);
        a.qp_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV), 0) << int(t);
        EXPECT_EQ(last_modify(e).ctx.dlid, 9);
        EXPECT_EQ(e.bus.qps[q->qp_num].dlid, 9);
    }
}

TEST(FwCompliance, C10_7_each_qp_belongs_to_one_pd_and_qps_share_a_pd) {
    env e;
    ibv_pd* other = ibv_alloc_pd(e.ctx);
    ASSERT_NE(other, nullptr);
    ibv_qp* a = e.qp(IBV_QPT_RC);
    ibv_qp* b = e.qp(IBV_QPT_UD);
    ibv_qp* c = e.qp(IBV_QPT_RC, other);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->pd, e.pd);
    EXPECT_EQ(b->pd, e.pd);
    EXPECT_EQ(c->pd, other);
    EXPECT_EQ(e.pd->refs, 2u);
    EXPECT_EQ(other->refs, 1u);
    auto creates = e.bus.commands_of(hw::CMD_CREATE_QP);
    ASSERT_EQ(creates.size(), 3u);
    uint32_t pds[3];
    for (int i = 0; i < 3; ++i) {
        hw::qp_context ctx;
        std::memcpy(&ctx, creates[i].in.data(), sizeof ctx);
        pds[i] = ctx.pd;
    }
    EXPECT_EQ(pds[0], e.pd->handle);
    EXPECT_EQ(pds[1], e.pd->handle);
    EXPECT_EQ(pds[2], other->handle);
    EXPECT_NE(e.pd->handle, other->handle);
}

TEST(FwCompliance, C10_8_mrs_and_ahs_belong_to_one_pd_and_share_it) {
    env e;
    ibv_pd* other = ibv_alloc_pd(e.ctx);
    uint64_t va = e.as.alloc(8192);
    ibv_mr* m1 = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    uint32_t pd1 = e.last_mpt().pd;
    ibv_mr* m2 = ibv_reg_mr(e.pd, va + 4096, 4096, 0);
    uint32_t pd2 = e.last_mpt().pd;
    ibv_mr* m3 = ibv_reg_mr(other, va, 8192, IBV_ACCESS_LOCAL_WRITE);
    uint32_t pd3 = e.last_mpt().pd;
    ASSERT_TRUE(m1 && m2 && m3);
    EXPECT_EQ(pd1, e.pd->handle);
    EXPECT_EQ(pd2, e.pd->handle);
    EXPECT_EQ(pd3, other->handle);
    EXPECT_EQ(m1->pd, e.pd);
    EXPECT_EQ(m3->pd, other);
    ibv_ah_attr aa{};
    aa.dlid = 5;
    aa.port_num = 1;
    ibv_ah* h1 = ibv_create_ah(e.pd, &aa);
    ibv_ah* h2 = ibv_create_ah(e.pd, &aa);
    ASSERT_TRUE(h1 && h2);
    EXPECT_EQ(h1->pd, e.pd);
    EXPECT_EQ(h2->pd, e.pd);
    EXPECT_EQ(e.pd->refs, 4u);  // two MRs and two AHs share it
    EXPECT_EQ(other->refs, 1u);
}

TEST(FwCompliance, C10_10_ud_ah_of_another_pd_is_immediate_error) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_UD);
    e.bring(q, IBV_QPS_RTS);
    ibv_pd* other = ibv_alloc_pd(e.ctx);
    ibv_ah_attr aa{};
    aa.dlid = 9;
    aa.port_num = 1;
    ibv_ah* mine = ibv_create_ah(e.pd, &aa);
    ibv_ah* foreign = ibv_create_ah(other, &aa);
    ibv_send_wr w{};
    w.opcode = IBV_WR_SEND;
    w.wr.ud.remote_qpn = 0x33;
    w.wr.ud.ah = foreign;
    ibv_send_wr* bad = nullptr;
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
    EXPECT_EQ(bad, &w);
    EXPECT_EQ(q->sq.producer, 0u);
    EXPECT_EQ(e.bus.mmio.size(), m);  // nothing rung
    w.wr.ud.ah = mine;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), 0);
    EXPECT_EQ(q->sq.producer, 1u);
}

TEST(FwCompliance, o10_2_1_1_ud_ah_port_must_equal_qp_port) {
    env e([](test::fake_hca_bus& b) { b.caps.phys_port_cnt = 2; });
    ibv_qp* q = e.qp(IBV_QPT_UD);
    e.bring(q, IBV_QPS_RTS);  // primary port 1
    ibv_ah_attr aa{};
    aa.dlid = 9;
    aa.port_num = 2;
    ibv_ah* p2 = ibv_create_ah(e.pd, &aa);
    aa.port_num = 1;
    ibv_ah* p1 = ibv_create_ah(e.pd, &aa);
    ASSERT_TRUE(p1 && p2);
    ibv_send_wr w{};
    w.opcode = IBV_WR_SEND;
    w.wr.ud.remote_qpn = 0x33;
    w.wr.ud.ah = p2;
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);  // Invalid Address Handle, immediate
    EXPECT_EQ(bad, &w);
    EXPECT_EQ(q->sq.producer, 0u);
    w.wr.ud.ah = p1;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), 0);
}

// ------------------------------------------------------------------ 10.3 QP states: posting

TEST(FwCompliance, C10_24_post_recv_in_init_is_accepted_and_queued) {
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        env e;
        ibv_qp* q = e.qp(t);
        e.bring(q, IBV_QPS_INIT);
        ibv_sge sg{0x1000, 64, 1};
        ibv_recv_wr w[2]{};
        w[0].wr_id = 1;
        w[0].sg_list = &sg;
        w[0].num_sge = 1;
        w[0].next = &w[1];
        w[1] = w[0];
        w[1].wr_id = 2;
        w[1].next = nullptr;
        ibv_recv_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_recv(q, w, &bad), 0) << int(t);
        EXPECT_EQ(bad, nullptr);
        EXPECT_EQ(q->rq.producer, 2u);
        EXPECT_EQ(e.bus.mmio.back().value, hw::rq_doorbell(q->qp_num, 2));
        EXPECT_EQ(e.bus.read<hw::wqe_recv_header>(q->rq.pa + (1u << q->rq.log_stride)).wr_id, 2u);
    }
}

TEST(FwCompliance, C10_27_post_recv_in_rtr_accepted_post_send_refused) {
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        env e;
        ibv_qp* q = e.qp(t);
        e.bring(q, IBV_QPS_RTR);
        ibv_recv_wr r{};
        ibv_recv_wr* rbad = nullptr;
        EXPECT_EQ(ibv_post_recv(q, &r, &rbad), 0) << int(t);
        EXPECT_EQ(q->rq.producer, 1u);
        ibv_send_wr s{};
        ibv_send_wr* sbad = nullptr;
        EXPECT_EQ(ibv_post_send(q, &s, &sbad), EINVAL) << int(t);
        EXPECT_EQ(q->sq.producer, 0u);
    }
}

TEST(FwCompliance, C10_30_C10_33_posts_in_rts_and_sqd_are_accepted) {
    for (ibv_qp_state st : {IBV_QPS_RTS, IBV_QPS_SQD}) {
        env e;
        ibv_qp* q = e.qp(IBV_QPT_RC);
        e.bring(q, st);
        ASSERT_EQ(q->state, st);
        ibv_send_wr s{};
        s.wr_id = 3;
        ibv_send_wr* sbad = nullptr;
        size_t m = e.bus.mmio.size();
        EXPECT_EQ(ibv_post_send(q, &s, &sbad), 0) << int(st);
        ibv_recv_wr r{};
        ibv_recv_wr* rbad = nullptr;
        EXPECT_EQ(ibv_post_recv(q, &r, &rbad), 0) << int(st);
        EXPECT_EQ(q->sq.producer, 1u);
        EXPECT_EQ(q->rq.producer, 1u);
        EXPECT_EQ(e.bus.count_mmio(hca_driver::uar_offset(e.ctx->uar, hw::UAR_SQ_DOORBELL), m), 1u);
        EXPECT_EQ(e.bus.count_mmio(hca_driver::uar_offset(e.ctx->uar, hw::UAR_RQ_DOORBELL), m), 1u);
    }
}

// ------------------------------------------------------------------ 10.7 WR checks

TEST(FwCompliance, C10_93_rc_uc_message_longer_than_2_pow_31_is_an_error) {
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC}) {
        env e;
        ibv_qp* q = e.qp(t);
        e.bring(q, IBV_QPS_RTS);
        ibv_sge sg[3] = {{0x10000, 0x40000000u, 7}, {0x20000, 0x40000000u, 7}, {0x30000, 1, 7}};
        ibv_send_wr w = send_wr(sg, 3);
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL) << "2^31 + 1 bytes, transport " << int(t);
        EXPECT_EQ(bad, &w);
        EXPECT_EQ(q->sq.producer, 0u);
        w.opcode = IBV_WR_RDMA_WRITE;
        EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
        w.num_sge = 2;  // exactly the maximum message size
        EXPECT_EQ(ibv_post_send(q, &w, &bad), 0) << int(t);
        w.opcode = IBV_WR_SEND;
        EXPECT_EQ(ibv_post_send(q, &w, &bad), 0) << int(t);
        EXPECT_EQ(q->sq.producer, 2u);
    }
}

TEST(FwCompliance, o10_43_misaligned_atomic_remote_address_is_an_error) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC);
    e.bring(q, IBV_QPS_RTS);
    ibv_sge sg{0x1000, 8, 7};
    for (ibv_wr_opcode op : {IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP}) {
        ibv_send_wr w = send_wr(&sg, 1, op);
        w.wr.atomic.rkey = 0x42;
        ibv_send_wr* bad = nullptr;
        for (uint64_t off = 1; off < 8; ++off) {
            w.wr.atomic.remote_addr = 0x10000 + off;
            EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL) << off;
        }
        uint32_t before = q->sq.producer;
        w.wr.atomic.remote_addr = 0x10008;
        EXPECT_EQ(ibv_post_send(q, &w, &bad), 0);
        EXPECT_EQ(q->sq.producer, before + 1);
    }
}

TEST(FwCompliance, o10_46_atomics_are_refused_off_rc) {
    ibv_sge sg{0x1000, 8, 7};
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        env e;
        ibv_qp* q = e.qp(t);
        e.bring(q, IBV_QPS_RTS);
        ibv_ah_attr aa{};
        aa.port_num = 1;
        ibv_ah* ah = ibv_create_ah(e.pd, &aa);
        for (ibv_wr_opcode op : {IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_WR_ATOMIC_CMP_AND_SWP}) {
            ibv_send_wr w = send_wr(&sg, 1, op);
            w.wr.atomic.remote_addr = 0x10000;
            if (t == IBV_QPT_UD) w.wr.ud.ah = ah;
            ibv_send_wr* bad = nullptr;
            EXPECT_EQ(ibv_post_send(q, &w, &bad), t == IBV_QPT_RC ? 0 : EINVAL) << int(t) << " " << int(op);
        }
    }
}

TEST(FwCompliance, C10_135_immediate_errors_are_the_verbs_return_status) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, nullptr, 2, 1);
    size_t cmds = e.bus.cmds.size();
    // Modify QP: illegal transition and bad value come back as the return value, nothing sent.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL);
    EXPECT_EQ(e.bus.cmds.size(), cmds);
    EXPECT_EQ(q->state, IBV_QPS_RESET);
    // Post Send / Post Receive in Reset.
    ibv_send_wr s{};
    ibv_send_wr* sbad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &s, &sbad), EINVAL);
    ibv_recv_wr r{};
    ibv_recv_wr* rbad = nullptr;
    EXPECT_EQ(ibv_post_recv(q, &r, &rbad), EINVAL);
    e.bring(q, IBV_QPS_RTS);
    // Too many SGEs, then queue full.
    ibv_sge sg[2] = {{0x1000, 1, 1}, {0x1001, 1, 1}};
    ibv_send_wr w = send_wr(sg, 2);
    EXPECT_EQ(ibv_post_send(q, &w, &sbad), EINVAL);
    w.num_sge = 1;
    EXPECT_EQ(ibv_post_send(q, &w, &sbad), 0);
    EXPECT_EQ(ibv_post_send(q, &w, &sbad), 0);
    EXPECT_EQ(ibv_post_send(q, &w, &sbad), ENOMEM);
    // Register MR: NULL and errno.
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, e.as.alloc(64), 0, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, EINVAL);
    // Resource in use.
    EXPECT_EQ(ibv_dealloc_pd(e.pd), EBUSY);
    EXPECT_EQ(ibv_destroy_cq(e.cq), EBUSY);
}

// ------------------------------------------------------------------ 10.9 P_Key index

TEST(FwCompliance, C10_125_qp_gets_a_pkey_index_into_its_port_table_before_use) {
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        env e;
        ibv_qp* q = e.qp(t);
        size_t cmds = e.bus.cmds.size();
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qkey = 1;
        int base = IBV_QP_STATE | IBV_QP_PORT | (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
        EXPECT_EQ(ibv_modify_qp(q, &a, base), EINVAL) << "no P_Key index, transport " << int(t);
        a.pkey_index = e.bus.port.pkey_table_len;  // one past the port's table
        EXPECT_EQ(ibv_modify_qp(q, &a, base | IBV_QP_PKEY_INDEX), EINVAL);
        EXPECT_EQ(e.bus.cmds.size(), cmds);
        EXPECT_EQ(q->state, IBV_QPS_RESET);
        a.pkey_index = uint16_t(e.bus.port.pkey_table_len - 1);
        ASSERT_EQ(ibv_modify_qp(q, &a, base | IBV_QP_PKEY_INDEX), 0);
        hw::modify_qp_in mi = last_modify(e);
        EXPECT_EQ(mi.ctx.pkey_index, e.bus.port.pkey_table_len - 1);
        EXPECT_EQ(mi.ctx.port, 1);
    }
}

TEST(FwCompliance, C10_1_query_gid_and_query_pkey_read_the_hca_tables) {
    env e([](test::fake_hca_bus& b) {
        b.port.gid_prefix = 0xfe80000000000000ull;
        hw::gid_entry g0{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x22}};
        b.gid_table[0] = g0;
        b.gid_table[7].raw[15] = 7;
        b.pkey_table[15] = 0x8123;
    });
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    EXPECT_EQ(pa.gid_tbl_len, 8);
    EXPECT_EQ(pa.pkey_tbl_len, 16);
    size_t cmds = e.bus.cmds.size();
    ibv_gid g{};
    ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &g), 0);
    ASSERT_EQ(e.bus.cmds.size(), cmds + 1);
    EXPECT_EQ(e.bus.cmds.back().opcode, hw::CMD_QUERY_GID);
    EXPECT_EQ(e.bus.cmds.back().in_mod, 1u);
    EXPECT_EQ(e.bus.cmds.back().op_mod, 0u);
    const uint8_t want0[16] = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x22};
    EXPECT_EQ(std::memcmp(g.raw, want0, 16), 0) << "network byte order, as the HCA gives it";
    ASSERT_EQ(ibv_query_gid(e.ctx, 1, 7, &g), 0);
    EXPECT_EQ(e.bus.cmds.back().op_mod, 7u);
    EXPECT_EQ(g.raw[15], 7);
    uint16_t k = 0;
    ASSERT_EQ(ibv_query_pkey(e.ctx, 1, 15, &k), 0);
    EXPECT_EQ(e.bus.cmds.back().opcode, hw::CMD_QUERY_PKEY);
    EXPECT_EQ(e.bus.cmds.back().op_mod, 15u);
    EXPECT_EQ(k, 0x8123);
    ASSERT_EQ(ibv_query_pkey(e.ctx, 1, 0, &k), 0);
    EXPECT_EQ(k, 0xFFFF);
    // Out of range: refused before any command.
    cmds = e.bus.cmds.size();
    EXPECT_EQ(ibv_query_gid(e.ctx, 1, 8, &g), EINVAL);
    EXPECT_EQ(ibv_query_gid(e.ctx, 1, -1, &g), EINVAL);
    EXPECT_EQ(ibv_query_gid(e.ctx, 0, 0, &g), EINVAL);
    EXPECT_EQ(ibv_query_gid(e.ctx, 2, 0, &g), EINVAL);
    EXPECT_EQ(ibv_query_gid(e.ctx, 1, 0, nullptr), EINVAL);
    EXPECT_EQ(ibv_query_pkey(e.ctx, 1, 16, &k), EINVAL);
    EXPECT_EQ(ibv_query_pkey(e.ctx, 1, -1, &k), EINVAL);
    EXPECT_EQ(ibv_query_pkey(e.ctx, 2, 0, &k), EINVAL);
    EXPECT_EQ(ibv_query_pkey(e.ctx, 1, 0, nullptr), EINVAL);
    EXPECT_EQ(e.bus.cmds.size(), cmds);
    // An HCA refusal is an error, and the output is left alone.
    e.bus.fail_opcode[hw::CMD_QUERY_PKEY] = hw::CMD_BAD_PARAM;
    k = 0x5555;
    EXPECT_EQ(ibv_query_pkey(e.ctx, 1, 1, &k), EINVAL);
    EXPECT_EQ(k, 0x5555);
}

TEST(FwCompliance, o10_57_query_port_reports_the_hca_violation_counters) {
    env e;
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    EXPECT_EQ(pa.bad_pkey_cntr, 0u);
    EXPECT_EQ(pa.qkey_viol_cntr, 0u);
    e.bus.port.pkey_violations = 0xFFFF;
    e.bus.port.qkey_violations = 0x0102;
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);  // re-queried from the HCA
    EXPECT_EQ(pa.bad_pkey_cntr, 0xFFFFu);
    EXPECT_EQ(pa.qkey_viol_cntr, 0x0102u);
}

TEST(FwCompliance, C10_2_C10_122_no_verb_writes_the_gid_or_pkey_table) {
    env e;
    // Every verb, P_Key indices included; then the commands they issued.
    ibv_device_attr da{};
    ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    for (int i = 0; i < pa.pkey_tbl_len; ++i) {
        uint16_t k;
        ASSERT_EQ(ibv_query_pkey(e.ctx, 1, i, &k), 0);
    }
    for (int i = 0; i < pa.gid_tbl_len; ++i) {
        ibv_gid g;
        ASSERT_EQ(ibv_query_gid(e.ctx, 1, i, &g), 0);
    }
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD}) {
        ibv_qp* q = e.qp(t);
        ASSERT_NE(q, nullptr);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qkey = 1;
        a.pkey_index = uint16_t(pa.pkey_tbl_len - 1);
        ASSERT_EQ(ibv_modify_qp(q, &a,
                                IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX |
                                    (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS)),
                  0);
        a.pkey_index = 3;
        ASSERT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX), 0);  // Init -> Init
        e.bring(q, IBV_QPS_RTS);
        ibv_qp_attr qa{};
        ibv_qp_init_attr qia{};
        ASSERT_EQ(ibv_query_qp(q, &qa, IBV_QP_PKEY_INDEX, &qia), 0);
        EXPECT_EQ(qa.pkey_index, 3);
        uint64_t va = e.as.alloc(4096, 4096);
        ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(mr, nullptr);
        ibv_sge sge{va, 64, mr->lkey};
        ibv_recv_wr rw{};
        rw.sg_list = &sge;
        rw.num_sge = 1;
        ibv_recv_wr* bad_r = nullptr;
        ASSERT_EQ(ibv_post_recv(q, &rw, &bad_r), 0);
        ibv_ah_attr aa{};
        aa.dlid = 2;
        aa.port_num = 1;
        ibv_ah* ah = ibv_create_ah(e.pd, &aa);
        ASSERT_NE(ah, nullptr);
        ibv_send_wr sw{};
        sw.sg_list = &sge;
        sw.num_sge = 1;
        sw.opcode = IBV_WR_SEND;
        sw.wr.ud.ah = ah;
        sw.wr.ud.remote_qpn = 5;
        sw.wr.ud.remote_qkey = 1;
        ibv_send_wr* bad_s = nullptr;
        ASSERT_EQ(ibv_post_send(q, &sw, &bad_s), 0);
        ASSERT_EQ(ibv_destroy_qp(q), 0);
        ASSERT_EQ(ibv_destroy_ah(ah), 0);
        ASSERT_EQ(ibv_dereg_mr(mr), 0);
    }
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);
    ASSERT_EQ(ibv_req_notify_cq(e.cq, 0), 0);
    ASSERT_EQ(ibv_destroy_cq(e.cq), 0);
    ASSERT_EQ(ibv_dealloc_pd(e.pd), 0);
    ASSERT_EQ(ibv_close_device(e.ctx), 0);
    // None of them changed a table: the only commands naming the port are its queries.
    const std::set<uint16_t> issued_ok = {
        hw::CMD_QUERY_HCA,  hw::CMD_INIT_HCA,    hw::CMD_QUERY_PORT, hw::CMD_QUERY_PKEY,
        hw::CMD_QUERY_GID,  hw::CMD_CREATE_EQ,   hw::CMD_CREATE_CQ,  hw::CMD_DESTROY_CQ,
        hw::CMD_CREATE_MPT, hw::CMD_DESTROY_MPT, hw::CMD_WRITE_MTT,  hw::CMD_QUERY_MPT,
        hw::CMD_CREATE_QP,  hw::CMD_MODIFY_QP,   hw::CMD_QUERY_QP,   hw::CMD_DESTROY_QP};
    for (const auto& c : e.bus.cmds)
        EXPECT_TRUE(issued_ok.count(c.opcode)) << "opcode 0x" << std::hex << c.opcode;
    EXPECT_TRUE(e.bus.commands_of(hw::CMD_SET_PKEY).empty());
    EXPECT_EQ(e.bus.commands_of(hw::CMD_QUERY_PKEY).size(), size_t(pa.pkey_tbl_len));
    EXPECT_EQ(e.bus.commands_of(hw::CMD_QUERY_GID).size(), size_t(pa.gid_tbl_len));
    for (uint16_t op : {hw::CMD_CREATE_QP, hw::CMD_MODIFY_QP, hw::CMD_QUERY_QP})
        EXPECT_FALSE(e.bus.commands_of(op).empty()) << "the verbs ran: opcode 0x" << std::hex << op;
}

// ------------------------------------------------------------------ 10.6 memory registration

TEST(FwCompliance, C10_45_2_1_registration_is_virtual_address_based) {
    env e;
    uint64_t va = e.as.alloc(3 * 4096, 4096) + 0x123;
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 2 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(mr->addr, va);
    hw::mpt_entry m = e.last_mpt();
    EXPECT_EQ(m.start_va, va);  // the region is addressed by the consumer's VA
    EXPECT_EQ(m.length, 2u * 4096);
    auto mtts = e.bus.commands_of(hw::CMD_WRITE_MTT);
    ASSERT_EQ(mtts.size(), 1u);
    for (uint32_t i = 0; i < 3; ++i) {  // VA pages -> their physical pages
        uint64_t pa = 0, v = 0;
        ASSERT_TRUE(e.as.translate((va & ~4095ull) + i * 4096, &pa));
        std::memcpy(&v, mtts[0].in.data() + sizeof(hw::write_mtt_in) + 8 * i, 8);
        EXPECT_EQ(v, pa | hw::MTT_PRESENT);
    }
}

TEST(FwCompliance, C10_47_local_read_is_implicit_in_every_region) {
    env e;
    uint64_t va = e.as.alloc(4096);
    size_t n = e.bus.commands_of(hw::CMD_CREATE_MPT).size();
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, 0);  // no right requested at all
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(e.bus.commands_of(hw::CMD_CREATE_MPT).size(), n + 1);
    EXPECT_EQ(e.last_mpt().access, 0u);  // local read needs no bit
    EXPECT_EQ(e.last_mpt().state, hw::MPT_STATE_VALID);
    EXPECT_NE(ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_REMOTE_READ), nullptr);
}

TEST(FwCompliance, C10_49_overlapping_registrations_get_their_own_handles_and_keys) {
    env e;
    uint64_t va = e.as.alloc(4 * 4096, 4096);
    ibv_mr* a = ibv_reg_mr(e.pd, va, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* b = ibv_reg_mr(e.pd, va + 4096, 3 * 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ibv_mr* c = ibv_reg_mr(e.pd, va, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);  // same range as a
    ASSERT_TRUE(a && b && c);
    EXPECT_NE(a->handle, b->handle);
    EXPECT_NE(a->handle, c->handle);
    EXPECT_NE(b->handle, c->handle);
    EXPECT_NE(a->lkey, b->lkey);
    EXPECT_NE(a->lkey, c->lkey);
    EXPECT_NE(a->rkey, c->rkey);
    EXPECT_NE(a->mtt_first, c->mtt_first);
    EXPECT_EQ(e.bus.commands_of(hw::CMD_CREATE_MPT).size(), 3u);
    EXPECT_EQ(e.as.pin_count(va + 4096), 3u);  // the shared page is pinned by each
    EXPECT_EQ(e.as.pin_count(va), 2u);
}

TEST(FwCompliance, C10_50_registration_accepts_any_byte_alignment) {
    env e;
    uint64_t base = e.as.alloc(4 * 4096, 4096);
    for (uint64_t off : {1ull, 3ull, 7ull, 63ull, 4095ull}) {
        for (size_t len : {size_t(1), size_t(3), size_t(4097)}) {
            ibv_mr* mr = ibv_reg_mr(e.pd, base + off, len, IBV_ACCESS_LOCAL_WRITE);
            ASSERT_NE(mr, nullptr) << off << " " << len;
            hw::mpt_entry m = e.last_mpt();
            EXPECT_EQ(m.start_va, base + off);
            EXPECT_EQ(m.length, len);
            uint64_t first = (base + off) >> 12, last = (base + off + len - 1) >> 12;
            EXPECT_EQ(m.mtt_count, last - first + 1) << off << " " << len;
            ASSERT_EQ(ibv_dereg_mr(mr), 0);
        }
    }
}

TEST(FwCompliance, C10_51_registration_accepts_any_length_up_to_the_hca_limit) {
    env e([](test::fake_hca_bus& b) { b.caps.max_mr_size = 1u << 20; });
    uint64_t va = e.as.alloc((1u << 20) + 8192, 4096);
    for (size_t len : {size_t(1), size_t(2), size_t(4095), size_t(4096), size_t(12345), size_t(1u << 20)}) {
        ibv_mr* mr = ibv_reg_mr(e.pd, va + 1, len, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(mr, nullptr) << len;
        EXPECT_EQ(e.last_mpt().length, len);
        ASSERT_EQ(ibv_dereg_mr(mr), 0);
    }
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, va, (1u << 20) + 1, IBV_ACCESS_LOCAL_WRITE), nullptr);  // above the limit
    EXPECT_EQ(errno, EINVAL);
}

TEST(FwCompliance, C10_52_2_1_register_mr_pins_every_page_of_the_region) {
    env e;
    uint64_t va = e.as.alloc(6 * 4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va + 4000, 3 * 4096 - 200, IBV_ACCESS_LOCAL_WRITE);  // pages 0..3
    ASSERT_NE(mr, nullptr);
    for (uint32_t p = 0; p < 6; ++p) EXPECT_EQ(e.as.pin_count(va + p * 4096), p <= 3 ? 1u : 0u) << p;
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    for (uint32_t p = 0; p < 6; ++p) EXPECT_EQ(e.as.pin_count(va + p * 4096), 0u) << p;
}

TEST(FwCompliance, C10_58_overlapping_regions_deregister_independently) {
    env e;
    uint64_t va = e.as.alloc(4 * 4096, 4096);
    ibv_mr* a = ibv_reg_mr(e.pd, va, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* b = ibv_reg_mr(e.pd, va + 4096, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(a && b);
    uint32_t ha = a->handle, hb = b->handle;
    ASSERT_EQ(ibv_dereg_mr(a), 0);
    auto d = e.bus.commands_of(hw::CMD_DESTROY_MPT);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].in_mod, ha);  // only a's entry goes
    EXPECT_EQ(e.as.pin_count(va), 0u);
    EXPECT_EQ(e.as.pin_count(va + 4096), 1u);  // still pinned by b
    EXPECT_EQ(e.as.pin_count(va + 3 * 4096), 1u);
    EXPECT_EQ(b->handle, hb);
    ASSERT_EQ(ibv_dereg_mr(b), 0);
    EXPECT_EQ(e.bus.commands_of(hw::CMD_DESTROY_MPT).back().in_mod, hb);
    EXPECT_EQ(e.as.pin_count(va + 4096), 0u);
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

// ------------------------------------------------------------------ 10.8.6 unsignaled completions

namespace {

/// Writes the n-th CQE of `cq` as the HCA would: a send completion of WQE `wqe_counter`.
void write_send_cqe(env& e, ibv_cq* cq, uint64_t n, ibv_qp* q, uint16_t wqe_counter, uint64_t wr_id,
                    uint8_t status = hw::CQE_SUCCESS) {
    hw::cqe c{};
    c.wr_id = wr_id;
    c.qpn = q->qp_num;
    c.wqe_counter = wqe_counter;
    c.status = status;
    c.owner = uint8_t(hw::CQE_IS_SEND | hw::cqe_owner_for(n, cq->log_size));
    e.bus.mem_write(cq->ring_pa + (n & ((1u << cq->log_size) - 1)) * sizeof c, &c, sizeof c);
}

/// Posts `n` RDMA WRITEs one call each (wr_id first, first + 1, ...); returns the first error.
int post_writes(ibv_qp* q, uint32_t n, uint64_t first, unsigned flags) {
    for (uint32_t i = 0; i < n; ++i) {
        ibv_send_wr w = send_wr(nullptr, 0, IBV_WR_RDMA_WRITE);
        w.wr_id = first + i;
        w.send_flags = flags;
        ibv_send_wr* bad;
        if (int err = ibv_post_send(q, &w, &bad)) return err;
    }
    return 0;
}

hw::wqe_ctrl_seg ctrl_at(env& e, ibv_qp* q, uint32_t slot) {
    return e.bus.read<hw::wqe_ctrl_seg>(q->sq.pa + (uint64_t(slot) << q->sq.log_stride));
}

}  // namespace

TEST(FwCompliance, C10_90_signaled_and_unsignaled_wqes_are_marked_as_requested) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, nullptr, 4, 1);
    e.bring(q, IBV_QPS_RTS);
    ASSERT_EQ(post_writes(q, 1, 0, 0), 0);
    ASSERT_EQ(post_writes(q, 1, 1, IBV_SEND_SIGNALED), 0);
    EXPECT_FALSE(ctrl_at(e, q, 0).flags & hw::WQE_FLAG_SIGNALED);
    EXPECT_TRUE(ctrl_at(e, q, 1).flags & hw::WQE_FLAG_SIGNALED);
    // An all-signaled send queue signals every WQE whatever the WR asks.
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = e.cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap = {4, 4, 1, 1, 0};
    ia.sq_sig_all = 1;
    ibv_qp* all = ibv_create_qp(e.pd, &ia);
    ASSERT_NE(all, nullptr);
    EXPECT_EQ(all->hw_ctx.sig_all, 1);
    e.bring(all, IBV_QPS_RTS);
    ASSERT_EQ(post_writes(all, 1, 0, 0), 0);
    EXPECT_TRUE(ctrl_at(e, all, 0).flags & hw::WQE_FLAG_SIGNALED);
}

TEST(FwCompliance, C10_108_later_signaled_completion_frees_the_slots_of_earlier_unsignaled_wrs) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, nullptr, 16, 1);
    ASSERT_EQ(q->sq.max_wr, 16u);
    e.bring(q, IBV_QPS_RTS);
    ASSERT_EQ(post_writes(q, 10, 100, 0), 0);                 // wqe_index 0..9, unsignaled
    ASSERT_EQ(post_writes(q, 1, 110, IBV_SEND_SIGNALED), 0);  // wqe_index 10
    write_send_cqe(e, e.cq, 0, q, 10, 110);
    ibv_wc wc[4];
    ASSERT_EQ(ibv_poll_cq(e.cq, 4, wc), 1);  // one CQE for eleven WRs
    EXPECT_EQ(wc[0].wr_id, 110u);
    EXPECT_EQ(q->sq.completed, 11u);
    // All 16 slots are free again: the ring takes 16 more, the 17th is refused.
    ASSERT_EQ(post_writes(q, 16, 200, 0), 0);
    EXPECT_EQ(post_writes(q, 1, 216, 0), ENOMEM);
    // The slots of the retired unsignaled WRs were reused (slot 0 now holds wqe_index 16).
    hw::wqe_ctrl_seg c0 = ctrl_at(e, q, 0);
    EXPECT_EQ(c0.wqe_index, 16u);
    EXPECT_EQ(c0.wr_id, 205u);
}

TEST(FwCompliance, C10_108_unsignaled_wrs_alone_are_never_retired_and_fill_the_ring) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, nullptr, 16, 1);
    e.bring(q, IBV_QPS_RTS);
    ASSERT_EQ(post_writes(q, 16, 0, 0), 0);
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);  // successful unsignaled WRs produce no CQE
    EXPECT_EQ(q->sq.completed, 0u);
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(post_writes(q, 1, 16, IBV_SEND_SIGNALED), ENOMEM);
    EXPECT_EQ(e.bus.mmio.size(), m);  // nothing posted, no doorbell
}

TEST(FwCompliance, C10_105_error_completion_of_an_unsignaled_wr_is_returned_and_retires_it) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, nullptr, 4, 1);
    e.bring(q, IBV_QPS_RTS);
    ASSERT_EQ(post_writes(q, 4, 0, 0), 0);  // all unsignaled
    // The HCA completes WQE 1 in error (WQE 0 succeeded silently) and flushes 2 and 3.
    write_send_cqe(e, e.cq, 0, q, 1, 1, hw::CQE_REM_ACCESS_ERR);
    write_send_cqe(e, e.cq, 1, q, 2, 2, hw::CQE_WR_FLUSH_ERR);
    write_send_cqe(e, e.cq, 2, q, 3, 3, hw::CQE_WR_FLUSH_ERR);
    ibv_wc wc[4];
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, wc), 1);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(q->sq.completed, 2u);  // WQE 0 retired with it
    ASSERT_EQ(ibv_poll_cq(e.cq, 4, wc), 2);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc[1].wr_id, 3u);
    EXPECT_EQ(q->sq.completed, 4u);
}

TEST(FwCompliance, C10_108_send_cqe_naming_no_outstanding_wqe_retires_nothing) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, nullptr, 8, 1);
    e.bring(q, IBV_QPS_RTS);
    ASSERT_EQ(post_writes(q, 4, 0, 0), 0);
    write_send_cqe(e, e.cq, 0, q, 3, 3);
    ibv_wc wc;
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    ASSERT_EQ(q->sq.completed, 4u);
    ASSERT_EQ(post_writes(q, 2, 4, 0), 0);  // wqe_index 4, 5 outstanding
    // A repeated completion of WQE 3 (already retired) must not retire 4 and 5.
    write_send_cqe(e, e.cq, 1, q, 3, 3);
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    EXPECT_EQ(q->sq.completed, 4u);
    // Nor one naming a WQE never posted (index 9 with only 0..5 posted).
    write_send_cqe(e, e.cq, 2, q, 9, 9);
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    EXPECT_EQ(q->sq.completed, 4u);
    write_send_cqe(e, e.cq, 3, q, 5, 5);
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    EXPECT_EQ(q->sq.completed, 6u);
}
