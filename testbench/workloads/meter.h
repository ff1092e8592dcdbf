// The runner's side of a run_observer (workloads.h): the phase boundaries, each size's row and
// its counters, and progress within a size, fed from the runner's own loops.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/core/stats.h"
#include "testbench/workloads/workloads.h"

namespace hcasim::workloads {

class run_meter {
public:
    /// The run's work per size is estimated from its messages and their packets (a message
    /// costs the host about as much as a few packets: doorbell, WQE, completion); the estimate
    /// of the time left follows from it.
    explicit run_meter(const run_spec& spec);

    /// Phase `phase` of the spec starts measuring (`rep` holds its workload and seed).
    void phase_begin(size_t phase, const run_report& rep);
    /// Size `si` of the phase starts: `total` iterations or messages (`unit`) to do. Takes the
    /// counters' snapshot the size's row is measured from (`counted`: the node that reports).
    void size_begin(size_t si, uint64_t total, const char* unit, bool counted);
    /// `done` of the size's total are done: cheap (one comparison) unless a percent more is.
    void step(uint64_t done) {
        if (obs_ && done >= next_) report(done);
    }
    /// The size's row (the last of rep.results) is complete: it gets the counters that changed
    /// since size_begin (if `counted` there), and goes to the observer.
    void row(run_report& rep);
    void phase_end(const run_report& rep);

private:
    void report(uint64_t done);

    run_observer* obs_;
    const run_spec& spec_;
    std::vector<std::vector<double>> cost_;  ///< per phase and size: its share of the run's work
    double before_ = 0;                      ///< the share of the sizes done
    size_t phase_ = 0, size_ = 0;
    uint64_t total_ = 0, next_ = 0;
    const char* unit_ = "iters";
    bool counted_ = false;
    std::unordered_map<const counter*, uint64_t> c0_;  ///< every counter at the size's start
};

}  // namespace hcasim::workloads
