// A sweep beyond one process (issue 32): under mpirun its points spread over the ranks with the
// stdout and merged --stats-json of a one-process --jobs 1 sweep; a failing point's status on
// every rank; mpirun without a sweep refused; and, without MPI, --sweep-index K (one point, e.g.
// a Slurm array task) whose point files hcasim sweep-merge joins into the sweep's JSON. The
// mpirun tests skip when configure found no MPI (HCASIM_MPIEXEC).
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;
using ojson = nlohmann::ordered_json;

// OpenMPI refuses root unless told (these containers run as root); a fixed date for the JSON.
const std::string env =
    "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 SOURCE_DATE_EPOCH=1700000000; ";
// Six small points: 3 QP counts x 2 link widths.
const std::string sweep = "--workload write_bw --size 64 --iters 10 --sweep qps=1,2,4 --sweep link.width=1,4";

result run(const std::string& args, const std::string& tag) {
    return hcasim::test::run_hcasim(args, tag, env);
}

#ifdef HCASIM_MPIEXEC
/// `mpiexec --oversubscribe -np N hcasim args`.
result mpirun(int n, const std::string& args, const std::string& tag) {
    return hcasim::test::run_hcasim(
        "--oversubscribe -np " + std::to_string(n) + " '" + HCASIM_BIN + "' " + args, tag, env,
        HCASIM_SOURCE_DIR, HCASIM_MPIEXEC);
}
/// Each rank's exit status, recorded by a shell around it (mpirun itself reports only the first).
std::vector<std::string> rank_statuses(int n, const std::string& args, const std::string& dir) {
    const std::string sh = "\"" + std::string(HCASIM_BIN) + "\" " + args + " >/dev/null 2>&1; echo $? >" +
                           dir + "/rank$OMPI_COMM_WORLD_RANK";
    hcasim::test::run_hcasim("--oversubscribe -np " + std::to_string(n) + " sh -c '" + sh + "'", "ranks", env,
                             HCASIM_SOURCE_DIR, HCASIM_MPIEXEC);
    std::vector<std::string> v;
    for (int r = 0; r < n; ++r) v.push_back(slurp(dir + "/rank" + std::to_string(r)));
    return v;
}
#define SKIP_WITHOUT_MPI() (void)0
#else
#define SKIP_WITHOUT_MPI() GTEST_SKIP() << "configure found no MPI (libopenmpi-dev): no mpiexec to run"
#endif

/// A merged sweep JSON without what two runs of one configuration may differ in: the "run"
/// block and each run's wall-clock figures. Key order kept (ordered_json).
ojson deterministic_sweep(const std::string& path) {
    const std::string text = slurp(path);
    EXPECT_FALSE(text.empty()) << path;
    ojson j = text.empty() ? ojson::object() : ojson::parse(text);
    j.erase("run");
    for (ojson& r : j["runs"]) r = hcasim::test::deterministic_part(r);
    return j;
}

}  // namespace

