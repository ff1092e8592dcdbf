// hcasim --timeline (issue 9): Chrome trace-event JSON with a track per unit per node, in which
// one RDMA WRITE can be followed from the doorbell to the CQE on both nodes; exact wire spans;
// byte-identical from run to run. Issue 27: spans nest on every track although transactions
// overlap; --timeline-window and --timeline-nodes; write errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unistd.h>
#include <vector>

#include <nlohmann/json.hpp>

#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim::test;

namespace {

struct ev {
    unsigned node;
    std::string track, name;
    double ts, dur;  // microseconds
    nlohmann::json args;
};

std::vector<ev> load(const std::string& path) {
    const nlohmann::json j = nlohmann::json::parse(slurp(path));
    std::map<std::pair<unsigned, unsigned>, std::string> tracks;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] == "M" && e["name"] == "thread_name") tracks[{e["pid"], e["tid"]}] = e["args"]["name"];
    std::vector<ev> out;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] != "M")
            out.push_back({e["pid"], tracks.at({e["pid"], e["tid"]}), e["name"], e["ts"].get<double>(),
                           e.value("dur", 0.0), e.value("args", nlohmann::json::object())});
    return out;
}

/// The first event of node/track/name at or after `from`.
const ev* first(const std::vector<ev>& v, unsigned node, const std::string& track, const std::string& name,
                double from) {
    for (const ev& e : v)
        if (e.node == node && e.track == track && e.name == name && e.ts >= from) return &e;
    return nullptr;
}

}  // namespace

TEST(HcasimTimeline, one_rdma_write_can_be_followed_from_doorbell_to_cqe_on_both_nodes) {
    const std::string f = ::testing::TempDir() + "timeline_" + std::to_string(getpid()) + ".json";
    const result r = run_hcasim("--workload write_lat --size 6000 --iters 3 --timeline '" + f + "'", "tl");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<ev> v = load(f);
    ASSERT_FALSE(v.empty());
    const std::string stages = "HCA: doorbell and transport engine stages";
    // node0's first WRITE: doorbell -> requester -> wire (two packets) -> node1 receive ->
    // responder -> data placed; the ACK back; node0's CQE. Every step after the one before.
    const ev* db = first(v, 0, stages, "doorbell", 0);
    ASSERT_NE(db, nullptr);
    const ev* start = first(v, 0, stages, "wqe_start", db->ts);
    ASSERT_NE(start, nullptr);
    const ev* out1 = first(v, 0, "port: wire out", "RC WRITE_FIRST", start->ts);
    ASSERT_NE(out1, nullptr);
    const ev* out2 = first(v, 0, "port: wire out", "RC WRITE_LAST", out1->ts);
    ASSERT_NE(out2, nullptr);
    EXPECT_EQ(out2->args["psn"], out1->args["psn"].get<unsigned>() + 1);
    const ev* in1 = first(v, 1, "port: receive", "RC WRITE_FIRST", out1->ts);
    ASSERT_NE(in1, nullptr);
    EXPECT_EQ(in1->args["psn"], out1->args["psn"]);
    EXPECT_EQ(in1->args["dest_qp"], out1->args["dest_qp"]);
    const ev* placed = first(v, 1, stages, "data_placed", in1->ts);
    ASSERT_NE(placed, nullptr);
    const ev* ack_out = first(v, 1, "port: wire out", "RC ACK", placed->ts - 1.0);
    ASSERT_NE(ack_out, nullptr);
    const ev* ack_in = first(v, 0, "port: receive", "RC ACK", ack_out->ts);
    ASSERT_NE(ack_in, nullptr);
    const ev* cqe = first(v, 0, "CQ writer", "CQE", ack_in->ts);
    ASSERT_NE(cqe, nullptr);
    EXPECT_EQ(cqe->args["status"], 0);
    EXPECT_LT(db->ts, start->ts);
    EXPECT_LE(start->ts, out1->ts);
    EXPECT_LT(out1->ts, in1->ts + in1->dur);
    // The payload was read over node0's PCIe between the doorbell and the wire.
    const ev* rd = first(v, 0, "PCIe: DMA reads", "DMA read", start->ts);
    ASSERT_NE(rd, nullptr);
    EXPECT_LT(rd->ts, out1->ts + out1->dur);
    // A wire span lasts exactly its bytes at the link rate: EDR 4x, 100 Gb/s = 80 ps per byte.
    for (const ev* w : {out1, out2, ack_out})
        EXPECT_NEAR(w->dur, w->args["bytes"].get<double>() * 80e-6, 1e-9) << w->name;
    // Byte-identical from run to run.
    const std::string f2 = f + ".2";
    ASSERT_EQ(run_hcasim("--workload write_lat --size 6000 --iters 3 --timeline '" + f2 + "'", "tl2").code,
              0);
    EXPECT_EQ(slurp(f), slurp(f2));
    std::remove(f.c_str());
    std::remove(f2.c_str());
    const result bad = run_hcasim("--workload write_lat --timeline /nonexistent/dir/t.json", "bad");
    EXPECT_EQ(bad.code, 2);
    EXPECT_EQ(
        bad.err,
        "hcasim: error: --timeline: cannot write '/nonexistent/dir/t.json': No such file or directory\n");
}

