// Context table entries the HCA keeps in host memory (interface version 2).
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
    QPT_RC = 2,  ///< reliable connected (libibverbs IBV_QPT_RC)
    QPT_UC = 3,  ///< unreliable connected
    QPT_UD = 4,  ///< unreliable datagram
    /// Reliable datagram (IBA 10.2.2.2, 10.2.7, 10.2.8; hcasim: libibverbs has no RD): a QP of
    /// reliable datagram domain `rdd` whose every message names an EE context (the WQE's RD
    /// segment) that carries it, reliably, to a QP behind the EE context's peer.
    QPT_RD = 5,
    /// XRC initiator (IBA 10.2.10; libibverbs IBV_QPT_XRC_SEND): an RC send queue whose every
    /// message names the XRC SRQ it goes to at the target (the WQE's xrc_srqn, the XRCETH).
    QPT_XRC_INI = 9,
    /// XRC target (IBV_QPT_XRC_RECV): an RC responder in an XRC domain (`xrcd`) with no receive
    /// queue of its own; each message takes its receive WQE from the XRC SRQ its XRCETH names,
    /// which must be in the same domain, and uses that SRQ's PD (RDMA too) and CQ.
    QPT_XRC_TGT = 10,
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
    ACCESS_ZERO_BASED = 32,  ///< MR / MW addresses are offsets from 0 (ZBVA, o10-36.2.2)
};

/// Queue pair context (256 bytes).
struct qp_context {
    uint32_t qpn;                ///< QP number (24 bits)
    uint8_t state;               ///< qp_state
    uint8_t transport;           ///< qp_transport
    uint8_t mtu;                 ///< mtu_code of the path
    uint8_t port;                ///< port number (1-based)
    uint32_t pd;                 ///< protection domain number
    uint32_t send_cqn;           ///< CQ for send completions
    uint32_t recv_cqn;           ///< CQ for receive completions
    uint32_t srqn;               ///< SRQ number + 1, or 0 for none (the receive ring fields are then unused)
    uint64_t sq_base;            ///< host physical address of the send ring
    uint64_t rq_base;            ///< host physical address of the receive ring
    uint8_t sq_log_size;         ///< log2 send ring slots
    uint8_t sq_log_stride;       ///< log2 send slot bytes (>= 6)
    uint8_t rq_log_size;         ///< log2 receive ring slots
    uint8_t rq_log_stride;       ///< log2 receive slot bytes (>= 4)
    uint32_t uar;                ///< UAR page index whose doorbells this QP uses
    uint32_t dest_qpn;           ///< remote QP number (connected services)
    uint32_t sq_psn;             ///< next send PSN (24 bits)
    uint32_t rq_psn;             ///< expected receive PSN (24 bits)
    uint32_t qkey;               ///< Q_Key (datagram)
    uint32_t access;             ///< remote access_flags allowed on this QP (responder)
    uint16_t pkey_index;         ///< P_Key table index
    uint16_t dlid;               ///< destination LID
    uint8_t sl;                  ///< service level
    uint8_t src_path_bits;       ///< source path bits
    uint8_t max_rd_atomic;       ///< outstanding RDMA READ/atomic as requester
    uint8_t max_dest_rd_atomic;  ///< outstanding RDMA READ/atomic as responder
    uint8_t min_rnr_timer;       ///< RNR NAK timer code offered to requesters
    uint8_t timeout;             ///< local ACK timeout code (4.096 us * 2^timeout)
    uint8_t retry_cnt;           ///< retries on timeout / sequence error
    uint8_t rnr_retry;           ///< retries on RNR NAK (7 = infinite)
    uint8_t sq_draining;         ///< 1 while SQD is draining
    uint8_t sig_all;             ///< 1: every send WQE generates a CQE
    uint8_t grh;                 ///< 1: the path uses a GRH
    uint8_t sgid_index;          ///< source GID index
    uint8_t hop_limit;           ///< GRH hop limit
    uint8_t tclass;              ///< GRH traffic class
    uint16_t rsvd0;              ///< reserved, zero
    uint32_t flow_label;         ///< GRH flow label
    uint8_t dgid[16];            ///< destination GID
    uint32_t max_send_wr;        ///< send ring capacity in WQEs
    uint32_t max_recv_wr;        ///< receive ring capacity in WQEs
    uint8_t sqd_notify;          ///< 1: raise EQE_SQ_DRAINED when an SQD drain completes
    uint8_t mm_flags;            ///< qp_mm_flags: memory management operations this QP may use
    uint8_t rsvd1[2];            ///< reserved, zero
    uint32_t xrcd;               ///< QPT_XRC_TGT: its XRC domain (number, nonzero)
    uint32_t rdd;                ///< QPT_RD: its reliable datagram domain (number, nonzero)
    uint8_t rsvd4[24];           ///< reserved, zero
    // Automatic path migration (IBA 10.4, 17.2.8; CAP_APM): the alternate path and the path
    // migration state. QUERY_QP reads them as the HCA has them now: a migration swaps the
    // primary path fields above (dlid, sl, src_path_bits, pkey_index, timeout, GRH) with these.
    uint16_t alt_dlid;          ///< alternate path: destination LID
    uint16_t alt_pkey_index;    ///< alternate path: P_Key table index
    uint8_t alt_sl;             ///< alternate path: service level
    uint8_t alt_src_path_bits;  ///< alternate path: source path bits
    uint8_t alt_port;           ///< alternate path: port number (1-based)
    uint8_t alt_timeout;        ///< alternate path: local ACK timeout code
    uint8_t path_mig_state;     ///< path_mig_state (Migrated after create, o10-26)
    uint8_t alt_grh;            ///< alternate path: 1 if it uses a GRH
    uint8_t alt_sgid_index;     ///< alternate path: source GID index
    uint8_t alt_hop_limit;      ///< alternate path: GRH hop limit
    uint8_t alt_tclass;         ///< alternate path: GRH traffic class
    uint8_t rsvd2[3];           ///< reserved, zero
    uint32_t alt_flow_label;    ///< alternate path: GRH flow label
    uint8_t alt_dgid[16];       ///< alternate path: destination GID
    uint8_t rsvd3[68];          ///< reserved, zero
};
static_assert(sizeof(qp_context) == 256);
static_assert(offsetof(qp_context, xrcd) == 120 && offsetof(qp_context, rdd) == 124);

