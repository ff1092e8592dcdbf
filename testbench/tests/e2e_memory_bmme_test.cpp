// Base memory management extensions on the real model, end to end (two nodes back to back,
// bench_harness.h): shared regions, Allocate L_Key + Fast Register WRs, Local Invalidate
// (relaxed and fenced), SEND with Invalidate (success and the refusals), and the reserved
// L_Key. Test names carry the compliance IDs of IBA 10.6 (and o10-38.2.1) they assert.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "model/hca/translation_unit.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

constexpr uint64_t kIova = 0x90000000ull;  // where fast-registered regions start

/// Replaces node i's harness QP by one created with `flags` (IBV_QP_CREATE_*) and reconnects
/// both QPs.
void recreate_qp(rc_harness& h, unsigned i, uint32_t flags) {
    const rc_config& c = h.config();
    ibv_qp_init_attr a{};
    a.send_cq = h.s[i].scq;
    a.recv_cq = h.s[i].rcq;
    a.qp_type = IBV_QPT_RC;
    a.cap = {c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline};
    a.create_flags = flags;
    ASSERT_EQ(ibv_destroy_qp(h.s[i].qp), 0);
    h.s[i].qp = ibv_create_qp(h.s[i].pd, &a);
    ASSERT_NE(h.s[i].qp, nullptr) << "create_flags " << flags << ": errno " << errno;
    ASSERT_EQ(to_state(h.s[1 - i].qp, IBV_QPS_RESET), 0);
    ASSERT_EQ(h.connect(i, IBV_QPS_RTS), 0);
    ASSERT_EQ(h.connect(1 - i, IBV_QPS_RTS), 0);
}

/// 4 KiB pages of node i's [va, va + len), pinned (ibv_map_pages).
std::vector<uint64_t> pages_of(rc_harness& h, unsigned i, uint64_t va, size_t len) {
    std::vector<uint64_t> p;
    EXPECT_EQ(ibv_map_pages(h.s[i].ctx, va, len, &p), 0);
    return p;
}

/// Posts a Fast Register WR on `qp`: `pages` (4 KiB) under l's index with `key_byte`, from kIova.
int post_fast_reg(ibv_qp* qp, ibv_mr* l, uint8_t key_byte, uint64_t len, int access,
                  const std::vector<uint64_t>& pages, uint32_t page_offset = 0, uint64_t wr_id = 80) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_FAST_REG_MR;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.fast_reg = {l, key_byte, kIova, len, access, pages.data(), uint32_t(pages.size()), page_offset, 12};
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

/// Fast Register on node i's harness QP; returns its completion.
ibv_wc fast_reg(rc_harness& h, unsigned i, ibv_mr* l, uint8_t key_byte, uint64_t len, int access,
                const std::vector<uint64_t>& pages, uint32_t page_offset = 0) {
    EXPECT_EQ(post_fast_reg(h.s[i].qp, l, key_byte, len, access, pages, page_offset), 0);
    return one_wc(h, h.s[i].scq, "fast register");
}

/// Local Invalidate on node i's harness QP; returns its completion.
ibv_wc local_inv(rc_harness& h, unsigned i, uint32_t key) {
    EXPECT_EQ(post_local_inv(h.s[i].qp, key), 0);
    return one_wc(h, h.s[i].scq, "local invalidate");
}

/// Posts a SEND with Invalidate of `key` from node0's harness QP.
int post_send_inv(rc_harness& h, ibv_sge sge, uint32_t key, uint64_t wr_id = 90) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = key;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(h.s[0].qp, &wr, &bad);
}

/// Another RC QP on node1 (harness PD), connected to a new QP on node0; returns node1's.
ibv_qp* second_qp_on_node1(rc_harness& h) {
    const rc_config& c = h.config();
    ibv_qp* q[2];
    for (unsigned i = 0; i < 2; ++i) {
        ibv_qp_init_attr a{};
        a.send_cq = ibv_create_cq(h.s[i].ctx, 64);
        a.recv_cq = ibv_create_cq(h.s[i].ctx, 64);
        a.qp_type = IBV_QPT_RC;
        a.cap = {16, 16, 2, 2, 0};
        q[i] = ibv_create_qp(h.s[i].pd, &a);
        EXPECT_NE(q[i], nullptr);
        if (!q[i]) return nullptr;
    }
    for (unsigned i = 0; i < 2; ++i) {
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.port_num = 1;
        attr.qp_access_flags = c.qp_access;
        EXPECT_EQ(
            ibv_modify_qp(q[i], &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_RTR;
        attr.path_mtu = ibv_mtu(__builtin_ctz(c.mtu) - 7);
        attr.dest_qp_num = q[1 - i]->qp_num;
        attr.rq_psn = 0x300 + (1 - i);
        attr.max_dest_rd_atomic = c.max_rd_atomic;
        attr.min_rnr_timer = c.min_rnr_timer;
        attr.ah_attr.dlid = h.s[1 - i].lid;
        attr.ah_attr.port_num = 1;
        EXPECT_EQ(ibv_modify_qp(q[i], &attr,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
                  0);
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn = 0x300 + i;
        attr.timeout = c.timeout;
        attr.retry_cnt = c.retry_cnt;
        attr.rnr_retry = c.rnr_retry;
        attr.max_rd_atomic = c.max_rd_atomic;
        EXPECT_EQ(ibv_modify_qp(q[i], &attr,
                                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
                  0);
    }
    return q[1];
}

ibv_mr_state state_of(ibv_mr* mr) {
    ibv_mr_attr qa{};
    EXPECT_EQ(ibv_query_mr(mr, &qa), 0);
    return qa.state;
}

/// SEND with Invalidate of `key` from node0 into a receive buffer on node1 that the HCA
/// refuses: the receive completes with the memory management error (vendor_err = why), the
/// requester gets Remote Operational Error, node1's QP goes to Error without an async event.
void expect_send_inv_refused(rc_harness& h, const bufs& b, uint32_t key, xlate_status why,
                             const std::string& what) {
    ibv_mr* rbuf = h.reg(1, b.dst, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, rbuf->lkey}}, 33), 0);
    ASSERT_EQ(post_send_inv(h, {b.src, 100, b.smr->lkey}, key), 0);
    const ibv_wc r = one_wc(h, h.s[1].rcq, what + ": receive");
    EXPECT_EQ(r.status, IBV_WC_MW_BIND_ERR) << what;
    EXPECT_EQ(r.vendor_err, vendor(why)) << what;
    EXPECT_EQ(r.wr_id, 33u) << what;
    const ibv_wc s = one_wc(h, h.s[0].scq, what + ": send");
    EXPECT_EQ(s.status, IBV_WC_REM_OP_ERR) << what;
    EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR) << what;
    ibv_async_event ev{};
    EXPECT_EQ(ibv_get_async_event(h.s[1].ctx, &ev, kQuietNs), ETIMEDOUT)
        << what << ": the completion reports it";
    ibv_dereg_mr(rbuf);
}

}  // namespace

