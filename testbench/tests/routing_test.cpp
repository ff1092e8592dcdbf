// The subnet manager's routing engines (model/fabric/routing.h) on small fabrics built by
// hand: exact forwarding tables, LMC spreading, the deadlock check on a ring, fat-tree
// routing's contention-free shift permutation, and the errors.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "model/fabric/routing.h"
#include "testbench/tests/fixtures.h"

using namespace hcasim;
using hcasim::test::error_of;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

constexpr uint8_t X = routing_tables::NO_PATH;

/// A fabric filled in by hand (topology.cpp's builders are tested on their own): switches
/// first, hosts as they are cabled; LIDs as assign_lids gives them, switches after the CAs.
struct fabric {
    topology t;
    unsigned sw(const std::string& desc, unsigned ports) { return add(topo_node::kind::sw, ports, desc); }
    /// A host (nodeN), not cabled yet.
    unsigned hca() {
        unsigned h = add(topo_node::kind::hca, 1, "node" + std::to_string(t.hosts()));
        t.nodes[h].host = t.hosts();
        t.host_node.push_back(h);
        return h;
    }
    /// A host on port `port` of switch `s`.
    unsigned host(unsigned s, unsigned port) {
        unsigned h = hca();
        cable(s, port, h, 1);
        return h;
    }
    unsigned sm(unsigned s, unsigned port) {
        unsigned n = add(topo_node::kind::hca, 1, "subnet manager");
        t.nodes[n].is_sm = true;
        t.sm_node = int(n);
        cable(s, port, n, 1);
        return n;
    }
    void cable(unsigned a, unsigned pa, unsigned b, unsigned pb) {
        t.nodes[a].peer[pa] = {int(b), pb};
        t.nodes[b].peer[pb] = {int(a), pa};
    }
    /// Hosts (i + 1) << lmc, the SM next, then the switches one LID each in node order.
    topology& lids(unsigned lmc) {
        t.lmc = lmc;
        for (unsigned i = 0; i < t.hosts(); ++i) t.nodes[t.host_node[i]].lid = uint16_t((i + 1) << lmc);
        unsigned next = (t.hosts() + 1) << lmc;
        if (t.sm_node >= 0) t.nodes[unsigned(t.sm_node)].lid = uint16_t(next), next += 1u << lmc;
        for (auto& n : t.nodes)
            if (n.is_switch()) n.lid = uint16_t(next++);
        return t;
    }

private:
    unsigned add(topo_node::kind k, unsigned ports, const std::string& desc) {
        topo_node n;
        n.type = k;
        n.desc = desc;
        n.guid = 0x0002c90300000000ull + (t.nodes.size() << 4);
        n.peer.resize(ports + 1);
        t.nodes.push_back(n);
        return unsigned(t.nodes.size() - 1);
    }
};

/// Two leaves (ports 1-2 hosts, 3 to spine0, 4 to spine1) under two spines (port 1 leaf0,
/// port 2 leaf1): nodes leaf0 0, leaf1 1, spine0 2, spine1 3; hosts node0..3 LIDs 1..4
/// (lmc 0), switches LIDs 5..8.
topology& two_by_two(fabric& f, unsigned lmc) {
    unsigned l0 = f.sw("leaf0", 4), l1 = f.sw("leaf1", 4), s0 = f.sw("spine0", 2), s1 = f.sw("spine1", 2);
    f.cable(l0, 3, s0, 1);
    f.cable(l0, 4, s1, 1);
    f.cable(l1, 3, s0, 2);
    f.cable(l1, 4, s1, 2);
    for (unsigned l : {l0, l1})
        for (unsigned p : {1u, 2u}) f.host(l, p);
    return f.lids(lmc);
}

