// Fault injection on one direction of a cable: loses, corrupts (bit errors), duplicates and
// reorders packets, and takes the direction down from a set time, as configured by the cable's
// `link.*` fault parameters, with its own seeded random stream. A plain helper, not a module:
// the link (what node N transmits) and the switch output toward node N each own one and pass
// every packet through carry() at the end of the cable, after the sender's serialiser.
//
// With every rate 0 and no down time carry() forwards the packet untouched: no random draw,
// no copy. Faulty packets use buffers allocated once by configure(), never per packet.
#pragma once
#include <systemc>
#include <tlm>
#include "tlm_if/tlm_ext.h"

#include <cstdint>
#include <memory>
#include <random>
#include <string>

#include "model/core/log.h"
#include "model/core/stats.h"
#include "model/fabric/credits.h"
#include "model/fabric/packet.h"

namespace hcasim {

/// Fault settings of one cable (both directions): the values of node N's link parameters.
struct fault_settings {
    double drop_rate = 0;           ///< probability a packet is lost
    double bit_error_rate = 0;      ///< probability each bit is flipped (independently)
    double dup_rate = 0;            ///< probability a packet is delivered twice
    double reorder_rate = 0;        ///< probability a packet is held back behind the next one
    double reorder_hold_ns = 1000;  ///< longest hold before a held packet is released alone
    double down_at_ns = -1;         ///< from then on everything is lost; negative: never
    uint64_t seed = 1;              ///< random seed of the cable
    unsigned node = 0;              ///< N: the cable of node N (selects the random streams)
    /// Whether any fault is configured.
    bool any() const;
};

/// Which direction of node N's cable an injector serves (selects its random stream).
enum class fault_direction : unsigned {
    from_node = 0,  ///< what node N transmits (link::b_transport)
    to_node = 1,    ///< what the switch sends to node N (switch topology)
};

class fault_injector {
public:
    /// Declares the counters under the module being constructed, named `prefix` + "dropped" etc.
    explicit fault_injector(const std::string& prefix = "");

    /// Arms the injector with `s` and the random stream of (s.seed, s.node, dir). `wake` is
    /// notified when a held packet is due; its process must then call release().
    void configure(const fault_settings& s, fault_direction dir, sc_core::sc_event* wake);
    bool active() const { return active_; }
    const fault_settings& settings() const { return s_; }

    /// Carries a packet whose last bit reaches the far end `delay` after now to `to`: passes
    /// it on, loses it, corrupts it, delivers it twice, or holds it back behind the next one.
    void carry(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay, tlm::tlm_fw_transport_if<>& to) {
        if (!active_) {
            to.b_transport(gp, delay);
            return;
        }
        carry_faulty(gp, delay, to);
    }
    /// Flow control: a packet lost here gives its blocks back to `sender` (the counter it
    /// took them from) `credit_delay` after it would have arrived, as the receiver's next
    /// FC packet resynchronises (IBA 7.9.4).
    void resync_credits(credit_counter* sender, const sc_core::sc_time& credit_delay) {
        credits_ = sender;
        credit_delay_ = credit_delay;
    }
    /// Whether a packet is held back (reorder) and not yet delivered.
    bool holding() const { return holding_; }
    /// Delivers the held packet if its hold time has run out (else re-arms `wake`).
    void release(tlm::tlm_fw_transport_if<>& to);

    module_log log_;           ///< info: every packet dropped, corrupted, duplicated or reordered
    counter dropped;           ///< lost by drop_rate
    counter dropped_down;      ///< lost because the direction was down (down_at_ns)
    counter corrupted;         ///< delivered with at least one flipped bit
    counter bit_errors;        ///< bits flipped
    counter duplicated;        ///< delivered a second time
    counter reordered;         ///< delivered right after the packet that followed them
    counter reorder_timeouts;  ///< held, but released alone (no next packet within the hold)

private:
    void carry_faulty(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay, tlm::tlm_fw_transport_if<>& to);
    /// A packet of `len` bytes starting with `bytes` is lost; it would have arrived at `arrival`.
    void lost(const uint8_t* bytes, uint32_t len, const sc_core::sc_time& arrival);
    credit_counter* credits_ = nullptr;
    sc_core::sc_time credit_delay_;
    /// Delivers the held packet with its last bit at `arrival` (absolute, >= now).
    void deliver_held(const sc_core::sc_time& arrival, tlm::tlm_fw_transport_if<>& to);
    /// Uniform in [0, 1), 53 bits.
    double uniform() { return double(rng_() >> 11) * 0x1.0p-53; }
    /// Correct bits before the next flipped one (geometric with p = bit_error_rate).
    uint64_t next_gap();
    /// Flips the bits of the error stream that fall into bytes[0..len) and advances it.
    void flip_bits(uint8_t* bytes, uint32_t len);

    fault_settings s_;
    bool active_ = false, down_ = false;
    sc_core::sc_time down_at_, hold_;
    std::mt19937_64 rng_;
    uint64_t bits_to_error_ = 0;  // correct bits before the next flipped one (across packets)
    sc_core::sc_event* wake_ = nullptr;
    std::unique_ptr<packet> scratch_, held_;  // corrupted copy; packet held back
    bool holding_ = false, held_twice_ = false;
    crc_state held_crc_ = crc_state::unknown;  // crc_intact_ext of the held packet
    sc_core::sc_time held_due_;                // when the held packet goes alone
    tlm::tlm_generic_payload held_gp_;
};

}  // namespace hcasim
