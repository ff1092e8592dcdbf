#include "model/fabric/link.h"

namespace hcasim {

static const char* const speed_names[] = {"sdr", "ddr", "qdr", "fdr", "edr", "hdr", "ndr"};
// Per-lane data rate after encoding (calibration.md): 8b/10b for SDR-QDR, 64b/66b FDR/EDR,
// 256b/257b + FEC for HDR/NDR (quoted 4x rates 200/400 Gb/s).
static const double lane_rates[] = {2.0, 4.0, 8.0, 14.0625 * 64.0 / 66.0, 25.0, 50.0, 100.0};

link::link(const sc_core::sc_module_name& name)
    : sc_module(name),
      in("in"),
      out("out"),
      speed("speed", "edr", "", "InfiniBand link speed", {"sdr", "ddr", "qdr", "fdr", "edr", "hdr", "ndr"}),
      width("width", 4, "lanes", "link width in lanes (1, 4, 8 or 12)"),
      propagation_ns("propagation_ns", 10.0, "ns", "cable propagation delay (about 5 ns per metre)"),
      packets("packets", "packets carried") {
    if (width != 1 && width != 4 && width != 8 && width != 12)
        throw config_error("bad value '" + std::to_string(width.get()) + "' for key '" + width.key() +
                           "': expected one of 1, 4, 8, 12");
    propagation_ns.range(0, 1e9);
    prop_ = sc_core::sc_time(propagation_ns.get(), sc_core::SC_NS);
    in.register_b_transport(this, &link::b_transport);
}

double link::lane_data_rate_gbps(const std::string& s) {
    for (unsigned i = 0; i < 7; ++i)
        if (s == speed_names[i])
            return lane_rates[i];
    return 0;
}

unsigned link::speed_code() const {
    for (unsigned i = 0; i < 7; ++i)
        if (speed.get() == speed_names[i])
            return i;
    return 0;
}

double link::data_rate_gbps() const { return lane_data_rate_gbps(speed) * width; }

void link::b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
    ++packets;
    delay += prop_;
    out->b_transport(gp, delay);
}

}  // namespace hcasim
