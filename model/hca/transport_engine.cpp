#include "model/hca/transport_engine.h"
#include "model/core/sim_time.h"

#include <algorithm>
#include <cstring>

#include "model/hca/cq_writer.h"
#include "model/hca/mcast_table.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/translation_unit.h"
#include "model/hca/wqe_fetcher.h"
#include "tlm_if/commands.h"

namespace hcasim {

using namespace sc_core;
namespace op = wire::op;

namespace {
constexpr uint32_t PSN_MASK = 0xFFFFFF;
/// a <= b in 24-bit serial arithmetic.
bool psn_le(uint32_t a, uint32_t b) { return ((b - a) & PSN_MASK) < 0x800000; }
/// a < b in 24-bit serial arithmetic.
bool psn_lt(uint32_t a, uint32_t b) { return a != b && psn_le(a, b); }
constexpr unsigned MAX_SEGS = 8;
/// Responses a responder queues per QP: READ/atomic responses (beyond max_dest_rd_atomic they
/// wait their turn) with the ACKs between them.
constexpr size_t RESP_SLOTS = 2 * MAX_RD_ATOMIC + 2;

uint8_t cqe_opcode_of(uint8_t wqe_op) {
    switch (wqe_op) {
    case hw::WQE_OP_RDMA_WRITE:
    case hw::WQE_OP_RDMA_WRITE_IMM: return hw::CQE_OP_RDMA_WRITE;
    case hw::WQE_OP_RDMA_READ: return hw::CQE_OP_RDMA_READ;
    case hw::WQE_OP_CMP_SWAP: return hw::CQE_OP_COMP_SWAP;
    case hw::WQE_OP_FETCH_ADD: return hw::CQE_OP_FETCH_ADD;
    case hw::WQE_OP_LOCAL_INV: return hw::CQE_OP_LOCAL_INV;
    case hw::WQE_OP_BIND_MW: return hw::CQE_OP_BIND_MW;
    case hw::WQE_OP_FAST_REG: return hw::CQE_OP_FAST_REG;
    default: return hw::CQE_OP_SEND;
    }
}
bool is_memory_op(uint8_t wqe_op) {
    return wqe_op == hw::WQE_OP_LOCAL_INV || wqe_op == hw::WQE_OP_BIND_MW || wqe_op == hw::WQE_OP_FAST_REG;
}
bool is_rd_atomic(uint8_t wqe_op) {
    return wqe_op == hw::WQE_OP_RDMA_READ || wqe_op == hw::WQE_OP_CMP_SWAP || wqe_op == hw::WQE_OP_FETCH_ADD;
}
}  // namespace

transport_engine::transport_engine(const sc_module_name& name, const sc_time& hca_clock, unsigned max_qps)
    : sc_module(name),
      dma("dma"),
      qpc_dma("qpc_dma"),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      qpc_cache_entries("qpc_cache_entries", 4096, "entries",
                        "QP contexts held on chip; a miss reads the 256-byte QPC entry from host memory",
                        cache_entries_bounds()),
      qpc_cache_ways("qpc_cache_ways", 8, "ways", "QP context cache associativity", cache_ways_bounds()),
      qpc_cache_policy("qpc_cache_policy", "lru", "", "QP context cache replacement: lru, fifo or random",
                       {"lru", "fifo", "random"}),
      qpc_miss_slots("qpc_miss_slots", 8, "misses", "QP context cache misses outstanding at once (more wait)",
                     {1, 256}),
      wqe_queue_depth("wqe_queue_depth", 32, "WQEs", "parsed WQEs queued per QP ahead of the requester",
                      {1, 1024}),
      wqe_buffer_entries("wqe_buffer_entries", 2048, "WQEs",
                         "parsed WQEs held on chip, shared by all QPs (each QP at most wqe_queue_depth)",
                         {1, 1u << 20}),
      packet_cycles("packet_cycles", 8, "cycles", "requester initiation interval per packet", {0, 1000000}),
      rx_cycles("rx_cycles", 8, "cycles", "responder initiation interval per packet (requests and responses)",
                {0, 1000000}),
      tx_latency_cycles("tx_latency_cycles", 64, "cycles",
                        "requester pipeline latency from a WQE on chip to its packet at the port",
                        {0, 1000000}),
      rx_latency_cycles("rx_latency_cycles", 64, "cycles",
                        "responder pipeline latency from a packet's arrival to its first DMA", {0, 1000000}),
      ack_req_interval("ack_req_interval", 16, "packets", "requester sets AckReq at least every N packets",
                       {1, 1u << 20}),
      ack_coalesce("ack_coalesce", 1, "packets",
                   "responder sends one ACK per N packets that request one (1: every one)", {1, 1024}),
      ack_coalesce_ns("ack_coalesce_ns", 1000.0, "ns",
                      "responder sends a held-back coalesced ACK after at most this long", {0, 1e9}),
      rq_prefetch("rq_prefetch", 4, "WQEs",
                  "receive WQEs the responder reads ahead per QP (on chip; a power of two)", {1, 256}),
      tx_packets("tx_packets", "request packets sent"),
      tx_payload_bytes("tx_payload_bytes", "request payload bytes sent"),
      rx_packets("rx_packets", "request packets accepted by the responder"),
      rx_payload_bytes("rx_payload_bytes", "request payload bytes placed by the responder"),
      acks_sent("acks_sent", "ACKs sent"),
      naks_sent("naks_sent", "NAKs sent (sequence, invalid request, access, operational)"),
      acks_received("acks_received", "ACKs received"),
      naks_received("naks_received", "NAKs and RNR NAKs received"),
      rnr_naks_sent("rnr_naks_sent", "RNR NAKs sent (no receive WQE)"),
      duplicates("duplicates", "duplicate request packets (re-ACKed, READs re-executed, atomics replayed)"),
      seq_errors("seq_errors", "out-of-sequence request packets"),
      dropped_bad_qp("dropped_bad_qp", "packets for a QP that does not exist or cannot receive"),
      retransmits("retransmits",
                  "go-back-N restarts (RNR NAK, sequence NAK, missing READ response, timeout)"),
      timeouts("timeouts", "local ACK timeouts"),
      read_requests("read_requests", "RDMA READ requests sent (retransmissions included)"),
      read_responses_sent("read_responses_sent", "RDMA READ response packets sent"),
      read_responses_received("read_responses_received", "RDMA READ response packets accepted"),
      atomics_executed("atomics_executed", "atomic operations executed on host memory"),
      atomic_replays("atomic_replays", "duplicate atomics answered from the replay history"),
      send_completions("send_completions", "send-queue CQEs written"),
      recv_completions("recv_completions", "receive-queue CQEs written"),
      error_completions("error_completions", "CQEs with an error status other than flush"),
      flushed("flushed", "work requests completed with WR_FLUSH_ERR"),
      async_events("async_events", "affiliated asynchronous events raised (COMM_EST, SQ_DRAINED, QP errors)"),
      uc_dropped("uc_dropped",
                 "UC messages dropped at the responder (a lost packet, no receive WQE, a failed check)"),
      ud_dropped("ud_dropped",
                 "UD datagrams dropped at the responder (Q_Key mismatch, no receive WQE, bad opcode)"),
      qkey_violations("qkey_violations", "UD datagrams whose Q_Key was not the QP's (C10-14)"),
      ud_oversize("ud_oversize", "UD sends longer than the path MTU, completed without sending (C10-93.1.1)"),
      mcast_deliveries("mcast_deliveries", "multicast datagrams delivered to attached QPs (one per QP)"),
      mcast_dropped("mcast_dropped",
                    "multicast packets dropped (QPN not 0xFFFFFF, no GRH, not UD SEND, no attached QP)"),
      wq_catastrophic("wq_catastrophic",
                      "local work queue catastrophic errors (a send WQE could not be read): QP_FATAL"),
      srq_events("srq_events", "SRQ limit reached and SRQ error events raised"),
      tx_busy_ps("tx_busy_ps", "ps the requester spent on packets (packet_cycles each; utilisation)"),
      rx_busy_ps("rx_busy_ps", "ps the responder spent on request packets (rx_cycles each; utilisation)"),
      resp_busy_ps("resp_busy_ps",
                   "ps the response process spent on READ response packets and queued ACKs (rx_cycles each)"),
      qpc_hits("qpc_hits", "QP context cache hits (a packet sent or received)"),
      qpc_misses("qpc_misses", "QP context cache misses (DMA reads of 256-byte QPC entries)"),
      qpc_evictions("qpc_evictions", "QP contexts evicted from the cache to make room"),
      qpc_miss_waits("qpc_miss_waits", "QP context misses that waited for a free miss slot"),
      wqe_buffer_stalls("wqe_buffer_stalls", "fetches refused because the shared WQE buffer was full"),
      wqe_buffer_peak("wqe_buffer_peak", "most WQE buffer entries in use at once"),
      stall_window("stall_window",
                   "requester: a QP stopped because its window of unacknowledged WQEs was full"),
      stall_rd_atomic("stall_rd_atomic", "requester: a QP stopped at its READ/atomic limit (max_rd_atomic)"),
      stall_fence("stall_fence", "requester: a fenced WQE waited for earlier READs/atomics"),
      stall_wqe_fetch("stall_wqe_fetch",
                      "requester: a QP parked because its WQE's fetch was still in flight"),
      stall_wqe_fetch_ps("stall_wqe_fetch_ps",
                         "ps the requester waited for a WQE's fetch with no other QP to serve"),
      stall_port_ps("stall_port_ps",
                    "ps the requester waited for room in the port's transmit queue (backpressure)"),
      state_qps("state_qps", "QPs that exist at the end of the run"),
      state_bytes("state_bytes",
                  "bytes of model state of the existing QPs at the end of the run (records and their rings)"),
      state_slot_bytes(
          "state_slot_bytes",
          "bytes of model state per QP number, all hca.max_qps of them (transport engine and WQE fetcher)"),
      qps_(max_qps),
      qpc_cache_(1, 1),
      ready_(max_qps),
      resp_ready_(max_qps),
      timer_pos_(max_qps, NIL) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    wqe_buffer_.resize(wqe_buffer_entries);
    wqe_next_.resize(wqe_buffer_entries);
    for (uint32_t e = 0; e < wqe_buffer_entries; ++e) wqe_next_[e] = e + 1 < wqe_buffer_entries ? e + 1 : NIL;
    free_head_ = 0;
    free_count_ = wqe_buffer_entries;
    buffer_waiters_.resize(max_qps);
    qpc_cache_.configure(qpc_cache_entries, qpc_cache_ways, qpc_cache_policy);
    miss_free_.assign(qpc_miss_slots, SC_ZERO_TIME);
    // The read-ahead is indexed by the 16-bit WQE counter mod its depth: a power of two keeps
    // that mapping one-to-one across the counter's wrap.
    if (rq_prefetch & (rq_prefetch - 1))
        throw config_error(std::string(this->name()) + ".rq_prefetch: " + std::to_string(rq_prefetch.get()) +
                           " is not a power of two");
    packet_time_ = clock * double(packet_cycles.get());
    rx_time_ = clock * double(rx_cycles.get());
    packet_ps_ = uint64_t(packet_time_ / sc_time(1, SC_PS) + 0.5);
    rx_ps_ = uint64_t(rx_time_ / sc_time(1, SC_PS) + 0.5);
    tx_latency_ = clock * double(tx_latency_cycles.get());
    rx_latency_ = clock * double(rx_latency_cycles.get());
    coalesce_time_ = sc_time(ack_coalesce_ns.get(), SC_NS);
    SC_METHOD(requester_loop);
    sensitive << tx_work_;
    dont_initialize();
    SC_METHOD(response_loop);
    sensitive << resp_work_;
    dont_initialize();
    SC_METHOD(timer);
    sensitive << timer_now_ev_;
    for (sc_event& e : timer_ev_) sensitive << e;
    dont_initialize();
    tx_pkt_ = packet_pool::take();
    ack_pkt_ = packet_pool::take();
    resp_pkt_ = packet_pool::take();
}

transport_engine::~transport_engine() {
    packet_pool::give(tx_pkt_);
    packet_pool::give(ack_pkt_);
    packet_pool::give(resp_pkt_);
}

sc_time transport_engine::rnr_time(uint8_t code) {
    // IBA Vol 1 Table 45 (RNR NAK timer field encodings), milliseconds.
    static const double ms[32] = {655.36, 0.01,  0.02,  0.03,   0.04,   0.06,   0.08,   0.12,
                                  0.16,   0.24,  0.32,  0.48,   0.64,   0.96,   1.28,   1.92,
                                  2.56,   3.84,  5.12,  7.68,   10.24,  15.36,  20.48,  30.72,
                                  40.96,  61.44, 81.92, 122.88, 163.84, 245.76, 327.68, 491.52};
    return sc_time(ms[code & 31], SC_MS);
}

sc_time transport_engine::ack_timeout(uint8_t code) {
    // IBA 9.7.6.1.3: 4.096 us x 2^timeout; 0 disables the timer.
    if (code == 0) return SC_ZERO_TIME;
    return ns_time(4096.0 * double(uint64_t(1) << (code & 31)));
}

// ---------------------------------------------------------------- context from the command unit

void transport_engine::set_qpc_table(uint64_t base) {
    qpc_base_ = base;
    qpc_cache_.clear();
}

sc_time transport_engine::qp_context(uint32_t qpn, const sc_time& delay) {
    if (qpc_cache_.find(qpn)) {
        ++qpc_hits;
        return delay;
    }
    ++qpc_misses;
    bool evicted = false;
    qpc_cache_.insert(qpn, &evicted);
    if (evicted) ++qpc_evictions;
    // The slot free soonest; the read starts when it is free.
    const sc_time now = sim_now();
    sc_time* slot = &miss_free_[0];
    for (sc_time& t : miss_free_)
        if (t < *slot) slot = &t;
    sc_time d = delay;
    if (*slot > now + d) {
        ++qpc_miss_waits;
        d = *slot - now;
    }
    qpc_dma.read_timing(qpc_base_ + uint64_t(qpn) * sizeof(hw::qp_context), sizeof(hw::qp_context), d);
    *slot = now + d;
    return d;
}

