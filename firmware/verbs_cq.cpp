// Verbs on completion queues: completion channels, create / resize / query / destroy, poll,
// notification requests, completion event handlers and waiting for completion events.
#include <algorithm>
#include <cerrno>
#include <vector>

#include "firmware/owned_ring.h"
#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- CQ

ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx) {
    if (!ctx) return fail<ibv_comp_channel>(EINVAL);
    ++ctx->channels;
    return new ibv_comp_channel{ctx, {}};
}

int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
    if (!ch) return EINVAL;
    if (!ch->cqs.empty()) return EBUSY;
    --ch->context->channels;
    delete ch;
    return 0;
}

namespace {

/// The driver's completion hook of a CQ without a channel: queues the event for the handler of
/// the CQ's identifier; false (the event stays pending in the driver) when there is none.
bool on_comp_event(ibv_cq* cq) {
    if (cq->error) return true;  // 10.8.5.2: not reported
    ibv_context* ctx = cq->context;
    if (!ctx->comp_handlers[size_t(cq->comp_vector)]) return false;
    ctx->comp_events.push_back(cq);
    return true;
}

void on_cq_event(ibv_cq* cq, const hw::eqe& e) {
    ibv_async_event ev{};
    if (!event_type_of(e, &ev.event_type)) return;
    if (e.type == hw::EQE_CQ_ERROR && !cq->error) {
        // 10.10.3: the completions present when the error is seen can still be polled, then the
        // CQ reads as empty; no completion events are reported any more.
        host_bus& bus = cq->context->driver->bus();
        cq->error = true;
        cq->error_end =
            cq->consumer + fw::software_owned_run<hw::cqe>(bus, cq->ring_pa, cq->log_size, cq->consumer);
    }
    ev.element.cq = cq;
    queue_event(cq->context, ev);
}

}  // namespace

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
    if (!ctx) return fail<ibv_cq>(EINVAL);
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (cqe < 1 || uint32_t(cqe) > drv.caps().max_cqe) return fail<ibv_cq>(EINVAL);
    if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) return fail<ibv_cq>(EINVAL);  // o10-54.2.1
    if (channel && channel->context != ctx) return fail<ibv_cq>(EINVAL);
    uint8_t log = log2_ceil(uint64_t(cqe) + 1);
    uint64_t ring;
    if (!drv.os().alloc_contiguous(sizeof(hw::cqe) << log, fw::PAGE_BYTES, &ring))
        return fail<ibv_cq>(ENOMEM);
    uint32_t cqn;
    if (!drv.alloc_cqn(&cqn)) {
        drv.os().free(ring);
        return fail<ibv_cq>(ENOMEM);
    }
    hw::cq_context c{};
    c.cqn = cqn;
    c.log_size = log;
    c.valid = 1;
    c.eqn = 0;
    c.base = ring;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_CQ, cqn, 0, &c, sizeof c);
    if (st != hw::CMD_OK) {
        drv.free_cqn(cqn);
        drv.os().free(ring);
        return fail<ibv_cq>(fw::cmd_errno(st));
    }
    auto* cq = new ibv_cq{ctx, channel, cq_context, cqn, int((1u << log) - 1), log, ring, 0, 0, 0, 0};
    cq->comp_vector = comp_vector;
    if (channel) channel->cqs.push_back(cq);
    ++ctx->cqs;
    drv.set_cq_event_handler(cqn, [cq](const hw::eqe& e) { on_cq_event(cq, e); });
    if (!channel) drv.set_cq_comp_handler(cqn, [cq] { return on_comp_event(cq); });
    return cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
    if (!cq) return EINVAL;
    ibv_context* ctx = cq->context;
    verb_cost(ctx);
    if (cq->refs) return EBUSY;     // C10-18
    if (cq->polling) return EBUSY;  // from an async event handler running inside ibv_poll_cq(cq)
    hw::cmd_status st = ctx->driver->exec(hw::CMD_DESTROY_CQ, cq->handle, 0, nullptr, 0);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    if (cq->channel) {
        auto& v = cq->channel->cqs;
        v.erase(std::remove(v.begin(), v.end(), cq), v.end());
    }
    // Unacknowledged events are not waited for (libibverbs would block): queued ones are dropped
    // and none is delivered for this CQ afterwards.
    ctx->driver->clear_cq_event_handler(cq->handle);
    ctx->driver->clear_cq_comp_handler(cq->handle);
    drop_events(ctx, cq, object_kind::cq);
    ctx->driver->free_cqn(cq->handle);
    ctx->driver->os().free(cq->ring_pa);
    --ctx->cqs;
    delete cq;
    return 0;
}

