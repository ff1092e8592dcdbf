// Sixteen nodes on one switch with UD QPs: all-to-all datagrams and multicast to 15 receivers,
// first in the default partition, then with two partitions (nodes 0-7: P_Key 0x8001, nodes
// 8-15: 0x8002) written into every port's P_Key table by the management path: no datagram
// crosses between the partitions, and every port's P_Key violation counter equals the number of
// tries from the other partition that reached it (C10-120, C10-127, o10-57).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/hca/pkey_checker.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

constexpr unsigned kNodes = 16;
constexpr uint32_t kLen = 200;   // payload of every datagram
constexpr uint32_t kSlot = 256;  // receive buffer per datagram: GRH area + payload, rounded
constexpr uint16_t kMlid = 0xC010;

rc_config sixteen() {
    rc_config c;
    c.qp_type = IBV_QPT_UD;
    c.nodes = kNodes;
    c.max_recv_wr = 64;
    c.max_send_wr = 64;
    c.cqe = 256;
    return c;
}

unsigned partition_of(unsigned node) { return node < kNodes / 2 ? 0 : 1; }
uint16_t partition_key(unsigned node) { return partition_of(node) ? 0x8002 : 0x8001; }

/// The payload node `from` sends to node `to` (message `m` of a phase).
std::vector<uint8_t> payload(unsigned from, unsigned to, unsigned m) {
    return pattern(kLen, 1000 + 100 * from + 10 * to + m);
}

ibv_gid group_gid() {
    ibv_gid g{};
    g.raw[0] = 0xFF;
    g.raw[1] = 0x12;
    g.raw[15] = 0x16;
    return g;
}

struct node_bufs {
    uint64_t src = 0, dst = 0;
    ibv_mr* smr = nullptr;
    ibv_mr* dmr = nullptr;
};

uint16_t pkey_violations(rc_harness& h, unsigned node) {
    ibv_port_attr pa{};
    EXPECT_EQ(ibv_query_port(h.s[node].ctx, 1, &pa), 0);
    return uint16_t(pa.bad_pkey_cntr);
}

/// Every node posts `n` receives of kSlot bytes at dst + k * kSlot (wr_id = k).
void post_receives(rc_harness& h, std::vector<node_bufs>& b, unsigned n) {
    for (unsigned i = 0; i < kNodes; ++i)
        for (unsigned k = 0; k < n; ++k)
            ASSERT_EQ(h.post_recv(i, {{b[i].dst + uint64_t(k) * kSlot, kSlot, b[i].dmr->lkey}}, k), 0);
}

/// Node i sends to every other node (message index m); waits for every send completion.
void all_to_all(rc_harness& h, std::vector<node_bufs>& b, std::vector<std::vector<ibv_ah*>>& ah, unsigned m) {
    for (unsigned i = 0; i < kNodes; ++i) {
        unsigned sent = 0;
        for (unsigned j = 0; j < kNodes; ++j) {
            if (j == i) continue;
            const uint64_t src = b[i].src + uint64_t(j) * kLen;
            h.write_mem(i, src, payload(i, j, m));
            ASSERT_EQ(h.post_ud(i, ah[i][j], {{src, kLen, b[i].smr->lkey}}, j, IBV_SEND_SIGNALED,
                                h.s[j].qp->qp_num),
                      0);
            ++sent;
        }
        auto wc = h.expect_wc(h.s[i].scq, sent, "node" + std::to_string(i) + " sends");
        for (const ibv_wc& w : wc) EXPECT_EQ(w.status, IBV_WC_SUCCESS);
    }
}

