// Multi-process runs: --sweep qps=LIST, threads=LIST, KEY=LIST (their cross product) and
// qp_scale run each point in a child process (SystemC elaborates once per process), up to --jobs
// at once, and gather the children's stats JSON.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include "model/core/param.h"
#include "model/host/host_cpu.h"
#include "testbench/cli/commands.h"
#include "testbench/cli/progress.h"
#include "testbench/cli/report.h"
#include "testbench/cli/sweep.h"
#include "testbench/workloads/workloads.h"

namespace hcasim::cli {

namespace {

using ojson = nlohmann::ordered_json;
using key_values = std::vector<std::pair<std::string, std::string>>;

/// The options of a point's child process.
run_options point_options(const run_options& o, const sweep_point& pt) {
    run_options c = o;
    c.workload = pt.workload;
    c.sweep_qps.clear();
    c.sweep_threads.clear();
    c.sweeps.clear();
    c.report_dir.clear();
    if (pt.threads) c.threads = pt.threads;
    if (pt.qps) {
        c.qps = pt.qps;
        c.qps_given = true;
    }
    if (pt.iters) c.iters = pt.iters;
    if (!pt.first_set.empty()) c.sets.insert(c.sets.begin(), pt.first_set);
    c.point = pt.values;
    return c;
}

/// In a child process: stdout and stderr to the files `out` and `err` (the parent prints them
/// in point order), no progress display of its own (the parent shows the sweep's).
void redirect(const std::string& out, const std::string& err) {
    const int fo = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int fe = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fo < 0 || fe < 0) _exit(1);
    dup2(fo, STDOUT_FILENO);
    dup2(fe, STDERR_FILENO);
    close(fo);
    close(fe);
    setenv("HCASIM_PROGRESS", "0", 1);
}

/// In a child process: `body`'s exit status, errors printed as run_main prints them.
template <class F>
[[noreturn]] void child_exit(F body) {
    int rc = 1;
    try {
        rc = body();
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

/// A file's contents ("" if it cannot be read).
std::string contents(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// A temporary directory for the children's files, removed with this object.
class scratch_dir {
public:
    explicit scratch_dir(const char* what) {
        char dir_template[] = "/tmp/hcasim-sweep-XXXXXX";
        if (!mkdtemp(dir_template))
            throw config_error(std::string(what) + ": cannot create a temporary directory");
        path_ = dir_template;
    }
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    scratch_dir(const scratch_dir&) = delete;
    scratch_dir& operator=(const scratch_dir&) = delete;
    std::string file(const char* name, size_t k) const { return path_ + "/" + name + std::to_string(k); }

private:
    std::string path_;
};

/// The points run at once: --jobs, else the online cores.
unsigned jobs_of(const run_options& o) {
    if (o.jobs) return o.jobs;
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? unsigned(n) : 1u;
}

/// Runs each point in a child process (SystemC elaborates once per process), up to --jobs at
/// once. Each child's output is captured and printed in point order under `== <label>`, so
/// the output is the same for any --jobs. A failing point: the points already started finish,
/// no other starts; returns its exit status (the first failing point's) after naming it.
/// Otherwise 0 and each point's outcome in `outcomes`.
int run_children(const run_options& o, const std::vector<sweep_point>& points, const char* what,
                 std::vector<point_outcome>& outcomes) {
    const scratch_dir tmp(what);
    std::vector<pid_t> pids(points.size(), 0);
    outcomes.assign(points.size(), point_outcome{});
    const unsigned jobs = jobs_of(o);
    size_t next = 0, printed = 0, finished = 0;
    unsigned running = 0;
    bool failed = false;
    int fork_failed = 0;
    progress_line progress;
    // "sweep: 3/8 points done, ~12 s left" (on a terminal).
    const std::string name = what == std::string("--sweep") ? "sweep" : what;
    auto show_progress = [&] {
        const std::string left = progress.time_left(double(finished) / double(points.size()));
        progress.show(name + ": " + std::to_string(finished) + "/" + std::to_string(points.size()) +
                          " points done" + (left.empty() ? "" : ", " + left),
                      true);
    };
    show_progress();
    while (running > 0 || (!failed && next < points.size())) {
        while (!failed && next < points.size() && running < jobs) {
            const size_t k = next;
            const run_options c = point_options(o, points[k]);
            std::cout.flush();
            std::fflush(nullptr);
            const pid_t pid = fork();
            if (pid < 0) {
                std::cerr << "hcasim: run failed: " << points[k].label << ": fork failed\n";
                fork_failed = 1;
                failed = true;
                break;
            }
            if (pid == 0) {
                redirect(tmp.file("out", k), tmp.file("err", k));
                child_exit([&] {
                    run_options one = c;
                    one.stats_json = tmp.file("run", k);
                    return run_once(one, nullptr);
                });
            }
            pids[k] = pid;
            ++next;
            ++running;
        }
        if (running == 0) break;
        int ws = 0;
        const pid_t pid = waitpid(-1, &ws, 0);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        const auto it = std::find(pids.begin(), pids.begin() + long(next), pid);
        const size_t k = size_t(it - pids.begin());
        if (it == pids.begin() + long(next) || outcomes[k].done) continue;  // not a point's process
        outcomes[k] = {true, ws, "== " + points[k].label + "\n" + contents(tmp.file("out", k)),
                       contents(tmp.file("err", k)), contents(tmp.file("run", k))};
        --running;
        ++finished;
        failed |= !WIFEXITED(ws) || WEXITSTATUS(ws) != 0;
        progress.clear();
        print_done_points(points, outcomes, printed);
        show_progress();
    }
    progress.clear();
    print_done_points(points, outcomes, printed);
    if (const int st = sweep_failure(points, outcomes)) return st;
    return fork_failed;
}

}  // namespace

void print_done_points(const std::vector<sweep_point>& points, const std::vector<point_outcome>& outcomes,
                       size_t& printed) {
    for (; printed < points.size() && outcomes[printed].done; ++printed) {
        const point_outcome& r = outcomes[printed];
        std::cout << r.out;
        std::cout.flush();
        std::cerr << r.err;
        if (!WIFEXITED(r.wait_status))
            std::cerr << "hcasim: run failed: " << points[printed].label << ": the run was killed (signal "
                      << WTERMSIG(r.wait_status) << ")\n";
        std::cerr.flush();
    }
}

int sweep_failure(const std::vector<sweep_point>& points, const std::vector<point_outcome>& outcomes) {
    const auto failed = std::find_if(outcomes.begin(), outcomes.end(), [](const point_outcome& r) {
        return r.done && (!WIFEXITED(r.wait_status) || WEXITSTATUS(r.wait_status) != 0);
    });
    if (failed == outcomes.end()) return 0;
    if (!WIFEXITED(failed->wait_status)) return 1;  // named where it is printed
    const int status = WEXITSTATUS(failed->wait_status);
    const auto not_run = size_t(
        std::count_if(outcomes.begin(), outcomes.end(), [](const point_outcome& r) { return !r.done; }));
    std::cerr << "hcasim: run failed: " << points[size_t(failed - outcomes.begin())].label << ": exit status "
              << status
              << (not_run
                      ? "; " + std::to_string(not_run) + (not_run == 1 ? " point" : " points") + " not run"
                      : "")
              << "\n";
    return status;
}

const char* const point_file_keys[5] = {"sweep", "sweep_index", "sweep_points", "sweep_options", "point"};

ojson point_run(const sweep_point& pt, const std::string& text) {
    ojson j = ojson::parse(text);
    j.erase("run");  // the merged file's own "run" block says it once
    for (const char* k : point_file_keys) j.erase(k);
    ojson r{{"point", pt.point}};
    for (auto& [key, v] : j.items()) r[key] = std::move(v);
    return r;
}

namespace {

/// The points' stats JSON (with their "point" if `with_point`); false after naming an unreadable one.
bool runs_of(const std::vector<sweep_point>& points, const std::vector<point_outcome>& outcomes,
             bool with_point, ojson& runs) {
    runs = ojson::array();
    for (size_t k = 0; k < points.size(); ++k) {
        try {
            ojson j = point_run(points[k], outcomes[k].json);
            if (!with_point) j.erase("point");
            runs.push_back(std::move(j));
        } catch (const std::exception& e) {
            std::cerr << "hcasim: run failed: " << points[k].label << ": unreadable results (" << e.what()
                      << ")\n";
            return false;
        }
    }
    return true;
}

/// Every point's value of each swept configuration key, checked before any point runs: each
/// distinct combination elaborates once in a child process (the --help-config path, nothing
/// simulated) with its values set, so a value the parameter refuses and a key no parameter
/// declares (broker::check_unused) are found as the point's run would find them.
void check_config_points(const run_options& o, const std::vector<sweep_point>& points) {
    std::set<key_values> seen;
    const scratch_dir tmp("--sweep");
    for (const sweep_point& pt : points) {
        if (pt.values.empty() || !seen.insert(pt.values).second) continue;
        run_options c = point_options(o, pt);
        c.help_config = true;
        c.help_stats = false;
        c.stats_json.clear();
        std::cout.flush();
        std::fflush(nullptr);
        const pid_t pid = fork();
        if (pid < 0) throw config_error("--sweep: fork failed");
        if (pid == 0) {
            redirect("/dev/null", tmp.file("check", 0));
            child_exit([&] {
                if (const int rc = run_once(c, nullptr)) return rc;
                broker::instance().check_unused();
                return 0;
            });
        }
        int ws = 0;
        waitpid(pid, &ws, 0);
        if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) continue;
        std::string why = contents(tmp.file("check", 0));
        const std::string prefix = "hcasim: error: ";
        if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
        if (const auto nl = why.find('\n'); nl != std::string::npos) why.erase(nl);
        if (why.rfind("unknown configuration key", 0) == 0)
            why += "; --sweep takes size, qps, threads or a key hcasim --help-config lists";
        std::string values;
        for (const auto& [k, v] : pt.values) values += (values.empty() ? "" : " ") + k + "=" + v;
        throw config_error("--sweep " + values + ": " + (why.empty() ? "the configuration fails" : why));
    }
}

}  // namespace

std::vector<sweep_point> sweep_points(const run_options& o) {
    std::vector<sweep_point> points(1);
    for (const sweep_dimension& d : o.sweeps) {
        std::vector<sweep_point> product;
        for (const sweep_point& p : points)
            for (const std::string& v : d.values) {
                sweep_point q = p;
                q.point[d.key] = v;
                if (d.key == "qps")
                    q.qps = unsigned(std::stoul(v));
                else if (d.key == "threads")
                    q.threads = unsigned(std::stoul(v));
                else
                    q.values.emplace_back(d.key, v);
                product.push_back(std::move(q));
            }
        points = std::move(product);
    }
    for (sweep_point& p : points) {
        p.workload = o.workload;
        // A thread sweep's point has --qps QPs or, without it, a QP per thread (perftest's
        // processes each have their own; srq_bw, ud_srq_bw: at least their 16).
        if (p.threads && !p.qps)
            p.qps = o.qps_given ? o.qps : is_srq_workload(o.workload) ? std::max(16u, p.threads) : p.threads;
        p.label = "--sweep";
        for (const auto& [k, v] : p.point.items()) p.label += " " + k + "=" + v.get<std::string>();
    }
    return points;
}

namespace {

/// --sweep qps: refused before any point runs where the workload has no QPs, a count is below
/// --threads or a point's messages exceed the largest total.
void check_qps_sweep(const run_options& o) {
    if (is_pcie_workload(o.workload))
        throw config_error("--sweep qps: " + o.workload + " moves data over PCIe only and has no QPs");
    const unsigned fewest = *std::min_element(o.sweep_qps.begin(), o.sweep_qps.end());
    if (o.threads > fewest)
        throw config_error("--sweep qps: " + std::to_string(fewest) + (fewest == 1 ? " QP" : " QPs") +
                           " with --threads " + std::to_string(o.threads) +
                           ": each application thread needs a QP of its own");
    for (unsigned q : o.sweep_qps) phase_messages(o.workload, iters_at(o, q), q);
}

/// --sweep threads: the largest count above --qps, or above a point's node0 cpu.cores (the
/// host's, not raised), is refused before any point runs.
void check_threads_sweep(const run_options& o, const std::vector<sweep_point>& points) {
    const unsigned most = *std::max_element(o.sweep_threads.begin(), o.sweep_threads.end());
    if (o.qps_given && o.qps < most)
        throw config_error("--sweep threads: " + std::to_string(most) + " threads with --qps " +
                           std::to_string(o.qps) + ": each application thread needs a QP of its own");
    std::set<key_values> seen;
    for (const sweep_point& pt : points) {
        if (!seen.insert(pt.values).second) continue;
        // The point's configuration's node0.cpu.cores (a value that is not a count is left for
        // the child to refuse, naming where it was set).
        run_options c = o;
        c.point = pt.values;
        apply_config(c);
        const std::optional<std::string> set = broker::instance().lookup("node0.cpu.cores");
        broker::instance().reset();  // each child loads the configuration itself
        char* end = nullptr;
        const unsigned long cores = set ? std::strtoul(set->c_str(), &end, 10) : host_cpu::default_cores;
        if ((!set || (end != set->c_str() && *end == '\0')) && most > cores)
            throw config_error("--sweep threads: " + std::to_string(most) +
                               " threads: more than node0.cpu.cores (" + std::to_string(cores) +
                               "); each application thread runs on a core of its own (--set cpu.cores=" +
                               std::to_string(most) + ")");
    }
}

/// --sweep threads: message rate per thread count (and the point's other swept values).
void print_threads_summary(const std::vector<sweep_point>& points, const ojson& runs) {
    std::printf("---------------------------------------------------------------------------------------\n");
    std::printf(" --sweep threads: message rate per application thread count\n");
    std::printf(" %-10s %-8s %-10s %-16s %s\n", "#threads", "#QPs", "#bytes", "MsgRate[Mpps]",
                "BW average[Gb/sec]");
    for (size_t k = 0; k < runs.size(); ++k) {
        std::string others;  // the point's values of the other swept keys
        for (const auto& [key, v] : points[k].point.items())
            if (key != "threads") others += "  " + key + "=" + v.get<std::string>();
        for (const auto& r : runs[k]["results"])
            std::printf(" %-10u %-8u %-10llu %-16.6f %.2f%s\n", points[k].threads, points[k].qps,
                        static_cast<unsigned long long>(r["size_bytes"].get<uint64_t>()),
                        r["msg_rate_mpps"].get<double>(), r["bw_gbps"].get<double>(), others.c_str());
    }
    std::printf("---------------------------------------------------------------------------------------\n");
}

/// The swept keys, in order (the merged JSON's "sweep").
ojson sweep_keys(const run_options& o) {
    ojson keys = ojson::array();
    for (const sweep_dimension& d : o.sweeps) keys.push_back(d.key);
    return keys;
}

/// --sweep-index K: point K alone, in this process, under its `== <label>` line; its
/// --stats-json is a point file: the run's stats JSON with the sweep's keys, K, the number of
/// points, the options that define them and the point's values (hcasim sweep-merge).
int run_sweep_point(const run_options& o) {
    if (!o.sweep_qps.empty()) check_qps_sweep(o);
    const std::vector<sweep_point> points = sweep_points(o);
    if (!o.sweep_threads.empty()) check_threads_sweep(o, points);
    const size_t k = size_t(o.sweep_index);
    std::cout << "== " << points[k].label << "\n";
    run_options c = point_options(o, points[k]);
    c.stats_json.clear();
    ojson j;
    if (const int rc = run_once(c, &j)) return rc;
    if (!o.stats_json.empty()) {
        ojson f{{"sweep", sweep_keys(o)},
                {"sweep_index", k},
                {"sweep_points", points.size()},
                {"sweep_options", o.sweep_options},
                {"point", points[k].point}};
        for (auto& [key, v] : j.items()) f[key] = std::move(v);
        write_json_file(o.stats_json, with_run(std::move(f), o.command_line, o.date));
    }
    return 0;
}

}  // namespace

void check_sweep(const run_options& o, const std::vector<sweep_point>& points) {
    if (!o.sweep_qps.empty()) check_qps_sweep(o);
    if (!o.sweep_threads.empty()) check_threads_sweep(o, points);
    check_config_points(o, points);
}

int finish_sweep(const run_options& o, const std::vector<sweep_point>& points,
                 const std::vector<point_outcome>& outcomes) {
    ojson runs;
    if (!runs_of(points, outcomes, true, runs)) return 1;
    if (!o.sweep_threads.empty()) print_threads_summary(points, runs);
    if (!o.stats_json.empty())
        write_json_file(o.stats_json,
                        with_run(ojson{{"sweep", sweep_keys(o)}, {"runs", runs}}, o.command_line, o.date));
    if (!o.report_dir.empty()) report(o, runs);
    return 0;
}

/// --sweep qps=LIST, threads=LIST, KEY=LIST: one run per point of their cross product (one
/// point with --sweep-index; spread over the ranks under mpirun).
int run_sweep(const run_options& o) {
    if (o.sweep_index >= 0) return run_sweep_point(o);
    if (launched().size > 1) return run_sweep_ranks(o);
    const std::vector<sweep_point> points = sweep_points(o);
    check_sweep(o, points);
    std::vector<point_outcome> outcomes;
    if (const int st = run_children(o, points, "--sweep", outcomes)) return st;
    return finish_sweep(o, points, outcomes);
}

/// --workload qp_scale: write_bw and read_bw (64 B unless --size) at 1, 4, 16 ... 16384 QPs
/// (or --sweep qps), one process per point; each child's HCAs hold the QPs (hca.max_qps is set
/// to the next power of two of QPs + 16 unless the configuration sets it). Then one summary
/// table: message rate per QP count.
int run_qp_scale(run_options o) {
    if (o.qps_given)
        throw config_error("qp_scale sweeps the QP count: give the counts with --sweep qps=LIST, not --qps");
    for (const sweep_dimension& d : o.sweeps)
        if (d.key != "qps")
            throw config_error("--sweep " + d.key + ": qp_scale sweeps the QP count only (--sweep qps=LIST)");
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
        for (unsigned q : counts) {
            sweep_point pt;
            pt.workload = w;
            pt.qps = q;
            pt.iters = iters_at(o, q);
            if (!max_qps_set) {
                uint64_t need = 1024;
                while (need < uint64_t(q) + 16) need *= 2;
                pt.first_set = "hca.max_qps=" + std::to_string(need);
            }
            pt.label = std::string("qp_scale ") + w + " qps=" + std::to_string(q);
            points.push_back(std::move(pt));
        }
    std::vector<point_outcome> outcomes;
    if (const int st = run_children(o, points, "qp_scale", outcomes)) return st;
    ojson runs;
    if (!runs_of(points, outcomes, false, runs)) return 1;
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
