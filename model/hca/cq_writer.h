// CQ writer: writes CQEs into completion queue rings in host memory with the owner bit,
// tracks each CQ's producer and (doorbell-reported) consumer index, detects overrun, and
// raises completion events (EQE + MSI write) for armed CQs.
//
// CQ context cache: `cqc_cache_entries` CQ contexts are on chip (set associative); a CQE for a
// CQ whose context is not cached first reads the CQ's entry from the CQC table in host memory
// through the `cqc_dma` port. The cache decides timing; the CQ state lives in this module.
//
// The unit runs as this TLM model (`impl=tlm`), as the RTL of rtl/cq_writer.sv verilated and
// driven pin by pin (`impl=rtl`, cq_writer_rtl), or as both side by side (`impl=both`): the TLM
// model writes host memory and decides the timing the rest of the HCA sees, the RTL gets the
// same transactions at the same times, and its host memory writes and answers are compared
// with the model's (bytes exactly, times within `time_tolerance_ns`); the first difference
// stops the run with a report. What stays in the model with impl=rtl (the CQ context cache,
// resize's copy, EQ doorbells) and the mirror the control path reads: docs/cosim.md.
// cq_writer.cpp is the TLM model, cq_writer_cosim.cpp the way to and from the RTL.
#pragma once
#include <systemc>
#include <tlm_utils/simple_target_socket.h>

#include <memory>
#include <string>
#include <vector>

