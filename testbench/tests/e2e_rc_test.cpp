// End-to-end RC between node0 and node1 (back to back): data lands byte-exactly, completion
// fields, receive WR consumption rules (C10-81, C10-86, C10-87), signaling, packetisation per
// path MTU, error completions and flushes, determinism.
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <tuple>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

constexpr size_t kGuardBytes = 100;  // before and after every target range

const char* op_name(ibv_wr_opcode op) { return op == IBV_WR_RDMA_WRITE ? "write" : "send"; }

/// WRITE or SEND of `size` bytes from node0 into node1; every byte checked, guards intact.
void transfer_exact(ibv_wr_opcode op, size_t size) {
    rc_config cfg;
    rc_harness h(cfg);
    h.run([&](rc_harness& h) {
        const uint64_t seed = size * 2654435761u + (op == IBV_WR_SEND ? 1 : 0);
        const auto data = pattern(size, seed);
        // Source at an odd offset inside its allocation, so neither end is page aligned.
        const uint64_t src_alloc = h.alloc(0, size + 64, 4096);
        const uint64_t src = src_alloc + 5;
        h.write_mem(0, src, data);
        ibv_mr* smr = h.reg(0, src_alloc, size + 64);
        const uint64_t region = h.alloc(1, size + 2 * kGuardBytes, 64);
        h.fill_mem(1, region, size + 2 * kGuardBytes, kGuardByte);
        ibv_mr* dmr = h.reg(1, region, size + 2 * kGuardBytes);
        if (!smr || !dmr) return;
        const uint64_t dst = region + kGuardBytes;
        if (op == IBV_WR_SEND) {
            ASSERT_EQ(h.post_recv(1, {{dst, uint32_t(size), dmr->lkey}}, 0xBEEF), 0);
        }
        ASSERT_EQ(
            h.post_send(0, op, {{src, uint32_t(size), smr->lkey}}, 0x1234, IBV_SEND_SIGNALED, dst, dmr->rkey),
            0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "send completion", 200'000'000ull);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].wr_id, 0x1234u);
        if (op == IBV_WR_SEND) {
            auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive completion");
            ASSERT_EQ(rwc.size(), 1u);
            EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
            EXPECT_EQ(rwc[0].byte_len, size);
        }
        h.sleep(1, 10'000);  // let every posted DMA write land
        h.expect_mem(1, dst, data, std::string(op_name(op)) + " payload");
        h.expect_fill(1, region, kGuardBytes, kGuardByte, "guard before");
        h.expect_fill(1, dst + size, kGuardBytes, kGuardByte, "guard after");
        // The source is untouched.
        h.expect_mem(0, src, data, "source");
    });
}

class RcTransferSize : public ::testing::TestWithParam<std::tuple<ibv_wr_opcode, size_t>> {};

TEST_P(RcTransferSize, every_byte_lands_and_guards_intact) {
    const auto [op, size] = GetParam();
    run_forked([op = op, size = size] { transfer_exact(op, size); });
}

INSTANTIATE_TEST_SUITE_P(E2eRc, RcTransferSize,
                         ::testing::Combine(::testing::Values(IBV_WR_RDMA_WRITE, IBV_WR_SEND),
                                            ::testing::Values(size_t(1), size_t(2), size_t(63), size_t(64),
                                                              size_t(255), size_t(4095), size_t(4096),
                                                              size_t(4097), size_t(65536),
                                                              size_t((1u << 20) + 17), size_t(8u << 20))),
                         [](const ::testing::TestParamInfo<std::tuple<ibv_wr_opcode, size_t>>& i) {
                             return std::string(op_name(std::get<0>(i.param))) + "_" +
                                    std::to_string(std::get<1>(i.param));
                         });

std::vector<uint8_t> concat_from(rc_harness& h, unsigned node, const std::vector<ibv_sge>& sges) {
    std::vector<uint8_t> out;
    for (auto& s : sges) {
        auto v = h.read_mem(node, s.addr, s.length);
        out.insert(out.end(), v.begin(), v.end());
    }
    return out;
}

}  // namespace

// ------------------------------------------------------------------ multi-SGE

