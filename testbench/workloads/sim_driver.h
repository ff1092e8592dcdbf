// Runs the simulation of a many-node workload, in one process or as one rank of several (each
// its own SystemC kernel holding a part of the fabric, docs/fabric.md "Partitioned runs"), with
// the same results either way:
//
// - Conservative windows: every rank simulates [now, max(g + L, h)), g the least next event time
//   over the ranks, L the lookahead (the least propagation of a cut cable) and h the least of
//   the ranks' horizons (what their switches hold cannot cross a cut sooner); then the ranks swap
//   what crossed a cut (isl_channel's outboxes, due no sooner than L after they were sent, so
//   never inside the window just run) and agree on the next g. One process: no windows.
// - Barriers instead of zero-time coordination between the nodes' processes: a party arrives
//   with a payload (what it tells the others out of band) and waits; every party is released at
//   the last arrival + the barrier's delay (an out-of-band exchange takes time; it must be at
//   least L so every rank knows the time before it comes). At that instant, before any event
//   of it, the barrier's action runs on every rank with every party's payload, in party order.
// - A stop (an action asks for it) ends the run at its instant on every rank; an error (a
//   process called sc_stop) ends it at the end of the window it happened in.
#pragma once
#include <systemc>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/core/rank_comm.h"
#include "model/fabric/isl_channel.h"

namespace hcasim::workloads {

class sim_driver {
public:
    /// One party's payload, every party's in party order.
    using payloads = std::vector<std::vector<uint64_t>>;
    using action = std::function<void(const payloads&)>;
    /// This rank's horizon: no message it sends on a cut cable is due sooner, given its next
    /// event time (fabric::cut_horizon).
    using horizon =
        std::function<sc_core::sc_time(const sc_core::sc_time& now, const sc_core::sc_time& next)>;

    /// `comm`: the ranks (nullptr: one process); `isl`: the fabric's switch-to-switch cables
    /// (nullptr: none); `lookahead`: their least cut propagation (> 0 with more than one rank).
    /// `horizon` (optional) widens a window past the least next event + lookahead when every
    /// rank's horizon lies further.
    sim_driver(rank_comm* comm, isl_channel* isl, const sc_core::sc_time& lookahead, horizon h = nullptr);

    /// A barrier of `parties` released `delay` after the last arrival, running `at_release`
    /// first; its index. Declare them in the same order on every rank, before run().
    unsigned barrier(unsigned parties, const sc_core::sc_time& delay, action at_release);
    /// From party `party`'s SC_THREAD: arrives at barrier `b` with `payload` and returns when
    /// it is released (once per party).
    void arrive(unsigned b, unsigned party, std::vector<uint64_t> payload);
    /// From an action: the run ends at this instant.
    void stop() { stop_ = true; }

    /// Simulates until a stop, an error (sc_stop) or nothing is left to do on any rank.
    void run();
    /// Windows simulated, messages received from other ranks (partitioned runs).
    uint64_t windows() const { return windows_; }
    uint64_t messages_in() const { return bytes_in_; }
    double sync_wall_s() const { return sync_wall_s_; }

private:
    struct arrival {
        uint32_t barrier, party;
        uint64_t at_ps;
        std::vector<uint64_t> payload;
    };
    struct barrier_state {
        unsigned parties = 0;
        sc_core::sc_time delay;
        action at_release;
        std::vector<std::vector<uint64_t>> payload;
        std::vector<bool> arrived;
        unsigned count = 0;
        uint64_t last_ps = 0;
        uint64_t release_ps = UINT64_MAX;  // known once every party has arrived
        bool done = false;
        std::unique_ptr<sc_core::sc_event> released;
    };
    void record(const arrival& a);
    uint64_t next_action_ps() const;
    uint64_t least_delay_ps() const;
    bool run_actions(uint64_t now_ps);
    void exchange(std::vector<uint64_t>& least);

    rank_comm* comm_;
    isl_channel* isl_;
    horizon horizon_;
    uint64_t lookahead_ps_;
    std::vector<barrier_state> barriers_;
    std::vector<arrival> outgoing_;  // this rank's arrivals not yet sent to the others
    bool stop_ = false;
    uint64_t windows_ = 0, bytes_in_ = 0;
    double sync_wall_s_ = 0;
};

}  // namespace hcasim::workloads
