#include "model/hca/rtl_plugin.h"

#include <dlfcn.h>

#include <map>
#include <memory>

#include "model/core/param.h"

namespace hcasim {

const rtl_library& rtl_library::load(const std::string& path, const std::string& unit,
                                     const std::string& key) {
    static std::map<std::string, std::unique_ptr<rtl_library>> loaded;  // by path (+ unit)
    auto& slot = loaded[path + '\n' + unit];
    if (slot) return *slot;
    const std::string who = key + ": '" + path + "'";
    // RTLD_LOCAL: the library's symbols (its Verilator runtime) never serve anyone else. It
    // stays loaded until the program ends.
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char* e = dlerror();
        throw config_error(who + ": cannot be opened: " + (e ? e : "?"));
    }
    auto sym = [&](const char* name) {
        dlerror();
        void* s = dlsym(h, name);
        if (!s) {
            dlclose(h);
            throw config_error(who + ": not an hcasim RTL plug-in: missing symbol '" + std::string(name) +
                               "' (rtl/abi/hcasim_rtl.h)");
        }
        return s;
    };
    const auto version = reinterpret_cast<hcasim_rtl_abi_version_fn>(sym("hcasim_rtl_abi_version"));
    const auto unit_of = reinterpret_cast<hcasim_rtl_unit_fn>(sym("hcasim_rtl_unit"));
    auto lib = std::make_unique<rtl_library>();
    lib->create_ = reinterpret_cast<hcasim_rtl_create_fn>(sym("hcasim_rtl_create"));
    lib->eval_ = reinterpret_cast<hcasim_rtl_eval_fn>(sym("hcasim_rtl_eval"));
    lib->destroy_ = reinterpret_cast<hcasim_rtl_destroy_fn>(sym("hcasim_rtl_destroy"));
    const uint32_t v = version();
    if (v != HCASIM_RTL_ABI_VERSION) {
        dlclose(h);
        throw config_error(who + ": plug-in ABI version " + std::to_string(v) + ", but hcasim's is " +
                           std::to_string(HCASIM_RTL_ABI_VERSION) +
                           " (rebuild the library against this hcasim's rtl/abi/hcasim_rtl.h)");
    }
    const char* u = unit_of();
    const std::string lib_unit = u ? u : "";
    if (lib_unit != unit) {
        dlclose(h);
        throw config_error(who + ": a plug-in for the '" + lib_unit + "' unit, not the '" + unit + "'");
    }
    lib->path_ = path;
    lib->key_ = key;
    slot = std::move(lib);
    return *slot;
}

void* rtl_library::create(const std::string& scope, const std::string& waves) const {
    char error[512] = "";
    void* in = create_(scope.c_str(), waves.c_str(), error, sizeof error);
    if (!in)
        throw config_error(key_ + ": '" + path_ + "': hcasim_rtl_create failed for " + scope + ": " +
                           (error[0] ? error : "no reason given"));
    return in;
}

std::string rtl_library::waves_file(const std::string& waves, const std::string& scope) {
    if (waves.empty()) return "";
    const bool fst = waves.size() > 4 && waves.compare(waves.size() - 4, 4, ".fst") == 0;
    return (fst ? waves.substr(0, waves.size() - 4) : waves) + "." + scope + ".fst";
}

std::string rtl_param_key(const sc_core::sc_object& transactor, const char* param) {
    const sc_core::sc_object* parent = transactor.get_parent_object();
    return std::string((parent ? parent : &transactor)->name()) + "." + param;
}

}  // namespace hcasim
