// Memory windows on the real model, end to end (two nodes back to back, bench_harness.h):
// type 1 windows bound by the Bind MW verb, type 2A / 2B windows bound by bind WRs, their
// keys, bind-time checks (C10-72..75), access-time checks (C10-61, C10-76.2.1, C10-77,
// o10-37.2.42/43), rebind and deallocation while in use, and QP destroy / reset with type 2A
// windows bound. Windows live on node1; node0 accesses through them. Test names carry the
// compliance IDs of IBA 10.6.7 they assert.
#include <gtest/gtest.h>

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

rc_config type2a() {
    rc_config c;
    c.keys = {{"hca.mw_type2", "2A"}};
    return c;
}

/// A second connected RC QP pair: node0's in the harness PD, node1's in `pd1`, own CQs.
struct extra_pair {
    ibv_qp* qp[2] = {nullptr, nullptr};
};
extra_pair make_pair(rc_harness& h, ibv_pd* pd1) {
    extra_pair p;
    for (unsigned i = 0; i < 2; ++i) {
        ibv_qp_init_attr a{};
        a.send_cq = ibv_create_cq(h.s[i].ctx, 64);
        a.recv_cq = ibv_create_cq(h.s[i].ctx, 64);
        a.qp_type = IBV_QPT_RC;
        a.cap = {16, 16, 2, 2, 0};
        p.qp[i] = ibv_create_qp(i ? pd1 : h.s[0].pd, &a);
        EXPECT_NE(p.qp[i], nullptr) << "extra QP on node" << i;
        if (!p.qp[i]) return p;
    }
    for (unsigned i = 0; i < 2; ++i)
        EXPECT_EQ(h.connect_qp(p.qp[i], IBV_QPS_RTS, p.qp[1 - i]->qp_num, h.s[1 - i].lid, 0x300 + (1 - i),
                               0x300 + i),
                  0);
    return p;
}

/// A 256 KiB WRITE (64 packets) through `rkey` failed because its window changed while it ran:
/// whole packets from the start were placed, nothing after them.
void expect_write_stopped_midway(rc_harness& h, const bufs& b, const std::vector<uint8_t>& data,
                                 const ibv_wc& wc, const std::string& what) {
    EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << what;
    h.sleep(1, kQuietNs);
    const auto got = h.read_mem(1, b.dst, data.size());
    const size_t placed = placed_prefix(got, data);
    EXPECT_GT(placed, 0u) << what << ": the packets before the change were placed";
    EXPECT_LT(placed, data.size() / 2) << what << ": the change came early in the transfer";
    EXPECT_EQ(placed % 4096, 0u) << what << ": whole packets";
    h.expect_fill(1, b.dst + placed, data.size() - placed, kGuardByte, what + ": nothing after the change");
}

}  // namespace

// ------------------------------------------------------------------ type 1 windows

SIM_TEST(E2eMemoryWindows, C10_66_2_1_C10_66_2_2_each_type1_bind_gives_a_new_rkey_and_the_old_one_fails) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW) << "C10-66.2.1: type 1 windows supported";
        EXPECT_GT(da.max_mw, 0);
        bufs b = make_bufs(h, 8192, 662, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_NE(mw, nullptr);
        ibv_wc bw = bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw);
        EXPECT_EQ(bw.status, IBV_WC_SUCCESS);
        EXPECT_EQ(bw.opcode, IBV_WC_BIND_MW);
        EXPECT_EQ(bw.wr_id, 50u);
        const uint32_t k1 = mw->rkey;
        EXPECT_EQ(hw::key_index(k1), mw->handle);
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, b.dst, k1, "first key").status, IBV_WC_SUCCESS);
        bw = bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw);
        EXPECT_EQ(bw.status, IBV_WC_SUCCESS);
        const uint32_t k2 = mw->rkey;
        EXPECT_NE(k2, k1) << "a new R_Key on every bind";
        EXPECT_EQ(hw::key_index(k2), mw->handle);
        EXPECT_EQ(write_wc(h, {b.src + 100, 100, b.smr->lkey}, b.dst + 100, k2, "second key").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 200), "written through both keys");
        EXPECT_EQ(
            write_wc(h, {b.src, 100, b.smr->lkey}, b.dst + 200, k1, "first key after the rebind").status,
            IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 200, 8192 - 200, kGuardByte, "nothing through the old key");
    });
}

