#include "testbench/replay.h"

#include <systemc>

#include <boost/program_options.hpp>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/core/text_file.h"
#include "model/core/timeline.h"
#include "model/system/fabric.h"
#include "testbench/host_software.h"
#include "testbench/verbs_trace.h"
#include "testbench/workloads.h"

namespace hcasim {

using namespace sc_core;
using namespace verbs;
using trace::json;

namespace {

/// Longest line of a trace (the end record holds every buffer's digest and every counter).
constexpr size_t max_trace_line_bytes = size_t(16) << 20;
/// Largest "align" of an alloc.
constexpr uint64_t max_alloc_align = uint64_t(1) << 30;

/// A bad trace: "file:line: why".
struct trace_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct step {
    size_t line;
    json j;
};

/// The calls a trace may hold, with the object each one names ("ret") and the fields that
/// must name objects created before it, per kind.
struct call_spec {
    const char* name;
    const char* creates;                                    // kind of object named by "ret", or nullptr
    std::vector<std::pair<const char*, const char*>> refs;  // field -> kind (required)
    std::vector<std::pair<const char*, const char*>> opt_refs;
    const char* fields;  // its other arguments and recorded outcomes, space-separated
};

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
        {"create_srq", "srq", {{"pd", "pd"}}, {}, "max_wr max_sge"},
        {"modify_srq", nullptr, {{"srq", "srq"}}, {}, "srq_limit"},
        {"create_qp",
         "qp",
         {{"pd", "pd"}, {"send_cq", "cq"}, {"recv_cq", "cq"}},
         {{"srq", "srq"}},
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

/// Fails on the first field of object `o` not in `known` (space-separated): traces are checked
/// before anything runs, and a misspelt argument would otherwise be ignored.
template <typename Fail>
void check_fields(const json& o, const char* known, const std::string& what, Fail fail) {
    for (auto& kv : o.items())
        if (!listed(known, kv.key()))
            fail(what + ": unknown field \"" + kv.key() + "\"" +
                 (*known ? " (expected one of: " + std::string(known) + ")" : std::string()));
}

std::string call_list() {
    std::string s;
    for (const call_spec& c : calls()) s += (s.empty() ? "" : "|") + std::string(c.name);
    return s;
}

/// The parsed trace: header and steps, validated.
struct trace_file {
    std::string path;
    json header;
    std::vector<step> steps;            // calls, in file order
    std::vector<step> events;           // recorded asynchronous events
    json end;                           // recorded end record ("" if none)
    std::vector<std::string> comments;  // "#" lines (kept by --update, after the header)
    unsigned nodes = 2;
};

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

trace_file load(const std::string& path) {
    trace_file t;
    t.path = path;
    std::string text;
    size_t line = 0;
    // Per node: names of the objects created so far, by kind; lengths of the buffers.
    std::vector<std::map<std::string, std::string>> defined;
    std::vector<std::map<std::string, uint64_t>> buf_len;
    std::vector<uint64_t> allocated;  // per node: bytes of every alloc, page-rounded
    size_t end_line = 0;
    auto fail = [&](const std::string& why) {
        throw trace_error(path + ":" + std::to_string(line) + ": " + why);
    };
    // Directories, unreadable files, NUL bytes and endless lines are refused like bad records.
    auto next_line = [&](text_file& in) {
        try {
            const bool more = in.next(text);
            line = in.line_number();
            return more;
        } catch (const config_error& e) {
            throw trace_error(e.what());
        }
    };
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
            if (!j.contains("hcasim_trace"))
                fail("not an hcasim trace: the first record must be the header with \"hcasim_trace\"");
            check_fields(j, "hcasim_trace hcasim_version workload seed nodes config", "header", fail);
            if (!j["hcasim_trace"].is_number_integer() ||
                j["hcasim_trace"].get<int>() != trace::FORMAT_VERSION)
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
            allocated.resize(t.nodes);
            continue;
        }
        if (j.contains("end")) {
            check_fields(j, "t_ps end", "end record", fail);
            t.end = j["end"];
            end_line = line;
            continue;
        }
        if (!j.contains("node") || !j["node"].is_number_unsigned() || j["node"].get<unsigned>() >= t.nodes)
            fail("\"node\" must be a node number below " + std::to_string(t.nodes));
        const unsigned node = j["node"];
        if (j.contains("event")) {
            check_fields(j, "t_ps node event qp cq srq port", "event", fail);
            t.events.push_back({line, j});
            continue;
        }
        if (!j.contains("call") || !j["call"].is_string())
            fail("a record needs \"call\" (or \"event\", \"end\")");
        const call_spec* c = spec_of(j["call"]);
        if (!c) fail("unknown call " + j["call"].dump() + " (expected " + call_list() + ")");
        for (auto& kv : j.items())
            if (!listed("t_ps node call ret errno t_done_ps", kv.key()) && !listed(c->fields, kv.key()) &&
                std::find_if(c->refs.begin(), c->refs.end(),
                             [&](const auto& r) { return kv.key() == r.first; }) == c->refs.end() &&
                std::find_if(c->opt_refs.begin(), c->opt_refs.end(),
                             [&](const auto& r) { return kv.key() == r.first; }) == c->opt_refs.end())
                fail(std::string(j["call"]) + ": unknown field \"" + kv.key() + "\"");
        auto check_ref = [&](const char* field, const char* kind) {
            if (!j[field].is_string())
                fail(std::string(j["call"]) + ": \"" + field + "\" must name a " + kind);
            unsigned n = 0;
            std::string name;
            if (!split_ref(j[field], node, &n, &name) || n >= t.nodes)
                fail(std::string(j["call"]) + ": bad reference " + j[field].dump());
            auto it = defined[n].find(name);
            if (it == defined[n].end() || it->second != kind)
                fail(std::string(j["call"]) + ": " + kind + " " + j[field].dump() + " of node " +
                     std::to_string(n) + " is not created before this line");
        };
        for (const auto& r : c->refs) {
            if (!j.contains(r.first)) {
                if (std::string(r.first) == "buf" && j["call"] == "reg_mr" && j.contains("addr"))
                    continue;  // a raw address
                fail(std::string(j["call"]) + " needs \"" + r.first + "\"");
            }
            check_ref(r.first, r.second);
        }
        for (const auto& r : c->opt_refs)
            if (j.contains(r.first)) check_ref(r.first, r.second);
        // References inside work requests and attributes.
        auto check_sg = [&](const json& sg) {
            if (!sg.is_array()) fail(std::string(j["call"]) + ": \"sg\" must be a list");
            for (const json& s : sg) {
                if (!s.is_object()) fail(std::string(j["call"]) + ": an SGE must be an object");
                check_fields(s, "mr offset len addr lkey", std::string(j["call"]) + ": SGE", fail);
                if (s.contains("mr")) {
                    unsigned n = 0;
                    std::string name;
                    if (!s["mr"].is_string() || !split_ref(s["mr"], node, &n, &name) || n != node ||
                        defined[n].count(name) == 0 || defined[n][name] != "mr")
                        fail(std::string(j["call"]) + ": SGE MR " + s["mr"].dump() +
                             " is not a region of node " + std::to_string(node) +
                             " created before this line");
                } else if (!s.contains("addr") || !s.contains("lkey")) {
                    fail(std::string(j["call"]) +
                         ": an SGE needs \"mr\" (and \"offset\") or \"addr\" and \"lkey\"");
                }
                if (!s.contains("len") || !s["len"].is_number_unsigned())
                    fail(std::string(j["call"]) + ": an SGE needs \"len\"");
            }
        };
        const std::string cn = j["call"];
        if (cn == "post_send" || cn == "post_recv" || cn == "post_srq_recv") {
            if (!j.contains("wr") || !j["wr"].is_array() || j["wr"].empty())
                fail(cn + " needs \"wr\": a list of work requests");
            for (const json& w : j["wr"]) {
                if (!w.is_object()) fail(cn + ": a work request must be an object");
                check_fields(w,
                             cn == "post_send"
                                 ? "wr_id opcode flags sg imm remote compare_add swap invalidate_rkey ah "
                                   "remote_qp remote_qpn remote_qkey"
                                 : "wr_id sg",
                             cn + ": work request", fail);
                if (w.contains("remote")) {
                    if (!w["remote"].is_object()) fail(cn + ": \"remote\" must be an object");
                    check_fields(w["remote"], "mr offset addr rkey", cn + ": remote", fail);
                }
                if (!w.contains("wr_id") || !w["wr_id"].is_number_unsigned())
                    fail(cn + ": a work request needs \"wr_id\"");
                check_sg(w.value("sg", json::array()));
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
                    if (w.contains("remote_qp")) {
                        unsigned n = 0;
                        std::string name;
                        if (!w["remote_qp"].is_string() || !split_ref(w["remote_qp"], node, &n, &name) ||
                            n >= t.nodes || defined[n].count(name) == 0 || defined[n][name] != "qp")
                            fail("post_send: remote QP " + w["remote_qp"].dump() +
                                 " is not created before this line");
                    }
                }
            }
        }
        if (cn == "attach_mcast" && (!j.contains("gid") || !j.contains("lid")))
            fail("attach_mcast needs \"gid\" and \"lid\"");
        if (cn == "poll_cq" && !j.contains("wc") && !j.contains("count"))
            fail("poll_cq needs \"count\" (completions to wait for) or the recorded \"wc\"");
        if (cn == "modify_qp") {
            if (!j.contains("attr") || !j["attr"].is_object()) fail("modify_qp needs \"attr\"");
            const json& a = j["attr"];
            ibv_qp_state st;
            if (a.contains("qp_state") &&
                (!a["qp_state"].is_string() || !trace::qp_state_of(a["qp_state"], &st)))
                fail("modify_qp: unknown qp_state " + a["qp_state"].dump());
            if (a.contains("dest_qp")) {
                unsigned n = 0;
                std::string name;
                if (!a["dest_qp"].is_string() || !split_ref(a["dest_qp"], node, &n, &name) || n >= t.nodes ||
                    defined[n].count(name) == 0 || defined[n][name] != "qp")
                    fail("modify_qp: dest_qp " + a["dest_qp"].dump() + " is not created before this line");
            }
            static const std::set<std::string> known = {"qp_state",
                                                        "pkey_index",
                                                        "port_num",
                                                        "qkey",
                                                        "qp_access_flags",
                                                        "path_mtu",
                                                        "dest_qp",
                                                        "dest_qp_num",
                                                        "dlid",
                                                        "dest_node",
                                                        "sl",
                                                        "rq_psn",
                                                        "sq_psn",
                                                        "max_rd_atomic",
                                                        "max_dest_rd_atomic",
                                                        "min_rnr_timer",
                                                        "timeout",
                                                        "retry_cnt",
                                                        "rnr_retry"};
            for (auto& kv : a.items())
                if (!known.count(kv.key())) fail("modify_qp: unknown attribute \"" + kv.key() + "\"");
        }
        if (cn == "create_qp") {
            ibv_qp_type ty;
            if (!j.contains("type") || !j["type"].is_string() || !trace::qp_type_of(j["type"], &ty))
                fail("create_qp: \"type\" must be RC, UC or UD");
            if (j.contains("cap")) {
                if (!j["cap"].is_object()) fail("create_qp: \"cap\" must be an object");
                check_fields(j["cap"], "max_send_wr max_recv_wr max_send_sge max_recv_sge max_inline_data",
                             "create_qp: cap", fail);
            }
        }
        if (c->creates) {
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
                    fail(cn + ": node " + std::to_string(node) + " already has an object named \"" + name +
                         "\"");
                defined[node][name] = c->creates;
            }
        }
        // Field types: numbers where numbers go, hex strings of whole bytes (so nothing can fail
        // half-way through the run for a malformed argument).
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
                                                      "t_ps",
                                                      "addr",
                                                      "lkey",
                                                      "rkey",
                                                      "remote_qpn",
                                                      "remote_qkey",
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
        std::function<void(const json&)> check_types = [&](const json& o) {
            if (o.is_array()) {
                for (const json& e : o) check_types(e);
                return;
            }
            if (!o.is_object()) return;
            for (auto& kv : o.items()) {
                if (numeric.count(kv.key()) && !kv.value().is_number_unsigned() &&
                    !(kv.key() == "value" && kv.value().is_number_integer()))
                    fail(cn + ": \"" + kv.key() + "\" must be a non-negative integer, got " +
                         kv.value().dump());
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
                if (kv.key() != "wc" && kv.key() != "ret") check_types(kv.value());
            }
        };
        check_types(j);
        // Buffers: an alignment, size or offset the run would trip over is refused here.
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
        if (j.value("byte", 0u) > 255) fail(cn + ": \"byte\" must be 0..255");
        t.steps.push_back({line, j});
    }
    if (t.header.is_null()) throw trace_error(path + ": empty trace (no header)");
    // A recorder's trace (its header names the hcasim version) ends with the end record: without
    // it the trace was cut short, and its memory digests would go unchecked.
    if (t.header.contains("hcasim_version") && t.end.is_null())
        fail("no end record: the trace was cut short (a recorded trace ends with {\"end\": ...})");
    return t;
}

