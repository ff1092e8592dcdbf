#include "model/fabric/ib_switch.h"

#include <cstring>
#include <utility>

#include "model/core/bytes.h"
#include "model/core/sim_time.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim {

using namespace sc_core;

ib_switch::ib_switch(const sc_module_name& name, unsigned ports)
    : sc_module(name),
      in("in"),
      out("out"),
      latency_ns("latency_ns", 90.0, "ns", "forwarding latency from input to output (cut-through)", {0, 1e6}),
      queue_packets("queue_packets", 256, "packets", "output queue depth per port", {1, 65536}),
      forwarded("forwarded", "packets forwarded"),
      dropped_no_route("dropped_no_route", "packets dropped: no port for the DLID"),
      dropped_queue_full("dropped_queue_full", "packets dropped: output queue full"),
      mcast_replicas("mcast_replicas", "copies of multicast packets queued on member ports"),
      lid_to_port_(65536, -1),
      mft_(0xFFFF - 0xC000) {
    for (unsigned p = 0; p < ports; ++p)  // now, so the counters are named under this module
        ports_.push_back(std::make_unique<out_port>("out" + std::to_string(p) + "."));
    active_.assign((ports + 63) / 64, 0);
    in.register_b_transport(this, &ib_switch::b_transport);
    SC_METHOD(forward);
    sensitive << wake_;
    dont_initialize();
    gp_.set_command(tlm::TLM_WRITE_COMMAND);
    handoff_ = new packet_handoff_ext;
    gp_.set_extension(handoff_);
}

ib_switch::~ib_switch() {
    for (auto& o : ports_)
        for (auto& s : o->pool) packet_pool::give(s->pkt);
}

void ib_switch::set_route(unsigned p, uint16_t lid, double rate_gbps, const sc_time& propagation,
                          const fault_settings& faults, uint8_t lmc) {
    if (p >= ports_.size()) SC_REPORT_ERROR(name(), ("set_route: no port " + std::to_string(p)).c_str());
    out_port& o = *ports_[p];
    o.faults.configure(faults, fault_direction::to_node, &wake_);
    o.ps_per_byte = 8000.0 / rate_gbps;
    o.propagation = propagation;
    if (o.ring.empty()) {
        o.ring.assign(queue_packets, nullptr);
        for (size_t i = 0; i < o.ring.size(); ++i) {
            o.pool.push_back(std::make_unique<slot>());
            o.free.push_back(o.pool.back().get());
        }
    }
    for (uint32_t k = 0; k < (1u << (lmc & 7)) && lid + k < lid_to_port_.size(); ++k)
        lid_to_port_[lid + k] = int(p);
}

void ib_switch::capture_to(unsigned p, wire_capture* w, unsigned dir) {
    if (p >= ports_.size()) SC_REPORT_ERROR(name(), ("capture_to: no port " + std::to_string(p)).c_str());
    ports_[p]->capture = w;
    ports_[p]->capture_dir = dir;
}

void ib_switch::join_mcast(uint16_t mlid, unsigned p) {
    if (mlid < 0xC000 || mlid == 0xFFFF || p >= ports_.size()) return;
    std::vector<uint16_t>& g = mft_[mlid - 0xC000];
    if (g.empty()) g.assign(ports_.size(), 0);
    ++g[p];
}

void ib_switch::leave_mcast(uint16_t mlid, unsigned p) {
    if (mlid < 0xC000 || mlid == 0xFFFF || p >= ports_.size()) return;
    std::vector<uint16_t>& g = mft_[mlid - 0xC000];
    if (!g.empty() && g[p]) --g[p];
}

bool ib_switch::enqueue(unsigned p, const uint8_t* data, uint32_t len, const sc_time& delay, crc_state crc,
                        packet** handoff) {
    out_port& o = *ports_[p];
    if (o.count == o.ring.size()) {
        ++dropped_queue_full;
        HCASIM_LOG(log_, info,
                   "drops " << wire::describe_packet(data, len) << ": port " << p << "'s queue is full");
        return false;
    }
    slot*& at = o.ring[(o.head + o.count) % o.ring.size()];
    at = o.free.back();
    o.free.pop_back();
    slot& s = *at;
    s.at = sc_time_stamp() + delay + ns_time(latency_ns.get());
    s.crc = crc;
    if (handoff) {
        std::swap(s.pkt, *handoff);  // the sender gets this slot's free buffer
        if (!*handoff) *handoff = packet_pool::take();
    } else {
        if (!s.pkt) s.pkt = packet_pool::take();
        copy_bytes(s.pkt->bytes, data, len);
    }
    s.pkt->len = len;
    ++o.count;
    active_[p / 64] |= uint64_t(1) << (p % 64);
    wake_.notify(s.at - sc_time_stamp());
    return true;
}

