// The provider's view of one node's simulated host memory: the server's memfd, mapped into the
// application (docs/libibverbs.md). The server's model writes it while the application reads it,
// so ring entries follow the publication order of tlm_if/cqe.h: load_acquire8 is the reader's
// half of it.
#pragma once
#include <cstdint>
#include <cstring>

namespace hcasim::provider {

struct shared_memory {
    uint8_t* base = nullptr;
    uint64_t bytes = 0;

    /// Whether [pa, pa + n) lies inside (written so that no sum can wrap past 2^64).
    bool holds(uint64_t pa, uint64_t n) const { return n <= bytes && pa <= bytes - n; }
    /// Reads outside the memory give zeros; the firmware's checks keep real accesses inside.
    void read(uint64_t pa, void* dst, size_t n) const {
        if (holds(pa, n))
            std::memcpy(dst, base + pa, n);
        else
            std::memset(dst, 0, n);
    }
    /// Writes outside the memory are dropped.
    void write(uint64_t pa, const void* src, size_t n) const {
        if (holds(pa, n)) std::memcpy(base + pa, src, n);
    }
    /// The owner byte of a ring entry: every load after this one sees what the server stored
    /// before it released the byte (host memory lands the last byte of a write last).
    uint8_t load_acquire8(uint64_t pa) const {
        return holds(pa, 1) ? __atomic_load_n(base + pa, __ATOMIC_ACQUIRE) : 0;
    }
};

}  // namespace hcasim::provider