// ------------------------------------------------------------------ shared regions

SIM_TEST(E2eMemoryBmme, o10_36_2_3_a_non_shared_region_is_accepted_by_every_verb_that_takes_a_region) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        const size_t n = 4 * 4096;
        bufs b = make_bufs(h, n, 363, kBindable);  // b.dmr: Register MR, not shared
        std::vector<uint8_t> want(n, kGuardByte);
        const auto src = h.read_mem(0, b.src, n);
        auto expect_written = [&](uint64_t off, uint64_t src_off, size_t len) {
            std::copy(src.begin() + long(src_off), src.begin() + long(src_off + len),
                      want.begin() + long(off));
        };
        // Query MR.
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(b.dmr, &qa), 0);
        EXPECT_FALSE(qa.is_shared);
        EXPECT_EQ(qa.addr, b.dst);
        EXPECT_EQ(qa.length, n);
        // Register Shared MR.
        ibv_mr* sh = ibv_reg_shared_mr(b.dmr, h.s[1].pd, kTargetAccess, 0x6000000);
        ASSERT_NE(sh, nullptr) << errno;
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, 0x6000000, sh->rkey, "via the shared region").status,
                  IBV_WC_SUCCESS);
        expect_written(0, 0, 100);
        ASSERT_EQ(ibv_dereg_mr(sh), 0);
        // Bind MW (type 1) and Post Send Bind WR (type 2).
        ibv_mw* w1 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ibv_mw* w2 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind1(h, w1, b.dmr, b.dst + 4096, 100, IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
        ASSERT_EQ(bind2(h, w2, 0x63, b.dmr, b.dst + 4096 + 200, 100, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc(h, {b.src + 100, 100, b.smr->lkey}, b.dst + 4096, w1->rkey, "type 1 window").status,
            IBV_WC_SUCCESS);
        expect_written(4096, 100, 100);
        EXPECT_EQ(write_wc(h, {b.src + 200, 100, b.smr->lkey}, b.dst + 4096 + 200, w2->rkey, "type 2 window")
                      .status,
                  IBV_WC_SUCCESS);
        expect_written(4096 + 200, 200, 100);
        ASSERT_EQ(ibv_dealloc_mw(w1), 0);
        ASSERT_EQ(ibv_dealloc_mw(w2), 0);
        // Fast Register PMR into an Allocate L_Key region (not shared either).
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 1);
        ASSERT_EQ(fast_reg(h, 1, l, 0x36, 4096, kTargetAccess, pages_of(h, 1, b.dst + 2 * 4096, 4096)).status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src + 300, 64, b.smr->lkey}, kIova, l->rkey, "fast-registered").status,
                  IBV_WC_SUCCESS);
        expect_written(2 * 4096, 300, 64);
        // Reregister MR (rights), then Reregister PMR (onto the last page, the consumer's key byte).
        ASSERT_EQ(ibv_rereg_mr(b.dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, kTargetAccess), 0);
        EXPECT_EQ(
            write_wc(h, {b.src + 400, 64, b.smr->lkey}, b.dst + 2 * 4096 + 2000, b.dmr->rkey, "reregistered")
                .status,
            IBV_WC_SUCCESS);
        expect_written(2 * 4096 + 2000, 400, 64);
        const auto pg = pages_of(h, 1, b.dst + 3 * 4096, 4096);
        ibv_phys_mr_attr a;
        a.list = pg.data();
        a.count = 1;
        a.size = 4096;
        a.iova = 0x7000000;
        a.length = 4096;
        a.access = kTargetAccess;
        a.key_byte = 0x3A;
        const uint32_t va_key = b.dmr->rkey;
        ASSERT_EQ(ibv_rereg_phys_mr(b.dmr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS,
                                    nullptr, &a),
                  0);
        EXPECT_EQ(b.dmr->rkey & 0xFFu, 0x3Au) << "the consumer's key byte";
        EXPECT_EQ(b.dmr->rkey >> 8, va_key >> 8) << "the same index";
        ASSERT_EQ(ibv_query_mr(b.dmr, &qa), 0);
        EXPECT_EQ(qa.addr, 0x7000000u);
        EXPECT_EQ(qa.length, 4096u);
        EXPECT_EQ(qa.page_list_max, 1u);
        EXPECT_EQ(
            write_wc(h, {b.src + 500, 64, b.smr->lkey}, 0x7000000 + 10, b.dmr->rkey, "physical reregister")
                .status,
            IBV_WC_SUCCESS);
        expect_written(3 * 4096 + 10, 500, 64);
        // Deregister: the keys die.
        const uint32_t last = b.dmr->rkey;
        ASSERT_EQ(ibv_dereg_mr(b.dmr), 0);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, 0x7000000 + 100, last, "deregistered").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, want, "every write where its verb put the region, nothing else");
    });
}

