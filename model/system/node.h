// One host: memory, CPU, PCIe link, HCA, and the cable leaving its port.
#pragma once
#include <systemc>

#include "model/fabric/link.h"
#include "model/hca/hca.h"
#include "model/host/host_cpu.h"
#include "model/host/host_memory.h"
#include "model/pcie/pcie_link.h"

namespace hcasim {

class node : public sc_core::sc_module {
public:
    host_memory memory;
    host_cpu cpu;
    pcie_link pcie;
    hca adapter;
    link cable;  ///< this node's transmit direction; its speed/width are the port's capability

    /// `cc`: the fabric's congestion control settings for the HCA (nullptr: off).
    node(const sc_core::sc_module_name& name, unsigned index, const cc_config* cc = nullptr);

    unsigned index() const { return index_; }
    /// Base LID of this node's port: (index + 1) * 2^LMC (fabric.lmc), index + 1 with LMC 0.
    uint16_t lid() const { return uint16_t((index_ + 1) << lmc_); }
    /// The port's LID mask count: it owns LIDs lid() .. lid() + 2^lmc - 1 (C10-3).
    uint8_t lmc() const { return lmc_; }
    /// Set by the machine (the subnet manager's LID assignment) before the links come up.
    void set_lmc(uint8_t lmc) { lmc_ = uint8_t(lmc & 7); }

private:
    unsigned index_;
    uint8_t lmc_ = 0;
};

}  // namespace hcasim
