// Automatic path migration (IBA 10.4) end to end: alternate paths loaded with Modify QP and read
// back with Query QP, the path migration state machine (Migrated, Rearm, Armed; Figure 127), the
// lock-step arming through MigReq, manual migration (IBV_MIG_MIGRATED) and the migration the HCA
// makes itself when the primary path's cable goes down mid-stream. With fabric.lmc = 1 every
// port owns two LIDs: node0 2 and 3, node1 4 and 5; the primary paths use the base LIDs (source
// path bits 0), the alternate paths the second LIDs (source path bits 1). Test names carry the
// compliance IDs they assert.
#include <gtest/gtest.h>

#include <cerrno>
#include <fstream>
#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

rc_config lmc1(std::vector<std::pair<std::string, std::string>> more = {}) {
    rc_config c;
    c.keys = {{"fabric.lmc", "1"}};
    c.keys.insert(c.keys.end(), more.begin(), more.end());
    c.timeout = 10;  // 4.2 ms local ACK timeout
    c.retry_cnt = 3;
    return c;
}

/// Node i's alternate path towards the other node: its second LID, sent from source path bits 1.
ibv_qp_attr alt_path_of(rc_harness& h, unsigned i) {
    ibv_qp_attr a{};
    a.alt_ah_attr.dlid = uint16_t(h.s[h.peer_of(i)].lid + 1);
    a.alt_ah_attr.src_path_bits = 1;
    a.alt_ah_attr.sl = 0;
    a.alt_ah_attr.port_num = 1;
    a.alt_port_num = 1;
    a.alt_pkey_index = 0;
    a.alt_timeout = 10;
    return a;
}

/// RTS -> RTS with `mask` (besides the state) and the attributes in `a`.
int rts_modify(ibv_qp* qp, ibv_qp_attr a, int mask) {
    a.qp_state = IBV_QPS_RTS;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | mask);
}

/// Loads node i's alternate path and moves its path migration state to Rearm.
int rearm(rc_harness& h, unsigned i) {
    ibv_qp_attr a = alt_path_of(h, i);
    a.path_mig_state = IBV_MIG_REARM;
    return rts_modify(h.s[i].qp, a, IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE);
}

ibv_qp_attr query(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE, &ia),
              0);
    return a;
}

ibv_mig_state mig_state(ibv_qp* qp) { return query(qp).path_mig_state; }

/// One signaled RDMA WRITE of `n` bytes node0 -> node1 (its completion status).
int one_write(rc_harness& h, const bufs& b, uint32_t n) {
    return write_wc(h, {b.src, n, b.smr->lkey}, b.dst, b.dmr->rkey, "WRITE").status;
}

/// The next asynchronous event of node i: its type, and it is for node i's harness QP.
int event_of(rc_harness& h, unsigned i) {
    ibv_async_event ev{};
    if (!next_event(h, i, ev)) return -1;
    EXPECT_EQ(ev.element.qp, h.s[i].qp) << "node" << i << ": the event names the harness QP";
    return int(ev.event_type);
}

/// Type of node i's next asynchronous event within 1 ms; -1 if none.
int event_within_1ms(rc_harness& h, unsigned i) {
    ibv_qp* qp = nullptr;
    return next_event_type(h, i, &qp);
}

/// Both ends Rearm, then one WRITE each way arms both (o10-32).
void arm_both(rc_harness& h, const bufs& b) {
    ASSERT_EQ(rearm(h, 0), 0);
    ASSERT_EQ(rearm(h, 1), 0);
    ASSERT_EQ(one_write(h, b, 64), IBV_WC_SUCCESS);
    ASSERT_EQ(mig_state(h.s[0].qp), IBV_MIG_ARMED);
    ASSERT_EQ(mig_state(h.s[1].qp), IBV_MIG_ARMED);
}

}  // namespace

SIM_TEST(E2eApm, o10_26_a_new_qp_is_in_migrated_and_query_hca_reports_apm) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[0].ctx, &da), 0);
        EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_MIGRATED) << "in RTS, never given a path migration state";
        ASSERT_EQ(rearm(h, 0), 0);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_REARM);
        // Reset takes the QP back to its initial attributes: Migrated, no alternate path.
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RESET), 0);
        const ibv_qp_attr a = query(h.s[0].qp);
        EXPECT_EQ(a.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(a.alt_ah_attr.dlid, 0);
        EXPECT_EQ(a.alt_port_num, 0);
    });
}

