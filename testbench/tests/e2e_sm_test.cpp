// Special QPs and subnet management end to end: QP0/QP1 for privileged consumers only
// (C10-13), SMPs consumed by the HCA's subnet management agent below the verbs (C10-12), QP1's
// P_Key and the P_Key index in its completions (C10-133), the subnet manager's
// SubnSet(P_KeyTable) answered by a GetResp (C10-128) and governing every later packet
// (C10-129), and Bad P_Key traps to the SM (o10-55.1.1, o10-56). Nodes sit on one switch with
// the subnet manager on an extra switch port (fabric.sm, LID nodes + 1) unless said otherwise.
// Test names carry the compliance IDs they assert.
#include <gtest/gtest.h>

#include <array>
#include <cerrno>
#include <vector>

#include "model/fabric/subnet_manager.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/mad.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

constexpr uint32_t kQp1Qkey = 0x80010000u;

rc_config switched(ibv_qp_type t = IBV_QPT_UD) {
    rc_config c;
    c.qp_type = t;
    c.keys = {{"fabric.topology", "switch"}};
    return c;
}

subnet_manager& sm(rc_harness& h) { return *h.mach().net.sm; }

uint16_t query_pkey(rc_harness& h, unsigned node, int index) {
    uint16_t k = 0;
    EXPECT_EQ(ibv_query_pkey(h.s[node].ctx, 1, index, &k), 0) << "index " << index;
    return k;
}

/// A special QP (IBV_QPT_SMI or IBV_QPT_GSI) on node i with a CQ of its own, or nullptr.
ibv_qp* create_special(rc_harness& h, unsigned i, ibv_qp_type t, ibv_cq* cq) {
    ibv_qp_init_attr a{};
    a.send_cq = cq;
    a.recv_cq = cq;
    a.qp_type = t;
    a.cap = {16, 16, 1, 1, 0};
    return ibv_create_qp(h.s[i].pd, &a);
}

