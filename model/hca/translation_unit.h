// Memory translation and protection unit: resolves (L_Key or R_Key, address, length, access)
// to physical segments through the MPT and MTT tables in host memory, checking the key and its
// state, the protection domain, QP association of type 2 windows, access rights and bounds at
// byte granularity (IBA 10.6.4.5, 10.6.7.2.8). It also executes the memory management
// operations of send WQEs (bind window, local invalidate, fast register) and of incoming
// SEND with Invalidate, and the table writes of the command unit, so the on-chip caches of
// MPT entries and MTT lines (set associative, LRU) always agree with the tables. Misses are
// DMA reads through the PCIe link and cost their latency; writes go through to host memory.
#pragma once
#include <systemc>

#include <vector>

#include "model/core/param.h"
#include "model/core/unit_clock.h"
#include "model/core/stats.h"
#include "model/hca/dma_port.h"
#include "model/hca/onchip_cache.h"
#include "tlm_if/contexts.h"
#include "tlm_if/wqe.h"

namespace hcasim {

/// Page-list entries of one Fast Register WR (QUERY_HCA max_fast_reg_pages).
constexpr uint32_t MAX_FAST_REG_PAGES = 512;

/// One physically contiguous piece of a translated range.
struct phys_seg {
    uint64_t pa;   ///< host physical address
    uint32_t len;  ///< bytes
};

/// Why a translation or a memory management operation failed. The caller maps it to a
/// completion status or a NAK; the value is also reported as the CQE vendor syndrome.
enum class xlate_status : uint8_t {
    ok = 0,
    bad_key = 1,         ///< no MPT entry of the right kind for the key, or its key byte differs
    bad_state = 2,       ///< the key is not Valid (Free: invalidated, unbound, not yet registered)
    bad_pd = 3,          ///< region / window belongs to another protection domain
    bad_qpn = 4,         ///< type 2 window bound to another QP
    no_access = 5,       ///< the region / window does not grant the requested access
    out_of_bounds = 6,   ///< range not inside the region / window
    bad_mtt = 7,         ///< a page of the range has no translation
    too_many_segs = 8,   ///< the range needs more segments than the caller can take
    bad_type = 9,        ///< operation not defined for this kind of key (e.g. invalidate a type 1 MW)
    busy = 10,           ///< windows are bound to the region
    shared = 11,         ///< the region is shared (or shared from): no invalidate / fast register
    not_enabled = 12,    ///< the QP was not created with fast register / the reserved L_Key
    bad_page_list = 13,  ///< fast register: too many pages, misaligned page, bad page size
    bad_zbva = 14,       ///< a window bind onto a zero-based region (o10-36.2.2)
};
const char* to_string(xlate_status s);

/// The QP an access or operation is made for.
struct xlate_owner {
    uint32_t pd = 0;       ///< the QP's (or its SRQ's) protection domain
    uint32_t qpn = 0;      ///< the QP number (type 2 windows)
    uint8_t mm_flags = 0;  ///< hw::qp_mm_flags of the QP
};

/// What the transport engine needs of address translation: key checks and translation of
/// data accesses, and the memory management operations of send WQEs and SEND with Invalidate.
class address_translation {
public:
    virtual ~address_translation() = default;
    virtual xlate_status translate(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len,
                                   uint32_t access, phys_seg* segs, unsigned max_segs, unsigned& nsegs,
                                   sc_core::sc_time& delay) = 0;
    virtual xlate_status check(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len,
                               uint32_t access, sc_core::sc_time& delay) = 0;
    virtual xlate_status bind_mw(const hw::wqe_bind_seg& b, const xlate_owner& who,
                                 sc_core::sc_time& delay) = 0;
    virtual xlate_status invalidate(uint32_t key, const xlate_owner& who, bool remote,
                                    sc_core::sc_time& delay) = 0;
    virtual xlate_status fast_register(const hw::wqe_fast_reg_seg& f, const xlate_owner& who,
                                       sc_core::sc_time& delay) = 0;
};

/// What the command unit needs of the memory tables (INIT_HCA, MPT/MTT entries, MR and MW
/// commands).
class memory_tables {
public:
    virtual ~memory_tables() = default;
    virtual void set_tables(uint64_t mpt_base, uint32_t num_mpts, uint64_t mtt_base, uint64_t num_mtts,
                            uint32_t num_qps) = 0;
    virtual bool read_mpt(uint32_t index, hw::mpt_entry& out, sc_core::sc_time& delay) = 0;
    /// Writes an MPT / MTT entry to its table; false if the index is out of range or the table
    /// is outside host memory.
    [[nodiscard]] virtual bool write_mpt(uint32_t index, const hw::mpt_entry& e, sc_core::sc_time& delay) = 0;
    [[nodiscard]] virtual bool write_mtt(uint64_t first, const hw::mtt_entry* entries, uint32_t count,
                                         sc_core::sc_time& delay) = 0;
    virtual xlate_status destroy(uint32_t index, sc_core::sc_time& delay) = 0;
    virtual uint32_t windows_bound_to(uint32_t qpn) const = 0;
};

class translation_unit final : public sc_core::sc_module, public address_translation, public memory_tables {
public:
    dma_port dma;

