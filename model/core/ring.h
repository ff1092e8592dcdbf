// A FIFO ring in a vector, indexed modulo the vector's size: the transport engine's per-QP
// window, READ/atomic contexts and response queue, and its ready FIFOs of QPNs.
//
// Its slots are allocated when it is constructed with a size or when its owner grows it
// (grow(): doubling up to a limit, so an idle QP holds none); it never grows on its own, so a
// push needs room (full() false). An entry keeps its slot while it is in the ring: a slot
// number (slot_of_back(), slot()) names an entry until the ring grows (grow() re-lays the
// entries out from slot 0; the owner renumbers what it keeps). Debug builds assert the
// invariants (count within the slots, head a slot, pops of a non-empty and pushes into a
// non-full ring); release builds compile the checks out.
#pragma once
#include <cassert>
#include <cstddef>
#include <utility>
#include <vector>

namespace hcasim {

template <class T>
class ring {
public:
    ring() = default;
    /// A ring of `slots` entries from the start.
    explicit ring(size_t slots) : v_(slots) {}

    /// Entries held.
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    /// Entries it can hold without growing.
    size_t slots() const { return v_.size(); }
    bool full() const { return count_ == v_.size(); }
    /// Entries allocated (for the model-state byte counts).
    size_t capacity() const { return v_.capacity(); }

    /// The oldest entry, the newest one, the i-th oldest.
    T& front() { return v_[check_head()]; }
    const T& front() const { return v_[check_head()]; }
    T& back() {
        assert(count_ > 0);
        return v_[(head_ + count_ - 1) % v_.size()];
    }
    T& operator[](size_t i) {
        assert(i < count_);
        return v_[(head_ + i) % v_.size()];
    }
    const T& operator[](size_t i) const {
        assert(i < count_);
        return v_[(head_ + i) % v_.size()];
    }
    /// An entry by its slot number.
    T& slot(size_t s) {
        assert(s < v_.size());
        return v_[s];
    }
    /// The slot of the oldest entry.
    size_t head_slot() const { return head_; }

    /// Appends an entry (its slot keeps what it held: the caller sets it); returns its slot.
    size_t push() {
        assert(count_ < v_.size());
        const size_t s = (head_ + count_) % v_.size();
        ++count_;
        return s;
    }
    void push_back(const T& e) { v_[push()] = e; }
    void pop_front() {
        assert(count_ > 0 && head_ < v_.size());
        head_ = (head_ + 1) % v_.size();
        --count_;
    }
    /// Takes back the newest entry (a push that turned out not to be wanted).
    void pop_back() {
        assert(count_ > 0);
        --count_;
    }
    /// Drops every entry (the slots stay allocated).
    void clear() { count_ = 0; }

    /// Re-lays the entries out from slot 0 in `slots` slots (at least size()).
    void grow(size_t slots) {
        assert(slots >= count_);
        std::vector<T> g(slots);
        for (size_t i = 0; i < count_; ++i) g[i] = v_[(head_ + i) % v_.size()];
        v_.swap(g);
        head_ = 0;
    }

private:
    size_t check_head() const {
        assert(count_ > 0 && count_ <= v_.size() && head_ < v_.size());
        return head_;
    }
    std::vector<T> v_;
    size_t head_ = 0, count_ = 0;
};

}  // namespace hcasim