SIM_TEST(E2eRc, send_gathers_four_sges_across_page_boundaries_and_mrs) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t a = h.alloc(0, 4 * 4096, 4096);
        const uint64_t b = h.alloc(0, 2 * 4096, 4096);
        h.write_mem(0, a, pattern(4 * 4096, 11));
        h.write_mem(0, b, pattern(2 * 4096, 12));
        ibv_mr* ma = h.reg(0, a, 4 * 4096);
        ibv_mr* mb = h.reg(0, b, 2 * 4096);
        // Odd lengths; the first, second and fourth cross a page boundary; two MRs.
        std::vector<ibv_sge> g = {{a + 4000, 211, ma->lkey},
                                  {b + 4096 - 7, 13, mb->lkey},
                                  {a + 2 * 4096 + 17, 1, ma->lkey},
                                  {a + 3 * 4096 - 1001, 3001, ma->lkey}};
        const auto expect = concat_from(h, 0, g);
        const uint32_t total = uint32_t(expect.size());
        const uint64_t r = h.alloc(1, 8192, 64);
        h.fill_mem(1, r, 8192, kGuardByte);
        ibv_mr* mr = h.reg(1, r, 8192);
        ASSERT_EQ(h.post_recv(1, {{r + 64, 8000, mr->lkey}}, 7), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, g, 8), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, total);
        auto swc = h.expect_wc(h.s[0].scq, 1, "send");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        h.expect_mem(1, r + 64, expect, "gathered payload");
        h.expect_fill(1, r, 64, kGuardByte, "guard before");
        h.expect_fill(1, r + 64 + total, 8192 - 64 - total, kGuardByte, "rest of receive buffer");
    });
}

SIM_TEST(E2eRc, send_scatters_into_three_receive_sges) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint32_t len = 5000;
        const auto data = pattern(len, 21);
        const uint64_t src = h.alloc(0, len, 64);
        h.write_mem(0, src, data);
        ibv_mr* smr = h.reg(0, src, len);
        const uint64_t r = h.alloc(1, 4 * 4096, 4096);
        h.fill_mem(1, r, 4 * 4096, kGuardByte);
        ibv_mr* mr = h.reg(1, r, 4 * 4096);
        // 1001 bytes crossing a page, 7 bytes, then the rest (3992 of 5000 available).
        std::vector<ibv_sge> sc = {
            {r + 4096 - 500, 1001, mr->lkey}, {r + 6000, 7, mr->lkey}, {r + 2 * 4096 + 3, 5000, mr->lkey}};
        ASSERT_EQ(h.post_recv(1, sc, 31), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, len, smr->lkey}}, 32), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, len);
        h.expect_wc(h.s[0].scq, 1, "send");
        h.expect_mem(1, r + 4096 - 500, {data.begin(), data.begin() + 1001}, "sge 0");
        h.expect_mem(1, r + 6000, {data.begin() + 1001, data.begin() + 1008}, "sge 1");
        h.expect_mem(1, r + 2 * 4096 + 3, {data.begin() + 1008, data.end()}, "sge 2");
        h.expect_fill(1, r, 4096 - 500, kGuardByte, "before sge 0");
        h.expect_fill(1, r + 4096 + 501, 6000 - (4096 + 501), kGuardByte, "between sge 0 and 1");
        h.expect_fill(1, r + 6007, 2 * 4096 + 3 - 6007, kGuardByte, "between sge 1 and 2");
        h.expect_fill(1, r + 2 * 4096 + 3 + (len - 1008), 4 * 4096 - (2 * 4096 + 3 + (len - 1008)),
                      kGuardByte, "after the message in sge 2");
    });
}

SIM_TEST(E2eRc, rdma_write_gathers_four_sges) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t a = h.alloc(0, 4 * 4096, 4096);
        h.write_mem(0, a, pattern(4 * 4096, 41));
        ibv_mr* ma = h.reg(0, a, 4 * 4096);
        std::vector<ibv_sge> g = {{a + 4095, 1, ma->lkey},
                                  {a + 100, 4097, ma->lkey},
                                  {a + 3 * 4096 - 200, 333, ma->lkey},
                                  {a + 4096 * 2 + 1, 2000, ma->lkey}};
        const auto expect = concat_from(h, 0, g);
        const uint64_t r = h.alloc(1, 12000, 64);
        h.fill_mem(1, r, 12000, kGuardByte);
        ibv_mr* mr = h.reg(1, r, 12000);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, g, 9, IBV_SEND_SIGNALED, r + 999, mr->rkey), 0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "write");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[0].opcode, IBV_WC_RDMA_WRITE);
        h.sleep(1, 10'000);
        h.expect_mem(1, r + 999, expect, "written payload");
        h.expect_fill(1, r, 999, kGuardByte, "guard before");
        h.expect_fill(1, r + 999 + expect.size(), 12000 - 999 - expect.size(), kGuardByte, "guard after");
    });
}

// ------------------------------------------------------------------ completion fields

