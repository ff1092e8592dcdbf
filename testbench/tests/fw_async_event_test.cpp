// Asynchronous events through the verbs (IBA 10.10.2.3, 11.6.3) against fake_hca_bus: the EQE
// to ibv_async_event mapping, routing to the owning context, ibv_get_async_event /
// ibv_ack_async_event, the registered handler (C10-138, C10-139), destroy with events still
// queued, and the CQ error semantics of 10.10.3 as far as the firmware carries them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <iterator>
#include <vector>

#include "firmware/hca_driver.h"
#include "firmware/verbs.h"
#include "fw_env.h"
#include "fw_fake_bus.h"
#include "fw_qp_setup.h"

using namespace hcasim;
using namespace hcasim::verbs;
using hcasim::fw::hca_driver;

namespace {

/// The firmware over the fake bus, and EQEs and CQEs written as the HCA would.
struct env : test::fw_env {
    ibv_qp* qp() { return make_qp(IBV_QPT_RC, {8, 8, 1, 1, 0}); }
    /// The n-th EQE the fake HCA produces (slot, owner bit per tlm_if/cqe.h).
    hw::eqe make(uint8_t type, uint32_t resource, uint8_t subtype = 0) {
        hw::eqe ev{};
        ev.type = type;
        ev.subtype = subtype;
        ev.resource = resource;
        ev.owner = hw::cqe_owner_for(eqes, drv.options().eq_log_size);
        return ev;
    }
    uint64_t next_slot() {
        return drv.eq_base() + (eqes & ((1u << drv.options().eq_log_size) - 1)) * sizeof(hw::eqe);
    }
    /// Writes an EQE now, as the HCA's DMA would.
    void raise(uint8_t type, uint32_t resource, uint8_t subtype = 0) {
        hw::eqe ev = make(type, resource, subtype);
        bus.mem_write(next_slot(), &ev, sizeof ev);
        ++eqes;
    }
    /// Schedules an EQE to land at absolute time at_ns.
    void raise_at(uint64_t at_ns, uint8_t type, uint32_t resource, uint8_t subtype = 0) {
        hw::eqe ev = make(type, resource, subtype);
        bus.schedule(at_ns, next_slot(), &ev, sizeof ev);
        ++eqes;
    }
    /// A CQE carrying only `wr_id` in slot n of `c`.
    void write_cqe(ibv_cq* c, uint64_t n, uint64_t wr_id) {
        hw::cqe x{};
        x.wr_id = wr_id;
        fw_env::write_cqe(c, n, x);
    }
    /// Every event the context's queue holds now (EQ processed first), acknowledged.
    std::vector<ibv_async_event> drain(ibv_context* c) {
        std::vector<ibv_async_event> v;
        ibv_async_event ev;
        while (ibv_get_async_event(c, &ev, 1) == 0) {
            v.push_back(ev);
            ibv_ack_async_event(&ev);
        }
        return v;
    }

    uint64_t eqes = 0;  ///< EQEs written so far
};

}  // namespace

TEST(AsyncEvent, event_types_use_libibverbs_numbering) {
    EXPECT_EQ(IBV_EVENT_CQ_ERR, 0);
    EXPECT_EQ(IBV_EVENT_QP_FATAL, 1);
    EXPECT_EQ(IBV_EVENT_COMM_EST, 4);
    EXPECT_EQ(IBV_EVENT_SQ_DRAINED, 5);
    EXPECT_EQ(IBV_EVENT_DEVICE_FATAL, 8);
    EXPECT_EQ(IBV_EVENT_PORT_ACTIVE, 9);
    EXPECT_EQ(IBV_EVENT_PORT_ERR, 10);
    EXPECT_EQ(IBV_EVENT_SRQ_ERR, 14);
    EXPECT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, 16);
    EXPECT_EQ(IBV_EVENT_GID_CHANGE, 18);
}

