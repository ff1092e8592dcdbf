// The fabric's partition over ranks (model/fabric/partition.h): fabric.partition=auto on fat
// trees, partition files, the file writer, and every refusal by its exact message.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/fabric/partition.h"
#include "testbench/tests/fixtures.h"

using namespace hcasim;
using hcasim::test::error_of;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

/// Writes `text` to a temp file of this process (ctest runs the tests in parallel).
std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "partition_test_" + std::to_string(getpid()) + "_" + name;
    std::ofstream(path) << text;
    return path;
}

/// 16 hosts + SM on radix-8 switches: leaf0..3 with 4 hosts each, leaf4 with the SM, spine0..3.
topology fat16() { return make_fat_tree(16, 2, 8, 1.0, true); }

unsigned node(const topology& t, const std::string& desc) {
    for (unsigned i = 0; i < t.nodes.size(); ++i)
        if (t.nodes[i].desc == desc) return i;
    ADD_FAILURE() << "no node " << desc;
    return 0;
}

/// Every host's rank, "0 0 1 ...".
std::string host_ranks(const fabric_partition& p) {
    std::string out;
    for (unsigned r : p.host_rank) out += (out.empty() ? "" : " ") + std::to_string(r);
    return out;
}

/// The ranks of the switches, "leaf0:0 ... spine3:1".
std::string switch_ranks(const topology& t, const fabric_partition& p) {
    std::string out;
    for (unsigned s : t.switches())
        out += (out.empty() ? "" : " ") + t.nodes[s].desc + ":" + std::to_string(p.rank_of[s]);
    return out;
}

/// The cuts, "leaf0/7-spine2/1 ...".
std::string cuts(const topology& t, const fabric_partition& p) {
    std::string out;
    for (const fabric_partition::cut& c : p.cuts)
        out += (out.empty() ? "" : " ") + t.nodes[c.a].desc + "/" + std::to_string(c.pa) + "-" +
               t.nodes[c.b].desc + "/" + std::to_string(c.pb);
    return out;
}

/// Hosts per rank.
std::vector<unsigned> hosts_per_rank(const fabric_partition& p) {
    std::vector<unsigned> n(p.ranks, 0);
    for (unsigned r : p.host_rank) ++n[r];
    return n;
}

/// Every cable between switches, and whether the partition lists it as cut exactly when its
/// ends are on different ranks, in cabling order.
void expect_cuts_consistent(const topology& t, const fabric_partition& p) {
    std::vector<fabric_partition::cut> want;
    for (unsigned a : t.switches())
        for (unsigned pa = 1; pa <= t.nodes[a].ports(); ++pa) {
            const topo_end e = t.nodes[a].peer[pa];
            if (e.connected() && unsigned(e.node) > a && t.nodes[unsigned(e.node)].is_switch() &&
                p.rank_of[a] != p.rank_of[unsigned(e.node)])
                want.push_back({a, pa, unsigned(e.node), e.port});
        }
    ASSERT_EQ(p.cuts.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(p.cuts[i].a, want[i].a);
        EXPECT_EQ(p.cuts[i].pa, want[i].pa);
        EXPECT_EQ(p.cuts[i].b, want[i].b);
        EXPECT_EQ(p.cuts[i].pb, want[i].pb);
    }
    // An endport is on its switch's rank.
    for (unsigned i = 0; i < t.nodes.size(); ++i)
        if (!t.nodes[i].is_switch()) {
            EXPECT_EQ(p.rank_of[i], p.rank_of[unsigned(t.nodes[i].peer[1].node)]);
        }
}

/// Three leaves with `a`, `b` and `c` hosts under one spine, no SM.
topology uneven(unsigned a, unsigned b, unsigned c) {
    topology t;
    const unsigned hosts[3] = {a, b, c};
    for (unsigned l = 0; l < 3; ++l) t.add(topo_node::kind::sw, 16, "leaf" + std::to_string(l), 0x100 + l);
    const unsigned spine = t.add(topo_node::kind::sw, 16, "spine0", 0x200);
    for (unsigned l = 0; l < 3; ++l) {
        t.connect(l, 16, spine, l + 1);
        for (unsigned k = 0; k < hosts[l]; ++k) {
            const unsigned h =
                t.add(topo_node::kind::hca, 1, "node" + std::to_string(t.hosts()), 0x1000 + t.hosts());
            t.nodes[h].host = t.hosts();
            t.host_node.push_back(h);
            t.connect(h, 1, l, k + 1);
        }
    }
    return t;
}

