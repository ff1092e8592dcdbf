// InfiniBand switch: forwards packets by destination LID (linear forwarding table: LID n goes
// out of the port the node with LID n is cabled to; a multicast LID, 0xC000..0xFFFE, goes out of
// every port that joined its group except the one it came in on), with a fixed cut-through latency and one
// serialising output queue per port. A unicast packet offered with its sender's buffer
// (packet_handoff_ext) is queued in that buffer, and passed on the same way: through the switch,
// as back to back, no byte is copied. A packet that finds its output queue full is dropped
// and counted (credit-based flow control arrives with the timing issue). What an output sends
// toward node N passes through that node's cable faults (link.* fault parameters of node N,
// given by set_route), counted per output as `out<N>.dropped` etc.
#pragma once
#include <systemc>
#include <tlm>
#include "tlm_if/tlm_ext.h"
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <memory>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/core/log.h"
#include "model/fabric/fault_injector.h"
#include "model/fabric/packet.h"
#include "model/fabric/wire_capture.h"

namespace hcasim {

class ib_switch : public sc_core::sc_module {
public:
    tlm_utils::multi_passthrough_target_socket<ib_switch> in;      ///< one per switch port, from node links
    tlm_utils::multi_passthrough_initiator_socket<ib_switch> out;  ///< one per switch port, to node ports

    param<double> latency_ns;       ///< input to output forwarding latency
    param<unsigned> queue_packets;  ///< output queue depth per port

    counter forwarded, dropped_no_route, dropped_queue_full, mcast_replicas;
    module_log log_;  ///< info: every packet dropped (no route, output queue full)

    SC_HAS_PROCESS(ib_switch);
    /// A switch with `ports` ports (0 .. ports-1).
    ib_switch(const sc_core::sc_module_name& name, unsigned ports);

    /// Port `p` leads to the node with this LID at this data rate and propagation delay, over
    /// a cable with these fault settings (applied to what the port sends). With LID mask count
    /// `lmc` the node owns the 2^lmc LIDs from `lid` (C10-3), all routed to `p`.
    void set_route(unsigned p, uint16_t lid, double rate_gbps, const sc_core::sc_time& propagation,
                   const fault_settings& faults, uint8_t lmc = 0);
    /// Multicast forwarding table: port `p` joins / leaves the group of `mlid` (joins are
    /// counted per port: a port stays a member until it left as often as it joined).
    void join_mcast(uint16_t mlid, unsigned p);
    void leave_mcast(uint16_t mlid, unsigned p);
    /// --pcap: records what port `p` sends into `w` as direction `dir`, before the cable's
    /// faults, at the time its first bit leaves the port. nullptr: no capture (the default).
    void capture_to(unsigned p, wire_capture* w, unsigned dir);
    /// Fault injection on what port `p` sends (counters `out<p>.dropped` ...).
    const fault_injector& faults(unsigned p) const { return ports_.at(p)->faults; }

private:
    void b_transport(int id, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void forward();
    /// Queues the packet on output `p` (false: the queue is full): in the sender's buffer if
    /// `handoff` offers it (a free one goes back in exchange), else a copy.
    /// `crc`: what the input payload's crc_intact_ext said (the queued packet passes it on).
    bool enqueue(unsigned p, const uint8_t* data, uint32_t len, const sc_core::sc_time& delay, crc_state crc,
                 packet** handoff = nullptr);

    struct slot {
        sc_core::sc_time at;                 // when the packet is ready to leave (arrival + latency)
        crc_state crc = crc_state::unknown;  // crc_intact_ext of the packet as it came in
        packet* pkt = nullptr;               // from packet_pool (taken at first use)
    };
    struct out_port {
        explicit out_port(const std::string& prefix) : faults(prefix) {}
        fault_injector faults;
        wire_capture* capture = nullptr;  // --pcap
        unsigned capture_dir = 1;
        double ps_per_byte = 80.0;
        sc_core::sc_time propagation, free_at;
        // The output queue: `count` slots from `head` (empty ring: the port has no route). The
        // ring holds pointers into `pool`; free slots wait on `free`, a stack, so the next
        // packet goes into the slot released last, its buffer still in the cache.
        std::vector<slot*> ring, free;
        std::vector<std::unique_ptr<slot>> pool;
        size_t head = 0, count = 0;
    };
    std::vector<std::unique_ptr<out_port>> ports_;
    // One bit per port with queued packets or a packet its cable holds back: forward() visits
    // only these (in port order, as a scan of all ports would).
    std::vector<uint64_t> active_;
    std::vector<int> lid_to_port_;  // linear forwarding table
    std::vector<std::vector<uint16_t>>
        mft_;  // multicast: per MLID - 0xC000, joins per port (empty: no group)
    sc_core::sc_event wake_;
    tlm::tlm_generic_payload gp_;
    packet_handoff_ext* handoff_ = nullptr;  // on gp_ (which owns it): the slot's buffer on offer

public:
    ~ib_switch() override;
};

}  // namespace hcasim
