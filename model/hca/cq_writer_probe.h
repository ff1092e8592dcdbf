// What passes a CQ writer's pins, one transaction at a time: the inputs the unit takes (in the
// order it takes them), the host memory writes it makes with their responses, and its answer
// to each completion and event. The `cq_writer` reports them here whichever implementation runs
// (impl=tlm: the TLM model's; rtl: the RTL's; both: the TLM model's, which the RTL matched), so
// `--dump-stimulus hca.cq_writer=FILE` can write them out for an RTL team's own testbench
// (docs/cosim.md "Stimulus dumps"). The transactions are those of rtl/cq_writer.sv's contract.
#pragma once
#include <systemc>

#include <cstdint>
#include <memory>
#include <string>

#include "model/hca/cq_writer_rtl.h"
#include "tlm_if/cqe.h"

namespace hcasim {

class cq_writer_probe {
public:
    virtual ~cq_writer_probe() = default;
    // Inputs (`t`: the simulated time the unit takes the transaction).
    virtual void complete(const sc_core::sc_time& t, uint8_t tag, uint32_t cqn, const hw::cqe& e,
                          bool solicited) = 0;
    virtual void event(const sc_core::sc_time& t, uint8_t tag, uint8_t type, uint32_t resource,
                       uint8_t subtype) = 0;
    /// `op`: the cqc_op pins (1 load, 2 destroy, 3 resize); fields the op does not use are 0.
    virtual void cq_context(const sc_core::sc_time& t, uint8_t op, uint32_t cqn, uint64_t base,
                            uint8_t log_size, uint16_t eqn, uint32_t consumer) = 0;
    virtual void eq_context(const sc_core::sc_time& t, uint32_t eqn, uint64_t base, uint8_t log_size) = 0;
    virtual void doorbell(const sc_core::sc_time& t, uint32_t cqn, uint32_t consumer, uint8_t arm) = 0;
    virtual void msi(const sc_core::sc_time& t, uint64_t addr, uint32_t data) = 0;
    // Outputs.
    /// A host memory write (`t`: when it was issued) and whether it failed (the mwr_err response).
    virtual void write(const sc_core::sc_time& t, uint64_t addr, const void* data, uint32_t len,
                       bool err) = 0;
    /// The answer to the oldest completion or event not yet answered.
    virtual void answer(const sc_core::sc_time& t, const cq_rtl_answer& a) = 0;
    /// The run is over: flush and close (errors are thrown as config_error naming the file).
    virtual void close() = 0;
};

/// Opens a stimulus file for the CQ writer named `unit` (e.g. "node1.hca.cq_writer"); throws
/// config_error naming `path` if it cannot be written. (model/hca/cq_stimulus.cpp)
std::unique_ptr<cq_writer_probe> open_cq_stimulus(const std::string& path, const std::string& unit);

}  // namespace hcasim
