// Logic tests of the configuration broker, params and counters (model/core).
#include <gtest/gtest.h>
#include <systemc>

#include <fstream>
#include <string>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "testbench/tests/fixtures.h"

using namespace hcasim;
using hcasim::test::error_of;

namespace {

/// Writes `text` to a fresh file in the test temp dir and returns its path.
std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = ::testing::TempDir() + "param_test_" + name;
    std::ofstream(path) << text;
    return path;
}

class Param : public ::testing::Test {
protected:
    void SetUp() override { broker::instance().reset(); }
    void TearDown() override { broker::instance().reset(); }
    broker& b = broker::instance();
};

struct pcie_unit : sc_core::sc_module {
    param<unsigned> lanes{"lanes", 4, "", "PCIe link width"};
    counter tx_tlps{"tx_tlps", "TLPs sent"};
    explicit pcie_unit(sc_core::sc_module_name n) : sc_core::sc_module(n) {}
};

struct node_unit : sc_core::sc_module {
    pcie_unit pcie{"pcie"};
    explicit node_unit(sc_core::sc_module_name n) : sc_core::sc_module(n) {}
};

}  // namespace

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

TEST_F(Param, default_when_unset) {
    param<unsigned> p("pcie.lanes", 8, "", "lanes");
    EXPECT_EQ(p.key(), "pcie.lanes");
    EXPECT_EQ(p.get(), 8u);
    EXPECT_EQ(p.str(), "8");
}

TEST_F(Param, ini_sections_and_comments) {
    const auto path = write_file("sections.ini",
                                 "# leading comment\n"
                                 "; another comment\n"
                                 "top = 7   # trailing comment\n"
                                 "\n"
                                 "[pcie]\n"
                                 "lanes = 16 ; trailing\n"
                                 "  gen=0x4\r\n"
                                 "[hca.port]\n"
                                 "name = \"port one\"\n"
                                 "vcrc_check = off\n"
                                 "ratio = 0.25\n");
    b.load_ini(path);
    param<int> top("top", 0, "", "h");
    param<unsigned> lanes("pcie.lanes", 1, "", "h");
    param<uint64_t> gen("pcie.gen", 1, "", "h");
    param<std::string> name("hca.port.name", "x", "", "h");
    param<bool> vcrc("hca.port.vcrc_check", true, "", "h");
    param<double> ratio("hca.port.ratio", 1.0, "", "h");
    EXPECT_EQ(top.get(), 7);
    EXPECT_EQ(lanes.get(), 16u);
    EXPECT_EQ(gen.get(), 4u);
    EXPECT_EQ(name.get(), "port one");
    EXPECT_FALSE(vcrc.get());
    EXPECT_DOUBLE_EQ(ratio.get(), 0.25);
    EXPECT_NO_THROW(b.check_unused());
}

TEST_F(Param, bool_spellings) {
    const char* yes[] = {"true", "1", "yes", "on", "TRUE"};
    const char* no[] = {"false", "0", "no", "off"};
    for (const char* v : yes) {
        b.reset();
        b.set_override(std::string("f=") + v);
        EXPECT_TRUE(param<bool>("f", false, "", "h").get()) << v;
    }
    for (const char* v : no) {
        b.reset();
        b.set_override(std::string("f=") + v);
        EXPECT_FALSE(param<bool>("f", true, "", "h").get()) << v;
    }
}

TEST_F(Param, integer_parsing) {
    b.set_override("a=-12");
    b.set_override("b=0x10");
    b.set_override("c=18446744073709551615");
    b.set_override("d=-0x8");
    EXPECT_EQ(param<int>("a", 0, "", "h").get(), -12);
    EXPECT_EQ(param<unsigned>("b", 0, "", "h").get(), 16u);
    EXPECT_EQ(param<uint64_t>("c", 0, "", "h").get(), UINT64_MAX);
    EXPECT_EQ(param<int64_t>("d", 0, "", "h").get(), -8);
}

