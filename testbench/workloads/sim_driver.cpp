#include "testbench/workloads/sim_driver.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

namespace hcasim::workloads {

using namespace sc_core;

namespace {
constexpr uint64_t never = UINT64_MAX;
uint64_t ps_of(const sc_time& t) { return uint64_t(t.value() / sc_time(1, SC_PS).value()); }
sc_time at_ps(uint64_t ps) { return sc_time(double(ps), SC_PS); }
uint64_t plus(uint64_t a, uint64_t b) { return a > never - b ? never : a + b; }

/// When this rank's kernel has something to do next (`never`: nothing).
uint64_t next_event_ps(uint64_t now) {
    if (sc_pending_activity_at_current_time()) return now;
    if (sc_pending_activity_at_future_time()) return now + ps_of(sc_time_to_pending_activity());
    return never;
}

void put(std::vector<uint8_t>& o, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) o.push_back(uint8_t(v >> (8 * i)));
}
uint64_t get(const std::vector<uint8_t>& in, size_t& at) {
    if (in.size() - at < 8) throw std::runtime_error("sim_driver: a truncated message from another rank");
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; ++i) v |= uint64_t(in[at + i]) << (8 * i);
    at += 8;
    return v;
}
}  // namespace

sim_driver::sim_driver(rank_comm* comm, isl_channel* isl, const sc_time& lookahead, horizon h)
    : comm_(comm && comm->size() > 1 ? comm : nullptr),
      isl_(isl),
      horizon_(std::move(h)),
      lookahead_ps_(ps_of(lookahead)) {
    if (comm_ && lookahead_ps_ == 0)
        throw std::logic_error("sim_driver: a partitioned run needs a lookahead above 0");
}

unsigned sim_driver::barrier(unsigned parties, const sc_time& delay, action at_release) {
    if (comm_ && ps_of(delay) < lookahead_ps_)
        throw std::logic_error("sim_driver: a barrier's delay below the lookahead");
    barrier_state b;
    b.parties = parties;
    b.delay = delay;
    b.at_release = std::move(at_release);
    b.payload.resize(parties);
    b.arrived.assign(parties, false);
    b.released = std::make_unique<sc_event>(sc_gen_unique_name("released"));
    barriers_.push_back(std::move(b));
    return unsigned(barriers_.size() - 1);
}

void sim_driver::record(const arrival& a) {
    barrier_state& b = barriers_.at(a.barrier);
    if (a.party >= b.parties || b.arrived[a.party])
        throw std::logic_error("sim_driver: a party arrived twice or is not one");
    b.arrived[a.party] = true;
    b.payload[a.party] = a.payload;
    b.last_ps = std::max(b.last_ps, a.at_ps);
    if (++b.count == b.parties) b.release_ps = b.last_ps + ps_of(b.delay);
}

void sim_driver::arrive(unsigned b, unsigned party, std::vector<uint64_t> payload) {
    arrival a{uint32_t(b), uint32_t(party), ps_of(sc_time_stamp()), std::move(payload)};
    if (comm_) outgoing_.push_back(a);
    record(a);
    // One process: the driver schedules the release between two sc_start calls.
    if (!comm_ && barriers_[b].count == barriers_[b].parties) sc_pause();
    wait(*barriers_[b].released);
}

uint64_t sim_driver::least_delay_ps() const {
    uint64_t d = never;
    for (const barrier_state& b : barriers_)
        if (!b.done) d = std::min(d, ps_of(b.delay));
    return d;
}

uint64_t sim_driver::next_action_ps() const {
    uint64_t t = never;
    for (const barrier_state& b : barriers_)
        if (!b.done) t = std::min(t, b.release_ps);
    return t;
}

bool sim_driver::run_actions(uint64_t now) {
    bool acted = false;
    for (barrier_state& b : barriers_) {
        if (b.done || b.release_ps > now) continue;
        if (b.release_ps < now) throw std::logic_error("sim_driver: a barrier released in the past");
        b.done = true;
        if (b.at_release) b.at_release(b.payload);
        b.released->notify(SC_ZERO_TIME);
        acted = true;
    }
    return acted;
}

