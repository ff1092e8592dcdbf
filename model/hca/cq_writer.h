// CQ writer: writes CQEs into completion queue rings in host memory with the owner bit,
// tracks each CQ's producer and (doorbell-reported) consumer index, detects overrun, and
// raises completion events (EQE + MSI write) for armed CQs.
//
// CQ context cache: `cqc_cache_entries` CQ contexts are on chip (set associative); a CQE for a
// CQ whose context is not cached first reads the CQ's entry from the CQC table in host memory
// through the `cqc_dma` port. The cache decides timing; the CQ state lives in this module.
#pragma once
#include <systemc>

#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/timeline.h"
#include "model/core/unit_clock.h"
#include "model/core/stats.h"
#include "model/hca/dma_port.h"
#include "model/hca/onchip_cache.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"
#include "tlm_if/mmio_map.h"

namespace hcasim {

/// Where the transport engine's completions and asynchronous events go.
class completion_sink {
public:
    virtual ~completion_sink() = default;
    virtual bool complete(uint32_t cqn, hw::cqe& e, bool solicited, sc_core::sc_time& delay) = 0;
    virtual void post_event(uint8_t type, uint32_t resource, sc_core::sc_time& delay,
                            uint8_t subtype = 0) = 0;
};

/// What the command unit needs of the CQ and EQ contexts.
class cq_control {
public:
    virtual ~cq_control() = default;
    virtual void set_cqc_table(uint64_t base) = 0;
    virtual void load_cq(uint32_t cqn, const hw::cq_context& c) = 0;
    virtual void destroy_cq(uint32_t cqn) = 0;
    virtual bool cq_valid(uint32_t cqn) const = 0;
    virtual void load_eq(uint32_t eqn, const hw::eq_context& e) = 0;
    virtual bool resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer,
                           sc_core::sc_time& delay) = 0;
    virtual bool query_cq(uint32_t cqn, hw::cq_context& c) const = 0;
};

/// What the doorbell unit hands on: CQ and EQ doorbells and the MSI registers.
class cq_doorbell_sink {
public:
    virtual ~cq_doorbell_sink() = default;
    virtual void doorbell(uint32_t cqn, uint32_t consumer, hw::cq_arm arm) = 0;
    virtual void eq_doorbell(uint32_t eqn, uint32_t consumer) = 0;
    virtual void set_msi(uint64_t addr, uint32_t data) = 0;
};

class cq_writer final : public sc_core::sc_module,
                        public completion_sink,
                        public cq_control,
                        public cq_doorbell_sink {
public:
    dma_port dma;
    dma_port cqc_dma;  ///< CQ context cache misses (reads of the CQC table)

    param<double> clock_mhz;              ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> write_cycles;         ///< cycles to format one CQE before its DMA write
    param<unsigned> cqc_cache_entries;    ///< CQ contexts on chip
    param<unsigned> cqc_cache_ways;       ///< CQ context cache associativity
    param<std::string> cqc_cache_policy;  ///< lru|fifo|random
    param<std::string> cqc_cache_index;   ///< mod|hash: how a CQN picks its set

    counter cqes, events, overruns, msi_writes, resizes, resize_moved, busy_ps, cqc_hits, cqc_misses;
    module_log log_;  ///< info: CQ errors, EQEs and MSIs that could not be written

    cq_writer(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock, unsigned max_cqs,
              unsigned max_eqs);

    /// Where the CQ context table is (INIT_HCA): cache misses read it. Empties the cache.
    void set_cqc_table(uint64_t base) override {
        cqc_base_ = base;
        cqc_cache_.clear();
    }
    /// Context changes from the command unit.
    void load_cq(uint32_t cqn, const hw::cq_context& c) override;
    void destroy_cq(uint32_t cqn) override;
    bool cq_valid(uint32_t cqn) const override { return cqn < cqs_.size() && cqs_[cqn].valid; }
    void load_eq(uint32_t eqn, const hw::eq_context& e) override;
    void set_msi(uint64_t addr, uint32_t data) override {
        msi_addr_ = addr;
        msi_data_ = data;
    }
    /// CMD_RESIZE_CQ: copies the CQEs software has not consumed ([consumer, producer)) to the
    /// same counter values of the ring at `base` (2^log_size entries; owner bits for the new
    /// size), then writes to the new ring; producer and arm state are kept, `consumer` is taken
    /// as a doorbell's. DMA read + write of what is moved, from `delay` on. False (CQ unchanged)
    /// if the CQ is invalid or the entries do not fit (producer - consumer >= 2^log_size).
    bool resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer,
                   sc_core::sc_time& delay) override;
    /// The CQ's context as the HCA holds it (producer, consumer, arm, overrun live); false if invalid.
    bool query_cq(uint32_t cqn, hw::cq_context& c) const override;
    /// CQ doorbell from software: new consumer index and arm request.
    void doorbell(uint32_t cqn, uint32_t consumer, hw::cq_arm arm) override;
    /// EQ doorbell: software consumed EQEs up to `consumer`.
    void eq_doorbell(uint32_t eqn, uint32_t consumer) override;

    /// Writes `e` (owner byte filled in here) to CQ `cqn`. `solicited` marks a solicited
    /// receive completion (for CQ_ARM_SOLICITED). `delay`: caller's local time in, time the
    /// CQE write has been posted out. Returns false if the CQ is invalid or overran.
    bool complete(uint32_t cqn, hw::cqe& e, bool solicited, sc_core::sc_time& delay) override;
    /// Writes an asynchronous event to EQ 0 (and MSI).
    void post_event(uint8_t type, uint32_t resource, sc_core::sc_time& delay, uint8_t subtype = 0) override;

    /// --timeline: a span per CQE written, on a track of node `node`.
    void set_timeline(timeline* tl, unsigned node) {
        tl_ = tl;
        track_ = tl->track(node, "CQ writer");
    }

private:
    timeline* tl_ = nullptr;
    unsigned track_ = 0;
    struct cq_state {
        bool valid = false, overrun = false;
        uint8_t log_size = 0;
        hw::cq_arm arm = hw::CQ_ARM_NONE;
        uint16_t eqn = 0;
        uint64_t base = 0;
        uint64_t producer = 0;  // CQEs written (not wrapped)
        uint32_t consumer = 0;  // last consumer index from software (mod 2^24)
    };
    struct eq_state {
        bool valid = false;
        uint8_t log_size = 0;
        uint64_t base = 0;
        uint64_t producer = 0;
        uint32_t consumer = 0;
    };
    void write_eqe(uint32_t eqn, uint8_t type, uint32_t resource, sc_core::sc_time& delay,
                   uint8_t subtype = 0);

    std::vector<cq_state> cqs_;
    onchip_cache<no_line> cqc_cache_;
    uint64_t cqc_base_ = 0;
    std::vector<eq_state> eqs_;
    uint64_t msi_addr_ = 0;
    uint32_t msi_data_ = 0;
    sc_core::sc_time format_time_;
    uint64_t format_ps_ = 0;
};

}  // namespace hcasim
