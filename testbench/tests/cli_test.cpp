// Logic tests of the command line, config application and run report (testbench/cli, report).
#include <gtest/gtest.h>
#include <systemc>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "testbench/cli/cli.h"
#include "testbench/cli/report.h"
#include "testbench/tests/fixtures.h"
#include "testbench/workloads/msg_rate.h"

using namespace hcasim;
using hcasim::test::error_of;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

run_options parse(std::vector<const char*> args, std::ostream* help = nullptr) {
    args.insert(args.begin(), "hcasim");
    std::ostringstream sink;
    return parse_cli(static_cast<int>(args.size()), args.data(), help ? *help : sink);
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "cli_test_" + name; }

}  // namespace

TEST(Cli, defaults) {
    const auto o = parse({});
    EXPECT_TRUE(o.workload.empty());
    EXPECT_TRUE(o.sizes.empty());
    EXPECT_FALSE(o.sizes_given);
    EXPECT_FALSE(o.iters_given);
    EXPECT_EQ(o.qps, 1u);
    EXPECT_EQ(o.mtu, 4096u);
    EXPECT_EQ(o.seed, 1u);
    EXPECT_FALSE(o.help);
    EXPECT_FALSE(o.help_config);
}

TEST(Cli, all_options) {
    const auto o = parse(
        {"--config",   "a.ini",    "--set",        "pcie.lanes=8", "--config", "b.ini", "--set",        "x=1",
         "--workload", "write_bw", "--size",       "64,4K",        "--iters",  "5000",  "--qps",        "4",
         "--mtu",      "1024",     "--stats-json", "out.json",     "--seed",   "42",    "--help-config"});
    EXPECT_EQ(o.configs, (std::vector<std::string>{"a.ini", "b.ini"}));
    EXPECT_EQ(o.sets, (std::vector<std::string>{"pcie.lanes=8", "x=1"}));
    EXPECT_EQ(o.workload, "write_bw");
    EXPECT_EQ(o.sizes, (std::vector<uint64_t>{64, 4096}));
    EXPECT_TRUE(o.sizes_given);
    EXPECT_EQ(o.iters, 5000u);
    EXPECT_TRUE(o.iters_given);
    EXPECT_EQ(o.qps, 4u);
    EXPECT_EQ(o.mtu, 1024u);
    EXPECT_EQ(o.stats_json, "out.json");
    EXPECT_EQ(o.seed, 42u);
    EXPECT_TRUE(o.help_config);
}

TEST(Cli, help_prints_usage) {
    std::ostringstream out;
    const auto o = parse({"--help"}, &out);
    EXPECT_TRUE(o.help);
    EXPECT_NE(out.str().find("--workload"), std::string::npos);
    EXPECT_NE(out.str().find("--help-config"), std::string::npos);
}

TEST(Cli, size_parsing) {
    EXPECT_EQ(parse_sizes("65536"), (std::vector<uint64_t>{65536}));
    EXPECT_EQ(parse_sizes("64,4K"), (std::vector<uint64_t>{64, 4096}));
    EXPECT_EQ(parse_sizes("1M"), (std::vector<uint64_t>{1u << 20}));
    EXPECT_EQ(parse_sizes("1G"), (std::vector<uint64_t>{1ull << 30}));
    EXPECT_EQ(parse_sizes("2-16"), (std::vector<uint64_t>{2, 4, 8, 16}));
    EXPECT_EQ(parse_sizes("1K-4K,8"), (std::vector<uint64_t>{1024, 2048, 4096, 8}));
    const auto all = parse_sizes("2-8M");
    ASSERT_EQ(all.size(), 23u);
    EXPECT_EQ(all.front(), 2u);
    EXPECT_EQ(all.back(), 8u << 20);
    EXPECT_EQ(parse_sizes("4-12"), (std::vector<uint64_t>{4, 8}));  // stops at the last power below the end
}

