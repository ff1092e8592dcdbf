// The fabric's graph: the built shapes, LID assignment and ibnetdiscover's text format; see
// topology.h. The format is what rdma-core's infiniband-diags/ibnetdiscover.c prints
// (../shared/reference/fabric.md §5.1).
#include "model/fabric/topology.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "model/core/param.h"
#include "model/core/text_file.h"

namespace hcasim {

namespace {

constexpr uint64_t HCA_GUID_BASE = 0x0002c90300000000ull;
constexpr uint64_t SWITCH_GUID_BASE = 0xe41d2d0300000000ull;
constexpr uint16_t LAST_UNICAST_LID = 0xBFFF;
constexpr unsigned MAX_PORT = 254;  // IBA: physical ports 1..254 (255 is reserved)
const char* const SM_DESC = "subnet manager";

uint64_t endport_guid(unsigned e) { return HCA_GUID_BASE + (uint64_t(e + 1) << 4); }

/// "1", "1.5": a ratio as a user writes it.
std::string ratio(double v) {
    std::ostringstream s;
    s << v;
    return s.str();
}

/// Host i and the SM as the builders add them: after the switches, in that order.
void add_endports(topology& t, unsigned hosts, bool with_sm) {
    for (unsigned i = 0; i < hosts; ++i) {
        t.host_node.push_back(t.add(topo_node::kind::hca, 1, "node" + std::to_string(i), endport_guid(i)));
        t.nodes.back().host = i;
    }
    if (with_sm) {
        t.sm_node = int(t.add(topo_node::kind::hca, 1, SM_DESC, endport_guid(hosts)));
        t.nodes.back().is_sm = true;
    }
}

/// The node of endport e (host e, then the SM).
unsigned endport_node(const topology& t, unsigned e) {
    return e < t.hosts() ? t.host_node[e] : unsigned(t.sm_node);
}

unsigned add_switch(topology& t, unsigned radix, const std::string& desc, unsigned level) {
    const unsigned n = t.add(topo_node::kind::sw, radix, desc, SWITCH_GUID_BASE + t.switches().size() + 1);
    t.nodes[n].level = level;
    return n;
}

void require_hosts_and_radix(unsigned hosts, unsigned radix) {
    if (hosts == 0) throw config_error("fabric.nodes=0: a fabric needs at least one host");
    if (radix > MAX_PORT)
        throw config_error("fabric.switch.radix=" + std::to_string(radix) + ": a switch has at most " +
                           std::to_string(MAX_PORT) + " ports");
}

}  // namespace

unsigned topology::add(topo_node::kind type, unsigned ports, std::string desc, uint64_t guid) {
    topo_node n;
    n.type = type;
    n.guid = guid;
    n.desc = std::move(desc);
    n.peer.resize(ports + 1);
    nodes.push_back(std::move(n));
    return unsigned(nodes.size() - 1);
}

void topology::connect(unsigned a, unsigned pa, unsigned b, unsigned pb) {
    auto end_of = [this](unsigned n, unsigned p) -> topo_end& {
        if (n >= nodes.size() || p == 0 || p > nodes[n].ports())
            throw std::invalid_argument("topology::connect: no port " + std::to_string(p) + " on node " +
                                        std::to_string(n));
        if (nodes[n].peer[p].connected())
            throw std::invalid_argument("topology::connect: port " + std::to_string(p) + " of " +
                                        nodes[n].desc + " is already cabled");
        return nodes[n].peer[p];
    };
    if (a == b && pa == pb) throw std::invalid_argument("topology::connect: a port cabled to itself");
    topo_end& ea = end_of(a, pa);
    topo_end& eb = end_of(b, pb);
    ea = topo_end{int(b), pb};
    eb = topo_end{int(a), pa};
}

std::vector<unsigned> topology::switches() const {
    std::vector<unsigned> out;
    for (unsigned i = 0; i < nodes.size(); ++i)
        if (nodes[i].is_switch()) out.push_back(i);
    return out;
}

bool operator==(const topo_end& a, const topo_end& b) { return a.node == b.node && a.port == b.port; }

bool operator==(const topo_node& a, const topo_node& b) {
    return a.type == b.type && a.is_sm == b.is_sm && a.host == b.host && a.level == b.level &&
           a.guid == b.guid && a.desc == b.desc && a.lid == b.lid && a.peer == b.peer;
}

bool operator==(const topology& a, const topology& b) {
    return a.nodes == b.nodes && a.host_node == b.host_node && a.sm_node == b.sm_node && a.lmc == b.lmc;
}

// ---- Built shapes ----

topology make_back_to_back() {
    topology t;
    add_endports(t, 2, false);
    t.connect(t.host_node[0], 1, t.host_node[1], 1);
    return t;
}

topology make_single_switch(unsigned hosts, unsigned radix, bool with_sm) {
    require_hosts_and_radix(hosts, radix);
    const unsigned endports = hosts + (with_sm ? 1 : 0);
    if (endports > radix)
        throw config_error("fabric.nodes=" + std::to_string(hosts) + (with_sm ? " (+1 subnet manager)" : "") +
                           " do not fit on one switch of fabric.switch.radix=" + std::to_string(radix) +
                           " ports");
    topology t;
    const unsigned sw = add_switch(t, radix, "switch0", 0);
    add_endports(t, hosts, with_sm);
    for (unsigned e = 0; e < endports; ++e) t.connect(sw, e + 1, endport_node(t, e), 1);
    return t;
}

topology make_fat_tree(unsigned hosts, unsigned levels, unsigned radix, double oversubscription,
                       bool with_sm) {
    require_hosts_and_radix(hosts, radix);
    const std::string shape = "a " + std::to_string(levels) +
                              "-level fat tree (fabric.fat_tree.levels) of radix " + std::to_string(radix) +
                              " (fabric.switch.radix) with oversubscription " + ratio(oversubscription) +
                              " (fabric.fat_tree.oversubscription)";
    if (levels != 2 && levels != 3)
        throw config_error("fabric.fat_tree.levels=" + std::to_string(levels) +
                           ": a fat tree has 2 (leaf/spine) or 3 (leaf/spine/core) levels");
    if (!(oversubscription >= 1) || !std::isfinite(oversubscription))
        throw config_error("fabric.fat_tree.oversubscription=" + ratio(oversubscription) +
                           ": the leaves' down:up ratio must be a number >= 1 (1: full bisection)");
    const double R = radix;
    const unsigned u = unsigned(std::floor(R / (1 + oversubscription) + 1e-9));
    const unsigned p = radix / 2;  // leaves per pod = a spine's down (and up) ports
    if (u == 0 || (levels == 3 && p == 0))
        throw config_error("fabric.switch.radix=" + std::to_string(radix) + " is too small for " + shape +
                           ": a leaf needs at least one up port and " + ratio(oversubscription) +
                           " times as many down ports");
    const unsigned d = std::min(radix - u, unsigned(std::floor(u * oversubscription + 1e-9)));
    const unsigned endports = hosts + (with_sm ? 1 : 0);
    const uint64_t capacity = levels == 2 ? uint64_t(radix) * d : uint64_t(radix) * p * d;
    if (endports > capacity)
        throw config_error(
            "fabric.nodes=" + std::to_string(hosts) + (with_sm ? " (+1 subnet manager)" : "") +
            " do not fit " + shape + ": at most " + std::to_string(capacity) + " endports; raise " +
            (levels == 2 ? "fabric.switch.radix or fabric.fat_tree.levels" : "fabric.switch.radix"));

    topology t;
    const unsigned leaves = (endports + d - 1) / d;
    const unsigned pods = levels == 2 ? 1 : (leaves + p - 1) / p;
    std::vector<unsigned> leaf(leaves), spine(pods * u), core(levels == 3 ? u * p : 0);
    for (unsigned l = 0; l < leaves; ++l) leaf[l] = add_switch(t, radix, "leaf" + std::to_string(l), 0);
    for (unsigned s = 0; s < spine.size(); ++s)
        spine[s] = add_switch(t, radix, "spine" + std::to_string(s), 1);
    for (unsigned c = 0; c < core.size(); ++c) core[c] = add_switch(t, radix, "core" + std::to_string(c), 2);
    add_endports(t, hosts, with_sm);
    for (unsigned e = 0; e < endports; ++e) t.connect(leaf[e / d], e % d + 1, endport_node(t, e), 1);
    for (unsigned l = 0; l < leaves; ++l) {
        const unsigned pod = levels == 2 ? 0 : l / p, down_port = levels == 2 ? l + 1 : l % p + 1;
        for (unsigned j = 0; j < u; ++j) t.connect(leaf[l], d + 1 + j, spine[pod * u + j], down_port);
    }
    for (unsigned x = 0; x < pods && levels == 3; ++x)
        for (unsigned j = 0; j < u; ++j)
            for (unsigned m = 0; m < p; ++m) t.connect(spine[x * u + j], p + 1 + m, core[j * p + m], x + 1);
    return t;
}

// ---- LIDs ----

void assign_lids(topology& t, unsigned lmc) {
    if (lmc > 7) throw config_error("fabric.lmc=" + std::to_string(lmc) + ": the LMC is 0..7");
    const uint64_t endports = t.hosts() + (t.sm_node >= 0 ? 1 : 0);
    const uint64_t last = ((endports + 1) << lmc) + t.switches().size() - 1;
    if (last > LAST_UNICAST_LID)
        throw config_error("fabric.nodes=" + std::to_string(t.hosts()) +
                           " with fabric.lmc=" + std::to_string(lmc) + " and " +
                           std::to_string(t.switches().size()) + " switches need LIDs up to " +
                           std::to_string(last) + ", past the last unicast LID 49151 (0xBFFF)");
    t.lmc = lmc;
    for (unsigned i = 0; i < t.hosts(); ++i) t.nodes[t.host_node[i]].lid = uint16_t((i + 1) << lmc);
    if (t.sm_node >= 0) t.nodes[t.sm_node].lid = uint16_t((t.hosts() + 1) << lmc);
    uint16_t next = uint16_t((endports + 1) << lmc);
    for (unsigned s : t.switches()) t.nodes[s].lid = next++;
}

// ---- ibnetdiscover's format ----

namespace {

std::string hex(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%" PRIx64, v);
    return buf;
}

/// 16 digits, as ibnetdiscover writes GUIDs in node ids.
std::string hex16(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
}

/// "S-e41d2d0300000001": how ibnetdiscover names a node.
std::string node_id(bool sw, uint64_t guid) { return (sw ? "S-" : "H-") + hex16(guid); }
std::string node_id(const topo_node& n) { return node_id(n.is_switch(), n.guid); }

/// A node as the file declares it (its header line) and the link lines in its block.
struct declared {
    bool sw = false;
    uint64_t guid = 0;
    unsigned ports = 0;  ///< the header's port count
    std::string desc;
    uint16_t lid = 0;
    std::size_t line = 0;
};

struct link_line {
    unsigned from = 0, port = 0;  ///< declared index, its port
    bool peer_sw = false;
    uint64_t peer_guid = 0;
    unsigned peer_port = 0;
    std::size_t line = 0;
};

/// One line of the file being parsed: a cursor and errors naming PATH:LINE.
class line_parser {
public:
    line_parser(const std::string& path, std::size_t line_no, const std::string& text)
        : path_(path), line_no_(line_no), s_(text) {}

