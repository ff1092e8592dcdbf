// UD multicast end to end: attach/detach (o10-34), the switch replicating a multicast packet to
// every member port, delivery to every attached QP of a node (one receive WQE each), the
// destination QPN 0xFFFFFF (o10-35), loopback to attached QPs of the sending node (o10-36),
// destroying an attached QP (o10-2.2.3) and the limits QUERY_HCA reports (o10-33). Test names
// carry the compliance IDs they assert.
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

constexpr uint16_t kMlid = 0xC001;
constexpr uint32_t kMcastQpn = 0xFFFFFF;

rc_config ud_nodes(unsigned n) {
    rc_config c;
    c.qp_type = IBV_QPT_UD;
    c.nodes = n;
    return c;
}

/// The multicast GID ff12:401b::<n> (link-local scope), wire order.
ibv_gid mgid(uint8_t n) {
    ibv_gid g{};
    g.raw[0] = 0xFF;
    g.raw[1] = 0x12;
    g.raw[2] = 0x40;
    g.raw[3] = 0x1B;
    g.raw[15] = n;
    return g;
}

/// An AH on node i addressing the group (MLID, MGID): multicast needs the GRH.
ibv_ah* group_ah(rc_harness& h, unsigned i, uint16_t mlid = kMlid, uint8_t group = 1) {
    ibv_ah_attr a{};
    a.dlid = mlid;
    a.port_num = 1;
    a.is_global = 1;
    a.grh.dgid = mgid(group);
    a.grh.hop_limit = 1;
    ibv_ah* ah = ibv_create_ah(h.s[i].pd, &a);
    EXPECT_NE(ah, nullptr) << "errno " << errno;
    return ah;
}

/// A receive buffer of n bytes on node i, guard-filled and registered.
struct rbuf {
    uint64_t va = 0;
    ibv_mr* mr = nullptr;
};
rbuf rx_buffer(rc_harness& h, unsigned i, size_t n) {
    rbuf b;
    b.va = h.alloc(i, n, 4096);
    h.fill_mem(i, b.va, n, kGuardByte);
    b.mr = h.reg(i, b.va, n);
    return b;
}

/// Another UD QP on node i (the harness's CQs, the harness's Q_Key), in RTS.
ibv_qp* extra_ud_qp(rc_harness& h, unsigned i) {
    ibv_qp_init_attr a{};
    a.send_cq = h.s[i].scq;
    a.recv_cq = h.s[i].rcq;
    a.qp_type = IBV_QPT_UD;
    a.cap = {16, 16, 1, 1, 0};
    ibv_qp* q = ibv_create_qp(h.s[i].pd, &a);
    EXPECT_NE(q, nullptr);
    if (!q) return nullptr;
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.port_num = 1;
    at.qkey = h.config().qkey;
    EXPECT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY), 0);
    EXPECT_EQ(to_state(q, IBV_QPS_RTR), 0);
    at = ibv_qp_attr{};
    at.qp_state = IBV_QPS_RTS;
    EXPECT_EQ(ibv_modify_qp(q, &at, IBV_QP_STATE | IBV_QP_SQ_PSN), 0);
    return q;
}

}  // namespace

SIM_TEST(E2eMcast, o10_33_query_device_reports_the_multicast_limits) {
    rc_config c = ud_nodes(2);
    c.keys = {{"node1.hca.mcast_table.max_groups", "2"}, {"node1.hca.mcast_table.max_qps_per_group", "1"}};
    rc_harness h(c);
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        EXPECT_EQ(da.max_mcast_grp, 64);
        EXPECT_EQ(da.max_mcast_qp_attach, 16);
        EXPECT_EQ(da.max_total_mcast_qp_attach, 64 * 16);
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_EQ(da.max_mcast_grp, 2);
        EXPECT_EQ(da.max_mcast_qp_attach, 1);
        // The limits hold: a third group, a second QP in a group.
        const ibv_gid g1 = mgid(1), g2 = mgid(2), g3 = mgid(3);
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g1, kMlid), 0);
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g2, kMlid + 1), 0);
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g3, kMlid + 2), ENOMEM);
        EXPECT_EQ(ibv_attach_mcast(extra_ud_qp(h, 1), &g1, kMlid), ENOMEM);
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g1, kMlid), 0) << "attaching twice is no error";
        EXPECT_EQ(ibv_detach_mcast(h.s[1].qp, &g2, kMlid + 1), 0);
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g3, kMlid + 2), 0)
            << "the detached group's place is free again";
    });
}

