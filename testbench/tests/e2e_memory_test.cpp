// Memory registration and protection on the real model, end to end (two nodes back to back,
// bench_harness.h): virtual, zero-based, page-list and block-list regions carrying data,
// reregistration, access rights, protection domains, zero-length segments and deregistration
// (also in the middle of a transfer). Test names carry the compliance IDs of IBA 10.6 they
// assert. Windows: e2e_memory_windows_test.cpp; shared regions, fast register, invalidation,
// SEND with Invalidate and the reserved L_Key: e2e_memory_bmme_test.cpp.
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

/// 4 KiB pages of node i's [va, va + len), pinned (ibv_map_pages).
std::vector<uint64_t> pages_of(rc_harness& h, unsigned i, uint64_t va, size_t len) {
    std::vector<uint64_t> p;
    EXPECT_EQ(ibv_map_pages(h.s[i].ctx, va, len, &p), 0);
    return p;
}

}  // namespace

// ------------------------------------------------------------------ virtual address regions

SIM_TEST(E2eMemory, C10_45_2_1_C10_50_regions_at_any_byte_alignment_carry_writes_and_reads) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 5 * 4096, 50);
        const uint64_t sink = h.alloc(0, 8192, 4096);
        ibv_mr* smr = h.reg(0, sink, 8192);
        const auto data = h.read_mem(0, b.src, 3000);
        uint64_t at = b.dst;
        for (uint64_t align : {1u, 7u, 4095u}) {
            at += align;  // distinct, unaligned regions
            ibv_mr* mr = h.reg(1, at, 3000);
            ASSERT_NE(mr, nullptr);
            EXPECT_EQ(mr->addr, at) << "VA-based: requests name the region's virtual addresses";
            const ibv_wc w =
                write_wc(h, {b.src, 3000, b.smr->lkey}, at, mr->rkey, "write of the whole region");
            EXPECT_EQ(w.status, IBV_WC_SUCCESS) << align;
            h.expect_mem(1, at, data, "region at alignment " + std::to_string(align));
            h.fill_mem(0, sink, 8192, kGuardByte);
            const ibv_wc r = read_wc(h, {sink + align, 2999, smr->lkey}, at + 1, mr->rkey, "read back");
            EXPECT_EQ(r.status, IBV_WC_SUCCESS) << align;
            EXPECT_EQ(r.byte_len, 2999u);
            h.expect_mem(0, sink + align, {data.begin() + 1, data.end()}, "read back");
            h.expect_fill(0, sink, align, kGuardByte, "before the READ's sink");
            at += 3000;
        }
        h.expect_fill(1, b.dst, 1, kGuardByte, "before the first region");
        h.expect_fill(1, at, b.dst + 5 * 4096 - at, kGuardByte, "after the last region");
    });
}

SIM_TEST(E2eMemory, C10_51_regions_of_any_length_carry_data) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t big = (1u << 20) + 3;  // 257 pages, odd length
        bufs b = make_bufs(h, big + 8192, 51);
        for (size_t len : {size_t(1), size_t(4097), big}) {
            h.fill_mem(1, b.dst, big + 8192, kGuardByte);
            ibv_mr* mr = h.reg(1, b.dst + 5, len);
            ASSERT_NE(mr, nullptr) << len;
            EXPECT_EQ(mr->length, len);
            const ibv_wc w =
                write_wc(h, {b.src, uint32_t(len), b.smr->lkey}, b.dst + 5, mr->rkey, "whole region");
            EXPECT_EQ(w.status, IBV_WC_SUCCESS) << len;
            h.expect_mem(1, b.dst + 5, h.read_mem(0, b.src, len),
                         "region of " + std::to_string(len) + " bytes");
            h.expect_fill(1, b.dst + 5 + len, 100, kGuardByte, "after the region");
            ASSERT_EQ(ibv_dereg_mr(mr), 0);
        }
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        ASSERT_GT(da.max_mr_size, 0u);
        errno = 0;
        EXPECT_EQ(ibv_reg_mr(h.s[1].pd, b.dst, da.max_mr_size + 1, kTargetAccess), nullptr)
            << "beyond the HCA's limit";
        EXPECT_EQ(errno, EINVAL);
    });
}

