#include "model/fabric/subnet_manager.h"

#include <algorithm>

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
      program("program", "direct", "",
              "how the switches' forwarding, SL-to-VL and VL arbitration tables are written: direct (at "
              "elaboration, no simulated time) or smp (directed-route SMPs from the SM before any traffic)",
              {"direct", "smp"}),
      smps_sent("smps_sent", "SMPs sent (SubnGet, SubnSet)"),
      responses("responses", "GetResp received for an outstanding SMP"),
      traps("traps", "traps received (Trap 257, Bad P_Key)"),
      timeouts("timeouts", "SMPs without a GetResp in response_timeout_us"),
      rx_errors("rx_errors", "packets received that are no SMP (bad CRC, not QP0, not SubnMgmt)") {
    rx.register_b_transport(this, &subnet_manager::rx_b_transport);
    gp_.set_command(tlm::TLM_WRITE_COMMAND);
    if (program.get() == "smp") {
        programmed_ = false;
        SC_THREAD(sweep);
    }
}

int subnet_manager::transact(unsigned node, wire::smp& req, wire::smp* resp) {
    const auto it = node_lid_.find(node);
    if (it == node_lid_.end()) return -1;
    return exchange(it->second, req, resp);
}

int subnet_manager::transact_dr(const std::vector<uint8_t>& path, wire::smp& req, wire::smp* resp) {
    if (path.empty() || path.size() > wire::SMP_MAX_HOPS) return -1;
    req.h.mgmt_class = wire::MGMT_CLASS_SUBN_DIRECTED_ROUTE;
    req.h.status = 0;
    req.dr_slid = req.dr_dlid = wire::PERMISSIVE_LID;
    req.initial_path.fill(0);
    req.return_path.fill(0);
    std::copy(path.begin(), path.end(), req.initial_path.begin() + 1);
    // The SM's own send step (C14-9:1): the pointer goes from 0 to 1, out by InitialPath[1].
    req.set_hops(1, uint8_t(path.size()));
    const int st = exchange(wire::PERMISSIVE_LID, req, resp);
    return st < 0 ? st : st & ~wire::SMP_DIRECTION;
}

