// Transport engine: the RC requester (segmentation of SEND / SEND with immediate / RDMA WRITE
// / RDMA WRITE with immediate into path-MTU packets with FIRST/MIDDLE/LAST/ONLY opcodes, PSNs,
// gather through the translation unit and DMA reads, ACK processing and send completions)
// and the RC responder (PSN checking, opcode-sequence checking, receive WQE consumption,
// scatter/RDMA placement through translation and DMA writes, receive completions, ACK/NAK
// generation). One requester process serves all QPs round robin at packet granularity; the
// receive side runs in the port's receive method. No process per QP.
#pragma once
#include <systemc>

#include <memory>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/fabric/packet.h"
#include "model/hca/dma_port.h"
#include "model/hca/rx_packet.h"
#include "model/hca/work_request.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

namespace hcasim {

class wqe_fetcher;
class translation_unit;
class cq_writer;
class port;
class pkey_checker;

class transport_engine : public sc_core::sc_module, public rx_sink {
public:
    dma_port dma;

    param<unsigned> wqe_queue_depth;   ///< parsed WQEs queued per QP (fetch-ahead)
    param<unsigned> packet_cycles;     ///< requester initiation interval per packet
    param<unsigned> rx_cycles;         ///< responder initiation interval per packet
    param<unsigned> tx_latency_cycles; ///< requester pipeline latency: WQE on chip to packet at the port
    param<unsigned> rx_latency_cycles; ///< responder pipeline latency: packet in to its first DMA
    param<unsigned> ack_req_interval;  ///< request an ACK at least every N packets
    param<unsigned> rq_prefetch;       ///< receive WQEs read ahead per QP (on-chip)

    counter tx_packets, tx_payload_bytes, rx_packets, rx_payload_bytes, acks_sent, naks_sent,
        acks_received, naks_received, rnr_naks_sent, duplicates, seq_errors, dropped_bad_qp, retransmits,
        send_completions, recv_completions, error_completions, flushed;

    SC_HAS_PROCESS(transport_engine);
    transport_engine(const sc_core::sc_module_name& name, const sc_core::sc_time& clock, unsigned max_qps);

    void bind(wqe_fetcher& f, translation_unit& t, cq_writer& c, port& p, pkey_checker& k) {
        fetcher_ = &f; xlate_ = &t; cqw_ = &c; port_ = &p; pkeys_ = &k;
    }
    /// The port's LID (source LID of every packet sent).
    void set_lid(uint16_t lid) { lid_ = lid; }

    // From the WQE fetcher.
    unsigned room(uint32_t qpn) const;
    bool has_room(uint32_t qpn) const { return room(qpn) > 0; }
    void push_send(uint32_t qpn, const send_wqe& w);
    void rq_posted(uint32_t qpn, uint16_t producer);

    // From the command unit. `delay` accumulates the work done (flush completions).
    void load_qp(const hw::qp_context& c, uint32_t attr_mask, sc_core::sc_time& delay);
    void destroy_qp(uint32_t qpn);
    /// The QP's state as the hardware has it now: it moves a QP to Error on its own after a
    /// completion error (for QUERY_QP and MODIFY_QP's current-state check).
    uint8_t state(uint32_t qpn) const;
    /// PSNs as the hardware has them now (for QUERY_QP).
    void current_psns(uint32_t qpn, uint32_t& sq_psn, uint32_t& rq_psn) const;