TEST(Cli, bad_sizes) {
    EXPECT_EQ(error_of([] { parse_sizes("12x"); }),
              "--size '12x': bad size '12x' (expected N, N,M,... or A-B with K/M/G suffixes)");
    EXPECT_NE(error_of([] { parse_sizes("64,"); }).find("bad size ''"), std::string::npos);
    EXPECT_NE(error_of([] { parse_sizes("3-16"); }).find("power-of-two start"), std::string::npos);
    EXPECT_NE(error_of([] { parse_sizes("16-2"); }).find("power-of-two start"), std::string::npos);
    EXPECT_NE(error_of([] { parse_sizes("-4"); }).find("bad size"), std::string::npos);
    EXPECT_NE(error_of([] { parse({"--size", "abc"}); }).find("--size 'abc'"), std::string::npos);
}

TEST(Cli, bad_options) {
    EXPECT_EQ(error_of([] {
                  parse({"--workload", "rd_write_lat"});
              }),
              "--workload: unknown workload 'rd_write_lat' (expected write_lat|send_lat|read_lat|atomic_lat|"
              "write_bw|send_bw|read_bw|atomic_rate|ud_send_lat|ud_send_bw|uc_write_bw|mcast_bw|srq_bw|ud_"
              "srq_bw|mr_scale|qp_scale|dma_read_bw|"
              "dma_write_bw|attack_suite|rd_send_lat|rd_send_bw|msg_rate|incast|alltoall|permutation|uniform_"
              "random|"
              "bisection|hotspot)");
    EXPECT_EQ(error_of([] {
                  parse({"--mtu", "1500"});
              }),
              "--mtu: expected 256|512|1024|2048|4096, got '1500'");
    EXPECT_EQ(error_of([] {
                  parse({"--iters", "-1"});
              }),
              "--iters: expected an integer in [1,10000000], got '-1'");
    EXPECT_NE(error_of([] { parse({"--qps", "0"}); }).find("--qps"), std::string::npos);
    EXPECT_NE(error_of([] { parse({"--seed", "x"}); }).find("--seed"), std::string::npos);
    const auto unknown = error_of([] { parse({"--bogus"}); });
    EXPECT_NE(unknown.find("command line:"), std::string::npos);
    EXPECT_NE(unknown.find("bogus"), std::string::npos);
    EXPECT_EQ(unknown.find('\n'), std::string::npos);
    EXPECT_NE(error_of([] { parse({"--iters"}); }).find("command line:"), std::string::npos);
    EXPECT_NE(error_of([] { parse({"stray"}); }).find("command line:"), std::string::npos);
    EXPECT_NE(error_of([] { parse({"--qps", "1", "--qps", "2"}); }).find("--qps"), std::string::npos);
}

TEST(Cli, iters_count_per_qp_in_bandwidth_workloads_and_per_flow_in_many_node_ones) {
    EXPECT_EQ(phase_messages("write_bw", 100, 4), 400u);
    EXPECT_EQ(phase_messages("srq_bw", 20, 16), 320u);
    EXPECT_EQ(phase_messages("msg_rate", 1000, 3), 3000u);
    EXPECT_EQ(phase_messages("mr_scale", 200, 3), 600u);
    EXPECT_EQ(phase_messages("alltoall", 30, 2), 30u);  // per flow, whatever its QPs
    EXPECT_EQ(phase_messages("write_lat", 100, 1), 100u);
    EXPECT_EQ(phase_messages("dma_read_bw", 100, 1), 100u);
    EXPECT_EQ(phase_messages("write_bw", max_iters, 1), max_iters);
    EXPECT_EQ(phase_messages("write_bw", max_iters / 4, 4), max_iters);
    EXPECT_EQ(error_of([] { phase_messages("write_bw", max_iters / 4 + 1, 4); }),
              "--iters 2500001 with --qps 4: 10000004 messages per size (--iters counts per QP) exceed the "
              "largest total, 10000000");
}

TEST(Cli, msg_rate_and_qp_scale_default_iters_keep_about_20000_messages_and_4_per_qp) {
    using hcasim::workloads::default_iters;
    EXPECT_EQ(default_iters(1), 20000u);
    EXPECT_EQ(default_iters(3), 6667u);  // 20,001 messages
    EXPECT_EQ(default_iters(64), 313u);
    EXPECT_EQ(default_iters(1024), 20u);
    EXPECT_EQ(default_iters(5000), 4u);
    EXPECT_EQ(default_iters(8192), 4u);  // 32,768 messages: each QP's context used 4 times
}

