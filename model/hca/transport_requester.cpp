// Transport engine, requester: parsed WQEs from the WQE fetcher into the shared WQE buffer, the
// requester method (one for all QPs, round robin at packet granularity), and each packet of the
// head WQE: SEND and RDMA WRITE segmentation, gather through translation and DMA, READ and
// atomic requests, local completion of operations that send nothing, requester errors.
// A packet goes on in transport_reliability.cpp (the local ACK timer, then its ACK) and, at the
// far end, in transport_responder.cpp.
#include "model/hca/transport_engine.h"
#include "model/core/sim_time.h"

#include <algorithm>
#include <cstring>

#include "model/hca/cq_writer.h"
#include "model/hca/mcast_table.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/psn.h"
#include "model/hca/translation_unit.h"
#include "model/hca/wqe_fetcher.h"
#include "tlm_if/commands.h"

namespace hcasim {

using namespace sc_core;
namespace op = wire::op;

namespace {
bool is_memory_op(uint8_t wqe_op) {
    return wqe_op == hw::WQE_OP_LOCAL_INV || wqe_op == hw::WQE_OP_BIND_MW || wqe_op == hw::WQE_OP_FAST_REG;
}
bool is_rd_atomic(uint8_t wqe_op) {
    return wqe_op == hw::WQE_OP_RDMA_READ || wqe_op == hw::WQE_OP_CMP_SWAP || wqe_op == hw::WQE_OP_FETCH_ADD;
}
bool is_send_op(uint8_t wqe_op) {
    return wqe_op == hw::WQE_OP_SEND || wqe_op == hw::WQE_OP_SEND_IMM || wqe_op == hw::WQE_OP_SEND_INV;
}
/// Whether the QP's transport carries the operation (IBA 10.7.2); else a local QP operation error.
bool transport_carries(uint8_t transport, uint8_t wqe_op) {
    const bool is_send = is_send_op(wqe_op);
    const bool is_write = wqe_op == hw::WQE_OP_RDMA_WRITE || wqe_op == hw::WQE_OP_RDMA_WRITE_IMM;
    if (transport == hw::QPT_RC)
        return is_send || is_write || is_rd_atomic(wqe_op) || is_memory_op(wqe_op) ||
               wqe_op == hw::WQE_OP_NOP;
    if (transport == hw::QPT_UC)  // C10-84: SEND and WRITE; C10-89: binds; no READ, atomics, SEND_INV
        return (is_send && wqe_op != hw::WQE_OP_SEND_INV) || is_write || wqe_op == hw::WQE_OP_LOCAL_INV ||
               wqe_op == hw::WQE_OP_BIND_MW || wqe_op == hw::WQE_OP_NOP;
    if (transport == hw::QPT_UD)  // SEND only
        return wqe_op == hw::WQE_OP_SEND || wqe_op == hw::WQE_OP_SEND_IMM || wqe_op == hw::WQE_OP_NOP;
    return false;
}
/// The RC opcode of a SEND (else RDMA WRITE) packet by its place in the message.
uint8_t segment_opcode(bool is_send, bool first, bool last, bool imm, bool inv) {
    if (is_send)
        return first && last ? (imm   ? op::RC_SEND_ONLY_IMM
                                : inv ? op::RC_SEND_ONLY_INV
                                      : op::RC_SEND_ONLY)
               : first       ? op::RC_SEND_FIRST
               : last        ? (imm   ? op::RC_SEND_LAST_IMM
                                : inv ? op::RC_SEND_LAST_INV
                                      : op::RC_SEND_LAST)
                             : op::RC_SEND_MIDDLE;
    return first && last ? (imm ? op::RC_RDMA_WRITE_ONLY_IMM : op::RC_RDMA_WRITE_ONLY)
           : first       ? op::RC_RDMA_WRITE_FIRST
           : last        ? (imm ? op::RC_RDMA_WRITE_LAST_IMM : op::RC_RDMA_WRITE_LAST)
                         : op::RC_RDMA_WRITE_MIDDLE;
}
}  // namespace

// ---------------------------------------------------------------- from the WQE fetcher

unsigned transport_engine::room(uint32_t qpn) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return 0;
    qp& q = qps_[qpn];
    if (q.req.queue.count >= wqe_queue_depth) return 0;  // retire_head's credit() makes it ready again
    if (wqe_buffer_.free_count() == 0) {
        if (!q.req.buffer_wait) {
            q.req.buffer_wait = true;
            ++wqe_buffer_stalls;
            buffer_waiters_.push_back(qpn);
        }
        return 0;
    }
    return std::min<unsigned>(wqe_queue_depth - q.req.queue.count, wqe_buffer_.free_count());
}

