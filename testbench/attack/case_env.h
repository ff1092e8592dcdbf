// One attack case's environment (env): the two-node machine's software (bench), QP pairs,
// regions and windows, controls, the attack and its judgement, cleanup (case_env.cpp). Internal
// to testbench/attack/; the cases (cases_*.cpp) drive it, attack_suite.cpp runs them.
#pragma once
#include <systemc>

#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

#include "model/system/fabric.h"
#include "testbench/attack/outcome.h"
#include "testbench/host_software.h"

namespace hcasim::attack {

// ---------------------------------------------------------------- the machine and its software

struct bench {
    explicit bench(machine& mach) : m(mach) {
        fw::driver_options opts;
        for (unsigned i = 0; i < 2; ++i) sw[i] = std::make_unique<host_software>(m.at(i), opts);
    }
    machine& m;
    std::unique_ptr<host_software> sw[2];
    ibv_context* ctx[2] = {};
    ibv_pd* pd[2] = {};   ///< the PD of each node's QPs and regions unless a case says otherwise
    ibv_pd* pd2[2] = {};  ///< a second PD per node (PD mismatches)
    uint16_t lid[2] = {};
    bool two_a = false;  ///< the HCA's type 2 windows are type 2A (hca.mw_type2=2A)
    host_bus& bus(unsigned i) { return m.at(i).cpu; }

    /// Opens both devices; an error text or "".
    std::string open() {
        for (unsigned i = 0; i < 2; ++i) {
            ctx[i] = ibv_open_device(sw[i]->driver, sw[i]->as);
            if (!ctx[i])
                return "node" + std::to_string(i) + ": ibv_open_device: " + sw[i]->driver.last_error();
            pd[i] = ibv_alloc_pd(ctx[i]);
            pd2[i] = ibv_alloc_pd(ctx[i]);
            if (!pd[i] || !pd2[i]) return "node" + std::to_string(i) + ": ibv_alloc_pd failed";
            ibv_port_attr pa{};
            ibv_query_port(ctx[i], 1, &pa);
            lid[i] = pa.lid;
        }
        ibv_device_attr da{};
        if (ibv_query_device(ctx[1], &da)) return "ibv_query_device failed";
        two_a = da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A;
        return "";
    }
};

/// Thrown by case helpers: the case fails with `why` (setup or control went wrong).
struct case_abort {
    std::string why;
};
[[noreturn]] inline void abort_case(const std::string& why) { throw case_abort{why}; }

/// How a QP pair is created.
struct pair_opts {
    bool pd2 = false;        ///< node1's QP in node1's second PD
    unsigned access1 = ALL;  ///< node1 QP's qp_access_flags (rights of incoming requests)
    uint32_t create0 = 0;    ///< node0 QP's ibv_qp_create_flags
    uint32_t create1 = 0;    ///< node1 QP's ibv_qp_create_flags
};

/// One RC connection node0 <-> node1 with its own CQs.
struct qp_pair {
    ibv_cq* cq[4] = {};  ///< cq_index
    ibv_qp* qp[2] = {};
    pair_opts o;
    unsigned recvs[2] = {};               ///< receive WRs posted and not yet completed, per node
    ibv_qp_state expect[2] = {RTS, RTS};  ///< states the final check wants
};

struct area {
    unsigned node;
    uint64_t va, len;
    std::vector<uint8_t> before;
};

// ---------------------------------------------------------------- one case's environment

/// What one case works with. node1 holds the target: [base, base + kLayout) = guard, region
/// (tgt, kRegion bytes), guard, all filled with a pattern. node0 has a source buffer (src, smr:
/// local write + remote read) and a destination buffer (dst, dmr: local write) for READ data and
/// atomic results. Helpers throw case_abort when setup or a control fails.
class env {
public:
    env(bench& b, uint64_t seed);

    bench& b() { return b_; }
    bool two_a() const { return b_.two_a; }

    uint64_t base = 0, tgt = 0;  ///< node1: layout start, target region start
    uint64_t src = 0, dst = 0;   ///< node0 buffers
    ibv_mr* smr = nullptr;
    ibv_mr* dmr = nullptr;
    uint64_t rbuf = 0;  ///< node1 receive buffer (SENDs that are not the attack's target)

