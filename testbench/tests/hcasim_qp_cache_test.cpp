// hcasim with more QPs than the QP context cache holds: a 64 B RDMA WRITE stream over N QPs
// with a 16-entry cache. Up to 16 QPs every context stays on chip (no miss after setup); past
// it every packet's context is read from host memory, so more QPs never run faster, and the
// PCIe traffic class of the misses accounts for every miss. With the host out of the way
// (threads, send units) the cliff stays, a hashed set index brings misses before the cache is
// full, and a miss holds its QP's send unit. Bad cache geometry is an error.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

struct point {
    double mpps = 0;
    uint64_t misses0 = 0, misses1 = 0, qpc_bytes0 = 0, state_qps = 0, state_bytes = 0, packets0 = 0;
};

const std::string cache16 =
    "--set hca.transport_engine.qpc_cache_entries=16 --set hca.transport_engine.qpc_cache_ways=4";

/// The host out of the way: 8 application threads on 8 cores, and 8 send units of 100 ns per
/// WQE (80 cycles at 800 MHz), so the HCA bounds the rate (80 Mpps, not one core's ~22), with a
/// 64-entry, 4-way QP context cache (16 sets).
const std::string units64 =
    "--threads 8 --set cpu.cores=8 --set hca.transport_engine.wqe_cycles=80 --set "
    "hca.transport_engine.send_units=8 --set hca.transport_engine.qpc_cache_entries=64 --set "
    "hca.transport_engine.qpc_cache_ways=4";

/// One write_bw run with `qps` QPs and `cache` (default: a 16-entry, 4-way QP context cache): 4096
/// messages in all with cache16, 8192 with units64 (--iters counts per QP).
point run_point(unsigned qps, const std::string& extra = "", const std::string& cache = cache16) {
    const std::string json_path = ::testing::TempDir() + "qpc_" + std::to_string(getpid()) + ".json";
    const std::string iters = "--iters " + std::to_string((cache == cache16 ? 4096u : 8192u) / qps) + " ";
    const result r =
        hcasim::test::run_hcasim("--workload write_bw --size 64 " + iters + "--qps " + std::to_string(qps) +
                                     " " + cache + " " + extra + " --stats-json '" + json_path + "'",
                                 "qpc");
    EXPECT_EQ(r.code, 0) << r.err;
    point p;
    if (r.code != 0) return p;
    const nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    const auto& c = j["counters"];
    p.mpps = j["results"][0]["msg_rate_mpps"].get<double>();
    p.misses0 = c["node0.hca.transport_engine.qpc_misses"].get<uint64_t>();
    p.misses1 = c["node1.hca.transport_engine.qpc_misses"].get<uint64_t>();
    p.qpc_bytes0 = c["node0.hca.dma_mux.qpc_bytes"].get<uint64_t>();
    p.packets0 = c["node0.hca.transport_engine.tx_packets"].get<uint64_t>();
    p.state_qps = c["node0.hca.transport_engine.state_qps"].get<uint64_t>();
    p.state_bytes = c["node0.hca.transport_engine.state_bytes"].get<uint64_t>() +
                    c["node0.hca.transport_engine.state_slot_bytes"].get<uint64_t>();
    return p;
}

}  // namespace

TEST(HcasimQpCache, more_qps_than_the_qp_context_cache_never_run_faster) {
    const unsigned counts[] = {4, 16, 32, 64, 256};
    point prev;
    for (unsigned n : counts) {
        const point p = run_point(n);
        SCOPED_TRACE("qps " + std::to_string(n));
        ASSERT_GT(p.mpps, 0.0);
        // Every miss reads one 256-byte QPC entry through the QP context traffic class.
        EXPECT_EQ(p.qpc_bytes0, 256u * p.misses0);
        if (n <= 16) {
            // All contexts fit (the command unit's writes put them on chip): no miss at all.
            EXPECT_EQ(p.misses0, 0u);
            EXPECT_EQ(p.misses1, 0u);
        } else {
            EXPECT_GT(p.misses0, 0u);
            EXPECT_GT(p.misses1, 0u);
        }
        if (n > 16) {
            EXPECT_LE(p.mpps, prev.mpps * 1.0001) << "more QPs than the cache ran faster";
        }
        prev = p;
    }
    // Round robin over 16 times the cache: nearly every packet misses on both sides, and the
    // message rate falls to well under the cached rate.
    const point cached = run_point(16), thrash = run_point(256);
    EXPECT_GT(thrash.misses0, 4096u * 9 / 10);
    EXPECT_LT(thrash.mpps, 0.7 * cached.mpps);
}

