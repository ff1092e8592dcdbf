// The transport engine's shared WQE buffer: parsed send WQEs on chip, shared by all QPs
// (`wqe_buffer_entries`). Each QP's queue is a list of entries (wqe_list), oldest first; free
// entries form a free list. An entry stays allocated after its WQE leaves the QP's queue while
// a READ or atomic awaits its response (its local SGEs receive the data).
#pragma once
#include <cstdint>
#include <vector>

#include "model/hca/work_request.h"

namespace hcasim {

/// A QP's parsed WQEs: a list of WQE buffer entries, oldest first.
struct wqe_list {
    static constexpr uint32_t NIL = ~uint32_t(0);
    uint32_t head = NIL, tail = NIL;
    uint32_t count = 0;
};

class wqe_buffer {
public:
    static constexpr uint32_t NIL = wqe_list::NIL;
    /// `entries` free entries.
    void resize(uint32_t entries) {
        wqe_.resize(entries);
        next_.resize(entries);
        for (uint32_t e = 0; e < entries; ++e) next_[e] = e + 1 < entries ? e + 1 : NIL;
        free_head_ = 0;
        free_count_ = entries;
    }
    send_wqe& operator[](uint32_t e) { return wqe_[e]; }
    const send_wqe& operator[](uint32_t e) const { return wqe_[e]; }
    uint32_t free_count() const { return free_count_; }
    /// Entries in use.
    uint64_t used() const { return wqe_.size() - free_count_; }

    /// Copies `w` into a free entry at the end of the list.
    void append(wqe_list& l, const send_wqe& w) {
        if (free_head_ == NIL) {
            // Only if the fetcher overran its credit: the buffer grows rather than lose a WQE.
            const uint32_t e = uint32_t(wqe_.size());
            wqe_.emplace_back();
            next_.push_back(NIL);
            free_head_ = e;
            ++free_count_;
        }
        const uint32_t e = free_head_;
        free_head_ = next_[e];
        --free_count_;
        wqe_[e].assign_used(w);
        next_[e] = NIL;
        if (l.tail == NIL)
            l.head = e;
        else
            next_[l.tail] = e;
        l.tail = e;
        ++l.count;
    }
    /// Takes the head entry off the list; returns it (still allocated).
    uint32_t detach_head(wqe_list& l) {
        const uint32_t e = l.head;
        l.head = next_[e];
        if (l.head == NIL) l.tail = NIL;
        --l.count;
        return e;
    }
    /// Puts an entry back on the free list.
    void release(uint32_t e) {
        next_[e] = free_head_;
        free_head_ = e;
        ++free_count_;
    }

private:
    std::vector<send_wqe> wqe_;
    std::vector<uint32_t> next_;  // next entry of a QP's list or of the free list
    uint32_t free_head_ = NIL, free_count_ = 0;
};

}  // namespace hcasim
