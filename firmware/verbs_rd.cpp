// Verbs of reliable datagram (IBA 10.2.7, 10.2.8, 10.3.1; hcasim's own: libibverbs has none):
// reliable datagram domains and EE contexts. RD QPs are created, modified and posted to with the
// QP verbs (verbs_qp.cpp: IBV_QPT_RD, ibv_qp_init_attr::rdd, ibv_send_wr::rd).
#include <cerrno>
#include <cstring>

#include "firmware/qp_state_machine.h"
#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- reliable datagram domains

ibv_rdd* ibv_alloc_rdd(ibv_context* ctx) {
    if (!ctx) return fail<ibv_rdd>(EINVAL);
    verb_cost(ctx);
    if (!(ctx->driver->caps().flags & hw::CAP_RD)) return fail<ibv_rdd>(EOPNOTSUPP);
    uint32_t n;
    if (!ctx->driver->alloc_rddn(&n)) return fail<ibv_rdd>(ENOMEM);
    ++ctx->rdds;
    return new ibv_rdd{ctx, n, 0};
}

int ibv_dealloc_rdd(ibv_rdd* rdd) {
    if (!rdd) return EINVAL;
    verb_cost(rdd->context);
    if (rdd->refs) return EBUSY;  // o10-10: the domain stays while RD QPs or EE contexts use it
    rdd->context->driver->free_rddn(rdd->handle);
    --rdd->context->rdds;
    delete rdd;
    return 0;
}

// ---------------------------------------------------------------- EE contexts

namespace {

/// Takes the paths and the path migration state as the HCA has them (`now`, from QUERY_EEC)
/// into the EE context's software copy and its attributes (o10-23: the HCA migrates itself).
void take_eec_paths(ibv_eec* eec, const hw::eec_context& now) {
    hw::eec_context& c = eec->hw_ctx;
    c.dlid = now.dlid;
    c.sl = now.sl;
    c.src_path_bits = now.src_path_bits;
    c.pkey_index = now.pkey_index;
    c.timeout = now.timeout;
    c.alt_dlid = now.alt_dlid;
    c.alt_sl = now.alt_sl;
    c.alt_src_path_bits = now.alt_src_path_bits;
    c.alt_pkey_index = now.alt_pkey_index;
    c.alt_timeout = now.alt_timeout;
    c.path_mig_state = now.path_mig_state;
    ibv_eec_attr& a = eec->attr;
    a.ah_attr.dlid = c.dlid;
    a.ah_attr.sl = c.sl;
    a.ah_attr.src_path_bits = c.src_path_bits;
    a.ah_attr.port_num = c.port;
    a.pkey_index = c.pkey_index;
    a.timeout = c.timeout;
    a.alt_ah_attr.dlid = c.alt_dlid;
    a.alt_ah_attr.sl = c.alt_sl;
    a.alt_ah_attr.src_path_bits = c.alt_src_path_bits;
    a.alt_ah_attr.port_num = c.alt_port;
    a.alt_port_num = c.alt_port;
    a.alt_pkey_index = c.alt_pkey_index;
    a.alt_timeout = c.alt_timeout;
    a.path_mig_state = ibv_mig_state(c.path_mig_state);
}

}  // namespace

ibv_eec* ibv_create_eec(ibv_rdd* rdd) {
    if (!rdd) return fail<ibv_eec>(EINVAL);
    ibv_context* ctx = rdd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    uint32_t n;
    if (!drv.alloc_eecn(&n)) return fail<ibv_eec>(ENOMEM);
    auto* eec = new ibv_eec{};
    eec->context = ctx;
    eec->rdd = rdd;
    eec->eecn = n;
    eec->state = IBV_QPS_RESET;
    eec->hw_ctx.eecn = n;
    eec->hw_ctx.rdd = rdd->handle;  // o10-7: one domain, fixed
    eec->hw_ctx.port = 1;
    eec->hw_ctx.mtu = hw::MTU_256;
    eec->attr.port_num = 1;
    eec->attr.path_mtu = IBV_MTU_256;
    const hw::cmd_status st = drv.exec(hw::CMD_CREATE_EEC, n, 0, &eec->hw_ctx, sizeof eec->hw_ctx);
    if (st != hw::CMD_OK) {
        drv.free_eecn(n);
        delete eec;
        return fail<ibv_eec>(fw::cmd_errno(st));
    }
    ++rdd->refs;
    ++ctx->eecs;
    // o10-65: an error of the EE context's own moved it to Error; o10-23: it migrated, or a
    // migration request to it failed. The event names it.
    drv.set_eec_event_handler(n, [eec](const hw::eqe& e) {
        ibv_async_event ev{};
        if (!event_type_of(e, &ev.event_type)) return;
        if (e.type == hw::EQE_EEC_ERR) {
            eec->state = IBV_QPS_ERR;
            eec->hw_ctx.state = hw::QPS_ERR;
        }
        ev.element.eec = eec;
        queue_event(eec->context, ev);
    });
    return eec;
}

