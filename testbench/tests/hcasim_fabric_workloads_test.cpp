// hcasim --workload incast|alltoall|permutation|uniform_random|bisection|hotspot: every node of
// the fabric runs its part. Each workload completes flows x iters messages; an incast keeps the
// bottleneck link busy without passing its rate; a seeded permutation is a derangement and
// reruns byte for byte; a symmetric alltoall is fair; UD's lost datagrams are the switch's drops;
// --report writes the per-flow throughput; bad combinations exit 2 naming the key.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "testbench/tests/hcasim_run.h"

// Linked with the model (SystemC) for hcasim_run.h; the tests run the hcasim binary.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using nlohmann::json;

result run(const std::string& args) { return hcasim::test::run_hcasim(args, "fabric_wl"); }

/// Runs `args` (which must succeed) and returns the row's "fabric" object.
json fabric_of(const std::string& args, result* out = nullptr) {
    json stats;
    const result r = hcasim::test::run_hcasim_stats(args, "fabric_wl", &stats);
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err << r.out;
    if (out) *out = r;
    if (r.code != 0 || !stats.contains("results")) return json::object();
    return stats["results"][0]["fabric"];
}

/// The messages of every flow completed, none lost, no packet dropped; returns the flows.
json every_message_completes(const std::string& args, size_t flows, uint64_t iters) {
    const json f = fabric_of(args + " --iters " + std::to_string(iters));
    EXPECT_EQ(f["flows"].size(), flows) << args;
    EXPECT_EQ(f["messages"], flows * iters) << args;
    EXPECT_EQ(f["lost"], 0) << args;
    EXPECT_EQ(f["dropped"], 0) << args;
    for (const json& fl : f["flows"]) EXPECT_EQ(fl["messages"], iters) << args << " " << fl.dump();
    return f["flows"];
}

}  // namespace

TEST(HcasimFabricWorkloads, incast_completes_every_message_of_every_sender_to_node0) {
    const json flows = every_message_completes("--workload incast --size 4K --set fabric.nodes=6", 5, 30);
    for (size_t k = 0; k < flows.size(); ++k) {
        EXPECT_EQ(flows[k]["src"], k + 1);
        EXPECT_EQ(flows[k]["dst"], 0);
    }
}

TEST(HcasimFabricWorkloads, alltoall_completes_a_flow_between_every_ordered_pair) {
    const json flows = every_message_completes("--workload alltoall --size 2K --set fabric.nodes=4", 12, 20);
    std::set<std::pair<int, int>> pairs;
    for (const json& f : flows) {
        EXPECT_NE(f["src"], f["dst"]);
        pairs.insert({f["src"].get<int>(), f["dst"].get<int>()});
    }
    EXPECT_EQ(pairs.size(), 12u);
}

TEST(HcasimFabricWorkloads, bisection_sends_node_i_to_node_i_plus_half) {
    const json flows = every_message_completes("--workload bisection --size 4K --set fabric.nodes=6", 6, 20);
    for (size_t k = 0; k < flows.size(); ++k) {
        EXPECT_EQ(flows[k]["src"], k);
        EXPECT_EQ(flows[k]["dst"], (k + 3) % 6);
    }
}

TEST(HcasimFabricWorkloads, uniform_random_completes_each_senders_messages_to_drawn_nodes) {
    result r;
    const json f = fabric_of("--workload uniform_random --size 1K --iters 40 --set fabric.nodes=5", &r);
    ASSERT_EQ(f["flows"].size(), 5u);
    EXPECT_EQ(f["messages"], 5 * 40);
    for (const json& fl : f["flows"]) EXPECT_EQ(fl["dst"], -1);
    // Every node received some of the 200 messages, and no node anything from itself: the
    // received bytes add up to every message's.
    double rx = 0;
    for (const json& g : f["node_rx_gbps"]) {
        EXPECT_GT(g.get<double>(), 0);
        rx += g.get<double>();
    }
    EXPECT_NEAR(rx, f["aggregate_gbps"].get<double>(), 1e-6);
}

