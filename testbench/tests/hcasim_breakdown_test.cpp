// The latency breakdown partitions the reported latency (docs/architecture.md, "Path probe"):
// for one packet and many, for SEND, WRITE, READ and both atomics, the stages are consecutive
// intervals of the traced iteration, so they add up to its latency, which in these fault-free
// runs is the table's t_typical (to the printed precision, 0.01 us). A multi-packet message's stages
// follow its last packet: the requester's serialisation of a 1 MiB WRITE is counted once, and
// the last packet's flight over the cable is not lost to the overlap (it read 0.000 from 8 KiB
// up, and 1 MiB summed to 170.3 us against 86.28).
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

/// Runs `args`, returns its stats JSON; checks for each size that no stage is negative and
/// that the stages add up to the table's t_typical to the table's precision (0.01 us; the
/// traced iteration's sample and the median differ by a nanosecond at most), in the JSON
/// and on the printed line.
nlohmann::json run_breakdown(const std::string& args, const std::string& mode) {
    const std::string js = ::testing::TempDir() + "breakdown_" + std::to_string(getpid()) + ".json";
    const result r = hcasim::test::run_hcasim(args + " --stats-json '" + js + "'", "breakdown");
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    const std::string text = slurp(js);
    std::remove(js.c_str());
    if (text.empty()) return {};
    const auto j = nlohmann::json::parse(text);
    for (const auto& res : j["results"]) {
        const std::string what = args + ", " + std::to_string(res["size_bytes"].get<uint64_t>()) + " B";
        EXPECT_TRUE(res.contains("breakdown_us")) << what;
        double sum = 0;
        for (const auto& [stage, us] : res["breakdown_us"].items()) {
            EXPECT_GE(us.get<double>(), 0.0) << what << ": " << stage;
            sum += us.get<double>();
        }
        const double typical = res["lat_typical_us"].get<double>();
        EXPECT_NEAR(sum, typical, 0.005) << what << ": the stages partition the latency";
        const std::string line =
            " breakdown " + std::to_string(res["size_bytes"].get<uint64_t>()) + " B, " + mode;
        const size_t at = r.out.find(line);
        EXPECT_NE(at, std::string::npos) << what << "\n" << r.out;
        if (at != std::string::npos) {
            const size_t s = r.out.find(" sum ", at);
            EXPECT_NEAR(std::stod(r.out.substr(s + 5)), typical, 0.005) << what << ": the printed sum";
        }
    }
    return j;
}

double stage(const nlohmann::json& j, size_t i, const char* name) {
    return j["results"][i]["breakdown_us"][name].get<double>();
}

}  // namespace

TEST(HcasimBreakdown, stages_sum_to_the_reported_latency_for_one_and_many_packets_write_and_send) {
    // 2 B and 4 KiB are one packet, 8 KiB two, 64 KiB sixteen, 1 MiB 256 (MTU 4096).
    for (const char* w : {"write_lat", "send_lat"}) {
        const auto j =
            run_breakdown(std::string("--workload ") + w + " --size 2,4096,8K,64K,1M --iters 21", "one way");
        ASSERT_EQ(j["results"].size(), 5u) << w;
        const char* cable = "cable, switch and receive pipeline";
        const char* requester = "requester: pipeline, payload DMA read, serialisation";
        for (size_t i = 1; i < 5; ++i) {
            // The last packet's flight is the same whatever the message's size.
            EXPECT_NEAR(stage(j, i, cable), stage(j, 0, cable), 0.001) << w << " " << i;
            // Serialising more packets takes longer.
            EXPECT_GT(stage(j, i, requester), stage(j, i - 1, requester)) << w << " " << i;
        }
        // 1 MiB at 100 Gb/s: some 84 us of serialisation, counted once.
        EXPECT_GT(stage(j, 4, requester), 80.0) << w;
        EXPECT_LT(stage(j, 4, "responder: pipeline, DMA write"), 1.0) << w;
    }
}

TEST(HcasimBreakdown, stages_sum_to_the_reported_latency_for_read_and_atomics) {
    const auto r = run_breakdown("--workload read_lat --size 8,4096,64K,1M --iters 21", "round trip");
    ASSERT_EQ(r["results"].size(), 4u);
    const char* responder = "responder: pipeline, payload DMA read, serialisation";
    for (size_t i = 1; i < 4; ++i) {
        EXPECT_GT(stage(r, i, responder), stage(r, i - 1, responder)) << i;
        EXPECT_NEAR(stage(r, i, "cable back, receive pipeline"), stage(r, 0, "cable back, receive pipeline"),
                    0.001)
            << i;
    }
    for (const char* op : {"fetch_add", "cmp_swap"}) {
        const auto a =
            run_breakdown(std::string("--workload atomic_lat --atomic ") + op + " --iters 21", "round trip");
        ASSERT_EQ(a["results"].size(), 1u) << op;
        EXPECT_GT(stage(a, 0, "responder: pipeline, atomic at host memory, serialisation"), 0.5) << op;
    }
}