TEST_F(Param, set_overrides_later_config) {
    const auto path = write_file("over.ini", "[pcie]\nlanes = 8\n");
    b.load_ini(path);
    b.set_override("pcie.lanes=2");
    param<unsigned> lanes("pcie.lanes", 1, "", "h");
    EXPECT_EQ(lanes.get(), 2u);
}

TEST_F(Param, later_config_file_wins) {
    b.load_ini(write_file("first.ini", "x = 1\n"));
    b.load_ini(write_file("second.ini", "x = 2\n"));
    EXPECT_EQ(param<int>("x", 0, "", "h").get(), 2);
    EXPECT_NO_THROW(b.check_unused());
}

TEST_F(Param, node_prefix_override) {
    b.load_ini(write_file("nodes.ini", "[node1.pcie]\nlanes = 8\n"));
    b.load_ini(write_file("generic.ini", "[pcie]\nlanes = 16\n"));
    param<unsigned> n0("node0.pcie.lanes", 1, "", "h");
    param<unsigned> n1("node1.pcie.lanes", 1, "", "h");
    EXPECT_EQ(n0.get(), 16u);
    EXPECT_EQ(n1.get(), 8u);  // node-specific beats generic even when loaded earlier
    EXPECT_EQ(n0.generic_key(), "pcie.lanes");
    EXPECT_EQ(n1.generic_key(), "pcie.lanes");
    EXPECT_NO_THROW(b.check_unused());
}

TEST_F(Param, generic_key_only_strips_node_prefix) {
    param<int> a("hca.port.x", 0, "", "h");
    param<int> c("nodeA.port.x", 0, "", "h");
    param<int> d("node12.port.x", 0, "", "h");
    EXPECT_EQ(a.generic_key(), "hca.port.x");
    EXPECT_EQ(c.generic_key(), "nodeA.port.x");
    EXPECT_EQ(d.generic_key(), "port.x");
}

TEST_F(Param, unknown_key_names_file_and_line) {
    const auto path = write_file("unknown.ini", "[pcie]\nlanes = 4\n\nlaness = 4\n");
    b.load_ini(path);
    param<unsigned> lanes("pcie.lanes", 1, "", "h");
    EXPECT_EQ(error_of([&] { b.check_unused(); }),
              "unknown configuration key 'pcie.laness' (" + path + ":4)");
}

TEST_F(Param, unknown_key_that_ends_one_params_key_names_that_key) {
    b.set_override("pkey_checker.impl=rtl");
    param<std::string> impl0("node0.hca.pkey_checker.impl", "tlm", "", "h");
    param<std::string> impl1("node1.hca.pkey_checker.impl", "tlm", "", "h");
    param<std::string> other("node0.hca.port.mode", "x", "", "h");
    EXPECT_EQ(error_of([&] { b.check_unused(); }),
              "unknown configuration key 'pkey_checker.impl' (--set); did you mean 'hca.pkey_checker.impl'?");
    b.reset();
    b.set_override("node1.pkey_checker.impl=rtl");  // the node prefix is kept
    param<std::string> impl("node1.hca.pkey_checker.impl", "tlm", "", "h");
    EXPECT_EQ(error_of([&] { b.check_unused(); }),
              "unknown configuration key 'node1.pkey_checker.impl' (--set); did you mean "
              "'node1.hca.pkey_checker.impl'?");
    b.reset();
    b.set_override("mode=a");  // two parameters end in "mode": no guess
    param<std::string> m1("node0.hca.port.mode", "x", "", "h");
    param<std::string> m2("node0.hca.sma.mode", "x", "", "h");
    EXPECT_EQ(error_of([&] { b.check_unused(); }), "unknown configuration key 'mode' (--set)");
}

TEST_F(Param, a_retired_key_says_what_replaced_it) {
    b.set_override("fabric.switch.queue_packets=256");
    EXPECT_EQ(error_of([&] { b.check_unused(); }),
              "unknown configuration key 'fabric.switch.queue_packets' (--set); it was removed when switches "
              "became credit-based (issue 29): a switch never drops for lack of room, its input buffers are "
              "fabric.switch.vl_buffer_bytes");
}

