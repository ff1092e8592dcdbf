// hcasim --threads N: the bandwidth workloads' client runs N application threads, each a
// process on a core of its own (at most cpu.cores), with its own QPs (QP q on thread q mod N)
// and its own send CQ; each charges its own CPU costs, so their work overlaps in simulated time.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <string>
#include <unistd.h>

// It runs the hcasim binary; libsystemc still wants an sc_main to link (the sanitizer build
// links it without --as-needed).
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

/// The message rate of the run's first result (Mpps), from --stats-json.
double mpps(const std::string& args, const std::string& tag) {
    nlohmann::json stats;
    const result r = hcasim::test::run_hcasim_stats(args, tag, &stats);
    EXPECT_EQ(r.code, 0) << r.err << r.out;
    if (r.code != 0 || stats.is_null()) return 0;
    return stats.at("results").at(0).at("msg_rate_mpps").get<double>();
}

}  // namespace

// 64 B WRITEs from one core are CPU-bound (the HCA and PCIe are far from busy). Two threads of
// one QP each, 1000 messages each, run the same stream as one thread with one QP and 1000
// messages, each on its own core: with nothing shared contending the run would take exactly as
// long, so the rate is at most twice one thread's; what they share (PCIe link, doorbells, HCA)
// costs each message at most a few ns of its ~46 ns, so at least 98% of that.
TEST(HcasimThreads, two_threads_with_their_own_qps_give_twice_one_threads_cpu_bound_message_rate) {
    const double one = mpps("--workload write_bw --size 64 --iters 1000 --qps 1", "threads_one");
    const double two = mpps(
        "--workload write_bw --size 64 --iters 1000 --qps 2 --threads 2 --set cpu.cores=2", "threads_two");
    ASSERT_GT(one, 0);
    EXPECT_LE(two, 2 * one * (1 + 1e-9));
    EXPECT_GE(two, 2 * one * 0.98);
    // One thread driving both QPs is bound by its one core: no faster than one QP alone by more
    // than the poll it saves.
    const double one_two_qps = mpps("--workload write_bw --size 64 --iters 1000 --qps 2", "threads_one_two");
    EXPECT_LT(one_two_qps, 1.1 * one);
}

// QP q runs on thread q mod N: with 3 threads and 4 QPs, thread 0 has QPs 0 and 3, threads 1
// and 2 one each. Each thread has a send CQ of its own: the trace's create_qp records name it.
TEST(HcasimThreads, three_threads_spread_four_qps_two_one_one) {
    const std::string path = ::testing::TempDir() + "threads_spread_" + std::to_string(getpid()) + ".jsonl";
    const result r = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 100 --qps 4 --threads 3 "
        "--set cpu.cores=3 --verify --record '" +
            path + "'",
        "threads_spread");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    std::ifstream in(path);
    std::map<std::string, std::vector<std::string>> qps_of_cq;  // node0's send CQ -> its QPs
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#') continue;
        const nlohmann::json j = nlohmann::json::parse(line);
        if (j.value("call", "") != "create_qp" || j.value("node", -1) != 0) continue;
        qps_of_cq[j.at("send_cq").get<std::string>()].push_back(j.at("ret").get<std::string>());
    }
    std::remove(path.c_str());
    std::vector<std::vector<std::string>> groups;
    for (const auto& [cq, qps] : qps_of_cq) groups.push_back(qps);
    ASSERT_EQ(groups.size(), 3u) << r.out;
    std::sort(groups.begin(), groups.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
    EXPECT_EQ(groups[0], (std::vector<std::string>{"qp0", "qp3"}));
    EXPECT_EQ(groups[1].size(), 1u);
    EXPECT_EQ(groups[2].size(), 1u);
}

TEST(HcasimThreads, more_threads_than_host_cores_exits_2_naming_both) {
    const result r = hcasim::test::run_hcasim("--workload write_bw --qps 4 --threads 4 --set cpu.cores=3",
                                              "threads_cores");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --threads 4: more than node0.cpu.cores (3); each application thread runs on a "
              "core of its own\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimThreads, more_threads_than_qps_exits_2_naming_both) {
    const result r =
        hcasim::test::run_hcasim("--workload send_bw --qps 2 --threads 3 --set cpu.cores=4", "threads_qps");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --threads 3 with --qps 2: each application thread needs a QP of its own\n");
}

TEST(HcasimThreads, a_latency_workload_refuses_threads) {
    const result r = hcasim::test::run_hcasim("--workload write_lat --threads 2", "threads_lat");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --threads: write_lat runs one application thread per node; the bandwidth "
              "workloads take --threads\n");
}