/// One difference between the recording and the replay.
struct divergence {
    std::string kind;  // return value, completion, event, memory, time
    std::string text;
};

/// The replaying application: one process issuing the trace's calls in order.
class replayer : public sc_module {
public:
    SC_HAS_PROCESS(replayer);
    replayer(sc_module_name n, machine& m, const trace_file& t, trace::recorder& rec, bool recorded_timing,
             double tolerance)
        : sc_module(n), m_(m), t_(t), rec_(rec), recorded_(recorded_timing), tolerance_(tolerance) {
        fw::driver_options opts;
        for (unsigned i = 0; i < t.nodes; ++i) sw_.push_back(std::make_unique<host_software>(m.at(i), opts));
        objs_.resize(t.nodes);
        events_.resize(t.nodes);
        SC_THREAD(run);
    }

    std::vector<divergence> diffs;
    size_t calls_run = 0, completions = 0, compared = 0;
    bool finished = false;
    std::string failure;  // could not go on (e.g. a device would not open)

    /// Recorded events vs. the replay's, and memory digests; after the run.
    void compare_end(const json& actual_memory) {
        std::vector<std::vector<const step*>> want(t_.nodes);
        for (const step& e : t_.events) want[e.j["node"].get<unsigned>()].push_back(&e);
        for (unsigned n = 0; n < t_.nodes; ++n) {
            const auto& got = events_[n];
            const size_t k = std::min(got.size(), want[n].size());
            for (size_t i = 0; i < k; ++i) {
                json w = want[n][i]->j, g = got[i];
                w.erase("t_ps");
                g.erase("t_ps");
                if (w != g)
                    diff("event", want[n][i]->line,
                         "asynchronous event " + std::to_string(i + 1) + " of node " + std::to_string(n) +
                             ": expected " + w.dump() + ", got " + g.dump());
            }
            if (got.size() != want[n].size() && (compare_events_ || !want[n].empty()))
                diff("event", want[n].empty() ? 0 : want[n].back()->line,
                     "node " + std::to_string(n) + ": " + std::to_string(want[n].size()) +
                         " asynchronous events recorded, " + std::to_string(got.size()) + " in the replay" +
                         (got.size() > want[n].size() ? " (first extra: " + got[want[n].size()].dump() + ")"
                                                      : ""));
        }
        if (t_.end.is_object() && t_.end.contains("memory"))
            for (auto& kv : t_.end["memory"].items()) {
                const json a = actual_memory.value(kv.key(), json());
                if (a != kv.value())
                    diff("memory", 0,
                         "memory of " + kv.key() + " at the end: expected " + kv.value().dump() + ", got " +
                             (a.is_null() ? std::string("no such buffer") : a.dump()));
            }
    }
    bool compare_events_ = false;  // the trace has outcomes: an event it lacks is a divergence

private:
    struct node_objs {
        std::map<std::string, ibv_pd*> pd;
        std::map<std::string, ibv_mr*> mr;
        std::map<std::string, ibv_cq*> cq;
        std::map<std::string, ibv_qp*> qp;
        std::map<std::string, ibv_srq*> srq;
        std::map<std::string, ibv_ah*> ah;
        std::map<std::string, std::pair<uint64_t, uint64_t>> buf;
    };

