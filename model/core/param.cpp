// Parameters and the configuration broker; see param.h.
#include "param.h"

#include "model/core/log.h"
#include "model/core/text_file.h"

#include <systemc>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

namespace hcasim {

namespace {

std::string trim(const std::string& s) {
    const char* ws = " \t\r\n\f\v";
    const auto b = s.find_first_not_of(ws);
    if (b == std::string::npos) return {};
    const auto e = s.find_last_not_of(ws);
    return s.substr(b, e - b + 1);
}

/// Keys are dot-separated components of [A-Za-z0-9_-]; none may be empty.
bool valid_key(const std::string& k) {
    if (k.empty() || k.front() == '.' || k.back() == '.') return false;
    char prev = 0;
    for (char c : k) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                        c == '_' || c == '-' || c == '.';
        if (!ok || (c == '.' && prev == '.')) return false;
        prev = c;
    }
    return true;
}

/// Drops a comment: `#` or `;` at the start of the text or after whitespace.
std::string strip_comment(const std::string& line) {
    for (std::size_t i = 0; i < line.size(); ++i) {
        if ((line[i] == '#' || line[i] == ';') && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t'))
            return line.substr(0, i);
    }
    return line;
}

/// Removes one pair of matching surrounding quotes.
std::string unquote(const std::string& v) {
    if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
        return v.substr(1, v.size() - 2);
    return v;
}

std::string drop_first_component(const std::string& key) {
    const auto dot = key.find('.');
    return dot == std::string::npos ? std::string() : key.substr(dot + 1);
}

/// "nodeN.link.X" -> "linkN.X" (link N is the cable of node N); "" for any other key.
std::string per_link_key(const std::string& key) {
    if (key.compare(0, 4, "node") != 0) return {};
    std::size_t i = 4;
    while (i < key.size() && key[i] >= '0' && key[i] <= '9') ++i;
    if (i == 4 || key.compare(i, 6, ".link.") != 0 || i + 6 == key.size()) return {};
    return "link" + key.substr(4, i - 4) + "." + key.substr(i + 6);
}

// --- typed text conversions -------------------------------------------------------------

template <typename T>
const char* type_name();
template <>
const char* type_name<bool>() {
    return "bool";
}
template <>
const char* type_name<int>() {
    return "int";
}
template <>
const char* type_name<int64_t>() {
    return "int";
}
template <>
const char* type_name<unsigned>() {
    return "uint";
}
template <>
const char* type_name<uint64_t>() {
    return "uint";
}
template <>
const char* type_name<double>() {
    return "double";
}
template <>
const char* type_name<std::string>() {
    return "string";
}

std::string to_text(bool v) { return v ? "true" : "false"; }
std::string to_text(const std::string& v) { return v; }
std::string to_text(double v) {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
    return std::string(buf, r.ptr);
}
template <typename T>
std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, std::string> to_text(T v) {
    return std::to_string(v);
}

bool parse(const std::string& s, bool& out) {
    std::string l;
    for (char c : s) l += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (l == "true" || l == "1" || l == "yes" || l == "on") {
        out = true;
        return true;
    }
    if (l == "false" || l == "0" || l == "no" || l == "off") {
        out = false;
        return true;
    }
    return false;
}

bool parse(const std::string& s, std::string& out) {
    out = s;
    return true;
}

bool parse(const std::string& s, double& out) {
    if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return false;
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(s.c_str(), &end);
    if (*end != '\0' || errno == ERANGE || std::isnan(v)) return false;
    out = v;
    return true;
}

/// Decimal or 0x hex, whole string, within T's limits; no sign for unsigned types.
template <typename T>
std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, bool> parse(const std::string& s,
                                                                                T& out) {
    if (s.empty()) return false;
    std::size_t i = 0;
    bool neg = false;
    if (s[i] == '+' || s[i] == '-') {
        neg = s[i] == '-';
        ++i;
    }
    if (neg && std::is_unsigned_v<T>) return false;
    int base = 10;
    if (s.size() > i + 1 && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X')) {
        base = 16;
        i += 2;
    }
    if (i >= s.size()) return false;
    unsigned long long mag = 0;
    const char* first = s.data() + i;
    const char* last = s.data() + s.size();
    auto r = std::from_chars(first, last, mag, base);
    if (r.ec != std::errc() || r.ptr != last) return false;
    if constexpr (std::is_signed_v<T>) {
        const unsigned long long lim =
            neg ? static_cast<unsigned long long>(std::numeric_limits<T>::max()) + 1
                : static_cast<unsigned long long>(std::numeric_limits<T>::max());
        if (mag > lim) return false;
        out = neg ? static_cast<T>(0 - mag) : static_cast<T>(mag);
    } else {
        if (mag > std::numeric_limits<T>::max()) return false;
        out = static_cast<T>(mag);
    }
    return true;
}

template <typename T>
std::string expectation() {
    if constexpr (std::is_same_v<T, bool>)
        return "expected bool (true/false/1/0/yes/no/on/off)";
    else if constexpr (std::is_same_v<T, double>)
        return "expected number";
    else if constexpr (std::is_same_v<T, std::string>)
        return "expected string";
    else if constexpr (std::is_signed_v<T>)
        return "expected integer in [" + std::to_string(std::numeric_limits<T>::min()) + "," +
               std::to_string(std::numeric_limits<T>::max()) + "]";
    else
        return "expected non-negative integer in [0," + std::to_string(std::numeric_limits<T>::max()) + "]";
}

/// "[lo,hi]", or "[lo,hi] or v" with a value allowed outside the range.
template <typename T>
std::string range_text(const T& lo, const T& hi, const std::optional<T>& also) {
    return "[" + to_text(lo) + "," + to_text(hi) + "]" + (also ? " or " + to_text(*also) : std::string());
}

template <typename T>
std::string range_expectation(const T& lo, const T& hi, const std::optional<T>& also) {
    const char* what = std::is_same_v<T, double>        ? "number"
                       : std::is_same_v<T, std::string> ? "string"
                                                        : "integer";
    return std::string("expected ") + what + " in " + range_text(lo, hi, also);
}

/// Module under construction, or nullptr outside elaboration.
sc_core::sc_object* current_scope() {
    sc_core::sc_simcontext* ctx = sc_core::sc_get_curr_simcontext();
    return ctx ? ctx->hierarchy_curr() : nullptr;
}

}  // namespace

/// Full key for `name` declared in the current sc_module (shared with counters).
std::string scoped_key(const char* name) {
    if (sc_core::sc_object* scope = current_scope()) return std::string(scope->name()) + "." + name;
    return name;
}

// --- broker -----------------------------------------------------------------------------

broker& broker::instance() {
    static broker b;
    return b;
}

void broker::set(const std::string& key, const std::string& value, const std::string& origin) {
    entries_.push_back(entry{key, value, origin, false});
}

void broker::load_ini(const std::string& path) {
    text_file in(path, "configuration file", max_ini_line_bytes);
    std::string line, section;
    while (in.next(line)) {
        const std::string origin = path + ":" + std::to_string(in.line_number());
        if (in.line_number() > max_ini_lines)
            throw config_error(origin + ": more than " + std::to_string(max_ini_lines) +
                               " lines: not a configuration file");
        const std::string text = trim(strip_comment(line));
        if (text.empty()) continue;
        if (text.front() == '[') {
            if (text.back() != ']') throw config_error(origin + ": malformed section header '" + text + "'");
            section = trim(text.substr(1, text.size() - 2));
            if (!section.empty() && !valid_key(section))
                throw config_error(origin + ": bad section name '" + section + "'");
            continue;
        }
        const auto eq = text.find('=');
        if (eq == std::string::npos)
            throw config_error(origin + ": expected 'key = value' or '[section]', got '" + text + "'");
        const std::string k = trim(text.substr(0, eq));
        if (!valid_key(k)) throw config_error(origin + ": bad key '" + k + "'");
        set(section.empty() ? k : section + "." + k, unquote(trim(text.substr(eq + 1))), origin);
    }
}

void broker::set_override(const std::string& assignment) {
    const auto eq = assignment.find('=');
    const std::string k = eq == std::string::npos ? std::string() : trim(assignment.substr(0, eq));
    if (eq == std::string::npos || !valid_key(k))
        throw config_error("--set '" + assignment + "': expected key=value");
    set(k, unquote(trim(assignment.substr(eq + 1))), "--set");
}

std::optional<std::string> broker::lookup(const std::string& full, std::string* origin) {
    const std::string generic = drop_first_component(full);
    const std::string per_link = per_link_key(full);
    const entry* hit = nullptr;
    // A more specific key beats a less specific one whatever their order (nodeN.link.X, then
    // linkN.X, then link.X; nodeN.K, then K); among equal keys the last wins.
    for (const std::string* k : {&full, &per_link, &generic}) {
        if (k->empty()) continue;
        for (auto& e : entries_) {
            if (e.key != *k) continue;
            e.used = true;
            if (!hit || hit->key == *k) hit = &e;
        }
    }
    if (!hit) return std::nullopt;
    if (origin) *origin = hit->origin;
    return hit->value;
}

void broker::declare(param_base* p) { params_.add(p); }

void broker::undeclare(param_base* p) { params_.remove(p); }

void broker::check_unused() const {
    for (const auto& e : entries_)
        if (!e.used) {
            // A key that names a parameter by its last components ("pkey_checker.impl" for
            // "hca.pkey_checker.impl") gets the one full key it can mean.
            std::string prefix, rest = e.key;
            const size_t dot = e.key.find('.');
            if (dot != std::string::npos && e.key.compare(0, 4, "node") == 0 && dot > 4 &&
                e.key.find_first_not_of("0123456789", 4) == dot) {
                prefix = e.key.substr(0, dot + 1);
                rest = e.key.substr(dot + 1);
            }
            std::set<std::string> candidates;
            const std::string tail = "." + rest;
            for (const param_base* p : params()) {
                const std::string g = p->generic_key();
                if (g.size() > tail.size() && g.compare(g.size() - tail.size(), tail.size(), tail) == 0)
                    candidates.insert(prefix + g);
            }
            std::string hint;
            if (candidates.size() == 1) hint = "; did you mean '" + *candidates.begin() + "'?";
            // Keys that existed once: say what replaced them (old configs and trace headers).
            static const std::pair<const char*, const char*> retired[] = {
                {"switch.queue_packets",
                 "; it was removed when switches became credit-based (issue 29): a switch never drops for "
                 "lack of room, its input buffers are fabric.switch.vl_buffer_bytes"},
            };
            for (const auto& [key, why] : retired)
                if (rest == key || rest == std::string("fabric.") + key) hint = why;
            throw config_error("unknown configuration key '" + e.key + "' (" + e.origin + ")" + hint);
        }
    log_settings::instance().check_unused();
}

std::vector<param_info> broker::help() const {
    std::map<std::string, param_info> by_key;  // sorted by generic key, first declaration wins
    for (const param_base* p : params()) by_key.emplace(p->generic_key(), p->info());
    std::vector<param_info> out;
    out.reserve(by_key.size());
    for (auto& kv : by_key) out.push_back(kv.second);
    return out;
}

void broker::reset() {
    entries_.clear();
    params_.clear();
    log_settings::instance().reset();
}

// --- param_base -------------------------------------------------------------------------

param_base::param_base(const char* name, const char* unit, const char* help)
    : key_(scoped_key(name)), unit_(unit ? unit : ""), help_(help ? help : "") {
    broker::instance().declare(this);
}

param_base::~param_base() { broker::instance().undeclare(this); }

std::string param_base::generic_key() const {
    // Strip a leading "nodeN." component (regex ^node[0-9]+\.).
    if (key_.compare(0, 4, "node") == 0) {
        std::size_t i = 4;
        while (i < key_.size() && key_[i] >= '0' && key_[i] <= '9') ++i;
        if (i > 4 && i < key_.size() && key_[i] == '.') return key_.substr(i + 1);
    }
    return key_;
}

// --- param<T> ---------------------------------------------------------------------------

template <typename T>
param<T>::param(const char* name, T def, const char* unit, const char* help)
    : param_base(name, unit, help), value_(def), def_(def) {
    resolve();
}

template <typename T>
param<T>::param(const char* name, T def, const char* unit, const char* help, std::vector<std::string> choices)
    : param_base(name, unit, help), value_(def), def_(def), choices_(std::move(choices)) {
    resolve();
}

template <typename T>
param<T>::param(const char* name, T def, const char* unit, const char* help, bounds_type allowed)
    : param_base(name, unit, help), value_(def), def_(def) {
    if constexpr (std::is_arithmetic_v<T>) {
        has_range_ = true;
        lo_ = allowed.lo;
        hi_ = allowed.hi;
        also_ = allowed.also;
    }
    resolve();
}

template <typename T>
void param<T>::fail(const std::string& expected) const {
    const std::string raw = configured_ ? raw_ : to_text(value_);
    throw config_error("bad value '" + raw + "' for key '" + key_ + "' (" + origin_ + "): " + expected);
}

template <typename T>
void param<T>::validate() const {
    if (!choices_.empty()) {
        const std::string text = to_text(value_);
        bool found = false;
        for (const auto& c : choices_) found = found || c == text;
        if (!found) {
            std::string list;
            for (const auto& c : choices_) list += (list.empty() ? "" : "|") + c;
            fail("expected one of " + list);
        }
    }
    if (has_range_ && !(also_ && value_ == *also_) && (value_ < lo_ || hi_ < value_))
        fail(range_expectation(lo_, hi_, also_));
}

template <typename T>
void param<T>::resolve() {
    std::string origin;
    if (auto raw = broker::instance().lookup(key_, &origin)) {
        configured_ = true;
        raw_ = *raw;
        origin_ = origin;
        T v{};
        if (!parse(raw_, v)) fail(expectation<T>());
        value_ = v;
    }
    validate();
}

template <typename T>
param<T>& param<T>::range(T lo, T hi) {
    has_range_ = true;
    lo_ = lo;
    hi_ = hi;
    validate();
    return *this;
}

template <typename T>
param_info param<T>::info() const {
    std::string list;
    for (const auto& c : choices_) list += (list.empty() ? "" : "|") + c;
    return param_info{generic_key(),
                      type_name<T>(),
                      unit_,
                      to_text(def_),
                      help_,
                      list,
                      has_range_ ? range_text(lo_, hi_, also_) : std::string()};
}

template <typename T>
std::string param<T>::str() const {
    return to_text(value_);
}

template class param<bool>;
template class param<int>;
template class param<unsigned>;
template class param<int64_t>;
template class param<uint64_t>;
template class param<double>;
template class param<std::string>;

}  // namespace hcasim
