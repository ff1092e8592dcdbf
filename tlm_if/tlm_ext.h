// TLM-2.0 generic-payload extensions shared by the model units and the test benches.
//
// Interface version 1. Header-only; include from model/ and testbench/ alike.
#pragma once
#include <tlm>
#include <cstdint>

namespace hcasim {

/// Interface version of the extensions in this header.
inline constexpr unsigned tlm_ext_version = 1;

/// A PCIe AtomicOp (or InfiniBand atomic executed by the HCA on host memory).
///
/// Attach to a generic payload addressed at an 8-byte aligned host physical address. The target
/// (host_memory) executes the operation indivisibly on the host-native uint64_t stored there and
/// returns the value it found in `result`; if the payload carries a data pointer with
/// data_length >= 8, the original value is also copied there (as a read completion would).
/// A misaligned address yields TLM_ADDRESS_ERROR_RESPONSE. The payload command is ignored.
struct atomic_ext : tlm::tlm_extension<atomic_ext> {
    /// The operation to perform.
    enum op_type : uint8_t {
        compare_swap = 0,  ///< if (*addr == compare) *addr = swap_or_add
        fetch_add = 1,     ///< *addr += swap_or_add (wraps modulo 2^64)
    };

    /// Which operation: compare_swap or fetch_add.
    op_type op = fetch_add;
    /// compare_swap: value expected at the address; unused by fetch_add.
    uint64_t compare = 0;
    /// compare_swap: value stored on a match; fetch_add: addend.
    uint64_t swap_or_add = 0;
    /// Set by the target: the value at the address before the operation.
    uint64_t result = 0;

    atomic_ext() = default;
    atomic_ext(op_type o, uint64_t cmp, uint64_t swap_add) : op(o), compare(cmp), swap_or_add(swap_add) {}

