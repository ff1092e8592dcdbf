// The fabric's graph (model/fabric/topology.h): the built shapes cable by cable, LIDs, and
// ibnetdiscover's format read and written, with every bad input named by file and line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/fabric/topology.h"
#include "testbench/tests/fixtures.h"

using namespace hcasim;
using hcasim::test::error_of;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

/// Writes `text` to a temp file of this process (ctest runs the tests in parallel).
std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "topology_test_" + std::to_string(getpid()) + "_" + name;
    std::ofstream(path) << text;
    return path;
}

/// Node index of the node described `desc`.
unsigned node(const topology& t, const std::string& desc) {
    for (unsigned i = 0; i < t.nodes.size(); ++i)
        if (t.nodes[i].desc == desc) return i;
    ADD_FAILURE() << "no node " << desc;
    return 0;
}

/// "spine1/3": the far end of port `port` of the node described `desc`; "-" if not cabled.
std::string far(const topology& t, const std::string& desc, unsigned port) {
    const topo_end e = t.nodes.at(node(t, desc)).peer.at(port);
    if (!e.connected()) return "-";
    const topo_end back = t.nodes[unsigned(e.node)].peer.at(e.port);  // cables are symmetric
    EXPECT_EQ(back.node, int(node(t, desc)));
    EXPECT_EQ(back.port, port);
    return t.nodes[unsigned(e.node)].desc + "/" + std::to_string(e.port);
}

/// Every port of `desc`, "far end" per port, space-separated.
std::string cabling(const topology& t, const std::string& desc) {
    std::string out;
    for (unsigned p = 1; p <= t.nodes.at(node(t, desc)).ports(); ++p)
        out += (p > 1 ? " " : "") + far(t, desc, p);
    return out;
}

std::vector<std::string> descs(const topology& t) {
    std::vector<std::string> out;
    for (const topo_node& n : t.nodes) out.push_back(n.desc);
    return out;
}

topology round_trip(const topology& t, const std::string& name) {
    std::ostringstream text;
    write_ibnetdiscover(t, text, "4xEDR");
    return read_ibnetdiscover(write_file(name, text.str()));
}

}  // namespace

// ---- Built shapes ----

TEST(Topology, back_to_back_cables_two_hosts_port_1_to_port_1) {
    const topology t = make_back_to_back();
    EXPECT_EQ(descs(t), (std::vector<std::string>{"node0", "node1"}));
    EXPECT_EQ(cabling(t, "node0"), "node1/1");
    EXPECT_EQ(t.hosts(), 2u);
    EXPECT_EQ(t.sm_node, -1);
    EXPECT_TRUE(t.switches().empty());
    EXPECT_EQ(t.nodes[0].guid, 0x0002c90300000010ull);
    EXPECT_EQ(t.nodes[1].guid, 0x0002c90300000020ull);
}

TEST(Topology, single_switch_puts_host_i_on_port_i_plus_1_and_the_sm_after_them) {
    const topology t = make_single_switch(3, 8, true);
    EXPECT_EQ(descs(t), (std::vector<std::string>{"switch0", "node0", "node1", "node2", "subnet manager"}));
    EXPECT_EQ(cabling(t, "switch0"), "node0/1 node1/1 node2/1 subnet manager/1 - - - -");
    EXPECT_EQ(t.host_node, (std::vector<unsigned>{1, 2, 3}));
    EXPECT_EQ(t.sm_node, 4);
    EXPECT_TRUE(t.nodes[4].is_sm);
    EXPECT_EQ(t.nodes[3].host, 2u);
    EXPECT_EQ(t.switches(), std::vector<unsigned>{0});
    EXPECT_EQ(t.nodes[0].guid, 0xe41d2d0300000001ull);
    EXPECT_EQ(t.nodes[4].guid, 0x0002c90300000040ull);  // endport 3: after the hosts
    EXPECT_EQ(make_single_switch(8, 8, false).nodes[0].peer[8].node, 8);
}

TEST(Topology, single_switch_refuses_more_hosts_than_the_radix) {
    EXPECT_EQ(error_of([] { make_single_switch(8, 8, true); }),
              "fabric.nodes=8 (+1 subnet manager) do not fit on one switch of fabric.switch.radix=8 ports");
    EXPECT_EQ(error_of([] { make_single_switch(9, 8, false); }),
              "fabric.nodes=9 do not fit on one switch of fabric.switch.radix=8 ports");
    EXPECT_EQ(error_of([] { make_single_switch(0, 8, false); }),
              "fabric.nodes=0: a fabric needs at least one host");
    EXPECT_EQ(error_of([] { make_single_switch(2, 255, false); }),
              "fabric.switch.radix=255: a switch has at most 254 ports");
}

