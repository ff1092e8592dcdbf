// A packet on the wire: the bytes from LRH through VCRC. Ports, links and switches pass
// packets as TLM generic payloads whose data pointer is `bytes` and whose delay is the time
// the last bit arrives at the receiver. Receivers copy into their own fixed buffers, so no
// packet is allocated on the hot path.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hcasim {

/// Largest packet: headers (LRH+GRH+BTH+largest extension set) + 4096 B payload + pad + CRCs.
constexpr size_t MAX_PACKET_BYTES = 4096 + 128;

struct packet {
    uint32_t len = 0;                 ///< bytes used
    uint8_t bytes[MAX_PACKET_BYTES];  ///< LRH .. VCRC
};

}  // namespace hcasim