SIM_TEST(E2eMemoryBmme, o10_36_2_4_shared_region_and_its_source_reach_the_same_bytes) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 364, kBindable);
        const uint64_t sink = h.alloc(0, 8192, 4096);
        ibv_mr* snk = h.reg(0, sink, 8192);
        ibv_mr* sh = ibv_reg_shared_mr(b.dmr, h.s[1].pd, kBindable, 0x5000000);
        ASSERT_NE(sh, nullptr) << errno;
        EXPECT_NE(sh->rkey, b.dmr->rkey) << "own keys";
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(sh, &qa), 0);
        EXPECT_TRUE(qa.is_shared);
        EXPECT_EQ(qa.addr, 0x5000000u);
        EXPECT_EQ(qa.length, 8192u);
        // Written through the shared region, read through the source, and the other way round.
        EXPECT_EQ(
            write_wc(h, {b.src, 1000, b.smr->lkey}, 0x5000000 + 100, sh->rkey, "write via shared").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 100, h.read_mem(0, b.src, 1000), "landed in the source's pages");
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{sink, 1000, snk->lkey}}, 2, IBV_SEND_SIGNALED,
                              b.dst + 100, b.dmr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "read via source").status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(0, b.src, 1000), "read back through the source");
        EXPECT_EQ(write_wc(h, {b.src + 1000, 500, b.smr->lkey}, b.dst + 4096, b.dmr->rkey, "write via source")
                      .status,
                  IBV_WC_SUCCESS);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{sink + 4096, 500, snk->lkey}}, 3, IBV_SEND_SIGNALED,
                              0x5000000 + 4096, sh->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "read via shared").status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink + 4096, h.read_mem(0, b.src + 1000, 500), "read back through the shared region");
        // Bind MW accepts a shared region.
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, sh, 0x5000000 + 6000, 100, IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc(h, {b.src + 2000, 100, b.smr->lkey}, 0x5000000 + 6000, mw->rkey, "via a window").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 6000, h.read_mem(0, b.src + 2000, 100),
                     "through the window on the shared region");
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);
        // The translation lives until its last user: the shared region outlives the source.
        ASSERT_EQ(ibv_dereg_mr(b.dmr), 0);
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, 0x5000000 + 7000, sh->rkey, "after the source went").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 7000, h.read_mem(0, b.src, 64), "written after the source's deregistration");
    });
}

SIM_TEST(E2eMemoryBmme, o10_36_2_5_o10_37_2_15_fast_register_and_local_invalidate_of_shared_regions_fail) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 4096, 365, kBindable);
        ibv_mr* sh = ibv_reg_shared_mr(b.dmr, h.s[1].pd, kTargetAccess, 0x5000000);
        ASSERT_NE(sh, nullptr);
        // Fast Register: refused at once (a shared region has no L_Key page list of its own).
        const auto pg = pages_of(h, 1, b.dst, 4096);
        const uint32_t producer = h.s[1].qp->sq.producer;
        EXPECT_EQ(post_fast_reg(h.s[1].qp, sh, 0x10, 4096, kTargetAccess, pg), EINVAL);
        EXPECT_EQ(h.s[1].qp->sq.producer, producer) << "nothing posted";
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS);
        // Local Invalidate of the shared region, and of its source: memory management errors.
        for (ibv_mr* mr : {sh, b.dmr}) {
            const ibv_wc inv = local_inv(h, 1, mr->lkey);
            EXPECT_EQ(inv.status, IBV_WC_MW_BIND_ERR);
            EXPECT_EQ(inv.opcode, IBV_WC_LOCAL_INV);
            EXPECT_EQ(inv.vendor_err, vendor(xlate_status::shared));
            EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
            recover(h);
            EXPECT_EQ(state_of(mr), IBV_MR_STATE_VALID) << "not invalidated";
        }
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, 0x5000000, sh->rkey, "shared region still valid").status,
            IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc(h, {b.src + 64, 64, b.smr->lkey}, b.dst + 64, b.dmr->rkey, "source still valid").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 128), "written through both");
    });
}

// ------------------------------------------------------------------ fast register

SIM_TEST(E2eMemoryBmme, o10_37_2_5_o10_37_2_6_fast_register_makes_the_key_valid_for_the_very_next_wr) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 3 * 4096, 375, kBindable);
        h.write_mem(1, b.dst, pattern(3 * 4096, 3750));
        const uint64_t sink = h.alloc(0, 4096, 4096);
        h.fill_mem(0, sink, 4096, kGuardByte);
        ibv_mr* snk = h.reg(0, sink, 4096);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 4);
        ASSERT_NE(l, nullptr);
        EXPECT_EQ(state_of(l), IBV_MR_STATE_FREE);
        const auto pg = pages_of(h, 1, b.dst, 3 * 4096);
        const uint64_t len = 3 * 4096 - 100;
        // Fast register, then at once an RDMA WRITE gathering through the new L_Key.
        ASSERT_EQ(post_fast_reg(h.s[1].qp, l, 0x42, len, kTargetAccess, pg, 100), 0);
        EXPECT_EQ(l->lkey, hw::make_key(l->handle, 0x42));
        EXPECT_EQ(l->rkey, l->lkey);
        ASSERT_EQ(h.post_send(1, IBV_WR_RDMA_WRITE, {{kIova + 50, 500, l->lkey}}, 81, IBV_SEND_SIGNALED, sink,
                              snk->rkey),
                  0);
        auto wc = h.expect_wc(h.s[1].scq, 2, "fast register, then the write using it");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].opcode, IBV_WC_FAST_REG_MR);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].wr_id, 80u);
        EXPECT_EQ(wc[1].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, b.dst + 150, 500), "gathered from page offset 100 + 50");
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(l, &qa), 0);
        EXPECT_EQ(qa.state, IBV_MR_STATE_VALID);
        EXPECT_EQ(qa.lkey, l->lkey);
        EXPECT_EQ(qa.addr, kIova);
        EXPECT_EQ(qa.length, len);
        EXPECT_EQ(qa.page_list_max, 4u) << "o10-37.2.10: the reservation, not the pages used";
        // The R_Key reaches the same pages from node0, across the page boundaries.
        h.fill_mem(1, b.dst, 3 * 4096, kGuardByte);
        EXPECT_EQ(write_wc(h, {b.src, 8000, b.smr->lkey}, kIova + 1000, l->rkey, "remote write").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 1100, h.read_mem(0, b.src, 8000), "through the fast-registered R_Key");
        h.expect_fill(1, b.dst, 1100, kGuardByte, "before");
        h.expect_fill(1, b.dst + 9100, 3 * 4096 - 9100, kGuardByte, "after");
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_5_fast_register_refusals) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4 * 4096, 3751, kBindable);
        const auto pg = pages_of(h, 1, b.dst, 4 * 4096);
        const std::vector<uint64_t> two(pg.begin(), pg.begin() + 2);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 2);
        ASSERT_NE(l, nullptr);
        // The QP was not created with fast register.
        ibv_wc fr = fast_reg(h, 1, l, 0x01, 8192, kTargetAccess, two);
        EXPECT_EQ(fr.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(fr.opcode, IBV_WC_FAST_REG_MR);
        EXPECT_EQ(fr.vendor_err, vendor(xlate_status::not_enabled));
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        EXPECT_EQ(state_of(l), IBV_MR_STATE_FREE) << "the failed fast register changed nothing";
        // More pages than the L_Key reserved, remote write without local write: refused at once.
        EXPECT_EQ(post_fast_reg(h.s[1].qp, l, 0x02, 3 * 4096, kTargetAccess, {pg.begin(), pg.begin() + 3}),
                  EINVAL);
        EXPECT_EQ(post_fast_reg(h.s[1].qp, l, 0x02, 8192, IBV_ACCESS_REMOTE_WRITE, two), EINVAL);
        // An L_Key of another PD.
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ibv_mr* foreign = ibv_alloc_lkey(other, 2);
        fr = fast_reg(h, 1, foreign, 0x03, 8192, kTargetAccess, two);
        EXPECT_EQ(fr.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(fr.vendor_err, vendor(xlate_status::bad_pd));
        recover(h);
        // A page off a page boundary.
        const std::vector<uint64_t> odd = {pg[0], pg[1] + 0x800};
        fr = fast_reg(h, 1, l, 0x04, 8192, kTargetAccess, odd);
        EXPECT_EQ(fr.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(fr.vendor_err, vendor(xlate_status::bad_page_list));
        recover(h);
        // The L_Key must be Free: a second fast register without an invalidate is refused.
        ASSERT_EQ(fast_reg(h, 1, l, 0x05, 8192, kTargetAccess, two).status, IBV_WC_SUCCESS);
        const uint32_t valid_key = l->rkey;
        fr = fast_reg(h, 1, l, 0x06, 4096, kTargetAccess, {pg[2]});
        EXPECT_EQ(fr.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(fr.vendor_err, vendor(xlate_status::bad_state));
        recover(h);
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(l, &qa), 0);
        EXPECT_EQ(qa.rkey, valid_key) << "the HCA keeps the first registration";
        EXPECT_EQ(qa.length, 8192u);
        EXPECT_EQ(write_wc(h, {b.src, 8192, b.smr->lkey}, kIova, valid_key, "first registration").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 8192), "written through the first registration");
    });
}

