#include "model/fabric/link.h"

#include <cstring>

#include "model/core/sim_time.h"

namespace hcasim {

static const char* const speed_names[] = {"sdr", "ddr", "qdr", "fdr", "edr", "hdr", "ndr"};
// Per-lane data rate after encoding (calibration.md): 8b/10b for SDR-QDR, 64b/66b FDR/EDR,
// 256b/257b + FEC for HDR/NDR (quoted 4x rates 200/400 Gb/s).
static const double lane_rates[] = {2.0, 4.0, 8.0, 14.0625 * 64.0 / 66.0, 25.0, 50.0, 100.0};

// N of a hierarchical name "nodeN.link" (the node whose cable this is); 0 for any other name.
static unsigned node_index_of(const char* name) {
    if (std::strncmp(name, "node", 4) != 0) return 0;
    unsigned n = 0;
    const char* p = name + 4;
    for (; *p >= '0' && *p <= '9'; ++p) n = n * 10 + unsigned(*p - '0');
    return p > name + 4 && *p == '.' ? n : 0;
}

link::link(const sc_core::sc_module_name& name)
    : sc_module(name),
      in("in"),
      out("out"),
      speed("speed", "edr", "", "InfiniBand link speed", {"sdr", "ddr", "qdr", "fdr", "edr", "hdr", "ndr"}),
      width("width", 4, "lanes", "link width in lanes (1, 4, 8 or 12)"),
      propagation_ns("propagation_ns", 10.0, "ns", "cable propagation delay (about 5 ns per metre)",
                     {0, 1e9}),
      data_vls("data_vls", 1, "VLs",
               "data VLs of the HCA port on this cable (PortInfo VLCap: 1, 2, 4, 8 or 15; VL15 is extra); "
               "the link runs the lower of both ends",
               {1, 15}),
      drop_rate("drop_rate", 0.0, "", "fault: probability a packet is lost (both directions of the cable)",
                {0, 1}),
      bit_error_rate("bit_error_rate", 0.0, "per bit",
                     "fault: probability each bit is flipped (CRC drops it)", {0, 1}),
      dup_rate("dup_rate", 0.0, "", "fault: probability a packet is delivered twice", {0, 1}),
      reorder_rate("reorder_rate", 0.0, "", "fault: probability a packet is delivered after the next one",
                   {0, 1}),
      reorder_hold_ns("reorder_hold_ns", 1000.0, "ns",
                      "fault: longest hold of a packet waiting to be overtaken", {0, 1e9}),
      down_at_ns("down_at_ns", -1.0, "ns",
                 "fault: the cable loses every packet arriving from then on; -1 never", {0, 1e15, -1.0}),
      seed("seed", 1, "", "fault: random seed of the cable (one stream per direction)"),
      packets("packets", "packets carried"),
      faults("") {
    if (width != 1 && width != 4 && width != 8 && width != 12)
        throw config_error("bad value '" + std::to_string(width.get()) + "' for key '" + width.key() +
                           "': expected one of 1, 4, 8, 12");
    if (data_vls != 1 && data_vls != 2 && data_vls != 4 && data_vls != 8 && data_vls != 15)
        throw config_error("bad value '" + std::to_string(data_vls.get()) + "' for key '" + data_vls.key() +
                           "': expected one of 1, 2, 4, 8, 15 (PortInfo VLCap)");
    prop_ = sc_core::sc_time(propagation_ns.get(), sc_core::SC_NS);
    fault_settings f;
    f.drop_rate = drop_rate;
    f.bit_error_rate = bit_error_rate;
    f.dup_rate = dup_rate;
    f.reorder_rate = reorder_rate;
    f.reorder_hold_ns = reorder_hold_ns;
    f.down_at_ns = down_at_ns;
    f.seed = seed;
    f.node = node_index_of(this->name());
    faults.configure(f, fault_direction::from_node, &release_);
    in.register_b_transport(this, &link::b_transport);
    SC_METHOD(release_held);
    sensitive << release_;
    dont_initialize();
}

double link::lane_data_rate_gbps(const std::string& s) {
    for (unsigned i = 0; i < 7; ++i)
        if (s == speed_names[i]) return lane_rates[i];
    return 0;
}

unsigned link::speed_code() const {
    for (unsigned i = 0; i < 7; ++i)
        if (speed.get() == speed_names[i]) return i;
    return 0;
}

double link::data_rate_gbps() const { return lane_data_rate_gbps(speed) * width; }

void link::capture_to(wire_capture* w, unsigned dir, double rate_gbps) {
    capture_ = w;
    capture_dir_ = dir;
    capture_ps_per_byte_ = 8000.0 / rate_gbps;  // as the sending port computes its serialisation
}

void link::b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
    ++packets;
    if (capture_) {
        // `delay`: the last bit leaves the sender; the first left one serialisation earlier.
        const uint32_t len = gp.get_data_length();
        const sc_core::sc_time last = sc_core::sc_time_stamp() + delay;
        const sc_core::sc_time serialise = ps_time(double(len) * capture_ps_per_byte_);
        capture_->record(capture_dir_, last > serialise ? last - serialise : sc_core::SC_ZERO_TIME,
                         gp.get_data_ptr(), len, crc_state_of(gp));
    }
    delay += prop_;
    faults.carry(gp, delay, *out[0]);
}

void link::release_held() { faults.release(*out[0]); }

}  // namespace hcasim