/// Checks that node j received exactly the datagrams of `senders` (any order), message m.
void expect_received(rc_harness& h, std::vector<node_bufs>& b, unsigned j,
                     const std::vector<unsigned>& senders, unsigned m) {
    auto wc = h.wait_wc(h.s[j].rcq, senders.size() + 1, kQuietNs);
    ASSERT_EQ(wc.size(), senders.size()) << "node" << j << " receives";
    std::vector<bool> seen(kNodes, false);
    for (const ibv_wc& w : wc) {
        ASSERT_EQ(w.status, IBV_WC_SUCCESS);
        EXPECT_EQ(w.byte_len, 40 + kLen);
        unsigned from = kNodes;
        for (unsigned i = 0; i < kNodes; ++i)
            if (h.s[i].qp->qp_num == w.src_qp && h.s[i].lid == w.slid) from = i;
        ASSERT_LT(from, kNodes) << "a datagram from no known node";
        EXPECT_FALSE(seen[from]) << "twice from node" << from;
        seen[from] = true;
        h.expect_mem(j, b[j].dst + w.wr_id * kSlot + 40, payload(from, j, m),
                     "node" + std::to_string(j) + " from node" + std::to_string(from));
    }
    for (unsigned s : senders) EXPECT_TRUE(seen[s]) << "node" << j << " missed node" << s;
}

