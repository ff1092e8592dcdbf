// Calibration checks through the perftest-like workloads (testbench/workloads/workloads.h): RC WRITE
// bandwidth reaches the link's payload rate data_rate * MTU / (MTU + 26) when PCIe is not the
// bottleneck (calibration.md), and write_lat is plausible and exactly reproducible.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "model/core/param.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/workloads/workloads.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;

namespace {

/// Sets the keys and runs one phase; returns the single result row.
size_result run_one(const std::vector<std::pair<std::string, std::string>>& keys, const phase_spec& ph,
                    unsigned mtu) {
    for (auto& kv : keys) broker::instance().set(kv.first, kv.second, "test");
    run_spec spec;
    spec.phases = {ph};
    spec.mtu = mtu;
    std::vector<run_report> reps;
    try {
        reps = run(spec);
    } catch (const std::exception& e) {
        ADD_FAILURE() << "run failed: " << e.what();
        return {};
    }
    EXPECT_EQ(reps.size(), 1u);
    if (reps.empty() || reps[0].results.size() != 1) {
        ADD_FAILURE() << "no result row";
        return {};
    }
    return reps[0].results[0];
}

const std::vector<std::pair<std::string, std::string>> kGen4x16 = {
    {"pcie.generation", "4"}, {"pcie.lanes", "16"}, {"pcie.read_tags", "256"}};

void expect_write_bw(const std::string& speed, unsigned mtu, double data_rate_gbps) {
    auto keys = kGen4x16;
    keys.push_back({"link.speed", speed});
    keys.push_back({"link.width", "4"});
    const size_result r = run_one(keys, phase_spec{"write_bw", {1u << 20}, 300}, mtu);
    const double expect = data_rate_gbps * mtu / (mtu + 26.0);
    std::printf("write_bw %s 4x MTU %u, 1 MiB x 300: %.3f Gb/s (expected %.3f)\n", speed.c_str(), mtu,
                r.bw_gbps, expect);
    ::testing::Test::RecordProperty("bw_gbps", std::to_string(r.bw_gbps));
    EXPECT_NEAR(r.bw_gbps, expect, 0.01 * expect) << speed << " MTU " << mtu;
}

}  // namespace

SIM_TEST(E2eBandwidth, write_bw_1mib_edr_4x_mtu4096_is_link_payload_rate) {
    expect_write_bw("edr", 4096, 100.0);
}

SIM_TEST(E2eBandwidth, write_bw_1mib_fdr_4x_mtu2048_is_link_payload_rate) {
    // 54.545 * 2048 / 2074 = 53.86 Gb/s (calibration.md).
    expect_write_bw("fdr", 2048, 54.545);
}

namespace {
void write_lat(std::string& out) {
    auto keys = kGen4x16;
    keys.push_back({"link.speed", "edr"});
    const size_result r = run_one(keys, phase_spec{"write_lat", {2}, 200}, 4096);
    char buf[256];
    std::snprintf(buf, sizeof buf, "%a %a %a %a", r.lat_typical_us, r.lat_min_us, r.lat_max_us, r.lat_avg_us);
    std::printf("write_lat 2 B EDR: typical %.4f us, min %.4f, max %.4f\n", r.lat_typical_us, r.lat_min_us,
                r.lat_max_us);
    EXPECT_GT(r.lat_typical_us, 0.0);
    EXPECT_LT(r.lat_typical_us, 5.0);
    EXPECT_LE(r.lat_min_us, r.lat_typical_us);
    out = buf;
}
}  // namespace

TEST(E2eLatency, write_lat_2b_typical_is_positive_below_5us_and_reproducible) {
    const std::string a = run_forked_capture(write_lat);
    const std::string b = run_forked_capture(write_lat);
    EXPECT_FALSE(a.empty());
    EXPECT_EQ(a, b) << "two identical runs gave different latencies";
}
