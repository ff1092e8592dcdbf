// The HCA driver: command interface, context tables, the event queue and resource number
// allocators. Reaches the HCA only through tlm_if (host_bus MMIO and host memory).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>
#include "firmware/host_os.h"
#include "tlm_if/commands.h"
#include "tlm_if/cqe.h"
#include "tlm_if/host_bus.h"
#include "tlm_if/mmio_map.h"

namespace hcasim::fw {

/// Lowest QPN a consumer QP gets: QP0 (SMI) and QP1 (GSI) are the special QPs (IBA 10.2.4.5).
constexpr uint32_t FIRST_CONSUMER_QPN = 2;

/// Driver-level status for a command that did not finish in time (not an HCA cmd_status).
constexpr hw::cmd_status CMD_TIMEOUT = hw::cmd_status(0xFE);
/// Driver-level status for a command refused because the driver is in fatal error.
constexpr hw::cmd_status CMD_FATAL = hw::cmd_status(0xFF);

/// Driver load-time options.
struct driver_options {
    uint8_t log_num_qps = 10;              ///< log2 QPC entries (clamped to caps.max_qp)
    uint8_t log_num_cqs = 10;              ///< log2 CQC entries (clamped to caps.max_cq)
    uint8_t log_num_mpts = 12;             ///< log2 MPT entries (clamped to caps.max_mr)
    uint8_t log_num_mtts = 16;             ///< log2 MTT entries (clamped to caps.max_mtt)
    uint8_t log_num_srqs = 8;              ///< log2 SRQC entries (clamped to caps.max_srq; CAP_SRQ only)
    uint8_t eq_log_size = 8;               ///< log2 EQEs in the event queue
    uint64_t cmd_timeout_ns = 10'000'000;  ///< command timeout, simulated ns (fatal when hit)
    bool use_inline_window = true;         ///< single small WQEs go through UAR_INLINE_WQE
    /// Reregister MR keeps the region's L_Key and R_Key instead of giving it fresh ones (the key
    /// byte is the CI's to choose, o10-37.2.2 / o10-37.2.4): what libibverbs applications
    /// expect of ibv_rereg_mr, so `hcasim serve` sets it.
    bool rereg_keeps_keys = false;
};

/// Deterministic lowest-free-first number allocator over [first, first + count).
class id_allocator {
public:
    id_allocator() = default;
    /// Numbers first .. first + count - 1.
    id_allocator(uint32_t first, uint32_t count) : first_(first), used_(count, false) {}
    /// Lowest free number; false when exhausted.
    [[nodiscard]] bool alloc(uint32_t* id);
    /// Returns a number; ignores numbers not allocated.
    void free(uint32_t id);
    /// True if id is allocated.
    bool in_use(uint32_t id) const;
    /// Numbers still free.
    uint32_t available() const;

private:
    uint32_t first_ = 0;
    std::vector<bool> used_;
    size_t low_ = 0;  ///< no free number below this index
};

/// Deterministic first-fit range allocator (MTT entries).
class range_allocator {
public:
    range_allocator() = default;
    /// Units [first, first + count).
    range_allocator(uint64_t first, uint64_t count) { free_[first] = count; }
    /// Lowest free run of n units; false when none fits.
    [[nodiscard]] bool alloc(uint64_t n, uint64_t* first);
    /// Returns a run (coalesced with its neighbours).
    void free(uint64_t first, uint64_t n);

private:
    std::map<uint64_t, uint64_t> free_;  ///< start -> length
};

/// The driver of one HCA, shared by all processes of the host.
class hca_driver {
public:
    /// A driver for the HCA behind `bus`, allocating host memory from `os`.
    hca_driver(host_bus& bus, host_os& os, const driver_options& opts = {});
    ~hca_driver();
    hca_driver(const hca_driver&) = delete;
    hca_driver& operator=(const hca_driver&) = delete;

