// The hcasim program as users run it: exit codes and one-line errors for bad input, the
// stable parameter names, the stats JSON layout, node-prefix overrides, determinism, presets,
// the READ and atomic workloads, --verify and its checker, --seed and link.seed, the UC and UD
// workloads (tables, the MTU limit of a datagram, lost datagrams).
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

#include "testbench/workloads/workloads.h"

namespace {

using hcasim::test::expect_verified;
using hcasim::test::result;
using hcasim::test::slurp;

/// Runs hcasim with `args` (shell words), capturing stdout and stderr.
result run(const std::string& args) { return hcasim::test::run_hcasim(args, "program"); }

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
    EXPECT_EQ(
        r.err,
        "hcasim: error: cannot open configuration file '/nonexistent/x.ini': No such file or directory\n");
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
    const result r =
        run("--workload write_bw --size 4K,64K --iters 50 --set node1.pcie.lanes=8 --stats-json '" +
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

// Issue 27, write errors: every output path checked before the run; written whole or not at all.
TEST(HcasimProgram, stats_json_to_an_unwritable_path_is_refused_before_the_simulation) {
    const std::string file = temp_file("plain_file", "x");
    struct bad {
        std::string path, why;
    };
    const bad cases[] = {{"/nonexistent/dir/s.json", "No such file or directory"},
                         {::testing::TempDir(), "Is a directory"},
                         {file + "/s.json", "Not a directory"}};
    for (const bad& c : cases) {
        const result r = run("--workload write_bw --size 64 --iters 2000 --stats-json '" + c.path + "'");
        EXPECT_EQ(r.code, 2) << c.path;
        EXPECT_EQ(r.out, "") << c.path;  // no table: the simulation did not run
        EXPECT_EQ(r.err, "hcasim: error: --stats-json: cannot write '" + c.path + "': " + c.why + "\n");
    }
    std::remove(file.c_str());
}

TEST(HcasimProgram, stats_json_with_an_empty_path_is_refused) {
    const result r = run("--workload write_bw --size 64 --iters 10 --stats-json ''");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(r.err, "hcasim: error: --stats-json: expected a file name\n");
}

TEST(HcasimProgram, stats_json_on_a_full_disk_keeps_the_old_file_and_exits_2) {
    HCASIM_SKIP_WHERE_ASAN_MISREADS_A_THROW_AFTER_THE_RUN();
    const std::string dir = hcasim::test::empty_dir("stats_disk");
    const std::string f = dir + "/s.json";
    std::ofstream(f) << "old";
    std::filesystem::permissions(f, std::filesystem::perms(0640));
    const std::string args = "--workload write_bw --size 4K --iters 10 --stats-json '" + f + "'";
    // Files stop growing at 8 KiB (the stats JSON is larger): the old file stays, no temporary is left.
    const result r = hcasim::test::run_hcasim(args, "program", hcasim::test::file_limit(8));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --stats-json: cannot write '" + f + "': File too large\n");
    EXPECT_EQ(slurp(f), "old");
    EXPECT_EQ(hcasim::test::dir_entries(dir), std::vector<std::string>{"s.json"});
    const result full = run("--workload write_bw --size 4K --iters 10 --stats-json /dev/full");
    EXPECT_EQ(full.code, 2);
    EXPECT_EQ(full.err, "hcasim: error: --stats-json: cannot write '/dev/full': No space left on device\n");
    // With room, the new file replaces the old one and keeps its permissions.
    ASSERT_EQ(run(args).code, 0);
    EXPECT_EQ(nlohmann::json::parse(slurp(f))["results"][0]["size_bytes"], 4096);
    EXPECT_EQ(std::filesystem::status(f).permissions(), std::filesystem::perms(0640));
    EXPECT_EQ(hcasim::test::dir_entries(dir), std::vector<std::string>{"s.json"});
    std::filesystem::remove_all(dir);
}

TEST(HcasimProgram, stats_json_through_a_symbolic_link_replaces_the_links_target) {
    const std::string dir = hcasim::test::empty_dir("stats_link");
    std::filesystem::create_directory(dir + "/real");
    std::ofstream(dir + "/real/s.json") << "old";
    std::filesystem::create_symlink("real/s.json", dir + "/s.json");
    const result r = run("--workload write_bw --size 4K --iters 10 --stats-json '" + dir + "/s.json'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(std::filesystem::is_symlink(dir + "/s.json"));
    EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/real/s.json"))["results"][0]["size_bytes"], 4096);
    EXPECT_EQ(hcasim::test::dir_entries(dir + "/real"), std::vector<std::string>{"s.json"});
    std::filesystem::remove_all(dir);
}

TEST(HcasimProgram, stats_json_to_dev_stdout_follows_the_table) {
    // Not a regular file: written directly (not replaced), after what the program printed.
    const result r = run("--workload write_bw --size 4K --iters 10 --stats-json /dev/stdout");
    ASSERT_EQ(r.code, 0) << r.err;
    const size_t json = r.out.find("\n{\n");
    ASSERT_NE(json, std::string::npos) << r.out;
    EXPECT_NE(r.out.substr(0, json).find(" 4096       10"), std::string::npos) << r.out;
    EXPECT_EQ(nlohmann::json::parse(r.out.substr(json + 1))["results"][0]["size_bytes"], 4096);
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
    const std::string args = "--workload send_bw --size 2,4K --iters 100 --qps 2 --seed 7";
    const result a = run(args), b = run(args);
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
    EXPECT_FALSE(a.out.empty());
}

TEST(HcasimProgram, every_preset_loads_and_runs) {
    for (const char* preset : {"fdr-cx3", "edr-cx4-gen3x16", "edr-cx5", "edr-cx5-gen3x8", "hdr-cx6",
                               "ndr-cx7", "two-nodes-switch"}) {
        const result r =
            run(std::string("--config configs/") + preset + ".ini --workload write_bw --size 64K --iters 20");
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

// ------------------------------------------------------------------ READ, atomics, --verify

namespace {

/// Runs hcasim with `args` plus --stats-json; the JSON is null if the file was not written.
result run_json(const std::string& args, nlohmann::json* j) {
    return hcasim::test::run_hcasim_stats(args, "program", j);
}

/// The table without its title line (which names the seed).
std::string without_seed_line(const std::string& out) {
    const size_t at = out.find(" (seed ");
    return at == std::string::npos ? out : out.substr(out.find('\n', at));
}

/// The table without its --verify line.
std::string without_verify_line(const std::string& out) {
    std::istringstream in(out);
    std::string line, kept;
    while (std::getline(in, line))
        if (line.rfind(" verify: ", 0) != 0) kept += line + "\n";
    return kept;
}

}  // namespace

TEST(HcasimProgram, verify_checks_write_send_and_dma_write_workloads) {
    for (const std::string args :
         {"--workload write_lat --size 2,4K --iters 50", "--workload send_lat --size 2,4K,4100 --iters 50",
          "--workload write_bw --size 4K,64K --iters 100 --qps 2",
          "--workload send_bw --size 2,64K --iters 67 --qps 3",
          "--workload dma_write_bw --size 64,4K --iters 500"}) {
        nlohmann::json j;
        const result r = run_json(args + " --verify", &j);
        ASSERT_EQ(r.code, 0) << args << ": " << r.err;
        expect_verified(j, args);
        EXPECT_NE(r.out.find("\n verify: "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find(" 0 mismatches, 0 bad completions"), std::string::npos) << r.out;
    }
    // Every latency iteration is checked whole on both sides: 50 x (2 + 4096) bytes x 2 nodes.
    nlohmann::json j;
    ASSERT_EQ(run_json("--workload write_lat --size 2,4K --iters 50 --verify", &j).code, 0);
    EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], 50 * 2 * 2);
    EXPECT_EQ(j["results"][1]["verify"]["bytes_checked"], 50 * 4096 * 2);
}

TEST(HcasimProgram, verify_reports_dma_read_data_as_not_applicable) {
    nlohmann::json j;
    const result r = run_json("--workload dma_read_bw --size 4K --iters 100 --verify", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(j["results"][0]["verify"]["applicable"], false);
    EXPECT_EQ(j["results"][0]["verify"]["bad_completions"], 0);
    EXPECT_NE(r.out.find(" verify: data not applicable"), std::string::npos) << r.out;
}

TEST(HcasimProgram, verify_does_not_change_the_figures) {
    for (const std::string args : {"--workload write_bw --size 2,64K --iters 150 --qps 2",
                                   "--workload send_lat --size 2,8K --iters 100", "--iters 20 --size 2,1M"}) {
        const result plain = run(args), verified = run(args + " --verify");
        ASSERT_EQ(plain.code, 0) << plain.err;
        ASSERT_EQ(verified.code, 0) << verified.err;
        EXPECT_EQ(without_verify_line(verified.out), plain.out) << args;
        EXPECT_NE(verified.out, plain.out);
    }
}

TEST(HcasimProgram, verify_catches_dma_writes_that_never_land) {
    // Host memory ends at 4 GiB, where dma_write_bw writes: the posted writes fail at the memory
    // (a warning each) and the run's figures look normal; --verify finds the bytes missing.
    nlohmann::json j;
    const result plain =
        run("--workload dma_write_bw --size 64 --iters 100 --set memory.size_bytes=4294967296");
    EXPECT_EQ(plain.code, 0) << plain.err;
    const result r = run_json(
        "--workload dma_write_bw --size 64 --iters 100 --set memory.size_bytes=4294967296 --verify", &j);
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("hcasim: run failed: verify: dma_write_bw 64 B: 100 DMA transfers failed\n"),
              std::string::npos)
        << r.err;
    ASSERT_FALSE(j.is_null());  // the stats JSON is still written, with the counts
    EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], 6400);
    EXPECT_EQ(j["results"][0]["verify"]["mismatches"], 6400);
    EXPECT_EQ(j["results"][0]["verify"]["bad_completions"], 100);
}

TEST(HcasimProgram, verify_checker_names_the_first_mismatch) {
    using namespace hcasim::verify;
    const uint64_t k = data_key(1, 0, 2, 3, 4);
    EXPECT_NE(k, data_key(1, 0, 2, 3, 5));  // message
    EXPECT_NE(k, data_key(1, 1, 2, 3, 4));  // node
    EXPECT_NE(k, data_key(1, 0, 1, 3, 4));  // QP
    EXPECT_NE(k, data_key(2, 0, 2, 3, 4));  // seed
    std::vector<uint8_t> buf(100), other(100);
    fill(k, buf.data(), buf.size());
    fill(data_key(1, 0, 2, 3, 5), other.data(), other.size());
    EXPECT_NE(buf, other);

    checker c;
    const where w{"write_bw", 100, 1, 2, 17, "destination buffer"};
    EXPECT_TRUE(c.bytes(w, buf.data(), buf.size(), k));
    EXPECT_EQ(c.bytes_checked, 100u);
    EXPECT_TRUE(c.first_failure.empty());
    buf[99] = 0x7f;  // the last byte as a flag (write_lat)
    EXPECT_TRUE(c.bytes(w, buf.data(), buf.size(), k, 0x7f));
    const uint8_t was = buf[40];
    buf[40] = uint8_t(was ^ 0x01);
    buf[60] = uint8_t(buf[60] ^ 0xff);
    EXPECT_FALSE(c.bytes(w, buf.data(), buf.size(), k, 0x7f));
    EXPECT_EQ(c.mismatches, 2u);
    char want[160];
    std::snprintf(
        want, sizeof want,
        "write_bw 100 B, node1 QP 2 message 17, destination buffer: byte 40 expected 0x%02x, got 0x%02x "
        "(2 of 100 bytes differ)",
        was, uint8_t(was ^ 0x01));
    EXPECT_EQ(c.first_failure, want);

    // Later failures are counted, the first one is kept.
    EXPECT_FALSE(c.value(where{"atomic_rate", 8, 0, 0, 5, "fetched value"}, 0x10, 0x11));
    c.bad_completion(w, "opcode 0, expected 128");
    EXPECT_EQ(c.mismatches, 3u);
    EXPECT_EQ(c.bad_completions, 1u);
    EXPECT_EQ(c.bytes_checked, 308u);
    EXPECT_EQ(c.first_failure, want);

    checker d;
    d.value(where{"atomic_lat", 8, 0, 0, 5, "fetched value"}, 0x10, 0x11);
    EXPECT_EQ(d.first_failure,
              "atomic_lat 8 B, node0 QP 0 message 5, fetched value: expected 0x0000000000000011, got "
              "0x0000000000000010");
}

TEST(HcasimProgram, atomics_move_8_bytes_and_take_an_operation) {
    const result big = run("--workload atomic_lat --size 16");
    EXPECT_EQ(big.code, 2);
    EXPECT_EQ(big.err, "hcasim: error: --size: atomic_lat moves 8 bytes (64-bit atomics), got 16\n");
    const result op = run("--workload atomic_rate --atomic xor");
    EXPECT_EQ(op.code, 2);
    EXPECT_NE(op.err.find("--atomic: expected fetch_add|cmp_swap, got 'xor'"), std::string::npos) << op.err;
    const result wrong = run("--workload write_lat --atomic cmp_swap");
    EXPECT_EQ(wrong.code, 2);
    EXPECT_NE(wrong.err.find("only atomic_lat and atomic_rate"), std::string::npos) << wrong.err;
    const result zero = run("--workload write_lat --size 0");
    EXPECT_EQ(zero.code, 2);
    EXPECT_NE(zero.err.find("write_lat needs messages of at least 1 byte"), std::string::npos) << zero.err;
}

TEST(HcasimProgram, read_and_atomic_workloads_print_sane_figures) {
    nlohmann::json w, rl, rb, al, ar;
    ASSERT_EQ(run_json("--workload write_lat --size 2,4K --iters 100", &w).code, 0);
    const result read = run_json("--workload read_lat --size 2,4K --iters 100", &rl);
    ASSERT_EQ(read.code, 0) << read.err;
    EXPECT_NE(read.out.find("hcasim read_lat (seed 1)"), std::string::npos) << read.out;
    for (int k = 0; k < 2; ++k) {
        // A READ's latency is its whole round trip; write_lat reports half of a ping-pong.
        const double r = rl["results"][k]["lat_typical_us"], wr = w["results"][k]["lat_typical_us"];
        EXPECT_GT(r, wr) << rl["results"][k]["size_bytes"];
        EXPECT_LT(r, 4 * wr);
        EXPECT_LE(rl["results"][k]["lat_min_us"].get<double>(), r);
        EXPECT_GE(rl["results"][k]["lat_p99_us"].get<double>(), r);
    }
    ASSERT_EQ(run_json("--workload read_bw --size 64K --iters 300", &rb).code, 0);
    EXPECT_GT(rb["results"][0]["bw_gbps"].get<double>(), 50.0);
    EXPECT_LT(rb["results"][0]["bw_gbps"].get<double>(), 100.0);
    const result atomic = run_json("--workload atomic_lat --iters 100", &al);
    ASSERT_EQ(atomic.code, 0) << atomic.err;
    const auto& a = al["results"][0];
    EXPECT_EQ(a["size_bytes"], 8);
    for (const char* f : {"lat_typical_us", "lat_min_us", "lat_p99_us", "lat_max_us", "lat_avg_us"})
        EXPECT_GT(a[f].get<double>(), 0.0) << f;
    EXPECT_GT(a["lat_typical_us"].get<double>(), w["results"][0]["lat_typical_us"].get<double>());
    const result rate = run_json("--workload atomic_rate --iters 500 --qps 2 --atomic cmp_swap", &ar);
    ASSERT_EQ(rate.code, 0) << rate.err;
    EXPECT_EQ(ar["results"][0]["size_bytes"], 8);
    EXPECT_GT(ar["results"][0]["msg_rate_mpps"].get<double>(), 0.1);
}

TEST(HcasimProgram, verify_checks_read_and_atomic_workloads) {
    for (const std::string args :
         {"--workload read_lat --size 2,4K --iters 50",
          "--workload read_bw --size 4K,64K --iters 150 --qps 2", "--workload atomic_lat --iters 100",
          "--workload atomic_lat --iters 100 --atomic cmp_swap", "--workload atomic_rate --iters 333 --qps 3",
          "--workload atomic_rate --iters 1000 --atomic cmp_swap"}) {
        nlohmann::json j;
        const result r = run_json(args + " --verify", &j);
        ASSERT_EQ(r.code, 0) << args << ": " << r.err;
        expect_verified(j, args);
    }
    // atomic_lat: every fetched value and the final remote value, 8 bytes each.
    nlohmann::json j;
    ASSERT_EQ(run_json("--workload atomic_lat --iters 100 --verify", &j).code, 0);
    EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], 101 * 8);
}

