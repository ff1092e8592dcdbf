// Unreliable Datagram service end to end (two nodes back to back, bench_harness.h with qp_type
// UD): SENDs addressed by address handles, the DETH (Q_Key, source QP) and the Q_Key rules,
// the GRH and the receive buffer's 40-byte GRH area, completion fields, datagrams longer than the
// MTU, and the error behaviour of 10.10.3.4 (SQEr, receive errors, immediate errors). Test names
// carry the compliance IDs they assert.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"
#include "tlm_if/wire/ib_headers.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

rc_config ud() {
    rc_config c;
    c.qp_type = IBV_QPT_UD;
    return c;
}

/// Node i's port GID (index 0), wire order.
std::vector<uint8_t> gid_of(unsigned node) {
    std::vector<uint8_t> g(16);
    const uint64_t prefix = 0xfe80000000000000ull, guid = 0x0002c90300000000ull + node + 1;
    for (int k = 0; k < 8; ++k) {
        g[size_t(k)] = uint8_t(prefix >> (56 - 8 * k));
        g[size_t(8 + k)] = uint8_t(guid >> (56 - 8 * k));
    }
    return g;
}

/// Sets node i's QP's Q_Key (RTS -> RTS).
int set_qkey(rc_harness& h, unsigned i, uint32_t qkey) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.qkey = qkey;
    return ibv_modify_qp(h.s[i].qp, &a, IBV_QP_STATE | IBV_QP_QKEY);
}

}  // namespace

SIM_TEST(E2eUd, C10_5_ud_send_goes_to_the_ah_destination_with_the_datagrams_source_in_the_completion) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 5);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 1000, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst + 4096, 1000, b.dmr->lkey}}, 2), 0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 300, b.smr->lkey}}, 10), 0);
        const uint32_t imm = 0x600DF00D;
        ASSERT_EQ(h.post_ud(0, ah, {{b.src + 300, 0, b.smr->lkey}}, 11,
                            IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, ~0u, ~0u, &imm),
                  0);
        auto s = h.expect_wc(h.s[0].scq, 2, "sends");
        ASSERT_EQ(s.size(), 2u);
        for (const ibv_wc& w : s) {
            EXPECT_EQ(w.status, IBV_WC_SUCCESS);
            EXPECT_EQ(w.opcode, IBV_WC_SEND);
        }
        auto r = h.expect_wc(h.s[1].rcq, 2, "receives");
        ASSERT_EQ(r.size(), 2u);
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
        EXPECT_EQ(r[0].wr_id, 1u);
        EXPECT_EQ(r[0].byte_len, 40u + 300u) << "the 40-byte GRH area counts";
        EXPECT_EQ(r[0].src_qp, h.s[0].qp->qp_num) << "from the DETH";
        EXPECT_EQ(r[0].slid, h.s[0].lid) << "from the LRH";
        EXPECT_EQ(r[0].sl, 0);
        EXPECT_EQ(r[0].wc_flags & (IBV_WC_GRH | IBV_WC_WITH_IMM), 0u);
        EXPECT_EQ(r[1].wr_id, 2u);
        EXPECT_EQ(r[1].byte_len, 40u) << "a zero-length datagram";
        EXPECT_TRUE(r[1].wc_flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(r[1].imm_data, imm);
        h.expect_fill(1, b.dst, 40, kGuardByte, "no GRH: the GRH area is left alone");
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src, 300), "the payload from byte 40");
        h.expect_fill(1, b.dst + 340, 4096 - 340, kGuardByte, "nothing after");
        h.expect_fill(1, b.dst + 4096, 4096, kGuardByte, "the zero-length datagram places nothing");
        EXPECT_EQ(ctr(1, "transport_engine.acks_sent"), 0u) << "datagrams are not acknowledged";
    });
}

