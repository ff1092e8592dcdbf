// Unit-level tests of single HCA units against a real host_memory (TLM DMA target):
// translation_unit (MPT/MTT tables in host memory), pkey_checker (IBA 10.9.3 match rule),
// cq_writer (owner bit across wraparound, overrun, events), and the doorbell unit's decode
// observed through its counters in a full machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <systemc>
#include <tlm_utils/simple_initiator_socket.h>

#include <cstring>
#include <functional>
#include <iterator>
#include <memory>

#include "model/hca/cq_writer.h"
#include "model/hca/dma_mux.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/translation_unit.h"
#include "model/host/host_memory.h"
#include "model/core/slab.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;

namespace {

const sc_time kClock(1.25, SC_NS);  // 800 MHz

/// Runs `body` in an SC_THREAD and simulates until it returns.
void simulate(std::function<void()> body) {
    app_module app("unit_app", std::move(body));
    sc_core::sc_start(sc_time(1, sc_core::SC_SEC));
    EXPECT_TRUE(app.finished);
}

// ------------------------------------------------------------------ translation_unit

constexpr uint64_t kMptBase = 0x100000, kMttBase = 0x200000, kPageList = 0x300000;
constexpr uint32_t kNumMpts = 16;
constexpr uint64_t kNumMtts = 64;
constexpr uint32_t kNumQps = 8;
constexpr uint64_t kVa = 0x7f0000001100ull;  // region starts 0x100 into a page
constexpr uint32_t kRemote = hw::ACCESS_REMOTE_READ | hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC;

struct xlate_bench : sc_core::sc_module {
    host_memory mem{"memory"};
    tlm_utils::simple_initiator_socket<xlate_bench> cpu_stub{"cpu_stub"};  // no CPU here
    translation_unit tu{"translation_unit", kClock};
    xlate_bench() : sc_module("bench") {
        cpu_stub.bind(mem.cpu);
        tu.dma.socket.bind(mem.dma);
        tu.set_tables(kMptBase, kNumMpts, kMttBase, kNumMtts, kNumQps);
    }
    void put_mpt(uint32_t index, const hw::mpt_entry& e) {
        mem.write(kMptBase + index * sizeof e, &e, sizeof e);
    }
    hw::mpt_entry get_mpt(uint32_t index) {
        hw::mpt_entry e;
        mem.read(kMptBase + index * sizeof e, &e, sizeof e);
        return e;
    }
    void put_mtt(uint64_t index, uint64_t value) { mem.write(kMttBase + index * 8, &value, 8); }
    /// MR at `index`: key byte 0x42, PD 5, 3 pages from kVa (4 MTT entries from mtt_base 8).
    hw::mpt_entry region(uint32_t index = 1, uint64_t mtt_base = 8,
                         uint32_t access = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_WRITE) {
        hw::mpt_entry e{};
        e.key = hw::make_key(index, 0x42);
        e.pd = 5;
        e.access = access;
        e.state = hw::MPT_STATE_VALID;
        e.type = hw::MPT_TYPE_MR;
        e.log_page_size = 12;
        e.start_va = kVa;
        e.page_offset = uint32_t(kVa % 4096);
        e.length = 3 * 4096;
        e.mtt_base = mtt_base;
        e.mtt_count = 4;
        e.mtt_reserved = 4;
        // Pages 1 and 2 are physically contiguous, 0 and 3 are not.
        put_mtt(mtt_base + 0, 0x5000000 | hw::MTT_PRESENT);
        put_mtt(mtt_base + 1, 0x5003000 | hw::MTT_PRESENT);
        put_mtt(mtt_base + 2, 0x5004000 | hw::MTT_PRESENT);
        put_mtt(mtt_base + 3, 0x5100000 | hw::MTT_PRESENT);
        put_mpt(index, e);
        return e;
    }
    /// A window entry at `index` of `type`, PD 5, key byte 0x10, Free.
    hw::mpt_entry window(uint32_t index, uint8_t type) {
        hw::mpt_entry w{};
        w.key = hw::make_key(index, 0x10);
        w.pd = 5;
        w.type = type;
        w.state = hw::MPT_STATE_FREE;
        put_mpt(index, w);
        return w;
    }
    xlate_status xl(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                    unsigned max_segs = 8, uint32_t qpn = 1, uint8_t mm = 0) {
        sc_time d = sc_core::SC_ZERO_TIME;
        nsegs = 0;
        return tu.translate(key, xlate_owner{pd, qpn, mm}, va, len, access, segs, max_segs, nsegs, d);
    }
    xlate_status bind(uint32_t mw_key, uint32_t new_key, uint32_t mr_key, uint64_t addr, uint32_t len,
                      uint32_t access, bool verb, uint32_t pd = 5, uint32_t qpn = 1) {
        hw::wqe_bind_seg b{};
        b.mw_key = mw_key;
        b.new_key = new_key;
        b.mr_lkey = mr_key;
        b.access = access;
        b.addr = addr;
        b.length = len;
        b.bind_flags = verb ? uint32_t(hw::BIND_FROM_VERB) : 0u;
        sc_time d = sc_core::SC_ZERO_TIME;
        return tu.bind_mw(b, xlate_owner{pd, qpn, 0}, d);
    }
    xlate_status inval(uint32_t key, uint32_t pd = 5, uint32_t qpn = 1, bool remote = false) {
        sc_time d = sc_core::SC_ZERO_TIME;
        return tu.invalidate(key, xlate_owner{pd, qpn, 0}, remote, d);
    }
    phys_seg segs[8];
    unsigned nsegs = 0;
};

}  // namespace

SIM_TEST(HcaTranslation, page_crossing_range_splits_into_physical_segments) {
    xlate_bench b;
    const auto e = b.region();
    simulate([&] {
        ASSERT_EQ(b.xl(e.key, 5, kVa, 3 * 4096, hw::ACCESS_LOCAL_WRITE), xlate_status::ok);
        ASSERT_EQ(b.nsegs, 3u);
        EXPECT_EQ(b.segs[0].pa, 0x5000100u);
        EXPECT_EQ(b.segs[0].len, 0xF00u);
        EXPECT_EQ(b.segs[1].pa, 0x5003000u);  // pages 1 and 2 merge
        EXPECT_EQ(b.segs[1].len, 0x2000u);
        EXPECT_EQ(b.segs[2].pa, 0x5100000u);
        EXPECT_EQ(b.segs[2].len, 0x100u);
        // A range inside one page.
        ASSERT_EQ(b.xl(e.key, 5, kVa + 0x1000, 0x80, 0), xlate_status::ok);
        ASSERT_EQ(b.nsegs, 1u);
        EXPECT_EQ(b.segs[0].pa, 0x5003100u);
        EXPECT_EQ(b.segs[0].len, 0x80u);
        EXPECT_EQ(b.tu.faults.value(), 0u);
        EXPECT_EQ(b.tu.lookups.value(), 2u);
    });
}

SIM_TEST(HcaTranslation, C10_54_1_1_zero_length_is_not_checked) {
    xlate_bench b;
    b.region();
    simulate([&] {
        EXPECT_EQ(b.xl(0xDEADBEEF, 77, 0, 0, hw::ACCESS_LOCAL_WRITE), xlate_status::ok)
            << "bogus key, length 0";
        EXPECT_EQ(b.nsegs, 0u);
        EXPECT_EQ(b.tu.lookups.value(), 0u);
        EXPECT_EQ(b.tu.faults.value(), 0u);
    });
}

SIM_TEST(HcaTranslation, bad_key_bad_pd_access_and_bounds_are_refused_and_counted) {
    xlate_bench b;
    const auto e = b.region();
    hw::mpt_entry invalid = e;
    invalid.key = hw::make_key(2, 0x42);
    invalid.state = hw::MPT_STATE_INVALID;
    b.put_mpt(2, invalid);
    simulate([&] {
        EXPECT_EQ(b.xl(hw::make_key(1, 0x43), 5, kVa, 16, 0), xlate_status::bad_key) << "key byte differs";
        EXPECT_EQ(b.xl(hw::make_key(2, 0x42), 5, kVa, 16, 0), xlate_status::bad_key) << "entry not valid";
        EXPECT_EQ(b.xl(hw::make_key(kNumMpts + 3, 0x42), 5, kVa, 16, 0), xlate_status::bad_key)
            << "index beyond table";
        EXPECT_EQ(b.xl(e.key, 6, kVa, 16, 0), xlate_status::bad_pd);
        EXPECT_EQ(b.xl(e.key, 5, kVa, 16, hw::ACCESS_REMOTE_READ), xlate_status::no_access);
        EXPECT_EQ(b.xl(e.key, 5, kVa, 16, hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC),
                  xlate_status::no_access);
        EXPECT_EQ(b.xl(e.key, 5, kVa - 1, 16, 0), xlate_status::out_of_bounds) << "starts before the region";
        EXPECT_EQ(b.xl(e.key, 5, kVa + 3 * 4096 - 15, 16, 0), xlate_status::out_of_bounds)
            << "ends one byte past";
        EXPECT_EQ(b.xl(e.key, 5, kVa, 3 * 4096 + 1, 0), xlate_status::out_of_bounds)
            << "longer than the region";
        EXPECT_EQ(b.xl(e.key, 5, ~uint64_t(0) - 4, 16, 0), xlate_status::out_of_bounds) << "wrapping range";
        EXPECT_EQ(b.tu.faults.value(), 10u);
        // The last byte of the region is inside.
        EXPECT_EQ(b.xl(e.key, 5, kVa + 3 * 4096 - 16, 16, hw::ACCESS_REMOTE_WRITE), xlate_status::ok);
        EXPECT_EQ(b.tu.faults.value(), 10u);
        EXPECT_EQ(b.tu.lookups.value(), 11u);
    });
}

