// Context table entries the HCA keeps in host memory (interface version 1).
//
// INIT_HCA gives the HCA the physical base of each table; entry i of a table is at
// base + i * sizeof(entry). Software never writes a table directly: it passes entries in
// command mailboxes and the HCA's command unit writes them (and its on-chip copies).
#pragma once
#include <cstddef>
#include <cstdint>

namespace hcasim::hw {

/// QP states (IBA Figure 126; libibverbs ibv_qp_state numbering).
enum qp_state : uint8_t {
    QPS_RESET = 0,
    QPS_INIT = 1,
    QPS_RTR = 2,
    QPS_RTS = 3,
    QPS_SQD = 4,
    QPS_SQE = 5,
    QPS_ERR = 6,
};

/// Transport service types.
enum qp_transport : uint8_t {
    QPT_RC = 2,   ///< reliable connected (libibverbs IBV_QPT_RC)
    QPT_UC = 3,   ///< unreliable connected
    QPT_UD = 4,   ///< unreliable datagram
};

/// Path MTU codes (IBA: 1 = 256 ... 5 = 4096).
enum mtu_code : uint8_t { MTU_256 = 1, MTU_512 = 2, MTU_1024 = 3, MTU_2048 = 4, MTU_4096 = 5 };
constexpr uint32_t mtu_bytes(uint8_t code) { return code >= 1 && code <= 5 ? 128u << code : 0u; }

/// Access flags (libibverbs ibv_access_flags values), in QPCs and MPTs.
enum access_flags : uint32_t {
    ACCESS_LOCAL_WRITE = 1,
    ACCESS_REMOTE_WRITE = 2,
    ACCESS_REMOTE_READ = 4,
    ACCESS_REMOTE_ATOMIC = 8,
    ACCESS_MW_BIND = 16,
};

/// Queue pair context (256 bytes).
struct qp_context {
    uint32_t qpn;              ///< QP number (24 bits)
    uint8_t state;             ///< qp_state
    uint8_t transport;         ///< qp_transport
    uint8_t mtu;               ///< mtu_code of the path
    uint8_t port;              ///< port number (1-based)
    uint32_t pd;               ///< protection domain number
    uint32_t send_cqn;         ///< CQ for send completions
    uint32_t recv_cqn;         ///< CQ for receive completions
    uint32_t srqn;             ///< SRQ number + 1, or 0 for none
    uint64_t sq_base;          ///< host physical address of the send ring
    uint64_t rq_base;          ///< host physical address of the receive ring
    uint8_t sq_log_size;       ///< log2 send ring slots
    uint8_t sq_log_stride;     ///< log2 send slot bytes (>= 6)
    uint8_t rq_log_size;       ///< log2 receive ring slots
    uint8_t rq_log_stride;     ///< log2 receive slot bytes (>= 4)
    uint32_t uar;              ///< UAR page index whose doorbells this QP uses
    uint32_t dest_qpn;         ///< remote QP number (connected services)
    uint32_t sq_psn;           ///< next send PSN (24 bits)
    uint32_t rq_psn;           ///< expected receive PSN (24 bits)
    uint32_t qkey;             ///< Q_Key (datagram)
    uint32_t access;           ///< remote access_flags allowed on this QP (responder)
    uint16_t pkey_index;       ///< P_Key table index
    uint16_t dlid;             ///< destination LID
    uint8_t sl;                ///< service level
    uint8_t src_path_bits;     ///< source path bits
    uint8_t max_rd_atomic;     ///< outstanding RDMA READ/atomic as requester
    uint8_t max_dest_rd_atomic;///< outstanding RDMA READ/atomic as responder
    uint8_t min_rnr_timer;     ///< RNR NAK timer code offered to requesters
    uint8_t timeout;           ///< local ACK timeout code (4.096 us * 2^timeout)
    uint8_t retry_cnt;         ///< retries on timeout / sequence error
    uint8_t rnr_retry;         ///< retries on RNR NAK (7 = infinite)
    uint8_t sq_draining;       ///< 1 while SQD is draining
    uint8_t sig_all;           ///< 1: every send WQE generates a CQE
    uint8_t grh;               ///< 1: the path uses a GRH
    uint8_t sgid_index;        ///< source GID index
    uint8_t hop_limit;         ///< GRH hop limit
    uint8_t tclass;            ///< GRH traffic class
    uint16_t rsvd0;            ///< reserved, zero
    uint32_t flow_label;       ///< GRH flow label
    uint8_t dgid[16];          ///< destination GID
    uint32_t max_send_wr;      ///< send ring capacity in WQEs
    uint32_t max_recv_wr;      ///< receive ring capacity in WQEs
    uint8_t sqd_notify;        ///< 1: raise EQE_SQ_DRAINED when an SQD drain completes
    uint8_t rsvd1[135];        ///< reserved, zero
};
static_assert(sizeof(qp_context) == 256);
static_assert(offsetof(qp_context, sq_base) == 24 && offsetof(qp_context, dest_qpn) == 48 &&
              offsetof(qp_context, dgid) == 92);

/// Completion queue context (64 bytes).
struct cq_context {
    uint32_t cqn;          ///< CQ number
    uint8_t log_size;      ///< log2 entries
    uint8_t valid;         ///< 1 when created
    uint16_t eqn;          ///< EQ that receives this CQ's completion events
    uint64_t base;         ///< host physical address of the CQE ring
    uint32_t producer;     ///< CQEs written so far (mod 2^24), maintained by the HCA
    uint32_t consumer;     ///< consumer index last rung by software
    uint8_t arm;           ///< cq_arm state
    uint8_t overrun;       ///< 1 after an overrun (CQ in error)
    uint8_t rsvd0[2];      ///< reserved, zero
    uint32_t rsvd1[9];     ///< reserved, zero
};
static_assert(sizeof(cq_context) == 64);

/// Event queue context (32 bytes).
struct eq_context {
    uint64_t base;      ///< host physical address of the EQE ring
    uint8_t log_size;   ///< log2 entries
    uint8_t valid;      ///< 1 when created
    uint16_t rsvd0;     ///< reserved, zero
    uint32_t producer;  ///< EQEs written so far
    uint32_t consumer;  ///< consumer index last written by software
    uint32_t rsvd1[3];  ///< reserved, zero
};
static_assert(sizeof(eq_context) == 32);

/// MPT entry flags.
enum mpt_flags : uint8_t {
    MPT_VALID = 0x01,       ///< the entry is in use (keys are checked against it)
    MPT_PHYSICAL = 0x02,    ///< no translation: VA is the physical address
};

/// Memory protection table entry (64 bytes): one MR (MWs in a later interface version).
/// A key is (index << 8) | key byte; the index selects the entry and the key byte must match.
struct mpt_entry {
    uint32_t key;            ///< full L_Key / R_Key ((index << 8) | key byte)
    uint32_t pd;             ///< protection domain number
    uint32_t access;         ///< access_flags
    uint8_t flags;           ///< mpt_flags
    uint8_t log_page_size;   ///< log2 of the translation page size (12 = 4 KiB)
    uint16_t rsvd0;          ///< reserved, zero
    uint64_t start_va;       ///< first virtual address of the region
    uint64_t length;         ///< region length in bytes
    uint64_t mtt_base;       ///< index of the first MTT entry of this region
    uint64_t mtt_count;      ///< MTT entries used by this region
    uint64_t rsvd1[2];       ///< reserved, zero
};
static_assert(sizeof(mpt_entry) == 64);

/// Key helpers: 24-bit index + 8-bit key byte.
constexpr uint32_t key_index(uint32_t key) { return key >> 8; }
constexpr uint8_t key_byte(uint32_t key) { return uint8_t(key & 0xFF); }
constexpr uint32_t make_key(uint32_t index, uint8_t byte) { return (index << 8) | byte; }

/// Memory translation table entry: physical address of one page of a region.
struct mtt_entry {
    uint64_t value;  ///< page physical address | MTT_PRESENT
};
static_assert(sizeof(mtt_entry) == 8);
constexpr uint64_t MTT_PRESENT = 1;

}  // namespace hcasim::hw
