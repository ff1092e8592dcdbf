// Command-line parsing with Boost.Program_options; see cli.h.
#include "cli.h"

#include <boost/program_options.hpp>

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/hca/cq_stimulus.h"
#include "testbench/cli/presets.h"
#include "testbench/workloads/msg_rate.h"
#include "testbench/workloads/workloads.h"

namespace po = boost::program_options;

namespace hcasim {

namespace {

/// Whole-string decimal unsigned integer, or nullopt.
std::optional<uint64_t> to_uint(const std::string& s) {
    uint64_t v = 0;
    if (s.empty()) return std::nullopt;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v, 10);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size()) return std::nullopt;
    return v;
}

uint64_t option_uint(const char* opt, const std::string& text, uint64_t lo, uint64_t hi) {
    const auto v = to_uint(text);
    if (!v || *v < lo || *v > hi)
        throw config_error(std::string("--") + opt + ": expected an integer in [" + std::to_string(lo) + "," +
                           std::to_string(hi) + "], got '" + text + "'");
    return *v;
}

/// One size (or count) with optional K/M/G (binary) suffix; `what` and `noun` name it in errors.
uint64_t one_size(const std::string& whole, const std::string& s, const char* what = "--size",
                  const char* noun = "size") {
    std::string digits = s;
    uint64_t mult = 1;
    if (!digits.empty()) {
        switch (digits.back()) {
        case 'K':
        case 'k': mult = 1ull << 10; break;
        case 'M':
        case 'm': mult = 1ull << 20; break;
        case 'G':
        case 'g': mult = 1ull << 30; break;
        default: break;
        }
        if (mult != 1) digits.pop_back();
    }
    const auto v = to_uint(digits);
    if (!v || *v > std::numeric_limits<uint64_t>::max() / mult)
        throw config_error(std::string(what) + " '" + whole + "': bad " + noun + " '" + s +
                           "' (expected N, N,M,... or A-B with K/M/G suffixes)");
    return *v * mult;
}

/// `N`, `N,M,...` and `A-B` (powers of two from A to B) lists of --size and --mrs.
std::vector<uint64_t> parse_list(const std::string& text, const char* what, const char* noun) {
    std::vector<uint64_t> out;
    std::size_t start = 0;
    while (true) {
        const auto comma = text.find(',', start);
        const std::string item =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const auto dash = item.find('-');
        if (dash == std::string::npos) {
            out.push_back(one_size(text, item, what, noun));
        } else {
            const uint64_t a = one_size(text, item.substr(0, dash), what, noun);
            const uint64_t b = one_size(text, item.substr(dash + 1), what, noun);
            if (a == 0 || (a & (a - 1)) != 0 || a > b)
                throw config_error(std::string(what) + " '" + text + "': range '" + item +
                                   "' needs a power-of-two start no larger than its end");
            for (uint64_t s = a; s <= b; s *= 2) {
                out.push_back(s);
                if (s > b / 2) break;  // next doubling would pass b (or overflow)
            }
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return out;
}

}  // namespace

namespace {

/// The --workload names, in help order, and their transports (datagram workloads send each
/// message as one packet).
struct workload_entry {
    const char* name;
    transport tr;
};
// clang-format off
const workload_entry workload_table[] = {
    {"write_lat", transport::rc},    {"send_lat", transport::rc},    {"read_lat", transport::rc},
    {"atomic_lat", transport::rc},   {"write_bw", transport::rc},    {"send_bw", transport::rc},
    {"read_bw", transport::rc},      {"atomic_rate", transport::rc}, {"ud_send_lat", transport::ud},
    {"ud_send_bw", transport::ud},   {"uc_write_bw", transport::uc}, {"mcast_bw", transport::ud},
    {"srq_bw", transport::rc},       {"ud_srq_bw", transport::ud},   {"mr_scale", transport::rc},
    {"qp_scale", transport::rc},     {"dma_read_bw", transport::rc}, {"dma_write_bw", transport::rc},
    {"attack_suite", transport::rc},
    // Reliable datagram (IBA 10.2.2.2): RD QPs sending through EE contexts (workload.eecs).
    {"rd_send_lat", transport::rd}, {"rd_send_bw", transport::rd},
    // workload.op picks the bandwidth workload it runs (and its transport): write_bw by default.
    {"msg_rate", transport::rc},
    // The many-node workloads (workload.transport picks theirs: RC unless it says UC or UD).
    {"incast", transport::rc}, {"alltoall", transport::rc}, {"permutation", transport::rc},
    {"uniform_random", transport::rc}, {"bisection", transport::rc}, {"hotspot", transport::rc},
};
// clang-format on

}  // namespace

const std::vector<std::string>& workload_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const workload_entry& e : workload_table) v.push_back(e.name);
        return v;
    }();
    return names;
}

bool threads_workload(const std::string& w) {
    const bool latency = w.size() > 4 && w.compare(w.size() - 4, 4, "_lat") == 0;
    return !w.empty() && !latency && !is_pcie_workload(w) && w != "mr_scale" && w != "attack_suite" &&
           w != "qp_scale" && !is_many_node_workload(w);
}