/// A fat tree of `leaves` leaves with `down` hosts each under `spines` spines, every leaf
/// cabled once to every spine (leaf ports 1..down hosts, down+1.. spines), and the SM on one
/// more port of leaf0.
topology& fat_tree(fabric& f, unsigned leaves, unsigned spines, unsigned down) {
    std::vector<unsigned> l, s;
    for (unsigned i = 0; i < leaves; ++i) l.push_back(f.sw("leaf" + std::to_string(i), down + spines + !i));
    for (unsigned j = 0; j < spines; ++j) s.push_back(f.sw("spine" + std::to_string(j), leaves));
    for (unsigned i = 0; i < leaves; ++i)
        for (unsigned j = 0; j < spines; ++j) f.cable(l[i], down + 1 + j, s[j], i + 1);
    for (unsigned i = 0; i < leaves; ++i)
        for (unsigned p = 1; p <= down; ++p) f.host(l[i], p);
    f.sm(l[0], down + spines + 1);
    return f.lids(0);
}

/// A k-ary 3-tree: k pods of k leaves (ports 1..k hosts, k+1.. the pod's spines) and k spines
/// (ports 1..k the pod's leaves, k+1.. cores), k * k cores (core j*k+m: port p+1 to spine j of
/// pod p); k^3 hosts.
topology& three_level(fabric& f, unsigned k) {
    std::vector<unsigned> leaf, spine, core;
    for (unsigned i = 0; i < k * k; ++i) leaf.push_back(f.sw("leaf" + std::to_string(i), 2 * k));
    for (unsigned i = 0; i < k * k; ++i) spine.push_back(f.sw("spine" + std::to_string(i), 2 * k));
    for (unsigned i = 0; i < k * k; ++i) core.push_back(f.sw("core" + std::to_string(i), k));
    for (unsigned p = 0; p < k; ++p)
        for (unsigned i = 0; i < k; ++i)
            for (unsigned j = 0; j < k; ++j) {
                f.cable(leaf[p * k + i], k + 1 + j, spine[p * k + j], 1 + i);
                f.cable(spine[p * k + j], k + 1 + i, core[j * k + i], 1 + p);
            }
    for (unsigned l : leaf)
        for (unsigned port = 1; port <= k; ++port) f.host(l, port);
    return f.lids(0);
}

/// A ring of 4 switches sw0..sw3 with 2 hosts each (ports 1, 2); port 3 to the next switch,
/// port 4 to the previous one.
topology& ring4(fabric& f) {
    for (unsigned i = 0; i < 4; ++i) f.sw("sw" + std::to_string(i), 4);
    for (unsigned i = 0; i < 4; ++i) f.cable(i, 3, (i + 1) % 4, 4);
    for (unsigned i = 0; i < 4; ++i) f.host(i, 1), f.host(i, 2);
    return f.lids(0);
}

/// The channels (switch, output port) from host `src` to host `dst`; fails the test unless
/// the packet arrives at `dst`.
std::vector<std::pair<unsigned, unsigned>> path(const topology& t, const routing_tables& r, unsigned src,
                                                unsigned dst) {
    route_trace tr = trace_route(t, r, t.host_node[src], t.nodes[t.host_node[dst]].lid);
    EXPECT_EQ(tr.delivered_to, int(t.host_node[dst]))
        << "node" << src << " -> node" << dst << ": " << describe_channels(t, tr.channels);
    return tr.channels;
}

/// Fails the test unless every shift permutation (host s to s + k) puts at most one flow on
/// every channel.
void expect_shifts_contention_free(const topology& t, const routing_tables& r) {
    unsigned n = t.hosts();
    for (unsigned k = 1; k < n; ++k) {
        std::map<std::pair<unsigned, unsigned>, unsigned> flows;  // channel -> flows through it
        for (unsigned s = 0; s < n; ++s)
            for (auto& ch : path(t, r, s, (s + k) % n)) ++flows[ch];
        for (auto& [ch, count] : flows)
            EXPECT_EQ(count, 1u) << "shift " << k << ": " << describe_channels(t, {ch}) << " carries "
                                 << count;
    }
}