SIM_TEST(E2eMcast, o10_34_only_attached_ud_qps_receive_the_group_through_the_switch) {
    rc_harness h(ud_nodes(4));
    h.run([](rc_harness& h) {
        const ibv_gid g = mgid(1);
        for (unsigned i : {1u, 2u}) ASSERT_EQ(ibv_attach_mcast(h.s[i].qp, &g, kMlid), 0);
        rbuf rb[4];
        for (unsigned i = 1; i < 4; ++i) {
            rb[i] = rx_buffer(h, i, 4096);
            ASSERT_EQ(h.post_recv(i, {{rb[i].va, 4096, rb[i].mr->lkey}}, 100 + i), 0);
        }
        const uint64_t src = h.alloc(0, 1000, 64);
        h.write_mem(0, src, pattern(1000, 34));
        ibv_mr* smr = h.reg(0, src, 1000);
        ASSERT_EQ(h.post_ud(0, group_ah(h, 0), {{src, 1000, smr->lkey}}, 1, IBV_SEND_SIGNALED, kMcastQpn), 0);
        auto s = h.expect_wc(h.s[0].scq, 1, "the multicast send");
        ASSERT_EQ(s.size(), 1u);
        EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
        for (unsigned i : {1u, 2u}) {
            auto r = h.expect_wc(h.s[i].rcq, 1, "member node" + std::to_string(i));
            ASSERT_EQ(r.size(), 1u);
            EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
            EXPECT_EQ(r[0].wr_id, 100u + i);
            EXPECT_EQ(r[0].byte_len, 1040u);
            EXPECT_TRUE(r[0].wc_flags & IBV_WC_GRH);
            EXPECT_EQ(r[0].src_qp, h.s[0].qp->qp_num);
            EXPECT_EQ(r[0].slid, h.s[0].lid);
            const auto grh = h.read_mem(i, rb[i].va, 40);
            EXPECT_EQ(std::vector<uint8_t>(grh.begin() + 24, grh.end()),
                      std::vector<uint8_t>(g.raw, g.raw + 16))
                << "the GRH's DGID is the group's MGID";
            h.expect_mem(i, rb[i].va + 40, pattern(1000, 34), "the payload");
        }
        h.expect_no_wc(h.s[3].rcq, kQuietNs, "node3 did not join");
        h.expect_fill(3, rb[3].va, 4096, kGuardByte, "nothing written on node3");
        EXPECT_EQ(h.counter_value("fabric.switch.mcast_replicas"), 2u) << "one copy per member port";
        EXPECT_EQ(ctr(3, "transport_engine.mcast_deliveries"), 0u);
        // After node2 detaches, only node1 receives.
        ASSERT_EQ(ibv_detach_mcast(h.s[2].qp, &g, kMlid), 0);
        EXPECT_EQ(ibv_detach_mcast(h.s[2].qp, &g, kMlid), EINVAL) << "not attached any more";
        ASSERT_EQ(h.post_recv(1, {{rb[1].va + 2048, 2048, rb[1].mr->lkey}}, 201), 0);
        ASSERT_EQ(h.post_recv(2, {{rb[2].va + 2048, 2048, rb[2].mr->lkey}}, 202), 0);
        ASSERT_EQ(h.post_ud(0, group_ah(h, 0), {{src, 10, smr->lkey}}, 2, IBV_SEND_SIGNALED, kMcastQpn), 0);
        EXPECT_EQ(h.expect_wc(h.s[1].rcq, 1, "node1 still a member").size(), 1u);
        h.expect_no_wc(h.s[2].rcq, kQuietNs, "node2 left");
        EXPECT_EQ(h.counter_value("fabric.switch.mcast_replicas"), 3u);
    });
}