transport transport_of(const std::string& workload) {
    for (const workload_entry& e : workload_table)
        if (workload == e.name) return e.tr;
    return transport::rc;  // the demo
}

std::string workload_list() {
    std::string s;
    for (const auto& n : workload_names()) s += (s.empty() ? "" : "|") + n;
    return s;
}

std::vector<uint64_t> parse_sizes(const std::string& text) { return parse_list(text, "--size", "size"); }

std::vector<uint64_t> parse_counts(const std::string& text, const char* what) {
    std::vector<uint64_t> out = parse_list(text, what, "count");
    for (uint64_t n : out)
        if (n == 0 || n > max_mr_scale_regions)
            throw config_error(std::string(what) + " '" + text + "': " + std::to_string(n) +
                               " regions (expected 1 to " + std::to_string(max_mr_scale_regions) + ")");
    return out;
}

namespace {

/// The options in their groups (--help prints them in this order), their arguments and help lines.
void describe_options(po::options_description& desc) {
    const std::string workload_help =
        "write_lat|send_lat|read_lat|atomic_lat, write_bw|send_bw|read_bw|atomic_rate (RC), "
        "ud_send_lat|ud_send_bw (UD), mcast_bw (UD multicast, node0 to every other node), uc_write_bw (UC), "
        "srq_bw|ud_srq_bw (SEND over --qps QPs into one shared receive queue, RC|UD), "
        "rd_send_lat|rd_send_bw (reliable datagram: RD QPs through workload.eecs EE contexts), mr_scale, "
        "qp_scale (64 B write_bw and read_bw at 1..16K QPs, one process per point), "
        "msg_rate (64 B message rate of workload.op=write|read|send|ud_send; --qps, --sweep qps), "
        "dma_read_bw|dma_write_bw, attack_suite (protection attack cases, docs/attack-suite.md), "
        "incast|alltoall|permutation|uniform_random|bisection|hotspot (every node of the fabric, "
        "docs/fabric.md) (default: demo)";
    po::options_description workloads("Workloads", 110), configuration("Configuration", 110),
        outputs("Outputs", 110), information("Information", 110);
    // clang-format off
    workloads.add_options()
        ("workload,w", po::value<std::string>(), workload_help.c_str())
        ("size", po::value<std::string>(), "message sizes: N, N,M,..., A-B (powers of two); K/M/G suffixes, e.g. 2-8M")
        ("iters,n", po::value<std::string>(), "iterations per size (default 1000); bandwidth workloads: per QP, as "
                                              "perftest's -n with -q (since issue 30); many-node workloads: per flow")
        ("qps,q", po::value<std::string>(), "number of queue pairs (default 1; srq_bw, ud_srq_bw: 16)")
        ("threads", po::value<std::string>(), "bandwidth workloads: the client's application threads (default 1), each "
                                              "on a core of its own (at most cpu.cores) with its own CQ; QP q runs on "
                                              "thread q mod N")
        ("mtu,m", po::value<std::string>(), "path MTU: 256|512|1024|2048|4096 (default 4096); UD: the largest message")
        ("seed", po::value<std::string>(), "run seed (default 1); also seeds link fault injection (link.seed)")
        ("verify", "check every destination byte and completion; exit 1 on the first mismatch")
        ("atomic", po::value<std::string>(), "atomic_lat/atomic_rate operation: fetch_add|cmp_swap (default fetch_add)")
        ("mrs", po::value<std::string>(), "mr_scale: memory region counts to sweep, --size syntax (default 1,16,256,1K,4K,16K,64K; "
                                          "same as --set workload.mrs=LIST)")
        ("sweep", po::value<std::vector<std::string>>()->composing(),
         "sweep a dimension: size=LIST (the same as --size), qps=LIST (one run per QP count), threads=LIST "
         "(one run per --threads count, each with --qps QPs or one per thread) or KEY=LIST for any configuration "
         "key (one run per value, applied as a --set after the others; nodeN./linkN. prefixes as --set), e.g. "
         "size=2..8M, qps=1..16K, pcie.lanes=4,8,16, link.width=1,4; LIST: comma-separated, A..B the powers of "
         "two from A to B (size, qps, threads: K/M/G suffixes as --size). Repeatable, one per dimension: several give their cross product, the first "
         "outermost")
        ("jobs,j", po::value<std::string>(), "run up to N points of a sweep (and qp_scale) at once, each in its own "
                                             "process (default: the online cores); the output is the same for any N")
        ("sweep-index", po::value<std::string>(), "run only point K (0, 1, ... in the order the sweep prints them) of the "
                                                  "--sweep, e.g. a Slurm array task's; its --stats-json is a point file "
                                                  "that hcasim sweep-merge joins with the others (docs/usage.md)");
    configuration.add_options()
        ("config,c", po::value<std::vector<std::string>>()->composing(), "load an INI configuration file, or a preset by name "
                                                                         "(--config hdr-cx6; --list-presets) (repeatable; later files win)")
        ("set,s", po::value<std::vector<std::string>>()->composing(), "override one key: --set node1.pcie.lanes=8 (repeatable; beats --config)")
        ("log", po::value<std::vector<std::string>>()->composing(), "log a module's decisions to standard error, e.g. --log node0.hca.transport_engine=debug; MODULE may be a glob and without nodeN names every node; LEVEL off|info|debug (repeatable; docs/usage.md)");
    outputs.add_options()
        ("stats-json", po::value<std::string>(), "write results, counters and configuration as JSON to FILE")
        ("report", po::value<std::string>(), "write DIR/results.csv, DIR/results.json and PNG plots (gnuplot) of the run; "
                                             "DIR must be new or empty unless --replace")
        ("replace", "--report DIR may hold an earlier report: its files are replaced and the report files the "
                    "new one does not write (a stale plot) removed; other files in DIR are still refused")
        ("record", po::value<std::string>(), "write a verbs-level trace of the run to FILE (every verbs call, completion "
                                             "and event, memory digests; replay it with hcasim replay FILE; traces/README.md)")
        ("timeline", po::value<std::string>(), "write a timeline of the run to FILE as Chrome trace-event JSON (Perfetto, "
                                               "chrome://tracing): per node, tracks for the HCA's stages, the port, the CQ "
                                               "writer and PCIe, a span per packet, transaction and CQE")
        ("timeline-window", po::value<std::string>(), "--timeline keeps only START_NS:END_NS of simulated time (spans "
                                                      "overlapping it; either end may be left out)")
        ("timeline-nodes", po::value<std::string>(), "--timeline keeps only these nodes, e.g. 0,1")
        ("waves", po::value<std::string>(), "write the pins of every unit run as RTL (--set hca.pkey_checker.impl=rtl|both, "
                                            "hca.cq_writer.impl=rtl|both) to FILE as FST (GTKWave); same as --set "
                                            "hca.pkey_checker.waves=FILE --set hca.cq_writer.waves=FILE (docs/cosim.md)")
        ("dump-stimulus", po::value<std::vector<std::string>>()->composing(),
         "UNIT=FILE: record the unit's transactions at its RTL pins (inputs, expected host memory writes with their "
         "responses, answers) as text a SystemVerilog or cocotb testbench reads; UNIT hca.cq_writer (every node, "
         "each to FILE with .nodeN before the extension) or nodeN.hca.cq_writer (that node, to FILE); repeatable; "
         "same as --set UNIT.dump_stimulus=FILE (docs/cosim.md)")
        ("pcap", po::value<std::string>(), "write one wire capture per cable to DIR/link<N>.pcap (and DIR/link_sm.pcap), "
                                           "every packet from LRH through VCRC with its simulated time, for "
                                           "Wireshark/tshark (docs/traces.md)")
        ("dump-topology", po::value<std::string>(), "write the configured fabric (switches, hosts, cables, LIDs) to FILE in the "
                                                    "format ibnetdiscover prints, and exit without running the workload; "
                                                    "fabric.topology=file reads it back (docs/fabric.md)")
        ("speed", "after the run, print the simulator's speed: wire packets per wall second, slowdown, and cost per "
                  "packet in SystemC timed-event equivalents (measured by --bench-events in a child process)");
    information.add_options()
        ("help,h", "print this help and exit")
        ("help-config", "list every configuration key with type, unit, default and help, and exit")
        ("help-stats", "list every counter of the stats JSON with its unit and meaning, and exit")
        ("version", "print the version (hcasim VERSION) and exit")
        ("list-presets", "list the presets --config finds by name, one line each, and exit")
        ("bench-events", po::value<std::string>(), "only measure this machine's raw SystemC timed-event rate over N events "
                                                   "(one SC_METHOD re-notified 1 ns ahead) and print it");
    // clang-format on
    desc.add(workloads).add(configuration).add(outputs).add(information);
}

/// --sweep threads=LIST: the thread counts (sweep.cpp runs one child per count).
void parse_threads_sweep(const std::string& list, bool threads_given, run_options& o) {
    if (!o.sweep_qps.empty() || !o.sweep_threads.empty())
        throw config_error(
            "--sweep threads=...: one dimension per run (another --sweep qps or threads is given)");
    if (threads_given)
        throw config_error("--sweep threads=...: the thread count is already given (--threads)");
    for (uint64_t n : parse_list(list, "--sweep threads", "thread count")) {
        if (n == 0 || n > max_threads_option)
            throw config_error("--sweep threads: " + std::to_string(n) + " threads (expected 1 to " +
                               std::to_string(max_threads_option) + ")");
        o.sweep_threads.push_back(unsigned(n));
    }
    if (o.workload.empty())
        throw config_error(
            "--sweep threads: give a bandwidth workload (the demo runs write_lat and write_bw)");
    if (!threads_workload(o.workload))
        throw config_error("--sweep threads: " + o.workload +
                           " runs one application thread per node; the bandwidth workloads take --threads");
}

/// --sweep KEY=LIST for a configuration key: the values as given (A..B with whole-number ends:
/// the powers of two from A to B, as --size). The keys and values are checked against the
/// declared parameters before any point runs (sweep.cpp).
std::vector<std::string> config_sweep_values(const std::string& key, const std::string& list) {
    const std::string what = "--sweep " + key;
    std::vector<std::string> values;
    std::size_t start = 0;
    while (true) {
        const auto comma = list.find(',', start);
        const std::string item =
            list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty())
            throw config_error(what + "=" + list + ": an empty value (expected a comma-separated list)");
        const auto dots = item.find("..");
        const auto whole = [](const std::string& end) {  // N with an optional K/M/G suffix
            const size_t digits = end.find_first_not_of("0123456789");
            return !end.empty() && digits != 0 &&
                   (digits == std::string::npos ||
                    (digits + 1 == end.size() &&
                     std::string("KkMmGg").find(end[digits]) != std::string::npos));
        };
        if (dots == std::string::npos) {
            values.push_back(item);
        } else if (!whole(item.substr(0, dots)) || !whole(item.substr(dots + 2))) {
            throw config_error(what + "=" + list + ": '" + item +
                               "': A..B takes whole numbers (the powers of two from A to B)");
        } else {
            for (uint64_t v :
                 parse_list(item.substr(0, dots) + "-" + item.substr(dots + 2), what.c_str(), "value"))
                values.push_back(std::to_string(v));
        }
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    return values;
}

/// The values of a count sweep (qps, threads) as text, for the general sweep.
std::vector<std::string> as_text(const std::vector<unsigned>& counts) {
    std::vector<std::string> v;
    for (unsigned n : counts) v.push_back(std::to_string(n));
    return v;
}

/// --sweep size=LIST, qps=LIST, threads=LIST and KEY=LIST (one per dimension; qps and threads
/// not together). Every dimension but size goes into o.sweeps, in order.
void parse_sweep(const po::variables_map& vm, run_options& o) {
    bool size_swept = false;
    for (const std::string& s : vm["sweep"].as<std::vector<std::string>>()) {
        const auto eq = s.find('=');
        if (eq == std::string::npos || eq == 0)
            throw config_error(
                "--sweep: expected KEY=LIST (size, qps, threads or a configuration key), got '" + s + "'");
        const std::string dim = s.substr(0, eq);
        std::string list = s.substr(eq + 1);
        if (list.empty()) throw config_error("--sweep " + dim + "=: an empty list");
        for (const sweep_dimension& d : o.sweeps)
            if (d.key == dim && dim != "qps" && dim != "threads")
                throw config_error("--sweep " + dim + ": swept twice (one --sweep per key)");
        if (dim != "size" && dim != "qps" && dim != "threads") {
            o.sweeps.push_back({dim, config_sweep_values(dim, list)});
            continue;
        }
        for (size_t p; (p = list.find("..")) != std::string::npos;) list.replace(p, 2, "-");
        if (dim == "size") {
            if (o.sizes_given || size_swept)
                throw config_error(
                    "--sweep size=...: the sizes are already given (--size or another --sweep size)");
            o.sizes = parse_list(list, "--sweep size", "size");
            o.sizes_given = size_swept = true;
        } else if (dim == "qps") {
            if (vm.count("qps") || !o.sweep_qps.empty())
                throw config_error(
                    "--sweep qps=...: the QP count is already given (--qps or another --sweep qps)");
            if (!o.sweep_threads.empty())
                throw config_error("--sweep qps=...: one dimension per run (--sweep threads is given)");
            for (uint64_t n : parse_list(list, "--sweep qps", "QP count")) {
                if (n == 0 || n > max_qps_option)
                    throw config_error("--sweep qps: " + std::to_string(n) + " QPs (expected 1 to " +
                                       std::to_string(max_qps_option) + ")");
                o.sweep_qps.push_back(unsigned(n));
            }
            o.sweeps.push_back({dim, as_text(o.sweep_qps)});
        } else {
            parse_threads_sweep(list, vm.count("threads") > 0, o);
            o.sweeps.push_back({dim, as_text(o.sweep_threads)});
        }
    }
}

/// The first dimension of a multi-process sweep, for the refusals of one-run options: "qps",
/// "threads" or the configuration key.
std::string swept(const run_options& o) { return o.sweeps.empty() ? "" : o.sweeps.front().key; }

/// --sweep-index K: one point of the sweep, K below its number of points; one process, no report.
void parse_sweep_index(const po::variables_map& vm, run_options& o) {
    if (o.sweeps.empty())
        throw config_error(
            o.workload == "qp_scale"
                ? "--sweep-index: qp_scale's points cannot be run one at a time (run "
                  "--workload write_bw --sweep qps=LIST)"
                : "--sweep-index runs one point of a --sweep qps, threads or KEY: give the --sweep");
    uint64_t points = 1;
    for (const sweep_dimension& d : o.sweeps) points *= d.values.size();
    const std::string text = vm["sweep-index"].as<std::string>();
    const auto k = to_uint(text);
    if (!k || *k >= points)
        throw config_error(
            "--sweep-index " + text + ": the sweep has " + std::to_string(points) +
            (points == 1 ? " point (index 0)" : " points (index 0 to " + std::to_string(points - 1) + ")"));
    for (const char* whole_sweep : {"jobs", "report"})
        if (vm.count(whole_sweep))
            throw config_error(std::string("--sweep-index runs one point in this process: --") + whole_sweep +
                               " is for the whole sweep (hcasim sweep-merge joins the points' --stats-json)");
    o.sweep_index = long(*k);
}

/// Options the workload would ignore are refused, naming both (or warned about).
void refuse_ignored_options(const po::variables_map& vm, run_options& o) {
    const bool latency = o.workload.size() > 4 && o.workload.compare(o.workload.size() - 4, 4, "_lat") == 0;
    const bool pcie = o.workload.rfind("dma_", 0) == 0;
    if ((vm.count("qps") || !o.sweep_qps.empty()) && (latency || pcie))
        throw config_error(
            std::string(vm.count("qps") ? "--qps" : "--sweep qps") + ": " + o.workload +
            (pcie ? " moves data over PCIe only and has no QPs"
                  : " times one QP (as perftest's latency tests); the bandwidth workloads take --qps"));
    if (vm.count("threads") && !o.workload.empty() && !threads_workload(o.workload))
        throw config_error("--threads: " + o.workload +
                           " runs one application thread per node; the bandwidth workloads take --threads");
    if (vm.count("mtu") && pcie)
        throw config_error("--mtu: " + o.workload + " moves data over PCIe only (no InfiniBand path MTU)");
    if ((vm.count("qps") || vm.count("mtu")) && o.workload == "attack_suite")
        throw config_error(std::string(vm.count("qps") ? "--qps" : "--mtu") +
                           ": attack_suite runs a fixed table of cases (its own QPs and MTU)");
    if (vm.count("verify") && o.workload == "dma_read_bw")
        o.warnings.push_back(
            "--verify: dma_read_bw discards the data it reads: only its transfers' completions are "
            "checked");
}

/// --dump-topology FILE: the fabric the other options configure, written instead of a run. A
/// workload given is elaborated (its keys checked) but not run; what only a run produces is
/// refused rather than silently not written.
void parse_dump_topology(const po::variables_map& vm, run_options& o) {
    o.dump_topology = vm["dump-topology"].as<std::string>();
    if (o.dump_topology.empty()) throw config_error("--dump-topology: expected a file name");
    if (o.workload == "attack_suite" || o.workload == "qp_scale" || o.workload.rfind("dma_", 0) == 0)
        throw config_error("--dump-topology: " + o.workload +
                           (o.workload.rfind("dma_", 0) == 0
                                ? " runs the PCIe link alone (no fabric)"
                                : " builds machines of its own (write the fabric "
                                  "without --workload)"));
    for (const char* run_only :
         {"stats-json", "report", "record", "timeline", "pcap", "speed", "sweep", "bench-events", "verify"})
        if (vm.count(run_only))
            throw config_error(
                std::string("--dump-topology writes the fabric and exits without running: --") + run_only +
                " has nothing to do");
}

/// --dump-stimulus UNIT=FILE (repeatable): the units whose pins can be dumped, one file each.
void parse_dump_stimulus(const po::variables_map& vm, run_options& o) {
    for (const std::string& s : vm["dump-stimulus"].as<std::vector<std::string>>()) {
        const auto eq = s.find('=');
        if (eq == std::string::npos)
            throw config_error("--dump-stimulus: expected UNIT=FILE (e.g. hca.cq_writer=cq.stim), got '" + s +
                               "'");
        const std::string unit = s.substr(0, eq), file = s.substr(eq + 1);
        const bool generic = unit == "hca.cq_writer";
        const bool one_node = unit.size() > 18 && unit.rfind("node", 0) == 0 &&
                              unit.compare(unit.size() - 14, 14, ".hca.cq_writer") == 0 &&
                              unit.find_first_not_of("0123456789", 4) == unit.size() - 14;
        if (!generic && !one_node)
            throw config_error("--dump-stimulus: unknown unit '" + unit +
                               "' (expected hca.cq_writer or nodeN.hca.cq_writer)");
        if (file.empty()) throw config_error("--dump-stimulus " + unit + "=: expected a file name");
        for (const auto& [u, f] : o.dump_stimulus)
            if (u == unit)
                throw config_error("--dump-stimulus " + unit + ": given twice ('" + f + "', '" + file + "')");
        o.dump_stimulus.emplace_back(unit, file);
    }
    const char* why = nullptr;
    if (!o.sweeps.empty())
        why = "--sweep makes several runs";
    else if (o.workload == "qp_scale")
        why = "qp_scale makes several runs";
    else if (o.workload == "attack_suite")
        why = "attack_suite builds machines of its own";
    else if (o.workload.rfind("dma_", 0) == 0)
        why = "the dma_* workloads run the PCIe link alone (no HCA)";
    else if (!o.dump_topology.empty())
        why = "--dump-topology exits without running";
    else if (vm.count("bench-events"))
        why = "--bench-events runs no HCA";
    if (why) throw config_error(std::string("--dump-stimulus records one run: ") + why);
}

/// The output files and directories (--stats-json, --record, --timeline and its filters,
/// --waves, --pcap), refused where the run cannot write them.
void parse_outputs(const po::variables_map& vm, run_options& o) {
    if (vm.count("stats-json")) {
        o.stats_json = vm["stats-json"].as<std::string>();
        if (o.stats_json.empty()) throw config_error("--stats-json: expected a file name");
    }
    if (vm.count("record")) {
        o.record = vm["record"].as<std::string>();
        if (o.record.empty()) throw config_error("--record: expected a file name");
        static const char* const unrecordable[] = {"mr_scale", "qp_scale", "attack_suite", "dma_read_bw",
                                                   "dma_write_bw"};
        for (const char* w : unrecordable)
            if (o.workload == w)
                throw config_error("--record: " + o.workload +
                                   " cannot be recorded (traces/README.md lists the "
                                   "workloads that can)");
        if (!o.sweeps.empty())
            throw config_error("--record records one run; --sweep " + swept(o) + " makes several");
    }
    if (vm.count("timeline")) {
        o.timeline = vm["timeline"].as<std::string>();
        if (o.timeline.empty()) throw config_error("--timeline: expected a file name");
        if (!o.sweeps.empty() || o.workload == "qp_scale" || o.workload == "attack_suite")
            throw config_error("--timeline records one run; " +
                               std::string(o.workload == "attack_suite"            ? "attack_suite"
                                           : swept(o) == "threads"                 ? "a thread sweep"
                                           : swept(o).empty() || swept(o) == "qps" ? "a QP sweep"
                                                                                   : "--sweep " + swept(o)) +
                               " makes several");
    }
    auto given = [&vm](const char* option) {
        return vm.count(option) ? &vm[option].as<std::string>() : nullptr;
    };
    o.timeline_only =
        timeline_filter::parse(given("timeline-window"), given("timeline-nodes"), vm.count("timeline"));
    if (vm.count("waves")) {
        o.waves = vm["waves"].as<std::string>();
        if (o.waves.empty()) throw config_error("--waves: expected a file name");
        if (o.waves.size() >= 4 && o.waves.compare(o.waves.size() - 4, 4, ".vcd") == 0)
            throw config_error("--waves: '" + o.waves +
                               "': hcasim writes FST (GTKWave opens it); name the file .fst");
    }
    if (vm.count("dump-topology")) parse_dump_topology(vm, o);
    if (vm.count("dump-stimulus")) parse_dump_stimulus(vm, o);
    if (vm.count("pcap")) {
        o.pcap_dir = vm["pcap"].as<std::string>();
        if (o.pcap_dir.empty()) throw config_error("--pcap: expected a directory");
        if (o.workload == "qp_scale" || !o.sweep_qps.empty())
            throw config_error(
                "--pcap captures one simulation; qp_scale and --sweep qps run one per point (run each "
                "QP count on its own)");
        if (!o.sweep_threads.empty())
            throw config_error(
                "--pcap captures one simulation; --sweep threads runs one per point (run each thread count "
                "on its own)");
        if (!o.sweeps.empty())
            throw config_error("--pcap captures one simulation; --sweep " + swept(o) +
                               " runs one per point (run each value on its own)");
        if (o.workload == "attack_suite" || o.workload.rfind("dma_", 0) == 0 || vm.count("bench-events"))
            throw config_error(
                "--pcap: " + (o.workload.empty() ? std::string("--bench-events") : o.workload) +
                " sends nothing over an InfiniBand cable (nothing to capture)");
    }
}

}  // namespace

