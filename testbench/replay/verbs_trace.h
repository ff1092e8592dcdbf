// Verbs-level traces (traces/README.md): one JSON object per line. A header (format version,
// hcasim version, the effective configuration, the seed), then every verbs call of every
// application with its arguments, its outcome and its simulated time, every asynchronous event,
// and an end record with the final memory digests and the counters.
//
// trace_recorder writes them: `hcasim --record FILE` records a workload, `hcasim replay` records
// what it re-issues (the outcome it compares, and what --update freezes). Objects are named per
// node in creation order (pd0, mr0, cq0, qp0, srq0, ah0, xrcd0, rdd0, eec0, buf0 for application
// memory); a
// reference to another node's object is "N/name". Buffers in work requests are (MR, offset,
// length); their contents are never dumped, only digested at the end.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <systemc>

#include "firmware/verbs.h"
#include "model/core/output_file.h"

namespace hcasim::trace {

using json = nlohmann::ordered_json;

/// The trace format this hcasim writes and reads.
constexpr int FORMAT_VERSION = 1;

/// The configuration of every declared parameter, compact: a key every node has with one value
/// appears once, without its node prefix (so a later generic --set overrides it); keys whose
/// value differs between nodes appear per node.
json effective_config();

/// Bytes as lower-case hex digit pairs, and back (false unless `hex` is pairs of hex digits).
std::string hex(const void* p, size_t n);
bool unhex(const std::string& hex, std::vector<uint8_t>* out);
/// A GID as 32 hex digits, and back (false unless exactly 32 hex digits).
std::string gid_hex(const verbs::ibv_gid& g);
bool gid_of(const std::string& hex, verbs::ibv_gid* g);

/// "fnv1a64:<16 hex digits>" of the bytes.
std::string digest(const uint8_t* p, size_t n);

// Names of verbs enums in traces (the libibverbs names without their prefix) and back; the
// parsers return false for an unknown name.
const char* wr_opcode_name(int op);
bool wr_opcode_of(const std::string& s, verbs::ibv_wr_opcode* op);
const char* wc_opcode_name(int op);
const char* wc_status_name(int st);
const char* qp_state_name(int st);
bool qp_state_of(const std::string& s, verbs::ibv_qp_state* st);
const char* mig_state_name(int m);
bool mig_state_of(const std::string& s, verbs::ibv_mig_state* m);
const char* qp_type_name(int t);
bool qp_type_of(const std::string& s, verbs::ibv_qp_type* t);
const char* srq_type_name(int t);
bool srq_type_of(const std::string& s, verbs::ibv_srq_type* t);
const char* event_name(int e);
json access_flags(unsigned flags);
bool access_flags_of(const json& j, unsigned* flags, std::string* why);
json send_flags(unsigned flags);
bool send_flags_of(const json& j, unsigned* flags, std::string* why);

/// Records verbs calls of the applications of `nodes` nodes into a file (an output_file: written
/// whole by end(), or not at all).
class recorder {
public:
    /// Opens `path` for writing; throws config_error if it cannot (`what` names it: the option).
    recorder(const std::string& path, unsigned nodes, const std::string& what = "--record");
    ~recorder();  ///< without end(): the file is not written (the old one stays)

    void header(const json& config, uint64_t seed, const std::string& workload);
    /// A "#" line (readers skip it).
    void comment(const std::string& text) {
        out_.write(text);
        out_.write("\n");
    }

    // --- object names ---
    /// The name of a node's object (made in creation order: kind + number), or "" if unknown.
    std::string name_of(unsigned node, const void* obj) const;
    /// Names a new object: `name` if given, else kind + the next number of that kind.
    std::string add(unsigned node, const void* obj, const char* kind, const std::string& name = "");
    /// A node's application buffer [addr, addr+len).
    std::string add_buffer(unsigned node, uint64_t addr, uint64_t len, const std::string& name = "");
    /// A node's registered region (for SGEs and remote references).
    void add_mr(unsigned node, const verbs::ibv_mr* mr, const std::string& name);
    void add_qp(unsigned node, const verbs::ibv_qp* qp, const std::string& name);
    /// An XRC SRQ (its number, for the work requests that name it).
    void add_srq(unsigned node, const verbs::ibv_srq* srq, const std::string& name);
    /// An EE context (its number, for the EE contexts that name it as their destination, and
    /// the work requests through it): name it with add(node, nullptr, "eec") first.
    void add_eec(unsigned node, const verbs::ibv_eec* eec, const std::string& name);

