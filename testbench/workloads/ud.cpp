// UD (ud_send_lat, ud_send_bw, ud_srq_bw), multicast (mcast_bw) and what UC shares with them:
// UC and UD messages are not acknowledged, so a bandwidth stream ends with one end-of-stream
// marker per QP (send_markers) and the receivers' loop (unacked_receive) ends on them,
// counting the datagrams that never arrived (take_datagram_counts).
#include <algorithm>
#include <cerrno>

#include "testbench/workloads/base.h"

namespace hcasim::workloads {

/// mcast_bw: the MGID of QP q's group, ff12:401b::q+1 (link-local scope).
ibv_gid perftest::mcast_gid(unsigned q) {
    ibv_gid g{};
    g.raw[0] = 0xFF;
    g.raw[1] = 0x12;
    g.raw[2] = 0x40;
    g.raw[3] = 0x1B;
    for (int k = 0; k < 4; ++k) g.raw[15 - k] = uint8_t((q + 1) >> (8 * k));
    return g;
}

/// Reset -> RTS of node i's UC or UD QP q (the masks of e2e_uc_test / e2e_ud_test). UC: the
/// RC path attributes without the reliability ones, access flags REMOTE_WRITE at most; UD: the
/// Q_Key only, the address comes with every send WR.
int perftest::connect_unreliable(unsigned i, unsigned q, int access) {
    ibv_qp* qp = side_[i].qps[q];
    const peer_info& peer = info_[peer_of(i)];
    const bool ud = tr_ == transport::ud;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = unsigned(access) & unsigned(IBV_ACCESS_REMOTE_WRITE);
    attr.qkey = ud_qkey;
    int rc =
        modify(i, qp, attr,
               IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    if (ud) {
        rc |= modify(i, qp, attr, IBV_QP_STATE);
    } else {
        attr.path_mtu = ibv_mtu(__builtin_ctz(spec_.mtu) - 7);
        attr.dest_qp_num = peer.qpn[q];
        attr.rq_psn = peer.psn;
        attr.ah_attr.dlid = peer.lid;
        attr.ah_attr.port_num = 1;
        rc |=
            modify(i, qp, attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
    }
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = info_[i].psn;
    rc |= modify(i, qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
    return rc;
}

/// UD: where node i's QPs send. QP q sends to the peer's QP q through one address handle
/// towards the peer's LID (no GRH, as perftest on an IB port). mcast_bw would set the group's
/// AH and QPN 0xFFFFFF here instead.
void perftest::make_ud_dests(unsigned i) {
    side& s = side_[i];
    const peer_info& peer = info_[peer_of(i)];
    s.dest.clear();
    if (mcast_ && i == 0) {  // QP q: its group's AH (multicast needs the GRH), QPN 0xFFFFFF
        for (unsigned q = 0; q < nq_; ++q) {
            ibv_ah_attr a{};
            a.dlid = uint16_t(mcast_mlid + q);
            a.port_num = 1;
            a.is_global = 1;
            a.grh.dgid = mcast_gid(q);
            a.grh.hop_limit = 1;
            const sc_time t0 = sc_time_stamp();
            ibv_ah* ah = ibv_create_ah(s.pd, &a);
            if (rec_ && ah)
                rec_->call(i, "create_ah",
                           {{"pd", "pd0"},
                            {"dlid", a.dlid},
                            {"sl", a.sl},
                            {"dgid", trace::gid_hex(a.grh.dgid)},
                            {"hop_limit", a.grh.hop_limit},
                            {"ret", rec_->add(i, ah, "ah")}},
                           t0);
            if (!ah)
                fail("node0: ibv_create_ah for multicast group " + std::to_string(q) + " failed (errno " +
                     std::to_string(errno) + ")");
            s.dest.push_back(ud_dest{ah, mcast_qpn, ud_qkey});
        }
        return;
    }
    ibv_ah_attr a{};
    a.dlid = peer.lid;
    a.port_num = 1;
    const sc_time t0 = sc_time_stamp();
    ibv_ah* ah = ibv_create_ah(s.pd, &a);
    if (!ah)
        fail("node" + std::to_string(i) + ": ibv_create_ah failed (errno " + std::to_string(errno) + ")");
    if (rec_)
        rec_->call(i, "create_ah",
                   {{"pd", "pd0"}, {"dlid", a.dlid}, {"sl", a.sl}, {"ret", rec_->add(i, ah, "ah")}}, t0);
    for (unsigned q = 0; q < nq_; ++q) s.dest.push_back(ud_dest{ah, peer.qpn[q], ud_qkey});
}

/// uc_write_bw, ud_send_bw: a zero-length WRITE / SEND with immediate `marker_imm`, signaled,
/// on node0's QP q after its last message (wr_id `wr_id`).
void perftest::post_marker(unsigned q, uint64_t wr_id) {
    side& s = side_[0];
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = marker_imm;
    if (tr_ == transport::ud) {
        wr.opcode = IBV_WR_SEND_WITH_IMM;
        wr.wr.ud.ah = s.dest[q].ah;
        wr.wr.ud.remote_qpn = s.dest[q].qpn;
        wr.wr.ud.remote_qkey = s.dest[q].qkey;
    } else {
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.wr.rdma.remote_addr = info_[1].addr + uint64_t(q) * area_;
        wr.wr.rdma.rkey = info_[1].rkey;
    }
    ibv_send_wr* bad = nullptr;
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_post_send(s.qps[q], &wr, &bad);
    if (rec_)
        rec_->call(0, "post_send",
                   {{"qp", rec_->name_of(0, s.qps[q])}, {"wr", rec_->send_wrs(0, &wr)}, {"ret", rc}}, t0);
    if (rc) fail("node0: ibv_post_send of the end-of-stream marker failed (" + std::to_string(rc) + ")");
}

/// uc_write_bw, ud_send_bw, node0 after the timed stream: one end-of-stream marker on each QP
/// that sent messages (post_marker), then their send completions. A QP's packets reach the
/// server in order, so once it has a QP's marker every message before it has landed or is
/// lost. Then tells the server (out of band) that the markers are on the wire.
void perftest::send_markers(const phase_spec& ph, uint64_t size) {
    const bool v = spec_.verify;
    std::vector<unsigned> n(nt_, 0);  // markers per thread (each completes on its thread's CQ)
    for (unsigned q = 0; q < nq_; ++q)
        if (quota_of(ph, q) > 0) {
            post_marker(q, (uint64_t(q) << 48) | quota_of(ph, q));
            ++n[q % nt_];
        }
    for (unsigned t = 0; t < nt_; ++t)
        for (unsigned k = 0; k < n[t]; ++k) {
            const ibv_wc wc = poll_one(0, send_cq(0, t));
            const unsigned q = std::min(unsigned(wc.wr_id >> 48), nq_ - 1);
            if (v)  // the QPs' markers complete in any order
                check_send_wc(at(ph, size, 0, q, quota_of(ph, q), "marker completion"), wc,
                              tr_ == transport::ud ? IBV_WC_SEND : IBV_WC_RDMA_WRITE,
                              (uint64_t(q) << 48) | quota_of(ph, q));
        }
    stream_end_ns_ = bus(0).now_ns();
    stream_end_.notify(SC_ZERO_TIME);
}

/// uc_write_bw, ud_send_bw, node1: takes receive completions until every QP's marker is in
/// or, once the client's markers are on the wire, none has come for workload.drain_us (a
/// marker lost). ud_send_bw, mcast_bw: every datagram is counted (received_[i]) and, with
/// --verify, checked like send_bw's, its payload at byte 40. uc_write_bw: the WRITEs complete
/// nothing here, so only the markers come (WRITE with immediate). Node i is node1 or, in
/// mcast_bw, any receiver.
void perftest::unacked_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step) {
    side& s = side_[i];
    const std::string node = "node" + std::to_string(i);
    std::vector<uint64_t>& received = received_[i];
    std::vector<uint8_t> marked;  // the QP's marker is in (per size, not per message)
    const bool ud = tr_ == transport::ud;
    const uint64_t drain = std::max<uint64_t>(1, uint64_t(wp_.drain_us.get() * 1000.0));
    received.assign(nq_, 0);
    marked.assign(nq_, 0);
    unsigned want = 0, markers = 0;
    for (unsigned q = 0; q < nq_; ++q) want += quota_of(ph, q) > 0 ? 1 : 0;
    if (!ud)  // nothing to take before the markers: sleep until they are on the wire
        while (stream_end_ns_ == no_time) wait(stream_end_);
    uint64_t idle_since = bus(i).now_ns();
    while (markers < want) {
        ibv_wc wc{};
        const int n = ibv_poll_cq(s.rcq, 1, &wc);
        if (n < 0) fail(node + ": ibv_poll_cq failed");
        record_poll(i, s.rcq, &wc, n);
        if (n == 0) {
            // The CQ is empty. Wait for the next completion in slices of drain_us, so that
            // the end of the stream is noticed without one.
            const uint64_t now = bus(i).now_ns();
            if (stream_end_ns_ != no_time) {
                const uint64_t since = std::max(idle_since, stream_end_ns_);
                if (now - since >= drain) break;  // a marker was lost: every message is in or lost
                ibv_wait_cq(s.rcq, drain - (now - since));
            } else {
                if (now - idle_since >= timeout_ns())
                    fail(node + ": no datagram within workload.timeout_us" + cable_faults());
                ibv_wait_cq(s.rcq, std::min(drain, timeout_ns() - (now - idle_since)));
            }
            continue;
        }
        idle_since = bus(i).now_ns();
        if (wc.status != IBV_WC_SUCCESS) fail(completion_error(node, wc, std::to_string(wc.wr_id)));
        if (take_unacked(i, ph, size, step, wc, marked)) ++markers;
    }
}

/// One receive completion of unacked_receive on node i: a message (counted in received_[i],
/// checked with --verify) or a QP's marker (in `marked`; true if it is the QP's first). Reposts
/// the receive.
bool perftest::take_unacked(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step, const ibv_wc& wc,
                            std::vector<uint8_t>& marked) {
    side& s = side_[i];
    const std::string node = "node" + std::to_string(i);
    std::vector<uint64_t>& received = received_[i];
    const bool v = spec_.verify, ud = tr_ == transport::ud;
    bool new_marker = false;
    unsigned q = qp_index(i, wc.qp_num);
    if (q == nq_) {
        if (!v) fail(node + ": receive completion for unknown QP " + std::to_string(wc.qp_num));
        chk_.bad_completion(at(ph, size, i, 0, 0, "receive completion"),
                            "QP number " + std::to_string(wc.qp_num) + " is not one of ours");
        return false;
    }
    const bool marker = (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == marker_imm;
    // ud_srq_bw: the SRQ slot the completion names (checked like check_recv_wc's fields).
    const unsigned slot = srq_ ? srq_completion(i, ph, size, q, wc, marker) : 0;
    if (marker) {
        if (v && !srq_) {
            const verify::where w = at(ph, size, i, q, received[q], "marker receive completion");
            check_send_wc(w, wc, ud ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM, s.rq_done[q]);
            if (wc.byte_len != payload_off())
                chk_.bad_completion(w, "byte_len " + std::to_string(wc.byte_len) + ", expected " +
                                           std::to_string(payload_off()));
        }
        if (!marked[q]) {
            marked[q] = 1;
            new_marker = true;
        }
    } else if (ud && !marked[q]) {
        if (srq_) {
            if (slot < s.srq_slots) srq_payload(i, ph, size, step, q, slot, received[q] + 1);
        } else if (v) {
            check_recv_wc(at(ph, size, i, q, received[q], "receive completion"), wc, size);
            chk_.bytes(at(ph, size, i, q, received[q], "receive buffer"),
                       peek(i, recv_area(i, q) + grh_bytes, size), size, key(0, q, step, 0));
        }
        ++received[q];
    } else {
        if (!v)
            fail(node + ": unexpected receive completion, opcode " + std::to_string(wc.opcode) + ", wr_id " +
                 std::to_string(wc.wr_id));
        chk_.bad_completion(at(ph, size, i, q, received[q], "receive completion"),
                            "opcode " + std::to_string(wc.opcode) +
                                " after the end-of-stream marker or "
                                "without one");
    }
    ++s.rq_done[q];
    if (!srq_)
        post_recv(i, q);
    else if (slot < s.srq_slots)
        post_srq(i, {slot});
    return new_marker;
}

/// mcast_bw: attaches node i's QP q to its group (each QP has a group of its own).
void perftest::attach_mcast(unsigned i, const std::string& node, unsigned q) {
    side& s = side_[i];
    const ibv_gid g = mcast_gid(q);
    const sc_time t0 = sc_time_stamp();
    const int arc = ibv_attach_mcast(s.qps[q], &g, uint16_t(mcast_mlid + q));
    if (rec_)
        rec_->call(i, "attach_mcast",
                   {{"qp", rec_->name_of(i, s.qps[q])},
                    {"gid", trace::gid_hex(g)},
                    {"lid", mcast_mlid + q},
                    {"ret", arc}},
                   t0);
    if (const int rc = arc)
        fail(node + ": ibv_attach_mcast of QP " + std::to_string(q) + " failed (" + std::to_string(rc) +
             "; each QP has a group of its own: at most hca.mcast_table.max_groups QPs)");
}

/// The size's row: the receivers' counts. Lost datagrams are reported, and fail --verify.
void perftest::take_datagram_counts(const phase_spec& ph, uint64_t size, size_result& r) {
    const bool v = spec_.verify;
    r.datagrams = true;
    r.datagrams_sent = ph.iters;
    if (mcast_) {
        r.receivers = nn_ - 1;
        r.lost_per_receiver.assign(nn_ - 1, 0);
    }
    for (unsigned n = 1; n < nn_; ++n)
        for (unsigned q = 0; q < nq_; ++q) {
            const uint64_t quota = quota_of(ph, q), got = received_[n][q];
            const uint64_t lost = quota > got ? quota - got : 0;
            r.datagrams_lost += lost;
            r.datagrams_delivered += got;
            if (mcast_) r.lost_per_receiver[n - 1] += lost;
            if (!v) continue;
            chk_.lost(at(ph, size, n, q, 0, "receive queue"), lost, quota);
            if (got > quota)  // a link duplicated a packet: UD delivers both copies
                chk_.bad_completion(at(ph, size, n, q, quota, "receive completion"),
                                    std::to_string(got - quota) + " datagrams more than were sent");
        }
}

}  // namespace hcasim::workloads
