// P_Key checker: every received packet's BTH P_Key is matched against the P_Key the
// destination QP is bound to (its pkey_index into the port's P_Key table) by the IBA matching
// rule (10.9.3); mismatches are dropped and counted, matches go on to the transport engine.
#pragma once
#include <systemc>

#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/hca/rx_packet.h"

namespace hcasim {

class pkey_checker : public sc_core::sc_module, public rx_sink {
public:
    param<unsigned> table_len;  ///< P_Key table entries of the port

    counter checked, violations;

    pkey_checker(const sc_core::sc_module_name& name, unsigned max_qps);

    /// Where accepted packets go.
    void bind_receiver(rx_sink& sink) { sink_ = &sink; }
    /// Writes one P_Key table entry (subnet-manager path); false if index is out of range.
    bool set_pkey(unsigned index, uint16_t pkey);
    uint16_t pkey(unsigned index) const { return index < table_.size() ? table_[index] : 0; }
    /// Binds a QP to a table index (from its context); unbound QPNs pass unchecked (the transport engine drops them).
    void bind_qp(uint32_t qpn, uint16_t pkey_index);
    void unbind_qp(uint32_t qpn);

    /// The IBA match: low 15 bits equal and non-zero, and at least one full member.
    static bool match(uint16_t a, uint16_t b) {
        return (a & 0x7FFF) != 0 && (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000);
    }

    void receive(const rx_packet& p) override;

private:
    rx_sink* sink_ = nullptr;
    std::vector<uint16_t> table_;
    std::vector<int32_t> qp_index_;  // per QPN: bound table index, -1 if none
};

}  // namespace hcasim