    // From the P_Key checker.
    void receive(const rx_packet& p) override;

private:
    struct inflight {
        uint64_t wr_id;
        uint32_t first_psn;
        uint32_t last_psn;
        uint32_t length;
        uint16_t wqe_index;
        uint8_t opcode, flags;
    };
    struct qp {
        bool valid = false, tx_ready = false;
        uint8_t state = hw::QPS_RESET, transport = hw::QPT_RC, mtu = hw::MTU_4096, sl = 0;
        bool sig_all = false;
        uint32_t qpn = 0, pd = 0, send_cqn = 0, recv_cqn = 0, dest_qpn = 0, access = 0;
        uint16_t dlid = 0, pkey = 0xFFFF, pkey_index = 0;
        // requester
        uint32_t sq_psn = 0;
        std::vector<send_wqe> queue;        // parsed WQEs from the fetcher
        size_t q_head = 0, q_count = 0;
        uint64_t cur_offset = 0;            // bytes of the head WQE already sent
        uint32_t cur_first_psn = 0;         // PSN of the head WQE's first packet
        unsigned cur_sge = 0;
        uint64_t cur_sge_off = 0;
        uint32_t since_ack_req = 0;
        uint8_t retry_cnt = 7, rnr_retry = 7, min_rnr_timer = 0;
        uint8_t retries_left = 7, rnr_retries_left = 7;  // reset by forward progress
        bool resume = false;                // skip to resume_psn when the head WQE starts again
        uint32_t resume_psn = 0;
        sc_core::sc_time paused_until;      // RNR wait or WQE in flight: no packet before this
        std::vector<inflight> window;       // sent, awaiting ACK
        size_t w_head = 0, w_count = 0;
        // responder
        uint32_t rq_psn = 0, msn = 0;
        uint16_t rq_producer = 0, rq_consumer = 0;
        bool in_send = false, in_write = false, nak_pending = false;
        bool have_rwqe = false;
        recv_wqe rwqe;                      // the receive WQE in use
        std::vector<recv_wqe> rq_cache;     // prefetched receive WQEs, by index mod size
        std::vector<sc_core::sc_time> rq_ready;  // when each prefetched WQE's read completes
        uint16_t rq_fetched = 0;            // next receive WQE to prefetch
        uint64_t recv_offset = 0;           // bytes of the current SEND placed
        uint64_t write_va = 0, write_len = 0, write_done = 0;
        uint32_t write_rkey = 0;
        uint16_t slid = 0;                  // peer LID (from its packets)
        sc_core::sc_time resp_free;
    };

    void requester_loop();
    static bool may_send(const qp& q);
    void make_tx_ready(uint32_t qpn);
    /// Sends the next packet of the QP's head WQE; returns false if the QP left the ready set.
    void send_packet(qp& q);
    /// Completes the head WQE in error (status) and moves the QP to Error.
    void requester_error(qp& q, uint8_t status, const send_wqe& w, sc_core::sc_time& delay);
    void retire_head(qp& q);
    void send_completion(qp& q, const inflight& f, uint8_t status, sc_core::sc_time& delay);
    void flush(qp& q, sc_core::sc_time& delay);

    void handle_ack(qp& q, const rx_packet& p);
    /// Go back N: resend from `psn` (inside the oldest unacknowledged WQE), after `wait`.
    void rewind(qp& q, uint32_t psn, const sc_core::sc_time& wait);
    void retry_timer();
    /// Keeps the QP out of the requester's round robin until `until` (RNR wait, WQE fetch).
    void park(qp& q, const sc_core::sc_time& until);
    void handle_request(qp& q, const rx_packet& p);
    /// Places payload bytes at the current receive WQE position (scatter).
    bool scatter(qp& q, const uint8_t* data, uint32_t len, sc_core::sc_time& delay, uint8_t& status);
    bool take_recv_wqe(qp& q, sc_core::sc_time& delay);
    /// Reads receive WQEs ahead (up to rq_prefetch) so Sends do not wait for the fetch.
    void prefetch_recv(qp& q, const sc_core::sc_time& delay);
    /// The receive WQE at `index` (prefetched copy or a fetch now).
    void recv_at(qp& q, uint16_t index, recv_wqe& out, sc_core::sc_time& delay);
    void recv_completion(qp& q, uint8_t opcode, uint8_t status, uint32_t byte_len, uint32_t imm,
                         uint8_t flags, bool solicited, sc_core::sc_time& delay);
    void send_ack(qp& q, uint8_t syndrome, uint32_t psn, const sc_core::sc_time& ready);
    void nak(qp& q, uint8_t code, uint32_t psn, const sc_core::sc_time& ready);
    void rnr_nak(qp& q, uint32_t psn, const sc_core::sc_time& ready);
    void build_bth_lrh(const qp& q, wire::headers& h, uint8_t opcode, uint32_t psn) const;
    void enter_error(qp& q, sc_core::sc_time& delay);
    /// IBA RNR NAK timer code to time (code 0 is the longest, 655.36 ms).
    static sc_core::sc_time rnr_time(uint8_t code);

    wqe_fetcher* fetcher_ = nullptr;
    translation_unit* xlate_ = nullptr;
    cq_writer* cqw_ = nullptr;
    port* port_ = nullptr;
    pkey_checker* pkeys_ = nullptr;
    uint16_t lid_ = 0;

    std::vector<qp> qps_;
    std::vector<uint32_t> ready_;
    size_t ready_head_ = 0, ready_count_ = 0;
    sc_core::sc_event tx_work_, retry_ev_;
    std::vector<uint32_t> paused_;  // parked QPs (RNR timer, WQE fetch in flight)
    sc_core::sc_time packet_time_, rx_time_, tx_latency_, rx_latency_;
    packet tx_pkt_, ack_pkt_;
};

}  // namespace hcasim
