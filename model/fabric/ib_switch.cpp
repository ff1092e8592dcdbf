#include "model/fabric/ib_switch.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "model/core/bytes.h"
#include "model/core/sim_time.h"
#include "model/fabric/switch_sma.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim {

using namespace sc_core;

switch_params::switch_params()
    : radix("switch.radix", 36, "ports",
            "ports per switch (Switch-IB 2 and SwitchX have 36; the `switch` topology needs nodes + 1 with "
            "its subnet manager)",
            {1, 254}),
      latency_ns("switch.latency_ns", 90.0, "ns",
                 "hop latency, cut-through: first bit in to first bit out (Switch-IB 2 class, ~90 ns "
                 "[unverified: product-brief figure, fabric.md §2])",
                 {0, 1e6}),
      vl_buffer_bytes("switch.vl_buffer_bytes", 65536, "bytes",
                      "input buffer per port per data VL: the credits (64-byte blocks) of the sender "
                      "feeding the port; at least one largest packet [unverified]",
                      {4224, 1u << 24}),
      vl15_buffer_packets("switch.vl15_buffer_packets", 4, "packets",
                          "input buffer of VL15 per port (not flow controlled: full drops, VL15Dropped)",
                          {1, 65536}),
      data_vls("switch.data_vls", 1, "VLs",
               "data VLs of every switch port (1, 2, 4, 8 or 15); a link runs min(both ends)", {1, 15}),
      sl2vl("switch.sl2vl", "", "",
            "SL-to-VL table of every (input, output) port pair of every switch: 16 comma-separated VLs (15 "
            "drops the SL); empty: SL mod "
            "the port's data VLs"),
      vlarb_high(
          "switch.vlarb_high", "", "",
          "high-priority VL arbitration table of every switch output: VL:WEIGHT,... (weight in 64-byte "
          "blocks, 0..255, at most 64 entries)"),
      vlarb_low(
          "switch.vlarb_low", "", "",
          "low-priority VL arbitration table; with both tables empty every data VL gets weight 255 here"),
      vlarb_high_limit("switch.vlarb_high_limit", 0, "4 KiB",
                       "LimitOfHighPriority: high-priority bytes (in 4096-byte units) sent before a waiting "
                       "low-priority packet gets a turn; 255 unbounded",
                       {0, 255}),
      deadlock_timeout_us("switch.deadlock_timeout_us", 1000.0, "us",
                          "a switch output that waits this long for credit while nothing in its switch moves "
                          "is checked for a credit loop (deadlock: the run stops naming the cycle)",
                          {0.001, 1e9}) {
    const unsigned v = data_vls;
    if (v != 1 && v != 2 && v != 4 && v != 8 && v != 15)
        throw config_error("bad value '" + std::to_string(v) + "' for key '" + data_vls.key() +
                           "': expected one of 1, 2, 4, 8, 15 (PortInfo VLCap)");
}

struct ib_switch::queued {
    packet* pkt = nullptr;  // from packet_pool (taken at first use)
    uint32_t len = 0, blocks = 0;
    sc_time first, last;                 // first and last bit at the input
    crc_state crc = crc_state::unknown;  // crc_intact_ext of the packet as it came in
    uint16_t dlid = 0;
    uint8_t sl = 0;
    uint8_t out = 0;      // unicast: output port index; multicast: unused
    uint16_t copies = 0;  // outputs still to send it
    sc_time gone;         // multicast: when the copies sent so far have left
};

