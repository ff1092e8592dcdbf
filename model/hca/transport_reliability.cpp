// Transport engine, responses and reliability (requester side): ACKs and NAKs, completions in
// order, READ responses scattered into the WQE's local SGEs, atomic ACKs, the local ACK timer
// and the timer method (deadlines of every QP: RNR waits, WQE fetches, ACK timeouts, coalesced
// ACKs), go-back-N (sequence NAK, implied NAK, timeout) and the retry budgets.
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
uint8_t cqe_opcode_of(uint8_t wqe_op) {
    switch (wqe_op) {
    case hw::WQE_OP_RDMA_WRITE:
    case hw::WQE_OP_RDMA_WRITE_IMM: return hw::CQE_OP_RDMA_WRITE;
    case hw::WQE_OP_RDMA_READ: return hw::CQE_OP_RDMA_READ;
    case hw::WQE_OP_CMP_SWAP: return hw::CQE_OP_COMP_SWAP;
    case hw::WQE_OP_FETCH_ADD: return hw::CQE_OP_FETCH_ADD;
    case hw::WQE_OP_LOCAL_INV: return hw::CQE_OP_LOCAL_INV;
    case hw::WQE_OP_BIND_MW: return hw::CQE_OP_BIND_MW;
    case hw::WQE_OP_FAST_REG: return hw::CQE_OP_FAST_REG;
    default: return hw::CQE_OP_SEND;
    }
}
}  // namespace

// ---------------------------------------------------------------- ACKs and NAKs in, completions

void transport_engine::handle_response(qp& q, const rx_packet& p) {
    if (!(q.state == hw::QPS_RTS || q.state == hw::QPS_SQD)) return;
    sc_time delay = qp_context(q.qpn, SC_ZERO_TIME);
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (code == op::RDMA_READ_RESPONSE_FIRST || code == op::RDMA_READ_RESPONSE_MIDDLE ||
        code == op::RDMA_READ_RESPONSE_LAST || code == op::RDMA_READ_RESPONSE_ONLY) {
        handle_read_response(q, p, delay);
    } else if (code == op::ATOMIC_ACKNOWLEDGE) {
        handle_atomic_ack(q, p, delay);
    } else {
        const uint32_t psn = p.h.b.psn;
        const wire::aeth_type type = wire::aeth_type_of(p.h.a.syndrome);
        const bool is_ack = type == wire::aeth_type::ack;
        if (is_ack)
            ++acks_received;
        else
            ++naks_received;
        HCASIM_LOG(log_, debug,
                   "QP 0x" << std::hex << q.qpn << std::dec << ": " << (is_ack ? "ACK" : "NAK") << " PSN "
                           << psn << " syndrome 0x" << std::hex << unsigned(p.h.a.syndrome));
        // Only a PSN we sent and that is not acknowledged yet means anything; an older one is
        // a duplicate or stale response.
        const uint32_t oldest = q.req.window.size() ? q.req.window.front().first_psn
                                : q.req.cur_offset  ? q.req.cur_first_psn
                                                    : q.req.sq_psn;
        const uint32_t newest = (q.req.sq_psn - 1) & PSN_MASK;
        if (!outstanding(q) || !psn_le(oldest, psn) || !psn_le(psn, newest)) return;
        // An ACK acknowledges every request up to its PSN; a NAK every request before its PSN.
        if (!retire_acked(q, psn, is_ack, delay)) {
            implied_nak(q, delay);  // an unfinished READ/atomic is acknowledged: its responses were lost
            return;
        }
        const uint32_t acked = is_ack ? psn : (psn - 1) & PSN_MASK;
        if (!q.req.acked_valid || psn_lt(q.req.last_acked, acked)) {
            q.req.last_acked = acked;
            q.req.acked_valid = true;
            q.req.gap_retry = false;
            progress(q);
        }
        if (!is_ack) {
            if (type == wire::aeth_type::rnr_nak) {
                // IBA 9.7.5.2.8: wait the responder's RNR timer, then resend from the NAK'd
                // PSN; rnr_retry 7 means retry for ever.
                if (q.rnr_retry == 7 || q.req.rnr_retries_left-- > 0) {
                    rewind(q, psn, rnr_time(wire::aeth_value_of(p.h.a.syndrome)));
                    return;
                }
                fail_head(q, hw::CQE_RNR_RETRY_EXC_ERR, delay);
                return;
            }
            switch (wire::aeth_value_of(p.h.a.syndrome)) {
            case wire::nak::PSN_SEQUENCE_ERROR: go_back_once(q, psn, delay, true); return;
            case wire::nak::INVALID_REQUEST: fail_head(q, hw::CQE_REM_INV_REQ_ERR, delay); return;
            case wire::nak::REMOTE_ACCESS_ERROR: fail_head(q, hw::CQE_REM_ACCESS_ERR, delay); return;
            case wire::nak::INVALID_RD_REQUEST: fail_head(q, hw::CQE_REM_INV_RD_REQ_ERR, delay); return;
            default: fail_head(q, hw::CQE_REM_OP_ERR, delay); return;
            }
        }
    }
    if (q.state != hw::QPS_ERR) {
        if (q.req.queue.count) make_tx_ready(q.qpn);
        check_drained(q, delay);
    }
}