    [[noreturn]] void fail(const std::string& why) const { throw config_error(where() + why); }
    std::string where() const { return path_ + ":" + std::to_string(line_no_) + ": "; }
    [[noreturn]] void expected(const std::string& what) const {
        std::string rest = s_.substr(pos_, 40);
        fail("syntax error: expected " + what + ", found " +
             (rest.empty() ? "the end of the line" : "'" + rest + "'"));
    }

    void skip_ws() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
    }
    bool at_end() {
        skip_ws();
        return pos_ == s_.size();
    }
    bool peek(char c) { return pos_ < s_.size() && s_[pos_] == c; }
    bool accept(const std::string& word) {
        if (s_.compare(pos_, word.size(), word) != 0) return false;
        pos_ += word.size();
        return true;
    }
    void expect(char c, const std::string& what) {
        if (!peek(c)) expected(what);
        ++pos_;
    }
    /// A decimal number up to `max`.
    unsigned number(const std::string& what, unsigned max) {
        const std::size_t start = pos_;
        uint64_t v = 0;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_])) && v <= max)
            v = v * 10 + unsigned(s_[pos_++] - '0');
        if (pos_ == start) expected(what);
        if (v > max) {
            pos_ = start;
            expected(what + " (at most " + std::to_string(max) + ")");
        }
        return unsigned(v);
    }
    /// Hexadecimal digits (1 to 16).
    uint64_t hex_number(const std::string& what) {
        const std::size_t start = pos_;
        uint64_t v = 0;
        while (pos_ < s_.size() && pos_ - start < 17 && std::isxdigit(static_cast<unsigned char>(s_[pos_]))) {
            const char c = char(std::tolower(static_cast<unsigned char>(s_[pos_++])));
            v = v * 16 + uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
        }
        if (pos_ == start || pos_ - start > 16) {
            pos_ = start;
            expected(what);
        }
        return v;
    }
    /// `"S-<guid>"` or `"H-<guid>"`: whether a switch, and the GUID.
    std::pair<bool, uint64_t> node_ref() {
        const std::size_t start = pos_;
        if (accept("\"R-")) fail("a link to a router (\"R-...\"): hcasim models switches and CAs only");
        const bool sw = accept("\"S-");
        if (!sw && !accept("\"H-")) expected("a node id \"S-<GUID>\" or \"H-<GUID>\"");
        const uint64_t guid = hex_number("a GUID of 1 to 16 hex digits");
        if (!peek('"')) {
            pos_ = start;
            expected("a node id \"S-<GUID>\" or \"H-<GUID>\"");
        }
        ++pos_;
        return {sw, guid};
    }
    /// `[N]`: a port number.
    unsigned port(const std::string& what) {
        expect('[', what + " in brackets [N]");
        const unsigned p = number(what, 255);
        expect(']', "']' after " + what);
        if (p == 0 || p > MAX_PORT)
            fail(what + " " + std::to_string(p) + ": ports are 1.." + std::to_string(MAX_PORT));
        return p;
    }
    /// `[ext N]` as `ibnetdiscover -g` prints after a port: skipped.
    void skip_ext_port() {
        if (accept("[ext ")) {
            number("an external port number", 255);
            expect(']', "']'");
        }
    }
    /// The text after the next '#' ("" if none); anything else before it is an error.
    std::string comment(const std::string& before) {
        if (at_end()) return "";
        if (!peek('#')) expected(before);
        return s_.substr(pos_ + 1);
    }
    std::string rest() const { return s_.substr(pos_); }

