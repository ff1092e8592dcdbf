// Slabs of anonymous memory; see slab.h.
#include "model/core/slab.h"

#include <sys/mman.h>

#include <new>

namespace hcasim {

uint8_t* map_slab(bool huge) {
    // For an aligned slab, map twice its size and keep the aligned part.
    const size_t map_bytes = huge ? 2 * SLAB_BYTES : SLAB_BYTES;
    void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    uint8_t* slab = static_cast<uint8_t*>(m);
    if (huge) {
        const uintptr_t at = (reinterpret_cast<uintptr_t>(m) + SLAB_BYTES - 1) & ~uintptr_t(SLAB_BYTES - 1);
        slab = reinterpret_cast<uint8_t*>(at);
        const size_t head = size_t(slab - static_cast<uint8_t*>(m));
        if (head) munmap(m, head);
        if (SLAB_BYTES - head) munmap(slab + SLAB_BYTES, SLAB_BYTES - head);
        madvise(slab, SLAB_BYTES, MADV_HUGEPAGE);  // a hint: refused, the slab keeps 4 KiB pages
    }
    return slab;
}

void unmap_slab(uint8_t* slab) { munmap(slab, SLAB_BYTES); }

}  // namespace hcasim
