#include "model/system/fabric.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ostream>

#include "model/core/sim_time.h"

namespace hcasim {

using namespace sc_core;

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

std::string speed_name(unsigned code) {
    static const char* const names[] = {"SDR", "DDR", "QDR", "FDR", "EDR", "HDR", "NDR"};
    return code < 7 ? names[code] : "EDR";
}
/// The SL-to-VL table of a port of `vls` data VLs before the SM sets one: SL mod `vls`.
std::array<uint8_t, 16> link_up_sl2vl(unsigned vls) {
    const std::vector<unsigned> t = parse_sl2vl("", "", vls);
    std::array<uint8_t, 16> a{};
    std::copy(t.begin(), t.end(), a.begin());
    return a;
}

/// Adds the VL tables configured by `k` (a switch's or HCA port's sl2vl, vlarb_high, vlarb_low
/// keys) for output `out` of `vls` data VLs to the SM's plan `p`, the SL-to-VL table for each
/// input of `ins` (a switch: every linked port, as OpenSM sets each pair; an HCA: {0});
/// nothing for unset keys.
template <class Keys>
void plan_vl_tables(subnet_manager::switch_plan& p, const std::vector<unsigned>& ins, unsigned out,
                    const Keys& k, unsigned vls) {
    if (!k.sl2vl.get().empty()) {
        const std::vector<unsigned> t = parse_sl2vl(k.sl2vl, k.sl2vl.key(), vls);
        std::array<uint8_t, 16> a{};
        std::copy(t.begin(), t.end(), a.begin());
        for (unsigned in : ins) p.sl2vl.push_back({in, out, a});
    }
    if (!k.vlarb_high.get().empty() || !k.vlarb_low.get().empty())
        p.vlarb.push_back({out, parse_vlarb(k.vlarb_high, k.vlarb_high.key(), vls),
                           parse_vlarb(k.vlarb_low, k.vlarb_low.key(), vls)});
}
}  // namespace