SIM_TEST(E2eRc, send_with_imm_completion_fields) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        h.write_mem(0, src, pattern(4096, 51));
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t r = h.alloc(1, 8192, 64);
        ibv_mr* rmr = h.reg(1, r, 8192);
        ASSERT_EQ(h.post_recv(1, {{r, 8192, rmr->lkey}}, 0xAAAA0001ull), 0);
        ASSERT_EQ(h.post_recv(1, {{r, 8192, rmr->lkey}}, 0xAAAA0002ull), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND_WITH_IMM, {{src, 1500, smr->lkey}}, 0x5555000000000001ull,
                              IBV_SEND_SIGNALED, 0, 0, 0xDEADBEEF),
                  0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 77, smr->lkey}}, 0x5555000000000002ull), 0);
        auto swc = h.expect_wc(h.s[0].scq, 2, "send");
        auto rwc = h.expect_wc(h.s[1].rcq, 2, "receive");
        ASSERT_EQ(swc.size(), 2u);
        ASSERT_EQ(rwc.size(), 2u);
        for (unsigned k = 0; k < 2; ++k) {
            EXPECT_EQ(swc[k].wr_id, 0x5555000000000001ull + k);
            EXPECT_EQ(swc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(swc[k].opcode, IBV_WC_SEND);
            EXPECT_EQ(swc[k].qp_num, h.s[0].qp->qp_num);
            EXPECT_EQ(rwc[k].wr_id, 0xAAAA0001ull + k);
            EXPECT_EQ(rwc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(rwc[k].opcode, IBV_WC_RECV);
            EXPECT_EQ(rwc[k].qp_num, h.s[1].qp->qp_num);
            EXPECT_EQ(rwc[k].src_qp, h.s[0].qp->qp_num);
            EXPECT_EQ(rwc[k].slid, h.s[0].lid);
        }
        EXPECT_EQ(rwc[0].byte_len, 1500u);
        EXPECT_TRUE(rwc[0].wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(rwc[0].imm_data, 0xDEADBEEFu);
        EXPECT_EQ(rwc[1].byte_len, 77u);
        EXPECT_FALSE(rwc[1].wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(h.s[0].lid, 1u);
        EXPECT_EQ(h.s[1].lid, 2u);
    });
}

SIM_TEST(E2eRc, C10_86_write_with_imm_consumes_one_receive_and_reports_fields) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint32_t len = 3000;
        const auto data = pattern(len, 61);
        const uint64_t src = h.alloc(0, len, 64);
        h.write_mem(0, src, data);
        ibv_mr* smr = h.reg(0, src, len);
        const uint64_t tgt = h.alloc(1, 8192, 64);
        ibv_mr* tmr = h.reg(1, tgt, 8192);
        const uint64_t rbuf = h.alloc(1, 4096, 64);
        h.fill_mem(1, rbuf, 4096, kGuardByte);
        ibv_mr* rmr = h.reg(1, rbuf, 4096);
        ASSERT_EQ(h.post_recv(1, {{rbuf, 4096, rmr->lkey}}, 101), 0);
        ASSERT_EQ(h.post_recv(1, {{rbuf, 4096, rmr->lkey}}, 102), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE_WITH_IMM, {{src, len, smr->lkey}}, 201, IBV_SEND_SIGNALED,
                              tgt + 10, tmr->rkey, 0x12345678),
                  0);
        auto swc = h.expect_wc(h.s[0].scq, 1, "write with imm");
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive for write with imm");
        ASSERT_EQ(swc.size(), 1u);
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(swc[0].wr_id, 201u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[0].opcode, IBV_WC_RDMA_WRITE);
        EXPECT_EQ(swc[0].qp_num, h.s[0].qp->qp_num);
        EXPECT_EQ(rwc[0].wr_id, 101u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
        EXPECT_EQ(rwc[0].byte_len, len);
        EXPECT_TRUE(rwc[0].wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(rwc[0].imm_data, 0x12345678u);
        EXPECT_EQ(rwc[0].qp_num, h.s[1].qp->qp_num);
        EXPECT_EQ(rwc[0].src_qp, h.s[0].qp->qp_num);
        EXPECT_EQ(rwc[0].slid, h.s[0].lid);
        h.expect_mem(1, tgt + 10, data, "write-with-imm payload at the remote address");
        h.expect_fill(1, rbuf, 4096, kGuardByte, "receive buffer of the consumed WR is not written");
        // Exactly one receive WR consumed: the second one is still posted.
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "second receive");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 8, smr->lkey}}, 202), 0);
        auto rwc2 = h.expect_wc(h.s[1].rcq, 1, "receive for the send");
        ASSERT_EQ(rwc2.size(), 1u);
        EXPECT_EQ(rwc2[0].wr_id, 102u);
        EXPECT_EQ(rwc2[0].opcode, IBV_WC_RECV);
    });
}

// ------------------------------------------------------------------ receive WR consumption

