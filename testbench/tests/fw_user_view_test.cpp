// The driver's user-space view (the libibverbs provider's half, docs/libibverbs.md): no commands,
// no event queue, capabilities and ports as the real driver reported them, key bytes from it.
#include <gtest/gtest.h>

#include <vector>

#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "fw_fake_bus.h"

using namespace hcasim;
using namespace hcasim::fw;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

TEST(UserView, reports_what_the_real_driver_said_and_touches_no_hardware) {
    test::fake_hca_bus bus(0x40000000, 1 << 20);
    host_os os(bus, 0, 0);
    hca_driver drv(bus, os);
    hw::hca_caps caps{};
    caps.max_qp = 1024;
    caps.max_cqe = 4095;
    hw::port_info p{};
    p.lid = 7;
    p.state = 4;
    std::vector<uint32_t> asked;
    drv.attach_user_view(caps, {p}, 64, [&](uint32_t index) {
        asked.push_back(index);
        return uint8_t(0x42);
    });
    EXPECT_TRUE(drv.initialized());
    EXPECT_EQ(drv.caps().max_cqe, 4095u);
    ASSERT_NE(drv.port(1), nullptr);
    EXPECT_EQ(drv.port(1)->lid, 7);
    EXPECT_EQ(drv.port(2), nullptr);
    // Events reach user space through the provider: the view has no event queue to read.
    EXPECT_FALSE(drv.eq_pending());
    EXPECT_EQ(drv.process_eq(), 0u);
    EXPECT_EQ(drv.next_key_byte(9), 0x42);
    EXPECT_EQ(asked, std::vector<uint32_t>{9});
    int marker;
    drv.set_qp_user(63, &marker);
    EXPECT_EQ(drv.qp_user(63), &marker);
    drv.set_qp_user(64, &marker);  // beyond the QPN space: ignored
    EXPECT_EQ(drv.qp_user(64), nullptr);
    EXPECT_EQ(drv.commands_issued(), 0u);
}