SIM_TEST(E2eMcast, o10_34_attach_takes_ud_qps_multicast_gids_and_multicast_lids_only) {
    rc_harness h(ud_nodes(2));
    h.run([](rc_harness& h) {
        const ibv_gid g = mgid(1);
        ibv_gid unicast = rc_harness::gid_of(1);
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &unicast, kMlid), EINVAL) << "not a multicast GID";
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g, 0x0005), EINVAL) << "a unicast LID";
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, &g, 0xFFFF), EINVAL) << "the permissive LID";
        EXPECT_EQ(ibv_attach_mcast(h.s[1].qp, nullptr, kMlid), EINVAL);
        ibv_qp_init_attr a{};
        a.send_cq = h.s[1].scq;
        a.recv_cq = h.s[1].rcq;
        a.cap = {4, 4, 1, 1, 0};
        for (ibv_qp_type t : {IBV_QPT_RC, IBV_QPT_UC}) {
            a.qp_type = t;
            ibv_qp* q = ibv_create_qp(h.s[1].pd, &a);
            ASSERT_NE(q, nullptr);
            EXPECT_EQ(ibv_attach_mcast(q, &g, kMlid), EINVAL) << "QP type " << int(t);
        }
        // A multicast AH needs a GRH naming a multicast GID.
        ibv_ah_attr bad{};
        bad.dlid = kMlid;
        bad.port_num = 1;
        errno = 0;
        EXPECT_EQ(ibv_create_ah(h.s[0].pd, &bad), nullptr);
        EXPECT_EQ(errno, EINVAL);
    });
}

SIM_TEST(E2eMcast, every_attached_qp_of_a_node_takes_a_receive_wqe_of_its_own) {
    rc_harness h(ud_nodes(2));  // back to back: node1's HCA fans the packet out
    h.run([](rc_harness& h) {
        const ibv_gid g = mgid(7);
        ibv_qp* second = extra_ud_qp(h, 1);
        ASSERT_NE(second, nullptr);
        ASSERT_EQ(ibv_attach_mcast(h.s[1].qp, &g, kMlid + 6), 0);
        ASSERT_EQ(ibv_attach_mcast(second, &g, kMlid + 6), 0);
        rbuf rb = rx_buffer(h, 1, 4096);
        ASSERT_EQ(post_recv_on(h.s[1].qp, rb.va, 1024, rb.mr->lkey, 1), 0);
        ASSERT_EQ(post_recv_on(second, rb.va + 1024, 1024, rb.mr->lkey, 2), 0);
        const uint64_t src = h.alloc(0, 256, 64);
        h.write_mem(0, src, pattern(256, 77));
        ibv_mr* smr = h.reg(0, src, 256);
        ASSERT_EQ(h.post_ud(0, group_ah(h, 0, kMlid + 6, 7), {{src, 256, smr->lkey}}, 1, IBV_SEND_SIGNALED,
                            kMcastQpn),
                  0);
        auto r = h.expect_wc(h.s[1].rcq, 2, "one completion per attached QP");
        ASSERT_EQ(r.size(), 2u);
        EXPECT_EQ(r[0].qp_num, h.s[1].qp->qp_num) << "in attach order";
        EXPECT_EQ(r[0].wr_id, 1u);
        EXPECT_EQ(r[1].qp_num, second->qp_num);
        EXPECT_EQ(r[1].wr_id, 2u);
        h.expect_mem(1, rb.va + 40, pattern(256, 77), "first QP's buffer");
        h.expect_mem(1, rb.va + 1024 + 40, pattern(256, 77), "second QP's buffer");
        EXPECT_EQ(ctr(1, "transport_engine.mcast_deliveries"), 2u);
    });
}

