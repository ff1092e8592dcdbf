// Firmware tests of memory registration, memory windows and memory management work requests
// (IBA 10.6) against the fake HCA bus: what the verbs write (MTT, MPT entries, WQEs), the
// immediate errors they define, and all-or-nothing behaviour. The HCA's own checks (key states,
// rights, PDs, bounds) are tested in hca_units_test and the e2e tests.
#include <gtest/gtest.h>

#include <algorithm>

#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

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

namespace {

/// Firmware over fake_hca_bus; `tweak` edits the fake device before the driver initialises.
struct env : test::fw_env {
    explicit env(const std::function<void(test::fake_hca_bus&)>& tweak = {},
                 fw::driver_options o = test::no_window())
        : fw_env(o, tweak) {}
    ibv_qp* qp(ibv_qp_type t = IBV_QPT_RC, uint32_t create_flags = 0) {
        return make_qp(t, {8, 8, 2, 2, 0}, nullptr, create_flags);
    }
    /// A QP of type t in RTS.
    ibv_qp* rts(ibv_qp_type t = IBV_QPT_RC, uint32_t create_flags = 0) {
        ibv_qp* q = qp(t, create_flags);
        for (ibv_qp_state s : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS})
            if (test::modify_qp_to(q, s)) return nullptr;
        return q;
    }
    size_t count(uint16_t op) const { return bus.commands_of(op).size(); }
    /// The MPT entry the fake HCA holds for an index.
    hw::mpt_entry mpt(uint32_t index) { return bus.mpts.at(index); }
    /// Bytes of send slot i of q.
    template <class T>
    T slot(ibv_qp* q, uint32_t i, uint32_t off = 0) {
        return bus.read<T>(q->sq.pa + (uint64_t(i) << q->sq.log_stride) + off);
    }
    /// The i-th MTT value written by WRITE_MTT command number `cmd` (in order of issue).
    uint64_t mtt_value(size_t cmd, uint32_t i) {
        auto v = bus.commands_of(hw::CMD_WRITE_MTT);
        uint64_t x = 0;
        std::memcpy(&x, v.at(cmd).in.data() + sizeof(hw::write_mtt_in) + 8 * i, 8);
        return x;
    }
    hw::write_mtt_in mtt_header(size_t cmd) {
        hw::write_mtt_in h;
        std::memcpy(&h, bus.commands_of(hw::CMD_WRITE_MTT).at(cmd).in.data(), sizeof h);
        return h;
    }
};

/// A page-list PMR attribute over `pages` of 4 KiB.
ibv_phys_mr_attr page_list(const std::vector<uint64_t>& pages, uint64_t length,
                           int access = IBV_ACCESS_LOCAL_WRITE) {
    ibv_phys_mr_attr a;
    a.list = pages.data();
    a.count = uint32_t(pages.size());
    a.size = 4096;
    a.iova = 0x10000000;
    a.length = length;
    a.access = access;
    return a;
}

}  // namespace

// ------------------------------------------------------------------ registration parameters

TEST(MemReg, C10_48_remote_write_or_atomic_without_local_write_fails_in_every_registration_verb) {
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    std::vector<uint64_t> pages;
    ASSERT_EQ(ibv_map_pages(e.ctx, va, 2 * 4096, &pages), 0);
    ibv_mr* src = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(src, nullptr);
    size_t cmds = e.bus.cmds.size();
    for (int bad : {int(IBV_ACCESS_REMOTE_WRITE), int(IBV_ACCESS_REMOTE_ATOMIC),
                    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ}) {
        errno = 0;
        EXPECT_EQ(ibv_reg_mr(e.pd, va, 64, bad), nullptr);
        EXPECT_EQ(errno, EINVAL);
        ibv_phys_mr_attr a = page_list(pages, 8192, bad);
        errno = 0;
        EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr);
        EXPECT_EQ(errno, EINVAL);
        errno = 0;
        EXPECT_EQ(ibv_reg_shared_mr(src, e.pd, bad, 0x5000), nullptr);
        EXPECT_EQ(errno, EINVAL);
        EXPECT_EQ(ibv_rereg_mr(src, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, bad), EINVAL);
    }
    EXPECT_EQ(e.bus.cmds.size(), cmds);  // nothing reached the HCA
    EXPECT_EQ(src->access, IBV_ACCESS_LOCAL_WRITE);
    EXPECT_EQ(e.as.pin_count(va), 2u);  // src + the mapping only
    // Fast Register WR: the same rule, an immediate error.
    ibv_qp* q = e.rts(IBV_QPT_RC, IBV_QP_CREATE_FAST_REG);
    ibv_mr* l = ibv_alloc_lkey(e.pd, 4);
    ASSERT_TRUE(q && l);
    ibv_send_wr w{};
    w.opcode = IBV_WR_FAST_REG_MR;
    w.fast_reg = {l, 1, 0x1000, 4096, IBV_ACCESS_REMOTE_WRITE, pages.data(), 1, 0, 12};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
    EXPECT_EQ(bad, &w);
    EXPECT_EQ(q->sq.producer, 0u);
}

TEST(MemReg, C10_50_any_byte_alignment_sets_page_offset_and_covering_pages) {
    env e;
    uint64_t base = e.as.alloc(4 * 4096, 4096);
    for (uint64_t off : {0ull, 1ull, 7ull, 4095ull}) {
        for (size_t len : {size_t(1), size_t(4096), size_t(4097)}) {
            size_t mtt_cmds = e.count(hw::CMD_WRITE_MTT);
            ibv_mr* mr = ibv_reg_mr(e.pd, base + off, len, IBV_ACCESS_LOCAL_WRITE);
            ASSERT_NE(mr, nullptr) << off << " " << len;
            hw::mpt_entry m = e.mpt(mr->handle);
            EXPECT_EQ(m.start_va, base + off);
            EXPECT_EQ(m.page_offset, off);  // the first byte's offset in the first MTT page
            uint32_t pages = uint32_t((off + len + 4095) / 4096);
            EXPECT_EQ(m.mtt_count, pages);
            EXPECT_EQ(m.mtt_reserved, pages);
            for (uint32_t i = 0; i < pages; ++i) {
                uint64_t pa = 0;
                ASSERT_TRUE(e.as.translate(base + i * 4096, &pa));
                EXPECT_EQ(e.mtt_value(mtt_cmds, i), pa | hw::MTT_PRESENT);
            }
            ASSERT_EQ(ibv_dereg_mr(mr), 0);
        }
    }
}

TEST(MemReg, C10_51_physical_registration_accepts_any_length_up_to_the_hca_limit) {
    env e([](test::fake_hca_bus& b) { b.caps.max_mr_size = 3 * 4096; });
    std::vector<uint64_t> pages = {kFwMemBase + 0x100000, kFwMemBase + 0x200000, kFwMemBase + 0x300000,
                                   kFwMemBase + 0x400000};
    for (uint64_t len : {1ull, 4095ull, 4097ull, 3ull * 4096}) {
        ibv_phys_mr_attr a = page_list(pages, len);
        ibv_mr* mr = ibv_reg_phys_mr(e.pd, &a);
        ASSERT_NE(mr, nullptr) << len;
        EXPECT_EQ(e.mpt(mr->handle).length, len);
        ASSERT_EQ(ibv_dereg_mr(mr), 0);
    }
    ibv_phys_mr_attr a = page_list(pages, 3 * 4096 + 1);  // above max_mr_size
    errno = 0;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
    a.length = 0;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
}

TEST(MemReg, C10_53_2_1_page_list_element_off_a_page_boundary_is_rejected) {
    env e;
    std::vector<uint64_t> pages = {kFwMemBase + 0x100000, kFwMemBase + 0x101000, kFwMemBase + 0x102000};
    size_t cmds = e.bus.cmds.size();
    for (uint64_t bad : {1ull, 0x200ull, 0xFFFull}) {
        std::vector<uint64_t> p = pages;
        p[1] += bad;
        ibv_phys_mr_attr a = page_list(p, 3 * 4096);
        errno = 0;
        EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr) << bad;
        EXPECT_EQ(errno, EINVAL);
    }
    // 64 KiB pages: a 4 KiB-aligned element is not on a page boundary.
    std::vector<uint64_t> big = {kFwMemBase + 0x100000, kFwMemBase + 0x111000};
    ibv_phys_mr_attr a = page_list(big, 4096);
    a.size = 1u << 16;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
    big[1] = kFwMemBase + 0x110000;
    ibv_mr* ok = ibv_reg_phys_mr(e.pd, &a);
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(e.mpt(ok->handle).log_page_size, 16);
    // Page sizes the HCA does not list, or not a power of two, or below 4 KiB.
    for (uint64_t size : {uint64_t(1) << 13, uint64_t(12288), uint64_t(2048)}) {
        ibv_phys_mr_attr b = page_list({kFwMemBase + 0x100000}, 1);
        std::vector<uint64_t> one = {kFwMemBase + 0x100000};
        b.list = one.data();
        b.size = size;
        EXPECT_EQ(ibv_reg_phys_mr(e.pd, &b), nullptr) << size;
        EXPECT_EQ(errno, EINVAL);
    }
    EXPECT_EQ(e.count(hw::CMD_CREATE_MPT), 1u);  // only the good one
    EXPECT_EQ(e.bus.cmds.size(), cmds + 2);      // its WRITE_MTT and CREATE_MPT
}

