#include "model/hca/pkey_checker_rtl.h"

#include <cstdio>

#include "Vpkey_checker.h"
#include "Vpkey_checker_broken.h"
#include "model/core/param.h"
#include "model/hca/rtl_plugin.h"
#include "verilated.h"
#include "verilated_fst_sc.h"

namespace hcasim {

using namespace sc_core;

const char* pkey_reason_name(uint8_t r) {
    static const char* const names[] = {"accept",
                                        "accept (QP0)",
                                        "accept (QP1 entry)",
                                        "accept (multicast)",
                                        "drop (QP's entry)",
                                        "drop (QP1: no entry)",
                                        "drop (multicast: no entry)",
                                        "drop (no such port)"};
    return r < 8 ? names[r] : "?";
}

std::string pkey_verdict::str() const {
    char b[160];
    std::snprintf(b, sizeof b, "%s, reason %u (%s), index %u, local key 0x%04x, trap %s",
                  accept ? "ACCEPT" : "DROP", unsigned(reason), pkey_reason_name(reason), unsigned(index),
                  unsigned(local_key), trap ? "yes" : "no");
    return b;
}

/// The verilated module's pins as signals the transactor drives and reads.
class pkey_rtl_model {
public:
    sc_signal<bool> clk{"clk"}, rst_n{"rst_n"}, req_valid{"req_valid"}, req_ready{"req_ready"},
        req_qp_bound{"req_qp_bound"}, vrd_valid{"vrd_valid"}, vrd_accept{"vrd_accept"}, tbl_we{"tbl_we"},
        pkey_viol_in{"pkey_viol_in"}, qkey_viol_in{"qkey_viol_in"}, trap_valid{"trap_valid"};
    sc_signal<uint32_t> req_tag{"req_tag"}, req_pkey{"req_pkey"}, req_dqpn{"req_dqpn"}, req_dlid{"req_dlid"},
        req_pkey_index{"req_pkey_index"}, req_port{"req_port"}, vrd_tag{"vrd_tag"}, vrd_reason{"vrd_reason"},
        vrd_index{"vrd_index"}, vrd_local_key{"vrd_local_key"}, tbl_port{"tbl_port"}, tbl_index{"tbl_index"},
        tbl_data{"tbl_data"}, pkey_viol_count{"pkey_viol_count"}, qkey_viol_count{"qkey_viol_count"},
        trap_pkey{"trap_pkey"}, trap_local_key{"trap_local_key"}, trap_dqpn{"trap_dqpn"};
    virtual ~pkey_rtl_model() = default;
    virtual void trace(VerilatedFstC* tfp) = 0;
};

namespace {

template <class V>
class pkey_rtl_model_of final : public pkey_rtl_model {
public:
    pkey_rtl_model_of() : top_(new V("pkey_checker")) {
        V& t = *top_;
        t.clk(clk);
        t.rst_n(rst_n);
        t.req_valid(req_valid);
        t.req_ready(req_ready);
        t.req_tag(req_tag);
        t.req_pkey(req_pkey);
        t.req_dqpn(req_dqpn);
        t.req_dlid(req_dlid);
        t.req_qp_bound(req_qp_bound);
        t.req_pkey_index(req_pkey_index);
        t.req_port(req_port);
        t.vrd_valid(vrd_valid);
        t.vrd_tag(vrd_tag);
        t.vrd_accept(vrd_accept);
        t.vrd_reason(vrd_reason);
        t.vrd_index(vrd_index);
        t.vrd_local_key(vrd_local_key);
        t.tbl_we(tbl_we);
        t.tbl_port(tbl_port);
        t.tbl_index(tbl_index);
        t.tbl_data(tbl_data);
        t.pkey_viol_in(pkey_viol_in);
        t.qkey_viol_in(qkey_viol_in);
        t.pkey_viol_count(pkey_viol_count);
        t.qkey_viol_count(qkey_viol_count);
        t.trap_valid(trap_valid);
        t.trap_pkey(trap_pkey);
        t.trap_local_key(trap_local_key);
        t.trap_dqpn(trap_dqpn);
    }
    ~pkey_rtl_model_of() override { top_->final(); }
    void trace(VerilatedFstC* tfp) override { top_->trace(tfp, 99); }

private:
    std::unique_ptr<V> top_;
};

/// The same pins driving a plug-in library (rtl/abi/hcasim_rtl.h): evaluated whenever an input
/// changes, as the verilated SystemC module is, so outputs follow a delta cycle later.
class pkey_rtl_model_lib final : public pkey_rtl_model, public sc_module {
public:
    pkey_rtl_model_lib(sc_module_name name, const rtl_library& lib, const std::string& waves)
        : sc_module(name), lib_(lib), inst_(lib.create(this->name(), waves)) {
        SC_HAS_PROCESS(pkey_rtl_model_lib);
        SC_METHOD(eval);
        sensitive << clk << rst_n << req_valid << req_tag << req_pkey << req_dqpn << req_dlid << req_qp_bound
                  << req_pkey_index << req_port << tbl_we << tbl_port << tbl_index << tbl_data << pkey_viol_in
                  << qkey_viol_in;
    }
    ~pkey_rtl_model_lib() override { lib_.destroy(inst_); }
    void trace(VerilatedFstC*) override {}  // the library writes its own file

private:
    void eval() {
        p_.clk = clk.read();
        p_.rst_n = rst_n.read();
        p_.req_valid = req_valid.read();
        p_.req_tag = uint8_t(req_tag.read());
        p_.req_pkey = uint16_t(req_pkey.read());
        p_.req_dqpn = req_dqpn.read() & 0xFFFFFF;
        p_.req_dlid = uint16_t(req_dlid.read());
        p_.req_qp_bound = req_qp_bound.read();
        p_.req_pkey_index = uint16_t(req_pkey_index.read());
        p_.req_port = uint8_t(req_port.read());
        p_.tbl_we = tbl_we.read();
        p_.tbl_port = uint8_t(tbl_port.read());
        p_.tbl_index = uint16_t(tbl_index.read());
        p_.tbl_data = uint16_t(tbl_data.read());
        p_.pkey_viol_in = pkey_viol_in.read();
        p_.qkey_viol_in = qkey_viol_in.read();
        lib_.eval(inst_, &p_);
        req_ready.write(p_.req_ready & 1);
        vrd_valid.write(p_.vrd_valid & 1);
        vrd_tag.write(p_.vrd_tag);
        vrd_accept.write(p_.vrd_accept & 1);
        vrd_reason.write(p_.vrd_reason & 7u);
        vrd_index.write(p_.vrd_index);
        vrd_local_key.write(p_.vrd_local_key);
        pkey_viol_count.write(p_.pkey_viol_count);
        qkey_viol_count.write(p_.qkey_viol_count);
        trap_valid.write(p_.trap_valid & 1);
        trap_pkey.write(p_.trap_pkey);
        trap_local_key.write(p_.trap_local_key);
        trap_dqpn.write(p_.trap_dqpn & 0xFFFFFF);
    }