void check_sizes(run_options& o) {
    const bool atomic = o.workload == "atomic_lat" || o.workload == "atomic_rate";
    const bool mr_scale = o.workload == "mr_scale";
    if (mr_scale) {
        if (!o.sizes_given) {
            o.sizes = {64, 4096};  // a small and a page-sized message (make_spec takes them as given)
            o.sizes_given = true;
        }
        for (uint64_t size : o.sizes)
            if (size == 0)
                throw config_error(
                    "--size: mr_scale needs messages of at least 1 byte (a zero-length "
                    "WRITE translates nothing)");
    }
    // perftest: "Max msg size in UD is MTU". One datagram is one packet; --mtu is at most the
    // port's MTU (4096), so it is the limit.
    if (transport_of(o.workload) == transport::ud)
        for (uint64_t size : o.sizes)
            if (size > o.mtu)
                throw config_error("--size: " + std::to_string(size) + " bytes exceeds the MTU (" +
                                   std::to_string(o.mtu) + " bytes, --mtu): " + o.workload +
                                   " sends each message as one UD datagram");
    if (atomic)
        for (uint64_t size : o.sizes)
            if (size != 8)
                throw config_error("--size: " + o.workload + " moves 8 bytes (64-bit atomics), got " +
                                   std::to_string(size));
}