/// End-to-end context (64 bytes; IBA 10.2.7): one end of a reliable channel between two HCA
/// ports that RD QPs of its domain send through, one message at a time. It has the QP states
/// but SQEr, its own PSNs and the reliability attributes; the HCA holds EE contexts on chip (no
/// table in host memory): CMD_CREATE_EEC / MODIFY_EEC pass them, QUERY_EEC reads them back.
struct eec_context {
    uint32_t eecn;               ///< EE context number
    uint8_t state;               ///< qp_state (never QPS_SQE)
    uint8_t port;                ///< port number (1-based)
    uint8_t mtu;                 ///< mtu_code of the path
    uint8_t sl;                  ///< service level
    uint32_t rdd;                ///< reliable datagram domain (nonzero)
    uint32_t dest_eecn;          ///< the remote EE context (the RDETH of every packet sent)
    uint32_t sq_psn;             ///< next send PSN (24 bits)
    uint32_t rq_psn;             ///< expected receive PSN (24 bits)
    uint16_t dlid;               ///< destination LID
    uint16_t pkey_index;         ///< P_Key table index: the P_Key sent and checked (o10-58, o10-59)
    uint8_t src_path_bits;       ///< source path bits
    uint8_t timeout;             ///< local ACK timeout code
    uint8_t retry_cnt;           ///< retries on timeout / sequence error
    uint8_t rnr_retry;           ///< retries on RNR NAK (7 = infinite)
    uint8_t min_rnr_timer;       ///< RNR NAK timer code offered to requesters
    uint8_t max_rd_atomic;       ///< outstanding RDMA READ/atomic as requester
    uint8_t max_dest_rd_atomic;  ///< outstanding RDMA READ/atomic as responder
    uint8_t sq_draining;         ///< HCA: 1 while an SQD drain is in progress
    // Automatic path migration (IBA 10.4, o10-23; CAP_APM): the alternate path and the path
    // migration state, as in qp_context (no GRH: EE contexts' paths are local). QUERY_EEC reads
    // them as the HCA has them now: a migration swaps the primary path fields above (dlid, sl,
    // src_path_bits, pkey_index, timeout) with these.
    uint16_t alt_dlid;          ///< alternate path: destination LID
    uint16_t alt_pkey_index;    ///< alternate path: P_Key table index
    uint8_t alt_sl;             ///< alternate path: service level
    uint8_t alt_src_path_bits;  ///< alternate path: source path bits
    uint8_t alt_port;           ///< alternate path: port number (1-based; 0: none loaded)
    uint8_t alt_timeout;        ///< alternate path: local ACK timeout code
    uint8_t path_mig_state;     ///< path_mig_state (Migrated after create)
    uint8_t rsvd[19];           ///< reserved, zero
};
static_assert(sizeof(eec_context) == 64 && offsetof(eec_context, dlid) == 24 &&
              offsetof(eec_context, alt_dlid) == 36 && offsetof(eec_context, path_mig_state) == 44);
