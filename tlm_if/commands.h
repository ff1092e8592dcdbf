// Command interface (interface version 2).
//
// Software writes a cmd_mailbox in host memory, writes its physical address to
// REG_CMD_MAILBOX and the token to REG_CMD_DOORBELL. The HCA's command unit reads the
// mailbox by DMA, executes the command, writes the output area, and finally writes
// `status` with CMD_DONE set and the token in `done_token` — the last write of the command,
// so software may wait on that word. One command runs at a time; a doorbell while busy is
// ignored and counted.
#pragma once
#include <cstddef>
#include <cstdint>
#include "tlm_if/contexts.h"

namespace hcasim::hw {

/// Command opcodes. `in_mod` / `op_mod` meaning is given per opcode.
enum cmd_opcode : uint16_t {
    CMD_QUERY_HCA = 0x01,    ///< out: hca_caps
    CMD_INIT_HCA = 0x02,     ///< in: init_hca_in
    CMD_QUERY_PORT = 0x03,   ///< in_mod: port; out: port_info
    CMD_SET_PKEY = 0x04,     ///< in_mod: port; op_mod: index; in: uint16 pkey (management path only:
                             ///< no verb issues it, C10-122)
    CMD_QUERY_PKEY = 0x05,   ///< in_mod: port; op_mod: index; out: uint16 pkey (read only)
    CMD_QUERY_GID = 0x06,    ///< in_mod: port; op_mod: index; out: gid_entry (read only)
    CMD_CREATE_EQ = 0x08,    ///< in_mod: EQN; in: eq_context
    CMD_CREATE_CQ = 0x10,    ///< in_mod: CQN; in: cq_context
    CMD_DESTROY_CQ = 0x11,   ///< in_mod: CQN
    CMD_RESIZE_CQ = 0x12,    ///< in_mod: CQN; in: resize_cq_in; out: resize_cq_out (BAD_STATE: CQ in error)
    CMD_QUERY_CQ = 0x13,     ///< in_mod: CQN; out: cq_context as the HCA holds it (BAD_STATE: CQ in error)
    CMD_CREATE_MPT = 0x20,   ///< in_mod: MPT index; op_mod: mpt_create_mode; in: mpt_entry
    CMD_DESTROY_MPT = 0x21,  ///< in_mod: MPT index (fails BAD_STATE: MR with windows bound)
    CMD_WRITE_MTT = 0x22,    ///< in: write_mtt_in + entries
    CMD_QUERY_MPT = 0x23,    ///< in_mod: MPT index; out: mpt_entry as the HCA holds it
    CMD_CREATE_QP = 0x30,    ///< in_mod: QPN; in: qp_context (state Reset)
    CMD_MODIFY_QP = 0x31,    ///< in_mod: QPN; op_mod: new qp_state; in: modify_qp_in
    CMD_QUERY_QP = 0x32,     ///< in_mod: QPN; out: qp_context
    CMD_DESTROY_QP =
        0x33,  ///< in_mod: QPN (fails BAD_STATE: type 2A windows bound, or attached to a multicast group)
    CMD_ATTACH_MCAST = 0x40,  ///< in_mod: QPN (a UD QP); in: mcast_in
    CMD_DETACH_MCAST = 0x41,  ///< in_mod: QPN; in: mcast_in
    CMD_CREATE_SRQ = 0x50,    ///< in_mod: SRQN; in: srq_context (producer, consumer, attached, state: zero)
    CMD_MODIFY_SRQ = 0x51,    ///< in_mod: SRQN; op_mod: srq_modify_mask; in: modify_srq_in
    CMD_QUERY_SRQ = 0x52,    ///< in_mod: SRQN; out: srq_context as the HCA holds it (BAD_STATE: SRQ in error)
    CMD_DESTROY_SRQ = 0x53,  ///< in_mod: SRQN (BAD_STATE: QPs still attached)
    CMD_CREATE_EEC = 0x60,   ///< in_mod: EECN; in: eec_context (state Reset) (CAP_RD)
    CMD_MODIFY_EEC = 0x61,   ///< in_mod: EECN; op_mod: new qp_state; in: modify_eec_in
    CMD_QUERY_EEC = 0x62,    ///< in_mod: EECN; out: eec_context as the HCA holds it
    CMD_DESTROY_EEC = 0x63,  ///< in_mod: EECN
};

/// CMD_RESIZE_CQ input. The HCA moves the CQEs software has not consumed ([consumer, producer))
/// into the new ring at the same counter values (owner bits for the new size) and writes from
/// then on to the new ring. Before the command software initialises the new ring so that each
/// slot reads as not yet written for the counter value n in [consumer, consumer + 2^log_size)
/// that lands in it (owner bit = (n >> log_size) & 1). CMD_BAD_PARAM when the CQEs not consumed
/// do not fit (producer - consumer >= 2^log_size) or log_size is too large; the CQ is unchanged.
struct resize_cq_in {
    uint64_t base;      ///< new ring
    uint8_t log_size;   ///< log2 entries of the new ring
    uint8_t rsvd0[3];   ///< reserved, zero
    uint32_t consumer;  ///< software's consumer counter (mod 2^24); also a CQ doorbell's update
};
static_assert(sizeof(resize_cq_in) == 16);
/// CMD_RESIZE_CQ output.
struct resize_cq_out {
    uint32_t producer;  ///< CQEs written so far (mod 2^24): [consumer, producer) were moved
    uint32_t rsvd;      ///< reserved, zero
};
static_assert(sizeof(resize_cq_out) == 8);

/// CMD_MODIFY_SRQ op_mod bits.
enum srq_modify_mask : uint32_t {
    SRQ_MODIFY_LIMIT = 1,  ///< set (arm) the SRQ limit; 0 disarms
    SRQ_MODIFY_SIZE = 2,   ///< resize: move the outstanding WQEs to a new ring (o10-10.2.1)
};
/// CMD_MODIFY_SRQ input. Resize fails with CMD_BAD_PARAM (SRQ unchanged, o10-10.2.2) when
/// max_wr is below the WQEs outstanding (producer - consumer) or below the limit (the new
/// one when both bits are set); the HCA copies the outstanding WQEs [consumer, producer) to
/// the same counter values in the new ring.
struct modify_srq_in {
    uint32_t limit;    ///< SRQ_MODIFY_LIMIT: the new limit
    uint32_t max_wr;   ///< SRQ_MODIFY_SIZE: new capacity (< 2^log_size)
    uint64_t base;     ///< SRQ_MODIFY_SIZE: new ring
    uint8_t log_size;  ///< SRQ_MODIFY_SIZE: log2 slots of the new ring (same stride)
    uint8_t rsvd[15];  ///< reserved, zero
};
static_assert(sizeof(modify_srq_in) == 32);

/// CMD_ATTACH_MCAST / CMD_DETACH_MCAST input: the group (MGID and its MLID).
struct mcast_in {
    uint8_t mgid[16];  ///< multicast GID, wire order (byte 0 is 0xFF)
    uint16_t mlid;     ///< multicast LID (0xC000..0xFFFE)
    uint16_t rsvd0;    ///< reserved, zero
    uint32_t rsvd1;    ///< reserved, zero
};
static_assert(sizeof(mcast_in) == 24);
static_assert(offsetof(mcast_in, mlid) == 16);

/// CMD_CREATE_MPT op_mod.
enum mpt_create_mode : uint32_t {
    MPT_CREATE = 0,  ///< the index must be Invalid
    MPT_MODIFY = 1,  ///< Reregister: replace a Valid MR (no windows bound) in one step; the HCA
                     ///< keeps its own fields (bound_mws) and drops its cached copies
};

/// Command completion status (cmd_mailbox::status bits 7..0).
enum cmd_status : uint8_t {
    CMD_OK = 0x00,
    CMD_BAD_OPCODE = 0x01,    ///< unknown opcode
    CMD_BAD_PARAM = 0x02,     ///< a field is out of range
    CMD_BAD_RESOURCE = 0x03,  ///< the CQN/QPN/index does not exist or is busy
    CMD_BAD_STATE = 0x04,     ///< the resource is in the wrong state for this command
    CMD_NOT_INIT = 0x05,      ///< INIT_HCA has not run
};
/// cmd_mailbox::status bit 31: the command finished.
constexpr uint32_t CMD_DONE = 0x80000000u;

/// Input/output area sizes of a mailbox.
constexpr size_t CMD_IN_BYTES = 1024;
constexpr size_t CMD_OUT_BYTES = 512;

/// Command mailbox in host memory (aligned to 64 bytes).
struct cmd_mailbox {
    uint16_t opcode;             ///< cmd_opcode
    uint16_t rsvd0;              ///< reserved, zero
    uint32_t in_mod;             ///< input modifier (resource number)
    uint32_t op_mod;             ///< opcode modifier
    uint32_t token;              ///< token written to REG_CMD_DOORBELL
    uint32_t status;             ///< written by the HCA: CMD_DONE | cmd_status
    uint32_t done_token;         ///< written by the HCA with status: token of the finished command
    uint32_t rsvd1[10];          ///< reserved, zero
    uint8_t in[CMD_IN_BYTES];    ///< input area
    uint8_t out[CMD_OUT_BYTES];  ///< output area
};
static_assert(sizeof(cmd_mailbox) == 64 + CMD_IN_BYTES + CMD_OUT_BYTES);
static_assert(offsetof(cmd_mailbox, status) == 16 && offsetof(cmd_mailbox, in) == 64);

/// CMD_INIT_HCA input: where the context tables live and how big they are.
struct init_hca_in {
    uint64_t qpc_base;     ///< qp_context table
    uint64_t cqc_base;     ///< cq_context table
    uint64_t eqc_base;     ///< eq_context table
    uint64_t mpt_base;     ///< mpt_entry table
    uint64_t mtt_base;     ///< mtt_entry table
    uint8_t log_num_qps;   ///< log2 QPC entries
    uint8_t log_num_cqs;   ///< log2 CQC entries
    uint8_t log_num_eqs;   ///< log2 EQC entries
    uint8_t log_num_mpts;  ///< log2 MPT entries
    uint8_t log_num_mtts;  ///< log2 MTT entries
    uint8_t log_num_srqs;  ///< log2 SRQC entries (CAP_SRQ)
    uint8_t rsvd[2];       ///< reserved, zero
    uint64_t srqc_base;    ///< srq_context table (CAP_SRQ)
    uint64_t rsvd1;        ///< reserved, zero
};
static_assert(sizeof(init_hca_in) == 64 && offsetof(init_hca_in, srqc_base) == 48);

/// Capability flags in hca_caps::flags (optional features the HCA implements).
enum hca_cap_flags : uint64_t {
    CAP_RC = 1ull << 0,                ///< reliable connected
    CAP_UC = 1ull << 1,                ///< unreliable connected
    CAP_UD = 1ull << 2,                ///< unreliable datagram
    CAP_RD = 1ull << 3,                ///< reliable datagram (EE contexts)
    CAP_XRC = 1ull << 4,               ///< extended reliable connected
    CAP_SRQ = 1ull << 5,               ///< shared receive queues
    CAP_ATOMIC = 1ull << 6,            ///< atomic operations
    CAP_MW = 1ull << 7,                ///< memory windows
    CAP_APM = 1ull << 8,               ///< automatic path migration
    CAP_MCAST = 1ull << 9,             ///< UD multicast
    CAP_RDMA_READ = 1ull << 10,        ///< RDMA READ
    CAP_SEND_INV = 1ull << 11,         ///< send with invalidate / base memory management extensions
    CAP_RESIZE_CQ = 1ull << 12,        ///< resize CQ
    CAP_SQD_ASYNC = 1ull << 13,        ///< SQ drained async event
    CAP_INLINE = 1ull << 14,           ///< inline data in WQEs
    CAP_MW_TYPE2A = 1ull << 15,        ///< type 2 windows are type 2A (QP-associated)
    CAP_MW_TYPE2B = 1ull << 16,        ///< type 2 windows are type 2B (QP- and PD-associated)
    CAP_ZBVA = 1ull << 17,             ///< zero-based virtual addresses (ACCESS_ZERO_BASED)
    CAP_BLOCK_LIST = 1ull << 18,       ///< physical registration with block lists
    CAP_LOCAL_INV_FENCE = 1ull << 19,  ///< fenced Local Invalidate gives strong ordering
    CAP_RESERVED_LKEY = 1ull << 20,    ///< the reserved L_Key (hca_caps::reserved_lkey)
    CAP_SRQ_RESIZE = 1ull << 21,       ///< CMD_MODIFY_SRQ with SRQ_MODIFY_SIZE (o10-10.2.1)
};

/// CMD_QUERY_HCA output: device attributes (feeds ibv_query_device).
struct hca_caps {
    uint64_t flags;                      ///< hca_cap_flags
    uint64_t node_guid;                  ///< node GUID
    uint64_t sys_image_guid;             ///< system image GUID
    uint64_t max_mr_size;                ///< largest MR in bytes
    uint64_t page_size_cap;              ///< supported page sizes (bit n: 2^n bytes)
    uint32_t vendor_id;                  ///< IEEE OUI
    uint32_t vendor_part_id;             ///< part number
    uint32_t hw_ver;                     ///< hardware version
    uint32_t fw_ver;                     ///< firmware interface version
    uint32_t max_qp;                     ///< QPs
    uint32_t max_qp_wr;                  ///< WQEs per queue
    uint32_t max_sge;                    ///< SGEs per WQE
    uint32_t max_cq;                     ///< CQs
    uint32_t max_cqe;                    ///< CQEs per CQ
    uint32_t max_mr;                     ///< MRs
    uint32_t max_pd;                     ///< PDs
    uint32_t max_qp_rd_atom;             ///< outstanding READ/atomic per QP as responder
    uint32_t max_qp_init_rd_atom;        ///< outstanding READ/atomic per QP as requester
    uint32_t max_inline;                 ///< inline bytes per WQE
    uint32_t max_mtt;                    ///< MTT entries
    uint32_t max_uar;                    ///< UAR pages
    uint8_t phys_port_cnt;               ///< ports
    uint8_t local_ca_ack_delay;          ///< ACK delay code
    uint16_t max_mcast_qp_attach;        ///< QPs attached to one multicast group (CAP_MCAST)
    uint32_t max_mcast_grp;              ///< multicast groups (CAP_MCAST)
    uint32_t max_mw;                     ///< memory windows (they share the MPT with MRs)
    uint32_t reserved_lkey;              ///< the reserved L_Key (CAP_RESERVED_LKEY)
    uint32_t max_fast_reg_pages;         ///< page-list entries of one Fast Register WR
    uint32_t max_total_mcast_qp_attach;  ///< QP attachments over all multicast groups (CAP_MCAST)
    uint32_t max_srq;                    ///< SRQs (CAP_SRQ)
    uint32_t max_srq_wr;                 ///< WQEs per SRQ (CAP_SRQ)
    uint32_t max_srq_sge;                ///< SGEs per SRQ WQE (CAP_SRQ)
    uint32_t num_comp_vectors;           ///< completion event handler identifiers (EQs for completion events)
    uint32_t max_ee;                     ///< EE contexts (CAP_RD)
    uint32_t max_rdd;                    ///< reliable datagram domains (CAP_RD)
    uint32_t max_rd_msg;                 ///< bytes of one RD message at most (CAP_RD, o10-51)
    uint32_t rsvd;                       ///< reserved, zero
};
static_assert(sizeof(hca_caps) == 160);
static_assert(offsetof(hca_caps, max_mcast_qp_attach) == 106 && offsetof(hca_caps, max_mcast_grp) == 108 &&
              offsetof(hca_caps, max_total_mcast_qp_attach) == 124);

/// CMD_QUERY_PORT output.
struct port_info {
    uint8_t state;             ///< 1 down, 2 init, 3 armed, 4 active
    uint8_t max_mtu;           ///< mtu_code
    uint8_t active_mtu;        ///< mtu_code
    uint8_t lmc;               ///< LID mask count
    uint16_t lid;              ///< base LID
    uint16_t sm_lid;           ///< subnet manager LID
    uint8_t link_width;        ///< 1, 4, 8 or 12 lanes
    uint8_t link_speed;        ///< 0 sdr,1 ddr,2 qdr,3 fdr,4 edr,5 hdr,6 ndr
    uint16_t pkey_table_len;   ///< P_Key table entries
    uint16_t gid_table_len;    ///< GID table entries
    uint16_t pkey_violations;  ///< P_Key violation counter (o10-57): 16 bits, saturates at 0xFFFF
    uint64_t gid_prefix;       ///< subnet prefix of GID 0
    uint64_t port_guid;        ///< port GUID (interface ID of GID 0)
    uint32_t data_rate_mbps;   ///< data rate after encoding, Mb/s
    uint16_t qkey_violations;  ///< Q_Key violation counter: 16 bits, saturates at 0xFFFF
    uint16_t rsvd1;            ///< reserved, zero
};
static_assert(sizeof(port_info) == 40);
static_assert(offsetof(port_info, pkey_violations) == 14 && offsetof(port_info, gid_prefix) == 16);
static_assert(offsetof(port_info, qkey_violations) == 36 && offsetof(port_info, rsvd1) == 38);

/// CMD_QUERY_GID output: one GID table entry.
struct gid_entry {
    uint8_t raw[16];  ///< the GID in network byte order, as in a GRH: subnet prefix (8 bytes, MSB
                      ///< first), then interface ID (8 bytes, MSB first)
};
static_assert(sizeof(gid_entry) == 16);

/// Modify-QP attribute mask bits (libibverbs ibv_qp_attr_mask values).
enum qp_attr_mask : uint32_t {
    QP_ATTR_STATE = 1 << 0,
    QP_ATTR_CUR_STATE = 1 << 1,
    QP_ATTR_EN_SQD_ASYNC_NOTIFY = 1 << 2,
    QP_ATTR_ACCESS_FLAGS = 1 << 3,
    QP_ATTR_PKEY_INDEX = 1 << 4,
    QP_ATTR_PORT = 1 << 5,
    QP_ATTR_QKEY = 1 << 6,
    QP_ATTR_AV = 1 << 7,
    QP_ATTR_PATH_MTU = 1 << 8,
    QP_ATTR_TIMEOUT = 1 << 9,
    QP_ATTR_RETRY_CNT = 1 << 10,
    QP_ATTR_RNR_RETRY = 1 << 11,
    QP_ATTR_RQ_PSN = 1 << 12,
    QP_ATTR_MAX_QP_RD_ATOMIC = 1 << 13,
    QP_ATTR_ALT_PATH = 1 << 14,
    QP_ATTR_MIN_RNR_TIMER = 1 << 15,
    QP_ATTR_SQ_PSN = 1 << 16,
    QP_ATTR_MAX_DEST_RD_ATOMIC = 1 << 17,
    QP_ATTR_PATH_MIG_STATE = 1 << 18,
    QP_ATTR_CAP = 1 << 19,
    QP_ATTR_DEST_QPN = 1 << 20,
};

/// CMD_MODIFY_QP input: the attribute mask and the full context after the change.
struct modify_qp_in {
    uint32_t attr_mask;  ///< qp_attr_mask bits that changed
    uint8_t cur_state;   ///< state software believes the QP is in
    uint8_t rsvd[59];    ///< reserved, zero
    qp_context ctx;      ///< context with the new attributes and state
};
static_assert(sizeof(modify_qp_in) == 64 + sizeof(qp_context));

/// CMD_MODIFY_EEC input (op_mod: the new qp_state).
struct modify_eec_in {
    uint32_t attr_mask;  ///< qp_attr_mask bits that changed (the EE context's subset)
    uint8_t cur_state;   ///< state software believes the EE context is in
    uint8_t rsvd[59];    ///< reserved, zero
    eec_context ctx;     ///< context with the new attributes and state
};
static_assert(sizeof(modify_eec_in) == 64 + sizeof(eec_context));

/// CMD_WRITE_MTT input header; `count` mtt_entry values follow.
struct write_mtt_in {
    uint64_t first_index;  ///< first MTT entry to write
    uint32_t count;        ///< entries that follow (at most WRITE_MTT_MAX)
    uint32_t rsvd;         ///< reserved, zero
};
static_assert(sizeof(write_mtt_in) == 16);
constexpr uint32_t WRITE_MTT_MAX = (CMD_IN_BYTES - sizeof(write_mtt_in)) / sizeof(mtt_entry);

}  // namespace hcasim::hw
