// The fabric's partition over ranks; see partition.h and docs/fabric.md, "Partitioned runs".
#include "model/fabric/partition.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <ostream>
#include <stdexcept>

#include "model/core/param.h"
#include "model/core/text_file.h"

namespace hcasim {

namespace {

std::string guid_text(uint64_t guid) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%016" PRIx64, guid);
    return buf;
}

/// "1 rank", "3 ranks"; "1 switch", "2 switches".
std::string count(std::size_t n, const std::string& one, const std::string& many = "") {
    return std::to_string(n) + " " + (n == 1 ? one : many.empty() ? one + "s" : many);
}

/// The endports cabled to each node (non-zero only for switches): all of them, and the hosts.
struct load {
    unsigned endports = 0, hosts = 0;
};
std::vector<load> loads(const topology& t) {
    std::vector<load> out(t.nodes.size());
    for (const topo_node& n : t.nodes) {
        if (n.is_switch() || n.ports() < 1 || !n.peer[1].connected()) continue;
        load& l = out[unsigned(n.peer[1].node)];
        ++l.endports;
        if (!n.is_sm) ++l.hosts;
    }
    return out;
}

/// Refusals that do not depend on `spec`: a partition cuts switch-to-switch cables and gives
/// every rank a switch with hosts.
void check_fabric(const topology& t, unsigned ranks) {
    const std::string head = "fabric.partition: " + count(ranks, "rank") + " for ";
    if (ranks > t.hosts())
        throw config_error(head + count(t.hosts(), "node") +
                           ": every rank simulates at least one node; run with at most " +
                           count(t.hosts(), "rank"));
    const std::vector<unsigned> sw = t.switches();
    if (sw.empty())
        throw config_error(head +
                           "a fabric without switches: a partition cuts cables between "
                           "switches; run with one rank");
    if (sw.size() == 1)
        throw config_error(head + "a fabric of one switch ('" + t.nodes[sw[0]].desc +
                           "'): a partition cuts cables between switches and it has none; run with one rank");
    unsigned with_hosts = 0;
    for (const load& l : loads(t)) with_hosts += l.hosts > 0;
    if (ranks > with_hosts)
        throw config_error(
            head + count(with_hosts, "switch", "switches") + " with hosts" +
            ": every rank needs one (a host runs on the rank of its switch); run with at most " +
            count(with_hosts, "rank"));
}

/// fabric.partition=auto: the switches' ranks (rank_of, entries of non-switches unused).
std::vector<unsigned> auto_ranks(const topology& t, unsigned ranks) {
    const std::vector<load> l = loads(t);
    // The switches with hosts in node order, each with weight 1 + 4 x endports; a switch whose
    // only endport is the SM joins the switch with hosts before it (or, if none, after it).
    struct block_item {
        std::vector<unsigned> sw;
        uint64_t weight = 0;
    };
    std::vector<block_item> items;
    block_item pending;
    std::vector<unsigned> rank_of(t.nodes.size(), 0);
    unsigned spread = 0;  // switches without endports, round robin
    for (unsigned s : t.switches()) {
        if (l[s].endports == 0) {
            rank_of[s] = spread++ % ranks;
            continue;
        }
        block_item& into = l[s].hosts > 0 || items.empty() ? pending : items.back();
        into.sw.push_back(s);
        into.weight += 1 + 4 * uint64_t(l[s].endports);
        if (l[s].hosts > 0) {
            items.push_back(std::move(pending));
            pending = {};
        }
    }
    uint64_t total = 0;
    for (const block_item& it : items) total += it.weight;
    // Item i goes to the rank whose share of the total weight holds the middle of its weight,
    // but no rank is skipped and enough items are left for the ranks after it.
    const std::size_t n = items.size();  // >= ranks (check_fabric)
    uint64_t before = 0;
    unsigned prev = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const uint64_t mid = uint64_t(ranks) * (2 * before + items[i].weight) / (2 * total);
        uint64_t r = i == 0 ? 0 : std::min<uint64_t>(std::max<uint64_t>(mid, prev), prev + 1);
        if (ranks + i >= n) r = std::max<uint64_t>(r, ranks + i - n);
        prev = unsigned(r);
        for (unsigned s : items[i].sw) rank_of[s] = prev;
        before += items[i].weight;
    }
    return rank_of;
}