private:
    const std::string& path_;
    std::size_t line_no_;
    const std::string& s_;
    std::size_t pos_ = 0;
};

/// `"desc"` at the start of a comment (after blanks): the text up to the last '"' on the
/// line (a NodeDescription is not escaped); what follows it in `tail`.
std::string quoted_desc(const std::string& c, std::string* tail) {
    const std::size_t open = c.find_first_not_of(" \t");
    if (open == std::string::npos || c[open] != '"') return {};
    const std::size_t close = c.rfind('"');
    if (close == open) return {};
    if (tail) *tail = c.substr(close + 1);
    return c.substr(open + 1, close - open - 1);
}

/// The number after the word `key` among the blank-separated words of `text`; -1 if absent.
long word_value(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    std::string w;
    while (in >> w)
        if (w == key && in >> w) {
            char* end = nullptr;
            const long v = std::strtol(w.c_str(), &end, 10);
            return *end == '\0' && v >= 0 && v <= 0xFFFF ? v : -1;
        }
    return -1;
}

/// Hops from the nearest of `sources` to every node (breadth first); -1: unreachable.
std::vector<int> hops(const topology& t, const std::vector<unsigned>& sources) {
    std::vector<int> dist(t.nodes.size(), -1);
    std::deque<unsigned> todo(sources.begin(), sources.end());
    for (unsigned s : sources) dist[s] = 0;
    while (!todo.empty()) {
        const unsigned n = todo.front();
        todo.pop_front();
        for (const topo_end& e : t.nodes[n].peer)
            if (e.connected() && dist[unsigned(e.node)] < 0) {
                dist[unsigned(e.node)] = dist[n] + 1;
                todo.push_back(unsigned(e.node));
            }
    }
    return dist;
}