fabric::fabric(sc_module_name name, unsigned ranks, unsigned rank)
    : sc_module(name),
      nodes("nodes", 2, "hosts", "number of nodes (hosts with one HCA each); a topology file gives its own",
            {1, 16384}),
      topology("topology", "auto", "",
               "auto: back to back for 2 nodes, one switch while nodes + 1 fit its radix, else a fat tree; "
               "file: fabric.topology_file",
               {"auto", "back_to_back", "switch", "fat_tree", "file"}),
      topology_file("topology_file", "", "",
                    "fabric.topology=file: the fabric in the format ibnetdiscover prints"),
      fat_tree_levels("fat_tree.levels", 2, "levels",
                      "fat tree: switch levels (2 leaf/spine, 3 leaf/spine/core)", {2, 3}),
      fat_tree_oversubscription("fat_tree.oversubscription", 1.0, "",
                                "fat tree: down:up ports of a leaf (1 full bisection, 2 is 2:1)", {1, 64}),
      routing("routing", "minhop", "", "the subnet manager's routing engine, as OpenSM's",
              {"minhop", "updn", "ftree"}),
      lmc("lmc", 0, "bits",
          "LID mask count of every port (C10-3): node i's base LID is (i+1)*2^lmc and it owns 2^lmc LIDs",
          {0, 7}),
      subnet_manager("subnet_manager", true, "",
                     "attach a subnet manager (LID (nodes + 1) * 2^lmc) to the first free port of the first "
                     "switch"),
      sma_process_ns("switch.sma_process_ns", 1000.0, "ns",
                     "a switch's subnet management agent: an SMP for the switch (answered) or passing "
                     "through it on a directed route leaves this long after its last bit arrived, plus "
                     "the hop latency [unverified: switch management runs in firmware, microseconds]",
                     {0, 1e9}),
      isl_rate_gbps(
          "isl.rate_gbps", 0.0, "Gb/s",
          "data rate of every cable between two switches; 0: node 0's link (link.speed x link.width)",
          {0, 10000}),
      isl_propagation_ns("isl.propagation_ns", -1.0, "ns",
                         "propagation delay of every cable between two switches; -1: node 0's "
                         "link.propagation_ns",
                         {-1, 1e6}),
      isl_down_cable("isl.down_cable", "", "",
                     "SWITCH/PORT: the cable between switches at that switch's port (a switch's name as "
                     "in its counters: leaf0, spine1, or a topology file's description) goes down at "
                     "fabric.isl.down_at_ns, both directions"),
      isl_down_at_ns("isl.down_at_ns", -1.0, "ns",
                     "from this simulated time on fabric.isl.down_cable loses every packet; negative: never",
                     {-1, 1e15}),
      partition("partition", "auto", "",
                "a run over several processes (mpirun -np N): auto balances the nodes and cuts only "
                "cables between switches, or a file names each switch's rank (docs/fabric.md, "
                "Partitioned runs); ignored in one process"),
      rank_(rank) {
    if (isl_rate_gbps > 0 && isl_rate_gbps < 0.1)
        throw config_error("bad value '" + isl_rate_gbps.str() + "' for key '" + isl_rate_gbps.key() +
                           "': expected 0 (node 0's link) or 0.1..10000 Gb/s");
    if (isl_propagation_ns < 0 && isl_propagation_ns != -1)
        throw config_error("bad value '" + isl_propagation_ns.str() + "' for key '" +
                           isl_propagation_ns.key() + "': expected -1 (node 0's link) or 0..1e6 ns");
    // The graph, its LIDs and its routes: everything that can be wrong fails here, before
    // any node is built.
    cc = cc_keys.config();
    std::string kind = topology.get();
    const unsigned radix = switch_config.radix;
    if (kind == "auto")
        kind = nodes == 2                                    ? "back_to_back"
               : nodes + (subnet_manager ? 1u : 0u) <= radix ? "switch"
                                                             : "fat_tree";
    if (kind == "back_to_back") {
        if (nodes != 2)
            throw config_error("fabric.topology=back_to_back needs fabric.nodes=2 (have " +
                               std::to_string(nodes.get()) + ")");
        graph = make_back_to_back();
    } else if (kind == "switch") {
        graph = make_single_switch(nodes, radix, subnet_manager);
    } else if (kind == "fat_tree") {
        graph = make_fat_tree(nodes, fat_tree_levels, radix, fat_tree_oversubscription, subnet_manager);
    } else {
        if (topology_file.get().empty())
            throw config_error(
                "fabric.topology=file needs fabric.topology_file=FILE (an ibnetdiscover file)");
        graph = read_ibnetdiscover(topology_file);
        if (subnet_manager && graph.sm_node < 0 && !graph.switches().empty()) {
            // Attach the SM to the first free port of the first switch that has one.
            for (unsigned s : graph.switches()) {
                const topo_node& n = graph.nodes[s];
                unsigned p = 1;
                while (p <= n.ports() && n.peer[p].connected()) ++p;
                if (p > n.ports()) continue;
                const unsigned e = graph.add(topo_node::kind::hca, 1, "subnet manager",
                                             0x0002c90300000000ull + (uint64_t(graph.hosts() + 1) << 4));
                graph.nodes[e].is_sm = true;
                graph.connect(e, 1, s, p);
                graph.sm_node = int(e);
                break;
            }
            if (graph.sm_node < 0)
                throw config_error("fabric.topology_file=" + topology_file.get() +
                                   ": no switch has a free port for the subnet manager (set "
                                   "fabric.subnet_manager=false)");
        }
    }
    // Unicast LIDs end at 0xBFFF: the last endport's range must fit.
    if (uint32_t(graph.hosts() + 1) << lmc.get() > 0xC000u)
        throw config_error("fabric.lmc=" + std::to_string(lmc.get()) + " with fabric.nodes=" +
                           std::to_string(graph.hosts()) + ": the LIDs of " + std::to_string(graph.hosts()) +
                           " nodes of 2^lmc LIDs each pass the last unicast LID (0xBFFF)");
    assign_lids(graph, lmc);
    for (const topo_node& n : graph.nodes)
        if (n.is_switch() && n.ports() > 254)
            throw config_error("switch '" + n.desc + "' has " + std::to_string(n.ports()) +
                               " ports; a switch has at most 254");
    if (!graph.switches().empty()) {
        routes = route(graph, routing);
        const std::vector<std::pair<unsigned, unsigned>> cycle = dependency_cycle(graph, routes);
        if (!cycle.empty())
            SC_REPORT_INFO(this->name(), ("fabric.routing=" + routing.get() +
                                          " can deadlock on this fabric (a cycle of channels: " +
                                          describe_channels(graph, cycle) + ")")
                                             .c_str());
    }
    if (!isl_down_cable.get().empty() || isl_down_at_ns >= 0) {
        // "SWITCH/PORT": a switch of this fabric and one of its ports cabled to another switch.
        const std::string& v = isl_down_cable.get();
        const size_t slash = v.rfind('/');
        const std::string what = "fabric.isl.down_cable='" + v + "'";
        if (isl_down_at_ns < 0)
            throw config_error(what + " needs fabric.isl.down_at_ns (the time it goes down, >= 0)");
        if (v.empty()) throw config_error("fabric.isl.down_at_ns needs fabric.isl.down_cable=SWITCH/PORT");
        char* end = nullptr;
        const unsigned long port =
            slash == std::string::npos ? 0 : std::strtoul(v.c_str() + slash + 1, &end, 10);
        if (slash == std::string::npos || !end || *end || port == 0)
            throw config_error(what + ": expected SWITCH/PORT (e.g. spine0/1)");
        const std::string name = v.substr(0, slash);
        for (unsigned n = 0; n < graph.nodes.size(); ++n)
            if (graph.nodes[n].is_switch() && graph.nodes[n].desc == name) down_node_ = int(n);
        if (down_node_ < 0) throw config_error(what + ": no switch named '" + name + "'");
        const topo_node& sn = graph.nodes[unsigned(down_node_)];
        if (port > sn.ports() || sn.peer[port].node < 0 ||
            !graph.nodes[unsigned(sn.peer[port].node)].is_switch())
            throw config_error(what + ": port " + std::to_string(port) + " of " + name +
                               " is not cabled to another switch");
        down_port_ = unsigned(port);
    }
    part = make_partition(graph, ranks, partition.get());
    switch_index_.assign(graph.nodes.size(), -1);
    const std::vector<unsigned> sws = graph.switches();
    for (unsigned s : sws) {
        switch_index_[s] = int(switches.size());
        // One switch keeps today's name (counters fabric.switch.*); a fabric of them their own.
        const std::string n = sws.size() == 1 ? "switch" : graph.nodes[s].desc;
        switches.push_back(
            std::make_unique<ib_switch>(n.c_str(), graph.nodes[s].ports(), switch_config, &cc));
        agents.push_back(std::make_unique<switch_sma>(*switches.back(), graph.nodes[s].lid,
                                                      graph.nodes[s].guid, ns_time(sma_process_ns.get())));
        switches.back()->attach_agent(agents.back().get(), graph.nodes[s].lid);
    }
    if (!switches.empty()) sw = switches.front().get();
    if (switches.size() > 1) isl = std::make_unique<isl_channel>("isl", rank_);
    if (subnet_manager && graph.sm_node >= 0) sm = std::make_unique<hcasim::subnet_manager>("sm");
}