SIM_TEST(E2eUd, ud_grh_is_placed_in_the_first_40_bytes_with_the_grh_flag) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 40);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 2000, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_ud(0, h.ah_to_peer(0, true), {{b.src, 777, b.smr->lkey}}, 1), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "receive");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_TRUE(r.wc_flags & IBV_WC_GRH);
        EXPECT_EQ(r.byte_len, 40u + 777u);
        const auto g = h.read_mem(1, b.dst, 40);
        wire::grh d = wire::decode_grh(g.data());
        EXPECT_EQ(d.ip_ver, 6);
        EXPECT_EQ(d.tclass, 0x12);
        EXPECT_EQ(d.flow_label, 0x34567u);
        EXPECT_EQ(d.next_hdr, 0x1B);
        EXPECT_EQ(d.hop_limit, 64);
        // PayLen: BTH (12) + DETH (8) + payload + pad + ICRC (4).
        EXPECT_EQ(d.pay_len, 12u + 8u + 780u + 4u);
        EXPECT_EQ(std::vector<uint8_t>(d.sgid.begin(), d.sgid.end()), gid_of(0)) << "node0's port GID";
        EXPECT_EQ(std::vector<uint8_t>(d.dgid.begin(), d.dgid.end()), gid_of(1));
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src, 777), "the payload from byte 40");
    });
}

SIM_TEST(E2eUd, C10_14_ud_qkey_mismatch_is_dropped_silently_and_the_receive_wqe_stays) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 14);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 1000, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 100, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, ~0u, 0x22222222u), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "wrong Q_Key").status, IBV_WC_SUCCESS) << "the sender learns nothing";
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "a datagram with the wrong Q_Key");
        EXPECT_EQ(ctr(1, "transport_engine.qkey_violations"), 1u);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src + 100, 100, b.smr->lkey}}, 2), 0);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "the right Q_Key");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.wr_id, 1u) << "the dropped datagram used no receive WQE";
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src + 100, 100), "only the second datagram");
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS);
    });
}

SIM_TEST(E2eUd, C10_15_wr_qkey_with_the_high_bit_set_sends_the_qps_own_qkey) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 15);
        ibv_ah* ah = h.ah_to_peer(0);
        for (unsigned k = 0; k < 3; ++k)
            ASSERT_EQ(h.post_recv(1, {{b.dst + 1024 * k, 1000, b.dmr->lkey}}, k), 0);
        // Both QPs have Q_Key 0x11111111: a WR Q_Key of 0x80000000 means the QP's own.
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 10, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, ~0u, 0x80000000u), 0);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "high bit: the QP's Q_Key").status, IBV_WC_SUCCESS);
        // The QP's Q_Key changes: the high-bit rule now sends the new one (refused by node1), a
        // WR naming 0x11111111 still reaches it.
        ASSERT_EQ(set_qkey(h, 0, 0x7EEEEEEE), 0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 10, b.smr->lkey}}, 2, IBV_SEND_SIGNALED, ~0u, 0x80000001u), 0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src + 10, 10, b.smr->lkey}}, 3, IBV_SEND_SIGNALED, ~0u, 0x11111111u),
                  0);
        h.expect_wc(h.s[0].scq, 3, "sends");
        const ibv_wc r = one_wc(h, h.s[1].rcq, "explicit Q_Key");
        EXPECT_EQ(r.wr_id, 1u);
        h.expect_mem(1, b.dst + 1024 + 40, h.read_mem(0, b.src + 10, 10), "the explicit Q_Key's datagram");
        EXPECT_EQ(ctr(1, "transport_engine.qkey_violations"), 1u) << "the QP's new Q_Key 0x7EEEEEEE was sent";
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "nothing else");
    });
}

SIM_TEST(E2eUd, C10_93_1_1_ud_message_longer_than_the_mtu_sends_nothing_and_completes_without_error) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 3 * 4096, 93);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 2 * 4096, b.dmr->lkey}}, 1), 0);
        const uint64_t tx = ctr(0, "port.tx_packets");
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 4097, b.smr->lkey}}, 1), 0);
        const ibv_wc s = one_wc(h, h.s[0].scq, "one byte over the MTU");
        EXPECT_EQ(s.status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(0, "port.tx_packets"), tx) << "nothing left the port";
        EXPECT_EQ(ctr(0, "transport_engine.ud_oversize"), 1u);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "nothing arrives");
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 4096, b.smr->lkey}}, 2), 0);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "exactly the MTU").byte_len, 40u + 4096u);
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src, 4096), "the MTU-sized datagram");
    });
}

