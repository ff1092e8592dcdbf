// The hcasim libibverbs provider (libhcasim-rdmav34.so): unmodified RDMA applications drive
// the HCAs of `hcasim serve`. See docs/libibverbs.md.
//
// The split is a real driver's: control verbs (create, modify, query, destroy, register) are
// requests to the server, whose firmware runs them in simulated time; the data path (post,
// poll, notify, address handles) runs here, in the application's thread, through the same
// firmware code on mirror objects, writing WQEs into the rings in shared simulated host memory
// and sending doorbells as messages.
//
// firmware/verbs.h comes before <infiniband/verbs.h>: libibverbs defines function-like macros
// (ibv_query_port, ibv_reg_mr) that would rewrite the firmware's declarations. The firmware's
// types live in hcasim::verbs (alias fv), libibverbs' in the global namespace.
#include "provider/objects.h"
#include "firmware/owned_ring.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

/// Set by the copy of this library that registered the provider (see register_provider).
extern "C" __attribute__((visibility("default"))) int hcasim_provider_registered;
int hcasim_provider_registered = 0;

namespace hcasim::provider {
namespace {

/// Device attributes as this provider offers them: the HCA's, less what the provider does not
/// implement (fast registration, FMRs: no libibverbs route to them).
void fill_device_attr(const fv::ibv_device_attr& f, ibv_device_attr* a) {
    std::memset(a, 0, sizeof *a);
    std::snprintf(a->fw_ver, sizeof a->fw_ver, "%s", f.fw_ver);
    a->node_guid = htobe64(f.node_guid);
    a->sys_image_guid = htobe64(f.sys_image_guid);
    a->max_mr_size = f.max_mr_size;
    a->page_size_cap = f.page_size_cap;
    a->vendor_id = f.vendor_id;
    a->vendor_part_id = f.vendor_part_id;
    a->hw_ver = f.hw_ver;
    a->max_qp = f.max_qp;
    a->max_qp_wr = f.max_qp_wr;
    // The firmware's flags by name (its numbering is its own); the memory management extensions
    // (fast registration) stay out: libibverbs has no user-space route to them. The ports count P_Key and Q_Key violations (o10-57) and
    // report PortActive; the node has a system image GUID.
    const std::pair<unsigned, unsigned> flags[] = {
        {fv::IBV_DEVICE_RESIZE_MAX_WR, IBV_DEVICE_RESIZE_MAX_WR},
        {fv::IBV_DEVICE_AUTO_PATH_MIG, IBV_DEVICE_AUTO_PATH_MIG},
        {fv::IBV_DEVICE_UD_AV_PORT_ENFORCE, IBV_DEVICE_UD_AV_PORT_ENFORCE},
        {fv::IBV_DEVICE_RC_RNR_NAK_GEN, IBV_DEVICE_RC_RNR_NAK_GEN},
        {fv::IBV_DEVICE_SRQ_RESIZE, IBV_DEVICE_SRQ_RESIZE},
        {fv::IBV_DEVICE_N_NOTIFY_CQ, IBV_DEVICE_N_NOTIFY_CQ},
        {fv::IBV_DEVICE_MEM_WINDOW, IBV_DEVICE_MEM_WINDOW},
        {fv::IBV_DEVICE_MEM_WINDOW_TYPE_2A, IBV_DEVICE_MEM_WINDOW_TYPE_2A},
        {fv::IBV_DEVICE_MEM_WINDOW_TYPE_2B, IBV_DEVICE_MEM_WINDOW_TYPE_2B},
        {fv::IBV_DEVICE_XRC, IBV_DEVICE_XRC},
    };
    a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR | IBV_DEVICE_PORT_ACTIVE_EVENT |
                          IBV_DEVICE_SYS_IMAGE_GUID;
    for (const auto& [fw_flag, lib_flag] : flags)
        if (f.device_cap_flags & fw_flag) a->device_cap_flags |= lib_flag;
    a->max_sge = f.max_sge;
    a->max_sge_rd = f.max_sge_rd;
    a->max_cq = f.max_cq;
    a->max_cqe = f.max_cqe;
    a->max_mr = f.max_mr;
    a->max_pd = f.max_pd;
    a->max_qp_rd_atom = f.max_qp_rd_atom;
    a->max_ee_rd_atom = f.max_ee_rd_atom;
    a->max_res_rd_atom = f.max_res_rd_atom;
    a->max_qp_init_rd_atom = f.max_qp_init_rd_atom;
    a->max_ee_init_rd_atom = f.max_ee_init_rd_atom;
    a->atomic_cap = ibv_atomic_cap(f.atomic_cap);
    a->max_ee = f.max_ee;
    a->max_rdd = f.max_rdd;
    a->max_mw = f.max_mw;
    a->max_raw_ipv6_qp = 0;
    a->max_raw_ethy_qp = 0;
    a->max_mcast_grp = f.max_mcast_grp;
    a->max_mcast_qp_attach = f.max_mcast_qp_attach;
    a->max_total_mcast_qp_attach = f.max_total_mcast_qp_attach;
    a->max_ah = f.max_ah;
    a->max_fmr = 0;
    a->max_map_per_fmr = 0;
    a->max_srq = f.max_srq;
    a->max_srq_wr = f.max_srq_wr;
    a->max_srq_sge = f.max_srq_sge;
    a->max_pkeys = f.max_pkeys;
    a->local_ca_ack_delay = f.local_ca_ack_delay;
    a->phys_port_cnt = f.phys_port_cnt;
}

// ------------------------------------------------------------------------------ device ops

int query_device_ex(ibv_context* c, const ibv_query_device_ex_input* input, ibv_device_attr_ex* attr,
                    size_t attr_size) {
    if (input && input->comp_mask) return EINVAL;
    if (attr_size < sizeof(ibv_device_attr)) return EINVAL;
    fv::ibv_device_attr f{};
    if (int e = sess(c).call(sp::header{sp::QUERY_DEVICE, 0}, &f)) return e;
    ibv_device_attr_ex x{};
    fill_device_attr(f, &x.orig_attr);
    x.phys_port_cnt_ex = x.orig_attr.phys_port_cnt;
    std::memcpy(attr, &x, std::min(attr_size, sizeof x));
    return 0;
}

int query_port(ibv_context* c, uint8_t port, ibv_port_attr* a) {
    fv::ibv_port_attr f{};
    if (int e = sess(c).call(sp::u64_req{{sp::QUERY_PORT, 0}, port}, &f)) return e;
    std::memset(a, 0, sizeof *a);
    a->state = ibv_port_state(f.state);
    a->max_mtu = ibv_mtu(f.max_mtu);
    a->active_mtu = ibv_mtu(f.active_mtu);
    a->gid_tbl_len = f.gid_tbl_len;
    a->port_cap_flags = f.port_cap_flags ? f.port_cap_flags : 0x02510868u;  // as sysfs' cap_mask
    a->max_msg_sz = f.max_msg_sz;
    a->bad_pkey_cntr = f.bad_pkey_cntr;
    a->qkey_viol_cntr = f.qkey_viol_cntr;
    a->pkey_tbl_len = f.pkey_tbl_len;
    a->lid = f.lid;
    a->sm_lid = f.sm_lid;
    a->lmc = f.lmc;
    a->max_vl_num = f.max_vl_num ? f.max_vl_num : 1;  // VL0 only
    a->sm_sl = f.sm_sl;
    a->subnet_timeout = f.subnet_timeout;
    a->init_type_reply = f.init_type_reply;
    a->active_width = sp::ibv_width_code(f.active_width);
    a->active_speed = sp::ibv_speed_code(f.active_speed);
    a->phys_state = f.phys_state;
    a->link_layer = IBV_LINK_LAYER_INFINIBAND;
    return 0;
}

ibv_pd* alloc_pd(ibv_context* c) {
    session& s = sess(c);
    uint64_t id = 0;
    if (int e = s.call(sp::header{sp::ALLOC_PD, 0}, &id)) return fail<ibv_pd>(e);
    auto* p = new hc_pd{};
    p->id = id;
    p->f.context = &s.ctx;
    p->f.handle = uint32_t(id);
    p->pd.handle = uint32_t(id);
    return &p->pd;
}

int dealloc_pd(ibv_pd* pd) {
    hc_pd* p = to(pd);
    if (p->f.refs) return EBUSY;  // address handles (made here) still use it
    if (int e = sess(pd->context).call(sp::u64_req{{sp::DEALLOC_PD, 0}, p->id})) return e;
    delete p;
    return 0;
}

ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access) {
    session& s = sess(pd->context);
    // The model's MPTs translate the virtual addresses themselves: no separate IOVA.
    if (hca_va != uint64_t(uintptr_t(addr))) return fail<ibv_mr>(EINVAL);
    const uint64_t va = uintptr_t(addr);
    if (int e = s.share_range(va, length)) return fail<ibv_mr>(e);
    sp::reg_mr_req r{{sp::REG_MR, 0}, to(pd)->id, va, length, access, 0};
    sp::reg_mr_rep rep{};
    if (int e = s.call(r, &rep)) {
        s.unshare_range(va, length);
        return fail<ibv_mr>(e);
    }
    auto* m = new hc_mr{};
    m->id = rep.id;
    m->addr = va;
    m->length = length;
    m->vmr.ibv_mr.handle = uint32_t(rep.id);
    m->vmr.ibv_mr.lkey = rep.lkey;
    m->vmr.ibv_mr.rkey = rep.rkey;
    m->vmr.mr_type = HCASIM_MR_ORDINARY;
    m->vmr.access = access;
    m->f.context = &s.ctx;
    m->f.pd = &to(pd)->f;
    m->f.addr = va;
    m->f.length = length;
    m->f.handle = uint32_t(rep.id);
    m->f.lkey = rep.lkey;
    m->f.rkey = rep.rkey;
    m->f.access = access;
    return &m->vmr.ibv_mr;
}

int rereg_mr(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
    auto* m = reinterpret_cast<hc_mr*>(vmr);
    session& s = sess(vmr->ibv_mr.context);
    const bool move = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
    const uint64_t va = uintptr_t(addr);
    if (move) {
        if (int e = s.share_range(va, length)) {
            errno = e;
            return IBV_REREG_MR_ERR_INPUT;
        }
    }
    sp::rereg_mr_req r{{sp::REREG_MR, 0},
                       m->id,
                       flags,
                       access,
                       (flags & IBV_REREG_MR_CHANGE_PD) ? to(pd)->id : 0,
                       va,
                       length};
    sp::reg_mr_rep rep{};
    if (int e = s.call(r, &rep)) {
        if (move) s.unshare_range(va, length);
        errno = e;
        return e == EINVAL ? IBV_REREG_MR_ERR_INPUT : IBV_REREG_MR_ERR_CMD;
    }
    if (move) {
        s.unshare_range(m->addr, m->length);
        m->addr = m->f.addr = va;
        m->length = m->f.length = length;
    }
    if (flags & IBV_REREG_MR_CHANGE_PD) m->f.pd = &to(pd)->f;
    if (flags & IBV_REREG_MR_CHANGE_ACCESS) m->vmr.access = m->f.access = access;
    m->vmr.ibv_mr.lkey = m->f.lkey = rep.lkey;
    m->vmr.ibv_mr.rkey = m->f.rkey = rep.rkey;
    return 0;
}

ibv_mw* alloc_mw(ibv_pd* pd, ibv_mw_type type) {
    session& s = sess(pd->context);
    sp::mw_rep rep{};
    if (int e = s.call(sp::alloc_mw_req{{sp::ALLOC_MW, 0}, to(pd)->id, int32_t(type), 0}, &rep))
        return fail<ibv_mw>(e);
    auto* w = new hc_mw{};
    w->id = rep.id;
    w->f = fv::ibv_mw{&s.ctx, &to(pd)->f, rep.rkey, rep.handle, fv::ibv_mw_type(type)};
    w->mw.context = pd->context;
    w->mw.pd = pd;
    w->mw.rkey = rep.rkey;
    w->mw.handle = rep.handle;
    w->mw.type = type;
    return &w->mw;
}

int dealloc_mw(ibv_mw* mw) {
    if (int e = sess(mw->context).call(sp::u64_req{{sp::DEALLOC_MW, 0}, to(mw)->id})) return e;
    delete to(mw);
    return 0;
}

int bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* b) {
    session& s = sess(qp->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    fv::ibv_mw_bind f;
    f.wr_id = b->wr_id;
    f.send_flags = b->send_flags;
    f.bind_info = from_lib(b->bind_info);
    if (int e = fv::ibv_bind_mw(&to(qp)->f, &to(mw)->f, &f)) return e;
    mw->rkey = to(mw)->f.rkey;
    return 0;
}

int dereg_mr(verbs_mr* vmr) {
    auto* m = reinterpret_cast<hc_mr*>(vmr);
    session& s = sess(vmr->ibv_mr.context);
    if (int e = s.call(sp::u64_req{{sp::DEREG_MR, 0}, m->id})) return e;
    s.unshare_range(m->addr, m->length);
    delete m;
    return 0;
}

ibv_cq* create_cq(ibv_context* c, int cqe, ibv_comp_channel* channel, int comp_vector);
int destroy_cq(ibv_cq* cq);

int resize_cq(ibv_cq* cq, int cqe) {
    hc_cq* q = to(cq);
    session& s = sess(cq->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    sp::cq_rep rep{};
    if (int e = s.call(sp::resize_cq_req{{sp::RESIZE_CQ, 0}, q->id, q->f.consumer, cqe, 0}, &rep)) return e;
    q->f.ring_pa = rep.ring_pa;
    q->f.log_size = uint8_t(rep.log_size);
    q->f.cqe = rep.cqe;
    cq->cqe = rep.cqe;
    return 0;
}

int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) {
    hc_cq* q = to(cq);
    session& s = sess(cq->context);
    constexpr int batch = 16;
    fv::ibv_wc f[batch];
    std::lock_guard<std::mutex> g(s.data_lock);
    int got = 0;
    while (got < n) {
        const int k = fv::ibv_poll_cq(&q->f, std::min(batch, n - got), f);
        if (k < 0) return got ? got : k;
        for (int i = 0; i < k; ++i) {
            ibv_wc& w = wc[got + i];
            std::memset(&w, 0, sizeof w);
            w.wr_id = f[i].wr_id;
            w.status = ibv_wc_status(f[i].status);
            w.opcode = ibv_wc_opcode(f[i].opcode);
            w.vendor_err = f[i].vendor_err;
            w.byte_len = f[i].byte_len;
            // Immediate data travels in network order in libibverbs; an invalidated R_Key not.
            w.imm_data = (f[i].wc_flags & fv::IBV_WC_WITH_IMM) ? htonl(f[i].imm_data) : f[i].imm_data;
            w.qp_num = f[i].qp_num;
            w.src_qp = f[i].src_qp;
            w.wc_flags = f[i].wc_flags;
            w.pkey_index = f[i].pkey_index;
            w.slid = f[i].slid;
            w.sl = f[i].sl;
            w.dlid_path_bits = f[i].dlid_path_bits;
        }
        got += k;
        if (k < std::min(batch, n - got + k)) break;
    }
    // Nothing will ever come from a dead server: a busy-polling application must not spin on.
    if (!got && s.dead()) return -EIO;
    return got;
}

int req_notify_cq(ibv_cq* cq, int solicited_only) {
    session& s = sess(cq->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    if (s.dead()) return EIO;
    if (int e = fv::ibv_req_notify_cq(&to(cq)->f, solicited_only)) return e;
    // The arm must reach the HCA before the application's next poll: the simulation runs on
    // while this process works, and a completion written between the poll and a late arm would
    // raise no event. An MMIO read cannot pass the posted arm (PCIe ordering), so its reply
    // means the CQ is armed.
    s.bus.mmio_read32(hcasim::hw::REG_HCA_ID);
    return s.dead() ? EIO : 0;
}

void cq_event(ibv_cq*) {}

/// The provider's send WR chain in the firmware's types; bad points back into the caller's.
void convert_send(ibv_send_wr* wr, bool ud, std::vector<fv::ibv_send_wr>& out,
                  std::vector<ibv_send_wr*>& orig) {
    out.clear();
    orig.clear();
    for (ibv_send_wr* w = wr; w; w = w->next) {
        fv::ibv_send_wr f{};
        f.wr_id = w->wr_id;
        f.sg_list = reinterpret_cast<fv::ibv_sge*>(w->sg_list);
        f.num_sge = w->num_sge;
        f.opcode = fv::ibv_wr_opcode(w->opcode);
        f.send_flags = w->send_flags;
        switch (w->opcode) {
        case IBV_WR_SEND_WITH_INV:
        case IBV_WR_LOCAL_INV: f.invalidate_rkey = w->invalidate_rkey; break;
        default: f.imm_data = ntohl(w->imm_data); break;
        }
        switch (w->opcode) {
        case IBV_WR_ATOMIC_CMP_AND_SWP:
        case IBV_WR_ATOMIC_FETCH_AND_ADD:
            f.wr.atomic.remote_addr = w->wr.atomic.remote_addr;
            f.wr.atomic.compare_add = w->wr.atomic.compare_add;
            f.wr.atomic.swap = w->wr.atomic.swap;
            f.wr.atomic.rkey = w->wr.atomic.rkey;
            break;
        case IBV_WR_BIND_MW:
            f.bind_mw.mw = w->bind_mw.mw ? &to(w->bind_mw.mw)->f : nullptr;
            f.bind_mw.rkey = w->bind_mw.rkey;
            f.bind_mw.bind_info = from_lib(w->bind_mw.bind_info);
            break;
        default:
            f.wr.rdma.remote_addr = w->wr.rdma.remote_addr;
            f.wr.rdma.rkey = w->wr.rdma.rkey;
            break;
        }
        f.xrc_remote_srqn = w->qp_type.xrc.remote_srqn;  // read by XRC initiators only
        if (ud) {                                        // the same union as rdma and atomic in libibverbs
            f.wr.ud.ah = w->wr.ud.ah ? to(w->wr.ud.ah)->f : nullptr;
            f.wr.ud.remote_qpn = w->wr.ud.remote_qpn;
            f.wr.ud.remote_qkey = w->wr.ud.remote_qkey;
        }
        out.push_back(f);
        orig.push_back(w);
    }
    for (size_t i = 0; i + 1 < out.size(); ++i) out[i].next = &out[i + 1];
}

int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
    thread_local std::vector<fv::ibv_send_wr> chain;
    thread_local std::vector<ibv_send_wr*> orig;
    session& s = sess(qp->context);
    convert_send(wr, qp->qp_type == IBV_QPT_UD, chain, orig);
    if (chain.empty()) return 0;
    if (s.dead()) {
        *bad = wr;
        return EIO;
    }
    std::lock_guard<std::mutex> g(s.data_lock);
    fv::ibv_send_wr* fbad = nullptr;
    const int e = fv::ibv_post_send(&to(qp)->f, chain.data(), &fbad);
    if (e) *bad = fbad ? orig[size_t(fbad - chain.data())] : wr;
    // A type 2 bind gives its window the consumer's new R_Key once posted.
    const size_t posted = e ? (fbad ? size_t(fbad - chain.data()) : 0) : chain.size();
    for (size_t i = 0; i < posted; ++i)
        if (orig[i]->opcode == IBV_WR_BIND_MW && orig[i]->bind_mw.mw)
            orig[i]->bind_mw.mw->rkey = chain[i].bind_mw.mw->rkey;
    return e;
}

bool convert_recv(ibv_recv_wr* wr, std::vector<fv::ibv_recv_wr>& out, std::vector<ibv_recv_wr*>& orig) {
    out.clear();
    orig.clear();
    for (ibv_recv_wr* w = wr; w; w = w->next) {
        fv::ibv_recv_wr f{};
        f.wr_id = w->wr_id;
        f.sg_list = reinterpret_cast<fv::ibv_sge*>(w->sg_list);
        f.num_sge = w->num_sge;
        out.push_back(f);
        orig.push_back(w);
    }
    for (size_t i = 0; i + 1 < out.size(); ++i) out[i].next = &out[i + 1];
    return !out.empty();
}

/// A receive WR chain through one of the firmware's receive posts (`post` on the mirror).
template <class Post>
int post_receives(session& s, ibv_recv_wr* wr, ibv_recv_wr** bad, Post post) {
    thread_local std::vector<fv::ibv_recv_wr> chain;
    thread_local std::vector<ibv_recv_wr*> orig;
    if (!convert_recv(wr, chain, orig)) return 0;
    if (s.dead()) {
        *bad = wr;
        return EIO;
    }
    std::lock_guard<std::mutex> g(s.data_lock);
    fv::ibv_recv_wr* fbad = nullptr;
    const int e = post(chain.data(), &fbad);
    if (e) *bad = fbad ? orig[size_t(fbad - chain.data())] : wr;
    return e;
}

int post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return post_receives(sess(qp->context), wr, bad, [qp](fv::ibv_recv_wr* w, fv::ibv_recv_wr** b) {
        return fv::ibv_post_recv(&to(qp)->f, w, b);
    });
}