SIM_TEST(E2eMemoryBmme, o10_36_2_1_free_keys_are_refused_locally_and_remotely) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 361, kBindable);
        ibv_mr* l1 = ibv_alloc_lkey(h.s[1].pd, 1);  // Free, never registered
        ibv_mr* l0 = ibv_alloc_lkey(h.s[0].pd, 1);
        ASSERT_TRUE(l0 && l1);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, kIova, l1->rkey, "RDMA WRITE to a Free key").status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        const uint64_t sink = h.alloc(0, 4096, 4096);
        ibv_mr* snk = h.reg(0, sink, 4096);
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_READ, {{sink, 64, snk->lkey}}, 2, IBV_SEND_SIGNALED, kIova, l1->rkey),
            0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "RDMA READ of a Free key").status, IBV_WC_REM_ACCESS_ERR);
        recover(h);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, sink, snk->lkey, 3, kIova, l1->rkey, 1), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "atomic on a Free key").status, IBV_WC_REM_ACCESS_ERR);
        recover(h);
        ASSERT_EQ(h.post_recv(1, {{kIova, 64, l1->lkey}}, 5), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 6), 0);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "SEND into a Free key").status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "the SEND").status, IBV_WC_REM_OP_ERR);
        recover(h);
        const ibv_wc w = write_wc(h, {kIova, 64, l0->lkey}, b.dst, b.dmr->rkey, "gather from a Free key");
        EXPECT_EQ(w.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(w.vendor_err, vendor(xlate_status::bad_state));
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 4096, kGuardByte, "nothing written");
    });
}

// ------------------------------------------------------------------ reserved L_Key

SIM_TEST(E2eMemoryBmme, o10_37_2_7_o10_37_2_11_reserved_lkey_names_physical_memory_where_the_qp_enables_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        ASSERT_TRUE(da.reserved_lkey_supported);
        const uint32_t rl = da.reserved_lkey;
        EXPECT_EQ(rl, hw::RESERVED_LKEY);
        recreate_qp(h, 0, IBV_QP_CREATE_FAST_REG | IBV_QP_CREATE_RESERVED_LKEY);
        bufs b = make_bufs(h, 8192, 377, kBindable);
        const uint64_t sink = h.alloc(0, 4096, 4096);
        h.fill_mem(0, sink, 4096, kGuardByte);
        const uint64_t src_pa = h.pa_of(0, b.src), sink_pa = h.pa_of(0, sink);
        ASSERT_TRUE(src_pa && sink_pa);
        // SEND gathered from a physical address.
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src_pa + 10, 300, rl}}, 2), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send from physical memory").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
        EXPECT_EQ(r.byte_len, 300u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src + 10, 300), "send payload");
        // READ scattered into a physical address.
        h.write_mem(1, b.dst + 4096, pattern(4096, 3771));
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{sink_pa + 20, 1000, rl}}, 3, IBV_SEND_SIGNALED,
                              b.dst + 4096, b.dmr->rkey),
                  0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "read into physical memory").status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink + 20, h.read_mem(1, b.dst + 4096, 1000), "read payload");
        h.expect_fill(0, sink, 20, kGuardByte, "before the read's sink");
        // Fast register is allowed on the same QP (o10-37.2.7).
        const auto pg = pages_of(h, 0, sink, 4096);
        ibv_mr* l = ibv_alloc_lkey(h.s[0].pd, 1);
        EXPECT_EQ(fast_reg(h, 0, l, 0x07, 4096, IBV_ACCESS_LOCAL_WRITE, pg).status, IBV_WC_SUCCESS);
        // o10-37.2.11: node1's QP does not enable the reserved L_Key.
        const ibv_wc w =
            write_wc(h, {h.pa_of(1, b.dst), 64, rl}, sink, 0 /* unused */, "reserved L_Key not enabled", 1);
        EXPECT_EQ(w.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(w.vendor_err, vendor(xlate_status::not_enabled));
        h.sleep(0, kQuietNs);
        h.expect_mem(0, sink + 20, h.read_mem(1, b.dst + 4096, 1000), "sink unchanged");
    });
}