    void diff(const std::string& kind, size_t line, const std::string& text) {
        diffs.push_back({kind, (line ? t_.path + ":" + std::to_string(line) + ": " : t_.path + ": ") + text});
    }

    template <class T>
    T* find(std::map<std::string, T*>& m, const std::string& name) {
        auto it = m.find(name);
        return it == m.end() ? nullptr : it->second;
    }
    node_objs& objs_of(const std::string& ref, unsigned own, std::string* name) {
        unsigned n = own;
        split_ref(ref, own, &n, name);
        return objs_.at(n);
    }

    uint64_t buf_addr(unsigned node, const json& j) {
        if (j.contains("buf")) {
            auto& b = objs_[node].buf[j["buf"].get<std::string>()];
            return b.first + j.value("offset", uint64_t(0));
        }
        return j.value("addr", uint64_t(0));
    }

    std::vector<ibv_sge> sges(unsigned node, const json& sg) {
        std::vector<ibv_sge> out;
        for (const json& s : sg) {
            ibv_sge e{};
            e.length = s["len"].get<uint32_t>();
            if (s.contains("mr")) {
                std::string name;
                ibv_mr* mr = find(objs_of(s["mr"], node, &name).mr, name);
                e.addr = (mr ? mr->addr : 0) + s.value("offset", uint64_t(0));
                e.lkey = mr ? mr->lkey : 0;
            } else {
                e.addr = s["addr"];
                e.lkey = s["lkey"];
            }
            out.push_back(e);
        }
        return out;
    }

    uint32_t qp_num_of(const std::string& ref, unsigned own) {
        std::string name;
        ibv_qp* q = find(objs_of(ref, own, &name).qp, name);
        return q ? q->qp_num : 0;
    }

    uint16_t lid_of(unsigned node) { return m_.at(node).lid(); }

    /// Compares the recorded outcome field `key` of the step with the replay's.
    void expect(const step& s, const char* key, const json& actual) {
        if (!s.j.contains(key)) return;
        ++compared;
        if (s.j[key] != actual)
            diff("return value", s.line,
                 std::string(s.j["call"]) + " node " + std::to_string(s.j["node"].get<unsigned>()) + ": " +
                     key + " expected " + s.j[key].dump() + ", got " + actual.dump());
    }

    void exec(const step& s) {
        try {
            exec_checked(s);
        } catch (const std::exception& e) {  // a value the checks let through and the verbs choke on
            diff("run", s.line, std::string("cannot issue this call: ") + e.what());
        }
    }

    /// True if node `node` holds a live object `name` of `kind` (a creation may fail in the
    /// replay that succeeded in the recording).
    bool live(unsigned node, const std::string& kind, const std::string& name) {
        node_objs& o = objs_.at(node);
        if (kind == "pd") return find(o.pd, name) != nullptr;
        if (kind == "mr") return find(o.mr, name) != nullptr;
        if (kind == "cq") return find(o.cq, name) != nullptr;
        if (kind == "qp") return find(o.qp, name) != nullptr;
        if (kind == "srq") return find(o.srq, name) != nullptr;
        if (kind == "ah") return find(o.ah, name) != nullptr;
        if (kind == "buf") return o.buf.count(name) > 0;
        return false;
    }

