// Congestion control, switch side (IBA Vol 1 Annex A10, SwitchCongestionSetting): whether a
// switch sets FECN on a packet it sends out of an output port's VL. Plain C++, no SystemC and
// no time: the switch asks once per packet with what it knows about that output VL.
//
// The rule (docs/fabric.md "Congestion control"; the spec's exact text was not at hand, so
// the threshold formula is this model's, [unverified] in ../shared/reference/fabric.md §3.1):
//   - An output VL is congested when the bytes queued for it (not counting the packet being
//     decided) exceed Threshold/16 of the way from a full buffer down to an empty one:
//         queued_bytes * 16 > buffer_bytes * (16 - Threshold)
//     Threshold 1 (loose) needs more than 15/16 of the buffer queued, 8 more than half, 15
//     (aggressive) more than 1/16. Threshold 0 never marks.
//   - It is a victim when it is blocked waiting for credits from downstream rather than busy
//     sending (the caller knows which); a victim port marks only if its Victim_Mask bit is set.
//   - A packet is eligible when CC is enabled, the VL is congested (and, as a victim, allowed to
//     mark) and the packet is at least Packet_Size credits (64 bytes each) long on the wire.
//   - Of the eligible packets the first is marked, then Marking_Rate are skipped, then the next
//     is marked, and so on: every (Marking_Rate + 1)th, deterministically (the spec calls it a
//     mean; a counter gives the same mean with no random numbers).
// The marker ignores a FECN the packet already carries: the caller ORs the decision into it.
#pragma once
#include <bitset>
#include <cstdint>
#include <vector>

#include "model/core/cc_config.h"

namespace hcasim {

/// SwitchCongestionSetting's marking fields (Control_Map bits 0, 2, 4), for every port.
struct cc_switch_settings {
    bool enable = false;           ///< congestion control on (else never mark)
    uint8_t threshold = 0;         ///< Threshold, 0 (off) - 15 (aggressive)
    uint16_t marking_rate = 0;     ///< Marking_Rate: eligible packets skipped after each mark
    uint8_t packet_size = 0;       ///< Packet_Size, 64-byte credits: smaller packets are never marked
    std::bitset<256> victim_mask;  ///< Victim_Mask: bit p = port p marks when only a victim

    /// From the validated fabric.cc.* keys.
    static cc_switch_settings from(const cc_config& c);
};

/// True if an output VL with `queued_bytes` waiting, scaled against `buffer_bytes`, is above
/// the level `threshold` sets: queued_bytes * 16 > buffer_bytes * (16 - threshold). False for
/// threshold 0.
bool cc_congested(uint8_t threshold, uint64_t queued_bytes, uint64_t buffer_bytes);

/// What the switch knows about one output port's VL when it decides on a packet.
struct cc_output_vl {
    uint64_t queued_bytes = 0;  ///< bytes waiting for this output VL, not counting this packet
    uint64_t buffer_bytes = 0;  ///< the buffer size Threshold scales against
    bool victim = false;        ///< blocked waiting for credits (victim), not busy sending (root)
};

/// The FECN decision for one (output port, VL): the Marking_Rate count and the counters.
class cc_marker {
public:
    /// Decides for a packet of `packet_bytes` on the wire leaving port `port` (the Victim_Mask
    /// bit); true = set FECN.
    bool decide(const cc_switch_settings& s, unsigned port, const cc_output_vl& q, uint32_t packet_bytes);
    uint64_t eligible() const { return eligible_; }  ///< packets that met every condition
    uint64_t marked() const { return marked_; }      ///< packets this marker set FECN on

private:
    uint32_t skip_ = 0;  // eligible packets still to pass unmarked before the next mark
    uint64_t eligible_ = 0, marked_ = 0;
};

/// The markers of one switch: one per (output port, VL), all with the switch's settings.
class cc_switch_marking {
public:
    cc_switch_marking(const cc_switch_settings& s, unsigned ports, unsigned vls);
    /// cc_marker::decide for output `port`, `vl` (port < ports, vl < vls).
    bool decide(unsigned port, unsigned vl, const cc_output_vl& q, uint32_t packet_bytes) {
        return markers_[port * vls_ + vl].decide(settings_, port, q, packet_bytes);
    }
    const cc_marker& marker(unsigned port, unsigned vl) const { return markers_[port * vls_ + vl]; }
    const cc_switch_settings& settings() const { return settings_; }
    /// FECN marks set by this switch, all ports and VLs.
    uint64_t marked() const;

private:
    cc_switch_settings settings_;
    unsigned vls_;
    std::vector<cc_marker> markers_;
};

}  // namespace hcasim