bool transport_engine::retire_acked(qp& q, uint32_t psn, bool inclusive, sc_time& delay) {
    while (!q.req.window.empty()) {
        const inflight& f = q.req.window.front();
        if (!(inclusive ? psn_le(f.last_psn, psn) : psn_lt(f.last_psn, psn))) break;
        if (f.rd != NO_RD) return false;
        pop_window(q, hw::CQE_SUCCESS, delay);
    }
    return true;
}

void transport_engine::pop_window(qp& q, uint8_t status, sc_time& delay, uint8_t syndrome) {
    const inflight f = q.req.window.front();
    q.req.window.pop_front();
    if (f.rd != NO_RD && !q.req.rd.empty()) {
        const uint32_t e = q.req.rd.front().entry;
        q.req.rd.pop_front();
        free_entry(e);
    }
    // RD: the message is over; its EE context passes to the next QP (transport_rd.cpp).
    if (q.rd && q.req.window.empty() && !q.req.cur_offset && !q.req.resend_pending)
        rd_release(q, status != hw::CQE_SUCCESS);
    send_completion(q, f, status, delay, syndrome);
}

void transport_engine::send_completion(qp& q, const inflight& f, uint8_t status, sc_time& delay,
                                       uint8_t syndrome) {
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
    e.vendor_err = syndrome;
    e.owner = hw::CQE_IS_SEND;
    if (cqw_->complete(q.send_cqn, e, false, delay)) ++send_completions;
    if (probe_) probe_->mark(path_probe::completion, sim_now() + delay);
    if (status == hw::CQE_WR_FLUSH_ERR)
        ++flushed;
    else if (status != hw::CQE_SUCCESS)
        ++error_completions;
}

// ---------------------------------------------------------------- the local ACK timer and the timer method

sc_time transport_engine::rnr_time(uint8_t code) {
    // IBA Vol 1 Table 45 (RNR NAK timer field encodings), milliseconds.
    static const double ms[32] = {655.36, 0.01,  0.02,  0.03,   0.04,   0.06,   0.08,   0.12,
                                  0.16,   0.24,  0.32,  0.48,   0.64,   0.96,   1.28,   1.92,
                                  2.56,   3.84,  5.12,  7.68,   10.24,  15.36,  20.48,  30.72,
                                  40.96,  61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};
    return sc_time(ms[code & 31], SC_MS);
}

sc_time transport_engine::ack_timeout(uint8_t code) {
    // IBA 9.7.6.1.3: 4.096 us x 2^timeout; 0 disables the timer.
    if (code == 0) return SC_ZERO_TIME;
    return ns_time(4096.0 * double(uint64_t(1) << (code & 31)));
}

void transport_engine::progress(qp& q) {
    q.req.retries_left = q.retry_cnt;  // forward progress renews the retry budgets
    q.req.rnr_retries_left = q.rnr_retry;
    q.req.ack_timer = false;
    arm_ack_timer(q);
}

void transport_engine::arm_ack_timer(qp& q) {
    if (q.req.ack_timer || q.timeout == 0 || !outstanding(q)) return;
    q.req.ack_timer = true;
    q.req.ack_deadline = sim_now() + ack_timeout(q.timeout);
    watch(q, q.req.ack_deadline);
}

void transport_engine::watch(qp& q, const sc_time& at) {
    // One heap entry per QP, at its earliest deadline; a later deadline is set when that
    // entry fires (service_timers), an earlier one moves the entry up.
    if (!deadlines_.set(q.qpn, at)) return;
    const sc_time now = sim_now();
    if (at > now)
        wake_timer(at, now);
    else
        timer_now_ev_.notify(SC_ZERO_TIME);
}

