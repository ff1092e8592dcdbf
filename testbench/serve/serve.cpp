// `hcasim serve`: see serve.h and docs/libibverbs.md. This file holds the command line, the
// socket and the main loop; the server module is server.h (server.cpp, requests.cpp).
//
// One OS thread. The main loop alternates between the sockets (accepting clients, reading their
// messages into per-connection inboxes) and the simulation (sc_start in slices while anything is
// scheduled). With no scheduled activity it blocks in poll(), so a simulation whose clients all
// wait costs no CPU. Each connection is served by one SystemC thread that executes its requests
// in order, in simulated time, through the node's firmware (the kernel half of the driver); a
// per-node mutex keeps the firmware single-threaded, and one more thread per node plays the
// interrupt handler (processes the event queue, forwards completion and async events).
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "testbench/serve/serve.h"

#include <systemc>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/core/log.h"
#include "model/core/output_file.h"
#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "provider/fd_passing.h"
#include "provider/protocol.h"
#include "testbench/cli/presets.h"
#include "testbench/cli/report.h"
#include "testbench/serve/fake_sysfs.h"
#include "testbench/serve/server.h"
#include "testbench/workloads/workloads.h"

namespace hcasim {

using namespace sc_core;
using serve::client_limits;
using serve::connection;
using serve::MAX_INBOX;
using serve::server;

namespace {

/// The address of socket `path`; false (and *err) if the path is too long.
bool socket_address(const std::string& path, sockaddr_un* a, std::string* err) {
    *a = sockaddr_un{};
    if (path.size() >= sizeof a->sun_path) {
        *err = "--socket " + path + ": path too long";
        return false;
    }
    a->sun_family = AF_UNIX;
    std::memcpy(a->sun_path, path.c_str(), path.size() + 1);
    return true;
}

/// Whether the server may listen at `path`: nothing is there, or a socket nobody listens on (a
/// server that is gone), which it removes. A file that is not a socket, or a live server's
/// socket, is refused (*err): a second server must not take the first's clients.
bool claim_socket_path(const std::string& path, std::string* err) {
    sockaddr_un a;
    if (!socket_address(path, &a, err)) return false;
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            *err = "--socket " + path + ": exists and is not a socket (left as it is)";
            return false;
        }
        // Non-blocking: a live server with a full backlog says EAGAIN rather than keep us waiting.
        const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        const int e = probe < 0                                                        ? errno
                      : connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0
                                                                                       : errno;
        if (probe >= 0) close(probe);
        if (e == 0) {
            *err = "--socket " + path + ": a server is listening there already";
            return false;
        }
        if (e != ECONNREFUSED) {
            *err = "--socket " + path + ": cannot tell whether a server listens there (" + std::strerror(e) +
                   ")";
            return false;
        }
        unlink(path.c_str());  // stale: its server is gone
    }
    return true;
}

/// Listens on `path` (claim_socket_path), a socket file of mode 0600 (0666 with `other_users`);
/// *ino is its inode. The socket is bound and listening under a temporary name first and then
/// linked to `path`: a client that sees the file (with-simhca.sh and the tests wait for it) can
/// connect at once, and link() refuses to replace a server that took the path meanwhile.
int listen_on(const std::string& path, bool other_users, ino_t* ino, std::string* err) {
    sockaddr_un a;
    if (!claim_socket_path(path, err) || !socket_address(path, &a, err)) return -1;
    std::string tmp = path + ".new" + std::to_string(getpid()), too_long;
    const bool in_place = !socket_address(tmp, &a, &too_long);  // no room for the other name
    if (in_place) {
        tmp = path;
        socket_address(path, &a, err);
    }
    struct stat st {};
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err = std::string("socket: ") + std::strerror(errno);
        return -1;
    }
    if (!in_place) unlink(tmp.c_str());  // left by a server of this PID that died before linking it
    // bind() creates the file with the socket's mode: never more than 0600 before the chmod.
    const bool ok = fchmod(fd, 0600) == 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    listen(fd, 64) == 0 && (!other_users || chmod(tmp.c_str(), 0666) == 0) &&
                    (in_place || ::link(tmp.c_str(), path.c_str()) == 0) && stat(path.c_str(), &st) == 0;
    const int e = errno;
    if (!in_place) unlink(tmp.c_str());
    if (!ok) {
        *err = "--socket " + path +
               (e == EEXIST ? ": another server took the path meanwhile"
                            : std::string(": cannot listen there: ") + std::strerror(e));
        close(fd);
        return -1;
    }
    *ino = st.st_ino;
    return fd;
}