int ibv_modify_eec(ibv_eec* eec, ibv_eec_attr* attr, int attr_mask) {
    if (!eec || !attr) return EINVAL;
    ibv_context* ctx = eec->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    const uint32_t mask = uint32_t(attr_mask);
    const ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_eec_state : eec->state;
    const ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->eec_state : cur;
    if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR) return EINVAL;
    if (fw::check_eec_transition(hw::qp_state(cur), hw::qp_state(next), mask)) return EINVAL;  // o10-11
    const uint8_t port_num = (mask & IBV_QP_PORT) ? attr->port_num : eec->hw_ctx.port;
    const hw::port_info* pi = drv.port(port_num);
    if (!pi) return EINVAL;
    // o10-58: the P_Key index refers to the port's table.
    if (check_path_values(
            ctx, *pi, mask,
            {attr->pkey_index, (mask & IBV_QP_PATH_MTU) ? uint32_t(attr->path_mtu) : 0u, attr->ah_attr,
             attr->timeout, attr->retry_cnt, attr->rnr_retry, attr->min_rnr_timer, attr->max_rd_atomic,
             attr->max_dest_rd_atomic, attr->rq_psn, attr->sq_psn, attr->dest_eecn}))
        return EINVAL;
    // o10-23: automatic path migration as for RC QPs (Modify QP): the alternate path's values,
    // then the arcs of Figure 127 from the state the HCA has now (it arms and migrates itself).
    if (check_alt_path(ctx, mask, attr->alt_ah_attr, attr->alt_port_num, attr->alt_pkey_index,
                       attr->alt_timeout))
        return EINVAL;
    if (eec->hw_ctx.alt_port && next != IBV_QPS_RESET) {
        hw::eec_context now{};
        if (hw::cmd_status q = drv.exec(hw::CMD_QUERY_EEC, eec->eecn, 0, nullptr, 0, &now, sizeof now);
            q != hw::CMD_OK)
            return fw::cmd_errno(q);
        take_eec_paths(eec, now);
    }
    if ((mask & IBV_QP_PATH_MIG_STATE) &&
        !mig_transition_ok(eec->hw_ctx.path_mig_state, attr->path_mig_state, cur, next))
        return EINVAL;

    hw::eec_context c = eec->hw_ctx;
    if (next == IBV_QPS_RESET) {
        c = hw::eec_context{};
        c.eecn = eec->eecn;
        c.rdd = eec->rdd->handle;
        c.port = 1;
        c.mtu = hw::MTU_256;
    } else {
        if (mask & IBV_QP_PORT) c.port = attr->port_num;
        if (mask & IBV_QP_PKEY_INDEX) c.pkey_index = attr->pkey_index;
        if (mask & IBV_QP_PATH_MTU) c.mtu = uint8_t(attr->path_mtu);
        if (mask & IBV_QP_AV) {  // o10-1: the destination is the EE context's, set only here
            c.dlid = attr->ah_attr.dlid;
            c.sl = attr->ah_attr.sl;
            c.src_path_bits = attr->ah_attr.src_path_bits;
        }
        if (mask & IBV_QP_ALT_PATH) {
            c.alt_dlid = attr->alt_ah_attr.dlid;
            c.alt_sl = attr->alt_ah_attr.sl;
            c.alt_src_path_bits = attr->alt_ah_attr.src_path_bits;
            c.alt_port = attr->alt_port_num;
            c.alt_pkey_index = attr->alt_pkey_index;
            c.alt_timeout = attr->alt_timeout;
        }
        if (mask & IBV_QP_PATH_MIG_STATE) c.path_mig_state = uint8_t(attr->path_mig_state);
        if (mask & IBV_QP_DEST_QPN) c.dest_eecn = attr->dest_eecn;
        if (mask & IBV_QP_RQ_PSN) c.rq_psn = attr->rq_psn;
        if (mask & IBV_QP_SQ_PSN) c.sq_psn = attr->sq_psn;
        if (mask & IBV_QP_MAX_QP_RD_ATOMIC) c.max_rd_atomic = attr->max_rd_atomic;
        if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) c.max_dest_rd_atomic = attr->max_dest_rd_atomic;
        if (mask & IBV_QP_MIN_RNR_TIMER) c.min_rnr_timer = attr->min_rnr_timer;
        if (mask & IBV_QP_TIMEOUT) c.timeout = attr->timeout;
        if (mask & IBV_QP_RETRY_CNT) c.retry_cnt = attr->retry_cnt;
        if (mask & IBV_QP_RNR_RETRY) c.rnr_retry = attr->rnr_retry;
    }
    c.state = uint8_t(next);
    hw::modify_eec_in in{};
    in.attr_mask = mask;
    in.cur_state = uint8_t(cur);
    in.ctx = c;
    const hw::cmd_status st = drv.exec(hw::CMD_MODIFY_EEC, eec->eecn, uint32_t(next), &in, sizeof in);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    eec->hw_ctx = c;
    eec->state = next;
    ibv_eec_attr& a = eec->attr;
    if (next == IBV_QPS_RESET) {
        a = ibv_eec_attr{};
        a.port_num = 1;
        a.path_mtu = IBV_MTU_256;
    } else {
        a.port_num = c.port;
        a.pkey_index = c.pkey_index;
        a.path_mtu = ibv_mtu(c.mtu);
        if (mask & IBV_QP_AV) a.ah_attr = attr->ah_attr;
        a.dest_eecn = c.dest_eecn;
        a.max_rd_atomic = c.max_rd_atomic;
        a.max_dest_rd_atomic = c.max_dest_rd_atomic;
        a.min_rnr_timer = c.min_rnr_timer;
        a.timeout = c.timeout;
        a.retry_cnt = c.retry_cnt;
        a.rnr_retry = c.rnr_retry;
        if (mask & IBV_QP_ALT_PATH) a.alt_ah_attr = attr->alt_ah_attr;
        if (c.alt_port) {
            // A manual migration (Armed -> Migrated) swapped the paths in the HCA: read them back.
            hw::eec_context now{};
            if (drv.exec(hw::CMD_QUERY_EEC, eec->eecn, 0, nullptr, 0, &now, sizeof now) == hw::CMD_OK)
                take_eec_paths(eec, now);
        }
    }
    return 0;
}

