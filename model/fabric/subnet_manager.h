// Subnet manager (SM) model: an endport of its own on a switch port, with its own LID, that
// manages the HCAs through their subnet management agents with real SMPs (IBA 14): LID-routed
// SubnGet/SubnSet(P_KeyTable) packets (LRH VL15, BTH DestQP 0 and P_Key 0xFFFF, DETH Q_Key 0
// and SrcQP 0, a 256-byte MAD; tlm_if/wire/mad.h), waiting for each GetResp. It receives the
// traps the agents send (Trap 257, Bad P_Key) and keeps them, and every packet it sent and
// every response, for tests. It stands in for the sweep of a real SM: the machine tells it the
// nodes' LIDs (add_node); it does not program switches.
//
// The blocking calls (set_pkey, get_pkey_block, transact) wait on simulated time and must be
// called from an SC_THREAD (an application thread); one transaction at a time.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <map>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/fabric/packet.h"
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

    explicit subnet_manager(const sc_core::sc_module_name& name);

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
};

}  // namespace hcasim