namespace po = boost::program_options;

/// What `hcasim serve` was asked for.
struct serve_options {
    std::string socket;
    client_limits limits;
    double quantum_ns = 0;
    std::string stats_json;  // --stats-json: written when the server stops ("": none)
    run_spec outputs;        // --pcap, --timeline (+ window, nodes): as the default command's
    std::vector<std::string> command_line;
    std::string date;      // when the server started, for the stats JSON
    po::variables_map vm;  // --config, --set, --verbose, --sysfs
};

/// Parses and checks the command line into *o; returns -1 to go on, else the exit status
/// (--help: 0, a bad option: 2, with one line on stderr).
int parse_options(int argc, char* argv[], serve_options* o) {
    po::options_description od(
        "hcasim serve: simulated HCAs for libibverbs applications (docs/libibverbs.md)");
    od.add_options()("help,h", "this help")("socket", po::value<std::string>()->default_value("hcasim.sock"),
                                            "Unix socket the provider connects to (the provider reads "
                                            "HCASIM_SOCKET); made 0600, refused if the path "
                                            "holds anything but a socket nobody listens on")(
        "allow-other-users",
        "serve clients of other Unix users too (socket 0666; otherwise they get EACCES)")(
        "max-contexts-per-client", po::value<unsigned>()->default_value(64),
        "device contexts one client process may have open at a time (more: EDQUOT)")(
        "max-mapped-mib-per-client", po::value<uint64_t>()->default_value(4096),
        "MiB of registered buffers one client process may have in simulated memory (more: EDQUOT)")(
        "sysfs", po::value<std::string>(),
        "write a sysfs tree describing the HCAs under this directory (for libibverbs' SYSFS_PATH)")(
        "config", po::value<std::vector<std::string>>()->composing(),
        "INI file of parameters, or a preset by name (hdr-cx6; hcasim --list-presets) (repeatable)")(
        "set", po::value<std::vector<std::string>>()->composing(),
        "key=value parameter override (repeatable)")(
        "log", po::value<std::vector<std::string>>()->composing(),
        "log a module's decisions to standard error: MODULE=off|info|debug (repeatable; docs/usage.md)")(
        "quantum-ns", po::value<double>()->default_value(10000.0),
        "longest gap between two events the simulation runs "
        "through at full speed; across longer gaps simulated "
        "time advances no faster than wall-clock time")(
        "stats-json", po::value<std::string>(),
        "when the server stops, write the statistics here: "
        "every counter, the configuration, and the model's "
        "latency of the clients' operations per QP and opcode")(
        "pcap", po::value<std::string>(), "capture every cable into this directory (docs/traces.md)")(
        "timeline", po::value<std::string>(), "write a Chrome trace-event timeline here (traces/README.md)")(
        "record", po::value<std::string>(),
        "write the clients' verbs as a trace for hcasim replay here (traces/README.md; RC and UC)")(
        "timeline-window", po::value<std::string>(),
        "--timeline keeps only START_NS:END_NS of simulated time")(
        "timeline-nodes", po::value<std::string>(), "--timeline keeps only these nodes, e.g. 0,1")(
        "verbose,v", "log every client's requests and events to stderr");
    po::variables_map& vm = o->vm;
    try {
        po::store(po::command_line_parser(argc - 1, argv + 1).options(od).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        std::cerr << "hcasim: error: serve: " << e.what() << "\n";
        return 2;
    }
    if (vm.count("help")) {
        std::cout << od << "\n";
        return 0;
    }
    const double quantum_ns = o->quantum_ns = vm["quantum-ns"].as<double>();
    if (!(quantum_ns >= 1.0 && quantum_ns <= 1e9)) {
        std::cerr << "hcasim: error: serve: --quantum-ns must be 1 .. 1e9\n";
        return 2;
    }
    client_limits& limits = o->limits;
    limits.contexts = vm["max-contexts-per-client"].as<unsigned>();
    const uint64_t mib = vm["max-mapped-mib-per-client"].as<uint64_t>();
    limits.other_users = vm.count("allow-other-users") > 0;
    if (limits.contexts < 1 || limits.contexts > hw::MAX_UARS) {
        std::cerr << "hcasim: error: serve: --max-contexts-per-client must be 1 .. " << hw::MAX_UARS << "\n";
        return 2;
    }
    if (mib < 1 || mib > (uint64_t(1) << 24)) {  // memory.size_bytes is at most 2^44
        std::cerr << "hcasim: error: serve: --max-mapped-mib-per-client must be 1 .. 16777216\n";
        return 2;
    }
    limits.mapped_bytes = mib << 20;
    o->socket = vm["socket"].as<std::string>();
    // The output files are checked before the boot: the statistics of a long session must not be
    // lost to a path that cannot be written.
    try {
        auto given = [&](const char* k) { return vm.count(k) ? &vm[k].as<std::string>() : nullptr; };
        run_spec& out = o->outputs;
        out.timeline_only =
            timeline_filter::parse(given("timeline-window"), given("timeline-nodes"), vm.count("timeline"));
        if (vm.count("stats-json"))
            output_file::check(o->stats_json = vm["stats-json"].as<std::string>(), "--stats-json");
        if (vm.count("timeline"))
            output_file::check(out.timeline = vm["timeline"].as<std::string>(), "--timeline");
        if (vm.count("record")) output_file::check(out.record = vm["record"].as<std::string>(), "--record");
        if (vm.count("pcap") && (out.pcap_dir = vm["pcap"].as<std::string>()).empty())
            throw config_error("--pcap: expected a directory");
        o->command_line.assign(argv, argv + argc);
        if (!o->stats_json.empty()) o->date = run_date();
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: serve: " << e.what() << "\n";
        return 2;
    }
    return -1;
}

/// The main loop, until SIGINT / SIGTERM (`sfd`): the sockets (clients connecting, their messages
/// read), then the simulation.
//
// Simulated time. While events follow each other closely (within the quantum) the simulation
// runs as fast as it can, one event time per sc_start (stopping 1 ps after it, so that time
// never jumps past a moment a client message could have arrived in). Across a longer gap
// (a timer far ahead, or a cancelled one the kernel still keeps) simulated time advances no
// faster than wall-clock time: a client that takes a while to post its next request meets the
// same timers it would meet on hardware, and the reported simulated time is not inflated by
// jumps to notifications nobody waits for.
void serve_clients(server* srv, int sfd, int lfd, const sc_time& quantum) {
    const sc_time step_past(1, SC_PS);
    auto run_burst = [&] {
        // At most ~2 ms of wall time, then the sockets get a look.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
        for (unsigned n = 0; sc_pending_activity(); ++n) {
            const sc_time dt = sc_time_to_pending_activity();
            if (dt > quantum) break;
            sc_start(dt + step_past, SC_EXIT_ON_STARVATION);
            if ((n & 255) == 255 && std::chrono::steady_clock::now() > until) break;
        }
    };
    // Out of descriptors (EMFILE, ENFILE), accept() fails and leaves the listening socket
    // readable: polled again at once it would spin. It is left out of the poll for a while
    // instead; new clients wait in the backlog, connected ones are served meanwhile.
    const auto accept_backoff = std::chrono::milliseconds(100);
    std::chrono::steady_clock::time_point accept_again{};
    bool short_of_fds = false;
    bool stop = false;
    bool in_gap = false;
    sc_time gap_start;
    std::chrono::steady_clock::time_point gap_end;
    while (!stop) {
        std::vector<connection*> conns = srv->live();
        std::vector<pollfd> pf;
        pf.push_back({sfd, POLLIN, 0});
        const auto now = std::chrono::steady_clock::now();
        const bool accepting = now >= accept_again;
        pf.push_back({lfd, short(accepting ? POLLIN : 0), 0});
        // A connection whose inbox is full is watched only for its client going away.
        for (connection* c : conns)
            pf.push_back({c->fd, short(c->inbox.size() < MAX_INBOX ? POLLIN : POLLRDHUP), 0});
        int wait_ms = -1;  // nothing scheduled: sleep until a client or a signal comes
        if (sc_pending_activity()) {
            const sc_time dt = sc_time_to_pending_activity();
            wait_ms = 0;
            if (dt > quantum) {  // a gap: let wall-clock time catch up with it
                if (!in_gap || gap_start != sc_time_stamp()) {
                    in_gap = true;
                    gap_start = sc_time_stamp();
                    gap_end = now + std::chrono::nanoseconds(int64_t(dt.to_seconds() * 1e9));
                }
                if (gap_end > now)
                    wait_ms =
                        int(std::chrono::duration_cast<std::chrono::milliseconds>(gap_end - now).count()) + 1;
            }
        }
        if (!accepting) {
            const int left =
                int(std::chrono::duration_cast<std::chrono::milliseconds>(accept_again - now).count()) + 1;
            if (wait_ms < 0 || wait_ms > left) wait_ms = left;
        }
        if (poll(pf.data(), pf.size(), wait_ms) < 0 && errno != EINTR) {
            std::perror("hcasim serve: poll");
            break;
        }
        if (pf[0].revents) stop = true;
        if (pf[1].revents & POLLIN)
            for (;;) {
                const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                        accept_again = std::chrono::steady_clock::now() + accept_backoff;
                        if (!short_of_fds)
                            std::fprintf(
                                stderr,
                                "hcasim serve: cannot accept a client (%s): trying again every %lld ms\n",
                                std::strerror(errno), static_cast<long long>(accept_backoff.count()));
                        short_of_fds = true;
                    }
                    break;
                }
                short_of_fds = false;
                srv->accept(fd);
            }
        for (size_t i = 0; i < conns.size(); ++i) {
            if (!pf[i + 2].revents) continue;
            if (pf[i + 2].events & POLLIN)
                srv->read_client(*conns[i]);
            else
                srv->hang_up(*conns[i]);
        }
        if (!sc_pending_activity()) continue;
        if (sc_time_to_pending_activity() <= quantum) {
            in_gap = false;
            run_burst();
        } else if (in_gap && std::chrono::steady_clock::now() >= gap_end) {
            in_gap = false;
            sc_start(sc_time_to_pending_activity() + step_past, SC_EXIT_ON_STARVATION);
        }
    }
}

