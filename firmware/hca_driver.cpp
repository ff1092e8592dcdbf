#include "firmware/hca_driver.h"
#include "firmware/owned_ring.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace hcasim::fw {

bool id_allocator::alloc(uint32_t* id) {
    // Everything below low_ is in use: the scan starts there (creating N objects is O(N), not O(N^2)).
    for (size_t i = low_; i < used_.size(); ++i) {
        if (!used_[i]) {
            used_[i] = true;
            low_ = i + 1;
            *id = first_ + uint32_t(i);
            return true;
        }
    }
    low_ = used_.size();
    return false;
}

void id_allocator::free(uint32_t id) {
    if (id >= first_ && id - first_ < used_.size()) {
        used_[id - first_] = false;
        low_ = std::min<size_t>(low_, id - first_);
    }
}

bool id_allocator::in_use(uint32_t id) const {
    return id >= first_ && id - first_ < used_.size() && used_[id - first_];
}

uint32_t id_allocator::available() const { return uint32_t(std::count(used_.begin(), used_.end(), false)); }

bool range_allocator::alloc(uint64_t n, uint64_t* first) {
    if (n == 0) return false;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < n) continue;
        *first = it->first;
        uint64_t rest = it->second - n, start = it->first + n;
        free_.erase(it);
        if (rest) free_[start] = rest;
        return true;
    }
    return false;
}

void range_allocator::free(uint64_t first, uint64_t n) {
    if (n == 0) return;
    auto it = free_.emplace(first, n).first;
    auto next = std::next(it);
    if (next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
    }
    if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
            prev->second += it->second;
            free_.erase(it);
        }
    }
}

int cmd_errno(hw::cmd_status st) {
    switch (uint8_t(st)) {
    case hw::CMD_OK: return 0;
    case hw::CMD_BAD_PARAM: return EINVAL;
    case hw::CMD_BAD_RESOURCE: return EINVAL;
    case hw::CMD_BAD_STATE: return EINVAL;
    case hw::CMD_BAD_OPCODE: return EOPNOTSUPP;
    case CMD_TIMEOUT: return ETIMEDOUT;
    default: return EIO;
    }
}

namespace {
uint8_t floor_log2(uint64_t v) {
    uint8_t l = 0;
    while (v > 1) {
        v >>= 1;
        ++l;
    }
    return l;
}
}  // namespace

hca_driver::hca_driver(host_bus& bus, host_os& os, const driver_options& opts)
    : bus_(bus), os_(os), opts_(opts) {}

hca_driver::~hca_driver() {
    for (uint64_t pa : {mailbox_pa_, qpc_pa_, cqc_pa_, eqc_pa_, mpt_pa_, mtt_pa_, eq_pa_, msi_pa_})
        if (pa) os_.free(pa);
}

