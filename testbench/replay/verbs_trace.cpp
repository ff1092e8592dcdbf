#include "testbench/replay/verbs_trace.h"

#include <systemc>

#include <algorithm>
#include <cstdio>

#include "model/core/param.h"

namespace hcasim::trace {

using namespace verbs;

std::string digest(const uint8_t* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    char b[32];
    std::snprintf(b, sizeof b, "fnv1a64:%016llx", static_cast<unsigned long long>(h));
    return b;
}

json effective_config() {
    std::map<std::string, std::map<std::string, std::string>> by_generic;  // generic -> full -> value
    std::vector<std::string> order;
    for (const param_base* p : broker::instance().params()) {
        const std::string g = p->generic_key();
        if (g.compare(0, 9, "workload.") == 0) continue;  // the perftest application's, not the machine's
        if (!by_generic.count(g)) order.push_back(g);
        by_generic[g][p->key()] = p->str();
    }
    json c = json::object();
    for (const std::string& g : order) {
        const auto& full = by_generic[g];
        bool same = true;
        for (const auto& kv : full) same &= kv.second == full.begin()->second;
        if (same)
            c[g] = full.begin()->second;
        else
            for (const auto& kv : full) c[kv.first] = kv.second;
    }
    return c;
}

std::string hex(const void* p, size_t n) {
    static const char* const d = "0123456789abcdef";
    std::string h;
    h.reserve(2 * n);
    for (size_t i = 0; i < n; ++i) {
        const uint8_t b = static_cast<const uint8_t*>(p)[i];
        h += d[b >> 4];
        h += d[b & 15];
    }
    return h;
}

bool unhex(const std::string& h, std::vector<uint8_t>* out) {
    if (h.size() % 2 || h.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return false;
    out->resize(h.size() / 2);
    for (size_t i = 0; i < out->size(); ++i) (*out)[i] = uint8_t(std::stoul(h.substr(2 * i, 2), nullptr, 16));
    return true;
}

std::string gid_hex(const ibv_gid& g) { return hex(g.raw, sizeof g.raw); }

bool gid_of(const std::string& h, ibv_gid* g) {
    std::vector<uint8_t> b;
    if (h.size() != 2 * sizeof g->raw || !unhex(h, &b)) return false;
    std::copy(b.begin(), b.end(), g->raw);
    return true;
}

namespace {

struct named {
    int value;
    const char* name;
};

const named wr_opcodes[] = {{IBV_WR_RDMA_WRITE, "RDMA_WRITE"},
                            {IBV_WR_RDMA_WRITE_WITH_IMM, "RDMA_WRITE_WITH_IMM"},
                            {IBV_WR_SEND, "SEND"},
                            {IBV_WR_SEND_WITH_IMM, "SEND_WITH_IMM"},
                            {IBV_WR_RDMA_READ, "RDMA_READ"},
                            {IBV_WR_ATOMIC_CMP_AND_SWP, "ATOMIC_CMP_AND_SWP"},
                            {IBV_WR_ATOMIC_FETCH_AND_ADD, "ATOMIC_FETCH_AND_ADD"},
                            {IBV_WR_LOCAL_INV, "LOCAL_INV"},
                            {IBV_WR_SEND_WITH_INV, "SEND_WITH_INV"}};
const named wc_opcodes[] = {
    {IBV_WC_SEND, "SEND"},           {IBV_WC_RDMA_WRITE, "RDMA_WRITE"},
    {IBV_WC_RDMA_READ, "RDMA_READ"}, {IBV_WC_COMP_SWAP, "COMP_SWAP"},
    {IBV_WC_FETCH_ADD, "FETCH_ADD"}, {IBV_WC_BIND_MW, "BIND_MW"},
    {IBV_WC_LOCAL_INV, "LOCAL_INV"}, {IBV_WC_FAST_REG_MR, "FAST_REG_MR"},
    {IBV_WC_RECV, "RECV"},           {IBV_WC_RECV_RDMA_WITH_IMM, "RECV_RDMA_WITH_IMM"}};
const char* const wc_statuses[] = {
    "SUCCESS",          "LOC_LEN_ERR",       "LOC_QP_OP_ERR",     "LOC_EEC_OP_ERR",
    "LOC_PROT_ERR",     "WR_FLUSH_ERR",      "MW_BIND_ERR",       "BAD_RESP_ERR",
    "LOC_ACCESS_ERR",   "REM_INV_REQ_ERR",   "REM_ACCESS_ERR",    "REM_OP_ERR",
    "RETRY_EXC_ERR",    "RNR_RETRY_EXC_ERR", "LOC_RDD_VIOL_ERR",  "REM_INV_RD_REQ_ERR",
    "REM_ABORT_ERR",    "INV_EECN_ERR",      "INV_EEC_STATE_ERR", "FATAL_ERR",
    "RESP_TIMEOUT_ERR", "GENERAL_ERR"};
const char* const qp_states[] = {"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"};
const named qp_types[] = {{IBV_QPT_SMI, "SMI"},
                          {IBV_QPT_GSI, "GSI"},
                          {IBV_QPT_RC, "RC"},
                          {IBV_QPT_UC, "UC"},
                          {IBV_QPT_UD, "UD"},
                          {IBV_QPT_RD, "RD"},
                          {IBV_QPT_XRC_SEND, "XRC_SEND"},
                          {IBV_QPT_XRC_RECV, "XRC_RECV"}};
const char* const srq_types[] = {"BASIC", "XRC"};
const char* const mig_states[] = {"MIGRATED", "REARM", "ARMED"};
const char* const events[] = {"CQ_ERR",
                              "QP_FATAL",
                              "QP_REQ_ERR",
                              "QP_ACCESS_ERR",
                              "COMM_EST",
                              "SQ_DRAINED",
                              "PATH_MIG",
                              "PATH_MIG_ERR",
                              "DEVICE_FATAL",
                              "PORT_ACTIVE",
                              "PORT_ERR",
                              "LID_CHANGE",
                              "PKEY_CHANGE",
                              "SM_CHANGE",
                              "SRQ_ERR",
                              "SRQ_LIMIT_REACHED",
                              "QP_LAST_WQE_REACHED",
                              "CLIENT_REREGISTER",
                              "GID_CHANGE",
                              "EEC_ERR",
                              "EEC_PATH_MIG",
                              "EEC_PATH_MIG_ERR"};
const named access_names[] = {
    {IBV_ACCESS_LOCAL_WRITE, "LOCAL_WRITE"}, {IBV_ACCESS_REMOTE_WRITE, "REMOTE_WRITE"},
    {IBV_ACCESS_REMOTE_READ, "REMOTE_READ"}, {IBV_ACCESS_REMOTE_ATOMIC, "REMOTE_ATOMIC"},
    {IBV_ACCESS_MW_BIND, "MW_BIND"},         {IBV_ACCESS_ZERO_BASED, "ZERO_BASED"}};
const named send_flag_names[] = {{IBV_SEND_FENCE, "FENCE"},
                                 {IBV_SEND_SIGNALED, "SIGNALED"},
                                 {IBV_SEND_SOLICITED, "SOLICITED"},
                                 {IBV_SEND_INLINE, "INLINE"}};

template <size_t N>
const char* lookup(const named (&t)[N], int v) {
    for (const named& n : t)
        if (n.value == v) return n.name;
    return "?";
}
template <size_t N>
const char* index_name(const char* const (&t)[N], int v) {
    return v >= 0 && size_t(v) < N ? t[v] : "?";
}
template <size_t N>
bool flags_of(const named (&t)[N], const json& j, unsigned* flags, std::string* why, const char* what) {
    *flags = 0;
    if (!j.is_array()) {
        *why = std::string(what) + " must be a list of names";
        return false;
    }
    for (const json& e : j) {
        bool found = false;
        if (e.is_string())
            for (const named& n : t)
                if (e.get<std::string>() == n.name) {
                    *flags |= unsigned(n.value);
                    found = true;
                }
        if (!found) {
            *why = std::string("unknown ") + what + " " + e.dump();
            return false;
        }
    }
    return true;
}
template <size_t N>
json flags_json(const named (&t)[N], unsigned flags) {
    json a = json::array();
    for (const named& n : t)
        if (flags & unsigned(n.value)) a.push_back(n.name);
    return a;
}

}  // namespace

const char* wr_opcode_name(int op) { return lookup(wr_opcodes, op); }
bool wr_opcode_of(const std::string& s, ibv_wr_opcode* op) {
    for (const named& n : wr_opcodes)
        if (s == n.name) {
            *op = ibv_wr_opcode(n.value);
            return true;
        }
    return false;
}
const char* wc_opcode_name(int op) { return lookup(wc_opcodes, op); }
const char* wc_status_name(int st) { return index_name(wc_statuses, st); }
const char* qp_state_name(int st) { return index_name(qp_states, st); }
bool qp_state_of(const std::string& s, ibv_qp_state* st) {
    for (size_t i = 0; i < std::size(qp_states); ++i)
        if (s == qp_states[i]) {
            *st = ibv_qp_state(i);
            return true;
        }
    return false;
}
const char* mig_state_name(int m) { return index_name(mig_states, m); }
bool mig_state_of(const std::string& s, ibv_mig_state* m) {
    for (size_t i = 0; i < std::size(mig_states); ++i)
        if (s == mig_states[i]) {
            *m = ibv_mig_state(i);
            return true;
        }
    return false;
}
const char* qp_type_name(int t) { return lookup(qp_types, t); }
bool qp_type_of(const std::string& s, ibv_qp_type* t) {
    for (size_t i = 2; i < std::size(qp_types); ++i)  // consumers' types only
        if (s == qp_types[i].name) {
            *t = ibv_qp_type(qp_types[i].value);
            return true;
        }
    return false;
}
const char* srq_type_name(int t) { return index_name(srq_types, t); }
bool srq_type_of(const std::string& s, ibv_srq_type* t) {
    for (size_t i = 0; i < std::size(srq_types); ++i)
        if (s == srq_types[i]) {
            *t = ibv_srq_type(i);
            return true;
        }
    return false;
}
const char* event_name(int e) { return index_name(events, e); }
json access_flags(unsigned flags) { return flags_json(access_names, flags); }
bool access_flags_of(const json& j, unsigned* flags, std::string* why) {
    return flags_of(access_names, j, flags, why, "access flag");
}
json send_flags(unsigned flags) { return flags_json(send_flag_names, flags); }
bool send_flags_of(const json& j, unsigned* flags, std::string* why) {
    return flags_of(send_flag_names, j, flags, why, "send flag");
}

// ------------------------------------------------------------------------------- recorder

recorder::recorder(const std::string& path, unsigned nodes, const std::string& what)
    : out_(path, what), nodes_(nodes) {}

recorder::~recorder() = default;

void recorder::line(const json& j) {
    out_.write(j.dump());
    out_.write("\n");
}

void recorder::header(const json& config, uint64_t seed, const std::string& workload) {
    json h;
    h["hcasim_trace"] = FORMAT_VERSION;
    h["hcasim_version"] = HCASIM_VERSION;
    h["workload"] = workload;
    h["seed"] = seed;
    h["nodes"] = nodes_.size();
    h["config"] = config;
    line(h);
}

std::string recorder::name_of(unsigned node, const void* obj) const {
    if (node >= nodes_.size() || !obj) return "";
    auto it = nodes_[node].names.find(obj);
    return it == nodes_[node].names.end() ? "" : it->second;
}

std::string recorder::add(unsigned node, const void* obj, const char* kind, const std::string& name) {
    node_names& n = nodes_.at(node);
    std::string nm = name;
    unsigned& next = n.next[kind];
    if (nm.empty()) nm = std::string(kind) + std::to_string(next);
    ++next;
    if (obj) n.names[obj] = nm;
    return nm;
}

std::string recorder::add_buffer(unsigned node, uint64_t addr, uint64_t len, const std::string& name) {
    const std::string nm = add(node, nullptr, "buf", name);
    buffers_.push_back({node, nm, addr, len});
    return nm;
}

void recorder::add_mr(unsigned node, const ibv_mr* mr, const std::string& name) {
    nodes_.at(node).names[mr] = name;
    nodes_[node].mrs.push_back({name, mr->addr, mr->length, mr->lkey, mr->rkey});
}

void recorder::add_qp(unsigned node, const ibv_qp* qp, const std::string& name) {
    nodes_.at(node).names[qp] = name;
    nodes_[node].qps[qp->qp_num] = name;
}

void recorder::add_srq(unsigned node, const ibv_srq* srq, const std::string& name) {
    nodes_.at(node).names[srq] = name;
    if (srq->xrcd) nodes_[node].srqs[srq->handle] = name;
}

void recorder::add_eec(unsigned node, const ibv_eec* eec, const std::string& name) {
    nodes_.at(node).names[eec] = name;
    nodes_[node].eecs[eec->eecn] = name;
}

json recorder::sge(unsigned node, const ibv_sge& s) const {
    for (auto it = nodes_.at(node).mrs.rbegin(); it != nodes_[node].mrs.rend(); ++it)
        if (it->lkey == s.lkey && s.addr >= it->addr && s.addr - it->addr <= it->len)
            return json{{"mr", it->name}, {"offset", s.addr - it->addr}, {"len", s.length}};
    return json{{"addr", s.addr}, {"lkey", s.lkey}, {"len", s.length}};
}

json recorder::remote(uint64_t addr, uint32_t rkey, unsigned node) const {
    for (int own = 0; own < 2; ++own)  // other nodes first, then the poster's own (a loopback)
        for (unsigned n = 0; n < nodes_.size(); ++n) {
            if ((n == node) != bool(own)) continue;
            for (auto it = nodes_[n].mrs.rbegin(); it != nodes_[n].mrs.rend(); ++it)
                if (it->rkey == rkey && addr >= it->addr && addr - it->addr <= it->len)
                    return json{{"mr", std::to_string(n) + "/" + it->name}, {"offset", addr - it->addr}};
        }
    return json{{"addr", addr}, {"rkey", rkey}};
}

std::string recorder::qp_by_num(uint32_t qp_num, unsigned not_node) const {
    for (unsigned n = 0; n < nodes_.size(); ++n) {
        if (n == not_node) continue;
        auto it = nodes_[n].qps.find(qp_num);
        if (it != nodes_[n].qps.end()) return std::to_string(n) + "/" + it->second;
    }
    return "";
}

std::string recorder::eec_by_num(uint32_t eecn, unsigned not_node) const {
    for (unsigned n = 0; n < nodes_.size(); ++n) {
        if (n == not_node) continue;
        auto it = nodes_[n].eecs.find(eecn);
        if (it != nodes_[n].eecs.end()) return std::to_string(n) + "/" + it->second;
    }
    return "";
}

std::string recorder::srq_by_num(uint32_t srqn, unsigned node, unsigned on) const {
    for (unsigned n = 0; n < nodes_.size(); ++n) {
        if (on == ~0u ? n == node : n != on) continue;
        auto it = nodes_[n].srqs.find(srqn);
        if (it != nodes_[n].srqs.end()) return std::to_string(n) + "/" + it->second;
    }
    return "";
}

json recorder::send_wrs(unsigned node, const ibv_send_wr* wr, bool xrc, unsigned xrc_node) const {
    json a = json::array();
    for (; wr; wr = wr->next) {
        json w;
        w["wr_id"] = wr->wr_id;
        w["opcode"] = wr_opcode_name(wr->opcode);
        if (wr->send_flags) w["flags"] = send_flags(wr->send_flags);
        json sg = json::array();
        for (int i = 0; i < wr->num_sge && wr->sg_list; ++i) sg.push_back(sge(node, wr->sg_list[i]));
        w["sg"] = sg;
        if (wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM || wr->opcode == IBV_WR_SEND_WITH_IMM)
            w["imm"] = wr->imm_data;
        if (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
            wr->opcode == IBV_WR_RDMA_READ)
            w["remote"] = remote(wr->wr.rdma.remote_addr, wr->wr.rdma.rkey, node);
        if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
            w["remote"] = remote(wr->wr.atomic.remote_addr, wr->wr.atomic.rkey, node);
            w["compare_add"] = wr->wr.atomic.compare_add;
            w["swap"] = wr->wr.atomic.swap;
        }
        if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV)
            w["invalidate_rkey"] = wr->invalidate_rkey;
        if (wr->wr.ud.ah) {
            w["ah"] = name_of(node, wr->wr.ud.ah);
            std::string q = qp_by_num(wr->wr.ud.remote_qpn, node);  // another node's, else a loopback
            if (q.empty()) q = qp_by_num(wr->wr.ud.remote_qpn, ~0u);
            if (!q.empty())
                w["remote_qp"] = q;
            else
                w["remote_qpn"] = wr->wr.ud.remote_qpn;
            w["remote_qkey"] = wr->wr.ud.remote_qkey;
        }
        if (wr->rd.eec) {  // reliable datagram: the EE context, the QP behind its peer, the Q_Key
            const std::string e = name_of(node, wr->rd.eec);
            w["eec"] = e.empty() ? json(nullptr) : json(e);
            // The destination QP is on the node of the EE context's peer (known when the
            // peer EE context was named); else on the first other node with that number.
            std::string q;
            if (!e.empty()) {
                const std::string peer = eec_by_num(wr->rd.eec->attr.dest_eecn, node);
                if (!peer.empty()) {
                    const unsigned pn = unsigned(std::stoul(peer));
                    auto it = nodes_[pn].qps.find(wr->rd.remote_qpn);
                    if (it != nodes_[pn].qps.end()) q = std::to_string(pn) + "/" + it->second;
                }
            }
            if (q.empty()) q = qp_by_num(wr->rd.remote_qpn, node);
            if (q.empty()) q = qp_by_num(wr->rd.remote_qpn, ~0u);
            if (!q.empty())
                w["remote_qp"] = q;
            else
                w["remote_qpn"] = wr->rd.remote_qpn;
            w["remote_qkey"] = wr->rd.remote_qkey;
        }
        if (xrc) {  // the target's SRQ, by name when known
            const std::string q = srq_by_num(wr->xrc_remote_srqn, node, xrc_node);
            if (!q.empty())
                w["remote_srq"] = q;
            else
                w["remote_srqn"] = wr->xrc_remote_srqn;
        }
        a.push_back(w);
    }
    return a;
}

