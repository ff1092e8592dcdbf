// What the WQE fetcher needs of the transport engine: room in its WQE queues, parsed send WQEs,
// receive doorbells, and the hint that work for a QP comes soon.
#pragma once
#include <cstdint>

#include "model/hca/work_request.h"

namespace hcasim {

class send_queue_sink {
public:
    virtual ~send_queue_sink() = default;
    /// WQEs the sink takes for this QP now. A QP refused for want of room is credited (the
    /// fetcher's credit()) when room frees.
    virtual unsigned room(uint32_t qpn) = 0;
    /// The same test without registering a wait.
    virtual bool has_room(uint32_t qpn) const = 0;
    virtual void push_send(uint32_t qpn, const send_wqe& w) = 0;
    virtual void rq_posted(uint32_t qpn, uint16_t producer) = 0;
    /// Work for the QP comes soon (a simulator speed-up, no effect on the model).
    virtual void expect(uint32_t qpn) = 0;
};

}  // namespace hcasim
