// HCA port: serialises transmitted packets at the active link rate (computing ICRC and VCRC)
// and receives packets from the link (checking VCRC and ICRC, decoding headers, checking the
// DLID) for the P_Key checker; a congestion notification (CNP, opcode 0x80, not a transport
// opcode) is parsed with wire::parse_cnp and passed on the same way. A packet addressed to this
// port's own unicast LIDs never reaches the link: it loops back into the receive path (C10-6).
// Timing is analytic: each packet occupies the wire (or the loopback path) from max(ready,
// free) for len x 8 / rate; no process runs per packet on transmit.
#pragma once
#include <systemc>
#include <tlm>
#include "tlm_if/tlm_ext.h"
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <array>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/ring.h"
#include "model/core/timeline.h"
#include "model/core/stats.h"
#include "model/fabric/credits.h"
#include "model/fabric/packet.h"
#include "model/fabric/vl_arbiter.h"
#include "model/hca/rx_packet.h"

namespace hcasim {

/// Where the transport engine sends packets: the port's transmit side.
class packet_tx {
public:
    virtual ~packet_tx() = default;
    virtual sc_core::sc_time transmit(packet*& pkt, uint32_t len_before_icrc,
                                      const sc_core::sc_time& ready) = 0;
    /// How long before the next packet of a QP on service level `sl` may be handed over:
    /// zero if now, sc_max_time() (tx_blocked()) if the port waits for credit of unknown arrival (then wait on
    /// tx_unblocked()).
    virtual sc_core::sc_time tx_backpressure(uint8_t sl) = 0;
    virtual const sc_core::sc_event& tx_unblocked() = 0;
    /// Senders on different lanes are held back independently: a QP whose lane is blocked
    /// waits while QPs on other lanes send. A port that sends in order has one lane (lane 0
    /// for every SL); one with VL arbitration a lane per VL.
    virtual unsigned tx_lanes() const { return 1; }
    virtual unsigned tx_lane(uint8_t /*sl*/) const { return 0; }
};

/// Most lanes a packet_tx has (data VLs 0..14 and VL15).
constexpr unsigned MAX_TX_LANES = 16;

/// tx_backpressure() answers this when no credit is known to come: wait for tx_unblocked().
inline bool tx_blocked(const sc_core::sc_time& backpressure) {
    return backpressure == sc_core::sc_max_time();
}

class port final : public sc_core::sc_module, public packet_tx {
public:
    tlm_utils::simple_initiator_socket<port> tx;  ///< to this node's link
    tlm_utils::simple_target_socket<port> rx;     ///< from the far end

    param<unsigned> tx_queue_packets;     ///< packets that may wait for the wire (as many for the loopback)
    param<unsigned> rx_buffer_packets;    ///< initial depth of the arrival queue (it doubles when full)
    param<double> rx_pipeline_ns;         ///< from last bit in to the packet reaching the P_Key checker
    param<double> loopback_ns;            ///< loopback path: last bit looped back to the receive pipeline
    param<bool> lazy_crc;                 ///< seal (ICRC, VCRC) only when the wire bytes are needed
    param<unsigned> vl_buffer_bytes;      ///< receive buffer per data VL (credits of the far end)
    param<unsigned> vl15_buffer_packets;  ///< receive buffer of VL15 (management), not flow controlled
    param<std::string> sl2vl;             ///< SL-to-VL mapping table (16 VLs); "" = SL mod data VLs
    param<std::string> vlarb_high, vlarb_low;  ///< VL arbitration tables (VL:WEIGHT,...)
    param<unsigned> vlarb_high_limit;          ///< LimitOfHighPriority (4 KiB units; 255 unbounded)

