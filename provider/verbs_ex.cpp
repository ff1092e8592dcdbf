// The extended verbs of the hcasim provider (see objects.h, add_extended_ops):
//
//  * ibv_create_cq_ex and the CQ polling API (start_poll / next_poll / end_poll, read_*). The
//    CQ is an ordinary one (create_cq's request to the server); polling runs the firmware's
//    ibv_poll_cq on the mirror one completion at a time, so a completion is consumed exactly
//    when the application steps onto it. The CQEs carry no time stamp, VLAN or flow tag: those
//    wc_flags are refused (EOPNOTSUPP), as rdma-core's providers refuse what they cannot read.
//
//  * ibv_create_qp_ex and the work request API (ibv_wr_*). The QP is an ordinary one (create_qp's
//    request); with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS it also gets struct ibv_qp_ex (objects.h:
//    hc_qp is laid out as libibverbs' verbs_qp, so ibv_qp_to_qp_ex finds it). The WRs built
//    between wr_start and wr_complete are collected in the firmware's types, with their own
//    SGEs and copies of inline data, and wr_complete posts them through the firmware's
//    ibv_post_send on the mirror, as post_send does.
//
// libibverbs around these hooks (v44): ibv_create_cq_ex refuses wc_flags outside
// IBV_CREATE_CQ_SUP_WC_FLAGS itself, calls create_cq_ex, then verbs_init_cq (context, channel,
// cq_context, event counters, mutex, cond) - the provider fills the rest. ibv_create_qp_ex with
// comp_mask == IBV_QP_INIT_ATTR_PD goes to create_qp; any other mask to create_qp_ex, which
// libibverbs installs as it is (no wrapper): the provider fills the whole ibv_qp.
#include "provider/objects.h"

#include <arpa/inet.h>

#include <climits>