SIM_TEST(E2eMemory, o10_36_2_2_zero_based_region_is_addressed_from_zero) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        ASSERT_TRUE(da.zbva) << "the model supports zero-based virtual addresses";
        bufs b = make_bufs(h, 3 * 4096, 362);
        const uint64_t base = b.dst + 0x234;
        ibv_mr* z = h.reg(1, base, 5000, kTargetAccess | IBV_ACCESS_ZERO_BASED);
        ASSERT_NE(z, nullptr);
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(z, &qa), 0);
        EXPECT_EQ(qa.addr, 0u);
        // WRITE at offset 100 lands 100 bytes into the region.
        ibv_wc w = write_wc(h, {b.src, 4000, b.smr->lkey}, 100, z->rkey, "write at offset 100");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, base + 100, h.read_mem(0, b.src, 4000), "written at offset 100");
        h.expect_fill(1, b.dst, 0x234 + 100, kGuardByte, "before offset 100");
        // READ of the last 500 bytes (offsets 4500..4999).
        const uint64_t sink = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sink, 4096);
        ibv_wc r = read_wc(h, {sink, 500, smr->lkey}, 4500, z->rkey, "read at offset 4500");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, base + 4500, 500), "read from offset 4500");
        // A zero-based source region on node0: the SGE names offset 10.
        ibv_mr* zs = h.reg(0, b.src + 0x10, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
        ASSERT_NE(zs, nullptr);
        w = write_wc(h, {10, 64, zs->lkey}, 0, z->rkey, "write from a zero-based SGE");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, base, h.read_mem(0, b.src + 0x10 + 10, 64), "gathered from offset 10");
        // The region's virtual address is not an address of it: offset 0x7f.. is out of bounds.
        const auto before = h.read_mem(1, b.dst, 3 * 4096);
        w = write_wc(h, {b.src, 8, b.smr->lkey}, base, z->rkey, "write naming the virtual address");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_mem(1, b.dst, before, "nothing written by the refused WRITE");
    });
}

// ------------------------------------------------------------------ physical regions

SIM_TEST(E2eMemory, C10_53_2_1_page_list_region_carries_data_in_list_order) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 4096, 53);
        const auto pg = pages_of(h, 1, b.dst, 3 * 4096);
        ASSERT_EQ(pg.size(), 3u);
        const std::vector<uint64_t> list = {pg[2], pg[0], pg[1]};  // region page k = buffer page list[k]
        ibv_phys_mr_attr a;
        a.list = list.data();
        a.count = 3;
        a.size = 4096;
        a.iova = 0x123400000ull + 100;
        a.length = 3 * 4096 - 200;
        a.first_offset = 100;
        a.access = kTargetAccess;
        ibv_mr* pmr = ibv_reg_phys_mr(h.s[1].pd, &a);
        ASSERT_NE(pmr, nullptr) << errno;
        const uint32_t n = uint32_t(a.length);
        const ibv_wc w = write_wc(h, {b.src, n, b.smr->lkey}, a.iova, pmr->rkey, "write over the page list");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        const auto data = h.read_mem(0, b.src, n);
        h.expect_mem(1, b.dst + 2 * 4096 + 100, {data.begin(), data.begin() + 3996},
                     "region page 0 = buffer page 2");
        h.expect_mem(1, b.dst, {data.begin() + 3996, data.begin() + 3996 + 4096},
                     "region page 1 = buffer page 0");
        h.expect_mem(1, b.dst + 4096, {data.begin() + 8092, data.end()}, "region page 2 = buffer page 1");
        h.expect_fill(1, b.dst + 2 * 4096, 100, kGuardByte, "before the first byte");
        h.expect_fill(1, b.dst + 4096 + 3996, 100, kGuardByte, "after the last byte");
        // C10-53.2.1: an element off a page boundary is refused, and nothing is registered.
        std::vector<uint64_t> bad = list;
        bad[1] += 0x200;
        a.list = bad.data();
        const uint32_t mrs = h.s[1].ctx->mrs;
        errno = 0;
        EXPECT_EQ(ibv_reg_phys_mr(h.s[1].pd, &a), nullptr);
        EXPECT_EQ(errno, EINVAL);
        EXPECT_EQ(h.s[1].ctx->mrs, mrs);
    });
}