TEST(AsyncEvent, every_eqe_type_maps_to_its_event_in_order) {
    env e;
    ibv_qp* q = e.qp();
    ASSERT_NE(q, nullptr);
    e.bring(q, IBV_QPS_RTS);
    const uint32_t qpn = q->qp_num, cqn = e.cq->handle;
    e.raise(hw::EQE_COMM_EST, qpn);
    e.raise(hw::EQE_PATH_MIGRATED, qpn);
    e.raise(hw::EQE_PATH_MIG_ERR, qpn);
    e.raise(hw::EQE_CQ_ERROR, cqn);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_ACTIVE);
    e.raise(hw::EQE_QP_LAST_WQE_REACHED, qpn);
    e.raise(hw::EQE_QP_REQ_ERR, qpn);
    e.raise(hw::EQE_QP_ACCESS_ERR, qpn);
    e.raise(hw::EQE_QP_FATAL, qpn);
    e.raise(hw::EQE_LOCAL_CATASTROPHIC, 0);
    auto v = e.drain(e.ctx);
    const ibv_event_type want[] = {
        IBV_EVENT_COMM_EST,      IBV_EVENT_PATH_MIG,    IBV_EVENT_PATH_MIG_ERR,        IBV_EVENT_CQ_ERR,
        IBV_EVENT_PORT_ERR,      IBV_EVENT_PORT_ACTIVE, IBV_EVENT_QP_LAST_WQE_REACHED, IBV_EVENT_QP_REQ_ERR,
        IBV_EVENT_QP_ACCESS_ERR, IBV_EVENT_QP_FATAL,    IBV_EVENT_DEVICE_FATAL};
    ASSERT_EQ(v.size(), std::size(want));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i].event_type, want[i]) << i;
    for (size_t i : {0, 1, 2, 6, 7, 8, 9}) EXPECT_EQ(v[i].element.qp, q) << i;
    EXPECT_EQ(v[3].element.cq, e.cq);
    EXPECT_EQ(v[4].element.port_num, 1);
    EXPECT_EQ(v[5].element.port_num, 1);
    EXPECT_EQ(v[10].element.port_num, 0);
    EXPECT_EQ(q->events_completed, 7u);  // each acknowledged on its object
    EXPECT_EQ(e.cq->async_events_completed, 1u);
    EXPECT_EQ(e.drv.async_events(), 11u);
    EXPECT_TRUE(e.drv.unclaimed_events().empty());
    ibv_destroy_qp(q);
}

TEST(AsyncEvent, qp_error_events_set_error_and_sq_drained_clears_draining) {
    env e;
    ibv_qp* a = e.qp();
    ibv_qp* b = e.qp();
    e.bring(a, IBV_QPS_RTS);
    e.bring(b, IBV_QPS_SQD);
    EXPECT_EQ(b->attr.sq_draining, 1);
    e.raise(hw::EQE_QP_REQ_ERR, a->qp_num);
    e.raise(hw::EQE_SQ_DRAINED, b->qp_num);
    auto v = e.drain(e.ctx);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].event_type, IBV_EVENT_QP_REQ_ERR);
    EXPECT_EQ(v[1].event_type, IBV_EVENT_SQ_DRAINED);
    EXPECT_EQ(a->state, IBV_QPS_ERR);
    EXPECT_EQ(b->state, IBV_QPS_SQD);
    EXPECT_EQ(b->attr.sq_draining, 0);
    EXPECT_EQ(b->hw_ctx.sq_draining, 0);
}

TEST(AsyncEvent, get_async_event_sleeps_until_the_eqe_lands_and_times_out) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTR);
    uint64_t t0 = e.bus.now_ns();
    e.raise_at(t0 + 5000, hw::EQE_COMM_EST, q->qp_num);
    ibv_async_event ev;
    size_t m = e.bus.mmio.size();
    ASSERT_EQ(ibv_get_async_event(e.ctx, &ev, 1'000'000), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_COMM_EST);
    EXPECT_EQ(ev.element.qp, q);
    // Woken by the EQE's arrival, then one EQ doorbell (the fake bus charges 50 ns per MMIO).
    EXPECT_EQ(e.bus.now_ns(), t0 + 5000 + 50);
    EXPECT_EQ(e.bus.count_mmio(hw::REG_EQ_CONSUMER, m), 1u);
    EXPECT_EQ(e.bus.mmio.back().value, uint64_t(1) << 8);
    ibv_ack_async_event(&ev);
    EXPECT_EQ(q->events_completed, 1u);
    uint64_t t1 = e.bus.now_ns();
    EXPECT_EQ(ibv_get_async_event(e.ctx, &ev, 3000), ETIMEDOUT);
    EXPECT_EQ(e.bus.now_ns(), t1 + 3000);
    EXPECT_EQ(ibv_get_async_event(nullptr, &ev, 1), EINVAL);
    EXPECT_EQ(ibv_get_async_event(e.ctx, nullptr, 1), EINVAL);
    ibv_ack_async_event(nullptr);  // harmless
}

