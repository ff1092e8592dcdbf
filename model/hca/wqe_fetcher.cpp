#include "model/hca/wqe_fetcher.h"
#include "model/core/sim_time.h"

#include <algorithm>
#include <cstring>

#include "model/hca/send_queue_sink.h"

namespace hcasim {

using namespace sc_core;

wqe_fetcher::wqe_fetcher(const sc_module_name& name, const sc_time& hca_clock, unsigned max_qps,
                         unsigned max_srqs)
    : sc_module(name),
      dma("dma"),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      batch_wqes("batch_wqes", 8, "WQEs", "WQEs read from one send ring in one DMA read at most", {1, 64}),
      parse_cycles("parse_cycles", 4, "cycles", "cycles to parse one WQE", {0, 100000}),
      srq_prefetch("srq_prefetch", 32, "WQEs",
                   "receive WQEs read ahead per shared receive queue (a power of two)", {1, 256}),
      doorbells("doorbells", "SQ and RQ doorbells received"),
      inline_wqes("inline_wqes", "WQEs received through the inline window (no fetch)"),
      fetches("fetches", "DMA reads of send WQEs"),
      wqes_fetched("wqes_fetched", "send WQEs read from host memory"),
      bytes_fetched("bytes_fetched", "bytes of send WQEs read"),
      recv_fetches("recv_fetches", "receive WQEs read for the responder"),
      malformed("malformed", "WQEs that failed parsing"),
      qpc_reads("qpc_reads", "QP contexts read from host memory (after a create or modify)"),
      srq_doorbells("srq_doorbells", "SRQ doorbells received"),
      srq_taken("srq_taken", "receive WQEs taken from shared receive queues"),
      srq_empty("srq_empty", "messages that found their QP's SRQ empty (or in error)"),
      srq_limit_events("srq_limit_events", "SRQ limit reached events raised"),
      srq_errors("srq_errors", "SRQs put in error (their ring could not be read)"),
      busy_ps("busy_ps", "ps the parser spent on send and receive WQEs (parse_cycles each; utilisation)"),
      qps_(max_qps),
      srqs_(max_srqs),
      ready_(max_qps) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    // Indexed by the 16-bit WQE counter mod the depth: a power of two keeps that one-to-one
    // across the counter's wrap.
    if (srq_prefetch & (srq_prefetch - 1))
        throw config_error(std::string(this->name()) +
                           ".srq_prefetch: " + std::to_string(srq_prefetch.get()) + " is not a power of two");
    parse_time_ = clock * double(parse_cycles.get());
    parse_ps_ = uint64_t(parse_time_ / sc_time(1, SC_PS) + 0.5);
    buf_.resize(size_t(batch_wqes) * 4096);
    done_.resize(batch_wqes);
    ok_.resize(batch_wqes);
    SC_THREAD(fetch_loop);
}

void wqe_fetcher::load_qp(const hw::qp_context& c) {
    if (c.qpn >= qps_.size()) return;
    qp_fetch& q = qps_[c.qpn];
    const bool was_valid = q.valid;
    q.valid = true;
    q.transport = c.transport;
    q.ctx_valid = false;
    if (!was_valid) q.producer = q.fetched = 0;
    set_state(c.qpn, c.state);
}

void wqe_fetcher::set_state(uint32_t qpn, uint8_t state) {
    if (qpn >= qps_.size()) return;
    qp_fetch& q = qps_[qpn];
    q.state = state;
    if (state == hw::QPS_RESET) {
        q.producer = q.fetched = 0;
        return;
    }
    if (may_fetch(q) && q.producer != q.fetched) make_ready(qpn);
}

bool wqe_fetcher::may_fetch(const qp_fetch& q) const {
    // C10-96: RTS processes; SQEr/Error flush (the engine completes them in error); SQD
    // fetches too (a go-back-N re-reads what was started before SQD; the engine starts nothing
    // new); Reset/Init/RTR never have send work (firmware refuses it).
    return q.valid && (q.state == hw::QPS_RTS || q.state == hw::QPS_SQD || q.state == hw::QPS_SQE ||
                       q.state == hw::QPS_ERR);
}