/// The file's content before any check across lines.
struct parsed_file {
    std::vector<declared> nodes;
    std::vector<link_line> links;
    std::map<uint64_t, unsigned> by_guid;
    int lmc = -1;
    std::size_t lmc_line = 0;
    std::size_t last_line = 0;
};

void parse_header(line_parser& lp, const std::string& type, parsed_file& f, std::size_t line) {
    if (type == "Rt") lp.fail("a router (Rt): hcasim models switches and CAs only");
    declared d;
    d.sw = type == "Switch";
    d.line = line;
    lp.skip_ws();
    d.ports = lp.number("the node's port count", 255);
    if (d.ports == 0 || d.ports > MAX_PORT)
        lp.fail("a " + type + " with " + std::to_string(d.ports) + " ports: a node has 1.." +
                std::to_string(MAX_PORT));
    lp.skip_ws();
    const auto [sw, guid] = lp.node_ref();
    if (sw != d.sw)
        lp.fail(type + " header with the id of a " + (sw ? "switch (\"S-...\")" : "CA (\"H-...\")"));
    d.guid = guid;
    std::string tail;
    d.desc = quoted_desc(lp.comment("a # comment with the NodeDescription"), &tail);
    if (d.sw) {
        const long lid = word_value(tail, "lid");
        if (lid > 0) d.lid = uint16_t(lid);
    }
    const auto [it, fresh] = f.by_guid.emplace(guid, unsigned(f.nodes.size()));
    if (!fresh)
        lp.fail("duplicate GUID 0x" + hex(guid) + " (also declared at line " +
                std::to_string(f.nodes[it->second].line) + ")");
    f.nodes.push_back(d);
}

