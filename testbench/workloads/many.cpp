// The many-node workloads: the flows each pattern makes (plan), every node's setup and its one
// loop (post its flows' messages, take every completion of its CQ), and the report: aggregate
// and per-flow throughput, Jain's fairness index, message completion times, the packets the
// fabric dropped and, where the model counts them, the congestion picture.
#include "testbench/workloads/many.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "model/core/stats.h"

namespace hcasim {

bool is_many_node_workload(const std::string& n) {
    return n == "incast" || n == "alltoall" || n == "permutation" || n == "uniform_random" ||
           n == "bisection" || n == "hotspot";
}

namespace workloads {

namespace {

constexpr uint32_t ud_qkey = 0x11111111;  // every UD QP's Q_Key
constexpr uint64_t grh_bytes = 40;        // GRH area before a UD receive buffer's payload

/// SplitMix64: the seeded draws of permutation, uniform_random and hotspot (the same on every
/// platform, unlike std's distributions).
struct draw {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    unsigned below(unsigned n) { return unsigned(next() % n); }
};

const char* transport_name(transport t) {
    return t == transport::ud ? "ud" : t == transport::uc ? "uc" : "rc";
}

/// Which counters count a packet dropped on a data VL, by kind (the kind is what the report
/// shows, summed over every instance): the switches' (no route; credits never drop), the
/// cables' (link.drop_rate, a link down; both directions) and the ports' (bad CRCs, malformed,
/// wrong DLID). Extend this table as the fabric gains drop counters.
struct drop_kind {
    const char* kind;
    const char* suffix;  ///< the counter key ends with this
    const char* within;  ///< and contains this
};
const drop_kind drop_kinds[] = {
    {"switch.dropped_no_route", ".dropped_no_route", "fabric."},
    {"link.dropped", ".link.dropped", ""},
    {"link.dropped", ".dropped", "fabric."},
    {"link.dropped_down", ".link.dropped_down", ""},
    {"link.dropped_down", ".dropped_down", "fabric."},
    {"port.rx_bad_vcrc", ".port.rx_bad_vcrc", ""},
    {"port.rx_bad_icrc", ".port.rx_bad_icrc", ""},
    {"port.rx_malformed", ".port.rx_malformed", ""},
    {"port.rx_bad_dlid", ".port.rx_bad_dlid", ""},
};

bool ends_with(const std::string& s, const char* suffix) {
    const size_t n = std::char_traits<char>::length(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

/// Packets dropped on data VLs so far, per kind (drop_kinds), in the table's order.
std::vector<std::pair<std::string, uint64_t>> data_vl_drops() {
    std::vector<std::pair<std::string, uint64_t>> v;
    for (const drop_kind& k : drop_kinds)
        if (std::none_of(v.begin(), v.end(), [&](const auto& e) { return e.first == k.kind; }))
            v.push_back({k.kind, 0});
    for (const counter* c : stats_registry::instance().counters())
        for (const drop_kind& k : drop_kinds)
            if (ends_with(c->key(), k.suffix) && c->key().find(k.within) != std::string::npos) {
                for (auto& e : v)
                    if (e.first == k.kind) e.second += c->value();
                break;
            }
    return v;
}

/// The congestion tree: the ports with the most PortXmitWait (counters named *xmit_wait or
/// *XmitWait: the HCA ports' and every switch output's), most first, at most `top`; only
/// non-zero ones, so empty when no port waited for credit.
std::vector<std::pair<std::string, uint64_t>> congestion_tree(size_t top) {
    std::vector<std::pair<std::string, uint64_t>> v;
    for (const counter* c : stats_registry::instance().counters())
        if ((ends_with(c->key(), "xmit_wait") || ends_with(c->key(), "XmitWait")) && c->value())
            v.push_back({c->key(), c->value()});
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    if (v.size() > top) v.resize(top);
    return v;
}

/// Congestion control activity (IBA Annex A10): FECN marked, BECN received, CCTI, summed per
/// counter name over the instances (counters named *fecn*, *becn*, *ccti*; one named *max* is
/// the highest instance's value instead). Empty with congestion control off: its counters exist
/// only when fabric.cc.enable is set.
std::vector<std::pair<std::string, uint64_t>> cc_activity() {
    std::vector<std::pair<std::string, uint64_t>> v;
    for (const counter* c : stats_registry::instance().counters()) {
        const std::string& k = c->key();
        const size_t dot = k.rfind('.');
        const std::string name = dot == std::string::npos ? k : k.substr(dot + 1);
        std::string lower = name;
        std::transform(lower.begin(), lower.end(), lower.begin(),
                       [](unsigned char ch) { return std::tolower(ch); });
        if (lower.find("fecn") == std::string::npos && lower.find("becn") == std::string::npos &&
            lower.find("ccti") == std::string::npos)
            continue;
        auto it = std::find_if(v.begin(), v.end(), [&](const auto& e) { return e.first == name; });
        if (it == v.end())
            v.push_back({name, c->value()});
        else if (lower.find("max") != std::string::npos)
            it->second = std::max(it->second, c->value());
        else
            it->second += c->value();
    }
    return v;
}

// ------------------------------------------------------------------ construction and the plan

many_node::many_node(sc_module_name name, machine& m, const run_spec& spec, const workload_params& wp,
                     std::vector<run_report>& out, sim_driver& drv)
    : sc_module(name), m_(m), spec_(spec), wp_(wp), out_(out), drv_(drv), meter_(spec) {
    const phase_spec& ph = spec.phases.front();
    workload_ = ph.workload;
    const std::string& t = wp.transport.get();
    tr_ = t == "ud" ? transport::ud : t == "uc" ? transport::uc : transport::rc;
    nn_ = unsigned(m.size());
    nq_ = spec.qps;
    iters_ = ph.iters;
    if (spec.phases.size() != 1 || ph.sizes.size() != 1)
        throw config_error("--size: " + workload_ + " runs one message size per run (got " +
                           std::to_string(ph.sizes.size()) + ")");
    size_ = ph.sizes.front();
    check();
    plan();
    fw::driver_options opts;
    // Each node's QPs: one per connection end and QP of the pair, with the special QPs and a few spare.
    size_t most = 0;
    std::vector<size_t> ends(nn_, 0);
    for (const connection& c : conns_) {
        ends[c.src] += nq_;
        ends[c.dst] += nq_;
    }
    for (size_t e : ends) most = std::max(most, e);
    opts.log_num_qps = uint8_t(std::max<unsigned>(opts.log_num_qps, ceil_log2(uint64_t(most) + 16)));
    for (unsigned i = 0; i < nn_; ++i) sw_.push_back(std::make_unique<host_software>(m.at(i), opts));
    senders_left_ = nn_;
    // The out-of-band exchanges (each a barrier of every node, workload.barrier_ns): the QPs'
    // numbers and the buffers' keys; the common start; the end.
    const sc_time oob(wp_.barrier_ns.get(), SC_NS);
    exchange_ = drv_.barrier(nn_, oob, [this](const sim_driver::payloads& p) { take_exchange(p); });
    start_ = drv_.barrier(nn_, oob, [this](const sim_driver::payloads&) { start_measuring(); });
    end_ = drv_.barrier(nn_, oob, [this](const sim_driver::payloads&) {
        ended_ = true;
        drv_.stop();
    });
    for (unsigned i = 0; i < nn_; ++i)
        procs_.push_back(std::make_unique<node_process<many_node>>(("node" + std::to_string(i)).c_str(),
                                                                   *this, &many_node::run_node, i));
}

many_node::~many_node() = default;

/// The combinations a workload cannot run: refused before anything is built, naming the key.
void many_node::check() const {
    const std::string nodes = "fabric.nodes=" + std::to_string(nn_) + ": " + workload_;
    if (nn_ < 2) throw config_error(nodes + " needs at least 2 nodes");
    if (workload_ == "bisection" && nn_ % 2)
        throw config_error(nodes + " sends from each half to the other: it needs an even number of nodes");
    if (workload_ == "hotspot" && nn_ < 3)
        throw config_error(
            nodes + " needs at least 3 nodes (the hot node0 and two that send to it and to each other)");
    if (spec_.verify)
        throw config_error("--verify: " + workload_ +
                           " does not check data (a many-node workload counts messages)");
    if (!spec_.record.empty()) throw config_error("--record: " + workload_ + " cannot be recorded");
    if (tr_ == transport::ud && size_ > spec_.mtu)
        throw config_error("--size: " + std::to_string(size_) + " bytes exceeds the MTU (" +
                           std::to_string(spec_.mtu) + " bytes, --mtu): workload.transport=ud sends each " +
                           "message as one datagram");
    if (size_ > host_software::phys_bytes / 4)
        throw config_error(
            "--size " + std::to_string(size_) + ": " + workload_ +
            " keeps a send and a receive area of this size per node, more than its host memory");
}

/// A new connection from src to dst for flow f.
uint32_t many_node::connect(unsigned src, unsigned dst, uint32_t f) {
    connection c;
    c.src = src;
    c.dst = dst;
    c.flow = f;
    conns_.push_back(c);
    return uint32_t(conns_.size() - 1);
}

/// The flows of the workload, their connections and, for a flow without one destination, the
/// connection of each message.
void many_node::plan() {
    auto one = [&](unsigned src, unsigned dst, bool victim = false) {
        flow f;
        f.src = src;
        f.dst = int(dst);
        f.victim = victim;
        f.conn = connect(src, dst, uint32_t(flows_.size()));
        conns_[f.conn].messages = iters_;
        flows_.push_back(std::move(f));
    };
    // A flow whose message m goes to dest(m): one connection per destination it uses.
    auto spread = [&](unsigned src, auto dest) {
        const uint32_t fi = uint32_t(flows_.size());
        flows_.push_back(flow{});
        flows_[fi].src = src;
        std::vector<int> conn_to(nn_, -1);
        std::vector<uint32_t> per(iters_);
        for (uint64_t m = 0; m < iters_; ++m) {
            const unsigned d = dest(m);
            if (conn_to[d] < 0) conn_to[d] = int(connect(src, d, fi));
            per[m] = uint32_t(conn_to[d]);
            ++conns_[per[m]].messages;
        }
        flows_[fi].per_msg = std::move(per);
    };
    draw rng{spec_.seed};
    if (workload_ == "incast") {
        for (unsigned i = 1; i < nn_; ++i) one(i, 0);
    } else if (workload_ == "alltoall") {
        for (unsigned i = 0; i < nn_; ++i)
            for (unsigned k = 1; k < nn_; ++k) one(i, (i + k) % nn_);
    } else if (workload_ == "bisection") {
        for (unsigned i = 0; i < nn_; ++i) one(i, (i + nn_ / 2) % nn_);
    } else if (workload_ == "permutation") {
        // A uniformly drawn derangement: Fisher-Yates, drawn again while a node is its own peer.
        std::vector<unsigned> p(nn_);
        for (bool fixed = true; fixed;) {
            for (unsigned i = 0; i < nn_; ++i) p[i] = i;
            for (unsigned i = nn_ - 1; i > 0; --i) std::swap(p[i], p[rng.below(i + 1)]);
            fixed = false;
            for (unsigned i = 0; i < nn_; ++i) fixed |= p[i] == i;
        }
        for (unsigned i = 0; i < nn_; ++i) one(i, p[i]);
    } else if (workload_ == "uniform_random") {
        for (unsigned i = 0; i < nn_; ++i)
            spread(i, [&](uint64_t) { return (i + 1 + rng.below(nn_ - 1)) % nn_; });
    } else {  // hotspot: node0 is hot
        // Message m of node i's hotspot flow goes to node0 when floor((m + 1) f) passes floor(m f),
        // so exactly floor(iters f) of them do, evenly spread; the others to a drawn non-hot node.
        const double f = wp_.hotspot_fraction.get();
        for (unsigned i = 1; i < nn_; ++i)
            spread(i, [&](uint64_t m) {
                if (uint64_t(double(m + 1) * f) > uint64_t(double(m) * f)) return 0u;
                if (nn_ == 3) return 3 - i;           // the one other non-hot node
                unsigned d = 1 + rng.below(nn_ - 2);  // 1 .. nn_-2, skipping i
                return d >= i ? d + 1 : d;
            });
        // The victims: node i to the next non-hot node, never near node0.
        for (unsigned i = 1; i < nn_; ++i) one(i, i % (nn_ - 1) + 1, true);
    }
    hosts_.resize(nn_);
    for (uint32_t c = 0; c < conns_.size(); ++c) {
        hosts_[conns_[c].src].out.push_back(c);
        hosts_[conns_[c].dst].in.push_back(c);
    }
    for (uint32_t f = 0; f < flows_.size(); ++f) {
        hosts_[flows_[f].src].pending.push_back(f);
        flows_[f].post_ns.assign(iters_, 0);
    }
    outstanding_.assign(conns_.size() * nq_, 0);
    rx_posted_.assign(conns_.size() * nq_, 0);
    rx_done_.assign(conns_.size() * nq_, 0);
}

// ------------------------------------------------------------------ setup

void many_node::fail(const std::string& why) {
    if (error.empty()) {
        error = why;
        sc_stop();
    }
    wait();  // park this process for good
}

/// Node i's device, PD, buffer (send area, receive area), its one CQ and its QPs.
void many_node::setup(unsigned i) {
    host& h = hosts_[i];
    host_software& sw = *sw_[i];
    const std::string node = "node" + std::to_string(i);
    h.ctx = ibv_open_device(sw.driver, sw.as);
    if (!h.ctx) fail(node + ": ibv_open_device failed: " + sw.driver.last_error());
    ibv_device_attr dev{};
    if (ibv_query_device(h.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
    const uint64_t qps = (h.out.size() + h.in.size()) * nq_;
    if (uint64_t(dev.max_qp) < qps)
        fail(workload_ + " with --qps " + std::to_string(nq_) + ": " + node + " needs " +
             std::to_string(qps) + " QPs and its HCA holds " + std::to_string(dev.max_qp) +
             " (raise hca.max_qps, e.g. --set hca.max_qps=" +
             std::to_string(uint64_t(1) << ceil_log2(qps + 16)) + ")");
    // Receives kept posted per receiving QP (UC, UD): the messages it takes, at most rx_depth.
    uint64_t cqe = h.out.size() * nq_ * wp_.tx_depth;
    if (tr_ != transport::rc)
        for (uint32_t c : h.in)
            for (unsigned q = 0; q < nq_; ++q)
                cqe += std::min<uint64_t>(wp_.rx_depth, conns_[c].messages / nq_ + 1);
    if (cqe > uint64_t(dev.max_cqe))
        fail(node + " needs a CQ of " + std::to_string(cqe) + " entries (workload.tx_depth per sending QP, " +
             "workload.rx_depth per receiving QP), more than hca.max_cqe (" + std::to_string(dev.max_cqe) +
             ")");
    h.pd = ibv_alloc_pd(h.ctx);
    h.area = (size_ + grh_bytes + 4095) / 4096 * 4096;
    h.buf = sw.as.alloc(2 * h.area, 4096);
    if (!h.pd || !sw.as.fill(h.buf, h.area, uint8_t(0x40 + i))) fail(node + ": PD or buffer setup failed");
    h.mr = ibv_reg_mr(h.pd, h.buf, 2 * h.area, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    h.cq = ibv_create_cq(h.ctx, int(std::max<uint64_t>(cqe, 1)));
    if (!h.mr || !h.cq) fail(node + ": MR or CQ setup failed");
    create_qps(i);
}

void many_node::create_qps(unsigned i) {
    host& h = hosts_[i];
    auto make = [&](bool sending, uint64_t rq) {
        ibv_qp_init_attr a{};
        a.send_cq = a.recv_cq = h.cq;
        a.qp_type = tr_ == transport::ud ? IBV_QPT_UD : tr_ == transport::uc ? IBV_QPT_UC : IBV_QPT_RC;
        a.cap.max_send_wr = sending ? wp_.tx_depth : 1;
        a.cap.max_recv_wr = unsigned(std::max<uint64_t>(rq, 1));
        a.cap.max_send_sge = a.cap.max_recv_sge = 1;
        ibv_qp* qp = ibv_create_qp(h.pd, &a);
        if (!qp)
            fail("node" + std::to_string(i) + ": ibv_create_qp failed (errno " + std::to_string(errno) + ")");
        return qp;
    };
    for (uint32_t c : h.out)
        for (unsigned q = 0; q < nq_; ++q) conns_[c].tx.push_back(make(true, 1));
    for (uint32_t c : h.in)
        for (unsigned q = 0; q < nq_; ++q) {
            conns_[c].rx.push_back(make(false, tr_ == transport::rc ? 1 : wp_.rx_depth));
            h.rx_qp[conns_[c].rx.back()->qp_num] = c * nq_ + q;
        }
}

/// Reset -> RTS of node i's QP towards `peer`'s QP `peer_qpn` (UD: the Q_Key only).
void many_node::bring_up(unsigned i, ibv_qp* qp, unsigned peer, uint32_t peer_qpn) {
    const bool ud = tr_ == transport::ud, rc = tr_ == transport::rc;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    a.qkey = ud_qkey;
    int r = ibv_modify_qp(
        qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = ibv_mtu(__builtin_ctz(spec_.mtu) - 7);
    a.dest_qp_num = peer_qpn;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = m_.lid_of(peer);
    a.ah_attr.port_num = 1;
    const int path = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
    r |= ibv_modify_qp(
        qp, &a, IBV_QP_STATE | (ud ? 0 : path) | (rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    r |= ibv_modify_qp(
        qp, &a,
        IBV_QP_STATE | IBV_QP_SQ_PSN |
            (rc ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC : 0));
    if (r) fail("node" + std::to_string(i) + ": ibv_modify_qp to RTS failed (" + std::to_string(r) + ")");
}

/// One receive of node i's receiving QP `slot` (connection * qps + QP) into the receive area.
void many_node::post_recv(unsigned i, uint32_t slot) {
    host& h = hosts_[i];
    ibv_sge sge{h.buf + h.area, uint32_t(h.area), h.mr->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (ibv_post_recv(conns_[slot / nq_].rx[slot % nq_], &wr, &bad) != 0)
        fail("node" + std::to_string(i) + ": ibv_post_recv failed");
    ++rx_posted_[slot];
}

// ------------------------------------------------------------------ the run of one node

void many_node::run_node(unsigned i) {
    if (!m_.owns_host(i)) return;  // another rank's
    setup(i);
    m_.wait_programmed();  // fabric.sm.program=smp: no traffic before the SM's sweep
    // The out-of-band exchange: every node's QPs exist before any is connected.
    drv_.arrive(exchange_, i, exchange_payload(i));
    host& h = hosts_[i];
    for (uint32_t c : h.out) {
        connection& k = conns_[c];
        for (unsigned q = 0; q < nq_; ++q) bring_up(i, k.tx[q], k.dst, k.rx_qpn[q]);
        if (tr_ == transport::ud) {
            ibv_ah_attr a{};
            a.dlid = m_.lid_of(k.dst);
            a.port_num = 1;
            k.ah = ibv_create_ah(h.pd, &a);
            if (!k.ah) fail("node" + std::to_string(i) + ": ibv_create_ah failed");
        }
    }
    for (uint32_t c : h.in) {
        connection& k = conns_[c];
        for (unsigned q = 0; q < nq_; ++q) {
            bring_up(i, k.rx[q], k.src, k.tx_qpn[q]);
            if (tr_ == transport::rc) continue;
            const uint64_t want = k.messages / nq_ + (q < k.messages % nq_ ? 1 : 0);
            h.expected += want;
            for (uint64_t n = 0; n < std::min<uint64_t>(want, wp_.rx_depth); ++n) post_recv(i, c * nq_ + q);
        }
    }
    drv_.arrive(start_, i, {});
    traffic(i);
    drv_.arrive(end_, i, {});
}

/// What node i tells the others: its buffer, its R_Key, its QPs' numbers (sending, receiving).
std::vector<uint64_t> many_node::exchange_payload(unsigned i) const {
    const host& h = hosts_[i];
    std::vector<uint64_t> p{h.buf, h.area, h.mr->rkey};
    for (uint32_t c : h.out)
        for (const ibv_qp* qp : conns_[c].tx) p.push_back(qp->qp_num);
    for (uint32_t c : h.in)
        for (const ibv_qp* qp : conns_[c].rx) p.push_back(qp->qp_num);
    return p;
}

/// Every node's exchange payload, in node order (on every rank, at the same instant).
void many_node::take_exchange(const sim_driver::payloads& p) {
    for (unsigned i = 0; i < nn_; ++i) {
        host& h = hosts_[i];
        const std::vector<uint64_t>& v = p.at(i);
        if (v.size() != 3 + (h.out.size() + h.in.size()) * nq_)
            throw std::logic_error("many_node: node" + std::to_string(i) +
                                   "'s exchange does not fit its plan");
        h.buf = v[0];
        h.area = v[1];
        h.rkey = uint32_t(v[2]);
        size_t k = 3;
        for (uint32_t c : h.out)
            conns_[c].tx_qpn.assign(v.begin() + std::ptrdiff_t(k), v.begin() + std::ptrdiff_t(k + nq_)),
                k += nq_;
        for (uint32_t c : h.in)
            conns_[c].rx_qpn.assign(v.begin() + std::ptrdiff_t(k), v.begin() + std::ptrdiff_t(k + nq_)),
                k += nq_;
    }
}

/// The common start (every node connected), before anything happens at its instant: what the
/// counters hold then is what the report subtracts.
void many_node::start_measuring() {
    drops0_ = data_vl_drops();
    packets0_ = stats_registry::instance().sum("port.tx_packets");
    counters0_ = stats_registry::instance().snapshot();
    t0_ns_ = now_ns(0);
    wall0_ = std::chrono::steady_clock::now();  // --speed only; never reaches the model
    run_report rep;
    rep.workload = workload_;
    rep.seed = spec_.seed;
    meter_.phase_begin(0, rep);
    meter_.size_begin(0, iters_ * flows_.size(), "messages", false);  // its counters: the phase's
}

void many_node::finish() {
    merge_ranks();
    if (!error.empty() || !ended_) return;  // run() says why
    if (!spec_.comm || spec_.comm->rank() == 0) report();
}

namespace {
void put64(std::vector<uint8_t>& o, uint64_t v) {
    for (unsigned i = 0; i < 8; ++i) o.push_back(uint8_t(v >> (8 * i)));
}
struct reader {
    const std::vector<uint8_t>& in;
    size_t at = 0;
    uint64_t u64() {
        if (in.size() - at < 8) throw std::runtime_error("many_node: a truncated result from another rank");
        uint64_t v = 0;
        for (unsigned i = 0; i < 8; ++i) v |= uint64_t(in[at + i]) << (8 * i);
        at += 8;
        return v;
    }
};
}  // namespace

/// A partitioned run: rank 0 takes every counter (now and at the start) from the rank that
/// simulated its unit, every flow's completions from its sender's rank and every rank's
/// completion times, so that report() sees what one process would have; the first error by
/// rank is the run's.
void many_node::merge_ranks() {
    rank_comm* comm = spec_.comm;
    if (!comm || comm->size() < 2) return;
    const std::vector<counter*>& cs = stats_registry::instance().counters();
    std::vector<uint8_t> mine;
    put64(mine, cs.size());
    for (const counter* c : cs) {
        const auto it = counters0_.find(c);
        put64(mine, c->value());
        put64(mine, it == counters0_.end() ? 0 : it->second);
    }
    uint64_t owned = 0;
    for (const flow& f : flows_) owned += m_.owns_host(f.src) ? 1 : 0;
    put64(mine, owned);
    for (uint32_t k = 0; k < flows_.size(); ++k)
        if (m_.owns_host(flows_[k].src)) {
            put64(mine, k);
            put64(mine, flows_[k].done);
            put64(mine, flows_[k].end_ns);
        }
    put64(mine, mct_us_.size());
    for (double d : mct_us_) {
        uint64_t bits;
        std::memcpy(&bits, &d, 8);
        put64(mine, bits);
    }
    put64(mine, error.size());
    mine.insert(mine.end(), error.begin(), error.end());
    const std::vector<std::vector<uint8_t>> all = comm->gather(mine);
    if (comm->rank() != 0) return;
    std::vector<std::vector<uint64_t>> now(all.size()), then(all.size());
    mct_us_.clear();
    for (size_t r = 0; r < all.size(); ++r) {
        reader in{all[r]};
        if (in.u64() != cs.size()) throw std::runtime_error("many_node: ranks declared different counters");
        for (size_t k = 0; k < cs.size(); ++k) {
            now[r].push_back(in.u64());
            then[r].push_back(in.u64());
        }
        for (uint64_t n = in.u64(); n > 0; --n) {
            flow& f = flows_.at(in.u64());
            f.done = in.u64();
            f.end_ns = in.u64();
        }
        for (uint64_t n = in.u64(); n > 0; --n) {
            const uint64_t bits = in.u64();
            double d;
            std::memcpy(&d, &bits, 8);
            mct_us_.push_back(d);
        }
        const uint64_t n = in.u64();
        if (in.in.size() - in.at < n)
            throw std::runtime_error("many_node: a truncated error from another rank");
        if (error.empty() && n)
            error.assign(in.in.begin() + std::ptrdiff_t(in.at), in.in.begin() + std::ptrdiff_t(in.at + n));
    }
    std::vector<unsigned> owner(cs.size());
    for (size_t k = 0; k < cs.size(); ++k) owner[k] = m_.rank_of_key(cs[k]->key());
    // The start as one process saw it, then the end.
    for (size_t k = 0; k < cs.size(); ++k) cs[k]->set(then[owner[k]][k]);
    drops0_ = data_vl_drops();
    packets0_ = stats_registry::instance().sum("port.tx_packets");
    counters0_ = stats_registry::instance().snapshot();
    for (size_t k = 0; k < cs.size(); ++k) cs[k]->set(now[owner[k]][k]);
}

/// Posts node i's next messages, one per flow in turn, while their QPs have room; true if any.
/// Flows with nothing left to post leave `pending`, so a node that has posted everything pays
/// nothing here.
bool many_node::post_some(unsigned i) {
    host& h = hosts_[i];
    bool any = false;
    for (bool more = true; more;) {
        more = false;
        for (uint32_t fi : h.pending) {
            flow& f = flows_[fi];
            if (f.posted == f.post_ns.size()) continue;
            const uint64_t next = f.posted;
            connection* c = &conns_[f.conn_of(next)];
            const uint32_t cid = uint32_t(c - conns_.data());
            const unsigned q = unsigned(c->sent % nq_);
            if (outstanding_[cid * nq_ + q] >= wp_.tx_depth) continue;
            ibv_sge sge{h.buf, uint32_t(size_), h.mr->lkey};
            ibv_send_wr wr{};
            wr.wr_id = (uint64_t(fi) << 32) | next;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.imm_data = uint32_t(next);
            if (tr_ == transport::ud) {
                wr.opcode = IBV_WR_SEND_WITH_IMM;
                wr.wr.ud.ah = c->ah;
                wr.wr.ud.remote_qpn = c->rx_qpn[q];
                wr.wr.ud.remote_qkey = ud_qkey;
            } else {
                wr.opcode = tr_ == transport::uc ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
                wr.wr.rdma.remote_addr = hosts_[c->dst].buf + hosts_[c->dst].area;
                wr.wr.rdma.rkey = hosts_[c->dst].rkey;
            }
            f.post_ns[next] = now_ns(i);
            ++f.posted;
            ibv_send_wr* bad = nullptr;
            if (const int rc = ibv_post_send(c->tx[q], &wr, &bad))
                fail("node" + std::to_string(i) + ": ibv_post_send failed (" + std::to_string(rc) + ")");
            ++c->sent;
            ++outstanding_[cid * nq_ + q];
            ++h.in_flight;
            any = more = true;
        }
    }
    if (any)
        h.pending.erase(
            std::remove_if(h.pending.begin(), h.pending.end(),
                           [&](uint32_t fi) { return flows_[fi].posted == flows_[fi].post_ns.size(); }),
            h.pending.end());
    return any;
}

/// Message m of flow f completed now: RC when its sender saw the acknowledgement, UC and UD when
/// its receiver took it.
void many_node::complete(uint32_t f, uint64_t m, uint64_t now) {
    flow& fl = flows_[f];
    ++fl.done;
    fl.end_ns = std::max(fl.end_ns, now);
    mct_us_.push_back(to_us(now - fl.post_ns[m]));
    meter_.step(++completed_);
}

/// One completion of node i's CQ.
void many_node::take(unsigned i, const ibv_wc& wc) {
    const std::string node = "node" + std::to_string(i);
    if (wc.status != IBV_WC_SUCCESS)
        fail(node + ": completion error " + status_name(wc.status) + ", opcode " + std::to_string(wc.opcode) +
             ", wr_id " + hex(wc.wr_id));
    if (wc.opcode == IBV_WC_RECV || wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        host& h = hosts_[i];
        const auto it = h.rx_qp.find(wc.qp_num);
        if (it == h.rx_qp.end() || wc.byte_len != size_ + (tr_ == transport::ud ? grh_bytes : 0))
            fail(node + ": a receive completion of QP " + hex(wc.qp_num) + ", " +
                 std::to_string(wc.byte_len) + " bytes, that no flow sent");
        const uint32_t slot = it->second;
        ++rx_done_[slot];
        ++h.received;
        complete(conns_[slot / nq_].flow, wc.imm_data, now_ns(i));
        const connection& c = conns_[slot / nq_];
        const uint64_t q = slot % nq_;
        if (rx_posted_[slot] < c.messages / nq_ + (q < c.messages % nq_ ? 1 : 0)) post_recv(i, slot);
        return;
    }
    const uint32_t f = uint32_t(wc.wr_id >> 32);
    const uint64_t m = wc.wr_id & 0xFFFFFFFFull;
    const uint32_t c = flows_[f].conn_of(m);
    unsigned q = 0;  // the connection's QP the completion names
    while (q < nq_ && conns_[c].tx[q]->qp_num != wc.qp_num) ++q;
    --outstanding_[c * nq_ + q];
    --hosts_[i].in_flight;
    if (tr_ == transport::rc) complete(f, m, now_ns(i));
}

/// Node i's traffic: posts its flows' messages as their QPs have room and takes every
/// completion, until it has sent everything and (UC, UD) received everything or, once every
/// node has sent, nothing arrived for workload.drain_us (the rest was lost).
void many_node::traffic(unsigned i) {
    host& h = hosts_[i];
    const std::string node = "node" + std::to_string(i);
    const uint64_t drain_ns = uint64_t(wp_.drain_us.get() * 1000.0);
    uint64_t idle_since = now_ns(i);
    ibv_wc wcs[16];
    bool receiving = tr_ != transport::rc;
    for (;;) {
        bool progressed = post_some(i);
        const int n = ibv_poll_cq(h.cq, 16, wcs);
        if (n < 0) fail(node + ": ibv_poll_cq failed");
        for (int k = 0; k < n; ++k) take(i, wcs[k]);
        progressed |= n > 0;
        if (!h.sent_all && h.pending.empty() && h.in_flight == 0) {
            h.sent_all = true;
            if (--senders_left_ == 0) all_sent_ns_ = now_ns(i);
        }
        receiving &= h.received < h.expected;
        if (h.sent_all && !receiving) return;
        if (progressed) {
            idle_since = now_ns(i);
            continue;
        }
        // UC, UD: once every node has sent, a message that has not arrived while nothing arrived for
        // drain_us is lost.
        if (receiving && h.sent_all && senders_left_ == 0 &&
            now_ns(i) >= std::max(all_sent_ns_, idle_since) + drain_ns)
            return;
        const uint64_t wait_ns = receiving ? drain_ns : timeout_ns();
        const int rc = ibv_wait_cq(h.cq, wait_ns);
        if (rc == ETIMEDOUT && receiving && now_ns(i) - idle_since < timeout_ns()) continue;
        if (rc == ETIMEDOUT)
            fail(node + ": no completion within workload.timeout_us" +
                 (tr_ == transport::rc ? "" : " (UC and UD do not retransmit a lost message)"));
        if (rc) fail(node + ": ibv_wait_cq failed (" + std::to_string(rc) + ")");
    }
}

// ------------------------------------------------------------------ the report

/// Node0, once every node is done: the row and the many-node figures.
void many_node::report() {
    fabric_result fr;
    fr.transport = transport_name(tr_);
    fr.nodes = nn_;
    fr.link_gbps = m_.at(0).adapter.port0.rate_gbps();
    fr.node_rx_gbps.assign(nn_, 0.0);
    uint64_t end = t0_ns_, bytes = 0, victim_bytes = 0;
    for (const flow& f : flows_) end = std::max(end, f.end_ns);
    const double span = double(end - t0_ns_);
    double sum = 0, sum_sq = 0;
    std::vector<uint64_t> rx_bytes(nn_, 0);
    for (const flow& f : flows_) {
        flow_result r;
        r.src = f.src;
        r.dst = f.dst;
        r.victim = f.victim;
        r.messages = f.done;
        r.lost = iters_ - f.done;
        r.bytes = f.done * size_;
        r.gbps = f.end_ns > t0_ns_ ? double(r.bytes) * 8.0 / double(f.end_ns - t0_ns_) : 0.0;
        sum += r.gbps;
        sum_sq += r.gbps * r.gbps;
        bytes += r.bytes;
        if (f.victim) victim_bytes += r.bytes;
        fr.messages += r.messages;
        fr.lost += r.lost;
        fr.flows.push_back(r);
    }
    // What each node received: per destination, from the connections (a spread flow's messages
    // went to several); for UC and UD, the messages its receives took.
    for (const connection& c : conns_) {
        uint64_t got = 0;
        if (tr_ == transport::rc) {
            got = c.messages;  // acknowledged = delivered; a run that lost one failed
        } else {
            const uint32_t id = uint32_t(&c - conns_.data());
            for (unsigned q = 0; q < nq_; ++q) got += rx_done_[id * nq_ + q];
        }
        rx_bytes[c.dst] += got * size_;
    }
    if (span > 0) {
        fr.aggregate_gbps = double(bytes) * 8.0 / span;
        fr.victim_gbps = double(victim_bytes) * 8.0 / span;
        for (unsigned d = 0; d < nn_; ++d) fr.node_rx_gbps[d] = double(rx_bytes[d]) * 8.0 / span;
    }
    fr.jain = sum_sq > 0 ? sum * sum / (double(flows_.size()) * sum_sq) : 0.0;
    const size_result lat = latency_stats(size_, mct_us_);
    fr.mct_p50_us = lat.lat_typical_us;
    fr.mct_p99_us = lat.lat_p99_us;
    fr.mct_max_us = lat.lat_max_us;
    fr.drops = data_vl_drops();
    for (size_t k = 0; k < fr.drops.size(); ++k) {
        fr.drops[k].second -= drops0_[k].second;
        fr.dropped += fr.drops[k].second;
    }
    fr.xmit_wait = congestion_tree(8);
    fr.cc = cc_activity();

    size_result row;
    row.size_bytes = size_;
    row.iters = iters_;  // per flow
    row.messages = iters_ * flows_.size();
    row.bw_gbps = fr.aggregate_gbps;
    row.msg_rate_mpps = span > 0 ? double(fr.messages) * 1000.0 / span : 0.0;
    row.fabric = std::move(fr);
    run_report rep;
    rep.workload = workload_;
    rep.seed = spec_.seed;
    rep.results.push_back(std::move(row));
    rep.sim_time_ns = end - t0_ns_;
    rep.traffic_wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0_).count();
    rep.wire_packets = stats_registry::instance().sum("port.tx_packets") - packets0_;
    rep.measured_counters = stats_registry::instance().changes_since(counters0_);
    rep.results.back().counters = rep.measured_counters;  // one size: the whole phase
    meter_.row(rep);
    meter_.phase_end(rep);
    out_.push_back(std::move(rep));
}

}  // namespace workloads

}  // namespace hcasim
