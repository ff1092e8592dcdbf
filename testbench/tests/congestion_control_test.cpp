// Congestion control (IBA Annex A10) without a simulation: the switch's FECN marking
// (model/fabric/cc_marking.h), the CA's CCTI and injection delay
// (model/hca/congestion_control.h), the fabric.cc.* configuration (model/core/cc_config.h)
// and the CNP codec (tlm_if/wire/ib_headers.h). Every number is exact.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "model/core/cc_config.h"
#include "model/core/param.h"
#include "model/fabric/cc_marking.h"
#include "model/hca/congestion_control.h"
#include "tlm_if/wire/ib_headers.h"

using namespace hcasim;

namespace {

// The message of the config_error `f` throws ("" if it throws none).
std::string error_of(const std::function<void()>& f) {
    try {
        f();
    } catch (const config_error& e) {
        return e.what();
    }
    return "";
}

// A CA with CC on, one table and the same entry on every SL.
ca_cc_settings ca(uint16_t timer, uint8_t increase, uint8_t min, uint16_t limit, std::vector<cct_entry> cct) {
    ca_cc_settings s;
    s.enable = true;
    ca_cong_entry e;
    e.ccti_timer = timer;
    e.ccti_increase = increase;
    e.ccti_min = min;
    s.entry.fill(e);
    s.ccti_limit = limit;
    s.cct = std::move(cct);
    return s;
}

constexpr uint64_t PERIOD_2 = 2 * CCTI_TIMER_UNIT_PS;  // CCTI_Timer 2 = 2.048 us

cc_switch_settings marking(uint8_t threshold, uint16_t rate, uint8_t packet_size) {
    cc_switch_settings s;
    s.enable = true;
    s.threshold = threshold;
    s.marking_rate = rate;
    s.packet_size = packet_size;
    return s;
}

const cc_output_vl CONGESTED_ROOT{40000, 65536, false};  // 40000 * 16 > 65536 * (16 - 8)
const cc_output_vl CONGESTED_VICTIM{40000, 65536, true};

}  // namespace

// ------------------------------------------------------------------ CA side: CCTI

