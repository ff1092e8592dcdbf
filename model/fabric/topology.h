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
    bool is_sm = false;          ///< the subnet manager's endport (an HCA-like node that is not a host)
    unsigned host = 0;           ///< HCA that is a host: which simulated node (nodeN) it is
    unsigned level = 0;          ///< switch of a fat tree: 0 leaf, 1 spine, 2 core (read: hops to a CA - 1)
    uint64_t guid = 0;           ///< node GUID (unique in the fabric); HCA port p's GUID is guid + p
    std::string desc;            ///< NodeDescription: "node3", "leaf1", "spine0", "subnet manager"
    uint16_t lid = 0;            ///< base LID (assign_lids); an HCA owns lid .. lid + 2^lmc - 1, a switch lid
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
    /// Cables port `pa` of node `a` to port `pb` of node `b` (both must exist and be free, else
    /// std::invalid_argument: a caller's bug, not a user's).
    void connect(unsigned a, unsigned pa, unsigned b, unsigned pb);
    /// The node indices of the switches, in node order.
    std::vector<unsigned> switches() const;
};

// Equal: the same nodes (every field) in the same order, the same hosts, SM and LMC.
bool operator==(const topo_end& a, const topo_end& b);
bool operator==(const topo_node& a, const topo_node& b);
bool operator==(const topology& a, const topology& b);
inline bool operator!=(const topology& a, const topology& b) { return !(a == b); }

/// Fabric shapes built from parameters. Every builder gives the nodes in the canonical order
/// (the order write_ibnetdiscover writes them and read_ibnetdiscover returns them): the
/// switches, then host 0, 1, ..., then the SM's endport. The endports (the hosts in order, the
/// SM last when `with_sm`) take the switches' down ports in order. GUIDs: endport e (host e;
/// the SM is endport `hosts`) 0x0002c90300000000 + ((e + 1) << 4), so its port 1 is that + 1;
/// switch k (k-th switch in node order) 0xe41d2d0300000000 + k + 1. Descriptions "node<i>",
/// "subnet manager", "switch0", "leaf<k>", "spine<k>", "core<k>". Throw config_error naming
/// the culprit keys (fabric.nodes, fabric.switch.radix, fabric.fat_tree.levels,
/// fabric.fat_tree.oversubscription) when the shape cannot be built.
/// Two hosts cabled port 1 to port 1 (no switch, so no SM).
topology make_back_to_back();
/// `hosts` hosts on one switch ("switch0") of `radix` ports: host i on port i + 1, the SM on
/// port hosts + 1.
topology make_single_switch(unsigned hosts, unsigned radix, bool with_sm);
/// A fat tree of `levels` switch levels (2: leaf/spine, 3: leaf/spine/core), every switch
/// with `radix` ports, the leaves oversubscribed `oversubscription`:1 (down:up, >= 1; 1 is
/// full bisection). With R = radix, o = oversubscription, E = hosts (+1 with the SM):
///  - a leaf has u = floor(R / (1 + o)) up ports and d = min(R - u, floor(u * o)) down
///    ports: ports 1..d down, d+1..d+u up (R = 36: o = 1 gives 18/18, o = 2 gives 24/12);
///  - L = ceil(E / d) leaves; endport e on leaf e / d, port e % d + 1 (the last leaf may be
///    partly empty);
///  - 2 levels: u spines; leaf l's port d + 1 + j goes to spine j's port l + 1 (spine ports
///    1..L used). At most R leaves: R * d endports.
///  - 3 levels: pods of p = floor(R / 2) leaves and u spines; P = ceil(L / p) pods. Leaf l is
///    leaf l % p of pod l / p; its port d + 1 + j goes to spine j of its pod ("spine<pod * u
///    + j>"), port (l % p) + 1. A spine has ports 1..p down and p + 1..2p up; spine j of pod
///    x, port p + 1 + m goes to core j * p + m ("core<j * p + m>"), port x + 1. u * p cores,
///    each with ports 1..P used. At most R pods: R * p * d endports (R = 32, o = 1: 8192).
/// Node order: leaves, spines (pod by pod), cores, hosts, SM. `level`: 0 leaf, 1 spine, 2 core.
topology make_fat_tree(unsigned hosts, unsigned levels, unsigned radix, double oversubscription,
                       bool with_sm);

/// Reads a fabric in ibnetdiscover's format (docs/fabric.md, "Topologies"): vendid= devid=
/// sysimgguid= switchguid= caguid= lines, "Switch N \"S-GUID\" # \"desc\" enhanced port 0 lid L
/// lmc M" and "Ca N \"H-GUID\" # \"desc\"" headers, link lines "[p] \"S-GUID\"[q]" and
/// "[p](portguid) \"S-GUID\"[q]" with their trailing comments; # lines and blank lines. Nodes
/// in canonical order (switches in file order, then the hosts, then the SM). Every CA becomes a
/// host in file order (node0, node1, ...), except one whose NodeDescription is "subnet
/// manager" (the SM, as written by write_ibnetdiscover). A CA has one port (a multi-port CA
/// with only port 1 cabled is read as one). LIDs and the LMC come from the comments (0 where
/// absent). A switch's `level` is its distance in hops to the nearest CA minus one (a fat
/// tree's level). Throws config_error "FILE:LINE: what is wrong" on syntax errors, routers,
/// dangling or mismatched links, duplicate GUIDs, ports beyond a node's count, a CA with a
/// cabled port other than port 1, no host, a fabric that is not connected; "cannot open
/// topology file 'FILE': why" if it cannot be read.
topology read_ibnetdiscover(const std::string& path);
/// Writes `t` (with its LIDs) in ibnetdiscover's format: switches in node order, then the
/// hosts in host order, then the SM; link widths and speeds as given (e.g. "4xEDR").
/// Deterministic (no date). read_ibnetdiscover of the output gives the same topology.
void write_ibnetdiscover(const topology& t, std::ostream& out, const std::string& link_width_speed);

/// Base LIDs as the subnet manager assigns them: each endport 2^lmc LIDs, 2^lmc-aligned:
/// host i gets (i + 1) << lmc, the SM (hosts + 1) << lmc; then the switches in node order, one
/// LID each (their port 0 has LMC 0, as OpenSM's default), from the next aligned LID after the
/// last endport's (hosts + 1 + (SM ? 1 : 0)) << lmc. Sets t.lmc. Throws config_error naming
/// fabric.lmc (above 7) or fabric.nodes and fabric.lmc if they pass the last unicast LID 0xBFFF.
void assign_lids(topology& t, unsigned lmc);

}  // namespace hcasim
