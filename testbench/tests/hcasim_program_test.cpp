// The hcasim program as users run it: exit codes and one-line errors for bad input, the
// stable parameter names, the stats JSON layout, node-prefix overrides, determinism, presets.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct result {
    int code = -1;
    std::string out, err;
};

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/// Runs hcasim with `args` (shell words), capturing stdout and stderr.
result run(const std::string& args) {
    const std::string dir = ::testing::TempDir();
    const std::string tag = std::to_string(getpid());
    const std::string out = dir + "hcasim_out_" + tag, err = dir + "hcasim_err_" + tag;
    const std::string cmd = std::string("cd '") + HCASIM_SOURCE_DIR + "' && '" + HCASIM_BIN + "' " + args + " >'" +
                            out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    std::remove(out.c_str());
    std::remove(err.c_str());
    return r;
}

std::string temp_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + name + "_" + std::to_string(getpid());
    std::ofstream(path) << text;
    return path;
}

}  // namespace

TEST(HcasimProgram, unknown_key_is_one_line_error_exit_2) {
    const result r = run("--workload write_bw --size 4K --iters 10 --set pcie.lanez=8");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: unknown configuration key 'pcie.lanez' (--set)\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimProgram, unknown_key_in_file_names_file_and_line) {
    const std::string f = temp_file("bad.ini", "# preset\n[pcie]\nlanes = 8\nlanez = 4\n");
    const result r = run("--workload write_bw --size 4K --iters 10 --config '" + f + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("unknown configuration key 'pcie.lanez' (" + f + ":4)"), std::string::npos) << r.err;
}

TEST(HcasimProgram, bad_value_names_key_origin_and_expectation) {
    const result r = run("--workload write_bw --size 4K --iters 10 --set link.speed=xdr");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("bad value 'xdr'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("link.speed"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("sdr|ddr|qdr|fdr|edr|hdr|ndr"), std::string::npos) << r.err;
    const result lanes = run("--workload write_bw --size 4K --iters 10 --set pcie.lanes=3");
    EXPECT_EQ(lanes.code, 2);
    EXPECT_NE(lanes.err.find("pcie.lanes"), std::string::npos) << lanes.err;
}

TEST(HcasimProgram, missing_config_file_and_malformed_line) {
    const result r = run("--config /nonexistent/x.ini");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: cannot open configuration file '/nonexistent/x.ini'\n");
    const std::string f = temp_file("junk.ini", "[pcie]\nthis is not a key\n");
    const result j = run("--config '" + f + "'");
    EXPECT_EQ(j.code, 2);
    EXPECT_NE(j.err.find(f + ":2:"), std::string::npos) << j.err;
}

TEST(HcasimProgram, node_count_without_that_node_is_unknown_key) {
    const result r = run("--workload write_bw --size 4K --iters 10 --set node5.pcie.lanes=8");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("node5.pcie.lanes"), std::string::npos);
}

TEST(HcasimProgram, message_larger_than_2_pow_31_and_too_few_nodes_are_refused) {
    const result big = run("--workload write_bw --size 4G --iters 1");
    EXPECT_EQ(big.code, 2);
    EXPECT_NE(big.err.find("exceeds the largest message"), std::string::npos) << big.err;
    const result one = run("--workload write_bw --size 64 --iters 1 --set fabric.nodes=1");
    EXPECT_EQ(one.code, 1);
    EXPECT_NE(one.err.find("fabric.nodes >= 2"), std::string::npos) << one.err;
}

TEST(HcasimProgram, help_config_lists_the_stable_names) {
    const result r = run("--help-config");
    ASSERT_EQ(r.code, 0) << r.err;
    for (const char* key : {"link.speed", "link.width", "pcie.generation", "pcie.lanes", "pcie.mps_bytes",
                            "pcie.mrrs_bytes", "fabric.nodes"})
        EXPECT_NE(r.out.find(std::string("  ") + key + " "), std::string::npos) << key;
    EXPECT_NE(r.out.find("sdr|ddr|qdr|fdr|edr|hdr|ndr"), std::string::npos);
}

