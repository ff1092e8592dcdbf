#include "model/fabric/isl_channel.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "model/fabric/ib_switch.h"

namespace hcasim {

using namespace sc_core;

namespace {
void put_le(uint8_t* p, uint64_t v, unsigned n) {
    for (unsigned i = 0; i < n; ++i) p[i] = uint8_t(v >> (8 * i));
}
uint64_t get_le(const uint8_t* p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = 0; i < n; ++i) v |= uint64_t(p[i]) << (8 * i);
    return v;
}
uint64_t ps_of(const sc_time& t) { return uint64_t(t.value() / sc_time(1, SC_PS).value()); }
sc_time at_ps(uint64_t ps) { return sc_time(double(ps), SC_PS); }

// A message on the wire between ranks: the fixed header, then a packet's bytes.
constexpr size_t header_bytes = 8 + 8 + 4 + 4 + 1 + 1 + 1 + 4;
}  // namespace

isl_channel::isl_channel(const sc_module_name& name, unsigned rank)
    : sc_module(name), from_switch("from_switch"), to_switch("to_switch"), rank_(rank) {
    from_switch.register_b_transport(this, &isl_channel::b_transport);
    SC_METHOD(deliver);
    sensitive << due_;
    dont_initialize();
    gp_.set_command(tlm::TLM_WRITE_COMMAND);
    handoff_ = new packet_handoff_ext;
    gp_.set_extension(handoff_);
}

isl_channel::~isl_channel() {
    for (const message& m : heap_) packet_pool::give(m.pkt);
}

unsigned isl_channel::cable(ib_switch& a, unsigned pa, unsigned a_rank, ib_switch& b, unsigned pb,
                            unsigned b_rank, double rate_gbps, const sc_time& propagation,
                            const sc_time& fc_time, unsigned vls, uint32_t vl_buffer_bytes,
                            const fault_settings& faults) {
    const unsigned first = unsigned(links_.size());
    // Each switch port: this channel's next to_switch index feeds its input, its output feeds
    // this channel's next from_switch index (bind_port binds in that order).
    const int a_sock = int(sock_link_.size()), b_sock = a_sock + 1;
    a.bind_port_sockets(pa, to_switch, from_switch);
    b.bind_port_sockets(pb, to_switch, from_switch);
    for (unsigned k = 0; k < 2; ++k) {
        auto d = std::make_unique<directed>();
        d->to = k == 0 ? &b : &a;
        d->to_sock = k == 0 ? b_sock : a_sock;
        d->sender = k == 0 ? &a.out_credits(pa) : &b.out_credits(pb);
        d->proxy.forward_to(this, first + k);
        d->propagation = propagation;
        d->fc_time = fc_time;
        d->rank = k == 0 ? b_rank : a_rank;
        d->from_rank = k == 0 ? a_rank : b_rank;
        if (d->rank != d->from_rank) {
            ++cuts_;
            if (cuts_ == 1 || propagation < min_cut_) min_cut_ = propagation;
        }
        links_.push_back(std::move(d));
    }
    sock_link_.push_back(first);      // a's output: a -> b
    sock_link_.push_back(first + 1);  // b's output: b -> a
    // The credits a switch's input gives back go to the far sender through this channel.
    a.set_link(pa, rate_gbps, propagation, faults, vls, vl_buffer_bytes, &links_[first + 1]->proxy,
               fc_time + propagation);
    b.set_link(pb, rate_gbps, propagation, faults, vls, vl_buffer_bytes, &links_[first]->proxy,
               fc_time + propagation);
    const unsigned ranks = std::max(a_rank, b_rank) + 1;
    if (outbox_.size() < ranks) outbox_.resize(ranks);
    return first;
}

void isl_channel::b_transport(int id, tlm::tlm_generic_payload& gp, sc_time& delay) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    const uint32_t link = sock_link_.at(size_t(id));
    directed& d = *links_[link];
    const sc_time now = sc_time_stamp();
    message m{};
    m.due = ps_of(now + d.propagation);
    m.when = ps_of(now + delay);
    m.link = link;
    m.seq = d.packets++;
    m.kind = packet_msg;
    m.crc = uint8_t(crc_state_of(gp));
    m.n = gp.get_data_length();
    if (m.n > MAX_PACKET_BYTES) throw std::runtime_error(std::string(name()) + ": a packet longer than any");
    if (d.rank == rank_) {
        // Kept until due: take the sender's buffer if offered (a free one in exchange), else copy.
        if (packet** h = offered_buffer(gp)) {
            m.pkt = *h;
            *h = packet_pool::take();
        } else {
            m.pkt = packet_pool::take();
            std::memcpy(m.pkt->bytes, gp.get_data_ptr(), m.n);
        }
        m.pkt->len = m.n;
    } else {
        // Another rank's switch: the bytes travel in the message.
        m.pkt = nullptr;
        post(m, d.rank);
        std::vector<uint8_t>& o = outbox_[d.rank];
        const uint8_t* p = gp.get_data_ptr();
        o.insert(o.end(), p, p + m.n);
        return;
    }
    post(m, d.rank);
}