SIM_TEST(E2eMemoryWindows, C10_66_2_3_o10_37_2_25_wr_posted_after_a_bind_verb_sees_the_bind) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 663, kBindable);
        const uint64_t msg = h.alloc(0, 64, 64);
        ibv_mr* mmr = h.reg(0, msg, 64);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_NE(mw, nullptr);
        ASSERT_EQ(h.post_recv(0, {{msg, 64, mmr->lkey}}, 7), 0);
        // Bind, then at once a SEND telling node0 the new R_Key: the SEND starts after the bind.
        const uint64_t binds = ctr(1, "translation_unit.binds");
        ASSERT_EQ(post_bind1(h, 1, mw, b.dmr, b.dst, 4096, kRemoteRw), 0);
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND_WITH_IMM, {}, 51, IBV_SEND_SIGNALED, 0, 0, mw->rkey), 0);
        auto rwc = h.expect_wc(h.s[0].rcq, 1, "the R_Key arrives");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(ctr(1, "translation_unit.binds"), binds + 1) << "bound before the SEND left";
        EXPECT_EQ(
            write_wc(h, {b.src, 512, b.smr->lkey}, b.dst, rwc[0].imm_data, "write with the key received")
                .status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 512), "written through the window");
        auto swc = h.expect_wc(h.s[1].scq, 2, "bind and send completions");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].opcode, IBV_WC_BIND_MW);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].opcode, IBV_WC_SEND);
        EXPECT_EQ(swc[1].wr_id, 51u);
    });
}

SIM_TEST(E2eMemoryWindows, C10_66_2_4_zero_length_bind_revokes_access_until_the_next_bind) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 664, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_NE(mw, nullptr);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k1 = mw->rkey;
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, k1, "bound").status, IBV_WC_SUCCESS);
        const ibv_wc unbind = bind1(h, mw, nullptr, 0, 0, 0);
        EXPECT_EQ(unbind.status, IBV_WC_SUCCESS);
        EXPECT_EQ(unbind.opcode, IBV_WC_BIND_MW);
        const uint32_t k2 = mw->rkey;
        for (uint32_t key : {k1, k2}) {
            EXPECT_EQ(
                write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 64, key, "after the zero-length bind").status,
                IBV_WC_REM_ACCESS_ERR);
            recover(h);
        }
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "no access after the zero-length bind");
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 64, mw->rkey, "rebound").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 64, h.read_mem(0, b.src, 64), "written after the rebind");
    });
}

SIM_TEST(E2eMemoryWindows, C10_66_2_5_o10_37_2_41_windows_on_one_region_have_independent_rights_and_ranges) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 4096, 665, kBindable);
        const uint64_t sink = h.alloc(0, 8192, 4096);
        ibv_mr* smr = h.reg(0, sink, 8192);
        ibv_mw* wa = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ibv_mw* wb = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ibv_mw* wc = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_TRUE(wa && wb && wc);
        ASSERT_EQ(bind1(h, wa, b.dmr, b.dst, 4096, IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
        ASSERT_EQ(bind1(h, wb, b.dmr, b.dst + 2048, 4096, IBV_ACCESS_REMOTE_READ).status,
                  IBV_WC_SUCCESS);  // overlaps
        ASSERT_EQ(bind2(h, wc, 0x33, b.dmr, b.dst + 8192, 4096, kRemoteRw).status,
                  IBV_WC_SUCCESS);  // disjoint
        EXPECT_EQ(write_wc(h, {b.src, 4096, b.smr->lkey}, b.dst, wa->rkey, "write through A").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc(h, {b.src + 8192, 4096, b.smr->lkey}, b.dst + 8192, wc->rkey, "write through C").status,
            IBV_WC_SUCCESS);
        const ibv_wc r = read_wc(h, {sink, 4096, smr->lkey}, b.dst + 2048, wb->rkey, "read through B");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, b.dst + 2048, 4096), "B reads what A wrote in the overlap");
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 4096), "A's range");
        h.expect_mem(1, b.dst + 8192, h.read_mem(0, b.src + 8192, 4096), "C's range");
        h.expect_fill(1, b.dst + 4096, 4096, kGuardByte, "between A and C");
        // B grants no write, though A does over the same bytes.
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 4096, wb->rkey, "write through B").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 4096, 4096, kGuardByte, "not written through B");
    });
}