void wqe_fetcher::make_ready(uint32_t qpn) {
    qp_fetch& q = qps_[qpn];
    if (q.ready) return;
    q.ready = true;
    ready_[(ready_head_ + ready_count_) % ready_.size()] = qpn;
    ++ready_count_;
    work_.notify(SC_ZERO_TIME);
}

void wqe_fetcher::sq_doorbell(uint32_t qpn, uint16_t producer) {
    ++doorbells;
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp_fetch& q = qps_[qpn];
    // A producer counter may not run ahead of the ring: ignore a doorbell claiming more.
    if (q.ctx_valid && uint16_t(producer - q.fetched) > (1u << q.sq_log_size)) return;
    q.producer = producer;
    if (may_fetch(q) && q.producer != q.fetched) make_ready(qpn);
}

void wqe_fetcher::rq_doorbell(uint32_t qpn, uint16_t producer) {
    ++doorbells;
    if (qpn < qps_.size() && qps_[qpn].valid && engine_) engine_->rq_posted(qpn, producer);
}

void wqe_fetcher::inline_wqe(const uint8_t* p, uint32_t len) {
    ++inline_wqes;
    if (len < sizeof(hw::wqe_ctrl_seg)) return;
    hw::wqe_ctrl_seg ctrl;
    std::memcpy(&ctrl, p, sizeof ctrl);
    const uint32_t qpn = ctrl.qpn & 0xFFFFFF;
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp_fetch& q = qps_[qpn];
    // The window write is the doorbell for this WQE. It skips the fetch only when it is the
    // next WQE to fetch and the engine has room; otherwise the copy in the ring is fetched.
    q.producer = uint16_t(ctrl.wqe_index + 1);
    if (may_fetch(q) && q.fetched == ctrl.wqe_index && !q.ready && engine_ && engine_->has_room(qpn)) {
        parse_send(p, len, qpn, q.transport, wqe_);
        wqe_.ready = sim_now() + parse_time_;
        busy_ps += parse_ps_;
        if (wqe_.malformed) ++malformed;
        ++q.fetched;
        engine_->push_send(qpn, wqe_);
        return;
    }
    if (may_fetch(q) && q.producer != q.fetched) make_ready(qpn);
}

void wqe_fetcher::expect(uint32_t qpn) {
    if (qpn < qps_.size()) {
        __builtin_prefetch(&qps_[qpn]);
        if (engine_) engine_->expect(qpn);
    }
}

void wqe_fetcher::credit(uint32_t qpn) {
    if (qpn < qps_.size() && may_fetch(qps_[qpn]) && qps_[qpn].producer != qps_[qpn].fetched) make_ready(qpn);
}

void wqe_fetcher::load_ctx(uint32_t qpn, qp_fetch& q, sc_time& delay) {
    hw::qp_context c;
    ++qpc_reads;
    if (!dma.read(qpc_base_ + uint64_t(qpn) * sizeof c, &c, sizeof c, delay)) return;
    q.sq_base = c.sq_base;
    q.rq_base = c.rq_base;
    q.sq_log_size = c.sq_log_size;
    q.sq_log_stride = c.sq_log_stride;
    q.rq_log_size = c.rq_log_size;
    q.rq_log_stride = c.rq_log_stride;
    q.ctx_valid = true;
}

void wqe_fetcher::rewind(uint32_t qpn, uint16_t index) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp_fetch& q = qps_[qpn];
    if (q.ctx_valid && uint16_t(q.fetched - index) > (1u << q.sq_log_size))
        return;  // not a WQE this QP has fetched
    q.fetched = index;
    if (may_fetch(q) && q.producer != q.fetched) make_ready(qpn);
}

