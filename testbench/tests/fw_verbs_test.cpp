// Verbs + driver logic tests against fake_hca_bus (no SystemC).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "firmware/hca_driver.h"
#include "firmware/verbs.h"
#include "fw_env.h"
#include "fw_fake_bus.h"
#include "fw_qp_setup.h"
#include "tlm_if/wqe.h"

using namespace hcasim;
using namespace hcasim::verbs;
using hcasim::fw::hca_driver;
using hcasim::test::kFwMemBase;
using hcasim::test::kFwMemBytes;

namespace {

struct env : test::fw_env {
    explicit env(fw::driver_options o = {}) : fw_env(o) {}
    ibv_qp* qp(ibv_qp_type t = IBV_QPT_RC, uint32_t wr = 8, uint32_t sge = 4, uint32_t inl = 64) {
        return make_qp(t, {wr, wr, sge, sge, inl});
    }
    uint64_t slot_pa(ibv_qp* q, uint32_t i) { return q->sq.pa + (uint64_t(i) << q->sq.log_stride); }
    ibv_mr* buffer(size_t n, uint64_t* va) {
        *va = as.alloc(n);
        EXPECT_TRUE(as.fill(*va, n, 1));
        return ibv_reg_mr(pd, *va, n, IBV_ACCESS_LOCAL_WRITE);
    }
};

size_t uar_writes(env& e, size_t from) {
    size_t n = 0;
    for (size_t i = from; i < e.bus.mmio.size(); ++i) n += e.bus.mmio[i].offset >= hw::UAR_BASE;
    return n;
}

}  // namespace

TEST(Driver, init_sequence_and_open_device) {
    env e;
    ASSERT_NE(e.ctx, nullptr);
    ASSERT_GE(e.bus.cmds.size(), 4u);
    EXPECT_EQ(e.bus.cmds[0].opcode, hw::CMD_QUERY_HCA);
    EXPECT_EQ(e.bus.cmds[1].opcode, hw::CMD_INIT_HCA);
    EXPECT_EQ(e.bus.cmds[2].opcode, hw::CMD_QUERY_PORT);
    EXPECT_EQ(e.bus.cmds[2].in_mod, 1u);
    EXPECT_EQ(e.bus.cmds[3].opcode, hw::CMD_CREATE_EQ);
    hw::init_hca_in ih;
    std::memcpy(&ih, e.bus.cmds[1].in.data(), sizeof ih);
    EXPECT_EQ(ih.log_num_qps, 10);
    EXPECT_EQ(ih.log_num_mtts, 14);  // clamped to caps.max_mtt
    EXPECT_NE(ih.qpc_base, 0u);
    EXPECT_EQ(e.bus.count_mmio(hw::REG_INT_MSI_ADDR), 1u);
    EXPECT_EQ(e.ctx->uar, 1u);
    EXPECT_EQ(hca_driver::uar_offset(1, hw::UAR_SQ_DOORBELL), hw::UAR_BASE + hw::UAR_STRIDE);
    // Each command: mailbox address then token, and the token increments.
    EXPECT_EQ(e.bus.cmds[1].token, e.bus.cmds[0].token + 1);
    ibv_device_attr da;
    ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
    EXPECT_EQ(da.phys_port_cnt, 1);
    EXPECT_EQ(da.atomic_cap, IBV_ATOMIC_HCA);
    ibv_port_attr pa;
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    EXPECT_EQ(pa.active_mtu, IBV_MTU_4096);
    EXPECT_EQ(pa.pkey_tbl_len, 16);
    EXPECT_NE(ibv_query_port(e.ctx, 2, &pa), 0);
}

TEST(Driver, command_timeout_is_fatal_and_does_not_hang) {
    test::fake_hca_bus bus(kFwMemBase, kFwMemBytes);
    fw::host_os os(bus, kFwMemBase, kFwMemBytes);
    fw::driver_options o;
    o.cmd_timeout_ns = 10'000'000;
    hca_driver drv(bus, os, o);
    bus.respond_commands = false;
    EXPECT_EQ(drv.init(), ETIMEDOUT);
    EXPECT_TRUE(drv.fatal());
    EXPECT_GE(bus.now_ns(), 10'000'000u);
    EXPECT_NE(drv.last_error().find("FATAL"), std::string::npos);
    EXPECT_EQ(drv.exec(hw::CMD_QUERY_HCA, 0, 0, nullptr, 0), fw::CMD_FATAL);
}