TEST(FatTree, two_levels_are_cabled_port_by_port_as_documented) {
    // Radix 4, 1:1: leaves have ports 1-2 down, 3-4 up; 5 hosts + the SM fill 3 leaves; 2 spines.
    const topology t = make_fat_tree(5, 2, 4, 1, true);
    EXPECT_EQ(descs(t), (std::vector<std::string>{"leaf0", "leaf1", "leaf2", "spine0", "spine1", "node0",
                                                  "node1", "node2", "node3", "node4", "subnet manager"}));
    EXPECT_EQ(cabling(t, "leaf0"), "node0/1 node1/1 spine0/1 spine1/1");
    EXPECT_EQ(cabling(t, "leaf1"), "node2/1 node3/1 spine0/2 spine1/2");
    EXPECT_EQ(cabling(t, "leaf2"), "node4/1 subnet manager/1 spine0/3 spine1/3");
    EXPECT_EQ(cabling(t, "spine0"), "leaf0/3 leaf1/3 leaf2/3 -");
    EXPECT_EQ(cabling(t, "spine1"), "leaf0/4 leaf1/4 leaf2/4 -");
    for (const char* d : {"leaf0", "leaf1", "leaf2"}) EXPECT_EQ(t.nodes[node(t, d)].level, 0u) << d;
    EXPECT_EQ(t.nodes[node(t, "spine1")].level, 1u);
    EXPECT_EQ(t.host_node, (std::vector<unsigned>{5, 6, 7, 8, 9}));
    EXPECT_EQ(t.sm_node, 10);
    EXPECT_EQ(t.nodes[node(t, "spine1")].guid, 0xe41d2d0300000005ull);
}

TEST(FatTree, three_levels_are_cabled_port_by_port_as_documented) {
    // Radix 4, 1:1: leaves 2 down / 2 up; pods of 2 leaves and 2 spines; 9 hosts + the SM fill
    // 5 leaves in 3 pods; 2 x 2 cores, each with one port per pod.
    const topology t = make_fat_tree(9, 3, 4, 1, true);
    EXPECT_EQ(t.switches().size(), 5u + 6u + 4u);
    EXPECT_EQ(cabling(t, "leaf0"), "node0/1 node1/1 spine0/1 spine1/1");
    EXPECT_EQ(cabling(t, "leaf1"), "node2/1 node3/1 spine0/2 spine1/2");
    EXPECT_EQ(cabling(t, "leaf2"), "node4/1 node5/1 spine2/1 spine3/1");
    EXPECT_EQ(cabling(t, "leaf3"), "node6/1 node7/1 spine2/2 spine3/2");
    EXPECT_EQ(cabling(t, "leaf4"), "node8/1 subnet manager/1 spine4/1 spine5/1");
    EXPECT_EQ(cabling(t, "spine0"), "leaf0/3 leaf1/3 core0/1 core1/1");
    EXPECT_EQ(cabling(t, "spine1"), "leaf0/4 leaf1/4 core2/1 core3/1");
    EXPECT_EQ(cabling(t, "spine2"), "leaf2/3 leaf3/3 core0/2 core1/2");
    EXPECT_EQ(cabling(t, "spine3"), "leaf2/4 leaf3/4 core2/2 core3/2");
    EXPECT_EQ(cabling(t, "spine4"), "leaf4/3 - core0/3 core1/3");
    EXPECT_EQ(cabling(t, "spine5"), "leaf4/4 - core2/3 core3/3");
    EXPECT_EQ(cabling(t, "core0"), "spine0/3 spine2/3 spine4/3 -");
    EXPECT_EQ(cabling(t, "core1"), "spine0/4 spine2/4 spine4/4 -");
    EXPECT_EQ(cabling(t, "core2"), "spine1/3 spine3/3 spine5/3 -");
    EXPECT_EQ(cabling(t, "core3"), "spine1/4 spine3/4 spine5/4 -");
    EXPECT_EQ(t.nodes[node(t, "leaf4")].level, 0u);
    EXPECT_EQ(t.nodes[node(t, "spine5")].level, 1u);
    EXPECT_EQ(t.nodes[node(t, "core3")].level, 2u);
    EXPECT_EQ(node(t, "node0"), 15u);  // after the 15 switches
}

