#include "model/hca/cq_writer.h"

#include "model/core/hex.h"
#include "model/core/sim_time.h"
#include "model/hca/cq_stimulus.h"

#include <algorithm>
#include <cstring>

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
      impl("impl", "tlm", "",
           "tlm: the TLM model writes the CQEs; rtl: the verilated RTL (rtl/cq_writer.sv) does, clocked at "
           "clock_mhz; both: the model writes and decides the timing, the RTL gets the same transactions "
           "and the first difference in its writes or answers stops the run (docs/cosim.md)",
           {"tlm", "rtl", "both"}),
      rtl_variant("rtl_variant", "reference", "",
                  "the verilated build impl=rtl|both runs: reference, or broken_owner (built with "
                  "CQW_BROKEN_OWNER: the owner bit ignores the ring's wrap; for testing the comparator)",
                  cq_writer_rtl::variants()),
      rtl_lib("rtl_lib", "", "",
              "impl=rtl|both: a plug-in library (a team's verilated build behind the C ABI of "
              "rtl/abi/hcasim_rtl.h) to run instead of the built-in rtl_variant (docs/cosim.md)"),
      waves("waves", "", "",
            "impl=rtl|both: write the RTL's pins to this FST file (GTKWave); units and nodes naming the "
            "same file share it (--waves FILE)"),
      time_tolerance_ns("time_tolerance_ns", 1000.0, "ns",
                        "impl=both: a host memory write of the RTL issued more than this before or after "
                        "the model's same write is a divergence",
                        {0.0, 1e9}),
      dump_stimulus("dump_stimulus", "", "",
                    "write the unit's transactions at the RTL's pins (inputs, host memory writes, "
                    "answers) to this file (--dump-stimulus hca.cq_writer=FILE; docs/cosim.md)"),
      cqes("cqes", "CQEs written"),
      events("events", "EQEs written (completion and asynchronous events)"),
      overruns("overruns", "completions lost to a full CQ (CQ overrun)"),
      msi_writes("msi_writes", "interrupt (MSI) writes"),
      resizes("resizes", "CQs resized (CMD_RESIZE_CQ)"),
      resize_moved("resize_moved", "CQEs copied to a new ring by CQ resizes"),
      busy_ps("busy_ps", "ps spent formatting CQEs (write_cycles each; utilisation)"),
      cqc_hits("cqc_hits", "CQ context cache hits (a CQE written)"),
      cqc_misses("cqc_misses", "CQ context cache misses (DMA reads of CQC entries)"),
      rtl_ops("rtl_ops",
              "transactions handed to the RTL (impl=rtl|both): completions, events, context "
              "writes, doorbells, MSI register writes"),
      rtl_cycles("rtl_cycles", "clock cycles the RTL ran (its clock is gated while idle)"),
      rtl_compared("rtl_compared",
                   "impl=both: answers of the model and the RTL compared (completions, events)"),
      rtl_writes_compared("rtl_writes_compared",
                          "impl=both: host memory writes of the model and the RTL compared"),
      rtl_skew_max_ps(
          "rtl_skew_max_ps",
          "impl=both: the largest time between a host memory write of the model and the RTL's same write"),
      divergences("divergences",
                  "impl=both: differences between the model and the RTL (the first stops the run)"),
      cqs_(max_cqs),
      live_(max_cqs, 0),
      cqc_cache_(1, 1),
      eqs_(max_eqs) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    cqc_cache_.configure(cqc_cache_entries, cqc_cache_ways, cqc_cache_policy, cqc_cache_index);
    format_time_ = clock * double(write_cycles.get());
    format_ps_ = uint64_t(format_time_ / sc_time(1, SC_PS) + 0.5);
    if (impl.get() != "tlm") start_rtl(clock);
    if (!dump_stimulus.get().empty())
        probe_ = open_cq_stimulus(dump_stimulus, this->name(), clock, write_cycles);
}