SIM_TEST(E2eMemory, o10_37_2_9_block_list_region_carries_data_across_unaligned_blocks) {
    rc_harness h;
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        ASSERT_TRUE(da.block_list);
        bufs b = make_bufs(h, 3 * 4096, 379);
        const auto pg = pages_of(h, 1, b.dst, 3 * 4096);
        ASSERT_EQ(pg.size(), 3u);
        // Three 1000-byte blocks at odd offsets inside the buffer's pages, out of order.
        const uint64_t off[3] = {2 * 4096 + 3, 0x777, 4096 + 1};
        const std::vector<uint64_t> list = {pg[2] + 3, pg[0] + 0x777, pg[1] + 1};
        ibv_phys_mr_attr a;
        a.list = list.data();
        a.count = 3;
        a.block_list = true;
        a.size = 1000;
        a.iova = 0x7000;
        a.length = 2500;
        a.first_offset = 10;
        a.access = kTargetAccess;
        ibv_mr* bmr = ibv_reg_phys_mr(h.s[1].pd, &a);
        ASSERT_NE(bmr, nullptr) << errno;
        const ibv_wc w =
            write_wc(h, {b.src, 2500, b.smr->lkey}, 0x7000, bmr->rkey, "write over the block list");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        const auto data = h.read_mem(0, b.src, 2500);
        h.expect_mem(1, b.dst + off[0] + 10, {data.begin(), data.begin() + 990}, "block 0 from offset 10");
        h.expect_mem(1, b.dst + off[1], {data.begin() + 990, data.begin() + 1990}, "block 1");
        h.expect_mem(1, b.dst + off[2], {data.begin() + 1990, data.end()}, "block 2, 510 bytes");
        h.expect_fill(1, b.dst + off[0], 10, kGuardByte, "block 0 before first_offset");
        h.expect_fill(1, b.dst + off[1] + 1000, 16, kGuardByte, "after block 1");
        h.expect_fill(1, b.dst + off[2] + 510, 16, kGuardByte, "after the region's end in block 2");
        // READ of a range spanning blocks 0..2 returns the same bytes.
        const uint64_t sink = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sink, 4096);
        const ibv_wc r = read_wc(h, {sink, 2000, smr->lkey}, 0x7000 + 400, bmr->rkey, "read across blocks");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, {data.begin() + 400, data.begin() + 2400}, "read across blocks");
    });
}

SIM_TEST(E2eMemory, o10_37_2_10_query_mr_reports_the_reserved_page_list_size) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t va = h.alloc(1, 4 * 4096, 4096);
        const auto pg = pages_of(h, 1, va, 4 * 4096);
        ibv_phys_mr_attr a;
        a.list = pg.data();
        a.count = 4;
        a.size = 4096;
        a.iova = 0x10000;
        a.length = 3 * 4096;
        a.access = IBV_ACCESS_LOCAL_WRITE;
        ibv_mr* pmr = ibv_reg_phys_mr(h.s[1].pd, &a);
        ASSERT_NE(pmr, nullptr);
        EXPECT_EQ(pmr->page_list_max, 4u) << "Register PMR returns it";
        ibv_mr_attr qa{};
        ASSERT_EQ(ibv_query_mr(pmr, &qa), 0);
        EXPECT_EQ(qa.page_list_max, 4u) << "the list given, not the pages the length needs";
        EXPECT_EQ(qa.state, IBV_MR_STATE_VALID);
        EXPECT_EQ(qa.length, 3u * 4096);
        EXPECT_EQ(qa.addr, 0x10000u);
        ibv_mr* l = ibv_alloc_lkey(h.s[1].pd, 40);
        ASSERT_NE(l, nullptr);
        EXPECT_EQ(l->page_list_max, 40u) << "Allocate L_Key returns it";
        ASSERT_EQ(ibv_query_mr(l, &qa), 0);
        EXPECT_EQ(qa.page_list_max, 40u);
        EXPECT_EQ(qa.state, IBV_MR_STATE_FREE);
        ibv_mr* v = h.reg(1, va + 0x234, 5000, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_EQ(ibv_query_mr(v, &qa), 0);
        EXPECT_EQ(qa.page_list_max, 2u) << "pages covered by [va + 0x234, +5000)";
    });
}

// ------------------------------------------------------------------ reregistration

SIM_TEST(E2eMemory, rereg_change_translation_moves_the_region_and_the_old_keys_fail) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4 * 4096, 71);
        const uint64_t other = h.alloc(1, 4096, 4096);
        h.fill_mem(1, other, 4096, kGuardByte);
        const uint32_t old_rkey = b.dmr->rkey;
        ASSERT_EQ(ibv_rereg_mr(b.dmr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, other, 4096, 0), 0);
        EXPECT_NE(b.dmr->rkey, old_rkey) << "new keys";
        ibv_wc w = write_wc(h, {b.src, 4096, b.smr->lkey}, other, b.dmr->rkey, "new key, new range");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, other, h.read_mem(0, b.src, 4096), "written at the new range");
        h.expect_fill(1, b.dst, 4 * 4096, kGuardByte, "old range untouched");
        // The old range under the new key is no longer part of the region.
        w = write_wc(h, {b.src, 16, b.smr->lkey}, b.dst, b.dmr->rkey, "new key, old range");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        recover(h);
        w = write_wc(h, {b.src, 16, b.smr->lkey}, other, old_rkey, "old key");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 4 * 4096, kGuardByte, "old range untouched");
        h.expect_mem(1, other, h.read_mem(0, b.src, 4096), "new range unchanged by refused writes");
    });
}

