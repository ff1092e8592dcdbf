// Which process (MPI rank) simulates which part of the fabric: the `fabric.partition`
// parameter, "auto" or a file naming each switch's rank (docs/fabric.md, "Partitioned runs").
// Cuts are only on switch-to-switch cables: an endport (host or the subnet manager's) runs on
// the rank of the switch it is cabled to. Pure: it reads the graph (topology.h) and knows
// neither SystemC nor MPI.
#pragma once
#include <iosfwd>
#include <string>
#include <vector>

#include "model/fabric/topology.h"

namespace hcasim {

struct fabric_partition {
    unsigned ranks = 1;
    std::vector<unsigned> rank_of;    ///< per graph node (topology::nodes index): the rank simulating it
    std::vector<unsigned> host_rank;  ///< per host i (nodeI): the rank simulating it
    /// A switch-to-switch cable whose ends are on different ranks: port `pa` of node `a` to port
    /// `pb` of node `b`, a < b.
    struct cut {
        unsigned a = 0, pa = 0, b = 0, pb = 0;
    };
    std::vector<cut> cuts;  ///< in cabling order: by a, then by a's port
    unsigned rank_of_host(unsigned host) const { return host_rank.at(host); }
};

/// Partitions `t` over `ranks` (>= 1) processes. `spec` is the fabric.partition value: "auto" or
/// the path of a partition file. With one rank everything is on rank 0 and `spec` is not read.
/// Throws config_error naming fabric.partition (more ranks than hosts, a fabric with fewer than
/// two switches and more than one rank, auto unable to give every rank a host) or the file
/// ("cannot open partition file 'FILE': why", "FILE:LINE: what is wrong", "FILE: does not cover
/// the fabric: ...", "FILE: rank R has no host").
fabric_partition make_partition(const topology& t, unsigned ranks, const std::string& spec);

/// Writes `p` as a partition file of `t` (the format make_partition reads): one line per switch
/// in node order, named by its NodeDescription (quoted where needed) or, where that does not
/// name it alone, by its GUID; comments count each rank's hosts and each switch's endports.
/// make_partition of the output gives `p` again.
void write_partition(const topology& t, const fabric_partition& p, std::ostream& out);

}  // namespace hcasim
