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
//
// The unit runs as this TLM model (`impl=tlm`, zero time), as the RTL of rtl/pkey_checker.sv
// verilated and driven pin by pin (`impl=rtl`, pkey_checker_rtl), or as both side by side
// (`impl=both`): every packet is checked by the two, the RTL's verdict is the one that counts,
// and the first disagreement stops the simulation with a report (docs/cosim.md).
#pragma once
#include <systemc>

#include <memory>
#include <string>
#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/hca/pkey_checker_rtl.h"
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

/// What the transport engine needs of the P_Key table: a QP's P_Key, the violation counters
/// of the checks it makes itself (multicast members, Q_Keys), and a QP's P_Key index after a
/// path migration.
class partition_keys {
public:
    virtual ~partition_keys() = default;
    virtual uint16_t pkey(unsigned index) const = 0;
    virtual void pkey_violation(const rx_packet& p, uint16_t local_key) = 0;
    virtual void qkey_violation() = 0;
    /// A path migration moved the QP to its alternate path's P_Key index (IBA 10.4).
    virtual void bind_qp(uint32_t qpn, uint16_t pkey_index) = 0;
};

/// What the command unit needs of it: the table (QUERY/SET_PKEY), QP bindings, the counters
/// QUERY_PORT reports.
class pkey_control {
public:
    virtual ~pkey_control() = default;
    virtual unsigned size() const = 0;
    virtual bool set_pkey(unsigned index, uint16_t pkey) = 0;
    virtual uint16_t pkey(unsigned index) const = 0;
    virtual void bind_qp(uint32_t qpn, uint16_t pkey_index) = 0;
    virtual void unbind_qp(uint32_t qpn) = 0;
    virtual uint16_t pkey_violation_count() const = 0;
    virtual uint16_t qkey_violation_count() const = 0;
};

class pkey_checker final : public sc_core::sc_module,
                           public rx_sink,
                           public partition_keys,
                           public pkey_control,
                           private pkey_rtl_client {
public:
    param<unsigned> table_len;       ///< P_Key table entries of the port (1..65535, C10-121)
    param<std::string> impl;         ///< tlm|rtl|both
    param<std::string> rtl_variant;  ///< reference|broken_membership (a deliberately wrong build)
    param<std::string> rtl_lib;      ///< a plug-in library (rtl/abi/hcasim_rtl.h) instead ("": none)
    param<double> clock_mhz;         ///< the RTL's clock (0: the HCA's)
    param<std::string> waves;        ///< FST file of the RTL's pins ("": none)

    counter checked, violations, qkey_violations;
    module_log log_;  ///< info: every packet dropped for a P_Key violation
    counter rtl_checks, rtl_cycles, rtl_compared, divergences;

    /// QPNs of the management QPs (IBA 10.9.8).
    static constexpr uint32_t SMI_QPN = 0, GSI_QPN = 1;

    /// `hca_clock`: the RTL's clock when clock_mhz is 0.
    pkey_checker(const sc_core::sc_module_name& name, unsigned max_qps,
                 const sc_core::sc_time& hca_clock = sc_core::sc_time(1250, sc_core::SC_PS));
    ~pkey_checker() override;

    /// True when the RTL checks the packets (impl rtl or both).
    bool rtl_active() const { return bool(rtl_); }
    /// True when the TLM model and the RTL check every packet side by side (impl=both).
    bool compares() const { return compare_; }
    /// impl=both: the report of the first disagreement between the TLM model and the RTL
    /// ("" while they agree). The simulation was stopped when it was made.
    const std::string& divergence() const { return divergence_; }

    /// Where accepted packets go.
    void bind_receiver(rx_sink& sink) {
        sink_ = &sink;
        hints_as(sink);
    }
    /// Where subnet management packets to QP0 go (the SMA).
    void bind_smi(rx_sink& sink) { smi_ = &sink; }
    /// Who is told of P_Key violations (the SMA).
    void bind_violation_sink(pkey_violation_sink& s) { violation_sink_ = &s; }
    /// Number of entries of the P_Key table.
    unsigned size() const override { return unsigned(table_.size()); }
    /// Writes one P_Key table entry (subnet-manager path); false if index is out of range.
    bool set_pkey(unsigned index, uint16_t pkey) override;
    uint16_t pkey(unsigned index) const override { return index < table_.size() ? table_[index] : 0; }
    /// Binds a QP to a table index (from its context); unbound QPNs pass unchecked (the transport engine drops them).
    void bind_qp(uint32_t qpn, uint16_t pkey_index) override;
    void unbind_qp(uint32_t qpn) override;

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

    /// o10-57: P_Key violation counter (16 bits, saturates at 0xFFFF, zero at power-on); with
    /// impl=rtl the RTL's.
    uint16_t pkey_violation_count() const override;
    /// Q_Key violation counter (16 bits, saturating), reported next to the P_Key one.
    uint16_t qkey_violation_count() const override;
    /// Counts one received packet dropped for a Q_Key mismatch (C10-14); called by the unit
    /// that checks Q_Keys.
    void qkey_violation() override;

    void receive(const rx_packet& p) override;
    void expect(uint32_t dest_qp) override {
        if (sink_) sink_->expect(dest_qp);
    }

    /// Counts one packet dropped for its P_Key (checked against `local_key`; 0 if no entry
    /// matched) and reports it to the violation sink. Called by the transport engine for a
    /// multicast datagram a member QP's P_Key refuses.
    void pkey_violation(const rx_packet& p, uint16_t local_key) override;

    /// The TLM model's verdict on `p` with the table and bindings as they are now.
    pkey_verdict decide(const rx_packet& p) const;

private:
    /// Acts on a verdict: forwards the packet (to the SMA, or to the transport engine with the
    /// matched index for QP1) or counts the violation and reports it.
    void apply(const rx_packet& p, const pkey_verdict& v);
    void count_violation(const rx_packet& p, uint16_t local_key);
    // pkey_rtl_client: the RTL's verdict on the oldest packet it holds; it went idle.
    void rtl_verdict(const pkey_verdict& v) override;
    void rtl_idle() override;
    void diverge(const std::string& what, const rx_packet* p, const pkey_verdict* tlm,
                 const pkey_verdict* rtl);

    /// A packet the RTL is checking: a copy of it (the port's bytes are valid only during
    /// receive) and, with impl=both, the TLM model's verdict.
    struct held {
        rx_packet p{};
        std::vector<uint8_t> bytes;
        pkey_verdict tlm{};
    };
    std::vector<held> held_;  // ring: grows to the most packets ever in flight, reused
    size_t held_head_ = 0, held_count_ = 0;
    uint8_t next_tag_ = 0;
    bool compare_ = false;  // impl=both
    std::unique_ptr<pkey_checker_rtl> rtl_;
    std::string divergence_;

    rx_sink* sink_ = nullptr;
    rx_sink* smi_ = nullptr;
    pkey_violation_sink* violation_sink_ = nullptr;
    std::vector<uint16_t> table_;
    std::vector<int32_t> qp_index_;  // per QPN: bound table index, -1 if none
    std::vector<uint16_t> full_,
        limited_;  // per low 15 bits: entries holding that key as full / limited member
    uint16_t pkey_viol_ = 0, qkey_viol_ = 0;
};

}  // namespace hcasim