TEST(HcasimMpiSweep, np_2_and_np_3_give_the_stdout_merged_json_and_report_of_one_process_with_jobs_1) {
    SKIP_WITHOUT_MPI();
    const std::string dir = hcasim::test::empty_dir("mpi_sweep");
    const result one =
        run(sweep + " --jobs 1 --stats-json " + dir + "/one.json --report " + dir + "/one", "mpi_one");
    ASSERT_EQ(one.code, 0) << one.err;
    const ojson ref = deterministic_sweep(dir + "/one.json");
    ASSERT_EQ(ref["runs"].size(), 6u);
    const std::vector<std::string> report = hcasim::test::dir_entries(dir + "/one");
    for (int n : {2, 3}) {
        const std::string out = dir + "/np" + std::to_string(n);
        const result r = mpirun(n, sweep + " --stats-json " + out + ".json --report " + out, "mpi_np");
        ASSERT_EQ(r.code, 0) << "np " << n << ": " << r.err;
        std::string expected = one.out;  // its last line names the report's directory
        const std::string one_dir = dir + "/one/";
        if (const size_t at = expected.find(one_dir); at != std::string::npos)
            expected.replace(at, one_dir.size(), out + "/");
        EXPECT_EQ(r.out, expected) << "np " << n;
        EXPECT_EQ(r.err, "") << "np " << n;
        EXPECT_EQ(deterministic_sweep(out + ".json"), ref) << "np " << n;
        // The report: every file byte for byte but results.json, whose runs hold wall-clock figures.
        ASSERT_EQ(hcasim::test::dir_entries(out), report) << "np " << n;
        for (const std::string& f : report)
            if (f == "results.json")
                EXPECT_EQ(deterministic_sweep(out + "/" + f), deterministic_sweep(dir + "/one/" + f));
            else
                EXPECT_EQ(slurp(out + "/" + f), slurp(dir + "/one/" + f)) << f << ", np " << n;
    }
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiSweep, a_failing_point_under_mpirun_exits_with_its_status_on_every_rank_naming_it) {
    SKIP_WITHOUT_MPI();
    // Point 1 (every packet dropped) fails on rank 1; point 0 runs on rank 0.
    const std::string args = "--workload write_bw --size 64 --iters 10 --sweep link.drop_rate=0,1";
    const result one = run(args + " --jobs 1", "mpi_fail_one");
    ASSERT_EQ(one.code, 1);
    const result r = mpirun(2, args, "mpi_fail");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(r.out, one.out);
    EXPECT_NE(r.err.find(one.err), std::string::npos) << r.err;  // mpirun adds its own notice
    EXPECT_NE(one.err.find("hcasim: run failed: --sweep link.drop_rate=1: exit status 1\n"),
              std::string::npos)
        << one.err;
    const std::string dir = hcasim::test::empty_dir("mpi_fail_ranks");
    EXPECT_EQ(rank_statuses(2, args, dir), (std::vector<std::string>{"1\n", "1\n"}));
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiSweep, mpirun_with_a_two_node_workload_and_no_sweep_exits_2_on_every_rank_saying_so) {
    SKIP_WITHOUT_MPI();
    const result r = mpirun(3, "--workload write_bw --iters 10", "mpi_nosweep");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    const std::string line =
        "hcasim: error: mpirun -np 3: write_bw runs on two nodes; only the many-node workloads (incast, "
        "alltoall, permutation, uniform_random, bisection, hotspot) split the fabric over ranks\n";
    const size_t at = r.err.find(line);
    EXPECT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << "said once, by rank 0: " << r.err;
    const std::string dir = hcasim::test::empty_dir("mpi_nosweep_ranks");
    EXPECT_EQ(rank_statuses(3, "--workload write_bw --iters 10", dir),
              (std::vector<std::string>{"2\n", "2\n", "2\n"}));
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiSweep, an_output_rank_0_refuses_under_mpirun_exits_2_on_every_rank_said_once) {
    SKIP_WITHOUT_MPI();
    // Rank 0 checks the outputs (a --report directory that holds a file) before the sweep; the
    // other ranks learn its status in the sweep's first collective rather than wait for points.
    const std::string dir = hcasim::test::empty_dir("mpi_refused");
    std::filesystem::create_directories(dir + "/report");
    std::ofstream(dir + "/report/x") << "x";
    const std::string args = sweep + " --report " + dir + "/report";
    const result r = mpirun(3, args, "mpi_refused");
    EXPECT_EQ(r.code, 2);
    const std::string line =
        "hcasim: error: --report: '" + dir +
        "/report' is not empty (x); give a new or empty directory, or --replace to replace "
        "the report in it\n";
    const size_t at = r.err.find(line);
    EXPECT_NE(at, std::string::npos) << r.err;
    EXPECT_EQ(r.err.find(line, at + 1), std::string::npos) << "said once, by rank 0: " << r.err;
    EXPECT_EQ(rank_statuses(3, args, dir), (std::vector<std::string>{"2\n", "2\n", "2\n"}));
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiSweep, sweep_index_out_of_range_or_without_a_sweep_exits_2) {
    const result r = run(sweep + " --sweep-index 6", "mpi_index");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --sweep-index 6: the sweep has 6 points (index 0 to 5)\n");
    EXPECT_EQ(r.out, "");
    const result n = run("--workload write_bw --sweep-index 0", "mpi_index");
    EXPECT_EQ(n.code, 2);
    EXPECT_EQ(
        n.err,
        "hcasim: error: --sweep-index runs one point of a --sweep qps, threads or KEY: give the --sweep\n");
}

