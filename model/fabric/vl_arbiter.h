// Virtual lanes at an output port: the SL-to-VL mapping table and the VL arbitration tables
// (IBA 7.6.5, 7.6.9), parsed from their configuration strings, and the arbiter that picks the
// VL an output sends from next. The arbiter serves the high-priority table while it has an
// eligible entry and its LimitOfHighPriority allows (counted in 64-byte blocks: limit x 4096
// bytes; 255 unbounded; 0 lets one high packet go before a waiting low one), else the low
// table; within a table, weighted round robin: an entry may start a packet while its weight
// (64-byte blocks) is not used up, the packet completes even past it, and then the next entry
// takes its turn. An entry whose VL has nothing eligible is skipped.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hcasim {

/// SL-to-VL table from "v0,v1,...,v15" (16 entries, each below `vls` or 15 = drop); an empty
/// string gives SL mod `vls`. Throws config_error naming `key` on bad input.
std::vector<unsigned> parse_sl2vl(const std::string& text, const std::string& key, unsigned vls);

struct vlarb_entry {
    unsigned vl = 0;
    unsigned weight = 0;  ///< 64-byte blocks, 0..255
};
/// A VL arbitration table from "vl:weight,vl:weight,..." (at most 64 entries, VLs below `vls`,
/// weights 0..255); empty: no entries. Throws config_error naming `key`.
std::vector<vlarb_entry> parse_vlarb(const std::string& text, const std::string& key, unsigned vls);

class vl_arbiter;
/// SubnGet/SubnSet(VLArbitrationTable) on `arb`'s tables, block `block` (1, 2: the low table's
/// entries 0-31, 32-63; 3, 4: the high table's). A Set takes the block's 32 (VL, weight) pairs
/// from `data` (entries of weight 0 at a table's end are no entries) and gives the port's new
/// tables in `high` and `low`, for configure(); either way `data` then holds the block as the
/// tables have it. False (nothing done): no such block.
bool vlarb_smp_block(const vl_arbiter& arb, unsigned block, bool set, uint8_t* data,
                     std::vector<vlarb_entry>& high, std::vector<vlarb_entry>& low);

class vl_arbiter {
public:
    /// Tables as parsed; an empty low and high table gives every VL weight 255 in the low
    /// table (round robin by packets of up to 16 KiB).
    void configure(std::vector<vlarb_entry> high, std::vector<vlarb_entry> low, unsigned high_limit,
                   unsigned vls);
    /// The VL to send from next among those with `eligible` set (bit per VL), or -1. Then
    /// call sent() with the packet's blocks.
    int pick(uint32_t eligible, bool low_waiting_hint = true);
    void sent(unsigned vl, uint32_t blocks);
    /// The tables in use (the low one filled in when both were configured empty).
    const std::vector<vlarb_entry>& high_table() const { return high_.e; }
    const std::vector<vlarb_entry>& low_table() const { return low_.e; }

private:
    struct table {
        std::vector<vlarb_entry> e;
        size_t at = 0;
        int64_t left = 0;  // weight left in entry `at` (loaded when its turn comes)
        bool fresh = true;
        uint32_t vl_mask = 0;  // VLs with a non-zero weight in the table
        int pick(uint32_t eligible);
        void sent(uint32_t blocks);
    };
    table high_, low_;
    int64_t high_budget_ = 0, high_reload_ = 0;
    bool unbounded_ = false;
    bool last_high_ = false;
};

}  // namespace hcasim