ib_switch::out_port::out_port(const std::string& prefix)
    : faults(prefix),
      PortXmitData((prefix + "PortXmitData").c_str(), "4-byte words sent (IBA PortXmitData)", "4-byte words"),
      PortXmitPkts((prefix + "PortXmitPkts").c_str(), "packets sent (IBA PortXmitPkts)"),
      PortRcvData((prefix + "PortRcvData").c_str(), "4-byte words received (IBA PortRcvData)",
                  "4-byte words"),
      PortRcvPkts((prefix + "PortRcvPkts").c_str(), "packets received (IBA PortRcvPkts)"),
      PortXmitWait((prefix + "PortXmitWait").c_str(),
                   "ns a ready packet waited for credit (IBA PortXmitWait; a tick is 1 ns here)", "ns"),
      PortXmitDiscards((prefix + "PortXmitDiscards").c_str(),
                       "packets discarded: no route, or the SL maps to VL15 (IBA PortXmitDiscards)"),
      VL15Dropped((prefix + "VL15Dropped").c_str(),
                  "SMPs dropped: VL15 input buffer full (IBA VL15Dropped)") {}

ib_switch::cc_state::cc_state(const cc_config& c, unsigned ports)
    : marking(cc_switch_settings::from(c), ports + 1, 16) {  // by IBA port number (Victim_Mask's bits)
    for (unsigned i = 0; i < ports; ++i)
        fecn_marked.push_back(
            std::make_unique<counter>(("out" + std::to_string(i) + ".fecn_marked").c_str(),
                                      "packets this output sent with FECN set (congestion control)"));
}

ib_switch::ib_switch(const sc_module_name& name, unsigned ports, const switch_params& p, const cc_config* cc)
    : sc_module(name),
      in("in"),
      out("out"),
      forwarded("forwarded", "packets forwarded"),
      dropped_no_route("dropped_no_route", "packets dropped: no port for the DLID"),
      mcast_replicas("mcast_replicas", "copies of multicast packets queued on member ports"),
      overruns("overruns",
               "packets that arrived without room in their input VL buffer (a sender broke "
               "flow control; kept, never dropped)"),
      p_(p),
      lft_(0xC000, 0xFF),
      mft_(0xFFFF - 0xC000) {
    latency_ = ns_time(p.latency_ns.get());
    for (unsigned i = 0; i < ports; ++i)  // now, so the counters are named under this module
        ports_.push_back(std::make_unique<out_port>("out" + std::to_string(i) + "."));
    inputs_.resize(ports + 1);  // and port 0's (what its agent sends)
    if (cc && cc->enable) cc_ = std::make_unique<cc_state>(*cc, ports);
    active_.assign((ports + 63) / 64, 0);
    in.register_b_transport(this, &ib_switch::b_transport);
    SC_METHOD(forward);
    sensitive << wake_ << credit_wake_;
    dont_initialize();
    SC_METHOD(watch);
    sensitive << watch_ev_;
    dont_initialize();
    SC_METHOD(vl15_arrive);
    sensitive << vl15_ev_;
    dont_initialize();
    gp_.set_command(tlm::TLM_WRITE_COMMAND);
    handoff_ = new packet_handoff_ext;
    gp_.set_extension(handoff_);
}

ib_switch::~ib_switch() {
    for (auto& q : pool_) packet_pool::give(q->pkt);
}

void ib_switch::check_port(unsigned p) const {
    if (p < 1 || p > ports_.size())
        throw config_error(std::string(name()) + ": no port " + std::to_string(p) + " (ports 1.." +
                           std::to_string(ports_.size()) + ")");
}

void ib_switch::set_link(unsigned p, double rate_gbps, const sc_time& propagation,
                         const fault_settings& faults, unsigned vls, uint32_t far_buffer_bytes,
                         credit_counter* upstream, const sc_time& credit_delay) {
    out_port& o = *ports_.at(p - 1);
    o.linked = true;
    o.faults.configure(faults, fault_direction::to_node, &wake_);
    o.faults.resync_credits(&o.credits, credit_delay);
    o.ps_per_byte = 8000.0 / rate_gbps;
    o.propagation = propagation;
    o.vls = vls;
    const std::vector<unsigned> t = parse_sl2vl(p_.sl2vl, p_.sl2vl.key(), vls);
    std::array<uint8_t, 16> a{};
    for (unsigned sl = 0; sl < 16; ++sl) a[sl] = uint8_t(t[sl]);
    set_sl2vl(p, a);
    o.arb.configure(parse_vlarb(p_.vlarb_high, p_.vlarb_high.key(), vls),
                    parse_vlarb(p_.vlarb_low, p_.vlarb_low.key(), vls), p_.vlarb_high_limit, vls);
    if (far_buffer_bytes) o.credits.configure(vls, far_buffer_bytes);
    o.credits.notify_to(credit_wake_);
    in_port& i = inputs_.at(p - 1);
    i.upstream = upstream;
    i.credit_delay = credit_delay;
    i.ps_per_byte = o.ps_per_byte;
}

