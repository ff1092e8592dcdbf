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

/// A packet on the fabric whose bytes are exactly those its sending port sealed (ICRC and VCRC
/// computed over them): nothing corrupted it on the way. A receiving port may then skip
/// recomputing both CRCs (they match by construction). Carried by reference: whoever forwards
/// the bytes unchanged keeps it on the payload it passes on; whoever changes them (fault
/// injection) or cannot vouch for them (a test bench, a fuzzer) leaves it off, and the receiver
/// checks the CRCs. It has no data and is never owned by the payload (set, then cleared, by the
/// payload's owner).
struct crc_intact_ext : tlm::tlm_extension<crc_intact_ext> {
    tlm::tlm_extension_base* clone() const override { return new crc_intact_ext; }
    void copy_from(const tlm::tlm_extension_base&) override {}
    /// The shared instance is never deleted (a payload's destructor frees its extensions).
    void free() override {
        if (this != instance())
            delete this;
    }
    /// The one instance every owner attaches (it carries no state).
    static crc_intact_ext* instance() {
        static crc_intact_ext e;
        return &e;
    }
};

/// True if `gp` carries crc_intact_ext.
inline bool crc_intact(const tlm::tlm_generic_payload& gp) { return gp.get_extension<crc_intact_ext>() != nullptr; }
/// Attaches (intact) or removes crc_intact_ext on `gp`.
inline void set_crc_intact(tlm::tlm_generic_payload& gp, bool intact) {
    if (intact)
        gp.set_extension(crc_intact_ext::instance());
    else
        gp.clear_extension<crc_intact_ext>();
}

}  // namespace hcasim
