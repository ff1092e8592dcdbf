// InfiniBand switch: input-buffered, credit-based, cut-through. Each input port has a buffer
// per data VL (`fabric.switch.vl_buffer_bytes`, whose 64-byte blocks are the credits of the
// sender at the far end of the cable) and a small VL15 buffer that drops when full. The packet
// at the head of an input VL asks for the output its DLID maps to (linear forwarding table;
// a multicast DLID, 0xC000..0xFFFE, asks every member port of its group but the input), on the
// output VL the SL-to-VL table gives. Each output, when it is free, lets its VL arbiter
// (vl_arbiter.h; VL15 first) pick among the VLs whose oldest request is ready and whose
// receiver has room for the whole packet, and sends it: cut-through, it may start `latency_ns`
// after the packet's first bit arrived (no earlier than its tail allows at the output's rate).
// When the last bit has left, the input buffer's blocks go back to the sender (an FC packet).
// Nothing is dropped on a data VL for lack of room. A unicast packet offered with its sender's
// buffer (packet_handoff_ext) stays in that buffer through the switch, as back to back. What
// an output sends toward node N passes through that node's cable faults (`out<N>.dropped` ...).
//
// Every switch of the fabric reads its parameters from one switch_params (`fabric.switch.*`);
// counters are per switch (`fabric.switch.forwarded`, per port `fabric.switch.out<i>.*` where
// i is the port number minus 1, in a fat tree `fabric.leaf0.out<i>.*`).
//
// Congestion control (fabric.cc.enable, docs/fabric.md "Congestion control"): when an output
// sends a data packet, the marker of that (output, VL) decides from the bytes of the requests
// waiting for the output VL (the heads of input buffers routed there) and whether the output
// had to wait for credit (a victim) or not (a root); a marked packet leaves with FECN set.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/multi_passthrough_initiator_socket.h>
#include <tlm_utils/multi_passthrough_target_socket.h>

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/fabric/cc_marking.h"
#include "model/fabric/credits.h"
#include "model/fabric/fault_injector.h"
#include "model/fabric/packet.h"
#include "model/fabric/vl_arbiter.h"
#include "model/fabric/wire_capture.h"
#include "tlm_if/tlm_ext.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim {

class switch_sma;

/// The parameters every switch of the fabric shares (`fabric.switch.*`); a member of the
/// fabric module.
struct switch_params {
    switch_params();
    param<unsigned> radix;            ///< ports per switch (1..254)
    param<double> latency_ns;         ///< cut-through: first bit in to first bit out
    param<unsigned> vl_buffer_bytes;  ///< input buffer per port per data VL
    param<unsigned> vl15_buffer_packets;
    param<unsigned> data_vls;  ///< data VLs the switch's ports support (1, 2, 4, 8, 15)
    param<std::string> sl2vl, vlarb_high, vlarb_low;
    param<unsigned> vlarb_high_limit;
    param<double> deadlock_timeout_us;  ///< no progress with packets held this long: deadlock
};

class ib_switch : public sc_core::sc_module {
public:
    tlm_utils::multi_passthrough_target_socket<ib_switch> in;      ///< bound with bind_port()
    tlm_utils::multi_passthrough_initiator_socket<ib_switch> out;  ///< bound with bind_port()

    counter forwarded, dropped_no_route, mcast_replicas, overruns;
    module_log log_;  ///< info: every packet dropped (no route, VL15 full)

    SC_HAS_PROCESS(ib_switch);
    /// A switch with ports 1..ports (IBA numbering). `cc`: the fabric's congestion control
    /// settings (validated); nullptr or not enabled: no marking, no CC counters.
    ib_switch(const sc_core::sc_module_name& name, unsigned ports, const switch_params& p,
              const cc_config* cc = nullptr);
    ~ib_switch() override;
    unsigned ports() const { return unsigned(ports_.size()); }