void transport_engine::load_qp(const hw::qp_context& c, uint32_t mask, sc_time& delay) {
    if (c.qpn >= qps_.size()) return;
    qp& q = qps_.create(c.qpn);
    if (qps_.many()) want_hints(true);  // records no longer stay in the host CPU's cache
    const uint8_t prev = q.valid ? q.state : uint8_t(hw::QPS_RESET);
    // The command unit wrote the entry to the QPC table; the on-chip copy is written too.
    if (!qpc_cache_.find(c.qpn)) {
        bool evicted = false;
        qpc_cache_.insert(c.qpn, &evicted);
        if (evicted) ++qpc_evictions;
    }
    if (!q.valid || c.state == hw::QPS_RESET) {
        reset_qp(q, c.qpn);
        q.valid = true;
    }
    q.transport = c.transport;
    q.mtu = c.mtu;
    q.sl = c.sl;
    q.sig_all = c.sig_all;
    q.pd = c.pd;
    q.who = xlate_owner{c.pd, c.qpn, c.mm_flags};
    q.srqn = c.srqn;
    q.recv_who = c.srqn ? xlate_owner{fetcher_->srq_pd(c.srqn - 1), c.qpn, c.mm_flags} : q.who;
    q.send_cqn = c.send_cqn;
    q.recv_cqn = c.recv_cqn;
    q.dest_qpn = c.dest_qpn;
    q.access = c.access;
    q.dlid = c.dlid;
    q.pkey_index = c.pkey_index;
    q.qkey = c.qkey;
    q.retry_cnt = c.retry_cnt;
    q.rnr_retry = c.rnr_retry;
    q.min_rnr_timer = c.min_rnr_timer;
    q.timeout = c.timeout;
    q.retries_left = c.retry_cnt;
    q.rnr_retries_left = c.rnr_retry;
    q.max_rd_atomic = uint8_t(std::min<unsigned>(c.max_rd_atomic, MAX_RD_ATOMIC));
    q.max_dest_rd_atomic = uint8_t(std::min<unsigned>(c.max_dest_rd_atomic, MAX_RD_ATOMIC));
    if (mask & hw::QP_ATTR_RQ_PSN) q.rq_psn = c.rq_psn & PSN_MASK;
    if (mask & hw::QP_ATTR_SQ_PSN) q.sq_psn = c.sq_psn & PSN_MASK;
    q.window_max = std::max(q.window_max, size_t(1) << c.sq_log_size);
    // The replay history keeps its ring order: it only grows (when it exists at all).
    if (!q.replay.empty() && q.replay.size() < std::max<size_t>(1, q.max_dest_rd_atomic))
        q.replay.resize(std::max<size_t>(1, q.max_dest_rd_atomic));
    q.state = c.state;
    if (c.state == hw::QPS_SQD && prev != hw::QPS_SQD) {
        // The drain point: after the last WQE started (the message in progress included).
        q.sqd_resend = outstanding(q);
        q.sqd_limit = q.started_limit;
        q.drain_pending = true;
        q.sqd_notify = c.sqd_notify;
        check_drained(q, delay);
    }
    if (c.state != hw::QPS_SQD) q.drain_pending = false;
    if (c.state == hw::QPS_ERR && prev != hw::QPS_ERR) enter_error(q, delay);
    if ((c.state == hw::QPS_RTS || c.state == hw::QPS_ERR) && q.q_count) make_tx_ready(q.qpn);
}

void transport_engine::destroy_qp(uint32_t qpn) {
    if (qpn < qps_.size() && qps_.allocated(qpn)) {
        qpc_cache_.invalidate(qpn);
        reset_qp(qps_[qpn], qpn);
    }
}

void transport_engine::reset_qp(qp& q, uint32_t qpn) {
    drop_queue(q);
    drop_rd(q);
    const bool was_ready = q.tx_ready, was_resp = q.resp_ready;
    q = qp{};
    q.tx_ready = was_ready;  // still listed in the ready FIFOs; they drop it
    q.resp_ready = was_resp;
    q.qpn = qpn;
}

// ---------------------------------------------------------------- on-chip storage

uint64_t transport_engine::qp_state_bytes() const {
    // Per existing QP: its record and the rings it has grown.
    uint64_t bytes = 0;
    for (size_t n = 0; n < qps_.size(); ++n) {
        if (!qps_.allocated(n)) continue;
        const qp& q = qps_[n];
        bytes += sizeof(qp) + q.window.capacity() * sizeof(inflight) + q.rd.capacity() * sizeof(rd_ctx) +
                 q.rq_cache.capacity() * sizeof(recv_wqe) + q.rq_ready.capacity() * sizeof(sc_time) +
                 q.resp.capacity() * sizeof(resp_job) + q.replay.capacity() * sizeof(atomic_replay) +
                 (q.rwqe ? sizeof(recv_wqe) : 0);
    }
    return bytes;
}

uint64_t transport_engine::qpn_slot_bytes() const {
    // Per QP number (hca.max_qps of them): the record pointer, the ready FIFOs', waiters' and
    // timer slots, and the WQE fetcher's record.
    return qps_.size() * (sizeof(std::unique_ptr<qp>) + sizeof(ready_[0]) + sizeof(resp_ready_[0]) +
                          sizeof(buffer_waiters_[0]) + sizeof(timer_pos_[0])) +
           fetcher_->qp_state_bytes();
}

void transport_engine::end_of_simulation() {
    for (size_t n = 0; n < qps_.size(); ++n)
        if (qps_[n].valid) ++state_qps;
    state_bytes += qp_state_bytes();
    state_slot_bytes += qpn_slot_bytes();
}

namespace {
/// Re-lays a ring out from index 0 in a vector of `size` entries.
template <class T>
void grow_ring(std::vector<T>& v, size_t& head, size_t count, size_t size) {
    std::vector<T> g(size);
    for (size_t i = 0; i < count; ++i) g[i] = v[(head + i) % v.size()];
    v.swap(g);
    head = 0;
}
}  // namespace

bool transport_engine::window_room(qp& q) {
    if (q.w_count < q.window.size()) return true;
    if (q.window.size() >= q.window_max) return false;
    grow_ring(q.window, q.w_head, q.w_count,
              std::min(q.window_max, std::max<size_t>(4, 2 * q.window.size())));
    return true;
}

bool transport_engine::rd_room(qp& q) {
    const size_t limit = std::max<size_t>(1, q.max_rd_atomic);
    if (q.rd_count < q.rd.size()) return true;
    if (q.rd.size() >= limit) return false;
    const size_t old_head = q.rd_head, old_size = q.rd.size();
    grow_ring(q.rd, q.rd_head, q.rd_count, std::min(limit, std::max<size_t>(2, 2 * old_size)));
    // Window entries name their READ/atomic context by slot: renumber them.
    for (size_t i = 0; i < q.w_count && old_size; ++i) {
        inflight& f = q.window[(q.w_head + i) % q.window.size()];
        if (f.rd != NO_RD) f.rd = uint8_t((f.rd + old_size - old_head) % old_size);
    }
    return true;
}

void transport_engine::free_entry(uint32_t e) {
    wqe_next_[e] = free_head_;
    free_head_ = e;
    ++free_count_;
    if (waiters_count_) {
        const uint32_t qpn = buffer_waiters_[waiters_head_];
        waiters_head_ = (waiters_head_ + 1) % buffer_waiters_.size();
        --waiters_count_;
        qps_[qpn].buffer_wait = false;
        fetcher_->credit(qpn);
    }
}

uint32_t transport_engine::detach_head(qp& q) {
    const uint32_t e = q.q_head;
    q.q_head = wqe_next_[e];
    if (q.q_head == NIL) q.q_tail = NIL;
    --q.q_count;
    return e;
}

void transport_engine::drop_rd(qp& q) {
    while (q.rd_count) {
        free_entry(q.rd[q.rd_head].entry);
        q.rd_head = (q.rd_head + 1) % q.rd.size();
        --q.rd_count;
    }
}

void transport_engine::drop_queue(qp& q) {
    while (q.q_count) release_head(q);
}

void transport_engine::current_psns(uint32_t qpn, uint32_t& sq_psn, uint32_t& rq_psn) const {
    sq_psn = rq_psn = 0;
    if (qpn < qps_.size()) {
        sq_psn = qps_[qpn].sq_psn;
        rq_psn = qps_[qpn].rq_psn;
    }
}

uint8_t transport_engine::state(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid ? qps_[qpn].state : uint8_t(hw::QPS_RESET);
}

bool transport_engine::draining(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid && qps_[qpn].drain_pending;
}

// ---------------------------------------------------------------- from the WQE fetcher

unsigned transport_engine::room(uint32_t qpn) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return 0;
    qp& q = qps_[qpn];
    if (q.q_count >= wqe_queue_depth) return 0;  // retire_head's credit() makes it ready again
    if (free_count_ == 0) {
        if (!q.buffer_wait) {
            q.buffer_wait = true;
            ++wqe_buffer_stalls;
            buffer_waiters_[(waiters_head_ + waiters_count_) % buffer_waiters_.size()] = qpn;
            ++waiters_count_;
        }
        return 0;
    }
    return std::min<unsigned>(wqe_queue_depth - q.q_count, free_count_);
}

bool transport_engine::has_room(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid && qps_[qpn].q_count < wqe_queue_depth && free_count_ > 0;
}

void transport_engine::push_send(uint32_t qpn, const send_wqe& w) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp& q = qps_[qpn];
    if (free_head_ == NIL) {
        // Only if the fetcher overran its credit: the buffer grows rather than lose a WQE.
        const uint32_t e = uint32_t(wqe_buffer_.size());
        wqe_buffer_.emplace_back();
        wqe_next_.push_back(NIL);
        free_head_ = e;
        ++free_count_;
    }
    const uint32_t e = free_head_;
    free_head_ = wqe_next_[e];
    --free_count_;
    wqe_buffer_[e].assign_used(w);
    wqe_next_[e] = NIL;
    if (q.q_tail == NIL)
        q.q_head = e;
    else
        wqe_next_[q.q_tail] = e;
    q.q_tail = e;
    ++q.q_count;
    const uint64_t used = wqe_buffer_.size() - free_count_;
    if (used > wqe_buffer_peak.value()) wqe_buffer_peak += used - wqe_buffer_peak.value();
    make_tx_ready(qpn);
}

void transport_engine::rq_posted(uint32_t qpn, uint16_t producer) {
    if (qpn >= qps_.size() || !qps_[qpn].valid) return;
    qp& q = qps_[qpn];
    if (q.srqn) return;  // its receive WQEs come from the SRQ (firmware refuses posts to it, o10-51.2.2)
    q.rq_producer = producer;
    sc_time delay = SC_ZERO_TIME;
    if (q.state == hw::QPS_ERR)  // C10-97.2.1: receives posted in Error complete in error
        flush(q, delay);
    else if (q.state != hw::QPS_RESET)
        prefetch_recv(q, delay);
}

void transport_engine::make_tx_ready(uint32_t qpn) {
    qp& q = qps_[qpn];
    if (q.tx_ready) return;
    q.tx_ready = true;
    ready_[(ready_head_ + ready_count_) % ready_.size()] = qpn;
    ++ready_count_;
    if (!requester_running_)  // a running requester finds it in its queue
        tx_work_.notify(SC_ZERO_TIME);
}

// ---------------------------------------------------------------- requester

// An SC_METHOD: each activation serves QPs until it must wait (for work, for the port or a
// WQE, or for the initiation interval after a packet) and returns with next_trigger().
void transport_engine::requester_loop() {
    if (tx_free_at_ != SC_ZERO_TIME) {
        // Woken by new work during the initiation interval after the last packet: the
        // interval still holds (as if the method had waited for it, then for the work).
        const sc_time now = sim_now();
        if (tx_free_at_ > now) {
            next_trigger(tx_free_at_ - now);
            return;
        }
        tx_free_at_ = SC_ZERO_TIME;
    }
    // While it runs, new work needs no notification: the loop finds it in the queue.
    requester_running_ = true;
    struct stopped {
        bool& running;
        ~stopped() { running = false; }
    } at_return{requester_running_};
    for (;;) {
        uint32_t qpn;
        if (resume_qpn_ != NIL) {
            // Back from a wait for the port or the QP's WQE: still sendable?
            qpn = resume_qpn_;
            resume_qpn_ = NIL;
            qp& q = qps_[qpn];
            if (!q.valid || q.q_count == 0 || !may_send(q) || q.paused_until > sim_now()) {
                if (q.valid && q.q_count && may_send(q)) make_tx_ready(qpn);
                continue;
            }
        } else {
            if (ready_count_ == 0) {
                next_trigger(tx_work_);
                return;
            }
            qpn = ready_[ready_head_];
            ready_head_ = (ready_head_ + 1) % ready_.size();
            --ready_count_;
            if (ready_count_ > 1)  // the QP after the next: its state is in cache by its turn
                expect(ready_[(ready_head_ + 1) % ready_.size()]);
            qp& q = qps_[qpn];
            q.tx_ready = false;
            if (!q.valid || q.q_count == 0) continue;
            if (q.state == hw::QPS_ERR) {
                sc_time delay = SC_ZERO_TIME;
                flush(q, delay);
                continue;
            }
            if (q.state == hw::QPS_SQE) {
                sc_time delay = SC_ZERO_TIME;
                enter_sqe(q, delay);  // flushes the send queue only
                continue;
            }
            if (!may_send(q)) continue;
            if (q.paused_until > sim_now()) continue;  // timer() makes it ready when the RNR wait is over
            const sc_time now = sim_now();
            const sc_time& wqe_ready = head_wqe(q).ready;
            if (wqe_ready > now && ready_count_) {
                // Its WQE's fetch is still in flight: serve the other QPs meanwhile.
                ++stall_wqe_fetch;
                park(q, wqe_ready);
                continue;
            }
            sc_time bp = port_->tx_backpressure();
            if (bp != SC_ZERO_TIME) stall_port_ps += uint64_t(bp / one_ps_);
            if (wqe_ready > now && wqe_ready - now > bp) {
                stall_wqe_fetch_ps += uint64_t((wqe_ready - now - bp) / one_ps_);
                bp = wqe_ready - now;
            }
            if (bp != SC_ZERO_TIME) {
                resume_qpn_ = qpn;
                next_trigger(bp);
                return;
            }
        }
        qp& q = qps_[qpn];
        // Its context: a miss parks the QP until the QPC entry has arrived (the requester
        // serves other QPs meanwhile); the packet after it uses the entry the miss brought.
        if (q.ctx_filled) {
            q.ctx_filled = false;
        } else {
            const sc_time ctx = qp_context(qpn, SC_ZERO_TIME);
            if (ctx != SC_ZERO_TIME) {
                q.ctx_filled = true;
                park(q, sim_now() + ctx);
                continue;
            }
        }
        // A QP that must wait for a response (window, READ/atomic limit, fence) leaves the
        // round robin; the response that frees it puts it back.
        if (!send_packet(q)) continue;
        if (q.valid && q.q_count && may_send(q)) make_tx_ready(qpn);
        tx_busy_ps += packet_ps_;
        if (packet_time_ != SC_ZERO_TIME) {
            if (ready_count_ == 0) {
                // Nothing more to send: no wake-up at the end of the initiation interval (it
                // would find nothing); new work wakes the method, which then waits for the
                // rest of the interval if it is not over.
                tx_free_at_ = sim_now() + packet_time_;
                next_trigger(tx_work_);
                return;
            }
            next_trigger(packet_time_);  // the initiation interval
            return;
        }
    }
}

