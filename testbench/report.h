// Results of a run: perftest-like table on stdout and the --stats-json file.
#pragma once
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace hcasim {

/// One row: one message size of a latency or bandwidth workload.
struct size_result {
    uint64_t size_bytes = 0;      ///< message size
    uint64_t iters = 0;           ///< iterations measured
    bool latency = false;         ///< latency row (lat_* valid) or bandwidth row (bw/msg_rate valid)
    double bw_gbps = 0;           ///< average bandwidth, Gb/s (10^9 bit/s)
    double msg_rate_mpps = 0;     ///< messages per simulated microsecond (Mpps)
    double lat_typical_us = 0;    ///< median latency, like perftest's t_typical
    double lat_min_us = 0;        ///< minimum latency
    double lat_p99_us = 0;        ///< 99th percentile (nearest rank)
    double lat_max_us = 0;        ///< maximum latency
    double lat_avg_us = 0;        ///< mean latency
    bool verified = false;        ///< --verify ran on this row (JSON "verify" object)
    bool verify_data = true;      ///< the workload's data could be checked (false: dma_read_bw)
    uint64_t bytes_checked = 0;   ///< destination bytes (and atomic results) compared with the expected data
    uint64_t mismatches = 0;      ///< of those, bytes that differed
    uint64_t bad_completions = 0; ///< completions with a wrong opcode, byte_len, wr_id, QP or order (DMA: errors)
    bool datagrams = false;       ///< unreliable messages the receiver counts (ud_send_bw): datagrams_* valid
    uint64_t datagrams_sent = 0;  ///< messages the client sent (the figures' iterations)
    uint64_t datagrams_lost = 0;  ///< of those, messages the server never received (no retransmission);
                                  ///< mcast_bw: summed over the receivers
    uint64_t datagrams_delivered = 0;  ///< datagrams the receivers took (mcast_bw: all receivers together)
    unsigned receivers = 0;       ///< mcast_bw: receiving nodes (node1 ..); 0 for other workloads
    std::vector<uint64_t> lost_per_receiver;  ///< mcast_bw: datagrams node1, node2, ... never received
    bool srq = false;             ///< srq_bw, ud_srq_bw: the srq_* fields are valid
    unsigned srq_qps = 0;         ///< node1's QPs sharing the SRQ
    uint64_t srq_wqes_taken = 0;  ///< node1's wqe_fetcher.srq_taken during the size
    uint64_t srq_rnr_naks = 0;    ///< node1's transport_engine.rnr_naks_sent during the size (RC: SRQ empty)
    uint64_t srq_empty = 0;       ///< node1's wqe_fetcher.srq_empty during the size (UD: datagrams dropped)
};

/// Everything a run reports.
struct run_report {
    std::string workload;              ///< workload name ("demo" if none)
    std::vector<size_result> results;  ///< one per size, in run order
    uint64_t sim_time_ns = 0;          ///< simulated time at the end of the run
    double wall_s = 0;                 ///< host wall time of the simulation (JSON only, never the table)
    uint64_t wire_packets = 0;         ///< packets that crossed the fabric
    uint64_t seed = 0;                 ///< run seed
    std::string verify_failure;        ///< --verify: the first mismatch or bad completion, in words; empty = none
    /// Every counter and every parameter at the end of the run (captured before the model is
    /// torn down). Empty: write_json reads the live registries instead.
    std::vector<std::pair<std::string, uint64_t>> counters;
    std::vector<std::pair<std::string, std::string>> config;
};

/// Prints a perftest-like table. Deterministic: no wall-clock values.
void print_table(std::ostream& os, const run_report& r);

/// Writes the stats JSON (results, sim summary, every counter, every param). Throws
/// config_error if the file cannot be written.
void write_json(const std::string& path, const run_report& r);
/// Several phases of one run (the demo): "workload" is "demo" and each result names its workload.
void write_json(const std::string& path, const std::vector<run_report>& reports);

/// Latency row from per-iteration samples (microseconds): typical = median, p99 nearest rank.
size_result latency_stats(uint64_t size, const std::vector<double>& samples_us);

}  // namespace hcasim