TEST(HcasimProgram, checker_follows_the_serial_chain_of_atomics_on_a_shared_word) {
    using namespace hcasim::verify;
    const where w{"atomic_rate", 8, 0, 0, 0, ""};
    // FETCH_AND_ADD from 100: executed as (qp 1, 0) +5, (qp 0, 0) +7, (qp 1, 1) +1; completions
    // arrive in another order.
    const std::vector<shared_atomic> good{{0, 0, 105, 7}, {1, 1, 112, 1}, {1, 0, 100, 5}};
    checker ok;
    ok.shared_word(w, false, 100, good, 113);
    EXPECT_TRUE(ok.first_failure.empty()) << ok.first_failure;
    EXPECT_EQ(ok.bytes_checked, 4u * 8);
    // A lost update: two atomics fetched 105, the word ends 7 short.
    checker lost;
    lost.shared_word(w, false, 100, {{1, 0, 100, 5}, {0, 0, 105, 7}, {1, 1, 105, 1}}, 106);
    EXPECT_EQ(lost.first_failure,
              "atomic_rate 8 B, node0 QP 1 message 1, fetched value (shared word: off the serial chain): "
              "expected 0x0000000000000070, got 0x0000000000000069");
    EXPECT_EQ(lost.bytes_checked, 4u * 8);
    // The final value disagrees with the chain.
    checker end;
    end.shared_word(w, false, 100, good, 112);
    EXPECT_EQ(end.first_failure,
              "atomic_rate 8 B, node1 QP 0 message 2, shared word after the last atomic: "
              "expected 0x0000000000000071, got 0x0000000000000070");
    // COMPARE_AND_SWAP, every one expecting 100: the first executed swaps in its 9, the others
    // fetch 9.
    checker cas;
    cas.shared_word(w, true, 100, {{1, 0, 9, 4}, {0, 0, 100, 9}, {0, 1, 9, 8}}, 9);
    EXPECT_TRUE(cas.first_failure.empty()) << cas.first_failure;
    checker two;
    two.shared_word(w, true, 100, {{0, 0, 100, 9}, {1, 0, 100, 4}}, 4);
    EXPECT_EQ(two.first_failure,
              "atomic_rate 8 B, node0 QP 1 message 0, fetched value (shared word): "
              "expected 0x0000000000000009, got 0x0000000000000064");
}

