// Bench of the transport engine alone: its DMA ports on recording host memories, and fakes for
// every unit it holds (the WQE fetcher, address translation, the CQ writer, the port, the P_Key
// table), each recording the calls it gets with the simulated time. The bench hands the engine
// parsed WQEs and received packets as the fetcher and the port would, and checks the packets
// it transmits (decoded from their bytes), its DMA, completions and rewinds at exact times.
#include <gtest/gtest.h>

#include <systemc>

#include <cstring>
#include <vector>

#include "model/hca/cq_writer.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/translation_unit.h"
#include "model/hca/transport_engine.h"
#include "model/hca/wqe_fetcher.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/wire/ib_headers.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;
using sc_core::sc_time_stamp;
namespace op = wire::op;

namespace {

// At kBenchClock (800 MHz): tx_latency_cycles 64 = 80 ns, packet_cycles 8 = 10 ns (the engine's defaults).
const sc_time kLatency(100, SC_NS);  // every host memory access
const sc_time kXlate(5, SC_NS);      // every translation
constexpr uint32_t kQpn = 2, kDestQpn = 9, kSendCq = 1;
constexpr uint16_t kLid = 1, kDlid = 7;
constexpr uint32_t kSqPsn = 100, kRqPsn = 500;
constexpr uint64_t kSrc = 0x5000;  // the WRITE's local buffer (translation is the identity)

struct fake_fetcher final : wqe_source {
    std::vector<std::pair<sc_time, uint32_t>> credits;
    std::vector<std::pair<sc_time, uint16_t>> rewinds;  // (time, WQE index)
    void credit(uint32_t qpn) override { credits.emplace_back(sc_time_stamp(), qpn); }
    void rewind(uint32_t, uint16_t index) override { rewinds.emplace_back(sc_time_stamp(), index); }
    bool fetch_recv(uint32_t, uint32_t, recv_wqe&, sc_time&) override { return false; }
    void set_state(uint32_t, uint8_t) override {}
    srq_outcome take_srq(uint32_t, recv_wqe&, sc_time&) override { return {}; }
    uint32_t srq_pd(uint32_t) const override { return 0; }
    xrc_srq xrc_srq_of(uint32_t) const override { return {}; }
    uint64_t qp_state_bytes() const override { return 0; }
};

/// Identity translation taking kXlate; records the keys and ranges it was asked for.
struct fake_translation final : address_translation {
    struct call {
        sc_time at;
        uint32_t key;
        uint64_t va, len;
    };
    std::vector<call> calls;
    xlate_status translate(uint32_t key, const xlate_owner&, uint64_t va, uint64_t len, uint32_t,
                           phys_seg* segs, unsigned, unsigned& nsegs, sc_time& delay) override {
        calls.push_back({sc_time_stamp() + delay, key, va, len});
        delay += kXlate;
        segs[0] = {va, uint32_t(len)};
        nsegs = 1;
        return xlate_status::ok;
    }
    xlate_status check(uint32_t, const xlate_owner&, uint64_t, uint64_t, uint32_t, sc_time&) override {
        return xlate_status::ok;
    }
    xlate_status bind_mw(const hw::wqe_bind_seg&, const xlate_owner&, sc_time&) override {
        return xlate_status::ok;
    }
    xlate_status invalidate(uint32_t, const xlate_owner&, bool, sc_time&) override {
        return xlate_status::ok;
    }
    xlate_status fast_register(const hw::wqe_fast_reg_seg&, const xlate_owner&, sc_time&) override {
        return xlate_status::ok;
    }
};

struct fake_cq final : completion_sink {
    std::vector<std::pair<sc_time, hw::cqe>> cqes;  // (time the CQE write is posted, CQE)
    std::vector<uint8_t> events;
    bool complete(uint32_t cqn, hw::cqe& e, bool, sc_time& delay) override {
        EXPECT_EQ(cqn, kSendCq);
        cqes.emplace_back(sc_time_stamp() + delay, e);
        return true;
    }
    void post_event(uint8_t type, uint32_t, sc_time&, uint8_t) override { events.push_back(type); }
};

/// The port: seals and parses each packet as the wire would carry it; backpressures only the
/// SLs of the `blocked` lanes when it has a lane per SL (`lanes` > 1: as with VL arbitration).
struct fake_port final : packet_tx {
    unsigned lanes = 1;
    uint32_t blocked = 0;  // lanes with no room
    sc_core::sc_event unblocked;
    struct sent {
        sc_time at;     ///< when transmit() was called
        sc_time ready;  ///< when the packet is ready at the port (at + the ready offset)
        wire::headers h;
        std::vector<uint8_t> payload;
    };
    std::vector<sent> packets;
    sc_time transmit(packet*& pkt, uint32_t len_before_icrc, const sc_time& ready) override {
        std::vector<uint8_t> bytes(pkt->bytes, pkt->bytes + len_before_icrc);
        bytes.resize(len_before_icrc + 6);
        const size_t len = wire::seal_packet(bytes.data(), len_before_icrc);
        sent s{sc_time_stamp(), sc_time_stamp() + ready, {}, {}};
        size_t off = 0, n = 0;
        EXPECT_EQ(wire::parse_packet(bytes.data(), len, s.h, off, n), wire::parse_status::ok);
        s.payload.assign(bytes.begin() + off, bytes.begin() + off + n);
        packets.push_back(std::move(s));
        return ready + sc_time(10, SC_NS);
    }
    sc_time tx_backpressure(uint8_t sl) override {
        return blocked >> tx_lane(sl) & 1 ? sc_core::sc_max_time() : sc_core::SC_ZERO_TIME;
    }
    const sc_core::sc_event& tx_unblocked() override { return unblocked; }
    unsigned tx_lanes() const override { return lanes; }
    unsigned tx_lane(uint8_t sl) const override { return lanes > 1 ? sl : 0; }
};

struct fake_pkeys final : partition_keys {
    uint16_t pkey(unsigned) const override { return 0xFFFF; }
    void pkey_violation(const rx_packet&, uint16_t) override {}
    void qkey_violation() override {}
    void bind_qp(uint32_t, uint16_t) override {}
};

struct bench : sc_core::sc_module {
    recording_memory mem{"memory", 1 << 20, kLatency};
    recording_memory qpc_mem{"qpc_memory", 1 << 20, kLatency};
    transport_engine te{"transport_engine", kBenchClock, 8};
    fake_fetcher fetcher;
    fake_translation xlate;
    fake_cq cq;
    fake_port port;
    fake_pkeys pkeys;

