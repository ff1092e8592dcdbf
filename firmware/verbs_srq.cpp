// Verbs on shared receive queues: create, modify (limit, resize), query, destroy, post receives.
#include <algorithm>
#include <cerrno>

#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- SRQ

namespace {

void on_srq_event(ibv_srq* srq, const hw::eqe& e) {
    ibv_async_event ev{};
    if (!event_type_of(e, &ev.event_type)) return;
    if (e.type == hw::EQE_SRQ_ERROR) srq->error = true;  // 10.2.9.5: left only by Destroy SRQ
    ev.element.srq = srq;
    queue_event(srq->context, ev);
}

/// Ring geometry for an SRQ of at least max_wr WRs of max_sge SGEs: the capacity is one less
/// than the ring's slots (the HCA's 16-bit counters tell full from empty).
void srq_geometry(uint32_t max_wr, uint32_t max_sge, uint8_t* log_size, uint8_t* log_stride) {
    *log_size = log2_ceil(uint64_t(std::max<uint32_t>(max_wr, 1)) + 1);
    *log_stride =
        log2_ceil(std::max<uint32_t>(sizeof(hw::wqe_recv_header) + max_sge * sizeof(hw::wqe_data_seg), 16));
}

}  // namespace

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* ia) {
    if (!pd || !ia) return fail<ibv_srq>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    ibv_srq_attr& a = ia->attr;
    if (!(caps.flags & hw::CAP_SRQ)) return fail<ibv_srq>(EOPNOTSUPP);
    const bool xrc = ia->srq_type == IBV_SRQT_XRC;
    if (ia->srq_type != IBV_SRQT_BASIC && !xrc) return fail<ibv_srq>(EINVAL);
    if (xrc && !(caps.flags & hw::CAP_XRC)) return fail<ibv_srq>(EOPNOTSUPP);
    // An XRC SRQ: a domain and a CQ of this context (IBA 10.2.10: its completions go to its CQ).
    if (xrc &&
        (!ia->xrcd || !ia->cq || ia->xrcd->context != ctx || ia->cq->context != ctx || ia->cq->special_refs))
        return fail<ibv_srq>(EINVAL);
    if (a.max_wr == 0 || a.max_wr > caps.max_srq_wr || a.max_sge > caps.max_srq_sge || a.srq_limit != 0)
        return fail<ibv_srq>(EINVAL);
    uint8_t log_size, log_stride;
    srq_geometry(a.max_wr, a.max_sge, &log_size, &log_stride);
    uint32_t capacity = std::min<uint32_t>((1u << log_size) - 1, caps.max_srq_wr);
    auto* srq = new ibv_srq{};
    srq->context = ctx;
    srq->srq_context = ia->srq_context;
    srq->pd = pd;
    srq->xrcd = xrc ? ia->xrcd : nullptr;
    srq->cq = xrc ? ia->cq : nullptr;
    srq->ring.log_size = log_size;
    srq->ring.log_stride = log_stride;
    srq->ring.max_wr = capacity;
    srq->ring.max_sge = a.max_sge;
    bool have_n = false;
    auto undo = [&](int e) {
        if (srq->ring.pa) drv.os().free(srq->ring.pa);
        if (have_n) drv.free_srqn(srq->handle);
        delete srq;
        return fail<ibv_srq>(e);
    };
    if (!drv.os().alloc_contiguous(size_t(1) << (log_size + log_stride), fw::PAGE_BYTES, &srq->ring.pa))
        return undo(ENOMEM);
    if (!(have_n = drv.alloc_srqn(&srq->handle))) return undo(ENOMEM);
    hw::srq_context c{};
    c.srqn = srq->handle;
    c.log_size = log_size;
    c.log_stride = log_stride;
    c.pd = pd->handle;  // o10-2.2.1: the SRQ belongs to one PD
    c.base = srq->ring.pa;
    c.max_wr = capacity;
    c.uar = ctx->uar;
    if (xrc) {
        c.xrcd = srq->xrcd->handle;
        c.cqn = srq->cq->handle;
    }
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_SRQ, srq->handle, 0, &c, sizeof c);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    a.max_wr = capacity;
    ++pd->refs;  // C10-11.2.2
    if (xrc) {
        ++srq->xrcd->refs;
        ++srq->cq->refs;
        drv.set_srq_user(srq->handle, srq);
    }
    ++ctx->srqs;
    drv.set_srq_event_handler(srq->handle, [srq](const hw::eqe& e) { on_srq_event(srq, e); });
    return srq;
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask) {
    if (!srq || !attr) return EINVAL;
    ibv_context* ctx = srq->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    const uint32_t mask = uint32_t(attr_mask);
    if (!mask || (mask & ~uint32_t(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))) return EINVAL;
    if (srq->error) return EINVAL;  // 10.2.9.5
    hw::modify_srq_in in{};
    uint32_t op = 0;
    if (mask & IBV_SRQ_LIMIT) {
        op |= hw::SRQ_MODIFY_LIMIT;
        in.limit = attr->srq_limit;
    }
    uint64_t new_ring = 0;
    uint8_t log_size = srq->ring.log_size, log_stride = srq->ring.log_stride;
    uint32_t capacity = srq->ring.max_wr;
    if (mask & IBV_SRQ_MAX_WR) {
        if (!(caps.flags & hw::CAP_SRQ_RESIZE)) return EOPNOTSUPP;
        if (attr->max_wr == 0 || attr->max_wr > caps.max_srq_wr) return EINVAL;
        uint8_t unused;
        srq_geometry(attr->max_wr, srq->ring.max_sge, &log_size, &unused);
        capacity = std::min<uint32_t>((1u << log_size) - 1, caps.max_srq_wr);
        // o10-10.2.2: not below the WRs outstanding (the HCA checks what it still holds; this is
        // the consumer's view, which also counts WRs taken but not yet polled).
        if (attr->max_wr < srq->ring.producer - srq->ring.completed) return EINVAL;
        if (!drv.os().alloc_contiguous(size_t(1) << (log_size + log_stride), fw::PAGE_BYTES, &new_ring))
            return ENOMEM;
        op |= hw::SRQ_MODIFY_SIZE;
        in.max_wr = capacity;
        in.base = new_ring;
        in.log_size = log_size;
    }
    hw::cmd_status st = drv.exec(hw::CMD_MODIFY_SRQ, srq->handle, op, &in, sizeof in);
    if (st != hw::CMD_OK) {
        if (new_ring) drv.os().free(new_ring);
        return st == hw::CMD_BAD_STATE ? EINVAL : fw::cmd_errno(st);
    }
    if (new_ring) {
        drv.os().free(srq->ring.pa);
        srq->ring.pa = new_ring;
        srq->ring.log_size = log_size;
        srq->ring.max_wr = capacity;
        attr->max_wr = capacity;
    }
    return 0;
}

