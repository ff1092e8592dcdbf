// hcasim --workload mr_scale: WRITEs rotating over N memory regions per node. With a small MPT
// cache the hit rate falls from 1 at one region to near 0 at 4K, and the message rate with it;
// MTT lines of 8 entries give 7 hits in 8 when the lines do not fit; --verify checks every
// destination region; bad region counts are one-line errors.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

/// Runs hcasim with `args` (shell words), capturing stdout and stderr.
result run(const std::string& args) { return hcasim::test::run_hcasim(args, "mr_scale"); }

/// One row of the mr_scale table.
struct row {
    uint64_t mrs = 0, size = 0, iters = 0;
    double bw = 0, mpps = 0, mpt_hit = -2, mtt_hit = -2;
};

/// The rows of the mr_scale table in `out` (lines of seven fields, the first two numbers).
std::vector<row> table(const std::string& out) {
    std::vector<row> rows;
    std::istringstream in(out);
    bool in_table = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(" #mrs ", 0) == 0) {  // the column headings
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        std::istringstream f(line);
        row r;
        std::string mpt, mtt;
        if (!(f >> r.mrs >> r.size >> r.iters >> r.bw >> r.mpps >> mpt >> mtt))
            break;  // the end of the table
        r.mpt_hit = mpt == "-" ? -1 : std::stod(mpt);
        r.mtt_hit = mtt == "-" ? -1 : std::stod(mtt);
        rows.push_back(r);
    }
    return rows;
}

const std::string small_caches =
    "--set hca.translation_unit.mpt_cache_entries=64 --set hca.translation_unit.mtt_cache_lines=64";

/// The tables of two mr_scale runs with 64 B WRITEs, the small caches and `args`, the second
/// with `change` too: both must succeed with `n` rows (else a test failure and no rows).
std::pair<std::vector<row>, std::vector<row>> with_and_without(const std::string& args,
                                                               const std::string& change, size_t n) {
    std::vector<row> rows[2];
    for (int i = 0; i < 2; ++i) {
        const result r = run("--workload mr_scale --size 64 --iters 2000 " + small_caches + " " + args +
                             (i ? " " + change : ""));
        EXPECT_EQ(r.code, 0) << r.err;
        rows[i] = table(r.out);
        EXPECT_EQ(rows[i].size(), n) << r.out;
        if (r.code != 0 || rows[i].size() != n) rows[i].clear();
    }
    return {rows[0], rows[1]};
}

}  // namespace

TEST(HcasimMrScale, mpt_hit_rate_and_message_rate_fall_when_regions_outnumber_the_cache) {
    const std::string json_path = ::testing::TempDir() + "mrs_" + std::to_string(getpid()) + ".json";
    const result r = run("--workload mr_scale --mrs 1,4K --size 64 --iters 2000 " + small_caches +
                         " --stats-json '" + json_path + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<row> rows = table(r.out);
    ASSERT_EQ(rows.size(), 2u) << r.out;
    EXPECT_EQ(rows[0].mrs, 1u);
    EXPECT_EQ(rows[1].mrs, 4096u);
    EXPECT_EQ(rows[0].size, 64u);
    EXPECT_EQ(rows[0].iters, 2000u);
    EXPECT_EQ(rows[1].iters, 4u * 4096u);  // every region at least 4 times
    // One region: after the warm-up pass every lookup hits. 4K regions cycling through 64
    // entries (16 sets of 4 ways, LRU): every lookup misses.
    EXPECT_GT(rows[0].mpt_hit, 0.999);
    EXPECT_LT(rows[1].mpt_hit, 0.01);
    // 4K one-page regions: 512 MTT lines through 64; consecutive regions share a line of 8.
    EXPECT_GT(rows[0].mtt_hit, 0.999);
    EXPECT_NEAR(rows[1].mtt_hit, 7.0 / 8.0, 0.01);
    // Each miss is a DMA read before the in-order unit continues: fewer messages per second.
    EXPECT_LT(rows[1].mpps, 0.8 * rows[0].mpps) << r.out;

    const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    EXPECT_EQ(j["workload"], "mr_scale");
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][1]["size_bytes"], 64);
    EXPECT_EQ(j["results"][1]["iters"], 4 * 4096);
    EXPECT_NEAR(j["results"][0]["msg_rate_mpps"].get<double>(), rows[0].mpps, 1e-5);
    EXPECT_NEAR(j["results"][1]["msg_rate_mpps"].get<double>(), rows[1].mpps, 1e-5);
    EXPECT_EQ(j["config"]["workload.mrs"], "1,4K");
    EXPECT_EQ(j["config"]["node1.hca.translation_unit.mpt_cache_entries"], "64");
    // The counters agree: at 4K regions at least one MPT miss per WRITE on each node.
    EXPECT_GE(j["counters"]["node0.hca.translation_unit.mpt_misses"].get<uint64_t>(), 4u * 4096u);
    EXPECT_GE(j["counters"]["node1.hca.translation_unit.mpt_misses"].get<uint64_t>(), 4u * 4096u);
}

