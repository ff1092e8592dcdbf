#include "testbench/replay/trace_file.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "model/core/param.h"
#include "model/core/text_file.h"
#include "testbench/host_software.h"

namespace hcasim::replay {

using namespace verbs;

namespace {

/// Longest line of a trace (the end record holds every buffer's digest and every counter).
constexpr size_t max_trace_line_bytes = size_t(16) << 20;
/// Largest "align" of an alloc.
constexpr uint64_t max_alloc_align = uint64_t(1) << 30;

/// Whether `name` is one of the space-separated words of `list`.
bool listed(const char* list, const std::string& name) {
    for (const char* p = list; *p;) {
        const char* e = p;
        while (*e && *e != ' ') ++e;
        if (name.size() == size_t(e - p) && name.compare(0, name.size(), p, name.size()) == 0) return true;
        p = *e ? e + 1 : e;
    }
    return false;
}

std::string call_list() {
    std::string s;
    for (const call_spec& c : calls()) s += (s.empty() ? "" : "|") + std::string(c.name);
    return s;
}

/// Reads a trace line by line and checks each record (a bad one throws trace_error naming its
/// line). Per node it keeps what the records so far created, so that a reference to anything
/// not created before it is refused.
struct loader {
    explicit loader(const std::string& p) : path(p) { t.path = p; }

    const std::string& path;
    trace_file t;
    std::string text;
    size_t line = 0;
    // Per node: names of the objects created so far, by kind; lengths of the buffers.
    std::vector<std::map<std::string, std::string>> defined;
    std::vector<std::map<std::string, uint64_t>> buf_len;
    std::vector<std::map<std::string, std::string>> qp_type;  // per node: QP name -> its "type"
    std::vector<uint64_t> allocated;                          // per node: bytes of every alloc, page-rounded
    size_t end_line = 0;

    [[noreturn]] void fail(const std::string& why) const {
        throw trace_error(path + ":" + std::to_string(line) + ": " + why);
    }
    /// Fails on the first field of object `o` not in `known` (space-separated): traces are checked
    /// before anything runs, and a misspelt argument would otherwise be ignored.
    void check_fields(const json& o, const char* known, const std::string& what) {
        for (auto& kv : o.items())
            if (!listed(known, kv.key()))
                fail(what + ": unknown field \"" + kv.key() + "\"" +
                     (*known ? " (expected one of: " + std::string(known) + ")" : std::string()));
    }

    // Directories, unreadable files, NUL bytes and endless lines are refused like bad records.
    bool next_line(text_file& in) {
        try {
            const bool more = in.next(text);
            line = in.line_number();
            return more;
        } catch (const config_error& e) {
            throw trace_error(e.what());
        }
    }

    trace_file read() {
        std::optional<text_file> file;
        try {
            file.emplace(path, "trace", max_trace_line_bytes);
        } catch (const config_error& e) {
            throw trace_error(e.what());
        }
        while (next_line(*file)) {
            if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
            if (text[text.find_first_not_of(" \t")] == '#') {
                t.comments.push_back(text);
                continue;
            }
            if (end_line) fail("a record after the end record (line " + std::to_string(end_line) + ")");
            json j;
            try {
                j = json::parse(text);
            } catch (const std::exception& e) {
                fail(std::string("not a JSON object: ") + e.what());
            }
            if (!j.is_object()) fail("not a JSON object");
            if (t.header.is_null()) {
                header(j);
                continue;
            }
            if (j.contains("end")) {
                check_fields(j, "t_ps end", "end record");
                t.end = j["end"];
                end_line = line;
                continue;
            }
            if (!j.contains("node") || !j["node"].is_number_unsigned() ||
                j["node"].get<unsigned>() >= t.nodes)
                fail("\"node\" must be a node number below " + std::to_string(t.nodes));
            const unsigned node = j["node"];
            if (j.contains("event")) {
                check_fields(j, "t_ps node event qp cq srq port eec", "event");
                t.events.push_back({line, j});
                continue;
            }
            call(j, node);
        }
        if (t.header.is_null()) throw trace_error(path + ": empty trace (no header)");
        // A recorder's trace (its header names the hcasim version) ends with the end record: without
        // it the trace was cut short, and its memory digests would go unchecked.
        if (t.header.contains("hcasim_version") && t.end.is_null())
            fail("no end record: the trace was cut short (a recorded trace ends with {\"end\": ...})");
        return t;
    }

