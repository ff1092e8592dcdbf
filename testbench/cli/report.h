// Results of a run: perftest-like table on stdout and the --stats-json file.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace hcasim {

/// One flow of a many-node workload (incast, alltoall, ...): the messages one node sends on its
/// QPs towards one node (dst), or towards a destination drawn per message (dst -1).
struct flow_result {
    unsigned src = 0;
    int dst = -1;           ///< destination node; -1: each message its own (uniform_random, hotspot)
    bool victim = false;    ///< hotspot: a victim flow (never touches the hot node)
    uint64_t messages = 0;  ///< messages completed (RC: acknowledged; UC, UD: received)
    uint64_t lost = 0;      ///< UC, UD: messages sent that never arrived
    uint64_t bytes = 0;     ///< payload bytes of the completed messages
    double gbps = 0;        ///< bytes / (the flow's last completion - the common start), Gb/s
};

/// What a many-node workload reports beside its row (docs/fabric.md, "Many-node workloads").
struct fabric_result {
    std::string transport;           ///< rc|uc|ud (workload.transport)
    unsigned nodes = 0;              ///< nodes taking part (fabric.nodes)
    std::vector<flow_result> flows;  ///< in flow order
    double aggregate_gbps = 0;       ///< every flow's bytes / (the last completion - the start)
    double victim_gbps = 0;          ///< hotspot: the victim flows' bytes over the same interval
    double jain = 0;                 ///< Jain's fairness index over the flows' throughputs
    double mct_p50_us = 0, mct_p99_us = 0, mct_max_us = 0;  ///< message completion time
    std::vector<double> node_rx_gbps;                       ///< per node: payload it received / the interval
    double link_gbps = 0;                                   ///< node0's port data rate
    uint64_t messages = 0, lost = 0;                        ///< over every flow
    /// Packets dropped during the run by kind (the switch's and the ports' drop counters, summed
    /// over their instances), and their sum: on a lossless fabric 0.
    std::vector<std::pair<std::string, uint64_t>> drops;
    uint64_t dropped = 0;
    /// The congestion picture, from counters when the model has them (empty otherwise): the ports
    /// with the most PortXmitWait, and congestion control activity.
    std::vector<std::pair<std::string, uint64_t>> xmit_wait, cc;
};

/// --threads N > 1: what one application thread of a bandwidth row did, from its own completions.
struct thread_result {
    unsigned thread = 0;       ///< thread t (its QPs are t, t + N, ...)
    unsigned qps = 0;          ///< its QPs
    uint64_t messages = 0;     ///< messages its send completions completed
    uint64_t active_ns = 0;    ///< its own start to its last completion
    double msg_rate_mpps = 0;  ///< messages / active_ns
};

/// Smallest, mean and largest of a figure over a row's threads.
struct spread {
    double min = 0, mean = 0, max = 0;
};
/// The spread of `field` over `threads` (all 0 if none).
spread thread_spread(const std::vector<thread_result>& threads, double (*field)(const thread_result&));