/// Reset -> Init (pkey_index) -> RTR -> RTS, the UD attributes.
int ud_to_rts(ibv_qp* qp, uint16_t pkey_index, uint32_t qkey = 0x12345678) {
    if (int rc = to_state(qp, IBV_QPS_RESET)) return rc;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = pkey_index;
    a.port_num = 1;
    a.qkey = qkey;
    if (int rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        return rc;
    if (int rc = to_state(qp, IBV_QPS_RTR)) return rc;
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

int post_ud_on(ibv_qp* qp, ibv_ah* ah, uint32_t qpn, uint32_t qkey, uint64_t va, uint32_t len, uint32_t lkey,
               uint64_t wr_id) {
    ibv_sge sge{va, len, lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = qkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

/// An AH on node i to node j with service level `sl` (a GRH if `global`).
ibv_ah* ah_sl(rc_harness& h, unsigned i, unsigned j, uint8_t sl, bool global = false) {
    ibv_ah_attr a{};
    a.dlid = h.s[j].lid;
    a.sl = sl;
    a.port_num = 1;
    a.is_global = global ? 1 : 0;
    if (global) {
        a.grh.hop_limit = 64;
        a.grh.dgid = rc_harness::gid_of(j);
    }
    ibv_ah* ah = ibv_create_ah(h.s[i].pd, &a);
    EXPECT_NE(ah, nullptr);
    return ah;
}

/// Decodes a packet the SM recorded: headers and the MAD.
struct decoded {
    wire::headers h;
    wire::smp mad;
    size_t payload_len = 0;
};
decoded decode(const std::vector<uint8_t>& bytes) {
    decoded d;
    size_t off = 0;
    EXPECT_EQ(wire::parse_packet(bytes.data(), bytes.size(), d.h, off, d.payload_len),
              wire::parse_status::ok);
    if (off + wire::MAD_BYTES <= bytes.size()) d.mad = wire::decode_smp(bytes.data() + off);
    return d;
}

/// The SMP packet shape: VL15, UD SEND ONLY to QP0, P_Key 0xFFFF, Q_Key 0 from QP0, 256-byte MAD.
void expect_smp_shape(const decoded& d, uint16_t dlid, uint16_t slid, const char* what) {
    EXPECT_EQ(d.h.l.vl, 15) << what;
    EXPECT_EQ(d.h.l.dlid, dlid) << what;
    EXPECT_EQ(d.h.l.slid, slid) << what;
    EXPECT_FALSE(d.h.has_grh) << what;
    EXPECT_EQ(d.h.b.opcode, wire::op::UD_SEND_ONLY) << what;
    EXPECT_EQ(d.h.b.pkey, 0xFFFF) << what;
    EXPECT_EQ(d.h.b.dest_qp, 0u) << what;
    EXPECT_EQ(d.h.d.qkey, 0u) << what;
    EXPECT_EQ(d.h.d.src_qp, 0u) << what;
    EXPECT_EQ(d.payload_len, wire::MAD_BYTES) << what;
    EXPECT_EQ(d.mad.h.base_version, 1) << what;
    EXPECT_EQ(d.mad.h.mgmt_class, 0x01) << what;
    EXPECT_EQ(d.mad.h.class_version, 1) << what;
}

}  // namespace

// ------------------------------------------------------------------ special QPs

SIM_TEST(E2eSpecialQp, C10_13_only_a_privileged_consumer_creates_qp0_and_qp1) {
    rc_harness h;  // back to back
    h.run([](rc_harness& h) {
        ibv_cq* cq = ibv_create_cq(h.s[0].ctx, 16);
        ASSERT_NE(cq, nullptr);
        errno = 0;
        EXPECT_EQ(create_special(h, 0, IBV_QPT_SMI, cq), nullptr);
        EXPECT_EQ(errno, EPERM) << "unprivileged: QP0 refused";
        errno = 0;
        EXPECT_EQ(create_special(h, 0, IBV_QPT_GSI, cq), nullptr);
        EXPECT_EQ(errno, EPERM) << "unprivileged: QP1 refused";
        EXPECT_GE(h.s[0].qp->qp_num, 2u) << "consumer QPNs start at 2";

        h.as(0).privileged = true;
        ibv_qp* qp0 = create_special(h, 0, IBV_QPT_SMI, cq);
        ibv_qp* qp1 = create_special(h, 0, IBV_QPT_GSI, cq);
        ASSERT_NE(qp0, nullptr) << "errno " << errno;
        ASSERT_NE(qp1, nullptr) << "errno " << errno;
        EXPECT_EQ(qp0->qp_num, 0u);
        EXPECT_EQ(qp1->qp_num, 1u);
        errno = 0;
        EXPECT_EQ(create_special(h, 0, IBV_QPT_GSI, cq), nullptr) << "one QP1 per port";
        EXPECT_EQ(errno, EBUSY);
        ibv_qp_attr a{};
        ibv_qp_init_attr ia{};
        ASSERT_EQ(ibv_query_qp(qp1, &a, 0, &ia), 0);
        EXPECT_EQ(ia.qp_type, IBV_QPT_GSI);
        ASSERT_EQ(ibv_query_qp(qp0, &a, 0, &ia), 0);
        EXPECT_EQ(ia.qp_type, IBV_QPT_SMI);
        // QP1's Q_Key is the well-known 0x80010000 whatever the consumer asks for.
        ASSERT_EQ(ud_to_rts(qp1, 0, 0x11111111), 0);
        ASSERT_EQ(ibv_query_qp(qp1, &a, 0, &ia), 0);
        EXPECT_EQ(a.qkey, kQp1Qkey);
        // A consumer QP created now still gets a QPN >= 2; QP1 can be created again once destroyed.
        ibv_qp_init_attr ua{};
        ua.send_cq = h.s[0].scq;  // (not `cq`: QP0/QP1 share theirs with no other QP)
        ua.recv_cq = h.s[0].rcq;
        ua.qp_type = IBV_QPT_UD;
        ua.cap = {4, 4, 1, 1, 0};
        ibv_qp* ud = ibv_create_qp(h.s[0].pd, &ua);
        ASSERT_NE(ud, nullptr);
        EXPECT_GE(ud->qp_num, 2u);
        EXPECT_EQ(ibv_destroy_qp(qp1), 0);
        qp1 = create_special(h, 0, IBV_QPT_GSI, cq);
        ASSERT_NE(qp1, nullptr);
        EXPECT_EQ(qp1->qp_num, 1u);
        EXPECT_EQ(ibv_destroy_qp(qp1), 0);
        EXPECT_EQ(ibv_destroy_qp(qp0), 0);
        EXPECT_EQ(ibv_destroy_qp(ud), 0);
    });
}

SIM_TEST(E2eSpecialQp, qp0_and_qp1_share_a_cq_with_each_other_but_not_with_other_qps) {
    // IBA 10.2.4.5: the SMI and GSI QPs may share a completion queue, but not with any other QP.
    rc_harness h;
    h.run([](rc_harness& h) {
        h.as(0).privileged = true;
        ibv_cq* special = ibv_create_cq(h.s[0].ctx, 16);
        ibv_cq* ordinary = h.s[0].scq;  // the harness QP uses it
        errno = 0;
        EXPECT_EQ(create_special(h, 0, IBV_QPT_SMI, ordinary), nullptr) << "a CQ of an ordinary QP";
        EXPECT_EQ(errno, EINVAL);
        ibv_qp* qp0 = create_special(h, 0, IBV_QPT_SMI, special);
        ibv_qp* qp1 = create_special(h, 0, IBV_QPT_GSI, special);
        ASSERT_NE(qp0, nullptr);
        ASSERT_NE(qp1, nullptr) << "QP1 shares QP0's CQ";
        ibv_qp_init_attr ua{};
        ua.send_cq = special;
        ua.recv_cq = h.s[0].rcq;
        ua.qp_type = IBV_QPT_UD;
        ua.cap = {4, 4, 1, 1, 0};
        errno = 0;
        EXPECT_EQ(ibv_create_qp(h.s[0].pd, &ua), nullptr) << "an ordinary QP on the special QPs' CQ";
        EXPECT_EQ(errno, EINVAL);
        // Once the special QPs are gone the CQ is an ordinary one again.
        ASSERT_EQ(ibv_destroy_qp(qp0), 0);
        ASSERT_EQ(ibv_destroy_qp(qp1), 0);
        ibv_qp* ud = ibv_create_qp(h.s[0].pd, &ua);
        ASSERT_NE(ud, nullptr);
        errno = 0;
        EXPECT_EQ(create_special(h, 0, IBV_QPT_GSI, special), nullptr);
        EXPECT_EQ(errno, EINVAL);
    });
}

SIM_TEST(E2eSpecialQp, C10_12_smps_to_qp0_go_to_the_sma_and_never_touch_a_consumers_qp0) {
    rc_harness h(switched());
    h.run([](rc_harness& h) {
        h.as(0).privileged = true;
        h.as(1).privileged = true;
        ibv_cq* cq1 = ibv_create_cq(h.s[1].ctx, 16);
        ibv_cq* cq0 = ibv_create_cq(h.s[0].ctx, 16);
        ibv_qp* qp0_1 = create_special(h, 1, IBV_QPT_SMI, cq1);
        ibv_qp* qp0_0 = create_special(h, 0, IBV_QPT_SMI, cq0);
        ASSERT_NE(qp0_1, nullptr);
        ASSERT_NE(qp0_0, nullptr);
        ASSERT_EQ(ud_to_rts(qp0_1, 0), 0);
        ASSERT_EQ(ud_to_rts(qp0_0, 0), 0);
        const uint64_t rva = h.alloc(1, 4096, 4096);
        ibv_mr* rmr = h.reg(1, rva, 4096);
        ASSERT_EQ(post_recv_on(qp0_1, rva, 1024, rmr->lkey, 71), 0);
        ASSERT_EQ(post_recv_on(qp0_1, rva + 1024, 1024, rmr->lkey, 72), 0);

        // The SM reads and writes node1's P_Key table through QP0 while a consumer owns QP0.
        std::array<uint16_t, wire::PKEYS_PER_BLOCK> keys{};
        ASSERT_TRUE(sm(h).get_pkey_block(1, 0, keys));
        EXPECT_EQ(keys[0], 0xFFFF);
        ASSERT_TRUE(sm(h).set_pkey(1, 5, 0x8005));
        EXPECT_EQ(query_pkey(h, 1, 5), 0x8005);
        EXPECT_EQ(ctr(1, "sma.smps_received"), 2u);
        EXPECT_EQ(ctr(1, "sma.get_responses"), 2u);
        h.expect_no_wc(cq1, kQuietNs, "SMPs complete no consumer WQE");

        // A datagram to QP0 that is no SubnMgmt MAD is the consumer's: it takes the first
        // receive WQE, still there.
        const uint64_t sva = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sva, 4096);
        std::vector<uint8_t> msg(256, 0);
        msg[0] = 1;
        msg[1] = 0x04;  // performance management class: not SubnMgmt
        h.write_mem(0, sva, msg);
        ibv_ah* ah = ah_sl(h, 0, 1, 0);
        ASSERT_EQ(post_ud_on(qp0_0, ah, 0, 0, sva, 256, smr->lkey, 9), 0);
        const auto swc = h.expect_wc(cq0, 1, "QP0 send");
        ASSERT_EQ(swc.size(), 1u);
        EXPECT_EQ(swc[0].status, IBV_WC_SUCCESS);
        const auto wc = h.expect_wc(cq1, 1, "the consumer's QP0 receive");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 71u) << "the SMPs took no receive WQE";
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].qp_num, 0u);
        EXPECT_EQ(wc[0].src_qp, 0u);
        EXPECT_EQ(wc[0].slid, h.s[0].lid);
        EXPECT_EQ(wc[0].byte_len, 40u + 256u);
        h.expect_mem(1, rva + 40, msg, "datagram payload");
        EXPECT_EQ(ctr(1, "sma.smps_received"), 2u) << "that datagram did not reach the SMA";
        EXPECT_EQ(ibv_destroy_qp(qp0_0), 0);
        EXPECT_EQ(ibv_destroy_qp(qp0_1), 0);
    });
}

