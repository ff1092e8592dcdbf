// `hcasim serve --record FILE`: the clients' verbs as a trace for `hcasim replay`
// (traces/README.md), from what the server sees. Control verbs are requests the server runs; the
// data path runs in the applications, so a post is read back from the WQEs its doorbell (or inline
// WQE) hands the HCA, the application's stores into the buffers a send reads become `fill`s of
// those bytes before it, and a poll is recorded when the CQE lands (op_latency's watch). Each node
// is one application in the trace (every client of the node). RC, UC and XRC only: UD address
// handles stay in the application (a UD QP's posts are left out, with a comment line).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "firmware/host_os.h"
#include "firmware/verbs.h"
#include "model/system/fabric.h"
#include "provider/protocol.h"
#include "testbench/replay/verbs_trace.h"
#include "tlm_if/cqe.h"

namespace hcasim::serve {

class recording {
public:
    /// Opens `path` (throws config_error naming --record) and writes the header.
    recording(const std::string& path, machine& m);

    void alloc_pd(unsigned node, const verbs::ibv_pd* pd);
    /// A region (and the application buffer under it: an `alloc` and a `fill` of its bytes).
    void reg_mr(unsigned node, const verbs::ibv_pd* pd, const verbs::ibv_mr* mr, const fw::address_space& as,
                uint64_t va, uint64_t len, unsigned access);
    /// Before a region goes (deregistered, its client gone, the server stopping): its bytes, for
    /// the end record's digest.
    void keep_contents(unsigned node, const verbs::ibv_mr* mr, const fw::address_space& as);
    void dereg_mr(unsigned node, const verbs::ibv_mr* mr, int ret);
    void create_cq(unsigned node, const verbs::ibv_cq* cq, int cqe);
    void open_xrcd(unsigned node, const verbs::ibv_xrcd* x);
    void close_xrcd(unsigned node, const verbs::ibv_xrcd* x, int ret);
    /// An SRQ (an XRC SRQ with its domain and CQ).
    void create_srq(unsigned node, const verbs::ibv_pd* pd, const verbs::ibv_srq* s,
                    const verbs::ibv_srq_attr& a);
    void destroy_srq(unsigned node, const verbs::ibv_srq* s, int ret);
    void create_qp(unsigned node, const verbs::ibv_pd* pd, const verbs::ibv_qp* qp,
                   const serve_proto::create_qp_req& r);
    void modify_qp(unsigned node, const verbs::ibv_qp* qp, const verbs::ibv_qp_attr& a, int mask, int ret);
    void destroy_qp(unsigned node, const verbs::ibv_qp* qp, int ret);
    /// A doorbell word or inline WQE of a client (`as`: its address space, for the buffers).
    void doorbell(unsigned node, const fw::address_space& as, uint64_t in_page, const uint8_t* data,
                  uint32_t bytes);
    /// A CQE landed on CQ `cq`: one completion polled.
    void completion(unsigned node, const void* cq, const hw::cqe& e);
    void event(unsigned node, const verbs::ibv_async_event& e) { rec_.event(node, e); }
    /// The end record (digests of the buffers as kept); writes the file (throws config_error).
    void end();

private:
    struct queue {
        const verbs::ibv_qp* qp = nullptr;
        const verbs::ibv_srq* srq = nullptr;
        uint16_t sq = 0, rq = 0;  // producer counters seen
    };
    /// The send WQE of `qp` at `w` (`n` bytes) as a work request; false if a trace cannot say it.
    bool send_wr(unsigned node, const fw::address_space& as, const verbs::ibv_qp* qp, const uint8_t* w,
                 size_t n, trace::json* out);
    void post_send(unsigned node, const fw::address_space& as, queue& q, uint16_t to);
    void post_recv(unsigned node, const verbs::ibv_wq_ring& ring, uint16_t from, uint16_t to,
                   const char* call, const std::string& name);
    /// `fill` of the application's bytes a send reads.
    void fill(unsigned node, const fw::address_space& as, const verbs::ibv_sge& s);
    std::vector<uint8_t> read_ring(unsigned node, const verbs::ibv_wq_ring& ring, uint16_t counter) const;

    machine& m_;
    trace::recorder rec_;
    std::map<std::pair<unsigned, uint32_t>, queue> qps_, srqs_;               // by (node, QPN / SRQN)
    std::map<std::pair<unsigned, uint64_t>, std::vector<uint8_t>> contents_;  // (node, va): kept bytes
    std::map<std::pair<unsigned, std::string>, std::string> buffer_of_;       // (node, MR name): its buffer
    std::vector<std::string> inline_pd_;  // per node: the PD of its inline scratch region, once made
    std::vector<uint8_t> scratch_made_;
};

}  // namespace hcasim::serve