int post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
    return post_receives(sess(srq->context), wr, bad, [srq](fv::ibv_recv_wr* w, fv::ibv_recv_wr** b) {
        return fv::ibv_post_srq_recv(&to(srq)->f, w, b);
    });
}

// ------------------------------------------------------------------------------ CQs

/// Completion channels made by this library's ibv_create_comp_channel: channel -> write end.
std::mutex channels_lock;
std::map<const ibv_comp_channel*, int> channel_writers;

ibv_cq* create_cq(ibv_context* c, int cqe, ibv_comp_channel* channel, int comp_vector) {
    session& s = sess(c);
    int wfd = -1;
    if (channel) {
        std::lock_guard<std::mutex> g(channels_lock);
        auto it = channel_writers.find(channel);
        // A channel libibverbs made itself (the library was not preloaded) cannot carry events.
        if (it == channel_writers.end()) return fail<ibv_cq>(EINVAL);
        wfd = it->second;
    }
    auto* q = new hc_cq{};
    sp::create_cq_req r{{sp::CREATE_CQ, 0}, cqe, comp_vector, uint64_t(uintptr_t(&q->cq)),
                        channel ? 1u : 0u,  0};
    sp::cq_rep rep{};
    if (int e = s.call(&r, sizeof r, &rep, sizeof rep, wfd)) {
        delete q;
        return fail<ibv_cq>(e);
    }
    q->id = rep.id;
    q->f.context = &s.ctx;
    q->f.handle = rep.cqn;
    q->f.cqe = rep.cqe;
    q->f.log_size = uint8_t(rep.log_size);
    q->f.ring_pa = rep.ring_pa;
    q->f.comp_vector = comp_vector;
    q->cq.cqe = rep.cqe;
    q->cq.handle = rep.cqn;
    return &q->cq;
}

