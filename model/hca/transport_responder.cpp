// Transport engine, responder (RC): a packet from the P_Key checker (receive() dispatches
// responses to transport_reliability.cpp and UC/UD to transport_datagram.cpp), the PSN check,
// the opcode-sequence and length checks, RDMA WRITE placement, receive WQE consumption and
// scatter for SENDs, receive completions, ACK coalescing, ACKs and NAKs, duplicates, READ and
// atomic requests, and the response method that sends READ responses, atomic ACKs and ACKs
// queued behind them.
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
/// Responses a responder queues per QP: READ/atomic responses (beyond max_dest_rd_atomic they
/// wait their turn) with the ACKs between them.
constexpr size_t RESP_SLOTS = 2 * MAX_RD_ATOMIC + 2;
}  // namespace

// ---------------------------------------------------------------- a packet in

void transport_engine::receive(const rx_packet& p) {
    HCASIM_LOG(log_, debug,
               "receives opcode 0x" << std::hex << unsigned(p.h.b.opcode) << " for QP 0x" << p.h.b.dest_qp
                                    << std::dec << " PSN " << p.h.b.psn << " (" << p.wire_len << " bytes)");
    // The packet's receive buffer is on offer to the DMA writes of its payload for this call.
    struct lend {
        buffer_loan_ext*& at;
        ~lend() { at = nullptr; }
    } lent{rx_loan_ = p.loan};
    if (mcast_table::is_mlid(p.h.l.dlid)) {
        receive_mcast(p);
        return;
    }
    if ((p.h.b.opcode & op::TRANSPORT_MASK) == op::RD) {
        receive_rd(p);
        return;
    }
    const uint32_t qpn = p.h.b.dest_qp;
    if (qpn >= qps_.size() || !qps_[qpn].valid) {
        ++dropped_bad_qp;
        return;
    }
    qp& q = qps_[qpn];
    if (cc_ && cc_receive(q, p)) return;  // a CNP: it only slows the QP's flow
    const uint8_t tr = p.h.b.opcode & op::TRANSPORT_MASK;
    if ((q.transport == hw::QPT_UC && tr == op::UC) || (q.transport == hw::QPT_UD && tr == op::UD)) {
        // UC and UD receive in RTR, RTS, SQD and SQEr (C10-38); Reset, Init and Error drop.
        if (!(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD ||
              q.state == hw::QPS_SQE)) {
            ++dropped_bad_qp;
            return;
        }
        if (tr == op::UD) {
            handle_ud(q, p);
            return;
        }
        if (!q.rsp.comm_est) {
            q.rsp.comm_est = true;
            if (q.state == hw::QPS_RTR) {
                sc_time d = SC_ZERO_TIME;
                post_event(q, hw::EQE_COMM_EST, d);
            }
        }
        if (q.mig_state != hw::MIG_MIGRATED) apm_receive(q, p);
        handle_uc(q, p);
        return;
    }
    if (q.transport != hw::QPT_RC || tr != (q.xrc != qp::XRC_NONE ? op::XRC : op::RC)) {
        ++dropped_bad_qp;
        return;
    }
    if (q.mig_state != hw::MIG_MIGRATED) apm_receive(q, p);
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (code == op::ACKNOWLEDGE || code == op::ATOMIC_ACKNOWLEDGE || code == op::RDMA_READ_RESPONSE_FIRST ||
        code == op::RDMA_READ_RESPONSE_MIDDLE || code == op::RDMA_READ_RESPONSE_LAST ||
        code == op::RDMA_READ_RESPONSE_ONLY) {
        if (q.xrc == qp::XRC_TGT) {  // a target has no send queue: nothing awaits a response
            ++dropped_bad_qp;
            return;
        }
        handle_response(q, p);
        return;
    }
    // C10-23, C10-26, C10-41.2.1: requests to a QP in Reset, Init or Error are dropped; the
    // responder works in RTR, RTS and SQD. An XRC initiator has no responder (IBA 10.2.10).
    if (!(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD) ||
        q.xrc == qp::XRC_INI) {
        ++dropped_bad_qp;
        return;
    }
    if (!q.rsp.comm_est) {
        q.rsp.comm_est = true;
        if (q.state == hw::QPS_RTR) {  // the first packet in RTR: Communication Established
            sc_time d = SC_ZERO_TIME;
            post_event(q, hw::EQE_COMM_EST, d);
        }
    }
    handle_request(q, p);
}

// ---------------------------------------------------------------- RC requests: PSN check, placement, ACK

sc_time transport_engine::responder_start(qp& q, const sc_time& work) {
    // A packet's work starts rx_latency after it arrives, and no sooner than its receive unit
    // is free: rx_cycles (and a READ's or atomic's own cycles) after the unit's previous packet.
    const sc_time now = sim_now();
    sc_time& free = recv_free_.empty() ? q.rsp.resp_free : recv_free_[q.qpn % recv_free_.size()];
    sc_time delay = free > now ? free - now : SC_ZERO_TIME;
    delay = qp_context(q.qpn, delay);
    free = now + delay + rx_time_ + work;
    rx_busy_ps += rx_ps_;
    return delay + rx_latency_;
}

