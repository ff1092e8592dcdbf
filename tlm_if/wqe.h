// Work queue element layouts in host memory (interface version 2).
//
// A send WQE is a control segment followed by the segments its opcode needs, in this order:
// [remote-address] [atomic] [UD address | RD address] then data segments or one inline-data segment;
// memory management WQEs (bind, fast register) carry their one segment instead.
// Segments are multiples of 16 bytes. A send queue is a ring of slots of `1 << sq_log_stride`
// bytes (a multiple of the 64-byte basic block); one WQE occupies one slot. A receive WQE is a
// recv_header followed by data segments, in slots of `1 << rq_log_stride` bytes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace hcasim::hw {

/// Basic block: the unit of WQE slot sizes and of the inline window.
constexpr uint32_t WQE_BASIC_BLOCK = 64;

/// Send opcodes in the control segment.
enum wqe_opcode : uint8_t {
    WQE_OP_SEND = 0x00,            ///< SEND
    WQE_OP_SEND_IMM = 0x01,        ///< SEND with immediate
    WQE_OP_RDMA_WRITE = 0x02,      ///< RDMA WRITE
    WQE_OP_RDMA_WRITE_IMM = 0x03,  ///< RDMA WRITE with immediate
    WQE_OP_RDMA_READ = 0x04,       ///< RDMA READ
    WQE_OP_CMP_SWAP = 0x05,        ///< atomic compare and swap
    WQE_OP_FETCH_ADD = 0x06,       ///< atomic fetch and add
    WQE_OP_SEND_INV = 0x07,        ///< SEND with invalidate (ctrl imm: the R_Key to invalidate)
    WQE_OP_LOCAL_INV = 0x08,       ///< Local Invalidate (ctrl imm: the L_Key / R_Key); no segments
    WQE_OP_BIND_MW = 0x09,         ///< bind a memory window: one wqe_bind_seg
    WQE_OP_FAST_REG = 0x0A,        ///< Fast Register Physical MR: one wqe_fast_reg_seg
    WQE_OP_NOP = 0x0F,             ///< no operation (completes without traffic)
};

/// Control segment flags.
enum wqe_flags : uint8_t {
    WQE_FLAG_SIGNALED = 0x01,   ///< generate a CQE on success (errors always complete)
    WQE_FLAG_SOLICITED = 0x02,  ///< set the solicited-event bit of the last packet
    WQE_FLAG_FENCE = 0x04,      ///< wait for prior READ/atomic responses before starting
    WQE_FLAG_INLINE = 0x08,     ///< payload is in an inline-data segment
};

/// Control segment: first 32 bytes of every send WQE.
struct wqe_ctrl_seg {
    uint8_t opcode;      ///< wqe_opcode
    uint8_t flags;       ///< wqe_flags
    uint8_t ds_count;    ///< WQE size in 16-byte units, this segment included
    uint8_t rsvd0;       ///< reserved, zero
    uint32_t qpn;        ///< bits 23..0: QP number (checked against the doorbell's QPN)
    uint16_t wqe_index;  ///< producer counter value of this WQE (mod 2^16)
    uint16_t rsvd1;      ///< reserved, zero
    uint32_t imm;        ///< immediate data (SEND/WRITE with immediate) or R_Key to invalidate
    uint64_t wr_id;      ///< work request ID, returned in the CQE
    uint32_t xrc_srqn;   ///< XRC initiator QPs: the remote XRC SRQ the message goes to (XRCETH)
    uint32_t rsvd2;      ///< reserved, zero
};
static_assert(sizeof(wqe_ctrl_seg) == 32);
static_assert(offsetof(wqe_ctrl_seg, qpn) == 4 && offsetof(wqe_ctrl_seg, imm) == 12 &&
              offsetof(wqe_ctrl_seg, wr_id) == 16 && offsetof(wqe_ctrl_seg, xrc_srqn) == 24);

/// Remote-address segment (RDMA WRITE/READ, atomics).
struct wqe_raddr_seg {
    uint64_t remote_va;  ///< remote virtual address
    uint32_t rkey;       ///< remote key
    uint32_t rsvd;       ///< reserved, zero
};
static_assert(sizeof(wqe_raddr_seg) == 16);

/// Atomic segment (compare-and-swap, fetch-and-add).
struct wqe_atomic_seg {
    uint64_t swap_add;  ///< swap value (CmpSwap) or addend (FetchAdd)
    uint64_t compare;   ///< compare value (CmpSwap)
};
static_assert(sizeof(wqe_atomic_seg) == 16);

