// Verbs on queue pairs: create / modify / query / destroy, then the send queue (checking a WR,
// building its WQE, the doorbell) and the receive queue.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "firmware/qp_state_machine.h"
#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- QP

namespace {

constexpr uint32_t MAX_WQE_BYTES = 255 * 16;  // ds_count is 8 bits of 16-byte units

hw::qp_context initial_context(const ibv_qp* qp) {
    // C10-21: the attributes a QP has on creation and after any transition to Reset.
    hw::qp_context c{};
    c.qpn = qp->qp_num;
    c.state = hw::QPS_RESET;
    c.transport = uint8_t(qp->qp_type);
    c.mtu = hw::MTU_256;
    c.port = 1;
    c.pd = qp->pd ? qp->pd->handle : 0;  // an XRC target has none: each message uses its SRQ's
    c.send_cqn = qp->send_cq ? qp->send_cq->handle : 0;
    c.recv_cqn = qp->recv_cq ? qp->recv_cq->handle : 0;
    c.xrcd = qp->xrcd ? qp->xrcd->handle : 0;
    c.rdd = qp->rdd ? qp->rdd->handle : 0;
    c.sq_base = qp->sq.pa;
    c.rq_base = qp->rq.pa;
    c.sq_log_size = qp->sq.log_size;
    c.sq_log_stride = qp->sq.log_stride;
    c.rq_log_size = qp->rq.log_size;
    c.rq_log_stride = qp->rq.log_stride;
    c.uar = qp->context->uar;
    c.sig_all = qp->sq_sig_all ? 1 : 0;
    c.max_send_wr = qp->sq.max_wr;
    c.max_recv_wr = qp->rq.max_wr;
    c.srqn = qp->srq ? qp->srq->handle + 1 : 0;
    c.mm_flags = uint8_t(((qp->create_flags & IBV_QP_CREATE_FAST_REG) ? hw::QP_MM_FAST_REG : 0) |
                         ((qp->create_flags & IBV_QP_CREATE_RESERVED_LKEY) ? hw::QP_MM_RESERVED_LKEY : 0));
    return c;
}

ibv_qp_attr initial_attr(const ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    a.cur_qp_state = IBV_QPS_RESET;
    a.path_mtu = IBV_MTU_256;
    a.port_num = 1;
    a.cap = {qp->sq.max_wr, qp->rq.max_wr, qp->sq.max_sge, qp->rq.max_sge, qp->max_inline_data};
    return a;
}

/// The address vector of a path of a QP context.
ibv_ah_attr ah_of(const hw::qp_path_ref& p) {
    ibv_ah_attr a{};
    a.dlid = p.dlid;
    a.sl = p.sl;
    a.src_path_bits = p.src_path_bits;
    a.is_global = p.grh;
    a.grh.sgid_index = p.sgid_index;
    a.grh.hop_limit = p.hop_limit;
    a.grh.traffic_class = p.tclass;
    a.grh.flow_label = p.flow_label;
    std::memcpy(a.grh.dgid.raw, p.dgid, 16);
    a.port_num = p.port;
    return a;
}

/// An address vector's fields into a path of a QP context (not its port: Modify QP gives that
/// apart, IBV_QP_PORT / alt_port_num).
void set_path(const hw::qp_path_ref& p, const ibv_ah_attr& a) {
    p.dlid = a.dlid;
    p.sl = a.sl;
    p.src_path_bits = a.src_path_bits;
    p.grh = a.is_global ? 1 : 0;
    p.sgid_index = a.grh.sgid_index;
    p.hop_limit = a.grh.hop_limit;
    p.tclass = a.grh.traffic_class;
    p.flow_label = a.grh.flow_label;
    std::memcpy(p.dgid, a.grh.dgid.raw, 16);
}

/// Takes the paths and the path migration state as the HCA has them (`now`, from QUERY_QP)
/// into the QP's software copy and its attributes (IBA 10.4: the HCA migrates on its own).
void take_paths(ibv_qp* qp, hw::qp_context now) {
    hw::qp_context& c = qp->hw_ctx;
    hw::copy_path(hw::primary_path(c), hw::primary_path(now));
    hw::copy_path(hw::alternate_path(c), hw::alternate_path(now));
    c.path_mig_state = now.path_mig_state;
    ibv_qp_attr& a = qp->attr;
    a.ah_attr = ah_of(hw::primary_path(c));
    a.alt_ah_attr = ah_of(hw::alternate_path(c));
    a.port_num = c.port;
    a.pkey_index = c.pkey_index;
    a.timeout = c.timeout;
    a.alt_pkey_index = c.alt_pkey_index;
    a.alt_port_num = c.alt_port;
    a.alt_timeout = c.alt_timeout;
    a.path_mig_state = ibv_mig_state(c.path_mig_state);
}

void reset_queues(ibv_qp* qp) {
    qp->sq.producer = qp->sq.completed = 0;
    qp->rq.producer = qp->rq.completed = 0;
}

void on_qp_event(ibv_qp* qp, const hw::eqe& e) {
    ibv_async_event ev{};
    if (event_type_of(e, &ev.event_type)) {
        ev.element.qp = qp;
        queue_event(qp->context, ev);
    }
    switch (e.type) {
    case hw::EQE_QP_FATAL:
    case hw::EQE_QP_REQ_ERR:
    case hw::EQE_QP_ACCESS_ERR:
        qp->state = IBV_QPS_ERR;  // the HCA moved the QP to Error on its own
        qp->hw_ctx.state = hw::QPS_ERR;
        break;
    case hw::EQE_SQ_DRAINED:
        qp->attr.sq_draining = 0;
        qp->hw_ctx.sq_draining = 0;
        break;
    default: break;
    }
}

bool transport_supported(const hw::hca_caps& caps, ibv_qp_type t) {
    switch (t) {
    case IBV_QPT_RC: return caps.flags & hw::CAP_RC;
    case IBV_QPT_UC: return caps.flags & hw::CAP_UC;
    case IBV_QPT_UD: return caps.flags & hw::CAP_UD;
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV: return caps.flags & hw::CAP_XRC;
    case IBV_QPT_RD: return caps.flags & hw::CAP_RD;
    case IBV_QPT_SMI:
    case IBV_QPT_GSI: return false;  // ibv_create_qp runs them as UD
    }
    return false;
}

/// IBV_QPT_XRC_RECV (IBA 10.2.10): a QP of an XRC domain with neither PD, CQs nor queues; its
/// messages take their receive WQEs, PD and CQ from the XRC SRQs their XRCETHs name.
ibv_qp* create_xrc_target(ibv_pd* pd, ibv_qp_init_attr* ia) {
    ibv_xrcd* xrcd = ia->xrcd;
    if (pd || !xrcd || ia->srq) return fail<ibv_qp>(EINVAL);
    ibv_context* ctx = xrcd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (!transport_supported(drv.caps(), IBV_QPT_XRC_RECV) || ia->create_flags) return fail<ibv_qp>(EINVAL);
    auto* qp = new ibv_qp{};
    qp->context = ctx;
    qp->qp_context = ia->qp_context;
    qp->state = IBV_QPS_RESET;
    qp->qp_type = IBV_QPT_XRC_RECV;
    qp->xrcd = xrcd;
    qp->sq.log_stride = 6;  // no rings: the smallest strides the HCA accepts
    qp->rq.log_stride = 4;
    ia->cap = ibv_qp_cap{};
    if (!drv.alloc_qpn(&qp->qp_num)) {
        delete qp;
        return fail<ibv_qp>(ENOMEM);
    }
    qp->hw_ctx = initial_context(qp);
    qp->attr = initial_attr(qp);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_QP, qp->qp_num, 0, &qp->hw_ctx, sizeof qp->hw_ctx);
    if (st != hw::CMD_OK) {
        drv.free_qpn(qp->qp_num);
        delete qp;
        return fail<ibv_qp>(fw::cmd_errno(st));
    }
    ++xrcd->refs;
    ++ctx->qps;
    drv.set_qp_user(qp->qp_num, qp);
    drv.set_qp_event_handler(qp->qp_num, [qp](const hw::eqe& e) { on_qp_event(qp, e); });
    return qp;
}

}  // namespace

