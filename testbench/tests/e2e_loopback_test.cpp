// Loopback inside the port (C10-6: a message to a QP on the same port is delivered internally,
// never onto the fabric) and the port's receive DLID check.
//
// Port level: a test module transmits raw RC SEND ONLY packets from a port at fixed times and
// recorders bound as the ports' receivers log what each port passes on and when: packets to
// the port's own LIDs (its LMC range) come back into its receive path after serialisation at
// the port rate + port.loopback_ns + port.rx_pipeline_ns, on a path of their own (the wire
// stays idle, the link counts nothing); multicast DLIDs still go to the wire; a received DLID
// that is neither ours, multicast nor permissive is dropped (rx_bad_dlid).
//
// End to end: two RC QPs of node0 connected to each other (DLID = node0's LID) move SEND,
// WRITE and READ of many sizes; every byte, guard and completion is checked, and neither
// node0's wire nor node1 sees a packet. A 2-byte WRITE completes exactly two cable propagation
// delays (minus two loopback_ns) sooner than back to back.
#include <gtest/gtest.h>
#include <systemc>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"
#include "tlm_if/wire/ib_headers.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;
using namespace sc_core;

namespace {

// ------------------------------------------------------------------ port level

/// One packet to send: at `at_ns`, to `dlid`, `payload` bytes (a multiple of 4: no pad).
struct shot {
    double at_ns;
    uint16_t dlid;
    uint32_t payload;
    uint32_t psn;
};

/// Wire length of an RC SEND ONLY with `payload` bytes: LRH 8 + BTH 12 + payload + ICRC 4 + VCRC 2.
uint32_t wire_len(uint32_t payload) { return 8 + 12 + payload + 4 + 2; }

/// Transmits `shots` (in time order) from `tx` with SLID `slid`.
class injector : public sc_module {
public:
    SC_HAS_PROCESS(injector);
    injector(sc_module_name n, port& tx, uint16_t slid, std::vector<shot> shots)
        : sc_module(n), tx_(tx), slid_(slid), shots_(std::move(shots)) {
        SC_THREAD(main);
    }
    bool done = false;

private:
    void main() {
        for (const shot& s : shots_) {
            const sc_time at(s.at_ns, SC_NS);
            if (at > sc_time_stamp()) wait(at - sc_time_stamp());
            wire::headers h;
            h.l.dlid = s.dlid;
            h.l.slid = slid_;
            h.b.opcode = wire::op::RC_SEND_ONLY;
            h.b.dest_qp = 0x11;
            h.b.psn = s.psn;
            const size_t hdr = wire::encode_headers(h, s.payload, pkt_.bytes);
            for (uint32_t b = 0; b < s.payload; ++b) pkt_.bytes[hdr + b] = uint8_t(s.psn * 7 + b);
            tx_.transmit(pkt_, uint32_t(hdr + s.payload), SC_ZERO_TIME);
        }
        done = true;
    }
    port& tx_;
    uint16_t slid_;
    std::vector<shot> shots_;
    packet pkt_;
};

/// What a port passed on to its receiver, in order.
class recorder : public rx_sink {
public:
    struct rx {
        uint32_t psn;
        uint16_t dlid, slid;
        uint32_t wire_len;
        sc_time at;
        bool payload_ok;
    };
    std::vector<rx> got;
    void receive(const rx_packet& p) override {
        bool ok = true;
        for (uint32_t b = 0; b < p.payload_len; ++b) ok = ok && p.payload[b] == uint8_t(p.h.b.psn * 7 + b);
        got.push_back({p.h.b.psn, p.h.l.dlid, p.h.l.slid, p.wire_len, sc_time_stamp(), ok});
    }
};

uint64_t count(const std::string& key) {
    const counter* c = stats_registry::instance().find(key);
    EXPECT_NE(c, nullptr) << key;
    return c ? c->value() : 0;
}

/// Two nodes back to back; both ports' receivers are recorders; node N transmits shots[N].
struct port_bench {
    port_bench(const std::vector<std::pair<std::string, std::string>>& keys, std::vector<shot> from0,
               std::vector<shot> from1 = {}) {
        for (const auto& kv : keys) broker::instance().set(kv.first, kv.second, "test");
        m = std::make_unique<machine>();
        for (unsigned i = 0; i < 2; ++i) m->at(i).adapter.port0.bind_receiver(rec[i]);
        inj[0] = std::make_unique<injector>("inj0", port_of(0), m->at(0).lid(), std::move(from0));
        inj[1] = std::make_unique<injector>("inj1", port_of(1), m->at(1).lid(), std::move(from1));
        broker::instance().check_unused();
    }
    port& port_of(unsigned i) { return m->at(i).adapter.port0; }
    void run(double ns) {
        sc_start(sc_time(ns, SC_NS));
        EXPECT_TRUE(inj[0]->done && inj[1]->done);
        for (unsigned i = 0; i < 2; ++i)
            for (const recorder::rx& r : rec[i].got)
                EXPECT_TRUE(r.payload_ok) << "node" << i << " PSN " << r.psn << ": payload differs";
    }
    /// Serialisation time of `bytes` at node i's port rate (as the port computes it).
    sc_time ser(unsigned i, uint32_t bytes) {
        return sc_time(double(bytes) * 8000.0 / port_of(i).rate_gbps(), SC_PS);
    }
    std::unique_ptr<machine> m;
    recorder rec[2];
    std::unique_ptr<injector> inj[2];
};

sc_time ns(double v) { return sc_time(v, SC_NS); }

}  // namespace