    bench() : sc_module("bench") {
        te.dma.socket.bind(mem.socket);
        te.qpc_dma.socket.bind(qpc_mem.socket);
        te.bind(fetcher, xlate, cq, port, pkeys);
        te.set_lid(kLid);
        te.set_qpc_table(0x80000);
        for (uint32_t i = 0; i < 2500; ++i) mem.put(kSrc + i, uint8_t(i * 7));
    }

    /// RC QP `qpn` (kQpn) in RTS on service level `sl`, path MTU 1024, connected to kDestQpn at kDlid.
    void create_qp(uint32_t qpn = kQpn, uint8_t sl = 0, uint32_t access = hw::ACCESS_REMOTE_WRITE) {
        hw::qp_context c{};
        c.qpn = qpn;
        c.sl = sl;
        c.state = hw::QPS_RTS;
        c.transport = hw::QPT_RC;
        c.mtu = hw::MTU_1024;
        c.pd = 1;
        c.send_cqn = c.recv_cqn = kSendCq;
        c.dest_qpn = kDestQpn;
        c.dlid = kDlid;
        c.sq_psn = kSqPsn;
        c.rq_psn = kRqPsn;
        c.sq_log_size = 4;
        c.retry_cnt = 7;
        c.rnr_retry = 7;
        c.timeout = 14;  // 67 ms: never in these benches
        c.max_rd_atomic = c.max_dest_rd_atomic = 4;
        c.access = access;
        sc_time delay = sc_core::SC_ZERO_TIME;
        te.load_qp(c, hw::QP_ATTR_SQ_PSN | hw::QP_ATTR_RQ_PSN, delay);
    }

