// A host_bus for firmware logic tests: byte-vector host memory, fake time, and a tiny command
// responder. Records every command and MMIO write so tests can assert them. The responder keeps
// QP contexts and MPT entries (CREATE/QUERY/DESTROY_MPT with the interface's state rules) so
// verbs can read back what they wrote, and answers QUERY_PKEY / QUERY_GID from its own tables;
// it never executes WQEs.
#pragma once
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>
#include "tlm_if/commands.h"
#include "tlm_if/host_bus.h"
#include "tlm_if/mmio_map.h"

namespace hcasim::test {

class fake_hca_bus : public host_bus {
public:
    struct mmio_rec {
        uint64_t offset;
        std::vector<uint8_t> bytes;
        uint64_t value;  ///< first up to 8 bytes, little-endian
    };
    struct cmd_rec {
        uint16_t opcode;
        uint32_t in_mod, op_mod, token;
        std::vector<uint8_t> in;  ///< whole input area
    };
    struct sched_write {
        uint64_t at_ns, pa;
        std::vector<uint8_t> bytes;
    };

    fake_hca_bus(uint64_t base, size_t bytes) : base_(base), mem_(bytes, 0) {
        caps.flags = hw::CAP_RC | hw::CAP_UC | hw::CAP_UD | hw::CAP_ATOMIC | hw::CAP_RDMA_READ |
                     hw::CAP_INLINE | hw::CAP_SEND_INV | hw::CAP_MW | hw::CAP_MW_TYPE2A | hw::CAP_ZBVA |
                     hw::CAP_BLOCK_LIST | hw::CAP_LOCAL_INV_FENCE | hw::CAP_RESERVED_LKEY;
        caps.node_guid = 0x0002c90300a0b0c0ull;
        caps.sys_image_guid = caps.node_guid;
        caps.max_mr_size = 1ull << 32;
        caps.page_size_cap = (1ull << 12) | (1ull << 16) | (1ull << 21);
        caps.vendor_id = 0x02c9;
        caps.vendor_part_id = 0x1234;
        caps.fw_ver = 0x10000;
        caps.max_qp = 1024;
        caps.max_qp_wr = 4096;
        caps.max_sge = 16;
        caps.max_cq = 256;
        caps.max_cqe = 65535;
        caps.max_mr = 1024;
        caps.max_pd = 256;
        caps.max_qp_rd_atom = 16;
        caps.max_qp_init_rd_atom = 16;
        caps.max_inline = 512;
        caps.max_mtt = 1 << 14;
        caps.max_uar = 16;
        caps.phys_port_cnt = 1;
        caps.max_mw = 256;
        caps.reserved_lkey = hw::RESERVED_LKEY;
        caps.max_fast_reg_pages = 64;
        port.state = 4;
        port.max_mtu = hw::MTU_4096;
        port.active_mtu = hw::MTU_4096;
        port.lid = 1;
        port.sm_lid = 1;
        port.link_width = 4;
        port.link_speed = 4;
        port.pkey_table_len = 16;
        port.gid_table_len = 8;
        port.port_guid = 0x1122;
        pkey_table.assign(port.pkey_table_len, 0);
        pkey_table[0] = 0xFFFF;
        gid_table.assign(port.gid_table_len, hw::gid_entry{});
    }

    // ---- host_bus
    void mem_read(uint64_t pa, void* dst, size_t n) override { std::memcpy(dst, at(pa, n), n); }
    void mem_write(uint64_t pa, const void* src, size_t n) override { std::memcpy(at(pa, n), src, n); }
    void mmio_write(uint64_t off, const void* src, size_t n) override {
        mmio_rec r{off, std::vector<uint8_t>((const uint8_t*)src, (const uint8_t*)src + n), 0};
        std::memcpy(&r.value, src, std::min<size_t>(n, 8));
        mmio.push_back(r);
        now_ += 50;
        if (off == hw::REG_CMD_MAILBOX) mailbox_ = r.value;
        if (off == hw::REG_CMD_DOORBELL && respond_commands) respond(uint32_t(r.value));
    }
    uint32_t mmio_read32(uint64_t off) override {
        now_ += 500;
        return off == hw::REG_HCA_ID ? hw::HCA_ID_VALUE : 0;
    }
    void cpu_cost(cpu_op op, uint32_t count) override {
        cost[int(op)] += count;
        now_ += 10ull * count;
    }
    bool wait_write(uint64_t pa, size_t n, uint64_t timeout_ns) override {
        ++waits;
        // Apply scheduled writes in time order until one hits the watched range or time runs out.
        uint64_t deadline = timeout_ns ? now_ + timeout_ns : UINT64_MAX;
        std::stable_sort(pending.begin(), pending.end(),
                         [](const sched_write& a, const sched_write& b) { return a.at_ns < b.at_ns; });
        while (!pending.empty() && pending.front().at_ns <= deadline) {
            sched_write w = pending.front();
            pending.erase(pending.begin());
            now_ = std::max(now_, w.at_ns);
            mem_write(w.pa, w.bytes.data(), w.bytes.size());
            if (w.pa < pa + n && pa < w.pa + w.bytes.size()) return true;
        }
        if (timeout_ns == 0)
            throw std::runtime_error("fake_hca_bus: wait_write forever with nothing pending");
        now_ = deadline;
        return false;
    }
    uint64_t now_ns() const override { return now_; }
    void sleep_ns(uint64_t ns) override { now_ += ns; }