TEST(MemReg, physical_registration_writes_the_list_and_the_region_must_fit_in_it) {
    env e;
    std::vector<uint64_t> pages = {kFwMemBase + 0x300000, kFwMemBase + 0x100000,
                                   kFwMemBase + 0x200000};  // any order
    ibv_phys_mr_attr a = page_list(pages, 2 * 4096);
    a.first_offset = 100;
    a.iova = 0xABC000064ull;
    a.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    ibv_mr* mr = ibv_reg_phys_mr(e.pd, &a);
    ASSERT_NE(mr, nullptr);
    hw::mpt_entry m = e.mpt(mr->handle);
    EXPECT_EQ(m.flags, hw::MPT_PHYS);
    EXPECT_EQ(m.state, hw::MPT_STATE_VALID);
    EXPECT_EQ(m.type, hw::MPT_TYPE_MR);
    EXPECT_EQ(m.log_page_size, 12);
    EXPECT_EQ(m.start_va, a.iova);
    EXPECT_EQ(m.length, 2u * 4096);
    EXPECT_EQ(m.page_offset, 100u);
    EXPECT_EQ(m.mtt_count, 3u);
    EXPECT_EQ(m.mtt_reserved, 3u);
    EXPECT_EQ(m.pd, e.pd->handle);
    EXPECT_EQ(m.access, uint32_t(a.access));
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(e.mtt_value(0, i), pages[i] | hw::MTT_PRESENT);
    EXPECT_EQ(e.mtt_header(0).first_index, mr->mtt_first);
    EXPECT_EQ(mr->addr, a.iova);
    EXPECT_EQ(mr->page_list_max, 3u);  // o10-37.2.10
    EXPECT_EQ(e.pd->refs, 1u);
    // first_offset + length beyond count * size, first_offset past the first page, a wrap.
    ibv_phys_mr_attr b = a;
    b.length = 3 * 4096 - 99;
    errno = 0;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &b), nullptr);
    EXPECT_EQ(errno, EINVAL);
    b = a;
    b.first_offset = 4096;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &b), nullptr);
    b = a;
    b.iova = ~0ull - 10;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &b), nullptr);
    b = a;
    b.list = nullptr;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &b), nullptr);
    b = a;
    std::vector<uint64_t> hi = {hw::MTT_PRESENT | 0x1000};
    b.list = hi.data();
    b.count = 1;
    b.first_offset = 0;
    b.length = 10;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &b), nullptr);  // not a host physical address
    EXPECT_EQ(e.count(hw::CMD_CREATE_MPT), 1u);
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(e.pd->refs, 0u);
    EXPECT_TRUE(e.bus.mpts.empty());
}

TEST(MemReg, o10_37_2_9_block_list_accepts_blocks_of_any_size_and_alignment) {
    env e;
    std::vector<uint64_t> blocks = {kFwMemBase + 0x100003, kFwMemBase + 0x200777, kFwMemBase + 0x1001};
    ibv_phys_mr_attr a;
    a.list = blocks.data();
    a.count = 3;
    a.block_list = true;
    a.size = 1000;
    a.iova = 0x7000;
    a.length = 2500;
    a.first_offset = 10;
    a.access = IBV_ACCESS_LOCAL_WRITE;
    ibv_mr* mr = ibv_reg_phys_mr(e.pd, &a);
    ASSERT_NE(mr, nullptr);
    hw::mpt_entry m = e.mpt(mr->handle);
    EXPECT_EQ(m.flags, hw::MPT_PHYS | hw::MPT_BLOCK_LIST);
    EXPECT_EQ(m.block_size, 1000u);
    EXPECT_EQ(m.page_offset, 10u);
    EXPECT_EQ(m.mtt_count, 3u);
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(e.mtt_value(0, i), blocks[i] | hw::MTT_PRESENT);
    a.length = 2991;  // 10 + 2991 > 3 * 1000
    errno = 0;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
    a.length = 100;
    a.size = 0;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &a), nullptr);
    // Without the HCA's block-list support: EINVAL.
    env n([](test::fake_hca_bus& b) { b.caps.flags &= ~hw::CAP_BLOCK_LIST; });
    a.size = 1000;
    EXPECT_EQ(ibv_reg_phys_mr(n.pd, &a), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(n.count(hw::CMD_CREATE_MPT), 0u);
}

