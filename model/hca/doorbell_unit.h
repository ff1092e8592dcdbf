// Doorbell unit: the HCA's BAR0 target. Decodes the global registers (command interface,
// interrupt, EQ) and the UAR pages (SQ/RQ/CQ doorbells, inline-WQE window). A posted MMIO
// write takes effect at its arrival time (sc_time_stamp() + annotated delay): the unit queues
// it and an SC_METHOD dispatches it then to the WQE fetcher, CQ writer or command unit.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <memory>
#include <vector>

#include "model/core/param.h"
#include "model/core/unit_clock.h"
#include "model/core/path_probe.h"
#include "model/core/reg.h"
#include "model/core/stats.h"
#include "tlm_if/mmio_map.h"

namespace hcasim {

class wqe_doorbell_sink;
class cq_doorbell_sink;
class command_mailbox;

class doorbell_unit final : public sc_core::sc_module {
public:
    tlm_utils::simple_target_socket<doorbell_unit> bar0;  ///< from the PCIe link (MMIO)

    param<double> clock_mhz;        ///< this unit's clock; 0: the HCA's (hca.clock_mhz)
    param<unsigned> fifo_entries;   ///< doorbell FIFO depth; a writer finding it full stalls
    param<unsigned> decode_cycles;  ///< cycles from arrival to dispatch

    counter writes, reads, sq_doorbells, rq_doorbells, srq_doorbells, cq_doorbells, inline_writes, dropped,
        stalls, bad_accesses, fifo_peak;

    SC_HAS_PROCESS(doorbell_unit);
    doorbell_unit(const sc_core::sc_module_name& name, const sc_core::sc_time& hca_clock);

    void bind(wqe_doorbell_sink& f, cq_doorbell_sink& c, command_mailbox& cmd) {
        fetcher_ = &f;
        cqw_ = &c;
        cmd_ = &cmd;
    }
    /// Marks path_probe::doorbell for SQ doorbells and inline WQEs.
    void set_probe(path_probe& p) { probe_ = &p; }

private:
    enum class kind : uint8_t { global, sq, rq, cq, srq, inline_wqe };
    struct entry {
        sc_core::sc_time at;
        kind k;
        uint64_t offset, value;
        uint32_t len;
        uint8_t data[hw::INLINE_WINDOW_BYTES];
    };

    void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    unsigned int transport_dbg(tlm::tlm_generic_payload& gp);
    void dispatch();
    reg* find(uint64_t offset);

    wqe_doorbell_sink* fetcher_ = nullptr;

    path_probe* probe_ = nullptr;
    cq_doorbell_sink* cqw_ = nullptr;
    command_mailbox* cmd_ = nullptr;
    std::vector<reg> regs_;
    std::vector<std::unique_ptr<entry>> fifo_;
    size_t head_ = 0, count_ = 0;
    sc_core::sc_event due_, space_;
    unsigned stalled_ = 0;  // writers waiting for space_
    sc_core::sc_time decode_time_;
    uint64_t msi_addr_ = 0;
};

}  // namespace hcasim