SIM_TEST(E2eMemoryBmme,
         o10_37_2_8_reserved_lkey_cannot_be_bound_invalidated_fast_registered_or_used_remotely) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG | IBV_QP_CREATE_RESERVED_LKEY);
        bufs b = make_bufs(h, 4096, 378, kBindable);
        // Local Invalidate of the reserved L_Key.
        ibv_wc c = local_inv(h, 1, hw::RESERVED_LKEY);
        EXPECT_EQ(c.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(c.vendor_err, vendor(xlate_status::bad_key));
        recover(h);
        // A window bound to "the region" of the reserved L_Key (the verbs have no handle for it:
        // a copy of a real region's handle with the reserved key).
        ibv_mr fake = *b.dmr;
        fake.lkey = fake.rkey = hw::RESERVED_LKEY;
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        c = bind1(h, mw, &fake, b.dst, 4096, kRemoteRw);
        EXPECT_EQ(c.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(c.vendor_err, vendor(xlate_status::bad_key));
        recover(h);
        // Fast register under the reserved L_Key (index 0, key byte 0).
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 1);
        ibv_mr fl = *l;
        fl.handle = 0;
        const auto pg = pages_of(h, 1, b.dst, 4096);
        c = fast_reg(h, 1, &fl, 0x00, 4096, kTargetAccess, pg);
        EXPECT_EQ(fl.lkey, hw::RESERVED_LKEY);
        EXPECT_EQ(c.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(c.vendor_err, vendor(xlate_status::bad_key));
        recover(h);
        // As an R_Key it names nothing.
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, h.pa_of(1, b.dst), hw::RESERVED_LKEY, "reserved R_Key")
                .status,
            IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 4096, kGuardByte, "nothing written");
    });
}

// ------------------------------------------------------------------ local invalidate

SIM_TEST(E2eMemoryBmme, o10_37_2_13_invalidate_frees_fast_registered_keys_independently_and_refuses_others) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 8192, 3713, kBindable);
        const auto pg = pages_of(h, 1, b.dst, 8192);
        ibv_mr* l1 = ibv_alloc_lkey(h.s[1].pd, 2);
        ibv_mr* l2 = ibv_alloc_lkey(h.s[1].pd, 2);
        ASSERT_EQ(fast_reg(h, 1, l1, 0x11, 8192, kTargetAccess, pg).status, IBV_WC_SUCCESS);
        ASSERT_EQ(fast_reg(h, 1, l2, 0x22, 8192, kTargetAccess, pg).status,
                  IBV_WC_SUCCESS);  // the same pages
        const ibv_wc inv = local_inv(h, 1, l1->rkey);
        EXPECT_EQ(inv.status, IBV_WC_SUCCESS);
        EXPECT_EQ(inv.opcode, IBV_WC_LOCAL_INV);
        EXPECT_EQ(inv.wr_id, 70u);
        EXPECT_EQ(state_of(l1), IBV_MR_STATE_FREE);
        EXPECT_EQ(state_of(l2), IBV_MR_STATE_VALID) << "overlapping registrations invalidate independently";
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, kIova, l2->rkey, "the other L_Key").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 100), "written");
        EXPECT_EQ(local_inv(h, 1, l1->rkey).status, IBV_WC_SUCCESS) << "invalidating a Free key is a no-op";
        // A Free L_Key can be fast-registered again, with a new key byte.
        ASSERT_EQ(fast_reg(h, 1, l1, 0x12, 4096, kTargetAccess, {pg[1]}).status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src + 100, 100, b.smr->lkey}, kIova, l1->rkey, "re-registered").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src + 100, 100), "the new page");
        // A Register MR region cannot be invalidated.
        const ibv_wc bad = local_inv(h, 1, b.dmr->lkey);
        EXPECT_EQ(bad.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(bad.vendor_err, vendor(xlate_status::bad_type));
        EXPECT_EQ(state_of(b.dmr), IBV_MR_STATE_VALID);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_14_invalidating_a_region_during_a_write_stops_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        const size_t n = 256 * 1024;
        bufs b = make_bufs(h, n, 3714, kBindable);
        const auto data = h.read_mem(0, b.src, n);
        const auto pg = pages_of(h, 1, b.dst, n);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, uint32_t(pg.size()));
        ASSERT_EQ(fast_reg(h, 1, l, 0x14, n, kTargetAccess, pg).status, IBV_WC_SUCCESS);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, uint32_t(n), b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              kIova, l->rkey),
                  0);
        h.sleep(1, 6'000);  // the WRITE takes ~27 us on the wire
        ASSERT_EQ(post_local_inv(h.s[1].qp, l->rkey), 0);
        const ibv_wc wc = one_wc(h, h.s[0].scq, "write");
        EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(one_wc(h, h.s[1].scq, "invalidate").status, IBV_WC_SUCCESS);
        h.sleep(1, kQuietNs);
        const auto got = h.read_mem(1, b.dst, n);
        size_t placed = 0;
        while (placed < n && got[placed] == data[placed]) ++placed;
        EXPECT_GT(placed, 0u) << "the packets before the invalidate were placed";
        EXPECT_LT(placed, n / 2);
        EXPECT_EQ(placed % 4096, 0u);
        h.expect_fill(1, b.dst + placed, n - placed, kGuardByte, "nothing after the invalidate");
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_17_region_with_windows_bound_cannot_be_invalidated) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 4096, 3717, kBindable);
        const auto pg = pages_of(h, 1, b.dst, 4096);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 1);
        ASSERT_EQ(fast_reg(h, 1, l, 0x17, 4096, kBindable, pg).status, IBV_WC_SUCCESS);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, l, kIova, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const ibv_wc inv = local_inv(h, 1, l->rkey);
        EXPECT_EQ(inv.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(inv.vendor_err, vendor(xlate_status::busy));
        recover(h);
        expect_send_inv_refused(h, b, l->rkey, xlate_status::busy,
                                "SEND with Invalidate of a region with a window");
        recover(h);
        EXPECT_EQ(state_of(l), IBV_MR_STATE_VALID);
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, kIova + 1000, mw->rkey, "the window still works").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 1000, h.read_mem(0, b.src, 64), "through the window");
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);
        EXPECT_EQ(local_inv(h, 1, l->rkey).status, IBV_WC_SUCCESS) << "no window bound any more";
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_18_invalidated_key_fails_locally_and_remotely) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 4096, 3718, kBindable);
        const uint64_t sink = h.alloc(0, 4096, 4096);
        h.fill_mem(0, sink, 4096, kGuardByte);
        ibv_mr* snk = h.reg(0, sink, 4096);
        const auto pg = pages_of(h, 1, b.dst, 4096);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 1);
        ASSERT_EQ(fast_reg(h, 1, l, 0x18, 4096, kTargetAccess, pg).status, IBV_WC_SUCCESS);
        ASSERT_EQ(local_inv(h, 1, l->lkey).status, IBV_WC_SUCCESS);
        const ibv_wc w =
            write_wc(h, {kIova, 64, l->lkey}, sink, snk->rkey, "gather through the invalidated L_Key", 1);
        EXPECT_EQ(w.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(w.vendor_err, vendor(xlate_status::bad_state));
        recover(h);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, kIova, l->rkey, "write through the invalidated R_Key")
                      .status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(0, sink, 4096, kGuardByte, "nothing sent from the invalidated region");
        h.expect_fill(1, b.dst, 4096, kGuardByte, "nothing written into the invalidated region");
    });
}

