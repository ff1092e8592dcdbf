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

    node(const sc_core::sc_module_name& name, unsigned index);

    unsigned index() const { return index_; }
    /// LID of this node's port: index + 1.
    uint16_t lid() const { return uint16_t(index_ + 1); }

private:
    unsigned index_;
};

}  // namespace hcasim
