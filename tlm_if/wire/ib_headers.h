// InfiniBand wire-format codec: the one place in hcasim that shifts header bits.
//
// Byte-exact, big-endian (network order) encode/decode of the IBA Vol 1 packet headers
// (chapter 7: LRH, GRH, ICRC, VCRC; chapter 9: BTH and the extended transport headers),
// full-packet build (encode_headers + seal_packet) and validating parse (parse_packet).
//
// Wire layouts (bit 7 of a byte is its most significant bit; fields listed MSB first):
//   LRH  (8 B)  VL(4) LVer(4) | SL(4) Rsv(2) LNH(2) | DLID(16) | Rsv(5) PktLen(11) | SLID(16)
//   GRH  (40 B) IPVer(4) TClass(8) FlowLabel(20) | PayLen(16) NxtHdr(8) HopLmt(8) | SGID(128) | DGID(128)
//   BTH  (12 B) OpCode(8) | SE(1) M(1) PadCnt(2) TVer(4) | P_Key(16) |
//               FECN(1) BECN(1) Resv6(6) DestQP(24) | A(1) Resv7(7) PSN(24)
//   RDETH(4 B)  Rsv(8) EECnxt(24)
//   DETH (8 B)  Q_Key(32) | Rsv(8) SrcQP(24)
//   RETH (16 B) VA(64) | R_Key(32) | DMALen(32)
//   AtomicETH (28 B) VA(64) | R_Key(32) | SwapAddData(64) | CompareData(64)
//   AETH (4 B)  Syndrome(8) MSN(24)
//   AtomicAckETH (8 B) OrigRemData(64)
//   ImmDt (4 B), IETH (4 B, R_Key): plain big-endian 32-bit values
//   ICRC (4 B), VCRC (2 B): see icrc() / vcrc() below for the exact algorithm and byte order.
//   CNP (IBA Annex A10): LRH (+GRH) + BTH with opcode 0x80 and BECN, no payload (encode_cnp).
// The same layouts are used by Wireshark's packet-infiniband.c and by Linux
// include/rdma/ib_hdrs.h / drivers/infiniband/sw/rxe; packets produced here decode field
// for field in Wireshark's "infiniband" dissector (tshark 4.0: pcap link type mapped via
// uat:user_dlts, since that version does not take link type 247 directly).
//
// No function in this header allocates on the heap.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace hcasim::wire {

// ---------------------------------------------------------------------------------------
// Sizes
// ---------------------------------------------------------------------------------------
constexpr size_t LRH_BYTES = 8;
constexpr size_t GRH_BYTES = 40;
constexpr size_t BTH_BYTES = 12;
constexpr size_t RDETH_BYTES = 4;
constexpr size_t DETH_BYTES = 8;
constexpr size_t XRCETH_BYTES = 4;
constexpr size_t RETH_BYTES = 16;
constexpr size_t AETH_BYTES = 4;
constexpr size_t ATOMIC_ETH_BYTES = 28;
constexpr size_t ATOMIC_ACK_ETH_BYTES = 8;
constexpr size_t IMMDT_BYTES = 4;
constexpr size_t IETH_BYTES = 4;
constexpr size_t ICRC_BYTES = 4;
constexpr size_t VCRC_BYTES = 2;
/// Largest extension-header run after BTH of any opcode layout_of() accepts:
/// RD CmpSwap/FetchAdd = RDETH + DETH + AtomicETH (4 + 8 + 28 = 40 B); every other
/// combination is smaller (RD RDMA WRITE ONLY IMM: 4 + 8 + 16 + 4 = 32 B).
constexpr size_t MAX_ETH_BYTES = RDETH_BYTES + DETH_BYTES + ATOMIC_ETH_BYTES;
/// Upper bound of header_bytes() for any valid opcode: LRH + GRH + BTH + MAX_ETH_BYTES = 100.
constexpr size_t MAX_HEADER_BYTES = LRH_BYTES + GRH_BYTES + BTH_BYTES + MAX_ETH_BYTES;
/// PktLen is an 11-bit count of 4-byte words (LRH through ICRC).
constexpr size_t MAX_PKT_LEN_WORDS = 0x7FF;
/// GRH NxtHdr value announcing an IBA transport header (BTH) after the GRH.
constexpr uint8_t GRH_NEXT_HDR_IBA = 0x1B;
/// LID space: 0 reserved, unicast 0x0001-0xBFFF, multicast 0xC000-0xFFFE, permissive 0xFFFF
/// (Linux IB_MULTICAST_LID_BASE, IB_LID_PERMISSIVE).
constexpr uint16_t MULTICAST_LID_BASE = 0xC000;
constexpr uint16_t PERMISSIVE_LID = 0xFFFF;

