// DMA failures: a region whose translation table (MTT) points outside host memory, as a driver
// bug or a hostile client could leave it. Every DMA result is checked ([[nodiscard]] on
// dma_port): a read that fails fails the operation that made it; a write is posted on PCIe and
// its failure never reaches the HCA (the host's PCIe link counts it).
#include <gtest/gtest.h>

#include <string>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

/// A physical address far beyond any configured host memory.
constexpr uint64_t kOutsideMemory = 1ull << 50;

/// Rewrites the MTT entries of node `node`'s region `mr` (through the command interface, as a
/// buggy driver would) so every page of it translates to an address outside host memory.
void point_outside_memory(rc_harness& h, unsigned node, ibv_mr* mr) {
    fw::hca_driver& d = h.s[node].sw->driver;
    hw::mpt_entry e{};
    ASSERT_EQ(d.exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &e, sizeof e), hw::CMD_OK);
    ASSERT_GT(e.mtt_count, 0u);
    struct {
        hw::write_mtt_in w;
        hw::mtt_entry entries[16];
    } in{};
    ASSERT_LE(e.mtt_count, 16u);
    in.w.first_index = e.mtt_base;
    in.w.count = e.mtt_count;
    for (uint32_t i = 0; i < e.mtt_count; ++i)
        in.entries[i].value = (kOutsideMemory + i * 4096) | hw::MTT_PRESENT;
    ASSERT_EQ(d.exec(hw::CMD_WRITE_MTT, 0, 0, &in, sizeof in.w + e.mtt_count * sizeof(hw::mtt_entry)),
              hw::CMD_OK);
}

}  // namespace

SIM_TEST(DmaError, a_write_whose_target_pages_are_outside_host_memory_is_lost_on_pcie_unknown_to_the_hca) {
    // DMA writes are posted (PCIe): no completion tells the HCA that host memory refused one,
    // so the WRITE succeeds as on real hardware; the host's PCIe link counts the refusal.
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192);
        point_outside_memory(h, 1, b.dmr);
        const ibv_wc wc = write_wc(h, {b.src, 8192, b.smr->lkey}, b.dst, b.dmr->rkey, "WRITE");
        EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
        EXPECT_EQ(rc_harness::counter_value("node1.pcie.dma_write_errors"), 2u);  // one per 4 KiB page
        EXPECT_EQ(rc_harness::counter_value("node0.pcie.dma_write_errors"), 0u);
    });
}

SIM_TEST(DmaError, a_write_gathering_from_pages_outside_host_memory_completes_with_local_qp_operation_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096);
        point_outside_memory(h, 0, b.smr);
        const ibv_wc wc = write_wc(h, {b.src, 4096, b.smr->lkey}, b.dst, b.dmr->rkey, "WRITE");
        EXPECT_EQ(wc.status, IBV_WC_LOC_QP_OP_ERR);
        std::vector<uint8_t> got = h.read_mem(1, b.dst, 4096);
        EXPECT_EQ(got, std::vector<uint8_t>(4096, kGuardByte));  // nothing reached the target
    });
}

SIM_TEST(DmaError, a_read_of_pages_outside_the_responders_host_memory_naks_remote_operational_error) {
    rc_harness h;
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096);
        // node1's region is the READ's source: its pages point outside node1's memory.
        point_outside_memory(h, 1, b.dmr);
        const ibv_wc wc = read_wc(h, {b.src, 4096, b.smr->lkey}, b.dst, b.dmr->rkey, "READ");
        EXPECT_EQ(wc.status, IBV_WC_REM_OP_ERR);
    });
}
