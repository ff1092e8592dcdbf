#include "model/hca/translation_unit.h"
#include "model/core/sim_time.h"

#include <algorithm>

namespace hcasim {

using namespace sc_core;

namespace {

constexpr uint32_t REMOTE_ACCESS =
    hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ | hw::ACCESS_REMOTE_ATOMIC;
constexpr uint32_t KNOWN_ACCESS =
    hw::ACCESS_LOCAL_WRITE | REMOTE_ACCESS | hw::ACCESS_MW_BIND | hw::ACCESS_ZERO_BASED;

bool is_window(const hw::mpt_entry& e) { return e.type != hw::MPT_TYPE_MR; }

}  // namespace

const char* to_string(xlate_status s) {
    switch (s) {
    case xlate_status::ok: return "ok";
    case xlate_status::bad_key: return "bad key";
    case xlate_status::bad_state: return "key not valid";
    case xlate_status::bad_pd: return "protection domain mismatch";
    case xlate_status::bad_qpn: return "window bound to another QP";
    case xlate_status::no_access: return "access right missing";
    case xlate_status::out_of_bounds: return "out of bounds";
    case xlate_status::bad_mtt: return "no translation";
    case xlate_status::too_many_segs: return "too many segments";
    case xlate_status::bad_type: return "operation not allowed on this key type";
    case xlate_status::busy: return "windows bound";
    case xlate_status::shared: return "shared region";
    case xlate_status::not_enabled: return "not enabled on the QP";
    case xlate_status::bad_page_list: return "bad page list";
    case xlate_status::bad_zbva: return "window bind to a zero-based region";
    }
    return "?";
}

translation_unit::translation_unit(const sc_module_name& name, const sc_time& hca_clock)
    : sc_module(name),
      dma("dma"),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      mpt_cache_entries("mpt_cache_entries", 1024, "entries", "on-chip MPT cache entries",
                        cache_entries_bounds()),
      mpt_cache_ways("mpt_cache_ways", 4, "ways", "MPT cache associativity", cache_ways_bounds()),
      mtt_cache_lines("mtt_cache_lines", 4096, "lines", "on-chip MTT cache lines of 8 entries",
                      cache_entries_bounds()),
      mtt_cache_ways("mtt_cache_ways", 4, "ways", "MTT cache associativity", cache_ways_bounds()),
      mpt_cache_policy("mpt_cache_policy", "lru", "", "MPT cache replacement: lru, fifo or random",
                       {"lru", "fifo", "random"}),
      mtt_cache_policy("mtt_cache_policy", "lru", "", "MTT cache replacement: lru, fifo or random",
                       {"lru", "fifo", "random"}),
      mpt_cache_index("mpt_cache_index", "mod", "", cache_index_help, {"mod", "hash"}),
      mtt_cache_index("mtt_cache_index", "mod", "", cache_index_help, {"mod", "hash"}),
      lookup_cycles("lookup_cycles", 4, "cycles", "pipeline cycles of a lookup that hits in the caches",
                    {0, 100000}),
      mm_op_cycles("mm_op_cycles", 16, "cycles",
                   "pipeline cycles of a memory management operation (bind, invalidate, fast register)",
                   {0, 100000}),
      miss_slots("miss_slots", 0, "misses",
                 "MPT/MTT misses outstanding at once; later lookups go on through the pipeline and results "
                 "leave in order (0: in order, a miss holds the unit until its entry has arrived)",
                 {0, 256}),
      lookups("lookups", "translations requested (zero-length ones excluded)"),
      mpt_hits("mpt_hits", "MPT cache hits"),
      mpt_misses("mpt_misses", "MPT cache misses (DMA reads of 128-byte MPT entries)"),
      mtt_hits("mtt_hits", "MTT cache hits"),
      mtt_misses("mtt_misses", "MTT cache misses (DMA reads of 64-byte MTT lines)"),
      faults("faults", "translations refused (key, state, PD, QP, rights, bounds)"),
      binds("binds", "memory window bind operations executed"),
      invalidates("invalidates", "invalidate operations executed (Local Invalidate, SEND with Invalidate)"),
      fast_registers("fast_registers", "Fast Register operations executed"),
      mm_op_errors("mm_op_errors", "memory management operations refused"),
      mpt_cache_(1, 1),
      mtt_cache_(1, 1) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    mpt_cache_.configure(mpt_cache_entries, mpt_cache_ways, mpt_cache_policy, mpt_cache_index);
    mtt_cache_.configure(mtt_cache_lines, mtt_cache_ways, mtt_cache_policy, mtt_cache_index);
    hit_time_ = clock * double(lookup_cycles.get());
    mm_time_ = clock * double(mm_op_cycles.get());
    miss_free_.assign(miss_slots, SC_ZERO_TIME);
    page_list_.resize(MAX_FAST_REG_PAGES);
}