    // ---- memory
    uint64_t alloc(unsigned node, uint64_t bytes);
    void put(unsigned node, uint64_t va, const std::vector<uint8_t>& v);
    std::vector<uint8_t> get(unsigned node, uint64_t va, uint64_t n);
    uint64_t pa(unsigned node, uint64_t va);
    uint64_t word(unsigned node, uint64_t va);

    // ---- keys (tracked: the case's cleanup frees what is left)
    ibv_pd* pd(unsigned node, bool second = false) { return second ? b_.pd2[node] : b_.pd[node]; }
    ibv_mr* reg(unsigned node, uint64_t va, uint64_t len, int access, ibv_pd* p = nullptr);
    /// A region of node1 over [va, va + len) (default: the target region).
    ibv_mr* mr1(int access, uint64_t va = 0, uint64_t len = kRegion, ibv_pd* p = nullptr);
    ibv_mr* shared1(ibv_mr* from, ibv_pd* p, int access, uint64_t iova);
    ibv_mr* phys1(const ibv_phys_mr_attr& a, ibv_pd* p = nullptr);
    ibv_mr* lkey1(uint32_t pages, ibv_pd* p = nullptr);
    int dereg(ibv_mr* mr);
    void must_dereg(ibv_mr* mr);
    ibv_mw* mw1(ibv_mw_type t, ibv_pd* p = nullptr);
    void must_dealloc(ibv_mw* mw);
    /// Pins node1's [va, va + len) and returns its physical pages (for PMR / Fast Register).
    std::vector<uint64_t> pages1(uint64_t va, uint64_t len);

    // ---- QP pairs
    /// Opens the next pair (the first one opened is pair 0, the default attack pair).
    unsigned open(const pair_opts& o = {});
    /// Pair k (opened with default options when the case has not opened it).
    qp_pair& p(unsigned k = 0);
    size_t pair_count() const { return pairs_.size(); }
    /// Both QPs of pair k to Reset and back to RTS (same QPNs), e.g. after a refused attack.
    void reconnect(unsigned k);
    /// lkey of a receive buffer region of node1 in the PD of pair k's node1 QP.
    uint32_t rbuf_lkey(unsigned k);

    // ---- waiting
    std::vector<ibv_wc> wait(ibv_cq* cq, size_t n, uint64_t timeout_ns);
    /// Polls every CQ of every pair once more; the first completion nobody expected, or "".
    std::string stray_completion();
    void sleep(uint64_t ns) { b_.bus(0).sleep_ns(ns); }

    /// Moves node i's pending async events (COMM_EST aside) into events_.
    void collect_events();
    /// Takes one event of `type` on `qp` (node i) out of events_; false if there is none.
    bool take_event(unsigned i, ibv_qp* qp, int type);
    /// Any event on `qp` (node i) still in events_, as text, or "".
    std::string event_on(unsigned i, ibv_qp* qp);
    std::string stray_event();
    ibv_qp_state state(ibv_qp* qp);

    // ---- work requests
    /// A send WR on node0 towards node1 for `op` (WRITE / SEND from src, READ into dst, atomics
    /// into dst; SEND_WITH_INV invalidates `rkey`; len 0: no SGE).
    ibv_send_wr remote_wr(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, ibv_sge* sge);
    int post(unsigned node, unsigned k, ibv_send_wr& wr);
    void recv1(std::vector<ibv_sge> sges, unsigned k = 0);
    /// A receive into node1's spare buffer (for SENDs whose data is not the point).
    void recv1_spare(unsigned k = 0) { recv1({{rbuf, 4096, rbuf_lkey(k)}}, k); }

    /// Waits for one successful completion of `opcode` on cq; aborts with `what` otherwise.
    ibv_wc expect_ok(ibv_cq* cq, int opcode, const std::string& what);
    void expect_mem(unsigned node, uint64_t va, const std::vector<uint8_t>& want, const std::string& what);