TEST(HcasimProgram, atomic_rate_on_a_shared_word_is_serialised_whatever_the_qp_count) {
    const std::string shared = " --set workload.atomic_word=shared";
    // Every QP's atomics go to one word: the rate stays that of one QP (the responder starts an
    // atomic on a word after the previous one's read-modify-write at host memory).
    nlohmann::json one, four, sixteen, own;
    ASSERT_EQ(run_json("--workload atomic_rate --iters 2000" + shared, &one).code, 0);
    ASSERT_EQ(run_json("--workload atomic_rate --iters 500 --qps 4" + shared, &four).code, 0);
    ASSERT_EQ(run_json("--workload atomic_rate --iters 125 --qps 16" + shared, &sixteen).code, 0);
    ASSERT_EQ(run_json("--workload atomic_rate --iters 500 --qps 4", &own).code, 0);
    const double r1 = one["results"][0]["msg_rate_mpps"], r4 = four["results"][0]["msg_rate_mpps"],
                 r16 = sixteen["results"][0]["msg_rate_mpps"], own4 = own["results"][0]["msg_rate_mpps"];
    EXPECT_NEAR(r4, r1, 0.02 * r1);
    EXPECT_NEAR(r16, r1, 0.02 * r1);
    EXPECT_GT(own4, 2 * r4);  // a word per QP: four serialisations overlap
    EXPECT_EQ(four["config"]["workload.atomic_word"], "shared");
    // --verify: the fetched values of all QPs form one serial execution, both operations
    // (3 x 333 atomics, 8 bytes each, and the word).
    for (const std::string op : {"fetch_add", "cmp_swap"}) {
        nlohmann::json j;
        const std::string args =
            "--workload atomic_rate --iters 333 --qps 3 --atomic " + op + shared + " --verify";
        const result r = run_json(args, &j);
        ASSERT_EQ(r.code, 0) << args << ": " << r.err;
        expect_verified(j, args);
        EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], (3 * 333 + 1) * 8) << args;
    }
    const result bad = run("--workload atomic_rate --set workload.atomic_word=one");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("workload.atomic_word"), std::string::npos) << bad.err;
    EXPECT_NE(bad.err.find("per_qp|shared"), std::string::npos) << bad.err;
}

