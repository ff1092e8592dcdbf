// Stimulus dumps of the CQ writer (`--dump-stimulus hca.cq_writer=FILE`, docs/cosim.md "Stimulus
// dumps"): the writer behind cq_writer_probe, which records each transaction at the pins of
// rtl/cq_writer.sv's contract as one text line, and the reader an RTL replay uses. The format
// is line based for SystemVerilog's $fgets/$sscanf and for cocotb: `#` lines are comments (the
// header), every other line is a keyword, the simulated time in ps (decimal) and the pins'
// values in hex without 0x.
#pragma once
#include <systemc>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/hca/cq_writer_probe.h"
#include "model/hca/cq_writer_rtl.h"

namespace hcasim {

/// The first line of every dump: format name and version. A reader refuses any other.
inline constexpr const char* cq_stimulus_magic = "# hcasim-stimulus cq_writer 1";

/// open_cq_stimulus() with the run's CQ writer clock and write_cycles for the header (the
/// two-argument form in cq_writer_probe.h writes neither). `path` may hold `{node}`, replaced by
/// the first component of `unit` ("node1"); two units writing the same path are refused
/// (config_error naming both).
std::unique_ptr<cq_writer_probe> open_cq_stimulus(const std::string& path, const std::string& unit,
                                                  const sc_core::sc_time& clock, unsigned write_cycles);

/// `file` with `.{node}` before its extension ("cq.stim" -> "cq.{node}.stim", "cq" ->
/// "cq.{node}"): what `--dump-stimulus hca.cq_writer=FILE` sets for every node.
std::string cq_stimulus_per_node(const std::string& file);

/// One line of a dump. Which fields are used depends on `kind`:
///   'C' completion: tag, num (CQN), flag (solicited), data (the CQE, 64 bytes)
///   'E' event: tag, code (type), subtype, value (resource)
///   'Q' CQ context write: code (cqc_op), num (CQN), addr (base), log_size, eqn, value (consumer)
///   'V' EQ context load: num (EQN), addr (base), log_size
///   'D' CQ doorbell: num (CQN), value (consumer), code (arm)
///   'M' MSI registers: addr, value (data)
///   'W' host memory write expected: addr, len, flag (the response is an error), data (len bytes)
///   'A' answer expected: answer
struct cq_stim_record {
    char kind = 0;
    unsigned line = 0;  ///< line number in the file (for FILE:LINE messages)
    uint64_t t_ps = 0;
    uint8_t tag = 0, code = 0, subtype = 0, log_size = 0;
    bool flag = false;
    uint16_t eqn = 0;
    uint32_t num = 0, value = 0, len = 0;
    uint64_t addr = 0;
    uint8_t data[64] = {};
    cq_rtl_answer answer;
};

/// A dump read back: its header's fields (0 / empty when the header does not give them) and
/// its records in file order.
struct cq_stimulus {
    std::string path, unit;
    unsigned cqs = 0, eqs = 0, rtl_write_cycles = 0;  ///< the contract's parameters
    uint64_t clock_ps = 0;                            ///< the run's CQ writer clock
    unsigned write_cycles = 0;                        ///< the run's hca.cq_writer.write_cycles
    std::vector<cq_stim_record> records;
    /// "FILE:LINE" of a record.
    std::string where(const cq_stim_record& r) const { return path + ":" + std::to_string(r.line); }
};

/// Reads a dump; throws config_error "FILE:LINE: what is wrong" for a malformed line (unknown
/// keyword, wrong field count, a field that is not hex or too wide for its pins, a data field
/// of the wrong length), "FILE:1: ..." for a missing or other format line, and "FILE: ..." if
/// it cannot be read.
cq_stimulus read_cq_stimulus(const std::string& path);

}  // namespace hcasim
