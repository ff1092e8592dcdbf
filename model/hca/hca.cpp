#include "model/hca/hca.h"

#include <algorithm>

namespace hcasim {

using namespace sc_core;

hca::hca(const sc_module_name& name, unsigned node_index, const cc_config* cc)
    : sc_module(name),
      clock_mhz("clock_mhz", 800.0, "MHz",
                "core clock of the HCA units (a unit's own clock_mhz, when not 0, overrides it)",
                clock_bounds()),
      max_qps("max_qps", 1024, "QPs", "QPs the HCA holds on chip (QPC entries)", {2, 1u << 24}),
      max_cqs("max_cqs", 1024, "CQs", "completion queues", {1, 1u << 24}),
      max_cqe("max_cqe", 65535, "CQEs", "entries per completion queue (ring is the next power of two)",
              {1, 1u << 22}),
      max_mrs("max_mrs", 65536, "MRs", "memory protection table entries", {1, 1u << 24}),
      max_mtts("max_mtts", 1u << 22, "entries", "memory translation table entries (4 KiB pages)",
               {1, 1u << 30}),
      max_qp_wr("max_qp_wr", 16384, "WQEs", "work requests per send or receive queue", {1, 1u << 16}),
      max_srqs("max_srqs", 1024, "SRQs", "shared receive queues (SRQC entries); WQEs per SRQ: max_qp_wr",
               {1, 1u << 24}),
      max_eecs("max_eecs", 256, "EECs",
               "end-to-end contexts for reliable datagram, held on chip (EECN 0 unused); 0: no RD",
               {0, 1u << 16}),
      max_rd_msg("max_rd_msg", 1u << 31, "bytes",
                 "largest reliable datagram message (QUERY_HCA max_rd_msg; a longer RD work request is "
                 "refused at the post, o10-51)",
                 {1, 1u << 31}),
      mw_type2("mw_type2", "2B", "",
               "kind of the type 2 memory windows: 2A (QP-associated) or 2B (QP- and "
               "PD-associated); an HCA implements one (o10-37.2.31)"),
      node_guid("node_guid", 0, "", "node GUID; 0 derives 0x0002c90300000000 + node index + 1"),
      num_comp_vectors("num_comp_vectors", 4, "identifiers",
                       "completion event handler identifiers reported by QUERY_HCA (IBA o10-54.2.1)",
                       {1, 16}),
      clock_(sc_time(1e6 / clock_mhz, SC_PS)),
      id_{},
      dma("dma_mux"),
      doorbell("doorbell_unit", clock_),
      commands("command_unit", clock_, id_, max_qps, max_cqs),
      fetcher("wqe_fetcher", clock_, max_qps, max_srqs),
      engine("transport_engine", clock_, max_qps, cc, max_eecs),
      translation("translation_unit", clock_),
      cqs("cq_writer", clock_, max_cqs, 16),
      pkeys("pkey_checker", max_qps, clock_),
      mcast("mcast_table", max_qps),
      agent("sma", clock_),
      port0("port") {
    if (mw_type2.get() != "2A" && mw_type2.get() != "2B")
        throw config_error(std::string(this->name()) + ".mw_type2: '" + mw_type2.get() + "' is not 2A or 2B");

    hw::hca_caps& c = id_.caps;
    c.flags = hw::CAP_RC | hw::CAP_UC | hw::CAP_UD | hw::CAP_MCAST | hw::CAP_INLINE | hw::CAP_RDMA_READ |
              hw::CAP_ATOMIC | hw::CAP_SQD_ASYNC | hw::CAP_MW | hw::CAP_SEND_INV | hw::CAP_ZBVA |
              hw::CAP_BLOCK_LIST | hw::CAP_LOCAL_INV_FENCE | hw::CAP_RESERVED_LKEY | hw::CAP_SRQ |
              hw::CAP_SRQ_RESIZE | hw::CAP_XRC | hw::CAP_APM | (max_eecs > 1 ? uint64_t(hw::CAP_RD) : 0) |
              (mw_type2.get() == "2A" ? hw::CAP_MW_TYPE2A : hw::CAP_MW_TYPE2B);
    c.node_guid = node_guid ? node_guid.get() : 0x0002c90300000000ull + node_index + 1;
    c.sys_image_guid = c.node_guid;
    c.max_mr_size = uint64_t(max_mtts) << 12;
    c.page_size_cap = (1ull << 31) - (1ull << 12);  // physical page lists: 4 KiB .. 1 GiB pages
    c.vendor_id = 0x0002c9;
    c.vendor_part_id = 0x4843;  // "HC"
    c.hw_ver = 1;
    c.fw_ver = hw::INTERFACE_VERSION;
    c.max_qp = max_qps;
    c.max_ee = max_eecs > 1 ? max_eecs.get() : 0;
    c.max_rdd = max_eecs > 1 ? 1u << 16 : 0;  // domains are numbers the HCA only compares
    c.max_rd_msg = max_eecs > 1 ? max_rd_msg.get() : 0;
    c.max_qp_wr = max_qp_wr;
    c.max_srq = max_srqs;
    c.max_srq_wr = std::min(max_qp_wr.get(), 32767u);  // a ring of at most 2^15 slots (16-bit counters)
    c.max_srq_sge = MAX_SGE;
    c.max_sge = MAX_SGE;
    c.max_cq = max_cqs;
    c.max_cqe = max_cqe;
    c.max_mr = max_mrs;
    c.max_pd = 1u << 16;
    c.max_qp_rd_atom = MAX_RD_ATOMIC;             // READ/atomic responder resources per QP
    c.max_qp_init_rd_atom = MAX_RD_ATOMIC;        // READ/atomic outstanding per QP as requester
    c.max_inline = hw::INLINE_WINDOW_BYTES - 36;  // ctrl (32) + inline header (4): a WQE fills the window
    c.max_mtt = max_mtts;
    c.max_mw = max_mrs;  // windows and regions share the MPT
    c.reserved_lkey = hw::RESERVED_LKEY;
    c.max_fast_reg_pages = MAX_FAST_REG_PAGES;
    c.max_mcast_grp = mcast.max_groups;
    c.max_mcast_qp_attach = uint16_t(std::min(mcast.max_qps_per_group.get(), 0xFFFFu));
    c.max_total_mcast_qp_attach = mcast.max_groups * mcast.max_qps_per_group;
    c.max_uar = hw::MAX_UARS;
    // CQ resize and query (CMD_RESIZE_CQ, CMD_QUERY_CQ) and the completion handler identifiers.
    c.flags |= hw::CAP_RESIZE_CQ;
    c.num_comp_vectors = num_comp_vectors;
    c.phys_port_cnt = 1;
    c.local_ca_ack_delay = 15;
    hw::port_info& p = id_.port;
    p.state = 4;
    p.max_mtu = hw::MTU_4096;
    p.active_mtu = hw::MTU_4096;
    p.pkey_table_len = uint16_t(pkeys.table_len.get());
    p.gid_table_len = 1;
    p.gid_prefix = 0xfe80000000000000ull;
    p.port_guid = c.node_guid;
    uint8_t gid[16];  // GID index 0: the link-local prefix and the port GUID, wire order
    for (int i = 0; i < 8; ++i) {
        gid[i] = uint8_t(p.gid_prefix >> (56 - 8 * i));
        gid[8 + i] = uint8_t(p.port_guid >> (56 - 8 * i));
    }
    engine.set_gid(gid);

    // Data path wiring: doorbell -> fetcher -> engine -> port; port -> P_Key checker -> engine.
    doorbell.bind(fetcher, cqs, commands);
    doorbell.set_probe(probe);
    engine.set_probe(probe);
    fetcher.bind_engine(engine);
    engine.bind(fetcher, translation, cqs, port0, pkeys);
    commands.bind(fetcher, engine, translation, cqs, pkeys);
    commands.bind_mcast(mcast);
    engine.bind_mcast(mcast);
    port0.bind_receiver(pkeys);
    pkeys.bind_receiver(engine);
    // Subnet management below the verbs: SMPs to QP0 and P_Key violations go to the SMA (C10-12).
    agent.bind(pkeys, port0);
    pkeys.bind_smi(agent);
    pkeys.bind_violation_sink(agent);
    // In dma_mux::unit_id order: the mux counts each unit's PCIe traffic by its socket index.
    commands.dma.socket.bind(dma.units);
    fetcher.dma.socket.bind(dma.units);
    engine.dma.socket.bind(dma.units);
    translation.dma.socket.bind(dma.units);
    cqs.dma.socket.bind(dma.units);
    engine.qpc_dma.socket.bind(dma.units);
    cqs.cqc_dma.socket.bind(dma.units);
    SC_METHOD(port_down);
    sensitive << down_ev_;
    dont_initialize();
}

void hca::link_down_at(const sc_core::sc_time& at) {
    down_ev_.notify(at > sc_core::sc_time_stamp() ? at - sc_core::sc_time_stamp() : sc_core::SC_ZERO_TIME);
}

void hca::port_down() {
    if (id_.port.state == 1) return;
    id_.port.state = 1;  // Down (IBA PortState)
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    cqs.post_event(hw::EQE_PORT_CHANGE, 1, delay, hw::EQE_PORT_DOWN);
}

void hca::set_link(double rate_gbps, unsigned width, unsigned speed_code, uint16_t lid, uint8_t lmc) {
    port0.set_rate_gbps(rate_gbps);
    port0.set_lid(lid, lmc);
    engine.set_lid(lid);
    engine.set_lmc(lmc);
    engine.set_rate_gbps(rate_gbps);
    agent.set_lid(lid);
    id_.port.lid = lid;
    id_.port.lmc = lmc;
    id_.port.link_width = uint8_t(width);
    id_.port.link_speed = uint8_t(speed_code);
    id_.port.data_rate_mbps = uint32_t(rate_gbps * 1000 + 0.5);
}

void hca::set_sm_lid(uint16_t lid) {
    id_.port.sm_lid = lid;
    agent.set_sm_lid(lid);
}

}  // namespace hcasim
