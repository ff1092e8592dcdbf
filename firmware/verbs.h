// Verbs API over the hcasim driver. Names, structures and return conventions follow libibverbs
// (0 or a positive errno; object-creating verbs return nullptr and set errno); simulated virtual
// addresses are uint64_t. An application obtains a context with
// ibv_open_device(driver, its address_space).
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>
#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "tlm_if/commands.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

namespace hcasim::verbs {

/// IBV_QPT_SMI / IBV_QPT_GSI (the kernel's IB_QPT_SMI / IB_QPT_GSI): the special QPs QP0 and
/// QP1, for privileged consumers only (C10-13); UD in hardware, fixed QPNs 0 and 1.
/// IBV_QPT_XRC_SEND / IBV_QPT_XRC_RECV: XRC initiator and target QPs (IBA 10.2.10).
enum ibv_qp_type {
    IBV_QPT_SMI = 0,
    IBV_QPT_GSI = 1,
    IBV_QPT_RC = 2,
    IBV_QPT_UC = 3,
    IBV_QPT_UD = 4,
    IBV_QPT_RD = 5,  ///< hcasim: reliable datagram (libibverbs has none), through EE contexts
    IBV_QPT_XRC_SEND = 9,
    IBV_QPT_XRC_RECV = 10,
};
enum ibv_qp_state {
    IBV_QPS_RESET = 0,
    IBV_QPS_INIT,
    IBV_QPS_RTR,
    IBV_QPS_RTS,
    IBV_QPS_SQD,
    IBV_QPS_SQE,
    IBV_QPS_ERR,
    IBV_QPS_UNKNOWN
};
enum ibv_mtu { IBV_MTU_256 = 1, IBV_MTU_512 = 2, IBV_MTU_1024 = 3, IBV_MTU_2048 = 4, IBV_MTU_4096 = 5 };
enum ibv_mig_state { IBV_MIG_MIGRATED = 0, IBV_MIG_REARM, IBV_MIG_ARMED };
enum ibv_access_flags {
    IBV_ACCESS_LOCAL_WRITE = 1,
    IBV_ACCESS_REMOTE_WRITE = 2,
    IBV_ACCESS_REMOTE_READ = 4,
    IBV_ACCESS_REMOTE_ATOMIC = 8,
    IBV_ACCESS_MW_BIND = 16,
    IBV_ACCESS_ZERO_BASED = 32  ///< the region / window is addressed from 0 (ZBVA; needs the HCA's support)
};
enum ibv_qp_attr_mask {
    IBV_QP_STATE = 1 << 0,
    IBV_QP_CUR_STATE = 1 << 1,
    IBV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
    IBV_QP_ACCESS_FLAGS = 1 << 3,
    IBV_QP_PKEY_INDEX = 1 << 4,
    IBV_QP_PORT = 1 << 5,
    IBV_QP_QKEY = 1 << 6,
    IBV_QP_AV = 1 << 7,
    IBV_QP_PATH_MTU = 1 << 8,
    IBV_QP_TIMEOUT = 1 << 9,
    IBV_QP_RETRY_CNT = 1 << 10,
    IBV_QP_RNR_RETRY = 1 << 11,
    IBV_QP_RQ_PSN = 1 << 12,
    IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
    IBV_QP_ALT_PATH = 1 << 14,
    IBV_QP_MIN_RNR_TIMER = 1 << 15,
    IBV_QP_SQ_PSN = 1 << 16,
    IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
    IBV_QP_PATH_MIG_STATE = 1 << 18,
    IBV_QP_CAP = 1 << 19,
    IBV_QP_DEST_QPN = 1 << 20
};
enum ibv_wr_opcode : int {  // fixed type: any value a caller passes is representable (and refused if unknown)
    IBV_WR_RDMA_WRITE = 0,
    IBV_WR_RDMA_WRITE_WITH_IMM,
    IBV_WR_SEND,
    IBV_WR_SEND_WITH_IMM,
    IBV_WR_RDMA_READ,
    IBV_WR_ATOMIC_CMP_AND_SWP,
    IBV_WR_ATOMIC_FETCH_AND_ADD,
    IBV_WR_LOCAL_INV,
    IBV_WR_BIND_MW,
    IBV_WR_SEND_WITH_INV,
    IBV_WR_FAST_REG_MR = 0x20  ///< hcasim: Fast Register Physical MR (wr.fast_reg)
};
enum ibv_send_flags {
    IBV_SEND_FENCE = 1,
    IBV_SEND_SIGNALED = 2,
    IBV_SEND_SOLICITED = 4,
    IBV_SEND_INLINE = 8
};
enum ibv_wc_status {
    IBV_WC_SUCCESS = 0,
    IBV_WC_LOC_LEN_ERR,
    IBV_WC_LOC_QP_OP_ERR,
    IBV_WC_LOC_EEC_OP_ERR,
    IBV_WC_LOC_PROT_ERR,
    IBV_WC_WR_FLUSH_ERR,
    IBV_WC_MW_BIND_ERR,
    IBV_WC_BAD_RESP_ERR,
    IBV_WC_LOC_ACCESS_ERR,
    IBV_WC_REM_INV_REQ_ERR,
    IBV_WC_REM_ACCESS_ERR,
    IBV_WC_REM_OP_ERR,
    IBV_WC_RETRY_EXC_ERR,
    IBV_WC_RNR_RETRY_EXC_ERR,
    IBV_WC_LOC_RDD_VIOL_ERR,
    IBV_WC_REM_INV_RD_REQ_ERR,
    IBV_WC_REM_ABORT_ERR,
    IBV_WC_INV_EECN_ERR,
    IBV_WC_INV_EEC_STATE_ERR,
    IBV_WC_FATAL_ERR,
    IBV_WC_RESP_TIMEOUT_ERR,
    IBV_WC_GENERAL_ERR
};
enum ibv_wc_opcode {
    IBV_WC_SEND = 0,
    IBV_WC_RDMA_WRITE,
    IBV_WC_RDMA_READ,
    IBV_WC_COMP_SWAP,
    IBV_WC_FETCH_ADD,
    IBV_WC_BIND_MW,
    IBV_WC_LOCAL_INV,
    IBV_WC_FAST_REG_MR = 32 /* hcasim */,
    IBV_WC_RECV = 128,
    IBV_WC_RECV_RDMA_WITH_IMM = 129
};
enum ibv_wc_flags { IBV_WC_GRH = 1, IBV_WC_WITH_IMM = 2, IBV_WC_WITH_INV = 8 };
enum ibv_device_cap_flags {
    IBV_DEVICE_RC_RNR_NAK_GEN = 1 << 8,
    IBV_DEVICE_SRQ_RESIZE = 1 << 13,
    IBV_DEVICE_N_NOTIFY_CQ = 1 << 14,
    IBV_DEVICE_AUTO_PATH_MIG = 1 << 4,
    IBV_DEVICE_RESIZE_MAX_WR = 1 << 1,
    IBV_DEVICE_MEM_WINDOW = 1 << 17,
    IBV_DEVICE_UD_AV_PORT_ENFORCE = 1 << 6,
    IBV_DEVICE_MEM_MGT_EXTENSIONS = 1 << 21,
    IBV_DEVICE_MEM_WINDOW_TYPE_2A = 1 << 23,
    IBV_DEVICE_MEM_WINDOW_TYPE_2B = 1 << 24,
    IBV_DEVICE_XRC = 1 << 20
};
/// Memory window types (libibverbs numbering).
enum ibv_mw_type { IBV_MW_TYPE_1 = 1, IBV_MW_TYPE_2 = 2 };
/// ibv_rereg_mr flags (libibverbs values).
enum ibv_rereg_mr_flags {
    IBV_REREG_MR_CHANGE_TRANSLATION = 1,
    IBV_REREG_MR_CHANGE_PD = 2,
    IBV_REREG_MR_CHANGE_ACCESS = 4
};
/// hcasim: ibv_qp_init_attr::create_flags (IBA 10.6.4.3.2: fixed when the QP is created).
enum ibv_qp_create_flags {
    IBV_QP_CREATE_FAST_REG = 1,       ///< Fast Register PMR work requests allowed on the QP
    IBV_QP_CREATE_RESERVED_LKEY = 2,  ///< SGEs of the QP may use the reserved L_Key
};
/// hcasim: key states as ibv_query_mr reports them (IBA 10.6.2.3).
enum ibv_mr_state { IBV_MR_STATE_INVALID = 0, IBV_MR_STATE_FREE = 1, IBV_MR_STATE_VALID = 2 };
enum ibv_atomic_cap { IBV_ATOMIC_NONE = 0, IBV_ATOMIC_HCA, IBV_ATOMIC_GLOB };
enum ibv_port_state {
    IBV_PORT_NOP = 0,
    IBV_PORT_DOWN,
    IBV_PORT_INIT,
    IBV_PORT_ARMED,
    IBV_PORT_ACTIVE,
    IBV_PORT_ACTIVE_DEFER
};
/// Asynchronous event types (libibverbs numbering). QP events: CQ_ERR is CQ-affiliated,
/// SRQ_ERR and SRQ_LIMIT_REACHED are SRQ-affiliated, the port events and DEVICE_FATAL are
/// unaffiliated.
enum ibv_event_type {
    IBV_EVENT_CQ_ERR = 0,
    IBV_EVENT_QP_FATAL,
    IBV_EVENT_QP_REQ_ERR,
    IBV_EVENT_QP_ACCESS_ERR,
    IBV_EVENT_COMM_EST,
    IBV_EVENT_SQ_DRAINED,
    IBV_EVENT_PATH_MIG,
    IBV_EVENT_PATH_MIG_ERR,
    IBV_EVENT_DEVICE_FATAL,
    IBV_EVENT_PORT_ACTIVE,
    IBV_EVENT_PORT_ERR,
    IBV_EVENT_LID_CHANGE,
    IBV_EVENT_PKEY_CHANGE,
    IBV_EVENT_SM_CHANGE,
    IBV_EVENT_SRQ_ERR,
    IBV_EVENT_SRQ_LIMIT_REACHED,
    IBV_EVENT_QP_LAST_WQE_REACHED,
    IBV_EVENT_CLIENT_REREGISTER,
    IBV_EVENT_GID_CHANGE,
    IBV_EVENT_EEC_ERR,          ///< hcasim (RD, o10-65): an EE context's own error moved it to Error
    IBV_EVENT_EEC_PATH_MIG,     ///< hcasim (RD with APM, o10-23): an EE context migrated
    IBV_EVENT_EEC_PATH_MIG_ERR  ///< hcasim (RD with APM, o10-23): a migration request to it failed
};

/// ibv_query_device output.
struct ibv_device_attr {
    char fw_ver[64];
    uint64_t node_guid, sys_image_guid, max_mr_size, page_size_cap;
    uint32_t vendor_id, vendor_part_id, hw_ver;
    int max_qp, max_qp_wr;
    unsigned device_cap_flags;
    int max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd, max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom,
        max_qp_init_rd_atom, max_ee_init_rd_atom;
    ibv_atomic_cap atomic_cap;
    int max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp, max_mcast_qp_attach,
        max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq, max_srq_wr, max_srq_sge;
    uint16_t max_pkeys;
    uint8_t local_ca_ack_delay, phys_port_cnt;
    uint32_t max_inline_data;  ///< hcasim extension: inline bytes per WQE
    // hcasim extensions (IBA Query HCA: memory management features)
    uint32_t reserved_lkey;               ///< the reserved L_Key (valid when reserved_lkey_supported)
    bool reserved_lkey_supported;         ///< the reserved L_Key exists (IBV_QP_CREATE_RESERVED_LKEY)
    uint32_t max_fast_reg_page_list_len;  ///< page-list entries of one Fast Register WR / ibv_alloc_lkey
    bool zbva;                            ///< zero-based virtual addresses (IBV_ACCESS_ZERO_BASED)
    bool block_list;                      ///< ibv_reg_phys_mr with block lists
    bool local_inv_fence;                 ///< a fenced Local Invalidate gives strong ordering
    int num_comp_vectors;    ///< completion event handler identifiers (o10-54.2.1; as ibv_context's)
    uint32_t max_rd_msg_sz;  ///< hcasim (o10-51): bytes of one RD message at most (0: no RD)
};

/// ibv_query_port output.
struct ibv_port_attr {
    ibv_port_state state;
    ibv_mtu max_mtu, active_mtu;
    int gid_tbl_len;
    uint32_t port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr;
    uint16_t pkey_tbl_len, lid, sm_lid;
    uint8_t lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width, active_speed, phys_state,
        link_layer;
};

union ibv_gid {
    uint8_t raw[16];
    struct {
        uint64_t subnet_prefix, interface_id;
    } global;
};
struct ibv_global_route {
    ibv_gid dgid;
    uint32_t flow_label;
    uint8_t sgid_index, hop_limit, traffic_class;
};
struct ibv_ah_attr {
    ibv_global_route grh;
    uint16_t dlid;
    uint8_t sl, src_path_bits, static_rate, is_global, port_num;
};

struct ibv_context;
struct ibv_pd;
struct ibv_cq;
struct ibv_qp;
struct ibv_comp_channel;
struct ibv_mw;
struct ibv_srq;
struct ibv_xrcd;
struct ibv_rdd;
struct ibv_eec;

/// One asynchronous event (ibv_get_async_event, or the handler of ibv_set_async_event_handler).
struct ibv_async_event {
    union {
        ibv_cq* cq;    ///< IBV_EVENT_CQ_ERR
        ibv_qp* qp;    ///< QP events
        ibv_srq* srq;  ///< IBV_EVENT_SRQ_ERR, IBV_EVENT_SRQ_LIMIT_REACHED
        int port_num;  ///< port events; 0 for IBV_EVENT_DEVICE_FATAL
        ibv_eec* eec;  ///< IBV_EVENT_EEC_ERR, IBV_EVENT_EEC_PATH_MIG, IBV_EVENT_EEC_PATH_MIG_ERR
    } element;
    ibv_event_type event_type;
};

/// Protection domain.
struct ibv_pd {
    ibv_context* context;
    uint32_t handle;  ///< PD number
    uint32_t refs;    ///< QPs, SRQs, MRs, MWs and AHs using it
};
/// Reliable datagram domain (IBA 10.2.8): RD QPs send only through EE contexts of their domain.
struct ibv_rdd {
    ibv_context* context;
    uint32_t handle;  ///< RDD number (nonzero)
    uint32_t refs;    ///< RD QPs and EE contexts in it
};
/// XRC domain (IBA 10.2.10): XRC SRQs and XRC target QPs of one domain serve each other.
struct ibv_xrcd {
    ibv_context* context;
    uint32_t handle;  ///< XRC domain number (nonzero)
    uint32_t refs;    ///< XRC SRQs and XRC target QPs in it
};
/// Registered memory region (ibv_reg_mr, ibv_reg_phys_mr, ibv_reg_shared_mr, ibv_alloc_lkey).
struct ibv_mr {
    ibv_context* context;
    ibv_pd* pd;
    uint64_t addr;  ///< ibv_reg_mr: the virtual address registered; PMR / shared MR: the iova
    size_t length;
    uint32_t handle;  ///< MPT index
    uint32_t lkey, rkey;
    int access;
    uint64_t mtt_first, mtt_count;  ///< MTT entries the region uses (Allocate L_Key: reserved)
    // hcasim
    uint32_t page_list_max = 0;           ///< reserved physical buffer list size (o10-37.2.10): PMR, L_Key
    uint64_t page_list_pa = 0;            ///< ibv_alloc_lkey: host buffer Fast Register WRs copy pages to
    hw::mpt_entry hw_mpt{};               ///< software copy of the MPT entry as last written
    fw::address_space* pin_as = nullptr;  ///< the process whose pages the MTT entries pin (none: 0 length)
    uint64_t pin_addr = 0, pin_len = 0;   ///< the pinned range (0 length: nothing pinned, e.g. PMR)
};
/// hcasim (IBA Register Physical MR): input of ibv_reg_phys_mr.
struct ibv_phys_mr_attr {
    const uint64_t* list = nullptr;  ///< physical page or block addresses
    uint32_t count = 0;              ///< elements in list
    bool block_list = false;         ///< false: page list (page aligned); true: block list (any alignment)
    uint64_t size = 0;    ///< page list: page size (power of 2 in page_size_cap); block list: bytes per block
    uint64_t iova = 0;    ///< address of the region's first byte (ignored with IBV_ACCESS_ZERO_BASED)
    uint64_t length = 0;  ///< bytes
    uint32_t first_offset = 0;  ///< offset of the region's first byte in list[0]
    int access = 0;             ///< ibv_access_flags
    int key_byte = -1;          ///< -1: the driver chooses; 0..255: the consumer's key byte (o10-37.2.2)
};
/// hcasim (IBA Query MR): output of ibv_query_mr.
struct ibv_mr_attr {
    ibv_pd* pd;
    uint64_t addr;  ///< first address as requests name it (0 for zero-based)
    uint64_t length;
    int access;
    uint32_t lkey, rkey;
    ibv_mr_state state;      ///< Free / Valid (an L_Key before Fast Register or after Invalidate is Free)
    uint32_t page_list_max;  ///< reserved physical buffer list size (o10-37.2.10)
    bool is_shared;          ///< made by ibv_reg_shared_mr
};
/// Memory window (libibverbs layout).
struct ibv_mw {
    ibv_context* context;
    ibv_pd* pd;
    uint32_t rkey;    ///< current R_Key (set by a successful bind post)
    uint32_t handle;  ///< MPT index
    ibv_mw_type type;
};
/// What a bind makes a window cover (libibverbs).
struct ibv_mw_bind_info {
    ibv_mr* mr = nullptr;          ///< region to bind to (may be null for a zero-length type 1 bind)
    uint64_t addr = 0;             ///< first address, in the region's addressing
    uint64_t length = 0;           ///< bytes (0: unbind a type 1 window)
    unsigned mw_access_flags = 0;  ///< IBV_ACCESS_REMOTE_* (| IBV_ACCESS_ZERO_BASED)
};
/// Input of ibv_bind_mw (libibverbs).
struct ibv_mw_bind {
    uint64_t wr_id = 0;
    unsigned send_flags = 0;  ///< IBV_SEND_SIGNALED, IBV_SEND_FENCE
    ibv_mw_bind_info bind_info;
};
/// libibverbs ibv_inc_rkey: the same index with the next key byte.
inline uint32_t ibv_inc_rkey(uint32_t rkey) { return (rkey & ~0xFFu) | ((rkey + 1) & 0xFFu); }
/// Address handle (UD destinations).
struct ibv_ah {
    ibv_context* context;
    ibv_pd* pd;
    ibv_ah_attr attr;
};
/// Completion event channel.
struct ibv_comp_channel {
    ibv_context* context;
    std::vector<ibv_cq*> cqs;  ///< CQs bound to the channel, creation order
};
/// Completion queue.
struct ibv_cq {
    ibv_context* context;
    ibv_comp_channel* channel;
    void* cq_context;
    uint32_t handle;  ///< CQN
    int cqe;          ///< capacity (ring entries - 1)
    uint8_t log_size;
    uint64_t ring_pa;
    uint64_t consumer;  ///< CQEs consumed
    uint32_t refs;      ///< QPs using it
    uint32_t special_refs =
        0;  ///< of those, the special QPs QP0/QP1 (10.2.4.5: they share CQs only among themselves)
    uint32_t comp_events_completed;
    uint32_t async_events_completed = 0;  ///< CQ_ERR events acknowledged
    bool error = false;                   ///< a CQ error was reported (10.10.3: overrun, inaccessible)
    uint64_t error_end = 0;               ///< with error: consumer count where polling stops
    uint32_t polling = 0;                 ///< ibv_poll_cq calls in progress (handlers run inside)
    int comp_vector = 0;                  ///< completion event handler identifier (ibv_create_cq)
};
struct ibv_qp_cap {
    uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
};
struct ibv_qp_init_attr {
    void* qp_context;
    ibv_cq* send_cq;
    ibv_cq* recv_cq;
    ibv_srq* srq;  ///< receive WQEs come from this SRQ (RC, UC, UD); cap.max_recv_wr/sge are then ignored
    ibv_qp_cap cap;
    ibv_qp_type qp_type;
    int sq_sig_all;
    uint32_t create_flags = 0;  ///< hcasim: ibv_qp_create_flags
    ibv_xrcd* xrcd = nullptr;   ///< IBV_QPT_XRC_RECV: its XRC domain (no PD, CQs or queues)
    ibv_rdd* rdd = nullptr;     ///< IBV_QPT_RD: its reliable datagram domain
};
struct ibv_qp_attr {
    ibv_qp_state qp_state, cur_qp_state;
    ibv_mtu path_mtu;
    ibv_mig_state path_mig_state;
    uint32_t qkey, rq_psn, sq_psn, dest_qp_num;
    unsigned qp_access_flags;
    ibv_qp_cap cap;
    ibv_ah_attr ah_attr, alt_ah_attr;
    uint16_t pkey_index, alt_pkey_index;
    uint8_t en_sqd_async_notify, sq_draining, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num,
        timeout, retry_cnt, rnr_retry, alt_port_num, alt_timeout;
};

/// Work queue software state (one ring).
struct ibv_wq_ring {
    uint64_t pa = 0;         ///< physical base (contiguous)
    uint8_t log_size = 0;    ///< log2 slots
    uint8_t log_stride = 0;  ///< log2 slot bytes
    uint32_t producer = 0;   ///< WQEs posted since Reset
    uint32_t completed = 0;  ///< WQEs completed since Reset
    uint32_t max_wr = 0, max_sge = 0;
};
/// SRQ attributes (libibverbs).
struct ibv_srq_attr {
    uint32_t max_wr;     ///< WRs that may be outstanding
    uint32_t max_sge;    ///< scatter entries per WR
    uint32_t srq_limit;  ///< the SRQ limit (0: not armed)
};
/// SRQ kinds (libibverbs ibv_srq_type).
enum ibv_srq_type { IBV_SRQT_BASIC = 0, IBV_SRQT_XRC = 1 };
struct ibv_srq_init_attr {
    void* srq_context;
    ibv_srq_attr attr;  ///< max_wr, max_sge requested (srq_limit must be 0 at create, as in libibverbs)
    ibv_srq_type srq_type = IBV_SRQT_BASIC;
    ibv_xrcd* xrcd = nullptr;  ///< IBV_SRQT_XRC: its XRC domain
    ibv_cq* cq = nullptr;      ///< IBV_SRQT_XRC: the CQ of its receive completions
};
enum ibv_srq_attr_mask { IBV_SRQ_MAX_WR = 1 << 0, IBV_SRQ_LIMIT = 1 << 1 };
/// Shared receive queue.
struct ibv_srq {
    ibv_context* context;
    void* srq_context;
    ibv_pd* pd;
    uint32_t handle;                ///< SRQN
    ibv_wq_ring ring;               ///< producer: WRs posted; completed: their completions polled
    uint32_t refs = 0;              ///< QPs attached
    uint32_t events_completed = 0;  ///< async events acknowledged
    bool error = false;             ///< an SRQ error was reported (10.2.9.5)
    ibv_xrcd* xrcd = nullptr;       ///< XRC SRQ: its domain (nullptr: an ordinary SRQ)
    ibv_cq* cq = nullptr;           ///< XRC SRQ: its CQ
};
/// Queue pair.
struct ibv_qp {
    ibv_context* context;
    void* qp_context;
    ibv_pd* pd;
    ibv_cq* send_cq;
    ibv_cq* recv_cq;
    uint32_t qp_num;
    ibv_qp_state state;  ///< software view; async events update it
    ibv_qp_type qp_type;
    int sq_sig_all;
    uint32_t max_inline_data;
    ibv_wq_ring sq, rq;
    hw::qp_context hw_ctx;      ///< software copy of the HCA context
    ibv_qp_attr attr;           ///< attributes as last modified
    uint32_t events_completed;  ///< async events acknowledged
    uint32_t create_flags = 0;  ///< ibv_qp_create_flags given at creation
    ibv_srq* srq = nullptr;     ///< the SRQ its receive WQEs come from (rq is then unused)
    ibv_xrcd* xrcd = nullptr;   ///< IBV_QPT_XRC_RECV: its domain (pd, send_cq, recv_cq are nullptr)
    ibv_rdd* rdd = nullptr;     ///< IBV_QPT_RD: its domain
};
/// EE context attributes (Modify / Query EEC). The mask bits are ibv_qp_attr_mask's: STATE,
/// CUR_STATE, PKEY_INDEX, PORT, AV, PATH_MTU, TIMEOUT, RETRY_CNT, RNR_RETRY, RQ_PSN,
/// MAX_QP_RD_ATOMIC, MIN_RNR_TIMER, SQ_PSN, MAX_DEST_RD_ATOMIC, DEST_QPN (the remote EE context).
struct ibv_eec_attr {
    ibv_qp_state eec_state, cur_eec_state;
    ibv_mtu path_mtu;
    ibv_ah_attr ah_attr;
    uint32_t dest_eecn, rq_psn, sq_psn;
    uint16_t pkey_index;
    uint8_t port_num, timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic;
    // Automatic path migration (o10-23; masks IBV_QP_ALT_PATH, IBV_QP_PATH_MIG_STATE), as in
    // ibv_qp_attr.
    ibv_ah_attr alt_ah_attr;
    uint16_t alt_pkey_index;
    uint8_t alt_port_num, alt_timeout;
    ibv_mig_state path_mig_state;
};
/// End-to-end context (IBA 10.2.7): one end of a reliable channel between two HCA ports.
struct ibv_eec {
    ibv_context* context;
    ibv_rdd* rdd;
    uint32_t eecn;           ///< EE context number
    ibv_qp_state state;      ///< software view (QUERY_EEC refreshes it)
    hw::eec_context hw_ctx;  ///< software copy of the HCA's context
    ibv_eec_attr attr;       ///< attributes as last modified
};
/// Device context of one process.
struct ibv_context {
    fw::hca_driver* driver;
    fw::address_space* as;
    uint32_t uar;  ///< this context's UAR page index
    uint32_t pds = 0, cqs = 0, qps = 0, mrs = 0, ahs = 0, channels = 0, mws = 0;
    uint32_t srqs = 0, xrcds = 0, rdds = 0, eecs = 0;
    std::vector<std::pair<uint64_t, uint64_t>> mapped;  ///< ibv_map_pages ranges (va, len), pinned
    std::deque<ibv_async_event> async_events;           ///< waiting for ibv_get_async_event, oldest first
    std::deque<ibv_async_event> handler_events;         ///< dispatched, not yet passed to the handler
    std::function<void(const ibv_async_event&)> async_handler;  ///< ibv_set_async_event_handler
    bool delivering = false;                                    ///< the handler is running
    int num_comp_vectors = 0;  ///< completion event handler identifiers (QUERY_HCA)
    /// ibv_set_comp_event_handler: one per identifier (empty: none).
    std::vector<std::function<void(ibv_cq*, void*)>> comp_handlers;
    std::deque<ibv_cq*> comp_events;  ///< completion events dispatched, not yet passed to a handler
};

struct ibv_sge {
    uint64_t addr;
    uint32_t length;
    uint32_t lkey;
};
struct ibv_send_wr {
    uint64_t wr_id = 0;
    ibv_send_wr* next = nullptr;
    ibv_sge* sg_list = nullptr;
    int num_sge = 0;
    ibv_wr_opcode opcode = IBV_WR_SEND;
    unsigned send_flags = 0;
    uint32_t imm_data = 0;         ///< network order in libibverbs; host order here
    uint32_t invalidate_rkey = 0;  ///< SEND_WITH_INV, LOCAL_INV: the key to invalidate
    /// IBV_QPT_XRC_SEND: the target's XRC SRQ (libibverbs qp_type.xrc.remote_srqn).
    uint32_t xrc_remote_srqn = 0;
    /// IBV_QPT_RD: the EE context that carries the message, the destination QP behind its peer
    /// and the Q_Key (high bit set: the QP's own, C10-15).
    struct {
        ibv_eec* eec;
        uint32_t remote_qpn, remote_qkey;
    } rd{};
    struct {
        struct {
            uint64_t remote_addr;
            uint32_t rkey;
        } rdma{};
        struct {
            uint64_t remote_addr, compare_add, swap;
            uint32_t rkey;
        } atomic{};
        struct {
            ibv_ah* ah;
            uint32_t remote_qpn, remote_qkey;
        } ud{};
    } wr;
    /// IBV_WR_BIND_MW (type 2 windows): the window, the new R_Key (its low byte is the consumer's
    /// key byte; the index is the window's) and what to bind.
    struct {
        ibv_mw* mw;
        uint32_t rkey;
        ibv_mw_bind_info bind_info;
    } bind_mw{};
    /// hcasim IBV_WR_FAST_REG_MR: register pages under an L_Key from ibv_alloc_lkey.
    struct {
        ibv_mr* mr;                 ///< the L_Key's MR (from ibv_alloc_lkey)
        uint8_t key_byte;           ///< the consumer's key byte for the new L_Key / R_Key
        uint64_t iova;              ///< first address (ignored with IBV_ACCESS_ZERO_BASED)
        uint64_t length;            ///< bytes
        int access;                 ///< ibv_access_flags
        const uint64_t* page_list;  ///< physical page addresses (e.g. from ibv_map_pages)
        uint32_t page_count;        ///< entries in page_list (<= the L_Key's page_list_max)
        uint32_t page_offset;       ///< offset of the first byte in the first page
        uint8_t log_page_size;      ///< log2 page size of the list
    } fast_reg{};
};
struct ibv_recv_wr {
    uint64_t wr_id = 0;
    ibv_recv_wr* next = nullptr;
    ibv_sge* sg_list = nullptr;
    int num_sge = 0;
};
struct ibv_wc {
    uint64_t wr_id;
    ibv_wc_status status;
    ibv_wc_opcode opcode;
    uint32_t vendor_err, byte_len, imm_data, qp_num, src_qp;
    unsigned wc_flags;
    uint16_t pkey_index, slid;
    uint8_t sl, dlid_path_bits;
    /// hcasim (o10-54; libibverbs has neither RD nor this field): a receive completion of an RD
    /// QP counts the receive WRs whose resources it freed (1: each message takes one receive WR,
    /// completed in order), room for as many posts; 0 on every other completion.
    uint32_t freed_recv_wrs;
};

// ---- device (verbs_device.cpp)
/// Opens the device for one process (runs driver init on first use); nullptr + errno on failure.
ibv_context* ibv_open_device(fw::hca_driver& drv, fw::address_space& as);
/// Closes a context; EBUSY while it still owns objects or from inside its own async event handler.
int ibv_close_device(ibv_context* ctx);
/// Device attributes from the HCA capabilities.
int ibv_query_device(ibv_context* ctx, ibv_device_attr* attr);
/// Port attributes (re-queried from the HCA), including the port's P_Key and Q_Key violation
/// counters (bad_pkey_cntr, qkey_viol_cntr: 16 bits, saturating, o10-57).
int ibv_query_port(ibv_context* ctx, uint8_t port_num, ibv_port_attr* attr);
/// Reads P_Key table entry `index` of a port (QUERY_PKEY); an invalid entry reads as its value
/// (low 15 bits zero). Host byte order (libibverbs: __be16). EINVAL for a bad port or index. There
/// is no verb that writes the table (C10-122).
int ibv_query_pkey(ibv_context* ctx, uint8_t port_num, int index, uint16_t* pkey);
/// Reads GID table entry `index` of a port (QUERY_GID) into gid->raw, network byte order as in
/// libibverbs; index 0 is the port GID, subnet prefix fe80::/64 + port GUID, read-only (C10-1,
/// C10-2: no verb writes a GID). EINVAL for a bad port or an index >= gid_tbl_len.
int ibv_query_gid(ibv_context* ctx, uint8_t port_num, int index, ibv_gid* gid);

// ---- protection domains (verbs_device.cpp)
/// Allocates a protection domain.
ibv_pd* ibv_alloc_pd(ibv_context* ctx);
/// Frees a PD; EBUSY while a QP, SRQ, MR, MW or AH uses it (C10-11.2.1, C10-11.2.2).
int ibv_dealloc_pd(ibv_pd* pd);

// ---- memory regions (verbs_memory.cpp)
/// Registers [addr, addr+length) of the process: pins, writes the MTT, creates the MPT (key byte
/// chosen by the driver). IBV_ACCESS_ZERO_BASED: the region is addressed from 0 (EINVAL without
/// the HCA's ZBVA support). All or nothing (C10-45).
ibv_mr* ibv_reg_mr(ibv_pd* pd, uint64_t addr, size_t length, int access);
/// hcasim (IBA Register Physical MR): a region over the consumer's physical pages or blocks; nothing
/// is pinned. EINVAL for a misaligned page (C10-53.2.1), a bad page / block size, a list too short
/// for first_offset + length, a block list without HCA support.
ibv_mr* ibv_reg_phys_mr(ibv_pd* pd, const ibv_phys_mr_attr* attr);
/// hcasim (IBA Register Shared MR): a new region over the same MTT entries (same pages) as src,
/// with its own keys, PD and rights, starting at iova (or 0 with IBV_ACCESS_ZERO_BASED). The
/// translation lives until its last user is deregistered.
ibv_mr* ibv_reg_shared_mr(ibv_mr* src, ibv_pd* pd, int access, uint64_t iova);
/// Reregisters an MR in one step (libibverbs flags): the new translation (CHANGE_TRANSLATION:
/// addr, length), PD (CHANGE_PD) and rights (CHANGE_ACCESS) replace the old ones and the MR gets
/// new keys (fresh driver-chosen key byte). Returns 0 or an errno (not libibverbs'
/// IBV_REREG_MR_ERR_* codes); on any failure the old registration is unchanged; EBUSY while
/// windows are bound to it. Not for ibv_alloc_lkey MRs (EINVAL).
int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, uint64_t addr, size_t length, int access);
/// hcasim (IBA Reregister Physical MR): as ibv_rereg_mr, but CHANGE_TRANSLATION takes a's page or
/// block list, iova, length and first_offset (checked as ibv_reg_phys_mr; the region then pins
/// nothing), CHANGE_ACCESS takes a->access, and the new keys carry a->key_byte when it is 0..255
/// (the consumer's choice, o10-37.2.2) or a fresh driver-chosen byte. a may be null with only
/// CHANGE_PD. 0 or an errno; on failure the old registration is unchanged; EBUSY while windows
/// are bound to it; EINVAL for ibv_alloc_lkey MRs.
int ibv_rereg_phys_mr(ibv_mr* mr, int flags, ibv_pd* pd, const ibv_phys_mr_attr* a);
/// hcasim (IBA Query MR): attributes as the HCA holds them (CMD_QUERY_MPT).
int ibv_query_mr(ibv_mr* mr, ibv_mr_attr* attr);
/// hcasim (IBA Allocate L_Key, like the kernel's ib_alloc_mr): an MR in state Free with
/// max_pages MTT entries and a page-list buffer reserved for Fast Register WRs
/// (1..max_fast_reg_page_list_len, else EINVAL). lkey / rkey name its index; the key byte is the
/// consumer's at fast-register time. Freed by ibv_dereg_mr.
ibv_mr* ibv_alloc_lkey(ibv_pd* pd, uint32_t max_pages);
/// Deregisters an MR (destroys the MPT, frees its MTT entries when no shared MR uses them, unpins).
/// EBUSY while memory windows are bound to it (the MR stays registered).
int ibv_dereg_mr(ibv_mr* mr);
/// hcasim: pins [va, va+len) of the process and returns its physical 4 KiB pages in order (for
/// ibv_reg_phys_mr and Fast Register WRs); unpinned by ibv_unmap_pages or ibv_close_device.
int ibv_map_pages(ibv_context* ctx, uint64_t va, size_t len, std::vector<uint64_t>* pages);
/// Unpins a range mapped by ibv_map_pages (the same va and len); EINVAL if there is none.
int ibv_unmap_pages(ibv_context* ctx, uint64_t va, size_t len);

