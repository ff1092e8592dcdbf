// A unit's DMA master port: one initiator socket plus typed helpers that build the generic
// payload, so units say `dma.read(pa, buf, n, delay)`. Timing is loosely timed: `delay` is the
// caller's local time offset on entry and the completion offset on return.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>

#include <cstdint>

#include "tlm_if/tlm_ext.h"

namespace hcasim {

class dma_port {
public:
    tlm_utils::simple_initiator_socket<dma_port> socket;

    explicit dma_port(const char* name) : socket(name) {}

    [[nodiscard]] bool read(uint64_t pa, void* dst, uint32_t n, sc_core::sc_time& delay) {
        return transfer(tlm::TLM_READ_COMMAND, pa, dst, n, delay);
    }
    /// A read whose data the unit does not use (a context cache, which decides timing only):
    /// timed and counted like read(), but host memory copies nothing (no data pointer).
    [[nodiscard]] bool read_timing(uint64_t pa, uint32_t n, sc_core::sc_time& delay) {
        return transfer(tlm::TLM_READ_COMMAND, pa, nullptr, n, delay);
    }
    [[nodiscard]] bool write(uint64_t pa, const void* src, uint32_t n, sc_core::sc_time& delay) {
        return transfer(tlm::TLM_WRITE_COMMAND, pa, const_cast<void*>(src), n, delay);
    }
    /// A write whose source buffer the target may take instead of copying (buffer_loan_ext;
    /// nullptr: an ordinary write).
    [[nodiscard]] bool write(uint64_t pa, const void* src, uint32_t n, sc_core::sc_time& delay,
                             buffer_loan_ext* loan) {
        if (!loan) return write(pa, src, n, delay);
        gp_.set_extension(loan);
        const bool ok = transfer(tlm::TLM_WRITE_COMMAND, pa, const_cast<void*>(src), n, delay);
        gp_.clear_extension(loan);
        return ok;
    }
    /// Executes an atomic at host memory; returns false on error, `original` the prior value.
    [[nodiscard]] bool atomic(uint64_t pa, atomic_ext::op_type op, uint64_t compare, uint64_t swap_add,
                              uint64_t& original, sc_core::sc_time& delay) {
        atomic_ext ext(op, compare, swap_add);
        uint64_t data = 0;
        gp_.set_extension(&ext);
        bool ok = transfer(tlm::TLM_READ_COMMAND, pa, &data, 8, delay);
        gp_.clear_extension(&ext);
        original = ext.result;
        return ok;
    }

private:
    bool transfer(tlm::tlm_command cmd, uint64_t pa, void* data, uint32_t n, sc_core::sc_time& delay) {
        gp_.set_command(cmd);
        gp_.set_address(pa);
        gp_.set_data_ptr(static_cast<unsigned char*>(data));
        gp_.set_data_length(n);
        gp_.set_streaming_width(n);
        gp_.set_byte_enable_ptr(nullptr);
        gp_.set_dmi_allowed(false);
        gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
        socket->b_transport(gp_, delay);
        return gp_.is_response_ok();
    }
    tlm::tlm_generic_payload gp_;  // reused: no allocation per transfer
};

}  // namespace hcasim
