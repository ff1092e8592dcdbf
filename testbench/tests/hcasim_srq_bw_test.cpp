// hcasim --workload srq_bw / ud_srq_bw: SENDs from node0 over N QPs (default 16) into one shared
// receive queue on node1. The perftest table, one SRQ line per size (WQEs taken, RNR NAKs,
// empty), --verify of every payload, determinism, and one-line errors for bad parameters.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

/// Runs hcasim with `args` (shell words), capturing stdout and stderr.
result run(const std::string& args) { return hcasim::test::run_hcasim(args, "srq"); }

/// One bandwidth row: #bytes #iterations (per QP) Gb/s Mpps.
struct row {
    uint64_t size = 0, iters = 0;
    double bw = 0, mpps = 0;
};

std::vector<row> rows(const std::string& out) {
    std::vector<row> v;
    std::istringstream in(out);
    bool in_table = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(" #bytes ", 0) == 0) {
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        std::istringstream f(line);
        row r;
        if (!(f >> r.size >> r.iters >> r.bw >> r.mpps)) break;
        v.push_back(r);
    }
    return v;
}

bool has(const std::string& out, const std::string& s) { return out.find(s) != std::string::npos; }

}  // namespace

TEST(HcasimSrqBw, prints_the_send_bw_table_and_one_srq_line_per_size) {
    const std::string json_path = ::testing::TempDir() + "srq_" + std::to_string(getpid()) + ".json";
    // 16 QPs (the default) of 20 SENDs each (--iters counts per QP): 320 per size.
    const result r = run("--workload srq_bw --size 64,4K --iters 20 --stats-json '" + json_path + "'");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_TRUE(has(r.out, " hcasim srq_bw (seed 1)\n")) << r.out;
    const std::vector<row> v = rows(r.out);
    ASSERT_EQ(v.size(), 2u) << r.out;
    EXPECT_EQ(v[0].size, 64u);
    EXPECT_EQ(v[1].size, 4096u);
    EXPECT_EQ(v[1].iters, 20u);
    // 4 KiB SENDs fill the EDR link as send_bw's do (100 x 4096/4122 Gb/s less the pipeline fill).
    EXPECT_GT(v[1].bw, 80.0) << r.out;
    EXPECT_LT(v[1].bw, 99.5) << r.out;
    EXPECT_GT(v[0].mpps, 0.0);
    // The default: 16 QPs on one SRQ, one WQE per message, the SRQ never found empty.
    EXPECT_TRUE(has(r.out, " SRQ 64 B: 16 QPs, 320 WQEs taken, 0 RNR NAKs sent, empty 0 times\n")) << r.out;
    EXPECT_TRUE(has(r.out, " SRQ 4096 B: 16 QPs, 320 WQEs taken, 0 RNR NAKs sent, empty 0 times\n")) << r.out;

    const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    EXPECT_EQ(j["workload"], "srq_bw");
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][1]["srq"]["qps"], 16);
    EXPECT_EQ(j["results"][1]["iters"], 20);
    EXPECT_EQ(j["results"][1]["messages"], 320);
    EXPECT_EQ(j["results"][1]["srq"]["wqes_taken"], 320);
    EXPECT_EQ(j["results"][1]["srq"]["rnr_naks_sent"], 0);
    EXPECT_EQ(j["results"][1]["srq"]["empty"], 0);
    EXPECT_NEAR(j["results"][1]["bw_gbps"].get<double>(), v[1].bw, 0.01);
    // Every message took one SRQ WQE; nothing came from a QP's own receive queue.
    EXPECT_EQ(j["counters"]["node1.hca.wqe_fetcher.srq_taken"], 640);
    EXPECT_EQ(j["counters"]["node1.hca.transport_engine.recv_completions"], 640);
}

