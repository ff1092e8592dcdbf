// LID mask count (C10-3) end to end, UD (bench_harness.h with qp_type UD): with fabric.lmc = L a
// port owns the 2^L LIDs from its LMC-aligned base LID; the SLID of what it sends is the base
// LID's high bits with the AH's source path bits as the low L bits, and a packet to any of its
// LIDs is accepted, the low bits reaching the completion as dlid_path_bits. Back to back and
// through the switch (which routes every LID of a node to its port). Test names carry the
// compliance IDs they assert.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

rc_config ud_lmc(unsigned nodes, unsigned lmc) {
    rc_config c;
    c.qp_type = IBV_QPT_UD;
    c.nodes = nodes;
    c.keys = {{"fabric.lmc", std::to_string(lmc)}};
    return c;
}

/// An AH on node i towards LID `dlid`, sending with source path bits `path_bits`.
ibv_ah* ah_with_path(rc_harness& h, unsigned i, uint16_t dlid, uint8_t path_bits) {
    ibv_ah_attr a{};
    a.dlid = dlid;
    a.src_path_bits = path_bits;
    a.port_num = 1;
    ibv_ah* ah = ibv_create_ah(h.s[i].pd, &a);
    EXPECT_NE(ah, nullptr) << "errno " << errno;
    return ah;
}

/// Sends one datagram from node0 to every LID of node `to` (base + 0 .. base + 3) with source
/// path bits 3, 2, 1, 0 and checks each receive completion: SLID = node0's base | path bits,
/// dlid_path_bits = the DLID's low bits, the payload at byte 40. Node `quiet` (if any) gets nothing.
void every_lid_reaches_the_node(rc_harness& h, unsigned to, int quiet) {
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(h.s[0].ctx, 1, &pa), 0);
    EXPECT_EQ(pa.lmc, 2) << "QUERY_PORT reports the LMC";
    EXPECT_EQ(pa.lid, 4) << "node0: base LID 1 * 2^2";
    ASSERT_EQ(ibv_query_port(h.s[to].ctx, 1, &pa), 0);
    EXPECT_EQ(pa.lmc, 2);
    EXPECT_EQ(pa.lid, (to + 1) * 4) << "LMC-aligned base LID";
    const uint16_t base0 = h.s[0].lid, base = h.s[to].lid;
    const uint64_t src = h.alloc(0, 4096, 4096);
    h.write_mem(0, src, pattern(4096, 3));
    ibv_mr* smr = h.reg(0, src, 4096);
    const uint64_t dst = h.alloc(to, 4 * 4096, 4096);
    h.fill_mem(to, dst, 4 * 4096, kGuardByte);
    ibv_mr* dmr = h.reg(to, dst, 4 * 4096);
    for (unsigned k = 0; k < 4; ++k)
        ASSERT_EQ(h.post_recv(to, {{dst + k * 4096, 4096, dmr->lkey}}, 100 + k), 0);
    for (unsigned k = 0; k < 4; ++k) {
        ibv_ah* ah = ah_with_path(h, 0, uint16_t(base + k), uint8_t(3 - k));
        ASSERT_NE(ah, nullptr);
        ASSERT_EQ(
            h.post_ud(0, ah, {{src + 100 * k, 100 + k, smr->lkey}}, k, IBV_SEND_SIGNALED, h.s[to].qp->qp_num),
            0);
    }
    auto s = h.expect_wc(h.s[0].scq, 4, "sends");
    for (const ibv_wc& w : s) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    auto r = h.expect_wc(h.s[to].rcq, 4, "a datagram to each of the node's LIDs");
    ASSERT_EQ(r.size(), 4u);
    for (unsigned k = 0; k < 4; ++k) {
        SCOPED_TRACE("DLID base + " + std::to_string(k));
        EXPECT_EQ(r[k].status, IBV_WC_SUCCESS);
        EXPECT_EQ(r[k].wr_id, 100u + k);
        EXPECT_EQ(r[k].byte_len, 40u + 100u + k);
        EXPECT_EQ(r[k].src_qp, h.s[0].qp->qp_num);
        EXPECT_EQ(r[k].slid, uint16_t(base0 | (3 - k))) << "SLID = base LID | the AH's source path bits";
        EXPECT_EQ(r[k].dlid_path_bits, k) << "the DLID's low LMC bits";
        h.expect_mem(to, dst + k * 4096 + 40, h.read_mem(0, src + 100 * k, 100 + k),
                     "the payload from byte 40");
    }
    if (quiet >= 0) h.expect_no_wc(h.s[unsigned(quiet)].rcq, kQuietNs, "another node");
}

}  // namespace

SIM_TEST(E2eLmc, C10_3_back_to_back_slid_has_the_source_path_bits_and_every_lid_of_the_range_is_accepted) {
    rc_harness h(ud_lmc(2, 2));
    h.run([](rc_harness& h) { every_lid_reaches_the_node(h, 1, -1); });
}

SIM_TEST(E2eLmc, C10_3_switch_routes_every_lid_of_a_node_to_its_port) {
    rc_harness h(ud_lmc(4, 2));
    h.run([](rc_harness& h) {
        every_lid_reaches_the_node(h, 3, 2);
        EXPECT_EQ(h.counter_value("fabric.switch.dropped_no_route"), 0u);
    });
}

SIM_TEST(E2eLmc, C10_3_source_path_bits_beyond_the_lmc_are_masked_off) {
    rc_harness h(ud_lmc(2, 1));
    h.run([](rc_harness& h) {
        const uint64_t src = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t dst = h.alloc(1, 4096, 4096);
        ibv_mr* dmr = h.reg(1, dst, 4096);
        EXPECT_EQ(h.s[0].lid, 2) << "LMC 1: node0's base LID is 2";
        EXPECT_EQ(h.s[1].lid, 4);
        ASSERT_EQ(h.post_recv(1, {{dst, 4096, dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_ud(0, ah_with_path(h, 0, 5, 0x7F), {{src, 8, smr->lkey}}, 1), 0);
        auto r = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].slid, 3) << "only LMC = 1 path bit replaces the base LID's low bit";
        EXPECT_EQ(r[0].dlid_path_bits, 1);
    });
}

SIM_TEST(E2eLmc, C10_3_lmc_0_keeps_the_lids_and_sends_no_path_bits) {
    rc_harness h(ud_lmc(4, 0));
    h.run([](rc_harness& h) {
        for (unsigned i = 0; i < 4; ++i) {
            ibv_port_attr pa{};
            ASSERT_EQ(ibv_query_port(h.s[i].ctx, 1, &pa), 0);
            EXPECT_EQ(pa.lid, i + 1);
            EXPECT_EQ(pa.lmc, 0);
        }
        const uint64_t src = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t dst = h.alloc(1, 4096, 4096);
        ibv_mr* dmr = h.reg(1, dst, 4096);
        ASSERT_EQ(h.post_recv(1, {{dst, 4096, dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_ud(0, ah_with_path(h, 0, 2, 3), {{src, 8, smr->lkey}}, 1), 0);
        auto r = h.expect_wc(h.s[1].rcq, 1, "receive");
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].slid, 1) << "no path bits with LMC 0";
        EXPECT_EQ(r[0].dlid_path_bits, 0);
    });
}
