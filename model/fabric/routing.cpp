// The subnet manager's routing engines (routing.h), following OpenSM's algorithms as
// doc/current-routing.txt and osm_ucast_mgr.c / osm_switch.c describe them; docs/fabric.md
// ("Routing") states what each guarantees and the exact tie-breaks.
#include "model/fabric/routing.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <tuple>
#include <utility>

#include "model/core/param.h"

namespace hcasim {
namespace {

constexpr int UNREACHED = std::numeric_limits<int>::max();

/// An endport to route: an HCA port (2^lmc LIDs) or a switch's port 0 (one LID), with the
/// switch and port its packets leave the fabric through (the switch itself and port 0).
struct endport {
    unsigned node = 0;
    unsigned lids = 1;
    int sw = -1;        ///< node index of the switch it hangs off; -1: not cabled to one
    unsigned port = 0;  ///< that switch's port to it (0 for a switch's own LID)
    bool is_switch = false;
};

/// The graph as the engines see it: switches, and endports in OpenSM's routing order
/// (ucast_mgr_build_lfts: the CAs of the switches with the most CA links first, ties in GUID
/// order, each switch's CAs in port order; then the other endports, the switches' own LIDs,
/// in port GUID order).
struct view {
    const topology& t;
    std::string key;            ///< "fabric.routing=minhop", the prefix of errors
    std::vector<unsigned> sws;  ///< switch node indices in node order
    std::vector<endport> eps;
    unsigned lid_end = 0;  ///< one past the highest LID

