#include "model/hca/pkey_checker.h"

namespace hcasim {

pkey_checker::pkey_checker(const sc_core::sc_module_name& name, unsigned max_qps)
    : sc_module(name),
      table_len("table_len", 128, "entries", "P_Key table entries per port"),
      checked("checked", "packets checked"),
      violations("violations", "packets dropped for a P_Key mismatch (P_Key violation counter)"),
      qp_index_(max_qps, -1) {
    table_len.range(1, 32768);
    table_.assign(table_len, 0);
    table_[0] = 0xFFFF;  // default partition, full member
}

bool pkey_checker::set_pkey(unsigned index, uint16_t pkey) {
    if (index >= table_.size())
        return false;
    table_[index] = pkey;
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

void pkey_checker::receive(const rx_packet& p) {
    ++checked;
    const uint32_t qpn = p.h.b.dest_qp;
    const int32_t idx = qpn < qp_index_.size() ? qp_index_[qpn] : -1;
    // A QPN with no binding is no QP of ours in a receiving state: the transport engine
    // drops it and counts it there.
    if (idx >= 0 && !match(p.h.b.pkey, table_[idx])) {
        ++violations;
        return;
    }
    if (sink_)
        sink_->receive(p);
}

}  // namespace hcasim