transport_engine::request_kind transport_engine::request_kind_of(uint8_t code) {
    request_kind k;
    k.send_first = code == op::SEND_FIRST || code == op::SEND_ONLY || code == op::SEND_ONLY_IMM ||
                   code == op::SEND_ONLY_INV;
    k.send_cont = code == op::SEND_MIDDLE || code == op::SEND_LAST || code == op::SEND_LAST_IMM ||
                  code == op::SEND_LAST_INV;
    k.inv = code == op::SEND_LAST_INV || code == op::SEND_ONLY_INV;
    k.write_first =
        code == op::RDMA_WRITE_FIRST || code == op::RDMA_WRITE_ONLY || code == op::RDMA_WRITE_ONLY_IMM;
    k.write_cont =
        code == op::RDMA_WRITE_MIDDLE || code == op::RDMA_WRITE_LAST || code == op::RDMA_WRITE_LAST_IMM;
    k.read = code == op::RDMA_READ_REQUEST;
    k.atomic = code == op::COMPARE_SWAP || code == op::FETCH_ADD;
    k.last = code == op::SEND_LAST || code == op::SEND_LAST_IMM || code == op::SEND_ONLY ||
             code == op::SEND_ONLY_IMM || k.inv || code == op::RDMA_WRITE_LAST ||
             code == op::RDMA_WRITE_LAST_IMM || code == op::RDMA_WRITE_ONLY ||
             code == op::RDMA_WRITE_ONLY_IMM;
    k.imm = code == op::SEND_LAST_IMM || code == op::SEND_ONLY_IMM || code == op::RDMA_WRITE_LAST_IMM ||
            code == op::RDMA_WRITE_ONLY_IMM;
    return k;
}

void transport_engine::handle_request(qp& q, const rx_packet& p) {
    const uint8_t code = p.h.b.opcode & 0x1F;
    const request_kind k = request_kind_of(code);
    if (probe_)  // the breakdown follows the message's last packet
        probe_->mark(path_probe::rx_engine, sim_now(), k.last || k.read || k.atomic);
    sc_time delay = responder_start(q, k.read ? read_time_ : k.atomic ? atomic_time_ : SC_ZERO_TIME);
    const uint32_t psn = p.h.b.psn;
    q.rsp.slid = p.h.l.slid;

    const uint32_t diff = (psn - q.rsp.rq_psn) & PSN_MASK;
    if (diff != 0) {
        if (diff >= 0x800000) {  // earlier PSN: a duplicate
            if (q.xrc == qp::XRC_TGT && (k.read || k.atomic)) {
                // A READ or atomic answered again is checked against its own SRQ's PD.
                const xrc_srq t = fetcher_->xrc_srq_of(p.h.x.srqn);
                if (t.xrcd && t.xrcd == q.xrcd) q.who.pd = t.pd;
            }
            handle_duplicate(q, p, delay);
        } else {  // a gap: NAK once, again only for a packet asking for an ACK (the NAK may be lost)
            ++seq_errors;
            if (!q.rsp.nak_pending || p.h.b.ack_req) {
                q.rsp.nak_pending = true;
                nak(q, wire::nak::PSN_SEQUENCE_ERROR, q.rsp.rq_psn, delay);
            }
        }
        return;
    }
    q.rsp.nak_pending = false;
    if (q.xrc == qp::XRC_TGT && !xrc_target(q, p, delay)) return;
    if (q.eec && !rd_target(q, p, delay)) return;

    const bool send_first = k.send_first, send_cont = k.send_cont, inv = k.inv, write_first = k.write_first,
               write_cont = k.write_cont, read = k.read, atomic = k.atomic, last = k.last, imm = k.imm;
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    // Opcode sequence (IBA 9.7.5.1.1): FIRST/ONLY, READ and atomics start a message, MIDDLE/LAST
    // continue one of the same kind; MIDDLE and FIRST carry exactly one MTU, LAST/ONLY at most one.
    const bool starts = send_first || write_first || read || atomic;
    const bool seq_ok = (starts && !q.rsp.in_send && !q.rsp.in_write) || (send_cont && q.rsp.in_send) ||
                        (write_cont && q.rsp.in_write);
    const bool len_ok = read || atomic || (last ? p.payload_len <= mtu : p.payload_len == mtu);
    if (!seq_ok || !len_ok || !(starts || send_cont || write_cont)) {
        // Out-of-sequence opcodes, bad lengths and unsupported requests: Invalid Request.
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return;
    }
    if (read || atomic) {
        if (read ? handle_read_request(q, p, delay) : handle_atomic(q, p, delay)) ++rx_packets;
        return;
    }

    if (send_first || send_cont) {
        // C10-81: each Send message consumes one receive WQE, taken at its first packet.
        if (send_first && !take_recv_wqe(q, delay)) {
            rnr_nak(q, psn, delay);
            return;
        }
        uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
        if (!scatter(q, p.payload, p.payload_len, delay, status, syndrome)) {
            // The receive WQE reports it (LOC_LEN: too small; LOC_PROT / LOC_QP_OP): the
            // requester learns Invalid Request or Remote Operational Error.
            receive_wqe_error(q,
                              status == hw::CQE_LOC_LEN_ERR ? wire::nak::INVALID_REQUEST
                                                            : wire::nak::REMOTE_OPERATIONAL_ERROR,
                              hw::CQE_OP_RECV, status, uint32_t(q.rsp.recv_offset), syndrome, psn, delay);
            return;
        }
        if (last && probe_) probe_->mark(path_probe::data_placed, sim_now() + delay);
        q.rsp.in_send = !last;
        if (last && inv) {
            // SEND with Invalidate (o10-37.2.21): the key is invalidated after the data is placed,
            // before the completion. If the invalidation is refused the key stays as it was, the
            // receive WQE completes with a memory management error and the QP goes to Error
            // (o10-37.2.24, .27, .39); the requester learns Remote Operational Error.
            const xlate_status st = xlate_->invalidate(p.h.ieth_rkey, q.who, true, delay);
            if (st != xlate_status::ok) {
                ++naks_sent;
                q.rsp.resp.clear();
                send_ack(q, wire::aeth_nak(wire::nak::REMOTE_OPERATIONAL_ERROR), psn, delay);
                q.rsp.have_rwqe = false;
                q.rsp.in_send = false;
                recv_completion(q, hw::CQE_OP_RECV, hw::CQE_MW_BIND_ERR, uint32_t(q.rsp.recv_offset),
                                p.h.ieth_rkey, 0, false, delay, uint8_t(st));
                enter_error(q, delay);  // the receive completion reports it: no async event
                return;
            }
        }
        if (last) {
            q.rsp.have_rwqe = false;
            q.rsp.msn = (q.rsp.msn + 1) & PSN_MASK;
            recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(q.rsp.recv_offset),
                            imm   ? p.h.immdt
                            : inv ? p.h.ieth_rkey
                                  : 0,
                            imm   ? hw::CQE_FLAG_WITH_IMM
                            : inv ? hw::CQE_FLAG_WITH_INV
                                  : 0,
                            p.h.b.se, delay);
        }
    } else {
        if (write_first) {
            if (!(q.access & hw::ACCESS_REMOTE_WRITE)) {
                responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
                return;
            }
            q.rsp.write_va = p.h.r.va;
            q.rsp.write_rkey = p.h.r.rkey;
            q.rsp.write_len = p.h.r.dma_len;
            q.rsp.write_done = 0;
        }
        if (q.rsp.write_done + p.payload_len > q.rsp.write_len ||
            (last && q.rsp.write_done + p.payload_len != q.rsp.write_len)) {
            responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
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
            xlate_->translate(q.rsp.write_rkey, q.who, q.rsp.write_va + q.rsp.write_done, p.payload_len,
                              hw::ACCESS_REMOTE_WRITE, segs, MAX_SEGS, nsegs, delay) != xlate_status::ok) {
            if (imm) {
                // The WRITE with immediate took a receive WQE: it reports the violation
                // (Local Access Error) and the requester learns Remote Access Error.
                receive_wqe_error(q, wire::nak::REMOTE_ACCESS_ERROR, hw::CQE_OP_RECV_RDMA_WITH_IMM,
                                  hw::CQE_LOC_ACCESS_ERR, 0, 0, psn, delay);
                return;
            }
            responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
            return;
        }
        if (!write_segs(segs, nsegs, p.payload, delay)) {
            // The page's translation points outside host memory (PCIe access error): the
            // requester learns Remote Operational Error.
            if (imm) {
                receive_wqe_error(q, wire::nak::REMOTE_OPERATIONAL_ERROR, hw::CQE_OP_RECV_RDMA_WITH_IMM,
                                  hw::CQE_LOC_QP_OP_ERR, 0, 0, psn, delay);
                return;
            }
            responder_error(q, wire::nak::REMOTE_OPERATIONAL_ERROR, psn, delay);
            return;
        }
        q.rsp.write_done += p.payload_len;
        q.rsp.in_write = !last;
        if (last && probe_) probe_->mark(path_probe::data_placed, sim_now() + delay);
        if (last) {
            q.rsp.msn = (q.rsp.msn + 1) & PSN_MASK;
            // C10-87: a WRITE without immediate completes nothing at the responder.
            if (imm) {
                q.rsp.have_rwqe = false;
                recv_completion(q, hw::CQE_OP_RECV_RDMA_WITH_IMM, hw::CQE_SUCCESS, uint32_t(q.rsp.write_len),
                                p.h.immdt, hw::CQE_FLAG_WITH_IMM, p.h.b.se, delay);
            }
        }
    }
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
    q.rsp.rq_psn = (q.rsp.rq_psn + 1) & PSN_MASK;
    acknowledge(q, psn, p.h.b.ack_req, delay);
}