namespace hcasim::provider {
namespace {

/// Zeroes what an extended verbs struct (ibv_cq_ex, ibv_qp_ex) adds after the plain struct it
/// begins with (`Plain`), which the plain verb already filled: the extension starts out empty.
template <class Plain, class Extended>
void zero_beyond(Extended& x) {
    static_assert(sizeof(Extended) > sizeof(Plain));
    std::memset(reinterpret_cast<char*>(&x) + sizeof(Plain), 0, sizeof(Extended) - sizeof(Plain));
}

static_assert(offsetof(ibv_qp_init_attr_ex, sq_sig_all) == offsetof(ibv_qp_init_attr, sq_sig_all) &&
              offsetof(ibv_qp_init_attr_ex, cap) == offsetof(ibv_qp_init_attr, cap));
static_assert(offsetof(ibv_cq_ex, comp_mask) == sizeof(ibv_cq), "ibv_cq_ex begins with an ibv_cq");

hc_cq* of(ibv_cq_ex* p) { return reinterpret_cast<hc_cq*>(p); }
hc_qp* of(ibv_qp_ex* p) { return reinterpret_cast<hc_qp*>(p); }

// ------------------------------------------------------------------------------ CQ polling

/// Steps onto the next completion: 0, ENOENT when there is none, or an errno.
int poll_one(ibv_cq_ex* cx) {
    hc_cq* q = of(cx);
    session& s = sess(cx->context);
    int n;
    {
        std::lock_guard<std::mutex> g(s.data_lock);
        n = fv::ibv_poll_cq(&q->f, 1, &q->ex_wc);
    }
    if (n < 0) return -n;
    if (n == 0) return s.dead() ? EIO : ENOENT;
    cx->status = ibv_wc_status(q->ex_wc.status);
    cx->wr_id = q->ex_wc.wr_id;
    return 0;
}

int start_poll(ibv_cq_ex* cx, ibv_poll_cq_attr* attr) {
    if (attr && attr->comp_mask) return EINVAL;
    return poll_one(cx);
}
int next_poll(ibv_cq_ex* cx) { return poll_one(cx); }
void end_poll(ibv_cq_ex*) {}  // each step consumed its completion already

const fv::ibv_wc& cur(ibv_cq_ex* cx) { return of(cx)->ex_wc; }
ibv_wc_opcode read_opcode(ibv_cq_ex* cx) { return ibv_wc_opcode(cur(cx).opcode); }
uint32_t read_vendor_err(ibv_cq_ex* cx) { return cur(cx).vendor_err; }
uint32_t read_byte_len(ibv_cq_ex* cx) { return cur(cx).byte_len; }
// Immediate data in network order; an invalidated R_Key (ibv_wc_read_invalidated_rkey reads it
// through the same hook) in host order - as poll_cq fills ibv_wc::imm_data / invalidated_rkey.
__be32 read_imm_data(ibv_cq_ex* cx) {
    const fv::ibv_wc& w = cur(cx);
    return (w.wc_flags & fv::IBV_WC_WITH_IMM) ? htonl(w.imm_data) : w.imm_data;
}
uint32_t read_qp_num(ibv_cq_ex* cx) { return cur(cx).qp_num; }
uint32_t read_src_qp(ibv_cq_ex* cx) { return cur(cx).src_qp; }
unsigned read_wc_flags(ibv_cq_ex* cx) { return cur(cx).wc_flags; }
uint32_t read_slid(ibv_cq_ex* cx) { return cur(cx).slid; }
uint8_t read_sl(ibv_cq_ex* cx) { return cur(cx).sl; }
uint8_t read_dlid_path_bits(ibv_cq_ex* cx) { return cur(cx).dlid_path_bits; }

ibv_cq_ex* create_cq_ex(ibv_context* c, ibv_cq_init_attr_ex* a) {
    constexpr uint32_t known_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
    if (a->comp_mask & ~known_mask) return fail<ibv_cq_ex>(EINVAL);
    if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) return fail<ibv_cq_ex>(EOPNOTSUPP);  // no parent domains
    // Everything the CQEs carry; no time stamps (the CQE has none), VLANs, flow tags or tag matching.
    if (a->wc_flags & ~uint64_t(IBV_WC_STANDARD_FLAGS)) return fail<ibv_cq_ex>(EOPNOTSUPP);
    if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) {
        constexpr uint32_t known_flags =
            IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        if (a->flags & ~known_flags) return fail<ibv_cq_ex>(EINVAL);
        // Single-threaded use needs nothing; an overrun is always reported (10.10.3).
        if (a->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) return fail<ibv_cq_ex>(EOPNOTSUPP);
    }
    if (a->cqe > uint32_t(INT_MAX) || a->comp_vector > uint32_t(INT_MAX)) return fail<ibv_cq_ex>(EINVAL);
    ibv_cq* cq = create_cq_plain(c, int(a->cqe), a->channel, int(a->comp_vector));
    if (!cq) return nullptr;  // errno set
    hc_cq* q = to(cq);
    ibv_cq_ex& x = q->cq_ex;
    zero_beyond<ibv_cq>(x);  // the plain CQ initialised only its struct ibv_cq
    x.start_poll = start_poll;
    x.next_poll = next_poll;
    x.end_poll = end_poll;
    x.read_opcode = read_opcode;
    x.read_vendor_err = read_vendor_err;
    x.read_byte_len = read_byte_len;
    x.read_imm_data = read_imm_data;
    x.read_qp_num = read_qp_num;
    x.read_src_qp = read_src_qp;
    x.read_wc_flags = read_wc_flags;
    x.read_slid = read_slid;
    x.read_sl = read_sl;
    x.read_dlid_path_bits = read_dlid_path_bits;
    return &x;
}

// ------------------------------------------------------------------------------ work request API

using entry = qp_ex_state::entry;

/// Records the batch's first error (wr_complete returns it and posts nothing).
void note(qp_ex_state& st, int e) {
    if (!st.err) st.err = e;
}

