// Command unit: executes commands from the mailbox in host memory (tlm_if/commands.h). It owns
// the context tables in host memory (writes QPC/CQC/EQC/MPT/MTT entries by DMA) and loads each
// unit's on-chip slice of a context: WQE fetcher (rings), transport engine (transport state),
// translation unit (table bases, cache invalidation), CQ writer (CQ/EQ), P_Key checker.
#pragma once
#include <systemc>

#include <vector>

#include "model/core/log.h"
#include "model/core/param.h"
#include "model/core/unit_clock.h"
#include "model/core/stats.h"
#include "model/hca/dma_port.h"
#include "tlm_if/commands.h"

namespace hcasim {

class fetch_control;
class qp_control;
class memory_tables;
class cq_control;
class pkey_control;
class mcast_groups;

/// What QUERY_HCA and QUERY_PORT report; filled from the HCA's parameters.
struct hca_identity {
    hw::hca_caps caps{};
    hw::port_info port{};
};

/// What the doorbell unit hands on: the command registers (mailbox address, doorbell, status).
class command_mailbox {
public:
    virtual ~command_mailbox() = default;
    virtual void set_mailbox(uint64_t pa) = 0;
    virtual uint64_t mailbox() const = 0;
    virtual void doorbell(uint32_t token) = 0;
    virtual uint32_t status() const = 0;
};

class command_unit final : public sc_core::sc_module, public command_mailbox {
public:
    dma_port dma;

    param<double> clock_mhz;      ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> exec_cycles;  ///< cycles to execute one command (besides its DMA)

    counter commands, failed, ignored_busy;
    module_log log_;  ///< info: every command and its status; a mailbox it cannot write

    SC_HAS_PROCESS(command_unit);
    command_unit(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock,
                 const hca_identity& id, unsigned max_qps, unsigned max_cqs);

    void bind(fetch_control& f, qp_control& t, memory_tables& x, cq_control& c, pkey_control& k) {
        fetcher_ = &f;
        engine_ = &t;
        xlate_ = &x;
        cqw_ = &c;
        pkeys_ = &k;
    }
    /// The multicast group table (CMD_ATTACH_MCAST / CMD_DETACH_MCAST).
    void bind_mcast(mcast_groups& m) { mcast_ = &m; }

    // From the doorbell unit.
    void set_mailbox(uint64_t pa) override { mailbox_ = pa; }
    uint64_t mailbox() const override { return mailbox_; }
    void doorbell(uint32_t token) override;
    /// REG_CMD_STATUS: bit 0 busy, bits 31..8 token of the last command.
    uint32_t status() const override { return (last_token_ << 8) | (busy_ ? 1u : 0u); }

private:
    void run();
    uint8_t execute(hw::cmd_mailbox& m, sc_core::sc_time& delay);
    uint8_t create_mpt(uint32_t index, uint32_t mode, const uint8_t* in, sc_core::sc_time& delay);
    /// CMD_CREATE/MODIFY/QUERY/DESTROY_SRQ (the SRQ state lives in the WQE fetcher).
    uint8_t srq_command(hw::cmd_mailbox& m, sc_core::sc_time& delay);
    /// CMD_CREATE/MODIFY/QUERY/DESTROY_EEC (CAP_RD; the EE contexts live in the transport engine).
    uint8_t eec_command(hw::cmd_mailbox& m, sc_core::sc_time& delay);
    uint8_t mcast(uint32_t qpn, bool attach, const uint8_t* in, sc_core::sc_time& delay);
    uint8_t modify_qp(uint32_t qpn, uint32_t new_state, const hw::modify_qp_in& in, sc_core::sc_time& delay);

    fetch_control* fetcher_ = nullptr;
    qp_control* engine_ = nullptr;
    memory_tables* xlate_ = nullptr;
    cq_control* cqw_ = nullptr;
    pkey_control* pkeys_ = nullptr;
    mcast_groups* mcast_ = nullptr;

    const hca_identity& id_;  // owned by the hca; port facts are set after link negotiation
    hw::init_hca_in tables_{};
    bool initialised_ = false;
    uint64_t mailbox_ = 0;
    bool busy_ = false;
    uint32_t token_ = 0, last_token_ = 0;
    sc_core::sc_event go_;
    sc_core::sc_time exec_time_;
    std::vector<uint8_t> qp_state_;  // HCA's view of each QP's state (255 = no QP)
    std::vector<uint8_t> cq_valid_;
    std::vector<uint32_t> qp_srq_;       // SRQ number + 1 each QP was created with (0: none)
    hw::cmd_mailbox box_;                // scratch copy of the mailbox
    std::vector<hw::eec_context> eecs_;  // EE contexts as created and modified (eecn 0: none)
};

}  // namespace hcasim
