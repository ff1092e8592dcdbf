// Typed, documented, overridable parameters (VCML-style properties).
//
// A param is a public member of the sc_module it configures, so its key is the module's
// hierarchical name plus the param name: `node0.pcie.lanes`. Values come from the broker,
// loaded from INI files (--config) and key=value overrides (--set) before elaboration.
// Lookup tries the full key first, then the key without its first component, so
// `pcie.lanes=16` sets every node and `node1.pcie.lanes=8` overrides node1 only. A key
// `nodeN.link.X` may also be set as `linkN.X` (the cable of node N), between the two.
// After elaboration broker::check_unused() fails on any key no param consumed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "model/core/registry.h"

namespace hcasim {

/// A configuration problem: one line naming the key, file and line (or --set).
class config_error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class param_base;

/// Full key for `name` declared now: "<current sc_module name>.<name>" while a module is
/// under construction, else `name`. Used by params and counters.
std::string scoped_key(const char* name);

/// What --help-config prints for one parameter.
struct param_info {
    std::string key;      ///< generic key, without node prefix (e.g. "pcie.lanes")
    std::string type;     ///< "bool", "int", "uint", "double", "string"
    std::string unit;     ///< e.g. "ns", "bytes", "" if unitless
    std::string def;      ///< default value as text
    std::string help;     ///< one line
    std::string choices;  ///< "a|b|c" for enumerated strings, else ""
    std::string range;    ///< allowed values, "[1,16]" or "[1,10000] or 0"; "" if any value of the type
};

/// Allowed values of a numeric parameter: [lo, hi] inclusive, and optionally one value outside
/// it that means something else (a unit clock's 0: the HCA's clock; -1: never).
template <typename T>
struct bounds {
    bounds(T lo_, T hi_) : lo(lo_), hi(hi_) {}
    bounds(T lo_, T hi_, T also_) : lo(lo_), hi(hi_), also(also_) {}
    T lo, hi;
    std::optional<T> also;
};
/// Stands in for bounds<T> where T is not a number (string params take choices instead).
struct no_bounds {};

/// Holds configured key=value pairs and the registry of declared params. One per process
/// (one simulation per process).
class broker {
public:
    static broker& instance();

    /// Sets key to value; origin is "file:line" or "--set". Later sets win.
    void set(const std::string& key, const std::string& value, const std::string& origin);
    /// Parses an INI file: `[section]` prefixes keys ("[pcie]" + "lanes = 8" -> "pcie.lanes"),
    /// `#` and `;` start comments. Throws config_error naming file and line on bad syntax,
    /// a missing or unreadable file, a directory, a NUL byte, a line longer than
    /// max_ini_line_bytes or more than max_ini_lines lines (an endless stream).
    void load_ini(const std::string& path);
    static constexpr std::size_t max_ini_line_bytes = 4096;
    static constexpr std::size_t max_ini_lines = 100000;
    /// Parses "key=value" (from --set). Throws config_error on bad syntax.
    void set_override(const std::string& assignment);

    /// Raw value for a param with hierarchical key `full` ("node0.pcie.lanes"): exact key,
    /// else (for "nodeN.link.X") "linkN.X", else `full` without its first component. Marks
    /// the keys used. `origin` receives where the value came from, for error messages.
    std::optional<std::string> lookup(const std::string& full, std::string* origin = nullptr);

    /// Called by params on construction/destruction; the registry feeds --help-config and the
    /// "config" object of the stats JSON.
    void declare(param_base* p);
    void undeclare(param_base* p);
    const std::vector<param_base*>& params() const { return params_.items(); }

    /// Throws config_error for the first key set but never consumed by a param:
    /// "unknown configuration key 'x' (file.ini:12)"; then the same for --log patterns
    /// (log_settings::check_unused).
    void check_unused() const;
    /// One entry per distinct generic key, sorted, for --help-config.
    std::vector<param_info> help() const;
    /// Forget all values and params (tests only).
    void reset();

private:
    struct entry {
        std::string key, value, origin;
        mutable bool used = false;
    };
    std::vector<entry> entries_;
    slot_registry<param_base> params_;
};

/// Untyped part of a param.
class param_base {
public:
    /// Full hierarchical key, e.g. "node0.hca.port.vcrc_check".
    const std::string& key() const { return key_; }
    /// Key without node prefix, as listed by --help-config.
    std::string generic_key() const;
    virtual param_info info() const = 0;
    /// Current value as text (for the stats JSON "config" object).
    virtual std::string str() const = 0;
    virtual ~param_base();

protected:
    /// `name` is relative to the current sc_module under construction (or the full key if
    /// constructed outside any module).
    param_base(const char* name, const char* unit, const char* help);
    std::string key_, unit_, help_;
};

/// A parameter of type T: bool, int64_t, uint64_t, int, unsigned, double, std::string.
template <typename T>
class param : public param_base {
public:
    param(const char* name, T def, const char* unit, const char* help);
    /// Enumerated string parameter; values outside `choices` are a config_error.
    param(const char* name, T def, const char* unit, const char* help, std::vector<std::string> choices);
    using bounds_type = std::conditional_t<std::is_arithmetic_v<T>, bounds<T>, no_bounds>;
    /// Numeric parameter with its allowed values, checked as the value resolves: before the
    /// module that declares it sizes or builds anything from it. --help-config lists them.
    param(const char* name, T def, const char* unit, const char* help, bounds_type allowed);
    /// Adds a range check (inclusive); a value outside it is a config_error. Chainable.
    param& range(T lo, T hi);

    operator const T&() const { return value_; }
    const T& get() const { return value_; }
    param_info info() const override;
    std::string str() const override;

private:
    void resolve();
    /// Checks choices and range; throws config_error naming key and origin.
    void validate() const;
    [[noreturn]] void fail(const std::string& expected) const;
    T value_, def_;
    std::vector<std::string> choices_;
    bool configured_ = false;         ///< value came from the broker (else the default)
    std::string raw_;                 ///< configured text, for error messages
    std::string origin_ = "default";  ///< "file:line", "--set" or "default"
    bool has_range_ = false;
    T lo_{}, hi_{};
    std::optional<T> also_;  ///< a value allowed outside [lo_, hi_]
};

extern template class param<bool>;
extern template class param<int>;
extern template class param<unsigned>;
extern template class param<int64_t>;
extern template class param<uint64_t>;
extern template class param<double>;
extern template class param<std::string>;

}  // namespace hcasim