// ---- memory windows (verbs_memory.cpp)
/// Allocates a memory window (state Free). Type 2 is 2A or 2B as the HCA implements; EINVAL for a
/// type the HCA does not support.
ibv_mw* ibv_alloc_mw(ibv_pd* pd, ibv_mw_type type);
/// Frees a window; allowed while it is bound (the HCA drops the binding).
int ibv_dealloc_mw(ibv_mw* mw);
/// Bind MW verb (type 1 windows; EINVAL for type 2, o10-37.2.35): posts a bind WQE on qp's send
/// queue with the next key byte; on a successful post mw->rkey is the new R_Key. Length 0
/// unbinds. Completion (and the HCA's checks) comes on the send CQ as IBV_WC_BIND_MW.
int ibv_bind_mw(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* mw_bind);

// ---- address handles and multicast groups (verbs_ah.cpp)
/// Creates an address handle for UD sends.
ibv_ah* ibv_create_ah(ibv_pd* pd, const ibv_ah_attr* attr);
int ibv_destroy_ah(ibv_ah* ah);
/// Attaches a UD QP to the multicast group (MGID `gid`, MLID `lid`), o10-34: EINVAL for another
/// QP type, a GID that is not multicast (first byte 0xFF) or a LID outside 0xC000..0xFFFE;
/// ENOMEM when the group or the HCA's table is full (QUERY_HCA max_mcast_*); attaching twice is
/// no error. While attached the QP cannot be destroyed (EBUSY, o10-2.2.3).
int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);
/// Detaches the QP from the group; EINVAL if it is not attached to it.
int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid);