const std::array<uint8_t, 16>& ib_switch::sl2vl(unsigned in, unsigned out) const {
    const out_port& o = *ports_.at(out - 1);
    const unsigned i = in ? in - 1 : ports();  // port 0's input is the last
    return o.sl2vl[o.sl2vl_in.empty() ? 0 : o.sl2vl_in.at(i)];
}

void ib_switch::set_sl2vl(unsigned p, const std::array<uint8_t, 16>& t) {
    out_port& o = *ports_.at(p - 1);
    o.sl2vl.assign(1, t);
    o.sl2vl_in.clear();
}

void ib_switch::set_sl2vl(unsigned in, unsigned out, const std::array<uint8_t, 16>& t) {
    out_port& o = *ports_.at(out - 1);
    const unsigned i = in ? in - 1 : ports();
    if (i > ports()) throw std::out_of_range("ib_switch::set_sl2vl: no input port " + std::to_string(in));
    if (o.sl2vl_in.empty()) o.sl2vl_in.assign(ports() + 1, 0);
    // A table equal to one held is shared; else the slot of a table no input uses any more,
    // else a new one (at most one per input besides [0]: the index fits a byte).
    std::vector<bool> used(o.sl2vl.size(), false);
    for (unsigned k = 0; k < o.sl2vl_in.size(); ++k)
        if (k != i) used[o.sl2vl_in[k]] = true;
    used[0] = true;
    size_t slot = o.sl2vl.size();
    for (size_t k = 0; k < o.sl2vl.size(); ++k)
        if (o.sl2vl[k] == t) {
            slot = k;
            break;
        } else if (!used[k] && slot == o.sl2vl.size())
            slot = k;
    if (slot == o.sl2vl.size()) o.sl2vl.push_back(t);
    o.sl2vl[slot] = t;
    o.sl2vl_in[i] = uint8_t(slot);
}

void ib_switch::set_vlarb(unsigned p, std::vector<vlarb_entry> high, std::vector<vlarb_entry> low) {
    out_port& o = *ports_.at(p - 1);
    o.arb.configure(std::move(high), std::move(low), p_.vlarb_high_limit, o.vls);
}

ib_switch::queued* ib_switch::take_queued() {
    if (free_.empty()) {
        pool_.push_back(std::make_unique<queued>());
        free_.push_back(pool_.back().get());
    }
    queued* q = free_.back();
    free_.pop_back();
    return q;
}

bool ib_switch::send_from_port0(unsigned p, const uint8_t* bytes, uint32_t len, const sc_time& at) {
    if (!linked(p) || len > MAX_PACKET_BYTES) return false;
    queued* q = take_queued();
    if (!q->pkt) q->pkt = packet_pool::take();
    copy_bytes(q->pkt->bytes, bytes, len);
    q->pkt->len = q->len = len;
    q->blocks = credit_blocks(len);
    q->first = q->last = at;
    q->crc = crc_state::sealed;
    q->dlid = wire::PERMISSIVE_LID;  // unicast to q->out whatever the LRH says
    q->sl = 0;
    q->out = uint8_t(p - 1);
    const unsigned i = unsigned(inputs_.size()) - 1;
    std::deque<queued*>& fifo = inputs_[i].vl[VL15];
    fifo.push_back(q);
    ++held_;
    if (fifo.size() == 1) post_head(i, VL15, SC_ZERO_TIME);
    return true;
}