    const rtl_library& lib_;
    void* inst_;
    hcasim_rtl_pkey_checker_pins p_{};
};

}  // namespace

const std::vector<std::string>& pkey_checker_rtl::variants() {
    static const std::vector<std::string> v{"reference", "broken_membership"};
    return v;
}

pkey_checker_rtl::pkey_checker_rtl(const sc_module_name& name, const std::string& variant,
                                   const std::string& rtl_lib, const sc_time& period,
                                   const std::string& waves, pkey_rtl_client& client)
    : sc_module(name), client_(client), period_(period), half_(period / 2), waves_file_(waves) {
    if (!rtl_lib.empty()) {
        const std::string key = rtl_param_key(*this, "rtl_lib");
        if (variant != "reference")
            throw config_error(key + " '" + rtl_lib + "' and " + rtl_param_key(*this, "rtl_variant") + " '" +
                               variant + "' are both set: the library replaces the built-in builds; set one");
        const rtl_library& lib = rtl_library::load(rtl_lib, HCASIM_RTL_UNIT_PKEY_CHECKER, key);
        waves_file_ = rtl_library::waves_file(waves, this->name());
        m_ = std::make_unique<pkey_rtl_model_lib>("pkey_checker", lib, waves_file_);
    } else {
        if (!waves.empty())
            waves_ = rtl_waves::get(waves);  // before the model: tracing must be on when it is built
        if (variant == "reference")
            m_ = std::make_unique<pkey_rtl_model_of<Vpkey_checker>>();
        else if (variant == "broken_membership")
            m_ = std::make_unique<pkey_rtl_model_of<Vpkey_checker_broken>>();
        else
            throw config_error(std::string(this->name()) + ": no RTL variant '" + variant + "'");
    }
    SC_HAS_PROCESS(pkey_checker_rtl);
    SC_METHOD(edge);
    sensitive << kick_;
    dont_initialize();
}

pkey_checker_rtl::~pkey_checker_rtl() = default;

void pkey_checker_rtl::start_of_simulation() {
    // Verilator traces a SystemC model only once elaborated, and a file can take more models
    // only before it opens: every instance adds its model here, the first clock edge opens it.
    if (waves_) m_->trace(waves_->file());
    kick_.notify(SC_ZERO_TIME);  // the reset sequence
}

void pkey_checker_rtl::end_of_simulation() {
    if (waves_) waves_->close();
}

uint16_t pkey_checker_rtl::pkey_violation_count() const { return uint16_t(m_->pkey_viol_count.read()); }
uint16_t pkey_checker_rtl::qkey_violation_count() const { return uint16_t(m_->qkey_viol_count.read()); }

void pkey_checker_rtl::push(const op& o) {
    ops_.push(o);
    if (!running_) kick_.notify(SC_ZERO_TIME);
}

const pkey_checker_rtl::op* pkey_checker_rtl::next_op() {
    // A check only when the RTL is ready for one; writes and pulses at any cycle.
    if (reset_cycles_ || ops_.empty() || (ops_.front().kind == OP_CHECK && !m_->req_ready.read()))
        return nullptr;
    return ops_.pop();
}

void pkey_checker_rtl::check(const pkey_request& r) { push(op{OP_CHECK, r}); }

void pkey_checker_rtl::write_table(uint8_t port, uint16_t index, uint16_t data) {
    pkey_request r;
    r.port = port;
    r.pkey_index = index;
    r.pkey = data;
    push(op{OP_WRITE, r});
}

void pkey_checker_rtl::count_pkey_violation() { push(op{OP_PKEY_VIOL, {}}); }
void pkey_checker_rtl::count_qkey_violation() { push(op{OP_QKEY_VIOL, {}}); }

void pkey_checker_rtl::drive(const op* o) {
    pkey_rtl_model& m = *m_;
    const bool check = o && o->kind == OP_CHECK, write = o && o->kind == OP_WRITE;
    m.req_valid.write(check);
    m.tbl_we.write(write);
    m.pkey_viol_in.write(o && o->kind == OP_PKEY_VIOL);
    m.qkey_viol_in.write(o && o->kind == OP_QKEY_VIOL);
    if (check) {
        const pkey_request& r = o->req;
        m.req_tag.write(r.tag);
        m.req_pkey.write(r.pkey);
        m.req_dqpn.write(r.dqpn & 0xFFFFFF);
        m.req_dlid.write(r.dlid);
        m.req_qp_bound.write(r.qp_bound);
        m.req_pkey_index.write(r.pkey_index);
        m.req_port.write(r.port);
        ++in_flight_;
    } else if (write) {
        m.tbl_port.write(o->req.port);
        m.tbl_index.write(o->req.pkey_index);
        m.tbl_data.write(o->req.pkey);
    }
    driven_ = o != nullptr;
}

void pkey_checker_rtl::edge() {
    pkey_rtl_model& m = *m_;
    if (!running_) {
        // Woken from a stopped clock (clk low): drive the inputs now, raise the clock at the
        // next edge of the clock's grid (a delta later when that is now, so the RTL samples
        // inputs that have settled).
        running_ = true;
        if (waves_) waves_->open();  // (once)
        if (reset_cycles_) m.rst_n.write(false);
        drive(next_op());
        next_trigger(rtl_time_to_next_rise(period_));
        return;
    }
    if (!high_) {  // rising edge: the RTL samples its inputs
        m.clk.write(true);
        high_ = true;
        ++cycles_;
        next_trigger(half_);
        return;
    }
    // Falling edge: the outputs of the rising edge have settled.
    m.clk.write(false);
    high_ = false;
    if (reset_cycles_ && --reset_cycles_ == 0) m.rst_n.write(true);
    if (m.vrd_valid.read()) {
        pkey_verdict v;
        v.tag = uint8_t(m.vrd_tag.read());
        v.accept = m.vrd_accept.read();
        v.reason = uint8_t(m.vrd_reason.read());
        v.index = uint16_t(m.vrd_index.read());
        v.local_key = uint16_t(m.vrd_local_key.read());
        v.trap = m.trap_valid.read();
        if (in_flight_) --in_flight_;
        client_.rtl_verdict(v);  // may queue more operations
    }
    const op* o = next_op();
    drive(o);
    // Keep clocking while anything is driven, queued, in the pipeline, in reset, or not yet
    // ready. (What was driven for the edge just past has taken effect: its outputs are
    // registered.)
    if (o || !ops_.empty() || in_flight_ || reset_cycles_ || !m.req_ready.read()) {
        next_trigger(half_);
        return;
    }
    running_ = false;  // clock gated until the next operation (static sensitivity: kick_)
    client_.rtl_idle();
}

}  // namespace hcasim