int destroy_cq(ibv_cq* cq) {
    hc_cq* q = to(cq);
    session& s = sess(cq->context);
    if (q->f.refs) return EBUSY;  // C10-18
    if (int e = s.call(sp::u64_req{{sp::DESTROY_CQ, 0}, q->id})) return e;
    delete q;
    return 0;
}

// ------------------------------------------------------------------------------ SRQs

void adopt_srq(hc_srq* q, const sp::srq_rep& rep) {
    q->f.handle = rep.srqn;
    q->f.ring = rep.ring;
    q->srq.handle = rep.srqn;
}

/// An SRQ in `pd`; with `xrcd`, an XRC SRQ of that domain completing on `cq`.
hc_srq* new_srq(ibv_pd* pd, ibv_srq_attr& attr, ibv_xrcd* xrcd, ibv_cq* cq) {
    session& s = sess(pd->context);
    auto* q = new hc_srq{};
    sp::create_srq_req r{};
    r.h.op = sp::CREATE_SRQ;
    r.pd = to(pd)->id;
    r.user_handle = uintptr_t(&q->srq);
    r.attr = fv::ibv_srq_attr{attr.max_wr, attr.max_sge, attr.srq_limit};
    r.srq_type = xrcd ? fv::IBV_SRQT_XRC : fv::IBV_SRQT_BASIC;
    r.xrcd = xrcd ? to(xrcd)->id : 0;
    r.cq = xrcd ? to(cq)->id : 0;
    sp::srq_rep rep{};
    if (int e = s.call(r, &rep)) {
        delete q;
        return fail<hc_srq>(e);
    }
    q->id = rep.id;
    q->f.context = &s.ctx;
    q->f.pd = &to(pd)->f;
    adopt_srq(q, rep);
    if (xrcd) {
        std::lock_guard<std::mutex> g(s.data_lock);
        q->f.xrcd = &to(xrcd)->f;
        q->f.cq = &to(cq)->f;
        ++q->f.xrcd->refs;
        ++q->f.cq->refs;
        s.driver.set_srq_user(rep.srqn, &q->f);  // its completions name it (poll_cq frees its slots)
    }
    attr.max_wr = rep.attr.max_wr;
    attr.max_sge = rep.attr.max_sge;
    return q;
}