/// The scenario: all-to-all and multicast in the default partition, then in two partitions.
void two_partitions(rc_harness& h) {
    h.run([](rc_harness& h) {
        std::vector<node_bufs> b(kNodes);
        std::vector<std::vector<ibv_ah*>> ah(kNodes, std::vector<ibv_ah*>(kNodes, nullptr));
        for (unsigned i = 0; i < kNodes; ++i) {
            b[i].src = h.alloc(i, kNodes * kLen, 4096);
            b[i].smr = h.reg(i, b[i].src, kNodes * kLen);
            b[i].dst = h.alloc(i, 32 * kSlot, 4096);
            b[i].dmr = h.reg(i, b[i].dst, 32 * kSlot);
            for (unsigned j = 0; j < kNodes; ++j)
                if (j != i) ah[i][j] = h.ah_to(i, j);
        }
        const ibv_gid g = group_gid();
        for (unsigned i = 1; i < kNodes; ++i) ASSERT_EQ(ibv_attach_mcast(h.s[i].qp, &g, kMlid), 0);
        ibv_ah_attr ma{};
        ma.dlid = kMlid;
        ma.port_num = 1;
        ma.is_global = 1;
        ma.grh.dgid = g;
        std::vector<ibv_ah*> mah(kNodes);
        for (unsigned i = 0; i < kNodes; ++i) mah[i] = ibv_create_ah(h.s[i].pd, &ma);

        // 1. The default partition: every node reaches every other one; multicast reaches 15.
        post_receives(h, b, 16);
        all_to_all(h, b, ah, 0);
        for (unsigned j = 0; j < kNodes; ++j) {
            std::vector<unsigned> all;
            for (unsigned i = 0; i < kNodes; ++i)
                if (i != j) all.push_back(i);
            expect_received(h, b, j, all, 0);
        }
        h.write_mem(0, b[0].src, payload(0, 0, 9));
        ASSERT_EQ(h.post_ud(0, mah[0], {{b[0].src, kLen, b[0].smr->lkey}}, 99, IBV_SEND_SIGNALED, 0xFFFFFF),
                  0);
        EXPECT_EQ(h.expect_wc(h.s[0].scq, 1, "multicast").size(), 1u);
        for (unsigned j = 1; j < kNodes; ++j) {
            auto w = h.expect_wc(h.s[j].rcq, 1, "multicast at node" + std::to_string(j));
            ASSERT_EQ(w.size(), 1u);
            EXPECT_EQ(w[0].src_qp, h.s[0].qp->qp_num);
            h.expect_mem(j, b[j].dst + w[0].wr_id * kSlot + 40, payload(0, 0, 9), "multicast payload");
        }
        EXPECT_EQ(h.counter_value("fabric.switch.mcast_replicas"), kNodes - 1);
        for (unsigned j = 0; j < kNodes; ++j) EXPECT_EQ(pkey_violations(h, j), 0u);

        // 2. Two partitions: the management path writes entry 1 of every port's table, and every
        // QP is moved to it (Reset -> Init with pkey_index 1 -> RTS). The multicast
        // attachments stay.
        for (unsigned i = 0; i < kNodes; ++i) {
            const uint16_t key = partition_key(i);
            ASSERT_EQ(h.s[i].sw->driver.exec(hw::CMD_SET_PKEY, 1, 1, &key, sizeof key), hw::CMD_OK);
            ASSERT_EQ(to_state(h.s[i].qp, IBV_QPS_RESET), 0);
            ASSERT_EQ(h.connect(i, IBV_QPS_RTS, 1), 0);
            uint16_t got = 0;
            ASSERT_EQ(ibv_query_pkey(h.s[i].ctx, 1, 1, &got), 0);
            EXPECT_EQ(got, key);
        }
        post_receives(h, b, 16);
        all_to_all(h, b, ah, 1);
        for (unsigned j = 0; j < kNodes; ++j) {
            std::vector<unsigned> same;
            for (unsigned i = 0; i < kNodes; ++i)
                if (i != j && partition_of(i) == partition_of(j)) same.push_back(i);
            expect_received(h, b, j, same, 1);
            EXPECT_EQ(pkey_violations(h, j), kNodes / 2)
                << "node" << j << ": one per try from the other partition";
        }
        // Multicast from node0 (partition 0) and node8 (partition 1): each reaches the members
        // of its own partition; the other partition's ports count a violation each.
        for (unsigned from : {0u, 8u}) {
            h.write_mem(from, b[from].src, payload(from, 0, 7));
            ASSERT_EQ(h.post_ud(from, mah[from], {{b[from].src, kLen, b[from].smr->lkey}}, 98,
                                IBV_SEND_SIGNALED, 0xFFFFFF),
                      0);
            EXPECT_EQ(h.expect_wc(h.s[from].scq, 1, "multicast").size(), 1u);
        }
        for (unsigned j = 0; j < kNodes; ++j) {
            // Nodes 1..15 are attached (node0 is not); node8's own QP gets its own datagram
            // through its port's loopback (o10-36).
            std::vector<unsigned> senders;
            for (unsigned from : {0u, 8u})
                if (j != 0 && partition_of(from) == partition_of(j)) senders.push_back(from);
            auto wc = h.wait_wc(h.s[j].rcq, senders.size() + 1, kQuietNs);
            ASSERT_EQ(wc.size(), senders.size()) << "node" << j << " multicast receives";
            for (size_t k = 0; k < wc.size(); ++k) {
                EXPECT_EQ(wc[k].src_qp, h.s[senders[k]].qp->qp_num);
                h.expect_mem(j, b[j].dst + wc[k].wr_id * kSlot + 40, payload(senders[k], 0, 7),
                             "multicast payload");
            }
            // Members of the other partition got the other group's packet at their port and
            // dropped it there; node0 is no member, so nothing reached it.
            const unsigned tries = j == 0 ? 0u : 1u;
            EXPECT_EQ(pkey_violations(h, j), kNodes / 2 + tries) << "node" << j;
        }
        uint64_t total = 0;
        for (unsigned j = 0; j < kNodes; ++j) total += ctr(j, "pkey_checker.violations");
        EXPECT_EQ(total, kNodes * (kNodes / 2) + (kNodes - 1))
            << "all-to-all tries across plus multicast copies across";
    });
}

}  // namespace

SIM_TEST(E2eFabric16, C10_120_two_partitions_isolate_all_to_all_and_multicast_on_sixteen_nodes) {
    rc_harness h(sixteen());
    two_partitions(h);
}

// The same scenario with every node's P_Key checker run as TLM model and RTL side by side
// (docs/cosim.md): zero divergences, every packet compared, and the RTL's counters equal.
SIM_TEST(E2eFabric16, C10_120_cosim_two_partitions_with_the_pkey_checker_rtl_and_tlm_side_by_side) {
    rc_config c = sixteen();
    c.keys = {{"hca.pkey_checker.impl", "both"}};
    rc_harness h(c);
    two_partitions(h);
    for (unsigned j = 0; j < kNodes; ++j) {
        const pkey_checker& k = h.mach().at(j).adapter.pkeys;
        EXPECT_EQ(k.divergence(), "") << "node" << j;
        EXPECT_EQ(k.divergences.value(), 0u);
        EXPECT_GT(k.checked.value(), 0u);
        EXPECT_EQ(k.rtl_compared.value(), k.checked.value()) << "node" << j << ": every packet compared";
        EXPECT_GT(k.violations.value(), 0u);
    }
}