TEST(AsyncEvent, affiliated_events_go_to_the_owner_and_unaffiliated_to_every_context) {
    env e;
    fw::address_space as2(e.os);
    ibv_context* ctx2 = ibv_open_device(e.drv, as2);
    ASSERT_NE(ctx2, nullptr);
    ibv_pd* pd2 = ibv_alloc_pd(ctx2);
    ibv_cq* cq2 = ibv_create_cq(ctx2, 7);
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    e.raise(hw::EQE_QP_FATAL, q->qp_num);
    e.raise(hw::EQE_CQ_ERROR, cq2->handle);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_ACTIVE);
    ASSERT_EQ(e.drv.process_eq(), 4u);
    EXPECT_EQ(e.drv.port(1)->state, 4);  // the driver's port copy follows the events
    auto v1 = e.drain(e.ctx);
    auto v2 = e.drain(ctx2);
    ASSERT_EQ(v1.size(), 3u);
    EXPECT_EQ(v1[0].event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(v1[1].event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(v1[1].element.qp, q);
    EXPECT_EQ(v1[2].event_type, IBV_EVENT_PORT_ACTIVE);
    ASSERT_EQ(v2.size(), 3u);
    EXPECT_EQ(v2[0].event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(v2[1].event_type, IBV_EVENT_CQ_ERR);
    EXPECT_EQ(v2[1].element.cq, cq2);
    EXPECT_EQ(v2[2].event_type, IBV_EVENT_PORT_ACTIVE);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    e.drv.process_eq();
    EXPECT_EQ(e.drv.port(1)->state, 1);
    // A closed context gets nothing more.
    ASSERT_EQ(ibv_destroy_cq(cq2), 0);
    ASSERT_EQ(ibv_dealloc_pd(pd2), 0);
    ibv_async_event ev;
    ASSERT_EQ(ibv_get_async_event(ctx2, &ev, 1), 0);  // the PORT_ERR just dispatched
    ASSERT_EQ(ibv_close_device(ctx2), 0);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_ACTIVE);
    auto v3 = e.drain(e.ctx);
    ASSERT_EQ(v3.size(), 2u);
    EXPECT_EQ(v3[0].event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(v3[1].event_type, IBV_EVENT_PORT_ACTIVE);
}

TEST(AsyncEvent, events_without_a_consumer_are_kept_by_the_driver_not_delivered) {
    env e;
    e.raise(hw::EQE_SRQ_LIMIT, 3);                       // no SRQs in interface version 1
    e.raise(hw::EQE_QP_FATAL, 77);                       // no such QP
    e.raise(hw::EQE_CQ_ERROR, 99);                       // no such CQ
    e.raise(hw::EQE_PORT_CHANGE, 2, hw::EQE_PORT_DOWN);  // the fake HCA has one port
    e.raise(hw::EQE_PORT_CHANGE, 1, 0x7F);               // unknown subtype
    e.raise(0x55, 1);                                    // unknown type
    e.raise(hw::EQE_COMPLETION, e.cq->handle);           // a completion event, not an async one
    ASSERT_EQ(e.drv.process_eq(), 7u);
    EXPECT_EQ(e.drv.unclaimed_events().size(), 6u);
    EXPECT_EQ(e.drv.pending_cq_events(e.cq->handle), 1u);
    EXPECT_EQ(e.drv.port(1)->state, 4);
    EXPECT_TRUE(e.drain(e.ctx).empty());
}

TEST(AsyncEvent, C10_138_handler_is_called_for_every_later_event_and_not_for_earlier_ones) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTR);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);  // reported before the registration
    std::vector<ibv_async_event> got;
    std::vector<ibv_qp_state> state_seen;
    std::vector<size_t> doorbells_seen;
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx,
                                          [&](const ibv_async_event& ev) {
                                              got.push_back(ev);
                                              state_seen.push_back(q->state);
                                              doorbells_seen.push_back(e.bus.count_mmio(hw::REG_EQ_CONSUMER));
                                          }),
              0);
    EXPECT_TRUE(got.empty());
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    e.raise(hw::EQE_QP_FATAL, q->qp_num);
    size_t before = e.bus.count_mmio(hw::REG_EQ_CONSUMER);
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);  // the poll path processes the EQ
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].event_type, IBV_EVENT_COMM_EST);
    EXPECT_EQ(got[1].event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(got[1].element.qp, q);
    // The handler runs after the software state changed and after the EQ doorbell.
    EXPECT_EQ(state_seen[1], IBV_QPS_ERR);
    EXPECT_EQ(doorbells_seen[0], before + 1);
    // Events given to the handler are not queued; the earlier one still is, then EINVAL.
    ibv_async_event ev;
    ASSERT_EQ(ibv_get_async_event(e.ctx, &ev, 1), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(ibv_get_async_event(e.ctx, &ev, 1), EINVAL);
    // Every verb that processes the EQ dispatches: here a direct process_eq and get_cq_event.
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_ACTIVE);
    e.drv.process_eq();
    EXPECT_EQ(got.size(), 3u);
    ibv_comp_channel* ch = ibv_create_comp_channel(e.ctx);
    ibv_cq* ccq = ibv_create_cq(e.ctx, 3, nullptr, ch);
    e.raise(hw::EQE_SQ_DRAINED, q->qp_num);
    ibv_cq* which;
    EXPECT_EQ(ibv_get_cq_event(ch, &which, nullptr, 10), ETIMEDOUT);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[3].event_type, IBV_EVENT_SQ_DRAINED);
    ibv_destroy_cq(ccq);
    ibv_destroy_comp_channel(ch);
    EXPECT_EQ(ibv_set_async_event_handler(nullptr, {}), EINVAL);
}

