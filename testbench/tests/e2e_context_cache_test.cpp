// On-chip context caches and the shared WQE buffer, end to end on two nodes back to back:
// the transport engine's QP context cache (a miss reads the 256-byte QPC entry from host
// memory before the packet, a hit costs nothing), the CQ writer's CQ context cache (a miss
// reads the 64-byte CQC entry before the CQE), and a WQE buffer smaller than one QP's work
// (fetches wait for entries; READs hold theirs until the response; nothing is lost).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/contexts.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

/// Simulated ns from posting one 8-byte WRITE on the harness QP to its completion.
uint64_t timed_write(rc_harness& h, const bufs& b, uint64_t wr_id) {
    const uint64_t t0 = h.now_ns();
    EXPECT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 8, b.smr->lkey}}, wr_id, IBV_SEND_SIGNALED, b.dst,
                          b.dmr->rkey),
              0);
    const ibv_wc wc = one_wc(h, h.s[0].scq, "write " + std::to_string(wr_id));
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    return h.now_ns() - t0;
}

}  // namespace

SIM_TEST(QpContextCache, a_miss_reads_the_qpc_entry_before_the_packet_and_a_hit_costs_nothing) {
    rc_config cfg;
    cfg.keys = {{"hca.transport_engine.qpc_cache_entries", "1"},
                {"hca.transport_engine.qpc_cache_ways", "1"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        const auto pair = extra_rc_pair(h, 0x500);
        ASSERT_NE(pair.first, nullptr);
        timed_write(h, b, 1);  // the regions' MPT/MTT entries come on chip
        const uint64_t warm = timed_write(h, b, 2);
        // (within 1 ns: now_ns() truncates picoseconds)
        EXPECT_NEAR(double(timed_write(h, b, 3)), double(warm), 1.0) << "hits cost no time";
        // A WRITE on the other pair takes the one entry on each node: the harness QPs' are evicted.
        ibv_sge sge{b.src, 8, b.smr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = 9;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = b.dst + 64;
        wr.wr.rdma.rkey = b.dmr->rkey;
        ibv_send_wr* bad = nullptr;
        ASSERT_EQ(ibv_post_send(pair.first, &wr, &bad), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "second pair").status, IBV_WC_SUCCESS);
        const uint64_t m0 = ctr(0, "transport_engine.qpc_misses"), m1 = ctr(1, "transport_engine.qpc_misses");
        const uint64_t bytes0 = ctr(0, "dma_mux.qpc_bytes"), bytes1 = ctr(1, "dma_mux.qpc_bytes");
        const uint64_t hits0 = ctr(0, "transport_engine.qpc_hits");
        const uint64_t cold = timed_write(h, b, 4);
        // One miss each side: the requester before its packet, the responder before placing
        // it; the ACK finds the requester's context on chip.
        EXPECT_EQ(ctr(0, "transport_engine.qpc_misses"), m0 + 1);
        EXPECT_EQ(ctr(1, "transport_engine.qpc_misses"), m1 + 1);
        EXPECT_EQ(ctr(0, "transport_engine.qpc_hits"), hits0 + 1) << "the ACK";
        EXPECT_EQ(ctr(0, "dma_mux.qpc_bytes"), bytes0 + sizeof(hw::qp_context));
        EXPECT_EQ(ctr(1, "dma_mux.qpc_bytes"), bytes1 + sizeof(hw::qp_context));
        // The two misses are two DMA reads in series, each the host's read latency
        // (pcie.read_latency_ns, 535 ns by default) plus the entry's transfer.
        EXPECT_GE(cold - warm, 2 * 535u) << "cold " << cold << " ns, warm " << warm << " ns";
        EXPECT_LE(cold - warm, 2 * 535u + 200u) << "cold " << cold << " ns, warm " << warm << " ns";
        EXPECT_NEAR(double(timed_write(h, b, 5)), double(warm), 1.0) << "on chip again";
        EXPECT_EQ(ctr(0, "transport_engine.qpc_misses"), m0 + 1);
    });
}