void ib_switch::set_lft(std::vector<uint8_t> lft) {
    lft.resize(0xC000, 0xFF);
    lft_ = std::move(lft);
}

void ib_switch::set_lft_entry(uint16_t lid, uint8_t port) {
    if (lid < lft_.size()) lft_[lid] = port;
}

void ib_switch::capture_to(unsigned p, wire_capture* w, unsigned dir) {
    ports_.at(p - 1)->capture = w;
    ports_[p - 1]->capture_dir = dir;
}

void ib_switch::set_mcast(uint16_t mlid, unsigned p, bool member) {
    if (mlid < 0xC000 || mlid == 0xFFFF || p < 1 || p > ports_.size()) return;
    std::vector<uint16_t>& g = mft_[mlid - 0xC000];
    if (g.empty()) {
        if (!member) return;
        g.assign(ports_.size(), 0);
    }
    g[p - 1] = member;
}

sc_time ib_switch::earliest_departure(const sc_time& now) const {
    sc_time t = sc_max_time();
    for (const auto& op : ports_) {
        const out_port& o = *op;
        if (!o.req_mask) continue;
        sc_time ready = sc_max_time();
        for (unsigned v = 0; v < 16; ++v)
            if ((o.req_mask >> v & 1) && o.req[v].front().ready < ready) ready = o.req[v].front().ready;
        if (o.free_at > ready) ready = o.free_at;
        if (ready < t) t = ready;
    }
    // An SMP on its way in asks for its output when its first bit arrives.
    if (!vl15_pending_.empty() && vl15_pending_.front().first < t) t = vl15_pending_.front().first;
    return t < now ? now : t;
}

bool ib_switch::credit_starved(unsigned p, sc_time* since) const {
    const out_port& o = *ports_.at(p - 1);
    if (o.starved && since) *since = o.starved_since;
    return o.starved;
}

unsigned ib_switch::head_wants(unsigned p) const {
    const in_port& i = inputs_.at(p - 1);
    for (unsigned v = 0; v < MAX_DATA_VLS; ++v)
        if (!i.vl[v].empty() && i.vl[v].front()->dlid < 0xC000) return i.vl[v].front()->out + 1u;
    return 0;
}

void ib_switch::drop(const uint8_t* bytes, uint32_t len, unsigned in, const char* why) {
    ++dropped_no_route;
    ++ports_[in]->PortXmitDiscards;
    HCASIM_LOG(log_, info,
               "drops " << wire::describe_packet(bytes, len) << " from port " << in + 1 << ": " << why);
}