void parse_link(line_parser& lp, parsed_file& f, std::size_t line) {
    if (f.nodes.empty()) lp.fail("a link line before any Switch or Ca header");
    declared& d = f.nodes.back();
    link_line l;
    l.from = unsigned(f.nodes.size() - 1);
    l.line = line;
    l.port = lp.port("a port number");
    lp.skip_ext_port();
    if (!d.sw) {  // a CA's own port GUID: "(2c90300bb0011)"
        lp.expect('(', "the port GUID in parentheses after a CA's port");
        lp.hex_number("a port GUID");
        lp.expect(')', "')' after the port GUID");
    }
    lp.skip_ws();
    const auto [sw, guid] = lp.node_ref();
    l.peer_sw = sw;
    l.peer_guid = guid;
    l.peer_port = lp.port("the peer's port number");
    lp.skip_ext_port();
    lp.skip_ws();
    if (lp.peek('(')) {  // the peer CA's port GUID
        lp.expect('(', "");
        lp.hex_number("a port GUID");
        lp.expect(')', "')' after the port GUID");
    }
    const std::string c = lp.comment("a # comment or the end of the line");
    if (l.port > d.ports)
        lp.fail("port " + std::to_string(l.port) + " is beyond the port count " + std::to_string(d.ports) +
                " of \"" + node_id(d.sw, d.guid) + "\" (line " + std::to_string(d.line) + ")");
    if (!d.sw) {  // "# lid 7 lmc 0 "leaf1" lid 3 4xEDR": the CA's own LID and LMC come first
        std::istringstream in(c);
        std::string w1, w2, w3, w4;
        in >> w1 >> w2 >> w3 >> w4;
        if (w1 == "lid" && w3 == "lmc") {
            const long lid = word_value(c, "lid"), lmc = word_value(c, "lmc");
            if (lid < 0 || lmc < 0 || lmc > 7) lp.fail("bad 'lid L lmc M' in the comment (LMC is 0..7)");
            d.lid = uint16_t(lid);
            if (f.lmc >= 0 && f.lmc != lmc)
                lp.fail("lmc " + std::to_string(lmc) + " differs from lmc " + std::to_string(f.lmc) +
                        " at line " + std::to_string(f.lmc_line) +
                        " (hcasim gives every endport the same LMC)");
            if (f.lmc < 0) f.lmc = int(lmc), f.lmc_line = line;
        }
    }
    f.links.push_back(l);
}

