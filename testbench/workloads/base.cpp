// The workload framework: the perftest application's construction and setup (device, buffers,
// CQs, QPs, the out-of-band exchange, connection), the registry of its phases, posting and
// polling, the bandwidth phase's frame (each family supplies its steps) and the run of one side.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>

#include "testbench/workloads/base.h"

namespace hcasim {

bool is_pcie_workload(const std::string& n) { return n == "dma_read_bw" || n == "dma_write_bw"; }
bool is_srq_workload(const std::string& n) { return n == "srq_bw" || n == "ud_srq_bw"; }

namespace workloads {

std::string status_name(ibv_wc_status st) {
    static const char* const names[] = {"IBV_WC_SUCCESS",           "IBV_WC_LOC_LEN_ERR",
                                        "IBV_WC_LOC_QP_OP_ERR",     "IBV_WC_LOC_EEC_OP_ERR",
                                        "IBV_WC_LOC_PROT_ERR",      "IBV_WC_WR_FLUSH_ERR",
                                        "IBV_WC_MW_BIND_ERR",       "IBV_WC_BAD_RESP_ERR",
                                        "IBV_WC_LOC_ACCESS_ERR",    "IBV_WC_REM_INV_REQ_ERR",
                                        "IBV_WC_REM_ACCESS_ERR",    "IBV_WC_REM_OP_ERR",
                                        "IBV_WC_RETRY_EXC_ERR",     "IBV_WC_RNR_RETRY_EXC_ERR",
                                        "IBV_WC_LOC_RDD_VIOL_ERR",  "IBV_WC_REM_INV_RD_REQ_ERR",
                                        "IBV_WC_REM_ABORT_ERR",     "IBV_WC_INV_EECN_ERR",
                                        "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
                                        "IBV_WC_RESP_TIMEOUT_ERR",  "IBV_WC_GENERAL_ERR"};
    const unsigned i = unsigned(st);
    return (i < sizeof names / sizeof names[0] ? names[i] : "unknown") + std::string(" (status ") +
           std::to_string(i) + ")";
}

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

// ------------------------------------------------------------------ the registry

const perftest::phase_entry& perftest::phase_of(const std::string& workload) {
    static const phase_entry table[] = {
        {"write_lat", op_kind::write, &perftest::lat_phase},
        {"send_lat", op_kind::send, &perftest::lat_phase},
        {"read_lat", op_kind::read, &perftest::lat_phase},
        {"atomic_lat", op_kind::atomic, &perftest::lat_phase},
        {"ud_send_lat", op_kind::send, &perftest::lat_phase},
        {"write_bw", op_kind::write, &perftest::bw_phase},
        {"send_bw", op_kind::send, &perftest::bw_phase},
        {"read_bw", op_kind::read, &perftest::bw_phase},
        {"atomic_rate", op_kind::atomic, &perftest::bw_phase},
        {"ud_send_bw", op_kind::send, &perftest::bw_phase},
        {"uc_write_bw", op_kind::write, &perftest::bw_phase},
        {"mcast_bw", op_kind::send, &perftest::bw_phase},
        {"srq_bw", op_kind::send, &perftest::bw_phase},
        {"ud_srq_bw", op_kind::send, &perftest::bw_phase},
        {"rd_send_lat", op_kind::send, &perftest::lat_phase},
        {"rd_send_bw", op_kind::send, &perftest::bw_phase},
        {"mr_scale", op_kind::write, &perftest::mr_phase},
    };
    static const phase_entry other = {"", op_kind::write, &perftest::bw_phase};
    for (const phase_entry& e : table)
        if (workload == e.name) return e;
    return other;
}

bool perftest::is_latency(const std::string& workload) {
    return phase_of(workload).run == &perftest::lat_phase;
}

// ------------------------------------------------------------------ construction

perftest::perftest(sc_module_name name, machine& m, const run_spec& spec, const workload_params& wp,
                   std::vector<run_report>& out, const std::vector<uint64_t>& mrs)
    : sc_module(name), m_(m), spec_(spec), wp_(wp), out_(out), mrs_(mrs), meter_(spec) {
    fw::driver_options opts;
    // The driver's QP table holds the run's QPs (and the special QPs and a few spare).
    opts.log_num_qps = uint8_t(std::max<unsigned>(opts.log_num_qps, ceil_log2(uint64_t(spec.qps) + 16)));
    for (const phase_spec& p : spec.phases)
        if (p.workload == "mr_scale") mr_scale_init(p, opts);
    mcast_ = !spec.phases.empty() && spec.phases.front().workload == "mcast_bw";
    srq_ = !spec.phases.empty() && is_srq_workload(spec.phases.front().workload);
    if (srq_) find_srq_counters();
    find_busy_counters();
    nn_ = mcast_ ? unsigned(m.size()) : 2;
    bar_.parties = nn_;
    sw_.resize(nn_);
    side_.resize(nn_);
    info_.resize(nn_);
    received_.resize(nn_);
    for (unsigned i = 0; i < nn_; ++i) sw_[i] = std::make_unique<host_software>(m.at(i), opts);
    size_buffers();
    SC_THREAD(client);
    SC_THREAD(server);
    for (unsigned i = 2; i < nn_; ++i)  // mcast_bw: the other receivers
        receivers_.push_back(std::make_unique<node_process<perftest>>(
            ("receiver" + std::to_string(i)).c_str(), *this, &perftest::run_side, i));
}

/// The units' busy counters of node0 and node1, read around each bandwidth size.
void perftest::find_busy_counters() {
    static const char* const busy[][2] = {{"link tx", ".hca.port.tx_busy_ps"},
                                          {"PCIe up", ".pcie.upstream_busy_ps"},
                                          {"PCIe down", ".pcie.downstream_busy_ps"},
                                          {"requester", ".hca.transport_engine.tx_busy_ps"},
                                          {"responder", ".hca.transport_engine.rx_busy_ps"},
                                          {"responses", ".hca.transport_engine.resp_busy_ps"},
                                          {"WQE fetcher", ".hca.wqe_fetcher.busy_ps"},
                                          {"CQ writer", ".hca.cq_writer.busy_ps"}};
    for (unsigned i = 0; i < std::min<size_t>(2, m_.size()); ++i)
        for (const auto& b : busy)
            if (const counter* c = stats_registry::instance().find(std::string(m_.at(i).name()) + b[1]))
                busy_.push_back({"node" + std::to_string(i) + " " + b[0], c});
}

/// What the phases need of the QPs (READ, atomics, receives), the transport, and the size of a
/// send or receive area (the largest message; UD: and the GRH area before it).
void perftest::size_buffers() {
    uint64_t max_size = 1;
    for (const phase_spec& p : spec_.phases) {
        for (uint64_t s : p.sizes) max_size = std::max(max_size, s);
        const op_kind k = phase_of(p.workload).op;
        if (k == op_kind::read || k == op_kind::atomic) {
            needs_rd_ = true;
            if (rd_workload_.empty()) rd_workload_ = p.workload;
        }
        needs_atomic_ |= k == op_kind::atomic;
        needs_recv_ |= k == op_kind::send;
    }
    nq_ = spec_.qps;
    nt_ = spec_.threads;
    const unsigned cores = m_.at(0).cpu.cores;
    if (nt_ > cores)
        throw config_error("--threads " + std::to_string(nt_) + ": more than node0.cpu.cores (" +
                           std::to_string(cores) + "); each application thread runs on a core of its own");
    if (nt_ > nq_)
        throw config_error("--threads " + std::to_string(nt_) + " with --qps " + std::to_string(nq_) +
                           ": each application thread needs a QP of its own");
    tr_ = spec_.phases.empty() ? transport::rc : transport_of(spec_.phases.front().workload);
    area_ = std::max<uint64_t>(max_size, 4096);
    if (needs_atomic_)  // atomic_rate: one 8-byte fetched-value slot per outstanding atomic
        area_ = std::max<uint64_t>(area_, uint64_t(wp_.tx_depth) * 8);
    if (tr_ == transport::ud) {
        // The GRH area before the payload; areas stay page multiples.
        area_ = (max_size + grh_bytes + 4095) / 4096 * 4096;
        // ud_send_bw: node1 holds a receive for every message of a QP and its marker, so none
        // is dropped for want of a receive WQE (UD has no RNR NAK to slow the sender).
        for (const phase_spec& p : spec_.phases)
            if (!is_latency(p.workload)) ud_rq_need_ = std::max(ud_rq_need_, (p.iters + nq_ - 1) / nq_ + 1);
        // ud_srq_bw: the SRQ holds every datagram of a size and every marker.
        for (const phase_spec& p : spec_.phases)
            if (srq_) ud_srq_need_ = std::max(ud_srq_need_, p.iters + nq_);
    }
    // Each node's buffer holds a send and a receive area per QP (setup()): refused now if it
    // cannot fit the host memory its application has, not after backing all of that memory.
    const uint64_t buffers = 2 * uint64_t(nq_) * area_;
    if (buffers > host_software::phys_bytes)
        throw config_error("--size " + std::to_string(max_size) + " with --qps " + std::to_string(nq_) +
                           ": each node's buffers would take " + std::to_string(buffers) +
                           " bytes (a send and a receive area per QP), more than the " +
                           std::to_string(host_software::phys_bytes) +
                           " bytes of host memory its application has");
}

// ------------------------------------------------------------------ setup

/// Node i's verbs objects, in the order perftest makes them, and the QPs connected to the peer's.
void perftest::setup(unsigned i) {
    const std::string node = "node" + std::to_string(i);
    open_device(i, node);
    const rd_limits rd = rd_access(i, node);
    const unsigned rcq_entries = size_receives(i, node);
    alloc_buffers(i, node, rd.access);
    create_cqs(i, node, rcq_entries);
    if (tr_ == transport::rd) create_rd_domain(i, node);
    if (side_[i].srq_slots) create_srq(i, node);
    create_qps(i, node);
    exchange_info(i, node);
    connect_qps(i, node, rd);
    if (side_[i].srq) post_srq_slots(i);
}

void perftest::open_device(unsigned i, const std::string& node) {
    side& s = side_[i];
    host_software& sw = *sw_[i];
    s.ctx = ibv_open_device(sw.driver, sw.as);
    if (!s.ctx) fail(node + ": ibv_open_device failed: " + sw.driver.last_error());
    ibv_device_attr dev{};
    if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
    if (uint64_t(dev.max_qp) < nq_)
        fail("--qps " + std::to_string(nq_) + ": " + node + "'s HCA holds " + std::to_string(dev.max_qp) +
             " QPs (raise hca.max_qps, e.g. --set hca.max_qps=" +
             std::to_string(uint64_t(1) << ceil_log2(uint64_t(nq_) + 16)) + ")");
}

/// READ and atomics: as many outstanding as the device allows (perftest's default).
perftest::rd_limits perftest::rd_access(unsigned i, const std::string& node) {
    side& s = side_[i];
    rd_limits rd;
    rd.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (!needs_rd_) return rd;
    ibv_device_attr dev{};
    if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
    if (dev.max_qp_rd_atom <= 0 || dev.max_qp_init_rd_atom <= 0)
        fail(rd_workload_ + " needs RDMA READ/atomic support, but " + node +
             "'s HCA reports max_qp_rd_atom " + std::to_string(dev.max_qp_rd_atom) +
             " and max_qp_init_rd_atom " + std::to_string(dev.max_qp_init_rd_atom) + " (ibv_query_device)");
    if (needs_atomic_ && dev.atomic_cap == IBV_ATOMIC_NONE)
        fail("atomic workloads need atomics, but " + node +
             "'s HCA reports atomic_cap IBV_ATOMIC_NONE (ibv_query_device)");
    rd.max_rd = uint8_t(std::min(dev.max_qp_init_rd_atom, 255));
    rd.max_dest_rd = uint8_t(std::min(dev.max_qp_rd_atom, 255));
    rd.access |= IBV_ACCESS_REMOTE_READ | (needs_atomic_ ? IBV_ACCESS_REMOTE_ATOMIC : 0);
    return rd;
}

/// The receives node i keeps posted per QP (s.rq_depth; srq_*: the SRQ's, srq_size) and the
/// receive CQ's size, which it returns.
unsigned perftest::size_receives(unsigned i, const std::string& node) {
    side& s = side_[i];
    // ud_send_bw: node1's receive queues hold every message of a size (ud_rq_need_), as far as
    // the device's queue and CQ sizes allow; otherwise perftest's rx_depth.
    // srq_bw: node1's QPs use the SRQ, node0 receives nothing. RC WRITE, READ and atomic runs
    // consume no receive WQEs: none are posted (as perftest's), which keeps runs with many QPs
    // from filling host memory with receive rings.
    s.rq_depth = srq_ || (tr_ == transport::rc && !needs_recv_) ? 0 : wp_.rx_depth;
    unsigned rcq_entries = wp_.rx_depth * 2;
    if (nq_ > 2 && !srq_) {
        // One receive CQ for every QP's rx_depth receives: a server that polls slower than
        // the messages arrive must not overrun it (the completions would be lost).
        ibv_device_attr dev{};
        if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
        rcq_entries = unsigned(std::min<uint64_t>(uint64_t(wp_.rx_depth) * nq_, uint64_t(dev.max_cqe)));
    }
    if (srq_ && i == 1)
        rcq_entries = srq_size(i, node);
    else if (ud_rq_need_ && i >= 1 && !srq_) {
        ibv_device_attr dev{};
        if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
        const uint64_t cap = std::min<uint64_t>(uint64_t(dev.max_qp_wr), uint64_t(dev.max_cqe) / nq_);
        s.rq_depth = unsigned(std::max<uint64_t>(wp_.rx_depth, std::min(ud_rq_need_, cap)));
        rcq_entries = unsigned(std::min<uint64_t>(uint64_t(s.rq_depth) * nq_, uint64_t(dev.max_cqe)));
    }
    return rcq_entries;
}

/// The PD and node i's one buffer (a send and a receive area per QP, then the SRQ's slots),
/// registered as one MR.
void perftest::alloc_buffers(unsigned i, const std::string& node, int access) {
    side& s = side_[i];
    host_software& sw = *sw_[i];
    sc_time t0 = sc_time_stamp();  // --record: each call's issue time
    s.pd = ibv_alloc_pd(s.ctx);
    if (rec_ && s.pd) rec_->call(i, "alloc_pd", {{"ret", rec_->add(i, s.pd, "pd")}}, t0);
    s.buf_bytes = (2 * uint64_t(nq_) + s.srq_slots) * area_;
    t0 = sc_time_stamp();
    s.buf = sw.as.alloc(s.buf_bytes, 4096);
    if (rec_)
        rec_->call(i, "alloc",
                   {{"len", s.buf_bytes}, {"align", 4096}, {"ret", rec_->add_buffer(i, s.buf, s.buf_bytes)}},
                   t0);
    t0 = sc_time_stamp();
    // The buffer fits host memory (checked with the options), so this fails only if alloc did.
    if (!sw.as.fill(s.buf, area_, uint8_t(0x40 + i))) fail(node + ": its buffer is not mapped");
    if (rec_) rec_->call(i, "fill", {{"buf", "buf0"}, {"len", area_}, {"seed", 0x40 + i}}, t0);
    t0 = sc_time_stamp();
    s.mr = ibv_reg_mr(s.pd, s.buf, s.buf_bytes, access);
    if (rec_ && s.mr) {
        rec_->add_mr(i, s.mr, "mr0");
        rec_->call(i, "reg_mr",
                   {{"pd", "pd0"},
                    {"buf", "buf0"},
                    {"len", s.buf_bytes},
                    {"access", trace::access_flags(unsigned(access))},
                    {"ret", "mr0"},
                    {"lkey", s.mr->lkey},
                    {"rkey", s.mr->rkey}},
                   t0);
    }
    if (!s.pd || !s.mr) fail(node + ": PD/MR setup failed");
}

/// The send and the receive CQ every QP of node i shares.
void perftest::create_cqs(unsigned i, const std::string& node, unsigned rcq_entries) {
    side& s = side_[i];
    unsigned scq_entries = wp_.tx_depth * 2;
    if (nq_ > 2) {
        // Signaled sends of every QP may wait in the send CQ together (as the receive CQ).
        ibv_device_attr dev{};
        if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
        scq_entries = unsigned(std::min<uint64_t>(uint64_t(wp_.tx_depth) * nq_, uint64_t(dev.max_cqe)));
    }
    const sc_time t0 = sc_time_stamp();
    s.scq = ibv_create_cq(s.ctx, int(scq_entries));
    const sc_time t1 = sc_time_stamp();
    s.rcq = ibv_create_cq(s.ctx, int(rcq_entries));
    if (rec_ && s.scq && s.rcq) {
        rec_->call(i, "create_cq", {{"cqe", scq_entries}, {"ret", rec_->add(i, s.scq, "cq")}}, t0);
        rec_->call(i, "create_cq", {{"cqe", rcq_entries}, {"ret", rec_->add(i, s.rcq, "cq")}}, t1);
    }
    if (!s.scq || !s.rcq) fail(node + ": CQ creation failed");
    if (i == 0 && nt_ > 1) {
        // Each application thread polls a send CQ of its own.
        s.thread_cqs.push_back(s.scq);
        for (unsigned t = 1; t < nt_; ++t) {
            const sc_time tc = sc_time_stamp();
            ibv_cq* cq = ibv_create_cq(s.ctx, int(scq_entries));
            if (!cq) fail(node + ": CQ creation failed");
            if (rec_) rec_->call(i, "create_cq", {{"cqe", scq_entries}, {"ret", rec_->add(i, cq, "cq")}}, tc);
            s.thread_cqs.push_back(cq);
        }
    }
}

/// Node i's --qps QPs of the run's transport (srq_*: attached to the SRQ).
void perftest::create_qps(unsigned i, const std::string& node) {
    side& s = side_[i];
    for (unsigned q = 0; q < nq_; ++q) {
        ibv_qp_init_attr a{};
        a.send_cq = send_cq(i, q);
        a.recv_cq = s.rcq;
        a.qp_type = tr_ == transport::ud   ? IBV_QPT_UD
                    : tr_ == transport::uc ? IBV_QPT_UC
                    : tr_ == transport::rd ? IBV_QPT_RD
                                           : IBV_QPT_RC;
        a.rdd = s.rdd;
        a.cap.max_send_wr = wp_.tx_depth;
        a.cap.max_recv_wr = std::max(s.rq_depth, 1u);
        a.srq = s.srq;
        a.cap.max_send_sge = 1;
        a.cap.max_recv_sge = 1;
        a.cap.max_inline_data = 220;
        const sc_time t0 = sc_time_stamp();
        ibv_qp* qp = ibv_create_qp(s.pd, &a);
        if (!qp) fail(node + ": ibv_create_qp failed (errno " + std::to_string(errno) + ")");
        if (rec_) {
            const std::string name = "qp" + std::to_string(q);
            rec_->add_qp(i, qp, name);
            trace::json f = {{"pd", "pd0"},
                             {"type", trace::qp_type_name(a.qp_type)},
                             {"send_cq", rec_->name_of(i, a.send_cq)},
                             {"recv_cq", rec_->name_of(i, s.rcq)}};
            if (s.srq) f["srq"] = rec_->name_of(i, s.srq);
            if (s.rdd) f["rdd"] = rec_->name_of(i, s.rdd);
            f["cap"] = {{"max_send_wr", a.cap.max_send_wr},
                        {"max_recv_wr", a.cap.max_recv_wr},
                        {"max_send_sge", 1},
                        {"max_recv_sge", 1},
                        {"max_inline_data", a.cap.max_inline_data}};
            f["ret"] = name;
            f["qp_num"] = qp->qp_num;
            rec_->call(i, "create_qp", f, t0);
        }
        s.qps.push_back(qp);
    }
    s.rq_posted.assign(nq_, 0);
    s.rq_done.assign(nq_, 0);
    s.qp_last_seq.assign(nq_, 0);
}

/// The out-of-band exchange (perftest's TCP connection): node i publishes its LID, QP numbers,
/// PSN, R_Key and areas, then waits for every node taking part to have done so.
void perftest::exchange_info(unsigned i, const std::string& node) {
    side& s = side_[i];
    ibv_port_attr pa{};
    ibv_query_port(s.ctx, 1, &pa);
    if (tr_ == transport::ud) {
        // cli.cpp refused sizes above --mtu; the port's MTU bounds a datagram too.
        const uint64_t port_mtu = uint64_t(128) << unsigned(pa.active_mtu);
        for (const phase_spec& p : spec_.phases)
            for (uint64_t size : p.sizes)
                if (size > port_mtu)
                    fail(node + ": " + p.workload + " " + std::to_string(size) +
                         " B: a UD message must fit one packet, and the port's MTU is " +
                         std::to_string(port_mtu) + " bytes");
    }
    info_[i].lid = pa.lid;
    for (auto* qp : s.qps) info_[i].qpn.push_back(qp->qp_num);
    for (auto* e : s.eecs) info_[i].eecn.push_back(e->eecn);
    info_[i].psn = 0x100 * (i + 1) + uint32_t(spec_.seed & 0xFF);
    info_[i].rkey = s.mr->rkey;
    info_[i].addr = recv_area(i, 0);  // peers write into our receive areas
    info_[i].send_addr = send_area(i, 0);
    info_[i].ready = true;
    exchanged_.notify(SC_ZERO_TIME);
    for (unsigned j = 0; j < nn_; ++j)
        while (!info_[j].ready) wait(exchanged_);
}

/// Brings node i's QPs to RTS towards the peer's (mcast_bw receivers: attached to their groups)
/// and posts their receives.
void perftest::connect_qps(unsigned i, const std::string& node, const rd_limits& rd) {
    side& s = side_[i];
    if (tr_ == transport::ud) make_ud_dests(i);
    if (tr_ == transport::rd) connect_eecs(i, node, rd);
    for (unsigned q = 0; q < s.qps.size(); ++q) {
        if (tr_ == transport::rd) {
            connect_rd(i, q, rd.access);
        } else if (tr_ != transport::rc) {
            if (const int rc = connect_unreliable(i, q, rd.access))
                fail(node + ": ibv_modify_qp to RTS failed (" + std::to_string(rc) + ")");
            if (mcast_ && i > 0) attach_mcast(i, node, q);
        } else {
            connect_rc(i, q, rd);
        }
        // Every receive consumed later is posted again, so the RQ stays full.
        for (unsigned k = 0; k < s.rq_depth; ++k) post_recv(i, q);
    }
}

/// ibv_modify_qp, recorded with --record.
int perftest::modify(unsigned i, ibv_qp* qp, ibv_qp_attr& attr, int mask) {
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_modify_qp(qp, &attr, mask);
    if (rec_)
        rec_->call(i, "modify_qp",
                   {{"qp", rec_->name_of(i, qp)}, {"attr", rec_->qp_attr(i, attr, mask)}, {"ret", rc}}, t0);
    return rc;
}

/// QP index of `qpn` on node i, or the QP count if it is not one of ours.
unsigned perftest::qp_index(unsigned i, uint32_t qpn) const {
    for (unsigned q = 0; q < side_[i].qps.size(); ++q)
        if (side_[i].qps[q]->qp_num == qpn) return q;
    return unsigned(side_[i].qps.size());
}

/// The message of a failed completion: status, opcode, wr_id (`wr_id` as the caller prints
/// it) and, when the transport gave up (RETRY_EXC_ERR), what the cables' fault counters say
/// (as the messages of a run that stalled do).
std::string perftest::completion_error(const std::string& node, const ibv_wc& wc,
                                       const std::string& wr_id) const {
    std::string e = node + ": completion error " + status_name(wc.status) + ", opcode " +
                    std::to_string(wc.opcode) + ", wr_id " + wr_id;
    if (wc.status == IBV_WC_RETRY_EXC_ERR) e += cable_faults();
    return e;
}

/// "; cable linkN (its two ports) went down at T us simulated time (P packets lost)" for
/// each cable that went down and lost packets (link.down_at_ns, counter dropped_down),
/// else "; cable linkN (...) lost P packets (drop_rate R)" for those that dropped some;
/// empty if no cable lost anything. Read from the cables' counters and settings (what
/// `--stats-json` shows): which cable a QP's packets took is not asked of the engine.
std::string perftest::cable_faults() const {
    std::string down, lossy;
    char line[160];
    for (unsigned n = 0; n < m_.size(); ++n) {
        // Link N: node N's transmit direction and, through a switch, the switch's output to it.
        unsigned sp = 0;
        const ib_switch* sw = m_.net.switch_toward(n, &sp);
        const fault_injector* dirs[2] = {&m_.at(n).cable.faults, sw ? &sw->faults(sp) : nullptr};
        uint64_t lost_down = 0, dropped = 0;
        for (const fault_injector* f : dirs)
            if (f) {
                lost_down += f->dropped_down.value();
                dropped += f->dropped.value();
            }
        if (!lost_down && !dropped) continue;
        const fault_settings& st = dirs[0]->settings();
        const std::string name =
            "; cable link" + std::to_string(n) + " (node" + std::to_string(n) + ".port1 <-> " +
            (sw ? "switch port " + std::to_string(sp) : "node" + std::to_string(1 - n) + ".port1") + ")";
        if (lost_down) {
            std::snprintf(line, sizeof line, " went down at %.3f us simulated time (%llu packet%s lost)",
                          st.down_at_ns / 1000.0, static_cast<unsigned long long>(lost_down),
                          lost_down == 1 ? "" : "s");
            down += name + line;
        } else {
            std::snprintf(line, sizeof line, " lost %llu packet%s (drop_rate %g)",
                          static_cast<unsigned long long>(dropped), dropped == 1 ? "" : "s", st.drop_rate);
            lossy += name + line;
        }
    }
    return down.empty() ? lossy : down;
}

/// Polls `cq` for one completion, sleeping on the CQ when empty; fails the run on error.
ibv_wc perftest::poll_one(unsigned i, ibv_cq* cq) {
    ibv_wc wc{};
    const sc_time t0 = sc_time_stamp();
    for (;;) {
        const int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) fail("node" + std::to_string(i) + ": ibv_poll_cq failed");
        if (n == 1) {
            if (rec_)
                rec_->call(i, "poll_cq",
                           {{"cq", rec_->name_of(i, cq)},
                            {"ret", 1},
                            {"wc", trace::json::array({rec_->wc(i, wc)})},
                            {"t_done_ps", uint64_t(sc_time_stamp().value())}},
                           t0);
            if (wc.status != IBV_WC_SUCCESS)
                fail(completion_error("node" + std::to_string(i), wc, std::to_string(wc.wr_id)));
            return wc;
        }
        if (ibv_wait_cq(cq, timeout_ns()) != 0)
            fail("node" + std::to_string(i) + ": no completion within workload.timeout_us" +
                 (acked() ? "" : " (UC and UD do not retransmit a lost message)") + cable_faults());
    }
}

/// One send WR on node i's QP q: `local` (length bytes) is the gather source, or the READ /
/// atomic destination; `remote` the peer's address.
void perftest::post(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t local, uint64_t length,
                    uint64_t remote, uint64_t wr_id, bool signaled, bool inl, uint64_t compare_add,
                    uint64_t swap) {
    const unsigned list = wp_.post_list;
    if (list > 1 && i == 0 && q < lists_.size()) {
        // perftest -l: the WR joins the QP's list, posted when full (or by flush_lists).
        pending_list& l = lists_[q];
        const size_t k = l.wrs.size();
        l.sges.push_back(ibv_sge{});  // reserved at the phase start: no reallocation
        l.wrs.push_back(
            make_wr(i, q, op, local, length, remote, wr_id, signaled, inl, compare_add, swap, l.sges[k]));
        if (l.wrs.size() == list) flush_list(i, q);
        return;
    }
    ibv_sge sge{};
    ibv_send_wr wr = make_wr(i, q, op, local, length, remote, wr_id, signaled, inl, compare_add, swap, sge);
    ibv_send_wr* bad = nullptr;
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_post_send(side_[i].qps[q], &wr, &bad);
    if (rec_)
        rec_->call(i, "post_send",
                   {{"qp", rec_->name_of(i, side_[i].qps[q])}, {"wr", rec_->send_wrs(i, &wr)}, {"ret", rc}},
                   t0);
    if (rc) fail("node" + std::to_string(i) + ": ibv_post_send failed (" + std::to_string(rc) + ")");
}

/// Posts QP q's pending list as one ibv_post_send (one doorbell).
void perftest::flush_list(unsigned i, unsigned q) {
    pending_list& l = lists_[q];
    if (l.wrs.empty()) return;
    for (size_t k = 0; k < l.wrs.size(); ++k) l.wrs[k].next = k + 1 < l.wrs.size() ? &l.wrs[k + 1] : nullptr;
    ibv_send_wr* bad = nullptr;
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_post_send(side_[i].qps[q], l.wrs.data(), &bad);
    if (rec_)
        rec_->call(
            i, "post_send",
            {{"qp", rec_->name_of(i, side_[i].qps[q])}, {"wr", rec_->send_wrs(i, l.wrs.data())}, {"ret", rc}},
            t0);
    if (rc)
        fail("node" + std::to_string(i) + ": ibv_post_send of a list of " + std::to_string(l.wrs.size()) +
             " failed (" + std::to_string(rc) + ")");
    l.wrs.clear();
    l.sges.clear();
}

/// One send WR (its one SGE in `sge`, which must outlive the post).
ibv_send_wr perftest::make_wr(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t local, uint64_t length,
                              uint64_t remote, uint64_t wr_id, bool signaled, bool inl, uint64_t compare_add,
                              uint64_t swap, ibv_sge& sge) {
    side& s = side_[i];
    sge = ibv_sge{local, uint32_t(length), s.mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
        wr.wr.atomic.remote_addr = remote;
        wr.wr.atomic.rkey = info_[peer_of(i)].rkey;
        wr.wr.atomic.compare_add = compare_add;
        wr.wr.atomic.swap = swap;
    } else if (tr_ == transport::ud) {
        const ud_dest& d = s.dest[q];
        wr.wr.ud.ah = d.ah;
        wr.wr.ud.remote_qpn = d.qpn;
        wr.wr.ud.remote_qkey = d.qkey;
    } else {
        wr.wr.rdma.remote_addr = remote;
        wr.wr.rdma.rkey = info_[peer_of(i)].rkey;
    }
    if (tr_ == transport::rd) {  // the EE context that carries it, the peer's QP q behind it
        wr.rd.eec = s.eecs[q % s.eecs.size()];
        wr.rd.remote_qpn = info_[peer_of(i)].qpn[q];
        wr.rd.remote_qkey = ud_qkey;
    }
    return wr;
}

/// Posts one receive of QP q's whole receive area; wr_id is the QP's receive sequence number.
void perftest::post_recv(unsigned i, unsigned q) {
    side& s = side_[i];
    ibv_sge sge{recv_area(i, q), uint32_t(area_), s.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = s.rq_posted[q]++;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_post_recv(s.qps[q], &wr, &bad);
    if (rec_)
        rec_->call(i, "post_recv",
                   {{"qp", rec_->name_of(i, s.qps[q])}, {"wr", rec_->recv_wrs(i, &wr)}, {"ret", rc}}, t0);
    if (rc) fail("node" + std::to_string(i) + ": ibv_post_recv failed (" + std::to_string(rc) + ")");
}

/// --record: a poll that returned completions (empty polls are not recorded).
void perftest::record_poll(unsigned i, ibv_cq* cq, const ibv_wc* wcs, int n) {
    if (!rec_ || n <= 0) return;
    trace::json w = trace::json::array();
    for (int k = 0; k < n; ++k) w.push_back(rec_->wc(i, wcs[k]));
    rec_->call(i, "poll_cq",
               {{"cq", rec_->name_of(i, cq)},
                {"ret", n},
                {"wc", w},
                {"t_done_ps", uint64_t(sc_time_stamp().value())}});
}

/// --record: an application store into its buffer, as a fill with the bytes.
void perftest::record_write(unsigned i, uint64_t va, const void* p, size_t n) {
    if (rec_)
        rec_->call(i, "fill", {{"buf", "buf0"}, {"offset", va - side_[i].buf}, {"hex", trace::hex(p, n)}});
}

/// The busy counters (busy_) now.
std::vector<uint64_t> perftest::busy_counts() const {
    std::vector<uint64_t> v;
    v.reserve(busy_.size());
    for (const auto& b : busy_) v.push_back(b.second->value());
    return v;
}

/// Each unit's busy fraction of an interval of `ns` that started at counts `before`.
void perftest::take_util(size_result& r, const std::vector<uint64_t>& before, uint64_t ns) const {
    if (!ns) return;
    for (size_t k = 0; k < busy_.size(); ++k)
        r.util.push_back(
            {busy_[k].first, double(busy_[k].second->value() - before[k]) / (double(ns) * 1000.0)});
}

void perftest::run_side(unsigned i) {
    setup(i);
    m_.wait_programmed();  // fabric.sm.program=smp: no traffic before the SM's sweep
    bar_.arrive();
    uint64_t step = 0;  // numbers the sizes of the whole run (--verify data keys)
    for (size_t phase = 0; phase < spec_.phases.size(); ++phase) {
        const phase_spec& ph = spec_.phases[phase];
        run_report rep;
        rep.workload = ph.workload;
        rep.seed = spec_.seed;
        const uint64_t t0 = bus(i).now_ns();
        const uint64_t p0 = stats_registry::instance().sum("port.tx_packets");
        std::unordered_map<const counter*, uint64_t> c0;
        if (i == 0) c0 = stats_registry::instance().snapshot();
        const auto wall0 = std::chrono::steady_clock::now();  // --speed only; never reaches the model
        const phase_entry& e = phase_of(ph.workload);
        // The client tells the observer; mr_scale prints its own table first, after the run.
        const bool told = i == 0 && e.run != &perftest::mr_phase;
        if (told) meter_.phase_begin(phase, rep);
        (this->*e.run)(i, ph, step, e.op, rep);
        step += ph.sizes.size() * (e.run == &perftest::mr_phase ? mrs_.size() : 1);  // mr_scale: per N
        rep.sim_time_ns = bus(i).now_ns() - t0;
        rep.wire_packets = stats_registry::instance().sum("port.tx_packets") - p0;
        rep.traffic_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
        if (i == 0) {
            rep.measured_counters = stats_registry::instance().changes_since(c0);
            rep.verify_failure = chk_.first_failure;
            chk_.first_failure.clear();
            if (told) meter_.phase_end(rep);
            out_.push_back(rep);
        }
    }
    bar_.arrive();
    if (i == 0) sc_stop();
}

// ------------------------------------------------------------------ the bandwidth phase

/// Every bandwidth workload, size by size: the client prepares the buffers and streams
/// (stream), the server takes what its family receives; then the client's row gets the
/// family's counts and the destinations are checked once more.
void perftest::bw_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep) {
    const bool client = i == 0;
    for (size_t si = 0; si < ph.sizes.size(); ++si) {
        const uint64_t size = ph.sizes[si];
        const uint64_t step = step0 + si;
        if (client) {
            meter_.size_begin(si, ph.iters, "messages", true);
            stream_done_ = 0;
        }
        bw_size b;
        if (client) b = bw_size_start(ph, size, step, op);
        bar_.arrive();
        if (client)
            stream(i, ph, op, b, rep);
        else if (!acked())
            unacked_receive(i, ph, size, step);
        else if (srq_)
            srq_receive(i, ph, size, step);
        else if (op == op_kind::send)
            send_receive(i, ph, size, step);
        bar_.arrive();
        if (client) {
            if (srq_) take_srq_counts(rep.results.back(), b.srq_c0);
            if (tr_ == transport::ud) take_datagram_counts(ph, size, rep.results.back());
            check_destinations(ph, op, b);
            if (spec_.verify) take_counts(rep.results.back());
        }
        bar_.arrive();
        if (client) meter_.row(rep);  // the size ends here: the next one's counters start
    }
}

/// The client, before a size's stream: the remote words of atomics, and with --verify the data
/// to send and cleared destinations.
perftest::bw_size perftest::bw_size_start(const phase_spec& ph, uint64_t size, uint64_t step, op_kind op) {
    const bool v = spec_.verify;
    const unsigned depth = wp_.tx_depth;
    bw_size b;
    b.size = size;
    b.step = step;
    b.inl = (op == op_kind::write || op == op_kind::send) && size <= inline_limit(false);
    b.cas = spec_.atomic == "cmp_swap";
    b.shared = op == op_kind::atomic && wp_.atomic_word.get() == "shared";
    for (unsigned q = 0; q < nq_; ++q) {
        if (op == op_kind::atomic) {
            b.current.push_back(verify::value(key(1, q, step, ~uint64_t(0))));
            poke64(1, recv_area(1, q), b.current.back());
            if (v) clear(0, recv_area(0, q), uint64_t(depth) * 8);
        } else if (v && op == op_kind::read) {
            poke_data(1, send_area(1, q), size, key(1, q, step, 0));
            clear(0, recv_area(0, q), size);
        } else if (v) {
            poke_data(0, send_area(0, q), size, key(0, q, step, 0));
            for (unsigned r = 1; r < nn_; ++r) clear(r, recv_area(r, q), payload_off() + size);
        }
    }
    if (op == op_kind::atomic) b.fetched.assign(uint64_t(nq_) * depth, 0);
    if (b.shared && v) b.shared_ops.reserve(ph.iters);
    stream_end_ns_ = no_time;
    if (srq_) b.srq_c0 = srq_counts();
    if (srq_ && v)  // the SRQ buffers hold no earlier data: a buffer never written is caught
        for (unsigned k = 0; k < side_[1].srq_slots; ++k) clear(1, srq_slot(1, k), payload_off() + size);
    return b;
}

/// After the final completion (UC, UD: after the markers): every QP's destination (or remote
/// value) once more; mcast_bw: at every receiver.
void perftest::check_destinations(const phase_spec& ph, op_kind op, const bw_size& b) {
    const bool v = spec_.verify;
    const uint64_t size = b.size, step = b.step;
    for (unsigned q = 0; q < nq_; ++q) {
        if (quota_of(ph, q) == 0 || srq_)
            continue;  // fewer messages than QPs: this one sent none; srq_*: checked at node1
        if (op == op_kind::atomic) {
            if (v && b.shared && q == 0)
                chk_.shared_word(at(ph, size, 0, 0, 0, ""), b.cas, b.current[0], b.shared_ops,
                                 peek64(1, recv_area(1, 0)));
            else if (v && !b.shared)
                chk_.value(at(ph, size, 1, q, quota_of(ph, q) - 1, "remote value after the last atomic"),
                           peek64(1, recv_area(1, q)), b.current[q]);
        } else if (op == op_kind::read) {
            if (v)
                chk_.bytes(at(ph, size, 0, q, quota_of(ph, q) - 1, "READ destination after the last READ"),
                           peek(0, recv_area(0, q), size), size, key(1, q, step, 0));
            else
                same_bytes(1, send_area(1, q), 0, recv_area(0, q), size);
        } else {
            for (unsigned n = 1; n < nn_; ++n) {
                if (tr_ == transport::ud && !v && received_[n][q] == 0)
                    continue;  // every datagram of this QP lost: reported above, nothing to compare
                if (v)
                    chk_.bytes(at(ph, size, n, q, quota_of(ph, q) - 1, "destination after the last message"),
                               peek(n, recv_area(n, q) + payload_off(), size), size, key(0, q, step, 0));
                else
                    same_bytes(0, send_area(0, q), n, recv_area(n, q) + payload_off(), size);
            }
        }
    }
}

}  // namespace workloads

}  // namespace hcasim
