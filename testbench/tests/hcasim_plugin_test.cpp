// The hcasim program with RTL plug-in libraries (rtl/abi/hcasim_rtl.h, docs/cosim.md "Plug-in
// libraries"): hca.pkey_checker.rtl_lib=PATH runs a team's build instead of the built-in one,
// with the built-in's results and cycles; --waves gives a plug-in instance a file of its own; an
// unfit library is a one-line error (exit 2) naming the key, the path and what is wrong.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "gtkwave/fstapi.h"  // Verilator's copy of GTKWave's FST reader
#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim::test;

TEST(HcasimPlugin, the_reference_pkey_checker_plugin_with_impl_both_equals_the_builtin_build) {
    const std::string run = "--workload send_bw --size 64,4K --iters 1000 --set hca.pkey_checker.impl=both";
    nlohmann::json builtin, plugin;
    const result rb = run_hcasim_stats(run, "plugin_builtin", &builtin);
    const result rp = run_hcasim_stats(run + " --set hca.pkey_checker.rtl_lib=" HCASIM_RTL_PKEY_CHECKER_LIB,
                                       "plugin_lib", &plugin);
    ASSERT_EQ(rb.code, 0) << rb.err;
    ASSERT_EQ(rp.code, 0) << rp.err;
    EXPECT_EQ(plugin["config"].value("node0.hca.pkey_checker.rtl_lib", ""), HCASIM_RTL_PKEY_CHECKER_LIB);
    // Every counter (rtl_cycles, rtl_compared and divergences among them) and every result equal:
    // the plug-in's pins move at the same edges as the built-in model's.
    EXPECT_EQ(plugin["counters"], builtin["counters"]);
    EXPECT_EQ(plugin["results"], builtin["results"]);
    for (const char* n : {"node0", "node1"}) {
        const std::string k = std::string(n) + ".hca.pkey_checker.";
        EXPECT_GT(plugin["counters"].value(k + "rtl_compared", uint64_t(0)), 0u) << n;
        EXPECT_EQ(plugin["counters"].value(k + "divergences", uint64_t(1)), 0u) << n;
    }
    // The summary line: the same verdicts compared, no divergence.
    const size_t line = rp.out.find(" co-simulation (hca.pkey_checker.impl=both on node0, node1): ");
    ASSERT_NE(line, std::string::npos) << rp.out;
    EXPECT_EQ(rp.out.substr(line), rb.out.substr(rb.out.find(" co-simulation (")));
    EXPECT_NE(rp.out.find(" 0 divergences\n", line), std::string::npos) << rp.out;
}

TEST(HcasimPlugin, waves_with_a_plugin_writes_one_fst_file_per_instance_with_its_gated_clock) {
    const std::string dir = empty_dir("plugin_waves");
    nlohmann::json stats;
    const result r = run_hcasim_stats(
        "--workload write_lat --size 8 --iters 20 --set hca.pkey_checker.impl=rtl --set "
        "hca.pkey_checker.rtl_lib=" HCASIM_RTL_PKEY_CHECKER_LIB " --waves '" +
            dir + "/w.fst'",
        "plugin_waves", &stats);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(dir_entries(dir), (std::vector<std::string>{"w.node0.hca.pkey_checker.rtl.fst",
                                                          "w.node1.hca.pkey_checker.rtl.fst"}));
    for (const std::string node : {"node0", "node1"}) {
        const std::string file = dir + "/w." + node + ".hca.pkey_checker.rtl.fst";
        void* f = fstReaderOpen(file.c_str());
        ASSERT_NE(f, nullptr) << file << " is no FST file";
        std::vector<std::string> names;
        fstHandle clk = 0;
        while (fstHier* h = fstReaderIterateHier(f))
            if (h->htyp == FST_HT_VAR) {
                std::string n(h->u.var.name, h->u.var.name_length);
                n = n.substr(0, n.find(' '));
                if (n == "clk" && !clk) clk = h->u.var.handle;
                names.push_back(n);
            }
        for (const char* pin : {"clk", "req_valid", "req_pkey", "vrd_valid", "vrd_reason", "trap_valid"})
            EXPECT_NE(std::find(names.begin(), names.end(), pin), names.end()) << node << ": " << pin;
        // The clock rises once per cycle the RTL ran.
        ASSERT_NE(clk, 0u);
        uint64_t rising = 0;
        fstReaderClrFacProcessMaskAll(f);
        fstReaderSetFacProcessMask(f, clk);
        fstReaderIterBlocks(
            f,
            [](void* user, uint64_t, fstHandle, const unsigned char* v) {
                if (v && v[0] == '1') ++*static_cast<uint64_t*>(user);
            },
            &rising, nullptr);
        fstReaderClose(f);
        const uint64_t cycles = stats["counters"].value(node + ".hca.pkey_checker.rtl_cycles", uint64_t(0));
        EXPECT_GT(cycles, 20u) << node;
        EXPECT_EQ(rising, cycles) << node;
    }
    std::filesystem::remove_all(dir);
}

TEST(HcasimPlugin, an_unfit_library_is_a_one_line_error_naming_the_key_the_path_and_the_fault) {
    const std::string key = "hcasim: error: node0.hca.pkey_checker.rtl_lib: '";
    const std::string text = std::string(HCASIM_SOURCE_DIR) + "/CHANGELOG.md";
    struct bad {
        std::string lib, extra, message;
    } cases[] = {
        {"/nonexistent/libx.so", "",
         key + "/nonexistent/libx.so': cannot be opened: /nonexistent/libx.so: cannot open shared object "
               "file: No such file or directory\n"},
        {text, "", key + text + "': cannot be opened: " + text + ": "},  // the loader's reason follows
        {HCASIM_RTL_NO_EVAL_LIB, "",
         key + HCASIM_RTL_NO_EVAL_LIB +
             "': not an hcasim RTL plug-in: missing symbol 'hcasim_rtl_eval' (rtl/abi/hcasim_rtl.h)\n"},
        {HCASIM_RTL_BAD_VERSION_LIB, "",
         key + HCASIM_RTL_BAD_VERSION_LIB +
             "': plug-in ABI version 42, but hcasim's is 1 (rebuild the library against this hcasim's "
             "rtl/abi/hcasim_rtl.h)\n"},
        {HCASIM_RTL_CQ_WRITER_LIB, "",
         key + HCASIM_RTL_CQ_WRITER_LIB + "': a plug-in for the 'cq_writer' unit, not the 'pkey_checker'\n"},
        {HCASIM_RTL_CREATE_FAILS_LIB, "",
         key + HCASIM_RTL_CREATE_FAILS_LIB +
             "': hcasim_rtl_create failed for node0.hca.pkey_checker.rtl.pkey_checker: no licence for this "
             "RTL\n"},
        {HCASIM_RTL_PKEY_CHECKER_LIB, " --set hca.pkey_checker.rtl_variant=broken_membership",
         std::string("hcasim: error: node0.hca.pkey_checker.rtl_lib '") + HCASIM_RTL_PKEY_CHECKER_LIB +
             "' and node0.hca.pkey_checker.rtl_variant 'broken_membership' are both set: the library "
             "replaces "
             "the built-in builds; set one\n"},
    };
    for (const bad& b : cases) {
        const std::string args =
            "--workload write_bw --iters 10 --set hca.pkey_checker.impl=rtl --set "
            "hca.pkey_checker.rtl_lib='" +
            b.lib + "'" + b.extra;
        const result r = run_hcasim(args, "plugin_bad");
        EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
        EXPECT_EQ(r.err.substr(0, b.message.size()), b.message) << args;
        EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
}

TEST(HcasimPlugin, the_cq_writer_plugin_runs_cycle_for_cycle_as_the_builtin_and_the_broken_one_is_caught) {
    // impl=rtl through the reference plug-in: the RTL decides every CQE, so the results and every
    // counter equal the built-in build's.
    const std::string run =
        "--workload send_bw --size 64 --qps 2 --iters 1500 --verify --set hca.cq_writer.impl=rtl";
    nlohmann::json builtin, plugin;
    const result rb = run_hcasim_stats(run, "cq_plugin_builtin", &builtin);
    const result rp = run_hcasim_stats(run + " --set hca.cq_writer.rtl_lib=" HCASIM_RTL_CQ_WRITER_LIB,
                                       "cq_plugin_lib", &plugin);
    ASSERT_EQ(rb.code, 0) << rb.err;
    ASSERT_EQ(rp.code, 0) << rp.err;
    EXPECT_GT(plugin["counters"].value("node1.hca.cq_writer.rtl_cycles", uint64_t(0)), 0u);
    EXPECT_EQ(plugin["counters"], builtin["counters"]);
    EXPECT_EQ(plugin["results"], builtin["results"]);
    // The broken build as a plug-in, side by side with the model: the divergence report at the
    // first CQE of a ring's second pass (2048 entries), exit 1.
    const result broken = run_hcasim(
        "--workload send_bw --size 64 --iters 3000 --set hca.cq_writer.impl=both "
        "--set hca.cq_writer.rtl_lib=" HCASIM_RTL_CQ_WRITER_BROKEN_LIB,
        "cq_plugin_broken");
    EXPECT_EQ(broken.code, 1) << broken.err;
    EXPECT_NE(broken.err.find("co-simulation divergence (hca.cq_writer.impl=both):\n"), std::string::npos)
        << broken.err;
    EXPECT_NE(broken.err.find("the host memory writes differ\n"), std::string::npos) << broken.err;
    EXPECT_NE(broken.err.find("  bytes that differ: 63 (TLM 00, RTL 01)\n"), std::string::npos) << broken.err;
    // A pkey_checker library named as the CQ writer's: exit 2 naming the key.
    const result wrong = run_hcasim(
        "--workload write_bw --iters 10 --set hca.cq_writer.impl=rtl "
        "--set hca.cq_writer.rtl_lib=" HCASIM_RTL_PKEY_CHECKER_LIB,
        "cq_plugin_wrong");
    EXPECT_EQ(wrong.code, 2);
    EXPECT_EQ(wrong.err, std::string("hcasim: error: node0.hca.cq_writer.rtl_lib: '") +
                             HCASIM_RTL_PKEY_CHECKER_LIB +
                             "': a plug-in for the 'pkey_checker' unit, not the 'cq_writer'\n");
}
