// Stand-in for the HCA's DMA engine: streams DMA reads or writes into the PCIe link.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <cstdint>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim {

/// Issues `count` DMA transfers of `size_bytes` with at most `max_outstanding` in flight, using
/// temporal decoupling: transfer i is issued at max(issue of i-1, completion of i-max_outstanding)
/// as a b_transport with that local offset; the one SC_THREAD only wait()s when the next issue
/// lies more than quantum_ns ahead of simulated time. Addresses cycle through window_bytes from
/// `addr`. Write data is pattern(address) per byte.
class dma_traffic_gen : public sc_core::sc_module {
public:
    tlm_utils::simple_initiator_socket<dma_traffic_gen> out;  ///< to pcie_link.upstream_in

    param<double> quantum_ns;      ///< max local-time lead before synchronising
    param<uint64_t> window_bytes;  ///< address window the transfers cycle through

    counter transfers, bytes, errors;

    SC_HAS_PROCESS(dma_traffic_gen);
    explicit dma_traffic_gen(const sc_core::sc_module_name& name);

    /// Starts a run (before sc_start or from any process); a run already in progress is an error.
    void start(bool write, uint64_t addr, uint64_t size_bytes, uint64_t count, unsigned max_outstanding);

    bool busy() const { return busy_; }
    /// Notified when the last transfer of a run has completed.
    const sc_core::sc_event& done_event() const { return done_ev_; }
    /// Absolute time the first transfer of the last run was issued / the last one completed.
    const sc_core::sc_time& first_issue() const { return first_issue_; }
    const sc_core::sc_time& last_completion() const { return last_completion_; }
    /// Payload bytes of the last run.
    uint64_t run_bytes() const { return run_bytes_; }
    /// Payload bytes x 8 / (last completion - first issue), Gb/s.
    double bandwidth_gbps() const;

    /// The byte a write run stores at `addr`.
    static uint8_t pattern(uint64_t addr) { return uint8_t(addr ^ (addr >> 8) ^ (addr >> 16) ^ 0x5a); }

private:
    void run();

    struct job {
        bool write = false;
        uint64_t addr = 0, size = 0, count = 0;
        unsigned max_outstanding = 1;
    } job_;
    bool pending_ = false, busy_ = false;
    sc_core::sc_event start_ev_, done_ev_;
    sc_core::sc_time first_issue_, last_completion_;
    uint64_t run_bytes_ = 0;
    std::vector<uint8_t> buf_;
    std::vector<sc_core::sc_time> completions_;  // ring: completion of transfer i - max_outstanding
};

}  // namespace hcasim
