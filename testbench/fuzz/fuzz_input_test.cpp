// The port fuzzer's input decoding and packet building (fuzz_input.h): records, gaps, the
// build kinds' retargeting, PSN counters, lengths and CRCs, and the raw and seal kinds.
#include <gtest/gtest.h>

#include <vector>

#include "testbench/fuzz/fuzz_input.h"
#include "tlm_if/wire/ib_headers.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::fuzz;

namespace {

std::vector<uint8_t> headers_body(wire::headers h, size_t payload) {
    uint8_t buf[wire::MAX_HEADER_BYTES];
    const size_t n = wire::encode_headers(h, payload, buf);
    std::vector<uint8_t> v(buf, buf + n);
    for (size_t i = 0; i < payload; ++i) v.push_back(uint8_t(i));
    return v;
}

record one(const std::vector<uint8_t>& input) {
    record r[2];
    EXPECT_EQ(split_records(input.data(), input.size(), r, 2), 1u);
    return r[0];
}

target_info rts_target() {
    target_info t;
    t.qpn = 7;
    t.lid = 2;
    t.pkey = 0x8123;
    t.mtu_bytes = 256;
    t.req_psn = 0x230;
    t.resp_psn = 0x130;
    return t;
}

}  // namespace

TEST(FuzzInput, records_split_with_bodies_clamped_and_cut_headers_ignored) {
    std::vector<uint8_t> in;
    append_record(in, 0x42, 3, -2, 9, {1, 2, 3});
    in.insert(in.end(), {0x01, 0x05, 0x00, 0x00, 0x10, 0x00, 0xAA});  // announces 16, has 1
    record r[4];
    ASSERT_EQ(split_records(in.data(), in.size(), r, 4), 2u);
    EXPECT_EQ(r[0].ctl, 0x42);
    EXPECT_EQ(r[0].sel, 3);
    EXPECT_EQ(r[0].psn_delta, -2);
    EXPECT_EQ(r[0].gap, 9);
    EXPECT_EQ(r[0].body_len, 3u);
    EXPECT_EQ(r[1].body_len, 1u);
    EXPECT_EQ(r[1].body[0], 0xAA);
    const uint8_t cut[5] = {2, 0, 0, 0, 1};
    EXPECT_EQ(split_records(cut, sizeof cut, r, 4), 0u);
    EXPECT_EQ(split_records(in.data(), in.size(), r, 1), 1u);
}

