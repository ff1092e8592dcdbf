// The default command of the hcasim executable: one run of a workload (or the demo), a
// multi-process sweep, qp_scale or the attack suite, as the options select.
#pragma once
#include "model/core/rank_comm.h"

namespace hcasim {

/// `hcasim [options]`: parses the options, runs, prints; returns the exit status (2: bad
/// input, 1: the run failed). `comm`: one rank of a partitioned run (only rank 0 writes outputs).
int run_main(int argc, char* argv[], rank_comm* comm = nullptr);

}  // namespace hcasim