/// The WR the setters apply to (nullptr, and EINVAL noted, before any builder).
entry* last(qp_ex_state& st) {
    if (st.wrs.empty()) {
        note(st, EINVAL);
        return nullptr;
    }
    return &st.wrs.back();
}

/// Starts a WR of `op` (send_ops bit `flag`) with the wr_id and wr_flags the application set.
entry& begin_wr(ibv_qp_ex* x, fv::ibv_wr_opcode op, uint64_t flag) {
    qp_ex_state& st = *of(x)->ex;
    if (!(st.send_ops & flag)) note(st, EINVAL);  // not asked for at creation
    constexpr unsigned allowed = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    // IBV_SEND_INLINE: the data setter decides; IBV_SEND_IP_CSUM: no Ethernet here.
    if (x->wr_flags & ~(allowed | IBV_SEND_INLINE)) note(st, EINVAL);
    entry e{};
    e.wr.wr_id = x->wr_id;
    e.wr.opcode = op;
    e.wr.send_flags = x->wr_flags & allowed;
    st.wrs.push_back(e);
    return st.wrs.back();
}

void wr_send(ibv_qp_ex* x) { begin_wr(x, fv::IBV_WR_SEND, IBV_QP_EX_WITH_SEND); }
void wr_send_imm(ibv_qp_ex* x, __be32 imm) {
    begin_wr(x, fv::IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM).wr.imm_data = ntohl(imm);
}
void wr_send_inv(ibv_qp_ex* x, uint32_t rkey) {
    begin_wr(x, fv::IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV).wr.invalidate_rkey = rkey;
}
void set_rdma(entry& e, uint32_t rkey, uint64_t addr) {
    e.wr.wr.rdma.remote_addr = addr;
    e.wr.wr.rdma.rkey = rkey;
}
void wr_rdma_write(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) {
    set_rdma(begin_wr(x, fv::IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE), rkey, addr);
}
void wr_rdma_write_imm(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, __be32 imm) {
    entry& e = begin_wr(x, fv::IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM);
    set_rdma(e, rkey, addr);
    e.wr.imm_data = ntohl(imm);
}
void wr_rdma_read(ibv_qp_ex* x, uint32_t rkey, uint64_t addr) {
    set_rdma(begin_wr(x, fv::IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ), rkey, addr);
}
void set_atomic(entry& e, uint32_t rkey, uint64_t addr, uint64_t compare_add, uint64_t swap) {
    e.wr.wr.atomic.remote_addr = addr;
    e.wr.wr.atomic.rkey = rkey;
    e.wr.wr.atomic.compare_add = compare_add;
    e.wr.wr.atomic.swap = swap;
}
void wr_atomic_cmp_swp(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t compare, uint64_t swap) {
    set_atomic(begin_wr(x, fv::IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP), rkey, addr,
               compare, swap);
}
void wr_atomic_fetch_add(ibv_qp_ex* x, uint32_t rkey, uint64_t addr, uint64_t add) {
    set_atomic(begin_wr(x, fv::IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD), rkey, addr,
               add, 0);
}
// Memory windows (type 2): the window's libibverbs object gets its new R_Key once posted.
void wr_bind_mw(ibv_qp_ex* x, ibv_mw* mw, uint32_t rkey, const ibv_mw_bind_info* b) {
    entry& e = begin_wr(x, fv::IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW);
    if (!mw || !b) return note(*of(x)->ex, EINVAL);
    e.wr.bind_mw.mw = &to(mw)->f;
    e.wr.bind_mw.rkey = rkey;
    e.wr.bind_mw.bind_info = from_lib(*b);
    e.mw = mw;
}
void wr_local_inv(ibv_qp_ex* x, uint32_t rkey) {
    begin_wr(x, fv::IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV).wr.invalidate_rkey = rkey;
}