TEST(HcasimSrqBw, verify_checks_every_payload_in_the_shared_buffers) {
    // --qps 5 of 40 SENDs each: the QPs' messages interleave on the SRQ; 0 B SENDs take a WQE too.
    const result r = run("--workload srq_bw --size 0,64,4K,64K --iters 40 --qps 5 --verify");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_TRUE(has(r.out, " SRQ 65536 B: 5 QPs, 200 WQEs taken, 0 RNR NAKs sent, empty 0 times\n")) << r.out;
    const uint64_t bytes = 200ull * (0 + 64 + 4096 + 65536);
    EXPECT_TRUE(
        has(r.out, " verify: " + std::to_string(bytes) + " bytes checked, 0 mismatches, 0 bad completions\n"))
        << r.out;
}

TEST(HcasimSrqBw, verify_does_not_change_the_figures_and_runs_are_deterministic) {
    const std::string args = "--workload srq_bw --size 64,4K --iters 67 --qps 3 --seed 7";
    const result a = run(args), b = run(args), v = run(args + " --verify");
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(v.code, 0) << v.err;
    EXPECT_EQ(a.out, b.out);
    // The same table with one verify line added.
    std::string without = v.out;
    const auto at = without.find(" verify: ");
    ASSERT_NE(at, std::string::npos) << v.out;
    without.erase(at, without.find('\n', at) + 1 - at);
    EXPECT_EQ(without, a.out);
}

TEST(HcasimSrqBw, ud_srq_bw_takes_a_wqe_per_datagram_and_marker) {
    const result r = run("--workload ud_srq_bw --size 64,4K --iters 50 --qps 4 --verify");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    EXPECT_TRUE(has(r.out, " hcasim ud_srq_bw (seed 1)\n")) << r.out;
    ASSERT_EQ(rows(r.out).size(), 2u) << r.out;
    // 4 x 50 datagrams and one end-of-stream marker per QP.
    EXPECT_TRUE(has(r.out, " SRQ 4096 B: 4 QPs, 204 WQEs taken, 0 RNR NAKs sent, empty 0 times\n")) << r.out;
    EXPECT_TRUE(has(r.out, " verify: " + std::to_string(200 * (64 + 4096)) +
                               " bytes checked, 0 mismatches, 0 bad completions\n"))
        << r.out;
}

TEST(HcasimSrqBw, a_lost_datagram_fails_verify) {
    const result r = run("--workload ud_srq_bw --size 64 --iters 25 --set link.drop_rate=0.05 --verify");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(r.err.rfind("hcasim: run failed: verify: ud_srq_bw 64 B, node1 QP ", 0), 0u) << r.err;
    EXPECT_TRUE(has(r.err, "datagrams lost (UD does not retransmit)")) << r.err;
}

TEST(HcasimSrqBw, bad_parameters_are_one_line_errors) {
    const result zero = run("--workload srq_bw --set workload.rx_depth=0");
    EXPECT_EQ(zero.code, 2);
    EXPECT_EQ(
        zero.err,
        "hcasim: error: bad value '0' for key 'workload.rx_depth' (--set): expected integer in [1,16384]\n");
    // The SRQ holds workload.rx_depth WRs: more than the device's max_srq_wr is refused by name.
    const result big = run("--workload srq_bw --size 64 --iters 10 --set hca.max_qp_wr=256");
    EXPECT_EQ(big.code, 1);
    // The error is the last line (an ASan build may print a warning about the exception leaving
    // the simulation thread before it).
    const std::string want =
        "hcasim: run failed: srq_bw: workload.rx_depth 512 receive WRs do not fit one SRQ of node1 "
        "(max_srq_wr 256, max_cqe 65535; hca.max_qp_wr, hca.max_cqe)\n";
    EXPECT_TRUE(big.err.size() >= want.size() &&
                big.err.compare(big.err.size() - want.size(), want.size(), want) == 0)
        << big.err;
    const result qps = run("--workload srq_bw --qps 0");
    EXPECT_EQ(qps.code, 2);
    EXPECT_TRUE(has(qps.err, "--qps: expected an integer in [1,")) << qps.err;
    const result ud = run("--workload ud_srq_bw --size 8K");
    EXPECT_EQ(ud.code, 2);
    EXPECT_EQ(ud.err,
              "hcasim: error: --size: 8192 bytes exceeds the MTU (4096 bytes, --mtu): ud_srq_bw sends each "
              "message as one UD datagram\n");
}

// libsystemc (linked through testbench_lib) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