bool transport_engine::write_segs(const phys_seg* segs, unsigned nsegs, const uint8_t* data, sc_time& delay) {
    for (unsigned k = 0; k < nsegs; ++k) {
        if (!dma.write(segs[k].pa, data, segs[k].len, delay, rx_loan_)) return false;
        data += segs[k].len;
    }
    return true;
}

// ---------------------------------------------------------------- ACKs and NAKs

void transport_engine::acknowledge(qp& q, uint32_t psn, bool ack_req, const sc_time& ready) {
    // CC: a request with FECN is acknowledged at once, whether it asked or not (Linux hfi1
    // sends the ACK carrying BECN without coalescing it).
    if (!ack_req && !q.rsp.becn_owed) return;
    if (q.rsp.becn_owed || ack_coalesce <= 1 || ++q.rsp.acks_owed >= ack_coalesce) {
        respond(q, wire::aeth_ack(31), psn, ready);
        return;
    }
    if (!q.rsp.ack_flush) {
        q.rsp.ack_flush = true;
        q.rsp.ack_flush_at = sim_now() + ready + coalesce_time_;
        watch(q, q.rsp.ack_flush_at);
    }
}

void transport_engine::respond(qp& q, uint8_t syndrome, uint32_t psn, const sc_time& ready) {
    q.rsp.acks_owed = 0;
    q.rsp.ack_flush = false;
    if (q.rsp.resp.empty()) {
        send_ack(q, syndrome, psn, ready);
        return;
    }
    // Behind queued READ/atomic responses: an ACK must not overtake them (it would tell the
    // requester they are done). A later ACK replaces a queued one.
    resp_job& tail = q.rsp.resp.back();
    resp_job* j = tail.kind == resp_kind::ack ? &tail : push_resp(q);
    if (!j) return;  // queue full of responses: the requester's timer recovers
    j->kind = resp_kind::ack;
    j->syndrome = syndrome;
    j->psn = psn;
    j->at = sim_now() + ready;
}

