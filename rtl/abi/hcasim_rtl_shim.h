// The C++ side of a plug-in library (hcasim_rtl.h) around a Verilator --cc model: one instance
// = its own VerilatedContext, the model and, when asked, its own FST file. A unit's shim
// (pkey_checker_shim.cpp, cq_writer_shim.cpp) copies its pin struct to the model's ports and
// back and exports the ABI's five symbols with HCASIM_RTL_SHIM. Needs Verilator's headers and
// runtime (verilated.cpp, verilated_fst_c.cpp), no SystemC.
#pragma once
#include <verilated.h>
#include <verilated_fst_c.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>

#include "hcasim_rtl.h"

namespace hcasim_rtl_shim {

template <class V>
struct instance {
    std::unique_ptr<VerilatedContext> ctx;
    std::unique_ptr<V> top;
    std::unique_ptr<VerilatedFstC> tfp;
    uint64_t scale_mul = 1, scale_div = 1;  // ps to the model's time precision
    uint64_t pending = 0;                   // the time of the state not yet dumped...
    bool dirty = false;                     // ...if any
};

template <class V>
void* create(const char* scope, const char* waves, char* error, size_t error_len) {
    try {
        auto in = std::make_unique<instance<V>>();
        in->ctx = std::make_unique<VerilatedContext>();
        const bool trace = waves && *waves;
        if (trace) in->ctx->traceEverOn(true);
        in->top = std::make_unique<V>(in->ctx.get(), scope && *scope ? scope : "TOP");
        for (int p = in->ctx->timeprecision(); p < -12; ++p) in->scale_mul *= 10;  // finer than ps
        for (int p = in->ctx->timeprecision(); p > -12; --p) in->scale_div *= 10;  // coarser
        if (trace) {
            in->tfp = std::make_unique<VerilatedFstC>();
            in->top->trace(in->tfp.get(), 99);
            in->tfp->open(waves);
            if (!in->tfp->isOpen()) {
                std::snprintf(error, error_len, "cannot write the waves file '%s'", waves);
                return nullptr;
            }
        }
        return in.release();
    } catch (const std::exception& e) {
        std::snprintf(error, error_len, "%s", e.what());
        return nullptr;
    }
}

/// `in(model, pins)` drives the model's inputs, `out(model, pins)` reads its outputs.
template <class V, class Pins, void (*In)(V&, const Pins&), void (*Out)(const V&, Pins&)>
void eval(void* h, void* pins, uint64_t time_ps) {
    instance<V>& in = *static_cast<instance<V>*>(h);
    Pins& p = *static_cast<Pins*>(pins);
    const uint64_t t = time_ps * in.scale_mul / in.scale_div;
    if (in.tfp && in.dirty && t > in.pending) in.tfp->dump(in.pending);  // the settled state
    if (t > in.ctx->time()) in.ctx->time(t);
    In(*in.top, p);
    in.top->eval();
    Out(*in.top, p);
    in.pending = t;
    in.dirty = true;
}

template <class V>
void destroy(void* h) {
    std::unique_ptr<instance<V>> in(static_cast<instance<V>*>(h));
    if (in->tfp && in->dirty) in->tfp->dump(in->pending);
    in->top->final();
    if (in->tfp) in->tfp->close();
}

}  // namespace hcasim_rtl_shim

/// Defines the ABI's symbols for verilated class V implementing unit UNIT (HCASIM_RTL_UNIT_*)
/// with pin struct PINS, copied by IN and OUT.
#define HCASIM_RTL_SHIM(UNIT, V, PINS, IN, OUT)                                               \
    extern "C" uint32_t hcasim_rtl_abi_version(void) { return HCASIM_RTL_ABI_VERSION; }       \
    extern "C" const char* hcasim_rtl_unit(void) { return UNIT; }                             \
    extern "C" void* hcasim_rtl_create(const char* s_, const char* w_, char* e_, size_t n_) { \
        return hcasim_rtl_shim::create<V>(s_, w_, e_, n_);                                    \
    }                                                                                         \
    extern "C" void hcasim_rtl_eval(void* h_, void* p_, uint64_t t_) {                        \
        hcasim_rtl_shim::eval<V, PINS, IN, OUT>(h_, p_, t_);                                  \
    }                                                                                         \
    extern "C" void hcasim_rtl_destroy(void* h_) { hcasim_rtl_shim::destroy<V>(h_); }
