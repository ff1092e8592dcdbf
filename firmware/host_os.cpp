#include "firmware/host_os.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hcasim::fw {

host_os::host_os(host_bus& bus, uint64_t phys_base, uint64_t phys_bytes) : bus_(bus) {
    base_ = (phys_base + PAGE_BYTES - 1) & ~(PAGE_BYTES - 1);
    uint64_t end = (phys_base + phys_bytes) & ~(PAGE_BYTES - 1);
    used_.assign(end > base_ ? (end - base_) >> PAGE_SHIFT : 0);
}

void host_os::zero(uint64_t pa, size_t bytes) {
    static const uint8_t zeros[PAGE_BYTES] = {};
    while (bytes) {
        size_t n = std::min<size_t>(bytes, PAGE_BYTES);
        bus_.mem_write(pa, zeros, n);
        pa += n;
        bytes -= n;
    }
}

bool host_os::alloc_contiguous(size_t bytes, size_t align, uint64_t* pa) {
    if (bytes == 0) bytes = 1;
    size_t pages = (bytes + PAGE_BYTES - 1) >> PAGE_SHIFT;
    size_t align_pages = std::max<size_t>(1, (align + PAGE_BYTES - 1) >> PAGE_SHIFT);
    // First fit from the bottom, so tables and rings pack low and process pages come from the top.
    // The scan starts at low_free_ (no page below it is free), so filling from the bottom is not
    // quadratic in the allocations made.
    while (low_free_ < used_.size() && used_[low_free_]) ++low_free_;
    for (size_t first = low_free_; first + pages <= used_.size();) {
        uint64_t addr = base_ + (uint64_t(first) << PAGE_SHIFT);
        const uint64_t align_bytes = uint64_t(align_pages) << PAGE_SHIFT;
        if (addr % align_bytes) {
            first += size_t((align_bytes - addr % align_bytes) >> PAGE_SHIFT);  // the next aligned page
            continue;
        }
        size_t i = 0;
        while (i < pages && !used_[first + i]) ++i;
        if (i == pages) {
            for (size_t k = 0; k < pages; ++k) used_.set(first + k, true);
            allocs_[addr] = pages;
            zero(addr, pages << PAGE_SHIFT);
            *pa = addr;
            return true;
        }
        first += i + 1;
    }
    return false;
}

bool host_os::alloc_page(uint64_t* pa) {
    // From the top; no page above top_free_ is free.
    if (top_free_ > used_.size()) top_free_ = used_.size();
    for (size_t i = top_free_; i-- > 0;) {
        if (used_[i]) continue;
        used_.set(i, true);
        top_free_ = i;
        uint64_t addr = base_ + (uint64_t(i) << PAGE_SHIFT);
        allocs_[addr] = 1;
        zero(addr, PAGE_BYTES);
        *pa = addr;
        return true;
    }
    return false;
}

bool host_os::alloc_ring(size_t bytes, uint64_t* pa) {
    if (bytes >= PAGE_BYTES) return alloc_contiguous(bytes, PAGE_BYTES, pa);
    uint8_t log = 0;
    while ((size_t(1) << log) < bytes) ++log;
    std::set<uint64_t>& blocks = pool_free_[log];
    if (blocks.empty()) {
        uint64_t page = 0;
        if (!alloc_contiguous(PAGE_BYTES, PAGE_BYTES, &page)) return false;
        pool_pages_[page].log = log;
        for (uint64_t b = page; b < page + PAGE_BYTES; b += uint64_t(1) << log) blocks.insert(b);
    }
    *pa = *blocks.begin();
    blocks.erase(blocks.begin());
    ++pool_pages_[*pa & ~(PAGE_BYTES - 1)].used;
    zero(*pa, size_t(1) << log);
    return true;
}

void host_os::free(uint64_t pa) {
    const auto pool = pool_pages_.find(pa & ~(PAGE_BYTES - 1));
    if (pool != pool_pages_.end()) {
        std::set<uint64_t>& blocks = pool_free_[pool->second.log];
        blocks.insert(pa);
        if (--pool->second.used) return;
        // Its last block: the page goes back.
        blocks.erase(blocks.lower_bound(pool->first), blocks.lower_bound(pool->first + PAGE_BYTES));
        pa = pool->first;
        pool_pages_.erase(pool);
    }
    auto it = allocs_.find(pa);
    if (it == allocs_.end()) return;
    size_t first = (pa - base_) >> PAGE_SHIFT;
    for (size_t k = 0; k < it->second; ++k) used_.set(first + k, false);
    low_free_ = std::min(low_free_, first);
    if (top_free_ != SIZE_MAX) top_free_ = std::max(top_free_, first + it->second);
    allocs_.erase(it);
}

size_t host_os::free_pages() const { return used_.size() - used_.count(); }

address_space::address_space(host_os& os, uint64_t va_base) : os_(os), next_va_(va_base) {}

address_space::~address_space() {
    for (auto& [vpn, pg] : pages_) os_.free(pg.pa);
}