void wqe_fetcher::fetch_loop() {
    for (;;) {
        while (ready_count_ == 0) wait(work_);
        if (fetch_free_at_ > sim_now())
            wait(fetch_free_at_ - sim_now());  // the rest of the last batch's parse interval
        const uint32_t qpn = ready_[ready_head_];
        ready_head_ = (ready_head_ + 1) % ready_.size();
        --ready_count_;
        if (ready_count_) {  // the next QP's state into the host CPU's cache meanwhile (a hint)
            const uint32_t next = ready_[ready_head_];
            __builtin_prefetch(&qps_[next]);
            engine_->expect(next);
        }
        qp_fetch& q = qps_[qpn];
        q.ready = false;
        if (!may_fetch(q) || q.producer == q.fetched) continue;
        unsigned room = engine_->room(qpn);
        if (room == 0) continue;  // the engine's credit() makes it ready again
        if (!q.ctx_valid) {
            sc_time d = SC_ZERO_TIME;
            load_ctx(qpn, q, d);
            wait(d);
            if (!may_fetch(q) || !q.ctx_valid) continue;
            room = engine_->room(qpn);  // other QPs may have taken WQE buffer entries meanwhile
            if (room == 0) continue;
        }
        const uint32_t size = 1u << q.sq_log_size;
        const uint32_t stride = 1u << q.sq_log_stride;
        const uint32_t slot = q.fetched & (size - 1);
        uint32_t n = uint16_t(q.producer - q.fetched);
        n = std::min({n, unsigned(batch_wqes), room, size - slot, uint32_t(buf_.size() / stride)});
        const uint64_t base = q.sq_base + uint64_t(slot) * stride;
        if (stride <= hw::WQE_BASIC_BLOCK) {
            // Slots of one basic block: the batch is one contiguous read.
            sc_time delay = SC_ZERO_TIME;
            ++fetches;
            const bool ok = dma.read(base, buf_.data(), n * stride, delay);
            bytes_fetched += n * stride;
            for (uint32_t i = 0; i < n; ++i) {
                done_[i] = delay;
                ok_[i] = ok;
            }
        } else {
            // Larger slots are read as the WQE occupies them: its first 64-byte basic block
            // (the control segment says how long the WQE is, ds_count), then the rest of it in a
            // second read. The WQEs' reads are issued together and overlap on the link.
            for (uint32_t i = 0; i < n; ++i) {
                uint8_t* p = buf_.data() + size_t(i) * stride;
                sc_time d = SC_ZERO_TIME;
                ++fetches;
                bool ok = dma.read(base + uint64_t(i) * stride, p, hw::WQE_BASIC_BLOCK, d);
                const uint32_t len = std::min<uint32_t>(
                    stride, std::max<uint32_t>(
                                hw::WQE_BASIC_BLOCK,
                                uint32_t(reinterpret_cast<const hw::wqe_ctrl_seg*>(p)->ds_count) * 16));
                if (ok && len > hw::WQE_BASIC_BLOCK) {
                    ++fetches;
                    ok = dma.read(base + uint64_t(i) * stride + hw::WQE_BASIC_BLOCK, p + hw::WQE_BASIC_BLOCK,
                                  len - hw::WQE_BASIC_BLOCK, d);
                }
                std::memset(p + len, 0, stride - len);  // nothing of an earlier batch is parsed
                bytes_fetched += len;
                done_[i] = d;
                ok_[i] = ok;
            }
        }
        // Fetches are pipelined: the WQEs go to the engine now, stamped with the time their
        // DMA completes and they are parsed; the requester does not start one before that.
        const sc_time now = sim_now();
        for (uint32_t i = 0; i < n; ++i) {
            const bool ok = ok_[i];
            parse_send(buf_.data() + size_t(i) * stride, stride, qpn, q.transport, wqe_);
            wqe_.ready = now + done_[i] + parse_time_ * double(i + 1);
            if (!ok) {  // the ring could not be read: what was parsed is not the WQE
                wqe_.malformed = wqe_.fetch_error = true;
                wqe_.wqe_index = uint16_t(q.fetched);
            }
            if (wqe_.malformed) ++malformed;
            ++wqes_fetched;
            HCASIM_LOG(log_, debug,
                       "QP 0x" << std::hex << qpn << std::dec << ": WQE " << wqe_.wqe_index
                               << (wqe_.fetch_error ? " unreadable (ring outside host memory)"
                                   : wqe_.malformed ? " malformed"
                                                    : " fetched"));
            ++q.fetched;
            engine_->push_send(qpn, wqe_);
        }
        busy_ps += parse_ps_ * n;
        const bool more = may_fetch(q) && q.producer != q.fetched;
        if (parse_time_ != SC_ZERO_TIME) {
            if (ready_count_ == 0 && !more) {
                // Nothing else to fetch: no wake-up at the end of the parser's interval (it would
                // find nothing). Whatever makes a QP ready meanwhile queues it (and wakes this
                // process), and it is fetched when the interval is over, as before.
                fetch_free_at_ = sim_now() + parse_time_ * double(n);
                continue;
            }
            wait(parse_time_ * double(n));  // the parser's initiation interval
        }
        if (may_fetch(q) && q.producer != q.fetched) make_ready(qpn);
    }
}