int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) {
    if (!srq || !attr) return EINVAL;
    verb_cost(srq->context);
    hw::srq_context c{};
    hw::cmd_status st =
        srq->context->driver->exec(hw::CMD_QUERY_SRQ, srq->handle, 0, nullptr, 0, &c, sizeof c);
    if (st == hw::CMD_BAD_STATE) return EINVAL;  // 10.2.9.5: an SRQ in error
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    attr->max_wr = c.max_wr;
    attr->max_sge = srq->ring.max_sge;
    attr->srq_limit = c.limit;
    return 0;
}

int ibv_destroy_srq(ibv_srq* srq) {
    if (!srq) return EINVAL;
    ibv_context* ctx = srq->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (srq->refs) return EBUSY;  // o10-10.2.3
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_SRQ, srq->handle, 0, nullptr, 0);
    if (st == hw::CMD_BAD_STATE) return EBUSY;
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    // o10-10.2.4, o10-10.2.5: posted WRs go with it (no completions); queued events are dropped.
    drv.clear_srq_event_handler(srq->handle);
    drop_events(ctx, srq, object_kind::srq);
    drv.free_srqn(srq->handle);
    drv.os().free(srq->ring.pa);
    --srq->pd->refs;
    if (srq->xrcd) {
        --srq->xrcd->refs;
        --srq->cq->refs;
        drv.set_srq_user(srq->handle, nullptr);
    }
    --ctx->srqs;
    delete srq;
    return 0;
}

int ibv_get_srq_num(ibv_srq* srq, uint32_t* srq_num) {
    if (!srq || !srq_num || !srq->xrcd) return EINVAL;  // only XRC SRQs are named by number
    *srq_num = srq->handle;
    return 0;
}

// ---------------------------------------------------------------- XRC domains

ibv_xrcd* ibv_open_xrcd(ibv_context* ctx) {
    if (!ctx) return fail<ibv_xrcd>(EINVAL);
    verb_cost(ctx);
    if (!(ctx->driver->caps().flags & hw::CAP_XRC)) return fail<ibv_xrcd>(EOPNOTSUPP);
    uint32_t n;
    if (!ctx->driver->alloc_xrcdn(&n)) return fail<ibv_xrcd>(ENOMEM);
    ++ctx->xrcds;
    return new ibv_xrcd{ctx, n, 0};
}

int ibv_close_xrcd(ibv_xrcd* xrcd) {
    if (!xrcd) return EINVAL;
    verb_cost(xrcd->context);
    if (xrcd->refs) return EBUSY;  // its XRC SRQs and target QPs go first
    xrcd->context->driver->free_xrcdn(xrcd->handle);
    --xrcd->context->xrcds;
    delete xrcd;
    return 0;
}

int ibv_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    if (bad_wr) *bad_wr = nullptr;
    if (!srq) return EINVAL;
    ibv_context* ctx = srq->context;
    host_bus& bus = ctx->driver->bus();
    bus.cpu_cost(cpu_op::verb_call);
    uint8_t buf[4096];
    uint32_t posted = 0;
    int err = 0;
    ibv_wq_ring& r = srq->ring;
    for (; wr; wr = wr->next) {
        // o10-51.2.1: accepted in any state; beyond the capacity an immediate error.
        if (r.producer - r.completed >= r.max_wr)
            err = ENOMEM;
        else if (wr->num_sge < 0 || uint32_t(wr->num_sge) > r.max_sge || (wr->num_sge && !wr->sg_list))
            err = EINVAL;
        if (err) {
            if (bad_wr) *bad_wr = wr;
            break;
        }
        put_recv_wqe(bus, r, *wr, buf);
        ++posted;
    }
    if (posted) mmio64(ctx, hw::UAR_SRQ_DOORBELL, hw::srq_doorbell(srq->handle, uint16_t(r.producer)));
    return err;
}

}  // namespace hcasim::verbs