static_assert(offsetof(qp_context, sq_base) == 24 && offsetof(qp_context, dest_qpn) == 48 &&
              offsetof(qp_context, dgid) == 92);
static_assert(offsetof(qp_context, rsvd1) == 118 && offsetof(qp_context, alt_dlid) == 152 &&
              offsetof(qp_context, path_mig_state) == 160 && offsetof(qp_context, alt_flow_label) == 168 &&
              offsetof(qp_context, alt_dgid) == 172 && offsetof(qp_context, rsvd3) == 188);

/// qp_context::path_mig_state (IBA 10.4.1, Figure 127; the values of ibv_mig_state).
enum path_mig_state : uint8_t { MIG_MIGRATED = 0, MIG_REARM = 1, MIG_ARMED = 2 };

/// The fields of one path of a QP context, the primary or the alternate one (IBA 10.4).
struct qp_path_ref {
    uint16_t& dlid;
    uint16_t& pkey_index;
    uint8_t& sl;
    uint8_t& src_path_bits;
    uint8_t& port;
    uint8_t& timeout;
    uint8_t& grh;
    uint8_t& sgid_index;
    uint8_t& hop_limit;
    uint8_t& tclass;
    uint32_t& flow_label;
    uint8_t (&dgid)[16];
};
inline qp_path_ref primary_path(qp_context& c) {
    return {c.dlid, c.pkey_index, c.sl,        c.src_path_bits, c.port,       c.timeout,
            c.grh,  c.sgid_index, c.hop_limit, c.tclass,        c.flow_label, c.dgid};
}
inline qp_path_ref alternate_path(qp_context& c) {
    return {c.alt_dlid,      c.alt_pkey_index, c.alt_sl,         c.alt_src_path_bits,
            c.alt_port,      c.alt_timeout,    c.alt_grh,        c.alt_sgid_index,
            c.alt_hop_limit, c.alt_tclass,     c.alt_flow_label, c.alt_dgid};
}
/// Copies path `from` into path `to` (of the same or another context).
inline void copy_path(const qp_path_ref& to, const qp_path_ref& from) {
    to.dlid = from.dlid;
    to.pkey_index = from.pkey_index;
    to.sl = from.sl;
    to.src_path_bits = from.src_path_bits;
    to.port = from.port;
    to.timeout = from.timeout;
    to.grh = from.grh;
    to.sgid_index = from.sgid_index;
    to.hop_limit = from.hop_limit;
    to.tclass = from.tclass;
    to.flow_label = from.flow_label;
    for (unsigned i = 0; i < 16; ++i) to.dgid[i] = from.dgid[i];
}
/// A migration: the alternate path becomes the primary one and the primary the alternate.
inline void swap_paths(qp_context& c) {
    qp_context old = c;
    copy_path(primary_path(c), alternate_path(old));
    copy_path(alternate_path(c), primary_path(old));
}

