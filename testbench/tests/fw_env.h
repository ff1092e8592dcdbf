// The firmware (driver + verbs) over fake_hca_bus, as the fw_*_test.cpp files drive it: a device
// opened with one PD and one CQ, and what the tests do to it again and again (create a QP, walk
// it through the states, write a completion as the HCA's DMA would). A test file that needs more
// derives its own `env` from fw_env.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "firmware/verbs.h"
#include "fw_fake_bus.h"
#include "fw_qp_setup.h"
#include "tlm_if/cqe.h"

namespace hcasim::test {

/// The host memory fake_hca_bus gives the firmware: its first physical address and its size.
constexpr uint64_t kFwMemBase = 0x80000000ull;
constexpr size_t kFwMemBytes = 16u << 20;

/// Driver options without the inline doorbell window: every send WQE goes through the send
/// ring, where a test reads it back.
inline fw::driver_options no_window() {
    fw::driver_options o;
    o.use_inline_window = false;
    return o;
}

/// Firmware over fake_hca_bus with a context, a PD and a CQ (15 entries) open. `tweak` edits the
/// fake device (caps, port) before the driver initialises from it.
struct fw_env {
    explicit fw_env(fw::driver_options o = {}, const std::function<void(fake_hca_bus&)>& tweak = {})
        : bus(kFwMemBase, kFwMemBytes), os(bus, kFwMemBase, kFwMemBytes), drv(bus, os, o), as(os) {
        if (tweak) tweak(bus);
        ctx = verbs::ibv_open_device(drv, as);
        pd = verbs::ibv_alloc_pd(ctx);
        cq = verbs::ibv_create_cq(ctx, 15);
    }

    /// A QP of type `t` with both queues on the env's CQ, capacities `cap`, on `on` (default:
    /// the env's PD).
    verbs::ibv_qp* make_qp(verbs::ibv_qp_type t, verbs::ibv_qp_cap cap, verbs::ibv_pd* on = nullptr,
                           uint32_t create_flags = 0) {
        verbs::ibv_qp_init_attr ia{};
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.qp_type = t;
        ia.cap = cap;
        ia.create_flags = create_flags;
        return verbs::ibv_create_qp(on ? on : pd, &ia);
    }

    /// One transition, with the attributes it requires (fw_qp_setup.h).
    int to(verbs::ibv_qp* q, verbs::ibv_qp_state s) { return modify_qp_to(q, s); }

    /// Brings `q` forward to state `s` through Init, RTR, RTS and SQD, skipping the states it has
    /// passed; Reset: nothing; Error: directly; SQEr: to RTS, then as if the HCA had moved it
    /// there (only the HCA enters SQEr).
    void bring(verbs::ibv_qp* q, verbs::ibv_qp_state s) {
        using namespace verbs;
        const ibv_qp_state path[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD};
        if (s == IBV_QPS_RESET) return;
        if (s == IBV_QPS_ERR) {
            ASSERT_EQ(to(q, IBV_QPS_ERR), 0);
            return;
        }
        for (ibv_qp_state p : path) {
            if (s == IBV_QPS_SQE && p == IBV_QPS_SQD) break;
            if (p <= q->state) continue;  // already there or past it
            ASSERT_EQ(to(q, p), 0) << int(p);
            if (p == s) return;
        }
        if (s == IBV_QPS_SQE) q->state = IBV_QPS_SQE;
    }

    /// Writes completion `c` into slot `n` of `c_q`'s ring with the owner bit of pass n, as the
    /// HCA's DMA would.
    void write_cqe(verbs::ibv_cq* c_q, uint64_t n, hw::cqe c) {
        c.owner = uint8_t((c.owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(n, c_q->log_size));
        bus.mem_write(c_q->ring_pa + (n & ((1u << c_q->log_size) - 1)) * sizeof c, &c, sizeof c);
    }

    fake_hca_bus bus;
    fw::host_os os;
    fw::hca_driver drv;
    fw::address_space as;
    verbs::ibv_context* ctx;
    verbs::ibv_pd* pd;
    verbs::ibv_cq* cq;
};

}  // namespace hcasim::test