    void header(json& j) {
        if (!j.contains("hcasim_trace"))
            fail("not an hcasim trace: the first record must be the header with \"hcasim_trace\"");
        check_fields(j, "hcasim_trace hcasim_version workload seed nodes config", "header");
        if (!j["hcasim_trace"].is_number_integer() || j["hcasim_trace"].get<int>() != trace::FORMAT_VERSION)
            fail("trace format version " + j["hcasim_trace"].dump() + "; this hcasim reads version " +
                 std::to_string(trace::FORMAT_VERSION));
        if (j.contains("config") && !j["config"].is_object())
            fail("\"config\" must be an object of key: value");
        t.nodes = j.value("nodes", 2u);
        if (j.contains("config") && j["config"].contains("fabric.nodes")) {
            const json& v = j["config"]["fabric.nodes"];
            t.nodes = unsigned(v.is_string() ? std::stoul(v.get<std::string>()) : v.get<unsigned>());
        }
        if (t.nodes < 2 || t.nodes > 1024) fail("\"nodes\": " + std::to_string(t.nodes) + " (2..1024)");
        t.header = j;
        defined.resize(t.nodes);
        buf_len.resize(t.nodes);
        qp_type.resize(t.nodes);
        allocated.resize(t.nodes);
    }

    /// One call record, checked step by step in this order (the first failure is reported).
    void call(json& j, unsigned node) {
        if (!j.contains("call") || !j["call"].is_string())
            fail("a record needs \"call\" (or \"event\", \"end\")");
        const call_spec* c = spec_of(j["call"]);
        if (!c) fail("unknown call " + j["call"].dump() + " (expected " + call_list() + ")");
        check_known_fields(j, c);
        check_refs(j, node, c);
        const std::string cn = j["call"];
        check_work_requests(j, node, cn);
        if (cn == "attach_mcast" && (!j.contains("gid") || !j.contains("lid")))
            fail("attach_mcast needs \"gid\" and \"lid\"");
        if (cn == "poll_cq" && !j.contains("wc") && !j.contains("count"))
            fail("poll_cq needs \"count\" (completions to wait for) or the recorded \"wc\"");
        if (cn == "modify_qp") check_modify_qp(j, node);
        if (cn == "modify_eec") check_modify_eec(j, node);
        if (cn == "query_eec") check_query_eec(j);
        if (cn == "create_qp") check_create_qp(j);
        if (cn == "create_srq") check_create_srq(j);
        if (c->creates) define(j, node, c, cn);
        if (cn == "create_qp" && j["ret"].is_string()) qp_type[node][j["ret"].get<std::string>()] = j["type"];
        check_types(cn, j);
        check_buffer(j, node, cn);
        if (j.value("byte", 0u) > 255) fail(cn + ": \"byte\" must be 0..255");
        t.steps.push_back({line, j});
    }

    void check_known_fields(json& j, const call_spec* c) {
        for (auto& kv : j.items())
            if (!listed("t_ps node call ret errno t_done_ps", kv.key()) && !listed(c->fields, kv.key()) &&
                std::find_if(c->refs.begin(), c->refs.end(),
                             [&](const auto& r) { return kv.key() == r.first; }) == c->refs.end() &&
                std::find_if(c->opt_refs.begin(), c->opt_refs.end(),
                             [&](const auto& r) { return kv.key() == r.first; }) == c->opt_refs.end())
                fail(std::string(j["call"]) + ": unknown field \"" + kv.key() + "\"");
    }

    void check_ref(json& j, unsigned node, const char* field, const char* kind) {
        if (!j[field].is_string()) fail(std::string(j["call"]) + ": \"" + field + "\" must name a " + kind);
        unsigned n = 0;
        std::string name;
        if (!split_ref(j[field], node, &n, &name) || n >= t.nodes)
            fail(std::string(j["call"]) + ": bad reference " + j[field].dump());
        auto it = defined[n].find(name);
        if (it == defined[n].end() || it->second != kind)
            fail(std::string(j["call"]) + ": " + kind + " " + j[field].dump() + " of node " +
                 std::to_string(n) + " is not created before this line");
    }