TEST(HcasimFabricWorkloads, hotspot_sends_the_fraction_to_node0_and_victims_never_touch_it) {
    result r;
    const json f = fabric_of(
        "--workload hotspot --size 1K --iters 40 --set fabric.nodes=5 --set workload.hotspot_fraction=0.25",
        &r);
    ASSERT_EQ(f["flows"].size(), 8u);  // four hotspot flows, four victims
    EXPECT_EQ(f["messages"], 8 * 40);
    unsigned victims = 0;
    for (const json& fl : f["flows"])
        if (fl.value("victim", false)) {
            ++victims;
            EXPECT_NE(fl["src"], 0);
            EXPECT_NE(fl["dst"], 0);
        }
    EXPECT_EQ(victims, 4u);
    // node0 received exactly a quarter of each hotspot flow, 4 x 10 messages of 1 KiB, of the
    // 8 x 40 messages of all flows (both rates are over the same interval).
    const double share = f["node_rx_gbps"][0].get<double>() / f["aggregate_gbps"].get<double>();
    EXPECT_NEAR(share * 8 * 40 * 1024, 4 * 10 * 1024, 1e-6);
    EXPECT_GT(f["victim_gbps"].get<double>(), 0);
}

TEST(HcasimFabricWorkloads, ud_and_uc_alltoall_deliver_every_message) {
    for (const std::string t : {"ud", "uc"}) {
        const json f = fabric_of(
            "--workload alltoall --size 1K --iters 30 --set fabric.nodes=4 --qps 2 --set "
            "workload.transport=" +
            t);
        EXPECT_EQ(f["transport"], t);
        EXPECT_EQ(f["messages"], 12 * 30) << t;
        EXPECT_EQ(f["lost"], 0) << t;
    }
}

