#include "model/hca/cq_writer_rtl.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "Vcq_writer.h"
#include "Vcq_writer_broken.h"
#include "model/core/param.h"
#include "model/hca/rtl_plugin.h"
#include "verilated.h"
#include "verilated_fst_sc.h"

namespace hcasim {

using namespace sc_core;

const char* cq_rtl_reason_name(uint8_t r) {
    static const char* const names[] = {
        "written",          "no such CQ",      "overrun (CQ full or in error)",
        "CQE write failed", "EQ 0 not loaded", "EQE write failed"};
    return r < 6 ? names[r] : "?";
}

std::string cq_rtl_answer::str() const {
    char b[160];
    std::snprintf(b, sizeof b, "%s, reason %u (%s), EQE %s, MSI %s, disarmed %s",
                  written ? "WRITTEN" : "NOT WRITTEN", unsigned(reason), cq_rtl_reason_name(reason),
                  eqe ? "yes" : "no", msi ? "yes" : "no", disarmed ? "yes" : "no");
    return b;
}

/// The verilated module's pins as signals the transactor drives and reads.
class cq_rtl_model {
public:
    sc_signal<bool> clk{"clk"}, rst_n{"rst_n"}, cmp_valid{"cmp_valid"}, cmp_ready{"cmp_ready"},
        cmp_solicited{"cmp_solicited"}, ev_valid{"ev_valid"}, ev_ready{"ev_ready"}, rsp_valid{"rsp_valid"},
        rsp_written{"rsp_written"}, rsp_eqe{"rsp_eqe"}, rsp_msi{"rsp_msi"}, rsp_disarmed{"rsp_disarmed"},
        cqc_we{"cqc_we"}, eqc_we{"eqc_we"}, cqdb_valid{"cqdb_valid"}, msi_we{"msi_we"}, mw_valid{"mw_valid"},
        mw_ready{"mw_ready"}, mwr_valid{"mwr_valid"}, mwr_err{"mwr_err"}, idle{"idle"};
    sc_signal<uint32_t> cmp_tag{"cmp_tag"}, cmp_cqn{"cmp_cqn"}, ev_tag{"ev_tag"}, ev_type{"ev_type"},
        ev_subtype{"ev_subtype"}, ev_resource{"ev_resource"}, rsp_tag{"rsp_tag"}, rsp_reason{"rsp_reason"},
        cqc_op{"cqc_op"}, cqc_cqn{"cqc_cqn"}, cqc_log_size{"cqc_log_size"}, cqc_eqn{"cqc_eqn"},
        cqc_consumer{"cqc_consumer"}, eqc_eqn{"eqc_eqn"}, eqc_log_size{"eqc_log_size"}, cqdb_cqn{"cqdb_cqn"},
        cqdb_consumer{"cqdb_consumer"}, cqdb_arm{"cqdb_arm"}, msi_data_in{"msi_data_in"}, mw_len{"mw_len"};
    sc_signal<uint64_t> cqc_base{"cqc_base"}, eqc_base{"eqc_base"}, msi_addr_in{"msi_addr_in"},
        mw_addr{"mw_addr"};
    sc_signal<sc_dt::sc_bv<512>> cmp_cqe{"cmp_cqe"}, mw_data{"mw_data"};
    virtual ~cq_rtl_model() = default;
    virtual void trace(VerilatedFstC* tfp) = 0;
};

namespace {

template <class V>
class cq_rtl_model_of final : public cq_rtl_model {
public:
    cq_rtl_model_of() : top_(new V("cq_writer")) {
        V& t = *top_;
        t.clk(clk);
        t.rst_n(rst_n);
        t.cmp_valid(cmp_valid);
        t.cmp_ready(cmp_ready);
        t.cmp_solicited(cmp_solicited);
        t.ev_valid(ev_valid);
        t.ev_ready(ev_ready);
        t.rsp_valid(rsp_valid);
        t.rsp_written(rsp_written);
        t.rsp_eqe(rsp_eqe);
        t.rsp_msi(rsp_msi);
        t.rsp_disarmed(rsp_disarmed);
        t.cqc_we(cqc_we);
        t.eqc_we(eqc_we);
        t.cqdb_valid(cqdb_valid);
        t.msi_we(msi_we);
        t.mw_valid(mw_valid);
        t.mw_ready(mw_ready);
        t.mwr_valid(mwr_valid);
        t.mwr_err(mwr_err);
        t.idle(idle);
        t.cmp_tag(cmp_tag);
        t.cmp_cqn(cmp_cqn);
        t.ev_tag(ev_tag);
        t.ev_type(ev_type);
        t.ev_subtype(ev_subtype);
        t.ev_resource(ev_resource);
        t.rsp_tag(rsp_tag);
        t.rsp_reason(rsp_reason);
        t.cqc_op(cqc_op);
        t.cqc_cqn(cqc_cqn);
        t.cqc_log_size(cqc_log_size);
        t.cqc_eqn(cqc_eqn);
        t.cqc_consumer(cqc_consumer);
        t.eqc_eqn(eqc_eqn);
        t.eqc_log_size(eqc_log_size);
        t.cqdb_cqn(cqdb_cqn);
        t.cqdb_consumer(cqdb_consumer);
        t.cqdb_arm(cqdb_arm);
        t.msi_data_in(msi_data_in);
        t.mw_len(mw_len);
        t.cqc_base(cqc_base);
        t.eqc_base(eqc_base);
        t.msi_addr_in(msi_addr_in);
        t.mw_addr(mw_addr);
        t.cmp_cqe(cmp_cqe);
        t.mw_data(mw_data);
    }
    ~cq_rtl_model_of() override { top_->final(); }
    void trace(VerilatedFstC* tfp) override { top_->trace(tfp, 99); }

private:
    std::unique_ptr<V> top_;
};

/// The same pins driving a plug-in library (rtl/abi/hcasim_rtl.h): evaluated whenever an input
/// changes, as the verilated SystemC module is, so outputs follow a delta cycle later.
class cq_rtl_model_lib final : public cq_rtl_model, public sc_module {
public:
    cq_rtl_model_lib(sc_module_name name, const rtl_library& lib, const std::string& waves)
        : sc_module(name), lib_(lib), inst_(lib.create(this->name(), waves)) {
        SC_HAS_PROCESS(cq_rtl_model_lib);
        SC_METHOD(eval);
        sensitive << clk << rst_n << cmp_valid << cmp_tag << cmp_cqn << cmp_solicited << cmp_cqe << ev_valid
                  << ev_tag << ev_type << ev_subtype << ev_resource << cqc_we << cqc_op << cqc_cqn << cqc_base
                  << cqc_log_size << cqc_eqn << cqc_consumer << eqc_we << eqc_eqn << eqc_base << eqc_log_size
                  << cqdb_valid << cqdb_cqn << cqdb_consumer << cqdb_arm << msi_we << msi_addr_in
                  << msi_data_in << mw_ready << mwr_valid << mwr_err;
    }
    ~cq_rtl_model_lib() override { lib_.destroy(inst_); }
    void trace(VerilatedFstC*) override {}  // the library writes its own file

private:
    void eval() {
        p_.clk = clk.read();
        p_.rst_n = rst_n.read();
        p_.cmp_valid = cmp_valid.read();
        p_.cmp_tag = uint8_t(cmp_tag.read());
        p_.cmp_cqn = cmp_cqn.read() & 0xFFFFFF;
        p_.cmp_solicited = cmp_solicited.read();
        if (cmp_cqe.event() || first_) {  // the 512 bits only when they changed
            const sc_dt::sc_bv<512>& d = cmp_cqe.read();
            for (int i = 0; i < 16; ++i) p_.cmp_cqe[i] = d.get_word(i);
        }
        first_ = false;
        p_.ev_valid = ev_valid.read();
        p_.ev_tag = uint8_t(ev_tag.read());
        p_.ev_type = uint8_t(ev_type.read());
        p_.ev_subtype = uint8_t(ev_subtype.read());
        p_.ev_resource = ev_resource.read();
        p_.cqc_we = cqc_we.read();
        p_.cqc_op = uint8_t(cqc_op.read() & 3);
        p_.cqc_cqn = cqc_cqn.read() & 0xFFFFFF;
        p_.cqc_base = cqc_base.read();
        p_.cqc_log_size = uint8_t(cqc_log_size.read() & 0x1F);
        p_.cqc_eqn = uint16_t(cqc_eqn.read());
        p_.cqc_consumer = cqc_consumer.read() & 0xFFFFFF;
        p_.eqc_we = eqc_we.read();
        p_.eqc_eqn = uint16_t(eqc_eqn.read());
        p_.eqc_base = eqc_base.read();
        p_.eqc_log_size = uint8_t(eqc_log_size.read() & 0x1F);
        p_.cqdb_valid = cqdb_valid.read();
        p_.cqdb_cqn = cqdb_cqn.read() & 0xFFFFFF;
        p_.cqdb_consumer = cqdb_consumer.read() & 0xFFFFFF;
        p_.cqdb_arm = uint8_t(cqdb_arm.read() & 3);
        p_.msi_we = msi_we.read();
        p_.msi_addr_in = msi_addr_in.read();
        p_.msi_data_in = msi_data_in.read();
        p_.mw_ready = mw_ready.read();
        p_.mwr_valid = mwr_valid.read();
        p_.mwr_err = mwr_err.read();
        lib_.eval(inst_, &p_);
        cmp_ready.write(p_.cmp_ready & 1);
        ev_ready.write(p_.ev_ready & 1);
        rsp_valid.write(p_.rsp_valid & 1);
        rsp_tag.write(p_.rsp_tag);
        rsp_written.write(p_.rsp_written & 1);
        rsp_reason.write(p_.rsp_reason & 7u);
        rsp_eqe.write(p_.rsp_eqe & 1);
        rsp_msi.write(p_.rsp_msi & 1);
        rsp_disarmed.write(p_.rsp_disarmed & 1);
        mw_valid.write(p_.mw_valid & 1);
        mw_addr.write(p_.mw_addr);
        if (std::memcmp(mw_words_, p_.mw_data, sizeof mw_words_) !=
            0) {  // the 512 bits only when they change
            std::memcpy(mw_words_, p_.mw_data, sizeof mw_words_);
            sc_dt::sc_bv<512> d;
            for (int i = 0; i < 16; ++i) d.set_word(i, mw_words_[i]);
            mw_data.write(d);
        }
        mw_len.write(p_.mw_len & 0x7Fu);
        idle.write(p_.idle & 1);
    }