sc_time fabric::cut_horizon(const sc_time& now, const sc_time& next) const {
    if (!isl || !isl->any_cut()) return sc_max_time();
    sc_time t = sc_max_time();
    for (size_t k = 0; k < switches.size(); ++k) {
        const sc_time d = switches[k]->earliest_departure(now);
        if (d < t) t = d;
    }
    const sc_time lat = switches.front()->latency();
    if (next != sc_max_time() && next + lat < t) t = next + lat;
    // A packet the cables' queue delivers here may be dropped at once (its credit goes back then).
    if (isl->next_due() < t) t = isl->next_due();
    return t == sc_max_time() ? t : t + isl->min_cut_propagation();
}

machine::machine(unsigned rank, unsigned ranks) : net("fabric", ranks, rank) {
    const topology& g = net.graph;
    for (unsigned i = 0; i < g.hosts(); ++i) {
        hosts.push_back(std::make_unique<node>(("node" + std::to_string(i)).c_str(), i, &net.cc));
        hosts.back()->set_lmc(uint8_t(net.lmc.get()));  // LMC-aligned base LIDs, as the SM assigns
    }
    mcast_members_.resize(0xFFFF - 0xC000);
    for (unsigned a = 0; a < g.nodes.size(); ++a)
        for (unsigned pa = 1; pa <= g.nodes[a].ports(); ++pa) {
            const topo_end& e = g.nodes[a].peer[pa];
            if (e.connected() && (unsigned(e.node) > a || (unsigned(e.node) == a && e.port > pa)))
                cable(a, pa, unsigned(e.node), e.port);
        }
    // The SM's routes. fabric.sm.program=direct: written here, as the SM's
    // SubnSet(LinearForwardingTable) would (no simulated time). smp: the switches start with
    // empty forwarding tables and the link-up VL tables (SL mod VLs, every VL weight 255),
    // and the SM's sweep programs them with SMPs before any application sends.
    const bool by_smp = net.has_sm() && net.sm->program.get() == "smp";
    for (unsigned s : g.switches()) {
        ib_switch& sw = net.switch_at(s);
        if (by_smp)
            for (unsigned p = 1; p <= sw.ports(); ++p) {
                if (!sw.linked(p)) continue;
                sw.set_sl2vl(p, link_up_sl2vl(sw.data_vls(p)));
                sw.set_vlarb(p, {}, {});
            }
        else {
            sw.set_lft(net.routes.lft[s]);
            net.agent_at(s).set_linear_fdb_top(subnet_manager::fdb_top(net.routes.lft[s]));
        }
        sw.on_stall([this, s](ib_switch&, unsigned port) { check_deadlock(s, port); });
    }
    if (by_smp)
        for (auto& h : hosts) {  // the HCA ports' link-up VL tables too, until the SM's sweep
            h->adapter.port0.set_sl2vl(link_up_sl2vl(h->adapter.port0.data_vls()));
            h->adapter.port0.set_vlarb({}, {});
        }
    if (by_smp)
        net.sm->plan_sweep(sweep_plan(), [this](const std::string& why) {
            fabric_error_ = why;
            sc_stop();
        });
    // A spanning tree of the switches (breadth first from the first one), for multicast.
    tree_parent_port_.assign(g.nodes.size(), -1);
    if (net.has_switch()) {
        std::vector<bool> seen(g.nodes.size(), false);
        std::vector<unsigned> todo{g.switches().front()};
        seen[todo[0]] = true;
        for (size_t k = 0; k < todo.size(); ++k) {
            const topo_node& n = g.nodes[todo[k]];
            for (unsigned p = 1; p <= n.ports(); ++p) {
                const topo_end& e = n.peer[p];
                if (!e.connected() || seen[unsigned(e.node)] || !g.nodes[unsigned(e.node)].is_switch())
                    continue;
                seen[unsigned(e.node)] = true;
                tree_parent_port_[unsigned(e.node)] = int(e.port);
                todo.push_back(unsigned(e.node));
            }
        }
        for (unsigned i = 0; i < hosts.size(); ++i)
            // Multicast membership: when the HCA's first QP joins a group (or its last leaves),
            // the switches' forwarding entries follow. This stands in for the subnet
            // administrator's MCMemberRecord join and the SM programming the switches.
            hosts[i]->adapter.mcast.on_change([this, i](uint16_t mlid, bool joined) {
                if (mlid < 0xC000 || mlid == 0xFFFF) return;
                std::vector<unsigned>& m = mcast_members_[mlid - 0xC000];
                if (m.empty()) m.assign(hosts.size(), 0);
                if (joined)
                    ++m[i];
                else if (m[i])
                    --m[i];
                update_mcast(mlid);
            });
    }
    if (net.has_sm()) {
        // The subnet manager's endport; every port knows it as its master SM (PortInfo
        // MasterSMLID: where traps go).
        hcasim::subnet_manager& sm = *net.sm;
        const uint16_t sm_lid = g.nodes[unsigned(g.sm_node)].lid;
        sm.set_lid(sm_lid);
        for (unsigned i = 0; i < hosts.size(); ++i) {
            sm.add_node(i, hosts[i]->lid());
            hosts[i]->adapter.set_sm_lid(sm_lid);
        }
    }
}

