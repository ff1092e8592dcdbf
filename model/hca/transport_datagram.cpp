// Transport engine, UC and UD (IBA 9.8, 10.2.2): the UC responder (messages without ACKs,
// dropped whole on a lost packet), the UD responder (Q_Key check, GRH area, completion with the
// datagram's source), multicast fan-out to attached UD QPs, UD headers for the requester, and
// SQEr (a UC/UD send error stops the send queue only).
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

// ---------------------------------------------------------------- UC responder

void transport_engine::abandon_uc(qp& q) {
    // IBA 9.8.3: a UC message missing a packet is dropped whole, without a completion; the
    // receive WQE it had taken stays for the next message (what it held is overwritten).
    q.rsp.in_send = q.rsp.in_write = false;
    q.rsp.recv_offset = 0;
}

void transport_engine::handle_uc(qp& q, const rx_packet& p) {
    sc_time delay = responder_start(q);
    const uint8_t code = p.h.b.opcode & 0x1F;
    const uint32_t psn = p.h.b.psn;
    q.rsp.slid = p.h.l.slid;
    const request_kind k = request_kind_of(code);  // UC: no SEND with Invalidate, READ or atomics
    const bool send_first = k.send_first && !k.inv, send_cont = k.send_cont && !k.inv,
               write_first = k.write_first, write_cont = k.write_cont, last = k.last && !k.inv, imm = k.imm;
    const bool starts = send_first || write_first;
    auto drop = [&] {  // the rest of this message is dropped, up to the next FIRST/ONLY
        abandon_uc(q);
        q.rsp.uc_drop = !last;
        ++uc_dropped;
    };
    if (!(starts || send_cont || write_cont)) {  // not a UC request opcode
        drop();
        return;
    }
    // IBA 9.8.3: the expected PSN follows every packet received; a gap means a lost packet: the
    // message it belonged to is dropped, and a FIRST or ONLY starts the next one normally.
    const bool in_sequence = psn == q.rsp.rq_psn;
    q.rsp.rq_psn = (psn + 1) & PSN_MASK;
    if (!starts && (!in_sequence || q.rsp.uc_drop ||
                    !((send_cont && q.rsp.in_send) || (write_cont && q.rsp.in_write)))) {
        if (!q.rsp.uc_drop) {  // the first packet of this message found wrong: the message is counted once
            if (!in_sequence) ++seq_errors;
            ++uc_dropped;
        }
        abandon_uc(q);
        q.rsp.uc_drop = !last;
        return;
    }
    if (starts) {
        if (q.rsp.in_send || q.rsp.in_write) ++uc_dropped;  // the previous message's LAST was lost
        abandon_uc(q);
        q.rsp.uc_drop = false;
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    if (last ? p.payload_len > mtu : p.payload_len != mtu) {
        drop();
        return;
    }
    if (send_first || send_cont) {
        if (send_first && !take_recv_wqe(q, delay)) {  // no receive WQE: no RNR on UC, the message is lost
            drop();
            return;
        }
        uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
        if (!scatter(q, p.payload, p.payload_len, delay, status, syndrome)) {
            // C10-148: a receive completion error (the buffer too small, a protection error)
            // completes the WQE in error and the QP goes to Error.
            q.rsp.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV, status, uint32_t(q.rsp.recv_offset), 0, 0, false, delay,
                            syndrome);
            enter_error(q, delay);
            return;
        }
        q.rsp.in_send = !last;
        if (last) {
            q.rsp.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(q.rsp.recv_offset),
                            imm ? p.h.immdt : 0, imm ? hw::CQE_FLAG_WITH_IMM : 0, p.h.b.se, delay);
        }
    } else {
        if (write_first) {
            if (!(q.access & hw::ACCESS_REMOTE_WRITE)) {  // the QP takes no WRITEs: dropped (no NAK on UC)
                drop();
                return;
            }
            q.rsp.write_va = p.h.r.va;
            q.rsp.write_rkey = p.h.r.rkey;
            q.rsp.write_len = p.h.r.dma_len;
            q.rsp.write_done = 0;
        }
        if (q.rsp.write_done + p.payload_len > q.rsp.write_len ||
            (last && q.rsp.write_done + p.payload_len != q.rsp.write_len)) {
            drop();
            return;
        }
        if (imm && !take_recv_wqe(q, delay)) {
            drop();
            return;
        }
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (p.payload_len &&
            xlate_->translate(q.rsp.write_rkey, q.who, q.rsp.write_va + q.rsp.write_done, p.payload_len,
                              hw::ACCESS_REMOTE_WRITE, segs, MAX_SEGS, nsegs, delay) != xlate_status::ok) {
            // An R_Key violation on UC drops the message; nothing is written from here on.
            drop();
            return;
        }
        if (!write_segs(segs, nsegs, p.payload, delay)) {
            drop();  // a page outside host memory (PCIe access error): UC drops the message
            return;
        }
        q.rsp.write_done += p.payload_len;
        q.rsp.in_write = !last;
        if (last && imm) {
            q.rsp.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV_RDMA_WITH_IMM, hw::CQE_SUCCESS, uint32_t(q.rsp.write_len),
                            p.h.immdt, hw::CQE_FLAG_WITH_IMM, p.h.b.se, delay);
        }
    }
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
}

