// One direction of a cable: carries packets from the port (or switch output) that owns it to
// the far end after the propagation delay. Its speed and width are the owning port's link
// capability; the active rate of a connection is the lower of both ends (link negotiation).
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <string>

#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim {

class link : public sc_core::sc_module {
public:
    tlm_utils::simple_target_socket<link> in;      ///< from the sending serialiser
    tlm_utils::simple_initiator_socket<link> out;  ///< to the receiving port or switch

    param<std::string> speed;      ///< sdr|ddr|qdr|fdr|edr|hdr|ndr
    param<unsigned> width;         ///< lanes: 1, 4, 8, 12
    param<double> propagation_ns;  ///< cable propagation delay

    counter packets;

    explicit link(const sc_core::sc_module_name& name);

    /// Data rate after line encoding of this link's speed and width, Gb/s.
    double data_rate_gbps() const;
    /// Per-lane data rate of a speed name, Gb/s (SDR 2 ... NDR 100); 0 if unknown.
    static double lane_data_rate_gbps(const std::string& speed);
    /// Speed code as reported by QUERY_PORT (0 sdr .. 6 ndr).
    unsigned speed_code() const;

private:
    void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    sc_core::sc_time prop_;
};

}  // namespace hcasim