unsigned machine::rank_of_key(const std::string& key) const {
    const size_t dot = key.find('.');
    const std::string first = key.substr(0, dot);
    if (first.size() > 4 && first.compare(0, 4, "node") == 0 &&
        first.find_first_not_of("0123456789", 4) == std::string::npos) {
        const unsigned i = unsigned(std::stoul(first.substr(4)));
        return i < hosts.size() ? net.part.rank_of_host(i) : 0;
    }
    if (first != "fabric" || dot == std::string::npos) return 0;
    const std::string unit = key.substr(dot + 1, key.find('.', dot + 1) - dot - 1);
    const topology& g = net.graph;
    if (unit == "sm") return g.sm_node >= 0 ? net.part.rank_of[unsigned(g.sm_node)] : 0;
    for (unsigned n = 0; n < g.nodes.size(); ++n)
        if (g.nodes[n].is_switch() && g.nodes[n].desc == unit) return net.part.rank_of[n];
    return 0;
}

std::vector<subnet_manager::switch_plan> machine::sweep_plan() {
    const topology& g = net.graph;
    const switch_params& sp = net.switch_config;
    std::vector<std::vector<uint8_t>> path(g.nodes.size());
    std::vector<bool> seen(g.nodes.size(), false);
    std::vector<unsigned> order;
    const topo_end& first = g.nodes[unsigned(g.sm_node)].peer[1];
    path[unsigned(first.node)] = {1};  // out of the SM's port 1
    seen[unsigned(first.node)] = true;
    order.push_back(unsigned(first.node));
    for (size_t k = 0; k < order.size(); ++k) {
        const topo_node& n = g.nodes[order[k]];
        for (unsigned p = 1; p <= n.ports(); ++p) {
            const topo_end& e = n.peer[p];
            if (!e.connected() || seen[unsigned(e.node)] || !g.nodes[unsigned(e.node)].is_switch()) continue;
            seen[unsigned(e.node)] = true;
            path[unsigned(e.node)] = path[order[k]];
            path[unsigned(e.node)].push_back(uint8_t(p));
            order.push_back(unsigned(e.node));
        }
    }
    std::vector<subnet_manager::switch_plan> plans;
    for (unsigned s : g.switches()) {
        if (!seen[s])
            throw config_error(
                "fabric.sm.program=smp: no path of switches from the subnet manager to switch '" +
                g.nodes[s].desc + "'");
        if (path[s].size() > wire::SMP_MAX_HOPS)
            throw config_error("fabric.sm.program=smp: switch '" + g.nodes[s].desc + "' is " +
                               std::to_string(path[s].size()) +
                               " hops from the subnet manager; a directed route has at most 63");
        subnet_manager::switch_plan p;
        p.name = g.nodes[s].desc;
        p.guid = g.nodes[s].guid;
        p.path = path[s];
        p.lft = net.routes.lft[s];
        const ib_switch& sw = net.switch_at(s);
        std::vector<unsigned> ins;
        for (unsigned port = 1; port <= sw.ports(); ++port)
            if (sw.linked(port)) ins.push_back(port);
        for (unsigned port : ins) plan_vl_tables(p, ins, port, sp, sw.data_vls(port));
        plans.push_back(std::move(p));
    }
    // The HCA ports with configured VL tables, LID routed once the switches route.
    for (unsigned i = 0; i < hosts.size(); ++i) {
        const port& pt = hosts[i]->adapter.port0;
        subnet_manager::switch_plan p;
        p.name = "node" + std::to_string(i);
        p.node = int(i);
        plan_vl_tables(p, {0}, 1, pt, pt.data_vls());
        if (!p.sl2vl.empty() || !p.vlarb.empty()) plans.push_back(std::move(p));
    }
    return plans;
}

