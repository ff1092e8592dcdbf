// hcasim with the transport engine's processing units: 64 B RDMA WRITEs with wqe_cycles 80
// (100 ns per WQE at the default 800 MHz clock) are bound by one send unit per QP: one QP, or
// two QPs on one unit, stay at 10 M WQEs/s; two QPs on two units reach twice that (the host,
// ~22 Mpps, is not the limit there). A bad unit count is a one-line error naming its key.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"

#include <cstdio>
#include <string>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

using hcasim::test::result;

/// write_bw 64 B, 20,000 messages over `qps` QPs (--iters counts per QP), with wqe_cycles 80
/// and `extra`; the message rate in Mpps from the report.
double write_mpps(unsigned qps, const std::string& extra = "") {
    const result r = hcasim::test::run_hcasim("--workload write_bw --size 64 --qps " + std::to_string(qps) +
                                                  " --iters " + std::to_string(20000 / qps) +
                                                  " --set hca.transport_engine.wqe_cycles=80 " + extra,
                                              "units");
    EXPECT_EQ(r.code, 0) << r.err;
    const size_t at = r.out.find("\n 64 ");
    if (at == std::string::npos) {
        ADD_FAILURE() << r.out;
        return 0;
    }
    double gbps = 0, mpps = 0;
    unsigned iters = 0;
    std::sscanf(r.out.c_str() + at, " 64 %u %lf %lf", &iters, &gbps, &mpps);
    return mpps;
}

}  // namespace

TEST(HcasimUnits, one_qp_stays_below_clock_over_wqe_cycles) {
    const double one = write_mpps(1);
    EXPECT_LE(one, 10.0);  // 800 MHz / 80 cycles
    EXPECT_GT(one, 9.95);  // the rest is the first WQE's start-up
    EXPECT_EQ(write_mpps(2), one) << "two QPs on one send unit share it";
}

TEST(HcasimUnits, two_send_units_give_two_qps_twice_one_units_rate) {
    const double two = write_mpps(2, "--set hca.transport_engine.send_units=2");
    EXPECT_LE(two, 20.0);
    EXPECT_GT(two, 19.9);
}

TEST(HcasimUnits, zero_send_units_is_an_error_naming_the_key) {
    const result r = hcasim::test::run_hcasim(
        "--workload write_bw --size 64 --iters 10 --set hca.transport_engine.send_units=0", "units_bad");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("bad value '0' for key 'node0.hca.transport_engine.send_units' (--set): expected "
                         "integer in [1,4096]"),
              std::string::npos)
        << r.err;
}