TEST(Driver, allocators_start_at_one_qpns_at_two_and_are_deterministic) {
    env e;
    uint32_t a, b;
    ASSERT_TRUE(e.drv.alloc_qpn(&a));
    ASSERT_TRUE(e.drv.alloc_qpn(&b));
    EXPECT_EQ(a, 2u) << "QP0 and QP1 are the special QPs";
    EXPECT_EQ(b, 3u);
    e.drv.free_qpn(a);
    ASSERT_TRUE(e.drv.alloc_qpn(&b));
    EXPECT_EQ(b, 2u);
    EXPECT_EQ(e.pd->handle, 1u);
    EXPECT_EQ(e.cq->handle, 1u);
    // Every other QPN, and never 0 or 1: num_qps - 2 consumer QPs, as ibv_query_device says.
    uint32_t n = 2, q;
    while (e.drv.alloc_qpn(&q)) {
        EXPECT_GE(q, 2u);
        ++n;
    }
    EXPECT_EQ(n, e.drv.num_qps() - 2);
    ibv_device_attr da{};
    ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
    EXPECT_EQ(da.max_qp, int(e.drv.num_qps() - 2));
}

TEST(QpState, C10_20_new_qp_is_in_reset_and_modify_sends_full_context) {
    env e;
    ibv_qp* q = e.qp();
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(q->state, IBV_QPS_RESET);
    auto creates = e.bus.commands_of(hw::CMD_CREATE_QP);
    ASSERT_EQ(creates.size(), 1u);
    hw::qp_context c;
    std::memcpy(&c, creates[0].in.data(), sizeof c);
    EXPECT_EQ(c.state, hw::QPS_RESET);
    EXPECT_EQ(c.qpn, q->qp_num);
    EXPECT_EQ(c.sq_base, q->sq.pa);
    EXPECT_EQ(c.uar, e.ctx->uar);
    EXPECT_EQ(c.max_send_wr, 8u);
    e.bring(q, IBV_QPS_RTS);
    auto mods = e.bus.commands_of(hw::CMD_MODIFY_QP);
    ASSERT_EQ(mods.size(), 3u);
    EXPECT_EQ(mods[2].op_mod, uint32_t(hw::QPS_RTS));
    hw::modify_qp_in mi;
    std::memcpy(&mi, mods[2].in.data(), sizeof mi);
    EXPECT_EQ(mi.cur_state, hw::QPS_RTR);
    EXPECT_EQ(mi.ctx.state, hw::QPS_RTS);
    EXPECT_EQ(mi.ctx.sq_psn, 200u);
    EXPECT_EQ(mi.ctx.rq_psn, 100u);
    EXPECT_EQ(mi.ctx.dest_qpn, 0x77u);
    EXPECT_EQ(mi.ctx.mtu, hw::MTU_1024);
    EXPECT_EQ(mi.ctx.retry_cnt, 7);
    ibv_qp_attr qa;
    ibv_qp_init_attr qi;
    ASSERT_EQ(ibv_query_qp(q, &qa, 0, &qi), 0);
    EXPECT_EQ(qa.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(qa.sq_psn, 200u);
}

TEST(QpState, modify_value_checks_are_immediate_errors) {
    env e;
    ibv_qp* q = e.qp();
    size_t before = e.bus.cmds.size();
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 2;  // only one port
    int mask = IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS;
    EXPECT_EQ(ibv_modify_qp(q, &a, mask), EINVAL);
    a.port_num = 1;
    a.pkey_index = 16;  // table has 16 entries
    EXPECT_EQ(ibv_modify_qp(q, &a, mask), EINVAL);
    a.pkey_index = 0;
    EXPECT_EQ(ibv_modify_qp(q, &a, mask & ~IBV_QP_PORT), EINVAL);  // missing required attr
    EXPECT_EQ(e.bus.cmds.size(), before);
    EXPECT_EQ(ibv_modify_qp(q, &a, mask), 0);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = ibv_mtu(6);
    EXPECT_EQ(ibv_modify_qp(q, &a,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              EINVAL);
    a.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE), EINVAL);  // Init -> RTS is not in Figure 126
    EXPECT_EQ(q->state, IBV_QPS_INIT);
}

TEST(QpState, C10_22_post_send_in_reset_is_immediate_error) {
    env e;
    ibv_qp* q = e.qp();
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_post_send(q, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
    EXPECT_EQ(q->sq.producer, 0u);
    EXPECT_EQ(uar_writes(e, m), 0u);
}

TEST(QpState, C10_22_post_recv_in_reset_is_immediate_error) {
    env e;
    ibv_qp* q = e.qp();
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_post_recv(q, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
    EXPECT_EQ(q->rq.producer, 0u);
    EXPECT_EQ(uar_writes(e, m), 0u);
}

TEST(QpState, C10_25_post_send_in_init_is_immediate_error) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_INIT);
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_post_send(q, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
    EXPECT_EQ(uar_writes(e, m), 0u);
}

TEST(QpState, C10_29_post_send_in_rtr_is_immediate_error) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTR);
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_post_send(q, &wr, &bad), EINVAL);
    EXPECT_EQ(uar_writes(e, m), 0u);
}