bool transport_engine::may_send(const qp& q) const {
    // RTS sends; SQD finishes the message in progress (C10-35) and starts no new one (C10-37),
    // but may resend (go back N) what it had started before SQD.
    if (q.state == hw::QPS_RTS) return true;
    if (q.state != hw::QPS_SQD || !q.q_count) return false;
    const uint16_t ahead = uint16_t(q.sqd_limit - head_wqe(q).wqe_index);
    return q.sqd_resend && ahead != 0 && ahead <= 0x8000;
}

void transport_engine::build_bth_lrh(const qp& q, wire::headers& h, uint8_t opcode, uint32_t psn) const {
    h = wire::BLANK_HEADERS;
    h.l.vl = 0;
    h.l.sl = q.sl;
    h.l.dlid = q.dlid;
    h.l.slid = lid_;
    h.b.opcode = opcode;
    h.b.pkey = pkeys_->pkey(q.pkey_index);
    h.b.dest_qp = q.dest_qpn;
    h.b.psn = psn & PSN_MASK;
}

bool transport_engine::send_packet(qp& q) {
    send_wqe& w = head_wqe(q);
    sc_time delay = tx_latency_;  // pipeline latency; the initiation interval is packet_cycles
    if (w.fetch_error) {
        wq_catastrophic_error(q, delay);
        return true;
    }
    const bool is_send =
        w.opcode == hw::WQE_OP_SEND || w.opcode == hw::WQE_OP_SEND_IMM || w.opcode == hw::WQE_OP_SEND_INV;
    const bool is_write = w.opcode == hw::WQE_OP_RDMA_WRITE || w.opcode == hw::WQE_OP_RDMA_WRITE_IMM;
    const bool rd_atomic = is_rd_atomic(w.opcode);
    const bool rc = q.transport == hw::QPT_RC, ud = q.transport == hw::QPT_UD;
    bool allowed = false;  // what the QP's transport carries (IBA 10.7.2): else a local QP operation error
    if (rc)
        allowed = is_send || is_write || rd_atomic || is_memory_op(w.opcode) || w.opcode == hw::WQE_OP_NOP;
    else if (q.transport == hw::QPT_UC)  // C10-84: SEND and WRITE; C10-89: binds; no READ, atomics, SEND_INV
        allowed = (is_send && w.opcode != hw::WQE_OP_SEND_INV) || is_write ||
                  w.opcode == hw::WQE_OP_LOCAL_INV || w.opcode == hw::WQE_OP_BIND_MW ||
                  w.opcode == hw::WQE_OP_NOP;
    else if (ud)  // SEND only
        allowed =
            w.opcode == hw::WQE_OP_SEND || w.opcode == hw::WQE_OP_SEND_IMM || w.opcode == hw::WQE_OP_NOP;
    if (w.malformed || !allowed) {
        requester_error(q, hw::CQE_LOC_QP_OP_ERR, w, delay);
        return true;
    }
    if (q.cur_offset == 0) {
        if (!window_room(q)) {
            ++stall_window;
            return false;  // window full: the next ACK makes the QP ready again
        }
        // C10-100: a fenced WQE starts once every earlier READ and atomic has completed.
        if ((w.flags & hw::WQE_FLAG_FENCE) && q.rd_count) {
            ++stall_fence;
            return false;
        }
    }
    if (w.opcode == hw::WQE_OP_NOP) {
        complete_locally(q, w, delay);
        return true;
    }
    if (is_memory_op(w.opcode)) return memory_op(q, w, delay);
    if (w.length > 0x80000000ull) {
        requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
        return true;
    }
    if (rd_atomic) return send_read_or_atomic(q, w, delay);
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    if (ud && w.length > mtu) {
        // C10-93.1.1: a datagram longer than the path MTU is not sent, and that is no error.
        ++ud_oversize;
        complete_locally(q, w, delay);
        return true;
    }
    if (q.cur_offset == 0) {
        q.cur_first_psn = q.sq_psn;
        if (probe_) probe_->mark(path_probe::wqe_start, sim_now());
    }
    if (q.resume && q.cur_offset == 0) {
        // Retransmission restarting inside this message: skip the packets already acknowledged.
        q.resume = false;
        const uint32_t skip = (q.resume_psn - q.sq_psn) & PSN_MASK;
        if (skip && uint64_t(skip) * mtu < w.length) {
            q.cur_offset = uint64_t(skip) * mtu;
            q.sq_psn = q.resume_psn;
            uint64_t off = q.cur_offset;
            q.cur_sge = 0;
            while (q.cur_sge < w.num_sge && off >= w.sg[q.cur_sge].len) off -= w.sg[q.cur_sge++].len;
            q.cur_sge_off = off;
        }
    }
    const uint64_t remaining = w.length - q.cur_offset;
    const uint32_t n = uint32_t(std::min<uint64_t>(mtu, remaining));
    const bool first = q.cur_offset == 0;
    if (uint16_t(w.wqe_index + 1 - q.started_limit) <= 0x8000) q.started_limit = uint16_t(w.wqe_index + 1);
    const bool last = remaining <= mtu;
    const bool imm = last && (w.opcode == hw::WQE_OP_SEND_IMM || w.opcode == hw::WQE_OP_RDMA_WRITE_IMM);
    const bool inv = last && w.opcode == hw::WQE_OP_SEND_INV;
    uint8_t opcode;
    if (is_send)
        opcode = first && last ? (imm   ? op::RC_SEND_ONLY_IMM
                                  : inv ? op::RC_SEND_ONLY_INV
                                        : op::RC_SEND_ONLY)
                 : first       ? op::RC_SEND_FIRST
                 : last        ? (imm   ? op::RC_SEND_LAST_IMM
                                  : inv ? op::RC_SEND_LAST_INV
                                        : op::RC_SEND_LAST)
                               : op::RC_SEND_MIDDLE;
    else
        opcode = first && last ? (imm ? op::RC_RDMA_WRITE_ONLY_IMM : op::RC_RDMA_WRITE_ONLY)
                 : first       ? op::RC_RDMA_WRITE_FIRST
                 : last        ? (imm ? op::RC_RDMA_WRITE_LAST_IMM : op::RC_RDMA_WRITE_LAST)
                               : op::RC_RDMA_WRITE_MIDDLE;
    wire::headers h;
    const uint32_t psn = q.sq_psn;
    if (ud) {
        build_ud_headers(q, w, h, imm ? op::UD_SEND_ONLY_IMM : op::UD_SEND_ONLY);
    } else {
        // The RC opcode names the operation; UC packets carry the same operation codes.
        build_bth_lrh(q, h, rc ? opcode : uint8_t(op::UC | (opcode & ~op::TRANSPORT_MASK)), psn);
    }
    h.b.se = last && (w.flags & hw::WQE_FLAG_SOLICITED) && (is_send || imm);
    h.b.ack_req = rc && (last || ++q.since_ack_req >= ack_req_interval);  // UC and UD are never acknowledged
    if (h.b.ack_req) q.since_ack_req = 0;
    h.r.va = w.remote_va;
    h.r.rkey = w.rkey;
    h.r.dma_len = uint32_t(w.length);
    h.immdt = w.imm;
    h.ieth_rkey = w.imm;  // SEND with Invalidate: the R_Key the responder invalidates
    const size_t hdr = wire::encode_headers(h, n, tx_pkt_->bytes);
    uint8_t* dst = tx_pkt_->bytes + hdr;
    sc_time ready = delay;
    if (w.flags & hw::WQE_FLAG_INLINE) {
        std::memcpy(dst, w.inline_data + q.cur_offset, n);
    } else {
        // Gather: walk the SGEs from where the previous packet stopped.
        uint32_t left = n;
        while (left) {
            if (q.cur_sge >= w.num_sge) {
                requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
                return true;
            }
            const sge& s = w.sg[q.cur_sge];
            const uint32_t take = uint32_t(std::min<uint64_t>(left, s.len - q.cur_sge_off));
            phys_seg segs[MAX_SEGS];
            unsigned nsegs = 0;
            const xlate_status st = xlate_->translate(s.lkey, q.who, s.addr + q.cur_sge_off, take, 0, segs,
                                                      MAX_SEGS, nsegs, delay);
            if (st != xlate_status::ok) {
                requester_error(q, hw::CQE_LOC_PROT_ERR, w, delay, uint8_t(st));
                return true;
            }
            for (unsigned i = 0; i < nsegs; ++i) {
                sc_time t = delay;  // reads of one packet are issued back to back
                dma.read(segs[i].pa, dst, segs[i].len, t);
                if (t > ready) ready = t;
                dst += segs[i].len;
            }
            left -= take;
            q.cur_sge_off += take;
            if (q.cur_sge_off == s.len) {
                ++q.cur_sge;
                q.cur_sge_off = 0;
            }
        }
    }
    if (ready < delay) ready = delay;
    const uint32_t pad = (4 - n % 4) % 4;
    std::memset(tx_pkt_->bytes + hdr + n, 0, pad);
    sc_time sent = port_->transmit(tx_pkt_, uint32_t(hdr + n + pad), ready);
    q.resend_pending = false;
    ++tx_packets;
    tx_payload_bytes += n;
    q.sq_psn = (q.sq_psn + 1) & PSN_MASK;
    q.cur_offset += n;
    if (last && probe_) probe_->mark(path_probe::wire_end, sim_now() + sent);
    if (last) {
        q.window[(q.w_head + q.w_count) % q.window.size()] = inflight{
            w.wr_id, q.cur_first_psn, psn, uint32_t(w.length), w.wqe_index, w.opcode, w.flags, NO_RD, 0};
        ++q.w_count;
        retire_head(q);
        if (!rc) {
            // No acknowledgement comes: the message is complete once its last packet is on the
            // wire (everything older completed the same way, so it is the window's head).
            while (q.w_count) pop_window(q, hw::CQE_SUCCESS, sent);
            check_drained(q, sent);
        }
    }
    if (rc) arm_ack_timer(q);
    return true;
}