SIM_TEST(E2eSpecialQp, C10_133_qp1_sends_carry_its_pkey_and_the_cqe_reports_the_matched_index) {
    rc_harness h(switched());
    h.run([](rc_harness& h) {
        // node0: entry 2 = 0x8005. node1: entry 3 = 0x8006, entry 7 = 0x8005.
        ASSERT_TRUE(sm(h).set_pkey(0, 2, 0x8005));
        ASSERT_TRUE(sm(h).set_pkey(1, 3, 0x8006));
        ASSERT_TRUE(sm(h).set_pkey(1, 7, 0x8005));
        h.as(0).privileged = true;
        h.as(1).privileged = true;
        ibv_cq* cq0 = ibv_create_cq(h.s[0].ctx, 16);
        ibv_cq* cq1 = ibv_create_cq(h.s[1].ctx, 16);
        ibv_qp* gsi0 = create_special(h, 0, IBV_QPT_GSI, cq0);
        ibv_qp* gsi1 = create_special(h, 1, IBV_QPT_GSI, cq1);
        ASSERT_NE(gsi0, nullptr);
        ASSERT_NE(gsi1, nullptr);
        ASSERT_EQ(ud_to_rts(gsi0, 0), 0);
        ASSERT_EQ(ud_to_rts(gsi1, 0), 0);
        const uint64_t rva = h.alloc(1, 4096, 4096), sva = h.alloc(0, 4096, 4096);
        ibv_mr* rmr = h.reg(1, rva, 4096);
        ibv_mr* smr = h.reg(0, sva, 4096);
        for (uint64_t k = 0; k < 3; ++k)
            ASSERT_EQ(post_recv_on(gsi1, rva + 1024 * k, 1024, rmr->lkey, 100 + k), 0);
        ibv_ah* ah = ah_sl(h, 0, 1, 0);

        // QP1 at index 0 sends 0xFFFF: node1 matches entry 0.
        ASSERT_EQ(post_ud_on(gsi0, ah, 1, kQp1Qkey, sva, 64, smr->lkey, 1), 0);
        auto wc = h.expect_wc(cq1, 1, "QP1 datagram, P_Key 0xFFFF");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].src_qp, 1u);
        EXPECT_EQ(wc[0].pkey_index, 0u);
        // QP1 at index 2 sends 0x8005: node1 matches entry 7 (not 0, not 3).
        ASSERT_EQ(ud_to_rts(gsi0, 2), 0);
        ASSERT_EQ(post_ud_on(gsi0, ah, 1, kQp1Qkey, sva, 64, smr->lkey, 2), 0);
        wc = h.expect_wc(cq1, 1, "QP1 datagram, P_Key 0x8005");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(wc[0].pkey_index, 7u) << "the entry the P_Key checker matched";
        EXPECT_EQ(wc[0].wr_id, 101u);
        h.expect_wc(cq0, 2, "both sends complete");
        // QP1 takes only its Q_Key 0x80010000.
        const uint64_t qv = ctr(1, "transport_engine.qkey_violations");
        ASSERT_EQ(post_ud_on(gsi0, ah, 1, 0x11111111, sva, 64, smr->lkey, 3), 0);
        h.expect_no_wc(cq1, kQuietNs, "wrong Q_Key to QP1");
        EXPECT_EQ(ctr(1, "transport_engine.qkey_violations"), qv + 1);
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 0u);
    });
}