void ib_switch::b_transport(int id, tlm::tlm_generic_payload& gp, sc_time& delay) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    const unsigned i = unsigned(sock_to_port_.at(size_t(id)));
    in_port& in = inputs_[i];
    out_port& self = *ports_[i];
    const uint32_t len = gp.get_data_length();
    const uint8_t* bytes = gp.get_data_ptr();
    ++self.PortRcvPkts;
    self.PortRcvData += len / 4;
    const sc_time last = sc_time_stamp() + delay;
    const unsigned vl = len ? bytes[0] >> 4 : 0;
    // A packet the switch does not keep gives its credit back as it arrives.
    auto give_back = [&] {
        if (vl != VL15 && in.upstream) in.upstream->restore(vl, credit_blocks(len), last + in.credit_delay);
    };
    if (len < wire::LRH_BYTES || len > MAX_PACKET_BYTES) {
        ++dropped_no_route;
        HCASIM_LOG(log_, info, "drops a " << len << "-byte packet from port " << i + 1 << ": no valid LRH");
        give_back();
        return;
    }
    const wire::lrh l = wire::decode_lrh(bytes);
    if (vl != VL15 && !routable(i, bytes, len, l, vl)) {
        give_back();
        return;
    }
    queued* q = take_queued();
    q->len = len;
    q->blocks = credit_blocks(len);
    q->last = last;
    const sc_time ser = ps_time(double(len) * in.ps_per_byte);
    q->first = last > ser ? last - ser : SC_ZERO_TIME;
    q->crc = crc_state_of(gp);
    q->dlid = l.dlid;
    q->sl = l.sl;
    q->out = l.dlid < 0xC000 ? uint8_t(lft_[l.dlid] - 1) : 0;
    if (vl == VL15) {
        // Not flow controlled: whether the VL15 buffer has room is decided when the first bit
        // arrives (vl15_arrive), as a data packet's room was when its sender took credit.
        if (!q->pkt) q->pkt = packet_pool::take();
        copy_bytes(q->pkt->bytes, bytes, len);
        q->pkt->len = len;
        size_t k = vl15_pending_.size();
        vl15_pending_.push_back({q->first, q, uint16_t(i)});
        for (; k > 0 && vl15_pending_[k - 1].first > q->first; --k)
            std::swap(vl15_pending_[k - 1], vl15_pending_[k]);
        const sc_time now = sc_time_stamp();
        vl15_ev_.notify(vl15_pending_.front().first > now ? vl15_pending_.front().first - now : SC_ZERO_TIME);
        return;
    }
    packet** handoff = l.dlid < 0xC000 ? offered_buffer(gp) : nullptr;
    if (handoff) {
        std::swap(q->pkt, *handoff);  // the sender gets this entry's free buffer
        if (!*handoff) *handoff = packet_pool::take();
    } else {
        if (!q->pkt) q->pkt = packet_pool::take();
        copy_bytes(q->pkt->bytes, bytes, len);
    }
    q->pkt->len = len;
    std::deque<queued*>& fifo = in.vl[vl];
    fifo.push_back(q);
    ++held_;
    // Never before the packet ahead of it in this buffer has left, whether that one is still
    // queued (send() posts this one then) or left at this very instant.
    if (fifo.size() == 1) post_head(i, vl, in.gone[vl]);
}

bool ib_switch::routable(unsigned i, const uint8_t* bytes, uint32_t len, const wire::lrh& l, unsigned vl) {
    if (l.dlid >= 0xC000 && l.dlid != 0xFFFF) {
        if (!mft_[l.dlid - 0xC000].empty()) return true;
        drop(bytes, len, i, "no such multicast group");
        return false;
    }
    const uint8_t o = l.dlid < lft_.size() ? lft_[l.dlid] : 0xFF;
    if (o == 0xFF || o == 0 || o > ports_.size() || !ports_[o - 1]->linked) {
        drop(bytes, len, i, "no route to the DLID");
        return false;
    }
    if (vl != VL15 && ports_[o - 1]->sl2vl_for(i)[l.sl] == VL15) {
        drop(bytes, len, i, "its SL maps to VL15 (dropped by the SL-to-VL table)");
        return false;
    }
    return true;
}

// An SMP holds its input's VL15 buffer from its first bit in until its last bit has left the
// output (or, for port 0, until the agent is done with it): the buffer is full when that many
// are held as the next one's first bit arrives.
void ib_switch::vl15_arrive() {
    const sc_time now = sc_time_stamp();
    while (!vl15_pending_.empty() && vl15_pending_.front().first <= now) {
        const vl15_pending a = vl15_pending_.front();
        vl15_pending_.pop_front();
        queued* q = a.q;
        in_port& in = inputs_[a.in];
        std::vector<sc_time>& busy = in.vl15_busy;
        busy.erase(std::remove_if(busy.begin(), busy.end(), [&](const sc_time& t) { return t <= now; }),
                   busy.end());
        const uint8_t* bytes = q->pkt->bytes;
        if (in.vl[VL15].size() + busy.size() >= p_.vl15_buffer_packets) {
            ++ports_[a.in]->VL15Dropped;
            HCASIM_LOG(log_, info,
                       "drops " << wire::describe_packet(bytes, q->len) << ": VL15 buffer of port "
                                << a.in + 1 << " full");
            free_.push_back(q);
            continue;
        }
        const wire::lrh l = wire::decode_lrh(bytes);
        if (agent_ && (l.dlid == wire::PERMISSIVE_LID || l.dlid == agent_lid_)) {
            busy.push_back(q->last + agent_->process_time());
            agent_->receive(a.in + 1u, bytes, q->len, q->crc, q->last);  // port 0's
            free_.push_back(q);
            continue;
        }
        if (!routable(a.in, bytes, q->len, l, VL15)) {
            free_.push_back(q);
            continue;
        }
        in.vl[VL15].push_back(q);
        ++held_;
        if (in.vl[VL15].size() == 1) post_head(a.in, VL15, in.gone[VL15]);
    }
    if (!vl15_pending_.empty()) vl15_ev_.notify(vl15_pending_.front().first - now);
}

