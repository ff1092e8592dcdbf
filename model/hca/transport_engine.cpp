#include "model/hca/transport_engine.h"

#include <algorithm>
#include <cstring>

#include "model/hca/cq_writer.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/translation_unit.h"
#include "model/hca/wqe_fetcher.h"
#include "tlm_if/commands.h"

namespace hcasim {

using namespace sc_core;
namespace op = wire::op;

namespace {
constexpr uint32_t PSN_MASK = 0xFFFFFF;
/// a <= b in 24-bit serial arithmetic.
bool psn_le(uint32_t a, uint32_t b) { return ((b - a) & PSN_MASK) < 0x800000; }
constexpr unsigned MAX_SEGS = 8;

uint8_t cqe_opcode_of(uint8_t wqe_op) {
    switch (wqe_op) {
    case hw::WQE_OP_RDMA_WRITE: case hw::WQE_OP_RDMA_WRITE_IMM: return hw::CQE_OP_RDMA_WRITE;
    case hw::WQE_OP_RDMA_READ: return hw::CQE_OP_RDMA_READ;
    case hw::WQE_OP_CMP_SWAP: return hw::CQE_OP_COMP_SWAP;
    case hw::WQE_OP_FETCH_ADD: return hw::CQE_OP_FETCH_ADD;
    default: return hw::CQE_OP_SEND;
    }
}
}  // namespace

transport_engine::transport_engine(const sc_module_name& name, const sc_time& clock, unsigned max_qps)
    : sc_module(name),
      dma("dma"),
      wqe_queue_depth("wqe_queue_depth", 32, "WQEs", "parsed WQEs queued per QP ahead of the requester"),
      packet_cycles("packet_cycles", 8, "cycles", "requester initiation interval per packet"),
      rx_cycles("rx_cycles", 8, "cycles", "responder initiation interval per packet"),
      tx_latency_cycles("tx_latency_cycles", 64, "cycles",
                        "requester pipeline latency from a WQE on chip to its packet at the port"),
      rx_latency_cycles("rx_latency_cycles", 64, "cycles",
                        "responder pipeline latency from a packet's arrival to its first DMA"),
      ack_req_interval("ack_req_interval", 16, "packets", "requester sets AckReq at least every N packets"),
      rq_prefetch("rq_prefetch", 4, "WQEs", "receive WQEs the responder reads ahead per QP (on chip)"),
      tx_packets("tx_packets", "request packets sent"),
      tx_payload_bytes("tx_payload_bytes", "request payload bytes sent"),
      rx_packets("rx_packets", "request packets accepted by the responder"),
      rx_payload_bytes("rx_payload_bytes", "request payload bytes placed by the responder"),
      acks_sent("acks_sent", "ACKs sent"),
      naks_sent("naks_sent", "NAKs sent (sequence, invalid request, access, operational)"),
      acks_received("acks_received", "ACKs received"),
      naks_received("naks_received", "NAKs and RNR NAKs received"),
      rnr_naks_sent("rnr_naks_sent", "RNR NAKs sent (no receive WQE)"),
      duplicates("duplicates", "duplicate request packets (re-ACKed)"),
      seq_errors("seq_errors", "out-of-sequence request packets"),
      dropped_bad_qp("dropped_bad_qp", "packets for a QP that does not exist or cannot receive"),
      retransmits("retransmits", "go-back-N restarts after an RNR NAK or a sequence-error NAK"),
      send_completions("send_completions", "send-queue CQEs written"),
      recv_completions("recv_completions", "receive-queue CQEs written"),
      error_completions("error_completions", "CQEs with an error status other than flush"),
      flushed("flushed", "work requests completed with WR_FLUSH_ERR"),
      qps_(max_qps),
      ready_(max_qps) {
    wqe_queue_depth.range(1, 1024);
    packet_cycles.range(0, 1000000);
    rx_cycles.range(0, 1000000);
    ack_req_interval.range(1, 1u << 20);
    rq_prefetch.range(1, 256);
    packet_time_ = clock * double(packet_cycles.get());
    rx_time_ = clock * double(rx_cycles.get());
    tx_latency_cycles.range(0, 1000000);
    rx_latency_cycles.range(0, 1000000);
    tx_latency_ = clock * double(tx_latency_cycles.get());
    rx_latency_ = clock * double(rx_latency_cycles.get());
    SC_THREAD(requester_loop);
    SC_METHOD(retry_timer);
    sensitive << retry_ev_;
    dont_initialize();
}

sc_time transport_engine::rnr_time(uint8_t code) {
    // IBA Vol 1 Table 45 (RNR NAK timer field encodings), milliseconds.
    static const double ms[32] = {655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24, 0.32,
                                  0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24, 15.36,
                                  20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};
    return sc_time(ms[code & 31], SC_MS);
}

// ---------------------------------------------------------------- context from the command unit

void transport_engine::load_qp(const hw::qp_context& c, uint32_t mask, sc_time& delay) {
    if (c.qpn >= qps_.size())
        return;
    qp& q = qps_[c.qpn];
    const uint8_t prev = q.valid ? q.state : uint8_t(hw::QPS_RESET);
    if (!q.valid || c.state == hw::QPS_RESET) {
        const bool was_ready = q.tx_ready;
        q = qp{};
        q.tx_ready = was_ready;  // still listed in the ready FIFO; the loop drops it
        q.valid = true;
        q.qpn = c.qpn;
        q.queue.resize(wqe_queue_depth);
        q.rq_cache.resize(rq_prefetch);
        q.rq_ready.resize(rq_prefetch);
        q.window.resize(size_t(1) << c.sq_log_size);
    }
    q.transport = c.transport;
    q.mtu = c.mtu;
    q.sl = c.sl;
    q.sig_all = c.sig_all;
    q.pd = c.pd;
    q.send_cqn = c.send_cqn;
    q.recv_cqn = c.recv_cqn;
    q.dest_qpn = c.dest_qpn;
    q.access = c.access;
    q.dlid = c.dlid;
    q.pkey_index = c.pkey_index;
    q.retry_cnt = c.retry_cnt;
    q.rnr_retry = c.rnr_retry;
    q.min_rnr_timer = c.min_rnr_timer;
    q.retries_left = c.retry_cnt;
    q.rnr_retries_left = c.rnr_retry;
    if (mask & hw::QP_ATTR_RQ_PSN)
        q.rq_psn = c.rq_psn & PSN_MASK;
    if (mask & hw::QP_ATTR_SQ_PSN)
        q.sq_psn = c.sq_psn & PSN_MASK;
    if (q.window.size() < (size_t(1) << c.sq_log_size))
        q.window.resize(size_t(1) << c.sq_log_size);
    q.state = c.state;
    if (c.state == hw::QPS_ERR && prev != hw::QPS_ERR)
        enter_error(q, delay);
    if ((c.state == hw::QPS_RTS || c.state == hw::QPS_ERR) && q.q_count)
        make_tx_ready(q.qpn);
}

void transport_engine::destroy_qp(uint32_t qpn) {
    if (qpn < qps_.size()) {
        const bool was_ready = qps_[qpn].tx_ready;
        qps_[qpn] = qp{};
        qps_[qpn].tx_ready = was_ready;
    }
}

void transport_engine::current_psns(uint32_t qpn, uint32_t& sq_psn, uint32_t& rq_psn) const {
    sq_psn = rq_psn = 0;
    if (qpn < qps_.size()) {
        sq_psn = qps_[qpn].sq_psn;
        rq_psn = qps_[qpn].rq_psn;
    }
}

// ---------------------------------------------------------------- from the WQE fetcher

unsigned transport_engine::room(uint32_t qpn) const {
    if (qpn >= qps_.size() || !qps_[qpn].valid)
        return 0;
    const qp& q = qps_[qpn];
    return unsigned(q.queue.size() - q.q_count);
}

void transport_engine::push_send(uint32_t qpn, const send_wqe& w) {
    if (qpn >= qps_.size() || !qps_[qpn].valid)
        return;
    qp& q = qps_[qpn];
    if (q.q_count == q.queue.size())
        q.queue.resize(q.queue.size() * 2);  // only if the fetcher overran its credit; keeps no WQE lost
    q.queue[(q.q_head + q.q_count) % q.queue.size()] = w;
    ++q.q_count;
    make_tx_ready(qpn);
}

void transport_engine::rq_posted(uint32_t qpn, uint16_t producer) {
    if (qpn >= qps_.size() || !qps_[qpn].valid)
        return;
    qp& q = qps_[qpn];
    q.rq_producer = producer;
    sc_time delay = SC_ZERO_TIME;
    if (q.state == hw::QPS_ERR)  // C10-97.2.1: receives posted in Error complete in error
        flush(q, delay);
    else if (q.state != hw::QPS_RESET)
        prefetch_recv(q, delay);
}

void transport_engine::make_tx_ready(uint32_t qpn) {
    qp& q = qps_[qpn];
    if (q.tx_ready)
        return;
    q.tx_ready = true;
    ready_[(ready_head_ + ready_count_) % ready_.size()] = qpn;
    ++ready_count_;
    tx_work_.notify(SC_ZERO_TIME);
}

// ---------------------------------------------------------------- requester

void transport_engine::requester_loop() {
    for (;;) {
        while (ready_count_ == 0)
            wait(tx_work_);
        const uint32_t qpn = ready_[ready_head_];
        ready_head_ = (ready_head_ + 1) % ready_.size();
        --ready_count_;
        qp& q = qps_[qpn];
        q.tx_ready = false;
        if (!q.valid || q.q_count == 0)
            continue;
        if (q.state == hw::QPS_ERR || q.state == hw::QPS_SQE) {
            sc_time delay = SC_ZERO_TIME;
            flush(q, delay);
            continue;
        }
        if (!may_send(q))
            continue;
        if (q.paused_until > sc_time_stamp())
            continue;  // retry_timer() makes it ready when the RNR wait is over
        const sc_time now = sc_time_stamp();
        const sc_time& wqe_ready = q.queue[q.q_head].ready;
        if (wqe_ready > now && ready_count_) {
            // Its WQE's fetch is still in flight: serve the other QPs meanwhile.
            park(q, wqe_ready);
            continue;
        }
        sc_time bp = port_->tx_backpressure();
        if (wqe_ready > now && wqe_ready - now > bp)
            bp = wqe_ready - now;
        if (bp != SC_ZERO_TIME) {
            wait(bp);
            if (!q.valid || q.q_count == 0 || !may_send(q)) {
                if (q.valid && q.q_count)
                    make_tx_ready(qpn);
                continue;
            }
        }
        send_packet(q);
        if (q.valid && q.q_count && may_send(q))
            make_tx_ready(qpn);
        if (packet_time_ != SC_ZERO_TIME)
            wait(packet_time_);
    }
}

bool transport_engine::may_send(const qp& q) {
    // RTS sends; SQD finishes the message in progress (C10-35) and starts no new one (C10-96).
    return q.state == hw::QPS_RTS || (q.state == hw::QPS_SQD && q.cur_offset);
}

uint8_t transport_engine::state(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid ? qps_[qpn].state : uint8_t(hw::QPS_RESET);
}

void transport_engine::build_bth_lrh(const qp& q, wire::headers& h, uint8_t opcode, uint32_t psn) const {
    h = wire::headers{};
    h.l.vl = 0;
    h.l.sl = q.sl;
    h.l.dlid = q.dlid;
    h.l.slid = lid_;
    h.b.opcode = opcode;
    h.b.pkey = pkeys_->pkey(q.pkey_index);
    h.b.dest_qp = q.dest_qpn;
    h.b.psn = psn & PSN_MASK;
}

void transport_engine::send_packet(qp& q) {
    send_wqe& w = q.queue[q.q_head];
    sc_time delay = tx_latency_;  // pipeline latency; the initiation interval is packet_cycles
    const bool is_send = w.opcode == hw::WQE_OP_SEND || w.opcode == hw::WQE_OP_SEND_IMM;
    const bool is_write = w.opcode == hw::WQE_OP_RDMA_WRITE || w.opcode == hw::WQE_OP_RDMA_WRITE_IMM;
    if (w.malformed || q.transport != hw::QPT_RC || !(is_send || is_write || w.opcode == hw::WQE_OP_NOP)) {
        // READ, atomics and send-with-invalidate arrive with the RC and memory issues; until
        // then they are a local QP operation error, never silently dropped.
        requester_error(q, hw::CQE_LOC_QP_OP_ERR, w, delay);
        return;
    }
    if (q.cur_offset == 0 && q.w_count == q.window.size())
        return;  // window full: the next ACK makes the QP ready again
    if (w.opcode == hw::WQE_OP_NOP) {
        q.window[(q.w_head + q.w_count) % q.window.size()] =
            inflight{w.wr_id, (q.sq_psn - 1) & PSN_MASK, (q.sq_psn - 1) & PSN_MASK, 0, w.wqe_index, w.opcode, w.flags};
        ++q.w_count;
        retire_head(q);
        if (q.w_count == 1) {  // nothing older outstanding: complete now
            const inflight f = q.window[q.w_head];
            q.w_head = (q.w_head + 1) % q.window.size();
            --q.w_count;
            send_completion(q, f, hw::CQE_SUCCESS, delay);
        }
        return;
    }
    if (w.length > 0x80000000ull) {
        requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
        return;
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    if (q.cur_offset == 0)
        q.cur_first_psn = q.sq_psn;
    if (q.resume && q.cur_offset == 0) {
        // Retransmission restarting inside this message: skip the packets already acknowledged.
        q.resume = false;
        const uint32_t skip = (q.resume_psn - q.sq_psn) & PSN_MASK;
        if (skip && uint64_t(skip) * mtu < w.length) {
            q.cur_offset = uint64_t(skip) * mtu;
            q.sq_psn = q.resume_psn;
            uint64_t off = q.cur_offset;
            q.cur_sge = 0;
            while (q.cur_sge < w.num_sge && off >= w.sg[q.cur_sge].len)
                off -= w.sg[q.cur_sge++].len;
            q.cur_sge_off = off;
        }
    }
    const uint64_t remaining = w.length - q.cur_offset;
    const uint32_t n = uint32_t(std::min<uint64_t>(mtu, remaining));
    const bool first = q.cur_offset == 0;
    const bool last = remaining <= mtu;
    const bool imm = last && (w.opcode == hw::WQE_OP_SEND_IMM || w.opcode == hw::WQE_OP_RDMA_WRITE_IMM);
    uint8_t opcode;
    if (is_send)
        opcode = first && last ? (imm ? op::RC_SEND_ONLY_IMM : op::RC_SEND_ONLY)
                 : first       ? op::RC_SEND_FIRST
                 : last        ? (imm ? op::RC_SEND_LAST_IMM : op::RC_SEND_LAST)
                               : op::RC_SEND_MIDDLE;
    else
        opcode = first && last ? (imm ? op::RC_RDMA_WRITE_ONLY_IMM : op::RC_RDMA_WRITE_ONLY)
                 : first       ? op::RC_RDMA_WRITE_FIRST
                 : last        ? (imm ? op::RC_RDMA_WRITE_LAST_IMM : op::RC_RDMA_WRITE_LAST)
                               : op::RC_RDMA_WRITE_MIDDLE;
    wire::headers h;
    const uint32_t psn = q.sq_psn;
    build_bth_lrh(q, h, opcode, psn);
    h.b.se = last && (w.flags & hw::WQE_FLAG_SOLICITED) && (is_send || imm);
    h.b.ack_req = last || ++q.since_ack_req >= ack_req_interval;
    if (h.b.ack_req)
        q.since_ack_req = 0;
    h.r.va = w.remote_va;
    h.r.rkey = w.rkey;
    h.r.dma_len = uint32_t(w.length);
    h.immdt = w.imm;
    const size_t hdr = wire::encode_headers(h, n, tx_pkt_.bytes);
    uint8_t* dst = tx_pkt_.bytes + hdr;
    sc_time ready = delay;
    if (w.flags & hw::WQE_FLAG_INLINE) {
        std::memcpy(dst, w.inline_data + q.cur_offset, n);
    } else {
        // Gather: walk the SGEs from where the previous packet stopped.
        uint32_t left = n;
        while (left) {
            if (q.cur_sge >= w.num_sge) {
                requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
                return;
            }
            const sge& s = w.sg[q.cur_sge];
            const uint32_t take = uint32_t(std::min<uint64_t>(left, s.len - q.cur_sge_off));
            phys_seg segs[MAX_SEGS];
            unsigned nsegs = 0;
            if (xlate_->translate(s.lkey, q.pd, s.addr + q.cur_sge_off, take, 0, segs, MAX_SEGS, nsegs, delay) !=
                xlate_status::ok) {
                requester_error(q, hw::CQE_LOC_PROT_ERR, w, delay);
                return;
            }
            for (unsigned i = 0; i < nsegs; ++i) {
                sc_time t = delay;  // reads of one packet are issued back to back
                dma.read(segs[i].pa, dst, segs[i].len, t);
                if (t > ready)
                    ready = t;
                dst += segs[i].len;
            }
            left -= take;
            q.cur_sge_off += take;
            if (q.cur_sge_off == s.len) {
                ++q.cur_sge;
                q.cur_sge_off = 0;
            }
        }
        dst = tx_pkt_.bytes + hdr + n;
    }
    if (ready < delay)
        ready = delay;
    const uint32_t pad = (4 - n % 4) % 4;
    std::memset(tx_pkt_.bytes + hdr + n, 0, pad);
    port_->transmit(tx_pkt_, uint32_t(hdr + n + pad), ready);
    ++tx_packets;
    tx_payload_bytes += n;
    q.sq_psn = (q.sq_psn + 1) & PSN_MASK;
    q.cur_offset += n;
    if (last) {
        q.window[(q.w_head + q.w_count) % q.window.size()] =
            inflight{w.wr_id, q.cur_first_psn, psn, uint32_t(w.length), w.wqe_index, w.opcode, w.flags};
        ++q.w_count;
        retire_head(q);
    }
}

void transport_engine::retire_head(qp& q) {
    q.q_head = (q.q_head + 1) % q.queue.size();
    --q.q_count;
    q.cur_offset = 0;
    q.cur_sge = 0;
    q.cur_sge_off = 0;
    fetcher_->credit(q.qpn);
}

void transport_engine::send_completion(qp& q, const inflight& f, uint8_t status, sc_time& delay) {
    const bool signaled = q.sig_all || (f.flags & hw::WQE_FLAG_SIGNALED);
    if (status == hw::CQE_SUCCESS && !signaled)
        return;  // unsignaled success: no CQE (software learns from later CQEs' wqe_counter)
    hw::cqe e{};
    e.wr_id = f.wr_id;
    e.status = status;
    e.opcode = cqe_opcode_of(f.opcode);
    e.byte_len = f.length;
    e.qpn = q.qpn;
    e.wqe_counter = f.wqe_index;
    e.owner = hw::CQE_IS_SEND;
    if (cqw_->complete(q.send_cqn, e, false, delay))
        ++send_completions;
    if (status == hw::CQE_WR_FLUSH_ERR)
        ++flushed;
    else if (status != hw::CQE_SUCCESS)
        ++error_completions;
}

void transport_engine::requester_error(qp& q, uint8_t status, const send_wqe& w, sc_time& delay) {
    // Everything sent before this WQE is still awaiting its ACK; IBA orders completions, so
    // those are flushed behind this error (the QP is in Error: their fate is unknown).
    const inflight f{w.wr_id, q.sq_psn, q.sq_psn, uint32_t(w.length), w.wqe_index, w.opcode, w.flags};
    retire_head(q);
    send_completion(q, f, status, delay);
    enter_error(q, delay);
}

void transport_engine::enter_error(qp& q, sc_time& delay) {
    q.state = hw::QPS_ERR;
    fetcher_->set_state(q.qpn, hw::QPS_ERR);
    flush(q, delay);
}

// Completes every outstanding work request of the QP with WR_FLUSH_ERR (signaled or not):
// the send window, the parsed queue, and the posted receive WQEs.
void transport_engine::flush(qp& q, sc_time& delay) {
    while (q.w_count) {
        const inflight f = q.window[q.w_head];
        q.w_head = (q.w_head + 1) % q.window.size();
        --q.w_count;
        send_completion(q, f, hw::CQE_WR_FLUSH_ERR, delay);
    }
    while (q.q_count) {
        const send_wqe& w = q.queue[q.q_head];
        const inflight f{w.wr_id, 0, 0, uint32_t(w.length), w.wqe_index, w.opcode, w.flags};
        retire_head(q);
        send_completion(q, f, hw::CQE_WR_FLUSH_ERR, delay);
    }
    if (q.have_rwqe) {
        q.have_rwqe = false;
        recv_completion(q, hw::CQE_OP_RECV, hw::CQE_WR_FLUSH_ERR, 0, 0, 0, false, delay);
    }
    while (q.rq_consumer != q.rq_producer) {
        recv_at(q, q.rq_consumer, q.rwqe, delay);
        ++q.rq_consumer;
        recv_completion(q, hw::CQE_OP_RECV, hw::CQE_WR_FLUSH_ERR, 0, 0, 0, false, delay);
    }
    q.in_send = q.in_write = false;
}

// ---------------------------------------------------------------- receive path

void transport_engine::receive(const rx_packet& p) {
    const uint32_t qpn = p.h.b.dest_qp;
    if (qpn >= qps_.size() || !qps_[qpn].valid || qps_[qpn].transport != hw::QPT_RC ||
        (p.h.b.opcode & op::TRANSPORT_MASK) != op::RC) {
        ++dropped_bad_qp;
        return;
    }
    qp& q = qps_[qpn];
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (code == op::ACKNOWLEDGE) {
        handle_ack(q, p);
        return;
    }
    // C10-97.2.1: the responder processes requests in RTR, RTS, SQD and SQEr.
    if (!(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD || q.state == hw::QPS_SQE)) {
        ++dropped_bad_qp;
        return;
    }
    handle_request(q, p);
}

void transport_engine::handle_ack(qp& q, const rx_packet& p) {
    if (!(q.state == hw::QPS_RTS || q.state == hw::QPS_SQD))
        return;
    sc_time delay = SC_ZERO_TIME;
    const uint32_t psn = p.h.b.psn;
    const wire::aeth_type type = wire::aeth_type_of(p.h.a.syndrome);
    if (type == wire::aeth_type::ack)
        ++acks_received;
    else
        ++naks_received;
    // An ACK acknowledges every request up to its PSN; a NAK every request before its PSN.
    const bool is_ack = type == wire::aeth_type::ack;
    while (q.w_count) {
        const inflight& f = q.window[q.w_head];
        if (!(is_ack ? psn_le(f.last_psn, psn) : (psn_le(f.last_psn, psn) && f.last_psn != psn)))
            break;
        const inflight done = f;
        q.w_head = (q.w_head + 1) % q.window.size();
        --q.w_count;
        send_completion(q, done, hw::CQE_SUCCESS, delay);
    }
    if (is_ack) {
        q.retries_left = q.retry_cnt;  // forward progress renews the retry budgets
        q.rnr_retries_left = q.rnr_retry;
        if (q.q_count)
            make_tx_ready(q.qpn);
        return;
    }
    // A NAK for a PSN we are not waiting on (already resent, or stale) changes nothing.
    if (!q.w_count || !psn_le(q.window[q.w_head].first_psn, psn) || !psn_le(psn, q.window[q.w_head].last_psn))
        return;
    if (type == wire::aeth_type::rnr_nak) {
        // IBA 9.7.5.2.8: wait the responder's RNR timer, then resend from the NAK'd PSN;
        // rnr_retry 7 means retry for ever.
        if (q.rnr_retry == 7 || q.rnr_retries_left-- > 0) {
            rewind(q, psn, rnr_time(wire::aeth_value_of(p.h.a.syndrome)));
            return;
        }
    } else if (wire::aeth_value_of(p.h.a.syndrome) == wire::nak::PSN_SEQUENCE_ERROR) {
        if (q.retries_left-- > 0) {  // go back N at once
            rewind(q, psn, SC_ZERO_TIME);
            return;
        }
    }
    uint8_t status = hw::CQE_REM_OP_ERR;
    if (type == wire::aeth_type::rnr_nak) {
        status = hw::CQE_RNR_RETRY_EXC_ERR;
    } else {
        switch (wire::aeth_value_of(p.h.a.syndrome)) {
        case wire::nak::PSN_SEQUENCE_ERROR: status = hw::CQE_RETRY_EXC_ERR; break;
        case wire::nak::INVALID_REQUEST: status = hw::CQE_REM_INV_REQ_ERR; break;
        case wire::nak::REMOTE_ACCESS_ERROR: status = hw::CQE_REM_ACCESS_ERR; break;
        default: status = hw::CQE_REM_OP_ERR; break;
        }
    }
    const inflight f = q.window[q.w_head];
    q.w_head = (q.w_head + 1) % q.window.size();
    --q.w_count;
    send_completion(q, f, status, delay);
    enter_error(q, delay);
}

void transport_engine::rewind(qp& q, uint32_t psn, const sc_time& wait) {
    ++retransmits;
    // Everything from the oldest unacknowledged WQE on is sent again: the parsed queue is
    // dropped and the fetcher re-reads the send ring from that WQE.
    const inflight& f = q.window[q.w_head];
    const uint16_t from = f.wqe_index;
    q.sq_psn = f.first_psn;
    q.resume = psn != f.first_psn;
    q.resume_psn = psn;
    q.w_count = 0;
    q.q_count = 0;
    q.cur_offset = 0;
    q.cur_sge = 0;
    q.cur_sge_off = 0;
    q.since_ack_req = 0;
    fetcher_->rewind(q.qpn, from);
    if (wait != SC_ZERO_TIME)
        park(q, sc_time_stamp() + wait);
}

void transport_engine::park(qp& q, const sc_time& until) {
    q.paused_until = until;
    for (uint32_t p : paused_)
        if (p == q.qpn) {
            retry_ev_.notify(until - sc_time_stamp());
            return;
        }
    paused_.push_back(q.qpn);
    retry_ev_.notify(until - sc_time_stamp());
}

void transport_engine::retry_timer() {
    const sc_time now = sc_time_stamp();
    sc_time next = SC_ZERO_TIME;
    size_t keep = 0;
    for (uint32_t qpn : paused_) {
        qp& q = qps_[qpn];
        if (q.valid && q.paused_until > now) {
            paused_[keep++] = qpn;
            if (next == SC_ZERO_TIME || q.paused_until - now < next)
                next = q.paused_until - now;
        } else if (q.valid && q.q_count) {
            make_tx_ready(qpn);
        }
    }
    paused_.resize(keep);
    if (keep)
        retry_ev_.notify(next);
}

void transport_engine::send_ack(qp& q, uint8_t syndrome, uint32_t psn, const sc_time& ready) {
    wire::headers h;
    build_bth_lrh(q, h, op::RC_ACKNOWLEDGE, psn);
    h.l.dlid = q.slid ? q.slid : q.dlid;
    h.a.syndrome = syndrome;
    h.a.msn = q.msn & PSN_MASK;
    const size_t hdr = wire::encode_headers(h, 0, ack_pkt_.bytes);
    port_->transmit(ack_pkt_, uint32_t(hdr), ready);
    if (wire::aeth_type_of(syndrome) == wire::aeth_type::ack)
        ++acks_sent;
}

void transport_engine::nak(qp& q, uint8_t code, uint32_t psn, const sc_time& ready) {
    ++naks_sent;
    send_ack(q, wire::aeth_nak(code), psn, ready);
}

void transport_engine::rnr_nak(qp& q, uint32_t psn, const sc_time& ready) {
    ++rnr_naks_sent;
    // The requester resends from this PSN after the timer; the packets it sent meanwhile are
    // out of sequence and dropped without a further NAK.
    q.nak_pending = true;
    send_ack(q, wire::aeth_rnr_nak(q.min_rnr_timer), psn, ready);
}

bool transport_engine::take_recv_wqe(qp& q, sc_time& delay) {
    if (q.have_rwqe)
        return true;
    if (q.rq_consumer == q.rq_producer)
        return false;
    recv_at(q, q.rq_consumer, q.rwqe, delay);
    ++q.rq_consumer;
    q.have_rwqe = true;
    q.recv_offset = 0;
    prefetch_recv(q, delay);
    return true;
}

void transport_engine::recv_at(qp& q, uint16_t index, recv_wqe& out, sc_time& delay) {
    const size_t slot = index % q.rq_cache.size();
    if (uint16_t(q.rq_fetched - index) != 0 && uint16_t(q.rq_fetched - index) <= q.rq_cache.size()) {
        out = q.rq_cache[slot];
        const sc_time now = sc_time_stamp();
        if (q.rq_ready[slot] > now + delay)
            delay = q.rq_ready[slot] - now;  // the prefetch is still in flight
        return;
    }
    fetcher_->fetch_recv(q.qpn, index, out, delay);
    if (q.rq_fetched == index)
        ++q.rq_fetched;
}

void transport_engine::prefetch_recv(qp& q, const sc_time& delay) {
    if (uint16_t(q.rq_fetched - q.rq_consumer) > q.rq_cache.size())
        q.rq_fetched = q.rq_consumer;  // consumed past the read-ahead (fetched on demand)
    while (q.rq_fetched != q.rq_producer && uint16_t(q.rq_fetched - q.rq_consumer) < q.rq_cache.size()) {
        const size_t slot = q.rq_fetched % q.rq_cache.size();
        sc_time t = delay;
        fetcher_->fetch_recv(q.qpn, q.rq_fetched, q.rq_cache[slot], t);
        q.rq_ready[slot] = sc_time_stamp() + t;
        ++q.rq_fetched;
    }
}

bool transport_engine::scatter(qp& q, const uint8_t* data, uint32_t len, sc_time& delay, uint8_t& status) {
    if (q.rwqe.malformed) {
        status = hw::CQE_LOC_QP_OP_ERR;
        return false;
    }
    if (q.recv_offset + len > q.rwqe.capacity) {
        status = hw::CQE_LOC_LEN_ERR;
        return false;
    }
    // Find the SGE holding recv_offset, then place across SGEs.
    uint64_t skip = q.recv_offset;
    unsigned i = 0;
    while (i < q.rwqe.num_sge && skip >= q.rwqe.sg[i].len)
        skip -= q.rwqe.sg[i++].len;
    uint32_t left = len;
    while (left) {
        const sge& s = q.rwqe.sg[i];
        const uint32_t take = uint32_t(std::min<uint64_t>(left, s.len - skip));
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (xlate_->translate(s.lkey, q.pd, s.addr + skip, take, hw::ACCESS_LOCAL_WRITE, segs, MAX_SEGS, nsegs,
                              delay) != xlate_status::ok) {
            status = hw::CQE_LOC_PROT_ERR;
            return false;
        }
        for (unsigned k = 0; k < nsegs; ++k) {
            dma.write(segs[k].pa, data, segs[k].len, delay);
            data += segs[k].len;
        }
        left -= take;
        skip = 0;
        ++i;
    }
    q.recv_offset += len;
    return true;
}

void transport_engine::recv_completion(qp& q, uint8_t opcode, uint8_t status, uint32_t byte_len, uint32_t imm,
                                       uint8_t flags, bool solicited, sc_time& delay) {
    hw::cqe e{};
    e.wr_id = q.rwqe.wr_id;
    e.status = status;
    e.opcode = opcode;
    e.byte_len = byte_len;
    e.imm = imm;
    e.flags = flags;
    e.qpn = q.qpn;
    e.src_qp = q.dest_qpn;
    e.slid = q.slid;
    e.sl = q.sl;
    e.pkey_index = q.pkey_index;
    e.wqe_counter = q.rwqe.wqe_index;
    if (cqw_->complete(q.recv_cqn, e, solicited, delay))
        ++recv_completions;
    if (status == hw::CQE_WR_FLUSH_ERR)
        ++flushed;
    else if (status != hw::CQE_SUCCESS)
        ++error_completions;
}

void transport_engine::handle_request(qp& q, const rx_packet& p) {
    const sc_time now = sc_time_stamp();
    sc_time delay = q.resp_free > now ? q.resp_free - now : SC_ZERO_TIME;
    q.resp_free = now + delay + rx_time_;
    delay += rx_latency_;
    const uint8_t code = p.h.b.opcode & 0x1F;
    const uint32_t psn = p.h.b.psn;
    q.slid = p.h.l.slid;

    const uint32_t diff = (psn - q.rq_psn) & PSN_MASK;
    if (diff != 0) {
        if (diff >= 0x800000) {  // earlier PSN: a duplicate; acknowledge what we have
            ++duplicates;
            send_ack(q, wire::aeth_ack(31), (q.rq_psn - 1) & PSN_MASK, delay);
        } else {  // a gap: NAK once until the expected PSN arrives
            ++seq_errors;
            if (!q.nak_pending) {
                q.nak_pending = true;
                nak(q, wire::nak::PSN_SEQUENCE_ERROR, q.rq_psn, delay);
            }
        }
        return;
    }
    q.nak_pending = false;

    const bool send_first = code == op::SEND_FIRST || code == op::SEND_ONLY || code == op::SEND_ONLY_IMM;
    const bool send_cont = code == op::SEND_MIDDLE || code == op::SEND_LAST || code == op::SEND_LAST_IMM;
    const bool write_first = code == op::RDMA_WRITE_FIRST || code == op::RDMA_WRITE_ONLY || code == op::RDMA_WRITE_ONLY_IMM;
    const bool write_cont = code == op::RDMA_WRITE_MIDDLE || code == op::RDMA_WRITE_LAST || code == op::RDMA_WRITE_LAST_IMM;
    const bool last = code == op::SEND_LAST || code == op::SEND_LAST_IMM || code == op::SEND_ONLY ||
                      code == op::SEND_ONLY_IMM || code == op::RDMA_WRITE_LAST || code == op::RDMA_WRITE_LAST_IMM ||
                      code == op::RDMA_WRITE_ONLY || code == op::RDMA_WRITE_ONLY_IMM;
    const bool imm = code == op::SEND_LAST_IMM || code == op::SEND_ONLY_IMM || code == op::RDMA_WRITE_LAST_IMM ||
                     code == op::RDMA_WRITE_ONLY_IMM;
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    // Opcode sequence (IBA 9.7.5.1.1): FIRST/ONLY start a message, MIDDLE/LAST continue one
    // of the same kind; MIDDLE and FIRST carry exactly one MTU, LAST/ONLY at most one.
    const bool seq_ok = ((send_first || write_first) && !q.in_send && !q.in_write) ||
                        (send_cont && q.in_send) || (write_cont && q.in_write);
    const bool len_ok = last ? p.payload_len <= mtu : p.payload_len == mtu;
    if (!seq_ok || !len_ok || !(send_first || send_cont || write_first || write_cont)) {
        // Unsupported requests (READ, atomics, send with invalidate) arrive with the RC issue.
        nak(q, wire::nak::INVALID_REQUEST, psn, delay);
        sc_time d = delay;
        enter_error(q, d);
        return;
    }

    if (send_first || send_cont) {
        // C10-81: each Send message consumes one receive WQE, taken at its first packet.
        if (send_first && !take_recv_wqe(q, delay)) {
            rnr_nak(q, psn, delay);
            return;
        }
        uint8_t status = hw::CQE_SUCCESS;
        if (!scatter(q, p.payload, p.payload_len, delay, status)) {
            nak(q, status == hw::CQE_LOC_LEN_ERR ? wire::nak::INVALID_REQUEST : wire::nak::REMOTE_OPERATIONAL_ERROR,
                psn, delay);
            q.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV, status, uint32_t(q.recv_offset), 0, 0, false, delay);
            enter_error(q, delay);
            return;
        }
        q.in_send = !last;
        if (last) {
            q.have_rwqe = false;
            q.msn = (q.msn + 1) & PSN_MASK;
            recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(q.recv_offset), imm ? p.h.immdt : 0,
                            imm ? hw::CQE_FLAG_WITH_IMM : 0, p.h.b.se, delay);
        }
    } else {
        if (write_first) {
            if (!(q.access & hw::ACCESS_REMOTE_WRITE)) {
                nak(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
                enter_error(q, delay);
                return;
            }
            q.write_va = p.h.r.va;
            q.write_rkey = p.h.r.rkey;
            q.write_len = p.h.r.dma_len;
            q.write_done = 0;
        }
        if (q.write_done + p.payload_len > q.write_len || (last && q.write_done + p.payload_len != q.write_len)) {
            nak(q, wire::nak::INVALID_REQUEST, psn, delay);
            enter_error(q, delay);
            return;
        }
        // C10-86: a WRITE with immediate consumes a receive WQE; without a WQE it is RNR.
        if (imm && !take_recv_wqe(q, delay)) {
            rnr_nak(q, psn, delay);
            return;
        }
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (p.payload_len &&
            xlate_->translate(q.write_rkey, q.pd, q.write_va + q.write_done, p.payload_len, hw::ACCESS_REMOTE_WRITE,
                              segs, MAX_SEGS, nsegs, delay) != xlate_status::ok) {
            nak(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
            enter_error(q, delay);
            return;
        }
        const uint8_t* data = p.payload;
        for (unsigned k = 0; k < nsegs; ++k) {
            dma.write(segs[k].pa, data, segs[k].len, delay);
            data += segs[k].len;
        }
        q.write_done += p.payload_len;
        q.in_write = !last;
        if (last) {
            q.msn = (q.msn + 1) & PSN_MASK;
            // C10-87: a WRITE without immediate completes nothing at the responder.
            if (imm) {
                q.have_rwqe = false;
                recv_completion(q, hw::CQE_OP_RECV_RDMA_WITH_IMM, hw::CQE_SUCCESS, uint32_t(q.write_len), p.h.immdt,
                                hw::CQE_FLAG_WITH_IMM, p.h.b.se, delay);
            }
        }
    }
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
    q.rq_psn = (q.rq_psn + 1) & PSN_MASK;
    if (p.h.b.ack_req)
        send_ack(q, wire::aeth_ack(31), psn, delay);
}

}  // namespace hcasim
