// Host CPU: runs application processes and implements the host_bus the firmware uses.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/host/host_memory.h"
#include "tlm_if/host_bus.h"

namespace hcasim {

/// The CPU side of one node. Loads/stores reach host memory through `mem` (DMI when granted),
/// MMIO reaches the HCA's BAR0 through `mmio` (into the PCIe link's downstream port).
/// Applications are SystemC processes that call the firmware, which calls this host_bus from
/// the application's process; every cost is a parameter charged with wait() in the calling
/// process. Each process is one application thread on a core of its own (`cores` of them): its
/// deferred costs are its own, so two threads' CPU work overlaps in simulated time, while what
/// they share (the PCIe link, the HCA, memory) contends there.
class host_cpu : public sc_core::sc_module, public host_bus {
public:
    tlm_utils::simple_initiator_socket<host_cpu> mem;   ///< to host_memory.cpu
    tlm_utils::simple_initiator_socket<host_cpu> mmio;  ///< to pcie_link.downstream_in

    param<double> verb_call_ns;       ///< cost of entering a verb
    param<double> build_wqe_ns;       ///< cost of writing one send WQE
    param<double> build_recv_wqe_ns;  ///< cost of writing one receive WQE
    param<double> poll_cqe_ns;        ///< cost of one CQ poll (one CQE read or an empty look)
    param<double> memcpy_64b_ns;      ///< cost of copying 64 bytes
    param<double> mmio_issue_ns;      ///< CPU cost of issuing one posted MMIO store
    param<double> wake_ns;            ///< delay from a watched write landing to the spinning CPU seeing it
    param<unsigned> cores;            ///< application threads that run at once (workloads' --threads)
    static constexpr unsigned default_cores = 1;  ///< cores unless configured

    counter mmio_writes, mmio_reads, waits;

    SC_HAS_PROCESS(host_cpu);
    /// `memory` is the coherent memory whose writes wake spinning software (watches).
    host_cpu(const sc_core::sc_module_name& name, host_memory& memory);

    void mem_read(uint64_t pa, void* dst, size_t n) override;
    void mem_write(uint64_t pa, const void* src, size_t n) override;
    void mmio_write(uint64_t bar_offset, const void* src, size_t n) override;
    uint32_t mmio_read32(uint64_t bar_offset) override;
    void cpu_cost(cpu_op op, uint32_t count) override;
    void cpu_cost_deferred(cpu_op op, uint32_t count) override;
    void cpu_settle() override { settle(); }
    void mem_write_early(uint64_t pa, const void* src, size_t n) override;
    bool wait_write(uint64_t pa, size_t n, uint64_t timeout_ns) override;
    uint64_t now_ns() const override;
    void sleep_ns(uint64_t ns) override;

private:
    /// Waits for the deferred costs (before any bus access).
    void settle();
    double cost_ns(cpu_op op, uint32_t count) const;
    /// The calling process's cpu_cost_deferred charges not yet waited for.
    sc_core::sc_time& deferred() const;
    // Deferred charges per process (a thread's costs are its own); the last one looked up
    // first, as one process usually makes many calls in a row.
    struct deferred_time {
        const sc_core::sc_process_b* proc;
        sc_core::sc_time t;
    };
    mutable std::vector<deferred_time> deferred_;  // (now_ns, a const query, may add the entry)
    mutable size_t last_ = 0;
    host_memory& memory_;
    sc_core::sc_event watch_ev_;
    // wait_write's timeouts, without a timed notification per wait (the kernel keeps a
    // cancelled one queued until its time, and most waits end by their write): the waiters
    // with a deadline, and one event armed at the earliest (tick_at_) that wakes those due.
    struct waiter {
        sc_core::sc_event* ev;
        sc_core::sc_time deadline;
    };
    std::vector<waiter> waiters_;
    sc_core::sc_event tick_;
    sc_core::sc_time tick_at_;  // tick_ is armed for this time if it lies ahead
    static constexpr double tick_step_ns = 10000.0;
    void tick_method();
    void arm_tick(const sc_core::sc_time& deadline);
    tlm::tlm_generic_payload mmio_gp_;  // mmio_write's payload, while no store is in flight
    bool mmio_gp_busy_ = false;
};

}  // namespace hcasim