SIM_TEST(E2eMemoryWindows, C10_61_window_bounds_hold_to_the_byte) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 61, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_NE(mw, nullptr);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst + 100, 1000, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k = mw->rkey;
        EXPECT_EQ(write_wc(h, {b.src, 1000, b.smr->lkey}, b.dst + 100, k, "exactly the window").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 100, h.read_mem(0, b.src, 1000), "the window's bytes");
        EXPECT_EQ(write_wc(h, {b.src, 1, b.smr->lkey}, b.dst + 99, k, "one byte before").status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        EXPECT_EQ(write_wc(h, {b.src, 1, b.smr->lkey}, b.dst + 1100, k, "one byte after").status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        EXPECT_EQ(write_wc(h, {b.src, 2, b.smr->lkey}, b.dst + 1099, k, "last byte and one more").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 100, kGuardByte, "before the window");
        h.expect_fill(1, b.dst + 1100, 4096 - 1100, kGuardByte, "after the window");
        h.expect_mem(1, b.dst + 100, h.read_mem(0, b.src, 1000), "the window's bytes unchanged");
    });
}

SIM_TEST(E2eMemoryWindows, C10_62_C10_74_remote_write_or_atomic_window_needs_local_write_on_the_region) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 62, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
        h.write_mem(1, b.dst, pattern(4096, 620));
        const uint64_t sink = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sink, 4096);
        // The rights that do not need local write are granted.
        ibv_mw* rd = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, rd, b.dmr, b.dst, 4096, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
        EXPECT_EQ(read_wc(h, {sink, 4096, smr->lkey}, b.dst, rd->rkey, "read through the window").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, b.dst, 4096), "read");
        for (unsigned access : {unsigned(IBV_ACCESS_REMOTE_WRITE), unsigned(IBV_ACCESS_REMOTE_ATOMIC),
                                unsigned(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)}) {
            ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
            ASSERT_NE(mw, nullptr);
            const ibv_wc bw = bind1(h, mw, b.dmr, b.dst, 4096, access);
            EXPECT_EQ(bw.status, IBV_WC_MW_BIND_ERR) << access;
            EXPECT_EQ(bw.opcode, IBV_WC_BIND_MW) << access;
            EXPECT_EQ(bw.vendor_err, vendor(xlate_status::no_access)) << access;
            EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR) << access;
            recover(h);
        }
    });
}

SIM_TEST(E2eMemoryWindows, C10_67_rebinding_a_window_fails_the_write_in_progress_through_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t n = 256 * 1024;
        bufs b = make_bufs(h, n, 67, kBindable);
        const auto data = h.read_mem(0, b.src, n);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, n, kRemoteRw).status, IBV_WC_SUCCESS);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, uint32_t(n), b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst, mw->rkey),
                  0);
        h.sleep(1, 6'000);                                               // the WRITE takes ~27 us on the wire
        ASSERT_EQ(post_bind1(h, 1, mw, b.dmr, b.dst, n, kRemoteRw), 0);  // same range, new key
        const ibv_wc wc = one_wc(h, h.s[0].scq, "write");
        const ibv_wc bw = one_wc(h, h.s[1].scq, "rebind");
        EXPECT_EQ(bw.status, IBV_WC_SUCCESS);
        EXPECT_EQ(bw.opcode, IBV_WC_BIND_MW);
        expect_write_stopped_midway(h, b, data, wc, "WRITE through a window rebound under it");
    });
}

