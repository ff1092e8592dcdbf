// sc_time from a count of picoseconds or nanoseconds, for hot paths. sc_time(v, SC_PS) is an
// out-of-line call into the SystemC library (it looks up the simulation context and the time
// resolution every time); these give the same value inline.
//
// Why the same: SystemC 2.3.4 computes sc_time(v, unit) as v x (unit / resolution) + 0.5,
// truncated. The resolution is a power of ten femtoseconds, so when it is at most `unit` the
// factor unit / resolution is an exact integer power of ten, which is sc_time(1, unit).value();
// sc_time::operator*=(double) computes value x v + 0.5 and truncates, inline, in the same
// double arithmetic (through a volatile, as the library does). With a resolution coarser than
// the unit (never set in hcasim) they fall back to the library constructor.
#pragma once
#include <cstdint>

#include <systemc>

namespace hcasim {

/// sc_time_stamp(), inline: the library's is an out-of-line call; the simulation context's
/// time_stamp() it returns is inline in the header.
inline const sc_core::sc_time& sim_now() { return sc_core::sc_get_curr_simcontext()->time_stamp(); }

namespace detail {
inline sc_core::sc_time scaled(const sc_core::sc_time& unit, double v, sc_core::sc_time_unit u) {
    if (unit.value() == 0) return sc_core::sc_time(v, u);
    sc_core::sc_time t = unit;
    t *= v;
    return t;
}
}  // namespace detail

/// sc_time(ps, SC_PS), inline.
inline sc_core::sc_time ps_time(double ps) {
    static const sc_core::sc_time unit(1.0, sc_core::SC_PS);
    return detail::scaled(unit, ps, sc_core::SC_PS);
}

/// sc_time(ns, SC_NS), inline.
inline sc_core::sc_time ns_time(double ns) {
    static const sc_core::sc_time unit(1.0, sc_core::SC_NS);
    return detail::scaled(unit, ns, sc_core::SC_NS);
}

/// t / sc_time(1, SC_PS) (a double), without constructing the divisor each time.
inline double in_ps(const sc_core::sc_time& t) {
    static const sc_core::sc_time unit(1.0, sc_core::SC_PS);
    return t / unit;
}

/// uint64_t(t / sc_time(1, SC_PS) + 0.5): t in whole picoseconds. With a 1 ps resolution that
/// is t.value() itself (exactly, below 2^52 ps, about 75 minutes).
inline uint64_t ps_count(const sc_core::sc_time& t) {
    static const bool ps_resolution = sc_core::sc_time(1.0, sc_core::SC_PS).value() == 1;
    if (ps_resolution && t.value() < (uint64_t(1) << 52)) return t.value();
    return uint64_t(in_ps(t) + 0.5);
}

/// t / sc_time(1, SC_NS) (a double), without constructing the divisor each time.
inline double in_ns(const sc_core::sc_time& t) {
    static const sc_core::sc_time unit(1.0, sc_core::SC_NS);
    return t / unit;
}

/// uint64_t(t / sc_time(1, SC_NS)): t in whole nanoseconds, rounded down. With a 1 ps
/// resolution, integer division by 1000 gives the same below 2^40 ps (18 minutes), where the
/// double quotient cannot round up to the next integer.
inline uint64_t ns_floor(const sc_core::sc_time& t) {
    static const bool ps_resolution = sc_core::sc_time(1.0, sc_core::SC_PS).value() == 1;
    if (ps_resolution && t.value() < (uint64_t(1) << 40)) return t.value() / 1000;
    return uint64_t(in_ns(t));
}

}  // namespace hcasim