    void check_refs(json& j, unsigned node, const call_spec* c) {
        for (const auto& r : c->refs) {
            if (!j.contains(r.first)) {
                if (std::string(r.first) == "buf" && j["call"] == "reg_mr" && j.contains("addr"))
                    continue;  // a raw address
                fail(std::string(j["call"]) + " needs \"" + r.first + "\"");
            }
            check_ref(j, node, r.first, r.second);
        }
        for (const auto& r : c->opt_refs)
            if (j.contains(r.first)) check_ref(j, node, r.first, r.second);
    }

    // References inside work requests and attributes.
    void check_sg(json& j, unsigned node, const json& sg) {
        if (!sg.is_array()) fail(std::string(j["call"]) + ": \"sg\" must be a list");
        for (const json& s : sg) {
            if (!s.is_object()) fail(std::string(j["call"]) + ": an SGE must be an object");
            check_fields(s, "mr offset len addr lkey", std::string(j["call"]) + ": SGE");
            if (s.contains("mr")) {
                unsigned n = 0;
                std::string name;
                if (!s["mr"].is_string() || !split_ref(s["mr"], node, &n, &name) || n != node ||
                    defined[n].count(name) == 0 || defined[n][name] != "mr")
                    fail(std::string(j["call"]) + ": SGE MR " + s["mr"].dump() + " is not a region of node " +
                         std::to_string(node) + " created before this line");
            } else if (!s.contains("addr") || !s.contains("lkey")) {
                fail(std::string(j["call"]) +
                     ": an SGE needs \"mr\" (and \"offset\") or \"addr\" and \"lkey\"");
            }
            if (!s.contains("len") || !s["len"].is_number_unsigned())
                fail(std::string(j["call"]) + ": an SGE needs \"len\"");
        }
    }

    void check_work_requests(json& j, unsigned node, const std::string& cn) {
        if (cn == "post_send" || cn == "post_recv" || cn == "post_srq_recv") {
            if (!j.contains("wr") || !j["wr"].is_array() || j["wr"].empty())
                fail(cn + " needs \"wr\": a list of work requests");
            for (const json& w : j["wr"]) {
                if (!w.is_object()) fail(cn + ": a work request must be an object");
                check_fields(w,
                             cn == "post_send"
                                 ? "wr_id opcode flags sg imm remote compare_add swap invalidate_rkey ah "
                                   "remote_qp remote_qpn remote_qkey remote_srq remote_srqn eec"
                                 : "wr_id sg",
                             cn + ": work request");
                if (w.contains("remote")) {
                    if (!w["remote"].is_object()) fail(cn + ": \"remote\" must be an object");
                    check_fields(w["remote"], "mr offset addr rkey", cn + ": remote");
                }
                if (!w.contains("wr_id") || !w["wr_id"].is_number_unsigned())
                    fail(cn + ": a work request needs \"wr_id\"");
                check_sg(j, node, w.value("sg", json::array()));
                if (cn == "post_send") {
                    ibv_wr_opcode op;
                    if (!w.contains("opcode") || !w["opcode"].is_string() ||
                        !trace::wr_opcode_of(w["opcode"], &op))
                        fail("post_send: unknown opcode " + w.value("opcode", json()).dump());
                    unsigned f = 0;
                    std::string why;
                    if (w.contains("flags") && !trace::send_flags_of(w["flags"], &f, &why))
                        fail("post_send: " + why);
                    if (w.contains("ah")) {
                        unsigned n = 0;
                        std::string name;
                        if (!w["ah"].is_string() || !split_ref(w["ah"], node, &n, &name) || n != node ||
                            defined[n].count(name) == 0 || defined[n][name] != "ah")
                            fail("post_send: address handle " + w["ah"].dump() + " of node " +
                                 std::to_string(node) + " is not created before this line");
                    }
                    if (w.contains("remote") && w["remote"].contains("mr")) {
                        unsigned n = 0;
                        std::string name;
                        if (!w["remote"]["mr"].is_string() ||
                            !split_ref(w["remote"]["mr"], node, &n, &name) || n >= t.nodes ||
                            defined[n].count(name) == 0 || defined[n][name] != "mr")
                            fail("post_send: remote MR " + w["remote"]["mr"].dump() +
                                 " is not created before this line");
                    }
                    if (w.contains("remote_qp")) check_remote(w["remote_qp"], node, "qp", "remote QP");
                    check_rd_work_request(j, w, node);
                    if (w.contains("remote_srq")) check_remote(w["remote_srq"], node, "srq", "remote SRQ");
                }
            }
        }
    }

