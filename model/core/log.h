// Per-module logging through sc_report (VCML style): a module owns a `module_log` named after
// its hierarchical name (`node0.hca.transport_engine`), which is also the sc_report message
// type of its lines. `--log PATTERN=LEVEL` (repeatable) sets the level of the modules PATTERN
// names, before elaboration:
//   --log node0.hca.transport_engine=debug   one module
//   --log hca.transport_engine=debug         that module in every node (like config keys)
//   --log 'node1.*=info'                     a glob over hierarchical names
// Levels: off (the default), info (what a unit decides: retransmissions, NAKs, errors, state
// changes), debug (info and every packet/transaction). A line goes to standard error as
//   [   1234.567 ns] node0.hca.transport_engine: QP 0x11 go-back-N from PSN 42
// A pattern that names no module fails the run like an unknown configuration key.
//
// Free when off: HCASIM_LOG tests one byte of the module before it formats anything.
#pragma once
#include <systemc>

#include <cstdint>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace hcasim {

enum class log_level : uint8_t { off = 0, info = 1, debug = 2 };

/// The --log settings of the run. One per process (one simulation per process), like the
/// parameter broker.
class log_settings {
public:
    static log_settings& instance();
    /// Parses "PATTERN=LEVEL" (--log). Throws config_error naming the argument on bad syntax
    /// or an unknown level.
    void set(const std::string& assignment);
    /// The level of the module with hierarchical name `name`: the last matching pattern wins.
    /// Marks the patterns that match.
    log_level level_for(const std::string& name);
    /// Throws config_error for a pattern that matched no module (called by
    /// broker::check_unused, after elaboration).
    void check_unused() const;
    void reset();

private:
    struct entry {
        std::string pattern, assignment;
        log_level level;
        bool used = false;
    };
    std::vector<entry> entries_;
    std::set<std::string> modules_;  ///< generic names of the modules that log, for errors
};

/// A module's log: construct it as a member of an sc_module (its name is then the module's
/// hierarchical name), use it through HCASIM_LOG.
class module_log {
public:
    module_log();
    bool on(log_level l) const { return l != log_level::off && l <= level_; }
    /// Emits one line (use HCASIM_LOG, which tests on() first).
    void write(log_level l, const std::string& text) const;
    const std::string& name() const { return name_; }

private:
    std::string name_;
    log_level level_ = log_level::off;
};

}  // namespace hcasim

/// HCASIM_LOG(log_, debug, "QP " << qpn << " ...") — formats and emits only when on.
#define HCASIM_LOG(log, level, stream_expr)                                \
    do {                                                                   \
        if ((log).on(::hcasim::log_level::level)) {                        \
            std::ostringstream hcasim_log_os_;                             \
            hcasim_log_os_ << stream_expr;                                 \
            (log).write(::hcasim::log_level::level, hcasim_log_os_.str()); \
        }                                                                  \
    } while (0)