void translation_unit::set_tables(uint64_t mpt_base, uint32_t num_mpts, uint64_t mtt_base, uint64_t num_mtts,
                                  uint32_t num_qps) {
    mpt_base_ = mpt_base;
    num_mpts_ = num_mpts;
    mtt_base_ = mtt_base;
    num_mtts_ = num_mtts;
    mpt_cache_.clear();
    mtt_cache_.clear();
    mw2a_bound_.assign(num_qps, 0);
}

// ---------------------------------------------------------------- tables and caches

void translation_unit::busy_wait(sc_time& delay, bool results) {
    const sc_time& now = sim_now();
    if (now != batch_at_) {  // the first call of this instant: the unit as earlier instants left it
        batch_at_ = now;
        batch_free_ = free_at_;
        batch_done_ = done_at_;
        batch_busy_ = SC_ZERO_TIME;
        batch_start_ = sc_max_time();
    }
    const sc_time t = now + delay, free = results ? std::max(batch_free_, batch_done_) : batch_free_;
    if (t < free) delay += free - t;
    started_ = now + delay;
    batch_start_ = std::min(batch_start_, started_);
}

sc_time* translation_unit::miss_slot(sc_time& delay) {
    if (miss_free_.empty()) return nullptr;
    sc_time* slot = &*std::min_element(miss_free_.begin(), miss_free_.end());
    if (*slot > sim_now() + delay) delay = *slot - sim_now();
    return slot;
}

void translation_unit::busy_until(const sc_time& delay) {
    // The calls of one instant add up, in any order: the unit is free after the last to end,
    // and not before it has spent their times one after the other from the first start.
    const sc_time end = sim_now() + delay;
    batch_busy_ += end - started_;
    free_at_ = std::max({free_at_, end, batch_start_ + batch_busy_});
}

bool translation_unit::mpt(uint32_t index, hw::mpt_entry& out, sc_time& delay) {
    if (index >= num_mpts_) return false;
    if (const hw::mpt_entry* hit = mpt_cache_.find(index)) {
        ++mpt_hits;
        out = *hit;
        return true;
    }
    ++mpt_misses;
    hw::mpt_entry e;
    sc_time* slot = miss_slot(delay);
    const bool read = dma.read(mpt_base_ + uint64_t(index) * sizeof(hw::mpt_entry), &e, sizeof e, delay);
    if (slot) *slot = sim_now() + delay;
    if (!read) return false;
    mpt_cache_.insert(index) = e;
    out = e;
    return true;
}

bool translation_unit::mtt(uint64_t index, uint64_t& value, sc_time& delay) {
    if (index >= num_mtts_) return false;
    const uint64_t line = index / 8;
    if (const mtt_line* hit = mtt_cache_.find(line)) {
        ++mtt_hits;
        value = hit->v[index % 8];
        return true;
    }
    ++mtt_misses;
    mtt_line l;
    sc_time* slot = miss_slot(delay);
    const bool read = dma.read(mtt_base_ + line * 8 * sizeof(hw::mtt_entry), l.v, sizeof l.v, delay);
    if (slot) *slot = sim_now() + delay;
    if (!read) return false;
    mtt_cache_.insert(line) = l;
    value = l.v[index % 8];
    return true;
}

