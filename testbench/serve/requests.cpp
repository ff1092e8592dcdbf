#include "testbench/serve/server.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/core/hex.h"

namespace hcasim::serve {

sp::qp_rep server::qp_reply(uint64_t id, const verbs::ibv_qp* qp) {
    sp::qp_rep r{};
    r.id = id;
    r.qp_num = qp->qp_num;
    r.state = int32_t(qp->state);
    r.max_inline_data = qp->max_inline_data;
    r.port = qp->hw_ctx.port;
    r.cap.max_send_wr = qp->sq.max_wr;
    r.cap.max_send_sge = qp->sq.max_sge;
    r.cap.max_recv_wr = qp->rq.max_wr;
    r.cap.max_recv_sge = qp->rq.max_sge;
    r.cap.max_inline_data = qp->max_inline_data;
    r.sq = qp->sq;
    r.rq = qp->rq;
    return r;
}

sp::srq_rep server::srq_reply(uint64_t id, const verbs::ibv_srq* s) {
    sp::srq_rep r{};
    r.id = id;
    r.srqn = s->handle;
    r.attr.max_wr = s->ring.max_wr;
    r.attr.max_sge = s->ring.max_sge;
    r.ring = s->ring;
    return r;
}

sp::cq_rep server::cq_reply(uint64_t id, const verbs::ibv_cq* cq) {
    sp::cq_rep r{};
    r.id = id;
    r.cqn = cq->handle;
    r.cqe = cq->cqe;
    r.ring_pa = cq->ring_pa;
    r.log_size = cq->log_size;
    return r;
}

int server::take_fd(message& m) {
    if (m.fds.empty()) return -1;
    const int f = m.fds.front();
    m.fds.erase(m.fds.begin());
    return f;
}

void server::open(connection& c, kernel_node& k, message& m) {
    const auto* r = request_as<sp::open_req>(m);
    if (r->version != sp::VERSION) return reply_status(c, EPROTO);
    const int afd = take_fd(m);
    if (afd < 0) return reply_status(c, EINVAL);
    unsigned held = 0;  // contexts of this client's process
    for (const auto& o : conns_) held += o->ctx && o->pid == c.pid;
    if (held >= limits_.contexts) {
        close(afd);
        log(c, "OPEN refused: the process has " + std::to_string(held) +
                   " contexts (--max-contexts-per-client)");
        return reply_status(c, EDQUOT);
    }
    c.node = r->node;
    c.async_fd = afd;  // non-blocking: own_pipe
    host_software& sw = *k.sw;
    c.as = std::make_unique<fw::address_space>(sw.os);
    c.ctx = verbs::ibv_open_device(sw.driver, *c.as);
    if (!c.ctx) {
        c.as.reset();
        return reply_status(c, errno ? errno : EIO);
    }
    verbs::ibv_set_async_event_handler(c.ctx,
                                       [this, &c](const verbs::ibv_async_event& e) { on_async_event(c, e); });
    for (int v = 0; v < c.ctx->num_comp_vectors; ++v)
        verbs::ibv_set_comp_event_handler(c.ctx, v,
                                          [this, &c](verbs::ibv_cq* cq, void*) { on_comp_event(c, cq); });
    sp::open_rep rep{};
    rep.mem_bytes = m_.at(c.node).memory.size_bytes.get();
    rep.uar = c.ctx->uar;
    rep.num_qps = sw.driver.num_qps();
    rep.num_comp_vectors = c.ctx->num_comp_vectors;
    rep.caps = sw.driver.caps();
    for (uint8_t p = 1; p <= sp::MAX_PORTS && sw.driver.port(p); ++p) {
        rep.ports[p - 1] = *sw.driver.port(p);
        rep.nports = p;
    }
    verbs::ibv_query_device(c.ctx, &rep.dev);
    rep.node_guid = rep.dev.node_guid;
    log(c, "opened hcasim" + std::to_string(c.node));
    send_reply(c, 0, &rep, sizeof rep, m_.at(c.node).memory.shared_fd());
}

void server::malformed(connection& c, uint32_t op) {
    log(c, "malformed request " + std::to_string(op));
    reply_status(c, EINVAL);
}

void server::execute(connection& c, kernel_node& k, uint32_t op, message& m) {
    const auto it = handlers().find(op);
    if (it == handlers().end()) {
        log(c, "unknown request " + std::to_string(op));
        return reply_status(c, EOPNOTSUPP);
    }
    (this->*it->second)(c, k, op, m);
}

const std::map<uint32_t, server::handler>& server::handlers() {
    static const std::map<uint32_t, handler> h = {
        {sp::OPEN, &server::handle_open},
        {sp::MMIO_READ32, &server::handle_mmio_read32},
        {sp::NOW, &server::handle_now},
        {sp::SLEEP, &server::handle_sleep},
        {sp::QUERY_DEVICE, &server::handle_query_device},
        {sp::QUERY_PORT, &server::handle_query_port},
        {sp::QUERY_GID, &server::handle_query_gid},
        {sp::QUERY_PKEY, &server::handle_query_pkey},
        {sp::ALLOC_PD, &server::handle_alloc_pd},
        {sp::DEALLOC_PD, &server::handle_dealloc_pd},
        {sp::MAP_RUN, &server::handle_map_run},
        {sp::UNMAP_RUN, &server::handle_unmap_run},
        {sp::REG_MR, &server::handle_reg_mr},
        {sp::DEREG_MR, &server::handle_dereg_mr},
        {sp::REREG_MR, &server::handle_rereg_mr},
        {sp::ALLOC_MW, &server::handle_alloc_mw},
        {sp::DEALLOC_MW, &server::handle_dealloc_mw},
        {sp::NEXT_KEY, &server::handle_next_key},
        {sp::CREATE_CQ, &server::handle_create_cq},
        {sp::DESTROY_CQ, &server::handle_destroy_cq},
        {sp::RESIZE_CQ, &server::handle_resize_cq},
        {sp::CREATE_QP, &server::handle_create_qp},
        {sp::MODIFY_QP, &server::handle_modify_qp},
        {sp::QUERY_QP, &server::handle_query_qp},
        {sp::DESTROY_QP, &server::handle_destroy_qp},
        {sp::CREATE_SRQ, &server::handle_create_srq},
        {sp::MODIFY_SRQ, &server::handle_srq_attr},
        {sp::QUERY_SRQ, &server::handle_srq_attr},
        {sp::DESTROY_SRQ, &server::handle_destroy_srq},
        {sp::OPEN_XRCD, &server::handle_open_xrcd},
        {sp::CLOSE_XRCD, &server::handle_close_xrcd},
        {sp::ATTACH_MCAST, &server::handle_mcast},
        {sp::DETACH_MCAST, &server::handle_mcast},
    };
    return h;
}

void server::handle_open(connection& c, kernel_node& k, uint32_t, message& m) {
    if (c.ctx) return reply_status(c, EBUSY);
    return open(c, k, m);
}

void server::handle_mmio_read32(connection& c, kernel_node& k, uint32_t op, message& m) {
    // The provider reads one register, REG_HCA_ID, to order a CQ arm behind its doorbell
    // (req_notify_cq); the command and interrupt registers are the kernel's.
    const auto* r = request_as<sp::u64_req>(m);
    if (!r) return malformed(c, op);
    if (r->value != hw::REG_HCA_ID) {
        log(c, "MMIO read at BAR0 offset " + hex_address(r->value) + ": refused");
        return reply_status(c, EINVAL);
    }
    try {
        const uint32_t v = k.sw->driver.bus().mmio_read32(r->value);
        return reply_with(c, 0, v);
    } catch (const sc_report& e) {
        log(c, std::string("MMIO read failed: ") + e.what());
        return reply_status(c, EIO);
    }
}

void server::handle_now(connection& c, kernel_node& k, uint32_t op, message& m) {
    if (!bare(m)) return malformed(c, op);
    return reply_with(c, 0, uint64_t(k.sw->driver.bus().now_ns()));
}

void server::handle_sleep(connection& c, kernel_node& k, uint32_t op, message& m) {
    const auto* r = request_as<sp::u64_req>(m);
    if (!r || r->value > MAX_SLEEP_NS) return malformed(c, op);
    k.lock->unlock();  // sleeping holds nothing, and ends early when the client is gone
    const sc_time until = sc_time_stamp() + sc_time(double(r->value), SC_NS);
    while (!c.hangup && sc_time_stamp() < until) wait(until - sc_time_stamp(), c.wake);
    k.lock->lock();
    return reply_status(c, 0);
}

void server::handle_query_device(connection& c, kernel_node&, uint32_t op, message& m) {
    if (!bare(m)) return malformed(c, op);
    verbs::ibv_device_attr a{};
    const int e = verbs::ibv_query_device(c.ctx, &a);
    return reply_with(c, e, a);
}

void server::handle_query_port(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::u64_req>(m);
    if (!r || r->value > 255) return malformed(c, op);
    verbs::ibv_port_attr a{};
    const int e = verbs::ibv_query_port(c.ctx, uint8_t(r->value), &a);
    return reply_with(c, e, a);
}

void server::handle_query_gid(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::index_req>(m);
    if (!r || r->port > 255) return malformed(c, op);
    verbs::ibv_gid g{};
    const int e = verbs::ibv_query_gid(c.ctx, uint8_t(r->port), r->index, &g);
    return reply_with(c, e, g);
}

void server::handle_query_pkey(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::index_req>(m);
    if (!r || r->port > 255) return malformed(c, op);
    uint16_t key = 0;
    const int e = verbs::ibv_query_pkey(c.ctx, uint8_t(r->port), r->index, &key);
    return reply_with(c, e, key);
}

void server::handle_alloc_pd(connection& c, kernel_node&, uint32_t op, message& m) {
    if (!bare(m)) return malformed(c, op);
    verbs::ibv_pd* pd = verbs::ibv_alloc_pd(c.ctx);
    if (!pd) return reply_status(c, errno ? errno : ENOMEM);
    const uint64_t id = c.next_id++;
    c.pds[id] = pd;
    if (rec_) rec_->alloc_pd(c.node, pd);
    return reply_with(c, 0, id);
}

void server::handle_dealloc_pd(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.pds, [](verbs::ibv_pd* pd) { return verbs::ibv_dealloc_pd(pd); },
        [&](uint64_t id, verbs::ibv_pd*) { c.pds.erase(id); });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::handle_map_run(connection& c, kernel_node& k, uint32_t op, message& m) {
    const auto* r = request_as<sp::run_req>(m);
    if (!r || !r->pages || r->pages > (uint64_t(1) << 22) || (r->va & (fw::PAGE_BYTES - 1)))
        return malformed(c, op);
    const uint64_t bytes = r->pages * fw::PAGE_BYTES;
    if (r->va > ~uint64_t(0) - (bytes - 1)) return malformed(c, op);  // past 2^64
    uint64_t held = 0;  // by this client's process, all its contexts
    for (const auto& o : conns_) held += o->pid == c.pid ? o->mapped : 0;
    if (bytes > limits_.mapped_bytes || held > limits_.mapped_bytes - bytes) {
        log(c, "MAP_RUN of " + std::to_string(bytes) + " bytes refused: the process has " +
                   std::to_string(held) + " of its " + std::to_string(limits_.mapped_bytes) +
                   " (--max-mapped-mib-per-client)");
        return reply_status(c, EDQUOT);
    }
    uint64_t pa = 0;
    if (!k.sw->os.alloc_contiguous(bytes, fw::PAGE_BYTES, &pa)) return reply_status(c, ENOMEM);
    const int e = c.as->map_run(r->va, pa, r->pages);
    if (e)
        k.sw->os.free(pa);
    else
        c.mapped += bytes;
    return reply_with(c, e, pa);
}

void server::handle_unmap_run(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::run_req>(m);
    if (!r) return malformed(c, op);
    const int e = c.as->unmap_run(r->va, r->pages);
    if (!e) c.mapped -= r->pages * fw::PAGE_BYTES;
    return reply_status(c, e);
}

void server::handle_reg_mr(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::reg_mr_req>(m);
    verbs::ibv_pd* pd = r ? lookup(c.pds, r->pd) : nullptr;
    if (!pd) return malformed(c, op);
    verbs::ibv_mr* mr = verbs::ibv_reg_mr(pd, r->va, r->length, r->access);
    if (!mr) return reply_status(c, errno ? errno : EINVAL);
    const uint64_t id = c.next_id++;
    c.mrs[id] = mr;
    if (rec_) rec_->reg_mr(c.node, pd, mr, *c.as, r->va, r->length, r->access);
    return reply_with(c, 0, sp::reg_mr_rep{id, mr->lkey, mr->rkey});
}

void server::handle_dereg_mr(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.mrs,
        [&](verbs::ibv_mr* mr) {
            if (rec_) rec_->keep_contents(c.node, mr, *c.as);  // for the trace's end record
            const int e = verbs::ibv_dereg_mr(mr);
            if (rec_) rec_->dereg_mr(c.node, mr, e);  // mr only names it (freed on success)
            return e;
        },
        [&](uint64_t id, verbs::ibv_mr*) { c.mrs.erase(id); });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::handle_rereg_mr(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::rereg_mr_req>(m);
    verbs::ibv_mr* mr = r ? lookup(c.mrs, r->id) : nullptr;
    verbs::ibv_pd* pd = r && (r->flags & verbs::IBV_REREG_MR_CHANGE_PD) ? lookup(c.pds, r->pd) : nullptr;
    if (!mr || (r->flags & verbs::IBV_REREG_MR_CHANGE_PD && !pd)) return malformed(c, op);
    const int e = verbs::ibv_rereg_mr(mr, r->flags, pd, r->va, r->length, r->access);
    return reply_with(c, e, sp::reg_mr_rep{r->id, mr->lkey, mr->rkey});
}

void server::handle_alloc_mw(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::alloc_mw_req>(m);
    verbs::ibv_pd* pd = r ? lookup(c.pds, r->pd) : nullptr;
    if (!pd) return malformed(c, op);
    verbs::ibv_mw* mw = verbs::ibv_alloc_mw(pd, verbs::ibv_mw_type(r->type));
    if (!mw) return reply_status(c, errno ? errno : EINVAL);
    const uint64_t id = c.next_id++;
    c.mws[id] = mw;
    return reply_with(c, 0, sp::mw_rep{id, mw->rkey, mw->handle});
}

void server::handle_dealloc_mw(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.mws, [](verbs::ibv_mw* mw) { return verbs::ibv_dealloc_mw(mw); },
        [&](uint64_t id, verbs::ibv_mw*) { c.mws.erase(id); });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::handle_next_key(connection& c, kernel_node& k, uint32_t op, message& m) {
    const auto* r = request_as<sp::u64_req>(m);
    bool owned = false;  // only a window of this context
    for (auto& kv : c.mws) owned |= r && kv.second->handle == r->value;
    if (!owned) return malformed(c, op);
    return reply_with(c, 0, k.sw->driver.next_key_byte(uint32_t(r->value)));
}

void server::handle_create_cq(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::create_cq_req>(m);
    if (!r) return malformed(c, op);
    const int chan = r->has_channel ? take_fd(m) : -1;
    if (r->has_channel && chan < 0) return malformed(c, op);
    verbs::ibv_cq* cq = verbs::ibv_create_cq(c.ctx, r->cqe, nullptr, nullptr, r->comp_vector);
    if (!cq) {
        if (chan >= 0) close(chan);
        return reply_status(c, errno ? errno : EINVAL);
    }
    const uint64_t id = c.next_id++;
    c.cqs[id] = cq;
    c.user[cq] = r->user_handle;
    ops_.watch_cq(c.node, cq);
    if (rec_) rec_->create_cq(c.node, cq, r->cqe);
    if (chan >= 0) c.channel[cq] = chan;  // non-blocking: own_pipe
    return reply_with(c, 0, cq_reply(id, cq));
}

void server::handle_destroy_cq(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.cqs, [](verbs::ibv_cq* cq) { return verbs::ibv_destroy_cq(cq); },
        [&](uint64_t id, verbs::ibv_cq* cq) { forget_cq(c, id, cq); });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::handle_resize_cq(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::resize_cq_req>(m);
    verbs::ibv_cq* cq = r ? lookup(c.cqs, r->id) : nullptr;
    if (!cq) return malformed(c, op);
    cq->consumer = r->consumer;
    const int e = verbs::ibv_resize_cq(cq, r->cqe);
    if (!e) ops_.watch_cq(c.node, cq);  // its new ring
    return reply_with(c, e, cq_reply(r->id, cq));
}

void server::handle_create_qp(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::create_qp_req>(m);
    if (!r) return malformed(c, op);
    verbs::ibv_qp_init_attr ia{};
    if (r->qp_type == verbs::IBV_QPT_XRC_SEND || r->qp_type == verbs::IBV_QPT_XRC_RECV)
        return create_xrc_qp(c, op, *r);
    verbs::ibv_pd* pd = lookup(c.pds, r->pd);
    ia.send_cq = lookup(c.cqs, r->send_cq);
    ia.recv_cq = lookup(c.cqs, r->recv_cq);
    ia.srq = r->srq ? lookup(c.srqs, r->srq) : nullptr;
    if (!pd || !ia.send_cq || !ia.recv_cq || (r->srq && !ia.srq) || r->xrcd) return malformed(c, op);
    ia.cap = r->cap;
    ia.qp_type = verbs::ibv_qp_type(r->qp_type);
    ia.sq_sig_all = r->sq_sig_all;
    verbs::ibv_qp* qp = verbs::ibv_create_qp(pd, &ia);
    if (!qp) return reply_status(c, errno ? errno : EINVAL);
    const uint64_t id = c.next_id++;
    c.qps[id] = qp;
    c.user[qp] = r->user_handle;
    ops_.add_qp(c.node, c.pid, qp);
    if (rec_) rec_->create_qp(c.node, pd, qp, *r);
    return reply_with(c, 0, qp_reply(id, qp));
}

void server::handle_modify_qp(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::modify_qp_req>(m);
    verbs::ibv_qp* qp = r ? lookup(c.qps, r->id) : nullptr;
    if (!qp) return malformed(c, op);
    set_counts(qp, r->counts);
    verbs::ibv_qp_attr a = r->attr;
    const int e = verbs::ibv_modify_qp(qp, &a, r->mask);
    ops_.sync_qp(c.node, qp);
    if (rec_) rec_->modify_qp(c.node, qp, r->attr, r->mask, e);
    return reply_with(c, e, qp_reply(r->id, qp));
}

void server::handle_query_qp(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::modify_qp_req>(m);
    verbs::ibv_qp* qp = r ? lookup(c.qps, r->id) : nullptr;
    if (!qp) return malformed(c, op);
    set_counts(qp, r->counts);
    sp::query_qp_rep q{};
    verbs::ibv_qp_init_attr ia{};
    const int e = verbs::ibv_query_qp(qp, &q.attr, r->mask, &ia);
    q.cap = ia.cap;
    q.sq_sig_all = ia.sq_sig_all;
    return reply_with(c, e, q);
}

void server::handle_destroy_qp(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.qps,
        [&](verbs::ibv_qp* qp) {
            const int e = verbs::ibv_destroy_qp(qp);
            if (rec_) rec_->destroy_qp(c.node, qp, e);  // qp only names it (freed on success)
            return e;
        },
        [&](uint64_t id, verbs::ibv_qp* qp) {
            c.qps.erase(id);
            c.user.erase(qp);
        });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::create_xrc_qp(connection& c, uint32_t op, const sp::create_qp_req& r) {
    // An initiator: a PD and a send CQ (the receive CQ is the send CQ's stand-in); a target: its
    // domain only.
    const bool tgt = r.qp_type == verbs::IBV_QPT_XRC_RECV;
    verbs::ibv_pd* pd = tgt ? nullptr : lookup(c.pds, r.pd);
    verbs::ibv_qp_init_attr ia{};
    ia.send_cq = tgt ? nullptr : lookup(c.cqs, r.send_cq);
    ia.recv_cq = ia.send_cq;
    ia.xrcd = tgt ? lookup(c.xrcds, r.xrcd) : nullptr;
    if ((tgt ? !ia.xrcd || r.pd || r.send_cq : !pd || !ia.send_cq || r.xrcd) || r.recv_cq || r.srq)
        return malformed(c, op);
    ia.cap = r.cap;
    ia.qp_type = verbs::ibv_qp_type(r.qp_type);
    ia.sq_sig_all = r.sq_sig_all;
    verbs::ibv_qp* qp = verbs::ibv_create_qp(pd, &ia);
    if (!qp) return reply_status(c, errno ? errno : EINVAL);
    const uint64_t id = c.next_id++;
    c.qps[id] = qp;
    c.user[qp] = r.user_handle;
    ops_.add_qp(c.node, c.pid, qp);
    if (rec_) rec_->create_qp(c.node, pd, qp, r);
    return reply_with(c, 0, qp_reply(id, qp));
}

void server::handle_open_xrcd(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::open_xrcd_req>(m);
    if (!r) return malformed(c, op);
    verbs::ibv_xrcd* x = verbs::ibv_open_xrcd(c.ctx);
    if (!x) return reply_status(c, errno ? errno : ENOMEM);
    const uint64_t id = c.next_id++;
    c.xrcds[id] = x;
    if (rec_) rec_->open_xrcd(c.node, x);
    return reply_with(c, 0, sp::xrcd_rep{id, x->handle, 0});
}

void server::handle_close_xrcd(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.xrcds,
        [&](verbs::ibv_xrcd* x) {
            const int e = verbs::ibv_close_xrcd(x);
            if (rec_) rec_->close_xrcd(c.node, x, e);  // x only names it (freed on success)
            return e;
        },
        [&](uint64_t id, verbs::ibv_xrcd*) { c.xrcds.erase(id); });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::handle_create_srq(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::create_srq_req>(m);
    verbs::ibv_pd* pd = r ? lookup(c.pds, r->pd) : nullptr;
    if (!pd) return malformed(c, op);
    verbs::ibv_srq_init_attr ia{};
    ia.attr = r->attr;
    ia.srq_type = verbs::ibv_srq_type(r->srq_type);
    if (ia.srq_type == verbs::IBV_SRQT_XRC) {
        ia.xrcd = lookup(c.xrcds, r->xrcd);
        ia.cq = lookup(c.cqs, r->cq);
        if (!ia.xrcd || !ia.cq) return malformed(c, op);
    } else if (r->xrcd || r->cq) {
        return malformed(c, op);
    }
    verbs::ibv_srq* s = verbs::ibv_create_srq(pd, &ia);
    if (!s) return reply_status(c, errno ? errno : EINVAL);
    const uint64_t id = c.next_id++;
    c.srqs[id] = s;
    c.user[s] = r->user_handle;
    ops_.add_srq(c.node, s);
    if (rec_) rec_->create_srq(c.node, pd, s, r->attr);
    sp::srq_rep rep = srq_reply(id, s);
    rep.attr = ia.attr;
    return reply_with(c, 0, rep);
}

void server::handle_srq_attr(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::modify_srq_req>(m);
    verbs::ibv_srq* s = r ? lookup(c.srqs, r->id) : nullptr;
    if (!s) return malformed(c, op);
    s->ring.producer = r->producer;
    s->ring.completed = r->completed;
    verbs::ibv_srq_attr a = r->attr;
    const int e = op == sp::MODIFY_SRQ ? verbs::ibv_modify_srq(s, &a, r->mask) : verbs::ibv_query_srq(s, &a);
    sp::srq_rep rep = srq_reply(r->id, s);
    rep.attr = a;
    return reply_with(c, e, rep);
}

void server::handle_destroy_srq(connection& c, kernel_node&, uint32_t op, message& m) {
    const int e = destroy_named(
        m, c.srqs,
        [&](verbs::ibv_srq* s) {
            const int e = verbs::ibv_destroy_srq(s);
            if (rec_) rec_->destroy_srq(c.node, s, e);  // s only names it (freed on success)
            return e;
        },
        [&](uint64_t id, verbs::ibv_srq* s) {
            c.srqs.erase(id);
            c.user.erase(s);
        });
    if (e < 0) return malformed(c, op);
    return reply_status(c, e);
}

void server::handle_mcast(connection& c, kernel_node&, uint32_t op, message& m) {
    const auto* r = request_as<sp::mcast_req>(m);
    verbs::ibv_qp* qp = r ? lookup(c.qps, r->qp) : nullptr;
    if (!qp) return malformed(c, op);
    verbs::ibv_gid g{};
    std::memcpy(g.raw, r->gid, 16);
    const int e = op == sp::ATTACH_MCAST ? verbs::ibv_attach_mcast(qp, &g, r->lid)
                                         : verbs::ibv_detach_mcast(qp, &g, r->lid);
    return reply_status(c, e);
}

void server::set_counts(verbs::ibv_qp* qp, const sp::ring_counts& n) {
    qp->sq.producer = n.sq_producer;
    qp->sq.completed = n.sq_completed;
    qp->rq.producer = n.rq_producer;
    qp->rq.completed = n.rq_completed;
}

void server::forget_cq(connection& c, uint64_t id, verbs::ibv_cq* cq) {
    ops_.unwatch_cq(cq);
    auto it = c.channel.find(cq);
    if (it != c.channel.end()) {
        close(it->second);
        c.channel.erase(it);
    }
    c.user.erase(cq);
    c.cqs.erase(id);
}

}  // namespace hcasim::serve
