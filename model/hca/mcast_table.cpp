#include "model/hca/mcast_table.h"

#include <cstring>

namespace hcasim {

mcast_table::mcast_table(const sc_core::sc_module_name& name, unsigned max_qps)
    : sc_module(name),
      max_groups("max_groups", 64, "groups", "multicast groups the HCA holds (QUERY_HCA max_mcast_grp)",
                 {1, 4096}),
      max_qps_per_group("max_qps_per_group", 16, "QPs",
                        "QPs attached to one multicast group (max_mcast_qp_attach)", {1, 4096}),
      attaches("attaches", "QPs attached to multicast groups"),
      detaches("detaches", "QPs detached from multicast groups"),
      per_qp_(max_qps, 0) {
    groups_.resize(max_groups);
    qpns_.resize(size_t(max_groups.get()) * max_qps_per_group.get());
}

int mcast_table::find(uint16_t mlid, const uint8_t* mgid) const {
    for (size_t g = 0; g < groups_.size(); ++g)
        if (groups_[g].used && groups_[g].mlid == mlid && std::memcmp(groups_[g].mgid, mgid, 16) == 0)
            return int(g);
    return -1;
}

mcast_table::result mcast_table::attach(uint32_t qpn, const uint8_t (&mgid)[16], uint16_t mlid) {
    if (qpn >= per_qp_.size()) return result::no_space;
    int g = find(mlid, mgid);
    if (g < 0) {
        for (size_t i = 0; i < groups_.size() && g < 0; ++i)
            if (!groups_[i].used) g = int(i);
        if (g < 0) return result::no_space;
        group& ng = groups_[size_t(g)];
        ng.used = true;
        ng.mlid = mlid;
        std::memcpy(ng.mgid, mgid, 16);
        ng.n = 0;
    }
    group& gr = groups_[size_t(g)];
    uint32_t* q = &qpns_[size_t(g) * max_qps_per_group.get()];
    for (unsigned i = 0; i < gr.n; ++i)
        if (q[i] == qpn) return result::already_attached;
    if (gr.n == max_qps_per_group.get()) return result::no_space;
    q[gr.n++] = qpn;
    ++per_qp_[qpn];
    ++attaches;
    if (gr.n == 1 && on_change_) on_change_(mlid, true);
    return result::ok;
}

mcast_table::result mcast_table::detach(uint32_t qpn, const uint8_t (&mgid)[16], uint16_t mlid) {
    const int g = find(mlid, mgid);
    if (g < 0 || qpn >= per_qp_.size()) return result::not_attached;
    group& gr = groups_[size_t(g)];
    uint32_t* q = &qpns_[size_t(g) * max_qps_per_group.get()];
    for (unsigned i = 0; i < gr.n; ++i) {
        if (q[i] != qpn) continue;
        for (unsigned k = i + 1; k < gr.n; ++k)  // keep attach order (delivery order)
            q[k - 1] = q[k];
        --gr.n;
        --per_qp_[qpn];
        ++detaches;
        if (gr.n == 0) {
            gr.used = false;
            if (on_change_) on_change_(mlid, false);
        }
        return result::ok;
    }
    return result::not_attached;
}

const uint32_t* mcast_table::lookup(uint16_t mlid, const uint8_t* mgid, unsigned& n) const {
    const int g = find(mlid, mgid);
    if (g < 0) {
        n = 0;
        return nullptr;
    }
    n = groups_[size_t(g)].n;
    return &qpns_[size_t(g) * max_qps_per_group.get()];
}

}  // namespace hcasim
