#include "testbench/workloads.h"

#include <systemc>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/pcie/dma_traffic_gen.h"
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>
#include "model/system/fabric.h"
#include "testbench/host_software.h"

namespace hcasim {

using namespace sc_core;
using namespace hcasim::verbs;

bool is_pcie_workload(const std::string& n) { return n == "dma_read_bw" || n == "dma_write_bw"; }

namespace {

/// Workload parameters (keys `workload.*`).
class workload_params : public sc_module {
public:
    param<unsigned> tx_depth;
    param<unsigned> rx_depth;
    param<unsigned> cq_mod;
    param<int> inline_bytes;
    param<double> timeout_us;
    param<unsigned> dma_outstanding;

    explicit workload_params(sc_module_name name = "workload")
        : sc_module(name),
          tx_depth("tx_depth", 128, "WRs", "send work requests outstanding in bandwidth tests (perftest -t)"),
          rx_depth("rx_depth", 512, "WRs", "receive work requests posted in send tests (perftest -r)"),
          cq_mod("cq_mod", 100, "WRs", "bandwidth tests signal one send in cq_mod (perftest -Q)"),
          inline_bytes("inline_bytes", -1, "bytes",
                       "inline data up to this size; -1: perftest defaults (220 in latency tests, 0 in bandwidth)"),
          timeout_us("timeout_us", 100000.0, "us", "a wait longer than this (simulated) fails the run"),
          dma_outstanding("dma_outstanding", 512, "transfers", "DMAs in flight in dma_*_bw") {
        tx_depth.range(1, 16384);
        rx_depth.range(1, 16384);
        cq_mod.range(1, 16384);
        inline_bytes.range(-1, 1024);
        timeout_us.range(1, 1e12);
        dma_outstanding.range(1, 1u << 20);
    }
};

/// What two processes tell each other out of band (perftest does it over TCP).
struct peer_info {
    uint16_t lid = 0;
    std::vector<uint32_t> qpn;
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t addr = 0;
    bool ready = false;
};

/// Two-party barrier for the ping-pong phases.
struct barrier {
    sc_event ev;
    unsigned arrived = 0, generation = 0;
    void arrive() {
        const unsigned g = generation;
        if (++arrived == 2) {
            arrived = 0;
            ++generation;
            ev.notify(SC_ZERO_TIME);
            wait(SC_ZERO_TIME);
            return;
        }
        while (generation == g)
            wait(ev);
    }
};

double to_us(uint64_t ns) { return double(ns) / 1000.0; }

/// The two-node perftest application: node0 is the client, node1 the server.
class perftest : public sc_module {
public:
    SC_HAS_PROCESS(perftest);
    perftest(sc_module_name name, machine& m, const run_spec& spec, const workload_params& wp,
             std::vector<run_report>& out)
        : sc_module(name), m_(m), spec_(spec), wp_(wp), out_(out) {
        fw::driver_options opts;
        for (unsigned i = 0; i < 2; ++i)
            sw_[i] = std::make_unique<host_software>(m.at(i).cpu, opts);
        for (uint64_t s : [&] {
                 std::vector<uint64_t> all;
                 for (auto& p : spec.phases) all.insert(all.end(), p.sizes.begin(), p.sizes.end());
                 return all;
             }())
            max_size_ = std::max(max_size_, s);
        SC_THREAD(client);
        SC_THREAD(server);
    }

    std::string error;
    bool verified_all = true;

private:
    struct side {
        ibv_context* ctx = nullptr;
        ibv_pd* pd = nullptr;
        ibv_mr* mr = nullptr;
        ibv_cq* scq = nullptr;
        ibv_cq* rcq = nullptr;
        std::vector<ibv_qp*> qps;
        uint64_t buf = 0, buf_bytes = 0;
    };

    void fail(const std::string& why) {
        if (error.empty()) {
            error = why;
            sc_stop();
        }
        wait();  // park this process for good
    }
    uint64_t timeout_ns() const { return uint64_t(wp_.timeout_us.get() * 1000.0); }
    host_bus& bus(unsigned i) { return m_.at(i).cpu; }

