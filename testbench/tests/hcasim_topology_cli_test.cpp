// hcasim --dump-topology FILE and fabric.topology=file from the command line: a dumped fat tree
// read back is the same fabric (its dump is byte-identical) and gives the same results; the
// example files in configs/topologies run; bad topology input, a shape that cannot be built and
// a routing that cannot route exit 2 naming the culprit before anything is simulated.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "testbench/tests/hcasim_run.h"

// Linked with the model (SystemC) for hcasim_run.h; the tests run the hcasim binary.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

const char* const fat_tree_20 =
    "--set fabric.topology=fat_tree --set fabric.nodes=20 --set fabric.switch.radix=8";

result run(const std::string& args) { return hcasim::test::run_hcasim(args, "topo_cli"); }

std::string from_file(const std::string& path) {
    return "--set fabric.topology=file --set fabric.topology_file='" + path + "'";
}

/// Occurrences of `what` in `text`.
size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

/// A one-switch fabric with two hosts; line 3 is the switch's port 2, line 5 node0's header.
const char* const two_hosts =
    "Switch\t4 \"S-e41d2d0300000001\"\t\t# \"sw\" enhanced port 0 lid 3 lmc 0\n"
    "[1]\t\"H-0002c90300000010\"[1]\t\t# \"node0\"\n"
    "[2]\t\"H-0002c90300000020\"[1]\t\t# \"node1\"\n"
    "\n"
    "Ca\t1 \"H-0002c90300000010\"\t\t# \"node0\"\n"
    "[1](2c90300000011) \t\"S-e41d2d0300000001\"[1]\n"
    "Ca\t1 \"H-0002c90300000020\"\t\t# \"node1\"\n"
    "[1](2c90300000021) \t\"S-e41d2d0300000001\"[2]\n";

/// `text` with `from` (which must occur) replaced by `to`, written to `dir`/`name`; its path.
std::string write_variant(const std::string& dir, const std::string& name, std::string text,
                          const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    const std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
}

/// A run of write_bw and a --dump-topology on the fabric `file` both exit 2 with `error`
/// (after "hcasim: error: "), print nothing and write no dump.
void refused_before_the_run(const std::string& dir, const std::string& file, const std::string& error) {
    const result r = run("--workload write_bw --size 4K --iters 10 " + from_file(file));
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_EQ(r.err, "hcasim: error: " + error + "\n");
    EXPECT_EQ(r.out, "") << "nothing is simulated";
    const std::string dump = dir + "/dump.topo";
    const result d = run("--dump-topology '" + dump + "' " + from_file(file));
    EXPECT_EQ(d.code, 2) << d.err;
    EXPECT_EQ(d.err, r.err);
    EXPECT_FALSE(std::filesystem::exists(dump));
}

/// A ring of four 4-port switches sw0..sw3 with two hosts each (ports 1, 2), port 3 cabled to
/// the next switch's port 4, no free port (run with fabric.subnet_manager=false): minhop's
/// tables on it have a credit loop (routing_test.cpp's ring). Written to `dir`; its path.
std::string write_ring(const std::string& dir) {
    auto sw = [](unsigned s) {
        char g[24];
        std::snprintf(g, sizeof g, "e41d2d03000000%02x", s + 1);
        return std::string(g);
    };
    auto host = [](unsigned h) {
        char g[24];
        std::snprintf(g, sizeof g, "0002c903000000%02x", (h + 1) << 4);
        return std::string(g);
    };
    std::string t;
    for (unsigned s = 0; s < 4; ++s) {
        t += "Switch\t4 \"S-" + sw(s) + "\"\t\t# \"sw" + std::to_string(s) +
             "\" enhanced port 0 lid 0 lmc 0\n";
        for (unsigned p = 1; p <= 2; ++p)
            t += "[" + std::to_string(p) + "]\t\"H-" + host(2 * s + p - 1) + "\"[1]\n";
        t += "[3]\t\"S-" + sw((s + 1) % 4) + "\"[4]\n\n";
    }
    for (unsigned h = 0; h < 8; ++h)
        t += "Ca\t1 \"H-" + host(h) + "\"\t\t# \"node" + std::to_string(h) + "\"\n[1](" +
             host(h).substr(3, 12) + "1) \t\"S-" + sw(h / 2) + "\"[" + std::to_string(h % 2 + 1) + "]\n";
    const std::string path = dir + "/ring.topo";
    std::ofstream(path) << t;
    return path;
}

/// An alltoall on that ring with one packet of buffer per VL, with `routing`.
result alltoall_on_the_ring(const std::string& dir, const std::string& routing) {
    return run("--workload alltoall --size 4K --iters 100 " + from_file(write_ring(dir)) +
               " --set fabric.subnet_manager=false --set fabric.switch.vl_buffer_bytes=4224"
               " --set hca.port.vl_buffer_bytes=4224 --set fabric.routing=" +
               routing);
}

}  // namespace