TEST(HcasimMpiSweep, sweep_index_of_every_point_then_sweep_merge_equals_the_direct_sweep_json) {
    const std::string dir = hcasim::test::empty_dir("mpi_merge");
    const result one = run(sweep + " --stats-json " + dir + "/one.json", "mpi_merge_one");
    ASSERT_EQ(one.code, 0) << one.err;
    std::string files, out;
    for (int k = 5; k >= 0; --k) {  // any order
        const std::string f = dir + "/point" + std::to_string(k) + ".json";
        const result p =
            run(sweep + " --sweep-index " + std::to_string(k) + " --stats-json " + f, "mpi_point");
        ASSERT_EQ(p.code, 0) << p.err;
        files += " " + f;
        out = p.out + out;
    }
    // Each point prints its `== <label>` line and table, as in the sweep.
    EXPECT_EQ(out, one.out);
    const result m = run("sweep-merge " + dir + "/merged.json" + files, "mpi_merge");
    ASSERT_EQ(m.code, 0) << m.err;
    EXPECT_EQ(m.out, "");
    EXPECT_EQ(deterministic_sweep(dir + "/merged.json"), deterministic_sweep(dir + "/one.json"));
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiSweep, sweep_merge_prints_the_thread_sweep_summary_of_the_direct_sweep) {
    const std::string dir = hcasim::test::empty_dir("mpi_merge_threads");
    const std::string args = "--workload write_bw --size 64 --iters 10 --set cpu.cores=2 --sweep threads=1,2";
    const result one = run(args + " --stats-json " + dir + "/one.json", "mpi_threads_one");
    ASSERT_EQ(one.code, 0) << one.err;
    std::string files;
    for (int k = 0; k < 2; ++k) {
        const std::string f = dir + "/p" + std::to_string(k) + ".json";
        ASSERT_EQ(run(args + " --sweep-index " + std::to_string(k) + " --stats-json " + f, "mpi_tp").code, 0);
        files += " " + f;
    }
    const result m = run("sweep-merge " + dir + "/merged.json" + files, "mpi_threads_merge");
    ASSERT_EQ(m.code, 0) << m.err;
    ASSERT_NE(m.out.find("--sweep threads: message rate per application thread count"), std::string::npos)
        << m.out;
    ASSERT_GE(one.out.size(), m.out.size());
    EXPECT_EQ(one.out.substr(one.out.size() - m.out.size()), m.out) << "the sweep's output ends with it";
    EXPECT_EQ(deterministic_sweep(dir + "/merged.json"), deterministic_sweep(dir + "/one.json"));
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiSweep, sweep_merge_with_a_missing_garbled_or_mismatched_file_exits_2_naming_it) {
    const std::string dir = hcasim::test::empty_dir("mpi_merge_bad");
    const std::string small = "--workload write_bw --size 64 --iters 10 --sweep link.width=1,4";
    for (int k = 0; k < 2; ++k)
        ASSERT_EQ(run(small + " --sweep-index " + std::to_string(k) + " --stats-json " + dir + "/p" +
                          std::to_string(k) + ".json",
                      "mpi_bad_point")
                      .code,
                  0);
    // Point 1 of a sweep with other options (--iters 20).
    ASSERT_EQ(
        run("--workload write_bw --size 64 --iters 20 --sweep link.width=1,4 --sweep-index 1 --stats-json " +
                dir + "/other.json",
            "mpi_bad_other")
            .code,
        0);
    std::ofstream(dir + "/garbled.json") << "{\"sweep\": [";
    const std::string p0 = dir + "/p0.json", p1 = dir + "/p1.json", out = dir + "/merged.json";
    struct bad {
        std::string files, err;
    };
    const bad cases[] = {
        {p0, "hcasim: error: sweep-merge: point 1 of 2 is missing (--sweep link.width=4; --sweep-index 1)\n"},
        {p0 + " " + dir + "/garbled.json",
         "hcasim: error: sweep-merge: '" + dir + "/garbled.json': not JSON ("},
        {p0 + " " + dir + "/other.json",
         "hcasim: error: sweep-merge: '" + dir +
             "/other.json': a point of another sweep (its options differ from '" + p0 + "')\n"},
        {p0 + " " + p0, "hcasim: error: sweep-merge: '" + p0 + "': point 0 again (also in '" + p0 + "')\n"},
        {p0 + " " + dir + "/none.json",
         "hcasim: error: sweep-merge: '" + dir + "/none.json': cannot read it\n"},
    };
    for (const bad& c : cases) {
        const result r = run("sweep-merge " + out + " " + c.files, "mpi_bad");
        EXPECT_EQ(r.code, 2) << c.files;
        EXPECT_EQ(r.err.substr(0, c.err.size()), c.err) << c.files;
        EXPECT_FALSE(std::filesystem::exists(out)) << c.files;
    }
    // A whole sweep's merged file is not a point file.
    ASSERT_EQ(run("sweep-merge " + out + " " + p0 + " " + p1, "mpi_bad_ok").code, 0);
    const result w = run("sweep-merge " + dir + "/again.json " + out, "mpi_bad");
    EXPECT_EQ(w.code, 2);
    EXPECT_EQ(w.err, "hcasim: error: sweep-merge: '" + out +
                         "': not a point file of hcasim --sweep-index (no \"sweep_index\")\n");
    std::filesystem::remove_all(dir);
}

