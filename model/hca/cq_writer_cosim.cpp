// The CQ writer with impl=rtl|both: the way to the RTL (cq_writer_rtl, the transactor of
// rtl/cq_writer.sv) and back.
//
// To the RTL. Every transaction (completion, event, context write, doorbell, MSI register) is
// queued with the time the unit takes it (the caller's time + delay) and handed to the
// transactor when that time has come: with impl=rtl in time order (ties in call order), as the
// hardware would see them; with impl=both in call order, the order the model decided them in.
// A handed transaction stays in `handed_` until the RTL has taken it (a request: its answer; a
// port write: the answer of the next request, or the RTL going idle). The command unit's
// queries and resizes (impl=rtl) are markers in the same queue: they run when everything
// handed before them has been taken, and what comes after waits for them.
//
// impl=rtl. The answers decide: counters, timeline spans, the mirror of the CQ contexts
// (producer, arm, overrun, consumer, ring) the command unit's queries read, applied in the
// RTL's order as the transactions retire. The RTL's host memory writes go out through the
// unit's own DMA port.
//
// impl=both. The model runs at the call as with impl=tlm (its writes reach host memory, its
// timing is the HCA's) and keeps each write it made; the RTL's writes end here instead: each
// must equal the model's next one (address, length, bytes), the time from the transaction to
// it (the RTL: from the hand-over; the model: from the call) must be within
// `time_tolerance_ns` of the model's, and it is answered with the model's response; each
// answer must equal the model's. The first difference stops the run with a report.
//
// The RTL's writes are posted, as PCIe memory writes are: the unit's bus answers each at once
// (the transactor drives the response a cycle after the handshake), with its error if the
// write failed; the write lands in host memory with the PCIe link's timing, in order.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "model/core/hex.h"
#include "model/core/sim_time.h"
#include "model/hca/cq_writer.h"

