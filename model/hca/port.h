// HCA port: serialises transmitted packets at the active link rate (computing ICRC and VCRC)
// and receives packets from the link (checking VCRC and ICRC, decoding headers) for the
// P_Key checker. Timing is analytic: each packet occupies the wire from
// max(ready, wire free) for len x 8 / rate; no process runs per packet on transmit.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <memory>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/fabric/packet.h"
#include "model/hca/rx_packet.h"

namespace hcasim {

class port : public sc_core::sc_module {
public:
    tlm_utils::simple_initiator_socket<port> tx;  ///< to this node's link
    tlm_utils::simple_target_socket<port> rx;     ///< from the far end

    param<unsigned> tx_queue_packets;   ///< packets that may wait for the wire
    param<unsigned> rx_buffer_packets;  ///< receive buffer; arrivals beyond it are dropped
    param<double> rx_pipeline_ns;       ///< from last bit in to the packet reaching the P_Key checker

    counter tx_packets, tx_bytes, rx_packets, rx_bytes;
    counter rx_bad_vcrc, rx_bad_icrc, rx_malformed, rx_overflow;

    SC_HAS_PROCESS(port);
    explicit port(const sc_core::sc_module_name& name);

    /// Active data rate of the connection (set by the fabric after link negotiation).
    void set_rate_gbps(double gbps);
    double rate_gbps() const { return rate_gbps_; }
    /// Where received packets go.
    void bind_receiver(rx_sink& sink) { sink_ = &sink; }

    /// Sends a packet whose headers, payload and pad occupy pkt.bytes[0..len_before_icrc):
    /// appends ICRC and VCRC and puts it on the wire no earlier than sc_time_stamp() + ready.
    /// The caller's buffer is free again on return. Returns the time (offset from now) the
    /// last bit leaves the port.
    sc_core::sc_time transmit(packet& pkt, uint32_t len_before_icrc, const sc_core::sc_time& ready);
    /// How long a sender must wait before the transmit queue has room (zero if it has).
    sc_core::sc_time tx_backpressure();

private:
    void rx_b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void rx_process();

    struct rx_slot {
        sc_core::sc_time arrival;
        packet pkt;
    };
    rx_sink* sink_ = nullptr;
    double rate_gbps_ = 100.0;
    double ps_per_byte_ = 80.0;
    sc_core::sc_time wire_free_;
    std::vector<sc_core::sc_time> tx_starts_;  // ring of start times of queued packets
    size_t tx_head_ = 0, tx_count_ = 0;
    std::vector<std::unique_ptr<rx_slot>> rx_ring_;
    size_t rx_head_ = 0, rx_count_ = 0;
    sc_core::sc_event rx_event_;
    sc_core::sc_time rx_pipeline_;
    tlm::tlm_generic_payload tx_gp_;
};

}  // namespace hcasim