namespace detail {

/// Whether Modify QP (and Modify EEC) may move the path migration state `from` -> `to` on the QP transition
/// cur -> next (IBA 10.4.1, Figure 127). The consumer loads Rearm (o10-31), only going to
/// RTS (o10-24); may arm a QP in Rearm itself (10.4.1.1: a remote CI without APM); migrates
/// by hand only from Armed in RTS or SQD (o10-25, o10-30).
bool mig_transition_ok(uint8_t from, ibv_mig_state to, ibv_qp_state cur, ibv_qp_state next) {
    if (to > IBV_MIG_ARMED) return false;
    if (to == from) return true;
    if (from == hw::MIG_MIGRATED && to == IBV_MIG_REARM) return next == IBV_QPS_RTS;
    if (from == hw::MIG_REARM && to == IBV_MIG_ARMED) return true;
    if (from == hw::MIG_ARMED && to == IBV_MIG_MIGRATED) return cur == IBV_QPS_RTS || cur == IBV_QPS_SQD;
    return false;
}

int check_alt_path(ibv_context* ctx, uint32_t mask, const ibv_ah_attr& alt_ah, uint8_t alt_port_num,
                   uint16_t alt_pkey_index, uint8_t alt_timeout) {
    // Automatic path migration (IBA 10.4): only with CAP_APM.
    hca_driver& drv = *ctx->driver;
    if ((mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) && !(drv.caps().flags & hw::CAP_APM))
        return EINVAL;
    if (mask & IBV_QP_ALT_PATH) {
        const hw::port_info* alt = drv.port(alt_port_num);
        if (!alt || alt_pkey_index >= alt->pkey_table_len || alt_timeout > 31 || check_ah_attr(ctx, alt_ah))
            return EINVAL;
    }
    return 0;
}

}  // namespace detail