void ib_switch::post_head(unsigned i, unsigned v, const sc_time& after) {
    queued& q = *inputs_[i].vl[v].front();
    auto ask = [&](unsigned o) {
        out_port& op = *ports_[o];
        const sc_time ser = ps_time(double(q.len) * op.ps_per_byte);
        // Cut-through: latency after the first bit, but the tail must not outrun the input.
        sc_time ready = q.first + latency_;
        if (q.last + latency_ > ready + ser) ready = q.last + latency_ - ser;
        if (after > ready) ready = after;
        add_request(
            o, request{ready, uint16_t(i), uint8_t(v), uint8_t(v == VL15 ? VL15 : op.sl2vl_for(i)[q.sl])});
        ++q.copies;
    };
    q.copies = 0;
    q.gone = SC_ZERO_TIME;
    if (q.dlid >= 0xC000 && q.dlid != 0xFFFF) {
        // Multicast: a copy to every member port but the input (the sender's own HCA delivers
        // to its attached QPs itself), on the members at the time it heads its buffer.
        const std::vector<uint16_t>& g = mft_[q.dlid - 0xC000];
        for (unsigned o = 0; o < g.size(); ++o)
            if (g[o] && o != i && ports_[o]->linked && ports_[o]->sl2vl_for(i)[q.sl] != VL15) ask(o);
        mcast_replicas += q.copies;
        if (!q.copies) {
            // No member to send to: it leaves the buffer now.
            inputs_[i].vl[v].pop_front();
            --held_;
            inputs_[i].gone[v] = after > q.last ? after : q.last;
            if (v != VL15 && inputs_[i].upstream)
                inputs_[i].upstream->restore(v, q.blocks,
                                             (after > q.last ? after : q.last) + inputs_[i].credit_delay);
            free_.push_back(&q);
            if (!inputs_[i].vl[v].empty()) post_head(i, v, after);
        }
        return;
    }
    ask(q.out);
}

void ib_switch::add_request(unsigned o, const request& r) {
    std::deque<request>& d = ports_[o]->req[r.vl];
    d.push_back(r);
    if (cc_ && r.vl != VL15) ports_[o]->req_bytes[r.vl] += inputs_[r.in].vl[r.in_vl].front()->len;
    auto after = [](const request& a, const request& b) {
        return a.ready != b.ready ? a.ready > b.ready : a.in != b.in ? a.in > b.in : a.in_vl > b.in_vl;
    };
    for (size_t k = d.size() - 1; k > 0 && after(d[k - 1], r); --k) std::swap(d[k - 1], d[k]);
    ports_[o]->req_mask |= 1u << r.vl;
    active_[o / 64] |= uint64_t(1) << (o % 64);
    const sc_time now = sc_time_stamp();
    wake_.notify(r.ready > now ? r.ready - now : SC_ZERO_TIME);
}