// ------------------------------------------------------------------ the fabric over ranks

namespace {

// The 16-node fat tree of radix-8 switches (5 leaves, 4 spines), packets lost on every cable.
const std::string fat_tree_16 =
    " --set fabric.nodes=16 --set fabric.topology=fat_tree --set fabric.switch.radix=8 --size 4K"
    " --set link.drop_rate=0.001";

/// Stdout, the stats JSON without its run block and wall-clock figures, every capture's bytes.
struct run_outputs {
    std::string out;
    ojson stats;
    std::vector<std::pair<std::string, std::string>> pcaps;
};

/// Runs `args` in `dir` (so stdout names the same relative paths) with `np` ranks (0: one
/// process, no mpirun).
run_outputs run_outputs_of(int np, const std::string& args, const std::string& dir) {
    std::filesystem::create_directories(dir);
    const std::string all = args + " --stats-json stats.json --pcap pcap";
    run_outputs o;
    result r;
#ifdef HCASIM_MPIEXEC
    if (np > 0)
        r = hcasim::test::run_hcasim(
            "--oversubscribe -np " + std::to_string(np) + " '" + HCASIM_BIN + "' " + all, "mpi_part", env,
            dir, HCASIM_MPIEXEC);
    else
#endif
        r = hcasim::test::run_hcasim(all, "mpi_part", env, dir);
    EXPECT_EQ(r.code, 0) << "np " << np << ": " << r.err;
    o.out = r.out;
    const std::string text = slurp(dir + "/stats.json");
    EXPECT_FALSE(text.empty()) << dir;
    if (!text.empty()) o.stats = hcasim::test::deterministic_part(ojson::parse(text));
    for (const std::string& f : hcasim::test::dir_entries(dir + "/pcap"))
        o.pcaps.emplace_back(f, slurp(dir + "/pcap/" + f));
    return o;
}

void expect_same_outputs(const run_outputs& ref, const run_outputs& o, const std::string& what) {
    EXPECT_EQ(o.out, ref.out) << what;
    EXPECT_EQ(o.stats, ref.stats) << what;
    ASSERT_EQ(o.pcaps.size(), ref.pcaps.size()) << what;
    for (size_t k = 0; k < ref.pcaps.size(); ++k) {
        EXPECT_EQ(o.pcaps[k].first, ref.pcaps[k].first) << what;
        EXPECT_TRUE(o.pcaps[k].second == ref.pcaps[k].second)
            << what << ": " << ref.pcaps[k].first << " differs";
    }
}

/// One process, then mpirun -np 1, 2 and 3: every output byte-identical.
void expect_partition_independent(const std::string& args, const std::string& name) {
    const std::string dir = hcasim::test::empty_dir(name);
    const run_outputs ref = run_outputs_of(0, args, dir + "/one");
    ASSERT_NE(ref.out.find("packets dropped: "), std::string::npos) << ref.out;
    EXPECT_EQ(ref.out.find("packets dropped: 0 "), std::string::npos)
        << "the run must lose packets: " << ref.out;
    EXPECT_EQ(ref.pcaps.size(), 17u);  // 16 nodes' cables and the SM's
    for (int np : {1, 2, 3})
        expect_same_outputs(ref, run_outputs_of(np, args, dir + "/np" + std::to_string(np)),
                            "mpirun -np " + std::to_string(np));
    std::filesystem::remove_all(dir);
}

}  // namespace