bool transport_engine::has_room(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid && qps_[qpn].req.queue.count < wqe_queue_depth &&
           wqe_buffer_.free_count() > 0;
}

void transport_engine::push_send(uint32_t qpn, const send_wqe& w) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp& q = qps_[qpn];
    wqe_buffer_.append(q.req.queue, w);
    const uint64_t used = wqe_buffer_.used();
    if (used > wqe_buffer_peak.value()) wqe_buffer_peak += used - wqe_buffer_peak.value();
    make_tx_ready(qpn);
}

// ---------------------------------------------------------------- the requester method and one packet

void transport_engine::make_tx_ready(uint32_t qpn) {
    qp& q = qps_[qpn];
    if (q.tx_ready) return;
    q.tx_ready = true;
    ready_.push_back(qpn, sim_now(), turn_order{qps_, &qp::tx_turn});
    if (!requester_running_)  // a running requester finds it in its queue
        tx_work_.notify(SC_ZERO_TIME);
}

// An SC_METHOD: each activation serves QPs until it must wait (for work, for the port or a
// WQE, or for the initiation interval after a packet) and returns with next_trigger().
void transport_engine::requester_method() {
    if (tx_free_at_ != SC_ZERO_TIME) {
        // Woken by new work during the initiation interval after the last packet: the
        // interval still holds (as if the method had waited for it, then for the work).
        const sc_time now = sim_now();
        if (tx_free_at_ > now) {
            next_trigger(tx_free_at_ - now);
            return;
        }
        tx_free_at_ = SC_ZERO_TIME;
    }
    // While it runs, new work needs no notification: the loop finds it in the queue.
    requester_running_ = true;
    struct stopped {
        bool& running;
        ~stopped() { running = false; }
    } at_return{requester_running_};
    for (;;) {
        uint32_t qpn;
        if (resume_qpn_ != NIL) {
            // Back from a wait for the port or the QP's WQE: still sendable?
            qpn = resume_qpn_;
            resume_qpn_ = NIL;
            qp& q = qps_[qpn];
            if (!q.valid || q.req.queue.count == 0 || !may_send(q) || q.req.paused_until > sim_now()) {
                if (q.valid && q.req.queue.count && may_send(q)) make_tx_ready(qpn);
                continue;
            }
        } else {
            if (ready_.empty()) {
                next_trigger(tx_work_);
                return;
            }
            qpn = ready_.front();
            ready_.pop_front();
            hint_next_turns();
            qp& q = qps_[qpn];
            q.tx_ready = false;
            if (!q.valid || q.req.queue.count == 0) continue;
            if (q.state == hw::QPS_ERR) {
                sc_time delay = SC_ZERO_TIME;
                flush(q, delay);
                continue;
            }
            if (q.state == hw::QPS_SQE) {
                sc_time delay = SC_ZERO_TIME;
                enter_sqe(q, delay);  // flushes the send queue only
                continue;
            }
            if (!may_send(q)) continue;
            if (q.req.paused_until > sim_now())
                continue;                     // timer_method() makes it ready when the RNR wait is over
            if (cc_ && cc_hold(q)) continue;  // its SL's injection delay: parked
            const sc_time now = sim_now();
            if (send_unit_busy(q, now)) {
                // A WQE starts when its QP's send unit has finished the unit's previous WQE;
                // QPs on other units go on meanwhile.
                park(q, send_free_[qpn % send_free_.size()]);
                continue;
            }
            const sc_time& wqe_ready = head_wqe(q).ready;
            if (wqe_ready > now && !ready_.empty()) {
                // Its WQE's fetch is still in flight: serve the other QPs meanwhile.
                ++stall_wqe_fetch;
                park(q, wqe_ready);
                continue;
            }
            if (tx_lanes_.lanes && tx_lanes_.holds(port_->tx_lane(q.sl))) {
                wait_lane(tx_lanes_, q);  // behind the QPs already waiting for its VL
                continue;
            }
            sc_time bp = port_->tx_backpressure(qps_[qpn].sl);
            if (tx_blocked(bp)) {
                // Waiting for link credit (the far end's buffer is full), or with VL
                // arbitration for room in the VL's queue: then only this QP's VL waits.
                ++stall_credit;
                if (port_->tx_lanes() > 1) {
                    wait_lane(tx_lanes_, q);
                    continue;
                }
                resume_qpn_ = qpn;
                next_trigger(port_->tx_unblocked());
                return;
            }
            if (bp != SC_ZERO_TIME) stall_port_ps += uint64_t(bp / one_ps_);
            if (wqe_ready > now && wqe_ready - now > bp) {
                stall_wqe_fetch_ps += uint64_t((wqe_ready - now - bp) / one_ps_);
                bp = wqe_ready - now;
            }
            if (bp != SC_ZERO_TIME) {
                resume_qpn_ = qpn;
                next_trigger(bp);
                return;
            }
        }
        qp& q = qps_[qpn];
        // Its context: a miss parks the QP until the QPC entry has arrived (the requester
        // serves other QPs meanwhile); the packet after it uses the entry the miss brought.
        if (q.ctx_filled) {
            q.ctx_filled = false;
        } else {
            const sc_time ctx = qp_context(qpn, SC_ZERO_TIME);
            if (ctx != SC_ZERO_TIME) {
                q.ctx_filled = true;
                // A unit starting the QP's WQE waits with it for the context (as receive units do).
                if (wqe_time_ != SC_ZERO_TIME && q.req.cur_offset == 0 && qpc_miss_stalls_unit) {
                    sc_time& unit = send_free_[qpn % send_free_.size()];
                    unit = std::max(unit, sim_now() + ctx);
                }
                park(q, sim_now() + ctx);
                continue;
            }
        }
        // A QP that must wait for a response (window, READ/atomic limit, fence) leaves the
        // round robin; the response that frees it puts it back.
        const bool starts = wqe_time_ != SC_ZERO_TIME && q.req.cur_offset == 0;
        if (!send_packet(q)) continue;
        q.tx_turn = ++tx_turns_;
        if (starts) send_free_[qpn % send_free_.size()] = sim_now() + wqe_time_;  // its unit's WQE time
        if (q.valid && q.req.queue.count && may_send(q)) make_tx_ready(qpn);
        tx_busy_ps += packet_ps_;
        if (packet_time_ != SC_ZERO_TIME) {
            if (ready_.empty()) {
                // Nothing more to send: no wake-up at the end of the initiation interval (it
                // would find nothing); new work wakes the method, which then waits for the
                // rest of the interval if it is not over.
                tx_free_at_ = sim_now() + packet_time_;
                next_trigger(tx_work_);
                return;
            }
            next_trigger(packet_time_);  // the initiation interval
            return;
        }
    }
}

