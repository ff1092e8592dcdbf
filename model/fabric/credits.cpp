#include "model/fabric/credits.h"

namespace hcasim {

using namespace sc_core;

void credit_counter::configure(unsigned vls, uint32_t buffer_bytes) {
    limited_ = true;
    vls_ = vls;
    cap_ = buffer_bytes / CREDIT_BLOCK_BYTES;
    for (lane& l : lanes_) {
        l.free = cap_;
        l.returns.clear();
        l.head = 0;
    }
}

void credit_counter::fold(lane& l, const sc_time& t) {
    while (l.head < l.returns.size() && l.returns[l.head].at <= t) {
        l.free += l.returns[l.head].blocks;
        ++l.head;
    }
    if (l.free > int64_t(cap_)) l.free = cap_;  // a duplicate's blocks are not credit
    if (l.head == l.returns.size()) {
        l.returns.clear();
        l.head = 0;
    } else if (l.head >= 64 && l.head * 2 >= l.returns.size()) {
        l.returns.erase(l.returns.begin(), l.returns.begin() + std::ptrdiff_t(l.head));
        l.head = 0;
    }
}

void credit_counter::restore(unsigned vl, uint32_t blocks, const sc_time& at) {
    if (fwd_) {
        if (vl < MAX_DATA_VLS) fwd_->credit(fwd_link_, vl, blocks, at);
        return;
    }
    if (!limited_ || vl >= MAX_DATA_VLS) return;
    lane& l = lanes_[vl];
    // Receivers free in time order per VL almost always; keep the list sorted regardless.
    size_t i = l.returns.size();
    l.returns.push_back(ret{at, blocks});
    while (i > l.head && l.returns[i - 1].at > at) {
        std::swap(l.returns[i - 1], l.returns[i]);
        --i;
    }
    if (wanted_) {
        wanted_ = false;
        target_->notify(SC_ZERO_TIME);
    }
}

int64_t credit_counter::free_at(unsigned vl, const sc_time& t) const {
    const lane& l = lanes_[vl];
    int64_t f = l.free;
    for (size_t i = l.head; i < l.returns.size() && l.returns[i].at <= t; ++i) f += l.returns[i].blocks;
    return f > int64_t(cap_) ? int64_t(cap_) : f;
}

}  // namespace hcasim