TEST(QpState, C10_96_send_post_rules_per_state) {
    const ibv_qp_state states[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                   IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};
    for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC}) {
        for (ibv_qp_state s : states) {
            if (t == IBV_QPT_RC && s == IBV_QPS_SQE) continue;  // no SQEr for RC
            env e(test::no_window());
            ibv_qp* q = e.qp(t);
            e.bring(q, s);
            ibv_send_wr wr{};
            wr.wr_id = 5;
            ibv_send_wr* bad = nullptr;
            size_t m = e.bus.mmio.size();
            int rc = ibv_post_send(q, &wr, &bad);
            bool refused = s == IBV_QPS_RESET || s == IBV_QPS_INIT || s == IBV_QPS_RTR;
            EXPECT_EQ(rc, refused ? EINVAL : 0) << int(t) << " " << int(s);
            // RTS processes; SQD queues (the HCA holds it); SQEr/Error: the HCA flushes it.
            EXPECT_EQ(q->sq.producer, refused ? 0u : 1u);
            EXPECT_EQ(e.bus.count_mmio(hca_driver::uar_offset(e.ctx->uar, hw::UAR_SQ_DOORBELL), m),
                      refused ? 0u : 1u);
        }
    }
}

TEST(QpState, C10_97_2_1_recv_post_rules_per_state) {
    const ibv_qp_state states[] = {IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
                                   IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR};
    for (ibv_qp_state s : states) {
        env e;
        ibv_qp* q = e.qp(IBV_QPT_UD);
        e.bring(q, s);
        ibv_recv_wr wr{};
        ibv_recv_wr* bad = nullptr;
        size_t m = e.bus.mmio.size();
        int rc = ibv_post_recv(q, &wr, &bad);
        bool refused = s == IBV_QPS_RESET;
        EXPECT_EQ(rc, refused ? EINVAL : 0) << int(s);
        EXPECT_EQ(q->rq.producer, refused ? 0u : 1u);
        EXPECT_EQ(e.bus.count_mmio(hca_driver::uar_offset(e.ctx->uar, hw::UAR_RQ_DOORBELL), m),
                  refused ? 0u : 1u);
    }
}

TEST(ErrorHandling, C10_136_immediate_error_wr_not_placed_on_queue) {
    env e(test::no_window());
    ibv_qp* q = e.qp(IBV_QPT_RC, 8, 2);
    e.bring(q, IBV_QPS_RTS);
    uint64_t va;
    ibv_mr* mr = e.buffer(4096, &va);
    ibv_sge sg[3] = {{va, 16, mr->lkey}, {va + 16, 16, mr->lkey}, {va + 32, 16, mr->lkey}};
    ibv_send_wr w[3]{};
    for (int i = 0; i < 3; ++i) {
        w[i].wr_id = 100 + i;
        w[i].sg_list = sg;
        w[i].num_sge = 1;
        w[i].next = i < 2 ? &w[i + 1] : nullptr;
    }
    w[2].num_sge = 3;  // > max_send_sge
    std::vector<uint8_t> before(1u << q->sq.log_stride), after(before.size());
    e.bus.mem_read(e.slot_pa(q, 2), before.data(), before.size());
    size_t m = e.bus.mmio.size();
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &w[0], &bad), EINVAL);
    EXPECT_EQ(bad, &w[2]);  // libibverbs: bad_wr is the first failing WR, earlier ones are posted
    EXPECT_EQ(q->sq.producer, 2u);
    e.bus.mem_read(e.slot_pa(q, 2), after.data(), after.size());
    EXPECT_EQ(before, after);
    ASSERT_EQ(uar_writes(e, m), 1u);
    EXPECT_EQ(e.bus.mmio.back().value, hw::sq_doorbell(q->qp_num, 2));

    // A list whose first WR fails: nothing in the ring, no doorbell at all.
    w[0].num_sge = 3;
    e.bus.mem_read(e.slot_pa(q, 2), before.data(), before.size());
    m = e.bus.mmio.size();
    EXPECT_EQ(ibv_post_send(q, &w[0], &bad), EINVAL);
    EXPECT_EQ(bad, &w[0]);
    EXPECT_EQ(q->sq.producer, 2u);
    e.bus.mem_read(e.slot_pa(q, 2), after.data(), after.size());
    EXPECT_EQ(before, after);
    EXPECT_EQ(uar_writes(e, m), 0u);
}