void transport_engine::wait_lane(lane_waits& w, const qp& q) {
    const unsigned lane = port_->tx_lane(q.sl);
    ring<uint32_t>& l = w.qpns[lane];
    if (l.full()) l.grow(l.slots() ? l.slots() * 2 : 8);  // allocates only while the list deepens
    l.push_back(q.qpn);
    w.sl[lane] = q.sl;
    if (!(tx_lanes_.lanes | resp_lanes_.lanes)) lane_kick_.notify(SC_ZERO_TIME);
    w.lanes |= 1u << lane;
    // Still listed (tx_ready or resp_ready stays set): make_*_ready() does not queue it twice.
    qp& listed = qps_[q.qpn];
    if (&w == &tx_lanes_)
        listed.tx_ready = true;
    else
        listed.resp_ready = true;
}

bool transport_engine::release_lanes(lane_waits& w, same_time_fifo<uint32_t>& ready, uint64_t qp::*turn) {
    bool any = false;
    const sc_time& now = sim_now();
    const turn_order order{qps_, turn};
    for (uint32_t m = w.lanes; m; m &= m - 1) {
        const unsigned lane = unsigned(__builtin_ctz(m));
        if (tx_blocked(port_->tx_backpressure(w.sl[lane]))) continue;
        for (ring<uint32_t>& l = w.qpns[lane]; !l.empty(); l.pop_front())
            ready.push_back(l.front(), now, order);
        w.lanes &= ~(1u << lane);
        any = true;
    }
    return any;
}

