// run(): checks the phases can share one run, elaborates the machine (or the PCIe bench) and
// the application, attaches --timeline, --record and --pcap, simulates and collects the reports.
#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cstdlib>
#include <functional>
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

/// --waves needs a unit that runs as RTL on some node (a unit naming a waves file without its
/// RTL traces nothing); --pcap opens every cable's capture.
void check_waves_open_captures(const run_spec& spec, machine& m) {
    std::string waves_key;
    bool rtl = false;
    for (size_t i = 0; i < m.size(); ++i) {
        const hca& a = m.at(unsigned(i)).adapter;
        if (waves_key.empty() && !a.pkeys.waves.get().empty()) waves_key = "hca.pkey_checker.waves";
        if (waves_key.empty() && !a.cqs.waves.get().empty()) waves_key = "hca.cq_writer.waves";
        rtl |= a.pkeys.rtl_active() || a.cqs.rtl_active();
    }
    if (!waves_key.empty() && !rtl)
        throw config_error(waves_key +
                           " (--waves): no node runs a unit as RTL (set hca.pkey_checker.impl or "
                           "hca.cq_writer.impl to rtl or both)");
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

/// A partitioned run: `step` (building this rank's part) on every rank, then every rank learns
/// whether all succeeded, so none waits for one that stopped; this rank's error, or another's.
void agree(rank_comm* comm, const std::function<void()>& step) {
    if (!comm || comm->size() < 2) return step();
    std::exception_ptr e;
    try {
        step();
    } catch (...) {
        e = std::current_exception();
    }
    std::vector<uint64_t> ok{e ? 0u : 1u};
    comm->min_all(ok);
    if (e) std::rethrow_exception(e);
    if (!ok[0])
        throw config_error("another rank could not build its part of the run (its error is on its stderr)");
}

/// A partitioned run's lookahead (the least propagation of a cut cable), after refusing what
/// cannot be split; SC_ZERO_TIME in one process.
sc_time check_partitioned(const run_spec& spec, machine& m, const workload_params& wp) {
    if (!spec.comm || spec.comm->size() < 2) return SC_ZERO_TIME;
    const std::string ranks = "mpirun -np " + std::to_string(spec.comm->size()) + ": ";
    if (!m.net.isl || !m.net.isl->any_cut())
        throw config_error(ranks + "the partition cuts no cable between switches");
    const sc_time l = m.net.isl->min_cut_propagation();
    if (l == SC_ZERO_TIME)
        throw config_error(ranks +
                           "a cut cable between switches has no latency (fabric.isl.propagation_ns=0): "
                           "the ranks could not run ahead of each other");
    if (sc_time(wp.barrier_ns.get(), SC_NS) < l)
        throw config_error(ranks + "workload.barrier_ns=" + wp.barrier_ns.str() +
                           " is below the lookahead (the cut cables' propagation, " + l.to_string() + ")");
    if (wp.transport.get() != "rc")
        throw config_error(ranks + "workload.transport=" + wp.transport.get() +
                           ": a partitioned run carries RC only (UC and UD end on a drain every node sees)");
    if (m.net.cc.enable)
        throw config_error(ranks + "fabric.cc.enable: congestion control is not partitioned yet");
    if (m.net.has_sm() && m.net.sm->program.get() == "smp")
        throw config_error(ranks + "fabric.sm.program=smp: the SM's sweep is not partitioned yet");
    if (!spec.timeline.empty()) throw config_error(ranks + "--timeline is not partitioned yet");
    return l;
}

}  // namespace