TEST_F(Param, unknown_set_key) {
    b.set_override("nope=1");
    EXPECT_EQ(error_of([&] { b.check_unused(); }), "unknown configuration key 'nope' (--set)");
}

TEST_F(Param, bad_type_names_key_and_origin) {
    const auto path = write_file("badtype.ini", "[pcie]\n\nlanes = four\n");
    b.load_ini(path);
    const auto msg = error_of([&] { param<unsigned> p("node0.pcie.lanes", 1, "", "h"); });
    EXPECT_EQ(msg, "bad value 'four' for key 'node0.pcie.lanes' (" + path +
                       ":3): expected non-negative integer in [0,4294967295]");
}

TEST_F(Param, trailing_garbage_and_negative_unsigned_rejected) {
    b.set_override("a=12x");
    b.set_override("b=-1");
    b.set_override("c=1.5.2");
    b.set_override("d=maybe");
    b.set_override("e=0x");
    b.set_override("f=99999999999");
    EXPECT_NE(error_of([] { param<int> p("a", 0, "", "h"); }).find("bad value '12x' for key 'a' (--set)"),
              std::string::npos);
    EXPECT_NE(error_of([] { param<unsigned> p("b", 0, "", "h"); }).find("bad value '-1'"), std::string::npos);
    EXPECT_NE(error_of([] { param<double> p("c", 0, "", "h"); }).find("expected number"), std::string::npos);
    EXPECT_NE(error_of([] { param<bool> p("d", false, "", "h"); }).find("expected bool"), std::string::npos);
    EXPECT_NE(error_of([] { param<uint64_t> p("e", 0, "", "h"); }).find("bad value '0x'"), std::string::npos);
    EXPECT_NE(error_of([] { param<int> p("f", 0, "", "h"); }).find("bad value '99999999999'"),
              std::string::npos);
}

TEST_F(Param, range_checked_after_construction) {
    const auto path = write_file("range.ini", "[node0.pcie]\n\n\nlanes = 32\n");
    b.load_ini(path);
    param<unsigned> p("node0.pcie.lanes", 4, "", "h");  // range() not yet applied: accepted
    EXPECT_EQ(p.get(), 32u);
    EXPECT_EQ(error_of([&] { p.range(1, 16); }),
              "bad value '32' for key 'node0.pcie.lanes' (" + path + ":4): expected integer in [1,16]");
}

TEST_F(Param, range_inside_accepted) {
    b.set_override("pcie.lanes=16");
    param<unsigned> p("pcie.lanes", 4, "", "h");
    EXPECT_NO_THROW(p.range(1, 16));
    EXPECT_EQ(p.get(), 16u);
    param<double> d("ratio", 0.5, "", "h");
    EXPECT_EQ(error_of([&] { d.range(1.0, 2.0); }),
              "bad value '0.5' for key 'ratio' (default): expected number in [1,2]");
}

TEST_F(Param, choices_checked) {
    b.set_override("hca.mode=fast");
    const auto msg = error_of([] { param<std::string> p("hca.mode", "lt", "", "h", {"lt", "at"}); });
    EXPECT_EQ(msg, "bad value 'fast' for key 'hca.mode' (--set): expected one of lt|at");
    b.reset();
    b.set_override("hca.mode=at");
    param<std::string> ok("hca.mode", "lt", "", "h", {"lt", "at"});
    EXPECT_EQ(ok.get(), "at");
}

TEST_F(Param, missing_file_named) {
    EXPECT_EQ(error_of([&] { b.load_ini("/nonexistent/dir/x.ini"); }),
              "cannot open configuration file '/nonexistent/dir/x.ini': No such file or directory");
}

