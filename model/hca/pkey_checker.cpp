#include "model/hca/pkey_checker.h"

#include "tlm_if/wire/mad.h"

namespace hcasim {

pkey_checker::pkey_checker(const sc_core::sc_module_name& name, unsigned max_qps)
    : sc_module(name),
      table_len("table_len", 128, "entries", "P_Key table entries per port (1..65535)"),
      checked("checked", "packets checked"),
      violations("violations", "packets dropped for a P_Key mismatch (not saturating; see port_info.pkey_violations)"),
      qkey_violations("qkey_violations",
                      "packets dropped for a Q_Key mismatch (not saturating; see port_info.qkey_violations)"),
      qp_index_(max_qps, -1) {
    table_len.range(1, 65535);  // C10-121; port_info.pkey_table_len is 16 bits
    table_.assign(table_len, 0);
    full_.assign(0x8000, 0);
    limited_.assign(0x8000, 0);
    table_[0] = 0xFFFF;  // default partition, full member
    full_[0x7FFF] = 1;
}

bool pkey_checker::set_pkey(unsigned index, uint16_t pkey) {
    if (index >= table_.size())
        return false;
    auto count = [&](uint16_t key, int d) {
        if (key & 0x7FFF)  // invalid keys (low 15 bits zero) match nothing
            ((key & 0x8000) ? full_ : limited_)[key & 0x7FFF] += uint16_t(d);
    };
    count(table_[index], -1);
    table_[index] = pkey;
    count(pkey, +1);
    return true;
}

void pkey_checker::bind_qp(uint32_t qpn, uint16_t pkey_index) {
    if (qpn < qp_index_.size())
        qp_index_[qpn] = pkey_index < table_.size() ? pkey_index : -1;
}

void pkey_checker::unbind_qp(uint32_t qpn) {
    if (qpn < qp_index_.size())
        qp_index_[qpn] = -1;
}

int32_t pkey_checker::find_match(uint16_t pkey) const {
    // A linear scan: only QP1 (management traffic) needs it.
    for (size_t i = 0; i < table_.size(); ++i)
        if (match(pkey, table_[i]))
            return int32_t(i);
    return -1;
}

void pkey_checker::receive(const rx_packet& p) {
    ++checked;
    const uint32_t qpn = p.h.b.dest_qp;
    if (qpn == SMI_QPN) {
        // C10-131: QP0 takes any P_Key (M_Keys protect management, not partitions).
        // C10-12: subnet management MADs are the SMA's, below the verbs: they never reach the
        // transport engine, so never a consumer's QP0 WQEs or CQEs.
        if (smi_ && p.h.b.opcode == wire::op::UD_SEND_ONLY && wire::is_subn_mgmt(p.payload, p.payload_len)) {
            smi_->receive(p);
            return;
        }
        if (sink_)
            sink_->receive(p);
        return;
    }
    if (qpn == GSI_QPN) {
        // C10-132: QP1 takes a P_Key that matches any valid entry; the entry's index goes with
        // the packet (the CQE's pkey_index).
        const int32_t idx = any_match(p.h.b.pkey) ? find_match(p.h.b.pkey) : -1;
        if (idx < 0) {
            pkey_violation(p, 0);
            return;
        }
        if (sink_) {
            rx_packet q = p;
            q.pkey_index = uint16_t(idx);
            sink_->receive(q);
        }
        return;
    }
    if (p.h.l.dlid >= 0xC000 && p.h.l.dlid != 0xFFFF) {
        // Multicast: the port takes a P_Key some valid entry of its table matches (else it is
        // a violation); each attached QP's own entry is matched again when the transport
        // engine delivers the datagram to it.
        if (!any_match(p.h.b.pkey)) {
            // The entry it was refused by: a limited member of its partition if the table has
            // one (both limited: the SMA's multicast trap suppression applies), else none.
            const uint16_t k = p.h.b.pkey & 0x7FFF;
            pkey_violation(p, k && limited_[k] ? k : 0);
            return;
        }
        if (sink_)
            sink_->receive(p);
        return;
    }
    const int32_t idx = qpn < qp_index_.size() ? qp_index_[qpn] : -1;
    // A QPN with no binding is no QP of ours in a receiving state: the transport engine
    // drops it and counts it there.
    if (idx >= 0 && !match(p.h.b.pkey, table_[idx])) {
        pkey_violation(p, table_[idx]);
        return;
    }
    if (sink_)
        sink_->receive(p);
}

}  // namespace hcasim
