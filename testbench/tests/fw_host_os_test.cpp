// Logic tests of the simulated host OS (no SystemC).
#include <gtest/gtest.h>

#include <cerrno>

#include "firmware/host_os.h"
#include "fw_fake_bus.h"

using namespace hcasim;
using namespace hcasim::fw;

namespace {
constexpr uint64_t BASE = 0x40000000;
constexpr size_t BYTES = 1 << 20;
}  // namespace

TEST(HostOs, contiguous_allocations_are_aligned_zeroed_and_reusable) {
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    size_t total = os.free_pages();
    EXPECT_EQ(total, BYTES / PAGE_BYTES);
    uint64_t a, b;
    ASSERT_TRUE(os.alloc_contiguous(10000, 4096, &a));
    ASSERT_TRUE(os.alloc_contiguous(4096, 16384, &b));
    EXPECT_EQ(a, BASE);
    EXPECT_EQ(b % 16384, 0u);
    EXPECT_GE(b, a + 3 * PAGE_BYTES);
    EXPECT_EQ(os.free_pages(), total - 4);
    *bus.at(a + 5, 1) = 0xAB;
    os.free(a);
    uint64_t c;
    ASSERT_TRUE(os.alloc_contiguous(100, 64, &c));
    EXPECT_EQ(c, a);
    EXPECT_EQ(*bus.at(c + 5, 1), 0);  // zeroed again
    uint64_t huge;
    EXPECT_FALSE(os.alloc_contiguous(BYTES, 4096, &huge));
}

TEST(HostOs, small_rings_share_a_page_aligned_to_their_size_and_the_page_returns_with_the_last) {
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    const size_t total = os.free_pages();
    uint64_t a, b, c, big;
    ASSERT_TRUE(os.alloc_ring(128, &a));  // a 2-entry send queue of 64-byte WQEs
    ASSERT_TRUE(os.alloc_ring(100, &b));  // rounded up to 128
    ASSERT_TRUE(os.alloc_ring(16, &c));   // a 1-entry receive queue: a page of 16-byte blocks
    ASSERT_TRUE(os.alloc_ring(8192, &big));
    EXPECT_EQ(a, BASE);
    EXPECT_EQ(b, BASE + 128);
    EXPECT_EQ(c, BASE + PAGE_BYTES);
    EXPECT_EQ(big, BASE + 2 * PAGE_BYTES);  // a page and more: pages of its own, page aligned
    EXPECT_EQ(os.free_pages(), total - 4);
    *bus.at(b + 5, 1) = 0xAB;
    os.free(b);
    uint64_t d;
    ASSERT_TRUE(os.alloc_ring(128, &d));
    EXPECT_EQ(d, b);                  // the freed block, lowest first
    EXPECT_EQ(*bus.at(d + 5, 1), 0);  // zeroed again
    os.free(a);
    os.free(d);
    EXPECT_EQ(os.free_pages(), total - 3);  // the 128-byte blocks' page went back with its last
    os.free(c);
    os.free(big);
    EXPECT_EQ(os.free_pages(), total);
    uint64_t e;
    ASSERT_TRUE(os.alloc_ring(64, &e));
    EXPECT_EQ(e, BASE);  // a page freed by its last block is a page like any other
}

TEST(HostOs, process_pages_are_not_physically_contiguous) {
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    address_space as(os);
    uint64_t va = as.alloc(3 * PAGE_BYTES, PAGE_BYTES);
    ASSERT_NE(va, 0u);
    uint64_t p0, p1, p2;
    ASSERT_TRUE(as.translate(va, &p0));
    ASSERT_TRUE(as.translate(va + PAGE_BYTES, &p1));
    ASSERT_TRUE(as.translate(va + 2 * PAGE_BYTES + 17, &p2));
    EXPECT_NE(p1, p0 + PAGE_BYTES);
    EXPECT_NE(p2 & ~(PAGE_BYTES - 1), p1 + PAGE_BYTES);
    EXPECT_EQ(p2 & (PAGE_BYTES - 1), 17u);
    // Deterministic: pages come from the top of the range downwards.
    EXPECT_EQ(p0, BASE + BYTES - PAGE_BYTES);
    EXPECT_EQ(p1, BASE + BYTES - 2 * PAGE_BYTES);
    uint64_t pa;
    EXPECT_FALSE(as.translate(va + 3 * PAGE_BYTES, &pa));
}

TEST(HostOs, read_write_split_across_pages) {
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    address_space as(os);
    uint64_t va = as.alloc(2 * PAGE_BYTES, PAGE_BYTES);
    std::vector<uint8_t> src(200), dst(200);
    for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
    uint64_t at = va + PAGE_BYTES - 100;
    ASSERT_TRUE(as.write(at, src.data(), src.size()));
    uint64_t pa_lo, pa_hi;
    ASSERT_TRUE(as.translate(at, &pa_lo));
    ASSERT_TRUE(as.translate(va + PAGE_BYTES, &pa_hi));
    EXPECT_EQ(*bus.at(pa_lo, 1), src[0]);
    EXPECT_EQ(*bus.at(pa_lo + 99, 1), src[99]);
    EXPECT_EQ(*bus.at(pa_hi, 1), src[100]);
    ASSERT_TRUE(as.read(at, dst.data(), dst.size()));
    EXPECT_EQ(src, dst);
    EXPECT_FALSE(as.write(va + 2 * PAGE_BYTES - 4, src.data(), 8));  // runs into an unmapped page
}