SIM_TEST(E2eApm, o10_22_modify_qp_loads_the_alternate_path_and_query_qp_returns_it_rc_and_uc_only) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        ibv_qp_attr a = alt_path_of(h, 0);
        a.alt_ah_attr.sl = 3;
        a.alt_timeout = 12;
        ASSERT_EQ(rts_modify(h.s[0].qp, a, IBV_QP_ALT_PATH), 0);
        ibv_qp_attr q = query(h.s[0].qp);
        EXPECT_EQ(q.alt_ah_attr.dlid, 5);
        EXPECT_EQ(q.alt_ah_attr.sl, 3);
        EXPECT_EQ(q.alt_ah_attr.src_path_bits, 1);
        EXPECT_EQ(q.alt_port_num, 1);
        EXPECT_EQ(q.alt_pkey_index, 0);
        EXPECT_EQ(q.alt_timeout, 12);
        EXPECT_EQ(q.ah_attr.dlid, 4) << "the primary path is unchanged";
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        // Bad alternate paths are immediate errors, the QP unchanged.
        ibv_qp_attr bad = alt_path_of(h, 0);
        bad.alt_port_num = 2;
        EXPECT_EQ(rts_modify(h.s[0].qp, bad, IBV_QP_ALT_PATH), EINVAL) << "no port 2";
        bad = alt_path_of(h, 0);
        bad.alt_pkey_index = 0xFFFF;
        EXPECT_EQ(rts_modify(h.s[0].qp, bad, IBV_QP_ALT_PATH), EINVAL) << "P_Key index past the table";
        bad = alt_path_of(h, 0);
        bad.alt_timeout = 32;
        EXPECT_EQ(rts_modify(h.s[0].qp, bad, IBV_QP_ALT_PATH), EINVAL) << "timeout code past 31";
        EXPECT_EQ(query(h.s[0].qp).alt_timeout, 12);
        // Figure 127 only: Migrated -> Armed, and Rearm -> Migrated, are not arcs of it.
        ibv_qp_attr m{};
        m.path_mig_state = IBV_MIG_ARMED;
        EXPECT_EQ(rts_modify(h.s[0].qp, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "Migrated -> Armed";
        m.path_mig_state = IBV_MIG_REARM;
        ASSERT_EQ(rts_modify(h.s[0].qp, m, IBV_QP_PATH_MIG_STATE), 0);
        m.path_mig_state = IBV_MIG_MIGRATED;
        EXPECT_EQ(rts_modify(h.s[0].qp, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "Rearm -> Migrated";
        m.path_mig_state = ibv_mig_state(3);
        EXPECT_EQ(rts_modify(h.s[0].qp, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "no such state";
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_REARM);
        m.path_mig_state = IBV_MIG_ARMED;  // the consumer may arm a QP in Rearm (10.4.1.1)
        ASSERT_EQ(rts_modify(h.s[0].qp, m, IBV_QP_PATH_MIG_STATE), 0);
        m.path_mig_state = IBV_MIG_REARM;
        EXPECT_EQ(rts_modify(h.s[0].qp, m, IBV_QP_PATH_MIG_STATE), EINVAL) << "Armed -> Rearm";
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_ARMED);
        // UD has no paths to migrate: the attributes are refused.
        ibv_qp_init_attr ia{};
        ia.qp_type = IBV_QPT_UD;
        ia.send_cq = h.s[0].scq;
        ia.recv_cq = h.s[0].rcq;
        ia.cap = {4, 4, 1, 1, 0};
        ibv_qp* ud = ibv_create_qp(h.s[0].pd, &ia);
        ASSERT_NE(ud, nullptr);
        ASSERT_EQ(h.connect_qp(ud, IBV_QPS_RTS, 0, 0, 0, 0), 0);
        EXPECT_EQ(rts_modify(ud, alt_path_of(h, 0), IBV_QP_ALT_PATH), EINVAL);
        m.path_mig_state = IBV_MIG_REARM;
        EXPECT_EQ(rts_modify(ud, m, IBV_QP_PATH_MIG_STATE), EINVAL);
    });
}

SIM_TEST(E2eApm, o10_24_migrated_to_rearm_is_refused_on_a_transition_to_a_state_other_than_rts) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_SQD), 0);
        ibv_qp_attr a = alt_path_of(h, 0);
        a.qp_state = IBV_QPS_SQD;
        a.path_mig_state = IBV_MIG_REARM;
        EXPECT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE),
                  EINVAL)
            << "SQD -> SQD";
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_MIGRATED);
        EXPECT_EQ(query(h.s[0].qp).alt_ah_attr.dlid, 0) << "the refused Modify QP loaded nothing";
        a.qp_state = IBV_QPS_RTS;
        EXPECT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE), 0)
            << "SQD -> RTS";
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_REARM);
        // Init -> RTR takes no path migration state at all.
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect(1, IBV_QPS_INIT), 0);
        ibv_qp_attr r = alt_path_of(h, 1);
        r.qp_state = IBV_QPS_RTR;
        r.path_mig_state = IBV_MIG_REARM;
        r.path_mtu = IBV_MTU_4096;
        r.dest_qp_num = h.s[0].qp->qp_num;
        r.max_dest_rd_atomic = 1;
        r.min_rnr_timer = 12;
        r.ah_attr.dlid = h.s[0].lid;
        r.ah_attr.port_num = 1;
        const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
        EXPECT_EQ(ibv_modify_qp(h.s[1].qp, &r, rtr | IBV_QP_PATH_MIG_STATE), EINVAL) << "Init -> RTR";
        ASSERT_EQ(ibv_modify_qp(h.s[1].qp, &r, rtr | IBV_QP_ALT_PATH), 0) << "Init -> RTR loads a path";
        EXPECT_EQ(query(h.s[1].qp).alt_ah_attr.dlid, 3);
        ibv_qp_attr s{};
        s.qp_state = IBV_QPS_RTS;
        s.path_mig_state = IBV_MIG_REARM;
        s.timeout = 10;
        s.retry_cnt = 3;
        s.rnr_retry = 7;
        s.max_rd_atomic = 1;
        EXPECT_EQ(ibv_modify_qp(h.s[1].qp, &s,
                                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_PATH_MIG_STATE),
                  0)
            << "RTR -> RTS";
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_REARM);
    });
}

