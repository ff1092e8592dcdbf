#include "testbench/serve/recording.h"

#include <cstring>

#include "model/core/stats.h"
#include "tlm_if/mmio_map.h"
#include "tlm_if/wqe.h"

namespace hcasim::serve {

using trace::json;

namespace {

/// The verbs opcode of a WQE opcode a trace can say; false for the others (bind, fast register).
bool wr_opcode_of_wqe(uint8_t op, verbs::ibv_wr_opcode* out) {
    static const std::pair<uint8_t, verbs::ibv_wr_opcode> map[] = {
        {hw::WQE_OP_SEND, verbs::IBV_WR_SEND},
        {hw::WQE_OP_SEND_IMM, verbs::IBV_WR_SEND_WITH_IMM},
        {hw::WQE_OP_RDMA_WRITE, verbs::IBV_WR_RDMA_WRITE},
        {hw::WQE_OP_RDMA_WRITE_IMM, verbs::IBV_WR_RDMA_WRITE_WITH_IMM},
        {hw::WQE_OP_RDMA_READ, verbs::IBV_WR_RDMA_READ},
        {hw::WQE_OP_CMP_SWAP, verbs::IBV_WR_ATOMIC_CMP_AND_SWP},
        {hw::WQE_OP_FETCH_ADD, verbs::IBV_WR_ATOMIC_FETCH_AND_ADD},
        {hw::WQE_OP_SEND_INV, verbs::IBV_WR_SEND_WITH_INV},
        {hw::WQE_OP_LOCAL_INV, verbs::IBV_WR_LOCAL_INV},
    };
    for (const auto& [w, v] : map)
        if (w == op) {
            *out = v;
            return true;
        }
    return false;
}

/// The buffer a node's inline sends are said to come from (a trace's SGEs name a region).
constexpr uint64_t INLINE_VA = ~uint64_t(0) - 4095;
constexpr uint32_t INLINE_BYTES = hw::INLINE_LEN_MASK + 1;
/// The largest `fill` written: its line (two hex digits a byte) stays under the 16 MiB a replay
/// reads.
constexpr uint64_t MAX_FILL_BYTES = uint64_t(4) << 20;

}  // namespace

recording::recording(const std::string& path, machine& m)
    : m_(m), rec_(path, unsigned(m.size())), inline_pd_(m.size()), scratch_made_(m.size()) {
    rec_.header(trace::effective_config(), 1, "serve");
    rec_.comment("# hcasim serve: the clients of each node are that node's application");
}

void recording::alloc_pd(unsigned node, const verbs::ibv_pd* pd) {
    rec_.call(node, "alloc_pd", {{"ret", rec_.add(node, pd, "pd")}});
}

void recording::reg_mr(unsigned node, const verbs::ibv_pd* pd, const verbs::ibv_mr* mr,
                       const fw::address_space& as, uint64_t va, uint64_t len, unsigned access) {
    const std::string buf = rec_.add_buffer(node, va, len);
    rec_.call(node, "alloc", {{"len", len}, {"align", 4096}, {"ret", buf}});
    if (len > MAX_FILL_BYTES) {
        rec_.comment("# node" + std::to_string(node) + " " + buf + ": " + std::to_string(len) +
                     " bytes, too many to fill: its contents are left out");
    } else if (std::vector<uint8_t> bytes(len); as.read(va, bytes.data(), len)) {
        rec_.call(node, "fill", {{"buf", buf}, {"hex", trace::hex(bytes.data(), bytes.size())}});
    }
    const std::string name = rec_.add(node, mr, "mr");
    rec_.add_mr(node, mr, name);
    buffer_of_[{node, name}] = buf;
    rec_.call(node, "reg_mr",
              {{"pd", rec_.name_of(node, pd)},
               {"buf", buf},
               {"len", len},
               {"access", trace::access_flags(access)},
               {"ret", name},
               {"lkey", mr->lkey},
               {"rkey", mr->rkey}});
}

void recording::keep_contents(unsigned node, const verbs::ibv_mr* mr, const fw::address_space& as) {
    std::vector<uint8_t>& bytes = contents_[{node, mr->addr}];
    bytes.resize(mr->length);
    if (!as.read(mr->addr, bytes.data(), bytes.size())) bytes.assign(bytes.size(), 0);
}

void recording::dereg_mr(unsigned node, const verbs::ibv_mr* mr, int ret) {
    rec_.call(node, "dereg_mr", {{"mr", rec_.name_of(node, mr)}, {"ret", ret}});
}

void recording::create_cq(unsigned node, const verbs::ibv_cq* cq, int cqe) {
    rec_.call(node, "create_cq", {{"cqe", cqe}, {"ret", rec_.add(node, cq, "cq")}});
}

void recording::open_xrcd(unsigned node, const verbs::ibv_xrcd* x) {
    rec_.call(node, "open_xrcd", {{"ret", rec_.add(node, x, "xrcd")}});
}

void recording::close_xrcd(unsigned node, const verbs::ibv_xrcd* x, int ret) {
    rec_.call(node, "close_xrcd", {{"xrcd", rec_.name_of(node, x)}, {"ret", ret}});
}

void recording::create_srq(unsigned node, const verbs::ibv_pd* pd, const verbs::ibv_srq* s,
                           const verbs::ibv_srq_attr& a) {
    srqs_[{node, s->handle}] = queue{nullptr, s, 0, 0};
    const std::string name = rec_.add(node, s, "srq");
    rec_.add_srq(node, s, name);
    json f = {{"pd", rec_.name_of(node, pd)}, {"max_wr", a.max_wr}, {"max_sge", a.max_sge}};
    if (s->xrcd) {
        f["type"] = trace::srq_type_name(verbs::IBV_SRQT_XRC);
        f["xrcd"] = rec_.name_of(node, s->xrcd);
        f["cq"] = rec_.name_of(node, s->cq);
    }
    f["ret"] = name;
    if (s->xrcd) f["srq_num"] = s->handle;
    rec_.call(node, "create_srq", f);
}

void recording::destroy_srq(unsigned node, const verbs::ibv_srq* s, int ret) {
    rec_.call(node, "destroy_srq", {{"srq", rec_.name_of(node, s)}, {"ret", ret}});
}

void recording::create_qp(unsigned node, const verbs::ibv_pd* pd, const verbs::ibv_qp* qp,
                          const serve_proto::create_qp_req& r) {
    const std::string name = rec_.add(node, qp, "qp");
    rec_.add_qp(node, qp, name);
    qps_[{node, qp->qp_num}] = queue{qp, qp->srq, 0, 0};
    json f;
    // An XRC target has its domain only; an initiator no receive side (its receive CQ is the send
    // CQ's stand-in).
    f[qp->xrcd ? "xrcd" : "pd"] = qp->xrcd ? rec_.name_of(node, qp->xrcd) : rec_.name_of(node, pd);
    f["type"] = trace::qp_type_name(qp->qp_type);
    if (!qp->xrcd) f["send_cq"] = rec_.name_of(node, qp->send_cq);
    if (!qp->xrcd && qp->qp_type != verbs::IBV_QPT_XRC_SEND) f["recv_cq"] = rec_.name_of(node, qp->recv_cq);
    if (qp->srq) f["srq"] = rec_.name_of(node, qp->srq);
    f["cap"] = {{"max_send_wr", r.cap.max_send_wr},
                {"max_recv_wr", r.cap.max_recv_wr},
                {"max_send_sge", r.cap.max_send_sge},
                {"max_recv_sge", r.cap.max_recv_sge},
                {"max_inline_data", r.cap.max_inline_data}};
    f["sq_sig_all"] = r.sq_sig_all != 0;
    f["ret"] = name;
    f["qp_num"] = qp->qp_num;
    rec_.call(node, "create_qp", f);
}

void recording::modify_qp(unsigned node, const verbs::ibv_qp* qp, const verbs::ibv_qp_attr& a, int mask,
                          int ret) {
    rec_.call(node, "modify_qp",
              {{"qp", rec_.name_of(node, qp)}, {"attr", rec_.qp_attr(node, a, mask)}, {"ret", ret}});
    auto it = qps_.find({node, qp->qp_num});
    if (it != qps_.end()) {  // after a Reset the counters start again
        it->second.sq = uint16_t(qp->sq.producer);
        it->second.rq = uint16_t(qp->rq.producer);
    }
}

void recording::destroy_qp(unsigned node, const verbs::ibv_qp* qp, int ret) {
    rec_.call(node, "destroy_qp", {{"qp", rec_.name_of(node, qp)}, {"ret", ret}});
}

std::vector<uint8_t> recording::read_ring(unsigned node, const verbs::ibv_wq_ring& ring,
                                          uint16_t counter) const {
    std::vector<uint8_t> w(size_t(1) << ring.log_stride);
    const uint64_t slot = counter & ((uint64_t(1) << ring.log_size) - 1);
    m_.at(node).memory.read(ring.pa + (slot << ring.log_stride), w.data(), w.size());
    return w;
}

void recording::fill(unsigned node, const fw::address_space& as, const verbs::ibv_sge& s) {
    const json sg = rec_.sge(node, s);
    if (!sg.contains("mr") || s.length == 0 || s.length > MAX_FILL_BYTES) return;  // a raw SGE: no buffer
    std::vector<uint8_t> bytes(s.length);
    if (!as.read(s.addr, bytes.data(), bytes.size())) return;
    // The buffer under the region starts where the region does.
    rec_.call(node, "fill",
              {{"buf", buffer_of_[{node, sg["mr"].get<std::string>()}]},
               {"offset", sg["offset"]},
               {"hex", trace::hex(bytes.data(), bytes.size())}});
}

bool recording::send_wr(unsigned node, const fw::address_space& as, const verbs::ibv_qp* qp, const uint8_t* w,
                        size_t n, json* out) {
    hw::wqe_ctrl_seg ctrl;
    std::memcpy(&ctrl, w, sizeof ctrl);
    verbs::ibv_send_wr wr;
    if (!wr_opcode_of_wqe(ctrl.opcode, &wr.opcode)) return false;
    const size_t end = std::min<size_t>(n, size_t(ctrl.ds_count) * 16);
    size_t at = sizeof ctrl;
    wr.wr_id = ctrl.wr_id;
    wr.send_flags = (ctrl.flags & hw::WQE_FLAG_SIGNALED ? verbs::IBV_SEND_SIGNALED : 0) |
                    (ctrl.flags & hw::WQE_FLAG_SOLICITED ? verbs::IBV_SEND_SOLICITED : 0) |
                    (ctrl.flags & hw::WQE_FLAG_FENCE ? verbs::IBV_SEND_FENCE : 0) |
                    (ctrl.flags & hw::WQE_FLAG_INLINE ? verbs::IBV_SEND_INLINE : 0);
    wr.imm_data = wr.invalidate_rkey = ctrl.imm;
    wr.xrc_remote_srqn = ctrl.xrc_srqn;
    const bool atomic =
        wr.opcode == verbs::IBV_WR_ATOMIC_CMP_AND_SWP || wr.opcode == verbs::IBV_WR_ATOMIC_FETCH_AND_ADD;
    if (atomic || wr.opcode == verbs::IBV_WR_RDMA_WRITE || wr.opcode == verbs::IBV_WR_RDMA_WRITE_WITH_IMM ||
        wr.opcode == verbs::IBV_WR_RDMA_READ) {
        hw::wqe_raddr_seg ra;
        std::memcpy(&ra, w + at, sizeof ra);
        at += sizeof ra;
        wr.wr.rdma = {ra.remote_va, ra.rkey};
        wr.wr.atomic.remote_addr = ra.remote_va;
        wr.wr.atomic.rkey = ra.rkey;
    }
    if (atomic) {
        hw::wqe_atomic_seg as_;
        std::memcpy(&as_, w + at, sizeof as_);
        at += sizeof as_;
        wr.wr.atomic.compare_add = wr.opcode == verbs::IBV_WR_ATOMIC_CMP_AND_SWP ? as_.compare : as_.swap_add;
        wr.wr.atomic.swap = as_.swap_add;
    }
    std::vector<verbs::ibv_sge> sges;
    json inline_sg;
    if (ctrl.flags & hw::WQE_FLAG_INLINE) {
        hw::wqe_inline_seg in;
        std::memcpy(&in, w + at, sizeof in);
        const uint32_t len =
            std::min<uint32_t>(in.byte_count & hw::INLINE_LEN_MASK, uint32_t(end - at - sizeof in));
        // Inline data has no address: the trace takes it from a scratch region of the node's own.
        if (!scratch_made_[node]) {
            scratch_made_[node] = 1;
            rec_.add_buffer(node, INLINE_VA, INLINE_BYTES, "inline_buf");
            rec_.call(node, "alloc", {{"len", INLINE_BYTES}, {"align", 4096}, {"ret", "inline_buf"}});
            rec_.call(node, "reg_mr",
                      {{"pd", inline_pd_[node]},
                       {"buf", "inline_buf"},
                       {"len", INLINE_BYTES},
                       {"access", json::array()},
                       {"ret", "inline_mr"}});
        }
        std::vector<uint8_t>& kept = contents_[{node, INLINE_VA}];
        kept.resize(INLINE_BYTES);
        std::memcpy(kept.data(), w + at + sizeof in, len);
        rec_.call(node, "fill", {{"buf", "inline_buf"}, {"hex", trace::hex(w + at + sizeof in, len)}});
        inline_sg = json::array({json{{"mr", "inline_mr"}, {"offset", 0}, {"len", len}}});
    } else {
        for (; at + sizeof(hw::wqe_data_seg) <= end; at += sizeof(hw::wqe_data_seg)) {
            hw::wqe_data_seg d;
            std::memcpy(&d, w + at, sizeof d);
            sges.push_back({d.addr, d.byte_count, d.lkey});
        }
        const bool reads_local = wr.opcode != verbs::IBV_WR_RDMA_READ && !atomic;
        if (reads_local)
            for (const auto& s : sges) fill(node, as, s);
    }
    wr.sg_list = sges.data();
    wr.num_sge = int(sges.size());
    // An XRC initiator names an SRQ of the node its messages go to (by the LID it was connected to).
    const bool xrc = qp->qp_type == verbs::IBV_QPT_XRC_SEND;
    unsigned dest = ~0u;
    for (unsigned i = 0; xrc && i < m_.size(); ++i)
        if (qp->attr.ah_attr.dlid >> m_.at(i).lmc() == m_.at(i).lid() >> m_.at(i).lmc()) dest = i;
    json j = rec_.send_wrs(node, &wr, xrc, dest).at(0);
    if (!inline_sg.is_null()) j["sg"] = inline_sg;
    *out = std::move(j);
    return true;
}

void recording::post_send(unsigned node, const fw::address_space& as, queue& q, uint16_t to) {
    json wrs = json::array();
    for (; q.sq != to; ++q.sq) {
        const std::vector<uint8_t> w = read_ring(node, q.qp->sq, q.sq);
        json j;
        if (send_wr(node, as, q.qp, w.data(), w.size(), &j))
            wrs.push_back(std::move(j));
        else
            rec_.comment("# node" + std::to_string(node) + " " + rec_.name_of(node, q.qp) +
                         ": a work request a trace cannot say (bind, fast register) left out");
    }
    if (!wrs.empty())
        rec_.call(node, "post_send", {{"qp", rec_.name_of(node, q.qp)}, {"wr", wrs}, {"ret", 0}});
}

void recording::post_recv(unsigned node, const verbs::ibv_wq_ring& ring, uint16_t from, uint16_t to,
                          const char* call, const std::string& name) {
    std::vector<verbs::ibv_recv_wr> wrs;
    std::vector<std::vector<verbs::ibv_sge>> sges;
    for (uint16_t c = from; c != to; ++c) {
        const std::vector<uint8_t> w = read_ring(node, ring, c);
        hw::wqe_recv_header h;
        std::memcpy(&h, w.data(), sizeof h);
        sges.emplace_back();
        for (size_t i = 0, at = sizeof h; i < h.num_sge && at + 16 <= w.size(); ++i, at += 16) {
            hw::wqe_data_seg d;
            std::memcpy(&d, w.data() + at, sizeof d);
            sges.back().push_back({d.addr, d.byte_count, d.lkey});
        }
        verbs::ibv_recv_wr r;
        r.wr_id = h.wr_id;
        wrs.push_back(r);
    }
    if (wrs.empty()) return;
    for (size_t i = 0; i < wrs.size(); ++i) {
        wrs[i].sg_list = sges[i].data();
        wrs[i].num_sge = int(sges[i].size());
        wrs[i].next = i + 1 < wrs.size() ? &wrs[i + 1] : nullptr;
    }
    rec_.call(node, call,
              {{std::string(call) == "post_recv" ? "qp" : "srq", name},
               {"wr", rec_.recv_wrs(node, wrs.data())},
               {"ret", 0}});
}

void recording::doorbell(unsigned node, const fw::address_space& as, uint64_t in_page, const uint8_t* data,
                         uint32_t bytes) {
    if (in_page == hw::UAR_INLINE_WQE && bytes >= sizeof(hw::wqe_ctrl_seg)) {
        hw::wqe_ctrl_seg ctrl;
        std::memcpy(&ctrl, data, sizeof ctrl);
        auto it = qps_.find({node, ctrl.qpn & 0xFFFFFFu});
        if (it == qps_.end() || it->second.qp->qp_type == verbs::IBV_QPT_UD) return;
        if (inline_pd_[node].empty()) inline_pd_[node] = rec_.name_of(node, it->second.qp->pd);
        json j;
        if (send_wr(node, as, it->second.qp, data, bytes, &j))
            rec_.call(node, "post_send",
                      {{"qp", rec_.name_of(node, it->second.qp)}, {"wr", json::array({j})}, {"ret", 0}});
        it->second.sq = uint16_t(ctrl.wqe_index + 1);
        return;
    }
    if (bytes != 8) return;
    uint64_t v;
    std::memcpy(&v, data, 8);
    const std::pair<unsigned, uint32_t> k{node, hw::doorbell_qpn(v)};
    const uint16_t to = hw::doorbell_producer(v);
    if (in_page == hw::UAR_SRQ_DOORBELL) {
        auto it = srqs_.find(k);
        if (it == srqs_.end()) return;
        post_recv(node, it->second.srq->ring, it->second.rq, to, "post_srq_recv",
                  rec_.name_of(node, it->second.srq));
        it->second.rq = to;
        return;
    }
    auto it = qps_.find(k);
    if (it == qps_.end()) return;
    queue& q = it->second;
    if (q.qp->qp_type == verbs::IBV_QPT_UD) {
        rec_.comment("# node" + std::to_string(node) + " " + rec_.name_of(node, q.qp) +
                     ": a post on a UD QP left out (its address handles stay in the application)");
        (in_page == hw::UAR_SQ_DOORBELL ? q.sq : q.rq) = to;
        return;
    }
    if (inline_pd_[node].empty()) inline_pd_[node] = rec_.name_of(node, q.qp->pd);
    if (in_page == hw::UAR_SQ_DOORBELL) {
        post_send(node, as, q, to);
    } else if (in_page == hw::UAR_RQ_DOORBELL) {
        post_recv(node, q.qp->rq, q.rq, to, "post_recv", rec_.name_of(node, q.qp));
        q.rq = to;
    }
}

void recording::completion(unsigned node, const void* cq, const hw::cqe& e) {
    // The fields a trace's completion holds (ibv_poll_cq fills the same from the CQE).
    const verbs::ibv_wc w{e.wr_id,
                          verbs::ibv_wc_status(e.status),
                          verbs::ibv_wc_opcode(e.opcode),
                          0,
                          e.byte_len,
                          e.imm,
                          e.qpn,
                          e.src_qp,
                          e.flags,
                          0,
                          0,
                          0,
                          0,
                          0};
    rec_.call(node, "poll_cq",
              {{"cq", rec_.name_of(node, cq)}, {"ret", 1}, {"wc", json::array({rec_.wc(node, w)})}});
}

void recording::end() {
    json counters = json::object();
    for (const counter* c : stats_registry::instance().counters())
        if (c->value()) counters[c->key()] = c->value();
    rec_.end(
        [&](unsigned node, uint64_t va, uint8_t* dst, uint64_t n) {
            const auto it = contents_.find({node, va});
            std::memset(dst, 0, n);
            if (it != contents_.end())
                std::memcpy(dst, it->second.data(), std::min<uint64_t>(n, it->second.size()));
        },
        counters);
}

}  // namespace hcasim::serve
