// Keeps docs/compliance.md in step with the statement list, the status file and the test names:
// runs `python3 scripts/compliance.py --check` from the source tree (HCASIM_SOURCE_DIR) and
// expects exit status 0. Skipped when python3 is not installed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

#include "testbench/tests/fixtures.h"

using hcasim::test::have_python3;

namespace {

TEST(DocsCompliance, compliance_md_is_current_and_tested_ids_have_tests) {
    if (!have_python3()) GTEST_SKIP() << "python3 not found; cannot run scripts/compliance.py";
    const std::string cmd =
        std::string("cd '") + HCASIM_SOURCE_DIR + "' && python3 scripts/compliance.py --check";
    const int rc = std::system(cmd.c_str());
    ASSERT_NE(rc, -1) << "could not run: " << cmd;
    ASSERT_TRUE(WIFEXITED(rc)) << cmd << " did not exit normally";
    EXPECT_EQ(WEXITSTATUS(rc), 0) << cmd << " failed: run `python3 scripts/compliance.py` to regenerate "
                                  << "docs/compliance.md, and see the errors above";
}

}  // namespace

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }  // SystemC declares it extern "C"