SIM_TEST(E2eMemory, rereg_change_access_grants_the_new_rights_under_the_new_key_only) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 72);
        ibv_mr* ro = h.reg(1, b.dst, 4096, IBV_ACCESS_REMOTE_READ);
        ASSERT_NE(ro, nullptr);
        const uint32_t old_rkey = ro->rkey;
        ASSERT_EQ(ibv_rereg_mr(ro, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, kTargetAccess), 0);
        EXPECT_NE(ro->rkey, old_rkey);
        ibv_wc w = write_wc(h, {b.src, 512, b.smr->lkey}, b.dst, ro->rkey, "write with the new right");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 512), "written");
        w = write_wc(h, {b.src + 512, 512, b.smr->lkey}, b.dst + 512, old_rkey, "write with the old key");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        recover(h);
        // Take the right away again: the write right is gone under the newest key.
        ASSERT_EQ(ibv_rereg_mr(ro, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, IBV_ACCESS_REMOTE_READ), 0);
        w = write_wc(h, {b.src + 512, 512, b.smr->lkey}, b.dst + 512, ro->rkey,
                     "write after the right was removed");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 512, 4096 - 512, kGuardByte, "nothing written by the refused writes");
    });
}

SIM_TEST(E2eMemory, rereg_change_pd_moves_the_region_to_the_qps_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 73);
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ASSERT_NE(other, nullptr);
        ibv_mr* mr = ibv_reg_mr(other, b.dst, 4096, kTargetAccess);
        ASSERT_NE(mr, nullptr);
        const uint32_t old_rkey = mr->rkey;
        ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, h.s[1].pd, 0, 0, 0), 0);
        EXPECT_EQ(mr->pd, h.s[1].pd);
        ibv_wc w = write_wc(h, {b.src, 256, b.smr->lkey}, b.dst, mr->rkey, "now in the QP's PD");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 256), "written");
        w = write_wc(h, {b.src, 256, b.smr->lkey}, b.dst + 1024, old_rkey, "old key");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        recover(h);
        ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, other, 0, 0, 0), 0);
        w = write_wc(h, {b.src, 256, b.smr->lkey}, b.dst + 1024, mr->rkey, "moved back to the other PD");
        EXPECT_EQ(w.status, IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 256, 4096 - 256, kGuardByte, "nothing written by the refused writes");
    });
}

// ------------------------------------------------------------------ access rights

SIM_TEST(E2eMemory, C10_47_local_read_is_implicit_in_virtual_and_physical_regions) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 2 * 4096, 47);
        ibv_mr* none = h.reg(0, b.src, 4096, 0);
        const auto pg = pages_of(h, 0, b.src + 4096, 4096);
        ibv_phys_mr_attr a;
        a.list = pg.data();
        a.count = 1;
        a.size = 4096;
        a.iova = 0xA000;
        a.length = 4096;
        a.access = 0;
        ibv_mr* pnone = ibv_reg_phys_mr(h.s[0].pd, &a);
        ASSERT_TRUE(none && pnone);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 300, none->lkey}, {0xA000 + 5, 200, pnone->lkey}}, 2),
                  0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "send gathered from regions without rights");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].byte_len, 500u);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 300), "from the virtual region");
        h.expect_mem(1, b.dst + 300, h.read_mem(0, b.src + 4096 + 5, 200), "from the physical region");
        const ibv_wc w = write_wc(h, {0xA000, 1000, pnone->lkey}, b.dst + 4096, b.dmr->rkey, "write source");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src + 4096, 1000), "write payload");
    });
}

SIM_TEST(E2eMemory, C10_48_remote_write_or_atomic_without_local_write_is_refused_at_registration) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 48);
        const uint32_t mrs = h.s[1].ctx->mrs;
        for (int access : {int(IBV_ACCESS_REMOTE_WRITE), int(IBV_ACCESS_REMOTE_ATOMIC),
                           int(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)}) {
            errno = 0;
            EXPECT_EQ(ibv_reg_mr(h.s[1].pd, b.dst, 4096, access), nullptr) << access;
            EXPECT_EQ(errno, EINVAL) << access;
        }
        const auto pg = pages_of(h, 1, b.dst, 4096);
        ibv_phys_mr_attr a;
        a.list = pg.data();
        a.count = 1;
        a.size = 4096;
        a.length = 4096;
        a.access = IBV_ACCESS_REMOTE_WRITE;
        EXPECT_EQ(ibv_reg_phys_mr(h.s[1].pd, &a), nullptr);
        EXPECT_EQ(errno, EINVAL);
        EXPECT_EQ(h.s[1].ctx->mrs, mrs) << "nothing registered";
        // Reregistering to remote write alone is refused too, and the region keeps working.
        const uint32_t rkey = b.dmr->rkey;
        EXPECT_EQ(ibv_rereg_mr(b.dmr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, IBV_ACCESS_REMOTE_WRITE),
                  EINVAL);
        EXPECT_EQ(b.dmr->rkey, rkey);
        const ibv_wc w =
            write_wc(h, {b.src, 128, b.smr->lkey}, b.dst, rkey, "write through the kept registration");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 128), "written");
    });
}