// Refused: TCP segmentation (no Ethernet), XRC (no XRC domains), 8-byte atomic writes.
void wr_send_tso(ibv_qp_ex* x, void*, uint16_t, uint16_t) { note(*of(x)->ex, EOPNOTSUPP); }
void wr_set_xrc_srqn(ibv_qp_ex* x, uint32_t remote_srqn) {
    hc_qp* q = of(x);
    entry* e = last(*q->ex);
    if (!e) return;
    if (q->qp.qp_type != IBV_QPT_XRC_SEND) return note(*q->ex, EINVAL);
    e->wr.xrc_remote_srqn = remote_srqn;
}
void wr_atomic_write(ibv_qp_ex* x, uint32_t, uint64_t, const void*) { note(*of(x)->ex, EOPNOTSUPP); }

void wr_set_ud_addr(ibv_qp_ex* x, ibv_ah* ah, uint32_t remote_qpn, uint32_t remote_qkey) {
    hc_qp* q = of(x);
    entry* e = last(*q->ex);
    if (!e) return;
    if (q->qp.qp_type != IBV_QPT_UD || !ah) return note(*q->ex, EINVAL);
    e->wr.wr.ud.ah = to(ah)->f;
    e->wr.wr.ud.remote_qpn = remote_qpn;
    e->wr.wr.ud.remote_qkey = remote_qkey;
}

/// Gather list of the last WR (replacing an earlier data setter's).
void wr_set_sge_list(ibv_qp_ex* x, size_t n, const ibv_sge* list) {
    qp_ex_state& st = *of(x)->ex;
    entry* e = last(st);
    if (!e) return;
    if (n > of(x)->f.sq.max_sge || (n && !list)) return note(st, EINVAL);
    e->inl = false;
    e->sge_first = uint32_t(st.sges.size());
    e->sge_count = uint32_t(n);
    for (size_t i = 0; i < n; ++i) st.sges.push_back(fv::ibv_sge{list[i].addr, list[i].length, list[i].lkey});
}
void wr_set_sge(ibv_qp_ex* x, uint32_t lkey, uint64_t addr, uint32_t length) {
    const ibv_sge g{addr, length, lkey};
    wr_set_sge_list(x, 1, &g);
}

/// Inline data of the last WR, copied now (the application may reuse its buffers at once).
void wr_set_inline_data_list(ibv_qp_ex* x, size_t n, const ibv_data_buf* list) {
    hc_qp* q = of(x);
    qp_ex_state& st = *q->ex;
    entry* e = last(st);
    if (!e) return;
    switch (e->wr.opcode) {  // data the HCA sends, not what it fetches
    case fv::IBV_WR_SEND:
    case fv::IBV_WR_SEND_WITH_IMM:
    case fv::IBV_WR_SEND_WITH_INV:
    case fv::IBV_WR_RDMA_WRITE:
    case fv::IBV_WR_RDMA_WRITE_WITH_IMM: break;
    default: return note(st, EINVAL);
    }
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) total += list[i].length;
    if (total > q->f.max_inline_data) return note(st, EINVAL);
    e->inl = true;
    e->sge_count = 0;
    e->inl_first = st.inl.size();
    e->inl_len = total;
    for (size_t i = 0; i < n; ++i) {
        const auto* p = static_cast<const uint8_t*>(list[i].addr);
        st.inl.insert(st.inl.end(), p, p + list[i].length);
    }
}
void wr_set_inline_data(ibv_qp_ex* x, void* addr, size_t length) {
    const ibv_data_buf b{addr, length};
    wr_set_inline_data_list(x, 1, &b);
}

void reset_batch(qp_ex_state& st) {
    st.err = 0;
    st.wrs.clear();
    st.sges.clear();
    st.inl.clear();
    st.chain.clear();
}

void wr_start(ibv_qp_ex* x) {
    qp_ex_state& st = *of(x)->ex;
    st.lock.lock();  // the per-QP critical section until wr_complete / wr_abort
    st.open = true;
    reset_batch(st);
}