void isl_channel::credit(uint32_t link, unsigned vl, uint32_t blocks, const sc_time& at) {
    // `link` is the direction the freed packets came by; the credit goes back against it.
    directed& d = *links_[link];
    const sc_time now = sc_time_stamp();
    const sc_time fc_first = at > d.fc_time ? at - d.fc_time : SC_ZERO_TIME;
    message m{};
    m.due = ps_of(std::max(fc_first, now + d.propagation));
    m.when = ps_of(at);
    m.link = link;
    m.seq = d.credits++;
    m.kind = credit_msg;
    m.vl = uint8_t(vl);
    m.n = blocks;
    m.pkt = nullptr;
    post(m, d.from_rank);
}

void isl_channel::post(const message& m, unsigned to_rank) {
    if (to_rank != rank_) {
        least_out_ = std::min(least_out_, m.due);
        std::vector<uint8_t>& o = outbox_[to_rank];
        const size_t at = o.size();
        o.resize(at + header_bytes);
        uint8_t* p = o.data() + at;
        put_le(p, m.due, 8);
        put_le(p + 8, m.when, 8);
        put_le(p + 16, m.link, 4);
        put_le(p + 20, m.seq, 4);
        p[24] = m.kind;
        p[25] = m.crc;
        p[26] = m.vl;
        put_le(p + 27, m.n, 4);
        return;
    }
    heap_.push_back(m);
    std::push_heap(heap_.begin(), heap_.end(), later{});
    if (heap_.front().due == m.due && heap_.front().link == m.link && heap_.front().seq == m.seq &&
        heap_.front().kind == m.kind) {
        const uint64_t now = ps_of(sc_time_stamp());
        due_.notify(m.due > now ? at_ps(m.due - now) : SC_ZERO_TIME);
    }
}

void isl_channel::take_outbox(unsigned r, std::vector<uint8_t>& out) {
    if (r >= outbox_.size()) return;
    out.insert(out.end(), outbox_[r].begin(), outbox_[r].end());
    outbox_[r].clear();
}

sc_time isl_channel::take_least_outgoing_due() {
    const uint64_t t = least_out_;
    least_out_ = UINT64_MAX;
    return t == UINT64_MAX ? sc_max_time() : at_ps(t);
}

void isl_channel::inject(const std::vector<uint8_t>& in) {
    const uint64_t now = ps_of(sc_time_stamp());
    for (size_t at = 0; at < in.size();) {
        if (in.size() - at < header_bytes) throw std::runtime_error("isl_channel: a truncated message");
        const uint8_t* p = in.data() + at;
        message m{};
        m.due = get_le(p, 8);
        m.when = get_le(p + 8, 8);
        m.link = uint32_t(get_le(p + 16, 4));
        m.seq = uint32_t(get_le(p + 20, 4));
        m.kind = p[24];
        m.crc = p[25];
        m.vl = p[26];
        m.n = uint32_t(get_le(p + 27, 4));
        at += header_bytes;
        if (m.link >= links_.size() || m.due < now || (m.kind == packet_msg && m.n > MAX_PACKET_BYTES))
            throw std::runtime_error("isl_channel: a message for no link, or due in the past");
        if (m.kind == packet_msg) {
            if (in.size() - at < m.n) throw std::runtime_error("isl_channel: a truncated packet");
            m.pkt = packet_pool::take();
            std::memcpy(m.pkt->bytes, in.data() + at, m.n);
            m.pkt->len = m.n;
            at += m.n;
        }
        heap_.push_back(m);
        std::push_heap(heap_.begin(), heap_.end(), later{});
    }
    if (!heap_.empty()) due_.notify(heap_.front().due > now ? at_ps(heap_.front().due - now) : SC_ZERO_TIME);
}

void isl_channel::deliver() {
    const uint64_t now = ps_of(sc_time_stamp());
    while (!heap_.empty() && heap_.front().due <= now) {
        std::pop_heap(heap_.begin(), heap_.end(), later{});
        const message m = heap_.back();
        heap_.pop_back();
        if (m.kind == packet_msg) {
            deliver_packet(m);
        } else {
            // Back to the output the freed packets left by.
            links_[m.link]->sender->restore(m.vl, m.n, at_ps(m.when));
        }
    }
    if (!heap_.empty()) due_.notify(at_ps(heap_.front().due - now));
}

void isl_channel::deliver_packet(const message& m) {
    directed& d = *links_[m.link];
    gp_.set_data_ptr(m.pkt->bytes);
    gp_.set_data_length(m.n);
    gp_.set_streaming_width(m.n);
    gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    set_crc_state(gp_, crc_state(m.crc));
    handoff_->pkt = m.pkt;
    sc_time delay = at_ps(m.when - m.due);
    to_switch[unsigned(d.to_sock)]->b_transport(gp_, delay);
    packet_pool::give(handoff_->pkt);  // ours, or the free one the switch gave for it
    handoff_->pkt = nullptr;
}

}  // namespace hcasim