SIM_TEST(E2eMemory, C10_55_read_and_atomic_results_need_local_write_on_the_sink) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 55);
        ibv_mr* ratom = h.reg(1, b.dst, 4096, kTargetAccess | IBV_ACCESS_REMOTE_ATOMIC);
        const uint64_t sink = h.alloc(0, 4096, 4096);
        h.fill_mem(0, sink, 4096, kGuardByte);
        ibv_mr* ro = h.reg(0, sink, 4096, IBV_ACCESS_REMOTE_READ);
        ASSERT_TRUE(ratom && ro);
        ibv_wc r = read_wc(h, {sink, 1024, ro->lkey}, b.dst, b.dmr->rkey, "read into a read-only sink");
        EXPECT_EQ(r.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        h.expect_fill(0, sink, 4096, kGuardByte, "sink untouched");
        recover(h);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, sink, ro->lkey, 3, b.dst, ratom->rkey, 1), 0);
        const ibv_wc a = one_wc(h, h.s[0].scq, "atomic result into a read-only sink");
        EXPECT_EQ(a.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        h.expect_fill(0, sink, 4096, kGuardByte, "sink untouched");
        // The same sink registered with local write takes the READ.
        recover(h);
        ibv_mr* rw = h.reg(0, sink, 4096, IBV_ACCESS_LOCAL_WRITE);
        r = read_wc(h, {sink, 1024, rw->lkey}, b.dst, b.dmr->rkey, "read into a writable sink");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, b.dst, 1024), "read");
    });
}

// semantics.md: a local SGE fault (here: local write missing for a READ / atomic result) is
// found before anything is sent and the completion's vendor_err says why. In particular an
// atomic whose result cannot be stored must not execute at the responder.
SIM_TEST(E2eMemory, C10_55_sink_without_local_write_is_refused_before_the_request_is_sent) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 551);
        ibv_mr* ratom = h.reg(1, b.dst, 4096, kTargetAccess | IBV_ACCESS_REMOTE_ATOMIC);
        const uint64_t sink = h.alloc(0, 4096, 4096);
        ibv_mr* ro = h.reg(0, sink, 4096, IBV_ACCESS_REMOTE_READ);
        ASSERT_TRUE(ratom && ro);
        const uint64_t responses = ctr(1, "transport_engine.read_responses_sent");
        const ibv_wc r = read_wc(h, {sink, 1024, ro->lkey}, b.dst, b.dmr->rkey, "read into a read-only sink");
        EXPECT_EQ(r.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(r.vendor_err, vendor(xlate_status::no_access));
        EXPECT_EQ(ctr(1, "transport_engine.read_responses_sent"), responses) << "nothing sent for the READ";
        recover(h);
        ASSERT_EQ(h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, sink, ro->lkey, 3, b.dst, ratom->rkey, 1), 0);
        const ibv_wc a = one_wc(h, h.s[0].scq, "atomic result into a read-only sink");
        EXPECT_EQ(a.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(a.vendor_err, vendor(xlate_status::no_access));
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 8, kGuardByte, "the atomic did not execute at the responder");
    });
}