hw::cmd_status hca_driver::exec(uint16_t opcode, uint32_t in_mod, uint32_t op_mod, const void* in,
                                size_t in_len, void* out, size_t out_len) {
    if (fatal_) return CMD_FATAL;
    if (!mailbox_pa_ || in_len > hw::CMD_IN_BYTES || out_len > hw::CMD_OUT_BYTES) return hw::CMD_BAD_PARAM;
    uint64_t deadline = bus_.now_ns() + opts_.cmd_timeout_ns;
    // One command at a time: later callers sleep on the mailbox status word, which the owner
    // rewrites when it releases the mailbox.
    while (cmd_busy_) {
        uint64_t now = bus_.now_ns();
        if (now >= deadline) {
            last_error_ = "command interface busy for longer than the command timeout";
            return CMD_TIMEOUT;
        }
        bus_.wait_write(mailbox_status_pa(), 4, deadline - now);
        if (fatal_) return CMD_FATAL;
    }
    cmd_busy_ = true;
    uint32_t token = next_token_;
    next_token_ = (next_token_ + 1) & 0xFFFFFFu;
    if (next_token_ == 0) next_token_ = 1;

    hw::cmd_mailbox hdr;
    std::memset(&hdr, 0, offsetof(hw::cmd_mailbox, in));
    hdr.opcode = opcode;
    hdr.in_mod = in_mod;
    hdr.op_mod = op_mod;
    hdr.token = token;
    bus_.mem_write(mailbox_pa_, &hdr, offsetof(hw::cmd_mailbox, in));
    if (in_len) bus_.mem_write(mailbox_pa_ + offsetof(hw::cmd_mailbox, in), in, in_len);
    uint64_t mbox = mailbox_pa_;
    bus_.mmio_write(hw::REG_CMD_MAILBOX, &mbox, 8);
    bus_.mmio_write(hw::REG_CMD_DOORBELL, &token, 4);
    ++commands_;

    uint32_t words[2];  // status, done_token
    hw::cmd_status result;
    for (;;) {
        bus_.mem_read(mailbox_status_pa(), words, sizeof(words));
        if ((words[0] & hw::CMD_DONE) && words[1] == token) {
            result = hw::cmd_status(words[0] & 0xFF);
            break;
        }
        uint64_t now = bus_.now_ns();
        if (now >= deadline) {
            char msg[160];
            std::snprintf(msg, sizeof msg,
                          "hca_driver: FATAL: command 0x%02x (in_mod %u, token %u) not done after %llu ns; "
                          "HCA considered dead",
                          unsigned(opcode), in_mod, token, (unsigned long long)opts_.cmd_timeout_ns);
            last_error_ = msg;
            std::fprintf(stderr, "%s\n", msg);
            fatal_ = true;
            result = CMD_TIMEOUT;
            break;
        }
        bus_.wait_write(mailbox_status_pa(), sizeof(words), deadline - now);
    }
    if (result == hw::CMD_OK && out && out_len)
        bus_.mem_read(mailbox_pa_ + offsetof(hw::cmd_mailbox, out), out, out_len);
    if (result != hw::CMD_OK && result != CMD_TIMEOUT) {
        char msg[96];
        std::snprintf(msg, sizeof msg, "command 0x%02x (in_mod %u) failed with status %u", unsigned(opcode),
                      in_mod, unsigned(result));
        last_error_ = msg;
    }
    cmd_busy_ = false;
    bus_.mem_write(mailbox_status_pa(), &words[0], 4);  // wakes callers waiting for the mailbox
    return result;
}