TEST(HcasimTopologyCli, minhop_on_a_ring_deadlocks_and_the_run_fails_naming_the_cycle_of_ports) {
    const result r = alltoall_on_the_ring(hcasim::test::empty_dir("topo_cli_ring_minhop"), "minhop");
    EXPECT_EQ(r.code, 1) << r.err;
    // Stopped once the cycle held still for the timeout, naming the four anticlockwise channels.
    EXPECT_TRUE(std::regex_match(
        r.err,
        std::regex("hcasim: run failed: fabric deadlock: [0-9]+ packets held in switches and no progress "
                   "for fabric.switch.deadlock_timeout_us=1000 us at [0-9.]+ us; switch outputs waiting "
                   "for credit in a cycle \\(fabric.routing=minhop\\): sw0/p4 -> sw3/p4 -> sw2/p4 -> "
                   "sw1/p4\n")))
        << r.err;
    EXPECT_EQ(r.out.find("messages completed"), std::string::npos) << "no report of a run that hung";
}

TEST(HcasimTopologyCli, updn_on_the_same_ring_completes_every_message) {
    const result r = alltoall_on_the_ring(hcasim::test::empty_dir("topo_cli_ring_updn"), "updn");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" alltoall: 56 flows over RC, 8 nodes, 5600 of 5600 messages completed, 0 lost"),
              std::string::npos)
        << r.out;
}

TEST(HcasimTopologyCli, a_dumped_fat_tree_read_back_dumps_byte_identical) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_dump");
    const std::string first = dir + "/first.topo", second = dir + "/second.topo";
    const result a = run(std::string("--dump-topology '") + first + "' " + fat_tree_20);
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, "") << "--dump-topology runs no workload";
    const std::string text = hcasim::test::slurp(first);
    // 20 hosts and the SM on radix-8 leaves of 4 down and 4 up ports: 6 leaves, 4 spines.
    EXPECT_EQ(count(text, "\nSwitch\t8 "), 10u);
    EXPECT_EQ(count(text, "\nCa\t1 "), 21u);
    EXPECT_EQ(count(text, "# \"leaf5\" enhanced port 0"), 1u);
    EXPECT_EQ(count(text, "# \"spine3\" enhanced port 0"), 1u);
    EXPECT_EQ(count(text, "\t\t# \"node19\"\n"), 1u);
    const result b = run("--dump-topology '" + second + "' " + from_file(first));
    ASSERT_EQ(b.code, 0) << b.err;
    EXPECT_EQ(hcasim::test::slurp(second), text);
}

TEST(HcasimTopologyCli, a_fat_tree_read_back_from_its_dump_gives_the_same_results) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_same");
    const std::string file = dir + "/ft.topo";
    ASSERT_EQ(run(std::string("--dump-topology '") + file + "' " + fat_tree_20).code, 0);
    // node0 to node1 (one leaf), and a permutation whose flows cross the spines.
    for (const char* workload :
         {"--workload write_bw --size 4K --iters 100", "--workload permutation --size 4K --iters 10"}) {
        const result built = run(std::string(workload) + " " + fat_tree_20);
        const result read = run(std::string(workload) + " " + from_file(file));
        ASSERT_EQ(built.code, 0) << built.err;
        ASSERT_EQ(read.code, 0) << read.err;
        EXPECT_NE(built.out.find(" 4096 "), std::string::npos) << built.out;
        EXPECT_EQ(read.out, built.out) << workload;
    }
}

TEST(HcasimTopologyCli, every_example_topology_file_runs_write_bw_and_dumps_stably) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_examples");
    size_t files = 0;
    for (const auto& e :
         std::filesystem::directory_iterator(std::string(HCASIM_SOURCE_DIR) + "/configs/topologies")) {
        if (e.path().extension() != ".topo") continue;
        ++files;
        const std::string topo = e.path().string();
        const result r = run("--workload write_bw --size 4K --iters 50 " + from_file(topo));
        EXPECT_EQ(r.code, 0) << topo << "\n" << r.err;
        EXPECT_NE(r.out.find(" 100 wire packets"), std::string::npos) << topo << "\n" << r.out;
        // Its dump, read back, dumps the same bytes.
        const std::string once = dir + "/once.topo", twice = dir + "/twice.topo";
        ASSERT_EQ(run("--dump-topology '" + once + "' " + from_file(topo)).code, 0) << topo;
        ASSERT_EQ(run("--dump-topology '" + twice + "' " + from_file(once)).code, 0) << topo;
        EXPECT_EQ(hcasim::test::slurp(twice), hcasim::test::slurp(once)) << topo;
    }
    EXPECT_GE(files, 2u);
}