uint32_t send_wqe_max_bytes(ibv_qp_type t, uint32_t max_send_sge, uint32_t max_inline) {
    const uint32_t rdma = sizeof(hw::wqe_raddr_seg) + sizeof(hw::wqe_atomic_seg);
    uint32_t addr = t == IBV_QPT_UD                            ? sizeof(hw::wqe_ud_seg)
                    : t == IBV_QPT_RD                          ? rdma + sizeof(hw::wqe_rd_seg)
                    : t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND ? rdma
                                                               : sizeof(hw::wqe_raddr_seg);
    uint32_t data = std::max<uint32_t>(max_send_sge * sizeof(hw::wqe_data_seg),
                                       max_inline ? hw::align16(sizeof(hw::wqe_inline_seg) + max_inline) : 0);
    uint32_t bytes = sizeof(hw::wqe_ctrl_seg) + addr + data;
    // Connected QPs also carry memory management WQEs (bind 32 B, fast register 48 B segment).
    if (t != IBV_QPT_UD)
        bytes = std::max<uint32_t>(bytes, sizeof(hw::wqe_ctrl_seg) + std::max(sizeof(hw::wqe_bind_seg),
                                                                              sizeof(hw::wqe_fast_reg_seg)));
    return bytes;
}

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* ia) {
    if (ia && ia->qp_type == IBV_QPT_XRC_RECV) return create_xrc_target(pd, ia);
    if (!pd || !ia) return fail<ibv_qp>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    // IBA 10.2.10: an XRC initiator has no receive side (recv_cq optional, no SRQ, no receive queue).
    const bool ini = ia->qp_type == IBV_QPT_XRC_SEND;
    if (ini) {
        if (ia->srq || ia->xrcd) return fail<ibv_qp>(EINVAL);
        if (!ia->recv_cq) ia->recv_cq = ia->send_cq;
        ia->cap.max_recv_wr = ia->cap.max_recv_sge = 0;
    } else if (ia->xrcd) {
        return fail<ibv_qp>(EINVAL);
    }
    // IBA 10.2.8: an RD QP is in exactly one reliable datagram domain (o10-6) of the context; it
    // takes no SRQ here.
    const bool rd = ia->qp_type == IBV_QPT_RD;
    if (rd ? !ia->rdd || ia->rdd->context != ctx || ia->srq : ia->rdd != nullptr) return fail<ibv_qp>(EINVAL);
    if (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != ctx || ia->recv_cq->context != ctx)
        return fail<ibv_qp>(EINVAL);
    // The special QPs: privileged consumers only (C10-13); the hardware runs them as UD QPs.
    const bool special = ia->qp_type == IBV_QPT_SMI || ia->qp_type == IBV_QPT_GSI;
    // IBA 10.2.9.1: RC, UC and UD QPs may take their receive WQEs from an SRQ of the context.
    if (ia->srq && (ia->srq->context != ctx || special)) return fail<ibv_qp>(EINVAL);
    if (special && !ctx->as->privileged) return fail<ibv_qp>(EPERM);
    // IBA 10.2.4.5: SMI and GSI QPs may share a CQ with each other, but not with other QPs.
    for (const ibv_cq* cq : {ia->send_cq, ia->recv_cq})
        if (special ? cq->refs > cq->special_refs : cq->special_refs > 0) return fail<ibv_qp>(EINVAL);
    const ibv_qp_type hw_type = special ? IBV_QPT_UD : ia->qp_type;
    if (!transport_supported(caps, hw_type)) return fail<ibv_qp>(EINVAL);
    // IBA 10.6.4.3.2: fast register and the reserved L_Key are enabled when the QP is created.
    if (ia->create_flags & ~uint32_t(IBV_QP_CREATE_FAST_REG | IBV_QP_CREATE_RESERVED_LKEY))
        return fail<ibv_qp>(EINVAL);
    if ((ia->create_flags & IBV_QP_CREATE_FAST_REG) && !(caps.flags & hw::CAP_SEND_INV))
        return fail<ibv_qp>(EINVAL);
    if ((ia->create_flags & IBV_QP_CREATE_RESERVED_LKEY) && !(caps.flags & hw::CAP_RESERVED_LKEY))
        return fail<ibv_qp>(EINVAL);
    ibv_qp_cap& cap = ia->cap;
    uint32_t max_inline =
        (caps.flags & hw::CAP_INLINE) ? std::min<uint32_t>(caps.max_inline, hw::INLINE_LEN_MASK) : 0;
    if (ia->srq) cap.max_recv_wr = cap.max_recv_sge = 0;  // the SRQ's capacities apply
    if (cap.max_send_wr > caps.max_qp_wr || cap.max_recv_wr > caps.max_qp_wr ||
        cap.max_send_sge > caps.max_sge || cap.max_recv_sge > caps.max_sge ||
        cap.max_inline_data > max_inline)
        return fail<ibv_qp>(EINVAL);
    uint32_t wqe_max = send_wqe_max_bytes(hw_type, cap.max_send_sge, cap.max_inline_data);
    if (wqe_max > MAX_WQE_BYTES) return fail<ibv_qp>(EINVAL);

    auto* qp = new ibv_qp{};
    qp->context = ctx;
    qp->qp_context = ia->qp_context;
    qp->pd = pd;
    qp->send_cq = ia->send_cq;
    qp->recv_cq = ia->recv_cq;
    qp->state = IBV_QPS_RESET;  // C10-20
    qp->qp_type = hw_type;      // QP0/QP1 are told apart by their QPN
    qp->sq_sig_all = ia->sq_sig_all;
    qp->create_flags = ia->create_flags;
    qp->srq = ia->srq;
    qp->rdd = ia->rdd;
    qp->max_inline_data = cap.max_inline_data;
    qp->sq.log_size = log2_ceil(std::max<uint32_t>(cap.max_send_wr, 1));
    qp->sq.log_stride = log2_ceil(std::max<uint32_t>(wqe_max, hw::WQE_BASIC_BLOCK));
    qp->sq.max_wr = cap.max_send_wr ? 1u << qp->sq.log_size : 0;
    qp->sq.max_sge = cap.max_send_sge;
    qp->rq.log_size = log2_ceil(std::max<uint32_t>(cap.max_recv_wr, 1));
    qp->rq.log_stride = log2_ceil(
        std::max<uint32_t>(sizeof(hw::wqe_recv_header) + cap.max_recv_sge * sizeof(hw::wqe_data_seg), 16));
    qp->rq.max_wr = cap.max_recv_wr ? 1u << qp->rq.log_size : 0;
    qp->rq.max_sge = cap.max_recv_sge;
    bool claimed = false;
    auto undo = [&](int e) {
        if (qp->sq.pa) drv.os().free(qp->sq.pa);
        if (qp->rq.pa) drv.os().free(qp->rq.pa);
        if (special && claimed)
            drv.release_special_qpn(qp->qp_num);
        else if (qp->qp_num)
            drv.free_qpn(qp->qp_num);
        delete qp;
        return fail<ibv_qp>(e);
    };
    if (special) {
        // Fixed QPNs the driver reserves: QP0 (SMI) and QP1 (GSI), one of each per port.
        qp->qp_num = uint32_t(ia->qp_type);
        if (!(claimed = drv.claim_special_qpn(qp->qp_num))) return undo(EBUSY);
    }
    if (!drv.os().alloc_ring(size_t(1) << (qp->sq.log_size + qp->sq.log_stride), &qp->sq.pa) ||
        !drv.os().alloc_ring(size_t(1) << (qp->rq.log_size + qp->rq.log_stride), &qp->rq.pa) ||
        (!special && !drv.alloc_qpn(&qp->qp_num)))
        return undo(ENOMEM);
    qp->hw_ctx = initial_context(qp);
    qp->attr = initial_attr(qp);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_QP, qp->qp_num, 0, &qp->hw_ctx, sizeof qp->hw_ctx);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    cap.max_send_wr = qp->sq.max_wr;
    cap.max_recv_wr = qp->rq.max_wr;
    ++pd->refs;
    ++qp->send_cq->refs;
    ++qp->recv_cq->refs;
    if (qp->srq) ++qp->srq->refs;
    if (qp->rdd) ++qp->rdd->refs;
    if (special) {
        ++qp->send_cq->special_refs;
        ++qp->recv_cq->special_refs;
    }
    ++ctx->qps;
    drv.set_qp_user(qp->qp_num, qp);
    drv.set_qp_event_handler(qp->qp_num, [qp](const hw::eqe& e) { on_qp_event(qp, e); });
    return qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    if (!qp || !attr) return EINVAL;
    ibv_context* ctx = qp->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    uint32_t mask = uint32_t(attr_mask);
    ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
    ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
    if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR) return EINVAL;
    if (fw::check_transition(hw::qp_transport(qp->qp_type), hw::qp_state(cur), hw::qp_state(next), mask))
        return EINVAL;
    // IBA 10.3.1.5: SQD -> SQD may change attributes only once the drain is over (the HCA's
    // sq_draining, read back by QUERY_QP); SQD -> RTS and -> Error are allowed while draining.
    if (cur == IBV_QPS_SQD && next == IBV_QPS_SQD && (mask & ~uint32_t(IBV_QP_STATE | IBV_QP_CUR_STATE))) {
        hw::qp_context q{};
        if (drv.exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &q, sizeof q) == hw::CMD_OK &&
            q.sq_draining)
            return EBUSY;
    }

    // Value checks (immediate errors, the QP is left unchanged).
    uint8_t port_num = (mask & IBV_QP_PORT) ? attr->port_num : qp->hw_ctx.port;
    const hw::port_info* pi = drv.port(port_num);
    if (!pi) return EINVAL;
    if ((mask & IBV_QP_ACCESS_FLAGS) &&
        ((attr->qp_access_flags & ~0xFu) ||
         ((attr->qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) && !(caps.flags & hw::CAP_ATOMIC))))
        return EINVAL;
    if (check_path_values(
            ctx, *pi, mask,
            {attr->pkey_index, (mask & IBV_QP_PATH_MTU) ? uint32_t(attr->path_mtu) : 0u, attr->ah_attr,
             attr->timeout, attr->retry_cnt, attr->rnr_retry, attr->min_rnr_timer, attr->max_rd_atomic,
             attr->max_dest_rd_atomic, attr->rq_psn, attr->sq_psn, attr->dest_qp_num}))
        return EINVAL;
    // Automatic path migration (IBA 10.4): RC and UC only (the transition table has no
    // ALT_PATH / PATH_MIG_STATE for UD).
    if (check_alt_path(ctx, mask, attr->alt_ah_attr, attr->alt_port_num, attr->alt_pkey_index,
                       attr->alt_timeout))
        return EINVAL;
    // The HCA moves the path migration state on its own (Rearm -> Armed; Armed -> Migrated, the
    // alternate path becoming the primary): once an alternate path was loaded, the context to
    // modify is the one the HCA has now.
    if (qp->hw_ctx.alt_port && next != IBV_QPS_RESET) {
        hw::qp_context now{};
        if (hw::cmd_status q = drv.exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &now, sizeof now);
            q != hw::CMD_OK)
            return fw::cmd_errno(q);
        take_paths(qp, now);
    }
    if ((mask & IBV_QP_PATH_MIG_STATE) &&
        !mig_transition_ok(qp->hw_ctx.path_mig_state, attr->path_mig_state, cur, next))
        return EINVAL;

    hw::qp_context c = next == IBV_QPS_RESET ? initial_context(qp) : qp->hw_ctx;
    if (next != IBV_QPS_RESET) {
        if (mask & IBV_QP_PORT) c.port = attr->port_num;
        if (mask & IBV_QP_PKEY_INDEX) c.pkey_index = attr->pkey_index;
        if (mask & IBV_QP_ACCESS_FLAGS) c.access = attr->qp_access_flags;
        if (mask & IBV_QP_QKEY) c.qkey = attr->qkey;
        // The special QPs' Q_Keys are fixed: 0 for QP0 (SMPs), 0x80010000 for QP1 (GSI).
        if (qp->qp_num < fw::FIRST_CONSUMER_QPN) c.qkey = qp->qp_num == 1 ? 0x80010000u : 0;
        if (mask & IBV_QP_PATH_MTU) c.mtu = uint8_t(attr->path_mtu);
        if (qp->qp_type == IBV_QPT_UD && cur == IBV_QPS_RESET) c.mtu = pi->active_mtu;  // UD: port MTU
        if (mask & IBV_QP_AV) set_path(hw::primary_path(c), attr->ah_attr);
        if (mask & IBV_QP_ALT_PATH) {
            const hw::qp_path_ref alt = hw::alternate_path(c);
            set_path(alt, attr->alt_ah_attr);
            alt.port = attr->alt_port_num;
            alt.pkey_index = attr->alt_pkey_index;
            alt.timeout = attr->alt_timeout;
        }
        if (mask & IBV_QP_PATH_MIG_STATE) c.path_mig_state = uint8_t(attr->path_mig_state);
        if (mask & IBV_QP_DEST_QPN) c.dest_qpn = attr->dest_qp_num;
        if (mask & IBV_QP_RQ_PSN) c.rq_psn = attr->rq_psn;
        if (mask & IBV_QP_SQ_PSN) c.sq_psn = attr->sq_psn;
        if (mask & IBV_QP_MAX_QP_RD_ATOMIC) c.max_rd_atomic = attr->max_rd_atomic;
        if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) c.max_dest_rd_atomic = attr->max_dest_rd_atomic;
        if (mask & IBV_QP_MIN_RNR_TIMER) c.min_rnr_timer = attr->min_rnr_timer;
        if (mask & IBV_QP_TIMEOUT) c.timeout = attr->timeout;
        if (mask & IBV_QP_RETRY_CNT) c.retry_cnt = attr->retry_cnt;
        if (mask & IBV_QP_RNR_RETRY) c.rnr_retry = attr->rnr_retry;
        c.sq_draining =
            (next == IBV_QPS_SQD && cur != IBV_QPS_SQD) ? 1 : (next == IBV_QPS_SQD ? c.sq_draining : 0);
        if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) c.sqd_notify = attr->en_sqd_async_notify ? 1 : 0;
    }
    c.state = uint8_t(next);
    hw::modify_qp_in mi{};
    mi.attr_mask = mask;
    mi.cur_state = uint8_t(cur);
    mi.ctx = c;
    hw::cmd_status st = drv.exec(hw::CMD_MODIFY_QP, qp->qp_num, uint32_t(next), &mi, sizeof mi);
    // o10-37.2.29: no Reset while type 2A windows are bound to the QP (it stays as it was).
    if (st == hw::CMD_BAD_STATE && next == IBV_QPS_RESET) return EBUSY;
    if (st != hw::CMD_OK) return fw::cmd_errno(st);

    qp->hw_ctx = c;
    qp->state = next;
    if (next == IBV_QPS_RESET) {
        reset_queues(qp);  // software queue state restarts with the HCA's
        qp->attr = initial_attr(qp);
        return 0;
    }
    ibv_qp_attr& a = qp->attr;
    if (mask & IBV_QP_PORT) a.port_num = attr->port_num;
    if (mask & IBV_QP_PKEY_INDEX) a.pkey_index = attr->pkey_index;
    if (mask & IBV_QP_ACCESS_FLAGS) a.qp_access_flags = attr->qp_access_flags;
    if (mask & IBV_QP_QKEY) a.qkey = attr->qkey;
    if (qp->qp_num < fw::FIRST_CONSUMER_QPN) a.qkey = c.qkey;  // fixed Q_Keys of QP0/QP1
    if (mask & IBV_QP_PATH_MTU) a.path_mtu = attr->path_mtu;
    if (mask & IBV_QP_AV) a.ah_attr = attr->ah_attr;
    if (mask & IBV_QP_DEST_QPN) a.dest_qp_num = attr->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) a.rq_psn = attr->rq_psn;
    if (mask & IBV_QP_SQ_PSN) a.sq_psn = attr->sq_psn;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) a.max_rd_atomic = attr->max_rd_atomic;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) a.min_rnr_timer = attr->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) a.timeout = attr->timeout;
    if (mask & IBV_QP_RETRY_CNT) a.retry_cnt = attr->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) a.rnr_retry = attr->rnr_retry;
    if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) a.en_sqd_async_notify = attr->en_sqd_async_notify;
    if (mask & IBV_QP_ALT_PATH) a.alt_ah_attr = attr->alt_ah_attr;
    if (c.alt_port) {
        // A manual migration (Armed -> Migrated) swapped the paths in the HCA: read them back.
        hw::qp_context now{};
        if (drv.exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &now, sizeof now) == hw::CMD_OK)
            take_paths(qp, now);
    }
    a.sq_draining = c.sq_draining;
    a.qp_state = a.cur_qp_state = next;
    return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int /*attr_mask*/, ibv_qp_init_attr* init_attr) {
    if (!qp || !attr) return EINVAL;
    verb_cost(qp->context);
    hw::qp_context c{};
    hw::cmd_status st = qp->context->driver->exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &c, sizeof c);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    if (c.state <= hw::QPS_ERR) {
        qp->state = ibv_qp_state(c.state);  // the HCA may have moved it (SQEr, Error, drained)
        qp->hw_ctx.state = c.state;
        qp->hw_ctx.sq_draining = c.sq_draining;
        qp->attr.sq_draining = c.sq_draining;
        if (c.alt_port) take_paths(qp, c);  // the HCA may have migrated (IBA 10.4)
    }
    *attr = qp->attr;
    attr->qp_state = attr->cur_qp_state = qp->state;
    attr->cap = {qp->sq.max_wr, qp->rq.max_wr, qp->sq.max_sge, qp->rq.max_sge, qp->max_inline_data};
    if (init_attr) {
        *init_attr = ibv_qp_init_attr{};
        init_attr->qp_context = qp->qp_context;
        init_attr->send_cq = qp->send_cq;
        init_attr->recv_cq = qp->recv_cq;
        init_attr->cap = attr->cap;
        init_attr->qp_type = qp->qp_num < fw::FIRST_CONSUMER_QPN ? ibv_qp_type(qp->qp_num) : qp->qp_type;
        init_attr->sq_sig_all = qp->sq_sig_all;
        init_attr->create_flags = qp->create_flags;
        init_attr->srq = qp->srq;
        init_attr->xrcd = qp->xrcd;
    }
    return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
    if (!qp) return EINVAL;
    ibv_context* ctx = qp->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_QP, qp->qp_num, 0, nullptr, 0);
    if (st == hw::CMD_BAD_STATE) return EBUSY;  // o10-37.2.29: type 2A windows bound; the QP stays
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    // Unacknowledged events are not waited for (libibverbs would block): queued ones are dropped
    // and none is delivered for this QP afterwards.
    drv.clear_qp_event_handler(qp->qp_num);
    drop_events(ctx, qp, object_kind::qp);
    drv.set_qp_user(qp->qp_num, nullptr);
    if (qp->qp_num < fw::FIRST_CONSUMER_QPN)
        drv.release_special_qpn(qp->qp_num);
    else
        drv.free_qpn(qp->qp_num);
    if (qp->xrcd) {  // an XRC target: no queues, PD or CQs
        --qp->xrcd->refs;
        --ctx->qps;
        delete qp;
        return 0;
    }
    drv.os().free(qp->sq.pa);
    drv.os().free(qp->rq.pa);
    --qp->pd->refs;
    --qp->send_cq->refs;
    --qp->recv_cq->refs;
    if (qp->srq) --qp->srq->refs;
    if (qp->rdd) --qp->rdd->refs;
    if (qp->qp_num < 2) {  // QP0 / QP1
        --qp->send_cq->special_refs;
        --qp->recv_cq->special_refs;
    }
    --ctx->qps;
    delete qp;
    return 0;
}

