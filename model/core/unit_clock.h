// A unit's clock. Every HCA unit has a `clock_mhz` parameter: 0 (the default) runs it at the
// HCA's core clock (`hca.clock_mhz`), a positive value gives it a clock of its own, so its
// cycle parameters (latencies, initiation intervals) count cycles of that clock.
#pragma once
#include <systemc>

#include <string>

#include "model/core/param.h"

namespace hcasim {

/// The period of a unit whose `clock_mhz` parameter is `mhz` (0: `hca_clock`).
inline sc_core::sc_time unit_period(const param<double>& mhz, const sc_core::sc_time& hca_clock) {
    if (mhz.get() < 0)
        throw config_error(mhz.key() + ": " + std::to_string(mhz.get()) + " MHz is negative (0: the HCA's clock)");
    return mhz.get() > 0 ? sc_core::sc_time(1e3 / mhz.get(), sc_core::SC_NS) : hca_clock;
}

}  // namespace hcasim