SIM_TEST(HcaTranslation, missing_mtt_page_and_segment_limit) {
    xlate_bench b;
    const auto e = b.region();
    b.put_mtt(8 + 2, 0);  // page 2 not present
    simulate([&] {
        EXPECT_EQ(b.xl(e.key, 5, kVa, 0xF00, 0), xlate_status::ok);
        EXPECT_EQ(b.xl(e.key, 5, kVa + 0x1F00, 0x200, 0), xlate_status::bad_mtt);
        // Three segments needed, two allowed.
        const hw::mtt_entry page2{0x5004000 | hw::MTT_PRESENT};
        sc_time d;
        b.tu.write_mtt(8 + 2, &page2, 1, d);
        EXPECT_EQ(b.xl(e.key, 5, kVa, 3 * 4096, 0, 2), xlate_status::too_many_segs);
        EXPECT_EQ(b.xl(e.key, 5, kVa, 3 * 4096, 0, 3), xlate_status::ok);
        EXPECT_EQ(b.nsegs, 3u);
    });
}

SIM_TEST(HcaTranslation, block_list_region_of_unaligned_blocks) {
    xlate_bench b;
    hw::mpt_entry e{};
    e.key = hw::make_key(3, 7);
    e.pd = 1;
    e.access = hw::ACCESS_LOCAL_WRITE;
    e.state = hw::MPT_STATE_VALID;
    e.flags = hw::MPT_PHYS | hw::MPT_BLOCK_LIST;
    e.block_size = 1000;  // any size, any alignment
    e.start_va = 0x10000;
    e.page_offset = 10;
    e.length = 1500;
    e.mtt_base = 20;
    e.mtt_count = 2;
    e.mtt_reserved = 2;
    b.put_mtt(20, 0x40000123 | hw::MTT_PRESENT);
    b.put_mtt(21, 0x50000001 | hw::MTT_PRESENT);
    b.put_mpt(3, e);
    simulate([&] {
        ASSERT_EQ(b.xl(e.key, 1, 0x10000, 1500, hw::ACCESS_LOCAL_WRITE), xlate_status::ok);
        ASSERT_EQ(b.nsegs, 2u);
        EXPECT_EQ(b.segs[0].pa, 0x40000123u + 10);
        EXPECT_EQ(b.segs[0].len, 990u);
        EXPECT_EQ(b.segs[1].pa, 0x50000001u);
        EXPECT_EQ(b.segs[1].len, 510u);
        EXPECT_EQ(b.xl(e.key, 1, 0x10000 + 1, 1500, 0), xlate_status::out_of_bounds);
    });
}

SIM_TEST(HcaTranslation, o10_36_2_2_zero_based_region_is_addressed_from_zero) {
    xlate_bench b;
    auto e = b.region();
    e.access |= hw::ACCESS_ZERO_BASED;
    e.start_va = 0;
    b.put_mpt(1, e);
    simulate([&] {
        ASSERT_EQ(b.xl(e.key, 5, 0, 16, hw::ACCESS_REMOTE_WRITE), xlate_status::ok);
        EXPECT_EQ(b.segs[0].pa, 0x5000100u);
        ASSERT_EQ(b.xl(e.key, 5, 0x1000 - 0x100, 16, 0), xlate_status::ok);
        EXPECT_EQ(b.segs[0].pa, 0x5003000u);
        EXPECT_EQ(b.xl(e.key, 5, kVa, 16, 0), xlate_status::out_of_bounds)
            << "the virtual address is not a ZBVA offset";
    });
}

SIM_TEST(HcaTranslation, o10_37_2_11_reserved_lkey_needs_the_qp_flag_and_is_local_only) {
    xlate_bench b;
    simulate([&] {
        EXPECT_EQ(b.xl(hw::RESERVED_LKEY, 5, 0x123456, 64, hw::ACCESS_LOCAL_WRITE),
                  xlate_status::not_enabled);
        ASSERT_EQ(
            b.xl(hw::RESERVED_LKEY, 5, 0x123456, 64, hw::ACCESS_LOCAL_WRITE, 8, 1, hw::QP_MM_RESERVED_LKEY),
            xlate_status::ok);
        ASSERT_EQ(b.nsegs, 1u);
        EXPECT_EQ(b.segs[0].pa, 0x123456u);
        EXPECT_EQ(
            b.xl(hw::RESERVED_LKEY, 5, 0x123456, 64, hw::ACCESS_REMOTE_WRITE, 8, 1, hw::QP_MM_RESERVED_LKEY),
            xlate_status::bad_key)
            << "never an R_Key";
    });
}

SIM_TEST(HcaTranslation, caches_count_hits_misses_and_stay_coherent_with_writes) {
    xlate_bench b;
    const auto e1 = b.region(1, 8);   // MTT 8..11: one 8-entry line
    const auto e2 = b.region(4, 14);  // MTT 14..17: two lines (8..15 shared with region 1, 16..23)
    simulate([&] {
        ASSERT_EQ(b.xl(e1.key, 5, kVa, 3 * 4096, 0), xlate_status::ok);
        EXPECT_EQ(b.tu.mpt_misses.value(), 1u);
        EXPECT_EQ(b.tu.mtt_misses.value(), 1u);
        ASSERT_EQ(b.xl(e1.key, 5, kVa, 3 * 4096, 0), xlate_status::ok);
        EXPECT_EQ(b.tu.mpt_misses.value(), 1u) << "second lookup hits";
        EXPECT_EQ(b.tu.mpt_hits.value(), 1u);
        EXPECT_EQ(b.tu.mtt_misses.value(), 1u);
        ASSERT_EQ(b.xl(e2.key, 5, kVa, 3 * 4096, 0), xlate_status::ok);
        EXPECT_EQ(b.tu.mpt_misses.value(), 2u);
        EXPECT_EQ(b.tu.mtt_misses.value(), 2u) << "line 8..15 cached, line 16..23 missed";
        // Entries written through the unit are seen at once (write-through cache).
        hw::mpt_entry changed = e1;
        changed.pd = 9;
        sc_time d;
        b.tu.write_mpt(1, changed, d);
        EXPECT_EQ(b.xl(e1.key, 5, kVa, 16, 0), xlate_status::bad_pd);
        EXPECT_EQ(b.xl(e1.key, 9, kVa, 16, 0), xlate_status::ok);
        EXPECT_EQ(b.get_mpt(1).pd, 9u) << "written to host memory too";
        // A rewritten MTT line is fetched again.
        const hw::mtt_entry page0{0x6000000 | hw::MTT_PRESENT};
        b.tu.write_mtt(8, &page0, 1, d);
        const uint64_t before = b.tu.mtt_misses.value();
        ASSERT_EQ(b.xl(e1.key, 9, kVa, 16, 0), xlate_status::ok);
        EXPECT_EQ(b.tu.mtt_misses.value(), before + 1);
        EXPECT_EQ(b.segs[0].pa, 0x6000100u);
    });
}

TEST(HcaTranslation, lru_keeps_the_recently_used_entry_of_a_set) {
    // 2 entries, 2 ways: one set. Touch 1, 4, 1, then 5 evicts 4 (least recently used).
    onchip_cache<int> c(2, 2);
    c.insert(1) = 10;
    c.insert(4) = 40;
    ASSERT_NE(c.find(1), nullptr);
    c.insert(5) = 50;
    EXPECT_NE(c.find(1), nullptr);
    EXPECT_EQ(c.find(4), nullptr);
    EXPECT_EQ(*c.find(5), 50);
    EXPECT_THROW(onchip_cache<int>(6, 4), std::invalid_argument);
}

