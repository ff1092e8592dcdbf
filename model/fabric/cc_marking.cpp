// Congestion control, switch side: FECN marking; see cc_marking.h for the rule.
#include "model/fabric/cc_marking.h"

namespace hcasim {

cc_switch_settings cc_switch_settings::from(const cc_config& c) {
    cc_switch_settings s;
    s.enable = c.enable;
    s.threshold = static_cast<uint8_t>(c.threshold);
    s.marking_rate = static_cast<uint16_t>(c.marking_rate);
    s.packet_size = static_cast<uint8_t>(c.packet_size);
    s.victim_mask = c.victim_mask;
    return s;
}

bool cc_congested(uint8_t threshold, uint64_t queued_bytes, uint64_t buffer_bytes) {
    if (threshold == 0) return false;
    return queued_bytes * 16 > buffer_bytes * (16u - threshold);
}

bool cc_marker::decide(const cc_switch_settings& s, unsigned port, const cc_output_vl& q,
                       uint32_t packet_bytes) {
    if (!s.enable || packet_bytes < uint32_t(s.packet_size) * 64) return false;
    if (!cc_congested(s.threshold, q.queued_bytes, q.buffer_bytes)) return false;
    if (q.victim && !(port < s.victim_mask.size() && s.victim_mask.test(port))) return false;
    ++eligible_;
    if (skip_ > 0) {
        --skip_;
        return false;
    }
    skip_ = s.marking_rate;
    ++marked_;
    return true;
}

cc_switch_marking::cc_switch_marking(const cc_switch_settings& s, unsigned ports, unsigned vls)
    : settings_(s), vls_(vls), markers_(size_t(ports) * vls) {}

uint64_t cc_switch_marking::marked() const {
    uint64_t n = 0;
    for (const cc_marker& m : markers_) n += m.marked();
    return n;
}

}  // namespace hcasim
