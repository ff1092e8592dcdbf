#include "model/hca/command_unit.h"

#include <cstring>

#include "model/core/hex.h"
#include "model/hca/cq_writer.h"
#include "model/hca/mcast_table.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/qp_control.h"
#include "model/hca/translation_unit.h"
#include "model/hca/wqe_fetcher.h"

namespace hcasim {

namespace {
/// A context or memory table access failed on PCIe (the table lies outside host memory): the
/// addresses INIT_HCA gave were bad.
constexpr uint8_t TABLE_ACCESS_FAILED = hw::CMD_BAD_PARAM;
}  // namespace

using namespace sc_core;

namespace {
constexpr uint8_t NO_QP = 255;
}

command_unit::command_unit(const sc_module_name& name, const sc_time& hca_clock, const hca_identity& id,
                           unsigned max_qps, unsigned max_cqs)
    : sc_module(name),
      dma("dma"),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      exec_cycles("exec_cycles", 200, "cycles", "cycles to execute one command besides its DMA",
                  {0, 100000000}),
      commands("commands", "commands executed"),
      failed("failed", "commands that completed with an error status"),
      ignored_busy("ignored_busy", "command doorbells ignored because a command was running"),
      id_(id),
      qp_state_(max_qps, NO_QP),
      cq_valid_(max_cqs, 0),
      qp_srq_(max_qps, 0) {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    exec_time_ = clock * double(exec_cycles.get());
    SC_THREAD(run);
}

void command_unit::doorbell(uint32_t token) {
    if (busy_) {
        ++ignored_busy;
        return;
    }
    busy_ = true;
    token_ = token;
    go_.notify(SC_ZERO_TIME);
}

void command_unit::run() {
    for (;;) {
        wait(go_);
        sc_time delay = SC_ZERO_TIME;
        // Header + input area in one read; output + status written back, status last.
        const uint32_t in_len = offsetof(hw::cmd_mailbox, out);
        uint8_t st = hw::CMD_OK;
        std::memset(&box_, 0, sizeof box_);
        if (!dma.read(mailbox_, &box_, in_len, delay)) {
            st = hw::CMD_BAD_PARAM;
        } else {
            wait(delay);
            delay = exec_time_;
            st = execute(box_, delay);
        }
        ++commands;
        if (st != hw::CMD_OK) ++failed;
        HCASIM_LOG(log_, info,
                   "command 0x" << std::hex << unsigned(box_.opcode) << " in_mod 0x" << box_.in_mod
                                << ": status 0x" << unsigned(st));
        const uint32_t done[2] = {hw::CMD_DONE | st, token_};
        // The output, then the status word the driver polls. If the mailbox is outside host
        // memory nothing can tell the driver: its command times out.
        if (!dma.write(mailbox_ + offsetof(hw::cmd_mailbox, out), box_.out, sizeof box_.out, delay) ||
            !dma.write(mailbox_ + offsetof(hw::cmd_mailbox, status), done, sizeof done, delay))
            HCASIM_LOG(log_, info,
                       "command 0x" << std::hex << unsigned(box_.opcode) << ": its mailbox at "
                                    << hex_address(mailbox_) << " is outside host memory");
        wait(delay);
        last_token_ = token_;
        busy_ = false;
    }
}

uint8_t command_unit::execute(hw::cmd_mailbox& m, sc_time& delay) {
    const uint32_t in_mod = m.in_mod;
    if (m.opcode != hw::CMD_QUERY_HCA && m.opcode != hw::CMD_INIT_HCA && m.opcode != hw::CMD_QUERY_PORT &&
        m.opcode != hw::CMD_QUERY_PKEY && m.opcode != hw::CMD_QUERY_GID && !initialised_)
        return hw::CMD_NOT_INIT;
    switch (m.opcode) {
    case hw::CMD_QUERY_HCA: std::memcpy(m.out, &id_.caps, sizeof id_.caps); return hw::CMD_OK;
    case hw::CMD_QUERY_PORT: {
        if (in_mod != 1) return hw::CMD_BAD_PARAM;
        hw::port_info p = id_.port;
        p.pkey_violations = pkeys_->pkey_violation_count();
        p.qkey_violations = pkeys_->qkey_violation_count();
        std::memcpy(m.out, &p, sizeof p);
        return hw::CMD_OK;
    }
    case hw::CMD_QUERY_PKEY: {
        if (in_mod != 1 || m.op_mod >= pkeys_->size()) return hw::CMD_BAD_PARAM;
        const uint16_t pkey = pkeys_->pkey(m.op_mod);
        std::memcpy(m.out, &pkey, sizeof pkey);
        return hw::CMD_OK;
    }
    case hw::CMD_QUERY_GID: {
        // One entry: GID 0 = the port's subnet prefix and GUID, fixed (C10-1, C10-2); no
        // command writes a GID.
        if (in_mod != 1 || m.op_mod >= id_.port.gid_table_len) return hw::CMD_BAD_PARAM;
        hw::gid_entry g{};
        if (m.op_mod == 0)
            for (int i = 0; i < 8; ++i) {
                g.raw[i] = uint8_t(id_.port.gid_prefix >> (56 - 8 * i));
                g.raw[8 + i] = uint8_t(id_.port.port_guid >> (56 - 8 * i));
            }
        std::memcpy(m.out, &g, sizeof g);
        return hw::CMD_OK;
    }
    case hw::CMD_INIT_HCA: {
        hw::init_hca_in t;
        std::memcpy(&t, m.in, sizeof t);
        if ((1ull << t.log_num_qps) > id_.caps.max_qp || (1ull << t.log_num_cqs) > id_.caps.max_cq ||
            (1ull << t.log_num_mpts) > id_.caps.max_mr || (1ull << t.log_num_mtts) > id_.caps.max_mtt ||
            t.log_num_eqs > 4)
            return hw::CMD_BAD_PARAM;
        if ((id_.caps.flags & hw::CAP_SRQ) && (1ull << t.log_num_srqs) > id_.caps.max_srq)
            return hw::CMD_BAD_PARAM;
        tables_ = t;
        initialised_ = true;
        xlate_->set_tables(t.mpt_base, 1u << t.log_num_mpts, t.mtt_base, 1ull << t.log_num_mtts,
                           1u << t.log_num_qps);
        fetcher_->set_qpc_table(t.qpc_base);
        engine_->set_qpc_table(t.qpc_base);
        cqw_->set_cqc_table(t.cqc_base);
        return hw::CMD_OK;
    }
    case hw::CMD_SET_PKEY: {
        // The management path (stand-in for the SMA's SubnSet(P_KeyTable)); no verb issues it
        // (C10-122).
        uint16_t pkey;
        std::memcpy(&pkey, m.in, sizeof pkey);
        return in_mod == 1 && pkeys_->set_pkey(m.op_mod, pkey) ? hw::CMD_OK : hw::CMD_BAD_PARAM;
    }
    case hw::CMD_CREATE_EQ: {
        hw::eq_context e;
        std::memcpy(&e, m.in, sizeof e);
        if (in_mod >= (1u << tables_.log_num_eqs) || e.log_size > 22) return hw::CMD_BAD_PARAM;
        e.valid = 1;
        if (!dma.write(tables_.eqc_base + in_mod * sizeof e, &e, sizeof e, delay)) return TABLE_ACCESS_FAILED;
        cqw_->load_eq(in_mod, e);
        return hw::CMD_OK;
    }
    case hw::CMD_CREATE_CQ: {
        hw::cq_context c;
        std::memcpy(&c, m.in, sizeof c);
        if (in_mod >= (1u << tables_.log_num_cqs) || (1ull << c.log_size) > id_.caps.max_cqe + 1ull)
            return hw::CMD_BAD_PARAM;
        if (cq_valid_[in_mod]) return hw::CMD_BAD_RESOURCE;
        c.cqn = in_mod;
        c.valid = 1;
        if (!dma.write(tables_.cqc_base + in_mod * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        cqw_->load_cq(in_mod, c);
        cq_valid_[in_mod] = 1;
        return hw::CMD_OK;
    }
    case hw::CMD_DESTROY_CQ: {
        if (in_mod >= cq_valid_.size() || !cq_valid_[in_mod]) return hw::CMD_BAD_RESOURCE;
        hw::cq_context c{};
        if (!dma.write(tables_.cqc_base + in_mod * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        cqw_->destroy_cq(in_mod);
        cq_valid_[in_mod] = 0;
        return hw::CMD_OK;
    }
    case hw::CMD_RESIZE_CQ: {
        if (in_mod >= cq_valid_.size() || !cq_valid_[in_mod]) return hw::CMD_BAD_RESOURCE;
        hw::resize_cq_in r;
        std::memcpy(&r, m.in, sizeof r);
        hw::cq_context c;
        cqw_->settle(delay);  // (impl=rtl: the completions queued before the command are written)
        cqw_->query_cq(in_mod, c);
        if (c.overrun) return hw::CMD_BAD_STATE;  // 10.8.5.2: a CQ in error cannot be resized
        if (r.log_size > 22 || (1ull << r.log_size) > id_.caps.max_cqe + 1ull) return hw::CMD_BAD_PARAM;
        // The move and the switch happen at one instant: a CQE the CQ writer adds after it goes
        // to the new ring, every earlier one is among those moved (10.2.6.3: none lost).
        if (!cqw_->resize_cq(in_mod, r.base, r.log_size, r.consumer, delay)) return hw::CMD_BAD_PARAM;
        cqw_->query_cq(in_mod, c);
        if (!dma.write(tables_.cqc_base + in_mod * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        hw::resize_cq_out o{};
        o.producer = c.producer;
        std::memcpy(m.out, &o, sizeof o);
        return hw::CMD_OK;
    }
    case hw::CMD_QUERY_CQ: {
        if (in_mod >= cq_valid_.size() || !cq_valid_[in_mod]) return hw::CMD_BAD_RESOURCE;
        hw::cq_context c;
        cqw_->settle(delay);
        cqw_->query_cq(in_mod, c);
        if (c.overrun) return hw::CMD_BAD_STATE;  // 10.8.5.2: a CQ in error cannot be queried
        std::memcpy(m.out, &c, sizeof c);
        return hw::CMD_OK;
    }
    case hw::CMD_CREATE_MPT: return create_mpt(in_mod, m.op_mod, m.in, delay);
    case hw::CMD_DESTROY_MPT: {
        if (in_mod == 0 || in_mod >= (1u << tables_.log_num_mpts))
            return hw::CMD_BAD_PARAM;  // index 0 is the reserved L_Key (o10-37.2.8)
        const xlate_status st = xlate_->destroy(in_mod, delay);
        return st == xlate_status::ok     ? hw::CMD_OK
               : st == xlate_status::busy ? hw::CMD_BAD_STATE
                                          : hw::CMD_BAD_RESOURCE;
    }
    case hw::CMD_QUERY_MPT: {
        hw::mpt_entry e;
        if (in_mod >= (1u << tables_.log_num_mpts) || !xlate_->read_mpt(in_mod, e, delay))
            return hw::CMD_BAD_PARAM;
        std::memcpy(m.out, &e, sizeof e);
        return hw::CMD_OK;
    }
    case hw::CMD_WRITE_MTT: {
        hw::write_mtt_in w;
        std::memcpy(&w, m.in, sizeof w);
        if (w.count > hw::WRITE_MTT_MAX || w.first_index + w.count > (1ull << tables_.log_num_mtts))
            return hw::CMD_BAD_PARAM;
        hw::mtt_entry entries[hw::WRITE_MTT_MAX];
        std::memcpy(entries, m.in + sizeof w, w.count * sizeof(hw::mtt_entry));
        if (!xlate_->write_mtt(w.first_index, entries, w.count, delay)) return TABLE_ACCESS_FAILED;
        return hw::CMD_OK;
    }
    case hw::CMD_CREATE_QP: {
        hw::qp_context c;
        std::memcpy(&c, m.in, sizeof c);
        if (in_mod >= (1u << tables_.log_num_qps) || in_mod >= qp_state_.size() || c.sq_log_stride < 6 ||
            c.rq_log_stride < 4 || c.sq_log_size > 16 || c.rq_log_size > 16)
            return hw::CMD_BAD_PARAM;
        if (qp_state_[in_mod] != NO_QP) return hw::CMD_BAD_RESOURCE;
        if (c.srqn && (!fetcher_->srq_valid(c.srqn - 1) || c.transport < hw::QPT_RC ||
                       c.transport > hw::QPT_UD || fetcher_->srq_ctx(c.srqn - 1).xrcd))
            return hw::CMD_BAD_RESOURCE;  // attached to an SRQ that does not exist (or an XRC SRQ)
        const bool xrc = c.transport == hw::QPT_XRC_INI || c.transport == hw::QPT_XRC_TGT;
        const bool rd = c.transport == hw::QPT_RD;
        if (!(c.transport >= hw::QPT_RC && c.transport <= hw::QPT_UD) && !xrc && !rd)
            return hw::CMD_BAD_PARAM;
        if (rd ? !(id_.caps.flags & hw::CAP_RD) || !c.rdd || c.srqn : c.rdd != 0)
            return hw::CMD_BAD_PARAM;  // an RD QP is in a reliable datagram domain; nothing else names one
        if (xrc && (!(id_.caps.flags & hw::CAP_XRC) || (c.transport == hw::QPT_XRC_TGT) != (c.xrcd != 0)))
            return hw::CMD_BAD_PARAM;  // a target is in an XRC domain; nothing else names one
        c.qpn = in_mod;
        c.state = hw::QPS_RESET;
        if (!dma.write(tables_.qpc_base + in_mod * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        qp_srq_[in_mod] = c.srqn;
        if (c.srqn) fetcher_->srq_attach(c.srqn - 1, +1);
        qp_state_[in_mod] = hw::QPS_RESET;
        fetcher_->load_qp(c);
        engine_->load_qp(c, 0, delay);
        return hw::CMD_OK;
    }
    case hw::CMD_MODIFY_QP: {
        hw::modify_qp_in in;
        std::memcpy(&in, m.in, sizeof in);
        return modify_qp(in_mod, m.op_mod, in, delay);
    }
    case hw::CMD_QUERY_QP: {
        if (in_mod >= qp_state_.size() || qp_state_[in_mod] == NO_QP) return hw::CMD_BAD_RESOURCE;
        hw::qp_context c;
        if (!dma.read(tables_.qpc_base + in_mod * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        c.state = engine_->state(in_mod);  // the engine may have moved it to Error itself
        engine_->current_psns(in_mod, c.sq_psn, c.rq_psn);
        c.sq_draining = engine_->draining(in_mod) ? 1 : 0;
        std::memcpy(m.out, &c, sizeof c);
        return hw::CMD_OK;
    }
    case hw::CMD_DESTROY_QP: {
        if (in_mod >= qp_state_.size() || qp_state_[in_mod] == NO_QP) return hw::CMD_BAD_RESOURCE;
        if (xlate_->windows_bound_to(in_mod))
            return hw::CMD_BAD_STATE;  // o10-37.2.29: type 2A windows are bound to it
        if (mcast_ && mcast_->attached(in_mod))
            return hw::CMD_BAD_STATE;  // o10-2.2.3: still attached to a multicast group
        hw::qp_context c{};
        if (!dma.write(tables_.qpc_base + in_mod * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        qp_state_[in_mod] = NO_QP;
        if (qp_srq_[in_mod]) fetcher_->srq_attach(qp_srq_[in_mod] - 1, -1);
        qp_srq_[in_mod] = 0;
        fetcher_->set_state(in_mod, hw::QPS_RESET);
        engine_->destroy_qp(in_mod);
        pkeys_->unbind_qp(in_mod);
        return hw::CMD_OK;
    }
    case hw::CMD_ATTACH_MCAST:
    case hw::CMD_DETACH_MCAST: return mcast(in_mod, m.opcode == hw::CMD_ATTACH_MCAST, m.in, delay);
    case hw::CMD_CREATE_SRQ:
    case hw::CMD_MODIFY_SRQ:
    case hw::CMD_QUERY_SRQ:
    case hw::CMD_DESTROY_SRQ: return srq_command(m, delay);
    case hw::CMD_CREATE_EEC:
    case hw::CMD_MODIFY_EEC:
    case hw::CMD_QUERY_EEC:
    case hw::CMD_DESTROY_EEC: return eec_command(m, delay);
    default: return hw::CMD_BAD_OPCODE;
    }
}

uint8_t command_unit::eec_command(hw::cmd_mailbox& m, sc_time& delay) {
    if (!(id_.caps.flags & hw::CAP_RD)) return hw::CMD_BAD_OPCODE;
    const uint32_t eecn = m.in_mod;
    if (eecs_.empty()) eecs_.resize(id_.caps.max_ee);
    if (eecn == 0 || eecn >= eecs_.size()) return hw::CMD_BAD_PARAM;  // EECN 0 is never used
    hw::eec_context& cur = eecs_[eecn];
    const bool exists = cur.eecn != 0;
    switch (m.opcode) {
    case hw::CMD_CREATE_EEC: {
        hw::eec_context c;
        std::memcpy(&c, m.in, sizeof c);
        if (exists) return hw::CMD_BAD_RESOURCE;
        if (!c.rdd) return hw::CMD_BAD_PARAM;  // an EE context is in a reliable datagram domain
        c.eecn = eecn;
        c.state = hw::QPS_RESET;
        cur = c;
        engine_->load_eec(c, 0, delay);
        return hw::CMD_OK;
    }
    case hw::CMD_MODIFY_EEC: {
        if (!exists) return hw::CMD_BAD_RESOURCE;
        hw::modify_eec_in in;
        std::memcpy(&in, m.in, sizeof in);
        const uint32_t new_state = m.op_mod;
        if (new_state > hw::QPS_ERR || new_state == hw::QPS_SQE ||
            ((in.attr_mask & hw::QP_ATTR_CUR_STATE) && in.cur_state != engine_->eec_state(eecn)))
            return hw::CMD_BAD_STATE;
        hw::eec_context c = in.ctx;
        c.eecn = eecn;
        c.rdd = cur.rdd;  // the domain is fixed at create (o10-7)
        c.state = uint8_t(new_state);
        if (new_state != hw::QPS_RESET && new_state != hw::QPS_ERR &&
            (c.port != 1 || c.pkey_index >= pkeys_->size() ||
             (new_state >= hw::QPS_RTR && hw::mtu_bytes(c.mtu) == 0) || c.alt_port > 1 ||
             (c.alt_port && c.alt_pkey_index >= pkeys_->size())))
            return hw::CMD_BAD_PARAM;
        if (c.alt_port && new_state != hw::QPS_RESET && engine_->eec_state(eecn) != hw::QPS_RESET) {
            // Automatic path migration (o10-23): as for QPs (CMD_MODIFY_QP), what this command
            // does not set stays as the engine has it, so a migration is not undone.
            hw::eec_context now = c;
            engine_->eec_paths(eecn, now);
            if (!(in.attr_mask & hw::QP_ATTR_PATH_MIG_STATE)) c.path_mig_state = now.path_mig_state;
            constexpr uint32_t PATHS = hw::QP_ATTR_AV | hw::QP_ATTR_ALT_PATH | hw::QP_ATTR_PKEY_INDEX |
                                       hw::QP_ATTR_TIMEOUT | hw::QP_ATTR_PORT;
            if (!(in.attr_mask & PATHS)) {
                const uint8_t mig = c.path_mig_state;
                engine_->eec_paths(eecn, c);
                c.path_mig_state = mig;
            }
        }
        cur = c;
        engine_->load_eec(c, in.attr_mask, delay);
        return hw::CMD_OK;
    }
    case hw::CMD_QUERY_EEC: {
        if (!exists) return hw::CMD_BAD_RESOURCE;
        hw::eec_context c = cur;
        c.state = engine_->eec_state(eecn);  // the engine may have moved it to Error itself
        engine_->eec_psns(eecn, c.sq_psn, c.rq_psn);
        engine_->eec_paths(eecn, c);  // a migration swapped them (o10-23)
        std::memcpy(m.out, &c, sizeof c);
        return hw::CMD_OK;
    }
    case hw::CMD_DESTROY_EEC: {
        if (!exists) return hw::CMD_BAD_RESOURCE;
        cur = hw::eec_context{};
        engine_->destroy_eec(eecn);
        return hw::CMD_OK;
    }
    default: return hw::CMD_BAD_OPCODE;
    }
}

uint8_t command_unit::srq_command(hw::cmd_mailbox& m, sc_time& delay) {
    if (!(id_.caps.flags & hw::CAP_SRQ)) return hw::CMD_BAD_OPCODE;
    const uint32_t srqn = m.in_mod;
    if (srqn >= (1ull << tables_.log_num_srqs) || srqn >= id_.caps.max_srq) return hw::CMD_BAD_PARAM;
    const uint64_t at = tables_.srqc_base + uint64_t(srqn) * sizeof(hw::srq_context);
    switch (m.opcode) {
    case hw::CMD_CREATE_SRQ: {
        hw::srq_context c;
        std::memcpy(&c, m.in, sizeof c);
        if (fetcher_->srq_valid(srqn)) return hw::CMD_BAD_RESOURCE;
        if (c.log_size > 15 || c.log_stride < 4 || c.log_stride > MAX_SRQ_LOG_STRIDE || c.max_wr == 0 ||
            c.max_wr >= (1u << c.log_size) || c.max_wr > id_.caps.max_srq_wr || c.limit > c.max_wr ||
            (c.xrcd && !(id_.caps.flags & hw::CAP_XRC)) || (!c.xrcd && c.cqn))
            return hw::CMD_BAD_PARAM;
        c.srqn = srqn;
        c.valid = 1;
        c.state = hw::SRQS_OK;
        c.producer = c.consumer = 0;
        c.attached = 0;
        if (!dma.write(at, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        fetcher_->create_srq(c);
        return hw::CMD_OK;
    }
    case hw::CMD_MODIFY_SRQ: {
        if (!fetcher_->srq_valid(srqn)) return hw::CMD_BAD_RESOURCE;
        hw::modify_srq_in in;
        std::memcpy(&in, m.in, sizeof in);
        const uint8_t st = fetcher_->modify_srq(srqn, m.op_mod, in, delay);
        if (st == hw::CMD_OK) {
            const hw::srq_context c = fetcher_->srq_ctx(srqn);
            if (!dma.write(at, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        }
        return st;
    }
    case hw::CMD_QUERY_SRQ: {
        if (!fetcher_->srq_valid(srqn)) return hw::CMD_BAD_RESOURCE;
        const hw::srq_context c = fetcher_->srq_ctx(srqn);
        if (c.state == hw::SRQS_ERR) return hw::CMD_BAD_STATE;  // 10.2.9.5
        std::memcpy(m.out, &c, sizeof c);
        return hw::CMD_OK;
    }
    case hw::CMD_DESTROY_SRQ: {
        if (!fetcher_->srq_valid(srqn)) return hw::CMD_BAD_RESOURCE;
        if (fetcher_->srq_ctx(srqn).attached)
            return hw::CMD_BAD_STATE;  // o10-10.2.3: QPs are still associated with it
        hw::srq_context c{};
        if (!dma.write(at, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
        fetcher_->destroy_srq(srqn);  // o10-10.2.4, o10-10.2.5: outstanding WQEs go with it
        return hw::CMD_OK;
    }
    default: return hw::CMD_BAD_OPCODE;
    }
}

uint8_t command_unit::mcast(uint32_t qpn, bool attach, const uint8_t* in, sc_time& delay) {
    if (!mcast_ || qpn >= qp_state_.size() || qp_state_[qpn] == NO_QP) return hw::CMD_BAD_RESOURCE;
    hw::mcast_in g;
    std::memcpy(&g, in, sizeof g);
    if (!mcast_table::is_mlid(g.mlid) || g.mgid[0] != 0xFF) return hw::CMD_BAD_PARAM;
    hw::qp_context c;  // only UD QPs join groups (o10-34)
    if (!dma.read(tables_.qpc_base + qpn * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
    if (c.transport != hw::QPT_UD) return hw::CMD_BAD_PARAM;
    const mcast_groups::result r =
        attach ? mcast_->attach(qpn, g.mgid, g.mlid) : mcast_->detach(qpn, g.mgid, g.mlid);
    switch (r) {
    case mcast_groups::result::ok:
    case mcast_groups::result::already_attached: return hw::CMD_OK;
    case mcast_groups::result::no_space: return hw::CMD_BAD_RESOURCE;
    case mcast_groups::result::not_attached: return hw::CMD_BAD_PARAM;
    }
    return hw::CMD_BAD_PARAM;
}

uint8_t command_unit::create_mpt(uint32_t index, uint32_t mode, const uint8_t* in, sc_time& delay) {
    if (index == 0 || index >= (1u << tables_.log_num_mpts) || mode > hw::MPT_MODIFY)
        return hw::CMD_BAD_PARAM;  // index 0 is the reserved L_Key
    hw::mpt_entry e;
    std::memcpy(&e, in, sizeof e);
    const bool mr = e.type == hw::MPT_TYPE_MR;
    if (hw::key_index(e.key) != index || e.type > hw::MPT_TYPE_MW2B || e.state > hw::MPT_STATE_VALID ||
        e.state == hw::MPT_STATE_INVALID)
        return hw::CMD_BAD_PARAM;
    if (mr &&
        ((e.flags & hw::MPT_BLOCK_LIST) ? e.block_size == 0 : e.log_page_size < 12 || e.log_page_size > 30))
        return hw::CMD_BAD_PARAM;
    if (mr && (e.mtt_count > e.mtt_reserved || e.mtt_base + e.mtt_reserved > (1ull << tables_.log_num_mtts)))
        return hw::CMD_BAD_PARAM;
    if (e.type == hw::MPT_TYPE_MW2A && !(id_.caps.flags & hw::CAP_MW_TYPE2A)) return hw::CMD_BAD_PARAM;
    if (e.type == hw::MPT_TYPE_MW2B && !(id_.caps.flags & hw::CAP_MW_TYPE2B)) return hw::CMD_BAD_PARAM;
    hw::mpt_entry old;
    if (!xlate_->read_mpt(index, old, delay)) return hw::CMD_BAD_PARAM;
    if (mode == hw::MPT_CREATE) {
        if (old.state != hw::MPT_STATE_INVALID) return hw::CMD_BAD_RESOURCE;
        e.bound_mws = 0;
        if (!mr) e.state = hw::MPT_STATE_FREE;  // a new window is unbound
    } else {
        // Reregister (and shared-source marking): a Valid region without windows, in one step.
        if (!mr || old.type != hw::MPT_TYPE_MR || old.state != hw::MPT_STATE_VALID ||
            e.state != hw::MPT_STATE_VALID)
            return hw::CMD_BAD_STATE;
        if (old.bound_mws) return hw::CMD_BAD_STATE;
        e.bound_mws = old.bound_mws;
    }
    e.mr_index = 0;
    e.qpn = 0;
    e.mr_va = 0;
    if (!xlate_->write_mpt(index, e, delay)) return TABLE_ACCESS_FAILED;
    return hw::CMD_OK;
}

uint8_t command_unit::modify_qp(uint32_t qpn, uint32_t new_state, const hw::modify_qp_in& in,
                                sc_time& delay) {
    if (qpn >= qp_state_.size() || qp_state_[qpn] == NO_QP) return hw::CMD_BAD_RESOURCE;
    if (new_state > hw::QPS_ERR ||
        ((in.attr_mask & hw::QP_ATTR_CUR_STATE) && in.cur_state != engine_->state(qpn)))
        return hw::CMD_BAD_STATE;
    if (new_state == hw::QPS_RESET && xlate_->windows_bound_to(qpn))
        return hw::CMD_BAD_STATE;  // o10-37.2.29: type 2A windows are bound to it
    // The legality of the transition and its attributes is the firmware's job (it owns the
    // verbs semantics); the hardware checks that the context is usable.
    hw::qp_context c = in.ctx;
    c.qpn = qpn;
    c.srqn = qp_srq_[qpn];  // the SRQ association is fixed at create
    c.state = uint8_t(new_state);
    if (new_state != hw::QPS_RESET && new_state != hw::QPS_ERR) {
        if (c.port != 1 || c.pkey_index >= pkeys_->size() ||
            (new_state >= hw::QPS_RTR && hw::mtu_bytes(c.mtu) == 0))
            return hw::CMD_BAD_PARAM;
        // An XRC target has no CQs: its messages complete on their XRC SRQs' CQs.
        if (c.transport != hw::QPT_XRC_TGT && (!cqw_->cq_valid(c.send_cqn) || !cqw_->cq_valid(c.recv_cqn)))
            return hw::CMD_BAD_RESOURCE;
    }
    if (c.alt_port && new_state != hw::QPS_RESET && qp_state_[qpn] != hw::QPS_RESET) {
        // Automatic path migration: the engine moves the path migration state and swaps the
        // paths itself (in the QPC entry). What this command does not set stays as the HCA has
        // it, so a migration between the firmware's QUERY_QP and this command is not undone.
        hw::qp_context now;
        if (!dma.read(tables_.qpc_base + qpn * sizeof now, &now, sizeof now, delay))
            return TABLE_ACCESS_FAILED;
        if (!(in.attr_mask & hw::QP_ATTR_PATH_MIG_STATE)) c.path_mig_state = now.path_mig_state;
        constexpr uint32_t PATHS = hw::QP_ATTR_AV | hw::QP_ATTR_ALT_PATH | hw::QP_ATTR_PKEY_INDEX |
                                   hw::QP_ATTR_TIMEOUT | hw::QP_ATTR_PORT;
        if (!(in.attr_mask & PATHS)) {
            hw::copy_path(hw::primary_path(c), hw::primary_path(now));
            hw::copy_path(hw::alternate_path(c), hw::alternate_path(now));
        }
    }
    if (!dma.write(tables_.qpc_base + qpn * sizeof c, &c, sizeof c, delay)) return TABLE_ACCESS_FAILED;
    qp_state_[qpn] = uint8_t(new_state);
    // An RD QP has no P_Key of its own: its packets are checked against their EE context's.
    if (new_state == hw::QPS_RESET || c.transport == hw::QPT_RD)
        pkeys_->unbind_qp(qpn);
    else if (new_state != hw::QPS_ERR)
        pkeys_->bind_qp(qpn, c.pkey_index);
    fetcher_->load_qp(c);
    engine_->load_qp(c, in.attr_mask, delay);
    return hw::CMD_OK;
}

}  // namespace hcasim
