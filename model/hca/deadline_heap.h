// The transport engine's deadlines: a min-heap of (time, order of setting) with at most one
// entry per QP, its earliest deadline (RNR wait or WQE fetch over, local ACK timeout, coalesced
// ACK due). An earlier deadline moves the QP's entry up in place (pos_), so no superseded
// entries pile up (they did, one per QP context miss: the miss's wait superseded the QP's ACK
// timeout, tens of thousands of entries with 16384 QPs). O(log n) per deadline, whatever the
// number of QPs; ties go in the order the deadlines were set.
#pragma once
#include <systemc>

#include <cstdint>
#include <vector>

namespace hcasim {

class deadline_heap {
public:
    static constexpr uint32_t NIL = ~uint32_t(0);
    /// Room for QPNs 0 .. max_qps-1.
    explicit deadline_heap(size_t max_qps) : pos_(max_qps, NIL) {}

    /// The QP has a deadline at `at`: its entry is added, or moved earlier. False if it already
    /// had one at or before `at` (nothing changed).
    bool set(uint32_t qpn, const sc_core::sc_time& at) {
        uint32_t& pos = pos_[qpn];
        if (pos != NIL) {
            if (heap_[pos].at <= at) return false;
            heap_[pos].at = at;
            heap_[pos].seq = seq_++;
            sift_up(pos);
        } else {
            heap_.push_back(entry{at, seq_++, qpn});
            sift_up(heap_.size() - 1);
        }
        return true;
    }
    bool empty() const { return heap_.empty(); }
    /// The earliest deadline (not empty()).
    const sc_core::sc_time& earliest() const { return heap_.front().at; }
    /// Takes the earliest entry off; returns its QPN (not empty()).
    uint32_t pop() {
        const uint32_t qpn = heap_.front().qpn;
        pos_[qpn] = NIL;
        if (heap_.size() > 1) {
            place(0, heap_.back());
            heap_.pop_back();
            sift_down(0);
        } else {
            heap_.pop_back();
        }
        return qpn;
    }
    /// Bytes per QP number (the model-state counters).
    static constexpr size_t slot_bytes() { return sizeof(uint32_t); }

private:
    struct entry {
        sc_core::sc_time at;
        uint64_t seq;
        uint32_t qpn;
    };
    static bool before(const entry& a, const entry& b) { return a.at != b.at ? a.at < b.at : a.seq < b.seq; }
    void place(size_t i, const entry& e) {
        heap_[i] = e;
        pos_[e.qpn] = uint32_t(i);
    }
    void sift_up(size_t i) {
        const entry e = heap_[i];
        while (i > 0) {
            const size_t parent = (i - 1) / 2;
            if (!before(e, heap_[parent])) break;
            place(i, heap_[parent]);
            i = parent;
        }
        place(i, e);
    }
    void sift_down(size_t i) {
        const size_t n = heap_.size();
        const entry e = heap_[i];
        for (;;) {
            size_t child = 2 * i + 1;
            if (child >= n) break;
            if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
            if (!before(heap_[child], e)) break;
            place(i, heap_[child]);
            i = child;
        }
        place(i, e);
    }

    std::vector<entry> heap_;
    std::vector<uint32_t> pos_;  // by QPN: its heap entry, or NIL
    uint64_t seq_ = 0;
};

}  // namespace hcasim
