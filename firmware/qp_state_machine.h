// QP state machine of IBA Figure 126 (C10-19): legal transitions per transport and the
// Modify QP attributes each one requires or allows (libibverbs ibv_modify_qp table).
#pragma once
#include <cstddef>
#include <cstdint>
#include "tlm_if/commands.h"
#include "tlm_if/contexts.h"

namespace hcasim::fw {

/// One row of the transition table: a (current, next) pair and its attribute masks per transport.
struct qp_transition_row {
    hw::qp_state cur;      ///< state before Modify QP
    hw::qp_state next;     ///< state requested
    uint8_t transports;    ///< bit (1 << transport_slot) per transport on which the row is legal
    uint32_t required[3];  ///< required qp_attr_mask bits (besides QP_ATTR_STATE): RC, UC, UD
    uint32_t optional[3];  ///< optional qp_attr_mask bits: RC, UC, UD
};

/// Index of a transport in qp_transition_row arrays (RC and XRC 0, UC 1, UD 2; -1 if unsupported).
int transport_slot(hw::qp_transport t);
/// The whole transition table (rows in a fixed order) and its row count.
const qp_transition_row* qp_transition_table(size_t* rows);
/// Row for (cur, next) legal on transport t, or nullptr if the transition is illegal.
const qp_transition_row* find_transition(hw::qp_transport t, hw::qp_state cur, hw::qp_state next);
/// 0 if Modify QP cur -> next with attr_mask is legal on transport t, else EINVAL.
int check_transition(hw::qp_transport t, hw::qp_state cur, hw::qp_state next, uint32_t attr_mask);
/// Required attribute mask of a legal transition (0 for an illegal one).
uint32_t required_attrs(hw::qp_transport t, hw::qp_state cur, hw::qp_state next);
/// Optional attribute mask of a legal transition (0 for an illegal one).
uint32_t optional_attrs(hw::qp_transport t, hw::qp_state cur, hw::qp_state next);
/// 0 if Modify EEC cur -> next with attr_mask (ibv_qp_attr_mask bits) is legal, else EINVAL.
int check_eec_transition(hw::qp_state cur, hw::qp_state next, uint32_t attr_mask);
/// Short state name ("RESET", "INIT", ...).
const char* qp_state_name(hw::qp_state s);

}  // namespace hcasim::fw