TEST_F(Param, malformed_line_names_file_and_line) {
    const auto path = write_file("malformed.ini", "[pcie]\nlanes = 4\njunk line\n");
    EXPECT_EQ(error_of([&] { b.load_ini(path); }),
              path + ":3: expected 'key = value' or '[section]', got 'junk line'");
    const auto path2 = write_file("badsection.ini", "\n[pcie\n");
    EXPECT_EQ(error_of([&] { b.load_ini(path2); }), path2 + ":2: malformed section header '[pcie'");
    const auto path3 = write_file("badkey.ini", "a b = 3\n");
    EXPECT_EQ(error_of([&] { b.load_ini(path3); }), path3 + ":1: bad key 'a b'");
}

TEST_F(Param, malformed_set) {
    EXPECT_EQ(error_of([&] { b.set_override("pcie.lanes"); }), "--set 'pcie.lanes': expected key=value");
    EXPECT_EQ(error_of([&] { b.set_override("=3"); }), "--set '=3': expected key=value");
}

TEST_F(Param, help_lists_each_generic_key_once) {
    param<unsigned> n0("node0.pcie.lanes", 4, "", "PCIe link width");
    param<unsigned> n1("node1.pcie.lanes", 4, "", "PCIe link width");
    param<uint64_t> lat("node0.pcie.latency_ns", 150, "ns", "one-way link latency");
    param<std::string> mode("hca.mode", "lt", "", "modelling style", {"lt", "at"});
    param<bool> flag("trace", false, "", "trace packets");
    const auto h = b.help();
    ASSERT_EQ(h.size(), 4u);
    EXPECT_EQ(h[0].key, "hca.mode");
    EXPECT_EQ(h[0].type, "string");
    EXPECT_EQ(h[0].def, "lt");
    EXPECT_EQ(h[0].choices, "lt|at");
    EXPECT_EQ(h[1].key, "pcie.lanes");
    EXPECT_EQ(h[1].type, "uint");
    EXPECT_EQ(h[1].def, "4");
    EXPECT_EQ(h[1].help, "PCIe link width");
    EXPECT_EQ(h[2].key, "pcie.latency_ns");
    EXPECT_EQ(h[2].unit, "ns");
    EXPECT_EQ(h[2].def, "150");
    EXPECT_EQ(h[3].key, "trace");
    EXPECT_EQ(h[3].type, "bool");
    EXPECT_EQ(h[3].def, "false");
    EXPECT_EQ(b.params().size(), 5u);
}

TEST_F(Param, undeclared_on_destruction) {
    {
        param<int> p("x", 1, "", "h");
        EXPECT_EQ(b.params().size(), 1u);
    }
    EXPECT_TRUE(b.params().empty());
}

TEST_F(Param, counters_register_and_sum) {
    auto& reg = stats_registry::instance();
    const auto before = reg.counters().size();
    counter a("node0.port.tx_packets", "sent");
    counter c("node1.port.tx_packets", "sent");
    counter d("node1.port.rx_packets", "received");
    counter e("node1.xport.tx_packets", "unrelated suffix match");
    ++a;
    a += 4;
    c += 10;
    d += 100;
    e += 1000;
    EXPECT_EQ(reg.counters().size(), before + 4);
    EXPECT_EQ(reg.counters()[before], &a);  // declaration order
    EXPECT_EQ(reg.sum("port.tx_packets"), 15u);
    EXPECT_EQ(reg.sum("tx_packets"), 1015u);
    EXPECT_EQ(reg.sum("rx_packets"), 100u);
    ASSERT_NE(reg.find("node1.port.rx_packets"), nullptr);
    EXPECT_EQ(reg.find("node1.port.rx_packets")->value(), 100u);
    EXPECT_EQ(reg.find("port.rx_packets"), nullptr);
    EXPECT_EQ(static_cast<uint64_t>(a), 5u);
}