SIM_TEST(E2eRc, C10_81_each_send_consumes_exactly_one_receive_in_posting_order) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 3 * 256, 64);
        h.write_mem(0, src, pattern(3 * 256, 81));
        ibv_mr* smr = h.reg(0, src, 3 * 256);
        const uint64_t r = h.alloc(1, 3 * 1024, 64);
        h.fill_mem(1, r, 3 * 1024, kGuardByte);
        ibv_mr* rmr = h.reg(1, r, 3 * 1024);
        for (unsigned k = 0; k < 3; ++k)
            ASSERT_EQ(h.post_recv(1, {{r + k * 1024, 1024, rmr->lkey}}, 1000 + k), 0);
        for (unsigned k = 0; k < 2; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src + k * 256, 100 + k, smr->lkey}}, k), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 2, "two receives");
        ASSERT_EQ(rwc.size(), 2u);
        EXPECT_EQ(rwc[0].wr_id, 1000u);
        EXPECT_EQ(rwc[1].wr_id, 1001u);
        EXPECT_EQ(rwc[0].byte_len, 100u);
        EXPECT_EQ(rwc[1].byte_len, 101u);
        h.expect_wc(h.s[0].scq, 2, "two sends");
        h.expect_no_wc(h.s[1].rcq, 200'000, "third receive must still be posted");
        h.expect_fill(1, r + 2048, 1024, kGuardByte, "third receive buffer untouched so far");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src + 512, 102, smr->lkey}}, 2), 0);
        auto rwc3 = h.expect_wc(h.s[1].rcq, 1, "third receive");
        ASSERT_EQ(rwc3.size(), 1u);
        EXPECT_EQ(rwc3[0].wr_id, 1002u);
        EXPECT_EQ(rwc3[0].byte_len, 102u);
        for (unsigned k = 0; k < 3; ++k)
            h.expect_mem(1, r + k * 1024, h.read_mem(0, src + k * 256, 100 + k),
                         "message " + std::to_string(k));
    });
}

SIM_TEST(E2eRc, C10_87_plain_rdma_write_consumes_no_receive) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        h.write_mem(0, src, pattern(4096, 87));
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t tgt = h.alloc(1, 4096, 64);
        ibv_mr* tmr = h.reg(1, tgt, 4096);
        const uint64_t rbuf = h.alloc(1, 1024, 64);
        ibv_mr* rmr = h.reg(1, rbuf, 1024);
        ASSERT_EQ(h.post_recv(1, {{rbuf, 1024, rmr->lkey}}, 0x87), 0);
        for (unsigned k = 0; k < 3; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 1000, smr->lkey}}, 10 + k, IBV_SEND_SIGNALED,
                                  tgt + k, tmr->rkey),
                      0);
        auto swc = h.expect_wc(h.s[0].scq, 3, "three writes");
        for (auto& w : swc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "plain writes complete no receive");
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 33, smr->lkey}}, 20), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive for the send");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].wr_id, 0x87u);
        EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV);
        EXPECT_EQ(rwc[0].byte_len, 33u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
    });
}

// ------------------------------------------------------------------ signaling

SIM_TEST(E2eRc, only_signaled_sends_produce_send_completions) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t r = h.alloc(1, 4096, 64);
        ibv_mr* rmr = h.reg(1, r, 4096);
        for (unsigned k = 0; k < 5; ++k) ASSERT_EQ(h.post_recv(1, {{r, 4096, rmr->lkey}}, 500 + k), 0);
        const unsigned flags[5] = {0, IBV_SEND_SIGNALED, 0, 0, IBV_SEND_SIGNALED};
        for (unsigned k = 0; k < 5; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 64, smr->lkey}}, 300 + k, flags[k]), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 5, "all five receives");
        auto swc = h.expect_wc(h.s[0].scq, 2, "signaled sends");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].wr_id, 301u);
        EXPECT_EQ(swc[1].wr_id, 304u);
        h.expect_no_wc(h.s[0].scq, kQuietNs, "unsignaled sends");
        // The unsignaled WRs' slots were retired by the later signaled CQE: the SQ can be refilled.
        EXPECT_EQ(h.s[0].qp->sq.completed, h.s[0].qp->sq.producer);
    });
}

SIM_TEST(E2eRc, sq_sig_all_signals_every_send) {
    rc_config cfg;
    cfg.sq_sig_all = 1;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t tgt = h.alloc(1, 4096, 64);
        ibv_mr* tmr = h.reg(1, tgt, 4096);
        for (unsigned k = 0; k < 4; ++k)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 100, smr->lkey}}, 400 + k, 0, tgt, tmr->rkey),
                      0);
        auto swc = h.expect_wc(h.s[0].scq, 4, "sq_sig_all");
        ASSERT_EQ(swc.size(), 4u);
        for (unsigned k = 0; k < 4; ++k) {
            EXPECT_EQ(swc[k].wr_id, 400u + k);
            EXPECT_EQ(swc[k].status, IBV_WC_SUCCESS);
            EXPECT_EQ(swc[k].opcode, IBV_WC_RDMA_WRITE);
        }
    });
}

// ------------------------------------------------------------------ packetisation

