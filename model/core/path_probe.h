// A path probe: when one traced message passes the stages of an HCA. A latency workload arms
// the probes of both nodes for one iteration; each unit marks the first time after arming that
// a message reaches its stage (later ones — ACKs, the next iteration — are ignored). A message
// of several packets is marked where its last packet passes (the critical path: the completion
// waits for it), except wqe_start (its first packet begins). The
// workload then lays the marks of both nodes and its own CPU times on one time line: the
// per-stage breakdown of where the microsecond goes. Owned by the hca, handed to its units
// like their other peers; an unarmed probe costs one branch per event.
#pragma once
#include <systemc>

#include <cstdint>

#include "model/core/timeline.h"

namespace hcasim {

class path_probe {
public:
    enum stage : uint8_t {
        doorbell,   ///< the doorbell (or inline WQE) reached the doorbell unit
        wqe_start,  ///< the transport engine started the WQE's first packet
        wire_end,   ///< the request's last packet left the port (last bit serialised)
        rx_engine,  ///< a message's last request packet reached the responder (after the port's receive pipeline)
        data_placed,  ///< the responder's payload DMA write reached host memory
        resp_sent,    ///< READ/atomic: the response's last packet left the responder's port
        resp_rx,      ///< READ/atomic: the response's last packet reached the requester's engine
        completion,   ///< the requester's send CQE write was issued
        stages
    };
    static const char* name(stage s) {
        static const char* const n[stages] = {"doorbell",    "wqe_start", "wire_end", "rx_engine",
                                              "data_placed", "resp_sent", "resp_rx",  "completion"};
        return n[s];
    }
    void arm() {
        armed_ = true;
        seen_ = 0;
    }
    void disarm() { armed_ = false; }
    bool armed() const { return armed_; }
    /// --timeline: every mark is also an instant on `track` of `tl`.
    void set_timeline(timeline* tl, unsigned track) {
        tl_ = tl;
        track_ = track;
    }
    /// Records `at` for stage `s` unless it was recorded since arm(). `record` false: only the
    /// --timeline instant (a packet that is not the one the stage follows).
    void mark(stage s, const sc_core::sc_time& at, bool record = true) {
        if (tl_) tl_->instant(track_, name(s), at);
        if (record && armed_ && !(seen_ & (1u << s))) {
            seen_ |= 1u << s;
            at_[s] = at;
        }
    }
    bool seen(stage s) const { return (seen_ >> s) & 1u; }
    const sc_core::sc_time& at(stage s) const { return at_[s]; }

private:
    bool armed_ = false;
    uint32_t seen_ = 0;
    timeline* tl_ = nullptr;
    unsigned track_ = 0;
    sc_core::sc_time at_[stages];
};

}  // namespace hcasim