// ---------------------------------------------------------------- UD responder and multicast

void transport_engine::handle_ud(qp& q, const rx_packet& p) {
    sc_time delay = responder_start(q);
    if (p.h.b.opcode != op::UD_SEND_ONLY && p.h.b.opcode != op::UD_SEND_ONLY_IMM) {
        ++ud_dropped;
        return;
    }
    // C10-14: a datagram whose Q_Key is not the QP's is dropped silently.
    if (p.h.d.qkey != q.qkey) {
        ++qkey_violations;
        pkeys_->qkey_violation();  // the port's Q_Key violation counter (QUERY_PORT)
        ++ud_dropped;
        return;
    }
    // No receive WQE: the datagram is dropped silently (UD has no RNR).
    if (!take_recv_wqe(q, delay)) {
        ++ud_dropped;
        return;
    }
    const bool imm = p.h.b.opcode == op::UD_SEND_ONLY_IMM;
    uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
    // The buffer's first 40 bytes are the GRH's: the GRH when the datagram has one, else they
    // are left untouched; the payload always starts at byte 40. A zero-length datagram without
    // a GRH places nothing and checks nothing (C10-54.1.2).
    bool ok = true;
    if (p.h.has_grh) {
        uint8_t g[wire::GRH_BYTES];
        wire::encode(p.h.g, g);
        ok = scatter(q, g, uint32_t(wire::GRH_BYTES), delay, status, syndrome);
    } else if (p.payload_len) {
        if (rwqe(q).capacity < wire::GRH_BYTES) {
            status = hw::CQE_LOC_LEN_ERR;
            ok = false;
        } else {
            q.rsp.recv_offset = wire::GRH_BYTES;
        }
    }
    if (ok && p.payload_len) ok = scatter(q, p.payload, p.payload_len, delay, status, syndrome);
    q.rsp.have_rwqe = false;
    const recv_src src{p.h.d.src_qp, p.h.l.slid, p.h.l.sl, uint8_t(p.h.l.dlid & ((1u << lmc_) - 1)),
                       p.pkey_index};
    if (!ok) {
        // C10-153: the receive WQE completes in error (too small, protection) and the QP goes to Error.
        recv_completion(q, hw::CQE_OP_RECV, status, 0, 0, 0, false, delay, syndrome, &src);
        enter_error(q, delay);
        return;
    }
    recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(wire::GRH_BYTES + p.payload_len),
                    imm ? p.h.immdt : 0,
                    uint8_t((p.h.has_grh ? hw::CQE_FLAG_GRH : 0) | (imm ? hw::CQE_FLAG_WITH_IMM : 0)),
                    p.h.b.se, delay, 0, &src);
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
}