int hca_driver::init() {
    if (initialized_) return 0;
    if (bus_.mmio_read32(hw::REG_HCA_ID) != hw::HCA_ID_VALUE) {
        char msg[96];
        std::snprintf(msg, sizeof msg, "REG_HCA_ID mismatch: not an hcasim HCA of interface version %u",
                      unsigned(hw::INTERFACE_VERSION));
        last_error_ = msg;
        return ENODEV;
    }
    if (!os_.alloc_contiguous(sizeof(hw::cmd_mailbox), PAGE_BYTES, &mailbox_pa_)) return ENOMEM;
    hw::cmd_status st = exec(hw::CMD_QUERY_HCA, 0, 0, nullptr, 0, &caps_, sizeof(caps_));
    if (st != hw::CMD_OK) return cmd_errno(st);
    if (caps_.max_qp < 2 || caps_.max_cq < 2 || caps_.max_mr < 2 || caps_.max_mtt < 1 ||
        caps_.phys_port_cnt == 0)
        return ENODEV;
    log_qps_ = std::min(opts_.log_num_qps, floor_log2(caps_.max_qp));
    log_cqs_ = std::min(opts_.log_num_cqs, floor_log2(caps_.max_cq));
    log_mpts_ = std::min(opts_.log_num_mpts, floor_log2(caps_.max_mr));
    log_mtts_ = std::min(opts_.log_num_mtts, floor_log2(caps_.max_mtt));
    if (!os_.alloc_contiguous(sizeof(hw::qp_context) << log_qps_, PAGE_BYTES, &qpc_pa_) ||
        !os_.alloc_contiguous(sizeof(hw::cq_context) << log_cqs_, PAGE_BYTES, &cqc_pa_) ||
        !os_.alloc_contiguous(sizeof(hw::eq_context), PAGE_BYTES, &eqc_pa_) ||
        !os_.alloc_contiguous(sizeof(hw::mpt_entry) << log_mpts_, PAGE_BYTES, &mpt_pa_) ||
        !os_.alloc_contiguous(sizeof(hw::mtt_entry) << log_mtts_, PAGE_BYTES, &mtt_pa_))
        return ENOMEM;
    if (caps_.flags & hw::CAP_SRQ) {
        log_srqs_ = std::min(opts_.log_num_srqs, floor_log2(std::max<uint32_t>(caps_.max_srq, 1)));
        if (!os_.alloc_contiguous(sizeof(hw::srq_context) << log_srqs_, PAGE_BYTES, &srqc_pa_)) return ENOMEM;
    }
    hw::init_hca_in ih{};
    ih.qpc_base = qpc_pa_;
    ih.cqc_base = cqc_pa_;
    ih.eqc_base = eqc_pa_;
    ih.mpt_base = mpt_pa_;
    ih.mtt_base = mtt_pa_;
    ih.log_num_qps = log_qps_;
    ih.log_num_cqs = log_cqs_;
    ih.log_num_eqs = 0;
    ih.log_num_mpts = log_mpts_;
    ih.log_num_mtts = log_mtts_;
    ih.log_num_srqs = log_srqs_;
    ih.srqc_base = srqc_pa_;
    if ((st = exec(hw::CMD_INIT_HCA, 0, 0, &ih, sizeof(ih))) != hw::CMD_OK) return cmd_errno(st);

    ports_.assign(caps_.phys_port_cnt, hw::port_info{});
    for (uint8_t p = 1; p <= caps_.phys_port_cnt; ++p)
        if (int e = refresh_port(p)) return e;

    if (!os_.alloc_contiguous(sizeof(hw::eqe) << opts_.eq_log_size, PAGE_BYTES, &eq_pa_) ||
        !os_.alloc_contiguous(64, 64, &msi_pa_))
        return ENOMEM;
    hw::eq_context eqc{};
    eqc.base = eq_pa_;
    eqc.log_size = opts_.eq_log_size;
    eqc.valid = 1;
    if ((st = exec(hw::CMD_CREATE_EQ, 0, 0, &eqc, sizeof(eqc))) != hw::CMD_OK) return cmd_errno(st);
    uint64_t msi = msi_pa_;
    uint32_t msi_data = 1;
    bus_.mmio_write(hw::REG_INT_MSI_ADDR, &msi, 8);
    bus_.mmio_write(hw::REG_INT_MSI_DATA, &msi_data, 4);
    uint32_t arm = 0;  // EQN 0, consumer 0: arms the EQ
    bus_.mmio_write(hw::REG_EQ_CONSUMER, &arm, 4);

    pdn_ = id_allocator(1, std::max<uint32_t>(caps_.max_pd, 2) - 1);
    cqn_ = id_allocator(1, num_cqs() - 1);
    srqn_ = id_allocator(0, num_srqs());
    xrcdn_ = id_allocator(1, (caps_.flags & hw::CAP_XRC) ? MAX_XRCDS : 0);
    rddn_ = id_allocator(1, (caps_.flags & hw::CAP_RD) ? std::max<uint32_t>(caps_.max_rdd, 1) - 1 : 0);
    eecn_ = id_allocator(
        1, (caps_.flags & hw::CAP_RD) ? std::max<uint32_t>(caps_.max_ee, 1) - 1 : 0);  // EECN 0 unused
    qpn_ = id_allocator(FIRST_CONSUMER_QPN, num_qps() - FIRST_CONSUMER_QPN);  // 0, 1: the special QPs
    uar_ = id_allocator(1, std::min<uint32_t>(std::max<uint32_t>(caps_.max_uar, 2), hw::MAX_UARS) - 1);
    mpt_ = id_allocator(1, std::min<uint32_t>(num_mpts(), 1u << 24) - 1);
    mtt_ = range_allocator(0, num_mtts());
    key_gen_.assign(num_mpts(), 0);
    cq_events_.assign(num_cqs(), 0);
    cq_comp_handlers_.assign(num_cqs(), nullptr);
    qp_users_.assign(num_qps(), nullptr);
    initialized_ = true;
    return 0;
}

void hca_driver::attach_user_view(const hw::hca_caps& caps, const std::vector<hw::port_info>& ports,
                                  uint32_t num_qps, std::function<uint8_t(uint32_t)> key_byte) {
    user_key_byte_ = std::move(key_byte);
    caps_ = caps;
    ports_ = ports;
    qp_users_.assign(num_qps, nullptr);
    user_view_ = initialized_ = true;
}

const hw::port_info* hca_driver::port(uint8_t port_num) const {
    if (port_num == 0 || port_num > ports_.size()) return nullptr;
    return &ports_[port_num - 1];
}

int hca_driver::refresh_port(uint8_t port_num) {
    if (port_num == 0 || port_num > ports_.size()) return EINVAL;
    hw::port_info pi{};
    hw::cmd_status st = exec(hw::CMD_QUERY_PORT, port_num, 0, nullptr, 0, &pi, sizeof(pi));
    if (st != hw::CMD_OK) return cmd_errno(st);
    ports_[port_num - 1] = pi;
    return 0;
}

