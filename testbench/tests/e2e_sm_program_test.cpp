// The subnet manager programs the switches with SMPs (fabric.sm.program=smp): at the start of
// simulated time it sends every switch, by directed route through the switches' agents
// (switch_sma.h), SubnGet(NodeInfo), SubnSet(LinearForwardingTable) of each block in use,
// SubnSet(SwitchInfo) with LinearFDBTop and the configured SL-to-VL and VL arbitration tables.
// Afterwards every switch's table equals the routing engine's, the SMPs sent are the blocks
// expected, and nothing was dropped; with program=direct (the default) no SMP is sent and the
// tables are there at elaboration. A directed-route SubnGet reads a switch's table back, and a
// LID-routed one reaches the switch's own LID once routes exist.
#include <gtest/gtest.h>
#include <systemc>

#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/system/fabric.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/mad.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace sc_core;

namespace {

/// A two-level fat tree of 6 nodes and the SM on radix-4 switches (4 leaves, 2 spines).
void fat_tree(const std::string& program) {
    broker::instance().set("fabric.nodes", "6", "test");
    broker::instance().set("fabric.topology", "fat_tree", "test");
    broker::instance().set("fabric.switch.radix", "4", "test");
    broker::instance().set("fabric.sm.program", program, "test");
}

/// fat_tree("smp") with two data VLs on every link.
void fat_tree_two_vls() {
    fat_tree("smp");
    broker::instance().set("link.data_vls", "2", "test");
    broker::instance().set("fabric.switch.data_vls", "2", "test");
}

/// The highest LID switch node `s` routes, and the SMPs the sweep sends it: NodeInfo, one
/// LinearForwardingTable block per 64 LIDs up to that LID, SwitchInfo.
unsigned top_of(const std::vector<uint8_t>& lft) {
    unsigned top = 0;
    for (unsigned lid = 0; lid < lft.size(); ++lid)
        if (lft[lid] != 0xFF) top = lid;
    return top;
}

/// Every switch's table equals the routing engine's, LID by LID.
void expect_tables_of_the_engine(machine& m) {
    for (unsigned s : m.net.graph.switches()) {
        const std::vector<uint8_t>& want = m.net.routes.lft[s];
        ib_switch& sw = m.net.switch_at(s);
        for (unsigned lid = 0; lid < 0xC000; ++lid)
            ASSERT_EQ(sw.lft_entry(uint16_t(lid)), lid < want.size() ? want[lid] : 0xFF)
                << sw.name() << " LID " << lid;
    }
}

/// Runs `body` in a thread of its own, then the simulation to its end.
struct test_thread : sc_module {
    SC_HAS_PROCESS(test_thread);
    test_thread(sc_module_name n, std::function<void()> f) : sc_module(n), f_(std::move(f)) {
        SC_THREAD(run);
    }
    void run() { f_(); }
    std::function<void()> f_;
};

}  // namespace