// Context writes, doorbells and MSI registers: the model's state at once (impl=tlm|both), the
// RTL's through its ports in order with the transactions (impl=rtl|both; the mirror the
// control path reads follows the RTL: cq_writer_cosim.cpp).

void cq_writer::load_cq(uint32_t cqn, const hw::cq_context& c) {
    if (cqn >= cqs_.size()) return;
    live_[cqn] = 1;
    if (!cqc_cache_.find(cqn))  // the command unit's table write goes through the cache
        cqc_cache_.insert(cqn);
    rtl_op o;
    o.kind = OP_CQC;
    o.code = 1;
    o.num = cqn;
    o.addr = c.base;
    o.log_size = c.log_size;
    o.eqn = c.eqn;
    port_write(o);
}

void cq_writer::destroy_cq(uint32_t cqn) {
    if (cqn >= cqs_.size()) return;
    live_[cqn] = 0;
    cqc_cache_.invalidate(cqn);
    rtl_op o;
    o.kind = OP_CQC;
    o.code = 2;
    o.num = cqn;
    port_write(o);
}

void cq_writer::load_eq(uint32_t eqn, const hw::eq_context& e) {
    rtl_op o;
    o.kind = OP_EQC;
    o.num = eqn;
    o.addr = e.base;
    o.log_size = e.log_size;
    port_write(o);
}

void cq_writer::set_msi(uint64_t addr, uint32_t data) {
    rtl_op o;
    o.kind = OP_MSI;
    o.addr = addr;
    o.value = data;
    port_write(o);
}

void cq_writer::doorbell(uint32_t cqn, uint32_t consumer, hw::cq_arm arm) {
    if (!cq_valid(cqn)) return;
    rtl_op o;
    o.kind = OP_DOORBELL;
    o.num = cqn;
    o.value = consumer & 0xFFFFFF;
    o.code = uint8_t(arm);
    port_write(o);
}

void cq_writer::port_write(rtl_op& o) {
    if (probe_ && (!rtl_ || compare_)) record_input(o, sim_now());  // (rtl: when handed over)
    if (rtl_) to_rtl(o, sim_now());
    if (!rtl_ || compare_) apply_port_write(o);
}

void cq_writer::apply_port_write(const rtl_op& o) {
    switch (o.kind) {
    case OP_CQC: {
        if (o.num >= cqs_.size()) return;
        cq_state& s = cqs_[o.num];
        if (o.code == 1) {
            s = cq_state{};
            s.valid = true;
            s.log_size = o.log_size;
            s.eqn = o.eqn;
            s.base = o.addr;
        } else if (o.code == 2) {
            s = cq_state{};
        } else if (o.code == 3 && s.valid) {
            s.base = o.addr;
            s.log_size = o.log_size;
            s.consumer = o.value;
        }
        return;
    }
    case OP_EQC: {
        if (o.num >= eqs_.size()) return;
        eq_state& s = eqs_[o.num];
        s = eq_state{};
        s.valid = true;
        s.log_size = o.log_size;
        s.base = o.addr;
        return;
    }
    case OP_DOORBELL: {
        if (o.num >= cqs_.size() || !cqs_[o.num].valid) return;
        cq_state& s = cqs_[o.num];
        s.consumer = o.value;
        if (o.code != hw::CQ_ARM_NONE) s.arm = hw::cq_arm(o.code);
        return;
    }
    case OP_MSI:
        msi_addr_ = o.addr;
        msi_data_ = o.value;
        return;
    default: return;
    }
}

bool cq_writer::resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer, sc_time& delay) {
    if (rtl_ && !compare_) return resize_in_turn(cqn, base, log_size, consumer, delay);
    return resize_now(cqn, base, log_size, consumer, delay);
}

