// Memory translation and protection unit: resolves (L_Key or R_Key, virtual address, length,
// access) to physical segments through the MPT and MTT tables in host memory, checking the
// protection domain, access rights and bounds. MPT entries and MTT lines are cached on chip
// (direct-mapped); misses are DMA reads through the PCIe link and cost their latency.
#pragma once
#include <systemc>

#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/hca/dma_port.h"
#include "tlm_if/contexts.h"

namespace hcasim {

/// One physically contiguous piece of a translated range.
struct phys_seg {
    uint64_t pa;   ///< host physical address
    uint32_t len;  ///< bytes
};

/// Why a translation failed (the caller maps it to a completion status or a NAK).
enum class xlate_status : uint8_t {
    ok,
    bad_key,        ///< no valid MPT entry for the key, or its key byte differs
    bad_pd,         ///< region belongs to another protection domain
    no_access,      ///< region does not grant the requested access
    out_of_bounds,  ///< range not inside the region
    bad_mtt,        ///< a page of the range has no translation
    too_many_segs,  ///< the range needs more segments than the caller can take
};

class translation_unit : public sc_core::sc_module {
public:
    dma_port dma;

    param<unsigned> mpt_cache_entries;  ///< on-chip MPT cache entries (direct mapped)
    param<unsigned> mtt_cache_lines;    ///< on-chip MTT cache lines of 8 entries (direct mapped)
    param<unsigned> lookup_cycles;      ///< pipeline cycles of a lookup that hits

    counter lookups, mpt_misses, mtt_misses, faults;

    translation_unit(const sc_core::sc_module_name& name, const sc_core::sc_time& clock);

    /// Table locations (from INIT_HCA).
    void set_tables(uint64_t mpt_base, uint32_t num_mpts, uint64_t mtt_base, uint64_t num_mtts);
    /// Drop cached copies after the command unit changed the tables.
    void invalidate_mpt(uint32_t index);
    void invalidate_mtt(uint64_t first, uint64_t count);

    /// Translates [va, va + len) under `key` for protection domain `pd` needing `access`
    /// (access_flags; 0 = local read). Fills segs[0..nsegs). `delay` is the caller's local time
    /// on entry and when the translation is known on return.
    xlate_status translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                           phys_seg* segs, unsigned max_segs, unsigned& nsegs, sc_core::sc_time& delay);

    /// Checks `key` for [va, va + len) under `pd` needing `access` (key, PD, rights, bounds)
    /// without walking the page table: the request-time check of a READ or atomic whose pages
    /// are translated packet by packet later.
    xlate_status check(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                       sc_core::sc_time& delay);
private:
    xlate_status translate(uint32_t key, uint32_t pd, uint64_t va, uint64_t len, uint32_t access,
                           phys_seg* segs, unsigned max_segs, unsigned& nsegs, sc_core::sc_time& delay, bool walk);
    bool mpt(uint32_t index, hw::mpt_entry& out, sc_core::sc_time& delay);
    bool mtt(uint64_t index, uint64_t& value, sc_core::sc_time& delay);

    struct mpt_line {
        bool valid = false;
        uint32_t index = 0;
        hw::mpt_entry e{};
    };
    struct mtt_line {
        bool valid = false;
        uint64_t first = 0;
        uint64_t v[8] = {};
    };
    std::vector<mpt_line> mpt_cache_;
    std::vector<mtt_line> mtt_cache_;
    uint64_t mpt_base_ = 0, mtt_base_ = 0, num_mtts_ = 0;
    uint32_t num_mpts_ = 0;
    sc_core::sc_time hit_time_;
};

}  // namespace hcasim
