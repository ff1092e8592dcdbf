#include "firmware/verbs.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "firmware/owned_ring.h"
#include "firmware/qp_state_machine.h"
#include "tlm_if/mmio_map.h"
#include "tlm_if/wqe.h"

namespace hcasim::verbs {
namespace {

using fw::hca_driver;

constexpr uint64_t MAX_MSG_BYTES = 1ull << 31;  // C10-93: RC/UC maximum message size
constexpr uint32_t MAX_WQE_BYTES = 255 * 16;    // ds_count is 8 bits of 16-byte units

template <class T>
T* fail(int e) {
    errno = e;
    return nullptr;
}

void verb_cost(ibv_context* ctx) { ctx->driver->bus().cpu_cost(cpu_op::verb_call); }

uint8_t log2_ceil(uint64_t v) {
    uint8_t l = 0;
    while ((1ull << l) < v) ++l;
    return l;
}

void mmio64(ibv_context* ctx, hw::uar_reg reg, uint64_t value) {
    ctx->driver->bus().mmio_write(hca_driver::uar_offset(ctx->uar, reg), &value, 8);
}

hw::qp_context initial_context(const ibv_qp* qp) {
    // C10-21: the attributes a QP has on creation and after any transition to Reset.
    hw::qp_context c{};
    c.qpn = qp->qp_num;
    c.state = hw::QPS_RESET;
    c.transport = uint8_t(qp->qp_type);
    c.mtu = hw::MTU_256;
    c.port = 1;
    c.pd = qp->pd->handle;
    c.send_cqn = qp->send_cq->handle;
    c.recv_cqn = qp->recv_cq->handle;
    c.sq_base = qp->sq.pa;
    c.rq_base = qp->rq.pa;
    c.sq_log_size = qp->sq.log_size;
    c.sq_log_stride = qp->sq.log_stride;
    c.rq_log_size = qp->rq.log_size;
    c.rq_log_stride = qp->rq.log_stride;
    c.uar = qp->context->uar;
    c.sig_all = qp->sq_sig_all ? 1 : 0;
    c.max_send_wr = qp->sq.max_wr;
    c.max_recv_wr = qp->rq.max_wr;
    c.srqn = qp->srq ? qp->srq->handle + 1 : 0;
    c.mm_flags = uint8_t(((qp->create_flags & IBV_QP_CREATE_FAST_REG) ? hw::QP_MM_FAST_REG : 0) |
                         ((qp->create_flags & IBV_QP_CREATE_RESERVED_LKEY) ? hw::QP_MM_RESERVED_LKEY : 0));
    return c;
}

ibv_qp_attr initial_attr(const ibv_qp* qp) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RESET;
    a.cur_qp_state = IBV_QPS_RESET;
    a.path_mtu = IBV_MTU_256;
    a.port_num = 1;
    a.cap = {qp->sq.max_wr, qp->rq.max_wr, qp->sq.max_sge, qp->rq.max_sge, qp->max_inline_data};
    return a;
}

void reset_queues(ibv_qp* qp) {
    qp->sq.producer = qp->sq.completed = 0;
    qp->rq.producer = qp->rq.completed = 0;
}

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

/// Queues an event for the context: for its handler if one is registered, else for
/// ibv_get_async_event. Runs inside the driver's EQ loop, so no consumer code runs here.
void queue_event(ibv_context* ctx, const ibv_async_event& ev) {
    (ctx->async_handler ? ctx->handler_events : ctx->async_events).push_back(ev);
}

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

/// The driver's completion hook of a CQ without a channel: queues the event for the handler of
/// the CQ's identifier; false (the event stays pending in the driver) when there is none.
bool on_comp_event(ibv_cq* cq) {
    if (cq->error) return true;  // 10.8.5.2: not reported
    ibv_context* ctx = cq->context;
    if (!ctx->comp_handlers[size_t(cq->comp_vector)]) return false;
    ctx->comp_events.push_back(cq);
    return true;
}

bool is_srq_event(ibv_event_type t) { return t == IBV_EVENT_SRQ_ERR || t == IBV_EVENT_SRQ_LIMIT_REACHED; }

/// Drops the events of a QP, CQ or SRQ being destroyed that are still queued.
enum class object_kind { qp, cq, srq };
void drop_events(ibv_context* ctx, const void* object, object_kind kind) {
    auto of_object = [&](const ibv_async_event& ev) {
        switch (kind) {
        case object_kind::cq: return ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == object;
        case object_kind::srq: return is_srq_event(ev.event_type) && ev.element.srq == object;
        default: return is_qp_event(ev.event_type) && ev.element.qp == object;
        }
    };
    for (auto* q : {&ctx->async_events, &ctx->handler_events})
        q->erase(std::remove_if(q->begin(), q->end(), of_object), q->end());
    if (kind == object_kind::cq)
        ctx->comp_events.erase(std::remove(ctx->comp_events.begin(), ctx->comp_events.end(), object),
                               ctx->comp_events.end());
}

void on_device_event(ibv_context* ctx, const hw::eqe& e) {
    ibv_async_event ev{};
    if (!event_type_of(e, &ev.event_type)) return;
    ev.element.port_num = e.type == hw::EQE_PORT_CHANGE ? int(e.resource) : 0;
    queue_event(ctx, ev);
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

void on_srq_event(ibv_srq* srq, const hw::eqe& e) {
    ibv_async_event ev{};
    if (!event_type_of(e, &ev.event_type)) return;
    if (e.type == hw::EQE_SRQ_ERROR) srq->error = true;  // 10.2.9.5: left only by Destroy SRQ
    ev.element.srq = srq;
    queue_event(srq->context, ev);
}

void on_qp_event(ibv_qp* qp, const hw::eqe& e) {
    ibv_async_event ev{};
    if (event_type_of(e, &ev.event_type)) {
        ev.element.qp = qp;
        queue_event(qp->context, ev);
    }
    switch (e.type) {
    case hw::EQE_QP_FATAL:
    case hw::EQE_QP_REQ_ERR:
    case hw::EQE_QP_ACCESS_ERR:
        qp->state = IBV_QPS_ERR;  // the HCA moved the QP to Error on its own
        qp->hw_ctx.state = hw::QPS_ERR;
        break;
    case hw::EQE_SQ_DRAINED:
        qp->attr.sq_draining = 0;
        qp->hw_ctx.sq_draining = 0;
        break;
    default: break;
    }
}

bool transport_supported(const hw::hca_caps& caps, ibv_qp_type t) {
    switch (t) {
    case IBV_QPT_RC: return caps.flags & hw::CAP_RC;
    case IBV_QPT_UC: return caps.flags & hw::CAP_UC;
    case IBV_QPT_UD: return caps.flags & hw::CAP_UD;
    case IBV_QPT_SMI:
    case IBV_QPT_GSI: return false;  // ibv_create_qp runs them as UD
    }
    return false;
}

bool zero_based(int access) { return access & IBV_ACCESS_ZERO_BASED; }

/// Rights of a registration (region or fast register); 0 or EINVAL.
int check_mr_access(const hw::hca_caps& caps, int access) {
    if (access & ~0x3F) return EINVAL;
    // C10-48: remote write / remote atomic need local write.
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
        return EINVAL;
    if ((access & IBV_ACCESS_REMOTE_ATOMIC) && !(caps.flags & hw::CAP_ATOMIC)) return EINVAL;
    if ((access & IBV_ACCESS_MW_BIND) && !(caps.flags & hw::CAP_MW)) return EINVAL;
    if (zero_based(access) && !(caps.flags & hw::CAP_ZBVA)) return EINVAL;
    return 0;
}

/// WQE opcode for a send WR on a transport, or -1 if the transport cannot carry it.
int wqe_opcode_for(const hw::hca_caps& caps, ibv_qp_type t, ibv_wr_opcode op) {
    switch (op) {
    case IBV_WR_SEND: return hw::WQE_OP_SEND;
    case IBV_WR_SEND_WITH_IMM: return hw::WQE_OP_SEND_IMM;
    case IBV_WR_RDMA_WRITE: return t == IBV_QPT_UD ? -1 : hw::WQE_OP_RDMA_WRITE;  // C10-84
    case IBV_WR_RDMA_WRITE_WITH_IMM: return t == IBV_QPT_UD ? -1 : hw::WQE_OP_RDMA_WRITE_IMM;
    case IBV_WR_RDMA_READ:  // C10-83: RC only
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_RDMA_READ) ? hw::WQE_OP_RDMA_READ : -1;
    case IBV_WR_ATOMIC_CMP_AND_SWP:  // o10-46: atomics on RC only
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_ATOMIC) ? hw::WQE_OP_CMP_SWAP : -1;
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_ATOMIC) ? hw::WQE_OP_FETCH_ADD : -1;
    case IBV_WR_SEND_WITH_INV:  // o10-38.2.1: on RC
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_SEND_INV : -1;
    case IBV_WR_LOCAL_INV:  // 10.7.2.5: RC, UC (RD, XRC)
        return t != IBV_QPT_UD && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_LOCAL_INV : -1;
    case IBV_WR_BIND_MW:  // C10-89: RC and UC
        return t != IBV_QPT_UD && (caps.flags & hw::CAP_MW) ? hw::WQE_OP_BIND_MW : -1;
    case IBV_WR_FAST_REG_MR:  // RC only in hcasim (10.7.2.6 would also allow UC)
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_FAST_REG : -1;
    default: return -1;
    }
}

/// Memory management WRs: no data, one segment of their own (or none).
bool is_mem_mgmt(ibv_wr_opcode op) {
    return op == IBV_WR_LOCAL_INV || op == IBV_WR_BIND_MW || op == IBV_WR_FAST_REG_MR;
}