json recorder::recv_wrs(unsigned node, const ibv_recv_wr* wr) const {
    json a = json::array();
    for (; wr; wr = wr->next) {
        json sg = json::array();
        for (int i = 0; i < wr->num_sge && wr->sg_list; ++i) sg.push_back(sge(node, wr->sg_list[i]));
        a.push_back(json{{"wr_id", wr->wr_id}, {"sg", sg}});
    }
    return a;
}

json recorder::wc(unsigned node, const ibv_wc& w) const {
    json j;
    j["wr_id"] = w.wr_id;
    j["status"] = wc_status_name(w.status);
    j["opcode"] = wc_opcode_name(w.opcode);
    j["byte_len"] = w.byte_len;
    if (w.wc_flags & IBV_WC_WITH_IMM) j["imm"] = w.imm_data;
    const auto it = nodes_.at(node).qps.find(w.qp_num);
    if (it != nodes_[node].qps.end())
        j["qp"] = it->second;
    else
        j["qp_num"] = w.qp_num;
    if (w.opcode & IBV_WC_RECV) {  // the sender: another node's QP before the node's own (loopback)
        std::string src = qp_by_num(w.src_qp, node);
        if (src.empty()) src = qp_by_num(w.src_qp, ~0u);
        j["src_qp"] = src.empty() ? json(w.src_qp) : json(src);
    }
    return j;
}