    /// Cables port `p`: `from` sends into it, it sends into `to`.
    void bind_port(unsigned p, tlm::tlm_base_initiator_socket<>& from, tlm::tlm_base_target_socket<>& to) {
        bind_port_sockets(p, from, to);
    }
    /// The same for a channel's multi-sockets (isl_channel).
    template <typename From, typename To>
    void bind_port_sockets(unsigned p, From& from, To& to) {
        check_port(p);
        from.bind(in);
        sock_to_port_.push_back(int(p - 1));
        out.bind(to);
        ports_[p - 1]->sock = int(sock_to_port_.size()) - 1;
    }
    /// Port `p`'s link: data rate, propagation, the cable's faults toward the far end,
    /// operational data VLs, the far end's receive buffer per VL, and the sender at the far end
    /// (credits this port's input buffer gives back), `credit_delay` after freeing.
    void set_link(unsigned p, double rate_gbps, const sc_core::sc_time& propagation,
                  const fault_settings& faults, unsigned vls, uint32_t far_buffer_bytes,
                  credit_counter* upstream, const sc_core::sc_time& credit_delay);
    /// What port `p` may send: the far end's buffers (the far end's receiver restores them).
    credit_counter& out_credits(unsigned p) { return ports_.at(p - 1)->credits; }
    /// The linear forwarding table: lft[lid] = output port, 0xFF none (as the SM programs it).
    void set_lft(std::vector<uint8_t> lft);
    void set_lft_entry(uint16_t lid, uint8_t port);
    uint8_t lft_entry(uint16_t lid) const { return lid < lft_.size() ? lft_[lid] : 0xFF; }
    /// Multicast forwarding table: port `p` is in the group of `mlid` or not (as the SM
    /// programs it).
    void set_mcast(uint16_t mlid, unsigned p, bool member);
    bool mcast_member(uint16_t mlid, unsigned p) const {
        if (mlid < 0xC000 || mlid == 0xFFFF || p < 1 || p > ports_.size()) return false;
        const std::vector<uint16_t>& g = mft_[mlid - 0xC000];
        return !g.empty() && g[p - 1];
    }
    /// Port 0, the management port: VL15 packets for LID `lid` or the permissive LID go to
    /// `agent` (switch_sma.h) instead of the forwarding tables.
    void attach_agent(switch_sma* agent, uint16_t lid) {
        agent_ = agent;
        agent_lid_ = lid;
    }
    /// Port 0 sends a sealed VL15 packet out of port `p`, leaving no earlier than `at` plus
    /// the hop latency; false if port p is not cabled.
    bool send_from_port0(unsigned p, const uint8_t* bytes, uint32_t len, const sc_core::sc_time& at);
    bool linked(unsigned p) const { return p >= 1 && p <= ports_.size() && ports_[p - 1]->linked; }
    /// Output `p`'s operational data VLs, SL-to-VL tables and VL arbitration tables (as the SM
    /// programs them; set_link sets them from fabric.switch.* at link-up).
    unsigned data_vls(unsigned p) const { return ports_.at(p - 1)->vls; }
    /// The SL-to-VL table of packets from input port `in` (0: the management port) to output
    /// `out` (IBA: one per (input, output) pair).
    const std::array<uint8_t, 16>& sl2vl(unsigned in, unsigned out) const;
    /// The table every input of output `p` uses unless one of its own was set.
    const std::array<uint8_t, 16>& sl2vl(unsigned p) const { return ports_.at(p - 1)->sl2vl.front(); }
    /// Sets the table of every input of output `p` (drops the inputs' own).
    void set_sl2vl(unsigned p, const std::array<uint8_t, 16>& t);
    /// Sets the table of input `in` (0: the management port) to output `out` only.
    void set_sl2vl(unsigned in, unsigned out, const std::array<uint8_t, 16>& t);
    const vl_arbiter& arbiter(unsigned p) const { return ports_.at(p - 1)->arb; }
    void set_vlarb(unsigned p, std::vector<vlarb_entry> high, std::vector<vlarb_entry> low);
    /// --pcap: records what port `p` sends into `w` as direction `dir`, before the cable's
    /// faults, at the time its first bit leaves the port. nullptr: no capture (the default).
    void capture_to(unsigned p, wire_capture* w, unsigned dir);
    /// Fault injection on what port `p` sends (counters `out<p-1>.dropped` ...).
    const fault_injector& faults(unsigned p) const { return ports_.at(p - 1)->faults; }