TEST(ErrorHandling, immediate_errors_for_bad_work_requests) {
    env e;
    ibv_qp* rc = e.qp(IBV_QPT_RC, 2, 2, 32);
    ibv_qp* uc = e.qp(IBV_QPT_UC);
    ibv_qp* ud = e.qp(IBV_QPT_UD);
    e.bring(rc, IBV_QPS_RTS);
    e.bring(uc, IBV_QPS_RTS);
    e.bring(ud, IBV_QPS_RTS);
    uint64_t va;
    ibv_mr* mr = e.buffer(8192, &va);
    ibv_sge sg{va, 64, mr->lkey};
    ibv_send_wr* bad;
    auto post = [&](ibv_qp* q, ibv_send_wr wr) { return ibv_post_send(q, &wr, &bad); };
    ibv_send_wr w{};
    w.sg_list = &sg;
    w.num_sge = 1;
    w.opcode = IBV_WR_RDMA_WRITE;
    EXPECT_EQ(post(ud, w), EINVAL);  // no RDMA on UD
    w.opcode = IBV_WR_RDMA_READ;
    EXPECT_EQ(post(uc, w), EINVAL);  // C10-83: READ on RC only
    w.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    EXPECT_EQ(post(uc, w), EINVAL);  // o10-46
    sg.length = 8;
    w.wr.atomic.remote_addr = 0x1004;
    EXPECT_EQ(post(rc, w), EINVAL);  // o10-43: misaligned atomic
    w.opcode = IBV_WR_LOCAL_INV;
    EXPECT_EQ(post(ud, w), EINVAL);  // no memory management WRs on UD
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_INLINE;
    sg.length = 33;
    EXPECT_EQ(post(rc, w), EINVAL);  // inline > max_inline_data
    sg.length = 0x80000000u;
    w.send_flags = 0;
    ibv_sge two[2] = {sg, sg};
    w.sg_list = two;
    w.num_sge = 2;
    EXPECT_EQ(post(rc, w), EINVAL);  // C10-93: message > 2^31
    w.opcode = IBV_WR_SEND;
    w.sg_list = &sg;
    w.num_sge = 1;
    sg.length = 8;
    EXPECT_EQ(post(ud, w), EINVAL);  // UD without an address handle
    EXPECT_EQ(rc->sq.producer + uc->sq.producer + ud->sq.producer, 0u);
    // Queue full: ENOMEM (capacity 2).
    EXPECT_EQ(post(rc, w), 0);
    EXPECT_EQ(post(rc, w), 0);
    EXPECT_EQ(post(rc, w), ENOMEM);
    EXPECT_EQ(rc->sq.producer, 2u);
}

TEST(Wqe, rdma_write_with_imm_three_sges_bytes_and_doorbell) {
    env e(test::no_window());
    ibv_qp* q = e.qp(IBV_QPT_RC, 8, 4);
    e.bring(q, IBV_QPS_RTS);
    uint64_t va;
    ibv_mr* mr = e.buffer(3 * 4096, &va);
    ibv_sge sg[3] = {{va + 1, 100, mr->lkey}, {va + 5000, 200, mr->lkey}, {va + 9000, 300, mr->lkey}};
    ibv_send_wr w{};
    w.wr_id = 0x1122334455667788ull;
    w.sg_list = sg;
    w.num_sge = 3;
    w.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    w.imm_data = 0xCAFEBABE;
    w.wr.rdma.remote_addr = 0xABCDEF000ull;
    w.wr.rdma.rkey = 0x4201;
    ibv_send_wr* bad;
    size_t m = e.bus.mmio.size();
    uint64_t cost_before = e.bus.cost[int(cpu_op::build_wqe)];
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    EXPECT_EQ(e.bus.cost[int(cpu_op::build_wqe)], cost_before + 1);
    uint8_t b[112];
    e.bus.mem_read(e.slot_pa(q, 0), b, sizeof b);
    hw::wqe_ctrl_seg c;
    std::memcpy(&c, b, 32);
    EXPECT_EQ(c.opcode, hw::WQE_OP_RDMA_WRITE_IMM);
    EXPECT_EQ(c.flags, hw::WQE_FLAG_SIGNALED | hw::WQE_FLAG_SOLICITED);
    EXPECT_EQ(c.ds_count, 6);  // 32 + 16 + 3 * 16 = 96 bytes
    EXPECT_EQ(c.rsvd0, 0);
    EXPECT_EQ(c.qpn, q->qp_num);
    EXPECT_EQ(c.wqe_index, 0);
    EXPECT_EQ(c.rsvd1, 0);
    EXPECT_EQ(c.imm, 0xCAFEBABEu);
    EXPECT_EQ(c.wr_id, w.wr_id);
    EXPECT_EQ(c.rsvd2, 0u);
    hw::wqe_raddr_seg r;
    std::memcpy(&r, b + 32, 16);
    EXPECT_EQ(r.remote_va, 0xABCDEF000ull);
    EXPECT_EQ(r.rkey, 0x4201u);
    EXPECT_EQ(r.rsvd, 0u);
    for (int i = 0; i < 3; ++i) {
        hw::wqe_data_seg d;
        std::memcpy(&d, b + 48 + 16 * i, 16);
        EXPECT_EQ(d.byte_count, sg[i].length);
        EXPECT_EQ(d.lkey, mr->lkey);
        EXPECT_EQ(d.addr, sg[i].addr);
    }
    for (int i = 96; i < 112; ++i) EXPECT_EQ(b[i], 0) << i;  // nothing past ds_count
    ASSERT_EQ(uar_writes(e, m), 1u);
    EXPECT_EQ(e.bus.mmio.back().offset, hca_driver::uar_offset(e.ctx->uar, hw::UAR_SQ_DOORBELL));
    EXPECT_EQ(e.bus.mmio.back().bytes.size(), 8u);
    EXPECT_EQ(e.bus.mmio.back().value, hw::sq_doorbell(q->qp_num, 1));
}

