// A set-associative on-chip cache: the translation unit's MPT entries and MTT lines, the
// transport engine's QP contexts and the CQ writer's CQ contexts. Tags are the table indices
// the lines hold; a miss is served by the owner (a DMA read of the host-memory table).
// Replacement: least recently used, first in first out, or random (a per-cache xorshift
// generator with a fixed seed, so runs are deterministic). Set index: the tag mod the number of
// sets (consecutive tags never conflict before the cache is full), or a randomising hash of
// the tag, under which tags conflict in a set before the cache is full (balls into bins: with
// N tags in S sets of W ways, the sets that draw more than W thrash while others have room).
// Fixed storage after construction: no allocation on lookups.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "model/core/param.h"

namespace hcasim {

enum class replacement : uint8_t { lru, fifo, random };
/// How a tag picks its set: tag mod sets, or index_hash(tag) mod sets.
enum class set_index : uint8_t { mod, hash };

/// Allowed sizes of a cache: its unit's `*_entries` (or `*_lines`) and `*_ways` parameters.
inline bounds<unsigned> cache_entries_bounds() { return {1, 1u << 24}; }
inline bounds<unsigned> cache_ways_bounds() { return {1, 64}; }

/// The description of every cache's `*_index` parameter (default "mod", choices mod and hash).
inline constexpr const char* cache_index_help =
    "set index: mod (tag mod sets: consecutive tags fill every set before any conflicts) or hash (a "
    "randomising hash of the tag: tags conflict in a set before the cache is full)";

/// "lru" | "fifo" | "random" (the choices of every *_cache_policy parameter).
inline replacement replacement_of(const std::string& s) {
    if (s == "fifo") return replacement::fifo;
    if (s == "random") return replacement::random;
    if (s == "lru") return replacement::lru;
    throw std::invalid_argument("cache replacement policy '" + s + "' is not lru, fifo or random");
}

/// "mod" | "hash" (the choices of every *_cache_index parameter).
inline set_index set_index_of(const std::string& s) {
    if (s == "mod") return set_index::mod;
    if (s == "hash") return set_index::hash;
    throw std::invalid_argument("cache set index '" + s + "' is not mod or hash");
}

/// The set-index hash of a tag: murmur3's 32-bit finalizer, a bijection that scatters
/// consecutive tags like a random function. (A linear XOR hash, the H3 class, would not do:
/// it maps an aligned run of consecutive tags onto the sets as evenly as mod does.)
inline uint32_t index_hash(uint32_t tag) {
    tag ^= tag >> 16;
    tag *= 0x85EBCA6Bu;
    tag ^= tag >> 13;
    tag *= 0xC2B2AE35u;
    tag ^= tag >> 16;
    return tag;
}

/// Tag-only caches (the QP and CQ context caches decide timing; the state itself is kept by
/// the unit) use this as their line.
struct no_line {};

template <class Line>
class onchip_cache {
public:
    /// `entries` lines in sets of `ways` (entries must be a multiple of ways; ways >= 1).
    onchip_cache(unsigned entries, unsigned ways, replacement policy = replacement::lru,
                 set_index index = set_index::mod) {
        resize(entries, ways, policy, index);
    }

    void resize(unsigned entries, unsigned ways, replacement policy = replacement::lru,
                set_index index = set_index::mod) {
        if (ways == 0 || entries == 0 || entries % ways)
            throw std::invalid_argument("on-chip cache: entries must be a positive multiple of ways");
        ways_ = ways;
        sets_ = entries / ways;
        policy_ = policy;
        index_ = index;
        entries_ = entries;
        // 64-byte aligned: a set of 8 ways is one host cache line (16K-QP runs touch a cold set
        // per lookup).
        ways_store_.reset(new (std::align_val_t(64)) way[entries]);
        if constexpr (!std::is_empty_v<Line>) lines_.assign(entries, Line{});
        clear();
        clock_ = 0;
        rng_ = 0x9E3779B97F4A7C15ull;
    }
    /// Sizes the cache from its unit's parameters (`*_entries` or `*_lines`, `*_ways`,
    /// `*_policy`, `*_index`, declared with cache_entries_bounds() and cache_ways_bounds()):
    /// entries a multiple of ways, else a config_error naming both.
    void configure(const param<unsigned>& entries, const param<unsigned>& ways,
                   const param<std::string>& policy, const param<std::string>& index) {
        if (entries % ways) {
            const std::string& w = ways.key();
            throw config_error(entries.key() + ": " + std::to_string(entries.get()) +
                               " is not a multiple of " + w.substr(w.rfind('.') + 1) + " (" +
                               std::to_string(ways.get()) + ")");
        }
        resize(entries, ways, replacement_of(policy), set_index_of(index));
    }
    unsigned entries() const { return entries_; }
    /// Tests: moves the use clock forward to `to` (to reach its 32-bit wrap quickly).
    void advance_clock_for_test(uint32_t to) { clock_ = std::max(clock_, to); }
    unsigned ways() const { return ways_; }
    replacement policy() const { return policy_; }
    set_index index() const { return index_; }

