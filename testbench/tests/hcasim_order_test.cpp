// The model's results do not depend on the order in which SystemC runs events due at one instant
// (docs/fabric.md, "Same-time events"): the order a fabric split over processes cannot
// reproduce. HCASIM_CHAFF=SEED (testbench/workloads/chaff.h) queues dummy timed events that
// reorder the kernel's same-time events; every run here must give the stats JSON (without the run
// block and the wall-clock figures), stdout and --pcap captures of the unperturbed run, byte for
// byte. The Chaff cases check the perturbation itself: it reorders events due at one instant.
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <gtest/gtest.h>
#include <systemc>

#include "testbench/tests/hcasim_run.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/workloads/chaff.h"
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::dir_entries;
using hcasim::test::empty_dir;
using hcasim::test::lines_of;
using hcasim::test::result;
using hcasim::test::run_hcasim;
using hcasim::test::slurp;

const std::string FAT_TREE_16 =
    " --set fabric.nodes=16 --set fabric.topology=fat_tree --set fabric.switch.radix=8";  // 5 leaves, 4 spines
const std::string LOSS = " --set link.drop_rate=0.001";

/// What a run leaves: its exit status, stdout, stderr, stats JSON without what may differ
/// between runs (deterministic_part), and its captures by file name.
struct outputs {
    result r;
    std::string stats;
    std::vector<std::pair<std::string, std::string>> pcaps;
};

/// Runs `args` in a fresh directory (so stdout names the same relative paths), with chaff seeded
/// `seed` (0: none), writing stats.json and the captures under pcap/.
outputs run_in_dir(const std::string& args, unsigned seed) {
    const std::string tag = "order_" + std::to_string(seed);
    const std::string dir = empty_dir(tag);
    outputs o;
    const std::string env =
        seed ? "export HCASIM_CHAFF=" + std::to_string(seed) + "; " : "unset HCASIM_CHAFF; ";
    o.r = run_hcasim(args + " --stats-json stats.json --pcap pcap", tag, env, dir);
    const std::string json = slurp(dir + "/stats.json");
    if (!json.empty())
        o.stats = hcasim::test::deterministic_part(nlohmann::ordered_json::parse(json)).dump(1);
    if (std::filesystem::is_directory(dir + "/pcap"))
        for (const std::string& f : dir_entries(dir + "/pcap"))
            o.pcaps.emplace_back(f, slurp(dir + "/pcap/" + f));
    std::filesystem::remove_all(dir);
    return o;
}

/// "" if `a` and `b` are equal, else their first differing line (1-based) and both versions.
std::string first_difference(const std::string& a, const std::string& b) {
    if (a == b) return "";
    const std::vector<std::string> la = lines_of(a), lb = lines_of(b);
    for (size_t i = 0; i < std::max(la.size(), lb.size()); ++i) {
        const std::string x = i < la.size() ? la[i] : "<end>", y = i < lb.size() ? lb[i] : "<end>";
        if (x != y)
            return "line " + std::to_string(i + 1) + ":\n  unperturbed: " + x + "\n  chaff:       " + y;
    }
    return "same lines, different bytes";
}

/// Runs `args` without chaff and with chaff seeded 1..`seeds`: every output equal to the first.
/// `dropping`: the run must lose packets (link.dropped > 0 on its stdout).
void expect_order_independent(const std::string& args, unsigned seeds, bool dropping) {
    const outputs ref = run_in_dir(args, 0);
    ASSERT_EQ(ref.r.code, 0) << ref.r.err;
    ASSERT_FALSE(ref.stats.empty());
    ASSERT_FALSE(ref.pcaps.empty());
    EXPECT_EQ(std::regex_search(ref.r.out, std::regex("link\\.dropped [1-9]")), dropping) << ref.r.out;
    for (unsigned seed = 1; seed <= seeds; ++seed) {
        SCOPED_TRACE("HCASIM_CHAFF=" + std::to_string(seed));
        const outputs o = run_in_dir(args, seed);
        ASSERT_EQ(o.r.code, 0) << o.r.err;
        EXPECT_EQ(first_difference(ref.r.out, o.r.out), "") << "stdout";
        EXPECT_EQ(first_difference(ref.r.err, o.r.err), "") << "stderr";
        EXPECT_EQ(first_difference(ref.stats, o.stats), "") << "stats JSON";
        ASSERT_EQ(o.pcaps.size(), ref.pcaps.size());
        for (size_t i = 0; i < ref.pcaps.size(); ++i) {
            EXPECT_EQ(o.pcaps[i].first, ref.pcaps[i].first);
            EXPECT_TRUE(o.pcaps[i].second == ref.pcaps[i].second) << ref.pcaps[i].first << " differs";
        }
    }
}

TEST(Order, fat_tree_alltoall_4k_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload alltoall --size 4K --iters 20" + FAT_TREE_16, 3, false);
}

TEST(Order, fat_tree_alltoall_4k_under_loss_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload alltoall --size 4K --iters 20" + FAT_TREE_16 + LOSS, 3, true);
}

TEST(Order, fat_tree_incast_4k_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload incast --size 4K --iters 100" + FAT_TREE_16, 3, false);
}

TEST(Order, fat_tree_incast_4k_under_loss_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload incast --size 4K --iters 100" + FAT_TREE_16 + LOSS, 3, true);
}

TEST(Order, two_node_write_bw_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload write_bw", 3, false);
}

TEST(Order, two_node_send_lat_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload send_lat", 3, false);
}

// node1's translation unit once took lookups in call order, and a READ request's R_Key check
// (port.rx_process) and a READ response's translation (response_method) can come at one instant
// (node1.pcie.tag_stall_ps differed); the calls of one instant now wait only for earlier instants.
TEST(Order, two_node_read_bw_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload read_bw", 3, false);
}

// node0's requester once took its round robin of QPs (`ready_`, make_tx_ready) in call order: at
// one instant the requester_method re-queues the QP it just served while doorbell_unit.dispatch
// queues another QP's new WQE (push_send). The QPs queued at one instant now take their turns by
// turn_order (same_time_fifo).
TEST(Order, two_node_srq_bw_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload srq_bw", 3, false);
}

TEST(Order, two_node_write_bw_on_4_qps_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload write_bw --qps 4", 3, false);
}

// The requester race above on every node: with 64 KiB messages (16 packets each) node0 met it at
// 180,970,561 ps (QP 2 re-queued, QP 3 rung), and every output differed.
TEST(Order, fat_tree_alltoall_64k_gives_identical_outputs_whatever_the_same_time_event_order) {
    expect_order_independent("--workload alltoall --size 64K --iters 5" + FAT_TREE_16, 3, false);
}

TEST(Order, a_chaff_seed_that_is_not_a_number_exits_2_naming_the_variable) {
    const result r = run_hcasim("--workload write_bw", "order_bad", "export HCASIM_CHAFF=12x; ");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("HCASIM_CHAFF=12x: not a seed"), std::string::npos) << r.err;
}

// ------------------------------------------------------------------ the perturbation itself

/// Eight processes wait on eight events notified, at 3 ns, for 1 us: the order they run in.
struct same_time_toy : sc_core::sc_module {
    SC_HAS_PROCESS(same_time_toy);
    sc_core::sc_event ev[8];
    std::string order;
    explicit same_time_toy(sc_core::sc_module_name n) : sc_module(n) {
        for (unsigned i = 0; i < 8; ++i)
            sc_core::sc_spawn(
                [this, i] {
                    wait(ev[i]);
                    order += char('0' + i);
                },
                sc_core::sc_gen_unique_name("waiter"));
        SC_THREAD(notify_all);
    }
    void notify_all() {
        wait(3, sc_core::SC_NS);
        for (auto& e : ev) e.notify(1, sc_core::SC_US);
    }
};

/// The toy's order with chaff seeded `seed` (0: none), and the time the simulation ended,
/// run in a child process (one elaboration per process) and passed back through a file.
std::pair<std::string, uint64_t> toy_run(unsigned seed) {
    const std::string path = ::testing::TempDir() + "order_toy_" + std::to_string(getpid());
    hcasim::test::run_forked([&] {
        same_time_toy toy("toy");
        std::unique_ptr<hcasim::workloads::chaff> c;
        if (seed) c = std::make_unique<hcasim::workloads::chaff>("chaff", seed);
        sc_core::sc_start();  // returns: the chaff stops once the toy has nothing left to do
        std::ofstream(path) << toy.order << " " << sc_core::sc_time_stamp().value();
    });
    std::ifstream in(path);
    std::pair<std::string, uint64_t> r;
    in >> r.first >> r.second;
    std::remove(path.c_str());
    return r;
}

TEST(Chaff, reorders_events_due_at_one_instant_reproducibly_per_seed) {
    const auto plain = toy_run(0);
    ASSERT_EQ(plain.first.size(), 8u);
    EXPECT_EQ(plain.second, 1003000u);  // ps: the last event
    unsigned reordered = 0;
    for (unsigned seed = 1; seed <= 3; ++seed) {
        const auto a = toy_run(seed), b = toy_run(seed);
        EXPECT_EQ(a.first, b.first) << "seed " << seed;
        EXPECT_EQ(a.first.size(), 8u);
        reordered += a.first != plain.first;
        // Once the toy has starved, the chaff's last queued event ends the simulation.
        EXPECT_GE(a.second, plain.second);
        EXPECT_LE(a.second, plain.second + hcasim::workloads::chaff::max_delay_ps);
    }
    EXPECT_GE(reordered, 2u) << "unperturbed order " << plain.first;
}

}  // namespace