    /// Reliable datagram: a WR of an RD QP goes through an EE context of its node ("eec"), to
    /// the QP behind the EE context's peer; no other WR names one, and no RD WR an address handle.
    void check_rd_work_request(const json& j, const json& w, unsigned node) {
        const auto qt = qp_type[node].find(j["qp"].get<std::string>());
        const bool rd = qt != qp_type[node].end() && qt->second == "RD";
        if (!rd) {
            if (w.contains("eec"))
                fail("post_send: \"eec\" on a work request of " + j["qp"].dump() +
                     ", which is not an RD QP (only reliable datagram WRs go through an EE context)");
            return;
        }
        if (!w.contains("eec"))
            fail("post_send: a work request of RD QP " + j["qp"].dump() + " needs \"eec\"");
        unsigned n = 0;
        std::string name;
        if (!w["eec"].is_string() || !split_ref(w["eec"], node, &n, &name) || n != node ||
            defined[n].count(name) == 0 || defined[n][name] != "eec")
            fail("post_send: EE context " + w["eec"].dump() + " of node " + std::to_string(node) +
                 " is not created before this line");
        if (w.contains("ah")) fail("post_send: an RD work request goes through its \"eec\": no \"ah\"");
        if (w.contains("remote_srq") || w.contains("remote_srqn"))
            fail("post_send: an RD work request has no XRC SRQ: no \"remote_srq\"");
    }

    /// A work request's reference to an object of any node (a remote QP, an XRC SRQ).
    void check_remote(const json& ref, unsigned node, const char* kind, const std::string& what) {
        unsigned n = 0;
        std::string name;
        if (!ref.is_string() || !split_ref(ref, node, &n, &name) || n >= t.nodes ||
            defined[n].count(name) == 0 || defined[n][name] != kind)
            fail("post_send: " + what + " " + ref.dump() + " is not created before this line");
    }

    /// The alternate path keys and path_mig_state of modify_qp and modify_eec (`call`).
    void check_alt_path(const json& a, const std::string& call) {
        ibv_mig_state mig;
        if (a.contains("path_mig_state") &&
            (!a["path_mig_state"].is_string() || !trace::mig_state_of(a["path_mig_state"], &mig)))
            fail(call + ": unknown path_mig_state " + a["path_mig_state"].dump() +
                 " (MIGRATED, REARM or ARMED)");
        for (const char* k : {"alt_sl", "alt_src_path_bits", "alt_port_num", "alt_pkey_index", "alt_timeout"})
            if (a.contains(k) && !a.contains("alt_dlid"))
                fail(call + ": " + k + " without alt_dlid (an alternate path needs its DLID)");
    }