SIM_TEST(E2eApm, o10_25_armed_to_migrated_by_modify_qp_only_from_rts_or_sqd) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        arm_both(h, b);
        // From SQD (SQD -> SQD): accepted, the QP migrates at once.
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_SQD), 0);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_SQD;
        a.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE), 0);
        EXPECT_EQ(event_of(h, 0), IBV_EVENT_PATH_MIG);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_MIGRATED);
        // From RTS (RTS -> RTS) on node1: accepted.
        a.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(rts_modify(h.s[1].qp, a, IBV_QP_PATH_MIG_STATE), 0);
        EXPECT_EQ(event_of(h, 1), IBV_EVENT_PATH_MIG);
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_MIGRATED);
        // No other state takes a path migration state (a QP in RTR cannot be Armed yet: Rearm
        // is loaded going to RTS, o10-24): Error -> Error refuses it.
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_ERR), 0);
        a.qp_state = IBV_QPS_ERR;
        EXPECT_EQ(ibv_modify_qp(h.s[1].qp, &a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE), EINVAL) << "Error";
    });
}

SIM_TEST(E2eApm, o10_32_both_ends_in_rearm_move_to_armed_in_lock_step_once_packets_flow) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        ASSERT_EQ(rearm(h, 0), 0);
        ASSERT_EQ(one_write(h, b, 64), IBV_WC_SUCCESS);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_REARM) << "node1 is Migrated: its ACK carried MigReq 1";
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_MIGRATED);
        ASSERT_EQ(rearm(h, 1), 0);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_REARM) << "no packet yet";
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_REARM);
        ASSERT_EQ(one_write(h, b, 64), IBV_WC_SUCCESS);
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_ARMED) << "the request came with MigReq 0";
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_ARMED) << "the ACK came with MigReq 0";
        EXPECT_EQ(event_within_1ms(h, 0), -1) << "arming raises no event";
    });
}

SIM_TEST(E2eApm, o10_31_the_hca_never_moves_a_qp_from_migrated_to_rearm_itself) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        // node0 has an alternate path but stays Migrated; its peer in Rearm sends MigReq 0.
        ASSERT_EQ(rts_modify(h.s[0].qp, alt_path_of(h, 0), IBV_QP_ALT_PATH), 0);
        ASSERT_EQ(rearm(h, 1), 0);
        for (int k = 0; k < 4; ++k) ASSERT_EQ(one_write(h, b, 4096), IBV_WC_SUCCESS);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_MIGRATED);
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_REARM) << "node0's packets carry MigReq 1";
    });
}