TEST(HcasimProgram, stats_json_layout_and_node_prefix_override) {
    const std::string json_path = ::testing::TempDir() + "stats_" + std::to_string(getpid()) + ".json";
    const result r = run("--workload write_bw --size 4K,64K --iters 50 --set node1.pcie.lanes=8 --stats-json '" +
                         json_path + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][0]["size_bytes"], 4096);
    EXPECT_EQ(j["results"][1]["size_bytes"], 65536);
    EXPECT_EQ(j["results"][0]["iters"], 50);
    EXPECT_GT(j["results"][1]["bw_gbps"].get<double>(), 50.0);
    EXPECT_GT(j["results"][1]["msg_rate_mpps"].get<double>(), 0.0);
    EXPECT_GT(j["sim"]["sim_time_ns"].get<uint64_t>(), 0u);
    EXPECT_GE(j["sim"]["wall_s"].get<double>(), 0.0);
    // 50 x 4 KiB (1 packet each) + 50 x 64 KiB (16 each), plus one ACK per message at least.
    EXPECT_GE(j["sim"]["wire_packets"].get<uint64_t>(), 50u * 17u);
    EXPECT_EQ(j["config"]["node1.pcie.lanes"], "8");
    EXPECT_EQ(j["config"]["node0.pcie.lanes"], "16");
    EXPECT_EQ(j["counters"]["node0.hca.transport_engine.tx_packets"], 50u * 17u);
    EXPECT_EQ(j["counters"]["node1.hca.transport_engine.rx_packets"], 50u * 17u);
}

TEST(HcasimProgram, latency_json_has_latency_fields) {
    const std::string json_path = ::testing::TempDir() + "lat_" + std::to_string(getpid()) + ".json";
    const result r = run("--workload send_lat --size 2 --iters 20 --stats-json '" + json_path + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    const auto& e = j["results"][0];
    EXPECT_GT(e["lat_typical_us"].get<double>(), 0.0);
    EXPECT_LE(e["lat_min_us"].get<double>(), e["lat_typical_us"].get<double>());
    EXPECT_GE(e["lat_p99_us"].get<double>(), e["lat_typical_us"].get<double>());
}

TEST(HcasimProgram, same_config_and_seed_give_byte_identical_output) {
    const std::string args = "--workload send_bw --size 2,4K --iters 200 --qps 2 --seed 7";
    const result a = run(args), b = run(args);
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(a.out.empty());
}

TEST(HcasimProgram, every_preset_loads_and_runs) {
    for (const char* preset : {"edr-cx4-gen3x16", "edr-cx5-gen3x8", "fdr-cx3-gen3x8", "hdr-gen4x16", "ndr-gen5x16",
                               "two-nodes-switch"}) {
        const result r = run(std::string("--config configs/") + preset + ".ini --workload write_bw --size 64K --iters 20");
        EXPECT_EQ(r.code, 0) << preset << ": " << r.err;
        EXPECT_NE(r.out.find("65536"), std::string::npos) << preset;
    }
}

TEST(HcasimProgram, dma_workloads_run_the_pcie_link_alone) {
    const result r = run("--workload dma_read_bw --size 4K --iters 2000 --set pcie.lanes=8");
    ASSERT_EQ(r.code, 0) << r.err;
    // Gen3 x8, MPS 256, MRRS 512: 53.69 Gb/s (calibration.md); the run adds one round trip.
    const size_t at = r.out.find("\n 4096 ");
    ASSERT_NE(at, std::string::npos) << r.out;
    std::istringstream row(r.out.substr(at));
    uint64_t size = 0, iters = 0;
    double gbps = 0;
    row >> size >> iters >> gbps;
    EXPECT_NEAR(gbps, 53.69, 53.69 * 0.01);
}

// libsystemc (linked through testbench_lib) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