/// UD address segment (datagram destination).
struct wqe_ud_seg {
    uint32_t dest_qpn;      ///< bits 23..0: destination QP
    uint32_t qkey;          ///< Q_Key
    uint16_t dlid;          ///< destination LID
    uint8_t sl;             ///< service level
    uint8_t src_path_bits;  ///< source path bits (LMC)
    uint8_t grh;            ///< 1: send a GRH
    uint8_t sgid_index;     ///< source GID index
    uint8_t hop_limit;      ///< GRH hop limit
    uint8_t tclass;         ///< GRH traffic class
    uint32_t flow_label;    ///< GRH flow label (20 bits)
    uint32_t rsvd[3];       ///< reserved, zero
    uint8_t dgid[16];       ///< destination GID
};
static_assert(sizeof(wqe_ud_seg) == 48);

/// RD address segment (reliable datagram): the EE context that carries the message and the
/// destination QP behind it.
struct wqe_rd_seg {
    uint32_t eecn;      ///< local EE context (bits 23..0)
    uint32_t dest_qpn;  ///< bits 23..0: destination QP
    uint32_t qkey;      ///< Q_Key (high bit set: the QP's own, C10-15)
    uint32_t rsvd;      ///< reserved, zero
};
static_assert(sizeof(wqe_rd_seg) == 16);

/// wqe_bind_seg::bind_flags.
enum wqe_bind_flags : uint32_t {
    BIND_FROM_VERB = 0x1,  ///< posted by the Bind MW verb (type 1 windows only, o10-37.2.34/.35)
};

/// Bind segment (WQE_OP_BIND_MW), 32 bytes. Length 0 unbinds a type 1 window (C10-66.2.4).
struct wqe_bind_seg {
    uint32_t mw_key;      ///< the window's current R_Key (type 2: any key byte of its index)
    uint32_t new_key;     ///< the window's R_Key after the bind (same index)
    uint32_t mr_lkey;     ///< L_Key of the region to bind to
    uint32_t access;      ///< remote rights granted (ACCESS_REMOTE_*, ACCESS_ZERO_BASED)
    uint64_t addr;        ///< first address in the region (the region's addressing)
    uint32_t length;      ///< bytes (up to 2^32 - 1)
    uint32_t bind_flags;  ///< wqe_bind_flags
};
static_assert(sizeof(wqe_bind_seg) == 32);

/// Fast register segment (WQE_OP_FAST_REG), 48 bytes. The HCA reads the page list (page_count
/// 64-bit page-aligned physical addresses) from host memory and makes the L_Key Valid.
struct wqe_fast_reg_seg {
    uint32_t lkey;          ///< index from Allocate L_Key + the consumer's key byte
    uint32_t access;        ///< access_flags of the region
    uint64_t iova;          ///< first address of the region (ignored with ACCESS_ZERO_BASED)
    uint64_t length;        ///< bytes
    uint64_t page_list_pa;  ///< host physical address of the page list
    uint32_t page_count;    ///< entries in the page list
    uint32_t page_offset;   ///< offset of the region's first byte in the first page
    uint8_t log_page_size;  ///< log2 page size of the list (12..30)
    uint8_t rsvd[7];        ///< reserved, zero
};
static_assert(sizeof(wqe_fast_reg_seg) == 48);

/// Data (scatter/gather) segment.
struct wqe_data_seg {
    uint32_t byte_count;  ///< bytes at addr (0 means 2^31)
    uint32_t lkey;        ///< local key of the memory region
    uint64_t addr;        ///< virtual address
};
static_assert(sizeof(wqe_data_seg) == 16);

/// Inline-data segment header; `byte_count & INLINE_LEN_MASK` bytes of data follow, padded to
/// 16 bytes.
struct wqe_inline_seg {
    uint32_t byte_count;  ///< INLINE_SEG_FLAG | length
};
static_assert(sizeof(wqe_inline_seg) == 4);
constexpr uint32_t INLINE_SEG_FLAG = 0x80000000u;
constexpr uint32_t INLINE_LEN_MASK = 0x3FFu;

/// Receive WQE header (16 bytes); `num_sge` data segments follow.
struct wqe_recv_header {
    uint64_t wr_id;      ///< work request ID, returned in the CQE
    uint16_t num_sge;    ///< data segments that follow
    uint16_t wqe_index;  ///< producer counter value of this WQE
    uint32_t rsvd;       ///< reserved, zero
};
static_assert(sizeof(wqe_recv_header) == 16);

/// Round up to a multiple of 16 (segment granularity).
constexpr uint32_t align16(uint32_t n) { return (n + 15u) & ~15u; }

}  // namespace hcasim::hw
