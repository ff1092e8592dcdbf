// Transport engine: the RC, UC and UD requester and responder.
//
// Requester: segments SEND / SEND with immediate / RDMA WRITE (with immediate) into path-MTU
// packets (FIRST/MIDDLE/LAST/ONLY), issues RDMA READ requests (RETH) and atomics (AtomicETH),
// numbers packets with PSNs, gathers payload through the translation unit and DMA reads, and
// processes responses: ACKs and NAKs (coalesced or not), READ responses (scattered into the
// WQE's local SGEs) and atomic acknowledgements (the original value written to the local SGE).
// Reliability: a window of unacknowledged messages, go-back-N from the first unacknowledged
// PSN on a sequence-error NAK, an implied NAK (missing or reordered READ response: costs no
// retry) or the local ACK timeout (4.096 us x 2^timeout, retry_cnt), RNR NAK waits (rnr_retry,
// 7 = forever); max_rd_atomic READs/atomics outstanding (more wait) and the fence indicator.
//
// Responder: PSN checking (duplicates re-ACKed, duplicate READs re-executed, duplicate atomics
// answered from the replay history without executing again; neither takes a second response
// slot), opcode-sequence and length checks, receive WQE consumption and scatter, RDMA WRITE
// placement, READ responses and atomics through translation and DMA, receive completions, ACK
// coalescing, NAKs (sequence, RNR, invalid request, remote access, remote operational error).
//
// UC (IBA 9.4, 9.8): SEND and RDMA WRITE (with immediate) segmented as RC but without ACKs; a
// message completes at the requester once its last packet is on the wire. The responder drops
// a message silently when one of its packets is lost (PSN gap), it has no receive WQE, or a
// remote check fails; the receive WQE it was filling is kept for the next message.
// UD (IBA 9.8, 10.2.2): one-packet SENDs addressed by the WQE's datagram segment (LRH DLID/SL,
// DETH Q_Key and source QP, an optional GRH); the receive buffer's first 40 bytes hold the GRH
// (or are left alone); a Q_Key mismatch drops the datagram silently (C10-14). UC and UD send
// errors move the QP to SQEr: only the send queue is flushed, receiving goes on (C10-38..40).
//
// Congestion control (IBA Annex A10, fabric.cc.enable; transport_cc.cpp): a packet that
// arrives with FECN is answered with BECN (RC: in an ACK sent at once for it, or the next
// response of the QP; UC and UD: a CNP to its sender); a BECN or a CNP raises the flow's CCT
// index, and after each packet of a flow its next one waits for the injection delay that index
// asks for (the requester parks the QP: no process per QP).
//
// One requester method and one response method serve all QPs round robin at packet
// granularity; the receive side runs in the port's receive method; one timer method serves
// every QP's deadlines. No process per QP.
//
// QP context cache: the requester needs a QP's context for each packet it sends, the responder
// for each packet it receives. `qpc_cache_entries` contexts are on chip (set associative,
// `qpc_cache_ways`, `qpc_cache_policy`); a miss reads the QP's 256-byte entry from the QPC
// table in host memory through the `qpc_dma` port (its own PCIe traffic class); at most
// `qpc_miss_slots` such reads are outstanding, a further miss waits for a slot. The requester
// serves other QPs while a miss is outstanding; the responder starts that QP's packet when the
// entry has arrived. The cache decides timing only: the QP's state lives in this module.
//
// Files, in the order one RDMA WRITE passes through them (docs/architecture.md, "The transport
// engine's files"): transport_engine.cpp (the shell: construction, the QP context cache, QP
// load/destroy, Error and flush), transport_requester.cpp (WQE -> packets), at the far end
// transport_responder.cpp (packet -> PSN check -> placement -> ACK), back home
// transport_reliability.cpp (ACK -> completion; go-back-N and timers); UC, UD and multicast in
// transport_datagram.cpp. The WQE buffer, the deadline heap and the rings have headers of
// their own (wqe_buffer.h, deadline_heap.h, model/core/ring.h).
#pragma once
#include <systemc>

#include <algorithm>
#include <array>
#include <memory>
#include <vector>

#include "model/core/cc_config.h"
#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/ring.h"
#include "model/core/same_time_fifo.h"
#include "model/core/unit_clock.h"
#include "model/core/path_probe.h"
#include "model/core/stats.h"
#include "model/fabric/packet.h"
#include "model/hca/congestion_control.h"
#include "model/hca/deadline_heap.h"
#include "model/hca/dma_port.h"
#include "model/hca/onchip_cache.h"
#include "model/hca/port.h"
#include "model/hca/qp_control.h"
#include "model/hca/rx_packet.h"
#include "model/hca/send_queue_sink.h"
#include "model/hca/translation_unit.h"
#include "model/hca/work_request.h"
#include "model/hca/wqe_buffer.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

