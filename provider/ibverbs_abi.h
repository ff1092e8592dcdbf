// SPDX-License-Identifier: MIT
//
// ibverbs_abi.h - the private provider ABI of libibverbs 44 (Debian bookworm,
// rdma-core 44.0, symbol version IBVERBS_PRIVATE_34), declared in our own
// words so that an hcasim provider library can be built against the public
// <infiniband/verbs.h> alone.
//
// Nothing here is copied from rdma-core.  The layouts were established from
// published ABI facts and then checked against the installed binary
// /usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0 by disassembly
// (verbs_set_ops, verbs_open_device, the device-matching routine, the public
// wrappers) and by a throw-away provider that was driven by ibv_devices,
// ibv_devinfo and small test programs.  The static_asserts below pin every
// offset that was confirmed that way (x86-64 only).
//
// ---------------------------------------------------------------------------
// What libibverbs 44 itself does around each provider hook
// ---------------------------------------------------------------------------
// Device discovery (ibv_get_device_list):
//   * Netlink (NETLINK_RDMA) is tried first; with no kernel RDMA stack it
//     fails and libibverbs falls back to sysfs under $SYSFS_PATH (default
//     /sys).  It requires <root>/class/infiniband_verbs/abi_version (3..6).
//   * For every directory <root>/class/infiniband_verbs/<uverbsN>:
//       ibdev        -> ibdev_name (required), ibdev path is then
//                       <root>/class/infiniband/<ibdev_name> (must stat())
//       dev          -> "MAJ:MIN" (required, two numbers) -> sysfs_cdev
//       abi_version  -> abi_ver (optional, 0 if missing)
//       <ibdev path>/node_type -> node_type (leading decimal number, 1..7,
//                       else unknown);  transport is derived:
//                       1 CA / 2 switch / 3 router -> IBV_TRANSPORT_IB,
//                       4 RNIC -> IWARP, 5 USNIC, 6 USNIC_UDP.
//     and /dev/infiniband/<uverbsN> must stat() or the device is skipped.
//   * Providers are loaded from RDMAV_DRIVERS ("/abs/path/libNAME" ->
//     dlopen("/abs/path/libNAME-rdmav34.so")) and must call
//     verbs_register_driver_34() from a constructor.
//   * Matching a sysfs device to a provider (in this order):
//       - if match_table != NULL: entries of kind DRIVER_ID are compared with
//         sysfs driver_id (always 0 on the sysfs path, so never match);
//         then every MODALIAS entry is fnmatch()ed against the string
//         "rdma_device:N<ibdev_name>" and PCI entries against
//         "pci:v%08Xd%08Xsv*"; then (lazily) against
//         <ibdev path>/device/modalias.  The hit is stored in sysfs_dev->match.
//       - if match_device != NULL it is called unconditionally afterwards
//         and its answer decides; if it is NULL a table hit is required.
//       - abi_ver must lie within [match_min_abi_version,
//         match_max_abi_version].
//     So a provider with only match_device (match_table NULL) works: it can
//     look at sysfs_dev->ibdev_name (e.g. prefix "hcasim").  Equivalent table
//     form: one MODALIAS entry "rdma_device:Nhcasim*" plus a sentinel.
//   * After alloc_device() libibverbs sets vdev->ops, refcount = 1, fills
//     device.node_type / transport_type / name / dev_name / dev_path /
//     ibdev_path and vdev->sysfs.  The provider only allocates (zeroed).
//   * ibv_get_device_guid() reads <ibdev path>/node_guid ("%hx:%hx:%hx:%hx").
//
// ibv_open_device(dev) == verbs_open_device(dev, NULL):
//   * opens /dev/infiniband/<uverbsN> O_RDWR|O_CLOEXEC; it must be a char
//     device; if st_rdev differs from the "dev" file it retries
//     /dev/char/MAJ:MIN.  With a /dev/null link, "dev" must say "1:3".
//   * calls ops->alloc_context(dev, cmd_fd, private_data=NULL).  The provider
//     uses verbs_init_and_alloc_context(): that callocs the provider struct,
//     sets context.device, context.cmd_fd = cmd_fd, context.async_fd = -1,
//     inits context.mutex, allocates the private part, installs the dummy
//     ops and probes the uverbs fd with one ioctl (harmless on /dev/null).
//     Provider then calls verbs_set_ops().
//   * afterwards, if context.async_fd is still -1 libibverbs asks the kernel
//     for one (ioctl on cmd_fd); on /dev/null that fails and the open FAILS.
//     => the provider MUST set context.async_fd to its own fd (we use one end
//     of a socketpair; ibv_get_async_event reads it).
//   * verbs_uninit_context() frees the private part and closes cmd_fd and
//     async_fd (when != -1).  ibv_close_device() only calls free_context.
//
// ibv_query_device(ctx, attr): calls query_device_ex(ctx, input=NULL,
//   (ibv_device_attr_ex*)attr, attr_size = sizeof(ibv_device_attr) = 232).
//   The provider must honour attr_size and never write past it.
//   ibv_query_device_ex (inline) calls the same op with the caller's size.
// ibv_query_port: the inline macro in verbs.h calls verbs_context::query_port
//   (installed by libibverbs) with sizeof(struct ibv_port_attr); the
//   exported compat symbol passes 48 (old struct).  Both end in ops
//   query_port(ctx, port, full-size zeroed ibv_port_attr) and copy back only
//   the caller's size.  Provider fills a whole struct ibv_port_attr.
// ibv_query_gid / ibv_query_gid_ex / ibv_query_gid_table: no provider op.
//   libibverbs tries an ioctl first, then reads sysfs:
//   ports/<p>/gids/<i>, ports/<p>/gid_attrs/types/<i>,
//   ports/<p>/gid_attrs/ndevs/<i> (see testbench/serve/fake_sysfs.h for formats).
// ibv_query_pkey: sysfs only: ports/<p>/pkeys/<i>, sscanf("%hx"), stored
//   big-endian.
// ibv_alloc_pd: op alloc_pd(ctx); wrapper then sets pd->context.
//   Provider fills pd->handle.
// ibv_reg_mr(pd,addr,len,access) == ibv_reg_mr_iova2(pd,addr,len,
//   iova=(uintptr_t)addr, access): strips optional access bits unless
//   verbs_device::core_support bit 0, calls ibv_dontfork_range (no-op unless
//   fork support is enabled), then op reg_mr(pd, addr, len, hca_va=iova,
//   access); on success sets mr->context, mr->pd, mr->addr, mr->length.
//   Provider fills mr->handle, lkey, rkey and MUST allocate a verbs_mr
//   (ibv_dereg_mr reads verbs_mr::mr_type and ::access after the op).
// ibv_dereg_mr: op dereg_mr(verbs_mr*); afterwards dofork_range.
// ibv_create_cq: op create_cq(ctx, cqe, channel, comp_vector), then
//   verbs_init_cq(cq, ctx, channel, cq_context): sets cq->context, channel,
//   cq_context, bumps channel->refcnt (under context mutex), zeroes
//   comp/async_events_completed, inits cq mutex/cond.  Provider fills
//   cq->handle and cq->cqe.  ibv_create_cq_ex: op create_cq_ex then the same
//   verbs_init_cq (wc_flags above 0xfff are refused first).
// ibv_destroy_cq: op destroy_cq(cq); on success drops channel->refcnt.
// ibv_create_qp: tail call of op create_qp(pd, init_attr); libibverbs sets
//   NOTHING.  Provider fills context, qp_context, pd, send_cq, recv_cq, srq,
//   handle, qp_num, state (IBV_QPS_RESET), qp_type, events_completed = 0,
//   mutex and cond (pthread init), and writes back the granted caps into
//   init_attr->cap.
// ibv_modify_qp: op modify_qp(qp, attr, mask); if it returns 0 and
//   mask & IBV_QP_STATE the wrapper sets qp->state = attr->qp_state.
// ibv_query_qp: op query_qp (provider reports; wrapper does not touch state).
// ibv_create_srq: op create_srq(pd, init_attr); then sets srq->context,
//   srq_context, pd, events_completed = 0, inits mutex/cond.  Provider fills
//   handle.
// ibv_create_ah: op create_ah(pd, attr); then sets ah->context and ah->pd.
//   Provider fills handle.
// ibv_destroy_qp / destroy_srq / destroy_ah / dealloc_pd / attach_mcast /
//   detach_mcast: plain tail calls of the op.
// ibv_req_notify_cq, ibv_poll_cq, ibv_post_send, ibv_post_recv,
//   ibv_post_srq_recv: inline in verbs.h, call context->ops.<name> directly
//   (verbs_set_ops installs them there).
// ibv_create_comp_channel: no provider hook; it issues a uverbs write on
//   cmd_fd.  On /dev/null the write "succeeds" and returns a garbage fd, so
//   it must be overridden (LD_PRELOAD) - see the socketpair scheme.
//   ibv_destroy_comp_channel: EBUSY if refcnt != 0, else close(fd), free.
// ibv_get_cq_event(channel, &cq, &cq_ctx): read(channel->fd, 8 bytes); the
//   8 bytes are a host-endian uint64 holding the struct ibv_cq pointer;
//   *cq = that pointer, *cq_ctx = cq->cq_context, then op cq_event(cq).
//   A short read returns -1.
// ibv_ack_cq_events: cq->comp_events_completed += n under cq mutex.
// ibv_get_async_event(ctx, ev): read(ctx->async_fd, 16 bytes) laid out as
//   hcasim_async_record below; ev->event_type = type; element is taken as a
//   pointer for CQ_ERR (cq), QP_FATAL/QP_REQ_ERR/QP_ACCESS_ERR/COMM_EST/
//   SQ_DRAINED/PATH_MIG/PATH_MIG_ERR/QP_LAST_WQE_REACHED (qp),
//   SRQ_ERR/SRQ_LIMIT_REACHED (srq), WQ_FATAL (wq); otherwise
//   ev->element.port_num = (int)element.  Then op async_event(ctx, ev).
// ibv_ack_async_event: bumps the object's async/events_completed counter.
// ---------------------------------------------------------------------------
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <sys/types.h>