SIM_TEST(E2eApm, o10_30_a_migration_request_to_a_qp_that_is_not_armed_changes_nothing) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        // node0 sends over what node1 holds as its alternate path, with MigReq 1 (Migrated):
        // node1, in Rearm, does not migrate.
        ibv_qp_attr a{};
        a.ah_attr.dlid = 5;
        a.ah_attr.src_path_bits = 1;
        a.ah_attr.port_num = 1;
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_SQD), 0);
        a.qp_state = IBV_QPS_SQD;
        ASSERT_EQ(ibv_modify_qp(h.s[0].qp, &a, IBV_QP_STATE | IBV_QP_AV), 0);
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RTS), 0);
        ASSERT_EQ(rearm(h, 1), 0);
        ASSERT_EQ(one_write(h, b, 4096), IBV_WC_SUCCESS);
        const ibv_qp_attr q = query(h.s[1].qp);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_REARM);
        EXPECT_EQ(q.ah_attr.dlid, 2) << "node1's primary path is unchanged";
        EXPECT_EQ(event_within_1ms(h, 1), -1);
        EXPECT_EQ(h.counter_value("node1.hca.transport_engine.path_migrations"), 0u);
    });
}

SIM_TEST(E2eApm, o10_27_o10_28_manual_migration_moves_both_ends_to_the_alternate_path_with_path_mig_events) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 64 * 1024);
        arm_both(h, b);
        ibv_qp_attr a{};
        a.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(rts_modify(h.s[0].qp, a, IBV_QP_PATH_MIG_STATE), 0);
        EXPECT_EQ(event_of(h, 0), IBV_EVENT_PATH_MIG) << "o10-27: raised at the local migration";
        ibv_qp_attr q = query(h.s[0].qp);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 5) << "the alternate path is the primary one now";
        EXPECT_EQ(q.ah_attr.src_path_bits, 1);
        EXPECT_EQ(q.alt_ah_attr.dlid, 4) << "and the old primary the alternate";
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_ARMED) << "no packet yet";
        // The next packet goes on the new path with MigReq: node1 validates it and migrates.
        const uint64_t rx1 = h.counter_value("node1.hca.port.PortRcvPkts");
        ASSERT_EQ(one_write(h, b, 64 * 1024), IBV_WC_SUCCESS);
        EXPECT_GT(h.counter_value("node1.hca.port.PortRcvPkts"), rx1);
        EXPECT_EQ(event_of(h, 1), IBV_EVENT_PATH_MIG) << "o10-28";
        q = query(h.s[1].qp);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 3);
        EXPECT_EQ(q.alt_ah_attr.dlid, 2);
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, 64 * 1024), "the WRITE after the migration");
        EXPECT_EQ(h.counter_value("node0.hca.transport_engine.path_migrations"), 1u);
        EXPECT_EQ(h.counter_value("node1.hca.transport_engine.path_migrations"), 1u);
    });
}

SIM_TEST(E2eApm, o10_29_a_migration_request_off_the_alternate_path_raises_path_mig_err_and_changes_nothing) {
    rc_harness h(lmc1());
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        arm_both(h, b);
        // node1's alternate path names node0's base LID: node0's migrated packets (SLID 3) do
        // not come over it.
        ibv_qp_attr wrong = alt_path_of(h, 1);
        wrong.alt_ah_attr.dlid = 2;
        ASSERT_EQ(rts_modify(h.s[1].qp, wrong, IBV_QP_ALT_PATH), 0);
        ibv_qp_attr a{};
        a.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(rts_modify(h.s[0].qp, a, IBV_QP_PATH_MIG_STATE), 0);
        EXPECT_EQ(event_of(h, 0), IBV_EVENT_PATH_MIG);
        for (int k = 0; k < 3; ++k) ASSERT_EQ(one_write(h, b, 4096), IBV_WC_SUCCESS) << "still delivered";
        EXPECT_EQ(event_of(h, 1), IBV_EVENT_PATH_MIG_ERR);
        EXPECT_EQ(event_within_1ms(h, 1), -1) << "raised once";
        const ibv_qp_attr q = query(h.s[1].qp);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_ARMED);
        EXPECT_EQ(q.ah_attr.dlid, 2) << "no path switch";
        EXPECT_EQ(q.alt_ah_attr.dlid, 2);
        EXPECT_EQ(h.counter_value("node1.hca.transport_engine.path_mig_errors"), 1u);
        EXPECT_EQ(h.counter_value("node1.hca.transport_engine.path_migrations"), 0u);
    });
}

