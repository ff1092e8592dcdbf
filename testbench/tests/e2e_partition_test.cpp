// IBA Vol. 1 10.2.2.1 (the GID table) and 10.9 (partitions: P_Key table length, the rules of
// the management QPs, the P_Key violation counter, no verb writing the table) on the real
// model: two nodes back to back, one RC QP each (bench_harness.h). Packets to QP0 and QP1 of
// node1 come from node0's RC QP aimed at those QPNs: nothing on node1 owns them, so a packet
// the P_Key checker passes ends in the transport engine's `dropped_bad_qp`, one it refuses in
// `pkey_checker.violations`. Each test names the statement IDs it asserts
// (docs/compliance-status.tsv, scripts/compliance.py).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/core/param.h"
#include "model/hca/pkey_checker.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/commands.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

hw::cmd_status exec(rc_harness& h, unsigned node, uint16_t opcode, uint32_t in_mod, uint32_t op_mod,
                    const void* in = nullptr, size_t in_len = 0, void* out = nullptr, size_t out_len = 0) {
    return h.s[node].sw->driver.exec(opcode, in_mod, op_mod, in, in_len, out, out_len);
}

std::string hex(const uint8_t* p, size_t n) {
    std::string s;
    char b[4];
    for (size_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", p[i]);
        s += b;
    }
    return s;
}

/// GID `index` of node `node`'s port 1 through ibv_query_gid, as hex ("" on failure).
std::string gid_of(rc_harness& h, unsigned node, int index) {
    ibv_gid g{};
    const int rc = ibv_query_gid(h.s[node].ctx, 1, index, &g);
    EXPECT_EQ(rc, 0) << "ibv_query_gid(node" << node << ", " << index << ")";
    return rc ? std::string() : hex(g.raw, sizeof g.raw);
}

/// Every entry of node `node`'s P_Key table through ibv_query_pkey.
std::vector<uint16_t> pkey_table(rc_harness& h, unsigned node) {
    const unsigned len = port_of(h, node).pkey_tbl_len;
    std::vector<uint16_t> t(len);
    for (unsigned i = 0; i < len; ++i) EXPECT_EQ(ibv_query_pkey(h.s[node].ctx, 1, int(i), &t[i]), 0) << i;
    return t;
}

/// Node i's QP: Reset, then Init at `pkey_index`, RTR and RTS towards QPN `dest_qpn` of the other
/// node (the harness's attributes otherwise).
int aim(rc_harness& h, unsigned i, uint32_t dest_qpn, uint16_t pkey_index) {
    rc_side& d = h.s[i];
    if (int rc = to_state(d.qp, IBV_QPS_RESET)) return rc;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = pkey_index;
    a.port_num = 1;
    a.qp_access_flags = h.config().qp_access;
    if (int rc =
            ibv_modify_qp(d.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return rc;
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = ibv_mtu(__builtin_ctz(h.config().mtu) - 7);
    a.dest_qp_num = dest_qpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = h.s[1 - i].lid;
    a.ah_attr.port_num = 1;
    if (int rc = ibv_modify_qp(d.qp, &a,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return rc;
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = d.psn;
    a.timeout = 0;  // no local ACK timeout: every packet is sent once
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return ibv_modify_qp(d.qp, &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC);
}

/// What node1 did with one packet node0 sent.
struct fate {
    uint64_t violations = 0;  ///< pkey_checker.violations added
    uint64_t passed = 0;      ///< reached the transport engine and dropped there (no such QP)
};

/// node0's QP, at `pkey_index` of node0's table, sends one 64-byte SEND to QPN `dest_qpn` of node1.
fate send_one(rc_harness& h, uint32_t dest_qpn, uint16_t pkey_index) {
    fate f;
    const uint64_t viol = ctr(1, "pkey_checker.violations");
    const uint64_t bad_qp = ctr(1, "transport_engine.dropped_bad_qp");
    const uint64_t checked = ctr(1, "pkey_checker.checked");
    EXPECT_EQ(aim(h, 0, dest_qpn, pkey_index), 0);
    const uint64_t src = h.alloc(0, 64);
    ibv_mr* mr = h.reg(0, src, 64);
    EXPECT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 64, mr->lkey}}, 1), 0);
    h.sleep(0, kQuietNs);
    EXPECT_EQ(ctr(1, "pkey_checker.checked"), checked + 1) << "one packet reached node1";
    f.violations = ctr(1, "pkey_checker.violations") - viol;
    f.passed = ctr(1, "transport_engine.dropped_bad_qp") - bad_qp;
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    return f;
}

