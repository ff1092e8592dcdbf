// perftest-equivalent workloads on the model: write_lat, send_lat, read_lat, atomic_lat,
// write_bw, send_bw, read_bw, atomic_rate (two nodes, RC, through the verbs API), ud_send_lat,
// ud_send_bw (UD, ib_send_* -c UD), mcast_bw (UD multicast from node0 to every other node of the
// fabric, ib_send_bw -c UD -M), uc_write_bw (UC, ib_write_bw -c UC) and dma_read_bw,
// dma_write_bw (the PCIe link alone); srq_bw, ud_srq_bw (send_bw, ud_send_bw with node1's QPs
// attached to one shared receive queue); mr_scale, write_bw over N memory regions per node
// (workload.mrs, --mrs) for the translation caches, which also prints its own table. Semantics
// follow perftest (calibration.md): *_lat ping-pongs report half the round trip, read_lat/atomic_lat
// the whole round trip of one READ / atomic (typical = median); *_bw stream with a transmit depth
// and report bytes / time, atomic_rate the message rate. --verify checks the data and completions.
// The many-node workloads (incast, alltoall, permutation, uniform_random, bisection, hotspot) run
// flows between every node of the fabric (many.h; docs/fabric.md).
#pragma once
#include "model/core/rank_comm.h"
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/core/timeline.h"
#include "testbench/cli/report.h"

namespace hcasim {

class machine;

struct phase_spec {
    std::string workload;         ///< a name of workload_names() (cli.h)
    std::vector<uint64_t> sizes;  ///< message sizes, bytes
    /// Iterations per size: a latency phase's ping-pongs; a bandwidth phase's messages over every
    /// QP (the CLI gives --iters x --qps: --iters counts per QP), QP q sending its share
    /// (perftest::quota_of); a many-node phase's messages per flow.
    uint64_t iters = 1000;
};

/// Where a run is, for a progress display (run_observer::progress).
struct run_progress {
    std::string workload;          ///< the phase's
    size_t size_index = 0;         ///< the size being measured, 0-based, of the phase's `sizes`
    size_t sizes = 0;              ///< sizes of the phase
    uint64_t size = 0;             ///< its message size, bytes
    uint64_t done = 0, total = 0;  ///< iterations (latency) or messages (bandwidth) of the size done, of
    const char* unit = "iters";    ///< what done and total count: "iters", "messages" or "transfers"
    uint64_t sim_ns = 0;           ///< simulated time now
    double fraction = 0;           ///< of the whole run's work done, an estimate (0 .. 1)
};

/// Told what a run measures as it measures it (the CLI prints each row at once and, on a
/// terminal, a progress line). Called from the simulation's own thread, from the runner's loops
/// (a size's start and end, every so many iterations or completions): never per packet.
class run_observer {
public:
    virtual ~run_observer() = default;
    /// A phase starts measuring: its report holds the workload and the seed.
    virtual void phase_begin(const run_report&) {}
    /// A size's row is complete (the second argument, the last of the report's results).
    virtual void row(const run_report&, const size_result&) {}
    /// The phase's report is complete (simulated time, wire packets, measured counters).
    virtual void phase_end(const run_report&) {}
    /// Where the run is: at each size's start and after every percent of its total.
    virtual void progress(const run_progress&) {}
};

struct run_spec {
    std::vector<phase_spec> phases;  ///< run one after the other in one simulation
    unsigned qps = 1;                ///< QPs used by bandwidth workloads (round robin)
    unsigned threads = 1;  ///< bandwidth workloads: node0's application threads (QP q: q mod threads)
    unsigned mtu = 4096;   ///< path MTU, bytes
    uint64_t seed = 1;
    bool verify = false;               ///< --verify: check every destination byte and completion
    std::string atomic = "fetch_add";  ///< atomic_lat/atomic_rate operation: fetch_add|cmp_swap
    std::string record;                ///< --record: write a verbs-level trace of the run here ("": none)
    std::string timeline;              ///< --timeline: write a Chrome trace-event timeline here ("": none)
    timeline_filter timeline_only;     ///< --timeline-window, --timeline-nodes: what the timeline keeps
    std::string pcap_dir;              ///< --pcap: capture every cable into this directory; empty = none
    /// --dump-topology: elaborate, write the fabric here (ibnetdiscover's format) and return
    /// without simulating; empty = none. No phases: the machine alone, without a workload.
    std::string dump_topology;
    /// Hears each phase, row and the progress as the run measures them (null: nobody). mr_scale
    /// prints its own table after the run, its phase's table after it: the observer hears neither.
    run_observer* observer = nullptr;
    /// A partitioned run (mpirun -np N, docs/fabric.md "Partitioned runs"): the ranks; nullptr
    /// in one process. Only rank 0 returns reports.
    rank_comm* comm = nullptr;
};

/// A run that could not complete (a completion error, a stall); the message says which.
struct workload_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

bool is_pcie_workload(const std::string& name);
/// srq_bw (RC) and ud_srq_bw (UD): node1's receiving QPs share one shared receive queue.
bool is_srq_workload(const std::string& name);
/// incast, alltoall, permutation, uniform_random, bisection, hotspot: every node of the fabric
/// runs its part (many.h).
bool is_many_node_workload(const std::string& name);

/// --verify. Every message (or, in bandwidth workloads, every QP's buffer) carries data derived
/// from (seed, node, QP, phase and size, message), so a byte from another message, QP, size or
/// offset differs from the expected one.
namespace verify {

/// Key of the data one node sends on one QP in one message; `step` numbers the sizes of a run.
uint64_t data_key(uint64_t seed, unsigned node, unsigned qp, uint64_t step, uint64_t message);
/// The data keyed `key` at message offsets [0, n).
void fill(uint64_t key, uint8_t* dst, uint64_t n);
/// A 64-bit value derived from `key` (atomic operands and initial values).
uint64_t value(uint64_t key);

/// Where a check looked, for the failure text.
struct where {
    const char* workload = "";  ///< the phase's workload
    uint64_t size = 0;          ///< message size, bytes
    unsigned node = 0;          ///< node whose memory or completion queue was checked
    unsigned qp = 0;            ///< QP index on that node (0 .. --qps - 1)
    uint64_t message = 0;       ///< message (iteration) on that QP
    const char* what = "";      ///< "receive buffer", "fetched value", "send completion", ...
};

/// An atomic on a word several QPs share (atomic_rate, workload.atomic_word shared): its QP and
/// message, the value it fetched, its operand (the addend, or the swap value).
struct shared_atomic {
    unsigned qp;
    uint64_t message, fetched, operand;
};

/// Counts what was compared and keeps the first failure in words.
class checker {
public:
    /// Compares n bytes of `actual` with the data keyed `key` (the last byte replaced by `last`
    /// when last >= 0). True if equal.
    bool bytes(const where& w, const uint8_t* actual, uint64_t n, uint64_t key, int last = -1);
    /// Compares a 64-bit result (8 bytes checked). True if equal.
    bool value(const where& w, uint64_t actual, uint64_t expected);
    /// The atomics of several QPs on one word, started at `init`: their fetched values must be
    /// those of one serial execution, and the word's final value (`final_value`) the one that
    /// execution leaves.
    /// FETCH_AND_ADD: following fetched values from `init` (each adds its operand) reaches every
    /// atomic once; a lost or doubled update breaks the chain. COMPARE_AND_SWAP (`cas`, each
    /// expecting `init`): the first to fetch `init` swapped, every other fetches its swap value.
    /// 8 bytes checked per atomic and for the word; `w` gives the workload and size.
    void shared_word(const where& w, bool cas, uint64_t init, const std::vector<shared_atomic>& ops,
                     uint64_t final_value);
    /// Counts a completion with a wrong field; `why` says which ("opcode 0, expected 128").
    void bad_completion(const where& w, const std::string& why);
    /// Counts `n` of `sent` messages that never arrived (UD datagrams; w.message is not used).
    void lost(const where& w, uint64_t n, uint64_t sent);