SIM_TEST(E2eMemoryWindows, C10_68_after_a_rebind_completes_the_previous_binding_gives_no_access) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 68, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k1 = mw->rkey;
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst + 4096, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k2 = mw->rkey;
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 4096, k2, "new binding").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, k2, "new key, old range").status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, k1, "old key, old range").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 4096, kGuardByte, "old range");
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src, 64), "new range");
    });
}

SIM_TEST(E2eMemoryWindows, C10_69_deallocating_a_window_fails_the_write_in_progress_through_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t n = 256 * 1024;
        bufs b = make_bufs(h, n, 69, kBindable);
        const auto data = h.read_mem(0, b.src, n);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, n, kRemoteRw).status, IBV_WC_SUCCESS);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, uint32_t(n), b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst, mw->rkey),
                  0);
        h.sleep(1, 6'000);
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);
        const ibv_wc wc = one_wc(h, h.s[0].scq, "write");
        expect_write_stopped_midway(h, b, data, wc, "WRITE through a window deallocated under it");
    });
}

SIM_TEST(E2eMemoryWindows, C10_70_C10_71_no_access_through_a_deallocated_window_and_no_orphans) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 70, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k = mw->rkey;
        // C10-71: the region cannot be deregistered under the window (no orphaned window).
        EXPECT_EQ(ibv_dereg_mr(b.dmr), EBUSY);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, k, "window after the refused dereg").status,
                  IBV_WC_SUCCESS);
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 64, k, "deallocated window").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "nothing through the deallocated window");
        EXPECT_EQ(ibv_dereg_mr(b.dmr), 0) << "the deallocation unbound the window";
    });
}

// ------------------------------------------------------------------ bind-time checks

SIM_TEST(E2eMemoryWindows, C10_72_bind_needs_the_window_in_the_qps_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 72, kBindable);
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ibv_mw* mw = ibv_alloc_mw(other, IBV_MW_TYPE_1);
        ASSERT_NE(mw, nullptr);
        const ibv_wc bw = bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw);
        EXPECT_EQ(bw.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(bw.vendor_err, vendor(xlate_status::bad_pd));
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
        // A later WR flushes.
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND, {}, 99), 0);
        const ibv_wc fl = one_wc(h, h.s[1].scq, "after the failed bind");
        EXPECT_EQ(fl.status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(fl.wr_id, 99u);
    });
}

SIM_TEST(E2eMemoryWindows, C10_73_bind_needs_the_region_to_allow_window_binding) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 73, kTargetAccess);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        const ibv_wc bw = bind1(h, mw, b.dmr, b.dst, 4096, IBV_ACCESS_REMOTE_READ);
        EXPECT_EQ(bw.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(bw.vendor_err, vendor(xlate_status::no_access));
        EXPECT_EQ(ibv_dereg_mr(b.dmr), 0) << "nothing bound to the region";
    });
}

// The Bind MW verb moved mw->rkey to the next key byte when it posted the refused bind, while
// the HCA kept the window's key: a later bind must still be possible (the window would
// otherwise be unusable for good).
SIM_TEST(E2eMemoryWindows, C10_66_2_2_type1_window_binds_again_after_a_refused_bind) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 7373, kBindable);
        ibv_mr* nobind = h.reg(1, b.dst, 4096, kTargetAccess);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, nobind, b.dst, 4096, kRemoteRw).status, IBV_WC_MW_BIND_ERR);
        recover(h);
        const ibv_wc bw = bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw);
        EXPECT_EQ(bw.status, IBV_WC_SUCCESS) << "vendor_err " << bw.vendor_err;
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, mw->rkey, "through the window").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "written through the window");
    });
}