bool is_atomic(ibv_wr_opcode op) {
    return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
bool has_raddr(ibv_wr_opcode op) {
    return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ ||
           is_atomic(op);
}

template <class T>
void put(uint8_t* buf, uint32_t* off, const T& v) {
    std::memcpy(buf + *off, &v, sizeof(T));
    *off += sizeof(T);
}

void put_data_seg(uint8_t* buf, uint32_t* off, const ibv_sge& s) {
    hw::wqe_data_seg d{};
    d.byte_count = s.length == MAX_MSG_BYTES ? 0 : s.length;  // 0 encodes 2^31
    d.lkey = s.lkey;
    d.addr = s.addr;
    put(buf, off, d);
}

/// Whether the send queue takes a WQE now (state, room); 0 or errno.
int check_sq_post(const ibv_qp* qp) {
    // C10-22, C10-25, C10-29, C10-96: no send posts before RTS.
    if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR) return EINVAL;
    if (qp->sq.producer - qp->sq.completed >= qp->sq.max_wr) return ENOMEM;
    return 0;
}

constexpr unsigned MW_ACCESS_BITS =
    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_ZERO_BASED;

/// Shape of a bind (verb or WR): QP type, flags, rights bits, length field; 0 or EINVAL. The
/// region's rights, PD and bounds are the HCA's to check (completion errors).
int check_bind_shape(const ibv_qp* qp, const ibv_mw_bind_info& b, unsigned send_flags) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    if (qp->qp_type == IBV_QPT_UD) return EINVAL;  // C10-89: binds on RC and UC
    if (send_flags & ~unsigned(IBV_SEND_SIGNALED | IBV_SEND_FENCE)) return EINVAL;
    if (b.mw_access_flags & ~MW_ACCESS_BITS) return EINVAL;
    if ((b.mw_access_flags & IBV_ACCESS_ZERO_BASED) && !(caps.flags & hw::CAP_ZBVA)) return EINVAL;
    if (b.length > UINT32_MAX) return EINVAL;  // wqe_bind_seg::length is 32 bits
    if (b.length && !b.mr) return EINVAL;
    if (b.mr && b.mr->context->driver != qp->context->driver) return EINVAL;
    return 0;
}

/// Immediate errors of a memory management WR (LOCAL_INV, BIND_MW, FAST_REG_MR).
int check_mem_mgmt_wr(const ibv_qp* qp, const ibv_send_wr* wr) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    if (wr->send_flags & IBV_SEND_INLINE) return EINVAL;  // no data to inline
    if (wr->opcode == IBV_WR_BIND_MW) {
        const ibv_mw* mw = wr->bind_mw.mw;
        if (!mw || mw->context != qp->context) return EINVAL;
        if (mw->type != IBV_MW_TYPE_2) return EINVAL;          // o10-37.2.34: type 1 binds by the verb
        if (wr->bind_mw.bind_info.length == 0) return EINVAL;  // o10-37.2.40: no zero-length type 2 bind
        return check_bind_shape(qp, wr->bind_mw.bind_info, wr->send_flags & ~unsigned(IBV_SEND_SOLICITED));
    }
    if (wr->opcode == IBV_WR_FAST_REG_MR) {
        const auto& f = wr->fast_reg;
        // Only an ibv_alloc_lkey region has the page-list buffer the WQE points the HCA at.
        if (!f.mr || !f.mr->page_list_pa || f.mr->context->driver != qp->context->driver) return EINVAL;
        if (f.page_count == 0 || f.page_count > f.mr->page_list_max || !f.page_list) return EINVAL;
        if (f.length == 0) return EINVAL;
        if (int e = check_mr_access(caps, f.access)) return e;
    }
    return 0;
}

/// Checks one send WR (immediate errors); returns 0 or errno.
int check_send_wr(ibv_qp* qp, const ibv_send_wr* wr, uint64_t* total) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    if (int e = check_sq_post(qp)) return e;
    *total = 0;
    if (wqe_opcode_for(caps, qp->qp_type, wr->opcode) < 0) return EINVAL;
    if (is_mem_mgmt(wr->opcode)) return check_mem_mgmt_wr(qp, wr);  // their SGEs are ignored
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->sq.max_sge) return EINVAL;
    if (wr->num_sge > 0 && !wr->sg_list) return EINVAL;
    for (int i = 0; i < wr->num_sge; ++i) *total += wr->sg_list[i].length;
    if (*total > MAX_MSG_BYTES) return EINVAL;  // C10-93
    if (wr->send_flags & IBV_SEND_INLINE) {
        if (wr->opcode == IBV_WR_RDMA_READ || is_atomic(wr->opcode)) return EINVAL;
        if (*total > qp->max_inline_data) return EINVAL;
    }
    if (is_atomic(wr->opcode)) {
        if (wr->wr.atomic.remote_addr & 7) return EINVAL;  // o10-43
        if (*total != 8) return EINVAL;
    }
    if (qp->qp_type == IBV_QPT_UD) {
        const ibv_ah* ah = wr->wr.ud.ah;
        if (!ah) return EINVAL;
        if (ah->pd != qp->pd) return EINVAL;                                           // C10-10
        if (ah->attr.port_num && ah->attr.port_num != qp->hw_ctx.port) return EINVAL;  // o10-2.1.1
        if (wr->wr.ud.remote_qpn > 0xFFFFFFu) return EINVAL;
    }
    return 0;
}

/// Control segment of the next send WQE of qp.
hw::wqe_ctrl_seg make_ctrl(const ibv_qp* qp, uint8_t opcode, unsigned send_flags, uint64_t wr_id) {
    hw::wqe_ctrl_seg ctrl{};
    ctrl.opcode = opcode;
    if (qp->sq_sig_all || (send_flags & IBV_SEND_SIGNALED)) ctrl.flags |= hw::WQE_FLAG_SIGNALED;
    if (send_flags & IBV_SEND_FENCE) ctrl.flags |= hw::WQE_FLAG_FENCE;
    ctrl.qpn = qp->qp_num;
    ctrl.wqe_index = uint16_t(qp->sq.producer);
    ctrl.wr_id = wr_id;
    return ctrl;
}

/// Sets ds_count of the WQE in buf from its size; returns the size rounded to 16 bytes.
uint32_t finish_wqe(uint8_t* buf, uint32_t off) {
    off = hw::align16(off);
    buf[offsetof(hw::wqe_ctrl_seg, ds_count)] = uint8_t(off / 16);
    return off;
}

/// Bind WQE (verb or WR) into buf; returns its size.
uint32_t build_bind_wqe(const ibv_qp* qp, uint64_t wr_id, unsigned send_flags, uint32_t mw_key,
                        uint32_t new_key, const ibv_mw_bind_info& b, uint32_t bind_flags, uint8_t* buf) {
    uint32_t off = 0;
    put(buf, &off, make_ctrl(qp, hw::WQE_OP_BIND_MW, send_flags, wr_id));
    hw::wqe_bind_seg s{};
    s.mw_key = mw_key;
    s.new_key = new_key;
    s.mr_lkey = b.mr ? b.mr->lkey : 0;
    s.access = b.mw_access_flags;
    s.addr = b.addr;
    s.length = uint32_t(b.length);
    s.bind_flags = bind_flags;
    put(buf, &off, s);
    return finish_wqe(buf, off);
}

/// Fast register WQE into buf (copies the page list to the L_Key's buffer first); returns its size.
uint32_t build_fast_reg_wqe(const ibv_qp* qp, const ibv_send_wr* wr, uint8_t* buf) {
    const auto& f = wr->fast_reg;
    host_bus& bus = qp->context->driver->bus();
    bus.mem_write(f.mr->page_list_pa, f.page_list, size_t(f.page_count) * sizeof(uint64_t));
    bus.cpu_cost(cpu_op::memcpy_64b, uint32_t((uint64_t(f.page_count) * sizeof(uint64_t) + 63) / 64));
    uint32_t off = 0;
    put(buf, &off, make_ctrl(qp, hw::WQE_OP_FAST_REG, wr->send_flags, wr->wr_id));
    hw::wqe_fast_reg_seg s{};
    s.lkey = hw::make_key(f.mr->handle, f.key_byte);
    s.access = uint32_t(f.access);
    s.iova = f.iova;
    s.length = f.length;
    s.page_list_pa = f.mr->page_list_pa;
    s.page_count = f.page_count;
    s.page_offset = f.page_offset;
    s.log_page_size = f.log_page_size;
    put(buf, &off, s);
    return finish_wqe(buf, off);
}

/// Key a type 2 bind WR gives its window: the window's index, the consumer's key byte.
uint32_t bind_wr_key(const ibv_send_wr* wr) {
    return hw::make_key(hw::key_index(wr->bind_mw.mw->rkey), hw::key_byte(wr->bind_mw.rkey));
}