    /// QUERY_HCA, table allocation, INIT_HCA, QUERY_PORT, CREATE_EQ, MSI setup; 0 or errno.
    [[nodiscard]] int init();
    /// True once init() succeeded.
    bool initialized() const { return initialized_; }
    /// The user-space view of a driver that runs elsewhere (a libibverbs provider talking to
    /// `hcasim serve`): capabilities and ports as that driver reported them, no commands, no
    /// event queue (events reach user space through the provider). Enough for the data-path
    /// verbs (post, poll, notify) and address handles on objects the real driver created.
    /// `key_byte` hands out the next key byte of an MPT index (the real driver's generation,
    /// for binds posted in user space).
    void attach_user_view(const hw::hca_caps& caps, const std::vector<hw::port_info>& ports, uint32_t num_qps,
                          std::function<uint8_t(uint32_t)> key_byte);
    /// True after a command timeout: the HCA is considered dead.
    bool fatal() const { return fatal_; }
    /// Description of the last command failure.
    const std::string& last_error() const { return last_error_; }

    /// Runs one command through the mailbox; returns the HCA status, CMD_TIMEOUT or CMD_FATAL.
    [[nodiscard]] hw::cmd_status exec(uint16_t opcode, uint32_t in_mod, uint32_t op_mod, const void* in,
                                      size_t in_len, void* out = nullptr, size_t out_len = 0);
    /// Commands issued so far.
    uint64_t commands_issued() const { return commands_; }

    /// Device capabilities from QUERY_HCA.
    const hw::hca_caps& caps() const { return caps_; }
    /// Port attributes from QUERY_PORT at init (port 1..phys_port_cnt), nullptr if out of range.
    const hw::port_info* port(uint8_t port_num) const;
    /// Re-reads one port's attributes; 0 or errno.
    [[nodiscard]] int refresh_port(uint8_t port_num);
    /// The options the driver runs with.
    const driver_options& options() const { return opts_; }
    /// The bus and the OS.
    host_bus& bus() { return bus_; }
    host_os& os() { return os_; }

    /// Table sizes in effect.
    uint32_t num_qps() const { return 1u << log_qps_; }
    uint32_t num_cqs() const { return 1u << log_cqs_; }
    uint32_t num_srqs() const { return (caps_.flags & hw::CAP_SRQ) ? 1u << log_srqs_ : 0; }
    uint32_t num_mpts() const { return 1u << log_mpts_; }
    uint32_t num_mtts() const { return 1u << log_mtts_; }

    /// Resource numbers (0 reserved for PDN, CQN, MPT index and UAR; QPNs start at
    /// FIRST_CONSUMER_QPN).
    [[nodiscard]] bool alloc_pdn(uint32_t* n) { return pdn_.alloc(n); }
    void free_pdn(uint32_t n) { pdn_.free(n); }
    [[nodiscard]] bool alloc_cqn(uint32_t* n) { return cqn_.alloc(n); }
    void free_cqn(uint32_t n) { cqn_.free(n); }
    [[nodiscard]] bool alloc_srqn(uint32_t* n) { return srqn_.alloc(n); }
    void free_srqn(uint32_t n) { srqn_.free(n); }
    [[nodiscard]] bool alloc_xrcdn(uint32_t* n) { return xrcdn_.alloc(n); }
    [[nodiscard]] bool alloc_rddn(uint32_t* n) { return rddn_.alloc(n); }
    void free_rddn(uint32_t n) { rddn_.free(n); }
    [[nodiscard]] bool alloc_eecn(uint32_t* n) { return eecn_.alloc(n); }
    void free_eecn(uint32_t n) { eecn_.free(n); }
    void free_xrcdn(uint32_t n) { xrcdn_.free(n); }
    [[nodiscard]] bool alloc_qpn(uint32_t* n) { return qpn_.alloc(n); }
    void free_qpn(uint32_t n) { qpn_.free(n); }
    /// The special QPNs 0 (SMI) and 1 (GSI), reserved by the driver: claims one; false if it is
    /// taken already.
    [[nodiscard]] bool claim_special_qpn(uint32_t n) {
        if (n >= FIRST_CONSUMER_QPN || special_qpn_used_[n]) return false;
        return special_qpn_used_[n] = true;
    }
    void release_special_qpn(uint32_t n) {
        if (n < FIRST_CONSUMER_QPN) special_qpn_used_[n] = false;
    }
    [[nodiscard]] bool alloc_uar(uint32_t* n) { return uar_.alloc(n); }
    void free_uar(uint32_t n) { uar_.free(n); }
    /// MPT index plus the key byte for this use of it (changes on every reuse of the index).
    /// Index 0 is never allocated: the reserved L_Key (hw::RESERVED_LKEY) names it.
    [[nodiscard]] bool alloc_mpt(uint32_t* index, uint8_t* key_byte);
    void free_mpt(uint32_t index) { mpt_.free(index); }
    /// A fresh CI-owned key byte for an allocated index (Reregister MR).
    uint8_t next_key_byte(uint32_t index);
    /// MPT indexes still free.
    uint32_t free_mpts() const { return mpt_.available(); }
    /// Memory windows (counted against caps.max_mw; they also take an MPT index).
    [[nodiscard]] bool reserve_mw();
    void release_mw() {
        if (mws_) --mws_;
    }
    uint32_t mws() const { return mws_; }
    /// MTT run of n entries, with one user.
    [[nodiscard]] bool alloc_mtt(uint64_t n, uint64_t* first) { return mtt_.alloc(n, first); }
    /// Returns a run regardless of its users.
    void free_mtt(uint64_t first, uint64_t n) { mtt_.free(first, n); }
    /// One more user of the run starting at first (Register Shared MR).
    void retain_mtt(uint64_t first);
    /// One user less of the run [first, first + n); frees it and returns true when that was the last.
    bool release_mtt(uint64_t first, uint64_t n);
    /// Users of the run starting at first (1 for a run nobody shares).
    uint32_t mtt_users(uint64_t first) const;