namespace {

/// The primary path of Modify QP / Modify EEC: `dlid`, `sl` and (when not 0) `src_path_bits`.
void path_keys(json& j, const ibv_ah_attr& ah) {
    j["dlid"] = ah.dlid;
    j["sl"] = ah.sl;
    if (ah.src_path_bits) j["src_path_bits"] = ah.src_path_bits;
}

/// The PSNs, READ/atomic limits, RNR timer, timeout and retries of Modify QP / Modify EEC (the
/// same mask bits and keys for both), in this order after the others.
/// The alternate path (IBA 10.4) and path migration state keys of modify_qp and modify_eec.
template <class Attr>
void alt_path_keys(json& j, const Attr& a, int mask) {
    if (mask & IBV_QP_ALT_PATH) {
        j["alt_dlid"] = a.alt_ah_attr.dlid;
        j["alt_sl"] = a.alt_ah_attr.sl;
        j["alt_src_path_bits"] = a.alt_ah_attr.src_path_bits;
        j["alt_port_num"] = a.alt_port_num;
        j["alt_pkey_index"] = a.alt_pkey_index;
        j["alt_timeout"] = a.alt_timeout;
    }
    if (mask & IBV_QP_PATH_MIG_STATE) j["path_mig_state"] = mig_state_name(a.path_mig_state);
}

template <class Attr>
void reliability_keys(json& j, const Attr& a, int mask) {
    if (mask & IBV_QP_RQ_PSN) j["rq_psn"] = a.rq_psn;
    if (mask & IBV_QP_SQ_PSN) j["sq_psn"] = a.sq_psn;
    if (mask & IBV_QP_MAX_QP_RD_ATOMIC) j["max_rd_atomic"] = a.max_rd_atomic;
    if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) j["max_dest_rd_atomic"] = a.max_dest_rd_atomic;
    if (mask & IBV_QP_MIN_RNR_TIMER) j["min_rnr_timer"] = a.min_rnr_timer;
    if (mask & IBV_QP_TIMEOUT) j["timeout"] = a.timeout;
    if (mask & IBV_QP_RETRY_CNT) j["retry_cnt"] = a.retry_cnt;
    if (mask & IBV_QP_RNR_RETRY) j["rnr_retry"] = a.rnr_retry;
}

}  // namespace