/// Builds a send WQE into buf; returns its size in bytes (16-byte multiple) or 0 on EFAULT.
uint32_t build_send_wqe(ibv_qp* qp, const ibv_send_wr* wr, uint64_t total, uint8_t* buf) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    uint8_t opcode = uint8_t(wqe_opcode_for(caps, qp->qp_type, wr->opcode));
    switch (wr->opcode) {
    case IBV_WR_BIND_MW:
        return build_bind_wqe(qp, wr->wr_id, wr->send_flags, wr->bind_mw.mw->rkey, bind_wr_key(wr),
                              wr->bind_mw.bind_info, 0, buf);
    case IBV_WR_FAST_REG_MR: return build_fast_reg_wqe(qp, wr, buf);
    case IBV_WR_LOCAL_INV: {
        uint32_t off = 0;
        hw::wqe_ctrl_seg ctrl = make_ctrl(qp, opcode, wr->send_flags, wr->wr_id);
        ctrl.imm = wr->invalidate_rkey;
        put(buf, &off, ctrl);
        return finish_wqe(buf, off);
    }
    default: break;
    }
    uint32_t off = 0;
    hw::wqe_ctrl_seg ctrl = make_ctrl(qp, opcode, wr->send_flags, wr->wr_id);
    if (wr->send_flags & IBV_SEND_SOLICITED) ctrl.flags |= hw::WQE_FLAG_SOLICITED;
    bool inl = wr->send_flags & IBV_SEND_INLINE;
    if (inl) ctrl.flags |= hw::WQE_FLAG_INLINE;
    ctrl.imm = wr->opcode == IBV_WR_SEND_WITH_INV ? wr->invalidate_rkey : wr->imm_data;
    put(buf, &off, ctrl);
    if (has_raddr(wr->opcode)) {
        hw::wqe_raddr_seg r{};
        r.remote_va = is_atomic(wr->opcode) ? wr->wr.atomic.remote_addr : wr->wr.rdma.remote_addr;
        r.rkey = is_atomic(wr->opcode) ? wr->wr.atomic.rkey : wr->wr.rdma.rkey;
        put(buf, &off, r);
    }
    if (is_atomic(wr->opcode)) {
        hw::wqe_atomic_seg a{};
        if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
            a.swap_add = wr->wr.atomic.swap;
            a.compare = wr->wr.atomic.compare_add;
        } else {
            a.swap_add = wr->wr.atomic.compare_add;
        }
        put(buf, &off, a);
    }
    if (qp->qp_type == IBV_QPT_UD) {
        const ibv_ah_attr& ah = wr->wr.ud.ah->attr;
        hw::wqe_ud_seg u{};
        u.dest_qpn = wr->wr.ud.remote_qpn;
        // C10-15: a Q_Key with the high-order bit set means the QP's own Q_Key; the HCA applies
        // that rule when it sends (so a Modify QP between post and send takes effect).
        u.qkey = wr->wr.ud.remote_qkey;
        u.dlid = ah.dlid;
        u.sl = ah.sl;
        u.src_path_bits = ah.src_path_bits;
        u.grh = ah.is_global ? 1 : 0;
        u.sgid_index = ah.grh.sgid_index;
        u.hop_limit = ah.grh.hop_limit;
        u.tclass = ah.grh.traffic_class;
        u.flow_label = ah.grh.flow_label & 0xFFFFFu;
        std::memcpy(u.dgid, ah.grh.dgid.raw, 16);
        put(buf, &off, u);
    }
    if (inl) {
        hw::wqe_inline_seg h{hw::INLINE_SEG_FLAG | uint32_t(total)};
        uint32_t start = off;
        put(buf, &off, h);
        fw::address_space& as = *qp->context->as;
        for (int i = 0; i < wr->num_sge; ++i) {
            const ibv_sge& s = wr->sg_list[i];
            if (s.length && !as.read(s.addr, buf + off, s.length)) return 0;
            off += s.length;
        }
        off = start + hw::align16(off - start);
        qp->context->driver->bus().cpu_cost(cpu_op::memcpy_64b, uint32_t((total + 63) / 64));
    } else {
        for (int i = 0; i < wr->num_sge; ++i)
            if (wr->sg_list[i].length) put_data_seg(buf, &off, wr->sg_list[i]);  // zero length: no segment
    }
    return finish_wqe(buf, off);
}

/// Writes a built WQE into the next send slot.
void put_send_wqe(ibv_qp* qp, const uint8_t* buf, uint32_t bytes) {
    host_bus& bus = qp->context->driver->bus();
    uint64_t slot =
        qp->sq.pa + (uint64_t(qp->sq.producer & ((1u << qp->sq.log_size) - 1)) << qp->sq.log_stride);
    // The HCA reads the slot only after the doorbell: the store need not wait for the costs
    // charged so far, which the doorbell's MMIO write waits for in one go.
    bus.mem_write_early(slot, buf, bytes);
    bus.cpu_cost_deferred(cpu_op::build_wqe);
    ++qp->sq.producer;
}

/// Tells the HCA about `posted` (>= 1) new send WQEs, the last of which is last[0, last_bytes).
void ring_send(ibv_qp* qp, uint32_t posted, const uint8_t* last, uint32_t last_bytes) {
    ibv_context* ctx = qp->context;
    uint32_t window = (last_bytes + hw::WQE_BASIC_BLOCK - 1) & ~(hw::WQE_BASIC_BLOCK - 1);
    if (ctx->driver->options().use_inline_window && posted == 1 && window <= hw::INLINE_WINDOW_BYTES) {
        // The window write is the doorbell for this WQE (producer = wqe_index + 1).
        ctx->driver->bus().mmio_write(hca_driver::uar_offset(ctx->uar, hw::UAR_INLINE_WQE), last, window);
    } else {
        mmio64(ctx, hw::UAR_SQ_DOORBELL, hw::sq_doorbell(qp->qp_num, uint16_t(qp->sq.producer)));
    }
}

/// Software state a posted WR changes: the keys a bind or fast register WR gives.
void after_post(const ibv_send_wr* wr) {
    if (wr->opcode == IBV_WR_BIND_MW) {
        wr->bind_mw.mw->rkey = bind_wr_key(wr);
    } else if (wr->opcode == IBV_WR_FAST_REG_MR) {
        ibv_mr* mr = wr->fast_reg.mr;
        mr->lkey = mr->rkey = hw::make_key(mr->handle, wr->fast_reg.key_byte);
    }
}

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

int check_ah_attr(ibv_context* ctx, const ibv_ah_attr& a) {
    const hw::port_info* pi = ctx->driver->port(a.port_num ? a.port_num : 1);
    if (!pi) return EINVAL;
    if (a.sl > 15) return EINVAL;
    if (a.is_global && (a.grh.sgid_index >= pi->gid_table_len || a.grh.flow_label > 0xFFFFFu)) return EINVAL;
    // A multicast destination needs the GRH that carries its MGID (IBA 8.4.1).
    if (a.dlid >= 0xC000 && a.dlid != 0xFFFF && !(a.is_global && a.grh.dgid.raw[0] == 0xFF)) return EINVAL;
    return 0;
}

}  // namespace

uint32_t send_wqe_max_bytes(ibv_qp_type t, uint32_t max_send_sge, uint32_t max_inline) {
    uint32_t addr = t == IBV_QPT_UD   ? sizeof(hw::wqe_ud_seg)
                    : t == IBV_QPT_RC ? sizeof(hw::wqe_raddr_seg) + sizeof(hw::wqe_atomic_seg)
                                      : sizeof(hw::wqe_raddr_seg);
    uint32_t data = std::max<uint32_t>(max_send_sge * sizeof(hw::wqe_data_seg),
                                       max_inline ? hw::align16(sizeof(hw::wqe_inline_seg) + max_inline) : 0);
    uint32_t bytes = sizeof(hw::wqe_ctrl_seg) + addr + data;
    // Connected QPs also carry memory management WQEs (bind 32 B, fast register 48 B segment).
    if (t != IBV_QPT_UD)
        bytes = std::max<uint32_t>(bytes, sizeof(hw::wqe_ctrl_seg) + std::max(sizeof(hw::wqe_bind_seg),
                                                                              sizeof(hw::wqe_fast_reg_seg)));
    return bytes;
}

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
    if (ctx->pds || ctx->cqs || ctx->qps || ctx->srqs || ctx->mrs || ctx->mws || ctx->ahs || ctx->channels)
        return EBUSY;
    if (ctx->delivering) return EBUSY;  // called from its own async event handler
    for (const auto& [va, len] : ctx->mapped) ctx->as->unpin(va, len);  // ibv_map_pages ranges
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
                          IBV_DEVICE_UD_AV_PORT_ENFORCE;
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

// ---------------------------------------------------------------- memory regions