SIM_TEST(SmProgram, smp_sweep_leaves_every_switch_lft_equal_to_the_routing_engines_table) {
    fat_tree("smp");
    machine m;
    subnet_manager& sm = *m.net.sm;
    ASSERT_EQ(m.net.switches.size(), 6u);
    // Before the sweep the switches route nothing.
    for (auto& sw : m.net.switches) EXPECT_EQ(sw->lft_entry(m.at(0).lid()), 0xFF) << sw->name();
    EXPECT_FALSE(sm.programmed());
    sc_start();
    ASSERT_TRUE(sm.programmed()) << m.fabric_error();
    EXPECT_EQ(m.fabric_error(), "");
    expect_tables_of_the_engine(m);
    // One SMP per block in use (and NodeInfo, SwitchInfo), each answered once.
    uint64_t expected = 0;
    for (unsigned s : m.net.graph.switches()) {
        const unsigned top = top_of(m.net.routes.lft[s]);
        const unsigned smps = 2 + top / 64 + 1;
        expected += smps;
        EXPECT_EQ(m.net.agent_at(s).answered, smps) << m.net.graph.nodes[s].desc;
        EXPECT_EQ(m.net.agent_at(s).dropped, 0u) << m.net.graph.nodes[s].desc;
        EXPECT_EQ(m.net.agent_at(s).linear_fdb_top(), top) << m.net.graph.nodes[s].desc;
    }
    EXPECT_EQ(sm.smps_sent.value(), expected);
    EXPECT_EQ(sm.responses.value(), expected);
    EXPECT_EQ(sm.timeouts.value(), 0u);
    uint64_t plan = 0;
    for (const auto& p : m.sweep_plan()) plan += subnet_manager::smps_for(p);
    EXPECT_EQ(plan, expected);
    // Every SMP went out as a directed-route SubnSet or SubnGet; the sweep ends with the last
    // GetResp.
    for (const auto& b : sm.sent())
        EXPECT_EQ(b[wire::LRH_BYTES + wire::BTH_BYTES + wire::DETH_BYTES + 1], 0x81);
    EXPECT_EQ(sm.programmed_at(), sm.responses_received().back().at);
    // The setup cost, exactly: an SMP (LRH 8 + BTH 12 + DETH 8 + MAD 256 + ICRC 4 + VCRC 2 =
    // 290 bytes) takes 23.2 ns on each 100 Gb/s link plus 10 ns of cable; each switch it
    // passes or that answers it adds sma_process_ns (1000) and latency_ns (90). A round trip
    // over h switches: 33.2 ns to the first, 1123.2 ns per further hop out and per hop back.
    double ns = 0;
    for (const auto& p : m.sweep_plan())
        ns += subnet_manager::smps_for(p) * (33.2 + (2.0 * double(p.path.size()) - 1) * 1123.2);
    EXPECT_EQ(sm.programmed_at(), sc_time(ns, SC_NS)) << sm.programmed_at();
    // Switches two hops away pass the SMPs of the others on: a spine carries a leaf's.
    uint64_t passed = 0;
    for (auto& a : m.net.agents) passed += a->passed_on;
    EXPECT_GT(passed, 0u);
}

SIM_TEST(SmProgram, direct_mode_writes_the_tables_at_elaboration_and_sends_no_smp) {
    fat_tree("direct");
    machine m;
    expect_tables_of_the_engine(m);
    for (unsigned s : m.net.graph.switches())
        EXPECT_EQ(m.net.agent_at(s).linear_fdb_top(), top_of(m.net.routes.lft[s]))
            << m.net.graph.nodes[s].desc;
    EXPECT_TRUE(m.net.sm->programmed());
    sc_start();
    EXPECT_EQ(m.net.sm->smps_sent.value(), 0u);
    EXPECT_EQ(m.net.sm->programmed_at(), SC_ZERO_TIME);
}