// ---------------------------------------------------------------------------------------
// Header structs (host-order field values; encode()/decode_*() convert to/from the wire)
// ---------------------------------------------------------------------------------------

/// LRH Link Next Header: what follows the LRH.
enum class lnh : uint8_t { raw = 0, ip_non_ib = 1, iba_local = 2, iba_global = 3 };

/// Local Route Header (IBA 7.7), 8 bytes.
struct lrh {
    uint8_t vl = 0;              ///< Virtual Lane, 4 bits (variant: may change per hop).
    uint8_t lver = 0;            ///< Link version, 4 bits (0 for IBA 1.x).
    uint8_t sl = 0;              ///< Service Level, 4 bits.
    lnh next = lnh::iba_local;   ///< Link Next Header, 2 bits.
    uint16_t dlid = 0;           ///< Destination LID.
    uint16_t pkt_len_words = 0;  ///< Packet length in 4-byte words, LRH through ICRC (not VCRC), 11 bits.
    uint16_t slid = 0;           ///< Source LID.
};

/// Global Route Header (IBA 8.3), 40 bytes, IPv6-like.
struct grh {
    uint8_t ip_ver = 6;                   ///< IP version, 4 bits (6).
    uint8_t tclass = 0;                   ///< Traffic class (variant for ICRC).
    uint32_t flow_label = 0;              ///< Flow label, 20 bits (variant for ICRC).
    uint16_t pay_len = 0;                 ///< Bytes after the GRH up to and including the ICRC.
    uint8_t next_hdr = GRH_NEXT_HDR_IBA;  ///< Next header (0x1B = IBA transport).
    uint8_t hop_limit = 0;                ///< Hop limit (variant for ICRC).
    std::array<uint8_t, 16> sgid{};       ///< Source GID, wire order.
    std::array<uint8_t, 16> dgid{};       ///< Destination GID, wire order.
};

/// Base Transport Header (IBA 9.2), 12 bytes.
struct bth {
    uint8_t opcode = 0;      ///< OpCode: transport (bits 7:5) + operation (bits 4:0); see namespace op.
    bool se = false;         ///< Solicited Event.
    bool mig_req = false;    ///< MigReq (path migration state).
    uint8_t pad_count = 0;   ///< Pad bytes (0-3) appended to the payload to a 4-byte multiple.
    uint8_t tver = 0;        ///< Transport header version, 4 bits (0).
    uint16_t pkey = 0xFFFF;  ///< Partition key.
    bool fecn = false;       ///< Forward ECN (in the variant Resv8a byte).
    bool becn = false;       ///< Backward ECN (in the variant Resv8a byte).
    uint32_t dest_qp = 0;    ///< Destination QP number, 24 bits.
    bool ack_req = false;    ///< AckReq: responder should acknowledge this packet.
    uint32_t psn = 0;        ///< Packet sequence number, 24 bits.
};

/// RDMA Extended Transport Header (IBA 9.3.3), 16 bytes.
struct reth {
    uint64_t va = 0;       ///< Remote virtual address.
    uint32_t rkey = 0;     ///< Remote key.
    uint32_t dma_len = 0;  ///< DMA length in bytes of the whole RDMA operation.
};