SIM_TEST(E2eApm, o10_22_uc_qps_arm_in_lock_step_and_migrate_as_rc_ones_do) {
    rc_config c = lmc1();
    c.qp_type = IBV_QPT_UC;
    rc_harness h(c);
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, 4096);
        // The other way: node1's buffer to node0's.
        const uint64_t src1 = h.alloc(1, 4096, 4096), dst0 = h.alloc(0, 4096, 4096);
        ibv_mr* smr1 = h.reg(1, src1, 4096);
        ibv_mr* dmr0 = h.reg(0, dst0, 4096);
        ASSERT_EQ(rearm(h, 0), 0);
        ASSERT_EQ(rearm(h, 1), 0);
        ASSERT_EQ(one_write(h, b, 64), IBV_WC_SUCCESS);
        h.sleep(0, 10'000);  // UC completes once sent: let the packet arrive
        EXPECT_EQ(mig_state(h.s[1].qp), IBV_MIG_ARMED) << "node0's WRITE came with MigReq 0";
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_REARM) << "UC: no acknowledgement came back";
        ASSERT_EQ(write_wc(h, {src1, 64, smr1->lkey}, dst0, dmr0->rkey, "WRITE node1 -> node0", 1).status,
                  IBV_WC_SUCCESS);
        h.sleep(0, 10'000);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_ARMED);
        ibv_qp_attr a{};
        a.path_mig_state = IBV_MIG_MIGRATED;
        ASSERT_EQ(rts_modify(h.s[0].qp, a, IBV_QP_PATH_MIG_STATE), 0);
        EXPECT_EQ(event_of(h, 0), IBV_EVENT_PATH_MIG);
        h.write_mem(0, b.src, pattern(4096, 11));
        ASSERT_EQ(one_write(h, b, 4096), IBV_WC_SUCCESS);
        EXPECT_EQ(event_of(h, 1), IBV_EVENT_PATH_MIG)
            << "the WRITE came over the alternate path with MigReq 1";
        const ibv_qp_attr q = query(h.s[1].qp);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 3);
        h.expect_mem(1, b.dst, pattern(4096, 11), "the WRITE over the new path");
    });
}

// --- a cable of the primary path goes down mid-stream --------------------------------------------