    /// Deadlock watch: called when an output has waited for credit, with packets ready, for
    /// deadlock_timeout_us and nothing moved in this switch meanwhile.
    void on_stall(std::function<void(ib_switch&, unsigned port)> f) { on_stall_ = std::move(f); }
    /// Whether output `p` is waiting for credit with a packet ready, and for how long.
    bool credit_starved(unsigned p, sc_core::sc_time* since = nullptr) const;
    /// The output the packet at the head of input `p` (first starved VL) waits for; 0: none.
    unsigned head_wants(unsigned p) const;
    /// Packets held in the input buffers.
    uint64_t held_packets() const { return held_; }
    /// The earliest this switch may start sending a packet it holds (its requests' ready times,
    /// its outputs' busy times; at least `now`); sc_max_time() when it holds none. A packet that
    /// arrives later leaves no sooner than its first bit + latency_ns (lookahead of a partitioned
    /// run, testbench/workloads/sim_driver.h).
    sc_core::sc_time earliest_departure(const sc_core::sc_time& now) const;
    sc_core::sc_time latency() const { return latency_; }
    /// Congestion control's FECN markers (nullptr: CC off).
    const cc_switch_marking* cc_marking() const { return cc_ ? &cc_->marking : nullptr; }

private:
    struct queued;
    struct request {
        sc_core::sc_time ready;  // when it may start at this output
        uint16_t in;             // input port index (0-based)
        uint8_t in_vl;           // the input buffer it heads
        uint8_t vl;              // the output VL
    };
    struct in_port {
        std::array<std::deque<queued*>, 16> vl;   // index 15: VL15
        std::vector<sc_core::sc_time> vl15_busy;  // SMPs out of `vl` still held: until when
        std::array<sc_core::sc_time, 16> gone{};  // per VL: when the last packet to leave had left
        credit_counter* upstream = nullptr;
        sc_core::sc_time credit_delay;
        double ps_per_byte = 80.0;
    };
    struct out_port {
        explicit out_port(const std::string& prefix);
        fault_injector faults;
        counter PortXmitData, PortXmitPkts, PortRcvData, PortRcvPkts, PortXmitWait, PortXmitDiscards,
            VL15Dropped;
        wire_capture* capture = nullptr;  // --pcap
        unsigned capture_dir = 1;
        double ps_per_byte = 80.0;
        sc_core::sc_time propagation, free_at;
        bool linked = false;
        int sock = -1;  // index in `out`
        unsigned vls = 1;
        // SL-to-VL tables: [0] every input's unless sl2vl_in (empty: none of its own) gives
        // the input (by index, port 0's last) another entry. Compact at radix 254.
        std::vector<std::array<uint8_t, 16>> sl2vl{1};
        std::vector<uint8_t> sl2vl_in;
        const uint8_t* sl2vl_for(unsigned in) const {
            return sl2vl[sl2vl_in.empty() ? 0 : sl2vl_in[in]].data();
        }
        vl_arbiter arb;
        credit_counter credits;
        std::array<std::deque<request>, 16> req;  // per output VL, by ready time
        uint32_t req_mask = 0;
        bool starved = false;  // waiting for credit with a request ready
        sc_core::sc_time starved_since;
        std::array<uint64_t, 16> req_bytes{};  // CC: bytes of the requests per output VL
    };
    /// Congestion control, when enabled: the markers and a counter per output.
    struct cc_state {
        cc_state(const cc_config& c, unsigned ports);
        cc_switch_marking marking;
        std::vector<std::unique_ptr<counter>> fecn_marked;  // out<i>.fecn_marked
    };

    void check_port(unsigned p) const;
    void b_transport(int id, tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    /// A VL15 packet's first bit arrives: kept if input `i`'s VL15 buffer has room then.
    void vl15_arrive();
    /// Whether input `i` can forward a packet to `l`'s DLID (else dropped and counted).
    bool routable(unsigned i, const uint8_t* bytes, uint32_t len, const wire::lrh& l, unsigned vl);
    queued* take_queued();
    void forward();
    void watch();
    /// Serves output `o` at `now`; returns the next time it needs a look (SC_ZERO_TIME: none).
    sc_core::sc_time serve(unsigned o, const sc_core::sc_time& now);
    void send(unsigned o, unsigned vl, const sc_core::sc_time& now);
    /// The head of input `i` VL `v` asks for its output(s), no earlier than `after`.
    void post_head(unsigned i, unsigned v, const sc_core::sc_time& after);
    void add_request(unsigned o, const request& r);
    /// CC: the request for output `o` VL `v` of `len` bytes leaves the queue (it is being
    /// sent); the marker decides and FECN is set on `pkt` (whose CRCs are in state `crc`).
    void cc_mark(unsigned o, unsigned v, packet& pkt, uint32_t len, crc_state crc, bool victim);
    void drop(const uint8_t* bytes, uint32_t len, unsigned in, const char* why);

    const switch_params& p_;
    std::unique_ptr<cc_state> cc_;  // nullptr: congestion control off
    sc_core::sc_time latency_;
    std::vector<std::unique_ptr<out_port>> ports_;
    std::vector<in_port> inputs_;
    std::vector<int> sock_to_port_;  // `in` socket index -> port index
    std::vector<uint64_t> active_;   // bit per output with requests or a held reorder
    std::vector<uint8_t> lft_;
    std::vector<std::vector<uint16_t>> mft_;  // per MLID - 0xC000, joins per port index
    std::vector<queued*> free_;               // spare queue entries
    std::vector<std::unique_ptr<queued>> pool_;
    uint64_t held_ = 0;
    sc_core::sc_event wake_, credit_wake_, watch_ev_;
    sc_core::sc_time last_progress_;
    bool watching_ = false;
    std::function<void(ib_switch&, unsigned)> on_stall_;
    tlm::tlm_generic_payload gp_;
    packet_handoff_ext* handoff_ = nullptr;  // on gp_ (which owns it): the buffer on offer
    // VL15 packets on their way in, decided at their first bit's arrival (by `first`).
    struct vl15_pending {
        sc_core::sc_time first;
        queued* q;
        uint16_t in;
    };
    std::deque<vl15_pending> vl15_pending_;
    sc_core::sc_event vl15_ev_;
    switch_sma* agent_ = nullptr;  // port 0's agent; its packets queue in inputs_.back()
    uint16_t agent_lid_ = 0;
};

}  // namespace hcasim
