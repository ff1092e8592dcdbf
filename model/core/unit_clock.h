// A unit's clock. Every HCA unit has a `clock_mhz` parameter: 0 (the default) runs it at the
// HCA's core clock (`hca.clock_mhz`), a positive value gives it a clock of its own, so its
// cycle parameters (latencies, initiation intervals) count cycles of that clock.
#pragma once
#include <systemc>

#include <string>

#include "model/core/param.h"

namespace hcasim {

/// Allowed clocks, MHz: 1 MHz to 10 GHz (`hca.clock_mhz`).
inline bounds<double> clock_bounds() { return {1, 10000}; }
/// Allowed `clock_mhz` of a unit: a clock of its own, or 0 (the HCA's).
inline bounds<double> unit_clock_bounds() { return {1, 10000, 0.0}; }

/// The period of a unit whose `clock_mhz` parameter is `mhz` (0: `hca_clock`).
inline sc_core::sc_time unit_period(const param<double>& mhz, const sc_core::sc_time& hca_clock) {
    return mhz.get() > 0 ? sc_core::sc_time(1e3 / mhz.get(), sc_core::SC_NS) : hca_clock;
}

}  // namespace hcasim
