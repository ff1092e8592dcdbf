// The messages between `hcasim serve` (the simulation: HCAs, fabric, and the kernel half of the
// driver) and its libibverbs provider (provider/, the user half), over one Unix SOCK_SEQPACKET
// connection per device context. Both ends run on the same machine: messages are native-endian
// plain structs, one per packet, file descriptors ride along as SCM_RIGHTS.
//
// What crosses the socket is what crosses a real kernel boundary: control verbs (create, modify,
// destroy, query, register) are requests the server's firmware executes in simulated time;
// doorbells (MMIO writes to the context's UAR page) are one-way messages. Everything else — WQEs,
// CQEs, the application's registered buffers — lives in simulated host memory, a shared memory
// file both ends map (see docs/libibverbs.md).
#pragma once
#include <cstdint>

#include "firmware/verbs.h"
#include "tlm_if/commands.h"

namespace hcasim::serve_proto {

/// Bumped on any layout change; OPEN fails with EPROTO on a mismatch.
constexpr uint32_t VERSION = 2;
/// Largest message either way (the OPEN reply).
constexpr uint32_t MAX_MESSAGE = 4096;
/// Ports a device reports (the model's HCAs have one).
constexpr uint32_t MAX_PORTS = 2;

enum op : uint32_t {
    OPEN = 1,     ///< open_req (+ fd: write end of the context's async event pipe) -> open_rep (+ fd: memory)
    MMIO_WRITE,   ///< mmio_write_req, no reply: a posted store to BAR0 (doorbells, inline WQEs)
    MMIO_READ32,  ///< u64 offset -> u32
    NOW,          ///< -> u64 simulated ns
    SLEEP,        ///< u64 ns -> (after ns of simulated time)
    QUERY_DEVICE,  ///< -> verbs::ibv_device_attr
    QUERY_PORT,    ///< u32 port -> verbs::ibv_port_attr
    QUERY_GID,     ///< index_req -> verbs::ibv_gid
    QUERY_PKEY,    ///< index_req -> u16 (host order)
    ALLOC_PD,      ///< -> u64 id
    DEALLOC_PD,    ///< u64 id
    MAP_RUN,       ///< run_req -> u64 pa: physically contiguous host memory for `pages` pages at va
    UNMAP_RUN,     ///< run_req: gives a run back
    REG_MR,        ///< reg_mr_req -> reg_mr_rep
    DEREG_MR,      ///< u64 id
    CREATE_CQ,     ///< create_cq_req (+ fd: write end of its completion channel) -> cq_rep
    DESTROY_CQ,    ///< u64 id
    RESIZE_CQ,     ///< resize_cq_req -> cq_rep
    CREATE_QP,     ///< create_qp_req -> qp_rep
    MODIFY_QP,     ///< modify_qp_req -> qp_rep
    QUERY_QP,      ///< modify_qp_req (attr unused) -> query_qp_rep
    DESTROY_QP,    ///< u64 id
    CREATE_SRQ,    ///< create_srq_req -> srq_rep
    MODIFY_SRQ,    ///< modify_srq_req -> srq_rep
    QUERY_SRQ,     ///< modify_srq_req (attr unused) -> srq_rep
    DESTROY_SRQ,   ///< u64 id
    ATTACH_MCAST,  ///< mcast_req
    DETACH_MCAST,  ///< mcast_req
    ALLOC_MW,      ///< alloc_mw_req -> mw_rep
    DEALLOC_MW,    ///< u64 id
    NEXT_KEY,      ///< u64 MPT index -> u8: the next key byte of a window's index (a bind posted here)
    REREG_MR,      ///< rereg_mr_req -> reg_mr_rep
    OPEN_XRCD,     ///< open_xrcd_req -> xrcd_rep
    CLOSE_XRCD,    ///< u64 id
};

/// Every request starts with this; every reply is a `reply` followed by its payload.
struct header {
    uint32_t op;
    uint32_t rsvd;
};
struct reply {
    int32_t status;  ///< 0 or a positive errno
    uint32_t rsvd;
};

struct open_req {
    header h;
    uint32_t version;  ///< VERSION
    uint32_t node;     ///< the simulated node (device hcasim<node>)
    int32_t pid;       ///< unused: the server logs and limits by the pid the kernel gives (SO_PEERCRED)
    uint32_t rsvd;
};
struct open_rep {
    uint64_t mem_bytes;  ///< size of the shared host memory file
    uint32_t uar;        ///< the context's UAR page
    uint32_t num_qps;    ///< QPN space of the driver
    int32_t num_comp_vectors;
    uint32_t nports;
    uint64_t node_guid;
    hw::hca_caps caps;
    hw::port_info ports[MAX_PORTS];
    verbs::ibv_device_attr dev;
};

struct mmio_write_req {
    header h;
    uint64_t offset;  ///< BAR0 offset
    uint32_t bytes;   ///< 4, 8, or up to hw::INLINE_WINDOW_BYTES
    uint32_t rsvd;
    uint8_t data[256];
};
struct u64_req {
    header h;
    uint64_t value;
};
struct index_req {
    header h;
    uint32_t port;
    int32_t index;
};
struct run_req {
    header h;
    uint64_t va;
    uint64_t pages;
};
struct reg_mr_req {
    header h;
    uint64_t pd, va, length;
    int32_t access;
    uint32_t rsvd;
};
struct reg_mr_rep {
    uint64_t id;
    uint32_t lkey, rkey;
};
struct rereg_mr_req {
    header h;
    uint64_t id;
    int32_t flags;  ///< IBV_REREG_MR_CHANGE_*
    int32_t access;
    uint64_t pd, va, length;
};
struct alloc_mw_req {
    header h;
    uint64_t pd;
    int32_t type;  ///< verbs::ibv_mw_type
    uint32_t rsvd;
};
struct mw_rep {
    uint64_t id;
    uint32_t rkey, handle;
};
struct create_cq_req {
    header h;
    int32_t cqe;
    int32_t comp_vector;
    uint64_t user_handle;  ///< the application's struct ibv_cq *: what completion events carry
    uint32_t has_channel;  ///< an fd comes with the request
    uint32_t rsvd;
};
struct resize_cq_req {
    header h;
    uint64_t id;
    uint64_t consumer;  ///< CQEs the provider has polled
    int32_t cqe;
    uint32_t rsvd;
};
struct cq_rep {
    uint64_t id;
    uint32_t cqn;
    int32_t cqe;
    uint64_t ring_pa;
    uint32_t log_size;
    uint32_t rsvd;
};
struct create_qp_req {
    header h;
    uint64_t pd, send_cq, recv_cq,
        srq;               ///< ids; srq 0: none; XRC target: pd, CQs 0; XRC initiator: recv_cq 0
    uint64_t xrcd;         ///< XRC target: its domain's id (else 0)
    uint64_t user_handle;  ///< the application's struct ibv_qp *: what async events carry
    verbs::ibv_qp_cap cap;
    int32_t qp_type;  ///< verbs::ibv_qp_type
    int32_t sq_sig_all;
};
/// Producer and completed counters of the provider's rings (the server's firmware objects do
/// not see posts and polls; requests that depend on them carry them).
struct ring_counts {
    uint32_t sq_producer, sq_completed, rq_producer, rq_completed;
};
struct modify_qp_req {
    header h;
    uint64_t id;
    int32_t mask;
    uint32_t rsvd;
    ring_counts counts;
    verbs::ibv_qp_attr attr;
};
struct qp_rep {
    uint64_t id;
    uint32_t qp_num;
    int32_t state;  ///< verbs::ibv_qp_state after the request
    uint32_t max_inline_data;
    uint8_t port;  ///< the QP's port (hw context)
    uint8_t rsvd[3];
    verbs::ibv_qp_cap cap;  ///< actual capacities
    verbs::ibv_wq_ring sq, rq;
};
struct query_qp_rep {
    verbs::ibv_qp_attr attr;
    verbs::ibv_qp_cap cap;
    int32_t sq_sig_all;
    uint32_t rsvd;
};
struct create_srq_req {
    header h;
    uint64_t pd;
    uint64_t user_handle;  ///< the application's struct ibv_srq *
    verbs::ibv_srq_attr attr;
    int32_t srq_type;   ///< verbs::ibv_srq_type
    uint64_t xrcd, cq;  ///< IBV_SRQT_XRC: the domain's and the CQ's ids
};
/// ibv_open_xrcd: with a file (fd >= 0 in the application), the file must exist or O_CREAT be
/// given (the provider checks it with fstat); domains are not shared between processes.
struct open_xrcd_req {
    header h;
    int32_t oflags;  ///< ibv_xrcd_init_attr::oflags
    uint32_t rsvd;
};
struct xrcd_rep {
    uint64_t id;
    uint32_t xrcdn;
    uint32_t rsvd;
};
struct modify_srq_req {
    header h;
    uint64_t id;
    int32_t mask;
    uint32_t producer, completed;
    verbs::ibv_srq_attr attr;
};
struct srq_rep {
    uint64_t id;
    uint32_t srqn;
    uint32_t rsvd;
    verbs::ibv_srq_attr attr;
    uint32_t rsvd2;
    verbs::ibv_wq_ring ring;
};
struct mcast_req {
    header h;
    uint64_t qp;
    uint8_t gid[16];
    uint16_t lid;
    uint16_t rsvd[3];
};

/// libibverbs' ibv_port_attr::active_width code of a lane count (1, 4, 8, 12).
constexpr uint8_t ibv_width_code(uint8_t lanes) {
    return lanes == 12 ? 8 : lanes == 8 ? 4 : lanes == 4 ? 2 : 1;
}
/// libibverbs' ibv_port_attr::active_speed code of hw::port_info::link_speed (0 SDR .. 6 NDR).
constexpr uint8_t ibv_speed_code(uint8_t speed) {
    constexpr uint8_t codes[] = {1, 2, 4, 16, 32, 64, 128};  // SDR DDR QDR FDR EDR HDR NDR
    return speed < sizeof codes ? codes[speed] : 1;
}

/// Record written to a context's async event pipe: what libibverbs' ibv_get_async_event reads
/// from ibv_context::async_fd (the kernel's struct ib_uverbs_async_event_desc).
struct async_event_record {
    uint64_t element;     ///< user handle of the QP, CQ or SRQ; the port number for port events
    uint32_t event_type;  ///< enum ibv_event_type
    uint32_t rsvd;
};
static_assert(sizeof(async_event_record) == 16);
/// Record written to a completion channel's pipe: what ibv_get_cq_event reads (the kernel's
/// struct ib_uverbs_comp_event_desc).
struct comp_event_record {
    uint64_t cq_handle;  ///< the application's struct ibv_cq *
};
static_assert(sizeof(comp_event_record) == 8);

}  // namespace hcasim::serve_proto