// ---------------------------------------------------------------- send queue

namespace detail {

/// Whether the send queue takes a WQE now (state, room); 0 or errno.
int check_sq_post(const ibv_qp* qp) {
    if (qp->qp_type == IBV_QPT_XRC_RECV) return EINVAL;  // an XRC target has no send queue
    // C10-22, C10-25, C10-29, C10-96: no send posts before RTS.
    if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR) return EINVAL;
    if (qp->sq.producer - qp->sq.completed >= qp->sq.max_wr) return ENOMEM;
    return 0;
}

/// Control segment of the next send WQE of qp.
hw::wqe_ctrl_seg make_ctrl(const ibv_qp* qp, uint8_t opcode, unsigned send_flags, uint64_t wr_id) {
    hw::wqe_ctrl_seg ctrl{};
    ctrl.opcode = opcode;
    if (qp->sq_sig_all || (send_flags & IBV_SEND_SIGNALED)) ctrl.flags |= hw::WQE_FLAG_SIGNALED;
    if (send_flags & IBV_SEND_FENCE) ctrl.flags |= hw::WQE_FLAG_FENCE;
    ctrl.qpn = qp->qp_num;
    ctrl.wqe_index = uint16_t(qp->sq.producer);
    ctrl.wr_id = wr_id;
    return ctrl;
}

