// --dump-stimulus end to end (issue 34, docs/cosim.md "Stimulus dumps"): hcasim records each
// node's CQ writer at its pins under real traffic, whichever implementation runs, and the dump
// replays against the verilated RTL alone — the SystemC replay (cq_replay.h) and the plain
// SystemVerilog testbench (rtl/tb/cq_writer_replay.sv) — and stops the broken build at the
// first CQE of the ring's second pass.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "Vcq_writer.h"
#include "Vcq_writer_broken.h"
#include "testbench/tests/cq_replay.h"
#include "testbench/tests/hcasim_run.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;

namespace {

struct kinds {
    uint64_t completions = 0, inputs = 0, writes = 0, answers = 0;
};
kinds count(const cq_stimulus& s) {
    kinds k;
    for (const cq_stim_record& r : s.records) {
        (r.kind == 'W' ? k.writes : r.kind == 'A' ? k.answers : k.inputs)++;
        k.completions += r.kind == 'C';
    }
    return k;
}

}  // namespace

TEST(HcasimDumpStimulus, each_nodes_dump_replays_on_the_rtl_alone_whichever_implementation_ran) {
    // One QP: node1's receive CQ (2048 entries) takes 3000 CQEs, so its ring wraps.
    const std::string run = "--workload send_bw --size 64 --iters 3000 --verify";
    const std::string dir = empty_dir("dump_stimulus");
    std::string tlm_dump;
    for (const char* impl : {"tlm", "rtl", "both"}) {
        SCOPED_TRACE(impl);
        const std::string file = dir + "/" + impl + ".stim";
        nlohmann::json j;
        const result r = run_hcasim_stats(
            run + " --set hca.cq_writer.impl=" + impl + " --dump-stimulus hca.cq_writer='" + file + "'",
            "dump", &j);
        ASSERT_EQ(r.code, 0) << r.err;
        for (const char* node : {"node0", "node1"}) {
            SCOPED_TRACE(node);
            const std::string path = dir + "/" + impl + "." + node + ".stim";
            ASSERT_TRUE(std::filesystem::exists(path));
            const cq_stimulus s = read_cq_stimulus(path);
            const kinds k = count(s);
            const uint64_t cqes = j["counters"].value(std::string(node) + ".hca.cq_writer.cqes", uint64_t(0));
            EXPECT_GT(cqes, 0u);
            EXPECT_EQ(k.completions, cqes) << "every completion, written (none lost here)";
            EXPECT_EQ(k.answers, cqes);
            EXPECT_EQ(k.writes, cqes) << "one CQE write each (polled: no events)";
            replay_forked<Vcq_writer>(path, 100, [&](const cq_stimulus& d, const cq_replay_result& res) {
                EXPECT_TRUE(res.ok()) << res.mismatch;
                const kinds n = count(d);
                EXPECT_EQ(res.inputs, n.inputs);
                EXPECT_EQ(res.writes, n.writes);
                EXPECT_EQ(res.answers, n.answers);
            });
        }
        // impl=both records the model's transactions, which the RTL matched: the tlm run's dump.
        const std::string node1 = slurp(dir + "/" + impl + ".node1.stim");
        if (std::string(impl) == "tlm") tlm_dump = node1;
        if (std::string(impl) == "both") EXPECT_TRUE(node1 == tlm_dump) << "both's dump differs from tlm's";
        if (std::string(impl) == "rtl") EXPECT_FALSE(node1 == tlm_dump) << "the RTL's times are its own";
    }
    // The plain SystemVerilog testbench reads the RTL run's dump and matches it.
    std::string out;
    const std::string rtl_dump = dir + "/rtl.node1.stim";
    EXPECT_EQ(run_command(std::string(SV_REPLAY_REFERENCE) + " +stim=" + rtl_dump, out), 0) << out;
    EXPECT_NE(out.find("cq_writer_replay: " + rtl_dump + ": "), std::string::npos) << out;
    EXPECT_NE(out.find(" match"), std::string::npos) << out;
    // The broken build stops at the first CQE of the ring's second pass, naming its line.
    replay_forked<Vcq_writer_broken>(
        dir + "/tlm.node1.stim", 100, [&](const cq_stimulus& d, const cq_replay_result& res) {
            EXPECT_FALSE(res.ok());
            const cq_stim_record* first = nullptr;
            for (const cq_stim_record& w : d.records)
                if (w.kind == 'W' && w.len == 64 && !(w.data[63] & hw::CQE_OWNER_BIT)) {
                    first = &w;
                    break;
                }
            ASSERT_NE(first, nullptr);
            EXPECT_EQ(res.mismatch.rfind(d.where(*first) + ": byte 63 of the 64-byte write", 0), 0u)
                << res.mismatch;
        });
    std::filesystem::remove_all(dir);
}