TEST(AsyncEvent, C10_139_a_later_registration_replaces_the_handler) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    int first = 0, second = 0;
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx, [&](const ibv_async_event&) { ++first; }), 0);
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    // Reported before the second registration: it still goes to the first handler.
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx, [&](const ibv_async_event&) { ++second; }), 0);
    EXPECT_EQ(first, 1);
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    e.drv.process_eq();
    EXPECT_EQ(first, 1);
    EXPECT_EQ(second, 2);
    // An empty handler unregisters: events are queued for ibv_get_async_event again.
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx, {}), 0);
    e.raise(hw::EQE_SQ_DRAINED, q->qp_num);
    auto v = e.drain(e.ctx);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].event_type, IBV_EVENT_SQ_DRAINED);
    EXPECT_EQ(second, 2);
}

TEST(AsyncEvent, C10_139_handler_replaced_from_inside_itself_takes_the_next_event) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    std::vector<int> calls;
    std::function<void(const ibv_async_event&)> second = [&](const ibv_async_event&) { calls.push_back(2); };
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx,
                                          [&](const ibv_async_event&) {
                                              calls.push_back(1);
                                              ibv_set_async_event_handler(e.ctx, second);
                                          }),
              0);
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    e.drv.process_eq();
    EXPECT_EQ(calls, (std::vector<int>{1, 2, 2}));
}

TEST(AsyncEvent, handler_that_polls_sees_later_events_after_it_returns_in_order) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    std::vector<ibv_event_type> order;
    int depth = 0, max_depth = 0;
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx,
                                          [&](const ibv_async_event& ev) {
                                              max_depth = std::max(max_depth, ++depth);
                                              order.push_back(ev.event_type);
                                              if (ev.event_type == IBV_EVENT_COMM_EST) {
                                                  // The HCA reports more while the handler runs and
                                                  // the handler polls (processing the EQ again).
                                                  e.raise(hw::EQE_SQ_DRAINED, q->qp_num);
                                                  ibv_wc wc;
                                                  EXPECT_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);
                                                  EXPECT_EQ(order.size(), 1u);  // not nested
                                              }
                                              --depth;
                                          }),
              0);
    e.raise(hw::EQE_COMM_EST, q->qp_num);
    e.raise(hw::EQE_QP_FATAL, q->qp_num);
    e.drv.process_eq();
    EXPECT_EQ(order,
              (std::vector<ibv_event_type>{IBV_EVENT_COMM_EST, IBV_EVENT_QP_FATAL, IBV_EVENT_SQ_DRAINED}));
    EXPECT_EQ(max_depth, 1);
}

