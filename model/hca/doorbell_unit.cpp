#include "model/hca/doorbell_unit.h"
#include "model/core/sim_time.h"

#include <cstddef>
#include <cstring>

#include "model/core/bytes.h"
#include "model/hca/command_unit.h"
#include "model/hca/cq_writer.h"
#include "model/hca/wqe_fetcher.h"

namespace hcasim {

using namespace sc_core;

doorbell_unit::doorbell_unit(const sc_module_name& name, const sc_time& hca_clock)
    : sc_module(name),
      bar0("bar0"),
      clock_mhz("clock_mhz", 0.0, "MHz", "this unit's clock; 0: the HCA's core clock (hca.clock_mhz)",
                unit_clock_bounds()),
      fifo_entries("fifo_entries", 256, "entries",
                   "doorbell FIFO depth; a CPU writing to a full FIFO stalls (posted-write credits)",
                   {1, 1u << 20}),
      decode_cycles("decode_cycles", 4, "cycles", "cycles from an MMIO write's arrival to its dispatch",
                    {0, 100000}),
      writes("writes", "MMIO writes received"),
      reads("reads", "MMIO reads received"),
      sq_doorbells("sq_doorbells", "SQ doorbells"),
      rq_doorbells("rq_doorbells", "RQ doorbells"),
      srq_doorbells("srq_doorbells", "SRQ doorbells"),
      cq_doorbells("cq_doorbells", "CQ doorbells"),
      inline_writes("inline_writes", "WQEs written through the inline window"),
      dropped("dropped", "MMIO writes dropped (FIFO full and the writer could not be stalled)"),
      stalls("stalls", "MMIO writes that found the FIFO full and stalled their writer"),
      bad_accesses("bad_accesses",
                   "MMIO accesses to no register, of a wrong size, or to a read-only register"),
      fifo_peak("fifo_peak", "most MMIO writes waiting in the FIFO at once (at most fifo_entries)") {
    const sc_time clock = unit_period(clock_mhz, hca_clock);
    decode_time_ = clock * double(decode_cycles.get());
    fifo_.resize(fifo_entries);
    for (auto& e : fifo_) e = std::make_unique<entry>();
    // The global register map (tlm_if/mmio_map.h).
    regs_.emplace_back("hca_id", hw::REG_HCA_ID, 4, hw::HCA_ID_VALUE, reg_access::ro);
    regs_.emplace_back(
        "cmd_mailbox", hw::REG_CMD_MAILBOX, 8, 0, reg_access::rw, [this] { return cmd_->mailbox(); },
        [this](uint64_t v) { cmd_->set_mailbox(v); });
    regs_.emplace_back("cmd_doorbell", hw::REG_CMD_DOORBELL, 4, 0, reg_access::wo, nullptr,
                       [this](uint64_t v) { cmd_->doorbell(uint32_t(v)); });
    regs_.emplace_back("cmd_status", hw::REG_CMD_STATUS, 4, 0, reg_access::ro,
                       [this] { return uint64_t(cmd_->status()); });
    regs_.emplace_back("int_msi_addr", hw::REG_INT_MSI_ADDR, 8, 0, reg_access::rw, nullptr,
                       [this](uint64_t v) {
                           msi_addr_ = v;
                           cqw_->set_msi(v, uint32_t(find(hw::REG_INT_MSI_DATA)->value()));
                       });
    regs_.emplace_back("int_msi_data", hw::REG_INT_MSI_DATA, 4, 0, reg_access::rw, nullptr,
                       [this](uint64_t v) { cqw_->set_msi(msi_addr_, uint32_t(v)); });
    regs_.emplace_back("eq_consumer", hw::REG_EQ_CONSUMER, 4, 0, reg_access::wo, nullptr,
                       [this](uint64_t v) { cqw_->eq_doorbell(uint32_t(v & 0xFF), uint32_t(v >> 8)); });
    bar0.register_b_transport(this, &doorbell_unit::b_transport);
    bar0.register_transport_dbg(this, &doorbell_unit::transport_dbg);
    SC_METHOD(dispatch);
    sensitive << due_;
    dont_initialize();
}

reg* doorbell_unit::find(uint64_t offset) {
    for (auto& r : regs_)
        if (r.offset() == offset) return &r;
    return nullptr;
}

void doorbell_unit::b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    const uint64_t off = gp.get_address();
    const uint32_t len = gp.get_data_length();
    const sc_time called_at = sim_now();
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    if (gp.is_read()) {
        ++reads;
        reg* r = off < hw::UAR_BASE ? find(off) : nullptr;
        if (!r || len != r->bytes()) {
            ++bad_accesses;
            gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return;
        }
        const uint64_t v = r->read();
        std::memcpy(gp.get_data_ptr(), &v, len);
        delay += decode_time_;
        return;
    }
    ++writes;
    if (off >= hw::BAR0_BYTES || len == 0 || len > hw::INLINE_WINDOW_BYTES) {
        ++bad_accesses;
        gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
        return;
    }
    if (count_ == fifo_.size()) {
        // A full FIFO holds the PCIe link's posted-write credits: the writing CPU stalls until
        // an entry drains (it is a thread, so it may wait). Only a non-thread caller, which
        // cannot be stalled, loses the write — and it is counted.
        if (sc_get_current_process_handle().proc_kind() != SC_THREAD_PROC_) {
            ++dropped;
            return;
        }
        ++stalls;
        ++stalled_;
        while (count_ == fifo_.size()) wait(space_);
        --stalled_;
        const sc_time waited = sim_now() - called_at;            // the arrival time stays where it was,
        delay = delay > waited ? delay - waited : SC_ZERO_TIME;  // unless the stall passed it
    }
    entry& e = *fifo_[(head_ + count_) % fifo_.size()];
    e.at = sim_now() + delay + decode_time_;
    e.len = len;
    e.value = 0;
    if (off < hw::UAR_BASE) {
        e.k = kind::global;
        e.offset = off;
        std::memcpy(&e.value, gp.get_data_ptr(), len < 8 ? len : 8);
    } else {
        const uint64_t in_page = (off - hw::UAR_BASE) % hw::UAR_STRIDE;
        e.offset = in_page;
        if (in_page == hw::UAR_SQ_DOORBELL && len == 8)
            e.k = kind::sq;
        else if (in_page == hw::UAR_RQ_DOORBELL && len == 8)
            e.k = kind::rq;
        else if (in_page == hw::UAR_CQ_DOORBELL && len == 8)
            e.k = kind::cq;
        else if (in_page == hw::UAR_SRQ_DOORBELL && len == 8)
            e.k = kind::srq;
        else if (in_page == hw::UAR_INLINE_WQE && len >= 64 && len % 16 == 0)
            e.k = kind::inline_wqe;
        else {
            ++bad_accesses;
            gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return;
        }
        if (e.k == kind::inline_wqe)
            copy_bytes(e.data, gp.get_data_ptr(), len);
        else
            std::memcpy(&e.value, gp.get_data_ptr(), 8);
        // The fetcher will serve this QP when the entry is dispatched: it may start loading
        // the QP's state meanwhile (a simulator speed hint).
        if (fetcher_ && e.k == kind::sq) {
            fetcher_->expect(hw::doorbell_qpn(e.value));
        } else if (fetcher_ && e.k == kind::inline_wqe) {
            uint32_t qpn;
            std::memcpy(&qpn, e.data + offsetof(hw::wqe_ctrl_seg, qpn), sizeof qpn);
            fetcher_->expect(qpn & 0xFFFFFF);
        }
    }
    if (count_++ == 0) due_.notify(e.at - sim_now());
    if (count_ > fifo_peak.value()) fifo_peak += count_ - fifo_peak.value();
}

