// WQE fetcher: keeps, per QP, the send ring location and the producer counter software rang;
// arbitrates round robin among QPs with unfetched work (a FIFO of ready QPNs, no process per
// QP), reads batches of WQEs from host memory by DMA through the PCIe link, parses them and
// hands them to the transport engine. Also parses WQEs written through the inline window, and
// reads receive WQEs for the responder: from a QP's receive ring, or from a shared receive
// queue (SRQ), whose state (ring, producer/consumer counters, limit, error state) it holds on
// chip, with a few WQEs read ahead per SRQ.
#pragma once
#include <systemc>

#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/unit_clock.h"
#include "model/core/stats.h"
#include "model/hca/dma_port.h"
#include "model/hca/work_request.h"
#include "tlm_if/commands.h"
#include "tlm_if/contexts.h"

namespace hcasim {

class send_queue_sink;

/// Largest SRQ slot (log2 bytes): a receive WQE with MAX_SGE segments fits in 512 bytes.
constexpr unsigned MAX_SRQ_LOG_STRIDE = 9;

/// What the transport engine needs of the WQE fetcher: credits and rewinds of the send queue,
/// receive WQEs (a QP's ring or an SRQ), the QP's state when the engine moves it to Error.
struct xrc_srq {
    uint32_t xrcd = 0, pd = 0, cqn = 0;
};
class wqe_source {
public:
    virtual ~wqe_source() = default;
    virtual void credit(uint32_t qpn) = 0;
    virtual void rewind(uint32_t qpn, uint16_t index) = 0;
    virtual bool fetch_recv(uint32_t qpn, uint32_t index, recv_wqe& out, sc_core::sc_time& delay) = 0;
    virtual void set_state(uint32_t qpn, uint8_t state) = 0;
    /// What taking an SRQ WQE did besides the WQE: the events the caller raises.
    enum class srq_take : uint8_t { ok, empty, error };
    struct srq_outcome {
        srq_take result = srq_take::empty;
        bool limit_reached = false;  ///< the count fell below the armed limit: SRQ_LIMIT event (disarmed now)
        bool entered_error = false;  ///< the ring could not be read: SRQ_ERROR event, SRQ in error
    };
    virtual srq_outcome take_srq(uint32_t srqn, recv_wqe& out, sc_core::sc_time& delay) = 0;
    virtual uint32_t srq_pd(uint32_t srqn) const = 0;
    /// An XRC SRQ's domain, PD and CQ; xrcd 0: no such SRQ, or not an XRC SRQ.
    virtual xrc_srq xrc_srq_of(uint32_t srqn) const = 0;
    virtual uint64_t qp_state_bytes() const = 0;
};

/// What the command unit needs of it: ring locations and QP states, and the SRQs it holds.
class fetch_control {
public:
    virtual ~fetch_control() = default;
    virtual void set_qpc_table(uint64_t base) = 0;
    virtual void load_qp(const hw::qp_context& c) = 0;
    virtual void set_state(uint32_t qpn, uint8_t state) = 0;
    virtual void create_srq(const hw::srq_context& c) = 0;
    virtual void destroy_srq(uint32_t srqn) = 0;
    virtual bool srq_valid(uint32_t srqn) const = 0;
    virtual hw::srq_context srq_ctx(uint32_t srqn) const = 0;
    virtual void srq_attach(uint32_t srqn, int delta) = 0;
    virtual uint8_t modify_srq(uint32_t srqn, uint32_t mask, const hw::modify_srq_in& in,
                               sc_core::sc_time& delay) = 0;
};

/// What the doorbell unit hands on: send, receive and SRQ doorbells, inline WQEs, and the hint
/// that one is on its way.
class wqe_doorbell_sink {
public:
    virtual ~wqe_doorbell_sink() = default;
    virtual void sq_doorbell(uint32_t qpn, uint16_t producer) = 0;
    virtual void rq_doorbell(uint32_t qpn, uint16_t producer) = 0;
    virtual void srq_doorbell(uint32_t srqn, uint16_t producer) = 0;
    virtual void inline_wqe(const uint8_t* wqe, uint32_t len) = 0;
    virtual void expect(uint32_t qpn) = 0;
};

class wqe_fetcher final : public sc_core::sc_module,
                          public wqe_source,
                          public fetch_control,
                          public wqe_doorbell_sink {
public:
    dma_port dma;

    param<double> clock_mhz;       ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> batch_wqes;    ///< WQEs read per DMA at most
    param<unsigned> parse_cycles;  ///< cycles to parse one WQE
    param<unsigned> srq_prefetch;  ///< receive WQEs read ahead per SRQ (on-chip)

    module_log log_;  ///< debug: every send WQE fetched (malformed, unreadable)
    counter doorbells, inline_wqes, fetches, wqes_fetched, bytes_fetched, recv_fetches, malformed, qpc_reads,
        srq_doorbells, srq_taken, srq_empty, srq_limit_events, srq_errors, busy_ps;

    SC_HAS_PROCESS(wqe_fetcher);
    wqe_fetcher(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock, unsigned max_qps,
                unsigned max_srqs);

    void bind_engine(send_queue_sink& te) { engine_ = &te; }

    // From the doorbell unit (at the doorbell's arrival time).
    void sq_doorbell(uint32_t qpn, uint16_t producer) override;
    void rq_doorbell(uint32_t qpn, uint16_t producer) override;
    void inline_wqe(const uint8_t* wqe, uint32_t len) override;
    /// A doorbell or inline WQE for the QP has reached the doorbell unit's FIFO and comes here
    /// later: a hint to start loading its state (and the transport engine's) into the host
    /// CPU's cache. No effect on the model.
    void expect(uint32_t qpn) override;

    // From the command unit.
    /// Where the QP context table is (INIT_HCA): ring locations are read from it by DMA.
    void set_qpc_table(uint64_t base) override { qpc_base_ = base; }
    /// A QP was created or modified: its state changes now; its ring locations are read from
    /// the QPC in host memory when next needed.
    void load_qp(const hw::qp_context& c) override;
    void set_state(uint32_t qpn, uint8_t state) override;

    /// From the transport engine: room again in its queue for this QP.
    void credit(uint32_t qpn) override;
    /// From the transport engine: fetch again from WQE `index` (retransmission re-reads the
    /// send ring, as WQEs are not kept on chip once sent).
    void rewind(uint32_t qpn, uint16_t index) override;
    /// For the responder: reads and parses receive WQE `index` of the QP's receive ring.
    bool fetch_recv(uint32_t qpn, uint32_t index, recv_wqe& out, sc_core::sc_time& delay) override;

    // Shared receive queues (IBA 10.2.9).
    /// From the command unit: CMD_CREATE_SRQ (the context as written to the SRQC table).
    void create_srq(const hw::srq_context& c) override;
    void destroy_srq(uint32_t srqn) override;
    bool srq_valid(uint32_t srqn) const override { return srqn < srqs_.size() && srqs_[srqn].valid; }
    /// The SRQ's context as the HCA holds it now (counters, limit, state).
    hw::srq_context srq_ctx(uint32_t srqn) const override;
    /// QPs attached (CMD_CREATE_QP / CMD_DESTROY_QP with an SRQ).
    void srq_attach(uint32_t srqn, int delta) override;
    /// CMD_MODIFY_SRQ: arm the limit and/or resize (the outstanding WQEs are copied to the new
    /// ring). Returns a cmd_status.
    uint8_t modify_srq(uint32_t srqn, uint32_t mask, const hw::modify_srq_in& in,
                       sc_core::sc_time& delay) override;
    /// From the doorbell unit.
    void srq_doorbell(uint32_t srqn, uint16_t producer) override;
    /// For the responder: the SRQ's next WQE, in ring order (o10-53.2.1).
    srq_outcome take_srq(uint32_t srqn, recv_wqe& out, sc_core::sc_time& delay) override;
    /// The SRQ's protection domain (receive SGEs of its QPs are checked against it, o10-37.2.12).
    uint32_t srq_pd(uint32_t srqn) const override { return srq_valid(srqn) ? srqs_[srqn].pd : 0; }
    xrc_srq xrc_srq_of(uint32_t srqn) const override {
        return srq_valid(srqn) ? xrc_srq{srqs_[srqn].xrcd, srqs_[srqn].pd, srqs_[srqn].cqn} : xrc_srq{};
    }

    /// Bytes of per-QP state (the fetch records of every QP number).
    uint64_t qp_state_bytes() const override { return qps_.size() * (sizeof(qp_fetch) + sizeof(ready_[0])); }

    /// Parses a send WQE image (for the ring path and the inline window).
    static void parse_send(const uint8_t* p, uint32_t len, uint32_t qpn, uint8_t transport, send_wqe& w);

private:
    void fetch_loop();
    void make_ready(uint32_t qpn);

    struct qp_fetch {
        bool valid = false, ready = false;
        bool ctx_valid = false;  // ring locations below are loaded from the QPC
        uint8_t state = hw::QPS_RESET, transport = hw::QPT_RC;
        uint64_t sq_base = 0, rq_base = 0;
        uint8_t sq_log_size = 0, sq_log_stride = 6, rq_log_size = 0, rq_log_stride = 4;
        uint16_t producer = 0;  // rung by software
        uint16_t fetched = 0;   // next WQE to read
    };
    bool may_fetch(const qp_fetch& q) const;
    /// Reads the QP's context from the QPC table (ring bases, sizes, strides).
    void load_ctx(uint32_t qpn, qp_fetch& q, sc_core::sc_time& delay);
    /// Reads and parses one receive WQE at `pa` (slot of `stride` bytes); false if the DMA failed.
    bool read_recv(uint64_t pa, uint32_t stride, recv_wqe& out, sc_core::sc_time& delay);

    struct srq_fetch {
        bool valid = false, error = false;
        uint8_t log_size = 0, log_stride = 4;
        uint32_t srqn = 0, pd = 0, limit = 0, max_wr = 0, attached = 0, uar = 0;
        uint32_t xrcd = 0, cqn = 0;  // XRC SRQ: its domain and CQ (xrcd 0: an ordinary SRQ)
        uint64_t base = 0;
        uint16_t producer = 0, consumer = 0;
        uint16_t fetched = 0;                 // next WQE to read ahead
        std::vector<recv_wqe> cache;          // read-ahead WQEs, by index mod size
        std::vector<sc_core::sc_time> ready;  // when each read-ahead WQE's read completes
    };
    void prefetch_srq(srq_fetch& s, const sc_core::sc_time& delay);

    send_queue_sink* engine_ = nullptr;
    uint64_t qpc_base_ = 0;
    std::vector<qp_fetch> qps_;
    std::vector<srq_fetch> srqs_;
    std::vector<uint32_t> ready_;  // FIFO ring of QPNs
    size_t ready_head_ = 0, ready_count_ = 0;
    sc_core::sc_event work_;
    sc_core::sc_time parse_time_;
    sc_core::sc_time fetch_free_at_;  // end of the last batch's parse interval, if not waited for
    uint64_t parse_ps_ = 0;
    std::vector<uint8_t> buf_;            // one batch, sized at construction
    std::vector<sc_core::sc_time> done_;  // when each WQE of the batch has been read
    std::vector<uint8_t> ok_;             // whether its reads succeeded
    send_wqe wqe_;                        // scratch
};

}  // namespace hcasim