SIM_TEST(E2eUd, C10_38_C10_39_C10_40_C10_152_ud_send_error_moves_the_qp_to_sqe_and_receiving_goes_on) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 152);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 64, 0xBAD00u}}, 1), 0);  // an L_Key of nothing
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 64, b.smr->lkey}}, 2), 0);
        auto wc = h.expect_wc(h.s[0].scq, 2, "error then flush");
        ASSERT_EQ(wc.size(), 2u);
        EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR) << "C10-39";
        EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR) << "C10-40";
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_SQE) << "C10-152";
        // C10-38: node0 still receives.
        const uint64_t in = h.alloc(0, 256, 64);
        ibv_mr* imr = h.reg(0, in, 256);
        ASSERT_EQ(h.post_recv(0, {{in, 256, imr->lkey}}, 5), 0);
        const uint64_t out = h.alloc(1, 64, 64);
        h.write_mem(1, out, pattern(64, 38));
        ibv_mr* omr = h.reg(1, out, 64);
        ASSERT_EQ(h.post_ud(1, h.ah_to_peer(1), {{out, 64, omr->lkey}}, 6), 0);
        const ibv_wc r = one_wc(h, h.s[0].rcq, "received in SQEr");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        h.expect_mem(0, in + 40, pattern(64, 38), "the datagram received in SQEr");
        // SQEr -> RTS recovers the send queue.
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RTS), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 256, b.dmr->lkey}}, 7), 0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 64, b.smr->lkey}}, 3), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "after SQEr -> RTS").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "its datagram").wr_id, 7u);
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src, 64), "only the datagram sent after recovery");
    });
}

SIM_TEST(E2eUd, C10_153_ud_receive_buffer_too_small_completes_in_error_and_the_qp_goes_to_error) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 153);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 40 + 99, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_recv(1, {{b.dst + 1024, 1000, b.dmr->lkey}}, 2), 0);
        ASSERT_EQ(h.post_ud(0, h.ah_to_peer(0), {{b.src, 100, b.smr->lkey}}, 1), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        auto r = h.expect_wc(h.s[1].rcq, 2, "the error, then the flush");
        ASSERT_EQ(r.size(), 2u);
        EXPECT_EQ(r[0].status, IBV_WC_LOC_LEN_ERR);
        EXPECT_EQ(r[1].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_ERR);
    });
}

SIM_TEST(E2eUd, C10_151_ud_immediate_error_leaves_the_qp_unaffected) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 151);
        // RDMA on UD, and a send without an address handle, are refused when posted.
        EXPECT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{b.src, 64, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, b.dst,
                              b.dmr->rkey),
                  EINVAL);
        EXPECT_EQ(h.post_ud(0, nullptr, {{b.src, 64, b.smr->lkey}}, 2), EINVAL);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_RTS);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 200, b.dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_ud(0, h.ah_to_peer(0), {{b.src, 64, b.smr->lkey}}, 3), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "receive").status, IBV_WC_SUCCESS);
    });
}

SIM_TEST(E2eUd, ud_datagram_without_a_receive_wqe_is_dropped_silently) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 7);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 64, b.smr->lkey}}, 1), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "send").status, IBV_WC_SUCCESS);
        h.sleep(1, kQuietNs);
        EXPECT_EQ(ctr(1, "transport_engine.ud_dropped"), 1u);
        EXPECT_EQ(query_state(h.s[1].qp), IBV_QPS_RTS) << "no RNR and no error on UD";
        ASSERT_EQ(h.post_recv(1, {{b.dst, 200, b.dmr->lkey}}, 9), 0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src + 64, 64, b.smr->lkey}}, 2), 0);
        EXPECT_EQ(one_wc(h, h.s[1].rcq, "the next datagram").wr_id, 9u);
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src + 64, 64), "the next datagram's payload");
    });
}