TEST(Wqe, inline_send_through_inline_window) {
    env e;  // use_inline_window defaults to true
    ibv_qp* q = e.qp(IBV_QPT_RC, 8, 1, 64);
    e.bring(q, IBV_QPS_RTS);
    uint64_t va = e.as.alloc(64);
    ASSERT_TRUE(e.as.fill(va, 40, 0x30));
    ibv_sge sg{va, 40, 0};
    ibv_send_wr w{};
    w.wr_id = 9;
    w.sg_list = &sg;
    w.num_sge = 1;
    w.opcode = IBV_WR_SEND;
    w.send_flags = IBV_SEND_INLINE;
    ibv_send_wr* bad;
    size_t m = e.bus.mmio.size();
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    ASSERT_EQ(uar_writes(e, m), 1u);
    const auto& rec = e.bus.mmio.back();
    EXPECT_EQ(rec.offset, hca_driver::uar_offset(e.ctx->uar, hw::UAR_INLINE_WQE));
    ASSERT_EQ(rec.bytes.size(), 128u);  // 32 + align16(4 + 40) = 80 -> two basic blocks
    uint8_t ring[128];
    e.bus.mem_read(e.slot_pa(q, 0), ring, 80);
    EXPECT_EQ(0, std::memcmp(ring, rec.bytes.data(), 80));  // the same WQE is also in the ring
    hw::wqe_ctrl_seg c;
    std::memcpy(&c, rec.bytes.data(), 32);
    EXPECT_EQ(c.flags, hw::WQE_FLAG_INLINE);
    EXPECT_EQ(c.ds_count, 5);
    EXPECT_EQ(c.wqe_index, 0);
    uint32_t bc;
    std::memcpy(&bc, rec.bytes.data() + 32, 4);
    EXPECT_EQ(bc, hw::INLINE_SEG_FLAG | 40u);
    for (int i = 0; i < 40; ++i) EXPECT_EQ(rec.bytes[36 + i], uint8_t(0x30 + i));
    for (size_t i = 76; i < 128; ++i) EXPECT_EQ(rec.bytes[i], 0);
    // Two WRs in one call: one doorbell, no window.
    ibv_send_wr w2 = w;
    w.next = &w2;
    m = e.bus.mmio.size();
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    ASSERT_EQ(uar_writes(e, m), 1u);
    EXPECT_EQ(e.bus.mmio.back().value, hw::sq_doorbell(q->qp_num, 3));
}

TEST(Wqe, recv_wqe_bytes) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, 8, 2);
    e.bring(q, IBV_QPS_INIT);
    ibv_sge sg[2] = {{0x1000, 64, 7}, {0x2000, 128, 8}};
    ibv_recv_wr w{};
    w.wr_id = 77;
    w.sg_list = sg;
    w.num_sge = 2;
    ibv_recv_wr* bad;
    ASSERT_EQ(ibv_post_recv(q, &w, &bad), 0);
    ASSERT_EQ(ibv_post_recv(q, &w, &bad), 0);
    hw::wqe_recv_header h = e.bus.read<hw::wqe_recv_header>(q->rq.pa + (1u << q->rq.log_stride));
    EXPECT_EQ(h.wr_id, 77u);
    EXPECT_EQ(h.num_sge, 2);
    EXPECT_EQ(h.wqe_index, 1);
    hw::wqe_data_seg d = e.bus.read<hw::wqe_data_seg>(q->rq.pa + (1u << q->rq.log_stride) + 32);
    EXPECT_EQ(d.byte_count, 128u);
    EXPECT_EQ(d.lkey, 8u);
    EXPECT_EQ(e.bus.mmio.back().value, hw::rq_doorbell(q->qp_num, 2));
}