namespace {
void packets_per_message(unsigned mtu) {
    rc_config cfg;
    cfg.mtu = mtu;
    rc_harness h(cfg);
    h.run([mtu](rc_harness& h) {
        const std::vector<uint32_t> sizes = {1, mtu - 1, mtu, mtu + 1, 3 * mtu + 5, 65536, 100000};
        const uint64_t src = h.alloc(0, 100000, 4096);
        ibv_mr* smr = h.reg(0, src, 100000);
        const uint64_t tgt = h.alloc(1, 100000, 4096);
        ibv_mr* tmr = h.reg(1, tgt, 100000);
        const std::string key = "node0.hca.transport_engine.tx_packets";
        uint64_t id = 0;
        for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_SEND}) {
            for (uint32_t s : sizes) {
                if (op == IBV_WR_SEND) {
                    ASSERT_EQ(h.post_recv(1, {{tgt, 100000, tmr->lkey}}, id), 0);
                }
                const uint64_t before = rc_harness::counter_value(key);
                ASSERT_EQ(h.post_send(0, op, {{src, s, smr->lkey}}, id, IBV_SEND_SIGNALED, tgt, tmr->rkey),
                          0);
                auto wc = h.expect_wc(h.s[0].scq, 1, "message");
                ASSERT_EQ(wc.size(), 1u);
                EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
                if (op == IBV_WR_SEND) h.expect_wc(h.s[1].rcq, 1, "receive");
                EXPECT_EQ(rc_harness::counter_value(key) - before, (uint64_t(s) + mtu - 1) / mtu)
                    << op_name(op) << " of " << s << " bytes at MTU " << mtu;
                ++id;
            }
        }
    });
}
}  // namespace

SIM_TEST(E2eRc, wire_packets_are_ceil_size_over_mtu_256) { packets_per_message(256); }
SIM_TEST(E2eRc, wire_packets_are_ceil_size_over_mtu_1024) { packets_per_message(1024); }
SIM_TEST(E2eRc, wire_packets_are_ceil_size_over_mtu_4096) { packets_per_message(4096); }

// ------------------------------------------------------------------ errors

SIM_TEST(E2eRc, send_longer_than_receive_buffer_is_loc_len_err_and_rem_inv_req_err) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t r = h.alloc(1, 4096, 64);
        ibv_mr* rmr = h.reg(1, r, 4096);
        ASSERT_EQ(h.post_recv(1, {{r, 100, rmr->lkey}}, 0x11), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 200, smr->lkey}}, 0x22), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receiver");
        auto swc = h.expect_wc(h.s[0].scq, 1, "sender");
        ASSERT_EQ(rwc.size(), 1u);
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(rwc[0].wr_id, 0x11u);
        EXPECT_EQ(rwc[0].status, IBV_WC_LOC_LEN_ERR);
        EXPECT_EQ(rwc[0].qp_num, h.s[1].qp->qp_num);
        EXPECT_EQ(swc[0].wr_id, 0x22u);
        EXPECT_EQ(swc[0].status, IBV_WC_REM_INV_REQ_ERR);
        EXPECT_EQ(swc[0].qp_num, h.s[0].qp->qp_num);
    });
}

SIM_TEST(E2eRc, write_with_bad_rkey_is_rem_access_err_then_later_wrs_flush) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        h.write_mem(0, src, pattern(4096, 99));
        const uint64_t tgt = h.alloc(1, 4096, 64);
        h.fill_mem(1, tgt, 4096, kGuardByte);
        ibv_mr* tmr = h.reg(1, tgt, 4096);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 512, smr->lkey}}, 1, IBV_SEND_SIGNALED, tgt,
                              tmr->rkey ^ 0x5A),
                  0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "bad rkey write");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
        // The errored QP flushes what is posted afterwards (C10-?: Error state, 10.3.1).
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 16, smr->lkey}}, 2, IBV_SEND_SIGNALED, tgt, tmr->rkey),
            0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 16, smr->lkey}}, 3, IBV_SEND_SIGNALED), 0);
        auto fl = h.expect_wc(h.s[0].scq, 2, "flushed WRs");
        ASSERT_EQ(fl.size(), 2u);
        EXPECT_EQ(fl[0].wr_id, 2u);
        EXPECT_EQ(fl[0].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(fl[1].wr_id, 3u);
        EXPECT_EQ(fl[1].status, IBV_WC_WR_FLUSH_ERR);
        h.sleep(1, 10'000);
        h.expect_fill(1, tgt, 4096, kGuardByte, "target of the refused and flushed writes");
    });
}

SIM_TEST(E2eRc, write_queued_behind_bad_rkey_write_is_flushed) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t tgt = h.alloc(1, 4096, 64);
        ibv_mr* tmr = h.reg(1, tgt, 4096);
        // Posted together, before the NAK comes back.
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 64, smr->lkey}}, 1, IBV_SEND_SIGNALED, tgt,
                              tmr->rkey + 0x100),
                  0);
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 64, smr->lkey}}, 2, IBV_SEND_SIGNALED, tgt, tmr->rkey),
            0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "bad rkey then flush");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].wr_id, 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
        EXPECT_EQ(wc[1].wr_id, 2u);
        EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
    });
}