void end_batch(qp_ex_state& st) {
    reset_batch(st);
    if (st.open) {
        st.open = false;
        st.lock.unlock();
    }
}

void wr_abort(ibv_qp_ex* x) { end_batch(*of(x)->ex); }

/// Posts the batch: 0, or the error of the first WR that could not be posted.
int post_batch(hc_qp* q, qp_ex_state& st) {
    // Inline data goes as one gather entry over the copy (the firmware's inline path copies
    // from this process's memory into the WQE).
    for (entry& e : st.wrs)
        if (e.inl) {
            e.sge_first = uint32_t(st.sges.size());
            e.sge_count = e.inl_len ? 1 : 0;
            if (e.inl_len)
                st.sges.push_back(
                    fv::ibv_sge{uint64_t(uintptr_t(st.inl.data() + e.inl_first)), uint32_t(e.inl_len), 0});
        }
    st.chain.clear();
    st.chain.reserve(st.wrs.size());
    for (const entry& e : st.wrs) {
        fv::ibv_send_wr w = e.wr;
        w.next = nullptr;
        w.sg_list = e.sge_count ? st.sges.data() + e.sge_first : nullptr;
        w.num_sge = int(e.sge_count);
        if (e.inl) w.send_flags |= fv::IBV_SEND_INLINE;
        st.chain.push_back(w);
    }
    for (size_t i = 0; i + 1 < st.chain.size(); ++i) st.chain[i].next = &st.chain[i + 1];
    session& s = sess(q->qp.context);
    if (s.dead()) return EIO;
    std::lock_guard<std::mutex> g(s.data_lock);
    // All or nothing where it can be told beforehand: the firmware stops at the first WR it
    // refuses but keeps the ones before, so a batch that cannot fit the send queue is refused
    // whole (a QP that may not post refuses the first WR, and with it all).
    const fv::ibv_qp& f = q->f;
    const bool can_post =
        f.state != fv::IBV_QPS_RESET && f.state != fv::IBV_QPS_INIT && f.state != fv::IBV_QPS_RTR;
    if (can_post && st.chain.size() > f.sq.max_wr - std::min(f.sq.max_wr, f.sq.producer - f.sq.completed))
        return ENOMEM;
    fv::ibv_send_wr* bad = nullptr;
    const int e = fv::ibv_post_send(&q->f, st.chain.data(), &bad);
    const size_t posted = e ? (bad ? size_t(bad - st.chain.data()) : 0) : st.chain.size();
    for (size_t i = 0; i < posted; ++i)
        if (st.wrs[i].mw) st.wrs[i].mw->rkey = st.chain[i].bind_mw.mw->rkey;
    return e;
}

int wr_complete(ibv_qp_ex* x) {
    hc_qp* q = of(x);
    qp_ex_state& st = *q->ex;
    int e = st.err;
    if (!e && !st.wrs.empty()) e = post_batch(q, st);
    end_batch(st);
    return e;
}

/// Send operations a QP of type t may ask for on this HCA.
uint64_t send_ops_for(const hw::hca_caps& caps, ibv_qp_type t) {
    uint64_t ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    if (t == IBV_QPT_UD) return ops;
    ops |= IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM;
    if (caps.flags & hw::CAP_MW) ops |= IBV_QP_EX_WITH_BIND_MW;
    if (caps.flags & hw::CAP_SEND_INV) ops |= IBV_QP_EX_WITH_LOCAL_INV;
    if (t != IBV_QPT_RC && t != IBV_QPT_XRC_SEND) return ops;  // UC
    if (caps.flags & hw::CAP_RDMA_READ) ops |= IBV_QP_EX_WITH_RDMA_READ;
    if (caps.flags & hw::CAP_ATOMIC)
        ops |= IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
    if (caps.flags & hw::CAP_SEND_INV) ops |= IBV_QP_EX_WITH_SEND_WITH_INV;
    return ops;
}

