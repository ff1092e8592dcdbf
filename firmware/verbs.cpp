#include "firmware/verbs.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

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

/// The verbs event for an EQE; false for EQEs that have none (completion, SRQ, unknown).
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
    case hw::EQE_PORT_CHANGE:
        if (e.subtype == hw::EQE_PORT_ACTIVE) *t = IBV_EVENT_PORT_ACTIVE;
        else if (e.subtype == hw::EQE_PORT_DOWN) *t = IBV_EVENT_PORT_ERR;
        else return false;
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
    while (!ctx->handler_events.empty()) {
        ibv_async_event ev = ctx->handler_events.front();
        ctx->handler_events.pop_front();
        if (!ctx->async_handler) {  // removed by the handler itself
            ctx->async_events.push_back(ev);
            continue;
        }
        auto fn = ctx->async_handler;  // a copy: the handler may replace itself (C10-139)
        fn(ev);
    }
    ctx->delivering = false;
}

/// Drops the events of a QP or CQ being destroyed that are still queued.
void drop_events(ibv_context* ctx, const void* object, bool cq) {
    auto of_object = [&](const ibv_async_event& ev) {
        return cq ? ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == object
                  : is_qp_event(ev.event_type) && ev.element.qp == object;
    };
    for (auto* q : {&ctx->async_events, &ctx->handler_events})
        q->erase(std::remove_if(q->begin(), q->end(), of_object), q->end());
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
        uint64_t size = 1ull << cq->log_size, n = 0;
        for (; n < size; ++n) {
            uint64_t c = cq->consumer + n;
            uint8_t owner;
            bus.mem_read(cq->ring_pa + (c & (size - 1)) * sizeof(hw::cqe) + offsetof(hw::cqe, owner), &owner, 1);
            if ((owner & hw::CQE_OWNER_BIT) != hw::cqe_owner_for(c, cq->log_size)) break;
        }
        cq->error = true;
        cq->error_end = cq->consumer + n;
    }
    ev.element.cq = cq;
    queue_event(cq->context, ev);
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
    default:
        break;
    }
}

bool transport_supported(const hw::hca_caps& caps, ibv_qp_type t) {
    switch (t) {
    case IBV_QPT_RC: return caps.flags & hw::CAP_RC;
    case IBV_QPT_UC: return caps.flags & hw::CAP_UC;
    case IBV_QPT_UD: return caps.flags & hw::CAP_UD;
    }
    return false;
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
    case IBV_WR_SEND_WITH_INV:
        return t == IBV_QPT_RC && (caps.flags & hw::CAP_SEND_INV) ? hw::WQE_OP_SEND_INV : -1;
    default: return -1;  // LOCAL_INV, BIND_MW: no memory windows / FRWR in interface version 1
    }
}

bool is_atomic(ibv_wr_opcode op) { return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD; }
bool has_raddr(ibv_wr_opcode op) {
    return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_RDMA_READ || is_atomic(op);
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

/// Checks one send WR (immediate errors); returns 0 or errno.
int check_send_wr(ibv_qp* qp, const ibv_send_wr* wr, uint64_t* total) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    // C10-22, C10-25, C10-29, C10-96: no send posts before RTS.
    if (qp->state == IBV_QPS_RESET || qp->state == IBV_QPS_INIT || qp->state == IBV_QPS_RTR) return EINVAL;
    if (qp->sq.producer - qp->sq.completed >= qp->sq.max_wr) return ENOMEM;
    if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->sq.max_sge) return EINVAL;
    if (wr->num_sge > 0 && !wr->sg_list) return EINVAL;
    if (wqe_opcode_for(caps, qp->qp_type, wr->opcode) < 0) return EINVAL;
    *total = 0;
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
        if (ah->pd != qp->pd) return EINVAL;  // C10-10
        if (ah->attr.port_num && ah->attr.port_num != qp->hw_ctx.port) return EINVAL;  // o10-2.1.1
        if (wr->wr.ud.remote_qpn > 0xFFFFFFu) return EINVAL;
    }
    return 0;
}