/// A random connected fabric of 4 to 10 switches (a random spanning tree plus random extra
/// links) with a host on about two switches in three.
topology& irregular(fabric& f, std::mt19937& rng) {
    unsigned n = 4 + rng() % 7, ports = 8;
    std::vector<unsigned> free(n, 1);  // next free port of each switch
    for (unsigned i = 0; i < n; ++i) f.sw("sw" + std::to_string(i), ports);
    auto link = [&](unsigned a, unsigned b) {
        if (a == b || free[a] > ports - 1 || free[b] > ports - 1) return;
        f.cable(a, free[a]++, b, free[b]++);
    };
    for (unsigned i = 1; i < n; ++i) link(i, rng() % i);
    for (unsigned extra = rng() % (2 * n); extra > 0; --extra) link(rng() % n, rng() % n);
    for (unsigned i = 0; i < n; ++i)
        if (rng() % 3) f.host(i, free[i]++);
    if (f.t.hosts() < 2) f.host(0, free[0]++), f.host(n - 1, free[n - 1]++);
    return f.lids(0);
}

/// Every host reaches every other (path() fails the test otherwise).
void expect_all_pairs_routed(const topology& t, const routing_tables& r) {
    for (unsigned s = 0; s < t.hosts(); ++s)
        for (unsigned d = 0; d < t.hosts(); ++d)
            if (s != d) path(t, r, s, d);
}

/// The tables of nodes 0, 1, ... (the switches, built first) are `want`.
void expect_lfts(const routing_tables& r, const std::vector<std::vector<uint8_t>>& want) {
    for (unsigned n = 0; n < want.size(); ++n) EXPECT_EQ(r.lft[n], want[n]) << r.engine << " node " << n;
}

}  // namespace

TEST(Routing, single_switch_routes_each_lid_to_its_port_and_its_own_lid_to_port0) {
    fabric f;
    unsigned s = f.sw("switch", 4);
    f.host(s, 1);
    f.host(s, 2);
    f.sm(s, 3);
    topology& t = f.lids(0);  // node0 1, node1 2, SM 3, switch 4
    for (const char* engine : {"minhop", "updn"}) {
        routing_tables r = route(t, engine);
        EXPECT_EQ(r.engine, engine);
        EXPECT_EQ(r.lft[s], (std::vector<uint8_t>{X, 1, 2, 3, 0})) << engine;
        EXPECT_TRUE(r.lft[t.host_node[0]].empty()) << "HCAs have no table";
        EXPECT_TRUE(dependency_cycle(t, r).empty());
    }
}

TEST(Routing, back_to_back_hosts_need_no_tables) {
    fabric f;
    unsigned a = f.hca(), b = f.hca();
    f.cable(a, 1, b, 1);
    topology& t = f.lids(0);
    for (const char* engine : {"minhop", "updn", "ftree"}) {
        routing_tables r = route(t, engine);
        EXPECT_EQ(r.lft, (std::vector<std::vector<uint8_t>>(2))) << engine;
        EXPECT_TRUE(dependency_cycle(t, r).empty());
    }
}

TEST(Routing, two_switches_in_a_line_route_across_the_link) {
    fabric f;
    unsigned a = f.sw("swA", 3), b = f.sw("swB", 3);
    f.cable(a, 3, b, 3);
    f.host(a, 1), f.host(a, 2), f.host(b, 1), f.host(b, 2);
    topology& t = f.lids(0);  // node0..3 LIDs 1..4, swA 5, swB 6
    for (const char* engine : {"minhop", "updn"}) {
        routing_tables r = route(t, engine);
        EXPECT_EQ(r.lft[a], (std::vector<uint8_t>{X, 1, 2, 3, 3, 0, 3})) << engine;
        EXPECT_EQ(r.lft[b], (std::vector<uint8_t>{X, 3, 3, 1, 2, 3, 0})) << engine;
    }
}

TEST(Routing, trace_route_reaches_a_switch_lid_and_reports_dead_ends_and_loops) {
    fabric f;
    topology& t = two_by_two(f, 0);  // leaf0 0, leaf1 1, spine0 2, spine1 3; node0 LID 1, node2 LID 3
    routing_tables r = route(t, "minhop");
    route_trace to_spine1 = trace_route(t, r, t.host_node[0], 8);
    EXPECT_EQ(to_spine1.delivered_to, 3);
    EXPECT_EQ(describe_channels(t, to_spine1.channels), "leaf0/p4");
    EXPECT_EQ(describe_channels(t, trace_route(t, r, t.host_node[0], 3).channels),
              "leaf0/p3 -> spine0/p2 -> leaf1/p1");
    r.lft[2][3] = X;  // spine0 loses node2
    EXPECT_EQ(trace_route(t, r, t.host_node[0], 3).delivered_to, -1);
    r.lft[2][3] = 1;  // spine0 sends node2 back to leaf0, which sends it up again
    route_trace loop = trace_route(t, r, t.host_node[0], 3);
    EXPECT_EQ(loop.delivered_to, -1);
    EXPECT_EQ(describe_channels(t, dependency_cycle(t, r)), "leaf0/p3 -> spine0/p1");
}

