// A FIFO whose entries appended at one simulated instant are kept in an order the owner gives
// (`before`), not in call order: the transport engine's ready FIFOs of QPNs. SystemC runs the processes due at one instant in an
// order nothing in the model fixes (docs/fabric.md, "Same-time events"), so two of them that
// queue a QP each at one instant would otherwise leave the queue in the kernel's order.
//
// Cheap on the hot path: it remembers the instant of the last append and where that instant's
// group starts; an append at the same instant moves back past the group's larger entries (a
// group holds a few), nothing is allocated. Entries taken out of the group meanwhile (the
// consumer runs at the same instant) stay taken: the order applies to what is still queued.
#pragma once
#include <cstdint>
#include <utility>

#include <systemc>

#include "model/core/ring.h"

namespace hcasim {

template <class T>
class same_time_fifo {
public:
    /// A FIFO of `slots` entries (it never grows: a push needs room).
    explicit same_time_fifo(size_t slots) : r_(slots) {}

    size_t size() const { return r_.size(); }
    bool empty() const { return r_.empty(); }
    const T& front() const { return r_.front(); }
    const T& operator[](size_t i) const { return r_[i]; }

    /// Appends `e` at simulated time `now`: behind every entry appended at an earlier instant,
    /// ahead of those appended at `now` that `before(e, them)`, a strict weak order.
    template <class Before>
    void push_back(const T& e, const sc_core::sc_time& now, const Before& before) {
        if (now != group_at_) {
            group_at_ = now;
            group_begin_ = popped_ + r_.size();
        }
        r_.push_back(e);
        const size_t first = group_begin_ > popped_ ? size_t(group_begin_ - popped_) : 0;
        for (size_t i = r_.size() - 1; i > first && before(e, r_[i - 1]); --i) std::swap(r_[i], r_[i - 1]);
    }
    void pop_front() {
        r_.pop_front();
        ++popped_;
    }

private:
    ring<T> r_;
    sc_core::sc_time group_at_;  // the instant of the last append
    uint64_t popped_ = 0;        // entries taken so far
    uint64_t group_begin_ = 0;   // the number (counted like popped_) of that instant's first entry
};

}  // namespace hcasim