json recorder::qp_attr(unsigned node, const ibv_qp_attr& a, int mask) const {
    json j;
    if (mask & IBV_QP_STATE) j["qp_state"] = qp_state_name(a.qp_state);
    if (mask & IBV_QP_PKEY_INDEX) j["pkey_index"] = a.pkey_index;
    if (mask & IBV_QP_PORT) j["port_num"] = a.port_num;
    if (mask & IBV_QP_QKEY) j["qkey"] = a.qkey;
    if (mask & IBV_QP_ACCESS_FLAGS) j["qp_access_flags"] = access_flags(a.qp_access_flags);
    if (mask & IBV_QP_PATH_MTU) j["path_mtu"] = 128u << a.path_mtu;
    if (mask & IBV_QP_DEST_QPN) {
        const std::string q = qp_by_num(a.dest_qp_num, node);
        if (!q.empty())
            j["dest_qp"] = q;
        else
            j["dest_qp_num"] = a.dest_qp_num;
    }
    if (mask & IBV_QP_AV) path_keys(j, a.ah_attr);
    alt_path_keys(j, a, mask);
    reliability_keys(j, a, mask);
    return j;
}

json recorder::eec_attr(unsigned node, const ibv_eec_attr& a, int mask) const {
    json j;
    if (mask & IBV_QP_STATE) j["eec_state"] = qp_state_name(a.eec_state);
    if (mask & IBV_QP_PKEY_INDEX) j["pkey_index"] = a.pkey_index;
    if (mask & IBV_QP_PORT) j["port_num"] = a.port_num;
    if (mask & IBV_QP_PATH_MTU) j["path_mtu"] = 128u << a.path_mtu;
    if (mask & IBV_QP_DEST_QPN) {  // an EE context's destination is the peer EE context
        const std::string e = eec_by_num(a.dest_eecn, node);
        if (!e.empty())
            j["dest_eec"] = e;
        else
            j["dest_eecn"] = a.dest_eecn;
    }
    if (mask & IBV_QP_AV) path_keys(j, a.ah_attr);
    alt_path_keys(j, a, mask);
    reliability_keys(j, a, mask);
    return j;
}