void transport_engine::send_ack(qp& q, uint8_t syndrome, uint32_t psn, const sc_time& ready) {
    wire::headers h;
    build_bth_lrh(q, h, op::RC_ACKNOWLEDGE, psn);
    h.l.dlid = q.rsp.slid ? q.rsp.slid : q.dlid;
    h.a.syndrome = syndrome;
    h.a.msn = q.rsp.msn & PSN_MASK;
    h.b.becn = cc_take_becn(q);
    const size_t hdr = wire::encode_headers(h, 0, ack_pkt_->bytes);
    port_->transmit(ack_pkt_, uint32_t(hdr), ready);
    if (wire::aeth_type_of(syndrome) == wire::aeth_type::ack) ++acks_sent;
}

namespace {
/// The NAK codes' names (IBA 9.7.5.2.4), for log lines.
const char* nak_name(uint8_t code) {
    switch (code) {
    case wire::nak::PSN_SEQUENCE_ERROR: return "PSN sequence error";
    case wire::nak::INVALID_REQUEST: return "invalid request";
    case wire::nak::REMOTE_ACCESS_ERROR: return "remote access error";
    case wire::nak::REMOTE_OPERATIONAL_ERROR: return "remote operational error";
    default: return "reserved code";
    }
}
}  // namespace

void transport_engine::nak(qp& q, uint8_t code, uint32_t psn, const sc_time& ready) {
    ++naks_sent;
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": NAK (" << nak_name(code) << ") at PSN " << psn);
    respond(q, wire::aeth_nak(code), psn, ready);
}

void transport_engine::rnr_nak(qp& q, uint32_t psn, const sc_time& ready) {
    ++rnr_naks_sent;
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": RNR NAK at PSN " << psn << " (no receive WQE)");
    // The requester resends from this PSN after the timer; the packets it sent meanwhile are
    // out of sequence and dropped without a further NAK.
    q.rsp.nak_pending = true;
    respond(q, wire::aeth_rnr_nak(q.min_rnr_timer), psn, ready);
}

void transport_engine::receive_wqe_error(qp& q, uint8_t nak_code, uint8_t opcode, uint8_t status,
                                         uint32_t byte_len, uint8_t syndrome, uint32_t psn, sc_time& delay) {
    // The NAK goes out at once (queued responses die with the QP), the receive WQE the message
    // took completes in error, then the QP enters Error.
    ++naks_sent;
    q.rsp.resp.clear();
    send_ack(q, wire::aeth_nak(nak_code), psn, delay);
    q.rsp.have_rwqe = false;
    recv_completion(q, opcode, status, byte_len, 0, 0, false, delay, syndrome);
    if (q.xrc == qp::XRC_TGT || q.eec) {
        // o10-66.1.4, o10-62, o10-63: a completion error leaves an XRC target's or an EE
        // context's state alone (the WQE was the
        // SRQ's; the initiator learns of it from the NAK). The rest of the message is dropped:
        // its PSNs are not expected, and the NAK is not repeated for them.
        q.rsp.in_send = q.rsp.in_write = false;
        q.rsp.recv_offset = 0;
        q.rsp.nak_pending = true;
        return;
    }
    enter_error(q, delay);
}

bool transport_engine::xrc_target(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t srqn = p.h.x.srqn;
    const xrc_srq t = fetcher_->xrc_srq_of(srqn);
    // IBA 10.2.10: processed only if the SRQ is in the target's XRC domain; a message keeps the
    // SRQ its first packet named (its receive WQE is that SRQ's).
    const bool mid_message = q.rsp.in_send || q.rsp.in_write;
    if (t.xrcd == 0 || t.xrcd != q.xrcd || (mid_message && q.srqn != srqn + 1)) {
        HCASIM_LOG(log_, info,
                   "XRC target QP 0x" << std::hex << q.qpn << ": XRCETH names SRQ 0x" << srqn << std::dec
                                      << (t.xrcd == 0        ? ", not an XRC SRQ"
                                          : t.xrcd != q.xrcd ? ", of another XRC domain"
                                                             : ", not the SRQ of the message under way"));
        responder_error(q, wire::nak::INVALID_REQUEST, p.h.b.psn, delay);
        return false;
    }
    q.srqn = srqn + 1;
    q.who.pd = q.recv_who.pd = t.pd;  // every access of the message checks the SRQ's PD
    q.recv_cqn = t.cqn;
    return true;
}

void transport_engine::responder_error(qp& q, uint8_t nak_code, uint32_t psn, sc_time& delay) {
    // The NAK goes out at once (queued responses die with the QP), then the QP enters Error.
    // An error no receive completion reports raises an affiliated event (IBA 10.10.3.1).
    ++naks_sent;
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": NAK (" << nak_name(nak_code) << ")"
                       << " at PSN " << psn << "; the QP goes to Error");
    q.rsp.resp.clear();
    send_ack(q, wire::aeth_nak(nak_code), psn, delay);
    if (q.eec && nak_code == wire::nak::REMOTE_ACCESS_ERROR) {
        // An access violation is the RD QP's request, not the EE context's (o10-65): the EE
        // context goes on; the rest of the message is dropped (the NAK stops its sender).
        q.rsp.in_send = q.rsp.in_write = false;
        q.rsp.recv_offset = 0;
        q.rsp.nak_pending = true;
        return;
    }
    post_event(q, nak_code == wire::nak::REMOTE_ACCESS_ERROR ? hw::EQE_QP_ACCESS_ERR : hw::EQE_QP_REQ_ERR,
               delay);
    enter_error(q, delay);  // an EE context's own error (o10-65): the EE context to Error
}