namespace hcasim {

class wqe_source;
class address_translation;
class completion_sink;
class packet_tx;
class partition_keys;
class mcast_lookup;

/// READ/atomic operations a QP may have outstanding, either side (QUERY_HCA max_qp_rd_atom).
constexpr unsigned MAX_RD_ATOMIC = 16;

class transport_engine final : public sc_core::sc_module,
                               public rx_sink,
                               public send_queue_sink,
                               public qp_control {
public:
    dma_port dma;
    dma_port qpc_dma;  ///< QP context cache misses (reads of the QPC table)

    param<double> clock_mhz;              ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> qpc_cache_entries;    ///< QP contexts on chip
    param<unsigned> qpc_cache_ways;       ///< QP context cache associativity
    param<std::string> qpc_cache_policy;  ///< lru|fifo|random
    param<std::string> qpc_cache_index;   ///< mod|hash: how a QPN picks its set
    param<unsigned> qpc_miss_slots;       ///< QP context misses outstanding at once
    param<unsigned> wqe_queue_depth;      ///< parsed WQEs queued per QP (fetch-ahead)
    param<unsigned> wqe_buffer_entries;   ///< parsed WQEs on chip, shared by all QPs
    param<unsigned> packet_cycles;        ///< requester initiation interval per packet
    param<unsigned> rx_cycles;            ///< responder initiation interval per packet
    param<unsigned> wqe_cycles;           ///< send unit cycles per WQE (0: no per-WQE limit)
    param<unsigned> send_units;           ///< send units: QPs whose WQEs are started at once
    param<unsigned> recv_units;           ///< receive units (0: one per QP)
    param<bool> qpc_miss_stalls_unit;   ///< a requester QPC miss holds the QP's send unit until it is filled
    param<unsigned> read_cycles;        ///< receive unit cycles per inbound READ request, beyond rx_cycles
    param<unsigned> atomic_cycles;      ///< receive unit cycles per inbound atomic, beyond rx_cycles
    param<unsigned> tx_latency_cycles;  ///< requester pipeline latency: WQE on chip to packet at the port
    param<unsigned> rx_latency_cycles;  ///< responder pipeline latency: packet in to its first DMA
    param<unsigned> ack_req_interval;   ///< request an ACK at least every N packets
    param<unsigned> ack_coalesce;       ///< responder: one ACK per N acknowledge-requesting packets
    param<double> ack_coalesce_ns;      ///< responder: a held-back ACK goes out after this long
    param<unsigned> rq_prefetch;        ///< receive WQEs read ahead per QP (on-chip)

    /// info: retransmissions, timeouts, NAKs sent, errors; debug: every packet sent and received.
    module_log log_;
    counter tx_packets, tx_payload_bytes, rx_packets, rx_payload_bytes, acks_sent, naks_sent, acks_received,
        naks_received, rnr_naks_sent, duplicates, seq_errors, dropped_bad_qp, retransmits, timeouts,
        read_requests, read_responses_sent, read_responses_received, atomics_executed, atomic_replays,
        send_completions, recv_completions, error_completions, flushed, async_events, uc_dropped, ud_dropped,
        qkey_violations, ud_oversize, rd_dropped, rd_resyncs_sent, rd_resyncs_received, mcast_deliveries,
        mcast_dropped, wq_catastrophic, srq_events, tx_busy_ps, rx_busy_ps, resp_busy_ps, qpc_hits,
        qpc_misses, qpc_evictions, qpc_miss_waits, wqe_buffer_stalls, wqe_buffer_peak, stall_window,
        stall_rd_atomic, stall_fence, stall_wqe_fetch, stall_wqe_fetch_ps, stall_port_ps, stall_credit,
        state_qps, state_bytes, state_slot_bytes, path_migrations, path_mig_errors;

    SC_HAS_PROCESS(transport_engine);
    /// `cc`: the fabric's congestion control settings (validated); nullptr or not enabled: no
    /// congestion control and no CC counters.
    transport_engine(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock, unsigned max_qps,
                     const cc_config* cc = nullptr, unsigned max_eecs = 0);
    ~transport_engine() override;

    void bind(wqe_source& f, address_translation& t, completion_sink& c, packet_tx& p, partition_keys& k) {
        fetcher_ = &f;
        xlate_ = &t;
        cqw_ = &c;
        port_ = &p;
        pkeys_ = &k;
    }
    /// Where the QP context table is (INIT_HCA): cache misses read it. Empties the cache.
    void set_qpc_table(uint64_t base);
    /// Marks path_probe::wqe_start, wire_end (requester), rx_engine and data_placed (responder).
    void set_probe(path_probe& p) { probe_ = &p; }
    /// The multicast group table (fan-out of received multicast datagrams).
    void bind_mcast(mcast_lookup& m) { mcast_ = &m; }
    /// The port's LID (source LID of every packet sent).
    void set_lid(uint16_t lid) { lid_ = lid; }
    /// The port's active rate: congestion control's injection delay scales with a packet's
    /// serialisation time.
    void set_rate_gbps(double gbps) {
        if (cc_) cc_->ps_per_byte = 8000.0 / gbps;
    }
    /// Congestion control's flows (CCT index per QP or SL) at this HCA; nullptr: CC off.
    ca_congestion_control* congestion_control() { return cc_ ? &cc_->ca : nullptr; }
    /// The port's LMC (UD source path bits, C10-3) and GID (index 0: the source GID of a GRH).
    void set_lmc(uint8_t lmc) { lmc_ = uint8_t(lmc & 7); }
    void set_gid(const uint8_t (&gid)[16]) { std::copy(gid, gid + 16, gid_); }

    // From the WQE fetcher.
    /// WQEs the engine takes for this QP now: its own queue's room, limited by the free entries
    /// of the shared WQE buffer. A QP refused for want of buffer entries is credited (the
    /// fetcher's credit()) when an entry frees.
    unsigned room(uint32_t qpn);
    /// The same test without registering a wait (the inline window's fast path).
    bool has_room(uint32_t qpn) const;
    void push_send(uint32_t qpn, const send_wqe& w);
    void rq_posted(uint32_t qpn, uint16_t producer);

    // From the command unit. `delay` accumulates the work done (flush completions).
    void load_qp(const hw::qp_context& c, uint32_t attr_mask, sc_core::sc_time& delay);
    void destroy_qp(uint32_t qpn);
    /// The QP's state as the hardware has it now: it moves a QP to Error on its own after a
    /// completion error (for QUERY_QP and MODIFY_QP's current-state check).
    uint8_t state(uint32_t qpn) const;
    /// 1 while an SQD drain is still in progress (for QUERY_QP).
    bool draining(uint32_t qpn) const;
    /// PSNs as the hardware has them now (for QUERY_QP).
    void current_psns(uint32_t qpn, uint32_t& sq_psn, uint32_t& rq_psn) const;

    // From the command unit: EE contexts (transport_rd.cpp), held on chip.
    void load_eec(const hw::eec_context& c, uint32_t attr_mask, sc_core::sc_time& delay) override;
    void destroy_eec(uint32_t eecn) override;
    uint8_t eec_state(uint32_t eecn) const override;
    void eec_psns(uint32_t eecn, uint32_t& sq_psn, uint32_t& rq_psn) const override;
    void eec_paths(uint32_t eecn, hw::eec_context& c) const override;
    /// EE contexts the engine holds (hca.max_eecs; 0: no RD).
    unsigned max_eecs() const { return max_eecs_; }

    // From the P_Key checker.
    void receive(const rx_packet& p) override;
    /// A hint that work for the QP comes soon (a packet for it is on its way, the fetcher
    /// reads its WQEs next): starts loading its record and QPC cache set into the host CPU's
    /// cache. No effect on the model.
    void expect(uint32_t qpn) override;

private:
    static constexpr uint8_t NO_RD = 0xFF;
    static constexpr uint32_t NIL = ~uint32_t(0);
    static constexpr unsigned MAX_SEGS = 8;  ///< physical segments one translation returns at most
    struct inflight {
        uint64_t wr_id;
        uint32_t first_psn;
        uint32_t last_psn;
        uint32_t length;
        uint16_t wqe_index;
        uint8_t opcode, flags;
        uint8_t rd;         ///< READ/atomic: its rd_ctx slot; NO_RD otherwise
        uint32_t next_psn;  ///< READ: PSN of the next response expected
    };
    /// Requester: a READ or atomic awaiting its response data. Its WQE (the local SGEs) stays
    /// in the shared WQE buffer until then.
    struct rd_ctx {
        uint64_t placed = 0;  ///< READ bytes scattered so far
        uint32_t entry = 0;   ///< its WQE buffer entry
    };
    enum class resp_kind : uint8_t { read, atomic, ack };
    /// Responder: a response waiting for the response process (READ data, atomic ACK, or an
    /// ACK/NAK that must not overtake earlier responses).
    struct resp_job {
        resp_kind kind = resp_kind::ack;
        uint8_t syndrome = 0;
        uint32_t psn = 0;  ///< PSN of the next response packet
        uint32_t msn = 0;
        uint32_t end_psn = 0;  ///< READ/atomic: one past its request's last PSN (in the padding)
        uint64_t va = 0;       ///< READ: next remote byte
        uint32_t rkey = 0;
        uint32_t left = 0;     ///< READ bytes still to send
        bool first = true;     ///< READ: the next packet is the first of its response
        uint32_t req_psn = 0;  ///< READ/atomic: its request's PSN (in the padding)
        sc_core::sc_time at;   ///< when its data (atomic result, request checks) is ready
        uint64_t orig = 0;     ///< atomic: the original value
    };
    struct atomic_replay {
        bool valid = false;
        uint32_t psn = 0;
        uint64_t orig = 0;
    };
    /// The requester's running state of a QP (its send queue side).
    struct requester_state {
        uint32_t sq_psn = 0;
        wqe_list queue;              // parsed WQEs from the fetcher: a list of WQE buffer entries
        bool buffer_wait = false;    // refused by a full WQE buffer: credited when an entry frees
        uint64_t cur_offset = 0;     // bytes of the head WQE already sent
        uint32_t cur_first_psn = 0;  // PSN of the head WQE's first packet
        unsigned cur_sge = 0;
        uint64_t cur_sge_off = 0;
        uint32_t since_ack_req = 0;
        uint8_t retries_left = 7, rnr_retries_left = 7;  // reset by forward progress
        bool resume = false;                             // skip to resume_psn when the head WQE starts again
        bool resend_pending = false;                     // gone back N: the WQEs are being fetched again
        uint32_t resume_psn = 0;
        bool blocked = false;      // window, READ/atomic limit or fence: the next response unblocks
        bool acked_valid = false;  // last_acked is meaningful
        uint32_t last_acked = 0;   // highest PSN the responder acknowledged
        bool gap_retry = false;    // a go-back-N for a missing READ response is under way
        uint32_t gap_psn = 0;
        sc_core::sc_time paused_until;  // RNR wait or WQE in flight: no packet before this
        bool ack_timer = false;         // local ACK timer running
        sc_core::sc_time ack_deadline;
        // The rings below grow on demand (doubling, up to their limit), so an idle QP holds none.
        ring<inflight> window;  // sent, awaiting ACK (up to window_max: the send ring)
        size_t window_max = 1;
        ring<rd_ctx> rd;  // READs/atomics awaiting responses, FIFO (up to max_rd_atomic)
        bool sqd_notify = false, drain_pending = false;
        uint16_t started_limit = 0;  // index after the last WQE whose first packet went out
        bool sqd_resend =
            false;  // SQD: WQEs before sqd_limit were started (a retransmission may resend them)
        uint16_t sqd_limit = 0;
    };
    /// The responder's running state of a QP (its receive side).
    struct responder_state {
        uint32_t rq_psn = 0, msn = 0;
        uint16_t rq_producer = 0, rq_consumer = 0;
        bool in_send = false, in_write = false, nak_pending = false, comm_est = false;
        bool have_rwqe = false;
        bool uc_drop = false;            // UC: dropping the rest of a message (up to its next FIRST/ONLY)
        bool becn_owed = false;          // CC: a request came with FECN; the next response carries BECN
        std::unique_ptr<recv_wqe> rwqe;  // the receive WQE in use (allocated at the QP's first receive)
        std::vector<recv_wqe>
            rq_cache;  // prefetched receive WQEs, by index mod size (allocated at the first post)
        std::vector<sc_core::sc_time> rq_ready;  // when each prefetched WQE's read completes
        uint16_t rq_fetched = 0;                 // next receive WQE to prefetch
        uint64_t recv_offset = 0;                // bytes of the current SEND placed
        uint64_t write_va = 0, write_len = 0, write_done = 0;
        uint32_t write_rkey = 0;
        uint16_t slid = 0;  // peer LID (from its packets)
        sc_core::sc_time resp_free;
        ring<resp_job> resp;                // responses in PSN order, FIFO (up to RESP_SLOTS)
        std::vector<atomic_replay> replay;  // last atomics executed, ring (allocated at the first atomic)
        size_t replay_next = 0;
        unsigned resp_rd = 0;    // READ/atomic responses queued
        unsigned acks_owed = 0;  // coalesced: acknowledge-requesting packets not yet ACKed
        bool ack_flush = false;  // a coalesced ACK is due at ack_flush_at
        sc_core::sc_time ack_flush_at;
    };
    /// A QP's record: its attributes (from the QP context, load_qp), the engine's scheduling
    /// flags, and the requester's and the responder's running state. (`state_bytes` counts
    /// its size.)
    struct qp {
        bool valid = false, tx_ready = false, resp_ready = false;
        // The number of the engine's last packet (requester) and response this QP sent: QPs
        // queued at one instant take their turns by it (turn_order).
        uint64_t tx_turn = 0, resp_turn = 0;
        bool ctx_filled = false;  // requester: a context miss was served; the next packet uses it
        uint8_t state = hw::QPS_RESET, transport = hw::QPT_RC, mtu = hw::MTU_4096, sl = 0;
        bool sig_all = false;
        uint32_t qpn = 0, pd = 0, send_cqn = 0, recv_cqn = 0, dest_qpn = 0, access = 0;
        xlate_owner who;       // PD, QPN and memory flags for the translation unit
        xlate_owner recv_who;  // the same for receive WQE SGEs: the SRQ's PD with an SRQ (o10-37.2.12)
        uint32_t srqn = 0;     // SRQ number + 1, or 0: receive WQEs come from the QP's own ring
        uint16_t dlid = 0, pkey = 0xFFFF, pkey_index = 0;
        uint32_t qkey = 0;  // UD: the QP's Q_Key (receive check; high-bit rule on send)
        // XRC (IBA 10.2.10): an initiator or target QP runs as RC (transport QPT_RC) on the wire
        // with the XRC transport bits; a target takes its SRQ (and with it the PD and the
        // receive CQ) from each request's XRCETH, which must name an SRQ of its domain.
        enum : uint8_t { XRC_NONE, XRC_INI, XRC_TGT } xrc = XRC_NONE;
        uint32_t xrcd = 0;  // XRC_TGT: its XRC domain
        // RD (IBA 10.2.7, 10.2.8; transport_rd.cpp): an RD QP (rd) runs its requester as RC
        // through the EE context its head WQE names, which it owns for the message (one message
        // at a time on an EE context and on the QP); an EE context is a record of its own (eec)
        // that numbers the packets, and at the far end acknowledges them and places each message
        // with the receive queue of the RD QP its packets name (rq_owner).
        bool rd = false, eec = false;
        uint32_t rdd = 0;
        uint32_t rd_eec = NIL;      // RD QP: the EE context record it owns now
        uint32_t rd_owner = NIL;    // EE context: the RD QP whose message it carries now
        uint32_t rq_owner = NIL;    // EE context: the RD QP whose receive queue the message uses
        uint32_t rd_peer_qp = 0;    // EE context: the requesting QP of the message under way
        ring<uint32_t> rd_waiters;  // EE context: RD QPs waiting to own it, FIFO
        bool rd_waiting = false;    // RD QP: in an EE context's rd_waiters
        // EE context (requester): a message on it failed, so where the far end stopped is unknown;
        // a RESYNC at its sq_psn goes first (rd_resync_sent: it is on its way).
        bool rd_resync = false, rd_resync_sent = false;
        uint32_t rd_sent_end = NIL;  // RD QP: one past the highest PSN its message sent before a go-back-N
        uint8_t retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 0, timeout = 0;
        uint8_t max_rd_atomic = 0, max_dest_rd_atomic = 0;
        // Automatic path migration (IBA 10.4; transport_apm.cpp): the primary path is dlid, sl,
        // src_path_bits, pkey_index and timeout; a migration swaps it with `alt`.
        struct path {
            uint16_t dlid = 0, pkey_index = 0;
            uint8_t sl = 0, src_path_bits = 0, timeout = 0;
        };
        path alt;
        uint8_t src_path_bits = 0;
        uint8_t mig_state = hw::MIG_MIGRATED;  // hw::path_mig_state (o10-26: Migrated at first)
        bool mig_err_raised = false;           // PATH_MIG_ERR raised since the last Modify QP of the path
        requester_state req;
        responder_state rsp;
    };

    /// Time from `delay` on until the QP's context is on chip: `delay` itself on a hit; on a
    /// miss, the QPC entry's DMA read (the entry is cached from then on).
    sc_core::sc_time qp_context(uint32_t qpn, const sc_core::sc_time& delay);

    recv_wqe& rwqe(qp& q) {
        if (!q.rsp.rwqe) q.rsp.rwqe = std::make_unique<recv_wqe>();
        return *q.rsp.rwqe;
    }
    /// Bytes of model state of the existing QPs (records, grown rings); for --speed.
    uint64_t qp_state_bytes() const;
    /// Bytes of model state per QP number, for all of them (arrays sized hca.max_qps).
    uint64_t qpn_slot_bytes() const;
    void end_of_simulation() override;

    // The shared WQE buffer.
    send_wqe& head_wqe(qp& q) { return wqe_buffer_[q.req.queue.head]; }
    const send_wqe& head_wqe(const qp& q) const { return wqe_buffer_[q.req.queue.head]; }
    /// Takes the head entry off the QP's list; returns it (still allocated).
    uint32_t detach_head(qp& q) { return wqe_buffer_.detach_head(q.req.queue); }
    /// Frees the head entry of the QP's list (credits a QP waiting for an entry).
    void release_head(qp& q) { free_entry(detach_head(q)); }
    /// Frees the WQE buffer entries of every READ/atomic awaiting its response.
    void drop_rd(qp& q);
    /// Frees every entry of the QP's list (go back N, reset, destroy).
    void drop_queue(qp& q);
    /// Frees a WQE buffer entry; the oldest QP waiting for one is credited.
    void free_entry(uint32_t e);
    /// Resets the QP's state, keeping its place in the ready FIFOs (they drop it).
    void reset_qp(qp& q, uint32_t qpn);
    /// Room for one more window entry (grows the ring up to window_max); false if full.
    bool window_room(qp& q);
    /// Room for one more READ/atomic context (grows the ring up to max_rd_atomic); false if full.
    bool rd_room(qp& q);

    // requester (transport_requester.cpp)
    void make_tx_ready(uint32_t qpn);
    /// QPs held back because their port lane (VL) has no room while QPs on other lanes go on
    /// (a port with VL arbitration: packet_tx::tx_lanes() > 1), per lane in arrival order. A
    /// waiting QP stays marked as listed (tx_ready, resp_ready): it is in no ready FIFO meanwhile.
    struct lane_waits {
        uint32_t lanes = 0;  // lanes with waiters
        std::array<ring<uint32_t>, MAX_TX_LANES> qpns;
        std::array<uint8_t, MAX_TX_LANES> sl{};  // an SL of each lane, to ask the port with
        bool holds(unsigned lane) const { return lanes >> lane & 1; }
    };
    /// The QP waits for its lane (behind the QPs waiting there already).
    void wait_lane(lane_waits& w, const qp& q);
    /// Moves the waiters of every lane the port no longer blocks to `ready`; true if any.
    bool release_lanes(lane_waits& w, same_time_fifo<uint32_t>& ready, uint64_t qp::*turn);
    /// SC_METHOD: wakes the lanes' waiters when the port has room for them again.
    void lane_method();
    /// SC_METHOD: sends packets of ready QPs round robin, one per initiation interval, until it
    /// must wait (for work, the port, a WQE); it waits with next_trigger().
    void requester_method();
    bool may_send(const qp& q) const;
    /// Sends the next packet of the QP's head WQE (or completes it locally); returns false if
    /// the QP must wait for a response (window, READ/atomic limit, fence).
    bool send_packet(qp& q);
    void build_bth_lrh(const qp& q, wire::headers& h, uint8_t opcode, uint32_t psn) const;
    bool send_read_or_atomic(qp& q, send_wqe& w, sc_core::sc_time& delay);
    /// A WQE that sends nothing (NOP, memory operations) joins the window and completes in order.
    void complete_locally(qp& q, const send_wqe& w, sc_core::sc_time& delay);
    /// Bind / Local Invalidate / Fast Register: executed by the translation unit when the WQE
    /// reaches the head (once: not again when a go-back-N re-fetches it), completed in order.
    bool memory_op(qp& q, send_wqe& w, sc_core::sc_time& delay);
    /// The head WQE's last packet is out: off the queue (`keep`: its buffer entry stays
    /// allocated, a READ/atomic's context holds it).
    void retire_head(qp& q, bool keep = false);
    /// Completes the head WQE in error (status) and moves the QP to Error.
    void requester_error(qp& q, uint8_t status, const send_wqe& w, sc_core::sc_time& delay,
                         uint8_t syndrome = 0);
    /// Local Work Queue Catastrophic Error (the send ring could not be read): QP_FATAL, Error.
    void wq_catastrophic_error(qp& q, sc_core::sc_time& delay);

    // responder (transport_responder.cpp)
    /// During receive(): the packet's buffer, on offer to the DMA writes of its payload
    /// (rx_packet::loan); a write of other bytes is not in it and copies as usual.
    buffer_loan_ext* rx_loan_ = nullptr;
    /// Delay until the responder starts on a packet of this QP (its receive unit's initiation
    /// interval and latency); the unit is then busy rx_cycles plus `work` (READ, atomic).
    sc_core::sc_time responder_start(qp& q, const sc_core::sc_time& work = sc_core::SC_ZERO_TIME);
    /// What a request opcode's low five bits say (the same for RC and UC).
    struct request_kind {
        bool send_first = false, send_cont = false, inv = false, write_first = false, write_cont = false,
             read = false, atomic = false, last = false, imm = false;
    };
    static request_kind request_kind_of(uint8_t code);
    void handle_request(qp& q, const rx_packet& p);
    /// XRC target: points the QP at the XRC SRQ the request's XRCETH names (its receive WQEs,
    /// PD and CQ for this message); false, after an Invalid Request NAK, if the SRQ does not
    /// exist, is not in the QP's XRC domain, or changes within a message.
    bool xrc_target(qp& q, const rx_packet& p, sc_core::sc_time& delay);
    /// DMA-writes `data` to the segments; false if one write failed (a page outside host memory).
    [[nodiscard]] bool write_segs(const phys_seg* segs, unsigned nsegs, const uint8_t* data,
                                  sc_core::sc_time& delay);
    /// ACK for `psn` now, coalesced, or queued behind pending READ/atomic responses.
    void acknowledge(qp& q, uint32_t psn, bool ack_req, const sc_core::sc_time& ready);
    /// ACK or NAK that keeps PSN order with queued responses.
    void respond(qp& q, uint8_t syndrome, uint32_t psn, const sc_core::sc_time& ready);
    void send_ack(qp& q, uint8_t syndrome, uint32_t psn, const sc_core::sc_time& ready);
    void nak(qp& q, uint8_t code, uint32_t psn, const sc_core::sc_time& ready);
    void rnr_nak(qp& q, uint32_t psn, const sc_core::sc_time& ready);
    /// Responder-detected error: NAK, affiliated event, Error.
    void responder_error(qp& q, uint8_t nak_code, uint32_t psn, sc_core::sc_time& delay);
    /// A message that took a receive WQE fails: NAK `nak_code` now, the WQE completes with
    /// `status`, the QP enters Error.
    void receive_wqe_error(qp& q, uint8_t nak_code, uint8_t opcode, uint8_t status, uint32_t byte_len,
                           uint8_t syndrome, uint32_t psn, sc_core::sc_time& delay);
    bool take_recv_wqe(qp& q, sc_core::sc_time& delay);
    /// The receive WQE at `index` (prefetched copy or a fetch now).
    void recv_at(qp& q, uint16_t index, recv_wqe& out, sc_core::sc_time& delay);
    /// Reads receive WQEs ahead (up to rq_prefetch) so Sends do not wait for the fetch.
    void prefetch_recv(qp& q, const sc_core::sc_time& delay);
    /// Places payload bytes at the current receive WQE position (scatter).
    bool scatter(qp& q, const uint8_t* data, uint32_t len, sc_core::sc_time& delay, uint8_t& status,
                 uint8_t& syndrome);
    /// Writes `len` bytes at byte `offset` of a scatter list (receive WQE, READ or atomic result)
    /// through translation (L_Key, local write) and DMA; status LOC_LEN_ERR / LOC_PROT_ERR.
    bool write_sges(const xlate_owner& who, const sge* sg, unsigned num_sge, uint64_t offset,
                    const uint8_t* data, uint32_t len, sc_core::sc_time& delay, uint8_t& status,
                    uint8_t& syndrome);
    /// Where a datagram came from (UD receive completions); RC and UC take the QP's peer.
    struct recv_src {
        uint32_t src_qp;
        uint16_t slid;
        uint8_t sl, path_bits;
        uint16_t pkey_index;  ///< QP1: the P_Key table entry the packet matched (C10-132)
    };
    void recv_completion(qp& q, uint8_t opcode, uint8_t status, uint32_t byte_len, uint32_t imm,
                         uint8_t flags, bool solicited, sc_core::sc_time& delay, uint8_t syndrome = 0,
                         const recv_src* src = nullptr);
    void handle_duplicate(qp& q, const rx_packet& p, const sc_core::sc_time& delay);
    /// The job that answers a duplicate READ or atomic at `psn` (`end`: one past its last
    /// response PSN): the queued job of the same request (`fresh` false: it restarts from
    /// `psn`), else a new one placed in PSN order (`fresh` true). nullptr: the queue is full.
    resp_job* duplicate_job(qp& q, uint32_t psn, uint32_t end, bool& fresh);
    bool handle_read_request(qp& q, const rx_packet& p, sc_core::sc_time& delay);
    bool handle_atomic(qp& q, const rx_packet& p, sc_core::sc_time& delay);
    resp_job* push_resp(qp& q);
    void make_resp_ready(uint32_t qpn);
    /// SC_METHOD: sends the next packet of ready QPs' queued responses round robin, one per
    /// rx_cycles; it waits with next_trigger().
    void response_method();
    /// Sends the next packet of the QP's first queued response.
    void send_response(qp& q);

    // responses and reliability (transport_reliability.cpp)
    void handle_response(qp& q, const rx_packet& p);
    /// Completes window entries up to `psn` (ACK: inclusive; else exclusive). Returns false if
    /// an unfinished READ/atomic stands in the way (its responses were lost: go back N).
    bool retire_acked(qp& q, uint32_t psn, bool inclusive, sc_core::sc_time& delay);
    void pop_window(qp& q, uint8_t status, sc_core::sc_time& delay, uint8_t syndrome = 0);
    void send_completion(qp& q, const inflight& f, uint8_t status, sc_core::sc_time& delay,
                         uint8_t syndrome = 0);
    /// Progress: retry budgets renewed, the local ACK timer restarted or stopped.
    void progress(qp& q);
    void arm_ack_timer(qp& q);
    bool outstanding(const qp& q) const {
        return !q.req.window.empty() || q.req.cur_offset || q.req.resend_pending;
    }
    /// The QP has a deadline at `at` (RNR wait, fetch, ACK timer, coalesced ACK).
    void watch(qp& q, const sc_core::sc_time& at);
    /// SC_METHOD: services the QPs whose earliest deadline has come.
    void timer_method();
    /// Handles the QP's deadlines that have come; watches the next one.
    void service_timers(qp& q, const sc_core::sc_time& now);
    /// Keeps the QP out of the requester's round robin until `until` (RNR wait, WQE fetch).
    void park(qp& q, const sc_core::sc_time& until);
    /// SQD: raises SQ_DRAINED once nothing is in flight.
    void check_drained(qp& q, sc_core::sc_time& delay);
    void handle_read_response(qp& q, const rx_packet& p, sc_core::sc_time& delay);
    void handle_atomic_ack(qp& q, const rx_packet& p, sc_core::sc_time& delay);
    /// The oldest READ/atomic's responses are missing: go back N to its next expected PSN.
    void implied_nak(qp& q, sc_core::sc_time& delay);
    /// Go back N to `psn` unless the last go-back-N already went there (gap_retry latch);
    /// `consume`: a NAK, which uses up a retry (retry()); else an implied NAK, which does not.
    void go_back_once(qp& q, uint32_t psn, sc_core::sc_time& delay, bool consume);
    /// Retransmission after a sequence-error NAK, an implied NAK or a timeout: retries_left
    /// permitting, go back N from `psn`; else RETRY_EXC_ERR.
    void retry(qp& q, uint32_t psn, sc_core::sc_time& delay);
    /// Go back N: resend from `psn` (inside the oldest unacknowledged WQE), after `wait`.
    void rewind(qp& q, uint32_t psn, const sc_core::sc_time& wait);
    /// A completion error on an outstanding WQE (the window head): CQE, then Error.
    void fail_head(qp& q, uint8_t status, sc_core::sc_time& delay, uint8_t syndrome = 0);
    /// IBA RNR NAK timer code to time (code 0 is the longest, 655.36 ms).
    static sc_core::sc_time rnr_time(uint8_t code);
    /// Local ACK timeout for a timeout code (0: none).
    static sc_core::sc_time ack_timeout(uint8_t code);

    // UC, UD and multicast (transport_datagram.cpp)
    /// UC: the message being received is given up (its receive WQE is kept for the next one).
    void abandon_uc(qp& q);
    /// UC responder: a message without ACKs; anything wrong drops it silently.
    void handle_uc(qp& q, const rx_packet& p);
    /// UD responder: Q_Key check, GRH area, scatter, completion with the datagram's source.
    void handle_ud(qp& q, const rx_packet& p);
    /// A multicast datagram: delivered to every attached UD QP whose P_Key matches (o10-34, o10-35).
    void receive_mcast(const rx_packet& p);
    /// LRH/BTH/DETH (and GRH) of a UD SEND from its WQE's datagram segment.
    void build_ud_headers(const qp& q, const send_wqe& w, wire::headers& h, uint8_t opcode) const;
    /// UC/UD send error: SQEr, the send queue flushed, the receive queue untouched (C10-38..40).
    void enter_sqe(qp& q, sc_core::sc_time& delay);

    // congestion control (transport_cc.cpp)
    /// Congestion control, when enabled: the flows' CCT indexes and the counters.
    struct cc_unit {
        explicit cc_unit(const cc_config& c);
        ca_congestion_control ca;
        counter fecn_received, becn_sent, cnp_sent, cnp_received, becn_received, ccti_max;
        std::array<sc_core::sc_time, 16> sl_free{};  // SL-based flows: when the SL's next packet may start
        double ps_per_byte = 80.0;                   // the port's rate
        void note_ccti(uint16_t ccti) {
            if (ccti > ccti_max.value()) ccti_max += ccti - ccti_max.value();
        }
    };
    std::unique_ptr<cc_unit> cc_;  // nullptr: congestion control off
    /// A packet for QP `q` arrives: FECN answered, BECN acted on. True if it was a CNP (nothing
    /// more to do with it).
    bool cc_receive(qp& q, const rx_packet& p);
    /// UC/UD: a CNP back to the sender of `p` (QP `dest_qp` at its SLID).
    void cc_send_cnp(const rx_packet& p, uint32_t dest_qp);
    /// Responder: whether the response being built carries BECN (and it is owed no longer).
    bool cc_take_becn(qp& q);
    /// Requester: SL-based flows: parks `q` if its SL's next packet may not start yet.
    bool cc_hold(qp& q);
    /// Requester: a packet of `len_before_icrc` bytes of `q` was handed to the port `lead`
    /// before it could start (pipeline, payload read), its last bit `sent` from now: the QP
    /// is parked so that its next packet, through the same pipeline, starts no sooner than the
    /// CCT entry's injection delay after this one's last bit.
    void cc_space(qp& q, const sc_core::sc_time& sent, const sc_core::sc_time& lead,
                  uint32_t len_before_icrc);

    // reliable datagram (transport_rd.cpp)
    /// The record of EE context `eecn` (invalid if out of range).
    qp& eec_rec(uint32_t eecn) { return eecn < max_eecs_ ? qps_[eec_base_ + eecn] : qps_.invalid(); }
    /// An RD packet: a request goes to the EE context its RDETH names, a response to the RD QP
    /// that owns that EE context.
    void receive_rd(const rx_packet& p);
    /// RD requester, at the head WQE's start: owns the EE context it names (waiting while another
    /// QP's message is on it) and takes its path and PSN; after a failed message it first sends
    /// the EE context's RESYNC and waits for its ACK. False: the QP waits; `done`: the WQE
    /// completed in error instead (state, domain) or the RESYNC went out.
    bool rd_claim(qp& q, const send_wqe& w, sc_core::sc_time& delay, bool& done);
    /// The RD QP's message is over: the EE context takes back the PSN and passes to the next
    /// waiting QP. `failed`: the message ended in error after sending packets, so the EE context
    /// owes a RESYNC before its next message.
    void rd_release(qp& q, bool failed);
    /// RD requester: sends the RESYNC of the EE context `q` owns (its ACK timer runs).
    void rd_send_resync(qp& q, qp& e, sc_core::sc_time& delay);
    /// RD requester: the RESYNC's ACK timer expired: send it again or, out of retries, fail the
    /// WQE that waits behind it (RETRY_EXC_ERR).
    void rd_resync_timeout(qp& q, sc_core::sc_time& delay);
    /// RD responder: a RESYNC sets the EE context's expected PSN past it, drops the message in
    /// progress (a receive WQE it took completes REM_ABORT_ERR) and is acknowledged.
    void rd_resync_in(qp& e, const rx_packet& p);
    /// An RD QP takes the path of the EE context it owns (none: a 256-byte MTU, nothing to send).
    void rd_path(qp& q);
    /// RD responder, at a message's first packet: checks the RD QP it names (state, domain,
    /// Q_Key) and points the EE context at its receive queue, PD and CQ. False, after a NAK, if
    /// the request is refused.
    bool rd_target(qp& e, const rx_packet& p, sc_core::sc_time& delay);
    /// The receive queue a message on `q` uses: its own, or for an EE context its RD QP's.
    qp& rq_of(qp& q) { return q.rq_owner != NIL ? qps_[q.rq_owner] : q; }
    /// A send error stops an RC QP (Error) or an RD, UC or UD QP's send queue (SQEr, o10-61).
    void send_queue_failed(qp& q, sc_core::sc_time& delay);
    // automatic path migration (transport_apm.cpp)
    /// A packet for an RC or UC QP in Rearm or Armed: MigReq 0 from the peer arms a QP in
    /// Rearm (o10-32); MigReq 1 on an Armed QP in RTS or SQD is a migration request, carried
    /// out if the packet came over the alternate path (o10-28), else PATH_MIG_ERR (o10-29).
    void apm_receive(qp& q, const rx_packet& p);
    /// Armed -> Migrated (o10-27, o10-30): the alternate path becomes the primary one (swapped,
    /// the QPC table entry too), PATH_MIGRATED is raised; the next packet carries MigReq 1.
    void migrate(qp& q, sc_core::sc_time& delay);
    /// The QP's path migration state, in the engine and in its QPC table entry (QUERY_QP).
    void set_mig_state(qp& q, uint8_t s, sc_core::sc_time& delay);

    // QP errors (transport_engine.cpp)
    void enter_error(qp& q, sc_core::sc_time& delay);
    void post_event(qp& q, uint8_t type, sc_core::sc_time& delay);
    void flush(qp& q, sc_core::sc_time& delay);

    wqe_source* fetcher_ = nullptr;
    address_translation* xlate_ = nullptr;
    completion_sink* cqw_ = nullptr;
    packet_tx* port_ = nullptr;
    partition_keys* pkeys_ = nullptr;
    mcast_lookup* mcast_ = nullptr;
    path_probe* probe_ = nullptr;
    uint16_t lid_ = 0;
    uint8_t lmc_ = 0;
    uint8_t gid_[16] = {};

    /// QP records by QPN, allocated when a QP is first created (and kept, reset, after a
    /// destroy: the ready FIFOs may still name it); a QPN never used costs a pointer.
    class qp_table {
    public:
        explicit qp_table(size_t n) : slots_(n) {}
        size_t size() const { return slots_.size(); }
        /// The QP's record; a QPN never created reads as an invalid QP.
        qp& operator[](size_t i) { return slots_[i] ? *slots_[i] : none_; }
        const qp& operator[](size_t i) const { return slots_[i] ? *slots_[i] : none_; }
        qp& create(size_t i) {
            if (!slots_[i]) {
                slots_[i] = std::make_unique<qp>();
                ++created_;
            }
            return *slots_[i];
        }
        bool allocated(size_t i) const { return slots_[i] != nullptr; }
        /// The record that is never valid (callers test `valid` before using a record).
        qp& invalid() { return none_; }
        /// Whether prefetching records pays: with thousands of QPs every record is cold when
        /// its turn comes; with a few they stay in the host CPU's cache and a prefetch is
        /// wasted instructions. (1024 records and their rings outgrow a core's 1-2 MiB cache.)
        bool many() const { return created_ >= 1024; }
        /// Starts loading the QP's record into the host CPU's cache (a hint, no effect on the
        /// model).
        void prefetch(size_t i) const {
            if (const qp* r = slots_[i].get())
                for (size_t o = 0; o < sizeof(qp); o += 64)
                    __builtin_prefetch(reinterpret_cast<const char*>(r) + o);
        }

    private:
        std::vector<std::unique_ptr<qp>> slots_;
        size_t created_ = 0;
        qp none_;  // never valid
    };
    qp_table qps_;
    unsigned max_eecs_ = 0;
    uint32_t eec_base_ = 0;  // EE context n is record eec_base_ + n (after the QPs)

    // ---------------------------------------------------------------- speed hints
    // The seam for the simulator's own speed: these hints decide nothing in the model (no
    // timing, no state, no output); without them only the run takes longer. With thousands of
    // QPs every record is cold when its turn comes, so the engine starts loading a QP's record
    // and QPC cache set into the host CPU's cache ahead of use (expect(), qp_table::prefetch);
    // with a few QPs the records stay in cache and the hints are off (qp_table::many).
    /// load_qp: once there are many QPs, the units in front send expect() hints.
    void hint_qp_created() {
        if (qps_.many()) want_hints(true);  // records no longer stay in the host CPU's cache
    }
    /// The requester's round robin, after taking its next QP: the QP after that one is loaded
    /// by its turn.
    void hint_next_turns() {
        if (ready_.size() > 1) expect(ready_[1]);
    }
    wqe_buffer wqe_buffer_;          // the shared WQE buffer
    ring<uint32_t> buffer_waiters_;  // QPNs refused for want of entries, FIFO
    onchip_cache<no_line> qpc_cache_;
    uint64_t qpc_base_ = 0;
    std::vector<sc_core::sc_time> miss_free_;  // when each miss slot is free again
    // QPNs with a packet to send, a response to send; QPs queued at one instant by turn_order.
    same_time_fifo<uint32_t> ready_, resp_ready_;
    uint64_t tx_turns_ = 0, resp_turns_ = 0;  // packets, responses sent (numbering tx_turn, resp_turn)
    /// The order of QPs queued at one instant (SystemC runs one instant's processes in an order
    /// the model does not fix, docs/fabric.md "Same-time events"): the QP that sent (`turn`)
    /// longest ago first, as a round robin would, then the lower QPN.
    struct turn_order {
        const qp_table& qps;
        uint64_t qp::*turn;
        bool operator()(uint32_t a, uint32_t b) const {
            const uint64_t x = qps[a].*turn, y = qps[b].*turn;
            return x != y ? x < y : a < b;
        }
    };
    uint32_t resume_qpn_ = NIL;         // the QP the requester waited for (port backpressure or its WQE)
    uint32_t resume_resp_qpn_ = NIL;    // the QP the response method waited for (port backpressure)
    lane_waits tx_lanes_, resp_lanes_;  // QPs whose port lane is blocked (requester, responses)
    sc_core::sc_event lane_kick_;       // the first QP waits for a lane
    // End of the initiation interval after the last packet when the requester went to wait
    // for work instead of for the interval; zero when over.
    sc_core::sc_time tx_free_at_;
    bool requester_running_ = false;  // inside requester_method
    sc_core::sc_event tx_work_, resp_work_;
    // The timer method's wake-ups. SystemC keeps a notification that an earlier one replaced
    // in its event queue until its time comes, so one event re-notified earlier on every
    // context miss (a deadline microseconds ahead while the pending notification was a local
    // ACK timeout tens of milliseconds ahead) grew the kernel's queue by one dead entry per
    // miss. Several events instead: a wake-up is added on an idle one, and only when all are
    // pending is the soonest of them moved (its dead entry is popped soon).
    static constexpr unsigned TIMER_EVENTS = 4;
    sc_core::sc_event timer_now_ev_;  // deadlines already due: the next delta
    sc_core::sc_event timer_ev_[TIMER_EVENTS];
    sc_core::sc_time timer_ev_at_[TIMER_EVENTS];  // when each pending one fires
    bool timer_ev_pending_[TIMER_EVENTS] = {};
    /// The timer method runs at `at` (or earlier).
    void wake_timer(const sc_core::sc_time& at, const sc_core::sc_time& now);
    /// Atomics in flight at host memory: one on the same 8-byte word starts only after the
    /// previous one's read-modify-write completed (real HCAs serialise them the same way).
    struct atomic_busy {
        uint64_t pa = ~uint64_t(0);
        sc_core::sc_time until;
    };
    atomic_busy atomic_busy_[MAX_RD_ATOMIC];
    size_t atomic_next_ = 0;
    deadline_heap deadlines_;  // every QP's earliest deadline
    sc_core::sc_time packet_time_, rx_time_, tx_latency_, rx_latency_, coalesce_time_;
    // Processing units (docs/architecture.md, "Processing units"): a QP is bound to send unit
    // and receive unit qpn mod their number; each unit is the time it is free again.
    sc_core::sc_time wqe_time_, read_time_, atomic_time_;
    std::vector<sc_core::sc_time> send_free_;  // when each send unit may start its next WQE
    std::vector<sc_core::sc_time> recv_free_;  // when each receive unit is free; empty: per QP (resp_free)
    /// The head WQE of `q` has not started and its send unit is busy until after `at`.
    bool send_unit_busy(const qp& q, const sc_core::sc_time& at) const {
        return wqe_time_ != sc_core::SC_ZERO_TIME && q.req.cur_offset == 0 &&
               send_free_[q.qpn % send_free_.size()] > at;
    }
    uint64_t packet_ps_ = 0, rx_ps_ = 0;                // the same in ps, for the busy counters
    const sc_core::sc_time one_ps_{1, sc_core::SC_PS};  // per-packet stall counters divide by it
    // From packet_pool: the port may hand a buffer to the receiver and return another.
    packet* tx_pkt_ = nullptr;
    packet* ack_pkt_ = nullptr;
    packet* resp_pkt_ = nullptr;
};

}  // namespace hcasim