/// Sets ds_count of the WQE in buf from its size; returns the size rounded to 16 bytes.
uint32_t finish_wqe(uint8_t* buf, uint32_t off) {
    off = hw::align16(off);
    buf[offsetof(hw::wqe_ctrl_seg, ds_count)] = uint8_t(off / 16);
    return off;
}

}  // namespace detail

namespace {

/// WQE opcode for a send WR on a transport, or -1 if the transport cannot carry it.
int wqe_opcode_for(const hw::hca_caps& caps, ibv_qp_type t, ibv_wr_opcode op) {
    if (t == IBV_QPT_XRC_SEND) t = IBV_QPT_RC;  // o10-39.1.1, o10-45.1.1: an initiator sends as RC
    const bool rd = t == IBV_QPT_RD;            // o10-39, o10-46, o10-50: READ, atomics, binds on RD
    switch (op) {
    case IBV_WR_SEND: return hw::WQE_OP_SEND;
    case IBV_WR_SEND_WITH_IMM: return hw::WQE_OP_SEND_IMM;
    case IBV_WR_RDMA_WRITE: return t == IBV_QPT_UD ? -1 : hw::WQE_OP_RDMA_WRITE;  // C10-84
    case IBV_WR_RDMA_WRITE_WITH_IMM: return t == IBV_QPT_UD ? -1 : hw::WQE_OP_RDMA_WRITE_IMM;
    case IBV_WR_RDMA_READ:  // C10-83: RC (and RD) only
        return (t == IBV_QPT_RC || rd) && (caps.flags & hw::CAP_RDMA_READ) ? hw::WQE_OP_RDMA_READ : -1;
    case IBV_WR_ATOMIC_CMP_AND_SWP:  // o10-46: atomics on RC (and RD) only
        return (t == IBV_QPT_RC || rd) && (caps.flags & hw::CAP_ATOMIC) ? hw::WQE_OP_CMP_SWAP : -1;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        return (t == IBV_QPT_RC || rd) && (caps.flags & hw::CAP_ATOMIC) ? hw::WQE_OP_FETCH_ADD : -1;
    case IBV_WR_SEND_WITH_INV:  // o10-38.2.1: on RC
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_SEND_INV : -1;
    case IBV_WR_LOCAL_INV:  // 10.7.2.5: RC, UC (RD, XRC)
        return t != IBV_QPT_UD && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_LOCAL_INV : -1;
    case IBV_WR_BIND_MW:  // C10-89: RC and UC
        return t != IBV_QPT_UD && (caps.flags & hw::CAP_MW) ? hw::WQE_OP_BIND_MW : -1;
    case IBV_WR_FAST_REG_MR:  // RC only in hcasim (10.7.2.6 would also allow UC)
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_FAST_REG : -1;
    default: return -1;
    }
}

/// Memory management WRs: no data, one segment of their own (or none).
bool is_mem_mgmt(ibv_wr_opcode op) {
    return op == IBV_WR_LOCAL_INV || op == IBV_WR_BIND_MW || op == IBV_WR_FAST_REG_MR;
}

bool is_atomic(ibv_wr_opcode op) {
    return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
bool has_raddr(ibv_wr_opcode op) {
    return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ ||
           is_atomic(op);
}

void put_data_seg(uint8_t* buf, uint32_t* off, const ibv_sge& s) {
    hw::wqe_data_seg d{};
    d.byte_count = s.length == MAX_MSG_BYTES ? 0 : s.length;  // 0 encodes 2^31
    d.lkey = s.lkey;
    d.addr = s.addr;
    put(buf, off, d);
}

/// Checks one send WR (immediate errors); returns 0 or errno.
int check_send_wr(ibv_qp* qp, const ibv_send_wr* wr, uint64_t* total) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    if (int e = check_sq_post(qp)) return e;
    *total = 0;
    if (wqe_opcode_for(caps, qp->qp_type, wr->opcode) < 0) return EINVAL;
    if (is_mem_mgmt(wr->opcode)) return check_mem_mgmt_wr(qp, wr);  // their SGEs are ignored
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->sq.max_sge) return EINVAL;
    if (wr->num_sge > 0 && !wr->sg_list) return EINVAL;
    for (int i = 0; i < wr->num_sge; ++i) *total += wr->sg_list[i].length;
    if (*total > MAX_MSG_BYTES) return EINVAL;  // C10-93
    if (wr->send_flags & IBV_SEND_INLINE) {
        if (wr->opcode == IBV_WR_RDMA_READ || is_atomic(wr->opcode)) return EINVAL;
        if (*total > qp->max_inline_data) return EINVAL;
    }
    if (is_atomic(wr->opcode)) {
        if (wr->wr.atomic.remote_addr & 7) return EINVAL;  // o10-43
        if (*total != 8) return EINVAL;
    }
    if (qp->qp_type == IBV_QPT_XRC_SEND && wr->xrc_remote_srqn > 0xFFFFFFu) return EINVAL;
    // o10-1: every RD WR names an EE context (of this context) and a destination QP.
    if (qp->qp_type == IBV_QPT_RD &&
        (!wr->rd.eec || wr->rd.eec->context != qp->context || wr->rd.remote_qpn > 0xFFFFFFu))
        return EINVAL;
    // o10-51: an RD message is at most the HCA's RD maximum message size (Query HCA).
    if (qp->qp_type == IBV_QPT_RD && *total > caps.max_rd_msg) return EINVAL;
    if (qp->qp_type == IBV_QPT_UD) {
        const ibv_ah* ah = wr->wr.ud.ah;
        if (!ah) return EINVAL;
        if (ah->pd != qp->pd) return EINVAL;                                           // C10-10
        if (ah->attr.port_num && ah->attr.port_num != qp->hw_ctx.port) return EINVAL;  // o10-2.1.1
        if (wr->wr.ud.remote_qpn > 0xFFFFFFu) return EINVAL;
    }
    return 0;
}

