// A received packet after the port has checked its CRCs and decoded its headers; handed by
// reference down the receive path (P_Key checker, transport engine) and valid for that call.
#pragma once
#include <cstdint>

#include "tlm_if/tlm_ext.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim {

struct rx_packet {
    wire::headers h;          ///< decoded headers
    const uint8_t* payload;   ///< payload bytes (pad excluded)
    uint32_t payload_len;     ///< payload length
    uint32_t wire_len;        ///< whole packet length on the wire
    uint16_t pkey_index = 0;  ///< packets to QP1: the P_Key table entry matched (C10-132), else 0
    /// The receive buffer holding the packet, on offer to a DMA write of its payload (host
    /// memory may keep it until the write lands instead of copying); nullptr: none.
    buffer_loan_ext* loan = nullptr;
};

/// Receiver of decoded packets (the next unit on the receive path).
class rx_sink {
public:
    rx_sink() = default;
    rx_sink(const rx_sink&) = delete;  // wants_hints() may point into another sink
    rx_sink& operator=(const rx_sink&) = delete;
    virtual ~rx_sink() = default;
    virtual void receive(const rx_packet& p) = 0;
    /// A packet for QP `dest_qp` has been handed to the port and will be received later: a
    /// hint to start loading what its receive will touch into the host CPU's caches (a
    /// simulator speed-up, no effect on the model). Called only while wants_hints().
    virtual void expect(uint32_t dest_qp) { (void)dest_qp; }
    /// Whether the receiver (at the end of the path) takes expect() hints now: a sender
    /// checks this flag and spares itself finding the QP number otherwise.
    bool wants_hints() const { return *hints_; }

protected:
    /// The receiver takes hints from now on (or no longer).
    void want_hints(bool on) { own_hints_ = on; }
    /// A unit that passes packets on answers wants_hints() as its own receiver does.
    void hints_as(const rx_sink& next) { hints_ = next.hints_; }

private:
    bool own_hints_ = false;
    const bool* hints_ = &own_hints_;
};

}  // namespace hcasim
