#include "model/system/fabric.h"

#include <algorithm>
#include <filesystem>

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
        sw = std::make_unique<ib_switch>("switch", nodes + (subnet_manager ? 1 : 0));
        if (subnet_manager) sm = std::make_unique<hcasim::subnet_manager>("sm");
    }
}

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
        // A dead direction takes the link down: both ports see it (IBA link training fails).
        const double da = a.cable.down_at_ns, db = b.cable.down_at_ns;
        if (da >= 0 || db >= 0) {
            const double at = da < 0 ? db : db < 0 ? da : std::min(da, db);
            a.adapter.link_down_at(sc_time(at, SC_NS));
            b.adapter.link_down_at(sc_time(at, SC_NS));
        }
        return;
    }
    for (unsigned i = 0; i < hosts.size(); ++i) {
        node& n = *hosts[i];
        n.cable.out.bind(net.sw->in);
        net.sw->out.bind(n.adapter.port0.rx);
        const double rate = n.cable.data_rate_gbps();
        n.adapter.set_link(rate, n.cable.width, n.cable.speed_code(), n.lid(), n.lmc());
        // The switch's output toward node i is the other direction of node i's cable.
        net.sw->set_route(i, n.lid(), rate, sc_time(n.cable.propagation_ns.get(), SC_NS),
                          n.cable.fault_config(), n.lmc());
        if (n.cable.down_at_ns >= 0) n.adapter.link_down_at(sc_time(n.cable.down_at_ns.get(), SC_NS));
        // Multicast membership: when the HCA's first QP joins a group (or its last leaves), the
        // switch port toward it joins (leaves) the group's forwarding entry. This stands in for
        // the subnet administrator's MCMemberRecord join and the SM programming the switch.
        ib_switch* sw = net.sw.get();
        n.adapter.mcast.on_change([sw, i](uint16_t mlid, bool joined) {
            if (joined)
                sw->join_mcast(mlid, i);
            else
                sw->leave_mcast(mlid, i);
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
        sm.tx.bind(net.sw->in);
        net.sw->out.bind(sm.rx);
        net.sw->set_route(p, sm_lid, sm.rate_gbps, sc_time(sm.propagation_ns.get(), SC_NS), fault_settings{});
        sm.set_lid(sm_lid);
        for (unsigned i = 0; i < hosts.size(); ++i) {
            sm.add_node(i, hosts[i]->lid());
            hosts[i]->adapter.set_sm_lid(sm_lid);
        }
    }
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
        net.sw->capture_to(i, w, 1);
    }
    if (net.has_sm()) {
        wire_capture* w = open("link_sm.pcap");
        net.sm->capture_to(w);
        net.sw->capture_to(unsigned(hosts.size()), w, 1);
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