SIM_TEST(E2eMcast, o10_35_multicast_packet_naming_another_qpn_than_ffffff_is_discarded) {
    rc_harness h(ud_nodes(2));
    h.run([](rc_harness& h) {
        const ibv_gid g = mgid(1);
        ASSERT_EQ(ibv_attach_mcast(h.s[1].qp, &g, kMlid), 0);
        rbuf rb = rx_buffer(h, 1, 4096);
        ASSERT_EQ(h.post_recv(1, {{rb.va, 4096, rb.mr->lkey}}, 1), 0);
        const uint64_t src = h.alloc(0, 64, 64);
        ibv_mr* smr = h.reg(0, src, 64);
        // Addressed to the group's MLID but to the member QP's own number.
        ASSERT_EQ(
            h.post_ud(0, group_ah(h, 0), {{src, 64, smr->lkey}}, 1, IBV_SEND_SIGNALED, h.s[1].qp->qp_num), 0);
        EXPECT_EQ(h.expect_wc(h.s[0].scq, 1, "sent").size(), 1u);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "discarded");
        EXPECT_EQ(ctr(1, "transport_engine.mcast_dropped"), 1u);
        h.expect_fill(1, rb.va, 4096, kGuardByte, "nothing written");
        // With 0xFFFFFF it is delivered into the same receive WQE.
        ASSERT_EQ(h.post_ud(0, group_ah(h, 0), {{src, 64, smr->lkey}}, 2, IBV_SEND_SIGNALED, kMcastQpn), 0);
        auto r = h.expect_wc(h.s[1].rcq, 1, "delivered");
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].wr_id, 1u);
    });
}

SIM_TEST(E2eMcast, o10_36_multicast_loops_back_to_attached_qps_on_the_sending_node) {
    rc_harness h(ud_nodes(3));
    h.run([](rc_harness& h) {
        const ibv_gid g = mgid(1);
        ibv_qp* local = extra_ud_qp(h, 0);  // a second QP on the sending node joins the group
        ASSERT_NE(local, nullptr);
        ASSERT_EQ(ibv_attach_mcast(local, &g, kMlid), 0);
        ASSERT_EQ(ibv_attach_mcast(h.s[2].qp, &g, kMlid), 0);
        rbuf l = rx_buffer(h, 0, 4096), r2 = rx_buffer(h, 2, 4096);
        ASSERT_EQ(post_recv_on(local, l.va, 4096, l.mr->lkey, 10), 0);
        ASSERT_EQ(h.post_recv(2, {{r2.va, 4096, r2.mr->lkey}}, 20), 0);
        const uint64_t src = h.alloc(0, 500, 64);
        h.write_mem(0, src, pattern(500, 36));
        ibv_mr* smr = h.reg(0, src, 500);
        ASSERT_EQ(h.post_ud(0, group_ah(h, 0), {{src, 500, smr->lkey}}, 1, IBV_SEND_SIGNALED, kMcastQpn), 0);
        auto lw = h.expect_wc(h.s[0].rcq, 1, "loopback to the sending node's member");
        ASSERT_EQ(lw.size(), 1u);
        EXPECT_EQ(lw[0].qp_num, local->qp_num);
        EXPECT_EQ(lw[0].src_qp, h.s[0].qp->qp_num);
        h.expect_mem(0, l.va + 40, pattern(500, 36), "looped back");
        EXPECT_EQ(h.expect_wc(h.s[2].rcq, 1, "the remote member").size(), 1u);
        h.expect_mem(2, r2.va + 40, pattern(500, 36), "remote member");
        EXPECT_EQ(h.counter_value("fabric.switch.mcast_replicas"), 1u) << "the switch sends no copy back";
    });
}

SIM_TEST(E2eMcast, o10_2_2_3_destroying_an_attached_qp_is_an_immediate_error) {
    rc_harness h(ud_nodes(2));
    h.run([](rc_harness& h) {
        const ibv_gid g = mgid(1);
        ibv_qp* q = extra_ud_qp(h, 1);
        ASSERT_NE(q, nullptr);
        ASSERT_EQ(ibv_attach_mcast(q, &g, kMlid), 0);
        EXPECT_EQ(ibv_destroy_qp(q), EBUSY);
        EXPECT_EQ(query_state(q), IBV_QPS_RTS) << "the QP is still there";
        ASSERT_EQ(ibv_detach_mcast(q, &g, kMlid), 0);
        EXPECT_EQ(ibv_destroy_qp(q), 0);
    });
}
