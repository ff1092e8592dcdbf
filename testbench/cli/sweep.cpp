// Multi-process runs: --sweep qps=LIST, --sweep threads=LIST and qp_scale run each point in a
// child process (SystemC elaborates once per process) and gather the children's stats JSON.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "model/core/param.h"
#include "model/host/host_cpu.h"
#include "testbench/cli/commands.h"
#include "testbench/cli/report.h"
#include "testbench/workloads/workloads.h"

namespace hcasim::cli {

namespace {

/// One point of a multi-process sweep: a workload at a QP count (and, in a thread sweep, a
/// thread count).
struct sweep_point {
    std::string workload;
    unsigned qps;
    unsigned threads = 0;  ///< --sweep threads: the point's --threads (0: as given)
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
        const std::string label =
            std::string(what) + (o.workload == pt.workload ? "" : " " + pt.workload) +
            (pt.threads ? " threads=" + std::to_string(pt.threads) : " qps=" + std::to_string(pt.qps));
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
            c.sweep_threads.clear();
            if (pt.threads) c.threads = pt.threads;
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
        j.erase("run");  // the merged file's own "run" block says it once
        runs.push_back(std::move(j));
    }
    std::filesystem::remove_all(tmp);
    return status;
}

}  // namespace

/// --sweep qps=LIST: one run per QP count.
int run_qps_sweep(const run_options& o) {
    if (is_pcie_workload(o.workload))
        throw config_error("--sweep qps: " + o.workload + " moves data over PCIe only and has no QPs");
    // Refused before any point runs, as a thread sweep's counts are.
    const unsigned fewest = *std::min_element(o.sweep_qps.begin(), o.sweep_qps.end());
    if (o.threads > fewest)
        throw config_error("--sweep qps: " + std::to_string(fewest) + (fewest == 1 ? " QP" : " QPs") +
                           " with --threads " + std::to_string(o.threads) +
                           ": each application thread needs a QP of its own");
    std::vector<sweep_point> points;
    for (unsigned q : o.sweep_qps) {
        phase_messages(o.workload, iters_at(o, q), q);  // each point's total fits, before any runs
        points.push_back({o.workload, q});
    }
    nlohmann::ordered_json runs;
    if (const int st = run_children(o, points, "--sweep", runs)) return st;
    if (!o.stats_json.empty())
        write_json_file(o.stats_json, with_run(nlohmann::ordered_json{{"sweep", "qps"}, {"runs", runs}},
                                               o.command_line, o.date));
    if (!o.report_dir.empty()) report(o, runs);
    return 0;
}

/// --sweep threads=LIST: one run per thread count, each with --qps QPs or, without --qps, a QP
/// per thread (perftest's processes each have their own; srq_bw, ud_srq_bw: at least their 16).
/// node0's cpu.cores is the host's and is not raised: the largest count above it, or above
/// --qps, is refused before any point runs. Then a summary: message rate per thread count.
int run_threads_sweep(const run_options& o) {
    const unsigned most = *std::max_element(o.sweep_threads.begin(), o.sweep_threads.end());
    if (o.qps_given && o.qps < most)
        throw config_error("--sweep threads: " + std::to_string(most) + " threads with --qps " +
                           std::to_string(o.qps) + ": each application thread needs a QP of its own");
    // The configuration's node0.cpu.cores (a value that is not a count is left for the child to
    // refuse, naming where it was set).
    apply_config(o);
    const std::optional<std::string> set = broker::instance().lookup("node0.cpu.cores");
    broker::instance().reset();  // each child loads the configuration itself
    char* end = nullptr;
    const unsigned long cores = set ? std::strtoul(set->c_str(), &end, 10) : host_cpu::default_cores;
    if ((!set || (end != set->c_str() && *end == '\0')) && most > cores)
        throw config_error("--sweep threads: " + std::to_string(most) +
                           " threads: more than node0.cpu.cores (" + std::to_string(cores) +
                           "); each application thread runs on a core of its own (--set cpu.cores=" +
                           std::to_string(most) + ")");
    std::vector<sweep_point> points;
    for (unsigned t : o.sweep_threads)
        points.push_back({o.workload,
                          o.qps_given                   ? o.qps
                          : is_srq_workload(o.workload) ? std::max(16u, t)
                                                        : t,
                          t});
    nlohmann::ordered_json runs;
    if (const int st = run_children(o, points, "--sweep", runs)) return st;
    std::printf("---------------------------------------------------------------------------------------\n");
    std::printf(" --sweep threads: message rate per application thread count\n");
    std::printf(" %-10s %-8s %-10s %-16s %s\n", "#threads", "#QPs", "#bytes", "MsgRate[Mpps]",
                "BW average[Gb/sec]");
    for (size_t k = 0; k < runs.size(); ++k)
        for (const auto& r : runs[k]["results"])
            std::printf(" %-10u %-8u %-10llu %-16.6f %.2f\n", points[k].threads, points[k].qps,
                        static_cast<unsigned long long>(r["size_bytes"].get<uint64_t>()),
                        r["msg_rate_mpps"].get<double>(), r["bw_gbps"].get<double>());
    std::printf("---------------------------------------------------------------------------------------\n");
    if (!o.stats_json.empty())
        write_json_file(o.stats_json, with_run(nlohmann::ordered_json{{"sweep", "threads"}, {"runs", runs}},
                                               o.command_line, o.date));
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
    o.sizes_given = true;
    for (unsigned q : counts)
        phase_messages("write_bw", iters_at(o, q), q);  // every point fits, before any runs
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
        c.iters = iters_at(o, pt.qps);
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
        write_json_file(o.stats_json,
                        with_run(nlohmann::ordered_json{{"workload", "qp_scale"}, {"runs", runs}},
                                 o.command_line, o.date));
    if (!o.report_dir.empty()) report(o, runs);
    return 0;
}

}  // namespace hcasim::cli