    void check_modify_qp(json& j, unsigned node) {
        if (!j.contains("attr") || !j["attr"].is_object()) fail("modify_qp needs \"attr\"");
        const json& a = j["attr"];
        ibv_qp_state st;
        if (a.contains("qp_state") && (!a["qp_state"].is_string() || !trace::qp_state_of(a["qp_state"], &st)))
            fail("modify_qp: unknown qp_state " + a["qp_state"].dump());
        check_alt_path(a, "modify_qp");
        if (a.contains("dest_qp")) {
            unsigned n = 0;
            std::string name;
            if (!a["dest_qp"].is_string() || !split_ref(a["dest_qp"], node, &n, &name) || n >= t.nodes ||
                defined[n].count(name) == 0 || defined[n][name] != "qp")
                fail("modify_qp: dest_qp " + a["dest_qp"].dump() + " is not created before this line");
        }
        static const std::set<std::string> known = {
            "qp_state",     "pkey_index",     "port_num",           "qkey",           "qp_access_flags",
            "path_mtu",     "dest_qp",        "dest_qp_num",        "dlid",           "dest_node",
            "sl",           "src_path_bits",  "alt_dlid",           "alt_sl",         "alt_src_path_bits",
            "alt_port_num", "alt_pkey_index", "alt_timeout",        "path_mig_state", "rq_psn",
            "sq_psn",       "max_rd_atomic",  "max_dest_rd_atomic", "min_rnr_timer",  "timeout",
            "retry_cnt",    "rnr_retry"};
        for (auto& kv : a.items())
            if (!known.count(kv.key())) fail("modify_qp: unknown attribute \"" + kv.key() + "\"");
    }

    void check_modify_eec(json& j, unsigned node) {
        if (!j.contains("attr") || !j["attr"].is_object()) fail("modify_eec needs \"attr\"");
        const json& a = j["attr"];
        static const std::set<std::string> known = {"eec_state",
                                                    "pkey_index",
                                                    "port_num",
                                                    "path_mtu",
                                                    "dest_eec",
                                                    "dest_eecn",
                                                    "dlid",
                                                    "dest_node",
                                                    "sl",
                                                    "src_path_bits",
                                                    "rq_psn",
                                                    "sq_psn",
                                                    "max_rd_atomic",
                                                    "max_dest_rd_atomic",
                                                    "min_rnr_timer",
                                                    "timeout",
                                                    "retry_cnt",
                                                    "rnr_retry",
                                                    "alt_dlid",
                                                    "alt_sl",
                                                    "alt_src_path_bits",
                                                    "alt_port_num",
                                                    "alt_pkey_index",
                                                    "alt_timeout",
                                                    "path_mig_state"};
        for (auto& kv : a.items())
            if (!known.count(kv.key())) fail("modify_eec: unknown attribute \"" + kv.key() + "\"");
        check_alt_path(a, "modify_eec");
        ibv_qp_state st;
        if (a.contains("eec_state") &&
            (!a["eec_state"].is_string() || !trace::qp_state_of(a["eec_state"], &st)))
            fail("modify_eec: unknown eec_state " + a["eec_state"].dump() +
                 " (RESET, INIT, RTR, RTS, SQD, SQE or ERR)");
        if (a.contains("dest_eec")) {
            unsigned n = 0;
            std::string name;
            if (!a["dest_eec"].is_string() || !split_ref(a["dest_eec"], node, &n, &name) || n >= t.nodes ||
                defined[n].count(name) == 0 || defined[n][name] != "eec")
                fail("modify_eec: dest_eec " + a["dest_eec"].dump() + " is not created before this line");
        }
        if (a.contains("dest_eec") && a.contains("dest_eecn"))
            fail("modify_eec: \"dest_eec\" or \"dest_eecn\", not both");
        if (a.contains("dlid") && a.contains("dest_node"))
            fail("modify_eec: \"dlid\" or \"dest_node\", not both");
        for (const char* k : {"sl", "src_path_bits"})
            if (a.contains(k) && !a.contains("dlid") && !a.contains("dest_node"))
                fail(std::string("modify_eec: ") + k + " without dlid or dest_node (they are the path's)");
        if (a.contains("dest_node") &&
            (!a["dest_node"].is_number_unsigned() || a["dest_node"].get<unsigned>() >= t.nodes))
            fail("modify_eec: \"dest_node\" must be a node number below " + std::to_string(t.nodes));
    }

    void check_query_eec(json& j) {
        ibv_qp_state st;
        if (j.contains("eec_state") &&
            (!j["eec_state"].is_string() || !trace::qp_state_of(j["eec_state"], &st)))
            fail("query_eec: unknown eec_state " + j["eec_state"].dump());
    }