namespace {
/// A 256 KiB WRITE from node0 gathered through a fast-registered L_Key, followed at once by a
/// Local Invalidate of that L_Key (fenced or not). Returns (invalidations executed 2 us after
/// posting, state of the L_Key then); checks both completions succeed in order.
std::pair<uint64_t, ibv_mr_state> write_then_invalidate(rc_harness& h, bool fence) {
    const size_t n = 256 * 1024;
    const uint64_t src = h.alloc(0, n, 4096);
    const auto data = pattern(n, 3719);
    h.write_mem(0, src, data);
    const uint64_t dst = h.alloc(1, n, 4096);
    ibv_mr* dmr = h.reg(1, dst, n);
    const auto pg = pages_of(h, 0, src, n);
    ibv_mr* l = ibv_alloc_lkey(h.s[0].pd, uint32_t(pg.size()));
    EXPECT_EQ(fast_reg(h, 0, l, 0x19, n, IBV_ACCESS_LOCAL_WRITE, pg).status, IBV_WC_SUCCESS);
    const uint64_t before = ctr(0, "translation_unit.invalidates");
    EXPECT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{kIova, uint32_t(n), l->lkey}}, 1, IBV_SEND_SIGNALED, dst,
                          dmr->rkey),
              0);
    EXPECT_EQ(post_local_inv(h.s[0].qp, l->lkey, IBV_SEND_SIGNALED | (fence ? IBV_SEND_FENCE : 0)), 0);
    h.sleep(0, 2'000);  // the WRITE's ACK comes after ~27 us
    const uint64_t early = ctr(0, "translation_unit.invalidates") - before;
    const ibv_mr_state state = state_of(l);
    ibv_wc none[1];
    EXPECT_EQ(ibv_poll_cq(h.s[0].scq, 1, none), 0) << "the WRITE is still in flight";
    auto wc = h.expect_wc(h.s[0].scq, 2, "write and invalidate");
    EXPECT_EQ(wc.size(), 2u);
    if (wc.size() == 2) {
        EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[1].opcode, IBV_WC_LOCAL_INV);
        EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
    }
    EXPECT_EQ(state_of(l), IBV_MR_STATE_FREE);
    EXPECT_EQ(ctr(0, "translation_unit.invalidates") - before, 1u);
    h.expect_mem(1, dst, data, "the WRITE's data");
    return {early, state};
}
}  // namespace

SIM_TEST(E2eMemoryBmme, o10_37_2_19_o10_37_2_22_o10_37_2_23_unfenced_local_invalidate_runs_at_once) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 0, IBV_QP_CREATE_FAST_REG);
        const auto r = write_then_invalidate(h, false);
        EXPECT_EQ(r.first, 1u) << "relaxed: executed before the earlier WRITE completed";
        EXPECT_EQ(r.second, IBV_MR_STATE_FREE);
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_20_o10_37_2_23_fenced_local_invalidate_waits_for_earlier_wrs) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        ASSERT_TRUE(da.local_inv_fence) << "the model offers Local Invalidate fencing";
        recreate_qp(h, 0, IBV_QP_CREATE_FAST_REG);
        const auto r = write_then_invalidate(h, true);
        EXPECT_EQ(r.first, 0u) << "strong: not executed while the earlier WRITE is unacknowledged";
        EXPECT_EQ(r.second, IBV_MR_STATE_VALID);
    });
}