namespace {

/// --help: the commands first, the option groups (describe_options), then examples (in the
/// layout help2man turns into SYNOPSIS, sections and tagged paragraphs of the man page).
const char* const usage =
    "Usage: hcasim [options]\n"
    "  or:  hcasim serve [options]\n"
    "  or:  hcasim replay FILE [options]\n"
    "  or:  hcasim compare A.json B.json [--tolerance P%]\n"
    "  or:  hcasim sweep-merge OUT.json POINT.json...\n\n"
    "Subcommands (hcasim SUBCOMMAND --help lists its options):\n"
    "  (none)     run a workload; without --workload the demo (write_lat and write_bw, 2 B to 1 MiB)\n"
    "  serve      simulated HCAs for unmodified libibverbs programs (docs/libibverbs.md)\n"
    "  replay     re-run a verbs-level trace and compare its outcome with the recording\n"
    "  compare    two runs' stats JSON side by side with the relative change; exit 1 beyond --tolerance\n"
    "  sweep-merge  the --stats-json of a sweep's points run one at a time (--sweep-index) as the sweep's\n\n"
    "Options, by group";
const char* const examples =
    "Examples:\n"
    "  hcasim --config hdr-cx6 --workload write_bw --size 1M --iters 200\n"
    "      RDMA WRITE bandwidth of 1 MiB messages with the ConnectX-6 class preset (--list-presets)\n"
    "  hcasim --workload write_lat --size 2-4K --set pcie.lanes=8 --stats-json lat.json\n"
    "      latency from 2 B to 4 KiB on a x8 PCIe link; results, counters and configuration as JSON\n"
    "  hcasim --workload write_bw --sweep qps=1..16 --report bw-report\n"
    "      one run per QP count (1, 2, 4, 8, 16), CSV, JSON and plots in bw-report/\n"
    "  hcasim --workload write_bw --size 64K --sweep pcie.lanes=4,8,16 --sweep link.width=1,4 --report "
    "lanes\n"
    "      the cross product of two configuration keys (6 points, run in parallel: --jobs)\n"
    "  hcasim --workload send_bw --size 4K --verify --set link.drop_rate=0.01 --seed 3\n"
    "      a lossy link: retransmission, every byte and completion checked\n"
    "  hcasim --config edr-cx5 --config two-nodes-switch --workload read_lat --timeline t.json\n"
    "      two presets combined (later files win); a Perfetto timeline of the run\n"
    "  hcasim serve --config hdr-cx6 --socket /tmp/hca.sock --sysfs /tmp/hca-sysfs\n"
    "      HCAs for libibverbs programs (scripts/with-simhca.sh sets up their environment)\n"
    "  hcasim replay traces/regression/err_immediate.jsonl\n"
    "      re-run a recorded trace; exit 1 on the first divergence\n"
    "  hcasim compare base.json new.json --tolerance 2%\n"
    "      exit 1 when a result or counter moved by more than 2% (a regression bench in CI)\n\n"
    "Documentation: docs/usage.md (installed: share/doc/hcasim/docs/usage.md), hcasim --help-config\n";

}  // namespace

