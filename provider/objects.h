// The hcasim provider's objects: each libibverbs object with the server's id for it and the
// firmware mirror object the data-path verbs run on; conversions between libibverbs' types and
// the firmware's (hcasim::verbs, alias fv). Include after firmware/verbs.h and before nothing
// else of libibverbs (see hcasim_provider.cpp).
#pragma once
#include "firmware/verbs.h"
#include "provider/protocol.h"
#include "provider/session.h"

#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "provider/ibverbs_abi.h"

namespace hcasim::provider {

namespace fv = hcasim::verbs;
namespace sp = hcasim::serve_proto;

static_assert(sizeof(ibv_sge) == sizeof(fv::ibv_sge) &&
              offsetof(ibv_sge, lkey) == offsetof(fv::ibv_sge, lkey));

// ------------------------------------------------------------------------------ objects

struct hc_context {
    verbs_context vctx;  // libibverbs' part; the allocation starts here
    session* s;
};
struct hc_pd {
    ibv_pd pd;
    uint64_t id;
    fv::ibv_pd f;
};
struct hc_mr {
    verbs_mr vmr;
    uint64_t id;
    uint64_t addr, length;
    fv::ibv_mr f;  ///< what binds name (context, lkey)
};
struct hc_mw {
    ibv_mw mw;
    uint64_t id;
    fv::ibv_mw f;
};
/// A CQ; one made by ibv_create_cq_ex is used through cq_ex (which begins with the ibv_cq).
struct hc_cq {
    union {
        ibv_cq cq;
        ibv_cq_ex cq_ex;
    };
    uint64_t id;
    fv::ibv_cq f;
    fv::ibv_wc ex_wc{};  ///< the completion the polling API is at (verbs_ex.cpp)
};
struct hc_srq {
    ibv_srq srq;
    uint64_t id;
    fv::ibv_srq f;
};
/// An XRC domain (libibverbs' struct verbs_xrcd begins with the ibv_xrcd).
struct hc_xrcd {
    ibv_xrcd xrcd;
    uint64_t id;
    fv::ibv_xrcd f;
};
struct qp_ex_state;
/// A QP, laid out as libibverbs' struct verbs_qp (the ibv_qp_ex union, comp_mask, xrcd):
/// ibv_qp_to_qp_ex() tests comp_mask & VERBS_QP_EX. A QP made by ibv_create_qp_ex with
/// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS has the work request API (verbs_ex.cpp) in qp_ex and its
/// batch in ex.
struct hc_qp {
    union {
        ibv_qp qp;
        ibv_qp_ex qp_ex;
    };
    uint32_t vqp_comp_mask = 0;  ///< verbs_qp::comp_mask (VERBS_QP_EX = 2)
    void* vqp_xrcd = nullptr;    ///< verbs_qp::xrcd: an XRC target's domain (its ibv_xrcd)
    uint64_t id;
    fv::ibv_qp f;
    std::unique_ptr<qp_ex_state> ex;
};
constexpr uint32_t HCASIM_VERBS_QP_EX = 1u << 1;
// verbs_qp::comp_mask directly follows the union: libibverbs 44 reads it at offset 0x160.
static_assert(sizeof(ibv_qp_ex) == 0x160 && alignof(ibv_qp_ex) == 8, "verbs_qp layout");

/// Work requests between ibv_wr_start and ibv_wr_complete/abort, in the firmware's types; the
/// SGEs and the copies of inline data live here (sg_list pointers are set at wr_complete).
struct qp_ex_state {
    struct entry {
        fv::ibv_send_wr wr;
        uint32_t sge_first = 0, sge_count = 0;  ///< in sges
        bool inl = false;                       ///< inline: the data is inl[inl_first, +inl_len)
        size_t inl_first = 0, inl_len = 0;
        ibv_mw* mw = nullptr;  ///< BIND_MW: the window (its rkey changes once posted)
    };
    std::mutex lock;        ///< held from wr_start to wr_complete/wr_abort
    bool open = false;      ///< between wr_start and wr_complete/wr_abort
    uint64_t send_ops = 0;  ///< ibv_qp_create_send_ops_flags granted
    int err = 0;            ///< the first error of the batch (builders cannot return one)
    std::vector<entry> wrs;
    std::vector<fv::ibv_sge> sges;
    std::vector<uint8_t> inl;
    std::vector<fv::ibv_send_wr> chain;  ///< built at wr_complete
};
struct hc_ah {
    ibv_ah ah;
    fv::ibv_ah* f;
};

inline session& sess(ibv_context* c) { return *reinterpret_cast<hc_context*>(verbs_get_ctx(c))->s; }
inline hc_pd* to(ibv_pd* p) { return reinterpret_cast<hc_pd*>(p); }
inline hc_cq* to(ibv_cq* p) { return reinterpret_cast<hc_cq*>(p); }
inline hc_qp* to(ibv_qp* p) { return reinterpret_cast<hc_qp*>(p); }
inline hc_srq* to(ibv_srq* p) { return reinterpret_cast<hc_srq*>(p); }
inline hc_xrcd* to(ibv_xrcd* p) { return reinterpret_cast<hc_xrcd*>(p); }
inline hc_ah* to(ibv_ah* p) { return reinterpret_cast<hc_ah*>(p); }
inline hc_mw* to(ibv_mw* p) { return reinterpret_cast<hc_mw*>(p); }
inline hc_mr* to(ibv_mr* p) { return reinterpret_cast<hc_mr*>(p); }

/// A bind's description in the firmware's types.
inline fv::ibv_mw_bind_info from_lib(const ibv_mw_bind_info& b) {
    fv::ibv_mw_bind_info f;
    f.mr = b.mr ? &to(b.mr)->f : nullptr;
    f.addr = b.addr;
    f.length = b.length;
    // A window grants remote rights only; libibverbs applications also pass LOCAL_WRITE (rdma-core's
    // providers ignore it), which the firmware would refuse.
    f.mw_access_flags = b.mw_access_flags & ~unsigned(IBV_ACCESS_LOCAL_WRITE);
    return f;
}

template <class T>
T* fail(int e) {
    errno = e;
    return nullptr;
}

// ------------------------------------------------------------------------------ conversions

inline fv::ibv_ah_attr from_lib(const ibv_ah_attr& a) {
    fv::ibv_ah_attr f{};
    std::memcpy(f.grh.dgid.raw, a.grh.dgid.raw, 16);
    f.grh.flow_label = a.grh.flow_label;
    f.grh.sgid_index = a.grh.sgid_index;
    f.grh.hop_limit = a.grh.hop_limit;
    f.grh.traffic_class = a.grh.traffic_class;
    f.dlid = a.dlid;
    f.sl = a.sl;
    f.src_path_bits = a.src_path_bits;
    f.static_rate = a.static_rate;
    f.is_global = a.is_global;
    f.port_num = a.port_num;
    return f;
}
inline ibv_ah_attr to_lib(const fv::ibv_ah_attr& f) {
    ibv_ah_attr a{};
    std::memcpy(a.grh.dgid.raw, f.grh.dgid.raw, 16);
    a.grh.flow_label = f.grh.flow_label;
    a.grh.sgid_index = f.grh.sgid_index;
    a.grh.hop_limit = f.grh.hop_limit;
    a.grh.traffic_class = f.grh.traffic_class;
    a.dlid = f.dlid;
    a.sl = f.sl;
    a.src_path_bits = f.src_path_bits;
    a.static_rate = f.static_rate;
    a.is_global = f.is_global;
    a.port_num = f.port_num;
    return a;
}
inline fv::ibv_qp_cap from_lib(const ibv_qp_cap& c) {
    return fv::ibv_qp_cap{c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data};
}
inline ibv_qp_cap to_lib(const fv::ibv_qp_cap& c) {
    return ibv_qp_cap{c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data};
}
inline fv::ibv_qp_attr from_lib(const ibv_qp_attr& a) {
    fv::ibv_qp_attr f{};
    f.qp_state = fv::ibv_qp_state(a.qp_state);
    f.cur_qp_state = fv::ibv_qp_state(a.cur_qp_state);
    f.path_mtu = fv::ibv_mtu(a.path_mtu);
    f.path_mig_state = fv::ibv_mig_state(a.path_mig_state);
    f.qkey = a.qkey;
    f.rq_psn = a.rq_psn;
    f.sq_psn = a.sq_psn;
    f.dest_qp_num = a.dest_qp_num;
    f.qp_access_flags = unsigned(a.qp_access_flags);
    f.cap = from_lib(a.cap);
    f.ah_attr = from_lib(a.ah_attr);
    f.alt_ah_attr = from_lib(a.alt_ah_attr);
    f.pkey_index = a.pkey_index;
    f.alt_pkey_index = a.alt_pkey_index;
    f.en_sqd_async_notify = a.en_sqd_async_notify;
    f.sq_draining = a.sq_draining;
    f.max_rd_atomic = a.max_rd_atomic;
    f.max_dest_rd_atomic = a.max_dest_rd_atomic;
    f.min_rnr_timer = a.min_rnr_timer;
    f.port_num = a.port_num;
    f.timeout = a.timeout;
    f.retry_cnt = a.retry_cnt;
    f.rnr_retry = a.rnr_retry;
    f.alt_port_num = a.alt_port_num;
    f.alt_timeout = a.alt_timeout;
    return f;
}
inline ibv_qp_attr to_lib(const fv::ibv_qp_attr& f) {
    ibv_qp_attr a{};
    a.qp_state = ibv_qp_state(f.qp_state);
    a.cur_qp_state = ibv_qp_state(f.cur_qp_state);
    a.path_mtu = ibv_mtu(f.path_mtu);
    a.path_mig_state = ibv_mig_state(f.path_mig_state);
    a.qkey = f.qkey;
    a.rq_psn = f.rq_psn;
    a.sq_psn = f.sq_psn;
    a.dest_qp_num = f.dest_qp_num;
    a.qp_access_flags = int(f.qp_access_flags);
    a.cap = to_lib(f.cap);
    a.ah_attr = to_lib(f.ah_attr);
    a.alt_ah_attr = to_lib(f.alt_ah_attr);
    a.pkey_index = f.pkey_index;
    a.alt_pkey_index = f.alt_pkey_index;
    a.en_sqd_async_notify = f.en_sqd_async_notify;
    a.sq_draining = f.sq_draining;
    a.max_rd_atomic = f.max_rd_atomic;
    a.max_dest_rd_atomic = f.max_dest_rd_atomic;
    a.min_rnr_timer = f.min_rnr_timer;
    a.port_num = f.port_num;
    a.timeout = f.timeout;
    a.retry_cnt = f.retry_cnt;
    a.rnr_retry = f.rnr_retry;
    a.alt_port_num = f.alt_port_num;
    a.alt_timeout = f.alt_timeout;
    return a;
}

/// The extended verbs (ibv_create_qp_ex with the work request API, ibv_create_cq_ex with the
/// polling API): provider/verbs_ex.cpp adds its hooks to the context's table.
void add_extended_ops(verbs_context_ops& ops);
/// The plain verbs (hcasim_provider.cpp) the extended ones build on.
ibv_cq* create_cq_plain(ibv_context* c, int cqe, ibv_comp_channel* channel, int comp_vector);
ibv_qp* create_qp_plain(ibv_pd* pd, ibv_qp_init_attr* ia);
/// An XRC target QP of `xrcd` (ibv_create_qp_ex with IBV_QP_INIT_ATTR_XRCD).
ibv_qp* create_xrc_target(ibv_context* c, ibv_xrcd* xrcd, ibv_qp_init_attr* ia);

}  // namespace hcasim::provider
