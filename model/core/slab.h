// Slabs: zero-filled anonymous memory in 2 MiB blocks for the simulator's large, long-lived
// stores (simulated host memory pages, packet buffers). A slab can be 2 MiB aligned and ask the
// kernel for a transparent huge page (madvise: a hint, refused where THP is off), so one TLB
// entry and one page fault cover it instead of 512. Wall-clock speed only: the bytes are the
// same either way.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hcasim {

constexpr size_t SLAB_BYTES = size_t(2) << 20;

/// Maps one zero-filled slab of SLAB_BYTES; `huge`: 2 MiB aligned, with MADV_HUGEPAGE.
/// Throws std::bad_alloc if the kernel refuses the mapping.
uint8_t* map_slab(bool huge);
/// Unmaps a slab from map_slab.
void unmap_slab(uint8_t* slab);

}  // namespace hcasim