void transport_engine::lane_method() {
    if (release_lanes(tx_lanes_, ready_, &qp::tx_turn) && !requester_running_) tx_work_.notify(SC_ZERO_TIME);
    if (release_lanes(resp_lanes_, resp_ready_, &qp::resp_turn)) resp_work_.notify(SC_ZERO_TIME);
    if (tx_lanes_.lanes | resp_lanes_.lanes)
        next_trigger(port_->tx_unblocked());
    else
        next_trigger(lane_kick_);
}

bool transport_engine::may_send(const qp& q) const {
    // RTS sends; SQD finishes the message in progress (C10-35) and starts no new one (C10-37),
    // but may resend (go back N) what it had started before SQD.
    if (q.state == hw::QPS_RTS) return true;
    if (q.state != hw::QPS_SQD || !q.req.queue.count) return false;
    const uint16_t ahead = uint16_t(q.req.sqd_limit - head_wqe(q).wqe_index);
    return q.req.sqd_resend && ahead != 0 && ahead <= 0x8000;
}

bool transport_engine::send_packet(qp& q) {
    send_wqe& w = head_wqe(q);
    sc_time delay = tx_latency_;  // pipeline latency; the initiation interval is packet_cycles
    if (w.fetch_error) {
        wq_catastrophic_error(q, delay);
        return true;
    }
    const bool is_send = is_send_op(w.opcode);
    const bool rc = q.transport == hw::QPT_RC, ud = q.transport == hw::QPT_UD;
    if (w.malformed || !transport_carries(q.transport, w.opcode)) {
        requester_error(q, hw::CQE_LOC_QP_OP_ERR, w, delay);
        return true;
    }
    if (q.req.cur_offset == 0) {
        if (!window_room(q)) {
            ++stall_window;
            return false;  // window full: the next ACK makes the QP ready again
        }
        // C10-100: a fenced WQE starts once every earlier READ and atomic has completed.
        if ((w.flags & hw::WQE_FLAG_FENCE) && !q.req.rd.empty()) {
            ++stall_fence;
            return false;
        }
    }
    if (w.opcode == hw::WQE_OP_NOP) {
        complete_locally(q, w, delay);
        return true;
    }
    if (is_memory_op(w.opcode)) return memory_op(q, w, delay);
    if (q.rd && !q.req.cur_offset) {  // RD: the message goes through the EE context it names
        bool done = false;
        if (!rd_claim(q, w, delay, done)) return done;
    }
    if (w.length > 0x80000000ull) {
        requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
        return true;
    }
    if (is_rd_atomic(w.opcode)) return send_read_or_atomic(q, w, delay);
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    if (ud && w.length > mtu) {
        // C10-93.1.1: a datagram longer than the path MTU is not sent, and that is no error.
        ++ud_oversize;
        complete_locally(q, w, delay);
        return true;
    }
    if (q.req.cur_offset == 0) {
        q.req.cur_first_psn = q.req.sq_psn;
        if (probe_) probe_->mark(path_probe::wqe_start, sim_now());
    }
    if (q.req.resume && q.req.cur_offset == 0) {
        // Retransmission restarting inside this message: skip the packets already acknowledged.
        q.req.resume = false;
        const uint32_t skip = (q.req.resume_psn - q.req.sq_psn) & PSN_MASK;
        if (skip && uint64_t(skip) * mtu < w.length) {
            q.req.cur_offset = uint64_t(skip) * mtu;
            q.req.sq_psn = q.req.resume_psn;
            uint64_t off = q.req.cur_offset;
            q.req.cur_sge = 0;
            while (q.req.cur_sge < w.num_sge && off >= w.sg[q.req.cur_sge].len)
                off -= w.sg[q.req.cur_sge++].len;
            q.req.cur_sge_off = off;
        }
    }
    const uint64_t remaining = w.length - q.req.cur_offset;
    const uint32_t n = uint32_t(std::min<uint64_t>(mtu, remaining));
    const bool first = q.req.cur_offset == 0;
    if (uint16_t(w.wqe_index + 1 - q.req.started_limit) <= 0x8000)
        q.req.started_limit = uint16_t(w.wqe_index + 1);
    const bool last = remaining <= mtu;
    const bool imm = last && (w.opcode == hw::WQE_OP_SEND_IMM || w.opcode == hw::WQE_OP_RDMA_WRITE_IMM);
    const bool inv = last && w.opcode == hw::WQE_OP_SEND_INV;
    const uint8_t opcode = segment_opcode(is_send, first, last, imm, inv);
    wire::headers h;
    const uint32_t psn = q.req.sq_psn;
    if (ud) {
        build_ud_headers(q, w, h, imm ? op::UD_SEND_ONLY_IMM : op::UD_SEND_ONLY);
    } else {
        // The RC opcode names the operation; UC packets carry the same operation codes.
        build_bth_lrh(q, h, rc ? opcode : uint8_t(op::UC | (opcode & ~op::TRANSPORT_MASK)), psn);
    }
    h.b.se = last && (w.flags & hw::WQE_FLAG_SOLICITED) && (is_send || imm);
    h.b.ack_req =
        rc && (last || ++q.req.since_ack_req >= ack_req_interval);  // UC and UD are never acknowledged
    if (h.b.ack_req) q.req.since_ack_req = 0;
    h.r.va = w.remote_va;
    h.r.rkey = w.rkey;
    h.r.dma_len = uint32_t(w.length);
    h.immdt = w.imm;
    h.ieth_rkey = w.imm;  // SEND with Invalidate: the R_Key the responder invalidates
    const size_t hdr = wire::encode_headers(h, n, tx_pkt_->bytes);
    uint8_t* dst = tx_pkt_->bytes + hdr;
    sc_time ready = delay;
    if (w.flags & hw::WQE_FLAG_INLINE) {
        std::memcpy(dst, w.inline_data + q.req.cur_offset, n);
    } else {
        // Gather: walk the SGEs from where the previous packet stopped.
        uint32_t left = n;
        while (left) {
            if (q.req.cur_sge >= w.num_sge) {
                requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
                return true;
            }
            const sge& s = w.sg[q.req.cur_sge];
            const uint32_t take = uint32_t(std::min<uint64_t>(left, s.len - q.req.cur_sge_off));
            phys_seg segs[MAX_SEGS];
            unsigned nsegs = 0;
            const xlate_status st = xlate_->translate(s.lkey, q.who, s.addr + q.req.cur_sge_off, take, 0,
                                                      segs, MAX_SEGS, nsegs, delay);
            if (st != xlate_status::ok) {
                requester_error(q, hw::CQE_LOC_PROT_ERR, w, delay, uint8_t(st));
                return true;
            }
            for (unsigned i = 0; i < nsegs; ++i) {
                sc_time t = delay;  // reads of one packet are issued back to back
                if (!dma.read(segs[i].pa, dst, segs[i].len, t)) {
                    // The page's translation points outside host memory (PCIe access error).
                    requester_error(q, hw::CQE_LOC_QP_OP_ERR, w, delay);
                    return true;
                }
                if (t > ready) ready = t;
                dst += segs[i].len;
            }
            left -= take;
            q.req.cur_sge_off += take;
            if (q.req.cur_sge_off == s.len) {
                ++q.req.cur_sge;
                q.req.cur_sge_off = 0;
            }
        }
    }
    if (ready < delay) ready = delay;
    const uint32_t pad = (4 - n % 4) % 4;
    std::memset(tx_pkt_->bytes + hdr + n, 0, pad);
    sc_time sent = port_->transmit(tx_pkt_, uint32_t(hdr + n + pad), ready);
    if (cc_) cc_space(q, sent, ready, uint32_t(hdr + n + pad));
    HCASIM_LOG(log_, debug, "sends " << wire::describe_packet(tx_pkt_->bytes, hdr + n + pad));
    q.req.resend_pending = false;
    ++tx_packets;
    tx_payload_bytes += n;
    q.req.sq_psn = (q.req.sq_psn + 1) & PSN_MASK;
    q.req.cur_offset += n;
    if (last && probe_) probe_->mark(path_probe::wire_end, sim_now() + sent);
    if (last) {
        q.req.window.push_back(inflight{w.wr_id, q.req.cur_first_psn, psn, uint32_t(w.length), w.wqe_index,
                                        w.opcode, w.flags, NO_RD, 0});
        retire_head(q);
        if (!rc) {
            // No acknowledgement comes: the message is complete once its last packet is on the
            // wire (everything older completed the same way, so it is the window's head).
            while (!q.req.window.empty()) pop_window(q, hw::CQE_SUCCESS, sent);
            check_drained(q, sent);
        }
    }
    if (rc) arm_ack_timer(q);
    return true;
}

