// The hcasim program with the P_Key checker's RTL (issue 8, docs/cosim.md): selection per run
// and per node (hca.pkey_checker.impl, nodeN. prefix), the comparator on real traffic, --waves,
// and one-line errors for what cannot work.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim::test;

namespace {

nlohmann::json run_json(const std::string& args, const std::string& tag, result* r_out = nullptr) {
    return run_ok_json(args, "cosim_" + tag, r_out);
}
uint64_t ctr(const nlohmann::json& j, const std::string& key) { return json_counter(j, key); }

}  // namespace

TEST(HcasimCosim, both_compares_every_received_packet_of_a_run_and_finds_no_divergence) {
    const std::string run = "--workload send_bw --size 64,4K --iters 2000";
    const nlohmann::json tlm = run_json(run, "tlm");
    const nlohmann::json both = run_json(run + " --set hca.pkey_checker.impl=both", "both");
    ASSERT_FALSE(tlm.is_null());
    ASSERT_FALSE(both.is_null());
    for (const char* n : {"node0", "node1"}) {
        const std::string k = std::string(n) + ".hca.pkey_checker.";
        EXPECT_EQ(ctr(tlm, k + "rtl_checks"), 0u) << n;
        EXPECT_GT(ctr(both, k + "checked"), 0u) << n;
        EXPECT_EQ(ctr(both, k + "rtl_compared"), ctr(both, k + "checked")) << n;
        EXPECT_EQ(ctr(both, k + "divergences"), 0u) << n;
        EXPECT_GT(ctr(both, k + "rtl_cycles"), 0u) << n;
        EXPECT_EQ(ctr(both, k + "checked"), ctr(tlm, k + "checked")) << n << ": the same packets";
    }
    // Same messages delivered; the RTL's verdict takes cycles the zero-time model does not.
    ASSERT_EQ(both["results"].size(), tlm["results"].size());
    for (size_t i = 0; i < tlm["results"].size(); ++i)
        EXPECT_EQ(both["results"][i]["iters"], tlm["results"][i]["iters"]);
    EXPECT_GT(ctr(tlm, "node1.hca.cq_writer.cqes"), 0u);
    EXPECT_EQ(ctr(both, "node1.hca.cq_writer.cqes"), ctr(tlm, "node1.hca.cq_writer.cqes"));
}

TEST(HcasimCosim, one_node_runs_the_rtl_with_the_node_prefix) {
    const nlohmann::json j =
        run_json("--workload write_bw --size 64 --iters 500 --set node1.hca.pkey_checker.impl=rtl", "node1");
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(ctr(j, "node0.hca.pkey_checker.rtl_checks"), 0u);
    EXPECT_EQ(ctr(j, "node1.hca.pkey_checker.rtl_checks"), ctr(j, "node1.hca.pkey_checker.checked"));
    EXPECT_GT(ctr(j, "node1.hca.pkey_checker.checked"), 0u);
    EXPECT_EQ(j["config"].value("node1.hca.pkey_checker.impl", ""), "rtl");
    EXPECT_EQ(j["config"].value("node0.hca.pkey_checker.impl", ""), "tlm");
}

TEST(HcasimCosim, waves_writes_an_fst_file) {
    const std::string file = ::testing::TempDir() + "cosim_waves_" + std::to_string(getpid()) + ".fst";
    std::filesystem::remove(file);
    const result r = run_hcasim(
        "--workload write_lat --size 8 --iters 20 --set hca.pkey_checker.impl=rtl --waves '" + file + "'",
        "waves");
    EXPECT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(std::filesystem::exists(file));
    EXPECT_GT(std::filesystem::file_size(file), 100u);
    std::filesystem::remove(file);
}

TEST(HcasimCosim, what_cannot_work_is_a_one_line_error) {
    struct bad {
        const char* args;
        const char* message;
    } cases[] = {
        {"--workload write_bw --iters 10 --waves /tmp/x.fst",
         "hcasim: error: hca.pkey_checker.waves (--waves): no node runs a unit as RTL (set "
         "hca.pkey_checker.impl or hca.cq_writer.impl to rtl or both)\n"},
        {"--workload write_bw --iters 10 --set hca.pkey_checker.impl=rtl --waves x.vcd",
         "hcasim: error: --waves: 'x.vcd': hcasim writes FST (GTKWave opens it); name the file .fst\n"},
        {"--workload write_bw --iters 10 --set hca.pkey_checker.impl=rtl --set "
         "hca.pkey_checker.table_len=1024",
         "hcasim: error: node0.hca.pkey_checker.table_len: 1024 entries, but the RTL (impl=rtl) is built "
         "with 128 "
         "per port\n"},
    };
    for (const bad& b : cases) {
        const result r = run_hcasim(b.args, "bad");
        EXPECT_EQ(r.code, 2) << b.args;
        EXPECT_EQ(r.err, b.message) << b.args;
    }
    const result r = run_hcasim("--workload write_bw --iters 10 --set hca.pkey_checker.impl=verilog", "bad");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("tlm|rtl|both"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(HcasimCosim, both_ends_with_one_line_of_verdicts_compared_and_divergences) {
    const std::string run = "--workload send_bw --size 64 --iters 200";
    result r;
    const nlohmann::json j = run_json(run + " --set hca.pkey_checker.impl=both", "both_line", &r);
    ASSERT_FALSE(j.is_null());
    const uint64_t compared =
        ctr(j, "node0.hca.pkey_checker.rtl_compared") + ctr(j, "node1.hca.pkey_checker.rtl_compared");
    EXPECT_GT(compared, 0u);
    // The run's last line, after the table.
    const std::string line =
        " co-simulation (hca.pkey_checker.impl=both on node0, node1): " + std::to_string(compared) +
        " verdicts compared, 0 divergences\n";
    ASSERT_GE(r.out.size(), line.size());
    EXPECT_EQ(r.out.substr(r.out.size() - line.size()), line) << r.out;
    // One node side by side names that node alone; the TLM model or the RTL alone compare nothing.
    const result one = run_hcasim(run + " --set node1.hca.pkey_checker.impl=both", "both_one");
    EXPECT_EQ(one.code, 0) << one.err;
    EXPECT_NE(one.out.find("impl=both on node1): "), std::string::npos) << one.out;
    for (const char* impl : {"tlm", "rtl"}) {
        const result none = run_hcasim(run + " --set hca.pkey_checker.impl=" + impl, "both_none");
        EXPECT_EQ(none.code, 0) << none.err;
        EXPECT_EQ(none.out.find("co-simulation"), std::string::npos) << impl << "\n" << none.out;
    }
}