TEST(FatTree, oversubscription_sets_the_leaves_down_to_up_ports) {
    auto leaf0 = [](double o) {  // a full first leaf of radix 36
        const topology t = make_fat_tree(100, 2, 36, o, false);
        unsigned down = 0, up = 0, first_up = 0, unused = 0;
        for (unsigned p = 1; p <= 36; ++p) {
            const topo_end e = t.nodes[0].peer[p];
            if (!e.connected())
                ++unused;
            else if (t.nodes[unsigned(e.node)].is_switch())
                first_up = up++ ? first_up : p;
            else
                ++down;
        }
        return "down " + std::to_string(down) + " up " + std::to_string(up) + " from port " +
               std::to_string(first_up) + " unused " + std::to_string(unused);
    };
    EXPECT_EQ(leaf0(1), "down 18 up 18 from port 19 unused 0");
    EXPECT_EQ(leaf0(2), "down 24 up 12 from port 25 unused 0");
    EXPECT_EQ(leaf0(3), "down 27 up 9 from port 28 unused 0");
    EXPECT_EQ(leaf0(1.5), "down 21 up 14 from port 22 unused 1");  // 21 = 1.5 x 14; port 36 unused
    const topology t = make_fat_tree(25, 2, 36, 2, false);
    EXPECT_EQ(far(t, "leaf0", 24), "node23/1");
    EXPECT_EQ(far(t, "leaf0", 25), "spine0/1");
    EXPECT_EQ(far(t, "leaf1", 1), "node24/1");
    EXPECT_EQ(t.switches().size(), 2u + 12u);
}

TEST(FatTree, a_radix_too_small_or_an_impossible_shape_is_refused_naming_the_keys) {
    EXPECT_EQ(
        error_of([] { make_fat_tree(4, 2, 2, 2, false); }),
        "fabric.switch.radix=2 is too small for a 2-level fat tree (fabric.fat_tree.levels) of radix 2 "
        "(fabric.switch.radix) with oversubscription 2 (fabric.fat_tree.oversubscription): a leaf needs at "
        "least one up port and 2 times as many down ports");
    EXPECT_EQ(error_of([] { make_fat_tree(16, 2, 4, 1, true); }),
              "fabric.nodes=16 (+1 subnet manager) do not fit a 2-level fat tree (fabric.fat_tree.levels) of "
              "radix 4 "
              "(fabric.switch.radix) with oversubscription 1 (fabric.fat_tree.oversubscription): at most 8 "
              "endports; "
              "raise fabric.switch.radix or fabric.fat_tree.levels");
    EXPECT_EQ(error_of([] { make_fat_tree(17, 3, 4, 1, false); }),
              "fabric.nodes=17 do not fit a 3-level fat tree (fabric.fat_tree.levels) of radix 4 "
              "(fabric.switch.radix) "
              "with oversubscription 1 (fabric.fat_tree.oversubscription): at most 16 endports; raise "
              "fabric.switch.radix");
    EXPECT_EQ(error_of([] { make_fat_tree(4, 4, 36, 1, false); }),
              "fabric.fat_tree.levels=4: a fat tree has 2 (leaf/spine) or 3 (leaf/spine/core) levels");
    EXPECT_EQ(
        error_of([] { make_fat_tree(4, 2, 36, 0.5, false); }),
        "fabric.fat_tree.oversubscription=0.5: the leaves' down:up ratio must be a number >= 1 (1: full "
        "bisection)");
    EXPECT_EQ(make_fat_tree(16, 3, 4, 1, false).hosts(), 16u);  // exactly full
}

TEST(FatTree, a_thousand_hosts_build_on_three_levels_of_radix_32_and_36) {
    const topology t36 = make_fat_tree(1024, 3, 36, 1, true);
    // 1025 endports / 18 = 57 leaves in 4 pods of 18 spines; 18 x 18 cores.
    EXPECT_EQ(t36.switches().size(), 57u + 72u + 324u);
    EXPECT_EQ(t36.hosts(), 1024u);
    EXPECT_EQ(far(t36, "node1023", 1), "leaf56/16");
    topology with_lids = t36;
    assign_lids(with_lids, 0);
    EXPECT_TRUE(round_trip(with_lids, "rt1024") == with_lids);
    const topology t32 = make_fat_tree(8191, 3, 32, 1, true);  // 32^3 / 4 = 8192 endports
    EXPECT_EQ(t32.switches().size(), 512u + 512u + 256u);
    EXPECT_EQ(far(t32, "subnet manager", 1), "leaf511/16");
    EXPECT_EQ(far(t32, "core255", 32), "spine511/32");
}

// ---- LIDs ----

TEST(Topology, assign_lids_gives_endports_aligned_ranges_then_the_switches) {
    topology t = make_fat_tree(3, 2, 4, 1, true);  // 2 leaves, 2 spines
    assign_lids(t, 2);
    EXPECT_EQ(t.lmc, 2u);
    EXPECT_EQ(t.nodes[node(t, "node0")].lid, 4);
    EXPECT_EQ(t.nodes[node(t, "node2")].lid, 12);
    EXPECT_EQ(t.nodes[node(t, "subnet manager")].lid, 16);
    EXPECT_EQ(t.nodes[node(t, "leaf0")].lid, 20);
    EXPECT_EQ(t.nodes[node(t, "spine1")].lid, 23);
    topology b = make_back_to_back();
    assign_lids(b, 0);
    EXPECT_EQ(b.nodes[1].lid, 2);
}

