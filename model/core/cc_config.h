// Congestion control settings (IBA Vol 1 Annex A10) as configuration: the fabric.cc.* keys
// (docs/fabric.md "Congestion control"), with their ranges and the checks that name the key.
// Shared by the switch side (model/fabric/cc_marking.h: SwitchCongestionSetting) and the CA
// side (model/hca/congestion_control.h: CACongestionSetting and the CongestionControlTable),
// which each build their settings from a validated cc_config. No SystemC.
#pragma once
#include <bitset>
#include <cstdint>
#include <string>
#include <vector>

namespace hcasim {

/// One CongestionControlTable entry (16 bits on the wire: CCT_Shift [15:14], CCT_Multiplier
/// [13:0]). The injection delay it asks for is (T_pkt >> shift) * multiplier.
struct cct_entry {
    uint8_t shift = 0;        ///< CCT_Shift, 0-3
    uint16_t multiplier = 0;  ///< CCT_Multiplier, 0-16383
    /// The 16-bit wire form.
    uint16_t raw() const { return static_cast<uint16_t>((shift & 0x3) << 14 | (multiplier & 0x3FFF)); }
    static cct_entry from_raw(uint16_t v) {
        return {static_cast<uint8_t>(v >> 14), static_cast<uint16_t>(v & 0x3FFF)};
    }
    bool operator==(const cct_entry& o) const { return shift == o.shift && multiplier == o.multiplier; }
};

/// The default table: 128 entries, entry i = (shift 3, multiplier i), so the delay after a
/// packet grows linearly with the index by T_pkt / 8 a step: entry 0 adds nothing, entry 8
/// one packet time (half the rate), entry 127 15.875 packet times. Entry 0 = 0 and a
/// multiplier that grows with the index is how PSM builds its table (intel/psm
/// ptl_ips/ips_path_rec.c, ips_gen_cct_table); OpenSM ships no default table (cc_cct empty).
std::vector<cct_entry> default_cct();

/// Parses "shift:multiplier,shift:multiplier,..." (OpenSM's cc_cct syntax; spaces allowed
/// around items). Throws config_error "KEY: entry N 'TEXT': WHY" for a malformed entry, a
/// shift above 3, a multiplier above 16383, an empty list or more than 65536 entries.
std::vector<cct_entry> parse_cct(const std::string& key, const std::string& text);
/// The same syntax back ("3:0,3:1,...").
std::string format_cct(const std::vector<cct_entry>& cct);

/// Parses a Victim_Mask given as ports: "" (none), "all" (ports 0-254), or a comma list of
/// port numbers and ranges "1,3,5-8". Bit p = port p (bit 255 is reserved). Throws
/// config_error "KEY: 'ITEM': WHY" for a malformed item, a reversed range or a port above 254.
std::bitset<256> parse_port_mask(const std::string& key, const std::string& text);

/// Every fabric.cc.* value, as the lead's params fill it in; validate() before use. The same
/// CACongestionEntry applies to every SL (the per-SL form of the MAD is not configurable here).
struct cc_config {
    bool enable = false;  ///< fabric.cc.enable: off, as on most clusters
    // Switch side: SwitchCongestionSetting, the same on every switch port.
    unsigned threshold = 8;        ///< fabric.cc.threshold, 0 (never mark) - 15 (most aggressive)
    unsigned marking_rate = 0;     ///< fabric.cc.marking_rate: eligible packets skipped after a mark
    unsigned packet_size = 0;      ///< fabric.cc.packet_size: 64-byte credits below which no packet is marked
    std::bitset<256> victim_mask;  ///< fabric.cc.victim_mask: ports that mark when only a victim
    // CA side: CACongestionSetting (Port_Control and the entry for every SL) and the CCT.
    bool sl_based = false;                       ///< fabric.cc.port_control=sl (else qp): what a flow is
    unsigned ccti_increase = 1;                  ///< fabric.cc.ccti_increase, 0-255
    unsigned ccti_limit = 127;                   ///< fabric.cc.ccti_limit: the highest CCT index used
    unsigned ccti_min = 0;                       ///< fabric.cc.ccti_min, 0-255, at most ccti_limit
    unsigned ccti_timer = 10;                    ///< fabric.cc.ccti_timer, 1.024 us units, 0 = never decrease
    unsigned trigger_threshold = 0;              ///< fabric.cc.trigger_threshold, 0-255, 0 = no events
    std::vector<cct_entry> cct = default_cct();  ///< fabric.cc.cct

    /// Throws config_error naming the first key out of range: "fabric.cc.KEY=V: why".
    void validate() const;
};

}  // namespace hcasim