bool translation_unit::read_mpt(uint32_t index, hw::mpt_entry& out, sc_time& delay) {
    return mpt(index, out, delay);
}

bool translation_unit::write_mpt(uint32_t index, const hw::mpt_entry& e, sc_time& delay) {
    if (index >= num_mpts_) return false;
    if (!dma.write(mpt_base_ + uint64_t(index) * sizeof e, &e, sizeof e, delay)) return false;
    if (hw::mpt_entry* c = mpt_cache_.find(index))
        *c = e;  // write through: the on-chip copy stays equal to the table
    return true;
}

bool translation_unit::write_mtt(uint64_t first, const hw::mtt_entry* entries, uint32_t count,
                                 sc_time& delay) {
    if (!count || first >= num_mtts_ || count > num_mtts_ - first) return false;
    if (!dma.write(mtt_base_ + first * sizeof(hw::mtt_entry), entries,
                   count * uint32_t(sizeof(hw::mtt_entry)), delay))
        return false;
    for (uint64_t line = first / 8; line <= (first + count - 1) / 8; ++line) mtt_cache_.invalidate(line);
    return true;
}

// ---------------------------------------------------------------- accesses

xlate_status translation_unit::check(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len,
                                     uint32_t access, sc_time& delay) {
    unsigned n = 0;
    return resolve(key, who, va, len, access, nullptr, 0, n, delay, false);
}

xlate_status translation_unit::translate(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len,
                                         uint32_t access, phys_seg* segs, unsigned max_segs, unsigned& nsegs,
                                         sc_time& delay) {
    return resolve(key, who, va, len, access, segs, max_segs, nsegs, delay, true);
}

xlate_status translation_unit::resolve(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len,
                                       uint32_t access, phys_seg* segs, unsigned max_segs, unsigned& nsegs,
                                       sc_time& delay, bool walk) {
    nsegs = 0;
    if (len == 0) return xlate_status::ok;  // C10-54.1.1: a zero-length segment is not checked at all
    ++lookups;
    const bool in_order = miss_free_.empty();
    busy_wait(delay, in_order);  // with miss slots only the pipeline: misses of earlier lookups overlap
    const sc_time start = delay;
    delay += hit_time_;
    const xlate_status s = lookup(key, who, va, len, access, segs, max_segs, nsegs, delay, walk);
    if (in_order) {
        busy_until(delay);
    } else {
        // The pipeline takes the next lookup after this one's cycles; results leave in order,
        // so a hit behind a miss of an earlier instant waits for it (and nothing is placed ahead
        // of an earlier lookup).
        busy_until(start + hit_time_);
        const sc_time end = sim_now() + delay;
        done_at_ = std::max(done_at_, end);
        delay = std::max(batch_done_, end) - sim_now();
    }
    if (s != xlate_status::ok) ++faults;
    return s;
}

