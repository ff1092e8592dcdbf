#include "model/hca/translation_unit.h"

namespace hcasim {

using namespace sc_core;

translation_unit::translation_unit(const sc_module_name& name, const sc_time& clock)
    : sc_module(name),
      dma("dma"),
      mpt_cache_entries("mpt_cache_entries", 1024, "entries", "on-chip MPT cache entries (direct mapped)"),
      mtt_cache_lines("mtt_cache_lines", 4096, "lines", "on-chip MTT cache lines of 8 entries (direct mapped)"),
      lookup_cycles("lookup_cycles", 4, "cycles", "pipeline cycles of a lookup that hits in the caches"),
      lookups("lookups", "translations requested"),
      mpt_misses("mpt_misses", "MPT cache misses (DMA reads of MPT entries)"),
      mtt_misses("mtt_misses", "MTT cache misses (DMA reads of 64-byte MTT lines)"),
      faults("faults", "translations refused (key, PD, access, bounds)") {
    mpt_cache_entries.range(1, 1u << 24);
    mtt_cache_lines.range(1, 1u << 24);
    lookup_cycles.range(0, 100000);
    mpt_cache_.resize(mpt_cache_entries);
    mtt_cache_.resize(mtt_cache_lines);
    hit_time_ = clock * double(lookup_cycles.get());
}

void translation_unit::set_tables(uint64_t mpt_base, uint32_t num_mpts, uint64_t mtt_base, uint64_t num_mtts) {
    mpt_base_ = mpt_base;
    num_mpts_ = num_mpts;
    mtt_base_ = mtt_base;
    num_mtts_ = num_mtts;
    for (auto& l : mpt_cache_) l.valid = false;
    for (auto& l : mtt_cache_) l.valid = false;
}

void translation_unit::invalidate_mpt(uint32_t index) {
    mpt_line& l = mpt_cache_[index % mpt_cache_.size()];
    if (l.index == index)
        l.valid = false;
}

void translation_unit::invalidate_mtt(uint64_t first, uint64_t count) {
    for (uint64_t line = first / 8; line <= (first + count - 1) / 8 && count; ++line) {
        mtt_line& l = mtt_cache_[line % mtt_cache_.size()];
        if (l.first == line * 8)
            l.valid = false;
    }
}

bool translation_unit::mpt(uint32_t index, hw::mpt_entry& out, sc_time& delay) {
    if (index >= num_mpts_)
        return false;
    mpt_line& l = mpt_cache_[index % mpt_cache_.size()];
    if (!l.valid || l.index != index) {
        ++mpt_misses;
        if (!dma.read(mpt_base_ + uint64_t(index) * sizeof(hw::mpt_entry), &l.e, sizeof l.e, delay))
            return false;
        l.valid = true;
        l.index = index;
    }
    out = l.e;
    return true;
}

bool translation_unit::mtt(uint64_t index, uint64_t& value, sc_time& delay) {
    if (index >= num_mtts_)
        return false;
    const uint64_t first = index & ~uint64_t(7);
    mtt_line& l = mtt_cache_[(first / 8) % mtt_cache_.size()];
    if (!l.valid || l.first != first) {
        ++mtt_misses;
        if (!dma.read(mtt_base_ + first * sizeof(hw::mtt_entry), l.v, sizeof l.v, delay))
            return false;
        l.valid = true;
        l.first = first;
    }
    value = l.v[index - first];
    return true;
}

xlate_status translation_unit::check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                                     sc_time& delay) {
    phys_seg none[1];
    unsigned n = 0;
    return translate(key, pd, va, len, access, none, 0, n, delay, false);
}

xlate_status translation_unit::translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                                         phys_seg* segs, unsigned max_segs, unsigned& nsegs, sc_time& delay) {
    return translate(key, pd, va, len, access, segs, max_segs, nsegs, delay, true);
}

xlate_status translation_unit::translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                                         phys_seg* segs, unsigned max_segs, unsigned& nsegs, sc_time& delay,
                                         bool walk) {
    ++lookups;
    nsegs = 0;
    delay += hit_time_;
    hw::mpt_entry e;
    auto fault = [this](xlate_status s) {
        ++faults;
        return s;
    };
    if (!mpt(hw::key_index(key), e, delay) || !(e.flags & hw::MPT_VALID) || e.key != key)
        return fault(xlate_status::bad_key);
    if (e.pd != pd)
        return fault(xlate_status::bad_pd);
    if ((e.access & access) != access)
        return fault(xlate_status::no_access);
    if (va < e.start_va || len > e.length || va - e.start_va > e.length - len)
        return fault(xlate_status::out_of_bounds);
    if (len == 0 || !walk)
        return xlate_status::ok;
    if (e.flags & hw::MPT_PHYSICAL) {
        segs[nsegs++] = {va, uint32_t(len)};
        return xlate_status::ok;
    }
    const unsigned shift = e.log_page_size;
    const uint64_t page = uint64_t(1) << shift;
    // Page n of the region holds region offset [n*page - (start_va mod page), ...): the MTT
    // lists the pages covering the region from the page containing start_va.
    const uint64_t base_page = e.start_va >> shift;
    uint64_t cur = va;
    uint64_t left = len;
    while (left) {
        const uint64_t n = (cur >> shift) - base_page;
        if (n >= e.mtt_count)
            return fault(xlate_status::bad_mtt);
        uint64_t m = 0;
        if (!mtt(e.mtt_base + n, m, delay) || !(m & hw::MTT_PRESENT))
            return fault(xlate_status::bad_mtt);
        const uint64_t in_page = cur & (page - 1);
        const uint64_t chunk = std::min<uint64_t>(left, page - in_page);
        const uint64_t pa = (m & ~(page - 1)) + in_page;
        if (nsegs && segs[nsegs - 1].pa + segs[nsegs - 1].len == pa) {
            segs[nsegs - 1].len += uint32_t(chunk);  // physically contiguous pages merge
        } else {
            if (nsegs == max_segs)
                return fault(xlate_status::too_many_segs);
            segs[nsegs++] = {pa, uint32_t(chunk)};
        }
        cur += chunk;
        left -= chunk;
    }
    return xlate_status::ok;
}

}  // namespace hcasim