void machine::cable(unsigned a, unsigned pa, unsigned b, unsigned pb) {
    const topology& g = net.graph;
    const topo_node& na = g.nodes[a];
    const topo_node& nb = g.nodes[b];
    if (!na.is_switch() && !nb.is_switch()) {
        // Back to back: link negotiation, both ends run at the lower of the two capabilities.
        node& x = *hosts.at(na.host);
        node& y = *hosts.at(nb.host);
        const double rate = std::min(x.cable.data_rate_gbps(), y.cable.data_rate_gbps());
        const unsigned width = std::min(x.cable.width.get(), y.cable.width.get());
        const unsigned speed = std::min(x.cable.speed_code(), y.cable.speed_code());
        x.cable.out.bind(y.adapter.port0.rx);
        y.cable.out.bind(x.adapter.port0.rx);
        x.adapter.set_link(rate, width, speed, x.lid(), x.lmc());
        y.adapter.set_link(rate, width, speed, y.lid(), y.lmc());
        // Flow control: each port's credits are the other's receive buffers.
        const unsigned vls = std::min(x.cable.data_vls.get(), y.cable.data_vls.get());
        connect_credits(x, y, vls);
        connect_credits(y, x, vls);
        // A dead direction takes the link down: both ports see it (IBA link training fails).
        const double dx = x.cable.down_at_ns, dy = y.cable.down_at_ns;
        if (dx >= 0 || dy >= 0) {
            const double at = dx < 0 ? dy : dy < 0 ? dx : std::min(dx, dy);
            x.adapter.link_down_at(sc_time(at, SC_NS));
            y.adapter.link_down_at(sc_time(at, SC_NS));
        }
        return;
    }
    if (!na.is_switch()) {
        cable(b, pb, a, pa);
        return;
    }
    ib_switch& sw = net.switch_at(a);
    const switch_params& sp = net.switch_config;
    if (nb.is_switch()) {
        // Between switches: fabric.isl.*, by default node 0's link rate and propagation. The
        // only fault: fabric.isl.down_cable going down (the other fault keys are a node's).
        ib_switch& peer = net.switch_at(b);
        const link& c = hosts.at(0)->cable;
        const double rate = net.isl_rate_gbps > 0 ? net.isl_rate_gbps.get() : c.data_rate_gbps();
        const sc_time prop(
            net.isl_propagation_ns >= 0 ? net.isl_propagation_ns.get() : c.propagation_ns.get(), SC_NS);
        // Through the channel of every switch-to-switch cable: delivered at canonical times
        // (isl_channel.h), the same in one process and split over several.
        net.isl->cable(sw, pa, net.part.rank_of[a], peer, pb, net.part.rank_of[b], rate, prop,
                       fc_packet_time(rate), sp.data_vls, sp.vl_buffer_bytes, net.isl_faults(a, pa));
        return;
    }
    if (nb.is_sm) {
        if (!net.has_sm()) return;
        hcasim::subnet_manager& sm = *net.sm;
        sw.bind_port(pa, sm.tx, sm.rx);
        // The SM sends and receives SMPs only (VL15): no credits either way. Its port has the
        // switch's data VLs, so the switch's SL2VL and VL arbitration tables fit it as they fit
        // every other port.
        sw.set_link(pa, sm.rate_gbps, sc_time(sm.propagation_ns.get(), SC_NS), fault_settings{}, sp.data_vls,
                    0, nullptr, SC_ZERO_TIME);
        return;
    }
    node& n = *hosts.at(nb.host);
    sw.bind_port(pa, n.cable.out, n.adapter.port0.rx);
    const double rate = n.cable.data_rate_gbps();
    n.adapter.set_link(rate, n.cable.width, n.cable.speed_code(), n.lid(), n.lmc());
    // The switch's output toward the node is the other direction of the node's cable.
    const sc_time prop(n.cable.propagation_ns.get(), SC_NS);
    const unsigned vls = std::min(n.cable.data_vls.get(), sp.data_vls.get());
    const sc_time credit_delay = fc_packet_time(rate) + prop;
    sw.set_link(pa, rate, prop, n.cable.fault_config(), vls, n.adapter.port0.vl_buffer_bytes,
                &n.adapter.port0.tx_credits(), credit_delay);
    n.adapter.port0.set_flow_control(vls, sp.vl_buffer_bytes);
    n.adapter.port0.give_credit_to(&sw.out_credits(pa), credit_delay);
    n.cable.faults.resync_credits(&n.adapter.port0.tx_credits(), credit_delay);
    if (n.cable.down_at_ns >= 0) n.adapter.link_down_at(sc_time(n.cable.down_at_ns.get(), SC_NS));
}