uint64_t address_space::alloc(size_t bytes, size_t align) {
    if (align == 0 || (align & (align - 1))) return 0;
    uint64_t va = (next_va_ + align - 1) & ~uint64_t(align - 1);
    uint64_t end = va + std::max<size_t>(bytes, 1);
    // Back every page of the range not backed yet, one page at a time, in address order.
    std::vector<uint64_t> added;
    for (uint64_t vpn = va >> PAGE_SHIFT; vpn <= (end - 1) >> PAGE_SHIFT; ++vpn) {
        if (pages_.count(vpn)) continue;
        uint64_t pa;
        if (!os_.alloc_page(&pa)) {
            for (uint64_t v : added) {
                os_.free(pages_[v].pa);
                pages_.erase(v);
            }
            return 0;
        }
        pages_[vpn] = page{pa, 0};
        added.push_back(vpn);
    }
    next_va_ = end;
    return va;
}

bool address_space::translate(uint64_t va, uint64_t* pa) const {
    auto it = pages_.find(va >> PAGE_SHIFT);
    if (it == pages_.end()) return false;
    *pa = it->second.pa | (va & (PAGE_BYTES - 1));
    return true;
}

bool address_space::read(uint64_t va, void* dst, size_t n) const {
    if (direct) {
        std::memcpy(dst, reinterpret_cast<const void*>(uintptr_t(va)), n);
        return true;
    }
    auto* out = static_cast<uint8_t*>(dst);
    while (n) {
        uint64_t pa;
        if (!translate(va, &pa)) return false;
        size_t chunk = std::min<uint64_t>(n, PAGE_BYTES - (va & (PAGE_BYTES - 1)));
        os_.bus().mem_read(pa, out, chunk);
        va += chunk;
        out += chunk;
        n -= chunk;
    }
    return true;
}

bool address_space::write(uint64_t va, const void* src, size_t n) {
    if (direct) {
        std::memcpy(reinterpret_cast<void*>(uintptr_t(va)), src, n);
        return true;
    }
    auto* in = static_cast<const uint8_t*>(src);
    while (n) {
        uint64_t pa;
        if (!translate(va, &pa)) return false;
        size_t chunk = std::min<uint64_t>(n, PAGE_BYTES - (va & (PAGE_BYTES - 1)));
        os_.bus().mem_write(pa, in, chunk);
        va += chunk;
        in += chunk;
        n -= chunk;
    }
    return true;
}

bool address_space::fill(uint64_t va, size_t n, uint8_t seed) {
    std::vector<uint8_t> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = uint8_t(seed + i);
    bus().cpu_cost(cpu_op::memcpy_64b, uint32_t((n + 63) / 64));
    return write(va, buf.data(), n);
}

bool address_space::fill_byte(uint64_t va, size_t n, uint8_t value) {
    std::vector<uint8_t> buf(n, value);
    bus().cpu_cost(cpu_op::memcpy_64b, uint32_t((n + 63) / 64));
    return write(va, buf.data(), n);
}

int address_space::pin(uint64_t va, uint64_t len, std::vector<uint64_t>* page_pas) {
    if (len == 0) return EINVAL;
    uint64_t first = va >> PAGE_SHIFT, last = (va + len - 1) >> PAGE_SHIFT;
    for (uint64_t vpn = first; vpn <= last; ++vpn)
        if (!pages_.count(vpn)) return EFAULT;
    if (page_pas) page_pas->clear();
    for (uint64_t vpn = first; vpn <= last; ++vpn) {
        page& pg = pages_[vpn];
        ++pg.pins;
        if (page_pas) page_pas->push_back(pg.pa);
    }
    return 0;
}

int address_space::unpin(uint64_t va, uint64_t len) {
    if (len == 0) return EINVAL;
    uint64_t first = va >> PAGE_SHIFT, last = (va + len - 1) >> PAGE_SHIFT;
    for (uint64_t vpn = first; vpn <= last; ++vpn) {
        auto it = pages_.find(vpn);
        if (it == pages_.end() || it->second.pins == 0) return EINVAL;
    }
    for (uint64_t vpn = first; vpn <= last; ++vpn) --pages_[vpn].pins;
    return 0;
}

int address_space::map_run(uint64_t va, uint64_t pa, uint64_t pages) {
    if (!pages || (va & (PAGE_BYTES - 1)) || (pa & (PAGE_BYTES - 1))) return EINVAL;
    const uint64_t first = va >> PAGE_SHIFT;
    for (uint64_t k = 0; k < pages; ++k)
        if (pages_.count(first + k)) return EEXIST;
    for (uint64_t k = 0; k < pages; ++k) pages_[first + k] = page{pa + (k << PAGE_SHIFT), 0};
    runs_[first] = pages;
    return 0;
}

int address_space::unmap_run(uint64_t va, uint64_t pages) {
    if (va & (PAGE_BYTES - 1)) return EINVAL;
    const uint64_t first = va >> PAGE_SHIFT;
    auto run = runs_.find(first);
    if (run == runs_.end() || run->second != pages) return EINVAL;
    for (uint64_t k = 0; k < pages; ++k)
        if (pages_[first + k].pins) return EBUSY;
    const uint64_t pa = pages_[first].pa;
    for (uint64_t k = 0; k < pages; ++k) pages_.erase(first + k);
    runs_.erase(run);
    os_.free(pa);
    return 0;
}

uint32_t address_space::pin_count(uint64_t va) const {
    auto it = pages_.find(va >> PAGE_SHIFT);
    return it == pages_.end() ? 0 : it->second.pins;
}

}  // namespace hcasim::fw