// ---- completion queues and completion events (verbs_cq.cpp)
/// Completion event channel (served from the driver's event queue).
ibv_comp_channel* ibv_create_comp_channel(ibv_context* ctx);
int ibv_destroy_comp_channel(ibv_comp_channel* ch);
/// Creates a CQ of at least cqe entries (ring of a power of two >= cqe + 1). comp_vector is the
/// completion event handler identifier (0 .. ctx->num_comp_vectors - 1, else EINVAL): a CQ
/// without a channel reports its completion events to that identifier's handler
/// (ibv_set_comp_event_handler); a CQ with a channel to the channel.
ibv_cq* ibv_create_cq(ibv_context* ctx, int cqe, void* cq_context = nullptr,
                      ibv_comp_channel* channel = nullptr, int comp_vector = 0);
/// Destroys a CQ; EBUSY while a QP uses it (C10-18) or while ibv_poll_cq(cq) runs (a handler).
/// Does not wait for unacknowledged async events: its queued events are dropped.
int ibv_destroy_cq(ibv_cq* cq);
/// Polls up to num_entries completions; returns the count (>= 0) or a negative errno. Processes
/// the EQ first when it holds an entry (async event handlers run there). A CQ in error returns
/// the completions present at the error, then none.
int ibv_poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc);
/// Resize CQ (IBA 10.2.6.3, libibverbs semantics): the new capacity is at least cqe (cq->cqe is
/// updated); allowed while work is outstanding, no completion is lost or duplicated. EINVAL if
/// cqe < 1, cqe > max_cqe, or cqe is below the completions in the CQ not yet polled; EIO on a CQ
/// in error (10.8.5.2), EBUSY from a handler running inside ibv_poll_cq(cq); the CQ is then
/// unchanged. A capacity that needs the same ring size returns 0 at once.
int ibv_resize_cq(ibv_cq* cq, int cqe);
/// hcasim extension (IBA Query CQ, 10.2.6.2): *cqe = the capacity. EIO on a CQ in error (10.8.5.2).
int ibv_query_cq(ibv_cq* cq, int* cqe);
/// hcasim extension (IBA Set Completion Event Handler, C10-109.2.1, o10-54.2.1, o10-54.2.2): a
/// non-empty handler becomes the handler of identifier comp_vector (replacing any earlier one), an
/// empty one clears it; EINVAL for an identifier outside 0 .. num_comp_vectors - 1. The EQ is
/// processed first: events reported before the call go where they went so far. Each completion
/// event of a CQ created without a channel on that identifier then calls handler(cq,
/// cq->cq_context) once, at the end of the process_eq that consumed it, like async event
/// handlers (see docs/firmware.md). Without a handler the event stays pending in the driver.
int ibv_set_comp_event_handler(ibv_context* ctx, int comp_vector,
                               std::function<void(ibv_cq*, void*)> handler);