SIM_TEST(E2eMemoryWindows, C10_75_bind_range_must_lie_in_a_region_of_the_windows_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 75, kBindable);
        ibv_mr* part = h.reg(1, b.dst + 100, 1000, kBindable);
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ibv_mr* foreign = ibv_reg_mr(other, b.dst, 8192, kBindable);
        ASSERT_TRUE(part && foreign);
        struct refused {
            ibv_mr* mr;
            uint64_t addr, len;
            xlate_status why;
        };
        for (const refused& c : {refused{part, b.dst + 100, 1001, xlate_status::out_of_bounds},
                                 refused{part, b.dst + 99, 10, xlate_status::out_of_bounds},
                                 refused{foreign, b.dst, 4096, xlate_status::bad_pd}}) {
            ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
            const ibv_wc bw = bind1(h, mw, c.mr, c.addr, c.len, kRemoteRw);
            EXPECT_EQ(bw.status, IBV_WC_MW_BIND_ERR) << c.len;
            EXPECT_EQ(bw.vendor_err, vendor(c.why)) << c.len;
            recover(h);
        }
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        EXPECT_EQ(bind1(h, mw, part, b.dst + 100, 1000, kRemoteRw).status, IBV_WC_SUCCESS)
            << "exactly the region";
    });
}

SIM_TEST(E2eMemoryWindows,
         o10_36_2_2_windows_bind_to_va_regions_zero_based_or_not_but_not_to_zero_based_regions) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 362, kBindable);
        ibv_mw* z = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ibv_mw* v = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_TRUE(z && v);
        ASSERT_EQ(bind1(h, z, b.dmr, b.dst + 1000, 2000, kRemoteRw | IBV_ACCESS_ZERO_BASED).status,
                  IBV_WC_SUCCESS);
        ASSERT_EQ(bind2(h, v, 0x11, b.dmr, b.dst + 4096, 2000, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, 50, z->rkey, "zero-based window, offset 50").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 1050, h.read_mem(0, b.src, 100), "offset 50 of the window");
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, b.dst + 4096, v->rkey, "VA-based window").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src, 100), "VA-based window");
        // A zero-based window ends at its length.
        EXPECT_EQ(write_wc(h, {b.src, 2, b.smr->lkey}, 1999, z->rkey, "past the zero-based window").status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        // A bind onto a zero-based region is refused.
        ibv_mr* zmr = h.reg(1, b.dst, 8192, kBindable | IBV_ACCESS_ZERO_BASED);
        ASSERT_NE(zmr, nullptr);
        ibv_mw* w = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        const ibv_wc bw = bind1(h, w, zmr, 0, 4096, kRemoteRw);
        EXPECT_EQ(bw.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(bw.vendor_err, vendor(xlate_status::bad_zbva));
        recover(h);
        ibv_mw* w2 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        const ibv_wc bw2 = bind2(h, w2, 0x12, zmr, 0, 4096, kRemoteRw);
        EXPECT_EQ(bw2.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(bw2.vendor_err, vendor(xlate_status::bad_zbva));
    });
}

// ------------------------------------------------------------------ access-time checks

SIM_TEST(E2eMemoryWindows, C10_76_2_1_type1_window_access_needs_the_responding_qps_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 76, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        // A type 1 window is not tied to a QP: another QP of the same PD reaches it.
        extra_pair same = make_pair(h, h.s[1].pd);
        ASSERT_TRUE(same.qp[0] && same.qp[1]);
        EXPECT_EQ(
            write_wc_on(h, same.qp[0], {b.src, 64, b.smr->lkey}, b.dst, mw->rkey, "other QP, same PD").status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "written through the other QP");
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        extra_pair foreign = make_pair(h, other);
        ASSERT_TRUE(foreign.qp[0] && foreign.qp[1]);
        EXPECT_EQ(
            write_wc_on(h, foreign.qp[0], {b.src, 64, b.smr->lkey}, b.dst + 64, mw->rkey, "QP of another PD")
                .status,
            IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(query_state(foreign.qp[1]), IBV_QPS_ERR);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS) << "the binding QP is not affected";
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "nothing through the other PD's QP");
    });
}