    const rtl_library& lib_;
    void* inst_;
    hcasim_rtl_cq_writer_pins p_{};
    uint32_t mw_words_[16] = {};
    bool first_ = true;
};

}  // namespace

const std::vector<std::string>& cq_writer_rtl::variants() {
    static const std::vector<std::string> v{"reference", "broken_owner"};
    return v;
}

cq_writer_rtl::cq_writer_rtl(const sc_module_name& name, const std::string& variant,
                             const std::string& rtl_lib, const sc_time& period, const std::string& waves,
                             cq_rtl_client& client)
    : sc_module(name), dma("dma"), client_(client), period_(period), half_(period / 2), waves_file_(waves) {
    if (!rtl_lib.empty()) {
        const std::string key = rtl_param_key(*this, "rtl_lib");
        if (variant != "reference")
            throw config_error(key + " '" + rtl_lib + "' and " + rtl_param_key(*this, "rtl_variant") + " '" +
                               variant + "' are both set: the library replaces the built-in builds; set one");
        const rtl_library& lib = rtl_library::load(rtl_lib, HCASIM_RTL_UNIT_CQ_WRITER, key);
        waves_file_ = rtl_library::waves_file(waves, this->name());
        m_ = std::make_unique<cq_rtl_model_lib>("cq_writer", lib, waves_file_);
    } else {
        if (!waves.empty())
            waves_ = rtl_waves::get(waves);  // before the model: tracing must be on when it is built
        if (variant == "reference")
            m_ = std::make_unique<cq_rtl_model_of<Vcq_writer>>();
        else if (variant == "broken_owner")
            m_ = std::make_unique<cq_rtl_model_of<Vcq_writer_broken>>();
        else
            throw config_error(std::string(this->name()) + ": no RTL variant '" + variant + "'");
    }
    SC_HAS_PROCESS(cq_writer_rtl);
    SC_METHOD(edge);
    sensitive << kick_;
    dont_initialize();
}

cq_writer_rtl::~cq_writer_rtl() = default;

void cq_writer_rtl::start_of_simulation() {
    // As pkey_checker_rtl: every instance adds its model to a shared file before it opens.
    if (waves_) m_->trace(waves_->file());
    m_->mw_ready.write(true);    // the transactor takes every write at once (the DMA is a TLM call)
    kick_.notify(SC_ZERO_TIME);  // the reset sequence
}

void cq_writer_rtl::end_of_simulation() {
    if (waves_) waves_->close();
}

void cq_writer_rtl::push(const cq_rtl_op& o) {
    ops_.push(o);
    if (!running_) kick_.notify(SC_ZERO_TIME);
}

void cq_writer_rtl::complete(uint8_t tag, uint32_t cqn, const hw::cqe& e, bool solicited) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::COMPLETE;
    o.tag = tag;
    o.num = cqn;
    o.solicited = solicited;
    o.cqe = e;
    push(o);
}