bool transport_engine::send_read_or_atomic(qp& q, send_wqe& w, sc_time& delay) {
    const bool atomic = w.opcode != hw::WQE_OP_RDMA_READ;
    if (q.max_rd_atomic == 0) {
        // The QP was given no READ/atomic resources (max_rd_atomic 0): it cannot issue one.
        requester_error(q, hw::CQE_LOC_QP_OP_ERR, w, delay);
        return true;
    }
    if (q.rd_count >= q.max_rd_atomic || !rd_room(q)) {
        ++stall_rd_atomic;
        return false;  // C10-94 limit: it waits for an earlier READ/atomic to complete
    }
    uint64_t capacity = 0;
    for (unsigned i = 0; i < w.num_sge; ++i) capacity += w.sg[i].len;
    if (atomic ? capacity < 8 : capacity < w.length) {
        requester_error(q, hw::CQE_LOC_LEN_ERR, w, delay);
        return true;
    }
    if (!q.resume) {
        // C10-55: the local data segments that receive the READ data or the atomic's original
        // value need Local Write; they are checked before the request goes out, so a refused
        // segment sends nothing (the responder never reads or modifies its memory).
        uint64_t need = atomic ? 8 : w.length;
        for (unsigned i = 0; i < w.num_sge && need; ++i) {
            const uint64_t len = std::min<uint64_t>(need, w.sg[i].len);
            need -= len;
            if (!len) continue;  // C10-54.1.1: a zero-length segment is not checked
            const xlate_status st =
                xlate_->check(w.sg[i].lkey, q.who, w.sg[i].addr, len, hw::ACCESS_LOCAL_WRITE, delay);
            if (st != xlate_status::ok) {
                requester_error(q, hw::CQE_LOC_PROT_ERR, w, delay, uint8_t(st));
                return true;
            }
        }
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const uint32_t npkts = atomic || w.length == 0 ? 1u : uint32_t((w.length + mtu - 1) / mtu);
    const uint32_t first = q.sq_psn;
    uint32_t skip = 0;
    if (q.resume) {
        // Retransmission: a READ resumes where its responses stopped (a new request for the
        // rest); an atomic is sent again whole (the responder replays its result).
        q.resume = false;
        const uint32_t s = (q.resume_psn - first) & PSN_MASK;
        if (!atomic && s < npkts) skip = s;
    }
    const uint32_t psn = (first + skip) & PSN_MASK;
    wire::headers h;
    if (atomic) {
        build_bth_lrh(q, h, w.opcode == hw::WQE_OP_CMP_SWAP ? op::RC_COMPARE_SWAP : op::RC_FETCH_ADD, psn);
        h.ae.va = w.remote_va;
        h.ae.rkey = w.rkey;
        h.ae.swap_add = w.swap_add;
        h.ae.compare = w.compare;
    } else {
        build_bth_lrh(q, h, op::RC_RDMA_READ_REQUEST, psn);
        const uint64_t done = uint64_t(skip) * mtu;
        h.r.va = w.remote_va + done;
        h.r.rkey = w.rkey;
        h.r.dma_len = uint32_t(w.length - done);
        ++read_requests;
    }
    h.b.ack_req = true;
    q.since_ack_req = 0;
    const size_t hdr = wire::encode_headers(h, 0, tx_pkt_->bytes);
    if (probe_) probe_->mark(path_probe::wqe_start, sim_now());
    const sc_time sent = port_->transmit(tx_pkt_, uint32_t(hdr), delay);
    if (probe_) probe_->mark(path_probe::wire_end, sim_now() + sent);
    q.resend_pending = false;
    ++tx_packets;
    if (uint16_t(w.wqe_index + 1 - q.started_limit) <= 0x8000) q.started_limit = uint16_t(w.wqe_index + 1);
    const uint8_t slot = uint8_t((q.rd_head + q.rd_count) % q.rd.size());
    rd_ctx& c = q.rd[slot];
    c.placed = uint64_t(skip) * mtu;
    c.entry = q.q_head;
    ++q.rd_count;
    q.window[(q.w_head + q.w_count) % q.window.size()] = inflight{
        w.wr_id, first, (first + npkts - 1) & PSN_MASK, uint32_t(w.length), w.wqe_index, w.opcode, w.flags,
        slot,    psn};
    ++q.w_count;
    q.sq_psn = (first + npkts) & PSN_MASK;
    retire_head(q, true);
    arm_ack_timer(q);
    return true;
}

void transport_engine::complete_locally(qp& q, const send_wqe& w, sc_time& delay) {
    q.window[(q.w_head + q.w_count) % q.window.size()] = inflight{w.wr_id,
                                                                  (q.sq_psn - 1) & PSN_MASK,
                                                                  (q.sq_psn - 1) & PSN_MASK,
                                                                  0,
                                                                  w.wqe_index,
                                                                  w.opcode,
                                                                  w.flags,
                                                                  NO_RD,
                                                                  0};
    ++q.w_count;
    if (uint16_t(w.wqe_index + 1 - q.started_limit) <= 0x8000) q.started_limit = uint16_t(w.wqe_index + 1);
    retire_head(q);
    q.resend_pending = false;
    if (q.w_count == 1)  // nothing older outstanding: complete now
        pop_window(q, hw::CQE_SUCCESS, delay);
}

bool transport_engine::memory_op(qp& q, send_wqe& w, sc_time& delay) {
    // o10-37.2.20, o10-37.2.23: a fenced Local Invalidate waits until every earlier WQE has
    // completed (strong ordering); unfenced it runs when it reaches the head (relaxed).
    if (w.opcode == hw::WQE_OP_LOCAL_INV && (w.flags & hw::WQE_FLAG_FENCE) && q.w_count) return false;
    // A go-back-N re-fetches WQEs from the oldest unacknowledged one: an operation that was
    // executed before is not executed again.
    const bool executed = uint16_t(q.started_limit - w.wqe_index - 1) < 0x8000;
    if (!executed) {
        xlate_status st;
        if (w.opcode == hw::WQE_OP_LOCAL_INV)
            st = xlate_->invalidate(w.imm, q.who, false, delay);
        else if (w.opcode == hw::WQE_OP_BIND_MW)
            st = xlate_->bind_mw(w.bind, q.who, delay);
        else
            st = xlate_->fast_register(w.freg, q.who, delay);
        if (st != xlate_status::ok) {
            // Memory management operation error: the WQE completes in error, the QP goes to Error.
            requester_error(q, hw::CQE_MW_BIND_ERR, w, delay, uint8_t(st));
            return true;
        }
    }
    complete_locally(q, w, delay);
    return true;
}

void transport_engine::retire_head(qp& q, bool keep) {
    if (keep)
        detach_head(q);
    else
        release_head(q);
    q.cur_offset = 0;
    q.cur_sge = 0;
    q.cur_sge_off = 0;
    fetcher_->credit(q.qpn);
}

void transport_engine::pop_window(qp& q, uint8_t status, sc_time& delay, uint8_t syndrome) {
    const inflight f = q.window[q.w_head];
    q.w_head = (q.w_head + 1) % q.window.size();
    --q.w_count;
    if (f.rd != NO_RD && q.rd_count) {
        const uint32_t e = q.rd[q.rd_head].entry;
        q.rd_head = (q.rd_head + 1) % q.rd.size();
        --q.rd_count;
        free_entry(e);
    }
    send_completion(q, f, status, delay, syndrome);
}

void transport_engine::send_completion(qp& q, const inflight& f, uint8_t status, sc_time& delay,
                                       uint8_t syndrome) {
    const bool signaled = q.sig_all || (f.flags & hw::WQE_FLAG_SIGNALED);
    if (status == hw::CQE_SUCCESS && !signaled)
        return;  // unsignaled success: no CQE (software learns from later CQEs' wqe_counter)
    hw::cqe e{};
    e.wr_id = f.wr_id;
    e.status = status;
    e.opcode = cqe_opcode_of(f.opcode);
    e.byte_len = f.length;
    e.qpn = q.qpn;
    e.wqe_counter = f.wqe_index;
    e.vendor_err = syndrome;
    e.owner = hw::CQE_IS_SEND;
    if (cqw_->complete(q.send_cqn, e, false, delay)) ++send_completions;
    if (probe_) probe_->mark(path_probe::completion, sim_now() + delay);
    if (status == hw::CQE_WR_FLUSH_ERR)
        ++flushed;
    else if (status != hw::CQE_SUCCESS)
        ++error_completions;
}

void transport_engine::requester_error(qp& q, uint8_t status, const send_wqe& w, sc_time& delay,
                                       uint8_t syndrome) {
    // Everything sent before this WQE is still awaiting its ACK; IBA orders completions, so
    // those are flushed behind this error (the QP is in Error: their fate is unknown).
    const inflight f{w.wr_id, q.sq_psn, q.sq_psn, uint32_t(w.length), w.wqe_index, w.opcode,
                     w.flags, NO_RD,    0};
    retire_head(q);
    send_completion(q, f, status, delay, syndrome);
    if (q.transport == hw::QPT_RC)
        enter_error(q, delay);
    else
        enter_sqe(q, delay);  // C10-147, C10-152: UC and UD send errors stop the send queue only
}

void transport_engine::wq_catastrophic_error(qp& q, sc_time& delay) {
    // IBA 11.6.3.1 Local Work Queue Catastrophic Error (C10-150 for UC, C10-155 for UD, and
    // RC alike): the HCA could not read the WQE, so it cannot complete it (its wr_id is unknown).
    // Processing halts: an affiliated QP_FATAL event, the QP to Error, and every outstanding
    // work request completes with WR_FLUSH_ERR (through CQs that are not in error).
    ++wq_catastrophic;
    post_event(q, hw::EQE_QP_FATAL, delay);
    retire_head(q);
    enter_error(q, delay);
}

void transport_engine::enter_sqe(qp& q, sc_time& delay) {
    if (q.state == hw::QPS_ERR) return;
    if (q.state != hw::QPS_SQE) {
        q.state = hw::QPS_SQE;
        fetcher_->set_state(q.qpn, hw::QPS_SQE);
    }
    q.drain_pending = false;
    // C10-40: every later send WR completes with WR_FLUSH_ERR (the fetcher keeps delivering
    // them; the requester flushes each as it arrives). The receive queue is untouched (C10-38).
    while (q.w_count) pop_window(q, hw::CQE_WR_FLUSH_ERR, delay);
    while (q.q_count) {
        const send_wqe& w = head_wqe(q);
        const inflight f{w.wr_id, 0, 0, uint32_t(w.length), w.wqe_index, w.opcode, w.flags, NO_RD, 0};
        const bool known = !w.fetch_error;  // an unreadable WQE has nothing to complete
        retire_head(q);
        if (known) send_completion(q, f, hw::CQE_WR_FLUSH_ERR, delay);
    }
}

void transport_engine::fail_head(qp& q, uint8_t status, sc_time& delay, uint8_t syndrome) {
    if (q.w_count)
        pop_window(q, status, delay, syndrome);
    else if (q.q_count)
        requester_error(q, status, head_wqe(q), delay, syndrome);
    enter_error(q, delay);
}

void transport_engine::enter_error(qp& q, sc_time& delay) {
    if (q.state != hw::QPS_ERR) {
        q.state = hw::QPS_ERR;
        fetcher_->set_state(q.qpn, hw::QPS_ERR);
    }
    q.ack_timer = false;
    q.ack_flush = false;
    q.drain_pending = false;
    q.resend_pending = false;
    flush(q, delay);
    // IBA 10.3.1, 11.6.3.1: an SRQ-attached QP in Error takes no more WQEs from its SRQ; the one
    // it held has completed (flushed) above.
    if (q.srqn) post_event(q, hw::EQE_QP_LAST_WQE_REACHED, delay);
}

void transport_engine::post_event(qp& q, uint8_t type, sc_time& delay) {
    ++async_events;
    cqw_->post_event(type, q.qpn, delay);
}

// Completes every outstanding work request of the QP with WR_FLUSH_ERR (signaled or not):
// the send window, the parsed queue, and the posted receive WQEs. Queued responses are dropped.
void transport_engine::flush(qp& q, sc_time& delay) {
    while (q.w_count) pop_window(q, hw::CQE_WR_FLUSH_ERR, delay);
    drop_rd(q);
    while (q.q_count) {
        const send_wqe& w = head_wqe(q);
        const inflight f{w.wr_id, 0, 0, uint32_t(w.length), w.wqe_index, w.opcode, w.flags, NO_RD, 0};
        const bool known = !w.fetch_error;  // an unreadable WQE has nothing to complete
        retire_head(q);
        if (known) send_completion(q, f, hw::CQE_WR_FLUSH_ERR, delay);
    }
    if (q.have_rwqe) {
        q.have_rwqe = false;
        recv_completion(q, hw::CQE_OP_RECV, hw::CQE_WR_FLUSH_ERR, 0, 0, 0, false, delay);
    }
    while (q.rq_consumer != q.rq_producer) {
        recv_at(q, q.rq_consumer, rwqe(q), delay);
        ++q.rq_consumer;
        recv_completion(q, hw::CQE_OP_RECV, hw::CQE_WR_FLUSH_ERR, 0, 0, 0, false, delay);
    }
    q.in_send = q.in_write = false;
    q.r_count = 0;
    q.resp_rd = 0;
}

// ---------------------------------------------------------------- requester: responses

void transport_engine::handle_response(qp& q, const rx_packet& p) {
    if (!(q.state == hw::QPS_RTS || q.state == hw::QPS_SQD)) return;
    sc_time delay = qp_context(q.qpn, SC_ZERO_TIME);
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (code == op::RDMA_READ_RESPONSE_FIRST || code == op::RDMA_READ_RESPONSE_MIDDLE ||
        code == op::RDMA_READ_RESPONSE_LAST || code == op::RDMA_READ_RESPONSE_ONLY) {
        handle_read_response(q, p, delay);
    } else if (code == op::ATOMIC_ACKNOWLEDGE) {
        handle_atomic_ack(q, p, delay);
    } else {
        const uint32_t psn = p.h.b.psn;
        const wire::aeth_type type = wire::aeth_type_of(p.h.a.syndrome);
        const bool is_ack = type == wire::aeth_type::ack;
        if (is_ack)
            ++acks_received;
        else
            ++naks_received;
        // Only a PSN we sent and that is not acknowledged yet means anything; an older one is
        // a duplicate or stale response.
        const uint32_t oldest = q.w_count      ? q.window[q.w_head].first_psn
                                : q.cur_offset ? q.cur_first_psn
                                               : q.sq_psn;
        const uint32_t newest = (q.sq_psn - 1) & PSN_MASK;
        if (!outstanding(q) || !psn_le(oldest, psn) || !psn_le(psn, newest)) return;
        // An ACK acknowledges every request up to its PSN; a NAK every request before its PSN.
        if (!retire_acked(q, psn, is_ack, delay)) {
            implied_nak(q, delay);  // an unfinished READ/atomic is acknowledged: its responses were lost
            return;
        }
        const uint32_t acked = is_ack ? psn : (psn - 1) & PSN_MASK;
        if (!q.acked_valid || psn_lt(q.last_acked, acked)) {
            q.last_acked = acked;
            q.acked_valid = true;
            q.gap_retry = false;
            progress(q);
        }
        if (!is_ack) {
            if (type == wire::aeth_type::rnr_nak) {
                // IBA 9.7.5.2.8: wait the responder's RNR timer, then resend from the NAK'd
                // PSN; rnr_retry 7 means retry for ever.
                if (q.rnr_retry == 7 || q.rnr_retries_left-- > 0) {
                    rewind(q, psn, rnr_time(wire::aeth_value_of(p.h.a.syndrome)));
                    return;
                }
                fail_head(q, hw::CQE_RNR_RETRY_EXC_ERR, delay);
                return;
            }
            switch (wire::aeth_value_of(p.h.a.syndrome)) {
            case wire::nak::PSN_SEQUENCE_ERROR: go_back_once(q, psn, delay, true); return;
            case wire::nak::INVALID_REQUEST: fail_head(q, hw::CQE_REM_INV_REQ_ERR, delay); return;
            case wire::nak::REMOTE_ACCESS_ERROR: fail_head(q, hw::CQE_REM_ACCESS_ERR, delay); return;
            default: fail_head(q, hw::CQE_REM_OP_ERR, delay); return;
            }
        }
    }
    if (q.state != hw::QPS_ERR) {
        if (q.q_count) make_tx_ready(q.qpn);
        check_drained(q, delay);
    }
}

bool transport_engine::retire_acked(qp& q, uint32_t psn, bool inclusive, sc_time& delay) {
    while (q.w_count) {
        const inflight& f = q.window[q.w_head];
        if (!(inclusive ? psn_le(f.last_psn, psn) : psn_lt(f.last_psn, psn))) break;
        if (f.rd != NO_RD) return false;
        pop_window(q, hw::CQE_SUCCESS, delay);
    }
    return true;
}

void transport_engine::handle_read_response(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    const uint8_t code = p.h.b.opcode & 0x1F;
    // A response implies every earlier request completed (IBA 9.7.5.1.4).
    if (!retire_acked(q, psn, false, delay) || !q.w_count) {
        if (q.w_count) implied_nak(q, delay);
        return;
    }
    inflight& f = q.window[q.w_head];
    if (f.opcode != hw::WQE_OP_RDMA_READ || !psn_le(f.first_psn, psn) || !psn_le(psn, f.last_psn))
        return;  // not a response to the READ we wait for: stale, dropped
    if (psn != f.next_psn) {
        if (psn_lt(psn, f.next_psn)) return;        // duplicate of a response already placed
        go_back_once(q, f.next_psn, delay, false);  // responses missing: read them again
        return;
    }
    rd_ctx& c = q.rd[f.rd];
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const bool last_psn = psn == f.last_psn;
    const bool last_op = code == op::RDMA_READ_RESPONSE_LAST || code == op::RDMA_READ_RESPONSE_ONLY;
    const uint64_t remaining = f.length - c.placed;
    if (last_psn != last_op || (last_psn ? p.payload_len != remaining : p.payload_len != mtu)) {
        fail_head(q, hw::CQE_BAD_RESP_ERR, delay);  // response does not fit the request
        return;
    }
    if (last_psn && probe_) probe_->mark(path_probe::resp_rx, sim_now());
    uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
    if (p.payload_len && !write_sges(q.who, wqe_buffer_[c.entry].sg, wqe_buffer_[c.entry].num_sge, c.placed,
                                     p.payload, p.payload_len, delay, status, syndrome)) {
        fail_head(q, status, delay, syndrome);
        return;
    }
    ++read_responses_received;
    c.placed += p.payload_len;
    f.next_psn = (psn + 1) & PSN_MASK;
    q.gap_retry = false;
    q.last_acked = psn;
    q.acked_valid = true;
    progress(q);
    if (last_psn) pop_window(q, hw::CQE_SUCCESS, delay);
    if (q.q_count) make_tx_ready(q.qpn);
    check_drained(q, delay);
}

void transport_engine::handle_atomic_ack(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    if (!retire_acked(q, psn, false, delay) || !q.w_count) {
        if (q.w_count) implied_nak(q, delay);
        return;
    }
    const inflight& f = q.window[q.w_head];
    if (!(f.opcode == hw::WQE_OP_CMP_SWAP || f.opcode == hw::WQE_OP_FETCH_ADD) || f.first_psn != psn)
        return;  // stale or duplicate
    if (probe_) probe_->mark(path_probe::resp_rx, sim_now());
    if (wire::aeth_type_of(p.h.a.syndrome) != wire::aeth_type::ack) {
        fail_head(q, hw::CQE_BAD_RESP_ERR, delay);
        return;
    }
    // o10-47: the original remote value lands in the WQE's local data segment.
    uint8_t bytes[8];
    std::memcpy(bytes, &p.h.aae.orig_data, 8);
    uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
    const send_wqe& w = wqe_buffer_[q.rd[f.rd].entry];
    if (!write_sges(q.who, w.sg, w.num_sge, 0, bytes, 8, delay, status, syndrome)) {
        fail_head(q, status, delay, syndrome);
        return;
    }
    q.gap_retry = false;
    q.last_acked = psn;
    q.acked_valid = true;
    progress(q);
    pop_window(q, hw::CQE_SUCCESS, delay);
    if (q.q_count) make_tx_ready(q.qpn);
    check_drained(q, delay);
}

bool transport_engine::write_sges(const xlate_owner& who, const sge* sg, unsigned num_sge, uint64_t offset,
                                  const uint8_t* data, uint32_t len, sc_time& delay, uint8_t& status,
                                  uint8_t& syndrome) {
    uint64_t skip = offset;
    unsigned i = 0;
    while (i < num_sge && skip >= sg[i].len) skip -= sg[i++].len;
    uint32_t left = len;
    while (left) {
        if (i >= num_sge) {
            status = hw::CQE_LOC_LEN_ERR;
            return false;
        }
        const sge& s = sg[i];
        const uint32_t take = uint32_t(std::min<uint64_t>(left, s.len - skip));
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        const xlate_status st = xlate_->translate(s.lkey, who, s.addr + skip, take, hw::ACCESS_LOCAL_WRITE,
                                                  segs, MAX_SEGS, nsegs, delay);
        if (st != xlate_status::ok) {
            status = hw::CQE_LOC_PROT_ERR;
            syndrome = uint8_t(st);
            return false;
        }
        for (unsigned k = 0; k < nsegs; ++k) {
            dma.write(segs[k].pa, data, segs[k].len, delay, rx_loan_);
            data += segs[k].len;
        }
        left -= take;
        skip = 0;
        ++i;
    }
    return true;
}

void transport_engine::go_back_once(qp& q, uint32_t psn, sc_time& delay, bool consume) {
    // A repeated NAK (or gap) for the PSN we already went back to changes nothing.
    if (q.gap_retry && q.gap_psn == psn) return;
    q.gap_retry = true;
    q.gap_psn = psn;
    if (consume) {
        retry(q, psn, delay);
        return;
    }
    // IBA 9.7.5: responses out of sequence (reordered, some lost) are dropped and the
    // requester asks again from the first missing PSN; that costs no retry, only a NAK or the
    // local ACK timeout does. The latch above keeps one re-request per PSN until progress, so
    // a path that delivers nothing still ends in the timeout's RETRY_EXC_ERR.
    rewind(q, psn, SC_ZERO_TIME);
}

void transport_engine::implied_nak(qp& q, sc_time& delay) {
    const inflight& f = q.window[q.w_head];
    go_back_once(q, f.opcode == hw::WQE_OP_RDMA_READ ? f.next_psn : f.first_psn, delay, false);
}

void transport_engine::retry(qp& q, uint32_t psn, sc_time& delay) {
    if (q.retries_left > 0) {
        --q.retries_left;
        rewind(q, psn, SC_ZERO_TIME);
        return;
    }
    fail_head(q, hw::CQE_RETRY_EXC_ERR, delay);  // C10-142: the QP goes to Error, the rest flush
}

void transport_engine::rewind(qp& q, uint32_t psn, const sc_time& wait) {
    // Everything from the oldest unacknowledged WQE on is sent again: the parsed queue is
    // dropped and the fetcher re-reads the send ring from that WQE.
    uint16_t from;
    uint32_t first;
    if (q.w_count) {
        from = q.window[q.w_head].wqe_index;
        first = q.window[q.w_head].first_psn;
    } else if (q.q_count && q.cur_offset) {
        from = head_wqe(q).wqe_index;
        first = q.cur_first_psn;
    } else {
        return;
    }
    ++retransmits;
    q.resend_pending = true;
    q.sq_psn = first;
    q.resume = psn != first;
    q.resume_psn = psn;
    q.w_count = 0;
    drop_queue(q);
    drop_rd(q);
    q.cur_offset = 0;
    q.cur_sge = 0;
    q.cur_sge_off = 0;
    q.since_ack_req = 0;
    fetcher_->rewind(q.qpn, from);
    q.ack_timer = false;
    if (wait != SC_ZERO_TIME) park(q, sim_now() + wait);
}

void transport_engine::progress(qp& q) {
    q.retries_left = q.retry_cnt;  // forward progress renews the retry budgets
    q.rnr_retries_left = q.rnr_retry;
    q.ack_timer = false;
    arm_ack_timer(q);
}

void transport_engine::arm_ack_timer(qp& q) {
    if (q.ack_timer || q.timeout == 0 || !outstanding(q)) return;
    q.ack_timer = true;
    q.ack_deadline = sim_now() + ack_timeout(q.timeout);
    watch(q, q.ack_deadline);
}

void transport_engine::check_drained(qp& q, sc_time& delay) {
    if (q.state != hw::QPS_SQD || !q.drain_pending || outstanding(q)) return;
    q.drain_pending = false;
    if (q.sqd_notify)  // C10-36: SQ Drained, if it was requested
        post_event(q, hw::EQE_SQ_DRAINED, delay);
}

void transport_engine::park(qp& q, const sc_time& until) {
    q.paused_until = until;
    watch(q, until);
}

void transport_engine::watch(qp& q, const sc_time& at) {
    // One heap entry per QP, at its earliest deadline; a later deadline is set when that
    // entry fires (service_timers), an earlier one moves the entry up.
    uint32_t& pos = timer_pos_[q.qpn];
    if (pos != NIL) {
        if (timer_heap_[pos].at <= at) return;
        timer_heap_[pos].at = at;
        timer_heap_[pos].seq = timer_seq_++;
        timer_sift_up(pos);
    } else {
        timer_heap_.push_back(timer_entry{at, timer_seq_++, q.qpn});
        timer_sift_up(timer_heap_.size() - 1);
    }
    const sc_time now = sim_now();
    if (at > now)
        wake_timer(at, now);
    else
        timer_now_ev_.notify(SC_ZERO_TIME);
}

void transport_engine::wake_timer(const sc_time& at, const sc_time& now) {
    // A notification at or before `now` has fired (timed ones only: they fire when their
    // time step begins).
    unsigned idle = TIMER_EVENTS, soonest = 0;
    for (unsigned i = 0; i < TIMER_EVENTS; ++i) {
        if (timer_ev_pending_[i] && timer_ev_at_[i] <= now) timer_ev_pending_[i] = false;
        if (!timer_ev_pending_[i]) {
            if (idle == TIMER_EVENTS) idle = i;
            continue;
        }
        if (timer_ev_at_[i] <= at) return;  // the method runs by then anyway
        if (timer_ev_at_[soonest] > timer_ev_at_[i] || !timer_ev_pending_[soonest]) soonest = i;
    }
    const unsigned i = idle != TIMER_EVENTS ? idle : soonest;
    timer_ev_[i].notify(at - now);  // on a pending one: replaces it (an earlier notification wins)
    timer_ev_at_[i] = at;
    timer_ev_pending_[i] = true;
}

void transport_engine::timer_sift_up(size_t i) {
    const timer_entry e = timer_heap_[i];
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!timer_before(e, timer_heap_[parent])) break;
        timer_place(i, timer_heap_[parent]);
        i = parent;
    }
    timer_place(i, e);
}

