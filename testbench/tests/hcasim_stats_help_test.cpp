// hcasim --help-stats: every counter of the stats JSON with its unit and meaning, listed from an
// elaboration without simulating; and the stats JSON's "run" block (version, command line,
// date) with the determinism it keeps.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

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
    // The two-node default and a switched fabric (its switch counters).
    for (const std::string& args : {std::string("--workload write_bw --size 4K --iters 50"),
                                    std::string("--workload write_bw --size 4K --iters 50 "
                                                "--set fabric.topology=switch")}) {
        nlohmann::json stats;
        const result ran = hcasim::test::run_hcasim_stats(args, "stats_help_run", &stats);
        ASSERT_EQ(ran.code, 0) << args << ": " << ran.err;
        std::set<std::string> in_run;
        for (const auto& [key, value] : stats.at("counters").items()) in_run.insert(as_pattern(key));
        const result help = run(args + " --help-stats");
        ASSERT_EQ(help.code, 0) << args << ": " << help.err;
        std::set<std::string> documented;
        for (const auto& [pattern, unit] : listed(help.out)) documented.insert(pattern);
        EXPECT_GT(in_run.size(), 100u) << args;
        EXPECT_EQ(in_run, documented) << args;
    }
}