    uint64_t bytes_checked = 0;    ///< bytes compared
    uint64_t mismatches = 0;       ///< bytes that differed
    uint64_t bad_completions = 0;  ///< completions with a wrong field
    uint64_t lost_messages = 0;    ///< messages that never arrived
    std::string first_failure;     ///< empty until something is wrong

private:
    void failed(const where& w, const std::string& detail);
    std::vector<uint8_t> expected_;
    uint64_t expected_key_ = 0, expected_n_ = 0;
    int expected_last_ = -1;
};

}  // namespace verify

/// --timeline (spec.timeline): every node's HCA and PCIe link write to it (null without the
/// option). run() and `hcasim serve` attach it before simulating.
std::unique_ptr<timeline> attach_timeline(const run_spec& spec, machine* m);
/// --pcap, after the simulation: closes the captures (machine::capture_to) and prints where they
/// are on stdout. Throws config_error on a write error.
void close_captures(machine& m, rank_comm* comm = nullptr);

/// Elaborates the configured machine, runs every phase, and returns one report per phase.
/// Configuration must already be in the broker. Must be called once per process.
/// If `help_out` is given, elaborates, fills it with every parameter and counter (for
/// --help-config, --help-stats) and returns without simulating.
/// `failure`: when given, a failure after the simulation started is returned there (and the
/// reports so far) instead of thrown: an exception thrown after SystemC's coroutines ran upsets
/// AddressSanitizer's stack bookkeeping (a false stack-buffer-overflow report).
std::vector<run_report> run(const run_spec& spec, elaboration_help* help_out = nullptr,
                            std::string* failure = nullptr);

}  // namespace hcasim
