// Wire capture of the subnet manager's cable (docs/traces.md): the SM sets a P_Key table entry
// (SubnGet and SubnSet of P_KeyTable, answered by GetResps) and a packet with the wrong P_Key
// makes node1 send a Bad P_Key trap; DIR/link_sm.pcap holds exactly those SMPs, in both
// directions, and tshark dissects them as InfiniBand subnet management MADs (VL15, QP0)
// without a malformed packet. The machine is built by the test harness, so the capture is
// switched on with machine::capture_to as --pcap does. tshark must be installed
// (scripts/test.sh installs it): without it this test fails.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "model/fabric/subnet_manager.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/mad.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

SIM_TEST(E2ePcap, subnet_manager_cable_holds_its_smps_and_the_trap) {
    ASSERT_EQ(std::system("command -v tshark >/dev/null 2>&1"), 0)
        << "tshark is not installed: this test needs it (scripts/test.sh installs it; or apt-get install "
           "tshark)";
    const std::string dir = ::testing::TempDir() + "e2e_pcap_" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    rc_config c;
    c.qp_type = IBV_QPT_UD;
    c.keys = {{"fabric.topology", "switch"}};
    rc_harness h(c);
    h.mach().capture_to(dir);
    h.run([](rc_harness& h) {
        subnet_manager& m = *h.mach().net.sm;
        ASSERT_TRUE(m.set_pkey(1, 0, 0x8001));  // node1 leaves the default partition
        const uint64_t sva = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, sva, 4096);
        ibv_ah_attr a{};
        a.dlid = h.s[1].lid;
        a.port_num = 1;
        ibv_ah* ah = ibv_create_ah(h.s[0].pd, &a);
        ASSERT_NE(ah, nullptr);
        ASSERT_EQ(h.post_ud(0, ah, {{sva, 64, smr->lkey}}, 1), 0);  // P_Key 0xFFFF: a violation at node1
        h.sleep(0, 50'000);
        ASSERT_EQ(m.traps_received().size(), 1u);
        EXPECT_EQ(m.sent().size(), 2u) << "SubnGet and SubnSet of the P_Key block";
    });
    ASSERT_EQ(h.mach().close_captures(), "");
    const std::string sm_file = dir + "/link_sm.pcap";
    ASSERT_TRUE(std::filesystem::exists(sm_file));

    // Both directions: the SM's SubnGet and SubnSet (direction 0), node1's two GetResps and
    // its trap (direction 1), all SMPs to QP0 on VL15.
    const std::string f =
        tshark("-r '" + sm_file +
               "' -T fields -E separator=, -e erf.flags.cap -e infiniband.lrh.vl "
               "-e infiniband.bth.destqp -e infiniband.mad.mgmtclass -e infiniband.mad.method "
               "-e infiniband.mad.attributeid");
    std::vector<std::string> lines;
    std::istringstream in(f);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    const std::vector<std::string> expected = {
        "0,0x0f,0x000000,0x01,0x01,0x0016",  // SubnGet(P_KeyTable)
        "1,0x0f,0x000000,0x01,0x81,0x0016",  // SubnGetResp(P_KeyTable)
        "0,0x0f,0x000000,0x01,0x02,0x0016",  // SubnSet(P_KeyTable)
        "1,0x0f,0x000000,0x01,0x81,0x0016",  // SubnGetResp(P_KeyTable)
        "1,0x0f,0x000000,0x01,0x05,0x0002",  // SubnTrap(Notice)
    };
    EXPECT_EQ(lines, expected) << f;
    EXPECT_EQ(tshark("-r '" + sm_file + "' -Y '_ws.malformed || _ws.expert.severity >= error'"), "");
    const std::string text = tshark("-r '" + sm_file + "' -V");
    EXPECT_NE(text.find("SubnSet(P_KeyTable)"), std::string::npos) << text.substr(0, 3000);
    EXPECT_NE(text.find("SubnTrap(Notice)"), std::string::npos);

    // The violating datagram is on node0's cable (sent) and node1's (the switch forwarded it).
    EXPECT_NE(tshark("-r '" + dir + "/link0.pcap' -Y 'infiniband.bth.opcode == 100 && erf.flags.cap == 0'"),
              "");
    EXPECT_NE(tshark("-r '" + dir + "/link1.pcap' -Y 'infiniband.bth.opcode == 100 && erf.flags.cap == 1'"),
              "");
    std::filesystem::remove_all(dir);
}

}  // namespace