TEST(HcasimProgram, seed_seeds_the_links_unless_link_seed_is_set) {
    nlohmann::json j;
    ASSERT_EQ(run_json("--workload write_bw --size 4K --iters 10 --seed 7", &j).code, 0);
    EXPECT_EQ(j["config"]["node0.link.seed"], "7");
    EXPECT_EQ(j["config"]["node1.link.seed"], "7");
    ASSERT_EQ(run_json("--workload write_bw --size 4K --iters 10 --seed 7 --set link.seed=3", &j).code, 0);
    EXPECT_EQ(j["config"]["node0.link.seed"], "3");
    ASSERT_EQ(run_json("--workload write_bw --size 4K --iters 10 --seed 7 --set node1.link.seed=5", &j).code,
              0);
    EXPECT_EQ(j["config"]["node0.link.seed"], "7");
    EXPECT_EQ(j["config"]["node1.link.seed"], "5");
    const std::string f = temp_file("seed.ini", "[link]\nseed = 9\n");
    ASSERT_EQ(run_json("--workload write_bw --size 4K --iters 10 --seed 7 --config '" + f + "'", &j).code, 0);
    EXPECT_EQ(j["config"]["node0.link.seed"], "9");
    // So the seed picks which packets a lossy link drops; the same seed, the same run.
    const std::string lossy = "--workload send_bw --size 4K --iters 500 --set link.drop_rate=0.01 --seed ";
    const result a = run(lossy + "1"), b = run(lossy + "2"), again = run(lossy + "1");
    ASSERT_EQ(a.code, 0) << a.err;
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_NE(without_seed_line(a.out), without_seed_line(b.out));
    EXPECT_EQ(a.out, again.out);
}

TEST(HcasimProgram, verify_passes_under_packet_loss) {
    // 1% of the packets lost in each direction: retransmission must deliver every byte once.
    for (const std::string w : {"write_lat", "send_lat", "read_lat", "atomic_lat", "write_bw", "send_bw",
                                "read_bw", "atomic_rate"}) {
        nlohmann::json j;
        const bool lat = w.compare(w.size() - 4, 4, "_lat") == 0;  // a latency workload times one QP
        // 300 messages: --iters counts per QP.
        const result r = run_json("--workload " + w + (lat ? " --iters 300" : " --iters 150 --qps 2") +
                                      " --verify --set link.drop_rate=0.01",
                                  &j);
        ASSERT_EQ(r.code, 0) << w << ": " << r.err;
        expect_verified(j, w);
        const auto& c = j["counters"];
        EXPECT_GT(c["node0.link.dropped"].get<uint64_t>() + c["node1.link.dropped"].get<uint64_t>(), 0u) << w;
        EXPECT_GT(c["node0.hca.transport_engine.retransmits"].get<uint64_t>() +
                      c["node1.hca.transport_engine.retransmits"].get<uint64_t>(),
                  0u)
            << w;
    }
}

namespace {

/// Runs `args`, which must fail the run (exit 1) with `line` on stderr.
void expect_run_failure(const std::string& args, const std::string& line) {
    const result r = run(args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_NE(r.err.find(line), std::string::npos) << args << "\n" << r.err;
}

}  // namespace

TEST(HcasimProgram, a_link_that_loses_everything_fails_the_run_clearly) {
    // The cable that lost the packets is named, from its counters (node0.link.dropped).
    expect_run_failure(
        "--workload write_bw --size 4K --iters 30 --verify --set link.drop_rate=1",
        "hcasim: run failed: node0: completion error IBV_WC_RETRY_EXC_ERR (status 12), opcode 1, "
        "wr_id 0x0; cable link0 (node0.port1 <-> node1.port1) lost 240 packets (drop_rate 1)\n");
}

TEST(HcasimProgram, a_dead_link_is_named_in_the_error_with_the_time_it_went_down) {
    // Back to back: node1's direction dies 200 us in; node0's READs time out (RETRY_EXC_ERR).
    expect_run_failure(
        "--workload read_bw --size 4K --iters 20000 --set link1.down_at_ns=200000",
        "hcasim: run failed: node0: completion error IBV_WC_RETRY_EXC_ERR (status 12), opcode 2, "
        "wr_id 0x21e; cable link1 (node1.port1 <-> node0.port1) went down at 200.000 us simulated "
        "time (128 packets lost)\n");
    // Through a switch: node1's cable, both of its directions counted, the other cables not named.
    const result s =
        run("--workload write_bw --size 4K --iters 20000 --set fabric.nodes=3 --set link1.down_at_ns=150000");
    EXPECT_EQ(s.code, 1);
    EXPECT_NE(s.err.find("completion error IBV_WC_RETRY_EXC_ERR (status 12)"), std::string::npos) << s.err;
    EXPECT_NE(
        s.err.find("; cable link1 (node1.port1 <-> switch port 2) went down at 150.000 us simulated time ("),
        std::string::npos)
        << s.err;
    EXPECT_EQ(s.err.find("link0"), std::string::npos) << s.err;
    EXPECT_EQ(s.err.find("link2"), std::string::npos) << s.err;
    // UD does not retransmit: the run stalls, and the stall names the cable the same way.
    expect_run_failure(
        "--workload ud_send_lat --iters 2000 --set link1.down_at_ns=100000 --set workload.timeout_us=1000",
        "hcasim: run failed: node0: no completion within workload.timeout_us (UC and UD do not "
        "retransmit a lost message); cable link1 (node1.port1 <-> node0.port1) went down at 100.000 "
        "us simulated time (1 packet lost)\n");
}

TEST(HcasimProgram, read_bw_16k_with_5pct_reordering_verifies_on_every_seed) {
    // The command: reordered multi-packet READ responses used up the retry budget
    // (RETRY_EXC_ERR on every seed). They are re-requested without spending retries now.
    for (const char* seed : {"1", "2", "3"}) {
        nlohmann::json j;
        const result r =
            run_json(std::string("-w read_bw --size 16K --iters 1000 --verify --set link.reorder_rate=0.05 "
                                 "--seed ") +
                         seed,
                     &j);
        ASSERT_EQ(r.code, 0) << seed << ": " << r.err;
        expect_verified(j, seed);
        const auto& c = j["counters"];
        EXPECT_GT(c["node1.link.reordered"].get<uint64_t>(), 0u) << seed;
        EXPECT_EQ(c["node0.hca.transport_engine.timeouts"].get<uint64_t>(), 0u) << seed;
    }
}

TEST(HcasimProgram, verify_passes_under_reordering_and_duplication_for_every_rc_operation) {
    // 5% of the packets held back behind the next one and 5% delivered twice, each direction;
    // 16 KiB messages (four packets) where the workload takes a size. (read_bw used to fail
    // here with RETRY_EXC_ERR.)
    for (const std::string w : {"write_lat", "send_lat", "read_lat", "atomic_lat", "write_bw", "send_bw",
                                "read_bw", "atomic_rate"}) {
        const bool sized = w != "atomic_lat" && w != "atomic_rate";
        nlohmann::json j;
        const result r =
            run_json("--workload " + w + (sized ? " --size 16K" : "") +
                         " --iters 1000 --verify --set link.reorder_rate=0.05 --set link.dup_rate=0.05",
                     &j);
        ASSERT_EQ(r.code, 0) << w << ": " << r.err;
        expect_verified(j, w);
        const auto& c = j["counters"];
        // Held back: overtaken by the next packet, or (ping-pongs) released alone after the hold.
        EXPECT_GT(c["node0.link.reordered"].get<uint64_t>() + c["node1.link.reordered"].get<uint64_t>() +
                      c["node0.link.reorder_timeouts"].get<uint64_t>() +
                      c["node1.link.reorder_timeouts"].get<uint64_t>(),
                  0u)
            << w;
        EXPECT_GT(c["node0.link.duplicated"].get<uint64_t>() + c["node1.link.duplicated"].get<uint64_t>(), 0u)
            << w;
    }
    // The compare-and-swap variant of both atomic workloads.
    for (const std::string w : {"atomic_lat", "atomic_rate"}) {
        nlohmann::json j;
        const result r = run_json("--workload " + w +
                                      " --atomic cmp_swap --iters 1000 --verify --set link.reorder_rate=0.05 "
                                      "--set link.dup_rate=0.05",
                                  &j);
        ASSERT_EQ(r.code, 0) << w << ": " << r.err;
        expect_verified(j, w + " cmp_swap");
    }
}

// ------------------------------------------------------------------ UC and UD workloads

namespace {

/// The row of `size` in a table: its numbers after #bytes and #iterations (bandwidth: Gb/s, Mpps,
/// #messages).
std::vector<double> row_of(const std::string& out, uint64_t size) {
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream row(line);
        uint64_t bytes = 0, iters = 0;
        if (!(row >> bytes >> iters) || bytes != size) continue;
        std::vector<double> v;
        for (double x; row >> x;) v.push_back(x);
        return v;
    }
    return {};
}

}  // namespace