/// hcasim helper standing in for the interrupt thread: processes the EQ (handlers run), sleeping
/// first until it holds an entry (no time stepping) if it is empty; 0, or ETIMEDOUT when nothing
/// arrived within timeout_ns (0: wait for ever).
int ibv_process_events(ibv_context* ctx, uint64_t timeout_ns);
/// Arms the CQ for one completion event (solicited-only if requested); no-op on a CQ in error.
int ibv_req_notify_cq(ibv_cq* cq, int solicited_only);
/// Waits for a completion event on the channel (timeout_ns 0: forever); ETIMEDOUT on timeout.
int ibv_get_cq_event(ibv_comp_channel* ch, ibv_cq** cq, void** cq_context, uint64_t timeout_ns = 0);
/// Acknowledges completion events.
void ibv_ack_cq_events(ibv_cq* cq, unsigned nevents);
/// hcasim helper: sleeps (no time stepping) until the CQ holds a completion; 0 or ETIMEDOUT.
/// Processes the EQ first when it holds an entry; EIO on a CQ in error with nothing left to poll.
int ibv_wait_cq(ibv_cq* cq, uint64_t timeout_ns);

// ---- asynchronous events (verbs_device.cpp)
/// Waits for the next asynchronous event of the context (timeout_ns 0: forever; ETIMEDOUT on
/// timeout), processing the EQ. EINVAL once the queue is empty while a handler is registered
/// (new events go to the handler).
int ibv_get_async_event(ibv_context* ctx, ibv_async_event* event, uint64_t timeout_ns = 0);
/// Acknowledges an event got from ibv_get_async_event (counted on its QP or CQ). Acknowledge
/// before destroying the object: destroy does not wait, and the event's pointer dies with it.
void ibv_ack_async_event(ibv_async_event* event);
/// hcasim extension (IBA Set Asynchronous Event Handler, C10-138/C10-139): one handler per
/// context, a later call replaces it, an empty function removes it. The EQ is processed first:
/// events reported before the call are not passed to the handler (they stay queued for
/// ibv_get_async_event). Later events are passed to the handler, in order, instead of being
/// queued, at the end of the process_eq that consumed them (see docs/firmware.md).
int ibv_set_async_event_handler(ibv_context* ctx, std::function<void(const ibv_async_event&)> handler);

