// Congestion control, CA side: per-flow CCTI and injection delay; see congestion_control.h.
#include "model/hca/congestion_control.h"

#include <algorithm>

namespace hcasim {

ca_cc_settings ca_cc_settings::from(const cc_config& c) {
    ca_cc_settings s;
    s.enable = c.enable;
    s.sl_based = c.sl_based;
    ca_cong_entry e;
    e.ccti_timer = static_cast<uint16_t>(c.ccti_timer);
    e.ccti_increase = static_cast<uint8_t>(c.ccti_increase);
    e.trigger_threshold = static_cast<uint8_t>(c.trigger_threshold);
    e.ccti_min = static_cast<uint8_t>(c.ccti_min);
    s.entry.fill(e);
    s.ccti_limit = static_cast<uint16_t>(c.ccti_limit);
    s.cct = c.cct;
    return s;
}

ca_congestion_control::flow_state& ca_congestion_control::flow(uint32_t qpn, uint8_t sl) {
    sl &= 0xF;
    const auto [it, fresh] = flows_.try_emplace(flow_of(qpn, sl));
    flow_state& f = it->second;
    if (fresh) f.ccti = f.max_ccti = std::min<uint16_t>(s_.entry[sl].ccti_min, s_.ccti_limit);
    f.sl = sl;
    return f;
}

void ca_congestion_control::advance(flow_state& f, uint64_t now_ps) const {
    if (!f.timer_running || now_ps < f.next_expiry_ps) return;
    const ca_cong_entry& e = s_.entry[f.sl];
    const uint64_t period = uint64_t(e.ccti_timer) * CCTI_TIMER_UNIT_PS;
    if (period == 0) return;  // the QP moved to an SL whose timer is off
    const uint64_t expiries = (now_ps - f.next_expiry_ps) / period + 1;
    const uint64_t room = f.ccti > e.ccti_min ? f.ccti - e.ccti_min : 0;
    if (expiries >= room) {  // down to the floor: the timer stops there
        f.ccti = static_cast<uint16_t>(f.ccti - room);
        f.timer_running = false;
        return;
    }
    f.ccti = static_cast<uint16_t>(f.ccti - expiries);
    f.next_expiry_ps += expiries * period;
}

uint16_t ca_congestion_control::ccti_at(uint32_t qpn, uint8_t sl, uint64_t now_ps) {
    flow_state& f = flow(qpn, sl);
    advance(f, now_ps);
    return f.ccti;
}

void ca_congestion_control::on_becn(uint32_t qpn, uint8_t sl, uint64_t now_ps) {
    if (!s_.enable) return;
    flow_state& f = flow(qpn, sl);
    advance(f, now_ps);
    const ca_cong_entry& e = s_.entry[f.sl];
    f.ccti = static_cast<uint16_t>(std::min<uint32_t>(uint32_t(f.ccti) + e.ccti_increase, s_.ccti_limit));
    f.max_ccti = std::max(f.max_ccti, f.ccti);
    ++f.becns;
    ++becns_;
    if (!f.timer_running && f.ccti > e.ccti_min && e.ccti_timer != 0) {
        f.timer_running = true;
        f.next_expiry_ps = now_ps + uint64_t(e.ccti_timer) * CCTI_TIMER_UNIT_PS;
    }
    if (e.trigger_threshold != 0 && f.ccti >= e.trigger_threshold) ++triggers_;
}

uint64_t ca_congestion_control::injection_delay_ps(uint32_t qpn, uint8_t sl, uint64_t now_ps,
                                                   uint64_t t_pkt_ps) {
    if (!s_.enable || s_.cct.empty()) return 0;
    const size_t index = std::min<size_t>(ccti_at(qpn, sl, now_ps), s_.cct.size() - 1);
    return cct_delay_ps(s_.cct[index], t_pkt_ps);
}

std::vector<ca_congestion_control::flow_report> ca_congestion_control::flows(uint64_t now_ps) {
    std::vector<flow_report> out;
    out.reserve(flows_.size());
    for (auto& [id, f] : flows_) {
        advance(f, now_ps);
        out.push_back({id, f.ccti, f.max_ccti, f.becns});
    }
    return out;
}

}  // namespace hcasim
