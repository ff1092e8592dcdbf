// The pieces the RTL transactors (pkey_checker_rtl, cq_writer_rtl) share: the FST file their
// verilated models write their pins to (--waves), the ring of queued operations, and the gated
// clock's start on its grid. docs/cosim.md.
//
// No Verilator header is included here: the verilated classes stay in the .cpp files.
#pragma once
#include <systemc>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

class VerilatedFstSc;

namespace hcasim {

/// An FST file shared by the RTL instances that name it (every unit, every node, each under its
/// own scope); owned by the SystemC kernel's list of trace files (a VerilatedFstSc is never
/// deleted, only closed). Models are added before the first clock edge opens it.
class rtl_waves {
public:
    explicit rtl_waves(std::string file);
    ~rtl_waves();
    rtl_waves(const rtl_waves&) = delete;
    rtl_waves& operator=(const rtl_waves&) = delete;
    VerilatedFstSc* file() { return tfp_; }
    const std::string& name() const { return file_; }
    /// Opens the file (once); config_error if it cannot be written.
    void open();
    void close();
    /// The instance for `file`, made on first use (and Verilator's tracing switched on: call it
    /// before building the models it is to trace).
    static std::shared_ptr<rtl_waves> get(const std::string& file);

private:
    std::string file_;
    VerilatedFstSc* tfp_;
    bool opened_ = false;
};

/// A transactor's queued operations in call order: a ring that grows on demand (no allocation
/// per operation once it has grown).
template <class Op>
class rtl_op_ring {
public:
    explicit rtl_op_ring(size_t n = 16) : ops_(n) {}
    void push(const Op& o) {
        if (count_ == ops_.size()) {  // grow the ring, oldest first
            std::vector<Op> bigger(ops_.size() * 2);
            for (size_t i = 0; i < count_; ++i) bigger[i] = ops_[(head_ + i) % ops_.size()];
            ops_.swap(bigger);
            head_ = 0;
        }
        ops_[(head_ + count_) % ops_.size()] = o;
        ++count_;
    }
    size_t size() const { return count_; }
    bool empty() const { return count_ == 0; }
    const Op& front() const { return ops_[head_]; }
    /// Takes the oldest; the pointer stays valid until the next push.
    const Op* pop() {
        const Op* o = &ops_[head_];
        head_ = (head_ + 1) % ops_.size();
        --count_;
        return o;
    }

private:
    std::vector<Op> ops_;
    size_t head_ = 0, count_ = 0;
};

/// A gated clock restarting (clk low): the time from now to its next rising edge on the grid of
/// `period` (multiples of it); zero when now is on the grid (the edge comes a delta later, so
/// the RTL samples inputs driven now).
inline sc_core::sc_time rtl_time_to_next_rise(const sc_core::sc_time& period) {
    const sc_core::sc_time now = sc_core::sc_time_stamp();
    const sc_core::sc_time rise = period * std::ceil(now / period);
    return rise > now ? rise - now : sc_core::SC_ZERO_TIME;
}

}  // namespace hcasim
