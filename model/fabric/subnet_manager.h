// Subnet manager (SM) model: an endport of its own on a switch port, with its own LID, that
// manages the HCAs through their subnet management agents with real SMPs (IBA 14): LID-routed
// SubnGet/SubnSet(P_KeyTable) packets (LRH VL15, BTH DestQP 0 and P_Key 0xFFFF, DETH Q_Key 0
// and SrcQP 0, a 256-byte MAD; tlm_if/wire/mad.h), waiting for each GetResp. It receives the
// traps the agents send (Trap 257, Bad P_Key) and keeps them, and every packet it sent and
// every response, for tests. It stands in for the discovery of a real SM: the machine tells it
// the nodes' LIDs (add_node) and, with `program` = smp, the switches it programs (plan_sweep):
// at the start of simulated time a thread sends every switch directed-route SMPs through the
// switches' agents (switch_sma.h): SubnGet(NodeInfo), SubnSet(LinearForwardingTable) of each
// block in use, SubnSet(SwitchInfo) with LinearFDBTop, and the configured SL-to-VL and VL
// arbitration tables (program_switches), then LID routed the configured VL tables of the HCA
// ports (their agents, sma.h). With `program` = direct the machine writes the
// tables at elaboration and no SMP is sent.
//
// The blocking calls (set_pkey, get_pkey_block, transact, transact_dr, program_switches) wait
// on simulated time and must be called from an SC_THREAD; one transaction at a time.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/fabric/packet.h"
#include "model/fabric/vl_arbiter.h"
#include "model/fabric/wire_capture.h"
#include "tlm_if/wire/mad.h"

namespace hcasim {

class subnet_manager : public sc_core::sc_module {
public:
    tlm_utils::simple_initiator_socket<subnet_manager> tx;  ///< to its switch port (ib_switch.in)
    tlm_utils::simple_target_socket<subnet_manager> rx;     ///< from its switch port (ib_switch.out)

    param<double> rate_gbps;            ///< data rate of the SM's link
    param<double> propagation_ns;       ///< its cable's propagation delay
    param<double> response_timeout_us;  ///< how long to wait for a GetResp
    param<std::string> program;         ///< direct | smp: how the switches' tables are written

    counter smps_sent, responses, traps, timeouts, rx_errors;

    /// One packet received (a GetResp or a trap): arrival time, bytes LRH..VCRC, decoded.
    struct record {
        sc_core::sc_time at;
        std::vector<uint8_t> bytes;
        wire::headers h;
        wire::smp mad;
    };
    /// A Trap 257 received, with its Notice decoded.
    struct trap_record : record {
        wire::notice_bad_pkey notice;
    };

    SC_HAS_PROCESS(subnet_manager);
    explicit subnet_manager(const sc_core::sc_module_name& name);

    /// One switch as the SM programs it.
    /// A switch, or (node >= 0) an HCA port, whose configured VL tables alone are set, LID
    /// routed once the switches are programmed (the plans of HCAs come after the switches').
    struct switch_plan {
        std::string name;           ///< for messages
        int node = -1;              ///< an HCA: the node number its LID is known by (add_node)
        uint64_t guid = 0;          ///< the NodeGUID its NodeInfo must report
        std::vector<uint8_t> path;  ///< directed route: the port each hop leaves by ([0]: the SM's, 1)
        std::vector<uint8_t> lft;   ///< the routing engine's table: lft[lid] = port, 0xFF none
        struct port_vlarb {
            unsigned port = 0;
            std::vector<vlarb_entry> high, low;
        };
        /// A configured SL-to-VL table: of (input, output) on a switch (IBA: one per pair), of
        /// port `out` (input 0) on an HCA.
        struct port_sl2vl {
            unsigned in = 0, out = 0;
            std::array<uint8_t, 16> table{};
        };
        std::vector<port_sl2vl> sl2vl;
        std::vector<port_vlarb> vlarb;  ///< configured tables
    };
    /// The blocks of `lft` in use: up to LinearFDBTop, the highest LID with a route.
    static uint16_t fdb_top(const std::vector<uint8_t>& lft);
    /// The SMPs program_switches sends to `p` (NodeInfo, LFT blocks, SwitchInfo, tables).
    static unsigned smps_for(const switch_plan& p);

