// What the command unit needs of the transport engine: the QP context table's location, QP
// contexts loaded and destroyed, and the QP's state and PSNs as the hardware has them (QUERY_QP).
#pragma once
#include <systemc>

#include <cstdint>

#include "tlm_if/contexts.h"

namespace hcasim {

class qp_control {
public:
    virtual ~qp_control() = default;
    virtual void set_qpc_table(uint64_t base) = 0;
    virtual void load_qp(const hw::qp_context& c, uint32_t attr_mask, sc_core::sc_time& delay) = 0;
    virtual void destroy_qp(uint32_t qpn) = 0;
    virtual uint8_t state(uint32_t qpn) const = 0;
    virtual bool draining(uint32_t qpn) const = 0;
    virtual void current_psns(uint32_t qpn, uint32_t& sq_psn, uint32_t& rq_psn) const = 0;
    // EE contexts (reliable datagram): held on chip by the transport engine.
    virtual void load_eec(const hw::eec_context& c, uint32_t attr_mask, sc_core::sc_time& delay) = 0;
    virtual void destroy_eec(uint32_t eecn) = 0;
    virtual uint8_t eec_state(uint32_t eecn) const = 0;
    virtual void eec_psns(uint32_t eecn, uint32_t& sq_psn, uint32_t& rq_psn) const = 0;
    /// The EE context's paths and path migration state as the engine has them now (a migration
    /// swaps the primary and the alternate path): into c's path fields and path_mig_state.
    virtual void eec_paths(uint32_t eecn, hw::eec_context& c) const = 0;
};

}  // namespace hcasim
