// The transport engine's shared WQE buffer: parsed send WQEs on chip, shared by all QPs
// (`wqe_buffer_entries`). Each QP's queue is a list of entries (wqe_list), oldest first; free
// entries form a free list. An entry stays allocated after its WQE leaves the QP's queue while
// a READ or atomic awaits its response (its local SGEs receive the data).
#pragma once
#include <cstdint>
#include <memory>
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
    /// `entries` free entries. Their storage grows as they are first taken (in the order the
    /// free list would hand them out), so a node whose QPs keep few WQEs on chip does not hold
    /// all of them (2,048 entries of 720 bytes per HCA by default).
    void resize(uint32_t entries) {
        chunks_.clear();
        next_.clear();
        free_head_ = NIL;
        capacity_ = entries;
        used_ = 0;
    }
    send_wqe& operator[](uint32_t e) { return chunks_[e / chunk][e % chunk]; }
    const send_wqe& operator[](uint32_t e) const { return chunks_[e / chunk][e % chunk]; }
    uint32_t free_count() const { return capacity_ - used_; }
    /// Entries in use.
    uint64_t used() const { return used_; }

    /// Copies `w` into a free entry at the end of the list.
    void append(wqe_list& l, const send_wqe& w) {
        // Only if the fetcher overran its credit: the buffer grows rather than lose a WQE.
        if (used_ == capacity_) ++capacity_;
        uint32_t e = free_head_;
        if (e == NIL) {  // no entry freed so far: the next never used
            e = uint32_t(next_.size());
            if (e % chunk == 0) chunks_.push_back(std::make_unique<send_wqe[]>(chunk));
            next_.push_back(NIL);
        } else {
            free_head_ = next_[e];
        }
        ++used_;
        (*this)[e].assign_used(w);
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
        --used_;
    }

private:
    // The entries taken at least once, in chunks that never move (a reference to an entry
    // outlives the buffer's growth).
    static constexpr uint32_t chunk = 64;
    std::vector<std::unique_ptr<send_wqe[]>> chunks_;
    std::vector<uint32_t> next_;  // next entry of a QP's list or of the free list
    uint32_t free_head_ = NIL;    // entries freed, most recent first (then those never taken)
    uint32_t capacity_ = 0, used_ = 0;
};

}  // namespace hcasim