void ib_switch::b_transport(int id, tlm::tlm_generic_payload& gp, sc_time& delay) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    const uint32_t len = gp.get_data_length();
    if (len < wire::LRH_BYTES || len > MAX_PACKET_BYTES) {
        ++dropped_no_route;
        HCASIM_LOG(log_, info, "drops a " << len << "-byte packet from port " << id << ": no valid LRH");
        return;
    }
    const wire::lrh l = wire::decode_lrh(gp.get_data_ptr());
    if (l.dlid >= 0xC000 && l.dlid != 0xFFFF) {
        // Multicast: a copy to every member port but the input (the sender's own HCA delivers
        // to its attached QPs itself).
        const std::vector<uint16_t>& g = mft_[l.dlid - 0xC000];
        unsigned copies = 0;
        for (unsigned p = 0; p < g.size(); ++p) {
            if (!g[p] || int(p) == id || ports_[p]->ring.empty()) continue;
            if (enqueue(p, gp.get_data_ptr(), len, delay, crc_state_of(gp))) ++copies;
        }
        if (!copies && g.empty()) {
            ++dropped_no_route;
            HCASIM_LOG(
                log_, info,
                "drops " << wire::describe_packet(gp.get_data_ptr(), len) << ": no such multicast group");
        }
        mcast_replicas += copies;
        return;
    }
    const int p = lid_to_port_[l.dlid];
    if (p < 0 || size_t(p) >= ports_.size() || ports_[p]->ring.empty()) {
        ++dropped_no_route;
        HCASIM_LOG(log_, info,
                   "drops " << wire::describe_packet(gp.get_data_ptr(), len) << ": no route to the DLID");
        return;
    }
    enqueue(unsigned(p), gp.get_data_ptr(), len, delay, crc_state_of(gp), offered_buffer(gp));
}

// Each output serialises its queue in order; a packet starts when it is ready and the output
// is free. Arrival order per input is time order, and outputs are served independently. The
// cable toward the node then applies its faults; a packet it holds back is due on wake_ too.
void ib_switch::forward() {
    const sc_time now = sc_time_stamp();
    sc_time next = SC_ZERO_TIME;
    bool have_next = false;
    // The ports in active_, in increasing order; a port marked while an earlier one forwards
    // (a subnet manager answering at once) is still visited, as in a scan of every port.
    for (unsigned p = 0; p < ports_.size(); ++p) {
        const uint64_t later = active_[p / 64] >> (p % 64);
        if (!later) {
            p |= 63;  // nothing more in this word
            continue;
        }
        p += unsigned(__builtin_ctzll(later));
        out_port& o = *ports_[p];
        if (o.faults.holding()) o.faults.release(*out[p]);
        while (o.count && o.ring[o.head]->at <= now) {
            slot& s = *o.ring[o.head];
            sc_time start = o.free_at > now ? o.free_at : now;
            const uint32_t len = s.pkt->len;
            o.free_at = start + ps_time(double(len) * o.ps_per_byte);
            if (o.capture) o.capture->record(o.capture_dir, start, s.pkt->bytes, len, s.crc);
            gp_.set_data_ptr(s.pkt->bytes);
            gp_.set_data_length(len);
            gp_.set_streaming_width(len);
            gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
            set_crc_state(gp_, s.crc);
            sc_time delay = o.free_at - now + o.propagation;
            handoff_->pkt = s.pkt;
            o.faults.carry(gp_, delay, *out[p]);
            s.pkt = handoff_->pkt;  // the receiver's free buffer if it took this one
            handoff_->pkt = nullptr;
            ++forwarded;
            o.free.push_back(&s);
            o.head = (o.head + 1) % o.ring.size();
            --o.count;
        }
        if (o.count && (!have_next || o.ring[o.head]->at < next)) {
            next = o.ring[o.head]->at;
            have_next = true;
        }
        if (!o.count && !o.faults.holding()) active_[p / 64] &= ~(uint64_t(1) << (p % 64));
    }
    if (have_next) wake_.notify(next - now);
}

}  // namespace hcasim
