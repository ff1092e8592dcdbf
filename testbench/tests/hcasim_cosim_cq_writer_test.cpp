// The hcasim program with the CQ writer's RTL (issue 34, docs/cosim.md): impl=rtl writes the
// same completions as the TLM model, impl=both compares every transaction and host memory write
// of a run and ends with its summary line, the broken build is caught with a report naming the
// byte, per-node selection, and one-line errors for what cannot work.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim::test;

namespace {

nlohmann::json run_json(const std::string& args, const std::string& tag, result* r_out = nullptr) {
    return run_ok_json(args, "cosim_cq_" + tag, r_out);
}
uint64_t ctr(const nlohmann::json& j, const std::string& key) { return json_counter(j, key); }

}  // namespace

TEST(HcasimCosimCqWriter, rtl_writes_the_completions_the_tlm_model_writes_and_verify_passes) {
    // Two QPs streaming SENDs with verification: every message's bytes and completion checked.
    const std::string run = "--workload send_bw --size 64,1K --qps 2 --iters 1000 --verify";
    const nlohmann::json tlm = run_json(run, "tlm");
    const nlohmann::json rtl = run_json(run + " --set hca.cq_writer.impl=rtl", "rtl");
    ASSERT_FALSE(tlm.is_null());
    ASSERT_FALSE(rtl.is_null());
    for (const char* n : {"node0", "node1"}) {
        const std::string k = std::string(n) + ".hca.cq_writer.";
        EXPECT_GT(ctr(tlm, k + "cqes"), 0u) << n;
        EXPECT_EQ(ctr(rtl, k + "cqes"), ctr(tlm, k + "cqes")) << n;
        EXPECT_EQ(ctr(rtl, k + "events"), ctr(tlm, k + "events")) << n;
        EXPECT_EQ(ctr(rtl, k + "overruns"), 0u) << n;
        EXPECT_EQ(ctr(tlm, k + "rtl_ops"), 0u) << n;
        // Every completion, CQ and EQ load and doorbell went through the RTL.
        EXPECT_GT(ctr(rtl, k + "rtl_ops"), ctr(rtl, k + "cqes")) << n;
        EXPECT_GT(ctr(rtl, k + "rtl_cycles"), 0u) << n;
        EXPECT_EQ(ctr(rtl, k + "cqc_misses"), ctr(tlm, k + "cqc_misses"))
            << n << ": the cache stays in the model";
    }
    ASSERT_EQ(rtl["results"].size(), tlm["results"].size());
    for (size_t i = 0; i < tlm["results"].size(); ++i)
        EXPECT_EQ(rtl["results"][i]["iters"], tlm["results"][i]["iters"]);
}

TEST(HcasimCosimCqWriter, both_compares_every_transaction_and_write_and_ends_with_one_summary_line) {
    const std::string run = "--workload send_lat --size 8,4K --iters 200 --verify";
    result r;
    const nlohmann::json tlm = run_json(run, "both_tlm");
    const nlohmann::json j = run_json(run + " --set hca.cq_writer.impl=both", "both", &r);
    ASSERT_FALSE(j.is_null());
    ASSERT_FALSE(tlm.is_null());
    uint64_t compared = 0, writes = 0;
    for (const char* n : {"node0", "node1"}) {
        const std::string k = std::string(n) + ".hca.cq_writer.";
        EXPECT_EQ(ctr(j, k + "divergences"), 0u) << n;
        // Each CQE the model wrote was one transaction the RTL answered alike and one write it made
        // (latency runs poll: no events).
        EXPECT_EQ(ctr(j, k + "rtl_compared"), ctr(j, k + "cqes")) << n;
        EXPECT_EQ(ctr(j, k + "rtl_writes_compared"), ctr(j, k + "cqes")) << n;
        // The model decides what the rest of the HCA sees: the same as the TLM model alone.
        EXPECT_EQ(ctr(j, k + "cqes"), ctr(tlm, k + "cqes")) << n;
        compared += ctr(j, k + "rtl_compared");
        writes += ctr(j, k + "rtl_writes_compared");
    }
    // impl=both keeps the TLM model's timing: the same latencies, message by message.
    ASSERT_EQ(j["results"].size(), tlm["results"].size());
    for (size_t i = 0; i < tlm["results"].size(); ++i)
        for (const char* f : {"lat_cdf_us", "lat_avg_us", "verify", "breakdown_us"})
            EXPECT_EQ(j["results"][i][f], tlm["results"][i][f]) << f;
    const std::string head =
        " co-simulation (hca.cq_writer.impl=both on node0, node1): " + std::to_string(compared) +
        " transactions compared, " + std::to_string(writes) + " host memory writes compared (latency within ";
    const size_t at = r.out.rfind(head);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(r.out.size() - std::string(" ns of the model's), 0 divergences\n").size()),
              " ns of the model's), 0 divergences\n")
        << r.out;
    // A polled CQE: the RTL writes it WRITE_CYCLES + 2 cycles and the clock's alignment after the
    // model (8 + 2 .. 8 + 3 cycles of 1.25 ns against the model's 8): at most 3.75 ns apart.
    const double skew = std::stod(r.out.substr(at + head.size()));
    EXPECT_GT(skew, 0.0);
    EXPECT_LE(skew, 3.75);
}