TEST(FabricPacketPool, packet_buffers_come_from_aligned_slabs_distinct_and_reused) {
    using hcasim::packet;
    using pb = hcasim::packet_pool;
    // More than one slab's worth: every buffer distinct, 64-byte aligned, whole and writable.
    std::vector<packet*> taken;
    for (int i = 0; i < 1200; ++i) {
        packet* p = pb::take();
        ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
        p->len = uint32_t(i);
        std::memset(p->bytes, i & 0xFF, sizeof p->bytes);
        taken.push_back(p);
    }
    std::vector<packet*> sorted = taken;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 1; i < sorted.size(); ++i)
        ASSERT_GE(reinterpret_cast<uintptr_t>(sorted[i]) - reinterpret_cast<uintptr_t>(sorted[i - 1]),
                  sizeof(packet));
    for (int i = 0; i < 1200; ++i) {
        ASSERT_EQ(taken[i]->len, uint32_t(i));
        ASSERT_EQ(taken[i]->bytes[0], uint8_t(i));
        ASSERT_EQ(taken[i]->bytes[sizeof taken[i]->bytes - 1], uint8_t(i));
    }
    // A buffer given back is the next one taken (its bytes are still in the CPU's cache).
    pb::give(taken[700]);
    EXPECT_EQ(pb::take(), taken[700]);
    for (packet* p : taken) pb::give(p);
}

TEST(CoreSlab, slabs_are_zero_filled_and_huge_ones_2_mib_aligned) {
    for (bool huge : {true, false}) {
        uint8_t* s = hcasim::map_slab(huge);
        if (huge) {
            EXPECT_EQ(reinterpret_cast<uintptr_t>(s) % hcasim::SLAB_BYTES, 0u);
        }
        EXPECT_EQ(s[0], 0);
        EXPECT_EQ(s[hcasim::SLAB_BYTES - 1], 0);
        EXPECT_EQ(std::count(s, s + hcasim::SLAB_BYTES, 0), std::ptrdiff_t(hcasim::SLAB_BYTES));
        s[0] = 1;
        s[hcasim::SLAB_BYTES - 1] = 2;
        EXPECT_EQ(s[0] + s[hcasim::SLAB_BYTES - 1], 3);
        hcasim::unmap_slab(s);
    }
}

TEST(HcaOnchipCache, fifo_evicts_the_oldest_fill_whatever_was_used) {
    onchip_cache<int> c(2, 2, replacement::fifo);
    c.insert(1) = 10;
    c.insert(4) = 40;
    ASSERT_NE(c.find(1), nullptr);  // a hit does not renew 1 under FIFO
    bool evicted = false;
    c.insert(5, &evicted) = 50;
    EXPECT_TRUE(evicted);
    EXPECT_EQ(c.find(1), nullptr);
    EXPECT_NE(c.find(4), nullptr);
    EXPECT_EQ(*c.find(5), 50);
}

TEST(HcaOnchipCache, lru_order_survives_the_use_clock_wrapping) {
    // Two caches see the same accesses; one's 32-bit use clock wraps in the middle (its
    // stamps are renumbered). They keep and evict the same tags.
    onchip_cache<int> a(16, 4), b(16, 4);
    b.advance_clock_for_test(~uint32_t(0) - 20);
    uint64_t x = 1;
    std::string ka, kb;
    for (int i = 0; i < 400; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t tag = (x >> 33) % 40;
        for (onchip_cache<int>* c : {&a, &b}) {
            if (int* l = c->find(tag))
                EXPECT_EQ(*l, int(tag));
            else
                c->insert(tag) = int(tag);
        }
        if (i % 10 == 9)
            for (uint64_t t = 0; t < 40; ++t) {
                ka += a.contains(t) ? '1' : '0';
                kb += b.contains(t) ? '1' : '0';
            }
    }
    EXPECT_EQ(ka, kb);
    EXPECT_NE(ka.find('1'), std::string::npos);
}

TEST(HcaOnchipCache, invalidated_tags_miss_and_their_way_is_refilled_first) {
    onchip_cache<no_line> c(4, 4);
    for (uint64_t t : {3, 7, 11, 15}) c.insert(t);
    c.invalidate(7);
    EXPECT_FALSE(c.contains(7));
    EXPECT_EQ(c.find(7), nullptr);
    ASSERT_NE(c.find(3), nullptr);
    bool evicted = true;
    c.insert(19, &evicted);
    EXPECT_FALSE(evicted) << "the invalidated way is free";
    for (uint64_t t : {3, 11, 15, 19}) EXPECT_TRUE(c.contains(t)) << t;
    EXPECT_EQ(c.find(~uint64_t(0)), nullptr);
    EXPECT_THROW(c.insert(uint64_t(1) << 32), std::out_of_range);
}

TEST(HcaOnchipCache, random_replacement_stays_in_the_set_and_repeats_run_to_run) {
    // 8 entries in 4 ways: 2 sets. Tags 0, 2, 4, ... share set 0; set 1 is never disturbed.
    auto trace = [] {
        onchip_cache<int> c(8, 4, replacement::random);
        c.insert(1) = 1;
        std::string kept;
        for (int t = 0; t < 40; t += 2) {
            bool evicted = false;
            c.insert(uint64_t(t), &evicted) = t;
            EXPECT_EQ(evicted, t >= 8) << "a set fills its free ways first";
        }
        for (int t = 0; t < 40; t += 2) kept += c.contains(uint64_t(t)) ? '1' : '0';
        EXPECT_TRUE(c.contains(1));
        return kept;
    };
    const std::string a = trace(), b = trace();
    EXPECT_EQ(a, b) << "the same sequence gives the same victims";
    EXPECT_EQ(std::count(a.begin(), a.end(), '1'), 4) << a;
    EXPECT_THROW(replacement_of("mru"), std::invalid_argument);
    EXPECT_EQ(replacement_of("fifo"), replacement::fifo);
}

SIM_TEST(HcaTranslation, miss_keeps_the_unit_busy_in_order) {
    xlate_bench b;
    const auto e1 = b.region(1, 8);
    const auto e2 = b.region(4, 16);
    simulate([&] {
        sc_time d1, d2, d3;
        phys_seg s[8];
        unsigned n;
        ASSERT_EQ(b.tu.translate(e1.key, xlate_owner{5, 1, 0}, kVa, 16, 0, s, 8, n, d1), xlate_status::ok);
        // One clock later, while the first lookup's misses are outstanding: the second waits for them.
        wait(kClock);
        ASSERT_EQ(b.tu.translate(e2.key, xlate_owner{5, 1, 0}, kVa, 16, 0, s, 8, n, d2), xlate_status::ok);
        EXPECT_GE(kClock + d2, d1 + kClock * 4.0);
        wait(d2);
        ASSERT_EQ(b.tu.translate(e1.key, xlate_owner{5, 1, 0}, kVa, 16, 0, s, 8, n, d3), xlate_status::ok);
        EXPECT_EQ(d3, kClock * 4.0) << "a hit costs lookup_cycles";
    });
}

SIM_TEST(HcaTranslation, lookups_at_one_instant_wait_only_for_earlier_instants_in_either_call_order) {
    // docs/fabric.md "Same-time events": the kernel's order of one instant's callers decides nothing.
    xlate_bench b;
    const auto e1 = b.region(1, 8);
    const auto e2 = b.region(4, 16);
    simulate([&] {
        phys_seg s[8];
        unsigned n;
        auto lookup = [&](const hw::mpt_entry& e) {
            sc_time d;
            EXPECT_EQ(b.tu.translate(e.key, xlate_owner{5, 1, 0}, kVa, 16, 0, s, 8, n, d), xlate_status::ok);
            return d;
        };
        lookup(e1);
        lookup(e2);  // both in the caches from now on
        wait(10, sc_core::SC_US);
        const sc_time a1 = lookup(e1), a2 = lookup(e2);
        wait(10, sc_core::SC_US);
        const sc_time b2 = lookup(e2), b1 = lookup(e1);
        for (const sc_time& d : {a1, a2, b1, b2}) EXPECT_EQ(d, kClock * 4.0) << "each as if it came first";
        // The unit was busy for both: a lookup one clock later starts after their 8 clocks.
        wait(kClock);
        EXPECT_EQ(lookup(e1), kClock * 11.0);
    });
}

// ---- memory windows, invalidate, fast register (unit level; end to end in e2e_memory_test)