    void check_create_qp(json& j) {
        ibv_qp_type ty;
        if (!j.contains("type") || !j["type"].is_string() || !trace::qp_type_of(j["type"], &ty))
            fail("create_qp: \"type\" must be RC, UC, UD, RD, XRC_SEND or XRC_RECV");
        // A reliable datagram QP (IBA 10.2.8) is in its domain, and has no SRQ.
        if (ty == IBV_QPT_RD && !j.contains("rdd")) fail("create_qp: an RD QP needs \"rdd\"");
        if (ty != IBV_QPT_RD && j.contains("rdd")) fail("create_qp: only an RD QP has an \"rdd\"");
        if (ty == IBV_QPT_RD && j.contains("srq")) fail("create_qp: an RD QP has no SRQ: no \"srq\"");
        // An XRC target (IBA 10.2.10) has its domain only; an initiator no receive side (its
        // receive CQ optional, as in libibverbs); the others a PD and both CQs.
        const bool tgt = ty == IBV_QPT_XRC_RECV, ini = ty == IBV_QPT_XRC_SEND;
        if (tgt) {
            for (const char* f : {"pd", "send_cq", "recv_cq", "srq"})
                if (j.contains(f))
                    fail(std::string("create_qp: an XRC_RECV QP has its XRC domain only: no \"") + f + "\"");
            if (!j.contains("xrcd")) fail("create_qp: an XRC_RECV QP needs \"xrcd\"");
            return check_cap(j);
        }
        if (j.contains("xrcd")) fail("create_qp: only an XRC_RECV QP has an \"xrcd\"");
        for (const char* f : {"pd", "send_cq", "recv_cq"})
            if (!j.contains(f) && !(ini && std::string(f) == "recv_cq"))
                fail(std::string("create_qp needs \"") + f + "\"");
        if (ini && j.contains("srq")) fail("create_qp: an XRC_SEND QP has no receive side: no \"srq\"");
        check_cap(j);
    }

    void check_cap(json& j) {
        if (j.contains("cap")) {
            if (!j["cap"].is_object()) fail("create_qp: \"cap\" must be an object");
            check_fields(j["cap"], "max_send_wr max_recv_wr max_send_sge max_recv_sge max_inline_data",
                         "create_qp: cap");
        }
    }

    void check_create_srq(json& j) {
        ibv_srq_type ty = IBV_SRQT_BASIC;
        if (j.contains("type") && (!j["type"].is_string() || !trace::srq_type_of(j["type"], &ty)))
            fail("create_srq: \"type\" must be BASIC or XRC, got " + j["type"].dump());
        for (const char* f : {"xrcd", "cq"}) {
            if (ty == IBV_SRQT_XRC && !j.contains(f))
                fail(std::string("create_srq: an XRC SRQ needs \"") + f + "\"");
            if (ty != IBV_SRQT_XRC && j.contains(f))
                fail(std::string("create_srq: only an XRC SRQ (\"type\": \"XRC\") has \"") + f + "\"");
        }
    }

    /// The object a creating call names ("ret").
    void define(json& j, unsigned node, const call_spec* c, const std::string& cn) {
        std::string name;
        if (j.contains("ret") && j["ret"].is_string())
            name = j["ret"];
        else if (j.contains("ret") && !j["ret"].is_null())
            fail(cn + ": \"ret\" must name the new " + c->creates);
        else if (!j.contains("ret"))
            fail(cn + " needs \"ret\": the name of the new " + c->creates);
        if (!name.empty()) {
            if (name.find('/') != std::string::npos) fail(cn + ": a name may not contain '/'");
            if (defined[node].count(name))
                fail(cn + ": node " + std::to_string(node) + " already has an object named \"" + name + "\"");
            defined[node][name] = c->creates;
        }
    }

