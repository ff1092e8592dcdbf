// --dump-stimulus UNIT=FILE (testbench/cli): which units, the keys it sets (every node's file
// named after the node, or one node's as given), and the one-line errors.
#include <gtest/gtest.h>
#include <systemc>

#include <sstream>

#include "model/core/param.h"
#include "testbench/cli/cli.h"
#include "testbench/tests/fixtures.h"

using namespace hcasim;
using hcasim::test::error_of;

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

run_options parse(std::vector<const char*> args, std::ostream* help = nullptr) {
    args.insert(args.begin(), "hcasim");
    std::ostringstream sink;
    return parse_cli(static_cast<int>(args.size()), args.data(), help ? *help : sink);
}

/// The value the broker gives the param with full key `key` ("" if none).
std::string value_of(const std::string& key) { return broker::instance().lookup(key).value_or(""); }

}  // namespace

TEST(CliDumpStimulus, every_node_writes_its_own_file_and_a_node_prefix_picks_one_node) {
    broker::instance().reset();
    const auto o = parse({"--workload", "write_bw", "--dump-stimulus", "hca.cq_writer=out/cq.stim",
                          "--dump-stimulus", "node1.hca.cq_writer=n1.txt"});
    ASSERT_EQ(o.dump_stimulus.size(), 2u);
    EXPECT_EQ(o.dump_stimulus[0], std::make_pair(std::string("hca.cq_writer"), std::string("out/cq.stim")));
    apply_config(o);
    // The cq_writer replaces {node} with its node's name (model/hca/cq_stimulus.h).
    EXPECT_EQ(value_of("node0.hca.cq_writer.dump_stimulus"), "out/cq.{node}.stim");
    EXPECT_EQ(value_of("node7.hca.cq_writer.dump_stimulus"), "out/cq.{node}.stim");
    EXPECT_EQ(value_of("node1.hca.cq_writer.dump_stimulus"), "n1.txt")
        << "the exact key beats the generic one";
    broker::instance().reset();

    const auto one = parse({"--dump-stimulus", "node12.hca.cq_writer=only12"});
    apply_config(one);
    EXPECT_EQ(value_of("node12.hca.cq_writer.dump_stimulus"), "only12");
    EXPECT_EQ(value_of("node0.hca.cq_writer.dump_stimulus"), "");
    broker::instance().reset();

    // --set after it wins, as for --waves.
    const auto set =
        parse({"--dump-stimulus", "hca.cq_writer=a.stim", "--set", "hca.cq_writer.dump_stimulus=b"});
    apply_config(set);
    EXPECT_EQ(value_of("node0.hca.cq_writer.dump_stimulus"), "b");
    broker::instance().reset();

    std::ostringstream help;
    parse({"--help"}, &help);
    EXPECT_NE(help.str().find("--dump-stimulus"), std::string::npos);
}

TEST(CliDumpStimulus, a_wrong_unit_a_missing_file_or_a_run_that_is_not_one_is_a_one_line_error) {
    const std::pair<std::vector<const char*>, std::string> cases[] = {
        {{"--dump-stimulus", "cq.stim"},
         "--dump-stimulus: expected UNIT=FILE (e.g. hca.cq_writer=cq.stim), got 'cq.stim'"},
        {{"--dump-stimulus", "hca.cq_writer="}, "--dump-stimulus hca.cq_writer=: expected a file name"},
        {{"--dump-stimulus", "hca.pkey_checker=p.stim"},
         "--dump-stimulus: unknown unit 'hca.pkey_checker' (expected hca.cq_writer or nodeN.hca.cq_writer)"},
        {{"--dump-stimulus", "node.hca.cq_writer=x"},
         "--dump-stimulus: unknown unit 'node.hca.cq_writer' (expected hca.cq_writer or "
         "nodeN.hca.cq_writer)"},
        {{"--dump-stimulus", "nodeA.hca.cq_writer=x"},
         "--dump-stimulus: unknown unit 'nodeA.hca.cq_writer' (expected hca.cq_writer or "
         "nodeN.hca.cq_writer)"},
        {{"--dump-stimulus", "cq_writer=x"},
         "--dump-stimulus: unknown unit 'cq_writer' (expected hca.cq_writer or nodeN.hca.cq_writer)"},
        {{"--dump-stimulus", "hca.cq_writer=a", "--dump-stimulus", "hca.cq_writer=b"},
         "--dump-stimulus hca.cq_writer: given twice ('a', 'b')"},
        {{"--workload", "write_bw", "--sweep", "qps=1,2", "--dump-stimulus", "hca.cq_writer=a"},
         "--dump-stimulus records one run: --sweep makes several runs"},
        {{"--workload", "qp_scale", "--dump-stimulus", "hca.cq_writer=a"},
         "--dump-stimulus records one run: qp_scale makes several runs"},
        {{"--workload", "dma_read_bw", "--dump-stimulus", "hca.cq_writer=a"},
         "--dump-stimulus records one run: the dma_* workloads run the PCIe link alone (no HCA)"},
        {{"--workload", "attack_suite", "--dump-stimulus", "hca.cq_writer=a"},
         "--dump-stimulus records one run: attack_suite builds machines of its own"},
        {{"--dump-topology", "t.topo", "--dump-stimulus", "hca.cq_writer=a"},
         "--dump-stimulus records one run: --dump-topology exits without running"},
    };
    for (const auto& [args, error] : cases) EXPECT_EQ(error_of([&] { parse(args); }), error) << args[1];
}
