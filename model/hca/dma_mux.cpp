#include "model/hca/dma_mux.h"

namespace hcasim {

dma_mux::dma_mux(const sc_core::sc_module_name& name)
    : sc_module(name), units("units"), pcie("pcie"), transfers("transfers", "DMA transfers from all units") {
    units.register_b_transport(this, &dma_mux::b_transport);
    units.register_transport_dbg(this, &dma_mux::transport_dbg);
}

void dma_mux::b_transport(int, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
    ++transfers;
    pcie->b_transport(gp, delay);
}

unsigned int dma_mux::transport_dbg(int, tlm::tlm_generic_payload& gp) { return pcie->transport_dbg(gp); }

}  // namespace hcasim