void transport_engine::build_bth_lrh(const qp& q, wire::headers& h, uint8_t opcode, uint32_t psn) const {
    h = wire::BLANK_HEADERS;
    h.l.vl = 0;
    h.l.sl = q.sl;
    h.l.dlid = q.dlid;
    const uint16_t mask = uint16_t((1u << lmc_) - 1);
    h.l.slid = uint16_t((lid_ & ~mask) | (q.src_path_bits & mask));  // C10-3
    h.b.opcode = opcode;
    h.b.mig_req = q.mig_state == hw::MIG_MIGRATED;  // IBA 10.4: 0 while Rearm or Armed
    h.b.pkey = pkeys_->pkey(q.pkey_index);
    h.b.dest_qp = q.dest_qpn;
    if (q.xrc != qp::XRC_NONE) {
        // XRC: the RC operations under the XRC transport bits; a request names the target's
        // XRC SRQ (the head WQE's: the one being sent).
        h.b.opcode = uint8_t(op::XRC | (opcode & ~op::TRANSPORT_MASK));
        if (q.xrc == qp::XRC_INI && q.req.queue.count) h.x.srqn = head_wqe(q).xrc_srqn;
    } else if (q.rd || q.eec) {
        // RD: the RC operations under the RD transport bits, the peer EE context in the RDETH;
        // a request names its destination QP and carries the Q_Key and its source QP (DETH,
        // C10-15: a Q_Key with the high bit set is the QP's own); a response goes to the QP
        // that sent the request.
        h.b.opcode = uint8_t(op::RD | (opcode & ~op::TRANSPORT_MASK));
        if (q.eec) {
            h.rd.ee_context = q.dest_qpn;
            h.b.dest_qp = q.rd_peer_qp;
        } else if (q.rd_eec != NIL && q.req.queue.count) {
            const send_wqe& w = head_wqe(q);
            h.rd.ee_context = qps_[q.rd_eec].dest_qpn;
            h.b.dest_qp = w.ud.dest_qpn;
            h.d.qkey = (w.ud.qkey & 0x80000000u) ? q.qkey : w.ud.qkey;
            h.d.src_qp = q.qpn;
        }
    }
    h.b.psn = psn & PSN_MASK;
}