SIM_TEST(E2eMemory, C10_46_C10_57_each_remote_operation_needs_its_remote_right) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 4096, 57);
        const uint64_t sink = h.alloc(0, 4096, 4096);
        h.fill_mem(0, sink, 4096, kGuardByte);
        ibv_mr* smr = h.reg(0, sink, 4096);
        ibv_mr* rd_only = h.reg(1, b.dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
        ibv_mr* wr_only = h.reg(1, b.dst + 4096, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        ibv_mr* no_atomic = h.reg(1, b.dst + 8192, 4096, kTargetAccess);
        ASSERT_TRUE(smr && rd_only && wr_only && no_atomic);
        // What each right allows works.
        EXPECT_EQ(read_wc(h, {sink, 64, smr->lkey}, b.dst, rd_only->rkey, "read").status, IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src, 64, b.smr->lkey}, b.dst + 4096, wr_only->rkey, "write").status,
                  IBV_WC_SUCCESS);
        h.fill_mem(1, b.dst + 4096, 64, kGuardByte);
        struct refused {
            const char* what;
            std::function<int()> post;
        };
        const std::vector<refused> cases = {
            {"WRITE without remote write",
             [&] {
                 return h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                                    b.dst, rd_only->rkey);
             }},
            {"READ without remote read",
             [&] {
                 return h.post_send(0, IBV_WR_RDMA_READ, {{sink, 64, smr->lkey}}, 1, IBV_SEND_SIGNALED,
                                    b.dst + 4096, wr_only->rkey);
             }},
            {"atomic without remote atomic",
             [&] {
                 return h.post_atomic(0, IBV_WR_ATOMIC_CMP_AND_SWP, sink, smr->lkey, 1, b.dst + 8192,
                                      no_atomic->rkey, 0xA5A5A5A5A5A5A5A5ull, 7);
             }},
        };
        for (const refused& c : cases) {
            h.fill_mem(0, sink, 4096, kGuardByte);
            ASSERT_EQ(c.post(), 0) << c.what;
            const ibv_wc wc = one_wc(h, h.s[0].scq, c.what);
            EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << c.what;
            ibv_async_event ev{};
            if (next_event(h, 1, ev)) {
                EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR) << c.what;
            }
            EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR) << c.what;
            EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR) << c.what;
            h.expect_fill(1, b.dst, 3 * 4096, kGuardByte, std::string(c.what) + ": target memory");
            h.expect_fill(0, sink, 4096, kGuardByte, std::string(c.what) + ": nothing returned");
            recover(h);
        }
    });
}

SIM_TEST(E2eMemory, C10_56_remote_access_needs_a_region_of_the_responding_qps_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 56);
        h.write_mem(1, b.dst, pattern(8192, 560));
        const uint64_t sink = h.alloc(0, 8192, 4096);
        h.fill_mem(0, sink, 8192, kGuardByte);
        ibv_mr* smr = h.reg(0, sink, 8192);
        ibv_pd* other = ibv_alloc_pd(h.s[1].ctx);
        ibv_mr* foreign = ibv_reg_mr(other, b.dst, 8192, kTargetAccess);
        ASSERT_NE(foreign, nullptr);
        ibv_wc r =
            read_wc(h, {sink, 100, smr->lkey}, b.dst, foreign->rkey, "read through another PD's region");
        EXPECT_EQ(r.status, IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(0, sink, 8192, kGuardByte, "nothing returned");
        recover(h);
        // Bounds to the byte: 5000 bytes registered, the READ asks for one more.
        ibv_mr* part = h.reg(1, b.dst, 5000);
        r = read_wc(h, {sink, 2, smr->lkey}, b.dst + 4999, part->rkey, "read one byte past the region");
        EXPECT_EQ(r.status, IBV_WC_REM_ACCESS_ERR);
        h.expect_fill(0, sink, 8192, kGuardByte, "nothing returned");
        recover(h);
        r = read_wc(h, {sink, 5000, smr->lkey}, b.dst, part->rkey, "read of exactly the region");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        h.expect_mem(0, sink, h.read_mem(1, b.dst, 5000), "read");
    });
}

SIM_TEST(E2eMemory, C10_54_2_1_local_segments_need_a_region_of_the_qps_pd) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 541);
        ibv_pd* other0 = ibv_alloc_pd(h.s[0].ctx);
        ibv_mr* foreign_src = ibv_reg_mr(other0, b.src, 4096, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(foreign_src, nullptr);
        const uint64_t tx = ctr(0, "transport_engine.tx_packets");
        ibv_wc w = write_wc(h, {b.src, 64, foreign_src->lkey}, b.dst, b.dmr->rkey, "gather from another PD");
        EXPECT_EQ(w.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(w.vendor_err, vendor(xlate_status::bad_pd));
        EXPECT_EQ(ctr(0, "transport_engine.tx_packets"), tx) << "nothing sent";
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        recover(h);
        // Receive side: the scatter list names a region of another PD.
        ibv_pd* other1 = ibv_alloc_pd(h.s[1].ctx);
        ibv_mr* foreign_dst = ibv_reg_mr(other1, b.dst, 4096, IBV_ACCESS_LOCAL_WRITE);
        ASSERT_NE(foreign_dst, nullptr);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 4096, foreign_dst->lkey}}, 9), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{b.src, 64, b.smr->lkey}}, 10), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive into another PD's region");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(rwc[0].wr_id, 9u);
        const ibv_wc s = one_wc(h, h.s[0].scq, "send");
        EXPECT_EQ(s.status, IBV_WC_REM_OP_ERR);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        h.expect_fill(1, b.dst, 4096, kGuardByte, "receive buffer");
    });
}