TEST_F(Param, counter_help_lists_each_pattern_once_with_unit_from_the_name_or_declaration) {
    EXPECT_EQ(counter_pattern("node12.hca.port.tx_packets"), "nodeN.hca.port.tx_packets");
    EXPECT_EQ(counter_pattern("fabric.switch3.out12.PortXmitData"), "fabric.switchN.outN.PortXmitData");
    EXPECT_EQ(counter_pattern("tx_packets"), "tx_packets");
    counter a("node0.port.tx_busy_ps", "ps busy");
    counter c("node1.port.tx_busy_ps", "ps busy (second node)");
    counter d("node0.memory.bytes_read", "bytes read");
    counter e("node0.dma.payload_bytes", "payload");
    counter i("node0.dma.bytes", "bytes moved");
    counter f("node0.rtl.rtl_cycles", "RTL clock cycles");
    counter g("node0.port.PortXmitData", "4-byte words sent", "4-byte words");
    counter h("node0.port.packets", "packets");
    std::vector<counter_info> mine;
    for (const counter_info& i : stats_registry::instance().help())
        if (i.pattern.compare(0, 6, "nodeN.") == 0) mine.push_back(i);
    ASSERT_EQ(mine.size(), 7u);  // sorted by pattern, node1's tx_busy_ps folded into node0's
    EXPECT_EQ(mine[0].pattern, "nodeN.dma.bytes");
    EXPECT_EQ(mine[0].unit, "bytes");
    EXPECT_EQ(mine[1].pattern, "nodeN.dma.payload_bytes");
    EXPECT_EQ(mine[1].unit, "bytes");
    EXPECT_EQ(mine[2].pattern, "nodeN.memory.bytes_read");
    EXPECT_EQ(mine[2].unit, "bytes");
    EXPECT_EQ(mine[3].pattern, "nodeN.port.PortXmitData");
    EXPECT_EQ(mine[3].unit, "4-byte words");
    EXPECT_EQ(mine[4].pattern, "nodeN.port.packets");
    EXPECT_EQ(mine[4].unit, "count");
    EXPECT_EQ(mine[5].pattern, "nodeN.port.tx_busy_ps");
    EXPECT_EQ(mine[5].unit, "ps");
    EXPECT_EQ(mine[5].help, "ps busy");  // the first declared describes the pattern
    EXPECT_EQ(mine[6].pattern, "nodeN.rtl.rtl_cycles");
    EXPECT_EQ(mine[6].unit, "cycles");
}

// Params and counters declared inside sc_modules take the hierarchical name as key prefix.
// Only elaboration happens (no sc_start), so this coexists with the other tests in one process.
TEST_F(Param, module_scoped_keys) {
    b.set_override("pcie.lanes=16");
    b.set_override("node1.pcie.lanes=8");
    node_unit n0("node0");
    node_unit n1("node1");
    EXPECT_EQ(n0.pcie.lanes.key(), "node0.pcie.lanes");
    EXPECT_EQ(n1.pcie.lanes.key(), "node1.pcie.lanes");
    EXPECT_EQ(n0.pcie.lanes.get(), 16u);
    EXPECT_EQ(n1.pcie.lanes.get(), 8u);
    EXPECT_EQ(n0.pcie.tx_tlps.key(), "node0.pcie.tx_tlps");
    EXPECT_NO_THROW(b.check_unused());
    param<int> outside("seed", 1, "", "h");
    EXPECT_EQ(outside.key(), "seed");
    ++n0.pcie.tx_tlps;
    n1.pcie.tx_tlps += 2;
    EXPECT_EQ(stats_registry::instance().sum("pcie.tx_tlps"), 3u);
    ASSERT_EQ(b.help().size(), 2u);
}