namespace hcasim {

using namespace sc_core;

void cq_writer::start_rtl(const sc_time& clock) {
    const std::string unit = name();
    if (write_cycles.get() != cq_writer_rtl::WRITE_CYCLES)
        throw config_error(unit + ".write_cycles is " + std::to_string(write_cycles.get()) +
                           ", but the RTL (impl=" + impl.get() + ") is built with WRITE_CYCLES " +
                           std::to_string(cq_writer_rtl::WRITE_CYCLES));
    if (cqs_.size() > cq_writer_rtl::CQS)
        throw config_error("max_cqs is " + std::to_string(cqs_.size()) + ", but the CQ writer's RTL (" +
                           unit + ".impl=" + impl.get() + ") is built with " +
                           std::to_string(cq_writer_rtl::CQS) + " CQ contexts");
    if (eqs_.size() > cq_writer_rtl::EQS)
        throw config_error(unit + ": the RTL is built with " + std::to_string(cq_writer_rtl::EQS) +
                           " EQ contexts");
    compare_ = impl.get() == "both";
    tolerance_ = sc_time(time_tolerance_ns.get(), SC_NS);
    rtl_ = std::make_unique<cq_writer_rtl>("rtl", rtl_variant, rtl_lib, clock, waves,
                                           static_cast<cq_rtl_client&>(*this));
    rtl_mem_ = std::make_unique<tlm_utils::simple_target_socket<cq_writer>>("rtl_mem");
    rtl_mem_->register_b_transport(this, &cq_writer::rtl_write);
    rtl_->dma.socket.bind(*rtl_mem_);
    waiting_.reserve(16);
    handed_.grow(16);
    expected_.grow(16);
    SC_HAS_PROCESS(cq_writer);
    SC_METHOD(release);
    sensitive << release_ev_;
    dont_initialize();
}

cq_writer::~cq_writer() = default;

void cq_writer::to_rtl(rtl_op& o, const sc_time& at) {
    o.at = at;
    o.seq = seq_++;
    const auto later = [this](const rtl_op& a, const rtl_op& b) { return before(b, a); };  // (a min-heap)
    waiting_.push_back(o);
    std::push_heap(waiting_.begin(), waiting_.end(), later);
    if (parked_ || waiting_.front().seq != o.seq) return;  // behind a marker, or not the next one
    const sc_time& now = sim_now();
    if (at <= now)
        release();
    else
        release_ev_.notify(at - now);
}

void cq_writer::release() {
    const auto later = [this](const rtl_op& a, const rtl_op& b) { return before(b, a); };
    const sc_time& now = sim_now();
    while (!parked_ && !waiting_.empty() && waiting_.front().at <= now) {
        std::pop_heap(waiting_.begin(), waiting_.end(), later);
        rtl_op& o = waiting_.back();
        if (o.marker != rtl_op::NONE) {
            marker_ = o;
            waiting_.pop_back();
            if (!handed_.empty()) {  // its turn comes when what was handed before it has retired
                parked_ = true;
                return;
            }
            run_marker();
            continue;
        }
        hand(o);
        waiting_.pop_back();
    }
    if (!parked_ && !waiting_.empty()) release_ev_.notify(waiting_.front().at - now);
}

void cq_writer::hand(const rtl_op& o) {
    ++rtl_ops;
    if (handed_.full()) handed_.grow(handed_.slots() * 2);
    rtl_op& h = handed_.slot(handed_.push());
    h = o;
    h.handed_at = sim_now();
    hand_over(h);
}

void cq_writer::pump() {
    if (parked_ && handed_.empty()) {
        parked_ = false;
        run_marker();
        release();
    }
}

void cq_writer::run_marker() {
    if (marker_.marker == rtl_op::RESIZE) {
        marker_delay_ = SC_ZERO_TIME;
        marker_ok_ = resize_now(marker_.num, marker_.addr, marker_.log_size, marker_.value, marker_delay_);
    }
    marker_done_ = true;
    settled_ev_.notify();
}

void cq_writer::settle(sc_time& delay) {
    if (!rtl_ || compare_) return;  // both: the model's state is the one read
    rtl_op m;
    m.marker = rtl_op::SYNC;
    marker_done_ = false;
    to_rtl(m, sim_now() + delay);
    while (!marker_done_) wait(settled_ev_);
    delay = SC_ZERO_TIME;
}

bool cq_writer::resize_in_turn(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer,
                               sc_time& delay) {
    rtl_op m;
    m.marker = rtl_op::RESIZE;
    m.num = cqn;
    m.addr = base;
    m.log_size = log_size;
    m.value = consumer & 0xFFFFFF;
    marker_done_ = false;
    to_rtl(m, sim_now() + delay);
    while (!marker_done_) wait(settled_ev_);
    delay = marker_delay_;  // the copy's DMA, from the resize's turn
    return marker_ok_;
}

void cq_writer::record_input(const rtl_op& o, const sc_time& t) {
    switch (o.kind) {
    case OP_COMPLETE: probe_->complete(t, o.tag, o.num, o.cqe, o.solicited); return;
    case OP_EVENT: probe_->event(t, o.tag, o.code, o.num, o.subtype); return;
    case OP_CQC: probe_->cq_context(t, o.code, o.num, o.addr, o.log_size, o.eqn, o.value); return;
    case OP_EQC: probe_->eq_context(t, o.num, o.addr, o.log_size); return;
    case OP_DOORBELL: probe_->doorbell(t, o.num, o.value, o.code); return;
    case OP_MSI: probe_->msi(t, o.addr, o.value); return;
    }
}

void cq_writer::hand_over(const rtl_op& o) {
    if (probe_ && !compare_) record_input(o, sim_now());  // (both: the model's calls were recorded)
    rtl_->push(o);
}

void cq_writer::retire_port_writes() {
    while (!handed_.empty() && handed_.front().kind != OP_COMPLETE && handed_.front().kind != OP_EVENT) {
        if (!compare_) apply_port_write(handed_.front());
        handed_.pop_front();
    }
}

void cq_writer::rtl_answer(const cq_rtl_answer& a) {
    if (!divergence_.empty()) return;
    retire_port_writes();
    if (handed_.empty()) {
        diverge("the RTL answered (tag " + std::to_string(a.tag) + ") with no request outstanding", nullptr,
                "  RTL answer: " + a.str() + "\n");
        return;
    }
    const rtl_op& o = handed_.front();
    if (a.tag != o.tag) {
        diverge("answers out of order (expected tag " + std::to_string(o.tag) + ")", &o,
                "  RTL answer: " + a.str() + "\n");
        return;
    }
    last_answer_ = sim_now();
    if (compare_) {
        ++rtl_compared;
        if (!(a == o.tlm)) {
            diverge("the answers differ", &o,
                    "  TLM answer: " + o.tlm.str() + "\n  RTL answer: " + a.str() + "\n");
            return;
        }
        if (!expected_.empty() && expected_.front().seq == o.seq) {
            const expected_write& w = expected_.front();
            char b[200];
            std::snprintf(b, sizeof b, "  TLM write: %u bytes to %s at %.3f ns\n  RTL write: none\n",
                          unsigned(w.len), hex_address(w.addr).c_str(), w.issued.to_seconds() * 1e9);
            diverge("the model wrote host memory where the RTL did not", &o, b);
            return;
        }
    } else {
        apply_answer(o, a);
    }
    handed_.pop_front();
    pump();
}

void cq_writer::apply_answer(const rtl_op& o, const cq_rtl_answer& a) {
    const sc_time& now = sim_now();
    if (a.eqe) ++events;
    if (a.msi) ++msi_writes;
    if (probe_) probe_->answer(now, a);
    if (o.kind == OP_EVENT) {
        if (a.reason == CQR_EQE_ERR)
            HCASIM_LOG(log_, info,
                       "EQ 0: event 0x" << std::hex << unsigned(o.code) << " lost, its EQE write failed");
        return;
    }
    if (o.num >= cqs_.size() || !cqs_[o.num].valid) return;
    cq_state& s = cqs_[o.num];
    if (a.written) {
        ++s.producer;
        ++cqes;
        busy_ps += format_ps_;
        if (tl_)
            tl_->span(track_, "CQE", o.at, now,
                      "\"cq\":" + std::to_string(o.num) + ",\"qp\":" + std::to_string(o.cqe.qpn) +
                          ",\"status\":" + std::to_string(o.cqe.status));
    } else if (a.reason == CQR_OVERRUN || a.reason == CQR_CQE_ERR) {
        ++overruns;
        s.overrun = true;
        if (a.reason == CQR_CQE_ERR)
            HCASIM_LOG(log_, info,
                       "CQ " << o.num << ": CQE write to " << hex_address(s.base) << " failed: CQ error");
    }
    if (a.disarmed) s.arm = hw::CQ_ARM_NONE;
}

void cq_writer::rtl_idle() {
    rtl_cycles += rtl_->cycles() - rtl_cycles.value();
    if (!divergence_.empty()) return;
    retire_port_writes();
    if (!handed_.empty()) {
        diverge("the RTL went idle with " + std::to_string(handed_.size()) + " request(s) unanswered",
                &handed_.front(), "");
        return;
    }
    // (a write of a transaction still waiting for its time is the model's, made at the call)
    // (both hands over in call order: every transaction numbered before the first waiting one
    // has been answered)
    if (compare_ && !expected_.empty() &&
        expected_.front().seq < (waiting_.empty() ? seq_ : waiting_.front().seq)) {
        const expected_write& w = expected_.front();
        char b[200];
        std::snprintf(b, sizeof b, "  TLM write: %u bytes to %s at %.3f ns\n  RTL write: none\n",
                      unsigned(w.len), hex_address(w.addr).c_str(), w.issued.to_seconds() * 1e9);
        diverge("the RTL went idle; the model made a host memory write it did not", nullptr, b);
        return;
    }
    pump();
}

namespace {

std::string hex_bytes(const uint8_t* p, uint32_t n) {
    std::string s;
    char b[4];
    for (uint32_t i = 0; i < n; ++i) {
        std::snprintf(b, sizeof b, "%02x", unsigned(p[i]));
        if (i && i % 16 == 0)
            s += "\n             ";
        else if (i)
            s += ' ';
        s += b;
    }
    return s;
}

}  // namespace

void cq_writer::rtl_write(tlm::tlm_generic_payload& gp, sc_time& delay) {
    const uint64_t addr = gp.get_address();
    const uint32_t len = gp.get_data_length();
    const uint8_t* data = gp.get_data_ptr();
    const sc_time issued = sim_now() + delay;
    if (!compare_) {
        // Posted: the write goes on to host memory with its own timing; the unit's bus answers
        // it at once (`delay` unchanged), with the error a PCIe access error reports.
        sc_time landed = delay;
        const bool ok = dma.write(addr, data, len, landed);
        if (probe_) probe_->write(issued, addr, data, len, !ok);
        gp.set_response_status(ok ? tlm::TLM_OK_RESPONSE : tlm::TLM_ADDRESS_ERROR_RESPONSE);
        return;
    }
    gp.set_response_status(tlm::TLM_OK_RESPONSE);
    if (!divergence_.empty()) return;
    ++rtl_writes_compared;
    // The request the RTL works on: the oldest one handed to it.
    const rtl_op* o = nullptr;
    for (size_t i = 0; i < handed_.size() && !o; ++i)
        if (handed_[i].kind == OP_COMPLETE || handed_[i].kind == OP_EVENT) o = &handed_[i];
    // (the report's lines are made only for a divergence: nothing allocated per write)
    const auto line = [](const char* who, uint64_t a, uint32_t n, const sc_time& t, const uint8_t* bytes) {
        char h[160];
        std::snprintf(h, sizeof h, "  %s write: %u bytes to %s at %.3f ns: ", who, unsigned(n),
                      hex_address(a).c_str(), t.to_seconds() * 1e9);
        return h + hex_bytes(bytes, std::min<uint32_t>(n, 64)) + "\n";
    };
    if (expected_.empty() || (o && expected_.front().seq != o->seq)) {
        diverge("the RTL wrote host memory where the model did not", o,
                "  TLM write: none\n" + line("RTL", addr, len, issued, data));
        return;
    }
    const expected_write& w = expected_.front();
    char b[256];
    if (w.addr != addr || w.len != len || std::memcmp(w.data, data, std::min<uint32_t>(len, 64)) != 0) {
        std::string diff;
        if (w.addr == addr && w.len == len) {
            diff = "  bytes that differ:";
            for (uint32_t i = 0; i < std::min<uint32_t>(len, 64); ++i)
                if (w.data[i] != data[i]) {
                    std::snprintf(b, sizeof b, " %u (TLM %02x, RTL %02x)", unsigned(i), unsigned(w.data[i]),
                                  unsigned(data[i]));
                    diff += b;
                }
            diff += "\n";
        }
        diverge("the host memory writes differ", o,
                line("TLM", w.addr, w.len, w.issued, w.data) + line("RTL", addr, len, issued, data) + diff);
        return;
    }
    // The time each took from the transaction to the write: the model from the call; the RTL
    // from when it could take it (handed over, and the request before it answered: the RTL's
    // own backlog is the RTL's throughput, measured by impl=rtl, not its latency).
    const sc_time start = o ? std::max(o->handed_at, last_answer_) : SC_ZERO_TIME;
    const sc_time rtl_took = issued - start, tlm_took = o ? w.issued - o->at : w.issued;
    const sc_time skew = rtl_took > tlm_took ? rtl_took - tlm_took : tlm_took - rtl_took;
    if (const uint64_t ps = skew.value() / sc_time(1, SC_PS).value(); ps > rtl_skew_max_ps.value())
        rtl_skew_max_ps += ps - rtl_skew_max_ps.value();
    if (skew > tolerance_) {
        std::snprintf(b, sizeof b,
                      "the RTL took %.3f ns %s than the model from the transaction to this write "
                      "(time_tolerance_ns %.3f)",
                      skew.to_seconds() * 1e9, rtl_took > tlm_took ? "longer" : "less",
                      tolerance_.to_seconds() * 1e9);
        diverge(b, o, line("TLM", w.addr, w.len, w.issued, w.data) + line("RTL", addr, len, issued, data));
        return;
    }
    if (!w.ok) gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);  // (posted: answered at once)
    expected_.pop_front();
}