SIM_TEST(E2eMemory, C10_54_1_1_zero_length_segments_with_bogus_keys_are_not_checked) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 5411);
        h.write_mem(1, b.dst, pattern(4096, 5412));
        const uint64_t sink = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sink, 4096);
        const ibv_sge bogus{0xDEAD0000ull, 0, 0x00BADBADu};
        const ibv_sge reserved{0x1234, 0, 0};  // the reserved L_Key on a QP that does not enable it
        // READ scattering into [bogus, 1000 bytes, bogus, 24 bytes].
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ,
                              {bogus, {sink, 1000, smr->lkey}, reserved, {sink + 2000, 24, smr->lkey}}, 1,
                              IBV_SEND_SIGNALED, b.dst, b.dmr->rkey),
                  0);
        ibv_wc r = one_wc(h, h.s[0].scq, "read with zero-length bogus SGEs");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.byte_len, 1024u);
        const auto remote = h.read_mem(1, b.dst, 1024);
        h.expect_mem(0, sink, {remote.begin(), remote.begin() + 1000}, "first 1000 bytes");
        h.expect_mem(0, sink + 2000, {remote.begin() + 1000, remote.end()}, "last 24 bytes");
        // A zero-length WRITE with a bogus R_Key and address, gathered from a bogus SGE.
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {bogus}, 2, IBV_SEND_SIGNALED, 0xBAD000ull, 0x00BADBADu),
                  0);
        const ibv_wc w = one_wc(h, h.s[0].scq, "zero-length write");
        EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        // Receive list of [bogus, real, bogus].
        ASSERT_EQ(h.post_recv(1, {bogus, {b.dst + 4096, 4096, b.dmr->lkey}, reserved}, 3), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {bogus, {b.src, 200, b.smr->lkey}, reserved}, 4), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 200u);
        h.expect_mem(1, b.dst + 4096, h.read_mem(0, b.src, 200), "send payload");
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS);
    });
}

// ------------------------------------------------------------------ overlapping regions, deregistration

SIM_TEST(E2eMemory, C10_49_C10_58_overlapping_registrations_are_independent_and_deregister_independently) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 2 * 4096, 58);
        ibv_mr* whole = h.reg(1, b.dst, 8192);
        ibv_mr* part = h.reg(1, b.dst + 1000, 4096);
        const auto pg = pages_of(h, 1, b.dst, 8192);
        ibv_phys_mr_attr a;
        a.list = pg.data();
        a.count = 2;
        a.size = 4096;
        a.iova = 0x40000;
        a.length = 8192;
        a.access = kTargetAccess;
        ibv_mr* phys = ibv_reg_phys_mr(h.s[1].pd, &a);
        ASSERT_TRUE(whole && part && phys);
        EXPECT_NE(whole->rkey, part->rkey);
        EXPECT_NE(whole->rkey, phys->rkey);
        EXPECT_NE(part->rkey, phys->rkey);
        EXPECT_NE(whole->handle, part->handle);
        EXPECT_NE(whole->handle, phys->handle);
        // Each registration reaches the same bytes by its own addressing.
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, b.dst + 1500, whole->rkey, "whole").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src + 100, 100, b.smr->lkey}, b.dst + 1600, part->rkey, "part").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src + 200, 100, b.smr->lkey}, 0x40000 + 1700, phys->rkey, "phys").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 1500, h.read_mem(0, b.src, 300), "three writes through three registrations");
        // C10-58: deregister the whole-buffer region; the overlapping ones still work.
        const uint32_t dead = whole->rkey;
        ASSERT_EQ(ibv_dereg_mr(whole), 0);
        EXPECT_EQ(write_wc(h, {b.src + 300, 100, b.smr->lkey}, b.dst + 1800, part->rkey, "part").status,
                  IBV_WC_SUCCESS);
        EXPECT_EQ(write_wc(h, {b.src + 400, 100, b.smr->lkey}, 0x40000 + 1900, phys->rkey, "phys").status,
                  IBV_WC_SUCCESS);
        h.expect_mem(1, b.dst + 1500, h.read_mem(0, b.src, 500), "writes after the deregistration");
        EXPECT_EQ(write_wc(h, {b.src, 100, b.smr->lkey}, b.dst, dead, "deregistered").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst, 1500, kGuardByte, "not written through the deregistered region");
    });
}