namespace {

/// A region length the HCA accepts; 0 or EINVAL.
int check_mr_length(const hw::hca_caps& caps, uint64_t length) {
    if (length == 0 || (caps.max_mr_size && length > caps.max_mr_size)) return EINVAL;
    return 0;
}

/// True when [start, start + length) wraps around the 64-bit address space.
bool wraps(uint64_t start, uint64_t length) { return length && start + (length - 1) < start; }

/// Writes MTT entries first.. with values[i] | MTT_PRESENT, WRITE_MTT_MAX per command.
hw::cmd_status write_mtt(hca_driver& drv, uint64_t first, const std::vector<uint64_t>& values) {
    uint8_t buf[hw::CMD_IN_BYTES];
    for (size_t done = 0; done < values.size();) {
        uint32_t n = uint32_t(std::min<size_t>(hw::WRITE_MTT_MAX, values.size() - done));
        hw::write_mtt_in h{};
        h.first_index = first + done;
        h.count = n;
        std::memcpy(buf, &h, sizeof h);
        for (uint32_t i = 0; i < n; ++i) {
            hw::mtt_entry m{values[done + i] | hw::MTT_PRESENT};
            std::memcpy(buf + sizeof h + i * sizeof m, &m, sizeof m);
        }
        hw::cmd_status st = drv.exec(hw::CMD_WRITE_MTT, 0, 0, buf, sizeof h + n * sizeof(hw::mtt_entry));
        if (st != hw::CMD_OK) return st;
        done += n;
    }
    return hw::CMD_OK;
}

/// Pins [addr, addr+length) of the context's process, allocates and writes its MTT run; 0 or
/// errno, nothing left behind on failure.
int build_va_translation(ibv_context* ctx, uint64_t addr, uint64_t length, uint64_t* first, uint64_t* n) {
    hca_driver& drv = *ctx->driver;
    std::vector<uint64_t> pages;
    if (int e = ctx->as->pin(addr, length, &pages)) return e;  // C10-52.2.1
    if (!drv.alloc_mtt(pages.size(), first)) {
        ctx->as->unpin(addr, length);
        return ENOMEM;
    }
    hw::cmd_status st = write_mtt(drv, *first, pages);
    if (st != hw::CMD_OK) {
        drv.free_mtt(*first, pages.size());
        ctx->as->unpin(addr, length);
        return fw::cmd_errno(st);
    }
    *n = pages.size();
    return 0;
}

/// Drops an MR's use of its MTT run: the last user frees it and unpins its pages.
void drop_translation(hca_driver& drv, fw::address_space* as, uint64_t first, uint64_t n, uint64_t pin_addr,
                      uint64_t pin_len) {
    if (drv.release_mtt(first, n) && as && pin_len) as->unpin(pin_addr, pin_len);
}

/// MPT entry of a Valid memory region.
hw::mpt_entry region_entry(uint32_t key, const ibv_pd* pd, int access, uint64_t iova, uint64_t length) {
    hw::mpt_entry m{};
    m.key = key;
    m.pd = pd->handle;
    m.access = uint32_t(access);
    m.state = hw::MPT_STATE_VALID;
    m.type = hw::MPT_TYPE_MR;
    m.log_page_size = fw::PAGE_SHIFT;
    m.start_va = zero_based(access) ? 0 : iova;  // ZBVA: requests name offsets from 0
    m.length = length;
    return m;
}

/// The ibv_mr of an MPT entry the HCA now holds; counts it on its PD and context.
ibv_mr* new_mr(ibv_pd* pd, const hw::mpt_entry& m, uint64_t addr, uint64_t length, int access) {
    auto* mr = new ibv_mr{};
    mr->context = pd->context;
    mr->pd = pd;
    mr->addr = addr;
    mr->length = length;
    mr->handle = hw::key_index(m.key);
    mr->lkey = mr->rkey = m.key;
    mr->access = access;
    mr->mtt_first = m.mtt_base;
    mr->mtt_count = m.mtt_reserved;
    mr->hw_mpt = m;
    ++pd->refs;
    ++pd->context->mrs;
    return mr;
}

/// HCA-maintained fields of an entry, copied into one software is about to write back.
void keep_hca_fields(hw::mpt_entry* m, const hw::mpt_entry& held) {
    m->bound_mws = held.bound_mws;
    m->mr_index = held.mr_index;
    m->qpn = held.qpn;
    m->mr_va = held.mr_va;
}

/// After the HCA took a reregistration: the ibv_mr follows (PD counts, address, length, rights, keys).
void commit_rereg(ibv_mr* mr, const hw::mpt_entry& m, ibv_pd* new_pd, uint64_t new_addr, uint64_t new_len,
                  int new_access) {
    if (new_pd != mr->pd) {
        --mr->pd->refs;
        ++new_pd->refs;
        mr->pd = new_pd;
    }
    mr->addr = new_addr;
    mr->length = new_len;
    mr->access = new_access;
    mr->lkey = mr->rkey = m.key;
    mr->hw_mpt = m;
}

/// The checks of Register / Reregister Physical MR on a page or block list; 0 or EINVAL.
int check_phys_attr(const hw::hca_caps& caps, const ibv_phys_mr_attr& a) {
    if (int e = check_mr_access(caps, a.access)) return e;
    if (check_mr_length(caps, a.length) || !a.list || a.count == 0) return EINVAL;
    if (a.key_byte < -1 || a.key_byte > 255) return EINVAL;
    if (!zero_based(a.access) && wraps(a.iova, a.length)) return EINVAL;
    if (a.block_list) {
        // o10-37.2.9: equal blocks of any size and alignment.
        if (!(caps.flags & hw::CAP_BLOCK_LIST) || a.size == 0 || a.size > UINT32_MAX) return EINVAL;
    } else {
        if (a.size < fw::PAGE_BYTES || (a.size & (a.size - 1)) || !(caps.page_size_cap & a.size))
            return EINVAL;
        for (uint32_t i = 0; i < a.count; ++i)
            if (a.list[i] & (a.size - 1)) return EINVAL;  // C10-53.2.1
    }
    for (uint32_t i = 0; i < a.count; ++i)
        if (a.list[i] & hw::MTT_PRESENT) return EINVAL;  // not a host physical address
    // The region [first_offset, first_offset + length) must lie in the listed pages / blocks.
    if (a.size * a.count / a.count != a.size || a.first_offset >= a.size ||
        a.length > a.size * a.count - a.first_offset)
        return EINVAL;
    return 0;
}

/// Allocates and writes the MTT run of a checked physical list; 0 or errno, nothing left behind.
int build_phys_translation(hca_driver& drv, const ibv_phys_mr_attr& a, uint64_t* first) {
    if (!drv.alloc_mtt(a.count, first)) return ENOMEM;
    hw::cmd_status st = write_mtt(drv, *first, std::vector<uint64_t>(a.list, a.list + a.count));
    if (st != hw::CMD_OK) {
        drv.free_mtt(*first, a.count);
        return fw::cmd_errno(st);
    }
    return 0;
}

/// The translation fields of an MPT entry over a physical list written at MTT index `first`.
void set_phys_translation(hw::mpt_entry* m, const ibv_phys_mr_attr& a, uint64_t first) {
    m->flags = uint8_t((m->flags & ~(hw::MPT_PHYS | hw::MPT_BLOCK_LIST | hw::MPT_SHARED)) | hw::MPT_PHYS |
                       (a.block_list ? hw::MPT_BLOCK_LIST : 0));
    uint8_t log_size = 0;
    while ((1ull << log_size) < a.size) ++log_size;
    m->log_page_size = a.block_list ? fw::PAGE_SHIFT : log_size;  // unused with a block list
    m->block_size = a.block_list ? uint32_t(a.size) : 0;
    m->mtt_base = first;
    m->mtt_count = m->mtt_reserved = a.count;
    m->page_offset = a.first_offset;
}

}  // namespace

ibv_mr* ibv_reg_mr(ibv_pd* pd, uint64_t addr, size_t length, int access) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (int e = check_mr_access(drv.caps(), access)) return fail<ibv_mr>(e);
    if (check_mr_length(drv.caps(), length) || wraps(addr, length)) return fail<ibv_mr>(EINVAL);
    // C10-45: all or nothing, so every failure below rolls back what was done.
    uint64_t first = 0, n = 0;
    if (int e = build_va_translation(ctx, addr, length, &first, &n)) return fail<ibv_mr>(e);
    uint32_t index;
    uint8_t key_byte;  // CI-owned (o10-37.2.2, o10-37.2.4)
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drop_translation(drv, ctx->as, first, n, addr, length);
        return fail<ibv_mr>(ENOMEM);
    }
    hw::mpt_entry m = region_entry(hw::make_key(index, key_byte), pd, access, addr, length);
    m.mtt_base = first;
    m.mtt_count = m.mtt_reserved = uint32_t(n);
    m.page_offset = uint32_t(addr % fw::PAGE_BYTES);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drop_translation(drv, ctx->as, first, n, addr, length);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    ibv_mr* mr = new_mr(pd, m, addr, length, access);
    mr->pin_as = ctx->as;
    mr->pin_addr = addr;
    mr->pin_len = length;
    return mr;
}

ibv_mr* ibv_reg_phys_mr(ibv_pd* pd, const ibv_phys_mr_attr* a) {
    if (!pd || !a) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (int e = check_phys_attr(caps, *a)) return fail<ibv_mr>(e);
    uint64_t first;
    if (int e = build_phys_translation(drv, *a, &first)) return fail<ibv_mr>(e);
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.free_mtt(first, a->count);
        return fail<ibv_mr>(ENOMEM);
    }
    if (a->key_byte >= 0) key_byte = uint8_t(a->key_byte);  // the consumer's choice (o10-37.2.2)
    hw::mpt_entry m = region_entry(hw::make_key(index, key_byte), pd, a->access, a->iova, a->length);
    set_phys_translation(&m, *a, first);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drv.free_mtt(first, a->count);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    ibv_mr* mr = new_mr(pd, m, a->iova, a->length, a->access);
    mr->page_list_max = a->count;  // o10-37.2.10
    return mr;
}

