// The HCA: its units and how they are wired (docs/architecture.md has the block diagram).
//
//   BAR0 ─> doorbell_unit ─> wqe_fetcher ─> transport_engine ─> port ─> link
//                │   └──────> cq_writer <────────┘  │  ▲   ⇅ translation_unit
//                └──> command_unit (contexts to every unit)   └─ pkey_checker <─ port <─ link
//                                                  sma (SMPs to QP0, traps) <─┘ ─> port
//   every unit's DMA ─> dma_mux ─> PCIe link ─> host memory
#pragma once
#include <systemc>

#include "model/core/param.h"
#include "model/core/path_probe.h"
#include "model/hca/command_unit.h"
#include "model/hca/cq_writer.h"
#include "model/hca/dma_mux.h"
#include "model/hca/mcast_table.h"
#include "model/hca/doorbell_unit.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/sma.h"
#include "model/hca/translation_unit.h"
#include "model/hca/transport_engine.h"
#include "model/hca/wqe_fetcher.h"

namespace hcasim {

class hca : public sc_core::sc_module {
public:
    param<double> clock_mhz;           ///< core clock of the units (those whose own clock_mhz is 0)
    param<unsigned> max_qps;           ///< QPs (on-chip state entries)
    param<unsigned> max_cqs;           ///< CQs
    param<unsigned> max_cqe;           ///< CQEs per CQ
    param<unsigned> max_mrs;           ///< MPT entries
    param<unsigned> max_mtts;          ///< MTT entries
    param<unsigned> max_qp_wr;         ///< WQEs per work queue
    param<unsigned> max_srqs;          ///< shared receive queues (SRQC entries)
    param<unsigned> max_eecs;          ///< EE contexts (reliable datagram; 0: no RD)
    param<unsigned> max_rd_msg;        ///< bytes of one RD message at most (QUERY_HCA, o10-51)
    param<std::string> mw_type2;       ///< 2A|2B: the kind of type 2 memory windows
    param<uint64_t> node_guid;         ///< node GUID (0: derived from the node index)
    param<unsigned> num_comp_vectors;  ///< completion event handler identifiers (QUERY_HCA)

private:
    void port_down();
    sc_core::sc_time clock_;
    hca_identity id_;
    sc_core::sc_event down_ev_;

public:
    path_probe probe;  ///< when a traced message passes this HCA's stages (latency breakdowns)
    dma_mux dma;
    doorbell_unit doorbell;
    command_unit commands;
    wqe_fetcher fetcher;
    transport_engine engine;
    translation_unit translation;
    cq_writer cqs;
    pkey_checker pkeys;
    mcast_table mcast;
    sma agent;  ///< "nodeN.hca.sma": the port's subnet management agent
    port port0;

    SC_HAS_PROCESS(hca);
    /// `cc`: the fabric's congestion control settings (nullptr: off).
    hca(const sc_core::sc_module_name& name, unsigned node_index, const cc_config* cc = nullptr);

    /// The port's cable goes down at simulated time `at`: from then QUERY_PORT reports the
    /// port Down and an EQE_PORT_CHANGE (EQE_PORT_DOWN) is raised.
    void link_down_at(const sc_core::sc_time& at);
    /// --timeline: the transport engine's stages (path_probe marks), the port and the CQ writer
    /// write to `tl` as node `node`.
    void set_timeline(timeline* tl, unsigned node) {
        probe.set_timeline(tl, tl->track(node, "HCA: doorbell and transport engine stages"));
        port0.set_timeline(tl, node);
        cqs.set_timeline(tl, node);
    }

    /// After link negotiation: active rate, base LID and LMC (the port owns lid .. lid +
    /// 2^lmc - 1 and loops packets to them back), what QUERY_PORT reports.
    void set_link(double rate_gbps, unsigned width, unsigned speed_code, uint16_t lid, uint8_t lmc = 0);
    /// The subnet manager's LID (PortInfo MasterSMLID; 0: none, e.g. back to back): where the
    /// SMA sends traps, what QUERY_PORT reports as sm_lid.
    void set_sm_lid(uint16_t lid);
    uint16_t lid() const { return id_.port.lid; }
    const hca_identity& identity() const { return id_; }
};

}  // namespace hcasim
