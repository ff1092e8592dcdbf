// The HCA's internal DMA interconnect: every unit's dma_port binds here; one master port goes
// out to the PCIe link. Contention is modelled in the PCIe link, not here.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_target_socket.h>
#include <tlm_utils/simple_initiator_socket.h>

#include "model/core/stats.h"

namespace hcasim {

class dma_mux : public sc_core::sc_module {
public:
    tlm_utils::multi_passthrough_target_socket<dma_mux> units;  ///< one binding per unit
    tlm_utils::simple_initiator_socket<dma_mux> pcie;           ///< to pcie_link.upstream_in

    counter transfers;

    explicit dma_mux(const sc_core::sc_module_name& name);

private:
    void b_transport(int id, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    unsigned int transport_dbg(int id, tlm::tlm_generic_payload& gp);
};

}  // namespace hcasim