xlate_status translation_unit::lookup(uint32_t key, const xlate_owner& who, uint64_t va, uint64_t len,
                                      uint32_t access, phys_seg* segs, unsigned max_segs, unsigned& nsegs,
                                      sc_time& delay, bool walk) {
    const bool remote = access & REMOTE_ACCESS;
    if (key == hw::RESERVED_LKEY) {
        // The reserved L_Key names host physical memory, only locally and only where enabled.
        if (remote) return xlate_status::bad_key;
        if (!(who.mm_flags & hw::QP_MM_RESERVED_LKEY)) return xlate_status::not_enabled;
        if (walk) {
            if (max_segs == 0) return xlate_status::too_many_segs;
            segs[nsegs++] = {va, uint32_t(len)};
        }
        return xlate_status::ok;
    }
    hw::mpt_entry e;
    if (!mpt(hw::key_index(key), e, delay) || e.state == hw::MPT_STATE_INVALID || e.key != key)
        return xlate_status::bad_key;
    if (is_window(e)) {
        if (!remote) return xlate_status::bad_key;  // a window's R_Key is never an L_Key
        if (e.state != hw::MPT_STATE_VALID) return xlate_status::bad_state;
        // Access-time association checks (C10-76.2.1, o10-37.2.42, o10-37.2.43).
        if (e.type != hw::MPT_TYPE_MW2A && e.pd != who.pd) return xlate_status::bad_pd;
        if (e.type != hw::MPT_TYPE_MW1 && e.qpn != who.qpn) return xlate_status::bad_qpn;
        if ((e.access & access) != access) return xlate_status::no_access;  // C10-77
        if (va < e.start_va || len > e.length || va - e.start_va > e.length - len)
            return xlate_status::out_of_bounds;  // C10-61: byte granularity
        hw::mpt_entry mr;
        // The region under the window must still be a valid region of the window's PD (C10-79.2.2).
        if (!mpt(e.mr_index, mr, delay) || mr.type != hw::MPT_TYPE_MR || mr.state != hw::MPT_STATE_VALID)
            return xlate_status::bad_state;
        if (mr.pd != e.pd) return xlate_status::bad_pd;
        return walk_region(mr, e.mr_va + (va - e.start_va), len, segs, max_segs, nsegs, delay, walk);
    }
    if (e.state != hw::MPT_STATE_VALID) return xlate_status::bad_state;
    if (e.pd != who.pd) return xlate_status::bad_pd;  // C10-54.2.1, C10-56
    if ((e.access & access) != access)
        return xlate_status::no_access;  // C10-47 (local read always), C10-55, C10-57
    return walk_region(e, va, len, segs, max_segs, nsegs, delay, walk);
}

xlate_status translation_unit::walk_region(const hw::mpt_entry& mr, uint64_t va, uint64_t len, phys_seg* segs,
                                           unsigned max_segs, unsigned& nsegs, sc_time& delay, bool walk) {
    if (va < mr.start_va || len > mr.length || va - mr.start_va > mr.length - len)
        return xlate_status::out_of_bounds;
    if (!walk) return xlate_status::ok;
    // Region offset -> (MTT entry, offset in its page or block). page_offset places the
    // region's first byte in the first page / block.
    uint64_t off = va - mr.start_va + mr.page_offset;
    uint64_t left = len;
    const bool blocks = mr.flags & hw::MPT_BLOCK_LIST;
    const uint64_t unit = blocks ? uint64_t(mr.block_size) : uint64_t(1) << mr.log_page_size;
    if (unit == 0) return xlate_status::bad_mtt;
    while (left) {
        const uint64_t n = blocks ? off / unit : off >> mr.log_page_size;
        const uint64_t in = blocks ? off % unit : off & (unit - 1);
        if (n >= mr.mtt_count) return xlate_status::bad_mtt;
        uint64_t m = 0;
        if (!mtt(mr.mtt_base + n, m, delay) || !(m & hw::MTT_PRESENT)) return xlate_status::bad_mtt;
        const uint64_t chunk = std::min<uint64_t>(left, unit - in);
        const uint64_t pa = (blocks ? hw::mtt_address(m) : hw::mtt_address(m) & ~(unit - 1)) + in;
        if (nsegs && segs[nsegs - 1].pa + segs[nsegs - 1].len == pa &&
            uint64_t(segs[nsegs - 1].len) + chunk <= 0xFFFFFFFFull) {
            segs[nsegs - 1].len += uint32_t(chunk);  // physically contiguous pieces merge
        } else {
            if (nsegs == max_segs) return xlate_status::too_many_segs;
            segs[nsegs++] = {pa, uint32_t(chunk)};
        }
        off += chunk;
        left -= chunk;
    }
    return xlate_status::ok;
}

// ---------------------------------------------------------------- memory management operations