bool wqe_fetcher::fetch_recv(uint32_t qpn, uint32_t index, recv_wqe& out, sc_time& delay) {
    out = recv_wqe{};
    if (qpn >= qps_.size() || !qps_[qpn].valid) return false;
    qp_fetch& q = qps_[qpn];
    if (!q.ctx_valid) load_ctx(qpn, q, delay);
    const uint32_t stride = 1u << q.rq_log_stride;
    const uint32_t slot = index & ((1u << q.rq_log_size) - 1);
    if (!read_recv(q.rq_base + uint64_t(slot) * stride, stride, out, delay)) {
        out.malformed = true;
        return false;
    }
    return true;
}

bool wqe_fetcher::read_recv(uint64_t pa, uint32_t stride, recv_wqe& out, sc_time& delay) {
    out = recv_wqe{};
    uint8_t raw[sizeof(hw::wqe_recv_header) + MAX_SGE * sizeof(hw::wqe_data_seg)];
    const uint32_t n = std::min<uint32_t>(stride, sizeof raw);
    ++recv_fetches;
    if (!dma.read(pa, raw, n, delay)) return false;
    delay += parse_time_;
    busy_ps += parse_ps_;
    hw::wqe_recv_header h;
    std::memcpy(&h, raw, sizeof h);
    out.wr_id = h.wr_id;
    out.wqe_index = h.wqe_index;
    if (h.num_sge > MAX_SGE || sizeof h + h.num_sge * sizeof(hw::wqe_data_seg) > n) {
        out.malformed = true;
        ++malformed;
        return true;
    }
    out.num_sge = uint8_t(h.num_sge);
    for (unsigned i = 0; i < h.num_sge; ++i) {
        hw::wqe_data_seg d;
        std::memcpy(&d, raw + sizeof h + i * sizeof d, sizeof d);
        const uint32_t len = d.byte_count ? d.byte_count : 0x80000000u;
        out.sg[i] = {d.addr, len, d.lkey};
        out.capacity += len;
    }
    return true;
}

// ---------------------------------------------------------------- shared receive queues

void wqe_fetcher::create_srq(const hw::srq_context& c) {
    if (c.srqn >= srqs_.size()) return;
    srq_fetch& s = srqs_[c.srqn];
    std::vector<recv_wqe> cache;
    std::vector<sc_time> ready;
    cache.swap(s.cache);
    ready.swap(s.ready);
    s = srq_fetch{};
    s.valid = true;
    s.srqn = c.srqn;
    s.pd = c.pd;
    s.limit = c.limit;
    s.max_wr = c.max_wr;
    s.base = c.base;
    s.log_size = c.log_size;
    s.log_stride = c.log_stride;
    s.uar = c.uar;
    s.xrcd = c.xrcd;
    s.cqn = c.cqn;
    // Sized once per SRQ number (at its first create), not per message.
    cache.resize(srq_prefetch);
    ready.resize(srq_prefetch);
    s.cache.swap(cache);
    s.ready.swap(ready);
}

