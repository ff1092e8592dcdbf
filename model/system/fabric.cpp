#include "model/system/fabric.h"

#include <algorithm>
#include <filesystem>

#include "model/core/sim_time.h"

namespace hcasim {

using namespace sc_core;

fabric::fabric(sc_module_name name)
    : sc_module(name),
      nodes("nodes", 2, "hosts", "number of nodes (hosts with one HCA each)", {1, 1024}),
      topology("topology", "auto", "", "auto: back to back for 2 nodes, else one switch",
               {"auto", "back_to_back", "switch"}),
      lmc("lmc", 0, "bits",
          "LID mask count of every port (C10-3): node i's base LID is (i+1)*2^lmc and it owns 2^lmc LIDs",
          {0, 7}),
      subnet_manager(
          "subnet_manager", true, "",
          "switch topology: attach a subnet manager (LID (nodes + 1) * 2^lmc) to an extra switch port") {
    // Unicast LIDs end at 0xBFFF: the last node's range must fit.
    if (uint32_t(nodes.get() + 1) << lmc.get() > 0xC000u)
        throw config_error("fabric.lmc=" + std::to_string(lmc.get()) + " with fabric.nodes=" +
                           std::to_string(nodes.get()) + ": the LIDs of " + std::to_string(nodes.get()) +
                           " nodes of 2^lmc LIDs each pass the last unicast LID (0xBFFF)");
    if (topology.get() == "back_to_back" && nodes != 2)
        throw config_error("fabric.topology=back_to_back needs fabric.nodes=2 (have " +
                           std::to_string(nodes.get()) + ")");
    if (topology.get() == "switch" || (topology.get() == "auto" && nodes != 2)) {
        const unsigned need = nodes + (subnet_manager ? 1 : 0);
        if (need > switch_config.radix)
            throw config_error(
                "fabric.topology=switch with fabric.nodes=" + std::to_string(nodes.get()) +
                (subnet_manager ? " and its subnet manager" : "") + " needs " + std::to_string(need) +
                " switch ports, but fabric.switch.radix=" + std::to_string(switch_config.radix.get()));
        sw = std::make_unique<ib_switch>("switch", switch_config.radix, switch_config);
        if (subnet_manager) sm = std::make_unique<hcasim::subnet_manager>("sm");
    }
}

namespace {
/// A flow-control packet's serialisation (6 bytes) at `rate_gbps`: part of every credit return.
sc_time fc_packet_time(double rate_gbps) { return ps_time(6 * 8000.0 / rate_gbps); }

/// `tx`'s credits are `rx`'s receive buffers over a cable of `tx`'s propagation: what rx
/// receives gives credit back to tx.
void connect_credits(node& tx, node& rx, unsigned vls) {
    const double rate = tx.adapter.port0.rate_gbps();
    const sc_time credit_delay = fc_packet_time(rate) + sc_time(rx.cable.propagation_ns.get(), SC_NS);
    port& t = tx.adapter.port0;
    port& r = rx.adapter.port0;
    t.set_flow_control(vls, r.vl_buffer_bytes);
    r.give_credit_to(&t.tx_credits(), credit_delay);
    tx.cable.faults.resync_credits(&t.tx_credits(), credit_delay);
}
}  // namespace

machine::machine() {
    for (unsigned i = 0; i < net.nodes; ++i) {
        hosts.push_back(std::make_unique<node>(("node" + std::to_string(i)).c_str(), i));
        hosts.back()->set_lmc(uint8_t(net.lmc.get()));  // LMC-aligned base LIDs, as the SM assigns
    }
    if (!net.has_switch()) {
        node& a = *hosts[0];
        node& b = *hosts[1];
        // Link negotiation: both ends run at the lower of the two capabilities.
        const double rate = std::min(a.cable.data_rate_gbps(), b.cable.data_rate_gbps());
        const unsigned width = std::min(a.cable.width.get(), b.cable.width.get());
        const unsigned speed = std::min(a.cable.speed_code(), b.cable.speed_code());
        a.cable.out.bind(b.adapter.port0.rx);
        b.cable.out.bind(a.adapter.port0.rx);
        a.adapter.set_link(rate, width, speed, a.lid(), a.lmc());
        b.adapter.set_link(rate, width, speed, b.lid(), b.lmc());
        // Flow control: each port's credits are the other's receive buffers.
        const unsigned vls = std::min(a.cable.data_vls.get(), b.cable.data_vls.get());
        connect_credits(a, b, vls);
        connect_credits(b, a, vls);
        // A dead direction takes the link down: both ports see it (IBA link training fails).
        const double da = a.cable.down_at_ns, db = b.cable.down_at_ns;
        if (da >= 0 || db >= 0) {
            const double at = da < 0 ? db : db < 0 ? da : std::min(da, db);
            a.adapter.link_down_at(sc_time(at, SC_NS));
            b.adapter.link_down_at(sc_time(at, SC_NS));
        }
        return;
    }
    ib_switch& sw = *net.sw;
    std::vector<uint8_t> lft(0xC000, 0xFF);
    for (unsigned i = 0; i < hosts.size(); ++i) {
        node& n = *hosts[i];
        const unsigned p = i + 1;
        sw.bind_port(p, n.cable.out, n.adapter.port0.rx);
        const double rate = n.cable.data_rate_gbps();
        n.adapter.set_link(rate, n.cable.width, n.cable.speed_code(), n.lid(), n.lmc());
        // The switch's output toward node i is the other direction of node i's cable.
        const sc_time prop(n.cable.propagation_ns.get(), SC_NS);
        const unsigned vls = std::min(n.cable.data_vls.get(), net.switch_config.data_vls.get());
        const sc_time credit_delay = fc_packet_time(rate) + prop;
        sw.set_link(p, rate, prop, n.cable.fault_config(), vls, n.adapter.port0.vl_buffer_bytes,
                    &n.adapter.port0.tx_credits(), credit_delay);
        n.adapter.port0.set_flow_control(vls, net.switch_config.vl_buffer_bytes);
        n.adapter.port0.give_credit_to(&sw.out_credits(p), credit_delay);
        n.cable.faults.resync_credits(&n.adapter.port0.tx_credits(), credit_delay);
        for (uint32_t k = 0; k < (1u << n.lmc()); ++k) lft[n.lid() + k] = uint8_t(p);
        if (n.cable.down_at_ns >= 0) n.adapter.link_down_at(sc_time(n.cable.down_at_ns.get(), SC_NS));
        // Multicast membership: when the HCA's first QP joins a group (or its last leaves), the
        // switch port toward it joins (leaves) the group's forwarding entry. This stands in for
        // the subnet administrator's MCMemberRecord join and the SM programming the switch.
        ib_switch* swp = net.sw.get();
        n.adapter.mcast.on_change([swp, p](uint16_t mlid, bool joined) {
            if (joined)
                swp->join_mcast(mlid, p);
            else
                swp->leave_mcast(mlid, p);
        });
    }
    if (net.has_sm()) {
        // The subnet manager: the switch's last port, the LMC-aligned LID after the nodes'
        // ((nodes + 1) * 2^lmc); every port knows it as its master SM (PortInfo MasterSMLID:
        // where traps go).
        subnet_manager& sm = *net.sm;
        const unsigned p = unsigned(hosts.size());
        const uint32_t sm_base = uint32_t(p + 1) << net.lmc.get();
        if (sm_base > 0xBFFFu)
            throw config_error("fabric.lmc=" + std::to_string(net.lmc.get()) + " with fabric.nodes=" +
                               std::to_string(p) + ": no unicast LID is left for the subnet manager");
        const uint16_t sm_lid = uint16_t(sm_base);
        sw.bind_port(p + 1, sm.tx, sm.rx);
        // The SM sends and receives SMPs only (VL15): no credits either way.
        sw.set_link(p + 1, sm.rate_gbps, sc_time(sm.propagation_ns.get(), SC_NS), fault_settings{}, 1, 0,
                    nullptr, SC_ZERO_TIME);
        lft[sm_lid] = uint8_t(p + 1);
        sm.set_lid(sm_lid);
        for (unsigned i = 0; i < hosts.size(); ++i) {
            sm.add_node(i, hosts[i]->lid());
            hosts[i]->adapter.set_sm_lid(sm_lid);
        }
    }
    sw.set_lft(std::move(lft));
}

void machine::capture_to(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir))
        throw config_error("--pcap: cannot create directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
    auto open = [&](const std::string& file) {
        captures_.push_back(std::make_unique<wire_capture>((std::filesystem::path(dir) / file).string()));
        return captures_.back().get();
    };
    if (!net.has_switch()) {
        // One cable: direction 0 what node 0 sends, 1 what node 1 sends.
        wire_capture* w = open("link0.pcap");
        hosts[0]->cable.capture_to(w, 0, hosts[0]->adapter.port0.rate_gbps());
        hosts[1]->cable.capture_to(w, 1, hosts[1]->adapter.port0.rate_gbps());
        return;
    }
    for (unsigned i = 0; i < hosts.size(); ++i) {
        wire_capture* w = open("link" + std::to_string(i) + ".pcap");
        hosts[i]->cable.capture_to(w, 0, hosts[i]->adapter.port0.rate_gbps());
        net.sw->capture_to(i + 1, w, 1);
    }
    if (net.has_sm()) {
        wire_capture* w = open("link_sm.pcap");
        net.sm->capture_to(w);
        net.sw->capture_to(unsigned(hosts.size()) + 1, w, 1);
    }
}

std::string machine::close_captures() {
    std::string failed;
    for (auto& c : captures_) {
        const std::string e = c->close();
        if (failed.empty()) failed = e;
    }
    return failed;
}

}  // namespace hcasim