ibv_mr* ibv_reg_shared_mr(ibv_mr* src, ibv_pd* pd, int access, uint64_t iova) {
    if (!src || !pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (src->context->driver != &drv) return fail<ibv_mr>(EINVAL);  // another HCA's region
    // An Allocate L_Key region has no fixed pages to share (they change with each Fast Register).
    if (src->hw_mpt.flags & hw::MPT_FAST_REG) return fail<ibv_mr>(EINVAL);
    if (int e = check_mr_access(drv.caps(), access)) return fail<ibv_mr>(e);
    if (!zero_based(access) && wraps(iova, src->length)) return fail<ibv_mr>(EINVAL);
    uint32_t index;
    uint8_t key_byte;  // CI-owned (o10-37.2.2)
    if (!drv.alloc_mpt(&index, &key_byte)) return fail<ibv_mr>(ENOMEM);
    const hw::mpt_entry& s = src->hw_mpt;
    hw::mpt_entry m = region_entry(hw::make_key(index, key_byte), pd, access, iova, src->length);
    m.flags = uint8_t((s.flags & (hw::MPT_PHYS | hw::MPT_BLOCK_LIST)) | hw::MPT_SHARED);
    m.log_page_size = s.log_page_size;
    m.block_size = s.block_size;
    m.mtt_base = s.mtt_base;  // the same translation entries as the source
    m.mtt_count = s.mtt_count;
    m.mtt_reserved = s.mtt_reserved;
    m.page_offset = s.page_offset;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    if (!(s.flags & hw::MPT_SHARE_SRC)) {
        // Mark the source: it cannot be invalidated or fast-registered any more (o10-37.2.13).
        hw::mpt_entry held{};
        st = drv.exec(hw::CMD_QUERY_MPT, src->handle, 0, nullptr, 0, &held, sizeof held);
        if (st == hw::CMD_OK) {
            held.flags |= hw::MPT_SHARE_SRC;
            st = drv.exec(hw::CMD_CREATE_MPT, src->handle, hw::MPT_MODIFY, &held, sizeof held);
        }
        if (st != hw::CMD_OK) {
            drv.exec(hw::CMD_DESTROY_MPT, index, 0, nullptr, 0);
            drv.free_mpt(index);
            return fail<ibv_mr>(st == hw::CMD_BAD_STATE ? EBUSY : fw::cmd_errno(st));
        }
        src->hw_mpt = held;
    }
    drv.retain_mtt(src->mtt_first);
    ibv_mr* mr = new_mr(pd, m, iova, src->length, access);
    mr->page_list_max = src->page_list_max;
    mr->pin_as = src->pin_as;  // the pages stay pinned while either region uses them
    mr->pin_addr = src->pin_addr;
    mr->pin_len = src->pin_len;
    return mr;
}

int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, uint64_t addr, size_t length, int access) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    const int all = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    if (flags == 0 || (flags & ~all)) return EINVAL;
    if (mr->hw_mpt.flags & hw::MPT_FAST_REG) return EINVAL;  // Allocate L_Key regions: Fast Register
    bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
    if (!new_pd || new_pd->context != ctx) return EINVAL;
    int new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access : mr->access;
    if (int e = check_mr_access(drv.caps(), new_access)) return e;
    uint64_t new_addr = translate ? addr : mr->addr, new_len = translate ? length : mr->length;
    if (translate && (check_mr_length(drv.caps(), length) || wraps(addr, length))) return EINVAL;
    if (!zero_based(new_access) && wraps(new_addr, new_len)) return EINVAL;
    // Atomic (C10-45): build everything new first; the old registration goes only after the HCA
    // took the new one in one MPT_MODIFY.
    uint64_t first = 0, n = 0;
    if (translate) {
        if (int e = build_va_translation(ctx, addr, length, &first, &n)) return e;
    }
    auto undo = [&](int e) {
        if (translate) drop_translation(drv, ctx->as, first, n, addr, length);
        return e;
    };
    hw::mpt_entry held{};
    hw::cmd_status st = drv.exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &held, sizeof held);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    hw::mpt_entry m = mr->hw_mpt;
    keep_hca_fields(&m, held);
    m.flags = uint8_t(m.flags | (held.flags & hw::MPT_SHARE_SRC));
    // CI-owned (o10-37.2.2): fresh, or the region's own with driver_options::rereg_keeps_keys.
    m.key =
        drv.options().rereg_keeps_keys ? mr->lkey : hw::make_key(mr->handle, drv.next_key_byte(mr->handle));
    m.pd = new_pd->handle;
    m.access = uint32_t(new_access);
    m.state = hw::MPT_STATE_VALID;
    m.start_va = zero_based(new_access) ? 0 : new_addr;
    m.length = new_len;
    if (translate) {  // now a virtual registration of its own pages
        m.flags &= uint8_t(~(hw::MPT_PHYS | hw::MPT_BLOCK_LIST | hw::MPT_SHARED));
        m.log_page_size = fw::PAGE_SHIFT;
        m.block_size = 0;
        m.mtt_base = first;
        m.mtt_count = m.mtt_reserved = uint32_t(n);
        m.page_offset = uint32_t(addr % fw::PAGE_BYTES);
    }
    st = drv.exec(hw::CMD_CREATE_MPT, mr->handle, hw::MPT_MODIFY, &m, sizeof m);
    if (st != hw::CMD_OK) return undo(st == hw::CMD_BAD_STATE ? EBUSY : fw::cmd_errno(st));
    if (translate) {
        drop_translation(drv, mr->pin_as, mr->mtt_first, mr->mtt_count, mr->pin_addr, mr->pin_len);
        mr->mtt_first = first;
        mr->mtt_count = n;
        mr->pin_as = ctx->as;
        mr->pin_addr = addr;
        mr->pin_len = length;
        mr->page_list_max = 0;
    }
    commit_rereg(mr, m, new_pd, new_addr, new_len, new_access);
    return 0;
}

int ibv_rereg_phys_mr(ibv_mr* mr, int flags, ibv_pd* pd, const ibv_phys_mr_attr* a) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    const int all = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    if (flags == 0 || (flags & ~all)) return EINVAL;
    if (mr->hw_mpt.flags & hw::MPT_FAST_REG) return EINVAL;  // Allocate L_Key regions: Fast Register
    const bool translate = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    if (!a && (translate || (flags & IBV_REREG_MR_CHANGE_ACCESS))) return EINVAL;
    if (a && (a->key_byte < -1 || a->key_byte > 255)) return EINVAL;
    ibv_pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd;
    if (!new_pd || new_pd->context != ctx) return EINVAL;
    const int new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? a->access : mr->access;
    if (int e = check_mr_access(drv.caps(), new_access)) return e;
    if (translate) {
        ibv_phys_mr_attr t = *a;
        t.access = new_access;
        if (int e = check_phys_attr(drv.caps(), t)) return e;
    }
    const uint64_t new_addr = translate ? a->iova : mr->addr, new_len = translate ? a->length : mr->length;
    if (!zero_based(new_access) && wraps(new_addr, new_len)) return EINVAL;
    // Atomic (C10-45): the new list is written first; the old translation goes only after the HCA
    // took the new entry in one MPT_MODIFY.
    uint64_t first = 0;
    if (translate) {
        if (int e = build_phys_translation(drv, *a, &first)) return e;
    }
    auto undo = [&](int e) {
        if (translate) drv.free_mtt(first, a->count);
        return e;
    };
    hw::mpt_entry held{};
    hw::cmd_status st = drv.exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &held, sizeof held);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    hw::mpt_entry m = mr->hw_mpt;
    keep_hca_fields(&m, held);
    m.flags = uint8_t(m.flags | (held.flags & hw::MPT_SHARE_SRC));
    // The consumer's key byte, or a fresh one of the driver's (o10-37.2.2, o10-37.2.4).
    const uint8_t key_byte = (a && a->key_byte >= 0) ? uint8_t(a->key_byte) : drv.next_key_byte(mr->handle);
    m.key = hw::make_key(mr->handle, key_byte);
    m.pd = new_pd->handle;
    m.access = uint32_t(new_access);
    m.state = hw::MPT_STATE_VALID;
    m.start_va = zero_based(new_access) ? 0 : new_addr;
    m.length = new_len;
    if (translate) set_phys_translation(&m, *a, first);
    st = drv.exec(hw::CMD_CREATE_MPT, mr->handle, hw::MPT_MODIFY, &m, sizeof m);
    if (st != hw::CMD_OK) return undo(st == hw::CMD_BAD_STATE ? EBUSY : fw::cmd_errno(st));
    if (translate) {  // now a physical registration: nothing of the process stays pinned for it
        drop_translation(drv, mr->pin_as, mr->mtt_first, mr->mtt_count, mr->pin_addr, mr->pin_len);
        mr->mtt_first = first;
        mr->mtt_count = a->count;
        mr->pin_as = nullptr;
        mr->pin_addr = mr->pin_len = 0;
        mr->page_list_max = a->count;
    }
    commit_rereg(mr, m, new_pd, new_addr, new_len, new_access);
    return 0;
}

int ibv_query_mr(ibv_mr* mr, ibv_mr_attr* attr) {
    if (!mr || !attr) return EINVAL;
    verb_cost(mr->context);
    hw::mpt_entry m{};
    hw::cmd_status st = mr->context->driver->exec(hw::CMD_QUERY_MPT, mr->handle, 0, nullptr, 0, &m, sizeof m);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    *attr = ibv_mr_attr{};
    attr->pd = mr->pd;
    attr->addr = m.start_va;
    attr->length = m.length;
    attr->access = int(m.access);
    attr->lkey = attr->rkey = m.key;
    attr->state = m.state <= hw::MPT_STATE_VALID ? ibv_mr_state(m.state) : IBV_MR_STATE_INVALID;
    attr->page_list_max = m.mtt_reserved;  // o10-37.2.10
    attr->is_shared = m.flags & hw::MPT_SHARED;
    return 0;
}

ibv_mr* ibv_alloc_lkey(ibv_pd* pd, uint32_t max_pages) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (!(caps.flags & hw::CAP_SEND_INV) || max_pages == 0 || max_pages > caps.max_fast_reg_pages)
        return fail<ibv_mr>(EINVAL);
    uint64_t first, list_pa;
    if (!drv.alloc_mtt(max_pages, &first)) return fail<ibv_mr>(ENOMEM);
    if (!drv.os().alloc_contiguous(size_t(max_pages) * sizeof(uint64_t), 64, &list_pa)) {
        drv.free_mtt(first, max_pages);
        return fail<ibv_mr>(ENOMEM);
    }
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.os().free(list_pa);
        drv.free_mtt(first, max_pages);
        return fail<ibv_mr>(ENOMEM);
    }
    hw::mpt_entry m{};
    m.key = hw::make_key(index, key_byte);  // the consumer picks the byte at Fast Register time
    m.pd = pd->handle;
    m.state = hw::MPT_STATE_FREE;
    m.type = hw::MPT_TYPE_MR;
    m.flags = hw::MPT_FAST_REG;
    m.log_page_size = fw::PAGE_SHIFT;
    m.mtt_base = first;
    m.mtt_reserved = max_pages;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drv.os().free(list_pa);
        drv.free_mtt(first, max_pages);
        return fail<ibv_mr>(fw::cmd_errno(st));
    }
    ibv_mr* mr = new_mr(pd, m, 0, 0, 0);
    mr->page_list_max = max_pages;  // o10-37.2.10
    mr->page_list_pa = list_pa;
    return mr;
}