/// qp_context::mm_flags (fixed at create, IBA 10.6.4.3.2).
enum qp_mm_flags : uint8_t {
    QP_MM_FAST_REG = 0x01,       ///< Fast Register PMR work requests allowed (o10-37.2.7)
    QP_MM_RESERVED_LKEY = 0x02,  ///< SGEs may use RESERVED_LKEY (o10-37.2.11)
};

/// Completion queue context (64 bytes).
struct cq_context {
    uint32_t cqn;       ///< CQ number
    uint8_t log_size;   ///< log2 entries
    uint8_t valid;      ///< 1 when created
    uint16_t eqn;       ///< EQ that receives this CQ's completion events
    uint64_t base;      ///< host physical address of the CQE ring
    uint32_t producer;  ///< CQEs written so far (mod 2^24), maintained by the HCA
    uint32_t consumer;  ///< consumer index last rung by software
    uint8_t arm;        ///< cq_arm state
    uint8_t overrun;    ///< 1 after an overrun (CQ in error)
    uint8_t rsvd0[2];   ///< reserved, zero
    uint32_t rsvd1[9];  ///< reserved, zero
};
static_assert(sizeof(cq_context) == 64);

/// SRQ states (IBA 10.2.9.5): error is left only by CMD_DESTROY_SRQ.
enum srq_state : uint8_t { SRQS_OK = 0, SRQS_ERR = 1 };

/// Shared receive queue context (64 bytes). The ring holds receive WQEs in the receive-queue
/// format (tlm_if/wqe.h) in slots of `1 << log_stride` bytes; software posts by writing WQE
/// `producer mod 2^log_size` and ringing UAR_SRQ_DOORBELL. The HCA takes WQEs in ring order,
/// one per message, for whichever attached QP a message arrives at (o10-53.2.1).
struct srq_context {
    uint32_t srqn;       ///< SRQ number
    uint8_t valid;       ///< 1 when created
    uint8_t state;       ///< srq_state (HCA)
    uint8_t log_size;    ///< log2 ring slots
    uint8_t log_stride;  ///< log2 slot bytes (>= 4)
    uint32_t pd;     ///< protection domain: receive SGEs of attached QPs are checked against it (o10-37.2.12)
    uint32_t limit;  ///< SRQ limit: armed when nonzero; the HCA clears it when it fires (10.2.9.3)
    uint64_t base;   ///< host physical address of the ring
    uint32_t max_wr;    ///< capacity in WQEs (< 2^log_size)
    uint16_t producer;  ///< HCA: producer counter software last rang (mod 2^16)
    uint16_t consumer;  ///< HCA: WQEs taken so far (mod 2^16)
    uint32_t attached;  ///< HCA: QPs created with this SRQ and not destroyed
    uint32_t uar;       ///< UAR page whose UAR_SRQ_DOORBELL software rings
    uint32_t xrcd;      ///< XRC SRQ: its XRC domain (number, nonzero); 0: an ordinary SRQ
    uint32_t cqn;       ///< XRC SRQ: the CQ of its receive completions (ordinary SRQs: the QP's)
    uint32_t rsvd[4];   ///< reserved, zero
};
static_assert(sizeof(srq_context) == 64);
static_assert(offsetof(srq_context, base) == 16 && offsetof(srq_context, producer) == 28 &&
              offsetof(srq_context, attached) == 32 && offsetof(srq_context, xrcd) == 40);

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

/// MPT entry kinds: a memory region or a memory window (IBA 10.6.7.2 types).
enum mpt_type : uint8_t {
    MPT_TYPE_MR = 0,    ///< memory region (Register MR / PMR / Shared MR, Allocate L_Key)
    MPT_TYPE_MW1 = 1,   ///< type 1 memory window (bound by the Bind MW verb; PD-associated)
    MPT_TYPE_MW2A = 2,  ///< type 2A memory window (bound by a bind WR; QP-associated)
    MPT_TYPE_MW2B = 3,  ///< type 2B memory window (bound by a bind WR; QP- and PD-associated)
};