bool cq_writer::resize_now(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer, sc_time& delay) {
    if (!cq_valid(cqn) || log_size > 24 || cqs_[cqn].overrun) return false;
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
    rtl_op o;
    o.kind = OP_CQC;
    o.code = 3;
    o.num = cqn;
    o.addr = base;
    o.log_size = log_size;
    o.value = consumer;
    if (!rtl_ || compare_) {
        if (probe_) record_input(o, sim_now() + delay);
        if (rtl_)
            to_rtl(o, sim_now());  // behind what the RTL has still to do: it writes that to the old ring too
    } else {
        hand(o);  // impl=rtl, in the queue's turn: before anything queued after the command
    }
    apply_port_write(o);
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

void cq_writer::cqc_lookup(uint32_t cqn, sc_time& delay) {
    if (cqc_cache_.find(cqn)) {
        ++cqc_hits;
        return;
    }
    ++cqc_misses;
    cqc_cache_.insert(cqn);
    // Timing only: the context's data is not used, so a failed read decides nothing.
    (void)cqc_dma.read_timing(cqc_base_ + uint64_t(cqn) * sizeof(hw::cq_context), sizeof(hw::cq_context),
                              delay);
}

template <class Decide>
bool cq_writer::request(rtl_op& o, sc_time& delay, Decide decide) {
    const sc_time at = sim_now() + delay;  // both: the RTL takes it when the model does
    if (rtl_ || probe_) o.tag = next_tag_++;
    if (rtl_ && !compare_) {
        to_rtl(o, at);  // (recorded when handed over)
        return true;
    }
    if (probe_) record_input(o, at);
    o.tlm = decide(delay);
    o.tlm.tag = o.tag;
    if (probe_) probe_->answer(sim_now() + delay, o.tlm);
    if (rtl_) to_rtl(o, at);
    return o.tlm.written;
}

bool cq_writer::complete(uint32_t cqn, hw::cqe& e, bool solicited, sc_time& delay) {
    if (!cq_valid(cqn)) {
        if (!rtl_ && !probe_) return false;
        // (the RTL and a stimulus dump see it too: the RTL answers "no such CQ")
    } else {
        cqc_lookup(cqn, delay);
    }
    rtl_op o;
    o.kind = OP_COMPLETE;
    o.num = cqn;
    o.solicited = solicited;
    if (rtl_ || probe_) o.cqe = e;
    const bool written = request(o, delay, [&](sc_time& d) { return tlm_complete(cqn, e, solicited, d); });
    return rtl_ && !compare_ ? cq_valid(cqn) && !cqs_[cqn].overrun : written;
}

cq_rtl_answer cq_writer::tlm_complete(uint32_t cqn, hw::cqe& e, bool solicited, sc_time& delay) {
    cq_rtl_answer a;
    if (!cq_valid(cqn)) {
        a.reason = CQR_NO_CQ;
        return a;
    }
    cq_state& s = cqs_[cqn];
    const uint64_t size = uint64_t(1) << s.log_size;
    // Entries in use = written - consumed (consumer is 24-bit; the ring is smaller).
    const uint64_t used = (s.producer - s.consumer) & 0xFFFFFF;
    if (s.overrun || used >= size) {
        ++overruns;
        a.reason = CQR_OVERRUN;
        if (!s.overrun) {
            s.overrun = true;
            a.eqe = write_eqe(0, hw::EQE_CQ_ERROR, cqn, delay, 0, a.msi);
        }
        return a;
    }
    const sc_time begin = sim_now() + delay;
    delay += format_time_;
    busy_ps += format_ps_;
    e.owner = uint8_t((e.owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(s.producer, s.log_size));
    if (!host_write(s.base + (s.producer & (size - 1)) * sizeof(hw::cqe), &e, sizeof e, delay)) {
        // The ring is outside host memory (PCIe access error): the CQ is in error, like an
        // overrun (CQ error event; the completion is lost and the QP's work goes on failing).
        ++overruns;
        s.overrun = true;
        HCASIM_LOG(log_, info,
                   "CQ " << cqn << ": CQE write to " << hex_address(s.base) << " failed: CQ error");
        a.reason = CQR_CQE_ERR;
        a.eqe = write_eqe(0, hw::EQE_CQ_ERROR, cqn, delay, 0, a.msi);
        return a;
    }
    if (tl_)
        tl_->span(track_, "CQE", begin, sim_now() + delay,
                  "\"cq\":" + std::to_string(cqn) + ",\"qp\":" + std::to_string(e.qpn) +
                      ",\"status\":" + std::to_string(e.status));
    ++s.producer;
    ++cqes;
    a.written = true;
    if (s.arm == hw::CQ_ARM_NEXT ||
        (s.arm == hw::CQ_ARM_SOLICITED && (solicited || e.status != hw::CQE_SUCCESS))) {
        s.arm = hw::CQ_ARM_NONE;
        a.disarmed = true;
        a.eqe = write_eqe(s.eqn, hw::EQE_COMPLETION, cqn, delay, 0, a.msi);
    }
    return a;
}

void cq_writer::post_event(uint8_t type, uint32_t resource, sc_time& delay, uint8_t subtype) {
    rtl_op o;
    o.kind = OP_EVENT;
    o.code = type;
    o.num = resource;
    o.subtype = subtype;
    request(o, delay, [&](sc_time& d) { return tlm_event(type, resource, d, subtype); });
}

cq_rtl_answer cq_writer::tlm_event(uint8_t type, uint32_t resource, sc_time& delay, uint8_t subtype) {
    cq_rtl_answer a;
    if (eqs_.empty() || !eqs_[0].valid) {
        a.reason = CQR_NO_EQ;
        return a;
    }
    a.eqe = a.written = write_eqe(0, type, resource, delay, subtype, a.msi);
    if (!a.written) a.reason = CQR_EQE_ERR;
    return a;
}

bool cq_writer::write_eqe(uint32_t eqn, uint8_t type, uint32_t resource, sc_time& delay, uint8_t subtype,
                          bool& msi) {
    msi = false;
    if (eqn >= eqs_.size() || !eqs_[eqn].valid) return false;
    eq_state& q = eqs_[eqn];
    const uint64_t size = uint64_t(1) << q.log_size;
    hw::eqe ev{};
    ev.type = type;
    ev.subtype = subtype;
    ev.resource = resource;
    ev.owner = hw::cqe_owner_for(q.producer, q.log_size);
    if (!host_write(q.base + (q.producer & (size - 1)) * sizeof(hw::eqe), &ev, sizeof ev, delay)) {
        // The EQ is outside host memory: the event is lost (nothing else can report it).
        HCASIM_LOG(log_, info,
                   "EQ " << eqn << ": event 0x" << std::hex << unsigned(type) << " lost, EQE write to "
                         << hex_address(q.base) << " failed");
        return false;
    }
    ++q.producer;
    ++events;
    if (msi_addr_) {
        if (!host_write(msi_addr_, &msi_data_, sizeof msi_data_, delay))
            HCASIM_LOG(log_, info, "MSI write to " << hex_address(msi_addr_) << " failed");
        ++msi_writes;
        msi = true;
    }
    return true;
}

bool cq_writer::host_write(uint64_t addr, const void* data, uint32_t len, sc_time& delay) {
    const sc_time issued = sim_now() + delay;
    const bool ok = dma.write(addr, data, len, delay);
    if (probe_) probe_->write(issued, addr, data, len, !ok);
    if (compare_) {
        if (expected_.full()) expected_.grow(expected_.slots() * 2);
        expected_write& w = expected_.slot(expected_.push());
        w.addr = addr;
        w.len = len;
        w.ok = ok;
        w.seq = seq_;  // the transaction to_rtl() is about to number
        w.issued = issued;
        std::memcpy(w.data, data, std::min<uint32_t>(len, sizeof w.data));
    }
    return ok;
}

}  // namespace hcasim