    /// What the fetcher hands on for a signaled RDMA WRITE of 2500 bytes from kSrc.
    static send_wqe write_wqe() {
        send_wqe w;
        w.wr_id = 0xABC;
        w.opcode = hw::WQE_OP_RDMA_WRITE;
        w.flags = hw::WQE_FLAG_SIGNALED;
        w.wqe_index = 0;
        w.remote_va = 0x90000;
        w.rkey = 0x22;
        w.num_sge = 1;
        w.sg[0] = {kSrc, 2500, 0x11};
        w.length = 2500;
        w.ready = sc_time_stamp();
        return w;
    }

    /// A packet from the peer (kDlid) to kQpn.
    static rx_packet from_peer(uint8_t opcode, uint32_t psn) {
        rx_packet p{};
        p.h = wire::BLANK_HEADERS;
        p.h.l.dlid = kLid;
        p.h.l.slid = kDlid;
        p.h.b.opcode = opcode;
        p.h.b.dest_qp = kQpn;
        p.h.b.psn = psn;
        return p;
    }
    /// An ACK (or NAK) from the responder for `psn`.
    void respond(uint8_t syndrome, uint32_t psn) {
        rx_packet p = from_peer(op::RC_ACKNOWLEDGE, psn);
        p.h.a.syndrome = syndrome;
        p.h.a.msn = 1;
        p.wire_len = 30;
        te.receive(p);
    }
};

}  // namespace

SIM_TEST(TransportEngineBench, rdma_write_is_segmented_into_mtu_packets_with_bth_and_reth_at_exact_times) {
    bench b;
    b.create_qp();
    run_bench([&] {
        b.te.push_send(kQpn, bench::write_wqe());
        sc_core::wait(1, sc_core::SC_US);
    });
    ASSERT_EQ(b.port.packets.size(), 3u);
    const uint8_t opcodes[3] = {op::RC_RDMA_WRITE_FIRST, op::RC_RDMA_WRITE_MIDDLE, op::RC_RDMA_WRITE_LAST};
    const uint32_t lens[3] = {1024, 1024, 452};
    for (unsigned i = 0; i < 3; ++i) {
        const fake_port::sent& s = b.port.packets[i];
        SCOPED_TRACE("packet " + std::to_string(i));
        // One packet per initiation interval (10 ns); each ready after the pipeline (80 ns), its
        // translation (5 ns) and its payload's DMA read (100 ns).
        EXPECT_EQ(s.at, sc_time(10 * i, SC_NS));
        EXPECT_EQ(s.ready, sc_time(185 + 10 * i, SC_NS));
        EXPECT_EQ(s.h.b.opcode, opcodes[i]);
        EXPECT_EQ(s.h.b.psn, kSqPsn + i);
        EXPECT_EQ(s.h.b.dest_qp, kDestQpn);
        EXPECT_EQ(s.h.b.pkey, 0xFFFF);
        EXPECT_EQ(s.h.b.ack_req, i == 2);  // the last packet asks for the ACK
        EXPECT_EQ(s.h.l.dlid, kDlid);
        EXPECT_EQ(s.h.l.slid, kLid);
        ASSERT_EQ(s.payload.size(), lens[i]);
        for (uint32_t k = 0; k < lens[i]; ++k)
            ASSERT_EQ(s.payload[k], uint8_t((1024 * i + k) * 7)) << "payload byte " << k;
        // Its payload was read from the translated address when the packet started.
        const recording_memory::access& a = b.mem.log.at(i);
        EXPECT_EQ(a.at, sc_time(85 + 10 * i, SC_NS));
        EXPECT_EQ(a.addr, kSrc + 1024 * i);
        EXPECT_EQ(a.len, lens[i]);
        EXPECT_EQ(b.xlate.calls.at(i).key, 0x11u);
    }
    // RETH in the FIRST packet only.
    EXPECT_EQ(b.port.packets[0].h.r.va, 0x90000u);
    EXPECT_EQ(b.port.packets[0].h.r.rkey, 0x22u);
    EXPECT_EQ(b.port.packets[0].h.r.dma_len, 2500u);
    EXPECT_EQ(b.port.packets[1].h.r.va, 0u);
    EXPECT_EQ(b.port.packets[2].h.r.dma_len, 0u);
    // The WQE left the engine's queue with its last packet: the fetcher was credited.
    ASSERT_EQ(b.fetcher.credits.size(), 1u);
    EXPECT_EQ(b.fetcher.credits[0], std::make_pair(sc_time(20, SC_NS), kQpn));
    EXPECT_TRUE(b.cq.cqes.empty()) << "completed before its ACK";
}

