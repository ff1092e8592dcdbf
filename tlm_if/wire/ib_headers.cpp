// InfiniBand wire-format codec; see ib_headers.h for the layouts and sources.
#include "tlm_if/wire/ib_headers.h"

#include <boost/crc.hpp>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

namespace hcasim::wire {

namespace {

// The ICRC is CRC-32/ISO-HDLC (Ethernet): poly 0x04C11DB7, init/xorout all ones, reflected
// in and out — zlib's crc32(), whose word-at-a-time implementation runs ~8x faster than a
// byte table (CRCs over every packet were 90% of simulation time with Boost's byte table).
//
// The VCRC is poly 0x100B, init 0xFFFF, xorout 0xFFFF, reflected in and out. No library has
// a fast engine for it, so the byte table comes from Boost.CRC (T0[b] = CRC of the single
// byte b with zero init and no xorout) and is extended to slicing-by-8: T[k][b] is T0 for
// byte b followed by k zero bytes. The tests check it against Boost on every packet shape.
using vcrc_engine = boost::crc_optimal<16, 0x100B, 0xFFFF, 0xFFFF, true, true>;
using vcrc_byte = boost::crc_optimal<16, 0x100B, 0, 0, true, true>;

struct vcrc_tables {
    std::array<std::array<uint16_t, 256>, 8> t{};
    vcrc_tables() {
        for (unsigned b = 0; b < 256; ++b) {
            vcrc_byte c;
            const uint8_t byte = static_cast<uint8_t>(b);
            c.process_byte(byte);
            t[0][b] = c.checksum();
        }
        for (unsigned k = 1; k < 8; ++k)
            for (unsigned b = 0; b < 256; ++b)
                t[k][b] = static_cast<uint16_t>((t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF]);
    }
};
const vcrc_tables& vtab() {
    static const vcrc_tables tables;
    return tables;
}

void put_le16(uint8_t* out, uint16_t v) {
    out[0] = static_cast<uint8_t>(v);
    out[1] = static_cast<uint8_t>(v >> 8);
}
void put_le32(uint8_t* out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t get_le16(const uint8_t* in) { return static_cast<uint16_t>(in[0] | (in[1] << 8)); }
uint32_t get_le32(const uint8_t* in) {
    return static_cast<uint32_t>(in[0]) | (static_cast<uint32_t>(in[1]) << 8) |
           (static_cast<uint32_t>(in[2]) << 16) | (static_cast<uint32_t>(in[3]) << 24);
}
void put_be24(uint8_t* out, uint32_t v) {
    out[0] = static_cast<uint8_t>(v >> 16);
    out[1] = static_cast<uint8_t>(v >> 8);
    out[2] = static_cast<uint8_t>(v);
}
uint32_t get_be24(const uint8_t* in) {
    return (static_cast<uint32_t>(in[0]) << 16) | (static_cast<uint32_t>(in[1]) << 8) | in[2];
}

constexpr uint32_t MASK24 = 0xFFFFFF;

}  // namespace

// ------------------------------------------------------------------ big-endian helpers
void put_be16(uint8_t* out, uint16_t v) {
    out[0] = static_cast<uint8_t>(v >> 8);
    out[1] = static_cast<uint8_t>(v);
}
void put_be32(uint8_t* out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
void put_be64(uint8_t* out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
uint16_t get_be16(const uint8_t* in) { return static_cast<uint16_t>((in[0] << 8) | in[1]); }
uint32_t get_be32(const uint8_t* in) {
    return (static_cast<uint32_t>(in[0]) << 24) | (static_cast<uint32_t>(in[1]) << 16) |
           (static_cast<uint32_t>(in[2]) << 8) | in[3];
}
uint64_t get_be64(const uint8_t* in) {
    return (static_cast<uint64_t>(get_be32(in)) << 32) | get_be32(in + 4);
}

// ------------------------------------------------------------------ LRH
void encode(const lrh& h, uint8_t* out) {
    out[0] = static_cast<uint8_t>(((h.vl & 0xF) << 4) | (h.lver & 0xF));
    out[1] = static_cast<uint8_t>(((h.sl & 0xF) << 4) | (static_cast<uint8_t>(h.next) & 0x3));
    put_be16(out + 2, h.dlid);
    put_be16(out + 4, static_cast<uint16_t>(h.pkt_len_words & 0x7FF));
    put_be16(out + 6, h.slid);
}
lrh decode_lrh(const uint8_t* in) {
    lrh h;
    h.vl = in[0] >> 4;
    h.lver = in[0] & 0xF;
    h.sl = in[1] >> 4;
    h.next = static_cast<lnh>(in[1] & 0x3);
    h.dlid = get_be16(in + 2);
    h.pkt_len_words = get_be16(in + 4) & 0x7FF;
    h.slid = get_be16(in + 6);
    return h;
}

// ------------------------------------------------------------------ GRH
void encode(const grh& h, uint8_t* out) {
    const uint32_t w0 = (static_cast<uint32_t>(h.ip_ver & 0xF) << 28) |
                        (static_cast<uint32_t>(h.tclass) << 20) | (h.flow_label & 0xFFFFF);
    put_be32(out, w0);
    put_be16(out + 4, h.pay_len);
    out[6] = h.next_hdr;
    out[7] = h.hop_limit;
    std::memcpy(out + 8, h.sgid.data(), 16);
    std::memcpy(out + 24, h.dgid.data(), 16);
}
grh decode_grh(const uint8_t* in) {
    grh h;
    const uint32_t w0 = get_be32(in);
    h.ip_ver = static_cast<uint8_t>(w0 >> 28);
    h.tclass = static_cast<uint8_t>(w0 >> 20);
    h.flow_label = w0 & 0xFFFFF;
    h.pay_len = get_be16(in + 4);
    h.next_hdr = in[6];
    h.hop_limit = in[7];
    std::memcpy(h.sgid.data(), in + 8, 16);
    std::memcpy(h.dgid.data(), in + 24, 16);
    return h;
}

// ------------------------------------------------------------------ BTH
void encode(const bth& h, uint8_t* out) {
    out[0] = h.opcode;
    out[1] = static_cast<uint8_t>((h.se ? 0x80 : 0) | (h.mig_req ? 0x40 : 0) | ((h.pad_count & 0x3) << 4) |
                                  (h.tver & 0xF));
    put_be16(out + 2, h.pkey);
    out[4] = static_cast<uint8_t>((h.fecn ? 0x80 : 0) | (h.becn ? 0x40 : 0));  // Resv6 = 0
    put_be24(out + 5, h.dest_qp & MASK24);
    out[8] = h.ack_req ? 0x80 : 0;  // Resv7 = 0
    put_be24(out + 9, h.psn & MASK24);
}
bth decode_bth(const uint8_t* in) {
    bth h;
    h.opcode = in[0];
    h.se = (in[1] & 0x80) != 0;
    h.mig_req = (in[1] & 0x40) != 0;
    h.pad_count = (in[1] >> 4) & 0x3;
    h.tver = in[1] & 0xF;
    h.pkey = get_be16(in + 2);
    h.fecn = (in[4] & 0x80) != 0;
    h.becn = (in[4] & 0x40) != 0;
    h.dest_qp = get_be24(in + 5);
    h.ack_req = (in[8] & 0x80) != 0;
    h.psn = get_be24(in + 9);
    return h;
}

// ------------------------------------------------------------------ extension headers
void encode(const reth& h, uint8_t* out) {
    put_be64(out, h.va);
    put_be32(out + 8, h.rkey);
    put_be32(out + 12, h.dma_len);
}
reth decode_reth(const uint8_t* in) {
    reth h;
    h.va = get_be64(in);
    h.rkey = get_be32(in + 8);
    h.dma_len = get_be32(in + 12);
    return h;
}

void encode(const aeth& h, uint8_t* out) {
    out[0] = h.syndrome;
    put_be24(out + 1, h.msn & MASK24);
}
aeth decode_aeth(const uint8_t* in) {
    aeth h;
    h.syndrome = in[0];
    h.msn = get_be24(in + 1);
    return h;
}

void encode(const deth& h, uint8_t* out) {
    put_be32(out, h.qkey);
    out[4] = 0;
    put_be24(out + 5, h.src_qp & MASK24);
}
deth decode_deth(const uint8_t* in) {
    deth h;
    h.qkey = get_be32(in);
    h.src_qp = get_be24(in + 5);
    return h;
}

void encode(const atomic_eth& h, uint8_t* out) {
    put_be64(out, h.va);
    put_be32(out + 8, h.rkey);
    put_be64(out + 12, h.swap_add);
    put_be64(out + 20, h.compare);
}
atomic_eth decode_atomic_eth(const uint8_t* in) {
    atomic_eth h;
    h.va = get_be64(in);
    h.rkey = get_be32(in + 8);
    h.swap_add = get_be64(in + 12);
    h.compare = get_be64(in + 20);
    return h;
}

void encode(const atomic_ack_eth& h, uint8_t* out) { put_be64(out, h.orig_data); }
atomic_ack_eth decode_atomic_ack_eth(const uint8_t* in) {
    atomic_ack_eth h;
    h.orig_data = get_be64(in);
    return h;
}

void encode(const rdeth& h, uint8_t* out) {
    out[0] = 0;
    put_be24(out + 1, h.ee_context & MASK24);
}
rdeth decode_rdeth(const uint8_t* in) {
    rdeth h;
    h.ee_context = get_be24(in + 1);
    return h;
}

void encode(const xrceth& h, uint8_t* out) {
    out[0] = 0;
    put_be24(out + 1, h.srqn & MASK24);
}
xrceth decode_xrceth(const uint8_t* in) {
    xrceth h;
    h.srqn = get_be24(in + 1);
    return h;
}

// ------------------------------------------------------------------ opcode layouts
// IBA 9.2 / Table "Header sequences by opcode"; cross-checked with Wireshark's
// find_next_header_sequence() opcode tables and Linux rxe_opcode.c.
namespace {
constexpr opcode_layout compute_layout(uint8_t opcode) {
    opcode_layout l;
    const uint8_t transport = opcode & op::TRANSPORT_MASK;
    const uint8_t code = opcode & 0x1F;

    auto common = [&](uint8_t c) -> bool {  // RC/UC/RD shared operations
        switch (c) {
        case op::SEND_FIRST:
        case op::SEND_MIDDLE:
        case op::SEND_LAST:
        case op::SEND_ONLY:
        case op::RDMA_WRITE_MIDDLE:
        case op::RDMA_WRITE_LAST: l.payload = true; return true;
        case op::SEND_LAST_IMM:
        case op::SEND_ONLY_IMM:
        case op::RDMA_WRITE_LAST_IMM: l.immdt = l.payload = true; return true;
        case op::RDMA_WRITE_FIRST:
        case op::RDMA_WRITE_ONLY: l.reth = l.payload = true; return true;
        case op::RDMA_WRITE_ONLY_IMM: l.reth = l.immdt = l.payload = true; return true;
        default: return false;
        }
    };
    auto reliable = [&](uint8_t c) -> bool {  // RC/RD only operations (no DETH set here)
        switch (c) {
        case op::RDMA_READ_REQUEST: l.reth = true; return true;
        case op::RDMA_READ_RESPONSE_FIRST:
        case op::RDMA_READ_RESPONSE_LAST:
        case op::RDMA_READ_RESPONSE_ONLY: l.aeth = l.payload = true; return true;
        case op::RDMA_READ_RESPONSE_MIDDLE: l.payload = true; return true;
        case op::ACKNOWLEDGE: l.aeth = true; return true;
        case op::ATOMIC_ACKNOWLEDGE: l.aeth = l.atomic_ack_eth = true; return true;
        case op::COMPARE_SWAP:
        case op::FETCH_ADD: l.atomic_eth = true; return true;
        default: return false;
        }
    };
    auto is_response = [](uint8_t c) {
        return c >= op::RDMA_READ_RESPONSE_FIRST && c <= op::ATOMIC_ACKNOWLEDGE;
    };

    switch (transport) {
    case op::RC:
    case op::XRC:
        if (common(code) || reliable(code)) {
            l.valid = true;
        } else if (code == op::SEND_LAST_INV || code == op::SEND_ONLY_INV) {
            l.valid = l.ieth = l.payload = true;
        }
        l.xrceth = l.valid && transport == op::XRC && !is_response(code);
        break;
    case op::UC: l.valid = common(code); break;
    case op::RD:
        if (common(code) || reliable(code)) {
            l.valid = true;
            l.rdeth = true;
            l.deth = !is_response(code);  // responses carry RDETH only
        } else if (code == op::RESYNC) {
            l.valid = l.rdeth = l.deth = true;
        }
        break;
    case op::UD:
        if (code == op::SEND_ONLY) {
            l.valid = l.deth = l.payload = true;
        } else if (code == op::SEND_ONLY_IMM) {
            l.valid = l.deth = l.immdt = l.payload = true;
        }
        break;
    default: break;
    }
    if (!l.valid) return opcode_layout{};
    size_t n = 0;
    if (l.rdeth) n += RDETH_BYTES;
    if (l.deth) n += DETH_BYTES;
    if (l.xrceth) n += XRCETH_BYTES;
    if (l.reth) n += RETH_BYTES;
    if (l.atomic_eth) n += ATOMIC_ETH_BYTES;
    if (l.aeth) n += AETH_BYTES;
    if (l.atomic_ack_eth) n += ATOMIC_ACK_ETH_BYTES;
    if (l.immdt) n += IMMDT_BYTES;
    if (l.ieth) n += IETH_BYTES;
    l.eth = static_cast<uint8_t>(n);
    return l;
}

// Every packet asks: a table of the 256 opcodes, computed by the compiler from the rules above
// (constant-initialised: no first-call guard, usable from any static initialiser).
constexpr std::array<opcode_layout, 256> make_layout_table() {
    std::array<opcode_layout, 256> t{};
    for (unsigned o = 0; o < 256; ++o) t[o] = compute_layout(static_cast<uint8_t>(o));
    return t;
}
constexpr std::array<opcode_layout, 256> LAYOUTS = make_layout_table();
static_assert(LAYOUTS[0x04].valid && LAYOUTS[0x04].payload && LAYOUTS[0x04].eth == 0,
              "RC SEND ONLY: BTH only");
static_assert(LAYOUTS[0x0A].reth && LAYOUTS[0x0A].eth == RETH_BYTES, "RC RDMA WRITE ONLY: RETH");
static_assert(LAYOUTS[0x53].eth == RDETH_BYTES + DETH_BYTES + ATOMIC_ETH_BYTES,
              "RD CmpSwap: the longest run");
static_assert(LAYOUTS[0xAA].xrceth && LAYOUTS[0xAA].eth == XRCETH_BYTES + RETH_BYTES,
              "XRC RDMA WRITE ONLY: XRCETH, RETH");
static_assert(!LAYOUTS[0xB1].xrceth && LAYOUTS[0xB1].eth == AETH_BYTES, "XRC ACK: AETH only");
static_assert(!LAYOUTS[0xFF].valid && LAYOUTS[0xFF].eth == 0, "undefined opcodes have no layout");
}  // namespace

opcode_layout layout_of(uint8_t opcode) { return LAYOUTS[opcode]; }

// ------------------------------------------------------------------ packets
namespace {

// LRH (+GRH) + BTH of a packet of `words` 4-byte words (LRH through ICRC) with `pad` pad
// bytes, first filling the length fields, LNH and PadCnt from them; returns the bytes written.
size_t encode_base(headers& h, size_t words, size_t pad, uint8_t* out) {
    h.l.pkt_len_words = static_cast<uint16_t>(words);
    h.l.next = h.has_grh ? lnh::iba_global : lnh::iba_local;
    h.b.pad_count = static_cast<uint8_t>(pad);
    if (h.has_grh) h.g.pay_len = static_cast<uint16_t>(words * 4 - LRH_BYTES - GRH_BYTES);
    encode(h.l, out);
    size_t n = LRH_BYTES;
    if (h.has_grh) {
        encode(h.g, out + n);
        n += GRH_BYTES;
    }
    encode(h.b, out + n);
    return n + BTH_BYTES;
}

// What every IBA packet passes before its opcode matters (parse_packet, parse_cnp).
struct frame {
    lrh l;
    bool has_grh = false;
    size_t bth_off = 0;   // where the BTH starts
    size_t wire_len = 0;  // LRH through ICRC, from PktLen
    bth b;
};

// Checks, in this order: length/LRH, PktLen vs len, VCRC, GRH, BTH TVer.
parse_status parse_frame(const uint8_t* pkt, size_t len, bool check_crcs, frame& f) {
    if (pkt == nullptr || len < LRH_BYTES) return parse_status::truncated;
    f.l = decode_lrh(pkt);
    if (f.l.lver != 0) return parse_status::bad_lver;
    if (f.l.next != lnh::iba_local && f.l.next != lnh::iba_global) return parse_status::bad_lnh;
    f.has_grh = f.l.next == lnh::iba_global;

    f.wire_len = static_cast<size_t>(f.l.pkt_len_words) * 4;
    f.bth_off = LRH_BYTES + (f.has_grh ? GRH_BYTES : 0);
    if (f.wire_len < f.bth_off + BTH_BYTES + ICRC_BYTES) return parse_status::bad_pkt_len;
    if (len < f.wire_len + VCRC_BYTES) return parse_status::truncated;
    if (len > f.wire_len + VCRC_BYTES) return parse_status::bad_pkt_len;

    if (check_crcs && get_le16(pkt + f.wire_len) != vcrc(pkt, f.wire_len)) return parse_status::bad_vcrc;

    if (f.has_grh) {
        const grh g = decode_grh(pkt + LRH_BYTES);
        if (g.ip_ver != 6 || g.next_hdr != GRH_NEXT_HDR_IBA) return parse_status::bad_lnh;
        if (g.pay_len != f.wire_len - LRH_BYTES - GRH_BYTES) return parse_status::bad_pkt_len;
    }
    f.b = decode_bth(pkt + f.bth_off);
    if (f.b.tver != 0) return parse_status::bad_tver;
    return parse_status::ok;
}

bool icrc_ok(const uint8_t* pkt, size_t wire_len) {
    return get_le32(pkt + wire_len - ICRC_BYTES) == icrc(pkt, wire_len - ICRC_BYTES);
}

// Fills the LRH, GRH and BTH of `h` from a frame that parsed, the other headers at their defaults.
void set_base(headers& h, const uint8_t* pkt, const frame& f) {
    h = BLANK_HEADERS;
    h.l = f.l;
    h.has_grh = f.has_grh;
    if (f.has_grh) h.g = decode_grh(pkt + LRH_BYTES);
    h.b = f.b;
}

}  // namespace

size_t header_bytes(const headers& h) {
    const opcode_layout& l = LAYOUTS[h.b.opcode];
    if (!l.valid) return 0;
    return LRH_BYTES + (h.has_grh ? GRH_BYTES : 0) + BTH_BYTES + l.eth;
}

size_t packet_bytes(const headers& h, size_t payload_len) {
    const size_t hdr = header_bytes(h);
    if (hdr == 0) return 0;
    const size_t pad = (4 - payload_len % 4) % 4;
    return hdr + payload_len + pad + ICRC_BYTES + VCRC_BYTES;
}

size_t encode_headers(headers& h, size_t payload_len, uint8_t* out) {
    const opcode_layout& l = LAYOUTS[h.b.opcode];
    if (!l.valid) return 0;
    if (!l.payload && payload_len != 0) return 0;
    const size_t hdr = LRH_BYTES + (h.has_grh ? GRH_BYTES : 0) + BTH_BYTES + l.eth;
    const size_t pad = (4 - payload_len % 4) % 4;
    const size_t words = (hdr + payload_len + pad + ICRC_BYTES) / 4;
    if (payload_len > MAX_PKT_LEN_WORDS * 4 || words > MAX_PKT_LEN_WORDS) return 0;

    uint8_t* p = out + encode_base(h, words, pad, out);
    if (l.rdeth) {
        encode(h.rd, p);
        p += RDETH_BYTES;
    }
    if (l.deth) {
        encode(h.d, p);
        p += DETH_BYTES;
    }
    if (l.xrceth) {
        encode(h.x, p);
        p += XRCETH_BYTES;
    }
    if (l.reth) {
        encode(h.r, p);
        p += RETH_BYTES;
    }
    if (l.atomic_eth) {
        encode(h.ae, p);
        p += ATOMIC_ETH_BYTES;
    }
    if (l.aeth) {
        encode(h.a, p);
        p += AETH_BYTES;
    }
    if (l.atomic_ack_eth) {
        encode(h.aae, p);
        p += ATOMIC_ACK_ETH_BYTES;
    }
    if (l.immdt) {
        put_be32(p, h.immdt);
        p += IMMDT_BYTES;
    }
    if (l.ieth) {
        put_be32(p, h.ieth_rkey);
        p += IETH_BYTES;
    }
    return static_cast<size_t>(p - out);
}

// IBA Vol 1 7.8.1 (Invariant CRC): the ICRC covers every field that no switch or router
// may change; the variant fields are replaced by ones for the computation. For a local
// packet these are LRH:VL and BTH:Resv8a (the byte now holding FECN/BECN); for a global
// packet the whole LRH (rewritten by routers) and GRH:TClass, FlowLabel, HopLmt, plus
// BTH:Resv8a. (Shanley, "InfiniBand Network Architecture", ch. 25 "Packet CRCs",
// Figures 25-15/25-16.) RoCE reuses this definition, which is why Linux rxe
// (drivers/infiniband/sw/rxe/rxe_icrc.c) seeds its CRC with the result of 8 bytes of 0xFF
// "representing a masked LRH" and sets the BTH Resv8a byte to 0xFF, and scapy's RoCE
// BTH.compute_icrc prepends b'\xff' * 8; both then run the standard CRC-32 and store it
// least-significant byte first.
uint32_t icrc(const uint8_t* pkt, size_t len) {
    uLong crc = crc32(0L, Z_NULL, 0);
    if (len == 0) return static_cast<uint32_t>(crc);
    const lnh next = len >= 2 ? static_cast<lnh>(pkt[1] & 0x3) : lnh::iba_local;
    if (next == lnh::raw || next == lnh::ip_non_ib)
        return static_cast<uint32_t>(crc32(crc, pkt, static_cast<uInt>(len)));
    const bool global = next == lnh::iba_global;
    const size_t bth_off = LRH_BYTES + (global ? GRH_BYTES : 0);
    const size_t prefix = std::min(len, bth_off + BTH_BYTES);
    uint8_t buf[LRH_BYTES + GRH_BYTES + BTH_BYTES];
    std::memcpy(buf, pkt, prefix);
    if (global) {
        std::memset(buf, 0xFF, std::min(prefix, LRH_BYTES));  // whole LRH
        const size_t g = LRH_BYTES;
        if (prefix > g + 0) buf[g + 0] |= 0x0F;  // TClass[7:4]
        if (prefix > g + 1) buf[g + 1] = 0xFF;   // TClass[3:0], FlowLabel[19:16]
        if (prefix > g + 2) buf[g + 2] = 0xFF;   // FlowLabel[15:8]
        if (prefix > g + 3) buf[g + 3] = 0xFF;   // FlowLabel[7:0]
        if (prefix > g + 7) buf[g + 7] = 0xFF;   // HopLmt
    } else {
        buf[0] |= 0xF0;  // VL
    }
    if (prefix > bth_off + 4) buf[bth_off + 4] = 0xFF;  // Resv8a: FECN, BECN, Resv6
    crc = crc32(crc, buf, static_cast<uInt>(prefix));
    if (len > prefix) crc = crc32(crc, pkt + prefix, static_cast<uInt>(len - prefix));
    return static_cast<uint32_t>(crc);
}

// IBA Vol 1 7.8.2 (Variant CRC): CRC-16 over LRH through ICRC, recomputed on every hop.
// Parameters as in Endace's dagcrc_infiniband_vcrc16_r (reflected table of 0x100B,
// i.e. 0xD008, init and final XOR 0xFFFF); Endace wrote Wireshark's IB dissector and
// builds IB capture hardware.
uint16_t vcrc(const uint8_t* pkt, size_t len) {
    const auto& t = vtab().t;
    uint16_t crc = 0xFFFF;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        const uint8_t* p = pkt + i;
        crc =
            static_cast<uint16_t>(t[7][(p[0] ^ crc) & 0xFF] ^ t[6][(p[1] ^ (crc >> 8)) & 0xFF] ^ t[5][p[2]] ^
                                  t[4][p[3]] ^ t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]]);
    }
    for (; i < len; ++i) crc = static_cast<uint16_t>((crc >> 8) ^ t[0][(crc ^ pkt[i]) & 0xFF]);
    return static_cast<uint16_t>(crc ^ 0xFFFF);
}

uint16_t vcrc_reference(const uint8_t* pkt, size_t len) {
    vcrc_engine crc;
    if (len) crc.process_bytes(pkt, len);
    return crc.checksum();
}

size_t seal_packet(uint8_t* pkt, size_t len_before_icrc) {
    put_le32(pkt + len_before_icrc, icrc(pkt, len_before_icrc));
    const size_t with_icrc = len_before_icrc + ICRC_BYTES;
    put_le16(pkt + with_icrc, vcrc(pkt, with_icrc));
    return with_icrc + VCRC_BYTES;
}

parse_status parse_packet(const uint8_t* pkt, size_t len, headers& h, size_t& payload_offset,
                          size_t& payload_len, bool check_crcs) {
    payload_offset = 0;
    payload_len = 0;
    // Decoded into locals and validated; `h` is written only for a packet that parses.
    frame f;
    const parse_status st = parse_frame(pkt, len, check_crcs, f);
    if (st != parse_status::ok) return st;
    const bth& b = f.b;
    const opcode_layout& lay = LAYOUTS[b.opcode];
    if (!lay.valid) return parse_status::bad_opcode;

    const size_t bth_off = f.bth_off;
    const size_t hdr_end = bth_off + BTH_BYTES + lay.eth;
    if (hdr_end + ICRC_BYTES > f.wire_len) return parse_status::bad_pkt_len;
    const size_t body = f.wire_len - ICRC_BYTES - hdr_end;  // payload + pad
    if (body < b.pad_count) return parse_status::bad_pkt_len;
    if (!lay.payload && body != 0) return parse_status::bad_pkt_len;

    if (check_crcs && !icrc_ok(pkt, f.wire_len)) return parse_status::bad_icrc;

    set_base(h, pkt, f);
    const uint8_t* p = pkt + bth_off + BTH_BYTES;
    if (lay.rdeth) {
        h.rd = decode_rdeth(p);
        p += RDETH_BYTES;
    }
    if (lay.deth) {
        h.d = decode_deth(p);
        p += DETH_BYTES;
    }
    if (lay.xrceth) {
        h.x = decode_xrceth(p);
        p += XRCETH_BYTES;
    }
    if (lay.reth) {
        h.r = decode_reth(p);
        p += RETH_BYTES;
    }
    if (lay.atomic_eth) {
        h.ae = decode_atomic_eth(p);
        p += ATOMIC_ETH_BYTES;
    }
    if (lay.aeth) {
        h.a = decode_aeth(p);
        p += AETH_BYTES;
    }
    if (lay.atomic_ack_eth) {
        h.aae = decode_atomic_ack_eth(p);
        p += ATOMIC_ACK_ETH_BYTES;
    }
    if (lay.immdt) {
        h.immdt = get_be32(p);
        p += IMMDT_BYTES;
    }
    if (lay.ieth) {
        h.ieth_rkey = get_be32(p);
        p += IETH_BYTES;
    }
    payload_offset = hdr_end;
    payload_len = body - b.pad_count;
    return parse_status::ok;
}

bool mark_fecn(uint8_t* pkt, size_t len) {
    if (pkt == nullptr || len < LRH_BYTES) return false;
    const lrh l = decode_lrh(pkt);
    if (l.next != lnh::iba_local && l.next != lnh::iba_global) return false;
    const size_t wire_len = static_cast<size_t>(l.pkt_len_words) * 4;
    const size_t bth_off = LRH_BYTES + (l.next == lnh::iba_global ? GRH_BYTES : 0);
    if (wire_len < bth_off + BTH_BYTES || len < wire_len + VCRC_BYTES) return false;
    pkt[bth_off + 4] |= 0x80;
    put_le16(pkt + wire_len, vcrc(pkt, wire_len));
    return true;
}

size_t encode_cnp(headers& h, uint8_t* out) {
    h.b.opcode = op::CNP;
    h.b.becn = true;
    h.b.psn = 0;
    const size_t hdr = LRH_BYTES + (h.has_grh ? GRH_BYTES : 0) + BTH_BYTES;
    return seal_packet(out, encode_base(h, (hdr + ICRC_BYTES) / 4, 0, out));
}

bool is_cnp(const uint8_t* pkt, size_t len) {
    if (pkt == nullptr || len < LRH_BYTES) return false;
    const lnh next = static_cast<lnh>(pkt[1] & 0x3);
    const size_t bth_off = LRH_BYTES + (next == lnh::iba_global ? GRH_BYTES : 0);
    return (next == lnh::iba_local || next == lnh::iba_global) && len > bth_off && pkt[bth_off] == op::CNP;
}

parse_status parse_cnp(const uint8_t* pkt, size_t len, headers& h, bool check_crcs) {
    frame f;
    const parse_status st = parse_frame(pkt, len, check_crcs, f);
    if (st != parse_status::ok) return st;
    if (f.b.opcode != op::CNP) return parse_status::bad_opcode;
    if (f.wire_len != f.bth_off + BTH_BYTES + ICRC_BYTES || f.b.pad_count != 0)
        return parse_status::bad_pkt_len;
    if (check_crcs && !icrc_ok(pkt, f.wire_len)) return parse_status::bad_icrc;
    set_base(h, pkt, f);
    return parse_status::ok;
}

const char* to_string(parse_status s) {
    switch (s) {
    case parse_status::ok: return "ok";
    case parse_status::truncated: return "truncated";
    case parse_status::bad_lver: return "bad_lver";
    case parse_status::bad_lnh: return "bad_lnh";
    case parse_status::bad_pkt_len: return "bad_pkt_len";
    case parse_status::bad_vcrc: return "bad_vcrc";
    case parse_status::bad_icrc: return "bad_icrc";
    case parse_status::bad_tver: return "bad_tver";
    case parse_status::bad_opcode: return "bad_opcode";
    }
    return "unknown";
}

// ------------------------------------------------------------------ AETH syndromes
uint8_t aeth_ack(uint8_t credits) { return static_cast<uint8_t>(credits & 0x1F); }
uint8_t aeth_rnr_nak(uint8_t timer) { return static_cast<uint8_t>(0x20 | (timer & 0x1F)); }
uint8_t aeth_nak(uint8_t code) { return static_cast<uint8_t>(0x60 | (code & 0x1F)); }
aeth_type aeth_type_of(uint8_t syndrome) { return static_cast<aeth_type>((syndrome >> 5) & 0x3); }
uint8_t aeth_value_of(uint8_t syndrome) { return syndrome & 0x1F; }

std::string describe_packet(const uint8_t* pkt, size_t len) {
    char out[160];
    if (len < LRH_BYTES) {
        std::snprintf(out, sizeof out, "a %zu-byte fragment", len);
        return out;
    }
    const lrh l = decode_lrh(pkt);
    int n = std::snprintf(out, sizeof out, "SLID 0x%x DLID 0x%x SL %u", unsigned(l.slid), unsigned(l.dlid),
                          unsigned(l.sl));
    const size_t bth_at = LRH_BYTES + (l.next == lnh::iba_global ? GRH_BYTES : 0);
    if ((l.next == lnh::iba_local || l.next == lnh::iba_global) && len >= bth_at + BTH_BYTES) {
        const bth b = decode_bth(pkt + bth_at);
        n += std::snprintf(out + n, sizeof out - size_t(n), " opcode 0x%02x QP 0x%x PSN %u",
                           unsigned(b.opcode), unsigned(b.dest_qp), unsigned(b.psn));
    }
    std::snprintf(out + n, sizeof out - size_t(n), " (%zu bytes)", len);
    return out;
}

}  // namespace hcasim::wire
