// The whole machine: the fabric (topology parameters, the switch if any) and N nodes, back to
// back (2 nodes) or on one switch, as configured.
#pragma once
#include <systemc>

#include <memory>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/fabric/ib_switch.h"
#include "model/fabric/subnet_manager.h"
#include "model/system/node.h"

namespace hcasim {

class fabric : public sc_core::sc_module {
public:
    param<unsigned> nodes;          ///< number of hosts
    param<std::string> topology;    ///< auto|back_to_back|switch
    param<unsigned> lmc;            ///< LID mask count of every port (0..7), as OpenSM's `lmc`
    param<bool> subnet_manager;     ///< switch topology: a subnet manager on an extra switch port

    std::unique_ptr<ib_switch> sw;  ///< "fabric.switch" when the topology has one
    std::unique_ptr<hcasim::subnet_manager> sm;  ///< "fabric.sm": on switch port `nodes`, LID nodes + 1

    explicit fabric(sc_core::sc_module_name name = "fabric");
    bool has_switch() const { return bool(sw); }
    bool has_sm() const { return bool(sm); }
};

/// Builds the fabric module and the nodes "node0".."nodeN-1" (top-level modules, so their
/// parameters are `node0.pcie.lanes` etc.) and cables them.
class machine {
public:
    machine();
    fabric net;
    std::vector<std::unique_ptr<node>> hosts;
    node& at(unsigned i) { return *hosts.at(i); }
    size_t size() const { return hosts.size(); }
};

}  // namespace hcasim