// With a port lane per VL (VL arbitration), a QP whose lane has no room waits alone: kQpn on
// SL1 (lane 1 blocked) takes its turn first, and the QP on SL0 sends its three packets one per
// initiation interval meanwhile; when lane 1 has room again at 1 us, kQpn sends its three.
SIM_TEST(TransportEngineBench, a_qp_whose_vl_is_blocked_waits_while_a_qp_on_another_vl_sends) {
    bench b;
    b.port.lanes = 2;
    b.port.blocked = 1u << 1;
    b.create_qp(kQpn, 1);
    b.create_qp(kQpn + 1, 0);
    run_bench([&] {
        b.te.push_send(kQpn, bench::write_wqe());
        b.te.push_send(kQpn + 1, bench::write_wqe());
        sc_core::wait(1, sc_core::SC_US);
        b.port.blocked = 0;
        b.port.unblocked.notify(sc_core::SC_ZERO_TIME);
        sc_core::wait(1, sc_core::SC_US);
    });
    ASSERT_EQ(b.port.packets.size(), 6u);
    const double at_ns[6] = {0, 10, 20, 1000, 1010, 1020};
    for (unsigned i = 0; i < 6; ++i) {
        SCOPED_TRACE("packet " + std::to_string(i));
        EXPECT_EQ(b.port.packets[i].h.l.sl, i < 3 ? 0 : 1);
        EXPECT_EQ(b.port.packets[i].at, sc_time(at_ns[i], SC_NS));
        EXPECT_EQ(b.port.packets[i].h.b.psn, kSqPsn + i % 3);
    }
    EXPECT_EQ(b.te.stall_credit.value(), 1u);  // kQpn, once
}

SIM_TEST(TransportEngineBench, ack_of_the_last_psn_completes_the_write_at_the_cq_writer) {
    bench b;
    b.create_qp();
    run_bench([&] {
        b.te.push_send(kQpn, bench::write_wqe());
        sc_core::wait(1, sc_core::SC_US);
        b.respond(wire::aeth_ack(31), kSqPsn + 1);  // the first two packets only: no completion
        EXPECT_TRUE(b.cq.cqes.empty());
        sc_core::wait(200, SC_NS);
        b.respond(wire::aeth_ack(31), kSqPsn + 2);
        sc_core::wait(1, sc_core::SC_US);
    });
    ASSERT_EQ(b.cq.cqes.size(), 1u);
    const hw::cqe& e = b.cq.cqes[0].second;
    EXPECT_EQ(b.cq.cqes[0].first, sc_time(1200, SC_NS));
    EXPECT_EQ(e.wr_id, 0xABCu);
    EXPECT_EQ(e.status, hw::CQE_SUCCESS);
    EXPECT_EQ(e.opcode, hw::CQE_OP_RDMA_WRITE);
    EXPECT_EQ(e.byte_len, 2500u);
    EXPECT_EQ(e.qpn, kQpn);
    EXPECT_EQ(e.owner, hw::CQE_IS_SEND);
    EXPECT_EQ(b.te.acks_received.value(), 2u);
    EXPECT_EQ(b.port.packets.size(), 3u) << "nothing is resent after the ACK";
}

