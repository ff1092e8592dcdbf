#include "testbench/serve/op_latency.h"

#include <algorithm>
#include <cstring>

#include "testbench/cli/report.h"
#include "testbench/replay/verbs_trace.h"
#include "tlm_if/mmio_map.h"
#include "tlm_if/wqe.h"

namespace hcasim::serve {

using namespace sc_core;

void op_latency::distribution::add(uint64_t ps) {
    min_ps = count ? std::min(min_ps, ps) : ps;
    max_ps = count ? std::max(max_ps, ps) : ps;
    sum_ps += ps;
    ++count;
    const double us = double(ps) / 1e6;
    if (reservoir.size() < RESERVOIR) {
        reservoir.push_back(us);
        return;
    }
    // Algorithm R: the count-th sample replaces a random one with probability RESERVOIR / count.
    // splitmix64, seeded alike in every run: the same run reports the same figures.
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    if (const uint64_t j = z % count; j < RESERVOIR) reservoir[j] = us;
}

void op_latency::work_queue::post_up_to(uint16_t to, uint64_t ps) {
    // A doorbell may cover more WQEs than the ring holds only if it is wrong: the last ring's
    // worth are the ones it can have posted.
    const uint16_t n = uint16_t(to - producer);
    const uint16_t first = n > posted.size() ? uint16_t(to - posted.size()) : producer;
    for (uint16_t c = first; c != to; ++c) post(c, ps);
    producer = to;
}

void op_latency::add_qp(unsigned node, int pid, const verbs::ibv_qp* qp) {
    auto e = std::make_unique<qp_entry>();
    e->pid = pid;
    e->node = node;
    e->qp_num = qp->qp_num;
    e->srqn = qp->srq ? qp->srq->handle : UINT32_MAX;
    e->sq.resize(qp->sq.log_size);
    e->rq.resize(qp->rq.log_size);
    live_qps_[{node, qp->qp_num}] = e.get();
    qps_.push_back(std::move(e));
}

void op_latency::add_srq(unsigned node, const verbs::ibv_srq* s) {
    srqs_[{node, s->handle}].resize(s->ring.log_size);
}

void op_latency::sync_qp(unsigned node, const verbs::ibv_qp* qp) {
    const auto it = live_qps_.find({node, qp->qp_num});
    if (it == live_qps_.end()) return;
    it->second->sq.producer = uint16_t(qp->sq.producer);
    it->second->rq.producer = uint16_t(qp->rq.producer);
}

void op_latency::doorbell(unsigned node, uint64_t in_page, const uint8_t* data, uint32_t bytes,
                          const sc_time& at) {
    const uint64_t ps = at.value();  // the kernel's resolution is 1 ps (sim_time.h)
    if (in_page == hw::UAR_INLINE_WQE && bytes >= sizeof(hw::wqe_ctrl_seg)) {
        hw::wqe_ctrl_seg ctrl;
        std::memcpy(&ctrl, data, sizeof ctrl);
        const auto it = live_qps_.find({node, ctrl.qpn & 0xFFFFFFu});
        if (it == live_qps_.end()) return;
        it->second->sq.post(ctrl.wqe_index, ps);
        it->second->sq.producer = uint16_t(ctrl.wqe_index + 1);
        return;
    }
    if (bytes != 8 ||
        (in_page != hw::UAR_SQ_DOORBELL && in_page != hw::UAR_RQ_DOORBELL && in_page != hw::UAR_SRQ_DOORBELL))
        return;
    uint64_t v;
    std::memcpy(&v, data, 8);
    const key k{node, hw::doorbell_qpn(v)};
    if (in_page == hw::UAR_SRQ_DOORBELL) {
        if (const auto it = srqs_.find(k); it != srqs_.end())
            it->second.post_up_to(hw::doorbell_producer(v), ps);
        return;
    }
    const auto it = live_qps_.find(k);
    if (it == live_qps_.end()) return;
    (in_page == hw::UAR_SQ_DOORBELL ? it->second->sq : it->second->rq)
        .post_up_to(hw::doorbell_producer(v), ps);
}

void op_latency::watch_cq(unsigned node, const verbs::ibv_cq* cq) {
    std::shared_ptr<cq_watch>& w = cqs_[cq];
    host_memory& mem = m_.at(node).memory;
    if (w) {
        mem.unwatch(w->handle);  // resized: the same CQ in a new ring
    } else {
        w = std::make_shared<cq_watch>();
        w->node = node;
        w->cq = cq;
        sc_spawn(
            [this, w] {
                for (;;) {
                    wait(w->landed);
                    if (w->gone) return;
                    scan(*w);
                }
            },
            sc_gen_unique_name("cq_watch"));
    }
    w->pa = cq->ring_pa;
    w->log_size = cq->log_size;
    w->handle = mem.watch(w->pa, sizeof(hw::cqe) << w->log_size, &w->landed);
}

void op_latency::unwatch_cq(const verbs::ibv_cq* cq) {
    const auto it = cqs_.find(cq);
    if (it == cqs_.end()) return;
    cq_watch& w = *it->second;
    m_.at(w.node).memory.unwatch(w.handle);
    w.gone = true;
    w.landed.notify(SC_ZERO_TIME);  // its thread ends
    cqs_.erase(it);
}

void op_latency::scan(cq_watch& w) {
    host_memory& mem = m_.at(w.node).memory;
    const uint64_t mask = (uint64_t(1) << w.log_size) - 1;
    for (;;) {
        hw::cqe e;
        mem.read(w.pa + (w.seen & mask) * sizeof e, &e, sizeof e);
        if ((e.owner & hw::CQE_OWNER_BIT) != hw::cqe_owner_for(w.seen, w.log_size)) return;
        ++w.seen;
        if (on_cqe) on_cqe(w.node, w.cq, e);
        completed(w.node, e, sc_time_stamp().value());
    }
}

void op_latency::completed(unsigned node, const hw::cqe& e, uint64_t now_ps) {
    const auto it = live_qps_.find({node, e.qpn});
    if (it == live_qps_.end()) return;
    qp_entry& q = *it->second;
    if (e.status != hw::CQE_SUCCESS) {
        ++error_completions_;
        return;
    }
    work_queue* wq = &q.rq;
    if (e.owner & hw::CQE_IS_SEND) {
        wq = &q.sq;
    } else if (e.xrc_srqn || q.srqn != UINT32_MAX) {  // an XRC target's CQE names its SRQ
        const auto s = srqs_.find({node, e.xrc_srqn ? e.xrc_srqn - 1 : q.srqn});
        wq = s == srqs_.end() ? nullptr : &s->second;
    }
    const auto* posted = wq ? &wq->posted[e.wqe_counter & (wq->posted.size() - 1)] : nullptr;
    if (!posted || posted->first != e.wqe_counter || posted->second > now_ps) {
        ++unmatched_;  // a WQE posted before the server knew its queue, or a stale counter
        return;
    }
    q.ops[e.opcode].add(now_ps - posted->second);
}

nlohmann::ordered_json op_latency::to_json() const {
    using json = nlohmann::ordered_json;
    json ops = json::array();
    for (const auto& q : qps_)
        for (const auto& [opcode, d] : q->ops) {
            const size_result s = latency_stats(0, d.reservoir);
            ops.push_back({{"pid", q->pid},
                           {"node", q->node},
                           {"qp_num", q->qp_num},
                           {"opcode", trace::wc_opcode_name(opcode)},
                           {"count", d.count},
                           {"lat_min_us", double(d.min_ps) / 1e6},
                           {"lat_median_us", s.lat_typical_us},
                           {"lat_p99_us", s.lat_p99_us},
                           {"lat_max_us", double(d.max_ps) / 1e6},
                           {"lat_avg_us", double(d.sum_ps) / double(d.count) / 1e6},
                           {"exact", d.count <= RESERVOIR}});
        }
    return {{"ops", ops}, {"error_completions", error_completions_}, {"unmatched", unmatched_}};
}

void op_latency::print_summary(std::FILE* f) const {
    bool any = false;
    for (const auto& q : qps_)
        for (const auto& [opcode, d] : q->ops) {
            if (!any)
                std::fprintf(f,
                             " operations (simulated time from the post to its CQE, per QP and opcode):\n");
            any = true;
            const size_result s = latency_stats(0, d.reservoir);
            std::fprintf(f, " node%u QP 0x%06x (pid %d): %-18s %8llu ops, median %.3f us, p99 %.3f us\n",
                         q->node, q->qp_num, q->pid, trace::wc_opcode_name(opcode),
                         static_cast<unsigned long long>(d.count), s.lat_typical_us, s.lat_p99_us);
        }
}

}  // namespace hcasim::serve