// ------------------------------------------------------------------ P_Key table through the SM

SIM_TEST(E2ePartitionSm, C10_128_subnset_pkey_table_is_answered_with_a_getresp) {
    rc_harness h(switched());
    h.run([](rc_harness& h) {
        subnet_manager& m = sm(h);
        const uint16_t sm_lid = m.lid(), lid1 = h.s[1].lid;
        EXPECT_EQ(sm_lid, 3);
        EXPECT_EQ(port_of(h, 1).sm_lid, sm_lid) << "QUERY_PORT reports the master SM";
        ASSERT_TRUE(m.set_pkey(1, 33, 0x8123));  // block 1, entry 1
        EXPECT_EQ(query_pkey(h, 1, 33), 0x8123);
        EXPECT_EQ(ctr(1, "sma.pkey_table_sets"), 1u);
        ASSERT_EQ(m.sent().size(), 2u) << "SubnGet of block 1, then SubnSet";
        ASSERT_EQ(m.responses_received().size(), 2u);
        // The SubnSet on the wire.
        const decoded set = decode(m.sent()[1]);
        expect_smp_shape(set, lid1, sm_lid, "SubnSet");
        EXPECT_EQ(set.mad.h.method, wire::MAD_METHOD_SET);
        EXPECT_EQ(set.mad.h.attr_id, 0x0016);
        EXPECT_EQ(set.mad.h.attr_mod, 1u);
        uint16_t keys[wire::PKEYS_PER_BLOCK];
        wire::decode_pkey_block(set.mad.data.data(), keys);
        EXPECT_EQ(keys[1], 0x8123);
        // Its GetResp.
        const decoded resp = decode(m.responses_received()[1].bytes);
        expect_smp_shape(resp, sm_lid, lid1, "GetResp");
        EXPECT_EQ(resp.mad.h.method, wire::MAD_METHOD_GET_RESP);
        EXPECT_EQ(resp.mad.h.status, 0);
        EXPECT_EQ(resp.mad.h.tid, set.mad.h.tid);
        EXPECT_EQ(resp.mad.h.attr_id, 0x0016);
        EXPECT_EQ(resp.mad.h.attr_mod, 1u);
        wire::decode_pkey_block(resp.mad.data.data(), keys);
        EXPECT_EQ(keys[1], 0x8123);
        for (unsigned i = 0; i < wire::PKEYS_PER_BLOCK; ++i) {
            if (i != 1) {
                EXPECT_EQ(keys[i], 0) << "entry " << 32 + i;
            }
        }

        // Failure is answered too: block 4 of a 128-entry table, and an attribute the SMA lacks.
        const std::vector<uint16_t> before = [&] {
            std::vector<uint16_t> t(128);
            for (int i = 0; i < 128; ++i) t[size_t(i)] = query_pkey(h, 1, i);
            return t;
        }();
        wire::smp bad;
        bad.h.method = wire::MAD_METHOD_SET;
        bad.h.attr_id = wire::SMP_ATTR_PKEY_TABLE;
        bad.h.attr_mod = 4;
        bad.data.fill(0x80);
        wire::smp r;
        EXPECT_EQ(m.transact(1, bad, &r), wire::MAD_STATUS_INVALID_FIELD);
        EXPECT_EQ(r.h.method, wire::MAD_METHOD_GET_RESP);
        wire::smp port_info;
        port_info.h.method = wire::MAD_METHOD_GET;
        port_info.h.attr_id = 0x0015;
        EXPECT_EQ(m.transact(1, port_info, &r), wire::MAD_STATUS_UNSUPPORTED_ATTRIBUTE);
        for (int i = 0; i < 128; ++i) EXPECT_EQ(query_pkey(h, 1, i), before[size_t(i)]) << "entry " << i;
        EXPECT_EQ(ctr(1, "sma.pkey_table_sets"), 1u);
        EXPECT_EQ(ctr(1, "sma.get_responses"), 4u);
        EXPECT_EQ(m.timeouts.value(), 0u);
    });
}

