// run(): checks the phases can share one run, elaborates the machine (or the PCIe bench) and
// the application, attaches --timeline, --record and --pcap, simulates and collects the reports.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "model/core/output_file.h"
#include "testbench/workloads/chaff.h"
#include "testbench/workloads/many.h"

namespace hcasim {

using namespace workloads;

namespace {

/// Whether the run is the PCIe bench's (dma_*_bw); refuses phases that cannot share one run:
/// dma_*_bw with two-node workloads, or two transports (the phases share their QPs).
bool pcie_only_run(const run_spec& spec) {
    bool pcie_only = !spec.phases.empty();
    for (auto& p : spec.phases) pcie_only &= is_pcie_workload(p.workload);
    for (auto& p : spec.phases)
        if (!pcie_only && is_pcie_workload(p.workload))
            throw workload_error("dma_*_bw workloads run the PCIe link alone and cannot share a run with '" +
                                 spec.phases.front().workload + "'");
    // The phases of a run share their QPs, hence one transport.
    for (auto& p : spec.phases)
        if (transport_of(p.workload) != transport_of(spec.phases.front().workload))
            throw workload_error("'" + p.workload + "' and '" + spec.phases.front().workload +
                                 "' run on different transports and cannot share a run");
    return pcie_only;
}

/// mr_scale's sweep (workload.mrs), with the nodes' MPT tables sized for it; empty without mr_scale.
std::vector<uint64_t> mr_sweep(const run_spec& spec, const workload_params& wp) {
    std::vector<uint64_t> mrs;
    for (auto& p : spec.phases)
        if (p.workload == "mr_scale" && mrs.empty()) {
            mrs = parse_counts(wp.mrs.get(), "workload.mrs");
            size_mpt_tables(*std::max_element(mrs.begin(), mrs.end()));
        }
    return mrs;
}

}  // namespace

std::unique_ptr<timeline> attach_timeline(const run_spec& spec, machine* m) {
    if (spec.timeline.empty()) return nullptr;
    if (!m)
        throw workload_error("--timeline: " + spec.phases.front().workload +
                             " runs the PCIe link alone (no HCA timeline)");
    spec.timeline_only.check_nodes(unsigned(m->size()));
    auto tl = std::make_unique<timeline>(spec.timeline, spec.timeline_only);
    for (size_t i = 0; i < m->size(); ++i) {
        m->at(unsigned(i)).adapter.set_timeline(tl.get(), unsigned(i));
        m->at(unsigned(i)).pcie.set_timeline(tl.get(), unsigned(i));
    }
    return tl;
}

namespace {

/// --record: the application's verbs calls go to the trace (null without the option).
std::unique_ptr<trace::recorder> attach_recorder(const run_spec& spec, machine* m, perftest* app) {
    if (spec.record.empty()) return nullptr;
    if (!app) throw workload_error("--record: " + spec.phases.front().workload + " runs no verbs");
    auto rec = std::make_unique<trace::recorder>(spec.record, unsigned(m->size()));
    rec->header(trace::effective_config(), spec.seed, spec.phases.front().workload);
    app->set_recorder(rec.get());
    return rec;
}

/// --waves needs a node that runs the P_Key checker's RTL; --pcap opens every cable's capture.
void check_waves_open_captures(const run_spec& spec, machine& m) {
    bool waves = false, rtl = false;
    for (size_t i = 0; i < m.size(); ++i) {
        waves |= !m.at(unsigned(i)).adapter.pkeys.waves.get().empty();
        rtl |= m.at(unsigned(i)).adapter.pkeys.rtl_active();
    }
    if (waves && !rtl)
        throw config_error(
            "hca.pkey_checker.waves (--waves): no node runs the P_Key checker's RTL "
            "(set hca.pkey_checker.impl=rtl or both)");
    if (!spec.pcap_dir.empty()) m.capture_to(spec.pcap_dir);
}

/// --record, after the simulation: the trace's end record (the counters, the memory digests).
void end_recording(trace::recorder& rec, perftest& app) {
    trace::json counters = trace::json::object();
    for (const counter* c : stats_registry::instance().counters())
        if (c->value()) counters[c->key()] = c->value();
    rec.end([&](unsigned node, uint64_t va, uint8_t* dst, uint64_t n) { app.read_mem(node, va, dst, n); },
            counters);
}

}  // namespace

void close_captures(machine& m) {
    if (const std::string e = m.close_captures(); !e.empty()) throw config_error(e);
    std::cout << " pcap:";
    for (const auto& c : m.captures()) std::cout << " " << c->path() << " (" << c->packets() << " packets)";
    std::cout << "\n";
}

namespace {

/// --dump-topology: the fabric in ibnetdiscover's format, written whole or not at all.
void write_topology_file(const machine& m, const std::string& path) {
    std::ostringstream text;
    m.write_topology(text);
    output_file out(path, "--dump-topology");
    out.write(text.str());
    out.commit();
}

/// impl=both: one closing line on stdout, whether the run completed or stopped at a divergence:
/// the verdicts compared and the divergences over every node that ran the two side by side.
void print_cosim_summary(std::ostream& os, machine& m) {
    uint64_t compared = 0, divergences = 0;
    std::string nodes;
    for (size_t i = 0; i < m.size(); ++i) {
        const pkey_checker& c = m.at(unsigned(i)).adapter.pkeys;
        if (!c.compares()) continue;
        compared += c.rtl_compared.value();
        divergences += c.divergences.value();
        nodes += (nodes.empty() ? "node" : ", node") + std::to_string(i);
    }
    if (nodes.empty()) return;
    os << " co-simulation (hca.pkey_checker.impl=both on " << nodes << "): " << compared
       << " verdicts compared, " << divergences << (divergences == 1 ? " divergence" : " divergences")
       << "\n";
}

/// Why the simulation did not complete the run ("" if it did): the fabric's stop
/// (machine::fabric_error: a deadlock's cycle of ports, a failed SM sweep), a co-simulation
/// divergence, the application's error (`app_error`), or phases without reports.
std::string run_failure(machine* m, const std::string& app_error, size_t reports, size_t phases) {
    if (m && !m->fabric_error().empty()) return m->fabric_error();  // a deadlock, a failed SM sweep
    if (m)
        for (size_t i = 0; i < m->size(); ++i)
            if (const std::string& d = m->at(unsigned(i)).adapter.pkeys.divergence(); !d.empty())
                return "co-simulation divergence (hca.pkey_checker.impl=both):\n" + d;
    if (!app_error.empty()) {
        if (std::getenv("HCASIM_DUMP_COUNTERS"))
            for (const counter* c : stats_registry::instance().counters())
                if (c->value()) std::cerr << c->key() << " = " << c->value() << "\n";
        return app_error;
    }
    if (reports != phases) return "simulation ended before every phase completed";
    return "";
}

}  // namespace

std::vector<run_report> run(const run_spec& spec, elaboration_help* help_out, std::string* failure) {
    std::vector<run_report> reports;
    const bool pcie_only = pcie_only_run(spec);
    workload_params wp;
    const std::vector<uint64_t> mrs = mr_sweep(spec, wp);
    std::unique_ptr<machine> m;
    std::unique_ptr<perftest> app;
    std::unique_ptr<many_node> many;  // incast, alltoall, ...: every node of the fabric
    std::unique_ptr<sc_module> bench;
    if (pcie_only) {
        bench = make_pcie_bench("node0", spec, wp, reports);
    } else if (spec.phases.empty()) {
        m = std::make_unique<machine>();  // --dump-topology without a workload: the fabric alone
    } else if (is_many_node_workload(spec.phases.front().workload)) {
        m = std::make_unique<machine>();
        many = std::make_unique<many_node>("many", *m, spec, wp, reports);
    } else {
        m = std::make_unique<machine>();
        if (m->size() < 2) throw workload_error("two-node workloads need fabric.nodes >= 2");
        app = std::make_unique<perftest>("perftest", *m, spec, wp, reports, mrs);
    }
    if (help_out) {
        *help_out = {broker::instance().help(), stats_registry::instance().help()};
        return reports;
    }
    broker::instance().check_unused();
    if (!spec.dump_topology.empty()) {
        write_topology_file(*m, spec.dump_topology);
        return reports;
    }
    std::unique_ptr<timeline> tl = attach_timeline(spec, m.get());
    std::unique_ptr<trace::recorder> rec = attach_recorder(spec, m.get(), app.get());
    if (m) check_waves_open_captures(spec, *m);
    const std::unique_ptr<chaff> perturb = chaff::from_env();  // a test aid (chaff.h); null unless set
    const auto wall0 = std::chrono::steady_clock::now();
    sc_start();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (rec && app) {
        end_recording(*rec, *app);
        rec.reset();
    }
    if (m && !m->captures().empty()) close_captures(*m);
    if (tl) tl->close();
    if (m) print_cosim_summary(std::cout, *m);
    const std::string app_error = app ? app->error : many ? many->error : std::string();
    if (const std::string why = run_failure(m.get(), app_error, reports.size(), spec.phases.size());
        !why.empty()) {
        if (!failure) throw workload_error(why);
        *failure = why;
        return reports;
    }
    if (app && !app->points.empty()) print_mr_table(std::cout, app->points);
    for (auto& r : reports) r.wall_s = wall;  // the whole run's wall time (phases share one simulation)
    if (!reports.empty()) {
        for (const counter* c : stats_registry::instance().counters())
            reports.front().counters.emplace_back(c->key(), c->value());
        for (const param_base* p : broker::instance().params())
            reports.front().config.emplace_back(p->key(), p->str());
    }
    return reports;
}

}  // namespace hcasim
