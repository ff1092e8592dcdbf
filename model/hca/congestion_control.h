// Congestion control, CA side (IBA Vol 1 Annex A10: CACongestionSetting and the
// CongestionControlTable): the congestion control table index (CCTI) of each flow, raised by
// BECNs and lowered by the CCTI timer, and the injection delay it asks for. Plain C++ with
// exact integer picoseconds and no events: the timer is computed from times when the caller
// asks (ccti_at, on_becn, injection_delay_ps), calls in non-decreasing time.
//
// Per flow (a QP under QP-based CC, an SL under SL-based: Port_Control bit 0), with the
// CACongestionEntry of the flow's SL:
//   - A flow starts at CCTI = CCTI_Min (as PSM's path records do: ips_path_rec.c).
//   - A BECN (in an ACK or a CNP) adds CCTI_Increase, capped at CCTI_Limit. If the CCTI is
//     then above CCTI_Min and the timer is not running, the timer starts at the BECN's time;
//     a running timer keeps its phase (Linux hfi1 process_becn starts the hrtimer only when it
//     is not active).
//   - The timer expires every CCTI_Timer x 1.024 us (1,024,000 ps a count) after it started;
//     each expiry lowers the CCTI by 1, and the timer stops when the CCTI reaches CCTI_Min
//     (hfi1 cca_timer_fn; ../shared/reference/fabric.md §3.2). An expiry at exactly time t has
//     happened by t. CCTI_Timer 0 means the CCTI never decreases [model].
//   - Trigger_Threshold (0 = off): each BECN after which the CCTI is at or above it counts a
//     trigger event (hfi1 logs a congestion-log event then: "ccti >= trigger_threshold").
//   - The delay after a packet, before the flow's next packet may start, is
//     (T_pkt >> CCT_Shift) * CCT_Multiplier of the CCT entry at the flow's CCTI, T_pkt being
//     that packet's serialisation time at the port's rate in picoseconds. This packet's time,
//     as PSM does (ips_proto_help.h: time_to_send of this message), rather than hfi1's
//     max-MTU packet time, so small packets are not slowed as much as full ones.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "model/core/cc_config.h"

namespace hcasim {

/// CCTI_Timer's unit, 1.024 us, in picoseconds.
constexpr uint64_t CCTI_TIMER_UNIT_PS = 1'024'000;

/// One CACongestionEntry (one per SL).
struct ca_cong_entry {
    uint16_t ccti_timer = 0;        ///< CCTI_Timer, 1.024 us units (0 = never decrease)
    uint8_t ccti_increase = 0;      ///< CCTI_Increase: added on each BECN
    uint8_t trigger_threshold = 0;  ///< Trigger_Threshold (0 = no trigger events)
    uint8_t ccti_min = 0;           ///< CCTI_Min: the floor of the CCTI
};

/// CACongestionSetting plus the CongestionControlTable of one CA port.
struct ca_cc_settings {
    bool enable = false;                      ///< congestion control on (else no delays, BECNs ignored)
    bool sl_based = false;                    ///< Port_Control bit 0: flows are SLs (else QPs)
    std::array<ca_cong_entry, 16> entry;      ///< CACongestionEntry per SL
    uint16_t ccti_limit = 0;                  ///< CCTI_Limit: the highest index used, < cct.size()
    std::vector<cct_entry> cct{cct_entry{}};  ///< CongestionControlTable entries

    /// From the validated fabric.cc.* keys: the same entry on every SL.
    static ca_cc_settings from(const cc_config& c);
};

/// (t_pkt_ps >> e.shift) * e.multiplier: the delay a CCT entry asks for after a packet that
/// took t_pkt_ps to serialise.
inline uint64_t cct_delay_ps(const cct_entry& e, uint64_t t_pkt_ps) {
    return (t_pkt_ps >> e.shift) * e.multiplier;
}

/// The CCTI of every flow of one CA port, and the counters.
class ca_congestion_control {
public:
    explicit ca_congestion_control(const ca_cc_settings& s) : s_(s) {}

    /// The flow a packet of QP `qpn` on SL `sl` belongs to: `sl` when SL-based, else `qpn`.
    uint32_t flow_of(uint32_t qpn, uint8_t sl) const { return s_.sl_based ? sl : qpn; }
    /// The flow's CCTI at `now_ps` (after the timer expiries up to and including now_ps).
    uint16_t ccti_at(uint32_t qpn, uint8_t sl, uint64_t now_ps);
    /// A BECN for the flow arrived at `now_ps`. Ignored when CC is off.
    void on_becn(uint32_t qpn, uint8_t sl, uint64_t now_ps);
    /// The gap (ps) the flow leaves after a packet it sends at `now_ps` whose serialisation
    /// time is `t_pkt_ps`: cct_delay_ps of the CCT entry at its CCTI. 0 when CC is off.
    uint64_t injection_delay_ps(uint32_t qpn, uint8_t sl, uint64_t now_ps, uint64_t t_pkt_ps);

    /// One flow's counters for the report.
    struct flow_report {
        uint32_t flow = 0;      ///< QP number or SL
        uint16_t ccti = 0;      ///< CCTI at the time flows() was asked
        uint16_t max_ccti = 0;  ///< highest CCTI the flow reached
        uint64_t becns = 0;     ///< BECNs received for the flow
    };
    /// Every flow that has asked or received a BECN, by flow number, advanced to `now_ps`.
    std::vector<flow_report> flows(uint64_t now_ps);
    uint64_t becn_received() const { return becns_; }      ///< BECNs acted on, all flows
    uint64_t trigger_events() const { return triggers_; }  ///< BECNs that left a CCTI >= Trigger_Threshold
    const ca_cc_settings& settings() const { return s_; }

private:
    struct flow_state {
        uint8_t sl = 0;
        uint16_t ccti = 0, max_ccti = 0;
        bool timer_running = false;
        uint64_t next_expiry_ps = 0;  // when the running timer next lowers the CCTI
        uint64_t becns = 0;
    };
    flow_state& flow(uint32_t qpn, uint8_t sl);
    // Applies the timer expiries up to and including now_ps.
    void advance(flow_state& f, uint64_t now_ps) const;

    ca_cc_settings s_;
    std::map<uint32_t, flow_state> flows_;  // ordered: reports come out the same every run
    uint64_t becns_ = 0, triggers_ = 0;
};

}  // namespace hcasim
