#include "testbench/fuzz/seeds.h"

#include <cstring>

#include "testbench/fuzz/fuzz_input.h"
#include "testbench/fuzz/port_bench.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim::fuzz {

namespace {
namespace op = wire::op;

constexpr uint8_t BUILD = uint8_t(kind::build);
constexpr uint8_t BUILD_MTU = uint8_t(kind::build_mtu);
constexpr uint8_t SEAL = uint8_t(kind::seal);
constexpr uint8_t RAW = uint8_t(kind::raw);
// LIVE_MR chooses the MR by R_Key mod 5 (port_bench: rw, ro, local, recv, stale).
constexpr uint32_t MR_RW = 0, MR_RO = 1, MR_LOCAL = 2, MR_STALE = 4;

std::vector<uint8_t> bytes(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + 13 * i);
    return v;
}

/// Headers as a body for the build kinds (LRH [GRH] BTH extension headers) plus payload.
std::vector<uint8_t> body(wire::headers h, const std::vector<uint8_t>& payload = {}) {
    uint8_t buf[wire::MAX_HEADER_BYTES];
    const size_t n = wire::encode_headers(h, payload.size(), buf);
    std::vector<uint8_t> v(buf, buf + n);
    v.insert(v.end(), payload.begin(), payload.end());
    return v;
}

wire::headers hdr(uint8_t opcode) {
    wire::headers h;
    h.l.slid = 1;
    h.b.opcode = opcode;
    return h;
}
wire::headers with_reth(uint8_t opcode, uint32_t mr, uint64_t va, uint32_t len) {
    wire::headers h = hdr(opcode);
    h.r.rkey = mr;
    h.r.va = va;
    h.r.dma_len = len;
    return h;
}
wire::headers with_aeth(uint8_t opcode, uint8_t syndrome) {
    wire::headers h = hdr(opcode);
    h.a.syndrome = syndrome;
    return h;
}

/// One seed file being assembled.
class seed {
public:
    seed(const port_bench& b, std::string name) : b_(b), name_(std::move(name)) {}
    seed& add(uint8_t c, const std::string& target, int8_t psn_delta, uint8_t gap,
              const std::vector<uint8_t>& bdy) {
        append_record(bytes_, c, uint8_t(b_.target_index(target)), psn_delta, gap, bdy);
        return *this;
    }
    std::pair<std::string, std::vector<uint8_t>> done() const { return {name_, bytes_}; }

private:
    const port_bench& b_;
    std::string name_;
    std::vector<uint8_t> bytes_;
};
}  // namespace

