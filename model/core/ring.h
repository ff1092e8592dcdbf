// Rings: FIFOs in a vector indexed modulo its size.
#pragma once
#include <cstddef>
#include <vector>

namespace hcasim {

/// Re-lays a ring out from index 0 in a vector of `size` entries.
template <class T>
void grow_ring(std::vector<T>& v, size_t& head, size_t count, size_t size) {
    std::vector<T> g(size);
    for (size_t i = 0; i < count; ++i) g[i] = v[(head + i) % v.size()];
    v.swap(g);
    head = 0;
}

}  // namespace hcasim