// ---------------------------------------------------------------- receive WQEs, scatter, receive completions

bool transport_engine::take_recv_wqe(qp& q, sc_time& delay) {
    if (q.rsp.have_rwqe) return true;
    if (q.srqn) {
        // o10-53.2.1: the SRQ's next WQE, whichever of its QPs the message arrived at.
        const wqe_fetcher::srq_outcome r = fetcher_->take_srq(q.srqn - 1, rwqe(q), delay);
        if (r.limit_reached) {
            ++srq_events;
            cqw_->post_event(hw::EQE_SRQ_LIMIT, q.srqn - 1, delay);
        }
        if (r.entered_error) {
            ++srq_events;
            cqw_->post_event(hw::EQE_SRQ_ERROR, q.srqn - 1, delay);
        }
        if (r.result != wqe_fetcher::srq_take::ok) return false;
        q.rsp.have_rwqe = true;
        q.rsp.recv_offset = 0;
        return true;
    }
    qp& r = rq_of(q);  // an EE context takes the WQE from its message's RD QP
    if (r.rsp.rq_consumer == r.rsp.rq_producer) return false;
    recv_at(r, r.rsp.rq_consumer, rwqe(q), delay);
    ++r.rsp.rq_consumer;
    q.rsp.have_rwqe = true;
    q.rsp.recv_offset = 0;
    prefetch_recv(r, delay);
    return true;
}

void transport_engine::recv_at(qp& q, uint16_t index, recv_wqe& out, sc_time& delay) {
    if (q.rsp.rq_cache.empty()) {
        q.rsp.rq_cache.resize(rq_prefetch);
        q.rsp.rq_ready.resize(rq_prefetch);
    }
    const size_t slot = index % q.rsp.rq_cache.size();
    if (uint16_t(q.rsp.rq_fetched - index) != 0 &&
        uint16_t(q.rsp.rq_fetched - index) <= q.rsp.rq_cache.size()) {
        out = q.rsp.rq_cache[slot];
        const sc_time now = sim_now();
        if (q.rsp.rq_ready[slot] > now + delay)
            delay = q.rsp.rq_ready[slot] - now;  // the prefetch is still in flight
        return;
    }
    fetcher_->fetch_recv(q.qpn, index, out, delay);
    if (q.rsp.rq_fetched == index) ++q.rsp.rq_fetched;
}

void transport_engine::prefetch_recv(qp& q, const sc_time& delay) {
    if (q.rsp.rq_cache.empty()) {
        q.rsp.rq_cache.resize(rq_prefetch);
        q.rsp.rq_ready.resize(rq_prefetch);
    }
    if (uint16_t(q.rsp.rq_fetched - q.rsp.rq_consumer) > q.rsp.rq_cache.size())
        q.rsp.rq_fetched = q.rsp.rq_consumer;  // consumed past the read-ahead (fetched on demand)
    while (q.rsp.rq_fetched != q.rsp.rq_producer &&
           uint16_t(q.rsp.rq_fetched - q.rsp.rq_consumer) < q.rsp.rq_cache.size()) {
        const size_t slot = q.rsp.rq_fetched % q.rsp.rq_cache.size();
        sc_time t = delay;
        fetcher_->fetch_recv(q.qpn, q.rsp.rq_fetched, q.rsp.rq_cache[slot], t);
        q.rsp.rq_ready[slot] = sim_now() + t;
        ++q.rsp.rq_fetched;
    }
}

void transport_engine::rq_posted(uint32_t qpn, uint16_t producer) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp& q = qps_[qpn];
    if (q.srqn) return;  // its receive WQEs come from the SRQ (firmware refuses posts to it, o10-51.2.2)
    q.rsp.rq_producer = producer;
    sc_time delay = SC_ZERO_TIME;
    if (q.state == hw::QPS_ERR)  // C10-97.2.1: receives posted in Error complete in error
        flush(q, delay);
    else if (q.state != hw::QPS_RESET)
        prefetch_recv(q, delay);
}

bool transport_engine::scatter(qp& q, const uint8_t* data, uint32_t len, sc_time& delay, uint8_t& status,
                               uint8_t& syndrome) {
    if (rwqe(q).malformed) {
        status = hw::CQE_LOC_QP_OP_ERR;
        return false;
    }
    if (q.rsp.recv_offset + len > rwqe(q).capacity) {
        status = hw::CQE_LOC_LEN_ERR;
        return false;
    }
    if (!write_sges(q.recv_who, rwqe(q).sg, rwqe(q).num_sge, q.rsp.recv_offset, data, len, delay, status,
                    syndrome))
        return false;
    q.rsp.recv_offset += len;
    return true;
}

bool transport_engine::write_sges(const xlate_owner& who, const sge* sg, unsigned num_sge, uint64_t offset,
                                  const uint8_t* data, uint32_t len, sc_time& delay, uint8_t& status,
                                  uint8_t& syndrome) {
    uint64_t skip = offset;
    unsigned i = 0;
    while (i < num_sge && skip >= sg[i].len) skip -= sg[i++].len;
    uint32_t left = len;
    while (left) {
        if (i >= num_sge) {
            status = hw::CQE_LOC_LEN_ERR;
            return false;
        }
        const sge& s = sg[i];
        const uint32_t take = uint32_t(std::min<uint64_t>(left, s.len - skip));
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        const xlate_status st = xlate_->translate(s.lkey, who, s.addr + skip, take, hw::ACCESS_LOCAL_WRITE,
                                                  segs, MAX_SEGS, nsegs, delay);
        if (st != xlate_status::ok) {
            status = hw::CQE_LOC_PROT_ERR;
            syndrome = uint8_t(st);
            return false;
        }
        if (!write_segs(segs, nsegs, data, delay)) {
            status = hw::CQE_LOC_QP_OP_ERR;  // a page outside host memory (PCIe access error)
            return false;
        }
        for (unsigned k = 0; k < nsegs; ++k) data += segs[k].len;
        left -= take;
        skip = 0;
        ++i;
    }
    return true;
}