void transport_engine::receive_mcast(const rx_packet& p) {
    // o10-35: a multicast packet names QP 0xFFFFFF; it is a UD SEND and carries a GRH whose DGID
    // is the group's MGID (IBA 8.4.1).
    const bool ud_send = p.h.b.opcode == op::UD_SEND_ONLY || p.h.b.opcode == op::UD_SEND_ONLY_IMM;
    unsigned n = 0;
    const bool well_formed = mcast_ && ud_send && p.h.has_grh && p.h.b.dest_qp == 0xFFFFFF;
    const uint32_t* members = well_formed ? mcast_->lookup(p.h.l.dlid, p.h.g.dgid.data(), n) : nullptr;
    unsigned delivered = 0;
    for (unsigned i = 0; i < n; ++i) {
        const uint32_t qpn = members[i];
        if (qpn >= qps_.size()) continue;
        qp& q = qps_[qpn];
        if (!q.valid || q.transport != hw::QPT_UD ||
            !(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD ||
              q.state == hw::QPS_SQE))
            continue;
        if (!pkey_checker::match(p.h.b.pkey, pkeys_->pkey(q.pkey_index))) {
            pkeys_->pkey_violation(p, pkeys_->pkey(q.pkey_index));  // not in the packet's partition
            continue;
        }
        handle_ud(q, p);  // each attached QP takes a receive WQE of its own
        ++delivered;
    }
    if (delivered)
        mcast_deliveries += delivered;
    else if (!(well_formed && n == 0 && (p.h.l.slid >> lmc_) == (lid_ >> lmc_)))
        ++mcast_dropped;  // (this port's own copy of a group it has no member of is no drop)
}

// ---------------------------------------------------------------- UD requester headers, SQEr

void transport_engine::build_ud_headers(const qp& q, const send_wqe& w, wire::headers& h,
                                        uint8_t opcode) const {
    h = wire::BLANK_HEADERS;
    h.l.vl = 0;
    h.l.sl = w.ud.sl & 0xF;
    h.l.dlid = w.ud.dlid;
    const uint16_t mask = uint16_t((1u << lmc_) - 1);
    h.l.slid = uint16_t((lid_ & ~mask) | (w.ud.src_path_bits & mask));  // C10-3
    h.b.opcode = opcode;
    h.b.pkey = pkeys_->pkey(q.pkey_index);  // QP1 too: its own P_Key (C10-133)
    if (q.qpn == pkey_checker::SMI_QPN) {
        h.l.vl = 15;        // SMPs travel on VL15 ...
        h.b.pkey = 0xFFFF;  // ... with the default P_Key: QP0 has no P_Key index (C10-125, C10-126)
    }
    h.b.dest_qp = w.ud.dest_qpn & 0xFFFFFF;
    h.b.psn = q.req.sq_psn & PSN_MASK;
    // C10-15: a Q_Key with its high-order bit set means the QP's own Q_Key.
    h.d.qkey = (w.ud.qkey & 0x80000000u) ? q.qkey : w.ud.qkey;
    h.d.src_qp = q.qpn;
    if (w.ud.grh) {
        h.has_grh = true;
        h.g.tclass = w.ud.tclass;
        h.g.flow_label = w.ud.flow_label & 0xFFFFF;
        h.g.hop_limit = w.ud.hop_limit;
        std::copy(gid_, gid_ + 16, h.g.sgid.begin());
        std::copy(w.ud.dgid, w.ud.dgid + 16, h.g.dgid.begin());
    }
}

void transport_engine::enter_sqe(qp& q, sc_time& delay) {
    if (q.state == hw::QPS_ERR) return;
    if (q.state != hw::QPS_SQE) {
        q.state = hw::QPS_SQE;
        fetcher_->set_state(q.qpn, hw::QPS_SQE);
    }
    q.req.drain_pending = false;
    // C10-40: every later send WR completes with WR_FLUSH_ERR (the fetcher keeps delivering
    // them; the requester flushes each as it arrives). The receive queue is untouched (C10-38).
    while (!q.req.window.empty()) pop_window(q, hw::CQE_WR_FLUSH_ERR, delay);
    while (q.req.queue.count) {
        const send_wqe& w = head_wqe(q);
        const inflight f{w.wr_id, 0, 0, uint32_t(w.length), w.wqe_index, w.opcode, w.flags, NO_RD, 0};
        const bool known = !w.fetch_error;  // an unreadable WQE has nothing to complete
        retire_head(q);
        if (known) send_completion(q, f, hw::CQE_WR_FLUSH_ERR, delay);
    }
}

}  // namespace hcasim