/// Builds a send WQE into buf; returns its size in bytes (16-byte multiple) or 0 on EFAULT.
uint32_t build_send_wqe(ibv_qp* qp, const ibv_send_wr* wr, uint64_t total, uint8_t* buf) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    uint8_t opcode = uint8_t(wqe_opcode_for(caps, qp->qp_type, wr->opcode));
    switch (wr->opcode) {
    case IBV_WR_BIND_MW:
        return build_bind_wqe(qp, wr->wr_id, wr->send_flags, wr->bind_mw.mw->rkey, bind_wr_key(wr),
                              wr->bind_mw.bind_info, 0, buf);
    case IBV_WR_FAST_REG_MR: return build_fast_reg_wqe(qp, wr, buf);
    case IBV_WR_LOCAL_INV: {
        uint32_t off = 0;
        hw::wqe_ctrl_seg ctrl = make_ctrl(qp, opcode, wr->send_flags, wr->wr_id);
        ctrl.imm = wr->invalidate_rkey;
        put(buf, &off, ctrl);
        return finish_wqe(buf, off);
    }
    default: break;
    }
    uint32_t off = 0;
    hw::wqe_ctrl_seg ctrl = make_ctrl(qp, opcode, wr->send_flags, wr->wr_id);
    if (wr->send_flags & IBV_SEND_SOLICITED) ctrl.flags |= hw::WQE_FLAG_SOLICITED;
    bool inl = wr->send_flags & IBV_SEND_INLINE;
    if (inl) ctrl.flags |= hw::WQE_FLAG_INLINE;
    ctrl.imm = wr->opcode == IBV_WR_SEND_WITH_INV ? wr->invalidate_rkey : wr->imm_data;
    put(buf, &off, ctrl);
    if (has_raddr(wr->opcode)) {
        hw::wqe_raddr_seg r{};
        r.remote_va = is_atomic(wr->opcode) ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
        r.rkey = is_atomic(wr->opcode) ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
        put(buf, &off, r);
    }
    if (is_atomic(wr->opcode)) {
        hw::wqe_atomic_seg a{};
        if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
            a.swap_add = wr->wr.atomic.swap;
            a.compare = wr->wr.atomic.compare_add;
        } else {
            a.swap_add = wr->wr.atomic.compare_add;
        }
        put(buf, &off, a);
    }
    if (qp->qp_type == IBV_QPT_UD) {
        const ibv_ah_attr& ah = wr->wr.ud.ah->attr;
        hw::wqe_ud_seg u{};
        u.dest_qpn = wr->wr.ud.remote_qpn;
        // C10-15: a Q_Key with the high-order bit set means the QP's own Q_Key; the HCA applies
        // that rule when it sends (so a Modify QP between post and send takes effect).
        u.qkey = wr->wr.ud.remote_qkey;
        u.dlid = ah.dlid;
        u.sl = ah.sl;
        u.src_path_bits = ah.src_path_bits;
        u.grh = ah.is_global ? 1 : 0;
        u.sgid_index = ah.grh.sgid_index;
        u.hop_limit = ah.grh.hop_limit;
        u.tclass = ah.grh.traffic_class;
        u.flow_label = ah.grh.flow_label & 0xFFFFFu;
        std::memcpy(u.dgid, ah.grh.dgid.raw, 16);
        put(buf, &off, u);
    } else if (qp->qp_type == IBV_QPT_RD) {
        // The EE context is checked by the HCA when the message starts (its state and domain
        // may change between post and send: o10-8, o10-12 ...).
        const hw::wqe_rd_seg r{wr->rd.eec->eecn, wr->rd.remote_qpn, wr->rd.remote_qkey, 0};
        put(buf, &off, r);
    }
    if (inl) {
        hw::wqe_inline_seg h{hw::INLINE_SEG_FLAG | uint32_t(total)};
        uint32_t start = off;
        put(buf, &off, h);
        fw::address_space& as = *qp->context->as;
        for (int i = 0; i < wr->num_sge; ++i) {
            const ibv_sge& s = wr->sg_list[i];
            if (s.length && !as.read(s.addr, buf + off, s.length)) return 0;
            off += s.length;
        }
        off = start + hw::align16(off - start);
        qp->context->driver->bus().cpu_cost(cpu_op::memcpy_64b, uint32_t((total + 63) / 64));
    } else {
        for (int i = 0; i < wr->num_sge; ++i)
            if (wr->sg_list[i].length) put_data_seg(buf, &off, wr->sg_list[i]);  // zero length: no segment
    }
    return finish_wqe(buf, off);
}

}  // namespace