void doorbell_unit::dispatch() {
    const sc_time now = sim_now();
    while (count_ && fifo_[head_]->at <= now) {
        entry& e = *fifo_[head_];
        switch (e.k) {
        case kind::global: {
            reg* r = find(e.offset);
            if (!r || e.len != r->bytes() || !r->write(e.value)) ++bad_accesses;
            break;
        }
        case kind::sq:
            if (probe_) probe_->mark(path_probe::doorbell, now);
            ++sq_doorbells;
            fetcher_->sq_doorbell(hw::doorbell_qpn(e.value), hw::doorbell_producer(e.value));
            break;
        case kind::rq:
            ++rq_doorbells;
            fetcher_->rq_doorbell(hw::doorbell_qpn(e.value), hw::doorbell_producer(e.value));
            break;
        case kind::srq:
            ++srq_doorbells;
            fetcher_->srq_doorbell(hw::doorbell_qpn(e.value), hw::doorbell_producer(e.value));
            break;
        case kind::cq:
            ++cq_doorbells;
            cqw_->doorbell(hw::cq_doorbell_cqn(e.value), hw::cq_doorbell_consumer(e.value),
                           hw::cq_doorbell_arm(e.value));
            break;
        case kind::inline_wqe:
            if (probe_) probe_->mark(path_probe::doorbell, now);
            ++inline_writes;
            fetcher_->inline_wqe(e.data, e.len);
            break;
        }
        head_ = (head_ + 1) % fifo_.size();
        --count_;
        if (stalled_)  // only a writer stalled on a full FIFO waits for space
            space_.notify(SC_ZERO_TIME);
    }
    if (count_) due_.notify(fifo_[head_]->at - now);
}

unsigned int doorbell_unit::transport_dbg(tlm::tlm_generic_payload& gp) {
    if (!gp.is_read() || gp.get_address() >= hw::UAR_BASE) return 0;
    reg* r = find(gp.get_address());
    if (!r || gp.get_data_length() < r->bytes()) return 0;
    const uint64_t v = r->read();
    std::memcpy(gp.get_data_ptr(), &v, r->bytes());
    return r->bytes();
}

}  // namespace hcasim