/// The switches' ranks, the hosts' ranks and the cuts are these (and agree with each other).
void expect_partition(const topology& t, const fabric_partition& p, const std::string& switches,
                      const std::string& hosts, const std::string& cut_list) {
    EXPECT_EQ(switch_ranks(t, p), switches);
    EXPECT_EQ(host_ranks(p), hosts);
    EXPECT_EQ(cuts(t, p), cut_list);
    expect_cuts_consistent(t, p);
}

}  // namespace

TEST(FabricPartition, one_rank_puts_everything_on_rank_0_and_ignores_the_spec) {
    const topology t = fat16();
    for (const char* spec : {"auto", "/nonexistent/partition.txt"}) {
        const fabric_partition p = make_partition(t, 1, spec);
        EXPECT_EQ(p.ranks, 1u);
        EXPECT_EQ(p.rank_of, std::vector<unsigned>(t.nodes.size(), 0));
        EXPECT_EQ(host_ranks(p), "0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0");
        EXPECT_TRUE(p.cuts.empty());
    }
    // Even a back-to-back pair or one switch runs on one rank.
    EXPECT_EQ(make_partition(make_back_to_back(), 1, "auto").host_rank, (std::vector<unsigned>{0, 0}));
    EXPECT_TRUE(make_partition(make_single_switch(4, 8, true), 1, "auto").cuts.empty());
}

TEST(FabricPartition, auto_on_the_16_node_fat_tree_over_2_ranks_splits_the_leaves_in_half) {
    const topology t = fat16();
    const fabric_partition p = make_partition(t, 2, "auto");
    EXPECT_EQ(p.ranks, 2u);
    // leaf4 holds only the SM: it goes with leaf3. Spines round robin.
    expect_partition(t, p, "leaf0:0 leaf1:0 leaf2:1 leaf3:1 leaf4:1 spine0:0 spine1:1 spine2:0 spine3:1",
                     "0 0 0 0 0 0 0 0 1 1 1 1 1 1 1 1",
                     "leaf0/6-spine1/1 leaf0/8-spine3/1 leaf1/6-spine1/2 leaf1/8-spine3/2 leaf2/5-spine0/3 "
                     "leaf2/7-spine2/3 leaf3/5-spine0/4 leaf3/7-spine2/4 leaf4/5-spine0/5 leaf4/7-spine2/5");
    EXPECT_EQ(p.rank_of_host(7), 0u);
    EXPECT_EQ(p.rank_of_host(8), 1u);
    EXPECT_EQ(p.rank_of[unsigned(t.sm_node)], 1u);
    EXPECT_EQ(hosts_per_rank(p), (std::vector<unsigned>{8, 8}));
    // Each leaf reaches the two spines of the other rank: 10 of the 20 cables.
    EXPECT_EQ(p.cuts.size(), 10u);
}

TEST(FabricPartition, auto_on_the_16_node_fat_tree_over_3_ranks_gives_every_rank_a_contiguous_block) {
    const topology t = fat16();
    const fabric_partition p = make_partition(t, 3, "auto");
    // Weights 17, 17, 17, 17 + 5 (leaf4's SM): the middles of leaf1 and leaf2 fall in rank 1's third.
    expect_partition(t, p, "leaf0:0 leaf1:1 leaf2:1 leaf3:2 leaf4:2 spine0:0 spine1:1 spine2:2 spine3:0",
                     "0 0 0 0 1 1 1 1 1 1 1 1 2 2 2 2",
                     "leaf0/6-spine1/1 leaf0/7-spine2/1 leaf1/5-spine0/2 leaf1/7-spine2/2 leaf1/8-spine3/2 "
                     "leaf2/5-spine0/3 leaf2/7-spine2/3 leaf2/8-spine3/3 leaf3/5-spine0/4 leaf3/6-spine1/4 "
                     "leaf3/8-spine3/4 leaf4/5-spine0/5 leaf4/6-spine1/5 leaf4/8-spine3/5");
    EXPECT_EQ(hosts_per_rank(p), (std::vector<unsigned>{4, 8, 4}));
    EXPECT_EQ(p.cuts.size(), 14u);
}