bool hca_driver::alloc_mpt(uint32_t* index, uint8_t* key_byte) {
    if (!mpt_.alloc(index)) return false;  // the allocator starts at 1: index 0 is the reserved L_Key's
    *key_byte = ++key_gen_[*index];        // a fresh key byte on every reuse of the index
    return true;
}

uint8_t hca_driver::next_key_byte(uint32_t index) {
    if (user_view_) return user_key_byte_ ? user_key_byte_(index) : 0;
    return index < key_gen_.size() ? ++key_gen_[index] : 0;
}

bool hca_driver::reserve_mw() {
    if (caps_.max_mw && mws_ >= caps_.max_mw) return false;
    ++mws_;
    return true;
}

void hca_driver::retain_mtt(uint64_t first) {
    auto it = mtt_users_.find(first);
    if (it == mtt_users_.end())
        mtt_users_[first] = 2;
    else
        ++it->second;
}

bool hca_driver::release_mtt(uint64_t first, uint64_t n) {
    auto it = mtt_users_.find(first);
    if (it == mtt_users_.end()) {
        mtt_.free(first, n);
        return true;
    }
    if (--it->second <= 1) mtt_users_.erase(it);
    return false;
}

uint32_t hca_driver::mtt_users(uint64_t first) const {
    auto it = mtt_users_.find(first);
    return it == mtt_users_.end() ? 1 : it->second;
}

uint32_t hca_driver::process_eq() {
    if (!initialized_ || user_view_) return 0;
    uint32_t n = 0, async = 0, taken = 0, mask = (1u << opts_.eq_log_size) - 1;
    for (;;) {
        if (!software_owns<hw::eqe>(bus_, eq_pa_, opts_.eq_log_size, eq_consumer_))
            break;  // owner byte first
        hw::eqe e;
        bus_.mem_read(eq_pa_ + uint64_t(eq_consumer_ & mask) * sizeof(hw::eqe), &e, sizeof(e));
        ++eq_consumer_;
        ++n;
        if (e.type == hw::EQE_COMPLETION) {
            if (e.resource >= cq_events_.size()) continue;
            if (cq_comp_handlers_[e.resource] && cq_comp_handlers_[e.resource]())
                ++taken;
            else
                ++cq_events_[e.resource];
            continue;
        }
        ++async;
        ++async_events_;
        dispatch_async(e);
    }
    if (n) {
        uint32_t v = ((eq_consumer_ & 0xFFFFFFu) << 8) | 0u;  // EQN 0; rearms
        bus_.mmio_write(hw::REG_EQ_CONSUMER, &v, 4);
    }
    if (async || taken) {
        // `after` runs consumer code, which may add or remove clients: serve those present now.
        std::vector<const void*> owners;
        for (auto& c : clients_) owners.push_back(c.first);
        for (const void* o : owners) {
            auto it =
                std::find_if(clients_.begin(), clients_.end(), [o](const auto& c) { return c.first == o; });
            if (it == clients_.end() || !it->second.after) continue;
            auto fn = it->second.after;  // a copy: the client may remove itself while it runs
            fn();
        }
    }
    return n;
}

void hca_driver::dispatch_async(const hw::eqe& e) {
    // Handlers called here are the verbs layer's own (state updates and queueing, no consumer
    // code), so the handler tables do not change while they run.
    switch (e.type) {
    case hw::EQE_PATH_MIGRATED:
    case hw::EQE_COMM_EST:
    case hw::EQE_SQ_DRAINED:
    case hw::EQE_QP_FATAL:
    case hw::EQE_QP_REQ_ERR:
    case hw::EQE_QP_ACCESS_ERR:
    case hw::EQE_QP_LAST_WQE_REACHED:
    case hw::EQE_PATH_MIG_ERR: {
        auto it = qp_handlers_.find(e.resource);
        if (it == qp_handlers_.end()) break;
        it->second(e);
        return;
    }
    case hw::EQE_EEC_ERR:
    case hw::EQE_EEC_PATH_MIGRATED:
    case hw::EQE_EEC_PATH_MIG_ERR: {
        auto it = eec_handlers_.find(e.resource);
        if (it == eec_handlers_.end()) break;
        it->second(e);
        return;
    }
    case hw::EQE_CQ_ERROR: {
        auto it = cq_handlers_.find(e.resource);
        if (it == cq_handlers_.end()) break;
        it->second(e);
        return;
    }
    case hw::EQE_SRQ_LIMIT:
    case hw::EQE_SRQ_ERROR: {
        auto it = srq_handlers_.find(e.resource);
        if (it == srq_handlers_.end()) break;
        it->second(e);
        return;
    }
    case hw::EQE_PORT_CHANGE:
        if (e.resource == 0 || e.resource > ports_.size()) break;  // no such port
        if (e.subtype == hw::EQE_PORT_ACTIVE)
            ports_[e.resource - 1].state = 4;
        else if (e.subtype == hw::EQE_PORT_DOWN)
            ports_[e.resource - 1].state = 1;
        else
            break;
        [[fallthrough]];
    case hw::EQE_LOCAL_CATASTROPHIC:
        if (clients_.empty()) break;
        for (auto& c : clients_)
            if (c.second.event) c.second.event(e);
        return;
    default:  // unknown types
        break;
    }
    unclaimed_.push_back(e);
}