namespace {
/// A 256 KiB WRITE from node0, then at once a Local Invalidate (fenced or not) of a type 2
/// window node0's QP bound on node0's memory, then a bind WR re-using that window with a new key
/// byte. Returns the invalidations executed 2 us after posting. Checks the three completions in
/// order, that the rebind found the window Free (the invalidate took effect before the next WR
/// began), that node1 writes through the new key and is refused with the old one, and the bytes.
uint64_t write_then_invalidate_window(rc_harness& h, bool fence) {
    const size_t n = 256 * 1024;
    const uint64_t src = h.alloc(0, n, 4096);
    h.write_mem(0, src, pattern(n, 3737));
    ibv_mr* smr = h.reg(0, src, n);
    const uint64_t win = h.alloc(0, 4096, 4096);
    h.fill_mem(0, win, 4096, kGuardByte);
    ibv_mr* wmr = h.reg(0, win, 4096, kBindable);
    const uint64_t dst = h.alloc(1, n, 4096);
    ibv_mr* dmr = h.reg(1, dst, n);
    ibv_mw* mw = ibv_alloc_mw(h.s[0].pd, IBV_MW_TYPE_2);
    EXPECT_EQ(bind2(h, mw, 0x37, wmr, win, 4096, kRemoteRw, h.s[0].qp).status, IBV_WC_SUCCESS);
    const uint32_t old_key = mw->rkey;
    const uint64_t before = ctr(0, "translation_unit.invalidates");
    EXPECT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, uint32_t(n), smr->lkey}}, 1, IBV_SEND_SIGNALED, dst,
                          dmr->rkey),
              0);
    EXPECT_EQ(post_local_inv(h.s[0].qp, old_key, IBV_SEND_SIGNALED | (fence ? IBV_SEND_FENCE : 0)), 0);
    ibv_send_wr wr{};
    wr.wr_id = 61;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = (old_key & ~0xFFu) | 0x38;
    wr.bind_mw.bind_info = {wmr, win, 4096, kRemoteRw};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(h.s[0].qp, &wr, &bad), 0);
    h.sleep(0, 2'000);  // the WRITE's ACK comes after ~27 us
    const uint64_t early = ctr(0, "translation_unit.invalidates") - before;
    auto wc = h.expect_wc(h.s[0].scq, 3, "write, invalidate and rebind");
    EXPECT_EQ(wc.size(), 3u);
    if (wc.size() == 3) {
        EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(wc[1].opcode, IBV_WC_LOCAL_INV);
        EXPECT_EQ(wc[2].opcode, IBV_WC_BIND_MW);
        for (const ibv_wc& c : wc) EXPECT_EQ(c.status, IBV_WC_SUCCESS) << "wr_id " << c.wr_id;
    }
    EXPECT_EQ(ctr(0, "translation_unit.invalidates") - before, 1u);
    const uint32_t new_key = (old_key & ~0xFFu) | 0x38;
    EXPECT_EQ(write_wc(h, {dst, 64, dmr->lkey}, win, new_key, "node1 through the new key", 1).status,
              IBV_WC_SUCCESS);
    EXPECT_EQ(
        write_wc(h, {dst + 64, 64, dmr->lkey}, win + 64, old_key, "node1 through the invalidated key", 1)
            .status,
        IBV_WC_REM_ACCESS_ERR);
    h.sleep(0, kQuietNs);
    h.expect_mem(1, dst, h.read_mem(0, src, n), "the WRITE's data");
    h.expect_mem(0, win, h.read_mem(0, src, 64),
                 "through the new key (node1 sends what the WRITE put there)");
    h.expect_fill(0, win + 64, 4096 - 64, kGuardByte, "nothing through the invalidated key");
    return early;
}
}  // namespace

SIM_TEST(E2eMemoryBmme, o10_37_2_37_o10_53_2_3_unfenced_invalidate_of_a_type2_window_runs_at_once) {
    rc_harness h;
    h.run([](rc_harness& h) {
        EXPECT_EQ(write_then_invalidate_window(h, false), 1u)
            << "relaxed: executed before the earlier WRITE completed, and before the later bind";
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_38_o10_53_2_4_fenced_invalidate_of_a_type2_window_waits_for_earlier_wrs) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        ASSERT_TRUE(da.local_inv_fence) << "the model offers Local Invalidate fencing";
        EXPECT_EQ(write_then_invalidate_window(h, true), 0u)
            << "strong: not executed while the earlier WRITE is unacknowledged; the bind waits for it";
    });
}

// ------------------------------------------------------------------ SEND with Invalidate

