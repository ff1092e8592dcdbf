// Per-unit counters, reported in the stats JSON under their hierarchical names.
// A counter is a plain integer: incrementing it costs one add on the hot path.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/core/param.h"
#include "model/core/registry.h"

namespace hcasim {

class counter;

/// One counter as --help-stats lists it (stats_registry::help).
struct counter_info {
    std::string pattern;  ///< key with its instance numbers as N: "nodeN.hca.port.tx_packets"
    std::string unit;     ///< counter::unit()
    std::string help;     ///< one line
};

/// What an elaboration declares, for --help-config and --help-stats (run() without simulating).
struct elaboration_help {
    std::vector<param_info> params;
    std::vector<counter_info> counters;
};

/// `key` with the instance number of each module in its path written N ("node0.link.packets"
/// -> "nodeN.link.packets", "sw3.out12.fecn_marked" -> "swN.outN.fecn_marked"): every component
/// but the counter's own name loses its trailing digits. Counter names end in no digit.
std::string counter_pattern(const std::string& key);

/// Registry of all counters of this process (one simulation per process).
class stats_registry {
public:
    static stats_registry& instance();
    void declare(counter* c);
    void undeclare(counter* c);
    /// All counters, in declaration order (deterministic).
    const std::vector<counter*>& counters() const { return counters_.items(); }
    /// Sum of every counter whose key ends with `.suffix` (e.g. "port.tx_packets").
    uint64_t sum(const std::string& suffix) const;
    /// The counter with this exact key, or nullptr.
    const counter* find(const std::string& key) const;
    /// Every counter's value now (the start of a measured phase; see changes_since).
    std::unordered_map<const counter*, uint64_t> snapshot() const;
    /// The counters that changed since `before` (a snapshot(); a counter declared since counts
    /// from 0) and by how much, in declaration order.
    std::vector<std::pair<std::string, uint64_t>> changes_since(
        const std::unordered_map<const counter*, uint64_t>& before) const;
    /// Every counter once per pattern (counter_pattern), sorted; the first declared describes it.
    std::vector<counter_info> help() const;

private:
    slot_registry<counter> counters_;
};

class counter {
public:
    /// `name` is relative to the sc_module under construction ("tx_packets"). `unit` (a string
    /// literal) when the name does not say it: see unit().
    counter(const char* name, const char* help, const char* unit = nullptr);
    ~counter();
    counter(const counter&) = delete;
    counter& operator=(const counter&) = delete;

    counter& operator++() {
        ++value_;
        return *this;
    }
    counter& operator+=(uint64_t v) {
        value_ += v;
        return *this;
    }
    uint64_t value() const { return value_; }
    operator uint64_t() const { return value_; }
    /// Rank 0 of a partitioned run takes the value of the rank that simulated the unit.
    void set(uint64_t v) { value_ = v; }
    const std::string& key() const { return key_; }
    const std::string& help() const { return help_; }
    /// What one step of the counter is. The name says it: "_ps" (simulated time: every time
    /// counter is in ps, exact and whole), "bytes", "_bytes" or "bytes_...", "_cycles" (of the unit's
    /// clock); else the unit given at declaration (the IBA port counters': PortXmitWait's tick is
    /// 1 ns), else "count" (events or items).
    std::string unit() const;

private:
    uint64_t value_ = 0;
    std::string key_, help_;
    const char* unit_;
};

}  // namespace hcasim