void transport_engine::timer_sift_down(size_t i) {
    const size_t n = timer_heap_.size();
    const timer_entry e = timer_heap_[i];
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n) break;
        if (child + 1 < n && timer_before(timer_heap_[child + 1], timer_heap_[child])) ++child;
        if (!timer_before(timer_heap_[child], e)) break;
        timer_place(i, timer_heap_[child]);
        i = child;
    }
    timer_place(i, e);
}

// The QPs whose earliest deadline has come, in deadline order: RNR wait or WQE fetch over,
// local ACK timeout, coalesced ACK due. O(log n) per deadline, whatever the number of QPs.
void transport_engine::timer() {
    const sc_time now = sim_now();
    while (!timer_heap_.empty() && timer_heap_.front().at <= now) {
        const uint32_t qpn = timer_heap_.front().qpn;
        timer_pos_[qpn] = NIL;
        if (timer_heap_.size() > 1) {
            timer_place(0, timer_heap_.back());
            timer_heap_.pop_back();
            timer_sift_down(0);
        } else {
            timer_heap_.pop_back();
        }
        service_timers(qps_[qpn], now);
    }
    if (!timer_heap_.empty()) wake_timer(timer_heap_.front().at, now);
}

void transport_engine::service_timers(qp& q, const sc_time& now) {
    const uint32_t qpn = q.qpn;
    sc_time next;
    bool pending = false;
    auto later = [&](const sc_time& t) {
        if (!pending || t < next) next = t;
        pending = true;
    };
    if (q.valid) {
        sc_time delay = SC_ZERO_TIME;
        if (q.paused_until != SC_ZERO_TIME) {
            if (q.paused_until <= now) {
                q.paused_until = SC_ZERO_TIME;
                if (q.q_count) make_tx_ready(qpn);
            } else {
                later(q.paused_until);
            }
        }
        if (q.ack_timer) {
            if (q.ack_deadline <= now) {
                q.ack_timer = false;
                if ((q.w_count || q.cur_offset) && (q.state == hw::QPS_RTS || q.state == hw::QPS_SQD)) {
                    // Local ACK timeout: resend from the first PSN not acknowledged.
                    ++timeouts;
                    uint32_t from = q.w_count ? q.window[q.w_head].first_psn : q.cur_first_psn;
                    const uint32_t end = q.w_count ? q.window[q.w_head].last_psn : (q.sq_psn - 1) & PSN_MASK;
                    if (q.w_count && q.window[q.w_head].opcode == hw::WQE_OP_RDMA_READ)
                        from = q.window[q.w_head].next_psn;
                    else if (q.acked_valid && psn_le(from, q.last_acked) && psn_lt(q.last_acked, end))
                        from = (q.last_acked + 1) & PSN_MASK;
                    // Responses of the old round asking to go back there change nothing.
                    q.gap_retry = true;
                    q.gap_psn = from;
                    retry(q, from, delay);
                    if (q.ack_timer || q.paused_until > now)
                        later(q.ack_timer ? q.ack_deadline : q.paused_until);
                    if (q.q_count && q.state != hw::QPS_ERR) make_tx_ready(qpn);
                }
            } else {
                later(q.ack_deadline);
            }
        }
        if (q.ack_flush) {
            if (q.ack_flush_at <= now) {
                q.ack_flush = false;
                if (q.acks_owed) respond(q, wire::aeth_ack(31), (q.rq_psn - 1) & PSN_MASK, SC_ZERO_TIME);
            } else {
                later(q.ack_flush_at);
            }
        }
    }
    if (pending) watch(q, next);
}

// ---------------------------------------------------------------- responder: responses out

void transport_engine::send_ack(qp& q, uint8_t syndrome, uint32_t psn, const sc_time& ready) {
    wire::headers h;
    build_bth_lrh(q, h, op::RC_ACKNOWLEDGE, psn);
    h.l.dlid = q.slid ? q.slid : q.dlid;
    h.a.syndrome = syndrome;
    h.a.msn = q.msn & PSN_MASK;
    const size_t hdr = wire::encode_headers(h, 0, ack_pkt_->bytes);
    port_->transmit(ack_pkt_, uint32_t(hdr), ready);
    if (wire::aeth_type_of(syndrome) == wire::aeth_type::ack) ++acks_sent;
}

transport_engine::resp_job* transport_engine::push_resp(qp& q) {
    if (q.r_count == q.resp.size()) {
        if (q.resp.size() >= RESP_SLOTS) return nullptr;
        grow_ring(q.resp, q.r_head, q.r_count, std::min(RESP_SLOTS, std::max<size_t>(2, 2 * q.resp.size())));
    }
    resp_job& j = q.resp[(q.r_head + q.r_count) % q.resp.size()];
    j = resp_job{};
    ++q.r_count;
    make_resp_ready(q.qpn);
    return &j;
}