namespace detail {

/// Writes a built WQE into the next send slot.
void put_send_wqe(ibv_qp* qp, const uint8_t* buf, uint32_t bytes) {
    host_bus& bus = qp->context->driver->bus();
    uint64_t slot =
        qp->sq.pa + (uint64_t(qp->sq.producer & ((1u << qp->sq.log_size) - 1)) << qp->sq.log_stride);
    // The HCA reads the slot only after the doorbell: the store need not wait for the costs
    // charged so far, which the doorbell's MMIO write waits for in one go.
    bus.mem_write_early(slot, buf, bytes);
    bus.cpu_cost_deferred(cpu_op::build_wqe);
    ++qp->sq.producer;
}

/// Tells the HCA about `posted` (>= 1) new send WQEs, the last of which is last[0, last_bytes).
void ring_send(ibv_qp* qp, uint32_t posted, const uint8_t* last, uint32_t last_bytes) {
    ibv_context* ctx = qp->context;
    uint32_t window = (last_bytes + hw::WQE_BASIC_BLOCK - 1) & ~(hw::WQE_BASIC_BLOCK - 1);
    if (ctx->driver->options().use_inline_window && posted == 1 && window <= hw::INLINE_WINDOW_BYTES) {
        // The window write is the doorbell for this WQE (producer = wqe_index + 1).
        ctx->driver->bus().mmio_write(hca_driver::uar_offset(ctx->uar, hw::UAR_INLINE_WQE), last, window);
    } else {
        mmio64(ctx, hw::UAR_SQ_DOORBELL, hw::sq_doorbell(qp->qp_num, uint16_t(qp->sq.producer)));
    }
}

}  // namespace detail