xlate_status translation_unit::mm_done(xlate_status s, sc_time& delay) {
    busy_until(delay);
    if (s != xlate_status::ok) ++mm_op_errors;
    return s;
}

void translation_unit::unbind(const hw::mpt_entry& mw, sc_time& delay) {
    hw::mpt_entry mr;
    if (mpt(mw.mr_index, mr, delay) && mr.bound_mws) {
        --mr.bound_mws;
        // The entry was just read: the write goes to the same address and cannot fail.
        (void)write_mpt(mw.mr_index, mr, delay);
    }
    if (mw.type == hw::MPT_TYPE_MW2A && mw.qpn < mw2a_bound_.size() && mw2a_bound_[mw.qpn])
        --mw2a_bound_[mw.qpn];
}

xlate_status translation_unit::bind_mw(const hw::wqe_bind_seg& b, const xlate_owner& who, sc_time& delay) {
    ++binds;
    busy_wait(delay);
    delay += mm_time_;
    const uint32_t index = hw::key_index(b.mw_key);
    hw::mpt_entry w;
    if (!mpt(index, w, delay) || w.state == hw::MPT_STATE_INVALID || !is_window(w) ||
        hw::key_index(b.new_key) != index)
        return mm_done(xlate_status::bad_key, delay);
    const bool type1 = w.type == hw::MPT_TYPE_MW1;
    // A type 1 window is bound by the Bind MW verb only, a type 2 window by a bind WR only
    // (o10-37.2.34, o10-37.2.35).
    if (type1 != bool(b.bind_flags & hw::BIND_FROM_VERB)) return mm_done(xlate_status::bad_type, delay);
    // A type 1 window is named by its handle (the index): its owner (the verb) steps the key on
    // every bind, including binds the HCA refuses, so the key byte of mw_key is not compared.
    if (!type1 && w.state != hw::MPT_STATE_FREE)
        return mm_done(xlate_status::bad_state, delay);  // o10-37.2.29/30: bind needs a Free window
    if (w.pd != who.pd) return mm_done(xlate_status::bad_pd, delay);  // C10-72
    if (b.length == 0) {
        if (!type1) return mm_done(xlate_status::bad_type, delay);  // o10-37.2.40: no zero-length type 2 bind
        // C10-66.2.4: a zero-length bind revokes all access through the window.
        if (w.state == hw::MPT_STATE_VALID) unbind(w, delay);
        w.state = hw::MPT_STATE_FREE;
        w.key = b.new_key;
        w.length = 0;
        w.access = 0;
        if (!write_mpt(index, w, delay)) return mm_done(xlate_status::bad_key, delay);
        return mm_done(xlate_status::ok, delay);
    }
    if (b.access & ~(REMOTE_ACCESS | hw::ACCESS_ZERO_BASED | hw::ACCESS_LOCAL_WRITE | hw::ACCESS_MW_BIND))
        return mm_done(xlate_status::no_access, delay);
    const uint32_t mr_index = hw::key_index(b.mr_lkey);
    hw::mpt_entry mr;
    if (b.mr_lkey == hw::RESERVED_LKEY || !mpt(mr_index, mr, delay) || mr.type != hw::MPT_TYPE_MR ||
        mr.state != hw::MPT_STATE_VALID || mr.key != b.mr_lkey)
        return mm_done(xlate_status::bad_key, delay);                // o10-37.2.8: never the reserved L_Key
    if (mr.pd != w.pd) return mm_done(xlate_status::bad_pd, delay);  // C10-75
    if (!(mr.access & hw::ACCESS_MW_BIND)) return mm_done(xlate_status::no_access, delay);  // C10-73
    if (mr.access & hw::ACCESS_ZERO_BASED) return mm_done(xlate_status::bad_zbva, delay);   // o10-36.2.2
    if ((b.access & (hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC)) &&
        !(mr.access & hw::ACCESS_LOCAL_WRITE))
        return mm_done(xlate_status::no_access, delay);  // C10-62, C10-74
    if (b.addr < mr.start_va || b.length > mr.length || b.addr - mr.start_va > mr.length - b.length)
        return mm_done(xlate_status::out_of_bounds, delay);  // C10-75
    if (w.state == hw::MPT_STATE_VALID)
        unbind(w, delay);           // a type 1 rebind drops the previous binding (C10-67, C10-68)
    if (!mpt(mr_index, mr, delay))  // re-read: the unbind may have changed the same region
        return mm_done(xlate_status::bad_key, delay);
    ++mr.bound_mws;
    if (!write_mpt(mr_index, mr, delay)) return mm_done(xlate_status::bad_key, delay);
    w.state = hw::MPT_STATE_VALID;
    w.key = b.new_key;
    w.access = b.access & (REMOTE_ACCESS | hw::ACCESS_ZERO_BASED);
    w.start_va = (b.access & hw::ACCESS_ZERO_BASED) ? 0 : b.addr;
    w.length = b.length;
    w.mr_index = mr_index;
    w.mr_va = b.addr;
    w.qpn = type1 ? 0 : who.qpn;
    if (!write_mpt(index, w, delay)) return mm_done(xlate_status::bad_key, delay);
    if (w.type == hw::MPT_TYPE_MW2A && who.qpn < mw2a_bound_.size()) ++mw2a_bound_[who.qpn];
    return mm_done(xlate_status::ok, delay);
}

