#include "testbench/workloads/chaff.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "model/core/param.h"

namespace hcasim::workloads {

using namespace sc_core;

std::unique_ptr<chaff> chaff::from_env() {
    const char* env = std::getenv("HCASIM_CHAFF");
    if (!env || !*env) return nullptr;
    const std::string s = env;
    if (s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
        throw config_error("HCASIM_CHAFF=" + s +
                           ": not a seed (a decimal number; unset it to run without chaff)");
    return std::make_unique<chaff>("hcasim_chaff", std::stoull(s));
}

chaff::chaff(sc_module_name name, uint64_t seed) : sc_module(name), due_(events, SC_ZERO_TIME), rng_(seed) {
    SC_METHOD(wake);  // runs at initialisation: queues every event
    for (unsigned i = 0; i < events; ++i) {
        ev_.push_back(std::make_unique<sc_event>());
        sensitive << *ev_.back();
    }
}

bool chaff::model_active() {
    if (sc_pending_activity_at_current_time()) return true;
    const sc_time now = sc_time_stamp();
    sc_time first = sc_max_time();  // the chaff's earliest queued event
    for (const sc_time& t : due_)
        if (t > now) first = std::min(first, t);
    if (sc_pending_activity_at_future_time() && now + sc_time_to_pending_activity() < first) return true;
    // Something may be due with the chaff's earliest event, or nothing at all: cancel the
    // chaff's events (they are re-queued if the model goes on) and ask the kernel again.
    for (unsigned i = 0; i < events; ++i) {
        ev_[i]->cancel();
        due_[i] = now;
    }
    return sc_pending_activity();
}

void chaff::wake() {
    // Without activity of its own the model has starved: the chaff stops and sc_start returns.
    if (!model_active()) return;
    const sc_time now = sc_time_stamp();
    for (unsigned i = 0; i < events; ++i)
        if (due_[i] <= now) {
            const sc_time d(double(1 + rng_() % max_delay_ps), SC_PS);
            due_[i] = now + d;
            ev_[i]->notify(d);
        }
}

}  // namespace hcasim::workloads
