// Verbs on the device: open / close, query device and ports, protection domains, and the
// asynchronous events (from the driver's event queue to the consumer's handler or queue).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "firmware/verbs.h"
#include "firmware/verbs_internal.h"

namespace hcasim::verbs {

using fw::hca_driver;
using namespace detail;

// ---------------------------------------------------------------- event delivery

namespace {

bool is_qp_event(ibv_event_type t) {
    switch (t) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED: return true;
    default: return false;
    }
}

bool is_srq_event(ibv_event_type t) { return t == IBV_EVENT_SRQ_ERR || t == IBV_EVENT_SRQ_LIMIT_REACHED; }

}  // namespace

namespace detail {

/// The verbs event for an EQE; false for EQEs that have none (completion, unknown).
bool event_type_of(const hw::eqe& e, ibv_event_type* t) {
    switch (e.type) {
    case hw::EQE_PATH_MIGRATED: *t = IBV_EVENT_PATH_MIG; return true;
    case hw::EQE_COMM_EST: *t = IBV_EVENT_COMM_EST; return true;
    case hw::EQE_SQ_DRAINED: *t = IBV_EVENT_SQ_DRAINED; return true;
    case hw::EQE_CQ_ERROR: *t = IBV_EVENT_CQ_ERR; return true;
    case hw::EQE_QP_FATAL: *t = IBV_EVENT_QP_FATAL; return true;
    case hw::EQE_QP_REQ_ERR: *t = IBV_EVENT_QP_REQ_ERR; return true;
    case hw::EQE_QP_ACCESS_ERR: *t = IBV_EVENT_QP_ACCESS_ERR; return true;
    case hw::EQE_QP_LAST_WQE_REACHED: *t = IBV_EVENT_QP_LAST_WQE_REACHED; return true;
    case hw::EQE_PATH_MIG_ERR: *t = IBV_EVENT_PATH_MIG_ERR; return true;
    case hw::EQE_LOCAL_CATASTROPHIC: *t = IBV_EVENT_DEVICE_FATAL; return true;
    case hw::EQE_SRQ_LIMIT: *t = IBV_EVENT_SRQ_LIMIT_REACHED; return true;
    case hw::EQE_SRQ_ERROR: *t = IBV_EVENT_SRQ_ERR; return true;
    case hw::EQE_EEC_ERR: *t = IBV_EVENT_EEC_ERR; return true;
    case hw::EQE_EEC_PATH_MIGRATED: *t = IBV_EVENT_EEC_PATH_MIG; return true;
    case hw::EQE_EEC_PATH_MIG_ERR: *t = IBV_EVENT_EEC_PATH_MIG_ERR; return true;
    case hw::EQE_PORT_CHANGE:
        if (e.subtype == hw::EQE_PORT_ACTIVE)
            *t = IBV_EVENT_PORT_ACTIVE;
        else if (e.subtype == hw::EQE_PORT_DOWN)
            *t = IBV_EVENT_PORT_ERR;
        else
            return false;
        return true;
    default: return false;
    }
}

/// Queues an event for the context: for its handler if one is registered, else for
/// ibv_get_async_event. Runs inside the driver's EQ loop, so no consumer code runs here.
void queue_event(ibv_context* ctx, const ibv_async_event& ev) {
    (ctx->async_handler ? ctx->handler_events : ctx->async_events).push_back(ev);
}

/// Drops the events of a QP, CQ or SRQ being destroyed that are still queued.
void drop_events(ibv_context* ctx, const void* object, object_kind kind) {
    auto of_object = [&](const ibv_async_event& ev) {
        switch (kind) {
        case object_kind::cq: return ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == object;
        case object_kind::srq: return is_srq_event(ev.event_type) && ev.element.srq == object;
        case object_kind::eec:
            return (ev.event_type == IBV_EVENT_EEC_ERR || ev.event_type == IBV_EVENT_EEC_PATH_MIG ||
                    ev.event_type == IBV_EVENT_EEC_PATH_MIG_ERR) &&
                   ev.element.eec == object;
        default: return is_qp_event(ev.event_type) && ev.element.qp == object;
        }
    };
    for (auto* q : {&ctx->async_events, &ctx->handler_events})
        q->erase(std::remove_if(q->begin(), q->end(), of_object), q->end());
    if (kind == object_kind::cq)
        ctx->comp_events.erase(std::remove(ctx->comp_events.begin(), ctx->comp_events.end(), object),
                               ctx->comp_events.end());
}

}  // namespace detail

