// See meter.h.
#include "testbench/workloads/meter.h"

#include <systemc>

#include <algorithm>

namespace hcasim::workloads {

run_meter::run_meter(const run_spec& spec) : obs_(spec.observer), spec_(spec) {
    constexpr double message_packets = 3;  // what a message costs beside its packets
    double all = 0;
    for (const phase_spec& p : spec.phases) {
        cost_.emplace_back();
        // A *_lat iteration is a round trip: two messages (ping and pong, request and response).
        const size_t n = p.workload.size();
        const double messages = n > 4 && p.workload.compare(n - 4, 4, "_lat") == 0 ? 2 : 1;
        for (uint64_t s : p.sizes) {
            const double packets = double((s + spec.mtu - 1) / spec.mtu);
            cost_.back().push_back(double(p.iters) * messages * (std::max(packets, 1.0) + message_packets));
            all += cost_.back().back();
        }
    }
    for (auto& c : cost_)
        for (double& x : c) x = all > 0 ? x / all : 0;
}

void run_meter::phase_begin(size_t phase, const run_report& rep) {
    phase_ = phase;
    before_ = 0;
    for (size_t p = 0; p < phase && p < cost_.size(); ++p)
        for (double x : cost_[p]) before_ += x;
    if (obs_) obs_->phase_begin(rep);
}

void run_meter::size_begin(size_t si, uint64_t total, const char* unit, bool counted) {
    if (si > 0 && phase_ < cost_.size() && si - 1 < cost_[phase_].size()) before_ += cost_[phase_][si - 1];
    size_ = si;
    total_ = total;
    unit_ = unit;
    counted_ = counted;
    if (counted) c0_ = stats_registry::instance().snapshot();
    if (obs_) report(0);
}

void run_meter::row(run_report& rep) {
    size_result& s = rep.results.back();
    if (counted_) s.counters = stats_registry::instance().changes_since(c0_);
    if (obs_) obs_->row(rep, s);
}

void run_meter::phase_end(const run_report& rep) {
    if (obs_) obs_->phase_end(rep);
}

void run_meter::report(uint64_t done) {
    next_ = done + std::max<uint64_t>(1, total_ / 100);
    run_progress p;
    const phase_spec& ph = spec_.phases[std::min(phase_, spec_.phases.size() - 1)];
    p.workload = ph.workload;
    p.size_index = size_;
    p.sizes = ph.sizes.size();
    p.size = size_ < ph.sizes.size() ? ph.sizes[size_] : 0;
    p.done = done;
    p.total = total_;
    p.unit = unit_;
    p.sim_ns = uint64_t(sc_core::sc_time_stamp().to_seconds() * 1e9);
    const double here = phase_ < cost_.size() && size_ < cost_[phase_].size() ? cost_[phase_][size_] : 0;
    p.fraction = std::min(1.0, before_ + (total_ ? here * double(done) / double(total_) : 0));
    obs_->progress(p);
}

}  // namespace hcasim::workloads
