// Reliable datagram (IBA 10.2.2.2, 10.2.7, 10.2.8, 10.3.1): EE contexts and the RD QPs that send
// through them.
//
// An EE context is a record of the engine's own (after the QPs'), loaded by CREATE/MODIFY_EEC:
// the path (DLID, SL, MTU, P_Key), the remote EE context, the PSNs and the reliability attributes.
// An RD QP's WQE names an EE context, a destination QP and a Q_Key. The RD QP runs the message as
// an RC requester would (segmentation, READ/atomic, ACK window, go back N, timeouts, RNR waits)
// with the EE context's path and PSNs: at the message's start it owns the EE context (a QP whose
// message is on it already keeps it; the others wait, in order), and when the message is
// acknowledged the EE context takes the next PSN back and passes to the next waiting QP. One
// message at a time on an EE context (IBA 9.7.1) and, in this model, on an RD QP. A message that
// fails after sending packets leaves the far end somewhere in them: the EE context then owes a
// RESYNC, which the next owner sends (and waits for its ACK) before its message starts.
//
// At the far end the packet's RDETH names the EE context: it checks the PSN, acknowledges and
// answers as an RC responder, and for each message checks the RD QP its BTH names (state,
// domain, Q_Key) and places the message with that QP's receive queue, PD and receive CQ. What
// the EE context sends carries RD opcodes with the RDETH of its peer; requests carry a DETH. A
// RESYNC sets the expected PSN past it and drops the message in progress.
#include <systemc>

#include <algorithm>

#include "model/core/sim_time.h"
#include "model/hca/cq_writer.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/psn.h"
#include "model/hca/transport_engine.h"
#include "model/hca/wqe_fetcher.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim {

using namespace sc_core;
namespace op = wire::op;

// ---------------------------------------------------------------- EE contexts (command unit)

void transport_engine::load_eec(const hw::eec_context& c, uint32_t mask, sc_time& delay) {
    if (c.eecn >= max_eecs_) return;
    const uint32_t idx = eec_base_ + c.eecn;
    qp& e = qps_.create(idx);
    const uint8_t prev = e.valid ? e.state : uint8_t(hw::QPS_RESET);
    if (!e.valid || c.state == hw::QPS_RESET) {
        const uint32_t owner = e.rd_owner;
        reset_qp(e, idx);
        e.valid = true;
        if (owner != NIL) qps_[owner].rd_eec = NIL;  // its message is lost with the context
    }
    e.eec = true;
    e.transport = hw::QPT_RC;
    e.rdd = c.rdd;
    e.mtu = c.mtu;
    e.sl = c.sl;
    e.dlid = c.dlid;
    e.src_path_bits = c.src_path_bits;
    e.pkey_index = c.pkey_index;
    // Automatic path migration (o10-23; transport_apm.cpp): as a QP's (load_qp).
    e.alt = {c.alt_dlid, c.alt_pkey_index, c.alt_sl, c.alt_src_path_bits, c.alt_timeout};
    if (mask & (hw::QP_ATTR_ALT_PATH | hw::QP_ATTR_PATH_MIG_STATE)) e.mig_err_raised = false;
    const uint8_t prev_mig = e.mig_state;
    e.mig_state = c.path_mig_state;
    e.dest_qpn = c.dest_eecn;  // what it sends carries its peer's number in the RDETH
    e.retry_cnt = c.retry_cnt;
    e.rnr_retry = c.rnr_retry;
    e.min_rnr_timer = c.min_rnr_timer;
    e.timeout = c.timeout;
    e.max_rd_atomic = uint8_t(std::min<unsigned>(c.max_rd_atomic, MAX_RD_ATOMIC));
    e.max_dest_rd_atomic = uint8_t(std::min<unsigned>(c.max_dest_rd_atomic, MAX_RD_ATOMIC));
    if (!e.rsp.replay.empty() && e.rsp.replay.size() < std::max<size_t>(1, e.max_dest_rd_atomic))
        e.rsp.replay.resize(std::max<size_t>(1, e.max_dest_rd_atomic));
    if (mask & hw::QP_ATTR_RQ_PSN) e.rsp.rq_psn = c.rq_psn & PSN_MASK;
    if (mask & hw::QP_ATTR_SQ_PSN) e.req.sq_psn = c.sq_psn & PSN_MASK;
    e.state = c.state;
    if (e.rd_owner != NIL) rd_path(qps_[e.rd_owner]);
    // Manual migration (Modify EEC Armed -> Migrated; the firmware checked RTS/SQD).
    if (prev_mig == hw::MIG_ARMED && c.path_mig_state == hw::MIG_MIGRATED &&
        (mask & hw::QP_ATTR_PATH_MIG_STATE)) {
        e.mig_state = hw::MIG_ARMED;
        migrate(e, delay);
    }
    if (c.state == hw::QPS_ERR && prev != hw::QPS_ERR) {
        // o10-65: the EE context stops; a message on it fails (its QP's send queue stops,
        // o10-21), and the responder's message in progress completes in error.
        if (e.rd_owner != NIL) {
            qp& q = qps_[e.rd_owner];
            fail_head(q, hw::CQE_WR_FLUSH_ERR, delay);
        }
        enter_error(e, delay);
    }
    // A QP waiting for the EE context to leave SQD (o10-20), or to find it in Error, goes on.
    if (c.state != hw::QPS_SQD) {
        while (!e.rd_waiters.empty()) {
            const uint32_t qpn = e.rd_waiters.front();
            e.rd_waiters.pop_front();
            qps_[qpn].rd_waiting = false;
            if (qps_[qpn].valid && qps_[qpn].req.queue.count) make_tx_ready(qpn);
        }
    }
}