void cq_writer_rtl::post_event(uint8_t tag, uint8_t type, uint32_t resource, uint8_t subtype) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::EVENT;
    o.tag = tag;
    o.code = type;
    o.num = resource;
    o.subtype = subtype;
    push(o);
}

void cq_writer_rtl::load_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint16_t eqn) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::CQC;
    o.code = 1;
    o.num = cqn;
    o.addr = base;
    o.log_size = log_size;
    o.eqn = eqn;
    push(o);
}

void cq_writer_rtl::destroy_cq(uint32_t cqn) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::CQC;
    o.code = 2;
    o.num = cqn;
    push(o);
}

void cq_writer_rtl::resize_cq(uint32_t cqn, uint64_t base, uint8_t log_size, uint32_t consumer) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::CQC;
    o.code = 3;
    o.num = cqn;
    o.addr = base;
    o.log_size = log_size;
    o.value = consumer;
    push(o);
}

void cq_writer_rtl::load_eq(uint32_t eqn, uint64_t base, uint8_t log_size) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::EQC;
    o.num = eqn;
    o.addr = base;
    o.log_size = log_size;
    push(o);
}

void cq_writer_rtl::doorbell(uint32_t cqn, uint32_t consumer, uint8_t arm) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::DOORBELL;
    o.num = cqn;
    o.value = consumer;
    o.code = arm;
    push(o);
}