void wqe_fetcher::destroy_srq(uint32_t srqn) {
    if (srqn >= srqs_.size()) return;
    srq_fetch& s = srqs_[srqn];
    s.valid = false;
    s.error = false;
    s.attached = 0;
    s.producer = s.consumer = s.fetched = 0;
}

hw::srq_context wqe_fetcher::srq_ctx(uint32_t srqn) const {
    hw::srq_context c{};
    if (!srq_valid(srqn)) return c;
    const srq_fetch& s = srqs_[srqn];
    c.srqn = srqn;
    c.valid = 1;
    c.state = s.error ? hw::SRQS_ERR : hw::SRQS_OK;
    c.log_size = s.log_size;
    c.log_stride = s.log_stride;
    c.pd = s.pd;
    c.limit = s.limit;
    c.base = s.base;
    c.max_wr = s.max_wr;
    c.producer = s.producer;
    c.consumer = s.consumer;
    c.attached = s.attached;
    c.uar = s.uar;
    c.xrcd = s.xrcd;
    c.cqn = s.cqn;
    return c;
}

void wqe_fetcher::srq_attach(uint32_t srqn, int delta) {
    if (srq_valid(srqn)) srqs_[srqn].attached = uint32_t(int(srqs_[srqn].attached) + delta);
}

uint8_t wqe_fetcher::modify_srq(uint32_t srqn, uint32_t mask, const hw::modify_srq_in& in, sc_time& delay) {
    if (!srq_valid(srqn)) return hw::CMD_BAD_RESOURCE;
    srq_fetch& s = srqs_[srqn];
    if (s.error) return hw::CMD_BAD_STATE;  // 10.2.9.5: an SRQ in error cannot be modified
    if (mask & ~uint32_t(hw::SRQ_MODIFY_LIMIT | hw::SRQ_MODIFY_SIZE)) return hw::CMD_BAD_PARAM;
    const uint32_t limit = (mask & hw::SRQ_MODIFY_LIMIT) ? in.limit : s.limit;
    const uint32_t outstanding = uint16_t(s.producer - s.consumer);
    if (mask & hw::SRQ_MODIFY_SIZE) {
        // o10-10.2.2: the only refusals, and the SRQ is left as it was.
        if (in.log_size > 15 || in.max_wr == 0 || in.max_wr >= (1u << in.log_size) ||
            in.max_wr < outstanding || in.max_wr < limit)
            return hw::CMD_BAD_PARAM;
        // o10-10.2.1: the outstanding WQEs move to the same counter values in the new ring.
        const uint32_t stride = 1u << s.log_stride;
        const uint32_t old_mask = (1u << s.log_size) - 1, new_mask = (1u << in.log_size) - 1;
        uint8_t slot[1u << MAX_SRQ_LOG_STRIDE];
        const uint32_t n = std::min<uint32_t>(stride, sizeof slot);
        for (uint16_t i = s.consumer; i != s.producer; ++i) {
            if (!dma.read(s.base + uint64_t(i & old_mask) * stride, slot, n, delay) ||
                !dma.write(in.base + uint64_t(i & new_mask) * stride, slot, n, delay))
                return hw::CMD_BAD_PARAM;
        }
        s.base = in.base;
        s.log_size = in.log_size;
        s.max_wr = in.max_wr;
    } else if ((mask & hw::SRQ_MODIFY_LIMIT) && limit > s.max_wr) {
        return hw::CMD_BAD_PARAM;
    }
    s.limit = limit;
    return hw::CMD_OK;
}

void wqe_fetcher::srq_doorbell(uint32_t srqn, uint16_t producer) {
    ++srq_doorbells;
    if (!srq_valid(srqn)) return;
    srq_fetch& s = srqs_[srqn];
    // A producer counter may not run ahead of the ring: ignore a doorbell claiming more.
    if (uint16_t(producer - s.consumer) > (1u << s.log_size)) return;
    s.producer = producer;
    if (!s.error) prefetch_srq(s, SC_ZERO_TIME);
}