int ibv_dereg_mr(ibv_mr* mr) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_MPT, mr->handle, 0, nullptr, 0);
    if (st == hw::CMD_BAD_STATE) return EBUSY;  // windows are bound to it: it stays registered
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    drv.free_mpt(mr->handle);
    drop_translation(drv, mr->pin_as, mr->mtt_first, mr->mtt_count, mr->pin_addr, mr->pin_len);
    if (mr->page_list_pa) drv.os().free(mr->page_list_pa);
    --mr->pd->refs;
    --ctx->mrs;
    delete mr;
    return 0;
}

int ibv_map_pages(ibv_context* ctx, uint64_t va, size_t len, std::vector<uint64_t>* pages) {
    if (!ctx || !pages || len == 0) return EINVAL;
    verb_cost(ctx);
    if (int e = ctx->as->pin(va, len, pages)) return e;
    ctx->mapped.emplace_back(va, len);
    return 0;
}

int ibv_unmap_pages(ibv_context* ctx, uint64_t va, size_t len) {
    if (!ctx) return EINVAL;
    auto it = std::find(ctx->mapped.begin(), ctx->mapped.end(), std::make_pair(va, uint64_t(len)));
    if (it == ctx->mapped.end()) return EINVAL;
    ctx->as->unpin(va, len);
    ctx->mapped.erase(it);
    return 0;
}

// ---------------------------------------------------------------- memory windows

ibv_mw* ibv_alloc_mw(ibv_pd* pd, ibv_mw_type type) {
    if (!pd) return fail<ibv_mw>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (!(caps.flags & hw::CAP_MW)) return fail<ibv_mw>(EINVAL);
    uint8_t hw_type;
    if (type == IBV_MW_TYPE_1) {
        hw_type = hw::MPT_TYPE_MW1;
    } else if (type == IBV_MW_TYPE_2) {
        bool a = caps.flags & hw::CAP_MW_TYPE2A, b = caps.flags & hw::CAP_MW_TYPE2B;
        if (a == b) return fail<ibv_mw>(EINVAL);  // o10-37.2.31: exactly one of 2A / 2B
        hw_type = a ? hw::MPT_TYPE_MW2A : hw::MPT_TYPE_MW2B;
    } else {
        return fail<ibv_mw>(EINVAL);
    }
    if (!drv.reserve_mw()) return fail<ibv_mw>(ENOMEM);
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.release_mw();
        return fail<ibv_mw>(ENOMEM);
    }
    hw::mpt_entry m{};
    m.key = hw::make_key(index, key_byte);
    m.pd = pd->handle;
    m.state = hw::MPT_STATE_FREE;
    m.type = hw_type;
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, hw::MPT_CREATE, &m, sizeof m);
    if (st != hw::CMD_OK) {
        drv.free_mpt(index);
        drv.release_mw();
        return fail<ibv_mw>(fw::cmd_errno(st));
    }
    ++pd->refs;
    ++ctx->mws;
    return new ibv_mw{ctx, pd, m.key, index, type};
}

int ibv_dealloc_mw(ibv_mw* mw) {
    if (!mw) return EINVAL;
    ibv_context* ctx = mw->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_MPT, mw->handle, 0, nullptr, 0);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    drv.free_mpt(mw->handle);
    drv.release_mw();
    --mw->pd->refs;
    --ctx->mws;
    delete mw;
    return 0;
}

int ibv_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind) {
    if (!qp || !mw || !mw_bind) return EINVAL;
    ibv_context* ctx = qp->context;
    verb_cost(ctx);
    if (mw->type != IBV_MW_TYPE_1) return EINVAL;  // o10-37.2.35: type 2 windows bind by a WR
    if (mw->context != ctx) return EINVAL;
    if (int e = check_bind_shape(qp, mw_bind->bind_info, mw_bind->send_flags)) return e;
    if (int e = check_sq_post(qp)) return e;
    uint8_t buf[4096];
    std::memset(buf, 0, 1u << qp->sq.log_stride);
    // C10-66.2.2: a new R_Key on every bind, from the driver's per-index key generation so a
    // key handed out for this index before (a region or window that had it) never comes back.
    hca_driver& drv = *ctx->driver;
    const uint32_t index = hw::key_index(mw->rkey);
    uint32_t new_key = hw::make_key(index, drv.next_key_byte(index));
    uint32_t bytes = build_bind_wqe(qp, mw_bind->wr_id, mw_bind->send_flags, mw->rkey, new_key,
                                    mw_bind->bind_info, hw::BIND_FROM_VERB, buf);
    put_send_wqe(qp, buf, bytes);
    ring_send(qp, 1, buf, bytes);
    mw->rkey = new_key;
    return 0;
}

// ---------------------------------------------------------------- AH

ibv_ah* ibv_create_ah(ibv_pd* pd, const ibv_ah_attr* attr) {
    if (!pd || !attr) return fail<ibv_ah>(EINVAL);
    verb_cost(pd->context);
    if (int e = check_ah_attr(pd->context, *attr)) return fail<ibv_ah>(e);
    ++pd->refs;
    ++pd->context->ahs;
    return new ibv_ah{pd->context, pd, *attr};
}