void transport_engine::respond(qp& q, uint8_t syndrome, uint32_t psn, const sc_time& ready) {
    q.acks_owed = 0;
    q.ack_flush = false;
    if (q.r_count == 0) {
        send_ack(q, syndrome, psn, ready);
        return;
    }
    // Behind queued READ/atomic responses: an ACK must not overtake them (it would tell the
    // requester they are done). A later ACK replaces a queued one.
    resp_job& tail = q.resp[(q.r_head + q.r_count - 1) % q.resp.size()];
    resp_job* j = tail.kind == resp_kind::ack ? &tail : push_resp(q);
    if (!j) return;  // queue full of responses: the requester's timer recovers
    j->kind = resp_kind::ack;
    j->syndrome = syndrome;
    j->psn = psn;
    j->at = sim_now() + ready;
}

void transport_engine::acknowledge(qp& q, uint32_t psn, bool ack_req, const sc_time& ready) {
    if (!ack_req) return;
    if (ack_coalesce <= 1 || ++q.acks_owed >= ack_coalesce) {
        respond(q, wire::aeth_ack(31), psn, ready);
        return;
    }
    if (!q.ack_flush) {
        q.ack_flush = true;
        q.ack_flush_at = sim_now() + ready + coalesce_time_;
        watch(q, q.ack_flush_at);
    }
}

void transport_engine::nak(qp& q, uint8_t code, uint32_t psn, const sc_time& ready) {
    ++naks_sent;
    respond(q, wire::aeth_nak(code), psn, ready);
}

void transport_engine::rnr_nak(qp& q, uint32_t psn, const sc_time& ready) {
    ++rnr_naks_sent;
    // The requester resends from this PSN after the timer; the packets it sent meanwhile are
    // out of sequence and dropped without a further NAK.
    q.nak_pending = true;
    respond(q, wire::aeth_rnr_nak(q.min_rnr_timer), psn, ready);
}

void transport_engine::responder_error(qp& q, uint8_t nak_code, uint32_t psn, sc_time& delay) {
    // The NAK goes out at once (queued responses die with the QP), then the QP enters Error.
    // An error no receive completion reports raises an affiliated event (IBA 10.10.3.1).
    ++naks_sent;
    q.r_count = 0;
    send_ack(q, wire::aeth_nak(nak_code), psn, delay);
    post_event(q, nak_code == wire::nak::REMOTE_ACCESS_ERROR ? hw::EQE_QP_ACCESS_ERR : hw::EQE_QP_REQ_ERR,
               delay);
    enter_error(q, delay);
}

void transport_engine::make_resp_ready(uint32_t qpn) {
    qp& q = qps_[qpn];
    if (q.resp_ready) return;
    q.resp_ready = true;
    resp_ready_[(resp_head_ + resp_count_) % resp_ready_.size()] = qpn;
    ++resp_count_;
    resp_work_.notify(SC_ZERO_TIME);
}

// An SC_METHOD, like the requester: it returns with next_trigger() where it must wait.
void transport_engine::response_loop() {
    for (;;) {
        uint32_t qpn;
        if (resume_resp_qpn_ != NIL) {
            qpn = resume_resp_qpn_;  // back from a wait for the port
            resume_resp_qpn_ = NIL;
            qp& q = qps_[qpn];
            if (!q.valid || q.r_count == 0 || q.state == hw::QPS_ERR) {
                if (q.valid && q.r_count && q.state != hw::QPS_ERR) make_resp_ready(qpn);
                continue;
            }
        } else {
            if (resp_count_ == 0) {
                next_trigger(resp_work_);
                return;
            }
            qpn = resp_ready_[resp_head_];
            resp_head_ = (resp_head_ + 1) % resp_ready_.size();
            --resp_count_;
            qp& q = qps_[qpn];
            q.resp_ready = false;
            if (!q.valid || q.r_count == 0 || q.state == hw::QPS_ERR || q.state == hw::QPS_RESET) {
                if (q.valid) q.r_count = 0;
                continue;
            }
            const sc_time bp = port_->tx_backpressure();
            if (bp != SC_ZERO_TIME) {
                resume_resp_qpn_ = qpn;
                next_trigger(bp);
                return;
            }
        }
        qp& q = qps_[qpn];
        send_response(q);
        if (q.valid && q.r_count) make_resp_ready(qpn);
        resp_busy_ps += rx_ps_;
        if (rx_time_ != SC_ZERO_TIME) {
            next_trigger(rx_time_);
            return;
        }
    }
}

void transport_engine::send_response(qp& q) {
    resp_job& j = q.resp[q.r_head];
    const sc_time now = sim_now();
    sc_time delay = j.at > now ? j.at - now : SC_ZERO_TIME;
    auto pop = [&q] {
        q.r_head = (q.r_head + 1) % q.resp.size();
        --q.r_count;
    };
    if (j.kind == resp_kind::ack) {
        const uint8_t syndrome = j.syndrome;
        const uint32_t psn = j.psn;
        pop();
        send_ack(q, syndrome, psn, delay);
        return;
    }
    wire::headers h;
    if (j.kind == resp_kind::atomic) {
        build_bth_lrh(q, h, op::RC_ATOMIC_ACKNOWLEDGE, j.psn);
        h.l.dlid = q.slid ? q.slid : q.dlid;
        h.a.syndrome = wire::aeth_ack(31);
        h.a.msn = j.msn;
        h.aae.orig_data = j.orig;
        const size_t hdr = wire::encode_headers(h, 0, resp_pkt_->bytes);
        const sc_time sent = port_->transmit(resp_pkt_, uint32_t(hdr), delay);
        if (probe_) probe_->mark(path_probe::resp_sent, sim_now() + sent);
        --q.resp_rd;
        pop();
        return;
    }
    // READ response: the next MTU of the requested range, read from host memory now.
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const uint32_t n = std::min(j.left, mtu);
    const bool last = j.left <= mtu;
    const uint8_t opcode = j.first && last ? op::RC_RDMA_READ_RESPONSE_ONLY
                           : j.first       ? op::RC_RDMA_READ_RESPONSE_FIRST
                           : last          ? op::RC_RDMA_READ_RESPONSE_LAST
                                           : op::RC_RDMA_READ_RESPONSE_MIDDLE;
    build_bth_lrh(q, h, opcode, j.psn);
    h.l.dlid = q.slid ? q.slid : q.dlid;
    h.a.syndrome = wire::aeth_ack(31);
    h.a.msn = j.msn;
    const size_t hdr = wire::encode_headers(h, n, resp_pkt_->bytes);
    sc_time ready = delay;
    if (n) {
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (xlate_->translate(j.rkey, q.who, j.va, n, hw::ACCESS_REMOTE_READ, segs, MAX_SEGS, nsegs, delay) !=
            xlate_status::ok) {
            // The region changed under the READ (deregistered, pages gone): NAK, Error.
            const uint32_t psn = j.psn;
            responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
            return;
        }
        uint8_t* dst = resp_pkt_->bytes + hdr;
        for (unsigned k = 0; k < nsegs; ++k) {
            sc_time t = delay;
            dma.read(segs[k].pa, dst, segs[k].len, t);
            if (t > ready) ready = t;
            dst += segs[k].len;
        }
    }
    const uint32_t pad = (4 - n % 4) % 4;
    std::memset(resp_pkt_->bytes + hdr + n, 0, pad);
    const sc_time sent = port_->transmit(resp_pkt_, uint32_t(hdr + n + pad), ready);
    if (last && probe_) probe_->mark(path_probe::resp_sent, sim_now() + sent);
    ++read_responses_sent;
    j.va += n;
    j.left -= n;
    j.psn = (j.psn + 1) & PSN_MASK;
    j.first = false;
    if (last) {
        --q.resp_rd;
        pop();
    }
}

// ---------------------------------------------------------------- receive path

void transport_engine::expect(uint32_t qpn) {
    if (qps_.many() && qpn < qps_.size()) {
        qps_.prefetch(qpn);
        qpc_cache_.prefetch(qpn);
    }
}

void transport_engine::receive(const rx_packet& p) {
    // The packet's receive buffer is on offer to the DMA writes of its payload for this call.
    struct lend {
        buffer_loan_ext*& at;
        ~lend() { at = nullptr; }
    } lent{rx_loan_ = p.loan};
    if (mcast_table::is_mlid(p.h.l.dlid)) {
        receive_mcast(p);
        return;
    }
    const uint32_t qpn = p.h.b.dest_qp;
    if (qpn >= qps_.size() || !qps_[qpn].valid) {
        ++dropped_bad_qp;
        return;
    }
    qp& q = qps_[qpn];
    const uint8_t tr = p.h.b.opcode & op::TRANSPORT_MASK;
    if ((q.transport == hw::QPT_UC && tr == op::UC) || (q.transport == hw::QPT_UD && tr == op::UD)) {
        // UC and UD receive in RTR, RTS, SQD and SQEr (C10-38); Reset, Init and Error drop.
        if (!(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD ||
              q.state == hw::QPS_SQE)) {
            ++dropped_bad_qp;
            return;
        }
        if (tr == op::UD) {
            handle_ud(q, p);
            return;
        }
        if (!q.comm_est) {
            q.comm_est = true;
            if (q.state == hw::QPS_RTR) {
                sc_time d = SC_ZERO_TIME;
                post_event(q, hw::EQE_COMM_EST, d);
            }
        }
        handle_uc(q, p);
        return;
    }
    if (q.transport != hw::QPT_RC || tr != op::RC) {
        ++dropped_bad_qp;
        return;
    }
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (code == op::ACKNOWLEDGE || code == op::ATOMIC_ACKNOWLEDGE || code == op::RDMA_READ_RESPONSE_FIRST ||
        code == op::RDMA_READ_RESPONSE_MIDDLE || code == op::RDMA_READ_RESPONSE_LAST ||
        code == op::RDMA_READ_RESPONSE_ONLY) {
        handle_response(q, p);
        return;
    }
    // C10-23, C10-26, C10-41.2.1: requests to a QP in Reset, Init or Error are dropped; the
    // responder works in RTR, RTS and SQD.
    if (!(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD)) {
        ++dropped_bad_qp;
        return;
    }
    if (!q.comm_est) {
        q.comm_est = true;
        if (q.state == hw::QPS_RTR) {  // the first packet in RTR: Communication Established
            sc_time d = SC_ZERO_TIME;
            post_event(q, hw::EQE_COMM_EST, d);
        }
    }
    handle_request(q, p);
}

transport_engine::resp_job* transport_engine::duplicate_job(qp& q, uint32_t psn, uint32_t end, bool& fresh) {
    // Jobs are in PSN order; duplicates may arrive in any order (reordered on the cable).
    size_t k = 0;
    for (; k < q.r_count; ++k) {
        resp_job& j = q.resp[(q.r_head + k) % q.resp.size()];
        if (j.kind != resp_kind::ack && psn_le(j.req_psn, psn) && psn_lt(psn, j.end_psn)) {
            fresh = false;
            return &j;
        }
        if (psn_lt(psn, j.psn)) break;
    }
    if (!push_resp(q)) return nullptr;
    for (size_t m = q.r_count - 1; m > k; --m)
        q.resp[(q.r_head + m) % q.resp.size()] = q.resp[(q.r_head + m - 1) % q.resp.size()];
    resp_job& j = q.resp[(q.r_head + k) % q.resp.size()];
    j = resp_job{};
    j.req_psn = psn;
    j.end_psn = end;
    fresh = true;
    return &j;
}

void transport_engine::handle_duplicate(qp& q, const rx_packet& p, const sc_time& delay) {
    ++duplicates;
    const uint8_t code = p.h.b.opcode & 0x1F;
    sc_time d = delay;
    // IBA 9.7.5: a duplicate READ or atomic is answered again. If its request's responses
    // are still queued (the requester went back before they were all sent) that job starts
    // again from the duplicate's PSN; a duplicate never takes a second READ/atomic resource,
    // so however often the requester goes back the queue holds one job per request.
    bool fresh = false;
    if (code == op::RDMA_READ_REQUEST) {
        // Re-execute: the requester lost (some of) the responses; it asks again from this PSN.
        const uint64_t len = p.h.r.dma_len;
        if (!(q.access & hw::ACCESS_REMOTE_READ) || p.payload_len || len > 0x80000000ull ||
            (len &&
             xlate_->check(p.h.r.rkey, q.who, p.h.r.va, len, hw::ACCESS_REMOTE_READ, d) != xlate_status::ok))
            return;
        const uint32_t mtu = hw::mtu_bytes(q.mtu);
        const uint32_t npkts = len ? uint32_t((len + mtu - 1) / mtu) : 1u;
        resp_job* j = duplicate_job(q, p.h.b.psn, (p.h.b.psn + npkts) & PSN_MASK, fresh);
        if (!j) return;
        j->kind = resp_kind::read;
        j->psn = p.h.b.psn;
        j->va = p.h.r.va;
        j->rkey = p.h.r.rkey;
        j->left = uint32_t(len);
        j->first = true;
        j->at = sim_now() + d;
        if (fresh) {
            j->msn = q.msn;
            ++q.resp_rd;
        }
        return;
    }
    if (code == op::COMPARE_SWAP || code == op::FETCH_ADD) {
        // Never executed twice: the result kept for that PSN is sent again.
        for (const atomic_replay& r : q.replay) {
            if (r.valid && r.psn == p.h.b.psn) {
                resp_job* j = duplicate_job(q, r.psn, (r.psn + 1) & PSN_MASK, fresh);
                if (!j || !fresh) return;  // full, or its response is still queued
                ++atomic_replays;
                j->kind = resp_kind::atomic;
                j->psn = r.psn;
                j->msn = q.msn;
                j->orig = r.orig;
                j->at = sim_now() + d;
                ++q.resp_rd;
                return;
            }
        }
        return;  // older than the replay history: dropped (the requester's retries fail)
    }
    // SEND / WRITE: already placed; acknowledge what we have.
    if (p.h.b.ack_req) respond(q, wire::aeth_ack(31), (q.rq_psn - 1) & PSN_MASK, d);
}

