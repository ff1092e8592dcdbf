// Issue 31, progress: each table row on stdout as soon as its size is measured (the final
// stdout as when it was printed at the end), a one-line progress display on stderr when it is a
// terminal (HCASIM_PROGRESS=1 forces it, 0 turns it off) and nothing at all on a pipe; each
// size's own counters in the stats JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <regex>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;
using hcasim::test::run_hcasim;

const std::string two_sizes = "--workload write_lat --size 2,64K --iters 200";

/// The progress draws ("\r<text>\x1b[K") and erasures ("\r\x1b[K") in `s`.
const std::regex progress_piece("\r([^\r\n\x1b]*)\x1b\\[K");

/// What the shell command `cmd` writes on its stdout; `*code` its exit status.
std::string shell_output(const std::string& cmd, int* code) {
    FILE* p = popen(cmd.c_str(), "r");
    std::string s;
    char b[4096];
    for (size_t n; p && (n = std::fread(b, 1, sizeof b, p)) > 0;) s.append(b, n);
    const int st = p ? pclose(p) : -1;
    *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return s;
}

/// hcasim `args` run in the source directory by the shell, `env` first.
std::string hcasim_command(const std::string& env, const std::string& args) {
    return "cd '" + std::string(HCASIM_SOURCE_DIR) + "' && " + env + " '" + HCASIM_BIN + "' " + args;
}

}  // namespace

TEST(HcasimProgress, a_run_on_a_pipe_writes_no_progress_no_carriage_return_and_no_escape) {
    const result r = run_hcasim(two_sizes, "pipe");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out.find('\r'), std::string::npos);
    EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
}

TEST(HcasimProgress, hcasim_progress_1_shows_the_workload_size_and_count_of_sizes_and_erases_it) {
    const result plain = run_hcasim(two_sizes, "plain");
    const result r = run_hcasim(two_sizes, "forced", "export HCASIM_PROGRESS=1; ");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(r.out, plain.out) << "stdout does not depend on the progress display";
    EXPECT_NE(r.err.find("\rwrite_lat 2 B (1/2 sizes): 0/200 iters, sim "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("\rwrite_lat 64 KiB (2/2 sizes): "), std::string::npos) << r.err;
    // Nothing but draws and erasures, and the line is erased at the end.
    EXPECT_EQ(std::regex_replace(r.err, progress_piece, ""), "");
    ASSERT_GE(r.err.size(), 4u);
    EXPECT_EQ(r.err.substr(r.err.size() - 4), "\r\x1b[K");
}

// stdout and stderr on one terminal: every progress draw is erased (or redrawn) before a row
// or anything else reaches the line, so rows and progress never share one.
TEST(HcasimProgress, the_progress_line_is_erased_before_each_row_on_a_shared_stream) {
    int code = -1;
    // 2>&1: both into the one pipe, in the order written.
    const std::string out = shell_output(hcasim_command("HCASIM_PROGRESS=1", two_sizes + " 2>&1"), &code);
    ASSERT_EQ(code, 0) << out;
    const result want = run_hcasim(two_sizes, "shared_want");
    EXPECT_EQ(std::regex_replace(out, progress_piece, ""), want.out);
    size_t draws = 0;
    for (auto it = std::sregex_iterator(out.begin(), out.end(), progress_piece); it != std::sregex_iterator();
         ++it) {
        if ((*it)[1].length() == 0) continue;  // an erasure
        ++draws;
        const size_t next = size_t(it->position() + it->length());
        ASSERT_LT(next, out.size());
        EXPECT_EQ(out[next], '\r') << "a draw left on the line before: " << out.substr(next, 60);
    }
    EXPECT_GE(draws, 2u);
}

// On a terminal (a pseudo-terminal from script(1)) the line shows without HCASIM_PROGRESS, and
// HCASIM_PROGRESS=0 turns it off there.
TEST(HcasimProgress, a_terminal_shows_the_progress_line_unless_hcasim_progress_is_0) {
    if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "script(1) not installed";
    int code = -1;
    const std::string out = shell_output(
        "unset HCASIM_PROGRESS; script -qec \"" + hcasim_command("", two_sizes) + "\" /dev/null </dev/null",
        &code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_NE(out.find("write_lat 2 B (1/2 sizes): 0/200 iters"), std::string::npos) << out;
    EXPECT_NE(out.find("\x1b[K"), std::string::npos);
    // And HCASIM_PROGRESS=0 keeps the terminal free of it.
    const std::string off = shell_output(
        "script -qec \"" + hcasim_command("HCASIM_PROGRESS=0", two_sizes) + "\" /dev/null </dev/null", &code);
    ASSERT_EQ(code, 0) << off;
    EXPECT_EQ(off.find("sizes)"), std::string::npos) << off;
    EXPECT_EQ(off.find("\x1b[K"), std::string::npos);
}

// The first row reaches a pipe while the run still measures the next size (its 64 KiB
// iterations take far longer than the 2 B ones), and the whole output is the table.
TEST(HcasimProgress, each_row_reaches_stdout_while_the_run_still_measures_the_next_size) {
    int fd[2];
    ASSERT_EQ(pipe(fd), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl(HCASIM_BIN, HCASIM_BIN, "--workload", "write_lat", "--size", "2,1M", "--iters", "2000",
              static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fd[1]);
    FILE* in = fdopen(fd[0], "r");
    ASSERT_NE(in, nullptr);
    std::string out;
    char line[512];
    bool running_at_first_row = false;
    while (std::fgets(line, sizeof line, in)) {
        out += line;
        if (std::string(line).rfind(" 2          2000 ", 0) == 0) {
            int status = 0;
            running_at_first_row = waitpid(pid, &status, WNOHANG) == 0;
        }
    }
    std::fclose(in);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    EXPECT_TRUE(running_at_first_row) << "the 2 B row came only when the run had ended";
    const result whole = run_hcasim("--workload write_lat --size 2,1M --iters 2000", "whole");
    EXPECT_EQ(out, whole.out);
}

// Each size's row carries the counters that changed while it was measured: the sizes tile the
// phase, so over the rows they add up to measured_counters (node0's packets among them), and
// the larger size moved more bytes.
TEST(HcasimStatsJson, each_size_has_its_own_counters_and_they_sum_to_the_measured_counters) {
    nlohmann::json j;
    const result r =
        hcasim::test::run_hcasim_stats("--workload write_bw --size 64,4K --iters 300", "per_size", &j);
    ASSERT_EQ(r.code, 0) << r.err;
    const auto& rows = j.at("results");
    ASSERT_EQ(rows.size(), 2u);
    const auto& m = j.at("measured_counters");
    const std::string packets = "node0.hca.port.tx_packets", bytes = "node0.hca.port.tx_bytes";
    EXPECT_EQ(rows[0]["counters"][packets].get<uint64_t>() + rows[1]["counters"][packets].get<uint64_t>(),
              m[packets].get<uint64_t>());
    EXPECT_GT(rows[1]["counters"][bytes].get<uint64_t>(), rows[0]["counters"][bytes].get<uint64_t>());
    for (const auto& [k, v] : m.items()) {
        uint64_t sum = 0;
        for (const auto& row : rows)
            if (row["counters"].contains(k)) sum += row["counters"][k].get<uint64_t>();
        EXPECT_EQ(sum, v.get<uint64_t>()) << k;
    }
    for (const auto& row : rows)
        for (const auto& [k, v] : row["counters"].items()) {
            EXPECT_GT(v.get<uint64_t>(), 0u) << k << ": only counters that changed";
            EXPECT_TRUE(m.contains(k)) << k;
        }
}