/// Builds a send WQE into buf; returns its size in bytes (16-byte multiple) or 0 on EFAULT.
uint32_t build_send_wqe(ibv_qp* qp, const ibv_send_wr* wr, uint64_t total, uint8_t* buf) {
    const hw::hca_caps& caps = qp->context->driver->caps();
    uint32_t off = 0;
    hw::wqe_ctrl_seg ctrl{};
    ctrl.opcode = uint8_t(wqe_opcode_for(caps, qp->qp_type, wr->opcode));
    if (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) ctrl.flags |= hw::WQE_FLAG_SIGNALED;
    if (wr->send_flags & IBV_SEND_SOLICITED) ctrl.flags |= hw::WQE_FLAG_SOLICITED;
    if (wr->send_flags & IBV_SEND_FENCE) ctrl.flags |= hw::WQE_FLAG_FENCE;
    bool inl = wr->send_flags & IBV_SEND_INLINE;
    if (inl) ctrl.flags |= hw::WQE_FLAG_INLINE;
    ctrl.qpn = qp->qp_num;
    ctrl.wqe_index = uint16_t(qp->sq.producer);
    ctrl.imm = wr->opcode == IBV_WR_SEND_WITH_INV ? wr->invalidate_rkey : wr->imm_data;
    ctrl.wr_id = wr->wr_id;
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
        // IBA: a Q_Key with the high-order bit set means "use the QP's own Q_Key".
        u.qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->hw_ctx.qkey : wr->wr.ud.remote_qkey;
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
    off = hw::align16(off);
    buf[offsetof(hw::wqe_ctrl_seg, ds_count)] = uint8_t(off / 16);
    return off;
}

int check_ah_attr(ibv_context* ctx, const ibv_ah_attr& a) {
    const hw::port_info* pi = ctx->driver->port(a.port_num ? a.port_num : 1);
    if (!pi) return EINVAL;
    if (a.sl > 15) return EINVAL;
    if (a.is_global && (a.grh.sgid_index >= pi->gid_table_len || a.grh.flow_label > 0xFFFFFu)) return EINVAL;
    return 0;
}

}  // namespace

uint32_t send_wqe_max_bytes(ibv_qp_type t, uint32_t max_send_sge, uint32_t max_inline) {
    uint32_t addr = t == IBV_QPT_UD ? sizeof(hw::wqe_ud_seg)
                    : t == IBV_QPT_RC ? sizeof(hw::wqe_raddr_seg) + sizeof(hw::wqe_atomic_seg)
                                      : sizeof(hw::wqe_raddr_seg);
    uint32_t data = std::max<uint32_t>(max_send_sge * sizeof(hw::wqe_data_seg),
                                       max_inline ? hw::align16(sizeof(hw::wqe_inline_seg) + max_inline) : 0);
    return sizeof(hw::wqe_ctrl_seg) + addr + data;
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
    // Unaffiliated events (port, device) reach every open context.
    drv.add_event_client(ctx, {[ctx](const hw::eqe& e) { on_device_event(ctx, e); }, [ctx] { deliver_events(ctx); }});
    return ctx;
}

int ibv_close_device(ibv_context* ctx) {
    if (!ctx) return EINVAL;
    if (ctx->pds || ctx->cqs || ctx->qps || ctx->mrs || ctx->ahs || ctx->channels) return EBUSY;
    if (ctx->delivering) return EBUSY;  // called from its own async event handler
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
    a->max_qp = int(std::min<uint32_t>(c.max_qp, ctx->driver->num_qps() - 1));
    a->max_qp_wr = int(c.max_qp_wr);
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_N_NOTIFY_CQ |
                          ((c.flags & hw::CAP_APM) ? IBV_DEVICE_AUTO_PATH_MIG : 0) |
                          ((c.flags & hw::CAP_MW) ? IBV_DEVICE_MEM_WINDOW : 0) |
                          ((c.flags & hw::CAP_SEND_INV) ? IBV_DEVICE_MEM_MGT_EXTENSIONS : 0) |
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
    return 0;
}