void close_captures(machine& m, rank_comm* comm) {
    const std::string failed = m.close_captures();
    if (!comm || comm->size() < 2) {
        if (!failed.empty()) throw config_error(failed);
        std::cout << " pcap:";
        for (const auto& c : m.captures())
            std::cout << " " << c->path() << " (" << c->packets() << " packets)";
        std::cout << "\n";
        return;
    }
    // A partitioned run: each rank wrote its cables' files; rank 0 names them all, in order.
    std::ostringstream mine;
    mine << (failed.empty() ? "" : "!" + failed + "\n");
    for (size_t k = 0; k < m.captures().size(); ++k)
        mine << m.capture_order()[k] << "\t " << m.captures()[k]->path() << " (" << m.captures()[k]->packets()
             << " packets)\n";
    const std::string text = mine.str();
    const std::vector<std::vector<uint8_t>> all =
        comm->gather(std::vector<uint8_t>(text.begin(), text.end()));
    if (comm->rank() != 0) return;
    std::vector<std::pair<unsigned, std::string>> files;
    std::string error;
    for (const std::vector<uint8_t>& r : all) {
        std::istringstream in(std::string(r.begin(), r.end()));
        for (std::string line; std::getline(in, line);) {
            if (line[0] == '!') {
                if (error.empty()) error = line.substr(1);
                continue;
            }
            const size_t tab = line.find('\t');
            files.emplace_back(unsigned(std::stoul(line.substr(0, tab))), line.substr(tab + 1));
        }
    }
    if (!error.empty()) throw config_error(error);
    std::sort(files.begin(), files.end());
    std::cout << " pcap:";
    for (const auto& f : files) std::cout << f.second;
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

/// impl=both: one closing line on stdout per unit some node runs that way, whether the run
/// completed or stopped at a divergence: what was compared and the divergences over the nodes.
void print_cosim_summary(std::ostream& os, machine& m) {
    uint64_t verdicts = 0, pkey_div = 0, answers = 0, writes = 0, pending = 0, cq_div = 0, skew = 0;
    std::string pkey_nodes, cq_nodes;
    for (size_t i = 0; i < m.size(); ++i) {
        const hca& a = m.at(unsigned(i)).adapter;
        const std::string n = "node" + std::to_string(i);
        if (a.pkeys.compares()) {
            verdicts += a.pkeys.rtl_compared.value();
            pkey_div += a.pkeys.divergences.value();
            pkey_nodes += (pkey_nodes.empty() ? "" : ", ") + n;
        }
        if (a.cqs.compares()) {
            answers += a.cqs.rtl_compared.value();
            writes += a.cqs.rtl_writes_compared.value();
            pending += a.cqs.rtl_pending();
            cq_div += a.cqs.divergences.value();
            skew = std::max<uint64_t>(skew, a.cqs.rtl_skew_max_ps.value());
            cq_nodes += (cq_nodes.empty() ? "" : ", ") + n;
        }
    }
    const auto ns3 = [](uint64_t ps) {
        char b[32];
        std::snprintf(b, sizeof b, "%.3f", double(ps) / 1000.0);
        return std::string(b);
    };
    const auto divs = [](uint64_t d) {
        return std::to_string(d) + (d == 1 ? " divergence" : " divergences");
    };
    if (!pkey_nodes.empty())
        os << " co-simulation (hca.pkey_checker.impl=both on " << pkey_nodes << "): " << verdicts
           << " verdicts compared, " << divs(pkey_div) << "\n";
    if (!cq_nodes.empty()) {
        os << " co-simulation (hca.cq_writer.impl=both on " << cq_nodes << "): " << answers
           << " transactions compared, " << writes << " host memory writes compared (latency within "
           << ns3(skew) << " ns of the model's), " << divs(cq_div);
        if (pending) os << " (" << pending << " still with the RTL when the run ended)";
        os << "\n";
    }
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
    if (m)
        for (size_t i = 0; i < m->size(); ++i)
            if (const std::string& d = m->at(unsigned(i)).adapter.cqs.divergence(); !d.empty())
                return "co-simulation divergence (hca.cq_writer.impl=both):\n" + d;
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
    std::unique_ptr<sim_driver> driver;  // the many-node workloads' simulation (windows, barriers)
    std::unique_ptr<many_node> many;     // incast, alltoall, ...: every node of the fabric
    std::unique_ptr<sc_module> bench;
    if (pcie_only) {
        bench = make_pcie_bench("node0", spec, wp, reports);
    } else if (spec.phases.empty()) {
        m = std::make_unique<machine>();  // --dump-topology without a workload: the fabric alone
    } else if (is_many_node_workload(spec.phases.front().workload)) {
        agree(spec.comm, [&] {
            m = std::make_unique<machine>(spec.comm ? spec.comm->rank() : 0,
                                          spec.comm ? spec.comm->size() : 1);
            driver =
                std::make_unique<sim_driver>(spec.comm, m->net.isl.get(), check_partitioned(spec, *m, wp),
                                             [net = &m->net](const sc_time& now, const sc_time& next) {
                                                 return net->cut_horizon(now, next);
                                             });
            many = std::make_unique<many_node>("many", *m, spec, wp, reports, *driver);
        });
    } else if (spec.comm && spec.comm->size() > 1) {
        throw config_error("mpirun -np " + std::to_string(spec.comm->size()) + ": " +
                           spec.phases.front().workload +
                           " runs on two nodes; only the many-node workloads (incast, alltoall, permutation, "
                           "uniform_random, bisection, hotspot) split the fabric over ranks");
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
    if (m) agree(spec.comm, [&] { check_waves_open_captures(spec, *m); });
    const std::unique_ptr<chaff> perturb = chaff::from_env();  // a test aid (chaff.h); null unless set
    const auto wall0 = std::chrono::steady_clock::now();
    if (driver)
        driver->run();
    else
        sc_start();
    if (driver && spec.comm && spec.comm->size() > 1 && spec.comm->rank() == 0) {
        // On stderr: stdout stays that of one process.
        const double all = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        std::cerr << "hcasim: partitioned over " << spec.comm->size() << " ranks: lookahead "
                  << m->net.isl->min_cut_propagation().to_string() << ", " << driver->windows()
                  << " windows, " << driver->messages_in()
                  << " bytes from the other ranks to rank 0, rank 0 synchronising "
                  << int(100.0 * driver->sync_wall_s() / (all > 0 ? all : 1)) << "% of " << all << " s\n";
    }
    if (many) many->finish();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (rec && app) {
        end_recording(*rec, *app);
        rec.reset();
    }
    if (m && !spec.pcap_dir.empty()) close_captures(*m, spec.comm);
    if (tl) tl->close();
    if (m)
        for (size_t i = 0; i < m->size(); ++i)
            m->at(unsigned(i)).adapter.cqs.close_stimulus();  // --dump-stimulus
    if (m) print_cosim_summary(std::cout, *m);
    const std::string app_error = app ? app->error : many ? many->error : std::string();
    std::string why = run_failure(m.get(), app_error, reports.size(), spec.phases.size());
    if (spec.comm && spec.comm->size() > 1) {
        // Rank 0's verdict (it has every rank's report and errors) is every rank's.
        std::vector<uint8_t> v(why.begin(), why.end());
        spec.comm->broadcast(v);
        why.assign(v.begin(), v.end());
        if (spec.comm->rank() != 0) {
            if (!why.empty() && !failure) throw workload_error(why);
            if (failure) *failure = why;
            return {};
        }
    }
    if (!why.empty()) {
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