SIM_TEST(SmProgram, smp_sweep_programs_the_configured_sl2vl_and_vlarb_tables_of_every_switch_port) {
    fat_tree_two_vls();
    // VL 0 only: the SM's switch port has one data VL, and every port takes the same keys.
    broker::instance().set("fabric.switch.sl2vl", "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,15", "test");
    broker::instance().set("fabric.switch.vlarb_high", "0:3", "test");
    broker::instance().set("fabric.switch.vlarb_low", "0:1", "test");
    machine m;
    subnet_manager& sm = *m.net.sm;
    // Link-up tables until the SM writes its own: SL mod VLs, every VL weight 255.
    ib_switch& leaf = m.net.switch_at(m.net.graph.switches().front());
    EXPECT_EQ(leaf.sl2vl(1)[1], 1);
    EXPECT_EQ(leaf.sl2vl(1)[15], 1);
    EXPECT_TRUE(leaf.arbiter(1).high_table().empty());
    EXPECT_EQ(leaf.arbiter(1).low_table().size(), 2u);
    sc_start();
    ASSERT_TRUE(sm.programmed()) << m.fabric_error();
    const std::array<uint8_t, 16> want = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15};
    uint64_t expected = 0;
    for (unsigned s : m.net.graph.switches()) {
        ib_switch& sw = m.net.switch_at(s);
        unsigned linked = 0;
        for (unsigned p = 1; p <= sw.ports(); ++p) {
            if (!sw.linked(p)) continue;
            ++linked;
            for (unsigned in = 1; in <= sw.ports(); ++in) {
                if (!sw.linked(in)) continue;
                EXPECT_EQ(sw.sl2vl(in, p), want) << sw.name() << " " << in << " to " << p;
            }
            const auto& hi = sw.arbiter(p).high_table();
            const auto& lo = sw.arbiter(p).low_table();
            ASSERT_EQ(hi.size(), 1u) << sw.name() << " port " << p;
            EXPECT_EQ(hi[0].vl, 0u);
            EXPECT_EQ(hi[0].weight, 3u);
            ASSERT_EQ(lo.size(), 1u) << sw.name() << " port " << p;
            EXPECT_EQ(lo[0].vl, 0u);
            EXPECT_EQ(lo[0].weight, 1u);
        }
        // NodeInfo, LFT blocks, SwitchInfo; one SL2VL per (input, output) pair of linked ports
        // (as OpenSM sets them) and two VLArb blocks per port.
        expected += 2 + top_of(m.net.routes.lft[s]) / 64 + 1 + linked * linked + 2 * linked;
    }
    EXPECT_EQ(sm.smps_sent.value(), expected);
    EXPECT_EQ(sm.timeouts.value(), 0u);
}

SIM_TEST(SmProgram, switch_agent_answers_directed_route_and_lid_routed_gets_of_its_lft_block) {
    fat_tree("direct");
    machine m;
    subnet_manager& sm = *m.net.sm;
    // A spine: two hops from the SM (its leaf, then the leaf's up port).
    const std::vector<subnet_manager::switch_plan> plans = m.sweep_plan();
    auto spine = std::find_if(plans.begin(), plans.end(), [](const auto& p) { return p.path.size() == 2; });
    ASSERT_NE(spine, plans.end());
    unsigned spine_node = 0;
    for (unsigned s : m.net.graph.switches())
        if (m.net.graph.nodes[s].guid == spine->guid) spine_node = s;
    const std::vector<uint8_t>& lft = m.net.routes.lft[spine_node];
    int dr = -2, lr = -2, bad = -2;
    wire::smp got_dr, got_lr;
    test_thread t("t", [&] {
        wire::smp req;
        req.h.method = wire::MAD_METHOD_GET;
        req.h.attr_id = wire::SMP_ATTR_LINEAR_FDB;
        req.h.attr_mod = 0;
        dr = sm.transact_dr(spine->path, req, &got_dr);
        // LID routed to the spine's own LID: the leaf's table routes it, the agent answers
        // to the SM's LID.
        wire::smp lreq;
        lreq.h.method = wire::MAD_METHOD_GET;
        lreq.h.attr_id = wire::SMP_ATTR_LINEAR_FDB;
        sm.add_node(1000, m.net.graph.nodes[spine_node].lid);
        lr = sm.transact(1000, lreq, &got_lr);
        // A path out of a port the leaf does not have: dropped, no answer.
        wire::smp breq;
        breq.h.method = wire::MAD_METHOD_GET;
        breq.h.attr_id = wire::SMP_ATTR_NODE_INFO;
        bad = sm.transact_dr({1, 9}, breq);
    });
    sc_start();
    EXPECT_EQ(dr, wire::MAD_STATUS_OK);
    EXPECT_TRUE(got_dr.directed());
    EXPECT_TRUE(got_dr.returning());
    EXPECT_EQ(got_dr.hop_pointer(), 1) << "back at the SM's end of the path";
    // The leaf wrote the port the SMP came in on (the SM's) into the return path.
    EXPECT_EQ(got_dr.return_path[1], m.net.graph.nodes[unsigned(m.net.graph.sm_node)].peer[1].port);
    for (unsigned lid = 0; lid < 64; ++lid)
        EXPECT_EQ(got_dr.data[lid], lid < lft.size() ? lft[lid] : 0xFF) << "LID " << lid;
    EXPECT_EQ(lr, wire::MAD_STATUS_OK);
    EXPECT_FALSE(got_lr.directed());
    EXPECT_EQ(got_lr.data, got_dr.data);
    EXPECT_EQ(bad, -1);
    EXPECT_EQ(sm.timeouts.value(), 1u);
}

