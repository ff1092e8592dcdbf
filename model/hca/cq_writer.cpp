#include "model/hca/cq_writer.h"

#include "model/core/hex.h"
#include "model/core/sim_time.h"

#include <algorithm>

namespace hcasim {

using namespace sc_core;

cq_writer::cq_writer(const sc_module_name& name, const sc_time& hca_clock, unsigned max_cqs, unsigned max_eqs)
    : sc_module(name),
      dma("dma"),
      cqc_dma("cqc_dma"),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      write_cycles("write_cycles", 8, "cycles", "cycles to format one CQE before its DMA write", {0, 100000}),
      cqc_cache_entries("cqc_cache_entries", 256, "entries",
                        "CQ contexts held on chip; a miss reads the CQ's CQC entry from host memory",
                        cache_entries_bounds()),
      cqc_cache_ways("cqc_cache_ways", 4, "ways", "CQ context cache associativity", cache_ways_bounds()),
      cqc_cache_policy("cqc_cache_policy", "lru", "", "CQ context cache replacement: lru, fifo or random",
                       {"lru", "fifo", "random"}),
      cqc_cache_index("cqc_cache_index", "mod", "", cache_index_help, {"mod", "hash"}),
      cqes("cqes", "CQEs written"),
      events("events", "EQEs written (completion and asynchronous events)"),
      overruns("overruns", "completions lost to a full CQ (CQ overrun)"),
      msi_writes("msi_writes", "interrupt (MSI) writes"),
      resizes("resizes", "CQs resized (CMD_RESIZE_CQ)"),
      resize_moved("resize_moved", "CQEs copied to a new ring by CQ resizes"),
      busy_ps("busy_ps", "ps spent formatting CQEs (write_cycles each; utilisation)"),
      cqc_hits("cqc_hits", "CQ context cache hits (a CQE written)"),
      cqc_misses("cqc_misses", "CQ context cache misses (DMA reads of CQC entries)"),
      cqs_(max_cqs),
      cqc_cache_(1, 1),
      eqs_(max_eqs) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    cqc_cache_.configure(cqc_cache_entries, cqc_cache_ways, cqc_cache_policy, cqc_cache_index);
    format_time_ = clock * double(write_cycles.get());
    format_ps_ = uint64_t(format_time_ / sc_time(1, SC_PS) + 0.5);
}

void cq_writer::load_cq(uint32_t cqn, const hw::cq_context& c) {
    if (cqn >= cqs_.size()) return;
    cq_state& s = cqs_[cqn];
    s = cq_state{};
    s.valid = true;
    if (!cqc_cache_.find(cqn))  // the command unit's table write goes through the cache
        cqc_cache_.insert(cqn);
    s.log_size = c.log_size;
    s.eqn = c.eqn;
    s.base = c.base;
}

void cq_writer::destroy_cq(uint32_t cqn) {
    if (cqn < cqs_.size()) {
        cqs_[cqn] = cq_state{};
        cqc_cache_.invalidate(cqn);
    }
}

void cq_writer::load_eq(uint32_t eqn, const hw::eq_context& e) {
    if (eqn >= eqs_.size()) return;
    eq_state& s = eqs_[eqn];
    s = eq_state{};
    s.valid = true;
    s.log_size = e.log_size;
    s.base = e.base;
}

void cq_writer::doorbell(uint32_t cqn, uint32_t consumer, hw::cq_arm arm) {
    if (!cq_valid(cqn)) return;
    cq_state& s = cqs_[cqn];
    s.consumer = consumer;
    if (arm != hw::CQ_ARM_NONE) s.arm = arm;
}