/// ACK Extended Transport Header (IBA 9.3.5), 4 bytes.
struct aeth {
    uint8_t syndrome = 0;  ///< Syndrome (see aeth_ack / aeth_rnr_nak / aeth_nak).
    uint32_t msn = 0;      ///< Message sequence number, 24 bits.
};

/// Datagram Extended Transport Header (IBA 9.3.2), 8 bytes.
struct deth {
    uint32_t qkey = 0;    ///< Queue key.
    uint32_t src_qp = 0;  ///< Source QP number, 24 bits.
};

/// Atomic Extended Transport Header (IBA 9.3.4), 28 bytes.
struct atomic_eth {
    uint64_t va = 0;        ///< Remote virtual address (8-byte aligned).
    uint32_t rkey = 0;      ///< Remote key.
    uint64_t swap_add = 0;  ///< Swap (CmpSwap) or add (FetchAdd) operand.
    uint64_t compare = 0;   ///< Compare operand (CmpSwap only).
};

/// Atomic Acknowledge Extended Transport Header (IBA 9.3.6), 8 bytes.
struct atomic_ack_eth {
    uint64_t orig_data = 0;  ///< Original remote data returned by the atomic.
};

/// XRC Extended Transport Header (IBA 9.3.8), 4 bytes: the XRC SRQ a request goes to.
struct xrceth {
    uint32_t srqn = 0;  ///< XRC SRQ number, 24 bits.
};

/// Reliable Datagram Extended Transport Header (IBA 9.3.1), 4 bytes.
struct rdeth {
    uint32_t ee_context = 0;  ///< End-to-end context, 24 bits.
};

// ---------------------------------------------------------------------------------------
// Per-header encode/decode. encode writes exactly <HDR>_BYTES bytes at out; decode reads
// exactly that many from in. Out-of-range field values are masked to the field width.
// ---------------------------------------------------------------------------------------
void encode(const lrh& h, uint8_t* out);
lrh decode_lrh(const uint8_t* in);
void encode(const grh& h, uint8_t* out);
grh decode_grh(const uint8_t* in);
void encode(const bth& h, uint8_t* out);
bth decode_bth(const uint8_t* in);
void encode(const reth& h, uint8_t* out);
reth decode_reth(const uint8_t* in);
void encode(const aeth& h, uint8_t* out);
aeth decode_aeth(const uint8_t* in);
void encode(const deth& h, uint8_t* out);
deth decode_deth(const uint8_t* in);
void encode(const atomic_eth& h, uint8_t* out);
atomic_eth decode_atomic_eth(const uint8_t* in);
void encode(const atomic_ack_eth& h, uint8_t* out);
atomic_ack_eth decode_atomic_ack_eth(const uint8_t* in);
void encode(const rdeth& h, uint8_t* out);
rdeth decode_rdeth(const uint8_t* in);
void encode(const xrceth& h, uint8_t* out);
xrceth decode_xrceth(const uint8_t* in);

/// Big-endian helpers (ImmDt and IETH are plain be32).
void put_be16(uint8_t* out, uint16_t v);
void put_be32(uint8_t* out, uint32_t v);
void put_be64(uint8_t* out, uint64_t v);
uint16_t get_be16(const uint8_t* in);
uint32_t get_be32(const uint8_t* in);
uint64_t get_be64(const uint8_t* in);

