#include "model/fabric/subnet_manager.h"

#include "tlm_if/tlm_ext.h"

namespace hcasim {

using namespace sc_core;

subnet_manager::subnet_manager(const sc_module_name& name)
    : sc_module(name),
      tx("tx"),
      rx("rx"),
      rate_gbps("rate_gbps", 100.0, "Gb/s", "data rate of the subnet manager's link to the switch",
                {0.1, 10000}),
      propagation_ns("propagation_ns", 10.0, "ns", "propagation delay of the subnet manager's cable",
                     {0, 1e6}),
      response_timeout_us("response_timeout_us", 1000.0, "us", "how long the SM waits for a GetResp",
                          {0.001, 1e9}),
      smps_sent("smps_sent", "SMPs sent (SubnGet, SubnSet)"),
      responses("responses", "GetResp received for an outstanding SMP"),
      traps("traps", "traps received (Trap 257, Bad P_Key)"),
      timeouts("timeouts", "SMPs without a GetResp in response_timeout_us"),
      rx_errors("rx_errors", "packets received that are no SMP (bad CRC, not QP0, not SubnMgmt)") {
    rx.register_b_transport(this, &subnet_manager::rx_b_transport);
    gp_.set_command(tlm::TLM_WRITE_COMMAND);
}

int subnet_manager::transact(unsigned node, wire::smp& req, wire::smp* resp) {
    const auto it = node_lid_.find(node);
    if (it == node_lid_.end()) return -1;
    req.h.tid = next_tid_++;
    const size_t before = wire::encode_smp_packet(it->second, lid_, 0, req, tx_pkt_.bytes);
    tx_pkt_.len = uint32_t(wire::seal_packet(tx_pkt_.bytes, before));
    sent_.emplace_back(tx_pkt_.bytes, tx_pkt_.bytes + tx_pkt_.len);
    ++smps_sent;
    // Serialised on the SM's link, then the cable.
    const sc_time now = sc_time_stamp();
    sc_time start = wire_free_ > now ? wire_free_ : now;
    wire_free_ = start + sc_time(double(tx_pkt_.len) * 8000.0 / rate_gbps, SC_PS);
    if (capture_) capture_->record(0, start, tx_pkt_.bytes, tx_pkt_.len, crc_state::sealed);
    sc_time delay = wire_free_ - now + sc_time(propagation_ns.get(), SC_NS);
    gp_.set_address(0);
    gp_.set_data_ptr(tx_pkt_.bytes);
    gp_.set_data_length(tx_pkt_.len);
    gp_.set_streaming_width(tx_pkt_.len);
    gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    waiting_tid_ = req.h.tid;
    answered_ = false;
    tx->b_transport(gp_, delay);
    wait(sc_time(response_timeout_us.get(), SC_US), answer_ev_);
    waiting_tid_ = 0;
    if (!answered_) {
        ++timeouts;
        return -1;
    }
    if (resp) *resp = answer_;
    return answer_.h.status;
}

bool subnet_manager::get_pkey_block(unsigned node, unsigned block,
                                    std::array<uint16_t, wire::PKEYS_PER_BLOCK>& keys) {
    wire::smp req, resp;
    req.h.method = wire::MAD_METHOD_GET;
    req.h.attr_id = wire::SMP_ATTR_PKEY_TABLE;
    req.h.attr_mod = block;
    if (transact(node, req, &resp) != wire::MAD_STATUS_OK) return false;
    wire::decode_pkey_block(resp.data.data(), keys.data());
    shadow_[{node, block}] = keys;
    return true;
}

bool subnet_manager::set_pkey(unsigned node, unsigned index, uint16_t key) {
    const unsigned block = index / wire::PKEYS_PER_BLOCK, slot = index % wire::PKEYS_PER_BLOCK;
    auto it = shadow_.find({node, block});
    if (it == shadow_.end()) {
        std::array<uint16_t, wire::PKEYS_PER_BLOCK> keys{};
        if (!get_pkey_block(node, block, keys)) return false;
        it = shadow_.find({node, block});
    }
    std::array<uint16_t, wire::PKEYS_PER_BLOCK> keys = it->second;
    keys[slot] = key;
    wire::smp req, resp;
    req.h.method = wire::MAD_METHOD_SET;
    req.h.attr_id = wire::SMP_ATTR_PKEY_TABLE;
    req.h.attr_mod = block;
    wire::encode_pkey_block(keys.data(), req.data.data());
    if (transact(node, req, &resp) != wire::MAD_STATUS_OK) return false;
    wire::decode_pkey_block(resp.data.data(), keys.data());
    it->second = keys;  // the table as the agent has it now
    return keys[slot] == key;
}

void subnet_manager::rx_b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    record r;
    // The SM keeps the exact wire bytes: a packet whose sender left its CRCs to be computed
    // (crc_intact_ext, unsealed) is sealed here, in the record's copy.
    r.bytes.assign(gp.get_data_ptr(), gp.get_data_ptr() + gp.get_data_length());
    if (crc_state_of(gp) == crc_state::unsealed && r.bytes.size() >= 6)
        wire::seal_packet(r.bytes.data(), r.bytes.size() - 6);
    const uint8_t* bytes = r.bytes.data();
    const size_t len = r.bytes.size();
    size_t off = 0, plen = 0;
    if (wire::parse_packet(bytes, len, r.h, off, plen) != wire::parse_status::ok ||
        r.h.b.opcode != wire::op::UD_SEND_ONLY || r.h.b.dest_qp != 0 ||
        !wire::is_subn_mgmt(bytes + off, plen) || plen < wire::MAD_BYTES) {
        ++rx_errors;
        return;
    }
    r.at = sc_time_stamp() + delay;
    r.mad = wire::decode_smp(bytes + off);
    if (r.mad.h.method == wire::MAD_METHOD_TRAP) {
        trap_record t;
        static_cast<record&>(t) = r;
        wire::decode_notice_bad_pkey(t.mad.data.data(), t.notice);
        traps_.push_back(std::move(t));
        ++traps;
        trap_event.notify(delay);
        return;
    }
    if (r.mad.h.method == wire::MAD_METHOD_GET_RESP && waiting_tid_ && r.mad.h.tid == waiting_tid_) {
        ++responses;
        answer_ = r.mad;
        answered_ = true;
        answer_ev_.notify(delay);
    }
    responses_.push_back(std::move(r));
}

}  // namespace hcasim