void cq_writer_rtl::set_msi(uint64_t addr, uint32_t data) {
    cq_rtl_op o;
    o.kind = cq_rtl_op::MSI;
    o.addr = addr;
    o.value = data;
    push(o);
}

const cq_rtl_op* cq_writer_rtl::next_op() {
    // One at a time, in order: a request or a port write only while the RTL is idle with
    // nothing in flight (the TLM's calls are atomic: docs/cosim.md).
    if (reset_cycles_ || ops_.empty() || in_flight_ || outstanding_ || !m_->idle.read() ||
        !m_->cmp_ready.read())
        return nullptr;
    return ops_.pop();
}

void cq_writer_rtl::drive(const cq_rtl_op* o) {
    cq_rtl_model& m = *m_;
    const cq_rtl_op::kind_t k = o ? o->kind : cq_rtl_op::COMPLETE;
    m.cmp_valid.write(o && k == cq_rtl_op::COMPLETE);
    m.ev_valid.write(o && k == cq_rtl_op::EVENT);
    m.cqc_we.write(o && k == cq_rtl_op::CQC);
    m.eqc_we.write(o && k == cq_rtl_op::EQC);
    m.cqdb_valid.write(o && k == cq_rtl_op::DOORBELL);
    m.msi_we.write(o && k == cq_rtl_op::MSI);
    if (!o) return;
    switch (k) {
    case cq_rtl_op::COMPLETE: {
        sc_dt::sc_bv<512> bv;
        uint32_t w[16];
        std::memcpy(w, &o->cqe, sizeof w);
        for (int i = 0; i < 16; ++i) bv.range(32 * i + 31, 32 * i) = w[i];
        m.cmp_tag.write(o->tag);
        m.cmp_cqn.write(o->num & 0xFFFFFF);
        m.cmp_solicited.write(o->solicited);
        m.cmp_cqe.write(bv);
        ++in_flight_;
        break;
    }
    case cq_rtl_op::EVENT:
        m.ev_tag.write(o->tag);
        m.ev_type.write(o->code);
        m.ev_subtype.write(o->subtype);
        m.ev_resource.write(o->num);
        ++in_flight_;
        break;
    case cq_rtl_op::CQC:
        m.cqc_op.write(o->code);
        m.cqc_cqn.write(o->num & 0xFFFFFF);
        m.cqc_base.write(o->addr);
        m.cqc_log_size.write(o->log_size & 0x1F);
        m.cqc_eqn.write(o->eqn);
        m.cqc_consumer.write(o->value & 0xFFFFFF);
        break;
    case cq_rtl_op::EQC:
        m.eqc_eqn.write(o->num & 0xFFFF);
        m.eqc_base.write(o->addr);
        m.eqc_log_size.write(o->log_size & 0x1F);
        break;
    case cq_rtl_op::DOORBELL:
        m.cqdb_cqn.write(o->num & 0xFFFFFF);
        m.cqdb_consumer.write(o->value & 0xFFFFFF);
        m.cqdb_arm.write(o->code & 3);
        break;
    case cq_rtl_op::MSI:
        m.msi_addr_in.write(o->addr);
        m.msi_data_in.write(o->value);
        break;
    }
}