namespace {

/// Passes the queued events to the context's handler, oldest first (the driver calls this at the
/// end of each process_eq that consumed async events).
void deliver_events(ibv_context* ctx) {
    if (ctx->delivering) return;  // called from inside the handler: the running loop continues
    ctx->delivering = true;
    for (;;) {
        if (!ctx->handler_events.empty()) {
            ibv_async_event ev = ctx->handler_events.front();
            ctx->handler_events.pop_front();
            if (!ctx->async_handler) {  // removed by the handler itself
                ctx->async_events.push_back(ev);
                continue;
            }
            auto fn = ctx->async_handler;  // a copy: the handler may replace itself (C10-139)
            fn(ev);
            continue;
        }
        // Completion events after the async ones of the same batch (a CQ error first marks its CQ).
        if (ctx->comp_events.empty()) break;
        ibv_cq* cq = ctx->comp_events.front();
        ctx->comp_events.pop_front();
        if (cq->error) continue;  // 10.8.5.2: no completion events for a CQ in error
        if (!ctx->comp_handlers[size_t(cq->comp_vector)]) {  // cleared by a handler: pending again
            ctx->driver->add_cq_event(cq->handle);
            continue;
        }
        auto fn = ctx->comp_handlers[size_t(cq->comp_vector)];  // a copy: it may replace itself (o10-54.2.2)
        fn(cq, cq->cq_context);                                 // C10-114: names the CQ
    }
    ctx->delivering = false;
}

void on_device_event(ibv_context* ctx, const hw::eqe& e) {
    ibv_async_event ev{};
    if (!event_type_of(e, &ev.event_type)) return;
    ev.element.port_num = e.type == hw::EQE_PORT_CHANGE ? int(e.resource) : 0;
    queue_event(ctx, ev);
}

}  // namespace

// ---------------------------------------------------------------- device

ibv_context* ibv_open_device(fw::hca_driver& drv, fw::address_space& as) {
    drv.bus().cpu_cost(cpu_op::verb_call);
    if (!drv.initialized()) {
        if (int e = drv.init()) return fail<ibv_context>(e);
    }
    if (drv.fatal()) return fail<ibv_context>(EIO);
    uint32_t uar;
    if (!drv.alloc_uar(&uar)) return fail<ibv_context>(ENOMEM);
    auto* ctx = new ibv_context{};
    ctx->driver = &drv;
    ctx->as = &as;
    ctx->uar = uar;
    // C10-109.2.1: at least one completion event handler identifier.
    ctx->num_comp_vectors = int(std::max<uint32_t>(drv.caps().num_comp_vectors, 1));
    ctx->comp_handlers.resize(size_t(ctx->num_comp_vectors));
    // Unaffiliated events (port, device) reach every open context.
    drv.add_event_client(
        ctx, {[ctx](const hw::eqe& e) { on_device_event(ctx, e); }, [ctx] { deliver_events(ctx); }});
    return ctx;
}

int ibv_close_device(ibv_context* ctx) {
    if (!ctx) return EINVAL;
    if (ctx->pds || ctx->cqs || ctx->qps || ctx->srqs || ctx->xrcds || ctx->rdds || ctx->eecs || ctx->mrs ||
        ctx->mws || ctx->ahs || ctx->channels)
        return EBUSY;
    if (ctx->delivering) return EBUSY;  // called from its own async event handler
    // ibv_map_pages ranges; cannot fail: each was pinned by ibv_map_pages and is still listed.
    for (const auto& [va, len] : ctx->mapped) (void)ctx->as->unpin(va, len);
    ctx->driver->remove_event_client(ctx);
    ctx->driver->free_uar(ctx->uar);
    delete ctx;
    return 0;
}