bool cq_writer::resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer, sc_time& delay) {
    if (!cq_valid(cqn) || log_size > 24) return false;
    cq_state& s = cqs_[cqn];
    consumer &= 0xFFFFFF;
    const uint64_t moved = (s.producer - consumer) & 0xFFFFFF;
    const uint64_t old_size = uint64_t(1) << s.log_size, new_size = uint64_t(1) << log_size;
    if (moved > old_size || moved >= new_size) return false;
    if (moved) {
        // Old slots of counter values producer - moved .. producer - 1, in at most two runs each
        // way (the rings wrap at different places).
        std::vector<hw::cqe> buf(moved);
        const uint64_t first = s.producer - moved;
        for (uint64_t done = 0; done < moved;) {
            const uint64_t slot = (first + done) & (old_size - 1);
            const uint64_t run = std::min(moved - done, old_size - slot);
            if (!dma.read(s.base + slot * sizeof(hw::cqe), &buf[done], uint32_t(run * sizeof(hw::cqe)),
                          delay))
                return false;
            done += run;
        }
        for (uint64_t i = 0; i < moved; ++i)
            buf[i].owner =
                uint8_t((buf[i].owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(first + i, log_size));
        for (uint64_t done = 0; done < moved;) {
            const uint64_t slot = (first + done) & (new_size - 1);
            const uint64_t run = std::min(moved - done, new_size - slot);
            if (!dma.write(base + slot * sizeof(hw::cqe), &buf[done], uint32_t(run * sizeof(hw::cqe)), delay))
                return false;
            done += run;
        }
    }
    s.base = base;
    s.log_size = log_size;
    s.consumer = consumer;
    ++resizes;
    resize_moved += moved;
    return true;
}

bool cq_writer::query_cq(uint32_t cqn, hw::cq_context& c) const {
    if (!cq_valid(cqn)) return false;
    const cq_state& s = cqs_[cqn];
    c = hw::cq_context{};
    c.cqn = cqn;
    c.log_size = s.log_size;
    c.valid = 1;
    c.eqn = s.eqn;
    c.base = s.base;
    c.producer = uint32_t(s.producer & 0xFFFFFF);
    c.consumer = s.consumer;
    c.arm = uint8_t(s.arm);
    c.overrun = s.overrun ? 1 : 0;
    return true;
}

void cq_writer::eq_doorbell(uint32_t eqn, uint32_t consumer) {
    if (eqn < eqs_.size()) eqs_[eqn].consumer = consumer;
}

bool cq_writer::complete(uint32_t cqn, hw::cqe& e, bool solicited, sc_time& delay) {
    if (!cq_valid(cqn)) return false;
    cq_state& s = cqs_[cqn];
    if (cqc_cache_.find(cqn)) {
        ++cqc_hits;
    } else {
        ++cqc_misses;
        cqc_cache_.insert(cqn);
        // Timing only: the context's data is not used, so a failed read decides nothing.
        (void)cqc_dma.read_timing(cqc_base_ + uint64_t(cqn) * sizeof(hw::cq_context), sizeof(hw::cq_context),
                                  delay);
    }
    const uint64_t size = uint64_t(1) << s.log_size;
    // Entries in use = written - consumed (consumer is 24-bit; the ring is smaller).
    const uint64_t used = (s.producer - s.consumer) & 0xFFFFFF;
    if (s.overrun || used >= size) {
        ++overruns;
        if (!s.overrun) {
            s.overrun = true;
            write_eqe(0, hw::EQE_CQ_ERROR, cqn, delay);
        }
        return false;
    }
    const sc_time begin = sim_now() + delay;
    delay += format_time_;
    busy_ps += format_ps_;
    e.owner = uint8_t((e.owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(s.producer, s.log_size));
    if (!dma.write(s.base + (s.producer & (size - 1)) * sizeof(hw::cqe), &e, sizeof e, delay)) {
        // The ring is outside host memory (PCIe access error): the CQ is in error, like an
        // overrun (CQ error event; the completion is lost and the QP's work goes on failing).
        ++overruns;
        s.overrun = true;
        HCASIM_LOG(log_, info,
                   "CQ " << cqn << ": CQE write to " << hex_address(s.base) << " failed: CQ error");
        write_eqe(0, hw::EQE_CQ_ERROR, cqn, delay);
        return false;
    }
    if (tl_)
        tl_->span(track_, "CQE", begin, sim_now() + delay,
                  "\"cq\":" + std::to_string(cqn) + ",\"qp\":" + std::to_string(e.qpn) +
                      ",\"status\":" + std::to_string(e.status));
    ++s.producer;
    ++cqes;
    if (s.arm == hw::CQ_ARM_NEXT ||
        (s.arm == hw::CQ_ARM_SOLICITED && (solicited || e.status != hw::CQE_SUCCESS))) {
        s.arm = hw::CQ_ARM_NONE;
        write_eqe(s.eqn, hw::EQE_COMPLETION, cqn, delay);
    }
    return true;
}

void cq_writer::post_event(uint8_t type, uint32_t resource, sc_time& delay, uint8_t subtype) {
    write_eqe(0, type, resource, delay, subtype);
}

void cq_writer::write_eqe(uint32_t eqn, uint8_t type, uint32_t resource, sc_time& delay, uint8_t subtype) {
    if (eqn >= eqs_.size() || !eqs_[eqn].valid) return;
    eq_state& q = eqs_[eqn];
    const uint64_t size = uint64_t(1) << q.log_size;
    hw::eqe ev{};
    ev.type = type;
    ev.subtype = subtype;
    ev.resource = resource;
    ev.owner = hw::cqe_owner_for(q.producer, q.log_size);
    if (!dma.write(q.base + (q.producer & (size - 1)) * sizeof(hw::eqe), &ev, sizeof ev, delay)) {
        // The EQ is outside host memory: the event is lost (nothing else can report it).
        HCASIM_LOG(log_, info,
                   "EQ " << eqn << ": event 0x" << std::hex << unsigned(type) << " lost, EQE write to "
                         << hex_address(q.base) << " failed");
        return;
    }
    ++q.producer;
    ++events;
    if (msi_addr_) {
        if (!dma.write(msi_addr_, &msi_data_, sizeof msi_data_, delay))
            HCASIM_LOG(log_, info, "MSI write to " << hex_address(msi_addr_) << " failed");
        ++msi_writes;
    }
}

}  // namespace hcasim