// A switch's SLtoVLMappingTable is one per (input, output) pair, the modifier input << 8 |
// output: a Get returns what a Set of that pair wrote, another input to the same output keeps
// the table all inputs share, and a pair of ports the switch lacks is refused.
SIM_TEST(SmProgram, switch_agent_get_returns_what_set_wrote_for_an_input_output_pair) {
    fat_tree("direct");
    broker::instance().set("link.data_vls", "2", "test");
    broker::instance().set("fabric.switch.data_vls", "2", "test");
    machine m;
    subnet_manager& sm = *m.net.sm;
    const std::vector<subnet_manager::switch_plan> plans = m.sweep_plan();
    const std::vector<uint8_t> path = plans.front().path;  // the SM's leaf
    ib_switch& leaf = m.net.switch_at(m.net.graph.switches().front());
    ASSERT_EQ(m.net.graph.nodes[m.net.graph.switches().front()].guid, plans.front().guid);
    const std::array<uint8_t, 16> mine = {1, 0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 15, 1};
    int set = -2, get = -2, other = -2, bad = -2;
    std::array<uint8_t, 16> got{}, got_other{};
    test_thread t("t", [&] {
        auto sl2vl = [&](uint8_t method, uint32_t mod, std::array<uint8_t, 16>* table) {
            wire::smp req, resp;
            req.h.method = method;
            req.h.attr_id = wire::SMP_ATTR_SL2VL_TABLE;
            req.h.attr_mod = mod;
            if (method == wire::MAD_METHOD_SET) wire::encode_sl2vl(mine.data(), req.data.data());
            const int st = sm.transact_dr(path, req, &resp);
            if (table) wire::decode_sl2vl(resp.data.data(), table->data());
            return st;
        };
        set = sl2vl(wire::MAD_METHOD_SET, 2u << 8 | 3u, nullptr);
        get = sl2vl(wire::MAD_METHOD_GET, 2u << 8 | 3u, &got);
        other = sl2vl(wire::MAD_METHOD_GET, 1u << 8 | 3u, &got_other);
        bad = sl2vl(wire::MAD_METHOD_GET, 9u << 8 | 3u, nullptr);
    });
    sc_start();
    EXPECT_EQ(set, wire::MAD_STATUS_OK);
    EXPECT_EQ(get, wire::MAD_STATUS_OK);
    EXPECT_EQ(got, mine);
    EXPECT_EQ(leaf.sl2vl(2, 3), mine);
    EXPECT_EQ(other, wire::MAD_STATUS_OK);
    const std::array<uint8_t, 16> link_up = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    EXPECT_EQ(got_other, link_up);
    EXPECT_EQ(leaf.sl2vl(1, 3), link_up);
    EXPECT_EQ(leaf.sl2vl(3), link_up);
    EXPECT_EQ(bad, wire::MAD_STATUS_INVALID_FIELD);
}