namespace {

/// Completion opcode of a CQE.
ibv_wc_opcode wc_opcode_of(uint8_t op) {
    switch (op) {
    case hw::CQE_OP_SEND: return IBV_WC_SEND;
    case hw::CQE_OP_RDMA_WRITE: return IBV_WC_RDMA_WRITE;
    case hw::CQE_OP_RDMA_READ: return IBV_WC_RDMA_READ;
    case hw::CQE_OP_COMP_SWAP: return IBV_WC_COMP_SWAP;
    case hw::CQE_OP_FETCH_ADD: return IBV_WC_FETCH_ADD;
    case hw::CQE_OP_BIND_MW: return IBV_WC_BIND_MW;
    case hw::CQE_OP_LOCAL_INV: return IBV_WC_LOCAL_INV;
    case hw::CQE_OP_FAST_REG: return IBV_WC_FAST_REG_MR;
    case hw::CQE_OP_RECV: return IBV_WC_RECV;
    case hw::CQE_OP_RECV_RDMA_WITH_IMM: return IBV_WC_RECV_RDMA_WITH_IMM;
    default: return ibv_wc_opcode(op);
    }
}

}  // namespace

int ibv_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
    if (!cq || num_entries < 0 || (num_entries && !wc)) return -EINVAL;
    hca_driver& drv = *cq->context->driver;
    host_bus& bus = drv.bus();
    bus.cpu_cost(cpu_op::poll_cqe);
    ++cq->polling;
    // C10-17: a CQ error the HCA has reported reaches the consumer before the next completion.
    if (drv.eq_pending()) drv.process_eq();
    uint32_t mask = (1u << cq->log_size) - 1;
    int n = 0;
    while (n < num_entries) {
        if (cq->error && cq->consumer >= cq->error_end) break;  // 10.10.3: then the CQ reads empty
        // The owner byte first; the body only once it is ours (tlm_if/cqe.h, publication order).
        if (!fw::software_owns<hw::cqe>(bus, cq->ring_pa, cq->log_size, cq->consumer)) break;
        hw::cqe e;
        bus.mem_read(cq->ring_pa + uint64_t(cq->consumer & mask) * sizeof(hw::cqe), &e, sizeof e);
        ibv_wc& w = wc[n++];
        w.wr_id = e.wr_id;
        w.status = ibv_wc_status(e.status);
        w.opcode = wc_opcode_of(e.opcode);
        w.vendor_err = e.vendor_err;
        w.byte_len = e.byte_len;
        w.imm_data = e.imm;
        w.qp_num = e.qpn;
        w.src_qp = e.src_qp;
        w.wc_flags = e.flags;
        w.pkey_index = e.pkey_index;
        w.slid = e.slid;
        w.sl = e.sl;
        w.dlid_path_bits = e.dlid_path_bits;
        w.freed_recv_wrs = 0;
        if (auto* qp = static_cast<ibv_qp*>(drv.qp_user(e.qpn))) {
            if (e.owner & hw::CQE_IS_SEND) {
                // C10-108, 10.8.6: a send CQE for WQE w retires every earlier (unsignaled) WQE of
                // the send queue, so their slots can be posted again. A counter that names no
                // outstanding WQE (stale, from before a Reset) retires nothing.
                uint32_t delta = uint16_t(e.wqe_counter - uint16_t(qp->sq.completed)) + 1u;
                if (delta <= qp->sq.producer - qp->sq.completed) qp->sq.completed += delta;
            } else if (ibv_srq* srq =
                           e.xrc_srqn ? static_cast<ibv_srq*>(drv.srq_user(e.xrc_srqn - 1)) : qp->srq) {
                // o10-53.2.2: a polled SRQ completion frees room for one more post to the SRQ (an
                // XRC target's completion names the XRC SRQ its message used).
                if (srq->ring.completed < srq->ring.producer) ++srq->ring.completed;
            } else if (qp->rq.completed < qp->rq.producer) {
                ++qp->rq.completed;
                if (qp->qp_type == IBV_QPT_RD) w.freed_recv_wrs = 1;  // o10-54
            }
        }
        ++cq->consumer;
    }
    if (n) {
        uint64_t db = hw::cq_doorbell(cq->handle, uint32_t(cq->consumer), hw::CQ_ARM_NONE);
        mmio64(cq->context, hw::UAR_CQ_DOORBELL, db);
    }
    --cq->polling;
    return n;
}