// ---- shared receive queues (verbs_srq.cpp)
/// Creates a shared receive queue (IBA 10.2.9.2) in the PD (o10-2.2.1); with srq_type
/// IBV_SRQT_XRC an XRC SRQ of attr->xrcd whose completions go to attr->cq. attr.max_wr /
/// attr.max_sge are updated with the actual capacities (>= the requested). EINVAL for a
/// request above the device's max_srq_wr / max_srq_sge, a nonzero srq_limit, or an HCA without
/// SRQs; ENOMEM when none is left.
ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr);
/// Modify SRQ (10.2.9.3): IBV_SRQ_LIMIT arms the limit (0 disarms; the HCA disarms it when
/// SRQ_LIMIT_REACHED fires); IBV_SRQ_MAX_WR resizes while WRs are outstanding (o10-10.2.1), the
/// outstanding WRs kept; attr->max_wr is updated with the actual capacity. EINVAL (SRQ
/// unchanged, o10-10.2.2) when the new size is below the WRs outstanding or below the limit, or
/// the limit is above the size; EINVAL on an SRQ in error (10.2.9.5).
int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int attr_mask);
/// Query SRQ: capacities and the current limit (0 once it fired). EINVAL on an SRQ in error.
int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr);
/// Destroys an SRQ: EBUSY while QPs are attached (o10-10.2.3); otherwise succeeds with WRs
/// still posted (o10-10.2.4), which are released with it without completions (o10-10.2.5).
/// Its queued async events are dropped.
int ibv_destroy_srq(ibv_srq* srq);
/// Posts a list of receive WRs to the SRQ (same error convention as ibv_post_recv): ENOMEM for
/// the first WR beyond the capacity (outstanding = posted - completions polled), EINVAL for too
/// many SGEs. Accepted in any SRQ or QP state (o10-51.2.1); an SRQ in error keeps them unused.
int ibv_post_srq_recv(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);