int ibv_query_eec(ibv_eec* eec, ibv_eec_attr* attr) {
    if (!eec || !attr) return EINVAL;
    verb_cost(eec->context);
    hw::eec_context c{};
    const hw::cmd_status st =
        eec->context->driver->exec(hw::CMD_QUERY_EEC, eec->eecn, 0, nullptr, 0, &c, sizeof c);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    if (c.state <= hw::QPS_ERR) eec->state = ibv_qp_state(c.state);    // the HCA may have moved it
    if (c.alt_port && c.state <= hw::QPS_ERR) take_eec_paths(eec, c);  // the HCA may have migrated
    *attr = eec->attr;
    attr->eec_state = attr->cur_eec_state = eec->state;
    attr->sq_psn = c.sq_psn;
    attr->rq_psn = c.rq_psn;
    return 0;
}

int ibv_destroy_eec(ibv_eec* eec) {
    if (!eec) return EINVAL;
    ibv_context* ctx = eec->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    const hw::cmd_status st = drv.exec(hw::CMD_DESTROY_EEC, eec->eecn, 0, nullptr, 0);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    drv.clear_eec_event_handler(eec->eecn);
    drop_events(ctx, eec, object_kind::eec);
    drv.free_eecn(eec->eecn);
    --eec->rdd->refs;
    --ctx->eecs;
    delete eec;
    return 0;
}

}  // namespace hcasim::verbs