void transport_engine::destroy_eec(uint32_t eecn) {
    if (eecn >= max_eecs_ || !qps_.allocated(eec_base_ + eecn)) return;
    qp& e = qps_[eec_base_ + eecn];
    if (e.rd_owner != NIL) {  // the message on it cannot finish: it fails, its send queue stops
        sc_time delay = SC_ZERO_TIME;
        fail_head(qps_[e.rd_owner], hw::CQE_WR_FLUSH_ERR, delay);
    }
    reset_qp(e, eec_base_ + eecn);
}

uint8_t transport_engine::eec_state(uint32_t eecn) const {
    if (eecn >= max_eecs_) return hw::QPS_RESET;
    const qp& e = qps_[eec_base_ + eecn];
    return e.valid ? e.state : uint8_t(hw::QPS_RESET);
}

void transport_engine::eec_psns(uint32_t eecn, uint32_t& sq_psn, uint32_t& rq_psn) const {
    sq_psn = rq_psn = 0;
    if (eecn >= max_eecs_) return;
    const qp& e = qps_[eec_base_ + eecn];
    // A message on it numbers its packets from the EE context's PSN: the QP holds the count.
    sq_psn = e.rd_owner != NIL ? qps_[e.rd_owner].req.sq_psn : e.req.sq_psn;
    rq_psn = e.rsp.rq_psn;
}

void transport_engine::eec_paths(uint32_t eecn, hw::eec_context& c) const {
    if (eecn >= max_eecs_) return;
    const qp& e = qps_[eec_base_ + eecn];
    if (!e.valid) return;
    c.dlid = e.dlid;
    c.sl = e.sl;
    c.src_path_bits = e.src_path_bits;
    c.pkey_index = e.pkey_index;
    c.timeout = e.timeout;
    c.alt_dlid = e.alt.dlid;
    c.alt_sl = e.alt.sl;
    c.alt_src_path_bits = e.alt.src_path_bits;
    c.alt_pkey_index = e.alt.pkey_index;
    c.alt_timeout = e.alt.timeout;
    c.path_mig_state = e.mig_state;
}

// ---------------------------------------------------------------- requester

void transport_engine::rd_path(qp& q) {
    if (q.rd_eec == NIL) {
        q.mtu = hw::MTU_256;
        return;
    }
    const qp& e = qps_[q.rd_eec];
    q.mtu = e.mtu;
    q.sl = e.sl;
    q.dlid = e.dlid;
    q.src_path_bits = e.src_path_bits;
    q.mig_state = e.mig_state;    // o10-23: MigReq of the EE context's path migration state
    q.pkey_index = e.pkey_index;  // o10-59: RD packets carry the EE context's P_Key
    q.timeout = e.timeout;
    q.retry_cnt = e.retry_cnt;
    q.rnr_retry = e.rnr_retry;
    q.max_rd_atomic = e.max_rd_atomic;
}

