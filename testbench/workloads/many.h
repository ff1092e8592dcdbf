// The many-node workloads (internal to testbench/workloads): incast, alltoall, permutation,
// uniform_random, bisection and hotspot. Every node of the fabric runs its part in a process of
// its own (as mcast_bw's receivers do): it sends its flows and takes what the others send it.
// Results are in simulated time; docs/fabric.md ("Many-node workloads") describes them.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "testbench/workloads/base.h"
#include "testbench/workloads/meter.h"
#include "testbench/workloads/sim_driver.h"

namespace hcasim::workloads {

/// Packets dropped on data VLs so far, per kind (the switch's and the ports' drop counters,
/// summed over their instances); extend its table as the fabric gains drop counters.
std::vector<std::pair<std::string, uint64_t>> data_vl_drops();
/// The congestion tree: the ports with the most PortXmitWait, most first, at most `top` (empty
/// while the model has no such counter: the credit-based link layer adds it).
std::vector<std::pair<std::string, uint64_t>> congestion_tree(size_t top);
/// Congestion control activity: FECN marked, BECN received, CCTI (empty while the model has no
/// congestion control).
std::vector<std::pair<std::string, uint64_t>> cc_activity();

class many_node : public sc_module {
public:
    SC_HAS_PROCESS(many_node);
    /// Plans the flows of the run's one phase; throws config_error (before the simulation) on a
    /// combination the workload cannot run, naming the key or option.
    /// `drv` runs the simulation (its barriers stand for the out-of-band exchanges); in a
    /// partitioned run this rank's processes are those of the nodes it simulates.
    many_node(sc_module_name name, machine& m, const run_spec& spec, const workload_params& wp,
              std::vector<run_report>& out, sim_driver& drv);
    ~many_node() override;
    /// After drv.run(): the run's report (out), on rank 0 of a partitioned run from every
    /// rank's counters and completions.
    void finish();

    std::string error;  ///< why the run failed ("" if it did not)

private:
    /// A flow: the messages node `src` sends to `dst` (dst -1: to a destination drawn per
    /// message), on connections of their own.
    struct flow {
        unsigned src = 0;
        int dst = -1;
        bool victim = false;
        uint32_t conn = 0;              ///< the connection of a one-destination flow
        std::vector<uint32_t> per_msg;  ///< dst -1: the connection of each message
        std::vector<uint64_t> post_ns;  ///< when each message was posted
        uint64_t posted = 0;            ///< messages posted so far
        uint64_t done = 0, end_ns = 0;  ///< messages completed, the last completion
        uint32_t conn_of(uint64_t m) const { return per_msg.empty() ? conn : per_msg[m]; }
    };
    /// `qps` QP pairs from node src to node dst, carrying one flow's messages (message k of the
    /// connection on QP k mod qps).
    struct connection {
        unsigned src = 0, dst = 0;
        uint32_t flow = 0;
        uint64_t messages = 0;                 ///< planned on this connection
        uint64_t sent = 0;                     ///< posted so far (the next message's QP)
        std::vector<ibv_qp*> tx, rx;           ///< at src, at dst (on the rank that simulates it)
        std::vector<uint32_t> tx_qpn, rx_qpn;  ///< their numbers, as the exchange told every node
        ibv_ah* ah = nullptr;                  ///< UD: src's address handle towards dst
    };
    /// One node's verbs objects and counts.
    struct host {
        ibv_context* ctx = nullptr;
        ibv_pd* pd = nullptr;
        ibv_mr* mr = nullptr;
        ibv_cq* cq = nullptr;           ///< every QP of the node completes here (one loop takes both sides)
        uint64_t buf = 0, area = 0;     ///< send area at buf, receive area at buf + area
        uint32_t rkey = 0;              ///< of the MR over both areas
        std::vector<uint32_t> out, in;  ///< connections it sends on, receives on
        std::vector<uint32_t> pending;  ///< flows it sends that have messages to post
        std::unordered_map<uint32_t, uint32_t> rx_qp;  ///< QP number -> connection * qps + QP
        uint64_t expected = 0, received = 0;           ///< UC, UD: messages to receive, received
        uint64_t in_flight = 0;                        ///< send WRs posted and not completed
        bool sent_all = false;
    };

    void plan();
    uint32_t connect(unsigned src, unsigned dst, uint32_t f);
    void check() const;

    void run_node(unsigned i);
    void setup(unsigned i);
    void create_qps(unsigned i);
    void bring_up(unsigned i, ibv_qp* qp, unsigned peer, uint32_t peer_qpn);
    void post_recv(unsigned i, uint32_t slot);
    bool post_some(unsigned i);
    void take(unsigned i, const ibv_wc& wc);
    void complete(uint32_t f, uint64_t m, uint64_t now);
    void traffic(unsigned i);
    void report();
    std::vector<uint64_t> exchange_payload(unsigned i) const;
    void take_exchange(const sim_driver::payloads& p);
    void start_measuring();
    void merge_ranks();
    uint64_t now_ns(unsigned i) { return m_.at(i).cpu.now_ns(); }
    uint64_t timeout_ns() const { return uint64_t(wp_.timeout_us.get() * 1000.0); }
    void fail(const std::string& why);

    machine& m_;
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
    std::string workload_;
    transport tr_ = transport::rc;
    unsigned nn_ = 0, nq_ = 1;
    uint64_t size_ = 0, iters_ = 0;
    std::vector<std::unique_ptr<host_software>> sw_;
    std::vector<std::unique_ptr<node_process<many_node>>> procs_;
    std::vector<host> hosts_;
    std::vector<flow> flows_;
    std::vector<connection> conns_;
    std::vector<unsigned> outstanding_;          ///< per connection * qps + QP: send WRs not completed
    std::vector<uint64_t> rx_posted_, rx_done_;  ///< per connection * qps + QP (UC, UD)
    std::vector<double> mct_us_;                 ///< every completed message's completion time
    std::vector<std::pair<std::string, uint64_t>> drops0_;    ///< drop counters at the start
    uint64_t t0_ns_ = 0;                                      ///< the common start (every node set up)
    std::chrono::steady_clock::time_point wall0_;             ///< host time at the start (--speed)
    uint64_t packets0_ = 0;                                   ///< wire packets at the start
    std::unordered_map<const counter*, uint64_t> counters0_;  ///< every counter at the start
    unsigned senders_left_ = 0;                               ///< nodes still sending
    uint64_t all_sent_ns_ = 0;                                ///< when the last node's last send completed
    sim_driver& drv_;
    unsigned exchange_ = 0, start_ = 0, end_ = 0;  ///< drv_'s barriers
    bool ended_ = false;                           ///< every node reached the end
    run_meter meter_;                              ///< node0's row and the progress to spec_.observer
    uint64_t completed_ = 0;                       ///< messages completed so far, over every flow
};

}  // namespace hcasim::workloads
