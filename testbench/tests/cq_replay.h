// Replays a CQ writer stimulus dump (model/hca/cq_stimulus.h, docs/cosim.md "Stimulus dumps")
// against the verilated RTL alone, at its pins: each input record is driven in file order, one
// at a time while `idle` is high (as the transactor does); every host memory write the RTL
// presents is checked against the dump's next W record (address, length, bytes) and answered
// with that record's response (mwr_err); every answer on rsp_* against the next A record. The
// first mismatch stops the replay and is reported with the FILE:LINE of the record it concerns.
// No memory is modelled: the dump's responses are the memory.
//
// Usage: construct one cq_replay<Vcq_writer> (or Vcq_writer_broken) before sc_start, call
// run(); one replay per process (SystemC elaborates once).
#pragma once
#include <systemc>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "model/hca/cq_stimulus.h"
#include "testbench/tests/sim_fork.h"

namespace hcasim::test {

struct cq_replay_result {
    bool finished = false;  ///< every record replayed
    std::string mismatch;   ///< "FILE:LINE: ..." of the first mismatch; empty if none
    uint64_t inputs = 0, writes = 0, answers = 0, cycles = 0, stalled_cycles = 0;
    bool ok() const { return finished && mismatch.empty(); }
};

template <class V>
class cq_replay : public sc_core::sc_module {
public:
    /// Chance (percent) that mw_ready is high in a cycle, and the most cycles after a write's
    /// handshake before its response: back-pressure the dump does not record (its content and
    /// order must not depend on it). Defaults: a bus that takes every write at once and answers
    /// in the next cycle.
    unsigned ready_percent = 100, max_resp_delay = 0;
    /// Cycles the RTL may take for one write or answer before the replay calls it stuck.
    unsigned stall_limit = 100000;

    SC_HAS_PROCESS(cq_replay);
    cq_replay(const sc_core::sc_module_name& n, const cq_stimulus& s, unsigned seed = 1)
        : sc_module(n), clk("clk", period_of(s)), s_(s), rng_(seed), rtl_(std::make_unique<V>("rtl")) {
        bind();
        SC_THREAD(replay);
        SC_THREAD(memory);
    }

    /// Runs the simulation until the replay ends (all records, or the first mismatch).
    cq_replay_result run() {
        sc_core::sc_start();
        return result_;
    }

    sc_core::sc_clock clk;

private:
    static sc_core::sc_time period_of(const cq_stimulus& s) {
        return s.clock_ps ? sc_core::sc_time(double(s.clock_ps), sc_core::SC_PS)
                          : sc_core::sc_time(10, sc_core::SC_NS);
    }
    uint64_t cycle() const { return sc_core::sc_time_stamp().value() / clk.period().value(); }

    void bind() {
        V& m = *rtl_;
        m.clk(clk);
        m.rst_n(rst_n);
        m.cmp_valid(cmp_valid);
        m.cmp_ready(cmp_ready);
        m.cmp_tag(cmp_tag);
        m.cmp_cqn(cmp_cqn);
        m.cmp_solicited(cmp_solicited);
        m.cmp_cqe(cmp_cqe);
        m.ev_valid(ev_valid);
        m.ev_ready(ev_ready);
        m.ev_tag(ev_tag);
        m.ev_type(ev_type);
        m.ev_subtype(ev_subtype);
        m.ev_resource(ev_resource);
        m.rsp_valid(rsp_valid);
        m.rsp_tag(rsp_tag);
        m.rsp_written(rsp_written);
        m.rsp_reason(rsp_reason);
        m.rsp_eqe(rsp_eqe);
        m.rsp_msi(rsp_msi);
        m.rsp_disarmed(rsp_disarmed);
        m.cqc_we(cqc_we);
        m.cqc_op(cqc_op);
        m.cqc_cqn(cqc_cqn);
        m.cqc_base(cqc_base);
        m.cqc_log_size(cqc_log_size);
        m.cqc_eqn(cqc_eqn);
        m.cqc_consumer(cqc_consumer);
        m.eqc_we(eqc_we);
        m.eqc_eqn(eqc_eqn);
        m.eqc_base(eqc_base);
        m.eqc_log_size(eqc_log_size);
        m.cqdb_valid(cqdb_valid);
        m.cqdb_cqn(cqdb_cqn);
        m.cqdb_consumer(cqdb_consumer);
        m.cqdb_arm(cqdb_arm);
        m.msi_we(msi_we);
        m.msi_addr_in(msi_addr_in);
        m.msi_data_in(msi_data_in);
        m.mw_valid(mw_valid);
        m.mw_ready(mw_ready);
        m.mw_addr(mw_addr);
        m.mw_data(mw_data);
        m.mw_len(mw_len);
        m.mwr_valid(mwr_valid);
        m.mwr_err(mwr_err);
        m.idle(idle);
    }

