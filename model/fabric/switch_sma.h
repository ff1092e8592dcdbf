// Subnet management agent of a switch (IBA 14.2), behind its management port 0: it gets the
// VL15 packets the switch receives for its own LID (LID-routed SMPs) or for the permissive LID
// (directed-route SMPs, class 0x81), and answers SubnGet/SubnSet of NodeInfo, SwitchInfo
// (LinearFDBTop), LinearForwardingTable (64 LIDs per block), MulticastForwardingTable (32 MLIDs
// x 16 port-mask bits per block, the port slice in the modifier's position), SLtoVLMappingTable (per input and
// output port, modifier in << 8 | out) and
// VLArbitrationTable by writing the switch's tables, with a GetResp sent back the way the
// request came. Directed route as IBA 14.2.2 (C14-9, C14-13): an outgoing SMP (D = 0) with
// HopPointer < HopCount has the port it came in on written into its ReturnPath and leaves by
// InitialPath[HopPointer + 1]; at HopPointer = HopCount it is this switch's; a returning one
// (D = 1) goes back by ReturnPath[HopPointer - 1]. Directed-route SMPs whose DrDLID or DrSLID is
// not the permissive LID (a LID-routed part) are dropped. M_Keys are not checked.
//
// Every SMP the agent takes (answered or passed on) leaves `process` after its last bit came
// in, plus the switch's hop latency; it shares no buffer with data. Not a SystemC module: it
// runs inside the switch's b_transport and hands what it sends to the switch's port 0.
#pragma once
#include <systemc>

#include <cstdint>

#include "tlm_if/tlm_ext.h"
#include "tlm_if/wire/mad.h"

namespace hcasim {

class ib_switch;

class switch_sma {
public:
    /// The agent of `sw`, whose port 0 has LID `lid` and the switch node GUID `guid`.
    switch_sma(ib_switch& sw, uint16_t lid, uint64_t guid, const sc_core::sc_time& process);

    /// A VL15 packet for port 0 arrived on port `in` (1-based), its last bit at `at`.
    void receive(unsigned in, const uint8_t* bytes, uint32_t len, crc_state crc, const sc_core::sc_time& at);

    uint16_t lid() const { return lid_; }
    /// How long after its last bit an SMP the agent takes leaves it (it holds its input's VL15
    /// buffer until then).
    const sc_core::sc_time& process_time() const { return process_; }
    /// SwitchInfo LinearFDBTop: as the SM last set it (fabric.sm.program=direct: the machine).
    uint16_t linear_fdb_top() const { return fdb_top_; }
    void set_linear_fdb_top(uint16_t top) { fdb_top_ = top; }
    /// What the agent did: SMPs answered (GetResp sent), directed-route SMPs passed on, and
    /// packets dropped (no SMP, an invalid path, a port that is down).
    uint64_t answered = 0, passed_on = 0, dropped = 0;

private:
    /// Answers `s` (a Get or Set for this switch): fills the data and status.
    void process(wire::smp& s);
    void lft_block(wire::smp& s, bool set);
    void sl2vl_table(wire::smp& s, bool set);
    void mft_block(wire::smp& s, bool set);
    void vlarb_block(wire::smp& s, bool set);
    /// Sends `s` out of port `out` with the LRH DLID `dlid`.
    void send(unsigned out, uint16_t dlid, const wire::smp& s, const sc_core::sc_time& at);

    ib_switch& sw_;
    uint16_t lid_;
    uint64_t guid_;
    uint16_t fdb_top_ = 0;
    sc_core::sc_time process_;
    uint8_t tx_[wire::LRH_BYTES + wire::BTH_BYTES + wire::DETH_BYTES + wire::MAD_BYTES + 6]{};
};

}  // namespace hcasim
