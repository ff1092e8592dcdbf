#include "testbench/workloads.h"

#include <systemc>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <unordered_map>

#include "model/core/param.h"
#include "model/core/sim_time.h"
#include "model/core/stats.h"
#include "model/pcie/dma_traffic_gen.h"
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>
#include "model/system/fabric.h"
#include "testbench/cli.h"
#include "testbench/host_software.h"
#include "testbench/verbs_trace.h"

namespace hcasim {

using namespace sc_core;
using namespace hcasim::verbs;

bool is_pcie_workload(const std::string& n) { return n == "dma_read_bw" || n == "dma_write_bw"; }
bool is_srq_workload(const std::string& n) { return n == "srq_bw" || n == "ud_srq_bw"; }

namespace verify {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

std::string hex(uint64_t v, int digits) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%0*llx", digits, static_cast<unsigned long long>(v));
    return b;
}

}  // namespace

uint64_t data_key(uint64_t seed, unsigned node, unsigned qp, uint64_t step, uint64_t message) {
    return mix(mix(mix(mix(mix(seed) ^ node) ^ qp) ^ step) ^ message);
}

void fill(uint64_t key, uint8_t* dst, uint64_t n) {
    uint64_t w = 0;
    for (; (w + 1) * 8 <= n; ++w) {
        const uint64_t v = mix(key + w);
        std::memcpy(dst + w * 8, &v, 8);
    }
    if (w * 8 < n) {
        const uint64_t v = mix(key + w);
        std::memcpy(dst + w * 8, &v, n - w * 8);
    }
}

uint64_t value(uint64_t key) { return mix(key ^ 0xa70311cull); }

bool checker::bytes(const where& w, const uint8_t* actual, uint64_t n, uint64_t key, int last) {
    if (expected_key_ != key || expected_n_ != n || expected_last_ != last || expected_.size() < n) {
        expected_.resize(n);
        fill(key, expected_.data(), n);
        if (last >= 0 && n) expected_[n - 1] = uint8_t(last);
        expected_key_ = key;
        expected_n_ = n;
        expected_last_ = last;
    }
    bytes_checked += n;
    if (n == 0 || std::memcmp(actual, expected_.data(), n) == 0) return true;
    uint64_t first = n, differ = 0;
    for (uint64_t k = 0; k < n; ++k)
        if (actual[k] != expected_[k]) {
            first = std::min(first, k);
            ++differ;
        }
    mismatches += differ;
    failed(w, "byte " + std::to_string(first) + " expected " + hex(expected_[first], 2) + ", got " +
                  hex(actual[first], 2) + " (" + std::to_string(differ) + " of " + std::to_string(n) +
                  " bytes differ)");
    return false;
}

bool checker::value(const where& w, uint64_t actual, uint64_t expected) {
    bytes_checked += 8;
    if (actual == expected) return true;
    for (unsigned k = 0; k < 8; ++k) mismatches += ((actual ^ expected) >> (8 * k)) & 0xFF ? 1 : 0;
    failed(w, "expected " + hex(expected, 16) + ", got " + hex(actual, 16));
    return false;
}

void checker::shared_word(const where& w, bool cas, uint64_t init, const std::vector<shared_atomic>& ops,
                          uint64_t final_value) {
    const auto at = [&](const shared_atomic& a, const char* what) {
        where x = w;
        x.node = 0;
        x.qp = a.qp;
        x.message = a.message;
        x.what = what;
        return x;
    };
    uint64_t word = init;
    if (cas) {
        // The first one executed swaps; every later one fetches its swap value.
        const shared_atomic* winner = nullptr;
        for (const shared_atomic& a : ops)
            if (a.fetched == init) {
                winner = &a;
                break;
            }
        for (const shared_atomic& a : ops)
            value(at(a, "fetched value (shared word)"), a.fetched,
                  &a == winner || !winner ? init : winner->operand);
        if (winner) word = winner->operand;
    } else {
        // Follow the chain: the atomic that fetched `word` executed next and added its operand.
        std::unordered_map<uint64_t, const shared_atomic*> by_fetched;
        by_fetched.reserve(ops.size());
        std::vector<const shared_atomic*> off_chain;  // fetched a value another one fetched too
        for (const shared_atomic& a : ops)
            if (!by_fetched.emplace(a.fetched, &a).second) off_chain.push_back(&a);
        for (auto it = by_fetched.find(word); it != by_fetched.end(); it = by_fetched.find(word)) {
            value(at(*it->second, "fetched value (shared word)"), it->second->fetched, word);
            word += it->second->operand;
            by_fetched.erase(it);
        }
        // The chain broke: these fetched no value a serial execution reaches.
        for (const auto& [fetched, a] : by_fetched) off_chain.push_back(a);
        std::sort(off_chain.begin(), off_chain.end(), [](const shared_atomic* x, const shared_atomic* y) {
            return x->qp != y->qp ? x->qp < y->qp : x->message < y->message;
        });
        for (const shared_atomic* a : off_chain)
            value(at(*a, "fetched value (shared word: off the serial chain)"), a->fetched, word);
    }
    where end = w;
    end.node = 1;
    end.qp = 0;
    end.message = ops.empty() ? 0 : ops.size() - 1;
    end.what = "shared word after the last atomic";
    value(end, final_value, word);
}

void checker::bad_completion(const where& w, const std::string& why) {
    ++bad_completions;
    failed(w, why);
}

void checker::lost(const where& w, uint64_t n, uint64_t sent) {
    lost_messages += n;
    if (n && first_failure.empty())
        first_failure = std::string(w.workload) + " " + std::to_string(w.size) + " B, node" +
                        std::to_string(w.node) + " QP " + std::to_string(w.qp) + ", " + w.what + ": " +
                        std::to_string(n) + " of " + std::to_string(sent) +
                        " datagrams lost (UD does not retransmit)";
}

void checker::failed(const where& w, const std::string& detail) {
    if (!first_failure.empty()) return;
    first_failure = std::string(w.workload) + " " + std::to_string(w.size) + " B, node" +
                    std::to_string(w.node) + " QP " + std::to_string(w.qp) + " message " +
                    std::to_string(w.message) + ", " + w.what + ": " + detail;
}

}  // namespace verify

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
    param<std::string> mrs;
    param<double> drain_us;
    param<unsigned> post_list;
    param<std::string> atomic_word;

    explicit workload_params(sc_module_name name = "workload")
        : sc_module(name),
          tx_depth("tx_depth", 128, "WRs", "send work requests outstanding in bandwidth tests (perftest -t)",
                   {1, 16384}),
          rx_depth("rx_depth", 512, "WRs", "receive work requests posted in send tests (perftest -r)",
                   {1, 16384}),
          cq_mod("cq_mod", 100, "WRs", "bandwidth tests signal one send in cq_mod (perftest -Q)", {1, 16384}),
          inline_bytes(
              "inline_bytes", -1, "bytes",
              "inline data up to this size; -1: perftest defaults (220 in latency tests, 0 in bandwidth)",
              {-1, 1024}),
          timeout_us("timeout_us", 1e6, "us",
                     "a wait longer than this (simulated) fails the run; above the QPs' local ACK timeout "
                     "(code 14: 67 ms) times a few retries, so lossy links (link.drop_rate) still complete",
                     {1, 1e12}),
          dma_outstanding("dma_outstanding", 512, "transfers", "DMAs in flight in dma_*_bw", {1, 1u << 20}),
          mrs("mrs", "1,16,256,1K,4K,16K,64K", "regions",
              "memory region counts mr_scale sweeps, --size syntax (--mrs sets it)"),
          drain_us("drain_us", 100, "us",
                   "uc_write_bw, ud_send_bw: once the client's end-of-stream markers are on the wire, the "
                   "server stops waiting for a missing one after this long (it was lost)",
                   {0.001, 1e9}),
          post_list(
              "post_list", 1, "WRs",
              "bandwidth tests post a QP's work requests in lists of this many, one ibv_post_send and one "
              "doorbell per list (perftest -l); 1 posts each alone (through the inline window)",
              {1, 1024}),
          atomic_word("atomic_word", "per_qp", "",
                      "atomic_rate with --qps N: per_qp gives each QP its own remote word; shared aims every "
                      "QP at one word (the responder serialises them: a same-address rate)",
                      {"per_qp", "shared"}) {}
};

unsigned ceil_log2(uint64_t v) {
    unsigned l = 0;
    while ((uint64_t(1) << l) < v) ++l;
    return l;
}

/// mr_scale with N regions needs N + 2 MPT entries per node (index 0 is reserved, the MR of
/// the QP buffers takes one), 65538 at the default sweep's 64K: unless hca.max_mrs is
/// configured, nodes 0 and 1 get the next power of two when the model's default is too small.
void size_mpt_tables(uint64_t max_regions) {
    constexpr uint64_t model_default = 65536;  // hca.max_mrs (model/hca/hca.cpp)
    const uint64_t need = uint64_t(1) << ceil_log2(max_regions + 2);
    if (need <= model_default) return;
    for (unsigned i = 0; i < 2; ++i) {
        const std::string key = "node" + std::to_string(i) + ".hca.max_mrs";
        if (!broker::instance().lookup(key))
            broker::instance().set(key, std::to_string(need), "mr_scale (workload.mrs)");
    }
}

/// One point of the mr_scale sweep.
struct mr_point {
    uint64_t mrs = 0;          ///< regions per node (N)
    uint64_t size = 0;         ///< message size, bytes
    uint64_t iters = 0;        ///< WRITEs timed: max(--iters, 4 N)
    double bw_gbps = 0;        ///< average bandwidth, Gb/s
    double msg_rate_mpps = 0;  ///< messages per simulated microsecond
    double mpt_hit_rate =
        -1;  ///< MPT cache hits / lookups of both nodes' units over the timed WRITEs (-1: none)
    double mtt_hit_rate = -1;  ///< the same for MTT lines
};

/// mr_scale's table: perftest's bandwidth columns with N and the hit rates.
void print_mr_table(std::ostream& os, const std::vector<mr_point>& points) {
    char line[256];
    std::snprintf(line, sizeof line, " %-9s %-10s %-12s %-20s %-15s %-9s %s", "#mrs", "#bytes", "#iterations",
                  "BW average[Gb/sec]", "MsgRate[Mpps]", "MPT hit", "MTT hit");
    os << " hcasim mr_scale: memory regions per node (message n uses region n mod #mrs on both nodes); hit\n"
          " rates are both nodes' translation units over the timed WRITEs, after a pass over every region\n"
       << line << "\n";
    const auto fmt_rate = [](double r) {
        char b[16];
        if (r < 0) return std::string("-");
        std::snprintf(b, sizeof b, "%.4f", r);
        return std::string(b);
    };
    for (const mr_point& p : points) {
        std::snprintf(line, sizeof line, " %-9llu %-10llu %-12llu %-20.2f %-15.6f %-9s %s",
                      static_cast<unsigned long long>(p.mrs), static_cast<unsigned long long>(p.size),
                      static_cast<unsigned long long>(p.iters), p.bw_gbps, p.msg_rate_mpps,
                      fmt_rate(p.mpt_hit_rate).c_str(), fmt_rate(p.mtt_hit_rate).c_str());
        os << line << "\n";
    }
}

/// What two processes tell each other out of band (perftest does it over TCP).
struct peer_info {
    uint16_t lid = 0;
    std::vector<uint32_t> qpn;
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t addr = 0;       ///< receive area of QP 0 (WRITE and atomic targets); QP q's is q areas on
    uint64_t send_addr = 0;  ///< send area of QP 0 (READ sources); QP q's is q areas on
    bool ready = false;
};

/// Barrier of the nodes taking part (two, or every node in mcast_bw).
struct barrier {
    sc_event ev;
    unsigned parties = 2, arrived = 0, generation = 0;
    void arrive() {
        const unsigned g = generation;
        if (++arrived == parties) {
            arrived = 0;
            ++generation;
            ev.notify(SC_ZERO_TIME);
            wait(SC_ZERO_TIME);
            return;
        }
        while (generation == g) wait(ev);
    }
};

double to_us(uint64_t ns) { return double(ns) / 1000.0; }

/// ibv_wc_status_str's names.
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

/// What a phase does on the wire.
enum class op_kind { write, send, read, atomic };

op_kind kind_of(const std::string& w) {
    if (w == "send_lat" || w == "send_bw" || w == "ud_send_lat" || w == "ud_send_bw" || w == "mcast_bw" ||
        is_srq_workload(w))
        return op_kind::send;
    if (w == "read_lat" || w == "read_bw") return op_kind::read;
    if (w == "atomic_lat" || w == "atomic_rate") return op_kind::atomic;
    return op_kind::write;
}
bool is_latency(const std::string& w) { return w.size() > 4 && w.compare(w.size() - 4, 4, "_lat") == 0; }

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", static_cast<unsigned long long>(v));
    return b;
}

