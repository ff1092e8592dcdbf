// msg_rate: the message rate of small messages (64 B unless --size), the figure an HCA is sold
// on. It is not a stream of its own: workload.op picks the bandwidth workload it runs (write_bw,
// read_bw, send_bw or ud_send_bw, with their --qps, workload.post_list and, once they take it,
// --threads), and the report puts the message rate first (docs/usage.md, "msg_rate").
#pragma once
#include <string>

#include "model/core/param.h"

namespace hcasim::workloads {

/// workload.op, declared while a msg_rate run is configured and runs (the stats JSON's
/// configuration lists it). Construct after the configuration is loaded: a value outside the
/// choices is a config_error naming the key and where it was set.
class msg_rate_op {
public:
    msg_rate_op();
    /// The operation: write|read|send|ud_send.
    const std::string& op() const { return op_.get(); }
    /// The bandwidth workload that sends it: write_bw|read_bw|send_bw|ud_send_bw.
    std::string bandwidth_workload() const;

private:
    param<std::string> op_;
};

/// msg_rate's default message size (bytes) and iteration count: 64 B, and enough messages that
/// the stream's start and drain are a small part of the measured interval.
constexpr uint64_t msg_rate_default_size = 64;
constexpr uint64_t msg_rate_default_iters = 20000;

}  // namespace hcasim::workloads