void install_wr_api(hc_qp* q, uint64_t send_ops) {
    q->ex = std::make_unique<qp_ex_state>();
    q->ex->send_ops = send_ops;
    ibv_qp_ex& x = q->qp_ex;
    zero_beyond<ibv_qp>(x);  // the plain QP initialised only its struct ibv_qp
    x.wr_atomic_cmp_swp = wr_atomic_cmp_swp;
    x.wr_atomic_fetch_add = wr_atomic_fetch_add;
    x.wr_bind_mw = wr_bind_mw;
    x.wr_local_inv = wr_local_inv;
    x.wr_rdma_read = wr_rdma_read;
    x.wr_rdma_write = wr_rdma_write;
    x.wr_rdma_write_imm = wr_rdma_write_imm;
    x.wr_send = wr_send;
    x.wr_send_imm = wr_send_imm;
    x.wr_send_inv = wr_send_inv;
    x.wr_send_tso = wr_send_tso;
    x.wr_set_ud_addr = wr_set_ud_addr;
    x.wr_set_xrc_srqn = wr_set_xrc_srqn;
    x.wr_set_inline_data = wr_set_inline_data;
    x.wr_set_inline_data_list = wr_set_inline_data_list;
    x.wr_set_sge = wr_set_sge;
    x.wr_set_sge_list = wr_set_sge_list;
    x.wr_start = wr_start;
    x.wr_complete = wr_complete;
    x.wr_abort = wr_abort;
    x.wr_atomic_write = wr_atomic_write;
    q->vqp_comp_mask |= HCASIM_VERBS_QP_EX;
}

ibv_qp* create_qp_ex(ibv_context* c, ibv_qp_init_attr_ex* a) {
    constexpr uint32_t known = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                               IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                               IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if (a->comp_mask & ~known) return fail<ibv_qp>(EINVAL);
    // No TSO, RSS (receive WQ indirection, hashing) or creation flags here.
    constexpr uint32_t refused =
        IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH;
    if (a->comp_mask & refused) return fail<ibv_qp>(EOPNOTSUPP);
    if ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags) return fail<ibv_qp>(EOPNOTSUPP);
    // The head of ibv_qp_init_attr_ex is an ibv_qp_init_attr (libibverbs casts it the same way).
    auto* plain = reinterpret_cast<ibv_qp_init_attr*>(a);
    if (a->qp_type == IBV_QPT_XRC_RECV) {  // an XRC target: a domain, no PD, no send queue
        if (!(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != c ||
            (a->comp_mask & (IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)))
            return fail<ibv_qp>(EINVAL);
        return create_xrc_target(c, a->xrcd, plain);
    }
    if (a->comp_mask & IBV_QP_INIT_ATTR_XRCD) return fail<ibv_qp>(EINVAL);  // only targets have one
    if (!(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != c) return fail<ibv_qp>(EINVAL);
    if (a->qp_type != IBV_QPT_RC && a->qp_type != IBV_QPT_UC && a->qp_type != IBV_QPT_UD &&
        a->qp_type != IBV_QPT_XRC_SEND)
        return fail<ibv_qp>(EOPNOTSUPP);
    const bool wr_api = a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    if (wr_api && (a->send_ops_flags & ~send_ops_for(sess(c).driver.caps(), a->qp_type)))
        return fail<ibv_qp>(EOPNOTSUPP);
    ibv_qp* qp = create_qp_plain(a->pd, plain);
    if (!qp) return nullptr;  // errno set
    if (wr_api) install_wr_api(to(qp), a->send_ops_flags);
    return qp;
}

}  // namespace

void add_extended_ops(verbs_context_ops& o) {
    o.create_cq_ex = create_cq_ex;
    o.create_qp_ex = create_qp_ex;
}

}  // namespace hcasim::provider
