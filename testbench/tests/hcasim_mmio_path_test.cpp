// The two doorbell paths of issue 30 against the PCIe link. A single UD SEND post goes through
// the inline window: one MMIO write of the WQE rounded up to 64-byte basic blocks, which the link
// carries as TLPs of at most pcie.wc_chunk_bytes (a write-combining buffer) or MPS. With 16
// threads on 16 cores, 16 send units and a 1-cycle requester nothing else limits, so the message
// rate is the downstream TLP rate divided by the TLPs per WQE, computed here from the link's own
// formulas. Doorbell batching (workload.post_list=L) replaces L inline writes by one doorbell.
#include <gtest/gtest.h>

#include "model/pcie/pcie_link.h"
#include "testbench/tests/hcasim_run.h"
#include "tlm_if/mmio_map.h"
#include "tlm_if/wqe.h"
#include <nlohmann/json.hpp>

#include <string>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::pcie_link;

nlohmann::json run_json(const std::string& args) {
    nlohmann::json j;
    const hcasim::test::result r = hcasim::test::run_hcasim_stats(args, "mmio_path", &j);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? j : nlohmann::json::object();
}

uint64_t counter(const nlohmann::json& j, const std::string& key) {
    if (!j.contains("counters") || !j["counters"].contains(key)) {
        ADD_FAILURE() << "no counter " << key;
        return 0;
    }
    return j["counters"][key].get<uint64_t>();
}

/// The inline-window write of a UD SEND with `payload` bytes inline: control, datagram and
/// inline segments, rounded up to 64-byte basic blocks (firmware/verbs_qp.cpp, ring_send).
uint32_t ud_window_bytes(uint32_t payload) {
    namespace hw = hcasim::hw;
    const uint32_t wqe = sizeof(hw::wqe_ctrl_seg) + sizeof(hw::wqe_ud_seg) +
                         ((sizeof(hw::wqe_inline_seg) + payload + 15) & ~15u);
    return (wqe + hw::WQE_BASIC_BLOCK - 1) & ~(hw::WQE_BASIC_BLOCK - 1);
}

/// Checks the MMIO-bound message rate of 16 threads posting `payload`-byte inline UD SENDs on
/// the default link (PCIe Gen3 x16, MPS 256) with pcie.wc_chunk_bytes = `chunk`.
void expect_tlp_bound(uint32_t payload, unsigned chunk) {
    constexpr unsigned kGen = 3, kLanes = 16, kMps = 256;
    constexpr uint64_t kQps = 16, kMessages = 16000;  // --iters counts per QP: 1,000 each
    const uint32_t window = ud_window_bytes(payload);
    ASSERT_LE(window, hcasim::hw::INLINE_WINDOW_BYTES);
    const unsigned tlp = chunk ? chunk : kMps;
    const uint64_t tlps = (window + tlp - 1) / tlp;
    const uint64_t bytes = window + tlps * pcie_link::write_overhead_bytes;
    if (chunk == 0) {
        EXPECT_EQ(bytes, pcie_link::write_tlp_bytes(window, kMps));
    }
    const double bound_mpps = pcie_link::tlp_gbps(kGen, kLanes, kMps) * 1e3 / 8.0 / double(bytes);
    const std::string p = std::to_string(payload);
    const nlohmann::json j = run_json(
        "--workload msg_rate --set workload.op=ud_send --size " + p + " --set workload.inline_bytes=" + p +
        " --qps 16 --threads 16 --set cpu.cores=16 --iters " + std::to_string(kMessages / kQps) +
        " --set hca.transport_engine.send_units=16 --set hca.transport_engine.packet_cycles=1" +
        " --set pcie.generation=3 --set pcie.lanes=16 --set pcie.mps_bytes=256 --set pcie.wc_chunk_bytes=" +
        std::to_string(chunk));
    ASSERT_TRUE(j.contains("results"));
    const auto& r = j["results"][0];
    EXPECT_EQ(r["messages"].get<uint64_t>(), kMessages);
    // Every stream WQE went through the window (and each QP's one warm-up post).
    EXPECT_EQ(counter(j, "node0.hca.doorbell_unit.inline_writes"), kMessages + 16);
    EXPECT_EQ(counter(j, "node0.hca.wqe_fetcher.wqes_fetched"), 0u);
    const double mpps = r["msg_rate_mpps"].get<double>();
    EXPECT_LE(mpps, bound_mpps * (1 + 1e-9)) << tlps << " TLPs of " << bytes << " bytes per WQE";
    // Within 1.5% below (the stream's first and last WQEs; 2 TLPs per WQE: 98.8%), the link
    // busy all the while.
    EXPECT_GE(mpps, bound_mpps * 0.985) << "the link is not what limits: " << r.dump();
    EXPECT_GE(r["util"]["node0 PCIe down"].get<double>(), 0.985);
}

}  // namespace