    /// BAR0 offset of a UAR page and of one register inside it.
    static constexpr uint64_t uar_offset(uint32_t uar) {
        return hw::UAR_BASE + uint64_t(uar) * hw::UAR_STRIDE;
    }
    static constexpr uint64_t uar_offset(uint32_t uar, hw::uar_reg r) { return uar_offset(uar) + r; }

    /// Consumes every EQE present, in order: completion events are counted per CQ; each
    /// asynchronous event goes to the handler of its QP or CQ, or (port change, catastrophic
    /// error) to every event client, or else to unclaimed_events(). Then the EQ doorbell, then,
    /// if any asynchronous event was consumed or a completion event was taken by a CQ's completion
    /// handler (set_cq_comp_handler), every client's `after`. Returns EQEs consumed.
    uint32_t process_eq();
    /// True when the next EQ slot holds an EQE (one owner-byte read, no simulated time).
    bool eq_pending();
    /// Sleeps until the next EQE slot is written or timeout_ns passes (0: forever); false on timeout.
    bool wait_eq(uint64_t timeout_ns);
    /// Completion events seen for a CQ and not yet taken.
    uint32_t pending_cq_events(uint32_t cqn) const;
    /// Takes one pending completion event of a CQ; false if none.
    bool take_cq_event(uint32_t cqn);
    /// Completion events of one CQ: `fn` (the verbs layer's own, no consumer code) is called for
    /// each EQE_COMPLETION of the CQ and returns true when it took the event (passed to a
    /// completion event handler by the client's `after`), false to leave it pending.
    void set_cq_comp_handler(uint32_t cqn, std::function<bool()> fn);
    void clear_cq_comp_handler(uint32_t cqn);
    /// Adds one pending completion event to a CQ (an event taken but not passed to a handler).
    void add_cq_event(uint32_t cqn) {
        if (cqn < cq_events_.size()) ++cq_events_[cqn];
    }
    /// Handler for async events about one QP (SQ drained, errors): registered by the verbs layer.
    void set_qp_event_handler(uint32_t qpn, std::function<void(const hw::eqe&)> fn);
    void clear_qp_event_handler(uint32_t qpn);
    /// EE context events (EQE_EEC_ERR, EQE_EEC_PATH_MIGRATED, EQE_EEC_PATH_MIG_ERR) for EECN `eecn`.
    void set_eec_event_handler(uint32_t eecn, std::function<void(const hw::eqe&)> fn);
    void clear_eec_event_handler(uint32_t eecn);
    /// Handler for async events about one CQ (CQ error): registered by the verbs layer.
    void set_cq_event_handler(uint32_t cqn, std::function<void(const hw::eqe&)> fn);
    void clear_cq_event_handler(uint32_t cqn);
    /// Handler for async events about one SRQ (limit reached, SRQ error): registered by the verbs layer.
    void set_srq_event_handler(uint32_t srqn, std::function<void(const hw::eqe&)> fn);
    void clear_srq_event_handler(uint32_t srqn);
    /// A receiver of unaffiliated events (one per verbs context).
    struct event_client {
        std::function<void(const hw::eqe&)> event;  ///< each port-change / catastrophic EQE
        std::function<void()> after;                ///< end of a process_eq that consumed async events
    };
    /// Registers (or replaces) the client `owner`; clients are served in registration order.
    void add_event_client(const void* owner, event_client c);
    void remove_event_client(const void* owner);
    /// Async events no handler or client took (unknown types or resources, events
    /// for destroyed objects), oldest first.
    std::vector<hw::eqe>& unclaimed_events() { return unclaimed_; }
    /// Asynchronous EQEs consumed since init.
    uint64_t async_events() const { return async_events_; }
    /// Physical address of the EQ ring, of the MSI word, and the EQ consumer count.
    uint64_t eq_base() const { return eq_pa_; }
    /// Physical address of the CQ context table (INIT_HCA cqc_base).
    uint64_t cqc_base() const { return cqc_pa_; }
    uint64_t msi_word() const { return msi_pa_; }
    uint32_t eq_consumer() const { return eq_consumer_; }

