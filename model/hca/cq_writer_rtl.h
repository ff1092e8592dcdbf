// The CQ writer's RTL (rtl/cq_writer.sv, verilated into a SystemC module) behind a transactor:
// completions, events, context writes, doorbells and MSI register writes are queued as
// transactions and driven onto the RTL's pins in order; the RTL's host memory writes (its write
// master) become DMA writes on `dma`, the TLM socket the TLM cq_writer uses, and their
// responses go back on its pins; the RTL's answers come back through the client. The clock runs
// only while the RTL has work (clock gating). The pin-level contract is docs/cosim.md.
//
// The RTL is a verilated build linked into hcasim (`variant`) or a plug-in library implementing
// the unit's contract through rtl/abi/hcasim_rtl.h (`rtl_lib`). No Verilator header is
// included here.
#pragma once
#include <systemc>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/hca/dma_port.h"
#include "model/hca/rtl_waves.h"
#include "tlm_if/cqe.h"

namespace hcasim {

/// What the RTL's rsp_reason pins carry.
enum cq_rtl_reason : uint8_t {
    CQR_WRITTEN = 0,  ///< the CQE (completion) or EQE (event) was written
    CQR_NO_CQ = 1,    ///< completion: the CQ is not loaded
    CQR_OVERRUN = 2,  ///< completion: the CQ is full or already in error
    CQR_CQE_ERR = 3,  ///< completion: the CQE write failed (the CQ is now in error)
    CQR_NO_EQ = 4,    ///< event: EQ 0 is not loaded
    CQR_EQE_ERR = 5,  ///< event: the EQE write failed
};
const char* cq_rtl_reason_name(uint8_t r);

/// The RTL's answer to one completion or event, as its rsp_* pins carry it.
struct cq_rtl_answer {
    uint8_t tag = 0;
    bool written = false;
    uint8_t reason = CQR_WRITTEN;
    bool eqe = false, msi = false, disarmed = false;
    bool operator==(const cq_rtl_answer& o) const {
        return tag == o.tag && written == o.written && reason == o.reason && eqe == o.eqe && msi == o.msi &&
               disarmed == o.disarmed;
    }
    std::string str() const;
};

/// Who receives the RTL's answers.
class cq_rtl_client {
public:
    virtual ~cq_rtl_client() = default;
    /// The answer to the oldest request not yet answered (in request order).
    virtual void rtl_answer(const cq_rtl_answer& a) = 0;
    /// Everything handed to the RTL has taken effect and the clock has stopped.
    virtual void rtl_idle() {}
};

/// One transaction at the RTL's pins (docs/cosim.md, the CQ writer's contract): a request
/// (completion, event) or a port write (CQ/EQ context, CQ doorbell, MSI registers).
struct cq_rtl_op {
    enum kind_t : uint8_t { COMPLETE, EVENT, CQC, EQC, DOORBELL, MSI };
    kind_t kind = COMPLETE;
    uint8_t tag = 0, code = 0, log_size = 0, subtype = 0;  // code: cqc_op, arm, event type
    bool solicited = false;
    uint32_t num = 0, value = 0;  // CQN/EQN/resource; consumer, MSI data
    uint16_t eqn = 0;
    uint64_t addr = 0;  // ring base, MSI address
    hw::cqe cqe{};
};

class cq_rtl_model;  // the verilated module and its signals (cq_writer_rtl.cpp)

class cq_writer_rtl : public sc_core::sc_module {
public:
    /// The RTL's host memory writes (CQEs, EQEs, MSIs).
    dma_port dma;

    /// CQ and EQ contexts the RTL is built with (its CQS and EQS parameters).
    static constexpr unsigned CQS = 1024, EQS = 16;
    /// Its WRITE_CYCLES parameter (hca.cq_writer.write_cycles must equal it for impl=rtl|both).
    static constexpr unsigned WRITE_CYCLES = 8;
    /// Verilated builds: "reference" (rtl/cq_writer.sv as is) and "broken_owner" (built with
    /// CQW_BROKEN_OWNER: the owner bit ignores the wrap; for testing the comparator).
    static const std::vector<std::string>& variants();

    /// `variant`: the built-in build; `rtl_lib`: a plug-in library to run instead ("" for none;
    /// config_error if both are set to other than their defaults, or if the library is unfit);
    /// `period`: the RTL's clock; `waves`: FST file name ("" for none; built-in instances naming
    /// the same file share it, a plug-in writes its own: waves_file()).
    cq_writer_rtl(const sc_core::sc_module_name& name, const std::string& variant, const std::string& rtl_lib,
                  const sc_core::sc_time& period, const std::string& waves, cq_rtl_client& client);
    ~cq_writer_rtl() override;

    /// Queues a transaction: requests are answered in order through rtl_answer(); port writes
    /// go in order with them (each waits until the RTL is idle). The calls below build one.
    void push(const cq_rtl_op& o);
    /// Requests.
    void complete(uint8_t tag, uint32_t cqn, const hw::cqe& e, bool solicited);
    void post_event(uint8_t tag, uint8_t type, uint32_t resource, uint8_t subtype);
    /// Port writes, in order with the requests (each waits until the RTL is idle).
    void load_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint16_t eqn);
    void destroy_cq(uint32_t cqn);
    void resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer);
    void load_eq(uint32_t eqn, uint64_t base, uint8_t log_size);
    void doorbell(uint32_t cqn, uint32_t consumer, uint8_t arm);
    void set_msi(uint64_t addr, uint32_t data);

    uint64_t cycles() const { return cycles_; }
    /// The waves file written ("" if none).
    const std::string& waves_file() const { return waves_file_; }
    /// Host memory writes made for the RTL, and those that failed.
    uint64_t writes() const { return writes_; }
    uint64_t write_errors() const { return write_errors_; }

private:
    const cq_rtl_op* next_op();
    void edge();  // the clock process (SC_METHOD)
    void drive(const cq_rtl_op* o);
    void start_of_simulation() override;
    void end_of_simulation() override;

    cq_rtl_client& client_;
    sc_core::sc_time period_, half_;
    std::unique_ptr<cq_rtl_model> m_;
    std::shared_ptr<rtl_waves> waves_;
    std::string waves_file_;
    rtl_op_ring<cq_rtl_op> ops_;  // queued operations
    sc_core::sc_event kick_;
    bool running_ = false, high_ = false;
    unsigned reset_cycles_ = 2;
    unsigned in_flight_ = 0;       // requests taken, answer not yet seen
    bool outstanding_ = false;     // a host memory write taken, its response not yet driven
    bool write_failed_ = false;    // ...and its outcome
    sc_core::sc_time respond_at_;  // ...and the falling edge its response is driven at
    uint8_t wbuf_[64] = {};
    uint64_t cycles_ = 0, writes_ = 0, write_errors_ = 0;
};

}  // namespace hcasim
