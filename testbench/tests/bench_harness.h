// Reusable two-node harness for end-to-end simulation tests: builds the configured machine
// (node0, node1 back to back), one host_software per node, and inside an application
// SC_THREAD brings one QP per node (RC by default; UC or UD with rc_config::qp_type) to RTS (PD, CQs, QPs; MRs on demand), then runs the test's
// application body and stops the simulation. Buffers come from host_software.as (pages are not
// physically contiguous). Helpers: multi-SGE post_send/post_recv, bounded completion waits,
// buffer read/write/compare through the address space, counters by key.
//
// Usage (inside SIM_TEST):
//   hcasim::test::rc_harness h(cfg);             // sets broker keys, elaborates
//   h.run([&](hcasim::test::rc_harness& h) { ... verbs ... });   // sc_start until done
//   EXPECT_...(after run)
#pragma once
#include <gtest/gtest.h>
#include <systemc>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "firmware/verbs.h"
#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "testbench/host_software.h"
#include "testbench/tests/fixtures.h"
#include "tlm_if/commands.h"

namespace hcasim::test {

using namespace hcasim::verbs;

/// Configuration of one harness run.
struct rc_config {
    unsigned nodes = 2;  ///< hosts (more than 2: one switch; RC/UC QPs pair node i with node i^1)
    ibv_qp_type qp_type = IBV_QPT_RC;  ///< transport of the harness QPs (UD: no peer; see post_ud)
    uint32_t qkey = 0x11111111;        ///< UD: both QPs' Q_Key
    unsigned mtu = 4096;               ///< path MTU bytes (256..4096; UD takes the port's MTU)
    uint32_t max_send_wr = 64;         ///< SQ depth
    uint32_t max_recv_wr = 64;         ///< RQ depth
    uint32_t max_send_sge = 4;         ///< SGEs per send WR
    uint32_t max_recv_sge = 4;         ///< SGEs per receive WR
    uint32_t max_inline = 0;           ///< inline bytes per send WQE
    int sq_sig_all = 0;                ///< QP signals every send WR
    int cqe = 256;                     ///< CQ capacity (each of send and receive CQ)
    uint32_t psn[2] = {
        0x107,
        0x207};  ///< initial send PSN of node0's and node1's QP (24 bits; node i > 1: psn[i % 2] + 0x1000 x (i / 2))
    unsigned qp_access =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    uint8_t max_rd_atomic = 16;                ///< READ/atomic outstanding (requester and responder)
    uint8_t timeout = 14;                      ///< local ACK timeout code (4.096 us x 2^timeout; 0 = none)
    uint8_t retry_cnt = 7;                     ///< retries after timeout / sequence NAK
    uint8_t rnr_retry = 7;                     ///< RNR retries (7 = forever)
    uint8_t min_rnr_timer = 12;                ///< RNR NAK timer code offered (0.64 ms)
    uint64_t sim_limit_ns = 2'000'000'000ull;  ///< sc_start bound (simulated)
    /// Broker keys set before the machine is built ({"link.speed","fdr"}, ...).
    std::vector<std::pair<std::string, std::string>> keys;
};

/// Default wait bound for one completion (simulated ns).
constexpr uint64_t kWaitNs = 50'000'000ull;  // 50 ms

/// Deterministic byte pattern from a seed (xorshift; different seeds give different bytes).
inline std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
    std::vector<uint8_t> v(n);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v[i] = uint8_t(x >> 24);
    }
    return v;
}

/// Index of the first differing byte, or -1 if equal (sizes must match).
inline long long first_mismatch(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    if (a.size() != b.size()) return 0;
    for (size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return (long long)i;
    return -1;
}

class rc_harness;

/// Runs a std::function as the application's SC_THREAD.
class app_module : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(app_module);
    app_module(sc_core::sc_module_name n, std::function<void()> body) : sc_module(n), body_(std::move(body)) {
        SC_THREAD(main);
    }
    bool finished = false;

private:
    void main() {
        body_();
        finished = true;
        sc_core::sc_stop();
    }
    std::function<void()> body_;
};

/// One side of the connection.
struct rc_side {
    host_software* sw = nullptr;
    ibv_context* ctx = nullptr;
    ibv_pd* pd = nullptr;
    ibv_cq* scq = nullptr;
    ibv_cq* rcq = nullptr;
    ibv_qp* qp = nullptr;
    uint16_t lid = 0;
    uint32_t psn = 0;
};