run_options parse_cli(int argc, const char* const* argv, std::ostream& help_out) {
    po::options_description desc(usage, 110);
    describe_options(desc);
    po::variables_map vm;
    const po::positional_options_description no_positionals;  // stray words are errors
    run_options o;
    try {
        const po::parsed_options parsed = po::command_line_parser(argc, const_cast<char**>(argv))
                                              .options(desc)
                                              .positional(no_positionals)
                                              .run();
        po::store(parsed, vm);
        po::notify(vm);
        for (const po::option& opt : parsed.options) {
            static const char* const not_of_points[] = {"stats-json", "report", "replace", "jobs",
                                                        "sweep-index"};
            if (std::find(std::begin(not_of_points), std::end(not_of_points), opt.string_key) !=
                std::end(not_of_points))
                continue;
            o.sweep_options.push_back("--" + opt.string_key +
                                      (opt.value.empty() ? "" : "=" + opt.value.front()));
        }
    } catch (const po::error& e) {
        throw config_error(std::string("command line: ") + e.what() + " (see --help)");
    }

    o.help = vm.count("help") > 0;
    o.help_config = vm.count("help-config") > 0;
    o.version = vm.count("version") > 0;
    o.list_presets = vm.count("list-presets") > 0;
    o.help_stats = vm.count("help-stats") > 0;
    if (o.help) help_out << desc << "\n" << examples;
    if (vm.count("config")) o.configs = vm["config"].as<std::vector<std::string>>();
    if (vm.count("set")) o.sets = vm["set"].as<std::vector<std::string>>();
    if (vm.count("log")) o.logs = vm["log"].as<std::vector<std::string>>();
    if (vm.count("workload")) {
        o.workload = vm["workload"].as<std::string>();
        const auto& names = workload_names();
        if (std::find(names.begin(), names.end(), o.workload) == names.end())
            throw config_error("--workload: unknown workload '" + o.workload + "' (expected " +
                               workload_list() + ")");
    }
    if (vm.count("size")) {
        o.sizes = parse_sizes(vm["size"].as<std::string>());
        o.sizes_given = true;
    }
    if (vm.count("sweep")) parse_sweep(vm, o);
    if (vm.count("report")) {
        o.report_dir = vm["report"].as<std::string>();
        if (o.report_dir.empty()) throw config_error("--report: expected a directory");
    }
    o.replace = vm.count("replace") > 0;
    if (o.replace && o.report_dir.empty())
        throw config_error("--replace replaces an earlier --report DIR: give --report DIR");
    if (vm.count("jobs")) {
        o.jobs = unsigned(option_uint("jobs", vm["jobs"].as<std::string>(), 1, 1024));
        if (o.sweeps.empty() && o.workload != "qp_scale")
            throw config_error(
                "--jobs runs the points of a --sweep qps, threads or KEY (or qp_scale) at once; this run has "
                "one point");
    }
    if (vm.count("sweep-index")) parse_sweep_index(vm, o);
    o.speed = vm.count("speed") > 0;
    if (vm.count("bench-events")) {
        o.bench_events =
            option_uint("bench-events", vm["bench-events"].as<std::string>(), 1, uint64_t(1) << 40);
        if (vm.count("workload") || o.speed || vm.count("report") || vm.count("sweep"))
            throw config_error(
                "--bench-events runs only the SystemC event benchmark (no --workload, --speed, --sweep "
                "or --report)");
    }
    if (o.speed && !o.sweeps.empty())
        throw config_error(swept(o) == "qps" ? "--speed measures one run; with --sweep qps run each QP count "
                                               "on its own"
                           : swept(o) == "threads"
                               ? "--speed measures one run; with --sweep threads run each "
                                 "thread count on its own"
                               : "--speed measures one run; with --sweep " + swept(o) +
                                     " run each value on its own");
    if (vm.count("iters")) {
        o.iters = option_uint("iters", vm["iters"].as<std::string>(), 1, max_iters);
        o.iters_given = true;
    }
    if (vm.count("qps")) {
        o.qps = static_cast<unsigned>(option_uint("qps", vm["qps"].as<std::string>(), 1, max_qps_option));
        o.qps_given = true;
    }
    if (vm.count("threads"))
        o.threads = static_cast<unsigned>(option_uint("threads", vm["threads"].as<std::string>(), 1, 4096));
    refuse_ignored_options(vm, o);
    if (vm.count("mtu")) {
        const std::string t = vm["mtu"].as<std::string>();
        const auto v = to_uint(t);
        if (!v || (*v != 256 && *v != 512 && *v != 1024 && *v != 2048 && *v != 4096))
            throw config_error("--mtu: expected 256|512|1024|2048|4096, got '" + t + "'");
        o.mtu = static_cast<unsigned>(*v);
    }
    parse_outputs(vm, o);
    if (vm.count("seed"))
        o.seed = option_uint("seed", vm["seed"].as<std::string>(), 0, std::numeric_limits<uint64_t>::max());
    o.verify = vm.count("verify") > 0;
    const bool atomic = o.workload == "atomic_lat" || o.workload == "atomic_rate";
    if (vm.count("atomic")) {
        o.atomic = vm["atomic"].as<std::string>();
        if (o.atomic != "fetch_add" && o.atomic != "cmp_swap")
            throw config_error("--atomic: expected fetch_add|cmp_swap, got '" + o.atomic + "'");
        if (!atomic) throw config_error("--atomic: only atomic_lat and atomic_rate take an atomic operation");
    }
    const bool mr_scale = o.workload == "mr_scale";
    if (vm.count("mrs")) {
        if (!mr_scale) throw config_error("--mrs: only mr_scale takes memory region counts");
        o.mrs_text = vm["mrs"].as<std::string>();
        o.mrs = parse_counts(o.mrs_text, "--mrs");
    }
    if (o.workload == "msg_rate") {
        // Small messages; the default --iters depends on the QP count (run_once).
        if (!o.sizes_given) o.sizes = {workloads::msg_rate_default_size};
        o.sizes_given = true;
    }
    check_sizes(o);
    return o;
}

