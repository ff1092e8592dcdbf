// hcasim --timeline (issue 9): Chrome trace-event JSON with a track per unit per node, in which
// one RDMA WRITE can be followed from the doorbell to the CQE on both nodes; exact wire spans;
// byte-identical from run to run.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
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
        if (e["ph"] == "M" && e["name"] == "thread_name")
            tracks[{e["pid"], e["tid"]}] = e["args"]["name"];
    std::vector<ev> out;
    for (const auto& e : j["traceEvents"])
        if (e["ph"] != "M")
            out.push_back({e["pid"], tracks.at({e["pid"], e["tid"]}), e["name"], e["ts"].get<double>(),
                           e.value("dur", 0.0), e.value("args", nlohmann::json::object())});
    return out;
}

/// The first event of node/track/name at or after `from`.
const ev* first(const std::vector<ev>& v, unsigned node, const std::string& track, const std::string& name, double from) {
    for (const ev& e : v)
        if (e.node == node && e.track == track && e.name == name && e.ts >= from)
            return &e;
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
    ASSERT_EQ(run_hcasim("--workload write_lat --size 6000 --iters 3 --timeline '" + f2 + "'", "tl2").code, 0);
    EXPECT_EQ(slurp(f), slurp(f2));
    std::remove(f.c_str());
    std::remove(f2.c_str());
    const result bad = run_hcasim("--workload write_lat --timeline /nonexistent/dir/t.json", "bad");
    EXPECT_EQ(bad.code, 2);
    EXPECT_EQ(bad.err, "hcasim: error: --timeline: cannot write '/nonexistent/dir/t.json'\n");
}