// ---------------------------------------------------------------------------------------
// Opcodes (IBA 9.2, Table "OpCode field"): bits 7:5 transport, bits 4:0 operation.
// ---------------------------------------------------------------------------------------
namespace op {
constexpr uint8_t TRANSPORT_MASK = 0xE0;
constexpr uint8_t RC = 0x00, UC = 0x20, RD = 0x40, UD = 0x60, XRC = 0xA0;

// Operation codes (low 5 bits), shared by all transports that support them.
constexpr uint8_t SEND_FIRST = 0x00;
constexpr uint8_t SEND_MIDDLE = 0x01;
constexpr uint8_t SEND_LAST = 0x02;
constexpr uint8_t SEND_LAST_IMM = 0x03;
constexpr uint8_t SEND_ONLY = 0x04;
constexpr uint8_t SEND_ONLY_IMM = 0x05;
constexpr uint8_t RDMA_WRITE_FIRST = 0x06;
constexpr uint8_t RDMA_WRITE_MIDDLE = 0x07;
constexpr uint8_t RDMA_WRITE_LAST = 0x08;
constexpr uint8_t RDMA_WRITE_LAST_IMM = 0x09;
constexpr uint8_t RDMA_WRITE_ONLY = 0x0A;
constexpr uint8_t RDMA_WRITE_ONLY_IMM = 0x0B;
constexpr uint8_t RDMA_READ_REQUEST = 0x0C;
constexpr uint8_t RDMA_READ_RESPONSE_FIRST = 0x0D;
constexpr uint8_t RDMA_READ_RESPONSE_MIDDLE = 0x0E;
constexpr uint8_t RDMA_READ_RESPONSE_LAST = 0x0F;
constexpr uint8_t RDMA_READ_RESPONSE_ONLY = 0x10;
constexpr uint8_t ACKNOWLEDGE = 0x11;
constexpr uint8_t ATOMIC_ACKNOWLEDGE = 0x12;
constexpr uint8_t COMPARE_SWAP = 0x13;
constexpr uint8_t FETCH_ADD = 0x14;
constexpr uint8_t RESYNC = 0x15;         ///< RD only.
constexpr uint8_t SEND_LAST_INV = 0x16;  ///< RC only.
constexpr uint8_t SEND_ONLY_INV = 0x17;  ///< RC only.

// Reliable Connection
constexpr uint8_t RC_SEND_FIRST = RC | SEND_FIRST;
constexpr uint8_t RC_SEND_MIDDLE = RC | SEND_MIDDLE;
constexpr uint8_t RC_SEND_LAST = RC | SEND_LAST;
constexpr uint8_t RC_SEND_LAST_IMM = RC | SEND_LAST_IMM;
constexpr uint8_t RC_SEND_ONLY = RC | SEND_ONLY;
constexpr uint8_t RC_SEND_ONLY_IMM = RC | SEND_ONLY_IMM;
constexpr uint8_t RC_RDMA_WRITE_FIRST = RC | RDMA_WRITE_FIRST;
constexpr uint8_t RC_RDMA_WRITE_MIDDLE = RC | RDMA_WRITE_MIDDLE;
constexpr uint8_t RC_RDMA_WRITE_LAST = RC | RDMA_WRITE_LAST;
constexpr uint8_t RC_RDMA_WRITE_LAST_IMM = RC | RDMA_WRITE_LAST_IMM;
constexpr uint8_t RC_RDMA_WRITE_ONLY = RC | RDMA_WRITE_ONLY;
constexpr uint8_t RC_RDMA_WRITE_ONLY_IMM = RC | RDMA_WRITE_ONLY_IMM;
constexpr uint8_t RC_RDMA_READ_REQUEST = RC | RDMA_READ_REQUEST;
constexpr uint8_t RC_RDMA_READ_RESPONSE_FIRST = RC | RDMA_READ_RESPONSE_FIRST;
constexpr uint8_t RC_RDMA_READ_RESPONSE_MIDDLE = RC | RDMA_READ_RESPONSE_MIDDLE;
constexpr uint8_t RC_RDMA_READ_RESPONSE_LAST = RC | RDMA_READ_RESPONSE_LAST;
constexpr uint8_t RC_RDMA_READ_RESPONSE_ONLY = RC | RDMA_READ_RESPONSE_ONLY;
constexpr uint8_t RC_ACKNOWLEDGE = RC | ACKNOWLEDGE;
constexpr uint8_t RC_ATOMIC_ACKNOWLEDGE = RC | ATOMIC_ACKNOWLEDGE;
constexpr uint8_t RC_COMPARE_SWAP = RC | COMPARE_SWAP;
constexpr uint8_t RC_FETCH_ADD = RC | FETCH_ADD;
constexpr uint8_t RC_SEND_LAST_INV = RC | SEND_LAST_INV;
constexpr uint8_t RC_SEND_ONLY_INV = RC | SEND_ONLY_INV;

// Unreliable Connection (sends and RDMA writes only)
constexpr uint8_t UC_SEND_FIRST = UC | SEND_FIRST;
constexpr uint8_t UC_SEND_MIDDLE = UC | SEND_MIDDLE;
constexpr uint8_t UC_SEND_LAST = UC | SEND_LAST;
constexpr uint8_t UC_SEND_LAST_IMM = UC | SEND_LAST_IMM;
constexpr uint8_t UC_SEND_ONLY = UC | SEND_ONLY;
constexpr uint8_t UC_SEND_ONLY_IMM = UC | SEND_ONLY_IMM;
constexpr uint8_t UC_RDMA_WRITE_FIRST = UC | RDMA_WRITE_FIRST;
constexpr uint8_t UC_RDMA_WRITE_MIDDLE = UC | RDMA_WRITE_MIDDLE;
constexpr uint8_t UC_RDMA_WRITE_LAST = UC | RDMA_WRITE_LAST;
constexpr uint8_t UC_RDMA_WRITE_LAST_IMM = UC | RDMA_WRITE_LAST_IMM;
constexpr uint8_t UC_RDMA_WRITE_ONLY = UC | RDMA_WRITE_ONLY;
constexpr uint8_t UC_RDMA_WRITE_ONLY_IMM = UC | RDMA_WRITE_ONLY_IMM;

// Reliable Datagram
constexpr uint8_t RD_SEND_FIRST = RD | SEND_FIRST;
constexpr uint8_t RD_SEND_MIDDLE = RD | SEND_MIDDLE;
constexpr uint8_t RD_SEND_LAST = RD | SEND_LAST;
constexpr uint8_t RD_SEND_LAST_IMM = RD | SEND_LAST_IMM;
constexpr uint8_t RD_SEND_ONLY = RD | SEND_ONLY;
constexpr uint8_t RD_SEND_ONLY_IMM = RD | SEND_ONLY_IMM;
constexpr uint8_t RD_RDMA_WRITE_FIRST = RD | RDMA_WRITE_FIRST;
constexpr uint8_t RD_RDMA_WRITE_MIDDLE = RD | RDMA_WRITE_MIDDLE;
constexpr uint8_t RD_RDMA_WRITE_LAST = RD | RDMA_WRITE_LAST;
constexpr uint8_t RD_RDMA_WRITE_LAST_IMM = RD | RDMA_WRITE_LAST_IMM;
constexpr uint8_t RD_RDMA_WRITE_ONLY = RD | RDMA_WRITE_ONLY;
constexpr uint8_t RD_RDMA_WRITE_ONLY_IMM = RD | RDMA_WRITE_ONLY_IMM;
constexpr uint8_t RD_RDMA_READ_REQUEST = RD | RDMA_READ_REQUEST;
constexpr uint8_t RD_RDMA_READ_RESPONSE_FIRST = RD | RDMA_READ_RESPONSE_FIRST;
constexpr uint8_t RD_RDMA_READ_RESPONSE_MIDDLE = RD | RDMA_READ_RESPONSE_MIDDLE;
constexpr uint8_t RD_RDMA_READ_RESPONSE_LAST = RD | RDMA_READ_RESPONSE_LAST;
constexpr uint8_t RD_RDMA_READ_RESPONSE_ONLY = RD | RDMA_READ_RESPONSE_ONLY;
constexpr uint8_t RD_ACKNOWLEDGE = RD | ACKNOWLEDGE;
constexpr uint8_t RD_ATOMIC_ACKNOWLEDGE = RD | ATOMIC_ACKNOWLEDGE;
constexpr uint8_t RD_COMPARE_SWAP = RD | COMPARE_SWAP;
constexpr uint8_t RD_FETCH_ADD = RD | FETCH_ADD;
constexpr uint8_t RD_RESYNC = RD | RESYNC;

// Extended Reliable Connection (the RC operations; requests carry an XRCETH)
constexpr uint8_t XRC_SEND_FIRST = XRC | SEND_FIRST;
constexpr uint8_t XRC_SEND_ONLY = XRC | SEND_ONLY;
constexpr uint8_t XRC_RDMA_WRITE_ONLY = XRC | RDMA_WRITE_ONLY;
constexpr uint8_t XRC_RDMA_READ_REQUEST = XRC | RDMA_READ_REQUEST;
constexpr uint8_t XRC_ACKNOWLEDGE = XRC | ACKNOWLEDGE;

// Unreliable Datagram
constexpr uint8_t UD_SEND_ONLY = UD | SEND_ONLY;          // 0x64
constexpr uint8_t UD_SEND_ONLY_IMM = UD | SEND_ONLY_IMM;  // 0x65

/// Congestion Notification Packet (IBA Annex A10.3.2; Linux IB_OPCODE_CNP). Not a transport
/// opcode: layout_of() and parse_packet() reject it; encode_cnp() / parse_cnp() handle it.
constexpr uint8_t CNP = 0x80;
}  // namespace op

