// hcasim --help-stats: every counter of the stats JSON with its unit and meaning, listed from an
// elaboration without simulating; and the stats JSON's "run" block (version, command line,
// date) with the determinism it keeps.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

result run(const std::string& args) { return hcasim::test::run_hcasim(args, "stats_help"); }

/// The patterns --help-stats lists (`  PATTERN [unit]` lines), each with its unit.
std::map<std::string, std::string> listed(const std::string& out) {
    std::map<std::string, std::string> m;
    const std::regex line(R"(^  (\S+) +\[([^\]]+)\]$)");
    std::istringstream in(out);
    for (std::string l; std::getline(in, l);)
        if (std::smatch s; std::regex_match(l, s, line)) m[s[1]] = s[2];
    return m;
}

/// `key` with every number of a module instance written N, as --help-stats documents it
/// ("node1.link.packets" -> "nodeN.link.packets").
std::string as_pattern(const std::string& key) {
    return std::regex_replace(key, std::regex(R"(([A-Za-z_])[0-9]+\.)"), "$1N.");
}

}  // namespace

TEST(HcasimStatsHelp, lists_a_known_counter_with_unit_and_description_and_exits_0) {
    const result r = run("--help-stats");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("  nodeN.hca.doorbell_unit.stalls"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("[count]\n      MMIO writes that found the FIFO full and stalled their writer\n"),
              std::string::npos)
        << r.out;
    const auto m = listed(r.out);
    EXPECT_EQ(m.at("nodeN.hca.doorbell_unit.stalls"), "count");
    EXPECT_EQ(m.at("nodeN.pcie.upstream_busy_ps"), "ps");
    EXPECT_EQ(m.at("nodeN.hca.port.tx_bytes"), "bytes");
    EXPECT_EQ(m.at("nodeN.hca.port.PortXmitData"), "4-byte words");
    // Nothing simulated: no results table.
    EXPECT_EQ(r.out.find("#bytes"), std::string::npos) << r.out;
}

TEST(HcasimStatsHelp, every_counter_of_a_run_is_documented_and_every_documented_one_is_in_the_run) {
    // The two-node default, a switched fabric (its switch counters) and the PCIe bench alone.
    for (const std::string& args : {std::string("--workload write_bw --size 4K --iters 50"),
                                    std::string("--workload write_bw --size 4K --iters 50 "
                                                "--set fabric.topology=switch"),
                                    std::string("--workload dma_read_bw --size 4K --iters 50")}) {
        nlohmann::json stats;
        const result ran = hcasim::test::run_hcasim_stats(args, "stats_help_run", &stats);
        ASSERT_EQ(ran.code, 0) << args << ": " << ran.err;
        std::set<std::string> in_run;
        for (const auto& [key, value] : stats.at("counters").items()) in_run.insert(as_pattern(key));
        const result help = run(args + " --help-stats");
        ASSERT_EQ(help.code, 0) << args << ": " << help.err;
        std::set<std::string> documented;
        for (const auto& [pattern, unit] : listed(help.out)) documented.insert(pattern);
        EXPECT_GT(in_run.size(), 10u) << args;
        EXPECT_EQ(in_run, documented) << args;
    }
}

TEST(HcasimStatsHelp, every_time_counter_is_in_ps_but_the_iba_port_counters_tick) {
    for (const char* args : {"--help-stats", "--help-stats --set fabric.topology=switch"}) {
        const result r = run(args);
        ASSERT_EQ(r.code, 0) << r.err;
        const auto m = listed(r.out);
        ASSERT_GT(m.size(), 100u) << args;
        EXPECT_EQ(m.at("nodeN.pcie.tag_stall_ps"), "ps");
        const std::set<std::string> units = {"ps", "bytes", "cycles", "count", "4-byte words", "ns"};
        for (const auto& [pattern, unit] : m) {
            EXPECT_TRUE(units.count(unit)) << pattern << " [" << unit << "]";
            EXPECT_FALSE(std::regex_search(pattern, std::regex("_(ns|us|ms|s)$"))) << pattern;
            // IBA's PortXmitWait keeps its name and its tick (1 ns here).
            if (unit == "ns") {
                EXPECT_TRUE(std::regex_search(pattern, std::regex(R"(\.PortXmitWait$)"))) << pattern;
            }
        }
    }
}

namespace {

/// Now as the stats JSON writes a date (ISO 8601 UTC): such strings sort as the times do.
std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return buf;
}

/// Runs hcasim with `args` and --stats-json to a file named after `tag` (the same path each
/// time: the same command line), after `shell`; the file's text in `*text` ("" if none).
result run_with_stats(const std::string& args, const std::string& tag, const std::string& shell,
                      std::string* text) {
    const std::string path = ::testing::TempDir() + "hcasim_stats_json_" + tag + ".json";
    std::remove(path.c_str());
    const result r = hcasim::test::run_hcasim(args + " --stats-json '" + path + "'", tag, shell);
    *text = hcasim::test::slurp(path);
    std::remove(path.c_str());
    return r;
}

}  // namespace