    void fail(const cq_stim_record* r, const std::string& what) {
        result_.mismatch = (r ? s_.where(*r) : s_.path) + ": " + what;
        done();
    }
    void done() {
        result_.cycles = cycle();
        sc_core::sc_stop();
        wait();  // never resumed
    }
    static std::string hex(uint64_t v) {
        char b[24];
        std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
        return b;
    }
    const cq_stim_record* next() const { return i_ < s_.records.size() ? &s_.records[i_] : nullptr; }
    std::string expected() const {
        const cq_stim_record* r = next();
        if (!r) return "the dump has no more records";
        return std::string("the dump expects ") +
               (r->kind == 'W'   ? "a write"
                : r->kind == 'A' ? "an answer"
                                 : "input") +
               " here";
    }

    void pulse(sc_core::sc_signal<bool>& we) {
        we.write(true);
        wait(clk.negedge_event());
        we.write(false);
    }

    /// The replay thread: reset, then every record in order.
    void replay() {
        rst_n.write(false);
        for (int i = 0; i < 3; ++i) wait(clk.negedge_event());
        rst_n.write(true);
        wait(clk.negedge_event());
        wait(clk.negedge_event());
        while (const cq_stim_record* r = next()) {
            ++i_;
            switch (r->kind) {
            case 'Q':
                cqc_op.write(r->code);
                cqc_cqn.write(r->num);
                cqc_base.write(r->addr);
                cqc_log_size.write(r->log_size);
                cqc_eqn.write(r->eqn);
                cqc_consumer.write(r->value);
                pulse(cqc_we);
                break;
            case 'V':
                eqc_eqn.write(r->num);
                eqc_base.write(r->addr);
                eqc_log_size.write(r->log_size);
                pulse(eqc_we);
                break;
            case 'D':
                cqdb_cqn.write(r->num);
                cqdb_consumer.write(r->value);
                cqdb_arm.write(r->code);
                pulse(cqdb_valid);
                break;
            case 'M':
                msi_addr_in.write(r->addr);
                msi_data_in.write(r->value);
                pulse(msi_we);
                break;
            case 'C': {
                sc_dt::sc_bv<512> bv;
                uint32_t w[16];
                std::memcpy(w, r->data, sizeof w);
                for (int k = 0; k < 16; ++k) bv.range(32 * k + 31, 32 * k) = w[k];
                cmp_tag.write(r->tag);
                cmp_cqn.write(r->num);
                cmp_solicited.write(r->flag);
                cmp_cqe.write(bv);
                cmp_valid.write(true);
                take(cmp_ready, r);
                cmp_valid.write(false);
                serve(r);
                break;
            }
            case 'E':
                ev_tag.write(r->tag);
                ev_type.write(r->code);
                ev_subtype.write(r->subtype);
                ev_resource.write(r->value);
                ev_valid.write(true);
                take(ev_ready, r);
                ev_valid.write(false);
                serve(r);
                break;
            default:
                fail(r, std::string("a ") + r->kind +
                            " record with no completion or event in flight (the RTL is idle: it answered "
                            "the previous request)");
            }
            ++result_.inputs;
        }
        result_.finished = true;
        done();
    }

    /// At a falling edge with the request's valid driven: until the rising edge that takes it.
    void take(const sc_core::sc_signal<bool>& ready, const cq_stim_record* r) {
        for (unsigned cycles = 0;; ++cycles) {
            wait(sc_core::SC_ZERO_TIME);  // ev_ready follows cmp_valid combinationally
            wait(sc_core::SC_ZERO_TIME);
            const bool taken = ready.read();
            wait(clk.negedge_event());
            if (taken) return;
            if (cycles > stall_limit) fail(r, "the RTL never took the request");
        }
    }

