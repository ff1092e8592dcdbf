// Multicast group table: which UD QPs of this HCA are attached to which multicast group (MGID +
// MLID), written by the command unit (CMD_ATTACH_MCAST / CMD_DETACH_MCAST) and read by the
// transport engine for every multicast packet it receives (fan-out to each attached QP). Sizes
// are parameters; the storage is allocated once, a lookup scans the groups without allocating.
// A group's first attachment and last detachment are reported to the fabric (on_change), which
// stands in for the subnet administrator's multicast membership join.
#pragma once
#include <systemc>

#include <cstdint>
#include <functional>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"

namespace hcasim {

/// What the transport engine needs of the multicast groups: the QPs a datagram fans out to.
class mcast_lookup {
public:
    virtual ~mcast_lookup() = default;
    virtual const uint32_t* lookup(uint16_t mlid, const uint8_t* mgid, unsigned& n) const = 0;
};

/// What the command unit needs of them: CMD_ATTACH_MCAST / CMD_DETACH_MCAST, and whether a QP
/// is still attached (CMD_DESTROY_QP).
class mcast_groups {
public:
    virtual ~mcast_groups() = default;
    /// Result of attach / detach.
    enum class result { ok, no_space, not_attached, already_attached };
    virtual result attach(uint32_t qpn, const uint8_t (&mgid)[16], uint16_t mlid) = 0;
    virtual result detach(uint32_t qpn, const uint8_t (&mgid)[16], uint16_t mlid) = 0;
    virtual unsigned attached(uint32_t qpn) const = 0;
};

class mcast_table final : public sc_core::sc_module, public mcast_lookup, public mcast_groups {
public:
    param<unsigned> max_groups;         ///< multicast groups (QUERY_HCA max_mcast_grp)
    param<unsigned> max_qps_per_group;  ///< QPs attached to one group (max_mcast_qp_attach)

    counter attaches, detaches;

    mcast_table(const sc_core::sc_module_name& name, unsigned max_qps);

    result attach(uint32_t qpn, const uint8_t (&mgid)[16], uint16_t mlid) override;
    result detach(uint32_t qpn, const uint8_t (&mgid)[16], uint16_t mlid) override;
    /// Groups the QP is attached to.
    unsigned attached(uint32_t qpn) const override { return qpn < per_qp_.size() ? per_qp_[qpn] : 0; }
    /// The QPs attached to the group (mlid, mgid), or nullptr with n = 0; valid until the next
    /// attach/detach.
    const uint32_t* lookup(uint16_t mlid, const uint8_t* mgid, unsigned& n) const override;
    /// Called with (mlid, true) when a group gets its first QP, (mlid, false) when it loses its last.
    void on_change(std::function<void(uint16_t, bool)> f) { on_change_ = std::move(f); }

    static bool is_mlid(uint16_t lid) { return lid >= 0xC000 && lid != 0xFFFF; }

private:
    struct group {
        bool used = false;
        uint16_t mlid = 0;
        uint8_t mgid[16] = {};
        unsigned n = 0;
    };
    int find(uint16_t mlid, const uint8_t* mgid) const;

    std::vector<group> groups_;
    std::vector<uint32_t> qpns_;    // max_groups x max_qps_per_group
    std::vector<uint16_t> per_qp_;  // groups each QPN is attached to
    std::function<void(uint16_t, bool)> on_change_;
};

}  // namespace hcasim