    module_log
        log_;  ///< info: packets dropped on receive (CRC, malformed, DLID); debug: every packet received
    counter tx_packets, tx_bytes, rx_packets, rx_bytes, tx_busy_ps;
    counter rx_bad_vcrc, rx_bad_icrc, rx_malformed, rx_queue_grows, rx_bad_dlid;
    counter loopback_packets, loopback_bytes;
    counter tx_queue_peak, rx_queue_peak;  ///< most packets queued at once (transmit, receive)
    /// IBA port counters (PortCountersExtended widths: 64 bits; data in 4-byte words).
    counter PortXmitData, PortRcvData, PortXmitPkts, PortRcvPkts, PortXmitWait, PortXmitDiscards;
    counter PortRcvErrors, VL15Dropped;
    counter fc_packets;  ///< flow-control packets sent (one per data packet leaving the buffer)

    SC_HAS_PROCESS(port);
    explicit port(const sc_core::sc_module_name& name);

    /// Active data rate of the connection (set by the fabric after link negotiation).
    void set_rate_gbps(double gbps);
    double rate_gbps() const { return rate_gbps_; }
    /// The port's base LID and LID mask count (set by the fabric): the port owns the unicast
    /// LIDs lid .. lid + 2^lmc - 1 (IBA: the SM assigns a base LID whose low lmc bits are 0).
    void set_lid(uint16_t lid, uint8_t lmc);
    uint16_t lid() const { return lid_; }
    uint8_t lmc() const { return lmc_; }
    /// True if `dlid` is one of this port's unicast LIDs (never for LID 0, multicast or
    /// permissive, nor before a LID is assigned).
    bool is_own_lid(uint16_t dlid) const {
        return lid_ != 0 && dlid < wire::MULTICAST_LID_BASE && uint16_t(dlid - lid_) < (1u << lmc_);
    }
    /// Flow control: `vls` operational data VLs on this link (the SL-to-VL table maps onto
    /// them); the far end's receive buffers hold `far_buffer_bytes` per VL (0: no flow control).
    void set_flow_control(unsigned vls, uint32_t far_buffer_bytes);
    /// What this port receives gives credit back to `upstream` (the far end's sender)
    /// `credit_delay` after the packet leaves the receive buffer (an FC packet's
    /// serialisation and the cable's propagation).
    void give_credit_to(credit_counter* upstream, const sc_core::sc_time& credit_delay) {
        upstream_ = upstream;
        credit_delay_ = credit_delay;
    }
    credit_counter& tx_credits() { return tx_credits_; }
    /// The operational VL of service level `sl` (VL15: the SL is dropped, per the SL2VL table).
    unsigned vl_of(uint8_t sl) const { return sl2vl_[sl & 15]; }
    /// The SL-to-VL table in use, and a new one (as the SMA's Set(SL2VLMappingTable) gives it).
    const std::array<uint8_t, 16>& sl2vl_table() const { return sl2vl_; }
    void set_sl2vl(const std::array<uint8_t, 16>& t) { sl2vl_ = t; }
    /// VL arbitration (more than one data VL): the arbiter, and new tables (the SMA's
    /// Set(VLArbitrationTable); empty: the defaults of vl_arbiter::configure).
    bool arbitrated() const { return arbitrated_; }
    unsigned data_vls() const { return vls_; }  ///< operational data VLs of the link
    const vl_arbiter& arbiter() const { return arb_; }
    void set_vlarb(std::vector<vlarb_entry> high, std::vector<vlarb_entry> low);
    /// Where received packets go.
    void bind_receiver(rx_sink& sink) { sink_ = &sink; }