    /// After a request is taken: its writes (W records) and its answer (the A record).
    void serve(const cq_stim_record* req) {
        for (unsigned idle_cycles = 0;; ++idle_cycles) {
            if (taken_write_) {  // the memory thread took a write at the last rising edge
                taken_write_ = false;
                idle_cycles = 0;
                const cq_stim_record* w = next();
                if (!w || w->kind != 'W')
                    fail(w ? w : req, "the RTL wrote " + std::to_string(got_len_) + " bytes to " +
                                          hex(got_addr_) + "; " + expected() + " (request at " +
                                          s_.where(*req) + ")");
                ++i_;
                ++result_.writes;
                if (got_addr_ != w->addr || got_len_ != w->len)
                    fail(w, "the RTL wrote " + std::to_string(got_len_) + " bytes to " + hex(got_addr_) +
                                ", the dump " + std::to_string(w->len) + " bytes to " + hex(w->addr));
                for (uint32_t b = 0; b < w->len; ++b)
                    if (got_[b] != w->data[b])
                        fail(w, "byte " + std::to_string(b) + " of the " + std::to_string(w->len) +
                                    "-byte write to " + hex(w->addr) + " differs: dump " + hex(w->data[b]) +
                                    ", RTL " + hex(got_[b]));
                for (uint32_t b = w->len; b < 64; ++b)
                    if (got_[b] != 0)
                        fail(w, "byte " + std::to_string(b) + " of mw_data is " + hex(got_[b]) +
                                    " beyond mw_len " + std::to_string(w->len) + " (the contract: zero)");
                resp_err_ = w->flag;
                resp_pending_ = true;
            }
            if (rsp_valid.read()) {
                cq_rtl_answer a;
                a.tag = uint8_t(rsp_tag.read());
                a.written = rsp_written.read();
                a.reason = uint8_t(rsp_reason.read());
                a.eqe = rsp_eqe.read();
                a.msi = rsp_msi.read();
                a.disarmed = rsp_disarmed.read();
                const cq_stim_record* r = next();
                if (!r || r->kind != 'A')
                    fail(r ? r : req, "the RTL answered (tag " + hex(a.tag) + ", " + a.str() + "); " +
                                          expected() + " (request at " + s_.where(*req) + ")");
                ++i_;
                ++result_.answers;
                if (!(a == r->answer))
                    fail(r, "the answers differ: dump tag " + hex(r->answer.tag) + ", " + r->answer.str() +
                                "; RTL tag " + hex(a.tag) + ", " + a.str());
                wait(clk.negedge_event());
                for (int c = 0; !idle.read() && c < 10; ++c) wait(clk.negedge_event());
                if (!idle.read()) fail(r, "the RTL is not idle after its answer");
                return;
            }
            if (idle_cycles > stall_limit)
                fail(next() ? next() : req,
                     "the RTL neither wrote nor answered for " + std::to_string(stall_limit) +
                         " cycles after the request at " + s_.where(*req) + "; " + expected());
            wait(clk.negedge_event());
        }
    }