TEST(HcasimMmioPath, the_mmio_path_is_bounded_by_the_links_tlp_rate_two_64_byte_tlps_per_128_byte_wqe) {
    ASSERT_EQ(ud_window_bytes(44), 128u);
    expect_tlp_bound(44, 64);  // 2 x 88 TLP bytes: 80.7 M WQEs/s on Gen3 x16
}

TEST(HcasimMmioPath, the_mmio_path_is_bounded_by_the_links_tlp_rate_three_64_byte_tlps_per_192_byte_wqe) {
    ASSERT_EQ(ud_window_bytes(60), 192u);
    expect_tlp_bound(60, 64);  // 3 x 88: 53.8 M/s
}

TEST(HcasimMmioPath, the_mmio_path_is_bounded_by_the_links_tlp_rate_one_tlp_per_wqe_without_write_combining) {
    expect_tlp_bound(44, 0);  // one 152-byte TLP: 93.5 M/s
}

TEST(HcasimMmioPath, doorbell_batching_cuts_the_send_queues_mmio_writes_by_exactly_the_list_length) {
    // One QP, one thread; workload.cq_mod = 32 returns send credit in whole lists, so no list is
    // cut short and each post of L WRs is one 8-byte doorbell; the HCA fetches the WQEs by DMA.
    constexpr uint64_t kMessages = 16384;
    const std::string base =
        "--workload msg_rate --set workload.op=ud_send --size 44 --set workload.inline_bytes=44 "
        "--qps 1 --set workload.cq_mod=32 --set pcie.wc_chunk_bytes=64 --iters " +
        std::to_string(kMessages);
    const nlohmann::json one = run_json(base);
    const uint64_t single = counter(one, "node0.hca.doorbell_unit.inline_writes");
    EXPECT_EQ(counter(one, "node0.hca.doorbell_unit.sq_doorbells"), 0u);
    for (unsigned list : {4u, 16u, 32u}) {
        SCOPED_TRACE("post_list " + std::to_string(list));
        const nlohmann::json j = run_json(base + " --set workload.post_list=" + std::to_string(list));
        const uint64_t warmup = counter(j, "node0.hca.doorbell_unit.inline_writes");  // the QP's warm-up post
        const uint64_t doorbells = counter(j, "node0.hca.doorbell_unit.sq_doorbells");
        EXPECT_EQ(warmup, 1u);
        EXPECT_EQ(single - warmup, kMessages) << "without lists each WQE is its own MMIO write";
        EXPECT_EQ(doorbells * list, single - warmup);
        EXPECT_EQ(counter(j, "node0.hca.wqe_fetcher.wqes_fetched"), kMessages);
    }
}

TEST(HcasimMmioPath, a_write_combining_chunk_that_is_not_a_power_of_two_exits_2_naming_the_key) {
    const hcasim::test::result r = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 10 --set pcie.wc_chunk_bytes=48", "mmio_path_bad");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("bad value '48' for key 'node0.pcie.wc_chunk_bytes' (--set): expected a power of 2"),
              std::string::npos)
        << r.err;
}
