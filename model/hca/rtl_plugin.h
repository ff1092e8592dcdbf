// A unit's RTL from a plug-in library (rtl/abi/hcasim_rtl.h): loaded with dlopen when
// hca.<unit>.rtl_lib names one, checked (the five symbols, the ABI version, the unit), and
// shared by every instance that names the same file. docs/cosim.md, "Plug-in libraries".
#pragma once
#include <systemc>

#include <cstdint>
#include <string>

#include "rtl/abi/hcasim_rtl.h"

namespace hcasim {

class rtl_library {
public:
    /// The library at `path` implementing `unit` (HCASIM_RTL_UNIT_*), loaded on first use.
    /// config_error naming `key` (the rtl_lib parameter) and the path when it cannot be opened,
    /// lacks a symbol, has another ABI version or implements another unit.
    static const rtl_library& load(const std::string& path, const std::string& unit, const std::string& key);

    /// A new instance (hcasim_rtl_create); config_error naming the key and path if it fails.
    void* create(const std::string& scope, const std::string& waves) const;
    void eval(void* instance, void* pins) const { eval_(instance, pins, now_ps()); }
    void destroy(void* instance) const { destroy_(instance); }
    const std::string& path() const { return path_; }

    /// The FST file a plug-in instance `scope` writes for --waves `waves`: its own (the library
    /// has its own Verilator runtime), the scope inserted before ".fst" ("w.fst", "node0.x.rtl":
    /// "w.node0.x.rtl.fst").
    static std::string waves_file(const std::string& waves, const std::string& scope);
    /// SystemC's time now in picoseconds.
    static uint64_t now_ps() {
        return uint64_t(sc_core::sc_time_stamp() / sc_core::sc_time(1, sc_core::SC_PS));
    }

private:
    std::string path_, key_;
    hcasim_rtl_create_fn create_ = nullptr;
    hcasim_rtl_eval_fn eval_ = nullptr;
    hcasim_rtl_destroy_fn destroy_ = nullptr;
};

/// The key of a transactor's parameter `param` as the user sets it: its parent unit's
/// ("node0.hca.pkey_checker.rtl_lib"), or its own name's when it has no parent (a test bench).
std::string rtl_param_key(const sc_core::sc_object& transactor, const char* param);

}  // namespace hcasim