class rc_harness {
public:
    explicit rc_harness(const rc_config& cfg = {}) : cfg_(cfg) {
        if (cfg_.nodes != 2) broker::instance().set("fabric.nodes", std::to_string(cfg_.nodes), "test");
        for (auto& kv : cfg_.keys) broker::instance().set(kv.first, kv.second, "test");
        m_ = std::make_unique<machine>();
        fw::driver_options opts;
        s.resize(cfg_.nodes);
        sw_.resize(cfg_.nodes);
        for (unsigned i = 0; i < cfg_.nodes; ++i) {
            sw_[i] = std::make_unique<host_software>(m_->at(i).cpu, opts);
            s[i].sw = sw_[i].get();
        }
    }

    std::vector<rc_side> s;  ///< one per node
    unsigned nodes() const { return unsigned(s.size()); }
    /// The node whose QP node i's harness QP is connected to (i^1; node 0 for an odd last node).
    unsigned peer_of(unsigned i) const { return (i ^ 1u) < s.size() ? (i ^ 1u) : 0; }
    const rc_config& config() const { return cfg_; }
    machine& mach() { return *m_; }
    host_bus& bus(unsigned i) { return m_->at(i).cpu; }
    fw::address_space& as(unsigned i) { return sw_[i]->as; }

    /// Elaborates the app thread, runs the simulation (setup, then `app`), returns when it ends.
    /// Setup failures are gtest failures and skip `app`.
    void run(const std::function<void(rc_harness&)>& app) {
        app_ = std::make_unique<app_module>("test_app", [this, app] {
            if (setup()) app(*this);
        });
        broker::instance().check_unused();
        sc_core::sc_start(sc_core::sc_time(double(cfg_.sim_limit_ns), sc_core::SC_NS));
        EXPECT_TRUE(app_->finished) << "application did not finish (stalled or hit sim_limit_ns) at "
                                    << sc_core::sc_time_stamp();
        for (unsigned i = 0; i < cfg_.nodes; ++i) {  // impl=both of a unit: its first divergence
            EXPECT_EQ(m_->at(i).adapter.cqs.divergence(), "");
            EXPECT_EQ(m_->at(i).adapter.pkeys.divergence(), "");
        }
    }

    /// Opens both devices and brings one RC QP per node to RTS. Must run in a SystemC process.
    bool setup() {
        for (unsigned i = 0; i < s.size(); ++i) {
            rc_side& d = s[i];
            d.ctx = ibv_open_device(sw_[i]->driver, sw_[i]->as);
            if (!d.ctx) {
                ADD_FAILURE() << "node" << i << ": ibv_open_device: " << sw_[i]->driver.last_error();
                return false;
            }
            d.pd = ibv_alloc_pd(d.ctx);
            d.scq = ibv_create_cq(d.ctx, cfg_.cqe);
            d.rcq = ibv_create_cq(d.ctx, cfg_.cqe);
            if (!d.pd || !d.scq || !d.rcq) {
                ADD_FAILURE() << "node" << i << ": PD/CQ setup failed";
                return false;
            }
            ibv_qp_init_attr a{};
            a.send_cq = d.scq;
            a.recv_cq = d.rcq;
            a.qp_type = cfg_.qp_type;
            a.sq_sig_all = cfg_.sq_sig_all;
            a.cap.max_send_wr = cfg_.max_send_wr;
            a.cap.max_recv_wr = cfg_.max_recv_wr;
            a.cap.max_send_sge = cfg_.max_send_sge;
            a.cap.max_recv_sge = cfg_.max_recv_sge;
            a.cap.max_inline_data = cfg_.max_inline;
            d.qp = ibv_create_qp(d.pd, &a);
            if (!d.qp) {
                ADD_FAILURE() << "node" << i << ": ibv_create_qp failed, errno " << errno;
                return false;
            }
            ibv_port_attr pa{};
            ibv_query_port(d.ctx, 1, &pa);
            d.lid = pa.lid;
            d.psn =
                (cfg_.psn[i % 2] + 0x1000u * (i / 2)) & 0xFFFFFF;  // nodes past the first pair: offset PSNs
        }
        for (unsigned i = 0; i < s.size(); ++i) {
            if (int rc = to_rts(i)) {
                ADD_FAILURE() << "node" << i << ": modify_qp to RTS failed (" << rc << ")";
                return false;
            }
        }
        return true;
    }

    /// Reset/INIT/RTR/RTS sequence of the workloads (connect_rc) for node i's QP towards the other node.
    int to_rts(unsigned i) { return connect(i, IBV_QPS_RTS); }

    /// Takes node i's QP (in Reset) to Init with `pkey_index`, then up to `upto` (Init, RTR or
    /// RTS) towards the other node, with the harness's attributes.
    int connect(unsigned i, ibv_qp_state upto, uint16_t pkey_index = 0) {
        const rc_side& peer = s[peer_of(i)];
        return connect_qp(s[i].qp, upto, peer.qp->qp_num, peer.lid, peer.psn, s[i].psn, pkey_index);
    }