SIM_TEST(E2ePartitionSm, C10_129_pkey_table_set_by_the_sm_governs_every_later_packet) {
    rc_harness h(switched());
    h.run([](rc_harness& h) {
        const uint64_t rva = h.alloc(1, 8192, 4096), sva = h.alloc(0, 4096, 4096);
        ibv_mr* rmr = h.reg(1, rva, 8192);
        ibv_mr* smr = h.reg(0, sva, 4096);
        for (uint64_t k = 0; k < 4; ++k)
            ASSERT_EQ(h.post_recv(1, {{rva + 1024 * k, 1024, rmr->lkey}}, 10 + k), 0);
        ibv_ah* ah = h.ah_to_peer(0);
        ASSERT_EQ(h.post_ud(0, ah, {{sva, 64, smr->lkey}}, 1), 0);
        EXPECT_EQ(h.expect_wc(h.s[1].rcq, 1, "0xFFFF against entry 0 = 0xFFFF").size(), 1u);
        // node1's QP is bound to entry 0: the SM makes it 0x8001.
        ASSERT_TRUE(sm(h).set_pkey(1, 0, 0x8001));
        ASSERT_EQ(h.post_ud(0, ah, {{sva, 64, smr->lkey}}, 2), 0);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "0xFFFF against 0x8001");
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 1u);
        EXPECT_EQ(ctr(1, "pkey_checker.violations"), 1u);
        ASSERT_TRUE(sm(h).set_pkey(1, 0, 0xFFFF));
        ASSERT_EQ(h.post_ud(0, ah, {{sva, 64, smr->lkey}}, 3), 0);
        const auto wc = h.expect_wc(h.s[1].rcq, 1, "0xFFFF against 0xFFFF again");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].wr_id, 11u) << "the dropped datagram took no receive WQE";
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 1u);
        h.expect_wc(h.s[0].scq, 3, "sends");
    });
}

