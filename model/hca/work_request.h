// A send WQE after the WQE fetcher has parsed it (tlm_if/wqe.h layout -> fields), as the
// transport engine consumes it; and a parsed receive WQE.
#pragma once
#include <systemc>

#include <algorithm>
#include <cstdint>

#include "tlm_if/wqe.h"

namespace hcasim {

/// SGEs per WQE the HCA supports (reported by QUERY_HCA as max_sge).
constexpr unsigned MAX_SGE = 16;
/// Inline bytes per WQE the HCA supports.
constexpr unsigned MAX_INLINE_BYTES = 256;

struct sge {
    uint64_t addr;
    uint32_t len;
    uint32_t lkey;
};

struct send_wqe {
    uint64_t wr_id = 0;
    uint8_t opcode = 0;  ///< hw::wqe_opcode
    uint8_t flags = 0;   ///< hw::wqe_flags
    uint16_t wqe_index = 0;
    uint32_t imm = 0;
    uint64_t remote_va = 0;
    uint32_t rkey = 0;
    uint32_t xrc_srqn = 0;  ///< XRC initiator: the target's XRC SRQ (XRCETH)
    uint64_t swap_add = 0, compare = 0;
    uint8_t num_sge = 0;
    bool malformed = false;    ///< the WQE failed parsing (completes with LOC_QP_OP_ERR)
    bool fetch_error = false;  ///< its fetch DMA failed: nothing of it is known (QP_FATAL)
    uint32_t rd_eecn = 0;      ///< RD: the EE context that carries it (ud.dest_qpn, ud.qkey: the destination)
    uint64_t length = 0;       ///< total message length
    sc_core::sc_time ready;    ///< when the WQE is on chip (its fetch DMA completed and it was parsed)
    sge sg[MAX_SGE];
    hw::wqe_bind_seg bind{};      ///< WQE_OP_BIND_MW
    hw::wqe_fast_reg_seg freg{};  ///< WQE_OP_FAST_REG
    hw::wqe_ud_seg ud{};          ///< UD: the datagram's destination; RD: dest_qpn and qkey
    uint32_t inline_len = 0;
    uint8_t inline_data[MAX_INLINE_BYTES];

    /// Copies what the engine reads of `w`: every field, but the SGEs only up to num_sge and
    /// the inline bytes only up to inline_len (4 of the 12 cache lines of a one-SGE WQE
    /// instead of all of them).
    void assign_used(const send_wqe& w) {
        wr_id = w.wr_id;
        opcode = w.opcode;
        flags = w.flags;
        wqe_index = w.wqe_index;
        imm = w.imm;
        remote_va = w.remote_va;
        rkey = w.rkey;
        xrc_srqn = w.xrc_srqn;
        swap_add = w.swap_add;
        compare = w.compare;
        num_sge = w.num_sge;
        malformed = w.malformed;
        fetch_error = w.fetch_error;
        rd_eecn = w.rd_eecn;
        length = w.length;
        ready = w.ready;
        std::copy(w.sg, w.sg + std::min<unsigned>(w.num_sge, MAX_SGE), sg);
        bind = w.bind;
        freg = w.freg;
        ud = w.ud;
        inline_len = w.inline_len;
        std::copy(w.inline_data, w.inline_data + std::min<uint32_t>(w.inline_len, MAX_INLINE_BYTES),
                  inline_data);
    }
};
static_assert(sizeof(send_wqe) == 720, "a field added to send_wqe must be copied in assign_used");

struct recv_wqe {
    uint64_t wr_id = 0;
    uint16_t wqe_index = 0;
    uint8_t num_sge = 0;
    bool malformed = false;
    uint64_t capacity = 0;  ///< sum of SGE lengths
    sge sg[MAX_SGE];
};

}  // namespace hcasim
