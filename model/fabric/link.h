// One direction of a cable: carries packets from the port that owns it to the far end (the
// peer's port back to back, or the switch) after the propagation delay. Its speed and width
// are the owning port's link capability; the active rate of a connection is the lower of both
// ends (link negotiation). Its fault parameters configure both directions of node N's cable:
// `faults` acts on what node N transmits, and in switch topology the switch's output toward
// node N applies the same settings (fault_config()) with its own random stream.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <string>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/fabric/fault_injector.h"
#include "model/fabric/wire_capture.h"

namespace hcasim {

class link : public sc_core::sc_module {
public:
    tlm_utils::simple_target_socket<link> in;      ///< from the sending serialiser
    tlm_utils::simple_initiator_socket<link> out;  ///< to the receiving port or switch

    param<std::string> speed;       ///< sdr|ddr|qdr|fdr|edr|hdr|ndr
    param<unsigned> width;          ///< lanes: 1, 4, 8, 12
    param<double> propagation_ns;   ///< cable propagation delay
    param<unsigned> data_vls;       ///< data VLs of the port (1, 2, 4, 8, 15); a link runs min(both ends)
    param<double> drop_rate;        ///< probability a packet is lost
    param<double> bit_error_rate;   ///< probability each bit is flipped
    param<double> dup_rate;         ///< probability a packet is delivered twice
    param<double> reorder_rate;     ///< probability a packet is delivered after the next one
    param<double> reorder_hold_ns;  ///< longest hold of a packet waiting to be overtaken
    param<double> down_at_ns;       ///< from this time on the cable loses everything; -1 never
    param<uint64_t> seed;           ///< random seed of the cable's fault streams

    counter packets;
    fault_injector faults;  ///< on what this node transmits: dropped, corrupted, ...

    SC_HAS_PROCESS(link);
    explicit link(const sc_core::sc_module_name& name);

    /// Fault settings of this cable (both directions; the switch applies them toward the node).
    const fault_settings& fault_config() const { return faults.settings(); }

    /// Data rate after line encoding of this link's speed and width, Gb/s.
    double data_rate_gbps() const;
    /// Per-lane data rate of a speed name, Gb/s (SDR 2 ... NDR 100); 0 if unknown.
    static double lane_data_rate_gbps(const std::string& speed);
    /// Speed code as reported by QUERY_PORT (0 sdr .. 6 ndr).
    unsigned speed_code() const;

    /// --pcap: records every packet this direction carries into `w` as direction `dir`, as
    /// the sender transmitted it (before the cable's faults), its first bit's time computed
    /// at the active data rate `rate_gbps`. nullptr: no capture (the default).
    void capture_to(wire_capture* w, unsigned dir, double rate_gbps);

private:
    void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void release_held();
    sc_core::sc_time prop_;
    wire_capture* capture_ = nullptr;
    unsigned capture_dir_ = 0;
    double capture_ps_per_byte_ = 80.0;
    sc_core::sc_event release_;  // a packet held for reordering is due
};

}  // namespace hcasim