/// Which extension headers an opcode carries (wire order after BTH: RDETH, DETH, XRCETH,
/// RETH | AtomicETH, AETH, AtomicAckETH, ImmDt | IETH) and whether it carries payload.
struct opcode_layout {
    bool valid = false;           ///< Opcode is defined by IBA (and supported here).
    bool rdeth = false;           ///< RDETH present (RD).
    bool deth = false;            ///< DETH present (RD requests, UD).
    bool xrceth = false;          ///< XRCETH present (XRC requests).
    bool reth = false;            ///< RETH present.
    bool atomic_eth = false;      ///< AtomicETH present.
    bool aeth = false;            ///< AETH present.
    bool atomic_ack_eth = false;  ///< AtomicAckETH present.
    bool immdt = false;           ///< ImmDt present.
    bool ieth = false;            ///< IETH present.
    bool payload = false;         ///< Packet may carry payload.
    uint8_t eth = 0;              ///< Bytes of the extension headers above, after BTH (0 if !valid).
};
opcode_layout layout_of(uint8_t opcode);
/// Bytes of extension headers after BTH for this layout (0 if !valid).
inline size_t eth_bytes(const opcode_layout& l) { return l.eth; }

// ---------------------------------------------------------------------------------------
// Whole packets
// ---------------------------------------------------------------------------------------

