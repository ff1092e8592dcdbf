// The whole machine: the fabric (its graph built from the topology parameters or read from a
// file, the switches, the subnet manager and its routing) and N nodes, cabled as the graph
// says. Everything that can be wrong with the fabric (a radix too small, a bad topology file,
// a routing that cannot reach a node) fails while the fabric module is constructed, before a
// node is allocated.
#pragma once
#include <systemc>

#include <memory>
#include <string>
#include <vector>

#include "model/core/cc_config.h"
#include "model/core/param.h"
#include "model/fabric/cc_params.h"
#include "model/fabric/ib_switch.h"
#include "model/fabric/isl_channel.h"
#include "model/fabric/partition.h"
#include "model/fabric/routing.h"
#include "model/fabric/subnet_manager.h"
#include "model/fabric/switch_sma.h"
#include "model/fabric/topology.h"
#include "model/fabric/wire_capture.h"
#include "model/system/node.h"

namespace hcasim {

class fabric : public sc_core::sc_module {
public:
    param<unsigned> nodes;             ///< number of hosts (a topology file gives its own)
    param<std::string> topology;       ///< auto|back_to_back|switch|fat_tree|file
    param<std::string> topology_file;  ///< fabric.topology=file: an ibnetdiscover file
    param<unsigned> fat_tree_levels;   ///< fabric.fat_tree.levels: 2 or 3
    param<double> fat_tree_oversubscription;
    param<std::string> routing;         ///< minhop|updn|ftree (OpenSM's engine names)
    param<unsigned> lmc;                ///< LID mask count of every endport (0..7), as OpenSM's `lmc`
    param<bool> subnet_manager;         ///< attach the subnet manager's endport to the first switch
    param<double> sma_process_ns;       ///< fabric.switch.sma_process_ns: a switch agent's time per SMP
    param<double> isl_rate_gbps;        ///< fabric.isl.rate_gbps: cables between switches; 0: node 0's link
    param<double> isl_propagation_ns;   ///< fabric.isl.propagation_ns; -1: node 0's link
    param<std::string> isl_down_cable;  ///< fabric.isl.down_cable: SWITCH/PORT, a cable between switches
    param<double> isl_down_at_ns;       ///< fabric.isl.down_at_ns: when that cable goes down; -1: never
    param<std::string> partition;       ///< fabric.partition: auto or a file (several ranks)
    switch_params switch_config;        ///< fabric.switch.*: every switch's parameters
    cc_params cc_keys;                  ///< fabric.cc.*: congestion control
    cc_config cc;                       ///< cc_keys, validated: every switch and HCA is built with it

    hcasim::topology graph;                            ///< the fabric's graph, with the LIDs the SM assigned
    routing_tables routes;                             ///< the forwarding tables the SM programs
    std::vector<std::unique_ptr<ib_switch>> switches;  ///< in graph node order of the switches
    std::vector<std::unique_ptr<switch_sma>> agents;   ///< each switch's agent (port 0), same order
    ib_switch* sw = nullptr;                           ///< the first switch (nullptr back to back)
    std::unique_ptr<hcasim::subnet_manager> sm;        ///< "fabric.sm"
    std::unique_ptr<isl_channel> isl;                  ///< every switch-to-switch cable (2+ switches)

