// perftest-equivalent workloads on the model: write_lat, send_lat, write_bw, send_bw (two
// nodes, RC, through the verbs API) and dma_read_bw, dma_write_bw (the PCIe link alone).
// Semantics follow perftest (calibration.md): *_lat reports half the round trip of a
// ping-pong (typical = median); *_bw streams with a transmit depth and reports bytes / time.
#pragma once
#include <string>
#include <vector>

#include "model/core/param.h"
#include "testbench/report.h"

namespace hcasim {

struct phase_spec {
    std::string workload;           ///< write_lat|send_lat|write_bw|send_bw|dma_read_bw|dma_write_bw
    std::vector<uint64_t> sizes;    ///< message sizes, bytes
    uint64_t iters = 1000;          ///< iterations per size
};

struct run_spec {
    std::vector<phase_spec> phases; ///< run one after the other in one simulation
    unsigned qps = 1;               ///< QPs used by bandwidth workloads (round robin)
    unsigned mtu = 4096;            ///< path MTU, bytes
    uint64_t seed = 1;
};

/// A run that could not complete (a completion error, a stall); the message says which.
struct workload_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

bool is_pcie_workload(const std::string& name);

/// Elaborates the configured machine, runs every phase, and returns one report per phase.
/// Configuration must already be in the broker. Must be called once per process.
/// If `help_out` is given, elaborates, fills it with every parameter (for --help-config) and
/// returns without simulating.
std::vector<run_report> run(const run_spec& spec, std::vector<param_info>* help_out = nullptr);

}  // namespace hcasim