/// The closing lines: what the simulation did, in total and per node, and the clients'
/// operations.
void print_statistics(const machine* m, const server* srv) {
    const stats_registry& st = stats_registry::instance();
    std::printf(
        "hcasim serve: stopped at simulated time %.0f ns: %llu wire packets, %llu requests, %llu doorbells "
        "served\n",
        sc_time_stamp().to_seconds() * 1e9, static_cast<unsigned long long>(st.sum("port.tx_packets")),
        static_cast<unsigned long long>(srv->served_requests()),
        static_cast<unsigned long long>(srv->served_doorbells()));
    for (unsigned i = 0; i < m->size(); ++i) {
        auto v = [&](const char* k) {
            const counter* c = st.find("node" + std::to_string(i) + ".hca." + k);
            return static_cast<unsigned long long>(c ? c->value() : 0);
        };
        std::printf(" node%u: tx %llu packets / %llu bytes, rx %llu packets, %llu CQEs, %llu doorbells\n", i,
                    v("port.tx_packets"), v("port.tx_bytes"), v("port.rx_packets"), v("cq_writer.cqes"),
                    v("doorbell_unit.writes"));
    }
    srv->operations().print_summary(stdout);
}

/// --stats-json: the default command's stats JSON (the "run" block, "sim", "counters",
/// "config"; no "results") with the server's own figures and the clients' operations.
void write_stats_json(const serve_options& o, const server* srv, double wall_s) {
    run_report r;
    r.workload = "serve";
    r.sim_time_ns = uint64_t(sc_time_stamp().to_seconds() * 1e9);
    r.wall_s = wall_s;
    r.wire_packets = stats_registry::instance().sum("port.tx_packets");
    nlohmann::ordered_json j = to_json({r});
    for (const char* k : {"seed", "qps", "results"}) j.erase(k);  // a workload's, not the server's
    j["serve"] = {{"requests", srv->served_requests()}, {"doorbells", srv->served_doorbells()}};
    j["clients"] = srv->operations().to_json();
    write_json_file(o.stats_json, with_run(std::move(j), o.command_line, o.date));
}

}  // namespace