TEST(Routing, minhop_on_a_two_level_fat_tree_balances_lids_over_the_spines) {
    fabric f;
    topology& t = two_by_two(f, 0);
    routing_tables r = route(t, "minhop");
    // leaf0: node2 and node3 over spine0 and spine1 (fewest LIDs so far, then lowest port);
    // switch LIDs are routed but not counted. spine0 reaches spine1 (LID 8) through leaf0:
    // both ports carry 2 LIDs, the lower wins.
    expect_lfts(r, {{X, 1, 2, 3, 4, 0, 3, 3, 4},
                    {X, 3, 4, 1, 2, 3, 0, 3, 4},
                    {X, 1, 1, 2, 2, 1, 2, 0, 1},
                    {X, 1, 1, 2, 2, 1, 2, 1, 0}});
    EXPECT_TRUE(dependency_cycle(t, r).empty());
}

TEST(Routing, updn_on_a_two_level_fat_tree_leaves_spine_to_spine_unrouted) {
    fabric f;
    // The spines are the roots: one spine to the other would go down, then up (as OpenSM).
    expect_lfts(route(two_by_two(f, 0), "updn"), {{X, 1, 2, 3, 4, 0, 3, 3, 4},
                                                  {X, 3, 4, 1, 2, 3, 0, 3, 4},
                                                  {X, 1, 1, 2, 2, 1, 2, 0, X},
                                                  {X, 1, 1, 2, 2, 1, 2, X, 0}});
}

TEST(Routing, ftree_on_a_two_level_fat_tree_climbs_by_destination_index) {
    fabric f;
    routing_tables r = route(two_by_two(f, 0), "ftree");
    EXPECT_EQ(r.engine, "ftree");
    // Destination index i (node0..3 0..3, then leaf0 4, leaf1 5, ...) goes down from spine
    // i mod 2; every other leaf climbs to that spine.
    expect_lfts(r, {{X, 1, 2, 3, 4, 0, 4, 3, 4},
                    {X, 3, 4, 1, 2, 3, 0, 3, 4},
                    {X, 1, 1, 2, 2, 1, 2, 0, X},
                    {X, 1, 1, 2, 2, 1, 2, X, 0}});
}

TEST(Routing, lmc1_spreads_the_two_lids_of_each_endport_over_both_spines) {
    fabric f;
    topology& t = two_by_two(f, 1);  // node0 LIDs 2-3, node1 4-5, node2 6-7, node3 8-9; switches 10..13
    for (const char* engine : {"minhop", "updn"}) {
        routing_tables r = route(t, engine);
        EXPECT_EQ(r.lft[0], (std::vector<uint8_t>{X, X, 1, 1, 2, 2, 3, 4, 4, 3, 0, 3, 3, 4})) << engine;
        EXPECT_EQ(r.lft[1], (std::vector<uint8_t>{X, X, 3, 4, 4, 3, 1, 1, 2, 2, 3, 0, 3, 4})) << engine;
        EXPECT_TRUE(dependency_cycle(t, r).empty()) << engine;
    }
}

TEST(Routing, minhop_on_a_ring_of_4_has_a_dependency_cycle_named_by_its_ports) {
    fabric f;
    topology& t = ring4(f);
    routing_tables r = route(t, "minhop");
    auto cycle = dependency_cycle(t, r);
    EXPECT_EQ(describe_channels(t, cycle), "sw0/p4 -> sw3/p4 -> sw2/p4 -> sw1/p4");
}