    // --- argument encodings ---
    /// {"mr":name,"offset":o,"len":n} when the SGE lies in an MR of the node with that lkey,
    /// else {"addr":a,"lkey":k,"len":n}.
    json sge(unsigned node, const verbs::ibv_sge& s) const;
    /// {"mr":"N/name","offset":o} for a remote address inside a known MR with that rkey, else
    /// {"addr":a,"rkey":k}. An MR of another node than `node` (the poster's) comes first: the
    /// nodes' address spaces and keys are alike, so node 1's region often has the same
    /// addresses and rkey as the poster's own.
    json remote(uint64_t addr, uint32_t rkey, unsigned node = ~0u) const;
    /// "N/name" of the QP with that number on another node, or "" .
    std::string qp_by_num(uint32_t qp_num, unsigned not_node) const;
    /// "N/name" of the EE context with that number on another node than `not_node`, or "".
    std::string eec_by_num(uint32_t eecn, unsigned not_node) const;
    /// "N/name" of the XRC SRQ with that number on node `on` (any node but `node` when `on` is
    /// ~0u), or "".
    std::string srq_by_num(uint32_t srqn, unsigned node, unsigned on) const;
    /// The work requests of a QP of `node`; those of an XRC initiator (`xrc`) name their SRQ on
    /// node `xrc_node` (the node its messages go to; ~0u: any other node). A reliable datagram
    /// WR (wr->rd.eec set) names its EE context, the destination QP (on the node of the EE
    /// context's peer when that is known) and the Q_Key.
    json send_wrs(unsigned node, const verbs::ibv_send_wr* wr, bool xrc = false,
                  unsigned xrc_node = ~0u) const;
    json recv_wrs(unsigned node, const verbs::ibv_recv_wr* wr) const;
    json wc(unsigned node, const verbs::ibv_wc& w) const;
    json qp_attr(unsigned node, const verbs::ibv_qp_attr& a, int mask) const;
    /// Modify EEC attributes (the ibv_qp_attr_mask bits ibv_modify_eec reads), as qp_attr:
    /// the destination EE context as "N/eecK" when known on another node, else dest_eecn.
    json eec_attr(unsigned node, const verbs::ibv_eec_attr& a, int mask) const;

    // --- records ---
    /// Writes one call record: adds "t_ps" (when the call was issued; default now) and "node"
    /// in front of `fields`.
    void call(unsigned node, const char* call, json fields,
              const sc_core::sc_time& issued = sc_core::sc_time_stamp());
    /// Writes an event record; returns it.
    json event(unsigned node, const verbs::ibv_async_event& e);
    /// Writes the end record: memory digests of every buffer (read through `read`) and the
    /// counters, and commits the file (throws config_error on a write error). Returns the
    /// digests ({"N/buf": "fnv1a64:..."}).
    json end(const std::function<void(unsigned node, uint64_t addr, uint8_t* dst, uint64_t n)>& read,
             const json& counters);

private:
    struct buffer {
        unsigned node;
        std::string name;
        uint64_t addr, len;
    };
    void line(const json& j);
    struct mr_info {
        std::string name;
        uint64_t addr, len;
        uint32_t lkey, rkey;
    };
    struct node_names {
        std::map<const void*, std::string> names;
        std::map<std::string, unsigned> next;  // per kind
        std::vector<mr_info> mrs;
        std::map<uint32_t, std::string> qps;   // qp_num -> name
        std::map<uint32_t, std::string> srqs;  // XRC SRQ number -> name
        std::map<uint32_t, std::string> eecs;  // EE context number -> name
    };
    output_file out_;
    std::vector<node_names> nodes_;
    std::vector<buffer> buffers_;
};

}  // namespace hcasim::trace