TEST(Topology, assign_lids_refuses_lids_past_the_unicast_range) {
    topology t = make_fat_tree(1024, 3, 36, 1, true);
    EXPECT_EQ(error_of([&] { assign_lids(t, 6); }),
              "fabric.nodes=1024 with fabric.lmc=6 and 453 switches need LIDs up to 66116, past the last "
              "unicast LID "
              "49151 (0xBFFF)");
    EXPECT_EQ(error_of([&] { assign_lids(t, 8); }), "fabric.lmc=8: the LMC is 0..7");
    assign_lids(t, 5);
    EXPECT_EQ(t.nodes[t.switches().back()].lid, (1026 << 5) + 452);
}

// ---- ibnetdiscover's format ----

TEST(Ibnetdiscover, written_as_the_real_tool_prints_it) {
    topology t = make_single_switch(2, 4, true);
    assign_lids(t, 1);
    std::ostringstream out;
    write_ibnetdiscover(t, out, "4xEDR");
    EXPECT_EQ(out.str(),
              "#\n# Topology file: written by hcasim\n#\n"
              "# Initiated from node 0002c90300000030 port 0002c90300000031\n"
              "\nvendid=0x2c9\ndevid=0xcb20\nsysimgguid=0xe41d2d0300000001\n"
              "switchguid=0xe41d2d0300000001(e41d2d0300000001)\n"
              "Switch\t4 \"S-e41d2d0300000001\"\t\t# \"switch0\" enhanced port 0 lid 8 lmc 0\n"
              "[1]\t\"H-0002c90300000010\"[1](2c90300000011) \t\t# \"node0\" lid 2 4xEDR\n"
              "[2]\t\"H-0002c90300000020\"[1](2c90300000021) \t\t# \"node1\" lid 4 4xEDR\n"
              "[3]\t\"H-0002c90300000030\"[1](2c90300000031) \t\t# \"subnet manager\" lid 6 4xEDR\n"
              "\nvendid=0x2c9\ndevid=0x4843\nsysimgguid=0x2c90300000010\ncaguid=0x2c90300000010\n"
              "Ca\t1 \"H-0002c90300000010\"\t\t# \"node0\"\n"
              "[1](2c90300000011) \t\"S-e41d2d0300000001\"[1]\t\t# lid 2 lmc 1 \"switch0\" lid 8 4xEDR\n"
              "\nvendid=0x2c9\ndevid=0x4843\nsysimgguid=0x2c90300000020\ncaguid=0x2c90300000020\n"
              "Ca\t1 \"H-0002c90300000020\"\t\t# \"node1\"\n"
              "[1](2c90300000021) \t\"S-e41d2d0300000001\"[2]\t\t# lid 4 lmc 1 \"switch0\" lid 8 4xEDR\n"
              "\nvendid=0x2c9\ndevid=0x4843\nsysimgguid=0x2c90300000030\ncaguid=0x2c90300000030\n"
              "Ca\t1 \"H-0002c90300000030\"\t\t# \"subnet manager\"\n"
              "[1](2c90300000031) \t\"S-e41d2d0300000001\"[3]\t\t# lid 6 lmc 1 \"switch0\" lid 8 4xEDR\n");
}

TEST(Ibnetdiscover, reading_what_was_written_gives_the_same_fabric) {
    topology two = make_fat_tree(5, 2, 4, 1, true);
    assign_lids(two, 1);
    EXPECT_TRUE(round_trip(two, "rt2") == two);
    topology three = make_fat_tree(100, 3, 8, 1, true);
    assign_lids(three, 0);
    EXPECT_TRUE(round_trip(three, "rt3") == three);
    topology over = make_fat_tree(40, 2, 12, 3, false);  // no SM
    EXPECT_TRUE(round_trip(over, "rto") == over);
    const topology b2b = make_back_to_back();
    EXPECT_TRUE(round_trip(b2b, "rtb") == b2b);
    const topology sw = make_single_switch(7, 36, true);
    EXPECT_TRUE(round_trip(sw, "rts") == sw);
    // ... and the comparison sees a difference.
    topology moved = two;
    moved.nodes[0].desc = "leafX";
    EXPECT_FALSE(round_trip(moved, "rtm") == two);
}