    // Field types: numbers where numbers go, hex strings of whole bytes (so nothing can fail
    // half-way through the run for a malformed argument).
    void check_types(const std::string& cn, const json& o) {
        static const std::set<std::string> numeric = {"len",
                                                      "offset",
                                                      "align",
                                                      "cqe",
                                                      "max_wr",
                                                      "max_sge",
                                                      "srq_limit",
                                                      "wr_id",
                                                      "imm",
                                                      "compare_add",
                                                      "swap",
                                                      "value",
                                                      "timeout_ns",
                                                      "ns",
                                                      "count",
                                                      "byte",
                                                      "seed",
                                                      "key",
                                                      "dlid",
                                                      "dest_node",
                                                      "sl",
                                                      "src_path_bits",
                                                      "t_ps",
                                                      "addr",
                                                      "lkey",
                                                      "rkey",
                                                      "remote_qpn",
                                                      "remote_srqn",
                                                      "remote_qkey",
                                                      "eecn",
                                                      "dest_eecn",
                                                      "invalidate_rkey",
                                                      "pkey_index",
                                                      "port_num",
                                                      "qkey",
                                                      "path_mtu",
                                                      "dest_qp_num",
                                                      "rq_psn",
                                                      "sq_psn",
                                                      "max_rd_atomic",
                                                      "max_dest_rd_atomic",
                                                      "min_rnr_timer",
                                                      "timeout",
                                                      "retry_cnt",
                                                      "rnr_retry",
                                                      "max_send_wr",
                                                      "max_recv_wr",
                                                      "max_send_sge",
                                                      "max_recv_sge",
                                                      "max_inline_data",
                                                      "lid",
                                                      "hop_limit"};
        if (o.is_array()) {
            for (const json& e : o) check_types(cn, e);
            return;
        }
        if (!o.is_object()) return;
        for (auto& kv : o.items()) {
            if (numeric.count(kv.key()) && !kv.value().is_number_unsigned() &&
                !(kv.key() == "value" && kv.value().is_number_integer()))
                fail(cn + ": \"" + kv.key() + "\" must be a non-negative integer, got " + kv.value().dump());
            if (kv.key() == "hex") {
                std::vector<uint8_t> bytes;
                if (!kv.value().is_string() || !trace::unhex(kv.value().get<std::string>(), &bytes))
                    fail(cn + ": \"hex\" must be a string of hex digit pairs, got " + kv.value().dump());
            }
            if (kv.key() == "gid" || kv.key() == "dgid") {
                ibv_gid g{};
                if (!kv.value().is_string() || !trace::gid_of(kv.value().get<std::string>(), &g))
                    fail(cn + ": \"" + kv.key() + "\" must be a GID of 32 hex digits, got " +
                         kv.value().dump());
            }
            if (kv.key() != "wc" && kv.key() != "ret") check_types(cn, kv.value());
        }
    }