TEST(AsyncEvent, destroy_qp_drops_its_queued_events_and_none_arrive_later) {
    env e;
    ibv_qp* q = e.qp();
    ibv_qp* other = e.qp();
    e.bring(q, IBV_QPS_RTS);
    e.bring(other, IBV_QPS_RTS);
    const uint32_t qpn = q->qp_num;
    e.raise(hw::EQE_COMM_EST, qpn);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    e.raise(hw::EQE_QP_FATAL, qpn);
    e.raise(hw::EQE_COMM_EST, other->qp_num);
    ibv_async_event ev;
    ASSERT_EQ(ibv_get_async_event(e.ctx, &ev, 1), 0);
    EXPECT_EQ(ev.element.qp, q);
    ibv_ack_async_event(&ev);
    // QP_FATAL of q is still queued, unacknowledged: destroy does not wait for it.
    ASSERT_EQ(ibv_destroy_qp(q), 0);
    auto v = e.drain(e.ctx);
    ASSERT_EQ(v.size(), 2u);
    EXPECT_EQ(v[0].event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(v[1].event_type, IBV_EVENT_COMM_EST);
    EXPECT_EQ(v[1].element.qp, other);
    // An EQE for the destroyed QP number reaches no consumer.
    e.raise(hw::EQE_QP_FATAL, qpn);
    EXPECT_TRUE(e.drain(e.ctx).empty());
    ASSERT_EQ(e.drv.unclaimed_events().size(), 1u);
    EXPECT_EQ(e.drv.unclaimed_events()[0].resource, qpn);
}

TEST(AsyncEvent, handler_may_destroy_the_qp_and_its_later_events_are_dropped) {
    env e;
    ibv_qp* q = e.qp();
    e.bring(q, IBV_QPS_RTS);
    std::vector<ibv_event_type> got;
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx,
                                          [&](const ibv_async_event& ev) {
                                              got.push_back(ev.event_type);
                                              if (ev.event_type == IBV_EVENT_QP_FATAL) {
                                                  EXPECT_EQ(ibv_destroy_qp(ev.element.qp), 0);
                                              }
                                          }),
              0);
    e.raise(hw::EQE_QP_FATAL, q->qp_num);
    e.raise(hw::EQE_QP_LAST_WQE_REACHED, q->qp_num);  // dispatched in the same pass, then dropped
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(e.cq, 1, &wc), 0);
    EXPECT_EQ(got, (std::vector<ibv_event_type>{IBV_EVENT_QP_FATAL, IBV_EVENT_PORT_ERR}));
    EXPECT_EQ(e.ctx->qps, 0u);
}

TEST(AsyncEvent, destroy_cq_drops_its_queued_error_and_refuses_inside_its_own_poll) {
    env e;
    ibv_cq* c = ibv_create_cq(e.ctx, 3);
    ASSERT_NE(c, nullptr);
    int destroy_rc = -1;
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx,
                                          [&](const ibv_async_event& ev) {
                                              if (ev.event_type == IBV_EVENT_CQ_ERR)
                                                  destroy_rc = ibv_destroy_cq(ev.element.cq);
                                          }),
              0);
    e.raise(hw::EQE_CQ_ERROR, c->handle);
    ibv_wc wc;
    EXPECT_EQ(ibv_poll_cq(c, 1, &wc), 0);
    EXPECT_EQ(destroy_rc, EBUSY);  // the handler runs inside ibv_poll_cq(c)
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx, {}), 0);
    ibv_cq* d = ibv_create_cq(e.ctx, 3);
    e.raise(hw::EQE_CQ_ERROR, d->handle);
    e.drv.process_eq();
    ASSERT_EQ(ibv_destroy_cq(d), 0);  // its CQ_ERR was queued, never got
    ASSERT_EQ(ibv_destroy_cq(c), 0);
    EXPECT_TRUE(e.drain(e.ctx).empty());
}