ibv_srq* create_srq(ibv_pd* pd, ibv_srq_init_attr* ia) {
    hc_srq* q = new_srq(pd, ia->attr, nullptr, nullptr);
    return q ? &q->srq : nullptr;
}

/// ibv_create_srq_ex with more than a PD (libibverbs sends a plain one to create_srq): an XRC SRQ.
/// The provider fills the whole ibv_srq here (libibverbs' ibv_create_srq does it for create_srq).
ibv_srq* create_srq_ex(ibv_context* c, ibv_srq_init_attr_ex* a) {
    constexpr uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                               IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
    if (a->comp_mask & ~known) return fail<ibv_srq>(EINVAL);
    if (a->comp_mask & IBV_SRQ_INIT_ATTR_TM) return fail<ibv_srq>(EOPNOTSUPP);  // no tag matching
    const bool xrc = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type == IBV_SRQT_XRC;
    if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a->srq_type != IBV_SRQT_BASIC && !xrc)
        return fail<ibv_srq>(EOPNOTSUPP);
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd || a->pd->context != c) return fail<ibv_srq>(EINVAL);
    if (xrc && (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) ||
                !a->xrcd || !a->cq || a->xrcd->context != c || a->cq->context != c))
        return fail<ibv_srq>(EINVAL);
    hc_srq* q = new_srq(a->pd, a->attr, xrc ? a->xrcd : nullptr, xrc ? a->cq : nullptr);
    if (!q) return nullptr;  // errno set
    ibv_srq& l = q->srq;
    l.context = c;
    l.srq_context = a->srq_context;
    l.pd = a->pd;
    l.handle = uint32_t(q->id);
    l.events_completed = 0;
    pthread_mutex_init(&l.mutex, nullptr);
    pthread_cond_init(&l.cond, nullptr);
    return &l;
}