void transport_engine::recv_completion(qp& q, uint8_t opcode, uint8_t status, uint32_t byte_len, uint32_t imm,
                                       uint8_t flags, bool solicited, sc_time& delay, uint8_t syndrome,
                                       const recv_src* src) {
    hw::cqe e{};
    e.wr_id = rwqe(q).wr_id;
    e.status = status;
    e.opcode = opcode;
    e.byte_len = byte_len;
    e.imm = imm;
    e.flags = flags;
    e.qpn = q.eec ? q.rq_owner : q.qpn;
    e.xrc_srqn = q.xrc == qp::XRC_TGT ? q.srqn : 0;
    e.src_qp = src ? src->src_qp : q.eec ? q.rd_peer_qp : q.dest_qpn;
    e.slid = src ? src->slid : q.rsp.slid;
    e.sl = src ? src->sl : q.sl;
    if (src) e.dlid_path_bits = src->path_bits;
    // QP1 (GSI) reports the entry the P_Key checker matched; other QPs their own index.
    e.pkey_index = src && q.qpn == pkey_checker::GSI_QPN ? src->pkey_index : q.pkey_index;
    e.wqe_counter = rwqe(q).wqe_index;
    e.vendor_err = syndrome;
    if (cqw_->complete(q.recv_cqn, e, solicited, delay)) ++recv_completions;
    if (status == hw::CQE_WR_FLUSH_ERR)
        ++flushed;
    else if (status != hw::CQE_SUCCESS)
        ++error_completions;
}

// ---------------------------------------------------------------- duplicates, READ and atomic requests

void transport_engine::handle_duplicate(qp& q, const rx_packet& p, const sc_time& delay) {
    ++duplicates;
    const uint8_t code = p.h.b.opcode & 0x1F;
    sc_time d = delay;
    // IBA 9.7.5: a duplicate READ or atomic is answered again. If its request's responses
    // are still queued (the requester went back before they were all sent) that job starts
    // again from the duplicate's PSN; a duplicate never takes a second READ/atomic resource,
    // so however often the requester goes back the queue holds one job per request.
    bool fresh = false;
    if (code == op::RDMA_READ_REQUEST) {
        // Re-execute: the requester lost (some of) the responses; it asks again from this PSN.
        const uint64_t len = p.h.r.dma_len;
        if (!(q.access & hw::ACCESS_REMOTE_READ) || p.payload_len || len > 0x80000000ull ||
            (len &&
             xlate_->check(p.h.r.rkey, q.who, p.h.r.va, len, hw::ACCESS_REMOTE_READ, d) != xlate_status::ok))
            return;
        const uint32_t mtu = hw::mtu_bytes(q.mtu);
        const uint32_t npkts = len ? uint32_t((len + mtu - 1) / mtu) : 1u;
        resp_job* j = duplicate_job(q, p.h.b.psn, (p.h.b.psn + npkts) & PSN_MASK, fresh);
        if (!j) return;
        j->kind = resp_kind::read;
        j->psn = p.h.b.psn;
        j->va = p.h.r.va;
        j->rkey = p.h.r.rkey;
        j->left = uint32_t(len);
        j->first = true;
        j->at = sim_now() + d;
        if (fresh) {
            j->msn = q.rsp.msn;
            ++q.rsp.resp_rd;
        }
        return;
    }
    if (code == op::COMPARE_SWAP || code == op::FETCH_ADD) {
        // Never executed twice: the result kept for that PSN is sent again.
        for (const atomic_replay& r : q.rsp.replay) {
            if (r.valid && r.psn == p.h.b.psn) {
                resp_job* j = duplicate_job(q, r.psn, (r.psn + 1) & PSN_MASK, fresh);
                if (!j || !fresh) return;  // full, or its response is still queued
                ++atomic_replays;
                j->kind = resp_kind::atomic;
                j->psn = r.psn;
                j->msn = q.rsp.msn;
                j->orig = r.orig;
                j->at = sim_now() + d;
                ++q.rsp.resp_rd;
                return;
            }
        }
        return;  // older than the replay history: dropped (the requester's retries fail)
    }
    // SEND / WRITE: already placed; acknowledge what we have.
    if (p.h.b.ack_req) respond(q, wire::aeth_ack(31), (q.rsp.rq_psn - 1) & PSN_MASK, d);
}

transport_engine::resp_job* transport_engine::duplicate_job(qp& q, uint32_t psn, uint32_t end, bool& fresh) {
    // Jobs are in PSN order; duplicates may arrive in any order (reordered on the cable).
    size_t k = 0;
    for (; k < q.rsp.resp.size(); ++k) {
        resp_job& j = q.rsp.resp[k];
        if (j.kind != resp_kind::ack && psn_le(j.req_psn, psn) && psn_lt(psn, j.end_psn)) {
            fresh = false;
            return &j;
        }
        if (psn_lt(psn, j.psn)) break;
    }
    if (!push_resp(q)) return nullptr;
    for (size_t m = q.rsp.resp.size() - 1; m > k; --m) q.rsp.resp[m] = q.rsp.resp[m - 1];
    resp_job& j = q.rsp.resp[k];
    j = resp_job{};
    j.req_psn = psn;
    j.end_psn = end;
    fresh = true;
    return &j;
}

