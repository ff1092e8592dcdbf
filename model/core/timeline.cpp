#include "model/core/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdlib>

#include "model/core/param.h"

namespace hcasim {

namespace {

/// Microseconds with picosecond digits (trace-event "ts" is in microseconds).
void print_us(output_file& f, uint64_t ps) { f.printf("%" PRIu64 ".%06" PRIu64, ps / 1000000, ps % 1000000); }

/// A decimal number of at most `max` (no sign, no suffix); false if `s` is not one.
bool decimal(const std::string& s, uint64_t max, uint64_t* v) {
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
    errno = 0;
    *v = std::strtoull(s.c_str(), nullptr, 10);
    return errno == 0 && *v <= max;
}

/// Lanes of one unit sort under it, in order (Perfetto's thread_sort_index).
constexpr unsigned LANES_SORTED = 1000;

}  // namespace

timeline_filter timeline_filter::parse(const std::string* window_given, const std::string* nodes_given,
                                       bool timeline_given) {
    if ((window_given || nodes_given) && !timeline_given)
        throw config_error(
            "--timeline-window and --timeline-nodes choose what --timeline FILE keeps; give --timeline");
    timeline_filter f;
    if (window_given) {
        const std::string& window = *window_given;
        constexpr uint64_t max_ns = UINT64_MAX / 1000;
        const size_t colon = window.find(':');
        const bool open_end = colon != std::string::npos && colon + 1 == window.size();
        uint64_t from = 0, to = 0;
        if (colon == std::string::npos || (colon > 0 && !decimal(window.substr(0, colon), max_ns, &from)) ||
            (!open_end && !decimal(window.substr(colon + 1), max_ns, &to)))
            throw config_error(
                "--timeline-window: expected START_NS:END_NS (nanoseconds of simulated time; either "
                "may be empty), got '" +
                window + "'");
        f.from_ps = from * 1000;
        if (!open_end) f.to_ps = to * 1000;
        if (f.from_ps >= f.to_ps)
            throw config_error("--timeline-window '" + window +
                               "': the window is empty (START_NS must be before END_NS)");
    }
    const std::string nodes = nodes_given ? *nodes_given : "";
    for (size_t at = 0; nodes_given && at <= nodes.size();) {
        const size_t comma = std::min(nodes.find(',', at), nodes.size());
        uint64_t n = 0;
        if (!decimal(nodes.substr(at, comma - at), UINT16_MAX, &n))
            throw config_error("--timeline-nodes: expected node numbers like 0,1, got '" + nodes + "'");
        f.nodes.push_back(unsigned(n));
        at = comma + 1;
    }
    return f;
}

void timeline_filter::check_nodes(unsigned count) const {
    for (unsigned n : nodes)
        if (n >= count)
            throw config_error("--timeline-nodes: there is no node " + std::to_string(n) +
                               " (the fabric has " + std::to_string(count) + " nodes, 0 to " +
                               std::to_string(count - 1) + ")");
}

timeline::timeline(const std::string& path, timeline_filter filter)
    : f_(path, "--timeline"), filter_(std::move(filter)) {
    f_.write("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
}

void timeline::close() {
    f_.write("\n]}\n");
    f_.commit();
}

void timeline::event_prefix() {
    if (!first_) f_.write(",\n");
    first_ = false;
}

void timeline::thread_name(unsigned pid, unsigned tid, const std::string& name, unsigned sort_index) {
    event_prefix();
    f_.printf("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"%s\"}}", pid,
              tid, name.c_str());
    event_prefix();
    f_.printf(
        "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
        pid, tid, sort_index);
}

unsigned timeline::track(unsigned node, const std::string& name) {
    const bool kept = filter_.nodes.empty() || std::count(filter_.nodes.begin(), filter_.nodes.end(), node);
    if (next_tid_.size() <= node) next_tid_.resize(node + 1, 0);
    if (next_tid_[node] == 0 && kept) {  // first track of the node: name its process
        event_prefix();
        f_.printf(
            "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":\"node%u\"}}",
            node, node);
        event_prefix();
        f_.printf(
            "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"tid\":0,\"args\":{\"sort_index\":%u}"
            "}",
            node, node);
    }
    const unsigned tid = ++next_tid_[node];
    tracks_.push_back({node, tid, name, kept, {{tid, 0}}});
    if (kept) thread_name(node, tid, name, tid * LANES_SORTED);
    return unsigned(tracks_.size() - 1);
}

unsigned timeline::lane_for(track_info& t, uint64_t begin_ps, uint64_t end_ps) {
    for (lane& l : t.lanes)
        if (l.free_ps <= begin_ps) {
            l.free_ps = end_ps;
            return l.tid;
        }
    const unsigned tid = ++next_tid_[t.pid];
    const unsigned k = unsigned(t.lanes.size());
    t.lanes.push_back({tid, end_ps});
    thread_name(t.pid, tid, t.name + " (" + std::to_string(k + 1) + ")",
                t.tid * LANES_SORTED + std::min(k, LANES_SORTED - 1));
    return tid;
}

void timeline::span(unsigned track, const char* name, const sc_core::sc_time& begin,
                    const sc_core::sc_time& end, const std::string& args) {
    track_info& t = tracks_.at(track);
    const uint64_t b = begin.value(), e = end > begin ? end.value() : b;
    if (!t.kept || b >= filter_.to_ps || (e <= filter_.from_ps && b < filter_.from_ps)) return;
    const unsigned tid = lane_for(t, b, e);
    event_prefix();
    f_.printf("{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", name, t.pid, tid);
    print_us(f_, b);
    f_.write(",\"dur\":");
    print_us(f_, e - b);
    if (!args.empty()) f_.printf(",\"args\":{%s}", args.c_str());
    f_.write("}");
}

void timeline::instant(unsigned track, const char* name, const sc_core::sc_time& at,
                       const std::string& args) {
    const track_info& t = tracks_.at(track);
    const uint64_t ps = at.value();
    if (!t.kept || ps < filter_.from_ps || ps >= filter_.to_ps) return;
    event_prefix();
    f_.printf("{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", name, t.pid, t.tid);
    print_us(f_, ps);
    if (!args.empty()) f_.printf(",\"args\":{%s}", args.c_str());
    f_.write("}");
}

std::string timeline::opcode_name(uint8_t op) {
    static const char* const transport[] = {"RC", "UC", "RD", "UD", "CNP", "XRC", "?", "?"};
    static const char* const ops[] = {"SEND_FIRST",
                                      "SEND_MIDDLE",
                                      "SEND_LAST",
                                      "SEND_LAST_IMM",
                                      "SEND_ONLY",
                                      "SEND_ONLY_IMM",
                                      "WRITE_FIRST",
                                      "WRITE_MIDDLE",
                                      "WRITE_LAST",
                                      "WRITE_LAST_IMM",
                                      "WRITE_ONLY",
                                      "WRITE_ONLY_IMM",
                                      "READ_REQUEST",
                                      "READ_RESPONSE_FIRST",
                                      "READ_RESPONSE_MIDDLE",
                                      "READ_RESPONSE_LAST",
                                      "READ_RESPONSE_ONLY",
                                      "ACK",
                                      "ATOMIC_ACK",
                                      "CMP_SWAP",
                                      "FETCH_ADD",
                                      "?",
                                      "SEND_LAST_INV",
                                      "SEND_ONLY_INV"};
    const unsigned o = op & 0x1F;
    return std::string(transport[op >> 5]) + " " + (o < sizeof ops / sizeof *ops ? ops[o] : "?");
}

}  // namespace hcasim