bool transport_engine::rd_claim(qp& q, const send_wqe& w, sc_time& delay, bool& done) {
    const uint32_t idx = eec_base_ + w.rd_eecn;
    if (!q.req.window.empty()) {
        // One message at a time, even on the EE context it holds: the ACK of the one before
        // makes the QP ready (and releases the EE context, rd_release).
        ++stall_window;
        return false;
    }
    if (q.rd_eec != NIL && q.rd_eec == idx) {
        // Its message (a retransmission restarts it), unless the EE context's RESYNC goes first.
        qp& e = qps_[idx];
        if (!e.rd_resync) return true;
        if (!e.rd_resync_sent) {
            rd_send_resync(q, e, delay);
            done = true;
        }
        return false;  // the RESYNC's ACK makes the QP ready again
    }
    qp& e = eec_rec(w.rd_eecn);
    uint8_t status = hw::CQE_SUCCESS;
    if (!e.valid)
        status = hw::CQE_INV_EECN_ERR;
    else if (e.rdd != q.rdd)
        status = hw::CQE_LOC_RDD_VIOL_ERR;  // o10-8: the target receive queue is never reached
    else if (e.state != hw::QPS_RTS && e.state != hw::QPS_SQD)
        status = hw::CQE_INV_EEC_STATE_ERR;  // o10-12, o10-15, o10-17, o10-21
    if (status != hw::CQE_SUCCESS) {
        done = true;
        requester_error(q, status, w, delay);  // o10-61: the send queue stops (SQEr)
        return false;
    }
    if (e.state == hw::QPS_SQD || (e.rd_owner != NIL && e.rd_owner != q.qpn)) {
        // o10-20: an EE context in SQD starts no message; one that carries another QP's
        // message is free again when that one is acknowledged. The QP waits in line.
        if (!q.rd_waiting) {
            if (e.rd_waiters.full()) e.rd_waiters.grow(std::max<size_t>(4, 2 * e.rd_waiters.slots()));
            e.rd_waiters.push_back(q.qpn);
            q.rd_waiting = true;
        }
        return false;
    }
    e.rd_owner = q.qpn;
    q.rd_eec = idx;
    rd_path(q);
    q.req.sq_psn = e.req.sq_psn;
    q.req.retries_left = e.retry_cnt;
    q.req.rnr_retries_left = e.rnr_retry;
    q.rd_sent_end = NIL;
    if (e.rd_resync) {
        // A message on it failed: the far end may be inside it or anywhere in its PSNs. The
        // RESYNC sets its expected PSN; this message starts after the RESYNC's ACK.
        rd_send_resync(q, e, delay);
        done = true;
        return false;
    }
    return true;
}

void transport_engine::rd_send_resync(qp& q, qp& e, sc_time& delay) {
    wire::headers h;
    build_bth_lrh(q, h, op::RESYNC, e.req.sq_psn);  // RD RESYNC: RDETH and DETH, no payload
    h.b.ack_req = true;
    const size_t hdr = wire::encode_headers(h, 0, tx_pkt_->bytes);
    port_->transmit(tx_pkt_, uint32_t(hdr), delay);
    HCASIM_LOG(log_, info,
               "EE context " << (q.rd_eec - eec_base_) << ": RESYNC at PSN " << e.req.sq_psn << " (QP 0x"
                             << std::hex << q.qpn << std::dec << ")");
    ++rd_resyncs_sent;
    ++tx_packets;
    e.rd_resync_sent = true;
    q.req.sq_psn = e.req.sq_psn;
    if (q.timeout) {  // the QP's local ACK timer watches the RESYNC
        q.req.ack_timer = true;
        q.req.ack_deadline = sim_now() + ack_timeout(q.timeout);
        watch(q, q.req.ack_deadline);
    }
}