void wqe_fetcher::prefetch_srq(srq_fetch& s, const sc_time& delay) {
    const size_t depth = s.cache.size();
    if (uint16_t(s.fetched - s.consumer) > depth) s.fetched = s.consumer;  // consumed past the read-ahead
    const uint32_t stride = 1u << s.log_stride;
    while (s.fetched != s.producer && uint16_t(s.fetched - s.consumer) < depth) {
        const size_t slot = s.fetched % depth;
        sc_time t = delay;
        const uint64_t pa = s.base + uint64_t(s.fetched & ((1u << s.log_size) - 1)) * stride;
        if (!read_recv(pa, stride, s.cache[slot], t))
            return;  // not readable: taking it finds out (and puts the SRQ in error)
        s.ready[slot] = sim_now() + t;
        ++s.fetched;
    }
}

wqe_fetcher::srq_outcome wqe_fetcher::take_srq(uint32_t srqn, recv_wqe& out, sc_time& delay) {
    srq_outcome r;
    if (!srq_valid(srqn)) return r;
    srq_fetch& s = srqs_[srqn];
    if (s.error || s.consumer == s.producer) {
        ++srq_empty;
        r.result = s.error ? srq_take::error : srq_take::empty;
        return r;
    }
    const size_t depth = s.cache.size();
    const uint16_t index = s.consumer;
    if (uint16_t(s.fetched - index) != 0 && uint16_t(s.fetched - index) <= depth) {
        const size_t slot = index % depth;
        out = s.cache[slot];
        const sc_time now = sim_now();
        if (s.ready[slot] > now + delay) delay = s.ready[slot] - now;  // the read-ahead is still in flight
    } else {
        const uint32_t stride = 1u << s.log_stride;
        if (!read_recv(s.base + uint64_t(index & ((1u << s.log_size) - 1)) * stride, stride, out, delay)) {
            // 10.2.9.5: an SRQ catastrophic error; only Destroy SRQ leaves the error state.
            s.error = true;
            ++srq_errors;
            ++srq_empty;
            r.result = srq_take::error;
            r.entered_error = true;
            return r;
        }
        if (s.fetched == index) ++s.fetched;
    }
    ++s.consumer;
    ++srq_taken;
    r.result = srq_take::ok;
    // 10.2.9.3: fewer WQEs than the armed limit: one event, and the limit is reset to zero.
    if (s.limit && uint16_t(s.producer - s.consumer) < s.limit) {
        s.limit = 0;
        ++srq_limit_events;
        r.limit_reached = true;
    }
    prefetch_srq(s, delay);
    return r;
}