bool hca_driver::eq_pending() {
    if (!initialized_ || user_view_) return false;
    return software_owns<hw::eqe>(bus_, eq_pa_, opts_.eq_log_size, eq_consumer_);
}

bool hca_driver::wait_eq(uint64_t timeout_ns) {
    uint32_t mask = (1u << opts_.eq_log_size) - 1;
    return bus_.wait_write(eq_pa_ + uint64_t(eq_consumer_ & mask) * sizeof(hw::eqe), sizeof(hw::eqe),
                           timeout_ns);
}

uint32_t hca_driver::pending_cq_events(uint32_t cqn) const {
    return cqn < cq_events_.size() ? cq_events_[cqn] : 0;
}

bool hca_driver::take_cq_event(uint32_t cqn) {
    if (cqn >= cq_events_.size() || cq_events_[cqn] == 0) return false;
    --cq_events_[cqn];
    return true;
}

void hca_driver::set_qp_event_handler(uint32_t qpn, std::function<void(const hw::eqe&)> fn) {
    qp_handlers_[qpn] = std::move(fn);
}

void hca_driver::clear_qp_event_handler(uint32_t qpn) { qp_handlers_.erase(qpn); }

void hca_driver::set_eec_event_handler(uint32_t eecn, std::function<void(const hw::eqe&)> fn) {
    eec_handlers_[eecn] = std::move(fn);
}

void hca_driver::clear_eec_event_handler(uint32_t eecn) { eec_handlers_.erase(eecn); }

void hca_driver::set_cq_event_handler(uint32_t cqn, std::function<void(const hw::eqe&)> fn) {
    cq_handlers_[cqn] = std::move(fn);
}

void hca_driver::clear_cq_event_handler(uint32_t cqn) { cq_handlers_.erase(cqn); }

void hca_driver::set_srq_event_handler(uint32_t srqn, std::function<void(const hw::eqe&)> fn) {
    srq_handlers_[srqn] = std::move(fn);
}

void hca_driver::clear_srq_event_handler(uint32_t srqn) { srq_handlers_.erase(srqn); }

void hca_driver::set_cq_comp_handler(uint32_t cqn, std::function<bool()> fn) {
    if (cqn < cq_comp_handlers_.size()) cq_comp_handlers_[cqn] = std::move(fn);
}

void hca_driver::clear_cq_comp_handler(uint32_t cqn) {
    if (cqn < cq_comp_handlers_.size()) cq_comp_handlers_[cqn] = nullptr;
}

void hca_driver::add_event_client(const void* owner, event_client c) {
    for (auto& e : clients_) {
        if (e.first == owner) {
            e.second = std::move(c);
            return;
        }
    }
    clients_.emplace_back(owner, std::move(c));
}

void hca_driver::remove_event_client(const void* owner) {
    auto of_owner = [owner](const auto& c) { return c.first == owner; };
    clients_.erase(std::remove_if(clients_.begin(), clients_.end(), of_owner), clients_.end());
}

void hca_driver::set_qp_user(uint32_t qpn, void* p) {
    if (qpn < qp_users_.size()) qp_users_[qpn] = p;
}

void hca_driver::set_srq_user(uint32_t srqn, void* p) {
    if (srqn >= srq_users_.size()) srq_users_.resize(size_t(srqn) + 1, nullptr);
    srq_users_[srqn] = p;
}

}  // namespace hcasim::fw
