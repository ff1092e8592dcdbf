// The model's latency of each client operation of `hcasim serve` (docs/libibverbs.md): the
// simulated time from the doorbell that posts a work request (the provider's post) to the landing
// of its CQE in host memory, per QP and completion opcode. Measured in the serve layer: the
// doorbells the server forwards name the QP and the WQE counter, and a write watch on each CQ
// ring (host_memory::watch) wakes a thread at the simulated time a CQE lands, whose wqe_counter
// names the WQE. The firmware and the model know nothing of it.
//
// Memory stays bounded: per work queue one post time per ring slot, and per (QP, opcode) a
// reservoir of RESERVOIR samples (algorithm R, a fixed seed) beside the exact count, minimum,
// maximum and sum: the median and p99 are exact up to RESERVOIR operations, estimates beyond.
#pragma once
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "firmware/verbs.h"
#include "model/system/fabric.h"
#include "tlm_if/cqe.h"

namespace hcasim::serve {

class op_latency {
public:
    static constexpr size_t RESERVOIR = 4096;

    explicit op_latency(machine& m) : m_(m) {}

    /// A QP the server created for client process `pid` on `node` (a QP number used again
    /// replaces the earlier QP's entry; its statistics stay).
    void add_qp(unsigned node, int pid, const verbs::ibv_qp* qp);
    void add_srq(unsigned node, const verbs::ibv_srq* s);
    /// The QP's ring counters as the provider reports them (modify, query): after a Reset they
    /// start again from 0.
    void sync_qp(unsigned node, const verbs::ibv_qp* qp);
    /// A doorbell a client wrote at `in_page` of its UAR page (a doorbell word or an inline WQE),
    /// handled at simulated time `at`: the WQEs it posts were posted then.
    void doorbell(unsigned node, uint64_t in_page, const uint8_t* data, uint32_t bytes,
                  const sc_core::sc_time& at);
    /// Watches a CQ's ring for CQEs (again after a resize: the CQEs counted so far stay counted).
    void watch_cq(unsigned node, const verbs::ibv_cq* cq);
    /// Stops watching a CQ (before or after it is destroyed: `cq` is not read).
    void unwatch_cq(const verbs::ibv_cq* cq);

    /// Called for every CQE that lands on a watched CQ (--record), with the CQ (verbs::ibv_cq*).
    std::function<void(unsigned node, const void* cq, const hw::cqe& e)> on_cqe;

    /// {"ops": [{"pid", "node", "qp_num", "opcode", "count", "lat_min_us", "lat_median_us",
    /// "lat_p99_us", "lat_max_us", "lat_avg_us", "exact"}], "error_completions", "unmatched"}.
    nlohmann::ordered_json to_json() const;
    /// One line per (QP, opcode): count and median, under a heading; nothing without operations.
    void print_summary(std::FILE* f) const;

private:
    /// Latencies of one (QP, opcode), microseconds.
    struct distribution {
        uint64_t count = 0;
        uint64_t min_ps = 0, max_ps = 0, sum_ps = 0;  // integers: the mean of equal samples is theirs
        std::vector<double> reservoir;                // us
        uint64_t rng = 0x9E3779B97F4A7C15ull;
        void add(uint64_t ps);
    };
    /// A work queue's post times, one per ring slot: {WQE counter, simulated ps}.
    struct work_queue {
        uint16_t producer = 0;  // the counter of the next WQE (mod 2^16)
        std::vector<std::pair<uint16_t, uint64_t>> posted;
        void resize(uint8_t log_slots) { posted.assign(size_t(1) << log_slots, {0, UINT64_MAX}); }
        void post(uint16_t counter, uint64_t ps) { posted[counter & (posted.size() - 1)] = {counter, ps}; }
        /// Every WQE from `producer` up to (not including) `to`, posted at `ps`.
        void post_up_to(uint16_t to, uint64_t ps);
    };
    struct qp_entry {
        int pid = 0;
        unsigned node = 0;
        uint32_t qp_num = 0;
        uint32_t srqn = UINT32_MAX;  // its SRQ's number, UINT32_MAX: none
        work_queue sq, rq;
        std::map<uint8_t, distribution> ops;  // by CQE opcode
    };
    struct cq_watch {
        unsigned node = 0;
        const void* cq = nullptr;
        uint64_t pa = 0;
        uint8_t log_size = 0;
        uint64_t seen = 0;  // CQEs read so far
        int handle = -1;
        bool gone = false;
        sc_core::sc_event landed;
    };
    using key = std::pair<unsigned, uint32_t>;  // node, QP or SRQ number

    /// Reads every CQE that has landed since the last look.
    void scan(cq_watch& w);
    void completed(unsigned node, const hw::cqe& e, uint64_t now_ps);

    machine& m_;
    std::vector<std::unique_ptr<qp_entry>> qps_;  // every QP ever created, in order
    std::map<key, qp_entry*> live_qps_;
    std::map<key, work_queue> srqs_;
    std::map<const void*, std::shared_ptr<cq_watch>> cqs_;
    uint64_t error_completions_ = 0, unmatched_ = 0;
};

}  // namespace hcasim::serve