SIM_TEST(PortLoopback, C10_6_packet_to_own_lid_loops_back_after_serialisation_and_never_reaches_the_link) {
    // node0 (LID 1) sends three packets to itself and then one to node1, all ready at t = 0.
    port_bench b({{"hca.port.loopback_ns", "7"}},
                 {{0, 1, 4096, 0}, {0, 1, 256, 1}, {0, 1, 0, 2}, {0, 2, 64, 3}});
    b.run(10'000);
    const sc_time loop = ns(7 + kRxPipeNs);
    // The looped-back packets take their own serialiser, one after the other.
    ASSERT_EQ(b.rec[0].got.size(), 3u);
    sc_time t = SC_ZERO_TIME;
    for (unsigned i = 0; i < 3; ++i) {
        const recorder::rx& r = b.rec[0].got[i];
        EXPECT_EQ(r.psn, i);
        EXPECT_EQ(r.dlid, 1);
        EXPECT_EQ(r.slid, 1);
        t += b.ser(0, r.wire_len);
        EXPECT_EQ(r.at, t + loop) << "looped-back packet " << i;
    }
    EXPECT_EQ(b.rec[0].got[0].wire_len, wire_len(4096));
    // The wire was idle: the packet to node1 starts at once, not behind the looped-back ones.
    ASSERT_EQ(b.rec[1].got.size(), 1u);
    EXPECT_EQ(b.rec[1].got[0].psn, 3u);
    EXPECT_EQ(b.rec[1].got[0].at, b.ser(0, wire_len(64)) + ns(kPropNs + kRxPipeNs));
    // Counters: the wire and the cable carried one packet; the loopback three.
    EXPECT_EQ(count("node0.hca.port.tx_packets"), 1u);
    EXPECT_EQ(count("node0.hca.port.tx_bytes"), wire_len(64));
    EXPECT_EQ(count("node0.link.packets"), 1u);
    EXPECT_EQ(count("node0.hca.port.loopback_packets"), 3u);
    EXPECT_EQ(count("node0.hca.port.loopback_bytes"), wire_len(4096) + wire_len(256) + wire_len(0));
    EXPECT_EQ(count("node0.hca.port.rx_packets"), 3u);
    EXPECT_EQ(count("node1.hca.port.rx_packets"), 1u);
    EXPECT_EQ(count("node1.hca.port.loopback_packets"), 0u);
    EXPECT_EQ(count("node1.link.packets"), 0u);
}

SIM_TEST(PortLoopback, wire_arrivals_and_looped_back_packets_reach_the_receiver_in_arrival_order) {
    // node0 loops back three 4 KiB packets at t = 0 (last bits ~331, ~662, ~994 ns); node1's
    // small packets reach node0 in between. Each is passed on at its own arrival time.
    port_bench b({}, {{0, 1, 4096, 0}, {0, 1, 4096, 1}, {0, 1, 4096, 2}},
                 {{50, 1, 256, 10}, {500, 1, 256, 11}, {2000, 1, 256, 12}});
    b.run(10'000);
    const sc_time big = b.ser(0, wire_len(4096)), small = b.ser(1, wire_len(256));
    const sc_time wire_rx = small + ns(kPropNs + kRxPipeNs);
    const std::vector<std::pair<uint32_t, sc_time>> want = {
        {10, ns(50) + wire_rx},         {0, big + ns(kRxPipeNs)},       {11, ns(500) + wire_rx},
        {1, big * 2.0 + ns(kRxPipeNs)}, {2, big * 3.0 + ns(kRxPipeNs)}, {12, ns(2000) + wire_rx}};
    ASSERT_EQ(b.rec[0].got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(b.rec[0].got[i].psn, want[i].first) << "position " << i;
        EXPECT_EQ(b.rec[0].got[i].at, want[i].second) << "PSN " << want[i].first;
    }
    EXPECT_EQ(count("node0.hca.port.loopback_packets"), 3u);
    EXPECT_EQ(count("node0.hca.port.tx_packets"), 0u);
    EXPECT_EQ(count("node1.hca.port.tx_packets"), 3u);
    EXPECT_EQ(count("node0.hca.port.rx_malformed"), 0u);
}

SIM_TEST(PortLoopback, lmc_range_loops_back_multicast_loops_back_and_goes_out_others_go_to_the_wire) {
    port_bench b({}, {{0, 4, 8, 0},
                      {0, 5, 8, 1},
                      {0, 6, 8, 2},
                      {0, 7, 8, 3},
                      {0, 8, 8, 4},         // next LID after the range: the wire (node1 drops it)
                      {0, 3, 8, 5},         // below it: the wire (node1 drops it)
                      {0, 0xC001, 8, 6},    // multicast: looped back (o10-36) and on the wire
                      {0, 0xFFFF, 8, 7}});  // permissive: the wire
    b.port_of(0).set_lid(4, 2);             // node0 owns LIDs 4..7
    b.run(10'000);
    ASSERT_EQ(b.rec[0].got.size(), 5u);
    for (unsigned i = 0; i < 4; ++i) {
        EXPECT_EQ(b.rec[0].got[i].psn, i);
        EXPECT_EQ(b.rec[0].got[i].dlid, 4 + i);
    }
    EXPECT_EQ(b.rec[0].got[4].dlid, 0xC001) << "the multicast packet's own copy";
    EXPECT_EQ(b.rec[0].got[4].psn, 6u);
    EXPECT_EQ(count("node0.hca.port.loopback_packets"), 5u);
    EXPECT_EQ(count("node0.hca.port.tx_packets"), 4u);
    EXPECT_EQ(count("node0.link.packets"), 4u);
    // node1 (LID 2, LMC 0) passes on the multicast and permissive packets only.
    ASSERT_EQ(b.rec[1].got.size(), 2u);
    EXPECT_EQ(b.rec[1].got[0].dlid, 0xC001);
    EXPECT_EQ(b.rec[1].got[1].dlid, 0xFFFF);
    EXPECT_EQ(count("node1.hca.port.rx_bad_dlid"), 2u);
}

SIM_TEST(PortDlid, receive_drops_dlids_neither_ours_multicast_nor_permissive) {
    // node0 sends to node1 (LID 2): ours, reserved 0, another node's, the last unicast LID,
    // the first and last multicast LIDs, permissive.
    port_bench b({}, {{0, 2, 16, 0},
                      {100, 0, 16, 1},
                      {200, 3, 16, 2},
                      {300, 0xBFFF, 16, 3},
                      {400, 0xC000, 16, 4},
                      {500, 0xFFFE, 16, 5},
                      {600, 0xFFFF, 16, 6}});
    b.run(10'000);
    const std::vector<uint32_t> passed = {0, 4, 5, 6};
    ASSERT_EQ(b.rec[1].got.size(), passed.size());
    for (size_t i = 0; i < passed.size(); ++i) EXPECT_EQ(b.rec[1].got[i].psn, passed[i]);
    EXPECT_EQ(count("node1.hca.port.rx_bad_dlid"), 3u);
    EXPECT_EQ(count("node1.hca.port.rx_packets"), 4u);
    EXPECT_EQ(count("node1.hca.port.rx_bytes"), 7u * wire_len(16));  // every packet received
    EXPECT_EQ(count("node1.hca.port.rx_malformed") + count("node1.hca.port.rx_bad_vcrc") +
                  count("node1.hca.port.rx_bad_icrc"),
              0u);
}

SIM_TEST(PortDlid, receive_accepts_every_lid_of_the_lmc_range) {
    port_bench b({}, {{0, 2, 16, 0},  // node1's old LID: no longer its own
                      {100, 3, 16, 1},
                      {200, 4, 16, 2},
                      {300, 5, 16, 3},
                      {400, 6, 16, 4},
                      {500, 7, 16, 5},
                      {600, 8, 16, 6}});
    b.port_of(1).set_lid(4, 2);  // node1 owns LIDs 4..7
    b.run(10'000);
    ASSERT_EQ(b.rec[1].got.size(), 4u);
    for (unsigned i = 0; i < 4; ++i) EXPECT_EQ(b.rec[1].got[i].dlid, 4 + i);
    EXPECT_EQ(count("node1.hca.port.rx_bad_dlid"), 3u);
}

// ------------------------------------------------------------------ end to end

namespace {

constexpr size_t kGuardBytes = 64;

/// Two RC QPs of node `n`, connected to each other through the node's own LID.
struct loop_pair {
    ibv_cq* scq[2] = {};
    ibv_cq* rcq[2] = {};
    ibv_qp* qp[2] = {};
    uint32_t psn[2] = {0x5A5A0, 0xFFFFF0};  // the second wraps past 2^24 within a message
};

loop_pair make_loop_pair(rc_harness& h, unsigned n) {
    loop_pair p;
    const rc_config& c = h.config();
    for (unsigned i = 0; i < 2; ++i) {
        p.scq[i] = ibv_create_cq(h.s[n].ctx, c.cqe);
        p.rcq[i] = ibv_create_cq(h.s[n].ctx, c.cqe);
        EXPECT_TRUE(p.scq[i] && p.rcq[i]);
        ibv_qp_init_attr a{};
        a.send_cq = p.scq[i];
        a.recv_cq = p.rcq[i];
        a.qp_type = IBV_QPT_RC;
        a.cap.max_send_wr = c.max_send_wr;
        a.cap.max_recv_wr = c.max_recv_wr;
        a.cap.max_send_sge = c.max_send_sge;
        a.cap.max_recv_sge = c.max_recv_sge;
        p.qp[i] = ibv_create_qp(h.s[n].pd, &a);
        EXPECT_NE(p.qp[i], nullptr) << "loopback QP " << i;
        if (!p.qp[i]) return p;
    }
    for (unsigned i = 0; i < 2; ++i)  // to each other, through our own port
        EXPECT_EQ(h.connect_qp(p.qp[i], IBV_QPS_RTS, p.qp[1 - i]->qp_num, h.s[n].lid, p.psn[1 - i], p.psn[i]),
                  0);
    return p;
}

ibv_send_wr one_wr(ibv_wr_opcode op, ibv_sge* sge, uint64_t wr_id, uint64_t raddr, uint32_t rkey) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    return wr;
}

/// Snapshot of the counters that tell where packets went.
struct traffic {
    uint64_t v[14];
    static constexpr const char* keys[14] = {"node0.hca.port.tx_packets",
                                             "node0.hca.port.tx_bytes",
                                             "node0.link.packets",
                                             "node0.hca.port.loopback_packets",
                                             "node0.hca.port.loopback_bytes",
                                             "node0.hca.port.rx_packets",
                                             "node1.hca.port.rx_packets",
                                             "node1.hca.port.tx_packets",
                                             "node1.link.packets",
                                             "node0.hca.transport_engine.tx_packets",
                                             "node0.hca.transport_engine.acks_sent",
                                             "node0.hca.transport_engine.read_responses_sent",
                                             "node0.hca.transport_engine.naks_sent",
                                             "node0.hca.transport_engine.retransmits"};
    static traffic now() {
        traffic t;
        for (size_t i = 0; i < 14; ++i) t.v[i] = rc_harness::counter_value(keys[i]);
        return t;
    }
    uint64_t since(const traffic& before, size_t i) const { return v[i] - before.v[i]; }
};

uint32_t packets_of(size_t size, unsigned mtu) { return size == 0 ? 1 : uint32_t((size + mtu - 1) / mtu); }

}  // namespace

SIM_TEST(E2eLoopback, C10_6_rc_between_two_qps_of_one_port_never_reaches_the_link) {
    rc_config cfg;
    cfg.mtu = 1024;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const unsigned mtu = h.config().mtu;
        loop_pair p = make_loop_pair(h, 0);
        if (!p.qp[0] || !p.qp[1]) return;
        const traffic before = traffic::now();
        const std::vector<size_t> sizes = {1, 2, 63, 1023, 1024, 1025, 4096 + 5, 65536 + 3};
        const ibv_wr_opcode ops[] = {IBV_WR_SEND, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ};
        uint32_t requests = 0, read_responses = 0, messages = 0;
        uint64_t payload = 0;
        for (unsigned from = 0; from < 2; ++from) {
            const unsigned to = 1 - from;
            for (ibv_wr_opcode op : ops) {
                for (size_t size : sizes) {
                    ++messages;
                    const char* name = op == IBV_WR_SEND         ? "SEND"
                                       : op == IBV_WR_RDMA_WRITE ? "WRITE"
                                                                 : "READ";
                    const std::string what = std::string(name) + " " + std::to_string(size) + " B, QP " +
                                             std::to_string(from) + " -> " + std::to_string(to);
                    // The data moves from `src` (sender's, or for a READ the responder's) into
                    // `dst` (between guards).
                    const auto data = pattern(size, messages * 1000003u + size);
                    const uint64_t src_region = h.alloc(0, size + 64, 4096);
                    const uint64_t src = src_region + 3;
                    const uint64_t dst_region = h.alloc(0, size + 2 * kGuardBytes, 64);
                    const uint64_t dst = dst_region + kGuardBytes;
                    h.write_mem(0, src, data);
                    h.fill_mem(0, dst_region, size + 2 * kGuardBytes, kGuardByte);
                    ibv_mr* smr = h.reg(0, src_region, size + 64);
                    ibv_mr* dmr = h.reg(0, dst_region, size + 2 * kGuardBytes);
                    if (!smr || !dmr) return;
                    const uint64_t wr_id = 0x1000 + messages;
                    ibv_sge sge{};
                    ibv_send_wr wr{};
                    if (op == IBV_WR_SEND) {
                        ibv_sge rsge{dst, uint32_t(size), dmr->lkey};
                        ibv_recv_wr rwr{};
                        rwr.wr_id = wr_id + 0x100000;
                        rwr.sg_list = &rsge;
                        rwr.num_sge = 1;
                        ibv_recv_wr* rbad = nullptr;
                        ASSERT_EQ(ibv_post_recv(p.qp[to], &rwr, &rbad), 0) << what;
                        sge = {src, uint32_t(size), smr->lkey};
                        wr = one_wr(op, &sge, wr_id, 0, 0);
                    } else if (op == IBV_WR_RDMA_WRITE) {
                        sge = {src, uint32_t(size), smr->lkey};
                        wr = one_wr(op, &sge, wr_id, dst, dmr->rkey);
                    } else {
                        sge = {dst, uint32_t(size), dmr->lkey};
                        wr = one_wr(op, &sge, wr_id, src, smr->rkey);
                    }
                    ibv_send_wr* bad = nullptr;
                    ASSERT_EQ(ibv_post_send(p.qp[from], &wr, &bad), 0) << what;
                    auto wc = h.expect_wc(p.scq[from], 1, what + ": send completion");
                    ASSERT_EQ(wc.size(), 1u) << what;
                    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << what;
                    EXPECT_EQ(wc[0].wr_id, wr_id) << what;
                    EXPECT_EQ(wc[0].qp_num, p.qp[from]->qp_num) << what;
                    EXPECT_EQ(wc[0].opcode, op == IBV_WR_SEND         ? IBV_WC_SEND
                                            : op == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE
                                                                      : IBV_WC_RDMA_READ)
                        << what;
                    if (op == IBV_WR_SEND) {
                        auto rwc = h.expect_wc(p.rcq[to], 1, what + ": receive completion");
                        ASSERT_EQ(rwc.size(), 1u) << what;
                        EXPECT_EQ(rwc[0].status, IBV_WC_SUCCESS) << what;
                        EXPECT_EQ(rwc[0].opcode, IBV_WC_RECV) << what;
                        EXPECT_EQ(rwc[0].wr_id, wr_id + 0x100000) << what;
                        EXPECT_EQ(rwc[0].byte_len, size) << what;
                        EXPECT_EQ(rwc[0].qp_num, p.qp[to]->qp_num) << what;
                    } else {
                        h.expect_no_wc(p.rcq[to], 0, what + ": no receive completion");
                    }
                    h.sleep(0, 5'000);  // let every posted DMA write land
                    h.expect_mem(0, dst, data, what + ": destination");
                    h.expect_fill(0, dst_region, kGuardBytes, kGuardByte, what + ": guard before");
                    h.expect_fill(0, dst + size, kGuardBytes, kGuardByte, what + ": guard after");
                    h.expect_mem(0, src, data, what + ": source untouched");
                    if (op == IBV_WR_RDMA_READ) {
                        ++requests;
                        read_responses += packets_of(size, mtu);
                    } else {
                        requests += packets_of(size, mtu);
                    }
                    payload += size;
                }
            }
        }
        const traffic after = traffic::now();
        // Nothing on node0's wire or cable; node1 neither received nor sent anything.
        for (size_t i : {0u, 1u, 2u, 6u, 7u, 8u}) EXPECT_EQ(after.since(before, i), 0u) << traffic::keys[i];
        // Every packet node0's engine sent (requests, ACKs, READ responses) looped back and was
        // received by node0's own port.
        EXPECT_EQ(after.since(before, 9), requests);
        EXPECT_EQ(after.since(before, 11), read_responses);
        EXPECT_EQ(after.since(before, 12), 0u);  // no NAK
        EXPECT_EQ(after.since(before, 13), 0u);  // no retransmission
        const uint64_t looped = after.since(before, 3);
        EXPECT_EQ(looped, after.since(before, 9) + after.since(before, 10) + after.since(before, 11));
        EXPECT_EQ(after.since(before, 5), looped);
        EXPECT_GT(after.since(before, 4), payload + looped * 26);    // headers + CRCs of every packet
        EXPECT_GE(after.since(before, 10), 2u * 2u * sizes.size());  // SENDs and WRITEs were ACKed
        EXPECT_EQ(rc_harness::counter_value("node0.hca.port.rx_bad_dlid"), 0u);
        EXPECT_EQ(rc_harness::counter_value("node0.hca.port.rx_malformed"), 0u);
        std::printf(
            "loopback: %u messages, %llu packets looped back (%u requests, %u READ responses, %llu ACKs), "
            "0 on the wire\n",
            messages, (unsigned long long)looped, requests, read_responses,
            (unsigned long long)after.since(before, 10));
    });
}

namespace {

/// Simulated ns from posting a signaled 2-byte RDMA WRITE on `qp` to polling its completion
/// from `cq` (the second of two, so caches and contexts are warm).
uint64_t write_2b_ns(rc_harness& h, ibv_qp* qp, ibv_cq* cq, uint64_t src, uint32_t lkey, uint64_t dst,
                     uint32_t rkey, const std::string& what) {
    uint64_t took = 0;
    for (int round = 0; round < 2; ++round) {
        ibv_sge sge{src, 2, lkey};
        ibv_send_wr wr = one_wr(IBV_WR_RDMA_WRITE, &sge, 77 + round, dst, rkey);
        ibv_send_wr* bad = nullptr;
        const uint64_t t0 = h.now_ns();
        EXPECT_EQ(ibv_post_send(qp, &wr, &bad), 0) << what;
        auto wc = h.expect_wc(cq, 1, what);
        took = h.now_ns() - t0;
        EXPECT_EQ(wc.size(), 1u) << what;
        if (wc.size() == 1) {
            EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << what;
        }
        h.sleep(0, 10'000);
    }
    return took;
}

/// A 2-byte WRITE node0 -> node1 (back to back) and QP 0 -> QP 1 of node0 (loopback): returns
/// the two post-to-completion times and checks the bytes landed.
std::pair<uint64_t, uint64_t> write_2b_latencies(
    const std::vector<std::pair<std::string, std::string>>& keys) {
    rc_config cfg;
    cfg.keys = keys;
    rc_harness h(cfg);
    std::pair<uint64_t, uint64_t> out{0, 0};
    h.run([&](rc_harness& h) {
        loop_pair p = make_loop_pair(h, 0);
        if (!p.qp[0] || !p.qp[1]) return;
        const uint64_t src = h.alloc(0, 4096, 4096);
        h.write_mem(0, src, {0x12, 0x34});
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t far = h.alloc(1, 4096, 4096);
        ibv_mr* fmr = h.reg(1, far, 4096);
        const uint64_t near = h.alloc(0, 4096, 4096);
        ibv_mr* nmr = h.reg(0, near, 4096);
        if (!smr || !fmr || !nmr) return;
        out.first = write_2b_ns(h, h.s[0].qp, h.s[0].scq, src, smr->lkey, far, fmr->rkey, "back to back");
        const uint64_t wire_before = rc_harness::counter_value("node0.hca.port.tx_packets");
        out.second = write_2b_ns(h, p.qp[0], p.scq[0], src, smr->lkey, near, nmr->rkey, "loopback");
        EXPECT_EQ(rc_harness::counter_value("node0.hca.port.tx_packets"), wire_before);
        h.expect_mem(1, far, {0x12, 0x34}, "back-to-back destination");
        h.expect_mem(0, near, {0x12, 0x34}, "loopback destination");
    });
    return out;
}

}  // namespace

SIM_TEST(E2eLoopback, C10_6_two_byte_write_completes_two_cable_delays_sooner_than_back_to_back) {
    // Request and ACK each skip the cable (link.propagation_ns) and take port.loopback_ns (0)
    // instead; everything else on the path is the same.
    const auto [b2b, loop] = write_2b_latencies({});
    std::printf("2-byte RDMA WRITE, post to completion: back to back %llu ns, loopback %llu ns\n",
                (unsigned long long)b2b, (unsigned long long)loop);
    EXPECT_GT(loop, 0u);
    EXPECT_EQ(b2b - loop, uint64_t(2 * kPropNs));
}

SIM_TEST(E2eLoopback, C10_6_loopback_ns_delays_each_looped_back_packet) {
    const auto [b2b, loop] =
        write_2b_latencies({{"hca.port.loopback_ns", "3"}, {"link.propagation_ns", "50"}});
    std::printf(
        "2-byte RDMA WRITE (loopback_ns 3, propagation 50 ns): back to back %llu ns, loopback %llu ns\n",
        (unsigned long long)b2b, (unsigned long long)loop);
    EXPECT_EQ(b2b - loop, uint64_t(2 * (50 - 3)));
}

SIM_TEST(E2eLoopback, rc_to_a_lid_nobody_owns_is_dropped_by_the_far_port_and_retries_out) {
    // Back to back, node0's QP addresses LID 3 (no such port): the packets go on the wire
    // (not ours) and node1's port drops them (not its LID), so the requester times out.
    rc_config cfg;
    cfg.timeout = 1;    // 8.192 us
    cfg.retry_cnt = 2;  // 3 tries in all
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        ASSERT_EQ(to_state(h.s[0].qp, IBV_QPS_RESET), 0);
        h.s[1].lid = 3;  // what node0's QP is connected to
        ASSERT_EQ(h.to_rts(0), 0);
        const uint64_t src = h.alloc(0, 4096, 4096);
        ibv_mr* smr = h.reg(0, src, 4096);
        const uint64_t dst = h.alloc(1, 4096, 4096);
        h.fill_mem(1, dst, 64, kGuardByte);
        ibv_mr* dmr = h.reg(1, dst, 4096);
        if (!smr || !dmr) return;
        ASSERT_EQ(
            h.post_send(0, IBV_WR_RDMA_WRITE, {{src, 64, smr->lkey}}, 5, IBV_SEND_SIGNALED, dst, dmr->rkey),
            0);
        auto wc = h.expect_wc(h.s[0].scq, 1, "retry exhausted");
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR);
        h.expect_fill(1, dst, 64, kGuardByte, "node1 memory untouched");
        EXPECT_EQ(ctr(0, "port.loopback_packets"), 0u);
        EXPECT_EQ(ctr(0, "port.tx_packets"), 3u);
        EXPECT_EQ(ctr(1, "port.rx_bad_dlid"), 3u);
        EXPECT_EQ(ctr(1, "port.rx_packets"), 0u);
        EXPECT_EQ(ctr(1, "transport_engine.rx_packets"), 0u);
    });
}

SIM_TEST(E2eLoopback, C10_6_streams_both_ways_share_the_loopback_path_and_lose_nothing) {
    // 32 WRITEs of 64 KiB QP 0 -> QP 1 and 32 SENDs of 64 KiB QP 1 -> QP 0, all posted at once
    // (1024 request packets at MTU 4096): the loopback path's queue holds the requesters back,
    // the receive buffer never overflows, nothing is retransmitted, every byte lands.
    rc_config cfg;
    cfg.max_send_wr = 64;
    cfg.max_recv_wr = 64;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        constexpr unsigned kMsgs = 32;
        constexpr size_t kSize = 64 * 1024;
        loop_pair p = make_loop_pair(h, 0);
        if (!p.qp[0] || !p.qp[1]) return;
        const traffic before = traffic::now();
        uint64_t src[2], dst[2];
        ibv_mr *smr[2], *dmr[2];
        for (unsigned i = 0; i < 2; ++i) {
            src[i] = h.alloc(0, kMsgs * kSize, 4096);
            dst[i] = h.alloc(0, kMsgs * kSize, 4096);
            for (unsigned m = 0; m < kMsgs; ++m)
                h.write_mem(0, src[i] + m * kSize, pattern(kSize, i * 100 + m));
            smr[i] = h.reg(0, src[i], kMsgs * kSize);
            dmr[i] = h.reg(0, dst[i], kMsgs * kSize);
            if (!smr[i] || !dmr[i]) return;
        }
        for (unsigned m = 0; m < kMsgs; ++m) {
            ibv_sge rsge{dst[0] + m * kSize, uint32_t(kSize), dmr[0]->lkey};
            ibv_recv_wr rwr{};
            rwr.wr_id = 500 + m;
            rwr.sg_list = &rsge;
            rwr.num_sge = 1;
            ibv_recv_wr* rbad = nullptr;
            ASSERT_EQ(ibv_post_recv(p.qp[0], &rwr, &rbad), 0);
        }
        const uint64_t t0 = h.now_ns();
        for (unsigned m = 0; m < kMsgs; ++m) {
            ibv_sge w{src[0] + m * kSize, uint32_t(kSize), smr[0]->lkey};
            ibv_send_wr wr = one_wr(IBV_WR_RDMA_WRITE, &w, 100 + m, dst[1] + m * kSize, dmr[1]->rkey);
            ibv_send_wr* bad = nullptr;
            ASSERT_EQ(ibv_post_send(p.qp[0], &wr, &bad), 0);
            ibv_sge s{src[1] + m * kSize, uint32_t(kSize), smr[1]->lkey};
            wr = one_wr(IBV_WR_SEND, &s, 200 + m, 0, 0);
            ASSERT_EQ(ibv_post_send(p.qp[1], &wr, &bad), 0);
        }
        for (unsigned i = 0; i < 2; ++i) {
            auto wc = h.expect_wc(p.scq[i], kMsgs, "send completions of QP " + std::to_string(i));
            for (unsigned m = 0; m < wc.size(); ++m) {
                EXPECT_EQ(wc[m].status, IBV_WC_SUCCESS);
                EXPECT_EQ(wc[m].wr_id, (i ? 200u : 100u) + m);
            }
        }
        auto rwc = h.expect_wc(p.rcq[0], kMsgs, "receive completions");
        for (unsigned m = 0; m < rwc.size(); ++m) {
            EXPECT_EQ(rwc[m].status, IBV_WC_SUCCESS);
            EXPECT_EQ(rwc[m].wr_id, 500u + m);
            EXPECT_EQ(rwc[m].byte_len, kSize);
        }
        const uint64_t took = h.now_ns() - t0;
        h.sleep(0, 10'000);
        for (unsigned m = 0; m < kMsgs; ++m) {
            h.expect_mem(0, dst[1] + m * kSize, pattern(kSize, m), "WRITE " + std::to_string(m));
            h.expect_mem(0, dst[0] + m * kSize, pattern(kSize, 100 + m), "SEND " + std::to_string(m));
        }
        const traffic after = traffic::now();
        for (size_t i : {0u, 2u, 6u, 8u}) EXPECT_EQ(after.since(before, i), 0u) << traffic::keys[i];
        EXPECT_EQ(after.since(before, 9), 2u * kMsgs * (kSize / 4096));
        EXPECT_EQ(after.since(before, 13), 0u);  // no retransmission
        EXPECT_EQ(rc_harness::counter_value("node0.hca.port.rx_malformed"), 0u);
        // Both streams share one serialiser at the port rate: no faster than the wire.
        const double gbps = 2.0 * kMsgs * kSize * 8 / double(took);
        std::printf("loopback streams: 2 x %u x %zu B in %llu ns = %.1f Gb/s together\n", kMsgs, kSize,
                    (unsigned long long)took, gbps);
        EXPECT_LT(gbps, h.mach().at(0).adapter.port0.rate_gbps());
    });
}
