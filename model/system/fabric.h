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
#include "model/fabric/wire_capture.h"
#include "model/system/node.h"

namespace hcasim {

class fabric : public sc_core::sc_module {
public:
    param<unsigned> nodes;        ///< number of hosts
    param<std::string> topology;  ///< auto|back_to_back|switch
    param<unsigned> lmc;          ///< LID mask count of every port (0..7), as OpenSM's `lmc`
    param<bool> subnet_manager;   ///< switch topology: a subnet manager on an extra switch port
    switch_params switch_config;  ///< fabric.switch.*: every switch's parameters

    std::unique_ptr<ib_switch> sw;               ///< "fabric.switch" when the topology has one
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

    /// --pcap: captures every cable into directory `dir` (created if missing; docs/traces.md):
    /// `link<N>.pcap` for node N's cable (back to back: `link0.pcap`, the one cable between
    /// node 0 and node 1) and `link_sm.pcap` for the subnet manager's. Direction 0 of each
    /// file is what node N (node 0, the SM) sends. Throws config_error if the directory or a
    /// file cannot be created. Call before the simulation starts.
    void capture_to(const std::string& dir);
    /// Writes what the captures hold back and closes them; returns an empty string or what
    /// failed. Idempotent (the destructor closes too, losing errors).
    std::string close_captures();
    /// The open captures, in file order.
    const std::vector<std::unique_ptr<wire_capture>>& captures() const { return captures_; }

private:
    std::vector<std::unique_ptr<wire_capture>> captures_;
};

}  // namespace hcasim