int subnet_manager::exchange(uint16_t dlid, wire::smp& req, wire::smp* resp) {
    req.h.tid = next_tid_++;
    const size_t before = wire::encode_smp_packet(dlid, lid_, 0, req, tx_pkt_.bytes);
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

uint16_t subnet_manager::fdb_top(const std::vector<uint8_t>& lft) {
    size_t top = std::min<size_t>(lft.size(), 0xC000);
    while (top > 0 && lft[top - 1] == 0xFF) --top;
    return uint16_t(top ? top - 1 : 0);
}

unsigned subnet_manager::smps_for(const switch_plan& p) {
    // NodeInfo, SwitchInfo, LFT blocks (a switch); then the tables.
    unsigned n = p.node >= 0 ? 0 : 2 + fdb_top(p.lft) / wire::LFT_LIDS_PER_BLOCK + 1;
    n += unsigned(p.sl2vl.size());
    for (const auto& v : p.vlarb) n += v.high.size() > wire::VLARB_ENTRIES_PER_BLOCK ? 2 : 1;
    for (const auto& v : p.vlarb) n += v.low.size() > wire::VLARB_ENTRIES_PER_BLOCK ? 2 : 1;
    return n;
}

void subnet_manager::plan_sweep(std::vector<switch_plan> plans,
                                std::function<void(const std::string&)> on_error) {
    plans_ = std::move(plans);
    on_error_ = std::move(on_error);
}

void subnet_manager::sweep() {
    const std::string why = program_switches(plans_);
    if (!why.empty()) {
        if (on_error_) on_error_(why);
        return;
    }
    programmed_ = true;
    programmed_at_ = sc_time_stamp();
    programmed_ev_.notify(SC_ZERO_TIME);
}

void subnet_manager::wait_programmed() {
    while (!programmed_) wait(programmed_ev_);
}

std::string subnet_manager::program_switches(const std::vector<switch_plan>& plans) {
    for (const switch_plan& p : plans) {
        const bool hca = p.node >= 0;
        std::string route;
        for (uint8_t port : p.path) route += (route.empty() ? "" : ",") + std::to_string(port);
        const std::string where =
            hca ? "subnet manager: HCA '" + p.name + "' (LID routed)"
                : "subnet manager: switch '" + p.name + "' (directed route " + route + ")";
        // One SMP and its GetResp (in `got`); the response's data must echo what was set.
        wire::smp got;
        auto smp_to = [&](uint8_t method, uint16_t attr, uint32_t mod, const uint8_t* data,
                          const char* what) -> std::string {
            wire::smp req, resp;
            req.h.method = method;
            req.h.attr_id = attr;
            req.h.attr_mod = mod;
            if (data) std::copy(data, data + wire::SMP_DATA_BYTES, req.data.begin());
            const int st = hca ? transact(unsigned(p.node), req, &resp) : transact_dr(p.path, req, &resp);
            if (st < 0) return where + ": no GetResp to " + what + " in fabric.sm.response_timeout_us";
            if (st != wire::MAD_STATUS_OK)
                return where + ": " + what + " answered with MAD status " + std::to_string(st);
            if (data && !std::equal(data, data + wire::SMP_DATA_BYTES, resp.data.begin()))
                return where + ": " + what + " did not take (the GetResp shows other values)";
            got = resp;
            return "";
        };
        std::string e;
        std::array<uint8_t, wire::SMP_DATA_BYTES> d{};
        if (!hca) {  // an HCA's agent knows its VL tables only
            e = smp_to(wire::MAD_METHOD_GET, wire::SMP_ATTR_NODE_INFO, 0, nullptr, "SubnGet(NodeInfo)");
            if (!e.empty()) return e;
            const wire::node_info n = wire::decode_node_info(got.data.data());
            if (n.node_type != wire::NODE_TYPE_SWITCH || n.node_guid != p.guid)
                return where + ": NodeInfo shows node type " + std::to_string(n.node_type) + ", another node";
            const uint16_t top = fdb_top(p.lft);
            for (unsigned b = 0; b <= top / wire::LFT_LIDS_PER_BLOCK; ++b) {
                for (unsigned k = 0; k < wire::LFT_LIDS_PER_BLOCK; ++k) {
                    const size_t lid = b * wire::LFT_LIDS_PER_BLOCK + k;
                    d[k] = lid < p.lft.size() ? p.lft[lid] : 0xFF;
                }
                e = smp_to(wire::MAD_METHOD_SET, wire::SMP_ATTR_LINEAR_FDB, b, d.data(),
                           ("SubnSet(LinearForwardingTable) block " + std::to_string(b)).c_str());
                if (!e.empty()) return e;
            }
            wire::switch_info si;
            si.linear_fdb_top = top;
            wire::smp req, resp;
            req.h.method = wire::MAD_METHOD_SET;
            req.h.attr_id = wire::SMP_ATTR_SWITCH_INFO;
            wire::encode(si, req.data.data());
            const int st = transact_dr(p.path, req, &resp);
            if (st != wire::MAD_STATUS_OK || wire::decode_switch_info(resp.data.data()).linear_fdb_top != top)
                return where + ": SubnSet(SwitchInfo) with LinearFDBTop " + std::to_string(top) + " failed";
        }
        for (const auto& t : p.sl2vl) {
            wire::encode_sl2vl(t.table.data(), d.data());
            e = smp_to(wire::MAD_METHOD_SET, wire::SMP_ATTR_SL2VL_TABLE, t.in << 8 | t.out, d.data(),
                       ("SubnSet(SLtoVLMappingTable) of port " + std::to_string(t.out) +
                        (hca ? "" : " from port " + std::to_string(t.in)))
                           .c_str());
            if (!e.empty()) return e;
        }
        // The high table first: the low one set empty with the high one still empty would
        // leave the port its default low table (vl_arbiter.h).
        for (const auto& v : p.vlarb)
            for (unsigned block : {3u, 4u, 1u, 2u}) {
                const std::vector<vlarb_entry>& t = block >= 3 ? v.high : v.low;
                const size_t first = (block - 1) % 2 * wire::VLARB_ENTRIES_PER_BLOCK;
                if (first && t.size() <= first) continue;
                wire::vlarb_pair pairs[wire::VLARB_ENTRIES_PER_BLOCK];
                for (size_t k = 0; k < wire::VLARB_ENTRIES_PER_BLOCK && first + k < t.size(); ++k)
                    pairs[k] = {uint8_t(t[first + k].vl), uint8_t(t[first + k].weight)};
                d.fill(0);
                wire::encode_vlarb_block(pairs, d.data());
                e = smp_to(wire::MAD_METHOD_SET, wire::SMP_ATTR_VLARB_TABLE, block << 16 | v.port, d.data(),
                           ("SubnSet(VLArbitrationTable) block " + std::to_string(block) + " of port " +
                            std::to_string(v.port))
                               .c_str());
                if (!e.empty()) return e;
            }
    }
    return "";
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
