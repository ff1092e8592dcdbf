// Work queue element layouts in host memory (interface version 1).
//
// A send WQE is a control segment followed by the segments its opcode needs, in this order:
// [remote-address] [atomic] [UD address] then data segments or one inline-data segment.
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
    WQE_OP_SEND_INV = 0x07,        ///< SEND with invalidate
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
    uint8_t opcode;       ///< wqe_opcode
    uint8_t flags;        ///< wqe_flags
    uint8_t ds_count;     ///< WQE size in 16-byte units, this segment included
    uint8_t rsvd0;        ///< reserved, zero
    uint32_t qpn;         ///< bits 23..0: QP number (checked against the doorbell's QPN)
    uint16_t wqe_index;   ///< producer counter value of this WQE (mod 2^16)
    uint16_t rsvd1;       ///< reserved, zero
    uint32_t imm;         ///< immediate data (SEND/WRITE with immediate) or R_Key to invalidate
    uint64_t wr_id;       ///< work request ID, returned in the CQE
    uint64_t rsvd2;       ///< reserved, zero
};
static_assert(sizeof(wqe_ctrl_seg) == 32);
static_assert(offsetof(wqe_ctrl_seg, qpn) == 4 && offsetof(wqe_ctrl_seg, imm) == 12 &&
              offsetof(wqe_ctrl_seg, wr_id) == 16);

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
    uint64_t wr_id;    ///< work request ID, returned in the CQE
    uint16_t num_sge;  ///< data segments that follow
    uint16_t wqe_index;///< producer counter value of this WQE
    uint32_t rsvd;     ///< reserved, zero
};
static_assert(sizeof(wqe_recv_header) == 16);

/// Round up to a multiple of 16 (segment granularity).
constexpr uint32_t align16(uint32_t n) { return (n + 15u) & ~15u; }

}  // namespace hcasim::hw