TEST(Routing, updn_on_a_ring_of_4_has_no_dependency_cycle_and_routes_every_pair) {
    fabric f;
    topology& t = ring4(f);
    routing_tables r = route(t, "updn");
    EXPECT_EQ(describe_channels(t, dependency_cycle(t, r)), "");
    for (unsigned s = 0; s < t.hosts(); ++s)
        for (unsigned d = 0; d < t.hosts(); ++d)
            if (s != d) {
                EXPECT_LE(path(t, r, s, d).size(), 3u) << "node" << s << " -> node" << d;
            }
}

TEST(Routing, updn_is_deadlock_free_on_irregular_fabrics) {
    std::mt19937 rng(29);  // mt19937's sequence is fixed by the standard
    for (unsigned trial = 0; trial < 100; ++trial) {
        fabric f;
        topology& t = irregular(f, rng);
        routing_tables r = route(t, "updn");
        EXPECT_EQ(describe_channels(t, dependency_cycle(t, r)), "") << "trial " << trial;
        expect_all_pairs_routed(t, r);
    }
}

TEST(Routing, ftree_on_irregular_fabrics_routes_without_cycles_or_says_why_not) {
    std::mt19937 rng(2929);
    for (unsigned trial = 0; trial < 30; ++trial) {
        fabric f;
        topology& t = irregular(f, rng);
        routing_tables r;
        try {
            r = route(t, "ftree");
        } catch (const config_error& e) {
            EXPECT_EQ(std::string(e.what()).rfind("fabric.routing=ftree: not a fat tree: ", 0), 0u)
                << e.what();
            continue;
        }
        EXPECT_EQ(describe_channels(t, dependency_cycle(t, r)), "") << "trial " << trial;
        expect_all_pairs_routed(t, r);
    }
}

TEST(Routing, ftree_on_fat_trees_of_many_shapes_routes_every_pair_without_cycles) {
    for (unsigned leaves = 2; leaves <= 5; ++leaves)
        for (unsigned spines = 1; spines <= 4; ++spines)
            for (unsigned down = 1; down <= 4; ++down) {
                fabric f;
                topology& t = fat_tree(f, leaves, spines, down);
                routing_tables r = route(t, "ftree");
                EXPECT_EQ(describe_channels(t, dependency_cycle(t, r)), "")
                    << leaves << "x" << spines << "x" << down;
                expect_all_pairs_routed(t, r);
            }
    for (unsigned k = 2; k <= 3; ++k) {
        fabric f;
        topology& t = three_level(f, k);
        routing_tables r = route(t, "ftree");
        EXPECT_EQ(describe_channels(t, dependency_cycle(t, r)), "") << k << "-ary 3-tree";
        expect_all_pairs_routed(t, r);
    }
}

TEST(Routing, ftree_shift_permutation_is_contention_free_and_cycle_free) {
    fabric f;
    topology& t = fat_tree(f, 4, 4, 4);  // 16 hosts, full bisection, and the SM after them
    routing_tables r = route(t, "ftree");
    EXPECT_TRUE(dependency_cycle(t, r).empty());
    expect_shifts_contention_free(t, r);
}

TEST(Routing, ftree_shift_permutation_on_a_three_level_fat_tree_is_contention_free) {
    fabric f;
    topology& t = three_level(f, 4);  // 64 hosts, 48 switches
    routing_tables r = route(t, "ftree");
    EXPECT_TRUE(dependency_cycle(t, r).empty());
    expect_shifts_contention_free(t, r);
}

TEST(Routing, every_engine_on_a_fat_tree_reaches_every_host_and_the_sm_and_the_sm_every_switch) {
    fabric f;
    topology& t = fat_tree(f, 4, 2, 3);
    unsigned sm = unsigned(t.sm_node);
    for (const char* engine : {"minhop", "updn", "ftree"}) {
        routing_tables r = route(t, engine);
        for (unsigned s = 0; s < 6; ++s) {  // 4 leaves, 2 spines
            EXPECT_NE(r.lft[s][t.nodes[sm].lid], X) << engine << " " << t.nodes[s].desc;
            EXPECT_EQ(trace_route(t, r, sm, t.nodes[s].lid).delivered_to, int(s))
                << engine << " " << t.nodes[s].desc;
        }
        EXPECT_TRUE(dependency_cycle(t, r).empty()) << engine;
        for (unsigned s = 0; s < t.hosts(); ++s)
            for (unsigned d = 0; d < t.hosts(); ++d)
                if (s != d) {
                    EXPECT_LE(path(t, r, s, d).size(), 3u) << engine;
                }
    }
}

