// A timeline of the simulation as Chrome trace-event JSON (opens in Perfetto and
// chrome://tracing): one process per node, one track ("thread") per unit, a span for each
// packet on the wire, each PCIe transaction, each CQE write, and instants where a message
// passes the transport engine's stages (the path_probe stages). `hcasim --timeline FILE`.
// Written as the simulation goes (no events kept in memory); an absent timeline costs one
// branch per hook.
//
// Complete ("X") events on one thread must nest; a unit's spans overlap when it has several
// transactions outstanding (PCIe reads, posted writes). Each span goes to the first lane of its
// unit that is free at its start (every span of that lane ended by then): lane 1 is the unit's
// track, lane k > 1 a track of its own named "<unit> (k)", sorted under it. So the spans of any
// one track are disjoint.
#pragma once
#include <systemc>

#include <cstdint>
#include <string>
#include <vector>

#include "model/core/output_file.h"

namespace hcasim {

/// What a timeline keeps (--timeline-window, --timeline-nodes): spans that overlap the window
/// and instants inside it, of the nodes listed (all when none are).
struct timeline_filter {
    uint64_t from_ps = 0, to_ps = UINT64_MAX;  // [from, to) of simulated time
    std::vector<unsigned> nodes;               // empty: every node

    /// --timeline-window "START_NS:END_NS" (either number may be left out: from the start, to
    /// the end) and --timeline-nodes "0,1"; null: not given (all of the time, every node).
    /// Throws config_error naming the option, also when one is given without --timeline.
    static timeline_filter parse(const std::string* window, const std::string* nodes, bool timeline_given);
    /// Throws config_error if a listed node is not one of `count`.
    void check_nodes(unsigned count) const;
};

class timeline {
public:
    /// Opens `path` (an output_file); throws config_error if it cannot.
    explicit timeline(const std::string& path, timeline_filter filter = {});
    ~timeline() = default;  ///< not closed: the file is not written (the old one stays)
    timeline(const timeline&) = delete;
    timeline& operator=(const timeline&) = delete;

    /// A track of node `node` (its process "nodeN"), named `name`; returns its id.
    unsigned track(unsigned node, const std::string& name);
    /// A complete span [begin, end) on a track (on one of its lanes); `args` is a JSON object's
    /// members ("" for none), e.g. "\"psn\":5,\"qp\":72".
    void span(unsigned track, const char* name, const sc_core::sc_time& begin, const sc_core::sc_time& end,
              const std::string& args = "");
    /// A point in time on a track.
    void instant(unsigned track, const char* name, const sc_core::sc_time& at, const std::string& args = "");
    /// Ends the JSON and writes the file. Throws config_error on a write error.
    void close();
    /// "RC RDMA_WRITE_ONLY" etc. for a BTH opcode.
    static std::string opcode_name(uint8_t op);

private:
    struct lane {
        unsigned tid;
        uint64_t free_ps;  // every span of the lane ends by then
    };
    struct track_info {
        unsigned pid, tid;
        std::string name;
        bool kept;                // its node passes the filter
        std::vector<lane> lanes;  // lanes[0] is the track itself
    };
    void event_prefix();
    /// A track's name and place (thread_name, thread_sort_index metadata).
    void thread_name(unsigned pid, unsigned tid, const std::string& name, unsigned sort_index);
    /// The tid of the lane of `t` free at `begin_ps`, now busy until `end_ps`.
    unsigned lane_for(track_info& t, uint64_t begin_ps, uint64_t end_ps);

    output_file f_;
    timeline_filter filter_;
    std::vector<track_info> tracks_;
    std::vector<unsigned> next_tid_;  // per node
    bool first_ = true;
};

}  // namespace hcasim