SIM_TEST(E2eUd, C10_5_2_1_ah_destroyed_while_its_wr_is_outstanding_the_wr_still_completes) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 521);
        ASSERT_EQ(h.post_recv(1, {{b.dst, 1000, b.dmr->lkey}}, 1), 0);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_ud(0, ah, {{b.src, 500, b.smr->lkey}}, 1), 0);
        // The address vector went into the WQE when it was posted: the AH may go at once.
        EXPECT_EQ(ibv_destroy_ah(ah), 0);
        EXPECT_EQ(one_wc(h, h.s[0].scq, "the WR outlives its AH").status, IBV_WC_SUCCESS);
        const ibv_wc r = one_wc(h, h.s[1].rcq, "delivered to the AH's destination");
        EXPECT_EQ(r.status, IBV_WC_SUCCESS);
        EXPECT_EQ(r.byte_len, 540u);
        h.expect_mem(1, b.dst + 40, h.read_mem(0, b.src, 500), "the payload");
    });
}

SIM_TEST(E2eUd, C10_154_ud_completion_errors_follow_the_send_and_receive_queue_tables) {
    // One row per error of the UD send queue and receive queue tables that the model can meet:
    // the completion each side sees, the state each QP is left in, and that nothing arrives.
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 8192, 154);
        ibv_ah* ah = h.ah_to_peer(0);
        const uint64_t tiny = h.alloc(1, 64, 64);
        ibv_mr* ro = h.reg(1, b.dst + 4096, 4096, 0);  // no Local Write: a protection error for a receive
        ASSERT_NE(ro, nullptr);
        struct row {
            const char* what;
            std::function<void()> post;
            int send_status;          // -1: no send completion expected beyond success
            ibv_qp_state send_state;  // node0 afterwards
            int recv_status;          // -1: no receive completion
            ibv_qp_state recv_state;  // node1 afterwards
        };
        const std::vector<row> rows = {
            {"send: local protection error (L_Key of nothing)",
             [&] {
                 ASSERT_EQ(h.post_ud(0, ah, {{b.src, 64, 0xBAD00u}}, 1), 0);
             },
             IBV_WC_LOC_PROT_ERR, IBV_QPS_SQE, -1, IBV_QPS_RTS},
            {"send: local protection error (beyond the region)",
             [&] {
                 ASSERT_EQ(h.post_ud(0, ah, {{b.src + 8100, 200, b.smr->lkey}}, 1), 0);
             },
             IBV_WC_LOC_PROT_ERR, IBV_QPS_SQE, -1, IBV_QPS_RTS},
            {"receive: local length error (buffer too small)",
             [&] {
                 ASSERT_EQ(h.post_recv(1, {{tiny, 64, h.reg(1, tiny, 64)->lkey}}, 5), 0);
                 ASSERT_EQ(h.post_ud(0, ah, {{b.src, 100, b.smr->lkey}}, 1), 0);
             },
             IBV_WC_SUCCESS, IBV_QPS_RTS, IBV_WC_LOC_LEN_ERR, IBV_QPS_ERR},
            {"receive: local protection error (buffer without Local Write)",
             [&] {
                 ASSERT_EQ(h.post_recv(1, {{b.dst + 4096, 1000, ro->lkey}}, 6), 0);
                 ASSERT_EQ(h.post_ud(0, ah, {{b.src, 100, b.smr->lkey}}, 1), 0);
             },
             IBV_WC_SUCCESS, IBV_QPS_RTS, IBV_WC_LOC_PROT_ERR, IBV_QPS_ERR},
            {"receive: Q_Key mismatch (silently dropped)",
             [&] {
                 ASSERT_EQ(h.post_recv(1, {{b.dst, 1000, b.dmr->lkey}}, 7), 0);
                 ASSERT_EQ(h.post_ud(0, ah, {{b.src, 100, b.smr->lkey}}, 1, IBV_SEND_SIGNALED, ~0u, 0x1234),
                           0);
             },
             IBV_WC_SUCCESS, IBV_QPS_RTS, -1, IBV_QPS_RTS},
            {"receive: no receive WQE (silently dropped)",
             [&] {
                 ASSERT_EQ(h.post_ud(0, ah, {{b.src, 100, b.smr->lkey}}, 1), 0);
             },
             IBV_WC_SUCCESS, IBV_QPS_RTS, -1, IBV_QPS_RTS},
        };
        for (const row& r : rows) {
            h.fill_mem(1, b.dst, 4096, kGuardByte);
            r.post();
            auto s = h.expect_wc(h.s[0].scq, 1, r.what);
            ASSERT_EQ(s.size(), 1u) << r.what;
            EXPECT_EQ(int(s[0].status), r.send_status) << r.what;
            if (r.recv_status >= 0) {
                auto rw = h.expect_wc(h.s[1].rcq, 1, r.what);
                ASSERT_EQ(rw.size(), 1u) << r.what;
                EXPECT_EQ(int(rw[0].status), r.recv_status) << r.what;
            } else {
                h.expect_no_wc(h.s[1].rcq, kQuietNs, r.what);
            }
            EXPECT_EQ(query_state(h.s[0].qp), r.send_state) << r.what;
            EXPECT_EQ(query_state(h.s[1].qp), r.recv_state) << r.what;
            h.expect_fill(1, b.dst, 4096, kGuardByte, r.what);
            // Both QPs back to RTS with empty queues for the next row.
            for (unsigned i = 0; i < 2; ++i) {
                ASSERT_EQ(to_state(h.s[i].qp, IBV_QPS_RESET), 0);
                ibv_wc wc[16];
                while (ibv_poll_cq(h.s[i].scq, 16, wc) > 0) {}
                while (ibv_poll_cq(h.s[i].rcq, 16, wc) > 0) {}
                ASSERT_EQ(h.connect(i, IBV_QPS_RTS), 0);
            }
        }
    });
}