TEST(Ibnetdiscover, reads_the_real_tools_output_with_hosts_in_ca_order) {
    const std::string path = write_file("real", R"(#
# Topology file: generated on Sun Dec  6 06:00:00 2026
#
# Initiated from node 0002c90300bb0010 port 0002c90300bb0011

vendid=0x2c9
devid=0xcb20
sysimgguid=0xe41d2d0300aa0001
switchguid=0xe41d2d0300aa0001(e41d2d0300aa0001)
Switch	36 "S-e41d2d0300aa0001"		# "MF0;leaf1:MSB7700/U1" enhanced port 0 lid 3 lmc 0
[1]	"H-0002c90300bb0010"[1](2c90300bb0011) 		# "node01 HCA-1" lid 6 4xEDR
[2]	"H-0002c90300bb0020"[1](2c90300bb0021) 		# "node02 HCA-1" lid 8 4xEDR
[35]	"S-e41d2d0300aa0002"[1]		# "MF0;spine1:MSB7700/U1" lid 2 4xEDR

vendid=0x2c9
devid=0xcb20
sysimgguid=0xe41d2d0300aa0002
switchguid=0xe41d2d0300aa0002(e41d2d0300aa0002)
Switch	36 "S-e41d2d0300aa0002"		# "MF0;spine1:MSB7700/U1" enhanced port 0 lid 2 lmc 0
[1]	"S-e41d2d0300aa0001"[35]		# "MF0;leaf1:MSB7700/U1" lid 3 4xEDR
[2]	"S-e41d2d0300aa0003"[36]		# "MF0;leaf2:MSB7700/U1" lid 4 4xEDR

vendid=0x2c9
devid=0xcb20
sysimgguid=0xe41d2d0300aa0003
switchguid=0xe41d2d0300aa0003(e41d2d0300aa0003)
Switch	36 "S-e41d2d0300aa0003"		# "MF0;leaf2:MSB7700/U1" base port 0 lid 4 lmc 0
[5]	"H-0002c90300bb0030"[1](2c90300bb0031) 		# "node03 HCA-1" lid 10 4xEDR
[36]	"S-e41d2d0300aa0002"[2]		# "MF0;spine1:MSB7700/U1" lid 2 4xEDR

vendid=0x2c9
devid=0x1017
sysimgguid=0x2c90300bb0030
caguid=0x2c90300bb0030
Ca	1 "H-0002c90300bb0030"		# "node03 HCA-1"
[1](2c90300bb0031) 	"S-e41d2d0300aa0003"[5]		# lid 10 lmc 1 "MF0;leaf2:MSB7700/U1" lid 4 4xEDR

vendid=0x2c9
devid=0x1017
sysimgguid=0x2c90300bb0010
caguid=0x2c90300bb0010
Ca	2 "H-0002c90300bb0010"		# "node01 HCA-1"
[1](2c90300bb0011) 	"S-e41d2d0300aa0001"[1]		# lid 6 lmc 1 "MF0;leaf1:MSB7700/U1" lid 3 4xEDR

vendid=0x2c9
devid=0x1017
sysimgguid=0x2c90300bb0020
caguid=0x2c90300bb0020
Ca	1 "H-0002c90300bb0020"		# "node02 HCA-1"
[1](2c90300bb0021) 	"S-e41d2d0300aa0001"[2]		# lid 8 lmc 1 "MF0;leaf1:MSB7700/U1" lid 3 4xEDR
)");
    const topology t = read_ibnetdiscover(path);
    EXPECT_EQ(descs(t), (std::vector<std::string>{"MF0;leaf1:MSB7700/U1", "MF0;spine1:MSB7700/U1",
                                                  "MF0;leaf2:MSB7700/U1", "node03 HCA-1", "node01 HCA-1",
                                                  "node02 HCA-1"}));
    EXPECT_EQ(t.host_node, (std::vector<unsigned>{3, 4, 5}));  // CAs in file order
    EXPECT_EQ(t.sm_node, -1);
    EXPECT_EQ(t.lmc, 1u);
    EXPECT_EQ(t.nodes[0].ports(), 36u);
    EXPECT_EQ(t.nodes[4].ports(), 1u);  // a dual-port CA with port 1 cabled: hcasim's one-port HCA
    EXPECT_EQ(t.nodes[0].guid, 0xe41d2d0300aa0001ull);
    EXPECT_EQ(t.nodes[3].guid, 0x0002c90300bb0030ull);
    EXPECT_EQ(far(t, "MF0;leaf1:MSB7700/U1", 1), "node01 HCA-1/1");
    EXPECT_EQ(far(t, "MF0;leaf1:MSB7700/U1", 2), "node02 HCA-1/1");
    EXPECT_EQ(far(t, "MF0;leaf1:MSB7700/U1", 35), "MF0;spine1:MSB7700/U1/1");
    EXPECT_EQ(far(t, "MF0;leaf2:MSB7700/U1", 5), "node03 HCA-1/1");
    EXPECT_EQ(far(t, "MF0;leaf2:MSB7700/U1", 36), "MF0;spine1:MSB7700/U1/2");
    EXPECT_EQ(far(t, "MF0;leaf1:MSB7700/U1", 3), "-");
    EXPECT_EQ(t.nodes[0].lid, 3);
    EXPECT_EQ(t.nodes[2].lid, 4);
    EXPECT_EQ(t.nodes[3].lid, 10);
    EXPECT_EQ(t.nodes[4].lid, 6);
    EXPECT_EQ(t.nodes[0].level, 0u);  // hops to the nearest CA - 1
    EXPECT_EQ(t.nodes[1].level, 1u);
    EXPECT_EQ(t.nodes[2].level, 0u);
    EXPECT_TRUE(round_trip(t, "real_rt") == t);
}

