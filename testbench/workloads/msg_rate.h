// msg_rate: the message rate of small messages (64 B unless --size), the figure an HCA is sold
// on. It is not a stream of its own: workload.op picks the bandwidth workload it runs (write_bw,
// read_bw, send_bw or ud_send_bw, with their --qps, workload.post_list and, once they take it,
// --threads), and the report puts the message rate first (docs/usage.md, "msg_rate").
#pragma once
#include <cstdint>
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

/// msg_rate's default message size (bytes).
constexpr uint64_t msg_rate_default_size = 64;
/// msg_rate's and qp_scale's --iters (per QP) unless given: about 20,000 messages over the QPs,
/// enough that the stream's start and drain are a small part of the measured interval, and at
/// least 4 on every QP (each QP's context is used more than once): max(4, ceil(20000 / qps)).
/// A run's length stays about the same from 1 to 5,000 QPs (20,000 to 20,480 messages); past
/// that the 4 per QP make it grow (65,536 messages at 16,384 QPs).
constexpr uint64_t default_messages = 20000;
constexpr uint64_t default_min_iters = 4;
inline uint64_t default_iters(unsigned qps) {
    const uint64_t q = qps ? qps : 1;
    const uint64_t per_qp = (default_messages + q - 1) / q;
    return per_qp > default_min_iters ? per_qp : default_min_iters;
}

}  // namespace hcasim::workloads