fault_settings fabric::isl_faults(unsigned n, unsigned p) const {
    fault_settings f;
    if (down_node_ < 0) return f;
    const topo_end& far = graph.nodes[unsigned(down_node_)].peer[down_port_];
    if ((int(n) == down_node_ && p == down_port_) || (int(n) == far.node && p == far.port))
        f.down_at_ns = isl_down_at_ns.get();
    return f;
}

void machine::update_mcast(uint16_t mlid) {
    const topology& g = net.graph;
    const std::vector<unsigned>& m = mcast_members_[mlid - 0xC000];
    // The switches breadth first from the tree's root (children after their parents).
    std::vector<unsigned> order{g.switches().front()};
    for (size_t k = 0; k < order.size(); ++k)
        for (unsigned p = 1; p <= g.nodes[order[k]].ports(); ++p) {
            const topo_end& e = g.nodes[order[k]].peer[p];
            if (e.connected() && g.nodes[unsigned(e.node)].is_switch() &&
                tree_parent_port_[unsigned(e.node)] == int(e.port) && unsigned(e.node) != order.front())
                order.push_back(unsigned(e.node));
        }
    auto member = [&](const topo_node& n) { return !n.is_switch() && !n.is_sm && m[n.host] > 0; };
    auto child = [&](const topo_end& e) {
        return g.nodes[unsigned(e.node)].is_switch() && tree_parent_port_[unsigned(e.node)] == int(e.port);
    };
    // Members in each switch's subtree, leaves first.
    std::vector<unsigned> below(g.nodes.size(), 0);
    for (size_t k = order.size(); k-- > 0;) {
        const unsigned s = order[k];
        for (unsigned p = 1; p <= g.nodes[s].ports(); ++p) {
            const topo_end& e = g.nodes[s].peer[p];
            if (!e.connected()) continue;
            if (member(g.nodes[unsigned(e.node)]))
                ++below[s];
            else if (child(e))
                below[s] += below[unsigned(e.node)];
        }
    }
    const unsigned total = below[order.front()];
    // A port joins the group if a member lies beyond it: its host, a child subtree with
    // members, or (toward the root) members outside this switch's subtree.
    for (unsigned s : order) {
        ib_switch& sw = net.switch_at(s);
        for (unsigned p = 1; p <= g.nodes[s].ports(); ++p) {
            const topo_end& e = g.nodes[s].peer[p];
            bool on = false;
            if (e.connected()) {
                if (member(g.nodes[unsigned(e.node)]))
                    on = true;
                else if (child(e))
                    on = below[unsigned(e.node)] > 0;
                else if (tree_parent_port_[s] == int(p))
                    on = below[s] > 0 && total > below[s];
            }
            sw.set_mcast(mlid, p, on);
        }
    }
}