/// The opcodes of tlm_if/commands.h. A new command must be added here (C10-2 checks that no
/// other opcode does anything).
const std::set<uint16_t> kKnownOpcodes = {
    hw::CMD_QUERY_HCA,   hw::CMD_INIT_HCA,   hw::CMD_QUERY_PORT,   hw::CMD_SET_PKEY,     hw::CMD_QUERY_PKEY,
    hw::CMD_QUERY_GID,   hw::CMD_CREATE_EQ,  hw::CMD_CREATE_CQ,    hw::CMD_DESTROY_CQ,   hw::CMD_CREATE_MPT,
    hw::CMD_DESTROY_MPT, hw::CMD_WRITE_MTT,  hw::CMD_QUERY_MPT,    hw::CMD_CREATE_QP,    hw::CMD_MODIFY_QP,
    hw::CMD_QUERY_QP,    hw::CMD_DESTROY_QP, hw::CMD_ATTACH_MCAST, hw::CMD_DETACH_MCAST, hw::CMD_CREATE_SRQ,
    hw::CMD_MODIFY_SRQ,  hw::CMD_QUERY_SRQ,  hw::CMD_DESTROY_SRQ,  hw::CMD_RESIZE_CQ,    hw::CMD_QUERY_CQ,
    hw::CMD_CREATE_EEC,  hw::CMD_MODIFY_EEC, hw::CMD_QUERY_EEC,    hw::CMD_DESTROY_EEC,
};

}  // namespace

// ------------------------------------------------------------------ 10.2.2.1 GID table

SIM_TEST(E2ePartition, C10_1_query_gid_returns_the_port_gid) {
    rc_harness h;
    h.run([](rc_harness& h) {
        for (unsigned n = 0; n < 2; ++n) {
            ibv_device_attr da{};
            ASSERT_EQ(ibv_query_device(h.s[n].ctx, &da), 0);
            EXPECT_EQ(da.node_guid, 0x0002c90300000000ull + n + 1);
            const ibv_port_attr pa = port_of(h, n);
            ASSERT_EQ(pa.gid_tbl_len, 1) << "one source GID per port";
            // GID 0: link-local prefix fe80::/64, interface ID = the port GUID (= node GUID).
            const uint8_t want[16] = {0xfe, 0x80, 0,    0,    0, 0, 0, 0,
                                      0x00, 0x02, 0xc9, 0x03, 0, 0, 0, uint8_t(n + 1)};
            EXPECT_EQ(gid_of(h, n, 0), hex(want, sizeof want)) << "node" << n;
            // The table has gid_tbl_len entries, on port 1 only.
            ibv_gid g{};
            EXPECT_EQ(ibv_query_gid(h.s[n].ctx, 1, pa.gid_tbl_len, &g), EINVAL);
            EXPECT_EQ(ibv_query_gid(h.s[n].ctx, 1, -1, &g), EINVAL);
            EXPECT_EQ(ibv_query_gid(h.s[n].ctx, 2, 0, &g), EINVAL);
            EXPECT_EQ(ibv_query_gid(h.s[n].ctx, 1, 0, nullptr), EINVAL);
            // The HCA bounds the command the same way.
            hw::gid_entry e{};
            EXPECT_EQ(exec(h, n, hw::CMD_QUERY_GID, 1, pa.gid_tbl_len, nullptr, 0, &e, sizeof e),
                      hw::CMD_BAD_PARAM);
            EXPECT_EQ(exec(h, n, hw::CMD_QUERY_GID, 2, 0, nullptr, 0, &e, sizeof e), hw::CMD_BAD_PARAM);
            ASSERT_EQ(exec(h, n, hw::CMD_QUERY_GID, 1, 0, nullptr, 0, &e, sizeof e), hw::CMD_OK);
            EXPECT_EQ(hex(e.raw, sizeof e.raw), hex(want, sizeof want));
        }
        EXPECT_NE(gid_of(h, 0, 0), gid_of(h, 1, 0));
    });
}