// MulticastForwardingTable (0x1B) through a switch's agent: a block is 32 MLIDs of 16-bit port
// masks, the modifier's position (bits 31:28) selecting the 16-port slice. A Set of MLID
// 0xC001's mask (ports 2 and 3, plus port 0 and a port 9 the radix-4 switch lacks) makes ports
// 2 and 3 members and the GetResp shows just those; a position past the switch's ports is
// refused.
SIM_TEST(SmProgram, switch_agent_sets_and_gets_multicast_forwarding_table_blocks) {
    fat_tree("direct");
    machine m;
    subnet_manager& sm = *m.net.sm;
    const std::vector<uint8_t> path = m.sweep_plan().front().path;  // the SM's leaf
    ib_switch& leaf = m.net.switch_at(m.net.graph.switches().front());
    int set = -2, get = -2, bad = -2;
    wire::smp got;
    test_thread t("t", [&] {
        wire::smp req;
        req.h.method = wire::MAD_METHOD_SET;
        req.h.attr_id = wire::SMP_ATTR_MCAST_FDB;
        req.h.attr_mod = 0;  // position 0, block 0: MLIDs 0xC000..0xC01F
        req.data[2] = 0x02;  // MLID 0xC001: port 9
        req.data[3] = 0x0D;  // ports 3, 2 and 0
        set = sm.transact_dr(path, req);
        req.h.method = wire::MAD_METHOD_GET;
        req.data.fill(0);
        get = sm.transact_dr(path, req, &got);
        req.h.attr_mod = 1u << 28;  // ports 16..31
        bad = sm.transact_dr(path, req);
    });
    sc_start();
    EXPECT_EQ(set, wire::MAD_STATUS_OK);
    EXPECT_EQ(get, wire::MAD_STATUS_OK);
    EXPECT_EQ(got.data[2], 0x00);
    EXPECT_EQ(got.data[3], 0x0C);
    for (unsigned k = 0; k < 64; ++k) {
        if (k == 3) continue;
        EXPECT_EQ(got.data[k], 0) << "byte " << k;
    }
    EXPECT_FALSE(leaf.mcast_member(0xC001, 1));
    EXPECT_TRUE(leaf.mcast_member(0xC001, 2));
    EXPECT_TRUE(leaf.mcast_member(0xC001, 3));
    EXPECT_FALSE(leaf.mcast_member(0xC000, 2));
    EXPECT_EQ(bad, wire::MAD_STATUS_INVALID_FIELD);
}

// The sweep programs the HCA ports too (IBA ch. 7: a CA port has an SL-to-VL table and VL
// arbitration tables): they start with the link-up tables (SL mod VLs, every VL weight 255)
// and, once the switches route, the SM sets the configured ones by LID-routed SMPs through each
// HCA's agent: SubnSet(SLtoVLMappingTable), SubnSet(VLArbitrationTable) blocks 3 (the high
// table, empty) and 1 (the low one).
SIM_TEST(SmProgram, smp_sweep_programs_the_configured_sl2vl_and_vlarb_tables_of_every_hca_port) {
    fat_tree_two_vls();
    broker::instance().set("hca.port.sl2vl", "1,1,0,0,0,0,0,0,0,0,0,0,0,0,0,15", "test");
    broker::instance().set("hca.port.vlarb_low", "0:64,1:192", "test");
    machine m;
    subnet_manager& sm = *m.net.sm;
    const std::array<uint8_t, 16> link_up = {0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1};
    for (unsigned i = 0; i < 6; ++i) {
        EXPECT_EQ(m.at(i).adapter.port0.sl2vl_table(), link_up) << "node" << i;
        EXPECT_EQ(m.at(i).adapter.port0.arbiter().low_table().size(), 2u);
        EXPECT_EQ(m.at(i).adapter.port0.arbiter().low_table()[1].weight, 255u);
    }
    sc_start();
    ASSERT_TRUE(sm.programmed()) << m.fabric_error();
    const std::array<uint8_t, 16> want = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15};
    for (unsigned i = 0; i < 6; ++i) {
        const port& p = m.at(i).adapter.port0;
        EXPECT_EQ(p.sl2vl_table(), want) << "node" << i;
        const auto& lo = p.arbiter().low_table();
        ASSERT_EQ(lo.size(), 2u) << "node" << i;
        EXPECT_EQ(lo[0].vl, 0u);
        EXPECT_EQ(lo[0].weight, 64u);
        EXPECT_EQ(lo[1].vl, 1u);
        EXPECT_EQ(lo[1].weight, 192u);
        EXPECT_TRUE(p.arbiter().high_table().empty());
    }
    uint64_t switch_smps = 0;
    for (unsigned s : m.net.graph.switches()) switch_smps += 2 + top_of(m.net.routes.lft[s]) / 64 + 1;
    EXPECT_EQ(sm.smps_sent.value(), switch_smps + 6 * 3);
    EXPECT_EQ(sm.timeouts.value(), 0u);
}