TEST(HcasimCosimCqWriter, the_broken_build_stops_the_run_at_the_first_cqe_after_the_ring_wraps) {
    // The broken build's owner bit is right on the first pass of a ring (2048 entries here), wrong
    // from the first CQE of the second.
    result r;
    const std::string run =
        "--workload send_bw --size 64 --iters 3000 --set hca.cq_writer.impl=both "
        "--set hca.cq_writer.rtl_variant=broken_owner";
    r = run_hcasim(run, "cosim_cq_broken");
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_NE(r.err.find("hcasim: run failed: co-simulation divergence (hca.cq_writer.impl=both):\n"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find(".hca.cq_writer: TLM and RTL diverge at "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("the host memory writes differ\n  transaction: completion (tag "), std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("  bytes that differ: 63 (TLM 00, RTL 01)\n"), std::string::npos) << r.err;
    EXPECT_NE(r.out.find(", 1 divergence"), std::string::npos) << r.out;
}

TEST(HcasimCosimCqWriter, one_node_runs_the_rtl_with_the_node_prefix) {
    const nlohmann::json j =
        run_json("--workload write_lat --size 8 --iters 50 --set node1.hca.cq_writer.impl=rtl", "node1");
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(ctr(j, "node0.hca.cq_writer.rtl_ops"), 0u);
    EXPECT_GT(ctr(j, "node1.hca.cq_writer.rtl_ops"), 0u);
    EXPECT_EQ(j["config"].value("node1.hca.cq_writer.impl", ""), "rtl");
    EXPECT_EQ(j["config"].value("node0.hca.cq_writer.impl", ""), "tlm");
}

TEST(HcasimCosimCqWriter, what_the_rtl_is_not_built_for_is_a_one_line_error) {
    struct bad {
        const char* args;
        const char* message;
    } cases[] = {
        {"--workload write_bw --iters 10 --set hca.cq_writer.impl=rtl --set hca.cq_writer.write_cycles=4",
         "hcasim: error: node0.hca.cq_writer.write_cycles is 4, but the RTL (impl=rtl) is built with "
         "WRITE_CYCLES 8\n"},
        {"--workload write_bw --iters 10 --set hca.cq_writer.impl=both --set hca.max_cqs=4096",
         "hcasim: error: max_cqs is 4096, but the CQ writer's RTL (node0.hca.cq_writer.impl=both) is built "
         "with 1024 CQ contexts\n"},
    };
    for (const bad& b : cases) {
        const result r = run_hcasim(b.args, "cosim_cq_bad");
        EXPECT_EQ(r.code, 2) << b.args;
        EXPECT_EQ(r.err, b.message) << b.args;
    }
    const result r =
        run_hcasim("--workload write_bw --iters 10 --set hca.cq_writer.rtl_variant=nope", "cosim_cq_bad");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("broken_owner"), std::string::npos) << r.err;
}

TEST(HcasimCosimCqWriter, waves_writes_the_cq_writers_pins_and_needs_some_unit_as_rtl) {
    const std::string file = ::testing::TempDir() + "cosim_cq_waves_" + std::to_string(getpid()) + ".fst";
    std::filesystem::remove(file);
    const result r = run_hcasim(
        "--workload write_lat --size 8 --iters 20 --set hca.cq_writer.impl=rtl --waves '" + file + "'",
        "cq_waves");
    EXPECT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(std::filesystem::exists(file));
    EXPECT_GT(std::filesystem::file_size(file), 100u);
    std::filesystem::remove(file);
    const result none =
        run_hcasim("--workload write_lat --size 8 --iters 20 --waves '" + file + "'", "cq_waves");
    EXPECT_EQ(none.code, 2);
    EXPECT_NE(none.err.find("no node runs a unit as RTL"), std::string::npos) << none.err;
    EXPECT_FALSE(std::filesystem::exists(file));
}