void transport_engine::wake_timer(const sc_time& at, const sc_time& now) {
    // A notification at or before `now` has fired (timed ones only: they fire when their
    // time step begins).
    unsigned idle = TIMER_EVENTS, soonest = 0;
    for (unsigned i = 0; i < TIMER_EVENTS; ++i) {
        if (timer_ev_pending_[i] && timer_ev_at_[i] <= now) timer_ev_pending_[i] = false;
        if (!timer_ev_pending_[i]) {
            if (idle == TIMER_EVENTS) idle = i;
            continue;
        }
        if (timer_ev_at_[i] <= at) return;  // the method runs by then anyway
        if (timer_ev_at_[soonest] > timer_ev_at_[i] || !timer_ev_pending_[soonest]) soonest = i;
    }
    const unsigned i = idle != TIMER_EVENTS ? idle : soonest;
    timer_ev_[i].notify(at - now);  // on a pending one: replaces it (an earlier notification wins)
    timer_ev_at_[i] = at;
    timer_ev_pending_[i] = true;
}

// The QPs whose earliest deadline has come, in deadline order: RNR wait or WQE fetch over,
// local ACK timeout, coalesced ACK due. O(log n) per deadline, whatever the number of QPs.
void transport_engine::timer_method() {
    const sc_time now = sim_now();
    while (!deadlines_.empty() && deadlines_.earliest() <= now) {
        const uint32_t qpn = deadlines_.pop();
        service_timers(qps_[qpn], now);
    }
    if (!deadlines_.empty()) wake_timer(deadlines_.earliest(), now);
}

void transport_engine::service_timers(qp& q, const sc_time& now) {
    const uint32_t qpn = q.qpn;
    sc_time next;
    bool pending = false;
    auto later = [&](const sc_time& t) {
        if (!pending || t < next) next = t;
        pending = true;
    };
    if (q.valid) {
        sc_time delay = SC_ZERO_TIME;
        if (q.req.paused_until != SC_ZERO_TIME) {
            if (q.req.paused_until <= now) {
                q.req.paused_until = SC_ZERO_TIME;
                if (q.req.queue.count) make_tx_ready(qpn);
            } else {
                later(q.req.paused_until);
            }
        }
        if (q.req.ack_timer) {
            if (q.req.ack_deadline <= now) {
                q.req.ack_timer = false;
                if ((!q.req.window.empty() || q.req.cur_offset) &&
                    (q.state == hw::QPS_RTS || q.state == hw::QPS_SQD)) {
                    // Local ACK timeout: resend from the first PSN not acknowledged.
                    ++timeouts;
                    HCASIM_LOG(log_, info,
                               "QP 0x" << std::hex << qpn << std::dec << ": local ACK timeout, "
                                       << q.req.retries_left << " retries left");
                    uint32_t from =
                        !q.req.window.empty() ? q.req.window.front().first_psn : q.req.cur_first_psn;
                    const uint32_t end =
                        !q.req.window.empty() ? q.req.window.front().last_psn : (q.req.sq_psn - 1) & PSN_MASK;
                    if (!q.req.window.empty() && q.req.window.front().opcode == hw::WQE_OP_RDMA_READ)
                        from = q.req.window.front().next_psn;
                    else if (q.req.acked_valid && psn_le(from, q.req.last_acked) &&
                             psn_lt(q.req.last_acked, end))
                        from = (q.req.last_acked + 1) & PSN_MASK;
                    // Responses of the old round asking to go back there change nothing.
                    q.req.gap_retry = true;
                    q.req.gap_psn = from;
                    retry(q, from, delay);
                    if (q.req.ack_timer || q.req.paused_until > now)
                        later(q.req.ack_timer ? q.req.ack_deadline : q.req.paused_until);
                    if (q.req.queue.count && q.state != hw::QPS_ERR) make_tx_ready(qpn);
                } else if (q.rd && q.rd_eec != NIL && qps_[q.rd_eec].rd_resync_sent &&
                           (q.state == hw::QPS_RTS || q.state == hw::QPS_SQD)) {
                    rd_resync_timeout(q, delay);  // its EE context's RESYNC went unanswered
                    if (q.req.ack_timer) later(q.req.ack_deadline);
                }
            } else {
                later(q.req.ack_deadline);
            }
        }
        if (q.rsp.ack_flush) {
            if (q.rsp.ack_flush_at <= now) {
                q.rsp.ack_flush = false;
                if (q.rsp.acks_owed)
                    respond(q, wire::aeth_ack(31), (q.rsp.rq_psn - 1) & PSN_MASK, SC_ZERO_TIME);
            } else {
                later(q.rsp.ack_flush_at);
            }
        }
    }
    if (pending) watch(q, next);
}