bool transport_engine::handle_read_request(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    const uint64_t len = p.h.r.dma_len;
    if (p.payload_len || len > 0x80000000ull || q.max_dest_rd_atomic == 0) {
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    if (!(q.access & hw::ACCESS_REMOTE_READ) ||
        (len && xlate_->check(p.h.r.rkey, q.who, p.h.r.va, len, hw::ACCESS_REMOTE_READ, delay) !=
                    xlate_status::ok)) {
        responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
        return false;
    }
    // Beyond max_dest_rd_atomic a READ waits in the queue behind the earlier ones; a requester
    // that overruns even the queue is in violation (invalid request).
    resp_job* j = q.resp_rd < 2 * MAX_RD_ATOMIC ? push_resp(q) : nullptr;
    if (!j) {
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    const uint32_t npkts = len ? uint32_t((len + mtu - 1) / mtu) : 1u;
    q.msn = (q.msn + 1) & PSN_MASK;
    q.acks_owed = 0;  // the response acknowledges everything before it
    q.ack_flush = false;
    j->kind = resp_kind::read;
    j->psn = psn;
    j->req_psn = psn;
    j->end_psn = (psn + npkts) & PSN_MASK;
    j->msn = q.msn;
    j->va = p.h.r.va;
    j->rkey = p.h.r.rkey;
    j->left = uint32_t(len);
    j->at = sim_now() + delay;
    ++q.resp_rd;
    q.rq_psn = (q.rq_psn + npkts) & PSN_MASK;  // C10-85: no receive WQE consumed
    return true;
}

bool transport_engine::handle_atomic(qp& q, const rx_packet& p, sc_time& delay) {
    const uint32_t psn = p.h.b.psn;
    const uint64_t va = p.h.ae.va;
    if (p.payload_len || (va & 7) || q.max_dest_rd_atomic == 0) {  // o10-43: 8-byte aligned only
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    phys_seg seg[1];
    unsigned nsegs = 0;
    if (!(q.access & hw::ACCESS_REMOTE_ATOMIC) ||
        xlate_->translate(p.h.ae.rkey, q.who, va, 8, hw::ACCESS_REMOTE_ATOMIC, seg, 1, nsegs, delay) !=
            xlate_status::ok) {
        responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
        return false;
    }
    resp_job* j = q.resp_rd < 2 * MAX_RD_ATOMIC ? push_resp(q) : nullptr;
    if (!j) {
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return false;
    }
    // o10-48: executed as one read-modify-write at host memory; one HCA issues them one at a
    // time, so atomics on the same memory are serialised.
    uint64_t orig = 0;
    const auto kind =
        (p.h.b.opcode & 0x1F) == op::COMPARE_SWAP ? atomic_ext::compare_swap : atomic_ext::fetch_add;
    const sc_time now = sim_now();
    for (const atomic_busy& b : atomic_busy_)
        if (b.pa == seg[0].pa && b.until > now + delay)
            delay = b.until - now;  // waits for the previous atomic on this word
    if (!dma.atomic(seg[0].pa, kind, p.h.ae.compare, p.h.ae.swap_add, orig, delay)) {
        --q.r_count;
        responder_error(q, wire::nak::REMOTE_OPERATIONAL_ERROR, psn, delay);
        return false;
    }
    ++atomics_executed;
    atomic_busy_[atomic_next_] = atomic_busy{seg[0].pa, now + delay};
    atomic_next_ = (atomic_next_ + 1) % MAX_RD_ATOMIC;
    if (q.replay.empty()) q.replay.resize(std::max<size_t>(1, q.max_dest_rd_atomic));
    atomic_replay& r = q.replay[q.replay_next];
    q.replay_next = (q.replay_next + 1) % q.replay.size();
    r = atomic_replay{true, psn, orig};
    q.msn = (q.msn + 1) & PSN_MASK;
    q.acks_owed = 0;
    q.ack_flush = false;
    j->kind = resp_kind::atomic;
    j->psn = psn;
    j->req_psn = psn;
    j->end_psn = (psn + 1) & PSN_MASK;
    j->msn = q.msn;
    j->orig = orig;
    j->at = sim_now() + delay;
    ++q.resp_rd;
    q.rq_psn = (q.rq_psn + 1) & PSN_MASK;
    return true;
}

transport_engine::request_kind transport_engine::request_kind_of(uint8_t code) {
    request_kind k;
    k.send_first = code == op::SEND_FIRST || code == op::SEND_ONLY || code == op::SEND_ONLY_IMM ||
                   code == op::SEND_ONLY_INV;
    k.send_cont = code == op::SEND_MIDDLE || code == op::SEND_LAST || code == op::SEND_LAST_IMM ||
                  code == op::SEND_LAST_INV;
    k.inv = code == op::SEND_LAST_INV || code == op::SEND_ONLY_INV;
    k.write_first =
        code == op::RDMA_WRITE_FIRST || code == op::RDMA_WRITE_ONLY || code == op::RDMA_WRITE_ONLY_IMM;
    k.write_cont =
        code == op::RDMA_WRITE_MIDDLE || code == op::RDMA_WRITE_LAST || code == op::RDMA_WRITE_LAST_IMM;
    k.read = code == op::RDMA_READ_REQUEST;
    k.atomic = code == op::COMPARE_SWAP || code == op::FETCH_ADD;
    k.last = code == op::SEND_LAST || code == op::SEND_LAST_IMM || code == op::SEND_ONLY ||
             code == op::SEND_ONLY_IMM || k.inv || code == op::RDMA_WRITE_LAST ||
             code == op::RDMA_WRITE_LAST_IMM || code == op::RDMA_WRITE_ONLY ||
             code == op::RDMA_WRITE_ONLY_IMM;
    k.imm = code == op::SEND_LAST_IMM || code == op::SEND_ONLY_IMM || code == op::RDMA_WRITE_LAST_IMM ||
            code == op::RDMA_WRITE_ONLY_IMM;
    return k;
}

void transport_engine::write_segs(const phys_seg* segs, unsigned nsegs, const uint8_t* data, sc_time& delay) {
    for (unsigned k = 0; k < nsegs; ++k) {
        dma.write(segs[k].pa, data, segs[k].len, delay, rx_loan_);
        data += segs[k].len;
    }
}

sc_time transport_engine::responder_start(qp& q) {
    // A packet's work starts rx_latency after it arrives, and no sooner than rx_cycles after
    // the QP's previous one.
    const sc_time now = sim_now();
    sc_time delay = q.resp_free > now ? q.resp_free - now : SC_ZERO_TIME;
    delay = qp_context(q.qpn, delay);
    q.resp_free = now + delay + rx_time_;
    rx_busy_ps += rx_ps_;
    return delay + rx_latency_;
}

void transport_engine::handle_request(qp& q, const rx_packet& p) {
    const uint8_t code = p.h.b.opcode & 0x1F;
    const request_kind k = request_kind_of(code);
    if (probe_)  // the breakdown follows the message's last packet
        probe_->mark(path_probe::rx_engine, sim_now(), k.last || k.read || k.atomic);
    sc_time delay = responder_start(q);
    const uint32_t psn = p.h.b.psn;
    q.slid = p.h.l.slid;

    const uint32_t diff = (psn - q.rq_psn) & PSN_MASK;
    if (diff != 0) {
        if (diff >= 0x800000) {  // earlier PSN: a duplicate
            handle_duplicate(q, p, delay);
        } else {  // a gap: NAK once, again only for a packet asking for an ACK (the NAK may be lost)
            ++seq_errors;
            if (!q.nak_pending || p.h.b.ack_req) {
                q.nak_pending = true;
                nak(q, wire::nak::PSN_SEQUENCE_ERROR, q.rq_psn, delay);
            }
        }
        return;
    }
    q.nak_pending = false;

    const bool send_first = k.send_first, send_cont = k.send_cont, inv = k.inv, write_first = k.write_first,
               write_cont = k.write_cont, read = k.read, atomic = k.atomic, last = k.last, imm = k.imm;
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    // Opcode sequence (IBA 9.7.5.1.1): FIRST/ONLY, READ and atomics start a message, MIDDLE/LAST
    // continue one of the same kind; MIDDLE and FIRST carry exactly one MTU, LAST/ONLY at most one.
    const bool starts = send_first || write_first || read || atomic;
    const bool seq_ok =
        (starts && !q.in_send && !q.in_write) || (send_cont && q.in_send) || (write_cont && q.in_write);
    const bool len_ok = read || atomic || (last ? p.payload_len <= mtu : p.payload_len == mtu);
    if (!seq_ok || !len_ok || !(starts || send_cont || write_cont)) {
        // Out-of-sequence opcodes, bad lengths and unsupported requests: Invalid Request.
        responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
        return;
    }
    if (read || atomic) {
        if (read ? handle_read_request(q, p, delay) : handle_atomic(q, p, delay)) ++rx_packets;
        return;
    }

    if (send_first || send_cont) {
        // C10-81: each Send message consumes one receive WQE, taken at its first packet.
        if (send_first && !take_recv_wqe(q, delay)) {
            rnr_nak(q, psn, delay);
            return;
        }
        uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
        if (!scatter(q, p.payload, p.payload_len, delay, status, syndrome)) {
            // The receive WQE reports it (LOC_LEN: too small; LOC_PROT / LOC_QP_OP): the
            // requester learns Invalid Request or Remote Operational Error.
            ++naks_sent;
            q.r_count = 0;
            send_ack(q,
                     wire::aeth_nak(status == hw::CQE_LOC_LEN_ERR ? wire::nak::INVALID_REQUEST
                                                                  : wire::nak::REMOTE_OPERATIONAL_ERROR),
                     psn, delay);
            q.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV, status, uint32_t(q.recv_offset), 0, 0, false, delay,
                            syndrome);
            enter_error(q, delay);
            return;
        }
        if (last && probe_) probe_->mark(path_probe::data_placed, sim_now() + delay);
        q.in_send = !last;
        if (last && inv) {
            // SEND with Invalidate (o10-37.2.21): the key is invalidated after the data is placed,
            // before the completion. If the invalidation is refused the key stays as it was, the
            // receive WQE completes with a memory management error and the QP goes to Error
            // (o10-37.2.24, .27, .39); the requester learns Remote Operational Error.
            const xlate_status st = xlate_->invalidate(p.h.ieth_rkey, q.who, true, delay);
            if (st != xlate_status::ok) {
                ++naks_sent;
                q.r_count = 0;
                send_ack(q, wire::aeth_nak(wire::nak::REMOTE_OPERATIONAL_ERROR), psn, delay);
                q.have_rwqe = false;
                q.in_send = false;
                recv_completion(q, hw::CQE_OP_RECV, hw::CQE_MW_BIND_ERR, uint32_t(q.recv_offset),
                                p.h.ieth_rkey, 0, false, delay, uint8_t(st));
                enter_error(q, delay);  // the receive completion reports it: no async event
                return;
            }
        }
        if (last) {
            q.have_rwqe = false;
            q.msn = (q.msn + 1) & PSN_MASK;
            recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(q.recv_offset),
                            imm   ? p.h.immdt
                            : inv ? p.h.ieth_rkey
                                  : 0,
                            imm   ? hw::CQE_FLAG_WITH_IMM
                            : inv ? hw::CQE_FLAG_WITH_INV
                                  : 0,
                            p.h.b.se, delay);
        }
    } else {
        if (write_first) {
            if (!(q.access & hw::ACCESS_REMOTE_WRITE)) {
                responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
                return;
            }
            q.write_va = p.h.r.va;
            q.write_rkey = p.h.r.rkey;
            q.write_len = p.h.r.dma_len;
            q.write_done = 0;
        }
        if (q.write_done + p.payload_len > q.write_len ||
            (last && q.write_done + p.payload_len != q.write_len)) {
            responder_error(q, wire::nak::INVALID_REQUEST, psn, delay);
            return;
        }
        // C10-86: a WRITE with immediate consumes a receive WQE; without a WQE it is RNR.
        if (imm && !take_recv_wqe(q, delay)) {
            rnr_nak(q, psn, delay);
            return;
        }
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (p.payload_len &&
            xlate_->translate(q.write_rkey, q.who, q.write_va + q.write_done, p.payload_len,
                              hw::ACCESS_REMOTE_WRITE, segs, MAX_SEGS, nsegs, delay) != xlate_status::ok) {
            if (imm) {
                // The WRITE with immediate took a receive WQE: it reports the violation
                // (Local Access Error) and the requester learns Remote Access Error.
                ++naks_sent;
                q.r_count = 0;
                send_ack(q, wire::aeth_nak(wire::nak::REMOTE_ACCESS_ERROR), psn, delay);
                q.have_rwqe = false;
                recv_completion(q, hw::CQE_OP_RECV_RDMA_WITH_IMM, hw::CQE_LOC_ACCESS_ERR, 0, 0, 0, false,
                                delay);
                enter_error(q, delay);
                return;
            }
            responder_error(q, wire::nak::REMOTE_ACCESS_ERROR, psn, delay);
            return;
        }
        write_segs(segs, nsegs, p.payload, delay);
        q.write_done += p.payload_len;
        q.in_write = !last;
        if (last && probe_) probe_->mark(path_probe::data_placed, sim_now() + delay);
        if (last) {
            q.msn = (q.msn + 1) & PSN_MASK;
            // C10-87: a WRITE without immediate completes nothing at the responder.
            if (imm) {
                q.have_rwqe = false;
                recv_completion(q, hw::CQE_OP_RECV_RDMA_WITH_IMM, hw::CQE_SUCCESS, uint32_t(q.write_len),
                                p.h.immdt, hw::CQE_FLAG_WITH_IMM, p.h.b.se, delay);
            }
        }
    }
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
    q.rq_psn = (q.rq_psn + 1) & PSN_MASK;
    acknowledge(q, psn, p.h.b.ack_req, delay);
}

// ---------------------------------------------------------------- UC and UD responders

void transport_engine::abandon_uc(qp& q) {
    // IBA 9.8.3: a UC message missing a packet is dropped whole, without a completion; the
    // receive WQE it had taken stays for the next message (what it held is overwritten).
    q.in_send = q.in_write = false;
    q.recv_offset = 0;
}

void transport_engine::handle_uc(qp& q, const rx_packet& p) {
    sc_time delay = responder_start(q);
    const uint8_t code = p.h.b.opcode & 0x1F;
    const uint32_t psn = p.h.b.psn;
    q.slid = p.h.l.slid;
    const request_kind k = request_kind_of(code);  // UC: no SEND with Invalidate, READ or atomics
    const bool send_first = k.send_first && !k.inv, send_cont = k.send_cont && !k.inv,
               write_first = k.write_first, write_cont = k.write_cont, last = k.last && !k.inv, imm = k.imm;
    const bool starts = send_first || write_first;
    auto drop = [&] {  // the rest of this message is dropped, up to the next FIRST/ONLY
        abandon_uc(q);
        q.uc_drop = !last;
        ++uc_dropped;
    };
    if (!(starts || send_cont || write_cont)) {  // not a UC request opcode
        drop();
        return;
    }
    // IBA 9.8.3: the expected PSN follows every packet received; a gap means a lost packet: the
    // message it belonged to is dropped, and a FIRST or ONLY starts the next one normally.
    const bool in_sequence = psn == q.rq_psn;
    q.rq_psn = (psn + 1) & PSN_MASK;
    if (!starts && (!in_sequence || q.uc_drop || !((send_cont && q.in_send) || (write_cont && q.in_write)))) {
        if (!q.uc_drop) {  // the first packet of this message found wrong: the message is counted once
            if (!in_sequence) ++seq_errors;
            ++uc_dropped;
        }
        abandon_uc(q);
        q.uc_drop = !last;
        return;
    }
    if (starts) {
        if (q.in_send || q.in_write) ++uc_dropped;  // the previous message's LAST was lost
        abandon_uc(q);
        q.uc_drop = false;
    }
    const uint32_t mtu = hw::mtu_bytes(q.mtu);
    if (last ? p.payload_len > mtu : p.payload_len != mtu) {
        drop();
        return;
    }
    if (send_first || send_cont) {
        if (send_first && !take_recv_wqe(q, delay)) {  // no receive WQE: no RNR on UC, the message is lost
            drop();
            return;
        }
        uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
        if (!scatter(q, p.payload, p.payload_len, delay, status, syndrome)) {
            // C10-148: a receive completion error (the buffer too small, a protection error)
            // completes the WQE in error and the QP goes to Error.
            q.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV, status, uint32_t(q.recv_offset), 0, 0, false, delay,
                            syndrome);
            enter_error(q, delay);
            return;
        }
        q.in_send = !last;
        if (last) {
            q.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(q.recv_offset), imm ? p.h.immdt : 0,
                            imm ? hw::CQE_FLAG_WITH_IMM : 0, p.h.b.se, delay);
        }
    } else {
        if (write_first) {
            if (!(q.access & hw::ACCESS_REMOTE_WRITE)) {  // the QP takes no WRITEs: dropped (no NAK on UC)
                drop();
                return;
            }
            q.write_va = p.h.r.va;
            q.write_rkey = p.h.r.rkey;
            q.write_len = p.h.r.dma_len;
            q.write_done = 0;
        }
        if (q.write_done + p.payload_len > q.write_len ||
            (last && q.write_done + p.payload_len != q.write_len)) {
            drop();
            return;
        }
        if (imm && !take_recv_wqe(q, delay)) {
            drop();
            return;
        }
        phys_seg segs[MAX_SEGS];
        unsigned nsegs = 0;
        if (p.payload_len &&
            xlate_->translate(q.write_rkey, q.who, q.write_va + q.write_done, p.payload_len,
                              hw::ACCESS_REMOTE_WRITE, segs, MAX_SEGS, nsegs, delay) != xlate_status::ok) {
            // An R_Key violation on UC drops the message; nothing is written from here on.
            drop();
            return;
        }
        write_segs(segs, nsegs, p.payload, delay);
        q.write_done += p.payload_len;
        q.in_write = !last;
        if (last && imm) {
            q.have_rwqe = false;
            recv_completion(q, hw::CQE_OP_RECV_RDMA_WITH_IMM, hw::CQE_SUCCESS, uint32_t(q.write_len),
                            p.h.immdt, hw::CQE_FLAG_WITH_IMM, p.h.b.se, delay);
        }
    }
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
}

