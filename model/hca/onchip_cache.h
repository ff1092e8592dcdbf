// A set-associative on-chip cache: the translation unit's MPT entries and MTT lines, the
// transport engine's QP contexts and the CQ writer's CQ contexts. Tags are the table indices
// the lines hold; a miss is served by the owner (a DMA read of the host-memory table).
// Replacement: least recently used, first in first out, or random (a per-cache xorshift
// generator with a fixed seed, so runs are deterministic).
// Fixed storage after construction: no allocation on lookups.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/core/param.h"

namespace hcasim {

enum class replacement : uint8_t { lru, fifo, random };

/// "lru" | "fifo" | "random" (the choices of every *_cache_policy parameter).
inline replacement replacement_of(const std::string& s) {
    if (s == "fifo")
        return replacement::fifo;
    if (s == "random")
        return replacement::random;
    if (s == "lru")
        return replacement::lru;
    throw std::invalid_argument("cache replacement policy '" + s + "' is not lru, fifo or random");
}

/// Tag-only caches (the QP and CQ context caches decide timing; the state itself is kept by
/// the unit) use this as their line.
struct no_line {};

template <class Line>
class onchip_cache {
public:
    /// `entries` lines in sets of `ways` (entries must be a multiple of ways; ways >= 1).
    onchip_cache(unsigned entries, unsigned ways, replacement policy = replacement::lru) {
        resize(entries, ways, policy);
    }

    void resize(unsigned entries, unsigned ways, replacement policy = replacement::lru) {
        if (ways == 0 || entries == 0 || entries % ways)
            throw std::invalid_argument("on-chip cache: entries must be a positive multiple of ways");
        ways_ = ways;
        sets_ = entries / ways;
        policy_ = policy;
        slots_.assign(entries, slot{});
        clock_ = 0;
        rng_ = 0x9E3779B97F4A7C15ull;
    }
    /// Sizes the cache from its unit's three parameters (`*_entries` or `*_lines`, `*_ways`,
    /// `*_policy`): ranges checked, entries a multiple of ways, else a config_error naming both.
    void configure(param<unsigned>& entries, param<unsigned>& ways, const param<std::string>& policy) {
        entries.range(1, 1u << 24);
        ways.range(1, 64);
        if (entries % ways) {
            const std::string& w = ways.key();
            throw config_error(entries.key() + ": " + std::to_string(entries.get()) + " is not a multiple of " +
                               w.substr(w.rfind('.') + 1) + " (" + std::to_string(ways.get()) + ")");
        }
        resize(entries, ways, replacement_of(policy));
    }
    unsigned entries() const { return unsigned(slots_.size()); }
    unsigned ways() const { return ways_; }
    replacement policy() const { return policy_; }

    /// The line holding `tag`, or nullptr (a miss). Under LRU a hit becomes the most recently used.
    Line* find(uint64_t tag) {
        slot* s = set_of(tag);
        for (unsigned w = 0; w < ways_; ++w)
            if (s[w].valid && s[w].tag == tag) {
                if (policy_ == replacement::lru)
                    s[w].used = ++clock_;
                return &s[w].line;
            }
        return nullptr;
    }
    bool contains(uint64_t tag) const {
        const slot* s = &slots_[(tag % sets_) * ways_];
        for (unsigned w = 0; w < ways_; ++w)
            if (s[w].valid && s[w].tag == tag)
                return true;
        return false;
    }
    /// A line for `tag` to fill: an invalid way of its set, else the victim the policy picks
    /// (`evicted` tells whether a valid line was replaced).
    Line& insert(uint64_t tag, bool* evicted = nullptr) {
        slot* s = set_of(tag);
        slot* victim = nullptr;
        for (unsigned w = 0; w < ways_ && !victim; ++w)
            if (!s[w].valid)
                victim = &s[w];
        if (evicted)
            *evicted = victim == nullptr;
        if (!victim) {
            if (policy_ == replacement::random) {
                rng_ ^= rng_ << 13;
                rng_ ^= rng_ >> 7;
                rng_ ^= rng_ << 17;
                victim = &s[rng_ % ways_];
            } else {  // LRU and FIFO: the oldest stamp (FIFO stamps only on fill)
                victim = &s[0];
                for (unsigned w = 1; w < ways_; ++w)
                    if (s[w].used < victim->used)
                        victim = &s[w];
            }
        }
        victim->valid = true;
        victim->tag = tag;
        victim->used = ++clock_;
        victim->line = Line{};
        return victim->line;
    }
    /// Drops `tag` if cached.
    void invalidate(uint64_t tag) {
        slot* s = set_of(tag);
        for (unsigned w = 0; w < ways_; ++w)
            if (s[w].valid && s[w].tag == tag)
                s[w].valid = false;
    }
    void clear() {
        for (auto& s : slots_)
            s.valid = false;
    }

private:
    struct slot {
        bool valid = false;
        uint64_t tag = 0;
        uint64_t used = 0;
        Line line{};
    };
    slot* set_of(uint64_t tag) { return &slots_[(tag % sets_) * ways_]; }
    std::vector<slot> slots_;
    unsigned ways_ = 1, sets_ = 1;
    replacement policy_ = replacement::lru;
    uint64_t clock_ = 0;
    uint64_t rng_ = 0;
};

}  // namespace hcasim