TEST(HcasimMpiPartition, alltoall_under_loss_on_1_2_and_3_ranks_gives_the_outputs_of_one_process) {
    SKIP_WITHOUT_MPI();
    expect_partition_independent("--workload alltoall --iters 20" + fat_tree_16, "mpi_part_alltoall");
}

TEST(HcasimMpiPartition, incast_under_loss_on_1_2_and_3_ranks_gives_the_outputs_of_one_process) {
    SKIP_WITHOUT_MPI();
    expect_partition_independent("--workload incast --iters 100" + fat_tree_16, "mpi_part_incast");
}

TEST(HcasimMpiPartition, a_partition_file_that_cuts_elsewhere_gives_the_same_outputs) {
    SKIP_WITHOUT_MPI();
    const std::string dir = hcasim::test::empty_dir("mpi_part_file");
    // Leaves alternate between the ranks (auto gives each a contiguous block), spines too.
    std::ofstream(dir + "/part.txt") << "# interleaved\nleaf0 0\nleaf1 1\nleaf2 0\nleaf3 1\nleaf4 1\n"
                                        "spine0 1\nspine1 1\nspine2 0\nspine3 0\n";
    const std::string args =
        "--workload alltoall --iters 20" + fat_tree_16 + " --set fabric.partition=" + dir + "/part.txt";
    const run_outputs ref = run_outputs_of(0, args, dir + "/one");
    expect_same_outputs(ref, run_outputs_of(2, args, dir + "/np2"), "mpirun -np 2 with the file");
    std::filesystem::remove_all(dir);
}

TEST(HcasimMpiPartition,
     a_partition_file_missing_a_switch_more_ranks_than_nodes_or_a_cut_without_latency_exit_2) {
    SKIP_WITHOUT_MPI();
    const std::string dir = hcasim::test::empty_dir("mpi_part_bad");
    std::ofstream(dir + "/part.txt") << "leaf0 0\nleaf1 1\n";
    const std::string args = "--workload alltoall --iters 2" + fat_tree_16;
    const struct {
        int np;
        std::string extra, line;
    } cases[] = {
        {2, " --set fabric.partition=" + dir + "/part.txt",
         "hcasim: error: " + dir +
             "/part.txt: does not cover the fabric: switch 'leaf2' (and 6 more) has no rank\n"},
        {17, "",
         "hcasim: error: fabric.partition: 17 ranks for 16 nodes: every rank simulates at least one node; "
         "run "
         "with at most 16 ranks\n"},
        {2, " --set fabric.isl.propagation_ns=0",
         "hcasim: error: mpirun -np 2: a cut cable between switches has no latency "
         "(fabric.isl.propagation_ns=0): "
         "the ranks could not run ahead of each other\n"},
        {2, " --set workload.barrier_ns=5",
         "hcasim: error: mpirun -np 2: workload.barrier_ns=5 is below the lookahead (the cut cables' "
         "propagation, 10 ns)\n"},
        {2, " --set workload.transport=ud",
         "hcasim: error: mpirun -np 2: workload.transport=ud: a partitioned run carries RC only (UC and UD "
         "end "
         "on a drain every node sees)\n"},
    };
    for (const auto& c : cases) {
        const result r = mpirun(c.np, args + c.extra, "mpi_part_bad");
        EXPECT_EQ(r.code, 2) << c.extra << ": " << r.err;
        EXPECT_EQ(r.out, "") << c.extra;
        const size_t at = r.err.find(c.line);
        EXPECT_NE(at, std::string::npos) << c.extra << ": " << r.err;
        EXPECT_EQ(r.err.find(c.line, at + 1), std::string::npos) << "said once, by rank 0: " << r.err;
    }
    std::filesystem::remove_all(dir);
}
