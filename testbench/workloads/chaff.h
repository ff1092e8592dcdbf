// HCASIM_CHAFF=SEED, a test aid (docs/fabric.md, "Same-time events"): dummy timed events at
// pseudo-random times. SystemC's timed-event queue is a heap keyed on time alone, so events
// queued at other times change the order in which it hands out events due at one instant; a
// model whose results do not depend on that order gives the same outputs with and without chaff
// (testbench/tests/hcasim_order_test.cpp). The chaff touches nothing of the model: no counter, no
// parameter, no output. Unset, nothing is built.
#pragma once
#include <systemc>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace hcasim::workloads {

class chaff : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(chaff);
    /// The chaff HCASIM_CHAFF asks for (null when it is unset or empty); throws config_error
    /// naming the variable if its value is not a decimal seed.
    static std::unique_ptr<chaff> from_env();
    chaff(sc_core::sc_module_name name, uint64_t seed);

    static constexpr unsigned events = 16;            ///< dummy events kept queued
    static constexpr uint64_t max_delay_ps = 200000;  ///< each is due 1 ps to 200 ns ahead

private:
    /// Re-queues the events due now, at new random times, while the model has activity of its own.
    void wake();
    /// Whether anything but the chaff is queued (cancels the chaff's events to find out when unsure).
    bool model_active();

    std::vector<std::unique_ptr<sc_core::sc_event>> ev_;
    std::vector<sc_core::sc_time> due_;  ///< when each event fires (<= now: fired, to re-queue)
    std::mt19937_64 rng_;
};

}  // namespace hcasim::workloads