namespace {

/// Two switches joined by two cables (ports 3 and 4), node0 on switch0 and node1 on switch1.
/// With LMC 1 min-hop routes each node's base LID over the cables on port 3 and its second LID
/// over port 4 (a node's LIDs spread over the equal-cost ports): primary and alternate paths
/// share no cable between the switches.
std::string two_switch_topology() {
    const std::string path = ::testing::TempDir() + "apm_two_switches_" + std::to_string(getpid()) + ".topo";
    std::ofstream f(path);
    f << "Switch\t4 \"S-e41d2d0300000001\"\t\t# \"switch0\" enhanced port 0 lid 0 lmc 0\n"
         "[1]\t\"H-0002c90300000010\"[1](2c90300000011) \t\t# \"node0\" lid 1 4xEDR\n"
         "[3]\t\"S-e41d2d0300000002\"[3]\t\t# \"switch1\" lid 0 4xEDR\n"
         "[4]\t\"S-e41d2d0300000002\"[4]\t\t# \"switch1\" lid 0 4xEDR\n"
         "\n"
         "Switch\t4 \"S-e41d2d0300000002\"\t\t# \"switch1\" enhanced port 0 lid 0 lmc 0\n"
         "[1]\t\"H-0002c90300000020\"[1](2c90300000021) \t\t# \"node1\" lid 2 4xEDR\n"
         "\n"
         "Ca\t1 \"H-0002c90300000010\"\t\t# \"node0\"\n"
         "[1](2c90300000011) \t\"S-e41d2d0300000001\"[1]\t\t# lid 1 lmc 0 \"switch0\" lid 0 4xEDR\n"
         "\n"
         "Ca\t1 \"H-0002c90300000020\"\t\t# \"node1\"\n"
         "[1](2c90300000021) \t\"S-e41d2d0300000002\"[1]\t\t# lid 2 lmc 0 \"switch1\" lid 0 4xEDR\n";
    return path;
}

constexpr uint64_t kDownNs = 1'000'000;      // the cable of the primary path goes down at 1 ms
constexpr uint64_t kStartNs = 960'000;       // the stream starts 40 us before
constexpr unsigned kWrites = 64;             // RDMA WRITEs of the stream
constexpr uint32_t kWriteBytes = 16 * 1024;  // each: 1 MiB in all, ~85 us at 4x EDR

rc_config cable_loss() {
    return lmc1({{"fabric.topology", "file"},
                 {"fabric.topology_file", two_switch_topology()},
                 {"fabric.isl.down_cable", "switch0/3"},
                 {"fabric.isl.down_at_ns", std::to_string(kDownNs)}});
}

/// Streams kWrites RDMA WRITEs node0 -> node1 (consecutive pieces of one buffer, the last with
/// immediate) starting at kStartNs; returns node0's send completions.
std::vector<ibv_wc> stream(rc_harness& h, const bufs& b) {
    EXPECT_LT(h.now_ns(), kStartNs) << "setup ran past the stream's start";
    h.sleep(0, kStartNs - h.now_ns());
    EXPECT_EQ(post_recv_on(h.s[1].qp, b.dst, 0, b.dmr->lkey, 9), 0);
    std::vector<ibv_send_wr> wrs(kWrites);
    std::vector<ibv_sge> sges(kWrites);
    for (unsigned k = 0; k < kWrites; ++k) {
        sges[k] = {b.src + uint64_t(k) * kWriteBytes, kWriteBytes, b.smr->lkey};
        wrs[k] = ibv_send_wr{};
        wrs[k].wr_id = k;
        wrs[k].sg_list = &sges[k];
        wrs[k].num_sge = 1;
        wrs[k].opcode = k + 1 == kWrites ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
        wrs[k].send_flags = IBV_SEND_SIGNALED;
        wrs[k].imm_data = 0x4D494752;
        wrs[k].wr.rdma.remote_addr = b.dst + uint64_t(k) * kWriteBytes;
        wrs[k].wr.rdma.rkey = b.dmr->rkey;
    }
    EXPECT_EQ(post_list(h.s[0].qp, wrs), 0);
    return h.wait_wc(h.s[0].scq, kWrites, 200'000'000);
}

}  // namespace

SIM_TEST(E2eApm, o10_27_o10_28_rc_write_stream_survives_the_loss_of_its_primary_path_cable) {
    rc_config c = cable_loss();
    c.max_send_wr = kWrites;
    rc_harness h(c);
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, size_t(kWrites) * kWriteBytes + 4096, 7);
        arm_both(h, b);
        h.write_mem(0, b.src, pattern(size_t(kWrites) * kWriteBytes + 4096, 7));  // arm_both wrote 64 bytes
        h.fill_mem(1, b.dst, size_t(kWrites) * kWriteBytes + 4096, kGuardByte);
        const std::vector<ibv_wc> wc = stream(h, b);
        ASSERT_EQ(wc.size(), kWrites);
        for (unsigned k = 0; k < kWrites; ++k) {
            EXPECT_EQ(wc[k].status, IBV_WC_SUCCESS) << "WRITE " << k;
            EXPECT_EQ(wc[k].wr_id, k) << "in order";
        }
        const auto r = h.expect_wc(h.s[1].rcq, 1, "the last WRITE's immediate");
        ASSERT_EQ(r.size(), 1u);
        EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(r[0].imm_data, 0x4D494752u);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "a second immediate (the last WRITE placed twice)");
        h.expect_mem(1, b.dst, h.read_mem(0, b.src, size_t(kWrites) * kWriteBytes), "every byte, in order");
        h.expect_fill(1, b.dst + size_t(kWrites) * kWriteBytes, 4096, kGuardByte, "nothing past the stream");
        EXPECT_GT(h.counter_value("fabric.switch0.out2.dropped_down"), 0u) << "the primary path lost packets";
        EXPECT_GT(h.counter_value("node0.hca.transport_engine.timeouts"), 0u);
        // Both ends migrated, each raising PATH_MIG; the alternate path is the primary one now.
        EXPECT_EQ(event_of(h, 0), IBV_EVENT_PATH_MIG);
        EXPECT_EQ(event_of(h, 1), IBV_EVENT_PATH_MIG);
        ibv_qp_attr q = query(h.s[0].qp);
        EXPECT_EQ(q.qp_state, IBV_QPS_RTS);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 5);
        EXPECT_EQ(q.alt_ah_attr.dlid, 4);
        q = query(h.s[1].qp);
        EXPECT_EQ(q.path_mig_state, IBV_MIG_MIGRATED);
        EXPECT_EQ(q.ah_attr.dlid, 3);
        EXPECT_EQ(q.alt_ah_attr.dlid, 2);
    });
}