SIM_TEST(TransportEngineBench, sequence_error_nak_rewinds_the_fetcher_and_resends_from_the_naked_psn) {
    bench b;
    b.create_qp();
    run_bench([&] {
        b.te.push_send(kQpn, bench::write_wqe());
        sc_core::wait(1, sc_core::SC_US);
        b.respond(wire::aeth_nak(wire::nak::PSN_SEQUENCE_ERROR), kSqPsn + 1);
        // Go-back-N: the WQE is not kept once sent; the fetcher reads it again from the ring.
        EXPECT_EQ(b.fetcher.rewinds.size(), 1u);
        b.te.push_send(kQpn, bench::write_wqe());
        sc_core::wait(1, sc_core::SC_US);
        b.respond(wire::aeth_ack(31), kSqPsn + 2);
        sc_core::wait(100, SC_NS);
    });
    ASSERT_EQ(b.fetcher.rewinds.size(), 1u);
    EXPECT_EQ(b.fetcher.rewinds[0], std::make_pair(sc_time(1000, SC_NS), uint16_t(0)));
    EXPECT_EQ(b.te.retransmits.value(), 1u);
    // The packets after the NAK'd PSN's predecessor again: MIDDLE (no RETH) and LAST.
    ASSERT_EQ(b.port.packets.size(), 5u);
    const fake_port::sent& m = b.port.packets[3];
    const fake_port::sent& l = b.port.packets[4];
    EXPECT_EQ(m.h.b.opcode, op::RC_RDMA_WRITE_MIDDLE);
    EXPECT_EQ(m.h.b.psn, kSqPsn + 1);
    EXPECT_EQ(m.at, sc_time(1000, SC_NS));
    EXPECT_EQ(m.ready, sc_time(1185, SC_NS));
    EXPECT_EQ(m.payload, b.port.packets[1].payload);
    EXPECT_EQ(l.h.b.opcode, op::RC_RDMA_WRITE_LAST);
    EXPECT_EQ(l.h.b.psn, kSqPsn + 2);
    EXPECT_EQ(l.at, sc_time(1010, SC_NS));
    EXPECT_EQ(b.mem.log.at(3).addr, kSrc + 1024);  // the resend reads from the MIDDLE's offset
    ASSERT_EQ(b.cq.cqes.size(), 1u);
    EXPECT_EQ(b.cq.cqes[0].second.status, hw::CQE_SUCCESS);
    EXPECT_EQ(b.cq.cqes[0].first, sc_time(2000, SC_NS));
}

SIM_TEST(TransportEngineBench, remote_access_nak_completes_the_write_in_error_and_the_qp_leaves_rts) {
    bench b;
    b.create_qp();
    run_bench([&] {
        b.te.push_send(kQpn, bench::write_wqe());
        sc_core::wait(1, sc_core::SC_US);
        b.respond(wire::aeth_nak(wire::nak::REMOTE_ACCESS_ERROR), kSqPsn);
        sc_core::wait(100, SC_NS);
    });
    ASSERT_EQ(b.cq.cqes.size(), 1u);
    EXPECT_EQ(b.cq.cqes[0].first, sc_time(1000, SC_NS));
    EXPECT_EQ(b.cq.cqes[0].second.status, hw::CQE_REM_ACCESS_ERR);
    EXPECT_EQ(b.cq.cqes[0].second.wr_id, 0xABCu);
    EXPECT_EQ(b.te.state(kQpn), hw::QPS_ERR);
    EXPECT_EQ(b.port.packets.size(), 3u);
}