// `linkN.X` sets param X of node N's link (`nodeN.link.X`): between `nodeN.link.X` and
// `link.X`, whatever order the values were given in.
TEST_F(Param, link_prefix_between_node_and_generic) {
    b.set_override("node1.link.drop_rate=0.3");
    b.set_override("link1.drop_rate=0.2");
    b.set_override("link.drop_rate=0.1");
    b.set_override("link2.drop_rate=0.25");
    b.set_override("link1.seed=9");
    param<double> d0("node0.link.drop_rate", 0, "", "h");
    param<double> d1("node1.link.drop_rate", 0, "", "h");
    param<double> d2("node2.link.drop_rate", 0, "", "h");
    param<uint64_t> s0("node0.link.seed", 1, "", "h");
    param<uint64_t> s1("node1.link.seed", 1, "", "h");
    EXPECT_DOUBLE_EQ(d0.get(), 0.1);
    EXPECT_DOUBLE_EQ(d1.get(), 0.3);
    EXPECT_DOUBLE_EQ(d2.get(), 0.25);
    EXPECT_EQ(s0.get(), 1u);
    EXPECT_EQ(s1.get(), 9u);
    EXPECT_EQ(d1.generic_key(), "link.drop_rate");
    EXPECT_NO_THROW(b.check_unused());
    b.reset();
    // Given in the opposite order: the more specific key still wins.
    b.set_override("link.drop_rate=0.1");
    b.set_override("link1.drop_rate=0.2");
    EXPECT_DOUBLE_EQ(param<double>("node1.link.drop_rate", 0, "", "h").get(), 0.2);
    b.reset();
    b.set_override("link1.drop_rate=0.2");
    b.set_override("node1.link.drop_rate=0.3");
    EXPECT_DOUBLE_EQ(param<double>("node1.link.drop_rate", 0, "", "h").get(), 0.3);
}

TEST_F(Param, link_prefix_only_for_node_links) {
    b.set_override("link1.drop_rate=0.2");
    b.set_override("link1.bogus=1");
    b.set_override("link7.drop_rate=0.5");
    b.set_override("link1.lanes=8");
    param<double> d1("node1.link.drop_rate", 0, "", "h");
    param<unsigned> lanes("node1.pcie.lanes", 4, "", "h");  // not a link param: link1. does not apply
    param<double> other("node1.linker.drop_rate", 0, "", "h");
    EXPECT_DOUBLE_EQ(d1.get(), 0.2);
    EXPECT_EQ(lanes.get(), 4u);
    EXPECT_DOUBLE_EQ(other.get(), 0.0);
    EXPECT_EQ(error_of([&] { b.check_unused(); }), "unknown configuration key 'link1.bogus' (--set)");
    b.reset();
    b.set_override("link7.drop_rate=0.5");  // no node 7
    param<double> d("node1.link.drop_rate", 0, "", "h");
    EXPECT_EQ(error_of([&] { b.check_unused(); }), "unknown configuration key 'link7.drop_rate' (--set)");
}

TEST_F(Param, link_prefix_value_range_names_key_and_origin) {
    b.set_override("link1.drop_rate=1.5");
    param<double> d("node1.link.drop_rate", 0, "", "h");
    EXPECT_EQ(error_of([&] { d.range(0, 1); }),
              "bad value '1.5' for key 'node1.link.drop_rate' (--set): expected number in [0,1]");
}

// Issue 27, "every input checked before it costs anything": allowed values declared with the
// parameter are checked as its value resolves, before the module sizes anything from it.
TEST_F(Param, a_declared_range_is_checked_before_the_parameter_is_usable) {
    b.set_override("hca.max_qps=4294967295");
    EXPECT_EQ(error_of([] {
                  param<unsigned> p("node0.hca.max_qps", 1024, "QPs", "h", {2, 1u << 24});
              }),
              "bad value '4294967295' for key 'node0.hca.max_qps' (--set): expected integer in [2,16777216]");
}

TEST_F(Param, clock_mhz_of_1e_300_inf_1e300_and_nan_are_refused_naming_the_key) {
    for (const char* v : {"1e-300", "inf", "1e300", "-inf"}) {
        b.reset();
        b.set("hca.clock_mhz", v, "--set");
        EXPECT_EQ(error_of([] {
                      param<double> p("node0.hca.clock_mhz", 800, "MHz", "h", {1, 10000});
                  }),
                  std::string("bad value '") + v +
                      "' for key 'node0.hca.clock_mhz' (--set): expected number in " + "[1,10000]");
    }
    b.reset();
    b.set("hca.clock_mhz", "nan", "--set");
    EXPECT_EQ(error_of([] {
                  param<double> p("node0.hca.clock_mhz", 800, "MHz", "h", {1, 10000});
              }),
              "bad value 'nan' for key 'node0.hca.clock_mhz' (--set): expected number");
}

