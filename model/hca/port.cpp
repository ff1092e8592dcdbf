#include "model/hca/port.h"

#include <cstring>

namespace hcasim {

using namespace sc_core;

port::port(const sc_module_name& name)
    : sc_module(name),
      tx("tx"),
      rx("rx"),
      tx_queue_packets("tx_queue_packets", 128, "packets", "transmit queue depth (packets waiting for the wire)"),
      rx_buffer_packets("rx_buffer_packets", 256, "packets", "receive buffer depth; arrivals beyond it are dropped"),
      rx_pipeline_ns("rx_pipeline_ns", 20.0, "ns", "receive pipeline: last bit in to P_Key checker"),
      tx_packets("tx_packets", "packets transmitted"),
      tx_bytes("tx_bytes", "bytes transmitted (LRH through VCRC)"),
      rx_packets("rx_packets", "packets received and passed on"),
      rx_bytes("rx_bytes", "bytes received"),
      rx_bad_vcrc("rx_bad_vcrc", "packets dropped for a VCRC mismatch"),
      rx_bad_icrc("rx_bad_icrc", "packets dropped for an ICRC mismatch"),
      rx_malformed("rx_malformed", "packets dropped as malformed (length, LNH, version, opcode)"),
      rx_overflow("rx_overflow", "packets dropped because the receive buffer was full") {
    tx_queue_packets.range(1, 65536);
    rx_buffer_packets.range(1, 65536);
    rx_pipeline_ns.range(0, 1e6);
    rx_pipeline_ = sc_time(rx_pipeline_ns.get(), SC_NS);
    tx_starts_.resize(tx_queue_packets);
    rx_ring_.resize(rx_buffer_packets);
    for (auto& s : rx_ring_)
        s = std::make_unique<rx_slot>();
    rx.register_b_transport(this, &port::rx_b_transport);
    SC_METHOD(rx_process);
    sensitive << rx_event_;
    dont_initialize();
    tx_gp_.set_command(tlm::TLM_WRITE_COMMAND);
}

void port::set_rate_gbps(double gbps) {
    rate_gbps_ = gbps;
    ps_per_byte_ = 8000.0 / gbps;
}

sc_time port::tx_backpressure() {
    const sc_time now = sc_time_stamp();
    while (tx_count_ && tx_starts_[tx_head_] <= now) {
        tx_head_ = (tx_head_ + 1) % tx_starts_.size();
        --tx_count_;
    }
    return tx_count_ < tx_starts_.size() ? SC_ZERO_TIME : tx_starts_[tx_head_] - now;
}

sc_time port::transmit(packet& pkt, uint32_t len_before_icrc, const sc_time& ready) {
    pkt.len = uint32_t(wire::seal_packet(pkt.bytes, len_before_icrc));
    const sc_time now = sc_time_stamp();
    sc_time start = now + ready;
    if (wire_free_ > start)
        start = wire_free_;
    wire_free_ = start + sc_time(double(pkt.len) * ps_per_byte_, SC_PS);
    // Remember when this packet leaves the queue, for backpressure (overwrite the oldest if a
    // caller ignored tx_backpressure: the ring only bounds what is tracked).
    tx_backpressure();
    if (tx_count_ == tx_starts_.size()) {
        tx_head_ = (tx_head_ + 1) % tx_starts_.size();
        --tx_count_;
    }
    tx_starts_[(tx_head_ + tx_count_) % tx_starts_.size()] = start;
    ++tx_count_;
    ++tx_packets;
    tx_bytes += pkt.len;

    tx_gp_.set_address(0);
    tx_gp_.set_data_ptr(pkt.bytes);
    tx_gp_.set_data_length(pkt.len);
    tx_gp_.set_streaming_width(pkt.len);
    tx_gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_time delay = wire_free_ - now;  // last bit on the wire (store and forward)
    const sc_time done = delay;
    tx->b_transport(tx_gp_, delay);
    return done;
}

void port::rx_b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    const uint32_t len = gp.get_data_length();
    if (rx_count_ == rx_ring_.size()) {
        ++rx_overflow;
        return;
    }
    if (len > MAX_PACKET_BYTES) {
        ++rx_malformed;
        return;
    }
    rx_slot& s = *rx_ring_[(rx_head_ + rx_count_) % rx_ring_.size()];
    s.arrival = sc_time_stamp() + delay + rx_pipeline_;
    s.pkt.len = len;
    std::memcpy(s.pkt.bytes, gp.get_data_ptr(), len);
    if (rx_count_++ == 0)
        rx_event_.notify(delay + rx_pipeline_);
}

void port::rx_process() {
    const sc_time now = sc_time_stamp();
    while (rx_count_ && rx_ring_[rx_head_]->arrival <= now) {
        rx_slot& s = *rx_ring_[rx_head_];
        rx_packet p;
        size_t off = 0, plen = 0;
        const wire::parse_status st = wire::parse_packet(s.pkt.bytes, s.pkt.len, p.h, off, plen);
        rx_bytes += s.pkt.len;
        if (st == wire::parse_status::ok) {
            ++rx_packets;
            p.payload = s.pkt.bytes + off;
            p.payload_len = uint32_t(plen);
            p.wire_len = s.pkt.len;
            if (sink_)
                sink_->receive(p);
        } else if (st == wire::parse_status::bad_vcrc) {
            ++rx_bad_vcrc;
        } else if (st == wire::parse_status::bad_icrc) {
            ++rx_bad_icrc;
        } else {
            ++rx_malformed;
        }
        rx_head_ = (rx_head_ + 1) % rx_ring_.size();
        --rx_count_;
    }
    if (rx_count_)
        rx_event_.notify(rx_ring_[rx_head_]->arrival - now);
}

}  // namespace hcasim