void machine::check_deadlock(unsigned sw_node, unsigned port) {
    if (!fabric_error_.empty()) return;  // another switch of the loop found it first
    const topology& g = net.graph;
    std::vector<std::pair<unsigned, unsigned>> path;
    std::map<std::pair<unsigned, unsigned>, size_t> at;
    std::pair<unsigned, unsigned> cur{sw_node, port};
    for (;;) {
        if (const auto it = at.find(cur); it != at.end()) {
            path.erase(path.begin(), path.begin() + std::ptrdiff_t(it->second));
            break;
        }
        if (!net.switch_at(cur.first).credit_starved(cur.second)) return;  // it moves: no deadlock
        at[cur] = path.size();
        path.push_back(cur);
        const topo_end& e = g.nodes[cur.first].peer[cur.second];
        if (!e.connected() || !g.nodes[unsigned(e.node)].is_switch()) return;  // an HCA always drains
        const unsigned next = net.switch_at(unsigned(e.node)).head_wants(e.port);
        if (!next) return;
        cur = {unsigned(e.node), next};
    }
    // Named from its smallest channel, as the routing's static check names a cycle.
    std::rotate(path.begin(), std::min_element(path.begin(), path.end()), path.end());
    uint64_t held = 0;
    for (const auto& s : net.switches) held += s->held_packets();
    fabric_error_ = "fabric deadlock: " + std::to_string(held) +
                    " packets held in switches and no progress for fabric.switch.deadlock_timeout_us=" +
                    net.switch_config.deadlock_timeout_us.str() + " us at " +
                    std::to_string(sc_time_stamp().to_seconds() * 1e6) +
                    " us; switch outputs waiting for credit in a cycle (fabric.routing=" + net.routing.get() +
                    "): " + describe_channels(g, path);
    sc_stop();
}