    fabric_partition part;  ///< which rank simulates which switch and node
    /// `ranks` processes simulate it together (partition), this one is `rank`.
    explicit fabric(sc_core::sc_module_name name = "fabric", unsigned ranks = 1, unsigned rank = 0);
    unsigned rank() const { return rank_; }
    /// A partitioned run: no message this rank sends on a cut cable is due before the returned
    /// time, given that nothing of its happens before `next` (sc_max_time(): none). A packet
    /// leaves a switch no sooner than its requests' ready times and its outputs' busy times,
    /// one yet to reach a switch (from a host, from the cables' queue) no sooner than its first
    /// bit + latency_ns, and a cut cable adds its propagation.
    sc_core::sc_time cut_horizon(const sc_core::sc_time& now, const sc_core::sc_time& next) const;
    bool has_switch() const { return sw != nullptr; }
    bool has_sm() const { return bool(sm); }
    unsigned hosts() const { return graph.hosts(); }
    /// The switch host `i` is cabled to, and its port there (`port`); nullptr back to back.
    ib_switch* switch_toward(unsigned i, unsigned* port) {
        const topo_end& e = graph.nodes[graph.host_node.at(i)].peer[1];
        if (!graph.nodes[unsigned(e.node)].is_switch()) return nullptr;
        *port = e.port;
        return &switch_at(unsigned(e.node));
    }
    /// The switch of graph node `n`, and its agent.
    ib_switch& switch_at(unsigned n) { return *switches[switch_index_.at(n)]; }
    switch_sma& agent_at(unsigned n) { return *agents[switch_index_.at(n)]; }
    /// The faults of the switch-to-switch cable at graph node `n`'s port `p`: down from
    /// fabric.isl.down_at_ns if it is fabric.isl.down_cable, else none.
    fault_settings isl_faults(unsigned n, unsigned p) const;

private:
    unsigned rank_ = 0;
    std::vector<int> switch_index_;  // graph node -> index in `switches` (-1: not a switch)
    int down_node_ = -1;             // fabric.isl.down_cable: its switch (graph node) and port
    unsigned down_port_ = 0;
};

/// Builds the fabric module and the nodes "node0".."nodeN-1" (top-level modules, so their
/// parameters are `node0.pcie.lanes` etc.) and cables them as the fabric's graph says.
class machine {
public:
    /// One process (rank 0 of 1), or rank `rank` of `ranks` of a partitioned run: every rank
    /// builds the whole machine and simulates the part fabric.partition gives it.
    explicit machine(unsigned rank = 0, unsigned ranks = 1);
    fabric net;
    /// Whether this rank simulates host `i`.
    bool owns_host(unsigned i) const { return net.part.rank_of_host(i) == net.rank(); }
    /// Host i's base LID.
    uint16_t lid_of(unsigned i) const { return hosts.at(i)->lid(); }
    /// The rank that simulates the unit a counter or parameter key belongs to ("node3.hca...",
    /// "fabric.leaf2.out4...", "fabric.sm..."); rank 0 for the rest.
    unsigned rank_of_key(const std::string& key) const;
    std::vector<std::unique_ptr<node>> hosts;
    node& at(unsigned i) { return *hosts.at(i); }
    size_t size() const { return hosts.size(); }

    /// --pcap: captures every cable into directory `dir` (created if missing; docs/traces.md):
    /// `link<N>.pcap` for node N's cable (back to back: `link0.pcap`, the one cable between
    /// node 0 and node 1) and `link_sm.pcap` for the subnet manager's. Direction 0 of each
    /// file is what node N (node 0, the SM) sends. Throws config_error if the directory or a
    /// file cannot be created. Call before the simulation starts.
    void capture_to(const std::string& dir);
    /// Writes what the captures hold back and closes them; returns an empty string or what
    /// failed. Idempotent (the destructor closes too, losing errors).
    std::string close_captures();
    /// The open captures, in file order.
    const std::vector<std::unique_ptr<wire_capture>>& captures() const { return captures_; }
    /// Each open capture's place among every cable's (node N: N, the SM's: hosts): a
    /// partitioned run's ranks hold some of them each.
    const std::vector<unsigned>& capture_order() const { return capture_order_; }

    /// --dump-topology: the fabric's graph in ibnetdiscover's format.
    void write_topology(std::ostream& out) const;
    /// Empty, or why the fabric stopped the simulation (a credit loop: the cycle of ports, a
    /// subnet manager's sweep that failed).
    const std::string& fabric_error() const { return fabric_error_; }
    /// From an SC_THREAD, before an application sends: returns once the subnet manager has
    /// programmed the switches (fabric.sm.program=smp); at once otherwise.
    void wait_programmed() {
        if (net.has_sm()) net.sm->wait_programmed();
    }
    /// fabric.sm.program=smp: what the SM programs into each switch (directed routes breadth
    /// first from the SM's switch, the routing engine's tables, the configured SL-to-VL and VL
    /// arbitration tables), in graph order of the switches.
    std::vector<subnet_manager::switch_plan> sweep_plan();

private:
    /// Cables graph node `a` port `pa` to graph node `b` port `pb` (one of them a switch).
    void cable(unsigned a, unsigned pa, unsigned b, unsigned pb);
    /// A switch output waited for credit with nothing moving: follow the credit waits from it;
    /// a loop back to it is a deadlock (the run stops naming the cycle).
    void check_deadlock(unsigned sw_node, unsigned port);
    /// Recomputes the multicast forwarding of `mlid` on every switch (a spanning tree of the
    /// switches reaching the member hosts).
    void update_mcast(uint16_t mlid);
    std::vector<std::unique_ptr<wire_capture>> captures_;
    std::vector<unsigned> capture_order_;
    std::vector<std::vector<unsigned>> mcast_members_;  // per MLID - 0xC000: joins per host
    std::vector<int> tree_parent_port_;  // per graph node (switch): port toward the tree root; -1 root
    std::string fabric_error_;
};

}  // namespace hcasim