/// One row: one message size of a latency or bandwidth workload.
struct size_result {
    uint64_t size_bytes = 0;    ///< message size
    uint64_t iters = 0;         ///< iterations measured: bandwidth rows per QP (--iters), many-node per flow
    uint64_t messages = 0;      ///< bandwidth rows: messages of the size over every QP or flow (0: iters)
    bool latency = false;       ///< latency row (lat_* valid) or bandwidth row (bw/msg_rate valid)
    double bw_gbps = 0;         ///< average bandwidth, Gb/s (10^9 bit/s)
    double msg_rate_mpps = 0;   ///< messages per simulated microsecond (Mpps)
    double lat_typical_us = 0;  ///< median latency, like perftest's t_typical
    double lat_min_us = 0;      ///< minimum latency
    double lat_p99_us = 0;      ///< 99th percentile (nearest rank)
    double lat_max_us = 0;      ///< maximum latency
    double lat_avg_us = 0;      ///< mean latency
    /// The latency distribution: the latency at each of lat_cdf_quantiles() (nearest rank);
    /// JSON "lat_cdf_us". Empty without samples.
    std::vector<double> lat_cdf_us;
    bool verified = false;       ///< --verify ran on this row (JSON "verify" object)
    bool verify_data = true;     ///< the workload's data could be checked (false: dma_read_bw)
    uint64_t bytes_checked = 0;  ///< destination bytes (and atomic results) compared with the expected data
    uint64_t mismatches = 0;     ///< of those, bytes that differed
    uint64_t bad_completions =
        0;                   ///< completions with a wrong opcode, byte_len, wr_id, QP or order (DMA: errors)
    bool datagrams = false;  ///< unreliable messages the receiver counts (ud_send_bw): datagrams_* valid
    uint64_t datagrams_sent = 0;       ///< messages the client sent (the figures' messages, every QP's)
    uint64_t datagrams_lost = 0;       ///< of those, messages the server never received (no retransmission);
                                       ///< mcast_bw: summed over the receivers
    uint64_t datagrams_delivered = 0;  ///< datagrams the receivers took (mcast_bw: all receivers together)
    unsigned receivers = 0;            ///< mcast_bw: receiving nodes (node1 ..); 0 for other workloads
    std::vector<uint64_t> lost_per_receiver;  ///< mcast_bw: datagrams node1, node2, ... never received
    bool srq = false;                         ///< srq_bw, ud_srq_bw: the srq_* fields are valid
    unsigned srq_qps = 0;                     ///< node1's QPs sharing the SRQ
    uint64_t srq_wqes_taken = 0;              ///< node1's wqe_fetcher.srq_taken during the size
    uint64_t srq_rnr_naks = 0;  ///< node1's transport_engine.rnr_naks_sent during the size (RC: SRQ empty)
    uint64_t srq_empty = 0;     ///< node1's wqe_fetcher.srq_empty during the size (UD: datagrams dropped)
    /// Bandwidth rows: each unit's busy fraction of the measured interval (its *_busy_ps counters'
    /// increase / the interval), e.g. {"node0 link tx", 0.99}; JSON "util".
    std::vector<std::pair<std::string, double>> util;
    /// write_lat, send_lat: where the latency goes, one way (us, each stage the mean of both
    /// directions of the traced round trip; the stages sum to about the reported latency);
    /// JSON "breakdown_us", a line under the table.
    std::vector<std::pair<std::string, double>> breakdown;
    /// Many-node workloads (incast, alltoall, ...): flows, fairness, drops; JSON "fabric".
    std::optional<fabric_result> fabric;
    /// Bandwidth rows with --threads N > 1: each thread's figures (JSON "threads", a line under
    /// the table); empty otherwise.
    std::vector<thread_result> threads;
    /// The counters that changed while this size was measured and by how much (JSON "counters");
    /// over a phase's sizes they sum to its run_report::measured_counters. Empty where a
    /// workload does not measure phases (dma_*, mr_scale).
    std::vector<std::pair<std::string, uint64_t>> counters;
};

/// Everything a run reports.
struct run_report {
    std::string workload;              ///< workload name ("demo" if none)
    std::vector<size_result> results;  ///< one per size, in run order
    uint64_t sim_time_ns = 0;          ///< simulated time at the end of the run
    double wall_s = 0;                 ///< host wall time of the simulation (JSON only, never the table)
    double traffic_wall_s = 0;         ///< host wall time of this phase's traffic (setup excluded; JSON only)
    uint64_t wire_packets = 0;         ///< packets that crossed the fabric
    uint64_t seed = 0;                 ///< run seed
    unsigned qps = 1;                  ///< queue pairs of the run (--qps)
    unsigned threads = 1;              ///< node0's application threads (--threads; JSON only when > 1)
    std::string op;                    ///< msg_rate: workload.op (write|read|send|ud_send); empty otherwise
    std::string op_workload;           ///< msg_rate: the bandwidth workload that ran it (write_bw, ...)
    std::string verify_failure;  ///< --verify: the first mismatch or bad completion, in words; empty = none
    /// Every counter and every parameter at the end of the run (captured before the model is
    /// torn down). Empty: write_json reads the live registries instead.
    std::vector<std::pair<std::string, uint64_t>> counters;
    std::vector<std::pair<std::string, std::string>> config;
    /// The counters that changed over this phase's measured part (the interval of sim_time_ns
    /// and wire_packets: setup excluded) and by how much; empty where a workload does not
    /// measure phases (dma_*, qp_scale).
    std::vector<std::pair<std::string, uint64_t>> measured_counters;
};

/// Prints a perftest-like table. Deterministic: no wall-clock values.
void print_table(std::ostream& os, const run_report& r);

/// print_table a piece at a time, as a run measures it: begin() when the phase starts (the
/// title; msg_rate's names its iterations and waits for the first row), row() for each size
/// (with a column header when the kind of row changes), end() once the report is complete
/// (simulated time and the lines under the table). Together they print what print_table does.
class table_printer {
public:
    explicit table_printer(std::ostream& os) : os_(os) {}
    void begin(const run_report& r);
    /// `s` is a row of `r` (its last so far, when streaming).
    void row(const run_report& r, const size_result& s);
    void end(const run_report& r);

private:
    void title(const run_report& r);
    std::ostream& os_;
    bool titled_ = false, have_header_ = false, header_latency_ = false;
};

/// The stats JSON of a run (results, sim summary, every counter, every param). Several phases of
/// one run (the demo): "workload" is "demo" and each result names its workload.
nlohmann::ordered_json to_json(const std::vector<run_report>& reports);
/// Writes to_json to `path`. Throws config_error if the file cannot be written.
void write_json(const std::string& path, const run_report& r);
void write_json(const std::string& path, const std::vector<run_report>& reports);
/// The date a stats JSON records: SOURCE_DATE_EPOCH (seconds since 1970, the reproducible-builds
/// convention) if set, else now; ISO 8601 UTC, "2026-12-06T13:52:30Z". Throws config_error when
/// SOURCE_DATE_EPOCH is not a whole number of seconds.
std::string run_date();
/// `stats` with {"run": {"version", "command_line", "date"}} first: what wrote the file, how
/// and when (the only part, with the wall-clock figures, that two runs of one configuration
/// and seed may differ in).
nlohmann::ordered_json with_run(nlohmann::ordered_json stats, const std::vector<std::string>& command_line,
                                const std::string& date);
/// Writes a JSON value to `path` (2-space indent; an output_file: whole or not at all). Throws
/// config_error "<what>: cannot write '<path>': <reason>" if it cannot be written.
void write_json_file(const std::string& path, const nlohmann::ordered_json& j,
                     const char* what = "--stats-json");

/// --report DIR: `runs` is an array of stats JSON objects (to_json), one per run of a sweep.
/// Writes DIR/results.csv (one row per workload, QP count and size; its last column the run's
/// threads), DIR/results.json ({"runs": runs}), DIR/flows.csv when a many-node workload ran (one
/// row per flow: its throughput) and, with gnuplot, DIR/plots.gp and the PNG plots that have
/// data: bandwidth.png and msg_rate.png (bandwidth rows vs size), latency.png (latency rows vs
/// size, a log axis over a wide range), breakdown.png (the latency rows' breakdown_us stacked per
/// size), latency_cdf.png (their lat_cdf_us), threads.png (message rate and bandwidth vs
/// application threads, when the runs differ in threads) or else qps.png (the same vs QPs, when
/// they differ in QPs), utilisation.png (the units' busy fractions of each bandwidth row) and
/// flows.png (per-flow throughput of the many-node runs); several series of one kind number
/// their plots (utilisation_0.png, ...), one size draws bars. Each title names the runs'
/// configuration (docs/usage.md, "Sweeps and reports"). Returns the PNG files written; `warning`
/// is set (and nothing plotted) when gnuplot is not installed or fails; what gnuplot warns of
/// goes to stderr. Throws config_error when DIR cannot be created or written.
std::vector<std::string> write_report(const std::string& dir, const nlohmann::ordered_json& runs,
                                      std::string& warning);

/// Whether a file named `name` is one a --report directory holds: results.json, results.csv,
/// flows.csv, plots.gp or a PNG plot (--report --replace replaces these and refuses others).
bool report_file(const std::string& name);

/// A quantile as a fraction num / den (exact: ranks are computed in integers).
struct quantile {
    unsigned num, den;
    double value() const { return double(num) / double(den); }
};
/// The quantiles of a latency row's distribution (lat_cdf_us): 0 (the minimum), 0.01, 0.02, ...,
/// 0.99, 0.999 and 1 (the maximum).
const std::vector<quantile>& lat_cdf_quantiles();

/// Latency row from per-iteration samples (microseconds): typical = median, p99 nearest rank,
/// the distribution at lat_cdf_quantiles() (nearest rank).
size_result latency_stats(uint64_t size, const std::vector<double>& samples_us);

}  // namespace hcasim
