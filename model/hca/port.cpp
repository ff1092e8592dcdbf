#include "model/hca/port.h"

#include "model/core/bytes.h"
#include "model/core/sim_time.h"
#include "model/fabric/vl_arbiter.h"

#include <cstring>
#include <utility>

namespace hcasim {

namespace {
/// Payloads from this size on are offered to host memory without a copy (rx_packet::loan).
constexpr size_t loan_min_bytes = 512;
}  // namespace

using namespace sc_core;

port::port(const sc_module_name& name)
    : sc_module(name),
      tx("tx"),
      rx("rx"),
      tx_queue_packets(
          "tx_queue_packets", 128, "packets",
          "transmit queue depth (packets waiting for the wire, per data VL when the link has more than "
          "one; as many for the loopback path)",
          {1, 65536}),
      rx_buffer_packets(
          "rx_buffer_packets", 256, "packets",
          "initial depth of the arrival queue (packets scheduled towards the port; it doubles when full)",
          {1, 65536}),
      rx_pipeline_ns("rx_pipeline_ns", 20.0, "ns", "receive pipeline: last bit in to P_Key checker",
                     {0, 1e6}),
      loopback_ns("loopback_ns", 0.0, "ns",
                  "loopback to own LID: last bit serialised to the receive pipeline (no wire, no cable)",
                  {0, 1e6}),
      lazy_crc("lazy_crc", true, "",
               "compute a packet's ICRC and VCRC only when something needs the exact wire bytes (bit-error "
               "injection, a subnet manager's record); false: at every transmit (same results, slower)"),
      vl_buffer_bytes("vl_buffer_bytes", 65536, "bytes",
                      "receive buffer per data VL (the sender's credits: 64-byte blocks); at least one "
                      "largest packet (4224 bytes) [unverified: vendors do not publish it]",
                      {4224, 1u << 24}),
      vl15_buffer_packets("vl15_buffer_packets", 4, "packets",
                          "receive buffer of VL15 (SMPs; not flow controlled: a full buffer drops and "
                          "counts VL15Dropped) [unverified]",
                          {1, 65536}),
      sl2vl("sl2vl", "", "",
            "SL-to-VL mapping table: 16 comma-separated VLs for SL 0..15 (15: drop the SL); empty: SL mod "
            "the link's data VLs"),
      vlarb_high("vlarb_high", "", "",
                 "high-priority VL arbitration table of the port's output (with more than one data VL): "
                 "VL:WEIGHT,... (weight in 64-byte blocks, 0..255, at most 64 entries)"),
      vlarb_low(
          "vlarb_low", "", "",
          "low-priority VL arbitration table; with both tables empty every data VL gets weight 255 here"),
      vlarb_high_limit("vlarb_high_limit", 0, "4 KiB",
                       "LimitOfHighPriority: high-priority bytes (in 4096-byte units) sent before a waiting "
                       "low-priority packet gets a turn; 255 unbounded",
                       {0, 255}),
      tx_packets("tx_packets", "packets transmitted"),
      tx_bytes("tx_bytes", "bytes transmitted (LRH through VCRC)"),
      rx_packets("rx_packets", "packets received and passed on"),
      rx_bytes("rx_bytes", "bytes received"),
      tx_busy_ps("tx_busy_ps", "ps the wire spent serialising this port's packets (utilisation)"),
      rx_bad_vcrc("rx_bad_vcrc", "packets dropped for a VCRC mismatch"),
      rx_bad_icrc("rx_bad_icrc", "packets dropped for an ICRC mismatch"),
      rx_malformed("rx_malformed", "packets dropped as malformed (length, LNH, version, opcode)"),
      rx_queue_grows(
          "rx_queue_grows",
          "times the arrival queue doubled (more packets scheduled towards the port than rx_buffer_packets)"),
      rx_bad_dlid("rx_bad_dlid", "packets dropped for a DLID neither ours, multicast nor permissive"),
      loopback_packets("loopback_packets", "packets to our own LID looped back (not on the wire)"),
      loopback_bytes("loopback_bytes", "bytes looped back (LRH through VCRC)"),
      tx_queue_peak("tx_queue_peak",
                    "most packets waiting for the wire serialiser at once (at most tx_queue_packets)"),
      rx_queue_peak("rx_queue_peak", "most packets in the receive buffer at once"),
      PortXmitData("PortXmitData", "4-byte words transmitted, LRH through VCRC, all VLs (IBA PortXmitData)",
                   "4-byte words"),
      PortRcvData("PortRcvData", "4-byte words received, LRH through VCRC, all VLs (IBA PortRcvData)",
                  "4-byte words"),
      PortXmitPkts("PortXmitPkts", "packets transmitted, all VLs (IBA PortXmitPkts)"),
      PortRcvPkts("PortRcvPkts", "packets received, with errors too (IBA PortRcvPkts)"),
      PortXmitWait("PortXmitWait",
                   "ns a packet was ready but waited for credit (IBA PortXmitWait; a tick is 1 ns here)",
                   "ns"),
      PortXmitDiscards("PortXmitDiscards", "packets discarded on transmit: SL mapped to VL15 (IBA)"),
      PortRcvErrors("PortRcvErrors", "packets received with errors: CRC, malformed (IBA PortRcvErrors)"),
      VL15Dropped("VL15Dropped", "SMPs dropped: the VL15 receive buffer was full (IBA VL15Dropped)"),
      fc_packets("fc_packets",
                 "flow-control packets sent (one per data packet that leaves the receive buffer)") {
    rx_pipeline_ = sc_time(rx_pipeline_ns.get(), SC_NS);
    lazy_crc_ = lazy_crc.get();
    loopback_ = sc_time(loopback_ns.get(), SC_NS);
    wire_q_.starts.resize(tx_queue_packets);
    loop_q_.starts.resize(tx_queue_packets);
    rx_ring_.resize(rx_buffer_packets);
    for (size_t i = 0; i < rx_ring_.size(); ++i) {
        rx_pool_.push_back(std::make_unique<rx_slot>());
        rx_free_.push_back(rx_pool_.back().get());
    }
    static_assert(sizeof(rx_slot) == 256, "a receive slot is four cache lines");
    rx.register_b_transport(this, &port::rx_b_transport);
    SC_METHOD(rx_process);
    sensitive << rx_event_;
    dont_initialize();
    SC_METHOD(send_held);
    sensitive << held_event_;
    dont_initialize();
    SC_METHOD(arbitrate);
    sensitive << arb_event_;
    dont_initialize();
    tx_gp_.set_command(tlm::TLM_WRITE_COMMAND);
    handoff_ = new packet_handoff_ext;
    loan_.give_back = &port::give_back_loan;
    tx_gp_.set_extension(handoff_);
}

port::~port() {
    for (auto& s : rx_pool_) packet_pool::give(s->pkt);
    for (size_t i = held_head_; i < held_.size(); ++i) packet_pool::give(held_[i].pkt);
    for (ring<queued>& q : vlq_)
        for (; !q.empty(); q.pop_front()) packet_pool::give(q.front().pkt);
}

void port::set_flow_control(unsigned vls, uint32_t far_buffer_bytes) {
    if (far_buffer_bytes) tx_credits_.configure(vls, far_buffer_bytes);
    const std::vector<unsigned> table = parse_sl2vl(sl2vl.get(), sl2vl.key(), vls);
    for (unsigned sl = 0; sl < 16; ++sl) sl2vl_[sl] = uint8_t(table[sl]);
    std::vector<vlarb_entry> high = parse_vlarb(vlarb_high, vlarb_high.key(), vls),
                             low = parse_vlarb(vlarb_low, vlarb_low.key(), vls);
    // One data VL: packets go in the engine's order (nothing to arbitrate between); the tables
    // are kept for the SMA.
    vls_ = vls;
    arbitrated_ = vls > 1;
    if (arbitrated_ && (!high.empty() || !low.empty())) {
        // A VL the SL-to-VL table uses but neither table weighs would never send (IBA 7.6.9).
        uint32_t weighed = 0;
        for (const std::vector<vlarb_entry>* t : {&high, &low})
            for (const vlarb_entry& e : *t)
                if (e.weight) weighed |= 1u << e.vl;
        for (unsigned sl = 0; sl < 16; ++sl)
            if (sl2vl_[sl] != VL15 && !(weighed >> sl2vl_[sl] & 1))
                throw config_error("bad value for keys '" + vlarb_high.key() + "' and '" + vlarb_low.key() +
                                   "': VL " + std::to_string(sl2vl_[sl]) + " (SL " + std::to_string(sl) +
                                   ", " + sl2vl.key() +
                                   ") has no entry with a weight above 0 in either "
                                   "table, so its packets would never be sent");
    }
    arb_.configure(std::move(high), std::move(low), vlarb_high_limit, vls);
    if (arbitrated_) tx_credits_.notify_to(arb_event_);  // only arbitrate() waits for credit
}

void port::set_vlarb(std::vector<vlarb_entry> high, std::vector<vlarb_entry> low) {
    arb_.configure(std::move(high), std::move(low), vlarb_high_limit, vls_);
}

void port::give_back_loan(void* buffer) { packet_pool::give(static_cast<packet*>(buffer)); }

void port::set_rate_gbps(double gbps) {
    rate_gbps_ = gbps;
    ps_per_byte_ = 8000.0 / gbps;
}

void port::set_lid(uint16_t lid, uint8_t lmc) {
    lid_ = lid;
    lmc_ = uint8_t(lmc & 7);  // LMC is a 3-bit field (PortInfo)
}

sc_time port::departures::wait(const sc_time& now) {
    while (count && starts[head] <= now) {
        head = (head + 1) % starts.size();
        --count;
    }
    return count < starts.size() ? SC_ZERO_TIME : starts[head] - now;
}

void port::departures::push(const sc_time& start, const sc_time& now) {
    wait(now);
    if (count == starts.size()) {
        head = (head + 1) % starts.size();
        --count;
    }
    starts[(head + count) % starts.size()] = start;
    ++count;
}

sc_time port::tx_backpressure(uint8_t sl) {
    // The engine does not know which serialiser its next packet takes: it waits for both.
    const sc_time now = sim_now();
    if (held_head_ < held_.size()) return sc_max_time();  // packets wait for credit already
    const unsigned vl = sl2vl_[sl & 15];
    if (arbitrated_) {
        // Room in the VL's queue (the arbiter decides when it empties; credit is its concern).
        const sc_time l = loop_q_.wait(now);
        if (vl == VL15 || vlq_[vl].size() < tx_queue_packets) return l;
        full_waited_ |= 1u << vl;
        return sc_max_time();
    }
    const sc_time w = wire_q_.wait(now), l = loop_q_.wait(now);
    if (tx_credits_.limited() && vl != VL15) {
        // Credit for the largest packet by the time the wire is free (the packet takes its
        // actual size when it is sent).
        sc_time t = wire_free_ > now ? wire_free_ : now;
        if (!tx_credits_.earliest(vl, credit_blocks(MAX_PACKET_BYTES), t)) {
            // The engine holds its packet back: once the packets already on their way have
            // left, the port waits for credit (PortXmitWait counts it when the packet goes).
            if (!credit_blocked_) {
                credit_blocked_ = true;
                blocked_since_ = wire_free_ > now ? wire_free_ : now;  // the wire goes idle then
            }
            return sc_max_time();
        }
    }
    return w > l ? w : l;
}

sc_time port::transmit(packet& pkt, uint32_t len_before_icrc, const sc_time& ready) {
    // The VL of the packet's SL on this link (hop by hop, IBA 7.6.5); an SMP keeps VL15.
    unsigned vl = pkt.bytes[0] >> 4;
    const bool smp = vl == VL15;
    if (!smp) {
        vl = sl2vl_[pkt.bytes[1] >> 4];
        pkt.bytes[0] = uint8_t(vl << 4 | (pkt.bytes[0] & 0x0F));
    }
    // ICRC and VCRC: computed now, or (lazy_crc) only by whoever needs the exact wire bytes.
    pkt.len = lazy_crc_ ? len_before_icrc + uint32_t(wire::ICRC_BYTES + wire::VCRC_BYTES)
                        : uint32_t(wire::seal_packet(pkt.bytes, len_before_icrc));
    const sc_time now = sim_now();
    const sc_time serialise = ps_time(double(pkt.len) * ps_per_byte_);
    const uint16_t dlid = wire::decode_lrh(pkt.bytes).dlid;
    auto loop_back = [&] {
        // Its own serialiser at the port rate: the wire is not used by it.
        sc_time start = now + ready;
        if (loop_free_ > start) start = loop_free_;
        loop_free_ = start + serialise;
        loop_q_.push(start, now);
        ++loopback_packets;
        loopback_bytes += pkt.len;
        enqueue_rx(pkt.bytes, pkt.len, loop_free_ + loopback_ + rx_pipeline_, true);  // never altered
    };
    if (is_own_lid(dlid)) {
        // C10-6: a packet to a QP on this port is delivered internally, never onto the link.
        loop_back();
        return loop_free_ - now;
    }
    if (dlid >= wire::MULTICAST_LID_BASE && dlid != wire::PERMISSIVE_LID) {
        // o10-36: a multicast packet also reaches the QPs of this port attached to its group
        // (the switch sends no copy back to the port it came from); then it goes on the wire.
        loop_back();
    }
    if (vl == VL15 && !smp) {  // the SL2VL table drops this SL
        ++PortXmitDiscards;
        return serialise;
    }
    if (arbitrated_) return enqueue_vl(pkt, vl, now + ready, serialise);
    sc_time start = now + ready;
    if (wire_free_ > start) start = wire_free_;
    if (vl != VL15 && tx_credits_.limited()) {
        const sc_time want = start;
        if (held_head_ < held_.size() || !tx_credits_.earliest(vl, credit_blocks(pkt.len), start)) {
            // No credit is known to come yet: the packet waits in the port (in order) and goes
            // when the far end frees room. The caller gets the time it would leave without the
            // wait (it held off with tx_backpressure(); only ACKs and SMPs get here).
            packet* copy = packet_pool::take();
            copy_bytes(copy->bytes, pkt.bytes, pkt.len);
            copy->len = pkt.len;
            held_.push_back(held_packet{copy, want, vl});
            if (held_.size() - held_head_ == 1) held_event_.notify(SC_ZERO_TIME);
            return want + serialise - now;
        }
        xmit_wait_ps_ += ps_count(start - want);
        if (credit_blocked_) {
            // Waiting since the engine was held back: until the credit for this packet came.
            sc_time came = blocked_since_;
            if (tx_credits_.earliest(vl, credit_blocks(pkt.len), came) && came > blocked_since_)
                xmit_wait_ps_ += ps_count((came < want ? came : want) - blocked_since_);
            credit_blocked_ = false;
        }
        tx_credits_.take(vl, credit_blocks(pkt.len), start);
    }
    wire_out(pkt, start);
    return wire_free_ - now;
}

void port::send_held() {
    const sc_time now = sim_now();
    while (held_head_ < held_.size()) {
        held_packet& h = held_[held_head_];
        sc_time start = h.ready > now ? h.ready : now;
        if (wire_free_ > start) start = wire_free_;
        const sc_time want = start;
        if (!tx_credits_.earliest(h.vl, credit_blocks(h.pkt->len), start)) {
            next_trigger(tx_credits_.wait_for_credit());
            return;
        }
        xmit_wait_ps_ += ps_count(start - want);
        tx_credits_.take(h.vl, credit_blocks(h.pkt->len), start);
        handoff_->pkt = h.pkt;
        wire_out(*h.pkt, start);
        packet_pool::give(handoff_->pkt);  // this one, or the receiver's free one in exchange
        handoff_->pkt = nullptr;
        ++held_head_;
    }
    held_.clear();
    held_head_ = 0;
    tx_unblocked_.notify(SC_ZERO_TIME);
    next_trigger(held_event_);
}

sc_time port::enqueue_vl(packet& pkt, unsigned vl, const sc_time& ready_at, const sc_time& serialise) {
    ring<queued>& q = vlq_[vl];
    if (q.full()) q.grow(q.slots() ? q.slots() * 2 : 8);  // allocates only while the queue deepens
    packet* held;
    if (handoff_->pkt == &pkt) {  // the caller's pool buffer: keep it, give it a free one
        held = handoff_->pkt;
        handoff_->pkt = packet_pool::take();
    } else {
        held = packet_pool::take();
        copy_bytes(held->bytes, pkt.bytes, pkt.len);
        held->len = pkt.len;
    }
    q.push_back(queued{held, ready_at, credit_blocks(pkt.len)});
    queued_vls_ |= 1u << vl;
    const sc_time now = sim_now();
    const sc_time start = ready_at > wire_free_ ? ready_at : wire_free_;
    if (!arb_until_wire_) arb_event_.notify(start - now);  // an earlier notification replaces a later one
    return start + serialise - now;
}

void port::arbitrate() {
    const sc_time now = sim_now();
    arb_until_wire_ = false;
    if (wire_free_ > now) {
        arb_until_wire_ = true;
        next_trigger(wire_free_ - now);
        return;
    }
    // Eligible: the head packet is ready and the far end has room for all of it now.
    uint32_t eligible = 0;
    bool starved = false, unknown = false;  // a ready head lacks credit; no return known for one
    sc_time next = sc_max_time();           // the earliest a head becomes eligible, as known now
    for (uint32_t m = queued_vls_; m; m &= m - 1) {
        const unsigned vl = unsigned(__builtin_ctz(m));
        const queued& h = vlq_[vl].front();
        sc_time t = h.ready > now ? h.ready : now;
        if (vl != VL15 && !tx_credits_.earliest(vl, h.blocks, t)) {
            starved |= h.ready <= now;
            unknown = true;
            continue;
        }
        if (t > now) {
            starved |= h.ready <= now;
            if (t < next) next = t;
            continue;
        }
        eligible |= 1u << vl;
    }
    const int pick = !eligible ? -1 : (eligible >> VL15 & 1) ? int(VL15) : arb_.pick(eligible);
    if (pick < 0) {
        // PortXmitWait: the wire idles while a ready packet waits for credit.
        if (starved && !credit_blocked_) {
            credit_blocked_ = true;
            blocked_since_ = now;
        }
        if (unknown) tx_credits_.wait_for_credit();  // restore() notifies arb_event_
        if (next != sc_max_time())
            next_trigger(next - now, arb_event_);
        else
            next_trigger(arb_event_);
        return;
    }
    const unsigned v = unsigned(pick);
    ring<queued>& q = vlq_[v];
    const queued h = q.front();
    q.pop_front();
    if (q.empty()) queued_vls_ &= ~(1u << v);
    if (v != VL15) {
        tx_credits_.take(v, h.blocks, now);
        arb_.sent(v, h.blocks);
    }
    if (credit_blocked_) {
        xmit_wait_ps_ += ps_count(now - blocked_since_);
        credit_blocked_ = false;
    }
    handoff_->pkt = h.pkt;
    wire_out(*h.pkt, now);
    packet_pool::give(handoff_->pkt);  // this one, or the receiver's free one in exchange
    handoff_->pkt = nullptr;
    if ((full_waited_ >> v & 1) && q.size() < tx_queue_packets) {
        full_waited_ &= ~(1u << v);
        tx_unblocked_.notify(SC_ZERO_TIME);
    }
    arb_until_wire_ = true;  // the next decision when this packet's last bit is out
    next_trigger(wire_free_ - now);
}

void port::wire_out(packet& pkt, const sc_time& start) {
    const sc_time now = sim_now();
    wire_free_ = start + ps_time(double(pkt.len) * ps_per_byte_);
    tx_busy_ps += ps_count(wire_free_ - start);
    // Remember when this packet leaves the queue, for backpressure.
    wire_q_.push(start, now);
    if (wire_q_.count > tx_queue_peak.value()) tx_queue_peak += wire_q_.count - tx_queue_peak.value();
    ++tx_packets;
    tx_bytes += pkt.len;
    ++PortXmitPkts;
    PortXmitData += pkt.len / 4;
    if (xmit_wait_ps_ >= 1000) {
        PortXmitWait += xmit_wait_ps_ / 1000;
        xmit_wait_ps_ %= 1000;
    }
    if (tl_) {
        const wire::lrh l = wire::decode_lrh(pkt.bytes);
        const wire::bth b = wire::decode_bth(pkt.bytes + 8 + (l.next == wire::lnh::iba_global ? 40 : 0));
        tl_->span(tx_track_, timeline::opcode_name(b.opcode).c_str(), start, wire_free_,
                  "\"psn\":" + std::to_string(b.psn) + ",\"dest_qp\":" + std::to_string(b.dest_qp) +
                      ",\"dlid\":" + std::to_string(l.dlid) + ",\"bytes\":" + std::to_string(pkt.len));
    }

    tx_gp_.set_address(0);
    tx_gp_.set_data_ptr(pkt.bytes);
    tx_gp_.set_data_length(pkt.len);
    tx_gp_.set_streaming_width(pkt.len);
    tx_gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    // The receiver may trust the CRCs while nothing alters the bytes (crc_intact_ext).
    set_crc_state(tx_gp_, lazy_crc_ ? crc_state::unsealed : crc_state::sealed);
    sc_time delay = wire_free_ - now;  // last bit on the wire (store and forward)
    tx->b_transport(tx_gp_, delay);
}

sc_time port::transmit(packet*& pkt, uint32_t len_before_icrc, const sc_time& ready) {
    handoff_->pkt = pkt;
    const sc_time done = transmit(*pkt, len_before_icrc, ready);
    pkt = handoff_->pkt;  // the receiver's free buffer if it took this one
    handoff_->pkt = nullptr;
    return done;
}

void port::rx_b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    const uint32_t len = gp.get_data_length();
    const sc_time arrival = sim_now() + delay + rx_pipeline_;
    ++PortRcvPkts;
    PortRcvData += len / 4;
    const unsigned vl = len ? gp.get_data_ptr()[0] >> 4 : 0;
    if (vl == VL15) {
        // Not flow controlled: a full VL15 buffer drops the SMP.
        // The packets handed over ahead of time count only while they are in the buffer.
        const sc_time last = sim_now() + delay, ser = ps_time(double(len) * ps_per_byte_);
        const sc_time first = last > ser ? last - ser : SC_ZERO_TIME;
        while (!vl15_leaves_.empty() && vl15_leaves_.front() <= first) vl15_leaves_.pop_front();
        if (vl15_leaves_.size() >= vl15_buffer_packets) {
            ++VL15Dropped;
            HCASIM_LOG(log_, info,
                       "drops " << wire::describe_packet(gp.get_data_ptr(), len) << ": VL15 buffer full");
            return;
        }
        vl15_leaves_.push_back(arrival);
    } else if (upstream_) {
        // The packet leaves the receive buffer when it enters the pipeline's last stage (the
        // P_Key checker, at `arrival`): an FC packet takes its credit back to the sender.
        upstream_->restore(vl, credit_blocks(len), arrival + credit_delay_);
        ++fc_packets;
    }
    enqueue_rx(gp.get_data_ptr(), len, arrival, crc_state_of(gp) != crc_state::unknown, offered_buffer(gp));
}

