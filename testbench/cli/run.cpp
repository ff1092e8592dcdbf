// The default command: from the parsed options to a run spec, the run (or the sweep, qp_scale,
// the attack suite, --bench-events), its outputs and the exit status.
#include <systemc>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>

#include "model/core/output_file.h"
#include "model/core/param.h"
#include "testbench/attack/attack_suite.h"
#include "testbench/cli/commands.h"
#include "testbench/cli/presets.h"
#include "testbench/cli/progress.h"
#include "testbench/cli/report.h"
#include "testbench/cli/run.h"
#include "testbench/workloads/msg_rate.h"
#include "testbench/workloads/workloads.h"

namespace hcasim {

namespace cli {

namespace {

std::vector<uint64_t> sweep(uint64_t lo, uint64_t hi) {
    std::vector<uint64_t> v;
    for (uint64_t s = lo; s <= hi; s *= 2) v.push_back(s);
    return v;
}

run_spec make_spec(const run_options& o) {
    // IBA: a message is at most 2^31 bytes.
    for (uint64_t size : o.sizes)
        if (size > (uint64_t(1) << 31))
            throw config_error("--size: " + std::to_string(size) +
                               " bytes exceeds the largest message (2147483648 bytes, 2^31)");
    // A zero-byte message carries no flag byte for write_lat to poll, and DMA transfers move data.
    const bool needs_bytes = o.workload.empty() || o.workload == "write_lat" || is_pcie_workload(o.workload);
    for (uint64_t size : o.sizes)
        if (size == 0 && needs_bytes)
            throw config_error("--size: " + (o.workload.empty() ? std::string("the demo") : o.workload) +
                               " needs messages of at least 1 byte");
    run_spec spec;
    // srq_bw, ud_srq_bw: many QPs share one SRQ; 16 unless --qps says otherwise.
    spec.qps = is_srq_workload(o.workload) && !o.qps_given ? 16 : o.qps;
    spec.threads = o.threads;
    spec.mtu = o.mtu;
    spec.seed = o.seed;
    spec.verify = o.verify;
    spec.atomic = o.atomic;
    spec.record = o.record;
    spec.timeline = o.timeline;
    spec.timeline_only = o.timeline_only;
    spec.pcap_dir = o.pcap_dir;
    spec.comm = o.comm;
    spec.dump_topology = o.dump_topology;
    if (o.workload.empty() && !o.dump_topology.empty()) return spec;  // the fabric alone, no phase
    if (o.workload.empty()) {
        // The demo: latency and bandwidth from 2 B to 1 MiB, as `perftest -a` would sweep.
        const auto sizes = o.sizes_given ? o.sizes : sweep(2, 1u << 20);
        spec.phases.push_back({"write_lat", sizes, o.iters_given ? o.iters : 1000});
        spec.phases.push_back(
            {"write_bw", sizes, phase_messages("write_bw", o.iters_given ? o.iters : 1000, spec.qps)});
        return spec;
    }
    phase_spec p;
    p.workload = o.workload;
    const bool lat = o.workload == "write_lat" || o.workload == "send_lat" || o.workload == "read_lat" ||
                     o.workload == "ud_send_lat" || o.workload == "rd_send_lat";
    const bool atomic = o.workload == "atomic_lat" || o.workload == "atomic_rate";
    // perftest defaults: 2 B for latency, 64 KiB for bandwidth (UD: the MTU, perftest's "Max msg
    // size in UD is MTU"); atomics move 8 bytes.
    const uint64_t bw_default = transport_of(o.workload) == transport::ud ? o.mtu : 65536u;
    p.sizes = o.sizes_given ? o.sizes : std::vector<uint64_t>{atomic ? 8u : lat ? 2u : bw_default};
    // A bandwidth phase's messages per size: --iters per QP, as perftest's -n with -q.
    p.iters = phase_messages(o.workload, o.iters, spec.qps);
    spec.phases.push_back(p);
    return spec;
}

void print_help_config(std::ostream& os, const std::vector<param_info>& params) {
    os << "Parameters (set with --config FILE or --set key=value; prefix nodeN. for one node, linkN. for one "
          "cable).\n";
    for (const param_info& p : params) {
        os << "  " << std::left << std::setw(42) << p.key << " " << std::setw(7) << p.type << " default "
           << std::setw(10) << p.def << (p.unit.empty() ? "" : " [" + p.unit + "]") << "\n      " << p.help;
        if (!p.choices.empty()) os << " (" << p.choices << ")";
        if (!p.range.empty()) os << " (allowed " << p.range << ")";
        os << "\n";
    }
}

void print_help_stats(std::ostream& os, const std::vector<counter_info>& counters) {
    os << "Counters (the stats JSON's \"counters\", totals over the whole run; \"measured_counters\", "
          "their changes over the measured phases; and each result's \"counters\", their changes while "
          "that size was measured; N stands for a node's, switch's, port's or cable's number). Units: ps "
          "of simulated time, bytes, cycles of the unit's clock, count (events or items).\n";
    for (const counter_info& c : counters)
        os << "  " << std::left << std::setw(54) << c.pattern << " [" << c.unit << "]\n      " << c.help
           << "\n";
}

/// --help-config, --help-stats: what the elaboration declared.
int print_help(const run_options& o, const elaboration_help& h) {
    if (o.help_config) print_help_config(std::cout, h.params);
    if (o.help_stats) print_help_stats(std::cout, h.counters);
    return 0;
}

/// Whether the run only elaborates and lists (--help-config, --help-stats).
bool help_only(const run_options& o) { return o.help_config || o.help_stats; }

/// --workload attack_suite: one line per case and the summary; 0 if every case was rejected as
/// expected and no target byte changed, else 1. --verify is accepted (the suite always checks).
int run_attack_suite(const run_options& o) {
    if (o.sizes_given || o.iters_given || !o.stats_json.empty() || !o.report_dir.empty() || !o.sweeps.empty())
        throw config_error(
            "attack_suite takes no --size, --iters, --sweep, --report or --stats-json (it runs a fixed "
            "table of cases)");
    apply_config(o);
    attack::suite_options so;
    so.seed = o.seed;
    if (help_only(o)) {
        elaboration_help h;
        attack::run_suite(so, &h);
        return print_help(o, h);
    }
    const attack::suite_result r = attack::run_suite(so);
    attack::print(std::cout, r);
    if (!r.error.empty()) std::cerr << "hcasim: run failed: attack_suite: " << r.error << "\n";
    return r.ok() ? 0 : 1;
}

/// The files a run writes, checked before it runs (output_file::check): the run must not be
/// lost to a path that cannot be written. --pcap's files are opened before the simulation.
void check_outputs(const run_options& o) {
    if (!o.stats_json.empty()) output_file::check(o.stats_json, "--stats-json");
    if (!o.dump_topology.empty()) output_file::check(o.dump_topology, "--dump-topology");
    if (!o.record.empty()) output_file::check(o.record, "--record");
    if (!o.timeline.empty()) output_file::check(o.timeline, "--timeline");
    if (!o.report_dir.empty())
        for (const char* f : {"results.csv", "results.json", "plots.gp"})
            output_file::check(o.report_dir + "/" + f, "--report");
}

/// --report DIR, before the run: a directory that holds anything is refused, unless --replace
/// is given and it holds only the files a report writes (report_file), which the new report
/// replaces (write_report removes those it does not write again).
void check_report_dir(const std::string& dir, bool replace) {
    std::vector<std::string> names;
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        names.push_back(it->path().filename().string());
    if (ec) throw config_error("--report: cannot read directory '" + dir + "': " + ec.message());
    if (names.empty()) return;
    std::sort(names.begin(), names.end());
    if (!replace)
        throw config_error("--report: '" + dir + "' is not empty (" + names.front() +
                           (names.size() > 1 ? " and " + std::to_string(names.size() - 1) + " more" : "") +
                           "); give a new or empty directory, or --replace to replace the report in it");
    for (const std::string& n : names)
        if (!report_file(n) || !std::filesystem::is_regular_file(dir + "/" + n))
            throw config_error("--report --replace: '" + dir + "/" + n +
                               "' is not a file a report writes (results.*, flows.csv, plots.gp, *.png): "
                               "remove it or give another directory");
}

}  // namespace

/// Writes the --report directory; prints where (and a warning if no plot could be drawn).
/// Each run carries the configuration's label (its CSV's label column).
void report(const run_options& o, const nlohmann::ordered_json& runs) {
    std::string label;  // the --config names and --set overrides: "hdr-cx6 pcie.lanes=8"
    for (const std::string& c : o.configs) label += (label.empty() ? "" : " ") + c;
    for (const std::string& s : o.sets) label += (label.empty() ? "" : " ") + s;
    nlohmann::ordered_json labelled = runs;
    for (auto& run : labelled) run["label"] = label.empty() ? "default" : label;
    std::string warning;
    const std::vector<std::string> pngs = write_report(o.report_dir, labelled, warning);
    std::cout << " report: " << o.report_dir << "/results.csv, results.json";
    for (const std::string& p : pngs) std::cout << ", " << p;
    std::cout << "\n";
    if (!warning.empty()) std::cerr << "hcasim: warning: --report: no plots: " << warning << "\n";
}

uint64_t iters_at(const run_options& o, unsigned qps) {
    const bool own_default = o.workload == "msg_rate" || o.workload == "qp_scale";
    return o.iters_given || !own_default ? o.iters : workloads::default_iters(qps);
}

namespace {

/// "2 B", "64 KiB", "1 MiB", "1536 B".
std::string size_text(uint64_t b) {
    if (b >= (uint64_t(1) << 20) && b % (uint64_t(1) << 20) == 0) return std::to_string(b >> 20) + " MiB";
    if (b >= 1024 && b % 1024 == 0) return std::to_string(b >> 10) + " KiB";
    return std::to_string(b) + " B";
}

/// "412 ns", "1.23 us", "1.23 ms", "1.23 s".
std::string sim_text(uint64_t ns) {
    char b[32];
    if (ns < 1000)
        std::snprintf(b, sizeof b, "%llu ns", static_cast<unsigned long long>(ns));
    else if (ns < 1000000)
        std::snprintf(b, sizeof b, "%.2f us", double(ns) / 1e3);
    else if (ns < 1000000000)
        std::snprintf(b, sizeof b, "%.2f ms", double(ns) / 1e6);
    else
        std::snprintf(b, sizeof b, "%.2f s", double(ns) / 1e9);
    return b;
}

/// What a run shows while it runs: each phase's table on stdout as it is measured, and on a
/// terminal the progress line on stderr (cleared before anything else is printed).
class live_output : public run_observer {
public:
    /// `label` completes a report as the run's tables show it (run_once's QPs, msg_rate).
    explicit live_output(std::function<void(run_report&)> label) : label_(std::move(label)) {}
    /// Phases whose table is printed whole.
    size_t printed() const { return printed_; }
    void clear() {
        if (line_) line_->clear();
    }

