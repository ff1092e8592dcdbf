#include "testbench/attack_suite.h"

#include <systemc>

#include <cerrno>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <sstream>
#include <utility>

#include "firmware/verbs.h"
#include "model/hca/translation_unit.h"
#include "model/system/fabric.h"
#include "testbench/host_software.h"
#include "testbench/verbs_trace.h"

namespace hcasim::attack {

using namespace hcasim::verbs;
using xs = xlate_status;

namespace {

// ---------------------------------------------------------------- constants

constexpr uint64_t kGuard = 4096;   ///< guard band before and after the target region
constexpr uint64_t kRegion = 8192;  ///< target region bytes (two pages)
constexpr uint64_t kLayout = 2 * kGuard + kRegion;
constexpr uint64_t kBuf = 16384;          ///< node0 source / destination buffers
constexpr uint64_t kWaitNs = 2'000'000;   ///< bound for one expected completion (simulated)
constexpr uint64_t kQuietNs = 20'000;     ///< after the last expected completion: nothing more may come
constexpr uint64_t WO = 1024, WL = 2048;  ///< the windows: [tgt + WO, tgt + WO + WL)
constexpr uint64_t kTop = ~uint64_t(0);   ///< the last virtual address
/// An R_Key / L_Key whose index no case allocates (MPT indexes are handed out from 1 upwards).
constexpr uint32_t kNoKey = (0xF000u << 8) | 0x11u;

constexpr unsigned LW = IBV_ACCESS_LOCAL_WRITE, RW = IBV_ACCESS_REMOTE_WRITE, RR = IBV_ACCESS_REMOTE_READ,
                   RA = IBV_ACCESS_REMOTE_ATOMIC, MWB = IBV_ACCESS_MW_BIND, ZB = IBV_ACCESS_ZERO_BASED;
constexpr unsigned ALL = LW | RW | RR | RA;
constexpr ibv_qp_state ERR = IBV_QPS_ERR, RTS = IBV_QPS_RTS;

/// Completion queues of a QP pair: node0 send / receive, node1 send / receive.
enum cq_index { S0 = 0, R0 = 1, S1 = 2, R1 = 3 };
const char* const cq_names[4] = {"node0 send CQ", "node0 receive CQ", "node1 send CQ", "node1 receive CQ"};

constexpr int OP_OF_ATTACK = -1;  ///< wc_exp::opcode: the opcode of the attack's work request
constexpr int OP_ANY = -2;        ///< wc_exp::opcode: not checked
constexpr int NOT_CHECKED = -1;   ///< wc_exp::vendor / outcome::event: none expected or not checked

// ---------------------------------------------------------------- names

std::string status_name(int s) {
    const std::string n = trace::wc_status_name(s);
    return n != "?" ? n : "status " + std::to_string(s);
}

std::string opcode_name(int op) {
    const std::string n = trace::wc_opcode_name(op);
    return n != "?" ? n : "opcode " + std::to_string(op);
}

std::string event_name(int e) {
    const std::string n = trace::event_name(e);
    return n != "?" ? n : "event " + std::to_string(e);
}

std::string state_name(int s) {
    static const char* const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return s >= 0 && s <= 6 ? n[s] : "state " + std::to_string(s);
}

std::string errno_name(int e) {
    switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EBUSY: return "EBUSY";
    case ENOMEM: return "ENOMEM";
    default: return "errno " + std::to_string(e);
    }
}

std::string vendor_name(int v) {
    return std::string(to_string(xlate_status(v))) + " (" + std::to_string(v) + ")";
}

int wc_op_of(ibv_wr_opcode op) {
    switch (op) {
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM: return IBV_WC_RDMA_WRITE;
    case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
    case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
    case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
    case IBV_WR_LOCAL_INV: return IBV_WC_LOCAL_INV;
    case IBV_WR_BIND_MW: return IBV_WC_BIND_MW;
    case IBV_WR_FAST_REG_MR: return IBV_WC_FAST_REG_MR;
    default: return IBV_WC_SEND;
    }
}

bool is_atomic(ibv_wr_opcode op) {
    return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/// Deterministic bytes (xorshift), different for different seeds.
std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
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

// ---------------------------------------------------------------- expected outcomes

/// One expected completion.
struct wc_exp {
    int status;
    int opcode = OP_OF_ATTACK;
    int vendor = NOT_CHECKED;  ///< xlate_status the CQE's vendor_err must carry
};

/// How an attack must be rejected. Receives left posted on a QP that ends in Error are expected
/// to flush (WR_FLUSH_ERR) after the completions listed here.
struct outcome {
    int post = 0;                               ///< return code of the verb / post that carries the attack
    std::vector<wc_exp> cq[4];                  ///< completions on the attack pair's CQs (cq_index), in order
    int event[2] = {NOT_CHECKED, NOT_CHECKED};  ///< affiliated async event on node i's QP (or none)
    ibv_qp_state state[2] = {RTS, RTS};         ///< QP states afterwards (ibv_query_qp)
};

/// A remote request the responder refuses: NAK Remote Access Error.
outcome remote_fault() {
    outcome o;
    o.cq[S0] = {{IBV_WC_REM_ACCESS_ERR}};
    o.event[1] = IBV_EVENT_QP_ACCESS_ERR;
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// A local segment of node i's WR fails its check: nothing is sent.
outcome local_prot(unsigned node, xs why) {
    outcome o;
    o.cq[node ? S1 : S0] = {{IBV_WC_LOC_PROT_ERR, OP_OF_ATTACK, int(why)}};
    o.state[node] = ERR;
    return o;
}
/// A memory management WR on node1 fails (Memory Management Operation Error).
outcome mm_error(xs why) {
    outcome o;
    o.cq[S1] = {{IBV_WC_MW_BIND_ERR, OP_OF_ATTACK, int(why)}};
    o.state[1] = ERR;
    return o;
}
/// A SEND into a receive SGE of node1 that fails its check.
outcome recv_prot(xs why) {
    outcome o;
    o.cq[R1] = {{IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, int(why)}};
    o.cq[S0] = {{IBV_WC_REM_OP_ERR}};
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// A SEND with Invalidate whose invalidation node1 refuses: the key stays as it was.
outcome send_inv_refused(xs why) {
    outcome o;
    o.cq[R1] = {{IBV_WC_MW_BIND_ERR, IBV_WC_RECV, int(why)}};
    o.cq[S0] = {{IBV_WC_REM_OP_ERR}};
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// An RDMA WRITE with immediate refused after it took a receive WQE.
outcome write_imm_fault() {
    outcome o;
    o.cq[R1] = {{IBV_WC_LOC_ACCESS_ERR, IBV_WC_RECV_RDMA_WITH_IMM}};
    o.cq[S0] = {{IBV_WC_REM_ACCESS_ERR}};
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// The verb or post returns an immediate error; nothing reaches the HCA, both QPs stay RTS.
outcome refused(int rc) {
    outcome o;
    o.post = rc;
    return o;
}

std::string describe(const outcome& o) {
    std::ostringstream s;
    if (o.post) s << "returns " << errno_name(o.post) << ", no completion; ";
    for (unsigned k = 0; k < 4; ++k) {
        if (o.cq[k].empty()) continue;
        s << cq_names[k] << ": ";
        for (size_t i = 0; i < o.cq[k].size(); ++i) {
            const wc_exp& w = o.cq[k][i];
            s << (i ? ", " : "") << status_name(w.status);
            if (w.opcode >= 0) s << " " << opcode_name(w.opcode);
            if (w.vendor >= 0) s << " (vendor_err " << to_string(xlate_status(w.vendor)) << ")";
        }
        s << "; ";
    }
    bool any_event = false;
    for (unsigned i = 0; i < 2; ++i)
        if (o.event[i] >= 0) {
            s << "node" << i << " event " << event_name(o.event[i]) << "; ";
            any_event = true;
        }
    if (!any_event) s << "no async event; ";
    s << "QPs " << state_name(o.state[0]) << "/" << state_name(o.state[1]) << "; target unchanged";
    return s.str();
}

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
[[noreturn]] void abort_case(const std::string& why) { throw case_abort{why}; }

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
    env(bench& b, uint64_t seed) : b_(b), seed_(seed) {
        base = alloc(1, kLayout);
        tgt = base + kGuard;
        put(1, base, pattern(kLayout, seed));
        src = alloc(0, kBuf);
        put(0, src, pattern(kBuf, seed + 1));
        dst = alloc(0, kBuf);
        put(0, dst, pattern(kBuf, seed + 2));
        smr = reg(0, src, kBuf, LW | RR);
        dmr = reg(0, dst, kBuf, LW);
        rbuf = alloc(1, 8192);
    }

    bench& b() { return b_; }
    bool two_a() const { return b_.two_a; }

    uint64_t base = 0, tgt = 0;  ///< node1: layout start, target region start
    uint64_t src = 0, dst = 0;   ///< node0 buffers
    ibv_mr* smr = nullptr;
    ibv_mr* dmr = nullptr;
    uint64_t rbuf = 0;  ///< node1 receive buffer (SENDs that are not the attack's target)

    // ---- memory
    uint64_t alloc(unsigned node, uint64_t bytes) {
        const uint64_t va = b_.sw[node]->as.alloc(bytes, 4096);
        if (!va) abort_case("node" + std::to_string(node) + ": out of virtual memory");
        return va;
    }
    void put(unsigned node, uint64_t va, const std::vector<uint8_t>& v) {
        if (!b_.sw[node]->as.write(va, v.data(), v.size())) abort_case("write to an unmapped address");
    }
    std::vector<uint8_t> get(unsigned node, uint64_t va, uint64_t n) {
        std::vector<uint8_t> v(n);
        if (!b_.sw[node]->as.read(va, v.data(), n)) abort_case("read of an unmapped address");
        return v;
    }
    uint64_t pa(unsigned node, uint64_t va) {
        uint64_t p = 0;
        if (!b_.sw[node]->as.translate(va, &p)) abort_case("no translation for a buffer");
        return p;
    }
    uint64_t word(unsigned node, uint64_t va) {
        uint64_t w = 0;
        const auto v = get(node, va, 8);
        std::memcpy(&w, v.data(), 8);
        return w;
    }

    // ---- keys (tracked: the case's cleanup frees what is left)
    ibv_pd* pd(unsigned node, bool second = false) { return second ? b_.pd2[node] : b_.pd[node]; }
    ibv_mr* reg(unsigned node, uint64_t va, uint64_t len, int access, ibv_pd* p = nullptr) {
        ibv_mr* mr = ibv_reg_mr(p ? p : b_.pd[node], va, len, access);
        if (!mr)
            abort_case("node" + std::to_string(node) + ": ibv_reg_mr failed, errno " + std::to_string(errno));
        mrs_[node].push_back(mr);
        return mr;
    }
    /// A region of node1 over [va, va + len) (default: the target region).
    ibv_mr* mr1(int access, uint64_t va = 0, uint64_t len = kRegion, ibv_pd* p = nullptr) {
        return reg(1, va ? va : tgt, len, access, p);
    }
    ibv_mr* shared1(ibv_mr* from, ibv_pd* p, int access, uint64_t iova) {
        ibv_mr* mr = ibv_reg_shared_mr(from, p, access, iova);
        if (!mr) abort_case("ibv_reg_shared_mr failed, errno " + std::to_string(errno));
        mrs_[1].push_back(mr);
        return mr;
    }
    ibv_mr* phys1(const ibv_phys_mr_attr& a, ibv_pd* p = nullptr) {
        ibv_mr* mr = ibv_reg_phys_mr(p ? p : b_.pd[1], &a);
        if (!mr) abort_case("ibv_reg_phys_mr failed, errno " + std::to_string(errno));
        mrs_[1].push_back(mr);
        return mr;
    }
    ibv_mr* lkey1(uint32_t pages, ibv_pd* p = nullptr) {
        ibv_mr* mr = ibv_alloc_lkey(p ? p : b_.pd[1], pages);
        if (!mr) abort_case("ibv_alloc_lkey failed, errno " + std::to_string(errno));
        mrs_[1].push_back(mr);
        return mr;
    }
    int dereg(ibv_mr* mr) {
        const int rc = ibv_dereg_mr(mr);
        if (rc == 0)
            for (auto& v : mrs_)
                for (auto it = v.begin(); it != v.end(); ++it)
                    if (*it == mr) {
                        v.erase(it);
                        break;
                    }
        return rc;
    }
    void must_dereg(ibv_mr* mr) {
        if (int rc = dereg(mr)) abort_case("ibv_dereg_mr failed: " + errno_name(rc));
    }
    ibv_mw* mw1(ibv_mw_type t, ibv_pd* p = nullptr) {
        ibv_mw* mw = ibv_alloc_mw(p ? p : b_.pd[1], t);
        if (!mw) abort_case("ibv_alloc_mw failed, errno " + std::to_string(errno));
        mws_.push_back(mw);
        return mw;
    }
    void must_dealloc(ibv_mw* mw) {
        if (int rc = ibv_dealloc_mw(mw)) abort_case("ibv_dealloc_mw failed: " + errno_name(rc));
        for (auto it = mws_.begin(); it != mws_.end(); ++it)
            if (*it == mw) {
                mws_.erase(it);
                break;
            }
    }
    /// Pins node1's [va, va + len) and returns its physical pages (for PMR / Fast Register).
    std::vector<uint64_t> pages1(uint64_t va, uint64_t len) {
        std::vector<uint64_t> p;
        if (int rc = ibv_map_pages(b_.ctx[1], va, len, &p))
            abort_case("ibv_map_pages failed: " + errno_name(rc));
        mapped_.emplace_back(va, len);
        return p;
    }

    // ---- QP pairs
    /// Opens the next pair (the first one opened is pair 0, the default attack pair).
    unsigned open(const pair_opts& o = {}) {
        auto p = std::make_unique<qp_pair>();
        p->o = o;
        pairs_.push_back(std::move(p));
        qp_pair& q = *pairs_.back();
        for (unsigned i = 0; i < 2; ++i) {
            q.cq[i ? S1 : S0] = ibv_create_cq(b_.ctx[i], 16);
            q.cq[i ? R1 : R0] = ibv_create_cq(b_.ctx[i], 16);
            if (!q.cq[i ? S1 : S0] || !q.cq[i ? R1 : R0]) abort_case("ibv_create_cq failed");
            ibv_qp_init_attr a{};
            a.send_cq = q.cq[i ? S1 : S0];
            a.recv_cq = q.cq[i ? R1 : R0];
            a.qp_type = IBV_QPT_RC;
            a.cap.max_send_wr = 16;
            a.cap.max_recv_wr = 16;
            a.cap.max_send_sge = 2;
            a.cap.max_recv_sge = 2;
            a.create_flags = i ? o.create1 : o.create0;
            q.qp[i] = ibv_create_qp(i ? pd(1, o.pd2) : b_.pd[0], &a);
            if (!q.qp[i])
                abort_case("node" + std::to_string(i) + ": ibv_create_qp failed, errno " +
                           std::to_string(errno));
        }
        for (unsigned i = 0; i < 2; ++i)
            if (int rc = connect(q, i))
                abort_case("node" + std::to_string(i) + ": modify_qp to RTS failed: " + errno_name(rc));
        return unsigned(pairs_.size() - 1);
    }
    /// Pair k (opened with default options when the case has not opened it).
    qp_pair& p(unsigned k = 0) {
        while (pairs_.size() <= k) open();
        return *pairs_[k];
    }
    size_t pair_count() const { return pairs_.size(); }
    /// Both QPs of pair k to Reset and back to RTS (same QPNs), e.g. after a refused attack.
    void reconnect(unsigned k) {
        qp_pair& q = p(k);
        for (unsigned i = 0; i < 2; ++i) {
            ibv_qp_attr a{};
            a.qp_state = IBV_QPS_RESET;
            if (int rc = ibv_modify_qp(q.qp[i], &a, IBV_QP_STATE))
                abort_case("reset of node" + std::to_string(i) + "'s QP failed: " + errno_name(rc));
            q.recvs[i] = 0;
        }
        for (unsigned i = 0; i < 2; ++i)
            if (int rc = connect(q, i)) abort_case("reconnect failed: " + errno_name(rc));
        q.expect[0] = q.expect[1] = RTS;
    }
    /// lkey of a receive buffer region of node1 in the PD of pair k's node1 QP.
    uint32_t rbuf_lkey(unsigned k) {
        const bool second = p(k).o.pd2;
        ibv_mr*& m = rmr_[second];
        if (!m) m = reg(1, rbuf, 8192, LW, pd(1, second));
        return m->lkey;
    }

    // ---- waiting
    std::vector<ibv_wc> wait(ibv_cq* cq, size_t n, uint64_t timeout_ns) {
        std::vector<ibv_wc> out;
        host_bus& bus = b_.bus(cq->context == b_.ctx[1] ? 1 : 0);
        const uint64_t deadline = bus.now_ns() + timeout_ns;
        while (out.size() < n) {
            ibv_wc wc[8];
            const int got = ibv_poll_cq(cq, int(std::min<size_t>(8, n - out.size())), wc);
            if (got < 0) abort_case("ibv_poll_cq returned " + std::to_string(got));
            out.insert(out.end(), wc, wc + got);
            if (got > 0) continue;
            const uint64_t now = bus.now_ns();
            if (now >= deadline || ibv_wait_cq(cq, deadline - now) != 0) break;
        }
        return out;
    }
    /// Polls every CQ of every pair once more; the first completion nobody expected, or "".
    std::string stray_completion() {
        for (size_t k = 0; k < pairs_.size(); ++k)
            for (unsigned c = 0; c < 4; ++c) {
                ibv_wc wc{};
                if (ibv_poll_cq(pairs_[k]->cq[c], 1, &wc) > 0)
                    return "unexpected completion on pair " + std::to_string(k) + "'s " + cq_names[c] + ": " +
                           status_name(wc.status) + " " + opcode_name(wc.opcode);
            }
        return "";
    }
    void sleep(uint64_t ns) { b_.bus(0).sleep_ns(ns); }

    /// Moves node i's pending async events (COMM_EST aside) into events_.
    void collect_events() {
        for (unsigned i = 0; i < 2; ++i) {
            ibv_async_event ev;
            while (ibv_get_async_event(b_.ctx[i], &ev, 1) == 0) {
                ibv_ack_async_event(&ev);
                if (ev.event_type != IBV_EVENT_COMM_EST) events_[i].push_back(ev);
            }
        }
    }
    /// Takes one event of `type` on `qp` (node i) out of events_; false if there is none.
    bool take_event(unsigned i, ibv_qp* qp, int type) {
        for (auto it = events_[i].begin(); it != events_[i].end(); ++it)
            if (it->event_type == type && it->element.qp == qp) {
                events_[i].erase(it);
                return true;
            }
        return false;
    }
    /// Any event on `qp` (node i) still in events_, as text, or "".
    std::string event_on(unsigned i, ibv_qp* qp) {
        for (const auto& ev : events_[i])
            if (ev.element.qp == qp) return event_name(ev.event_type);
        return "";
    }
    std::string stray_event() {
        for (unsigned i = 0; i < 2; ++i)
            if (!events_[i].empty())
                return "unexpected async event " + event_name(events_[i].front().event_type) + " on node" +
                       std::to_string(i);
        return "";
    }
    ibv_qp_state state(ibv_qp* qp) {
        ibv_qp_attr a{};
        ibv_qp_init_attr ia{};
        if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) return IBV_QPS_UNKNOWN;
        return a.qp_state;
    }

    // ---- work requests
    /// A send WR on node0 towards node1 for `op` (WRITE / SEND from src, READ into dst, atomics
    /// into dst; SEND_WITH_INV invalidates `rkey`; len 0: no SGE).
    ibv_send_wr remote_wr(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, ibv_sge* sge) {
        ibv_send_wr wr{};
        wr.opcode = op;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr_id = 0xA77AC4;
        const bool into_dst = op == IBV_WR_RDMA_READ || is_atomic(op);
        *sge = ibv_sge{into_dst ? dst : src, is_atomic(op) ? 8u : len, into_dst ? dmr->lkey : smr->lkey};
        wr.sg_list = sge;
        wr.num_sge = sge->length ? 1 : 0;
        wr.wr.rdma.remote_addr = va;
        wr.wr.rdma.rkey = rkey;
        wr.wr.atomic.remote_addr = va;
        wr.wr.atomic.rkey = rkey;
        wr.wr.atomic.compare_add = 1;
        wr.wr.atomic.swap = 0x5757575757575757ull;
        if (op == IBV_WR_SEND_WITH_INV) wr.invalidate_rkey = rkey;
        if (op == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = 0x1234;
        return wr;
    }
    int post(unsigned node, unsigned k, ibv_send_wr& wr) {
        ibv_send_wr* bad = nullptr;
        return ibv_post_send(p(k).qp[node], &wr, &bad);
    }
    void recv1(std::vector<ibv_sge> sges, unsigned k = 0) {
        ibv_recv_wr wr{};
        wr.wr_id = 0x2ECF;
        wr.sg_list = sges.data();
        wr.num_sge = int(sges.size());
        ibv_recv_wr* bad = nullptr;
        if (int rc = ibv_post_recv(p(k).qp[1], &wr, &bad))
            abort_case("ibv_post_recv failed: " + errno_name(rc));
        ++p(k).recvs[1];
    }
    /// A receive into node1's spare buffer (for SENDs whose data is not the point).
    void recv1_spare(unsigned k = 0) { recv1({{rbuf, 4096, rbuf_lkey(k)}}, k); }

    /// Waits for one successful completion of `opcode` on cq; aborts with `what` otherwise.
    ibv_wc expect_ok(ibv_cq* cq, int opcode, const std::string& what) {
        auto v = wait(cq, 1, kWaitNs);
        if (v.empty()) abort_case(what + ": no completion");
        if (v[0].status != IBV_WC_SUCCESS)
            abort_case(what + ": " + status_name(v[0].status) + " (vendor_err " +
                       std::to_string(v[0].vendor_err) + ")");
        if (int(v[0].opcode) != opcode)
            abort_case(what + ": opcode " + opcode_name(v[0].opcode) + ", expected " + opcode_name(opcode));
        return v[0];
    }
    void expect_mem(unsigned node, uint64_t va, const std::vector<uint8_t>& want, const std::string& what) {
        const auto got = get(node, va, want.size());
        for (size_t i = 0; i < want.size(); ++i)
            if (got[i] != want[i]) abort_case(what + ": byte " + std::to_string(i) + " differs");
    }

    // ---- controls: the same operation done right succeeds
    /// RDMA WRITE of len bytes to (va, rkey) over pair k; they must land at node1's `land`.
    void ctl_write(uint32_t rkey, uint64_t va, uint32_t len, uint64_t land, unsigned k = 0) {
        const auto data = pattern(len, seed_ * 31 + ++controls);
        put(0, src, data);
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(IBV_WR_RDMA_WRITE, va, len, rkey, &sge);
        if (int rc = post(0, k, wr)) abort_case("control WRITE: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[S0], IBV_WC_RDMA_WRITE, "control WRITE");
        if (len) expect_mem(1, land, data, "control WRITE data");
    }
    /// RDMA READ of len bytes from (va, rkey); they must equal node1's bytes at `from`.
    void ctl_read(uint32_t rkey, uint64_t va, uint32_t len, uint64_t from, unsigned k = 0) {
        put(0, dst, std::vector<uint8_t>(len, 0xEE));
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(IBV_WR_RDMA_READ, va, len, rkey, &sge);
        if (int rc = post(0, k, wr)) abort_case("control READ: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[S0], IBV_WC_RDMA_READ, "control READ");
        expect_mem(0, dst, get(1, from, len), "control READ data");
    }
    /// Fetch&Add 1 at (va, rkey): the old value of node1's word at `land` comes back, it grows by 1.
    void ctl_atomic(uint32_t rkey, uint64_t va, uint64_t land, unsigned k = 0) {
        const uint64_t old = word(1, land);
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, va, 8, rkey, &sge);
        if (int rc = post(0, k, wr)) abort_case("control FETCH_ADD: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[S0], IBV_WC_FETCH_ADD, "control FETCH_ADD");
        if (word(0, dst) != old || word(1, land) != old + 1)
            abort_case("control FETCH_ADD: wrong result or memory");
    }
    /// SEND of 64 bytes over pair k into the receive SGE list given; the bytes land at `land`.
    void ctl_send(std::vector<ibv_sge> recv_sges, uint64_t land, unsigned k = 0) {
        recv1(std::move(recv_sges), k);
        const auto data = pattern(64, seed_ * 37 + ++controls);
        put(0, src, data);
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(IBV_WR_SEND, 0, 64, 0, &sge);
        if (int rc = post(0, k, wr)) abort_case("control SEND: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[R1], IBV_WC_RECV, "control receive");
        --p(k).recvs[1];
        expect_ok(p(k).cq[S0], IBV_WC_SEND, "control SEND");
        expect_mem(1, land, data, "control SEND data");
    }
    /// SEND with Invalidate of `key` over pair k succeeds: the receive reports WITH_INV and the key.
    void ctl_send_inv(uint32_t key, unsigned k = 0) {
        recv1_spare(k);
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(IBV_WR_SEND_WITH_INV, 0, 64, key, &sge);
        if (int rc = post(0, k, wr)) abort_case("control SEND_WITH_INV: post failed: " + errno_name(rc));
        const ibv_wc r = expect_ok(p(k).cq[R1], IBV_WC_RECV, "control SEND_WITH_INV receive");
        --p(k).recvs[1];
        if (!(r.wc_flags & IBV_WC_WITH_INV) || r.imm_data != key)
            abort_case("control SEND_WITH_INV: receive without WITH_INV / the key");
        expect_ok(p(k).cq[S0], IBV_WC_SEND, "control SEND_WITH_INV");
    }
    /// Type 1 bind by ibv_bind_mw on pair k's node1 QP; returns the window's new R_Key.
    uint32_t bind1(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access, unsigned k = 0) {
        ibv_mw_bind b{};
        b.send_flags = IBV_SEND_SIGNALED;
        b.bind_info = {mr, addr, len, access};
        if (int rc = ibv_bind_mw(p(k).qp[1], mw, &b))
            abort_case("control bind: ibv_bind_mw failed: " + errno_name(rc));
        expect_ok(p(k).cq[S1], IBV_WC_BIND_MW, "control bind");
        return mw->rkey;
    }
    ibv_send_wr bind2_wr(ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len,
                         unsigned access) {
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_BIND_MW;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.bind_mw.mw = mw;
        wr.bind_mw.rkey = key_byte;
        wr.bind_mw.bind_info = {mr, addr, len, access};
        return wr;
    }
    /// Type 2 bind WR on pair k's node1 QP with the consumer's key byte; returns the R_Key.
    uint32_t bind2(ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access,
                   unsigned k = 0) {
        ibv_send_wr wr = bind2_wr(mw, key_byte, mr, addr, len, access);
        if (int rc = post(1, k, wr)) abort_case("control bind WR: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[S1], IBV_WC_BIND_MW, "control bind WR");
        if (mw->rkey != hw::make_key(hw::key_index(mw->rkey), key_byte))
            abort_case("control bind WR: the R_Key does not carry the consumer's key byte");
        return mw->rkey;
    }
    ibv_send_wr local_inv_wr(uint32_t key) {
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_LOCAL_INV;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.invalidate_rkey = key;
        return wr;
    }
    void local_inv(uint32_t key, unsigned k = 0) {
        ibv_send_wr wr = local_inv_wr(key);
        if (int rc = post(1, k, wr)) abort_case("control LOCAL_INV: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[S1], IBV_WC_LOCAL_INV, "control LOCAL_INV");
    }
    ibv_send_wr fast_reg_wr(ibv_mr* mr, uint8_t key_byte, uint64_t iova, uint64_t len, int access,
                            const std::vector<uint64_t>& pages, uint32_t page_offset = 0) {
        ibv_send_wr wr{};
        wr.opcode = IBV_WR_FAST_REG_MR;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.fast_reg.mr = mr;
        wr.fast_reg.key_byte = key_byte;
        wr.fast_reg.iova = iova;
        wr.fast_reg.length = len;
        wr.fast_reg.access = access;
        wr.fast_reg.page_list = pages.data();
        wr.fast_reg.page_count = uint32_t(pages.size());
        wr.fast_reg.page_offset = page_offset;
        wr.fast_reg.log_page_size = 12;
        return wr;
    }
    /// Fast Register WR on pair k's node1 QP; returns the new R_Key.
    uint32_t fast_reg(ibv_mr* mr, uint8_t key_byte, uint64_t iova, uint64_t len, int access,
                      const std::vector<uint64_t>& pages, unsigned k = 0) {
        ibv_send_wr wr = fast_reg_wr(mr, key_byte, iova, len, access, pages);
        if (int rc = post(1, k, wr)) abort_case("control FAST_REG: post failed: " + errno_name(rc));
        expect_ok(p(k).cq[S1], IBV_WC_FAST_REG_MR, "control FAST_REG");
        if (hw::key_byte(mr->rkey) != key_byte)
            abort_case("control FAST_REG: the R_Key does not carry the consumer's key byte");
        return mr->rkey;
    }

    // ---- the attack (exactly one per case; the snapshot is taken right before it)
    void watch(unsigned node, uint64_t va, uint64_t len) { areas_.push_back({node, va, len, {}}); }
    bool watch_layout = true;  ///< snapshot node1's layout and node0's dst (default)
    void snapshot() {
        if (snapped_) return;
        snapped_ = true;
        if (watch_layout) {
            watch(1, base, kLayout);
            watch(0, dst, kBuf);
        }
        for (area& a : areas_) a.before = get(a.node, a.va, a.len);
    }
    /// Bytes of the snapshot that differ now; `where` names the first.
    uint64_t changed(std::string* where) {
        uint64_t n = 0;
        for (const area& a : areas_) {
            const auto now = get(a.node, a.va, a.len);
            for (uint64_t i = 0; i < a.len; ++i)
                if (now[i] != a.before[i]) {
                    if (!n && where)
                        *where = "node" + std::to_string(a.node) + " byte at offset " + std::to_string(i) +
                                 " of a watched range changed";
                    ++n;
                }
        }
        return n;
    }

    /// Remote request from node0 over pair k.
    void remote(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, unsigned k = 0) {
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(op, va, len, rkey, &sge);
        attack_post(0, k, wr);
    }
    /// Any send WR on node `node` of pair k.
    void attack_post(unsigned node, unsigned k, ibv_send_wr& wr) {
        p(k);
        snapshot();
        fresh_source();
        mark(k, wc_op_of(wr.opcode));
        attack_rc = post(node, k, wr);
    }
    /// Type 1 bind by the verb on pair k's node1 QP.
    void attack_bind1(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access, unsigned k = 0) {
        p(k);
        snapshot();
        mark(k, IBV_WC_BIND_MW);
        ibv_mw_bind b{};
        b.send_flags = IBV_SEND_SIGNALED;
        b.bind_info = {mr, addr, len, access};
        attack_rc = ibv_bind_mw(p(k).qp[1], mw, &b);
    }
    /// A verb (not a WR) whose return code is the attack's outcome.
    void attack_verb(const std::function<int()>& verb, unsigned k = 0) {
        p(k);
        snapshot();
        mark(k, OP_ANY);
        attack_rc = verb();
    }

    bool attacked = false;
    int attack_rc = 0;
    int attack_op = OP_ANY;  ///< ibv_wc_opcode of the attack's WR
    unsigned attack_pair = 0;
    unsigned controls = 0;            ///< successful control operations (data moved as it should)
    std::function<void(env&)> after;  ///< runs once the attack was judged (controls / probes after it)
    uint64_t probe_changed = 0;       ///< snapshot bytes changed by probes run in `after`

    /// In `after`: a further hostile remote request over pair k must fail like remote_fault(),
    /// changing nothing (e.g. to show a refused bind granted nothing).
    void probe_fault(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, unsigned k) {
        qp_pair& q = p(k);
        for (area& a : areas_) a.before = get(a.node, a.va, a.len);
        fresh_source();
        ibv_sge sge;
        ibv_send_wr wr = remote_wr(op, va, len, rkey, &sge);
        if (int rc = post(0, k, wr)) abort_case("probe: post failed: " + errno_name(rc));
        auto v = wait(q.cq[S0], 1, kWaitNs);
        if (v.empty() || v[0].status != IBV_WC_REM_ACCESS_ERR)
            abort_case("probe " + opcode_name(wc_op_of(op)) + ": " +
                       (v.empty() ? std::string("no completion") : status_name(v[0].status)) +
                       ", expected REM_ACCESS_ERR");
        sleep(kQuietNs);
        collect_events();
        if (!take_event(1, q.qp[1], IBV_EVENT_QP_ACCESS_ERR))
            abort_case("probe: no QP_ACCESS_ERR event on node1");
        q.expect[0] = q.expect[1] = ERR;
        std::string where;
        const uint64_t n = changed(&where);
        probe_changed += n;
        if (n) abort_case("probe: " + where);
    }

    /// Judges the attack against `x`: "" if it was rejected exactly so, else the first difference.
    std::string judge(const outcome& x) {
        if (!attacked) return "the case made no attack";
        qp_pair& q = p(attack_pair);
        if (attack_rc != x.post)
            return "returned " + errno_name(attack_rc) + ", expected " + errno_name(x.post);
        std::string why;
        for (unsigned c = 0; c < 4; ++c) {
            std::vector<wc_exp> want = x.cq[c];
            const unsigned node = c >= S1;
            if ((c == R0 || c == R1) && x.state[node] == ERR) {
                const size_t consumed = want.size();
                for (size_t f = consumed; f < q.recvs[node]; ++f)
                    want.push_back({IBV_WC_WR_FLUSH_ERR, OP_ANY});
            }
            const auto got = wait(q.cq[c], want.size(), kWaitNs);
            for (size_t i = 0; i < want.size() && why.empty(); ++i) {
                const std::string at = std::string(cq_names[c]) + " completion " + std::to_string(i + 1);
                if (i >= got.size()) {
                    why = at + ": none arrived, expected " + status_name(want[i].status);
                    break;
                }
                const ibv_wc& w = got[i];
                const int op = want[i].opcode == OP_OF_ATTACK ? attack_op : want[i].opcode;
                if (int(w.status) != want[i].status)
                    why = at + ": " + status_name(w.status) + " (vendor_err " + std::to_string(w.vendor_err) +
                          "), expected " + status_name(want[i].status);
                else if (op >= 0 && int(w.opcode) != op)
                    why = at + ": opcode " + opcode_name(w.opcode) + ", expected " + opcode_name(op);
                else if (want[i].vendor >= 0 && int(w.vendor_err) != want[i].vendor)
                    why = at + ": vendor_err " + vendor_name(int(w.vendor_err)) + ", expected " +
                          vendor_name(want[i].vendor);
            }
            if (!why.empty()) return why;
            if (c == R1 || c == R0) q.recvs[node] = 0;
        }
        sleep(kQuietNs);
        why = stray_completion();
        if (!why.empty()) return why;
        collect_events();
        for (unsigned i = 0; i < 2; ++i)
            if (x.event[i] >= 0 && !take_event(i, q.qp[i], x.event[i]))
                return "no " + event_name(x.event[i]) + " event on node" + std::to_string(i) + "'s QP" +
                       (event_on(i, q.qp[i]).empty() ? "" : " (got " + event_on(i, q.qp[i]) + ")");
        why = stray_event();
        if (!why.empty()) return why;
        for (unsigned i = 0; i < 2; ++i) {
            const ibv_qp_state s = state(q.qp[i]);
            if (s != x.state[i])
                return "node" + std::to_string(i) + "'s QP is " + state_name(s) + ", expected " +
                       state_name(x.state[i]);
            q.expect[i] = x.state[i];
        }
        return "";
    }

    /// After `after`: every pair in its expected state, no completion or event left over.
    std::string final_check() {
        sleep(kQuietNs);
        std::string why = stray_completion();
        if (!why.empty()) return why;
        collect_events();
        why = stray_event();
        if (!why.empty()) return why;
        for (size_t k = 0; k < pairs_.size(); ++k)
            for (unsigned i = 0; i < 2; ++i) {
                const ibv_qp_state s = state(pairs_[k]->qp[i]);
                if (s != pairs_[k]->expect[i])
                    return "pair " + std::to_string(k) + " node" + std::to_string(i) + "'s QP is " +
                           state_name(s) + ", expected " + state_name(pairs_[k]->expect[i]);
            }
        return "";
    }

    /// Frees everything the case made (windows, QPs, CQs, regions, mappings); "" or what failed.
    std::string cleanup() {
        std::string why;
        auto note = [&](const std::string& w) {
            if (why.empty()) why = "cleanup: " + w;
        };
        for (ibv_mw* mw : mws_)
            if (int rc = ibv_dealloc_mw(mw)) note("ibv_dealloc_mw: " + errno_name(rc));
        mws_.clear();
        for (auto& q : pairs_) {
            for (unsigned i = 0; i < 2; ++i)
                if (q->qp[i])
                    if (int rc = ibv_destroy_qp(q->qp[i])) note("ibv_destroy_qp: " + errno_name(rc));
            for (ibv_cq* cq : q->cq)
                if (cq)
                    if (int rc = ibv_destroy_cq(cq)) note("ibv_destroy_cq: " + errno_name(rc));
        }
        pairs_.clear();
        for (auto& v : mrs_) {
            for (auto it = v.rbegin(); it != v.rend(); ++it)
                if (int rc = ibv_dereg_mr(*it)) note("ibv_dereg_mr: " + errno_name(rc));
            v.clear();
        }
        for (auto& m : mapped_)
            if (int rc = ibv_unmap_pages(b_.ctx[1], m.first, m.second))
                note("ibv_unmap_pages: " + errno_name(rc));
        mapped_.clear();
        collect_events();  // what the teardown raised does not belong to the next case
        events_[0].clear();
        events_[1].clear();
        return why;
    }

private:
    /// New bytes in node0's source buffer, so that data an attack wrongly moves differs from
    /// what the target (or an earlier control) already holds.
    void fresh_source() { put(0, src, pattern(kBuf, seed_ * 53 + 7 + controls)); }
    void mark(unsigned k, int op) {
        if (attacked) abort_case("the case made more than one attack");
        attacked = true;
        attack_pair = k;
        attack_op = op;
    }
    int connect(qp_pair& q, unsigned i) {
        const unsigned peer = 1 - i;
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = 1;
        a.qp_access_flags = i ? q.o.access1 : ALL;
        int rc =
            ibv_modify_qp(q.qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
        if (rc) return rc;
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTR;
        a.path_mtu = IBV_MTU_4096;
        a.dest_qp_num = q.qp[peer]->qp_num;
        a.rq_psn = peer ? 0x200 : 0x100;
        a.max_dest_rd_atomic = 4;
        a.min_rnr_timer = 12;
        a.ah_attr.dlid = b_.lid[peer];
        a.ah_attr.port_num = 1;
        rc = ibv_modify_qp(q.qp[i], &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        if (rc) return rc;
        a = ibv_qp_attr{};
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = i ? 0x200 : 0x100;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 4;
        return ibv_modify_qp(q.qp[i], &a,
                             IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
    }

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

// ---------------------------------------------------------------- the table

struct row {
    case_info info;
    outcome expect;
    std::function<void(env&)> run;
};

std::vector<row> make_rows();

const std::vector<row>& rows() {
    static const std::vector<row> r = make_rows();
    return r;
}

std::vector<row> make_rows() {
    std::vector<row> t;
    auto add = [&t](const char* name, const char* spec, const char* attack, outcome x,
                    std::function<void(env&)> run, const char* needs = "") {
        row r;
        r.info = {name, spec, attack, describe(x), needs};
        r.expect = std::move(x);
        r.run = std::move(run);
        t.push_back(std::move(r));
    };
    const uint64_t R = kRegion;
    constexpr ibv_wr_opcode WRITE = IBV_WR_RDMA_WRITE, READ = IBV_WR_RDMA_READ,
                            FAA = IBV_WR_ATOMIC_FETCH_AND_ADD, CAS = IBV_WR_ATOMIC_CMP_AND_SWP,
                            SEND = IBV_WR_SEND, SEND_INV = IBV_WR_SEND_WITH_INV;
    /// An R_Key with the same index and another key byte.
    auto other_byte = [](uint32_t key) { return key ^ 0x5Au; };

    // ------------------------------------------------ regions: keys
    add("C10_44_2_1_write_rkey_of_no_region", "C10-44.2.1, o10-36.2.1",
        "RDMA WRITE with an R_Key whose index names no region (control: the region's R_Key; a zero-length "
        "WRITE with the bogus key, which is never checked)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.ctl_write(kNoKey, e.tgt, 0, e.tgt);
            e.remote(WRITE, e.tgt, 64, kNoKey);
        });
    add("o10_37_2_3_write_wrong_key_byte", "o10-37.2.3",
        "RDMA WRITE with the region's index but another key byte", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, other_byte(mr->rkey));
        });
    add("o10_37_2_3_fetch_add_wrong_key_byte", "o10-37.2.3",
        "Fetch&Add with the region's index but another key byte", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_atomic(mr->rkey, e.tgt + 64, e.tgt + 64);
            e.remote(FAA, e.tgt + 64, 8, other_byte(mr->rkey));
        });
    add("o10_37_2_8_reserved_lkey_as_rkey", "o10-37.2.8, o10-37.2.11",
        "RDMA WRITE naming the reserved L_Key (0) as R_Key and the target's physical address, to a QP "
        "created with the reserved L_Key enabled",
        remote_fault(), [=](env& e) {
            pair_opts o;
            o.create1 = IBV_QP_CREATE_RESERVED_LKEY;
            e.open(o);
            e.remote(WRITE, e.pa(1, e.tgt), 64, hw::RESERVED_LKEY);
        });
    add("C10_60_write_stale_rkey_after_dereg", "C10-60",
        "RDMA WRITE with the R_Key of a region deregistered after a successful WRITE", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t k = mr->rkey;
            e.ctl_write(k, e.tgt, 64, e.tgt);
            e.must_dereg(mr);
            e.remote(WRITE, e.tgt, 64, k);
        });
    add("o10_37_2_4_write_stale_rkey_after_rereg", "o10-37.2.4, C10-60",
        "RDMA WRITE with the R_Key a region had before Reregister MR gave it new keys (control: the new key)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t old = mr->rkey;
            e.ctl_write(old, e.tgt, 64, e.tgt);
            if (int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, ALL))
                abort_case("ibv_rereg_mr failed: " + errno_name(rc));
            if (mr->rkey == old) abort_case("reregister kept the R_Key");
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, old);
        });

    // ------------------------------------------------ regions: bounds
    add("C10_56_write_one_byte_before_mr", "C10-56",
        "RDMA WRITE of 64 bytes starting one byte before the region", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt - 1, 64, mr->rkey);
        });
    add("C10_56_write_one_byte_past_mr_end", "C10-56",
        "RDMA WRITE of 64 bytes ending one byte past the region", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt + R - 64, 64, e.tgt + R - 64);
            e.remote(WRITE, e.tgt + R - 63, 64, mr->rkey);
        });
    add("C10_56_read_one_byte_past_mr_end", "C10-56", "RDMA READ of 64 bytes ending one byte past the region",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_read(mr->rkey, e.tgt + R - 64, 64, e.tgt + R - 64);
            e.remote(READ, e.tgt + R - 63, 64, mr->rkey);
        });
    add("C10_56_fetch_add_one_byte_past_mr_end", "C10-56",
        "Fetch&Add on the last aligned word of a region of 8191 bytes (its last byte is one past the end)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL, e.tgt, R - 1);
            e.ctl_atomic(mr->rkey, e.tgt + R - 16, e.tgt + R - 16);
            e.remote(FAA, e.tgt + R - 8, 8, mr->rkey);
        });
    add("C10_56_cmp_swap_one_byte_before_mr", "C10-56",
        "Compare&Swap on the aligned word whose first byte is one before a region starting at an odd address",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL, e.tgt + 1, R - 1);
            e.ctl_atomic(mr->rkey, e.tgt + 8, e.tgt + 8);
            e.remote(CAS, e.tgt, 8, mr->rkey);
        });
    add("C10_56_write_va_plus_len_wraps", "C10-56",
        "RDMA WRITE of 64 bytes at 2^64-32 (va + len wraps to 32, below the region end)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, kTop - 31, 64, mr->rkey);
        });
    add("C10_56_write_crossing_mr_end_stops_at_the_faulting_packet", "C10-56",
        "RDMA WRITE of 8192 bytes (two 4 KiB packets) from the region's middle: the second packet lies past "
        "the end; the guard band after the region and the bytes before the WRITE are watched",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.watch_layout = false;
            e.watch(1, e.base, kGuard + 4096);
            e.watch(1, e.tgt + R, kGuard);
            e.remote(WRITE, e.tgt + 4096, 8192, mr->rkey);
            // Protection is per packet: the first packet was in bounds and was placed.
            e.after = [=](env& e) {
                e.expect_mem(1, e.tgt + 4096, e.get(0, e.src, 4096), "the in-bounds packet");
            };
        });

    // ------------------------------------------------ regions: rights, PDs
    add("C10_57_write_without_remote_write_right", "C10-57",
        "RDMA WRITE into a region registered with local write and remote read only (control: READ)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(LW | RR);
            e.ctl_read(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, mr->rkey);
        });
    add("C10_57_read_without_remote_read_right", "C10-57",
        "RDMA READ of a region registered with local and remote write only (control: WRITE)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(LW | RW);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(READ, e.tgt, 64, mr->rkey);
        });
    add("C10_57_atomic_without_remote_atomic_right", "C10-57, o10-37",
        "Fetch&Add on a region registered without remote atomic (control: WRITE)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(LW | RW | RR);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(FAA, e.tgt, 8, mr->rkey);
        });
    add("C10_88_write_to_qp_without_remote_write", "C10-88",
        "RDMA WRITE to a QP whose access flags lack remote write, through a region that allows it (control: "
        "READ)",
        remote_fault(), [=](env& e) {
            pair_opts o;
            o.access1 = LW | RR | RA;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_read(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, mr->rkey);
        });
    add("C10_56_write_mr_of_another_pd", "C10-56",
        "RDMA WRITE through a region of another PD than the responding QP's (control: a QP of that PD)",
        remote_fault(), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL, 0, R, e.pd(1, true));
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt, 1);
            e.remote(WRITE, e.tgt, 64, mr->rkey, 0);
        });
    add("o10_43_misaligned_fetch_add_refused_at_post", "o10-43",
        "Fetch&Add at an address 4 bytes off an 8-byte boundary (control: the aligned word)", refused(EINVAL),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_atomic(mr->rkey, e.tgt + 8, e.tgt + 8);
            e.remote(FAA, e.tgt + 4, 8, mr->rkey);
        });
    add("C10_87_write_with_imm_wrong_key_byte", "C10-86, C10-87, o10-37.2.3",
        "RDMA WRITE with immediate and a wrong key byte; it takes the posted receive (control: with the "
        "right "
        "key it lands and completes the receive)",
        write_imm_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.recv1_spare();
            ibv_sge sge;
            ibv_send_wr ok = e.remote_wr(IBV_WR_RDMA_WRITE_WITH_IMM, e.tgt, 64, mr->rkey, &sge);
            if (e.post(0, 0, ok)) abort_case("control WRITE_WITH_IMM: post failed");
            e.expect_ok(e.p().cq[R1], IBV_WC_RECV_RDMA_WITH_IMM, "control WRITE_WITH_IMM receive");
            --e.p().recvs[1];
            e.expect_ok(e.p().cq[S0], IBV_WC_RDMA_WRITE, "control WRITE_WITH_IMM");
            e.expect_mem(1, e.tgt, e.get(0, e.src, 64), "control WRITE_WITH_IMM data");
            e.recv1_spare();
            e.watch(1, e.rbuf, 4096);
            e.remote(IBV_WR_RDMA_WRITE_WITH_IMM, e.tgt, 64, other_byte(mr->rkey));
        });

    // ------------------------------------------------ zero-based, physical and shared regions
    add("o10_36_2_2_zbva_write_one_byte_past_end", "o10-36.2.2, C10-56",
        "RDMA WRITE ending one byte past a zero-based region (addressed 0 .. 8191)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | ZB);
            e.ctl_write(mr->rkey, R - 64, 64, e.tgt + R - 64);
            e.remote(WRITE, R - 63, 64, mr->rkey);
        });
    add("C10_56_pmr_write_one_byte_past_end", "C10-56, o10-37.2.4",
        "RDMA WRITE ending one byte past a physical region over the target's pages (first byte at offset 50, "
        "8092 bytes)",
        remote_fault(), [=](env& e) {
            const auto pages = e.pages1(e.tgt, R);
            ibv_phys_mr_attr a;
            a.list = pages.data();
            a.count = uint32_t(pages.size());
            a.size = 4096;
            a.iova = 0x40000000;
            a.length = R - 100;
            a.first_offset = 50;
            a.access = ALL;
            a.key_byte = 0x3C;
            ibv_mr* mr = e.phys1(a);
            if (hw::key_byte(mr->rkey) != 0x3C)
                abort_case("the PMR's R_Key does not carry the consumer's key byte");
            const uint64_t end = a.iova + a.length;
            e.ctl_write(mr->rkey, end - 64, 64, e.tgt + 50 + a.length - 64);
            e.remote(WRITE, end - 63, 64, mr->rkey);
        });
    add("C10_57_shared_mr_without_remote_write", "C10-57, o10-36.2.4",
        "RDMA WRITE through a shared region registered read-only over a writable region's pages (control: "
        "READ "
        "through the shared region)",
        remote_fault(), [=](env& e) {
            ibv_mr* from = e.mr1(ALL);
            ibv_mr* sh = e.shared1(from, e.pd(1), LW | RR, 0x80000000);
            e.ctl_read(sh->rkey, 0x80000000, 64, e.tgt);
            e.remote(WRITE, 0x80000000, 64, sh->rkey);
        });
    // ------------------------------------------------ type 1 windows
    // The region: the target with every right and MW_BIND; the window: [tgt + 1024, + 2048).
    auto win1 = [=](env& e, unsigned access, uint64_t len = WL, unsigned k = 0) {
        ibv_mr* mr = e.mr1(ALL | MWB);
        ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
        e.bind1(mw, mr, e.tgt + WO, len, access, k);
        return std::make_pair(mr, mw);
    };
    add("C10_61_window_write_one_byte_past_end", "C10-61, C10-77",
        "RDMA WRITE ending one byte past a type 1 window (inside its region)", remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint64_t w = e.tgt + WO;
            e.ctl_write(mw->rkey, w + WL - 64, 64, w + WL - 64);
            e.remote(WRITE, w + WL - 63, 64, mw->rkey);
        });
    add("C10_61_window_write_one_byte_before_start", "C10-61, C10-77",
        "RDMA WRITE starting one byte before a type 1 window (inside its region)", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint64_t w = e.tgt + WO;
            e.ctl_write(mw->rkey, w, 64, w);
            e.remote(WRITE, w - 1, 64, mw->rkey);
        });
    add("C10_61_window_read_one_byte_past_end", "C10-61, C10-77",
        "RDMA READ ending one byte past a type 1 window", remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint64_t w = e.tgt + WO;
            e.ctl_read(mw->rkey, w + WL - 64, 64, w + WL - 64);
            e.remote(READ, w + WL - 63, 64, mw->rkey);
        });
    add("C10_61_window_fetch_add_one_byte_past_end", "C10-61, C10-77",
        "Fetch&Add on the last aligned word of a 2047-byte type 1 window (its last byte is one past the end)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR | RA, WL - 1);
            const uint64_t w = e.tgt + WO;
            e.ctl_atomic(mw->rkey, w + WL - 16, w + WL - 16);
            e.remote(FAA, w + WL - 8, 8, mw->rkey);
        });
    add("C10_77_window_write_without_write_right", "C10-77",
        "RDMA WRITE through a type 1 window bound with remote read only (the region allows writes; control: "
        "READ)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RR);
            e.ctl_read(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey);
        });
    add("C10_77_window_read_without_read_right", "C10-77",
        "RDMA READ through a type 1 window bound with remote write only (control: WRITE)", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            e.remote(READ, e.tgt + WO, 64, mw->rkey);
        });
    add("C10_77_window_atomic_without_atomic_right", "C10-77, o10-37",
        "Fetch&Add through a type 1 window bound without remote atomic over a region that has it (control: "
        "WRITE)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            e.remote(FAA, e.tgt + WO, 8, mw->rkey);
        });
    add("C10_66_2_2_type1_old_key_after_rebind", "C10-66.2.2, C10-68",
        "RDMA WRITE with the R_Key a type 1 window had before it was bound again (control: the new key)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k1 = mw->rkey;
            e.ctl_write(k1, e.tgt + WO, 64, e.tgt + WO);
            const uint32_t k2 = e.bind1(mw, mr, e.tgt + WO, WL, RW | RR);
            if (k2 == k1) abort_case("the rebind kept the R_Key");
            e.ctl_write(k2, e.tgt + WO, 64, e.tgt + WO);
            e.remote(WRITE, e.tgt + WO, 64, k1);
        });
    add("C10_66_2_4_zero_length_bind_revokes_access", "C10-66.2.4",
        "RDMA WRITE with a type 1 window's current R_Key after a zero-length bind", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            const uint32_t k2 = e.bind1(mw, nullptr, 0, 0, 0);
            e.remote(WRITE, e.tgt + WO, 64, k2);
        });
    add("C10_76_2_1_type1_window_of_another_pd", "C10-76.2.1",
        "RDMA WRITE through a type 1 window of another PD than the responding QP's (control: a QP of that "
        "PD)",
        remote_fault(), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL | MWB, 0, R, e.pd(1, true));
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1, e.pd(1, true));
            e.bind1(mw, mr, e.tgt + WO, WL, RW | RR, 1);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO, 1);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey, 0);
        });
    add("C10_70_deallocated_window", "C10-69, C10-70",
        "RDMA WRITE with the R_Key of a bound type 1 window after Deallocate MW", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.must_dealloc(mw);
            e.remote(WRITE, e.tgt + WO, 64, k);
        });
    add("C10_70_window_key_on_reused_index", "C10-70, o10-37.2.3",
        "RDMA WRITE with a deallocated window's R_Key once its MPT index names a new region over other "
        "memory "
        "(control: the new region's key)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            // The window's first bound key: the bind verb takes it from the driver's per-index key
            // generation, so the next allocation of the index gets another one.
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.must_dealloc(mw);
            const uint64_t other = e.alloc(1, 4096);
            e.put(1, other, pattern(4096, 77));
            ibv_mr* fresh = e.reg(1, other, 4096, ALL);
            if (hw::key_index(fresh->rkey) != hw::key_index(k))
                abort_case("the new region did not reuse the window's MPT index");
            if (fresh->rkey == k) abort_case("the new region got the dead window's R_Key (key byte reused)");
            e.ctl_write(fresh->rkey, other, 64, other);
            e.watch(1, other, 4096);
            e.remote(WRITE, other, 64, k);
        });
    add("C10_54_2_1_window_rkey_as_read_destination_lkey", "C10-54.2.1",
        "node1 RDMA READs from node0 into the window's range naming the window's R_Key as L_Key",
        local_prot(1, xs::bad_key), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            ibv_sge sge{e.tgt + WO, 64, mw->rkey};
            ibv_send_wr wr{};
            wr.opcode = READ;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = e.src;
            wr.wr.rdma.rkey = e.smr->rkey;
            e.attack_post(1, 0, wr);
        });
    add("C10_71_dereg_mr_with_window_bound", "C10-71",
        "Deregister MR of a region with a type 1 window bound (afterwards the window still works)",
        refused(EBUSY), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            ibv_mr* m = mr;
            e.attack_verb([&e, m] { return e.dereg(m); });
            const uint32_t k = mw->rkey;
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO); };
        });

    // ------------------------------------------------ bind errors (type 1, by the verb)
    add("C10_72_type1_bind_window_of_another_pd", "C10-72",
        "Bind MW on a QP of PD 1 for a window (and region) of PD 2 (control: the bind on a QP of PD 2)",
        mm_error(xs::bad_pd), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL | MWB, 0, R, e.pd(1, true));
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1, e.pd(1, true));
            e.bind1(mw, mr, e.tgt, 64, RW, 1);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR, 0);
        });
    add("C10_73_bind_region_without_mw_bind_right", "C10-73",
        "Bind a type 1 window to a region registered without MW_BIND (control: a region with it)",
        mm_error(xs::no_access), [=](env& e) {
            ibv_mr* ok = e.mr1(ALL | MWB);
            ibv_mr* mr = e.mr1(ALL);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.bind1(mw, ok, e.tgt, 64, RW);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR);
        });
    add("C10_74_bind_remote_write_on_region_without_local_write", "C10-62, C10-74",
        "Bind a type 1 window with remote write to a region without local write (control: remote read)",
        mm_error(xs::no_access), [=](env& e) {
            ibv_mr* mr = e.mr1(RR | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.bind1(mw, mr, e.tgt, 64, RR);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR);
        });
    add("C10_75_bind_past_region_end", "C10-75",
        "Bind a type 1 window whose range ends one byte past the region (control: ending at the last byte)",
        mm_error(xs::out_of_bounds), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.bind1(mw, mr, e.tgt + R - 64, 64, RW);
            e.attack_bind1(mw, mr, e.tgt + R - 63, 64, RW);
        });
    add("C10_75_bind_window_to_region_of_another_pd", "C10-75, C10-79.2.2",
        "Bind a PD 1 type 1 window to a PD 2 region, then WRITE there with the key the verb returned (the "
        "attempt to reach another PD's memory through a window of this PD)",
        mm_error(xs::bad_pd), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB, 0, R, e.pd(1, true));
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR);
            const uint32_t k = mw->rkey;
            e.after = [=](env& e) {
                e.open();
                e.probe_fault(WRITE, e.tgt, 64, k, 1);
            };
        });
    add("o10_36_2_2_bind_onto_zbva_region", "o10-36.2.2", "Bind a type 1 window to a zero-based region",
        mm_error(xs::bad_zbva), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB | ZB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.attack_bind1(mw, mr, 0, 64, RW);
        });
    add("C10_60_bind_with_deregistered_region_lkey", "C10-60",
        "Bind a type 1 window naming a region that was deregistered", mm_error(xs::bad_key), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            auto copy = std::make_shared<ibv_mr>(*mr);
            e.must_dereg(mr);
            e.attack_bind1(mw, copy.get(), e.tgt, 64, RW);
            e.after = [copy](env&) {};  // keeps the copy alive until the case ends
        });
    add("o10_37_2_34_type1_window_in_bind_wr", "o10-37.2.34", "Post Send Bind MW WR for a type 1 window",
        refused(EINVAL), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            ibv_send_wr wr = e.bind2_wr(mw, 0x21, mr, e.tgt, 64, RW);
            e.attack_post(1, 0, wr);
        });
    add("o10_37_2_35_type2_window_by_bind_verb", "o10-37.2.35", "Bind MW verb on a type 2 window",
        refused(EINVAL), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
            e.attack_bind1(mw, mr, e.tgt, 64, RW);
        });
    add("o10_37_2_40_zero_length_type2_bind", "o10-37.2.40",
        "Post Send Bind MW WR of length 0 on a bound type 2 window (an attempt to invalidate it by a bind)",
        refused(EINVAL), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
            e.bind2(mw, 0x31, mr, e.tgt + WO, WL, RW | RR);
            ibv_send_wr wr = e.bind2_wr(mw, 0x32, mr, e.tgt, 0, 0);
            e.attack_post(1, 0, wr);
        });

    // ------------------------------------------------ type 2 windows (bound by WR on pair 0's node1 QP)
    auto win2 = [=](env& e, unsigned access, unsigned k = 0, ibv_mr* mr = nullptr) {
        if (!mr) mr = e.mr1(ALL | MWB);
        ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
        e.bind2(mw, 0x41, mr, e.tgt + WO, WL, access, k);
        return std::make_pair(mr, mw);
    };
    add("o10_37_2_42_43_type2_window_from_another_qp", "o10-37.2.42, o10-37.2.43",
        "RDMA WRITE through a type 2 window arriving on another QP (same PD) than the one that bound it "
        "(control: the binding QP)",
        remote_fault(), [=](env& e) {
            e.open();
            e.open();
            auto [mr, mw] = win2(e, RW | RR, 0);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO, 0);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey, 1);
        });
    add(
        "o10_37_2_43_type2b_window_from_qp_of_another_pd", "o10-37.2.43",
        "RDMA WRITE through a type 2B window arriving on a QP of another PD (control: the binding QP)",
        remote_fault(),
        [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            auto [mr, mw] = win2(e, RW | RR, 0);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO, 0);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey, 1);
        },
        "2B");
    add("o10_37_2_30_type2_stale_key_after_local_invalidate", "o10-37.2.29, o10-37.2.30, o10-37.2.18",
        "RDMA WRITE through a type 2 window after its binding QP invalidated it", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.local_inv(k);
            e.remote(WRITE, e.tgt + WO, 64, k);
        });
    add("o10_37_2_29_type2_bind_of_a_valid_window", "o10-37.2.29, o10-37.2.30",
        "Post Send Bind MW WR over the whole region for a type 2 window that is already bound (afterwards "
        "the "
        "first binding still works)",
        mm_error(xs::bad_state), [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_send_wr wr = e.bind2_wr(mw, 0x42, mr, e.tgt, R, RW | RR | RA);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) {
                if (e.two_a()) return;  // a QP with 2A windows bound cannot be reset to reconnect it
                e.reconnect(0);
                e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            };
        });
    add("o10_37_2_30_local_invalidate_type2_window_of_another_qp", "o10-37.2.29, o10-37.2.30",
        "Local Invalidate of a type 2 window by a QP that did not bind it (afterwards it still works)",
        mm_error(xs::bad_qpn), [=](env& e) {
            e.open();
            e.open();
            auto [mr, mw] = win2(e, RW | RR, 0);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 0);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 1, wr);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 0); };
        });
    add("o10_36_2_1_free_type2_window_grants_nothing", "o10-36.2.1",
        "RDMA WRITE with the R_Key of a type 2 window that was never bound (Free)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, mw->rkey);
        });
    add("o10_37_2_44_send_inv_type2_window_of_another_qp", "o10-37.2.44, o10-37.2.39",
        "SEND with Invalidate of a type 2 window bound by another QP (afterwards it still works)",
        send_inv_refused(xs::bad_qpn), [=](env& e) {
            e.open();
            e.open();
            auto [mr, mw] = win2(e, RW | RR, 1);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1);
            e.recv1_spare(0);
            e.remote(SEND_INV, 0, 64, k, 0);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1); };
        });
    add(
        "o10_37_2_29_destroy_qp_with_type2a_window_bound", "o10-37.2.29",
        "Destroy QP of the QP a type 2A window is bound to (afterwards the window still works)",
        refused(EBUSY),
        [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_qp* qp = e.p().qp[1];
            e.attack_verb([qp] { return ibv_destroy_qp(qp); });
            if (e.attack_rc == 0) {
                e.p().qp[1] = nullptr;
                abort_case("the QP was destroyed with a type 2A window bound");
            }
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO); };
        },
        "2A");
    add(
        "o10_37_2_29_reset_qp_with_type2a_window_bound", "o10-37.2.29",
        "Modify QP to Reset for the QP a type 2A window is bound to (afterwards the window still works)",
        refused(EBUSY),
        [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_qp* qp = e.p().qp[1];
            e.attack_verb([qp] {
                ibv_qp_attr a{};
                a.qp_state = IBV_QPS_RESET;
                return ibv_modify_qp(qp, &a, IBV_QP_STATE);
            });
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO); };
        },
        "2A");

    // ------------------------------------------------ fast register (node1's QP of pair 0 created with it)
    const uint64_t IOVA = 0x60000000;
    auto fr_pair = [](env& e) {
        pair_opts o;
        o.create1 = IBV_QP_CREATE_FAST_REG;
        e.open(o);
    };
    add("o10_37_2_5_fast_register_on_qp_without_it", "o10-37.2.5, o10-36.2.1",
        "Fast Register WR on a QP created without fast register, then a WRITE with the key it would have "
        "made",
        mm_error(xs::not_enabled), [=](env& e) {
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            ibv_send_wr wr = e.fast_reg_wr(l, 0x51, IOVA, R, ALL, pages);
            e.attack_post(1, 0, wr);
            const uint32_t k = hw::make_key(l->handle, 0x51);
            e.after = [=](env& e) {
                e.open();
                e.probe_fault(WRITE, IOVA, 64, k, 1);
            };
        });
    add("o10_37_2_5_fast_register_of_a_valid_lkey", "o10-37.2.5",
        "Fast Register WR for an L_Key that is already Valid (afterwards the first registration still works)",
        mm_error(xs::bad_state), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x52, IOVA, R, ALL, pages);
            e.ctl_write(k, IOVA, 64, e.tgt);
            ibv_send_wr wr = e.fast_reg_wr(l, 0x53, IOVA + 0x100000, R, ALL, pages);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, IOVA + 128, 64, e.tgt + 128, 1); };
        });
    add("o10_36_2_1_free_lkey_grants_nothing", "o10-36.2.1",
        "RDMA WRITE with the R_Key of an Allocate L_Key region never fast-registered (Free)", remote_fault(),
        [=](env& e) {
            ibv_mr* l = e.lkey1(2);
            e.remote(WRITE, 0, 64, l->rkey);
        });
    add("o10_37_2_5_fast_register_misaligned_page", "o10-37.2.5, C10-53.2.1",
        "Fast Register WR whose first page address is 16 bytes off a page boundary",
        mm_error(xs::bad_page_list), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            auto pages = e.pages1(e.tgt, R);
            pages[0] += 16;
            ibv_send_wr wr = e.fast_reg_wr(l, 0x54, IOVA, R - 16, ALL, pages);
            e.attack_post(1, 0, wr);
            const uint32_t k = hw::make_key(l->handle, 0x54);
            e.after = [=](env& e) {
                e.open();
                e.probe_fault(WRITE, IOVA, 64, k, 1);
            };
        });
    add("o10_37_2_5_fast_register_lkey_of_another_pd", "o10-37.2.5",
        "Fast Register WR on a PD 1 QP for an L_Key of PD 2", mm_error(xs::bad_pd), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2, e.pd(1, true));
            const auto pages = e.pages1(e.tgt, R);
            ibv_send_wr wr = e.fast_reg_wr(l, 0x55, IOVA, R, ALL, pages);
            e.attack_post(1, 0, wr);
        });
    add("o10_37_2_18_fast_reg_mr_stale_after_local_invalidate", "o10-37.2.18, o10-37.2.13",
        "RDMA WRITE with a fast-registered region's R_Key after Local Invalidate", remote_fault(),
        [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x56, IOVA, R, ALL, pages);
            e.ctl_write(k, IOVA, 64, e.tgt);
            e.local_inv(k);
            e.remote(WRITE, IOVA, 64, k);
        });
    add("o10_37_2_18_fast_reg_mr_stale_after_send_with_invalidate", "o10-37.2.18, o10-37.2.21",
        "RDMA READ with a fast-registered region's R_Key after a SEND with Invalidate of it", remote_fault(),
        [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x57, IOVA, R, ALL, pages);
            e.ctl_read(k, IOVA, 64, e.tgt);
            e.ctl_send_inv(k);
            e.remote(READ, IOVA, 64, k);
        });
    add("o10_37_2_5_fast_register_of_register_mr_key", "o10-37.2.5, o10-36.2.3",
        "Fast Register WR naming a region made by Register MR", refused(EINVAL), [=](env& e) {
            fr_pair(e);
            ibv_mr* mr = e.mr1(ALL);
            const auto pages = e.pages1(e.tgt, R);
            ibv_send_wr wr = e.fast_reg_wr(mr, 0x5A, IOVA, R, ALL, pages);
            e.attack_post(1, 0, wr);
        });

    // ------------------------------------------------ invalidate: refused
    add("o10_37_2_13_local_invalidate_register_mr_region", "o10-37.2.13",
        "Local Invalidate of a region made by Register MR (afterwards it still works)",
        mm_error(xs::bad_type), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t k = mr->rkey;
            e.ctl_write(k, e.tgt, 64, e.tgt);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt, 64, e.tgt, 1); };
        });
    add("o10_37_2_15_local_invalidate_shared_mr", "o10-37.2.15, o10-36.2.5",
        "Local Invalidate of a shared region (afterwards it still works)", mm_error(xs::shared), [=](env& e) {
            ibv_mr* from = e.mr1(ALL);
            ibv_mr* sh = e.shared1(from, e.pd(1), ALL, 0xA0000000);
            const uint32_t k = sh->rkey;
            e.ctl_write(k, 0xA0000000, 64, e.tgt);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, 0xA0000000, 64, e.tgt, 1); };
        });
    add("o10_37_2_26_local_invalidate_type1_window", "o10-37.2.26",
        "Local Invalidate of a type 1 window (afterwards it still works)", mm_error(xs::bad_type),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1); };
        });
    add("o10_37_2_17_local_invalidate_region_with_window_bound", "o10-37.2.17",
        "Local Invalidate of a fast-registered region with a type 1 window bound (afterwards both still "
        "work)",
        mm_error(xs::busy), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x61, IOVA, R, ALL | MWB, pages);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            const uint32_t wk = e.bind1(mw, l, IOVA + WO, WL, RW | RR);
            e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) {
                e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO, 1);
                e.ctl_write(k, IOVA, 64, e.tgt, 1);
            };
        });
    add("o10_37_2_27_send_inv_type1_window", "o10-37.2.27, o10-37.2.44",
        "SEND with Invalidate of a type 1 window's R_Key (afterwards the window still works)",
        send_inv_refused(xs::bad_type), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1); };
        });
    add("o10_37_2_13_send_inv_register_mr_region", "o10-37.2.13, o10-37.2.24",
        "SEND with Invalidate of a Register MR region's R_Key (afterwards it still works)",
        send_inv_refused(xs::bad_type), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t k = mr->rkey;
            e.ctl_write(k, e.tgt, 64, e.tgt);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt, 64, e.tgt, 1); };
        });
    add("o10_37_2_16_send_inv_shared_mr", "o10-37.2.16",
        "SEND with Invalidate of a shared region's R_Key (afterwards it still works)",
        send_inv_refused(xs::shared), [=](env& e) {
            ibv_mr* from = e.mr1(ALL);
            ibv_mr* sh = e.shared1(from, e.pd(1), ALL, 0xB0000000);
            const uint32_t k = sh->rkey;
            e.ctl_write(k, 0xB0000000, 64, e.tgt);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) { e.ctl_write(k, 0xB0000000, 64, e.tgt, 1); };
        });
    add("o10_37_2_17_send_inv_region_with_window_bound", "o10-37.2.17, o10-37.2.24",
        "SEND with Invalidate of a fast-registered region with a type 1 window bound (afterwards both still "
        "work)",
        send_inv_refused(xs::busy), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x62, IOVA, R, ALL | MWB, pages);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            const uint32_t wk = e.bind1(mw, l, IOVA + WO, WL, RW | RR);
            e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) {
                e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO, 1);
                e.ctl_write(k, IOVA, 64, e.tgt, 1);
            };
        });
    add("o10_37_2_24_send_inv_fast_reg_mr_of_another_pd", "o10-37.2.24",
        "SEND with Invalidate, arriving on a PD 1 QP, of a region fast-registered in PD 2 (afterwards it "
        "still "
        "works)",
        send_inv_refused(xs::bad_pd), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            o.create1 = IBV_QP_CREATE_FAST_REG;
            e.open(o);
            ibv_mr* l = e.lkey1(2, e.pd(1, true));
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x63, IOVA, R, ALL, pages, 1);
            e.ctl_write(k, IOVA, 64, e.tgt, 1);
            e.recv1_spare(0);
            e.remote(SEND_INV, 0, 64, k, 0);
            e.after = [=](env& e) { e.ctl_write(k, IOVA, 64, e.tgt, 1); };
        });

    // ------------------------------------------------ local segments
    add("C10_54_2_1_write_source_bad_lkey", "C10-54.2.1",
        "RDMA WRITE whose source SGE names an L_Key no region has (control: the source region's key)",
        local_prot(0, xs::bad_key), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(WRITE, e.tgt, 64, mr->rkey, &sge);
            sge = ibv_sge{e.src, 64, kNoKey};
            e.attack_post(0, 0, wr);
        });
    add("C10_9_2_1_write_source_mr_of_another_pd", "C10-9.2.1, C10-54.2.1",
        "RDMA WRITE whose source SGE names a region of another PD than node0's QP", local_prot(0, xs::bad_pd),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* foreign = e.reg(0, e.src, 4096, LW, e.pd(0, true));
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(WRITE, e.tgt, 64, mr->rkey, &sge);
            sge = ibv_sge{e.src, 64, foreign->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_54_2_1_write_source_one_byte_past_mr", "C10-54.2.1",
        "RDMA WRITE whose source SGE ends one byte past its 1000-byte region (control: ending at its last "
        "byte)",
        local_prot(0, xs::out_of_bounds), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* small = e.reg(0, e.src, 1000, LW);
            ibv_sge sge;
            ibv_send_wr ok = e.remote_wr(WRITE, e.tgt, 100, mr->rkey, &sge);
            sge = ibv_sge{e.src + 900, 100, small->lkey};
            if (e.post(0, 0, ok)) abort_case("control WRITE: post failed");
            e.expect_ok(e.p().cq[S0], IBV_WC_RDMA_WRITE, "control WRITE");
            e.expect_mem(1, e.tgt, e.get(0, e.src + 900, 100), "control WRITE data");
            ibv_send_wr wr = e.remote_wr(WRITE, e.tgt, 101, mr->rkey, &sge);
            sge = ibv_sge{e.src + 900, 101, small->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_55_read_destination_without_local_write", "C10-55",
        "RDMA READ into a node0 region registered without local write", local_prot(0, xs::no_access),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* ro = e.reg(0, e.dst, 4096, 0);
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(READ, e.tgt, 64, mr->rkey, &sge);
            sge = ibv_sge{e.dst, 64, ro->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_55_atomic_result_without_local_write", "C10-55, o10-47",
        "Fetch&Add whose result SGE is a node0 region without local write (the target word must not change "
        "either)",
        local_prot(0, xs::no_access), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* ro = e.reg(0, e.dst, 4096, 0);
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(FAA, e.tgt, 8, mr->rkey, &sge);
            sge = ibv_sge{e.dst, 8, ro->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_55_receive_buffer_without_local_write", "C10-55",
        "SEND into a receive SGE over the target region registered without local write (control: a receive "
        "region with it)",
        recv_prot(xs::no_access), [=](env& e) {
            ibv_mr* good = e.mr1(ALL);
            ibv_mr* ro = e.mr1(RR);
            e.ctl_send({{e.tgt, 64, good->lkey}}, e.tgt);
            e.recv1({{e.tgt + 64, 64, ro->lkey}});
            e.remote(SEND, 0, 64, 0);
        });
    add("C10_54_2_1_receive_sge_past_mr_end", "C10-54.2.1",
        "SEND of 64 bytes into a receive SGE that ends 32 bytes past its region",
        recv_prot(xs::out_of_bounds), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_send({{e.tgt + R - 64, 64, mr->lkey}}, e.tgt + R - 64);
            e.recv1({{e.tgt + R - 32, 64, mr->lkey}});
            e.remote(SEND, 0, 64, 0);
        });
    add("o10_37_2_11_reserved_lkey_receive_not_enabled", "o10-37.2.11, o10-36.2.1",
        "SEND into a receive SGE naming the target's physical address with the reserved L_Key, on a QP "
        "created "
        "without it (control: a QP created with it)",
        recv_prot(xs::not_enabled), [=](env& e) {
            e.open();
            pair_opts o;
            o.create1 = IBV_QP_CREATE_RESERVED_LKEY;
            e.open(o);
            e.ctl_send({{e.pa(1, e.tgt), 64, hw::RESERVED_LKEY}}, e.tgt, 1);
            e.recv1({{e.pa(1, e.tgt + 64), 64, hw::RESERVED_LKEY}}, 0);
            e.remote(SEND, 0, 64, 0, 0);
        });
    add("o10_37_2_11_reserved_lkey_read_destination_not_enabled", "o10-37.2.11",
        "node1 RDMA READs from node0 into the target's physical address with the reserved L_Key, on a QP "
        "created without it (control: a QP created with it)",
        local_prot(1, xs::not_enabled), [=](env& e) {
            e.open();
            pair_opts o;
            o.create1 = IBV_QP_CREATE_RESERVED_LKEY;
            e.open(o);
            auto read_wr = [&e](ibv_sge* sge) {
                ibv_send_wr wr{};
                wr.opcode = IBV_WR_RDMA_READ;
                wr.send_flags = IBV_SEND_SIGNALED;
                wr.sg_list = sge;
                wr.num_sge = 1;
                wr.wr.rdma.remote_addr = e.src;
                wr.wr.rdma.rkey = e.smr->rkey;
                return wr;
            };
            ibv_sge ok_sge{e.pa(1, e.tgt), 64, hw::RESERVED_LKEY};
            ibv_send_wr ok = read_wr(&ok_sge);
            if (e.post(1, 1, ok)) abort_case("control READ: post failed");
            e.expect_ok(e.p(1).cq[S1], IBV_WC_RDMA_READ, "control READ");
            e.expect_mem(1, e.tgt, e.get(0, e.src, 64), "control READ data");
            ibv_sge sge{e.pa(1, e.tgt + 64), 64, hw::RESERVED_LKEY};
            ibv_send_wr wr = read_wr(&sge);
            e.attack_post(1, 0, wr);
        });
    return t;
}

// ---------------------------------------------------------------- running

case_result run_case(bench& b, const row& r, uint64_t seed) {
    case_result res;
    res.name = r.info.name;
    res.ran = true;
    env e(b, seed);
    std::string why;
    try {
        r.run(e);
        why = e.judge(r.expect);
        res.rejected = why.empty();
        std::string where;
        res.bytes_changed = e.changed(&where);
        if (res.bytes_changed)
            why += (why.empty() ? "" : "; ") + std::to_string(res.bytes_changed) + " target bytes changed (" +
                   where + ")";
        if (why.empty() && e.after) e.after(e);
        res.bytes_changed += e.probe_changed;
        if (why.empty()) why = e.final_check();
    } catch (const case_abort& a) {
        res.bytes_changed += e.probe_changed;
        why = a.why;
    } catch (const std::exception& x) {
        why = std::string("exception: ") + x.what();
    }
    const std::string c = e.cleanup();
    if (why.empty()) why = c;
    res.passed = why.empty();
    res.why = why;
    return res;
}

class suite_app : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(suite_app);
    suite_app(sc_core::sc_module_name n, machine& m, const suite_options& o, suite_result& out)
        : sc_module(n), b_(m), o_(o), out_(out) {
        SC_THREAD(main);
    }
    bool finished = false;

private:
    void main() {
        out_.error = b_.open();
        if (out_.error.empty()) {
            uint64_t index = 0;
            for (const row& r : rows()) {
                ++index;
                if (!o_.only.empty() && r.info.name.find(o_.only) == std::string::npos) continue;
                const std::string& needs = r.info.needs;
                if (!needs.empty() && (needs == "2A") != b_.two_a) {
                    case_result s;
                    s.name = r.info.name;
                    s.why = "needs type " + needs + " windows (hca.mw_type2=" + needs + ")";
                    out_.results.push_back(s);
                    continue;
                }
                case_result c = run_case(b_, r, o_.seed * 1000003 + index);
                ++out_.ran;
                out_.passed += c.passed;
                out_.rejected += c.rejected;
                out_.bytes_changed += c.bytes_changed;
                out_.results.push_back(std::move(c));
            }
        }
        finished = true;
        sc_core::sc_stop();
    }

    bench b_;
    suite_options o_;
    suite_result& out_;
};

}  // namespace