TEST(Ibnetdiscover, the_example_topologies_are_what_the_writer_prints_for_them) {
    // Built by hand in canonical order (switches, hosts, SM) with the builders' GUIDs.
    auto fabric = [](unsigned switches, unsigned ports) {
        topology t;
        for (unsigned k = 0; k < switches; ++k)
            t.add(topo_node::kind::sw, ports, "switch" + std::to_string(k), 0xe41d2d0300000001ull + k);
        for (unsigned i = 0; i < 4; ++i) {
            t.host_node.push_back(t.add(topo_node::kind::hca, 1, "node" + std::to_string(i),
                                        0x0002c90300000000ull + 0x10 * (i + 1)));
            t.nodes.back().host = i;
        }
        t.sm_node = int(t.add(topo_node::kind::hca, 1, "subnet manager", 0x0002c90300000050ull));
        t.nodes.back().is_sm = true;
        return t;
    };
    // configs/topologies/ring4.topo: four 4-port switches in a ring (port 2 to the next one's
    // port 3), host i on port 1 of switch i, the SM on port 4 of switch 0.
    topology ring = fabric(4, 4);
    for (unsigned i = 0; i < 4; ++i) {
        ring.connect(i, 1, ring.host_node[i], 1);
        ring.connect(i, 2, (i + 1) % 4, 3);
    }
    ring.connect(0, 4, unsigned(ring.sm_node), 1);
    // configs/topologies/two-switches.topo: hosts 0 and 1 on ports 1 and 2 of switch 0, hosts 2
    // and 3 on ports 1 and 2 of switch 1, two cables between the switches (ports 3 and 4 to
    // ports 3 and 4), the SM on port 5 of switch 0; 8-port switches.
    topology two = fabric(2, 8);
    for (unsigned i = 0; i < 4; ++i) two.connect(i / 2, i % 2 + 1, two.host_node[i], 1);
    two.connect(0, 3, 1, 3);
    two.connect(0, 4, 1, 4);
    two.connect(0, 5, unsigned(two.sm_node), 1);
    for (auto& [t, file] : {std::pair<topology*, std::string>{&ring, "ring4.topo"},
                            std::pair<topology*, std::string>{&two, "two-switches.topo"}}) {
        assign_lids(*t, 0);
        const std::string path = std::string(HCASIM_SOURCE_DIR) + "/configs/topologies/" + file;
        std::ifstream in(path);
        std::stringstream on_disk;
        on_disk << in.rdbuf();
        std::ostringstream written;
        write_ibnetdiscover(*t, written, "4xEDR");
        EXPECT_EQ(on_disk.str(), written.str()) << file;
        EXPECT_TRUE(read_ibnetdiscover(path) == *t) << file;
    }
}

// ---- Bad input: every error names the file, the line and what is wrong ----

namespace {

// A valid fabric: one switch, two CAs (line numbers matter to the tests below).
const std::vector<std::string> SMALL = {
    "# a small fabric",                                                                    // 1
    "Switch\t8 \"S-e41d2d0300000001\"\t\t# \"sw\" enhanced port 0 lid 3 lmc 0",            // 2
    "[1]\t\"H-0002c90300000010\"[1](2c90300000011) \t\t# \"node0\" lid 1 4xEDR",           // 3
    "[2]\t\"H-0002c90300000020\"[1](2c90300000021) \t\t# \"node1\" lid 2 4xEDR",           // 4
    "",                                                                                    // 5
    "Ca\t1 \"H-0002c90300000010\"\t\t# \"node0\"",                                         // 6
    "[1](2c90300000011) \t\"S-e41d2d0300000001\"[1]\t\t# lid 1 lmc 0 \"sw\" lid 3 4xEDR",  // 7
    "",                                                                                    // 8
    "Ca\t1 \"H-0002c90300000020\"\t\t# \"node1\"",                                         // 9
    "[1](2c90300000021) \t\"S-e41d2d0300000001\"[2]\t\t# lid 2 lmc 0 \"sw\" lid 3 4xEDR",  // 10
};

/// SMALL with lines replaced (line number, 1-based -> text, several lines if it has '\n'),
/// written to a file; the error reading it, with the file's path replaced by "F".
std::string error_with_lines(const std::map<unsigned, std::string>& changed) {
    std::string file;
    for (unsigned i = 0; i < SMALL.size(); ++i)
        file += (changed.count(i + 1) ? changed.at(i + 1) : SMALL[i]) + "\n";
    const std::string path = write_file("bad", file);
    std::string e = error_of([&] { read_ibnetdiscover(path); });
    if (e.compare(0, path.size(), path) == 0) e.replace(0, path.size(), "F");
    return e;
}
std::string error_with_line(unsigned n, const std::string& text) { return error_with_lines({{n, text}}); }

}  // namespace