/// "vendid=0x2c9", "switchguid=0x...(...)": identification lines, checked and skipped.
bool parse_id_line(line_parser& lp) {
    static const char* const keys[] = {
        "vendid=", "devid=", "sysimgguid=", "switchguid=", "caguid=", "rtguid="};
    for (const char* k : keys)
        if (lp.accept(k)) {
            if (!lp.accept("0x")) lp.expected("a hexadecimal value 0x...");
            lp.hex_number("a hexadecimal value");
            return true;
        }
    return false;
}

parsed_file parse(const std::string& path) {
    parsed_file f;
    text_file in(path, "topology file", 1 << 16);
    std::string text;
    while (in.next(text)) {
        const std::size_t n = in.line_number();
        line_parser lp(path, n, text);
        if (lp.at_end() || lp.peek('#')) continue;
        if (lp.peek('[')) {
            parse_link(lp, f, n);
        } else if (parse_id_line(lp)) {
            continue;
        } else {
            bool header = false;
            for (const char* type : {"Switch", "Ca", "Hca", "Rt"}) {
                const std::string t = type;
                if (lp.accept(t + " ") || lp.accept(t + "\t")) {
                    parse_header(lp, t == "Hca" ? "Ca" : t, f, n);
                    header = true;
                    break;
                }
            }
            if (!header)
                lp.expected(
                    "a node header (Switch, Ca), a link line ([port] \"S-<GUID>\"[port]), an id line "
                    "(vendid=, caguid=, ...) or a # comment");
        }
    }
    f.last_line = std::max<std::size_t>(in.line_number(), 1);
    return f;
}

}  // namespace