void port::enqueue_rx(const uint8_t* bytes, uint32_t len, const sc_time& arrival, bool intact,
                      packet** handoff) {
    if (rx_count_ == rx_ring_.size()) {
        // The queue holds packets whose arrival lies ahead (senders hand packets to the link when
        // they schedule them; a response waiting for its data's DMA may be scheduled far ahead).
        // Packets are processed the moment they arrive, so none of these occupies a receive
        // buffer yet: the queue grows (doubling, rarely) rather than dropping what a lossless
        // link delivers.
        std::vector<rx_slot*> grown(rx_ring_.size() * 2, nullptr);
        for (size_t i = 0; i < rx_count_; ++i) grown[i] = rx_ring_[(rx_head_ + i) % rx_ring_.size()];
        for (size_t i = rx_ring_.size(); i < grown.size(); ++i) {
            rx_pool_.push_back(std::make_unique<rx_slot>());
            rx_free_.push_back(rx_pool_.back().get());
        }
        rx_ring_.swap(grown);
        rx_head_ = 0;
        ++rx_queue_grows;
    }
    if (len > MAX_PACKET_BYTES) {
        ++rx_malformed;
        return;
    }
    const size_t n = rx_ring_.size();
    size_t at = (rx_head_ + rx_count_) % n;
    rx_slot* s = rx_free_.back();
    rx_free_.pop_back();
    rx_ring_[at] = s;
    s->arrival = arrival;
    s->intact = intact;
    s->len = len;
    if (len <= rx_slot::SMALL_BYTES) {
        copy_bytes(s->small, bytes, len);  // the sender keeps its buffer
        s->data = s->small;
    } else {
        if (!s->pkt) s->pkt = packet_pool::take();
        if (handoff)
            std::swap(s->pkt, *handoff);  // the sender gets this slot's free buffer
        else
            copy_bytes(s->pkt->bytes, bytes, len);
        s->pkt->len = len;
        s->data = s->pkt->bytes;
    }
    if (sink_ && sink_->wants_hints() && len >= wire::LRH_BYTES) {  // the BTH's destination QP, a hint
        const uint8_t* b = s->data;
        const unsigned next = b[1] & 3;  // LNH
        const size_t bth = wire::LRH_BYTES + (next == unsigned(wire::lnh::iba_global) ? wire::GRH_BYTES : 0);
        if (next >= unsigned(wire::lnh::iba_local) && len >= bth + wire::BTH_BYTES)
            sink_->expect(uint32_t(b[bth + 5]) << 16 | uint32_t(b[bth + 6]) << 8 | b[bth + 7]);
    }
    // Keep the buffer in arrival order: a packet from the wire may arrive before looped-back
    // ones queued earlier (and the reverse). Equal times keep their order. Slots move by
    // pointer; each source alone arrives in order, so this rarely moves anything.
    size_t k = rx_count_++;
    if (rx_count_ > rx_queue_peak.value()) rx_queue_peak += rx_count_ - rx_queue_peak.value();
    while (k > 0) {
        const size_t prev = (at + n - 1) % n;
        if (rx_ring_[prev]->arrival <= arrival) break;
        std::swap(rx_ring_[prev], rx_ring_[at]);
        at = prev;
        --k;
    }
    if (k == 0)  // the new head: an earlier notification replaces a later pending one
        rx_event_.notify(arrival - sim_now());
}