    void exec_checked(const step& s) {
        const json& j = s.j;
        {
            const unsigned node = j["node"];
            const call_spec* c = spec_of(j["call"]);
            std::vector<std::pair<std::string, std::string>> refs;  // kind, name
            for (const auto& r : c->refs)
                if (j.contains(r.first)) refs.emplace_back(r.second, j[r.first].get<std::string>());
            for (const auto& r : c->opt_refs)
                if (j.contains(r.first)) refs.emplace_back(r.second, j[r.first].get<std::string>());
            if (j.contains("wr"))
                for (const json& w : j["wr"])
                    if (w.contains("ah")) refs.emplace_back("ah", w["ah"].get<std::string>());
            for (const auto& r : refs)
                if (!live(node, r.first, r.second)) {
                    diff("return value", s.line,
                         std::string(j["call"]) + " node " + std::to_string(node) + ": its " + r.first +
                             " \"" + r.second +
                             "\" does not exist in the replay (its creation failed or it was destroyed); "
                             "the call is skipped");
                    return;
                }
        }
        const sc_time issued = sc_time_stamp();
        const unsigned node = j["node"];
        const std::string call = j["call"];
        host_software& sw = *sw_[node];
        node_objs& o = objs_[node];
        ibv_context* ctx = ctx_[node];
        json out;  // the arguments as given, the outcome as found
        for (auto& kv : j.items())
            if (kv.key() != "t_ps" && kv.key() != "node" && kv.key() != "call" && kv.key() != "wc" &&
                kv.key() != "ret" && kv.key() != "addr_out" && kv.key() != "qp_num" && kv.key() != "lkey" &&
                kv.key() != "rkey" && kv.key() != "errno")
                out[kv.key()] = kv.value();
        auto created = [&](const void* obj, const char* kind) -> json {
            const std::string name = j["ret"].is_string() ? j["ret"].get<std::string>() : "";
            if (!obj) return json();
            return rec_.add(node, obj, kind, name);
        };
        if (call == "alloc") {
            const uint64_t len = j.value("len", uint64_t(4096)), align = j.value("align", uint64_t(4096));
            const uint64_t va = sw.as.alloc(len, align);
            json r;
            if (va) {
                r = rec_.add_buffer(node, va, len, j["ret"].is_string() ? j["ret"].get<std::string>() : "");
                o.buf[r] = {va, len};
            }
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "fill") {
            const auto& b = o.buf[j["buf"].get<std::string>()];
            const uint64_t off = j.value("offset", uint64_t(0));
            const uint64_t len = j.value("len", b.second > off ? b.second - off : 0);
            const uint64_t va = b.first + off;
            bool mapped;
            if (j.contains("hex")) {
                std::vector<uint8_t> bytes;
                trace::unhex(j["hex"], &bytes);  // checked when the trace was read
                mapped = sw.as.write(va, bytes.data(), bytes.size());
            } else if (j.contains("byte")) {
                mapped = sw.as.fill_byte(va, len, j["byte"].get<uint8_t>());
            } else if (j.contains("key")) {
                std::vector<uint8_t> bytes(len);
                verify::fill(j["key"].get<uint64_t>(), bytes.data(), len);
                mapped = sw.as.write(va, bytes.data(), len);
            } else {
                mapped = sw.as.fill(va, len, uint8_t(j.value("seed", 0u)));
            }
            if (!mapped)
                throw std::runtime_error("the range it fills runs past its buffer into unmapped memory");
        } else if (call == "wait_byte") {
            const uint64_t va = o.buf[j["buf"].get<std::string>()].first + j.value("offset", uint64_t(0));
            const uint8_t v = j.value("value", uint8_t(0));
            uint64_t pa = 0;
            if (!sw.as.translate(va, &pa)) throw std::runtime_error("the byte it waits for is not mapped");
            int r = 0;
            for (;;) {
                uint8_t b = 0;
                (void)sw.as.read(va, &b, 1);  // cannot fail: translated just above
                if (b == v) break;
                if (!m_.at(node).cpu.wait_write(pa, 1, j.value("timeout_ns", uint64_t(10'000'000)))) {
                    r = -1;
                    break;
                }
            }
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "sleep") {
            wait(sc_time(double(j.value("ns", uint64_t(0))), SC_NS));
        } else if (call == "alloc_pd") {
            ibv_pd* pd = ibv_alloc_pd(ctx);
            const json r = created(pd, "pd");
            if (pd) o.pd[r] = pd;
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "reg_mr") {
            unsigned access = 0;
            std::string why;
            if (j.contains("access")) trace::access_flags_of(j["access"], &access, &why);
            const uint64_t va = buf_addr(node, j);
            const uint64_t len =
                j.value("len", j.contains("buf") ? o.buf[j["buf"].get<std::string>()].second : 0);
            ibv_mr* mr = ibv_reg_mr(o.pd[j["pd"].get<std::string>()], va, len, int(access));
            json r;
            if (mr) {
                r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "mr");
                rec_.add_mr(node, mr, r);
                o.mr[r] = mr;
                out["lkey"] = mr->lkey;
                out["rkey"] = mr->rkey;
            } else {
                out["errno"] = errno;
            }
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "dereg_mr") {
            std::string name = j["mr"];
            const int r = ibv_dereg_mr(o.mr[name]);
            if (r == 0) o.mr.erase(name);
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "create_cq") {
            ibv_cq* cq = ibv_create_cq(ctx, j.value("cqe", 64));
            const json r = created(cq, "cq");
            if (cq) o.cq[r] = cq;
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "create_srq") {
            ibv_srq_init_attr a{};
            a.attr.max_wr = j.value("max_wr", 64u);
            a.attr.max_sge = j.value("max_sge", 1u);
            ibv_srq* srq = ibv_create_srq(o.pd[j["pd"].get<std::string>()], &a);
            const json r = created(srq, "srq");
            if (srq) o.srq[r] = srq;
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "modify_srq") {
            ibv_srq_attr a{};
            a.srq_limit = j.value("srq_limit", 0u);
            const int r = ibv_modify_srq(o.srq[j["srq"].get<std::string>()], &a, IBV_SRQ_LIMIT);
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "create_qp") {
            ibv_qp_init_attr a{};
            trace::qp_type_of(j["type"], &a.qp_type);
            a.send_cq = o.cq[j["send_cq"].get<std::string>()];
            a.recv_cq = o.cq[j["recv_cq"].get<std::string>()];
            if (j.contains("srq")) a.srq = o.srq[j["srq"].get<std::string>()];
            const json cap = j.value("cap", json::object());
            a.cap.max_send_wr = cap.value("max_send_wr", 64u);
            a.cap.max_recv_wr = cap.value("max_recv_wr", 64u);
            a.cap.max_send_sge = cap.value("max_send_sge", 1u);
            a.cap.max_recv_sge = cap.value("max_recv_sge", 1u);
            a.cap.max_inline_data = cap.value("max_inline_data", 0u);
            a.sq_sig_all = j.value("sq_sig_all", false) ? 1 : 0;
            ibv_qp* qp = ibv_create_qp(o.pd[j["pd"].get<std::string>()], &a);
            json r;
            if (qp) {
                r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "qp");
                rec_.add_qp(node, qp, r);
                o.qp[r] = qp;
                out["qp_num"] = qp->qp_num;
            } else {
                out["errno"] = errno;
            }
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "modify_qp" || call == "destroy_qp") {
            ibv_qp* qp = o.qp[j["qp"].get<std::string>()];
            int r = 0;
            if (call == "destroy_qp") {
                r = ibv_destroy_qp(qp);
                if (r == 0) o.qp.erase(j["qp"].get<std::string>());
            } else {
                const json& a = j["attr"];
                ibv_qp_attr at{};
                int mask = 0;
                if (a.contains("qp_state")) {
                    trace::qp_state_of(a["qp_state"], &at.qp_state);
                    mask |= IBV_QP_STATE;
                }
                auto num = [&](const char* k, auto& field, int bit) {
                    if (a.contains(k)) {
                        field = a[k].get<std::remove_reference_t<decltype(field)>>();
                        mask |= bit;
                    }
                };
                num("pkey_index", at.pkey_index, IBV_QP_PKEY_INDEX);
                num("port_num", at.port_num, IBV_QP_PORT);
                num("qkey", at.qkey, IBV_QP_QKEY);
                num("rq_psn", at.rq_psn, IBV_QP_RQ_PSN);
                num("sq_psn", at.sq_psn, IBV_QP_SQ_PSN);
                num("max_rd_atomic", at.max_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC);
                num("max_dest_rd_atomic", at.max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC);
                num("min_rnr_timer", at.min_rnr_timer, IBV_QP_MIN_RNR_TIMER);
                num("timeout", at.timeout, IBV_QP_TIMEOUT);
                num("retry_cnt", at.retry_cnt, IBV_QP_RETRY_CNT);
                num("rnr_retry", at.rnr_retry, IBV_QP_RNR_RETRY);
                num("dest_qp_num", at.dest_qp_num, IBV_QP_DEST_QPN);
                if (a.contains("qp_access_flags")) {
                    std::string why;
                    trace::access_flags_of(a["qp_access_flags"], &at.qp_access_flags, &why);
                    mask |= IBV_QP_ACCESS_FLAGS;
                }
                if (a.contains("path_mtu")) {
                    const unsigned mtu = a["path_mtu"];
                    at.path_mtu = ibv_mtu(mtu >= 256 ? __builtin_ctz(mtu) - 7 : 0);
                    mask |= IBV_QP_PATH_MTU;
                }
                if (a.contains("dest_qp")) {
                    at.dest_qp_num = qp_num_of(a["dest_qp"], node);
                    mask |= IBV_QP_DEST_QPN;
                }
                if (a.contains("dlid") || a.contains("dest_node")) {
                    at.ah_attr.dlid = a.contains("dlid") ? a["dlid"].get<uint16_t>()
                                                         : lid_of(a["dest_node"].get<unsigned>());
                    at.ah_attr.sl = a.value("sl", uint8_t(0));
                    at.ah_attr.port_num = 1;
                    mask |= IBV_QP_AV;
                }
                r = ibv_modify_qp(qp, &at, mask);
            }
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "create_ah") {
            ibv_ah_attr a{};
            a.dlid = j.contains("dlid") ? j["dlid"].get<uint16_t>() : lid_of(j.value("dest_node", 0u));
            a.sl = j.value("sl", uint8_t(0));
            a.port_num = 1;
            if (j.contains("dgid")) {  // a global route (multicast needs it)
                a.is_global = 1;
                trace::gid_of(j["dgid"], &a.grh.dgid);
                a.grh.hop_limit = j.value("hop_limit", uint8_t(1));
            }
            ibv_ah* ah = ibv_create_ah(o.pd[j["pd"].get<std::string>()], &a);
            const json r = created(ah, "ah");
            if (ah) o.ah[r] = ah;
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "attach_mcast") {
            ibv_gid g{};
            trace::gid_of(j["gid"], &g);
            const int r = ibv_attach_mcast(o.qp[j["qp"].get<std::string>()], &g, j["lid"].get<uint16_t>());
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "post_send") {
            const json& list = j["wr"];
            std::vector<ibv_send_wr> wrs(list.size());
            std::vector<std::vector<ibv_sge>> sg(list.size());
            for (size_t k = 0; k < list.size(); ++k) {
                const json& w = list[k];
                ibv_send_wr& wr = wrs[k];
                wr.wr_id = w["wr_id"];
                trace::wr_opcode_of(w["opcode"], &wr.opcode);
                std::string why;
                if (w.contains("flags")) trace::send_flags_of(w["flags"], &wr.send_flags, &why);
                sg[k] = sges(node, w.value("sg", json::array()));
                wr.sg_list = sg[k].empty() ? nullptr : sg[k].data();
                wr.num_sge = int(sg[k].size());
                wr.imm_data = w.value("imm", 0u);
                wr.invalidate_rkey = w.value("invalidate_rkey", 0u);
                if (w.contains("remote")) {
                    const json& r = w["remote"];
                    uint64_t addr = r.value("addr", uint64_t(0));
                    uint32_t rkey = r.value("rkey", 0u);
                    if (r.contains("mr")) {
                        std::string name;
                        ibv_mr* mr = find(objs_of(r["mr"], node, &name).mr, name);
                        addr = (mr ? mr->addr : 0) + r.value("offset", uint64_t(0));
                        rkey = mr ? mr->rkey : 0;
                    }
                    wr.wr.rdma.remote_addr = wr.wr.atomic.remote_addr = addr;
                    wr.wr.rdma.rkey = wr.wr.atomic.rkey = rkey;
                }
                wr.wr.atomic.compare_add = w.value("compare_add", uint64_t(0));
                wr.wr.atomic.swap = w.value("swap", uint64_t(0));
                if (w.contains("ah")) {
                    wr.wr.ud.ah = o.ah[w["ah"].get<std::string>()];
                    wr.wr.ud.remote_qpn =
                        w.contains("remote_qp") ? qp_num_of(w["remote_qp"], node) : w.value("remote_qpn", 0u);
                    wr.wr.ud.remote_qkey = w.value("remote_qkey", 0u);
                }
                wr.next = k + 1 < list.size() ? &wrs[k + 1] : nullptr;
                producers_[{node, j["qp"].get<std::string>(), wr.wr_id}] = s.line;
            }
            ibv_send_wr* bad = nullptr;
            const int r = ibv_post_send(o.qp[j["qp"].get<std::string>()], wrs.data(), &bad);
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "post_recv" || call == "post_srq_recv") {
            const json& list = j["wr"];
            std::vector<ibv_recv_wr> wrs(list.size());
            std::vector<std::vector<ibv_sge>> sg(list.size());
            const std::string owner =
                call == "post_recv" ? j["qp"].get<std::string>() : j["srq"].get<std::string>();
            for (size_t k = 0; k < list.size(); ++k) {
                wrs[k].wr_id = list[k]["wr_id"];
                sg[k] = sges(node, list[k].value("sg", json::array()));
                wrs[k].sg_list = sg[k].empty() ? nullptr : sg[k].data();
                wrs[k].num_sge = int(sg[k].size());
                wrs[k].next = k + 1 < list.size() ? &wrs[k + 1] : nullptr;
                producers_[{node, owner, wrs[k].wr_id}] = s.line;
            }
            ibv_recv_wr* bad = nullptr;
            const int r = call == "post_recv" ? ibv_post_recv(o.qp[owner], wrs.data(), &bad)
                                              : ibv_post_srq_recv(o.srq[owner], wrs.data(), &bad);
            expect(s, "ret", r);
            out["ret"] = r;
        } else if (call == "poll_cq") {
            ibv_cq* cq = o.cq[j["cq"].get<std::string>()];
            const size_t want = j.contains("wc") ? j["wc"].size() : j["count"].get<size_t>();
            const uint64_t timeout = j.value("timeout_ns", uint64_t(10'000'000));
            json got = json::array();
            std::vector<ibv_wc> wcs(std::max<size_t>(want, 1));
            while (got.size() < want) {
                const int n = ibv_poll_cq(cq, int(want - got.size()), wcs.data());
                if (n < 0) break;
                for (int k = 0; k < n; ++k) got.push_back(rec_.wc(node, wcs[k]));
                if (got.size() < want && n == 0 && ibv_wait_cq(cq, timeout) != 0) break;
            }
            completions += got.size();
            if (j.contains("wc")) {
                const json& exp = j["wc"];
                for (size_t k = 0; k < exp.size(); ++k) {
                    ++compared;
                    if (k >= got.size()) {
                        diff("completion", s.line,
                             "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() +
                                 ": completion " + std::to_string(k + 1) + " of " +
                                 std::to_string(exp.size()) + " never came (timed out after " +
                                 std::to_string(timeout) + " ns); expected " + exp[k].dump());
                        break;
                    }
                    if (exp[k] != got[k]) {
                        std::string field;
                        for (auto& kv : exp[k].items())
                            if (got[k].value(kv.key(), json()) != kv.value()) {
                                field = kv.key() + " expected " + kv.value().dump() + ", got " +
                                        got[k].value(kv.key(), json()).dump();
                                break;
                            }
                        if (field.empty()) field = "expected " + exp[k].dump() + ", got " + got[k].dump();
                        std::string ctx_line;
                        const std::string owner = exp[k].value("qp", std::string());
                        auto it = producers_.find({node, owner, exp[k].value("wr_id", uint64_t(0))});
                        if (it == producers_.end())  // an SRQ's WR: any owner on the node
                            for (auto p = producers_.begin(); p != producers_.end(); ++p)
                                if (std::get<0>(p->first) == node &&
                                    std::get<2>(p->first) == exp[k].value("wr_id", uint64_t(0)))
                                    it = p;
                        if (it != producers_.end())
                            ctx_line = "\n  produced by " + t_.path + ":" + std::to_string(it->second) +
                                       ": " + line_text(it->second);
                        diff("completion", s.line,
                             "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() +
                                 ": completion " + std::to_string(k + 1) + " of " +
                                 std::to_string(exp.size()) + ": " + field + "\n  expected " + exp[k].dump() +
                                 "\n  got      " + got[k].dump() + ctx_line);
                        break;
                    }
                }
                if (tolerance_ >= 0 && j.contains("t_done_ps")) {
                    const double e = j["t_done_ps"].get<double>(), a = double(sc_time_stamp().value());
                    if (std::abs(a - e) > tolerance_ * e) {
                        char b[200];
                        std::snprintf(b, sizeof b,
                                      "poll_cq node %u: the completions were there at %.3f ns, recorded at "
                                      "%.3f ns (tolerance %g%%)",
                                      node, a / 1000.0, e / 1000.0, tolerance_ * 100.0);
                        diff("time", s.line, b);
                    }
                }
            } else if (got.size() < want) {
                diff("completion", s.line,
                     "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() + ": " +
                         std::to_string(got.size()) + " of " + std::to_string(want) + " completions within " +
                         std::to_string(timeout) + " ns");
            }
            out.erase("count");
            out.erase("t_done_ps");
            out["ret"] = got.size();
            out["wc"] = got;
            out["t_done_ps"] = uint64_t(sc_time_stamp().value());
        }
        rec_.call(node, call.c_str(), out, issued);
        ++calls_run;
    }

    std::string line_text(size_t line) const {
        for (const step& s : t_.steps)
            if (s.line == line) {
                std::string d = s.j.dump();
                return d.size() > 240 ? d.substr(0, 240) + "..." : d;
            }
        return "";
    }

    /// Opens node i's device (as an application does first; not a call of the trace) and
    /// installs the handler that records its asynchronous events.
    bool open(unsigned i) {
        ctx_[i] = ibv_open_device(sw_[i]->driver, sw_[i]->as);
        if (!ctx_[i]) {
            failure = "node" + std::to_string(i) + ": ibv_open_device failed: " + sw_[i]->driver.last_error();
            sc_stop();
            return false;
        }
        ibv_set_async_event_handler(ctx_[i], [this, i](const ibv_async_event& e) {
            json j = rec_.event(i, e);
            j.erase("t_ps");
            events_[i].push_back(j);
        });
        return true;
    }

    void run() {
        ctx_.assign(t_.nodes, nullptr);
        // The global order: by issue time when every call has one (a recording writes a call
        // when it returns), else the file's. Each node's calls run in a process of their own; a
        // call starts once every call before it in that order, on any node, has returned —
        // or, for the calls that wait (poll_cq, wait_byte, sleep), has started: so a node
        // waiting for completions does not hold up the others. With --timing recorded a call
        // also waits for its recorded time, and needs the calls before it only to have started.
        bool timed = true;
        for (const step& s : t_.steps) timed &= s.j.contains("t_ps");
        order_.resize(t_.steps.size());
        for (size_t k = 0; k < order_.size(); ++k) order_[k] = k;
        if (timed)
            std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
                return t_.steps[a].j["t_ps"].get<uint64_t>() < t_.steps[b].j["t_ps"].get<uint64_t>();
            });
        state_.assign(order_.size(), 0);
        waits_.assign(order_.size(), false);
        per_node_.assign(t_.nodes, {});
        for (size_t g = 0; g < order_.size(); ++g) {
            const json& j = t_.steps[order_[g]].j;
            per_node_[j["node"].get<unsigned>()].push_back(g);
            const std::string c = j["call"];
            waits_[g] = c == "poll_cq" || c == "wait_byte" || c == "sleep";
        }
        running_ = t_.nodes;
        for (unsigned n = 0; n < t_.nodes; ++n)
            sc_spawn([this, n] { node_main(n); }, ("node" + std::to_string(n)).c_str());
    }

    void advance() {
        // --timing recorded: the recorded times order the calls; a call only needs the calls
        // before it to have started (so the nodes overlap as they did).
        while (prefix_ < state_.size() &&
               (state_[prefix_] == 2 || (state_[prefix_] == 1 && (waits_[prefix_] || recorded_))))
            ++prefix_;
        progress_.notify(SC_ZERO_TIME);
    }

    void node_main(unsigned n) {
        if (!open(n)) return;
        for (size_t g : per_node_[n]) {
            while (prefix_ < g) wait(progress_);
            const step& s = t_.steps[order_[g]];
            if (recorded_ && s.j.contains("t_ps")) {
                const sc_time at(double(s.j["t_ps"].get<uint64_t>()), SC_PS);
                if (at > sc_time_stamp()) wait(at - sc_time_stamp());
            }
            state_[g] = 1;
            advance();
            exec(s);
            state_[g] = 2;
            advance();
        }
        if (--running_) return;
        // The last node done: asynchronous events still on their way (e.g. after the last
        // completion) arrive, then each node's EQ is processed (the handlers record them).
        wait(sc_time(10, SC_US));
        for (ibv_context* c : ctx_) ibv_process_events(c, 1);
        finished = true;
        sc_stop();
    }

    std::vector<size_t> order_;                  // global position -> index into t_.steps
    std::vector<uint8_t> state_;                 // by global position: 0 waiting, 1 started, 2 returned
    std::vector<bool> waits_;                    // by global position: a call that waits
    std::vector<std::vector<size_t>> per_node_;  // global positions of each node's calls
    size_t prefix_ = 0;                          // every call before this position may be passed
    sc_event progress_;
    unsigned running_ = 0;

    machine& m_;
    const trace_file& t_;
    trace::recorder& rec_;
    bool recorded_;
    double tolerance_;
    std::vector<std::unique_ptr<host_software>> sw_;
    std::vector<ibv_context*> ctx_;
    std::vector<node_objs> objs_;
    std::vector<std::vector<json>> events_;
    std::map<std::tuple<unsigned, std::string, uint64_t>, size_t> producers_;