SIM_TEST(TransportEngineBench, request_beyond_the_expected_psn_gets_a_sequence_error_nak) {
    bench b;
    b.create_qp();
    run_bench([&] {
        sc_core::wait(50, SC_NS);
        rx_packet p = bench::from_peer(op::RC_RDMA_WRITE_ONLY, kRqPsn + 1);  // kRqPsn was lost
        p.h.b.ack_req = true;
        p.h.r = {0x90000, 0x22, 8};
        const uint8_t data[8] = {};
        p.payload = data;
        p.payload_len = 8;
        p.wire_len = 50;
        b.te.receive(p);
        sc_core::wait(1, sc_core::SC_US);
    });
    EXPECT_TRUE(b.mem.log.empty()) << "data of an out-of-sequence request was placed";
    ASSERT_EQ(b.port.packets.size(), 1u);
    const fake_port::sent& n = b.port.packets[0];
    EXPECT_EQ(n.h.b.opcode, op::RC_ACKNOWLEDGE);
    EXPECT_EQ(n.h.b.psn, kRqPsn);  // the PSN expected
    EXPECT_EQ(n.h.b.dest_qp, kDestQpn);
    EXPECT_EQ(wire::aeth_type_of(n.h.a.syndrome), wire::aeth_type::nak);
    EXPECT_EQ(wire::aeth_value_of(n.h.a.syndrome), wire::nak::PSN_SEQUENCE_ERROR);
    EXPECT_EQ(n.h.l.dlid, kDlid);
    EXPECT_EQ(n.at, sc_time(50, SC_NS));
    EXPECT_EQ(n.ready, sc_time(130, SC_NS));  // after the receive pipeline (rx_latency_cycles 64)
    EXPECT_EQ(b.te.seq_errors.value(), 1u);
}

// ---------------------------------------------------------------- processing units

namespace {

/// A signaled 64-byte RDMA WRITE from kSrc, the `index`-th of its QP (remote address by index).
send_wqe small_write(uint16_t index) {
    send_wqe w = bench::write_wqe();
    w.wr_id = index;
    w.wqe_index = index;
    w.remote_va = 0x90000 + 64u * index;
    w.sg[0].len = w.length = 64;
    return w;
}

/// Runs `wqes` 64-byte WRITEs on each of `qps` QPs (kQpn, kQpn + 1, ...), all handed over at 0,
/// with `settings` (key=value of the engine) and returns the bench's packets.
std::vector<fake_port::sent> run_writes(unsigned qps, unsigned wqes,
                                        std::initializer_list<std::pair<const char*, const char*>> settings) {
    for (const auto& [key, value] : settings)
        broker::instance().set(std::string("transport_engine.") + key, value, "test");
    bench b;
    for (unsigned i = 0; i < qps; ++i) b.create_qp(kQpn + i);
    run_bench([&] {
        for (uint16_t k = 0; k < wqes; ++k)
            for (unsigned i = 0; i < qps; ++i) b.te.push_send(kQpn + i, small_write(k));
        sc_core::wait(5, sc_core::SC_US);
    });
    return b.port.packets;
}

}  // namespace

// wqe_cycles 80 at 800 MHz: 100 ns per WQE on the QP's send unit, so one QP's 64-byte WRITEs
// start every 100 ns (10 M WQEs/s = clock / wqe_cycles) though the requester could send one
// every packet_cycles (10 ns); each WQE's packet in order.
SIM_TEST(TransportEngineBench, one_qp_reaches_exactly_clock_over_wqe_cycles_with_its_wqes_in_order) {
    const std::vector<fake_port::sent> p = run_writes(1, 8, {{"wqe_cycles", "80"}});
    ASSERT_EQ(p.size(), 8u);
    for (unsigned k = 0; k < 8; ++k) {
        SCOPED_TRACE("WQE " + std::to_string(k));
        EXPECT_EQ(p[k].at, sc_time(100 * k, SC_NS));
        EXPECT_EQ(p[k].h.b.opcode, op::RC_RDMA_WRITE_ONLY);
        EXPECT_EQ(p[k].h.b.psn, kSqPsn + k);
        EXPECT_EQ(p[k].h.r.va, 0x90000u + 64 * k);  // the WQEs' order
    }
}