TEST(HcasimProgram, ud_and_uc_workloads_print_perftest_tables) {
    const result lat = run("--workload ud_send_lat --size 2,4K --iters 50");
    ASSERT_EQ(lat.code, 0) << lat.err;
    EXPECT_NE(lat.out.find(" hcasim ud_send_lat (seed 1)\n"), std::string::npos) << lat.out;
    EXPECT_NE(lat.out.find(
                  " #bytes     #iterations  t_min[usec]    t_max[usec]    t_typical[usec]   t_avg[usec]    "
                  "99% percentile[usec]\n"),
              std::string::npos)
        << lat.out;
    for (uint64_t size : {2u, 4096u}) {
        const auto r = row_of(lat.out, size);
        ASSERT_EQ(r.size(), 5u) << size << "\n" << lat.out;  // min, max, typical, avg, p99
        EXPECT_GT(r[0], 0.0);
        EXPECT_LE(r[0], r[2]);
        EXPECT_LE(r[2], r[1]);
    }
    EXPECT_NE(lat.out.find(" 2          50 "), std::string::npos) << lat.out;
    EXPECT_EQ(lat.out.find("lost"), std::string::npos) << lat.out;

    // 200 messages per size either way (--iters counts per QP).
    for (const std::string args : {"--workload ud_send_bw --size 64,4K --iters 200",
                                   "--workload uc_write_bw --size 64,4K,64K --iters 100 --qps 2"}) {
        const result bw = run(args);
        ASSERT_EQ(bw.code, 0) << args << ": " << bw.err;
        EXPECT_NE(bw.out.find(" #bytes     #iterations  BW average[Gb/sec]   MsgRate[Mpps]    #messages\n"),
                  std::string::npos)
            << bw.out;
        for (uint64_t size : {64u, 4096u}) {
            const auto r = row_of(bw.out, size);
            ASSERT_EQ(r.size(), 3u) << args << " " << size << "\n" << bw.out;
            EXPECT_EQ(r[2], 200.0) << args;
            EXPECT_GT(r[0], 0.0);
            EXPECT_GT(r[1], 0.0);
            EXPECT_NEAR(r[0], double(size) * 8 * r[1] / 1000.0, 0.01 + r[0] * 0.001) << "Gb/s = bytes x Mpps";
        }
        EXPECT_EQ(bw.out.find("lost"), std::string::npos) << bw.out;
    }
    // 4 KiB datagrams: LRH, BTH, DETH, ICRC, VCRC (34 bytes) per 4096 bound EDR at 99.18 Gb/s.
    const auto ud4k = row_of(run("--workload ud_send_bw --size 4K --iters 200").out, 4096);
    ASSERT_EQ(ud4k.size(), 3u);
    EXPECT_GT(ud4k[0], 90.0);
    EXPECT_LT(ud4k[0], 99.18);
    // UD's default size is the MTU (perftest: "Max msg size in UD is MTU"), UC's 64 KiB.
    EXPECT_EQ(row_of(run("--workload ud_send_bw --iters 20 --mtu 1024").out, 1024).size(), 3u);
    EXPECT_EQ(row_of(run("--workload uc_write_bw --iters 20").out, 65536).size(), 3u);
}

TEST(HcasimProgram, ud_size_above_the_mtu_is_refused_at_start_up) {
    const result bw = run("--workload ud_send_bw --size 64,8K --iters 10");
    EXPECT_EQ(bw.code, 2);
    EXPECT_EQ(bw.err,
              "hcasim: error: --size: 8192 bytes exceeds the MTU (4096 bytes, --mtu): ud_send_bw sends each "
              "message "
              "as one UD datagram\n");
    EXPECT_EQ(bw.out, "");
    const result lat = run("--workload ud_send_lat --size 2K --mtu 1024 --iters 10");
    EXPECT_EQ(lat.code, 2);
    EXPECT_EQ(lat.err,
              "hcasim: error: --size: 2048 bytes exceeds the MTU (1024 bytes, --mtu): ud_send_lat sends each "
              "message "
              "as one UD datagram\n");
    // At the MTU it runs; UC segments larger messages like RC.
    EXPECT_EQ(run("--workload ud_send_bw --size 1K --mtu 1024 --iters 10").code, 0);
    EXPECT_EQ(run("--workload uc_write_bw --size 8K --mtu 1024 --iters 10").code, 0);
}