    /// The line holding `tag`, or nullptr (a miss). Under LRU a hit becomes the most recently used.
    Line* find(uint64_t tag) {
        if (tag >= INVALID) return nullptr;
        const size_t s = first_of(tag);
        way* w = &ways_store_[s];
        for (unsigned i = 0; i < ways_; ++i)
            if (w[i].tag == tag) {
                if (policy_ == replacement::lru) w[i].used = stamp();
                return line_at(s + i);
            }
        return nullptr;
    }
    bool contains(uint64_t tag) const {
        if (tag >= INVALID) return false;
        const way* w = &ways_store_[first_of(tag)];
        for (unsigned i = 0; i < ways_; ++i)
            if (w[i].tag == tag) return true;
        return false;
    }
    /// Starts loading `tag`'s set into the host CPU's cache (a simulator speed-up: no effect
    /// on the model).
    void prefetch(uint64_t tag) const { __builtin_prefetch(&ways_store_[first_of(tag)]); }
    /// A line for `tag` to fill: an invalid way of its set, else the victim the policy picks
    /// (`evicted` tells whether a valid line was replaced). Tags are table indices below 2^32 - 1.
    Line& insert(uint64_t tag, bool* evicted = nullptr) {
        if (tag >= INVALID)
            throw std::out_of_range("on-chip cache: tag " + std::to_string(tag) + " out of range");
        const size_t s = first_of(tag);
        way* w = &ways_store_[s];
        unsigned victim = ways_;
        for (unsigned i = 0; i < ways_ && victim == ways_; ++i)
            if (w[i].tag == INVALID) victim = i;
        if (evicted) *evicted = victim == ways_;
        if (victim == ways_) {
            if (policy_ == replacement::random) {
                rng_ ^= rng_ << 13;
                rng_ ^= rng_ >> 7;
                rng_ ^= rng_ << 17;
                victim = unsigned(rng_ % ways_);
            } else {  // LRU and FIFO: the oldest stamp (FIFO stamps only on fill)
                victim = 0;
                for (unsigned i = 1; i < ways_; ++i)
                    if (w[i].used < w[victim].used) victim = i;
            }
        }
        const uint32_t t = stamp();  // may renumber the set's stamps: before the fill
        w[victim].tag = uint32_t(tag);
        w[victim].used = t;
        Line* l = line_at(s + victim);
        *l = Line{};
        return *l;
    }
    /// Drops `tag` if cached.
    void invalidate(uint64_t tag) {
        if (tag >= INVALID) return;
        way* w = &ways_store_[first_of(tag)];
        for (unsigned i = 0; i < ways_; ++i)
            if (w[i].tag == tag) w[i].tag = INVALID;
    }
    void clear() {
        for (unsigned i = 0; i < entries_; ++i) ways_store_[i] = way{};
    }

private:
    static constexpr uint32_t INVALID = ~uint32_t(0);
    /// One way: its tag (INVALID: empty) and its use stamp (LRU: last use; FIFO: fill), side
    /// by side so that a set's lookup and victim choice read one run of bytes.
    struct way {
        uint32_t tag = INVALID;
        uint32_t used = 0;
    };
    struct aligned_delete {
        void operator()(way* p) const { ::operator delete[](p, std::align_val_t(64)); }
    };
    size_t first_of(uint64_t tag) const {
        const uint64_t key = index_ == set_index::hash ? index_hash(uint32_t(tag)) : tag;
        return size_t(key % sets_) * ways_;
    }
    Line* line_at(size_t i) {
        if constexpr (std::is_empty_v<Line>) {
            (void)i;
            return &no_line_;
        } else {
            return &lines_[i];
        }
    }
    /// The next stamp. Stamps are 32 bits: when the clock wraps, every set's stamps are
    /// renumbered 1..ways in their order, which keeps each set's order (all replacement looks
    /// at) exactly as with unbounded stamps.
    uint32_t stamp() {
        if (clock_ == ~uint32_t(0)) {
            std::vector<unsigned> order(ways_);
            for (size_t s = 0; s < entries_; s += ways_) {
                way* w = &ways_store_[s];
                for (unsigned i = 0; i < ways_; ++i) order[i] = i;
                std::stable_sort(order.begin(), order.end(),
                                 [w](unsigned a, unsigned b) { return w[a].used < w[b].used; });
                for (unsigned r = 0; r < ways_; ++r) w[order[r]].used = r + 1;
            }
            clock_ = ways_;
        }
        return ++clock_;
    }
    std::unique_ptr<way[], aligned_delete> ways_store_;
    std::vector<Line> lines_;  // by way index (none for tag-only caches)
    Line no_line_{};
    unsigned entries_ = 0, ways_ = 1, sets_ = 1;
    replacement policy_ = replacement::lru;
    set_index index_ = set_index::mod;
    uint32_t clock_ = 0;
    uint64_t rng_ = 0;
};

}  // namespace hcasim
