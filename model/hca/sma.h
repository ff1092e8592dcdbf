// Subnet management agent (SMA) of the HCA's port, below the verbs (IBA 14.2): it consumes the
// subnet management packets that arrive at QP0 (the P_Key checker hands it every UD SEND to
// QP0 carrying a SubnMgmt MAD, C10-12), answers SubnGet/SubnSet(P_KeyTable) with a GetResp
// through the port (C10-128) after writing the P_Key checker's table (C10-129), answers
// SubnGet/SubnSet(SLtoVLMappingTable, VLArbitrationTable) on the port's tables, and sends
// Bad P_Key traps (Trap 257) to the subnet manager's LID for P_Key violations the checker
// reports (o10-55.1.1), at most one per 4.096 us x 2^subnet_timeout, a newer violation
// replacing the data of a trap still waiting (o10-56). LID-routed SMPs only; M_Keys are not
// checked (M_Key 0: no protection). Event driven: the receive path calls it, one method sends
// the pending trap when the rate limit allows.
#pragma once
#include <systemc>

#include "model/core/param.h"
#include "model/core/unit_clock.h"
#include "model/core/stats.h"
#include "model/fabric/packet.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/rx_packet.h"
#include "tlm_if/wire/mad.h"

namespace hcasim {

class port;

class sma : public sc_core::sc_module, public rx_sink, public pkey_violation_sink {
public:
    param<double> clock_mhz;                  ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> process_cycles;           ///< SMP in to its GetResp handed to the port
    param<unsigned> subnet_timeout;           ///< PortInfo SubnetTimeOut: traps at most every 4.096 us x 2^n
    param<bool> pkey_traps;                   ///< send Trap 257 on P_Key violations (o10-55.1.1)
    param<bool> mcast_pkey_trap_suppression;  ///< PortInfo MulticastPKeyTrapSuppressionEnabled

    counter smps_received, smps_dropped, get_responses, pkey_table_sets, traps_sent, traps_replaced,
        traps_suppressed;

    SC_HAS_PROCESS(sma);
    sma(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock);

    void bind(pkey_checker& k, port& p) {
        pkeys_ = &k;
        port_ = &p;
    }
    /// The port's LID (source of responses and traps) and the subnet manager's (traps' DLID;
    /// 0: no subnet manager, no traps).
    void set_lid(uint16_t lid) { lid_ = lid; }
    void set_sm_lid(uint16_t lid) { sm_lid_ = lid; }
    /// Minimum time between two traps: 4.096 us x 2^subnet_timeout.
    sc_core::sc_time trap_interval() const { return trap_interval_; }

    /// A SubnMgmt MAD to QP0 (from the P_Key checker).
    void receive(const rx_packet& p) override;
    /// A P_Key violation (from the P_Key checker).
    void bad_pkey(const rx_packet& p, uint16_t local_key) override;

private:
    void send_trap();
    void respond(const rx_packet& p, wire::smp& s, uint16_t status);
    /// SLtoVLMappingTable or VLArbitrationTable of the port: the SMP's data and the status.
    uint16_t vl_tables(wire::smp& s, bool set);

    pkey_checker* pkeys_ = nullptr;
    port* port_ = nullptr;
    uint16_t lid_ = 0, sm_lid_ = 0;
    sc_core::sc_time process_, trap_interval_;
    bool pending_ = false;          // a trap waits for the rate limit
    wire::notice_bad_pkey trap_{};  // its data (a newer violation replaces it, o10-56)
    bool toggle_ = false;           // NoticeToggle of the next trap
    uint64_t trap_tid_ = 0;
    sc_core::sc_time next_trap_;  // earliest time of the next trap
    sc_core::sc_event trap_ev_;
    packet tx_;
};

}  // namespace hcasim