    // Buffers: an alignment, size or offset the run would trip over is refused here.
    void check_buffer(json& j, unsigned node, const std::string& cn) {
        if (cn == "alloc") {
            const uint64_t len = j.value("len", uint64_t(4096)), align = j.value("align", uint64_t(4096));
            if (align == 0 || (align & (align - 1)) || align > max_alloc_align)
                fail("alloc: \"align\" must be a power of two up to " + std::to_string(max_alloc_align) +
                     ", got " + std::to_string(align));
            // What the address space backs at most: the pages of len, plus the alignment gap.
            const uint64_t limit = host_software::phys_bytes;
            const uint64_t pages = len / fw::PAGE_BYTES + 2 + align / fw::PAGE_BYTES;
            if (len > limit || (allocated[node] += pages * fw::PAGE_BYTES) > limit)
                fail("alloc: " + std::to_string(len) + " bytes: node " + std::to_string(node) +
                     "'s buffers would pass the host memory its applications have (" + std::to_string(limit) +
                     " bytes)");
            if (j["ret"].is_string()) buf_len[node][j["ret"].get<std::string>()] = len;
        }
        if (cn == "fill" || cn == "wait_byte") {
            unsigned n = node;
            std::string name;
            split_ref(j["buf"], node, &n, &name);  // checked above
            const auto it = buf_len[n].find(name);
            const uint64_t size = it == buf_len[n].end() ? 0 : it->second;
            const uint64_t off = j.value("offset", uint64_t(0));
            uint64_t len = 1;  // wait_byte reads one byte
            if (cn == "fill")
                len = j.contains("hex") ? j["hex"].get<std::string>().size() / 2
                                        : j.value("len", size > off ? size - off : 0);
            if (off > size || len > size - off)
                fail(cn + ": bytes " + std::to_string(off) + ".." + std::to_string(off + len) +
                     " pass the end of " + j["buf"].dump() + " (" + std::to_string(size) + " bytes)");
            if (cn == "wait_byte" && (j.value("value", 0) < 0 || j.value("value", 0) > 255))
                fail("wait_byte: \"value\" must be 0..255");
        }
    }
};

}  // namespace

const std::vector<call_spec>& calls() {
    static const std::vector<call_spec> c = {
        {"alloc", "buf", {}, {}, "len align"},
        {"fill", nullptr, {{"buf", "buf"}}, {}, "offset len seed byte key hex"},
        {"wait_byte", nullptr, {{"buf", "buf"}}, {}, "offset value timeout_ns"},
        {"sleep", nullptr, {}, {}, "ns"},
        {"alloc_pd", "pd", {}, {}, ""},
        {"reg_mr", "mr", {{"pd", "pd"}, {"buf", "buf"}}, {}, "offset addr len access lkey rkey"},
        {"dereg_mr", nullptr, {{"mr", "mr"}}, {}, ""},
        {"create_cq", "cq", {}, {}, "cqe"},
        {"open_xrcd", "xrcd", {}, {}, ""},
        {"close_xrcd", nullptr, {{"xrcd", "xrcd"}}, {}, ""},
        {"create_srq",
         "srq",
         {{"pd", "pd"}},
         {{"xrcd", "xrcd"}, {"cq", "cq"}},
         "max_wr max_sge type srq_num"},
        {"alloc_rdd", "rdd", {}, {}, ""},
        {"dealloc_rdd", nullptr, {{"rdd", "rdd"}}, {}, ""},
        {"create_eec", "eec", {{"rdd", "rdd"}}, {}, "eecn"},
        {"modify_eec", nullptr, {{"eec", "eec"}}, {}, "attr"},
        {"query_eec", nullptr, {{"eec", "eec"}}, {}, "eec_state sq_psn rq_psn"},
        {"destroy_eec", nullptr, {{"eec", "eec"}}, {}, ""},
        {"modify_srq", nullptr, {{"srq", "srq"}}, {}, "srq_limit"},
        {"destroy_srq", nullptr, {{"srq", "srq"}}, {}, ""},
        // Which of pd, send_cq, recv_cq, xrcd and rdd a QP needs depends on its type (check_create_qp).
        {"create_qp",
         "qp",
         {},
         {{"pd", "pd"},
          {"send_cq", "cq"},
          {"recv_cq", "cq"},
          {"srq", "srq"},
          {"xrcd", "xrcd"},
          {"rdd", "rdd"}},
         "type cap sq_sig_all qp_num"},
        {"modify_qp", nullptr, {{"qp", "qp"}}, {}, "attr"},
        {"destroy_qp", nullptr, {{"qp", "qp"}}, {}, ""},
        {"create_ah", "ah", {{"pd", "pd"}}, {}, "dlid dest_node sl dgid hop_limit"},
        {"attach_mcast", nullptr, {{"qp", "qp"}}, {}, "gid lid"},
        {"post_send", nullptr, {{"qp", "qp"}}, {}, "wr"},
        {"post_recv", nullptr, {{"qp", "qp"}}, {}, "wr"},
        {"post_srq_recv", nullptr, {{"srq", "srq"}}, {}, "wr"},
        {"poll_cq", nullptr, {{"cq", "cq"}}, {}, "count timeout_ns wc"},
    };
    return c;
}

const call_spec* spec_of(const std::string& name) {
    for (const call_spec& c : calls())
        if (name == c.name) return &c;
    return nullptr;
}

/// "N/name" -> (N, name); a plain name is the node's own.
bool split_ref(const std::string& ref, unsigned own, unsigned* node, std::string* name) {
    const size_t slash = ref.find('/');
    if (slash == std::string::npos) {
        *node = own;
        *name = ref;
        return true;
    }
    try {
        size_t used = 0;
        const unsigned long n = std::stoul(ref.substr(0, slash), &used);
        if (used != slash) return false;
        *node = unsigned(n);
    } catch (...) {
        return false;
    }
    *name = ref.substr(slash + 1);
    return true;
}

trace_file load(const std::string& path) { return loader(path).read(); }

}  // namespace hcasim::replay