TEST(HcasimMrScale, mpt_misses_begin_before_the_mpt_cache_is_full_when_region_indexes_conflict) {
    // 48 regions in a 64-entry, 4-way MPT cache (16 sets): index mod 16 gives every set 3, so
    // every lookup hits; a hashed index gives some sets more than 4 and they thrash. Each miss
    // holds the in-order translation unit for a DMA read: the rate falls far below the cache size.
    const auto [m, h] = with_and_without("--mrs 32,48", "--set hca.translation_unit.mpt_cache_index=hash", 2);
    ASSERT_EQ(m.size() + h.size(), 4u);
    EXPECT_EQ(m[1].mpt_hit, 1.0);
    EXPECT_GT(h[1].mpt_hit, 0.0) << "only the regions of the overfull sets miss";
    EXPECT_LT(h[1].mpt_hit, 0.9);
    EXPECT_LT(h[1].mpps, 0.5 * m[1].mpps);
}

TEST(HcasimMrScale, mpt_misses_overlap_with_miss_slots_and_the_cliff_is_shallower) {
    // 128 regions through 64 MPT entries: every WRITE misses on both nodes. In order, each
    // miss holds the unit for a DMA read round trip (~550 ns: under 2 Mpps); with 8 miss slots
    // 8 reads overlap and later lookups go on, so the same misses cost far less time.
    const auto [a, b] = with_and_without("--mrs 128", "--set hca.translation_unit.miss_slots=8", 1);
    ASSERT_EQ(a.size() + b.size(), 2u);
    EXPECT_EQ(a[0].mpt_hit, 0.0);
    EXPECT_EQ(b[0].mpt_hit, 0.0);
    EXPECT_LT(a[0].mpps, 2.0);
    EXPECT_GT(b[0].mpps, 4 * a[0].mpps);
    // Results leave the unit in order: every destination region still holds its bytes.
    const result v = run("--workload mr_scale --mrs 1,5,300 --size 64,4K,5000 --qps 3 --iters 200 --verify " +
                         small_caches + " --set hca.translation_unit.miss_slots=8");
    EXPECT_EQ(v.code, 0) << v.err << v.out;
}

TEST(HcasimMrScale, verify_checks_every_destination_region) {
    // Three QPs of 67 WRITEs each (201, at least 4 per region), region sizes of one and two pages
    // (the regions are registered again).
    const result r = run("--workload mr_scale --mrs 1,5,300 --size 64,4K,5000 --qps 3 --iters 67 --verify");
    ASSERT_EQ(r.code, 0) << r.err << r.out;
    const std::vector<row> rows = table(r.out);
    ASSERT_EQ(rows.size(), 9u) << r.out;
    EXPECT_EQ(rows[8].mrs, 300u);
    EXPECT_EQ(rows[8].size, 5000u);
    EXPECT_EQ(rows[0].iters, 201u);   // the table's #messages: --iters x --qps
    EXPECT_EQ(rows[8].iters, 1200u);  // 4 x 300 regions
    // Destination bytes: 1 + 5 + 300 regions per size, plus 8 guard bytes where the page has room.
    const uint64_t regions = 1 + 5 + 300;
    const uint64_t bytes = regions * (64 + 8) + regions * 4096 + regions * (5000 + 8);
    EXPECT_NE(
        r.out.find(" verify: " + std::to_string(bytes) + " bytes checked, 0 mismatches, 0 bad completions"),
        std::string::npos)
        << r.out;
}

TEST(HcasimMrScale, same_seed_gives_identical_table) {
    const std::string args = "--workload mr_scale --mrs 1,64 --size 64 --iters 300 " + small_caches;
    const result a = run(args), b = run(args);
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
}

TEST(HcasimMrScale, bad_region_counts_are_one_line_errors) {
    const result zero = run("--workload mr_scale --mrs 0");
    EXPECT_EQ(zero.code, 2);
    EXPECT_EQ(zero.err, "hcasim: error: --mrs '0': 0 regions (expected 1 to 1048576)\n");
    const result junk = run("--workload mr_scale --mrs 4x");
    EXPECT_EQ(junk.code, 2);
    EXPECT_NE(junk.err.find("--mrs '4x': bad count '4x'"), std::string::npos) << junk.err;
    const result other = run("--workload write_bw --mrs 16");
    EXPECT_EQ(other.code, 2);
    EXPECT_EQ(other.err, "hcasim: error: --mrs: only mr_scale takes memory region counts\n");
    const result key = run("--workload mr_scale --set workload.mrs=1,,2");
    EXPECT_EQ(key.code, 2);
    EXPECT_NE(key.err.find("workload.mrs '1,,2': bad count ''"), std::string::npos) << key.err;
    const result empty = run("--workload mr_scale --size 0 --mrs 1");
    EXPECT_EQ(empty.code, 2);
    EXPECT_NE(empty.err.find("mr_scale needs messages of at least 1 byte"), std::string::npos) << empty.err;
}

TEST(HcasimMrScale, more_regions_than_mpt_entries_is_a_clear_run_failure) {
    const result r = run("--workload mr_scale --mrs 1K --size 64 --set hca.max_mrs=512");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("mr_scale: 1024 regions of 4096 bytes need 1026 MPT"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("hca.max_mrs"), std::string::npos) << r.err;
}

// libsystemc (linked through testbench_lib) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