SIM_TEST(HcaTranslation, C10_66_2_2_type1_bind_gives_access_under_the_new_key_only) {
    xlate_bench b;
    const auto mr = b.region(1, 8, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    const auto w = b.window(2, hw::MPT_TYPE_MW1);
    simulate([&] {
        const uint32_t k1 = hw::make_key(2, 0x11), k2 = hw::make_key(2, 0x12);
        ASSERT_EQ(b.bind(w.key, k1, mr.key, kVa + 0x10, 0x100, hw::ACCESS_REMOTE_WRITE, true),
                  xlate_status::ok);
        EXPECT_EQ(b.get_mpt(1).bound_mws, 1u);
        ASSERT_EQ(b.xl(k1, 5, kVa + 0x10, 0x100, hw::ACCESS_REMOTE_WRITE), xlate_status::ok);
        EXPECT_EQ(b.segs[0].pa, 0x5000110u);
        EXPECT_EQ(b.xl(k1, 5, kVa + 0x10, 0x100, hw::ACCESS_REMOTE_READ), xlate_status::no_access)
            << "C10-77";
        EXPECT_EQ(b.xl(k1, 5, kVa + 0x0F, 0x10, hw::ACCESS_REMOTE_WRITE), xlate_status::out_of_bounds)
            << "C10-61";
        EXPECT_EQ(b.xl(k1, 5, kVa + 0x101, 0x10, hw::ACCESS_REMOTE_WRITE), xlate_status::out_of_bounds);
        EXPECT_EQ(b.xl(k1, 6, kVa + 0x10, 4, hw::ACCESS_REMOTE_WRITE), xlate_status::bad_pd) << "C10-76.2.1";
        EXPECT_EQ(b.xl(k1, 5, kVa + 0x10, 4, 0), xlate_status::bad_key) << "a window key is not an L_Key";
        // Rebind under a new key: the old key fails (C10-66.2.2, C10-68).
        ASSERT_EQ(b.bind(k1, k2, mr.key, kVa, 0x20, hw::ACCESS_REMOTE_READ, true), xlate_status::ok);
        EXPECT_EQ(b.xl(k1, 5, kVa, 4, hw::ACCESS_REMOTE_READ), xlate_status::bad_key);
        EXPECT_EQ(b.xl(k2, 5, kVa, 4, hw::ACCESS_REMOTE_READ), xlate_status::ok);
        EXPECT_EQ(b.get_mpt(1).bound_mws, 1u) << "still one window on the region";
        // Zero-length bind revokes (C10-66.2.4).
        ASSERT_EQ(b.bind(k2, hw::make_key(2, 0x13), mr.key, 0, 0, 0, true), xlate_status::ok);
        EXPECT_EQ(b.xl(hw::make_key(2, 0x13), 5, kVa, 4, hw::ACCESS_REMOTE_READ), xlate_status::bad_state);
        EXPECT_EQ(b.get_mpt(1).bound_mws, 0u);
    });
}

SIM_TEST(HcaTranslation, C10_72_to_75_bind_time_checks) {
    xlate_bench b;
    const auto mr = b.region(1, 8, hw::ACCESS_MW_BIND);  // no local write
    const auto nobind = b.region(3, 8, hw::ACCESS_LOCAL_WRITE);
    const auto w = b.window(2, hw::MPT_TYPE_MW1);
    simulate([&] {
        const uint32_t k = hw::make_key(2, 0x11);
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 16, hw::ACCESS_REMOTE_READ, true, 6), xlate_status::bad_pd)
            << "C10-72";
        EXPECT_EQ(b.bind(w.key, k, nobind.key, kVa, 16, hw::ACCESS_REMOTE_READ, true),
                  xlate_status::no_access)
            << "C10-73";
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 16, hw::ACCESS_REMOTE_WRITE, true), xlate_status::no_access)
            << "C10-74";
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 16, hw::ACCESS_REMOTE_ATOMIC, true), xlate_status::no_access)
            << "C10-74";
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa - 1, 16, hw::ACCESS_REMOTE_READ, true),
                  xlate_status::out_of_bounds)
            << "C10-75";
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa + 3 * 4096 - 15, 16, hw::ACCESS_REMOTE_READ, true),
                  xlate_status::out_of_bounds);
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 16, hw::ACCESS_REMOTE_READ, false), xlate_status::bad_type)
            << "o10-37.2.34: a type 1 window is not bound by a bind WR";
        EXPECT_EQ(b.bind(w.key, hw::make_key(3, 0x99), mr.key, kVa, 16, hw::ACCESS_REMOTE_READ, true),
                  xlate_status::bad_key)
            << "the new key names another MPT index";
        EXPECT_EQ(b.bind(w.key, k, hw::RESERVED_LKEY, 0, 16, hw::ACCESS_REMOTE_READ, true),
                  xlate_status::bad_key)
            << "o10-37.2.8";
        EXPECT_EQ(b.tu.mm_op_errors.value(), 9u);
        EXPECT_EQ(b.get_mpt(2).state, hw::MPT_STATE_FREE) << "nothing bound";
        ASSERT_EQ(b.bind(w.key, k, mr.key, kVa, 16, hw::ACCESS_REMOTE_READ, true), xlate_status::ok);
    });
}

SIM_TEST(HcaTranslation, o10_37_2_42_type2a_window_is_bound_to_its_qp) {
    xlate_bench b;
    const auto mr = b.region(1, 8, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    const auto w = b.window(2, hw::MPT_TYPE_MW2A);
    simulate([&] {
        const uint32_t k = hw::make_key(2, 0xA5);  // the consumer's key byte (o10-37.2.33)
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 64, hw::ACCESS_REMOTE_WRITE, true, 5, 3),
                  xlate_status::bad_type)
            << "o10-37.2.35";
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 0, 0, false, 5, 3), xlate_status::bad_type) << "o10-37.2.40";
        ASSERT_EQ(b.bind(w.key, k, mr.key, kVa, 64, hw::ACCESS_REMOTE_WRITE, false, 5, 3), xlate_status::ok);
        EXPECT_EQ(b.tu.windows_bound_to(3), 1u);
        EXPECT_EQ(b.bind(k, hw::make_key(2, 0xA6), mr.key, kVa, 64, hw::ACCESS_REMOTE_WRITE, false, 5, 3),
                  xlate_status::bad_state)
            << "a type 2 bind needs a Free window";
        EXPECT_EQ(b.xl(k, 5, kVa, 8, hw::ACCESS_REMOTE_WRITE, 8, 3), xlate_status::ok);
        EXPECT_EQ(b.xl(k, 6, kVa, 8, hw::ACCESS_REMOTE_WRITE, 8, 3), xlate_status::ok) << "2A: no PD check";
        EXPECT_EQ(b.xl(k, 5, kVa, 8, hw::ACCESS_REMOTE_WRITE, 8, 4), xlate_status::bad_qpn);
        EXPECT_EQ(b.inval(k, 5, 4), xlate_status::bad_qpn) << "invalidate needs the QPN (o10-37.2.29)";
        ASSERT_EQ(b.inval(k, 7, 3), xlate_status::ok);
        EXPECT_EQ(b.tu.windows_bound_to(3), 0u);
        EXPECT_EQ(b.xl(k, 5, kVa, 8, hw::ACCESS_REMOTE_WRITE, 8, 3), xlate_status::bad_state);
        EXPECT_EQ(b.inval(k, 6, 3), xlate_status::bad_pd) << "Free window: PD must match";
        EXPECT_EQ(b.inval(k, 5, 9), xlate_status::ok) << "Free window, PD matches: no-op";
    });
}