TEST(AsyncEvent, close_device_from_its_own_handler_is_refused) {
    env e;
    fw::address_space as2(e.os);
    ibv_context* ctx2 = ibv_open_device(e.drv, as2);
    int rc = -1;
    ASSERT_EQ(ibv_set_async_event_handler(ctx2, [&](const ibv_async_event&) { rc = ibv_close_device(ctx2); }),
              0);
    e.raise(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN);
    e.drv.process_eq();
    EXPECT_EQ(rc, EBUSY);
    EXPECT_EQ(ibv_close_device(ctx2), 0);
}

TEST(AsyncEvent, C10_17_cq_error_reaches_the_consumer_before_the_next_completion) {
    env e;
    ibv_comp_channel* ch = ibv_create_comp_channel(e.ctx);
    ibv_cq* c = ibv_create_cq(e.ctx, 3, nullptr, ch);  // ring of 4
    e.write_cqe(c, 0, 10);
    e.write_cqe(c, 1, 11);
    std::vector<uint64_t> consumed_at_event;
    ASSERT_EQ(ibv_set_async_event_handler(e.ctx,
                                          [&](const ibv_async_event& ev) {
                                              if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == c)
                                                  consumed_at_event.push_back(c->consumer);
                                          }),
              0);
    e.raise(hw::EQE_CQ_ERROR, c->handle);  // e.g. the HCA found the CQ overrun
    ibv_wc wc[4];
    ASSERT_EQ(ibv_poll_cq(c, 1, wc), 1);
    EXPECT_EQ(consumed_at_event, (std::vector<uint64_t>{0}));  // reported before the extraction
    EXPECT_TRUE(c->error);
    EXPECT_EQ(wc[0].wr_id, 10u);
    // 10.10.3: completions present at the error are still returned, then the CQ reads empty
    // even if more entries appear.
    e.write_cqe(c, 2, 12);
    ASSERT_EQ(ibv_poll_cq(c, 4, wc), 1);
    EXPECT_EQ(wc[0].wr_id, 11u);
    EXPECT_EQ(ibv_poll_cq(c, 4, wc), 0);
    // No completion events for a CQ in error: arming rings no doorbell, events are not reported.
    size_t m = e.bus.mmio.size();
    EXPECT_EQ(ibv_req_notify_cq(c, 0), 0);
    EXPECT_EQ(e.bus.mmio.size(), m);
    e.raise(hw::EQE_COMPLETION, c->handle);
    ibv_cq* which;
    EXPECT_EQ(ibv_get_cq_event(ch, &which, nullptr, 100), ETIMEDOUT);
    EXPECT_EQ(consumed_at_event.size(), 1u);
    EXPECT_EQ(ibv_destroy_cq(c), 0);  // destroy is allowed on a CQ in error
    EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST(AsyncEvent, wait_cq_sees_the_cq_error_and_ends_instead_of_sleeping) {
    env e;
    ibv_cq* c = ibv_create_cq(e.ctx, 3);
    e.write_cqe(c, 0, 20);
    e.raise(hw::EQE_CQ_ERROR, c->handle);
    EXPECT_EQ(ibv_wait_cq(c, 1000), 0);  // processes the EQ; one completion is still there
    EXPECT_TRUE(c->error);
    ibv_wc wc;
    ASSERT_EQ(ibv_poll_cq(c, 1, &wc), 1);
    // The HCA writing on into the ring must not wake a wait/poll loop that would find nothing.
    e.write_cqe(c, 1, 21);
    uint64_t t = e.bus.now_ns();
    EXPECT_EQ(ibv_wait_cq(c, 1000), EIO);
    EXPECT_EQ(e.bus.now_ns(), t);
    EXPECT_EQ(ibv_poll_cq(c, 1, &wc), 0);
    auto v = e.drain(e.ctx);
    ASSERT_EQ(v.size(), 1u);
    EXPECT_EQ(v[0].event_type, IBV_EVENT_CQ_ERR);
    EXPECT_EQ(ibv_destroy_cq(c), 0);
}

// libsystemc (linked through tlm_if) needs the symbol; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }
