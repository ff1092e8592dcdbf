#include "model/host/host_cpu.h"

#include <cstring>
#include <optional>

#include "model/core/hex.h"
#include "model/core/sim_time.h"

namespace hcasim {

using namespace sc_core;

host_cpu::host_cpu(const sc_module_name& name, host_memory& memory)
    : sc_module(name),
      mem("mem"),
      mmio("mmio"),
      verb_call_ns("verb_call_ns", 10.0, "ns", "CPU cost of entering a verb (checks, locks)", {0, 1e6}),
      build_wqe_ns("build_wqe_ns", 25.0, "ns", "CPU cost of writing one send WQE into the ring", {0, 1e6}),
      build_recv_wqe_ns("build_recv_wqe_ns", 15.0, "ns", "CPU cost of writing one receive WQE", {0, 1e6}),
      poll_cqe_ns("poll_cqe_ns", 20.0, "ns", "CPU cost of one poll_cq call that reads a CQE or finds none",
                  {0, 1e6}),
      memcpy_64b_ns("memcpy_64b_ns", 2.0, "ns", "CPU cost of copying 64 bytes", {0, 1e6}),
      mmio_issue_ns("mmio_issue_ns", 10.0, "ns",
                    "CPU cost of issuing one posted MMIO store (write-combining)", {0, 1e6}),
      wake_ns(
          "wake_ns", 30.0, "ns",
          "delay from a watched write landing in memory to the spinning CPU seeing it (cache-line transfer)",
          {0, 1e6}),
      cores("cores", default_cores, "cores",
            "cores of the host: application threads that run at once, each charging its own CPU costs "
            "(a workload's --threads may not exceed it)",
            {1, 4096}),
      mmio_writes("mmio_writes", "posted MMIO writes issued"),
      mmio_reads("mmio_reads", "MMIO reads issued"),
      waits("waits", "times software slept on a watched address"),
      memory_(memory) {
    SC_METHOD(tick_method);
    sensitive << tick_;
    dont_initialize();
}

void host_cpu::tick_method() {
    const sc_time now = sim_now();
    sc_time next = SC_ZERO_TIME;
    for (const waiter& w : waiters_)
        if (w.deadline <= now)
            w.ev->notify();  // the waiter runs in this evaluation phase, as at a timeout
        else if (next == SC_ZERO_TIME || w.deadline < next)
            next = w.deadline;
    if (next != SC_ZERO_TIME) arm_tick(next);
}

void host_cpu::arm_tick(const sc_time& deadline) {
    // In steps of at most tick_step_ns: once its waiters have gone, the tick fires at most one
    // step later and stops (a simulation that waits for nothing has nothing pending: `hcasim
    // serve` sleeps then).
    const sc_time now = sim_now();
    const sc_time step = now + ns_time(tick_step_ns);
    const sc_time t = deadline < step ? deadline : step;
    if (tick_at_ > now && tick_at_ <= t) return;  // armed for then or earlier
    tick_.notify(t - now);
    tick_at_ = t;
}

// CPU loads and stores are coherent with DMA and take no simulated time themselves: their
// cost is charged through cpu_cost() by the software that knows what it is doing.
void host_cpu::mem_read(uint64_t pa, void* dst, size_t n) {
    settle();
    memory_.read(pa, dst, n);
}
void host_cpu::mem_write(uint64_t pa, const void* src, size_t n) {
    settle();
    memory_.write(pa, src, n);
}

void host_cpu::mem_write_early(uint64_t pa, const void* src, size_t n) { memory_.write(pa, src, n); }

sc_time& host_cpu::deferred() const {
    const sc_process_b* p = sc_get_current_process_b();
    if (last_ < deferred_.size() && deferred_[last_].proc == p) return deferred_[last_].t;
    for (last_ = 0; last_ < deferred_.size(); ++last_)
        if (deferred_[last_].proc == p) return deferred_[last_].t;
    deferred_.push_back(deferred_time{p, SC_ZERO_TIME});
    return deferred_[last_].t;
}

void host_cpu::settle() {
    sc_time& d = deferred();
    if (d != SC_ZERO_TIME) {
        const sc_time t = d;
        d = SC_ZERO_TIME;
        wait(t);
    }
}

void host_cpu::mmio_write(uint64_t bar_offset, const void* src, size_t n) {
    // Posted: the store leaves the CPU after mmio_issue_ns; its flight through the PCIe link is
    // carried by the annotated delay, which the doorbell unit turns into its arrival time.
    // (Deferred CPU costs are waited for in the same wait.)
    sc_time& d = deferred();
    const sc_time issue = d + ns_time(mmio_issue_ns.get());
    d = SC_ZERO_TIME;
    wait(issue);
    // The CPU's payload is reused (constructing and destroying one per store cost more than
    // the rest of the store); a second process storing while the first is stalled in
    // b_transport (on a full doorbell FIFO) takes one of its own.
    std::optional<tlm::tlm_generic_payload> own;
    const bool shared = !mmio_gp_busy_;
    tlm::tlm_generic_payload& gp = shared ? mmio_gp_ : own.emplace();
    struct release {
        bool& busy;
        bool shared;
        ~release() {
            if (shared) busy = false;
        }
    } at_return{mmio_gp_busy_, shared};
    if (shared) mmio_gp_busy_ = true;
    gp.set_command(tlm::TLM_WRITE_COMMAND);
    gp.set_address(bar_offset);
    gp.set_data_ptr(const_cast<unsigned char*>(static_cast<const unsigned char*>(src)));
    gp.set_data_length(unsigned(n));
    gp.set_streaming_width(unsigned(n));
    gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time delay = SC_ZERO_TIME;
    mmio->b_transport(gp, delay);
    ++mmio_writes;
    if (gp.is_response_error())
        SC_REPORT_ERROR(name(), ("MMIO write to BAR0 offset " + hex_address(bar_offset) +
                                 " failed: " + gp.get_response_string())
                                    .c_str());
}

uint32_t host_cpu::mmio_read32(uint64_t bar_offset) {
    settle();
    uint32_t value = 0;
    tlm::tlm_generic_payload gp;
    gp.set_command(tlm::TLM_READ_COMMAND);
    gp.set_address(bar_offset);
    gp.set_data_ptr(reinterpret_cast<unsigned char*>(&value));
    gp.set_data_length(4);
    gp.set_streaming_width(4);
    gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time delay = SC_ZERO_TIME;
    mmio->b_transport(gp, delay);
    wait(delay);  // a non-posted read stalls the CPU for the round trip
    ++mmio_reads;
    if (gp.is_response_error()) SC_REPORT_ERROR(name(), "MMIO read failed");
    return value;
}

double host_cpu::cost_ns(cpu_op op, uint32_t count) const {
    double ns = 0;
    switch (op) {
    case cpu_op::verb_call: ns = verb_call_ns; break;
    case cpu_op::build_wqe: ns = build_wqe_ns; break;
    case cpu_op::build_recv_wqe: ns = build_recv_wqe_ns; break;
    case cpu_op::poll_cqe: ns = poll_cqe_ns; break;
    case cpu_op::memcpy_64b: ns = memcpy_64b_ns; break;
    }
    return ns * count;
}

void host_cpu::cpu_cost(cpu_op op, uint32_t count) {
    settle();
    const double ns = cost_ns(op, count);
    if (ns > 0) wait(ns_time(ns));
}

void host_cpu::cpu_cost_deferred(cpu_op op, uint32_t count) {
    const double ns = cost_ns(op, count);
    if (ns > 0) deferred() += ns_time(ns);
}

bool host_cpu::wait_write(uint64_t pa, size_t n, uint64_t timeout_ns) {
    settle();
    // One watch per waiting process: an event local to this call.
    sc_event ev;
    int h = memory_.watch(pa, n, &ev);
    ++waits;
    bool woke = true;
    if (timeout_ns == 0) {
        wait(ev);
    } else {
        // The deadline is kept in waiters_ (tick_method wakes the waiter then), not as a
        // timeout of this wait: see waiters_.
        const sc_time start = sim_now();
        const sc_time timeout(double(timeout_ns), SC_NS);
        waiters_.push_back(waiter{&ev, start + timeout});
        arm_tick(start + timeout);
        wait(ev);
        for (size_t i = 0; i < waiters_.size(); ++i)
            if (waiters_[i].ev == &ev) {
                waiters_[i] = waiters_.back();
                waiters_.pop_back();
                break;
            }
        woke = sim_now() - start < timeout;
    }
    memory_.unwatch(h);
    if (woke && wake_ns.get() > 0) wait(ns_time(wake_ns.get()));
    return woke;
}

uint64_t host_cpu::now_ns() const { return uint64_t((sim_now() + deferred()).to_seconds() * 1e9 + 0.5); }

void host_cpu::sleep_ns(uint64_t ns) {
    settle();
    if (ns) wait(sc_time(double(ns), SC_NS));
}

}  // namespace hcasim
