// DMA traffic generator; see dma_traffic_gen.h.
#include "model/pcie/dma_traffic_gen.h"

#include <algorithm>

namespace hcasim {

using namespace sc_core;

dma_traffic_gen::dma_traffic_gen(const sc_module_name& name)
    : sc_module(name),
      out("out"),
      quantum_ns("quantum_ns", 1000.0, "ns", "max local-time lead of the generator before it synchronises",
                 {0.0, 1e9}),
      window_bytes("window_bytes", uint64_t(1) << 20, "bytes", "address window the transfers cycle through",
                   {1, ~uint64_t(0)}),
      transfers("transfers", "DMA transfers completed"),
      bytes("bytes", "payload bytes transferred"),
      errors("errors", "transfers that returned an error response") {
    SC_THREAD(run);
}

void dma_traffic_gen::start(bool write, uint64_t addr, uint64_t size_bytes, uint64_t count,
                            unsigned max_outstanding) {
    if (busy_ || pending_) SC_REPORT_ERROR(name(), "start() while a run is in progress");
    if (size_bytes == 0 || max_outstanding == 0)
        SC_REPORT_ERROR(name(), "start(): size and max_outstanding must be > 0");
    job_ = job{write, addr, size_bytes, count, max_outstanding};
    pending_ = true;
    if (sc_is_running()) start_ev_.notify(SC_ZERO_TIME);
}

double dma_traffic_gen::bandwidth_gbps() const {
    const double ns = (last_completion_ - first_issue_).to_seconds() * 1e9;
    return ns > 0 ? double(run_bytes_) * 8.0 / ns : 0.0;
}

void dma_traffic_gen::run() {
    tlm::tlm_generic_payload gp;
    for (;;) {
        if (!pending_) wait(start_ev_);
        pending_ = false;
        busy_ = true;
        const job j = job_;
        const sc_time quantum(quantum_ns, SC_NS);
        const uint64_t window = std::max(j.size, window_bytes.get() / j.size * j.size);
        buf_.assign(j.size, 0);
        completions_.assign(j.max_outstanding, SC_ZERO_TIME);
        gp.set_command(j.write ? tlm::TLM_WRITE_COMMAND : tlm::TLM_READ_COMMAND);
        gp.set_data_ptr(buf_.data());
        gp.set_data_length(j.size);
        gp.set_streaming_width(j.size);
        gp.set_byte_enable_ptr(nullptr);
        first_issue_ = last_completion_ = sc_time_stamp();
        run_bytes_ = 0;
        sc_time issue = sc_time_stamp();
        uint64_t off = 0;
        for (uint64_t i = 0; i < j.count; ++i) {
            sc_time& slot = completions_[i % j.max_outstanding];
            issue = std::max(issue, slot);  // at most max_outstanding in flight
            sc_time delay = issue - sc_time_stamp();
            if (delay > quantum) {
                wait(delay);
                delay = SC_ZERO_TIME;
            }
            const uint64_t a = j.addr + off;
            if (j.write)
                for (uint64_t k = 0; k < j.size; ++k) buf_[k] = pattern(a + k);
            gp.set_address(a);
            gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
            if (i == 0) first_issue_ = sc_time_stamp() + delay;
            out->b_transport(gp, delay);
            if (gp.is_response_error()) ++errors;
            slot = sc_time_stamp() + delay;
            last_completion_ = std::max(last_completion_, slot);
            ++transfers;
            bytes += j.size;
            run_bytes_ += j.size;
            off += j.size;
            if (off >= window) off = 0;
        }
        if (last_completion_ > sc_time_stamp()) wait(last_completion_ - sc_time_stamp());
        busy_ = false;
        done_ev_.notify();
    }
}

}  // namespace hcasim
