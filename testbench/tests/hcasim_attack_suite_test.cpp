// `hcasim --workload attack_suite` as users run it: one PASS line per case, the summary line
// `N cases, N rejected, 0 bytes changed`, exit 0; --verify accepted; options it does not take
// are one-line errors.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"

#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using hcasim::test::result;
using hcasim::test::slurp;

/// Runs hcasim with `args` (shell words), capturing stdout and stderr.
result run(const std::string& args) { return hcasim::test::run_hcasim(args, "atk"); }

/// Checks the output of a passing run: PASS / SKIP lines, then the summary; returns N.
unsigned expect_passing_output(const result& r) {
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_EQ(r.err, "");
    std::istringstream in(r.out);
    std::string line, last;
    unsigned pass = 0, lines = 0;
    while (std::getline(in, line)) {
        if (!last.empty()) {
            ++lines;
            EXPECT_TRUE(last.rfind("PASS ", 0) == 0 || last.rfind("SKIP ", 0) == 0) << last;
            pass += last.rfind("PASS ", 0) == 0;
        }
        last = line;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(last, m, std::regex(R"((\d+) cases, (\d+) rejected, 0 bytes changed)")))
        << "summary line: " << last;
    if (m.size() != 3) return 0;
    const unsigned n = unsigned(std::stoul(m[1]));
    EXPECT_EQ(m[1], m[2]) << last;
    EXPECT_EQ(pass, n);
    EXPECT_GE(n, 60u);
    EXPECT_GE(lines, n);
    return n;
}

}  // namespace

TEST(HcasimAttackSuite, every_case_passes_and_the_summary_says_so) {
    const result r = run("--workload attack_suite");
    const unsigned n = expect_passing_output(r);
    EXPECT_NE(r.out.find("PASS C10_61_window_write_one_byte_past_end\n"), std::string::npos);
    EXPECT_NE(r.out.find("SKIP o10_37_2_29_destroy_qp_with_type2a_window_bound: "), std::string::npos);
    // --verify means nothing here (the suite always checks) but is accepted; the output is the same.
    const result v = run("--workload attack_suite --verify");
    EXPECT_EQ(expect_passing_output(v), n);
    EXPECT_EQ(v.out, r.out);
}

TEST(HcasimAttackSuite, type2a_windows_run_the_2a_cases) {
    const result r = run("--workload attack_suite --set hca.mw_type2=2A");
    expect_passing_output(r);
    EXPECT_NE(r.out.find("PASS o10_37_2_29_destroy_qp_with_type2a_window_bound\n"), std::string::npos);
    EXPECT_NE(r.out.find("SKIP o10_37_2_43_type2b_window_from_qp_of_another_pd: "), std::string::npos);
}

TEST(HcasimAttackSuite, options_it_does_not_take_are_errors) {
    for (const char* opt : {"--size 64", "--iters 5", "--stats-json x.json"}) {
        const result r = run(std::string("--workload attack_suite ") + opt);
        EXPECT_EQ(r.code, 2) << opt;
        EXPECT_EQ(r.err,
                  "hcasim: error: attack_suite takes no --size, --iters, --sweep, --report or --stats-json "
                  "(it runs a fixed "
                  "table of cases)\n")
            << opt;
        EXPECT_EQ(r.out, "");
    }
    const result bad = run("--workload attack_suite --set hca.mw_type2=3");
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("mw_type2"), std::string::npos) << bad.err;
}

// libsystemc (linked through testbench_lib) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