    /// The write channel: at each falling edge drives mw_ready (random when back-pressured),
    /// takes the write whose handshake is at the next rising edge (hands it to the replay
    /// thread), and drives its response a random number of cycles after.
    void memory() {
        std::uniform_int_distribution<unsigned> pct(0, 99), delay(0, max_resp_delay);
        int resp_in = -1;
        bool outstanding = false;
        for (;;) {
            wait(clk.negedge_event());
            mwr_valid.write(false);
            mwr_err.write(false);
            if (resp_in == 0 && resp_pending_) {
                mwr_valid.write(true);
                mwr_err.write(resp_err_);
                resp_pending_ = false;
                resp_in = -1;
                outstanding = false;
            } else if (resp_in > 0) {
                --resp_in;
            }
            const bool ready = ready_percent >= 100 || pct(rng_) < ready_percent;
            mw_ready.write(ready);
            if (!mw_valid.read() || outstanding) continue;
            if (!ready) {
                ++result_.stalled_cycles;
                continue;
            }
            got_addr_ = mw_addr.read();
            got_len_ = uint32_t(mw_len.read());
            const sc_dt::sc_bv<512> d = mw_data.read();
            for (unsigned b = 0; b < 64; ++b) got_[b] = uint8_t(d.range(8 * b + 7, 8 * b).to_uint());
            if (got_len_ > 64) got_len_ = 64;
            outstanding = true;
            taken_write_ = true;  // the replay thread checks it at the next falling edge
            resp_in = int(delay(rng_)) + 1;
        }
    }

public:
    sc_core::sc_signal<bool> rst_n{"rst_n"}, cmp_valid{"cmp_valid"}, cmp_ready{"cmp_ready"},
        cmp_solicited{"cmp_solicited"}, ev_valid{"ev_valid"}, ev_ready{"ev_ready"}, rsp_valid{"rsp_valid"},
        rsp_written{"rsp_written"}, rsp_eqe{"rsp_eqe"}, rsp_msi{"rsp_msi"}, rsp_disarmed{"rsp_disarmed"},
        cqc_we{"cqc_we"}, eqc_we{"eqc_we"}, cqdb_valid{"cqdb_valid"}, msi_we{"msi_we"}, mw_valid{"mw_valid"},
        mw_ready{"mw_ready"}, mwr_valid{"mwr_valid"}, mwr_err{"mwr_err"}, idle{"idle"};
    sc_core::sc_signal<uint32_t> cmp_tag{"cmp_tag"}, cmp_cqn{"cmp_cqn"}, ev_tag{"ev_tag"}, ev_type{"ev_type"},
        ev_subtype{"ev_subtype"}, ev_resource{"ev_resource"}, rsp_tag{"rsp_tag"}, rsp_reason{"rsp_reason"},
        cqc_op{"cqc_op"}, cqc_cqn{"cqc_cqn"}, cqc_log_size{"cqc_log_size"}, cqc_eqn{"cqc_eqn"},
        cqc_consumer{"cqc_consumer"}, eqc_eqn{"eqc_eqn"}, eqc_log_size{"eqc_log_size"}, cqdb_cqn{"cqdb_cqn"},
        cqdb_consumer{"cqdb_consumer"}, cqdb_arm{"cqdb_arm"}, msi_data_in{"msi_data_in"}, mw_len{"mw_len"};
    sc_core::sc_signal<uint64_t> cqc_base{"cqc_base"}, eqc_base{"eqc_base"}, msi_addr_in{"msi_addr_in"},
        mw_addr{"mw_addr"};
    sc_core::sc_signal<sc_dt::sc_bv<512>> cmp_cqe{"cmp_cqe"}, mw_data{"mw_data"};

private:
    const cq_stimulus& s_;
    std::mt19937 rng_;
    std::unique_ptr<V> rtl_;
    size_t i_ = 0;
    cq_replay_result result_;
    // The write taken at the last handshake (memory thread -> replay thread) and its response.
    bool taken_write_ = false, resp_pending_ = false, resp_err_ = false;
    uint64_t got_addr_ = 0;
    uint32_t got_len_ = 0;
    uint8_t got_[64] = {};
};

/// Replays `path` against build V in a child process (a SystemC simulation each) with a bus
/// ready `ready_percent` of the cycles; `check` sees the dump and the result there.
template <class V>
void replay_forked(const std::string& path, unsigned ready_percent,
                   const std::function<void(const cq_stimulus&, const cq_replay_result&)>& check) {
    run_forked([&] {
        const cq_stimulus s = read_cq_stimulus(path);
        cq_replay<V> r("replay", s, 7);
        r.ready_percent = ready_percent;
        r.max_resp_delay = ready_percent < 100 ? 3 : 0;
        check(s, r.run());
    });
}

/// Runs a shell command; its exit status, `out` its stdout and stderr.
inline int run_command(const std::string& cmd, std::string& out) {
    out.clear();
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return -1;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    return pclose(p);
}

}  // namespace hcasim::test