const std::vector<case_info>& cases() {
    static const std::vector<case_info> c = [] {
        std::vector<case_info> v;
        for (const row& r : rows()) v.push_back(r.info);
        return v;
    }();
    return c;
}

suite_result run_suite(const suite_options& opts, std::vector<param_info>* help_out) {
    auto m = std::make_unique<machine>();
    if (m->size() < 2) throw config_error("attack_suite needs fabric.nodes >= 2");
    suite_result res;
    auto app = std::make_unique<suite_app>("attack_suite", *m, opts, res);
    if (help_out) {
        *help_out = broker::instance().help();
        return res;
    }
    broker::instance().check_unused();
    sc_core::sc_start(sc_core::sc_time(60.0, sc_core::SC_SEC));
    if (!app->finished && res.error.empty())
        res.error = "the suite did not finish (stalled at " + sc_core::sc_time_stamp().to_string() + ")";
    return res;
}

void print(std::ostream& os, const suite_result& r) {
    for (const case_result& c : r.results) {
        if (!c.ran)
            os << "SKIP " << c.name << ": " << c.why << "\n";
        else if (c.passed)
            os << "PASS " << c.name << "\n";
        else
            os << "FAIL " << c.name << ": " << c.why << "\n";
    }
    if (!r.error.empty()) os << "ERROR " << r.error << "\n";
    os << r.ran << " cases, " << r.rejected << " rejected, " << r.bytes_changed << " bytes changed\n";
}

}  // namespace hcasim::attack
