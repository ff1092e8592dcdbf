// Sparse host memory; see host_memory.h.
#include "model/host/host_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>

#include "model/core/bytes.h"
#include "model/core/hex.h"
#include "model/core/slab.h"
#include "tlm_if/tlm_ext.h"

namespace hcasim {

using namespace sc_core;

host_memory::host_memory(const sc_module_name& name)
    : sc_module(name),
      cpu("cpu"),
      dma("dma"),
      size_bytes(
          "size_bytes", uint64_t(64) << 30, "bytes",
          "host physical memory size; accesses beyond are address errors",
          {page_size, uint64_t(1) << 44}),  // 16 TiB bounds the first-level table at 1 Mi entries (8 MiB)
      access_latency_ns("access_latency_ns", 0.0, "ns",
                        "latency added to every access (0: the PCIe link's read_latency_ns covers DRAM)",
                        {0.0, 1e9}),
      huge_pages("huge_pages", true, "",
                 "back simulated memory with transparent huge pages where the kernel allows (madvise): "
                 "wall-clock speed only, results are the same either way"),
      reads("reads", "b_transport reads (both sockets)"),
      writes("writes", "b_transport writes (both sockets)"),
      bytes_read("bytes_read", "bytes read by b_transport"),
      bytes_written("bytes_written", "bytes written by b_transport"),
      atomics("atomics", "atomic operations executed"),
      pages("pages",
            "4 KiB pages of simulated host memory backed so far (on the first write of a non-zero byte)") {
    latency_ = sc_time(access_latency_ns, SC_NS);
    const uint64_t chunk_span = uint64_t(1) << (page_bits + chunk_bits);
    top_.resize((size_bytes.get() + chunk_span - 1) / chunk_span);
    for (auto* s : {&cpu, &dma}) {
        s->register_get_direct_mem_ptr(this, &host_memory::get_direct_mem_ptr);
        s->register_transport_dbg(this, &host_memory::transport_dbg);
    }
    cpu.register_b_transport(this, &host_memory::b_transport);
    dma.register_b_transport(this, &host_memory::dma_b_transport);
    SC_METHOD(landing_method);
    sensitive << landing_ev_ << backstop_ev_;
    dont_initialize();
}

host_memory::~host_memory() {
    for (uint8_t* s : slabs_) unmap_slab(s);
    if (shared_base_) munmap(shared_base_, size_bytes.get());
    if (shared_fd_ >= 0) close(shared_fd_);
}

int host_memory::share() {
    if (shared_fd_ >= 0) return shared_fd_;
    if (allocated_pages_) throw config_error(std::string(name()) + ": share() after memory was touched");
    const int fd = memfd_create(name(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) throw config_error(std::string(name()) + ": memfd_create: " + std::strerror(errno));
    // A sparse file: pages take memory when first written, as the slabs do. Its size is sealed
    // before anyone else gets it: a process it is handed to (`hcasim serve`'s clients) cannot
    // shrink it under this mapping (a SIGBUS here) nor grow it.
    void* m = MAP_FAILED;
    if (ftruncate(fd, off_t(size_bytes.get())) == 0 &&
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        m = mmap(nullptr, size_bytes.get(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (m == MAP_FAILED) {
        const std::string e = std::strerror(errno);
        close(fd);
        throw config_error(std::string(name()) + ": cannot size, seal and map " +
                           std::to_string(size_bytes.get()) + " bytes of shared memory: " + e);
    }
    shared_base_ = static_cast<uint8_t*>(m);
    shared_fd_ = fd;
    eager_ = true;  // other processes read the memory without asking: writes land on time
    return fd;
}

uint8_t* host_memory::new_page() {
    if (slab_pages_left_ == 0) {
        // Fresh anonymous memory is zero-filled: unwritten simulated memory reads as zero.
        // With huge_pages the slab is 2 MiB aligned and asks for a transparent huge page: one
        // TLB entry for 512 simulated pages (thousands of QPs touch one page each per message).
        slab_next_ = map_slab(huge_pages.get());
        slabs_.push_back(slab_next_);
        slab_pages_left_ = SLAB_BYTES / page_size;
    }
    uint8_t* p = slab_next_;
    slab_next_ += page_size;
    --slab_pages_left_;
    return p;
}

uint8_t* host_memory::get_page(uint64_t addr) {
    auto& c = top_[addr >> (page_bits + chunk_bits)];
    if (!c) c = std::make_unique<chunk>();
    auto& p = c->page[(addr >> page_bits) & (chunk_pages - 1)];
    if (!p) {
        p = shared_base_ ? shared_base_ + (addr & ~(page_size - 1)) : new_page();
        ++allocated_pages_;
        ++pages;
    }
    return p;
}

void host_memory::copy_in(uint64_t addr, const uint8_t* src, uint64_t n) {
    while (n) {
        const uint64_t off = addr & (page_size - 1);
        const uint64_t len = std::min(n, page_size - off);
        uint8_t* page = find_page(addr);
        static const uint8_t zeros[page_size] = {};
        if (!page && std::memcmp(src, zeros, len) == 0) {
            addr += len;  // zeros into a page never written: it reads as zero already
            src += len;
            n -= len;
            continue;
        }
        uint8_t* dst = (page ? page : get_page(addr)) + off;
        if (shared_base_ && len == n) {
            // Other processes poll this memory: the last byte (a CQE's owner byte) lands last.
            copy_bytes(dst, src, len - 1);
            std::atomic_thread_fence(std::memory_order_release);
            reinterpret_cast<volatile uint8_t*>(dst)[len - 1] = src[len - 1];
            break;
        }
        copy_bytes(dst, src, len);
        addr += len;
        src += len;
        n -= len;
    }
}

void host_memory::copy_out(uint64_t addr, uint8_t* dst, uint64_t n) const {
    while (n) {
        const uint64_t off = addr & (page_size - 1);
        const uint64_t len = std::min(n, page_size - off);
        if (const uint8_t* p = find_page(addr))
            copy_bytes(dst, p + off, len);
        else
            std::memset(dst, 0, len);
        addr += len;
        dst += len;
        n -= len;
    }
}

bool host_memory::watched(uint64_t lo, uint64_t hi) const {
    for (const auto& w : watches_)
        if (w.ev && lo < w.hi && w.lo < hi) return true;
    return false;
}

void host_memory::notify_watches(uint64_t addr, uint64_t n, const sc_time& delay) {
    const uint64_t hi = addr + n;
    for (const auto& w : watches_)
        if (w.ev && addr < w.hi && w.lo < hi) w.ev->notify(delay);
}

void host_memory::read(uint64_t addr, void* dst, size_t n) {
    if (!in_range(addr, n))
        SC_REPORT_ERROR(name(), ("read beyond memory size at " + hex_address(addr)).c_str());
    land_due();
    copy_out(addr, static_cast<uint8_t*>(dst), n);
}

void host_memory::write(uint64_t addr, const void* src, size_t n) {
    if (!in_range(addr, n))
        SC_REPORT_ERROR(name(), ("write beyond memory size at " + hex_address(addr)).c_str());
    land_due();
    copy_in(addr, static_cast<const uint8_t*>(src), n);
    notify_watches(addr, n, SC_ZERO_TIME);
}

uint8_t* host_memory::page_ptr(uint64_t addr) {
    if (!in_range(addr, 1)) SC_REPORT_ERROR(name(), "page_ptr beyond memory size");
    go_eager();  // whoever holds the pointer reads without asking
    return get_page(addr) + (addr & (page_size - 1));
}

// ------------------------------------------------------------------ posted writes

void host_memory::go_eager() {
    land_due();
    eager_ = true;
    time_overlapping(0, ~uint64_t(0));
}

void host_memory::post(uint64_t addr, const uint8_t* src, uint32_t len, const sc_time& at,
                       buffer_loan_ext* loan) {
    land_due();  // keeps the ring as short as the writes in flight
    if (posted_count_ == posted_.size()) {
        std::vector<posted_write> grown(posted_.size() * 2);
        for (size_t i = 0; i < posted_count_; ++i) grown[i] = std::move(posted_at(i));
        posted_.swap(grown);
        posted_head_ = 0;
    }
    // Pages are backed when the write is posted (the `pages` counter does not depend on when
    // it lands).
    for (uint64_t a = addr & ~(page_size - 1); a < addr + len; a += page_size) get_page(a);
    size_t i = posted_count_++;
    posted_write* w = &posted_at(i);
    if (loan && loan->offers(src, len)) {
        // The writer can spare its buffer: keep it (its bytes stay as they are) until landing.
        w->src = src;
        w->loaned = loan->buffer;
        w->give_back = loan->give_back;
        loan->buffer = nullptr;
    } else {
        if (w->data.size() < len) w->data.resize(len);
        copy_bytes(w->data.data(), src, len);
        w->src = w->data.data();
        w->loaned = nullptr;
    }
    w->at = at;
    w->addr = addr;
    w->len = len;
    w->done = false;
    w->timed = eager_ || watched(addr, addr + len);
    // Keep landing order: an earlier time moves ahead (rare: the link posts in time order).
    while (i > 0 && posted_at(i - 1).at > at) {
        std::swap(posted_at(i - 1), posted_at(i));
        --i;
    }
    count_pending(addr, len, true);
    if (posted_at(i).timed) {
        ++posted_timed_;
        arm_landing();
    } else if (!backstop_armed_) {
        arm_landing();
    }
}

void host_memory::page_counts::add(uint64_t page) {
    if ((used_ + 1) * 2 > slots_.size()) {
        std::vector<slot> old(slots_.size() * 2);
        old.swap(slots_);
        for (const slot& e : old)
            if (e.count) {
                size_t i = home(e.page);
                while (slots_[i].count) i = (i + 1) & mask();
                slots_[i] = e;
            }
    }
    size_t i = home(page);
    while (slots_[i].count && slots_[i].page != page) i = (i + 1) & mask();
    if (!slots_[i].count) {
        slots_[i].page = page;
        ++used_;
    }
    ++slots_[i].count;
}

void host_memory::page_counts::remove(uint64_t page) {
    size_t i = home(page);
    while (slots_[i].count && slots_[i].page != page) i = (i + 1) & mask();
    if (!slots_[i].count || --slots_[i].count) return;
    --used_;
    // Backward shift: later entries of the probe run move into the hole unless that would
    // put them before their home slot.
    for (size_t j = (i + 1) & mask(); slots_[j].count; j = (j + 1) & mask()) {
        const size_t h = home(slots_[j].page);
        if (((j - h) & mask()) >= ((j - i) & mask())) {
            slots_[i] = slots_[j];
            slots_[j].count = 0;
            i = j;
        }
    }
}

void host_memory::land(posted_write& w) {
    copy_in(w.addr, w.src, w.len);
    if (w.loaned) {
        w.give_back(w.loaned);
        w.loaned = nullptr;
    }
    notify_watches(w.addr, w.len, SC_ZERO_TIME);
    count_pending(w.addr, w.len, false);
    w.done = true;
    if (w.timed) --posted_timed_;
}

void host_memory::land_due_slow() {
    const sc_time& now = sim_now();
    while (posted_count_) {
        posted_write& w = posted_[posted_head_];
        if (!w.done) {
            if (w.at > now) break;
            land(w);
        }
        posted_head_ = (posted_head_ + 1) & (posted_.size() - 1);
        --posted_count_;
    }
}

void host_memory::land_overlapping(uint64_t addr, uint64_t len) {
    land_due();
    if (!posted_count_) return;
    if (len && ((addr + len - 1) >> page_bits) - (addr >> page_bits) < 64) {
        bool maybe = false;
        for (uint64_t p = addr >> page_bits, last = (addr + len - 1) >> page_bits; p <= last && !maybe; ++p)
            maybe = pending_pages_.contains(p);
        if (!maybe) return;
    }
    // In landing order, which is posting order for the writes of one link.
    for (size_t i = 0; i < posted_count_; ++i) {
        posted_write& w = posted_at(i);
        if (!w.done && w.addr < addr + len && addr < w.addr + w.len) land(w);
    }
}

size_t host_memory::writes_in_flight() {
    land_due();
    size_t n = 0;
    for (size_t i = 0; i < posted_count_; ++i) n += !posted_at(i).done;
    return n;
}

void host_memory::time_overlapping(uint64_t lo, uint64_t hi) {
    bool any = false;
    for (size_t i = 0; i < posted_count_; ++i) {
        posted_write& w = posted_at(i);
        if (!w.done && !w.timed && w.addr < hi && lo < w.addr + w.len) {
            w.timed = true;
            ++posted_timed_;
            any = true;
        }
    }
    if (any) arm_landing();
}

void host_memory::arm_landing() {
    // A timed write lands at its time. Untimed ones land at the next access; a backstop event
    // some time after the oldest lands them if no access comes (so that they are in memory
    // when the simulation runs out of events, and the ring stays short).
    const sc_time& now = sim_now();
    if (posted_timed_) {
        size_t i = 0;
        while (posted_at(i).done || !posted_at(i).timed) ++i;
        const sc_time& t = posted_at(i).at;
        if (!landing_armed_ || t < landing_armed_at_) {  // else it fires first; arms again then
            landing_ev_.notify(t > now ? t - now : SC_ZERO_TIME);
            landing_armed_ = true;
            landing_armed_at_ = t;
        }
    }
    if (posted_count_ && !backstop_armed_) {
        const sc_time t = posted_[posted_head_].at + sc_time(backstop_ns, SC_NS);
        backstop_ev_.notify(t > now ? t - now : SC_ZERO_TIME);
        backstop_armed_ = true;
        backstop_at_ = t;
    }
}

void host_memory::landing_method() {
    const sc_time& now = sim_now();
    if (landing_armed_ && landing_armed_at_ <= now) landing_armed_ = false;
    if (backstop_armed_ && backstop_at_ <= now) backstop_armed_ = false;
    land_due();
    arm_landing();
}

int host_memory::watch(uint64_t addr, uint64_t len, sc_event* ev) {
    sc_assert(ev && len > 0);
    land_due();
    time_overlapping(addr, addr + len);  // writes already posted wake the watcher at their time
    int handle = -1;
    for (size_t i = 0; i < watches_.size() && handle < 0; ++i)
        if (!watches_[i].ev) handle = int(i);
    if (handle < 0) {
        handle = int(watches_.size());
        watches_.emplace_back();
    }
    watches_[size_t(handle)] = watch_entry{addr, addr + len, ev};
    // Revoke DMI write access granted earlier on these pages; new grants are read-only.
    const uint64_t lo = addr & ~(page_size - 1), hi = (addr + len - 1) | (page_size - 1);
    for (auto* s : {&cpu, &dma})
        if (s->get_base_port().size()) (*s)->invalidate_direct_mem_ptr(lo, hi);
    return handle;
}

void host_memory::unwatch(int handle) {
    if (handle >= 0 && size_t(handle) < watches_.size()) watches_[size_t(handle)].ev = nullptr;
}

bool host_memory::access(tlm::tlm_generic_payload& gp, const sc_time& delay, bool count) {
    const uint64_t addr = gp.get_address();
    const uint64_t n = gp.get_data_length();
    land_due();
    if (gp.get_byte_enable_ptr()) {
        gp.set_response_status(tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE);
        return false;
    }
    if (gp.get_streaming_width() != 0 && gp.get_streaming_width() < n) {
        gp.set_response_status(tlm::TLM_BURST_ERROR_RESPONSE);
        return false;
    }
    if (auto* at = gp.get_extension<atomic_ext>()) {
        if ((addr & 7) || !in_range(addr, 8)) {
            gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return false;
        }
        uint8_t* p = get_page(addr) + (addr & (page_size - 1));  // aligned: never spans pages
        uint64_t old;
        std::memcpy(&old, p, 8);
        at->result = old;
        bool stored = true;
        uint64_t now = old;
        if (at->op == atomic_ext::fetch_add)
            now = old + at->swap_or_add;
        else if (old == at->compare)
            now = at->swap_or_add;
        else
            stored = false;
        if (stored) {
            std::memcpy(p, &now, 8);
            notify_watches(addr, 8, delay);
        }
        if (gp.get_data_ptr() && n >= 8) std::memcpy(gp.get_data_ptr(), &old, 8);
        if (count) ++atomics;
        gp.set_response_status(tlm::TLM_OK_RESPONSE);
        return true;
    }
    if (!in_range(addr, n)) {
        gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
        return false;
    }
    switch (gp.get_command()) {
    case tlm::TLM_READ_COMMAND:
        if (gp.get_data_ptr())  // none: a timing-only read (dma_port::read_timing)
            copy_out(addr, gp.get_data_ptr(), n);
        if (count) {
            ++reads;
            bytes_read += n;
        }
        break;
    case tlm::TLM_WRITE_COMMAND:
        copy_in(addr, gp.get_data_ptr(), n);
        notify_watches(addr, n, delay);
        if (count) {
            ++writes;
            bytes_written += n;
        }
        break;
    default: break;
    }
    gp.set_dmi_allowed(true);
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    return true;
}

void host_memory::b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    delay += latency_;
    access(gp, delay, true);
}

void host_memory::dma_b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    delay += latency_;
    const uint64_t addr = gp.get_address();
    const uint64_t n = gp.get_data_length();
    const bool atomic = gp.get_extension<atomic_ext>() != nullptr;
    if (!atomic && gp.is_write() && gp.get_extension<posted_write_ext>() && !gp.get_byte_enable_ptr() &&
        (gp.get_streaming_width() == 0 || gp.get_streaming_width() >= n) && in_range(addr, n) &&
        n <= UINT32_MAX) {
        post(addr, gp.get_data_ptr(), uint32_t(n), sim_now() + delay, gp.get_extension<buffer_loan_ext>());
        ++writes;
        bytes_written += n;
        gp.set_dmi_allowed(true);
        gp.set_response_status(tlm::TLM_OK_RESPONSE);
        return;
    }
    if (atomic || gp.is_read()) land_overlapping(addr, atomic ? 8 : n);  // reads do not pass posted writes
    access(gp, delay, true);
}

unsigned int host_memory::transport_dbg(tlm::tlm_generic_payload& gp) {
    return access(gp, SC_ZERO_TIME, false) ? gp.get_data_length() : 0;
}

bool host_memory::get_direct_mem_ptr(tlm::tlm_generic_payload& gp, tlm::tlm_dmi& dmi) {
    const uint64_t addr = gp.get_address();
    go_eager();                // a DMI pointer reads without asking: posted writes must land on time
    if (!in_range(addr, 1)) {  // denied region: everything beyond the memory
        dmi.set_start_address(size_bytes.get());
        dmi.set_end_address(~uint64_t(0));
        dmi.allow_none();
        return false;
    }
    const uint64_t base = addr & ~(page_size - 1);
    dmi.set_dmi_ptr(get_page(base));
    dmi.set_start_address(base);
    dmi.set_end_address(base + page_size - 1);
    if (watched(base, base + page_size))
        dmi.allow_read();  // stores must go through b_transport so watches see them
    else
        dmi.allow_read_write();
    dmi.set_read_latency(latency_);
    dmi.set_write_latency(latency_);
    return true;
}

}  // namespace hcasim