SIM_TEST(E2ePartition, C10_2_gid_index_0_has_no_write_verb_and_stays) {
    rc_harness h;
    h.run([](rc_harness& h) {
        const std::string gid0 = gid_of(h, 1, 0);
        ASSERT_EQ(gid0.size(), 32u);
        // The verbs only read GIDs (ibv_query_gid; FwCompliance.C10_2_C10_122_... checks the
        // commands every verb issues). Below the verbs, no command writes one: every opcode the
        // interface does not define is refused, whatever it carries.
        hw::gid_entry other{};
        for (uint8_t& b : other.raw) b = 0x11;
        unsigned refused = 0;
        for (unsigned op = 0; op <= 0xFF; ++op) {
            if (kKnownOpcodes.count(uint16_t(op))) continue;
            for (uint32_t op_mod : {0u, 1u}) {
                EXPECT_EQ(exec(h, 1, uint16_t(op), 1, op_mod, &other, sizeof other), hw::CMD_BAD_OPCODE)
                    << "opcode 0x" << std::hex << op;
                ++refused;
            }
        }
        EXPECT_EQ(refused, 2u * (256u - kKnownOpcodes.size()));
        EXPECT_EQ(gid_of(h, 1, 0), gid0);
        // The commands that change port and QP state leave it alone: P_Key table writes, QP
        // rebinding, traffic.
        ASSERT_EQ(set_pkey(h, 1, 0, 0x8001), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 1, 0, 0xFFFF), hw::CMD_OK);
        ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect(1, IBV_QPS_RTS), 0);
        const uint64_t src = h.alloc(0, 64), dst = h.alloc(1, 64);
        ibv_mr* smr = h.reg(0, src, 64);
        ibv_mr* dmr = h.reg(1, dst, 64);
        ASSERT_EQ(h.post_recv(1, {{dst, 64, dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 64, smr->lkey}}, 2), 0);
        EXPECT_EQ(h.expect_wc(h.s[1].rcq, 1, "send after the sweep").size(), 1u);
        EXPECT_EQ(gid_of(h, 1, 0), gid0);
        EXPECT_EQ(gid_of(h, 0, 0).size(), 32u);
    });
}

// ------------------------------------------------------------------ 10.9.2 P_Key table

namespace {

void table_length_case(unsigned len) {
    rc_config cfg;
    cfg.keys = {{"hca.pkey_checker.table_len", std::to_string(len)}};
    rc_harness h(cfg);
    h.run([len](rc_harness& h) {
        for (unsigned n = 0; n < 2; ++n) {
            ibv_context* ctx = h.s[n].ctx;
            EXPECT_EQ(port_of(h, n).pkey_tbl_len, len);
            ibv_device_attr da{};
            ASSERT_EQ(ibv_query_device(ctx, &da), 0);
            EXPECT_EQ(da.max_pkeys, len);
            uint16_t k = 0;
            ASSERT_EQ(ibv_query_pkey(ctx, 1, 0, &k), 0);
            EXPECT_EQ(k, 0xFFFF) << "default partition (C10-123)";
            ASSERT_EQ(ibv_query_pkey(ctx, 1, int(len - 1), &k), 0);
            EXPECT_EQ(k, len == 1 ? 0xFFFF : 0) << "last entry";
            EXPECT_EQ(ibv_query_pkey(ctx, 1, int(len), &k), EINVAL);
            EXPECT_EQ(ibv_query_pkey(ctx, 1, -1, &k), EINVAL);
            EXPECT_EQ(ibv_query_pkey(ctx, 2, 0, &k), EINVAL);
            EXPECT_EQ(exec(h, n, hw::CMD_QUERY_PKEY, 1, len, nullptr, 0, &k, sizeof k), hw::CMD_BAD_PARAM);
            EXPECT_EQ(set_pkey(h, n, len, 0x8077), hw::CMD_BAD_PARAM);
        }
        const uint64_t src = h.alloc(0, 64), dst = h.alloc(1, 64);
        ibv_mr* smr = h.reg(0, src, 64);
        ibv_mr* dmr = h.reg(1, dst, 64);
        if (len == 1) {
            EXPECT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
            EXPECT_EQ(h.connect(1, IBV_QPS_INIT, 1), EINVAL) << "index 1 is past a one-entry table";
            ASSERT_EQ(to_state(h.s[1].qp, IBV_QPS_RESET), 0);
            ASSERT_EQ(h.connect(1, IBV_QPS_RTS, 0), 0);
        } else {
            // Both QPs on the last entry: the packets carry and are checked against it.
            const uint16_t last = uint16_t(len - 1);
            for (unsigned n = 0; n < 2; ++n) {
                ASSERT_EQ(set_pkey(h, n, last, 0x8077), hw::CMD_OK);
                uint16_t k = 0;
                ASSERT_EQ(ibv_query_pkey(h.s[n].ctx, 1, last, &k), 0);
                EXPECT_EQ(k, 0x8077);
                ASSERT_EQ(to_state(h.s[n].qp, IBV_QPS_RESET), 0);
            }
            ASSERT_EQ(h.connect(1, IBV_QPS_RTS, last), 0);
            ASSERT_EQ(h.connect(0, IBV_QPS_RTS, last), 0);
        }
        ASSERT_EQ(h.post_recv(1, {{dst, 64, dmr->lkey}}, 1), 0);
        ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 64, smr->lkey}}, 2), 0);
        auto rwc = h.expect_wc(h.s[1].rcq, 1, "message on the last table entry");
        ASSERT_EQ(rwc.size(), 1u);
        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS);
        EXPECT_EQ(ctr(1, "pkey_checker.violations"), 0u);
        if (len > 1) {
            // node1's last entry changed: node0's next packet no longer matches.
            ASSERT_EQ(set_pkey(h, 1, len - 1, 0x8078), hw::CMD_OK);
            ASSERT_EQ(h.post_send(0, IBV_WR_SEND, {{src, 64, smr->lkey}}, 3), 0);
            h.sleep(0, kQuietNs);
            EXPECT_EQ(ctr(1, "pkey_checker.violations"), 1u);
        }
    });
}

}  // namespace