TEST(HcasimProgram, verify_checks_the_ud_and_uc_workloads) {
    for (const std::string args : {"--workload ud_send_lat --size 0,2,4K --iters 50",
                                   "--workload ud_send_bw --size 2,4K --iters 100 --qps 3",
                                   "--workload ud_send_bw --size 1K --mtu 1024 --iters 100",
                                   "--workload uc_write_bw --size 64,64K --iters 100 --qps 2",
                                   "--workload uc_write_bw --size 8K --mtu 1024 --iters 50"}) {
        nlohmann::json j;
        const result r = run_json(args + " --verify", &j);
        ASSERT_EQ(r.code, 0) << args << ": " << r.err;
        ASSERT_FALSE(j.is_null()) << args;
        for (const auto& e : j["results"]) {
            ASSERT_TRUE(e.contains("verify")) << args;
            if (e["size_bytes"] != 0) {
                EXPECT_GT(e["verify"]["bytes_checked"].get<uint64_t>(), 0u) << args;
            }
            EXPECT_EQ(e["verify"]["mismatches"], 0) << args;
            EXPECT_EQ(e["verify"]["bad_completions"], 0) << args;
        }
        EXPECT_NE(r.out.find(" 0 mismatches, 0 bad completions"), std::string::npos) << r.out;
    }
    nlohmann::json j;
    // ud_send_lat: every iteration's payload (at byte 40 of the receive buffer) on both sides.
    ASSERT_EQ(run_json("--workload ud_send_lat --size 2,4K --iters 50 --verify", &j).code, 0);
    EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], 50 * 2 * 2);
    EXPECT_EQ(j["results"][1]["verify"]["bytes_checked"], 50 * 4096 * 2);
    // ud_send_bw: every datagram (3 QPs x 100) at its receive completion, and each QP's buffer at the end.
    ASSERT_EQ(run_json("--workload ud_send_bw --size 4K --iters 100 --qps 3 --verify", &j).code, 0);
    EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], (300 + 3) * 4096);
    EXPECT_EQ(j["results"][0]["datagrams_lost"], 0);
    // uc_write_bw: each QP's destination once its end-of-stream marker is in.
    ASSERT_EQ(run_json("--workload uc_write_bw --size 64K --iters 100 --qps 2 --verify", &j).code, 0);
    EXPECT_EQ(j["results"][0]["verify"]["bytes_checked"], 2 * 65536);
    // One 1 MiB WRITE: its send completion comes before the data lands; the marker waits for it.
    ASSERT_EQ(run_json("--workload uc_write_bw --size 1M --iters 1 --verify", &j).code, 0);
    EXPECT_EQ(j["results"][0]["verify"]["mismatches"], 0);
}

TEST(HcasimProgram, ud_send_bw_posts_a_receive_for_every_datagram) {
    // Far beyond workload.rx_depth (512), faster than node1 takes them: none is dropped.
    nlohmann::json j;
    const result r = run_json("--workload ud_send_bw --size 64 --iters 1500 --qps 2 --verify", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(j["results"][0]["datagrams_lost"], 0);
    EXPECT_EQ(j["counters"]["node1.hca.transport_engine.ud_dropped"], 0);
    EXPECT_EQ(j["counters"]["node1.hca.transport_engine.recv_completions"], 3000 + 2);  // and 2 markers
    EXPECT_EQ(r.out.find("lost"), std::string::npos) << r.out;
    // A device whose queues hold only 512: the receives run out, and what the HCA dropped for
    // want of a receive WQE is what the workload reports lost.
    const result small =
        run_json("--workload ud_send_bw --size 64 --iters 1500 --qps 2 --set hca.max_qp_wr=512", &j);
    ASSERT_EQ(small.code, 0) << small.err;
    EXPECT_GT(j["results"][0]["datagrams_lost"].get<uint64_t>(), 0u);
    EXPECT_EQ(j["results"][0]["datagrams_lost"], j["counters"]["node1.hca.transport_engine.ud_dropped"]);
}

TEST(HcasimProgram, lost_datagrams_are_reported_and_fail_verify) {
    const std::string lossy = "--workload ud_send_bw --size 64 --iters 400 --set link.drop_rate=0.05";
    nlohmann::json j;
    const result plain = run_json(lossy, &j);
    ASSERT_EQ(plain.code, 0) << plain.err;
    const uint64_t lost = j["results"][0]["datagrams_lost"];
    const uint64_t dropped = j["counters"]["node0.link.dropped"];  // node0's cable: the datagrams' way
    EXPECT_GT(lost, 0u);
    EXPECT_LE(lost, dropped);
    EXPECT_GE(lost + 1, dropped) << "at most the marker was lost besides";
    EXPECT_NE(plain.out.find("\n datagrams lost: " + std::to_string(lost) +
                             " of 400 sent (UD does not retransmit; "
                             "counters ud_dropped, link.dropped)\n"),
              std::string::npos)
        << plain.out;
    const result verified = run(lossy + " --verify");
    EXPECT_EQ(verified.code, 1);
    EXPECT_EQ(verified.err, "hcasim: run failed: verify: ud_send_bw 64 B, node1 QP 0, receive queue: " +
                                std::to_string(lost) + " of 400 datagrams lost (UD does not retransmit)\n");
    EXPECT_EQ(without_verify_line(verified.out), plain.out);
    // A link that loses everything: the server stops waiting workload.drain_us after the markers.
    const result all = run("--workload ud_send_bw --size 64 --iters 20 --set link.drop_rate=1");
    ASSERT_EQ(all.code, 0) << all.err;
    EXPECT_NE(all.out.find(" datagrams lost: 20 of 20 sent"), std::string::npos) << all.out;
}

TEST(HcasimProgram, ud_and_uc_figures_are_deterministic_and_verify_does_not_change_them) {
    for (const std::string args : {"--workload ud_send_lat --size 2,1K --iters 100 --seed 5",
                                   "--workload ud_send_bw --size 64,4K --iters 150 --qps 2 --seed 5",
                                   "--workload uc_write_bw --size 64,64K --iters 100 --qps 2 --seed 5"}) {
        const result a = run(args), b = run(args), verified = run(args + " --verify");
        ASSERT_EQ(a.code, 0) << args << ": " << a.err;
        ASSERT_EQ(verified.code, 0) << args << ": " << verified.err;
        EXPECT_FALSE(a.out.empty());
        EXPECT_EQ(a.out, b.out) << args;
        EXPECT_EQ(without_verify_line(verified.out), a.out) << args;
    }
}

TEST(HcasimProgram, mcast_bw_prints_the_senders_table_and_the_receivers_counts) {
    nlohmann::json j;
    const result r = run_json("--workload mcast_bw --size 64,4K --iters 200", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" hcasim mcast_bw (seed 1)\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(" #bytes     #iterations  BW average[Gb/sec]   MsgRate[Mpps]    #messages\n"),
              std::string::npos)
        << r.out;
    for (uint64_t size : {64u, 4096u}) {
        const auto row = row_of(r.out, size);
        ASSERT_EQ(row.size(), 3u) << size << "\n" << r.out;
        EXPECT_GT(row[0], 0.0);
        EXPECT_NEAR(row[0], double(size) * 8 * row[1] / 1000.0, 0.01 + row[0] * 0.001)
            << "Gb/s = bytes x Mpps";
    }
    // Two nodes back to back: node1 is the only receiver.
    EXPECT_NE(r.out.find("\n multicast: 400 datagrams sent to 1 receivers, 400 of 400 delivered, 0 lost\n"
                         " lost per receiver: node1 0\n"),
              std::string::npos)
        << r.out;
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][0]["receivers"], 1);
    EXPECT_EQ(j["results"][0]["datagrams_delivered"], 200);
    EXPECT_EQ(j["results"][0]["datagrams_lost_per_receiver"], nlohmann::json::array({0}));
    EXPECT_EQ(j["counters"]["node1.hca.transport_engine.mcast_deliveries"],
              2 * (200 + 1));  // and the markers
    // The default size is the MTU, as ud_send_bw's.
    EXPECT_EQ(row_of(run("--workload mcast_bw --iters 20 --mtu 1024").out, 1024).size(), 3u);
}