    /// Opaque per-QPN pointer used by the verbs layer to find a QP from a CQE.
    void set_qp_user(uint32_t qpn, void* p);
    void* qp_user(uint32_t qpn) const { return qpn < qp_users_.size() ? qp_users_[qpn] : nullptr; }
    /// The same per SRQ number: an XRC SRQ's completions name it (their QP is the target's).
    void set_srq_user(uint32_t srqn, void* p);
    void* srq_user(uint32_t srqn) const { return srqn < srq_users_.size() ? srq_users_[srqn] : nullptr; }

private:
    uint64_t mailbox_status_pa() const { return mailbox_pa_ + offsetof(hw::cmd_mailbox, status); }
    void dispatch_async(const hw::eqe& e);
    host_bus& bus_;
    host_os& os_;
    driver_options opts_;
    bool initialized_ = false;
    bool user_view_ = false;
    std::function<uint8_t(uint32_t)> user_key_byte_;  ///< user view: next_key_byte
    bool fatal_ = false;
    bool cmd_busy_ = false;
    std::string last_error_;
    uint64_t commands_ = 0;
    uint32_t next_token_ = 1;
    hw::hca_caps caps_{};
    std::vector<hw::port_info> ports_;
    uint8_t log_qps_ = 0, log_cqs_ = 0, log_mpts_ = 0, log_mtts_ = 0, log_srqs_ = 0;
    uint64_t mailbox_pa_ = 0, qpc_pa_ = 0, cqc_pa_ = 0, eqc_pa_ = 0, mpt_pa_ = 0, mtt_pa_ = 0, srqc_pa_ = 0;
    uint64_t eq_pa_ = 0, msi_pa_ = 0;
    uint32_t eq_consumer_ = 0;
    id_allocator pdn_, cqn_, qpn_, uar_, mpt_, srqn_, xrcdn_, rddn_, eecn_;
    bool special_qpn_used_[FIRST_CONSUMER_QPN] = {};
    range_allocator mtt_;
    std::vector<uint8_t> key_gen_;
    std::map<uint64_t, uint32_t> mtt_users_;  ///< first entry -> users, for runs with more than one
    uint32_t mws_ = 0;
    std::vector<uint32_t> cq_events_;
    std::map<uint32_t, std::function<void(const hw::eqe&)>> qp_handlers_;
    std::map<uint32_t, std::function<void(const hw::eqe&)>> eec_handlers_;
    std::map<uint32_t, std::function<void(const hw::eqe&)>> cq_handlers_;
    std::map<uint32_t, std::function<void(const hw::eqe&)>> srq_handlers_;
    std::vector<std::function<bool()>> cq_comp_handlers_;  ///< by CQN
    std::vector<std::pair<const void*, event_client>> clients_;
    std::vector<hw::eqe> unclaimed_;
    uint64_t async_events_ = 0;
    std::vector<void*> qp_users_;
    std::vector<void*> srq_users_;  ///< grown on demand (the user view knows no SRQ count)
};

/// XRC domain numbers the driver hands out (1 .. MAX_XRCDS; the HCA compares them only).
constexpr uint32_t MAX_XRCDS = 1u << 16;

/// errno equivalent of a command status (0 for CMD_OK).
int cmd_errno(hw::cmd_status st);

}  // namespace hcasim::fw