TEST(MemReg, zero_based_region_is_addressed_from_zero) {
    env e;
    uint64_t va = e.as.alloc(3 * 4096, 4096) + 0x234;
    ibv_mr* mr =
        ibv_reg_mr(e.pd, va, 5000, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED);
    ASSERT_NE(mr, nullptr);
    hw::mpt_entry m = e.mpt(mr->handle);
    EXPECT_EQ(m.start_va, 0u);
    EXPECT_EQ(m.page_offset, 0x234u);
    EXPECT_EQ(m.length, 5000u);
    EXPECT_EQ(m.access, uint32_t(hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_READ | hw::ACCESS_ZERO_BASED));
    EXPECT_EQ(mr->addr, va);  // libibverbs: the registered address
    ibv_mr_attr qa;
    ASSERT_EQ(ibv_query_mr(mr, &qa), 0);
    EXPECT_EQ(qa.addr, 0u);
    // ZBVA physical region: the iova is not used.
    std::vector<uint64_t> pages = {kFwMemBase + 0x100000};
    ibv_phys_mr_attr a = page_list(pages, 100, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
    a.iova = 0x999999;
    ibv_mr* p = ibv_reg_phys_mr(e.pd, &a);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(e.mpt(p->handle).start_va, 0u);
    // An HCA without ZBVA: EINVAL, nothing registered.
    env n([](test::fake_hca_bus& b) { b.caps.flags &= ~hw::CAP_ZBVA; });
    uint64_t nva = n.as.alloc(4096);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(n.pd, nva, 64, IBV_ACCESS_ZERO_BASED), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(n.as.pin_count(nva), 0u);
    EXPECT_EQ(n.count(hw::CMD_CREATE_MPT), 0u);
    ibv_device_attr da;
    ASSERT_EQ(ibv_query_device(n.ctx, &da), 0);
    EXPECT_FALSE(da.zbva);
}

TEST(MemReg, o10_37_2_1_o10_37_2_3_keys_are_a_24_bit_index_above_an_8_bit_key_byte) {
    static_assert(hw::make_key(0xABCDEF, 0x12) == 0xABCDEF12u, "index in bits 31..8, key byte in bits 7..0");
    static_assert(hw::key_index(0xABCDEF12u) == 0xABCDEFu && hw::key_byte(0xABCDEF12u) == 0x12, "");
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    std::vector<uint64_t> pages = {kFwMemBase + 0x100000};
    ibv_phys_mr_attr a = page_list(pages, 4096);
    a.key_byte = 0xC3;
    ibv_mr* v = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ibv_mr* p = ibv_reg_phys_mr(e.pd, &a);
    ibv_mr* sh = ibv_reg_shared_mr(v, e.pd, IBV_ACCESS_REMOTE_READ, va);
    ibv_mr* l = ibv_alloc_lkey(e.pd, 2);
    ASSERT_TRUE(v && p && sh && l);
    std::vector<uint32_t> indexes;
    for (ibv_mr* mr : {v, p, sh, l}) {
        // The L_Key and the R_Key are one key: the MPT index the HCA looks up in the upper 24 bits,
        // the key byte it compares in the lower 8.
        EXPECT_EQ(mr->lkey, mr->rkey);
        EXPECT_EQ(hw::key_index(mr->lkey), mr->handle);
        EXPECT_LT(mr->handle, 1u << 24);
        const hw::mpt_entry m = e.mpt(mr->handle);
        EXPECT_EQ(m.key, mr->lkey) << "the HCA's entry at that index holds the whole key";
        indexes.push_back(mr->handle);
    }
    EXPECT_EQ(hw::key_byte(p->lkey), 0xC3) << "the consumer's byte in bits 7..0";
    std::sort(indexes.begin(), indexes.end());
    EXPECT_EQ(std::adjacent_find(indexes.begin(), indexes.end()), indexes.end()) << "one index per region";
}

TEST(MemReg, o10_37_2_2_o10_37_2_4_key_byte_owner_per_registration_verb) {
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    std::vector<uint64_t> pages;
    ASSERT_EQ(ibv_map_pages(e.ctx, va, 8192, &pages), 0);
    // Register MR: CI-owned; the same index reused gets another byte.
    ibv_mr* a = ibv_reg_mr(e.pd, va, 100, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(a, nullptr);
    uint32_t idx = a->handle, key = a->lkey;
    EXPECT_EQ(a->rkey, a->lkey);
    EXPECT_EQ(hw::key_index(key), idx);
    ASSERT_EQ(ibv_dereg_mr(a), 0);
    a = ibv_reg_mr(e.pd, va, 100, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_EQ(a->handle, idx);
    EXPECT_NE(hw::key_byte(a->lkey), hw::key_byte(key));
    // Register PMR: the consumer's byte when given, the driver's otherwise; 0..255 only.
    ibv_phys_mr_attr pa = page_list(pages, 8192);
    pa.key_byte = 0xAB;
    ibv_mr* p = ibv_reg_phys_mr(e.pd, &pa);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(hw::key_byte(p->lkey), 0xAB);
    EXPECT_EQ(p->rkey, p->lkey);
    EXPECT_EQ(e.mpt(p->handle).key, hw::make_key(p->handle, 0xAB));
    pa.key_byte = 0;
    ibv_mr* p0 = ibv_reg_phys_mr(e.pd, &pa);
    ASSERT_NE(p0, nullptr);
    EXPECT_EQ(hw::key_byte(p0->lkey), 0);
    for (int bad : {-2, 256}) {
        pa.key_byte = bad;
        errno = 0;
        EXPECT_EQ(ibv_reg_phys_mr(e.pd, &pa), nullptr) << bad;
        EXPECT_EQ(errno, EINVAL);
    }
    // Reregister MR: a fresh CI-owned byte on the same index.
    uint32_t before = a->lkey;
    ASSERT_EQ(ibv_rereg_mr(a, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, IBV_ACCESS_LOCAL_WRITE), 0);
    EXPECT_EQ(hw::key_index(a->lkey), idx);
    EXPECT_NE(a->lkey, before);
    EXPECT_EQ(a->rkey, a->lkey);
    EXPECT_EQ(e.mpt(idx).key, a->lkey);
    // Allocate L_Key: the consumer's byte, given in the Fast Register WR.
    ibv_qp* q = e.rts(IBV_QPT_RC, IBV_QP_CREATE_FAST_REG);
    ibv_mr* l = ibv_alloc_lkey(e.pd, 2);
    ASSERT_TRUE(q && l);
    ibv_send_wr w{};
    w.opcode = IBV_WR_FAST_REG_MR;
    w.fast_reg = {l, 0x5C, 0x40000, 8192, IBV_ACCESS_LOCAL_WRITE, pages.data(), 2, 0, 12};
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    EXPECT_EQ(e.slot<hw::wqe_fast_reg_seg>(q, 0, 32).lkey, hw::make_key(l->handle, 0x5C));
    EXPECT_EQ(l->lkey, hw::make_key(l->handle, 0x5C));
    EXPECT_EQ(l->rkey, l->lkey);
}

TEST(MemReg, C10_49_overlapping_virtual_physical_and_shared_registrations_get_own_handles_and_keys) {
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    std::vector<uint64_t> pages;
    ASSERT_EQ(ibv_map_pages(e.ctx, va, 8192, &pages), 0);
    ibv_mr* v1 = ibv_reg_mr(e.pd, va, 8192, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* v2 = ibv_reg_mr(e.pd, va + 100, 5000, IBV_ACCESS_LOCAL_WRITE);
    ibv_phys_mr_attr a = page_list(pages, 8192);
    ibv_mr* p = ibv_reg_phys_mr(e.pd, &a);
    ibv_mr* s = ibv_reg_shared_mr(v1, e.pd, IBV_ACCESS_LOCAL_WRITE, va);
    ASSERT_TRUE(v1 && v2 && p && s);
    ibv_mr* all[] = {v1, v2, p, s};
    for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) {
            EXPECT_NE(all[i]->handle, all[j]->handle) << i << j;
            EXPECT_NE(all[i]->lkey, all[j]->lkey) << i << j;
            EXPECT_NE(all[i]->rkey, all[j]->rkey) << i << j;
        }
    EXPECT_EQ(e.bus.mpts.size(), 4u);
    EXPECT_EQ(e.pd->refs, 4u);
}

// ------------------------------------------------------------------ C10-45 all or nothing

TEST(MemReg, C10_45_registration_verbs_leave_nothing_when_the_mtt_runs_out) {
    fw::driver_options o = test::no_window();
    o.log_num_mtts = 4;  // 16 MTT entries
    env e({}, o);
    uint64_t va = e.as.alloc(20 * 4096, 4096);
    ibv_mr* big = ibv_reg_mr(e.pd, va, 12 * 4096, IBV_ACCESS_LOCAL_WRITE);  // 12 of 16
    ASSERT_NE(big, nullptr);
    uint32_t mpts = e.drv.free_mpts();
    size_t pages = e.os.free_pages();
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, va + 12 * 4096, 5 * 4096, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(e.as.pin_count(va + 12 * 4096), 0u);
    std::vector<uint64_t> list(5, kFwMemBase + 0x100000);
    ibv_phys_mr_attr pa = page_list(list, 4096);
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &pa), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(ibv_alloc_lkey(e.pd, 5), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(e.os.free_pages(), pages);  // no page-list buffer left behind
    // Reregister onto a range too big for what is left: the old registration stays intact.
    uint32_t key = big->lkey;
    EXPECT_EQ(ibv_rereg_mr(big, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, va, 13 * 4096, 0), ENOMEM);
    EXPECT_EQ(big->lkey, key);
    EXPECT_EQ(big->length, 12u * 4096);
    EXPECT_EQ(e.as.pin_count(va), 1u);
    EXPECT_EQ(e.as.pin_count(va + 12 * 4096), 0u);
    EXPECT_EQ(e.mpt(big->handle).key, key);
    EXPECT_EQ(e.drv.free_mpts(), mpts);
    EXPECT_EQ(e.pd->refs, 1u);
    EXPECT_EQ(e.bus.mpts.size(), 1u);
    // What fits still registers: the 4 entries left were not leaked.
    ibv_mr* fits = ibv_reg_mr(e.pd, va + 12 * 4096, 4 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(fits, nullptr);
    EXPECT_EQ(fits->mtt_first, 12u);
}

TEST(MemReg, C10_45_registration_verbs_leave_nothing_when_the_mpt_runs_out) {
    fw::driver_options o = test::no_window();
    o.log_num_mpts = 2;  // indexes 1..3 (0 is the reserved L_Key's)
    env e({}, o);
    uint64_t va = e.as.alloc(4 * 4096, 4096);
    ibv_mr* a = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* b = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* c = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(a->handle, 1u);
    EXPECT_EQ(c->handle, 3u);
    EXPECT_EQ(e.drv.free_mpts(), 0u);
    uint64_t probe;
    ASSERT_TRUE(e.drv.alloc_mtt(16, &probe));  // the first free MTT run before the failures
    e.drv.free_mtt(probe, 16);
    size_t pages = e.os.free_pages();
    std::vector<uint64_t> list = {kFwMemBase + 0x100000};
    ibv_phys_mr_attr pa = page_list(list, 4096);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, va + 4096, 4096, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &pa), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(ibv_reg_shared_mr(a, e.pd, IBV_ACCESS_LOCAL_WRITE, va), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(ibv_alloc_lkey(e.pd, 4), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(ibv_alloc_mw(e.pd, IBV_MW_TYPE_1), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(e.as.pin_count(va + 4096), 0u);
    EXPECT_EQ(e.as.pin_count(va), 3u);
    EXPECT_EQ(e.os.free_pages(), pages);
    EXPECT_EQ(e.drv.mtt_users(a->mtt_first), 1u);
    EXPECT_EQ(e.drv.mws(), 0u);
    EXPECT_EQ(e.pd->refs, 3u);
    EXPECT_EQ(e.ctx->mrs, 3u);
    uint64_t after;
    ASSERT_TRUE(e.drv.alloc_mtt(16, &after));
    EXPECT_EQ(after, probe);  // no MTT entries leaked
}

TEST(MemReg, C10_45_hca_refusal_rolls_back_every_step) {
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    uint32_t mpts = e.drv.free_mpts();
    e.bus.fail_opcode[hw::CMD_WRITE_MTT] = hw::CMD_BAD_PARAM;
    EXPECT_EQ(ibv_reg_mr(e.pd, va, 8192, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(e.as.pin_count(va), 0u);
    std::vector<uint64_t> list = {kFwMemBase + 0x100000};
    ibv_phys_mr_attr pa = page_list(list, 4096);
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &pa), nullptr);
    e.bus.fail_opcode.clear();
    e.bus.fail_opcode[hw::CMD_CREATE_MPT] = hw::CMD_BAD_PARAM;
    EXPECT_EQ(ibv_reg_phys_mr(e.pd, &pa), nullptr);
    EXPECT_EQ(ibv_alloc_lkey(e.pd, 8), nullptr);
    EXPECT_EQ(ibv_alloc_mw(e.pd, IBV_MW_TYPE_2), nullptr);
    EXPECT_EQ(e.drv.free_mpts(), mpts);
    EXPECT_EQ(e.drv.mws(), 0u);
    EXPECT_EQ(e.pd->refs, 0u);
    uint64_t first;
    ASSERT_TRUE(e.drv.alloc_mtt(1, &first));
    EXPECT_EQ(first, 0u);  // every MTT run went back
}

// ------------------------------------------------------------------ reregister

TEST(Rereg, changes_translation_pd_and_access_in_one_modify_with_new_keys) {
    env e;
    uint64_t va = e.as.alloc(6 * 4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 2 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_pd* pd2 = ibv_alloc_pd(e.ctx);
    uint64_t old_first = mr->mtt_first;
    uint32_t old_key = mr->lkey;
    size_t creates = e.count(hw::CMD_CREATE_MPT);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(ibv_rereg_mr(
                  mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS,
                  pd2, va + 3 * 4096 + 10, 4096, access),
              0);
    auto c = e.bus.commands_of(hw::CMD_CREATE_MPT);
    ASSERT_EQ(c.size(), creates + 1);
    EXPECT_EQ(c.back().op_mod, uint32_t(hw::MPT_MODIFY));
    EXPECT_EQ(c.back().in_mod, mr->handle);
    hw::mpt_entry m = e.mpt(mr->handle);
    EXPECT_EQ(m.key, mr->lkey);
    EXPECT_NE(mr->lkey, old_key);
    EXPECT_EQ(hw::key_index(mr->lkey), hw::key_index(old_key));
    EXPECT_EQ(m.pd, pd2->handle);
    EXPECT_EQ(m.access, uint32_t(access));
    EXPECT_EQ(m.start_va, va + 3 * 4096 + 10);
    EXPECT_EQ(m.length, 4096u);
    EXPECT_EQ(m.page_offset, 10u);
    EXPECT_EQ(m.mtt_count, 2u);  // the range crosses a page boundary
    EXPECT_EQ(m.mtt_base, mr->mtt_first);
    EXPECT_NE(mr->mtt_first, old_first);  // the new MTT run was built before the old one went
    EXPECT_EQ(mr->pd, pd2);
    EXPECT_EQ(e.pd->refs, 0u);
    EXPECT_EQ(pd2->refs, 1u);
    EXPECT_EQ(e.as.pin_count(va), 0u);  // old pages unpinned after the switch
    EXPECT_EQ(e.as.pin_count(va + 3 * 4096), 1u);
    EXPECT_EQ(e.as.pin_count(va + 4 * 4096), 1u);
    // Access only: the same translation, still new keys.
    uint64_t first = mr->mtt_first;
    uint32_t k = mr->lkey;
    ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, IBV_ACCESS_REMOTE_READ), 0);
    EXPECT_EQ(mr->mtt_first, first);
    EXPECT_NE(mr->lkey, k);
    EXPECT_EQ(e.mpt(mr->handle).access, uint32_t(IBV_ACCESS_REMOTE_READ));
    EXPECT_EQ(e.as.pin_count(va + 3 * 4096), 1u);
    // Flags: none, unknown, or a PD of nothing -> EINVAL.
    EXPECT_EQ(ibv_rereg_mr(mr, 0, nullptr, 0, 0, 0), EINVAL);
    EXPECT_EQ(ibv_rereg_mr(mr, 8, nullptr, 0, 0, 0), EINVAL);
    EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, nullptr, 0, 0, 0), EINVAL);
    EXPECT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, va, 0, 0), EINVAL);
}

TEST(Rereg, o10_37_2_2_the_driver_may_keep_the_keys_as_libibverbs_applications_expect) {
    // hcasim serve runs its driver with rereg_keeps_keys: the key byte is the CI's to choose, and
    // libibverbs applications (and rdma-core's tests) use the keys they had after ibv_rereg_mr.
    fw::driver_options o = test::no_window();
    o.rereg_keeps_keys = true;
    env e({}, o);
    uint64_t va = e.as.alloc(4 * 4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    const uint32_t lkey = mr->lkey, rkey = mr->rkey;
    const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr,
                           va + 2 * 4096, 4096, access),
              0);
    EXPECT_EQ(mr->lkey, lkey);
    EXPECT_EQ(mr->rkey, rkey);
    const hw::mpt_entry m = e.mpt(mr->handle);
    EXPECT_EQ(m.key, lkey);
    EXPECT_EQ(m.start_va, va + 2 * 4096);
    EXPECT_EQ(m.access, uint32_t(access));
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST(Rereg, failure_leaves_the_old_registration_intact) {
    env e;
    uint64_t va = e.as.alloc(6 * 4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_pd* pd2 = ibv_alloc_pd(e.ctx);
    ibv_mr saved = *mr;
    hw::mpt_entry held = e.mpt(mr->handle);
    auto unchanged = [&] {
        EXPECT_EQ(mr->lkey, saved.lkey);
        EXPECT_EQ(mr->rkey, saved.rkey);
        EXPECT_EQ(mr->addr, saved.addr);
        EXPECT_EQ(mr->length, saved.length);
        EXPECT_EQ(mr->pd, e.pd);
        EXPECT_EQ(mr->mtt_first, saved.mtt_first);
        EXPECT_EQ(e.pd->refs, 1u);
        EXPECT_EQ(pd2->refs, 0u);
        EXPECT_EQ(0, std::memcmp(&held, &e.bus.mpts.at(mr->handle), sizeof held));
        EXPECT_EQ(e.as.pin_count(va), 1u);
        EXPECT_EQ(e.as.pin_count(va + 2 * 4096), 0u);  // the new range's pins undone
    };
    int all = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    // The HCA refuses the modify.
    e.bus.fail_op_mod[{hw::CMD_CREATE_MPT, hw::MPT_MODIFY}] = hw::CMD_BAD_PARAM;
    EXPECT_EQ(ibv_rereg_mr(mr, all, pd2, va + 2 * 4096, 4096, IBV_ACCESS_REMOTE_READ), EINVAL);
    unchanged();
    e.bus.fail_op_mod.clear();
    // Windows bound to it: EBUSY.
    e.bus.mpts[mr->handle].bound_mws = 1;
    held.bound_mws = 1;
    EXPECT_EQ(ibv_rereg_mr(mr, all, pd2, va + 2 * 4096, 4096, IBV_ACCESS_REMOTE_READ), EBUSY);
    unchanged();
    // Unmapped new range: EFAULT before anything.
    EXPECT_EQ(ibv_rereg_mr(mr, all, pd2, va + 100 * 4096, 4096, 0), EFAULT);
    unchanged();
    uint64_t first;
    ASSERT_TRUE(e.drv.alloc_mtt(1, &first));
    EXPECT_EQ(first, saved.mtt_first + 1);  // the failed attempts' MTT runs went back
    // An Allocate L_Key region is not reregistered.
    ibv_mr* l = ibv_alloc_lkey(e.pd, 4);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(ibv_rereg_mr(l, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, 0), EINVAL);
}

TEST(Rereg, o10_37_2_2_physical_reregister_writes_the_new_list_with_the_consumers_key_byte) {
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mr, nullptr);
    ASSERT_EQ(e.as.pin_count(va), 1u);
    const uint64_t old_first = mr->mtt_first;
    std::vector<uint64_t> pages = {kFwMemBase + 0x200000, kFwMemBase + 0x100000};
    ibv_phys_mr_attr a = page_list(pages, 2 * 4096 - 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    a.first_offset = 8;
    a.iova = 0x4400000;
    a.key_byte = 0x5A;
    size_t creates = e.count(hw::CMD_CREATE_MPT), mtts = e.count(hw::CMD_WRITE_MTT);
    ASSERT_EQ(
        ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_ACCESS, nullptr, &a), 0);
    auto c = e.bus.commands_of(hw::CMD_CREATE_MPT);
    ASSERT_EQ(c.size(), creates + 1);
    EXPECT_EQ(c.back().op_mod, uint32_t(hw::MPT_MODIFY));
    ASSERT_EQ(e.count(hw::CMD_WRITE_MTT), mtts + 1);
    for (uint32_t i = 0; i < 2; ++i) EXPECT_EQ(e.mtt_value(mtts, i), pages[i] | hw::MTT_PRESENT);
    hw::mpt_entry m = e.mpt(mr->handle);
    EXPECT_EQ(m.key, hw::make_key(mr->handle, 0x5A)) << "the consumer's key byte";
    EXPECT_EQ(mr->lkey, m.key);
    EXPECT_EQ(mr->rkey, m.key);
    EXPECT_EQ(m.flags & (hw::MPT_PHYS | hw::MPT_BLOCK_LIST | hw::MPT_SHARED), hw::MPT_PHYS);
    EXPECT_EQ(m.start_va, 0x4400000u);
    EXPECT_EQ(m.length, 2u * 4096 - 8);
    EXPECT_EQ(m.page_offset, 8u);
    EXPECT_EQ(m.log_page_size, 12);
    EXPECT_EQ(m.mtt_count, 2u);
    EXPECT_EQ(m.mtt_base, mr->mtt_first);
    EXPECT_NE(mr->mtt_first, old_first);
    EXPECT_EQ(m.access, uint32_t(a.access));
    EXPECT_EQ(mr->page_list_max, 2u);  // o10-37.2.10
    EXPECT_EQ(e.as.pin_count(va), 0u) << "the virtual registration's pages are unpinned";
    // A block list, the driver's key byte, PD change too.
    ibv_pd* pd2 = ibv_alloc_pd(e.ctx);
    std::vector<uint64_t> blocks = {kFwMemBase + 0x300010, kFwMemBase + 0x310020};
    ibv_phys_mr_attr bl = a;
    bl.list = blocks.data();
    bl.count = 2;
    bl.block_list = true;
    bl.size = 6000;
    bl.first_offset = 0;
    bl.length = 12000;
    bl.key_byte = -1;
    ASSERT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD, pd2, &bl), 0);
    m = e.mpt(mr->handle);
    EXPECT_EQ(m.flags & (hw::MPT_PHYS | hw::MPT_BLOCK_LIST), hw::MPT_PHYS | hw::MPT_BLOCK_LIST);
    EXPECT_EQ(m.block_size, 6000u);
    EXPECT_EQ(m.pd, pd2->handle);
    EXPECT_EQ(m.access, uint32_t(a.access)) << "rights unchanged without CHANGE_ACCESS";
    EXPECT_NE(m.key & 0xFFu, 0x5Au) << "a fresh key byte of the driver's";
    EXPECT_EQ(hw::key_index(m.key), mr->handle);
    EXPECT_EQ(e.pd->refs, 0u);
    EXPECT_EQ(pd2->refs, 1u);
    // Refusals leave the registration as it was.
    hw::mpt_entry held = e.mpt(mr->handle);
    ibv_mr saved = *mr;
    auto unchanged = [&](const char* what) {
        EXPECT_EQ(0, std::memcmp(&held, &e.bus.mpts.at(mr->handle), sizeof held)) << what;
        EXPECT_EQ(mr->lkey, saved.lkey) << what;
        EXPECT_EQ(mr->mtt_first, saved.mtt_first) << what;
        EXPECT_EQ(mr->pd, pd2) << what;
    };
    ibv_phys_mr_attr bad = a;
    std::vector<uint64_t> off = {kFwMemBase + 0x100800};
    bad.list = off.data();
    bad.count = 1;
    bad.first_offset = 0;
    bad.length = 100;
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, &bad), EINVAL);  // C10-53.2.1
    unchanged("page off a boundary");
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, nullptr), EINVAL);
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr), EINVAL);
    EXPECT_EQ(ibv_rereg_phys_mr(mr, 0, nullptr, &a), EINVAL);
    bad = a;
    bad.key_byte = 256;
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, &bad), EINVAL);
    bad = a;
    bad.access = IBV_ACCESS_REMOTE_WRITE;  // C10-48
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, &bad), EINVAL);
    unchanged("bad arguments");
    e.bus.fail_op_mod[{hw::CMD_CREATE_MPT, hw::MPT_MODIFY}] = hw::CMD_BAD_PARAM;
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, &a), EINVAL);
    unchanged("the HCA refuses");
    e.bus.fail_op_mod.clear();
    e.bus.mpts[mr->handle].bound_mws = 1;
    held.bound_mws = 1;
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, &a), EBUSY);
    unchanged("windows bound");
    e.bus.mpts[mr->handle].bound_mws = 0;
    // The refused attempts' MTT runs went back: only the live region's two entries are in use.
    uint64_t first;
    ASSERT_TRUE(e.drv.alloc_mtt(1, &first));
    EXPECT_NE(first, mr->mtt_first);
    EXPECT_LE(first, mr->mtt_first + 2);
    // Only CHANGE_PD needs no attributes.
    EXPECT_EQ(ibv_rereg_phys_mr(mr, IBV_REREG_MR_CHANGE_PD, e.pd, nullptr), 0);
    EXPECT_EQ(e.mpt(mr->handle).pd, e.pd->handle);
    // An Allocate L_Key region is not reregistered.
    ibv_mr* l = ibv_alloc_lkey(e.pd, 4);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(ibv_rereg_phys_mr(l, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, &a), EINVAL);
}