    void setup(unsigned i) {
        side& s = side_[i];
        host_software& sw = *sw_[i];
        s.ctx = ibv_open_device(sw.driver, sw.as);
        if (!s.ctx)
            fail("node" + std::to_string(i) + ": ibv_open_device failed: " + sw.driver.last_error());
        s.pd = ibv_alloc_pd(s.ctx);
        // Send region then receive region, each max_size (at least one page).
        const uint64_t region = std::max<uint64_t>(max_size_, 4096);
        s.buf_bytes = 2 * region;
        s.buf = sw.as.alloc(s.buf_bytes, 4096);
        sw.as.fill(s.buf, region, uint8_t(0x40 + i));
        s.mr = ibv_reg_mr(s.pd, s.buf, s.buf_bytes, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
        if (!s.pd || !s.mr)
            fail("node" + std::to_string(i) + ": PD/MR setup failed");
        s.scq = ibv_create_cq(s.ctx, int(wp_.tx_depth) * 2);
        s.rcq = ibv_create_cq(s.ctx, int(wp_.rx_depth) * 2);
        if (!s.scq || !s.rcq)
            fail("node" + std::to_string(i) + ": CQ creation failed");
        for (unsigned q = 0; q < spec_.qps; ++q) {
            ibv_qp_init_attr a{};
            a.send_cq = s.scq;
            a.recv_cq = s.rcq;
            a.qp_type = IBV_QPT_RC;
            a.cap.max_send_wr = wp_.tx_depth;
            a.cap.max_recv_wr = wp_.rx_depth;
            a.cap.max_send_sge = 1;
            a.cap.max_recv_sge = 1;
            a.cap.max_inline_data = 220;
            ibv_qp* qp = ibv_create_qp(s.pd, &a);
            if (!qp)
                fail("node" + std::to_string(i) + ": ibv_create_qp failed (errno " + std::to_string(errno) + ")");
            s.qps.push_back(qp);
        }
        ibv_port_attr pa{};
        ibv_query_port(s.ctx, 1, &pa);
        info_[i].lid = pa.lid;
        for (auto* qp : s.qps) info_[i].qpn.push_back(qp->qp_num);
        info_[i].psn = 0x100 * (i + 1) + uint32_t(spec_.seed & 0xFF);
        info_[i].rkey = s.mr->rkey;
        info_[i].addr = s.buf + region;  // peers write into our receive region
        info_[i].ready = true;
        exchanged_.notify(SC_ZERO_TIME);
        while (!info_[1 - i].ready)
            wait(exchanged_);
        const peer_info& peer = info_[1 - i];
        for (unsigned q = 0; q < s.qps.size(); ++q) {
            ibv_qp_attr attr{};
            attr.qp_state = IBV_QPS_INIT;
            attr.pkey_index = 0;
            attr.port_num = 1;
            attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
            int rc = ibv_modify_qp(s.qps[q], &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTR;
            attr.path_mtu = ibv_mtu(__builtin_ctz(spec_.mtu) - 7);
            attr.dest_qp_num = peer.qpn[q];
            attr.rq_psn = peer.psn;
            attr.max_dest_rd_atomic = 0;
            attr.min_rnr_timer = 12;
            attr.ah_attr.dlid = peer.lid;
            attr.ah_attr.port_num = 1;
            rc |= ibv_modify_qp(s.qps[q], &attr,
                                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTS;
            attr.sq_psn = info_[i].psn;
            attr.timeout = 14;
            attr.retry_cnt = 7;
            attr.rnr_retry = 7;
            attr.max_rd_atomic = 0;
            rc |= ibv_modify_qp(s.qps[q], &attr,
                                IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                    IBV_QP_MAX_QP_RD_ATOMIC);
            if (rc)
                fail("node" + std::to_string(i) + ": ibv_modify_qp to RTS failed (" + std::to_string(rc) + ")");
            // Every receive consumed later is posted again, so the RQ stays full.
            for (unsigned k = 0; k < wp_.rx_depth; ++k)
                post_recv(i, q, 0);
        }
    }

    unsigned qp_index(unsigned i, uint32_t qpn) const {
        for (unsigned q = 0; q < side_[i].qps.size(); ++q)
            if (side_[i].qps[q]->qp_num == qpn)
                return q;
        return 0;
    }

    uint32_t inline_limit(bool latency) const {
        const int v = wp_.inline_bytes;
        return v >= 0 ? uint32_t(v) : (latency ? 220u : 0u);
    }

    /// Polls `cq` for one completion, sleeping on the CQ when empty; fails the run on error.
    ibv_wc poll_one(unsigned i, ibv_cq* cq) {
        ibv_wc wc{};
        for (;;) {
            const int n = ibv_poll_cq(cq, 1, &wc);
            if (n < 0)
                fail("node" + std::to_string(i) + ": ibv_poll_cq failed");
            if (n == 1) {
                if (wc.status != IBV_WC_SUCCESS)
                    fail("node" + std::to_string(i) + ": completion error status " + std::to_string(wc.status) +
                         " (opcode " + std::to_string(wc.opcode) + ", wr_id " + std::to_string(wc.wr_id) + ")");
                return wc;
            }
            if (ibv_wait_cq(cq, timeout_ns()) != 0)
                fail("node" + std::to_string(i) + ": no completion within workload.timeout_us");
        }
    }

    void post(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t size, uint64_t wr_id, bool signaled, bool inl) {
        side& s = side_[i];
        ibv_sge sge{s.buf, uint32_t(size), s.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = op;
        wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
        wr.wr.rdma.remote_addr = info_[1 - i].addr;
        wr.wr.rdma.rkey = info_[1 - i].rkey;
        ibv_send_wr* bad = nullptr;
        const int rc = ibv_post_send(s.qps[q], &wr, &bad);
        if (rc)
            fail("node" + std::to_string(i) + ": ibv_post_send failed (" + std::to_string(rc) + ")");
    }

    void post_recv(unsigned i, unsigned q, uint64_t size) {
        side& s = side_[i];
        const uint64_t region = s.buf_bytes / 2;
        (void)size;
        ibv_sge sge{s.buf + region, uint32_t(region), s.mr->lkey};
        ibv_recv_wr wr{};
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        const int rc = ibv_post_recv(s.qps[q], &wr, &bad);
        if (rc)
            fail("node" + std::to_string(i) + ": ibv_post_recv failed (" + std::to_string(rc) + ")");
    }

    /// Waits until the byte at our receive region offset `off` equals `v` (perftest's
    /// write_lat spins on the last byte; here the CPU sleeps on the watched address).
    void wait_byte(unsigned i, uint64_t off, uint8_t v) {
        side& s = side_[i];
        uint64_t pa = 0;
        sw_[i]->as.translate(s.buf + s.buf_bytes / 2 + off, &pa);
        for (;;) {
            uint8_t b = 0;
            bus(i).mem_read(pa, &b, 1);
            if (b == v)
                return;
            if (!bus(i).wait_write(pa, 1, timeout_ns()))
                fail("node" + std::to_string(i) + ": RDMA WRITE did not arrive within workload.timeout_us");
        }
    }
    void set_send_byte(unsigned i, uint64_t off, uint8_t v) {
        side& s = side_[i];
        sw_[i]->as.write(s.buf + off, &v, 1);
        bus(i).cpu_cost(cpu_op::memcpy_64b);
    }

    bool verify(uint64_t size) {
        // Every byte of the client's send region landed in the server's receive region.
        std::vector<uint8_t> a(size), b(size);
        side& c = side_[0];
        side& s = side_[1];
        sw_[0]->as.read(c.buf, a.data(), size);
        sw_[1]->as.read(s.buf + s.buf_bytes / 2, b.data(), size);
        return a == b;
    }

    // ------------------------------------------------------------------ phases
    void lat_phase(unsigned i, const phase_spec& ph, bool write, run_report& rep) {
        const bool client = i == 0;
        for (uint64_t size : ph.sizes) {
            const bool inl = size <= inline_limit(true);
            const uint64_t last = size ? size - 1 : 0;
            std::vector<double> samples;
            samples.reserve(ph.iters);
            bar_.arrive();
            for (uint64_t it = 0; it < ph.iters; ++it) {
                const uint8_t v = uint8_t(1 + (it % 254));
                if (client) {
                    const uint64_t t0 = bus(i).now_ns();
                    if (write) {
                        set_send_byte(i, last, v);
                        post(i, 0, IBV_WR_RDMA_WRITE, size, it, true, inl);
                        wait_byte(i, last, v);
                    } else {
                        post(i, 0, IBV_WR_SEND, size, it, true, inl);
                        poll_one(i, side_[i].rcq);
                        post_recv(i, 0, size);
                    }
                    samples.push_back(to_us(bus(i).now_ns() - t0) / 2.0);
                    poll_one(i, side_[i].scq);
                } else {
                    if (write) {
                        wait_byte(i, last, v);
                        set_send_byte(i, last, v);
                        post(i, 0, IBV_WR_RDMA_WRITE, size, it, true, inl);
                    } else {
                        poll_one(i, side_[i].rcq);
                        post(i, 0, IBV_WR_SEND, size, it, true, inl);  // answer first, like perftest
                        post_recv(i, 0, size);
                    }
                    poll_one(i, side_[i].scq);
                }
            }
            bar_.arrive();
            if (client) {
                size_result r = latency_stats(size, samples);
                r.iters = ph.iters;
                rep.results.push_back(r);
            }
            bar_.arrive();
        }
    }

    void bw_phase(unsigned i, const phase_spec& ph, bool write, run_report& rep) {
        const bool client = i == 0;
        side& s = side_[i];
        const unsigned nq = unsigned(s.qps.size());
        for (uint64_t size : ph.sizes) {
            const bool inl = size <= inline_limit(false);
            uint64_t recv_done = 0;
            bar_.arrive();
            if (client) {
                const unsigned depth = wp_.tx_depth;
                const unsigned cq_mod = std::min<unsigned>(wp_.cq_mod, depth);
                std::vector<uint64_t> posted(nq, 0), completed(nq, 0);
                const uint64_t t0 = bus(i).now_ns();
                uint64_t total_posted = 0, total_completed = 0;
                while (total_completed < ph.iters) {
                    // WR n goes to QP n mod nq; each QP signals every cq_mod-th WR and its last.
                    bool progress = false;
                    while (total_posted < ph.iters) {
                        const unsigned q = unsigned(total_posted % nq);
                        if (posted[q] - completed[q] >= depth)
                            break;
                        const uint64_t quota = ph.iters / nq + (q < ph.iters % nq ? 1 : 0);
                        const bool sig = (posted[q] + 1) % cq_mod == 0 || posted[q] + 1 == quota;
                        post(i, q, write ? IBV_WR_RDMA_WRITE : IBV_WR_SEND, size, (uint64_t(q) << 48) | posted[q], sig, inl);
                        ++posted[q];
                        ++total_posted;
                        progress = true;
                    }
                    ibv_wc wcs[16];
                    int n = ibv_poll_cq(s.scq, 16, wcs);
                    if (n < 0)
                        fail("node0: ibv_poll_cq failed");
                    for (int k = 0; k < n; ++k) {
                        if (wcs[k].status != IBV_WC_SUCCESS)
                            fail("node0: completion error status " + std::to_string(wcs[k].status));
                        const unsigned q = unsigned(wcs[k].wr_id >> 48);
                        const uint64_t idx = wcs[k].wr_id & ((uint64_t(1) << 48) - 1);
                        total_completed += idx + 1 - completed[q];
                        completed[q] = idx + 1;
                    }
                    if (n == 0 && !progress && ibv_wait_cq(s.scq, timeout_ns()) != 0)
                        fail("node0: bandwidth test stalled (no completion within workload.timeout_us)");
                }
                const uint64_t t1 = bus(i).now_ns();
                size_result r;
                r.size_bytes = size;
                r.iters = ph.iters;
                const double secs = double(t1 - t0) * 1e-9;
                r.bw_gbps = secs > 0 ? double(size) * double(ph.iters) * 8.0 / secs / 1e9 : 0;
                r.msg_rate_mpps = secs > 0 ? double(ph.iters) / secs / 1e6 : 0;
                rep.results.push_back(r);
            } else if (!write) {
                while (recv_done < ph.iters) {
                    const ibv_wc wc = poll_one(i, s.rcq);
                    ++recv_done;
                    post_recv(i, qp_index(i, wc.qp_num), size);
                }
            }
            bar_.arrive();
            if (client && !verify(size)) {
                verified_all = false;
                fail("data check failed: " + std::to_string(size) + " bytes at the server differ from the client's");
            }
            bar_.arrive();
        }
    }

    void run_side(unsigned i) {
        setup(i);
        bar_.arrive();
        for (const phase_spec& ph : spec_.phases) {
            run_report rep;
            rep.workload = ph.workload;
            rep.seed = spec_.seed;
            const uint64_t t0 = bus(i).now_ns();
            const uint64_t p0 = stats_registry::instance().sum("port.tx_packets");
            if (ph.workload == "write_lat") lat_phase(i, ph, true, rep);
            else if (ph.workload == "send_lat") lat_phase(i, ph, false, rep);
            else if (ph.workload == "write_bw") bw_phase(i, ph, true, rep);
            else if (ph.workload == "send_bw") bw_phase(i, ph, false, rep);
            rep.sim_time_ns = bus(i).now_ns() - t0;
            rep.wire_packets = stats_registry::instance().sum("port.tx_packets") - p0;
            if (i == 0)
                out_.push_back(rep);
        }
        bar_.arrive();
        if (i == 0)
            sc_stop();
    }
    void client() { run_side(0); }
    void server() { run_side(1); }

    machine& m_;
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
    std::unique_ptr<host_software> sw_[2];
    side side_[2];
    peer_info info_[2];
    sc_event exchanged_;
    barrier bar_;
    uint64_t max_size_ = 1;
};

/// The PCIe link alone: host memory, the link and a DMA traffic generator in the device's place.
class pcie_bench : public sc_module {
public:
    host_memory memory;
    pcie_link pcie;
    dma_traffic_gen dma;

    // No CPU and no device registers here: the MMIO side of the link ends in stubs.
    tlm_utils::simple_initiator_socket<pcie_bench> cpu_stub;
    tlm_utils::simple_target_socket<pcie_bench> bar0_stub;
    tlm_utils::simple_initiator_socket<pcie_bench> cpu_mem_stub;

    SC_HAS_PROCESS(pcie_bench);
    pcie_bench(sc_module_name name, const run_spec& spec, const workload_params& wp, std::vector<run_report>& out)
        : sc_module(name), memory("memory"), pcie("pcie"), dma("dma"), cpu_stub("cpu_stub"), bar0_stub("bar0_stub"),
          cpu_mem_stub("cpu_mem_stub"), spec_(spec), wp_(wp), out_(out) {
        pcie.upstream_out.bind(memory.dma);
        dma.out.bind(pcie.upstream_in);
        cpu_stub.bind(pcie.downstream_in);
        pcie.downstream_out.bind(bar0_stub);
        cpu_mem_stub.bind(memory.cpu);
        bar0_stub.register_b_transport(this, &pcie_bench::no_device);
        SC_THREAD(run);
    }

private:
    void no_device(tlm::tlm_generic_payload& gp, sc_time&) { gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE); }
    void run() {
        for (const phase_spec& ph : spec_.phases) {
            run_report rep;
            rep.workload = ph.workload;
            rep.seed = spec_.seed;
            const sc_time t0 = sc_time_stamp();
            for (uint64_t size : ph.sizes) {
                dma.start(ph.workload == "dma_write_bw", 0x100000000ull, size, ph.iters, wp_.dma_outstanding);
                wait(dma.done_event());
                size_result r;
                r.size_bytes = size;
                r.iters = ph.iters;
                r.bw_gbps = dma.bandwidth_gbps();
                const double secs = (dma.last_completion() - dma.first_issue()).to_seconds();
                r.msg_rate_mpps = secs > 0 ? double(ph.iters) / secs / 1e6 : 0;
                rep.results.push_back(r);
            }
            rep.sim_time_ns = uint64_t((sc_time_stamp() - t0).to_seconds() * 1e9 + 0.5);
            out_.push_back(rep);
        }
        sc_stop();
    }
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
};

}  // namespace

std::vector<run_report> run(const run_spec& spec, std::vector<param_info>* help_out) {
    std::vector<run_report> reports;
    bool pcie_only = !spec.phases.empty();
    for (auto& p : spec.phases) pcie_only &= is_pcie_workload(p.workload);
    for (auto& p : spec.phases)
        if (!pcie_only && is_pcie_workload(p.workload))
            throw workload_error("dma_*_bw workloads run the PCIe link alone and cannot share a run with '" +
                                 spec.phases.front().workload + "'");
    workload_params wp;
    std::unique_ptr<machine> m;
    std::unique_ptr<perftest> app;
    std::unique_ptr<pcie_bench> bench;
    if (pcie_only) {
        bench = std::make_unique<pcie_bench>("node0", spec, wp, reports);
    } else {
        m = std::make_unique<machine>();
        if (m->size() < 2)
            throw workload_error("two-node workloads need fabric.nodes >= 2");
        app = std::make_unique<perftest>("perftest", *m, spec, wp, reports);
    }
    if (help_out) {
        *help_out = broker::instance().help();
        return reports;
    }
    broker::instance().check_unused();
    const auto wall0 = std::chrono::steady_clock::now();
    sc_start();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (app && !app->error.empty()) {
        if (std::getenv("HCASIM_DUMP_COUNTERS"))
            for (const counter* c : stats_registry::instance().counters())
                if (c->value())
                    std::cerr << c->key() << " = " << c->value() << "\n";
        throw workload_error(app->error);
    }
    if (reports.size() != spec.phases.size())
        throw workload_error("simulation ended before every phase completed");
    for (auto& r : reports)
        r.wall_s = wall;  // the whole run's wall time (phases share one simulation)
    if (!reports.empty()) {
        for (const counter* c : stats_registry::instance().counters())
            reports.front().counters.emplace_back(c->key(), c->value());
        for (const param_base* p : broker::instance().params())
            reports.front().config.emplace_back(p->key(), p->str());
    }
    return reports;
}

}  // namespace hcasim