SIM_TEST(E2eUd, C10_155_ud_affiliated_async_error_halts_the_qp_and_errors_outstanding_work) {
    rc_harness h(ud());
    h.run([](rc_harness& h) {
        bufs b = make_bufs(h, 4096, 155);
        const uint64_t in = h.alloc(0, 256, 64);
        ibv_mr* imr = h.reg(0, in, 256);
        ASSERT_EQ(h.post_recv(0, {{in, 256, imr->lkey}}, 7), 0);
        ASSERT_EQ(h.post_recv(0, {{in, 256, imr->lkey}}, 8), 0);
        ibv_ah* ah = h.ah_to_peer(0);
        break_send_ring(h, 0);
        ibv_sge sge{b.src, 64, b.smr->lkey};
        std::vector<ibv_send_wr> wrs(2);
        for (unsigned k = 0; k < 2; ++k) {
            wrs[k].wr_id = 1 + k;
            wrs[k].sg_list = &sge;
            wrs[k].num_sge = 1;
            wrs[k].opcode = IBV_WR_SEND;
            wrs[k].send_flags = IBV_SEND_SIGNALED;
            wrs[k].wr.ud.ah = ah;
            wrs[k].wr.ud.remote_qpn = h.s[1].qp->qp_num;
            wrs[k].wr.ud.remote_qkey = h.config().qkey;
        }
        ASSERT_EQ(post_list(h.s[0].qp, wrs), 0);
        ibv_qp* qp = nullptr;
        EXPECT_EQ(next_event_type(h, 0, &qp), int(IBV_EVENT_QP_FATAL));
        EXPECT_EQ(qp, h.s[0].qp);
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        auto r = h.expect_wc(h.s[0].rcq, 2, "the outstanding receives");
        ASSERT_EQ(r.size(), 2u);
        EXPECT_EQ(r[0].status, IBV_WC_WR_FLUSH_ERR);
        EXPECT_EQ(r[1].status, IBV_WC_WR_FLUSH_ERR);
        h.expect_no_wc(h.s[0].scq, 20'000, "the unreadable WQEs cannot be completed");
        h.expect_no_wc(h.s[1].rcq, 20'000, "nothing was sent");
        EXPECT_EQ(ctr(0, "transport_engine.wq_catastrophic"), 1u);
    });
}
