// Transport engine, automatic path migration (IBA 10.4, 17.2.8; docs/architecture.md
// "Automatic path migration"). RC and UC QPs have a primary and an alternate path and a path
// migration state (Migrated, Rearm, Armed) that the consumer loads with Modify QP and the engine
// moves on its own:
//
// - MigReq in the BTH of every RC/UC packet (requests and responses) is 1 while the sending QP
//   is Migrated and 0 while it is in Rearm or Armed.
// - Rearm -> Armed in lock-step (o10-32): a QP in Rearm that receives a packet of its peer with
//   MigReq 0 (the peer is in Rearm or Armed as well) is Armed. Both ends see each other's
//   packets (requests one way, acknowledgements the other), so both arm once traffic flows.
// - Armed -> Migrated (o10-27, o10-30; only in RTS or SQD): by Modify QP, or when the requester
//   has used up its retries on the primary path (local ACK timeouts, NAKs): instead of
//   RETRY_EXC_ERR it switches to the alternate path and sends again from the first
//   unacknowledged PSN, with MigReq 1.
// - The far end, Armed, validates a packet with MigReq 1 (o10-28): it must have come over the
//   alternate path, i.e. its SLID is the alternate path's DLID, its DLID carries the alternate
//   path's source path bits and its P_Key is the alternate path's. Then it migrates too; else it
//   raises PATH_MIG_ERR once (o10-29) and stays as it is. The packet is processed either way.
//
// EE contexts (reliable datagram, o10-23) are records of the engine too and take the same path:
// receive_rd calls apm_receive for them, an RD QP's retries running out migrate the EE context
// it owns (retry, rd_resync_timeout), and migrate() then gives the owning RD QP the new path
// (rd_path) and raises the EE context's own events (post_event: EQE_EEC_PATH_MIGRATED,
// EQE_EEC_PATH_MIG_ERR). They have no QPC entry: the command unit reads their paths with
// eec_paths().
//
// No allocation and no lookup: a packet of a QP in Migrated (the usual case) costs one compare.
#include "model/core/sim_time.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/transport_engine.h"

namespace hcasim {

using namespace sc_core;

void transport_engine::apm_receive(qp& q, const rx_packet& p) {
    sc_time d = SC_ZERO_TIME;
    if (q.mig_state == hw::MIG_REARM) {
        if (!p.h.b.mig_req) set_mig_state(q, hw::MIG_ARMED, d);  // the peer is in Rearm or Armed
        return;
    }
    if (q.mig_state != hw::MIG_ARMED || !p.h.b.mig_req || !(q.state == hw::QPS_RTS || q.state == hw::QPS_SQD))
        return;
    const uint16_t mask = uint16_t((1u << lmc_) - 1);
    const bool valid = p.h.l.slid == q.alt.dlid && (p.h.l.dlid & mask) == (q.alt.src_path_bits & mask) &&
                       (p.h.b.pkey & 0x7FFF) == (pkeys_->pkey(q.alt.pkey_index) & 0x7FFF);
    if (valid) {
        migrate(q, d);
        return;
    }
    if (q.mig_err_raised) return;  // once until the consumer loads a path or a state again
    q.mig_err_raised = true;
    ++path_mig_errors;
    HCASIM_LOG(log_, info,
               (q.eec ? "EE context " : "QP 0x")
                   << (q.eec ? std::dec : std::hex) << (q.eec ? q.qpn - eec_base_ : q.qpn) << std::dec
                   << ": migration request from SLID " << p.h.l.slid << " to DLID " << p.h.l.dlid
                   << " is not on the alternate path (DLID " << q.alt.dlid << "): PATH_MIG_ERR");
    post_event(q, hw::EQE_PATH_MIG_ERR, d);
}

void transport_engine::migrate(qp& q, sc_time& delay) {
    std::swap(q.dlid, q.alt.dlid);
    std::swap(q.sl, q.alt.sl);
    std::swap(q.src_path_bits, q.alt.src_path_bits);
    std::swap(q.pkey_index, q.alt.pkey_index);
    std::swap(q.timeout, q.alt.timeout);
    q.rsp.slid = 0;  // responses follow the new path (the next request's SLID)
    ++path_migrations;
    if (q.eec) {
        // An EE context (o10-23): held on chip (no QPC entry), its packets' P_Key checked by
        // receive_rd. The RD QP whose message it carries runs its path: it takes the new one,
        // and the message goes on over it.
        HCASIM_LOG(log_, info,
                   "EE context " << (q.qpn - eec_base_) << ": migrated to the alternate path (DLID " << q.dlid
                                 << ")");
        q.mig_state = hw::MIG_MIGRATED;
        if (q.rd_owner != NIL) rd_path(qps_[q.rd_owner]);
        post_event(q, hw::EQE_PATH_MIGRATED, delay);
        return;
    }
    if (q.pkey_index != q.alt.pkey_index)
        pkeys_->bind_qp(q.qpn, q.pkey_index);  // received packets: the new P_Key
    HCASIM_LOG(log_, info,
               "QP 0x" << std::hex << q.qpn << std::dec << ": migrated to the alternate path (DLID " << q.dlid
                       << ")");
    // The QPC table entry holds the paths as QUERY_QP reports them: swapped there too.
    hw::qp_context c;
    const uint64_t at = qpc_base_ + uint64_t(q.qpn) * sizeof c;
    sc_time t = delay;
    if (qpc_dma.read(at, &c, sizeof c, t)) {
        hw::swap_paths(c);
        c.path_mig_state = hw::MIG_MIGRATED;
        (void)qpc_dma.write(at, &c, sizeof c, t);
    }
    q.mig_state = hw::MIG_MIGRATED;
    post_event(q, hw::EQE_PATH_MIGRATED, delay);
}

void transport_engine::set_mig_state(qp& q, uint8_t s, sc_time& delay) {
    q.mig_state = s;
    if (q.eec) {  // on chip; the RD QP whose message it carries sends its MigReq
        if (q.rd_owner != NIL) qps_[q.rd_owner].mig_state = s;
        return;
    }
    const uint8_t b = s;
    sc_time t = delay;
    (void)qpc_dma.write(
        qpc_base_ + uint64_t(q.qpn) * sizeof(hw::qp_context) + offsetof(hw::qp_context, path_mig_state), &b,
        1, t);
}

}  // namespace hcasim
