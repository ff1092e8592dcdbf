// `hcasim replay FILE`: re-creates the machine a verbs-level trace was recorded on (or that a
// hand-written trace asks for), re-issues its calls, and compares the outcome with the recorded
// one: return values, completions (per CQ, in order), asynchronous events, final memory
// digests and, optionally, times. traces/README.md documents the format and the verdicts.
#pragma once

namespace hcasim {

/// Runs the replay command line (argv[1] is "replay"). Returns the exit status: 0 the outcome
/// equals the recording (or there was none to compare), 1 it diverges, 2 the trace or the
/// options are bad (nothing was run).
int replay_main(int argc, const char* const* argv);

}  // namespace hcasim