    /// Sends a packet whose headers, payload and pad occupy pkt.bytes[0..len_before_icrc):
    /// appends ICRC and VCRC and puts it on the wire no earlier than sc_time_stamp() + ready.
    /// A packet to one of this port's own unicast LIDs is looped back instead: it takes the
    /// loopback path (serialised at the port rate, then loopback_ns) into the receive buffer
    /// and never reaches the link. The caller's buffer is free again on return. Returns the
    /// time (offset from now) the last bit leaves the port (or enters the loopback path).
    sc_core::sc_time transmit(packet& pkt, uint32_t len_before_icrc, const sc_core::sc_time& ready);
    /// The same for a buffer from packet_pool: the receiver (a port or switch, on a cable that
    /// does not alter the bytes) takes the buffer itself instead of copying the packet
    /// (packet_handoff_ext), and `pkt` comes back as another free buffer.
    sc_core::sc_time transmit(packet*& pkt, uint32_t len_before_icrc, const sc_core::sc_time& ready) override;

    /// How long a sender must wait before the transmit queues (wire and loopback) have room
    /// (zero if they have).
    sc_core::sc_time tx_backpressure(uint8_t sl) override;
    const sc_core::sc_event& tx_unblocked() override {
        return arbitrated_ || held_head_ < held_.size() ? tx_unblocked_ : tx_credits_.wait_for_credit();
    }
    unsigned tx_lanes() const override { return arbitrated_ ? MAX_TX_LANES : 1; }
    unsigned tx_lane(uint8_t sl) const override { return arbitrated_ ? sl2vl_[sl & 15] : 0; }

    /// --timeline: a span per packet serialised onto the wire and per packet through the
    /// receive pipeline, on tracks of node `node`.
    void set_timeline(timeline* tl, unsigned node) {
        tl_ = tl;
        tx_track_ = tl->track(node, "port: wire out");
        rx_track_ = tl->track(node, "port: receive");
    }

private:
    timeline* tl_ = nullptr;
    unsigned tx_track_ = 0, rx_track_ = 0;
    void rx_b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    /// Puts a received packet into the receive buffer, to reach the P_Key checker at `arrival`
    /// (absolute); counts and drops it if it is too long.
    /// `intact`: the bytes are exactly what a port sealed (crc_intact_ext): the CRCs are not recomputed.
    /// `handoff`: the sender's buffer holding the bytes, taken in exchange for a free one.
    void enqueue_rx(const uint8_t* bytes, uint32_t len, const sc_core::sc_time& arrival, bool intact,
                    packet** handoff = nullptr);
    void rx_process();
    /// Puts a sealed packet on the wire at `start` (absolute): counters, timeline, the cable.
    void wire_out(packet& pkt, const sc_core::sc_time& start);
    /// Sends the packets held for credit, in order, as credit comes back.
    void send_held();
    /// VL arbitration: queues a packet on its VL (taking the caller's buffer when it came
    /// through the packet* transmit); returns when it would leave if it went next.
    sc_core::sc_time enqueue_vl(packet& pkt, unsigned vl, const sc_core::sc_time& ready_at,
                                const sc_core::sc_time& serialise);
    /// SC_METHOD: when the wire is free, the VL arbiter picks among the VLs whose head packet
    /// is ready and has credit (VL15 first) and puts it on the wire.
    void arbitrate();