// ------------------------------------------------------------------ shared regions

TEST(SharedMr, shares_the_sources_mtt_entries_until_the_last_user_goes) {
    env e;
    uint64_t va = e.as.alloc(4 * 4096, 4096) + 0x80;
    ibv_mr* src = ibv_reg_mr(e.pd, va, 3 * 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(src, nullptr);
    ibv_pd* pd2 = ibv_alloc_pd(e.ctx);
    size_t mtt_cmds = e.count(hw::CMD_WRITE_MTT);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED;
    ibv_mr* sh = ibv_reg_shared_mr(src, pd2, access, 0x123);
    ASSERT_NE(sh, nullptr);
    EXPECT_EQ(e.count(hw::CMD_WRITE_MTT), mtt_cmds);  // no new translation written
    hw::mpt_entry s = e.mpt(src->handle), m = e.mpt(sh->handle);
    EXPECT_EQ(m.mtt_base, s.mtt_base);
    EXPECT_EQ(m.mtt_count, s.mtt_count);
    EXPECT_EQ(m.mtt_reserved, s.mtt_reserved);
    EXPECT_EQ(m.page_offset, s.page_offset);
    EXPECT_EQ(m.log_page_size, s.log_page_size);
    EXPECT_EQ(m.length, s.length);
    EXPECT_EQ(m.flags, hw::MPT_SHARED);
    EXPECT_EQ(m.pd, pd2->handle);
    EXPECT_EQ(m.access, uint32_t(access));
    EXPECT_EQ(m.start_va, 0u);  // zero-based
    EXPECT_EQ(m.state, hw::MPT_STATE_VALID);
    EXPECT_NE(sh->handle, src->handle);
    EXPECT_NE(sh->lkey, src->lkey);
    EXPECT_EQ(sh->mtt_first, src->mtt_first);
    // The source is marked with one MPT_MODIFY keeping its key.
    EXPECT_EQ(s.flags, hw::MPT_SHARE_SRC);
    EXPECT_EQ(s.key, src->lkey);
    auto c = e.bus.commands_of(hw::CMD_CREATE_MPT);
    EXPECT_EQ(c.back().op_mod, uint32_t(hw::MPT_MODIFY));
    EXPECT_EQ(c.back().in_mod, src->handle);
    EXPECT_EQ(e.drv.mtt_users(src->mtt_first), 2u);
    ibv_mr_attr qa;
    ASSERT_EQ(ibv_query_mr(sh, &qa), 0);
    EXPECT_TRUE(qa.is_shared);
    EXPECT_EQ(qa.pd, pd2);
    ASSERT_EQ(ibv_query_mr(src, &qa), 0);
    EXPECT_FALSE(qa.is_shared);
    // A second share needs no second marking.
    size_t creates = e.count(hw::CMD_CREATE_MPT);
    ibv_mr* sh2 = ibv_reg_shared_mr(src, e.pd, IBV_ACCESS_LOCAL_WRITE, va);
    ASSERT_NE(sh2, nullptr);
    EXPECT_EQ(e.count(hw::CMD_CREATE_MPT), creates + 1);
    EXPECT_EQ(e.mpt(sh2->handle).start_va, va);
    EXPECT_EQ(e.drv.mtt_users(src->mtt_first), 3u);
    // Deregistering the source leaves the pages pinned and the MTT run in use.
    uint64_t first = src->mtt_first;
    ASSERT_EQ(ibv_dereg_mr(src), 0);
    EXPECT_EQ(e.as.pin_count(va), 1u);
    EXPECT_EQ(e.drv.mtt_users(first), 2u);
    ASSERT_EQ(ibv_dereg_mr(sh2), 0);
    EXPECT_EQ(e.as.pin_count(va), 1u);
    uint64_t probe;
    ASSERT_TRUE(e.drv.alloc_mtt(1, &probe));
    EXPECT_NE(probe, first);  // still in use by sh
    e.drv.free_mtt(probe, 1);
    ASSERT_EQ(ibv_dereg_mr(sh), 0);  // the last user
    EXPECT_EQ(e.as.pin_count(va), 0u);
    EXPECT_EQ(e.as.pin_count(va + 2 * 4096), 0u);
    ASSERT_TRUE(e.drv.alloc_mtt(1, &probe));
    EXPECT_EQ(probe, first);
    EXPECT_EQ(pd2->refs, 0u);
}

TEST(SharedMr, refused_sources_leave_nothing) {
    env e;
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* src = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ibv_mr* l = ibv_alloc_lkey(e.pd, 4);
    ASSERT_TRUE(src && l);
    uint32_t mpts = e.drv.free_mpts();
    errno = 0;
    EXPECT_EQ(ibv_reg_shared_mr(l, e.pd, IBV_ACCESS_LOCAL_WRITE, 0), nullptr);  // Allocate L_Key region
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_reg_shared_mr(nullptr, e.pd, 0, 0), nullptr);
    EXPECT_EQ(ibv_reg_shared_mr(src, e.pd, 0, ~0ull - 5), nullptr);  // wraps
    // Marking the source fails (windows bound to it): the new entry is destroyed again.
    e.bus.mpts[src->handle].bound_mws = 1;
    size_t destroys = e.count(hw::CMD_DESTROY_MPT);
    EXPECT_EQ(ibv_reg_shared_mr(src, e.pd, IBV_ACCESS_LOCAL_WRITE, va), nullptr);
    EXPECT_EQ(errno, EBUSY);
    EXPECT_EQ(e.count(hw::CMD_DESTROY_MPT), destroys + 1);
    EXPECT_EQ(e.bus.mpts.size(), 2u);
    EXPECT_EQ(e.drv.free_mpts(), mpts);
    EXPECT_EQ(e.drv.mtt_users(src->mtt_first), 1u);
    EXPECT_EQ(e.pd->refs, 2u);
    EXPECT_EQ(e.mpt(src->handle).flags, 0);
}

