// The workload framework (internal to testbench/workloads): the workload parameters, the
// two-node perftest application's class and its shared pieces. Its member functions live in
// the room by family: base.cpp (construction, setup, posting and polling, the bandwidth loop,
// the registry), verify.cpp (--verify), rc.cpp (RC and UC: latency, bandwidth streams),
// ud.cpp (UD, multicast, the end-of-stream markers), rd.cpp (reliable datagram: the domain and
// the EE contexts), srq.cpp (shared receive queue) and
// scaling.cpp (mr_scale and the PCIe bench of dma_*_bw); run.cpp elaborates and runs. The
// many-node workloads (incast, alltoall, ...) are an application of their own (many.h, many.cpp).
#pragma once
#include <systemc>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "testbench/cli/cli.h"
#include "testbench/host_software.h"
#include "testbench/replay/verbs_trace.h"
#include "testbench/workloads/meter.h"
#include "testbench/workloads/workloads.h"

namespace hcasim::workloads {

using namespace sc_core;
using namespace hcasim::verbs;

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
    param<std::string> transport;
    param<double> hotspot_fraction;
    param<double> barrier_ns;
    param<unsigned> eecs;

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
                      {"per_qp", "shared"}),
          transport("transport", "rc", "",
                    "the QPs' transport in the many-node workloads (incast, alltoall, permutation, "
                    "uniform_random, bisection, hotspot); the others name theirs",
                    {"rc", "uc", "ud"}),
          hotspot_fraction("hotspot_fraction", 0.5, "",
                           "hotspot: the fraction of each sender's hotspot flow that goes to the hot node "
                           "(node0); the rest goes to the other non-hot nodes",
                           {0, 1}),
          barrier_ns("barrier_ns", 1000, "ns",
                     "the many-node workloads' out-of-band exchanges (QP numbers and keys, the common "
                     "start, the end; a TCP or MPI barrier between the hosts): from the last node's arrival "
                     "to every node's release; a partitioned run needs at least its lookahead",
                     {0.001, 1e9}),
          eecs("eecs", 1, "contexts",
               "rd_send_lat, rd_send_bw: EE contexts (reliable datagram channels) per node, each connected "
               "to the peer's; RD QP q sends through EE context q mod eecs. An EE context carries one "
               "message at a time (so does an RD QP): with --qps N, eecs=N lets N messages overlap",
               {1, 65536}) {}
};

inline unsigned ceil_log2(uint64_t v) {
    unsigned l = 0;
    while ((uint64_t(1) << l) < v) ++l;
    return l;
}

/// One point of the mr_scale sweep.
struct mr_point {
    uint64_t mrs = 0;          ///< regions per node (N)
    uint64_t size = 0;         ///< message size, bytes
    uint64_t iters = 0;        ///< WRITEs timed: max(--iters x --qps, 4 N)
    double bw_gbps = 0;        ///< average bandwidth, Gb/s
    double msg_rate_mpps = 0;  ///< messages per simulated microsecond
    double mpt_hit_rate =
        -1;  ///< MPT cache hits / lookups of both nodes' units over the timed WRITEs (-1: none)
    double mtt_hit_rate = -1;  ///< the same for MTT lines
};