// ------------------------------------------------------------------ traps

SIM_TEST(E2eTrap, o10_55_1_1_pkey_violation_sends_a_bad_pkey_trap_with_the_packets_headers_to_the_sm) {
    rc_harness h(switched());
    h.run([](rc_harness& h) {
        subnet_manager& m = sm(h);
        ASSERT_TRUE(m.set_pkey(1, 0, 0x8001));
        EXPECT_TRUE(m.traps_received().empty());
        const uint64_t sva = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sva, 4096);
        ibv_ah* ah = ah_sl(h, 0, 1, 5, true);
        ASSERT_EQ(h.post_ud(0, ah, {{sva, 64, smr->lkey}}, 1), 0);
        h.sleep(0, kQuietNs);
        ASSERT_EQ(m.traps_received().size(), 1u);
        EXPECT_EQ(ctr(1, "sma.traps_sent"), 1u);
        EXPECT_EQ(m.traps.value(), 1u);
        const auto& t = m.traps_received()[0];
        const decoded d = decode(t.bytes);
        expect_smp_shape(d, m.lid(), h.s[1].lid, "Trap");
        EXPECT_EQ(d.mad.h.method, wire::MAD_METHOD_TRAP);
        EXPECT_EQ(d.mad.h.status, 0);
        EXPECT_EQ(d.mad.h.attr_id, wire::SMP_ATTR_NOTICE);
        EXPECT_EQ(d.mad.h.attr_mod, 0u);
        EXPECT_EQ(d.mad.data[0], 0x82) << "generic, security";
        EXPECT_EQ(d.mad.data[4], 0x01);
        EXPECT_EQ(d.mad.data[5], 0x01) << "trap 257";
        wire::notice_bad_pkey n;
        ASSERT_TRUE(wire::decode_notice_bad_pkey(d.mad.data.data(), n));
        EXPECT_EQ(n.issuer_lid, h.s[1].lid);
        EXPECT_EQ(n.lid1, h.s[0].lid) << "SLID";
        EXPECT_EQ(n.lid2, h.s[1].lid) << "DLID";
        EXPECT_EQ(n.pkey, 0xFFFF);
        EXPECT_EQ(n.sl, 5);
        EXPECT_EQ(n.qp1, h.s[0].qp->qp_num) << "source QP (DETH)";
        EXPECT_EQ(n.qp2, h.s[1].qp->qp_num) << "destination QP (BTH)";
        const ibv_gid g0 = rc_harness::gid_of(0), g1 = rc_harness::gid_of(1);
        for (int i = 0; i < 16; ++i) {
            EXPECT_EQ(n.gid1[i], g0.raw[i]) << "SGID byte " << i;
            EXPECT_EQ(n.gid2[i], g1.raw[i]) << "DGID byte " << i;
        }
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 1u);
    });
}