SIM_TEST(E2eRc, bad_local_lkey_is_loc_prot_err) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t r = h.alloc(1, 4096, 64);
        ibv_mr* rmr = h.reg(1, r, 4096);
        ASSERT_EQ(h.post_recv(1, {{r, 4096, rmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 128, smr->lkey ^ 0x33}}, 0x77), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 128, smr->lkey}}, 0x78), 0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "bad lkey");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].wr_id, 0x77u);
        EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR);
        EXPECT_EQ(wc[0].qp_num, h.s[0].qp->qp_num);
        EXPECT_EQ(wc[1].wr_id, 0x78u);
        EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);
    });
}

SIM_TEST(E2eRc, C10_97_2_1_modify_to_error_flushes_posted_receives) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t r = h.alloc(1, 4096, 64);
        ibv_mr* rmr = h.reg(1, r, 4096);
        for (unsigned k = 0; k < 3; ++k) ASSERT_EQ(h.post_recv(1, {{r, 1024, rmr->lkey}}, 900 + k), 0);
        h.expect_no_wc(h.s[1].rcq, 10'000, "receives pending");
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_ERR;
        ASSERT_EQ(ibv_modify_qp(h.s[1].qp, &attr, IBV_QP_STATE), 0);
        auto wc = h.expect_wc(h.s[1].rcq, 3, "flushed receives");
        ASSERT_EQ(wc.size(), 3u);
        for (unsigned k = 0; k < 3; ++k) {
            EXPECT_EQ(wc[k].wr_id, 900u + k);
            EXPECT_EQ(wc[k].status, IBV_WC_WR_FLUSH_ERR);
            EXPECT_EQ(wc[k].qp_num, h.s[1].qp->qp_num);
        }
        h.expect_no_wc(h.s[1].rcq, 10'000, "nothing else");
        // Receives posted in Error are flushed too.
        ASSERT_EQ(h.post_recv(1, {{r, 1024, rmr->lkey}}, 950), 0);
        auto wc2 = h.expect_wc(h.s[1].rcq, 1, "receive posted in Error");
        ASSERT_EQ(wc2.size(), 1u);
        EXPECT_EQ(wc2[0].wr_id, 950u);
        EXPECT_EQ(wc2[0].status, IBV_WC_WR_FLUSH_ERR);
    });
}

// ------------------------------------------------------------------ determinism

namespace {
void mixed_scenario(std::string& out) {
    rc_harness h;
    h.run([&out](rc_harness& h) {
        const uint64_t src = h.alloc(0, 300000, 4096);
        h.write_mem(0, src, pattern(300000, 5));
        ibv_mr* smr = h.reg(0, src, 300000);
        const uint64_t tgt = h.alloc(1, 300000, 4096);
        ibv_mr* tmr = h.reg(1, tgt, 300000);
        for (unsigned k = 0; k < 8; ++k) ASSERT_EQ(h.post_recv(1, {{tgt, 300000, tmr->lkey}}, k), 0);
        const uint32_t sizes[] = {1, 4097, 65536, 300000, 17, 8192, 255, 100000};
        for (unsigned k = 0; k < 8; ++k) {
            const ibv_wr_opcode op = k % 2 ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
            ASSERT_EQ(h.post_send(0, op, {{src, sizes[k], smr->lkey}}, 100 + k,
                                  k % 3 == 2 ? 0u : unsigned(IBV_SEND_SIGNALED), tgt, tmr->rkey),
                      0);
        }
        std::ostringstream os;
        for (auto* cq : {h.s[0].scq, h.s[1].rcq}) {
            const size_t n = cq == h.s[0].scq ? 6 : 4;  // k=2,5 unsignaled; 4 sends
            auto wc = h.expect_wc(cq, n, "scenario");
            for (auto& w : wc)
                os << w.wr_id << ' ' << w.status << ' ' << w.opcode << ' ' << w.byte_len << ' ' << h.now_ns()
                   << '\n';
        }
        os << "end " << sc_core::sc_time_stamp().value() << '\n';
        os << rc_harness::all_counters();
        out = os.str();
    });
}
}  // namespace

TEST(E2eRc, two_runs_give_identical_completion_times_and_counters) {
    const std::string a = run_forked_capture(mixed_scenario);
    const std::string b = run_forked_capture(mixed_scenario);
    EXPECT_GT(a.size(), 100u);
    EXPECT_EQ(a, b);
}

// ------------------------------------------------------------------ edge cases

