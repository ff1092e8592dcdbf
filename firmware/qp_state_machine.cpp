#include "firmware/qp_state_machine.h"

#include <cerrno>

namespace hcasim::fw {
namespace {

using namespace hcasim::hw;

constexpr uint8_t RC = 1, UC = 2, UD = 4, ALL = RC | UC | UD;

constexpr uint32_t PKEY = QP_ATTR_PKEY_INDEX, PORT = QP_ATTR_PORT, ACC = QP_ATTR_ACCESS_FLAGS,
                   QKEY = QP_ATTR_QKEY, AV = QP_ATTR_AV, MTU = QP_ATTR_PATH_MTU, DQPN = QP_ATTR_DEST_QPN,
                   RQPSN = QP_ATTR_RQ_PSN, SQPSN = QP_ATTR_SQ_PSN, DRD = QP_ATTR_MAX_DEST_RD_ATOMIC,
                   RNRT = QP_ATTR_MIN_RNR_TIMER, TMO = QP_ATTR_TIMEOUT, RTY = QP_ATTR_RETRY_CNT,
                   RNRR = QP_ATTR_RNR_RETRY, QRD = QP_ATTR_MAX_QP_RD_ATOMIC, CUR = QP_ATTR_CUR_STATE,
                   ALT = QP_ATTR_ALT_PATH, MIG = QP_ATTR_PATH_MIG_STATE, SQDN = QP_ATTR_EN_SQD_ASYNC_NOTIFY;

// Figure 126 arcs. Masks follow the libibverbs/kernel ib_modify_qp table, which mirrors the
// IBA Modify QP attribute tables. SQEr exists only for UC/UD (C10-19: no SQEr for RC).
// Reset -> Error is drawn in Figure 126 ("any state -> Error"); the Linux table omits it.
constexpr qp_transition_row TABLE[] = {
    // cur       next      on    required {RC, UC, UD}                                   optional {RC, UC, UD}
    {QPS_RESET, QPS_RESET, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_RESET, QPS_INIT, ALL, {PKEY | PORT | ACC, PKEY | PORT | ACC, PKEY | PORT | QKEY}, {0, 0, 0}},
    {QPS_RESET, QPS_ERR, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_INIT, QPS_RESET, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_INIT, QPS_ERR, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_INIT, QPS_INIT, ALL, {0, 0, 0}, {PKEY | PORT | ACC, PKEY | PORT | ACC, PKEY | PORT | QKEY}},
    {QPS_INIT,
     QPS_RTR,
     ALL,
     {AV | MTU | DQPN | RQPSN | DRD | RNRT, AV | MTU | DQPN | RQPSN, 0},
     {ALT | ACC | PKEY, ALT | ACC | PKEY, PKEY | QKEY}},
    {QPS_RTR, QPS_RESET, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_RTR, QPS_ERR, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_RTR,
     QPS_RTS,
     ALL,
     {TMO | RTY | RNRR | SQPSN | QRD, SQPSN, SQPSN},
     {CUR | ALT | ACC | RNRT | MIG, CUR | ALT | ACC | MIG, CUR | QKEY}},
    {QPS_RTS, QPS_RESET, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_RTS, QPS_ERR, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_RTS, QPS_RTS, ALL, {0, 0, 0}, {CUR | ACC | ALT | MIG | RNRT, CUR | ACC | ALT | MIG, CUR | QKEY}},
    {QPS_RTS, QPS_SQD, ALL, {0, 0, 0}, {SQDN, SQDN, SQDN}},
    {QPS_SQD, QPS_RESET, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_SQD, QPS_ERR, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_SQD, QPS_RTS, ALL, {0, 0, 0}, {CUR | ALT | ACC | RNRT | MIG, CUR | ALT | ACC | MIG, CUR | QKEY}},
    {QPS_SQD,
     QPS_SQD,
     ALL,
     {0, 0, 0},
     {PORT | AV | TMO | RTY | RNRR | QRD | DRD | ALT | ACC | PKEY | RNRT | MIG, AV | ALT | ACC | PKEY | MIG,
      PKEY | QKEY}},
    {QPS_SQE, QPS_RESET, UC | UD, {0, 0, 0}, {0, 0, 0}},
    {QPS_SQE, QPS_ERR, UC | UD, {0, 0, 0}, {0, 0, 0}},
    {QPS_SQE, QPS_RTS, UC | UD, {0, 0, 0}, {0, CUR | ACC, CUR | QKEY}},
    {QPS_ERR, QPS_RESET, ALL, {0, 0, 0}, {0, 0, 0}},
    {QPS_ERR, QPS_ERR, ALL, {0, 0, 0}, {0, 0, 0}},
};

/// XRC QPs follow the RC rows (IBA 10.2.10: "the same QP states as RC QPs") but for what they
/// lack (the kernel's ib_modify_qp table): an initiator has no responder, so Init -> RTR does
/// not require the responder's READ/atomic resources or RNR timer; a target has no requester,
/// so RTR -> RTS requires only the timeout and the send PSN.
void xrc_masks(hw::qp_transport t, hw::qp_state cur, hw::qp_state next, uint32_t& req, uint32_t& opt) {
    uint32_t relaxed = 0;
    // An RD QP follows the UD rows; its send PSNs are its EE contexts' (hcasim: optional here).
    if (t == hw::QPT_RD && cur == QPS_RTR && next == QPS_RTS) relaxed = SQPSN;
    // ... and take the remote access rights of RC (RDMA and atomics on RD, o10-39, o10-46).
    if (t == hw::QPT_RD && next != QPS_RESET && next != QPS_ERR && next != QPS_SQE && cur != QPS_SQE)
        opt |= ACC;
    if (t == hw::QPT_XRC_INI && cur == QPS_INIT && next == QPS_RTR) relaxed = DRD | RNRT;
    if (t == hw::QPT_XRC_TGT && cur == QPS_RTR && next == QPS_RTS) relaxed = RTY | RNRR | QRD;
    req &= ~relaxed;
    opt |= relaxed;
}

}  // namespace

int transport_slot(hw::qp_transport t) {
    switch (t) {
    case hw::QPT_RC:
    case hw::QPT_XRC_INI:
    case hw::QPT_XRC_TGT: return 0;
    case hw::QPT_UC: return 1;
    case hw::QPT_UD:
    case hw::QPT_RD: return 2;
    }
    return -1;
}

const qp_transition_row* qp_transition_table(size_t* rows) {
    if (rows) *rows = sizeof(TABLE) / sizeof(TABLE[0]);
    return TABLE;
}

const qp_transition_row* find_transition(hw::qp_transport t, hw::qp_state cur, hw::qp_state next) {
    int slot = transport_slot(t);
    if (slot < 0) return nullptr;
    for (const auto& row : TABLE)
        if (row.cur == cur && row.next == next) return (row.transports & (1u << slot)) ? &row : nullptr;
    return nullptr;
}

namespace {
/// The masks of a legal transition on transport t (with the XRC and RD adjustments); false for
/// an illegal one.
bool masks_of(hw::qp_transport t, hw::qp_state cur, hw::qp_state next, uint32_t& req, uint32_t& opt) {
    const qp_transition_row* row = find_transition(t, cur, next);
    const int slot = transport_slot(t);
    if (!row || slot < 0 || slot > 2) return false;
    req = row->required[slot];
    opt = row->optional[slot];
    xrc_masks(t, cur, next, req, opt);
    return true;
}
}  // namespace

int check_transition(hw::qp_transport t, hw::qp_state cur, hw::qp_state next, uint32_t attr_mask) {
    uint32_t req = 0, opt = 0;
    if (!masks_of(t, cur, next, req, opt)) return EINVAL;
    if ((attr_mask & req) != req) return EINVAL;
    if (attr_mask & ~(req | opt | hw::QP_ATTR_STATE)) return EINVAL;
    return 0;
}

uint32_t required_attrs(hw::qp_transport t, hw::qp_state cur, hw::qp_state next) {
    uint32_t req = 0, opt = 0;
    return masks_of(t, cur, next, req, opt) ? req : 0;
}

uint32_t optional_attrs(hw::qp_transport t, hw::qp_state cur, hw::qp_state next) {
    uint32_t req = 0, opt = 0;
    return masks_of(t, cur, next, req, opt) ? opt : 0;
}

int check_eec_transition(hw::qp_state cur, hw::qp_state next, uint32_t attr_mask) {
    // The RC rows less what an EE context does not have (access flags) and with no SQEr
    // (o10-11: Figure 126's states but SQEr). Alternate paths and the path migration state
    // are an RC QP's (o10-23).
    const qp_transition_row* row = find_transition(hw::QPT_RC, cur, next);
    if (!row) return EINVAL;
    const uint32_t none = ACC;
    const uint32_t req = row->required[0] & ~none, opt = row->optional[0] & ~none;
    if ((attr_mask & req) != req) return EINVAL;
    if (attr_mask & ~(req | opt | hw::QP_ATTR_STATE)) return EINVAL;
    return 0;
}

const char* qp_state_name(hw::qp_state s) {
    static const char* const names[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return s <= hw::QPS_ERR ? names[s] : "UNKNOWN";
}

}  // namespace hcasim::fw