topology read_ibnetdiscover(const std::string& path) {
    parsed_file f = parse(path);
    auto at = [&path](std::size_t line) { return path + ":" + std::to_string(line) + ": "; };
    auto id = [&f](unsigned i) { return "\"" + node_id(f.nodes[i].sw, f.nodes[i].guid) + "\""; };
    auto named = [&](unsigned i) { return id(i) + " (\"" + f.nodes[i].desc + "\")"; };

    // Cables: each link line cables its port; the far end's own line, if any, must agree.
    struct port_state {
        topo_end peer;
        std::size_t line = 0;      ///< the first line that cabled it
        std::size_t own_line = 0;  ///< the line of its node's block that lists it
        bool by_far_end = false;   ///< `line` is in the far end's block
    };
    std::vector<std::vector<port_state>> ports(f.nodes.size());
    for (unsigned i = 0; i < f.nodes.size(); ++i) ports[i].resize(f.nodes[i].ports + 1);
    auto cable = [&](unsigned n, unsigned p) { return id(n) + "[" + std::to_string(p) + "]"; };
    for (const link_line& l : f.links) {
        const auto it = f.by_guid.find(l.peer_guid);
        const std::string peer_id = "\"" + node_id(l.peer_sw, l.peer_guid) + "\"";
        if (it == f.by_guid.end())
            throw config_error(at(l.line) + "dangling link: " + peer_id + " port " +
                               std::to_string(l.peer_port) + " is not a node of the file");
        const unsigned b = it->second;
        if (f.nodes[b].sw != l.peer_sw)
            throw config_error(at(l.line) + "link to " + peer_id + ", but line " +
                               std::to_string(f.nodes[b].line) + " declares that GUID as " + id(b));
        if (l.peer_port > f.nodes[b].ports)
            throw config_error(at(l.line) + "port " + std::to_string(l.peer_port) +
                               " is beyond the port count " + std::to_string(f.nodes[b].ports) + " of " +
                               id(b) + " (line " + std::to_string(f.nodes[b].line) + ")");
        if (b == l.from) throw config_error(at(l.line) + "a cable from " + id(b) + " to itself");
        port_state& mine = ports[l.from][l.port];
        if (mine.own_line)
            throw config_error(at(l.line) + "port " + std::to_string(l.port) + " of " + id(l.from) +
                               " listed twice (also line " + std::to_string(mine.own_line) + ")");
        mine.own_line = l.line;
        const port_state& far = ports[b][l.peer_port];
        const topo_end want_mine{int(b), l.peer_port}, want_far{int(l.from), l.port};
        const port_state* other = mine.peer.connected() && !(mine.peer == want_mine) ? &mine
                                  : far.peer.connected() && !(far.peer == want_far)  ? &far
                                                                                     : nullptr;
        if (other) {
            // As that line reads: from the node whose block it is in.
            std::string there = cable(unsigned(other == &mine ? l.from : b),
                                      other == &mine ? l.port : l.peer_port),
                        peer = cable(unsigned(other->peer.node), other->peer.port);
            if (other->by_far_end) std::swap(there, peer);
            throw config_error(at(l.line) + "mismatched link: " + cable(l.from, l.port) + " to " +
                               cable(b, l.peer_port) + " here, but line " + std::to_string(other->line) +
                               " cables " + there + " to " + peer);
        }
        if (!mine.peer.connected()) {
            mine.peer = want_mine, mine.line = l.line;
            ports[b][l.peer_port] = port_state{want_far, l.line, ports[b][l.peer_port].own_line, true};
        }
    }

    // CAs: one cabled port, port 1; hosts in file order, one SM.
    std::vector<unsigned> host_decl;
    int sm_decl = -1;
    for (unsigned i = 0; i < f.nodes.size(); ++i) {
        if (f.nodes[i].sw) continue;
        for (unsigned p = 2; p <= f.nodes[i].ports; ++p)
            if (ports[i][p].peer.connected())
                throw config_error(at(ports[i][p].line) + named(i) + " has port " + std::to_string(p) +
                                   " cabled" + (ports[i][1].peer.connected() ? " as well as port 1" : "") +
                                   ": hcasim's HCAs have one port, port 1");
        if (f.nodes[i].desc == SM_DESC) {
            if (sm_decl >= 0)
                throw config_error(at(f.nodes[i].line) +
                                   "a second \"subnet manager\" CA (the first at line " +
                                   std::to_string(f.nodes[unsigned(sm_decl)].line) + ")");
            sm_decl = int(i);
        } else {
            host_decl.push_back(i);
        }
    }
    if (host_decl.empty())
        throw config_error(at(f.last_line) + "no host: the file has no CA (other than the subnet manager)");

    // The topology in canonical order: switches, hosts, SM.
    std::vector<unsigned> order;
    for (unsigned i = 0; i < f.nodes.size(); ++i)
        if (f.nodes[i].sw) order.push_back(i);
    order.insert(order.end(), host_decl.begin(), host_decl.end());
    if (sm_decl >= 0) order.push_back(unsigned(sm_decl));
    std::vector<int> node_of(f.nodes.size());
    topology t;
    for (unsigned i : order) {
        const declared& d = f.nodes[i];
        node_of[i] =
            int(t.add(d.sw ? topo_node::kind::sw : topo_node::kind::hca, d.sw ? d.ports : 1, d.desc, d.guid));
        topo_node& n = t.nodes.back();
        n.lid = d.lid;
        if (int(i) == sm_decl) {
            n.is_sm = true;
            t.sm_node = node_of[i];
        } else if (!d.sw) {
            n.host = t.hosts();
            t.host_node.push_back(unsigned(node_of[i]));
        }
    }
    for (unsigned i = 0; i < f.nodes.size(); ++i) {
        topo_node& n = t.nodes[unsigned(node_of[i])];
        for (unsigned p = 1; p <= n.ports(); ++p)
            if (ports[i][p].peer.connected())
                n.peer[p] = topo_end{node_of[unsigned(ports[i][p].peer.node)], ports[i][p].peer.port};
    }
    t.lmc = f.lmc < 0 ? 0 : unsigned(f.lmc);

    // Connected: every node reachable from the file's first.
    const std::vector<int> from_first = hops(t, {unsigned(node_of[0])});
    for (unsigned i = 0; i < f.nodes.size(); ++i)
        if (from_first[unsigned(node_of[i])] < 0)
            throw config_error(at(f.nodes[i].line) + named(i) + " is not connected to " + named(0) +
                               " (line " + std::to_string(f.nodes[0].line) +
                               "): the fabric must be one piece");
    // A switch's level: hops to the nearest CA - 1.
    std::vector<unsigned> cas;
    for (unsigned i = 0; i < t.nodes.size(); ++i)
        if (!t.nodes[i].is_switch()) cas.push_back(i);
    const std::vector<int> from_cas = hops(t, cas);
    for (unsigned sw : t.switches()) t.nodes[sw].level = unsigned(from_cas[sw] - 1);
    return t;
}