TEST(Cli, uc_and_ud_workloads) {
    EXPECT_EQ(transport_of("ud_send_lat"), transport::ud);
    EXPECT_EQ(transport_of("ud_send_bw"), transport::ud);
    EXPECT_EQ(transport_of("uc_write_bw"), transport::uc);
    EXPECT_EQ(transport_of("rd_send_lat"), transport::rd);
    EXPECT_EQ(transport_of("rd_send_bw"), transport::rd);
    EXPECT_EQ(transport_of("send_bw"), transport::rc);
    EXPECT_EQ(transport_of("mr_scale"), transport::rc);
    const auto o = parse({"--workload", "ud_send_bw", "--size", "64,4K", "--mtu", "4096"});
    EXPECT_EQ(o.sizes, (std::vector<uint64_t>{64, 4096}));
    // One datagram per message: a size above --mtu is refused, naming both.
    EXPECT_EQ(
        error_of([] {
            parse({"--workload", "ud_send_bw", "--size", "64,8K"});
        }),
        "--size: 8192 bytes exceeds the MTU (4096 bytes, --mtu): ud_send_bw sends each message as one UD "
        "datagram");
    EXPECT_EQ(
        error_of([] {
            parse({"--workload", "ud_send_lat", "--size", "2-2K", "--mtu", "1024"});
        }),
        "--size: 2048 bytes exceeds the MTU (1024 bytes, --mtu): ud_send_lat sends each message as one UD "
        "datagram");
    // mcast_bw: UD multicast, so the same limit.
    EXPECT_EQ(transport_of("mcast_bw"), transport::ud);
    EXPECT_EQ(parse({"--workload", "mcast_bw", "--size", "64,4K"}).sizes, (std::vector<uint64_t>{64, 4096}));
    EXPECT_EQ(error_of([] {
                  parse({"--workload", "mcast_bw", "--size", "2K", "--mtu", "1024"});
              }),
              "--size: 2048 bytes exceeds the MTU (1024 bytes, --mtu): mcast_bw sends each message as one UD "
              "datagram");
    // UC is segmented like RC.
    EXPECT_EQ(parse({"--workload", "uc_write_bw", "--size", "1M", "--mtu", "1024"}).sizes,
              (std::vector<uint64_t>{1u << 20}));
    std::ostringstream help;
    parse({"--help"}, &help);
    for (const char* w : {"ud_send_lat", "ud_send_bw", "uc_write_bw", "mcast_bw"})
        EXPECT_NE(help.str().find(w), std::string::npos) << w;
}

TEST(Cli, apply_config_set_beats_later_config) {
    broker::instance().reset();
    const auto a = temp_path("a.ini"), b = temp_path("b.ini");
    std::ofstream(a) << "[pcie]\nlanes = 4\nspeed = 1\n";
    std::ofstream(b) << "[pcie]\nlanes = 8\n";
    const auto o = parse({"--set", "pcie.lanes=2", "--config", a.c_str(), "--config", b.c_str()});
    apply_config(o);
    param<unsigned> lanes("pcie.lanes", 1, "", "h");
    param<unsigned> speed("pcie.speed", 0, "", "h");
    EXPECT_EQ(lanes.get(), 2u);
    EXPECT_EQ(speed.get(), 1u);
    EXPECT_NO_THROW(broker::instance().check_unused());
    broker::instance().reset();
}

TEST(Cli, apply_config_missing_file) {
    broker::instance().reset();
    const auto o = parse({"--config", "/nonexistent/x.ini"});
    EXPECT_EQ(error_of([&] { apply_config(o); }),
              "cannot open configuration file '/nonexistent/x.ini': No such file or directory");
    broker::instance().reset();
}

