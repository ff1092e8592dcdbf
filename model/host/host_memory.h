// Host DRAM: sparse 64-bit physical memory behind the CPU and the PCIe root complex.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/core/param.h"
#include "model/core/sim_time.h"
#include "model/core/stats.h"
#include "tlm_if/tlm_ext.h"

namespace hcasim {

/// Sparse physical memory of `size_bytes`, allocated lazily in 4 KiB pages through a two-level
/// table (no map lookup per access). Unwritten memory reads as zero, so a write of zeros into a
/// page never written backs nothing (the OS zeroing every ring and table it hands out costs no
/// memory until they are used: a million QPs' rings, most never posted to). Serves b_transport, DMI
/// (per page) and debug transport on two sockets, executes atomic_ext payloads indivisibly, and
/// lets spinning software sleep on write watches instead of polling.
///
/// Posted writes: a write on the `dma` socket marked posted (posted_write_ext: the PCIe link's
/// posted writes) takes effect at now + its annotated delay. Until then
/// nobody sees it: every access lands the writes whose time has come first; a DMA read or
/// atomic overlapping a pending write lands it first (PCIe: reads do not pass posted writes).
/// No event is spent on a write nobody watches -- it lands at the next access; a write that
/// overlaps a watch (now or when the watch is set) lands at its time by an event, so the
/// watcher wakes then; with shared memory (other processes read it directly) every write does.
/// Equal landing times land in posting order.
class host_memory : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(host_memory);
    static constexpr uint64_t page_size = 4096;

    tlm_utils::simple_target_socket<host_memory> cpu;  ///< host CPU loads/stores
    tlm_utils::simple_target_socket<host_memory> dma;  ///< from the PCIe link (device DMA)

    param<uint64_t> size_bytes;       ///< physical address space; beyond is an address error
    param<double> access_latency_ns;  ///< added to every b_transport delay and DMI latency
    param<bool> huge_pages;           ///< 2 MiB aligned slabs with MADV_HUGEPAGE (simulator speed only)

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
    /// Posted writes whose time has not come yet (lands the others first).
    size_t writes_in_flight();

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
    /// kernel zero-fills them; a run with thousands of QPs touches gigabytes). With huge_pages
    /// a slab is one transparent huge page when the kernel grants it.
    uint8_t* new_page();
    bool in_range(uint64_t addr, uint64_t n) const {
        return n <= size_bytes.get() && addr <= size_bytes.get() - n;
    }
    void copy_in(uint64_t addr, const uint8_t* src, uint64_t n);
    void copy_out(uint64_t addr, uint8_t* dst, uint64_t n) const;
    void notify_watches(uint64_t addr, uint64_t n, const sc_core::sc_time& delay);
    bool watched(uint64_t lo, uint64_t hi) const;

    /// Executes the payload; returns false (status set) on error. `delay` is the effective
    /// time offset for watches.
    bool access(tlm::tlm_generic_payload& gp, const sc_core::sc_time& delay, bool count);
    void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void dma_b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);

    // Posted writes, in a ring ordered by (landing time, posting order). A write landed early
    // (for an overlapping DMA read) stays in the ring marked done until it reaches the head.
    struct posted_write {
        sc_core::sc_time at;
        uint64_t addr = 0;
        uint32_t len = 0;
        bool timed = false;  // lands by event at `at` (watched, or shared memory)
        bool done = false;
        std::vector<uint8_t> data;  // capacity reused: no allocation once warmed up
        // Or the bytes in a buffer taken from the writer (buffer_loan_ext), returned on landing.
        const uint8_t* src = nullptr;
        void* loaned = nullptr;
        void (*give_back)(void*) = nullptr;
    };
    /// Lands every posted write whose time has come (the cheap test inline).
    void land_due() {
        if (posted_count_ && (posted_[posted_head_].at <= sim_now() || posted_[posted_head_].done))
            land_due_slow();
    }
    void land_due_slow();
    void land_overlapping(uint64_t addr, uint64_t len);
    void land(posted_write& w);
    void post(uint64_t addr, const uint8_t* src, uint32_t len, const sc_core::sc_time& at,
              buffer_loan_ext* loan);
    /// Marks pending writes overlapping [lo, hi) as timed and arms the landing event.
    void time_overlapping(uint64_t lo, uint64_t hi);
    void arm_landing();
    void go_eager();
    /// How long after the oldest pending write the backstop event lands untimed writes.
    static constexpr double backstop_ns = 10000.0;
    void landing_method();  // SC_METHOD: timed writes whose time has come; the backstop
    posted_write& posted_at(size_t i) { return posted_[(posted_head_ + i) & (posted_.size() - 1)]; }
    std::vector<posted_write> posted_ = std::vector<posted_write>(16);  // power of two
    size_t posted_head_ = 0, posted_count_ = 0, posted_timed_ = 0;
    bool eager_ = false;  // shared memory or a DMI pointer out: every posted write is timed
    // Two events, so that neither is cancelled in the usual course (the kernel keeps a
    // cancelled timed notification in its queue until its time): landing_ev_ at the earliest
    // timed write, backstop_ev_ some time after the oldest write, armed again when it fires.
    sc_core::sc_event landing_ev_, backstop_ev_;
    sc_core::sc_time landing_armed_at_;  // when landing_ev_ fires, if landing_armed_
    sc_core::sc_time backstop_at_;       // when backstop_ev_ fires, if backstop_armed_
    bool landing_armed_ = false, backstop_armed_ = false;
    /// Pending writes per 4 KiB page, counted exactly in an open-addressing table (linear
    /// probing, backward-shift deletion, doubling at half full): a DMA read whose pages count
    /// none overlaps no pending write and need not scan them. (A hashed counting filter let
    /// through false positives that scanned about a thousand pending writes with 16384 QPs.)
    class page_counts {
    public:
        void add(uint64_t page);
        void remove(uint64_t page);
        bool contains(uint64_t page) const {
            for (size_t i = home(page);; i = (i + 1) & mask()) {
                if (!slots_[i].count) return false;
                if (slots_[i].page == page) return true;
            }
        }

    private:
        struct slot {
            uint64_t page = 0;
            uint64_t count = 0;  // 0: empty
        };
        size_t mask() const { return slots_.size() - 1; }
        size_t home(uint64_t page) const { return size_t((page * 0x9E3779B97F4A7C15ull) >> 32) & mask(); }
        std::vector<slot> slots_ = std::vector<slot>(1024);  // power of two
        size_t used_ = 0;
    };
    page_counts pending_pages_;
    void count_pending(uint64_t addr, uint64_t len, bool add) {
        const uint64_t last = (addr + (len ? len - 1 : 0)) >> page_bits;
        for (uint64_t p = addr >> page_bits; p <= last; ++p)
            add ? pending_pages_.add(p) : pending_pages_.remove(p);
    }
    bool get_direct_mem_ptr(tlm::tlm_generic_payload& gp, tlm::tlm_dmi& dmi);
    unsigned int transport_dbg(tlm::tlm_generic_payload& gp);

    std::vector<std::unique_ptr<chunk>> top_;
    std::vector<uint8_t*> slabs_;   // from map_slab (model/core/slab.h)
    uint8_t* slab_next_ = nullptr;  // next unused page of the current slab
    uint64_t slab_pages_left_ = 0;
    std::vector<watch_entry> watches_;
    sc_core::sc_time latency_;
    uint64_t allocated_pages_ = 0;
    uint8_t* shared_base_ = nullptr;  // share(): the mapping of the whole physical space
    int shared_fd_ = -1;
};

}  // namespace hcasim
