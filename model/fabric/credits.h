// Credit-based link-level flow control (IBA 7.9), the sender's side: what it knows of the
// receive buffers at the far end of its cable, per data VL, in 64-byte blocks. A packet of B
// blocks may start only when B blocks are free there; it takes them when it starts. The
// receiver gives blocks back when the packet leaves its buffer (an HCA port: when the packet
// enters the receive pipeline; a switch: when its last bit has left through the output) by a
// flow-control packet: restore() records the time those blocks are back at the sender (the
// FC packet's serialisation and the cable's propagation later), so a sender finds the time it
// may start a packet by arithmetic, with no event per FC packet. Only a sender that finds the
// known returns insufficient waits (wait_for_credit()) for the receiver to free more.
//
// The counts are exact with nothing lost; FCTBS/FCCL are not sent as numbers: a packet lost on
// a faulty cable gives its blocks back at the time it would have arrived (the next FC packet's
// FCTBS resynchronises the receiver's ABR, IBA 7.9.4), and no more than the buffer is ever
// credited (a duplicate a faulty cable delivers does not create credit).
#pragma once
#include <systemc>

#include <array>
#include <cstdint>
#include <vector>

namespace hcasim {

/// Data VLs 0..14; VL15 (management) is not flow controlled.
constexpr unsigned MAX_DATA_VLS = 15;
constexpr unsigned VL15 = 15;
constexpr uint32_t CREDIT_BLOCK_BYTES = 64;
inline uint32_t credit_blocks(uint32_t bytes) {
    return (bytes + CREDIT_BLOCK_BYTES - 1) / CREDIT_BLOCK_BYTES;
}

/// Where a credit_counter standing in for a cable's far end forwards what restore() is told
/// (isl_channel: the credit reaches the sender at a canonical time).
class credit_forward {
public:
    virtual void credit(uint32_t link, unsigned vl, uint32_t blocks, const sc_core::sc_time& at) = 0;

protected:
    ~credit_forward() = default;
};

class credit_counter {
public:
    /// `vls` data VLs, each with a receive buffer of `buffer_bytes` at the far end (whole
    /// blocks). Not configured: every VL is unlimited (no flow control).
    void configure(unsigned vls, uint32_t buffer_bytes);
    bool limited() const { return limited_; }
    unsigned vls() const { return vls_; }
    uint32_t capacity_blocks() const { return cap_; }

    /// The earliest time at or after `t` at which `blocks` are free on `vl` from what is known
    /// now; false if the returns known so far never make enough free (wait_for_credit()).
    bool earliest(unsigned vl, uint32_t blocks, sc_core::sc_time& t) const {
        if (!limited_) return true;
        const lane& l = lanes_[vl];
        int64_t f = l.free;
        size_t i = l.head;
        for (; i < l.returns.size() && l.returns[i].at <= t; ++i) f += l.returns[i].blocks;
        if (f >= int64_t(blocks)) return true;
        for (; i < l.returns.size(); ++i) {
            f += l.returns[i].blocks;
            if (f >= int64_t(blocks)) {
                t = l.returns[i].at;
                return true;
            }
        }
        return false;
    }
    /// A packet of `blocks` starts on `vl` at `t` (no earlier than any packet before it, and at
    /// a time earliest() allowed).
    void take(unsigned vl, uint32_t blocks, const sc_core::sc_time& t) {
        if (!limited_) return;
        lane& l = lanes_[vl];
        fold(l, t);
        l.free -= int64_t(blocks);
    }
    /// The receiver freed `blocks` on `vl`; they are back here at `at` (absolute). Notifies
    /// `posted` (a sender waiting for credit looks again).
    void restore(unsigned vl, uint32_t blocks, const sc_core::sc_time& at);

    /// Blocks free on `vl` at `t` as far as known now (at most the buffer).
    int64_t free_at(unsigned vl, const sc_core::sc_time& t) const;

    /// For a sender that found the known returns insufficient: the event the next restore()
    /// notifies (only a sender that asked is woken: no event per FC packet otherwise).
    const sc_core::sc_event& wait_for_credit() {
        wanted_ = true;
        return *target_;
    }
    /// Notify `e` instead of the counter's own event (a switch waits for any of its outputs).
    void notify_to(sc_core::sc_event& e) { target_ = &e; }
    /// A stand-in: restore() forwards to `f` as directed link `link` and keeps nothing.
    void forward_to(credit_forward* f, uint32_t link) {
        fwd_ = f;
        fwd_link_ = link;
    }

private:
    struct ret {
        sc_core::sc_time at;
        uint32_t blocks;
    };
    struct lane {
        int64_t free = 0;
        std::vector<ret> returns;  // from `head` on, in time order
        size_t head = 0;
    };
    void fold(lane& l, const sc_core::sc_time& t);
    sc_core::sc_event posted_;
    sc_core::sc_event* target_ = &posted_;
    credit_forward* fwd_ = nullptr;
    uint32_t fwd_link_ = 0;
    bool wanted_ = false;
    bool limited_ = false;
    unsigned vls_ = 1;
    uint32_t cap_ = 0;
    std::array<lane, MAX_DATA_VLS> lanes_;
};

}  // namespace hcasim