std::vector<std::pair<std::string, std::vector<uint8_t>>> make_seeds(const port_bench& b) {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
    const uint8_t AR = ctl::ACK_REQ, MR = ctl::LIVE_MR;

    // ---- requests to the RTS QP (path MTU 256, receives posted, requests of its own in flight)
    out.push_back(seed(b, "rts-send-only")
                      .add(BUILD | AR, "rts", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(64, 1)))
                      .done());
    out.push_back(seed(b, "rts-send-first-middle-last")
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_FIRST), bytes(16, 2)))
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_MIDDLE), bytes(16, 3)))
                      .add(BUILD | AR, "rts", 0, 0, body(hdr(op::RC_SEND_LAST), bytes(40, 4)))
                      .done());
    {
        wire::headers h = hdr(op::RC_SEND_ONLY_IMM);
        h.immdt = 0x12345678;
        h.b.se = true;
        out.push_back(
            seed(b, "rts-send-only-imm").add(BUILD | AR, "rts", 0, 0, body(h, bytes(32, 5))).done());
    }
    out.push_back(seed(b, "rts-send-too-long-for-receive")
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_FIRST), bytes(8, 6)))
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_MIDDLE), bytes(8, 7)))
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_MIDDLE), bytes(8, 8)))
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_MIDDLE), bytes(8, 9)))
                      .add(BUILD | AR, "rts", 0, 0, body(hdr(op::RC_SEND_LAST), bytes(8, 10)))
                      .done());
    out.push_back(seed(b, "rts-write-only")
                      .add(BUILD | AR | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 0x100, 64), bytes(64, 11)))
                      .done());
    out.push_back(seed(b, "rts-write-first-middle-last")
                      .add(BUILD_MTU | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_FIRST, MR_RW, 0x2000, 532), bytes(4, 12)))
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_RDMA_WRITE_MIDDLE), bytes(4, 13)))
                      .add(BUILD | AR, "rts", 0, 0, body(hdr(op::RC_RDMA_WRITE_LAST), bytes(20, 14)))
                      .done());
    {
        wire::headers h = with_reth(op::RC_RDMA_WRITE_ONLY_IMM, MR_RW, 0x400, 16);
        h.immdt = 0xABCD;
        out.push_back(
            seed(b, "rts-write-only-imm").add(BUILD | AR | MR, "rts", 0, 0, body(h, bytes(16, 15))).done());
    }
    out.push_back(seed(b, "rts-write-to-read-only-mr")
                      .add(BUILD | AR | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RO, 0x10, 32), bytes(32, 16)))
                      .done());
    out.push_back(seed(b, "rts-write-to-local-only-mr")
                      .add(BUILD | AR | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_LOCAL, 0x10, 32), bytes(32, 17)))
                      .done());
    out.push_back(seed(b, "rts-write-stale-rkey")
                      .add(BUILD | AR | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_STALE, 0, 8), bytes(8, 18)))
                      .done());
    out.push_back(seed(b, "rts-write-past-mr-end")
                      .add(BUILD | AR | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 64 * 1024 - 16, 64), bytes(64, 19)))
                      .done());
    out.push_back(seed(b, "rts-write-length-mismatch")
                      .add(BUILD | AR | MR, "rts", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 0x80, 100), bytes(64, 20)))
                      .done());
    out.push_back(
        seed(b, "rts-read-request")
            .add(BUILD | AR | MR, "rts", 0, 0, body(with_reth(op::RC_RDMA_READ_REQUEST, MR_RO, 0x40, 600)))
            .done());
    {
        wire::headers fa = hdr(op::RC_FETCH_ADD);
        fa.ae.rkey = MR_RW;
        fa.ae.va = 0x800;
        fa.ae.swap_add = 5;
        wire::headers cs = hdr(op::RC_COMPARE_SWAP);
        cs.ae.rkey = MR_RW;
        cs.ae.va = 0x808;
        cs.ae.swap_add = 7;
        cs.ae.compare = 0;
        out.push_back(seed(b, "rts-atomics")
                          .add(BUILD | AR | MR, "rts", 0, 0, body(fa))
                          .add(BUILD | AR | MR, "rts", 0, 0, body(cs))
                          .done());
    }
    out.push_back(seed(b, "rts-duplicate-request")
                      .add(BUILD | AR, "rts", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(24, 21)))
                      .add(BUILD | AR, "rts", -1, 10, body(hdr(op::RC_SEND_ONLY), bytes(24, 21)))
                      .done());
    out.push_back(seed(b, "rts-psn-gap")
                      .add(BUILD | AR, "rts", 5, 0, body(hdr(op::RC_SEND_ONLY), bytes(24, 22)))
                      .add(BUILD | AR, "rts", -6, 10, body(hdr(op::RC_SEND_ONLY), bytes(24, 23)))
                      .done());
    out.push_back(seed(b, "rts-middle-without-first")
                      .add(BUILD_MTU | AR, "rts", 0, 0, body(hdr(op::RC_SEND_MIDDLE), bytes(4, 24)))
                      .done());
    out.push_back(seed(b, "rts-first-then-write-middle")
                      .add(BUILD_MTU, "rts", 0, 0, body(hdr(op::RC_SEND_FIRST), bytes(4, 25)))
                      .add(BUILD_MTU | AR, "rts", 0, 0, body(hdr(op::RC_RDMA_WRITE_MIDDLE), bytes(4, 26)))
                      .done());

    // ---- responses to the RTS QP's own requests (in flight since the restore)
    out.push_back(seed(b, "rts-ack-each")
                      .add(BUILD, "rts", 2, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .add(BUILD, "rts", 0, 10, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .add(BUILD, "rts", 0, 10, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .add(BUILD, "rts", 2, 10, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .done());
    out.push_back(seed(b, "rts-ack-beyond-sent")
                      .add(BUILD, "rts", 40, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .done());
    out.push_back(seed(b, "rts-nak-psn-sequence")
                      .add(BUILD, "rts", 0, 0,
                           body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::PSN_SEQUENCE_ERROR))))
                      .add(BUILD, "rts", -1, 100, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .done());
    out.push_back(seed(b, "rts-rnr-nak-then-ack")
                      .add(BUILD, "rts", 1, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_rnr_nak(1))))
                      .add(BUILD, "rts", 4, 201, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .done());
    out.push_back(
        seed(b, "rts-nak-errors")
            .add(BUILD, "rts", 3, 0,
                 body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::REMOTE_ACCESS_ERROR))))
            .add(BUILD, "rts_psnwrap", 0, 0,
                 body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::INVALID_REQUEST))))
            .add(BUILD, "sqd", 0, 0,
                 body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::REMOTE_OPERATIONAL_ERROR))))
            .done());
    out.push_back(
        seed(b, "rts-read-responses")
            .add(BUILD, "rts", 4, 0,
                 body(with_aeth(op::RC_RDMA_READ_RESPONSE_FIRST, wire::aeth_ack(31)), bytes(256, 27)))
            .add(BUILD, "rts", 0, 0, body(hdr(op::RC_RDMA_READ_RESPONSE_LAST), bytes(44, 28)))
            .add(BUILD, "rts", -2, 10,
                 body(with_aeth(op::RC_RDMA_READ_RESPONSE_ONLY, wire::aeth_ack(31)), bytes(16, 29)))
            .done());
    {
        wire::headers h = with_aeth(op::RC_ATOMIC_ACKNOWLEDGE, wire::aeth_ack(31));
        h.aae.orig_data = 0x1122334455667788ull;
        out.push_back(seed(b, "rts-atomic-ack").add(BUILD, "rts", 6, 0, body(h)).done());
    }

    // ---- responses while the busy QP is still sending (a 128-packet WRITE, then a 16-packet SEND)
    out.push_back(
        seed(b, "busy-ack-and-nak-while-sending")
            .add(BUILD, "rts_busy", 20, 160, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .add(BUILD, "rts_busy", 0, 5,
                 body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::PSN_SEQUENCE_ERROR))))
            .add(BUILD, "rts_busy", 120, 199, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .done());
    out.push_back(
        seed(b, "busy-nak-mid-write-after-sent")
            .add(BUILD, "rts_busy", 20, 200, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .add(BUILD, "rts_busy", 19, 1,
                 body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::PSN_SEQUENCE_ERROR))))
            .add(BUILD, "rts_busy", 127, 200, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .done());
    out.push_back(
        seed(b, "busy-rnr-nak-mid-write-after-sent")
            .add(BUILD, "rts_busy", 60, 200, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_rnr_nak(1))))
            .add(BUILD, "rts_busy", 3, 10, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_rnr_nak(1))))
            .add(BUILD, "rts_busy", 127, 201, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .add(BUILD, "rts_busy", 15, 20, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .done());
    out.push_back(
        seed(b, "busy-requests-while-sending")
            .add(BUILD | AR, "rts_busy", 0, 1, body(hdr(op::RC_SEND_ONLY), bytes(100, 56)))
            .add(BUILD | AR | MR, "rts_busy", 0, 1,
                 body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 0x5000, 200), bytes(200, 57)))
            .add(BUILD, "rts_busy", 30, 180,
                 body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_nak(wire::nak::REMOTE_ACCESS_ERROR))))
            .done());

    // ---- the timed QP: its requests time out (131 us, 3 retries) unless answered
    out.push_back(
        seed(b, "timed-ack-after-one-timeout")
            .add(BUILD, "rts_timed", 2, 201, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .add(BUILD, "rts_timed", 4, 10, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .done());
    out.push_back(
        seed(b, "timed-rnr-naks-exhausted")
            .add(BUILD, "rts_timed", 0, 1, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_rnr_nak(1))))
            .add(BUILD, "rts_timed", -1, 200, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_rnr_nak(1))))
            .add(BUILD, "rts_timed", -1, 200, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_rnr_nak(1))))
            .done());
    out.push_back(seed(b, "timed-no-answer")
                      .add(BUILD | AR, "rts_timed", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(8, 58)))
                      .done());

    // ---- the other states
    out.push_back(seed(b, "states-send-only")
                      .add(BUILD | AR, "reset", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 30)))
                      .add(BUILD | AR, "init", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 31)))
                      .add(BUILD | AR, "rtr", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 32)))
                      .add(BUILD | AR, "sqd", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 33)))
                      .add(BUILD | AR, "err", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 34)))
                      .done());
    out.push_back(seed(b, "states-ack")
                      .add(BUILD, "reset", 0, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .add(BUILD, "rtr", 0, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .add(BUILD, "sqd", 4, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .add(BUILD, "err", 0, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
                      .done());
    out.push_back(seed(b, "rtr-write-then-send")
                      .add(BUILD | AR | MR, "rtr", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 0x3000, 48), bytes(48, 35)))
                      .add(BUILD | AR, "rtr", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(48, 36)))
                      .done());
    out.push_back(seed(b, "mtu4096-send-first-last")
                      .add(BUILD_MTU, "rts_mtu4096", 0, 0, body(hdr(op::RC_SEND_FIRST), bytes(64, 37)))
                      .add(BUILD | AR, "rts_mtu4096", 0, 0, body(hdr(op::RC_SEND_LAST), bytes(100, 38)))
                      .done());
    out.push_back(seed(b, "mtu4096-write-only-4k")
                      .add(BUILD_MTU | AR | MR, "rts_mtu4096", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 0x4000, 4096), bytes(64, 39)))
                      .done());
    out.push_back(seed(b, "norecv-send-rnr")
                      .add(BUILD | AR, "rts_norecv", 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 40)))
                      .add(BUILD | AR, "rts_norecv", 1, 0, body(hdr(op::RC_SEND_ONLY), bytes(16, 41)))
                      .add(BUILD | AR, "rts_norecv", -1, 50, body(hdr(op::RC_SEND_ONLY), bytes(16, 42)))
                      .done());
    out.push_back(seed(b, "noaccess-write-read")
                      .add(BUILD | AR | MR, "rts_noaccess", 0, 0,
                           body(with_reth(op::RC_RDMA_WRITE_ONLY, MR_RW, 0, 16), bytes(16, 43)))
                      .add(BUILD | AR | MR, "rts_noaccess", 0, 0,
                           body(with_reth(op::RC_RDMA_READ_REQUEST, MR_RW, 0, 16)))
                      .done());
    out.push_back(
        seed(b, "psnwrap-send-across-wrap")
            .add(BUILD_MTU, "rts_psnwrap", 0, 0, body(hdr(op::RC_SEND_FIRST), bytes(4, 44)))
            .add(BUILD_MTU, "rts_psnwrap", 0, 0, body(hdr(op::RC_SEND_MIDDLE), bytes(4, 45)))
            .add(BUILD | AR, "rts_psnwrap", 0, 0, body(hdr(op::RC_SEND_LAST), bytes(4, 46)))
            .add(BUILD, "rts_psnwrap", 2, 0, body(with_aeth(op::RC_ACKNOWLEDGE, wire::aeth_ack(31))))
            .done());
    {
        seed s(b, "invalid-qpns");
        for (const char* t : {"qpn0", "destroyed", "unused", "beyond", "qpn_max"})
            s.add(BUILD | AR, t, 0, 0, body(hdr(op::RC_SEND_ONLY), bytes(8, 47)));
        out.push_back(s.done());
    }

    // ---- P_Key, transport, GRH
    {
        wire::headers h = hdr(op::RC_SEND_ONLY);
        h.l.dlid = b.target_lid();
        h.b.dest_qp = b.target_qpn(b.target_index("rts"));
        h.b.pkey = 0x7FFF;
        wire::headers limited = h;
        limited.b.dest_qp = b.target_qpn(b.target_index("rts_pkey"));
        limited.b.pkey = uint16_t(b.target_pkey(b.target_index("rts_pkey")) & 0x7FFF);
        out.push_back(seed(b, "pkey-mismatch")
                          .add(BUILD | AR | ctl::KEEP_ADDR, "rts", 0, 0, body(h, bytes(8, 48)))
                          .add(BUILD | AR | ctl::KEEP_ADDR, "rts_pkey", 0, 0, body(limited, bytes(8, 49)))
                          .add(BUILD | AR, "rts_pkey", -1, 0, body(hdr(op::RC_SEND_ONLY), bytes(8, 50)))
                          .done());
    }
    {
        wire::headers ud = hdr(op::UD_SEND_ONLY);
        ud.d.qkey = 0x11111111;
        ud.d.src_qp = 5;
        wire::headers uc = hdr(op::UC_SEND_ONLY);
        out.push_back(seed(b, "other-transports-to-rc")
                          .add(BUILD | AR | ctl::KEEP_TRANSPORT, "rts", 0, 0, body(ud, bytes(8, 51)))
                          .add(BUILD | AR | ctl::KEEP_TRANSPORT, "rts", 0, 0, body(uc, bytes(8, 52)))
                          .done());
    }
    {
        wire::headers h = hdr(op::RC_SEND_ONLY);
        h.has_grh = true;
        h.g.hop_limit = 64;
        h.g.dgid[15] = 2;
        out.push_back(
            seed(b, "grh-send-only").add(BUILD | AR | ctl::GRH, "rts", 0, 0, body(h, bytes(32, 53))).done());
    }
    {
        // DLID check: LID 0 (reserved), a LID no port has, the peer's (node0's), the last unicast
        // LID: the port drops each (rx_bad_dlid). Then a SEND to the target's LID with the PSN
        // the dropped ones would have had (each built packet advances the expected PSN).
        seed s(b, "dlid-not-ours");
        const size_t rts = b.target_index("rts");
        for (uint16_t dlid : {uint16_t(0), uint16_t(3), uint16_t(1), uint16_t(0xBFFF)}) {
            wire::headers h = hdr(op::RC_SEND_ONLY);
            h.l.dlid = dlid;
            h.b.dest_qp = b.target_qpn(rts);
            h.b.pkey = b.target_pkey(rts);
            s.add(BUILD | AR | ctl::KEEP_ADDR, "rts", 0, 0, body(h, bytes(8, 59)));
        }
        s.add(BUILD | AR, "rts", -4, 0, body(hdr(op::RC_SEND_ONLY), bytes(8, 60)));
        out.push_back(s.done());
    }
    {
        wire::headers h = hdr(0x1F);  // reserved RC operation: built as is, the parser's bad_opcode
        out.push_back(seed(b, "reserved-opcode").add(BUILD | AR, "rts", 0, 0, body(h, bytes(8, 54))).done());
    }

    // ---- CRC and length paths (raw and seal kinds): a valid packet, then broken copies
    {
        wire::headers h = hdr(op::RC_SEND_ONLY);
        h.l.dlid = b.target_lid();
        h.b.dest_qp = b.target_qpn(b.target_index("rts"));
        h.b.psn = port_bench::plans()[b.target_index("rts")].rq_psn;
        h.b.ack_req = true;
        const std::vector<uint8_t> pay = bytes(16, 55);
        uint8_t pkt[wire::MAX_HEADER_BYTES + 64];
        const size_t n = wire::encode_headers(h, pay.size(), pkt);
        std::memcpy(pkt + n, pay.data(), pay.size());
        const size_t len = wire::seal_packet(pkt, n + pay.size());
        std::vector<uint8_t> good(pkt, pkt + len), bad_icrc = good, bad_vcrc = good, bad_len = good;
        bad_icrc[len - 6] ^= 0x01;
        bad_icrc.resize(len - 2);
        {
            const uint16_t v = wire::vcrc(bad_icrc.data(), bad_icrc.size());
            bad_icrc.push_back(uint8_t(v & 0xFF));
            bad_icrc.push_back(uint8_t(v >> 8));
        }
        bad_vcrc[len - 1] ^= 0x80;
        std::vector<uint8_t> sealed_bad_len(good.begin(), good.end() - 6);
        sealed_bad_len[5] = uint8_t(sealed_bad_len[5] + 1);  // PktLen (LRH bytes 4-5) one word too long
        out.push_back(seed(b, "raw-good-bad-icrc-bad-vcrc")
                          .add(RAW, "rts", 0, 0, good)
                          .add(RAW, "rts", 0, 0, bad_icrc)
                          .add(RAW, "rts", 0, 0, bad_vcrc)
                          .done());
        out.push_back(seed(b, "seal-bad-pktlen-short-oversize")
                          .add(SEAL, "rts", 0, 0, sealed_bad_len)
                          .add(SEAL, "rts", 0, 0, std::vector<uint8_t>(good.begin(), good.begin() + 10))
                          .add(RAW, "rts", 0, 0, std::vector<uint8_t>(4300, 0x5A))
                          .add(RAW, "rts", 0, 0, {})
                          .done());
    }
    {
        seed s(b, "burst-64-sends");
        for (int i = 0; i < 64; ++i)
            s.add(BUILD | (i % 8 == 7 ? AR : 0), "rtr", 0, 0,
                  body(hdr(op::RC_SEND_ONLY), bytes(4, uint8_t(i))));
        out.push_back(s.done());
    }
    return out;
}

}  // namespace hcasim::fuzz