void transport_engine::rd_resync_timeout(qp& q, sc_time& delay) {
    qp& e = qps_[q.rd_eec];
    ++timeouts;
    if (q.req.retries_left > 0) {
        --q.req.retries_left;
        e.rd_resync_sent = false;  // the QP's next turn sends it again
        if (q.req.queue.count) make_tx_ready(q.qpn);
        return;
    }
    if (e.mig_state == hw::MIG_ARMED && (e.state == hw::QPS_RTS || e.state == hw::QPS_SQD)) {
        // o10-23: the primary path failed with the alternate one armed: the RESYNC goes again
        // over the alternate path (migrate: the QP takes the EE context's new path).
        migrate(e, delay);
        q.req.retries_left = e.retry_cnt;
        e.rd_resync_sent = false;
        if (q.req.queue.count) make_tx_ready(q.qpn);
        return;
    }
    // Out of retries: the message waiting behind the RESYNC fails (the EE context still owes it).
    if (q.req.queue.count) requester_error(q, hw::CQE_RETRY_EXC_ERR, head_wqe(q), delay);
}

void transport_engine::rd_resync_in(qp& e, const rx_packet& p) {
    sc_time delay = responder_start(e, SC_ZERO_TIME);
    ++rd_resyncs_received;
    ++rx_packets;
    const uint32_t psn = p.h.b.psn;
    HCASIM_LOG(log_, info,
               "EE context " << (e.qpn - eec_base_) << ": RESYNC at PSN " << psn << ", expected PSN was "
                             << e.rsp.rq_psn);
    if (e.rsp.in_send && e.rsp.have_rwqe) {
        // The message in progress was abandoned by its sender: its receive WQE completes in
        // error (Remote Aborted), the next message takes the next one.
        e.rsp.have_rwqe = false;
        recv_completion(e, hw::CQE_OP_RECV, hw::CQE_REM_ABORT_ERR, uint32_t(e.rsp.recv_offset), 0, 0, false,
                        delay);
    }
    e.rsp.in_send = e.rsp.in_write = false;
    e.rsp.recv_offset = 0;
    e.rsp.nak_pending = false;
    e.rsp.rq_psn = (psn + 1) & PSN_MASK;
    e.rd_peer_qp = p.h.d.src_qp;  // the ACK goes back to the QP that sent the RESYNC
    respond(e, wire::aeth_ack(31), psn, delay);
}

void transport_engine::rd_release(qp& q, bool failed) {
    if (q.rd_eec == NIL) return;
    qp& e = qps_[q.rd_eec];
    q.rd_eec = NIL;
    q.mig_state = hw::MIG_MIGRATED;  // the EE context's copy (rd_path): no path of its own to migrate
    if (!e.valid || e.rd_owner != q.qpn) return;
    if (e.rd_resync) {
        // The QP let go while the RESYNC was owed or on its way: the next owner sends it (again).
        e.rd_resync_sent = false;
    } else if (failed && (q.req.sq_psn != e.req.sq_psn || q.rd_sent_end != NIL)) {
        // The message failed after sending packets: the far end stopped somewhere in them, maybe
        // inside the message, and more of them may still be on their way to it. The next
        // message must not be taken for their continuation: the EE context first sends a
        // RESYNC with a PSN past every one of them (IBA 9.7.x).
        uint32_t end = q.req.sq_psn;
        if (q.rd_sent_end != NIL && psn_lt(end, q.rd_sent_end)) end = q.rd_sent_end;
        e.rd_resync = true;
        e.rd_resync_sent = false;
        e.req.sq_psn = end;  // the RESYNC's PSN
    } else {
        e.req.sq_psn = q.req.sq_psn;  // the next message goes on from the PSN after this one
    }
    q.rd_sent_end = NIL;
    e.rd_owner = NIL;
    while (!e.rd_waiters.empty()) {
        const uint32_t qpn = e.rd_waiters.front();
        e.rd_waiters.pop_front();
        qps_[qpn].rd_waiting = false;
        if (qps_[qpn].valid && qps_[qpn].req.queue.count) make_tx_ready(qpn);
    }
}

void transport_engine::send_queue_failed(qp& q, sc_time& delay) {
    if (q.transport == hw::QPT_RC && !q.rd) {
        enter_error(q, delay);
        return;
    }
    if (q.rd) {
        q.req.ack_timer = false;
        q.req.resend_pending = false;
        q.req.cur_offset = 0;
        drop_rd(q);
        rd_release(q, true);
    }
    enter_sqe(q, delay);  // C10-147, C10-152, o10-61: the send queue only
}

// ---------------------------------------------------------------- responder

