#include "model/hca/sma.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "model/hca/port.h"

namespace hcasim {

using namespace sc_core;

sma::sma(const sc_module_name& name, const sc_time& hca_clock)
    : sc_module(name),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      process_cycles("process_cycles", 256, "cycles",
                     "SMP processing: arrival to its GetResp handed to the port", {0, 1u << 20}),
      subnet_timeout("subnet_timeout", 18, "",
                     "PortInfo SubnetTimeOut: Bad P_Key traps at most every 4.096 us x 2^n (0..31)", {0, 31}),
      pkey_traps("pkey_traps", true, "",
                 "send Trap 257 (Bad P_Key) to the SM for P_Key violations (o10-55.1.1)"),
      mcast_pkey_trap_suppression("mcast_pkey_trap_suppression", true, "",
                                  "MulticastPKeyTrapSuppressionEnabled: no trap for a multicast packet whose "
                                  "P_Key and the QP's are limited members of the same partition"),
      smps_received("smps_received", "subnet management packets consumed (never seen by consumer QPs)"),
      smps_dropped("smps_dropped", "SMPs dropped: directed route, or a method the SMA does not answer"),
      get_responses("get_responses", "GetResp sent (SubnGet/SubnSet answered)"),
      pkey_table_sets("pkey_table_sets", "SubnSet(P_KeyTable) applied"),
      traps_sent("traps_sent", "Trap 257 (Bad P_Key) sent to the SM"),
      traps_replaced("traps_replaced", "pending trap data replaced by a newer violation (o10-56)"),
      traps_suppressed("traps_suppressed", "multicast limited/limited P_Key mismatches without a trap") {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    process_ = clock * double(process_cycles.get());
    trap_interval_ = sc_time(4.096 * std::ldexp(1.0, int(subnet_timeout.get())), SC_US);
    SC_METHOD(send_trap);
    sensitive << trap_ev_;
    dont_initialize();
}

void sma::respond(const rx_packet& p, wire::smp& s, uint16_t status) {
    s.h.method = wire::MAD_METHOD_GET_RESP;
    s.h.status = status;
    // To the requester's LID; SMPs always go QP0 to QP0.
    const size_t len = wire::encode_smp_packet(p.h.l.slid, lid_, p.h.l.sl, s, tx_.bytes);
    if (!len || !port_) return;
    port_->transmit(tx_, uint32_t(len), process_);
    ++get_responses;
}

void sma::receive(const rx_packet& p) {
    ++smps_received;
    if (p.payload_len < wire::MAD_BYTES || p.payload[1] != wire::MGMT_CLASS_SUBN_LID_ROUTED) {
        ++smps_dropped;  // directed-route SMPs are not supported
        return;
    }
    wire::smp s = wire::decode_smp(p.payload);
    if (s.h.method != wire::MAD_METHOD_GET && s.h.method != wire::MAD_METHOD_SET) {
        ++smps_dropped;  // GetResp, Trap, TrapRepress ...: nothing for an agent to answer
        return;
    }
    if (s.h.base_version != wire::MAD_BASE_VERSION || s.h.class_version != wire::SMP_CLASS_VERSION) {
        respond(p, s, wire::MAD_STATUS_BAD_VERSION);
        return;
    }
    if (s.h.attr_id == wire::SMP_ATTR_SL2VL_TABLE || s.h.attr_id == wire::SMP_ATTR_VLARB_TABLE) {
        respond(p, s, vl_tables(s, s.h.method == wire::MAD_METHOD_SET));
        return;
    }
    if (s.h.attr_id != wire::SMP_ATTR_PKEY_TABLE) {
        s.data.fill(0);
        respond(p, s, wire::MAD_STATUS_UNSUPPORTED_ATTRIBUTE);
        return;
    }
    // P_KeyTable: the attribute modifier is the block of 32 entries.
    const unsigned entries = pkeys_->size();
    const unsigned blocks = (entries + wire::PKEYS_PER_BLOCK - 1) / wire::PKEYS_PER_BLOCK;
    if (s.h.attr_mod >= blocks) {
        s.data.fill(0);
        respond(p, s, wire::MAD_STATUS_INVALID_FIELD);  // C10-128: the failure is answered too
        return;
    }
    const unsigned first = s.h.attr_mod * wire::PKEYS_PER_BLOCK;
    uint16_t keys[wire::PKEYS_PER_BLOCK];
    if (s.h.method == wire::MAD_METHOD_SET) {
        // C10-122: only SMPs change the table. C10-129: every later packet sees the new entries
        // (the checker reads the table per packet); entries past the table's end are ignored.
        wire::decode_pkey_block(s.data.data(), keys);
        for (unsigned i = 0; i < wire::PKEYS_PER_BLOCK && first + i < entries; ++i)
            pkeys_->set_pkey(first + i, keys[i]);
        ++pkey_table_sets;
    }
    for (unsigned i = 0; i < wire::PKEYS_PER_BLOCK; ++i)
        keys[i] = first + i < entries ? pkeys_->pkey(first + i) : 0;
    wire::encode_pkey_block(keys, s.data.data());
    respond(p, s, wire::MAD_STATUS_OK);
}

uint16_t sma::vl_tables(wire::smp& s, bool set) {
    // A CA port has one table of each: the modifier's port field is 0 or the port (1).
    if (s.h.attr_id == wire::SMP_ATTR_SL2VL_TABLE) {
        uint16_t status = wire::MAD_STATUS_OK;
        if (s.h.attr_mod > 1) {
            s.data.fill(0);
            return wire::MAD_STATUS_INVALID_FIELD;
        }
        std::array<uint8_t, 16> t{};
        if (set) {
            wire::decode_sl2vl(s.data.data(), t.data());
            const unsigned vls = port_->data_vls();
            if (std::any_of(t.begin(), t.end(), [vls](uint8_t v) { return v >= vls && v != 15; }))
                status = wire::MAD_STATUS_INVALID_FIELD;  // not a data VL of the link: not applied
            else
                port_->set_sl2vl(t);
        }
        wire::encode_sl2vl(port_->sl2vl_table().data(), s.data.data());
        return status;
    }
    // VLArbitrationTable: the modifier is block << 16 | port.
    std::vector<vlarb_entry> high, low;
    if ((s.h.attr_mod & 0xFFFF) > 1 ||
        !vlarb_smp_block(port_->arbiter(), s.h.attr_mod >> 16, set, s.data.data(), high, low)) {
        s.data.fill(0);
        return wire::MAD_STATUS_INVALID_FIELD;
    }
    if (set) port_->set_vlarb(std::move(high), std::move(low));
    return wire::MAD_STATUS_OK;
}

void sma::bad_pkey(const rx_packet& p, uint16_t local_key) {
    if (!pkey_traps || !sm_lid_) return;
    const uint16_t key = p.h.b.pkey;
    if (mcast_pkey_trap_suppression && p.h.l.dlid >= wire::MULTICAST_LID_BASE &&
        p.h.l.dlid != wire::PERMISSIVE_LID && !(key & 0x8000) && !(local_key & 0x8000) &&
        (key & 0x7FFF) == (local_key & 0x7FFF) && (key & 0x7FFF)) {
        ++traps_suppressed;  // o10-55.1.1: both limited members of the same partition
        return;
    }
    if (pending_) ++traps_replaced;  // o10-56: the newer mismatch's data replaces the stored data
    pending_ = true;
    trap_.lid1 = p.h.l.slid;
    trap_.lid2 = p.h.l.dlid;
    trap_.pkey = key;
    trap_.sl = p.h.l.sl;
    trap_.qp1 = wire::layout_of(p.h.b.opcode).deth ? p.h.d.src_qp : 0;
    trap_.qp2 = p.h.b.dest_qp;
    if (p.h.has_grh) {
        trap_.gid1 = p.h.g.sgid;
        trap_.gid2 = p.h.g.dgid;
    } else {
        trap_.gid1.fill(0);
        trap_.gid2.fill(0);
    }
    const sc_time now = sc_time_stamp();
    const sc_time at = std::max(now + process_, next_trap_);
    trap_ev_.notify(at - now);
}

void sma::send_trap() {
    if (!pending_) return;
    const sc_time now = sc_time_stamp();
    if (now < next_trap_) {
        trap_ev_.notify(next_trap_ - now);
        return;
    }
    wire::smp s;
    s.h.method = wire::MAD_METHOD_TRAP;
    s.h.tid = ++trap_tid_;
    s.h.attr_id = wire::SMP_ATTR_NOTICE;
    trap_.issuer_lid = lid_;
    trap_.toggle_count = toggle_ ? 0x8000 : 0;  // NoticeToggle alternates; NoticeCount is 0 for traps
    toggle_ = !toggle_;
    wire::encode(trap_, s.data.data());
    const size_t len = wire::encode_smp_packet(sm_lid_, lid_, 0, s, tx_.bytes);
    pending_ = false;
    next_trap_ = now + trap_interval_;
    if (!len || !port_) return;
    port_->transmit(tx_, uint32_t(len), SC_ZERO_TIME);
    ++traps_sent;
}

}  // namespace hcasim