int get_srq_num(ibv_srq* srq, uint32_t* num) { return fv::ibv_get_srq_num(&to(srq)->f, num); }

// ------------------------------------------------------------------------------ XRC domains

/// ibv_open_xrcd: a new domain of this context. With a file (IBV_XRCD_INIT_ATTR_FD, fd >= 0) the
/// kernel shares one domain among the processes that open the same file; hcasim does not share
/// domains between processes (docs/libibverbs.md), so the file only has to be a valid descriptor.
ibv_xrcd* open_xrcd(ibv_context* c, ibv_xrcd_init_attr* a) {
    constexpr uint32_t known = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
    if (!a || (a->comp_mask & ~known)) return fail<ibv_xrcd>(EINVAL);
    const int fd = (a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ? a->fd : -1;
    const int oflags = (a->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS) ? a->oflags : 0;
    if (oflags & ~(O_CREAT | O_EXCL)) return fail<ibv_xrcd>(EINVAL);
    struct stat st {};
    if (fd >= 0 && fstat(fd, &st) != 0) return fail<ibv_xrcd>(EBADF);
    if (fd >= 0 && !(oflags & O_CREAT)) return fail<ibv_xrcd>(EINVAL);  // no domain of that file to join
    session& s = sess(c);
    sp::open_xrcd_req r{};
    r.h.op = sp::OPEN_XRCD;
    r.oflags = oflags;
    sp::xrcd_rep rep{};
    if (int e = s.call(r, &rep)) return fail<ibv_xrcd>(e);
    auto* x = new hc_xrcd{};
    x->xrcd.context = c;
    x->id = rep.id;
    x->f = fv::ibv_xrcd{&s.ctx, rep.xrcdn, 0};
    return &x->xrcd;
}

int close_xrcd(ibv_xrcd* xrcd) {
    hc_xrcd* x = to(xrcd);
    if (x->f.refs) return EBUSY;
    if (int e = sess(xrcd->context).call(sp::u64_req{{sp::CLOSE_XRCD, 0}, x->id})) return e;
    delete x;
    return 0;
}

int srq_request(ibv_srq* srq, uint32_t op, ibv_srq_attr* attr, int mask) {
    hc_srq* q = to(srq);
    session& s = sess(srq->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    sp::modify_srq_req r{};
    r.h.op = op;
    r.id = q->id;
    r.mask = mask;
    r.producer = q->f.ring.producer;
    r.completed = q->f.ring.completed;
    r.attr = fv::ibv_srq_attr{attr->max_wr, attr->max_sge, attr->srq_limit};
    sp::srq_rep rep{};
    if (int e = s.call(r, &rep)) return e;
    adopt_srq(q, rep);
    attr->max_wr = rep.attr.max_wr;
    attr->max_sge = rep.attr.max_sge;
    attr->srq_limit = rep.attr.srq_limit;
    return 0;
}
int modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
    return srq_request(srq, sp::MODIFY_SRQ, attr, mask);
}
int query_srq(ibv_srq* srq, ibv_srq_attr* attr) { return srq_request(srq, sp::QUERY_SRQ, attr, 0); }

int destroy_srq(ibv_srq* srq) {
    hc_srq* q = to(srq);
    session& s = sess(srq->context);
    if (q->f.refs) return EBUSY;
    if (int e = s.call(sp::u64_req{{sp::DESTROY_SRQ, 0}, q->id})) return e;
    if (q->f.xrcd) {
        std::lock_guard<std::mutex> g(s.data_lock);
        --q->f.xrcd->refs;
        --q->f.cq->refs;
        s.driver.set_srq_user(q->f.handle, nullptr);
    }
    delete q;
    return 0;
}

// ------------------------------------------------------------------------------ QPs

void adopt_qp(hc_qp* q, const sp::qp_rep& rep) {
    q->f.qp_num = rep.qp_num;
    q->f.state = fv::ibv_qp_state(rep.state);
    q->f.max_inline_data = rep.max_inline_data;
    q->f.hw_ctx.port = rep.port;
    q->f.sq = rep.sq;
    q->f.rq = rep.rq;
}

/// Creates a QP: in `pd` (RC, UC, UD, XRC initiator) or, pd nullptr, an XRC target of `xrcd`.
ibv_qp* new_qp(ibv_context* c, ibv_pd* pd, ibv_xrcd* xrcd, ibv_qp_init_attr* ia) {
    session& s = sess(c);
    const bool tgt = ia->qp_type == IBV_QPT_XRC_RECV, ini = ia->qp_type == IBV_QPT_XRC_SEND;
    // IBA 10.2.10: an initiator has no receive side (its receive CQ, SRQ and caps are unused);
    // a target has neither PD nor CQs nor queues.
    if (ini) {
        ia->recv_cq = nullptr;
        ia->srq = nullptr;
    }
    if (tgt ? !xrcd || pd : !pd || !ia->send_cq || (!ini && !ia->recv_cq)) return fail<ibv_qp>(EINVAL);
    if (tgt) ia->send_cq = ia->recv_cq = nullptr, ia->srq = nullptr;
    auto* q = new hc_qp{};
    sp::create_qp_req r{};
    r.h.op = sp::CREATE_QP;
    r.pd = pd ? to(pd)->id : 0;
    r.xrcd = xrcd ? to(xrcd)->id : 0;
    r.send_cq = ia->send_cq ? to(ia->send_cq)->id : 0;
    r.recv_cq = ia->recv_cq ? to(ia->recv_cq)->id : 0;
    r.srq = ia->srq ? to(ia->srq)->id : 0;
    r.user_handle = uintptr_t(&q->qp);
    r.cap = from_lib(ia->cap);
    r.qp_type = ia->qp_type;
    r.sq_sig_all = ia->sq_sig_all;
    // libibverbs' RC, UC, UD, XRC_SEND, XRC_RECV share the firmware's numbering; anything else
    // is refused there.
    sp::qp_rep rep{};
    if (int e = s.call(r, &rep)) {
        delete q;
        return fail<ibv_qp>(e);
    }
    q->id = rep.id;
    fv::ibv_qp& f = q->f;
    f.context = &s.ctx;
    f.qp_context = ia->qp_context;
    f.pd = pd ? &to(pd)->f : nullptr;
    f.send_cq = ia->send_cq ? &to(ia->send_cq)->f : nullptr;
    f.recv_cq = ia->recv_cq ? &to(ia->recv_cq)->f : f.send_cq;  // an initiator: as the firmware has it
    f.srq = ia->srq ? &to(ia->srq)->f : nullptr;
    f.xrcd = xrcd ? &to(xrcd)->f : nullptr;
    f.qp_type = fv::ibv_qp_type(ia->qp_type);
    f.sq_sig_all = ia->sq_sig_all;
    adopt_qp(q, rep);
    {
        std::lock_guard<std::mutex> g(s.data_lock);
        if (f.send_cq) ++f.send_cq->refs;
        if (f.recv_cq) ++f.recv_cq->refs;
        if (f.srq) ++f.srq->refs;
        if (f.xrcd) ++f.xrcd->refs;
        s.driver.set_qp_user(rep.qp_num, &f);
    }
    q->vqp_xrcd = xrcd;
    ia->cap = to_lib(rep.cap);
    ibv_qp& l = q->qp;
    l.context = c;
    l.qp_context = ia->qp_context;
    l.pd = pd;
    l.send_cq = ia->send_cq;
    l.recv_cq = ia->recv_cq;
    l.srq = ia->srq;
    l.handle = uint32_t(rep.id);
    l.qp_num = rep.qp_num;
    l.state = IBV_QPS_RESET;
    l.qp_type = ia->qp_type;
    l.events_completed = 0;
    pthread_mutex_init(&l.mutex, nullptr);
    pthread_cond_init(&l.cond, nullptr);
    return &q->qp;
}

ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* ia) { return new_qp(pd->context, pd, nullptr, ia); }

