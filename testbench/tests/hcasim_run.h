// Running the built hcasim program from a test (the hcasim_*_test.cpp files): its exit status,
// stdout and stderr. HCASIM_BIN and HCASIM_SOURCE_DIR come from testbench/tests/CMakeLists.txt.
#pragma once
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>

#include "testbench/tests/fixtures.h"

// A write error found after the simulation has run ends the program through an exception from
// sc_main (exit status 2). Under AddressSanitizer that throw can abort on a false
// stack-buffer-underflow inside ASan's own __cxa_throw handling: SystemC's coroutine switches are
// not annotated for ASan, which then misjudges the main stack's bounds (google/sanitizers#189).
// The tests whose point is such an error skip in the sanitizer build; the release build runs them.
#if defined(__SANITIZE_ADDRESS__)
#define HCASIM_SKIP_WHERE_ASAN_MISREADS_A_THROW_AFTER_THE_RUN() \
    GTEST_SKIP()                                                \
        << "sanitizer build: ASan misreads an exception thrown after the simulation (see hcasim_run.h)"
#else
#define HCASIM_SKIP_WHERE_ASAN_MISREADS_A_THROW_AFTER_THE_RUN() (void)0
#endif

namespace hcasim::test {

struct result {
    int code = -1;  ///< exit status (-1: killed by a signal)
    std::string out, err;
};

/// A new empty directory under the test temp dir, named after `name` and the process.
inline std::string empty_dir(const std::string& name) {
    const std::string d = ::testing::TempDir() + name + "_" + std::to_string(getpid());
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
}

/// The names in a directory, sorted (hidden ones too: an output's temporary file would show).
inline std::vector<std::string> dir_entries(const std::string& dir) {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
}

/// The lines of `text` (without their line breaks).
inline std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> v;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
}

/// `s` split at every `sep` (a CSV line without quoted fields: its fields).
inline std::vector<std::string> split_fields(const std::string& s, char sep) {
    std::vector<std::string> v(1);
    for (char c : s) {
        if (c == sep)
            v.emplace_back();
        else
            v.back() += c;
    }
    return v;
}

/// `err` without the note ASan prints when a noreturn call (a sweep's forked child's _exit) finds
/// the stack it tracks changed by SystemC's coroutine switches (google/sanitizers#189): in the
/// sanitizer build only, three lines per process ("==PID==WARNING: ASan is ignoring requested
/// __asan_handle_no_return ...", "False positive ...", "For details ..."), which carry PIDs and
/// addresses and would make two runs' stderr differ. Elsewhere `err` unchanged.
inline std::string without_asan_stack_notes(const std::string& err) {
#if defined(__SANITIZE_ADDRESS__)
    // The note may follow a progress line's text ("\rsweep: 0/2 points done") on the same line.
    static const std::regex note(
        "==[0-9]+==WARNING: ASan is ignoring requested __asan_handle_no_return[^\n]*\n"
        "False positive error reports may follow\n"
        "For details see https://github.com/google/sanitizers/issues/189\n");
    return std::regex_replace(err, note, "");
#else
    return err;
#endif
}

/// Runs hcasim with `args` (shell words) in the source directory (or `cwd`), capturing stdout and
/// stderr through temporary files named after `tag` and the process. `shell` runs first in the
/// same shell (e.g. file_limit()). `bin` is the program to run.
inline result run_hcasim(const std::string& args, const std::string& tag, const std::string& shell = "",
                         const std::string& cwd = HCASIM_SOURCE_DIR, const std::string& bin = HCASIM_BIN) {
    const std::string dir = ::testing::TempDir();
    const std::string id = tag + "_" + std::to_string(getpid());
    const std::string out = dir + "hcasim_out_" + id, err = dir + "hcasim_err_" + id;
    const std::string cmd =
        shell + "cd '" + cwd + "' && '" + bin + "' " + args + " >'" + out + "' 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = without_asan_stack_notes(slurp(err));
    std::remove(out.c_str());
    std::remove(err.c_str());
    return r;
}

/// Runs hcasim with `args` plus --stats-json to a temporary file named after `tag` and the
/// process; `*stats` gets what it wrote (null if nothing), and the file is removed.
inline result run_hcasim_stats(const std::string& args, const std::string& tag, nlohmann::json* stats) {
    const std::string path =
        ::testing::TempDir() + "hcasim_stats_" + tag + "_" + std::to_string(getpid()) + ".json";
    std::remove(path.c_str());
    const result r = run_hcasim(args + " --stats-json '" + path + "'", tag);
    const std::string text = slurp(path);
    *stats = text.empty() ? nlohmann::json() : nlohmann::json::parse(text);
    std::remove(path.c_str());
    return r;
}

/// run_hcasim_stats of a run that must succeed (a test failure otherwise): its stats JSON (null
/// when it failed); `r_out` gets the result.
inline nlohmann::json run_ok_json(const std::string& args, const std::string& tag, result* r_out = nullptr) {
    nlohmann::json j;
    const result r = run_hcasim_stats(args, tag, &j);
    if (r_out) *r_out = r;
    EXPECT_EQ(r.code, 0) << args << "\n" << r.err;
    return r.code == 0 ? j : nullptr;
}

/// A counter of a stats JSON (0 if absent).
inline uint64_t json_counter(const nlohmann::json& j, const std::string& key) {
    return j["counters"].value(key, uint64_t(0));
}

/// Every result of a --verify run's stats JSON was checked (some bytes) and found right (no
/// mismatch, no bad completion); `what` names the run in failure messages.
inline void expect_verified(const nlohmann::json& j, const std::string& what) {
    ASSERT_FALSE(j.is_null()) << what;
    ASSERT_FALSE(j["results"].empty()) << what;
    for (const auto& e : j["results"]) {
        ASSERT_TRUE(e.contains("verify")) << what;
        EXPECT_GT(e["verify"]["bytes_checked"].get<uint64_t>(), 0u) << what << " " << e["size_bytes"];
        EXPECT_EQ(e["verify"]["mismatches"], 0) << what;
        EXPECT_EQ(e["verify"]["bad_completions"], 0) << what;
    }
}

/// A stats JSON without what two runs of one configuration and seed may differ in
/// (docs/usage.md#outputs): the "run" block (command line, date) and the wall-clock figures of
/// "sim". `J`: nlohmann::json, or ordered_json to compare the order of keys too.
template <class J>
J deterministic_part(J stats) {
    stats.erase("run");
    for (const char* k : {"wall_s", "traffic_wall_s", "wire_packets_per_wall_s"}) stats["sim"].erase(k);
    return stats;
}

/// A shell prefix for run_hcasim that makes every file hcasim writes fail with EFBIG ("File
/// too large") past `kib` KiB: a full disk that needs no mount (SIGXFSZ ignored, so the write
/// fails instead of killing the program).
inline std::string file_limit(unsigned kib) {
    return "trap '' XFSZ; ulimit -f " + std::to_string(kib * 2) + "; ";
}

}  // namespace hcasim::test
