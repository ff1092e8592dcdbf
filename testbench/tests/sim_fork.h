// Runs a simulation test body in a child process. SystemC elaborates once per process
// (error E529), so each simulation test forks; ctest also runs each case alone (PRE_TEST
// discovery), and the fork keeps `./foo_test` working when run directly with many cases.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <functional>

namespace hcasim::test {

/// Runs `body` in a forked child; gtest failures in the child fail the parent test.
inline void run_forked(const std::function<void()>& body) {
    std::fflush(nullptr);
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
        body();
        const bool failed = ::testing::Test::HasFailure();
        std::fflush(nullptr);
        _exit(failed ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "simulation child crashed (signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
    EXPECT_EQ(WEXITSTATUS(status), 0) << "simulation child reported failures (see its output above)";
}

}  // namespace hcasim::test

/// A simulation test: body runs in its own process.
#define SIM_TEST(suite, name)                                                \
    static void suite##_##name##_body();                                     \
    TEST(suite, name) { ::hcasim::test::run_forked(suite##_##name##_body); } \
    static void suite##_##name##_body()