class PkeyTableLen : public ::testing::TestWithParam<unsigned> {};

TEST_P(PkeyTableLen, C10_121_pkey_table_length_up_to_65535) {
    const unsigned len = GetParam();
    run_forked([len] { table_length_case(len); });
}

INSTANTIATE_TEST_SUITE_P(E2ePartition, PkeyTableLen, ::testing::Values(1u, 2u, 128u, 65535u),
                         [](const ::testing::TestParamInfo<unsigned>& i) { return std::to_string(i.param); });

SIM_TEST(E2ePartition, C10_121_pkey_table_length_65536_is_refused) {
    const std::string e = config_error_of({{"hca.pkey_checker.table_len", "65536"}});
    EXPECT_NE(e.find("'65536'"), std::string::npos) << e;
    EXPECT_NE(e.find("'node0.hca.pkey_checker.table_len'"), std::string::npos) << e;
}

SIM_TEST(E2ePartition, C10_121_pkey_table_length_0_is_refused) {
    const std::string e = config_error_of({{"hca.pkey_checker.table_len", "0"}});
    EXPECT_NE(e.find("'node0.hca.pkey_checker.table_len'"), std::string::npos) << e;
}

SIM_TEST(E2ePartition, C10_122_no_verb_changes_the_pkey_table) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // The management path fills two entries; the verbs read exactly what the HCA holds.
        ASSERT_EQ(set_pkey(h, 1, 3, 0x8033), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 1, 127, 0x0042), hw::CMD_OK);
        const std::vector<uint16_t> before = pkey_table(h, 1);
        ASSERT_EQ(before.size(), pkeys(h, 1).table_len.get());
        for (unsigned i = 0; i < before.size(); ++i) EXPECT_EQ(before[i], pkeys(h, 1).pkey(i)) << i;
        EXPECT_EQ(before[0], 0xFFFF);
        EXPECT_EQ(before[3], 0x8033);
        EXPECT_EQ(before[127], 0x0042);
        // Every verb that takes a P_Key index binds a QP to an entry and never writes one.
        ibv_qp* qp = h.s[1].qp;
        ASSERT_EQ(to_state(qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect(1, IBV_QPS_INIT, 3), 0);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 127;
        ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX), 0);  // Init -> Init
        ibv_qp_attr qa{};
        ibv_qp_init_attr qia{};
        ASSERT_EQ(ibv_query_qp(qp, &qa, IBV_QP_PKEY_INDEX, &qia), 0);
        EXPECT_EQ(qa.pkey_index, 127);
        ASSERT_EQ(to_state(qp, IBV_QPS_RESET), 0);
        ASSERT_EQ(h.connect(1, IBV_QPS_RTS, 5), 0);  // an invalid entry (0) is bound as it is
        ibv_qp_init_attr ia{};
        ia.send_cq = h.s[1].scq;
        ia.recv_cq = h.s[1].rcq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap = {4, 4, 1, 1, 0};
        ibv_qp* extra = ibv_create_qp(h.s[1].pd, &ia);
        ASSERT_NE(extra, nullptr);
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 3;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
        ASSERT_EQ(
            ibv_modify_qp(extra, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS),
            0);
        a.pkey_index = uint16_t(before.size());
        EXPECT_EQ(ibv_modify_qp(extra, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX), EINVAL) << "past the table";
        ASSERT_EQ(ibv_destroy_qp(extra), 0);
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(h.s[1].ctx, &da), 0);
        EXPECT_EQ(da.max_pkeys, before.size());
        EXPECT_EQ(port_of(h, 1).pkey_tbl_len, before.size());
        EXPECT_EQ(pkey_table(h, 1), before) << "the table after the verbs";
        for (unsigned i = 0; i < before.size(); ++i) EXPECT_EQ(pkeys(h, 1).pkey(i), before[i]) << i;
    });
}