    /// Start times of the packets waiting for one serialiser (wire or loopback), a ring of
    /// tx_queue_packets entries in start order: the transmit queue's occupancy.
    struct departures {
        std::vector<sc_core::sc_time> starts;
        size_t head = 0, count = 0;
        /// Forgets the packets that have started by `now`; returns how long until one more
        /// fits (zero if one fits now).
        sc_core::sc_time wait(const sc_core::sc_time& now);
        /// Records a packet starting at `start` (overwrites the oldest if full: the ring only
        /// bounds what is tracked, for a caller that ignored tx_backpressure).
        void push(const sc_core::sc_time& start, const sc_core::sc_time& now);
    };
    /// A place in the receive queue. Packets up to SMALL_BYTES (ACKs, requests without payload,
    /// 64-byte WRITEs) are copied into the slot itself; longer ones live in a packet buffer (the
    /// sender's, taken in exchange, or a copy). A queue thousands of packets deep (16,384 QPs)
    /// then holds its small packets in 256 bytes each, not in 4 KiB buffers.
    struct alignas(64) rx_slot {
        static constexpr uint32_t SMALL_BYTES = 224;
        sc_core::sc_time arrival;
        const uint8_t* data = nullptr;  // the packet's bytes: `small` or pkt->bytes
        packet* pkt = nullptr;          // from packet_pool, taken when the slot first needs one
        uint32_t len = 0;               // bytes of the packet
        bool intact = false;            // crc_intact_ext: skip the CRC checks
        uint8_t small[SMALL_BYTES];
    };
    rx_sink* sink_ = nullptr;
    double rate_gbps_ = 100.0;
    double ps_per_byte_ = 80.0;
    uint16_t lid_ = 0;  // 0: no LID assigned yet
    uint8_t lmc_ = 0;
    sc_core::sc_time wire_free_, loop_free_;
    // Flow control: the far end's buffers (what this port may send), where what it receives
    // gives credit back, and the packets waiting for credit (buffers from packet_pool).
    credit_counter tx_credits_;
    credit_counter* upstream_ = nullptr;
    sc_core::sc_time credit_delay_;
    std::array<uint8_t, 16> sl2vl_{};
    struct held_packet {
        packet* pkt;
        sc_core::sc_time ready;  // absolute
        unsigned vl;
    };
    std::vector<held_packet> held_;
    size_t held_head_ = 0;
    // VL arbitration (more than one data VL): a queue per VL (VL15 at 15), each holding up to
    // tx_queue_packets packets that asked (ACKs and SMPs, which do not ask, may go past it).
    struct queued {
        packet* pkt;
        sc_core::sc_time ready;  // absolute
        uint32_t blocks;
    };
    bool arbitrated_ = false;
    unsigned vls_ = 1;
    vl_arbiter arb_;
    std::array<ring<queued>, MAX_TX_LANES> vlq_;
    uint32_t queued_vls_ = 0;      // VLs with a packet queued
    uint32_t full_waited_ = 0;     // VLs whose full queue held a sender back
    bool arb_until_wire_ = false;  // arbitrate() waits for the wire only: a new packet needs no wake-up
    sc_core::sc_event arb_event_;
    sc_core::sc_event tx_unblocked_, held_event_;
    // When each VL15 packet in the receive buffer leaves it (enters the pipeline's last stage),
    // in arrival order: a packet holds its place from its first bit in until then.
    std::deque<sc_core::sc_time> vl15_leaves_;
    uint64_t xmit_wait_ps_ = 0;
    bool credit_blocked_ = false;  // tx_backpressure() held the engine back for credit
    sc_core::sc_time blocked_since_;
    sc_core::sc_time loopback_;
    departures wire_q_, loop_q_;
    // Receive buffer: rx_count_ slots from rx_head_ in arrival order (wire and loopback
    // arrivals interleave; each source on its own arrives in order). The ring holds pointers
    // into rx_pool_; the slots not queued wait on rx_free_, a stack, so the slot filled next is
    // the one released last (its bytes are still in the cache) rather than the oldest one.
    std::vector<std::unique_ptr<rx_slot>> rx_pool_;
    std::vector<rx_slot*> rx_ring_, rx_free_;
    size_t rx_head_ = 0, rx_count_ = 0;
    sc_core::sc_event rx_event_;
    sc_core::sc_time rx_pipeline_;
    bool lazy_crc_ = true;
    tlm::tlm_generic_payload tx_gp_;
    packet_handoff_ext* handoff_ = nullptr;  // on tx_gp_ (which owns it)
    // The packet being received, on offer to the DMA writes of its payload (rx_packet::loan):
    // host memory may keep the buffer until its posted write lands instead of copying 4 KiB;
    // the slot then takes another from packet_pool, where the buffer returns.
    buffer_loan_ext loan_;
    static void give_back_loan(void* buffer);

public:
    ~port() override;
};

}  // namespace hcasim