#if !defined(__x86_64__)
#error "ibverbs_abi.h layouts were verified on x86-64 only"
#endif

namespace hcasim_abi {

/// The private ABI generation this header describes (IBVERBS_PRIVATE_34).
constexpr int kPrivateAbi = 34;
/// Suffix libibverbs appends to RDMAV_DRIVERS entries.
constexpr const char* kProviderSuffix = "-rdmav34.so";

}  // namespace hcasim_abi

extern "C" {

struct verbs_device;
struct verbs_context;

/// Intrusive doubly linked list link as used inside libibverbs' own lists.
struct hcasim_list_link {
    hcasim_list_link* next;
    hcasim_list_link* prev;
};

/// Values of verbs_match_ent::kind.
enum hcasim_match_kind : uint8_t {
    HCASIM_MATCH_END = 0,        ///< terminates a match table
    HCASIM_MATCH_PCI = 1,        ///< vendor/device compared with a PCI modalias
    HCASIM_MATCH_MODALIAS = 2,   ///< fnmatch pattern in u.modalias
    HCASIM_MATCH_DRIVER_ID = 3,  ///< kernel driver id (netlink path only)
};

/// One row of a provider's match table (24 bytes).
struct verbs_match_ent {
    void* driver_data;
    union {
        const char* modalias;
        uint64_t driver_id;
    } u;
    uint16_t vendor;
    uint16_t device;
    uint8_t kind;  ///< hcasim_match_kind
};

/// Bits of verbs_sysfs_dev::flags (what has been read lazily so far).
enum : unsigned {
    HCASIM_SYSFS_HAVE_MODALIAS = 1u << 0,
    HCASIM_SYSFS_HAVE_NODE_GUID = 1u << 1,
};

/// What libibverbs found about one device; owned by libibverbs and handed to
/// match_device / alloc_device.  Full v44 layout (0x3e0 bytes).
struct verbs_sysfs_dev {
    hcasim_list_link entry;               ///< libibverbs' list link
    void* provider_data;                  ///< free for the provider
    const verbs_match_ent* match;         ///< table row that matched
    unsigned int flags;                   ///< HCASIM_SYSFS_HAVE_*
    char sysfs_name[IBV_SYSFS_NAME_MAX];  ///< "uverbs0"
    dev_t sysfs_cdev;                     ///< from the "dev" file
    char ibdev_name[IBV_SYSFS_NAME_MAX];  ///< "hcasim0"
    char ibdev_path[IBV_SYSFS_PATH_MAX];  ///< <root>/class/infiniband/hcasim0
    char modalias[512];                   ///< device/modalias, lazily
    uint64_t node_guid;                   ///< lazily (network order)
    uint32_t driver_id;                   ///< 0 on the sysfs path
    enum ibv_node_type node_type;
    int ibdev_idx;
    uint32_t num_ports;
    uint32_t abi_ver;              ///< uverbsN/abi_version
    struct timespec time_created;  ///< mtime of the ibdev dir
};

/// The provider's description of itself, passed to verbs_register_driver_34.
struct verbs_device_ops {
    const char* name;
    uint32_t match_min_abi_version;
    uint32_t match_max_abi_version;
    const verbs_match_ent* match_table;         ///< may be NULL
    const verbs_device_ops** static_providers;  ///< NULL for a dlopen()ed one
    bool (*match_device)(verbs_sysfs_dev* sysfs_dev);
    verbs_context* (*alloc_context)(ibv_device* device, int cmd_fd, void* private_data);
    verbs_context* (*import_context)(ibv_device* device, int cmd_fd);
    verbs_device* (*alloc_device)(verbs_sysfs_dev* sysfs_dev);
    void (*uninit_device)(verbs_device* device);
};

/// Per-device object; the provider allocates (calloc) a struct that starts
/// with this, libibverbs fills it.
struct verbs_device {
    ibv_device device;            ///< must be first
    const verbs_device_ops* ops;  ///< set by libibverbs
    int refcount;                 ///< atomic_int in C, set by libibverbs
    hcasim_list_link entry;       ///< libibverbs' device list
    verbs_sysfs_dev* sysfs;       ///< set by libibverbs
    uint64_t core_support;        ///< bit 0: optional MR access flags ok
};

/// Memory-region object: ibv_dereg_mr reads mr_type and access, so a
/// provider's MR must begin with this (not just struct ibv_mr).
enum hcasim_mr_kind {
    HCASIM_MR_ORDINARY = 0,
    HCASIM_MR_NULL = 1,
    HCASIM_MR_IMPORTED = 2,
    HCASIM_MR_DMABUF = 3,
};
struct verbs_mr {
    ibv_mr ibv_mr;
    enum hcasim_mr_kind mr_type;  ///< 0 = ordinary registration
    int access;                   ///< IBV_ACCESS_* as registered
};

/// Every provider hook of libibverbs 44, in table order (alphabetical).
/// 76 pointers.  A NULL entry keeps libibverbs' default (EOPNOTSUPP, or for
/// query_qp_data_in_order "0", or nothing for void ones).
struct verbs_context_ops {
    int (*advise_mr)(ibv_pd* pd, enum ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list,
                     uint32_t num_sges);
    ibv_dm* (*alloc_dm)(ibv_context* context, ibv_alloc_dm_attr* attr);
    ibv_mw* (*alloc_mw)(ibv_pd* pd, enum ibv_mw_type type);
    ibv_mr* (*alloc_null_mr)(ibv_pd* pd);
    ibv_pd* (*alloc_parent_domain)(ibv_context* context, ibv_parent_domain_init_attr* attr);
    ibv_pd* (*alloc_pd)(ibv_context* context);
    ibv_td* (*alloc_td)(ibv_context* context, ibv_td_init_attr* init_attr);
    void (*async_event)(ibv_context* context, ibv_async_event* event);
    int (*attach_counters_point_flow)(ibv_counters* counters, ibv_counter_attach_attr* attr, ibv_flow* flow);
    int (*attach_mcast)(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
    int (*bind_mw)(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);
    int (*close_xrcd)(ibv_xrcd* xrcd);
    void (*cq_event)(ibv_cq* cq);
    ibv_ah* (*create_ah)(ibv_pd* pd, ibv_ah_attr* attr);
    ibv_counters* (*create_counters)(ibv_context* context, ibv_counters_init_attr* init_attr);
    ibv_cq* (*create_cq)(ibv_context* context, int cqe, ibv_comp_channel* channel, int comp_vector);
    ibv_cq_ex* (*create_cq_ex)(ibv_context* context, ibv_cq_init_attr_ex* init_attr);
    ibv_flow* (*create_flow)(ibv_qp* qp, ibv_flow_attr* flow_attr);
    ibv_flow_action* (*create_flow_action_esp)(ibv_context* context, ibv_flow_action_esp_attr* attr);
    ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
    ibv_qp* (*create_qp_ex)(ibv_context* context, ibv_qp_init_attr_ex* qp_init_attr_ex);
    ibv_rwq_ind_table* (*create_rwq_ind_table)(ibv_context* context, ibv_rwq_ind_table_init_attr* init_attr);
    ibv_srq* (*create_srq)(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr);
    ibv_srq* (*create_srq_ex)(ibv_context* context, ibv_srq_init_attr_ex* srq_init_attr_ex);
    ibv_wq* (*create_wq)(ibv_context* context, ibv_wq_init_attr* wq_init_attr);
    int (*dealloc_mw)(ibv_mw* mw);
    int (*dealloc_pd)(ibv_pd* pd);
    int (*dealloc_td)(ibv_td* td);
    int (*dereg_mr)(verbs_mr* vmr);
    int (*destroy_ah)(ibv_ah* ah);
    int (*destroy_counters)(ibv_counters* counters);
    int (*destroy_cq)(ibv_cq* cq);
    int (*destroy_flow)(ibv_flow* flow);
    int (*destroy_flow_action)(ibv_flow_action* action);
    int (*destroy_qp)(ibv_qp* qp);
    int (*destroy_rwq_ind_table)(ibv_rwq_ind_table* rwq_ind_table);
    int (*destroy_srq)(ibv_srq* srq);
    int (*destroy_wq)(ibv_wq* wq);
    int (*detach_mcast)(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
    void (*free_context)(ibv_context* context);
    int (*free_dm)(ibv_dm* dm);
    int (*get_srq_num)(ibv_srq* srq, uint32_t* srq_num);
    ibv_dm* (*import_dm)(ibv_context* context, uint32_t dm_handle);
    ibv_mr* (*import_mr)(ibv_pd* pd, uint32_t mr_handle);
    ibv_pd* (*import_pd)(ibv_context* context, uint32_t pd_handle);
    int (*modify_cq)(ibv_cq* cq, ibv_modify_cq_attr* attr);
    int (*modify_flow_action_esp)(ibv_flow_action* action, ibv_flow_action_esp_attr* attr);
    int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
    int (*modify_qp_rate_limit)(ibv_qp* qp, ibv_qp_rate_limit_attr* attr);
    int (*modify_srq)(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask);
    int (*modify_wq)(ibv_wq* wq, ibv_wq_attr* wq_attr);
    ibv_qp* (*open_qp)(ibv_context* context, ibv_qp_open_attr* attr);
    ibv_xrcd* (*open_xrcd)(ibv_context* context, ibv_xrcd_init_attr* xrcd_init_attr);
    int (*poll_cq)(ibv_cq* cq, int num_entries, ibv_wc* wc);
    int (*post_recv)(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
    int (*post_send)(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
    int (*post_srq_ops)(ibv_srq* srq, ibv_ops_wr* op, ibv_ops_wr** bad_op);
    int (*post_srq_recv)(ibv_srq* srq, ibv_recv_wr* recv_wr, ibv_recv_wr** bad_recv_wr);
    int (*query_device_ex)(ibv_context* context, const ibv_query_device_ex_input* input,
                           ibv_device_attr_ex* attr, size_t attr_size);
    int (*query_ece)(ibv_qp* qp, ibv_ece* ece);
    int (*query_port)(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr);
    int (*query_qp)(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
    int (*query_qp_data_in_order)(ibv_qp* qp, enum ibv_wr_opcode op, uint32_t flags);
    int (*query_rt_values)(ibv_context* context, ibv_values_ex* values);
    int (*query_srq)(ibv_srq* srq, ibv_srq_attr* srq_attr);
    int (*read_counters)(ibv_counters* counters, uint64_t* counters_value, uint32_t ncounters,
                         uint32_t flags);
    ibv_mr* (*reg_dm_mr)(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access);
    ibv_mr* (*reg_dmabuf_mr)(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access);
    ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, uint64_t hca_va, int access);
    int (*req_notify_cq)(ibv_cq* cq, int solicited_only);
    int (*rereg_mr)(verbs_mr* vmr, int flags, ibv_pd* pd, void* addr, size_t length, int access);
    int (*resize_cq)(ibv_cq* cq, int cqe);
    int (*set_ece)(ibv_qp* qp, ibv_ece* ece);
    void (*unimport_dm)(ibv_dm* dm);
    void (*unimport_mr)(ibv_mr* mr);
    void (*unimport_pd)(ibv_pd* pd);
};

/// Record libibverbs reads (8 bytes) from a completion channel fd.
struct hcasim_comp_record {
    uint64_t cq;  ///< (uintptr_t) of the struct ibv_cq that completed
};

/// Record libibverbs reads (16 bytes) from context->async_fd.
struct hcasim_async_record {
    uint64_t element;     ///< object pointer, or port number for port events
    uint32_t event_type;  ///< enum ibv_event_type
    uint32_t pad_zero;    ///< unused, write 0
};

// --- entry points exported by libibverbs.so.1 under IBVERBS_PRIVATE_34 ----

/// Adds a provider to libibverbs' list; call from a constructor.
void verbs_register_driver_34(const verbs_device_ops* ops);

/// calloc(alloc_size) + initialise the verbs_context found at byte offset
/// context_offset inside it.  Returns the start of the allocation or NULL
/// (cmd_fd is closed on failure).  driver_id is informational (use 0).
void* _verbs_init_and_alloc_context(ibv_device* device, int cmd_fd, size_t alloc_size,
                                    verbs_context* context_offset, uint32_t driver_id);

/// Copies every non-NULL op into the context (callable several times).
void verbs_set_ops(verbs_context* vctx, const verbs_context_ops* ops);

/// Undoes _verbs_init_and_alloc_context except the final free(); closes
/// cmd_fd and async_fd.
void verbs_uninit_context(verbs_context* context);

/// What ibv_create_cq does after create_cq (exported for create_cq_ex users).
void verbs_init_cq(ibv_cq* cq, ibv_context* context, ibv_comp_channel* channel, void* cq_context);

/// Reads <ibdev path>/<formatted name> into buf; returns length or -1.
int ibv_read_ibdev_sysfs_file(char* buf, size_t size, verbs_sysfs_dev* sysfs_dev, const char* fnfmt, ...)
    __attribute__((format(printf, 4, 5)));

}  // extern "C"

namespace hcasim_abi {

/// Typed wrapper for _verbs_init_and_alloc_context: Drv is the provider's
/// context struct, Member the verbs_context inside it.
template <typename Drv>
inline Drv* init_and_alloc_context(ibv_device* device, int cmd_fd, std::size_t member_offset,
                                   uint32_t driver_id = 0) {
    return static_cast<Drv*>(_verbs_init_and_alloc_context(
        device, cmd_fd, sizeof(Drv), reinterpret_cast<verbs_context*>(member_offset), driver_id));
}

/// Provider struct -> verbs_context / ibv_context helpers.
inline verbs_context* to_vctx(ibv_context* ctx) { return verbs_get_ctx(ctx); }
inline verbs_device* to_vdev(ibv_device* dev) { return reinterpret_cast<verbs_device*>(dev); }

}  // namespace hcasim_abi

// ---- layout checks (all confirmed against libibverbs.so.1.14.44.0) --------
static_assert(sizeof(verbs_match_ent) == 24, "match entry size");
static_assert(offsetof(verbs_match_ent, kind) == 20, "match kind");
static_assert(offsetof(verbs_sysfs_dev, match) == 0x18, "sysfs match");
static_assert(offsetof(verbs_sysfs_dev, flags) == 0x20, "sysfs flags");
static_assert(offsetof(verbs_sysfs_dev, sysfs_name) == 0x24, "sysfs name");
static_assert(offsetof(verbs_sysfs_dev, sysfs_cdev) == 0x68, "sysfs cdev");
static_assert(offsetof(verbs_sysfs_dev, ibdev_name) == 0x70, "ibdev name");
static_assert(offsetof(verbs_sysfs_dev, ibdev_path) == 0xb0, "ibdev path");
static_assert(offsetof(verbs_sysfs_dev, modalias) == 0x1b0, "modalias");
static_assert(offsetof(verbs_sysfs_dev, driver_id) == 0x3b8, "driver id");
static_assert(offsetof(verbs_sysfs_dev, node_type) == 0x3bc, "node type");
static_assert(offsetof(verbs_sysfs_dev, abi_ver) == 0x3c8, "abi ver");
static_assert(offsetof(verbs_sysfs_dev, time_created) == 0x3d0, "time");
static_assert(offsetof(verbs_device_ops, match_min_abi_version) == 0x08, "");
static_assert(offsetof(verbs_device_ops, match_table) == 0x10, "");
static_assert(offsetof(verbs_device_ops, match_device) == 0x20, "");
static_assert(offsetof(verbs_device_ops, alloc_context) == 0x28, "");
static_assert(offsetof(verbs_device_ops, import_context) == 0x30, "");
static_assert(offsetof(verbs_device_ops, alloc_device) == 0x38, "");
static_assert(offsetof(verbs_device_ops, uninit_device) == 0x40, "");
static_assert(sizeof(ibv_device) == 0x298, "ibv_device");
static_assert(offsetof(verbs_device, ops) == 0x298, "vdev ops");
static_assert(offsetof(verbs_device, refcount) == 0x2a0, "vdev refcount");
static_assert(offsetof(verbs_device, entry) == 0x2a8, "vdev entry");
static_assert(offsetof(verbs_device, sysfs) == 0x2b8, "vdev sysfs");
static_assert(offsetof(verbs_device, core_support) == 0x2c0, "vdev core");
static_assert(sizeof(verbs_mr) == 0x38, "verbs_mr");
static_assert(offsetof(verbs_mr, mr_type) == 0x30, "mr_type");
static_assert(offsetof(verbs_mr, access) == 0x34, "mr access");
static_assert(sizeof(verbs_context_ops) == 76 * sizeof(void*), "op count");
static_assert(offsetof(verbs_context_ops, alloc_pd) == 5 * 8, "");
static_assert(offsetof(verbs_context_ops, async_event) == 7 * 8, "");
static_assert(offsetof(verbs_context_ops, cq_event) == 12 * 8, "");
static_assert(offsetof(verbs_context_ops, create_cq) == 15 * 8, "");
static_assert(offsetof(verbs_context_ops, create_cq_ex) == 16 * 8, "");
static_assert(offsetof(verbs_context_ops, create_qp) == 19 * 8, "");
static_assert(offsetof(verbs_context_ops, create_srq) == 22 * 8, "");
static_assert(offsetof(verbs_context_ops, dereg_mr) == 28 * 8, "");
static_assert(offsetof(verbs_context_ops, destroy_qp) == 34 * 8, "");
static_assert(offsetof(verbs_context_ops, free_context) == 39 * 8, "");
static_assert(offsetof(verbs_context_ops, import_dm) == 42 * 8, "");
static_assert(offsetof(verbs_context_ops, modify_qp) == 47 * 8, "");
static_assert(offsetof(verbs_context_ops, poll_cq) == 53 * 8, "");
static_assert(offsetof(verbs_context_ops, query_device_ex) == 58 * 8, "");
static_assert(offsetof(verbs_context_ops, query_port) == 60 * 8, "");
static_assert(offsetof(verbs_context_ops, query_qp_data_in_order) == 62 * 8, "");
static_assert(offsetof(verbs_context_ops, reg_mr) == 68 * 8, "");
static_assert(offsetof(verbs_context_ops, req_notify_cq) == 69 * 8, "");
static_assert(offsetof(verbs_context_ops, resize_cq) == 71 * 8, "");
static_assert(offsetof(verbs_context_ops, unimport_pd) == 75 * 8, "");
static_assert(sizeof(hcasim_async_record) == 16, "async record");
static_assert(sizeof(hcasim_comp_record) == 8, "comp record");
// Public structs whose offsets the wrappers above rely on.
static_assert(offsetof(verbs_context, priv) == 0xd0, "vctx priv");
static_assert(offsetof(verbs_context, context) == 0x140, "vctx context");
static_assert(offsetof(ibv_context, async_fd) == 0x10c, "async_fd");
static_assert(offsetof(ibv_comp_channel, fd) == 8, "channel fd");
static_assert(offsetof(ibv_comp_channel, refcnt) == 12, "channel refcnt");
static_assert(offsetof(ibv_qp, state) == 0x38, "qp state");
