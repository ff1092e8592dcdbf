// Completion and event queue entry layouts in host memory (interface version 2).
//
// A CQ is a ring of 2^log_size 64-byte CQEs. Ownership: the HCA writes the N-th CQE it ever
// produces on the CQ (N counting from 0) into slot N mod size with `owner` bit 0 equal to
// 1 - ((N >> log_size) & 1); memory starts zeroed. Software at consumer count C owns slot
// C mod size when that slot's owner bit equals 1 - ((C >> log_size) & 1). The owner byte is
// the last byte of the CQE and is written in the same DMA write as the rest.
//
// Publication order, for every ring of entries with an owner byte (CQs, the EQ) and for the
// readers in another process (the libibverbs provider): the writer stores the body first and
// the owner byte last, with release ordering (host memory lands every DMA write that way); the
// reader loads the owner byte first, with acquire ordering (host_bus::load_acquire8), and reads
// the body only when the owner byte says the entry is software's. A reader that copied the whole
// entry and looked at the owner byte afterwards could pair a new owner byte with a stale body.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hcasim::hw {

/// Completion status codes (IBA 11.4.2.1 work completion status, libibverbs numbering).
enum cqe_status : uint8_t {
    CQE_SUCCESS = 0,
    CQE_LOC_LEN_ERR = 1,
    CQE_LOC_QP_OP_ERR = 2,
    CQE_LOC_EEC_OP_ERR = 3,
    CQE_LOC_PROT_ERR = 4,
    CQE_WR_FLUSH_ERR = 5,
    CQE_MW_BIND_ERR = 6,  ///< memory management operation error (bind, invalidate, fast register)
    CQE_BAD_RESP_ERR = 7,
    CQE_LOC_ACCESS_ERR = 8,
    CQE_REM_INV_REQ_ERR = 9,
    CQE_REM_ACCESS_ERR = 10,
    CQE_REM_OP_ERR = 11,
    CQE_RETRY_EXC_ERR = 12,
    CQE_RNR_RETRY_EXC_ERR = 13,
    CQE_LOC_RDD_VIOL_ERR = 14,
    CQE_REM_INV_RD_REQ_ERR = 15,
    CQE_REM_ABORT_ERR = 16,
    CQE_INV_EECN_ERR = 17,
    CQE_INV_EEC_STATE_ERR = 18,
    CQE_FATAL_ERR = 19,
    CQE_RESP_TIMEOUT_ERR = 20,
    CQE_GENERAL_ERR = 21,
};

/// Completion opcodes (libibverbs ibv_wc_opcode numbering).
enum cqe_opcode : uint8_t {
    CQE_OP_SEND = 0,
    CQE_OP_RDMA_WRITE = 1,
    CQE_OP_RDMA_READ = 2,
    CQE_OP_COMP_SWAP = 3,
    CQE_OP_FETCH_ADD = 4,
    CQE_OP_BIND_MW = 5,
    CQE_OP_LOCAL_INV = 6,
    CQE_OP_FAST_REG = 32,  ///< hcasim: Fast Register PMR (libibverbs has no such opcode)
    CQE_OP_RECV = 128,
    CQE_OP_RECV_RDMA_WITH_IMM = 129,
};

/// CQE flags (libibverbs ibv_wc_flags values).
enum cqe_flags : uint8_t {
    CQE_FLAG_GRH = 1,       ///< a GRH was present (UD)
    CQE_FLAG_WITH_IMM = 2,  ///< imm holds immediate data
    CQE_FLAG_WITH_INV = 8,  ///< imm holds the invalidated R_Key
};

/// Owner bit in cqe::owner.
constexpr uint8_t CQE_OWNER_BIT = 0x01;
/// cqe::owner bit 1: the completion belongs to the send queue.
constexpr uint8_t CQE_IS_SEND = 0x02;

