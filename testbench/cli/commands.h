// Internal to testbench/cli: the pieces of the default command that run.cpp, sweep.cpp and
// speed.cpp share.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

#include "testbench/cli/cli.h"

namespace hcasim::cli {

/// One run of the workload (one elaboration): prints its table(s), writes --stats-json, returns
/// the exit status and (if `json` is given) the stats JSON (run.cpp).
int run_once(const run_options& opts, nlohmann::ordered_json* json);
/// Writes the --report directory; prints where (and a warning if no plot could be drawn) (run.cpp).
void report(const run_options& o, const nlohmann::ordered_json& runs);

/// --iters of a run at `qps` QPs (per QP): as given, else msg_rate's and qp_scale's default
/// (workloads::default_iters) or 1000 (run.cpp).
uint64_t iters_at(const run_options& o, unsigned qps);

/// --sweep qps=LIST, threads=LIST, KEY=LIST: one run per point of their cross product, up to
/// --jobs at once (sweep.cpp).
int run_sweep(const run_options& o);
/// --workload qp_scale (sweep.cpp).
int run_qp_scale(run_options o);
/// The default command (run_main), or its refusal when mpirun started several ranks for
/// something other than a sweep; ranks above 0 print nothing (sweep_mpi.cpp).
int launched_main(int argc, char* argv[]);
/// `hcasim sweep-merge OUT.json POINT.json...`: the merged stats JSON of a sweep's point files
/// (--sweep-index); 2 naming a missing, unreadable or mismatched file (sweep_mpi.cpp).
int sweep_merge_main(int argc, char* argv[]);

/// `hcasim compare A.json B.json [--tolerance P%]`: two stats JSON files side by side; 0 within
/// the tolerance, 1 beyond it, 2 bad or incomparable files (compare.cpp).
int compare_main(int argc, char* argv[]);

/// --bench-events: the raw SystemC timed-event rate of this machine (speed.cpp).
int bench_events(uint64_t n);
/// --speed: the simulator's speed for the run just done (speed.cpp).
void print_speed(const nlohmann::ordered_json& j);

}  // namespace hcasim::cli
