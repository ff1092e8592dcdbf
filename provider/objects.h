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

#include "provider/ibverbs_abi.h"

namespace hcasim::provider {

namespace fv = hcasim::verbs;
namespace sp = hcasim::serve_proto;

static_assert(sizeof(ibv_sge) == sizeof(fv::ibv_sge) && offsetof(ibv_sge, lkey) == offsetof(fv::ibv_sge, lkey));

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
};
struct hc_cq {
    ibv_cq cq;
    uint64_t id;
    fv::ibv_cq f;
};
struct hc_srq {
    ibv_srq srq;
    uint64_t id;
    fv::ibv_srq f;
};
struct hc_qp {
    ibv_qp qp;
    uint64_t id;
    fv::ibv_qp f;
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
inline hc_ah* to(ibv_ah* p) { return reinterpret_cast<hc_ah*>(p); }

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

}  // namespace hcasim::provider