void transport_engine::handle_ud(qp& q, const rx_packet& p) {
    sc_time delay = responder_start(q);
    if (p.h.b.opcode != op::UD_SEND_ONLY && p.h.b.opcode != op::UD_SEND_ONLY_IMM) {
        ++ud_dropped;
        return;
    }
    // C10-14: a datagram whose Q_Key is not the QP's is dropped silently.
    if (p.h.d.qkey != q.qkey) {
        ++qkey_violations;
        pkeys_->qkey_violation();  // the port's Q_Key violation counter (QUERY_PORT)
        ++ud_dropped;
        return;
    }
    // No receive WQE: the datagram is dropped silently (UD has no RNR).
    if (!take_recv_wqe(q, delay)) {
        ++ud_dropped;
        return;
    }
    const bool imm = p.h.b.opcode == op::UD_SEND_ONLY_IMM;
    uint8_t status = hw::CQE_SUCCESS, syndrome = 0;
    // The buffer's first 40 bytes are the GRH's: the GRH when the datagram has one, else they
    // are left untouched; the payload always starts at byte 40. A zero-length datagram without
    // a GRH places nothing and checks nothing (C10-54.1.2).
    bool ok = true;
    if (p.h.has_grh) {
        uint8_t g[wire::GRH_BYTES];
        wire::encode(p.h.g, g);
        ok = scatter(q, g, uint32_t(wire::GRH_BYTES), delay, status, syndrome);
    } else if (p.payload_len) {
        if (rwqe(q).capacity < wire::GRH_BYTES) {
            status = hw::CQE_LOC_LEN_ERR;
            ok = false;
        } else {
            q.recv_offset = wire::GRH_BYTES;
        }
    }
    if (ok && p.payload_len) ok = scatter(q, p.payload, p.payload_len, delay, status, syndrome);
    q.have_rwqe = false;
    const recv_src src{p.h.d.src_qp, p.h.l.slid, p.h.l.sl, uint8_t(p.h.l.dlid & ((1u << lmc_) - 1)),
                       p.pkey_index};
    if (!ok) {
        // C10-153: the receive WQE completes in error (too small, protection) and the QP goes to Error.
        recv_completion(q, hw::CQE_OP_RECV, status, 0, 0, 0, false, delay, syndrome, &src);
        enter_error(q, delay);
        return;
    }
    recv_completion(q, hw::CQE_OP_RECV, hw::CQE_SUCCESS, uint32_t(wire::GRH_BYTES + p.payload_len),
                    imm ? p.h.immdt : 0,
                    uint8_t((p.h.has_grh ? hw::CQE_FLAG_GRH : 0) | (imm ? hw::CQE_FLAG_WITH_IMM : 0)),
                    p.h.b.se, delay, 0, &src);
    ++rx_packets;
    rx_payload_bytes += p.payload_len;
}

void transport_engine::receive_mcast(const rx_packet& p) {
    // o10-35: a multicast packet names QP 0xFFFFFF; it is a UD SEND and carries a GRH whose DGID
    // is the group's MGID (IBA 8.4.1).
    const bool ud_send = p.h.b.opcode == op::UD_SEND_ONLY || p.h.b.opcode == op::UD_SEND_ONLY_IMM;
    unsigned n = 0;
    const bool well_formed = mcast_ && ud_send && p.h.has_grh && p.h.b.dest_qp == 0xFFFFFF;
    const uint32_t* members = well_formed ? mcast_->lookup(p.h.l.dlid, p.h.g.dgid.data(), n) : nullptr;
    unsigned delivered = 0;
    for (unsigned i = 0; i < n; ++i) {
        const uint32_t qpn = members[i];
        if (qpn >= qps_.size()) continue;
        qp& q = qps_[qpn];
        if (!q.valid || q.transport != hw::QPT_UD ||
            !(q.state == hw::QPS_RTR || q.state == hw::QPS_RTS || q.state == hw::QPS_SQD ||
              q.state == hw::QPS_SQE))
            continue;
        if (!pkey_checker::match(p.h.b.pkey, pkeys_->pkey(q.pkey_index))) {
            pkeys_->pkey_violation(p, pkeys_->pkey(q.pkey_index));  // not in the packet's partition
            continue;
        }
        handle_ud(q, p);  // each attached QP takes a receive WQE of its own
        ++delivered;
    }
    if (delivered)
        mcast_deliveries += delivered;
    else if (!(well_formed && n == 0 && (p.h.l.slid >> lmc_) == (lid_ >> lmc_)))
        ++mcast_dropped;  // (this port's own copy of a group it has no member of is no drop)
}

void transport_engine::build_ud_headers(const qp& q, const send_wqe& w, wire::headers& h,
                                        uint8_t opcode) const {
    h = wire::BLANK_HEADERS;
    h.l.vl = 0;
    h.l.sl = w.ud.sl & 0xF;
    h.l.dlid = w.ud.dlid;
    const uint16_t mask = uint16_t((1u << lmc_) - 1);
    h.l.slid = uint16_t((lid_ & ~mask) | (w.ud.src_path_bits & mask));  // C10-3
    h.b.opcode = opcode;
    h.b.pkey = pkeys_->pkey(q.pkey_index);  // QP1 too: its own P_Key (C10-133)
    if (q.qpn == pkey_checker::SMI_QPN) {
        h.l.vl = 15;        // SMPs travel on VL15 ...
        h.b.pkey = 0xFFFF;  // ... with the default P_Key: QP0 has no P_Key index (C10-125, C10-126)
    }
    h.b.dest_qp = w.ud.dest_qpn & 0xFFFFFF;
    h.b.psn = q.sq_psn & PSN_MASK;
    // C10-15: a Q_Key with its high-order bit set means the QP's own Q_Key.
    h.d.qkey = (w.ud.qkey & 0x80000000u) ? q.qkey : w.ud.qkey;
    h.d.src_qp = q.qpn;
    if (w.ud.grh) {
        h.has_grh = true;
        h.g.tclass = w.ud.tclass;
        h.g.flow_label = w.ud.flow_label & 0xFFFFF;
        h.g.hop_limit = w.ud.hop_limit;
        std::copy(gid_, gid_ + 16, h.g.sgid.begin());
        std::copy(w.ud.dgid, w.ud.dgid + 16, h.g.dgid.begin());
    }
}

bool transport_engine::take_recv_wqe(qp& q, sc_time& delay) {
    if (q.have_rwqe) return true;
    if (q.srqn) {
        // o10-53.2.1: the SRQ's next WQE, whichever of its QPs the message arrived at.
        const wqe_fetcher::srq_outcome r = fetcher_->take_srq(q.srqn - 1, rwqe(q), delay);
        if (r.limit_reached) {
            ++srq_events;
            cqw_->post_event(hw::EQE_SRQ_LIMIT, q.srqn - 1, delay);
        }
        if (r.entered_error) {
            ++srq_events;
            cqw_->post_event(hw::EQE_SRQ_ERROR, q.srqn - 1, delay);
        }
        if (r.result != wqe_fetcher::srq_take::ok) return false;
        q.have_rwqe = true;
        q.recv_offset = 0;
        return true;
    }
    if (q.rq_consumer == q.rq_producer) return false;
    recv_at(q, q.rq_consumer, rwqe(q), delay);
    ++q.rq_consumer;
    q.have_rwqe = true;
    q.recv_offset = 0;
    prefetch_recv(q, delay);
    return true;
}

void transport_engine::recv_at(qp& q, uint16_t index, recv_wqe& out, sc_time& delay) {
    if (q.rq_cache.empty()) {
        q.rq_cache.resize(rq_prefetch);
        q.rq_ready.resize(rq_prefetch);
    }
    const size_t slot = index % q.rq_cache.size();
    if (uint16_t(q.rq_fetched - index) != 0 && uint16_t(q.rq_fetched - index) <= q.rq_cache.size()) {
        out = q.rq_cache[slot];
        const sc_time now = sim_now();
        if (q.rq_ready[slot] > now + delay)
            delay = q.rq_ready[slot] - now;  // the prefetch is still in flight
        return;
    }
    fetcher_->fetch_recv(q.qpn, index, out, delay);
    if (q.rq_fetched == index) ++q.rq_fetched;
}

void transport_engine::prefetch_recv(qp& q, const sc_time& delay) {
    if (q.rq_cache.empty()) {
        q.rq_cache.resize(rq_prefetch);
        q.rq_ready.resize(rq_prefetch);
    }
    if (uint16_t(q.rq_fetched - q.rq_consumer) > q.rq_cache.size())
        q.rq_fetched = q.rq_consumer;  // consumed past the read-ahead (fetched on demand)
    while (q.rq_fetched != q.rq_producer && uint16_t(q.rq_fetched - q.rq_consumer) < q.rq_cache.size()) {
        const size_t slot = q.rq_fetched % q.rq_cache.size();
        sc_time t = delay;
        fetcher_->fetch_recv(q.qpn, q.rq_fetched, q.rq_cache[slot], t);
        q.rq_ready[slot] = sim_now() + t;
        ++q.rq_fetched;
    }
}

bool transport_engine::scatter(qp& q, const uint8_t* data, uint32_t len, sc_time& delay, uint8_t& status,
                               uint8_t& syndrome) {
    if (rwqe(q).malformed) {
        status = hw::CQE_LOC_QP_OP_ERR;
        return false;
    }
    if (q.recv_offset + len > rwqe(q).capacity) {
        status = hw::CQE_LOC_LEN_ERR;
        return false;
    }
    if (!write_sges(q.recv_who, rwqe(q).sg, rwqe(q).num_sge, q.recv_offset, data, len, delay, status,
                    syndrome))
        return false;
    q.recv_offset += len;
    return true;
}

void transport_engine::recv_completion(qp& q, uint8_t opcode, uint8_t status, uint32_t byte_len, uint32_t imm,
                                       uint8_t flags, bool solicited, sc_time& delay, uint8_t syndrome,
                                       const recv_src* src) {
    hw::cqe e{};
    e.wr_id = rwqe(q).wr_id;
    e.status = status;
    e.opcode = opcode;
    e.byte_len = byte_len;
    e.imm = imm;
    e.flags = flags;
    e.qpn = q.qpn;
    e.src_qp = src ? src->src_qp : q.dest_qpn;
    e.slid = src ? src->slid : q.slid;
    e.sl = src ? src->sl : q.sl;
    if (src) e.dlid_path_bits = src->path_bits;
    // QP1 (GSI) reports the entry the P_Key checker matched; other QPs their own index.
    e.pkey_index = src && q.qpn == pkey_checker::GSI_QPN ? src->pkey_index : q.pkey_index;
    e.wqe_counter = rwqe(q).wqe_index;
    e.vendor_err = syndrome;
    if (cqw_->complete(q.recv_cqn, e, solicited, delay)) ++recv_completions;
    if (status == hw::CQE_WR_FLUSH_ERR)
        ++flushed;
    else if (status != hw::CQE_SUCCESS)
        ++error_completions;
}

}  // namespace hcasim