// Without wqe_cycles (the default) the same QP is limited by packet_cycles alone: 10 ns apart.
SIM_TEST(TransportEngineBench, without_wqe_cycles_one_qp_sends_one_packet_per_packet_cycles) {
    const std::vector<fake_port::sent> p = run_writes(1, 8, {});
    ASSERT_EQ(p.size(), 8u);
    for (unsigned k = 0; k < 8; ++k) EXPECT_EQ(p[k].at, sc_time(10 * k, SC_NS)) << "WQE " << k;
}

// Four QPs on four send units (QPNs 2..5 mod 4: units 2, 3, 0, 1) run in parallel: each QP
// still starts a WQE every 100 ns, so together they send four times one QP's rate; the
// requester interleaves them one packet_cycles (10 ns) apart.
SIM_TEST(TransportEngineBench, four_send_units_give_four_qps_four_times_one_qps_rate) {
    const std::vector<fake_port::sent> p = run_writes(4, 8, {{"wqe_cycles", "80"}, {"send_units", "4"}});
    ASSERT_EQ(p.size(), 32u);
    for (unsigned n = 0; n < 32; ++n) {
        SCOPED_TRACE("packet " + std::to_string(n));
        const unsigned k = n / 4, i = n % 4;
        EXPECT_EQ(p[n].h.b.dest_qp, kDestQpn);
        EXPECT_EQ(p[n].h.b.psn, kSqPsn + k);
        EXPECT_EQ(p[n].at, sc_time(100 * k + 10 * i, SC_NS));
    }
    EXPECT_EQ(p.back().at, sc_time(730, SC_NS));  // 32 WQEs in 740 ns: 4 x 10 M WQEs/s
}

// The same four QPs on one send unit share it: one WQE every 100 ns in all.
SIM_TEST(TransportEngineBench, qps_on_one_send_unit_share_its_rate) {
    const std::vector<fake_port::sent> p = run_writes(4, 8, {{"wqe_cycles", "80"}, {"send_units", "1"}});
    ASSERT_EQ(p.size(), 32u);
    for (unsigned n = 0; n < 32; ++n) {
        SCOPED_TRACE("packet " + std::to_string(n));
        EXPECT_EQ(p[n].at, sc_time(100 * n, SC_NS));
        EXPECT_EQ(p[n].h.b.psn, kSqPsn + n / 4);  // round robin, each QP's WQEs in order
    }
}

