// Per-unit counters, reported in the stats JSON under their hierarchical names.
// A counter is a plain integer: incrementing it costs one add on the hot path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/core/registry.h"

namespace hcasim {

class counter;

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

private:
    slot_registry<counter> counters_;
};

class counter {
public:
    /// `name` is relative to the sc_module under construction ("tx_packets").
    counter(const char* name, const char* help);
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
    const std::string& key() const { return key_; }
    const std::string& help() const { return help_; }

private:
    uint64_t value_ = 0;
    std::string key_, help_;
};

}  // namespace hcasim