TEST(Report, latency_stats) {
    std::vector<double> s;
    for (int i = 100; i >= 1; --i) s.push_back(i);  // 1..100, unsorted
    const auto r = latency_stats(64, s);
    EXPECT_TRUE(r.latency);
    EXPECT_EQ(r.size_bytes, 64u);
    EXPECT_EQ(r.iters, 100u);
    EXPECT_DOUBLE_EQ(r.lat_min_us, 1);
    EXPECT_DOUBLE_EQ(r.lat_max_us, 100);
    EXPECT_DOUBLE_EQ(r.lat_typical_us, 51);  // sorted[n/2], as perftest
    EXPECT_DOUBLE_EQ(r.lat_p99_us, 99);
    EXPECT_DOUBLE_EQ(r.lat_avg_us, 50.5);
    const auto one = latency_stats(8, {2.5});
    EXPECT_DOUBLE_EQ(one.lat_p99_us, 2.5);
    EXPECT_DOUBLE_EQ(one.lat_typical_us, 2.5);
    const auto none = latency_stats(8, {});
    EXPECT_EQ(none.iters, 0u);
    EXPECT_TRUE(none.latency);
}

TEST(Report, latency_stats_gives_the_distribution_at_every_percent_p99_9_and_the_maximum) {
    std::vector<double> s;
    for (int i = 2000; i >= 1; --i) s.push_back(i);  // 1..2000, unsorted
    const auto r = latency_stats(64, s);
    const auto& q = lat_cdf_quantiles();
    ASSERT_EQ(q.size(), 102u);
    ASSERT_EQ(r.lat_cdf_us.size(), q.size());
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[0], 1) << "quantile 0: the minimum";
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[1], 20) << "1%: nearest rank 20 of 2000";
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[7], 140) << "7% exactly (no 0.07 * n rounding up)";
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[50], 1000);
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[99], 1980);
    EXPECT_DOUBLE_EQ(q[100].value(), 0.999);
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[100], 1998);
    EXPECT_DOUBLE_EQ(r.lat_cdf_us[101], 2000) << "quantile 1: the maximum";
    const auto one = latency_stats(8, {2.5});
    EXPECT_EQ(one.lat_cdf_us, std::vector<double>(102, 2.5));
    EXPECT_TRUE(latency_stats(8, {}).lat_cdf_us.empty());
}

TEST(Report, table_latency_and_bandwidth) {
    run_report r;
    r.workload = "write_lat";
    r.seed = 7;
    r.sim_time_ns = 12345;
    r.wire_packets = 99;
    r.wall_s = 3.5;
    r.results.push_back(latency_stats(2, {1.0, 2.0, 3.0}));
    std::ostringstream os;
    print_table(os, r);
    const auto t = os.str();
    EXPECT_NE(t.find("hcasim write_lat (seed 7)"), std::string::npos);
    EXPECT_NE(t.find("t_typical[usec]"), std::string::npos);
    EXPECT_NE(t.find("99% percentile[usec]"), std::string::npos);
    EXPECT_NE(t.find(" 2          3            1.00           3.00"), std::string::npos) << t;
    EXPECT_NE(t.find("simulated time 12345 ns, 99 wire packets"), std::string::npos);
    EXPECT_EQ(t.find("3.5"), std::string::npos);  // no wall time in the table

    run_report bw;
    bw.workload = "write_bw";
    size_result s;
    s.size_bytes = 65536;
    s.iters = 5000;
    s.messages = 20000;  // 4 QPs
    s.bw_gbps = 97.61;
    s.msg_rate_mpps = 0.186175;
    bw.results.push_back(s);
    std::ostringstream os2;
    print_table(os2, bw);
    EXPECT_NE(os2.str().find("\n #bytes     #iterations  BW average[Gb/sec]   MsgRate[Mpps]    #messages\n"
                             " 65536      5000         97.61                0.186175         20000\n"),
              std::string::npos)
        << os2.str();
    EXPECT_NE(os2.str().find("97.61"), std::string::npos);
    EXPECT_NE(os2.str().find("0.186175"), std::string::npos);
}

