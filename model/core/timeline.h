// A timeline of the simulation as Chrome trace-event JSON (opens in Perfetto and
// chrome://tracing): one process per node, one track ("thread") per unit, a span for each
// packet on the wire, each PCIe transaction, each CQE write, and instants where a message
// passes the transport engine's stages (the path_probe stages). `hcasim --timeline FILE`.
// Written as the simulation goes (no events kept in memory); an absent timeline costs one
// branch per hook.
#pragma once
#include <systemc>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace hcasim {

class timeline {
public:
    /// Opens `path`; throws config_error if it cannot.
    explicit timeline(const std::string& path);
    ~timeline();
    timeline(const timeline&) = delete;
    timeline& operator=(const timeline&) = delete;

    /// A track of node `node` (its process "nodeN"), named `name`; returns its id.
    unsigned track(unsigned node, const std::string& name);
    /// A complete span [begin, end) on a track; `args` is a JSON object's members ("" for none),
    /// e.g. "\"psn\":5,\"qp\":72".
    void span(unsigned track, const char* name, const sc_core::sc_time& begin, const sc_core::sc_time& end,
              const std::string& args = "");
    /// A point in time on a track.
    void instant(unsigned track, const char* name, const sc_core::sc_time& at, const std::string& args = "");
    /// "RC RDMA_WRITE_ONLY" etc. for a BTH opcode.
    static std::string opcode_name(uint8_t op);

private:
    void event_prefix();
    std::FILE* f_;
    std::vector<std::pair<unsigned, unsigned>> tracks_;  // id -> (pid, tid)
    std::vector<unsigned> next_tid_;                     // per node
    bool first_ = true;
};

}  // namespace hcasim