void port::rx_process() {
    const sc_time now = sim_now();
    while (rx_count_ && rx_ring_[rx_head_]->arrival <= now) {
        rx_slot& s = *rx_ring_[rx_head_];
        rx_packet p;
        size_t off = 0, plen = 0;
        wire::parse_status st = wire::parse_packet(s.data, s.len, p.h, off, plen, !s.intact);
        if (st == wire::parse_status::bad_opcode && wire::is_cnp(s.data, s.len)) {
            // A congestion notification (not a transport opcode): headers only, for the engine.
            st = wire::parse_cnp(s.data, s.len, p.h, !s.intact);
            off = s.len;
            plen = 0;
        }
        rx_bytes += s.len;
        const uint16_t dlid = p.h.l.dlid;
        if (st == wire::parse_status::ok && !is_own_lid(dlid) && dlid < wire::MULTICAST_LID_BASE) {
            // Neither one of our unicast LIDs, nor multicast (0xC000-0xFFFE), nor permissive
            // (0xFFFF): not for this port (LID 0 is reserved and never valid).
            ++rx_bad_dlid;
            HCASIM_LOG(log_, info, "drops a packet for DLID 0x" << std::hex << dlid << ": not this port's");
        } else if (st == wire::parse_status::ok) {
            ++rx_packets;
            HCASIM_LOG(log_, debug, "receives " << wire::describe_packet(s.data, s.len));
            p.payload = s.data + off;
            p.payload_len = uint32_t(plen);
            p.wire_len = s.len;
            // Below loan_min_bytes a copy costs less than the loan's bookkeeping (and the packet
            // may be in the slot itself).
            if (plen >= loan_min_bytes && s.data != s.small) {
                loan_.buffer = s.pkt;
                loan_.begin = s.pkt->bytes;
                loan_.end = s.pkt->bytes + sizeof s.pkt->bytes;
                p.loan = &loan_;
            }
            if (tl_)
                tl_->span(rx_track_, timeline::opcode_name(p.h.b.opcode).c_str(),
                          s.arrival > rx_pipeline_ ? s.arrival - rx_pipeline_ : s.arrival, now,
                          "\"psn\":" + std::to_string(p.h.b.psn) + ",\"dest_qp\":" +
                              std::to_string(p.h.b.dest_qp) + ",\"slid\":" + std::to_string(p.h.l.slid));
            if (sink_) sink_->receive(p);
            if (p.loan && !loan_.buffer)  // host memory keeps it until the write lands
                s.pkt = nullptr;          // (the slot takes another when it needs one)
            loan_.buffer = nullptr;
        } else if (st == wire::parse_status::bad_vcrc) {
            ++PortRcvErrors;
            ++rx_bad_vcrc;
            HCASIM_LOG(log_, info, "drops " << wire::describe_packet(s.data, s.len) << ": bad VCRC");
        } else if (st == wire::parse_status::bad_icrc) {
            ++PortRcvErrors;
            ++rx_bad_icrc;
            HCASIM_LOG(log_, info, "drops " << wire::describe_packet(s.data, s.len) << ": bad ICRC");
        } else {
            ++PortRcvErrors;
            ++rx_malformed;
            HCASIM_LOG(log_, info,
                       "drops " << wire::describe_packet(s.data, s.len) << ": " << wire::to_string(st));
        }
        rx_free_.push_back(&s);
        rx_head_ = (rx_head_ + 1) % rx_ring_.size();
        --rx_count_;
    }
    if (rx_count_) rx_event_.notify(rx_ring_[rx_head_]->arrival - now);
}

}  // namespace hcasim
