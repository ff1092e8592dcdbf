#include "testbench/fuzz/fuzz_input.h"

#include <algorithm>
#include <cstring>

#include "tlm_if/wire/ib_headers.h"

namespace hcasim::fuzz {

namespace {
constexpr uint32_t PSN_MASK = 0xFFFFFF;

/// Appends ICRC and VCRC to the body taken as LRH .. pad.
size_t seal_body(const record& r, uint8_t* out) {
    const size_t n = std::min(r.body_len, MAX_WIRE_BYTES - wire::ICRC_BYTES - wire::VCRC_BYTES);
    std::memcpy(out, r.body, n);
    return wire::seal_packet(out, n);
}
}  // namespace

size_t split_records(const uint8_t* data, size_t size, record* out, size_t max) {
    size_t n = 0, off = 0;
    while (n < max && size - off >= RECORD_HEADER_BYTES) {
        record& r = out[n++];
        r.ctl = data[off];
        r.sel = data[off + 1];
        r.psn_delta = int8_t(data[off + 2]);
        r.gap = data[off + 3];
        const size_t len = size_t(data[off + 4]) | size_t(data[off + 5]) << 8;
        off += RECORD_HEADER_BYTES;
        r.body = data + off;
        r.body_len = std::min(len, size - off);
        off += r.body_len;
    }
    return n;
}

uint64_t gap_ps(uint8_t gap) {
    if (gap < 200) return uint64_t(gap) * 8'000;
    return uint64_t(gap - 199) * 100'000'000;
}

bool is_response_opcode(uint8_t opcode) {
    const uint8_t code = opcode & 0x1F;
    return code >= wire::op::RDMA_READ_RESPONSE_FIRST && code <= wire::op::ATOMIC_ACKNOWLEDGE;
}

uint32_t dest_qp_of(const uint8_t* pkt, size_t len) {
    if (len < wire::LRH_BYTES) return ~0u;
    const size_t bth =
        wire::LRH_BYTES + ((pkt[1] & 3) == uint8_t(wire::lnh::iba_global) ? wire::GRH_BYTES : 0);
    if (len < bth + wire::BTH_BYTES) return ~0u;
    return wire::decode_bth(pkt + bth).dest_qp;
}

size_t build_packet(const record& r, target_info& t, const mr_info* mrs, size_t n_mrs, uint8_t* out) {
    const kind k = kind(r.ctl & ctl::KIND_MASK);
    if (k == kind::raw) {
        const size_t n = std::min(r.body_len, MAX_WIRE_BYTES);
        std::memcpy(out, r.body, n);
        return n;
    }
    if (k == kind::seal) return seal_body(r, out);

    // Build: read the headers from a zero-extended copy of the body, so short bodies decode.
    uint8_t in[wire::MAX_HEADER_BYTES] = {};
    std::memcpy(in, r.body, std::min(r.body_len, sizeof in));
    wire::headers h;
    size_t off = 0;
    h.l = wire::decode_lrh(in);
    off += wire::LRH_BYTES;
    h.has_grh = (r.ctl & ctl::GRH) != 0;
    if (h.has_grh) {
        h.g = wire::decode_grh(in + off);
        h.g.ip_ver = 6;
        h.g.next_hdr = wire::GRH_NEXT_HDR_IBA;
        off += wire::GRH_BYTES;
    }
    h.b = wire::decode_bth(in + off);
    off += wire::BTH_BYTES;
    if (!(r.ctl & ctl::KEEP_TRANSPORT)) h.b.opcode = uint8_t(wire::op::RC | (h.b.opcode & 0x1F));
    const wire::opcode_layout lay = wire::layout_of(h.b.opcode);
    if (!lay.valid) return seal_body(r, out);  // reserved opcode: the parser's bad_opcode path
    // Extension headers in wire order (IBA 9.2): RDETH, DETH, XRCETH, RETH | AtomicETH, AETH,
    // AtomicAckETH, ImmDt | IETH.
    if (lay.rdeth) {
        h.rd = wire::decode_rdeth(in + off);
        off += wire::RDETH_BYTES;
    }
    if (lay.deth) {
        h.d = wire::decode_deth(in + off);
        off += wire::DETH_BYTES;
    }
    if (lay.xrceth) {
        h.x = wire::decode_xrceth(in + off);
        off += wire::XRCETH_BYTES;
    }
    if (lay.reth) {
        h.r = wire::decode_reth(in + off);
        off += wire::RETH_BYTES;
    }
    if (lay.atomic_eth) {
        h.ae = wire::decode_atomic_eth(in + off);
        off += wire::ATOMIC_ETH_BYTES;
    }
    if (lay.aeth) {
        h.a = wire::decode_aeth(in + off);
        off += wire::AETH_BYTES;
    }
    if (lay.atomic_ack_eth) {
        h.aae = wire::decode_atomic_ack_eth(in + off);
        off += wire::ATOMIC_ACK_ETH_BYTES;
    }
    if (lay.immdt) {
        h.immdt = wire::get_be32(in + off);
        off += wire::IMMDT_BYTES;
    }
    if (lay.ieth) {
        h.ieth_rkey = wire::get_be32(in + off);
        off += wire::IETH_BYTES;
    }

    h.l.lver = 0;
    h.b.tver = 0;
    if (!(r.ctl & ctl::KEEP_ADDR)) {
        h.l.dlid = t.lid;
        h.b.dest_qp = t.qpn & PSN_MASK;
        h.b.pkey = t.pkey;
    }
    if (r.ctl & ctl::ACK_REQ) h.b.ack_req = true;
    uint32_t& expected = is_response_opcode(h.b.opcode) ? t.resp_psn : t.req_psn;
    if (!(r.ctl & ctl::KEEP_PSN)) h.b.psn = uint32_t(int64_t(expected) + r.psn_delta) & PSN_MASK;
    expected = (h.b.psn + 1) & PSN_MASK;
    if ((r.ctl & ctl::LIVE_MR) && n_mrs) {
        // Choose the MR by the body's R_Key; the offset may run up to 256 bytes past its end.
        if (lay.reth) {
            const mr_info& m = mrs[h.r.rkey % n_mrs];
            h.r.rkey = m.rkey;
            h.r.va = m.va + h.r.va % (m.len + 256);
        }
        if (lay.atomic_eth) {
            const mr_info& m = mrs[h.ae.rkey % n_mrs];
            h.ae.rkey = m.rkey;
            h.ae.va = m.va + h.ae.va % (m.len + 256);
        }
    }

    const uint8_t* src = r.body_len > off ? r.body + off : nullptr;
    const size_t avail = r.body_len > off ? r.body_len - off : 0;
    const size_t room = MAX_WIRE_BYTES - wire::MAX_HEADER_BYTES - 3 - wire::ICRC_BYTES - wire::VCRC_BYTES;
    size_t plen = lay.payload ? std::min(avail, room) : 0;
    if (k == kind::build_mtu && lay.payload) plen = std::min<size_t>(t.mtu_bytes, room);
    const size_t hdr = wire::encode_headers(h, plen, out);
    if (hdr == 0) return seal_body(r, out);  // too long for the 11-bit PktLen
    uint8_t* dst = out + hdr;
    if (k == kind::build_mtu) {
        for (size_t i = 0; i < plen; ++i) dst[i] = avail ? src[i % avail] : 0;
    } else if (plen) {
        std::memcpy(dst, src, plen);
    }
    const size_t pad = (4 - plen % 4) % 4;
    std::memset(dst + plen, 0, pad);
    return wire::seal_packet(out, hdr + plen + pad);
}

void append_record(std::vector<uint8_t>& out, uint8_t c, uint8_t sel, int8_t psn_delta, uint8_t gap,
                   const std::vector<uint8_t>& body) {
    out.push_back(c);
    out.push_back(sel);
    out.push_back(uint8_t(psn_delta));
    out.push_back(gap);
    out.push_back(uint8_t(body.size() & 0xFF));
    out.push_back(uint8_t(body.size() >> 8));
    out.insert(out.end(), body.begin(), body.end());
}

}  // namespace hcasim::fuzz