namespace {
/// C10-59: a 256 KiB transfer (64 packets) whose region was deregistered while it ran failed
/// with `status`; the bytes it placed in `sink` on `sink_node` are whole packets from the start
/// and nothing after them was written.
void expect_stopped_midway(rc_harness& h, unsigned sink_node, uint64_t sink, const std::vector<uint8_t>& data,
                           const ibv_wc& wc, ibv_wc_status status, const std::string& what) {
    EXPECT_EQ(wc.status, status) << what;
    h.sleep(1, kQuietNs);
    const auto got = h.read_mem(sink_node, sink, data.size());
    const size_t placed = placed_prefix(got, data);
    EXPECT_GT(placed, 0u) << what << ": the packets before the deregistration were placed";
    EXPECT_LT(placed, data.size() / 2) << what << ": the deregistration came early in the transfer";
    EXPECT_EQ(placed % 4096, 0u) << what << ": whole packets";
    h.expect_fill(sink_node, sink + placed, data.size() - placed, kGuardByte,
                  what + ": nothing after the deregistration");
}
}  // namespace

SIM_TEST(E2eMemory, C10_59_region_deregistered_during_a_multi_packet_write_stops_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t n = 256 * 1024;
        bufs b = make_bufs(h, n, 59);
        const auto data = h.read_mem(0, b.src, n);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, uint32_t(n), b.smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              b.dst, b.dmr->rkey),
                  0);
        h.sleep(1, 6'000);  // the 256 KiB WRITE takes ~27 us on the wire
        ASSERT_EQ(ibv_dereg_mr(b.dmr), 0);
        const ibv_wc wc = one_wc(h, h.s[0].scq, "write");
        ibv_async_event ev{};
        if (next_event(h, 1, ev)) {
            EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
        }
        expect_stopped_midway(h, 1, b.dst, data, wc, IBV_WC_REM_ACCESS_ERR, "WRITE");
    });
}

// The responder reads a READ's data when the request arrives (all responses are built at once),
// so the region in use while the responses stream is the requester's sink.
SIM_TEST(E2eMemory, C10_59_sink_deregistered_during_a_multi_packet_read_stops_it) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const size_t n = 256 * 1024;
        const uint64_t remote = h.alloc(1, n, 4096);
        const auto data = pattern(n, 591);
        h.write_mem(1, remote, data);
        ibv_mr* rmr = h.reg(1, remote, n);
        const uint64_t sink = h.alloc(0, n, 4096);
        h.fill_mem(0, sink, n, kGuardByte);
        ibv_mr* smr = h.reg(0, sink, n);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{sink, uint32_t(n), smr->lkey}}, 1, IBV_SEND_SIGNALED,
                              remote, rmr->rkey),
                  0);
        h.sleep(0, 6'000);  // the responses take ~27 us on the wire
        ASSERT_EQ(ibv_dereg_mr(smr), 0);
        const ibv_wc wc = one_wc(h, h.s[0].scq, "read");
        expect_stopped_midway(h, 0, sink, data, wc, IBV_WC_LOC_PROT_ERR, "READ");
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
    });
}

SIM_TEST(E2eMemory, C10_60_keys_of_a_deregistered_region_fail_even_when_its_index_is_reused) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 60);
        ibv_mr* first = h.reg(0, b.src, 4096);
        const uint32_t old_lkey = first->lkey;
        const uint32_t old_index = first->handle;
        ASSERT_EQ(ibv_dereg_mr(first), 0);
        ibv_mr* again = h.reg(0, b.src, 4096);
        ASSERT_NE(again, nullptr);
        EXPECT_EQ(again->handle, old_index) << "the lowest free index is reused";
        EXPECT_NE(again->lkey, old_lkey) << "with a fresh key byte";
        EXPECT_EQ(write_wc(h, {b.src, 64, again->lkey}, b.dst, b.dmr->rkey, "new key").status,
                  IBV_WC_SUCCESS);
        const ibv_wc w = write_wc(h, {b.src, 64, old_lkey}, b.dst + 64, b.dmr->rkey, "stale L_Key");
        EXPECT_EQ(w.status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(w.vendor_err, vendor(xlate_status::bad_key));
        recover(h);
        // Remote side: the deregistered region's R_Key.
        const uint32_t old_rkey = b.dmr->rkey;
        ASSERT_EQ(ibv_dereg_mr(b.dmr), 0);
        ibv_mr* dst_again = h.reg(1, b.dst, 4096);
        ASSERT_NE(dst_again, nullptr);
        EXPECT_EQ(write_wc(h, {b.src, 64, again->lkey}, b.dst + 128, old_rkey, "stale R_Key").status,
                  IBV_WC_REM_ACCESS_ERR);
        h.sleep(1, kQuietNs);
        h.expect_fill(1, b.dst + 64, 4096 - 64, kGuardByte, "nothing written through stale keys");
    });
}
