// A verbs-level trace read and checked before anything runs (load): its header, its calls (each
// known, its fields known and typed, its references to objects created before it, its buffers in
// bounds) and its recorded events and end record. traces/README.md documents the format.
#pragma once
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "testbench/replay/verbs_trace.h"

namespace hcasim::replay {

using trace::json;

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

/// The calls a trace may hold, in the order of the format's documentation.
const std::vector<call_spec>& calls();
/// The call named `name`, or nullptr.
const call_spec* spec_of(const std::string& name);

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
bool split_ref(const std::string& ref, unsigned own, unsigned* node, std::string* name);

/// Reads and checks the trace at `path`; throws trace_error ("file:line: why") if it is bad.
trace_file load(const std::string& path);

}  // namespace hcasim::replay