// ------------------------------------------------------------------ 10.9.8 management QPs

SIM_TEST(E2ePartition, C10_131_qp0_accepts_any_pkey) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // node1's entry 0 becomes 0x8001: node0's 0xFFFF no longer matches node1's own QP ...
        ASSERT_EQ(set_pkey(h, 1, 0, 0x8001), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 0, 1, 0x7FFF), hw::CMD_OK);  // node0 entry 1: limited member
        // node0 entry 2 stays 0: an invalid P_Key (C10-116).
        const uint32_t qp1 = h.s[1].qp->qp_num;
        fate f = send_one(h, qp1, 0);
        EXPECT_EQ(f.violations, 1u) << "0xFFFF to node1's QP bound to 0x8001";
        EXPECT_EQ(f.passed, 0u);
        // ... but QP0 takes it, and any other P_Key, valid or not. There is no SMI QP in the
        // model yet; QPN 0 is bound in the checker to entry 0 as a QP there would be, so the
        // packets would be dropped if QP0 were checked like other QPs.
        pkeys(h, 1).bind_qp(0, 0);
        for (uint16_t index : {0, 1, 2}) {
            f = send_one(h, 0, index);
            EXPECT_EQ(f.violations, 0u) << "node0 P_Key index " << index;
            EXPECT_EQ(f.passed, 1u) << "node0 P_Key index " << index << ": on to the transport engine";
        }
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 1u);
    });
}

SIM_TEST(E2ePartition, C10_132_qp1_accepts_any_valid_table_pkey_and_drops_others) {
    rc_harness h;
    h.run([](rc_harness& h) {
        // node0's table: 0 = 0xFFFF, 1 = 0x8005, 2 = 0x0005 (limited), 3 = 0x8042, 4 = 0x8000.
        ASSERT_EQ(set_pkey(h, 0, 1, 0x8005), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 0, 2, 0x0005), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 0, 3, 0x8042), hw::CMD_OK);
        ASSERT_EQ(set_pkey(h, 0, 4, 0x8000), hw::CMD_OK);
        // node1's QP stays at index 0 (0xFFFF); QP1 is checked against the whole table.
        ASSERT_EQ(set_pkey(h, 1, 6, 0x8000), hw::CMD_OK);  // an invalid entry matches nothing
        struct step {
            uint16_t index;
            bool accepted;
            const char* what;
        };
        const step before[] = {
            {0, true, "0xFFFF: entry 0"},      {1, false, "0x8005: in no entry"},
            {2, false, "0x0005: in no entry"}, {3, false, "0x8042: in no entry"},
            {4, false, "0x8000: invalid"},
        };
        unsigned drops = 0;
        for (const step& s : before) {
            const fate f = send_one(h, 1, s.index);
            EXPECT_EQ(f.violations, s.accepted ? 0u : 1u) << s.what;
            EXPECT_EQ(f.passed, s.accepted ? 1u : 0u) << s.what;
            drops += !s.accepted;
        }
        // node1 gains entry 9 = 0x0005 (limited member) deep in the table.
        ASSERT_EQ(set_pkey(h, 1, 9, 0x0005), hw::CMD_OK);
        const step after[] = {
            {1, true, "0x8005 (full) against entry 9 (limited)"},
            {2, false, "0x0005 (limited) against entry 9 (limited)"},
            {0, true, "0xFFFF: entry 0"},
        };
        for (const step& s : after) {
            const fate f = send_one(h, 1, s.index);
            EXPECT_EQ(f.violations, s.accepted ? 0u : 1u) << s.what;
            EXPECT_EQ(f.passed, s.accepted ? 1u : 0u) << s.what;
            drops += !s.accepted;
        }
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, drops) << "QP1 drops are P_Key violations";
        EXPECT_EQ(ctr(1, "transport_engine.acks_sent") + ctr(1, "transport_engine.naks_sent"), 0u)
            << "silently dropped";
    });
}

