// The subnet manager's routing engines, as OpenSM's (fabric.routing = minhop | updn | ftree):
// from the fabric's graph and LIDs (model/fabric/topology.h) to each switch's linear
// forwarding table. A setup-time computation (never per packet); the subnet manager programs
// the result into the switches. Also the check a routing can deadlock: a cycle in the channel
// dependency graph its tables induce.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/fabric/topology.h"

namespace hcasim {

/// Linear forwarding tables: lft[n][lid] is the output port (IBA port number) switch node n
/// sends DLID `lid` to; NO_PATH if none. Empty for nodes that are not switches. A switch's own
/// LID maps to port 0.
struct routing_tables {
    static constexpr uint8_t NO_PATH = 0xFF;
    std::vector<std::vector<uint8_t>> lft;
    std::string engine;  ///< the engine that computed them (after any fallback)
};

/// Routes every endport LID (each of an HCA's 2^lmc LIDs, the SM's, the switches') with
/// `engine` ("minhop", "updn", "ftree"). LIDs must be assigned (assign_lids). Throws
/// config_error naming the culprit: an unknown engine, an endport no switch can reach,
/// a topology ftree cannot route (with its reason).
routing_tables route(const topology& t, const std::string& engine);

/// A cycle in the channel dependency graph of `r` on `t` (the routes between all endport
/// LIDs): the channels (switch node, output port) in cycle order; empty if there is none
/// (the routing cannot deadlock).
std::vector<std::pair<unsigned, unsigned>> dependency_cycle(const topology& t, const routing_tables& r);

/// The way a packet from node `src` (a CA) to `dlid` goes: the switch output ports (switch
/// node, port) it leaves through, in order, and the node that receives it (a CA, or a switch
/// for its own LID at port 0; back to back, the peer); -1 if none does (no route, a loop, or
/// `src` not cabled).
struct route_trace {
    std::vector<std::pair<unsigned, unsigned>> channels;
    int delivered_to = -1;
};
route_trace trace_route(const topology& t, const routing_tables& r, unsigned src, uint16_t dlid);

/// "leaf1/p3 -> spine0/p5 -> ..." for messages (desc of the node and its port).
std::string describe_channels(const topology& t, const std::vector<std::pair<unsigned, unsigned>>& ch);

}  // namespace hcasim
