// The protection attack suite (`hcasim --workload attack_suite`): a table of hostile cases on a
// two-node RC setup that try to reach memory they must not (wrong, stale or foreign keys, other
// PDs and QPs, bytes outside regions and windows, missing rights, refused memory management
// operations, bad local segments). node1 holds the target memory; the attacker is node0's
// requester or a local work request on node1. Every case gets a fresh QP pair (a fault moves
// QPs to Error), a target region with 4 KiB guard bands on each side filled with a pattern,
// and a snapshot of that memory taken just before the attack. A case passes when the attack
// is rejected exactly as specified (immediate return code, completion status / opcode /
// vendor syndrome on every CQ of the pair, no extra completion, async events, QP states of
// both QPs) and not one snapshot byte changed; most cases first run the non-hostile twin (the
// same operation done right succeeds and moves the bytes it should), so the suite cannot pass
// by rejecting everything. docs/attack-suite.md lists the cases.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim::attack {

/// One row of the table, as documented (no simulation needed).
struct case_info {
    std::string name;      ///< unique; carries the compliance statement ID where it checks one
    std::string spec;      ///< statement IDs checked ("C10-61", "o10-37.2.43"), may be empty
    std::string attack;    ///< what the attacker does
    std::string expected;  ///< how it must be rejected
    std::string needs;     ///< "" (any HCA), "2A" or "2B": the type 2 window kind it needs
};

/// The table, in run order.
const std::vector<case_info>& cases();

/// Outcome of one case.
struct case_result {
    std::string name;
    bool ran = false;            ///< false: skipped (the HCA's type 2 windows are another kind)
    bool passed = false;         ///< rejected as expected, no byte changed, controls succeeded
    bool rejected = false;       ///< the attack was rejected exactly as expected
    uint64_t bytes_changed = 0;  ///< snapshot bytes that differ after the attack
    std::string why;             ///< first failure (or the skip reason)
};

/// Outcome of the suite.
struct suite_result {
    std::vector<case_result> results;  ///< one per case of cases(), in order
    unsigned ran = 0, passed = 0, rejected = 0;
    uint64_t bytes_changed = 0;  ///< over all cases
    std::string error;           ///< the run itself failed (setup, stall); empty if not
    /// Every case that ran passed and nothing changed.
    bool ok() const { return error.empty() && ran > 0 && passed == ran && bytes_changed == 0; }
};

struct suite_options {
    uint64_t seed = 1;  ///< varies the guard / target patterns
    std::string only;   ///< run only cases whose name contains this (empty: all)
};

/// Elaborates the configured machine (configuration already in the broker; at least two
/// nodes), runs the suite in one simulation and returns what happened. Once per process.
/// With `help_out`, elaborates, fills it with every parameter and counter and returns without
/// simulating.
suite_result run_suite(const suite_options& opts = {}, elaboration_help* help_out = nullptr);

/// `PASS name` / `FAIL name: why` / `SKIP name: why` per case, then
/// `N cases, R rejected, B bytes changed` (N = cases run).
void print(std::ostream& os, const suite_result& r);

}  // namespace hcasim::attack