int ibv_query_device(ibv_context* ctx, ibv_device_attr* a) {
    if (!ctx || !a) return EINVAL;
    verb_cost(ctx);
    const hw::hca_caps& c = ctx->driver->caps();
    *a = ibv_device_attr{};
    std::snprintf(a->fw_ver, sizeof a->fw_ver, "%u.%u", c.fw_ver >> 16, c.fw_ver & 0xFFFF);
    a->node_guid = c.node_guid;
    a->sys_image_guid = c.sys_image_guid;
    a->max_mr_size = c.max_mr_size;
    a->page_size_cap = c.page_size_cap;
    a->vendor_id = c.vendor_id;
    a->vendor_part_id = c.vendor_part_id;
    a->hw_ver = c.hw_ver;
    a->max_qp = int(std::min<uint32_t>(c.max_qp, ctx->driver->num_qps() - fw::FIRST_CONSUMER_QPN));
    a->max_qp_wr = int(c.max_qp_wr);
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_N_NOTIFY_CQ |
                          ((c.flags & hw::CAP_APM) ? IBV_DEVICE_AUTO_PATH_MIG : 0) |
                          ((c.flags & hw::CAP_MW) ? IBV_DEVICE_MEM_WINDOW : 0) |
                          ((c.flags & hw::CAP_SEND_INV) ? IBV_DEVICE_MEM_MGT_EXTENSIONS : 0) |
                          ((c.flags & hw::CAP_MW_TYPE2A) ? IBV_DEVICE_MEM_WINDOW_TYPE_2A : 0) |
                          ((c.flags & hw::CAP_MW_TYPE2B) ? IBV_DEVICE_MEM_WINDOW_TYPE_2B : 0) |
                          ((c.flags & hw::CAP_SRQ_RESIZE) ? IBV_DEVICE_SRQ_RESIZE : 0) |
                          ((c.flags & hw::CAP_XRC) ? IBV_DEVICE_XRC : 0) | IBV_DEVICE_UD_AV_PORT_ENFORCE;
    a->max_sge = a->max_sge_rd = int(c.max_sge);
    a->max_cq = int(std::min<uint32_t>(c.max_cq, ctx->driver->num_cqs() - 1));
    a->max_cqe = int(c.max_cqe);
    a->max_mr = int(std::min<uint32_t>(c.max_mr, ctx->driver->num_mpts() - 1));
    a->max_pd = int(c.max_pd ? c.max_pd - 1 : 0);
    a->max_qp_rd_atom = int(c.max_qp_rd_atom);
    a->max_qp_init_rd_atom = int(c.max_qp_init_rd_atom);
    a->max_res_rd_atom = a->max_qp_rd_atom * a->max_qp;
    a->atomic_cap = (c.flags & hw::CAP_ATOMIC) ? IBV_ATOMIC_HCA : IBV_ATOMIC_NONE;
    a->max_ah = a->max_qp;
    a->phys_port_cnt = c.phys_port_cnt;
    a->local_ca_ack_delay = c.local_ca_ack_delay;
    if (const hw::port_info* p = ctx->driver->port(1)) a->max_pkeys = p->pkey_table_len;
    a->max_inline_data = std::min<uint32_t>(c.max_inline, hw::INLINE_LEN_MASK);
    a->max_mw = (c.flags & hw::CAP_MW) ? int(std::min<uint32_t>(c.max_mw, ctx->driver->num_mpts() - 1)) : 0;
    if (c.flags & hw::CAP_RD) {  // EECN 0 and RDD 0 are never handed out
        a->max_ee = int(c.max_ee - 1);
        a->max_rdd = int(c.max_rdd - 1);
        a->max_ee_rd_atom = a->max_qp_rd_atom;
        a->max_ee_init_rd_atom = a->max_qp_init_rd_atom;
        a->max_rd_msg_sz = c.max_rd_msg;
    }
    if (c.flags & hw::CAP_MCAST) {  // o10-33
        a->max_mcast_grp = int(c.max_mcast_grp);
        a->max_mcast_qp_attach = int(c.max_mcast_qp_attach);
        a->max_total_mcast_qp_attach = int(c.max_total_mcast_qp_attach);
    }
    if (c.flags & hw::CAP_SRQ) {
        a->max_srq = int(std::min<uint32_t>(c.max_srq, ctx->driver->num_srqs()));
        a->max_srq_wr = int(c.max_srq_wr);
        a->max_srq_sge = int(c.max_srq_sge);
    }
    a->reserved_lkey_supported = c.flags & hw::CAP_RESERVED_LKEY;
    a->reserved_lkey = a->reserved_lkey_supported ? c.reserved_lkey : 0;
    a->max_fast_reg_page_list_len = (c.flags & hw::CAP_SEND_INV) ? c.max_fast_reg_pages : 0;
    a->zbva = c.flags & hw::CAP_ZBVA;
    a->block_list = c.flags & hw::CAP_BLOCK_LIST;
    a->local_inv_fence = c.flags & hw::CAP_LOCAL_INV_FENCE;
    a->num_comp_vectors = ctx->num_comp_vectors;  // o10-54.2.1
    return 0;
}