SIM_TEST(E2eMemoryBmme, o10_37_2_21_o10_38_2_1_send_with_invalidate_frees_the_key_after_earlier_messages) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 8192, 3721, kBindable);
        const auto pg = pages_of(h, 1, b.dst, 4096);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 1);
        ASSERT_EQ(fast_reg(h, 1, l, 0x21, 4096, kTargetAccess, pg).status, IBV_WC_SUCCESS);
        const uint32_t rkey = l->rkey;
        ASSERT_EQ(h.post_recv(1, {{b.dst + 4096, 4096, b.dmr->lkey}}, 21), 0);
        // An RDMA WRITE into the region, then at once the SEND invalidating it.
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 1000, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, kIova,
                              rkey),
                  0);
        ASSERT_EQ(post_send_inv(h, {b.src + 1000, 200, b.smr->lkey}, rkey), 0);
        auto swc = h.expect_wc(h.s[0].scq, 2, "write and send with invalidate");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS) << "the earlier WRITE was done before the invalidation";
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].opcode, IBV_WC_SEND);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.opcode, IBV_WC_RECV);
        EXPECT_TRUE(r.wc_flags & IBV_WC_WITH_INV);
        EXPECT_FALSE(r.wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(r.imm_data, rkey) << "the invalidated R_Key";
        EXPECT_EQ(r.byte_len, 200u);
        EXPECT_EQ(r.wr_id, 21u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 1000), "the WRITE's data");
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src + 1000, 200), "the SEND's data");
        EXPECT_EQ(state_of(l), IBV_MR_STATE_FREE);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, kIova + 2000, rkey, "after the invalidation").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 2000, 64, kGuardByte, "nothing after the invalidation");
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_44_send_with_invalidate_frees_a_type2_window) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 3744, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mw, 0x44, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k = mw->rkey;
        ASSERT_EQ(h.post_recv(1, {{b.dst + 4096, 4096, b.dmr->lkey}}, 44), 0);
        ASSERT_EQ(post_send_inv(h, {b.src, 100, b.smr->lkey}, k), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send with invalidate").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_TRUE(r.wc_flags & IBV_WC_WITH_INV);
        EXPECT_EQ(r.imm_data, k);
        // A Free window of the QP's PD: invalidation is a no-op that succeeds.
        ibv_mw* never = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(h.post_recv(1, {{b.dst + 4096, 4096, b.dmr->lkey}}, 45), 0);
        ASSERT_EQ(post_send_inv(h, {b.src, 100, b.smr->lkey}, never->rkey), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send invalidating a Free window").status, IBV_WC_SUCCESS);
        const ibv_wc r2 = one_wc(h, h.s[1].rcq, "receive");
        EXPECT_EQ(r2.status, IBV_WC_SUCCESS);
        EXPECT_TRUE(r2.wc_flags & IBV_WC_WITH_INV);
        // The invalidated window is Free: it binds again, and its old key is dead.
        ASSERT_EQ(bind2(h, mw, 0x45, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, mw->rkey, "rebound").status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 64, k, "the invalidated key").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "through the new binding");
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "nothing through the invalidated key");
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_24_o10_37_2_16_refused_send_with_invalidate_leaves_regions_valid) {
    rc_harness h;
    h.run([](rc_harness& h) {
        recreate_qp(h, 1, IBV_QP_CREATE_FAST_REG);
        bufs b = make_bufs(h, 8192, 3724, kBindable);
        const auto pg = pages_of(h, 1, b.dst + 4096, 4096);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 1);
        ASSERT_EQ(fast_reg(h, 1, l, 0x24, 4096, kTargetAccess, pg).status, IBV_WC_SUCCESS);
        ibv_mr* sh = ibv_reg_shared_mr(b.dmr, h.s[1].pd, kTargetAccess, 0x5000000);
        ASSERT_NE(sh, nullptr);
        struct refused {
            const char* what;
            uint32_t key;
            xlate_status why;
        };
        const refused cases[] = {
            {"a Register MR region", b.dmr->rkey, xlate_status::shared},  // b.dmr is now a share source
            {"a shared region", sh->rkey, xlate_status::shared},
            {"a fast-registered region, wrong key byte", ibv_inc_rkey(l->rkey), xlate_status::bad_key},
        };
        for (const refused& c : cases) {
            expect_send_inv_refused(h, b, c.key, c.why, c.what);
            recover(h);
        }
        EXPECT_EQ(state_of(l), IBV_MR_STATE_VALID);
        EXPECT_EQ(state_of(sh), IBV_MR_STATE_VALID);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, kIova, l->rkey, "fast-registered region").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc(h, {b.src + 64, 64, b.smr->lkey}, 0x5000000 + 2000, sh->rkey, "shared region").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src, 64), "through the L_Key");
        h.expect_mem(1, b.dst + 2000, h.read_mem(0, b.src + 64, 64), "through the shared region");
        // A plain Register MR region (not shared): bad type.
        ibv_mr* plain = h.reg(1, b.dst, 4096);
        expect_send_inv_refused(h, b, plain->rkey, xlate_status::bad_type, "a plain Register MR region");
        EXPECT_EQ(state_of(plain), IBV_MR_STATE_VALID);
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_26_o10_37_2_27_invalidating_a_type1_window_fails_and_leaves_it_bound) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 3727, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst + 2048, 2048, kRemoteRw).status, IBV_WC_SUCCESS);
        const ibv_wc inv = local_inv(h, 1, mw->rkey);
        EXPECT_EQ(inv.status, IBV_WC_MW_BIND_ERR) << "o10-37.2.26: no Local Invalidate of a type 1 window";
        EXPECT_EQ(inv.vendor_err, vendor(xlate_status::bad_type));
        recover(h);
        expect_send_inv_refused(h, b, mw->rkey, xlate_status::bad_type, "type 1 window");
        recover(h);
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 2048, mw->rkey, "the window is unchanged").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 2048, h.read_mem(0, b.src, 64), "through the window");
    });
}

SIM_TEST(E2eMemoryBmme,
         o10_37_2_39_o10_37_2_44_refused_send_with_invalidate_of_a_type2b_window_leaves_it_bound) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 3739, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mw, 0x39, b.dmr, b.dst + 4096, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        expect_send_inv_refused(h, b, ibv_inc_rkey(mw->rkey), xlate_status::bad_key, "wrong key byte");
        recover(h);
        // Bound through another QP (same PD): the QP numbers differ.
        ibv_qp* q2 = second_qp_on_node1(h);
        ASSERT_NE(q2, nullptr);
        ibv_mw* other = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, other, 0x3A, b.dmr, b.dst + 4096, 100, kRemoteRw, q2).status, IBV_WC_SUCCESS);
        expect_send_inv_refused(h, b, other->rkey, xlate_status::bad_qpn, "window bound to another QP");
        recover(h);
        // A Free window of another PD.
        ibv_pd* pd2 = ibv_alloc_pd(h.s[1].ctx);
        ibv_mw* foreign = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
        expect_send_inv_refused(h, b, foreign->rkey, xlate_status::bad_pd, "Free window of another PD");
        recover(h);
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 4096, mw->rkey, "the window is unchanged").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src, 64), "through the window");
    });
}

SIM_TEST(E2eMemoryBmme, o10_37_2_44_send_with_invalidate_of_a_type2a_window_needs_the_binding_qp) {
    rc_config cfg;
    cfg.keys = {{"hca.mw_type2", "2A"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 3745, kBindable);
        ibv_qp* q2 = second_qp_on_node1(h);
        ASSERT_NE(q2, nullptr);
        ibv_mw* theirs = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, theirs, 0x2B, b.dmr, b.dst + 4096, 100, kRemoteRw, q2).status, IBV_WC_SUCCESS);
        expect_send_inv_refused(h, b, theirs->rkey, xlate_status::bad_qpn, "2A window bound to another QP");
        recover(h);
        // Bound through the receiving QP: the invalidation succeeds. (Bound only now: with a 2A
        // window bound the QP could not be reset by recover above.)
        ibv_mw* mine = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mine, 0x2A, b.dmr, b.dst + 4096, 100, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), EBUSY);
        ibv_mr* rbuf = h.reg(1, b.dst, 4096, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, rbuf->lkey}}, 46), 0);
        ASSERT_EQ(post_send_inv(h, {b.src, 100, b.smr->lkey}, mine->rkey), 0);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_TRUE(r.wc_flags & IBV_WC_WITH_INV);
        EXPECT_EQ(r.imm_data, mine->rkey);
        // The invalidation released the QP's last 2A window binding: Reset is allowed now.
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        EXPECT_EQ(to_state(q2, IBV_QPS_RESET), EBUSY) << "the other QP still has its window";
    });
}
