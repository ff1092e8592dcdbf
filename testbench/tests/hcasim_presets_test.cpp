// The presets in configs/ as users load them (docs/calibration.md): each file loads, every key it
// sets reaches both nodes, an unknown key in it fails at start-up, and exact physics holds with
// it (large RC WRITEs and READs run at the lesser of link goodput and the PCIe bound; the
// transport engine's pipeline latency adds exactly its cycles). And the generated tables of
// docs/calibration.md are current: scripts/calibration.py --check regenerates them with the
// built hcasim and fails on a stale number or a fit point out of its tolerance.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

#include "model/fabric/link.h"
#include "testbench/tests/hcasim_run.h"
#include "model/pcie/pcie_link.h"

namespace {

/// Every preset file, in the order of docs/calibration.md (a new file must be added here).
const std::vector<std::string> presets = {"fdr-cx3",        "fdr-cib", "edr-cx4-gen3x16", "edr-cx5",
                                          "edr-cx5-gen3x8", "hdr-cx6", "ndr-cx7",         "two-nodes-switch"};

using hcasim::test::have_python3;
using hcasim::test::result;
using hcasim::test::slurp;

std::string temp_path(const std::string& name) {
    return ::testing::TempDir() + name + "_" + std::to_string(getpid());
}

/// Runs hcasim with `args` (shell words) from the source tree, capturing stdout and stderr.
result run(const std::string& args) { return hcasim::test::run_hcasim(args, "presets"); }

/// Runs hcasim with `args` plus --stats-json; fails the test unless it exits 0 with nothing on stderr.
nlohmann::json run_json(const std::string& args) {
    nlohmann::json j;
    const result r = hcasim::test::run_hcasim_stats(args, "presets", &j);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    EXPECT_EQ(r.err, "") << args;
    return j;
}

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

/// (key, value) of an INI file as docs/configuration.md defines it: sections prefix keys, `#` or
/// `;` at the start of a line or after whitespace starts a comment.
std::vector<std::pair<std::string, std::string>> read_ini(const std::string& path) {
    std::vector<std::pair<std::string, std::string>> kv;
    std::ifstream f(path);
    std::string line, section;
    while (std::getline(f, line)) {
        for (size_t i = 0; i < line.size(); ++i)
            if ((line[i] == '#' || line[i] == ';') && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
                line.resize(i);
                break;
            }
        line = trim(line);
        if (line.empty()) continue;
        if (line.front() == '[') {
            section = trim(line.substr(1, line.find(']') - 1));
            continue;
        }
        const size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        const std::string key = trim(line.substr(0, eq));
        kv.emplace_back(section.empty() ? key : section + "." + key, trim(line.substr(eq + 1)));
    }
    return kv;
}

std::string preset_path(const std::string& p) { return "configs/" + p + ".ini"; }

/// A node-0 parameter's final value from the stats JSON's configuration.
std::string cfg(const nlohmann::json& j, const std::string& key) {
    return j["config"]["node0." + key].get<std::string>();
}

class HcasimPreset : public ::testing::TestWithParam<std::string> {};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
    std::string s = info.param;
    std::replace(s.begin(), s.end(), '-', '_');
    return s;
}

}  // namespace

TEST(HcasimPresets, every_ini_in_configs_is_tested) {
    std::set<std::string> found;
    for (const auto& e : std::filesystem::directory_iterator(std::string(HCASIM_SOURCE_DIR) + "/configs"))
        if (e.path().extension() == ".ini") found.insert(e.path().stem().string());
    EXPECT_EQ(found, std::set<std::string>(presets.begin(), presets.end()));
}

// Every key of the file is consumed (else exit 2) and reaches both nodes with the file's value.
TEST_P(HcasimPreset, loads_and_every_key_reaches_both_nodes) {
    const auto kv = read_ini(std::string(HCASIM_SOURCE_DIR) + "/" + preset_path(GetParam()));
    ASSERT_FALSE(kv.empty());
    const nlohmann::json j =
        run_json("--config " + preset_path(GetParam()) + " --workload write_lat --size 2 --iters 20");
    ASSERT_TRUE(j.contains("config"));
    for (const auto& [key, value] : kv) {
        const auto& c = j["config"];
        if (c.contains(key)) {  // a parameter outside the nodes (fabric.*)
            EXPECT_EQ(c[key].get<std::string>(), value) << key;
            continue;
        }
        for (const char* node : {"node0.", "node1."}) {
            ASSERT_TRUE(c.contains(node + key)) << node << key;
            EXPECT_EQ(c[node + key].get<std::string>(), value) << node << key;
        }
    }
}

TEST_P(HcasimPreset, unknown_key_in_the_file_fails_at_start_up) {
    const std::string copy = temp_path(GetParam() + ".ini");
    std::string text = slurp(std::string(HCASIM_SOURCE_DIR) + "/" + preset_path(GetParam()));
    ASSERT_FALSE(text.empty());
    if (text.back() != '\n') text += '\n';
    const size_t line = size_t(std::count(text.begin(), text.end(), '\n')) + 2;
    std::ofstream(copy) << text << "[pcie]\nlanez = 8\n";
    const result r = run("--config '" + copy + "' --workload write_lat --size 2 --iters 20");
    std::remove(copy.c_str());
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: unknown configuration key 'pcie.lanez' (" + copy + ":" +
                         std::to_string(line) + ")\n");
}

