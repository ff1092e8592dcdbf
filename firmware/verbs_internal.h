// Helpers the verbs_*.cpp files share; not part of the verbs API (verbs.h). Each function is
// defined in the file of the object it belongs to, named in the heading above it.
#pragma once
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "firmware/verbs.h"
#include "tlm_if/mmio_map.h"
#include "tlm_if/wqe.h"

namespace hcasim::verbs::detail {

constexpr uint64_t MAX_MSG_BYTES = 1ull << 31;  // C10-93: RC/UC maximum message size

template <class T>
T* fail(int e) {
    errno = e;
    return nullptr;
}

inline void verb_cost(ibv_context* ctx) { ctx->driver->bus().cpu_cost(cpu_op::verb_call); }

inline uint8_t log2_ceil(uint64_t v) {
    uint8_t l = 0;
    while ((1ull << l) < v) ++l;
    return l;
}

inline void mmio64(ibv_context* ctx, hw::uar_reg reg, uint64_t value) {
    ctx->driver->bus().mmio_write(fw::hca_driver::uar_offset(ctx->uar, reg), &value, 8);
}

/// Appends v to the WQE image in buf at *off.
template <class T>
void put(uint8_t* buf, uint32_t* off, const T& v) {
    std::memcpy(buf + *off, &v, sizeof(T));
    *off += sizeof(T);
}

// ---- asynchronous events (verbs_device.cpp)

/// The verbs event for an EQE; false for EQEs that have none (completion, unknown).
bool event_type_of(const hw::eqe& e, ibv_event_type* t);
/// Queues an event for the context's handler, or for ibv_get_async_event.
void queue_event(ibv_context* ctx, const ibv_async_event& ev);
/// Drops the events of a QP, CQ or SRQ being destroyed that are still queued.
enum class object_kind { qp, cq, srq, eec };
void drop_events(ibv_context* ctx, const void* object, object_kind kind);

// ---- address handles (verbs_ah.cpp)

/// An address vector the port can use (ibv_create_ah, ibv_modify_qp with IBV_QP_AV); 0 or EINVAL.
int check_ah_attr(ibv_context* ctx, const ibv_ah_attr& a);

/// The path and reliability attributes Modify QP and Modify EEC share, with their mask bits
/// (ibv_qp_attr_mask): `dest` is the destination QP or EE context. `path_mtu` is read from the
/// caller's enum only when the mask names it (an application may leave it uninitialised, and
/// loading an enum that holds no enumerator is undefined).
struct path_values {
    uint16_t pkey_index;
    uint32_t path_mtu;
    const ibv_ah_attr& ah;
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic, max_dest_rd_atomic;
    uint32_t rq_psn, sq_psn, dest;
};
/// Value checks of those attributes on port `pi` (immediate errors): 0 or EINVAL.
int check_path_values(ibv_context* ctx, const hw::port_info& pi, uint32_t mask, const path_values& v);

// ---- automatic path migration, Modify QP and Modify EEC (verbs_qp.cpp)

/// Whether the path migration state may move `from` -> `to` on the transition cur -> next
/// (IBA 10.4.1, Figure 127).
bool mig_transition_ok(uint8_t from, ibv_mig_state to, ibv_qp_state cur, ibv_qp_state next);
/// Value checks of the alternate path attributes (IBV_QP_ALT_PATH; with IBV_QP_PATH_MIG_STATE,
/// CAP_APM): 0 or EINVAL.
int check_alt_path(ibv_context* ctx, uint32_t mask, const ibv_ah_attr& alt_ah, uint8_t alt_port_num,
                   uint16_t alt_pkey_index, uint8_t alt_timeout);

// ---- memory management work requests (verbs_memory.cpp)

/// Immediate errors of a LOCAL_INV, BIND_MW or FAST_REG_MR WR.
int check_mem_mgmt_wr(const ibv_qp* qp, const ibv_send_wr* wr);
/// Bind WQE (verb or WR) into buf; returns its size.
uint32_t build_bind_wqe(const ibv_qp* qp, uint64_t wr_id, unsigned send_flags, uint32_t mw_key,
                        uint32_t new_key, const ibv_mw_bind_info& b, uint32_t bind_flags, uint8_t* buf);
/// Fast register WQE into buf; returns its size.
uint32_t build_fast_reg_wqe(const ibv_qp* qp, const ibv_send_wr* wr, uint8_t* buf);
/// Key a type 2 bind WR gives its window.
uint32_t bind_wr_key(const ibv_send_wr* wr);
/// Software state a posted WR changes: the keys a bind or fast register WR gives.
void after_post(const ibv_send_wr* wr);

// ---- send and receive queues (verbs_qp.cpp)

/// Whether the send queue takes a WQE now (state, room); 0 or errno.
int check_sq_post(const ibv_qp* qp);
/// Control segment of the next send WQE of qp.
hw::wqe_ctrl_seg make_ctrl(const ibv_qp* qp, uint8_t opcode, unsigned send_flags, uint64_t wr_id);
/// Sets ds_count of the WQE in buf from its size; returns the size rounded to 16 bytes.
uint32_t finish_wqe(uint8_t* buf, uint32_t off);
/// Writes a built WQE into the next send slot.
void put_send_wqe(ibv_qp* qp, const uint8_t* buf, uint32_t bytes);
/// Tells the HCA about `posted` (>= 1) new send WQEs, the last of which is last[0, last_bytes).
void ring_send(ibv_qp* qp, uint32_t posted, const uint8_t* last, uint32_t last_bytes);
/// Writes a receive WQE for `wr` at the ring's producer slot (a QP's receive queue or an SRQ).
void put_recv_wqe(host_bus& bus, ibv_wq_ring& r, const ibv_recv_wr& wr, uint8_t* buf);

}  // namespace hcasim::verbs::detail