void transport_engine::park(qp& q, const sc_time& until) {
    q.req.paused_until = until;
    watch(q, until);
}

void transport_engine::check_drained(qp& q, sc_time& delay) {
    if (q.state != hw::QPS_SQD || !q.req.drain_pending || outstanding(q)) return;
    q.req.drain_pending = false;
    if (q.req.sqd_notify)  // C10-36: SQ Drained, if it was requested
        post_event(q, hw::EQE_SQ_DRAINED, delay);
}

// ---------------------------------------------------------------- READ responses and atomic ACKs

void transport_engine::handle_read_response(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    const uint8_t code = p.h.b.opcode & 0x1F;
    // A response implies every earlier request completed (IBA 9.7.5.1.4).
    if (!retire_acked(q, psn, false, delay) || q.req.window.empty()) {
        if (!q.req.window.empty()) implied_nak(q, delay);
        return;
    }
    inflight& f = q.req.window.front();
    if (f.opcode != hw::WQE_OP_RDMA_READ || !psn_le(f.first_psn, psn) || !psn_le(psn, f.last_psn))
        return;  // not a response to the READ we wait for: stale, dropped
    if (psn != f.next_psn) {
        if (psn_lt(psn, f.next_psn)) return;        // duplicate of a response already placed
        go_back_once(q, f.next_psn, delay, false);  // responses missing: read them again
        return;
    }
    rd_ctx& c = q.req.rd.slot(f.rd);
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const bool last_psn = psn == f.last_psn;
    const bool last_op = code == op::RDMA_READ_RESPONSE_LAST || code == op::RDMA_READ_RESPONSE_ONLY;
    const uint64_t remaining = f.length - c.placed;
    if (last_psn != last_op || (last_psn ? p.payload_len != remaining : p.payload_len != mtu)) {
        fail_head(q, hw::CQE_BAD_RESP_ERR, delay);  // response does not fit the request
        return;
    }
    if (last_psn && probe_) probe_->mark(path_probe::resp_rx, sim_now());
    uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
    if (p.payload_len && !write_sges(q.who, wqe_buffer_[c.entry].sg, wqe_buffer_[c.entry].num_sge, c.placed,
                                     p.payload, p.payload_len, delay, status, syndrome)) {
        fail_head(q, status, delay, syndrome);
        return;
    }
    ++read_responses_received;
    c.placed += p.payload_len;
    f.next_psn = (psn + 1) & PSN_MASK;
    q.req.gap_retry = false;
    q.req.last_acked = psn;
    q.req.acked_valid = true;
    progress(q);
    if (last_psn) pop_window(q, hw::CQE_SUCCESS, delay);
    if (q.req.queue.count) make_tx_ready(q.qpn);
    check_drained(q, delay);
}

void transport_engine::handle_atomic_ack(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    if (!retire_acked(q, psn, false, delay) || q.req.window.empty()) {
        if (!q.req.window.empty()) implied_nak(q, delay);
        return;
    }
    const inflight& f = q.req.window.front();
    if (!(f.opcode == hw::WQE_OP_CMP_SWAP || f.opcode == hw::WQE_OP_FETCH_ADD) || f.first_psn != psn)
        return;  // stale or duplicate
    if (probe_) probe_->mark(path_probe::resp_rx, sim_now());
    if (wire::aeth_type_of(p.h.a.syndrome) != wire::aeth_type::ack) {
        fail_head(q, hw::CQE_BAD_RESP_ERR, delay);
        return;
    }
    // o10-47: the original remote value lands in the WQE's local data segment.
    uint8_t bytes[8];
    std::memcpy(bytes, &p.h.aae.orig_data, 8);
    uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
    const send_wqe& w = wqe_buffer_[q.req.rd.slot(f.rd).entry];
    if (!write_sges(q.who, w.sg, w.num_sge, 0, bytes, 8, delay, status, syndrome)) {
        fail_head(q, status, delay, syndrome);
        return;
    }
    q.req.gap_retry = false;
    q.req.last_acked = psn;
    q.req.acked_valid = true;
    progress(q);
    pop_window(q, hw::CQE_SUCCESS, delay);
    if (q.req.queue.count) make_tx_ready(q.qpn);
    check_drained(q, delay);
}

