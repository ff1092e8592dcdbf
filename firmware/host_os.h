// The simulated host operating system: physical page allocation over a host-physical range and
// per-process virtual address spaces whose pages are deliberately not physically contiguous.
#pragma once
#include <cstddef>
#include <cstdint>
#include <bitset>
#include <map>
#include <memory>
#include <set>
#include <vector>
#include "tlm_if/host_bus.h"

namespace hcasim::fw {

/// Page size of the simulated OS and of MR translation (4 KiB).
constexpr uint64_t PAGE_BYTES = 4096;
constexpr uint32_t PAGE_SHIFT = 12;

/// Physical memory manager of the simulated host.
class host_os {
public:
    /// Manages host-physical pages [phys_base, phys_base + phys_bytes) (rounded inward to pages).
    host_os(host_bus& bus, uint64_t phys_base, uint64_t phys_bytes);

    /// Physically contiguous, zeroed allocation (rings, tables, mailboxes); false when out of memory.
    [[nodiscard]] bool alloc_contiguous(size_t bytes, size_t align, uint64_t* pa);
    /// A queue's ring: below a page, a zeroed block of the next power of two from pages shared
    /// by blocks of that size and aligned to it (as Linux's dma_pool), so a small queue does
    /// not take a page of its own (a node with thousands of QPs holds thousands of few-entry
    /// rings); from a page up, alloc_contiguous page aligned. False when out of memory.
    [[nodiscard]] bool alloc_ring(size_t bytes, uint64_t* pa);
    /// Frees an allocation made by alloc_contiguous, alloc_ring or alloc_page (by its first
    /// physical address). A pool page goes back when its last block does.
    void free(uint64_t pa);
    /// One zeroed page taken from the top of the range downwards (process backing pages).
    [[nodiscard]] bool alloc_page(uint64_t* pa);

    /// Pages not allocated.
    size_t free_pages() const;
    /// The bus this OS runs on.
    host_bus& bus() { return bus_; }

private:
    void zero(uint64_t pa, size_t bytes);
    host_bus& bus_;
    uint64_t base_;
    /// One flag per page in chunks of 32,768 pages, a chunk allocated when a page of it is
    /// first taken: the 16 GiB a node manages cost no bitmap where nothing was ever allocated
    /// (a 1,024-node fabric saved 512 MiB).
    class page_flags {
    public:
        void assign(size_t pages) {
            size_ = pages;
            chunks_.clear();
            chunks_.resize((pages + chunk - 1) / chunk);
        }
        size_t size() const { return size_; }
        size_t count() const { return set_; }  ///< flags set
        bool operator[](size_t i) const {
            const auto& c = chunks_[i / chunk];
            return c && c->test(i % chunk);
        }
        void set(size_t i, bool v) {
            auto& c = chunks_[i / chunk];
            if (!c) c = std::make_unique<std::bitset<chunk>>();
            if (c->test(i % chunk) != v) set_ += v ? 1 : size_t(-1);
            c->set(i % chunk, v);
        }

    private:
        static constexpr size_t chunk = 32768;
        std::vector<std::unique_ptr<std::bitset<chunk>>> chunks_;
        size_t size_ = 0, set_ = 0;
    };
    page_flags used_;                    ///< one flag per page
    size_t low_free_ = 0;                ///< no page below this index is free
    size_t top_free_ = SIZE_MAX;         ///< no page at or above this index is free
    std::map<uint64_t, size_t> allocs_;  ///< first pa -> pages
    /// alloc_ring's pool pages: blocks of 1 << log bytes, `used` of them allocated.
    struct pool_page {
        uint8_t log = 0;
        uint16_t used = 0;
    };
    std::map<uint64_t, pool_page> pool_pages_;    ///< page pa -> its blocks
    std::vector<std::set<uint64_t>> pool_free_ =  ///< per log2 block size: free blocks, lowest first
        std::vector<std::set<uint64_t>>(PAGE_SHIFT);
};

/// Virtual address space of one simulated process.
class address_space {
public:
    /// A process on `os`; virtual addresses are handed out from va_base upwards.
    explicit address_space(host_os& os, uint64_t va_base = 0x7f0000000000ull);
    ~address_space();
    address_space(const address_space&) = delete;
    address_space& operator=(const address_space&) = delete;

    /// Allocates `bytes` of zeroed virtual memory (page-backed one page at a time); 0 on failure.
    [[nodiscard]] uint64_t alloc(size_t bytes, size_t align = 64);
    /// Virtual-to-physical translation; false if va is unmapped.
    [[nodiscard]] bool translate(uint64_t va, uint64_t* pa) const;
    /// CPU load of n bytes at va (split by page); false if any page is unmapped.
    [[nodiscard]] bool read(uint64_t va, void* dst, size_t n) const;
    /// CPU store of n bytes at va (split by page); false if any page is unmapped.
    [[nodiscard]] bool write(uint64_t va, const void* src, size_t n);
    /// Fills n bytes at va with (seed + i) & 0xFF, charging memcpy_64b per 64 bytes.
    [[nodiscard]] bool fill(uint64_t va, size_t n, uint8_t seed);
    /// Fills n bytes at va with one byte value, charging memcpy_64b per 64 bytes.
    [[nodiscard]] bool fill_byte(uint64_t va, size_t n, uint8_t value);
    /// Pins the pages covering [va, va+len) and returns their physical addresses in order;
    /// EFAULT (nothing pinned) if any page is unmapped, EINVAL if len is 0.
    [[nodiscard]] int pin(uint64_t va, uint64_t len, std::vector<uint64_t>* page_pas);
    /// Drops one pin from each page of [va, va+len); EINVAL if a page was not pinned.
    [[nodiscard]] int unpin(uint64_t va, uint64_t len);
    /// Pin count of the page holding va (0 if unmapped).
    uint32_t pin_count(uint64_t va) const;
    /// Bus of the OS (for cost accounting).
    host_bus& bus() { return os_.bus(); }
    /// The OS this process runs on.
    host_os& os() { return os_; }

    /// Maps `pages` pages at va (page aligned) onto the physically contiguous run at pa, which
    /// the address space then owns (frees with itself or unmap_run): how `hcasim serve` mirrors
    /// a client's buffers that its libibverbs provider moved into simulated host memory.
    /// EINVAL for a misaligned or empty range, EEXIST if a page is mapped already.
    [[nodiscard]] int map_run(uint64_t va, uint64_t pa, uint64_t pages);
    /// Unmaps a run made by map_run (the same va and pages) and frees its memory; EINVAL if it
    /// is not one, EBUSY while a page is pinned.
    [[nodiscard]] int unmap_run(uint64_t va, uint64_t pages);

    /// A privileged (kernel-mode) process: may create the special QPs QP0 and QP1 (C10-13).
    bool privileged = false;
    /// The calling process's own memory (a libibverbs provider's user space): read() and
    /// write() use the virtual address as a pointer instead of translating it.
    bool direct = false;

private:
    struct page {
        uint64_t pa;
        uint32_t pins;
    };
    host_os& os_;
    uint64_t next_va_;
    std::map<uint64_t, page> pages_;     ///< virtual page number -> backing page
    std::map<uint64_t, uint64_t> runs_;  ///< map_run: first virtual page number -> pages
};

}  // namespace hcasim::fw