TEST(FuzzInput, gaps_are_8ns_steps_then_100us_steps) {
    EXPECT_EQ(gap_ps(0), 0u);
    EXPECT_EQ(gap_ps(1), 8'000u);
    EXPECT_EQ(gap_ps(199), 1'592'000u);
    EXPECT_EQ(gap_ps(200), 100'000'000u);
    EXPECT_EQ(gap_ps(255), 5'600'000'000u);
}

TEST(FuzzInput, build_retargets_and_seals_a_packet_the_port_accepts) {
    wire::headers h;
    h.l.lver = 3;
    h.l.dlid = 0x7777;
    h.b.opcode = wire::op::UD_SEND_ONLY;  // transport forced to RC: RC SEND ONLY
    h.b.dest_qp = 0x123456;
    h.b.pkey = 0x1111;
    h.b.tver = 5;
    std::vector<uint8_t> in;
    append_record(in, uint8_t(kind::build) | ctl::ACK_REQ, 0, 1, 0, headers_body(h, 10));
    target_info t = rts_target();
    uint8_t out[MAX_WIRE_BYTES];
    const size_t len = build_packet(one(in), t, nullptr, 0, out);
    wire::headers got;
    size_t off = 0, plen = 0;
    ASSERT_EQ(wire::parse_packet(out, len, got, off, plen), wire::parse_status::ok);
    EXPECT_EQ(got.b.opcode, wire::op::RC_SEND_ONLY);
    EXPECT_EQ(got.l.dlid, 2);
    EXPECT_EQ(got.b.dest_qp, 7u);
    EXPECT_EQ(got.b.pkey, 0x8123);
    EXPECT_EQ(got.b.psn, 0x231u);
    EXPECT_TRUE(got.b.ack_req);
    // The UD layout's DETH bytes were read as payload of the RC opcode: 8 + 10 bytes.
    EXPECT_EQ(plen, 18u);
    EXPECT_EQ(t.req_psn, 0x232u);
    EXPECT_EQ(t.resp_psn, 0x130u);
    EXPECT_EQ(dest_qp_of(out, len), 7u);
}

TEST(FuzzInput, responses_count_from_the_response_psn_and_keep_flags_keep_fields) {
    wire::headers h;
    h.b.opcode = wire::op::RC_ACKNOWLEDGE;
    h.b.dest_qp = 99;
    h.b.pkey = 0x7FFF;
    h.b.psn = 0x10;
    h.l.dlid = 5;
    h.a.syndrome = wire::aeth_nak(wire::nak::PSN_SEQUENCE_ERROR);
    std::vector<uint8_t> in;
    append_record(in, uint8_t(kind::build), 0, 2, 0, headers_body(h, 0));
    target_info t = rts_target();
    uint8_t out[MAX_WIRE_BYTES];
    wire::headers got;
    size_t off = 0, plen = 0;
    ASSERT_EQ(wire::parse_packet(out, build_packet(one(in), t, nullptr, 0, out), got, off, plen),
              wire::parse_status::ok);
    EXPECT_EQ(got.b.psn, 0x132u);
    EXPECT_EQ(got.a.syndrome, h.a.syndrome);
    EXPECT_EQ(t.resp_psn, 0x133u);

    in.clear();
    append_record(in, uint8_t(kind::build) | ctl::KEEP_ADDR | ctl::KEEP_PSN, 0, 2, 0, headers_body(h, 0));
    ASSERT_EQ(wire::parse_packet(out, build_packet(one(in), t, nullptr, 0, out), got, off, plen),
              wire::parse_status::ok);
    EXPECT_EQ(got.b.dest_qp, 99u);
    EXPECT_EQ(got.b.pkey, 0x7FFF);
    EXPECT_EQ(got.l.dlid, 5);
    EXPECT_EQ(got.b.psn, 0x10u);
    EXPECT_EQ(t.resp_psn, 0x11u);
}

TEST(FuzzInput, build_mtu_stretches_the_payload_and_live_mr_points_into_an_mr) {
    wire::headers h;
    h.b.opcode = wire::op::RC_RDMA_WRITE_FIRST;
    h.r.rkey = 6;  // 6 mod 2 = MR 0
    h.r.va = 0x1010;
    h.r.dma_len = 600;
    std::vector<uint8_t> in;
    append_record(in, uint8_t(kind::build_mtu) | ctl::LIVE_MR, 0, 0, 0, headers_body(h, 3));
    const mr_info mrs[2] = {{0x7f0000001000ull, 0x1000, 0xAB01}, {0x7f0000100000ull, 0x2000, 0xCD02}};
    target_info t = rts_target();
    uint8_t out[MAX_WIRE_BYTES];
    wire::headers got;
    size_t off = 0, plen = 0;
    ASSERT_EQ(wire::parse_packet(out, build_packet(one(in), t, mrs, 2, out), got, off, plen),
              wire::parse_status::ok);
    EXPECT_EQ(plen, 256u);
    EXPECT_EQ(out[off + 3], 0);  // the 3 payload bytes 0, 1, 2 repeated
    EXPECT_EQ(out[off + 5], 2);
    EXPECT_EQ(got.r.rkey, 0xAB01u);
    EXPECT_EQ(got.r.va, 0x7f0000001000ull + 0x1010 % (0x1000 + 256));
    EXPECT_EQ(got.r.dma_len, 600u);
}

TEST(FuzzInput, grh_packets_build_with_a_consistent_payload_length) {
    wire::headers h;
    h.has_grh = true;
    h.b.opcode = wire::op::RC_SEND_ONLY;
    std::vector<uint8_t> in;
    append_record(in, uint8_t(kind::build) | ctl::GRH, 0, 0, 0, headers_body(h, 5));
    target_info t = rts_target();
    uint8_t out[MAX_WIRE_BYTES];
    wire::headers got;
    size_t off = 0, plen = 0;
    ASSERT_EQ(wire::parse_packet(out, build_packet(one(in), t, nullptr, 0, out), got, off, plen),
              wire::parse_status::ok);
    EXPECT_TRUE(got.has_grh);
    EXPECT_EQ(plen, 5u);
}

TEST(FuzzInput, raw_is_sent_as_is_seal_appends_crcs_and_reserved_opcodes_are_sealed) {
    std::vector<uint8_t> body(300, 0x5A);
    std::vector<uint8_t> in;
    append_record(in, uint8_t(kind::raw), 0, 0, 0, body);
    target_info t = rts_target();
    uint8_t out[MAX_WIRE_BYTES];
    EXPECT_EQ(build_packet(one(in), t, nullptr, 0, out), 300u);
    EXPECT_EQ(out[299], 0x5A);

    in.clear();
    append_record(in, uint8_t(kind::seal), 0, 0, 0, body);
    const size_t len = build_packet(one(in), t, nullptr, 0, out);
    ASSERT_EQ(len, 306u);
    const uint16_t vcrc = wire::vcrc(out, 304);  // stored least-significant byte first
    EXPECT_EQ(out[304], vcrc & 0xFF);
    EXPECT_EQ(out[305], vcrc >> 8);

    wire::headers h;
    h.b.opcode = 0x1F;
    std::vector<uint8_t> hb(20, 0);
    wire::encode(h.l, hb.data());
    wire::encode(h.b, hb.data() + 8);
    in.clear();
    append_record(in, uint8_t(kind::build), 0, 0, 0, hb);
    wire::headers got;
    size_t off = 0, plen = 0;
    EXPECT_EQ(wire::parse_packet(out, build_packet(one(in), t, nullptr, 0, out), got, off, plen),
              wire::parse_status::bad_pkt_len);  // LRH PktLen 0 in the body: sealed unchanged
    EXPECT_EQ(t.req_psn, 0x230u);
}
