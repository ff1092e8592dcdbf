// The cables between switches (inter-switch links, ISLs), both directions, as one channel that
// delivers at canonical times in a canonical order: what crosses a cable reaches the far switch
// as a message due at a time fixed by the sender's call alone, and every message due at one
// instant is delivered in one order (due time, directed link, kind, sequence number). A fabric
// split over processes (docs/fabric.md, "Partitioned runs") cuts only such cables: a message
// whose receiving switch another process simulates leaves in that process's outbox and comes
// back through inject() with the same due time and key, so each switch sees the same arrivals
// in the same order whatever the partition.
//
// - A packet is due when its first bit arrives (sent + the cable's propagation); the receiving
//   switch's b_transport then runs with `delay` = its last bit's arrival - now, as if the sender
//   had called it directly.
// - A credit return (the receiving switch freed blocks of its input buffer: credit_counter's
//   restore, forwarded here) is due when the flow-control packet's first bit reaches the
//   sender (blocks back - the FC packet's serialisation), and never sooner than the cable's
//   propagation after the call. The sender's credit_counter learns it then; before, a sender
//   short of credit waits (IBA 7.9: the sender knows of freed blocks only from FC packets).
//
// No process per cable: one SC_METHOD delivers every due message; messages wait in a binary
// heap (no allocation per packet once it has grown), local packets in the sender's pool buffer.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/fabric/credits.h"
#include "model/fabric/fault_injector.h"
#include "model/fabric/packet.h"
#include "tlm_if/tlm_ext.h"

namespace hcasim {

class ib_switch;

class isl_channel : public sc_core::sc_module, public credit_forward {
public:
    tlm_utils::multi_passthrough_target_socket<isl_channel> from_switch;   ///< a sending switch's out
    tlm_utils::multi_passthrough_initiator_socket<isl_channel> to_switch;  ///< a receiving switch's in

    SC_HAS_PROCESS(isl_channel);
    /// `rank`: the process this one is in a partitioned run (0 alone).
    explicit isl_channel(const sc_core::sc_module_name& name, unsigned rank = 0);
    ~isl_channel() override;

    /// Cables switch `a` port `pa` to switch `b` port `pb` (each switch's outputs and inputs
    /// bound through this channel; `a_rank`, `b_rank`: the processes that simulate them),
    /// `propagation` and `fc_time` (an FC packet's serialisation) of the cable, and sets both
    /// switches' links (rate, the far end's buffers per VL, credits forwarded here). Returns the
    /// index of the directed link a -> b (b -> a is the next).
    unsigned cable(ib_switch& a, unsigned pa, unsigned a_rank, ib_switch& b, unsigned pb, unsigned b_rank,
                   double rate_gbps, const sc_core::sc_time& propagation, const sc_core::sc_time& fc_time,
                   unsigned vls, uint32_t vl_buffer_bytes, const fault_settings& faults = {});

    /// Directed links whose receiving switch is on another rank than the sending one.
    bool any_cut() const { return cuts_ > 0; }
    /// The least propagation of a cut link (the lookahead of a partitioned run); SC_ZERO_TIME
    /// without a cut.
    sc_core::sc_time min_cut_propagation() const { return min_cut_; }

    /// Partitioned runs: the messages bound for rank `r` since the last take (appended to
    /// `out`, cleared here): a flat byte string inject() reads on rank `r`.
    void take_outbox(unsigned r, std::vector<uint8_t>& out);
    /// The least due time of the messages put in outboxes since the last call (sc_max_time():
    /// none), and starts over.
    sc_core::sc_time take_least_outgoing_due();
    /// Messages from another rank (take_outbox's bytes): queued for delivery at their due times.
    /// Throws std::runtime_error on a malformed buffer (a bug, never user input).
    void inject(const std::vector<uint8_t>& in);
    /// Messages queued for delivery here.
    size_t pending() const { return heap_.size(); }
    /// When the next of them is due (sc_max_time(): none).
    sc_core::sc_time next_due() const {
        return heap_.empty() ? sc_core::sc_max_time()
                             : sc_core::sc_time(double(heap_.front().due), sc_core::SC_PS);
    }

    // credit_forward: a receiving switch freed blocks of directed link `link`'s input.
    void credit(uint32_t link, unsigned vl, uint32_t blocks, const sc_core::sc_time& at) override;

private:
    enum : uint8_t { credit_msg = 0, packet_msg = 1 };
    struct message {
        uint64_t due;   // ps: delivered at
        uint64_t when;  // ps: packet: last bit arrives; credit: the blocks are back
        uint32_t link;  // directed link
        uint32_t seq;   // per directed link and kind
        uint8_t kind;
        uint8_t crc;  // packet: crc_state
        uint8_t vl;   // credit
        uint32_t n;   // packet: bytes; credit: blocks
        packet* pkt;  // packet: its bytes
    };
    struct later {  // heap order: the smallest key on top
        bool operator()(const message& x, const message& y) const {
            if (x.due != y.due) return x.due > y.due;
            if (x.link != y.link) return x.link > y.link;
            if (x.kind != y.kind) return x.kind > y.kind;
            return x.seq > y.seq;
        }
    };
    struct directed {
        ib_switch* to = nullptr;
        int to_sock = -1;                  // index in to_switch toward the receiving switch
        credit_counter* sender = nullptr;  // the sending switch's credits on this output
        credit_counter proxy;              // the receiving switch's upstream: forwards here
        sc_core::sc_time propagation, fc_time;
        unsigned rank = 0;                  // of the receiving switch
        unsigned from_rank = 0;             // of the sending switch
        uint32_t packets = 0, credits = 0;  // sequence numbers
    };

    void b_transport(int id, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void post(const message& m, unsigned to_rank);
    void deliver();
    void deliver_packet(const message& m);

    const unsigned rank_;
    std::vector<std::unique_ptr<directed>> links_;
    std::vector<uint32_t> sock_link_;  // from_switch index -> directed link
    std::vector<message> heap_;
    std::vector<std::vector<uint8_t>> outbox_;  // per rank
    sc_core::sc_event due_;
    tlm::tlm_generic_payload gp_;
    packet_handoff_ext* handoff_ = nullptr;
    unsigned cuts_ = 0;
    uint64_t least_out_ = UINT64_MAX;  // ps
    sc_core::sc_time min_cut_;
};

}  // namespace hcasim