/// Removes the completions of QP qpn from a CQ (what rdma-core's providers do when a QP is reset
/// or destroyed: an application that restarts a QP does not poll the completions of its previous
/// life). The software-owned entries after it move up over the removed ones (owner bits rewritten
/// for their new slots) and the consumer count skips the freed slots; the HCA only writes beyond
/// them. Removed receive completions of an SRQ free their SRQ slots, as polling them would.
void clean_cq(session& s, hc_cq* q, uint32_t qpn, fv::ibv_qp* qp) {
    fv::ibv_cq& c = q->f;
    const uint64_t mask = (uint64_t(1) << c.log_size) - 1;
    auto slot = [&](uint64_t n) { return c.ring_pa + (n & mask) * sizeof(hcasim::hw::cqe); };
    const uint64_t end = c.consumer + hcasim::fw::software_owned_run<hcasim::hw::cqe>(s.bus, c.ring_pa,
                                                                                      c.log_size, c.consumer);
    uint64_t freed = 0;
    for (uint64_t n = end; n-- > c.consumer;) {
        hcasim::hw::cqe e;
        s.bus.mem_read(slot(n), &e, sizeof e);
        if (e.qpn == qpn) {
            ++freed;
            if (qp && qp->srq && !(e.owner & hcasim::hw::CQE_IS_SEND) &&
                qp->srq->ring.completed < qp->srq->ring.producer)
                ++qp->srq->ring.completed;
            continue;
        }
        if (!freed) continue;
        e.owner = uint8_t((e.owner & ~hcasim::hw::CQE_OWNER_BIT) |
                          hcasim::hw::cqe_owner_for(n + freed, c.log_size));
        s.bus.mem_write(slot(n + freed), &e, sizeof e);
    }
    if (!freed) return;
    c.consumer += freed;
    const uint64_t db = hcasim::hw::cq_doorbell(c.handle, uint32_t(c.consumer), hcasim::hw::CQ_ARM_NONE);
    s.bus.mmio_write(hcasim::fw::hca_driver::uar_offset(s.ctx.uar, hcasim::hw::UAR_CQ_DOORBELL), &db,
                     sizeof db);
}