// ---------------------------------------------------------------- PD, MR, AH

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

ibv_mr* ibv_reg_mr(ibv_pd* pd, uint64_t addr, size_t length, int access) {
    if (!pd) return fail<ibv_mr>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    // C10-48: remote write / remote atomic need local write.
    if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
        return fail<ibv_mr>(EINVAL);
    if (access & ~0x1F) return fail<ibv_mr>(EINVAL);
    if ((access & IBV_ACCESS_REMOTE_ATOMIC) && !(drv.caps().flags & hw::CAP_ATOMIC)) return fail<ibv_mr>(EINVAL);
    if ((access & IBV_ACCESS_MW_BIND) && !(drv.caps().flags & hw::CAP_MW)) return fail<ibv_mr>(EINVAL);
    if (length == 0 || (drv.caps().max_mr_size && length > drv.caps().max_mr_size)) return fail<ibv_mr>(EINVAL);
    std::vector<uint64_t> pages;
    if (int e = ctx->as->pin(addr, length, &pages)) return fail<ibv_mr>(e);  // C10-52.2.1
    // C10-45: all or nothing, so every failure below rolls back what was done.
    uint64_t mtt_first = 0;
    if (!drv.alloc_mtt(pages.size(), &mtt_first)) {
        ctx->as->unpin(addr, length);
        return fail<ibv_mr>(ENOMEM);
    }
    uint32_t index;
    uint8_t key_byte;
    if (!drv.alloc_mpt(&index, &key_byte)) {
        drv.free_mtt(mtt_first, pages.size());
        ctx->as->unpin(addr, length);
        return fail<ibv_mr>(ENOMEM);
    }
    auto rollback = [&](int e) {
        drv.free_mpt(index);
        drv.free_mtt(mtt_first, pages.size());
        ctx->as->unpin(addr, length);
        return fail<ibv_mr>(e);
    };
    uint8_t buf[hw::CMD_IN_BYTES];
    for (size_t done = 0; done < pages.size();) {
        uint32_t n = uint32_t(std::min<size_t>(hw::WRITE_MTT_MAX, pages.size() - done));
        hw::write_mtt_in h{};
        h.first_index = mtt_first + done;
        h.count = n;
        std::memcpy(buf, &h, sizeof h);
        for (uint32_t i = 0; i < n; ++i) {
            hw::mtt_entry m{pages[done + i] | hw::MTT_PRESENT};
            std::memcpy(buf + sizeof h + i * sizeof m, &m, sizeof m);
        }
        hw::cmd_status st = drv.exec(hw::CMD_WRITE_MTT, 0, 0, buf, sizeof h + n * sizeof(hw::mtt_entry));
        if (st != hw::CMD_OK) return rollback(fw::cmd_errno(st));
        done += n;
    }
    hw::mpt_entry m{};
    m.key = hw::make_key(index, key_byte);
    m.pd = pd->handle;
    m.access = uint32_t(access);
    m.flags = hw::MPT_VALID;
    m.log_page_size = fw::PAGE_SHIFT;
    m.start_va = addr;
    m.length = length;
    m.mtt_base = mtt_first;
    m.mtt_count = pages.size();
    hw::cmd_status st = drv.exec(hw::CMD_CREATE_MPT, index, 0, &m, sizeof m);
    if (st != hw::CMD_OK) return rollback(fw::cmd_errno(st));
    ++pd->refs;
    ++ctx->mrs;
    return new ibv_mr{ctx, pd, addr, length, index, m.key, m.key, access, mtt_first, pages.size()};
}

