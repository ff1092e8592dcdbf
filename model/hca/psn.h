// Packet sequence numbers (IBA 9.7.1): 24-bit counters compared in serial arithmetic, so a
// comparison holds across the wrap from 0xFFFFFF to 0 as long as the two PSNs are less than
// half the space (2^23) apart. Debug builds assert that both operands are 24-bit PSNs.
#pragma once
#include <cassert>
#include <cstdint>

namespace hcasim {

constexpr uint32_t PSN_MASK = 0xFFFFFF;
/// a <= b in 24-bit serial arithmetic.
inline bool psn_le(uint32_t a, uint32_t b) {
    assert(a <= PSN_MASK && b <= PSN_MASK);
    return ((b - a) & PSN_MASK) < 0x800000;
}
/// a < b in 24-bit serial arithmetic.
inline bool psn_lt(uint32_t a, uint32_t b) { return a != b && psn_le(a, b); }

}  // namespace hcasim
