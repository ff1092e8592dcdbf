// Counter registry; see stats.h.
#include "stats.h"

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

counter::counter(const char* name, const char* help) : key_(scoped_key(name)), help_(help ? help : "") {
    stats_registry::instance().declare(this);
}

counter::~counter() { stats_registry::instance().undeclare(this); }

}  // namespace hcasim