int ibv_dereg_mr(ibv_mr* mr) {
    if (!mr) return EINVAL;
    ibv_context* ctx = mr->context;
    verb_cost(ctx);
    hw::cmd_status st = ctx->driver->exec(hw::CMD_DESTROY_MPT, mr->handle, 0, nullptr, 0);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    ctx->driver->free_mpt(mr->handle);
    ctx->driver->free_mtt(mr->mtt_first, mr->mtt_count);
    ctx->as->unpin(mr->addr, mr->length);
    --mr->pd->refs;
    --ctx->mrs;
    delete mr;
    return 0;
}

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

ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context, ibv_comp_channel* channel, int comp_vector) {
    if (!ctx) return fail<ibv_cq>(EINVAL);
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    if (cqe < 1 || uint32_t(cqe) > drv.caps().max_cqe || comp_vector != 0) return fail<ibv_cq>(EINVAL);
    if (channel && channel->context != ctx) return fail<ibv_cq>(EINVAL);
    uint8_t log = log2_ceil(uint64_t(cqe) + 1);
    uint64_t ring;
    if (!drv.os().alloc_contiguous(sizeof(hw::cqe) << log, fw::PAGE_BYTES, &ring)) return fail<ibv_cq>(ENOMEM);
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
    auto* cq = new ibv_cq{ctx, channel, cq_context, cqn, int((1u << log) - 1), log, ring, 0, 0, 0};
    if (channel) channel->cqs.push_back(cq);
    ++ctx->cqs;
    drv.set_cq_event_handler(cqn, [cq](const hw::eqe& e) { on_cq_event(cq, e); });
    return cq;
}