TEST(HcasimFabricWorkloads, incast_on_8_nodes_keeps_node0s_receive_at_most_the_link_rate_and_close_to_it) {
    result r;
    // 7 senders x 16 outstanding 4 KiB WRITEs fit the switch's output queue (256 packets): the
    // switch of today drops what does not.
    const json f = fabric_of(
        "--workload incast --size 4K --iters 100 --set fabric.nodes=8 --set workload.tx_depth=16", &r);
    EXPECT_EQ(f["messages"], 700);
    EXPECT_EQ(f["dropped"], 0);
    const double link = f["link_gbps"].get<double>(), node0 = f["node_rx_gbps"][0].get<double>();
    EXPECT_EQ(link, 100.0);
    EXPECT_LE(node0, link);
    EXPECT_GT(node0, 0.95 * link);
    EXPECT_EQ(f["aggregate_gbps"].get<double>(), node0);
    for (size_t n = 1; n < 8; ++n) EXPECT_EQ(f["node_rx_gbps"][n], 0.0);
    EXPECT_NE(r.out.find(" incast: 7 flows over RC, 8 nodes, 700 of 700 messages completed, 0 lost\n"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find(" packets dropped: 0 (switch.dropped_no_route 0, "), std::string::npos) << r.out;
}

TEST(HcasimFabricWorkloads, incast_over_ud_loses_nothing_on_the_lossless_fabric) {
    // 7 x 128 datagrams at once: far more than the switch's buffers hold; credits hold the
    // senders back instead of dropping (UD would not retransmit a lost one).
    const json f =
        fabric_of("--workload incast --size 4K --iters 200 --set fabric.nodes=8 --set workload.transport=ud");
    EXPECT_EQ(f["lost"].get<uint64_t>(), 0u);
    EXPECT_EQ(f["messages"].get<uint64_t>(), 1400u);
    EXPECT_EQ(f["dropped"].get<uint64_t>(), 0u);
}

TEST(HcasimFabricWorkloads, permutation_with_a_seed_is_a_derangement_and_byte_identical_on_rerun) {
    const std::string args = "--workload permutation --size 4K --set fabric.nodes=8 --seed ";
    std::set<std::vector<int>> pairings;
    for (const char* seed : {"7", "8", "9"}) {
        const json flows = every_message_completes(args + seed, 8, 20);
        std::vector<int> dst;
        std::set<int> seen;
        for (size_t k = 0; k < flows.size(); ++k) {
            EXPECT_EQ(flows[k]["src"], k);
            EXPECT_NE(flows[k]["dst"], k) << "seed " << seed;
            dst.push_back(flows[k]["dst"].get<int>());
            seen.insert(dst.back());
        }
        EXPECT_EQ(seen.size(), 8u) << "seed " << seed << ": not a permutation";
        pairings.insert(dst);
    }
    EXPECT_GT(pairings.size(), 1u) << "the seed does not change the pairing";
    const result a = run(args + "7 --iters 20"), b = run(args + "7 --iters 20");
    ASSERT_EQ(a.code, 0) << a.err;
    EXPECT_EQ(a.out, b.out);
}

TEST(HcasimFabricWorkloads, jains_index_of_a_symmetric_alltoall_is_about_1) {
    const json f = fabric_of("--workload alltoall --size 4K --iters 40 --set fabric.nodes=6");
    EXPECT_EQ(f["messages"], 30 * 40);
    EXPECT_GT(f["jain"].get<double>(), 0.99);
    EXPECT_LE(f["jain"].get<double>(), 1.0 + 1e-12);
    EXPECT_GT(f["mct_us"]["p50"].get<double>(), 0);
    EXPECT_LE(f["mct_us"]["p50"].get<double>(), f["mct_us"]["p99"].get<double>());
    EXPECT_LE(f["mct_us"]["p99"].get<double>(), f["mct_us"]["max"].get<double>());
}

TEST(HcasimFabricWorkloads, report_writes_each_flows_throughput) {
    const std::string dir = hcasim::test::empty_dir("fabric_wl_report");
    const result r =
        run("--workload incast --size 4K --iters 20 --set fabric.nodes=4 --report '" + dir + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string csv = hcasim::test::slurp(dir + "/flows.csv");
    std::vector<std::string> lines;
    std::istringstream in(csv);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    ASSERT_EQ(lines.size(), 4u) << csv;
    EXPECT_EQ(lines[0], "workload,qps,size_bytes,flow,src,dst,victim,messages,lost,gbps");
    for (size_t k = 1; k < 4; ++k)
        EXPECT_EQ(lines[k].rfind(
                      "incast,1,4096," + std::to_string(k - 1) + "," + std::to_string(k) + ",0,0,20,0,", 0),
                  0u)
            << lines[k];
}

TEST(HcasimFabricWorkloads, bad_combinations_exit_2_naming_the_key) {
    const std::pair<const char*, const char*> cases[] = {
        {"--workload incast --set fabric.nodes=1", "fabric.nodes=1: incast needs at least 2 nodes"},
        {"--workload bisection --size 4K --set fabric.nodes=5",
         "fabric.nodes=5: bisection sends from each half to the other: it needs an even number of nodes"},
        {"--workload hotspot --set fabric.nodes=2",
         "fabric.nodes=2: hotspot needs at least 3 nodes (the hot node0 and two that send to it and to each "
         "other)"},
        {"--workload hotspot --set fabric.nodes=4 --set workload.hotspot_fraction=1.5",
         "bad value '1.5' for key 'workload.hotspot_fraction' (--set): expected number in [0,1]"},
        {"--workload alltoall --set fabric.nodes=4 --set workload.transport=ud --size 8K",
         "--size: 8192 bytes exceeds the MTU (4096 bytes, --mtu): workload.transport=ud sends each message "
         "as "
         "one datagram"},
        {"--workload alltoall --set fabric.nodes=4 --set workload.transport=rd",
         "bad value 'rd' for key 'workload.transport' (--set): expected one of rc|uc|ud"},
        {"--workload alltoall --set fabric.nodes=4 --size 4K,8K",
         "--size: alltoall runs one message size per run (got 2)"},
        {"--workload incast --set fabric.nodes=4 --verify",
         "--verify: incast does not check data (a many-node workload counts messages)"},
    };
    for (const auto& [args, msg] : cases) {
        const result r = run(args);
        EXPECT_EQ(r.code, 2) << args;
        EXPECT_EQ(r.err, std::string("hcasim: error: ") + msg + "\n") << args;
        EXPECT_EQ(r.out, "") << args;
    }
}