/// Key states (IBA 10.6.2.3). Invalid: no entry; Free: allocated, grants nothing; Valid: usable.
enum mpt_state : uint8_t {
    MPT_STATE_INVALID = 0,
    MPT_STATE_FREE = 1,  ///< Allocate L_Key before Fast Register / after Invalidate; an unbound window
    MPT_STATE_VALID = 2,
};

/// MPT entry flags.
enum mpt_flags : uint8_t {
    MPT_SHARED = 0x01,      ///< MR made by Register Shared MR (no invalidate, no fast register)
    MPT_SHARE_SRC = 0x02,   ///< MR that another MR was registered as shared from
    MPT_FAST_REG = 0x04,    ///< MR made by Allocate L_Key: Fast Register / Invalidate apply to it
    MPT_BLOCK_LIST = 0x08,  ///< MR translation entries are blocks of block_size bytes (any alignment)
    MPT_PHYS = 0x10,        ///< MR registered from a physical page/block list (Register PMR)
};

/// Memory protection table entry (128 bytes): one MR or one MW. A key is (index << 8) | key
/// byte; the index selects the entry and the key byte must match `key`. Fields marked HCA are
/// maintained by the HCA (bind, invalidate, fast register); software reads them with
/// CMD_QUERY_MPT and must pass them back unchanged in a CMD_CREATE_MPT that modifies an entry.
struct mpt_entry {
    uint32_t key;           ///< full L_Key / R_Key ((index << 8) | key byte)
    uint32_t pd;            ///< protection domain number
    uint32_t access;        ///< access_flags (ACCESS_ZERO_BASED: start_va is 0)
    uint8_t state;          ///< mpt_state
    uint8_t type;           ///< mpt_type
    uint8_t flags;          ///< mpt_flags
    uint8_t log_page_size;  ///< MR with a page list: log2 of the page size (12 = 4 KiB)
    uint64_t start_va;      ///< first address of the region / window as requests name it
    uint64_t length;        ///< bytes
    // Memory region:
    uint64_t mtt_base;      ///< index of the first MTT entry of this region
    uint32_t mtt_count;     ///< MTT entries in use
    uint32_t mtt_reserved;  ///< MTT entries reserved at mtt_base (Allocate L_Key; else = mtt_count)
    uint32_t page_offset;   ///< byte offset of the region's first byte in its first page / block
    uint32_t block_size;    ///< MPT_BLOCK_LIST: bytes per block
    uint32_t bound_mws;     ///< HCA: memory windows bound to this region
    uint32_t rsvd0;         ///< reserved, zero
    // Memory window:
    uint32_t mr_index;  ///< HCA: MPT index of the region the window is bound to
    uint32_t qpn;       ///< HCA: type 2 window: QP it is bound to
    uint64_t mr_va;     ///< HCA: region address of the window's first byte
    uint64_t rsvd1[6];  ///< reserved, zero
};
static_assert(sizeof(mpt_entry) == 128);
static_assert(offsetof(mpt_entry, start_va) == 16 && offsetof(mpt_entry, mtt_base) == 32 &&
              offsetof(mpt_entry, mr_index) == 64 && offsetof(mpt_entry, mr_va) == 72);

/// The reserved L_Key (IBA 10.6.4.3.2): names host physical addresses directly, on QPs created
/// with it enabled. MPT index 0 is never allocated, so no MR or MW has this key.
constexpr uint32_t RESERVED_LKEY = 0x00000000u;

/// Key helpers: 24-bit index + 8-bit key byte.
constexpr uint32_t key_index(uint32_t key) { return key >> 8; }
constexpr uint8_t key_byte(uint32_t key) { return uint8_t(key & 0xFF); }
constexpr uint32_t make_key(uint32_t index, uint8_t byte) { return (index << 8) | byte; }

/// Memory translation table entry: physical address of one page (page list: page aligned) or
/// of one block (block list: any alignment) of a region.
struct mtt_entry {
    uint64_t value;  ///< physical address | MTT_PRESENT
};
static_assert(sizeof(mtt_entry) == 8);
constexpr uint64_t MTT_PRESENT = 1ull << 63;
constexpr uint64_t mtt_address(uint64_t value) { return value & ~MTT_PRESENT; }

}  // namespace hcasim::hw
