// A sweep beyond one process: under mpirun (srun) its points spread over the ranks, point k on
// rank k mod R, each rank running its points as local processes (`hcasim ... --sweep-index K`,
// started with posix_spawn: no fork() of a process that has called MPI_Init), rank 0 printing and
// merging them in point order as one process does; and `hcasim sweep-merge`, which joins the
// point files of a sweep run one point at a time (--sweep-index, e.g. a Slurm job array).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#if HCASIM_HAVE_MPI
#include <mpi.h>
#endif

#include "model/core/param.h"
#include "testbench/cli/commands.h"
#include "testbench/cli/mpi_comm.h"
#include "testbench/cli/report.h"
#include "testbench/cli/run.h"
#include "testbench/cli/sweep.h"

extern char** environ;

namespace hcasim::cli {

namespace {

using ojson = nlohmann::ordered_json;

/// The first of these environment variables that is set, as a number (-1: none).
long env_number(std::initializer_list<const char*> names) {
    for (const char* n : names)
        if (const char* v = std::getenv(n)) return std::strtol(v, nullptr, 10);
    return -1;
}

/// A file's contents; nullopt if it cannot be opened.
std::optional<std::string> read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

launch launched() {
    // OpenMPI's mpirun, then PMIx (srun --mpi=pmix, OpenMPI 5), then PMI (MPICH's hydra, srun).
    const long rank = env_number({"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"});
    const long size = env_number({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
    if (rank < 0 || size < 1) return {};
    return {int(rank), int(size)};
}

#if HCASIM_HAVE_MPI

namespace {

constexpr int result_tag = 1;   ///< rank r > 0 to rank 0: a finished point, or "done"
constexpr int control_tag = 2;  ///< rank 0 to rank r > 0, exactly once: stop (a point failed) or finished

/// A finished point as bytes: its index (all ones: the rank is done), wait status and texts.
std::string pack(uint64_t k, const point_outcome& r) {
    std::string b;
    auto put = [&b](uint64_t v) { b.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(k);
    put(uint64_t(uint32_t(r.wait_status)));
    for (const std::string* s : {&r.out, &r.err, &r.json}) {
        put(s->size());
        b += *s;
    }
    return b;
}

point_outcome unpack(const std::string& b, uint64_t& k) {
    size_t at = 0;
    auto get = [&]() {
        uint64_t v = 0;
        std::memcpy(&v, b.data() + at, sizeof v);
        at += sizeof v;
        return v;
    };
    point_outcome r;
    r.done = true;
    k = get();
    r.wait_status = int(uint32_t(get()));
    for (std::string* s : {&r.out, &r.err, &r.json}) {
        const uint64_t n = get();
        s->assign(b, at, n);
        at += n;
    }
    return r;
}

/// The environment of a point's process: this one's without the launcher's variables (so the
/// point never starts MPI) and without a progress line.
std::vector<std::string> point_environment() {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string v = *e;
        if (v.rfind("OMPI_", 0) == 0 || v.rfind("PMIX_", 0) == 0 || v.rfind("PMI_", 0) == 0 ||
            v.rfind("HCASIM_PROGRESS=", 0) == 0)
            continue;
        env.push_back(v);
    }
    env.push_back("HCASIM_PROGRESS=0");
    return env;
}

/// One rank's share of the sweep: its points as local processes, up to `jobs` at once.
class rank_runner {
public:
    rank_runner(const run_options& o, const std::vector<sweep_point>& points, int rank, int ranks)
        : o_(o),
          points_(points),
          rank_(rank),
          ranks_(ranks),
          outcomes_(points.size()),
          env_(point_environment()) {
        // Where this rank's point processes leave their output ("" if it cannot be made: each of its
        // points then fails, saying so on rank 0, since only rank 0 prints).
        char dir_template[] = "/tmp/hcasim-sweep-rank-XXXXXX";
        if (mkdtemp(dir_template))
            dir_ = dir_template;
        else
            no_dir_ = std::strerror(errno);
        // Processes at once: --jobs, else this node's cores shared by the node's ranks.
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
        int on_node = 1;
        MPI_Comm_size(node, &on_node);
        MPI_Comm_free(&node);
        const long cores = sysconf(_SC_NPROCESSORS_ONLN);
        jobs_ = o.jobs ? o.jobs : unsigned(std::max(1L, cores / on_node));
        sent_control_.assign(size_t(ranks), false);
        sent_control_[0] = true;
    }
    ~rank_runner() {
        std::error_code ec;
        if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    }
    rank_runner(const rank_runner&) = delete;
    rank_runner& operator=(const rank_runner&) = delete;

    /// Runs this rank's points; on rank 0 gathers, prints and merges every point. The sweep's
    /// exit status, the same on every rank.
    int run() {
        size_t next = size_t(rank_);
        while (true) {
            while (!stop_ && next < points_.size() && running_.size() < jobs_) {
                start(next);
                next += size_t(ranks_);
            }
            if (running_.empty() && (stop_ || next >= points_.size())) break;
            int ws = 0;
            const pid_t pid = waitpid(-1, &ws, WNOHANG);
            if (pid > 0) {
                finished(pid, ws);
                continue;
            }
            poll_messages();
            usleep(2000);
        }
        int status = 0;
        if (rank_ == 0) {
            for (int done = 1 + early_done_; done < ranks_;) done += receive_result(MPI_ANY_SOURCE) ? 0 : 1;
            for (int r = 1; r < ranks_; ++r) send_control(r, 0);
            status = merge();
        } else {
            const std::string b = pack(~uint64_t(0), {});
            MPI_Send(b.data(), int(b.size()), MPI_BYTE, 0, result_tag, MPI_COMM_WORLD);
            if (!got_control_) {
                int stop = 0;
                MPI_Recv(&stop, 1, MPI_INT, 0, control_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
        MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
        return status;
    }

private:
    std::string file(const char* name, size_t k) const { return dir_ + "/" + name + std::to_string(k); }

    /// Point k's process: `hcasim <the sweep's options> --sweep-index=k --stats-json=FILE`.
    void start(size_t k) {
        std::vector<std::string> args{o_.command_line.empty() ? "hcasim" : o_.command_line.front()};
        args.insert(args.end(), o_.sweep_options.begin(), o_.sweep_options.end());
        args.push_back("--sweep-index=" + std::to_string(k));
        args.push_back("--stats-json=" + file("run", k));
        std::vector<char*> argv, envp;
        for (std::string& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        for (std::string& e : env_) envp.push_back(e.data());
        envp.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, file("out", k).c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0600);
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, file("err", k).c_str(),
                                         O_WRONLY | O_CREAT | O_TRUNC, 0600);
        pid_t pid = 0;
        const int e =
            dir_.empty() ? 0 : posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&fa);
        if (dir_.empty() || e != 0) {
            const std::string why = dir_.empty()
                                        ? "rank " + std::to_string(rank_) +
                                              " cannot create a temporary directory in /tmp (" + no_dir_ + ")"
                                        : "cannot start its process (" + std::string(std::strerror(e)) + ")";
            point_outcome r{true, 1 << 8, "== " + points_[k].label + "\n",
                            "hcasim: run failed: " + points_[k].label + ": " + why + "\n", ""};
            deliver(k, std::move(r));
            return;
        }
        running_.emplace_back(pid, k);
    }

    void finished(pid_t pid, int ws) {
        const auto it =
            std::find_if(running_.begin(), running_.end(), [pid](const auto& p) { return p.first == pid; });
        if (it == running_.end()) return;  // not a point's process
        const size_t k = it->second;
        running_.erase(it);
        deliver(k, {true, ws, read_text(file("out", k)).value_or(""), read_text(file("err", k)).value_or(""),
                    read_text(file("run", k)).value_or("")});
    }

    /// A finished point: kept (rank 0, printed when its turn comes) or sent to rank 0.
    void deliver(size_t k, point_outcome r) {
        const bool failed = !WIFEXITED(r.wait_status) || WEXITSTATUS(r.wait_status) != 0;
        stop_ |= failed;  // the points already started finish, no other starts
        if (rank_ != 0) {
            const std::string b = pack(k, r);
            MPI_Send(b.data(), int(b.size()), MPI_BYTE, 0, result_tag, MPI_COMM_WORLD);
            return;
        }
        outcomes_[k] = std::move(r);
        if (failed)
            for (int q = 1; q < ranks_; ++q) send_control(q, 1);
        print_done_points(points_, outcomes_, printed_);
    }

    /// Rank 0: one message from `source`; false when it says that rank is done.
    bool receive_result(int source) {
        MPI_Status st;
        MPI_Probe(source, result_tag, MPI_COMM_WORLD, &st);
        int n = 0;
        MPI_Get_count(&st, MPI_BYTE, &n);
        std::string b(size_t(n), '\0');
        MPI_Recv(b.data(), n, MPI_BYTE, st.MPI_SOURCE, result_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        uint64_t k = 0;
        point_outcome r = unpack(b, k);
        if (k == ~uint64_t(0)) return false;
        deliver(size_t(k), std::move(r));
        return true;
    }

    void send_control(int r, int stop) {
        if (sent_control_[size_t(r)]) return;
        sent_control_[size_t(r)] = true;
        MPI_Send(&stop, 1, MPI_INT, r, control_tag, MPI_COMM_WORLD);
    }

    /// Rank 0: the points other ranks finished (never a "done": a rank sends it after its loop,
    /// when rank 0 may still be in its own). Other ranks: rank 0's stop.
    void poll_messages() {
        int flag = 0;
        MPI_Status st;
        if (rank_ == 0) {
            while (true) {
                MPI_Iprobe(MPI_ANY_SOURCE, result_tag, MPI_COMM_WORLD, &flag, &st);
                if (!flag) return;
                if (!receive_result(st.MPI_SOURCE)) ++early_done_;
            }
        }
        MPI_Iprobe(0, control_tag, MPI_COMM_WORLD, &flag, &st);
        if (!flag) return;
        int stop = 0;
        MPI_Recv(&stop, 1, MPI_INT, 0, control_tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        got_control_ = true;
        stop_ |= stop != 0;
    }

    /// Rank 0, every rank done: the failure, or the merged outputs.
    int merge() {
        print_done_points(points_, outcomes_, printed_);
        if (const int st = sweep_failure(points_, outcomes_)) return st;
        try {
            return finish_sweep(o_, points_, outcomes_);
        } catch (const config_error& e) {
            std::cerr << "hcasim: error: " << e.what() << "\n";
            return 2;
        } catch (const std::exception& e) {
            std::cerr << "hcasim: error: " << e.what() << "\n";
            return 1;
        }
    }

    const run_options& o_;
    const std::vector<sweep_point>& points_;
    const int rank_, ranks_;
    std::vector<point_outcome> outcomes_;  ///< rank 0: every point's
    std::vector<std::string> env_;
    std::string dir_, no_dir_;
    unsigned jobs_ = 1;
    std::vector<std::pair<pid_t, size_t>> running_;
    std::vector<bool> sent_control_;  ///< rank 0: the control message each rank got
    bool stop_ = false, got_control_ = false;
    size_t printed_ = 0;
    int early_done_ = 0;
};

}  // namespace

int run_sweep_ranks(const run_options& o) {
    const std::vector<sweep_point> points = sweep_points(o);
    int status = 0;
    if (launched().rank == 0) {
        // What one process refuses before any point runs, on rank 0 before MPI starts (the
        // checks fork); its status reaches every rank.
        try {
            check_sweep(o, points);
        } catch (const config_error& e) {
            std::cerr << "hcasim: error: " << e.what() << "\n";
            status = 2;
        }
    }
    MPI_Init(nullptr, nullptr);
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (status == 0) {
        rank_runner runner(o, points, rank, ranks);
        status = runner.run();
    }
    MPI_Finalize();
    return status;
}

/// mpirun without a sweep: the fabric split over the ranks, each running the same command.
int run_partitioned(int argc, char* argv[]) {
    MPI_Init(nullptr, nullptr);
    int status = 0;
    {
        mpi_comm comm;
        status = run_main(argc, argv, &comm);
        // Every rank ends with the worst status of any (rank 0's when it refused the options).
        std::vector<uint64_t> v{uint64_t(255 - status)};
        comm.min_all(v);
        status = int(255 - v[0]);
    }
    MPI_Finalize();
    return status;
}

namespace {

/// The ranks' common exit status when rank 0 did not reach the sweep (a refusal, bad options,
/// --help): no rank ends (and has the launcher end the others) before rank 0 has said why. Its
/// one collective is run_sweep_ranks' first, so ranks above 0 waiting there get rank 0's status.
/// A sweep has met in MPI already.
int settle(int status) {
    int started = 0;
    MPI_Initialized(&started);
    if (!started) {
        MPI_Init(nullptr, nullptr);
        MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
        MPI_Finalize();
    }
    return status;
}

}  // namespace

#else

int run_partitioned(int, char*[]) { return 2; }  // ranks_main refuses first

int run_sweep_ranks(const run_options&) {
    throw config_error(
        "started as several ranks (mpirun) but built without MPI");  // launched_main refuses first
}

#endif

namespace {

/// launched_main, several ranks, MPI or not.
int ranks_main(int argc, char* argv[], const launch& l) {
    if (l.rank > 0) {
        // Every rank parses and checks the same options: rank 0 alone says what they find. A
        // point's output reaches rank 0 in a message.
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(null);
    }
    run_options o;
    try {
        std::ostringstream help;
        o = parse_cli(argc, argv, help);
    } catch (const config_error&) {
        return run_main(argc, argv);  // says it, exit 2
    }
    if (o.help || o.version || o.list_presets || o.help_config || o.help_stats) return run_main(argc, argv);
    const std::string ranks = "mpirun -np " + std::to_string(l.size) + ": ";
#if !HCASIM_HAVE_MPI
    std::cerr
        << "hcasim: error: " << ranks
        << "this hcasim was built without MPI (configure with libopenmpi-dev installed, HCASIM_MPI=ON); "
           "run it as one process\n";
    return 2;
#endif
    const char* why = nullptr;
    if (o.sweep_index >= 0)
        why =
            "--sweep-index runs one point in one process (a Slurm array task); under mpirun a --sweep's "
            "points spread over the ranks without it";
    else if (o.workload == "qp_scale")
        why =
            "qp_scale's points do not spread over ranks (run --workload write_bw --sweep qps=LIST under "
            "mpirun)";
    if (why) {
        std::cerr << "hcasim: error: " << ranks << why << "\n";
        return 2;
    }
    if (o.sweeps.empty()) return run_partitioned(argc, argv);
    if (l.rank == 0) return run_main(argc, argv);  // its checks of the outputs, then run_sweep_ranks
    // The other ranks only run points: the outputs are rank 0's to check and write.
    o.command_line.assign(argv, argv + argc);
    return run_sweep_ranks(o);
}

}  // namespace

int launched_main(int argc, char* argv[]) {
    const launch l = launched();
    if (l.size <= 1) return run_main(argc, argv);
#if HCASIM_HAVE_MPI
    return settle(ranks_main(argc, argv, l));
#else
    return ranks_main(argc, argv, l);
#endif
}

int sweep_merge_main(int argc, char* argv[]) {
    static const char* const usage =
        "Usage: hcasim sweep-merge OUT.json POINT.json...\n\n"
        "Joins the --stats-json point files of a sweep run one point at a time (hcasim ... --sweep ... "
        "--sweep-index K --stats-json POINT.json, e.g. the tasks of a Slurm job array) into OUT.json: the "
        "file the whole sweep's --stats-json writes (its \"run\" block names this command). Prints the "
        "sweep's summary (--sweep threads). Exit 2, naming the file, when a point is missing or given twice, "
        "a file is not a point file or belongs to another sweep (docs/usage.md, Sweeps on a cluster).\n";
    std::vector<std::string> args(argv + 2, argv + argc);
    if (std::find(args.begin(), args.end(), "--help") != args.end() ||
        std::find(args.begin(), args.end(), "-h") != args.end()) {
        std::cout << usage;
        return 0;
    }
    try {
        if (args.size() < 2)
            throw config_error("sweep-merge: expected OUT.json and the point files (see --help)");
        const std::string& first = args[1];
        ojson ref;
        std::vector<sweep_point> points;
        run_options o;
        std::vector<point_outcome> outcomes;
        std::vector<std::string> from;  // the file of each point
        for (size_t a = 1; a < args.size(); ++a) {
            const std::string& f = args[a];
            const std::optional<std::string> text = read_text(f);
            if (!text) throw config_error("sweep-merge: '" + f + "': cannot read it");
            ojson j;
            try {
                j = ojson::parse(*text);
            } catch (const std::exception& e) {
                throw config_error("sweep-merge: '" + f + "': not JSON (" + e.what() + ")");
            }
            for (const char* k : point_file_keys)
                if (!j.is_object() || !j.contains(k))
                    throw config_error("sweep-merge: '" + f +
                                       "': not a point file of hcasim --sweep-index (no \"" + k + "\")");
            if (a == 1) {
                ref = j["sweep_options"];
                std::vector<std::string> words{"hcasim"};
                for (const auto& w : ref) words.push_back(w.get<std::string>());
                std::vector<const char*> wargv;
                for (const std::string& w : words) wargv.push_back(w.c_str());
                std::ostringstream help;
                o = parse_cli(int(wargv.size()), wargv.data(), help);
                points = sweep_points(o);
                outcomes.assign(points.size(), point_outcome{});
                from.assign(points.size(), "");
            } else if (j["sweep_options"] != ref) {
                throw config_error("sweep-merge: '" + f +
                                   "': a point of another sweep (its options differ from '" + first + "')");
            }
            const ojson& k = j["sweep_index"];
            if (!k.is_number_unsigned() || k.get<uint64_t>() >= points.size() ||
                j["sweep_points"] != points.size() || j["point"] != points[k.get<size_t>()].point)
                throw config_error("sweep-merge: '" + f + "': its point does not match the sweep's point " +
                                   k.dump() + " (of " + std::to_string(points.size()) + ")");
            const size_t i = k.get<size_t>();
            if (outcomes[i].done)
                throw config_error("sweep-merge: '" + f + "': point " + std::to_string(i) +
                                   " again (also in '" + from[i] + "')");
            outcomes[i] = {true, 0, "", "", *text};
            from[i] = f;
        }
        for (size_t i = 0; i < points.size(); ++i)
            if (!outcomes[i].done)
                throw config_error("sweep-merge: point " + std::to_string(i) + " of " +
                                   std::to_string(points.size()) + " is missing (" + points[i].label +
                                   "; --sweep-index " + std::to_string(i) + ")");
        o.stats_json = args[0];
        o.report_dir.clear();
        o.command_line.assign(argv, argv + argc);
        o.date = run_date();
        return finish_sweep(o, points, outcomes);
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    }
}

}  // namespace hcasim::cli