void clean_cqs(session& s, hc_qp* q) {
    // An XRC target has no CQs (its completions are on its XRC SRQs' CQs and stay there).
    if (q->qp.recv_cq) clean_cq(s, to(q->qp.recv_cq), q->f.qp_num, &q->f);
    if (q->qp.send_cq && q->qp.send_cq != q->qp.recv_cq) clean_cq(s, to(q->qp.send_cq), q->f.qp_num, &q->f);
}

sp::ring_counts counts_of(const fv::ibv_qp& f) {
    return sp::ring_counts{f.sq.producer, f.sq.completed, f.rq.producer, f.rq.completed};
}

int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
    hc_qp* q = to(qp);
    session& s = sess(qp->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    sp::modify_qp_req r{};
    r.h.op = sp::MODIFY_QP;
    r.id = q->id;
    r.mask = mask;
    r.counts = counts_of(q->f);
    r.attr = from_lib(*attr);
    sp::qp_rep rep{};
    if (int e = s.call(r, &rep)) return e;
    adopt_qp(q, rep);
    if ((mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_RESET) clean_cqs(s, q);
    return 0;
}

int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
    hc_qp* q = to(qp);
    session& s = sess(qp->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    sp::modify_qp_req r{};
    r.h.op = sp::QUERY_QP;
    r.id = q->id;
    r.mask = mask;
    r.counts = counts_of(q->f);
    sp::query_qp_rep rep{};
    if (int e = s.call(r, &rep)) return e;
    *attr = to_lib(rep.attr);
    if (init) {
        std::memset(init, 0, sizeof *init);
        init->qp_context = qp->qp_context;
        init->send_cq = qp->send_cq;
        init->recv_cq = qp->recv_cq;
        init->srq = qp->srq;
        init->cap = to_lib(rep.cap);
        init->qp_type = qp->qp_type;
        init->sq_sig_all = rep.sq_sig_all;
    }
    return 0;
}

int destroy_qp(ibv_qp* qp) {
    hc_qp* q = to(qp);
    session& s = sess(qp->context);
    if (int e = s.call(sp::u64_req{{sp::DESTROY_QP, 0}, q->id})) return e;
    std::lock_guard<std::mutex> g(s.data_lock);
    clean_cqs(s, q);
    s.driver.set_qp_user(q->f.qp_num, nullptr);
    if (q->f.send_cq) --q->f.send_cq->refs;
    if (q->f.recv_cq) --q->f.recv_cq->refs;
    if (q->f.srq) --q->f.srq->refs;
    if (q->f.xrcd) --q->f.xrcd->refs;
    pthread_mutex_destroy(&qp->mutex);
    pthread_cond_destroy(&qp->cond);
    delete q;
    return 0;
}

int mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid, uint32_t op) {
    sp::mcast_req r{};
    r.h.op = op;
    r.qp = to(qp)->id;
    std::memcpy(r.gid, gid->raw, 16);
    r.lid = lid;
    return sess(qp->context).call(r);
}
int attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast(qp, gid, lid, sp::ATTACH_MCAST);
}
int detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
    return mcast(qp, gid, lid, sp::DETACH_MCAST);
}

// ------------------------------------------------------------------------------ AHs

ibv_ah* create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
    session& s = sess(pd->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    const fv::ibv_ah_attr a = from_lib(*attr);
    fv::ibv_ah* f = fv::ibv_create_ah(&to(pd)->f, &a);
    if (!f) return nullptr;  // errno set
    auto* h = new hc_ah{};
    h->f = f;
    return &h->ah;
}

int destroy_ah(ibv_ah* ah) {
    session& s = sess(ah->context);
    std::lock_guard<std::mutex> g(s.data_lock);
    if (int e = fv::ibv_destroy_ah(to(ah)->f)) return e;
    delete to(ah);
    return 0;
}

// ------------------------------------------------------------------------------ context

void free_context(ibv_context* c);

