// The QP state machine table (IBA Figure 126, C10-19).
#include <gtest/gtest.h>

#include <cerrno>

#include "firmware/qp_state_machine.h"

using namespace hcasim;
using namespace hcasim::fw;
using namespace hcasim::hw;

namespace {
const qp_transport TRANSPORTS[] = {QPT_RC, QPT_UC, QPT_UD};
const qp_state STATES[] = {QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_SQD, QPS_SQE, QPS_ERR};
}  // namespace

TEST(QpStateTable, every_legal_transition_accepts_required_and_optional_and_rejects_missing_required) {
    size_t rows;
    const qp_transition_row* t = qp_transition_table(&rows);
    int checked = 0;
    for (size_t r = 0; r < rows; ++r) {
        for (qp_transport tr : TRANSPORTS) {
            int slot = transport_slot(tr);
            if (!(t[r].transports & (1u << slot))) continue;
            uint32_t req = t[r].required[slot] | QP_ATTR_STATE, opt = t[r].optional[slot];
            EXPECT_EQ(check_transition(tr, t[r].cur, t[r].next, req), 0) << r << " " << int(tr);
            EXPECT_EQ(check_transition(tr, t[r].cur, t[r].next, req | opt), 0) << r << " " << int(tr);
            for (uint32_t bit = 1; bit; bit <<= 1) {
                if (t[r].required[slot] & bit) {
                    EXPECT_EQ(check_transition(tr, t[r].cur, t[r].next, req & ~bit), EINVAL)
                        << r << " bit " << bit;
                }
            }
            // An attribute neither required nor optional is refused.
            for (uint32_t bit = 2; bit <= QP_ATTR_DEST_QPN; bit <<= 1) {
                if (!((req | opt) & bit)) {
                    EXPECT_EQ(check_transition(tr, t[r].cur, t[r].next, req | bit), EINVAL)
                        << r << " bit " << bit;
                }
            }
            ++checked;
        }
    }
    EXPECT_EQ(checked, 23 * 3 - 3);  // the three SQEr rows exist only for UC and UD
}

TEST(QpStateTable, libibverbs_required_attributes) {
    EXPECT_EQ(required_attrs(QPT_RC, QPS_RESET, QPS_INIT),
              QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_ACCESS_FLAGS);
    EXPECT_EQ(required_attrs(QPT_UD, QPS_RESET, QPS_INIT), QP_ATTR_PKEY_INDEX | QP_ATTR_PORT | QP_ATTR_QKEY);
    EXPECT_EQ(required_attrs(QPT_RC, QPS_INIT, QPS_RTR), QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN |
                                                             QP_ATTR_RQ_PSN | QP_ATTR_MAX_DEST_RD_ATOMIC |
                                                             QP_ATTR_MIN_RNR_TIMER);
    EXPECT_EQ(required_attrs(QPT_UC, QPS_INIT, QPS_RTR),
              QP_ATTR_AV | QP_ATTR_PATH_MTU | QP_ATTR_DEST_QPN | QP_ATTR_RQ_PSN);
    EXPECT_EQ(required_attrs(QPT_UD, QPS_INIT, QPS_RTR), 0u);
    EXPECT_EQ(required_attrs(QPT_RC, QPS_RTR, QPS_RTS), QP_ATTR_TIMEOUT | QP_ATTR_RETRY_CNT |
                                                            QP_ATTR_RNR_RETRY | QP_ATTR_SQ_PSN |
                                                            QP_ATTR_MAX_QP_RD_ATOMIC);
    EXPECT_EQ(required_attrs(QPT_UD, QPS_RTR, QPS_RTS), QP_ATTR_SQ_PSN);
    EXPECT_EQ(optional_attrs(QPT_RC, QPS_RTS, QPS_SQD), QP_ATTR_EN_SQD_ASYNC_NOTIFY);
}

TEST(QpStateTable, illegal_transitions_rejected) {
    for (qp_transport tr : TRANSPORTS) {
        EXPECT_EQ(check_transition(tr, QPS_RESET, QPS_RTR, QP_ATTR_STATE | 0x1FFFFF), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_RESET, QPS_RTS, QP_ATTR_STATE), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_INIT, QPS_RTS, QP_ATTR_STATE | QP_ATTR_SQ_PSN), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_RTR, QPS_RTR, 0), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_RTR, QPS_SQD, QP_ATTR_STATE), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_RTS, QPS_RTR, QP_ATTR_STATE), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_SQD, QPS_INIT, QP_ATTR_STATE), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_ERR, QPS_RTS, QP_ATTR_STATE), EINVAL);
        EXPECT_EQ(check_transition(tr, QPS_ERR, QPS_INIT, QP_ATTR_STATE), EINVAL);
        for (qp_state s : STATES)  // SQEr is entered by the HCA only, never through Modify QP
            EXPECT_EQ(check_transition(tr, s, QPS_SQE, QP_ATTR_STATE), EINVAL);
    }
}

TEST(QpStateTable, C10_19_any_state_to_reset_and_error_and_no_sqer_for_rc) {
    for (qp_transport tr : TRANSPORTS)
        for (qp_state s : STATES) {
            bool exists = !(tr == QPT_RC && s == QPS_SQE);
            EXPECT_EQ(check_transition(tr, s, QPS_RESET, QP_ATTR_STATE), exists ? 0 : EINVAL);
            EXPECT_EQ(check_transition(tr, s, QPS_ERR, QP_ATTR_STATE), exists ? 0 : EINVAL);
        }
    EXPECT_EQ(check_transition(QPT_RC, QPS_SQE, QPS_RTS, QP_ATTR_STATE), EINVAL);
    EXPECT_EQ(check_transition(QPT_UC, QPS_SQE, QPS_RTS, QP_ATTR_STATE), 0);
    EXPECT_EQ(check_transition(QPT_UD, QPS_SQE, QPS_RTS, QP_ATTR_STATE | QP_ATTR_QKEY), 0);
    EXPECT_STREQ(qp_state_name(QPS_SQD), "SQD");
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