#include "model/core/log.h"
#include "model/core/ring.h"
#include "model/core/param.h"
#include "model/core/timeline.h"
#include "model/core/unit_clock.h"
#include "model/core/stats.h"
#include "model/hca/cq_writer_probe.h"
#include "model/hca/cq_writer_rtl.h"
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
    /// Before query_cq or resize_cq (from a thread): waits until every completion handed to
    /// the CQ writer until now + `delay` has taken effect (impl=rtl: the RTL works behind the
    /// calls); `delay` is then 0. Nothing to wait for otherwise.
    virtual void settle(sc_core::sc_time& delay) { (void)delay; }
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
                        public cq_doorbell_sink,
                        private cq_rtl_client {
public:
    dma_port dma;
    dma_port cqc_dma;  ///< CQ context cache misses (reads of the CQC table)

    param<double> clock_mhz;              ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> write_cycles;         ///< cycles to format one CQE before its DMA write
    param<unsigned> cqc_cache_entries;    ///< CQ contexts on chip
    param<unsigned> cqc_cache_ways;       ///< CQ context cache associativity
    param<std::string> cqc_cache_policy;  ///< lru|fifo|random
    param<std::string> cqc_cache_index;   ///< mod|hash: how a CQN picks its set
    param<std::string> impl;              ///< tlm|rtl|both
    param<std::string> rtl_variant;       ///< reference|broken_owner (a deliberately wrong build)
    param<std::string> rtl_lib;           ///< a plug-in library (rtl/abi/hcasim_rtl.h) instead ("": none)
    param<std::string> waves;             ///< FST file of the RTL's pins ("": none)
    param<double> time_tolerance_ns;   ///< impl=both: how far the RTL's write times may lie from the model's
    param<std::string> dump_stimulus;  ///< --dump-stimulus: the unit's transactions to this file

    counter cqes, events, overruns, msi_writes, resizes, resize_moved, busy_ps, cqc_hits, cqc_misses;
    module_log log_;  ///< info: CQ errors, EQEs and MSIs that could not be written
    counter rtl_ops, rtl_cycles, rtl_compared, rtl_writes_compared, rtl_skew_max_ps, divergences;

    cq_writer(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock, unsigned max_cqs,
              unsigned max_eqs);
    ~cq_writer() override;

    /// True when the RTL runs (impl rtl or both), and when the model runs beside it (both).
    bool rtl_active() const { return bool(rtl_); }
    bool compares() const { return compare_; }
    /// impl=both: the report of the first difference between the model and the RTL ("" while
    /// they agree). The simulation was stopped when it was made.
    const std::string& divergence() const { return divergence_; }
    /// --dump-stimulus: writes the dump out (after the run; config_error naming the file if it
    /// cannot). Nothing without the option.
    void close_stimulus() {
        if (probe_) probe_->close();
    }
    /// Transactions handed to the RTL or waiting for their time, not yet taken by it.
    size_t rtl_pending() const { return waiting_.size() + handed_.size() + (parked_ ? 1 : 0); }

    /// Where the CQ context table is (INIT_HCA): cache misses read it. Empties the cache.
    void set_cqc_table(uint64_t base) override {
        cqc_base_ = base;
        cqc_cache_.clear();
    }
    /// Context changes from the command unit.
    void load_cq(uint32_t cqn, const hw::cq_context& c) override;
    void destroy_cq(uint32_t cqn) override;
    bool cq_valid(uint32_t cqn) const override { return cqn < live_.size() && live_[cqn]; }
    void load_eq(uint32_t eqn, const hw::eq_context& e) override;
    void set_msi(uint64_t addr, uint32_t data) override;
    /// CMD_RESIZE_CQ: copies the CQEs software has not consumed ([consumer, producer)) to the
    /// same counter values of the ring at `base` (2^log_size entries; owner bits for the new
    /// size), then writes to the new ring; producer and arm state are kept, `consumer` is taken
    /// as a doorbell's. DMA read + write of what is moved, from `delay` on. False (CQ unchanged)
    /// if the CQ is invalid or the entries do not fit (producer - consumer >= 2^log_size).
    bool resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer,
                   sc_core::sc_time& delay) override;
    /// The CQ's context as the HCA holds it (producer, consumer, arm, overrun live); false if invalid.
    bool query_cq(uint32_t cqn, hw::cq_context& c) const override;
    void settle(sc_core::sc_time& delay) override;
    /// CQ doorbell from software: new consumer index and arm request.
    void doorbell(uint32_t cqn, uint32_t consumer, hw::cq_arm arm) override;
    /// EQ doorbell: software consumed EQEs up to `consumer`.
    void eq_doorbell(uint32_t eqn, uint32_t consumer) override;

    /// Writes `e` (owner byte filled in here) to CQ `cqn`. `solicited` marks a solicited
    /// receive completion (for CQ_ARM_SOLICITED). `delay`: caller's local time in, time the
    /// CQE write has been posted out. Returns false if the CQ is invalid or overran.
    /// impl=rtl: the completion is queued for the RTL at caller's time + `delay` (after a
    /// context cache miss's read), `delay` is not advanced further, and the return is whether
    /// the CQ is loaded and not known to be in error: the RTL decides later.
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
    // The TLM model (cq_writer.cpp): the rules of rtl/cq_writer.sv's contract, with the answer
    // the RTL's rsp_* pins give.
    cq_rtl_answer tlm_complete(uint32_t cqn, hw::cqe& e, bool solicited, sc_core::sc_time& delay);
    cq_rtl_answer tlm_event(uint8_t type, uint32_t resource, sc_core::sc_time& delay, uint8_t subtype);
    /// An EQE (and the MSI after it); true if the EQE was written, `msi` whether an MSI was issued.
    bool write_eqe(uint32_t eqn, uint8_t type, uint32_t resource, sc_core::sc_time& delay, uint8_t subtype,
                   bool& msi);
    /// A CQE/EQE/MSI write: the DMA, the probe, and (both) the write the RTL must make.
    bool host_write(uint64_t addr, const void* data, uint32_t len, sc_core::sc_time& delay);
    /// The context cache before a completion: a miss's CQC read (timing only).
    void cqc_lookup(uint32_t cqn, sc_core::sc_time& delay);
    void start_rtl(const sc_core::sc_time& clock);  // impl=rtl|both: the transactor, the RTL

    // The way to and from the RTL (cq_writer_cosim.cpp).
    static constexpr cq_rtl_op::kind_t OP_COMPLETE = cq_rtl_op::COMPLETE, OP_EVENT = cq_rtl_op::EVENT,
                                       OP_CQC = cq_rtl_op::CQC, OP_EQC = cq_rtl_op::EQC,
                                       OP_DOORBELL = cq_rtl_op::DOORBELL, OP_MSI = cq_rtl_op::MSI;
    /// A transaction queued for the RTL, or a marker: SYNC and RESIZE stay in the model and run
    /// when everything queued before them has taken effect in the RTL (impl=rtl: settle(),
    /// resize_cq()).
    struct rtl_op : cq_rtl_op {
        enum marker_t : uint8_t { NONE, SYNC, RESIZE } marker = NONE;
        uint64_t seq = 0;            // order of the transaction
        sc_core::sc_time at;         // when the unit takes it
        sc_core::sc_time handed_at;  // when it was handed to the transactor
        cq_rtl_answer tlm{};         // both: the model's answer
    };
    /// A write the model made that the RTL must make too (both).
    struct expected_write {
        uint64_t addr = 0, seq = 0;
        uint32_t len = 0;
        bool ok = true;
        sc_core::sc_time issued;
        uint8_t data[64] = {};
    };
    /// Queues `o`, taken at `at`, for the RTL: handed to the transactor when due (impl=rtl: in
    /// time order, ties in call order; both: in call order, each not before its time).
    void to_rtl(rtl_op& o, const sc_core::sc_time& at);
    void release();  // SC_METHOD: hands the due operations to the transactor
    bool before(const rtl_op& a, const rtl_op& b) const {  // a is handed over before b
        return compare_ || a.at == b.at ? a.seq < b.seq : a.at < b.at;
    }
    void pump();        // after a retirement: a parked marker's turn may have come
    void run_marker();  // the SYNC or RESIZE marker due, everything before it retired
    bool resize_now(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer,
                    sc_core::sc_time& delay);
    bool resize_in_turn(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer,
                        sc_core::sc_time& delay);
    /// A completion or event: decided by the model (impl=tlm|both) and queued for the RTL
    /// (rtl|both), recorded by the probe; the model's `written` (impl=rtl: true).
    template <class Decide>
    bool request(rtl_op& o, sc_core::sc_time& delay, Decide decide);
    /// A context, doorbell or MSI register write: the model's state and/or queued for the RTL.
    void port_write(rtl_op& o);
    void record_input(const rtl_op& o, const sc_core::sc_time& t);  // to the probe
    void hand(const rtl_op& o);                                     // into handed_, and to the transactor
    void hand_over(const rtl_op& o);
    void rtl_answer(const cq_rtl_answer& a) override;
    void rtl_idle() override;
    /// Applies the port writes handed to the RTL before the next request to the mirror.
    void retire_port_writes();
    void apply_port_write(const rtl_op& o);
    void apply_answer(const rtl_op& o, const cq_rtl_answer& a);
    /// The RTL's host memory writes (the transactor's DMA socket ends here).
    void rtl_write(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void diverge(const std::string& what, const rtl_op* o, const std::string& detail);
    std::string describe(const rtl_op& o) const;

    std::vector<cq_state> cqs_;  // impl=rtl: the mirror of the RTL's contexts (docs/cosim.md)
    std::vector<uint8_t> live_;  // loaded CQs, as the command unit sees them
    onchip_cache<no_line> cqc_cache_;
    uint64_t cqc_base_ = 0;
    std::vector<eq_state> eqs_;
    uint64_t msi_addr_ = 0;
    uint32_t msi_data_ = 0;
    sc_core::sc_time format_time_;
    uint64_t format_ps_ = 0;

    std::unique_ptr<cq_writer_rtl> rtl_;
    std::unique_ptr<tlm_utils::simple_target_socket<cq_writer>> rtl_mem_;
    bool compare_ = false;           // impl=both
    std::vector<rtl_op> waiting_;    // heap: not yet handed (impl=rtl: by time, then call; both: by call)
    ring<rtl_op> handed_;            // handed to the transactor, not yet taken by the RTL, in order
    bool parked_ = false;            // a marker is due, waiting for handed_ to empty...
    rtl_op marker_;                  // ...this one
    ring<expected_write> expected_;  // both: the model's writes the RTL has not made yet
    sc_core::sc_event release_ev_, settled_ev_;
    uint64_t seq_ = 0;
    bool marker_done_ = false, marker_ok_ = false;  // the command unit's SYNC/RESIZE marker
    sc_core::sc_time marker_delay_;
    uint8_t next_tag_ = 0;
    sc_core::sc_time tolerance_;
    sc_core::sc_time last_answer_;  // when the RTL last answered a request
    std::string divergence_;
    std::unique_ptr<cq_writer_probe> probe_;  // --dump-stimulus
};

}  // namespace hcasim