public:
    host_software& sw(unsigned i) { return *sw_[i]; }
};

}  // namespace

int replay_main(int argc, const char* const* argv) {
    namespace po = boost::program_options;
    po::options_description desc("Usage: hcasim replay FILE [options]\nOptions", 110);
    // clang-format off
    desc.add_options()
        ("help,h", "print this help and exit")
        ("timing", po::value<std::string>()->default_value("asap"),
         "asap: each node's calls in trace order, a call once the calls before it (any node) have returned, or "
         "for waiting calls (poll_cq, wait_byte, sleep) started; recorded: each call at its recorded time, once "
         "the calls before it have started")
        ("time-tolerance", po::value<std::string>(), "also compare the times completions were polled: P% of the recorded time")
        ("update", "run the trace and write its outcome back into FILE (freezes a hand-written trace, or refreshes "
                   "one after an intended change)")
        ("record", po::value<std::string>(), "write the replay's own trace (calls and outcomes) to this file")
        ("pcap", po::value<std::string>(), "also write one wire capture per cable into this directory (docs/traces.md)")
        ("timeline", po::value<std::string>(), "also write the replay's timeline (Chrome trace-event JSON) to this file")
        ("timeline-window", po::value<std::string>(), "--timeline keeps only START_NS:END_NS of simulated time")
        ("timeline-nodes", po::value<std::string>(), "--timeline keeps only these nodes, e.g. 0,1")
        ("config,c", po::value<std::vector<std::string>>()->composing(), "load an INI file after the trace's configuration")
        ("set,s", po::value<std::vector<std::string>>()->composing(), "override one key after the trace's configuration")
        ("file", po::value<std::string>(), "the trace");
    // clang-format on
    po::positional_options_description pos;
    pos.add("file", 1);
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc - 1, const_cast<char**>(argv + 1))
                      .options(desc)
                      .positional(pos)
                      .run(),
                  vm);
        po::notify(vm);
    } catch (const po::error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << " (see hcasim replay --help)\n";
        return 2;
    }
    if (vm.count("help")) {
        std::cout << desc << "\n";
        return 0;
    }
    if (!vm.count("file")) {
        std::cerr << "hcasim: error: replay: which trace? (hcasim replay FILE)\n";
        return 2;
    }
    const std::string path = vm["file"].as<std::string>();
    const std::string timing = vm["timing"].as<std::string>();
    if (timing != "recorded" && timing != "asap") {
        std::cerr << "hcasim: error: replay: --timing: expected recorded|asap, got '" << timing << "'\n";
        return 2;
    }
    double tolerance = -1;
    if (vm.count("time-tolerance")) {
        std::string t = vm["time-tolerance"].as<std::string>();
        const bool pct = !t.empty() && t.back() == '%';
        if (pct) t.pop_back();
        char* end = nullptr;
        tolerance = std::strtod(t.c_str(), &end);
        if (t.empty() || *end || tolerance < 0) {
            std::cerr << "hcasim: error: replay: --time-tolerance: expected a percentage like 5%, got '"
                      << vm["time-tolerance"].as<std::string>() << "'\n";
            return 2;
        }
        tolerance /= 100.0;
    }
    const bool update = vm.count("update") > 0;
    std::string record = vm.count("record") ? vm["record"].as<std::string>() : "";
    if (update && !record.empty()) {
        std::cerr << "hcasim: error: replay: --update writes FILE itself; it takes no --record\n";
        return 2;
    }

    trace_file t;
    std::unique_ptr<machine> m;
    std::unique_ptr<trace::recorder> rec;
    std::unique_ptr<replayer> app;
    std::unique_ptr<timeline> tl;
    // --update writes FILE whole once the replay has run to its end, or leaves it as it was.
    const std::string out_path = update ? path : vm.count("record") ? record : "/dev/null";
    const char* const out_what = update ? "--update" : "--record";
    timeline_filter timeline_only;
    try {  // the outputs, before anything runs
        auto given = [&vm](const char* option) {
            return vm.count(option) ? &vm[option].as<std::string>() : nullptr;
        };
        timeline_only =
            timeline_filter::parse(given("timeline-window"), given("timeline-nodes"), vm.count("timeline"));
        output_file::check(out_path, out_what);
        if (vm.count("timeline")) output_file::check(vm["timeline"].as<std::string>(), "--timeline");
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << "\n";
        return 2;
    }
    try {
        t = load(path);
        broker& b = broker::instance();
        if (t.header.contains("config"))
            for (auto& kv : t.header["config"].items())
                b.set(kv.key(), kv.value().is_string() ? kv.value().get<std::string>() : kv.value().dump(),
                      path + ":header");
        if (!t.header.contains("config") || !t.header["config"].contains("fabric.nodes"))
            b.set("fabric.nodes", std::to_string(t.nodes), path + ":header");
        if (vm.count("config"))
            for (const auto& f : vm["config"].as<std::vector<std::string>>()) b.load_ini(f);
        if (vm.count("set"))
            for (const auto& s : vm["set"].as<std::vector<std::string>>()) b.set_override(s);
        m = std::make_unique<machine>();
        if (m->size() != t.nodes)
            throw trace_error(path + ": the trace has " + std::to_string(t.nodes) +
                              " nodes, its configuration makes " + std::to_string(m->size()));
        rec = std::make_unique<trace::recorder>(out_path, t.nodes, out_what);
        if (vm.count("pcap")) m->capture_to(vm["pcap"].as<std::string>());
        if (vm.count("timeline")) {
            timeline_only.check_nodes(t.nodes);
            tl = std::make_unique<timeline>(vm["timeline"].as<std::string>(), timeline_only);
            for (unsigned i = 0; i < t.nodes; ++i) {
                m->at(i).adapter.set_timeline(tl.get(), i);
                m->at(i).pcie.set_timeline(tl.get(), i);
            }
        }
        app = std::make_unique<replayer>("replay", *m, t, *rec, timing == "recorded", tolerance);
        b.check_unused();
        // The trace's own header, with the effective configuration of the machine.
        rec->header(trace::effective_config(), t.header.value("seed", uint64_t(1)),
                    t.header.value("workload", std::string("replay")));
        for (const std::string& c : t.comments) rec->comment(c);
    } catch (const trace_error& e) {
        std::cerr << "hcasim: error: " << e.what() << "\n";
        return 2;
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: " << path << ": " << e.what() << "\n";
        return 2;
    }
    // A recorded trace (or one frozen with --update) ends with its end record; a hand-written one
    // may hold only calls.
    const bool has_outcome = t.end.is_object();
    app->compare_events_ = has_outcome;

    sc_start();
    try {
        // The timeline and the captures show what was simulated, whether the replay failed or not.
        if (tl) tl->close();
        if (!m->captures().empty()) {
            if (const std::string e = m->close_captures(); !e.empty()) throw config_error(e);
            std::printf(" pcap:");
            for (const auto& c : m->captures())
                std::printf(" %s (%llu packets)", c->path().c_str(),
                            static_cast<unsigned long long>(c->packets()));
            std::printf("\n");
        }
        if (!app->failure.empty()) {
            std::cerr << "hcasim: run failed: replay: " << app->failure << "\n";
            return 1;
        }
        if (update && !app->finished) {
            std::cerr << "hcasim: run failed: replay: " << path
                      << ": the replay stopped before its last call (" << path << " is left as it was)\n";
            return 1;
        }
        // The end: memory digests of every buffer, the counters; the trace is written.
        trace::json counters = trace::json::object();
        for (const counter* c : stats_registry::instance().counters())
            if (c->value()) counters[c->key()] = c->value();
        const trace::json memory = rec->end(
            [&](unsigned node, uint64_t va, uint8_t* dst, uint64_t n) {
                // The trace's own buffers: allocated by the replay, mapped until it ends.
                (void)app->sw(node).as.read(va, dst, n);
            },
            counters);
        app->compare_end(memory);
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: replay: " << e.what() << "\n";
        return 2;
    }
    if (!app->finished && app->diffs.empty())
        app->diffs.push_back({"run", path + ": the replay stopped before its last call"});
    std::printf("replay: %s: %zu calls, %zu completions, %zu events recorded", path.c_str(), app->calls_run,
                app->completions, t.events.size());
    if (update) {
        std::printf("; outcome written to %s (--update)\n", path.c_str());
        return 0;
    }
    if (app->diffs.empty()) {
        std::printf(has_outcome ? "; %zu outcomes compared: equal to the recording\n"
                                : "; no recorded outcome to compare (--update records one)\n",
                    app->compared);
        return 0;
    }
    std::printf("\n");
    std::map<std::string, size_t> by_kind;
    for (const divergence& d : app->diffs) ++by_kind[d.kind];
    std::cout << "first divergence: " << app->diffs.front().text << "\n";
    std::cout << "replay: " << app->diffs.size() << " divergence" << (app->diffs.size() == 1 ? "" : "s")
              << " (";
    bool first = true;
    for (auto& kv : by_kind) {
        std::cout << (first ? "" : ", ") << kv.first << ": " << kv.second;
        first = false;
    }
    std::cout << ")\n";
    return 1;
}

}  // namespace hcasim
