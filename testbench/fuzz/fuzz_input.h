// Input format of the port fuzzer (docs/fuzzing.md): a fuzz input is a sequence of packet
// records; each record becomes one packet arriving at the target HCA's port. Decoding and packet
// building are plain functions (no SystemC), so the seed generator and the harness share them.
//
//   record := ctl:u8 sel:u8 psn:i8 gap:u8 len:u16le body[len]     (body clamped to what is left)
//
// ctl bits 1:0 choose how the body becomes a wire packet:
//   0 raw        the body is the whole wire packet, CRCs included (the CRC and parser paths);
//   1 seal       the body is LRH .. pad; ICRC and VCRC are appended (lengths as the body says);
//   2 build      the body is read as LRH [GRH] BTH extension headers payload, retargeted
//                (DLID, DestQP, P_Key of the selected QP, PSN near the expected one), re-encoded
//                with consistent lengths (PktLen, PadCnt, GRH PayLen) and sealed;
//   3 build_mtu  as build, with the payload stretched to the target QP's path MTU (the body's
//                payload bytes repeated), so FIRST/MIDDLE packets of full size cost few input bytes.
// The other ctl bits apply to build kinds only; see namespace ctl.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace hcasim::fuzz {

/// Bytes before a record's body: ctl, sel, psn, gap, len (2).
constexpr size_t RECORD_HEADER_BYTES = 6;
/// Records taken from one input; the rest is ignored.
constexpr size_t MAX_RECORDS = 64;
/// Capacity of one built packet: raw bodies may exceed the port's MAX_PACKET_BYTES (4224) on purpose.
constexpr size_t MAX_WIRE_BYTES = 8192;

enum class kind : uint8_t { raw = 0, seal = 1, build = 2, build_mtu = 3 };

namespace ctl {
constexpr uint8_t KIND_MASK = 0x03;       ///< bits 1:0: kind
constexpr uint8_t KEEP_ADDR = 0x04;       ///< keep DLID, DestQP and P_Key of the body (no retarget)
constexpr uint8_t KEEP_PSN = 0x08;        ///< keep the body's PSN (else expected PSN + psn delta)
constexpr uint8_t LIVE_MR = 0x10;         ///< point RETH / AtomicETH (VA, R_Key) into a target MR
constexpr uint8_t KEEP_TRANSPORT = 0x20;  ///< keep the opcode's transport bits (else forced to RC)
constexpr uint8_t ACK_REQ = 0x40;         ///< set BTH AckReq
constexpr uint8_t GRH = 0x80;             ///< the body has a GRH after the LRH (LNH iba_global)
}  // namespace ctl

/// One decoded record; body points into the input.
struct record {
    uint8_t ctl = 0;       ///< see namespace ctl
    uint8_t sel = 0;       ///< target selector: index (mod count) into the harness's target list
    int8_t psn_delta = 0;  ///< PSN offset from the expected PSN (build kinds)
    uint8_t gap = 0;       ///< arrival gap after the previous packet (gap_ps)
    const uint8_t* body = nullptr;
    size_t body_len = 0;
};

/// Splits an input into at most max records; stops at a record header cut short.
size_t split_records(const uint8_t* data, size_t size, record* out, size_t max);

/// Arrival gap of a gap byte, ps: 0..199 in steps of 8 ns, 200..255 in steps of 100 us
/// (up to 5.6 ms, to let RNR and other timers run between packets).
uint64_t gap_ps(uint8_t gap);

/// The selected target as the builder needs it; req_psn / resp_psn are the expected PSNs of the
/// next request and next response packet and advance past each packet built (so PSN delta 0
/// gives consecutive PSNs for a FIRST/MIDDLE/LAST sequence).
struct target_info {
    uint32_t qpn = 0;          ///< DestQP
    uint16_t lid = 0;          ///< DLID (the target port's LID)
    uint16_t pkey = 0xFFFF;    ///< P_Key the QP is bound to
    uint32_t mtu_bytes = 256;  ///< path MTU of the QP (payload size of build_mtu)
    uint32_t req_psn = 0;      ///< expected PSN of the next request (the responder's ePSN)
    uint32_t resp_psn = 0;     ///< expected PSN of the next response (ACK, READ response)
};

/// A memory region of the target that LIVE_MR may point RETH / AtomicETH at.
struct mr_info {
    uint64_t va = 0;
    uint64_t len = 0;
    uint32_t rkey = 0;
};

/// True for opcodes the requester receives (READ responses, ACK, atomic ACK) on any transport.
bool is_response_opcode(uint8_t opcode);

/// Builds the wire bytes of one record into out (capacity MAX_WIRE_BYTES); returns the length.
/// `t` is the selected target; its PSN fields advance. `mrs` (n_mrs > 0) serve LIVE_MR.
size_t build_packet(const record& r, target_info& t, const mr_info* mrs, size_t n_mrs, uint8_t* out);

/// Destination QP a wire packet names (BTH after LRH, or after LRH + GRH), or ~0u if too short.
uint32_t dest_qp_of(const uint8_t* pkt, size_t len);

/// Appends one record to an input (seed generator); body_len must fit in 16 bits.
void append_record(std::vector<uint8_t>& out, uint8_t ctl, uint8_t sel, int8_t psn_delta, uint8_t gap,
                   const std::vector<uint8_t>& body);

}  // namespace hcasim::fuzz