void write_ibnetdiscover(const topology& t, std::ostream& out, const std::string& link_width_speed) {
    std::vector<unsigned> order = t.switches();
    order.insert(order.end(), t.host_node.begin(), t.host_node.end());
    if (t.sm_node >= 0) order.push_back(unsigned(t.sm_node));
    const topo_node& from = t.nodes.at(t.sm_node >= 0 ? unsigned(t.sm_node) : t.host_node.at(0));
    out << "#\n# Topology file: written by hcasim\n#\n# Initiated from node " << hex16(from.guid) << " port "
        << hex16(from.guid + 1) << "\n";
    for (unsigned i : order) {
        const topo_node& n = t.nodes[i];
        out << "\nvendid=0x2c9\ndevid=" << (n.is_switch() ? "0xcb20" : "0x4843") << "\nsysimgguid=0x"
            << hex(n.guid) << "\n";
        if (n.is_switch())
            out << "switchguid=0x" << hex(n.guid) << "(" << hex(n.guid) << ")\nSwitch\t" << n.ports() << " \""
                << node_id(n) << "\"\t\t# \"" << n.desc << "\" enhanced port 0 lid " << n.lid << " lmc 0\n";
        else
            out << "caguid=0x" << hex(n.guid) << "\nCa\t" << n.ports() << " \"" << node_id(n) << "\"\t\t# \""
                << n.desc << "\"\n";
        for (unsigned p = 1; p <= n.ports(); ++p) {
            if (!n.peer[p].connected()) continue;
            const topo_node& peer = t.nodes[unsigned(n.peer[p].node)];
            out << "[" << p << "]";
            if (!n.is_switch()) out << "(" << hex(n.guid + p) << ") ";
            out << "\t\"" << node_id(peer) << "\"[" << n.peer[p].port << "]";
            if (!peer.is_switch())
                out << (n.is_switch() ? "" : " ") << "(" << hex(peer.guid + n.peer[p].port) << ") ";
            out << "\t\t# ";
            if (!n.is_switch()) out << "lid " << n.lid << " lmc " << t.lmc << " ";
            out << "\"" << peer.desc << "\" lid " << peer.lid << " " << link_width_speed << "\n";
        }
    }
}

}  // namespace hcasim