// Each output with requests is served when it is free; a packet waiting for its tail, for
// credit of a known time or for the output wakes the switch then; one waiting for credit
// of unknown time wakes it when the receiver frees blocks (credit_wake_).
void ib_switch::forward() {
    const sc_time now = sc_time_stamp();
    sc_time next = SC_ZERO_TIME;
    bool have_next = false;
    for (unsigned o = 0; o < ports_.size(); ++o) {
        const uint64_t later = active_[o / 64] >> (o % 64);
        if (!later) {
            o |= 63;  // nothing more in this word
            continue;
        }
        o += unsigned(__builtin_ctzll(later));
        out_port& op = *ports_[o];
        if (op.faults.holding()) op.faults.release(*out[unsigned(op.sock)]);
        const sc_time t = serve(o, now);
        if (t != SC_ZERO_TIME && (!have_next || t < next)) {
            next = t;
            have_next = true;
        }
        if (!op.req_mask && !op.faults.holding()) active_[o / 64] &= ~(uint64_t(1) << (o % 64));
    }
    if (have_next) wake_.notify(next - now);
}

sc_time ib_switch::serve(unsigned oi, const sc_time& now) {
    out_port& o = *ports_[oi];
    while (o.req_mask) {
        if (o.free_at > now) return o.free_at;
        uint32_t eligible = 0;
        bool starved = false, unknown = false;
        sc_time soonest = SC_ZERO_TIME;
        for (uint32_t m = o.req_mask; m; m &= m - 1) {
            const unsigned v = unsigned(__builtin_ctz(m));
            const request& r = o.req[v].front();
            sc_time t = r.ready;
            if (t <= now) {
                if (v == VL15) {
                    eligible |= 1u << v;
                    continue;
                }
                t = now;
                if (!o.credits.earliest(v, inputs_[r.in].vl[r.in_vl].front()->blocks, t)) {
                    starved = unknown = true;
                    continue;
                }
                if (t <= now) {
                    eligible |= 1u << v;
                    continue;
                }
                starved = true;
            }
            if (soonest == SC_ZERO_TIME || t < soonest) soonest = t;
        }
        if (!eligible) {
            if (starved && !o.starved) {
                o.starved = true;
                o.starved_since = now;
            }
            if (unknown) {
                o.credits.wait_for_credit();
                if (!watching_) {
                    watching_ = true;
                    watch_ev_.notify(ns_time(p_.deadlock_timeout_us.get() * 1000.0));
                }
            }
            return soonest;
        }
        const unsigned v = (eligible >> VL15 & 1) ? VL15 : unsigned(o.arb.pick(eligible));
        send(oi, v, now);
    }
    return SC_ZERO_TIME;
}