// ---------------------------------------------------------------- go-back-N and retries

void transport_engine::implied_nak(qp& q, sc_time& delay) {
    const inflight& f = q.req.window.front();
    go_back_once(q, f.opcode == hw::WQE_OP_RDMA_READ ? f.next_psn : f.first_psn, delay, false);
}

void transport_engine::go_back_once(qp& q, uint32_t psn, sc_time& delay, bool consume) {
    // A repeated NAK (or gap) for the PSN we already went back to changes nothing.
    if (q.req.gap_retry && q.req.gap_psn == psn) return;
    q.req.gap_retry = true;
    q.req.gap_psn = psn;
    if (consume) {
        retry(q, psn, delay);
        return;
    }
    // IBA 9.7.5: responses out of sequence (reordered, some lost) are dropped and the
    // requester asks again from the first missing PSN; that costs no retry, only a NAK or the
    // local ACK timeout does. The latch above keeps one re-request per PSN until progress, so
    // a path that delivers nothing still ends in the timeout's RETRY_EXC_ERR.
    rewind(q, psn, SC_ZERO_TIME);
}

void transport_engine::retry(qp& q, uint32_t psn, sc_time& delay) {
    if (q.req.retries_left > 0) {
        --q.req.retries_left;
        rewind(q, psn, SC_ZERO_TIME);
        return;
    }
    // The primary path failed with the alternate one armed (IBA 10.4): migrate and send again
    // over it from the first unacknowledged PSN, with a fresh retry budget. An RD QP runs its EE
    // context's path: the EE context migrates (o10-23), and the QP with it (rd_path).
    qp& m = q.rd && q.rd_eec != NIL ? qps_[q.rd_eec] : q;
    if (m.mig_state == hw::MIG_ARMED && (m.state == hw::QPS_RTS || m.state == hw::QPS_SQD)) {
        migrate(m, delay);
        q.req.retries_left = m.retry_cnt;
        rewind(q, psn, SC_ZERO_TIME);
        return;
    }
    fail_head(q, hw::CQE_RETRY_EXC_ERR, delay);  // C10-142: the QP goes to Error, the rest flush
}

void transport_engine::rewind(qp& q, uint32_t psn, const sc_time& wait) {
    // Everything from the oldest unacknowledged WQE on is sent again: the parsed queue is
    // dropped and the fetcher re-reads the send ring from that WQE.
    uint16_t from;
    uint32_t first;
    if (!q.req.window.empty()) {
        from = q.req.window.front().wqe_index;
        first = q.req.window.front().first_psn;
    } else if (q.req.queue.count && q.req.cur_offset) {
        from = head_wqe(q).wqe_index;
        first = q.req.cur_first_psn;
    } else {
        return;
    }
    ++retransmits;
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": go back to PSN " << first << " (WQE " << from
                       << ")" << (wait != SC_ZERO_TIME ? ", after an RNR wait" : ""));
    q.req.resend_pending = true;
    // RD: a RESYNC after a failure must pass every PSN the message has sent.
    if (q.rd && (q.rd_sent_end == NIL || psn_lt(q.rd_sent_end, q.req.sq_psn))) q.rd_sent_end = q.req.sq_psn;
    q.req.sq_psn = first;
    q.req.resume = psn != first;
    q.req.resume_psn = psn;
    q.req.window.clear();
    drop_queue(q);
    drop_rd(q);
    q.req.cur_offset = 0;
    q.req.cur_sge = 0;
    q.req.cur_sge_off = 0;
    q.req.since_ack_req = 0;
    fetcher_->rewind(q.qpn, from);
    q.req.ack_timer = false;
    if (wait != SC_ZERO_TIME) park(q, sim_now() + wait);
}

void transport_engine::fail_head(qp& q, uint8_t status, sc_time& delay, uint8_t syndrome) {
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": the oldest request fails with status "
                       << unsigned(status) << "; the QP goes to Error");
    if (!q.req.window.empty())
        pop_window(q, status, delay, syndrome);
    else if (q.req.queue.count)
        requester_error(q, status, head_wqe(q), delay, syndrome);
    send_queue_failed(q, delay);
}

}  // namespace hcasim