TEST(HcasimStatsJson, records_the_version_command_line_and_date_of_the_run) {
    const std::string before = utc_now();
    std::string text;
    const result r = run_with_stats("--workload write_bw --size 4K --iters 20", "meta", "", &text);
    const std::string after = utc_now();
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    EXPECT_EQ(j.begin().key(), "run");  // first: what wrote the file
    const auto& run = j.at("run");
    EXPECT_TRUE(std::regex_match(run.at("version").get<std::string>(), std::regex(R"(\d+\.\d+\.\d+)")))
        << run.dump();
    const auto argv = run.at("command_line").get<std::vector<std::string>>();
    ASSERT_EQ(argv.size(), 9u) << run.dump();
    EXPECT_EQ(argv[0], HCASIM_BIN);
    EXPECT_EQ(argv.back(), ::testing::TempDir() + "hcasim_stats_json_meta.json");
    EXPECT_EQ(std::vector<std::string>(argv.begin() + 1, argv.end() - 1),
              (std::vector<std::string>{"--workload", "write_bw", "--size", "4K", "--iters", "20",
                                        "--stats-json"}));
    const std::string date = run.at("date").get<std::string>();
    EXPECT_TRUE(std::regex_match(date, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"))) << date;
    EXPECT_LE(before, date);
    EXPECT_LE(date, after);
}

TEST(HcasimStatsJson, with_source_date_epoch_two_runs_differ_only_in_the_wall_clock_fields) {
    const std::string shell = "export SOURCE_DATE_EPOCH=1700000000; ";
    const std::string args = "--workload send_bw --size 2,4K --iters 50 --qps 2 --seed 7";
    std::string a, b;
    ASSERT_EQ(run_with_stats(args, "epoch", shell, &a).code, 0);
    ASSERT_EQ(run_with_stats(args, "epoch", shell, &b).code, 0);
    const auto ja = nlohmann::ordered_json::parse(a), jb = nlohmann::ordered_json::parse(b);
    EXPECT_EQ(ja["run"]["date"], "2023-11-14T22:13:20Z");
    EXPECT_EQ(ja["run"], jb["run"]);
    // Byte for byte but for the three wall-clock figures.
    const std::regex wall(R"re("(wall_s|traffic_wall_s|wire_packets_per_wall_s)": [0-9.e+-]+)re");
    EXPECT_EQ(std::regex_replace(a, wall, "$1"), std::regex_replace(b, wall, "$1"));
    EXPECT_NE(std::regex_replace(a, wall, "$1"), a) << "the wall-clock fields are there";
    // Without it, the same holds of everything but the run block and those fields.
    std::string c, d;
    ASSERT_EQ(run_with_stats(args, "now1", "", &c).code, 0);
    ASSERT_EQ(run_with_stats(args, "now2", "", &d).code, 0);
    EXPECT_EQ(hcasim::test::deterministic_part(nlohmann::ordered_json::parse(c)).dump(2),
              hcasim::test::deterministic_part(nlohmann::ordered_json::parse(d)).dump(2));
    EXPECT_EQ(hcasim::test::deterministic_part(nlohmann::ordered_json::parse(c)).dump(2),
              hcasim::test::deterministic_part(ja).dump(2));
}

TEST(HcasimStatsJson, a_source_date_epoch_that_is_no_number_of_seconds_is_refused_before_the_run) {
    std::string text;
    const result r = run_with_stats("--workload write_bw --size 4K --iters 20", "bad_epoch",
                                    "export SOURCE_DATE_EPOCH=2023-11-14; ", &text);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: SOURCE_DATE_EPOCH: '2023-11-14' is not a whole number of seconds since "
              "1970-01-01 (UTC)\n");
    EXPECT_EQ(r.out, "");
    EXPECT_EQ(text, "");
}

TEST(HcasimStatsJson, a_qps_sweep_file_has_one_run_block_and_its_runs_none) {
    std::string text;
    const result r = run_with_stats("--workload write_bw --size 64 --iters 20 --sweep qps=1,2", "sweep",
                                    "export SOURCE_DATE_EPOCH=0; ", &text);
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::ordered_json j = nlohmann::ordered_json::parse(text);
    EXPECT_EQ(j.begin().key(), "run");
    EXPECT_EQ(j["run"]["date"], "1970-01-01T00:00:00Z");
    EXPECT_EQ(j["run"]["command_line"].back(), ::testing::TempDir() + "hcasim_stats_json_sweep.json");
    ASSERT_EQ(j["runs"].size(), 2u);
    for (const auto& run : j["runs"]) EXPECT_FALSE(run.contains("run")) << run.dump().substr(0, 200);
}

TEST(HcasimStatsJson, measured_counters_are_the_changes_over_the_measured_phases_setup_excluded) {
    // One phase, and the demo's two (summed as sim.wire_packets is).
    for (const char* args : {"--workload write_bw --size 4K --iters 100", "--size 2,4K --iters 50"}) {
        nlohmann::json j;
        const result r = hcasim::test::run_hcasim_stats(args, "measured", &j);
        ASSERT_EQ(r.code, 0) << args << ": " << r.err;
        const auto& m = j.at("measured_counters");
        const auto& whole = j.at("counters");
        uint64_t tx = 0;
        for (const auto& [k, v] : m.items()) {
            ASSERT_TRUE(whole.contains(k)) << k;
            EXPECT_GT(v.get<uint64_t>(), 0u) << k << ": only counters that changed";
            EXPECT_LE(v.get<uint64_t>(), whole[k].get<uint64_t>()) << k;
            if (k.size() > 20 && k.compare(k.size() - 20, 20, ".hca.port.tx_packets") == 0)
                tx += v.get<uint64_t>();
        }
        EXPECT_EQ(tx, j["sim"]["wire_packets"].get<uint64_t>()) << args;
        // Setup's commands (CREATE_CQ, RST2INIT_QP, ...) are in the whole run's counters only.
        EXPECT_GT(whole["node0.hca.command_unit.commands"].get<uint64_t>(), 0u);
        EXPECT_FALSE(m.contains("node0.hca.command_unit.commands")) << args;
        // The traffic is measured whole: every payload byte the requester sent.
        EXPECT_EQ(m["node0.hca.transport_engine.tx_payload_bytes"],
                  whole["node0.hca.transport_engine.tx_payload_bytes"])
            << args;
    }
}