void sim_driver::exchange(std::vector<uint64_t>& least) {
    const auto wall0 = std::chrono::steady_clock::now();
    const unsigned n = comm_->size(), me = comm_->rank();
    std::vector<uint8_t> arrivals;
    put(arrivals, outgoing_.size());
    for (const arrival& a : outgoing_) {
        put(arrivals, uint64_t(a.barrier) << 32 | a.party);
        put(arrivals, a.at_ps);
        put(arrivals, a.payload.size());
        for (uint64_t v : a.payload) put(arrivals, v);
    }
    outgoing_.clear();
    std::vector<std::vector<uint8_t>> out(n);
    for (unsigned r = 0; r < n; ++r) {
        if (r == me) continue;
        out[r] = arrivals;
        if (isl_) isl_->take_outbox(r, out[r]);
    }
    const std::vector<std::vector<uint8_t>> in = comm_->exchange(out, least);
    for (unsigned r = 0; r < n; ++r) {
        if (r == me) continue;
        const std::vector<uint8_t>& m = in.at(r);
        size_t at = 0;
        for (uint64_t k = get(m, at); k > 0; --k) {
            arrival a;
            const uint64_t who = get(m, at);
            a.barrier = uint32_t(who >> 32);
            a.party = uint32_t(who);
            a.at_ps = get(m, at);
            a.payload.resize(get(m, at));
            for (uint64_t& v : a.payload) v = get(m, at);
            record(a);
        }
        if (at < m.size()) {
            if (!isl_) throw std::runtime_error("sim_driver: cable messages without cables");
            bytes_in_ += m.size() - at;
            isl_->inject(std::vector<uint8_t>(m.begin() + std::ptrdiff_t(at), m.end()));
        }
    }
    sync_wall_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
}

void sim_driver::run() {
    bool stopped = false;  // a process called sc_stop (an error): the kernel cannot go on
    for (;;) {
        const uint64_t now = ps_of(sc_time_stamp());
        // Before the first sc_start the kernel has not initialised its processes: it has work at 0.
        uint64_t next = stopped ? never : windows_ == 0 ? now : next_event_ps(now);
        uint64_t reach = never;  // no message crosses a cut before
        if (comm_) {
            // What this rank sends now is due no sooner than `due`, and what that causes on its
            // rank crosses a cut again a lookahead later at the soonest.
            uint64_t due = never, h = never;
            if (isl_) {
                const sc_time t = isl_->take_least_outgoing_due();
                if (t != sc_max_time()) due = ps_of(t);
            }
            if (horizon_ && windows_ > 0) {
                const sc_time t = horizon_(at_ps(now), next == never ? sc_max_time() : at_ps(next));
                if (t != sc_max_time()) h = ps_of(t);
            }
            std::vector<uint64_t> least{std::min(next, due), stopped ? 0u : 1u,
                                        std::min(h, due == never ? never : due + lookahead_ps_)};
            exchange(least);
            next = least[0];
            stopped = least[1] == 0;
            // Both bound when the first message can cross a cut: nothing happens before the
            // least next event, and nothing a rank holds crosses before its horizon.
            // A party may arrive at a barrier from the next event on; its release, a barrier's delay
            // later, must come at a window's end or later.
            reach = next == never
                        ? never
                        : std::min(std::max(next + lookahead_ps_, least[2]), plus(next, least_delay_ps()));
        }
        // Every rank runs the same actions at the same instant; the processes they release run
        // at once, before what the horizons counted on.
        if (!stopped && run_actions(now)) {
            next = now;
            reach = now + lookahead_ps_;
        }
        if (stop_) break;
        const uint64_t action = next_action_ps();
        if (stopped || (next == never && action == never)) break;
        uint64_t end = action;
        if (comm_) end = std::min(end, reach);
        ++windows_;
        if (end == never)
            sc_start();
        else
            sc_start(at_ps(end - now));
        stopped = sc_get_status() == SC_STOPPED;
        if (stopped && !comm_) break;
    }
}

}  // namespace hcasim::workloads