SIM_TEST(E2eRc, zero_length_send_and_write_are_one_packet_and_complete) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t r = h.alloc(1, 4096, 64);
        h.fill_mem(1, r, 4096, kGuardByte);
        ibv_mr* rmr = h.reg(1, r, 4096);
        const std::string key = "node0.hca.transport_engine.tx_packets";
        ASSERT_EQ(h.post_recv(1, {{r, 4096, rmr->lkey}}, 1), 0);
        uint64_t before = rc_harness::counter_value(key);
        // IBA 9.7.5: a zero-length message is one packet with no payload.
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "zero-length receive");
        auto swc = h.expect_wc(h.s[0].scq, 1, "zero-length send");
        ASSERT_EQ(rwc.size(), 1u);
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 0u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rc_harness::counter_value(key) - before, 1u);
        before = rc_harness::counter_value(key);
        ASSERT_EQ(h.post_recv(1, {{r, 4096, rmr->lkey}}, 3), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE_WITH_IMM, {{src, 0, smr->lkey}}, 4, IBV_SEND_SIGNALED, r,
                              rmr->rkey, 0xCAFE),
                  0);
        rwc = h.expect_wc(h.s[1].rcq, 1, "zero-length write with imm");
        swc = h.expect_wc(h.s[0].scq, 1, "zero-length write with imm (sender)");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
        EXPECT_EQ(rwc[0].byte_len, 0u);
        EXPECT_EQ(rwc[0].imm_data, 0xCAFEu);
        EXPECT_EQ(rc_harness::counter_value(key) - before, 1u);
        h.expect_fill(1, r, 4096, kGuardByte, "nothing written by zero-length messages");
    });
}

SIM_TEST(E2eRc, send_before_receive_is_retried_after_rnr_nak_and_delivered) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        const auto data = pattern(1000, 123);
        h.write_mem(0, src, data);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t r = h.alloc(1, 4096, 64);
        ibv_mr* rmr = h.reg(1, r, 4096);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 1000, smr->lkey}}, 5), 0);
        h.sleep(1, 20'000);  // no receive posted for 20 us: the responder answers RNR NAK
        EXPECT_GE(rc_harness::counter_value("node1.hca.transport_engine.rnr_naks_sent"), 1u);
        ASSERT_EQ(h.post_recv(1, {{r, 4096, rmr->lkey}}, 6), 0);
        // rnr_retry = 7 retries for ever (IBA 9.7.5.2.8); the requester waits the RNR NAK's timer
        // (the responder's min_rnr_timer, 12 = 0.64 ms) and retries: both sides complete well
        // inside 20 ms.
        auto swc = h.expect_wc(h.s[0].scq, 1, "send after RNR", 20'000'000ull);
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS) << "rnr_retry=7 must not give up";
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "receive after RNR", 20'000'000ull);
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 1000u);
        h.expect_mem(1, r, data, "payload after RNR retry");
    });
}

SIM_TEST(E2eRc, inline_send_copies_data_at_post_time) {
    rc_config cfg;
    cfg.max_inline = 220;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        const auto data = pattern(200, 7);
        h.write_mem(0, src, data);
        const uint64_t r = h.alloc(1, 4096, 64);
        ibv_mr* rmr = h.reg(1, r, 4096);
        ASSERT_EQ(h.post_recv(1, {{r, 4096, rmr->lkey}}, 1), 0);
        // Inline data needs no L_Key (an unregistered buffer, lkey 0) and may be reused at once.
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 150, 0}, {src + 150, 50, 0}}, 2,
                              IBV_SEND_SIGNALED | IBV_SEND_INLINE),
                  0);
        h.fill_mem(0, src, 200, 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "inline receive");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(rwc[0].byte_len, 200u);
        h.expect_wc(h.s[0].scq, 1, "inline send");
        h.expect_mem(1, r, data, "inline payload as it was at post time");
    });
}

SIM_TEST(E2eRc, queues_and_cqs_wrap_many_times) {
    rc_config cfg;
    cfg.max_send_wr = 8;
    cfg.max_recv_wr = 8;
    cfg.cqe = 7;  // ring of 8
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 64 * 100, 64);
        h.write_mem(0, src, pattern(64 * 100, 3));
        ibv_mr* smr = h.reg(0, src, 64 * 100);
        const uint64_t r = h.alloc(1, 64 * 100, 64);
        ibv_mr* rmr = h.reg(1, r, 64 * 100);
        const uint32_t sq_cap = h.s[0].qp->sq.max_wr, rq_cap = h.s[1].qp->rq.max_wr;
        EXPECT_GE(sq_cap, 8u);
        EXPECT_GE(rq_cap, 8u);
        // 100 messages in batches of 5 (below every ring size): SQ, RQ and both CQs wrap.
        for (unsigned batch = 0; batch < 20; ++batch) {
            for (unsigned k = 0; k < 5; ++k) {
                const unsigned m = batch * 5 + k;
                ASSERT_EQ(h.post_recv(1, {{r + 64 * m, 64, rmr->lkey}}, 10000 + m), 0);
            }
            for (unsigned k = 0; k < 5; ++k) {
                const unsigned m = batch * 5 + k;
                ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src + 64 * m, 10 + m % 50, smr->lkey}}, m), 0);
            }
            auto rwc = h.expect_wc(h.s[1].rcq, 5, "batch receives");
            auto swc = h.expect_wc(h.s[0].scq, 5, "batch sends");
            ASSERT_EQ(rwc.size(), 5u);
            ASSERT_EQ(swc.size(), 5u);
            for (unsigned k = 0; k < 5; ++k) {
                const unsigned m = batch * 5 + k;
                EXPECT_EQ(rwc[k].wr_id, 10000u + m);
                EXPECT_EQ(rwc[k].status, IBV_WC_SUCCESS);
                EXPECT_EQ(rwc[k].byte_len, 10 + m % 50);
                EXPECT_EQ(swc[k].wr_id, m);
                EXPECT_EQ(swc[k].status, IBV_WC_SUCCESS);
            }
        }
        for (unsigned m = 0; m < 100; ++m)
            h.expect_mem(1, r + 64 * m, h.read_mem(0, src + 64 * m, 10 + m % 50),
                         "message " + std::to_string(m));
    });
}

