// Shared by the firmware tests on the fake bus: take a QP one state forward with the
// attributes that transition requires (fixed, plausible values).
#pragma once
#include "firmware/verbs.h"

namespace hcasim::test {

/// Modifies `q` to state `s`, supplying the attributes Reset->Init, Init->RTR and RTR->RTS
/// require for its transport; any other target state is requested with the state alone.
inline int modify_qp_to(verbs::ibv_qp* q, verbs::ibv_qp_state s) {
    using namespace verbs;
    ibv_qp_attr a{};
    a.qp_state = s;
    int mask = IBV_QP_STATE;
    if (s == IBV_QPS_INIT && q->state == IBV_QPS_RESET) {
        a.port_num = 1;
        a.pkey_index = 0;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        a.qkey = 0x11111111;
        mask |=
            IBV_QP_PORT | IBV_QP_PKEY_INDEX | (q->qp_type == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
    } else if (s == IBV_QPS_RTR && q->qp_type != IBV_QPT_UD) {
        a.ah_attr.dlid = 2;
        a.ah_attr.port_num = 1;
        a.path_mtu = IBV_MTU_1024;
        a.dest_qp_num = 0x77;
        a.rq_psn = 100;
        mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        if (q->qp_type == IBV_QPT_RC) {
            a.max_dest_rd_atomic = 4;
            a.min_rnr_timer = 12;
            mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        }
    } else if (s == IBV_QPS_RTS && q->state == IBV_QPS_RTR) {
        a.sq_psn = 200;
        mask |= IBV_QP_SQ_PSN;
        if (q->qp_type == IBV_QPT_RC) {
            a.timeout = 14;
            a.retry_cnt = 7;
            a.rnr_retry = 7;
            a.max_rd_atomic = 4;
            mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
        }
    }
    return ibv_modify_qp(q, &a, mask);
}

}  // namespace hcasim::test