TEST(Cq, poll_owner_bit_across_wraparound) {
    env e;
    ibv_cq* cq = ibv_create_cq(e.ctx, 3);  // 4 entries
    ASSERT_NE(cq, nullptr);
    EXPECT_EQ(cq->cqe, 3);
    ibv_qp* q = e.qp(IBV_QPT_UD, 16, 1);
    e.bring(q, IBV_QPS_RTS);
    ibv_wc wc[8];
    EXPECT_EQ(ibv_poll_cq(cq, 8, wc), 0);
    uint64_t n = 0;
    for (int round = 0; round < 5; ++round) {
        for (int k = 0; k < 3; ++k, ++n) {
            hw::cqe c{};
            c.wr_id = 1000 + n;
            c.qpn = q->qp_num;
            c.byte_len = uint32_t(n);
            c.status = hw::CQE_SUCCESS;
            c.opcode = hw::CQE_OP_RECV;
            c.flags = hw::CQE_FLAG_WITH_IMM;
            c.imm = 0x55;
            e.write_cqe(cq, n, c);
        }
        size_t m = e.bus.mmio.size();
        uint64_t poll_cost = e.bus.cost[int(cpu_op::poll_cqe)];
        int got = ibv_poll_cq(cq, 2, wc);
        got += ibv_poll_cq(cq, 8, wc + got);
        ASSERT_EQ(got, 3) << round;
        EXPECT_EQ(e.bus.cost[int(cpu_op::poll_cqe)], poll_cost + 2);  // once per call
        for (int k = 0; k < 3; ++k) {
            EXPECT_EQ(wc[k].wr_id, 1000 + n - 3 + k);
            EXPECT_EQ(wc[k].opcode, IBV_WC_RECV);
            EXPECT_EQ(wc[k].wc_flags, unsigned(IBV_WC_WITH_IMM));
            EXPECT_EQ(wc[k].qp_num, q->qp_num);
        }
        EXPECT_EQ(ibv_poll_cq(cq, 8, wc), 0);  // stale entries of the previous lap are not taken
        ASSERT_EQ(uar_writes(e, m), 2u);
        EXPECT_EQ(e.bus.mmio.back().value, hw::cq_doorbell(cq->handle, uint32_t(n), hw::CQ_ARM_NONE));
    }
}

TEST(Cq, send_cqe_completes_earlier_unsignaled_wqes) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, 4, 1);
    e.bring(q, IBV_QPS_RTS);
    ibv_send_wr w[4]{};
    for (int i = 0; i < 4; ++i) w[i].next = i < 3 ? &w[i + 1] : nullptr;
    w[3].send_flags = IBV_SEND_SIGNALED;
    w[3].wr_id = 3;
    ibv_send_wr* bad;
    ASSERT_EQ(ibv_post_send(q, w, &bad), 0);
    EXPECT_EQ(ibv_post_send(q, w, &bad), ENOMEM);
    hw::cqe c{};
    c.wr_id = 3;
    c.qpn = q->qp_num;
    c.wqe_counter = 3;
    c.owner = hw::CQE_IS_SEND;
    e.write_cqe(e.cq, 0, c);
    ibv_wc wc;
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    EXPECT_EQ(wc.wr_id, 3u);
    EXPECT_EQ(q->sq.completed, 4u);
    EXPECT_EQ(ibv_post_send(q, w, &bad), 0);  // all four slots free again
}

TEST(Cq, wait_cq_sleeps_until_cqe_lands) {
    env e;
    hw::cqe c{};
    c.wr_id = 42;
    c.owner = hw::cqe_owner_for(0, e.cq->log_size);
    uint64_t t0 = e.bus.now_ns();
    e.bus.schedule(t0 + 5000, e.cq->ring_pa, &c, sizeof c);
    EXPECT_EQ(ibv_wait_cq(e.cq, 1'000'000), 0);
    EXPECT_EQ(e.bus.now_ns(), t0 + 5000);
    ibv_wc wc;
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    EXPECT_EQ(wc.wr_id, 42u);
    uint64_t t1 = e.bus.now_ns();
    EXPECT_EQ(ibv_wait_cq(e.cq, 3000), ETIMEDOUT);
    EXPECT_EQ(e.bus.now_ns(), t1 + 3000);
}

