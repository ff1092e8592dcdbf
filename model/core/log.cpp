#include "model/core/log.h"

#include <fnmatch.h>

#include <cstdio>

#include "model/core/param.h"

namespace hcasim {

namespace {

/// Prints an info report (a log line) as "[time] module: text" on standard error; everything
/// else goes to SystemC's default handler unchanged.
void log_line_handler(const sc_core::sc_report& rep, const sc_core::sc_actions& actions) {
    if (rep.get_severity() == sc_core::SC_INFO && (actions & sc_core::SC_DISPLAY)) {
        std::fprintf(stderr, "[%14.3f ns] %s: %s\n", sc_core::sc_time_stamp().to_seconds() * 1e9,
                     rep.get_msg_type(), rep.get_msg());
        sc_core::sc_report_handler::default_handler(rep, actions & ~sc_core::SC_DISPLAY);
        return;
    }
    sc_core::sc_report_handler::default_handler(rep, actions);
}

/// `name` without its first component ("node0.hca.port" -> "hca.port"), or "".
std::string without_first_component(const std::string& name) {
    const size_t dot = name.find('.');
    return dot == std::string::npos ? std::string() : name.substr(dot + 1);
}

}  // namespace

log_settings& log_settings::instance() {
    static log_settings s;
    return s;
}

void log_settings::set(const std::string& assignment) {
    const size_t eq = assignment.rfind('=');
    if (eq == std::string::npos || eq == 0)
        throw config_error("--log '" + assignment +
                           "': expected MODULE=LEVEL, e.g. node0.hca.transport_engine=debug");
    const std::string level = assignment.substr(eq + 1);
    entry e{assignment.substr(0, eq), assignment, log_level::off};
    if (level == "info")
        e.level = log_level::info;
    else if (level == "debug")
        e.level = log_level::debug;
    else if (level != "off")
        throw config_error("--log '" + assignment + "': unknown level '" + level + "' (off|info|debug)");
    entries_.push_back(e);
    if (e.level != log_level::off) {
        sc_core::sc_report_handler::set_handler(log_line_handler);
        if (sc_core::sc_report_handler::get_verbosity_level() < sc_core::SC_DEBUG)
            sc_core::sc_report_handler::set_verbosity_level(sc_core::SC_DEBUG);
    }
}

log_level log_settings::level_for(const std::string& name) {
    const std::string generic = without_first_component(name);
    modules_.insert(generic.empty() ? name : generic);
    log_level level = log_level::off;
    for (auto& e : entries_)
        if (fnmatch(e.pattern.c_str(), name.c_str(), 0) == 0 ||
            (!generic.empty() && fnmatch(e.pattern.c_str(), generic.c_str(), 0) == 0)) {
            level = e.level;
            e.used = true;
        }
    return level;
}

void log_settings::check_unused() const {
    for (const auto& e : entries_)
        if (!e.used) {
            std::string names;
            for (const auto& n : modules_) names += (names.empty() ? "" : ", ") + n;
            throw config_error("--log '" + e.assignment + "': no module that logs is named '" + e.pattern +
                               "' (modules that log: " + (names.empty() ? "none" : names) + ")");
        }
}

void log_settings::reset() {
    entries_.clear();
    modules_.clear();
}

module_log::module_log() {
    // Constructed as a member of a module under construction: scoped_key("") is "<module>.".
    name_ = scoped_key("");
    if (!name_.empty() && name_.back() == '.') name_.pop_back();
    level_ = log_settings::instance().level_for(name_);
}

void module_log::write(log_level l, const std::string& text) const {
    SC_REPORT_INFO_VERB(name_.c_str(), text.c_str(),
                        l == log_level::debug ? sc_core::SC_DEBUG : sc_core::SC_MEDIUM);
}

}  // namespace hcasim