// ---------------------------------------------------------------- READ and atomic requests

bool transport_engine::send_read_or_atomic(qp& q, send_wqe& w, sc_time& delay) {
    const bool atomic = w.opcode != hw::WQE_OP_RDMA_READ;
    if (q.max_rd_atomic == 0) {
        // The QP was given no READ/atomic resources (max_rd_atomic 0): it cannot issue one.
        requester_error(q, hw::CQE_LOC_QP_OP_ERR, w, delay);
        return true;
    }
    if (q.req.rd.size() >= q.max_rd_atomic || !rd_room(q)) {
        ++stall_rd_atomic;
        return false;  // C10-94 limit: it waits for an earlier READ/atomic to complete
    }
    uint64_t capacity = 0;
    for (unsigned i = 0; i < w.num_sge; ++i) capacity += w.sg[i].len;
    if (atomic ? capacity < 8 : capacity < w.length) {
        requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
        return true;
    }
    if (!q.req.resume) {
        // C10-55: the local data segments that receive the READ data or the atomic's original
        // value need Local Write; they are checked before the request goes out, so a refused
        // segment sends nothing (the responder never reads or modifies its memory).
        uint64_t need = atomic ? 8 : w.length;
        for (unsigned i = 0; i < w.num_sge && need; ++i) {
            const uint64_t len = std::min<uint64_t>(need, w.sg[i].len);
            need -= len;
            if (!len) continue;  // C10-54.1.1: a zero-length segment is not checked
            const xlate_status st =
                xlate_->check(w.sg[i].lkey, q.who, w.sg[i].addr, len, hw::ACCESS_LOCAL_WRITE, delay);
            if (st != xlate_status::ok) {
                requester_error(q, hw::CQE_LOC_PROT_ERR, w, delay, uint8_t(st));
                return true;
            }
        }
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const uint32_t npkts = atomic || w.length == 0 ? 1u : uint32_t((w.length + mtu - 1) / mtu);
    const uint32_t first = q.req.sq_psn;
    uint32_t skip = 0;
    if (q.req.resume) {
        // Retransmission: a READ resumes where its responses stopped (a new request for the
        // rest); an atomic is sent again whole (the responder replays its result).
        q.req.resume = false;
        const uint32_t s = (q.req.resume_psn - first) & PSN_MASK;
        if (!atomic && s < npkts) skip = s;
    }
    const uint32_t psn = (first + skip) & PSN_MASK;
    wire::headers h;
    if (atomic) {
        build_bth_lrh(q, h, w.opcode == hw::WQE_OP_CMP_SWAP ? op::RC_COMPARE_SWAP : op::RC_FETCH_ADD, psn);
        h.ae.va = w.remote_va;
        h.ae.rkey = w.rkey;
        h.ae.swap_add = w.swap_add;
        h.ae.compare = w.compare;
    } else {
        build_bth_lrh(q, h, op::RC_RDMA_READ_REQUEST, psn);
        const uint64_t done = uint64_t(skip) * mtu;
        h.r.va = w.remote_va + done;
        h.r.rkey = w.rkey;
        h.r.dma_len = uint32_t(w.length - done);
        ++read_requests;
    }
    h.b.ack_req = true;
    q.req.since_ack_req = 0;
    const size_t hdr = wire::encode_headers(h, 0, tx_pkt_->bytes);
    if (probe_) probe_->mark(path_probe::wqe_start, sim_now());
    const sc_time sent = port_->transmit(tx_pkt_, uint32_t(hdr), delay);
    if (cc_) cc_space(q, sent, delay, uint32_t(hdr));
    if (probe_) probe_->mark(path_probe::wire_end, sim_now() + sent);
    q.req.resend_pending = false;
    ++tx_packets;
    if (uint16_t(w.wqe_index + 1 - q.req.started_limit) <= 0x8000)
        q.req.started_limit = uint16_t(w.wqe_index + 1);
    const uint8_t slot = uint8_t(q.req.rd.push());
    rd_ctx& c = q.req.rd.slot(slot);
    c.placed = uint64_t(skip) * mtu;
    c.entry = q.req.queue.head;
    q.req.window.push_back(inflight{w.wr_id, first, (first + npkts - 1) & PSN_MASK, uint32_t(w.length),
                                    w.wqe_index, w.opcode, w.flags, slot, psn});
    q.req.sq_psn = (first + npkts) & PSN_MASK;
    retire_head(q, true);
    arm_ack_timer(q);
    return true;
}

// ---------------------------------------------------------------- local completion, head WQE done, errors

void transport_engine::complete_locally(qp& q, const send_wqe& w, sc_time& delay) {
    q.req.window.push_back(inflight{w.wr_id, (q.req.sq_psn - 1) & PSN_MASK, (q.req.sq_psn - 1) & PSN_MASK, 0,
                                    w.wqe_index, w.opcode, w.flags, NO_RD, 0});
    if (uint16_t(w.wqe_index + 1 - q.req.started_limit) <= 0x8000)
        q.req.started_limit = uint16_t(w.wqe_index + 1);
    retire_head(q);
    q.req.resend_pending = false;
    if (q.req.window.size() == 1)  // nothing older outstanding: complete now
        pop_window(q, hw::CQE_SUCCESS, delay);
}

bool transport_engine::memory_op(qp& q, send_wqe& w, sc_time& delay) {
    // o10-37.2.20, o10-37.2.23: a fenced Local Invalidate waits until every earlier WQE has
    // completed (strong ordering); unfenced it runs when it reaches the head (relaxed).
    if (w.opcode == hw::WQE_OP_LOCAL_INV && (w.flags & hw::WQE_FLAG_FENCE) && !q.req.window.empty())
        return false;
    // A go-back-N re-fetches WQEs from the oldest unacknowledged one: an operation that was
    // executed before is not executed again.
    const bool executed = uint16_t(q.req.started_limit - w.wqe_index - 1) < 0x8000;
    if (!executed) {
        xlate_status st;
        if (w.opcode == hw::WQE_OP_LOCAL_INV)
            st = xlate_->invalidate(w.imm, q.who, false, delay);
        else if (w.opcode == hw::WQE_OP_BIND_MW)
            st = xlate_->bind_mw(w.bind, q.who, delay);
        else
            st = xlate_->fast_register(w.freg, q.who, delay);
        if (st != xlate_status::ok) {
            // Memory management operation error: the WQE completes in error, the QP goes to Error.
            requester_error(q, hw::CQE_MW_BIND_ERR, w, delay, uint8_t(st));
            return true;
        }
    }
    complete_locally(q, w, delay);
    return true;
}

void transport_engine::free_entry(uint32_t e) {
    wqe_buffer_.release(e);
    if (!buffer_waiters_.empty()) {
        const uint32_t qpn = buffer_waiters_.front();
        buffer_waiters_.pop_front();
        qps_[qpn].req.buffer_wait = false;
        fetcher_->credit(qpn);
    }
}

void transport_engine::retire_head(qp& q, bool keep) {
    if (keep)
        detach_head(q);
    else
        release_head(q);
    q.req.cur_offset = 0;
    q.req.cur_sge = 0;
    q.req.cur_sge_off = 0;
    fetcher_->credit(q.qpn);
}

void transport_engine::requester_error(qp& q, uint8_t status, const send_wqe& w, sc_time& delay,
                                       uint8_t syndrome) {
    // Everything sent before this WQE is still awaiting its ACK; IBA orders completions, so
    // those are flushed behind this error (the QP is in Error: their fate is unknown).
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": WQE " << w.wqe_index << " fails with status "
                       << unsigned(status));
    const inflight f{
        w.wr_id, q.req.sq_psn, q.req.sq_psn, uint32_t(w.length), w.wqe_index, w.opcode, w.flags, NO_RD, 0};
    retire_head(q);
    send_completion(q, f, status, delay, syndrome);
    send_queue_failed(q, delay);  // C10-147, C10-152, o10-61: UC, UD and RD stop the send queue only
}

void transport_engine::wq_catastrophic_error(qp& q, sc_time& delay) {
    // IBA 11.6.3.1 Local Work Queue Catastrophic Error (C10-150 for UC, C10-155 for UD, and
    // RC alike): the HCA could not read the WQE, so it cannot complete it (its wr_id is unknown).
    // Processing halts: an affiliated QP_FATAL event, the QP to Error, and every outstanding
    // work request completes with WR_FLUSH_ERR (through CQs that are not in error).
    ++wq_catastrophic;
    post_event(q, hw::EQE_QP_FATAL, delay);
    retire_head(q);
    enter_error(q, delay);
}

}  // namespace hcasim