    /// program = smp: the sweep at the start of simulated time programs `plans`; a failure
    /// goes to `on_error` (the run stops naming it).
    void plan_sweep(std::vector<switch_plan> plans, std::function<void(const std::string&)> on_error);
    /// Programs each switch of `plans` with directed-route SMPs, waiting for each GetResp:
    /// SubnGet(NodeInfo) (the path must reach a switch of that GUID), SubnSet(LinearForwarding-
    /// Table) of blocks 0 .. LinearFDBTop / 64, SubnSet(SwitchInfo) with LinearFDBTop,
    /// SubnSet(SLtoVLMappingTable) per configured (input, output) pair and SubnSet(VLArbitrationTable) of the
    /// high then the low table's blocks. Returns an empty string or what failed.
    std::string program_switches(const std::vector<switch_plan>& plans);
    /// From an SC_THREAD: returns when the switches are programmed (at once with program=direct).
    void wait_programmed();
    bool programmed() const { return programmed_; }
    /// When the sweep finished (zero with program=direct).
    sc_core::sc_time programmed_at() const { return programmed_at_; }

    void set_lid(uint16_t lid) { lid_ = lid; }
    uint16_t lid() const { return lid_; }
    /// The subnet as swept: node `node`'s port has LID `lid`.
    void add_node(unsigned node, uint16_t lid) { node_lid_[node] = lid; }

    /// Sets entry `index` of node `node`'s P_Key table: reads the entry's block with SubnGet
    /// the first time, then SubnSet(P_KeyTable) of the block with the entry changed. True if the
    /// GetResp has status 0 and shows the new key (C10-128).
    bool set_pkey(unsigned node, unsigned index, uint16_t key);
    /// SubnGet(P_KeyTable) of block `block` of node `node`; true on a GetResp with status 0.
    bool get_pkey_block(unsigned node, unsigned block, std::array<uint16_t, wire::PKEYS_PER_BLOCK>& keys);
    /// Sends SMP `req` (its TID is assigned here) to node `node` and waits for the GetResp with
    /// that TID; returns the response's MAD status, or -1 on timeout or an unknown node.
    int transact(unsigned node, wire::smp& req, wire::smp* resp = nullptr);
    /// Sends `req` as a directed-route SMP along `path` (the port each hop leaves by, [0] the
    /// SM's own port) and waits for its GetResp; returns its status (without the D bit), or -1.
    int transact_dr(const std::vector<uint8_t>& path, wire::smp& req, wire::smp* resp = nullptr);

    /// What the SM sent (bytes LRH..VCRC, in order), received as answers, and traps.
    const std::vector<std::vector<uint8_t>>& sent() const { return sent_; }
    const std::vector<record>& responses_received() const { return responses_; }
    const std::vector<trap_record>& traps_received() const { return traps_; }
    /// Notified when a trap arrives.
    sc_core::sc_event trap_event;

    /// --pcap: records what the SM sends into `w` as direction 0, at the time its first bit
    /// leaves. nullptr: no capture (the default).
    void capture_to(wire_capture* w) { capture_ = w; }

private:
    /// Sends `req` (its TID assigned here) to LRH DLID `dlid` and waits for the GetResp.
    int exchange(uint16_t dlid, wire::smp& req, wire::smp* resp);
    void sweep();
    void rx_b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);

    uint16_t lid_ = 0;
    wire_capture* capture_ = nullptr;
    std::map<unsigned, uint16_t> node_lid_;
    std::map<std::pair<unsigned, unsigned>, std::array<uint16_t, wire::PKEYS_PER_BLOCK>>
        shadow_;  // (node, block)
    uint64_t next_tid_ = 1;
    uint64_t waiting_tid_ = 0;  // the transaction in progress (0: none)
    bool answered_ = false;
    wire::smp answer_;
    sc_core::sc_event answer_ev_;
    sc_core::sc_time wire_free_;
    packet tx_pkt_;
    tlm::tlm_generic_payload gp_;
    std::vector<std::vector<uint8_t>> sent_;
    std::vector<record> responses_;
    std::vector<trap_record> traps_;
    std::vector<switch_plan> plans_;
    std::function<void(const std::string&)> on_error_;
    bool programmed_ = true;
    sc_core::sc_time programmed_at_;
    sc_core::sc_event programmed_ev_;
};

}  // namespace hcasim