SIM_TEST(E2eRc, psn_wraps_past_2_pow_24_within_a_message) {
    rc_config cfg;
    cfg.mtu = 256;
    cfg.psn[0] = 0xFFFFF0;  // 256 packets of 64 KiB cross PSN 0xFFFFFF -> 0
    cfg.psn[1] = 0xFFFFFE;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint32_t len = 65536;
        const auto data = pattern(len, 0x5E9);
        const uint64_t src = h.alloc(0, len, 4096);
        h.write_mem(0, src, data);
        ibv_mr* smr = h.reg(0, src, len);
        const uint64_t r = h.alloc(1, 2 * len, 4096);
        ibv_mr* rmr = h.reg(1, r, 2 * len);
        ASSERT_EQ(h.post_recv(1, {{r + len, len, rmr->lkey}}, 1), 0);
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE, {{src, len, smr->lkey}}, 1, IBV_SEND_SIGNALED, r, rmr->rkey),
            0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, len, smr->lkey}}, 2), 0);
        auto swc = h.expect_wc(h.s[0].scq, 2, "writes across the PSN wrap");
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "send across the PSN wrap");
        ASSERT_EQ(swc.size(), 2u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(swc[1].status, IBV_WC_SUCCESS);
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        h.expect_mem(1, r, data, "write payload");
        h.expect_mem(1, r + len, data, "send payload");
        EXPECT_EQ(rc_harness::counter_value("node1.hca.transport_engine.seq_errors"), 0u);
        EXPECT_EQ(rc_harness::counter_value("node1.hca.transport_engine.duplicates"), 0u);
        // Reverse direction too (node1's PSN wraps after 2 packets).
        ASSERT_EQ(
            h.post_send(1, IBV_WR_RDMA_WRITE, {{r, 4096, rmr->lkey}}, 3, IBV_SEND_SIGNALED, src, smr->rkey),
            0);
        auto bwc = h.expect_wc(h.s[1].scq, 1, "node1 write");
        ASSERT_EQ(bwc.size(), 1u);
        EXPECT_EQ(bwc[0].status, IBV_WC_SUCCESS);
    });
}

SIM_TEST(E2eRc, post_send_beyond_sq_capacity_is_enomem_and_posts_nothing_more) {
    rc_config cfg;
    cfg.max_send_wr = 4;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 64);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t tgt = h.alloc(1, 4096, 64);
        ibv_mr* tmr = h.reg(1, tgt, 4096);
        const uint32_t cap = h.s[0].qp->sq.max_wr;
        std::vector<ibv_send_wr> wr(cap + 2);
        ibv_sge sge{src, 64, smr->lkey};
        for (unsigned k = 0; k < wr.size(); ++k) {
            wr[k].wr_id = k;
            wr[k].sg_list = &sge;
            wr[k].num_sge = 1;
            wr[k].opcode = IBV_WR_RDMA_WRITE;
            wr[k].send_flags = IBV_SEND_SIGNALED;
            wr[k].wr.rdma.remote_addr = tgt;
            wr[k].wr.rdma.rkey = tmr->rkey;
            wr[k].next = k + 1 < wr.size() ? &wr[k + 1] : nullptr;
        }
        ibv_send_wr* bad = nullptr;
        EXPECT_EQ(ibv_post_send(h.s[0].qp, wr.data(), &bad), ENOMEM);
        EXPECT_EQ(bad, &wr[cap]) << "C10-136: the first WR that did not fit";
        auto wc = h.expect_wc(h.s[0].scq, cap, "posted WRs");
        ASSERT_EQ(wc.size(), size_t(cap));
        for (unsigned k = 0; k < cap; ++k) EXPECT_EQ(wc[k].wr_id, k);
        h.expect_no_wc(h.s[0].scq, 50'000, "WRs that were not posted");
    });
}