SIM_TEST(E2eMemoryWindows, C10_77_window_rights_and_bounds_apply_at_access_time) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 77, kBindable);
        h.write_mem(1, b.dst, pattern(8192, 770));
        const uint64_t sink = h.alloc(0, 8192, 4096);
        h.fill_mem(0, sink, 8192, kGuardByte);
        ibv_mr* smr = h.reg(0, sink, 8192);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst + 1000, 4000, IBV_ACCESS_REMOTE_READ).status, IBV_WC_SUCCESS);
        EXPECT_EQ(read_wc(h, {sink, 4000, smr->lkey}, b.dst + 1000, mw->rkey, "read of the window").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, b.dst + 1000, 4000), "read");
        const auto before = h.read_mem(1, b.dst, 8192);
        // The region grants remote write; the window does not.
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 1000, mw->rkey, "write through a read window")
                      .status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        // Inside the region, outside the window.
        h.fill_mem(0, sink, 8192, kGuardByte);
        EXPECT_EQ(read_wc(h, {sink, 100, smr->lkey}, b.dst + 4950, mw->rkey, "read past the window").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(0, sink, 8192, kGuardByte, "nothing read");
        h.expect_mem(1, b.dst, before, "target unchanged");
    });
}

SIM_TEST(E2eMemoryWindows, C10_79_2_2_region_under_bound_windows_cannot_leave_the_windows_pd_or_go) {
    // An orphan window (region gone, or moved to another PD) could reach buffers outside any
    // region of its PD; the CI prevents it: reregister and deregister are refused while windows
    // of either type are bound, and both still reach exactly their range.
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 7922, kBindable);
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ASSERT_NE(other, nullptr);
        ibv_mw* w1 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ibv_mw* w2 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind1(h, w1, b.dmr, b.dst, 1024, kRemoteRw).status, IBV_WC_SUCCESS);
        ASSERT_EQ(bind2(h, w2, 0x79, b.dmr, b.dst + 2048, 1024, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t mr_rkey = b.dmr->rkey;
        EXPECT_EQ(ibv_rereg_mr(b.dmr, IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0), EBUSY);
        EXPECT_EQ(ibv_rereg_mr(b.dmr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b.dst, 2048, 0), EBUSY);
        EXPECT_EQ(ibv_dereg_mr(b.dmr), EBUSY);
        EXPECT_EQ(b.dmr->rkey, mr_rkey) << "the region keeps its keys";
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(b.dmr, &qa), 0);
        EXPECT_EQ(qa.pd, h.s[1].pd);
        EXPECT_EQ(qa.length, 4096u);
        EXPECT_EQ(write_wc(h, {b.src, 1024, b.smr->lkey}, b.dst, w1->rkey, "type 1 window").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc(h, {b.src + 1024, 1024, b.smr->lkey}, b.dst + 2048, w2->rkey, "type 2 window").status,
            IBV_WC_SUCCESS);
        // Once the windows are gone the region may move to the other PD; the windows' keys are dead.
        ASSERT_EQ(ibv_dealloc_mw(w1), 0);
        ASSERT_EQ(ibv_dealloc_mw(w2), 0);
        ASSERT_EQ(ibv_rereg_mr(b.dmr, IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0), 0);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 1024, b.dmr->rkey, "region now in another PD")
                      .status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 1024), "through the type 1 window");
        h.expect_fill(1, b.dst + 1024, 1024, kGuardByte, "between the windows");
        h.expect_mem(1, b.dst + 2048, h.read_mem(0, b.src + 1024, 1024), "through the type 2 window");
        h.expect_fill(1, b.dst + 3072, 1024, kGuardByte, "after the windows");
    });
}

SIM_TEST(E2eMemoryWindows, C10_79_2_1_access_rights_are_those_of_the_path_used) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // The region grants local write and binding only; a window on it grants remote write.
        bufs b = make_bufs(h, 4096, 79, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
        ibv_mr* ro = h.reg(1, b.dst, 4096, IBV_ACCESS_REMOTE_READ);  // the same bytes, read only
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        ASSERT_EQ(bind1(h, mw, b.dmr, b.dst, 4096, IBV_ACCESS_REMOTE_WRITE).status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 128, b.smr->lkey}, b.dst, mw->rkey, "through the window").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 128), "written through the window");
        for (uint32_t key : {b.dmr->rkey, ro->rkey}) {
            EXPECT_EQ(write_wc(h, {b.src, 128, b.smr->lkey}, b.dst + 128, key, "through a region without it")
                          .status,
                      IBV_WC_REM_ACCESS_ERR);
            recover(h);
        }
        h.expect_fill(1, b.dst + 128, 4096 - 128, kGuardByte, "not written through the regions");
    });
}