TEST(CongestionControl, ccti_after_n_becns_rises_by_ccti_increase_capped_at_ccti_limit) {
    ca_congestion_control cc(ca(0, 3, 0, 10, default_cct()));
    std::vector<uint16_t> seen;
    for (int n = 0; n < 5; ++n) {
        cc.on_becn(7, 0, uint64_t(n) * 1000);
        seen.push_back(cc.ccti_at(7, 0, uint64_t(n) * 1000));
    }
    EXPECT_EQ(seen, (std::vector<uint16_t>{3, 6, 9, 10, 10}));
    EXPECT_EQ(cc.becn_received(), 5u);
    const auto flows = cc.flows(10'000);
    ASSERT_EQ(flows.size(), 1u);
    EXPECT_EQ(flows[0].flow, 7u);
    EXPECT_EQ(flows[0].ccti, 10);
    EXPECT_EQ(flows[0].max_ccti, 10);
    EXPECT_EQ(flows[0].becns, 5u);
}

TEST(CongestionControl, ccti_decays_by_one_at_each_exact_timer_boundary_down_to_ccti_min) {
    ca_congestion_control cc(ca(2, 4, 1, 20, default_cct()));
    EXPECT_EQ(cc.ccti_at(9, 0, 0), 1);  // a flow starts at CCTI_Min
    const uint64_t t0 = 1'000'000;
    cc.on_becn(9, 0, t0);  // 1 + 4 = 5; the timer starts now
    std::vector<uint16_t> before, at;
    for (uint64_t k = 1; k <= 5; ++k) {
        before.push_back(cc.ccti_at(9, 0, t0 + k * PERIOD_2 - 1));
        at.push_back(cc.ccti_at(9, 0, t0 + k * PERIOD_2));
    }
    EXPECT_EQ(before, (std::vector<uint16_t>{5, 4, 3, 2, 1}));
    EXPECT_EQ(at, (std::vector<uint16_t>{4, 3, 2, 1, 1}));
    EXPECT_EQ(cc.ccti_at(9, 0, t0 + 1000 * PERIOD_2), 1);  // never below CCTI_Min

    // The timer stopped at the floor: the next BECN starts it afresh at its own time.
    const uint64_t t1 = t0 + 1000 * PERIOD_2 + 12345;
    cc.on_becn(9, 0, t1);
    EXPECT_EQ(cc.ccti_at(9, 0, t1 + PERIOD_2 - 1), 5);
    EXPECT_EQ(cc.ccti_at(9, 0, t1 + PERIOD_2), 4);
}

TEST(CongestionControl, ccti_asked_once_after_many_timer_periods_equals_stepping_through_them) {
    ca_congestion_control stepped(ca(2, 10, 0, 20, default_cct()));
    ca_congestion_control jumped(ca(2, 10, 0, 20, default_cct()));
    stepped.on_becn(1, 0, 0);
    jumped.on_becn(1, 0, 0);
    for (uint64_t t = 0; t <= 7 * PERIOD_2; t += PERIOD_2 / 4) stepped.ccti_at(1, 0, t);
    EXPECT_EQ(stepped.ccti_at(1, 0, 7 * PERIOD_2), 3);
    EXPECT_EQ(jumped.ccti_at(1, 0, 7 * PERIOD_2), 3);
}

TEST(CongestionControl, becn_while_the_timer_runs_keeps_its_phase) {
    ca_congestion_control cc(ca(2, 4, 0, 20, default_cct()));
    cc.on_becn(3, 0, 0);          // 4, expiries at 2.048, 4.096, ... us
    cc.on_becn(3, 0, 1'000'000);  // 8, the timer keeps running from 0
    EXPECT_EQ(cc.ccti_at(3, 0, PERIOD_2 - 1), 8);
    EXPECT_EQ(cc.ccti_at(3, 0, PERIOD_2), 7);
    EXPECT_EQ(cc.ccti_at(3, 0, 2 * PERIOD_2), 6);
    cc.on_becn(3, 0, 3 * PERIOD_2);  // at an expiry: the expiry first (5), then the BECN (9)
    EXPECT_EQ(cc.ccti_at(3, 0, 3 * PERIOD_2), 9);
    EXPECT_EQ(cc.ccti_at(3, 0, 4 * PERIOD_2), 8);
}

TEST(CongestionControl, ccti_timer_zero_never_lowers_the_ccti) {
    ca_congestion_control cc(ca(0, 2, 0, 20, default_cct()));
    cc.on_becn(3, 0, 0);
    EXPECT_EQ(cc.ccti_at(3, 0, 1'000'000 * PERIOD_2), 2);
}

TEST(CongestionControl, a_qp_moved_to_an_sl_with_the_timer_off_keeps_its_ccti) {
    ca_cc_settings s = ca(2, 4, 0, 20, default_cct());
    s.entry[3].ccti_timer = 0;
    ca_congestion_control cc(s);
    cc.on_becn(0x20, 1, 0);  // timer running on SL 1's period
    EXPECT_EQ(cc.ccti_at(0x20, 3, 10 * PERIOD_2), 4);
    EXPECT_EQ(cc.ccti_at(0x20, 1, 10 * PERIOD_2), 0);
}

TEST(CongestionControl, qp_based_flows_are_qps_and_sl_based_flows_are_sls_with_their_sls_entry) {
    ca_cc_settings s = ca(0, 1, 0, 20, default_cct());
    s.entry[2].ccti_increase = 5;
    ca_congestion_control per_qp(s);
    per_qp.on_becn(0x11, 1, 0);
    per_qp.on_becn(0x12, 2, 0);
    EXPECT_EQ(per_qp.ccti_at(0x11, 1, 0), 1);
    EXPECT_EQ(per_qp.ccti_at(0x12, 2, 0), 5);
    EXPECT_EQ(per_qp.ccti_at(0x13, 2, 0), 0);  // another QP on SL 2: its own flow

    s.sl_based = true;
    ca_congestion_control per_sl(s);
    per_sl.on_becn(0x11, 2, 0);
    per_sl.on_becn(0x12, 2, 0);
    EXPECT_EQ(per_sl.ccti_at(0x13, 2, 0), 10);  // every QP on SL 2 shares the SL's CCTI
    EXPECT_EQ(per_sl.ccti_at(0x11, 1, 0), 0);
    const auto flows = per_sl.flows(0);
    ASSERT_EQ(flows.size(), 2u);
    EXPECT_EQ(flows[0].flow, 1u);
    EXPECT_EQ(flows[1].flow, 2u);
    EXPECT_EQ(flows[1].becns, 2u);
}

TEST(CongestionControl, trigger_threshold_counts_becns_that_leave_the_ccti_at_or_above_it) {
    ca_cc_settings s = ca(0, 2, 0, 20, default_cct());
    for (ca_cong_entry& e : s.entry) e.trigger_threshold = 5;
    ca_congestion_control cc(s);
    for (int n = 0; n < 4; ++n) cc.on_becn(1, 0, 0);  // 2, 4, 6, 8
    EXPECT_EQ(cc.trigger_events(), 2u);

    s.entry.fill(ca_cong_entry{0, 2, 0, 0});  // Trigger_Threshold 0: no events
    ca_congestion_control off(s);
    for (int n = 0; n < 4; ++n) off.on_becn(1, 0, 0);
    EXPECT_EQ(off.trigger_events(), 0u);
}

// ------------------------------------------------------------------ CA side: delay

TEST(CongestionControl, injection_delay_is_t_pkt_shifted_times_multiplier_of_the_entry_at_the_ccti) {
    ca_congestion_control cc(ca(0, 1, 0, 3, parse_cct("fabric.cc.cct", "0:0, 3:1, 1:5, 0:16383")));
    const uint64_t t_pkt = 1'000'003;
    std::vector<uint64_t> delays{cc.injection_delay_ps(5, 0, 0, t_pkt)};
    for (int n = 0; n < 4; ++n) {
        cc.on_becn(5, 0, 0);
        delays.push_back(cc.injection_delay_ps(5, 0, 0, t_pkt));
    }
    // (1000003 >> 3) * 1, (1000003 >> 1) * 5, 1000003 * 16383, then capped at CCTI_Limit 3.
    EXPECT_EQ(delays, (std::vector<uint64_t>{0, 125'000, 2'500'005, 16'383'049'149ull, 16'383'049'149ull}));
}

TEST(CongestionControl, default_table_adds_an_eighth_of_the_packet_time_per_index) {
    const std::vector<cct_entry> t = default_cct();
    ASSERT_EQ(t.size(), 128u);
    EXPECT_EQ(cct_delay_ps(t[0], 2'048'000), 0u);
    EXPECT_EQ(cct_delay_ps(t[1], 2'048'000), 256'000u);
    EXPECT_EQ(cct_delay_ps(t[8], 2'048'000), 2'048'000u);
    EXPECT_EQ(cct_delay_ps(t[127], 2'048'000), 32'512'000u);
    EXPECT_EQ(t[127].raw(), 0xC07F);
    EXPECT_EQ(cct_entry::from_raw(0xC07F), (cct_entry{3, 127}));
    cc_config c;
    EXPECT_EQ(format_cct(c.cct).substr(0, 15), "3:0,3:1,3:2,3:3");
    EXPECT_EQ(parse_cct("k", format_cct(c.cct)), c.cct);
}

TEST(CongestionControl, with_cc_off_becns_are_ignored_and_no_delay_is_added) {
    ca_cc_settings s = ca(2, 4, 0, 20, default_cct());
    s.enable = false;
    ca_congestion_control cc(s);
    cc.on_becn(1, 0, 0);
    EXPECT_EQ(cc.becn_received(), 0u);
    EXPECT_EQ(cc.ccti_at(1, 0, 0), 0);
    EXPECT_EQ(cc.injection_delay_ps(1, 0, 0, 1'000'000), 0u);
}

// ------------------------------------------------------------------ switch side: FECN

TEST(CongestionControl, marks_every_marking_rate_plus_first_eligible_packet) {
    cc_marker m;
    const cc_switch_settings s = marking(8, 2, 0);
    const cc_output_vl calm{1000, 65536, false};
    std::string pattern;
    for (int i = 0; i < 9; ++i) {
        pattern += m.decide(s, 1, CONGESTED_ROOT, 2048) ? 'M' : '.';
        EXPECT_FALSE(m.decide(s, 1, calm, 2048));  // not eligible: does not count towards the rate
    }
    EXPECT_EQ(pattern, "M..M..M..");
    EXPECT_EQ(m.eligible(), 9u);
    EXPECT_EQ(m.marked(), 3u);

    cc_marker every;
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(every.decide(marking(8, 0, 0), 1, CONGESTED_ROOT, 2048));
}

TEST(CongestionControl, threshold_sets_the_queue_level_above_which_a_vl_is_congested) {
    // queued * 16 > buffer * (16 - Threshold), buffer 64 KiB.
    EXPECT_FALSE(cc_congested(8, 32768, 65536));
    EXPECT_TRUE(cc_congested(8, 32769, 65536));
    EXPECT_FALSE(cc_congested(15, 4096, 65536));
    EXPECT_TRUE(cc_congested(15, 4097, 65536));
    EXPECT_FALSE(cc_congested(1, 61440, 65536));
    EXPECT_TRUE(cc_congested(1, 61441, 65536));
}

TEST(CongestionControl, threshold_0_never_marks) {
    EXPECT_FALSE(cc_congested(0, 65536, 65536));
    cc_marker m;
    const cc_output_vl full{1 << 20, 65536, false};
    for (int i = 0; i < 10; ++i) EXPECT_FALSE(m.decide(marking(0, 0, 0), 1, full, 4096));
    EXPECT_EQ(m.eligible(), 0u);
}

TEST(CongestionControl, packets_below_packet_size_are_never_marked) {
    cc_marker m;
    const cc_switch_settings s = marking(8, 0, 4);  // 4 credits = 256 bytes
    for (int i = 0; i < 5; ++i) EXPECT_FALSE(m.decide(s, 1, CONGESTED_ROOT, 255));
    EXPECT_TRUE(m.decide(s, 1, CONGESTED_ROOT, 256));
    EXPECT_EQ(m.eligible(), 1u);
}

TEST(CongestionControl, victim_ports_mark_only_with_their_victim_mask_bit) {
    cc_switch_settings s = marking(8, 0, 0);
    s.victim_mask = parse_port_mask("fabric.cc.victim_mask", "3");
    cc_marker p3, p5, p5_root;
    EXPECT_TRUE(p3.decide(s, 3, CONGESTED_VICTIM, 2048));
    EXPECT_FALSE(p5.decide(s, 5, CONGESTED_VICTIM, 2048));
    EXPECT_EQ(p5.eligible(), 0u);
    EXPECT_TRUE(p5_root.decide(s, 5, CONGESTED_ROOT, 2048));  // a root of congestion always marks
}

TEST(CongestionControl, cc_off_never_marks) {
    cc_switch_settings s = marking(15, 0, 0);
    s.enable = false;
    cc_marker m;
    EXPECT_FALSE(m.decide(s, 1, CONGESTED_ROOT, 4096));
}

TEST(CongestionControl, a_switch_keeps_a_marking_count_per_output_port_and_vl) {
    cc_switch_marking sw(marking(8, 1, 0), 4, 2);
    for (int i = 0; i < 4; ++i) sw.decide(2, 1, CONGESTED_ROOT, 2048);  // marks 1st and 3rd
    sw.decide(2, 0, CONGESTED_ROOT, 2048);                              // its own count: marked
    EXPECT_EQ(sw.marker(2, 1).marked(), 2u);
    EXPECT_EQ(sw.marker(2, 0).marked(), 1u);
    EXPECT_EQ(sw.marker(1, 1).marked(), 0u);
    EXPECT_EQ(sw.marked(), 3u);
}

// ------------------------------------------------------------------ configuration

TEST(CongestionControl, default_config_is_valid_and_off) {
    cc_config c;
    EXPECT_NO_THROW(c.validate());
    EXPECT_FALSE(c.enable);
    EXPECT_FALSE(cc_switch_settings::from(c).enable);
    EXPECT_FALSE(ca_cc_settings::from(c).enable);
    EXPECT_EQ(ca_cc_settings::from(c).ccti_limit, 127);
    EXPECT_EQ(ca_cc_settings::from(c).entry[15].ccti_timer, 10);
}

TEST(CongestionControl, config_errors_name_the_key_and_the_allowed_values) {
    auto bad = [](const std::function<void(cc_config&)>& set) {
        return error_of([&] {
            cc_config c;
            set(c);
            c.validate();
        });
    };
    EXPECT_EQ(bad([](cc_config& c) { c.threshold = 16; }),
              "fabric.cc.threshold=16: out of range 0-15 (4-bit Threshold)");
    EXPECT_EQ(bad([](cc_config& c) { c.marking_rate = 65536; }),
              "fabric.cc.marking_rate=65536: out of range 0-65535 (16-bit Marking_Rate)");
    EXPECT_EQ(bad([](cc_config& c) { c.packet_size = 256; }),
              "fabric.cc.packet_size=256: out of range 0-255 (8-bit Packet_Size, 64-byte credits)");
    EXPECT_EQ(bad([](cc_config& c) { c.ccti_increase = 256; }),
              "fabric.cc.ccti_increase=256: out of range 0-255 (8-bit CCTI_Increase)");
    EXPECT_EQ(bad([](cc_config& c) { c.ccti_timer = 65536; }),
              "fabric.cc.ccti_timer=65536: out of range 0-65535 (16-bit CCTI_Timer, 1.024 us units)");
    EXPECT_EQ(bad([](cc_config& c) { c.trigger_threshold = 300; }),
              "fabric.cc.trigger_threshold=300: out of range 0-255 (8-bit Trigger_Threshold)");
    EXPECT_EQ(bad([](cc_config& c) { c.ccti_min = 256; }),
              "fabric.cc.ccti_min=256: out of range 0-255 (8-bit CCTI_Min)");
    EXPECT_EQ(
        bad([](cc_config& c) { c.ccti_limit = 128; }),
        "fabric.cc.ccti_limit=128: beyond the last entry of fabric.cc.cct (128 entries, indices 0-127)");
    EXPECT_EQ(bad([](cc_config& c) {
                  c.ccti_limit = 3;
                  c.ccti_min = 5;
              }),
              "fabric.cc.ccti_min=5: above fabric.cc.ccti_limit (3)");
    EXPECT_EQ(bad([](cc_config& c) { c.cct.clear(); }),
              "fabric.cc.cct: empty table (give at least one shift:multiplier entry)");
}

TEST(CongestionControl, cct_and_victim_mask_syntax_errors_name_the_key_and_the_entry) {
    const std::string k = "fabric.cc.cct";
    EXPECT_EQ(error_of([&] { parse_cct(k, "0:0,4:2"); }),
              "fabric.cc.cct: entry 1 '4:2': shift must be 0-3 (2-bit CCT_Shift)");
    EXPECT_EQ(error_of([&] { parse_cct(k, "1:16384"); }),
              "fabric.cc.cct: entry 0 '1:16384': multiplier must be 0-16383 (14-bit CCT_Multiplier)");
    EXPECT_EQ(error_of([&] { parse_cct(k, "0:0,1:1,x"); }),
              "fabric.cc.cct: entry 2 'x': expected shift:multiplier");
    EXPECT_EQ(error_of([&] { parse_cct(k, "0:0,,1:1"); }),
              "fabric.cc.cct: entry 1 '': expected shift:multiplier");
    EXPECT_EQ(error_of([&] { parse_cct(k, " "); }),
              "fabric.cc.cct: empty table (give at least one shift:multiplier entry)");

    const std::string v = "fabric.cc.victim_mask";
    EXPECT_EQ(error_of([&] { parse_port_mask(v, "1,255"); }),
              "fabric.cc.victim_mask: '255': expected a port 0-254 or a range A-B");
    EXPECT_EQ(error_of([&] { parse_port_mask(v, "8-3"); }),
              "fabric.cc.victim_mask: '8-3': range ends before it starts");
    EXPECT_EQ(error_of([&] { parse_port_mask(v, "2x"); }),
              "fabric.cc.victim_mask: '2x': expected a port 0-254 or a range A-B");
    const std::bitset<256> m = parse_port_mask(v, "1, 5-7");
    EXPECT_EQ(m.count(), 4u);
    EXPECT_TRUE(m.test(1) && m.test(5) && m.test(6) && m.test(7));
    EXPECT_EQ(parse_port_mask(v, "all").count(), 255u);
    EXPECT_EQ(parse_port_mask(v, "").count(), 0u);
}

// ------------------------------------------------------------------ CNP on the wire

TEST(CongestionControl, cnp_is_lrh_bth_icrc_vcrc_with_opcode_0x80_becn_and_psn_0) {
    using namespace hcasim::wire;
    headers h;
    h.l.sl = 2;
    h.l.dlid = 0x15;
    h.l.slid = 0x14;
    h.b.pkey = 0x8001;
    h.b.dest_qp = 0x1234;
    h.b.psn = 77;  // overwritten: a CNP carries PSN 0
    uint8_t pkt[CNP_BYTES + GRH_BYTES] = {};
    ASSERT_EQ(encode_cnp(h, pkt), CNP_BYTES);
    const uint8_t expect[20] = {0x00, 0x22, 0x00, 0x15, 0x00, 0x06, 0x00, 0x14,  // LRH: SL 2, LNH 2, PktLen 6
                                0x80, 0x00, 0x80, 0x01, 0x40, 0x00, 0x12, 0x34,  // BTH: CNP, BECN, QP 0x1234
                                0x00, 0x00, 0x00, 0x00};                         //      PSN 0
    EXPECT_EQ(std::vector<uint8_t>(pkt, pkt + 20), std::vector<uint8_t>(expect, expect + 20));
    EXPECT_TRUE(is_cnp(pkt, CNP_BYTES));

    headers d;
    ASSERT_EQ(parse_cnp(pkt, CNP_BYTES, d), parse_status::ok);
    EXPECT_EQ(d.b.opcode, op::CNP);
    EXPECT_TRUE(d.b.becn);
    EXPECT_FALSE(d.b.fecn);
    EXPECT_EQ(d.b.dest_qp, 0x1234u);
    EXPECT_EQ(d.b.pkey, 0x8001);
    EXPECT_EQ(d.l.slid, 0x14);
    EXPECT_EQ(d.l.sl, 2);
    // Not a transport opcode: the ordinary parser still refuses it.
    size_t off = 0, len = 0;
    EXPECT_EQ(parse_packet(pkt, CNP_BYTES, d, off, len), parse_status::bad_opcode);

    pkt[CNP_BYTES - 6] ^= 1;  // ICRC
    const uint16_t v = vcrc(pkt, CNP_BYTES - 2);
    pkt[CNP_BYTES - 2] = uint8_t(v);
    pkt[CNP_BYTES - 1] = uint8_t(v >> 8);
    EXPECT_EQ(parse_cnp(pkt, CNP_BYTES, d), parse_status::bad_icrc);
    EXPECT_EQ(parse_cnp(pkt, CNP_BYTES - 1, d), parse_status::truncated);
}

TEST(CongestionControl, cnp_with_a_grh_is_66_bytes_and_parses_back) {
    using namespace hcasim::wire;
    headers h;
    h.has_grh = true;
    h.g.sgid[15] = 1;
    h.g.dgid[15] = 2;
    h.b.dest_qp = 0x42;
    uint8_t pkt[CNP_BYTES + GRH_BYTES] = {};
    ASSERT_EQ(encode_cnp(h, pkt), CNP_BYTES + GRH_BYTES);
    EXPECT_EQ(h.l.pkt_len_words, 16);
    EXPECT_EQ(h.g.pay_len, 16u);  // BTH + ICRC
    headers d;
    ASSERT_EQ(parse_cnp(pkt, sizeof pkt, d), parse_status::ok);
    EXPECT_TRUE(d.has_grh);
    EXPECT_EQ(d.g.dgid[15], 2);
    EXPECT_EQ(d.b.dest_qp, 0x42u);
}

TEST(CongestionControl, parse_cnp_refuses_other_packets) {
    using namespace hcasim::wire;
    headers h;
    h.b.opcode = op::RC_ACKNOWLEDGE;
    uint8_t pkt[64] = {};
    const size_t n = seal_packet(pkt, encode_headers(h, 0, pkt));
    EXPECT_FALSE(is_cnp(pkt, n));
    headers d;
    EXPECT_EQ(parse_cnp(pkt, n, d), parse_status::bad_opcode);
    // A CNP opcode on a packet with more than LRH + BTH: bad length.
    pkt[8] = op::CNP;
    seal_packet(pkt, n - 6);
    EXPECT_TRUE(is_cnp(pkt, n));
    EXPECT_EQ(parse_cnp(pkt, n, d), parse_status::bad_pkt_len);
}

TEST(CongestionControl, mark_fecn_sets_the_bth_bit_and_keeps_both_crcs_valid) {
    using namespace hcasim::wire;
    headers h;
    h.b.opcode = op::RC_SEND_ONLY;
    h.b.dest_qp = 0x99;
    uint8_t pkt[128] = {};
    const size_t hdr = encode_headers(h, 64, pkt);
    const size_t n = seal_packet(pkt, hdr + 64);
    const std::vector<uint8_t> icrc_before(pkt + n - 6, pkt + n - 2);
    ASSERT_TRUE(mark_fecn(pkt, n));
    EXPECT_EQ(pkt[LRH_BYTES + 4], 0x80);
    EXPECT_EQ(std::vector<uint8_t>(pkt + n - 6, pkt + n - 2), icrc_before);
    headers d;
    size_t off = 0, len = 0;
    ASSERT_EQ(parse_packet(pkt, n, d, off, len), parse_status::ok);  // CRCs checked
    EXPECT_TRUE(d.b.fecn);
    EXPECT_FALSE(d.b.becn);
    EXPECT_EQ(d.b.dest_qp, 0x99u);
    EXPECT_FALSE(mark_fecn(pkt, n - 1));  // shorter than PktLen says
    pkt[1] &= 0xFC;                       // LNH raw: no BTH to mark
    EXPECT_FALSE(mark_fecn(pkt, n));
}

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }
