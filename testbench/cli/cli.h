// Command line of the hcasim executable: perftest-like workload options plus configuration.
#pragma once
#include "model/core/rank_comm.h"
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "model/core/timeline.h"

namespace hcasim {

/// One --sweep other than size: `qps`, `threads` or a configuration key, and its values.
struct sweep_dimension {
    std::string key;
    std::vector<std::string> values;
};

/// Everything the command line selects. Configuration values stay text until params resolve them.
struct run_options {
    std::vector<std::string> configs;  ///< --config files or preset names, in order
    std::vector<std::string> sets;     ///< --set key=value overrides, in order (applied after configs)
    std::vector<std::string> logs;     ///< --log MODULE=LEVEL settings, in order
    std::string workload;              ///< one of workload_names(); empty = demo
    std::vector<uint64_t> sizes;       ///< message sizes in bytes (--size); empty unless given
    uint64_t iters = 1000;             ///< iterations per size (--iters)
    unsigned qps = 1;                  ///< queue pairs (--qps)
    unsigned threads = 1;              ///< node0's application threads (--threads)
    unsigned mtu = 4096;               ///< path MTU in bytes (--mtu)
    std::string stats_json;            ///< --stats-json output path; empty = none
    uint64_t seed = 1;                 ///< run seed (--seed); also link fault injection's (link.seed)
    bool verify = false;               ///< --verify: check every destination byte and completion
    std::string atomic = "fetch_add";  ///< --atomic: fetch_add|cmp_swap (atomic_lat, atomic_rate)
    std::vector<uint64_t> mrs;         ///< --mrs: memory region counts mr_scale sweeps; empty unless given
    std::string mrs_text;              ///< --mrs as given (apply_config sets workload.mrs to it)
    bool help = false;                 ///< --help given (usage already printed)
    bool help_config = false;          ///< --help-config given (print params after elaboration)
    bool version = false;              ///< --version given (print it and exit)
    bool list_presets = false;         ///< --list-presets given (print them and exit)
    bool help_stats = false;           ///< --help-stats given (print counters after elaboration)
    bool sizes_given = false;          ///< --size was on the command line, or sizes holds the
                                       ///< workload's own default (mr_scale: 64,4K)
    bool iters_given = false;          ///< --iters was on the command line
    bool qps_given = false;            ///< --qps was on the command line (srq_bw's default is 16)
    std::vector<unsigned> sweep_qps;   ///< --sweep qps=LIST: one run (a child process) per QP count
    std::vector<unsigned>
        sweep_threads;  ///< --sweep threads=LIST: one run (a child process) per thread count
    /// Every --sweep but size, in command-line order (the first outermost): qps, threads or a
    /// configuration key, each with its values as text. Their cross product gives the points.
    std::vector<sweep_dimension> sweeps;
    /// A sweep point's configuration values (key, value), applied after every --set (origin
    /// "--sweep"); empty outside a point's child process.
    std::vector<std::pair<std::string, std::string>> point;
    unsigned jobs = 0;  ///< --jobs N: points run at once (0: not given, the online cores)
    /// --sweep-index K: run point K of the sweep only (a Slurm array task); -1: not given.
    long sweep_index = -1;
    /// The options that define a sweep's points, in command-line order and canonical form
    /// (`--set=pcie.lanes=8`): every option given but --stats-json, --report, --replace, --jobs and
    /// --sweep-index. A point file records them (hcasim sweep-merge checks and re-parses them) and
    /// an MPI rank starts a point's process with them.
    std::vector<std::string> sweep_options;
    std::string report_dir;     ///< --report DIR: CSV, JSON and PNG plots of the run(s); empty = none
    bool replace = false;       ///< --replace: --report DIR may hold an earlier report (replaced)
    bool speed = false;         ///< --speed: print the simulator's speed after the run (not deterministic)
    uint64_t bench_events = 0;  ///< --bench-events N: only measure the SystemC timed-event rate
    std::string record;         ///< --record FILE: verbs-level trace of the run; empty = none
    std::string timeline;       ///< --timeline FILE: Chrome trace-event JSON of the run; empty = none
    timeline_filter timeline_only;  ///< --timeline-window, --timeline-nodes: what the timeline keeps
    std::string waves;              ///< --waves FILE: FST of the P_Key checker RTL's pins; empty = none
    std::string pcap_dir;           ///< --pcap DIR: one wire capture per cable (docs/traces.md); empty = none
    std::string dump_topology;      ///< --dump-topology FILE: write the fabric and exit; empty = none
    /// --dump-stimulus UNIT=FILE, in order: (UNIT, FILE) with UNIT `hca.cq_writer` (every node)
    /// or `nodeN.hca.cq_writer`; apply_config sets UNIT.dump_stimulus from them.
    std::vector<std::pair<std::string, std::string>> dump_stimulus;
    std::vector<std::string>
        warnings;  ///< options given that the workload uses only in part (printed, not fatal)
    std::vector<std::string> command_line;  ///< argv, for the stats JSON's "run" block
    rank_comm* comm = nullptr;              ///< mpirun -np N without a sweep: the partitioned run's ranks
    std::string date;                       ///< the run's date for that block (run_date), if --stats-json
};

/// Largest --qps (and --sweep qps count): the largest hca.max_qps, 2^24, less the QPs the
/// firmware keeps and the margin a run's hca.max_qps leaves (cli/sweep.cpp's qp_scale, workloads/).
constexpr unsigned max_qps_option = (1u << 24) - 16;
/// Largest --sweep threads count (application threads of one node).
constexpr unsigned max_threads_option = 1024;
/// Largest --iters: a latency run keeps one sample per iteration (80 MB at this count). A
/// bandwidth size's messages over every QP (--iters x --qps) are bounded by it too.
constexpr uint64_t max_iters = 10000000;

/// Whether --iters counts per QP in `workload`, as perftest's -n does with -q (since issue 30):
/// the two-node bandwidth workloads, msg_rate, qp_scale, mr_scale and the demo's write_bw. A
/// latency workload has one QP, the dma_* workloads none; the many-node workloads count per flow.
bool iters_per_qp(const std::string& workload);
/// The messages of one size of `workload` with `iters` per QP over `qps` QPs: iters x qps where
/// --iters counts per QP, else iters. Throws config_error naming --iters and --qps when that
/// exceeds max_iters.
uint64_t phase_messages(const std::string& workload, uint64_t iters, unsigned qps);

/// Parses argv. Prints usage to `help_out` on --help. Throws config_error (one line) on bad input.
run_options parse_cli(int argc, const char* const* argv, std::ostream& help_out);

/// The sizes the workload can send: mr_scale's default sizes, no zero-length mr_scale WRITE,
/// UD's one packet, the atomics' 8 bytes. msg_rate checks them again once workload.op has
/// named its workload. Throws config_error.
void check_sizes(run_options& o);

/// Whether `workload` takes --threads (and --sweep threads): the two-node bandwidth workloads
/// and msg_rate; not the latency, PCIe, mr_scale, qp_scale, attack_suite and many-node ones, nor
/// the demo.
bool threads_workload(const std::string& workload);

/// Parses a --size argument: `N`, `N,M,...`, `A-B` (powers of two from A to B), K/M/G suffixes
/// (binary: 4K = 4096), e.g. "2-8M" or "64,4K". Throws config_error.
std::vector<uint64_t> parse_sizes(const std::string& text);

/// Parses a --mrs argument (memory region counts): the --size syntax, each count >= 1 and at
/// most max_mr_scale_regions. `what` names the option or key in the error. Throws config_error.
std::vector<uint64_t> parse_counts(const std::string& text, const char* what = "--mrs");
/// Largest region count mr_scale takes (per node; each region is at least one 4 KiB page).
constexpr uint64_t max_mr_scale_regions = uint64_t(1) << 20;

/// Loads every --config (a file or a preset by name, resolve_config) into the broker in order,
/// then --mrs (key workload.mrs), --waves (key hca.pkey_checker.waves), --dump-stimulus (key
/// UNIT.dump_stimulus; for `hca.cq_writer`, every node: FILE with `.{node}` before its
/// extension, cq_stimulus_per_node), then every --set.
void apply_config(const run_options& opts);

/// Sets broker key `link.seed` to the run seed (origin "--seed"). Call before apply_config, so
/// that a `link.seed` from a file or --set (later, so it wins) or a node-specific
/// `nodeN.link.seed` (exact keys beat generic ones) overrides it.
void apply_seed(const run_options& opts);

/// The --workload names, in help order.
const std::vector<std::string>& workload_names();

/// Transport of a two-node workload's QPs (perftest -c RC|UC|UD; RD, which perftest lacks). A
/// datagram workload sends each message as one packet, so its sizes are limited to the MTU; a
/// reliable datagram (RD) message is acknowledged like RC's and may span packets.
enum class transport { rc, uc, ud, rd };
/// The transport `workload` runs on: ud_send_lat, ud_send_bw, mcast_bw and ud_srq_bw UD,
/// uc_write_bw UC, rd_send_lat and rd_send_bw RD, every other name RC.
transport transport_of(const std::string& workload);
/// The workload names joined with '|' (help and error text).
std::string workload_list();

}  // namespace hcasim