TEST(HostOs, fill_charges_copy_cost) {
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    address_space as(os);
    uint64_t va = as.alloc(300);
    ASSERT_TRUE(as.fill(va, 300, 5));
    EXPECT_EQ(bus.cost[int(cpu_op::memcpy_64b)], 5u);
    uint8_t b[3];
    ASSERT_TRUE(as.read(va + 254, b, 3));
    EXPECT_EQ(b[0], uint8_t(5 + 254));
    EXPECT_EQ(b[2], uint8_t(5 + 256));
}

TEST(HostOs, pin_counts_and_errors) {
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    address_space as(os);
    uint64_t va = as.alloc(2 * PAGE_BYTES, PAGE_BYTES);
    std::vector<uint64_t> pas;
    ASSERT_EQ(as.pin(va + 10, PAGE_BYTES, &pas), 0);
    ASSERT_EQ(pas.size(), 2u);
    uint64_t p;
    ASSERT_TRUE(as.translate(va, &p));
    EXPECT_EQ(pas[0], p);
    EXPECT_EQ(as.pin_count(va), 1u);
    EXPECT_EQ(as.pin(va, 3 * PAGE_BYTES, &pas), EFAULT);
    EXPECT_EQ(as.pin_count(va), 1u);  // nothing pinned by the failed call
    EXPECT_EQ(as.pin(va, 0, &pas), EINVAL);
    EXPECT_EQ(as.unpin(va + 10, PAGE_BYTES), 0);
    EXPECT_EQ(as.pin_count(va), 0u);
    EXPECT_EQ(as.unpin(va, 1), EINVAL);
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"

TEST(HostOs, mapped_runs_translate_pin_and_go_back_whole) {
    // hcasim serve mirrors a client's registered buffer: its pages at the client's own virtual
    // addresses, onto one physically contiguous run the address space then owns.
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, BASE, BYTES);
    address_space as(os);
    const size_t total = os.free_pages();
    uint64_t pa;
    ASSERT_TRUE(os.alloc_contiguous(3 * PAGE_BYTES, PAGE_BYTES, &pa));
    const uint64_t va = 0x55aa00001000ull;
    EXPECT_EQ(as.map_run(va + 1, pa, 3), EINVAL);
    EXPECT_EQ(as.map_run(va, pa, 0), EINVAL);
    ASSERT_EQ(as.map_run(va, pa, 3), 0);
    EXPECT_EQ(as.map_run(va + 2 * PAGE_BYTES, pa, 1), EEXIST);
    uint64_t t;
    ASSERT_TRUE(as.translate(va + 2 * PAGE_BYTES + 17, &t));
    EXPECT_EQ(t, pa + 2 * PAGE_BYTES + 17);
    std::vector<uint64_t> pages;
    ASSERT_EQ(as.pin(va + 100, 2 * PAGE_BYTES, &pages), 0);
    EXPECT_EQ(pages, (std::vector<uint64_t>{pa, pa + PAGE_BYTES, pa + 2 * PAGE_BYTES}));
    EXPECT_EQ(as.unmap_run(va, 3), EBUSY);  // pinned
    ASSERT_EQ(as.unpin(va + 100, 2 * PAGE_BYTES), 0);
    EXPECT_EQ(as.unmap_run(va, 2), EINVAL);               // only whole runs go back
    EXPECT_EQ(as.unmap_run(va + PAGE_BYTES, 2), EINVAL);  // nor the tail of one
    ASSERT_TRUE(as.translate(va + 2 * PAGE_BYTES, &t));   // still all mapped
    EXPECT_EQ(as.unmap_run(va, 3), 0);
    EXPECT_FALSE(as.translate(va, &t));
    EXPECT_EQ(os.free_pages(), total);  // the run went back to the OS
    EXPECT_EQ(as.unmap_run(va, 3), EINVAL);
}

TEST(HostOs, direct_address_space_reads_the_process_itself) {
    // The provider's user half: inline data is read from the application's own memory.
    test::fake_hca_bus bus(BASE, BYTES);
    host_os os(bus, 0, 0);
    address_space as(os);
    as.direct = true;
    const char text[] = "inline payload";
    char got[sizeof text] = {};
    ASSERT_TRUE(as.read(reinterpret_cast<uintptr_t>(text), got, sizeof text));
    EXPECT_STREQ(got, text);
    char dst[4] = {};
    ASSERT_TRUE(as.write(reinterpret_cast<uintptr_t>(dst), "abc", 4));
    EXPECT_STREQ(dst, "abc");
}