int serve_main(int argc, char* argv[]) {
    serve_options o;
    if (const int status = parse_options(argc, argv, &o); status >= 0) return status;
    const po::variables_map& vm = o.vm;
    const client_limits& limits = o.limits;
    const std::string& sock_path = o.socket;
    if (std::string err; !claim_socket_path(sock_path, &err)) {  // before the boot, which takes a while
        std::cerr << "hcasim: error: serve: " << err << "\n";
        return 2;
    }
    std::unique_ptr<machine> m;
    std::unique_ptr<server> srv;
    std::unique_ptr<timeline> tl;
    std::unique_ptr<serve::recording> rec;
    try {
        broker& b = broker::instance();
        if (vm.count("config"))
            for (const auto& f : vm["config"].as<std::vector<std::string>>()) b.load_ini(resolve_config(f));
        if (vm.count("set"))
            for (const auto& s : vm["set"].as<std::vector<std::string>>()) b.set_override(s);
        if (vm.count("log"))
            for (const auto& l : vm["log"].as<std::vector<std::string>>()) log_settings::instance().set(l);
        m = std::make_unique<machine>();
        srv = std::make_unique<server>("serve", *m, vm.count("verbose") > 0, limits);
        b.check_unused();
        tl = attach_timeline(o.outputs, m.get());
        if (!o.outputs.record.empty()) {
            rec = std::make_unique<serve::recording>(o.outputs.record, *m);
            srv->set_recording(rec.get());
        }
        if (!o.outputs.pcap_dir.empty()) m->capture_to(o.outputs.pcap_dir);
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: serve: " << e.what() << "\n";
        return 2;
    }
    sc_report_handler::set_actions(SC_ID_NO_SC_START_ACTIVITY_, SC_DO_NOTHING);

    // SIGINT / SIGTERM end the server through the poll loop.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);
    const int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);

    const sc_time quantum(o.quantum_ns, SC_NS);
    // Boot: every driver up, every port active (at full speed: nobody is waiting yet).
    auto boot_slice = [&] {
        sc_time dt = sc_time_to_pending_activity();
        if (dt < quantum) dt = quantum;
        sc_start(dt, SC_EXIT_ON_STARVATION);
    };
    // Boot: every driver up, every port active, and (fabric.sm.program=smp) the switches
    // programmed by the subnet manager before any application may send.
    sc_start(SC_ZERO_TIME);
    auto booting = [&] { return !srv->all_up() || (m->net.has_sm() && !m->net.sm->programmed()); };
    while (booting() && srv->boot_error().empty() && m->fabric_error().empty() && sc_pending_activity())
        boot_slice();
    if (!m->fabric_error().empty()) {
        std::cerr << "hcasim: error: serve: " << m->fabric_error() << "\n";
        return 1;
    }
    if (!srv->all_up()) {
        const std::string e = srv->boot_error();
        std::cerr << "hcasim: error: serve: " << (e.empty() ? "the HCAs did not come up" : e) << "\n";
        return 1;
    }
    if (vm.count("sysfs")) {
        const std::string dir = vm["sysfs"].as<std::string>();
        if (const std::string e = write_fake_sysfs(dir, srv->devices()); !e.empty()) {
            std::cerr << "hcasim: error: serve: --sysfs " << dir << ": " << e << "\n";
            return 2;
        }
    }
    std::string err;
    ino_t sock_ino = 0;
    const int lfd = listen_on(sock_path, limits.other_users, &sock_ino, &err);
    if (lfd < 0) {
        std::cerr << "hcasim: error: serve: " << err << "\n";
        return 2;
    }
    std::printf("hcasim serve: %zu HCAs (hcasim0..hcasim%zu) ready at %s, simulated time %.0f ns\n",
                m->size(), m->size() - 1, sock_path.c_str(), sc_time_stamp().to_seconds() * 1e9);
    std::fflush(stdout);

    const auto wall0 = std::chrono::steady_clock::now();
    serve_clients(srv.get(), sfd, lfd, quantum);
    close(lfd);
    struct stat sock_st {};  // the socket file, unless someone has put another there meanwhile
    if (lstat(sock_path.c_str(), &sock_st) == 0 && sock_st.st_ino == sock_ino) unlink(sock_path.c_str());
    print_statistics(m.get(), srv.get());
    try {
        if (!m->captures().empty()) close_captures(*m);
        if (tl) tl->close();
        if (rec) srv->end_recording();
        if (!o.stats_json.empty())
            write_stats_json(o, srv.get(),
                             std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count());
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: serve: " << e.what() << "\n";
        return 2;
    }
    std::cout.flush();
    return 0;
}

}  // namespace hcasim