TEST(Cq, completion_event_through_eq) {
    env e;
    ibv_comp_channel* ch = ibv_create_comp_channel(e.ctx);
    ibv_cq* cq = ibv_create_cq(e.ctx, 7, (void*)0x1234, ch);
    ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
    EXPECT_EQ(e.bus.mmio.back().value, hw::cq_doorbell(cq->handle, 0, hw::CQ_ARM_NEXT));
    hw::eqe ev{};
    ev.type = hw::EQE_COMPLETION;
    ev.resource = cq->handle;
    ev.owner = hw::cqe_owner_for(0, 8);
    e.bus.schedule(e.bus.now_ns() + 700, e.drv.eq_base(), &ev, sizeof ev);
    ibv_cq* got = nullptr;
    void* gctx = nullptr;
    size_t m = e.bus.mmio.size();
    ASSERT_EQ(ibv_get_cq_event(ch, &got, &gctx, 1'000'000), 0);
    EXPECT_EQ(got, cq);
    EXPECT_EQ(gctx, (void*)0x1234);
    EXPECT_EQ(e.bus.count_mmio(hw::REG_EQ_CONSUMER, m), 1u);
    EXPECT_EQ(e.bus.mmio.back().value, uint64_t(1) << 8);
    ibv_ack_cq_events(cq, 1);
    EXPECT_EQ(ibv_get_cq_event(ch, &got, &gctx, 1000), ETIMEDOUT);
}

TEST(Cq, async_qp_error_event_updates_software_state) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    hw::eqe ev{};
    ev.type = hw::EQE_QP_ACCESS_ERR;
    ev.resource = q->qp_num;
    ev.owner = hw::cqe_owner_for(0, 8);
    e.bus.mem_write(e.drv.eq_base(), &ev, sizeof ev);
    EXPECT_EQ(e.drv.process_eq(), 1u);
    EXPECT_EQ(q->state, IBV_QPS_ERR);
}

TEST(Cq, C10_18_destroy_cq_in_use_fails) {
    env e;
    ibv_qp* q = e.qp();
    EXPECT_EQ(ibv_destroy_cq(e.cq), EBUSY);
    ASSERT_EQ(ibv_destroy_qp(q), 0);
    EXPECT_EQ(ibv_destroy_cq(e.cq), 0);
}