    param<double> clock_mhz;              ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> mpt_cache_entries;    ///< on-chip MPT cache entries
    param<unsigned> mpt_cache_ways;       ///< MPT cache associativity
    param<unsigned> mtt_cache_lines;      ///< on-chip MTT cache lines of 8 entries
    param<unsigned> mtt_cache_ways;       ///< MTT cache associativity
    param<std::string> mpt_cache_policy;  ///< lru|fifo|random
    param<std::string> mtt_cache_policy;  ///< lru|fifo|random
    param<std::string> mpt_cache_index;   ///< mod|hash: how an MPT index picks its set
    param<std::string> mtt_cache_index;   ///< mod|hash: how an MTT line picks its set
    param<unsigned> lookup_cycles;        ///< pipeline cycles of a lookup that hits
    param<unsigned> mm_op_cycles;         ///< pipeline cycles of a bind / invalidate / fast register
    param<unsigned> miss_slots;           ///< MPT/MTT misses outstanding at once (0: in order)

    counter lookups, mpt_hits, mpt_misses, mtt_hits, mtt_misses, faults, binds, invalidates, fast_registers,
        mm_op_errors;

    translation_unit(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock);

    /// Table locations (from INIT_HCA); num_qps sizes the per-QP type 2A window counts.
    void set_tables(uint64_t mpt_base, uint32_t num_mpts, uint64_t mtt_base, uint64_t num_mtts,
                    uint32_t num_qps) override;

    // ---- Accesses (transport engine) ----

    /// Translates [va, va + len) under `key` for `who` needing `access` (access_flags; 0 = local
    /// read, ACCESS_LOCAL_WRITE = local write, ACCESS_REMOTE_* = a remote request: the key is an
    /// R_Key of a region or a window). Fills segs[0..nsegs). len 0 checks nothing (C10-54.1.1).
    /// `delay` is the caller's local time on entry and when the translation is known on return.
    xlate_status translate(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len, uint32_t access,
                           phys_seg* segs, unsigned max_segs, unsigned& nsegs,
                           sc_core::sc_time& delay) override;

    /// Checks `key` for [va, va + len) like translate without walking the page table: the
    /// request-time check of a READ or atomic whose pages are translated later.
    xlate_status check(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len, uint32_t access,
                       sc_core::sc_time& delay) override;

    // ---- Memory management operations (send WQEs and SEND with Invalidate) ----

    /// Binds (or, length 0 on a type 1 window, unbinds) a window (C10-72..75, o10-37.2.29/30/33).
    xlate_status bind_mw(const hw::wqe_bind_seg& b, const xlate_owner& who, sc_core::sc_time& delay) override;
    /// Local Invalidate WR (remote = false) or incoming SEND with Invalidate (remote = true) of
    /// `key`: a fast-register region or a type 2 window becomes Free (o10-37.2.13..18, .44).
    xlate_status invalidate(uint32_t key, const xlate_owner& who, bool remote,
                            sc_core::sc_time& delay) override;
    /// Fast Register PMR WR: reads the page list, writes the MTT and makes the L_Key Valid
    /// (o10-37.2.5).
    xlate_status fast_register(const hw::wqe_fast_reg_seg& f, const xlate_owner& who,
                               sc_core::sc_time& delay) override;