int ibv_resize_cq(ibv_cq* cq, int cqe) {
    if (!cq) return EINVAL;
    ibv_context* ctx = cq->context;
    hca_driver& drv = *ctx->driver;
    host_bus& bus = drv.bus();
    verb_cost(ctx);
    ++cq->polling;  // a CQ error waiting in the EQ counts; handlers may run but not destroy this CQ
    if (drv.eq_pending()) drv.process_eq();
    --cq->polling;
    if (cq->error) return EIO;  // 10.8.5.2: resizing a CQ in error is an immediate error
    if (cqe < 1 || uint32_t(cqe) > drv.caps().max_cqe) return EINVAL;
    // Completions in the ring not polled yet must fit the new capacity (libibverbs: EINVAL).
    const uint64_t outstanding =
        fw::software_owned_run<hw::cqe>(bus, cq->ring_pa, cq->log_size, cq->consumer);
    if (uint64_t(cqe) < outstanding) return EINVAL;
    const uint8_t log = log2_ceil(uint64_t(cqe) + 1);
    if (log == cq->log_size) return 0;  // the same ring
    const uint64_t new_size = 1ull << log;
    uint64_t ring;
    if (!drv.os().alloc_contiguous(sizeof(hw::cqe) << log, fw::PAGE_BYTES, &ring)) return ENOMEM;
    // resize_cq_in: every slot reads as not yet written for the counter value n in
    // [consumer, consumer + 2^log) that lands in it.
    std::vector<hw::cqe> init(new_size);
    for (uint64_t i = 0; i < new_size; ++i) {
        const uint64_t n = cq->consumer + i;
        init[n & (new_size - 1)].owner = uint8_t(1u - hw::cqe_owner_for(n, log));
    }
    bus.mem_write(ring, init.data(), sizeof(hw::cqe) << log);
    bus.cpu_cost(cpu_op::memcpy_64b, uint32_t(new_size));
    hw::resize_cq_in in{};
    in.base = ring;
    in.log_size = log;
    in.consumer = uint32_t(cq->consumer) & 0xFFFFFFu;
    hw::resize_cq_out out{};
    const hw::cmd_status st = drv.exec(hw::CMD_RESIZE_CQ, cq->handle, 0, &in, sizeof in, &out, sizeof out);
    if (st != hw::CMD_OK) {
        drv.os().free(ring);
        // BAD_STATE: the HCA overran the CQ and its CQ error is not processed yet.
        return st == hw::CMD_BAD_STATE ? EIO : fw::cmd_errno(st);
    }
    // The HCA moved [consumer, producer) to the same counter values: polling goes on from consumer.
    drv.os().free(cq->ring_pa);
    cq->ring_pa = ring;
    cq->log_size = log;
    cq->cqe = int(new_size - 1);
    return 0;
}

int ibv_query_cq(ibv_cq* cq, int* cqe) {
    if (!cq || !cqe) return EINVAL;
    hca_driver& drv = *cq->context->driver;
    verb_cost(cq->context);
    ++cq->polling;
    if (drv.eq_pending()) drv.process_eq();
    --cq->polling;
    if (cq->error) return EIO;  // 10.8.5.2: querying a CQ in error is an immediate error
    hw::cq_context c{};
    const hw::cmd_status st = drv.exec(hw::CMD_QUERY_CQ, cq->handle, 0, nullptr, 0, &c, sizeof c);
    if (st != hw::CMD_OK) return st == hw::CMD_BAD_STATE ? EIO : fw::cmd_errno(st);
    *cqe = int((1u << c.log_size) - 1);  // 10.2.6.2: the capacity, as the HCA holds it
    return 0;
}

