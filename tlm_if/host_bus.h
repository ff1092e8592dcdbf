// What driver software sees of the machine: CPU loads/stores to host physical memory,
// MMIO to the HCA's BAR0, CPU-side costs and time. The firmware is written against this
// interface only; the model's host CPU implements it (model/host/host_cpu), and a real driver
// shim or an RTL testbench could implement it too.
//
// All calls are made from the calling application's own simulation process; calls that take
// simulated time (MMIO, cpu_cost, wait_write, sleep_ns) suspend that process.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hcasim {

/// CPU-side operations whose cost (simulated ns) the host CPU model charges; the values are
/// host CPU parameters (`host.cpu.*_ns`).
enum class cpu_op : uint8_t {
    verb_call,       ///< entry into any verb (argument checks, locking)
    build_wqe,       ///< writing one send WQE into the ring
    build_recv_wqe,  ///< writing one receive WQE into the ring
    poll_cqe,        ///< reading and consuming one CQE (or finding the CQ empty)
    memcpy_64b,      ///< copying 64 bytes (application buffer fill, inline data)
};

class host_bus {
public:
    virtual ~host_bus() = default;
    /// CPU load from host physical memory (coherent, sees DMA writes that have landed).
    virtual void mem_read(uint64_t pa, void* dst, size_t n) = 0;
    /// CPU load of one byte with acquire ordering: the owner byte of a ring entry that another
    /// agent writes (tlm_if/cqe.h). Loads made after it see every byte the writer stored before
    /// it published this one. Where the bus is shared with another process (the libibverbs
    /// provider) this is the only order that makes an entry's body safe to read; the model's CPU
    /// reads in simulation order and needs nothing more than mem_read.
    virtual uint8_t load_acquire8(uint64_t pa) {
        uint8_t b;
        mem_read(pa, &b, 1);
        return b;
    }
    /// CPU store to host physical memory.
    virtual void mem_write(uint64_t pa, const void* src, size_t n) = 0;
    /// Posted MMIO write of n bytes (4, 8, or a whole inline WQE up to 256) at BAR0 offset.
    /// Returns once the CPU has issued it (write-combining store), not when it arrives.
    virtual void mmio_write(uint64_t bar_offset, const void* src, size_t n) = 0;
    /// MMIO read of a 32-bit register (blocks for the round trip).
    virtual uint32_t mmio_read32(uint64_t bar_offset) = 0;
    /// Charges `count` times the cost of `op` to the calling process.
    virtual void cpu_cost(cpu_op op, uint32_t count = 1) = 0;
    /// The same cost, waited for together with the next bus access of the calling process
    /// (which must follow within the same verb, e.g. the doorbell after a WQE build): every
    /// access happens at the same simulated time as with cpu_cost, with one wait fewer.
    virtual void cpu_cost_deferred(cpu_op op, uint32_t count = 1) { cpu_cost(op, count); }
    /// Waits for the deferred costs now (a verb calls it before it returns).
    virtual void cpu_settle() {}
    /// A CPU store the device cannot observe before a later MMIO of the same verb (a WQE beyond
    /// the producer index the HCA knows): made at once, without waiting for deferred costs.
    virtual void mem_write_early(uint64_t pa, const void* src, size_t n) { mem_write(pa, src, n); }
    /// Sleeps until any write lands in [pa, pa + n) or `timeout_ns` passes (0: forever);
    /// returns false on timeout. Idle time costs no wall time.
    virtual bool wait_write(uint64_t pa, size_t n, uint64_t timeout_ns) = 0;
    /// Current simulated time of the calling process, ns.
    virtual uint64_t now_ns() const = 0;
    /// Advances the calling process by ns.
    virtual void sleep_ns(uint64_t ns) = 0;
};

}  // namespace hcasim