    tlm::tlm_extension_base* clone() const override { return new atomic_ext(*this); }
    void copy_from(const tlm::tlm_extension_base& ext) override {
        const auto& o = static_cast<const atomic_ext&>(ext);
        op = o.op;
        compare = o.compare;
        swap_or_add = o.swap_or_add;
        result = o.result;
    }
};

/// What is known of a fabric packet's CRCs. `sealed`: its bytes are exactly those its sending
/// port sealed (ICRC and VCRC computed over them) and nothing altered them. `unsealed`: nothing
/// altered them either, but the sender has not computed the CRCs yet (hca.port.lazy_crc): the
/// last 6 bytes are not the CRCs, and whoever needs the exact wire bytes (a bit error to
/// inject, a subnet manager's record, a capture) seals a copy first (wire::seal_packet over
/// len - 6). Either way a receiving port may skip recomputing the CRCs (they match by
/// construction). No extension (`unknown`): the receiver checks the CRCs — the default for test
/// benches, fuzzers and corrupted packets.
enum class crc_state : uint8_t { unknown, sealed, unsealed };

/// Carries a crc_state other than unknown on a payload. Whoever forwards the bytes unchanged
/// keeps it on the payload it passes on; whoever changes them clears it. Never owned by the
/// payload: two shared instances are set and cleared by the payload's owner.
struct crc_intact_ext : tlm::tlm_extension<crc_intact_ext> {
    crc_state state = crc_state::sealed;
    explicit crc_intact_ext(crc_state s = crc_state::sealed) : state(s) {}
    tlm::tlm_extension_base* clone() const override { return new crc_intact_ext(state); }
    void copy_from(const tlm::tlm_extension_base& e) override {
        state = static_cast<const crc_intact_ext&>(e).state;
    }
    /// The shared instances are never deleted (a payload's destructor frees its extensions).
    void free() override {
        if (this != instance(crc_state::sealed) && this != instance(crc_state::unsealed)) delete this;
    }
    /// The shared instance for `s` (sealed or unsealed).
    static crc_intact_ext* instance(crc_state s) {
        static crc_intact_ext sealed(crc_state::sealed), unsealed(crc_state::unsealed);
        return s == crc_state::unsealed ? &unsealed : &sealed;
    }
};

/// The crc_state a payload carries.
inline crc_state crc_state_of(const tlm::tlm_generic_payload& gp) {
    const crc_intact_ext* e = gp.get_extension<crc_intact_ext>();
    return e ? e->state : crc_state::unknown;
}
/// Attaches `s` to `gp` (unknown: removes the extension).
inline void set_crc_state(tlm::tlm_generic_payload& gp, crc_state s) {
    if (s == crc_state::unknown)
        gp.clear_extension<crc_intact_ext>();
    else
        gp.set_extension(crc_intact_ext::instance(s));
}

/// Marks a write as posted (a PCIe posted write): its target makes it take effect at
/// now + the annotated delay, and not before -- nobody sees the data earlier (host_memory keeps
/// it until then). Without it, host_memory writes at once and only the watches see the delay.
/// Never owned by the payload: the shared instance is set and cleared around the call.
struct posted_write_ext : tlm::tlm_extension<posted_write_ext> {
    tlm::tlm_extension_base* clone() const override { return new posted_write_ext; }
    void copy_from(const tlm::tlm_extension_base&) override {}
    /// The shared instance is never deleted (a payload's destructor frees its extensions).
    void free() override {
        if (this != instance()) delete this;
    }
    static posted_write_ext* instance() {
        static posted_write_ext shared;
        return &shared;
    }
};

/// Offered on a write payload whose data lies in a buffer its owner can spare (a receive slot's
/// packet buffer): a target that keeps the data past the call -- host memory holding a posted
/// write until it lands -- may take the buffer instead of copying the data. It takes it by
/// setting `buffer` to nullptr, keeps the bytes unchanged, and passes the handle to
/// `give_back` once it is done with them; the owner sees `buffer` gone after the call and uses
/// another. The data must lie within [begin, end). Never owned by the payload: the owner sets
/// and clears it around the call. A target that does not know it copies, as without it.
struct buffer_loan_ext : tlm::tlm_extension<buffer_loan_ext> {
    const uint8_t* begin = nullptr;
    const uint8_t* end = nullptr;
    void* buffer = nullptr;                     ///< the owner's handle; nullptr: taken (or none)
    void (*give_back)(void* buffer) = nullptr;  ///< returns a taken buffer to its owner's store
    tlm::tlm_extension_base* clone() const override { return new buffer_loan_ext(*this); }
    void copy_from(const tlm::tlm_extension_base& e) override {
        *this = static_cast<const buffer_loan_ext&>(e);
    }
    /// Never freed with the payload: it belongs to the lender.
    void free() override {}
    /// Whether [data, data + n) lies in the buffer still on offer.
    bool offers(const uint8_t* data, uint64_t n) const {
        return buffer && data >= begin && data <= end && n <= uint64_t(end - data);
    }
};

struct packet;  // model/fabric/packet.h

/// Offered on a fabric packet's payload by a sender whose packet buffer (from packet_pool) holds
/// the bytes: a receiver that keeps the packet past the call (a port's receive queue, a
/// switch's output queue) may take the buffer itself instead of copying it, if `pkt->bytes` is
/// the payload's data pointer (not a faulty cable's altered copy), by swapping one of its free
/// buffers into `pkt`. A second delivery of the same payload (a duplicating cable) then finds
/// another buffer there and copies: the bytes it reads are the taken buffer's, unchanged until
/// the call returns. The sender sets it on its payload once (the payload owns and deletes it)
/// and sets `pkt` before each call, reads the buffer it got back after it, and clears `pkt`.
struct packet_handoff_ext : tlm::tlm_extension<packet_handoff_ext> {
    packet* pkt = nullptr;
    tlm::tlm_extension_base* clone() const override { return new packet_handoff_ext(*this); }
    void copy_from(const tlm::tlm_extension_base& e) override {
        pkt = static_cast<const packet_handoff_ext&>(e).pkt;
    }
};

}  // namespace hcasim