    // ---- controls: the same operation done right succeeds
    /// RDMA WRITE of len bytes to (va, rkey) over pair k; they must land at node1's `land`.
    void ctl_write(uint32_t rkey, uint64_t va, uint32_t len, uint64_t land, unsigned k = 0);
    /// RDMA READ of len bytes from (va, rkey); they must equal node1's bytes at `from`.
    void ctl_read(uint32_t rkey, uint64_t va, uint32_t len, uint64_t from, unsigned k = 0);
    /// Fetch&Add 1 at (va, rkey): the old value of node1's word at `land` comes back, it grows by 1.
    void ctl_atomic(uint32_t rkey, uint64_t va, uint64_t land, unsigned k = 0);
    /// SEND of 64 bytes over pair k into the receive SGE list given; the bytes land at `land`.
    void ctl_send(std::vector<ibv_sge> recv_sges, uint64_t land, unsigned k = 0);
    /// SEND with Invalidate of `key` over pair k succeeds: the receive reports WITH_INV and the key.
    void ctl_send_inv(uint32_t key, unsigned k = 0);
    /// Type 1 bind by ibv_bind_mw on pair k's node1 QP; returns the window's new R_Key.
    uint32_t bind1(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access, unsigned k = 0);
    ibv_send_wr bind2_wr(ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len,
                         unsigned access);
    /// Type 2 bind WR on pair k's node1 QP with the consumer's key byte; returns the R_Key.
    uint32_t bind2(ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access,
                   unsigned k = 0);
    ibv_send_wr local_inv_wr(uint32_t key);
    void local_inv(uint32_t key, unsigned k = 0);
    ibv_send_wr fast_reg_wr(ibv_mr* mr, uint8_t key_byte, uint64_t iova, uint64_t len, int access,
                            const std::vector<uint64_t>& pages, uint32_t page_offset = 0);
    /// Fast Register WR on pair k's node1 QP; returns the new R_Key.
    uint32_t fast_reg(ibv_mr* mr, uint8_t key_byte, uint64_t iova, uint64_t len, int access,
                      const std::vector<uint64_t>& pages, unsigned k = 0);

    // ---- the attack (exactly one per case; the snapshot is taken right before it)
    void watch(unsigned node, uint64_t va, uint64_t len) { areas_.push_back({node, va, len, {}}); }
    bool watch_layout = true;  ///< snapshot node1's layout and node0's dst (default)
    void snapshot();
    /// Bytes of the snapshot that differ now; `where` names the first.
    uint64_t changed(std::string* where);

    /// Remote request from node0 over pair k.
    void remote(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, unsigned k = 0);
    /// Any send WR on node `node` of pair k.
    void attack_post(unsigned node, unsigned k, ibv_send_wr& wr);
    /// Type 1 bind by the verb on pair k's node1 QP.
    void attack_bind1(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access, unsigned k = 0);
    /// A verb (not a WR) whose return code is the attack's outcome.
    void attack_verb(const std::function<int()>& verb, unsigned k = 0);

    bool attacked = false;
    int attack_rc = 0;
    int attack_op = OP_ANY;  ///< ibv_wc_opcode of the attack's WR
    unsigned attack_pair = 0;
    unsigned controls = 0;            ///< successful control operations (data moved as it should)
    std::function<void(env&)> after;  ///< runs once the attack was judged (controls / probes after it)
    uint64_t probe_changed = 0;       ///< snapshot bytes changed by probes run in `after`

    /// In `after`: a further hostile remote request over pair k must fail like remote_fault(),
    /// changing nothing (e.g. to show a refused bind granted nothing).
    void probe_fault(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, unsigned k);

    /// Judges the attack against `x`: "" if it was rejected exactly so, else the first difference.
    std::string judge(const outcome& x);

    /// After `after`: every pair in its expected state, no completion or event left over.
    std::string final_check();

    /// Frees everything the case made (windows, QPs, CQs, regions, mappings); "" or what failed.
    std::string cleanup();

private:
    /// New bytes in node0's source buffer, so that data an attack wrongly moves differs from
    /// what the target (or an earlier control) already holds.
    void fresh_source() { put(0, src, pattern(kBuf, seed_ * 53 + 7 + controls)); }
    void mark(unsigned k, int op);
    int connect(qp_pair& q, unsigned i);

    bench& b_;
    uint64_t seed_;
    std::vector<std::unique_ptr<qp_pair>> pairs_;
    std::vector<ibv_mr*> mrs_[2];
    std::vector<ibv_mw*> mws_;
    std::vector<std::pair<uint64_t, uint64_t>> mapped_;
    ibv_mr* rmr_[2] = {};
    std::vector<area> areas_;
    bool snapped_ = false;
    std::deque<ibv_async_event> events_[2];
};

}  // namespace hcasim::attack
