#include "model/fabric/switch_sma.h"

#include <algorithm>

#include "model/fabric/ib_switch.h"

namespace hcasim {

using namespace sc_core;

switch_sma::switch_sma(ib_switch& sw, uint16_t lid, uint64_t guid, const sc_time& process)
    : sw_(sw), lid_(lid), guid_(guid), process_(process) {}

void switch_sma::receive(unsigned in, const uint8_t* bytes, uint32_t len, crc_state crc, const sc_time& at) {
    wire::headers h;
    size_t off = 0, plen = 0;
    if (wire::parse_packet(bytes, len, h, off, plen, crc != crc_state::unsealed) != wire::parse_status::ok ||
        h.b.opcode != wire::op::UD_SEND_ONLY || h.b.dest_qp != 0 || !wire::is_subn_mgmt(bytes + off, plen) ||
        plen < wire::MAD_BYTES) {
        ++dropped;
        return;
    }
    wire::smp s = wire::decode_smp(bytes + off);
    const sc_time out_at = at + process_;
    const bool request = s.h.method == wire::MAD_METHOD_GET || s.h.method == wire::MAD_METHOD_SET;
    if (!s.directed()) {
        // LID routed: for this switch's LID; the answer goes to the requester's LID.
        const uint8_t out = sw_.lft_entry(h.l.slid);
        if (!request || h.l.dlid != lid_ || !sw_.linked(out)) {
            ++dropped;
            return;
        }
        process(s);
        send(out, h.l.slid, s, out_at);
        ++answered;
        return;
    }
    // Directed route (IBA 14.2.2.2): only the wholly directed form (DrSLID and DrDLID permissive).
    const unsigned hp = s.hop_pointer(), hc = s.hop_count();
    if (hc > wire::SMP_MAX_HOPS || s.dr_slid != wire::PERMISSIVE_LID || s.dr_dlid != wire::PERMISSIVE_LID) {
        ++dropped;
        return;
    }
    if (!s.returning()) {
        if (hp == 0 || hp > hc) {  // C14-9:1, C14-9:5: the sender increments the pointer; no more hops
            ++dropped;
            return;
        }
        s.return_path[hp] = uint8_t(in);
        if (hp < hc) {  // C14-9:2: an intermediate hop
            s.set_hops(uint8_t(hp + 1), uint8_t(hc));
            if (!sw_.linked(s.initial_path[hp + 1])) {
                ++dropped;
                return;
            }
            send(s.initial_path[hp + 1], wire::PERMISSIVE_LID, s, out_at);
            ++passed_on;
            return;
        }
        // C14-9:3: the end of the path, this switch's SMP.
        if (!request) {
            ++dropped;
            return;
        }
        process(s);
        s.h.status |= wire::SMP_DIRECTION;
        // C14-13:1: back by the port it came in on, the pointer at HopCount.
        send(in, wire::PERMISSIVE_LID, s, out_at);
        ++answered;
        return;
    }
    // C14-13:2: a response on its way back to the SM.
    if (hp < 2 || hp > hc || !sw_.linked(s.return_path[hp - 1])) {
        ++dropped;
        return;
    }
    s.set_hops(uint8_t(hp - 1), uint8_t(hc));
    send(s.return_path[hp - 1], wire::PERMISSIVE_LID, s, out_at);
    ++passed_on;
}

void switch_sma::process(wire::smp& s) {
    const bool set = s.h.method == wire::MAD_METHOD_SET;
    s.h.method = wire::MAD_METHOD_GET_RESP;
    s.h.status &= wire::SMP_DIRECTION;
    if (s.h.base_version != wire::MAD_BASE_VERSION || s.h.class_version != wire::SMP_CLASS_VERSION) {
        s.h.status |= wire::MAD_STATUS_BAD_VERSION;
        return;
    }
    switch (s.h.attr_id) {
    case wire::SMP_ATTR_NODE_INFO: {
        if (set) break;  // read only
        wire::node_info n;
        n.node_type = wire::NODE_TYPE_SWITCH;
        n.num_ports = uint8_t(sw_.ports());
        n.system_image_guid = n.node_guid = n.port_guid = guid_;
        n.partition_cap = 0;
        n.local_port = 0;  // an SMP always reaches a switch's port 0
        wire::encode(n, s.data.data());
        return;
    }
    case wire::SMP_ATTR_SWITCH_INFO: {
        // Only LinearFDBTop is settable here. IBA: packets to DLIDs above it are discarded; the
        // switch's table holds 0xFF (no route) there, so forwarding follows the table alone.
        if (set)
            fdb_top_ = std::min<uint16_t>(wire::decode_switch_info(s.data.data()).linear_fdb_top, 0xBFFF);
        wire::switch_info i;
        i.linear_fdb_cap = 0xC000;
        i.mcast_fdb_cap = 0x3FFF;
        i.linear_fdb_top = fdb_top_;
        i.default_port = 0;
        i.lids_per_port = 1;
        i.enhanced_port0 = false;
        wire::encode(i, s.data.data());
        return;
    }
    case wire::SMP_ATTR_LINEAR_FDB: return lft_block(s, set);
    case wire::SMP_ATTR_MCAST_FDB: return mft_block(s, set);
    case wire::SMP_ATTR_SL2VL_TABLE: return sl2vl_table(s, set);
    case wire::SMP_ATTR_VLARB_TABLE: return vlarb_block(s, set);
    default: break;
    }
    s.data.fill(0);
    s.h.status |= set && s.h.attr_id == wire::SMP_ATTR_NODE_INFO ? wire::MAD_STATUS_UNSUPPORTED_METHOD
                                                                 : wire::MAD_STATUS_UNSUPPORTED_ATTRIBUTE;
}

void switch_sma::lft_block(wire::smp& s, bool set) {
    // Block b holds LIDs 64b .. 64b + 63; unicast LIDs end at 0xBFFF (block 767).
    if (s.h.attr_mod >= 0xC000 / wire::LFT_LIDS_PER_BLOCK) {
        s.data.fill(0);
        s.h.status |= wire::MAD_STATUS_INVALID_FIELD;
        return;
    }
    const uint16_t first = uint16_t(s.h.attr_mod * wire::LFT_LIDS_PER_BLOCK);
    uint8_t ports[wire::LFT_LIDS_PER_BLOCK];
    if (set) {
        wire::decode_lft_block(s.data.data(), ports);
        for (unsigned k = 0; k < wire::LFT_LIDS_PER_BLOCK; ++k)
            sw_.set_lft_entry(uint16_t(first + k), ports[k]);
    }
    for (unsigned k = 0; k < wire::LFT_LIDS_PER_BLOCK; ++k) ports[k] = sw_.lft_entry(uint16_t(first + k));
    wire::encode_lft_block(ports, s.data.data());
}

void switch_sma::mft_block(wire::smp& s, bool set) {
    // Modifier: position (the 16-port slice) << 28 | block (MLIDs 0xC000 + 32 block ..); the
    // data: 32 big-endian port masks. Port 0 (bit 0 of position 0) is not a member here.
    const unsigned block = s.h.attr_mod & 0x1FF, position = s.h.attr_mod >> 28;
    if ((s.h.attr_mod & 0x0FFFFE00) || position * wire::MFT_PORTS_PER_MASK > sw_.ports()) {
        s.data.fill(0);
        s.h.status |= wire::MAD_STATUS_INVALID_FIELD;
        return;
    }
    for (unsigned k = 0; k < wire::MFT_MLIDS_PER_BLOCK; ++k) {
        const uint16_t mlid = uint16_t(0xC000 + block * wire::MFT_MLIDS_PER_BLOCK + k);
        const unsigned want = unsigned(s.data[2 * k] << 8 | s.data[2 * k + 1]);
        unsigned mask = 0;  // the members as they are now
        for (unsigned j = 0; j < wire::MFT_PORTS_PER_MASK; ++j) {
            const unsigned p = position * wire::MFT_PORTS_PER_MASK + j;
            if (p == 0 || p > sw_.ports()) continue;
            if (set) sw_.set_mcast(mlid, p, want >> j & 1);
            mask |= unsigned(sw_.mcast_member(mlid, p)) << j;
        }
        s.data[2 * k] = uint8_t(mask >> 8);
        s.data[2 * k + 1] = uint8_t(mask);
    }
    std::fill(s.data.begin() + 2 * wire::MFT_MLIDS_PER_BLOCK, s.data.end(), 0);
}

void switch_sma::sl2vl_table(wire::smp& s, bool set) {
    // A switch: modifier input port << 8 | output port, one table per pair (input 0: the
    // management port).
    const unsigned out = s.h.attr_mod & 0xFF, in = s.h.attr_mod >> 8 & 0xFF;
    if (out < 1 || out > sw_.ports() || in > sw_.ports() || (s.h.attr_mod >> 16) || !sw_.linked(out)) {
        s.data.fill(0);
        s.h.status |= wire::MAD_STATUS_INVALID_FIELD;
        return;
    }
    std::array<uint8_t, 16> t{};
    if (set) {
        wire::decode_sl2vl(s.data.data(), t.data());
        for (uint8_t v : t)
            if (v >= sw_.data_vls(out) && v != 15) {
                s.h.status |= wire::MAD_STATUS_INVALID_FIELD;  // not a data VL of the port
                set = false;
                break;
            }
        if (set) sw_.set_sl2vl(in, out, t);
    }
    wire::encode_sl2vl(sw_.sl2vl(in, out).data(), s.data.data());
}

void switch_sma::vlarb_block(wire::smp& s, bool set) {
    // Modifier block << 16 | output port.
    const unsigned block = s.h.attr_mod >> 16, out = s.h.attr_mod & 0xFFFF;
    std::vector<vlarb_entry> high, low;
    if (!sw_.linked(out) || !vlarb_smp_block(sw_.arbiter(out), block, set, s.data.data(), high, low)) {
        s.data.fill(0);
        s.h.status |= wire::MAD_STATUS_INVALID_FIELD;
        return;
    }
    if (set) sw_.set_vlarb(out, std::move(high), std::move(low));
}

void switch_sma::send(unsigned out, uint16_t dlid, const wire::smp& s, const sc_time& at) {
    const size_t before = wire::encode_smp_packet(dlid, lid_, 0, s, tx_);
    const size_t len = wire::seal_packet(tx_, before);
    if (!sw_.send_from_port0(out, tx_, uint32_t(len), at)) ++dropped;
}

}  // namespace hcasim