/// What two processes tell each other out of band (perftest does it over TCP).
struct peer_info {
    uint16_t lid = 0;
    std::vector<uint32_t> qpn;
    uint32_t psn = 0;
    uint32_t rkey = 0;
    uint64_t addr = 0;           ///< receive area of QP 0 (WRITE and atomic targets); QP q's is q areas on
    uint64_t send_addr = 0;      ///< send area of QP 0 (READ sources); QP q's is q areas on
    std::vector<uint32_t> eecn;  ///< RD: EE context k's number (workload.eecs of them)
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

/// A simulated process of its own for node i of an application: runs (app.*run)(i) (mcast_bw's
/// receivers, every node of a many-node workload).
template <class App>
struct node_process : sc_module {
    SC_HAS_PROCESS(node_process);
    node_process(sc_module_name n, App& app, void (App::*run)(unsigned), unsigned i)
        : sc_module(n), app_(app), run_(run), i_(i) {
        SC_THREAD(main);
    }
    void main() { (app_.*run_)(i_); }
    App& app_;
    void (App::*run_)(unsigned);
    unsigned i_;
};

/// What a phase does on the wire.
enum class op_kind { write, send, read, atomic };

inline double to_us(uint64_t ns) { return double(ns) / 1000.0; }
/// ibv_wc_status_str's names.
std::string status_name(ibv_wc_status st);
std::string hex(uint64_t v);

/// mr_scale: sizes the nodes' MPT tables for `max_regions` (scaling.cpp).
void size_mpt_tables(uint64_t max_regions);
/// mr_scale's table (scaling.cpp).
void print_mr_table(std::ostream& os, const std::vector<mr_point>& points);
/// dma_read_bw, dma_write_bw: the PCIe link alone (scaling.cpp).
std::unique_ptr<sc_module> make_pcie_bench(sc_module_name name, const run_spec& spec,
                                           const workload_params& wp, std::vector<run_report>& out);

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
             std::vector<run_report>& out, const std::vector<uint64_t>& mrs = {});

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
    static constexpr uint32_t ud_qkey = 0x11111111;  ///< both sides' Q_Key (perftest's DEFAULT_QKEY; RD too)
    static constexpr uint32_t marker_imm =
        0x454F5321;  ///< immediate data of an end-of-stream marker ("EOS!")
    static constexpr uint64_t no_time = ~uint64_t(0);
    static constexpr uint16_t mcast_mlid = 0xC001;   ///< mcast_bw: MLID of QP 0's group (QP q: + q)
    static constexpr uint32_t mcast_qpn = 0xFFFFFF;  ///< multicast destination QPN (o10-35)

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
        std::vector<ibv_cq*> thread_cqs;  ///< node0 with --threads > 1: thread t's send CQ (0: scq)
        std::vector<ibv_qp*> qps;
        std::vector<uint64_t> rq_posted,
            rq_done;  ///< receive WRs posted / completed per QP (wr_id = sequence)
        uint64_t buf = 0, buf_bytes = 0;
        unsigned rq_depth = 0;       ///< receives kept posted per QP
        std::vector<ud_dest> dest;   ///< UD: QP q's destination
        ibv_rdd* rdd = nullptr;      ///< RD: the domain of the QPs and EE contexts
        std::vector<ibv_eec*> eecs;  ///< RD: EE context k, connected to the peer's k
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

    /// READ and atomic limits and the MR's access flags (setup's rd_access).
    struct rd_limits {
        uint8_t max_rd = 0, max_dest_rd = 0;
        int access = 0;
    };

    /// One message size of a latency phase: what lat_phase's steps share.
    struct lat_size {
        uint64_t size = 0, step = 0;  ///< message size; its data-key step
        uint64_t last = 0;            ///< offset of the message's last byte (write_lat's flag)
        bool inl = false;             ///< sent inline
        bool cas = false;             ///< atomic_lat: compare-and-swap (else fetch-and-add)
        uint64_t current = 0;         ///< atomics: the remote value a serial execution holds now
        std::vector<double> samples;  ///< one per iteration, us
    };
    /// One iteration of a latency phase.
    struct lat_iter {
        uint64_t it = 0;      ///< iteration number (the WRs' wr_id)
        uint8_t flag = 0;     ///< write_lat: the value of the flag byte
        bool traced = false;  ///< the breakdown's iteration
        uint64_t t0 = 0;      ///< client: the sample's start, ns
    };

    /// One message size of a bandwidth phase: what bw_phase's steps share.
    struct bw_size {
        uint64_t size = 0, step = 0;  ///< message size; its data-key step
        bool inl = false;             ///< sent inline
        bool cas = false;             ///< atomics: compare-and-swap (else fetch-and-add)
        bool shared = false;          ///< atomics: workload.atomic_word shared
        // Atomics: the remote value of each QP in a serial execution, and the value each
        // outstanding atomic (slot = index mod depth) must fetch. workload.atomic_word
        // shared: every QP's atomics go to QP 0's word; the order the responder executes
        // them in is known only afterwards, so --verify keeps what each fetched and checks
        // that they form one serial execution (checker::shared_word).
        std::vector<uint64_t> current, fetched;
        std::vector<verify::shared_atomic> shared_ops;
        std::array<uint64_t, 3> srq_c0{};  ///< srq_*: node1's SRQ counters at the size's start
    };

    /// The client's stream of one bandwidth size: WRs posted and completed per QP.
    struct stream_state {
        std::vector<uint64_t> posted, completed;
        uint64_t total_posted = 0, total_completed = 0;
        unsigned cq_mod = 1;      ///< a QP signals every cq_mod-th WR and its last
        ibv_wc_opcode want_op{};  ///< the opcode of the send completions
    };

    /// A phase's runner: node i's side of phase `ph` (its sizes numbered from data-key step `step0`).
    using phase_runner = void (perftest::*)(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op,
                                            run_report& rep);
    /// The workload registry: what a workload does on the wire and which runner runs it.
    struct phase_entry {
        const char* name;
        op_kind op;
        phase_runner run;
    };
    /// The entry of `workload` (a name not in the table runs as a WRITE bandwidth phase).
    static const phase_entry& phase_of(const std::string& workload);
    static bool is_latency(const std::string& workload);

    // ------------------------------------------------------------------ base.cpp: the frame
    void fail(const std::string& why) {
        if (error.empty()) {
            error = why;
            sc_stop();
        }
        wait();  // park this process for good
    }
    uint64_t timeout_ns() const { return uint64_t(wp_.timeout_us.get() * 1000.0); }
    /// RC and RD acknowledge every message: a send completion says it has landed.
    bool acked() const { return tr_ == transport::rc || tr_ == transport::rd; }
    host_bus& bus(unsigned i) { return m_.at(i).cpu; }
    /// The node whose data node i receives (and whose out-of-band information it uses).
    static unsigned peer_of(unsigned i) { return i == 0 ? 1 : 0; }

    uint64_t send_area(unsigned i, unsigned q) const { return side_[i].buf + uint64_t(q) * area_; }
    uint64_t recv_area(unsigned i, unsigned q) const { return side_[i].buf + uint64_t(nq_ + q) * area_; }
    /// Offset of a message's first byte in a receive area (UD: after the GRH area).
    uint64_t payload_off() const { return tr_ == transport::ud ? grh_bytes : 0; }
    /// byte_len of a receive completion of a `size`-byte message (UD counts the GRH area).
    uint64_t recv_len(uint64_t size) const { return size + payload_off(); }
    /// The send CQ of node i's QP q: with --threads, its thread's (node0's QP q is on thread q mod threads).
    ibv_cq* send_cq(unsigned i, unsigned q) const {
        return side_[i].thread_cqs.empty() ? side_[i].scq : side_[i].thread_cqs[q % nt_];
    }
    /// Node0's application thread t's QPs (t, t + threads, ...).
    unsigned qps_of_thread(unsigned t) const { return (nq_ - t + nt_ - 1) / nt_; }
    uint64_t quota_of(const phase_spec& ph, unsigned q) const {
        return ph.iters / nq_ + (q < ph.iters % nq_ ? 1 : 0);
    }
    uint32_t inline_limit(bool latency) const {
        const int v = wp_.inline_bytes;
        return v >= 0 ? uint32_t(v) : (latency ? 220u : 0u);
    }

    void find_srq_counters();
    void find_busy_counters();
    void size_buffers();

    void setup(unsigned i);
    void open_device(unsigned i, const std::string& node);
    rd_limits rd_access(unsigned i, const std::string& node);
    unsigned size_receives(unsigned i, const std::string& node);
    void alloc_buffers(unsigned i, const std::string& node, int access);
    void create_cqs(unsigned i, const std::string& node, unsigned rcq_entries);
    void create_qps(unsigned i, const std::string& node);
    void exchange_info(unsigned i, const std::string& node);
    void connect_qps(unsigned i, const std::string& node, const rd_limits& rd);
    int modify(unsigned i, ibv_qp* qp, ibv_qp_attr& attr, int mask);
    unsigned qp_index(unsigned i, uint32_t qpn) const;

    std::string completion_error(const std::string& node, const ibv_wc& wc, const std::string& wr_id) const;
    std::string cable_faults() const;
    ibv_wc poll_one(unsigned i, ibv_cq* cq);
    void post(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t local, uint64_t length, uint64_t remote,
              uint64_t wr_id, bool signaled, bool inl, uint64_t compare_add = 0, uint64_t swap = 0);

    /// QP q's WRs not yet posted (workload.post_list > 1).
    struct pending_list {
        std::vector<ibv_send_wr> wrs;
        std::vector<ibv_sge> sges;
    };
    std::vector<pending_list> lists_;

    void flush_list(unsigned i, unsigned q);
    ibv_send_wr make_wr(unsigned i, unsigned q, ibv_wr_opcode op, uint64_t local, uint64_t length,
                        uint64_t remote, uint64_t wr_id, bool signaled, bool inl, uint64_t compare_add,
                        uint64_t swap, ibv_sge& sge);
    void post_recv(unsigned i, unsigned q);
    void record_poll(unsigned i, ibv_cq* cq, const ibv_wc* wcs, int n);
    void record_write(unsigned i, uint64_t va, const void* p, size_t n);

    void bw_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep);
    bw_size bw_size_start(const phase_spec& ph, uint64_t size, uint64_t step, op_kind op);
    void check_destinations(const phase_spec& ph, op_kind op, const bw_size& b);

    std::vector<uint64_t> busy_counts() const;
    void take_util(size_result& r, const std::vector<uint64_t>& before, uint64_t ns) const;

    void run_side(unsigned i);
    void client() { run_side(0); }
    void server() { run_side(1); }

    // ------------------------------------------------------------------ verify.cpp: --verify
    const uint8_t* peek(unsigned i, uint64_t va, uint64_t n);
    uint64_t peek64(unsigned i, uint64_t va);
    void poke64(unsigned i, uint64_t va, uint64_t v);
    void poke_data(unsigned i, uint64_t va, uint64_t n, uint64_t key, int last = -1);
    void clear(unsigned i, uint64_t va, uint64_t n);
    uint64_t key(unsigned node, unsigned q, uint64_t step, uint64_t message) const {
        return verify::data_key(spec_.seed, node, q, step, message);
    }
    verify::where at(const phase_spec& ph, uint64_t size, unsigned node, unsigned q, uint64_t message,
                     const char* what) const {
        return verify::where{ph.workload.c_str(), size, node, q, message, what};
    }
    void check_send_wc(const verify::where& w, const ibv_wc& wc, ibv_wc_opcode op, uint64_t wr_id);
    void check_recv_wc(const verify::where& w, const ibv_wc& wc, uint64_t size);
    void take_counts(size_result& r);
    void same_bytes(unsigned src_node, uint64_t src, unsigned dst_node, uint64_t dst, uint64_t size);

    // ------------------------------------------------------------------ rc.cpp: RC and UC
    void connect_rc(unsigned i, unsigned q, const rd_limits& rd);
    /// What an RC QP and an EE context (ibv_qp_attr, ibv_eec_attr) are given for RTR towards
    /// the peer (path MTU --mtu, the peer's LID and PSN, READ/atomic limits, min_rnr_timer 12)
    /// and for RTS (our PSN, timeout 14, 7 retries, RNR retry 7); the callers add the state and
    /// the destination (QP or EE context) and modify with rtr_mask / rts_mask.
    template <class Attr>
    void rtr_attrs(Attr& a, const peer_info& peer, const rd_limits& lim) const {
        a.path_mtu = ibv_mtu(__builtin_ctz(spec_.mtu) - 7);
        a.rq_psn = peer.psn;
        a.max_dest_rd_atomic = lim.max_dest_rd;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = peer.lid;
        a.ah_attr.port_num = 1;
    }
    template <class Attr>
    void rts_attrs(Attr& a, unsigned i, const rd_limits& lim) const {
        a.sq_psn = info_[i].psn;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = lim.max_rd;
    }
    static constexpr int rtr_mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    static constexpr int rts_mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    void lat_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep);
    void ping(unsigned i, const phase_spec& ph, op_kind op, lat_size& l, lat_iter& x);
    void take_sample(unsigned i, lat_size& l, const lat_iter& x, double div);
    void ping_write(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x);
    void ping_send(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x);
    void take_lat_send(unsigned i, const phase_spec& ph, const lat_size& l, const lat_iter& x, int mark);
    void read_round_trip(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x);
    void atomic_round_trip(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x);
    void pong_write(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x);
    void pong_send(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x);
    void wait_byte(unsigned i, uint64_t off, uint8_t v);
    void set_send_byte(unsigned i, uint64_t off, uint8_t v);
    void take_breakdown(size_result& r, op_kind op);
    static std::vector<sc_time> partition(std::initializer_list<sc_time> t);
    void take_round_trip(size_result& r, op_kind op, const path_probe& p0, const path_probe& p1);
    void stream(unsigned i, const phase_spec& ph, op_kind op, bw_size& b, run_report& rep);
    uint64_t stream_thread(unsigned i, unsigned t, const phase_spec& ph, op_kind op, bw_size& b);
    void post_message(unsigned i, unsigned q, uint64_t m, bool sig, op_kind op, bw_size& b);
    void take_send_completion(const phase_spec& ph, op_kind op, bw_size& b, stream_state& st,
                              const ibv_wc& wc);
    void send_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step);

    // ------------------------------------------------------------------ ud.cpp: UD, multicast, UC's end
    static ibv_gid mcast_gid(unsigned q);
    int connect_unreliable(unsigned i, unsigned q, int access);
    void attach_mcast(unsigned i, const std::string& node, unsigned q);
    void make_ud_dests(unsigned i);
    void post_marker(unsigned q, uint64_t wr_id);
    void send_markers(const phase_spec& ph, uint64_t size);
    void unacked_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step);
    bool take_unacked(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step, const ibv_wc& wc,
                      std::vector<uint8_t>& marked);
    void take_datagram_counts(const phase_spec& ph, uint64_t size, size_result& r);

    // ------------------------------------------------------------------ rd.cpp: reliable datagram
    void create_rd_domain(unsigned i, const std::string& node);
    void connect_eecs(unsigned i, const std::string& node, const rd_limits& rd);
    int modify_eec(unsigned i, ibv_eec* eec, ibv_eec_attr& attr, int mask);
    void connect_rd(unsigned i, unsigned q, int access);

    // ------------------------------------------------------------------ srq.cpp: shared receive queue
    unsigned srq_size(unsigned i, const std::string& node);
    void create_srq(unsigned i, const std::string& node);
    void post_srq_slots(unsigned i);
    /// Node i's SRQ receive buffer k (after the QPs' send and receive areas).
    uint64_t srq_slot(unsigned i, unsigned k) const { return side_[i].buf + (2 * uint64_t(nq_) + k) * area_; }
    void post_srq(unsigned i, const std::vector<uint32_t>& slots);
    unsigned srq_completion(unsigned i, const phase_spec& ph, uint64_t size, unsigned q, const ibv_wc& wc,
                            bool marker);
    void srq_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step);
    void srq_payload(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step, unsigned q,
                     unsigned slot, uint64_t nth);
    std::array<uint64_t, 3> srq_counts() const;
    void take_srq_counts(size_result& r, const std::array<uint64_t, 3>& c0) const;

    // ------------------------------------------------------------------ scaling.cpp: mr_scale
    static uint64_t region_bytes(uint64_t size) {
        return (size + fw::PAGE_BYTES - 1) / fw::PAGE_BYTES * fw::PAGE_BYTES;
    }
    void mr_scale_init(const phase_spec& p, fw::driver_options& opts);
    uint64_t region_va(unsigned i, uint64_t r) const { return regions_[i].va + r * region_stride_; }
    void register_regions(unsigned i, uint64_t bytes);
    void post_region_write(unsigned q, uint64_t src, uint64_t dst, uint64_t size, uint64_t wr_id,
                           bool signaled, bool inl);
    void region_stream(const phase_spec& ph, uint64_t size, uint64_t nr, uint64_t count);
    std::array<uint64_t, 4> tu_counts() const;
    void mr_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep);
    void mr_point_run(const phase_spec& ph, uint64_t size, uint64_t nr, uint64_t step, run_report& rep);

    machine& m_;
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
    std::vector<std::unique_ptr<host_software>> sw_;  ///< one per node taking part (nn_)
    std::vector<side> side_;
    std::vector<peer_info> info_;
    std::vector<std::unique_ptr<node_process<perftest>>> receivers_;  ///< mcast_bw: processes of nodes 2 ..
    unsigned nn_ = 2;                 ///< nodes taking part: 2, or every node (mcast_bw)
    bool mcast_ = false;              ///< mcast_bw: node0 sends to groups every other node joined
    bool srq_ = false;                ///< srq_bw, ud_srq_bw: node1's QPs share one SRQ
    uint64_t ud_srq_need_ = 0;        ///< ud_srq_bw: SRQ WRs for a whole size and its markers
    const counter* srq_ctr_[3] = {};  ///< node1's srq_taken, rnr_naks_sent, srq_empty
    std::vector<std::pair<std::string, const counter*>>
        busy_;  ///< the units' *_busy_ps counters of node0 and node1
    /// The traced latency iteration: client post, server sees, server posts, client sees, sample end.
    sc_time cpu_mark_[5];
    std::vector<ibv_sge> srq_sges_;  ///< post_srq's list (reused)
    std::vector<ibv_recv_wr> srq_wrs_;
    sc_event exchanged_;
    barrier bar_;
    unsigned nq_ = 1;
    unsigned nt_ = 1;               ///< node0's application threads (--threads), each a process of its own
    uint64_t area_ = 4096;          ///< bytes of one send or receive area
    transport tr_ = transport::rc;  ///< the QPs' transport (every phase's)
    uint64_t ud_rq_need_ = 0;       ///< ud_send_bw: receives node1 needs per QP (0: rx_depth will do)
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
    run_meter meter_;               ///< the client's rows and progress to spec_.observer
    uint64_t stream_done_ = 0;      ///< messages the current bandwidth size's completions completed
};

}  // namespace hcasim::workloads