    /// Takes any QP (in Reset) to Init with `pkey_index`, then up to `upto` towards QP
    /// `dest_qpn` at LID `dlid` (RC/UC), expecting its PSN `rq_psn` and sending from `sq_psn`,
    /// with the harness's attributes for the QP's type.
    int connect_qp(ibv_qp* qp, ibv_qp_state upto, uint32_t dest_qpn, uint16_t dlid, uint32_t rq_psn,
                   uint32_t sq_psn, uint16_t pkey_index = 0) {
        const ibv_qp_type t = qp->qp_type;
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.pkey_index = pkey_index;
        attr.port_num = 1;
        attr.qp_access_flags = cfg_.qp_access & (t == IBV_QPT_UC ? unsigned(IBV_ACCESS_REMOTE_WRITE) : ~0u);
        attr.qkey = cfg_.qkey;
        int rc = ibv_modify_qp(qp, &attr,
                               IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                   (t == IBV_QPT_UD ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
        if (rc || upto == IBV_QPS_INIT) return rc;
        if (t == IBV_QPT_UD) {  // no path: the address comes with every WR
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTR;
            rc = ibv_modify_qp(qp, &attr, IBV_QP_STATE);
            if (rc || upto == IBV_QPS_RTR) return rc;
            attr.qp_state = IBV_QPS_RTS;
            attr.sq_psn = sq_psn;
            return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
        }
        if (t == IBV_QPT_UC) {
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTR;
            attr.path_mtu = ibv_mtu(__builtin_ctz(cfg_.mtu) - 7);
            attr.dest_qp_num = dest_qpn;
            attr.rq_psn = rq_psn;
            attr.ah_attr.dlid = dlid;
            attr.ah_attr.port_num = 1;
            rc = ibv_modify_qp(qp, &attr,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
            if (rc || upto == IBV_QPS_RTR) return rc;
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTS;
            attr.sq_psn = sq_psn;
            return ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
        }
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_RTR;
        attr.path_mtu = ibv_mtu(__builtin_ctz(cfg_.mtu) - 7);
        attr.dest_qp_num = dest_qpn;
        attr.rq_psn = rq_psn;
        attr.max_dest_rd_atomic = cfg_.max_rd_atomic;
        attr.min_rnr_timer = cfg_.min_rnr_timer;
        attr.ah_attr.dlid = dlid;
        attr.ah_attr.port_num = 1;
        rc = ibv_modify_qp(qp, &attr,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        if (rc || upto == IBV_QPS_RTR) return rc;
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn = sq_psn;
        attr.timeout = cfg_.timeout;
        attr.retry_cnt = cfg_.retry_cnt;
        attr.rnr_retry = cfg_.rnr_retry;
        attr.max_rd_atomic = cfg_.max_rd_atomic;
        return ibv_modify_qp(qp, &attr,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    }

    // ------------------------------------------------------------------ memory
    /// Virtual memory of node i (zeroed, page-backed page by page).
    uint64_t alloc(unsigned i, size_t bytes, size_t align = 64) { return sw_[i]->as.alloc(bytes, align); }
    /// Registers [va, va+len) on node i (default: local write + remote read/write).
    ibv_mr* reg(unsigned i, uint64_t va, size_t len,
                int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) {
        ibv_mr* mr = ibv_reg_mr(s[i].pd, va, len, access);
        EXPECT_NE(mr, nullptr) << "node" << i << ": ibv_reg_mr(" << len << ") failed, errno " << errno;
        return mr;
    }
    void write_mem(unsigned i, uint64_t va, const std::vector<uint8_t>& v) {
        EXPECT_TRUE(sw_[i]->as.write(va, v.data(), v.size())) << "write to unmapped va";
    }
    std::vector<uint8_t> read_mem(unsigned i, uint64_t va, size_t n) {
        std::vector<uint8_t> v(n);
        EXPECT_TRUE(sw_[i]->as.read(va, v.data(), n)) << "read of unmapped va";
        return v;
    }
    void fill_mem(unsigned i, uint64_t va, size_t n, uint8_t value) {
        write_mem(i, va, std::vector<uint8_t>(n, value));
    }
    /// True if memory at va equals `expect`; on mismatch adds a failure naming the offset.
    bool expect_mem(unsigned i, uint64_t va, const std::vector<uint8_t>& expect, const std::string& what) {
        const auto got = read_mem(i, va, expect.size());
        const long long off = first_mismatch(got, expect);
        if (off >= 0) {
            ADD_FAILURE() << what << ": node" << i << " memory differs at offset " << off << " of "
                          << expect.size() << " (got 0x" << std::hex << unsigned(got[size_t(off)])
                          << ", want 0x" << unsigned(expect[size_t(off)]) << std::dec << ")";
            return false;
        }
        return true;
    }
    /// True if [va, va+n) of node i all equal `value`.
    bool expect_fill(unsigned i, uint64_t va, size_t n, uint8_t value, const std::string& what) {
        return expect_mem(i, va, std::vector<uint8_t>(n, value), what);
    }
    /// Physical address of va on node i (0 if unmapped).
    uint64_t pa_of(unsigned i, uint64_t va) {
        uint64_t pa = 0;
        (void)sw_[i]->as.translate(va, &pa);  // unmapped: pa stays 0, as documented
        return pa;
    }

    // ------------------------------------------------------------------ work requests
    /// Posts one send WR from node i with the given gather list.
    int post_send(unsigned i, ibv_wr_opcode op, std::vector<ibv_sge> sges, uint64_t wr_id,
                  unsigned flags = IBV_SEND_SIGNALED, uint64_t remote_addr = 0, uint32_t rkey = 0,
                  uint32_t imm = 0) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = int(sges.size());
        wr.opcode = op;
        wr.send_flags = flags;
        wr.imm_data = imm;
        wr.wr.rdma.remote_addr = remote_addr;
        wr.wr.rdma.rkey = rkey;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(s[i].qp, &wr, &bad);
    }
    /// Posts one UD SEND (with immediate if `imm` is set) from node i's QP to `ah`, QP `qpn`
    /// (default: the other node's harness QP) with Q_Key `qkey` (default: the harness's).
    int post_ud(unsigned i, ibv_ah* ah, std::vector<ibv_sge> sges, uint64_t wr_id,
                unsigned flags = IBV_SEND_SIGNALED, uint32_t qpn = ~0u, uint32_t qkey = ~0u,
                const uint32_t* imm = nullptr) {
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = int(sges.size());
        wr.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
        wr.send_flags = flags;
        wr.imm_data = imm ? *imm : 0;
        wr.wr.ud.ah = ah;
        wr.wr.ud.remote_qpn = qpn == ~0u ? s[peer_of(i)].qp->qp_num : qpn;
        wr.wr.ud.remote_qkey = qkey == ~0u ? cfg_.qkey : qkey;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(s[i].qp, &wr, &bad);
    }
    /// An address handle on node i towards its peer node (LID), with a GRH if `global`.
    ibv_ah* ah_to_peer(unsigned i, bool global = false) { return ah_to(i, peer_of(i), global); }
    /// The port GID of node j (index 0: fe80::/64 and the default node GUID), wire order.
    static ibv_gid gid_of(unsigned j) {
        ibv_gid g{};
        const uint64_t prefix = 0xfe80000000000000ull, guid = 0x0002c90300000000ull + j + 1;
        for (int k = 0; k < 8; ++k) {
            g.raw[k] = uint8_t(prefix >> (56 - 8 * k));
            g.raw[8 + k] = uint8_t(guid >> (56 - 8 * k));
        }
        return g;
    }
    /// An address handle on node i towards node j (LID), with a GRH if `global`.
    ibv_ah* ah_to(unsigned i, unsigned j, bool global = false) {
        ibv_ah_attr a{};
        a.dlid = s[j].lid;
        a.port_num = 1;
        a.is_global = global ? 1 : 0;
        if (global) {
            a.grh.hop_limit = 64;
            a.grh.traffic_class = 0x12;
            a.grh.flow_label = 0x34567;
            a.grh.dgid = gid_of(j);
        }
        ibv_ah* ah = ibv_create_ah(s[i].pd, &a);
        EXPECT_NE(ah, nullptr) << "ibv_create_ah, errno " << errno;
        return ah;
    }
    /// Posts one atomic (IBV_WR_ATOMIC_CMP_AND_SWP or _FETCH_AND_ADD) from node i; the original
    /// value lands in `result` (8 bytes, lkey).
    int post_atomic(unsigned i, ibv_wr_opcode op, uint64_t result, uint32_t lkey, uint64_t wr_id,
                    uint64_t remote_addr, uint32_t rkey, uint64_t compare_add, uint64_t swap = 0,
                    unsigned flags = IBV_SEND_SIGNALED) {
        ibv_sge sge{result, 8, lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = op;
        wr.send_flags = flags;
        wr.wr.atomic.remote_addr = remote_addr;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = compare_add;
        wr.wr.atomic.swap = swap;
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(s[i].qp, &wr, &bad);
    }
    /// Posts one receive WR on node i with the given scatter list.
    int post_recv(unsigned i, std::vector<ibv_sge> sges, uint64_t wr_id) {
        ibv_recv_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = sges.empty() ? nullptr : sges.data();
        wr.num_sge = int(sges.size());
        ibv_recv_wr* bad = nullptr;
        return ibv_post_recv(s[i].qp, &wr, &bad);
    }

    /// Polls `cq` until n completions arrived or timeout_ns (simulated) passed since the call;
    /// returns what arrived (fewer than n on timeout).
    std::vector<ibv_wc> wait_wc(ibv_cq* cq, size_t n, uint64_t timeout_ns = kWaitNs) {
        std::vector<ibv_wc> out;
        host_bus& b = *bus_of(cq);
        const uint64_t deadline = b.now_ns() + timeout_ns;
        while (out.size() < n) {
            ibv_wc wc[16];
            const int want = int(std::min<size_t>(16, n - out.size()));
            const int got = ibv_poll_cq(cq, want, wc);
            if (got < 0) {
                ADD_FAILURE() << "ibv_poll_cq returned " << got;
                break;
            }
            out.insert(out.end(), wc, wc + got);
            if (got > 0) continue;
            const uint64_t now = b.now_ns();
            if (now >= deadline || ibv_wait_cq(cq, deadline - now) != 0) break;
        }
        return out;
    }
    /// Exactly n completions expected; a shortfall is a failure.
    std::vector<ibv_wc> expect_wc(ibv_cq* cq, size_t n, const std::string& what,
                                  uint64_t timeout_ns = kWaitNs) {
        auto v = wait_wc(cq, n, timeout_ns);
        EXPECT_EQ(v.size(), n) << what << ": completions missing after " << timeout_ns << " ns";
        return v;
    }
    /// Expects no further completion on cq within quiet_ns.
    void expect_no_wc(ibv_cq* cq, uint64_t quiet_ns, const std::string& what) {
        auto v = wait_wc(cq, 1, quiet_ns);
        EXPECT_TRUE(v.empty()) << what << ": unexpected completion wr_id " << v[0].wr_id << " status "
                               << v[0].status << " opcode " << v[0].opcode;
    }
    /// Sleeps node i's application for ns of simulated time.
    void sleep(unsigned i, uint64_t ns) { bus(i).sleep_ns(ns); }
    uint64_t now_ns() { return bus(0).now_ns(); }

    /// Counter value by full key ("node0.hca.transport_engine.tx_packets"); failure if absent.
    static uint64_t counter_value(const std::string& key) {
        const counter* c = stats_registry::instance().find(key);
        EXPECT_NE(c, nullptr) << "no counter " << key;
        return c ? c->value() : 0;
    }
    /// Every counter as "key=value\n", declaration order (for determinism checks).
    static std::string all_counters() {
        std::string out;
        for (const counter* c : stats_registry::instance().counters())
            out += c->key() + "=" + std::to_string(c->value()) + "\n";
        return out;
    }

private:
    host_bus* bus_of(ibv_cq* cq) {
        for (unsigned i = 0; i < s.size(); ++i)
            if (s[i].ctx == cq->context) return &bus(i);
        return &bus(0);
    }

    rc_config cfg_;
    std::unique_ptr<machine> m_;
    std::vector<std::unique_ptr<host_software>> sw_;
    std::unique_ptr<app_module> app_;
};

/// The byte every shared target buffer is filled with before a test writes into it.
constexpr uint8_t kGuardByte = 0xA5;
/// Access of a target region by default: local write, remote write and read.
constexpr int kTargetAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
/// The same, and memory windows may be bound to the region.
constexpr int kBindable = kTargetAccess | IBV_ACCESS_MW_BIND;
/// Remote write and read: the rights a memory window grants.
constexpr unsigned kRemoteRw = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
/// How long a test waits to see that nothing (more) arrives: far longer than a whole exchange
/// on the fabrics the tests build (a message of many packets, a switch, 16 nodes).
constexpr uint64_t kQuietNs = 100'000;

/// A source buffer on node0 (a pattern of `seed`) and a guard-filled target on node1, both
/// registered (the target with `dst_access`).
struct bufs {
    uint64_t src = 0, dst = 0;
    ibv_mr* smr = nullptr;
    ibv_mr* dmr = nullptr;
};
inline bufs make_bufs(rc_harness& h, size_t n, uint64_t seed = 1, int dst_access = kTargetAccess) {
    bufs b;
    b.src = h.alloc(0, n, 4096);
    h.write_mem(0, b.src, pattern(n, seed));
    b.smr = h.reg(0, b.src, n);
    b.dst = h.alloc(1, n, 4096);
    h.fill_mem(1, b.dst, n, kGuardByte);
    b.dmr = h.reg(1, b.dst, n, dst_access);
    return b;
}

/// A registered buffer of n bytes on node i filled with `fill` (in `pd`, default the node's).
struct reg_buf {
    uint64_t va = 0;
    ibv_mr* mr = nullptr;
};
inline reg_buf make_reg_buf(rc_harness& h, unsigned i, size_t n, uint8_t fill = kGuardByte,
                            ibv_pd* pd = nullptr, int access = kTargetAccess) {
    reg_buf b;
    b.va = h.alloc(i, n, 4096);
    h.fill_mem(i, b.va, n, fill);
    b.mr = ibv_reg_mr(pd ? pd : h.s[i].pd, b.va, n, access);
    EXPECT_NE(b.mr, nullptr);
    return b;
}

/// The next async event of node i within `ns` (type -1 if none), acknowledged; its element in *ev.
inline int next_async_event(rc_harness& h, unsigned i, ibv_async_event* ev, uint64_t ns = 1'000'000) {
    if (ibv_get_async_event(h.s[i].ctx, ev, ns) != 0) return -1;
    ibv_ack_async_event(ev);
    return int(ev->event_type);
}

/// The CQE vendor syndrome the HCA reports for a translation or memory management failure.
inline uint32_t vendor(xlate_status s) { return uint32_t(s); }

/// Length of the prefix of `got` equal to `want` (the bytes a transfer placed before it stopped).
inline size_t placed_prefix(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
    size_t i = 0;
    while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
    return i;
}

/// The one completion the caller waits for on `cq` (status GENERAL_ERR if none came).
inline ibv_wc one_wc(rc_harness& h, ibv_cq* cq, const std::string& what) {
    auto v = h.expect_wc(cq, 1, what);
    if (v.empty()) {
        ibv_wc none{};
        none.status = IBV_WC_GENERAL_ERR;
        return none;
    }
    return v[0];
}

/// Modify QP to state `s` with no other attribute.
inline int to_state(ibv_qp* qp, ibv_qp_state s) {
    ibv_qp_attr a{};
    a.qp_state = s;
    return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/// The QP's state as the HCA reports it (QUERY_QP).
inline ibv_qp_state query_state(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    EXPECT_EQ(ibv_query_qp(qp, &a, 0, &ia), 0);
    return a.qp_state;
}

/// After an error: quiet_ns of waiting, then both harness QPs to Reset (async events consumed
/// first, CQs drained) and back to RTS.
inline void recover(rc_harness& h, uint64_t quiet_ns = 20'000) {
    h.sleep(0, quiet_ns);
    for (unsigned i = 0; i < 2; ++i) {
        ibv_async_event ev;  // first: an event's QP state would overwrite the Reset below
        while (ibv_get_async_event(h.s[i].ctx, &ev, 1) == 0) ibv_ack_async_event(&ev);
        ASSERT_EQ(to_state(h.s[i].qp, IBV_QPS_RESET), 0);
        ibv_wc wc[16];
        while (ibv_poll_cq(h.s[i].scq, 16, wc) > 0) {}
        while (ibv_poll_cq(h.s[i].rcq, 16, wc) > 0) {}
    }
    for (unsigned i = 0; i < 2; ++i) ASSERT_EQ(h.connect(i, IBV_QPS_RTS), 0);
}

/// Points node i's harness QP's send ring at memory that does not exist, through the command
/// interface (a misprogrammed context, as a driver bug or a corrupted QPC would leave it): the
/// next send WQE cannot be fetched.
inline void break_send_ring(rc_harness& h, unsigned i) {
    hw::modify_qp_in m{};
    m.cur_state = uint8_t(IBV_QPS_RTS);
    m.ctx = h.s[i].qp->hw_ctx;
    m.ctx.sq_base = 0xFFFFF00000000000ull;  // far beyond host memory
    ASSERT_EQ(
        h.s[i].sw->driver.exec(hw::CMD_MODIFY_QP, h.s[i].qp->qp_num, uint32_t(IBV_QPS_RTS), &m, sizeof m),
        hw::CMD_OK);
}

/// Posts `wrs` as one list (more than one WQE: the HCA fetches them from the send ring rather
/// than taking one through the inline doorbell window).
inline int post_list(ibv_qp* qp, std::vector<ibv_send_wr>& wrs) {
    for (size_t k = 0; k + 1 < wrs.size(); ++k) wrs[k].next = &wrs[k + 1];
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wrs[0], &bad);
}

/// The one asynchronous event node i gets within 1 ms (type -1 if none).
inline int next_event_type(rc_harness& h, unsigned i, ibv_qp** qp) {
    ibv_async_event ev{};
    if (ibv_get_async_event(h.s[i].ctx, &ev, 1'000'000) != 0) return -1;
    *qp = ev.element.qp;
    const int t = int(ev.event_type);
    ibv_ack_async_event(&ev);
    return t;
}

/// Posts one signaled RDMA WRITE (one SGE) on `qp`.
inline int post_write_on(ibv_qp* qp, ibv_sge sge, uint64_t remote, uint32_t rkey, uint64_t wr_id) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

/// RDMA WRITE (one SGE, wr_id 1) from `qp` to node1; returns its completion.
inline ibv_wc write_wc_on(rc_harness& h, ibv_qp* qp, ibv_sge sge, uint64_t remote, uint32_t rkey,
                          const std::string& what) {
    EXPECT_EQ(post_write_on(qp, sge, remote, rkey, 1), 0) << what;
    return one_wc(h, qp->send_cq, what);
}

/// The same from node `from`'s harness QP.
inline ibv_wc write_wc(rc_harness& h, ibv_sge sge, uint64_t remote, uint32_t rkey, const std::string& what,
                       unsigned from = 0) {
    return write_wc_on(h, h.s[from].qp, sge, remote, rkey, what);
}

/// RDMA READ (one SGE, signaled, wr_id 2) by node0's harness QP from node1; returns its completion.
inline ibv_wc read_wc(rc_harness& h, ibv_sge sge, uint64_t remote, uint32_t rkey, const std::string& what) {
    EXPECT_EQ(h.post_send(0, IBV_WR_RDMA_READ, {sge}, 2, IBV_SEND_SIGNALED, remote, rkey), 0) << what;
    return one_wc(h, h.s[0].scq, what);
}

/// A receive WR of the one SGE `sge` (which must outlive the post).
inline ibv_recv_wr one_sge_recv(ibv_sge& sge, uint64_t wr_id) {
    ibv_recv_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return wr;
}

/// Posts one receive (one SGE) on any QP.
inline int post_recv_on(ibv_qp* q, uint64_t va, uint32_t len, uint32_t lkey, uint64_t wr_id) {
    ibv_sge sge{va, len, lkey};
    ibv_recv_wr wr = one_sge_recv(sge, wr_id);
    ibv_recv_wr* bad = nullptr;
    return ibv_post_recv(q, &wr, &bad);
}

/// Posts one receive (one SGE) to an SRQ.
inline int post_one_srq_recv(ibv_srq* srq, uint64_t va, uint32_t len, uint32_t lkey, uint64_t wr_id) {
    ibv_sge sge{va, len, lkey};
    ibv_recv_wr wr = one_sge_recv(sge, wr_id);
    ibv_recv_wr* bad = nullptr;
    return ibv_post_srq_recv(srq, &wr, &bad);
}

/// Posts a Local Invalidate of `key` on `qp`.
inline int post_local_inv(ibv_qp* qp, uint32_t key, unsigned flags = IBV_SEND_SIGNALED, uint64_t wr_id = 70) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = flags;
    wr.invalidate_rkey = key;
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

/// Posts a type 1 bind (Bind MW verb) on node i's harness QP.
inline int post_bind1(rc_harness& h, unsigned i, ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len,
                      unsigned access, uint64_t wr_id = 50) {
    ibv_mw_bind b;
    b.wr_id = wr_id;
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info = {mr, addr, len, access};
    return ibv_bind_mw(h.s[i].qp, mw, &b);
}

/// Type 1 bind on node1's harness QP; returns its completion.
inline ibv_wc bind1(rc_harness& h, ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access) {
    EXPECT_EQ(post_bind1(h, 1, mw, mr, addr, len, access), 0);
    return one_wc(h, h.s[1].scq, "bind");
}

/// Posts a type 2 bind WR on `qp` with the consumer's key byte.
inline int post_bind2(ibv_qp* qp, ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len,
                      unsigned access, uint64_t wr_id = 60) {
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = (mw->rkey & ~0xFFu) | key_byte;
    wr.bind_mw.bind_info = {mr, addr, len, access};
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(qp, &wr, &bad);
}

/// Type 2 bind WR on `qp` (default node1's harness QP); returns its completion.
inline ibv_wc bind2(rc_harness& h, ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len,
                    unsigned access, ibv_qp* qp = nullptr) {
    qp = qp ? qp : h.s[1].qp;
    EXPECT_EQ(post_bind2(qp, mw, key_byte, mr, addr, len, access), 0);
    return one_wc(h, qp->send_cq, "bind WR");
}

/// Another RC QP pair besides the harness's (16 WRs and 1 SGE each way, on the harness PDs),
/// connected and in RTS: node0's QP on the harness CQs, node1's on `cq1` for both queues
/// (default: its harness CQs); node0 sends from PSN `psn`, node1 from psn + 0x100.
/// {node0 QP, node1 QP}, or nullptrs (and a failure).
inline std::pair<ibv_qp*, ibv_qp*> extra_rc_pair(rc_harness& h, uint32_t psn, ibv_cq* cq1 = nullptr) {
    ibv_qp_init_attr a{};
    a.qp_type = IBV_QPT_RC;
    a.cap = {16, 16, 1, 1, 0};
    a.send_cq = h.s[0].scq;
    a.recv_cq = h.s[0].rcq;
    ibv_qp* q0 = ibv_create_qp(h.s[0].pd, &a);
    a.send_cq = cq1 ? cq1 : h.s[1].scq;
    a.recv_cq = cq1 ? cq1 : h.s[1].rcq;
    ibv_qp* q1 = ibv_create_qp(h.s[1].pd, &a);
    EXPECT_TRUE(q0 && q1) << "errno " << errno;
    if (!q0 || !q1) return {nullptr, nullptr};
    EXPECT_EQ(h.connect_qp(q0, IBV_QPS_RTS, q1->qp_num, h.s[1].lid, psn + 0x100, psn), 0);
    EXPECT_EQ(h.connect_qp(q1, IBV_QPS_RTS, q0->qp_num, h.s[0].lid, psn, psn + 0x100), 0);
    return {q0, q1};
}

/// Waits up to `timeout_ns` for node i's next asynchronous event and acknowledges it; false
/// (and a failure) if none comes.
inline bool next_event(rc_harness& h, unsigned i, ibv_async_event& ev, uint64_t timeout_ns = 10'000'000) {
    const int rc = ibv_get_async_event(h.s[i].ctx, &ev, timeout_ns);
    EXPECT_EQ(rc, 0) << "no asynchronous event on node" << i;
    if (rc == 0) ibv_ack_async_event(&ev);
    return rc == 0;
}

/// Port 1 of node `node` as QUERY_PORT reports it.
inline ibv_port_attr port_of(rc_harness& h, unsigned node) {
    ibv_port_attr pa{};
    EXPECT_EQ(ibv_query_port(h.s[node].ctx, 1, &pa), 0);
    return pa;
}

/// P_Key table write through the HCA command interface (the management path, not a verb).
inline hw::cmd_status set_pkey(rc_harness& h, unsigned node, unsigned index, uint16_t pkey) {
    return h.s[node].sw->driver.exec(hw::CMD_SET_PKEY, 1, index, &pkey, sizeof pkey);
}

/// Node `node`'s P_Key checker (the table the HCA holds).
inline pkey_checker& pkeys(rc_harness& h, unsigned node) { return h.mach().at(node).adapter.pkeys; }

/// The config_error message of building a machine with broker keys `keys` (then
/// check_unused), or "" if it builds.
inline std::string config_error_of(const std::vector<std::pair<std::string, std::string>>& keys) {
    for (const auto& kv : keys) broker::instance().set(kv.first, kv.second, "test");
    try {
        machine m;
        broker::instance().check_unused();
    } catch (const config_error& e) {
        return e.what();
    }
    return {};
}

/// Counter of node `node`'s HCA by unit key ("transport_engine.tx_packets").
inline uint64_t ctr(unsigned node, const std::string& unit_key) {
    return rc_harness::counter_value("node" + std::to_string(node) + ".hca." + unit_key);
}

/// Runs `body` in a forked child and returns the text it produced (for comparing two runs);
/// gtest failures or a crash in the child fail the calling test.
inline std::string run_forked_capture(const std::function<void(std::string&)>& body) {
    int fds[2];
    if (pipe(fds) != 0) {
        ADD_FAILURE() << "pipe failed";
        return {};
    }
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
        ADD_FAILURE() << "fork failed";
        return {};
    }
    if (pid == 0) {
        close(fds[0]);
        std::string out;
        body(out);
        const char* p = out.data();
        size_t left = out.size();
        while (left) {
            const ssize_t w = ::write(fds[1], p, left);
            if (w <= 0) break;
            p += w;
            left -= size_t(w);
        }
        close(fds[1]);
        const bool failed = ::testing::Test::HasFailure();
        std::fflush(nullptr);
        _exit(failed ? 1 : 0);
    }
    close(fds[1]);
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t r = ::read(fds[0], buf, sizeof buf);
        if (r <= 0) break;
        out.append(buf, size_t(r));
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status)) << "simulation child crashed (signal "
                                   << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ")";
    if (WIFEXITED(status)) {
        EXPECT_EQ(WEXITSTATUS(status), 0) << "simulation child reported failures (see its output above)";
    }
    return out;
}

}  // namespace hcasim::test