TEST(HcasimProgram, mcast_bw_verify_checks_every_byte_at_every_receiver) {
    for (const std::string nodes : {"", " --set fabric.nodes=4"}) {
        const unsigned receivers = nodes.empty() ? 1 : 3;
        nlohmann::json j;
        // 2 QPs (groups) x 150 datagrams.
        const std::string args = "--workload mcast_bw --size 2,4K --iters 150 --qps 2 --verify" + nodes;
        const result r = run_json(args, &j);
        ASSERT_EQ(r.code, 0) << args << ": " << r.err;
        ASSERT_EQ(j["results"].size(), 2u) << args;
        const uint64_t sizes[2] = {2, 4096};
        for (unsigned k = 0; k < 2; ++k) {
            const auto& e = j["results"][k];
            // Every datagram at its receive completion and each QP's buffer at the end, per receiver.
            EXPECT_EQ(e["verify"]["bytes_checked"], receivers * (300 + 2) * sizes[k]) << args;
            EXPECT_EQ(e["verify"]["mismatches"], 0) << args;
            EXPECT_EQ(e["verify"]["bad_completions"], 0) << args;
            EXPECT_EQ(e["receivers"], receivers) << args;
            EXPECT_EQ(e["datagrams_delivered"], receivers * 300) << args;
            EXPECT_EQ(e["datagrams_lost"], 0) << args;
        }
        EXPECT_NE(r.out.find(" 0 mismatches, 0 bad completions"), std::string::npos) << r.out;
        if (!nodes.empty()) {
            EXPECT_NE(r.out.find(" lost per receiver: node1 0, node2 0, node3 0\n"), std::string::npos)
                << r.out;
            EXPECT_EQ(j["counters"]["fabric.switch.mcast_replicas"], 3 * 2 * (300 + 2))
                << "one copy per member port";
        }
    }
}

TEST(HcasimProgram, mcast_bw_counts_what_each_receiver_lost_and_fails_verify) {
    // The switch's output toward node2 loses 5%: only node2 misses datagrams.
    const std::string lossy =
        "--workload mcast_bw --size 64 --iters 400 --set fabric.nodes=4 --set link2.drop_rate=0.05";
    nlohmann::json j;
    const result plain = run_json(lossy, &j);
    ASSERT_EQ(plain.code, 0) << plain.err;
    const auto per = j["results"][0]["datagrams_lost_per_receiver"];
    ASSERT_EQ(per.size(), 3u);
    EXPECT_EQ(per[0], 0);
    EXPECT_EQ(per[2], 0);
    const uint64_t lost = per[1];
    EXPECT_GT(lost, 0u);
    EXPECT_EQ(j["results"][0]["datagrams_lost"], lost);
    EXPECT_EQ(j["results"][0]["datagrams_delivered"], 3 * 400 - lost);
    EXPECT_NE(plain.out.find(" lost per receiver: node1 0, node2 " + std::to_string(lost) + ", node3 0\n"),
              std::string::npos)
        << plain.out;
    const result verified = run(lossy + " --verify");
    EXPECT_EQ(verified.code, 1);
    EXPECT_EQ(verified.err, "hcasim: run failed: verify: mcast_bw 64 B, node2 QP 0, receive queue: " +
                                std::to_string(lost) + " of 400 datagrams lost (UD does not retransmit)\n");
    EXPECT_EQ(without_verify_line(verified.out), plain.out);
}

TEST(HcasimProgram, mcast_bw_is_deterministic_and_verify_does_not_change_its_figures) {
    for (const std::string args : {"--workload mcast_bw --size 64,4K --iters 150 --qps 2 --seed 5",
                                   "--workload mcast_bw --size 64 --iters 200 --set fabric.nodes=4"}) {
        const result a = run(args), b = run(args), verified = run(args + " --verify");
        ASSERT_EQ(a.code, 0) << args << ": " << a.err;
        ASSERT_EQ(verified.code, 0) << args << ": " << verified.err;
        EXPECT_FALSE(a.out.empty());
        EXPECT_EQ(a.out, b.out) << args;
        EXPECT_EQ(without_verify_line(verified.out), a.out) << args;
    }
}

// libsystemc (linked through testbench_lib) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"

// Issue 27, "every input checked before it costs anything".

TEST(HcasimProgram, max_qps_max_cqs_max_srqs_of_4294967295_fail_at_once_naming_the_key_and_its_range) {
    // Before this check came first, max_qps grew past 5.8 GB and max_srqs ended in std::bad_alloc.
    for (const char* key : {"max_qps", "max_cqs", "max_srqs"}) {
        const result r = run(std::string("--workload write_lat --iters 10 --set hca.") + key + "=4294967295");
        EXPECT_EQ(r.code, 2) << key;
        EXPECT_EQ(r.err, std::string("hcasim: error: bad value '4294967295' for key 'node0.hca.") + key +
                             "' (--set): expected integer in [" +
                             (std::string(key) == "max_qps" ? "2" : "1") + ",16777216]\n");
        EXPECT_EQ(r.out, "");
    }
}

