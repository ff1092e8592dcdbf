// hcasim: run a perftest-like workload (or the default demo) on the simulated machine.
#include <systemc>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>

#include "model/core/output_file.h"
#include "model/core/param.h"
#include "testbench/attack/attack_suite.h"
#include "testbench/cli.h"
#include "testbench/replay/replay.h"
#include "testbench/serve/serve.h"
#include "testbench/report.h"
#include "testbench/workloads.h"

using namespace hcasim;

namespace {

// SystemC prints its banner when the kernel starts unless this is set; users diff our output.
const int quiet_banner = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);

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
    spec.mtu = o.mtu;
    spec.seed = o.seed;
    spec.verify = o.verify;
    spec.atomic = o.atomic;
    spec.record = o.record;
    spec.timeline = o.timeline;
    spec.timeline_only = o.timeline_only;
    spec.pcap_dir = o.pcap_dir;
    if (o.workload.empty()) {
        // The demo: latency and bandwidth from 2 B to 1 MiB, as `perftest -a` would sweep.
        const auto sizes = o.sizes_given ? o.sizes : sweep(2, 1u << 20);
        spec.phases.push_back({"write_lat", sizes, o.iters_given ? o.iters : 1000});
        spec.phases.push_back({"write_bw", sizes, o.iters_given ? o.iters : 1000});
        return spec;
    }
    phase_spec p;
    p.workload = o.workload;
    const bool lat = o.workload == "write_lat" || o.workload == "send_lat" || o.workload == "read_lat" ||
                     o.workload == "ud_send_lat";
    const bool atomic = o.workload == "atomic_lat" || o.workload == "atomic_rate";
    // perftest defaults: 2 B for latency, 64 KiB for bandwidth (UD: the MTU, perftest's "Max msg
    // size in UD is MTU"); atomics move 8 bytes.
    const uint64_t bw_default = transport_of(o.workload) == transport::ud ? o.mtu : 65536u;
    p.sizes = o.sizes_given ? o.sizes : std::vector<uint64_t>{atomic ? 8u : lat ? 2u : bw_default};
    p.iters = o.iters;
    spec.phases.push_back(p);
    return spec;
}

void print_help_config(std::ostream& os, const std::vector<param_info>& params) {
    os << "Parameters (set with --config FILE or --set key=value; prefix nodeN. for one node, linkN. for one "
          "cable).\n"
          "Switch parameters (fabric.switch.*) exist when the fabric has a switch: add\n"
          "--set fabric.topology=switch to list them.\n";
    for (const param_info& p : params) {
        os << "  " << std::left << std::setw(42) << p.key << " " << std::setw(7) << p.type << " default "
           << std::setw(10) << p.def << (p.unit.empty() ? "" : " [" + p.unit + "]") << "\n      " << p.help;
        if (!p.choices.empty()) os << " (" << p.choices << ")";
        if (!p.range.empty()) os << " (allowed " << p.range << ")";
        os << "\n";
    }
}

/// --workload attack_suite: one line per case and the summary; 0 if every case was rejected as
/// expected and no target byte changed, else 1. --verify is accepted (the suite always checks).
int run_attack_suite(const run_options& o) {
    if (o.sizes_given || o.iters_given || !o.stats_json.empty() || !o.report_dir.empty() ||
        !o.sweep_qps.empty())
        throw config_error(
            "attack_suite takes no --size, --iters, --sweep, --report or --stats-json (it runs a fixed "
            "table of cases)");
    apply_config(o);
    attack::suite_options so;
    so.seed = o.seed;
    if (o.help_config) {
        std::vector<param_info> params;
        attack::run_suite(so, &params);
        print_help_config(std::cout, params);
        return 0;
    }
    const attack::suite_result r = attack::run_suite(so);
    attack::print(std::cout, r);
    if (!r.error.empty()) std::cerr << "hcasim: run failed: attack_suite: " << r.error << "\n";
    return r.ok() ? 0 : 1;
}

/// --bench-events: the raw SystemC timed-event rate of this machine (the unit of the simulator's
/// cost per packet). One SC_METHOD re-notifies itself 1 ns ahead `n` times.
struct event_ticker : sc_core::sc_module {
    uint64_t count = 0, limit;
    SC_HAS_PROCESS(event_ticker);
    event_ticker(sc_core::sc_module_name name, uint64_t n) : sc_module(name), limit(n) { SC_METHOD(tick); }
    void tick() {
        if (++count < limit) next_trigger(1, sc_core::SC_NS);
    }
};

int bench_events(uint64_t n) {
    event_ticker t("event_ticker", n);
    const auto start = std::chrono::steady_clock::now();
    sc_core::sc_start();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("SystemC timed events: %llu in %.3f s wall, %.0f per second\n",
                static_cast<unsigned long long>(t.count), s, s > 0 ? double(t.count) / s : 0.0);
    return 0;
}