// ------------------------------------------------------------------ 10.9.4 violation counter

SIM_TEST(E2ePartition, o10_57_pkey_violation_counter_saturates_at_ffff) {
    rc_config cfg;
    cfg.mtu = 256;
    cfg.timeout = 0;  // no local ACK timeout: each packet is sent once
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        constexpr size_t kMsg = 1u << 20;  // 4096 packets of 256 bytes
        constexpr unsigned kPackets = kMsg / 256;
        constexpr unsigned kMsgs = 17;  // 69632 packets > 65535
        const uint64_t src = h.alloc(0, kMsg, 4096), dst = h.alloc(1, kMsg, 4096);
        ibv_mr* smr = h.reg(0, src, kMsg);
        ibv_mr* dmr = h.reg(1, dst, kMsg);
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 0u) << "zero at power-on";
        ASSERT_EQ(set_pkey(h, 1, 0, 0x8001), hw::CMD_OK);  // node0's 0xFFFF mismatches at node1
        ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, uint32_t(kMsg), smr->lkey}}, 0, IBV_SEND_SIGNALED,
                              dst, dmr->rkey),
                  0);
        h.sleep(0, 1'000'000);
        EXPECT_EQ(ctr(1, "pkey_checker.violations"), kPackets);
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, kPackets);
        for (unsigned m = 1; m < kMsgs; ++m)
            ASSERT_EQ(h.post_send(0, IBV_WR_RDMA_WRITE, {{src, uint32_t(kMsg), smr->lkey}}, m,
                                  IBV_SEND_SIGNALED, dst, dmr->rkey),
                      0);
        h.sleep(0, 20'000'000);
        EXPECT_EQ(ctr(1, "pkey_checker.violations"), uint64_t(kMsgs) * kPackets)
            << "every packet was dropped";
        const ibv_port_attr pa = port_of(h, 1);
        EXPECT_EQ(pa.bad_pkey_cntr, 0xFFFFu) << "saturated, not wrapped";
        EXPECT_EQ(pa.qkey_viol_cntr, 0u);
        EXPECT_EQ(port_of(h, 0).bad_pkey_cntr, 0u) << "node0 saw no mismatch";
        h.expect_no_wc(h.s[0].scq, 1000, "nothing acknowledged");
        h.expect_fill(1, dst, kMsg, 0, "destination untouched");
    });
}

SIM_TEST(E2ePartition, qkey_violation_counter_is_reported_by_query_port) {
    rc_harness h;
    h.run([](rc_harness& h) {
        EXPECT_EQ(port_of(h, 1).qkey_viol_cntr, 0u);
        for (unsigned i = 0; i < 3; ++i) pkeys(h, 1).qkey_violation();  // as the Q_Key check does
        EXPECT_EQ(port_of(h, 1).qkey_viol_cntr, 3u);
        EXPECT_EQ(port_of(h, 1).bad_pkey_cntr, 0u);
        EXPECT_EQ(port_of(h, 0).qkey_viol_cntr, 0u);
        for (unsigned i = 0; i < 0x10000; ++i) pkeys(h, 1).qkey_violation();
        EXPECT_EQ(port_of(h, 1).qkey_viol_cntr, 0xFFFFu);
        EXPECT_EQ(ctr(1, "pkey_checker.qkey_violations"), 0x10003u);
    });
}