TEST(IbnetdiscoverBadInput, the_small_fabric_the_cases_start_from_is_valid) {
    std::string file;
    for (const std::string& l : SMALL) file += l + "\n";
    const topology t = read_ibnetdiscover(write_file("small", file));
    EXPECT_EQ(t.hosts(), 2u);
    EXPECT_EQ(far(t, "sw", 2), "node1/1");
}

TEST(IbnetdiscoverBadInput, syntax_errors_name_the_line_and_what_was_expected) {
    EXPECT_EQ(error_with_line(4, "[2]\t\"H-0002c90300000020\"[x]"),
              "F:4: syntax error: expected the peer's port number, found 'x]'");
    EXPECT_EQ(
        error_with_line(4, "[2]\tH-0002c90300000020[1]"),
        "F:4: syntax error: expected a node id \"S-<GUID>\" or \"H-<GUID>\", found 'H-0002c90300000020[1]'");
    EXPECT_EQ(error_with_line(6, "Ca\t\"H-0002c90300000010\""),
              "F:6: syntax error: expected the node's port count, found '\"H-0002c90300000010\"'");
    EXPECT_EQ(error_with_line(6, "Swich\t8 \"S-e41d2d0300000009\""),
              "F:6: syntax error: expected a node header (Switch, Ca), a link line ([port] "
              "\"S-<GUID>\"[port]), an id "
              "line (vendid=, caguid=, ...) or a # comment, found 'Swich\t8 \"S-e41d2d0300000009\"'");
    EXPECT_EQ(error_with_line(7, "[1]\t\"S-e41d2d0300000001\"[1]"),
              "F:7: syntax error: expected the port GUID in parentheses after a CA's port, found "
              "'\t\"S-e41d2d0300000001\"[1]'");
    EXPECT_EQ(error_with_line(3, "[1]\t\"H-0002c90300000010\"[1] trailing"),
              "F:3: syntax error: expected a # comment or the end of the line, found 'trailing'");
    EXPECT_EQ(error_with_line(1, "vendid=2c9"),
              "F:1: syntax error: expected a hexadecimal value 0x..., found '2c9'");
    EXPECT_EQ(error_with_line(6, "Ca\t1 \"S-0002c90300000010\"\t\t# \"node0\""),
              "F:6: Ca header with the id of a switch (\"S-...\")");
    EXPECT_EQ(error_with_line(1, "[1]\t\"H-0002c90300000010\"[1]"),
              "F:1: a link line before any Switch or Ca header");
    EXPECT_EQ(error_with_line(4, "[0]\t\"H-0002c90300000020\"[1]"), "F:4: a port number 0: ports are 1..254");
}

TEST(IbnetdiscoverBadInput, routers_are_refused) {
    EXPECT_EQ(error_with_line(9, "Rt\t1 \"R-0002c90300000020\"\t\t# \"router\""),
              "F:9: a router (Rt): hcasim models switches and CAs only");
    EXPECT_EQ(error_with_line(4, "[2]\t\"R-0002c90300000020\"[1]"),
              "F:4: a link to a router (\"R-...\"): hcasim models switches and CAs only");
}

TEST(IbnetdiscoverBadInput, a_dangling_link_names_the_guid_nobody_declares) {
    EXPECT_EQ(error_with_line(4, "[2]\t\"H-0002c90300000030\"[1](2c90300000031) \t\t# \"node9\" lid 2 4xEDR"),
              "F:4: dangling link: \"H-0002c90300000030\" port 1 is not a node of the file");
    EXPECT_EQ(error_with_line(3, "[1]\t\"S-0002c90300000010\"[1]"),
              "F:3: link to \"S-0002c90300000010\", but line 6 declares that GUID as \"H-0002c90300000010\"");
}