void machine::write_topology(std::ostream& out) const {
    const link& c = hosts.at(0)->cable;
    write_ibnetdiscover(net.graph, out, std::to_string(c.width.get()) + "x" + speed_name(c.speed_code()));
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
    // Each endport's cable: direction 0 what it sends, 1 what its switch sends it. Cables
    // between switches are not captured.
    // A partitioned run: each rank writes the captures of the cables it simulates.
    const topology& g = net.graph;
    for (unsigned i = 0; i < hosts.size(); ++i) {
        if (!owns_host(i)) continue;
        capture_order_.push_back(i);
        wire_capture* w = open("link" + std::to_string(i) + ".pcap");
        hosts[i]->cable.capture_to(w, 0, hosts[i]->adapter.port0.rate_gbps());
        const topo_end& e = g.nodes[g.host_node[i]].peer[1];
        net.switch_at(unsigned(e.node)).capture_to(e.port, w, 1);
    }
    if (net.has_sm() && net.part.rank_of[unsigned(g.sm_node)] == net.rank()) {
        capture_order_.push_back(unsigned(hosts.size()));
        wire_capture* w = open("link_sm.pcap");
        net.sm->capture_to(w);
        const topo_end& e = g.nodes[unsigned(g.sm_node)].peer[1];
        net.switch_at(unsigned(e.node)).capture_to(e.port, w, 1);
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