void wqe_fetcher::parse_send(const uint8_t* p, uint32_t len, uint32_t qpn, uint8_t transport, send_wqe& w) {
    w.malformed = false;
    w.fetch_error = false;
    w.num_sge = 0;
    w.inline_len = 0;
    w.length = 0;
    hw::wqe_ctrl_seg c;
    std::memcpy(&c, p, sizeof c);
    w.wr_id = c.wr_id;
    w.opcode = c.opcode;
    w.flags = c.flags;
    w.wqe_index = c.wqe_index;
    w.imm = c.imm;
    w.xrc_srqn = c.xrc_srqn & 0xFFFFFF;
    const uint32_t wqe_len = uint32_t(c.ds_count) * 16;
    if ((c.qpn & 0xFFFFFF) != qpn || wqe_len < sizeof c || wqe_len > len) {
        w.malformed = true;
        return;
    }
    uint32_t off = sizeof c;
    auto need = [&](uint32_t n) { return off + n <= wqe_len; };
    const bool rdma = c.opcode == hw::WQE_OP_RDMA_WRITE || c.opcode == hw::WQE_OP_RDMA_WRITE_IMM ||
                      c.opcode == hw::WQE_OP_RDMA_READ;
    const bool atomic = c.opcode == hw::WQE_OP_CMP_SWAP || c.opcode == hw::WQE_OP_FETCH_ADD;
    switch (c.opcode) {
    case hw::WQE_OP_SEND:
    case hw::WQE_OP_SEND_IMM:
    case hw::WQE_OP_RDMA_WRITE:
    case hw::WQE_OP_RDMA_WRITE_IMM:
    case hw::WQE_OP_RDMA_READ:
    case hw::WQE_OP_CMP_SWAP:
    case hw::WQE_OP_FETCH_ADD:
    case hw::WQE_OP_SEND_INV:
    case hw::WQE_OP_NOP:
    case hw::WQE_OP_LOCAL_INV: break;
    case hw::WQE_OP_BIND_MW:
        if (!need(sizeof(hw::wqe_bind_seg))) {
            w.malformed = true;
            return;
        }
        std::memcpy(&w.bind, p + off, sizeof w.bind);
        return;
    case hw::WQE_OP_FAST_REG:
        if (!need(sizeof(hw::wqe_fast_reg_seg))) {
            w.malformed = true;
            return;
        }
        std::memcpy(&w.freg, p + off, sizeof w.freg);
        return;
    default: w.malformed = true; return;
    }
    if (c.opcode == hw::WQE_OP_LOCAL_INV) return;
    if (rdma || atomic) {
        if (!need(sizeof(hw::wqe_raddr_seg))) {
            w.malformed = true;
            return;
        }
        hw::wqe_raddr_seg r;
        std::memcpy(&r, p + off, sizeof r);
        off += sizeof r;
        w.remote_va = r.remote_va;
        w.rkey = r.rkey;
    }
    if (atomic) {
        if (!need(sizeof(hw::wqe_atomic_seg))) {
            w.malformed = true;
            return;
        }
        hw::wqe_atomic_seg a;
        std::memcpy(&a, p + off, sizeof a);
        off += sizeof a;
        w.swap_add = a.swap_add;
        w.compare = a.compare;
    }
    if (transport == hw::QPT_UD) {
        if (!need(sizeof(hw::wqe_ud_seg))) {
            w.malformed = true;
            return;
        }
        std::memcpy(&w.ud, p + off, sizeof w.ud);
        off += sizeof(hw::wqe_ud_seg);
    } else if (transport == hw::QPT_RD) {
        if (!need(sizeof(hw::wqe_rd_seg))) {
            w.malformed = true;
            return;
        }
        hw::wqe_rd_seg r;
        std::memcpy(&r, p + off, sizeof r);
        off += sizeof r;
        w.rd_eecn = r.eecn & 0xFFFFFF;
        w.ud.dest_qpn = r.dest_qpn & 0xFFFFFF;
        w.ud.qkey = r.qkey;
    }
    if (c.flags & hw::WQE_FLAG_INLINE) {
        if (!need(sizeof(hw::wqe_inline_seg))) {
            w.malformed = true;
            return;
        }
        uint32_t bc;
        std::memcpy(&bc, p + off, 4);
        const uint32_t n = bc & hw::INLINE_LEN_MASK;
        if (!(bc & hw::INLINE_SEG_FLAG) || n > MAX_INLINE_BYTES || !need(4 + n)) {
            w.malformed = true;
            return;
        }
        std::memcpy(w.inline_data, p + off + 4, n);
        w.inline_len = n;
        w.length = n;
        return;
    }
    while (off + sizeof(hw::wqe_data_seg) <= wqe_len) {
        if (w.num_sge == MAX_SGE) {
            w.malformed = true;
            return;
        }
        hw::wqe_data_seg d;
        std::memcpy(&d, p + off, sizeof d);
        off += sizeof d;
        const uint32_t n = d.byte_count ? d.byte_count : 0x80000000u;
        w.sg[w.num_sge++] = {d.addr, n, d.lkey};
        w.length += n;
    }
}

}  // namespace hcasim