// ------------------------------------------------------------------ Allocate L_Key, query, dereg

TEST(AllocLkey, o10_37_2_10_lkey_starts_free_with_its_page_list_reserved) {
    env e;
    size_t pages = e.os.free_pages();
    ibv_mr* l = ibv_alloc_lkey(e.pd, 40);
    ASSERT_NE(l, nullptr);
    hw::mpt_entry m = e.mpt(l->handle);
    EXPECT_EQ(m.state, hw::MPT_STATE_FREE);
    EXPECT_EQ(m.type, hw::MPT_TYPE_MR);
    EXPECT_EQ(m.flags, hw::MPT_FAST_REG);
    EXPECT_EQ(m.mtt_reserved, 40u);
    EXPECT_EQ(m.mtt_count, 0u);
    EXPECT_EQ(m.mtt_base, l->mtt_first);
    EXPECT_EQ(m.pd, e.pd->handle);
    EXPECT_EQ(m.key, l->lkey);
    EXPECT_EQ(hw::key_index(l->lkey), l->handle);
    EXPECT_EQ(l->rkey, l->lkey);
    EXPECT_EQ(l->mtt_count, 40u);
    EXPECT_EQ(l->page_list_max, 40u);
    EXPECT_NE(l->page_list_pa, 0u);
    EXPECT_EQ(e.os.free_pages(), pages - 1);  // 320-byte page-list buffer
    EXPECT_EQ(e.count(hw::CMD_WRITE_MTT), 0u);
    ibv_mr_attr qa;
    ASSERT_EQ(ibv_query_mr(l, &qa), 0);
    EXPECT_EQ(qa.state, IBV_MR_STATE_FREE);
    EXPECT_EQ(qa.page_list_max, 40u);
    EXPECT_EQ(qa.lkey, l->lkey);
    // As the HCA reports a fast-registered key: query reads it back.
    e.bus.mpts[l->handle].state = hw::MPT_STATE_VALID;
    e.bus.mpts[l->handle].length = 8192;
    ASSERT_EQ(ibv_query_mr(l, &qa), 0);
    EXPECT_EQ(qa.state, IBV_MR_STATE_VALID);
    EXPECT_EQ(qa.length, 8192u);
    // Bounds of max_pages.
    errno = 0;
    EXPECT_EQ(ibv_alloc_lkey(e.pd, 0), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_alloc_lkey(e.pd, e.bus.caps.max_fast_reg_pages + 1), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_NE(ibv_alloc_lkey(e.pd, e.bus.caps.max_fast_reg_pages), nullptr);
    // Deregistration frees the reservation and the buffer.
    uint64_t first = l->mtt_first;
    size_t before = e.os.free_pages();
    ASSERT_EQ(ibv_dereg_mr(l), 0);
    EXPECT_EQ(e.os.free_pages(), before + 1);
    uint64_t probe;
    ASSERT_TRUE(e.drv.alloc_mtt(40, &probe));
    EXPECT_EQ(probe, first);
    // Without the memory management extensions: EINVAL.
    env n([](test::fake_hca_bus& b) { b.caps.flags &= ~hw::CAP_SEND_INV; });
    EXPECT_EQ(ibv_alloc_lkey(n.pd, 4), nullptr);
    EXPECT_EQ(errno, EINVAL);
}

TEST(QueryMr, reports_what_the_hca_holds) {
    env e;
    uint64_t va = e.as.alloc(2 * 4096, 4096);
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
    ibv_mr* mr = ibv_reg_mr(e.pd, va + 5, 6000, access);
    ASSERT_NE(mr, nullptr);
    ibv_mr_attr qa;
    ASSERT_EQ(ibv_query_mr(mr, &qa), 0);
    EXPECT_EQ(e.bus.commands_of(hw::CMD_QUERY_MPT).back().in_mod, mr->handle);
    EXPECT_EQ(qa.pd, e.pd);
    EXPECT_EQ(qa.addr, va + 5);
    EXPECT_EQ(qa.length, 6000u);
    EXPECT_EQ(qa.access, access);
    EXPECT_EQ(qa.lkey, mr->lkey);
    EXPECT_EQ(qa.rkey, mr->rkey);
    EXPECT_EQ(qa.state, IBV_MR_STATE_VALID);
    EXPECT_EQ(qa.page_list_max, 2u);
    EXPECT_FALSE(qa.is_shared);
    e.bus.fail_opcode[hw::CMD_QUERY_MPT] = hw::CMD_BAD_PARAM;
    EXPECT_EQ(ibv_query_mr(mr, &qa), EINVAL);
    EXPECT_EQ(ibv_query_mr(nullptr, &qa), EINVAL);
}

TEST(Dereg, region_with_windows_bound_is_busy_and_stays_registered) {
    env e;
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ASSERT_NE(mr, nullptr);
    e.bus.mpts[mr->handle].bound_mws = 2;  // as the HCA counts binds
    EXPECT_EQ(ibv_dereg_mr(mr), EBUSY);
    EXPECT_EQ(e.as.pin_count(va), 1u);
    EXPECT_EQ(e.pd->refs, 1u);
    EXPECT_EQ(e.bus.mpts.count(mr->handle), 1u);
    uint32_t mpts = e.drv.free_mpts();
    e.bus.mpts[mr->handle].bound_mws = 0;
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_EQ(e.drv.free_mpts(), mpts + 1);
    EXPECT_EQ(e.as.pin_count(va), 0u);
}

TEST(MapPages, pins_until_unmap_or_close) {
    env e;
    uint64_t va = e.as.alloc(3 * 4096, 4096);
    std::vector<uint64_t> pages;
    ASSERT_EQ(ibv_map_pages(e.ctx, va + 10, 2 * 4096, &pages), 0);
    ASSERT_EQ(pages.size(), 3u);
    for (uint32_t i = 0; i < 3; ++i) {
        uint64_t pa;
        ASSERT_TRUE(e.as.translate(va + i * 4096, &pa));
        EXPECT_EQ(pages[i], pa);
        EXPECT_EQ(e.as.pin_count(va + i * 4096), 1u);
    }
    EXPECT_EQ(ibv_unmap_pages(e.ctx, va, 2 * 4096), EINVAL);  // not a mapped range
    ASSERT_EQ(ibv_unmap_pages(e.ctx, va + 10, 2 * 4096), 0);
    EXPECT_EQ(e.as.pin_count(va), 0u);
    EXPECT_EQ(ibv_map_pages(e.ctx, va + 100 * 4096, 10, &pages), EFAULT);
    EXPECT_EQ(ibv_map_pages(e.ctx, va, 0, &pages), EINVAL);
    ASSERT_EQ(ibv_map_pages(e.ctx, va, 4096, &pages), 0);
    ASSERT_EQ(ibv_destroy_cq(e.cq), 0);
    ASSERT_EQ(ibv_dealloc_pd(e.pd), 0);
    ASSERT_EQ(ibv_close_device(e.ctx), 0);
    EXPECT_EQ(e.as.pin_count(va), 0u);
}

// ------------------------------------------------------------------ memory windows

TEST(Mw, alloc_creates_free_windows_counted_on_the_pd) {
    env e;
    ibv_mw* w1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
    ibv_mw* w2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
    ASSERT_TRUE(w1 && w2);
    EXPECT_EQ(w1->type, IBV_MW_TYPE_1);
    EXPECT_EQ(w1->pd, e.pd);
    EXPECT_EQ(w1->context, e.ctx);
    EXPECT_EQ(hw::key_index(w1->rkey), w1->handle);
    hw::mpt_entry m1 = e.mpt(w1->handle), m2 = e.mpt(w2->handle);
    EXPECT_EQ(m1.type, hw::MPT_TYPE_MW1);
    EXPECT_EQ(m2.type, hw::MPT_TYPE_MW2A);  // the fake HCA implements 2A
    EXPECT_EQ(m1.state, hw::MPT_STATE_FREE);
    EXPECT_EQ(m2.state, hw::MPT_STATE_FREE);
    EXPECT_EQ(m1.pd, e.pd->handle);
    EXPECT_EQ(m1.key, w1->rkey);
    EXPECT_EQ(e.bus.commands_of(hw::CMD_CREATE_MPT).back().op_mod, uint32_t(hw::MPT_CREATE));
    EXPECT_EQ(e.pd->refs, 2u);
    EXPECT_EQ(e.drv.mws(), 2u);
    EXPECT_EQ(ibv_dealloc_pd(e.pd), EBUSY);  // C10-11.2.1: windows hold the PD
    // Deallocation is allowed while bound (the HCA drops the binding).
    e.bus.mpts[w1->handle].state = hw::MPT_STATE_VALID;
    uint32_t h = w1->handle;
    ASSERT_EQ(ibv_dealloc_mw(w1), 0);
    EXPECT_EQ(e.bus.commands_of(hw::CMD_DESTROY_MPT).back().in_mod, h);
    EXPECT_EQ(e.bus.mpts.count(h), 0u);
    ASSERT_EQ(ibv_dealloc_mw(w2), 0);
    EXPECT_EQ(e.pd->refs, 0u);
    EXPECT_EQ(e.drv.mws(), 0u);
    EXPECT_EQ(ibv_dealloc_pd(e.pd), 0);
    // Bad types.
    ibv_pd* pd = ibv_alloc_pd(e.ctx);
    errno = 0;
    EXPECT_EQ(ibv_alloc_mw(pd, ibv_mw_type(3)), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_alloc_mw(nullptr, IBV_MW_TYPE_1), nullptr);
}

TEST(Mw, o10_37_2_31_type2_follows_the_one_type_the_hca_implements) {
    env b([](test::fake_hca_bus& f) {
        f.caps.flags = (f.caps.flags & ~hw::CAP_MW_TYPE2A) | hw::CAP_MW_TYPE2B;
    });
    ibv_mw* w = ibv_alloc_mw(b.pd, IBV_MW_TYPE_2);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(b.mpt(w->handle).type, hw::MPT_TYPE_MW2B);
    ibv_device_attr da;
    ASSERT_EQ(ibv_query_device(b.ctx, &da), 0);
    EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
    EXPECT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
    for (uint64_t both : {hw::CAP_MW_TYPE2A | hw::CAP_MW_TYPE2B, uint64_t(0)}) {
        env x([both](test::fake_hca_bus& f) {
            f.caps.flags = (f.caps.flags & ~(hw::CAP_MW_TYPE2A | hw::CAP_MW_TYPE2B)) | both;
        });
        errno = 0;
        EXPECT_EQ(ibv_alloc_mw(x.pd, IBV_MW_TYPE_2), nullptr);
        EXPECT_EQ(errno, EINVAL);
        EXPECT_NE(ibv_alloc_mw(x.pd, IBV_MW_TYPE_1), nullptr);  // type 1 is always there with CAP_MW
    }
    env none([](test::fake_hca_bus& f) { f.caps.flags &= ~hw::CAP_MW; });
    EXPECT_EQ(ibv_alloc_mw(none.pd, IBV_MW_TYPE_1), nullptr);
    EXPECT_EQ(errno, EINVAL);
    // max_mw windows at most.
    env few([](test::fake_hca_bus& f) { f.caps.max_mw = 2; });
    EXPECT_NE(ibv_alloc_mw(few.pd, IBV_MW_TYPE_1), nullptr);
    EXPECT_NE(ibv_alloc_mw(few.pd, IBV_MW_TYPE_1), nullptr);
    EXPECT_EQ(ibv_alloc_mw(few.pd, IBV_MW_TYPE_1), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    EXPECT_EQ(few.count(hw::CMD_CREATE_MPT), 2u);
}

TEST(Mw, C10_66_2_2_bind_verb_posts_a_bind_wqe_with_a_new_rkey_each_time) {
    env e;
    ibv_qp* q = e.rts();
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
    ASSERT_TRUE(q && mr && mw);
    uint32_t k0 = mw->rkey;
    ibv_mw_bind b;
    b.wr_id = 0xB1;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info = {mr, va + 16, 256, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE};
    size_t m = e.bus.mmio.size();
    ASSERT_EQ(ibv_bind_mw(q, mw, &b), 0);
    EXPECT_EQ(mw->rkey, ibv_inc_rkey(k0));
    EXPECT_EQ(hw::key_index(mw->rkey), mw->handle);
    EXPECT_NE(mw->rkey, k0);
    hw::wqe_ctrl_seg c = e.slot<hw::wqe_ctrl_seg>(q, 0);
    EXPECT_EQ(c.opcode, hw::WQE_OP_BIND_MW);
    EXPECT_EQ(c.flags, hw::WQE_FLAG_SIGNALED);
    EXPECT_EQ(c.ds_count, 4);  // 32 + 32 bytes
    EXPECT_EQ(c.qpn, q->qp_num);
    EXPECT_EQ(c.wqe_index, 0);
    EXPECT_EQ(c.wr_id, 0xB1u);
    hw::wqe_bind_seg s = e.slot<hw::wqe_bind_seg>(q, 0, 32);
    EXPECT_EQ(s.mw_key, k0);
    EXPECT_EQ(s.new_key, mw->rkey);
    EXPECT_EQ(s.mr_lkey, mr->lkey);
    EXPECT_EQ(s.access, uint32_t(hw::ACCESS_REMOTE_READ | hw::ACCESS_REMOTE_WRITE));
    EXPECT_EQ(s.addr, va + 16);
    EXPECT_EQ(s.length, 256u);
    EXPECT_EQ(s.bind_flags, uint32_t(hw::BIND_FROM_VERB));
    EXPECT_EQ(q->sq.producer, 1u);
    EXPECT_EQ(e.bus.count_mmio(hca_driver::uar_offset(e.ctx->uar, hw::UAR_SQ_DOORBELL), m), 1u);
    EXPECT_EQ(e.bus.mmio.back().value, hw::sq_doorbell(q->qp_num, 1));
    // Again: the next key byte; a zero-length bind (unbind, C10-66.2.4) needs no region.
    uint32_t k1 = mw->rkey;
    b.bind_info = {nullptr, 0, 0, 0};
    b.send_flags = IBV_SEND_FENCE;
    ASSERT_EQ(ibv_bind_mw(q, mw, &b), 0);
    EXPECT_EQ(mw->rkey, ibv_inc_rkey(k1));
    s = e.slot<hw::wqe_bind_seg>(q, 1, 32);
    EXPECT_EQ(s.mw_key, k1);
    EXPECT_EQ(s.length, 0u);
    EXPECT_EQ(s.mr_lkey, 0u);
    EXPECT_EQ(e.slot<hw::wqe_ctrl_seg>(q, 1).flags, hw::WQE_FLAG_FENCE);
    // The key bytes come from the driver's per-index generation: after Deallocate MW, the next
    // user of the index gets a key the window never had (a stale window key stays stale).
    const uint32_t k2 = mw->rkey, index = mw->handle;
    ASSERT_EQ(ibv_dealloc_mw(mw), 0);
    ibv_mr* next = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    ASSERT_TRUE(next);
    ASSERT_EQ(next->handle, index) << "lowest free MPT index is reused";
    for (uint32_t old : {k0, k1, k2}) EXPECT_NE(next->rkey, old);
}

TEST(Mw, o10_37_2_35_bind_verb_refuses_a_type2_window) {
    env e;
    ibv_qp* q = e.rts();
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* w2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
    ASSERT_TRUE(q && mr && w2);
    uint32_t key = w2->rkey;
    ibv_mw_bind b;
    b.bind_info = {mr, va, 64, IBV_ACCESS_REMOTE_READ};
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_bind_mw(q, w2, &b), EINVAL);
    EXPECT_EQ(w2->rkey, key);
    EXPECT_EQ(q->sq.producer, 0u);
    EXPECT_EQ(e.bus.mmio.size(), m);
}

TEST(Mw, bind_verb_shape_errors_are_immediate) {
    env e;
    ibv_qp* rc = e.rts();
    ibv_qp* ud = e.rts(IBV_QPT_UD);
    ibv_qp* init = e.qp();
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* mw = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
    ASSERT_TRUE(rc && ud && init && mr && mw);
    uint32_t key = mw->rkey;
    ibv_mw_bind b;
    b.bind_info = {mr, va, 64, IBV_ACCESS_REMOTE_READ};
    EXPECT_EQ(ibv_bind_mw(ud, mw, &b), EINVAL);    // C10-89: RC and UC only
    EXPECT_EQ(ibv_bind_mw(init, mw, &b), EINVAL);  // not in RTS
    b.bind_info.length = 1ull << 32;               // the bind segment length is 32 bits
    EXPECT_EQ(ibv_bind_mw(rc, mw, &b), EINVAL);
    b.bind_info = {nullptr, va, 64, IBV_ACCESS_REMOTE_READ};  // a length needs a region
    EXPECT_EQ(ibv_bind_mw(rc, mw, &b), EINVAL);
    b.bind_info = {mr, va, 64, IBV_ACCESS_LOCAL_WRITE};  // windows grant remote rights only
    EXPECT_EQ(ibv_bind_mw(rc, mw, &b), EINVAL);
    b.bind_info = {mr, va, 64, IBV_ACCESS_REMOTE_READ};
    b.send_flags = IBV_SEND_INLINE;
    EXPECT_EQ(ibv_bind_mw(rc, mw, &b), EINVAL);
    EXPECT_EQ(ibv_bind_mw(rc, nullptr, &b), EINVAL);
    EXPECT_EQ(mw->rkey, key);
    EXPECT_EQ(rc->sq.producer + ud->sq.producer + init->sq.producer, 0u);
    // What only the HCA knows is not checked here: a region without MW_BIND, another PD.
    ibv_mr* plain = ibv_reg_mr(e.pd, va, 4096, 0);
    b.send_flags = 0;
    b.bind_info = {plain, va + 4000, 1000, IBV_ACCESS_REMOTE_WRITE};
    EXPECT_EQ(ibv_bind_mw(rc, mw, &b), 0);
}

TEST(Mw, o10_37_2_34_bind_wr_refuses_a_type1_window) {
    env e;
    ibv_qp* q = e.rts();
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* w1 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_1);
    ASSERT_TRUE(q && mr && w1);
    uint32_t key = w1->rkey;
    ibv_send_wr w{};
    w.opcode = IBV_WR_BIND_MW;
    w.bind_mw.mw = w1;
    w.bind_mw.rkey = ibv_inc_rkey(key);
    w.bind_mw.bind_info = {mr, va, 64, IBV_ACCESS_REMOTE_READ};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
    EXPECT_EQ(bad, &w);
    EXPECT_EQ(w1->rkey, key);
    EXPECT_EQ(q->sq.producer, 0u);
}