    void phase_begin(const run_report& r) override {
        if (!line_) line_.emplace();  // the estimate counts from the first phase (elaboration excluded)
        line_->clear();
        table_.emplace(std::cout);
        table_->begin(labelled(r));
        std::cout.flush();
    }
    void row(const run_report& r, const size_result& s) override {
        clear();
        table_->row(labelled(r), s);
        std::cout.flush();
    }
    void phase_end(const run_report& r) override {
        clear();
        table_->end(labelled(r));
        std::cout.flush();
        ++printed_;
    }
    void progress(const run_progress& p) override {
        if (!line_ || !line_->shown()) return;
        char b[160];
        std::snprintf(b, sizeof b, "%s %s (%zu/%zu sizes): %llu/%llu %s, sim %s", p.workload.c_str(),
                      size_text(p.size).c_str(), p.size_index + 1, p.sizes,
                      static_cast<unsigned long long>(p.done), static_cast<unsigned long long>(p.total),
                      p.unit, sim_text(p.sim_ns).c_str());
        const std::string left = line_->time_left(p.fraction);
        line_->show(left.empty() ? std::string(b) : std::string(b) + ", " + left,
                    p.done == 0);  // a size's start at once
    }

private:
    run_report labelled(const run_report& r) const {
        run_report c = r;
        label_(c);
        return c;
    }
    std::function<void(run_report&)> label_;
    std::optional<progress_line> line_;
    std::optional<table_printer> table_;
    size_t printed_ = 0;
};

}  // namespace

/// One run of the workload (one elaboration): prints its table(s) as they are measured, writes
/// --stats-json, returns the exit status and (if `json` is given) the stats JSON.
int run_once(const run_options& given, nlohmann::ordered_json* json) {
    run_options opts = given;
    opts.iters = iters_at(opts, opts.qps);  // msg_rate: its default at this QP count
    run_spec spec = make_spec(opts);
    bool two_node = false;
    for (const phase_spec& p : spec.phases) two_node |= !is_pcie_workload(p.workload);
    if (two_node) apply_seed(opts);  // first, so that the configuration's link.seed wins
    apply_config(opts);
    // msg_rate: workload.op (read now the configuration is loaded) names the bandwidth workload
    // that runs; the key stays declared through the run (its stats JSON lists it).
    std::unique_ptr<workloads::msg_rate_op> msg_rate;
    if (opts.workload == "msg_rate") {
        msg_rate = std::make_unique<workloads::msg_rate_op>();
        opts.workload = msg_rate->bandwidth_workload();
        try {
            check_sizes(opts);  // ud_send: one datagram per message
        } catch (const config_error& e) {
            throw config_error(std::string(e.what()) + " (msg_rate, workload.op=" + msg_rate->op() + ")");
        }
        spec = make_spec(opts);
    }
    if (help_only(opts)) {
        elaboration_help h;
        run(spec, &h);
        return print_help(opts, h);
    }
    const auto label = [&](run_report& r) {
        r.qps = spec.qps;
        r.threads = spec.threads;
        if (msg_rate) {
            r.workload = "msg_rate";
            r.op = msg_rate->op();
            r.op_workload = opts.workload;
        }
    };
    live_output live(label);
    spec.observer = &live;
    std::string failure;
    std::vector<run_report> reports = run(spec, nullptr, &failure);
    live.clear();
    if (spec.comm && spec.comm->rank() != 0) return failure.empty() ? 0 : 1;  // rank 0 writes the outputs
    if (!spec.dump_topology.empty()) return 0;                                // written; nothing ran
    if (!failure.empty()) {
        std::cerr << "hcasim: run failed: " << failure << "\n";
        return 1;
    }
    for (run_report& r : reports) label(r);
    // The tables not printed as measured (mr_scale's, after its own).
    for (size_t k = live.printed(); k < reports.size(); ++k) print_table(std::cout, reports[k]);
    if (!opts.stats_json.empty())
        write_json_file(opts.stats_json, with_run(to_json(reports), opts.command_line, opts.date));
    if (json) *json = to_json(reports);
    for (const run_report& r : reports)
        if (!r.verify_failure.empty()) {
            std::cerr << "hcasim: run failed: verify: " << r.verify_failure << "\n";
            return 1;
        }
    return 0;
}

namespace {

/// The run the options select, once parsed: its exit status.
int run_command(const run_options& opts) {
    if (opts.help) return 0;
    if (opts.version) {
        std::cout << "hcasim " << HCASIM_VERSION << "\n";
        return 0;
    }
    if (opts.list_presets) {
        list_presets(std::cout);
        return 0;
    }
    for (const std::string& w : opts.warnings) std::cerr << "hcasim: warning: " << w << "\n";
    if (opts.workload == "attack_suite") return run_attack_suite(opts);
    if (opts.bench_events) return bench_events(opts.bench_events);
    // A partitioned run: every rank checks the outputs (the same verdict on each, before they
    // meet), rank 0 writes them.
    const bool writes = !opts.comm || opts.comm->rank() == 0;
    if (!opts.report_dir.empty()) {
        // Before the run: a directory that cannot be made fails at once (and no exception is
        // thrown after the simulation, see run()).
        std::error_code ec;
        std::filesystem::create_directories(opts.report_dir, ec);
        if (ec || !std::filesystem::is_directory(opts.report_dir))
            throw config_error("--report: cannot create directory '" + opts.report_dir + "'" +
                               (ec ? ": " + ec.message() : ""));
        check_report_dir(opts.report_dir, opts.replace);
    }
    if (!help_only(opts)) check_outputs(opts);
    if (opts.workload == "qp_scale") {
        if (opts.speed) throw config_error("--speed measures one run; qp_scale runs one process per point");
        return run_qp_scale(opts);
    }
    if (!opts.sweeps.empty() && !help_only(opts)) return run_sweep(opts);
    nlohmann::ordered_json json;
    const int rc = run_once(opts, opts.report_dir.empty() && !opts.speed ? nullptr : &json);
    if (rc == 0 && opts.speed && !help_only(opts)) print_speed(json);
    if (rc == 0 && writes && !opts.report_dir.empty() && !help_only(opts))
        report(opts, nlohmann::ordered_json::array({json}));
    return rc;
}

}  // namespace

}  // namespace cli

int run_main(int argc, char* argv[], rank_comm* comm) {
    try {
        run_options o = parse_cli(argc, argv, std::cout);
        o.command_line.assign(argv, argv + argc);
        o.comm = comm;
        if (!o.stats_json.empty())
            o.date = run_date();  // when the run starts; a bad SOURCE_DATE_EPOCH stops it
        return cli::run_command(o);
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const workload_error& e) {
        std::cerr << "hcasim: run failed: " << e.what() << "\n";
        return 1;
    } catch (const sc_core::sc_report& e) {
        std::cerr << "hcasim: simulation error: " << e.what() << "\n";
        return 1;
    } catch (const std::exception& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 1;
    }
}

}  // namespace hcasim
