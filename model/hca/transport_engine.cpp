// Transport engine, the module shell: construction (parameters, counters, the three SC_METHODs),
// the QP context cache, QP load / destroy / reset from the command unit, the QP state the
// command unit queries, entering Error and flushing, the model-state counters, and the speed
// hints. The roles live beside it, in the order one RDMA WRITE passes through them:
//   transport_requester.cpp    WQE -> packets (the requester method), READ/atomic requests
//   transport_responder.cpp    packet in -> PSN check -> placement -> ACK, READ/atomic responses
//   transport_reliability.cpp  ACK/NAK, READ response and atomic ACK at the requester,
//                              completions, go-back-N, the local ACK timer and RNR waits
//   transport_datagram.cpp     UC and UD responders, multicast, UD headers, SQEr
#include "model/hca/transport_engine.h"
#include "model/core/sim_time.h"

#include <algorithm>
#include <cstring>

#include "model/hca/cq_writer.h"
#include "model/hca/mcast_table.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/psn.h"
#include "model/hca/translation_unit.h"
#include "model/hca/wqe_fetcher.h"
#include "tlm_if/commands.h"

namespace hcasim {

using namespace sc_core;
namespace op = wire::op;

transport_engine::transport_engine(const sc_module_name& name, const sc_time& hca_clock, unsigned max_qps,
                                   const cc_config* cc, unsigned max_eecs)
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
      qpc_cache_index("qpc_cache_index", "mod", "", cache_index_help, {"mod", "hash"}),
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
      wqe_cycles("wqe_cycles", 0, "cycles",
                 "send unit cycles per WQE: one QP's WQEs run in order on one unit (0: no per-WQE limit)",
                 {0, 1000000}),
      send_units("send_units", 1, "units",
                 "send units working on WQEs at once; a QP uses unit qpn mod send_units", {1, 4096}),
      recv_units("recv_units", 0, "units",
                 "receive units; a QP's request packets use unit qpn mod recv_units (0: one unit per QP)",
                 {0, 4096}),
      qpc_miss_stalls_unit("qpc_miss_stalls_unit", true, "",
                           "a QP context miss at the requester holds the QP's send unit until the context "
                           "has arrived (with wqe_cycles > 0; receive units always wait for it); false: the "
                           "unit starts other QPs' WQEs meanwhile"),
      read_cycles("read_cycles", 0, "cycles",
                  "receive unit cycles per inbound READ request, beyond rx_cycles", {0, 1000000}),
      atomic_cycles("atomic_cycles", 0, "cycles", "receive unit cycles per inbound atomic, beyond rx_cycles",
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
      rd_dropped(
          "rd_dropped",
          "RD packets dropped: unknown EE context, not its P_Key (o10-59), a request to an EE context in "
          "Reset or Init (o10-13, o10-14), a response no RD QP awaits"),
      rd_resyncs_sent("rd_resyncs_sent",
                      "RESYNCs EE contexts sent: a message on them failed after sending packets"),
      rd_resyncs_received("rd_resyncs_received",
                          "RESYNCs EE contexts received: the expected PSN set past them, a message in "
                          "progress dropped"),
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
      stall_credit("stall_credit",
                   "times the requester or responder waited for link credit (the far end's VL buffer full)"),
      state_qps("state_qps", "QPs that exist at the end of the run"),
      state_bytes("state_bytes",
                  "bytes of model state of the existing QPs at the end of the run (records and their rings)"),
      state_slot_bytes(
          "state_slot_bytes",
          "bytes of model state per QP number, all hca.max_qps of them (transport engine and WQE fetcher)"),
      path_migrations("path_migrations", "QPs moved to their alternate path (Armed -> Migrated, IBA 10.4)"),
      path_mig_errors("path_mig_errors", "migration requests that failed validation (PATH_MIG_ERR raised)"),
      qps_(size_t(max_qps) + max_eecs),  // EE contexts' records follow the QPs'
      max_eecs_(max_eecs),
      eec_base_(max_qps),
      buffer_waiters_(max_qps),
      qpc_cache_(1, 1),
      ready_(max_qps),
      resp_ready_(size_t(max_qps) + max_eecs),
      deadlines_(size_t(max_qps) + max_eecs) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    wqe_buffer_.resize(wqe_buffer_entries);
    qpc_cache_.configure(qpc_cache_entries, qpc_cache_ways, qpc_cache_policy, qpc_cache_index);
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
    wqe_time_ = clock * double(wqe_cycles.get());
    read_time_ = clock * double(read_cycles.get());
    atomic_time_ = clock * double(atomic_cycles.get());
    send_free_.assign(send_units, SC_ZERO_TIME);
    recv_free_.assign(recv_units, SC_ZERO_TIME);
    tx_latency_ = clock * double(tx_latency_cycles.get());
    rx_latency_ = clock * double(rx_latency_cycles.get());
    coalesce_time_ = sc_time(ack_coalesce_ns.get(), SC_NS);
    SC_METHOD(requester_method);
    sensitive << tx_work_;
    dont_initialize();
    SC_METHOD(response_method);
    sensitive << resp_work_;
    dont_initialize();
    SC_METHOD(lane_method);
    sensitive << lane_kick_;
    dont_initialize();
    SC_METHOD(timer_method);
    sensitive << timer_now_ev_;
    for (sc_event& e : timer_ev_) sensitive << e;
    dont_initialize();
    if (cc && cc->enable) cc_ = std::make_unique<cc_unit>(*cc);  // its counters named here
    tx_pkt_ = packet_pool::take();
    ack_pkt_ = packet_pool::take();
    resp_pkt_ = packet_pool::take();
}

transport_engine::~transport_engine() {
    packet_pool::give(tx_pkt_);
    packet_pool::give(ack_pkt_);
    packet_pool::give(resp_pkt_);
}

// ---------------------------------------------------------------- the command unit, QP context cache

void transport_engine::set_qpc_table(uint64_t base) {
    qpc_base_ = base;
    qpc_cache_.clear();
}

sc_time transport_engine::qp_context(uint32_t qpn, const sc_time& delay) {
    if (qpn >= eec_base_) return delay;  // an EE context: held on chip
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
    // Timing only: the context's data is not used, so a failed read decides nothing.
    (void)qpc_dma.read_timing(qpc_base_ + uint64_t(qpn) * sizeof(hw::qp_context), sizeof(hw::qp_context), d);
    *slot = now + d;
    return d;
}

void transport_engine::load_qp(const hw::qp_context& c, uint32_t mask, sc_time& delay) {
    if (c.qpn >= qps_.size()) return;
    qp& q = qps_.create(c.qpn);
    hint_qp_created();
    const uint8_t prev = q.valid ? q.state : uint8_t(hw::QPS_RESET);
    // The command unit wrote the entry to the QPC table; the on-chip copy is written too.
    if (!qpc_cache_.find(c.qpn)) {
        bool evicted = false;
        qpc_cache_.insert(c.qpn, &evicted);
        if (evicted) ++qpc_evictions;
    }
    const bool fresh = !q.valid || c.state == hw::QPS_RESET;
    if (fresh) {
        reset_qp(q, c.qpn);
        q.valid = true;
    }
    const bool xrc = c.transport == hw::QPT_XRC_INI || c.transport == hw::QPT_XRC_TGT;
    q.rd = c.transport == hw::QPT_RD;
    q.rdd = c.rdd;
    q.transport = xrc || q.rd ? uint8_t(hw::QPT_RC) : c.transport;
    q.xrc = c.transport == hw::QPT_XRC_INI   ? qp::XRC_INI
            : c.transport == hw::QPT_XRC_TGT ? qp::XRC_TGT
                                             : qp::XRC_NONE;
    q.xrcd = c.xrcd;
    q.mtu = c.mtu;
    q.sl = c.sl;
    q.sig_all = c.sig_all;
    q.pd = c.pd;
    q.send_cqn = c.send_cqn;
    // An XRC target's SRQ, PD and CQ are its message's (xrc_target): a Modify QP between two
    // packets of a message leaves them.
    if (q.xrc != qp::XRC_TGT || fresh) {
        q.who = xlate_owner{c.pd, c.qpn, c.mm_flags};
        q.srqn = c.srqn;
        q.recv_who = c.srqn ? xlate_owner{fetcher_->srq_pd(c.srqn - 1), c.qpn, c.mm_flags} : q.who;
        q.recv_cqn = c.recv_cqn;
    }
    q.dest_qpn = c.dest_qpn;
    q.access = c.access;
    q.dlid = c.dlid;
    q.src_path_bits = c.src_path_bits;
    q.pkey_index = c.pkey_index;
    q.alt = {c.alt_dlid, c.alt_pkey_index, c.alt_sl, c.alt_src_path_bits, c.alt_timeout};
    if (mask & (hw::QP_ATTR_ALT_PATH | hw::QP_ATTR_PATH_MIG_STATE)) q.mig_err_raised = false;
    const uint8_t prev_mig = q.mig_state;
    q.mig_state = c.path_mig_state;
    q.qkey = c.qkey;
    q.retry_cnt = c.retry_cnt;
    q.rnr_retry = c.rnr_retry;
    q.min_rnr_timer = c.min_rnr_timer;
    q.timeout = c.timeout;
    q.req.retries_left = c.retry_cnt;
    q.req.rnr_retries_left = c.rnr_retry;
    q.max_rd_atomic = uint8_t(std::min<unsigned>(c.max_rd_atomic, MAX_RD_ATOMIC));
    q.max_dest_rd_atomic = uint8_t(std::min<unsigned>(c.max_dest_rd_atomic, MAX_RD_ATOMIC));
    if (q.rd) rd_path(q);  // an RD QP's path and PSNs are its EE context's
    if (mask & hw::QP_ATTR_RQ_PSN) q.rsp.rq_psn = c.rq_psn & PSN_MASK;
    if (mask & hw::QP_ATTR_SQ_PSN) q.req.sq_psn = c.sq_psn & PSN_MASK;
    q.req.window_max = std::max(q.req.window_max, size_t(1) << c.sq_log_size);
    // The replay history keeps its ring order: it only grows (when it exists at all).
    if (!q.rsp.replay.empty() && q.rsp.replay.size() < std::max<size_t>(1, q.max_dest_rd_atomic))
        q.rsp.replay.resize(std::max<size_t>(1, q.max_dest_rd_atomic));
    q.state = c.state;
    // Manual migration (Modify QP Armed -> Migrated, the firmware checked RTS/SQD): the paths
    // switch at once, as an automatic one.
    if (prev_mig == hw::MIG_ARMED && c.path_mig_state == hw::MIG_MIGRATED &&
        (mask & hw::QP_ATTR_PATH_MIG_STATE)) {
        q.mig_state = hw::MIG_ARMED;
        migrate(q, delay);
    }
    if (c.state == hw::QPS_SQD && prev != hw::QPS_SQD) {
        // The drain point: after the last WQE started (the message in progress included).
        q.req.sqd_resend = outstanding(q);
        q.req.sqd_limit = q.req.started_limit;
        q.req.drain_pending = true;
        q.req.sqd_notify = c.sqd_notify;
        check_drained(q, delay);
    }
    if (c.state != hw::QPS_SQD) q.req.drain_pending = false;
    if (c.state == hw::QPS_ERR && prev != hw::QPS_ERR) enter_error(q, delay);
    if ((c.state == hw::QPS_RTS || c.state == hw::QPS_ERR) && q.req.queue.count) make_tx_ready(q.qpn);
}

void transport_engine::destroy_qp(uint32_t qpn) {
    if (qpn < qps_.size() && qps_.allocated(qpn)) {
        qpc_cache_.invalidate(qpn);
        reset_qp(qps_[qpn], qpn);
    }
}

void transport_engine::reset_qp(qp& q, uint32_t qpn) {
    if (q.rd) rd_release(q, true);
    drop_queue(q);
    drop_rd(q);
    const bool was_ready = q.tx_ready, was_resp = q.resp_ready;
    q = qp{};
    q.tx_ready = was_ready;  // still listed in the ready FIFOs; they drop it
    q.resp_ready = was_resp;
    q.qpn = qpn;
}

// ---------------------------------------------------------------- QP state for the command unit (QUERY_QP)

void transport_engine::current_psns(uint32_t qpn, uint32_t& sq_psn, uint32_t& rq_psn) const {
    sq_psn = rq_psn = 0;
    if (qpn < qps_.size()) {
        sq_psn = qps_[qpn].req.sq_psn;
        rq_psn = qps_[qpn].rsp.rq_psn;
    }
}

uint8_t transport_engine::state(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid ? qps_[qpn].state : uint8_t(hw::QPS_RESET);
}

bool transport_engine::draining(uint32_t qpn) const {
    return qpn < qps_.size() && qps_[qpn].valid && qps_[qpn].req.drain_pending;
}

// ---------------------------------------------------------------- model-state counters

uint64_t transport_engine::qp_state_bytes() const {
    // Per existing QP: its record and the rings it has grown.
    uint64_t bytes = 0;
    for (size_t n = 0; n < qps_.size(); ++n) {
        if (!qps_.allocated(n)) continue;
        const qp& q = qps_[n];
        bytes += sizeof(qp) + q.req.window.capacity() * sizeof(inflight) +
                 q.req.rd.capacity() * sizeof(rd_ctx) + q.rsp.rq_cache.capacity() * sizeof(recv_wqe) +
                 q.rsp.rq_ready.capacity() * sizeof(sc_time) + q.rsp.resp.capacity() * sizeof(resp_job) +
                 q.rsp.replay.capacity() * sizeof(atomic_replay) + (q.rsp.rwqe ? sizeof(recv_wqe) : 0);
    }
    return bytes;
}

uint64_t transport_engine::qpn_slot_bytes() const {
    // Per QP number (hca.max_qps of them): the record pointer, the ready FIFOs', waiters' and
    // timer slots, and the WQE fetcher's record.
    return qps_.size() * (sizeof(std::unique_ptr<qp>) + sizeof(ready_[0]) + sizeof(resp_ready_[0]) +
                          sizeof(buffer_waiters_[0]) + deadline_heap::slot_bytes()) +
           fetcher_->qp_state_bytes();
}

void transport_engine::end_of_simulation() {
    for (size_t n = 0; n < qps_.size(); ++n)
        if (qps_[n].valid) ++state_qps;
    state_bytes += qp_state_bytes();
    state_slot_bytes += qpn_slot_bytes();
}

// ---------------------------------------------------------------- per-QP rings and WQE buffer entries

bool transport_engine::window_room(qp& q) {
    if (!q.req.window.full()) return true;
    if (q.req.window.slots() >= q.req.window_max) return false;
    q.req.window.grow(std::min(q.req.window_max, std::max<size_t>(4, 2 * q.req.window.slots())));
    return true;
}

bool transport_engine::rd_room(qp& q) {
    const size_t limit = std::max<size_t>(1, q.max_rd_atomic);
    if (!q.req.rd.full()) return true;
    if (q.req.rd.slots() >= limit) return false;
    const size_t old_head = q.req.rd.head_slot(), old_size = q.req.rd.slots();
    q.req.rd.grow(std::min(limit, std::max<size_t>(2, 2 * old_size)));
    // Window entries name their READ/atomic context by slot: renumber them.
    for (size_t i = 0; i < q.req.window.size() && old_size; ++i) {
        inflight& f = q.req.window[i];
        if (f.rd != NO_RD) f.rd = uint8_t((f.rd + old_size - old_head) % old_size);
    }
    return true;
}

void transport_engine::drop_rd(qp& q) {
    while (!q.req.rd.empty()) {
        free_entry(q.req.rd.front().entry);
        q.req.rd.pop_front();
    }
}

void transport_engine::drop_queue(qp& q) {
    while (q.req.queue.count) release_head(q);
}

// ---------------------------------------------------------------- Error and flush (both sides)

void transport_engine::enter_error(qp& q, sc_time& delay) {
    if (q.state != hw::QPS_ERR) {
        q.state = hw::QPS_ERR;
        if (!q.eec) fetcher_->set_state(q.qpn, hw::QPS_ERR);
    }
    if (q.rd) rd_release(q, true);
    q.req.ack_timer = false;
    q.rsp.ack_flush = false;
    q.req.drain_pending = false;
    q.req.resend_pending = false;
    flush(q, delay);
    // IBA 10.3.1, 11.6.3.1: an SRQ-attached QP in Error takes no more WQEs from its SRQ; the one
    // it held has completed (flushed) above. (An XRC target is attached to no SRQ: each message
    // names its own.)
    if (q.srqn && q.xrc == qp::XRC_NONE) post_event(q, hw::EQE_QP_LAST_WQE_REACHED, delay);
}

void transport_engine::post_event(qp& q, uint8_t type, sc_time& delay) {
    ++async_events;
    if (q.eec) {  // o10-65, o10-23: an EE context's own events name the EE context
        const uint8_t t = type == hw::EQE_PATH_MIGRATED  ? uint8_t(hw::EQE_EEC_PATH_MIGRATED)
                          : type == hw::EQE_PATH_MIG_ERR ? uint8_t(hw::EQE_EEC_PATH_MIG_ERR)
                                                         : uint8_t(hw::EQE_EEC_ERR);
        cqw_->post_event(t, q.qpn - eec_base_, delay);
        return;
    }
    cqw_->post_event(type, q.qpn, delay);
}

// Completes every outstanding work request of the QP with WR_FLUSH_ERR (signaled or not):
// the send window, the parsed queue, and the posted receive WQEs. Queued responses are dropped.
void transport_engine::flush(qp& q, sc_time& delay) {
    while (!q.req.window.empty()) pop_window(q, hw::CQE_WR_FLUSH_ERR, delay);
    drop_rd(q);
    while (q.req.queue.count) {
        const send_wqe& w = head_wqe(q);
        const inflight f{w.wr_id, 0, 0, uint32_t(w.length), w.wqe_index, w.opcode, w.flags, NO_RD, 0};
        const bool known = !w.fetch_error;  // an unreadable WQE has nothing to complete
        retire_head(q);
        if (known) send_completion(q, f, hw::CQE_WR_FLUSH_ERR, delay);
    }
    if (q.rsp.have_rwqe) {
        q.rsp.have_rwqe = false;
        recv_completion(q, hw::CQE_OP_RECV, hw::CQE_WR_FLUSH_ERR, 0, 0, 0, false, delay);
    }
    while (q.rsp.rq_consumer != q.rsp.rq_producer) {
        recv_at(q, q.rsp.rq_consumer, rwqe(q), delay);
        ++q.rsp.rq_consumer;
        recv_completion(q, hw::CQE_OP_RECV, hw::CQE_WR_FLUSH_ERR, 0, 0, 0, false, delay);
    }
    q.rsp.in_send = q.rsp.in_write = false;
    q.rsp.resp.clear();
    q.rsp.resp_rd = 0;
}

// ---------------------------------------------------------------- speed hints (see transport_engine.h)

void transport_engine::expect(uint32_t qpn) {
    if (qps_.many() && qpn < qps_.size()) {
        qps_.prefetch(qpn);
        qpc_cache_.prefetch(qpn);
    }
}

}  // namespace hcasim
