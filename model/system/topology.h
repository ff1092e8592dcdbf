// The fabric as a graph: HCAs (one port each), switches (ports 1..radix; port 0 is the
// management port and is never cabled) and the subnet manager's endport, with the cables
// between their ports. Built from the `fabric.topology` parameters (back_to_back, switch,
// fat_tree) or read from a file in the format `ibnetdiscover` prints (model/system/
// topology.cpp); written back in the same format by `hcasim --dump-topology FILE`. Routing
// (model/fabric/routing.h) and the machine (model/system/fabric.cpp) read it; nothing in it
// knows SystemC. Port numbers are IBA's: 1-based physical ports.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace hcasim {

/// One end of a cable: a node (index into topology::nodes) and its port.
struct topo_end {
    int node = -1;  ///< -1: nothing cabled to this port
    unsigned port = 0;
    bool connected() const { return node >= 0; }
};

struct topo_node {
    enum class kind : uint8_t { hca, sw };
    kind type = kind::hca;
    bool is_sm = false;  ///< the subnet manager's endport (an HCA-like node that is not a host)
    unsigned host = 0;   ///< HCA that is a host: which simulated node (nodeN) it is
    unsigned level = 0;  ///< switch of a built fat tree: 0 leaf, 1 spine, 2 core; else 0
    uint64_t guid = 0;   ///< node GUID (unique in the fabric); HCA port p's GUID is guid + p
    std::string desc;    ///< NodeDescription: "node3", "leaf1", "spine0", "subnet manager"
    uint16_t lid = 0;    ///< base LID (assign_lids); an HCA owns lid .. lid + 2^lmc - 1
    std::vector<topo_end> peer;  ///< index = port number 0..ports(); peer[0] unused
    unsigned ports() const { return peer.empty() ? 0 : unsigned(peer.size()) - 1; }
    bool is_switch() const { return type == kind::sw; }
};

struct topology {
    std::vector<topo_node> nodes;
    std::vector<unsigned> host_node;  ///< node index of host i (nodeN), i = 0 .. hosts-1
    int sm_node = -1;                 ///< node index of the SM endport; -1: none
    unsigned lmc = 0;                 ///< LID mask count of every endport (0..7)

    unsigned hosts() const { return unsigned(host_node.size()); }
    /// Adds a node with `ports` unconnected ports; returns its index.
    unsigned add(topo_node::kind type, unsigned ports, std::string desc, uint64_t guid);
    /// Cables port `pa` of node `a` to port `pb` of node `b` (both must be free).
    void connect(unsigned a, unsigned pa, unsigned b, unsigned pb);
    /// The node indices of the switches, in node order.
    std::vector<unsigned> switches() const;
};

/// Fabric shapes built from parameters. Each attaches the subnet manager's endport (when
/// `with_sm`) to the first free port of the first switch. Throw config_error naming the
/// culprit when the shape cannot be built (e.g. a radix too small for the tree).
/// Two hosts cabled to each other (no switch; `with_sm` is ignored: there is no SM).
topology make_back_to_back();
/// `hosts` hosts on one switch of `radix` ports: host i on port i + 1, the SM on port hosts + 1.
topology make_single_switch(unsigned hosts, unsigned radix, bool with_sm);
/// A fat tree of `levels` (2: leaf/spine, 3: leaf/spine/core) switch levels of `radix`
/// ports; each leaf has down:up ports in the ratio `oversubscription` (1 = full bisection).
topology make_fat_tree(unsigned hosts, unsigned levels, unsigned radix, double oversubscription,
                       bool with_sm);

/// Reads a fabric in ibnetdiscover's format. Every CA becomes a host in file order (node0,
/// node1, ...), except one whose NodeDescription is "subnet manager" (the SM, as written by
/// write_ibnetdiscover). Throws config_error "FILE:LINE: what is wrong" on syntax errors,
/// dangling or mismatched links, duplicate GUIDs, ports beyond a node's count, and a fabric
/// that is not connected.
topology read_ibnetdiscover(const std::string& path);
/// Writes `t` (with its LIDs) in ibnetdiscover's format; link widths and speeds as given
/// (e.g. "4xEDR"). read_ibnetdiscover of the output gives the same topology.
void write_ibnetdiscover(const topology& t, std::ostream& out, const std::string& link_width_speed);

/// Base LIDs as the subnet manager assigns them, 2^lmc-aligned: host i gets (i + 1) << lmc,
/// the SM (hosts + 1) << lmc, the switches after it in node order. Throws config_error if
/// they pass the last unicast LID (0xBFFF).
void assign_lids(topology& t, unsigned lmc);

}  // namespace hcasim