TEST(Mw, o10_37_2_40_zero_length_type2_bind_wr_is_refused) {
    env e;
    ibv_qp* q = e.rts();
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* w2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
    ASSERT_TRUE(q && mr && w2);
    uint32_t key = w2->rkey;
    ibv_send_wr w{};
    w.opcode = IBV_WR_BIND_MW;
    w.bind_mw.mw = w2;
    w.bind_mw.rkey = 0x42;
    w.bind_mw.bind_info = {mr, va, 0, IBV_ACCESS_REMOTE_READ};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
    EXPECT_EQ(bad, &w);
    EXPECT_EQ(w2->rkey, key);
    EXPECT_EQ(q->sq.producer, 0u);
}

// ------------------------------------------------------------------ memory management WQEs

TEST(MmWqe, bind_mw_type2_wqe_uses_the_consumers_key_byte) {
    env e;
    ibv_qp* q = e.rts(IBV_QPT_UC);
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
    ibv_mw* w2 = ibv_alloc_mw(e.pd, IBV_MW_TYPE_2);
    ASSERT_TRUE(q && mr && w2);
    uint32_t old = w2->rkey;
    ibv_send_wr w{};
    w.wr_id = 77;
    w.opcode = IBV_WR_BIND_MW;
    w.send_flags = IBV_SEND_SIGNALED;
    w.bind_mw.mw = w2;
    w.bind_mw.rkey = 0xDEAD12C3;  // only the low byte is the consumer's (o10-37.2.33)
    w.bind_mw.bind_info = {mr, va + 8, 1000, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED};
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    uint32_t want = hw::make_key(w2->handle, 0xC3);
    EXPECT_EQ(w2->rkey, want);
    hw::wqe_ctrl_seg c = e.slot<hw::wqe_ctrl_seg>(q, 0);
    EXPECT_EQ(c.opcode, hw::WQE_OP_BIND_MW);
    EXPECT_EQ(c.ds_count, 4);
    EXPECT_EQ(c.flags, hw::WQE_FLAG_SIGNALED);
    EXPECT_EQ(c.wr_id, 77u);
    hw::wqe_bind_seg s = e.slot<hw::wqe_bind_seg>(q, 0, 32);
    EXPECT_EQ(s.mw_key, old);
    EXPECT_EQ(s.new_key, want);
    EXPECT_EQ(s.mr_lkey, mr->lkey);
    EXPECT_EQ(s.access, uint32_t(hw::ACCESS_REMOTE_WRITE | hw::ACCESS_ZERO_BASED));
    EXPECT_EQ(s.addr, va + 8);
    EXPECT_EQ(s.length, 1000u);
    EXPECT_EQ(s.bind_flags, 0u);
    for (int i = 64; i < 80; ++i) EXPECT_EQ(e.bus.read<uint8_t>(q->sq.pa + i), 0) << i;
}