SIM_TEST(CqContextCache, completions_to_alternating_cqs_miss_a_one_entry_cache) {
    rc_config cfg;
    cfg.keys = {{"hca.cq_writer.cqc_cache_entries", "1"}, {"hca.cq_writer.cqc_cache_ways", "1"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        // Setup created the send CQ, then the receive CQ: the receive CQ's context is on chip.
        ASSERT_EQ(ctr(0, "dma_mux.cqc_bytes"), 0u) << "no miss before the first completion";
        timed_write(h, b, 1);
        EXPECT_EQ(ctr(0, "cq_writer.cqc_misses"), 1u) << "the send CQ's context is read";
        const uint64_t warm = timed_write(h, b, 2);
        EXPECT_EQ(ctr(0, "cq_writer.cqc_misses"), 1u) << "then it is on chip";
        // A receive completion on node0 takes the one entry for the receive CQ ...
        ASSERT_EQ(h.post_recv(0, {{b.src + 1024, 64, b.smr->lkey}}, 7), 0);
        ASSERT_EQ(h.post_send(1, IBV_WR_SEND, {{b.dst, 64, b.dmr->lkey}}, 8), 0);
        EXPECT_EQ(one_wc(h, h.s[0].rcq, "receive").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, h.s[1].scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(0, "cq_writer.cqc_misses"), 2u);
        // ... so the next send completion misses again: one DMA read before the CQE write.
        const uint64_t cold = timed_write(h, b, 3);
        EXPECT_EQ(ctr(0, "cq_writer.cqc_misses"), 3u);
        EXPECT_GE(cold - warm, 535u) << "cold " << cold << " ns, warm " << warm << " ns";
        EXPECT_LE(cold - warm, 535u + 100u) << "cold " << cold << " ns, warm " << warm << " ns";
        EXPECT_NEAR(double(timed_write(h, b, 4)), double(warm), 1.0)
            << "on chip again (within 1 ns: now_ns() truncates)";
        EXPECT_EQ(ctr(0, "dma_mux.cqc_bytes"), 3 * sizeof(hw::cq_context));
        EXPECT_EQ(ctr(0, "cq_writer.cqc_hits") + ctr(0, "cq_writer.cqc_misses"), ctr(0, "cq_writer.cqes"));
    });
}

SIM_TEST(WqeBuffer, a_two_entry_buffer_stalls_fetches_and_loses_no_wqe) {
    rc_config cfg;
    cfg.keys = {{"hca.transport_engine.wqe_buffer_entries", "2"}};
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        // One post of 32 WRITEs (one doorbell): the fetcher finds room for 2 at a time.
        constexpr size_t kMsgs = 32, kLen = 8192;
        const bufs b = make_bufs(h, kMsgs * kLen, 5);
        std::vector<ibv_sge> sges(kMsgs);
        std::vector<ibv_send_wr> wrs(kMsgs);
        for (size_t k = 0; k < kMsgs; ++k) {
            sges[k] = ibv_sge{b.src + k * kLen, uint32_t(kLen), b.smr->lkey};
            wrs[k].wr_id = k;
            wrs[k].sg_list = &sges[k];
            wrs[k].num_sge = 1;
            wrs[k].opcode = IBV_WR_RDMA_WRITE;
            wrs[k].send_flags = IBV_SEND_SIGNALED;
            wrs[k].wr.rdma.remote_addr = b.dst + k * kLen;
            wrs[k].wr.rdma.rkey = b.dmr->rkey;
        }
        ASSERT_EQ(post_list(h.s[0].qp, wrs), 0);
        const auto wcs = h.expect_wc(h.s[0].scq, kMsgs, "writes");
        ASSERT_EQ(wcs.size(), kMsgs);
        for (size_t k = 0; k < kMsgs; ++k) {
            EXPECT_EQ(wcs[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(wcs[k].wr_id, k) << "completions in order";
        }
        EXPECT_TRUE(h.expect_mem(1, b.dst, pattern(kMsgs * kLen, 5), "written data"));
        EXPECT_GT(ctr(0, "transport_engine.wqe_buffer_stalls"), 0u);
        // READs keep their entry until the response is placed: 16 READs through 2 entries.
        const uint64_t back = h.alloc(0, kMsgs * kLen, 4096);
        h.fill_mem(0, back, kMsgs * kLen, kGuardByte);
        ibv_mr* bmr = h.reg(0, back, kMsgs * kLen);
        for (size_t k = 0; k < 16; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {{back + k * 2 * kLen, 2 * kLen, bmr->lkey}}, 100 + k,
                                  IBV_SEND_SIGNALED, b.dst + k * 2 * kLen, b.dmr->rkey),
                      0);
        const auto rd = h.expect_wc(h.s[0].scq, 16, "reads");
        ASSERT_EQ(rd.size(), 16u);
        for (size_t k = 0; k < 16; ++k) {
            EXPECT_EQ(rd[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(rd[k].wr_id, 100 + k);
        }
        EXPECT_TRUE(h.expect_mem(0, back, pattern(kMsgs * kLen, 5), "read back"));
        EXPECT_LE(ctr(0, "transport_engine.wqe_buffer_peak"), 2u) << "never more entries than the buffer has";
    });
}
