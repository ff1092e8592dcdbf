#include "model/system/node.h"

namespace hcasim {

node::node(const sc_core::sc_module_name& name, unsigned index, const cc_config* cc)
    : sc_module(name),
      memory("memory"),
      cpu("cpu", memory),
      pcie("pcie"),
      adapter("hca", index, cc),
      cable("link"),
      index_(index) {
    cpu.mem.bind(memory.cpu);
    cpu.mmio.bind(pcie.downstream_in);
    pcie.downstream_out.bind(adapter.doorbell.bar0);
    adapter.dma.pcie.bind(pcie.upstream_in);
    pcie.upstream_out.bind(memory.dma);
    adapter.port0.tx.bind(cable.in);
}

}  // namespace hcasim