/// The event rate of this machine now, from `hcasim --bench-events` in a child process (the
/// simulation of this process is over; a fresh one is needed). 0 if it could not be measured.
double measure_event_rate() {
    std::fflush(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return 0;
    const pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execl("/proc/self/exe", "hcasim", "--bench-events", "5000000", static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[256];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    close(fds[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    const size_t at = out.find("wall, ");
    return at == std::string::npos ? 0 : std::strtod(out.c_str() + at + 6, nullptr);
}

/// --speed: the simulator's speed for the run just done (wall-clock figures: not deterministic).
void print_speed(const nlohmann::ordered_json& j) {
    const double total = j["sim"]["wall_s"].get<double>();
    // The traffic phases' wall time: QP creation, memory registration and teardown excluded
    // (they are not per-packet work; with 16K QPs they take longer than the traffic).
    const double traffic = j["sim"].value("traffic_wall_s", 0.0);
    const double wall = traffic > 0 ? traffic : total;
    const double packets = j["sim"]["wire_packets"].get<double>();
    const double sim_s = j["sim"]["sim_time_ns"].get<double>() * 1e-9;
    const double pps = wall > 0 ? packets / wall : 0;
    const double events = measure_event_rate();
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::printf(
        " speed: %.0f wire packets in %.2f s wall: %.0f packets per wall second; slowdown %.1fx "
        "(simulated %.3f ms; the whole run, setup included, took %.2f s)\n",
        packets, wall, pps, sim_s > 0 ? wall / sim_s : 0.0, sim_s * 1e3, total);
    if (events > 0 && pps > 0)
        std::printf(
            " speed: this machine runs %.0f SystemC timed events per second: %.1f event-equivalents per "
            "wire packet\n",
            events, events / pps);
    uint64_t pages = 0;
    for (const auto& [key, value] : j["counters"].items())
        if (key.size() > 13 && key.compare(key.size() - 13, 13, ".memory.pages") == 0)
            pages += value.get<uint64_t>();
    std::printf(
        " speed: max RSS %.1f MiB, of which simulated host memory %.1f MiB (rings, buffers, tables)\n",
        double(ru.ru_maxrss) / 1024.0, double(pages) * 4096.0 / (1024.0 * 1024.0));
    // Per-QP model state as the engines count it (transport engine + WQE fetcher; every QPN
    // slot of hca.max_qps charged to the QPs that exist).
    for (const auto& [key, value] : j["counters"].items()) {
        const std::string suffix = ".transport_engine.state_bytes";
        if (key.size() <= suffix.size() ||
            key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        const std::string node = key.substr(0, key.size() - suffix.size());
        const auto qps = j["counters"].find(node + ".transport_engine.state_qps");
        if (qps == j["counters"].end() || qps->get<uint64_t>() == 0) continue;
        const auto slots = j["counters"].find(node + ".transport_engine.state_slot_bytes");
        const double slot_bytes = slots == j["counters"].end() ? 0.0 : slots->get<double>();
        std::printf(
            " speed: %s: model state %.0f bytes per QP (%llu QPs), plus %.0f KiB for all QP numbers "
            "(hca.max_qps); together %.0f bytes per QP\n",
            node.c_str(), value.get<double>() / qps->get<double>(),
            static_cast<unsigned long long>(qps->get<uint64_t>()), slot_bytes / 1024.0,
            (value.get<double>() + slot_bytes) / qps->get<double>());
    }
}

/// The files a run writes, checked before it runs (output_file::check): the run must not be
/// lost to a path that cannot be written. --pcap's files are opened before the simulation.
void check_outputs(const run_options& o) {
    if (!o.stats_json.empty()) output_file::check(o.stats_json, "--stats-json");
    if (!o.record.empty()) output_file::check(o.record, "--record");
    if (!o.timeline.empty()) output_file::check(o.timeline, "--timeline");
    if (!o.report_dir.empty())
        for (const char* f : {"results.csv", "results.json", "plots.gp"})
            output_file::check(o.report_dir + "/" + f, "--report");
}

/// Writes the --report directory; prints where (and a warning if no plot could be drawn).
void report(const run_options& o, const nlohmann::ordered_json& runs) {
    std::string warning;
    const std::vector<std::string> pngs = write_report(o.report_dir, runs, warning);
    std::cout << " report: " << o.report_dir << "/results.csv, results.json";
    for (const std::string& p : pngs) std::cout << ", " << p;
    std::cout << "\n";
    if (!warning.empty()) std::cerr << "hcasim: warning: --report: no plots: " << warning << "\n";
}

/// One run of the workload (one elaboration): prints its table(s), writes --stats-json, returns
/// the exit status and (if `json` is given) the stats JSON.
int run_once(const run_options& opts, nlohmann::ordered_json* json) {
    const run_spec spec = make_spec(opts);
    bool two_node = false;
    for (const phase_spec& p : spec.phases) two_node |= !is_pcie_workload(p.workload);
    if (two_node) apply_seed(opts);  // first, so that the configuration's link.seed wins
    apply_config(opts);
    if (opts.help_config) {
        std::vector<param_info> params;
        run(spec, &params);
        print_help_config(std::cout, params);
        return 0;
    }
    std::string failure;
    std::vector<run_report> reports = run(spec, nullptr, &failure);
    if (!failure.empty()) {
        std::cerr << "hcasim: run failed: " << failure << "\n";
        return 1;
    }
    for (run_report& r : reports) r.qps = spec.qps;
    for (const run_report& r : reports) print_table(std::cout, r);
    if (!opts.stats_json.empty()) write_json(opts.stats_json, reports);
    if (json) *json = to_json(reports);
    for (const run_report& r : reports)
        if (!r.verify_failure.empty()) {
            std::cerr << "hcasim: run failed: verify: " << r.verify_failure << "\n";
            return 1;
        }
    return 0;
}

/// One point of a multi-process sweep: a workload at a QP count.
struct sweep_point {
    std::string workload;
    unsigned qps;
};

/// Runs each point in a child process (SystemC elaborates once per process), in order, each
/// child's table on our stdout under `== <label>`; returns the children's stats JSON in `runs`,
/// or a nonzero exit status (the first failing child's).
int run_children(const run_options& o, const std::vector<sweep_point>& points, const char* what,
                 nlohmann::ordered_json& runs) {
    char dir_template[] = "/tmp/hcasim-sweep-XXXXXX";
    if (!mkdtemp(dir_template))
        throw config_error(std::string(what) + ": cannot create a temporary directory");
    const std::string tmp = dir_template;
    runs = nlohmann::ordered_json::array();
    int status = 0;
    for (size_t k = 0; k < points.size(); ++k) {
        const sweep_point& pt = points[k];
        const std::string path = tmp + "/run" + std::to_string(k) + ".json";
        const std::string label = std::string(what) + (o.workload == pt.workload ? "" : " " + pt.workload) +
                                  " qps=" + std::to_string(pt.qps);
        std::cout << "== " << label << "\n";
        std::cout.flush();
        std::fflush(nullptr);
        const pid_t pid = fork();
        if (pid < 0) {
            status = 1;
            std::cerr << "hcasim: run failed: " << label << ": fork failed\n";
            break;
        }
        if (pid == 0) {
            run_options c = o;
            c.workload = pt.workload;
            c.sweep_qps.clear();
            c.report_dir.clear();
            c.qps = pt.qps;
            c.qps_given = true;
            c.stats_json = path;
            int rc = 1;
            try {
                rc = run_once(c, nullptr);
            } catch (const config_error& e) {
                std::cerr << "hcasim: error: " << e.what() << "\n";
                rc = 2;
            } catch (const workload_error& e) {
                std::cerr << "hcasim: run failed: " << e.what() << "\n";
            } catch (const std::exception& e) {
                std::cerr << "hcasim: error: " << e.what() << "\n";
            }
            std::cout.flush();
            std::fflush(nullptr);
            _exit(rc);
        }
        int ws = 0;
        waitpid(pid, &ws, 0);
        const int rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 1;
        if (rc != 0) {
            if (!WIFEXITED(ws))
                std::cerr << "hcasim: run failed: " << label << ": the run was killed (signal "
                          << WTERMSIG(ws) << ")\n";
            status = rc;
            break;
        }
        std::ifstream in(path);
        nlohmann::ordered_json j;
        try {
            in >> j;
        } catch (const std::exception& e) {
            std::cerr << "hcasim: run failed: " << label << ": unreadable results (" << e.what() << ")\n";
            status = 1;
            break;
        }
        runs.push_back(std::move(j));
    }
    std::filesystem::remove_all(tmp);
    return status;
}

/// --sweep qps=LIST: one run per QP count.
int run_qps_sweep(const run_options& o) {
    if (is_pcie_workload(o.workload))
        throw config_error("--sweep qps: " + o.workload + " moves data over PCIe only and has no QPs");
    std::vector<sweep_point> points;
    for (unsigned q : o.sweep_qps) points.push_back({o.workload, q});
    nlohmann::ordered_json runs;
    if (const int st = run_children(o, points, "--sweep", runs)) return st;
    if (!o.stats_json.empty())
        write_json_file(o.stats_json, nlohmann::ordered_json{{"sweep", "qps"}, {"runs", runs}});
    if (!o.report_dir.empty()) report(o, runs);
    return 0;
}

/// --workload qp_scale: write_bw and read_bw (64 B unless --size) at 1, 4, 16 ... 16384 QPs
/// (or --sweep qps), one process per point; each child's HCAs hold the QPs (hca.max_qps is set
/// to the next power of two of QPs + 16 unless the configuration sets it). Then one summary
/// table: message rate per QP count.
int run_qp_scale(run_options o) {
    if (o.qps_given)
        throw config_error("qp_scale sweeps the QP count: give the counts with --sweep qps=LIST, not --qps");
    const std::vector<unsigned> counts =
        o.sweep_qps.empty() ? std::vector<unsigned>{1, 4, 16, 64, 256, 1024, 4096, 16384} : o.sweep_qps;
    if (!o.sizes_given) o.sizes = {64};
    if (!o.iters_given) o.iters = 20000;
    o.sizes_given = o.iters_given = true;
    // Does the configuration (a preset's QP budget, a --set) fix hca.max_qps? Then it stands.
    apply_config(o);
    const bool max_qps_set = broker::instance().lookup("node0.hca.max_qps").has_value() ||
                             broker::instance().lookup("node1.hca.max_qps").has_value();
    broker::instance().reset();  // each child loads the configuration itself
    std::vector<sweep_point> points;
    for (const char* w : {"write_bw", "read_bw"})
        for (unsigned q : counts) points.push_back({w, q});
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const sweep_point& pt : points) {
        run_options c = o;
        if (!max_qps_set) {
            uint64_t need = 1024;
            while (need < uint64_t(pt.qps) + 16) need *= 2;
            c.sets.insert(c.sets.begin(), "hca.max_qps=" + std::to_string(need));
        }
        nlohmann::ordered_json one;
        if (const int st = run_children(c, {pt}, "qp_scale", one)) return st;
        runs.push_back(one[0]);
    }
    // Summary: Mpps of each workload per QP count (first size).
    std::printf("---------------------------------------------------------------------------------------\n");
    std::printf(" qp_scale: message rate [Mpps] at %llu B vs QPs\n",
                static_cast<unsigned long long>(o.sizes.front()));
    std::printf(" %-8s %-14s %s\n", "#QPs", "write_bw", "read_bw");
    for (unsigned q : counts) {
        double mpps[2] = {0, 0};
        for (const auto& r : runs)
            if (r["qps"].get<unsigned>() == q) {
                const int k = r["workload"] == "write_bw" ? 0 : 1;
                mpps[k] = r["results"][0]["msg_rate_mpps"].get<double>();
            }
        std::printf(" %-8u %-14.3f %.3f\n", q, mpps[0], mpps[1]);
    }
    std::printf("---------------------------------------------------------------------------------------\n");
    if (!o.stats_json.empty())
        write_json_file(o.stats_json, nlohmann::ordered_json{{"workload", "qp_scale"}, {"runs", runs}});
    if (!o.report_dir.empty()) report(o, runs);
    return 0;
}

}  // namespace

int sc_main(int argc, char* argv[]) {
    // The kernel's "simulation stopped by user" note is noise here: workloads stop it.
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    if (argc > 1 && std::string(argv[1]) == "replay") return replay_main(argc, argv);
    if (argc > 1 && std::string(argv[1]) == "serve") return serve_main(argc, argv);
    run_options opts;
    try {
        opts = parse_cli(argc, argv, std::cout);
        if (opts.help) return 0;
        for (const std::string& w : opts.warnings) std::cerr << "hcasim: warning: " << w << "\n";
        if (opts.workload == "attack_suite") return run_attack_suite(opts);
        if (opts.bench_events) return bench_events(opts.bench_events);
        if (!opts.report_dir.empty()) {
            // Before the run: a directory that cannot be made fails at once (and no exception is
            // thrown after the simulation, see run()).
            std::error_code ec;
            std::filesystem::create_directories(opts.report_dir, ec);
            if (ec || !std::filesystem::is_directory(opts.report_dir))
                throw config_error("--report: cannot create directory '" + opts.report_dir + "'" +
                                   (ec ? ": " + ec.message() : ""));
        }
        if (!opts.help_config) check_outputs(opts);
        if (opts.workload == "qp_scale") {
            if (opts.speed)
                throw config_error("--speed measures one run; qp_scale runs one process per point");
            return run_qp_scale(opts);
        }
        if (!opts.sweep_qps.empty() && !opts.help_config) return run_qps_sweep(opts);
        nlohmann::ordered_json json;
        const int rc = run_once(opts, opts.report_dir.empty() && !opts.speed ? nullptr : &json);
        if (rc == 0 && opts.speed && !opts.help_config) print_speed(json);
        if (rc == 0 && !opts.report_dir.empty() && !opts.help_config)
            report(opts, nlohmann::ordered_json::array({json}));
        return rc;
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
    return 0;
}
