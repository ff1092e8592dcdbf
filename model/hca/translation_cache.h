// A set-associative cache with least-recently-used replacement, the on-chip store of the
// translation unit's MPT entries and MTT lines. Tags are the table indices the lines hold.
// Fixed storage after construction: no allocation on lookups.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <vector>

namespace hcasim {

template <class Line>
class translation_cache {
public:
    /// `entries` lines in sets of `ways` (entries must be a multiple of ways; ways >= 1).
    translation_cache(unsigned entries, unsigned ways) { resize(entries, ways); }

    void resize(unsigned entries, unsigned ways) {
        if (ways == 0 || entries == 0 || entries % ways)
            throw std::invalid_argument("translation cache: entries must be a positive multiple of ways");
        ways_ = ways;
        sets_ = entries / ways;
        slots_.assign(entries, slot{});
        clock_ = 0;
    }
    unsigned entries() const { return unsigned(slots_.size()); }
    unsigned ways() const { return ways_; }

    /// The line holding `tag`, or nullptr (a miss). A hit becomes the most recently used.
    Line* find(uint64_t tag) {
        slot* s = set_of(tag);
        for (unsigned w = 0; w < ways_; ++w)
            if (s[w].valid && s[w].tag == tag) {
                s[w].used = ++clock_;
                return &s[w].line;
            }
        return nullptr;
    }
    /// A line for `tag` to fill: an invalid way of its set, else the least recently used one.
    Line& insert(uint64_t tag) {
        slot* s = set_of(tag);
        slot* victim = &s[0];
        for (unsigned w = 0; w < ways_; ++w) {
            if (!s[w].valid) {
                victim = &s[w];
                break;
            }
            if (s[w].used < victim->used)
                victim = &s[w];
        }
        victim->valid = true;
        victim->tag = tag;
        victim->used = ++clock_;
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
    uint64_t clock_ = 0;
};

}  // namespace hcasim