void transport_engine::receive_rd(const rx_packet& p) {
    qp& e = eec_rec(p.h.rd.ee_context);
    if (!e.valid) {
        ++rd_dropped;
        return;
    }
    // o10-59: a packet whose P_Key is not the EE context's is dropped silently.
    bool pkey_ok = (p.h.b.pkey & 0x7FFF) == (pkeys_->pkey(e.pkey_index) & 0x7FFF);
    if (e.mig_state != hw::MIG_MIGRATED && (pkey_ok || e.mig_state == hw::MIG_ARMED)) {
        // o10-23: the EE context's path migration, as a QP's (transport_apm.cpp). A migration
        // request validated against the alternate path takes its P_Key.
        apm_receive(e, p);
        pkey_ok = (p.h.b.pkey & 0x7FFF) == (pkeys_->pkey(e.pkey_index) & 0x7FFF);
    }
    if (!pkey_ok) {
        ++rd_dropped;
        return;
    }
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (code == op::ACKNOWLEDGE || code == op::ATOMIC_ACKNOWLEDGE ||
        (code >= op::RDMA_READ_RESPONSE_FIRST && code <= op::RDMA_READ_RESPONSE_ONLY)) {
        // A response goes to the RD QP whose message the EE context carries (none: a stale one).
        if (e.rd_owner == NIL || p.h.b.dest_qp != e.rd_owner) {
            ++rd_dropped;
            return;
        }
        if (e.rd_resync) {
            // Waiting for the RESYNC's ACK: responses to the failed message are stale.
            if (e.rd_resync_sent && code == op::ACKNOWLEDGE && p.h.b.psn == e.req.sq_psn &&
                wire::aeth_type_of(p.h.a.syndrome) == wire::aeth_type::ack) {
                qp& q = qps_[e.rd_owner];
                ++acks_received;
                e.rd_resync = e.rd_resync_sent = false;
                e.req.sq_psn = q.req.sq_psn = (e.req.sq_psn + 1) & PSN_MASK;
                q.req.ack_timer = false;
                q.req.retries_left = e.retry_cnt;
                if (q.req.queue.count) make_tx_ready(q.qpn);
            } else {
                ++rd_dropped;
            }
            return;
        }
        handle_response(qps_[e.rd_owner], p);
        return;
    }
    // o10-13, o10-14: requests to an EE context in Reset or Init are dropped; RTR, RTS and SQD
    // process them (o10-16, o10-18, o10-19).
    if (!(e.state == hw::QPS_RTR || e.state == hw::QPS_RTS || e.state == hw::QPS_SQD)) {
        ++rd_dropped;
        return;
    }
    if (code == op::RESYNC) {
        rd_resync_in(e, p);
        return;
    }
    e.rd_peer_qp = p.h.d.src_qp;  // what answers this packet goes back to its QP
    handle_request(e, p);
}

bool transport_engine::rd_target(qp& e, const rx_packet& p, sc_time& delay) {
    const uint32_t qpn = p.h.b.dest_qp;
    const bool starts = !e.rsp.in_send && !e.rsp.in_write;
    if (!starts) {
        if (qpn == e.rq_owner) return true;
        responder_error(e, wire::nak::INVALID_REQUEST, p.h.b.psn, delay);  // a message changes QPs
        return false;
    }
    const qp& d = qpn < eec_base_ ? qps_[qpn] : qps_.invalid();
    const bool receives = d.valid && d.rd &&
                          (d.state == hw::QPS_RTR || d.state == hw::QPS_RTS || d.state == hw::QPS_SQD ||
                           d.state == hw::QPS_SQE);
    // o10-3: the Q_Key is checked against the RD QP's; a mismatch (or no such RD QP of the EE
    // context's domain) is NAKed Invalid RD Request, which stops the requester's send queue.
    if (!receives || d.rdd != e.rdd || p.h.d.qkey != d.qkey) {
        ++naks_sent;
        send_ack(e, wire::aeth_nak(wire::nak::INVALID_RD_REQUEST), p.h.b.psn, delay);
        e.rsp.nak_pending = true;
        return false;
    }
    e.rq_owner = qpn;
    e.who = d.who;        // the RD QP's PD: receive SGEs, RDMA and atomics
    e.access = d.access;  // and its remote access rights
    e.recv_who = d.recv_who;
    e.recv_cqn = d.recv_cqn;
    return true;
}

}  // namespace hcasim
