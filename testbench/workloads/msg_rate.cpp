// msg_rate's operation; see msg_rate.h.
#include "testbench/workloads/msg_rate.h"

namespace hcasim::workloads {

msg_rate_op::msg_rate_op()
    : op_("workload.op", "write", "",
          "msg_rate: the operation whose message rate is measured; it runs as write_bw, read_bw, send_bw "
          "(RC) or ud_send_bw (UD)",
          {"write", "read", "send", "ud_send"}) {}

std::string msg_rate_op::bandwidth_workload() const { return op() + "_bw"; }

}  // namespace hcasim::workloads
