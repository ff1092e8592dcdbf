// A packet on the wire: the bytes from LRH through VCRC. Ports, links and switches pass
// packets as TLM generic payloads whose data pointer is `bytes` and whose delay is the time
// the last bit arrives at the receiver. Packet buffers come from packet_pool; a receiver that
// keeps a packet (a port's receive queue, a switch's output queue) takes the sender's buffer
// when it is offered (packet_handoff_ext, see offered_buffer()) and copies otherwise, so no
// packet is allocated on the hot path and no 4 KiB payload is copied between ports.
#pragma once
#include <tlm>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "model/core/slab.h"
#include "tlm_if/tlm_ext.h"

namespace hcasim {

/// Largest packet: headers (LRH+GRH+BTH+largest extension set) + 4096 B payload + pad + CRCs.
constexpr size_t MAX_PACKET_BYTES = 4096 + 128;

struct packet {
    uint32_t len = 0;                 ///< bytes used
    uint8_t bytes[MAX_PACKET_BYTES];  ///< LRH .. VCRC
};

/// The packet buffers of the process, handed between ports and switches (whoever takes a
/// buffer offered with packet_handoff_ext gives one of its free ones in exchange): a buffer is
/// taken by its first user and given back by whoever holds it when it is destroyed. Buffers
/// live in slabs (model/core/slab.h), 64-byte aligned, about 490 to a slab: a receive queue
/// that grows by thousands of packets costs a page fault per slab rather than a heap
/// allocation and a page fault per packet. One simulation per process, one thread.
class packet_pool {
public:
    static packet* take() {
        store& s = instance();
        if (s.free.empty()) s.grow();
        packet* p = s.free.back();
        s.free.pop_back();
        return p;
    }
    /// Returns a buffer (nullptr: nothing); the next take() returns the last one given.
    static void give(packet* p) {
        if (p) instance().free.push_back(p);
    }

private:
    struct store {
        static constexpr size_t stride = (sizeof(packet) + 63) / 64 * 64;
        static constexpr size_t per_slab = SLAB_BYTES / stride;
        std::vector<uint8_t*> slabs;
        std::vector<packet*> free;
        ~store() {
            for (uint8_t* s : slabs) unmap_slab(s);
        }
        /// Adds a slab's buffers to the free list, the lowest address on top.
        void grow() {
            uint8_t* s = map_slab(true);
            slabs.push_back(s);
            for (size_t i = per_slab; i-- > 0;) free.push_back(new (s + i * stride) packet);
        }
    };
    static store& instance() {
        static store s;
        return s;
    }
};

/// The sender's buffer on `gp`, if it is offered (packet_handoff_ext) and holds these very
/// bytes (not a faulty cable's altered copy; a duplicate finds another buffer there): where a
/// receiver swaps in a free buffer to take it. nullptr: copy the bytes.
inline packet** offered_buffer(tlm::tlm_generic_payload& gp) {
    packet_handoff_ext* h = gp.get_extension<packet_handoff_ext>();
    return h && h->pkt && h->pkt->bytes == gp.get_data_ptr() ? &h->pkt : nullptr;
}

}  // namespace hcasim