namespace {

/// Gb/s that RC data of `bytes` gets on the preset's link at MTU 4096: 26 header bytes per
/// packet (LRH, BTH, ICRC, VCRC) and `extra` bytes per message (RETH, AETH).
double link_goodput(const nlohmann::json& j, double bytes, double extra) {
    const double rate =
        hcasim::link::lane_data_rate_gbps(cfg(j, "link.speed")) * std::stod(cfg(j, "link.width"));
    return rate * bytes / (bytes + std::ceil(bytes / 4096) * 26 + extra);
}

unsigned cfg_u(const nlohmann::json& j, const std::string& key) { return unsigned(std::stoul(cfg(j, key))); }

}  // namespace

// 1 MiB RDMA WRITEs stream at min(link goodput, PCIe write bound of the responder's 4 KiB packet
// writes) within 0.5% (start-up and the last ACK), and never above it.
TEST_P(HcasimPreset, write_bw_1mib_is_the_lesser_of_link_goodput_and_pcie_write_bound) {
    const nlohmann::json j =
        run_json("--config " + preset_path(GetParam()) + " --workload write_bw --size 1M --iters 200");
    ASSERT_TRUE(j.contains("results"));
    const double link = link_goodput(j, 1 << 20, 16);  // RETH in the first packet
    const double pcie = hcasim::pcie_link::write_gbps(cfg_u(j, "pcie.generation"), cfg_u(j, "pcie.lanes"),
                                                      cfg_u(j, "pcie.mps_bytes"), 4096);
    const double bound = std::min(link, pcie);
    const double bw = j["results"][0]["bw_gbps"].get<double>();
    EXPECT_NEAR(bw, bound, bound * 0.005) << "link " << link << " Gb/s, PCIe write " << pcie << " Gb/s";
    EXPECT_LE(bw, bound * 1.0001);
}

// 1 MiB RDMA READs: the responder reads host memory, the requester writes it, the responses carry
// an AETH in their first and last packets: min(link goodput, PCIe read, PCIe write) within 0.5%.
TEST_P(HcasimPreset, read_bw_1mib_is_the_lesser_of_link_goodput_and_pcie_bounds) {
    const nlohmann::json j =
        run_json("--config " + preset_path(GetParam()) + " --workload read_bw --size 1M --iters 200");
    ASSERT_TRUE(j.contains("results"));
    const unsigned gen = cfg_u(j, "pcie.generation"), lanes = cfg_u(j, "pcie.lanes"),
                   mps = cfg_u(j, "pcie.mps_bytes");
    const double link = link_goodput(j, 1 << 20, 8);
    const double bound =
        std::min({link, hcasim::pcie_link::write_gbps(gen, lanes, mps, 4096),
                  hcasim::pcie_link::read_gbps(gen, lanes, mps, cfg_u(j, "pcie.mrrs_bytes"), 4096)});
    const double bw = j["results"][0]["bw_gbps"].get<double>();
    EXPECT_NEAR(bw, bound, bound * 0.005);
    EXPECT_LE(bw, bound * 1.0001);
}

// The calibrated parameter is a pipeline latency: a 2 B WRITE's one-way latency moves by exactly
// (tx_latency_cycles - 64 + rx_latency_cycles - 64) HCA cycles against the 64-cycle defaults.
TEST_P(HcasimPreset, pipeline_latency_cycles_add_exactly_their_time) {
    const std::string base =
        "--config " + preset_path(GetParam()) + " --workload write_lat --size 2 --iters 200";
    const nlohmann::json a = run_json(base);
    const nlohmann::json b = run_json(base +
                                      " --set hca.transport_engine.tx_latency_cycles=64"
                                      " --set hca.transport_engine.rx_latency_cycles=64");
    ASSERT_TRUE(a.contains("results") && b.contains("results"));
    const double cycles = double(cfg_u(a, "hca.transport_engine.tx_latency_cycles")) - 64 +
                          double(cfg_u(a, "hca.transport_engine.rx_latency_cycles")) - 64;
    const double expect_us = cycles / std::stod(cfg(a, "hca.clock_mhz"));
    const double got_us =
        a["results"][0]["lat_typical_us"].get<double>() - b["results"][0]["lat_typical_us"].get<double>();
    EXPECT_NEAR(got_us, expect_us, 0.001);  // perftest's typical has 0.5 ns resolution
}

INSTANTIATE_TEST_SUITE_P(Configs, HcasimPreset, ::testing::ValuesIn(presets), param_name);

TEST(HcasimCalibration, docs_calibration_md_is_current_and_fit_points_within_tolerance) {
    if (!have_python3()) GTEST_SKIP() << "python3 not found; cannot run scripts/calibration.py";
#if defined(__SANITIZE_ADDRESS__)
    // The figures do not depend on the build type and the release pass checks them; 81 runs of
    // a sanitised hcasim would take minutes.
    GTEST_SKIP() << "sanitizer build: the release build's ctest checks docs/calibration.md";
#endif
    const std::string cmd = std::string("cd '") + HCASIM_SOURCE_DIR +
                            "' && python3 scripts/calibration.py --check --hcasim '" + HCASIM_BIN + "'";
    const int rc = std::system(cmd.c_str());
    ASSERT_NE(rc, -1) << "could not run: " << cmd;
    ASSERT_TRUE(WIFEXITED(rc)) << cmd << " did not exit normally";
    EXPECT_EQ(WEXITSTATUS(rc), 0)
        << cmd << " failed (see above): if the model changed on purpose, run "
        << "`python3 scripts/calibration.py` and explain the moved numbers in docs/calibration.md";
}

// libsystemc (linked through testbench_lib) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