std::string cq_writer::describe(const rtl_op& o) const {
    char b[320];
    const double at = o.at.to_seconds() * 1e9;
    switch (o.kind) {
    case OP_COMPLETE:
        std::snprintf(
            b, sizeof b,
            "completion (tag %u) to CQ %u taken at %.3f ns: QP 0x%06x, status %u, opcode %u, byte_len %u%s",
            unsigned(o.tag), unsigned(o.num), at, unsigned(o.cqe.qpn), unsigned(o.cqe.status),
            unsigned(o.cqe.opcode), unsigned(o.cqe.byte_len), o.solicited ? ", solicited" : "");
        break;
    case OP_EVENT:
        std::snprintf(b, sizeof b, "event (tag %u) taken at %.3f ns: type 0x%02x, subtype %u, resource 0x%x",
                      unsigned(o.tag), at, unsigned(o.code), unsigned(o.subtype), unsigned(o.num));
        break;
    case OP_CQC:
        std::snprintf(b, sizeof b, "CQ context %s of CQ %u at %.3f ns",
                      o.code == 1   ? "load"
                      : o.code == 2 ? "destroy"
                                    : "resize",
                      unsigned(o.num), at);
        break;
    case OP_EQC:
        std::snprintf(b, sizeof b, "EQ context load of EQ %u at %.3f ns", unsigned(o.num), at);
        break;
    case OP_DOORBELL:
        std::snprintf(b, sizeof b, "CQ %u doorbell at %.3f ns: consumer %u, arm %u", unsigned(o.num), at,
                      unsigned(o.value), unsigned(o.code));
        break;
    case OP_MSI: std::snprintf(b, sizeof b, "MSI registers written at %.3f ns", at); break;
    }
    if (o.marker != rtl_op::NONE) std::snprintf(b, sizeof b, "the command unit's turn at %.3f ns", at);
    return b;
}

void cq_writer::diverge(const std::string& what, const rtl_op* o, const std::string& detail) {
    ++divergences;
    if (!divergence_.empty()) return;
    char b[200];
    std::snprintf(b, sizeof b, "%s: TLM and RTL diverge at %.3f ns: ", name(), sim_now().to_seconds() * 1e9);
    std::string r = b + what + "\n";
    if (o) {
        r += "  transaction: " + describe(*o) + "\n";
        if (o->kind == OP_COMPLETE && o->num < cqs_.size() && cqs_[o->num].valid) {
            const cq_state& s = cqs_[o->num];
            std::snprintf(b, sizeof b,
                          "  CQ %u (model): ring %s, 2^%u entries, producer %llu, consumer %u%s\n",
                          unsigned(o->num), hex_address(s.base).c_str(), unsigned(s.log_size),
                          static_cast<unsigned long long>(s.producer), unsigned(s.consumer),
                          s.overrun ? ", in error" : "");
            r += b;
        }
    }
    r += detail;
    r += rtl_->waves_file().empty() ? std::string("  waveform: none (run with --waves FILE.fst)\n")
                                    : "  waveform: " + rtl_->waves_file() + "\n";
    divergence_ = r;
    sc_stop();
}

}  // namespace hcasim