TEST_F(Param, a_value_outside_the_range_is_accepted_only_if_it_is_the_declared_special_value) {
    b.set_override("cq_writer.clock_mhz=0");
    param<double> inherit("cq_writer.clock_mhz", 400, "MHz", "h", {1, 10000, 0.0});
    EXPECT_EQ(inherit.get(), 0.0);
    b.reset();
    b.set_override("cq_writer.clock_mhz=0.5");
    EXPECT_EQ(error_of([] {
                  param<double> p("cq_writer.clock_mhz", 0, "MHz", "h", {1, 10000, 0.0});
              }),
              "bad value '0.5' for key 'cq_writer.clock_mhz' (--set): expected number in [1,10000] or 0");
}

TEST_F(Param, help_config_lists_the_allowed_values_of_each_parameter) {
    param<unsigned> lanes("pcie.lanes", 4, "", "h", {1, 16});
    param<double> clock("cq_writer.clock_mhz", 0, "MHz", "h", {1, 10000, 0.0});
    param<bool> flag("trace", false, "", "h");
    const auto h = b.help();
    ASSERT_EQ(h.size(), 3u);
    EXPECT_EQ(h[0].key, "cq_writer.clock_mhz");
    EXPECT_EQ(h[0].range, "[1,10000] or 0");
    EXPECT_EQ(h[1].range, "[1,16]");
    EXPECT_EQ(h[2].range, "");
}

// -c of something that is not a readable text file: exit 2 with file (and line), not a run
// with the defaults or a read that never ends.
TEST_F(Param, a_config_directory_is_refused) {
    EXPECT_EQ(error_of([&] { b.load_ini("/tmp"); }), "cannot open configuration file '/tmp': Is a directory");
}

TEST_F(Param, a_config_file_that_cannot_be_read_is_refused_with_file_and_line) {
    // /proc/self/mem opens but fails to read at offset 0 (EIO).
    EXPECT_EQ(error_of([&] { b.load_ini("/proc/self/mem"); }),
              "/proc/self/mem:1: read error: Input/output error");
}

TEST_F(Param, a_nul_byte_in_an_ini_line_is_refused_with_file_and_line) {
    static const char text[] = "[pcie]\nlanes = 8\0 junk\n";
    const auto path = write_file("nul.ini", std::string(text, sizeof text - 1));
    EXPECT_EQ(error_of([&] { b.load_ini(path); }), path + ":2: NUL byte: not a text file");
    EXPECT_TRUE(b.help().empty());
    EXPECT_FALSE(b.lookup("pcie.lanes")) << "nothing of the file is used";
}

TEST_F(Param, an_over_long_ini_line_is_refused_with_file_and_line) {
    const auto path =
        write_file("long.ini", "a = 1\nb = " + std::string(broker::max_ini_line_bytes, 'x') + "\n");
    EXPECT_EQ(error_of([&] { b.load_ini(path); }), path + ":2: line longer than 4096 bytes");
    // The limit itself is accepted.
    const auto ok = write_file("limit.ini", "b = " + std::string(broker::max_ini_line_bytes - 4, 'x') + "\n");
    EXPECT_NO_THROW(b.load_ini(ok));
}

TEST_F(Param, an_endless_config_stream_is_refused_at_its_line_limit) {
    std::string text;
    for (size_t i = 0; i <= broker::max_ini_lines; ++i) text += "a = 1\n";
    const auto path = write_file("endless.ini", text);
    EXPECT_EQ(error_of([&] { b.load_ini(path); }),
              path + ":100001: more than 100000 lines: not a configuration file");
}

TEST_F(Param, config_dev_zero_is_refused_at_once) {
    EXPECT_EQ(error_of([&] { b.load_ini("/dev/zero"); }), "/dev/zero:1: NUL byte: not a text file");
}