// ------------------------------------------------------------------ type 2 windows

SIM_TEST(E2eMemoryWindows, o10_37_2_28_o10_37_2_32_o10_37_2_33_type2_bind_wr_gives_the_consumers_key_byte) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) << "default: type 2B";
        EXPECT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A) << "o10-37.2.31: never both";
        bufs b = make_bufs(h, 4096, 2833, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_NE(mw, nullptr);
        ibv_mw* t1 = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_1);
        // Immediate errors: the wrong bind for the type (o10-37.2.34/.35), zero-length type 2 (o10-37.2.40).
        ibv_mw_bind vb;
        vb.bind_info = {b.dmr, b.dst, 4096, kRemoteRw};
        EXPECT_EQ(ibv_bind_mw(h.s[1].qp, mw, &vb), EINVAL);
        EXPECT_EQ(post_bind2(h.s[1].qp, t1, 0x01, b.dmr, b.dst, 4096, kRemoteRw), EINVAL);
        EXPECT_EQ(post_bind2(h.s[1].qp, mw, 0x01, b.dmr, b.dst, 0, kRemoteRw), EINVAL);
        const ibv_wc bw = bind2(h, mw, 0x5C, b.dmr, b.dst, 4096, kRemoteRw);
        EXPECT_EQ(bw.status, IBV_WC_SUCCESS);
        EXPECT_EQ(bw.opcode, IBV_WC_BIND_MW);
        EXPECT_EQ(bw.wr_id, 60u);
        const uint32_t k1 = mw->rkey;
        EXPECT_EQ(k1, hw::make_key(mw->handle, 0x5C)) << "index of the window, key byte of the consumer";
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, k1, "consumer's key").status, IBV_WC_SUCCESS);
        // Invalidate, then bind again with another byte: only the new key works.
        ASSERT_EQ(post_local_inv(h.s[1].qp, k1), 0);
        const ibv_wc inv = one_wc(h, h.s[1].scq, "invalidate");
        EXPECT_EQ(inv.status, IBV_WC_SUCCESS);
        EXPECT_EQ(inv.opcode, IBV_WC_LOCAL_INV);
        ASSERT_EQ(bind2(h, mw, 0xE1, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(mw->rkey, hw::make_key(mw->handle, 0xE1));
        EXPECT_EQ(write_wc(h, {b.src + 64, 64, b.smr->lkey}, b.dst + 64, mw->rkey, "second key").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 128, k1, "first key").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 128), "written through both keys");
        h.expect_fill(1, b.dst + 128, 4096 - 128, kGuardByte, "nothing through the invalidated key");
    });
}

SIM_TEST(E2eMemoryWindows, o10_37_2_30_type2_bind_needs_a_free_window) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 2830, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mw, 0x21, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        const uint32_t k = mw->rkey;
        const ibv_wc again = bind2(h, mw, 0x22, b.dmr, b.dst, 2048, kRemoteRw);
        EXPECT_EQ(again.status, IBV_WC_MW_BIND_ERR);
        EXPECT_EQ(again.vendor_err, vendor(xlate_status::bad_state));
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
        recover(h);
        // The failed bind changed nothing: the first binding (same QP number) still holds.
        EXPECT_EQ(write_wc(h, {b.src, 4096, b.smr->lkey}, b.dst, k, "first binding").status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 4096), "the whole first range");
    });
}

SIM_TEST(E2eMemoryWindows, o10_37_2_36_wr_posted_after_a_bind_wr_sees_the_bind) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 2836, kBindable);
        const uint64_t msg = h.alloc(0, 64, 64);
        ibv_mr* mmr = h.reg(0, msg, 64);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_NE(mw, nullptr);
        ASSERT_EQ(h.post_recv(0, {{msg, 64, mmr->lkey}}, 7), 0);
        const uint64_t binds = ctr(1, "translation_unit.binds");
        ASSERT_EQ(post_bind2(h.s[1].qp, mw, 0x44, b.dmr, b.dst, 4096, kRemoteRw), 0);
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND_WITH_IMM, {}, 61, IBV_SEND_SIGNALED, 0, 0, mw->rkey), 0);
        auto rwc = h.expect_wc(h.s[0].rcq, 1, "the R_Key arrives");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(ctr(1, "translation_unit.binds"), binds + 1) << "bound before the SEND left";
        EXPECT_EQ(
            write_wc(h, {b.src, 256, b.smr->lkey}, b.dst, rwc[0].imm_data, "write with the key received")
                .status,
            IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 256), "written through the window");
        auto swc = h.expect_wc(h.s[1].scq, 2, "bind and send completions");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].opcode, IBV_WC_BIND_MW);
        EXPECT_EQ(swc[1].opcode, IBV_WC_SEND);
    });
}

