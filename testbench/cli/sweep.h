// Internal to testbench/cli: what sweep.cpp (the points, one process) and sweep_mpi.cpp (the
// points spread over MPI ranks, hcasim sweep-merge) share.
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

#include "testbench/cli/cli.h"

namespace hcasim::cli {

/// One point of a multi-process run: a workload at a QP count (and, in a thread sweep, a
/// thread count), with the swept configuration values.
struct sweep_point {
    std::string workload;
    unsigned qps = 0;      ///< the point's --qps (0: as given)
    unsigned threads = 0;  ///< --sweep threads: the point's --threads (0: as given)
    std::vector<std::pair<std::string, std::string>>
        values;             ///< the swept configuration keys' values, applied after every --set
    std::string first_set;  ///< qp_scale: hca.max_qps=N, before the other --sets ("": none)
    uint64_t iters = 0;     ///< qp_scale: the point's --iters (0: as given)
    nlohmann::ordered_json point =
        nlohmann::ordered_json::object();  ///< the swept values by key (the stats JSON's "point")
    std::string label;                     ///< the line `== <label>` above its output
};

/// What a point's process left: its stdout (from the `== <label>` line on), stderr, stats JSON
/// text and waitpid status.
struct point_outcome {
    bool done = false;  ///< the point ran and its process ended
    int wait_status = 0;
    std::string out, err, json;
};

/// The cross product of o.sweeps (the first outermost), each point with its label.
std::vector<sweep_point> sweep_points(const run_options& o);
/// Everything a sweep refuses before any point runs (exit 2: config_error); forks a process per
/// distinct configuration, so an MPI rank calls it before MPI_Init.
void check_sweep(const run_options& o, const std::vector<sweep_point>& points);
/// Prints the finished points from `printed` on, in point order, up to the first not done.
void print_done_points(const std::vector<sweep_point>& points, const std::vector<point_outcome>& outcomes,
                       size_t& printed);
/// The exit status of the first failed point (0: none failed), after naming it and how many
/// points did not run.
int sweep_failure(const std::vector<sweep_point>& points, const std::vector<point_outcome>& outcomes);
/// After every point succeeded: the merged "runs" (each point's stats JSON, from a point file
/// or a child's --stats-json), the thread summary, --stats-json and --report. Exit status.
int finish_sweep(const run_options& o, const std::vector<sweep_point>& points,
                 const std::vector<point_outcome>& outcomes);

/// The stats JSON of one point for the merged file: `text` (a point file or a run's
/// --stats-json) without its "run" block and the point file's sweep keys, "point" first.
/// Throws std::exception when `text` is not JSON.
nlohmann::ordered_json point_run(const sweep_point& pt, const std::string& text);
/// The keys a --sweep-index point file has besides a run's stats JSON.
extern const char* const point_file_keys[5];

/// --sweep under mpirun (sweep_mpi.cpp): point k on rank k mod R, rank 0 prints and merges.
int run_sweep_ranks(const run_options& o);
/// Launched by mpirun/srun with more than one rank (from the environment, without MPI): the
/// rank and number of ranks; {0, 1} otherwise.
struct launch {
    int rank = 0, size = 1;
};
launch launched();

}  // namespace hcasim::cli