TEST(FabricPartition, auto_on_the_256_node_fat_tree_over_2_ranks_balances_the_weight) {
    const topology t =
        make_fat_tree(256, 2, 36, 1.0, true);  // 15 leaves of 18 hosts (the last 4 + SM), 18 spines
    const fabric_partition p = make_partition(t, 2, "auto");
    // Weights 73 x 14 and 21: leaf7's middle (73 x 7.5 = 547.5) is past half of 1043.
    for (unsigned l = 0; l < 15; ++l)
        EXPECT_EQ(p.rank_of[node(t, "leaf" + std::to_string(l))], l < 7 ? 0u : 1u) << l;
    for (unsigned s = 0; s < 18; ++s) EXPECT_EQ(p.rank_of[node(t, "spine" + std::to_string(s))], s % 2) << s;
    for (unsigned h = 0; h < 256; ++h) EXPECT_EQ(p.rank_of_host(h), h < 126 ? 0u : 1u) << h;
    EXPECT_EQ(hosts_per_rank(p), (std::vector<unsigned>{126, 130}));
    EXPECT_EQ(p.cuts.size(), 15u * 9);  // every leaf: 9 of its 18 spines on the other rank
    expect_cuts_consistent(t, p);
}

TEST(FabricPartition, auto_gives_every_rank_a_switch_when_one_switch_outweighs_the_rest) {
    // Weights 41, 5, 5 of 51: leaf1's middle falls in rank 2's third, but rank 1 is not skipped.
    const topology heavy_first = uneven(10, 1, 1);
    expect_partition(heavy_first, make_partition(heavy_first, 3, "auto"), "leaf0:0 leaf1:1 leaf2:2 spine0:0",
                     "0 0 0 0 0 0 0 0 0 0 1 2", "leaf1/16-spine0/2 leaf2/16-spine0/3");
    // Weights 5, 5, 41: leaf1's middle falls in rank 0's third, but rank 1 needs it.
    const topology heavy_last = uneven(1, 1, 10);
    expect_partition(heavy_last, make_partition(heavy_last, 3, "auto"), "leaf0:0 leaf1:1 leaf2:2 spine0:0",
                     "0 1 2 2 2 2 2 2 2 2 2 2", "leaf1/16-spine0/2 leaf2/16-spine0/3");
}

TEST(FabricPartition, a_file_names_each_switch_by_description_quoted_name_or_guid) {
    const topology t = fat16();
    const std::string f = write_file("interleaved",
                                     "# leaves interleaved over 2 ranks\n"
                                     "\n"
                                     "leaf0 0\n"
                                     "  leaf1\t1   # comment\n"
                                     "\"leaf2\" 0\n"
                                     "leaf3 1\n"
                                     "leaf4 1\n"
                                     "spine0 0\nspine1 0\nspine2 1\n"
                                     "0xe41d2d0300000009 1\n");  // spine3
    const fabric_partition p = make_partition(t, 2, f);
    expect_partition(t, p, "leaf0:0 leaf1:1 leaf2:0 leaf3:1 leaf4:1 spine0:0 spine1:0 spine2:1 spine3:1",
                     "0 0 0 0 1 1 1 1 0 0 0 0 1 1 1 1",
                     "leaf0/7-spine2/1 leaf0/8-spine3/1 leaf1/5-spine0/2 leaf1/6-spine1/2 leaf2/7-spine2/3 "
                     "leaf2/8-spine3/3 leaf3/5-spine0/4 leaf3/6-spine1/4 leaf4/5-spine0/5 leaf4/6-spine1/5");
}

TEST(FabricPartition, write_partition_writes_the_auto_partition_as_a_file) {
    const topology t = fat16();
    std::ostringstream out;
    write_partition(t, make_partition(t, 2, "auto"), out);
    EXPECT_EQ(
        out.str(),
        "# hcasim partition: 9 switches over 2 ranks (fabric.partition=FILE; docs/fabric.md, \"Partitioned "
        "runs\")\n"
        "# rank 0: 8 hosts, 4 switches\n"
        "# rank 1: 8 hosts, 5 switches\n"
        "# 10 cut cables\n"
        "leaf0  0  # 4 hosts\n"
        "leaf1  0  # 4 hosts\n"
        "leaf2  1  # 4 hosts\n"
        "leaf3  1  # 4 hosts\n"
        "leaf4  1  # subnet manager\n"
        "spine0 0\n"
        "spine1 1\n"
        "spine2 0\n"
        "spine3 1\n");
}