TEST(MmWqe, local_invalidate_wqe_carries_the_key_and_no_segments) {
    env e;
    ibv_qp* rc = e.rts();
    ibv_qp* uc = e.rts(IBV_QPT_UC);
    ibv_qp* ud = e.rts(IBV_QPT_UD);
    ASSERT_TRUE(rc && uc && ud);
    ibv_sge sg{0x1234, 64, 99};
    ibv_send_wr w{};
    w.wr_id = 5;
    w.opcode = IBV_WR_LOCAL_INV;
    w.invalidate_rkey = 0x00012345;
    w.send_flags = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    w.sg_list = &sg;  // ignored
    w.num_sge = 1;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(rc, &w, &bad), 0);
    hw::wqe_ctrl_seg c = e.slot<hw::wqe_ctrl_seg>(rc, 0);
    EXPECT_EQ(c.opcode, hw::WQE_OP_LOCAL_INV);
    EXPECT_EQ(c.imm, 0x00012345u);
    EXPECT_EQ(c.ds_count, 2);
    EXPECT_EQ(c.flags, hw::WQE_FLAG_FENCE | hw::WQE_FLAG_SIGNALED);  // solicited means nothing here
    EXPECT_EQ(c.wr_id, 5u);
    for (int i = 32; i < 64; ++i) EXPECT_EQ(e.bus.read<uint8_t>(rc->sq.pa + i), 0) << i;
    EXPECT_EQ(ibv_post_send(uc, &w, &bad), 0);
    EXPECT_EQ(e.slot<hw::wqe_ctrl_seg>(uc, 0).opcode, hw::WQE_OP_LOCAL_INV);
    EXPECT_EQ(ibv_post_send(ud, &w, &bad), EINVAL);
    w.send_flags = IBV_SEND_INLINE;
    EXPECT_EQ(ibv_post_send(rc, &w, &bad), EINVAL);
    // Without the memory management extensions: not a WR the QP takes.
    env n([](test::fake_hca_bus& b) { b.caps.flags &= ~hw::CAP_SEND_INV; });
    ibv_qp* q = n.rts();
    w.send_flags = 0;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), EINVAL);
}

TEST(MmWqe, send_with_invalidate_wqe_is_a_send_with_the_key_in_imm) {
    env e;
    ibv_qp* rc = e.rts();
    ibv_qp* uc = e.rts(IBV_QPT_UC);
    uint64_t va = e.as.alloc(4096, 4096);
    ibv_mr* mr = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_TRUE(rc && uc && mr);
    ibv_sge sg[2] = {{va, 100, mr->lkey}, {va + 200, 50, mr->lkey}};
    ibv_send_wr w{};
    w.wr_id = 9;
    w.opcode = IBV_WR_SEND_WITH_INV;
    w.invalidate_rkey = 0xABCDEF01;
    w.imm_data = 0x1111;  // not used
    w.sg_list = sg;
    w.num_sge = 2;
    w.send_flags = IBV_SEND_SOLICITED;
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(rc, &w, &bad), 0);
    hw::wqe_ctrl_seg c = e.slot<hw::wqe_ctrl_seg>(rc, 0);
    EXPECT_EQ(c.opcode, hw::WQE_OP_SEND_INV);
    EXPECT_EQ(c.imm, 0xABCDEF01u);
    EXPECT_EQ(c.ds_count, 4);  // ctrl + 2 data segments
    EXPECT_EQ(c.flags, hw::WQE_FLAG_SOLICITED);
    hw::wqe_data_seg d = e.slot<hw::wqe_data_seg>(rc, 0, 48);
    EXPECT_EQ(d.addr, va + 200);
    EXPECT_EQ(d.byte_count, 50u);
    EXPECT_EQ(d.lkey, mr->lkey);
    EXPECT_EQ(ibv_post_send(uc, &w, &bad), EINVAL);  // o10-38.2.1: RC
    EXPECT_EQ(uc->sq.producer, 0u);
}

TEST(MmWqe, fast_register_copies_the_page_list_and_points_the_wqe_at_it) {
    env e;
    ibv_qp* q = e.rts(IBV_QPT_RC, IBV_QP_CREATE_FAST_REG);
    ibv_qp* uc = e.rts(IBV_QPT_UC, IBV_QP_CREATE_FAST_REG);
    uint64_t va = e.as.alloc(3 * 4096, 4096);
    std::vector<uint64_t> pages;
    ASSERT_EQ(ibv_map_pages(e.ctx, va, 3 * 4096, &pages), 0);
    ibv_mr* l = ibv_alloc_lkey(e.pd, 4);
    ASSERT_TRUE(q && uc && l);
    ibv_send_wr w{};
    w.wr_id = 0xF4;
    w.opcode = IBV_WR_FAST_REG_MR;
    w.send_flags = IBV_SEND_SIGNALED;
    int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    w.fast_reg = {l, 0x77, 0x55550000ull, 3 * 4096 - 100, access, pages.data(), 3, 100, 12};
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(q, &w, &bad), 0);
    hw::wqe_ctrl_seg c = e.slot<hw::wqe_ctrl_seg>(q, 0);
    EXPECT_EQ(c.opcode, hw::WQE_OP_FAST_REG);
    EXPECT_EQ(c.ds_count, 5);  // 32 + 48 bytes
    EXPECT_EQ(c.flags, hw::WQE_FLAG_SIGNALED);
    EXPECT_EQ(c.wr_id, 0xF4u);
    hw::wqe_fast_reg_seg s = e.slot<hw::wqe_fast_reg_seg>(q, 0, 32);
    EXPECT_EQ(s.lkey, hw::make_key(l->handle, 0x77));
    EXPECT_EQ(s.access, uint32_t(access));
    EXPECT_EQ(s.iova, 0x55550000ull);
    EXPECT_EQ(s.length, 3u * 4096 - 100);
    EXPECT_EQ(s.page_list_pa, l->page_list_pa);
    EXPECT_EQ(s.page_count, 3u);
    EXPECT_EQ(s.page_offset, 100u);
    EXPECT_EQ(s.log_page_size, 12);
    for (int i = 0; i < 7; ++i) EXPECT_EQ(s.rsvd[i], 0);
    for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(e.bus.read<uint64_t>(l->page_list_pa + 8 * i), pages[i]) << i;
    EXPECT_EQ(l->lkey, hw::make_key(l->handle, 0x77));
    EXPECT_EQ(e.count(hw::CMD_WRITE_MTT), 0u);  // the HCA writes the MTT from the list
    // Shape errors: too many pages for the L_Key's buffer, no list, not an L_Key, UC, no length.
    auto refused = [&](ibv_qp* on, ibv_send_wr x) {
        uint32_t before = on->sq.producer, key = l->lkey;
        EXPECT_EQ(ibv_post_send(on, &x, &bad), EINVAL);
        EXPECT_EQ(on->sq.producer, before);
        EXPECT_EQ(l->lkey, key);
    };
    ibv_send_wr x = w;
    x.fast_reg.page_count = 5;
    refused(q, x);
    x = w;
    x.fast_reg.page_list = nullptr;
    refused(q, x);
    x = w;
    x.fast_reg.length = 0;
    refused(q, x);
    ibv_mr* plain = ibv_reg_mr(e.pd, va, 4096, IBV_ACCESS_LOCAL_WRITE);
    x = w;
    x.fast_reg.mr = plain;
    refused(q, x);
    refused(uc, w);
    // What only the HCA knows is not checked: the key's state, misaligned pages, a QP without
    // fast register enabled.
    ibv_qp* nofr = e.rts();
    x = w;
    std::vector<uint64_t> odd = {pages[0] + 1};
    x.fast_reg.page_list = odd.data();
    x.fast_reg.page_count = 1;
    EXPECT_EQ(ibv_post_send(nofr, &x, &bad), 0);
    EXPECT_EQ(ibv_post_send(q, &x, &bad), 0);
}