int ibv_destroy_ah(ibv_ah* ah) {
    if (!ah) return EINVAL;
    --ah->pd->refs;
    --ah->context->ahs;
    delete ah;
    return 0;
}

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
        if (auto* qp = static_cast<ibv_qp*>(drv.qp_user(e.qpn))) {
            if (e.owner & hw::CQE_IS_SEND) {
                // C10-108, 10.8.6: a send CQE for WQE w retires every earlier (unsignaled) WQE of
                // the send queue, so their slots can be posted again. A counter that names no
                // outstanding WQE (stale, from before a Reset) retires nothing.
                uint32_t delta = uint16_t(e.wqe_counter - uint16_t(qp->sq.completed)) + 1u;
                if (delta <= qp->sq.producer - qp->sq.completed) qp->sq.completed += delta;
            } else if (qp->srq) {
                // o10-53.2.2: a polled SRQ completion frees room for one more post to the SRQ.
                if (qp->srq->ring.completed < qp->srq->ring.producer) ++qp->srq->ring.completed;
            } else if (qp->rq.completed < qp->rq.producer) {
                ++qp->rq.completed;
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

// ---------------------------------------------------------------- SRQ

namespace {
/// Writes a receive WQE for `wr` at the ring's producer slot (a QP's receive queue or an SRQ)
/// and advances the producer; `buf` is scratch for the WQE image.
void put_recv_wqe(host_bus& bus, ibv_wq_ring& r, const ibv_recv_wr& wr, uint8_t* buf) {
    uint32_t off = sizeof(hw::wqe_recv_header);
    uint16_t nseg = 0;
    for (int i = 0; i < wr.num_sge; ++i) {
        if (!wr.sg_list[i].length) continue;  // zero length cannot be encoded (0 means 2^31)
        put_data_seg(buf, &off, wr.sg_list[i]);
        ++nseg;
    }
    hw::wqe_recv_header h{};
    h.wr_id = wr.wr_id;
    h.num_sge = nseg;
    h.wqe_index = uint16_t(r.producer);
    std::memcpy(buf, &h, sizeof h);
    bus.mem_write(r.pa + (uint64_t(r.producer & ((1u << r.log_size) - 1)) << r.log_stride), buf, off);
    bus.cpu_cost(cpu_op::build_recv_wqe);
    ++r.producer;
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
    if (a.max_wr == 0 || a.max_wr > caps.max_srq_wr || a.max_sge > caps.max_srq_sge || a.srq_limit != 0)
        return fail<ibv_srq>(EINVAL);
    uint8_t log_size, log_stride;
    srq_geometry(a.max_wr, a.max_sge, &log_size, &log_stride);
    uint32_t capacity = std::min<uint32_t>((1u << log_size) - 1, caps.max_srq_wr);
    auto* srq = new ibv_srq{};
    srq->context = ctx;
    srq->srq_context = ia->srq_context;
    srq->pd = pd;
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
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_SRQ, srq->handle, 0, &c, sizeof c);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    a.max_wr = capacity;
    ++pd->refs;  // C10-11.2.2
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
    --ctx->srqs;
    delete srq;
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

// ---------------------------------------------------------------- QP

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* ia) {
    if (!pd || !ia) return fail<ibv_qp>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != ctx || ia->recv_cq->context != ctx)
        return fail<ibv_qp>(EINVAL);
    // The special QPs: privileged consumers only (C10-13); the hardware runs them as UD QPs.
    const bool special = ia->qp_type == IBV_QPT_SMI || ia->qp_type == IBV_QPT_GSI;
    // IBA 10.2.9.1: RC, UC and UD QPs may take their receive WQEs from an SRQ of the context.
    if (ia->srq && (ia->srq->context != ctx || special)) return fail<ibv_qp>(EINVAL);
    if (special && !ctx->as->privileged) return fail<ibv_qp>(EPERM);
    // IBA 10.2.4.5: SMI and GSI QPs may share a CQ with each other, but not with other QPs.
    for (const ibv_cq* cq : {ia->send_cq, ia->recv_cq})
        if (special ? cq->refs > cq->special_refs : cq->special_refs > 0) return fail<ibv_qp>(EINVAL);
    const ibv_qp_type hw_type = special ? IBV_QPT_UD : ia->qp_type;
    if (!transport_supported(caps, hw_type)) return fail<ibv_qp>(EINVAL);
    // IBA 10.6.4.3.2: fast register and the reserved L_Key are enabled when the QP is created.
    if (ia->create_flags & ~uint32_t(IBV_QP_CREATE_FAST_REG | IBV_QP_CREATE_RESERVED_LKEY))
        return fail<ibv_qp>(EINVAL);
    if ((ia->create_flags & IBV_QP_CREATE_FAST_REG) && !(caps.flags & hw::CAP_SEND_INV))
        return fail<ibv_qp>(EINVAL);
    if ((ia->create_flags & IBV_QP_CREATE_RESERVED_LKEY) && !(caps.flags & hw::CAP_RESERVED_LKEY))
        return fail<ibv_qp>(EINVAL);
    ibv_qp_cap& cap = ia->cap;
    uint32_t max_inline =
        (caps.flags & hw::CAP_INLINE) ? std::min<uint32_t>(caps.max_inline, hw::INLINE_LEN_MASK) : 0;
    if (ia->srq) cap.max_recv_wr = cap.max_recv_sge = 0;  // the SRQ's capacities apply
    if (cap.max_send_wr > caps.max_qp_wr || cap.max_recv_wr > caps.max_qp_wr ||
        cap.max_send_sge > caps.max_sge || cap.max_recv_sge > caps.max_sge ||
        cap.max_inline_data > max_inline)
        return fail<ibv_qp>(EINVAL);
    uint32_t wqe_max = send_wqe_max_bytes(hw_type, cap.max_send_sge, cap.max_inline_data);
    if (wqe_max > MAX_WQE_BYTES) return fail<ibv_qp>(EINVAL);

    auto* qp = new ibv_qp{};
    qp->context = ctx;
    qp->qp_context = ia->qp_context;
    qp->pd = pd;
    qp->send_cq = ia->send_cq;
    qp->recv_cq = ia->recv_cq;
    qp->state = IBV_QPS_RESET;  // C10-20
    qp->qp_type = hw_type;      // QP0/QP1 are told apart by their QPN
    qp->sq_sig_all = ia->sq_sig_all;
    qp->create_flags = ia->create_flags;
    qp->srq = ia->srq;
    qp->max_inline_data = cap.max_inline_data;
    qp->sq.log_size = log2_ceil(std::max<uint32_t>(cap.max_send_wr, 1));
    qp->sq.log_stride = log2_ceil(std::max<uint32_t>(wqe_max, hw::WQE_BASIC_BLOCK));
    qp->sq.max_wr = cap.max_send_wr ? 1u << qp->sq.log_size : 0;
    qp->sq.max_sge = cap.max_send_sge;
    qp->rq.log_size = log2_ceil(std::max<uint32_t>(cap.max_recv_wr, 1));
    qp->rq.log_stride = log2_ceil(
        std::max<uint32_t>(sizeof(hw::wqe_recv_header) + cap.max_recv_sge * sizeof(hw::wqe_data_seg), 16));
    qp->rq.max_wr = cap.max_recv_wr ? 1u << qp->rq.log_size : 0;
    qp->rq.max_sge = cap.max_recv_sge;
    bool claimed = false;
    auto undo = [&](int e) {
        if (qp->sq.pa) drv.os().free(qp->sq.pa);
        if (qp->rq.pa) drv.os().free(qp->rq.pa);
        if (special && claimed)
            drv.release_special_qpn(qp->qp_num);
        else if (qp->qp_num)
            drv.free_qpn(qp->qp_num);
        delete qp;
        return fail<ibv_qp>(e);
    };
    if (special) {
        // Fixed QPNs the driver reserves: QP0 (SMI) and QP1 (GSI), one of each per port.
        qp->qp_num = uint32_t(ia->qp_type);
        if (!(claimed = drv.claim_special_qpn(qp->qp_num))) return undo(EBUSY);
    }
    if (!drv.os().alloc_contiguous(size_t(1) << (qp->sq.log_size + qp->sq.log_stride), fw::PAGE_BYTES,
                                   &qp->sq.pa) ||
        !drv.os().alloc_contiguous(size_t(1) << (qp->rq.log_size + qp->rq.log_stride), fw::PAGE_BYTES,
                                   &qp->rq.pa) ||
        (!special && !drv.alloc_qpn(&qp->qp_num)))
        return undo(ENOMEM);
    qp->hw_ctx = initial_context(qp);
    qp->attr = initial_attr(qp);
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_QP, qp->qp_num, 0, &qp->hw_ctx, sizeof qp->hw_ctx);
    if (st != hw::CMD_OK) return undo(fw::cmd_errno(st));
    cap.max_send_wr = qp->sq.max_wr;
    cap.max_recv_wr = qp->rq.max_wr;
    ++pd->refs;
    ++qp->send_cq->refs;
    ++qp->recv_cq->refs;
    if (qp->srq) ++qp->srq->refs;
    if (special) {
        ++qp->send_cq->special_refs;
        ++qp->recv_cq->special_refs;
    }
    ++ctx->qps;
    drv.set_qp_user(qp->qp_num, qp);
    drv.set_qp_event_handler(qp->qp_num, [qp](const hw::eqe& e) { on_qp_event(qp, e); });
    return qp;
}

int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
    if (!qp || !attr) return EINVAL;
    ibv_context* ctx = qp->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    uint32_t mask = uint32_t(attr_mask);
    ibv_qp_state cur = (mask & IBV_QP_CUR_STATE) ? attr->cur_qp_state : qp->state;
    ibv_qp_state next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
    if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR) return EINVAL;
    if (fw::check_transition(hw::qp_transport(qp->qp_type), hw::qp_state(cur), hw::qp_state(next), mask))
        return EINVAL;
    // IBA 10.3.1.5: SQD -> SQD may change attributes only once the drain is over (the HCA's
    // sq_draining, read back by QUERY_QP); SQD -> RTS and -> Error are allowed while draining.
    if (cur == IBV_QPS_SQD && next == IBV_QPS_SQD && (mask & ~uint32_t(IBV_QP_STATE | IBV_QP_CUR_STATE))) {
        hw::qp_context q{};
        if (drv.exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &q, sizeof q) == hw::CMD_OK &&
            q.sq_draining)
            return EBUSY;
    }

    // Value checks (immediate errors, the QP is left unchanged).
    uint8_t port_num = (mask & IBV_QP_PORT) ? attr->port_num : qp->hw_ctx.port;
    const hw::port_info* pi = drv.port(port_num);
    if (!pi) return EINVAL;
    if ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index >= pi->pkey_table_len) return EINVAL;
    if ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096 ||
                                     uint8_t(attr->path_mtu) > pi->max_mtu))
        return EINVAL;
    if ((mask & IBV_QP_ACCESS_FLAGS) &&
        ((attr->qp_access_flags & ~0xFu) ||
         ((attr->qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) && !(caps.flags & hw::CAP_ATOMIC))))
        return EINVAL;
    if ((mask & IBV_QP_AV) && check_ah_attr(ctx, attr->ah_attr)) return EINVAL;
    if ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) return EINVAL;
    if ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) return EINVAL;
    if ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) return EINVAL;
    if ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31) return EINVAL;
    if ((mask & IBV_QP_RQ_PSN) && attr->rq_psn > 0xFFFFFFu) return EINVAL;
    if ((mask & IBV_QP_SQ_PSN) && attr->sq_psn > 0xFFFFFFu) return EINVAL;
    if ((mask & IBV_QP_DEST_QPN) && attr->dest_qp_num > 0xFFFFFFu) return EINVAL;
    if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > caps.max_qp_init_rd_atom) return EINVAL;
    if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > caps.max_qp_rd_atom) return EINVAL;
    // No alternate path fields in qp_context: APM attributes are refused.
    if ((mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) && !(caps.flags & hw::CAP_APM)) return EINVAL;
    if (mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) return EOPNOTSUPP;

    hw::qp_context c = next == IBV_QPS_RESET ? initial_context(qp) : qp->hw_ctx;
    if (next != IBV_QPS_RESET) {
        if (mask & IBV_QP_PORT) c.port = attr->port_num;
        if (mask & IBV_QP_PKEY_INDEX) c.pkey_index = attr->pkey_index;
        if (mask & IBV_QP_ACCESS_FLAGS) c.access = attr->qp_access_flags;
        if (mask & IBV_QP_QKEY) c.qkey = attr->qkey;
        // The special QPs' Q_Keys are fixed: 0 for QP0 (SMPs), 0x80010000 for QP1 (GSI).
        if (qp->qp_num < fw::FIRST_CONSUMER_QPN) c.qkey = qp->qp_num == 1 ? 0x80010000u : 0;
        if (mask & IBV_QP_PATH_MTU) c.mtu = uint8_t(attr->path_mtu);
        if (qp->qp_type == IBV_QPT_UD && cur == IBV_QPS_RESET) c.mtu = pi->active_mtu;  // UD: port MTU
        if (mask & IBV_QP_AV) {
            const ibv_ah_attr& a = attr->ah_attr;
            c.dlid = a.dlid;
            c.sl = a.sl;
            c.src_path_bits = a.src_path_bits;
            c.grh = a.is_global ? 1 : 0;
            c.sgid_index = a.grh.sgid_index;
            c.hop_limit = a.grh.hop_limit;
            c.tclass = a.grh.traffic_class;
            c.flow_label = a.grh.flow_label;
            std::memcpy(c.dgid, a.grh.dgid.raw, 16);
        }
        if (mask & IBV_QP_DEST_QPN) c.dest_qpn = attr->dest_qp_num;
        if (mask & IBV_QP_RQ_PSN) c.rq_psn = attr->rq_psn;
        if (mask & IBV_QP_SQ_PSN) c.sq_psn = attr->sq_psn;
        if (mask & IBV_QP_MAX_QP_RD_ATOMIC) c.max_rd_atomic = attr->max_rd_atomic;
        if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) c.max_dest_rd_atomic = attr->max_dest_rd_atomic;
        if (mask & IBV_QP_MIN_RNR_TIMER) c.min_rnr_timer = attr->min_rnr_timer;
        if (mask & IBV_QP_TIMEOUT) c.timeout = attr->timeout;
        if (mask & IBV_QP_RETRY_CNT) c.retry_cnt = attr->retry_cnt;
        if (mask & IBV_QP_RNR_RETRY) c.rnr_retry = attr->rnr_retry;
        c.sq_draining =
            (next == IBV_QPS_SQD && cur != IBV_QPS_SQD) ? 1 : (next == IBV_QPS_SQD ? c.sq_draining : 0);
        if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) c.sqd_notify = attr->en_sqd_async_notify ? 1 : 0;
    }
    c.state = uint8_t(next);
    hw::modify_qp_in mi{};
    mi.attr_mask = mask;
    mi.cur_state = uint8_t(cur);
    mi.ctx = c;
    hw::cmd_status st = drv.exec(hw::CMD_MODIFY_QP, qp->qp_num, uint32_t(next), &mi, sizeof mi);
    // o10-37.2.29: no Reset while type 2A windows are bound to the QP (it stays as it was).
    if (st == hw::CMD_BAD_STATE && next == IBV_QPS_RESET) return EBUSY;
    if (st != hw::CMD_OK) return fw::cmd_errno(st);

    qp->hw_ctx = c;
    qp->state = next;
    if (next == IBV_QPS_RESET) {
        reset_queues(qp);  // software queue state restarts with the HCA's
        qp->attr = initial_attr(qp);
        return 0;
    }
    ibv_qp_attr& a = qp->attr;
    if (mask & IBV_QP_PORT) a.port_num = attr->port_num;
    if (mask & IBV_QP_PKEY_INDEX) a.pkey_index = attr->pkey_index;
    if (mask & IBV_QP_ACCESS_FLAGS) a.qp_access_flags = attr->qp_access_flags;
    if (mask & IBV_QP_QKEY) a.qkey = attr->qkey;
    if (qp->qp_num < fw::FIRST_CONSUMER_QPN) a.qkey = c.qkey;  // fixed Q_Keys of QP0/QP1
    if (mask & IBV_QP_PATH_MTU) a.path_mtu = attr->path_mtu;
    if (mask & IBV_QP_AV) a.ah_attr = attr->ah_attr;
    if (mask & IBV_QP_DEST_QPN) a.dest_qp_num = attr->dest_qp_num;
    if (mask & IBV_QP_RQ_PSN) a.rq_psn = attr->rq_psn;
    if (mask & IBV_QP_SQ_PSN) a.sq_psn = attr->sq_psn;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) a.max_rd_atomic = attr->max_rd_atomic;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) a.min_rnr_timer = attr->min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) a.timeout = attr->timeout;
    if (mask & IBV_QP_RETRY_CNT) a.retry_cnt = attr->retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) a.rnr_retry = attr->rnr_retry;
    if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) a.en_sqd_async_notify = attr->en_sqd_async_notify;
    a.sq_draining = c.sq_draining;
    a.qp_state = a.cur_qp_state = next;
    return 0;
}