/// One completion queue entry.
struct cqe {
    uint64_t wr_id;          ///< work request ID from the WQE
    uint32_t byte_len;       ///< bytes transferred (receive: message length)
    uint32_t imm;            ///< immediate data or invalidated R_Key (see flags)
    uint32_t qpn;            ///< local QP number
    uint32_t src_qp;         ///< source QP (UD receive)
    uint16_t slid;           ///< source LID (receive)
    uint16_t pkey_index;     ///< P_Key index (GSI receive)
    uint16_t wqe_counter;    ///< wqe_index of the completed WQE
    uint8_t opcode;          ///< cqe_opcode
    uint8_t status;          ///< cqe_status
    uint8_t sl;              ///< service level (receive)
    uint8_t flags;           ///< cqe_flags
    uint8_t dlid_path_bits;  ///< destination LID path bits (receive)
    uint8_t vendor_err;      ///< vendor syndrome for error completions
    uint32_t xrc_srqn;       ///< receive on an XRC target QP: the XRC SRQ number + 1 (else 0)
    uint8_t rsvd[23];        ///< reserved, zero
    uint8_t owner;           ///< CQE_OWNER_BIT, CQE_IS_SEND
};
static_assert(sizeof(cqe) == 64);
static_assert(offsetof(cqe, byte_len) == 8 && offsetof(cqe, qpn) == 16 && offsetof(cqe, slid) == 24 &&
              offsetof(cqe, opcode) == 30 && offsetof(cqe, status) == 31 && offsetof(cqe, xrc_srqn) == 36 &&
              offsetof(cqe, owner) == 63);

/// Owner bit value the HCA writes for its N-th CQE on a CQ of 2^log_size entries.
constexpr uint8_t cqe_owner_for(uint64_t n, uint32_t log_size) {
    return uint8_t(1u - ((n >> log_size) & 1u));
}

/// Event types (IBA 11.6.3 asynchronous events + completion events).
enum eqe_type : uint8_t {
    EQE_COMPLETION = 0x00,  ///< a CQ armed for notification got a completion
    EQE_PATH_MIGRATED = 0x01,
    EQE_COMM_EST = 0x02,             ///< communication established (first packet in RTR)
    EQE_SQ_DRAINED = 0x03,           ///< SQD reached and the send queue drained
    EQE_CQ_ERROR = 0x04,             ///< CQ overrun or access error
    EQE_QP_FATAL = 0x05,             ///< local work queue catastrophic error
    EQE_QP_REQ_ERR = 0x06,           ///< invalid request local WQ error
    EQE_QP_ACCESS_ERR = 0x07,        ///< local access violation WQ error
    EQE_SRQ_LIMIT = 0x08,            ///< SRQ limit reached
    EQE_QP_LAST_WQE_REACHED = 0x09,  ///< last WQE reached (SRQ-attached QP in Error)
    EQE_PORT_CHANGE = 0x0A,          ///< port state change
    EQE_LOCAL_CATASTROPHIC = 0x0B,   ///< local catastrophic error
    EQE_SRQ_ERROR = 0x0C,            ///< SRQ catastrophic error
    EQE_PATH_MIG_ERR = 0x0D,         ///< path migration request failed
    EQE_EEC_ERR = 0x0E,              ///< RD: an EE context's own error moved it to Error (resource: EECN)
    EQE_EEC_PATH_MIGRATED = 0x0F,    ///< RD with APM: an EE context migrated (resource: EECN)
    EQE_EEC_PATH_MIG_ERR = 0x10,     ///< RD with APM: a migration request to an EE context failed (EECN)
};

/// eqe::subtype of EQE_PORT_CHANGE.
enum eqe_port_subtype : uint8_t {
    EQE_PORT_ACTIVE = 0x01,  ///< the port's link came up (PortActive)
    EQE_PORT_DOWN = 0x02,    ///< the port's link went down (PortError)
};

/// One event queue entry (32 bytes). Same ownership rule as CQEs.
struct eqe {
    uint8_t type;       ///< eqe_type
    uint8_t subtype;    ///< event-specific detail
    uint16_t rsvd0;     ///< reserved, zero
    uint32_t resource;  ///< CQN, QPN, SRQN, EECN or port number the event concerns
    uint8_t rsvd1[23];  ///< reserved, zero
    uint8_t owner;      ///< CQE_OWNER_BIT, same rule as CQEs
};
static_assert(sizeof(eqe) == 32 && offsetof(eqe, owner) == 31);

}  // namespace hcasim::hw