const verbs_context_ops context_ops = [] {
    verbs_context_ops o{};
    o.alloc_mw = alloc_mw;
    o.alloc_pd = alloc_pd;
    o.bind_mw = bind_mw;
    o.dealloc_mw = dealloc_mw;
    o.rereg_mr = rereg_mr;
    o.attach_mcast = attach_mcast;
    o.cq_event = cq_event;
    o.create_ah = create_ah;
    o.create_cq = create_cq;
    o.create_qp = create_qp;
    o.create_srq = create_srq;
    o.create_srq_ex = create_srq_ex;
    o.get_srq_num = get_srq_num;
    o.open_xrcd = open_xrcd;
    o.close_xrcd = close_xrcd;
    o.dealloc_pd = dealloc_pd;
    o.dereg_mr = dereg_mr;
    o.destroy_ah = destroy_ah;
    o.destroy_cq = destroy_cq;
    o.destroy_qp = destroy_qp;
    o.destroy_srq = destroy_srq;
    o.detach_mcast = detach_mcast;
    o.free_context = free_context;
    o.modify_qp = modify_qp;
    o.modify_srq = modify_srq;
    o.poll_cq = poll_cq;
    o.post_recv = post_recv;
    o.post_send = post_send;
    o.post_srq_recv = post_srq_recv;
    o.query_device_ex = query_device_ex;
    o.query_port = query_port;
    o.query_qp = query_qp;
    o.query_srq = query_srq;
    o.reg_mr = reg_mr;
    o.req_notify_cq = req_notify_cq;
    o.resize_cq = resize_cq;
    add_extended_ops(o);
    return o;
}();

/// hcasim<N> -> N; false for a device that is not ours.
bool node_of(const char* name, unsigned* node) {
    if (std::strncmp(name, "hcasim", 6) != 0) return false;
    char* end = nullptr;
    const unsigned long n = std::strtoul(name + 6, &end, 10);
    if (end == name + 6 || *end) return false;
    *node = unsigned(n);
    return true;
}

verbs_context* alloc_context(ibv_device* dev, int cmd_fd, void*) {
    unsigned node = 0;
    if (!node_of(dev->name, &node)) return fail<verbs_context>(ENODEV);
    int err = 0;
    std::string why;
    std::unique_ptr<session> s = session::open(node, &err, &why);
    if (!s) {
        std::fprintf(stderr, "libhcasim: %s: %s\n", dev->name, why.c_str());
        return fail<verbs_context>(err ? err : EIO);
    }
    auto* c = hcasim_abi::init_and_alloc_context<hc_context>(dev, cmd_fd, offsetof(hc_context, vctx));
    if (!c) return nullptr;
    c->vctx.context.async_fd = s->async_fd();
    c->vctx.context.num_comp_vectors = s->info().num_comp_vectors;
    c->s = s.release();
    verbs_set_ops(&c->vctx, &context_ops);
    return &c->vctx;
}

void free_context(ibv_context* ctx) {
    auto* c = reinterpret_cast<hc_context*>(verbs_get_ctx(ctx));
    delete c->s;
    verbs_uninit_context(&c->vctx);
    std::free(c);
}

bool match_device(verbs_sysfs_dev* d) {
    unsigned node;
    return node_of(d->ibdev_name, &node);
}

verbs_device* alloc_device(verbs_sysfs_dev*) {
    return static_cast<verbs_device*>(std::calloc(1, sizeof(verbs_device)));
}
void uninit_device(verbs_device* d) { std::free(d); }

const verbs_device_ops device_ops = [] {
    verbs_device_ops o{};
    o.name = "hcasim";
    o.match_min_abi_version = 1;
    o.match_max_abi_version = 6;
    o.match_device = match_device;
    o.alloc_context = alloc_context;
    o.alloc_device = alloc_device;
    o.uninit_device = uninit_device;
    return o;
}();

/// Registered once per process even if the library is mapped twice (LD_PRELOAD and
/// RDMAV_DRIVERS naming it by different paths): a copy that finds another copy's marker set in
/// the global scope (where the preloaded one comes first) leaves the registration to it.
__attribute__((constructor)) void register_provider() {
    const auto* first = static_cast<const int*>(dlsym(RTLD_DEFAULT, "hcasim_provider_registered"));
    if (first && first != &hcasim_provider_registered && *first) return;
    hcasim_provider_registered = 1;
    verbs_register_driver_34(&device_ops);
}

}  // namespace

// For provider/verbs_ex.cpp (objects.h): the extended verbs start from the plain ones.
ibv_cq* create_cq_plain(ibv_context* c, int cqe, ibv_comp_channel* channel, int comp_vector) {
    return create_cq(c, cqe, channel, comp_vector);
}
ibv_qp* create_qp_plain(ibv_pd* pd, ibv_qp_init_attr* ia) { return create_qp(pd, ia); }
ibv_qp* create_xrc_target(ibv_context* c, ibv_xrcd* xrcd, ibv_qp_init_attr* ia) {
    return new_qp(c, nullptr, xrcd, ia);
}

}  // namespace hcasim::provider

using namespace hcasim::provider;

// ------------------------------------------------------------------------------ completion channels
//
// libibverbs' ibv_create_comp_channel asks the kernel for an event file; with no kernel RDMA stack
// there is none. When this library is preloaded (scripts/with-simhca.sh does it), these take their
// place: the channel is a pipe whose write end the server gets with each CQ bound to it, and
// libibverbs' own ibv_get_cq_event reads the records unchanged.

extern "C" __attribute__((visibility("default"))) ibv_comp_channel* ibv_create_comp_channel(
    ibv_context* context) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) return nullptr;
    auto* ch = static_cast<ibv_comp_channel*>(std::calloc(1, sizeof(ibv_comp_channel)));
    if (!ch) {
        close(p[0]);
        close(p[1]);
        errno = ENOMEM;
        return nullptr;
    }
    ch->context = context;
    ch->fd = p[0];
    ch->refcnt = 0;
    std::lock_guard<std::mutex> g(channels_lock);
    channel_writers[ch] = p[1];
    return ch;
}

extern "C" __attribute__((visibility("default"))) int ibv_destroy_comp_channel(ibv_comp_channel* ch) {
    if (ch->refcnt) return EBUSY;
    {
        std::lock_guard<std::mutex> g(channels_lock);
        auto it = channel_writers.find(ch);
        if (it != channel_writers.end()) {
            close(it->second);
            channel_writers.erase(it);
        }
    }
    close(ch->fd);
    std::free(ch);
    return 0;
}