int ibv_destroy_cq(ibv_cq* cq) {
    if (!cq) return EINVAL;
    ibv_context* ctx = cq->context;
    verb_cost(ctx);
    if (cq->refs) return EBUSY;  // C10-18
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
    drop_events(ctx, cq, true);
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
        hw::cqe e;
        bus.mem_read(cq->ring_pa + uint64_t(cq->consumer & mask) * sizeof(hw::cqe), &e, sizeof e);
        if ((e.owner & hw::CQE_OWNER_BIT) != hw::cqe_owner_for(cq->consumer, cq->log_size)) break;
        ibv_wc& w = wc[n++];
        w.wr_id = e.wr_id;
        w.status = ibv_wc_status(e.status);
        w.opcode = ibv_wc_opcode(e.opcode);
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
        uint8_t owner;
        bus.mem_read(slot + offsetof(hw::cqe, owner), &owner, 1);
        if ((owner & hw::CQE_OWNER_BIT) == hw::cqe_owner_for(cq->consumer, cq->log_size)) return 0;
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
                while (drv.take_cq_event(c->handle)) {
                }
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

// ---------------------------------------------------------------- QP

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* ia) {
    if (!pd || !ia) return fail<ibv_qp>(EINVAL);
    ibv_context* ctx = pd->context;
    hca_driver& drv = *ctx->driver;
    const hw::hca_caps& caps = drv.caps();
    verb_cost(ctx);
    if (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != ctx || ia->recv_cq->context != ctx)
        return fail<ibv_qp>(EINVAL);
    if (ia->srq) return fail<ibv_qp>(EINVAL);  // no SRQ in interface version 1
    if (!transport_supported(caps, ia->qp_type)) return fail<ibv_qp>(EINVAL);
    ibv_qp_cap& cap = ia->cap;
    uint32_t max_inline = (caps.flags & hw::CAP_INLINE) ? std::min<uint32_t>(caps.max_inline, hw::INLINE_LEN_MASK) : 0;
    if (cap.max_send_wr > caps.max_qp_wr || cap.max_recv_wr > caps.max_qp_wr || cap.max_send_sge > caps.max_sge ||
        cap.max_recv_sge > caps.max_sge || cap.max_inline_data > max_inline)
        return fail<ibv_qp>(EINVAL);
    uint32_t wqe_max = send_wqe_max_bytes(ia->qp_type, cap.max_send_sge, cap.max_inline_data);
    if (wqe_max > MAX_WQE_BYTES) return fail<ibv_qp>(EINVAL);

    auto* qp = new ibv_qp{};
    qp->context = ctx;
    qp->qp_context = ia->qp_context;
    qp->pd = pd;
    qp->send_cq = ia->send_cq;
    qp->recv_cq = ia->recv_cq;
    qp->state = IBV_QPS_RESET;  // C10-20
    qp->qp_type = ia->qp_type;
    qp->sq_sig_all = ia->sq_sig_all;
    qp->max_inline_data = cap.max_inline_data;
    qp->sq.log_size = log2_ceil(std::max<uint32_t>(cap.max_send_wr, 1));
    qp->sq.log_stride = log2_ceil(std::max<uint32_t>(wqe_max, hw::WQE_BASIC_BLOCK));
    qp->sq.max_wr = cap.max_send_wr ? 1u << qp->sq.log_size : 0;
    qp->sq.max_sge = cap.max_send_sge;
    qp->rq.log_size = log2_ceil(std::max<uint32_t>(cap.max_recv_wr, 1));
    qp->rq.log_stride =
        log2_ceil(std::max<uint32_t>(sizeof(hw::wqe_recv_header) + cap.max_recv_sge * sizeof(hw::wqe_data_seg), 16));
    qp->rq.max_wr = cap.max_recv_wr ? 1u << qp->rq.log_size : 0;
    qp->rq.max_sge = cap.max_recv_sge;
    auto undo = [&](int e) {
        if (qp->sq.pa) drv.os().free(qp->sq.pa);
        if (qp->rq.pa) drv.os().free(qp->rq.pa);
        if (qp->qp_num) drv.free_qpn(qp->qp_num);
        delete qp;
        return fail<ibv_qp>(e);
    };
    if (!drv.os().alloc_contiguous(size_t(1) << (qp->sq.log_size + qp->sq.log_stride), fw::PAGE_BYTES, &qp->sq.pa) ||
        !drv.os().alloc_contiguous(size_t(1) << (qp->rq.log_size + qp->rq.log_stride), fw::PAGE_BYTES, &qp->rq.pa) ||
        !drv.alloc_qpn(&qp->qp_num))
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
        if (drv.exec(hw::CMD_QUERY_QP, qp->qp_num, 0, nullptr, 0, &q, sizeof q) == hw::CMD_OK && q.sq_draining)
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
    // No alternate path fields in qp_context (interface version 1): APM attributes are refused.
    if ((mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) && !(caps.flags & hw::CAP_APM)) return EINVAL;
    if (mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) return EOPNOTSUPP;

    hw::qp_context c = next == IBV_QPS_RESET ? initial_context(qp) : qp->hw_ctx;
    if (next != IBV_QPS_RESET) {
        if (mask & IBV_QP_PORT) c.port = attr->port_num;
        if (mask & IBV_QP_PKEY_INDEX) c.pkey_index = attr->pkey_index;
        if (mask & IBV_QP_ACCESS_FLAGS) c.access = attr->qp_access_flags;
        if (mask & IBV_QP_QKEY) c.qkey = attr->qkey;
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
        c.sq_draining = (next == IBV_QPS_SQD && cur != IBV_QPS_SQD) ? 1 : (next == IBV_QPS_SQD ? c.sq_draining : 0);
        if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) c.sqd_notify = attr->en_sqd_async_notify ? 1 : 0;
    }
    c.state = uint8_t(next);
    hw::modify_qp_in mi{};
    mi.attr_mask = mask;
    mi.cur_state = uint8_t(cur);
    mi.ctx = c;
    hw::cmd_status st = drv.exec(hw::CMD_MODIFY_QP, qp->qp_num, uint32_t(next), &mi, sizeof mi);
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
        init_attr->qp_type = qp->qp_type;
        init_attr->sq_sig_all = qp->sq_sig_all;
    }
    return 0;
}