SIM_TEST(E2eApm, without_an_armed_alternate_path_the_same_cable_loss_ends_in_retry_exc_err) {
    rc_config c = cable_loss();
    c.max_send_wr = kWrites;
    rc_harness h(c);
    h.run([](rc_harness& h) {
        const bufs b = make_bufs(h, size_t(kWrites) * kWriteBytes, 7);
        // The alternate path is loaded but never armed (Migrated).
        ASSERT_EQ(rts_modify(h.s[0].qp, alt_path_of(h, 0), IBV_QP_ALT_PATH), 0);
        const std::vector<ibv_wc> wc = stream(h, b);
        ASSERT_EQ(wc.size(), kWrites);
        unsigned ok = 0;
        while (ok < kWrites && wc[ok].status == IBV_WC_SUCCESS) ++ok;
        ASSERT_LT(ok, kWrites) << "some WRITE must have been cut off by the cable";
        EXPECT_EQ(wc[ok].status, IBV_WC_RETRY_EXC_ERR);
        for (unsigned k = ok + 1; k < kWrites; ++k)
            EXPECT_EQ(wc[k].status, IBV_WC_WR_FLUSH_ERR) << "WRITE " << k;
        EXPECT_EQ(query_state(h.s[0].qp), IBV_QPS_ERR);
        EXPECT_EQ(mig_state(h.s[0].qp), IBV_MIG_MIGRATED);
        EXPECT_EQ(h.counter_value("node0.hca.transport_engine.path_migrations"), 0u);
    });
}

// --- fabric.isl.down_cable: bad values are refused naming the key ---------------------------------

namespace {

std::string down_cable_error(const std::string& cable, const std::string& at) {
    std::vector<std::pair<std::string, std::string>> keys = {{"fabric.topology", "file"},
                                                             {"fabric.topology_file", two_switch_topology()}};
    if (!cable.empty()) keys.push_back({"fabric.isl.down_cable", cable});
    if (!at.empty()) keys.push_back({"fabric.isl.down_at_ns", at});
    return config_error_of(keys);
}

}  // namespace

SIM_TEST(IslDownCable, a_switch_that_does_not_exist_is_refused_naming_the_key) {
    EXPECT_EQ(down_cable_error("spine7/3", "1000"),
              "fabric.isl.down_cable='spine7/3': no switch named 'spine7'");
}

SIM_TEST(IslDownCable, a_port_not_cabled_to_another_switch_is_refused_naming_the_key) {
    EXPECT_EQ(down_cable_error("switch0/1", "1000"),
              "fabric.isl.down_cable='switch0/1': port 1 of switch0 is not cabled to another switch");
    EXPECT_EQ(down_cable_error("switch0/9", "1000"),
              "fabric.isl.down_cable='switch0/9': port 9 of switch0 is not cabled to another switch");
}

SIM_TEST(IslDownCable, a_value_without_a_port_is_refused_naming_the_key) {
    EXPECT_EQ(down_cable_error("switch0", "1000"),
              "fabric.isl.down_cable='switch0': expected SWITCH/PORT (e.g. spine0/1)");
}

SIM_TEST(IslDownCable, a_cable_without_a_time_is_refused) {
    EXPECT_EQ(down_cable_error("switch0/3", ""),
              "fabric.isl.down_cable='switch0/3' needs fabric.isl.down_at_ns (the time it goes down, >= 0)");
}

SIM_TEST(IslDownCable, a_time_without_a_cable_is_refused) {
    EXPECT_EQ(down_cable_error("", "1000"), "fabric.isl.down_at_ns needs fabric.isl.down_cable=SWITCH/PORT");
}