TEST(HcasimQpCache, fewer_miss_slots_never_run_faster) {
    const point one = run_point(64, "--set hca.transport_engine.qpc_miss_slots=1");
    const point eight = run_point(64, "--set hca.transport_engine.qpc_miss_slots=8");
    // One outstanding context read at a time serialises the misses of 64 QPs.
    EXPECT_GT(one.misses0, 0u);
    EXPECT_LT(one.mpps, eight.mpps);
}

TEST(HcasimQpCache, model_state_stays_under_a_kibibyte_per_qp) {
    // The engines' own count of per-QP state (QP records, grown rings) and of the per-QPN
    // arrays of hca.max_qps, together, as --speed prints it.
    const point p = run_point(1024, "--set hca.max_qps=2048");
    ASSERT_EQ(p.state_qps, 1024u);
    EXPECT_LT(double(p.state_bytes) / double(p.state_qps), 1024.0);
}

TEST(HcasimQpCache, message_rate_falls_before_the_cache_is_full_when_qpns_conflict_in_a_set) {
    // 48 QPs in 64 entries: QPN mod 16 sets gives every set 3 QPs, no miss. A hashed index
    // gives some sets more than their 4 ways: those QPs thrash while the cache has room.
    const point mod = run_point(48, "", units64);
    const point hash = run_point(48, "--set hca.transport_engine.qpc_cache_index=hash", units64);
    EXPECT_EQ(mod.misses0, 0u);
    EXPECT_EQ(mod.misses1, 0u);
    EXPECT_GT(hash.misses0, 0u);
    EXPECT_GT(hash.misses1, 0u);
    EXPECT_EQ(hash.qpc_bytes0, 256u * hash.misses0);
    EXPECT_LT(hash.misses0, hash.packets0) << "only the QPs of the overfull sets miss";
    EXPECT_LT(hash.mpps, 0.7 * mod.mpps);
}

TEST(HcasimQpCache, cliff_past_the_qp_context_cache_size_with_the_host_out_of_the_way) {
    const point full = run_point(64, "", units64), past = run_point(128, "", units64);
    // 64 QPs fill the 64 entries exactly: no miss, and the rate is past one core's ~22 Mpps.
    EXPECT_EQ(full.misses0, 0u);
    EXPECT_EQ(full.misses1, 0u);
    EXPECT_GT(full.mpps, 40.0);
    // Twice the cache, round robin under LRU: nearly every packet misses, on both nodes.
    EXPECT_GT(past.misses0, past.packets0 * 9 / 10);
    EXPECT_GT(past.misses1, past.packets0 * 9 / 10);
    EXPECT_LT(past.mpps, 0.5 * full.mpps);
}

TEST(HcasimQpCache, a_context_miss_holds_the_qps_send_unit_unless_told_not_to) {
    // Past the cache every WQE's unit waits a QPC read round trip with its QP; when the unit
    // may start other QPs' WQEs meanwhile, the misses overlap and the rate is higher.
    const point held = run_point(128, "", units64);
    const point free = run_point(128, "--set hca.transport_engine.qpc_miss_stalls_unit=false", units64);
    EXPECT_GT(held.misses0, 0u);
    EXPECT_GT(free.misses0, 0u);
    EXPECT_LT(held.mpps, free.mpps);
}

TEST(HcasimQpCache, bad_cache_geometry_is_a_one_line_error) {
    const result r = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 10 --set "
        "hca.transport_engine.qpc_cache_entries=6 --set "
        "hca.transport_engine.qpc_cache_ways=4",
        "qpc_bad");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("qpc_cache_entries: 6 is not a multiple of qpc_cache_ways (4)"), std::string::npos)
        << r.err;
    const result p = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 10 --set hca.cq_writer.cqc_cache_policy=mru", "qpc_bad");
    EXPECT_NE(p.code, 0);
    EXPECT_NE(p.err.find("cqc_cache_policy"), std::string::npos) << p.err;
    const result x = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 10 --set hca.transport_engine.qpc_cache_index=xor", "qpc_bad");
    EXPECT_EQ(x.code, 2);
    EXPECT_NE(x.err.find("bad value 'xor' for key 'node0.hca.transport_engine.qpc_cache_index' (--set): "
                         "expected one of mod|hash"),
              std::string::npos)
        << x.err;
}