/// All headers of one packet; only those that layout_of(b.opcode) names are used.
struct headers {
    lrh l;                   ///< Local Route Header.
    bool has_grh = false;    ///< GRH present (l.next == iba_global on the wire).
    grh g;                   ///< Global Route Header (if has_grh).
    bth b;                   ///< Base Transport Header.
    reth r;                  ///< RETH (if layout.reth).
    aeth a;                  ///< AETH (if layout.aeth).
    deth d;                  ///< DETH (if layout.deth).
    atomic_eth ae;           ///< AtomicETH (if layout.atomic_eth).
    atomic_ack_eth aae;      ///< AtomicAckETH (if layout.atomic_ack_eth).
    uint32_t immdt = 0;      ///< Immediate data (if layout.immdt).
    uint32_t ieth_rkey = 0;  ///< R_Key to invalidate (if layout.ieth).
    rdeth rd;                ///< RDETH (if layout.rdeth).
    xrceth x;                ///< XRCETH (if layout.xrceth).
};

/// Every header at its default: `h = BLANK_HEADERS` resets a reused `headers` with one copy
/// (cheaper than `h = headers{}`, which constructs member by member).
inline const headers BLANK_HEADERS{};

/// Bytes before payload for h.b.opcode (+GRH if has_grh); 0 if the opcode is invalid.
size_t header_bytes(const headers& h);