bool transport_engine::handle_read_request(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    const uint64_t len = p.h.r.dma_len;
    if (p.payload_len || len > 0x80000000ull || q.max_dest_rd_atomic == 0) {
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    if (!(q.access & hw::ACCESS_REMOTE_READ) ||
        (len && xlate_->check(p.h.r.rkey, q.who, p.h.r.va, len, hw::ACCESS_REMOTE_READ, delay) !=
                    xlate_status::ok)) {
        responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
        return false;
    }
    // Beyond max_dest_rd_atomic a READ waits in the queue behind the earlier ones; a requester
    // that overruns even the queue is in violation (invalid request).
    resp_job* j = q.rsp.resp_rd < 2 * MAX_RD_ATOMIC ? push_resp(q) : nullptr;
    if (!j) {
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const uint32_t npkts = len ? uint32_t((len + mtu - 1) / mtu) : 1u;
    q.rsp.msn = (q.rsp.msn + 1) & PSN_MASK;
    q.rsp.acks_owed = 0;  // the response acknowledges everything before it
    q.rsp.ack_flush = false;
    j->kind = resp_kind::read;
    j->psn = psn;
    j->req_psn = psn;
    j->end_psn = (psn + npkts) & PSN_MASK;
    j->msn = q.rsp.msn;
    j->va = p.h.r.va;
    j->rkey = p.h.r.rkey;
    j->left = uint32_t(len);
    j->at = sim_now() + delay;
    ++q.rsp.resp_rd;
    q.rsp.rq_psn = (q.rsp.rq_psn + npkts) & PSN_MASK;  // C10-85: no receive WQE consumed
    return true;
}

bool transport_engine::handle_atomic(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    const uint64_t va = p.h.ae.va;
    if (p.payload_len || (va & 7) || q.max_dest_rd_atomic == 0) {  // o10-43: 8-byte aligned only
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    phys_seg seg[1];
    unsigned nsegs = 0;
    if (!(q.access & hw::ACCESS_REMOTE_ATOMIC) ||
        xlate_->translate(p.h.ae.rkey, q.who, va, 8, hw::ACCESS_REMOTE_ATOMIC, seg, 1, nsegs, delay) !=
            xlate_status::ok) {
        responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
        return false;
    }
    resp_job* j = q.rsp.resp_rd < 2 * MAX_RD_ATOMIC ? push_resp(q) : nullptr;
    if (!j) {
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    // o10-48: executed as one read-modify-write at host memory; one HCA issues them one at a
    // time, so atomics on the same memory are serialised.
    uint64_t orig = 0;
    const auto kind =
        (p.h.b.opcode & 0x1F) == op::COMPARE_SWAP ? atomic_ext::compare_swap : atomic_ext::fetch_add;
    const sc_time now = sim_now();
    for (const atomic_busy& b : atomic_busy_)
        if (b.pa == seg[0].pa && b.until > now + delay)
            delay = b.until - now;  // waits for the previous atomic on this word
    if (!dma.atomic(seg[0].pa, kind, p.h.ae.compare, p.h.ae.swap_add, orig, delay)) {
        q.rsp.resp.pop_back();
        responder_error(q, wire::nak::REMOTE_OPERATIONAL_ERROR, psn, delay);
        return false;
    }
    ++atomics_executed;
    atomic_busy_[atomic_next_] = atomic_busy{seg[0].pa, now + delay};
    atomic_next_ = (atomic_next_ + 1) % MAX_RD_ATOMIC;
    if (q.rsp.replay.empty()) q.rsp.replay.resize(std::max<size_t>(1, q.max_dest_rd_atomic));
    atomic_replay& r = q.rsp.replay[q.rsp.replay_next];
    q.rsp.replay_next = (q.rsp.replay_next + 1) % q.rsp.replay.size();
    r = atomic_replay{true, psn, orig};
    q.rsp.msn = (q.rsp.msn + 1) & PSN_MASK;
    q.rsp.acks_owed = 0;
    q.rsp.ack_flush = false;
    j->kind = resp_kind::atomic;
    j->psn = psn;
    j->req_psn = psn;
    j->end_psn = (psn + 1) & PSN_MASK;
    j->msn = q.rsp.msn;
    j->orig = orig;
    j->at = sim_now() + delay;
    ++q.rsp.resp_rd;
    q.rsp.rq_psn = (q.rsp.rq_psn + 1) & PSN_MASK;
    return true;
}

// ---------------------------------------------------------------- the response method

transport_engine::resp_job* transport_engine::push_resp(qp& q) {
    if (q.rsp.resp.full()) {
        if (q.rsp.resp.slots() >= RESP_SLOTS) return nullptr;
        q.rsp.resp.grow(std::min(RESP_SLOTS, std::max<size_t>(2, 2 * q.rsp.resp.slots())));
    }
    resp_job& j = q.rsp.resp.slot(q.rsp.resp.push());
    j = resp_job{};
    make_resp_ready(q.qpn);
    return &j;
}

void transport_engine::make_resp_ready(uint32_t qpn) {
    qp& q = qps_[qpn];
    if (q.resp_ready) return;
    q.resp_ready = true;
    resp_ready_.push_back(qpn, sim_now(), turn_order{qps_, &qp::resp_turn});
    resp_work_.notify(SC_ZERO_TIME);
}

// An SC_METHOD, like the requester: it returns with next_trigger() where it must wait.
void transport_engine::response_method() {
    for (;;) {
        uint32_t qpn;
        if (resume_resp_qpn_ != NIL) {
            qpn = resume_resp_qpn_;  // back from a wait for the port
            resume_resp_qpn_ = NIL;
            qp& q = qps_[qpn];
            if (!q.valid || q.rsp.resp.empty() || q.state == hw::QPS_ERR) {
                if (q.valid && !q.rsp.resp.empty() && q.state != hw::QPS_ERR) make_resp_ready(qpn);
                continue;
            }
        } else {
            if (resp_ready_.empty()) {
                next_trigger(resp_work_);
                return;
            }
            qpn = resp_ready_.front();
            resp_ready_.pop_front();
            qp& q = qps_[qpn];
            q.resp_ready = false;
            if (!q.valid || q.rsp.resp.empty() || q.state == hw::QPS_ERR || q.state == hw::QPS_RESET) {
                if (q.valid) q.rsp.resp.clear();
                continue;
            }
            if (resp_lanes_.lanes && resp_lanes_.holds(port_->tx_lane(q.sl))) {
                wait_lane(resp_lanes_, q);  // behind the QPs already waiting for its VL
                continue;
            }
            const sc_time bp = port_->tx_backpressure(q.sl);
            if (bp != SC_ZERO_TIME) {
                if (tx_blocked(bp) && port_->tx_lanes() > 1) {  // only this QP's VL waits
                    ++stall_credit;
                    wait_lane(resp_lanes_, q);
                    continue;
                }
                resume_resp_qpn_ = qpn;
                if (tx_blocked(bp)) {
                    ++stall_credit;
                    next_trigger(port_->tx_unblocked());
                } else {
                    next_trigger(bp);
                }
                return;
            }
        }
        qp& q = qps_[qpn];
        send_response(q);
        q.resp_turn = ++resp_turns_;
        if (q.valid && !q.rsp.resp.empty()) make_resp_ready(qpn);
        resp_busy_ps += rx_ps_;
        if (rx_time_ != SC_ZERO_TIME) {
            next_trigger(rx_time_);
            return;
        }
    }
}

void transport_engine::send_response(qp& q) {
    resp_job& j = q.rsp.resp.front();
    const sc_time now = sim_now();
    sc_time delay = j.at > now ? j.at - now : SC_ZERO_TIME;
    auto pop = [&q] { q.rsp.resp.pop_front(); };
    if (j.kind == resp_kind::ack) {
        const uint8_t syndrome = j.syndrome;
        const uint32_t psn = j.psn;
        pop();
        send_ack(q, syndrome, psn, delay);
        return;
    }
    wire::headers h;
    if (j.kind == resp_kind::atomic) {
        build_bth_lrh(q, h, op::RC_ATOMIC_ACKNOWLEDGE, j.psn);
        h.l.dlid = q.rsp.slid ? q.rsp.slid : q.dlid;
        h.a.syndrome = wire::aeth_ack(31);
        h.a.msn = j.msn;
        h.aae.orig_data = j.orig;
        h.b.becn = cc_take_becn(q);
        const size_t hdr = wire::encode_headers(h, 0, resp_pkt_->bytes);
        const sc_time sent = port_->transmit(resp_pkt_, uint32_t(hdr), delay);
        if (probe_) probe_->mark(path_probe::resp_sent, sim_now() + sent);
        --q.rsp.resp_rd;
        pop();
        return;
    }
    // READ response: the next MTU of the requested range, read from host memory now.
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const uint32_t n = std::min(j.left, mtu);
    const bool last = j.left <= mtu;
    const uint8_t opcode = j.first && last ? op::RC_RDMA_READ_RESPONSE_ONLY
                           : j.first       ? op::RC_RDMA_READ_RESPONSE_FIRST
                           : last          ? op::RC_RDMA_READ_RESPONSE_LAST
                                           : op::RC_RDMA_READ_RESPONSE_MIDDLE;
    build_bth_lrh(q, h, opcode, j.psn);
    h.l.dlid = q.rsp.slid ? q.rsp.slid : q.dlid;
    h.a.syndrome = wire::aeth_ack(31);
    h.a.msn = j.msn;
    h.b.becn = cc_take_becn(q);
    const size_t hdr = wire::encode_headers(h, n, resp_pkt_->bytes);
    sc_time ready = delay;
    if (n) {
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (xlate_->translate(j.rkey, q.who, j.va, n, hw::ACCESS_REMOTE_READ, segs, MAX_SEGS, nsegs, delay) !=
            xlate_status::ok) {
            // The region changed under the READ (deregistered, pages gone): NAK, Error.
            const uint32_t psn = j.psn;
            responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
            return;
        }
        uint8_t* dst = resp_pkt_->bytes + hdr;
        for (unsigned k = 0; k < nsegs; ++k) {
            sc_time t = delay;
            if (!dma.read(segs[k].pa, dst, segs[k].len, t)) {
                // A page outside host memory (PCIe access error): NAK, Error.
                const uint32_t psn = j.psn;
                responder_error(q, wire::nak::REMOTE_OPERATIONAL_ERROR, psn, delay);
                return;
            }
            if (t > ready) ready = t;
            dst += segs[k].len;
        }
    }
    const uint32_t pad = (4 - n % 4) % 4;
    std::memset(resp_pkt_->bytes + hdr + n, 0, pad);
    const sc_time sent = port_->transmit(resp_pkt_, uint32_t(hdr + n + pad), ready);
    if (last && probe_) probe_->mark(path_probe::resp_sent, sim_now() + sent);
    ++read_responses_sent;
    j.va += n;
    j.left -= n;
    j.psn = (j.psn + 1) & PSN_MASK;
    j.first = false;
    if (last) {
        --q.rsp.resp_rd;
        pop();
    }
}

}  // namespace hcasim