TEST(Routing, unknown_engine_is_refused) {
    fabric f;
    topology& t = ring4(f);
    EXPECT_EQ(error_of([&] { route(t, "dor"); }),
              "fabric.routing: unknown routing engine 'dor' (minhop, updn or ftree)");
}

TEST(Routing, endport_no_switch_reaches_is_refused_by_name) {
    fabric f;
    unsigned a = f.sw("swA", 3), b = f.sw("swB", 3);
    f.host(a, 1);
    f.host(b, 1);  // swB is not cabled to swA
    topology& t = f.lids(0);
    EXPECT_EQ(error_of([&] { route(t, "minhop"); }),
              "fabric.routing=minhop: no path from switch swA to node1 (LID 2)");
    EXPECT_EQ(error_of([&] { route(t, "updn"); }),
              "fabric.routing=updn: no path from switch swA to node1 (LID 2)");
    f.cable(a, 3, b, 3);
    f.t.nodes[t.host_node[1]].peer[1] = {};  // node1's cable pulled
    f.t.nodes[b].peer[1] = {};
    EXPECT_EQ(error_of([&] { route(t, "minhop"); }),
              "fabric.routing=minhop: node1 (LID 2) is not cabled to a switch: no switch can reach it");
}

TEST(Routing, ftree_refuses_lmc_and_fabrics_that_are_not_fat_trees) {
    fabric f1;
    EXPECT_EQ(error_of([&] { route(two_by_two(f1, 1), "ftree"); }),
              "fabric.routing=ftree: LMC 1 is not supported by fat-tree routing (as in OpenSM)");
    fabric f2;
    EXPECT_EQ(error_of([&] { route(ring4(f2), "ftree"); }),
              "fabric.routing=ftree: not a fat tree: sw0 and sw1 are cabled to each other at level 0");
    fabric f3;
    unsigned s = f3.sw("switch", 2);
    f3.host(s, 1);
    EXPECT_EQ(error_of([&] { route(f3.lids(0), "ftree"); }),
              "fabric.routing=ftree: not a fat tree: 1 switch level(s); fat-tree routing needs 2 to 8");
    fabric f4;  // leaf1 has one spine instead of two
    topology& t4 = two_by_two(f4, 0);
    t4.nodes[3].peer[2] = {};
    t4.nodes[1].peer[4] = {};
    EXPECT_EQ(
        error_of([&] { route(t4, "ftree"); }),
        "fabric.routing=ftree: not a fat tree: leaf1 has 1 up ports to switches, leaf0 has 2 (both level 0)");
    fabric f5;  // a core above spine1 only
    topology& t5 = two_by_two(f5, 0);
    t5.nodes[3].peer.resize(4);
    unsigned core = f5.sw("core", 1);
    f5.cable(3, 3, core, 1);
    f5.lids(0);
    EXPECT_EQ(error_of([&] { route(t5, "ftree"); }),
              "fabric.routing=ftree: not a fat tree: spine0 has no up ports below the top level");
}

TEST(Routing, a_switch_cabled_to_nothing_is_refused_by_name) {
    fabric f;
    topology& t = two_by_two(f, 0);
    f.sw("spare", 4);
    f.lids(0);
    EXPECT_EQ(error_of([&] { route(t, "minhop"); }),
              "fabric.routing=minhop: no path from switch spare to node0 (LID 1)");
    EXPECT_EQ(error_of([&] { route(t, "updn"); }),
              "fabric.routing=updn: no path from switch spare to node0 (LID 1)");
    EXPECT_EQ(error_of([&] { route(t, "ftree"); }),
              "fabric.routing=ftree: not a fat tree: switch spare is not connected to a leaf");
}
