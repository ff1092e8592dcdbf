#include "model/fabric/cc_params.h"

namespace hcasim {

cc_params::cc_params()
    : enable("cc.enable", false, "",
             "congestion control (IBA Annex A10): switches mark FECN, HCAs return BECN and space their "
             "packets; off as on most clusters"),
      threshold("cc.threshold", 8, "",
                "switch Threshold 0-15: an output VL marks once the bytes of the packets waiting for it pass "
                "(16-threshold)/16 of fabric.switch.vl_buffer_bytes; 0 never [model]",
                {0, 15}),
      marking_rate("cc.marking_rate", 0, "packets",
                   "switch Marking_Rate 0-65535: eligible packets left unmarked after each mark", {0, 65535}),
      packet_size("cc.packet_size", 0, "64 bytes",
                  "switch Packet_Size 0-255: packets shorter than this many 64-byte credits are never marked",
                  {0, 255}),
      victim_mask("cc.victim_mask", "", "",
                  "switch Victim_Mask: ports that mark while only victims (waiting for credit): '', 'all' "
                  "or a list such as 1,3,5-8"),
      port_control("cc.port_control", "qp", "",
                   "HCA Port_Control: a congestion control flow is a QP or an SL", {"qp", "sl"}),
      ccti_increase("cc.ccti_increase", 1, "", "CCTI_Increase 0-255: added to a flow's CCT index per BECN",
                    {0, 255}),
      ccti_limit("cc.ccti_limit", 127, "", "CCTI_Limit: the highest CCT index, below the table's entries",
                 {0, 65535}),
      ccti_min("cc.ccti_min", 0, "", "CCTI_Min 0-255 (at most ccti_limit): the lowest CCT index", {0, 255}),
      ccti_timer("cc.ccti_timer", 10, "1.024 us",
                 "CCTI_Timer 0-65535: a flow's CCT index drops by 1 each period; 0 never", {0, 65535}),
      trigger_threshold("cc.trigger_threshold", 0, "",
                        "Trigger_Threshold 0-255: BECNs leaving the CCT index at or above it count a trigger "
                        "event; 0 off",
                        {0, 255}),
      cct("cc.cct", "", "",
          "Congestion Control Table, shift:multiplier,... (shift 0-3, multiplier 0-16383; the gap after a "
          "packet is (packet time >> shift) x multiplier); empty: 3:0,3:1,...,3:127") {}

cc_config cc_params::config() const {
    cc_config c;
    c.enable = enable;
    c.threshold = threshold;
    c.marking_rate = marking_rate;
    c.packet_size = packet_size;
    c.victim_mask = parse_port_mask(victim_mask.key(), victim_mask);
    c.sl_based = port_control.get() == "sl";
    c.ccti_increase = ccti_increase;
    c.ccti_limit = ccti_limit;
    c.ccti_min = ccti_min;
    c.ccti_timer = ccti_timer;
    c.trigger_threshold = trigger_threshold;
    if (!cct.get().empty()) c.cct = parse_cct(cct.key(), cct);
    c.validate();
    return c;
}

}  // namespace hcasim