TEST(Mr, reg_mr_writes_mtt_and_mpt) {
    env e;
    uint64_t va = e.as.alloc(4 * 4096, 4096);
    uint64_t addr = va + 100, len = 2 * 4096 + 50;  // touches 3 pages
    ibv_mr* mr = ibv_reg_mr(e.pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(mr, nullptr);
    auto mtts = e.bus.commands_of(hw::CMD_WRITE_MTT);
    ASSERT_EQ(mtts.size(), 1u);
    hw::write_mtt_in h;
    std::memcpy(&h, mtts[0].in.data(), sizeof h);
    EXPECT_EQ(h.count, 3u);
    EXPECT_EQ(h.first_index, mr->mtt_first);
    for (uint32_t i = 0; i < 3; ++i) {
        uint64_t pa, v;
        ASSERT_TRUE(e.as.translate(va + i * 4096, &pa));
        std::memcpy(&v, mtts[0].in.data() + 16 + 8 * i, 8);
        EXPECT_EQ(v, pa | hw::MTT_PRESENT) << i;
        EXPECT_EQ(e.as.pin_count(va + i * 4096), 1u);
    }
    auto mpts = e.bus.commands_of(hw::CMD_CREATE_MPT);
    ASSERT_EQ(mpts.size(), 1u);
    hw::mpt_entry m;
    std::memcpy(&m, mpts[0].in.data(), sizeof m);
    EXPECT_EQ(mpts[0].in_mod, mr->handle);
    EXPECT_EQ(m.key, mr->lkey);
    EXPECT_EQ(mr->lkey, mr->rkey);
    EXPECT_EQ(hw::key_index(m.key), mr->handle);
    EXPECT_EQ(m.pd, e.pd->handle);
    EXPECT_EQ(m.access, uint32_t(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ));
    EXPECT_EQ(m.state, hw::MPT_STATE_VALID);
    EXPECT_EQ(m.type, hw::MPT_TYPE_MR);
    EXPECT_EQ(m.flags, 0);
    EXPECT_EQ(m.log_page_size, 12);
    EXPECT_EQ(m.page_offset, 100u);
    EXPECT_EQ(m.mtt_reserved, 3u);
    EXPECT_NE(mr->handle, 0u);  // index 0 is the reserved L_Key's
    EXPECT_EQ(m.start_va, addr);
    EXPECT_EQ(m.length, len);
    EXPECT_EQ(m.mtt_count, 3u);
    // Reusing the MPT index gives a different key byte.
    uint32_t idx = mr->handle, key = mr->lkey;
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(e.as.pin_count(va), 0u);
    ibv_mr* mr2 = ibv_reg_mr(e.pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr2, nullptr);
    EXPECT_EQ(mr2->handle, idx);
    EXPECT_NE(mr2->lkey, key);
}

TEST(Mr, large_registration_writes_mtt_in_chunks) {
    env e;
    size_t pages = hw::WRITE_MTT_MAX + 10;
    uint64_t va = e.as.alloc(pages * 4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, pages * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    auto mtts = e.bus.commands_of(hw::CMD_WRITE_MTT);
    ASSERT_EQ(mtts.size(), 2u);
    hw::write_mtt_in h;
    std::memcpy(&h, mtts[1].in.data(), sizeof h);
    EXPECT_EQ(h.count, 10u);
    EXPECT_EQ(h.first_index, mr->mtt_first + hw::WRITE_MTT_MAX);
}

TEST(Access, C10_48_remote_write_or_atomic_without_local_write_is_immediate_error) {
    env e;
    uint64_t va = e.as.alloc(4096);
    size_t before = e.bus.cmds.size();
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, va, 64, IBV_ACCESS_REMOTE_WRITE), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_reg_mr(e.pd, va, 64, IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(e.bus.cmds.size(), before);  // nothing registered
    EXPECT_EQ(e.as.pin_count(va), 0u);
    EXPECT_NE(ibv_reg_mr(e.pd, va, 64, IBV_ACCESS_REMOTE_READ), nullptr);  // remote read alone is fine
    EXPECT_NE(ibv_reg_mr(e.pd, va, 64, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE), nullptr);
}

TEST(Mr, C10_45_failed_registration_leaves_nothing) {
    env e;
    uint64_t va = e.as.alloc(4096);
    e.bus.fail_opcode[hw::CMD_CREATE_MPT] = hw::CMD_BAD_PARAM;
    EXPECT_EQ(ibv_reg_mr(e.pd, va, 64, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(e.as.pin_count(va), 0u);
    EXPECT_EQ(e.pd->refs, 0u);
    EXPECT_EQ(ibv_reg_mr(e.pd, va + 8192 * 16, 64, 0), nullptr);  // unmapped
    EXPECT_EQ(errno, EFAULT);
}

TEST(Pd, C10_11_2_1_dealloc_pd_in_use_fails) {
    env e;
    uint64_t va = e.as.alloc(4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    EXPECT_EQ(ibv_dealloc_pd(e.pd), EBUSY);
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    ibv_qp* q = e.qp();
    EXPECT_EQ(ibv_dealloc_pd(e.pd), EBUSY);
    ASSERT_EQ(ibv_destroy_qp(q), 0);
    EXPECT_EQ(ibv_dealloc_pd(e.pd), 0);
}

TEST(QpState, C10_21_reset_restores_defaults_and_queue_state) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    ibv_send_wr w{};
    ibv_send_wr* bad;
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    EXPECT_EQ(q->sq.producer, 1u);
    ASSERT_EQ(e.to(q, IBV_QPS_RESET), 0);
    EXPECT_EQ(q->sq.producer, 0u);
    EXPECT_EQ(q->hw_ctx.sq_psn, 0u);
    EXPECT_EQ(q->hw_ctx.dest_qpn, 0u);
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
}

TEST(Ud, ud_send_builds_address_segment) {
    env e(test::no_window());
    ibv_qp* q = e.qp(IBV_QPT_UD, 8, 1, 0);
    e.bring(q, IBV_QPS_RTS);
    ibv_ah_attr aa{};
    aa.dlid = 9;
    aa.sl = 3;
    aa.port_num = 1;
    ibv_ah* ah = ibv_create_ah(e.pd, &aa);
    ASSERT_NE(ah, nullptr);
    ibv_send_wr w{};
    w.opcode = IBV_WR_SEND_WITH_IMM;
    w.wr.ud.ah = ah;
    w.wr.ud.remote_qpn = 0x33;
    w.wr.ud.remote_qkey = 0x80000000u;  // high bit: use the QP's Q_Key
    ibv_send_wr* bad;
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    hw::wqe_ctrl_seg c = e.bus.read<hw::wqe_ctrl_seg>(e.slot_pa(q, 0));
    EXPECT_EQ(c.ds_count, 5);
    hw::wqe_ud_seg u = e.bus.read<hw::wqe_ud_seg>(e.slot_pa(q, 0) + 32);
    EXPECT_EQ(u.dest_qpn, 0x33u);
    EXPECT_EQ(u.qkey, 0x80000000u) << "the WR's Q_Key as posted: the HCA applies the high-bit rule (C10-15)";
    EXPECT_EQ(u.dlid, 9);
    EXPECT_EQ(u.sl, 3);
    EXPECT_EQ(ibv_dealloc_pd(e.pd), EBUSY);  // the AH holds it
    ibv_pd* other = ibv_alloc_pd(e.ctx);
    ibv_ah* foreign = ibv_create_ah(other, &aa);
    w.wr.ud.ah = foreign;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);  // C10-10: AH of another PD
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