SIM_TEST(E2eMemoryWindows,
         o10_37_2_29_o10_37_2_42_type2a_window_is_reached_only_through_the_qp_that_bound_it) {
    rc_harness h(type2a());
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
        EXPECT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) << "o10-37.2.31: never both";
        bufs b = make_bufs(h, 4096, 2842, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mw, 0x2A, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, mw->rkey, "the binding QP").status,
                  IBV_WC_SUCCESS);
        extra_pair other = make_pair(h, h.s[1].pd);  // same PD, another QP
        ASSERT_TRUE(other.qp[0] && other.qp[1]);
        EXPECT_EQ(
            write_wc_on(h, other.qp[0], {b.src, 64, b.smr->lkey}, b.dst + 64, mw->rkey, "another QP").status,
            IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(query_state(other.qp[1]), IBV_QPS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "through the binding QP");
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "nothing through the other QP");
    });
}

SIM_TEST(E2eMemoryWindows,
         o10_37_2_29_o10_2_2_4_o10_10_2_6_qp_with_type2a_windows_bound_cannot_be_destroyed_or_reset) {
    rc_harness h(type2a());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 2829, kBindable);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mw, 0x2A, b.dmr, b.dst, 4096, kRemoteRw).status, IBV_WC_SUCCESS);
        EXPECT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), EBUSY);
        EXPECT_EQ(ibv_destroy_qp(h.s[1].qp), EBUSY);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS) << "the QP stays as it was";
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst, mw->rkey, "the window still works").status,
                  IBV_WC_SUCCESS);
        // Invalidating the window (needs the binding QP's number) releases the QP.
        ASSERT_EQ(post_local_inv(h.s[1].qp, mw->rkey), 0);
        EXPECT_EQ(one_wc(h, h.s[1].scq, "invalidate").status, IBV_WC_SUCCESS);
        EXPECT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        EXPECT_EQ(ibv_destroy_qp(h.s[1].qp), 0);
        h.s[1].qp = nullptr;
    });
}

SIM_TEST(
    E2eMemoryWindows,
    o10_37_2_30_o10_37_2_43_o10_2_2_5_o10_10_2_7_type2b_window_needs_the_binding_qp_and_allows_its_reset) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 2843, kBindable);
        extra_pair other = make_pair(h, h.s[1].pd);
        ASSERT_TRUE(other.qp[0] && other.qp[1]);
        ibv_mw* mw = ibv_alloc_mw(h.s[1].pd, IBV_MW_TYPE_2);
        ASSERT_EQ(bind2(h, mw, 0x2B, b.dmr, b.dst, 4096, kRemoteRw, other.qp[1]).status, IBV_WC_SUCCESS);
        EXPECT_EQ(
            write_wc_on(h, other.qp[0], {b.src, 64, b.smr->lkey}, b.dst, mw->rkey, "the binding QP").status,
            IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 64, mw->rkey, "same PD, another QP").status,
                  IBV_WC_REM_ACCESS_ERR);
        recover(h);
        // Type 2B windows do not hold their QP: reset and destroy are allowed while bound.
        EXPECT_EQ(to_state(other.qp[1], IBV_QPS_RESET), 0);
        EXPECT_EQ(ibv_destroy_qp(other.qp[1]), 0);
        EXPECT_EQ(
            write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 128, mw->rkey, "after the QP was destroyed").status,
            IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64), "through the binding QP");
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "nothing through other QPs");
    });
}