void cq_writer_rtl::edge() {
    cq_rtl_model& m = *m_;
    if (!running_) {
        // Woken from a stopped clock (clk low): drive the inputs now, raise the clock at the
        // next edge of the clock's grid (a delta later when that is now).
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
    // The outstanding write's response, at the first falling edge at or after its completion.
    const bool respond = outstanding_ && sc_time_stamp() >= respond_at_;
    m.mwr_valid.write(respond);
    m.mwr_err.write(respond && write_failed_);
    if (respond) outstanding_ = false;
    // A write presented now is taken at the next rising edge (mw_ready is always high): it
    // becomes a DMA write from that edge, and its response is driven at the first falling
    // edge at or after the write's completion (and after the handshake).
    if (m.mw_valid.read() && !outstanding_ && !respond) {
        const sc_dt::sc_bv<512> d = m.mw_data.read();
        for (int i = 0; i < 16; ++i) {
            const uint32_t w = d.range(32 * i + 31, 32 * i).to_uint();
            std::memcpy(wbuf_ + 4 * i, &w, 4);
        }
        sc_time delay = half_;
        const uint32_t n = std::min<uint32_t>(m.mw_len.read(), 64);
        write_failed_ = !dma.write(m.mw_addr.read(), wbuf_, n, delay);
        ++writes_;
        if (write_failed_) ++write_errors_;
        const uint64_t p = period_.value(), dv = delay.value();
        respond_at_ = sc_time_stamp() + period_ * double(std::max<uint64_t>(1, (dv + p - 1) / p));
        outstanding_ = true;
    }
    if (m.rsp_valid.read()) {
        cq_rtl_answer a;
        a.tag = uint8_t(m.rsp_tag.read());
        a.written = m.rsp_written.read();
        a.reason = uint8_t(m.rsp_reason.read());
        a.eqe = m.rsp_eqe.read();
        a.msi = m.rsp_msi.read();
        a.disarmed = m.rsp_disarmed.read();
        if (in_flight_) --in_flight_;
        client_.rtl_answer(a);  // may queue more operations
    }
    const cq_rtl_op* o = next_op();
    drive(o);
    if (o || !ops_.empty() || in_flight_ || outstanding_ || respond || reset_cycles_ || !m.idle.read() ||
        !m.cmp_ready.read()) {
        next_trigger(half_);
        return;
    }
    running_ = false;  // clock gated until the next operation (static sensitivity: kick_)
    client_.rtl_idle();
}

}  // namespace hcasim
