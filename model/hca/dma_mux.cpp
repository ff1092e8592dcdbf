#include "model/hca/dma_mux.h"

namespace hcasim {

dma_mux::dma_mux(const sc_core::sc_module_name& name)
    : sc_module(name),
      units("units"),
      pcie("pcie"),
      transfers("transfers", "DMA transfers from all units"),
      wqe_fetch_bytes("wqe_fetch_bytes", "bytes of send/receive WQEs and QP contexts the WQE fetcher read"),
      payload_read_bytes("payload_read_bytes",
                         "message payload bytes the transport engine read (requests, READ responses)"),
      payload_write_bytes("payload_write_bytes",
                          "message payload bytes the transport engine wrote (receives, WRITEs, READ data)"),
      context_bytes("context_bytes",
                    "MPT/MTT bytes the translation unit read or wrote (cache misses, binds, invalidations)"),
      cqe_write_bytes("cqe_write_bytes", "CQE, EQE and MSI bytes the CQ writer wrote"),
      command_bytes("command_bytes", "command mailbox and context table bytes the command unit moved"),
      qpc_bytes("qpc_bytes", "QPC entry bytes the transport engine's QP context cache read on misses"),
      cqc_bytes("cqc_bytes", "CQC entry bytes the CQ writer's CQ context cache read on misses") {
    units.register_b_transport(this, &dma_mux::b_transport);
    units.register_transport_dbg(this, &dma_mux::transport_dbg);
}

void dma_mux::b_transport(int id, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
    ++transfers;
    const uint64_t n = gp.get_data_length();
    switch (id) {
    case WQE_FETCHER: wqe_fetch_bytes += n; break;
    case TRANSPORT_ENGINE: (gp.is_write() ? payload_write_bytes : payload_read_bytes) += n; break;
    case TRANSLATION_UNIT: context_bytes += n; break;
    case CQ_WRITER: cqe_write_bytes += n; break;
    case QP_CONTEXT: qpc_bytes += n; break;
    case CQ_CONTEXT: cqc_bytes += n; break;
    default: command_bytes += n; break;
    }
    pcie->b_transport(gp, delay);
}

unsigned int dma_mux::transport_dbg(int, tlm::tlm_generic_payload& gp) { return pcie->transport_dbg(gp); }

}  // namespace hcasim