TEST(HcasimTopologyCli, dump_topology_to_dev_stdout_prints_the_file) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_stdout");
    const std::string file = dir + "/ft.topo";
    ASSERT_EQ(run(std::string("--dump-topology '") + file + "' " + fat_tree_20).code, 0);
    const result r = run(std::string("--dump-topology /dev/stdout ") + fat_tree_20);
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, hcasim::test::slurp(file));
}

TEST(HcasimTopologyCli, a_dump_file_that_cannot_be_written_exits_2_naming_it) {
    const result r = run("--dump-topology /nonexistent/dir/f.topo");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --dump-topology: cannot write '/nonexistent/dir/f.topo': No such file or "
              "directory\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimTopologyCli, dump_topology_refuses_what_only_a_run_writes) {
    const result r = run("--dump-topology x.topo --stats-json s.json");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: --dump-topology writes the fabric and exits without running: --stats-json has "
              "nothing to do\n");
    const result d = run("--dump-topology x.topo --workload dma_read_bw");
    EXPECT_EQ(d.code, 2);
    EXPECT_EQ(d.err, "hcasim: error: --dump-topology: dma_read_bw runs the PCIe link alone (no fabric)\n");
}

TEST(HcasimTopologyCli, a_topology_file_with_a_syntax_error_is_refused_naming_file_and_line) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_syntax");
    const std::string f = write_variant(dir, "syntax.topo", two_hosts, "[2]\t\"H-0002c90300000020\"[1]",
                                        "[2]\t\"H-0002c90300000020\"[x]");
    refused_before_the_run(
        dir, f, f + ":3: syntax error: expected the peer's port number, found 'x]\t\t# \"node1\"'");
}

TEST(HcasimTopologyCli, a_topology_file_with_a_dangling_link_is_refused_naming_file_and_line) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_dangling");
    const std::string f =
        write_variant(dir, "dangling.topo", two_hosts, "\n\nCa", "\n[3]\t\"H-0002c90300000030\"[1]\n\nCa");
    refused_before_the_run(dir, f,
                           f + ":4: dangling link: \"H-0002c90300000030\" port 1 is not a node of the file");
}

TEST(HcasimTopologyCli, a_topology_file_with_a_duplicate_guid_is_refused_naming_file_and_line) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_dup");
    // node1 declared with node0's GUID (line 7; node0's header is line 5).
    std::string text = two_hosts;
    text.replace(text.find("Ca\t1 \"H-0002c90300000020\""), 25, "Ca\t1 \"H-0002c90300000010\"");
    const std::string f = write_variant(dir, "dup.topo", text, "(2c90300000021)", "(2c90300000011)");
    refused_before_the_run(dir, f, f + ":7: duplicate GUID 0x2c90300000010 (also declared at line 5)");
}

TEST(HcasimTopologyCli, a_radix_too_small_for_the_fat_tree_is_refused_naming_the_keys) {
    const std::string dir = hcasim::test::empty_dir("topo_cli_radix");
    const std::string dump = dir + "/dump.topo";
    const std::string keys =
        "--set fabric.topology=fat_tree --set fabric.switch.radix=2 --set fabric.fat_tree.oversubscription=2";
    const std::string error =
        "hcasim: error: fabric.switch.radix=2 is too small for a 2-level fat tree (fabric.fat_tree.levels) "
        "of "
        "radix 2 (fabric.switch.radix) with oversubscription 2 (fabric.fat_tree.oversubscription): a leaf "
        "needs at least one up port and 2 times as many down ports\n";
    const result r = run("--workload write_bw --iters 10 " + keys);
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, error);
    EXPECT_EQ(r.out, "");
    const result d = run("--dump-topology '" + dump + "' " + keys);
    EXPECT_EQ(d.code, 2);
    EXPECT_EQ(d.err, error);
    EXPECT_FALSE(std::filesystem::exists(dump));
}

TEST(HcasimTopologyCli, topology_file_without_topology_file_key_is_refused) {
    const result r = run("--workload write_bw --iters 10 --set fabric.topology=file");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(
        r.err,
        "hcasim: error: fabric.topology=file needs fabric.topology_file=FILE (an ibnetdiscover file)\n");
    EXPECT_EQ(r.out, "");
}

TEST(HcasimTopologyCli, ftree_routing_on_a_ring_file_is_refused_before_the_run) {
    const result r = run("--workload write_bw --iters 10 " + from_file("configs/topologies/ring4.topo") +
                         " --set fabric.routing=ftree");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err,
              "hcasim: error: fabric.routing=ftree: not a fat tree: switch0 and switch1 are cabled to each "
              "other at level 0\n");
    EXPECT_EQ(r.out, "");
}