TEST(FabricPartition, a_written_partition_reads_back_the_same) {
    for (unsigned ranks : {2u, 3u}) {
        const topology t = make_fat_tree(256, 2, 36, 1.0, true);
        const fabric_partition p = make_partition(t, ranks, "auto");
        std::ostringstream out;
        write_partition(t, p, out);
        const fabric_partition q =
            make_partition(t, ranks, write_file("round" + std::to_string(ranks), out.str()));
        EXPECT_EQ(q.rank_of, p.rank_of);
        EXPECT_EQ(q.host_rank, p.host_rank);
        EXPECT_EQ(cuts(t, q), cuts(t, p));
    }
}

TEST(FabricPartition, write_partition_quotes_names_with_blanks_and_names_ambiguous_switches_by_guid) {
    topology t = fat16();
    t.nodes[node(t, "leaf2")].desc = "MF0;sw ib2#a";
    t.nodes[node(t, "spine1")].desc = "spine0";  // two switches "spine0"
    const fabric_partition p = make_partition(t, 2, "auto");
    std::ostringstream out;
    write_partition(t, p, out);
    const std::string text = out.str();
    EXPECT_NE(text.find("\n\"MF0;sw ib2#a\"     1  # 4 hosts\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\n0xe41d2d0300000006 0\n0xe41d2d0300000007 1\n"), std::string::npos) << text;
    const fabric_partition q = make_partition(t, 2, write_file("quoted", text));
    EXPECT_EQ(q.rank_of, p.rank_of);
    // The ambiguous name itself is refused.
    const std::string f = write_file("ambiguous", "spine0 0\n");
    EXPECT_EQ(
        error_of([&] { make_partition(t, 2, f); }),
        f + ":1: 'spine0' names 2 switches (0xe41d2d0300000006, 0xe41d2d0300000007): name each by its GUID");
}

TEST(FabricPartition, more_ranks_than_nodes_is_refused) {
    EXPECT_EQ(error_of([] { make_partition(fat16(), 17, "auto"); }),
              "fabric.partition: 17 ranks for 16 nodes: every rank simulates at least one node; run with at "
              "most 16 "
              "ranks");
}

TEST(FabricPartition, a_fabric_without_switches_is_refused_with_more_than_one_rank) {
    EXPECT_EQ(error_of([] { make_partition(make_back_to_back(), 2, "auto"); }),
              "fabric.partition: 2 ranks for a fabric without switches: a partition cuts cables between "
              "switches; run "
              "with one rank");
}

TEST(FabricPartition, a_fabric_of_one_switch_is_refused_with_more_than_one_rank) {
    EXPECT_EQ(
        error_of([] { make_partition(make_single_switch(4, 8, true), 2, "auto"); }),
        "fabric.partition: 2 ranks for a fabric of one switch ('switch0'): a partition cuts cables between "
        "switches and it has none; run with one rank");
}

TEST(FabricPartition, more_ranks_than_switches_with_hosts_is_refused) {
    EXPECT_EQ(error_of([] { make_partition(fat16(), 5, "auto"); }),
              "fabric.partition: 5 ranks for 4 switches with hosts: every rank needs one (a host runs on the "
              "rank of "
              "its switch); run with at most 4 ranks");
}

TEST(FabricPartition, an_empty_spec_is_refused) {
    EXPECT_EQ(error_of([] { make_partition(fat16(), 2, ""); }),
              "fabric.partition is empty: 'auto' or the path of a partition file");
}

TEST(FabricPartition, a_file_that_cannot_be_opened_is_refused) {
    EXPECT_EQ(error_of([] { make_partition(fat16(), 2, "/nonexistent/p.txt"); }),
              "cannot open partition file '/nonexistent/p.txt': No such file or directory");
}