/// How a switch is named in a file and in errors: its NodeDescription if that names it alone
/// among the switches (and fits in quotes), else its GUID.
class switch_names {
public:
    explicit switch_names(const topology& t) : t_(t) {
        for (unsigned s : t.switches()) by_desc_[t.nodes[s].desc].push_back(s);
    }
    bool by_desc(unsigned s) const {
        const std::string& d = t_.nodes[s].desc;
        return !d.empty() && d.find('"') == std::string::npos && by_desc_.at(d).size() == 1;
    }
    std::string name(unsigned s) const { return by_desc(s) ? t_.nodes[s].desc : guid_text(t_.nodes[s].guid); }
    /// As a file writes it: quoted if it has blanks or '#', or could be read as a GUID.
    std::string written(unsigned s) const {
        const std::string n = name(s);
        const bool quote = by_desc(s) && (n.find_first_of(" \t#") != std::string::npos ||
                                          n.rfind("0x", 0) == 0 || n.rfind("0X", 0) == 0);
        return quote ? "\"" + n + "\"" : n;
    }
    const std::vector<unsigned>* switches_named(const std::string& desc) const {
        const auto it = by_desc_.find(desc);
        return it == by_desc_.end() ? nullptr : &it->second;
    }

private:
    const topology& t_;
    std::map<std::string, std::vector<unsigned>> by_desc_;
};

/// One line of a partition file: `<switch> <rank>`, the switch a NodeDescription (in double
/// quotes if it has blanks or '#') or 0x and a GUID; `#` starts a comment.
struct entry {
    bool blank = true;
    bool is_guid = false;
    uint64_t guid = 0;
    std::string name;  ///< as written, without quotes
    std::string rank;  ///< decimal digits
};

entry parse_entry(const std::string& s, const std::string& where) {
    auto blank_at = [&s](std::size_t i) {
        return i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r');
    };
    auto ends_at = [&s](std::size_t i) { return i >= s.size() || s[i] == '#'; };
    auto skip = [&](std::size_t& i) {
        while (blank_at(i)) ++i;
    };
    auto token = [&](std::size_t& i) {
        const std::size_t start = i;
        while (!ends_at(i) && !blank_at(i)) ++i;
        return s.substr(start, i - start);
    };
    std::size_t i = 0;
    skip(i);
    entry e;
    if (ends_at(i)) return e;
    e.blank = false;
    const std::size_t from = i;
    auto syntax = [&](const std::string& why) {
        std::string rest = s.substr(from, 60);
        while (!rest.empty() && (rest.back() == '\r' || rest.back() == ' ')) rest.pop_back();
        throw config_error(where + "syntax error: " + why + " in '" + rest + "' (expected: <switch> <rank>)");
    };
    if (s[i] == '"') {
        const std::size_t close = s.find('"', i + 1);
        if (close == std::string::npos) syntax("unterminated quote");
        e.name = s.substr(i + 1, close - i - 1);
        i = close + 1;
        if (!blank_at(i) && !ends_at(i)) syntax("no blank after the quoted switch");
    } else {
        e.name = token(i);
        if (e.name.size() > 2 && e.name[0] == '0' && (e.name[1] == 'x' || e.name[1] == 'X')) {
            const std::string digits = e.name.substr(2);
            if (digits.size() > 16 || digits.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
                syntax("'" + e.name + "' is not a GUID (0x and 1 to 16 hex digits; quote a name)");
            e.is_guid = true;
            e.guid = std::stoull(digits, nullptr, 16);
        }
    }
    skip(i);
    e.rank = token(i);
    if (e.rank.empty()) syntax("no rank");
    if (e.rank.find_first_not_of("0123456789") != std::string::npos)
        syntax("rank '" + e.rank + "' is not a decimal number");
    skip(i);
    if (!ends_at(i)) syntax("'" + token(i) + "' after the rank");
    return e;
}

/// fabric.partition=FILE: the switches' ranks as the file names them.
std::vector<unsigned> file_ranks(const topology& t, unsigned ranks, const std::string& path) {
    const switch_names names(t);
    std::map<uint64_t, unsigned> by_guid;
    for (unsigned i = 0; i < t.nodes.size(); ++i) by_guid.emplace(t.nodes[i].guid, i);
    std::vector<unsigned> rank_of(t.nodes.size(), 0);
    std::vector<std::size_t> line_of(t.nodes.size(), 0);  // the line naming a switch; 0: none yet
    text_file in(path, "partition file", 4096);
    std::string text;
    while (in.next(text)) {
        const std::string where = path + ":" + std::to_string(in.line_number()) + ": ";
        const entry e = parse_entry(text, where);
        if (e.blank) continue;
        const std::string shown = "'" + e.name + "'";
        unsigned s = 0;
        if (e.is_guid) {
            const auto it = by_guid.find(e.guid);
            if (it == by_guid.end())
                throw config_error(where + "no switch with GUID " + shown + " in the fabric");
            s = it->second;
            if (!t.nodes[s].is_switch())
                throw config_error(
                    where + shown + " is the GUID of '" + t.nodes[s].desc +
                    "', not a switch (an endport runs on the rank of the switch it is cabled to)");
        } else if (const std::vector<unsigned>* sw = names.switches_named(e.name)) {
            if (sw->size() > 1) {
                std::string guids;
                for (unsigned x : *sw) guids += (guids.empty() ? "" : ", ") + guid_text(t.nodes[x].guid);
                throw config_error(where + shown + " names " + std::to_string(sw->size()) + " switches (" +
                                   guids + "): name each by its GUID");
            }
            s = sw->front();
        } else {
            for (const topo_node& n : t.nodes)
                if (n.desc == e.name)
                    throw config_error(
                        where + shown +
                        " is not a switch (an endport runs on the rank of the switch it is cabled to)");
            throw config_error(where + "no switch " + shown + " in the fabric");
        }
        if (line_of[s])
            throw config_error(where + "switch '" + names.name(s) + "' named twice (also at line " +
                               std::to_string(line_of[s]) + ")");
        if (e.rank.size() > 9 || std::stoul(e.rank) >= ranks)
            throw config_error(where + "rank " + e.rank + " for switch '" + names.name(s) +
                               "', but the run has " + count(ranks, "rank") + " (0.." +
                               std::to_string(ranks - 1) + ")");
        line_of[s] = in.line_number();
        rank_of[s] = unsigned(std::stoul(e.rank));
    }
    std::vector<unsigned> missing;
    for (unsigned s : t.switches())
        if (!line_of[s]) missing.push_back(s);
    if (!missing.empty())
        throw config_error(
            path + ": does not cover the fabric: switch '" + names.name(missing[0]) + "'" +
            (missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : "") +
            " has no rank");
    return rank_of;
}

/// The partition given the switches' ranks: endports on their switch's rank, the cuts.
fabric_partition finish(const topology& t, unsigned ranks, std::vector<unsigned> rank_of) {
    fabric_partition p;
    p.ranks = ranks;
    for (unsigned i = 0; i < t.nodes.size(); ++i) {
        const topo_node& n = t.nodes[i];
        if (n.is_switch() || n.ports() < 1 || !n.peer[1].connected()) continue;
        const unsigned peer = unsigned(n.peer[1].node);
        rank_of[i] = t.nodes[peer].is_switch() ? rank_of[peer] : 0;
    }
    p.rank_of = std::move(rank_of);
    for (unsigned h : t.host_node) p.host_rank.push_back(p.rank_of[h]);
    for (unsigned a = 0; a < t.nodes.size(); ++a) {
        if (!t.nodes[a].is_switch()) continue;
        for (unsigned pa = 1; pa <= t.nodes[a].ports(); ++pa) {
            const topo_end e = t.nodes[a].peer[pa];
            if (!e.connected() || unsigned(e.node) <= a || !t.nodes[unsigned(e.node)].is_switch()) continue;
            if (p.rank_of[a] != p.rank_of[unsigned(e.node)])
                p.cuts.push_back({a, pa, unsigned(e.node), e.port});
        }
    }
    return p;
}

}  // namespace

