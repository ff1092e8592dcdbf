// Addresses and offsets in messages, as "0x" followed by hex digits.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace hcasim {

/// `v` as "0x1a2b" (lower-case hex digits, no padding).
inline std::string hex_address(uint64_t v) {
    char buf[19];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace hcasim