xlate_status translation_unit::invalidate(uint32_t key, const xlate_owner& who, bool remote, sc_time& delay) {
    (void)remote;  // the same rules hold for Local Invalidate and SEND with Invalidate
    ++invalidates;
    busy_wait(delay);
    delay += mm_time_;
    const uint32_t index = hw::key_index(key);
    hw::mpt_entry e;
    if (key == hw::RESERVED_LKEY || !mpt(index, e, delay) || e.state == hw::MPT_STATE_INVALID)
        return mm_done(xlate_status::bad_key, delay);  // o10-37.2.8
    if (e.type == hw::MPT_TYPE_MW1)
        return mm_done(xlate_status::bad_type, delay);  // o10-37.2.26, o10-37.2.27
    if (e.type == hw::MPT_TYPE_MR) {
        if (e.flags & (hw::MPT_SHARED | hw::MPT_SHARE_SRC))
            return mm_done(xlate_status::shared, delay);  // o10-37.2.13, .15, .16
        if (!(e.flags & hw::MPT_FAST_REG))
            return mm_done(xlate_status::bad_type, delay);  // o10-37.2.13: Register MR regions
        if (e.pd != who.pd) return mm_done(xlate_status::bad_pd, delay);
        if (e.state == hw::MPT_STATE_FREE)
            return mm_done(xlate_status::ok, delay);  // already Free: nothing to do
        if (e.key != key) return mm_done(xlate_status::bad_key, delay);
        if (e.bound_mws) return mm_done(xlate_status::busy, delay);  // o10-37.2.17
        e.state = hw::MPT_STATE_FREE;
        if (!write_mpt(index, e, delay)) return mm_done(xlate_status::bad_key, delay);
        return mm_done(xlate_status::ok, delay);
    }
    // Type 2 window (o10-37.2.29, o10-37.2.30, o10-37.2.44).
    if (e.state == hw::MPT_STATE_FREE)
        return mm_done(e.pd == who.pd ? xlate_status::ok : xlate_status::bad_pd, delay);
    if (e.key != key) return mm_done(xlate_status::bad_key, delay);
    if (e.qpn != who.qpn) return mm_done(xlate_status::bad_qpn, delay);
    if (e.type == hw::MPT_TYPE_MW2B && e.pd != who.pd) return mm_done(xlate_status::bad_pd, delay);
    unbind(e, delay);
    e.state = hw::MPT_STATE_FREE;
    if (!write_mpt(index, e, delay)) return mm_done(xlate_status::bad_key, delay);
    return mm_done(xlate_status::ok, delay);
}