    // ---- test helpers
    uint8_t* at(uint64_t pa, size_t n) {
        if (pa < base_ || pa + n > base_ + mem_.size()) throw std::out_of_range("fake_hca_bus: bad pa");
        return &mem_[pa - base_];
    }
    template <class T>
    T read(uint64_t pa) {
        T v;
        std::memcpy(&v, at(pa, sizeof v), sizeof v);
        return v;
    }
    /// Schedules a DMA-like write at absolute time at_ns.
    void schedule(uint64_t at_ns, uint64_t pa, const void* src, size_t n) {
        pending.push_back({at_ns, pa, std::vector<uint8_t>((const uint8_t*)src, (const uint8_t*)src + n)});
    }
    /// Commands with a given opcode.
    std::vector<cmd_rec> commands_of(uint16_t op) const {
        std::vector<cmd_rec> v;
        for (auto& c : cmds)
            if (c.opcode == op) v.push_back(c);
        return v;
    }
    /// MMIO writes at or above an offset (UAR traffic) since index `from`.
    size_t count_mmio(uint64_t off, size_t from = 0) const {
        size_t n = 0;
        for (size_t i = from; i < mmio.size(); ++i) n += mmio[i].offset == off;
        return n;
    }

    hw::hca_caps caps{};
    hw::port_info port{};
    std::vector<uint16_t> pkey_table;      ///< what QUERY_PKEY returns (index < port.pkey_table_len)
    std::vector<hw::gid_entry> gid_table;  ///< what QUERY_GID returns (index < port.gid_table_len)
    bool respond_commands = true;          ///< false: never answer (timeout tests)
    std::map<uint16_t, hw::cmd_status> fail_opcode;  ///< opcode -> status to return
    /// (opcode, op_mod) -> status to return (e.g. only CREATE_MPT with MPT_MODIFY).
    std::map<std::pair<uint16_t, uint32_t>, hw::cmd_status> fail_op_mod;
    std::vector<mmio_rec> mmio;
    std::vector<cmd_rec> cmds;
    std::vector<sched_write> pending;
    std::map<uint32_t, hw::qp_context> qps;  ///< contexts from CREATE/MODIFY_QP
    /// MPT entries by index, as the HCA holds them; tests may set HCA fields (bound_mws, state).
    std::map<uint32_t, hw::mpt_entry> mpts;
    /// QPNs with type 2A windows bound (set by tests): DESTROY_QP and MODIFY_QP to Reset fail
    /// CMD_BAD_STATE.
    std::set<uint32_t> qps_with_2a_windows;
    uint64_t cost[8] = {};
    uint64_t waits = 0;

private:
    void respond(uint32_t token) {
        hw::cmd_mailbox* mb = reinterpret_cast<hw::cmd_mailbox*>(at(mailbox_, sizeof(hw::cmd_mailbox)));
        cmd_rec r{mb->opcode, mb->in_mod, mb->op_mod, mb->token,
                  std::vector<uint8_t>(mb->in, mb->in + hw::CMD_IN_BYTES)};
        cmds.push_back(r);
        hw::cmd_status st = hw::CMD_OK;
        auto f = fail_opcode.find(r.opcode);
        auto fm = fail_op_mod.find({r.opcode, r.op_mod});
        bool has_2a = qps_with_2a_windows.count(r.in_mod) != 0;
        if (f != fail_opcode.end())
            st = f->second;
        else if (fm != fail_op_mod.end())
            st = fm->second;
        else if (r.opcode == hw::CMD_QUERY_HCA)
            std::memcpy(mb->out, &caps, sizeof caps);
        else if (r.opcode == hw::CMD_QUERY_PORT)
            std::memcpy(mb->out, &port, sizeof port);
        else if (r.opcode == hw::CMD_QUERY_PKEY) {
            if (r.in_mod != 1 || r.op_mod >= port.pkey_table_len || r.op_mod >= pkey_table.size())
                st = hw::CMD_BAD_PARAM;
            else
                std::memcpy(mb->out, &pkey_table[r.op_mod], sizeof(uint16_t));
        } else if (r.opcode == hw::CMD_QUERY_GID) {
            if (r.in_mod != 1 || r.op_mod >= port.gid_table_len || r.op_mod >= gid_table.size())
                st = hw::CMD_BAD_PARAM;
            else
                std::memcpy(mb->out, &gid_table[r.op_mod], sizeof(hw::gid_entry));
        } else if (r.opcode == hw::CMD_CREATE_QP)
            std::memcpy(&qps[r.in_mod], mb->in, sizeof(hw::qp_context));
        else if (r.opcode == hw::CMD_MODIFY_QP && r.op_mod == hw::QPS_RESET && has_2a)
            st = hw::CMD_BAD_STATE;
        else if (r.opcode == hw::CMD_MODIFY_QP) {
            std::memcpy(&qps[r.in_mod], mb->in + offsetof(hw::modify_qp_in, ctx), sizeof(hw::qp_context));
            qps[r.in_mod].sq_draining = 0;  // nothing is ever in flight here: a drain ends at once
        } else if (r.opcode == hw::CMD_QUERY_QP)
            std::memcpy(mb->out, &qps[r.in_mod], sizeof(hw::qp_context));
        else if (r.opcode == hw::CMD_DESTROY_QP && has_2a)
            st = hw::CMD_BAD_STATE;
        else if (r.opcode == hw::CMD_DESTROY_QP)
            qps.erase(r.in_mod);
        else if (r.opcode == hw::CMD_CREATE_MPT)
            st = create_mpt(r.in_mod, r.op_mod, mb->in);
        else if (r.opcode == hw::CMD_QUERY_MPT) {
            auto it = mpts.find(r.in_mod);
            if (it == mpts.end())
                st = hw::CMD_BAD_RESOURCE;
            else
                std::memcpy(mb->out, &it->second, sizeof(hw::mpt_entry));
        } else if (r.opcode == hw::CMD_DESTROY_MPT) {
            auto it = mpts.find(r.in_mod);
            if (it == mpts.end())
                st = hw::CMD_BAD_RESOURCE;
            else if (it->second.type == hw::MPT_TYPE_MR && it->second.bound_mws)
                st = hw::CMD_BAD_STATE;
            else
                mpts.erase(it);
        }
        now_ += 1000;
        mb->done_token = token;
        mb->status = hw::CMD_DONE | st;
    }
    /// CMD_CREATE_MPT: MPT_CREATE needs an Invalid index; MPT_MODIFY a Valid MR without windows
    /// bound, whose HCA-maintained fields it keeps.
    hw::cmd_status create_mpt(uint32_t index, uint32_t mode, const uint8_t* in) {
        hw::mpt_entry e;
        std::memcpy(&e, in, sizeof e);
        if (index == 0 || hw::key_index(e.key) != index) return hw::CMD_BAD_PARAM;  // 0: reserved L_Key
        auto it = mpts.find(index);
        if (mode == hw::MPT_CREATE) {
            if (it != mpts.end()) return hw::CMD_BAD_STATE;
            mpts[index] = e;
            return hw::CMD_OK;
        }
        if (mode != hw::MPT_MODIFY) return hw::CMD_BAD_PARAM;
        if (it == mpts.end() || it->second.type != hw::MPT_TYPE_MR ||
            it->second.state != hw::MPT_STATE_VALID || it->second.bound_mws)
            return hw::CMD_BAD_STATE;
        e.bound_mws = it->second.bound_mws;
        e.mr_index = it->second.mr_index;
        e.qpn = it->second.qpn;
        e.mr_va = it->second.mr_va;
        it->second = e;
        return hw::CMD_OK;
    }
    uint64_t base_;
    std::vector<uint8_t> mem_;
    uint64_t mailbox_ = 0;
    uint64_t now_ = 0;
};

}  // namespace hcasim::test
