// The attack suite's vocabulary: the target layout and access shorthands, names of verbs values
// for messages, and how an attack must be rejected (outcome). Internal to testbench/attack/.
#pragma once
#include <cerrno>
#include <sstream>
#include <string>
#include <vector>

#include "firmware/verbs.h"
#include "model/hca/translation_unit.h"
#include "testbench/replay/verbs_trace.h"

namespace hcasim::attack {

using namespace hcasim::verbs;
using xs = xlate_status;

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

inline std::string status_name(int s) {
    const std::string n = trace::wc_status_name(s);
    return n != "?" ? n : "status " + std::to_string(s);
}

inline std::string opcode_name(int op) {
    const std::string n = trace::wc_opcode_name(op);
    return n != "?" ? n : "opcode " + std::to_string(op);
}

inline std::string event_name(int e) {
    const std::string n = trace::event_name(e);
    return n != "?" ? n : "event " + std::to_string(e);
}

inline std::string state_name(int s) {
    static const char* const n[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
    return s >= 0 && s <= 6 ? n[s] : "state " + std::to_string(s);
}

inline std::string errno_name(int e) {
    switch (e) {
    case 0: return "0";
    case EINVAL: return "EINVAL";
    case EBUSY: return "EBUSY";
    case ENOMEM: return "ENOMEM";
    default: return "errno " + std::to_string(e);
    }
}

inline std::string vendor_name(int v) {
    return std::string(to_string(xlate_status(v))) + " (" + std::to_string(v) + ")";
}

inline int wc_op_of(ibv_wr_opcode op) {
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

inline bool is_atomic(ibv_wr_opcode op) {
    return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/// Deterministic bytes (xorshift), different for different seeds.
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
inline outcome remote_fault() {
    outcome o;
    o.cq[S0] = {{IBV_WC_REM_ACCESS_ERR}};
    o.event[1] = IBV_EVENT_QP_ACCESS_ERR;
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// A local segment of node i's WR fails its check: nothing is sent.
inline outcome local_prot(unsigned node, xs why) {
    outcome o;
    o.cq[node ? S1 : S0] = {{IBV_WC_LOC_PROT_ERR, OP_OF_ATTACK, int(why)}};
    o.state[node] = ERR;
    return o;
}
/// A memory management WR on node1 fails (Memory Management Operation Error).
inline outcome mm_error(xs why) {
    outcome o;
    o.cq[S1] = {{IBV_WC_MW_BIND_ERR, OP_OF_ATTACK, int(why)}};
    o.state[1] = ERR;
    return o;
}
/// A SEND into a receive SGE of node1 that fails its check.
inline outcome recv_prot(xs why) {
    outcome o;
    o.cq[R1] = {{IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, int(why)}};
    o.cq[S0] = {{IBV_WC_REM_OP_ERR}};
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// A SEND with Invalidate whose invalidation node1 refuses: the key stays as it was.
inline outcome send_inv_refused(xs why) {
    outcome o;
    o.cq[R1] = {{IBV_WC_MW_BIND_ERR, IBV_WC_RECV, int(why)}};
    o.cq[S0] = {{IBV_WC_REM_OP_ERR}};
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// An RDMA WRITE with immediate refused after it took a receive WQE.
inline outcome write_imm_fault() {
    outcome o;
    o.cq[R1] = {{IBV_WC_LOC_ACCESS_ERR, IBV_WC_RECV_RDMA_WITH_IMM}};
    o.cq[S0] = {{IBV_WC_REM_ACCESS_ERR}};
    o.state[0] = o.state[1] = ERR;
    return o;
}
/// The verb or post returns an immediate error; nothing reaches the HCA, both QPs stay RTS.
inline outcome refused(int rc) {
    outcome o;
    o.post = rc;
    return o;
}

inline std::string describe(const outcome& o) {
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

}  // namespace hcasim::attack