SIM_TEST(HcaTranslation, o10_37_2_43_type2b_window_checks_qpn_and_pd) {
    xlate_bench b;
    const auto mr = b.region(1, 8, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    const auto w = b.window(2, hw::MPT_TYPE_MW2B);
    simulate([&] {
        const uint32_t k = hw::make_key(2, 0x5A);
        EXPECT_EQ(b.bind(w.key, k, mr.key, kVa, 64, hw::ACCESS_REMOTE_READ, false, 6, 3),
                  xlate_status::bad_pd);
        ASSERT_EQ(b.bind(w.key, k, mr.key, kVa, 64, hw::ACCESS_REMOTE_READ, false, 5, 3), xlate_status::ok);
        EXPECT_EQ(b.tu.windows_bound_to(3), 0u) << "2B windows do not pin the QP";
        EXPECT_EQ(b.xl(k, 5, kVa, 8, hw::ACCESS_REMOTE_READ, 8, 3), xlate_status::ok);
        EXPECT_EQ(b.xl(k, 6, kVa, 8, hw::ACCESS_REMOTE_READ, 8, 3), xlate_status::bad_pd);
        EXPECT_EQ(b.xl(k, 5, kVa, 8, hw::ACCESS_REMOTE_READ, 8, 4), xlate_status::bad_qpn);
        EXPECT_EQ(b.inval(k, 6, 3), xlate_status::bad_pd);
        EXPECT_EQ(b.inval(hw::make_key(2, 0x5B), 5, 3), xlate_status::bad_key);
        ASSERT_EQ(b.inval(k, 5, 3, true), xlate_status::ok);
        EXPECT_EQ(b.get_mpt(1).bound_mws, 0u);
    });
}

SIM_TEST(HcaTranslation, o10_37_2_13_invalidate_rules_for_regions) {
    xlate_bench b;
    const auto plain = b.region(1, 8, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    auto fr = b.region(3, 8, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    fr.flags = hw::MPT_FAST_REG;
    b.put_mpt(3, fr);
    auto shared = b.region(4, 8);
    shared.flags = hw::MPT_SHARED;
    b.put_mpt(4, shared);
    const auto w1 = b.window(2, hw::MPT_TYPE_MW1);
    simulate([&] {
        EXPECT_EQ(b.inval(plain.key), xlate_status::bad_type) << "a Register MR region cannot be invalidated";
        EXPECT_EQ(b.inval(shared.key), xlate_status::shared) << "o10-37.2.15";
        EXPECT_EQ(b.inval(w1.key), xlate_status::bad_type) << "o10-37.2.26: not a type 1 window";
        EXPECT_EQ(b.inval(hw::RESERVED_LKEY), xlate_status::bad_key) << "o10-37.2.8";
        EXPECT_EQ(b.inval(fr.key, 6), xlate_status::bad_pd);
        ASSERT_EQ(b.bind(w1.key, hw::make_key(2, 0x11), fr.key, kVa, 16, hw::ACCESS_REMOTE_READ, true),
                  xlate_status::ok);
        EXPECT_EQ(b.inval(fr.key), xlate_status::busy) << "o10-37.2.17: windows bound";
        ASSERT_EQ(b.bind(hw::make_key(2, 0x11), hw::make_key(2, 0x12), fr.key, 0, 0, 0, true),
                  xlate_status::ok);
        ASSERT_EQ(b.inval(fr.key), xlate_status::ok);
        EXPECT_EQ(b.get_mpt(3).state, hw::MPT_STATE_FREE);
        EXPECT_EQ(b.xl(fr.key, 5, kVa, 16, 0), xlate_status::bad_state) << "o10-37.2.18";
    });
}

SIM_TEST(HcaTranslation, o10_37_2_5_fast_register_checks_and_result) {
    xlate_bench b;
    hw::mpt_entry e{};
    e.key = hw::make_key(3, 0);
    e.pd = 5;
    e.state = hw::MPT_STATE_FREE;
    e.flags = hw::MPT_FAST_REG;
    e.log_page_size = 12;
    e.mtt_base = 32;
    e.mtt_reserved = 2;
    b.put_mpt(3, e);
    const uint64_t pages[3] = {0x7000000, 0x7200000, 0x7400000};
    b.mem.write(kPageList, pages, sizeof pages);
    hw::wqe_fast_reg_seg f{};
    f.lkey = hw::make_key(3, 0x77);
    f.access = hw::ACCESS_LOCAL_WRITE | hw::ACCESS_REMOTE_READ;
    f.iova = 0x1000000010ull;
    f.length = 8000;
    f.page_list_pa = kPageList;
    f.page_count = 2;
    f.page_offset = 0x10;
    f.log_page_size = 12;
    auto fast_reg = [&](const hw::wqe_fast_reg_seg& s, uint32_t pd, uint8_t mm) {
        sc_time d;
        return b.tu.fast_register(s, xlate_owner{pd, 1, mm}, d);
    };
    simulate([&] {
        EXPECT_EQ(fast_reg(f, 5, 0), xlate_status::not_enabled) << "QP without fast register";
        EXPECT_EQ(fast_reg(f, 6, hw::QP_MM_FAST_REG), xlate_status::bad_pd);
        auto three = f;
        three.page_count = 3;
        EXPECT_EQ(fast_reg(three, 5, hw::QP_MM_FAST_REG), xlate_status::bad_page_list)
            << "more than reserved";
        auto longer = f;
        longer.length = 8192;
        EXPECT_EQ(fast_reg(longer, 5, hw::QP_MM_FAST_REG), xlate_status::bad_page_list)
            << "does not fit the pages";
        auto rw = f;
        rw.access = hw::ACCESS_REMOTE_WRITE;
        EXPECT_EQ(fast_reg(rw, 5, hw::QP_MM_FAST_REG), xlate_status::no_access) << "C10-48";
        ASSERT_EQ(fast_reg(f, 5, hw::QP_MM_FAST_REG), xlate_status::ok);
        EXPECT_EQ(b.get_mpt(3).state, hw::MPT_STATE_VALID);
        EXPECT_EQ(b.get_mpt(3).key, f.lkey);
        ASSERT_EQ(b.xl(f.lkey, 5, f.iova + 4000, 200, hw::ACCESS_REMOTE_READ), xlate_status::ok);
        ASSERT_EQ(b.nsegs, 2u);
        EXPECT_EQ(b.segs[0].pa, 0x7000000u + 0x10 + 4000);
        EXPECT_EQ(b.segs[1].pa, 0x7200000u);
        EXPECT_EQ(fast_reg(f, 5, hw::QP_MM_FAST_REG), xlate_status::bad_state) << "the L_Key must be Free";
        EXPECT_EQ(b.xl(hw::make_key(3, 0), 5, f.iova, 8, 0), xlate_status::bad_key) << "old key byte";
    });
}

SIM_TEST(HcaTranslation, C10_69_destroying_a_bound_window_unbinds_it_and_regions_with_windows_stay) {
    xlate_bench b;
    const auto mr = b.region(1, 8, hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND);
    const auto w = b.window(2, hw::MPT_TYPE_MW1);
    simulate([&] {
        const uint32_t k = hw::make_key(2, 0x11);
        ASSERT_EQ(b.bind(w.key, k, mr.key, kVa, 16, hw::ACCESS_REMOTE_READ, true), xlate_status::ok);
        sc_time d;
        EXPECT_EQ(b.tu.destroy(1, d), xlate_status::busy) << "a region with a window bound";
        EXPECT_EQ(b.xl(mr.key, 5, kVa, 16, 0), xlate_status::ok);
        ASSERT_EQ(b.tu.destroy(2, d), xlate_status::ok);
        EXPECT_EQ(b.xl(k, 5, kVa, 16, hw::ACCESS_REMOTE_READ), xlate_status::bad_key) << "C10-70";
        EXPECT_EQ(b.get_mpt(1).bound_mws, 0u);
        ASSERT_EQ(b.tu.destroy(1, d), xlate_status::ok);
        EXPECT_EQ(b.xl(mr.key, 5, kVa, 16, 0), xlate_status::bad_key) << "C10-60";
    });
}

// ------------------------------------------------------------------ pkey_checker

TEST(HcaPkey, match_rule_iba_10_9_3) {
    EXPECT_TRUE(pkey_checker::match(0xFFFF, 0x7FFF)) << "full vs limited member";
    EXPECT_TRUE(pkey_checker::match(0x7FFF, 0xFFFF));
    EXPECT_TRUE(pkey_checker::match(0xFFFF, 0xFFFF));
    EXPECT_FALSE(pkey_checker::match(0x7FFF, 0x7FFF)) << "two limited members do not communicate";
    EXPECT_TRUE(pkey_checker::match(0x8001, 0x0001));
    EXPECT_TRUE(pkey_checker::match(0x0001, 0x8001));
    EXPECT_FALSE(pkey_checker::match(0x0001, 0x0001));
    EXPECT_FALSE(pkey_checker::match(0x8001, 0x8002)) << "different partitions";
    EXPECT_FALSE(pkey_checker::match(0x8000, 0x8000)) << "invalid P_Key (low 15 bits zero)";
    EXPECT_FALSE(pkey_checker::match(0x0000, 0x8000));
}

namespace {
struct counting_sink : rx_sink {
    unsigned n = 0;
    uint32_t last_qp = 0;
    uint16_t last_pkey_index = 0xDEAD;
    void receive(const rx_packet& p) override {
        ++n;
        last_qp = p.h.b.dest_qp;
        last_pkey_index = p.pkey_index;
    }
};
rx_packet rx_pkt(uint32_t qpn, uint16_t pkey) {
    rx_packet p{};
    p.h.b.dest_qp = qpn;
    p.h.b.pkey = pkey;
    return p;
}
}  // namespace

SIM_TEST(HcaPkey, receive_drops_mismatches_and_counts_violations) {
    pkey_checker pk("pkey_checker", 16);
    counting_sink sink;
    pk.bind_receiver(sink);
    EXPECT_EQ(pk.pkey(0), 0xFFFF) << "default partition, full member";
    ASSERT_TRUE(pk.set_pkey(1, 0x7FFF));
    ASSERT_TRUE(pk.set_pkey(2, 0x0001));
    EXPECT_FALSE(pk.set_pkey(pk.table_len.get(), 0x1234)) << "index out of range";
    pk.bind_qp(3, 1);
    pk.bind_qp(4, 2);
    pk.bind_qp(5, 0);

    pk.receive(rx_pkt(3, 0x7FFF));  // limited vs limited: dropped
    EXPECT_EQ(sink.n, 0u);
    EXPECT_EQ(pk.violations.value(), 1u);
    pk.receive(rx_pkt(3, 0xFFFF));  // full vs limited: accepted
    EXPECT_EQ(sink.n, 1u);
    EXPECT_EQ(sink.last_qp, 3u);
    pk.receive(rx_pkt(4, 0x8001));  // accepted
    EXPECT_EQ(sink.n, 2u);
    pk.receive(rx_pkt(4, 0x0001));  // both limited
    pk.receive(rx_pkt(4, 0x8002));  // other partition
    EXPECT_EQ(sink.n, 2u);
    EXPECT_EQ(pk.violations.value(), 3u);
    pk.receive(rx_pkt(5, 0x7FFF));  // default full member accepts a limited member
    EXPECT_EQ(sink.n, 3u);
    pk.receive(rx_pkt(9, 0x1234));  // unbound QP passes unchecked (transport engine drops it)
    EXPECT_EQ(sink.n, 4u);
    pk.unbind_qp(3);
    pk.receive(rx_pkt(3, 0x7FFF));
    EXPECT_EQ(sink.n, 5u);
    EXPECT_EQ(pk.violations.value(), 3u);
    EXPECT_EQ(pk.checked.value(), 8u);
}

SIM_TEST(HcaPkey, C10_131_qp0_accepts_any_pkey) {
    pkey_checker pk("pkey_checker", 16);
    counting_sink sink;
    pk.bind_receiver(sink);
    ASSERT_TRUE(pk.set_pkey(0, 0x8001));  // the table holds none of the keys below
    pk.bind_qp(0, 0);                     // a binding of QPN 0 changes nothing
    const uint16_t keys[] = {0xFFFF, 0x7FFF, 0x0001, 0x8000, 0x0000, 0x1234, 0x8001};
    for (uint16_t k : keys) {
        pk.receive(rx_pkt(0, k));
        EXPECT_EQ(sink.last_qp, 0u) << std::hex << k;
        EXPECT_EQ(sink.last_pkey_index, 0u) << std::hex << k;
    }
    EXPECT_EQ(sink.n, std::size(keys)) << "every P_Key reaches the SMI QP, valid or not";
    EXPECT_EQ(pk.violations.value(), 0u);
    EXPECT_EQ(pk.pkey_violation_count(), 0u);
    // The same keys to an ordinary QP bound to entry 0 (0x8001): only 0x8001 and 0x0001 match.
    pk.bind_qp(5, 0);
    for (uint16_t k : keys) pk.receive(rx_pkt(5, k));
    EXPECT_EQ(sink.n, std::size(keys) + 2);
    EXPECT_EQ(pk.violations.value(), std::size(keys) - 2);
}

SIM_TEST(HcaPkey, multicast_packets_need_a_matching_entry_anywhere_in_the_table) {
    pkey_checker pk("pkey_checker", 16);
    counting_sink sink;
    pk.bind_receiver(sink);
    auto mc = [](uint16_t pkey) {
        rx_packet p = rx_pkt(0xFFFFFF, pkey);
        p.h.l.dlid = 0xC123;
        return p;
    };
    ASSERT_TRUE(pk.set_pkey(0, 0x0000));  // the default entry goes: the table is 2 = 0x8001, 3 = 0x0002
    ASSERT_TRUE(pk.set_pkey(2, 0x8001));
    ASSERT_TRUE(pk.set_pkey(3, 0x0002));
    const struct {
        uint16_t pkey;
        bool pass;
    } probes[] = {{0x8001, true},  {0x0001, true},  {0x8002, true}, {0x0002, false} /* limited vs limited */,
                  {0xFFFF, false}, {0x8003, false}, {0x8000, false}};
    unsigned passed = 0, dropped = 0;
    for (const auto& t : probes) {
        pk.receive(mc(t.pkey));
        (t.pass ? passed : dropped) += 1;
        EXPECT_EQ(sink.n, passed) << std::hex << t.pkey;
        EXPECT_EQ(pk.pkey_violation_count(), dropped) << std::hex << t.pkey;
    }
    // Overwriting an entry updates what matches: 0x8001 leaves, 0xFFFF arrives.
    ASSERT_TRUE(pk.set_pkey(2, 0xFFFF));
    EXPECT_FALSE(pk.any_match(0x8001));
    EXPECT_TRUE(pk.any_match(0x7FFF));
    EXPECT_TRUE(pk.any_match(0x8002));
    ASSERT_TRUE(pk.set_pkey(3, 0x0000));
    EXPECT_FALSE(pk.any_match(0x8002)) << "an invalidated entry matches nothing";
}

SIM_TEST(HcaPkey, C10_132_qp1_matches_any_valid_entry_and_records_its_index) {
    pkey_checker pk("pkey_checker", 16);
    counting_sink sink;
    pk.bind_receiver(sink);
    // Table: 0 = 0x7FFF (limited), 3 = 0x8005, 5 = 0x0009 (limited), 6 = 0x8000 (invalid),
    // 7 = 0xFFFF; the rest invalid (0).
    ASSERT_TRUE(pk.set_pkey(0, 0x7FFF));
    ASSERT_TRUE(pk.set_pkey(3, 0x8005));
    ASSERT_TRUE(pk.set_pkey(5, 0x0009));
    ASSERT_TRUE(pk.set_pkey(6, 0x8000));
    ASSERT_TRUE(pk.set_pkey(7, 0xFFFF));
    pk.bind_qp(1, 3);  // a binding of QPN 1 changes nothing either
    struct probe {
        uint16_t pkey;
        int index;  // matched entry, -1: dropped
    };
    const probe probes[] = {
        {0x8005, 3},  {0x0005, 3},   // full and limited member of 0x0005: entry 3 (full)
        {0x8009, 5},  {0x0009, -1},  // entry 5 is limited: a limited packet does not match it
        {0x7FFF, 7},                 // 0x7FFF: entry 0 is limited too, entry 7 matches
        {0xFFFF, 0},                 // full member: the lowest matching entry, 0
        {0x8000, -1}, {0x0000, -1},  // invalid P_Keys never match (entry 6 holds 0x8000)
        {0x8042, -1},                // in no entry
    };
    unsigned passed = 0, dropped = 0;
    for (const probe& t : probes) {
        sink.last_pkey_index = 0xDEAD;
        pk.receive(rx_pkt(1, t.pkey));
        if (t.index < 0) {
            ++dropped;
            EXPECT_EQ(sink.last_pkey_index, 0xDEAD) << std::hex << t.pkey << " dropped";
        } else {
            ++passed;
            EXPECT_EQ(sink.last_qp, 1u);
            EXPECT_EQ(sink.last_pkey_index, unsigned(t.index)) << std::hex << t.pkey;
        }
        EXPECT_EQ(sink.n, passed) << std::hex << t.pkey;
        EXPECT_EQ(pk.violations.value(), dropped) << std::hex << t.pkey;
        EXPECT_EQ(pk.pkey_violation_count(), dropped) << "a QP1 drop is a P_Key violation";
    }
    EXPECT_EQ(pk.find_match(0x8009), 5);
    EXPECT_EQ(pk.find_match(0x0009), -1);
    // A table change governs the next packet (C10-129 for QP1).
    ASSERT_TRUE(pk.set_pkey(9, 0x8042));
    pk.receive(rx_pkt(1, 0x8042));
    EXPECT_EQ(sink.n, passed + 1);
    EXPECT_EQ(sink.last_pkey_index, 9u);
    // Other QPNs carry no index.
    pk.bind_qp(4, 3);
    pk.receive(rx_pkt(4, 0x8005));
    EXPECT_EQ(sink.last_qp, 4u);
    EXPECT_EQ(sink.last_pkey_index, 0u);
}

SIM_TEST(HcaPkey, o10_57_violation_counters_are_16_bits_and_saturate) {
    pkey_checker pk("pkey_checker", 16);
    counting_sink sink;
    pk.bind_receiver(sink);
    pk.bind_qp(3, 0);
    ASSERT_TRUE(pk.set_pkey(0, 0x8001));
    EXPECT_EQ(pk.pkey_violation_count(), 0u) << "zero at power-on";
    EXPECT_EQ(pk.qkey_violation_count(), 0u);
    for (unsigned i = 0; i < 0xFFFE; ++i) pk.receive(rx_pkt(3, 0xFFFF));
    EXPECT_EQ(pk.pkey_violation_count(), 0xFFFEu);
    pk.receive(rx_pkt(3, 0xFFFF));
    EXPECT_EQ(pk.pkey_violation_count(), 0xFFFFu);
    for (unsigned i = 0; i < 1000; ++i) pk.receive(rx_pkt(3, 0xFFFF));
    EXPECT_EQ(pk.pkey_violation_count(), 0xFFFFu) << "saturated";
    EXPECT_EQ(pk.violations.value(), 0xFFFFu + 1000u) << "the statistics counter does not saturate";
    EXPECT_EQ(sink.n, 0u);
    EXPECT_EQ(pk.qkey_violation_count(), 0u) << "P_Key drops are not Q_Key violations";
    // The Q_Key counter: counted by the unit that checks Q_Keys.
    for (unsigned i = 0; i < 0x10005; ++i) pk.qkey_violation();
    EXPECT_EQ(pk.qkey_violation_count(), 0xFFFFu);
    EXPECT_EQ(pk.qkey_violations.value(), 0x10005u);
    EXPECT_EQ(pk.pkey_violation_count(), 0xFFFFu);
}

SIM_TEST(HcaPkey, C10_121_table_of_65535_entries) {
    broker::instance().set("pkey_checker.table_len", "65535", "test");
    pkey_checker pk("pkey_checker", 16);
    EXPECT_EQ(pk.table_len.get(), 65535u);
    EXPECT_EQ(pk.pkey(0), 0xFFFF);
    EXPECT_EQ(pk.pkey(65534), 0);
    EXPECT_TRUE(pk.set_pkey(65534, 0x8123));
    EXPECT_FALSE(pk.set_pkey(65535, 0x8123)) << "index out of range";
    EXPECT_EQ(pk.pkey(65534), 0x8123);
    counting_sink sink;
    pk.bind_receiver(sink);
    pk.bind_qp(2, 65534);
    pk.receive(rx_pkt(2, 0x0123));
    EXPECT_EQ(sink.n, 1u) << "a QP bound to the last entry";
    pk.receive(rx_pkt(1, 0x0123));
    EXPECT_EQ(sink.n, 2u);
    EXPECT_EQ(sink.last_pkey_index, 65534u) << "QP1 finds the last entry";
}

// ------------------------------------------------------------------ cq_writer

namespace {
constexpr uint64_t kCqBase = 0x400000, kEqBase = 0x300000;

struct cq_bench : sc_core::sc_module {
    host_memory mem{"memory"};
    tlm_utils::simple_initiator_socket<cq_bench> cpu_stub{"cpu_stub"};  // no CPU here
    dma_mux mux{"dma_mux"};  // the writer's two DMA ports (CQEs, CQ context misses) share the memory
    cq_writer cw{"cq_writer", kClock, 4, 2};
    explicit cq_bench(uint8_t log_size = 2) : sc_module("bench") {
        cpu_stub.bind(mem.cpu);
        cw.dma.socket.bind(mux.units);
        cw.cqc_dma.socket.bind(mux.units);
        mux.pcie.bind(mem.dma);
        hw::eq_context eq{};
        eq.base = kEqBase;
        eq.log_size = 3;
        eq.valid = 1;
        cw.load_eq(0, eq);
        hw::cq_context c{};
        c.cqn = 1;
        c.log_size = log_size;
        c.valid = 1;
        c.eqn = 0;
        c.base = kCqBase;
        cw.load_cq(1, c);
    }
    bool complete(uint64_t wr_id) {
        hw::cqe e{};
        e.wr_id = wr_id;
        e.status = hw::CQE_SUCCESS;
        e.owner = hw::CQE_IS_SEND;
        sc_time d = sc_core::SC_ZERO_TIME;
        return cw.complete(1, e, false, d);
    }
    hw::cqe slot(unsigned i) {
        hw::cqe e;
        mem.read(kCqBase + i * sizeof e, &e, sizeof e);
        return e;
    }
    hw::eqe eq_slot(unsigned i) {
        hw::eqe e;
        mem.read(kEqBase + i * sizeof e, &e, sizeof e);
        return e;
    }
};
}  // namespace

SIM_TEST(HcaUnitClock, a_unit_with_its_own_clock_counts_its_cycles_in_it) {
    // The CQ writer at 100 MHz while the bench's HCA clock (kClock) is 800 MHz: formatting a
    // CQE takes write_cycles (8) periods of 10 ns.
    broker::instance().set("bench.cq_writer.clock_mhz", "100", "test");
    cq_bench b;
    simulate([&] {
        hw::cqe e{};
        e.wr_id = 1;
        sc_time d = sc_core::SC_ZERO_TIME;
        ASSERT_TRUE(b.cw.complete(1, e, false, d));
        EXPECT_EQ(b.cw.busy_ps.value(), 80000u) << "8 cycles of 10 ns";
        EXPECT_GE(d, sc_time(80, SC_NS)) << "the CQE's DMA write starts after its formatting";
    });
}

SIM_TEST(HcaUnitClock, a_negative_unit_clock_is_a_configuration_error) {
    broker::instance().set("bench.cq_writer.clock_mhz", "-5", "test");
    EXPECT_THROW(cq_bench{}, config_error);
}

SIM_TEST(HcaCqWriter, owner_bit_alternates_on_each_wrap) {
    cq_bench b(2);  // 4 entries
    simulate([&] {
        uint64_t n = 0;
        // Software consumes after each batch of 2: producer runs 0..11, three wraps.
        for (unsigned round = 0; round < 6; ++round) {
            for (unsigned k = 0; k < 2; ++k, ++n) {
                ASSERT_TRUE(b.complete(1000 + n)) << "CQE " << n;
                const hw::cqe e = b.slot(unsigned(n & 3));
                EXPECT_EQ(e.wr_id, 1000 + n);
                EXPECT_EQ(e.owner & hw::CQE_OWNER_BIT, hw::cqe_owner_for(n, 2)) << "CQE " << n;
                EXPECT_EQ(e.owner & hw::CQE_OWNER_BIT, (n >> 2) & 1 ? 0 : 1) << "CQE " << n;
                EXPECT_TRUE(e.owner & hw::CQE_IS_SEND) << "other owner bits kept";
            }
            b.cw.doorbell(1, uint32_t(n), hw::CQ_ARM_NONE);
        }
        EXPECT_EQ(b.cw.cqes.value(), 12u);
        EXPECT_EQ(b.cw.overruns.value(), 0u);
    });
}

SIM_TEST(HcaCqWriter, full_cq_overruns_counts_lost_cqes_and_raises_cq_error) {
    cq_bench b(2);
    simulate([&] {
        for (unsigned k = 0; k < 4; ++k) ASSERT_TRUE(b.complete(k));
        EXPECT_EQ(b.cw.overruns.value(), 0u);
        EXPECT_FALSE(b.complete(4)) << "5th CQE on a 4-entry CQ with nothing consumed";
        EXPECT_FALSE(b.complete(5));
        EXPECT_EQ(b.cw.overruns.value(), 2u);
        EXPECT_EQ(b.cw.cqes.value(), 4u);
        // The overrun did not overwrite slot 0.
        EXPECT_EQ(b.slot(0).wr_id, 0u);
        EXPECT_EQ(b.slot(0).owner & hw::CQE_OWNER_BIT, 1u);
        // One CQ error event on EQ 0, owner bit set for EQE 0.
        EXPECT_EQ(b.cw.events.value(), 1u);
        const hw::eqe ev = b.eq_slot(0);
        EXPECT_EQ(ev.type, hw::EQE_CQ_ERROR);
        EXPECT_EQ(ev.resource, 1u);
        EXPECT_EQ(ev.owner & hw::CQE_OWNER_BIT, 1u);
    });
}

SIM_TEST(HcaCqWriter, armed_cq_raises_one_completion_event) {
    cq_bench b(3);
    simulate([&] {
        ASSERT_TRUE(b.complete(1));
        EXPECT_EQ(b.cw.events.value(), 0u) << "not armed";
        b.cw.doorbell(1, 1, hw::CQ_ARM_NEXT);
        ASSERT_TRUE(b.complete(2));
        EXPECT_EQ(b.cw.events.value(), 1u);
        const hw::eqe ev = b.eq_slot(0);
        EXPECT_EQ(ev.type, hw::EQE_COMPLETION);
        EXPECT_EQ(ev.resource, 1u);
        ASSERT_TRUE(b.complete(3));
        EXPECT_EQ(b.cw.events.value(), 1u) << "arm is one-shot";
        hw::cqe e{};
        sc_time d = sc_core::SC_ZERO_TIME;
        EXPECT_FALSE(b.cw.complete(2, e, false, d)) << "CQ 2 was never created";
    });
}

SIM_TEST(HcaCqWriter, resize_moves_the_unconsumed_cqes_and_keeps_producer_and_arm) {
    cq_bench b(2);  // 4 entries at kCqBase
    constexpr uint64_t kNewBase = 0x500000;
    simulate([&] {
        for (unsigned k = 0; k < 3; ++k) ASSERT_TRUE(b.complete(k));
        b.cw.doorbell(1, 1, hw::CQ_ARM_NEXT);  // CQE 0 consumed, armed
        // Software's initialisation of the new ring: slots of 1..8 read as not written.
        for (uint64_t n = 1; n < 9; ++n) {
            hw::cqe e{};
            e.owner = uint8_t(1u - hw::cqe_owner_for(n, 3));
            b.mem.write(kNewBase + (n & 7) * sizeof e, &e, sizeof e);
        }
        sc_time d = sc_core::SC_ZERO_TIME;
        EXPECT_FALSE(b.cw.resize_cq(1, kNewBase, 1, 1, d)) << "2 CQEs do not fit 2 entries";
        EXPECT_EQ(d, sc_core::SC_ZERO_TIME) << "a refused resize moves nothing";
        hw::cq_context c;
        ASSERT_TRUE(b.cw.query_cq(1, c));
        EXPECT_EQ(c.base, kCqBase);
        EXPECT_EQ(c.log_size, 2u);
        ASSERT_TRUE(b.cw.resize_cq(1, kNewBase, 3, 1, d));
        ASSERT_TRUE(b.cw.query_cq(1, c));
        EXPECT_EQ(c.base, kNewBase);
        EXPECT_EQ(c.log_size, 3u);
        EXPECT_EQ(c.producer, 3u);
        EXPECT_EQ(c.consumer, 1u);
        EXPECT_EQ(c.arm, uint8_t(hw::CQ_ARM_NEXT));
        EXPECT_EQ(c.overrun, 0u);
        EXPECT_EQ(b.cw.resizes.value(), 1u);
        EXPECT_EQ(b.cw.resize_moved.value(), 2u);
        auto new_slot = [&](unsigned i) {
            hw::cqe e;
            b.mem.read(kNewBase + i * sizeof e, &e, sizeof e);
            return e;
        };
        for (unsigned n = 1; n < 3; ++n) {  // same counter values, owner bit for 8 entries
            EXPECT_EQ(new_slot(n).wr_id, n);
            EXPECT_EQ(new_slot(n).owner & hw::CQE_OWNER_BIT, hw::cqe_owner_for(n, 3));
            EXPECT_TRUE(new_slot(n).owner & hw::CQE_IS_SEND) << "other owner bits kept";
        }
        EXPECT_NE(new_slot(0).owner & hw::CQE_OWNER_BIT, hw::cqe_owner_for(8, 3))
            << "slot of counter 8 untouched";
        // Later CQEs go to the new ring; the arm survived the resize.
        for (unsigned k = 3; k < 9; ++k) ASSERT_TRUE(b.complete(k)) << "CQE " << k;
        EXPECT_EQ(new_slot(3).wr_id, 3u);
        EXPECT_EQ(new_slot(0).wr_id, 8u);
        EXPECT_EQ(new_slot(0).owner & hw::CQE_OWNER_BIT, hw::cqe_owner_for(8, 3));
        EXPECT_EQ(b.slot(3).wr_id, 0u) << "the old ring is not written any more";
        EXPECT_EQ(b.cw.events.value(), 1u);
        EXPECT_EQ(b.eq_slot(0).type, hw::EQE_COMPLETION);
        EXPECT_FALSE(b.complete(9)) << "8 outstanding: the new ring is full";
        EXPECT_EQ(b.cw.overruns.value(), 1u);
        ASSERT_TRUE(b.cw.query_cq(1, c));
        EXPECT_EQ(c.overrun, 1u);
        EXPECT_FALSE(b.cw.query_cq(2, c)) << "CQ 2 was never created";
    });
}

// ------------------------------------------------------------------ doorbell decode (full machine)

SIM_TEST(HcaDoorbell, sq_rq_cq_and_inline_doorbells_are_decoded) {
    rc_harness h;
    h.run([](rc_harness& h) {
        auto c = [](const char* n) {
            return rc_harness::counter_value(std::string("node0.hca.doorbell_unit.") + n);
        };
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t tgt = h.alloc(1, 4096, 64);
        ibv_mr* tmr = h.reg(1, tgt, 4096);
        h.sleep(0, 10'000);
        const uint64_t sq0 = c("sq_doorbells"), rq0 = c("rq_doorbells"), cq0 = c("cq_doorbells"),
                       inl0 = c("inline_writes"), bad0 = c("bad_accesses"), drop0 = c("dropped");
        // A single small WR goes through the inline-WQE window, no SQ doorbell.
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 8, smr->lkey}}, 1, IBV_SEND_SIGNALED, tgt, tmr->rkey),
            0);
        h.sleep(0, 5'000);
        EXPECT_EQ(c("inline_writes") - inl0, 1u);
        EXPECT_EQ(c("sq_doorbells") - sq0, 0u);
        // A list of three WRs rings the SQ doorbell once.
        ibv_sge sge{src, 8, smr->lkey};
        ibv_send_wr wr[3];
        for (unsigned k = 0; k < 3; ++k) {
            wr[k].wr_id = 10 + k;
            wr[k].sg_list = &sge;
            wr[k].num_sge = 1;
            wr[k].opcode = IBV_WR_RDMA_WRITE;
            wr[k].send_flags = IBV_SEND_SIGNALED;
            wr[k].wr.rdma.remote_addr = tgt;
            wr[k].wr.rdma.rkey = tmr->rkey;
            wr[k].next = k < 2 ? &wr[k + 1] : nullptr;
        }
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(h.s[0].qp, wr, &bad), 0);
        h.sleep(0, 5'000);
        EXPECT_EQ(c("sq_doorbells") - sq0, 1u);
        EXPECT_EQ(c("inline_writes") - inl0, 1u);
        // Receives: one RQ doorbell per post_recv call.
        ASSERT_EQ(h.post_recv(0, {{src, 64, smr->lkey}}, 50), 0);
        h.sleep(0, 5'000);
        EXPECT_EQ(c("rq_doorbells") - rq0, 1u);
        // Polling four CQEs (one poll call) writes one CQ doorbell.
        auto wc = h.expect_wc(h.s[0].scq, 4, "writes");
        ASSERT_EQ(wc.size(), 4u);
        for (unsigned k = 0; k < 4; ++k) EXPECT_EQ(wc[k].wr_id, k == 0 ? 1u : 9u + k);
        h.sleep(0, 5'000);
        EXPECT_GE(c("cq_doorbells") - cq0, 1u);
        EXPECT_LE(c("cq_doorbells") - cq0, 4u);
        EXPECT_EQ(c("bad_accesses"), bad0);
        EXPECT_EQ(c("dropped"), drop0);
    });
}

TEST(HcaOnchipCache, a_hashed_index_conflicts_before_the_cache_is_full_and_mod_does_not) {
    // 256 entries in 8 ways (32 sets), 128 consecutive tags: half the capacity. Tag mod 32
    // puts 4 tags in every set; the hash spreads them unevenly, and every tag beyond a set's
    // 8 ways evicts one: exactly the overflow of the hash's own set counts.
    onchip_cache<no_line> mod(256, 8), hashed(256, 8, replacement::lru, set_index::hash);
    unsigned per_set[32] = {};
    unsigned mod_evictions = 0, hash_evictions = 0;
    for (uint64_t t = 0; t < 128; ++t) {
        bool e = false;
        mod.insert(t, &e);
        mod_evictions += e;
        hashed.insert(t, &e);
        hash_evictions += e;
        ++per_set[index_hash(uint32_t(t)) % 32];
    }
    unsigned overflow = 0;
    for (unsigned n : per_set) overflow += n > 8 ? n - 8 : 0;
    EXPECT_EQ(mod_evictions, 0u);
    EXPECT_GT(overflow, 0u) << "128 tags hashed into 32 sets: some set gets more than 8";
    EXPECT_EQ(hash_evictions, overflow);
    for (uint64_t t = 0; t < 128; ++t) EXPECT_TRUE(mod.contains(t)) << t;
    EXPECT_EQ(set_index_of("hash"), set_index::hash);
    EXPECT_THROW(set_index_of("xor"), std::invalid_argument);
}