SIM_TEST(E2eTrap, o10_55_1_1_o10_56_traps_are_rate_limited_and_a_newer_mismatch_replaces_the_pending_data) {
    rc_config c = switched();
    c.keys.push_back({"hca.sma.subnet_timeout", "8"});  // 4.096 us x 2^8 = 1048.576 us
    rc_harness h(c);
    h.run([](rc_harness& h) {
        subnet_manager& m = sm(h);
        EXPECT_EQ(h.mach().at(1).adapter.agent.trap_interval(), sc_core::sc_time(1048.576, sc_core::SC_US));
        ASSERT_TRUE(m.set_pkey(1, 0, 0x8001));
        const uint64_t sva = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sva, 4096);
        ibv_ah* ah[3] = {ah_sl(h, 0, 1, 1), ah_sl(h, 0, 1, 2), ah_sl(h, 0, 1, 3)};
        for (unsigned k = 0; k < 3; ++k) {
            ASSERT_EQ(h.post_ud(0, ah[k], {{sva, 64, smr->lkey}}, k), 0);
            h.sleep(0, 2'000);  // three violations within the first interval
        }
        h.sleep(0, 4'000'000);  // more than 3 intervals
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 3u);
        ASSERT_EQ(m.traps_received().size(), 2u) << "one trap now, the pending one an interval later";
        EXPECT_EQ(ctr(1, "sma.traps_sent"), 2u);
        EXPECT_EQ(ctr(1, "sma.traps_replaced"), 1u) << "the third violation replaced the second's data";
        const auto& t1 = m.traps_received()[0];
        const auto& t2 = m.traps_received()[1];
        EXPECT_EQ(t1.notice.sl, 1) << "the first violation";
        EXPECT_EQ(t2.notice.sl, 3) << "o10-56: the newest violation's data";
        EXPECT_EQ(t2.at - t1.at, sc_core::sc_time(1048.576, sc_core::SC_US)) << "exactly one interval apart";
        EXPECT_EQ(t1.notice.toggle_count, 0);
        EXPECT_EQ(t2.notice.toggle_count, 0x8000) << "NoticeToggle alternates";
        EXPECT_NE(t1.mad.h.tid, t2.mad.h.tid);
    });
}

SIM_TEST(E2eTrap, o10_55_1_1_multicast_limited_limited_mismatch_sends_no_trap) {
    rc_config c = switched();
    c.keys.push_back({"hca.sma.subnet_timeout", "0"});  // 4.096 us: no trap waits for the limit here
    rc_harness h(c);
    h.run([](rc_harness& h) {
        subnet_manager& m = sm(h);
        // Both nodes: entry 1 = 0x0005, a limited member of partition 5; the QPs use entry 1.
        ASSERT_TRUE(m.set_pkey(0, 1, 0x0005));
        ASSERT_TRUE(m.set_pkey(1, 1, 0x0005));
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect(0, IBV_QPS_RTS, 1), 0);
        ASSERT_EQ(h.connect(1, IBV_QPS_RTS, 1), 0);
        ibv_gid g{};
        g.raw[0] = 0xFF;
        g.raw[1] = 0x12;
        g.raw[15] = 1;
        ASSERT_EQ(ibv_attach_mcast(h.s[1].qp, &g, 0xC001), 0);
        const uint64_t rva = h.alloc(1, 8192, 4096), sva = h.alloc(0, 4096, 4096);
        ibv_mr* rmr = h.reg(1, rva, 8192);
        ibv_mr* smr = h.reg(0, sva, 4096);
        for (uint64_t k = 0; k < 2; ++k)
            ASSERT_EQ(h.post_recv(1, {{rva + 1024 * k, 1024, rmr->lkey}}, 10 + k), 0);
        ibv_ah_attr ga{};
        ga.dlid = 0xC001;
        ga.port_num = 1;
        ga.is_global = 1;
        ga.grh.dgid = g;
        ga.grh.hop_limit = 1;
        ibv_ah* group = ibv_create_ah(h.s[0].pd, &ga);
        ASSERT_NE(group, nullptr);

        // Multicast, 0x0005 against 0x0005: a mismatch (both limited), counted, no trap.
        ASSERT_EQ(h.post_ud(0, group, {{sva, 64, smr->lkey}}, 1, IBV_SEND_SIGNALED, 0xFFFFFF), 0);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "limited to limited multicast");
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 1u);
        EXPECT_EQ(ctr(1, "sma.traps_suppressed"), 1u);
        EXPECT_EQ(ctr(1, "sma.traps_sent"), 0u);
        EXPECT_TRUE(m.traps_received().empty());
        // The same mismatch unicast is trapped: the suppression is for multicast only.
        ASSERT_EQ(h.post_ud(0, h.ah_to_peer(0), {{sva, 64, smr->lkey}}, 2), 0);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "limited to limited unicast");
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 2u);
        ASSERT_EQ(m.traps_received().size(), 1u);
        EXPECT_EQ(m.traps_received()[0].notice.pkey, 0x0005);
        EXPECT_EQ(m.traps_received()[0].notice.lid2, h.s[1].lid);
        // Multicast from a full member of another partition mismatches and is trapped.
        ASSERT_TRUE(m.set_pkey(0, 1, 0x8006));
        ASSERT_EQ(h.post_ud(0, group, {{sva, 64, smr->lkey}}, 3, IBV_SEND_SIGNALED, 0xFFFFFF), 0);
        h.expect_no_wc(h.s[1].rcq, kQuietNs, "0x8006 to a 0x0005 member");
        ASSERT_EQ(m.traps_received().size(), 2u);
        EXPECT_EQ(m.traps_received()[1].notice.pkey, 0x8006);
        EXPECT_EQ(m.traps_received()[1].notice.lid2, 0xC001) << "the multicast DLID";
        EXPECT_EQ(m.traps_received()[1].notice.qp2, 0xFFFFFFu);
        EXPECT_EQ(ctr(1, "sma.traps_suppressed"), 1u);
    });
}