TEST(MmWqe, send_queue_slots_hold_the_largest_memory_management_wqe) {
    env e;
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = e.cq;
    ia.qp_type = IBV_QPT_UC;
    ia.cap = {4, 4, 0, 0, 0};  // no SGEs: 32 + 16 bytes of ordinary WQE
    ibv_qp* q = ibv_create_qp(e.pd, &ia);
    ASSERT_NE(q, nullptr);
    EXPECT_GE(1u << q->sq.log_stride, 80u);  // ctrl + fast-register segment
    EXPECT_EQ(send_wqe_max_bytes(IBV_QPT_UC, 0, 0), 80u);
    EXPECT_EQ(send_wqe_max_bytes(IBV_QPT_RC, 0, 0), 80u);
    EXPECT_EQ(send_wqe_max_bytes(IBV_QPT_RC, 2, 0), 96u);
    EXPECT_EQ(send_wqe_max_bytes(IBV_QPT_UD, 0, 0), 80u);  // 32 + UD segment
}

// ------------------------------------------------------------------ QPs, device, completions

TEST(Qp, create_flags_enable_fast_register_and_the_reserved_lkey_in_the_context) {
    env e;
    ibv_qp* q = e.qp(IBV_QPT_RC, IBV_QP_CREATE_FAST_REG | IBV_QP_CREATE_RESERVED_LKEY);
    ibv_qp* p = e.qp(IBV_QPT_UD, IBV_QP_CREATE_RESERVED_LKEY);
    ASSERT_TRUE(q && p);
    auto creates = e.bus.commands_of(hw::CMD_CREATE_QP);
    hw::qp_context c;
    std::memcpy(&c, creates[0].in.data(), sizeof c);
    EXPECT_EQ(c.mm_flags, hw::QP_MM_FAST_REG | hw::QP_MM_RESERVED_LKEY);
    std::memcpy(&c, creates[1].in.data(), sizeof c);
    EXPECT_EQ(c.mm_flags, hw::QP_MM_RESERVED_LKEY);
    // Fixed for the QP's life: Reset keeps them.
    ASSERT_EQ(test::modify_qp_to(q, IBV_QPS_INIT), 0);
    ASSERT_EQ(test::modify_qp_to(q, IBV_QPS_RESET), 0);
    hw::modify_qp_in mi;
    std::memcpy(&mi, e.bus.commands_of(hw::CMD_MODIFY_QP).back().in.data(), sizeof mi);
    EXPECT_EQ(mi.ctx.mm_flags, hw::QP_MM_FAST_REG | hw::QP_MM_RESERVED_LKEY);
    ibv_qp_attr qa;
    ibv_qp_init_attr qi;
    ASSERT_EQ(ibv_query_qp(q, &qa, 0, &qi), 0);
    EXPECT_EQ(qi.create_flags, uint32_t(IBV_QP_CREATE_FAST_REG | IBV_QP_CREATE_RESERVED_LKEY));
    // Unknown bits, or features the HCA lacks: EINVAL, no QP.
    size_t n = e.count(hw::CMD_CREATE_QP);
    errno = 0;
    EXPECT_EQ(e.qp(IBV_QPT_RC, 4), nullptr);
    EXPECT_EQ(errno, EINVAL);
    env r([](test::fake_hca_bus& b) { b.caps.flags &= ~hw::CAP_RESERVED_LKEY; });
    EXPECT_EQ(r.qp(IBV_QPT_RC, IBV_QP_CREATE_RESERVED_LKEY), nullptr);
    EXPECT_NE(r.qp(IBV_QPT_RC, IBV_QP_CREATE_FAST_REG), nullptr);
    env f([](test::fake_hca_bus& b) { b.caps.flags &= ~hw::CAP_SEND_INV; });
    EXPECT_EQ(f.qp(IBV_QPT_RC, IBV_QP_CREATE_FAST_REG), nullptr);
    EXPECT_EQ(e.count(hw::CMD_CREATE_QP), n);
}

TEST(Qp, o10_37_2_29_destroy_and_reset_wait_for_type2a_windows_to_go) {
    env e;
    ibv_qp* q = e.rts();
    ASSERT_NE(q, nullptr);
    e.bus.qps_with_2a_windows.insert(q->qp_num);
    EXPECT_EQ(ibv_destroy_qp(q), EBUSY);
    EXPECT_EQ(test::modify_qp_to(q, IBV_QPS_RESET), EBUSY);
    EXPECT_EQ(q->state, IBV_QPS_RTS);  // intact
    EXPECT_EQ(e.pd->refs, 1u);
    ibv_send_wr w{};
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(ibv_post_send(q, &w, &bad), 0);          // still usable
    EXPECT_EQ(test::modify_qp_to(q, IBV_QPS_ERR), 0);  // other transitions go on
    e.bus.qps_with_2a_windows.clear();
    ASSERT_EQ(test::modify_qp_to(q, IBV_QPS_RESET), 0);
    ASSERT_EQ(ibv_destroy_qp(q), 0);
    EXPECT_EQ(e.pd->refs, 0u);
}

TEST(Device, query_device_reports_the_memory_management_features) {
    env e;
    ibv_device_attr da;
    ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
    EXPECT_EQ(da.max_mw, 256);
    EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
    EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS);
    EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A);
    EXPECT_FALSE(da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
    EXPECT_TRUE(da.reserved_lkey_supported);
    EXPECT_EQ(da.reserved_lkey, hw::RESERVED_LKEY);
    EXPECT_EQ(da.max_fast_reg_page_list_len, 64u);
    EXPECT_TRUE(da.zbva);
    EXPECT_TRUE(da.block_list);
    EXPECT_TRUE(da.local_inv_fence);
    EXPECT_EQ(da.page_size_cap, e.bus.caps.page_size_cap);
    env n([](test::fake_hca_bus& b) {
        b.caps.flags &= ~(hw::CAP_MW | hw::CAP_SEND_INV | hw::CAP_MW_TYPE2A | hw::CAP_ZBVA |
                          hw::CAP_BLOCK_LIST | hw::CAP_LOCAL_INV_FENCE | hw::CAP_RESERVED_LKEY);
    });
    ASSERT_EQ(ibv_query_device(n.ctx, &da), 0);
    EXPECT_EQ(da.max_mw, 0);
    EXPECT_FALSE(da.device_cap_flags & (IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_MGT_EXTENSIONS |
                                        IBV_DEVICE_MEM_WINDOW_TYPE_2A | IBV_DEVICE_MEM_WINDOW_TYPE_2B));
    EXPECT_FALSE(da.reserved_lkey_supported || da.zbva || da.block_list || da.local_inv_fence);
    EXPECT_EQ(da.max_fast_reg_page_list_len, 0u);
}

TEST(Completion, memory_management_opcodes_and_send_with_invalidate) {
    env e;
    ibv_qp* q = e.rts();
    ASSERT_NE(q, nullptr);
    struct {
        uint8_t op;
        ibv_wc_opcode want;
    } ops[] = {{hw::CQE_OP_BIND_MW, IBV_WC_BIND_MW},
               {hw::CQE_OP_LOCAL_INV, IBV_WC_LOCAL_INV},
               {hw::CQE_OP_FAST_REG, IBV_WC_FAST_REG_MR}};
    for (int i = 0; i < 3; ++i) {
        hw::cqe c{};
        c.wr_id = 10 + i;
        c.qpn = q->qp_num;
        c.opcode = ops[i].op;
        c.owner = hw::CQE_IS_SEND;
        if (i == 2) {
            c.status = hw::CQE_MW_BIND_ERR;  // memory management operation error
            c.vendor_err = 13;               // xlate_status::bad_page_list
        }
        e.write_cqe(e.cq, i, c);
    }
    hw::cqe r{};
    r.wr_id = 20;
    r.qpn = q->qp_num;
    r.opcode = hw::CQE_OP_RECV;
    r.flags = hw::CQE_FLAG_WITH_INV;
    r.imm = 0x00ABCD07;
    r.byte_len = 33;
    e.write_cqe(e.cq, 3, r);
    ibv_wc wc[4];
    ASSERT_EQ(ibv_poll_cq(e.cq, 4, wc), 4);
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(wc[i].opcode, ops[i].want) << i;
        EXPECT_EQ(wc[i].wr_id, uint64_t(10 + i));
    }
    EXPECT_EQ(IBV_WC_FAST_REG_MR, 32);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[2].status, IBV_WC_MW_BIND_ERR);
    EXPECT_EQ(wc[2].vendor_err, 13u);
    EXPECT_EQ(wc[3].opcode, IBV_WC_RECV);
    EXPECT_EQ(wc[3].wc_flags, unsigned(IBV_WC_WITH_INV));
    EXPECT_EQ(wc[3].imm_data, 0x00ABCD07u);
    EXPECT_EQ(wc[3].byte_len, 33u);
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }
