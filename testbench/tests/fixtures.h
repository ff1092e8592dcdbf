// Small fixtures shared by tests of every kind (no SystemC, no harness): reading a file whole,
// running the tools some tests need (python3, tshark), the message of a config_error, and the
// model's timing defaults that exact-time tests compute with.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "model/core/param.h"

namespace hcasim::test {

/// link.propagation_ns by default: one cable's flight time.
constexpr double kPropNs = 10.0;
/// port.rx_pipeline_ns by default: from the last bit in to the packet handed on.
constexpr double kRxPipeNs = 20.0;

/// The whole file (empty if it cannot be read).
inline std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

/// Runs `f`, expects config_error, returns its message.
template <typename F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const config_error& e) {
        return e.what();
    }
    ADD_FAILURE() << "expected config_error";
    return {};
}

/// Whether python3 is on the PATH (the tests that run the repository's scripts need it).
inline bool have_python3() { return std::system("command -v python3 >/dev/null 2>&1") == 0; }

/// Runs tshark with `args`; returns its stdout (stderr, e.g. "Running as user root", dropped).
inline std::string tshark(const std::string& args) {
    const std::string out = ::testing::TempDir() + "tshark_out_" + std::to_string(getpid());
    const std::string cmd = "tshark " + args + " >'" + out + "' 2>/dev/null";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::string s = slurp(out);
    std::remove(out.c_str());
    return s;
}

}  // namespace hcasim::test