namespace {

/// An 8-byte RDMA WRITE ONLY to `qpn` at `va`, PSN `psn`.
rx_packet write_only(uint32_t qpn, uint32_t psn, uint64_t va) {
    static const uint8_t data[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    rx_packet p = bench::from_peer(op::RC_RDMA_WRITE_ONLY, psn);
    p.h.b.dest_qp = qpn;
    p.h.r = {va, 0x22, 8};
    p.payload = data;
    p.payload_len = 8;
    p.wire_len = 50;
    return p;
}

/// When the bench's host memory was written at `addr` (placement of a WRITE).
sc_time placed_at(const bench& b, uint64_t addr) {
    for (const recording_memory::access& a : b.mem.log)
        if (a.write && a.addr == addr) return a.at;
    ADD_FAILURE() << "nothing placed at " << addr;
    return sc_core::SC_ZERO_TIME;
}

/// Two QPs each receive a WRITE at 50 ns; returns when each was placed.
std::pair<sc_time, sc_time> two_qps_receive(const char* recv_units) {
    if (recv_units) broker::instance().set("transport_engine.recv_units", recv_units, "test");
    bench b;
    b.create_qp(kQpn);
    b.create_qp(kQpn + 2);
    run_bench([&] {
        sc_core::wait(50, SC_NS);
        b.te.receive(write_only(kQpn, kRqPsn, 0x90000));
        b.te.receive(write_only(kQpn + 2, kRqPsn, 0xA0000));
        sc_core::wait(1, sc_core::SC_US);
    });
    return {placed_at(b, 0x90000), placed_at(b, 0xA0000)};
}

/// A READ (`read`) or an atomic, then a WRITE, both at 50 ns on kQpn, with `key` = `cycles`;
/// returns when the WRITE was placed.
sc_time write_after(bool read, const char* key, const char* cycles) {
    broker::instance().set(std::string("transport_engine.") + key, cycles, "test");
    bench b;
    b.create_qp(kQpn, 0, hw::ACCESS_REMOTE_WRITE | hw::ACCESS_REMOTE_READ | hw::ACCESS_REMOTE_ATOMIC);
    run_bench([&] {
        sc_core::wait(50, SC_NS);
        rx_packet r = bench::from_peer(read ? op::RC_RDMA_READ_REQUEST : op::RC_FETCH_ADD, kRqPsn);
        if (read)
            r.h.r = {0x70000, 0x22, 8};
        else
            r.h.ae = {0x70000, 0x22, 1, 0};
        r.wire_len = 50;
        b.te.receive(r);
        b.te.receive(write_only(kQpn, kRqPsn + 1, 0x90000));
        sc_core::wait(2, sc_core::SC_US);
    });
    return placed_at(b, 0x90000);
}

}  // namespace

// recv_units 0 (the default): each QP has a receive unit of its own, so two QPs' WRITEs that
// arrive together are placed together, after the receive pipeline (80 ns) and translation (5 ns).
SIM_TEST(TransportEngineBench, by_default_each_qp_has_its_own_receive_unit) {
    const auto [a, b] = two_qps_receive(nullptr);
    EXPECT_EQ(a, sc_time(135, SC_NS));
    EXPECT_EQ(b, sc_time(135, SC_NS));
}

// recv_units 2: QPNs 2 and 4 are both on unit 0, which takes the second packet rx_cycles
// (8 = 10 ns) after the first.
SIM_TEST(TransportEngineBench, qps_on_one_receive_unit_take_turns_rx_cycles_apart) {
    const auto [a, b] = two_qps_receive("2");
    EXPECT_EQ(a, sc_time(135, SC_NS));
    EXPECT_EQ(b, sc_time(145, SC_NS));
}

// read_cycles 72: an inbound READ holds its QP's receive unit rx_cycles + 72 = 80 cycles
// (100 ns), so the WRITE behind it starts 100 ns after it instead of 10.
SIM_TEST(TransportEngineBench, an_inbound_read_holds_its_receive_unit_for_read_cycles) {
    EXPECT_EQ(write_after(true, "read_cycles", "72"), sc_time(235, SC_NS));
}

// atomic_cycles 152: an inbound atomic holds the unit 8 + 152 = 160 cycles (200 ns).
SIM_TEST(TransportEngineBench, an_inbound_atomic_holds_its_receive_unit_for_atomic_cycles) {
    EXPECT_EQ(write_after(false, "atomic_cycles", "152"), sc_time(335, SC_NS));
}

// Without them a READ holds the unit rx_cycles only: the WRITE starts 10 ns after it.
SIM_TEST(TransportEngineBench, without_read_cycles_a_write_follows_a_read_by_rx_cycles) {
    EXPECT_EQ(write_after(true, "read_cycles", "0"), sc_time(145, SC_NS));
}
