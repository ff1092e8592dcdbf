// --speed and --bench-events: how fast the simulator ran (wall-clock figures, not deterministic).
#include <systemc>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "testbench/cli/commands.h"

namespace hcasim::cli {

namespace {

/// --bench-events: the raw SystemC timed-event rate of this machine (the unit of the simulator's
/// cost per packet). One SC_METHOD re-notifies itself 1 ns ahead `n` times.
struct event_ticker : sc_core::sc_module {
    uint64_t count = 0, limit;
    SC_HAS_PROCESS(event_ticker);
    event_ticker(sc_core::sc_module_name name, uint64_t n) : sc_module(name), limit(n) { SC_METHOD(tick); }
    void tick() {
        if (++count < limit) next_trigger(1, sc_core::SC_NS);
    }
};

/// The event rate of this machine now, from `hcasim --bench-events` in a child process (the
/// simulation of this process is over; a fresh one is needed). 0 if it could not be measured.
double measure_event_rate() {
    std::fflush(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return 0;
    const pid_t pid = fork();
    if (pid < 0) return 0;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        execl("/proc/self/exe", "hcasim", "--bench-events", "5000000", static_cast<char*>(nullptr));
        _exit(127);
    }
    close(fds[1]);
    std::string out;
    char buf[256];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
    close(fds[0]);
    int ws = 0;
    waitpid(pid, &ws, 0);
    const size_t at = out.find("wall, ");
    return at == std::string::npos ? 0 : std::strtod(out.c_str() + at + 6, nullptr);
}

}  // namespace

int bench_events(uint64_t n) {
    event_ticker t("event_ticker", n);
    const auto start = std::chrono::steady_clock::now();
    sc_core::sc_start();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("SystemC timed events: %llu in %.3f s wall, %.0f per second\n",
                static_cast<unsigned long long>(t.count), s, s > 0 ? double(t.count) / s : 0.0);
    return 0;
}

/// --speed: the simulator's speed for the run just done (wall-clock figures: not deterministic).
void print_speed(const nlohmann::ordered_json& j) {
    const double total = j["sim"]["wall_s"].get<double>();
    // The traffic phases' wall time: QP creation, memory registration and teardown excluded
    // (they are not per-packet work; with 16K QPs they take longer than the traffic).
    const double traffic = j["sim"].value("traffic_wall_s", 0.0);
    const double wall = traffic > 0 ? traffic : total;
    const double packets = j["sim"]["wire_packets"].get<double>();
    const double sim_s = j["sim"]["sim_time_ns"].get<double>() * 1e-9;
    const double pps = wall > 0 ? packets / wall : 0;
    const double events = measure_event_rate();
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::printf(
        " speed: %.0f wire packets in %.2f s wall: %.0f packets per wall second; slowdown %.1fx "
        "(simulated %.3f ms; the whole run, setup included, took %.2f s)\n",
        packets, wall, pps, sim_s > 0 ? wall / sim_s : 0.0, sim_s * 1e3, total);
    if (events > 0 && pps > 0)
        std::printf(
            " speed: this machine runs %.0f SystemC timed events per second: %.1f event-equivalents per "
            "wire packet\n",
            events, events / pps);
    uint64_t pages = 0;
    for (const auto& [key, value] : j["counters"].items())
        if (key.size() > 13 && key.compare(key.size() - 13, 13, ".memory.pages") == 0)
            pages += value.get<uint64_t>();
    std::printf(
        " speed: max RSS %.1f MiB, of which simulated host memory %.1f MiB (rings, buffers, tables)\n",
        double(ru.ru_maxrss) / 1024.0, double(pages) * 4096.0 / (1024.0 * 1024.0));
    // Per-QP model state as the engines count it (transport engine + WQE fetcher; every QPN
    // slot of hca.max_qps charged to the QPs that exist).
    for (const auto& [key, value] : j["counters"].items()) {
        const std::string suffix = ".transport_engine.state_bytes";
        if (key.size() <= suffix.size() ||
            key.compare(key.size() - suffix.size(), suffix.size(), suffix) != 0)
            continue;
        const std::string node = key.substr(0, key.size() - suffix.size());
        const auto qps = j["counters"].find(node + ".transport_engine.state_qps");
        if (qps == j["counters"].end() || qps->get<uint64_t>() == 0) continue;
        const auto slots = j["counters"].find(node + ".transport_engine.state_slot_bytes");
        const double slot_bytes = slots == j["counters"].end() ? 0.0 : slots->get<double>();
        std::printf(
            " speed: %s: model state %.0f bytes per QP (%llu QPs), plus %.0f KiB for all QP numbers "
            "(hca.max_qps); together %.0f bytes per QP\n",
            node.c_str(), value.get<double>() / qps->get<double>(),
            static_cast<unsigned long long>(qps->get<uint64_t>()), slot_bytes / 1024.0,
            (value.get<double>() + slot_bytes) / qps->get<double>());
    }
}

}  // namespace hcasim::cli
