// The protection attack suite (testbench/attack/attack_suite.h) run in-process: every case must be
// rejected exactly as specified with no target byte changed and its controls succeeding, for
// both kinds of type 2 windows; the table itself (size, unique names) and docs/attack-suite.md.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "model/core/param.h"
#include "testbench/attack/attack_suite.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;

namespace {

/// Runs the suite (configuration already set) and checks every case that ran.
void expect_all_rejected(const attack::suite_result& r) {
    EXPECT_EQ(r.error, "");
    for (const attack::case_result& c : r.results)
        if (c.ran && !c.passed) ADD_FAILURE() << "case " << c.name << " failed: " << c.why;
    EXPECT_GE(r.ran, 60u);
    EXPECT_EQ(r.rejected, r.ran) << "cases not rejected as expected";
    EXPECT_EQ(r.passed, r.ran);
    EXPECT_EQ(r.bytes_changed, 0u) << "target bytes changed";
    EXPECT_TRUE(r.ok());
}

}  // namespace

TEST(AttackSuite, table_has_at_least_60_uniquely_named_documented_rows) {
    const auto& cases = attack::cases();
    EXPECT_GE(cases.size(), 60u);
    std::set<std::string> names;
    for (const auto& c : cases) {
        EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
        EXPECT_FALSE(c.attack.empty()) << c.name;
        EXPECT_FALSE(c.expected.empty()) << c.name;
        EXPECT_TRUE(c.needs.empty() || c.needs == "2A" || c.needs == "2B") << c.name;
        for (char ch : c.name)
            EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << "name " << c.name;
    }
}

TEST(AttackSuite, docs_list_every_case) {
    std::ifstream f(std::string(HCASIM_SOURCE_DIR) + "/docs/attack-suite.md");
    ASSERT_TRUE(f) << "docs/attack-suite.md missing";
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string doc = ss.str();
    for (const auto& c : attack::cases())
        EXPECT_NE(doc.find("`" + c.name + "`"), std::string::npos)
            << c.name << " is not in docs/attack-suite.md";
}

SIM_TEST(AttackSuite, every_case_is_rejected_and_no_target_byte_changes_type2b) {
    const attack::suite_result r = attack::run_suite();
    expect_all_rejected(r);
    for (const attack::case_result& c : r.results)
        EXPECT_EQ(c.ran, c.name.find("type2a") == std::string::npos) << c.name;
}

SIM_TEST(AttackSuite, every_case_is_rejected_and_no_target_byte_changes_type2a) {
    broker::instance().set("hca.mw_type2", "2A", "test");
    const attack::suite_result r = attack::run_suite();
    expect_all_rejected(r);
    for (const attack::case_result& c : r.results)
        EXPECT_EQ(c.ran, c.name.find("type2b") == std::string::npos) << c.name;
}