/// Total wire length for payload_len bytes of payload: headers + payload + pad + ICRC + VCRC.
/// 0 if the opcode is invalid.
size_t packet_bytes(const headers& h, size_t payload_len);

/// Writes LRH..last extension header into out (header_bytes(h) bytes; out must hold them),
/// first filling h.l.pkt_len_words, h.l.next, h.b.pad_count and (if has_grh) h.g.pay_len
/// from payload_len (payload padded to 4 bytes). Returns header bytes written, or 0 if the
/// opcode is invalid or the packet would exceed the 11-bit PktLen. No heap allocation.
/// Caller then places payload + pad (zero) bytes and calls seal_packet().
size_t encode_headers(headers& h, size_t payload_len, uint8_t* out);

/// With header+payload+pad already in pkt[0..len_before_icrc), appends ICRC (4 B) and
/// VCRC (2 B); returns the total length (len_before_icrc + 6).
size_t seal_packet(uint8_t* pkt, size_t len_before_icrc);

/// parse_packet result.
enum class parse_status {
    ok,           ///< Packet valid; headers and payload extent filled in.
    truncated,    ///< Buffer shorter than the headers or than LRH:PktLen announces.
    bad_lver,     ///< LRH LVer != 0.
    bad_lnh,      ///< LNH is raw / IP-non-IBA, or GRH does not announce an IBA transport header.
    bad_pkt_len,  ///< PktLen (or GRH PayLen, PadCnt) inconsistent with the buffer or opcode.
    bad_vcrc,     ///< VCRC mismatch.
    bad_icrc,     ///< ICRC mismatch.
    bad_tver,     ///< BTH TVer != 0.
    bad_opcode,   ///< Opcode reserved / unsupported.
};

/// Full-packet parse with validation (checks in this order: length/LRH, PktLen vs len,
/// VCRC, GRH, BTH TVer, opcode, header/pad/payload lengths, ICRC). On ok, payload is
/// [payload_offset, payload_offset + payload_len), excluding pad. Never reads outside
/// pkt[0..len); any byte string yields a status. No heap allocation. check_crcs false skips
/// both CRC comparisons (for bytes known to be exactly what seal_packet sealed).
parse_status parse_packet(const uint8_t* pkt, size_t len, headers& h, size_t& payload_offset,
                          size_t& payload_len, bool check_crcs = true);
const char* to_string(parse_status s);

/// Sets FECN in the BTH of a sealed packet pkt[0..len) as a switch does, and recomputes its
/// VCRC (FECN lies in a variant byte the ICRC masks, so the ICRC stays valid). False, and pkt
/// unchanged, if the LRH announces no IBA transport header or len is shorter than PktLen says.
bool mark_fecn(uint8_t* pkt, size_t len);

/// A CNP on the wire: LRH (+GRH) + BTH + ICRC + VCRC, no payload (PktLen 6 words local, 16
/// global), as Linux hfi1's return_cnp() builds it.
constexpr size_t CNP_BYTES = LRH_BYTES + BTH_BYTES + ICRC_BYTES + VCRC_BYTES;

/// Writes a whole, sealed CNP from h.l (SL, VL, LIDs), h.has_grh / h.g and h.b (P_Key; DestQP =
/// the QP that sent the FECN-marked packet) into out, first setting h.b.opcode = op::CNP,
/// BECN = 1, PSN = 0 and the length fields. Returns the bytes written: CNP_BYTES, or
/// CNP_BYTES + GRH_BYTES with a GRH. No heap allocation.
size_t encode_cnp(headers& h, uint8_t* out);
/// True if pkt's LRH announces an IBA transport header and its BTH opcode is op::CNP (checks
/// nothing else): which of parse_packet / parse_cnp to call.
bool is_cnp(const uint8_t* pkt, size_t len);
/// Full parse of a CNP with parse_packet's checks (LRH, PktLen, VCRC, GRH, TVer, then opcode
/// op::CNP else bad_opcode, no payload or pad else bad_pkt_len, ICRC). On ok, h holds the LRH,
/// GRH and BTH, every other header at its default.
parse_status parse_cnp(const uint8_t* pkt, size_t len, headers& h, bool check_crcs = true);