void ib_switch::send(unsigned oi, unsigned v, const sc_time& now) {
    out_port& o = *ports_[oi];
    const request r = o.req[v].front();
    o.req[v].pop_front();
    if (o.req[v].empty()) o.req_mask &= ~(1u << v);
    in_port& in = inputs_[r.in];
    queued& q = *in.vl[r.in_vl].front();
    packet& pkt = *q.pkt;
    const uint32_t len = q.len;
    const bool waited = o.starved;  // it waited for credit: a victim of congestion downstream
    if (o.starved) {
        o.PortXmitWait += uint64_t((now - o.starved_since) / ns_time(1.0));
        o.starved = false;
    }
    if ((pkt.bytes[0] >> 4) != v) {
        // The VL is rewritten hop by hop; the VCRC covers it.
        pkt.bytes[0] = uint8_t(v << 4 | (pkt.bytes[0] & 0x0F));
        if (q.crc == crc_state::sealed && len >= 2) {
            const uint16_t c = wire::vcrc(pkt.bytes, len - 2);
            pkt.bytes[len - 2] = uint8_t(c);
            pkt.bytes[len - 1] = uint8_t(c >> 8);
        }
    }
    if (cc_ && v != VL15) cc_mark(oi, v, pkt, len, q.crc, waited);
    const sc_time end = now + ps_time(double(len) * o.ps_per_byte);
    if (v != VL15) {
        o.credits.take(v, q.blocks, now);
        if (r.in_vl != VL15) o.arb.sent(v, q.blocks);
    }
    o.free_at = end;
    ++forwarded;
    ++o.PortXmitPkts;
    o.PortXmitData += len / 4;
    if (o.capture) o.capture->record(o.capture_dir, now, pkt.bytes, len, q.crc);
    gp_.set_data_ptr(pkt.bytes);
    gp_.set_data_length(len);
    gp_.set_streaming_width(len);
    gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    set_crc_state(gp_, q.crc);
    sc_time delay = end - now + o.propagation;
    const bool last_copy = --q.copies == 0;
    if (end > q.gone) q.gone = end;               // the buffer is free when every copy has left
    handoff_->pkt = last_copy ? q.pkt : nullptr;  // the last copy may go in its buffer
    o.faults.carry(gp_, delay, *out[unsigned(o.sock)]);
    if (last_copy) q.pkt = handoff_->pkt;  // the receiver's free buffer if it took this one
    handoff_->pkt = nullptr;
    last_progress_ = now;
    if (!last_copy) return;
    // The packet has left the input buffer once its last bit is out: credit goes back.
    in.vl[r.in_vl].pop_front();
    --held_;
    in.gone[r.in_vl] = q.gone;
    if (r.in_vl != VL15 && in.upstream) in.upstream->restore(r.in_vl, q.blocks, q.gone + in.credit_delay);
    if (r.in_vl == VL15 && r.in < ports_.size()) in.vl15_busy.push_back(q.gone);
    free_.push_back(&q);
    if (!in.vl[r.in_vl].empty()) post_head(r.in, r.in_vl, q.gone);
}

void ib_switch::cc_mark(unsigned oi, unsigned v, packet& pkt, uint32_t len, crc_state crc, bool victim) {
    out_port& o = *ports_[oi];
    o.req_bytes[v] -= len;  // this packet is not counted in its own queue
    const unsigned lnh = pkt.bytes[1] & 3;
    if (lnh != unsigned(wire::lnh::iba_local) && lnh != unsigned(wire::lnh::iba_global)) return;  // no BTH
    if (!cc_->marking.decide(oi + 1, v, cc_output_vl{o.req_bytes[v], p_.vl_buffer_bytes, victim}, len))
        return;
    ++*cc_->fecn_marked[oi];
    // FECN lies in the BTH byte the ICRC masks: only the VCRC changes. Bytes whose CRCs nobody
    // computed yet (lazy) are sealed later over the marked bytes; bytes of unknown state get a
    // new VCRC only if theirs was right (a corrupted packet stays corrupted).
    const size_t bth = wire::LRH_BYTES + (lnh == unsigned(wire::lnh::iba_global) ? wire::GRH_BYTES : 0);
    const bool reseal =
        crc == crc_state::sealed ||
        (crc == crc_state::unknown && len >= 2 &&
         wire::vcrc(pkt.bytes, len - 2) == uint16_t(pkt.bytes[len - 2] | pkt.bytes[len - 1] << 8));
    if (reseal)
        wire::mark_fecn(pkt.bytes, len);
    else if (len > bth + 4)
        pkt.bytes[bth + 4] |= 0x80;
}

void ib_switch::watch() {
    watching_ = false;
    const sc_time now = sc_time_stamp();
    const sc_time limit = ns_time(p_.deadlock_timeout_us.get() * 1000.0);
    bool any = false;
    for (unsigned o = 0; o < ports_.size(); ++o) {
        out_port& op = *ports_[o];
        if (!op.starved) continue;
        any = true;
        if (now - op.starved_since >= limit && now - last_progress_ >= limit && on_stall_) {
            on_stall_(*this, o + 1);
            return;
        }
    }
    if (any) {
        watching_ = true;
        watch_ev_.notify(limit);
    }
}

}  // namespace hcasim