int ibv_destroy_qp(ibv_qp* qp) {
    if (!qp) return EINVAL;
    ibv_context* ctx = qp->context;
    hca_driver& drv = *ctx->driver;
    verb_cost(ctx);
    hw::cmd_status st = drv.exec(hw::CMD_DESTROY_QP, qp->qp_num, 0, nullptr, 0);
    if (st != hw::CMD_OK) return fw::cmd_errno(st);
    // Unacknowledged events are not waited for (libibverbs would block): queued ones are dropped
    // and none is delivered for this QP afterwards.
    drv.clear_qp_event_handler(qp->qp_num);
    drop_events(ctx, qp, false);
    drv.set_qp_user(qp->qp_num, nullptr);
    drv.free_qpn(qp->qp_num);
    drv.os().free(qp->sq.pa);
    drv.os().free(qp->rq.pa);
    --qp->pd->refs;
    --qp->send_cq->refs;
    --qp->recv_cq->refs;
    --ctx->qps;
    delete qp;
    return 0;
}

int ibv_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
    if (bad_wr) *bad_wr = nullptr;
    if (!qp) return EINVAL;
    ibv_context* ctx = qp->context;
    hca_driver& drv = *ctx->driver;
    host_bus& bus = drv.bus();
    bus.cpu_cost(cpu_op::verb_call);
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
        uint64_t slot = qp->sq.pa + (uint64_t(qp->sq.producer & ((1u << qp->sq.log_size) - 1)) << qp->sq.log_stride);
        bus.mem_write(slot, buf, bytes);
        bus.cpu_cost(cpu_op::build_wqe);
        ++qp->sq.producer;
        ++posted;
        last_bytes = bytes;
    }
    if (posted) {
        uint32_t window = (last_bytes + hw::WQE_BASIC_BLOCK - 1) & ~(hw::WQE_BASIC_BLOCK - 1);
        if (drv.options().use_inline_window && posted == 1 && window <= hw::INLINE_WINDOW_BYTES) {
            // The window write is the doorbell for this WQE (producer = wqe_index + 1).
            bus.mmio_write(hca_driver::uar_offset(ctx->uar, hw::UAR_INLINE_WQE), buf, window);
        } else {
            mmio64(ctx, hw::UAR_SQ_DOORBELL, hw::sq_doorbell(qp->qp_num, uint16_t(qp->sq.producer)));
        }
    }
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
        // C10-22, C10-97.2.1: receive posts are refused only in Reset.
        if (qp->state == IBV_QPS_RESET) err = EINVAL;
        else if (qp->rq.producer - qp->rq.completed >= qp->rq.max_wr) err = ENOMEM;
        else if (wr->num_sge < 0 || uint32_t(wr->num_sge) > qp->rq.max_sge || (wr->num_sge && !wr->sg_list))
            err = EINVAL;
        if (err) {
            if (bad_wr) *bad_wr = wr;
            break;
        }
        uint32_t off = sizeof(hw::wqe_recv_header);
        uint16_t nseg = 0;
        for (int i = 0; i < wr->num_sge; ++i) {
            if (!wr->sg_list[i].length) continue;  // zero length cannot be encoded (0 means 2^31)
            put_data_seg(buf, &off, wr->sg_list[i]);
            ++nseg;
        }
        hw::wqe_recv_header h{};
        h.wr_id = wr->wr_id;
        h.num_sge = nseg;
        h.wqe_index = uint16_t(qp->rq.producer);
        std::memcpy(buf, &h, sizeof h);
        uint64_t slot = qp->rq.pa + (uint64_t(qp->rq.producer & ((1u << qp->rq.log_size) - 1)) << qp->rq.log_stride);
        bus.mem_write(slot, buf, off);
        bus.cpu_cost(cpu_op::build_recv_wqe);
        ++qp->rq.producer;
        ++posted;
    }
    if (posted) mmio64(ctx, hw::UAR_RQ_DOORBELL, hw::rq_doorbell(qp->qp_num, uint16_t(qp->rq.producer)));
    return err;
}

}  // namespace hcasim::verbs