int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int /*attr_mask*/, ibv_qp_init_attr* init_attr) {
    if (!qp || !attr) return EINVAL;
    verb_cost(qp->context);
    hw::qp_context c{};
    hw::cmd_status st = qp->context->driver->exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &c, sizeof c);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    if (c.state <= hw::QPS_ERR) {
        qp->state = ibv_qp_state(c.state);  // the HCA may have moved it (SQEr, Error, drained)
        qp->hw_ctx.state = c.state;
        qp->hw_ctx.sq_draining = c.sq_draining;
        qp->attr.sq_draining = c.sq_draining;
    }
    *attr = qp->attr;
    attr->qp_state = attr->cur_qp_state = qp->state;
    attr->cap = {qp->sq.max_wr, qp->rq.max_wr, qp->sq.max_sge, qp->rq.max_sge, qp->max_inline_data};
    if (init_attr) {
        *init_attr = ibv_qp_init_attr{};
        init_attr->qp_context = qp->qp_context;
        init_attr->send_cq = qp->send_cq;
        init_attr->recv_cq = qp->recv_cq;
        init_attr->cap = attr->cap;
        init_attr->qp_type = qp->qp_num < fw::FIRST_CONSUMER_QPN ? ibv_qp_type(qp->qp_num) : qp->qp_type;
        init_attr->sq_sig_all = qp->sq_sig_all;
        init_attr->create_flags = qp->create_flags;
        init_attr->srq = qp->srq;
    }
    return 0;
}

namespace {
int mcast_cmd(ibv_qp* qp, const ibv_gid* gid, uint16_t lid, uint16_t opcode) {
    if (!qp || !gid) return EINVAL;
    verb_cost(qp->context);
    hca_driver& drv = *qp->context->driver;
    if (!(drv.caps().flags & hw::CAP_MCAST)) return EOPNOTSUPP;
    // o10-34: UD QPs only; an MGID (first byte 0xFF) and a multicast LID.
    if (qp->qp_type != IBV_QPT_UD || gid->raw[0] != 0xFF || lid < 0xC000 || lid == 0xFFFF) return EINVAL;
    hw::mcast_in in{};
    std::memcpy(in.mgid, gid->raw, 16);
    in.mlid = lid;
    const hw::cmd_status st = drv.exec(opcode, qp->qp_num, 0, &in, sizeof in);
    if (st == hw::CMD_BAD_RESOURCE) return ENOMEM;  // the group or the HCA's table is full
    return st == hw::CMD_OK ? 0 : fw::cmd_errno(st);
}
}  // namespace

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast_cmd(qp, gid, lid, hw::CMD_ATTACH_MCAST);
}

int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast_cmd(qp, gid, lid, hw::CMD_DETACH_MCAST);
}

int ibv_destroy_qp(ibv_qp* qp) {
    if (!qp) return EINVAL;
    ibv_context* ctx = qp->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_QP, qp->qp_num, 0, nullptr, 0);
    if (st == hw::CMD_BAD_STATE) return EBUSY;  // o10-37.2.29: type 2A windows bound; the QP stays
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    // Unacknowledged events are not waited for (libibverbs would block): queued ones are dropped
    // and none is delivered for this QP afterwards.
    drv.clear_qp_event_handler(qp->qp_num);
    drop_events(ctx, qp, object_kind::qp);
    drv.set_qp_user(qp->qp_num, nullptr);
    if (qp->qp_num < fw::FIRST_CONSUMER_QPN)
        drv.release_special_qpn(qp->qp_num);
    else
        drv.free_qpn(qp->qp_num);
    drv.os().free(qp->sq.pa);
    drv.os().free(qp->rq.pa);
    --qp->pd->refs;
    --qp->send_cq->refs;
    --qp->recv_cq->refs;
    if (qp->srq) --qp->srq->refs;
    if (qp->qp_num < 2) {  // QP0 / QP1
        --qp->send_cq->special_refs;
        --qp->recv_cq->special_refs;
    }
    --ctx->qps;
    delete qp;
    return 0;
}

int ibv_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    if (bad_wr) *bad_wr = nullptr;
    if (!qp) return EINVAL;
    host_bus& bus = qp->context->driver->bus();
    bus.cpu_cost_deferred(cpu_op::verb_call);  // waited for with the doorbell (or before returning)
    uint8_t buf[4096];
    uint32_t posted = 0, last_bytes = 0;
    int err = 0;
    for (; wr; wr = wr->next) {
        uint64_t total = 0;
        err = check_send_wr(qp, wr, &total);
        uint32_t bytes = 0;
        if (!err) {
            std::memset(buf, 0, 1u << qp->sq.log_stride);
            bytes = build_send_wqe(qp, wr, total, buf);
            if (!bytes) err = EFAULT;  // inline source not mapped
        }
        if (err) {
            if (bad_wr) *bad_wr = wr;  // C10-136: this WR and the rest are not placed on the queue
            break;
        }
        put_send_wqe(qp, buf, bytes);
        after_post(wr);
        ++posted;
        last_bytes = bytes;
    }
    if (posted) ring_send(qp, posted, buf, last_bytes);
    bus.cpu_settle();
    return err;
}

int ibv_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr) {
    if (bad_wr) *bad_wr = nullptr;
    if (!qp) return EINVAL;
    ibv_context* ctx = qp->context;
    host_bus& bus = ctx->driver->bus();
    bus.cpu_cost(cpu_op::verb_call);
    uint8_t buf[4096];
    uint32_t posted = 0;
    int err = 0;
    for (; wr; wr = wr->next) {
        // C10-22, C10-97.2.1: receive posts are refused only in Reset; o10-51.2.2: never on a
        // QP attached to an SRQ.
        if (qp->srq || qp->state == IBV_QPS_RESET)
            err = EINVAL;
        else if (qp->rq.producer - qp->rq.completed >= qp->rq.max_wr)
            err = ENOMEM;
        else if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->rq.max_sge || (wr->num_sge && !wr->sg_list))
            err = EINVAL;
        if (err) {
            if (bad_wr) *bad_wr = wr;
            break;
        }
        put_recv_wqe(bus, qp->rq, *wr, buf);
        ++posted;
    }
    if (posted) mmio64(ctx, hw::UAR_RQ_DOORBELL, hw::rq_doorbell(qp->qp_num, uint16_t(qp->rq.producer)));
    return err;
}

}  // namespace hcasim::verbs
