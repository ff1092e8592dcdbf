// P_Key checker: every received packet's BTH P_Key is matched against the P_Key the
// destination QP is bound to (its pkey_index into the port's P_Key table) by the IBA matching
// rule (10.9.3); mismatches are dropped and counted, matches go on to the transport engine.
// The management QPs follow 10.9.8: QP0 (SMI) accepts any P_Key, QP1 (GSI) any P_Key that
// matches a valid entry of the table. The unit also holds the port's two 16-bit saturating
// key violation counters that QUERY_PORT reports (IBA PortInfo P_KeyViolations and
// Q_KeyViolations): the P_Key one counts its own drops, the Q_Key one is counted by whoever
// checks Q_Keys (the transport engine) through qkey_violation().
// Subnet management packets (UD SENDs to QP0 carrying a SubnMgmt MAD) go to the subnet
// management agent, not to the transport engine (C10-12); every P_Key violation is also
// reported to the agent, which may send a Bad P_Key trap (o10-55.1.1).
#pragma once
#include <systemc>

#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/hca/rx_packet.h"

namespace hcasim {

/// Told of every P_Key violation (the subnet management agent: Bad P_Key traps).
class pkey_violation_sink {
public:
    virtual ~pkey_violation_sink() = default;
    /// Packet `p` failed the P_Key check against `local_key` (the table entry it was checked
    /// against; 0 when it matched no entry of the table).
    virtual void bad_pkey(const rx_packet& p, uint16_t local_key) = 0;
};

class pkey_checker : public sc_core::sc_module, public rx_sink {
public:
    param<unsigned> table_len;  ///< P_Key table entries of the port (1..65535, C10-121)

    counter checked, violations, qkey_violations;

    /// QPNs of the management QPs (IBA 10.9.8).
    static constexpr uint32_t SMI_QPN = 0, GSI_QPN = 1;

    pkey_checker(const sc_core::sc_module_name& name, unsigned max_qps);

    /// Where accepted packets go.
    void bind_receiver(rx_sink& sink) { sink_ = &sink; }
    /// Where subnet management packets to QP0 go (the SMA).
    void bind_smi(rx_sink& sink) { smi_ = &sink; }
    /// Who is told of P_Key violations (the SMA).
    void bind_violation_sink(pkey_violation_sink& s) { violation_sink_ = &s; }
    /// Number of entries of the P_Key table.
    unsigned size() const { return unsigned(table_.size()); }
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
    /// Lowest table index whose entry matches `pkey` (C10-132), or -1.
    int32_t find_match(uint16_t pkey) const;
    /// True if some entry of the table matches `pkey` (O(1): per-key counts of full and
    /// limited entries kept by set_pkey).
    bool any_match(uint16_t pkey) const {
        const uint16_t k = pkey & 0x7FFF;
        return k != 0 && (full_[k] || ((pkey & 0x8000) && limited_[k]));
    }

    /// o10-57: P_Key violation counter (16 bits, saturates at 0xFFFF, zero at power-on).
    uint16_t pkey_violation_count() const { return pkey_viol_; }
    /// Q_Key violation counter (16 bits, saturating), reported next to the P_Key one.
    uint16_t qkey_violation_count() const { return qkey_viol_; }
    /// Counts one received packet dropped for a Q_Key mismatch (C10-14); called by the unit
    /// that checks Q_Keys.
    void qkey_violation() {
        ++qkey_violations;
        if (qkey_viol_ != 0xFFFF)
            ++qkey_viol_;
    }

    void receive(const rx_packet& p) override;

    /// Counts one packet dropped for its P_Key (checked against `local_key`; 0 if no entry
    /// matched) and reports it to the violation sink. Called by this unit, and by the transport
    /// engine for a multicast datagram a member QP's P_Key refuses.
    void pkey_violation(const rx_packet& p, uint16_t local_key) {
        ++violations;
        if (pkey_viol_ != 0xFFFF)
            ++pkey_viol_;
        if (violation_sink_)
            violation_sink_->bad_pkey(p, local_key);
    }

private:

    rx_sink* sink_ = nullptr;
    rx_sink* smi_ = nullptr;
    pkey_violation_sink* violation_sink_ = nullptr;
    std::vector<uint16_t> table_;
    std::vector<int32_t> qp_index_;  // per QPN: bound table index, -1 if none
    std::vector<uint16_t> full_, limited_;  // per low 15 bits: entries holding that key as full / limited member
    uint16_t pkey_viol_ = 0, qkey_viol_ = 0;
};

}  // namespace hcasim
