// The P_Key checker's RTL (rtl/pkey_checker.sv, verilated into a SystemC module) behind a
// transactor: the P_Key checker unit hands it checks, table writes and counter pulses as
// transactions; the transactor drives them onto the RTL's pins one per clock cycle and hands
// the verdicts back. The clock runs only while the RTL has work (clock gating): an idle
// checker costs no events. The pin-level contract is docs/cosim.md.
//
// The RTL is a verilated build linked into hcasim (`variant`) or a plug-in library implementing
// the unit's contract through rtl/abi/hcasim_rtl.h (`rtl_lib`).
//
// No Verilator header is included here: the verilated classes stay in pkey_checker_rtl.cpp.
#pragma once
#include <systemc>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/hca/rtl_waves.h"

namespace hcasim {

/// What the RTL's vrd_reason pins carry (and what the TLM model decides).
enum pkey_reason : uint8_t {
    PKEY_ACCEPT = 0,        ///< an ordinary QP's entry matches (or no QP is bound)
    PKEY_ACCEPT_SMI = 1,    ///< QP0: any P_Key (C10-131)
    PKEY_ACCEPT_GSI = 2,    ///< QP1: some valid entry matches; `index` is the lowest (C10-132)
    PKEY_ACCEPT_MCAST = 3,  ///< multicast DLID: some valid entry matches
    PKEY_DROP_QP = 4,       ///< the QP's entry does not match
    PKEY_DROP_GSI = 5,      ///< QP1: no entry matches
    PKEY_DROP_MCAST = 6,    ///< multicast: no entry matches
    PKEY_DROP_PORT = 7,     ///< no such port
};
const char* pkey_reason_name(uint8_t r);

/// One check, as the request pins carry it.
struct pkey_request {
    uint8_t tag = 0;
    uint16_t pkey = 0;        ///< BTH P_Key
    uint32_t dqpn = 0;        ///< BTH DestQP
    uint16_t dlid = 0;        ///< LRH DLID
    bool qp_bound = false;    ///< the destination QP is bound to a table index...
    uint16_t pkey_index = 0;  ///< ...this one
    uint8_t port = 1;
};

/// A verdict, as the verdict and trap pins carry it.
struct pkey_verdict {
    uint8_t tag = 0;
    bool accept = true;
    uint8_t reason = PKEY_ACCEPT;
    uint16_t index = 0;      ///< PKEY_ACCEPT_GSI: the matched entry
    uint16_t local_key = 0;  ///< drops: the entry checked against (0: none)
    bool trap = false;       ///< the trap pins pulsed with it
    bool operator==(const pkey_verdict& o) const {
        return tag == o.tag && accept == o.accept && reason == o.reason && index == o.index &&
               local_key == o.local_key && trap == o.trap;
    }
    std::string str() const;
};

/// Who receives the RTL's verdicts.
class pkey_rtl_client {
public:
    virtual ~pkey_rtl_client() = default;
    /// The verdict on the oldest request not yet answered (requests are answered in order).
    virtual void rtl_verdict(const pkey_verdict& v) = 0;
    /// Everything handed to the RTL has taken effect and the clock has stopped.
    virtual void rtl_idle() = 0;
};

class pkey_rtl_model;  // the verilated module and its signals (pkey_checker_rtl.cpp)

class pkey_checker_rtl : public sc_core::sc_module {
public:
    /// P_Key table entries per port the RTL is built with (its DEPTH parameter).
    static constexpr unsigned DEPTH = 128;
    /// Verilated builds: "reference" (rtl/pkey_checker.sv as is) and "broken_membership"
    /// (built with PKEY_BROKEN_MEMBERSHIP: two limited members match; for testing the
    /// comparator).
    static const std::vector<std::string>& variants();

    /// `variant`: the built-in build; `rtl_lib`: a plug-in library to run instead ("" for none;
    /// config_error if both are set to other than their defaults, or if the library is unfit);
    /// `period`: the RTL's clock; `waves`: FST file name ("" for none; built-in instances naming
    /// the same file share it, a plug-in writes its own: waves_file()).
    pkey_checker_rtl(const sc_core::sc_module_name& name, const std::string& variant,
                     const std::string& rtl_lib, const sc_core::sc_time& period, const std::string& waves,
                     pkey_rtl_client& client);
    ~pkey_checker_rtl() override;

    /// Queues one check; its verdict comes back through rtl_verdict().
    void check(const pkey_request& r);
    /// Queues a table write (port 1..).
    void write_table(uint8_t port, uint16_t index, uint16_t data);
    /// Queues one pulse of the P_Key (found outside the checker) or Q_Key violation input.
    void count_pkey_violation();
    void count_qkey_violation();

    /// The counter pins, as the RTL drives them now.
    uint16_t pkey_violation_count() const;
    uint16_t qkey_violation_count() const;
    /// The waves file written ("" if none).
    const std::string& waves_file() const { return waves_file_; }

    uint64_t cycles() const { return cycles_; }

private:
    enum op_kind : uint8_t { OP_CHECK, OP_WRITE, OP_PKEY_VIOL, OP_QKEY_VIOL };
    struct op {
        op_kind kind;
        pkey_request req;  // OP_CHECK; OP_WRITE: port, pkey_index = index, pkey = data
    };
    void push(const op& o);
    const op* next_op();
    void edge();  // the clock process (SC_METHOD)
    void drive(const op* o);
    void start_of_simulation() override;
    void end_of_simulation() override;

    pkey_rtl_client& client_;
    sc_core::sc_time period_, half_;
    std::unique_ptr<pkey_rtl_model> m_;
    std::shared_ptr<rtl_waves> waves_;
    std::string waves_file_;
    rtl_op_ring<op> ops_;  // queued operations
    sc_core::sc_event kick_;
    bool running_ = false;       // the clock is toggling
    bool high_ = false;          // the clock is high now
    bool driven_ = false;        // inputs driven for the next rising edge
    unsigned reset_cycles_ = 2;  // cycles of reset still to run
    unsigned in_flight_ = 0;     // checks accepted, verdict not yet seen
    unsigned settle_ = 0;        // cycles until the last write/pulse has taken effect
    uint64_t cycles_ = 0;
};

}  // namespace hcasim