// IBA ch. 7: every port that transmits, CA ports too, has an SL-to-VL table and VL arbitration
// tables, which the SM sets with SMPs. The HCA's agent applies SubnSet(SLtoVLMappingTable) and
// SubnSet(VLArbitrationTable) to its port (the arbiter takes the new table) and answers each
// with the table as it now is; a VL the link lacks, or a block other than 1..4, is refused
// (InvalidField) and changes nothing.
SIM_TEST(E2eSmVlTables, subnset_of_the_sl2vl_and_vlarb_tables_programs_the_hca_port) {
    rc_config c = switched();
    c.keys.push_back({"link.data_vls", "2"});
    c.keys.push_back({"fabric.switch.data_vls", "2"});
    rc_harness h(c);
    h.run([](rc_harness& h) {
        subnet_manager& m = sm(h);
        port& p = h.mach().at(1).adapter.port0;
        EXPECT_EQ(p.sl2vl_table()[1], 1) << "link-up table: SL mod 2";
        wire::smp req, r;
        req.h.method = wire::MAD_METHOD_SET;
        req.h.attr_id = wire::SMP_ATTR_SL2VL_TABLE;
        const std::array<uint8_t, 16> want = {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15};
        wire::encode_sl2vl(want.data(), req.data.data());
        EXPECT_EQ(m.transact(1, req, &r), wire::MAD_STATUS_OK);
        EXPECT_EQ(p.sl2vl_table(), want);
        std::array<uint8_t, 16> got{};
        wire::decode_sl2vl(r.data.data(), got.data());
        EXPECT_EQ(got, want) << "the GetResp carries the table";
        std::array<uint8_t, 16> bad = want;
        bad[3] = 2;  // VL 2 on a link of two data VLs
        wire::encode_sl2vl(bad.data(), req.data.data());
        EXPECT_EQ(m.transact(1, req, &r), wire::MAD_STATUS_INVALID_FIELD);
        EXPECT_EQ(p.sl2vl_table(), want);

        req.h.attr_id = wire::SMP_ATTR_VLARB_TABLE;
        req.h.attr_mod = 1u << 16 | 1;  // the low table's entries 0-31, port 1
        wire::vlarb_pair low[wire::VLARB_ENTRIES_PER_BLOCK] = {{0, 64}, {1, 192}};
        req.data.fill(0);
        wire::encode_vlarb_block(low, req.data.data());
        EXPECT_EQ(m.transact(1, req, &r), wire::MAD_STATUS_OK);
        const std::vector<vlarb_entry>& t = p.arbiter().low_table();
        ASSERT_EQ(t.size(), 2u);
        EXPECT_EQ(t[0].vl, 0u);
        EXPECT_EQ(t[0].weight, 64u);
        EXPECT_EQ(t[1].vl, 1u);
        EXPECT_EQ(t[1].weight, 192u);
        EXPECT_TRUE(p.arbiter().high_table().empty());
        req.h.attr_mod = 5u << 16 | 1;
        EXPECT_EQ(m.transact(1, req, &r), wire::MAD_STATUS_INVALID_FIELD);
        req.h.method = wire::MAD_METHOD_GET;
        req.h.attr_mod = 1u << 16;
        EXPECT_EQ(m.transact(1, req, &r), wire::MAD_STATUS_OK);
        wire::vlarb_pair back[wire::VLARB_ENTRIES_PER_BLOCK];
        wire::decode_vlarb_block(r.data.data(), back);
        EXPECT_EQ(back[1].vl, 1);
        EXPECT_EQ(back[1].weight, 192);
        EXPECT_EQ(ctr(1, "sma.get_responses"), 5u);
        EXPECT_EQ(m.timeouts.value(), 0u);
    });
}