int ibv_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    if (bad_wr) *bad_wr = nullptr;
    if (!qp) return EINVAL;
    host_bus& bus = qp->context->driver->bus();
    bus.cpu_cost_deferred(cpu_op::verb_call);  // waited for with the doorbell (or before returning)
    uint8_t buf[4096];
    uint32_t posted = 0, last_bytes = 0;
    int err = 0;
    for (; wr; wr = wr->next) {
        uint64_t total = 0;
        err = check_send_wr(qp, wr, &total);
        uint32_t bytes = 0;
        if (!err) {
            std::memset(buf, 0, 1u << qp->sq.log_stride);
            bytes = build_send_wqe(qp, wr, total, buf);
            if (!bytes) err = EFAULT;               // inline source not mapped
            if (qp->qp_type == IBV_QPT_XRC_SEND) {  // the target's XRC SRQ (IBA 10.2.10)
                const uint32_t srqn = wr->xrc_remote_srqn;
                std::memcpy(buf + offsetof(hw::wqe_ctrl_seg, xrc_srqn), &srqn, sizeof srqn);
            }
        }
        if (err) {
            if (bad_wr) *bad_wr = wr;  // C10-136: this WR and the rest are not placed on the queue
            break;
        }
        put_send_wqe(qp, buf, bytes);
        after_post(wr);
        ++posted;
        last_bytes = bytes;
    }
    if (posted) ring_send(qp, posted, buf, last_bytes);
    bus.cpu_settle();
    return err;
}

// ---------------------------------------------------------------- receive queue

namespace detail {

/// Writes a receive WQE for `wr` at the ring's producer slot (a QP's receive queue or an SRQ)
/// and advances the producer; `buf` is scratch for the WQE image.
void put_recv_wqe(host_bus& bus, ibv_wq_ring& r, const ibv_recv_wr& wr, uint8_t* buf) {
    uint32_t off = sizeof(hw::wqe_recv_header);
    uint16_t nseg = 0;
    for (int i = 0; i < wr.num_sge; ++i) {
        if (!wr.sg_list[i].length) continue;  // zero length cannot be encoded (0 means 2^31)
        put_data_seg(buf, &off, wr.sg_list[i]);
        ++nseg;
    }
    hw::wqe_recv_header h{};
    h.wr_id = wr.wr_id;
    h.num_sge = nseg;
    h.wqe_index = uint16_t(r.producer);
    std::memcpy(buf, &h, sizeof h);
    bus.mem_write(r.pa + (uint64_t(r.producer & ((1u << r.log_size) - 1)) << r.log_stride), buf, off);
    bus.cpu_cost(cpu_op::build_recv_wqe);
    ++r.producer;
}

}  // namespace detail

int ibv_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    if (bad_wr) *bad_wr = nullptr;
    if (!qp) return EINVAL;
    ibv_context* ctx = qp->context;
    host_bus& bus = ctx->driver->bus();
    bus.cpu_cost(cpu_op::verb_call);
    uint8_t buf[4096];
    uint32_t posted = 0;
    int err = 0;
    for (; wr; wr = wr->next) {
        // C10-22, C10-97.2.1: receive posts are refused only in Reset; o10-51.2.2: never on a
        // QP attached to an SRQ.
        if (qp->srq || qp->state == IBV_QPS_RESET || qp->qp_type == IBV_QPT_XRC_SEND ||
            qp->qp_type == IBV_QPT_XRC_RECV)  // XRC: receive WRs go to XRC SRQs
            err = EINVAL;
        else if (qp->rq.producer - qp->rq.completed >= qp->rq.max_wr)
            err = ENOMEM;
        else if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->rq.max_sge || (wr->num_sge && !wr->sg_list))
            err = EINVAL;
        if (err) {
            if (bad_wr) *bad_wr = wr;
            break;
        }
        put_recv_wqe(bus, qp->rq, *wr, buf);
        ++posted;
    }
    if (posted) mmio64(ctx, hw::UAR_RQ_DOORBELL, hw::rq_doorbell(qp->qp_num, uint16_t(qp->rq.producer)));
    return err;
}

}  // namespace hcasim::verbs