int ibv_set_comp_event_handler(ibv_context* ctx, int comp_vector,
                               std::function<void(ibv_cq*, void*)> handler) {
    if (!ctx) return EINVAL;
    verb_cost(ctx);
    if (comp_vector < 0 || comp_vector >= ctx->num_comp_vectors) return EINVAL;
    // What the HCA reported before the call goes where it went so far (as for async events).
    ctx->driver->process_eq();
    auto& slot = ctx->comp_handlers[size_t(comp_vector)];
    slot = std::move(handler);  // o10-54.2.2 / C10-110.2.1: replaces; empty clears
    if (!slot) {                // events taken for the cleared handler and not passed on: pending again
        auto& q = ctx->comp_events;
        for (auto it = q.begin(); it != q.end();) {
            if ((*it)->comp_vector != comp_vector) {
                ++it;
                continue;
            }
            ctx->driver->add_cq_event((*it)->handle);
            it = q.erase(it);
        }
    }
    return 0;
}

int ibv_process_events(ibv_context* ctx, uint64_t timeout_ns) {
    if (!ctx) return EINVAL;
    hca_driver& drv = *ctx->driver;
    if (!drv.eq_pending() && !drv.wait_eq(timeout_ns)) return ETIMEDOUT;
    drv.process_eq();
    return 0;
}

int ibv_req_notify_cq(ibv_cq* cq, int solicited_only) {
    if (!cq) return EINVAL;
    if (cq->error) return 0;  // 10.10.3: no completion events after a CQ error; the request is not an error
    uint64_t db = hw::cq_doorbell(cq->handle, uint32_t(cq->consumer),
                                  solicited_only ? hw::CQ_ARM_SOLICITED : hw::CQ_ARM_NEXT);
    mmio64(cq->context, hw::UAR_CQ_DOORBELL, db);
    return 0;
}

int ibv_wait_cq(ibv_cq* cq, uint64_t timeout_ns) {
    if (!cq) return EINVAL;
    hca_driver& drv = *cq->context->driver;
    host_bus& bus = drv.bus();
    ++cq->polling;  // handlers may run in process_eq; they cannot destroy this CQ meanwhile
    if (drv.eq_pending()) drv.process_eq();
    --cq->polling;
    // A CQ in error: what it held at the error can be polled; after that nothing will come, and
    // waiting on the ring (which the HCA may still write) would wake a poll loop for nothing.
    if (cq->error) return cq->consumer < cq->error_end ? 0 : EIO;
    uint64_t deadline = bus.now_ns() + timeout_ns;
    uint64_t slot = cq->ring_pa + uint64_t(cq->consumer & ((1u << cq->log_size) - 1)) * sizeof(hw::cqe);
    for (;;) {
        if (fw::software_owns<hw::cqe>(bus, cq->ring_pa, cq->log_size, cq->consumer)) return 0;
        uint64_t now = bus.now_ns();
        if (timeout_ns && now >= deadline) return ETIMEDOUT;
        bus.wait_write(slot, sizeof(hw::cqe), timeout_ns ? deadline - now : 0);
    }
}

int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context, uint64_t timeout_ns) {
    if (!ch || !cq) return EINVAL;
    hca_driver& drv = *ch->context->driver;
    uint64_t deadline = drv.bus().now_ns() + timeout_ns;
    for (;;) {
        drv.process_eq();
        for (ibv_cq* c : ch->cqs) {
            if (c->error) {  // 10.10.3: a CQ in error reports no completion events
                while (drv.take_cq_event(c->handle)) {}
                continue;
            }
            if (drv.take_cq_event(c->handle)) {
                *cq = c;
                if (cq_context) *cq_context = c->cq_context;
                return 0;
            }
        }
        uint64_t now = drv.bus().now_ns();
        if (timeout_ns && now >= deadline) return ETIMEDOUT;
        drv.wait_eq(timeout_ns ? deadline - now : 0);
    }
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned nevents) {
    if (cq) cq->comp_events_completed += nevents;
}

}  // namespace hcasim::verbs