namespace {

/// A complete span in picoseconds, with its unit: the track's name without a lane's " (k)".
struct span_ps {
    unsigned pid, tid;
    std::string unit, name;
    uint64_t begin, end;
    std::string args;
    bool operator<(const span_ps& o) const {  // the tid (lane) aside
        return std::tie(pid, unit, begin, end, name, args) <
               std::tie(o.pid, o.unit, o.begin, o.end, o.name, o.args);
    }
};

uint64_t ps_of(double us) { return uint64_t(std::llround(us * 1e6)); }

/// The "X" events of a timeline and the instants (as zero-length spans, `instants`).
std::vector<span_ps> spans(const std::string& path, std::vector<span_ps>* instants = nullptr) {
    const nlohmann::json j = nlohmann::json::parse(slurp(path));
    std::map<std::pair<unsigned, unsigned>, std::string> names;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] == "M" && e["name"] == "thread_name") names[{e["pid"], e["tid"]}] = e["args"]["name"];
    std::vector<span_ps> out;
    for (const auto& e : j["traceEvents"]) {
        if (e["ph"] == "M") continue;
        std::string unit = names.at({e["pid"], e["tid"]});
        if (const size_t lane = unit.rfind(" ("); lane != std::string::npos && unit.back() == ')')
            unit.erase(lane);
        const uint64_t b = ps_of(e["ts"].get<double>());
        span_ps s{e["pid"],
                  e["tid"],
                  unit,
                  e["name"],
                  b,
                  b + ps_of(e.value("dur", 0.0)),
                  e.value("args", nlohmann::json::object()).dump()};
        if (e["ph"] == "X")
            out.push_back(s);
        else if (instants)
            instants->push_back(s);
    }
    return out;
}

}  // namespace

TEST(HcasimTimeline, spans_nest_on_every_track_although_pcie_transactions_overlap) {
    // 16 QPs of 4 64 KiB WRITEs each: many DMA reads and posted writes outstanding at once.
    const std::string f = ::testing::TempDir() + "timeline_nest_" + std::to_string(getpid()) + ".json";
    const result r =
        run_hcasim("--workload write_bw --size 64K --qps 16 --iters 4 --timeline '" + f + "'", "nest");
    ASSERT_EQ(r.code, 0) << r.err;
    const std::vector<span_ps> v = spans(f);
    std::remove(f.c_str());
    ASSERT_FALSE(v.empty());
    // On one track (pid, tid), in order of start, each span either starts after the open ones
    // end or lies within the innermost (the trace-event format's rule for "X" events).
    std::map<std::pair<unsigned, unsigned>, std::vector<const span_ps*>> by_track;
    for (const span_ps& s : v) by_track[{s.pid, s.tid}].push_back(&s);
    size_t checked = 0;
    for (auto& [track, list] : by_track) {
        std::stable_sort(list.begin(), list.end(), [](const span_ps* a, const span_ps* b) {
            return a->begin != b->begin ? a->begin < b->begin : a->end > b->end;
        });
        std::vector<const span_ps*> open;
        for (const span_ps* s : list) {
            while (!open.empty() && open.back()->end <= s->begin) open.pop_back();
            ASSERT_TRUE(open.empty() || s->end <= open.back()->end)
                << s->unit << " node" << track.first << ": " << s->name << " [" << s->begin << ", " << s->end
                << ") overlaps " << open.back()->name << " [" << open.back()->begin << ", "
                << open.back()->end << ")";
            open.push_back(s);
            ++checked;
        }
    }
    EXPECT_EQ(checked, v.size());
    // The run did have overlapping transactions: a unit's spans overlap across its lanes.
    std::map<std::pair<unsigned, std::string>, std::vector<const span_ps*>> by_unit;
    for (const span_ps& s : v) by_unit[{s.pid, s.unit}].push_back(&s);
    size_t overlapping = 0;
    std::set<std::string> units_with_lanes;
    for (auto& [unit, list] : by_unit) {
        std::sort(list.begin(), list.end(),
                  [](const span_ps* a, const span_ps* b) { return a->begin < b->begin; });
        uint64_t end = 0;
        for (const span_ps* s : list) {
            if (s->begin < end) {
                ++overlapping;
                units_with_lanes.insert(unit.second);
            }
            end = std::max(end, s->end);
        }
    }
    EXPECT_GT(overlapping, v.size() / 10) << "too few concurrent spans to test nesting";
    EXPECT_TRUE(units_with_lanes.count("PCIe: DMA reads")) << "no overlapping DMA reads";
}

TEST(HcasimTimeline, window_and_node_filter_keep_only_the_events_that_overlap_them) {
    const std::string f = ::testing::TempDir() + "timeline_all_" + std::to_string(getpid()) + ".json";
    const std::string w = ::testing::TempDir() + "timeline_window_" + std::to_string(getpid()) + ".json";
    const std::string run = "--workload write_bw --size 8K --qps 4 --iters 10 --timeline ";
    ASSERT_EQ(run_hcasim(run + "'" + f + "'", "all").code, 0);
    const result r =
        run_hcasim(run + "'" + w + "' --timeline-window 25000:35000 --timeline-nodes 1", "window");
    ASSERT_EQ(r.code, 0) << r.err;
    std::vector<span_ps> all_instants, instants;
    const std::vector<span_ps> all = spans(f, &all_instants), kept = spans(w, &instants);
    // Exactly the full run's spans of node 1 that overlap [25 us, 35 us), and its instants in it.
    const uint64_t from = 25000000, to = 35000000;
    std::multiset<span_ps> want, got(kept.begin(), kept.end());
    for (const span_ps& s : all)
        if (s.pid == 1 && s.begin < to && (s.end > from || s.begin >= from)) want.insert(s);
    ASSERT_GT(want.size(), 20u);
    EXPECT_LT(want.size(), all.size() / 4);
    // Equal but for the lanes (tids), which only depend on the spans kept.
    EXPECT_TRUE(got.size() == want.size() &&
                std::equal(got.begin(), got.end(), want.begin(),
                           [](const span_ps& a, const span_ps& b) { return !(a < b) && !(b < a); }))
        << got.size() << " spans kept, " << want.size() << " expected";
    size_t want_instants = 0;
    for (const span_ps& s : all_instants) want_instants += s.pid == 1 && s.begin >= from && s.begin < to;
    EXPECT_EQ(instants.size(), want_instants);
    for (const span_ps& s : instants) EXPECT_TRUE(s.pid == 1 && s.begin >= from && s.begin < to) << s.name;
    // Node 0's process is not in the file at all.
    EXPECT_EQ(slurp(w).find("\"node0\""), std::string::npos);
    std::remove(f.c_str());
    std::remove(w.c_str());
}

TEST(HcasimTimeline, bad_window_and_node_filters_are_one_line_errors) {
    const std::string f = ::testing::TempDir() + "timeline_bad_" + std::to_string(getpid()) + ".json";
    struct bad {
        std::string args, err;
    };
    const bad cases[] = {
        {"--timeline-window 100",
         "--timeline-window: expected START_NS:END_NS (nanoseconds of simulated time; either "
         "may be empty), got '100'"},
        {"--timeline-window 1us:2us",
         "--timeline-window: expected START_NS:END_NS (nanoseconds of simulated time; "
         "either may be empty), got '1us:2us'"},
        {"--timeline-window 500:500",
         "--timeline-window '500:500': the window is empty (START_NS must be before END_NS)"},
        {"--timeline-nodes 0,,1", "--timeline-nodes: expected node numbers like 0,1, got '0,,1'"},
        {"--timeline-nodes 2", "--timeline-nodes: there is no node 2 (the fabric has 2 nodes, 0 to 1)"},
    };
    for (const bad& c : cases) {
        const result r =
            run_hcasim("--workload write_lat --iters 3 --timeline '" + f + "' " + c.args, "badf");
        EXPECT_EQ(r.code, 2) << c.args;
        EXPECT_EQ(r.err, "hcasim: error: " + c.err + "\n") << c.args;
        EXPECT_EQ(r.out, "") << c.args;
    }
    const result alone = run_hcasim("--workload write_lat --iters 3 --timeline-window 0:100", "alone");
    EXPECT_EQ(alone.code, 2);
    EXPECT_EQ(alone.err,
              "hcasim: error: --timeline-window and --timeline-nodes choose what --timeline FILE keeps; "
              "give --timeline\n");
}

TEST(HcasimTimeline, a_timeline_that_cannot_be_written_is_exit_2_naming_the_path_and_the_old_file_stays) {
    HCASIM_SKIP_WHERE_ASAN_MISREADS_A_THROW_AFTER_THE_RUN();
    // /dev/full: every write fails (the file is written directly: it cannot be replaced).
    const result full = run_hcasim("--workload write_lat --size 64 --iters 3 --timeline /dev/full", "full");
    EXPECT_EQ(full.code, 2);
    EXPECT_EQ(full.err, "hcasim: error: --timeline: cannot write '/dev/full': No space left on device\n");
    // A full disk: the old timeline stays, no temporary file is left.
    const std::string dir = empty_dir("timeline_disk");
    const std::string f = dir + "/t.json";
    std::ofstream(f) << "old";
    const result r =
        run_hcasim("--workload write_lat --size 64 --iters 3 --timeline '" + f + "'", "disk", file_limit(16));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --timeline: cannot write '" + f + "': File too large\n");
    EXPECT_EQ(slurp(f), "old");
    EXPECT_EQ(dir_entries(dir), std::vector<std::string>{"t.json"});
    std::filesystem::remove_all(dir);
}