    view(const topology& topo, const std::string& engine) : t(topo), key("fabric.routing=" + engine) {
        for (unsigned n = 0; n < t.nodes.size(); ++n) {
            const topo_node& nd = t.nodes[n];
            if (nd.is_switch()) sws.push_back(n);
            unsigned lids = nd.is_switch() ? 1u : 1u << t.lmc;
            lid_end = std::max(lid_end, unsigned(nd.lid) + lids);
        }
        // Port GUIDs: a switch's port 0 has the node GUID, an HCA's port p node GUID + p.
        auto port_guid = [&](unsigned n) {
            return std::make_pair(t.nodes[n].guid + !t.nodes[n].is_switch(), n);
        };
        std::vector<unsigned> by_guid(t.nodes.size());
        for (unsigned n = 0; n < by_guid.size(); ++n) by_guid[n] = n;
        std::sort(by_guid.begin(), by_guid.end(),
                  [&](unsigned a, unsigned b) { return port_guid(a) < port_guid(b); });
        std::vector<std::pair<unsigned, unsigned>> load;  // (CA links, switch)
        for (unsigned s : by_guid) {
            if (!t.nodes[s].is_switch()) continue;
            unsigned cas = 0;
            for (unsigned p = 1; p <= t.nodes[s].ports(); ++p)
                if (is_ca(t.nodes[s].peer[p])) ++cas;
            load.emplace_back(cas, s);
        }
        std::stable_sort(load.begin(), load.end(), [](auto& a, auto& b) { return a.first > b.first; });
        std::vector<bool> listed(t.nodes.size(), false);
        for (auto& [cas, s] : load)
            for (unsigned p = 1; p <= t.nodes[s].ports(); ++p) {
                const topo_end& e = t.nodes[s].peer[p];
                if (!is_ca(e) || listed[unsigned(e.node)]) continue;
                listed[unsigned(e.node)] = true;
                eps.push_back({unsigned(e.node), 1u << t.lmc, int(s), p, false});
            }
        for (unsigned n : by_guid) {
            if (t.nodes[n].is_switch())
                eps.push_back({n, 1, int(n), 0, true});
            else if (!listed[n])
                eps.push_back({n, 1u << t.lmc, -1, 0, false});
        }
    }
    bool is_ca(const topo_end& e) const { return e.connected() && !t.nodes[unsigned(e.node)].is_switch(); }
    bool sw_link(unsigned s, unsigned p) const {
        const topo_end& e = t.nodes[s].peer[p];
        return e.connected() && t.nodes[unsigned(e.node)].is_switch() && unsigned(e.node) != s;
    }
    unsigned peer(unsigned s, unsigned p) const { return unsigned(t.nodes[s].peer[p].node); }
    std::string name(const endport& e) const {
        return t.nodes[e.node].desc + " (LID " + std::to_string(t.nodes[e.node].lid) + ")";
    }
    [[noreturn]] void fail(const std::string& what) const { throw config_error(key + ": " + what); }
    /// Breadth first over switch-to-switch links from the switches in `q` (their `d` set):
    /// every other switch's `d` becomes the hops from the nearest of them.
    void spread(std::vector<int>& d, std::deque<unsigned> q) const {
        while (!q.empty()) {
            unsigned x = q.front();
            q.pop_front();
            for (unsigned p = 1; p <= t.nodes[x].ports(); ++p)
                if (sw_link(x, p) && d[peer(x, p)] == UNREACHED) {
                    d[peer(x, p)] = d[x] + 1;
                    q.push_back(peer(x, p));
                }
        }
    }
    /// Hop counts from every switch to switch `to`.
    std::vector<int> distances(unsigned to) const {
        std::vector<int> d(t.nodes.size(), UNREACHED);
        d[to] = 0;
        spread(d, {to});
        return d;
    }
};

/// Every HCA hangs off a switch (when there are switches at all).
void check_cabled(const view& v) {
    if (v.sws.empty()) return;
    for (const endport& e : v.eps)
        if (e.sw < 0) v.fail(v.name(e) + " is not cabled to a switch: no switch can reach it");
}

/// candidates[s] = the ports of switch s (node index) on the paths the engine allows to a
/// target switch, all of equal length; empty where there is no path.
using candidates = std::vector<std::vector<uint8_t>>;

/// OpenSM's port choice among equal-cost ports (osm_switch_recommend_path without port
/// shifting or scattering), switch by switch, LID offset by LID offset, endport by endport:
/// the port with the fewest CA LIDs routed through it so far, the first found scanning from
/// port `start` (1, or one past the port of the previous LID of the same endport) with
/// wrap-around. With LMC > 0, a port to a neighbour none of the endport's earlier LIDs went to
/// comes first; among ports that all lead to used neighbours, ties go to the neighbour used
/// least by this endport. Switch LIDs are routed but not counted (port_profile_switch_nodes
/// off).
routing_tables balance(const view& v, const std::vector<candidates>& per_target) {
    const topology& t = v.t;
    routing_tables r;
    r.lft.assign(t.nodes.size(), {});
    unsigned max_lids = 1u << t.lmc;
    for (unsigned s : v.sws) {
        std::vector<uint8_t>& lft = r.lft[s];
        lft.assign(v.lid_end, routing_tables::NO_PATH);
        unsigned nports = t.nodes[s].ports() + 1;
        std::vector<unsigned> paths(nports, 0);
        // Per endport: how many of its LIDs this switch sent to each neighbour node.
        std::vector<std::vector<std::pair<unsigned, unsigned>>> used(v.eps.size());
        for (unsigned off = 0; off < max_lids; ++off)
            for (unsigned ei = 0; ei < v.eps.size(); ++ei) {
                const endport& e = v.eps[ei];
                if (off >= e.lids || e.sw < 0) continue;
                unsigned lid = t.nodes[e.node].lid + off;
                uint8_t port;
                if (unsigned(e.sw) == s) {
                    port = uint8_t(e.port);
                } else {
                    const std::vector<uint8_t>& cand = per_target[unsigned(e.sw)][s];
                    if (cand.empty()) {
                        if (e.is_switch) continue;  // reported for CAs only
                        v.fail("no path from switch " + t.nodes[s].desc + " to " + v.name(e));
                    }
                    auto times_used = [&](unsigned p) -> int {
                        for (auto& [node, n] : used[ei])
                            if (node == v.peer(s, p)) return int(n);
                        return -1;
                    };
                    unsigned start = off ? lft[lid - 1] + 1u : 1u;
                    int best = -1, best_new = -1;
                    for (unsigned i = start; i < start + nports; ++i) {
                        unsigned p = i % nports;
                        if (!p || !std::binary_search(cand.begin(), cand.end(), uint8_t(p))) continue;
                        if (best < 0 || paths[p] < paths[unsigned(best)] ||
                            (t.lmc && paths[p] == paths[unsigned(best)] &&
                             times_used(p) < times_used(unsigned(best))))
                            best = int(p);
                        if (t.lmc && times_used(p) < 0 &&
                            (best_new < 0 || paths[p] < paths[unsigned(best_new)]))
                            best_new = int(p);
                    }
                    port = uint8_t(best_new >= 0 ? best_new : best);
                }
                lft[lid] = port;
                if (e.is_switch || port == 0) continue;
                ++paths[port];
                unsigned to = v.peer(s, port);
                auto it =
                    std::find_if(used[ei].begin(), used[ei].end(), [&](auto& u) { return u.first == to; });
                if (it == used[ei].end())
                    used[ei].emplace_back(to, 1);
                else
                    ++it->second;
            }
    }
    return r;
}

/// minhop: every port on a shortest switch path.
std::vector<candidates> minhop_candidates(const view& v) {
    std::vector<candidates> per(v.t.nodes.size());
    for (unsigned a : v.sws) {
        std::vector<int> d = v.distances(a);
        candidates& c = per[a];
        c.assign(v.t.nodes.size(), {});
        for (unsigned s : v.sws) {
            if (s == a || d[s] == UNREACHED) continue;
            for (unsigned p = 1; p <= v.t.nodes[s].ports(); ++p)
                if (v.sw_link(s, p) && d[v.peer(s, p)] == d[s] - 1) c[s].push_back(uint8_t(p));
        }
    }
    return per;
}

/// updn's roots: the switches farthest from any host (from any CA when there is no host).
std::vector<unsigned> updn_roots(const view& v) {
    const topology& t = v.t;
    bool hosts = t.hosts() > 0;
    std::vector<int> to_ca(t.nodes.size(), UNREACHED);  // hops to the nearest CA's switch
    std::deque<unsigned> q;
    for (const endport& e : v.eps)
        if (!e.is_switch && e.sw >= 0 && (!hosts || !t.nodes[e.node].is_sm) &&
            to_ca[unsigned(e.sw)] == UNREACHED)
            to_ca[unsigned(e.sw)] = 0, q.push_back(unsigned(e.sw));
    v.spread(to_ca, std::move(q));
    int farthest = -1;
    for (unsigned s : v.sws)
        if (to_ca[s] != UNREACHED) farthest = std::max(farthest, to_ca[s]);
    std::vector<unsigned> roots;
    for (unsigned s : v.sws)
        if (to_ca[s] == farthest) roots.push_back(s);
    if (roots.empty()) roots.push_back(v.sws.front());
    return roots;
}

/// updn from `roots`: switches ranked by BFS distance from them; a link is "up" towards the
/// smaller (rank, GUID, node) key; ports on the shortest legal paths (up*, then down*) that a
/// per-destination table can follow. No route turns from down to up, so the channel
/// dependencies cannot form a cycle.
std::vector<candidates> updn_from(const view& v, const std::vector<unsigned>& roots) {
    const topology& t = v.t;
    std::vector<int> rank(t.nodes.size(), UNREACHED);
    std::deque<unsigned> q;
    for (unsigned s : roots) rank[s] = 0, q.push_back(s);
    v.spread(rank, std::move(q));
    q.clear();
    auto key = [&](unsigned s) { return std::make_tuple(rank[s], t.nodes[s].guid, s); };
    auto up = [&](unsigned from, unsigned to) { return key(to) < key(from); };
    std::vector<unsigned> by_key = v.sws;
    std::sort(by_key.begin(), by_key.end(), [&](unsigned a, unsigned b) { return key(a) < key(b); });

    std::vector<candidates> per(t.nodes.size());
    for (unsigned a : v.sws) {
        // down[s]: hops from s to a on down links only (BFS from a along up links).
        std::vector<int> down(t.nodes.size(), UNREACHED);
        down[a] = 0;
        q.push_back(a);
        while (!q.empty()) {
            unsigned x = q.front();
            q.pop_front();
            for (unsigned p = 1; p <= t.nodes[x].ports(); ++p) {
                if (!v.sw_link(x, p)) continue;
                unsigned s = v.peer(x, p);
                if (up(x, s) && down[s] == UNREACHED) down[s] = down[x] + 1, q.push_back(s);
            }
        }
        // cost[s]: hops of the route from s. A switch goes down (the fewest hops) if that is no
        // longer than climbing first; else it climbs, on the fewest hops of a legal route (up
        // links lead to smaller keys: computed first in key order). A switch that a route
        // enters going down must go on down, however long that is (`held`); holding one can
        // lengthen others' climbs and turn them down, so repeat until nothing changes.
        std::vector<bool> held(t.nodes.size(), false);
        candidates& c = per[a];
        for (bool changed = true; changed;) {
            changed = false;
            std::vector<int> cost = down;
            for (unsigned s : by_key) {
                if (held[s]) continue;
                for (unsigned p = 1; p <= t.nodes[s].ports(); ++p)
                    if (v.sw_link(s, p) && up(s, v.peer(s, p)) && cost[v.peer(s, p)] != UNREACHED)
                        cost[s] = std::min(cost[s], cost[v.peer(s, p)] + 1);
            }
            c.assign(t.nodes.size(), {});
            for (unsigned s : v.sws) {
                if (s == a || cost[s] == UNREACHED) continue;
                bool going_down = cost[s] == down[s];
                for (unsigned p = 1; p <= t.nodes[s].ports(); ++p) {
                    if (!v.sw_link(s, p)) continue;
                    unsigned n = v.peer(s, p);
                    if (going_down ? (up(s, n) || down[n] != down[s] - 1)
                                   : (!up(s, n) || cost[n] != cost[s] - 1))
                        continue;
                    c[s].push_back(uint8_t(p));
                    if (going_down && !held[n]) held[n] = true, changed |= cost[n] != down[n];
                }
            }
        }
    }
    return per;
}

/// updn: from the detected roots; if they leave a switch without a legal route to some
/// switch with CAs (roots whose down links do not reach everything), from the one of them with
/// the smallest GUID instead: every switch climbs to a single root, which reaches every switch
/// going down.
std::vector<candidates> updn_candidates(const view& v) {
    std::vector<unsigned> roots = updn_roots(v);
    std::vector<candidates> per = updn_from(v, roots);
    for (const endport& e : v.eps) {
        if (e.is_switch || e.sw < 0 || roots.size() < 2) continue;
        for (unsigned s : v.sws)
            if (s != unsigned(e.sw) && per[unsigned(e.sw)][s].empty()) {
                auto guid = [&](unsigned n) { return std::make_pair(v.t.nodes[n].guid, n); };
                unsigned one = *std::min_element(roots.begin(), roots.end(),
                                                 [&](unsigned a, unsigned b) { return guid(a) < guid(b); });
                return updn_from(v, {one});
            }
    }
    return per;
}

/// ftree: OpenSM's fat-tree routing in its essentials. Switches are ranked from the leaves
/// (the switches with hosts): level 0 up to the roots. For each destination (hosts in leaf
/// and port order, then other CAs, then switches) a main path climbs from its switch, the
/// up port at each level chosen by the destination's index (index mod up ports at the leaf,
/// (index / up ports of the leaf) mod up ports one level higher, ...); the main path's
/// switches route down along it. Switches with a path down to the destination route down
/// (their down port number index mod count among those); every other switch routes up,
/// towards the lowest main-path switch above it, else to any switch that has a route.
/// Routes are up* then down*: no credit loops.
routing_tables route_ftree(const view& v) {
    const topology& t = v.t;
    if (t.lmc)
        v.fail("LMC " + std::to_string(t.lmc) + " is not supported by fat-tree routing (as in OpenSM)");
    const std::string not_ft = "not a fat tree: ";
    std::vector<int> level(t.nodes.size(), UNREACHED);
    std::deque<unsigned> q;
    for (const endport& e : v.eps)
        if (!e.is_switch && !t.nodes[e.node].is_sm && e.sw >= 0 && level[unsigned(e.sw)] == UNREACHED)
            level[unsigned(e.sw)] = 0, q.push_back(unsigned(e.sw));
    if (q.empty()) v.fail(not_ft + "no host is cabled to a switch");
    v.spread(level, q);
    q.clear();
    int top = 0;
    std::vector<std::vector<uint8_t>> ups(t.nodes.size()), downs(t.nodes.size());
    for (unsigned s : v.sws) {
        if (level[s] == UNREACHED)
            v.fail(not_ft + "switch " + t.nodes[s].desc + " is not connected to a leaf");
        top = std::max(top, level[s]);
        for (unsigned p = 1; p <= t.nodes[s].ports(); ++p) {
            if (!v.sw_link(s, p)) continue;
            unsigned n = v.peer(s, p);
            if (level[n] == level[s])
                v.fail(not_ft + t.nodes[s].desc + " and " + t.nodes[n].desc +
                       " are cabled to each other at level " + std::to_string(level[s]));
            (level[n] > level[s] ? ups : downs)[s].push_back(uint8_t(p));
        }
    }
    if (top + 1 < 2 || top + 1 > 8)
        v.fail(not_ft + std::to_string(top + 1) + " switch level(s); fat-tree routing needs 2 to 8");
    // Switches of one level agree on their numbers of up and down (switch) ports.
    std::vector<int> first(unsigned(top) + 1, -1);
    for (unsigned s : v.sws) {
        unsigned l = unsigned(level[s]);
        if (first[l] < 0) {
            first[l] = int(s);
            if (int(l) < top && ups[s].empty())
                v.fail(not_ft + t.nodes[s].desc + " has no up ports below the top level");
            continue;
        }
        unsigned f = unsigned(first[l]);
        for (auto [what, mine, theirs] : {std::make_tuple("up", ups[s].size(), ups[f].size()),
                                          std::make_tuple("down", downs[s].size(), downs[f].size())})
            if (mine != theirs)
                v.fail(not_ft + t.nodes[s].desc + " has " + std::to_string(mine) + " " + what +
                       " ports to switches, " + t.nodes[f].desc + " has " + std::to_string(theirs) +
                       " (both level " + std::to_string(l) + ")");
    }

    routing_tables r;
    r.lft.assign(t.nodes.size(), {});
    for (unsigned s : v.sws) r.lft[s].assign(v.lid_end, routing_tables::NO_PATH);
    // Hosts in leaf and port order take indices 0, 1, ...; then the other endports.
    std::vector<const endport*> order;
    for (const endport& e : v.eps)
        if (!e.is_switch && e.sw >= 0 && !t.nodes[e.node].is_sm) order.push_back(&e);
    std::stable_sort(order.begin(), order.end(), [](const endport* a, const endport* b) {
        return std::tie(a->sw, a->port) < std::tie(b->sw, b->port);
    });
    for (const endport& e : v.eps)
        if (e.sw >= 0 && (e.is_switch || t.nodes[e.node].is_sm)) order.push_back(&e);

    for (unsigned idx = 0; idx < order.size(); ++idx) {
        const endport& e = *order[idx];
        unsigned lid = t.nodes[e.node].lid;
        auto set = [&](unsigned s, unsigned p) { r.lft[s][lid] = uint8_t(p); };
        unsigned a = unsigned(e.sw);
        set(a, e.port);
        // Down-capable: the switches above `a` that reach it going down only.
        std::vector<bool> below(t.nodes.size(), false), routed(t.nodes.size(), false);
        below[a] = routed[a] = true;
        q.push_back(a);
        while (!q.empty()) {
            unsigned x = q.front();
            q.pop_front();
            for (uint8_t p : ups[x])
                if (!below[v.peer(x, p)]) below[v.peer(x, p)] = true, q.push_back(v.peer(x, p));
        }
        // The main path.
        std::vector<unsigned> chain{a};
        for (unsigned x = a, div = 1; !ups[x].empty();) {
            unsigned p = ups[x][(idx / div) % ups[x].size()];
            div *= unsigned(ups[x].size());
            unsigned n = v.peer(x, p);
            set(n, t.nodes[x].peer[p].port);
            routed[n] = true;
            chain.push_back(n);
            x = n;
        }
        // Ports of s towards a neighbour n that satisfies `ok`, by index.
        auto pick = [&](unsigned s, const std::vector<uint8_t>& ports, auto ok) -> int {
            std::vector<uint8_t> c;
            for (uint8_t p : ports)
                if (ok(v.peer(s, p))) c.push_back(p);
            return c.empty() ? -1 : c[idx % c.size()];
        };
        for (unsigned s : v.sws)
            if (below[s] && !routed[s]) {
                set(s, unsigned(pick(s, downs[s], [&](unsigned n) { return below[n]; })));
                routed[s] = true;
            }
        // Up routes towards the main path, lowest main-path switch first.
        for (unsigned c : chain) {
            q.push_back(c);
            while (!q.empty()) {
                unsigned x = q.front();
                q.pop_front();
                for (uint8_t p : downs[x]) {
                    unsigned n = v.peer(x, p);
                    if (routed[n]) continue;
                    set(n, unsigned(pick(n, ups[n], [&](unsigned m) { return m == x; })));
                    routed[n] = true;
                    q.push_back(n);
                }
            }
        }
        // The rest, from the top down: up to any neighbour that has a route.
        for (int l = top; l >= 0; --l)
            for (unsigned s : v.sws) {
                if (level[s] != l || routed[s]) continue;
                int p = pick(s, ups[s], [&](unsigned n) { return bool(routed[n]); });
                if (p < 0 && e.is_switch) continue;  // e.g. root to root: no up*/down* path, as in updn
                if (p < 0) v.fail(not_ft + "no up/down route from " + t.nodes[s].desc + " to " + v.name(e));
                set(s, unsigned(p));
                routed[s] = true;
            }
    }
    return r;
}

}  // namespace

routing_tables route(const topology& t, const std::string& engine) {
    if (engine != "minhop" && engine != "updn" && engine != "ftree")
        throw config_error("fabric.routing: unknown routing engine '" + engine + "' (minhop, updn or ftree)");
    view v(t, engine);
    check_cabled(v);
    routing_tables r;
    if (v.sws.empty())  // back to back: nothing to route
        r.lft.assign(t.nodes.size(), {});
    else if (engine == "ftree")
        r = route_ftree(v);
    else
        r = balance(v, engine == "minhop" ? minhop_candidates(v) : updn_candidates(v));
    r.engine = engine;
    return r;
}

std::vector<std::pair<unsigned, unsigned>> dependency_cycle(const topology& t, const routing_tables& r) {
    // Channels (node, output port) numbered node by node, port by port.
    std::vector<unsigned> base(t.nodes.size() + 1, 0);
    for (unsigned n = 0; n < t.nodes.size(); ++n) base[n + 1] = base[n] + t.nodes[n].ports() + 1;
    std::vector<std::vector<unsigned>> next(base.back());
    auto is_sw = [&](unsigned n) { return t.nodes[n].is_switch() && n < r.lft.size() && !r.lft[n].empty(); };
    // Routes from every CA to every LID of every other CA (switch LIDs carry management
    // packets on VL15 only, which is not flow controlled and cannot deadlock).
    std::vector<unsigned> stamp(t.nodes.size(), 0);
    unsigned now = 0;
    for (unsigned dst = 0; dst < t.nodes.size(); ++dst) {
        if (t.nodes[dst].is_switch()) continue;
        for (unsigned off = 0; off < (1u << t.lmc); ++off) {
            unsigned lid = t.nodes[dst].lid + off;
            ++now;
            for (unsigned src = 0; src < t.nodes.size(); ++src) {
                if (src == dst || t.nodes[src].is_switch() || t.nodes[src].ports() < 1) continue;
                const topo_end& first = t.nodes[src].peer[1];
                if (!first.connected() || !is_sw(unsigned(first.node))) continue;
                int prev = -1;
                for (unsigned s = unsigned(first.node);;) {
                    if (lid >= r.lft[s].size()) break;
                    unsigned p = r.lft[s][lid];
                    if (p == 0 || p > t.nodes[s].ports() || !t.nodes[s].peer[p].connected()) break;
                    unsigned ch = base[s] + p;
                    if (prev >= 0) next[unsigned(prev)].push_back(ch);
                    if (stamp[s] == now) break;  // the rest of this route is recorded already
                    stamp[s] = now;
                    unsigned n = unsigned(t.nodes[s].peer[p].node);
                    if (!is_sw(n)) break;
                    prev = int(ch);
                    s = n;
                }
            }
        }
    }
    for (auto& a : next) {
        std::sort(a.begin(), a.end());
        a.erase(std::unique(a.begin(), a.end()), a.end());
    }
    // Depth-first search in channel order; the first back edge closes the cycle.
    std::vector<uint8_t> color(next.size(), 0);        // 0 new, 1 on the stack, 2 done
    std::vector<std::pair<unsigned, unsigned>> stack;  // (channel, next edge to follow)
    std::vector<unsigned> cycle;
    for (unsigned root = 0; root < next.size() && cycle.empty(); ++root) {
        if (color[root]) continue;
        stack.push_back({root, 0});
        color[root] = 1;
        while (!stack.empty() && cycle.empty()) {
            auto& [c, i] = stack.back();
            if (i == next[c].size()) {
                color[c] = 2;
                stack.pop_back();
                continue;
            }
            unsigned n = next[c][i++];
            if (color[n] == 0) {
                color[n] = 1;
                stack.push_back({n, 0});
            } else if (color[n] == 1) {
                auto from = std::find_if(stack.begin(), stack.end(), [&](auto& f) { return f.first == n; });
                for (auto it = from; it != stack.end(); ++it) cycle.push_back(it->first);
            }
        }
    }
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    std::vector<std::pair<unsigned, unsigned>> out;
    for (unsigned ch : cycle) {
        unsigned n = unsigned(std::upper_bound(base.begin(), base.end(), ch) - base.begin()) - 1;
        out.emplace_back(n, ch - base[n]);
    }
    return out;
}

route_trace trace_route(const topology& t, const routing_tables& r, unsigned src, uint16_t dlid) {
    route_trace out;
    if (t.nodes[src].ports() < 1 || !t.nodes[src].peer[1].connected()) return out;
    unsigned n = unsigned(t.nodes[src].peer[1].node);
    while (t.nodes[n].is_switch()) {
        if (n >= r.lft.size() || dlid >= r.lft[n].size()) return out;
        unsigned p = r.lft[n][dlid];
        if (p == 0) {
            out.delivered_to = int(n);
            return out;
        }
        if (p > t.nodes[n].ports() || !t.nodes[n].peer[p].connected() || out.channels.size() > t.nodes.size())
            return out;  // no route, or going round a loop
        out.channels.emplace_back(n, p);
        n = unsigned(t.nodes[n].peer[p].node);
    }
    out.delivered_to = int(n);
    return out;
}

std::string describe_channels(const topology& t, const std::vector<std::pair<unsigned, unsigned>>& ch) {
    std::string s;
    for (auto& [node, port] : ch) {
        if (!s.empty()) s += " -> ";
        s += t.nodes[node].desc + "/p" + std::to_string(port);
    }
    return s;
}

}  // namespace hcasim