xlate_status translation_unit::fast_register(const hw::wqe_fast_reg_seg& f, const xlate_owner& who,
                                             sc_time& delay) {
    ++fast_registers;
    busy_wait(delay);
    delay += mm_time_;
    if (!(who.mm_flags & hw::QP_MM_FAST_REG))
        return mm_done(xlate_status::not_enabled, delay);  // o10-36.2.1, o10-37.2.5
    const uint32_t index = hw::key_index(f.lkey);
    hw::mpt_entry e;
    if (f.lkey == hw::RESERVED_LKEY || !mpt(index, e, delay) || e.state == hw::MPT_STATE_INVALID ||
        e.type != hw::MPT_TYPE_MR)
        return mm_done(xlate_status::bad_key, delay);
    if (e.flags & (hw::MPT_SHARED | hw::MPT_SHARE_SRC))
        return mm_done(xlate_status::shared, delay);  // o10-36.2.5
    if (!(e.flags & hw::MPT_FAST_REG)) return mm_done(xlate_status::bad_type, delay);
    if (e.state != hw::MPT_STATE_FREE)
        return mm_done(xlate_status::bad_state, delay);  // o10-37.2.5: the L_Key must be Free
    if (e.pd != who.pd) return mm_done(xlate_status::bad_pd, delay);
    if ((f.access & ~KNOWN_ACCESS) || ((f.access & (hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_ATOMIC)) &&
                                       !(f.access & hw::ACCESS_LOCAL_WRITE)))
        return mm_done(xlate_status::no_access, delay);  // C10-48
    const uint64_t page = uint64_t(1) << std::min<uint8_t>(f.log_page_size, 63);
    if (f.log_page_size < 12 || f.log_page_size > 30 || f.page_count > e.mtt_reserved ||
        f.page_count > page_list_.size() || f.page_offset >= page || f.length == 0 ||
        f.page_offset + f.length > uint64_t(f.page_count) * page)
        return mm_done(xlate_status::bad_page_list, delay);
    if (!dma.read(f.page_list_pa, page_list_.data(), f.page_count * uint32_t(sizeof(uint64_t)), delay))
        return mm_done(xlate_status::bad_page_list, delay);
    for (uint32_t i = 0; i < f.page_count; ++i) {
        if (page_list_[i] & (page - 1))
            return mm_done(xlate_status::bad_page_list, delay);  // pages start on a page boundary
        page_list_[i] |= hw::MTT_PRESENT;
    }
    if (!write_mtt(e.mtt_base, reinterpret_cast<const hw::mtt_entry*>(page_list_.data()), f.page_count,
                   delay))
        return mm_done(xlate_status::bad_mtt, delay);  // its translation table is outside host memory
    e.state = hw::MPT_STATE_VALID;
    e.key = f.lkey;
    e.access = f.access;
    e.start_va = (f.access & hw::ACCESS_ZERO_BASED) ? 0 : f.iova;
    e.length = f.length;
    e.log_page_size = f.log_page_size;
    e.page_offset = f.page_offset;
    e.mtt_count = f.page_count;
    e.flags &= uint8_t(~hw::MPT_BLOCK_LIST);
    if (!write_mpt(index, e, delay)) return mm_done(xlate_status::bad_key, delay);
    return mm_done(xlate_status::ok, delay);
}

xlate_status translation_unit::destroy(uint32_t index, sc_time& delay) {
    hw::mpt_entry e;
    if (!mpt(index, e, delay)) return xlate_status::bad_key;
    if (e.state != hw::MPT_STATE_INVALID) {
        if (e.type == hw::MPT_TYPE_MR && e.bound_mws) return xlate_status::busy;
        if (is_window(e) && e.state == hw::MPT_STATE_VALID)
            unbind(e, delay);  // C10-69, C10-70: accesses through it fail from now on
    }
    const hw::mpt_entry none{};
    if (!write_mpt(index, none, delay)) return xlate_status::bad_key;
    return xlate_status::ok;
}

}  // namespace hcasim