/// One line naming a packet for logs: "SLID 0x1 DLID 0x2 SL 0 opcode 0x0a QP 0x11 PSN 42 (64 bytes)",
/// from its LRH and (for IBA transport packets long enough) BTH; checks nothing else.
std::string describe_packet(const uint8_t* pkt, size_t len);

/// Invariant CRC (IBA 7.8.1) over pkt[0..len_before_icrc) (LRH through pad).
/// Algorithm: CRC-32 with the Ethernet polynomial 0x04C11DB7, reflected, init 0xFFFFFFFF,
/// final XOR 0xFFFFFFFF (= zlib crc32 / CRC-32/ISO-HDLC), computed over the packet with the
/// variant fields replaced by ones:
///   - local packet (LNH = iba_local): LRH with VL = 0xF; BTH byte 4 (FECN, BECN, Resv6,
///     the old "Resv8a") = 0xFF;
///   - global packet (LNH = iba_global): the whole LRH = 8 x 0xFF (a router rewrites it),
///     GRH TClass, FlowLabel, HopLmt = all ones; BTH byte 4 = 0xFF.
/// Returns the CRC value; on the wire it is stored least-significant byte first
/// (as Linux rxe's rxe_icrc_generate and scapy's RoCE BTH.pack_icrc do).
/// For LNH raw/IP-non-IBA (no ICRC on the wire) the unmasked bytes are used.
uint32_t icrc(const uint8_t* pkt, size_t len_before_icrc);

/// Variant CRC (IBA 7.8.2) over pkt[0..len_before_vcrc) (LRH through ICRC, unmasked).
/// Algorithm: CRC-16, polynomial 0x100B (x^16+x^12+x^3+x+1), reflected, init 0xFFFF,
/// final XOR 0xFFFF (as Endace's dagcrc_infiniband_vcrc16_r). Stored least-significant
/// byte first, like the ICRC.
uint16_t vcrc(const uint8_t* pkt, size_t len_before_vcrc);
/// The same VCRC computed byte by byte by Boost.CRC (the reference vcrc() is tested against).
uint16_t vcrc_reference(const uint8_t* pkt, size_t len_before_vcrc);

// ---------------------------------------------------------------------------------------
// AETH syndrome (IBA 9.7.5.2.x): bit 7 reserved, bits 6:5 type, bits 4:0 value.
// ---------------------------------------------------------------------------------------
namespace nak {
constexpr uint8_t PSN_SEQUENCE_ERROR = 0;
constexpr uint8_t INVALID_REQUEST = 1;
constexpr uint8_t REMOTE_ACCESS_ERROR = 2;
constexpr uint8_t REMOTE_OPERATIONAL_ERROR = 3;
constexpr uint8_t INVALID_RD_REQUEST = 4;
}  // namespace nak
enum class aeth_type : uint8_t { ack = 0, rnr_nak = 1, reserved = 2, nak = 3 };
/// ACK with credit count (0-31; 31 = invalid/unlimited credits).
uint8_t aeth_ack(uint8_t credits);
/// RNR NAK with the 5-bit RNR timer code.
uint8_t aeth_rnr_nak(uint8_t timer);
/// NAK with code (see namespace nak).
uint8_t aeth_nak(uint8_t code);
/// Type (bits 6:5) of a syndrome.
aeth_type aeth_type_of(uint8_t syndrome);
/// Value (bits 4:0: credits, timer or NAK code) of a syndrome.
uint8_t aeth_value_of(uint8_t syndrome);

}  // namespace hcasim::wire
