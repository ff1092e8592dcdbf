#include "testbench/replay/replay.h"

#include <systemc>

#include <boost/program_options.hpp>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/core/text_file.h"
#include "model/core/timeline.h"
#include "model/system/fabric.h"
#include "testbench/cli/presets.h"
#include "testbench/host_software.h"
#include "testbench/replay/replayer.h"
#include "testbench/replay/trace_file.h"
#include "testbench/replay/verbs_trace.h"

namespace hcasim {

using namespace sc_core;
using namespace verbs;
using trace::json;
using namespace replay;

namespace {

namespace po = boost::program_options;

/// What `hcasim replay` was asked for.
struct replay_options {
    std::string path;       // the trace
    std::string timing;     // asap | recorded
    double tolerance = -1;  // of completion times (a fraction); < 0: times are not compared
    bool update = false;
    std::string record;
    po::variables_map vm;
};

/// Parses and checks the command line into *o; returns -1 to go on, else the exit status
/// (--help: 0, bad options: 2, with one line on stderr).
int parse_options(int argc, const char* const* argv, replay_options* o) {
    po::options_description desc("Usage: hcasim replay FILE [options]\nOptions", 110);
    // clang-format off
    desc.add_options()
        ("help,h", "print this help and exit")
        ("timing", po::value<std::string>()->default_value("asap"),
         "asap: each node's calls in trace order, a call once the calls before it (any node) have returned, or "
         "for waiting calls (poll_cq, wait_byte, sleep) started; recorded: each call at its recorded time, once "
         "the calls before it have started")
        ("time-tolerance", po::value<std::string>(), "also compare the times completions were polled: P% of the recorded time")
        ("update", "run the trace and write its outcome back into FILE (freezes a hand-written trace, or refreshes "
                   "one after an intended change)")
        ("record", po::value<std::string>(), "write the replay's own trace (calls and outcomes) to this file")
        ("pcap", po::value<std::string>(), "also write one wire capture per cable into this directory (docs/traces.md)")
        ("timeline", po::value<std::string>(), "also write the replay's timeline (Chrome trace-event JSON) to this file")
        ("timeline-window", po::value<std::string>(), "--timeline keeps only START_NS:END_NS of simulated time")
        ("timeline-nodes", po::value<std::string>(), "--timeline keeps only these nodes, e.g. 0,1")
        ("config,c", po::value<std::vector<std::string>>()->composing(), "load an INI file (or a preset by name, as hcasim --config) after the trace's configuration")
        ("set,s", po::value<std::vector<std::string>>()->composing(), "override one key after the trace's configuration")
        ("log", po::value<std::vector<std::string>>()->composing(), "log a module's decisions to standard error, e.g. --log node0.hca.transport_engine=debug; MODULE may be a glob and without nodeN names every node; LEVEL off|info|debug (repeatable; docs/usage.md)")
        ("file", po::value<std::string>(), "the trace");
    // clang-format on
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map& vm = o->vm;
    try {
        po::store(po::command_line_parser(argc - 1, const_cast<char**>(argv + 1))
                      .options(desc)
                      .positional(pos)
                      .run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << " (see hcasim replay --help)\n";
        return 2;
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return 0;
    }
    if (!vm.count("file")) {
        std::cerr << "hcasim: error: replay: which trace? (hcasim replay FILE)\n";
        return 2;
    }
    o->path = vm["file"].as<std::string>();
    const std::string& timing = o->timing = vm["timing"].as<std::string>();
    if (timing != "recorded" && timing != "asap") {
        std::cerr << "hcasim: error: replay: --timing: expected recorded|asap, got '" << timing << "'\n";
        return 2;
    }
    double& tolerance = o->tolerance;
    if (vm.count("time-tolerance")) {
        std::string t = vm["time-tolerance"].as<std::string>();
        const bool pct = !t.empty() && t.back() == '%';
        if (pct) t.pop_back();
        char* end = nullptr;
        tolerance = std::strtod(t.c_str(), &end);
        if (t.empty() || *end || tolerance < 0) {
            std::cerr << "hcasim: error: replay: --time-tolerance: expected a percentage like 5%, got '"
                      << vm["time-tolerance"].as<std::string>() << "'\n";
            return 2;
        }
        tolerance /= 100.0;
    }
    const bool update = o->update = vm.count("update") > 0;
    const std::string& record = o->record = vm.count("record") ? vm["record"].as<std::string>() : "";
    if (update && !record.empty()) {
        std::cerr << "hcasim: error: replay: --update writes FILE itself; it takes no --record\n";
        return 2;
    }
    return -1;
}

/// The summary line and, when the replay diverged, the first divergence and the count by kind;
/// returns the exit status.
int report(const replayer& app, const trace_file& t, const std::string& path, bool update, bool has_outcome) {
    std::printf("replay: %s: %zu calls, %zu completions, %zu events recorded", path.c_str(), app.calls_run,
                app.completions, t.events.size());
    if (update) {
        std::printf("; outcome written to %s (--update)\n", path.c_str());
        return 0;
    }
    if (app.diffs.empty()) {
        std::printf(has_outcome ? "; %zu outcomes compared: equal to the recording\n"
                                : "; no recorded outcome to compare (--update records one)\n",
                    app.compared);
        return 0;
    }
    std::printf("\n");
    std::map<std::string, size_t> by_kind;
    for (const divergence& d : app.diffs) ++by_kind[d.kind];
    std::cout << "first divergence: " << app.diffs.front().text << "\n";
    std::cout << "replay: " << app.diffs.size() << " divergence" << (app.diffs.size() == 1 ? "" : "s")
              << " (";
    bool first = true;
    for (auto& kv : by_kind) {
        std::cout << (first ? "" : ", ") << kv.first << ": " << kv.second;
        first = false;
    }
    std::cout << ")\n";
    return 1;
}

}  // namespace

int replay_main(int argc, const char* const* argv) {
    replay_options o;
    if (const int status = parse_options(argc, argv, &o); status >= 0) return status;
    const po::variables_map& vm = o.vm;
    const std::string& path = o.path;
    const std::string& timing = o.timing;
    const double tolerance = o.tolerance;
    const bool update = o.update;
    const std::string& record = o.record;

    trace_file t;
    std::unique_ptr<machine> m;
    std::unique_ptr<trace::recorder> rec;
    std::unique_ptr<replayer> app;
    std::unique_ptr<timeline> tl;
    // --update writes FILE whole once the replay has run to its end, or leaves it as it was.
    const std::string out_path = update ? path : vm.count("record") ? record : "/dev/null";
    const char* const out_what = update ? "--update" : "--record";
    timeline_filter timeline_only;
    try {  // the outputs, before anything runs
        auto given = [&vm](const char* option) {
            return vm.count(option) ? &vm[option].as<std::string>() : nullptr;
        };
        timeline_only =
            timeline_filter::parse(given("timeline-window"), given("timeline-nodes"), vm.count("timeline"));
        output_file::check(out_path, out_what);
        if (vm.count("timeline")) output_file::check(vm["timeline"].as<std::string>(), "--timeline");
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << "\n";
        return 2;
    }
    try {
        t = load(path);
        broker& b = broker::instance();
        if (t.header.contains("config"))
            for (auto& kv : t.header["config"].items())
                b.set(kv.key(), kv.value().is_string() ? kv.value().get<std::string>() : kv.value().dump(),
                      path + ":header");
        if (!t.header.contains("config") || !t.header["config"].contains("fabric.nodes"))
            b.set("fabric.nodes", std::to_string(t.nodes), path + ":header");
        if (vm.count("config"))
            for (const auto& f : vm["config"].as<std::vector<std::string>>()) b.load_ini(resolve_config(f));
        if (vm.count("set"))
            for (const auto& s : vm["set"].as<std::vector<std::string>>()) b.set_override(s);
        if (vm.count("log"))
            for (const auto& l : vm["log"].as<std::vector<std::string>>()) log_settings::instance().set(l);
        m = std::make_unique<machine>();
        if (m->size() != t.nodes)
            throw trace_error(path + ": the trace has " + std::to_string(t.nodes) +
                              " nodes, its configuration makes " + std::to_string(m->size()));
        rec = std::make_unique<trace::recorder>(out_path, t.nodes, out_what);
        if (vm.count("pcap")) m->capture_to(vm["pcap"].as<std::string>());
        if (vm.count("timeline")) {
            timeline_only.check_nodes(t.nodes);
            tl = std::make_unique<timeline>(vm["timeline"].as<std::string>(), timeline_only);
            for (unsigned i = 0; i < t.nodes; ++i) {
                m->at(i).adapter.set_timeline(tl.get(), i);
                m->at(i).pcie.set_timeline(tl.get(), i);
            }
        }
        app = std::make_unique<replayer>("replay", *m, t, *rec, timing == "recorded", tolerance);
        b.check_unused();
        // The trace's own header, with the effective configuration of the machine.
        rec->header(trace::effective_config(), t.header.value("seed", uint64_t(1)),
                    t.header.value("workload", std::string("replay")));
        for (const std::string& c : t.comments) rec->comment(c);
    } catch (const trace_error& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: " << path << ": " << e.what() << "\n";
        return 2;
    }
    // A recorded trace (or one frozen with --update) ends with its end record; a hand-written one
    // may hold only calls.
    const bool has_outcome = t.end.is_object();
    app->compare_events_ = has_outcome;

    sc_start();
    try {
        // The timeline and the captures show what was simulated, whether the replay failed or not.
        if (tl) tl->close();
        if (!m->captures().empty()) {
            if (const std::string e = m->close_captures(); !e.empty()) throw config_error(e);
            std::printf(" pcap:");
            for (const auto& c : m->captures())
                std::printf(" %s (%llu packets)", c->path().c_str(),
                            static_cast<unsigned long long>(c->packets()));
            std::printf("\n");
        }
        if (!app->failure.empty()) {
            std::cerr << "hcasim: run failed: replay: " << app->failure << "\n";
            return 1;
        }
        if (update && !app->finished) {
            std::cerr << "hcasim: run failed: replay: " << path
                      << ": the replay stopped before its last call (" << path << " is left as it was)\n";
            return 1;
        }
        // The end: memory digests of every buffer, the counters; the trace is written.
        trace::json counters = trace::json::object();
        for (const counter* c : stats_registry::instance().counters())
            if (c->value()) counters[c->key()] = c->value();
        const trace::json memory = rec->end(
            [&](unsigned node, uint64_t va, uint8_t* dst, uint64_t n) {
                // The trace's own buffers: allocated by the replay, mapped until it ends.
                (void)app->sw(node).as.read(va, dst, n);
            },
            counters);
        app->compare_end(memory);
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << "\n";
        return 2;
    }
    if (!app->finished && app->diffs.empty())
        app->diffs.push_back({"run", path + ": the replay stopped before its last call"});
    return report(*app, t, path, update, has_outcome);
}

}  // namespace hcasim