TEST(Report, lost_datagrams_line_and_json) {
    run_report r;
    r.workload = "ud_send_bw";
    size_result s;
    s.size_bytes = 64;
    s.iters = 500;
    s.bw_gbps = 10.83;
    s.msg_rate_mpps = 21.143437;
    s.datagrams = true;
    s.datagrams_sent = 500;
    r.results.push_back(s);
    std::ostringstream none;
    print_table(none, r);
    EXPECT_EQ(none.str().find("lost"), std::string::npos) << "no line while nothing is lost";
    r.results[0].datagrams_lost = 15;
    std::ostringstream some;
    print_table(some, r);
    EXPECT_NE(
        some.str().find("\n datagrams lost: 15 of 500 sent (UD does not retransmit; counters ud_dropped, "
                        "link.dropped)\n"),
        std::string::npos)
        << some.str();
    const auto path = temp_path("lost.json");
    write_json(path, r);
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in);
    EXPECT_EQ(j["results"][0]["datagrams_lost"], 15);
}

TEST(Report, json_layout) {
    broker::instance().reset();
    broker::instance().set_override("node0.pcie.lanes=8");
    param<unsigned> lanes("node0.pcie.lanes", 4, "", "h");
    param<bool> trace("trace", false, "", "h");
    counter tx("node0.port.tx_packets", "h");
    counter rx("node0.port.rx_packets", "h");
    tx += 3;
    rx += 2;

    run_report r;
    r.workload = "send_bw";
    r.seed = 3;
    r.sim_time_ns = 1000;
    r.wall_s = 0.5;
    r.wire_packets = 10;
    size_result s;
    s.size_bytes = 4096;
    s.iters = 100;
    s.messages = 200;
    s.bw_gbps = 50;
    s.msg_rate_mpps = 1.5;
    r.results.push_back(s);
    r.results.push_back(latency_stats(8, {1.0, 2.0}));
    const auto path = temp_path("stats.json");
    write_json(path, r);

    std::ifstream in(path);
    const auto j = nlohmann::ordered_json::parse(in);
    std::vector<std::string> top;
    for (auto it = j.begin(); it != j.end(); ++it) top.push_back(it.key());
    EXPECT_EQ(top,
              (std::vector<std::string>{"workload", "seed", "qps", "results", "sim", "counters", "config"}));
    EXPECT_EQ(j["workload"], "send_bw");
    EXPECT_EQ(j["seed"], 3);
    ASSERT_EQ(j["results"].size(), 2u);
    EXPECT_EQ(j["results"][0].size(), 5u);
    EXPECT_EQ(j["results"][0]["size_bytes"], 4096);
    EXPECT_EQ(j["results"][0]["iters"], 100);
    EXPECT_EQ(j["results"][0]["messages"], 200);  // a bandwidth row: over every QP
    EXPECT_EQ(j["results"][0]["bw_gbps"], 50.0);
    EXPECT_EQ(j["results"][0]["msg_rate_mpps"], 1.5);
    EXPECT_EQ(j["results"][1].size(), 8u);
    EXPECT_EQ(j["results"][1]["lat_max_us"], 2.0);
    EXPECT_EQ(j["results"][1]["lat_cdf_us"].size(), 102u);  // the distribution at lat_cdf_quantiles()
    EXPECT_FALSE(j["results"][1].contains("bw_gbps"));
    EXPECT_EQ(j["sim"]["sim_time_ns"], 1000);
    EXPECT_EQ(j["sim"]["wire_packets"], 10);
    EXPECT_EQ(j["sim"]["wire_packets_per_wall_s"], 20.0);
    EXPECT_EQ(j["counters"]["node0.port.tx_packets"], 3);
    EXPECT_EQ(j["counters"].begin().key(), "node0.port.tx_packets");  // declaration order
    EXPECT_EQ(j["config"]["node0.pcie.lanes"], "8");
    EXPECT_EQ(j["config"]["trace"], "false");
    broker::instance().reset();
}

TEST(Report, json_unwritable) {
    EXPECT_EQ(error_of([] { write_json("/nonexistent/dir/s.json", run_report{}); }),
              "--stats-json: cannot write '/nonexistent/dir/s.json': No such file or directory");
}