TEST(FabricPartition, syntax_errors_are_refused_with_file_and_line) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"leaf0", "syntax error: no rank in 'leaf0' (expected: <switch> <rank>)"},
        {"leaf0 one",
         "syntax error: rank 'one' is not a decimal number in 'leaf0 one' (expected: <switch> <rank>)"},
        {"leaf0 1 2", "syntax error: '2' after the rank in 'leaf0 1 2' (expected: <switch> <rank>)"},
        {"\"leaf0 1", "syntax error: unterminated quote in '\"leaf0 1' (expected: <switch> <rank>)"},
        {"\"leaf0\"1",
         "syntax error: no blank after the quoted switch in '\"leaf0\"1' (expected: <switch> <rank>)"},
        {"0xzz 1",
         "syntax error: '0xzz' is not a GUID (0x and 1 to 16 hex digits; quote a name) in '0xzz 1' "
         "(expected: "
         "<switch> <rank>)"},
    };
    for (const auto& [line, why] : cases) {
        const std::string f = write_file("syntax", "# a comment\nleaf1 0\n" + line + "\n");
        EXPECT_EQ(error_of([&] { make_partition(fat16(), 2, f); }), f + ":3: " + why) << line;
    }
}

TEST(FabricPartition, an_unknown_switch_is_refused) {
    const std::vector<std::pair<std::string, std::string>> cases = {
        {"leaf9 0", "no switch 'leaf9' in the fabric"},
        {"node3 0", "'node3' is not a switch (an endport runs on the rank of the switch it is cabled to)"},
        {"0x1234 0", "no switch with GUID '0x1234' in the fabric"},
        {"0x0002c90300000010 0",  // host 0
         "'0x0002c90300000010' is the GUID of 'node0', not a switch (an endport runs on the rank of the "
         "switch it "
         "is cabled to)"},
    };
    for (const auto& [line, why] : cases) {
        const std::string f = write_file("unknown", line + "\n");
        EXPECT_EQ(error_of([&] { make_partition(fat16(), 2, f); }), f + ":1: " + why) << line;
    }
}

TEST(FabricPartition, a_switch_named_twice_is_refused) {
    const std::string f = write_file("twice", "leaf0 0\nleaf1 1\n0xe41d2d0300000001 1\n");  // leaf0's GUID
    EXPECT_EQ(error_of([&] { make_partition(fat16(), 2, f); }),
              f + ":3: switch 'leaf0' named twice (also at line 1)");
}

TEST(FabricPartition, a_rank_beyond_the_run_is_refused) {
    const std::string f = write_file("beyond", "leaf0 0\nleaf1 2\n");
    EXPECT_EQ(error_of([&] { make_partition(fat16(), 2, f); }),
              f + ":2: rank 2 for switch 'leaf1', but the run has 2 ranks (0..1)");
    const std::string g = write_file("huge", "leaf1 99999999999999999999\n");
    EXPECT_EQ(error_of([&] { make_partition(fat16(), 3, g); }),
              g + ":1: rank 99999999999999999999 for switch 'leaf1', but the run has 3 ranks (0..2)");
}

TEST(FabricPartition, a_file_that_does_not_cover_the_fabric_is_refused) {
    const std::string f =
        write_file("partial", "leaf0 0\nleaf1 0\nleaf2 1\nleaf3 1\nleaf4 1\nspine0 0\nspine1 1\n");
    EXPECT_EQ(error_of([&] { make_partition(fat16(), 2, f); }),
              f + ": does not cover the fabric: switch 'spine2' (and 1 more) has no rank");
    const std::string g = write_file("partial1",
                                     "leaf0 0\nleaf1 0\nleaf2 1\nleaf3 1\nleaf4 1\nspine0 0\nspine1 1\n"
                                     "spine3 1\n");
    EXPECT_EQ(error_of([&] { make_partition(fat16(), 2, g); }),
              g + ": does not cover the fabric: switch 'spine2' has no rank");
}

TEST(FabricPartition, a_rank_without_a_host_is_refused) {
    const std::string f = write_file("hostless",
                                     "leaf0 0\nleaf1 0\nleaf2 0\nleaf3 1\nleaf4 1\n"
                                     "spine0 2\nspine1 2\nspine2 2\nspine3 2\n");
    EXPECT_EQ(error_of([&] { make_partition(fat16(), 3, f); }), f + ": rank 2 has no host");
}
