// The fabric.cc.* keys: parsing and range checks; see cc_config.h.
#include "model/core/cc_config.h"

#include <charconv>

#include "model/core/param.h"

namespace hcasim {

namespace {

std::string trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

// Splits on commas, trimming each item; "" gives no items.
std::vector<std::string> items_of(const std::string& text) {
    std::vector<std::string> out;
    if (trim(text).empty()) return out;
    size_t at = 0;
    for (;;) {
        const size_t comma = text.find(',', at);
        out.push_back(trim(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at)));
        if (comma == std::string::npos) return out;
        at = comma + 1;
    }
}

// A decimal number, the whole string; false if it is not one or passes `max`.
bool number(const std::string& s, unsigned max, unsigned& v) {
    if (s.empty()) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc() && r.ptr == s.data() + s.size() && v <= max;
}

void check(const char* key, unsigned value, unsigned max, const char* what) {
    if (value > max)
        throw config_error(std::string("fabric.cc.") + key + "=" + std::to_string(value) +
                           ": out of range 0-" + std::to_string(max) + " (" + what + ")");
}

}  // namespace

std::vector<cct_entry> default_cct() {
    std::vector<cct_entry> t(128);
    for (unsigned i = 0; i < t.size(); ++i) t[i] = {3, static_cast<uint16_t>(i)};
    return t;
}

std::vector<cct_entry> parse_cct(const std::string& key, const std::string& text) {
    const std::vector<std::string> items = items_of(text);
    if (items.empty()) throw config_error(key + ": empty table (give at least one shift:multiplier entry)");
    if (items.size() > 65536)
        throw config_error(key + ": " + std::to_string(items.size()) +
                           " entries, more than the 65536 a 16-bit CCTI_Limit can index");
    std::vector<cct_entry> out;
    out.reserve(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
        const std::string& it = items[i];
        const std::string where = key + ": entry " + std::to_string(i) + " '" + it + "': ";
        const size_t colon = it.find(':');
        if (colon == std::string::npos) throw config_error(where + "expected shift:multiplier");
        unsigned shift = 0, mult = 0;
        if (!number(trim(it.substr(0, colon)), 3, shift))
            throw config_error(where + "shift must be 0-3 (2-bit CCT_Shift)");
        if (!number(trim(it.substr(colon + 1)), 0x3FFF, mult))
            throw config_error(where + "multiplier must be 0-16383 (14-bit CCT_Multiplier)");
        out.push_back({static_cast<uint8_t>(shift), static_cast<uint16_t>(mult)});
    }
    return out;
}

std::string format_cct(const std::vector<cct_entry>& cct) {
    std::string s;
    for (const cct_entry& e : cct) {
        if (!s.empty()) s += ',';
        s += std::to_string(e.shift) + ':' + std::to_string(e.multiplier);
    }
    return s;
}

std::bitset<256> parse_port_mask(const std::string& key, const std::string& text) {
    std::bitset<256> mask;
    if (trim(text) == "all") {
        for (unsigned p = 0; p < 255; ++p) mask.set(p);
        return mask;
    }
    for (const std::string& it : items_of(text)) {
        const size_t dash = it.find('-');
        const std::string first = dash == std::string::npos ? it : trim(it.substr(0, dash));
        const std::string last = dash == std::string::npos ? it : trim(it.substr(dash + 1));
        unsigned lo = 0, hi = 0;
        const bool ok = number(first, 254, lo) && number(last, 254, hi);
        if (!ok) throw config_error(key + ": '" + it + "': expected a port 0-254 or a range A-B");
        if (hi < lo) throw config_error(key + ": '" + it + "': range ends before it starts");
        for (unsigned p = lo; p <= hi; ++p) mask.set(p);
    }
    return mask;
}

void cc_config::validate() const {
    check("threshold", threshold, 15, "4-bit Threshold");
    check("marking_rate", marking_rate, 0xFFFF, "16-bit Marking_Rate");
    check("packet_size", packet_size, 0xFF, "8-bit Packet_Size, 64-byte credits");
    check("ccti_increase", ccti_increase, 0xFF, "8-bit CCTI_Increase");
    check("ccti_timer", ccti_timer, 0xFFFF, "16-bit CCTI_Timer, 1.024 us units");
    check("trigger_threshold", trigger_threshold, 0xFF, "8-bit Trigger_Threshold");
    check("ccti_min", ccti_min, 0xFF, "8-bit CCTI_Min");
    check("ccti_limit", ccti_limit, 0xFFFF, "16-bit CCTI_Limit");
    if (cct.empty())
        throw config_error("fabric.cc.cct: empty table (give at least one shift:multiplier entry)");
    if (ccti_limit >= cct.size())
        throw config_error("fabric.cc.ccti_limit=" + std::to_string(ccti_limit) +
                           ": beyond the last entry of " + "fabric.cc.cct (" + std::to_string(cct.size()) +
                           " entries, indices 0-" + std::to_string(cct.size() - 1) + ")");
    if (ccti_min > ccti_limit)
        throw config_error("fabric.cc.ccti_min=" + std::to_string(ccti_min) +
                           ": above fabric.cc.ccti_limit (" + std::to_string(ccti_limit) + ")");
}

}  // namespace hcasim
