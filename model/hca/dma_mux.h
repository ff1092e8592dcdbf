// The HCA's internal DMA interconnect: every unit's dma_port binds here; one master port goes
// out to the PCIe link. Contention is modelled in the PCIe link, not here. It counts what each
// kind of traffic moves over PCIe (the units bind in hca.cpp's order: command unit, WQE fetcher,
// transport engine, translation unit, CQ writer), so the stats say how the link was shared.
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
    /// Bytes by kind: WQEs and QP contexts read by the WQE fetcher; message payload read and
    /// written by the transport engine (an atomic counts as an 8-byte read); MPT/MTT entries read on
    /// translation cache misses; CQEs and EQEs written; command mailboxes and context tables;
    /// QP and CQ context cache misses.
    counter wqe_fetch_bytes, payload_read_bytes, payload_write_bytes, context_bytes, cqe_write_bytes,
        command_bytes, qpc_bytes, cqc_bytes;

    /// Binding order of the units (the socket index each one gets).
    enum unit_id : int {
        COMMAND_UNIT = 0,
        WQE_FETCHER = 1,
        TRANSPORT_ENGINE = 2,
        TRANSLATION_UNIT = 3,
        CQ_WRITER = 4,
        QP_CONTEXT = 5,
        CQ_CONTEXT = 6
    };

    explicit dma_mux(const sc_core::sc_module_name& name);

private:
    void b_transport(int id, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    unsigned int transport_dbg(int id, tlm::tlm_generic_payload& gp);
};

}  // namespace hcasim