TEST(IbnetdiscoverBadInput, a_mismatched_link_names_both_lines) {
    EXPECT_EQ(error_with_line(10, "[1](2c90300000021) \t\"S-e41d2d0300000001\"[3]"),
              "F:10: mismatched link: \"H-0002c90300000020\"[1] to \"S-e41d2d0300000001\"[3] here, but line "
              "4 cables "
              "\"S-e41d2d0300000001\"[2] to \"H-0002c90300000020\"[1]");
    // The far end's port is taken by another cable.
    EXPECT_EQ(error_with_line(4, "[2]\t\"H-0002c90300000010\"[1](2c90300000011)"),
              "F:4: mismatched link: \"S-e41d2d0300000001\"[2] to \"H-0002c90300000010\"[1] here, but line 3 "
              "cables "
              "\"S-e41d2d0300000001\"[1] to \"H-0002c90300000010\"[1]");
    EXPECT_EQ(error_with_line(4, "[1]\t\"H-0002c90300000010\"[1](2c90300000011)"),
              "F:4: port 1 of \"S-e41d2d0300000001\" listed twice (also line 3)");
}

TEST(IbnetdiscoverBadInput, a_duplicate_guid_names_both_lines) {
    EXPECT_EQ(error_with_line(9, "Ca\t1 \"H-0002c90300000010\"\t\t# \"node1\""),
              "F:9: duplicate GUID 0x2c90300000010 (also declared at line 6)");
}

TEST(IbnetdiscoverBadInput, a_port_beyond_the_nodes_count_is_refused) {
    EXPECT_EQ(error_with_line(4, "[9]\t\"H-0002c90300000020\"[1](2c90300000021)"),
              "F:4: port 9 is beyond the port count 8 of \"S-e41d2d0300000001\" (line 2)");
    EXPECT_EQ(error_with_line(4, "[2]\t\"H-0002c90300000020\"[2](2c90300000022)"),
              "F:4: port 2 is beyond the port count 1 of \"H-0002c90300000020\" (line 9)");
}

TEST(IbnetdiscoverBadInput, a_node_the_sm_cannot_reach_is_named) {
    EXPECT_EQ(error_with_lines({{4, ""}, {10, ""}}),
              "F:9: \"H-0002c90300000020\" (\"node1\") is not connected to \"S-e41d2d0300000001\" (\"sw\") "
              "(line 2): the "
              "fabric must be one piece");
    // A link listed on one side only is a cable.
    EXPECT_EQ(read_ibnetdiscover(write_file("one_sided", SMALL[1] + "\n" + SMALL[5] + "\n" + SMALL[6] + "\n"))
                  .nodes[0]
                  .peer[1]
                  .node,
              1);
}

TEST(IbnetdiscoverBadInput, a_ca_with_two_cabled_ports_is_refused) {
    EXPECT_EQ(error_with_lines({{9, "Ca\t2 \"H-0002c90300000020\"\t\t# \"node1\""},
                                {10,
                                 "[1](2c90300000021) \t\"S-e41d2d0300000001\"[2]\n"
                                 "[2](2c90300000022) \t\"S-e41d2d0300000001\"[5]"}}),
              "F:11: \"H-0002c90300000020\" (\"node1\") has port 2 cabled as well as port 1: hcasim's HCAs "
              "have one "
              "port, port 1");
    EXPECT_EQ(
        error_with_lines({{4, ""},
                          {9, "Ca\t2 \"H-0002c90300000020\"\t\t# \"node1\""},
                          {10, "[2](2c90300000022) \t\"S-e41d2d0300000001\"[2]"}}),
        "F:10: \"H-0002c90300000020\" (\"node1\") has port 2 cabled: hcasim's HCAs have one port, port 1");
}

TEST(IbnetdiscoverBadInput, a_file_without_a_host_is_refused) {
    const std::string path = write_file("nohost", "Switch\t8 \"S-e41d2d0300000001\"\n\n");
    EXPECT_EQ(error_of([&] { read_ibnetdiscover(path); }),
              path + ":2: no host: the file has no CA (other than the subnet manager)");
}

TEST(IbnetdiscoverBadInput, an_unreadable_file_is_named) {
    const std::string path = ::testing::TempDir() + "topology_test_missing";
    EXPECT_EQ(error_of([&] { read_ibnetdiscover(path); }),
              "cannot open topology file '" + path + "': No such file or directory");
}

TEST(IbnetdiscoverBadInput, endports_with_different_lmcs_are_refused) {
    EXPECT_EQ(error_with_line(
                  10, "[1](2c90300000021) \t\"S-e41d2d0300000001\"[2]\t\t# lid 2 lmc 1 \"sw\" lid 3 4xEDR"),
              "F:10: lmc 1 differs from lmc 0 at line 7 (hcasim gives every endport the same LMC)");
}

TEST(IbnetdiscoverBadInput, a_second_subnet_manager_is_refused) {
    EXPECT_EQ(error_with_lines({{6, "Ca\t1 \"H-0002c90300000010\"\t\t# \"subnet manager\""},
                                {9, "Ca\t1 \"H-0002c90300000020\"\t\t# \"subnet manager\""}}),
              "F:9: a second \"subnet manager\" CA (the first at line 6)");
}