// ---- XRC domains (verbs_srq.cpp)
/// Opens a new XRC domain (IBA 10.2.10) in the context; EOPNOTSUPP without XRC, ENOMEM when none
/// is left. (Sharing a domain between processes through a file is the provider's: hcasim serve
/// keys domains by the file.)
ibv_xrcd* ibv_open_xrcd(ibv_context* ctx);
/// Closes an XRC domain: EBUSY (kept) while XRC SRQs or XRC target QPs are in it.
int ibv_close_xrcd(ibv_xrcd* xrcd);
/// The SRQ's number, which initiators name in their WRs (xrc_remote_srqn).
int ibv_get_srq_num(ibv_srq* srq, uint32_t* srq_num);

// ---- reliable datagram (verbs_rd.cpp; hcasim: libibverbs has no RD verbs)
/// Allocates a reliable datagram domain (IBA 10.2.8); EOPNOTSUPP without RD, ENOMEM when none is
/// left (at least two exist, o10-9).
ibv_rdd* ibv_alloc_rdd(ibv_context* ctx);
/// Deallocates a domain: EBUSY (kept) while RD QPs or EE contexts are in it (o10-10).
int ibv_dealloc_rdd(ibv_rdd* rdd);
/// Creates an EE context of the domain (o10-4, o10-7), in Reset.
ibv_eec* ibv_create_eec(ibv_rdd* rdd);
/// Modify EEC: the transitions of Figure 126 but SQEr (o10-11), value checks, CMD_MODIFY_EEC.
/// The destination address is changed only here (o10-1).
int ibv_modify_eec(ibv_eec* eec, ibv_eec_attr* attr, int attr_mask);
/// Query EEC (state and PSNs as the HCA has them).
int ibv_query_eec(ibv_eec* eec, ibv_eec_attr* attr);
/// Destroys an EE context (a message on it is lost: its WR completes in error).
int ibv_destroy_eec(ibv_eec* eec);

