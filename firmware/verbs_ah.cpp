// Verbs on address handles (create, destroy) and multicast group attachment of UD QPs.
#include <cerrno>
#include <cstring>

#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- AH

namespace detail {

int check_path_values(ibv_context* ctx, const hw::port_info& pi, uint32_t mask, const path_values& v) {
    const hw::hca_caps& caps = ctx->driver->caps();
    if ((mask & IBV_QP_PKEY_INDEX) && v.pkey_index >= pi.pkey_table_len) return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) && (v.path_mtu < uint32_t(IBV_MTU_256) ||
                                     v.path_mtu > uint32_t(IBV_MTU_4096) || v.path_mtu > pi.max_mtu))
        return EINVAL;
    if ((mask & IBV_QP_AV) && check_ah_attr(ctx, v.ah)) return EINVAL;
    if ((mask & IBV_QP_TIMEOUT) && v.timeout > 31) return EINVAL;
    if ((mask & IBV_QP_RETRY_CNT) && v.retry_cnt > 7) return EINVAL;
    if ((mask & IBV_QP_RNR_RETRY) && v.rnr_retry > 7) return EINVAL;
    if ((mask & IBV_QP_MIN_RNR_TIMER) && v.min_rnr_timer > 31) return EINVAL;
    if ((mask & IBV_QP_RQ_PSN) && v.rq_psn > 0xFFFFFFu) return EINVAL;
    if ((mask & IBV_QP_SQ_PSN) && v.sq_psn > 0xFFFFFFu) return EINVAL;
    if ((mask & IBV_QP_DEST_QPN) && v.dest > 0xFFFFFFu) return EINVAL;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && v.max_rd_atomic > caps.max_qp_init_rd_atom) return EINVAL;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && v.max_dest_rd_atomic > caps.max_qp_rd_atom) return EINVAL;
    return 0;
}

int check_ah_attr(ibv_context* ctx, const ibv_ah_attr& a) {
    const hw::port_info* pi = ctx->driver->port(a.port_num ? a.port_num : 1);
    if (!pi) return EINVAL;
    if (a.sl > 15) return EINVAL;
    if (a.is_global && (a.grh.sgid_index >= pi->gid_table_len || a.grh.flow_label > 0xFFFFFu)) return EINVAL;
    // A multicast destination needs the GRH that carries its MGID (IBA 8.4.1).
    if (a.dlid >= 0xC000 && a.dlid != 0xFFFF && !(a.is_global && a.grh.dgid.raw[0] == 0xFF)) return EINVAL;
    return 0;
}

}  // namespace detail

ibv_ah* ibv_create_ah(ibv_pd* pd, const ibv_ah_attr* attr) {
    if (!pd || !attr) return fail<ibv_ah>(EINVAL);
    verb_cost(pd->context);
    if (int e = check_ah_attr(pd->context, *attr)) return fail<ibv_ah>(e);
    ++pd->refs;
    ++pd->context->ahs;
    return new ibv_ah{pd->context, pd, *attr};
}

int ibv_destroy_ah(ibv_ah* ah) {
    if (!ah) return EINVAL;
    --ah->pd->refs;
    --ah->context->ahs;
    delete ah;
    return 0;
}

// ---------------------------------------------------------------- multicast

namespace {
int mcast_cmd(ibv_qp* qp, const ibv_gid* gid, uint16_t lid, uint16_t opcode) {
    if (!qp || !gid) return EINVAL;
    verb_cost(qp->context);
    hca_driver& drv = *qp->context->driver;
    if (!(drv.caps().flags & hw::CAP_MCAST)) return EOPNOTSUPP;
    // o10-34: UD QPs only; an MGID (first byte 0xFF) and a multicast LID.
    if (qp->qp_type != IBV_QPT_UD || gid->raw[0] != 0xFF || lid < 0xC000 || lid == 0xFFFF) return EINVAL;
    hw::mcast_in in{};
    std::memcpy(in.mgid, gid->raw, 16);
    in.mlid = lid;
    const hw::cmd_status st = drv.exec(opcode, qp->qp_num, 0, &in, sizeof in);
    if (st == hw::CMD_BAD_RESOURCE) return ENOMEM;  // the group or the HCA's table is full
    return st == hw::CMD_OK ? 0 : fw::cmd_errno(st);
}
}  // namespace

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast_cmd(qp, gid, lid, hw::CMD_ATTACH_MCAST);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast_cmd(qp, gid, lid, hw::CMD_DETACH_MCAST);
}

}  // namespace hcasim::verbs
