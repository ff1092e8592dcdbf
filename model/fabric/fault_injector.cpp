#include "model/fabric/fault_injector.h"

#include "model/core/bytes.h"
#include "tlm_if/wire/ib_headers.h"

#include <cmath>
#include <cstring>

namespace hcasim {

using namespace sc_core;

bool fault_settings::any() const {
    return drop_rate > 0 || bit_error_rate > 0 || dup_rate > 0 || reorder_rate > 0 || down_at_ns >= 0;
}

fault_injector::fault_injector(const std::string& prefix)
    : dropped((prefix + "dropped").c_str(), "packets lost (drop_rate)"),
      dropped_down((prefix + "dropped_down").c_str(), "packets lost because the link was down (down_at_ns)"),
      corrupted((prefix + "corrupted").c_str(), "packets delivered with flipped bits (bit_error_rate)"),
      bit_errors((prefix + "bit_errors").c_str(), "bits flipped (bit_error_rate)"),
      duplicated((prefix + "duplicated").c_str(), "packets delivered a second time (dup_rate)"),
      reordered((prefix + "reordered").c_str(),
                "packets delivered right after the next packet (reorder_rate)"),
      reorder_timeouts((prefix + "reorder_timeouts").c_str(),
                       "packets held for reordering but released alone after reorder_hold_ns") {
    held_gp_.set_command(tlm::TLM_WRITE_COMMAND);
}

void fault_injector::configure(const fault_settings& s, fault_direction dir, sc_event* wake) {
    s_ = s;
    wake_ = wake;
    active_ = s.any();
    down_ = s.down_at_ns >= 0;
    down_at_ = down_ ? sc_time(s.down_at_ns, SC_NS) : SC_ZERO_TIME;
    hold_ = sc_time(s.reorder_hold_ns, SC_NS);
    // One stream per direction of each cable: (seed, node, direction) through seed_seq, whose
    // algorithm the standard fixes, so the draws are the same on every platform.
    std::seed_seq seq{uint32_t(s.seed), uint32_t(s.seed >> 32), uint32_t(s.node), uint32_t(dir)};
    rng_.seed(seq);
    if (s.bit_error_rate > 0) {
        bits_to_error_ = next_gap();
        if (!scratch_) scratch_ = std::make_unique<packet>();
    }
    if (s.reorder_rate > 0 && !held_) held_ = std::make_unique<packet>();
}

uint64_t fault_injector::next_gap() {
    // Inversion of the geometric distribution: P(gap >= k) = (1 - p)^k.
    const double p = s_.bit_error_rate;
    if (p >= 1) return 0;
    const double g = std::floor(std::log1p(-uniform()) / std::log1p(-p));
    constexpr double cap = double(uint64_t(1) << 62);
    return g < cap ? uint64_t(g) : uint64_t(1) << 62;
}

void fault_injector::flip_bits(uint8_t* bytes, uint32_t len) {
    const uint64_t bits = uint64_t(len) * 8;
    uint64_t pos = bits_to_error_;
    while (pos < bits) {
        bytes[pos >> 3] ^= uint8_t(0x80u >> (pos & 7));  // bit 0 = MSB of the first byte
        ++bit_errors;
        pos += 1 + next_gap();
    }
    bits_to_error_ = pos - bits;
}

void fault_injector::carry_faulty(tlm::tlm_generic_payload& gp, sc_time& delay,
                                  tlm::tlm_fw_transport_if<>& to) {
    const sc_time now = sc_time_stamp();
    const sc_time arrival = now + delay;
    // A held packet whose partner would come after its hold time goes alone, first.
    if (holding_ && arrival >= held_due_) {
        ++reorder_timeouts;
        deliver_held(held_due_ > now ? held_due_ : now, to);
    }
    if (down_ && arrival >= down_at_) {
        ++dropped_down;
        HCASIM_LOG(log_, info,
                   "drops " << wire::describe_packet(gp.get_data_ptr(), gp.get_data_length())
                            << ": the link is down");
        lost(gp.get_data_ptr(), gp.get_data_length(), arrival);
        return;
    }
    // Draws in a fixed order, each only if its rate is set: drop, duplicate, hold, bit errors.
    if (s_.drop_rate > 0 && uniform() < s_.drop_rate) {
        ++dropped;
        HCASIM_LOG(
            log_, info,
            "drops " << wire::describe_packet(gp.get_data_ptr(), gp.get_data_length()) << " (drop_rate)");
        lost(gp.get_data_ptr(), gp.get_data_length(), arrival);
        return;
    }
    const bool twice = s_.dup_rate > 0 && uniform() < s_.dup_rate;
    const bool partner = holding_;  // this packet overtakes the held one
    const uint32_t len = gp.get_data_length();
    const bool corrupt = s_.bit_error_rate > 0 && bits_to_error_ < uint64_t(len) * 8;
    if (!partner && s_.reorder_rate > 0 && uniform() < s_.reorder_rate) {
        held_->len = len;
        copy_bytes(held_->bytes, gp.get_data_ptr(), len);
        held_crc_ = corrupt ? crc_state::unknown : crc_state_of(gp);
        if (corrupt) {
            if (crc_state_of(gp) == crc_state::unsealed && len >= 6)
                wire::seal_packet(held_->bytes, len - 6);  // the CRCs the receiver checks the flips against
            flip_bits(held_->bytes, len);
            ++corrupted;
            HCASIM_LOG(log_, info, "flips bits of " << wire::describe_packet(gp.get_data_ptr(), len));
        } else if (s_.bit_error_rate > 0) {
            bits_to_error_ -= uint64_t(len) * 8;
        }
        holding_ = true;
        HCASIM_LOG(log_, info,
                   "holds back " << wire::describe_packet(held_->bytes, len) << " (reorder_rate)");
        held_twice_ = twice;
        held_due_ = arrival + hold_;
        wake_->notify(held_due_ - now);
        return;
    }
    uint8_t* const original = gp.get_data_ptr();
    const crc_state crc = crc_state_of(gp);
    if (corrupt) {
        copy_bytes(scratch_->bytes, original, len);  // the sender's buffer stays intact
        if (crc == crc_state::unsealed && len >= 6)
            wire::seal_packet(scratch_->bytes, len - 6);  // the CRCs the receiver checks the flips against
        flip_bits(scratch_->bytes, len);
        ++corrupted;
        HCASIM_LOG(log_, info, "flips bits of " << wire::describe_packet(original, len));
        gp.set_data_ptr(scratch_->bytes);
        set_crc_state(gp, crc_state::unknown);  // the receiver must check the CRCs
    } else if (s_.bit_error_rate > 0) {
        bits_to_error_ -= uint64_t(len) * 8;
    }
    sc_time d = delay;
    to.b_transport(gp, d);
    if (twice) {
        ++duplicated;
        HCASIM_LOG(log_, info, "duplicates " << wire::describe_packet(gp.get_data_ptr(), len));
        d = delay;
        to.b_transport(gp, d);  // right behind the first copy, same arrival time
    }
    gp.set_data_ptr(original);
    set_crc_state(gp, crc);
    if (partner) {
        ++reordered;
        deliver_held(arrival, to);
    }
}

void fault_injector::lost(const uint8_t* bytes, uint32_t len, const sc_time& arrival) {
    if (credits_ && len && (bytes[0] >> 4) != VL15)
        credits_->restore(bytes[0] >> 4, credit_blocks(len), arrival + credit_delay_);
}

void fault_injector::deliver_held(const sc_time& arrival, tlm::tlm_fw_transport_if<>& to) {
    holding_ = false;
    if (down_ && arrival >= down_at_) {
        ++dropped_down;
        HCASIM_LOG(log_, info,
                   "drops " << wire::describe_packet(held_->bytes, held_->len) << ": the link is down");
        lost(held_->bytes, held_->len, arrival);
        return;
    }
    held_gp_.set_address(0);
    held_gp_.set_data_ptr(held_->bytes);
    held_gp_.set_data_length(held_->len);
    held_gp_.set_streaming_width(held_->len);
    set_crc_state(held_gp_, held_crc_);
    const sc_time delay = arrival - sc_time_stamp();
    for (int copy = 0; copy < (held_twice_ ? 2 : 1); ++copy) {
        if (copy) ++duplicated;
        held_gp_.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
        sc_time d = delay;
        to.b_transport(held_gp_, d);
    }
}

void fault_injector::release(tlm::tlm_fw_transport_if<>& to) {
    if (!holding_) return;
    const sc_time now = sc_time_stamp();
    if (held_due_ > now) {
        wake_->notify(held_due_ - now);  // woken early (a shared or stale notification)
        return;
    }
    ++reorder_timeouts;
    deliver_held(now, to);
}

}  // namespace hcasim
