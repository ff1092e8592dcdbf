// Counter registry; see stats.h.
#include "stats.h"

#include <map>

#include "param.h"

namespace hcasim {

stats_registry& stats_registry::instance() {
    static stats_registry r;
    return r;
}

void stats_registry::declare(counter* c) { counters_.add(c); }

void stats_registry::undeclare(counter* c) { counters_.remove(c); }

uint64_t stats_registry::sum(const std::string& suffix) const {
    uint64_t total = 0;
    for (const counter* c : counters()) {
        const std::string& k = c->key();
        const bool match =
            k == suffix || (k.size() > suffix.size() && k[k.size() - suffix.size() - 1] == '.' &&
                            k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0);
        if (match) total += c->value();
    }
    return total;
}

const counter* stats_registry::find(const std::string& key) const {
    for (const counter* c : counters())
        if (c->key() == key) return c;
    return nullptr;
}

std::string counter_pattern(const std::string& key) {
    std::string out;
    out.reserve(key.size());
    size_t start = 0;
    for (size_t dot; (dot = key.find('.', start)) != std::string::npos; start = dot + 1) {
        size_t end = dot;
        while (end > start && key[end - 1] >= '0' && key[end - 1] <= '9') --end;
        out.append(key, start, end - start);
        if (end != dot) out += 'N';
        out += '.';
    }
    return out.append(key, start, std::string::npos);
}

std::unordered_map<const counter*, uint64_t> stats_registry::snapshot() const {
    std::unordered_map<const counter*, uint64_t> m;
    m.reserve(counters().size());
    for (const counter* c : counters()) m.emplace(c, c->value());
    return m;
}

std::vector<std::pair<std::string, uint64_t>> stats_registry::changes_since(
    const std::unordered_map<const counter*, uint64_t>& before) const {
    std::vector<std::pair<std::string, uint64_t>> out;
    for (const counter* c : counters()) {
        const auto it = before.find(c);
        const uint64_t was = it == before.end() ? 0 : it->second;
        if (c->value() != was) out.emplace_back(c->key(), c->value() - was);
    }
    return out;
}

std::vector<counter_info> stats_registry::help() const {
    std::map<std::string, counter_info> by_pattern;
    for (const counter* c : counters()) {
        std::string p = counter_pattern(c->key());
        by_pattern.emplace(p, counter_info{p, c->unit(), c->help()});
    }
    std::vector<counter_info> out;
    out.reserve(by_pattern.size());
    for (auto& kv : by_pattern) out.push_back(std::move(kv.second));
    return out;
}

counter::counter(const char* name, const char* help, const char* unit)
    : key_(scoped_key(name)), help_(help ? help : ""), unit_(unit) {
    stats_registry::instance().declare(this);
}

counter::~counter() { stats_registry::instance().undeclare(this); }

std::string counter::unit() const {
    auto ends = [this](const char* suffix) {
        const std::string s(suffix);
        return key_.size() > s.size() && key_.compare(key_.size() - s.size(), s.size(), s) == 0;
    };
    if (ends("_ps")) return "ps";
    const size_t dot = key_.rfind('.');
    const std::string name = key_.substr(dot == std::string::npos ? 0 : dot + 1);
    if (name == "bytes" || ends("_bytes") || name.compare(0, 6, "bytes_") == 0) return "bytes";
    if (ends("_cycles")) return "cycles";
    return unit_ ? unit_ : "count";
}

}  // namespace hcasim