TEST(HcasimProgram, clock_mhz_of_1e_300_inf_and_1e300_is_refused_naming_the_key_and_its_range) {
    for (const char* v : {"1e-300", "inf", "1e300"}) {
        const result r =
            run(std::string("--workload write_bw --size 4K --iters 10 --set hca.clock_mhz=") + v);
        EXPECT_EQ(r.code, 2) << v;
        EXPECT_EQ(r.err, std::string("hcasim: error: bad value '") + v +
                             "' for key 'node0.hca.clock_mhz' (--set): expected number in [1,10000]\n");
    }
    // A unit's own clock: 0 is the HCA's, anything else a physical clock.
    const result unit = run("--workload write_bw --size 4K --iters 10 --set hca.cq_writer.clock_mhz=1e-300");
    EXPECT_EQ(unit.code, 2);
    EXPECT_EQ(unit.err,
              "hcasim: error: bad value '1e-300' for key 'node0.hca.cq_writer.clock_mhz' (--set): "
              "expected number in [1,10000] or 0\n");
    // Rates and latencies too.
    const result rate = run("--workload write_bw --size 4K --iters 10 --set link.propagation_ns=inf");
    EXPECT_EQ(rate.code, 2);
    EXPECT_NE(rate.err.find("'node0.link.propagation_ns' (--set): expected number in [0,1e+09]"),
              std::string::npos)
        << rate.err;
}

TEST(HcasimProgram, help_config_lists_the_allowed_values_of_every_numeric_parameter) {
    const result r = run("--help-config");
    ASSERT_EQ(r.code, 0);
    EXPECT_NE(r.out.find("(allowed [2,16777216])"), std::string::npos) << "hca.max_qps";
    EXPECT_NE(r.out.find("(allowed [1,10000] or 0)"), std::string::npos) << "unit clocks";
    // Every int, uint and double parameter but the free-form ones states its range.
    std::istringstream in(r.out);
    std::string line, key, type;
    while (std::getline(in, line)) {
        if (line.rfind("  ", 0) == 0 && line.rfind("      ", 0) != 0) {
            std::istringstream(line) >> key >> type;
            continue;
        }
        if (line.rfind("      ", 0) != 0 || (type != "int" && type != "uint" && type != "double")) continue;
        if (key == "hca.node_guid" || key == "link.seed" ||
            key == "link.width")  // identifiers; one of 1,4,8,12
            continue;
        EXPECT_NE(line.find("(allowed "), std::string::npos) << key;
    }
}

TEST(HcasimProgram,
     memory_size_bytes_too_small_for_the_workload_is_refused_at_start_up_with_the_size_it_needs) {
    const result r = run("--workload write_bw --size 4K --iters 10 --set memory.size_bytes=1073741824");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: bad value '1073741824' for key 'node0.memory.size_bytes': the simulated host "
              "software (OS, driver, applications) uses physical memory up to 0x410000000: "
              "memory.size_bytes must be at least 17448304640 (16.25 GiB)\n");
    EXPECT_EQ(r.out, "") << "nothing ran";
    EXPECT_EQ(run("--workload write_bw --size 4K --iters 10 --set memory.size_bytes=17448304640").code, 0);
}

TEST(HcasimProgram, config_of_a_directory_an_unreadable_file_dev_zero_or_a_nul_byte_is_exit_2_with_the_file) {
    const struct {
        std::string path, err;
    } cases[] = {
        {"/tmp", "hcasim: error: cannot open configuration file '/tmp': Is a directory\n"},
        {"/proc/self/mem", "hcasim: error: /proc/self/mem:1: read error: Input/output error\n"},
        {"/dev/zero", "hcasim: error: /dev/zero:1: NUL byte: not a text file\n"},
    };
    for (const auto& c : cases) {
        const result r = run("--workload write_bw --size 4K --iters 10 -c " + c.path);
        EXPECT_EQ(r.code, 2) << c.path;
        EXPECT_EQ(r.err, c.err);
        EXPECT_EQ(r.out, "") << c.path << ": no run with the defaults";
    }
    static const char nul[] = "[hca]\nmax_qps = 8\0 and the rest\n";
    const std::string f = temp_file("nul.ini", std::string(nul, sizeof nul - 1));
    const result r = run("--workload write_bw --size 4K --iters 10 -c '" + f + "'");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: " + f + ":2: NUL byte: not a text file\n");
    std::remove(f.c_str());
}

TEST(HcasimProgram, iters_18446744073709551615_on_a_latency_workload_is_refused_with_the_limit) {
    const result r = run("--workload write_lat --iters 18446744073709551615");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --iters: expected an integer in [1,10000000], got '18446744073709551615'\n");
    EXPECT_EQ(run("--workload write_lat --iters 0").code, 2);
}

TEST(HcasimProgram, options_a_workload_would_ignore_are_refused_naming_the_option_and_the_workload) {
    const struct {
        std::string args, err;
    } cases[] = {
        {"--workload write_lat --qps 4",
         "--qps: write_lat times one QP (as perftest's latency tests); the bandwidth workloads take --qps"},
        {"--workload read_lat --sweep qps=1,2",
         "--sweep qps: read_lat times one QP (as perftest's latency tests); the bandwidth workloads take "
         "--qps"},
        {"--workload dma_write_bw --qps 2", "--qps: dma_write_bw moves data over PCIe only and has no QPs"},
        {"--workload dma_read_bw --mtu 1024",
         "--mtu: dma_read_bw moves data over PCIe only (no InfiniBand path MTU)"},
        {"--workload attack_suite --qps 2",
         "--qps: attack_suite runs a fixed table of cases (its own QPs and MTU)"},
    };
    for (const auto& c : cases) {
        const result r = run(c.args);
        EXPECT_EQ(r.code, 2) << c.args;
        EXPECT_EQ(r.err, "hcasim: error: " + c.err + "\n");
    }
    // dma_read_bw discards what it reads: --verify checks only its completions, and says so.
    const result r = run("--workload dma_read_bw --size 4K --iters 10 --verify");
    EXPECT_EQ(r.code, 0);
    EXPECT_EQ(r.err,
              "hcasim: warning: --verify: dma_read_bw discards the data it reads: only its transfers' "
              "completions are checked\n");
}

TEST(HcasimProgram, qps_beyond_what_the_largest_hca_max_qps_holds_is_refused_with_the_limit) {
    const result r = run("--workload write_bw --qps 16777216");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --qps: expected an integer in [1,16777200], got '16777216'\n");
    const result sweep = run("--workload write_bw --sweep qps=16777216");
    EXPECT_EQ(sweep.code, 2);
    EXPECT_EQ(sweep.err, "hcasim: error: --sweep qps: 16777216 QPs (expected 1 to 16777200)\n");
}

TEST(HcasimProgram, sizes_and_qps_whose_buffers_pass_host_memory_are_refused_at_start_up) {
    // Before, this backed 16 GiB of simulated memory (17 GB of RSS) before failing.
    const result r = run("--workload write_bw --size 1G --qps 16 --iters 1");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(
        r.err,
        "hcasim: error: --size 1073741824 with --qps 16: each node's buffers would take 34359738368 bytes "
        "(a send and a receive area per QP), more than the 17179869184 bytes of host memory its "
        "application has\n");
    const result mrs = run("--workload mr_scale --mrs 1M --size 64K --iters 1");
    EXPECT_EQ(mrs.code, 2);
    EXPECT_EQ(mrs.err,
              "hcasim: error: --mrs 1048576 with --size 65536: each node's regions would take 68719476736 "
              "bytes, more than the 17179869184 bytes of host memory its application has\n");
}