    // ---- Table access for the command unit ----

    /// Reads entry `index` (through the cache).
    bool read_mpt(uint32_t index, hw::mpt_entry& out, sc_core::sc_time& delay) override;
    /// Writes entry `index` to host memory and the cache.
    bool write_mpt(uint32_t index, const hw::mpt_entry& e, sc_core::sc_time& delay) override;
    /// Writes `count` MTT entries from `entries` at `first`.
    bool write_mtt(uint64_t first, const hw::mtt_entry* entries, uint32_t count,
                   sc_core::sc_time& delay) override;
    /// Destroys entry `index` (Deregister MR, Deallocate MW): busy for a region with windows
    /// bound; a bound window is unbound first.
    xlate_status destroy(uint32_t index, sc_core::sc_time& delay) override;
    /// Type 2A windows bound to QP `qpn` (a QP with any may not be destroyed or reset).
    uint32_t windows_bound_to(uint32_t qpn) const override {
        return qpn < mw2a_bound_.size() ? mw2a_bound_[qpn] : 0;
    }

private:
    xlate_status resolve(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len, uint32_t access,
                         phys_seg* segs, unsigned max_segs, unsigned& nsegs, sc_core::sc_time& delay,
                         bool walk);
    xlate_status lookup(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len, uint32_t access,
                        phys_seg* segs, unsigned max_segs, unsigned& nsegs, sc_core::sc_time& delay,
                        bool walk);
    xlate_status walk_region(const hw::mpt_entry& mr, uint64_t va, uint64_t len, phys_seg* segs,
                             unsigned max_segs, unsigned& nsegs, sc_core::sc_time& delay, bool walk);
    xlate_status mm_done(xlate_status s, sc_core::sc_time& delay);
    void unbind(const hw::mpt_entry& mw, sc_core::sc_time& delay);
    /// Moves `delay` to when the unit takes a lookup or operation asked for at sim_now() + delay.
    /// In order (miss_slots 0): a lookup starts when the previous one (and its misses) finished;
    /// `results` false (miss slots): when the pipeline is free. Memory management operations
    /// always wait for every earlier lookup's result.
    /// The calls made at one simulated instant (a batch) wait only for those of earlier
    /// instants, each as if it came first; the unit is then busy for all of them (busy_until).
    /// SystemC runs one instant's callers in an order the model does not fix (docs/fabric.md,
    /// "Same-time events"): served in call order, whichever came second waited for the first.
    void busy_wait(sc_core::sc_time& delay, bool results = true);
    /// The call busy_wait() took ends at sim_now() + delay.
    void busy_until(const sc_core::sc_time& delay);
    bool mpt(uint32_t index, hw::mpt_entry& out, sc_core::sc_time& delay);
    bool mtt(uint64_t index, uint64_t& value, sc_core::sc_time& delay);
    /// With miss slots: the slot free soonest, `delay` moved to when it is (nullptr: in order).
    sc_core::sc_time* miss_slot(sc_core::sc_time& delay);

    struct mtt_line {
        uint64_t v[8] = {};
    };
    onchip_cache<hw::mpt_entry> mpt_cache_;
    onchip_cache<mtt_line> mtt_cache_;
    std::vector<uint32_t> mw2a_bound_;
    uint64_t mpt_base_ = 0, mtt_base_ = 0, num_mtts_ = 0;
    uint32_t num_mpts_ = 0;
    sc_core::sc_time hit_time_, mm_time_, free_at_;
    sc_core::sc_time done_at_;                  // with miss slots: when the last lookup's result is out
    sc_core::sc_time batch_at_;                 // the instant of the last call
    sc_core::sc_time batch_free_, batch_done_;  // free_at_, done_at_ before that instant's first call
    sc_core::sc_time batch_busy_;               // the time that instant's calls have taken
    sc_core::sc_time batch_start_;              // the earliest start of that instant's calls
    sc_core::sc_time started_;                  // when the unit took the last call
    std::vector<sc_core::sc_time> miss_free_;   // with miss slots: when each is free again
    std::vector<uint64_t> page_list_;           ///< fast register scratch (sized once)
};

}  // namespace hcasim