int ibv_query_port(ibv_context* ctx, uint8_t port_num, ibv_port_attr* a) {
    if (!ctx || !a) return EINVAL;
    verb_cost(ctx);
    if (int e = ctx->driver->refresh_port(port_num)) return e;
    const hw::port_info& p = *ctx->driver->port(port_num);
    *a = ibv_port_attr{};
    a->state = ibv_port_state(p.state);
    a->max_mtu = ibv_mtu(p.max_mtu);
    a->active_mtu = ibv_mtu(p.active_mtu);
    a->gid_tbl_len = p.gid_table_len;
    a->max_msg_sz = uint32_t(MAX_MSG_BYTES);
    a->pkey_tbl_len = p.pkey_table_len;
    a->lid = p.lid;
    a->sm_lid = p.sm_lid;
    a->lmc = p.lmc;
    a->active_width = p.link_width;
    a->active_speed = p.link_speed;
    a->phys_state = p.state == IBV_PORT_DOWN ? 3 : 5;  // polling / link up
    a->link_layer = 1;                                 // InfiniBand
    a->bad_pkey_cntr = p.pkey_violations;              // o10-57
    a->qkey_viol_cntr = p.qkey_violations;
    return 0;
}

int ibv_query_pkey(ibv_context* ctx, uint8_t port_num, int index, uint16_t* pkey) {
    if (!ctx || !pkey) return EINVAL;
    verb_cost(ctx);
    const hw::port_info* p = ctx->driver->port(port_num);
    if (!p || index < 0 || index >= p->pkey_table_len) return EINVAL;
    uint16_t v = 0;
    const hw::cmd_status st =
        ctx->driver->exec(hw::CMD_QUERY_PKEY, port_num, uint32_t(index), nullptr, 0, &v, sizeof v);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    *pkey = v;
    return 0;
}

int ibv_query_gid(ibv_context* ctx, uint8_t port_num, int index, ibv_gid* gid) {
    if (!ctx || !gid) return EINVAL;
    verb_cost(ctx);
    const hw::port_info* p = ctx->driver->port(port_num);
    if (!p || index < 0 || index >= p->gid_table_len) return EINVAL;
    hw::gid_entry g{};
    const hw::cmd_status st =
        ctx->driver->exec(hw::CMD_QUERY_GID, port_num, uint32_t(index), nullptr, 0, &g, sizeof g);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    static_assert(sizeof gid->raw == sizeof g.raw);
    std::memcpy(gid->raw, g.raw, sizeof g.raw);
    return 0;
}

// ---------------------------------------------------------------- PD

ibv_pd* ibv_alloc_pd(ibv_context* ctx) {
    if (!ctx) return fail<ibv_pd>(EINVAL);
    verb_cost(ctx);
    uint32_t pdn;
    if (!ctx->driver->alloc_pdn(&pdn)) return fail<ibv_pd>(ENOMEM);
    ++ctx->pds;
    return new ibv_pd{ctx, pdn, 0};
}

int ibv_dealloc_pd(ibv_pd* pd) {
    if (!pd) return EINVAL;
    verb_cost(pd->context);
    if (pd->refs) return EBUSY;  // C10-11.2.1: the PD stays allocated
    pd->context->driver->free_pdn(pd->handle);
    --pd->context->pds;
    delete pd;
    return 0;
}

// ---------------------------------------------------------------- asynchronous events

int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event, uint64_t timeout_ns) {
    if (!ctx || !event) return EINVAL;
    hca_driver& drv = *ctx->driver;
    uint64_t deadline = drv.bus().now_ns() + timeout_ns;
    for (;;) {
        drv.process_eq();
        if (!ctx->async_events.empty()) {
            *event = ctx->async_events.front();
            ctx->async_events.pop_front();
            return 0;
        }
        if (ctx->async_handler) return EINVAL;  // new events go to the handler, never to this queue
        uint64_t now = drv.bus().now_ns();
        if (timeout_ns && now >= deadline) return ETIMEDOUT;
        drv.wait_eq(timeout_ns ? deadline - now : 0);
    }
}

void ibv_ack_async_event(ibv_async_event* event) {
    if (!event) return;
    if (event->event_type == IBV_EVENT_CQ_ERR) {
        if (event->element.cq) ++event->element.cq->async_events_completed;
    } else if (is_qp_event(event->event_type)) {
        if (event->element.qp) ++event->element.qp->events_completed;
    }
}

int ibv_set_async_event_handler(ibv_context* ctx, std::function<void(const ibv_async_event&)> handler) {
    if (!ctx) return EINVAL;
    verb_cost(ctx);
    // C10-138: what the HCA reported before the call goes where it went so far (the previous
    // handler, or the queue); only later events reach the new handler.
    ctx->driver->process_eq();
    ctx->async_handler = std::move(handler);  // C10-139: one per context, replaced
    if (!ctx->async_handler) {
        for (const ibv_async_event& ev : ctx->handler_events) ctx->async_events.push_back(ev);
        ctx->handler_events.clear();
    }
    return 0;
}

}  // namespace hcasim::verbs