/// The two-node perftest application: node0 is the client, node1 the server. Each node's buffer
/// holds one send area per QP, then one receive area per QP (WRITE targets, receive buffers,
/// READ destinations, atomic targets and fetched values). --verify changes the data in them,
/// never the layout or what is posted, so a verified run has the same timing.
///
/// Every phase of a run uses the same QPs, of one transport (perftest -c): RC, UC (uc_write_bw)
/// or UD (ud_send_lat, ud_send_bw). A UD receive buffer starts with the 40-byte GRH area, so
/// the payload lies at byte 40 of a receive area. UC and UD messages are not acknowledged and
/// their send completions only say the message is on the wire: after a bandwidth stream the
/// client sends one end-of-stream marker per QP (see send_markers), and the server's receive
/// loop (unacked_receive) ends on them, counting the datagrams that never arrived.
///
/// mcast_bw is ud_send_bw with every node of the fabric taking part: node0's QP q sends to
/// multicast group q (MLID 0xC001 + q, MGID ff12:401b::q+1, remote QPN 0xFFFFFF), and QP q of
/// every other node (a receiver) is attached to it. Each receiver runs the server's side of
/// ud_send_bw (its own process, receive queues, counts and --verify); the client's figures are
/// the sender's, and the lost-datagram count is kept per receiver.
class perftest : public sc_module {
public:
    SC_HAS_PROCESS(perftest);
    perftest(sc_module_name name, machine& m, const run_spec& spec, const workload_params& wp,
             std::vector<run_report>& out, const std::vector<uint64_t>& mrs = {})
        : sc_module(name), m_(m), spec_(spec), wp_(wp), out_(out), mrs_(mrs) {
        fw::driver_options opts;
        // The driver's QP table holds the run's QPs (and the special QPs and a few spare).
        opts.log_num_qps = uint8_t(std::max<unsigned>(opts.log_num_qps, ceil_log2(uint64_t(spec.qps) + 16)));
        for (const phase_spec& p : spec.phases)
            if (p.workload == "mr_scale") mr_scale_init(p, opts);
        mcast_ = !spec.phases.empty() && spec.phases.front().workload == "mcast_bw";
        srq_ = !spec.phases.empty() && is_srq_workload(spec.phases.front().workload);
        if (srq_) {  // node1's SRQ counters, read around each size
            static const char* const names[3] = {"wqe_fetcher.srq_taken", "transport_engine.rnr_naks_sent",
                                                 "wqe_fetcher.srq_empty"};
            for (unsigned k = 0; k < 3; ++k) {
                const std::string key = std::string(m.at(1).name()) + ".hca." + names[k];
                srq_ctr_[k] = stats_registry::instance().find(key);
                if (!srq_ctr_[k])
                    throw workload_error(spec.phases.front().workload + " reads the SRQ counters, but '" +
                                         key + "' does not exist");
            }
        }
        // The units' busy counters of node0 and node1, read around each bandwidth size.
        static const char* const busy[][2] = {{"link tx", ".hca.port.tx_busy_ps"},
                                              {"PCIe up", ".pcie.upstream_busy_ps"},
                                              {"PCIe down", ".pcie.downstream_busy_ps"},
                                              {"requester", ".hca.transport_engine.tx_busy_ps"},
                                              {"responder", ".hca.transport_engine.rx_busy_ps"},
                                              {"responses", ".hca.transport_engine.resp_busy_ps"},
                                              {"WQE fetcher", ".hca.wqe_fetcher.busy_ps"},
                                              {"CQ writer", ".hca.cq_writer.busy_ps"}};
        for (unsigned i = 0; i < std::min<size_t>(2, m.size()); ++i)
            for (const auto& b : busy)
                if (const counter* c = stats_registry::instance().find(std::string(m.at(i).name()) + b[1]))
                    busy_.push_back({"node" + std::to_string(i) + " " + b[0], c});
        nn_ = mcast_ ? unsigned(m.size()) : 2;
        bar_.parties = nn_;
        sw_.resize(nn_);
        side_.resize(nn_);
        info_.resize(nn_);
        received_.resize(nn_);
        for (unsigned i = 0; i < nn_; ++i) sw_[i] = std::make_unique<host_software>(m.at(i), opts);
        uint64_t max_size = 1;
        for (const phase_spec& p : spec.phases) {
            for (uint64_t s : p.sizes) max_size = std::max(max_size, s);
            const op_kind k = kind_of(p.workload);
            if (k == op_kind::read || k == op_kind::atomic) {
                needs_rd_ = true;
                if (rd_workload_.empty()) rd_workload_ = p.workload;
            }
            needs_atomic_ |= k == op_kind::atomic;
            needs_recv_ |= k == op_kind::send;
        }
        nq_ = spec.qps;
        tr_ = spec.phases.empty() ? transport::rc : transport_of(spec.phases.front().workload);
        area_ = std::max<uint64_t>(max_size, 4096);
        if (needs_atomic_)  // atomic_rate: one 8-byte fetched-value slot per outstanding atomic
            area_ = std::max<uint64_t>(area_, uint64_t(wp.tx_depth) * 8);
        if (tr_ == transport::ud) {
            // The GRH area before the payload; areas stay page multiples.
            area_ = (max_size + grh_bytes + 4095) / 4096 * 4096;
            // ud_send_bw: node1 holds a receive for every message of a QP and its marker, so none
            // is dropped for want of a receive WQE (UD has no RNR NAK to slow the sender).
            for (const phase_spec& p : spec.phases)
                if (!is_latency(p.workload))
                    ud_rq_need_ = std::max(ud_rq_need_, (p.iters + nq_ - 1) / nq_ + 1);
            // ud_srq_bw: the SRQ holds every datagram of a size and every marker.
            for (const phase_spec& p : spec.phases)
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
        SC_THREAD(client);
        SC_THREAD(server);
        for (unsigned i = 2; i < nn_; ++i)  // mcast_bw: the other receivers
            receivers_.push_back(
                std::make_unique<receiver>(("receiver" + std::to_string(i)).c_str(), *this, i));
    }

    std::string error;
    std::vector<mr_point> points;  ///< mr_scale: one per (size, N), in run order

    /// --record: every verbs call of the applications goes to `r` (traces/README.md).
    void set_recorder(trace::recorder* r) { rec_ = r; }
    /// Application memory of node i (the trace's end record digests it).
    void read_mem(unsigned i, uint64_t va, uint8_t* dst, uint64_t n) {
        (void)sw_[i]->as.read(va, dst, n);  // the workload's own buffers, mapped since setup
    }

private:
    trace::recorder* rec_ = nullptr;
    static constexpr uint64_t grh_bytes = 40;        ///< GRH area at the start of a UD receive buffer
    static constexpr uint32_t ud_qkey = 0x11111111;  ///< both sides' Q_Key (perftest's DEFAULT_QKEY)
    static constexpr uint32_t marker_imm =
        0x454F5321;  ///< immediate data of an end-of-stream marker ("EOS!")
    static constexpr uint64_t no_time = ~uint64_t(0);
    static constexpr uint16_t mcast_mlid = 0xC001;   ///< mcast_bw: MLID of QP 0's group (QP q: + q)
    static constexpr uint32_t mcast_qpn = 0xFFFFFF;  ///< multicast destination QPN (o10-35)

    /// mcast_bw: the process of receiver i >= 2 (node1's is `server`).
    struct receiver : sc_module {
        SC_HAS_PROCESS(receiver);
        receiver(sc_module_name n, perftest& app, unsigned i) : sc_module(n), app_(app), i_(i) {
            SC_THREAD(main);
        }
        void main() { app_.run_side(i_); }
        perftest& app_;
        unsigned i_;
    };

    /// The node whose data node i receives (and whose out-of-band information it uses).
    static unsigned peer_of(unsigned i) { return i == 0 ? 1 : 0; }
    /// mcast_bw: the MGID of QP q's group, ff12:401b::q+1 (link-local scope).
    static ibv_gid mcast_gid(unsigned q) {
        ibv_gid g{};
        g.raw[0] = 0xFF;
        g.raw[1] = 0x12;
        g.raw[2] = 0x40;
        g.raw[3] = 0x1B;
        for (int k = 0; k < 4; ++k) g.raw[15 - k] = uint8_t((q + 1) >> (8 * k));
        return g;
    }

    /// Where a UD QP sends: the datagram fields of each send WR.
    struct ud_dest {
        ibv_ah* ah = nullptr;
        uint32_t qpn = 0;
        uint32_t qkey = 0;
    };

    struct side {
        ibv_context* ctx = nullptr;
        ibv_pd* pd = nullptr;
        ibv_mr* mr = nullptr;
        ibv_cq* scq = nullptr;
        ibv_cq* rcq = nullptr;
        std::vector<ibv_qp*> qps;
        std::vector<uint64_t> rq_posted,
            rq_done;  ///< receive WRs posted / completed per QP (wr_id = sequence)
        uint64_t buf = 0, buf_bytes = 0;
        unsigned rq_depth = 0;      ///< receives kept posted per QP
        std::vector<ud_dest> dest;  ///< UD: QP q's destination
        // srq_bw, ud_srq_bw (node1): one SRQ for every QP. Slot k of `srq_slots` receive buffers
        // (after the QPs' areas) is posted with wr_id (sequence << 24) | k and reposted when its
        // completion has been polled.
        ibv_srq* srq = nullptr;
        unsigned srq_slots = 0;             ///< receive WRs kept posted to the SRQ
        uint64_t srq_posted = 0;            ///< SRQ WRs posted so far (the next sequence number)
        std::vector<uint64_t> slot_seq;     ///< sequence number slot k was last posted with
        std::vector<uint8_t> slot_busy;     ///< slot k is posted and not yet completed
        std::vector<uint64_t> qp_last_seq;  ///< per QP: 1 + sequence of its last SRQ completion (0: none)
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

    uint64_t send_area(unsigned i, unsigned q) const { return side_[i].buf + uint64_t(q) * area_; }
    uint64_t recv_area(unsigned i, unsigned q) const { return side_[i].buf + uint64_t(nq_ + q) * area_; }
    /// Offset of a message's first byte in a receive area (UD: after the GRH area).
    uint64_t payload_off() const { return tr_ == transport::ud ? grh_bytes : 0; }
    /// byte_len of a receive completion of a `size`-byte message (UD counts the GRH area).
    uint64_t recv_len(uint64_t size) const { return size + payload_off(); }

    void setup(unsigned i) {
        side& s = side_[i];
        host_software& sw = *sw_[i];
        const std::string node = "node" + std::to_string(i);
        s.ctx = ibv_open_device(sw.driver, sw.as);
        if (!s.ctx) fail(node + ": ibv_open_device failed: " + sw.driver.last_error());
        {
            ibv_device_attr dev{};
            if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
            if (uint64_t(dev.max_qp) < nq_)
                fail("--qps " + std::to_string(nq_) + ": " + node + "'s HCA holds " +
                     std::to_string(dev.max_qp) + " QPs (raise hca.max_qps, e.g. --set hca.max_qps=" +
                     std::to_string(uint64_t(1) << ceil_log2(uint64_t(nq_) + 16)) + ")");
        }
        // READ and atomics: as many outstanding as the device allows (perftest's default).
        uint8_t max_rd = 0, max_dest_rd = 0;
        int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        if (needs_rd_) {
            ibv_device_attr dev{};
            if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
            if (dev.max_qp_rd_atom <= 0 || dev.max_qp_init_rd_atom <= 0)
                fail(rd_workload_ + " needs RDMA READ/atomic support, but " + node +
                     "'s HCA reports max_qp_rd_atom " + std::to_string(dev.max_qp_rd_atom) +
                     " and max_qp_init_rd_atom " + std::to_string(dev.max_qp_init_rd_atom) +
                     " (ibv_query_device)");
            if (needs_atomic_ && dev.atomic_cap == IBV_ATOMIC_NONE)
                fail("atomic workloads need atomics, but " + node +
                     "'s HCA reports atomic_cap IBV_ATOMIC_NONE (ibv_query_device)");
            max_rd = uint8_t(std::min(dev.max_qp_init_rd_atom, 255));
            max_dest_rd = uint8_t(std::min(dev.max_qp_rd_atom, 255));
            access |= IBV_ACCESS_REMOTE_READ | (needs_atomic_ ? IBV_ACCESS_REMOTE_ATOMIC : 0);
        }
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
        sc_time t0 = sc_time_stamp();  // --record: each call's issue time
        s.pd = ibv_alloc_pd(s.ctx);
        if (rec_ && s.pd) rec_->call(i, "alloc_pd", {{"ret", rec_->add(i, s.pd, "pd")}}, t0);
        s.buf_bytes = (2 * uint64_t(nq_) + s.srq_slots) * area_;
        t0 = sc_time_stamp();
        s.buf = sw.as.alloc(s.buf_bytes, 4096);
        if (rec_)
            rec_->call(
                i, "alloc",
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
        unsigned scq_entries = wp_.tx_depth * 2;
        if (nq_ > 2) {
            // Signaled sends of every QP may wait in the send CQ together (as the receive CQ).
            ibv_device_attr dev{};
            if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
            scq_entries = unsigned(std::min<uint64_t>(uint64_t(wp_.tx_depth) * nq_, uint64_t(dev.max_cqe)));
        }
        t0 = sc_time_stamp();
        s.scq = ibv_create_cq(s.ctx, int(scq_entries));
        const sc_time t1 = sc_time_stamp();
        s.rcq = ibv_create_cq(s.ctx, int(rcq_entries));
        if (rec_ && s.scq && s.rcq) {
            rec_->call(i, "create_cq", {{"cqe", scq_entries}, {"ret", rec_->add(i, s.scq, "cq")}}, t0);
            rec_->call(i, "create_cq", {{"cqe", rcq_entries}, {"ret", rec_->add(i, s.rcq, "cq")}}, t1);
        }
        if (!s.scq || !s.rcq) fail(node + ": CQ creation failed");
        if (s.srq_slots) {
            ibv_srq_init_attr sa{};
            sa.attr.max_wr = s.srq_slots;
            sa.attr.max_sge = 1;
            t0 = sc_time_stamp();
            s.srq = ibv_create_srq(s.pd, &sa);
            if (rec_ && s.srq)
                rec_->call(i, "create_srq",
                           {{"pd", "pd0"},
                            {"max_wr", s.srq_slots},
                            {"max_sge", 1},
                            {"ret", rec_->add(i, s.srq, "srq")}},
                           t0);
            if (!s.srq)
                fail(node + ": ibv_create_srq of " + std::to_string(s.srq_slots) + " WRs failed (errno " +
                     std::to_string(errno) + ")");
        }
        for (unsigned q = 0; q < nq_; ++q) {
            ibv_qp_init_attr a{};
            a.send_cq = s.scq;
            a.recv_cq = s.rcq;
            a.qp_type = tr_ == transport::ud ? IBV_QPT_UD : tr_ == transport::uc ? IBV_QPT_UC : IBV_QPT_RC;
            a.cap.max_send_wr = wp_.tx_depth;
            a.cap.max_recv_wr = std::max(s.rq_depth, 1u);
            a.srq = s.srq;
            a.cap.max_send_sge = 1;
            a.cap.max_recv_sge = 1;
            a.cap.max_inline_data = 220;
            t0 = sc_time_stamp();
            ibv_qp* qp = ibv_create_qp(s.pd, &a);
            if (!qp) fail(node + ": ibv_create_qp failed (errno " + std::to_string(errno) + ")");
            if (rec_) {
                const std::string name = "qp" + std::to_string(q);
                rec_->add_qp(i, qp, name);
                trace::json f = {{"pd", "pd0"},
                                 {"type", trace::qp_type_name(a.qp_type)},
                                 {"send_cq", rec_->name_of(i, s.scq)},
                                 {"recv_cq", rec_->name_of(i, s.rcq)}};
                if (s.srq) f["srq"] = rec_->name_of(i, s.srq);
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
        info_[i].psn = 0x100 * (i + 1) + uint32_t(spec_.seed & 0xFF);
        info_[i].rkey = s.mr->rkey;
        info_[i].addr = recv_area(i, 0);  // peers write into our receive areas
        info_[i].send_addr = send_area(i, 0);
        info_[i].ready = true;
        exchanged_.notify(SC_ZERO_TIME);
        for (unsigned j = 0; j < nn_; ++j)
            while (!info_[j].ready) wait(exchanged_);
        const peer_info& peer = info_[peer_of(i)];
        if (tr_ == transport::ud) make_ud_dests(i);
        for (unsigned q = 0; q < s.qps.size(); ++q) {
            if (tr_ != transport::rc) {
                if (const int rc = connect_unreliable(i, q, access))
                    fail(node + ": ibv_modify_qp to RTS failed (" + std::to_string(rc) + ")");
                if (mcast_ && i > 0) {
                    const ibv_gid g = mcast_gid(q);
                    const sc_time t0 = sc_time_stamp();
                    const int arc = ibv_attach_mcast(s.qps[q], &g, uint16_t(mcast_mlid + q));
                    if (rec_)
                        rec_->call(i, "attach_mcast",
                                   {{"qp", rec_->name_of(i, s.qps[q])},
                                    {"gid", trace::gid_hex(g)},
                                    {"lid", mcast_mlid + q},
                                    {"ret", arc}},
                                   t0);
                    if (const int rc = arc)
                        fail(node + ": ibv_attach_mcast of QP " + std::to_string(q) + " failed (" +
                             std::to_string(rc) +
                             "; each QP has a group of its own: at most hca.mcast_table.max_groups QPs)");
                }
                for (unsigned k = 0; k < s.rq_depth; ++k) post_recv(i, q);
                continue;
            }
            ibv_qp_attr attr{};
            attr.qp_state = IBV_QPS_INIT;
            attr.pkey_index = 0;
            attr.port_num = 1;
            attr.qp_access_flags = unsigned(access);
            int rc = modify(i, s.qps[q], attr,
                            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTR;
            attr.path_mtu = ibv_mtu(__builtin_ctz(spec_.mtu) - 7);
            attr.dest_qp_num = peer.qpn[q];
            attr.rq_psn = peer.psn;
            attr.max_dest_rd_atomic = max_dest_rd;
            attr.min_rnr_timer = 12;
            attr.ah_attr.dlid = peer.lid;
            attr.ah_attr.port_num = 1;
            rc |= modify(i, s.qps[q], attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
            attr = ibv_qp_attr{};
            attr.qp_state = IBV_QPS_RTS;
            attr.sq_psn = info_[i].psn;
            attr.timeout = 14;
            attr.retry_cnt = 7;
            attr.rnr_retry = 7;
            attr.max_rd_atomic = max_rd;
            rc |= modify(i, s.qps[q], attr,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC);
            if (rc) fail(node + ": ibv_modify_qp to RTS failed (" + std::to_string(rc) + ")");
            // Every receive consumed later is posted again, so the RQ stays full.
            for (unsigned k = 0; k < s.rq_depth; ++k) post_recv(i, q);
        }
        if (s.srq) {  // every slot once, in slot order; each completion reposts its slot
            s.slot_seq.assign(s.srq_slots, 0);
            s.slot_busy.assign(s.srq_slots, 0);
            std::vector<uint32_t> all(s.srq_slots);
            for (unsigned k = 0; k < s.srq_slots; ++k) all[k] = k;
            post_srq(i, all);
        }
    }

    /// srq_bw, ud_srq_bw, node1: the WRs kept posted to the SRQ (workload.rx_depth, as perftest's
    /// -r with --use_srq; ud_srq_bw: every datagram of a size and the markers, like ud_send_bw's
    /// receive queues, within the device's max_srq_wr and max_cqe). Sets s.srq_slots and returns
    /// the receive CQ's size. Fails the run when the device has no SRQs or rx_depth exceeds them.
    unsigned srq_size(unsigned i, const std::string& node) {
        side& s = side_[i];
        const std::string& w = spec_.phases.front().workload;
        ibv_device_attr dev{};
        if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
        if (dev.max_srq <= 0 || dev.max_srq_wr <= 0)
            fail(w + " needs a shared receive queue, but " + node + "'s HCA reports max_srq " +
                 std::to_string(dev.max_srq) + " and max_srq_wr " + std::to_string(dev.max_srq_wr) +
                 " (ibv_query_device)");
        if (wp_.rx_depth.get() > unsigned(dev.max_srq_wr) || wp_.rx_depth.get() > unsigned(dev.max_cqe))
            fail(w + ": workload.rx_depth " + std::to_string(wp_.rx_depth.get()) +
                 " receive WRs do not fit one SRQ of " + node + " (max_srq_wr " +
                 std::to_string(dev.max_srq_wr) + ", max_cqe " + std::to_string(dev.max_cqe) +
                 "; hca.max_qp_wr, hca.max_cqe)");
        uint64_t want = wp_.rx_depth;
        if (tr_ == transport::ud)
            want = std::max<uint64_t>(
                want, std::min<uint64_t>({ud_srq_need_, uint64_t(dev.max_srq_wr), uint64_t(dev.max_cqe)}));
        s.srq_slots = unsigned(want);
        return s.srq_slots;
    }

    /// Node i's SRQ receive buffer k (after the QPs' send and receive areas).
    uint64_t srq_slot(unsigned i, unsigned k) const { return side_[i].buf + (2 * uint64_t(nq_) + k) * area_; }

    /// Posts the SRQ slots `slots` (each its whole buffer) as one list: one doorbell.
    void post_srq(unsigned i, const std::vector<uint32_t>& slots) {
        side& s = side_[i];
        if (slots.empty()) return;
        srq_sges_.resize(slots.size());
        srq_wrs_.resize(slots.size());
        for (size_t k = 0; k < slots.size(); ++k) {
            const uint32_t slot = slots[k];
            const uint64_t seq = s.srq_posted++;
            s.slot_seq[slot] = seq;
            s.slot_busy[slot] = 1;
            srq_sges_[k] = ibv_sge{srq_slot(i, slot), uint32_t(area_), s.mr->lkey};
            srq_wrs_[k] = ibv_recv_wr{};
            srq_wrs_[k].wr_id = (seq << 24) | slot;
            srq_wrs_[k].sg_list = &srq_sges_[k];
            srq_wrs_[k].num_sge = 1;
            srq_wrs_[k].next = k + 1 < slots.size() ? &srq_wrs_[k + 1] : nullptr;
        }
        ibv_recv_wr* bad = nullptr;
        const sc_time t0 = sc_time_stamp();
        const int rc = ibv_post_srq_recv(s.srq, srq_wrs_.data(), &bad);
        if (rec_)
            rec_->call(
                i, "post_srq_recv",
                {{"srq", rec_->name_of(i, s.srq)}, {"wr", rec_->recv_wrs(i, srq_wrs_.data())}, {"ret", rc}},
                t0);
        if (rc) fail("node" + std::to_string(i) + ": ibv_post_srq_recv failed (" + std::to_string(rc) + ")");
    }

    /// An SRQ receive completion of node i's QP q: the slot its wr_id names (the SRQ's slot count
    /// if it names none outstanding: a bad completion). Checks the WQEs of one QP come in posting
    /// order (o10-53.2.1: an SRQ hands out its WQEs in order, and a QP's messages arrive in
    /// order) and, with --verify, the fields check_recv_wc checks except wr_id.
    unsigned srq_completion(unsigned i, const phase_spec& ph, uint64_t size, unsigned q, const ibv_wc& wc,
                            bool marker) {
        side& s = side_[i];
        const bool v = spec_.verify;
        const uint64_t slot = wc.wr_id & 0xFFFFFF, seq = wc.wr_id >> 24;
        const verify::where w =
            at(ph, size, i, q, s.rq_done[q], marker ? "marker receive completion" : "SRQ receive completion");
        if (slot >= s.srq_slots || !s.slot_busy[slot] || s.slot_seq[slot] != seq) {
            if (!v)
                fail("node" + std::to_string(i) +
                     ": SRQ receive completion for a work request that is not "
                     "outstanding (wr_id " +
                     hex(wc.wr_id) + ")");
            chk_.bad_completion(w, "wr_id " + hex(wc.wr_id) + " is not an outstanding SRQ work request");
            return s.srq_slots;
        }
        s.slot_busy[slot] = 0;
        if (seq + 1 <= s.qp_last_seq[q]) {
            if (!v)
                fail("node" + std::to_string(i) + ": QP " + std::to_string(q) + " took SRQ WQE " +
                     std::to_string(seq) + " after WQE " + std::to_string(s.qp_last_seq[q] - 1) +
                     " (an SRQ hands out its WQEs in order, o10-53.2.1)");
            chk_.bad_completion(w, "SRQ WQE " + std::to_string(seq) + " after WQE " +
                                       std::to_string(s.qp_last_seq[q] - 1) + " (out of order)");
        }
        s.qp_last_seq[q] = seq + 1;
        if (!v) return unsigned(slot);
        const ibv_wc_opcode op = marker && tr_ != transport::ud ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
        const uint64_t len = marker ? payload_off() : recv_len(size);
        if (wc.opcode != op)
            chk_.bad_completion(w,
                                "opcode " + std::to_string(wc.opcode) + ", expected " + std::to_string(op));
        if (wc.byte_len != len)
            chk_.bad_completion(
                w, "byte_len " + std::to_string(wc.byte_len) + ", expected " + std::to_string(len));
        if (!marker && (wc.wc_flags & IBV_WC_WITH_IMM))
            chk_.bad_completion(w, "carries immediate data, none was sent");
        if (tr_ == transport::ud && wc.src_qp != info_[peer_of(i)].qpn[q])
            chk_.bad_completion(w, "source QP " + std::to_string(wc.src_qp) + ", expected " +
                                       std::to_string(info_[peer_of(i)].qpn[q]));
        return unsigned(slot);
    }

    /// Reset -> RTS of node i's UC or UD QP q (the masks of e2e_uc_test / e2e_ud_test). UC: the
    /// RC path attributes without the reliability ones, access flags REMOTE_WRITE at most; UD: the
    /// Q_Key only, the address comes with every send WR.
    int connect_unreliable(unsigned i, unsigned q, int access) {
        ibv_qp* qp = side_[i].qps[q];
        const peer_info& peer = info_[peer_of(i)];
        const bool ud = tr_ == transport::ud;
        ibv_qp_attr attr{};
        attr.qp_state = IBV_QPS_INIT;
        attr.pkey_index = 0;
        attr.port_num = 1;
        attr.qp_access_flags = unsigned(access) & unsigned(IBV_ACCESS_REMOTE_WRITE);
        attr.qkey = ud_qkey;
        int rc =
            modify(i, qp, attr,
                   IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS));
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_RTR;
        if (ud) {
            rc |= modify(i, qp, attr, IBV_QP_STATE);
        } else {
            attr.path_mtu = ibv_mtu(__builtin_ctz(spec_.mtu) - 7);
            attr.dest_qp_num = peer.qpn[q];
            attr.rq_psn = peer.psn;
            attr.ah_attr.dlid = peer.lid;
            attr.ah_attr.port_num = 1;
            rc |= modify(i, qp, attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN);
        }
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_RTS;
        attr.sq_psn = info_[i].psn;
        rc |= modify(i, qp, attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
        return rc;
    }

    /// ibv_modify_qp, recorded with --record.
    int modify(unsigned i, ibv_qp* qp, ibv_qp_attr& attr, int mask) {
        const sc_time t0 = sc_time_stamp();
        const int rc = ibv_modify_qp(qp, &attr, mask);
        if (rec_)
            rec_->call(i, "modify_qp",
                       {{"qp", rec_->name_of(i, qp)}, {"attr", rec_->qp_attr(i, attr, mask)}, {"ret", rc}},
                       t0);
        return rc;
    }

    /// UD: where node i's QPs send. QP q sends to the peer's QP q through one address handle
    /// towards the peer's LID (no GRH, as perftest on an IB port). mcast_bw would set the group's
    /// AH and QPN 0xFFFFFF here instead.
    void make_ud_dests(unsigned i) {
        side& s = side_[i];
        const peer_info& peer = info_[peer_of(i)];
        s.dest.clear();
        if (mcast_ && i == 0) {  // QP q: its group's AH (multicast needs the GRH), QPN 0xFFFFFF
            for (unsigned q = 0; q < nq_; ++q) {
                ibv_ah_attr a{};
                a.dlid = uint16_t(mcast_mlid + q);
                a.port_num = 1;
                a.is_global = 1;
                a.grh.dgid = mcast_gid(q);
                a.grh.hop_limit = 1;
                const sc_time t0 = sc_time_stamp();
                ibv_ah* ah = ibv_create_ah(s.pd, &a);
                if (rec_ && ah)
                    rec_->call(i, "create_ah",
                               {{"pd", "pd0"},
                                {"dlid", a.dlid},
                                {"sl", a.sl},
                                {"dgid", trace::gid_hex(a.grh.dgid)},
                                {"hop_limit", a.grh.hop_limit},
                                {"ret", rec_->add(i, ah, "ah")}},
                               t0);
                if (!ah)
                    fail("node0: ibv_create_ah for multicast group " + std::to_string(q) + " failed (errno " +
                         std::to_string(errno) + ")");
                s.dest.push_back(ud_dest{ah, mcast_qpn, ud_qkey});
            }
            return;
        }
        ibv_ah_attr a{};
        a.dlid = peer.lid;
        a.port_num = 1;
        const sc_time t0 = sc_time_stamp();
        ibv_ah* ah = ibv_create_ah(s.pd, &a);
        if (!ah)
            fail("node" + std::to_string(i) + ": ibv_create_ah failed (errno " + std::to_string(errno) + ")");
        if (rec_)
            rec_->call(i, "create_ah",
                       {{"pd", "pd0"}, {"dlid", a.dlid}, {"sl", a.sl}, {"ret", rec_->add(i, ah, "ah")}}, t0);
        for (unsigned q = 0; q < nq_; ++q) s.dest.push_back(ud_dest{ah, peer.qpn[q], ud_qkey});
    }

    /// QP index of `qpn` on node i, or the QP count if it is not one of ours.
    unsigned qp_index(unsigned i, uint32_t qpn) const {
        for (unsigned q = 0; q < side_[i].qps.size(); ++q)
            if (side_[i].qps[q]->qp_num == qpn) return q;
        return unsigned(side_[i].qps.size());
    }

    uint32_t inline_limit(bool latency) const {
        const int v = wp_.inline_bytes;
        return v >= 0 ? uint32_t(v) : (latency ? 220u : 0u);
    }

    /// The message of a failed completion: status, opcode, wr_id (`wr_id` as the caller prints
    /// it) and, when the transport gave up (RETRY_EXC_ERR), what the cables' fault counters say
    /// (as the messages of a run that stalled do).
    std::string completion_error(const std::string& node, const ibv_wc& wc, const std::string& wr_id) const {
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
    std::string cable_faults() const {
        const bool sw = m_.net.has_switch();
        std::string down, lossy;
        char line[160];
        for (unsigned n = 0; n < m_.size(); ++n) {
            // Link N: node N's transmit direction and, through a switch, the switch's output to it.
            const fault_injector* dirs[2] = {&m_.at(n).cable.faults, sw ? &m_.net.sw->faults(n) : nullptr};
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
                (sw ? "switch port " + std::to_string(n) : "node" + std::to_string(1 - n) + ".port1") + ")";
            if (lost_down) {
                std::snprintf(line, sizeof line, " went down at %.3f us simulated time (%llu packet%s lost)",
                              st.down_at_ns / 1000.0, static_cast<unsigned long long>(lost_down),
                              lost_down == 1 ? "" : "s");
                down += name + line;
            } else {
                std::snprintf(line, sizeof line, " lost %llu packet%s (drop_rate %g)",
                              static_cast<unsigned long long>(dropped), dropped == 1 ? "" : "s",
                              st.drop_rate);
                lossy += name + line;
            }
        }
        return down.empty() ? lossy : down;
    }

    /// Polls `cq` for one completion, sleeping on the CQ when empty; fails the run on error.
    ibv_wc poll_one(unsigned i, ibv_cq* cq) {
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
                     (tr_ == transport::rc ? "" : " (UC and UD do not retransmit a lost message)") +
                     cable_faults());
        }
    }

    /// One send WR on node i's QP q: `local` (length bytes) is the gather source, or the READ /
    /// atomic destination; `remote` the peer's address.
    void post(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t local, uint64_t length, uint64_t remote,
              uint64_t wr_id, bool signaled, bool inl, uint64_t compare_add = 0, uint64_t swap = 0) {
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
        ibv_send_wr wr =
            make_wr(i, q, op, local, length, remote, wr_id, signaled, inl, compare_add, swap, sge);
        ibv_send_wr* bad = nullptr;
        const sc_time t0 = sc_time_stamp();
        const int rc = ibv_post_send(side_[i].qps[q], &wr, &bad);
        if (rec_)
            rec_->call(
                i, "post_send",
                {{"qp", rec_->name_of(i, side_[i].qps[q])}, {"wr", rec_->send_wrs(i, &wr)}, {"ret", rc}}, t0);
        if (rc) fail("node" + std::to_string(i) + ": ibv_post_send failed (" + std::to_string(rc) + ")");
    }

    /// QP q's WRs not yet posted (workload.post_list > 1).
    struct pending_list {
        std::vector<ibv_send_wr> wrs;
        std::vector<ibv_sge> sges;
    };
    std::vector<pending_list> lists_;

    /// Posts QP q's pending list as one ibv_post_send (one doorbell).
    void flush_list(unsigned i, unsigned q) {
        pending_list& l = lists_[q];
        if (l.wrs.empty()) return;
        for (size_t k = 0; k < l.wrs.size(); ++k)
            l.wrs[k].next = k + 1 < l.wrs.size() ? &l.wrs[k + 1] : nullptr;
        ibv_send_wr* bad = nullptr;
        const sc_time t0 = sc_time_stamp();
        const int rc = ibv_post_send(side_[i].qps[q], l.wrs.data(), &bad);
        if (rec_)
            rec_->call(i, "post_send",
                       {{"qp", rec_->name_of(i, side_[i].qps[q])},
                        {"wr", rec_->send_wrs(i, l.wrs.data())},
                        {"ret", rc}},
                       t0);
        if (rc)
            fail("node" + std::to_string(i) + ": ibv_post_send of a list of " + std::to_string(l.wrs.size()) +
                 " failed (" + std::to_string(rc) + ")");
        l.wrs.clear();
        l.sges.clear();
    }

    /// One send WR (its one SGE in `sge`, which must outlive the post).
    ibv_send_wr make_wr(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t local, uint64_t length,
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
        return wr;
    }

    /// uc_write_bw, ud_send_bw: a zero-length WRITE / SEND with immediate `marker_imm`, signaled,
    /// on node0's QP q after its last message (wr_id `wr_id`).
    void post_marker(unsigned q, uint64_t wr_id) {
        side& s = side_[0];
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = marker_imm;
        if (tr_ == transport::ud) {
            wr.opcode = IBV_WR_SEND_WITH_IMM;
            wr.wr.ud.ah = s.dest[q].ah;
            wr.wr.ud.remote_qpn = s.dest[q].qpn;
            wr.wr.ud.remote_qkey = s.dest[q].qkey;
        } else {
            wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
            wr.wr.rdma.remote_addr = info_[1].addr + uint64_t(q) * area_;
            wr.wr.rdma.rkey = info_[1].rkey;
        }
        ibv_send_wr* bad = nullptr;
        const sc_time t0 = sc_time_stamp();
        const int rc = ibv_post_send(s.qps[q], &wr, &bad);
        if (rec_)
            rec_->call(0, "post_send",
                       {{"qp", rec_->name_of(0, s.qps[q])}, {"wr", rec_->send_wrs(0, &wr)}, {"ret", rc}}, t0);
        if (rc) fail("node0: ibv_post_send of the end-of-stream marker failed (" + std::to_string(rc) + ")");
    }

    /// Posts one receive of QP q's whole receive area; wr_id is the QP's receive sequence number.
    void post_recv(unsigned i, unsigned q) {
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

    /// Waits until the byte at our receive area offset `off` equals `v` (perftest's
    /// write_lat spins on the last byte; here the CPU sleeps on the watched address).
    void wait_byte(unsigned i, uint64_t off, uint8_t v) {
        if (rec_)
            rec_->call(i, "wait_byte",
                       {{"buf", "buf0"}, {"offset", recv_area(i, 0) + off - side_[i].buf}, {"value", v}});
        uint64_t pa = 0;
        (void)sw_[i]->as.translate(recv_area(i, 0) + off, &pa);  // its own buffer, mapped since setup
        for (;;) {
            uint8_t b = 0;
            bus(i).mem_read(pa, &b, 1);
            if (b == v) return;
            if (!bus(i).wait_write(pa, 1, timeout_ns()))
                fail("node" + std::to_string(i) + ": RDMA WRITE did not arrive within workload.timeout_us" +
                     cable_faults());
        }
    }
    void set_send_byte(unsigned i, uint64_t off, uint8_t v) {
        record_write(i, send_area(i, 0) + off, &v, 1);
        (void)sw_[i]->as.write(send_area(i, 0) + off, &v, 1);  // its own buffer, mapped since setup
        bus(i).cpu_cost(cpu_op::memcpy_64b);
    }

    // ------------------------------------------------------------------ --verify helpers
    // Loads and stores of simulated memory through the processes' address spaces, charging no CPU
    // cost: they take no simulated time. They address the workload's own buffers, mapped since
    // setup, so they cannot fail (hence the (void) casts).
    const uint8_t* peek(unsigned i, uint64_t va, uint64_t n) {
        got_.resize(n);
        (void)sw_[i]->as.read(va, got_.data(), n);
        return got_.data();
    }
    uint64_t peek64(unsigned i, uint64_t va) {
        uint64_t v = 0;
        (void)sw_[i]->as.read(va, &v, 8);
        return v;
    }
    void poke64(unsigned i, uint64_t va, uint64_t v) {
        record_write(i, va, &v, 8);
        (void)sw_[i]->as.write(va, &v, 8);
    }
    /// --record: a poll that returned completions (empty polls are not recorded).
    void record_poll(unsigned i, ibv_cq* cq, const ibv_wc* wcs, int n) {
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
    void record_write(unsigned i, uint64_t va, const void* p, size_t n) {
        if (rec_)
            rec_->call(i, "fill",
                       {{"buf", "buf0"}, {"offset", va - side_[i].buf}, {"hex", trace::hex(p, n)}});
    }
    void poke_data(unsigned i, uint64_t va, uint64_t n, uint64_t key, int last = -1) {
        scratch_.resize(n);
        verify::fill(key, scratch_.data(), n);
        if (rec_)
            rec_->call(i, "fill", {{"buf", "buf0"}, {"offset", va - side_[i].buf}, {"len", n}, {"key", key}});
        if (last >= 0 && n) {
            scratch_[n - 1] = uint8_t(last);
            record_write(i, va + n - 1, &scratch_[n - 1], 1);
        }
        (void)sw_[i]->as.write(va, scratch_.data(), n);
    }
    void clear(unsigned i, uint64_t va, uint64_t n) {
        scratch_.assign(n, 0);
        if (rec_)
            rec_->call(i, "fill", {{"buf", "buf0"}, {"offset", va - side_[i].buf}, {"len", n}, {"byte", 0}});
        (void)sw_[i]->as.write(va, scratch_.data(), n);
    }
    uint64_t key(unsigned node, unsigned q, uint64_t step, uint64_t message) const {
        return verify::data_key(spec_.seed, node, q, step, message);
    }
    verify::where at(const phase_spec& ph, uint64_t size, unsigned node, unsigned q, uint64_t message,
                     const char* what) const {
        return verify::where{ph.workload.c_str(), size, node, q, message, what};
    }
    /// Checks a send completion's opcode, wr_id and QP.
    void check_send_wc(const verify::where& w, const ibv_wc& wc, ibv_wc_opcode op, uint64_t wr_id) {
        if (wc.opcode != op)
            chk_.bad_completion(w,
                                "opcode " + std::to_string(wc.opcode) + ", expected " + std::to_string(op));
        if (wc.wr_id != wr_id)
            chk_.bad_completion(w, "wr_id " + hex(wc.wr_id) + ", expected " + hex(wr_id) +
                                       " (completions out of order or missing)");
        if (wc.qp_num != side_[w.node].qps[w.qp]->qp_num)
            chk_.bad_completion(w, "QP number " + std::to_string(wc.qp_num) + ", expected " +
                                       std::to_string(side_[w.node].qps[w.qp]->qp_num));
    }
    /// Checks a receive completion of a `size`-byte message (opcode RECV, byte_len, no immediate,
    /// wr_id in posting order; UD: the GRH area in byte_len, the sender's QP as source).
    void check_recv_wc(const verify::where& w, const ibv_wc& wc, uint64_t size) {
        check_send_wc(w, wc, IBV_WC_RECV, side_[w.node].rq_done[w.qp]);
        if (wc.byte_len != recv_len(size))
            chk_.bad_completion(w, "byte_len " + std::to_string(wc.byte_len) + ", expected " +
                                       std::to_string(recv_len(size)));
        if (wc.wc_flags & IBV_WC_WITH_IMM) chk_.bad_completion(w, "carries immediate data, none was sent");
        if (tr_ == transport::ud && wc.src_qp != info_[peer_of(w.node)].qpn[w.qp])
            chk_.bad_completion(w, "source QP " + std::to_string(wc.src_qp) + ", expected " +
                                       std::to_string(info_[peer_of(w.node)].qpn[w.qp]));
        if (mcast_ && !(wc.wc_flags & IBV_WC_GRH))
            chk_.bad_completion(w, "no GRH flag: a multicast datagram carries a GRH");
    }
    /// Puts this size's counts into its row.
    void take_counts(size_result& r) {
        r.verified = true;
        r.bytes_checked = chk_.bytes_checked;
        r.mismatches = chk_.mismatches;
        r.bad_completions = chk_.bad_completions;
        chk_.bytes_checked = chk_.mismatches = chk_.bad_completions = 0;
    }

    /// The plain end-of-size data check without --verify: every QP's destination holds its source.
    void same_bytes(unsigned src_node, uint64_t src, unsigned dst_node, uint64_t dst, uint64_t size) {
        std::vector<uint8_t> a(size), b(size);
        (void)sw_[src_node]->as.read(src, a.data(), size);  // the QPs' own buffers, mapped since setup
        (void)sw_[dst_node]->as.read(dst, b.data(), size);
        if (a != b)
            fail("data check failed: " + std::to_string(size) + " bytes at node" + std::to_string(dst_node) +
                 " differ from node" + std::to_string(src_node) + "'s" +
                 (tr_ == transport::uc ? " (UC does not retransmit a lost WRITE)" : ""));
    }

    // ------------------------------------------------------------------ phases
    void lat_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep) {
        const bool client = i == 0;
        const bool v = spec_.verify;
        const bool cas = spec_.atomic == "cmp_swap";
        for (size_t si = 0; si < ph.sizes.size(); ++si) {
            const uint64_t size = ph.sizes[si];
            const uint64_t step = step0 + si;
            const bool inl = (op == op_kind::write || op == op_kind::send) && size <= inline_limit(true);
            const uint64_t last = size ? size - 1 : 0;
            std::vector<double> samples;
            samples.reserve(ph.iters);
            uint64_t current = 0;  // atomics: the remote value a serial execution holds now
            if (client) {
                if (op == op_kind::write) {
                    // The flag byte must not already hold the first iteration's value.
                    clear(0, recv_area(0, 0), std::max<uint64_t>(size, 1));
                    clear(1, recv_area(1, 0), std::max<uint64_t>(size, 1));
                } else if (op == op_kind::atomic) {
                    current = verify::value(key(1, 0, step, ~uint64_t(0)));
                    poke64(1, recv_area(1, 0), current);
                }
            }
            bar_.arrive();
            for (uint64_t it = 0; it < ph.iters; ++it) {
                const uint8_t flag = uint8_t(1 + (it % 254));
                const bool traced = it == ph.iters / 2;
                if (client) {
                    if (traced) {  // the latency breakdown: this iteration's path through both HCAs
                        m_.at(0).adapter.probe.arm();
                        m_.at(1).adapter.probe.arm();
                    }
                    const uint64_t t0 = bus(i).now_ns();
                    // The breakdown partitions this iteration's sample: from the sample's own
                    // start to its own end (the times the sample is taken from).
                    if (traced) cpu_mark_[0] = ns_time(t0);
                    auto sample = [&](double div) {
                        const uint64_t t1 = bus(i).now_ns();
                        samples.push_back(to_us(t1 - t0) / div);
                        if (traced) cpu_mark_[4] = ns_time(t1);
                    };
                    if (op == op_kind::write) {
                        if (v) poke_data(0, send_area(0, 0), size, key(0, 0, step, it), flag);
                        set_send_byte(i, last, flag);
                        post(i, 0, IBV_WR_RDMA_WRITE, send_area(0, 0), size, info_[1].addr, it, true, inl);
                        wait_byte(i, last, flag);
                        sample(2.0);
                        if (traced) cpu_mark_[3] = cpu_mark_[4];
                        if (v)
                            chk_.bytes(at(ph, size, 0, 0, it, "destination buffer"),
                                       peek(0, recv_area(0, 0), size), size, key(1, 0, step, it), flag);
                        const ibv_wc wc = poll_one(i, side_[i].scq);
                        if (v)
                            check_send_wc(at(ph, size, 0, 0, it, "send completion"), wc, IBV_WC_RDMA_WRITE,
                                          it);
                    } else if (op == op_kind::send) {
                        if (v) poke_data(0, send_area(0, 0), size, key(0, 0, step, it));
                        post(i, 0, IBV_WR_SEND, send_area(0, 0), size, 0, it, true, inl);
                        const ibv_wc rwc = poll_one(i, side_[i].rcq);
                        if (traced) cpu_mark_[3] = sc_time_stamp();
                        if (v) {
                            check_recv_wc(at(ph, size, 0, 0, it, "receive completion"), rwc, size);
                            chk_.bytes(at(ph, size, 0, 0, it, "receive buffer"),
                                       peek(0, recv_area(0, 0) + payload_off(), size), size,
                                       key(1, 0, step, it));
                        }
                        ++side_[i].rq_done[0];
                        post_recv(i, 0);
                        sample(2.0);
                        const ibv_wc wc = poll_one(i, side_[i].scq);
                        if (v) check_send_wc(at(ph, size, 0, 0, it, "send completion"), wc, IBV_WC_SEND, it);
                    } else if (op == op_kind::read) {
                        if (v) {  // a new remote pattern each iteration, so stale data is caught
                            poke_data(1, send_area(1, 0), size, key(1, 0, step, it));
                            clear(0, recv_area(0, 0), size);
                        }
                        post(i, 0, IBV_WR_RDMA_READ, recv_area(0, 0), size, info_[1].send_addr, it, true,
                             false);
                        const ibv_wc wc = poll_one(i, side_[i].scq);
                        sample(1.0);  // perftest: the whole round trip
                        if (traced) cpu_mark_[3] = cpu_mark_[4];
                        if (v) {
                            check_send_wc(at(ph, size, 0, 0, it, "READ completion"), wc, IBV_WC_RDMA_READ,
                                          it);
                            chk_.bytes(at(ph, size, 0, 0, it, "READ destination"),
                                       peek(0, recv_area(0, 0), size), size, key(1, 0, step, it));
                        }
                    } else {
                        const uint64_t operand = verify::value(key(0, 0, step, it));
                        const uint64_t before = current;
                        current = cas ? operand : current + operand;
                        if (v) clear(0, recv_area(0, 0), 8);
                        if (cas)
                            post(i, 0, IBV_WR_ATOMIC_CMP_AND_SWP, recv_area(0, 0), 8, info_[1].addr, it, true,
                                 false, before, operand);
                        else
                            post(i, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, recv_area(0, 0), 8, info_[1].addr, it,
                                 true, false, operand);
                        const ibv_wc wc = poll_one(i, side_[i].scq);
                        sample(1.0);  // perftest: the whole round trip
                        if (traced) cpu_mark_[3] = cpu_mark_[4];
                        if (v) {
                            check_send_wc(at(ph, size, 0, 0, it, "atomic completion"), wc,
                                          cas ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, it);
                            chk_.value(at(ph, size, 0, 0, it, "fetched value"), peek64(0, recv_area(0, 0)),
                                       before);
                        }
                    }
                } else if (op == op_kind::write) {
                    wait_byte(i, last, flag);
                    if (traced) cpu_mark_[1] = sc_time_stamp();
                    if (v) {
                        chk_.bytes(at(ph, size, 1, 0, it, "destination buffer"),
                                   peek(1, recv_area(1, 0), size), size, key(0, 0, step, it), flag);
                        poke_data(1, send_area(1, 0), size, key(1, 0, step, it), flag);
                    }
                    set_send_byte(i, last, flag);
                    if (traced) cpu_mark_[2] = sc_time_stamp();
                    post(i, 0, IBV_WR_RDMA_WRITE, send_area(1, 0), size, info_[0].addr, it, true, inl);
                    const ibv_wc wc = poll_one(i, side_[i].scq);
                    if (v)
                        check_send_wc(at(ph, size, 1, 0, it, "send completion"), wc, IBV_WC_RDMA_WRITE, it);
                } else if (op == op_kind::send) {
                    const ibv_wc rwc = poll_one(i, side_[i].rcq);
                    if (traced) cpu_mark_[1] = sc_time_stamp();
                    if (v) {
                        check_recv_wc(at(ph, size, 1, 0, it, "receive completion"), rwc, size);
                        chk_.bytes(at(ph, size, 1, 0, it, "receive buffer"),
                                   peek(1, recv_area(1, 0) + payload_off(), size), size, key(0, 0, step, it));
                        poke_data(1, send_area(1, 0), size, key(1, 0, step, it));
                    }
                    ++side_[i].rq_done[0];
                    if (traced) cpu_mark_[2] = sc_time_stamp();
                    post(i, 0, IBV_WR_SEND, send_area(1, 0), size, 0, it, true,
                         inl);  // answer first, like perftest
                    post_recv(i, 0);
                    const ibv_wc wc = poll_one(i, side_[i].scq);
                    if (v) check_send_wc(at(ph, size, 1, 0, it, "send completion"), wc, IBV_WC_SEND, it);
                }
                // READ and atomics: the server's CPU takes no part.
            }
            bar_.arrive();
            if (client) {
                size_result r = latency_stats(size, samples);
                r.iters = ph.iters;
                take_breakdown(r, op);
                if (v && op == op_kind::atomic)
                    chk_.value(at(ph, size, 1, 0, ph.iters, "remote value after the last atomic"),
                               peek64(1, recv_area(1, 0)), current);
                if (v) take_counts(r);
                rep.results.push_back(r);
            }
            bar_.arrive();
        }
    }

    void bw_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep) {
        const bool client = i == 0;
        const bool v = spec_.verify;
        const bool cas = spec_.atomic == "cmp_swap";
        side& s = side_[i];
        const unsigned nq = nq_;
        const unsigned depth = wp_.tx_depth;
        for (size_t si = 0; si < ph.sizes.size(); ++si) {
            const uint64_t size = ph.sizes[si];
            const uint64_t step = step0 + si;
            const bool inl = (op == op_kind::write || op == op_kind::send) && size <= inline_limit(false);
            // Atomics: the remote value of each QP in a serial execution, and the value each
            // outstanding atomic (slot = index mod depth) must fetch. workload.atomic_word
            // shared: every QP's atomics go to QP 0's word; the order the responder executes
            // them in is known only afterwards, so --verify keeps what each fetched and checks
            // that they form one serial execution (checker::shared_word).
            const bool shared = op == op_kind::atomic && wp_.atomic_word.get() == "shared";
            std::vector<uint64_t> current, fetched;
            std::vector<verify::shared_atomic> shared_ops;
            std::array<uint64_t, 3> srq_c0{};  // srq_*: node1's SRQ counters at the size's start
            if (client) {
                for (unsigned q = 0; q < nq; ++q) {
                    if (op == op_kind::atomic) {
                        current.push_back(verify::value(key(1, q, step, ~uint64_t(0))));
                        poke64(1, recv_area(1, q), current.back());
                        if (v) clear(0, recv_area(0, q), uint64_t(depth) * 8);
                    } else if (v && op == op_kind::read) {
                        poke_data(1, send_area(1, q), size, key(1, q, step, 0));
                        clear(0, recv_area(0, q), size);
                    } else if (v) {
                        poke_data(0, send_area(0, q), size, key(0, q, step, 0));
                        for (unsigned r = 1; r < nn_; ++r) clear(r, recv_area(r, q), payload_off() + size);
                    }
                }
                if (op == op_kind::atomic) fetched.assign(uint64_t(nq) * depth, 0);
                if (shared && v) shared_ops.reserve(ph.iters);
                stream_end_ns_ = no_time;
                if (srq_) srq_c0 = srq_counts();
                if (srq_ && v)  // the SRQ buffers hold no earlier data: a buffer never written is caught
                    for (unsigned k = 0; k < side_[1].srq_slots; ++k)
                        clear(1, srq_slot(1, k), payload_off() + size);
            }
            uint64_t recv_done = 0;
            bar_.arrive();
            if (client) {
                const unsigned cq_mod = std::min<unsigned>(wp_.cq_mod, depth);
                const ibv_wc_opcode want_op = op == op_kind::write  ? IBV_WC_RDMA_WRITE
                                              : op == op_kind::send ? IBV_WC_SEND
                                              : op == op_kind::read ? IBV_WC_RDMA_READ
                                              : cas                 ? IBV_WC_COMP_SWAP
                                                                    : IBV_WC_FETCH_ADD;
                std::vector<uint64_t> posted(nq, 0), completed(nq, 0);
                if (wp_.post_list > 1) {
                    lists_.assign(nq, pending_list{});
                    for (pending_list& l : lists_) {
                        l.wrs.reserve(wp_.post_list);
                        l.sges.reserve(wp_.post_list);
                    }
                }
                const std::vector<uint64_t> busy0 = busy_counts();
                const uint64_t t0 = bus(i).now_ns();
                uint64_t total_posted = 0, total_completed = 0;
                while (total_completed < ph.iters) {
                    // WR n goes to QP n mod nq; each QP signals every cq_mod-th WR and its last.
                    bool progress = false;
                    while (total_posted < ph.iters) {
                        const unsigned q = unsigned(total_posted % nq);
                        if (posted[q] - completed[q] >= depth) break;
                        const uint64_t m = posted[q];
                        const bool sig = (m + 1) % cq_mod == 0 || m + 1 == quota_of(ph, q);
                        const uint64_t wr_id = (uint64_t(q) << 48) | m;
                        const uint64_t peer_recv = info_[1].addr + uint64_t(q) * area_;
                        if (op == op_kind::write)
                            post(i, q, IBV_WR_RDMA_WRITE, send_area(0, q), size, peer_recv, wr_id, sig, inl);
                        else if (op == op_kind::send)
                            post(i, q, IBV_WR_SEND, send_area(0, q), size, 0, wr_id, sig, inl);
                        else if (op == op_kind::read)
                            post(i, q, IBV_WR_RDMA_READ, recv_area(0, q), size,
                                 info_[1].send_addr + uint64_t(q) * area_, wr_id, sig, false);
                        else {
                            const uint64_t operand = verify::value(key(0, q, step, m));
                            // Shared: every compare-and-swap expects the word's initial value
                            // (the first one executed swaps, the others fetch its operand).
                            const uint64_t before = current[shared ? 0 : q];
                            if (!shared) {
                                current[q] = cas ? operand : before + operand;
                                fetched[uint64_t(q) * depth + m % depth] = before;
                            }
                            const uint64_t slot = recv_area(0, q) + (m % depth) * 8;
                            const uint64_t target = shared ? info_[1].addr : peer_recv;
                            if (cas)
                                post(i, q, IBV_WR_ATOMIC_CMP_AND_SWP, slot, 8, target, wr_id, sig, false,
                                     before, operand);
                            else
                                post(i, q, IBV_WR_ATOMIC_FETCH_AND_ADD, slot, 8, target, wr_id, sig, false,
                                     operand);
                        }
                        ++posted[q];
                        ++total_posted;
                        progress = true;
                    }
                    // Lists not full when the QPs ran out of credit (or work): posted now.
                    for (unsigned q = 0; q < lists_.size(); ++q) flush_list(i, q);
                    ibv_wc wcs[16];
                    int n = ibv_poll_cq(s.scq, 16, wcs);
                    if (n < 0) fail("node0: ibv_poll_cq failed");
                    record_poll(i, s.scq, wcs, n);
                    for (int k = 0; k < n; ++k) {
                        const ibv_wc& wc = wcs[k];
                        if (wc.status != IBV_WC_SUCCESS) fail(completion_error("node0", wc, hex(wc.wr_id)));
                        const unsigned q = unsigned(wc.wr_id >> 48);
                        const uint64_t idx = wc.wr_id & ((uint64_t(1) << 48) - 1);
                        if (q >= nq || idx < completed[q] || idx >= posted[q]) {
                            if (!v)
                                fail("node0: completion for a work request that is not outstanding (wr_id " +
                                     hex(wc.wr_id) + ")");
                            chk_.bad_completion(
                                at(ph, size, 0, q < nq ? q : 0, idx, "send completion"),
                                "wr_id " + hex(wc.wr_id) + " is not an outstanding work request");
                            continue;
                        }
                        const uint64_t first = completed[q];
                        if (v) {
                            // Signaled: every cq_mod-th WR and the QP's last, in posting order.
                            const uint64_t want =
                                std::min(quota_of(ph, q) - 1, (first / cq_mod + 1) * cq_mod - 1);
                            check_send_wc(at(ph, size, 0, q, idx, "send completion"), wc, want_op,
                                          (uint64_t(q) << 48) | want);
                        }
                        total_completed += idx + 1 - first;
                        completed[q] = idx + 1;
                        if (!v) continue;
                        // Known complete, and not yet overwritten by a later message: check now.
                        // (UC: the completion only says the WRITE is on the wire; checked after
                        // the markers.)
                        if (op == op_kind::write && tr_ == transport::rc)
                            chk_.bytes(at(ph, size, 1, q, idx, "destination buffer"),
                                       peek(1, recv_area(1, q), size), size, key(0, q, step, 0));
                        else if (op == op_kind::read)
                            chk_.bytes(at(ph, size, 0, q, idx, "READ destination"),
                                       peek(0, recv_area(0, q), size), size, key(1, q, step, 0));
                        else if (op == op_kind::atomic)
                            for (uint64_t m = first; m <= idx; ++m) {
                                const uint64_t got = peek64(0, recv_area(0, q) + (m % depth) * 8);
                                if (shared)
                                    shared_ops.push_back({q, m, got, verify::value(key(0, q, step, m))});
                                else
                                    chk_.value(at(ph, size, 0, q, m, "fetched value"), got,
                                               fetched[uint64_t(q) * depth + m % depth]);
                            }
                    }
                    if (n == 0 && !progress && ibv_wait_cq(s.scq, timeout_ns()) != 0)
                        fail("node0: bandwidth test stalled (no completion within workload.timeout_us)" +
                             cable_faults());
                }
                const uint64_t t1 = bus(i).now_ns();
                lists_.clear();
                size_result r;
                r.size_bytes = size;
                r.iters = ph.iters;
                const double secs = double(t1 - t0) * 1e-9;
                r.bw_gbps = secs > 0 ? double(size) * double(ph.iters) * 8.0 / secs / 1e9 : 0;
                r.msg_rate_mpps = secs > 0 ? double(ph.iters) / secs / 1e6 : 0;
                take_util(r, busy0, t1 - t0);
                rep.results.push_back(r);
                if (tr_ != transport::rc) send_markers(ph, size);
            } else if (tr_ != transport::rc) {
                unacked_receive(i, ph, size, step);
            } else if (srq_) {
                srq_receive(i, ph, size, step);
            } else if (op == op_kind::send) {
                while (recv_done < ph.iters) {
                    const ibv_wc wc = poll_one(i, s.rcq);
                    ++recv_done;
                    unsigned q = qp_index(i, wc.qp_num);
                    if (q == nq) {
                        if (!v) fail("node1: receive completion for unknown QP " + std::to_string(wc.qp_num));
                        chk_.bad_completion(at(ph, size, 1, 0, recv_done - 1, "receive completion"),
                                            "QP number " + std::to_string(wc.qp_num) + " is not one of ours");
                        q = 0;
                    }
                    if (v) {
                        const verify::where w = at(ph, size, 1, q, s.rq_done[q], "receive completion");
                        check_recv_wc(w, wc, size);
                        chk_.bytes(at(ph, size, 1, q, s.rq_done[q], "receive buffer"),
                                   peek(1, recv_area(1, q), size), size, key(0, q, step, 0));
                    }
                    ++s.rq_done[q];
                    post_recv(i, q);
                }
            }
            bar_.arrive();
            if (client && srq_) {
                size_result& r = rep.results.back();
                const std::array<uint64_t, 3> c1 = srq_counts();
                r.srq = true;
                r.srq_qps = nq;
                r.srq_wqes_taken = c1[0] - srq_c0[0];
                r.srq_rnr_naks = c1[1] - srq_c0[1];
                r.srq_empty = c1[2] - srq_c0[2];
            }
            if (client && tr_ == transport::ud) {
                // The receivers' counts: lost datagrams are reported, and fail --verify.
                size_result& r = rep.results.back();
                r.datagrams = true;
                r.datagrams_sent = ph.iters;
                if (mcast_) {
                    r.receivers = nn_ - 1;
                    r.lost_per_receiver.assign(nn_ - 1, 0);
                }
                for (unsigned n = 1; n < nn_; ++n)
                    for (unsigned q = 0; q < nq; ++q) {
                        const uint64_t quota = quota_of(ph, q), got = received_[n][q];
                        const uint64_t lost = quota > got ? quota - got : 0;
                        r.datagrams_lost += lost;
                        r.datagrams_delivered += got;
                        if (mcast_) r.lost_per_receiver[n - 1] += lost;
                        if (!v) continue;
                        chk_.lost(at(ph, size, n, q, 0, "receive queue"), lost, quota);
                        if (got > quota)  // a link duplicated a packet: UD delivers both copies
                            chk_.bad_completion(
                                at(ph, size, n, q, quota, "receive completion"),
                                std::to_string(got - quota) + " datagrams more than were sent");
                    }
            }
            if (client) {
                // After the final completion (UC, UD: after the markers): every QP's destination
                // (or remote value) once more; mcast_bw: at every receiver.
                for (unsigned q = 0; q < nq; ++q) {
                    if (quota_of(ph, q) == 0 || srq_)
                        continue;  // fewer messages than QPs: this one sent none; srq_*: checked at node1
                    if (op == op_kind::atomic) {
                        if (v && shared && q == 0)
                            chk_.shared_word(at(ph, size, 0, 0, 0, ""), cas, current[0], shared_ops,
                                             peek64(1, recv_area(1, 0)));
                        else if (v && !shared)
                            chk_.value(
                                at(ph, size, 1, q, quota_of(ph, q) - 1, "remote value after the last atomic"),
                                peek64(1, recv_area(1, q)), current[q]);
                    } else if (op == op_kind::read) {
                        if (v)
                            chk_.bytes(at(ph, size, 0, q, quota_of(ph, q) - 1,
                                          "READ destination after the last READ"),
                                       peek(0, recv_area(0, q), size), size, key(1, q, step, 0));
                        else
                            same_bytes(1, send_area(1, q), 0, recv_area(0, q), size);
                    } else {
                        for (unsigned n = 1; n < nn_; ++n) {
                            if (tr_ == transport::ud && !v && received_[n][q] == 0)
                                continue;  // every datagram of this QP lost: reported above, nothing to compare
                            if (v)
                                chk_.bytes(at(ph, size, n, q, quota_of(ph, q) - 1,
                                              "destination after the last message"),
                                           peek(n, recv_area(n, q) + payload_off(), size), size,
                                           key(0, q, step, 0));
                            else
                                same_bytes(0, send_area(0, q), n, recv_area(n, q) + payload_off(), size);
                        }
                    }
                }
                if (v) take_counts(rep.results.back());
            }
            bar_.arrive();
        }
    }

    /// uc_write_bw, ud_send_bw, node0 after the timed stream: one end-of-stream marker on each QP
    /// that sent messages (post_marker), then their send completions. A QP's packets reach the
    /// server in order, so once it has a QP's marker every message before it has landed or is
    /// lost. Then tells the server (out of band) that the markers are on the wire.
    void send_markers(const phase_spec& ph, uint64_t size) {
        const bool v = spec_.verify;
        unsigned n = 0;
        for (unsigned q = 0; q < nq_; ++q)
            if (quota_of(ph, q) > 0) {
                post_marker(q, (uint64_t(q) << 48) | quota_of(ph, q));
                ++n;
            }
        for (unsigned k = 0; k < n; ++k) {
            const ibv_wc wc = poll_one(0, side_[0].scq);
            const unsigned q = std::min(unsigned(wc.wr_id >> 48), nq_ - 1);
            if (v)  // the QPs' markers complete in any order
                check_send_wc(at(ph, size, 0, q, quota_of(ph, q), "marker completion"), wc,
                              tr_ == transport::ud ? IBV_WC_SEND : IBV_WC_RDMA_WRITE,
                              (uint64_t(q) << 48) | quota_of(ph, q));
        }
        stream_end_ns_ = bus(0).now_ns();
        stream_end_.notify(SC_ZERO_TIME);
    }

    /// uc_write_bw, ud_send_bw, node1: takes receive completions until every QP's marker is in
    /// or, once the client's markers are on the wire, none has come for workload.drain_us (a
    /// marker lost). ud_send_bw, mcast_bw: every datagram is counted (received_[i]) and, with
    /// --verify, checked like send_bw's, its payload at byte 40. uc_write_bw: the WRITEs complete
    /// nothing here, so only the markers come (WRITE with immediate). Node i is node1 or, in
    /// mcast_bw, any receiver.
    void unacked_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step) {
        side& s = side_[i];
        const std::string node = "node" + std::to_string(i);
        std::vector<uint64_t>& received = received_[i];
        std::vector<uint8_t> marked;  // the QP's marker is in (per size, not per message)
        const bool v = spec_.verify, ud = tr_ == transport::ud;
        const uint64_t drain = std::max<uint64_t>(1, uint64_t(wp_.drain_us.get() * 1000.0));
        received.assign(nq_, 0);
        marked.assign(nq_, 0);
        unsigned want = 0, markers = 0;
        for (unsigned q = 0; q < nq_; ++q) want += quota_of(ph, q) > 0 ? 1 : 0;
        if (!ud)  // nothing to take before the markers: sleep until they are on the wire
            while (stream_end_ns_ == no_time) wait(stream_end_);
        uint64_t idle_since = bus(i).now_ns();
        while (markers < want) {
            ibv_wc wc{};
            const int n = ibv_poll_cq(s.rcq, 1, &wc);
            if (n < 0) fail(node + ": ibv_poll_cq failed");
            record_poll(i, s.rcq, &wc, n);
            if (n == 0) {
                // The CQ is empty. Wait for the next completion in slices of drain_us, so that
                // the end of the stream is noticed without one.
                const uint64_t now = bus(i).now_ns();
                if (stream_end_ns_ != no_time) {
                    const uint64_t since = std::max(idle_since, stream_end_ns_);
                    if (now - since >= drain) break;  // a marker was lost: every message is in or lost
                    ibv_wait_cq(s.rcq, drain - (now - since));
                } else {
                    if (now - idle_since >= timeout_ns())
                        fail(node + ": no datagram within workload.timeout_us" + cable_faults());
                    ibv_wait_cq(s.rcq, std::min(drain, timeout_ns() - (now - idle_since)));
                }
                continue;
            }
            idle_since = bus(i).now_ns();
            if (wc.status != IBV_WC_SUCCESS) fail(completion_error(node, wc, std::to_string(wc.wr_id)));
            unsigned q = qp_index(i, wc.qp_num);
            if (q == nq_) {
                if (!v) fail(node + ": receive completion for unknown QP " + std::to_string(wc.qp_num));
                chk_.bad_completion(at(ph, size, i, 0, 0, "receive completion"),
                                    "QP number " + std::to_string(wc.qp_num) + " is not one of ours");
                continue;
            }
            const bool marker = (wc.wc_flags & IBV_WC_WITH_IMM) && wc.imm_data == marker_imm;
            // ud_srq_bw: the SRQ slot the completion names (checked like check_recv_wc's fields).
            const unsigned slot = srq_ ? srq_completion(i, ph, size, q, wc, marker) : 0;
            if (marker) {
                if (v && !srq_) {
                    const verify::where w = at(ph, size, i, q, received[q], "marker receive completion");
                    check_send_wc(w, wc, ud ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM, s.rq_done[q]);
                    if (wc.byte_len != payload_off())
                        chk_.bad_completion(w, "byte_len " + std::to_string(wc.byte_len) + ", expected " +
                                                   std::to_string(payload_off()));
                }
                if (!marked[q]) {
                    marked[q] = 1;
                    ++markers;
                }
            } else if (ud && !marked[q]) {
                if (srq_) {
                    if (slot < s.srq_slots) srq_payload(i, ph, size, step, q, slot, received[q] + 1);
                } else if (v) {
                    check_recv_wc(at(ph, size, i, q, received[q], "receive completion"), wc, size);
                    chk_.bytes(at(ph, size, i, q, received[q], "receive buffer"),
                               peek(i, recv_area(i, q) + grh_bytes, size), size, key(0, q, step, 0));
                }
                ++received[q];
            } else {
                if (!v)
                    fail(node + ": unexpected receive completion, opcode " + std::to_string(wc.opcode) +
                         ", wr_id " + std::to_string(wc.wr_id));
                chk_.bad_completion(at(ph, size, i, q, received[q], "receive completion"),
                                    "opcode " + std::to_string(wc.opcode) +
                                        " after the end-of-stream marker or "
                                        "without one");
            }
            ++s.rq_done[q];
            if (!srq_)
                post_recv(i, q);
            else if (slot < s.srq_slots)
                post_srq(i, {slot});
        }
    }

    /// srq_bw, node1: takes the size's receive completions from the receive CQ in batches of 16
    /// (perftest's CTX_POLL_BATCH), checks each and reposts the batch's buffers to the SRQ as one
    /// list (one doorbell), so the SRQ stays topped up.
    void srq_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step) {
        side& s = side_[i];
        const bool v = spec_.verify;
        const std::string node = "node" + std::to_string(i);
        std::vector<uint64_t> got(nq_, 0);
        std::vector<uint32_t> repost;
        ibv_wc wcs[16];
        uint64_t done = 0;
        while (done < ph.iters) {
            const int n = ibv_poll_cq(s.rcq, 16, wcs);
            if (n < 0) fail(node + ": ibv_poll_cq failed");
            record_poll(i, s.rcq, wcs, n);
            if (n == 0) {
                if (ibv_wait_cq(s.rcq, timeout_ns()) != 0)
                    fail(node + ": " + ph.workload +
                         " stalled (no receive completion within workload.timeout_us)" + cable_faults());
                continue;
            }
            repost.clear();
            for (int k = 0; k < n; ++k) {
                const ibv_wc& wc = wcs[k];
                if (wc.status != IBV_WC_SUCCESS) fail(completion_error(node, wc, hex(wc.wr_id)));
                ++done;
                unsigned q = qp_index(i, wc.qp_num);
                if (q == nq_) {
                    if (!v) fail(node + ": receive completion for unknown QP " + std::to_string(wc.qp_num));
                    chk_.bad_completion(at(ph, size, i, 0, done - 1, "receive completion"),
                                        "QP number " + std::to_string(wc.qp_num) + " is not one of ours");
                    q = 0;
                }
                const unsigned slot = srq_completion(i, ph, size, q, wc, false);
                if (slot < s.srq_slots) {
                    srq_payload(i, ph, size, step, q, slot, ++got[q]);
                    repost.push_back(slot);
                }
                ++s.rq_done[q];
            }
            post_srq(i, repost);
        }
    }

    /// srq_bw, ud_srq_bw: the payload of QP q's `nth` message of the size (from 1), in SRQ slot
    /// `slot`. --verify: every message, then the slot is cleared (in zero time), so a later
    /// completion whose buffer was never written is caught. Otherwise the QP's last message of
    /// the size against node0's send area (the plain end-of-size check of the other workloads).
    void srq_payload(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step, unsigned q,
                     unsigned slot, uint64_t nth) {
        const uint64_t va = srq_slot(i, slot) + payload_off();
        if (spec_.verify) {
            chk_.bytes(at(ph, size, i, q, side_[i].rq_done[q], "SRQ receive buffer"), peek(i, va, size), size,
                       key(0, q, step, 0));
            clear(i, srq_slot(i, slot), payload_off() + size);
        } else if (nth == quota_of(ph, q)) {
            same_bytes(0, send_area(0, q), i, va, size);
        }
    }

    /// Latency breakdown of the traced iteration (docs/architecture.md, "Path probe"): its
    /// sample cut into consecutive intervals at the times the message passes each stage
    /// (critical-path attribution: for a message of several packets, the times of its last
    /// packet, which the completion waits for). A boundary that comes before the previous one
    /// (work overlapped with the previous stage) is moved up to it, one after the sample's end
    /// down to the end: the stages partition the sample. write_lat, send_lat: the CPU times
    /// (cpu_mark_: client post, server sees, server posts, client sees, sample end) and both
    /// HCAs' probe marks on one time line, each stage averaged over the two directions (the
    /// round trip's halves, as the reported latency is half the round trip). read_lat,
    /// atomic_lat: the one round trip (take_round_trip).
    void take_breakdown(size_result& r, op_kind op) {
        path_probe& p0 = m_.at(0).adapter.probe;
        path_probe& p1 = m_.at(1).adapter.probe;
        p0.disarm();
        p1.disarm();
        using S = path_probe;
        if (op == op_kind::read || op == op_kind::atomic) {
            take_round_trip(r, op, p0, p1);
            return;
        }
        for (path_probe* p : {&p0, &p1})
            for (S::stage s : {S::doorbell, S::wqe_start, S::wire_end, S::rx_engine, S::data_placed})
                if (!p->seen(s)) return;  // a stage was not reached (e.g. a retransmission): no breakdown
        // The CPU marks in order inside the sample.
        const sc_time& end = cpu_mark_[4];
        sc_time m[5] = {cpu_mark_[0]};
        for (int k = 1; k < 4; ++k) m[k] = std::min(std::max(cpu_mark_[k], m[k - 1]), end);
        m[4] = end;
        // One direction: sender post -> doorbell -> WQE -> wire -> responder -> data -> seen.
        auto one_way = [](const sc_time& post, const path_probe& tx, const path_probe& rx,
                          const sc_time& seen) {
            return partition({post, tx.at(S::doorbell), tx.at(S::wqe_start), tx.at(S::wire_end),
                              rx.at(S::rx_engine), rx.at(S::data_placed), seen});
        };
        const std::vector<sc_time> a = one_way(m[0], p0, p1, m[1]);
        const std::vector<sc_time> b = one_way(m[2], p1, p0, m[3]);
        static const char* const names[6] = {"host post + MMIO doorbell",
                                             "doorbell unit + WQE",
                                             "requester: pipeline, payload DMA read, serialisation",
                                             "cable, switch and receive pipeline",
                                             "responder: pipeline, DMA write",
                                             "DMA write lands, host sees it"};
        for (int k = 0; k < 6; ++k) {
            std::string n = names[k];
            if (k == 5 && op == op_kind::send) n = "DMA writes land, CQE, host poll";
            r.breakdown.push_back({n, (a[size_t(k)] + b[size_t(k)]).to_seconds() * 1e6 / 2.0});
        }
        // Software between the directions: the server's turnaround and the client's own (send_lat:
        // reposting its receive before the sample is taken).
        const sc_time sw = (m[2] - m[1]) + (m[4] - m[3]);
        r.breakdown.push_back({"application software (half)", sw.to_seconds() * 1e6 / 2.0});
    }

    /// The intervals between consecutive boundaries t[0] .. t[n-1], each boundary clamped into
    /// [previous boundary, t[n-1]]: n-1 intervals that add up to t[n-1] - t[0] exactly.
    static std::vector<sc_time> partition(std::initializer_list<sc_time> t) {
        std::vector<sc_time> d;
        const sc_time& first = *t.begin();
        const sc_time last = std::max(*(t.end() - 1), first);
        sc_time prev = first;
        for (auto it = t.begin() + 1; it != t.end(); ++it) {
            const sc_time at = std::min(std::max(*it, prev), last);
            d.push_back(at - prev);
            prev = at;
        }
        return d;
    }

    /// READ or atomic: post -> doorbell -> WQE -> request on the wire -> responder -> response
    /// on the wire -> requester places it and writes the CQE -> the poll sees it. Sums to the
    /// reported latency (the whole round trip, as perftest reports it).
    void take_round_trip(size_result& r, op_kind op, const path_probe& p0, const path_probe& p1) {
        using S = path_probe;
        for (S::stage s : {S::doorbell, S::wqe_start, S::wire_end, S::resp_rx, S::completion})
            if (!p0.seen(s)) return;
        for (S::stage s : {S::rx_engine, S::resp_sent})
            if (!p1.seen(s)) return;
        const std::vector<sc_time> d = partition(
            {cpu_mark_[0], p0.at(S::doorbell), p0.at(S::wqe_start), p0.at(S::wire_end), p1.at(S::rx_engine),
             p1.at(S::resp_sent), p0.at(S::resp_rx), p0.at(S::completion), cpu_mark_[4]});
        const char* const names[8] = {
            "host post + MMIO doorbell",
            "doorbell unit + WQE",
            "requester: pipeline, serialisation",
            "cable, switch and receive pipeline",
            op == op_kind::read ? "responder: pipeline, payload DMA read, serialisation"
                                : "responder: pipeline, atomic at host memory, serialisation",
            "cable back, receive pipeline",
            op == op_kind::read ? "requester: data DMA write, CQE" : "requester: result DMA write, CQE",
            "CQE lands, host poll sees it"};
        for (int k = 0; k < 8; ++k) r.breakdown.push_back({names[k], d[size_t(k)].to_seconds() * 1e6});
    }

    /// The busy counters (busy_) now.
    std::vector<uint64_t> busy_counts() const {
        std::vector<uint64_t> v;
        v.reserve(busy_.size());
        for (const auto& b : busy_) v.push_back(b.second->value());
        return v;
    }
    /// Each unit's busy fraction of an interval of `ns` that started at counts `before`.
    void take_util(size_result& r, const std::vector<uint64_t>& before, uint64_t ns) const {
        if (!ns) return;
        for (size_t k = 0; k < busy_.size(); ++k)
            r.util.push_back(
                {busy_[k].first, double(busy_[k].second->value() - before[k]) / (double(ns) * 1000.0)});
    }

    /// node1's wqe_fetcher.srq_taken, transport_engine.rnr_naks_sent, wqe_fetcher.srq_empty.
    std::array<uint64_t, 3> srq_counts() const {
        return {srq_ctr_[0]->value(), srq_ctr_[1]->value(), srq_ctr_[2]->value()};
    }

    // ------------------------------------------------------------------ mr_scale
    // node1 registers N regions, node0 N local source regions; WRITE n goes from node0's region
    // n mod N to node1's region n mod N (L_Key and R_Key rotate), on QP n mod --qps, with the
    // transmit depth of write_bw. Each size registers max(N) regions of the size rounded up to a
    // page, once; each N of the sweep uses the first N of them. A pass over the N regions warms
    // the translation caches, then max(iters, 4 N) WRITEs are timed and the translation units'
    // counters of both nodes are read around them.

    static uint64_t region_bytes(uint64_t size) {
        return (size + fw::PAGE_BYTES - 1) / fw::PAGE_BYTES * fw::PAGE_BYTES;
    }

    /// Sizes the driver's MPT and MTT tables for the largest N and finds the counters.
    void mr_scale_init(const phase_spec& p, fw::driver_options& opts) {
        for (uint64_t n : mrs_) max_regions_ = std::max(max_regions_, n);
        for (uint64_t size : p.sizes) region_stride_ = std::max(region_stride_, region_bytes(size));
        if (max_regions_ * region_stride_ > host_software::phys_bytes)
            throw config_error("--mrs " + std::to_string(max_regions_) + " with --size " +
                               std::to_string(region_stride_) + ": each node's regions would take " +
                               std::to_string(max_regions_ * region_stride_) + " bytes, more than the " +
                               std::to_string(host_software::phys_bytes) +
                               " bytes of host memory its application has");
        // Index 0 is reserved and setup()'s MR takes one more.
        opts.log_num_mpts = uint8_t(std::max<unsigned>(opts.log_num_mpts, ceil_log2(max_regions_ + 2)));
        const uint64_t mtts =
            max_regions_ * (region_stride_ / fw::PAGE_BYTES) +
            2 * uint64_t(spec_.qps) * (std::max<uint64_t>(region_stride_, 4096) / fw::PAGE_BYTES + 1) + 64;
        opts.log_num_mtts = uint8_t(std::max<unsigned>(opts.log_num_mtts, ceil_log2(mtts)));
        static const char* const names[4] = {"mpt_hits", "mpt_misses", "mtt_hits", "mtt_misses"};
        for (unsigned i = 0; i < 2; ++i)
            for (unsigned k = 0; k < 4; ++k) {
                const std::string key = std::string(m_.at(i).name()) + ".hca.translation_unit." + names[k];
                tu_[i][k] = stats_registry::instance().find(key);
                if (!tu_[i][k])
                    throw workload_error("mr_scale reads the translation unit's counters, but '" + key +
                                         "' does not exist");
            }
    }

    uint64_t region_va(unsigned i, uint64_t r) const { return regions_[i].va + r * region_stride_; }

    /// (Re)registers node i's max(N) regions with `bytes` each, unless they already have that size.
    void register_regions(unsigned i, uint64_t bytes) {
        region_set& rs = regions_[i];
        if (rs.bytes == bytes) return;
        const std::string node = "node" + std::to_string(i);
        host_software& sw = *sw_[i];
        for (ibv_mr* mr : rs.mrs)
            if (const int rc = ibv_dereg_mr(mr))
                fail(node + ": mr_scale: ibv_dereg_mr failed (" + std::to_string(rc) + ")");
        rs.mrs.clear();
        rs.bytes = 0;
        const uint64_t pages = bytes / fw::PAGE_BYTES;
        if (sw.driver.num_mpts() < max_regions_ + 2 || sw.driver.num_mtts() < max_regions_ * pages + 2)
            fail(node + ": mr_scale: " + std::to_string(max_regions_) + " regions of " +
                 std::to_string(bytes) + " bytes need " + std::to_string(max_regions_ + 2) + " MPT and " +
                 std::to_string(max_regions_ * pages) + " MTT entries, the driver has " +
                 std::to_string(sw.driver.num_mpts()) + " and " + std::to_string(sw.driver.num_mtts()) +
                 " (raise hca.max_mrs / hca.max_mtts)");
        if (!rs.va) {
            rs.va = sw.as.alloc(max_regions_ * region_stride_, fw::PAGE_BYTES);
            if (!rs.va)
                fail(node + ": mr_scale: cannot allocate " + std::to_string(max_regions_) + " regions of " +
                     std::to_string(region_stride_) + " bytes (host memory is " +
                     std::to_string(host_software::phys_bytes >> 20) + " MiB)");
        }
        const int access = i == 0 ? IBV_ACCESS_LOCAL_WRITE : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
        rs.mrs.reserve(max_regions_);
        for (uint64_t r = 0; r < max_regions_; ++r) {
            ibv_mr* mr = ibv_reg_mr(side_[i].pd, region_va(i, r), bytes, access);
            if (!mr)
                fail(node + ": mr_scale: ibv_reg_mr of region " + std::to_string(r) + " (" +
                     std::to_string(bytes) + " bytes) failed, errno " + std::to_string(errno) + " (" +
                     std::strerror(errno) + ")");
            rs.mrs.push_back(mr);
        }
        rs.bytes = bytes;
        if (i == 0)  // without --verify, the end-of-point check compares these bytes
            for (uint64_t r = 0; r < max_regions_; ++r)
                (void)sw.as.write(region_va(0, r), &r, sizeof r);  // registered just above: mapped
    }

    /// One WRITE from node0's region `src` to node1's region `dst`.
    void post_region_write(unsigned q, uint64_t src, uint64_t dst, uint64_t size, uint64_t wr_id,
                           bool signaled, bool inl) {
        ibv_sge sge{region_va(0, src), uint32_t(size), regions_[0].mrs[src]->lkey};
        ibv_send_wr wr{};
        wr.wr_id = wr_id;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) | (inl ? IBV_SEND_INLINE : 0);
        wr.wr.rdma.remote_addr = region_va(1, dst);
        wr.wr.rdma.rkey = regions_[1].mrs[dst]->rkey;
        ibv_send_wr* bad = nullptr;
        if (const int rc = ibv_post_send(side_[0].qps[q], &wr, &bad))
            fail("node0: ibv_post_send failed (" + std::to_string(rc) + ")");
    }

    /// node0 streams `count` WRITEs (message n: region n mod nr, QP n mod --qps, at most
    /// tx_depth outstanding per QP) and returns when all have completed.
    void region_stream(const phase_spec& ph, uint64_t size, uint64_t nr, uint64_t count) {
        side& s = side_[0];
        const unsigned nq = nq_, depth = wp_.tx_depth;
        const unsigned cq_mod = std::min<unsigned>(wp_.cq_mod, depth);
        const bool v = spec_.verify, inl = size <= inline_limit(false);
        const auto quota = [&](unsigned q) { return count / nq + (q < count % nq ? 1 : 0); };
        std::vector<uint64_t> posted(nq, 0), completed(nq, 0);
        uint64_t total_posted = 0, total_completed = 0;
        while (total_completed < count) {
            bool progress = false;
            while (total_posted < count) {
                const unsigned q = unsigned(total_posted % nq);
                if (posted[q] - completed[q] >= depth) break;
                const uint64_t m = posted[q];
                const bool sig = (m + 1) % cq_mod == 0 || m + 1 == quota(q);
                const uint64_t r = total_posted % nr;
                post_region_write(q, r, r, size, (uint64_t(q) << 48) | m, sig, inl);
                ++posted[q];
                ++total_posted;
                progress = true;
            }
            ibv_wc wcs[16];
            const int n = ibv_poll_cq(s.scq, 16, wcs);
            if (n < 0) fail("node0: ibv_poll_cq failed");
            record_poll(0, s.scq, wcs, n);
            for (int k = 0; k < n; ++k) {
                const ibv_wc& wc = wcs[k];
                if (wc.status != IBV_WC_SUCCESS) fail(completion_error("node0", wc, hex(wc.wr_id)));
                const unsigned q = unsigned(wc.wr_id >> 48);
                const uint64_t idx = wc.wr_id & ((uint64_t(1) << 48) - 1);
                if (q >= nq || idx < completed[q] || idx >= posted[q]) {
                    if (!v)
                        fail("node0: completion for a work request that is not outstanding (wr_id " +
                             hex(wc.wr_id) + ")");
                    chk_.bad_completion(at(ph, size, 0, q < nq ? q : 0, idx, "send completion"),
                                        "wr_id " + hex(wc.wr_id) + " is not an outstanding work request");
                    continue;
                }
                if (v) {  // signaled: every cq_mod-th WR and the QP's last, in posting order
                    const uint64_t want = std::min(quota(q) - 1, (completed[q] / cq_mod + 1) * cq_mod - 1);
                    check_send_wc(at(ph, size, 0, q, idx, "send completion"), wc, IBV_WC_RDMA_WRITE,
                                  (uint64_t(q) << 48) | want);
                }
                total_completed += idx + 1 - completed[q];
                completed[q] = idx + 1;
            }
            if (n == 0 && !progress && ibv_wait_cq(s.scq, timeout_ns()) != 0)
                fail("node0: mr_scale stalled (no completion within workload.timeout_us)" + cable_faults());
        }
    }

    /// The four translation counters of both nodes (mpt_hits, mpt_misses, mtt_hits, mtt_misses).
    std::array<uint64_t, 4> tu_counts() const {
        std::array<uint64_t, 4> c{};
        for (unsigned i = 0; i < 2; ++i)
            for (unsigned k = 0; k < 4; ++k) c[k] += tu_[i][k]->value();
        return c;
    }

    void mr_phase(unsigned i, const phase_spec& ph, uint64_t step0, run_report& rep) {
        uint64_t step = step0;
        for (uint64_t size : ph.sizes) {
            register_regions(i, region_bytes(size));
            bar_.arrive();  // both sides' regions exist (node0 reads node1's R_Keys out of band)
            if (i == 0)
                for (uint64_t nr : mrs_) mr_point_run(ph, size, nr, step++, rep);
            bar_.arrive();
        }
    }

    /// node0: one point of the sweep, N = nr regions.
    void mr_point_run(const phase_spec& ph, uint64_t size, uint64_t nr, uint64_t step, run_report& rep) {
        const bool v = spec_.verify;
        const uint64_t iters = std::max(ph.iters, 4 * nr);
        const uint64_t guard = size + 8 <= regions_[1].bytes ? 8 : 0;  // bytes after the message that stay 0
        if (v)
            for (uint64_t r = 0; r < nr; ++r) {
                poke_data(0, region_va(0, r), size, key(0, 0, step, r));
                clear(1, region_va(1, r), size + guard);
            }
        region_stream(ph, size, nr, nr);  // warm-up: every region once
        const std::array<uint64_t, 4> c0 = tu_counts();
        const std::vector<uint64_t> busy0 = busy_counts();
        const uint64_t t0 = bus(0).now_ns();
        region_stream(ph, size, nr, iters);
        const uint64_t t1 = bus(0).now_ns();
        const std::array<uint64_t, 4> c1 = tu_counts();
        if (v) {
            for (uint64_t r = 0; r < nr; ++r) {
                chk_.bytes(at(ph, size, 1, 0, r, "destination region"), peek(1, region_va(1, r), size), size,
                           key(0, 0, step, r));
                if (guard)
                    chk_.value(at(ph, size, 1, 0, r, "8 bytes after the message in its region"),
                               peek64(1, region_va(1, r) + size), 0);
            }
        } else {
            const uint64_t last = (iters - 1) % nr;
            same_bytes(0, region_va(0, last), 1, region_va(1, last), size);
        }
        size_result r;
        r.size_bytes = size;
        r.iters = iters;
        const double secs = double(t1 - t0) * 1e-9;
        r.bw_gbps = secs > 0 ? double(size) * double(iters) * 8.0 / secs / 1e9 : 0;
        r.msg_rate_mpps = secs > 0 ? double(iters) / secs / 1e6 : 0;
        if (v) take_counts(r);
        take_util(r, busy0, t1 - t0);
        rep.results.push_back(r);
        const auto rate = [](uint64_t hits, uint64_t misses) {
            return hits + misses ? double(hits) / double(hits + misses) : -1.0;
        };
        points.push_back(mr_point{nr, size, iters, r.bw_gbps, r.msg_rate_mpps,
                                  rate(c1[0] - c0[0], c1[1] - c0[1]), rate(c1[2] - c0[2], c1[3] - c0[3])});
    }

    uint64_t quota_of(const phase_spec& ph, unsigned q) const {
        return ph.iters / nq_ + (q < ph.iters % nq_ ? 1 : 0);
    }

    void run_side(unsigned i) {
        setup(i);
        bar_.arrive();
        uint64_t step = 0;  // numbers the sizes of the whole run (--verify data keys)
        for (const phase_spec& ph : spec_.phases) {
            run_report rep;
            rep.workload = ph.workload;
            rep.seed = spec_.seed;
            const uint64_t t0 = bus(i).now_ns();
            const uint64_t p0 = stats_registry::instance().sum("port.tx_packets");
            const auto wall0 = std::chrono::steady_clock::now();  // --speed only; never reaches the model
            const op_kind op = kind_of(ph.workload);
            const bool mr_scale = ph.workload == "mr_scale";
            if (mr_scale)
                mr_phase(i, ph, step, rep);
            else if (is_latency(ph.workload))
                lat_phase(i, ph, step, op, rep);
            else
                bw_phase(i, ph, step, op, rep);
            step += ph.sizes.size() * (mr_scale ? mrs_.size() : 1);
            rep.sim_time_ns = bus(i).now_ns() - t0;
            rep.wire_packets = stats_registry::instance().sum("port.tx_packets") - p0;
            rep.traffic_wall_s =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
            if (i == 0) {
                rep.verify_failure = chk_.first_failure;
                chk_.first_failure.clear();
                out_.push_back(rep);
            }
        }
        bar_.arrive();
        if (i == 0) sc_stop();
    }
    void client() { run_side(0); }
    void server() { run_side(1); }

    machine& m_;
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
    std::vector<std::unique_ptr<host_software>> sw_;  ///< one per node taking part (nn_)
    std::vector<side> side_;
    std::vector<peer_info> info_;
    std::vector<std::unique_ptr<receiver>> receivers_;  ///< mcast_bw: processes of nodes 2 ..
    unsigned nn_ = 2;                                   ///< nodes taking part: 2, or every node (mcast_bw)
    bool mcast_ = false;              ///< mcast_bw: node0 sends to groups every other node joined
    bool srq_ = false;                ///< srq_bw, ud_srq_bw: node1's QPs share one SRQ
    uint64_t ud_srq_need_ = 0;        ///< ud_srq_bw: SRQ WRs for a whole size and its markers
    const counter* srq_ctr_[3] = {};  ///< node1's srq_taken, rnr_naks_sent, srq_empty
    std::vector<std::pair<std::string, const counter*>> busy_;
    sc_time cpu_mark_
        [5];  ///< traced latency iteration: client post, server sees, server posts, client sees, sample  ///< the units' *_busy_ps counters of node0 and node1
    std::vector<ibv_sge> srq_sges_;  ///< post_srq's list (reused)
    std::vector<ibv_recv_wr> srq_wrs_;
    sc_event exchanged_;
    barrier bar_;
    unsigned nq_ = 1;
    uint64_t area_ = 4096;              ///< bytes of one send or receive area
    transport tr_ = transport::rc;      ///< the QPs' transport (every phase's)
    uint64_t ud_rq_need_ = 0;           ///< ud_send_bw: receives node1 needs per QP (0: rx_depth will do)
    uint64_t stream_end_ns_ = no_time;  ///< UC/UD bandwidth: when the client's markers were on the wire
    sc_event stream_end_;               ///< notified then
    std::vector<std::vector<uint64_t>>
        received_;               ///< UD bandwidth: datagrams node i took per QP in the current size
    bool needs_rd_ = false;      ///< a phase uses RDMA READ or atomics
    bool needs_recv_ = false;    ///< a phase sends (the receiver keeps receive WQEs posted)
    bool needs_atomic_ = false;  ///< a phase uses atomics
    std::string rd_workload_;    ///< the first such phase (error text)
    verify::checker chk_;        ///< both processes count into it; the client reports per size
    std::vector<uint8_t> got_, scratch_;
    // mr_scale
    struct region_set {
        uint64_t va = 0;           ///< max(N) slots of region_stride_ bytes
        uint64_t bytes = 0;        ///< bytes registered per region (0: none registered)
        std::vector<ibv_mr*> mrs;  ///< region r: mrs[r]
    };
    std::vector<uint64_t> mrs_;   ///< region counts swept
    uint64_t max_regions_ = 0;    ///< the largest of them
    uint64_t region_stride_ = 0;  ///< the largest region of the run (slot size)
    region_set regions_[2];
    const counter* tu_[2][4] = {};  ///< node i's translation_unit.{mpt_hits,mpt_misses,mtt_hits,mtt_misses}
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
    pcie_bench(sc_module_name name, const run_spec& spec, const workload_params& wp,
               std::vector<run_report>& out)
        : sc_module(name),
          memory("memory"),
          pcie("pcie"),
          dma("dma"),
          cpu_stub("cpu_stub"),
          bar0_stub("bar0_stub"),
          cpu_mem_stub("cpu_mem_stub"),
          spec_(spec),
          wp_(wp),
          out_(out) {
        pcie.upstream_out.bind(memory.dma);
        dma.out.bind(pcie.upstream_in);
        cpu_stub.bind(pcie.downstream_in);
        pcie.downstream_out.bind(bar0_stub);
        cpu_mem_stub.bind(memory.cpu);
        bar0_stub.register_b_transport(this, &pcie_bench::no_device);
        SC_THREAD(run);
    }

private:
    static constexpr uint64_t base = 0x100000000ull;  ///< first host address the transfers use

    void no_device(tlm::tlm_generic_payload& gp, sc_time&) {
        gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    }

    // --verify: zero-time accesses to host memory, as the host CPU's loads and stores.
    void clear(uint64_t span) {
        const std::vector<uint8_t> zero(std::min<uint64_t>(span, 1u << 20), 0);
        for (uint64_t off = 0; off < span; off += zero.size())
            memory.write(base + off, zero.data(), std::min<uint64_t>(zero.size(), span - off));
    }
    void check(const std::string& workload, uint64_t size, uint64_t span, size_result& r) {
        std::vector<uint8_t> got(std::min<uint64_t>(span, 1u << 20));
        for (uint64_t off = 0; off < span; off += got.size()) {
            const uint64_t n = std::min<uint64_t>(got.size(), span - off);
            memory.read(base + off, got.data(), n);
            for (uint64_t k = 0; k < n; ++k) {
                const uint8_t want = dma_traffic_gen::pattern(base + off + k);
                if (got[k] == want) continue;
                if (!r.mismatches) {
                    char b[160];
                    std::snprintf(b, sizeof b,
                                  "%s %llu B, host memory 0x%llx (transfer %llu, byte %llu): expected "
                                  "0x%02x, got 0x%02x",
                                  workload.c_str(), static_cast<unsigned long long>(size),
                                  static_cast<unsigned long long>(base + off + k),
                                  static_cast<unsigned long long>((off + k) / size),
                                  static_cast<unsigned long long>((off + k) % size), want, got[k]);
                    first_mismatch_ = b;
                }
                ++r.mismatches;
            }
            r.bytes_checked += n;
        }
    }
    void run() {
        for (const phase_spec& ph : spec_.phases) {
            run_report rep;
            rep.workload = ph.workload;
            rep.seed = spec_.seed;
            const sc_time t0 = sc_time_stamp();
            sc_time drained = SC_ZERO_TIME;
            const bool write = ph.workload == "dma_write_bw";
            for (uint64_t size : ph.sizes) {
                // The transfers cycle through [base, base + span) (dma_traffic_gen::run).
                const uint64_t window = std::max(size, dma.window_bytes.get() / size * size);
                const uint64_t span = ph.iters >= window / size ? window : size * ph.iters;
                const uint64_t errors0 = dma.errors.value() + pcie.dma_write_errors.value();
                // Host memory ends at memory.size_bytes: bytes beyond it cannot hold the data.
                const uint64_t mem = memory.size_bytes.get();
                const uint64_t in_memory = mem > base ? std::min(span, mem - base) : 0;
                if (spec_.verify && write) clear(in_memory);
                dma.start(write, base, size, ph.iters, wp_.dma_outstanding);
                wait(dma.done_event());
                size_result r;
                r.size_bytes = size;
                r.iters = ph.iters;
                r.bw_gbps = dma.bandwidth_gbps();
                const double secs = (dma.last_completion() - dma.first_issue()).to_seconds();
                r.msg_rate_mpps = secs > 0 ? double(ph.iters) / secs / 1e6 : 0;
                if (spec_.verify) {
                    // Writes: every byte written holds the generator's pattern, once the posted
                    // writes still in the link have landed (that wait is not part of the phase's
                    // time). Reads: the data is discarded, so only transfer errors count.
                    const sc_time drain0 = sc_time_stamp();
                    while (write && memory.writes_in_flight())
                        wait(sc_time(std::max(pcie.write_latency_ns.get(), 1.0), SC_NS));
                    drained += sc_time_stamp() - drain0;
                    r.verified = true;
                    r.verify_data = write;
                    r.bad_completions = dma.errors.value() + pcie.dma_write_errors.value() - errors0;
                    if (write) {
                        check(ph.workload, size, in_memory, r);
                        if (in_memory < span) {
                            if (!r.mismatches)
                                first_mismatch_ = ph.workload + " " + std::to_string(size) +
                                                  " B: host memory from " + hex(base + in_memory) +
                                                  " lies beyond memory.size_bytes";
                            r.bytes_checked += span - in_memory;
                            r.mismatches += span - in_memory;
                        }
                    }
                    if (r.bad_completions && rep.verify_failure.empty())
                        rep.verify_failure = ph.workload + " " + std::to_string(size) +
                                             " B: " + std::to_string(r.bad_completions) +
                                             " DMA transfers failed";
                    if (r.mismatches && rep.verify_failure.empty()) rep.verify_failure = first_mismatch_;
                }
                rep.results.push_back(r);
            }
            rep.sim_time_ns = uint64_t((sc_time_stamp() - t0 - drained).to_seconds() * 1e9 + 0.5);
            out_.push_back(rep);
        }
        sc_stop();
    }
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
    std::string first_mismatch_;
};

}  // namespace

std::vector<run_report> run(const run_spec& spec, std::vector<param_info>* help_out, std::string* failure) {
    std::vector<run_report> reports;
    bool pcie_only = !spec.phases.empty();
    for (auto& p : spec.phases) pcie_only &= is_pcie_workload(p.workload);
    for (auto& p : spec.phases)
        if (!pcie_only && is_pcie_workload(p.workload))
            throw workload_error("dma_*_bw workloads run the PCIe link alone and cannot share a run with '" +
                                 spec.phases.front().workload + "'");
    // The phases of a run share their QPs, hence one transport.
    for (auto& p : spec.phases)
        if (transport_of(p.workload) != transport_of(spec.phases.front().workload))
            throw workload_error("'" + p.workload + "' and '" + spec.phases.front().workload +
                                 "' run on different transports and cannot share a run");
    workload_params wp;
    std::vector<uint64_t> mrs;  // mr_scale's sweep
    for (auto& p : spec.phases)
        if (p.workload == "mr_scale" && mrs.empty()) {
            mrs = parse_counts(wp.mrs.get(), "workload.mrs");
            size_mpt_tables(*std::max_element(mrs.begin(), mrs.end()));
        }
    std::unique_ptr<machine> m;
    std::unique_ptr<perftest> app;
    std::unique_ptr<pcie_bench> bench;
    if (pcie_only) {
        bench = std::make_unique<pcie_bench>("node0", spec, wp, reports);
    } else {
        m = std::make_unique<machine>();
        if (m->size() < 2) throw workload_error("two-node workloads need fabric.nodes >= 2");
        app = std::make_unique<perftest>("perftest", *m, spec, wp, reports, mrs);
    }
    if (help_out) {
        *help_out = broker::instance().help();
        return reports;
    }
    broker::instance().check_unused();
    std::unique_ptr<timeline> tl;
    if (!spec.timeline.empty()) {
        if (!m)
            throw workload_error("--timeline: " + spec.phases.front().workload +
                                 " runs the PCIe link alone (no HCA timeline)");
        spec.timeline_only.check_nodes(unsigned(m->size()));
        tl = std::make_unique<timeline>(spec.timeline, spec.timeline_only);
        for (size_t i = 0; i < m->size(); ++i) {
            m->at(unsigned(i)).adapter.set_timeline(tl.get(), unsigned(i));
            m->at(unsigned(i)).pcie.set_timeline(tl.get(), unsigned(i));
        }
    }
    std::unique_ptr<trace::recorder> rec;
    if (!spec.record.empty()) {
        if (!app) throw workload_error("--record: " + spec.phases.front().workload + " runs no verbs");
        rec = std::make_unique<trace::recorder>(spec.record, unsigned(m->size()));
        rec->header(trace::effective_config(), spec.seed, spec.phases.front().workload);
        app->set_recorder(rec.get());
    }
    if (m) {
        bool waves = false, rtl = false;
        for (size_t i = 0; i < m->size(); ++i) {
            waves |= !m->at(unsigned(i)).adapter.pkeys.waves.get().empty();
            rtl |= m->at(unsigned(i)).adapter.pkeys.rtl_active();
        }
        if (waves && !rtl)
            throw config_error(
                "hca.pkey_checker.waves (--waves): no node runs the P_Key checker's RTL "
                "(set hca.pkey_checker.impl=rtl or both)");
        if (!spec.pcap_dir.empty()) m->capture_to(spec.pcap_dir);
    }
    const auto wall0 = std::chrono::steady_clock::now();
    sc_start();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    if (rec && app) {
        trace::json counters = trace::json::object();
        for (const counter* c : stats_registry::instance().counters())
            if (c->value()) counters[c->key()] = c->value();
        rec->end(
            [&](unsigned node, uint64_t va, uint8_t* dst, uint64_t n) { app->read_mem(node, va, dst, n); },
            counters);
        rec.reset();
    }
    if (m && !m->captures().empty()) {
        if (const std::string e = m->close_captures(); !e.empty()) throw config_error(e);
        std::cout << " pcap:";
        for (const auto& c : m->captures())
            std::cout << " " << c->path() << " (" << c->packets() << " packets)";
        std::cout << "\n";
    }
    if (tl) tl->close();
    if (m)
        for (size_t i = 0; i < m->size(); ++i)
            if (const std::string& d = m->at(unsigned(i)).adapter.pkeys.divergence(); !d.empty()) {
                const std::string why = "co-simulation divergence (hca.pkey_checker.impl=both):\n" + d;
                if (!failure) throw workload_error(why);
                *failure = why;
                return reports;
            }
    if (app && !app->error.empty()) {
        if (std::getenv("HCASIM_DUMP_COUNTERS"))
            for (const counter* c : stats_registry::instance().counters())
                if (c->value()) std::cerr << c->key() << " = " << c->value() << "\n";
        if (!failure) throw workload_error(app->error);
        *failure = app->error;
        return reports;
    }
    if (reports.size() != spec.phases.size()) {
        if (!failure) throw workload_error("simulation ended before every phase completed");
        *failure = "simulation ended before every phase completed";
        return reports;
    }
    if (app && !app->points.empty()) print_mr_table(std::cout, app->points);
    for (auto& r : reports) r.wall_s = wall;  // the whole run's wall time (phases share one simulation)
    if (!reports.empty()) {
        for (const counter* c : stats_registry::instance().counters())
            reports.front().counters.emplace_back(c->key(), c->value());
        for (const param_base* p : broker::instance().params())
            reports.front().config.emplace_back(p->key(), p->str());
    }
    return reports;
}

}  // namespace hcasim