bool iters_per_qp(const std::string& workload) {
    const bool latency = workload.size() > 4 && workload.compare(workload.size() - 4, 4, "_lat") == 0;
    return !latency && !is_pcie_workload(workload) && !is_many_node_workload(workload) &&
           workload != "attack_suite";
}

uint64_t phase_messages(const std::string& workload, uint64_t iters, unsigned qps) {
    if (!iters_per_qp(workload) || qps <= 1) return iters;
    if (iters > max_iters / qps)
        throw config_error("--iters " + std::to_string(iters) + " with --qps " + std::to_string(qps) + ": " +
                           std::to_string(iters * qps) +
                           " messages per size (--iters counts per QP) exceed the largest total, " +
                           std::to_string(max_iters));
    return iters * qps;
}

void apply_seed(const run_options& opts) {
    broker::instance().set("link.seed", std::to_string(opts.seed), "--seed");
}

void apply_config(const run_options& opts) {
    broker& b = broker::instance();
    for (const auto& path : opts.configs) b.load_ini(resolve_config(path));
    if (!opts.mrs_text.empty()) b.set("workload.mrs", opts.mrs_text, "--mrs");
    if (!opts.waves.empty())
        for (const char* unit : {"hca.pkey_checker.waves", "hca.cq_writer.waves"})
            b.set(unit, opts.waves, "--waves");
    for (const auto& [unit, file] : opts.dump_stimulus)
        b.set(unit + ".dump_stimulus", unit.rfind("node", 0) == 0 ? file : cq_stimulus_per_node(file),
              "--dump-stimulus");
    for (const auto& s : opts.sets) b.set_override(s);
    for (const auto& [key, value] : opts.point) b.set(key, value, "--sweep");
    for (const auto& l : opts.logs) log_settings::instance().set(l);
}

}  // namespace hcasim
