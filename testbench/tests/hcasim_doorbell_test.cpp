// Doorbell batching (workload.post_list, perftest -l) changes the PCIe traffic as on real HCAs:
// single posts go through the inline window (no WQE fetch, one MMIO write per WQE), lists ring
// one doorbell per list and the WQE fetcher reads each WQE's 64-byte basic block.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

nlohmann::json run_json(const std::string& args) {
    nlohmann::json j;
    const result r = hcasim::test::run_hcasim_stats(args, "doorbell", &j);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? j : nlohmann::json::object();
}

}  // namespace

TEST(HcasimDoorbell, post_lists_ring_one_doorbell_per_list_and_the_hca_fetches_the_wqes) {
    constexpr uint64_t kIters = 8192;
    const std::string base = "--workload write_bw --size 64 --iters " + std::to_string(kIters) + " --verify";
    const nlohmann::json one = run_json(base);
    const nlohmann::json list = run_json(base + " --set workload.post_list=16");
    ASSERT_TRUE(one.contains("counters") && list.contains("counters"));
    const auto& c1 = one["counters"];
    const auto& c16 = list["counters"];
    EXPECT_EQ(one["results"][0]["verify"]["mismatches"], 0);
    EXPECT_EQ(list["results"][0]["verify"]["mismatches"], 0);
    // One WR per post: every WQE written through the inline window, none fetched.
    EXPECT_EQ(c1["node0.hca.wqe_fetcher.inline_wqes"].get<uint64_t>(), kIters);
    EXPECT_EQ(c1["node0.hca.doorbell_unit.sq_doorbells"].get<uint64_t>(), 0u);
    EXPECT_EQ(c1["node0.hca.dma_mux.wqe_fetch_bytes"].get<uint64_t>(), 0u);
    // Lists of 16: one doorbell per list (a list cut short when the QP ran out of credit adds
    // one), and each WQE (48 bytes: control, remote address, one data segment) fetched as one
    // 64-byte basic block of its 512-byte slot.
    const uint64_t doorbells = c16["node0.hca.doorbell_unit.sq_doorbells"].get<uint64_t>();
    EXPECT_GE(doorbells, kIters / 16);
    EXPECT_LE(doorbells, kIters / 8);
    EXPECT_EQ(c16["node0.hca.wqe_fetcher.inline_wqes"].get<uint64_t>(), 0u);
    EXPECT_EQ(c16["node0.hca.wqe_fetcher.wqes_fetched"].get<uint64_t>(), kIters);
    // (the fetcher's traffic class also carries its reads of the QP's 256-byte context)
    EXPECT_EQ(c16["node0.hca.dma_mux.wqe_fetch_bytes"].get<uint64_t>(),
              64 * kIters + 256 * c16["node0.hca.wqe_fetcher.qpc_reads"].get<uint64_t>());
    // Fewer MMIO writes from the CPU: the host posts faster and the message rate goes up.
    EXPECT_LT(c16["node0.hca.doorbell_unit.writes"].get<uint64_t>(),
              c1["node0.hca.doorbell_unit.writes"].get<uint64_t>() / 8);
    EXPECT_GT(list["results"][0]["msg_rate_mpps"].get<double>(),
              one["results"][0]["msg_rate_mpps"].get<double>());
    // Queue occupancy: a queue never holds more than it has room for, and lists of 16 leave the
    // doorbell FIFO emptier than one inline write per WQE does.
    const uint64_t fifo1 = c1["node0.hca.doorbell_unit.fifo_peak"].get<uint64_t>();
    const uint64_t fifo16 = c16["node0.hca.doorbell_unit.fifo_peak"].get<uint64_t>();
    EXPECT_GE(fifo1, 1u);
    EXPECT_LE(fifo1, std::stoull(one["config"]["node0.hca.doorbell_unit.fifo_entries"].get<std::string>()));
    EXPECT_LE(fifo16, fifo1);
    EXPECT_GE(c1["node0.hca.port.tx_queue_peak"].get<uint64_t>(), 1u);
    EXPECT_LE(c1["node0.hca.port.tx_queue_peak"].get<uint64_t>(),
              std::stoull(one["config"]["node0.hca.port.tx_queue_packets"].get<std::string>()));
    EXPECT_GE(c1["node1.hca.port.rx_queue_peak"].get<uint64_t>(), 1u);
}

TEST(HcasimDoorbell, post_list_out_of_range_is_an_error) {
    const result r = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 10 --set workload.post_list=0", "doorbell_bad");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("workload.post_list"), std::string::npos) << r.err;
}