// ---- queue pairs (verbs_qp.cpp)
/// Creates a QP in Reset (C10-20); cap is updated with the actual capacities. create_flags
/// (hcasim) enable Fast Register WRs / the reserved L_Key (EINVAL if the HCA lacks them).
/// IBV_QPT_XRC_SEND: a send queue only (recv_cq, srq and the receive caps unused).
/// IBV_QPT_XRC_RECV: pd nullptr, init_attr->xrcd its domain; no queues, no CQs.
ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* init_attr);
/// Modify QP: state machine check, value checks, CMD_MODIFY_QP.
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask);
/// Query QP (state refreshed from the HCA).
int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr);
/// Destroys a QP. Does not wait for unacknowledged async events: its queued events are dropped.
/// EBUSY (QP kept) while type 2A windows are bound to it (o10-37.2.29; so is modify to Reset) or
/// while it is attached to a multicast group (o10-2.2.3).
int ibv_destroy_qp(ibv_qp* qp);
/// Posts a list of send WRs; on an immediate error *bad_wr is the failing WR and it and later
/// WRs are not posted (C10-136); earlier ones are. Memory management WRs: IBV_WR_LOCAL_INV
/// (RC/UC), IBV_WR_SEND_WITH_INV (RC), IBV_WR_BIND_MW (type 2 windows, RC/UC; EINVAL for a type
/// 1 window, o10-37.2.34, or length 0, o10-37.2.40; on a successful post mw->rkey is the new
/// key), IBV_WR_FAST_REG_MR (RC; the page list is copied to the L_Key's buffer; on a successful
/// post the MR's lkey / rkey carry the new key byte). What only the HCA knows (key states,
/// rights, PDs, bounds) is reported in the completion.
int ibv_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr);
/// Posts a list of receive WRs (same error convention). EINVAL for a QP attached to an SRQ
/// (o10-51.2.2: post to the SRQ).
int ibv_post_recv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad_wr);
/// Size of the largest send WQE of a QP with these caps (bytes, 16-byte multiple).
uint32_t send_wqe_max_bytes(ibv_qp_type t, uint32_t max_send_sge, uint32_t max_inline);

}  // namespace hcasim::verbs
