// Reliable datagram (rd_send_lat, rd_send_bw; IBA 10.2.2.2, hcasim's RD verbs): each node makes
// a reliable datagram domain and workload.eecs EE contexts, connects EE context k to the peer's
// EE context k (the channel's PSNs, timeouts and retries are the EE context's, as RC's are the
// QP's), and takes its RD QPs to RTS with the Q_Key alone. RD QP q's messages name EE context
// q mod eecs and the peer's QP q (make_wr). Every message is acknowledged: the RC paths of the
// latency and bandwidth phases run RD unchanged. An EE context carries one message at a time,
// and so does an RD QP: a stream's messages in flight are at most min(--qps, workload.eecs).
#include <cerrno>

#include "testbench/workloads/base.h"

namespace hcasim::workloads {

/// Node i's domain and EE contexts, in Reset (exchange_info publishes their numbers).
void perftest::create_rd_domain(unsigned i, const std::string& node) {
    side& s = side_[i];
    ibv_device_attr dev{};
    if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
    if (dev.max_ee <= 0 || dev.max_rdd <= 0)
        fail(node + "'s HCA has no reliable datagram (ibv_query_device: max_ee " +
             std::to_string(dev.max_ee) + ", max_rdd " + std::to_string(dev.max_rdd) +
             "; hca.max_eecs enables it)");
    if (uint64_t(wp_.eecs) > uint64_t(dev.max_ee))
        fail("workload.eecs=" + std::to_string(wp_.eecs) + ": " + node + "'s HCA holds " +
             std::to_string(dev.max_ee) + " EE contexts (raise hca.max_eecs)");
    sc_time t0 = sc_time_stamp();
    s.rdd = ibv_alloc_rdd(s.ctx);
    if (!s.rdd) fail(node + ": ibv_alloc_rdd failed (errno " + std::to_string(errno) + ")");
    if (rec_) rec_->call(i, "alloc_rdd", {{"ret", rec_->add(i, s.rdd, "rdd")}}, t0);
    for (unsigned k = 0; k < wp_.eecs; ++k) {
        t0 = sc_time_stamp();
        ibv_eec* e = ibv_create_eec(s.rdd);
        if (!e)
            fail(node + ": ibv_create_eec " + std::to_string(k) + " failed (errno " + std::to_string(errno) +
                 ")");
        if (rec_) {
            const std::string name = "eec" + std::to_string(k);
            rec_->add_eec(i, e, name);
            rec_->call(i, "create_eec", {{"rdd", rec_->name_of(i, s.rdd)}, {"ret", name}, {"eecn", e->eecn}},
                       t0);
        }
        s.eecs.push_back(e);
    }
}

/// ibv_modify_eec, recorded with --record.
int perftest::modify_eec(unsigned i, ibv_eec* eec, ibv_eec_attr& attr, int mask) {
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_modify_eec(eec, &attr, mask);
    if (rec_)
        rec_->call(i, "modify_eec",
                   {{"eec", rec_->name_of(i, eec)}, {"attr", rec_->eec_attr(i, attr, mask)}, {"ret", rc}},
                   t0);
    return rc;
}

/// Reset -> INIT -> RTR -> RTS of node i's EE context k towards the peer's k: the attributes
/// connect_rc gives an RC QP (rtr_attrs, rts_attrs: path, PSNs, READ/atomic limits, timeout
/// and retries).
void perftest::connect_eecs(unsigned i, const std::string& node, const rd_limits& lim) {
    side& s = side_[i];
    const peer_info& peer = info_[peer_of(i)];
    for (unsigned k = 0; k < s.eecs.size(); ++k) {
        ibv_eec_attr a{};
        a.eec_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = 1;
        int rc = modify_eec(i, s.eecs[k], a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT);
        a = ibv_eec_attr{};
        a.eec_state = IBV_QPS_RTR;
        a.dest_eecn = peer.eecn[k];
        rtr_attrs(a, peer, lim);
        rc |= modify_eec(i, s.eecs[k], a, rtr_mask);
        a = ibv_eec_attr{};
        a.eec_state = IBV_QPS_RTS;
        rts_attrs(a, i, lim);
        rc |= modify_eec(i, s.eecs[k], a, rts_mask);
        if (rc)
            fail(node + ": ibv_modify_eec of EE context " + std::to_string(k) + " to RTS failed (" +
                 std::to_string(rc) + ")");
    }
}

/// Reset -> INIT -> RTR -> RTS of node i's RD QP q: its Q_Key (the senders' remote_qkey) and
/// access flags; the path and the PSNs are the EE contexts'.
void perftest::connect_rd(unsigned i, unsigned q, int access) {
    ibv_qp* qp = side_[i].qps[q];
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qkey = ud_qkey;
    attr.qp_access_flags = unsigned(access);
    int rc = modify(i, qp, attr,
                    IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    rc |= modify(i, qp, attr, IBV_QP_STATE);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    rc |= modify(i, qp, attr, IBV_QP_STATE);
    if (rc)
        fail("node" + std::to_string(i) + ": ibv_modify_qp of RD QP " + std::to_string(q) +
             " to RTS failed (" + std::to_string(rc) + ")");
}

}  // namespace hcasim::workloads