fabric_partition make_partition(const topology& t, unsigned ranks, const std::string& spec) {
    if (ranks == 0) throw std::invalid_argument("make_partition: 0 ranks");
    if (ranks == 1) return finish(t, 1, std::vector<unsigned>(t.nodes.size(), 0));
    check_fabric(t, ranks);
    if (spec.empty()) throw config_error("fabric.partition is empty: 'auto' or the path of a partition file");
    if (spec == "auto") return finish(t, ranks, auto_ranks(t, ranks));
    fabric_partition p = finish(t, ranks, file_ranks(t, ranks, spec));
    std::vector<unsigned> hosts(ranks, 0);
    for (unsigned r : p.host_rank) ++hosts[r];
    for (unsigned r = 0; r < ranks; ++r)
        if (hosts[r] == 0) throw config_error(spec + ": rank " + std::to_string(r) + " has no host");
    return p;
}

void write_partition(const topology& t, const fabric_partition& p, std::ostream& out) {
    const switch_names names(t);
    const std::vector<load> l = loads(t);
    std::vector<unsigned> hosts(p.ranks, 0), switches(p.ranks, 0);
    for (unsigned r : p.host_rank) ++hosts[r];
    std::size_t width = 0;
    for (unsigned s : t.switches()) {
        ++switches[p.rank_of[s]];
        width = std::max(width, names.written(s).size());
    }
    out << "# hcasim partition: " << count(t.switches().size(), "switch", "switches") << " over "
        << count(p.ranks, "rank") << " (fabric.partition=FILE; docs/fabric.md, \"Partitioned runs\")\n";
    for (unsigned r = 0; r < p.ranks; ++r)
        out << "# rank " << r << ": " << count(hosts[r], "host") << ", "
            << count(switches[r], "switch", "switches") << "\n";
    out << "# " << count(p.cuts.size(), "cut cable") << "\n";
    for (unsigned s : t.switches()) {
        const std::string n = names.written(s);
        out << n << std::string(width - n.size() + 1, ' ') << p.rank_of[s];
        const bool sm = l[s].endports > l[s].hosts;
        if (l[s].endports)
            out << "  # " << (l[s].hosts ? count(l[s].hosts, "host") : "") << (l[s].hosts && sm ? ", " : "")
                << (sm ? "subnet manager" : "");
        out << "\n";
    }
}

}  // namespace hcasim
