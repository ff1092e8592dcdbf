// Host DRAM: sparse 64-bit physical memory behind the CPU and the PCIe root complex.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim {

/// Sparse physical memory of `size_bytes`, allocated lazily in 4 KiB pages through a two-level
/// table (no map lookup per access). Unwritten memory reads as zero. Serves b_transport, DMI
/// (per page) and debug transport on two sockets, executes atomic_ext payloads indivisibly, and
/// lets spinning software sleep on write watches instead of polling.
class host_memory : public sc_core::sc_module {
public:
    static constexpr uint64_t page_size = 4096;

    tlm_utils::simple_target_socket<host_memory> cpu;  ///< host CPU loads/stores
    tlm_utils::simple_target_socket<host_memory> dma;  ///< from the PCIe link (device DMA)

    param<uint64_t> size_bytes;       ///< physical address space; beyond is an address error
    param<double> access_latency_ns;  ///< added to every b_transport delay and DMI latency

    counter reads, writes, bytes_read, bytes_written, atomics, pages;

    explicit host_memory(const sc_core::sc_module_name& name);
    ~host_memory() override;

    /// Zero-time access for tests and the host CPU model. Writes fire watches at sc_time_stamp().
    /// Out-of-range accesses raise SC_REPORT_ERROR.
    void read(uint64_t addr, void* dst, size_t n);
    void write(uint64_t addr, const void* src, size_t n);
    /// Pointer to the byte at `addr`, valid up to the end of its 4 KiB page (allocates the page).
    /// Stores through it bypass watches.
    uint8_t* page_ptr(uint64_t addr);

    /// Notifies `ev` at the effective time of every write overlapping [addr, addr+len).
    /// Pages in the range lose DMI write access (so every store is seen). Returns a handle.
    int watch(uint64_t addr, uint64_t len, sc_core::sc_event* ev);
    void unwatch(int handle);

    /// Number of 4 KiB pages allocated so far.
    uint64_t allocated_pages() const { return allocated_pages_; }

    /// Backs the whole physical space with one shared memory file (memfd) from now on, so that
    /// other processes (`hcasim serve`'s libibverbs clients) can map simulated host memory:
    /// byte `a` of the file is physical address `a`. Call before the first access. Writes into
    /// it store their last byte last (a CQE's or EQE's owner byte is seen after the rest by a
    /// process polling the mapping). Returns the file descriptor (owned by this module) or
    /// throws config_error.
    int share();
    /// The shared file's descriptor, -1 when not shared.
    int shared_fd() const { return shared_fd_; }

private:
    static constexpr unsigned page_bits = 12;
    static constexpr unsigned chunk_bits = 12;  // 4096 pages (16 MiB) per second-level table
    static constexpr uint64_t chunk_pages = uint64_t(1) << chunk_bits;
    struct chunk {
        uint8_t* page[chunk_pages] = {};  // into slabs_
    };
    struct watch_entry {
        uint64_t lo = 0, hi = 0;  // [lo, hi)
        sc_core::sc_event* ev = nullptr;
    };

    /// Existing page or nullptr (shared memory: every page exists).
    uint8_t* find_page(uint64_t addr) const {
        if (shared_base_) return shared_base_ + (addr & ~(page_size - 1));
        const chunk* c = top_[addr >> (page_bits + chunk_bits)].get();
        return c ? c->page[(addr >> page_bits) & (chunk_pages - 1)] : nullptr;
    }
    uint8_t* get_page(uint64_t addr);
    /// A zero-filled 4 KiB page, carved from 2 MiB slabs in first-touch order: one kernel
    /// mapping per 512 pages instead of one heap allocation and one memset of each page (the
    /// kernel zero-fills them; a run with thousands of QPs touches gigabytes).
    uint8_t* new_page();
    static constexpr uint64_t slab_bytes = uint64_t(2) << 20;
    bool in_range(uint64_t addr, uint64_t n) const { return n <= size_bytes.get() && addr <= size_bytes.get() - n; }
    void copy_in(uint64_t addr, const uint8_t* src, uint64_t n);
    void copy_out(uint64_t addr, uint8_t* dst, uint64_t n) const;
    void notify_watches(uint64_t addr, uint64_t n, const sc_core::sc_time& delay);
    bool watched(uint64_t lo, uint64_t hi) const;

    /// Executes the payload; returns false (status set) on error. `delay` is the effective
    /// time offset for watches.
    bool access(tlm::tlm_generic_payload& gp, const sc_core::sc_time& delay, bool count);
    void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    bool get_direct_mem_ptr(tlm::tlm_generic_payload& gp, tlm::tlm_dmi& dmi);
    unsigned int transport_dbg(tlm::tlm_generic_payload& gp);

    std::vector<std::unique_ptr<chunk>> top_;
    std::vector<std::pair<void*, size_t>> slabs_;  // mappings to release: (address, bytes)
    uint8_t* slab_next_ = nullptr;                 // next unused page of the current slab
    uint64_t slab_pages_left_ = 0;
    std::vector<watch_entry> watches_;
    sc_core::sc_time latency_;
    uint64_t allocated_pages_ = 0;
    uint8_t* shared_base_ = nullptr;  // share(): the mapping of the whole physical space
    int shared_fd_ = -1;
};

}  // namespace hcasim
