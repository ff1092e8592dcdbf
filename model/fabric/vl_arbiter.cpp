#include "model/fabric/vl_arbiter.h"

#include <algorithm>
#include <sstream>

#include "model/core/param.h"
#include "tlm_if/wire/mad.h"

namespace hcasim {

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) out.push_back(cur);
    return out;
}
bool to_unsigned(const std::string& s, unsigned& v) {
    if (s.empty() || s.size() > 6) return false;
    v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + unsigned(c - '0');
    }
    return true;
}
}  // namespace

std::vector<unsigned> parse_sl2vl(const std::string& text, const std::string& key, unsigned vls) {
    std::vector<unsigned> t(16);
    if (text.empty()) {
        for (unsigned sl = 0; sl < 16; ++sl) t[sl] = sl % vls;
        return t;
    }
    const std::vector<std::string> f = split(text, ',');
    if (f.size() != 16)
        throw config_error("bad value '" + text + "' for key '" + key +
                           "': expected 16 comma-separated VLs (SL 0..15), got " + std::to_string(f.size()));
    for (unsigned sl = 0; sl < 16; ++sl) {
        if (!to_unsigned(f[sl], t[sl]) || (t[sl] >= vls && t[sl] != 15))
            throw config_error("bad value '" + text + "' for key '" + key + "': SL " + std::to_string(sl) +
                               " maps to '" + f[sl] + "', not a data VL of the link (0.." +
                               std::to_string(vls - 1) + ") or 15 (drop)");
    }
    return t;
}

std::vector<vlarb_entry> parse_vlarb(const std::string& text, const std::string& key, unsigned vls) {
    std::vector<vlarb_entry> out;
    if (text.empty()) return out;
    for (const std::string& item : split(text, ',')) {
        const size_t colon = item.find(':');
        vlarb_entry e;
        if (colon == std::string::npos || !to_unsigned(item.substr(0, colon), e.vl) ||
            !to_unsigned(item.substr(colon + 1), e.weight))
            throw config_error("bad value '" + text + "' for key '" + key + "': entry '" + item +
                               "' is not VL:WEIGHT");
        if (e.vl >= vls)
            throw config_error("bad value '" + text + "' for key '" + key + "': VL " + std::to_string(e.vl) +
                               " is not a data VL of the link (0.." + std::to_string(vls - 1) + ")");
        if (e.weight > 255)
            throw config_error("bad value '" + text + "' for key '" + key + "': weight " +
                               std::to_string(e.weight) + " is above 255");
        out.push_back(e);
    }
    if (out.size() > 64)
        throw config_error("bad value for key '" + key + "': " + std::to_string(out.size()) +
                           " entries, a VL arbitration table has at most 64");
    return out;
}

bool vlarb_smp_block(const vl_arbiter& arb, unsigned block, bool set, uint8_t* data,
                     std::vector<vlarb_entry>& high, std::vector<vlarb_entry>& low) {
    if (block < 1 || block > 4) return false;
    high = arb.high_table();
    low = arb.low_table();
    std::vector<vlarb_entry>& t = block >= 3 ? high : low;
    const size_t first = (block - 1) % 2 * wire::VLARB_ENTRIES_PER_BLOCK;
    wire::vlarb_pair e[wire::VLARB_ENTRIES_PER_BLOCK];
    if (set) {
        wire::decode_vlarb_block(data, e);
        t.resize(std::max(t.size(), first + wire::VLARB_ENTRIES_PER_BLOCK));
        for (unsigned k = 0; k < wire::VLARB_ENTRIES_PER_BLOCK; ++k) t[first + k] = {e[k].vl, e[k].weight};
        // With both tables empty the port takes the model's default (every data VL weight 255).
        while (!t.empty() && t.back().weight == 0) t.pop_back();
    }
    for (unsigned k = 0; k < wire::VLARB_ENTRIES_PER_BLOCK; ++k)
        e[k] = first + k < t.size() ? wire::vlarb_pair{uint8_t(t[first + k].vl), uint8_t(t[first + k].weight)}
                                    : wire::vlarb_pair{};
    wire::encode_vlarb_block(e, data);
    return true;
}

void vl_arbiter::configure(std::vector<vlarb_entry> high, std::vector<vlarb_entry> low, unsigned high_limit,
                           unsigned vls) {
    if (high.empty() && low.empty())
        for (unsigned v = 0; v < vls; ++v) low.push_back(vlarb_entry{v, 255});
    high_ = table{std::move(high)};
    low_ = table{std::move(low)};
    for (table* t : {&high_, &low_})
        for (const vlarb_entry& e : t->e)
            if (e.weight) t->vl_mask |= 1u << e.vl;
    unbounded_ = high_limit == 255;
    high_reload_ = int64_t(high_limit) * 4096 / 64;
    high_budget_ = high_reload_;
}

int vl_arbiter::table::pick(uint32_t eligible) {
    if (!(eligible & vl_mask)) return -1;
    for (size_t n = 0; n <= e.size(); ++n) {
        if (fresh) {
            left = e[at].weight;
            fresh = false;
        }
        if (left > 0 && (eligible >> e[at].vl & 1)) return int(e[at].vl);
        at = (at + 1) % e.size();
        fresh = true;
    }
    return -1;
}

void vl_arbiter::table::sent(uint32_t blocks) {
    left -= blocks;
    if (left <= 0) {
        at = (at + 1) % e.size();
        fresh = true;
    }
}

int vl_arbiter::pick(uint32_t eligible, bool) {
    const bool low_ready = (eligible & low_.vl_mask) != 0;
    // High priority first, unless its budget is used up and a low packet waits.
    if (!(low_ready && !unbounded_ && high_budget_ < 0)) {
        const int v = high_.pick(eligible);
        if (v >= 0) {
            last_high_ = true;
            return v;
        }
    }
    const int v = low_.pick(eligible);
    if (v >= 0) {
        last_high_ = false;
        return v;
    }
    last_high_ = true;
    return high_.pick(eligible);
}

void vl_arbiter::sent(unsigned, uint32_t blocks) {
    if (last_high_) {
        high_.sent(blocks);
        if (!unbounded_) high_budget_ -= blocks;  // below 0: a waiting low packet goes next
    } else {
        low_.sent(blocks);
        high_budget_ = high_reload_;
    }
}

}  // namespace hcasim