void recorder::call(unsigned node, const char* name, json fields, const sc_core::sc_time& issued) {
    json j;
    j["t_ps"] = uint64_t(issued.value());
    j["node"] = node;
    j["call"] = name;
    for (auto& kv : fields.items()) j[kv.key()] = kv.value();
    line(j);
}

json recorder::event(unsigned node, const ibv_async_event& e) {
    json j;
    j["t_ps"] = uint64_t(sc_core::sc_time_stamp().value());
    j["node"] = node;
    j["event"] = event_name(e.event_type);
    switch (e.event_type) {
    case IBV_EVENT_CQ_ERR: j["cq"] = name_of(node, e.element.cq); break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED: j["srq"] = name_of(node, e.element.srq); break;
    case IBV_EVENT_DEVICE_FATAL:
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
    case IBV_EVENT_LID_CHANGE:
    case IBV_EVENT_PKEY_CHANGE:
    case IBV_EVENT_SM_CHANGE:
    case IBV_EVENT_CLIENT_REREGISTER:
    case IBV_EVENT_GID_CHANGE: j["port"] = e.element.port_num; break;
    case IBV_EVENT_EEC_ERR:
    case IBV_EVENT_EEC_PATH_MIG:
    case IBV_EVENT_EEC_PATH_MIG_ERR: j["eec"] = name_of(node, e.element.eec); break;
    default: j["qp"] = name_of(node, e.element.qp);
    }
    line(j);
    return j;
}

json recorder::end(const std::function<void(unsigned, uint64_t, uint8_t*, uint64_t)>& read,
                   const json& counters) {
    json mem = json::object();
    std::vector<uint8_t> bytes;
    for (const buffer& b : buffers_) {
        bytes.resize(b.len);
        read(b.node, b.addr, bytes.data(), b.len);
        mem[std::to_string(b.node) + "/" + b.name] = digest(bytes.data(), bytes.size());
    }
    json j;
    j["t_ps"] = uint64_t(sc_core::sc_time_stamp().value());
    j["end"] = json{{"memory", mem}, {"counters", counters}};
    line(j);
    out_.commit();
    return mem;
}

}  // namespace hcasim::trace
