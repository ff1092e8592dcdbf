// The live HCA the port fuzzer attacks (docs/fuzzing.md). Two nodes back to back; node1 is
// the target: its software (through the verbs API, in a host-CPU process) holds RC QPs in every
// state — Reset, Init, RTR, RTS (several flavours), SQD, Error — with posted receives, MRs with
// remote read/write/atomic rights and requests in flight towards a peer that never answers
// (node0 has no QPs, so the fuzzer is the only one who acknowledges them). Fuzz packets enter
// node1's port receive side directly (`port.rx` export), as if node0's cable had sent them.
//
// SystemC elaborates once per process, so the bench is built once (bench()) and serves every
// input: before each input the QPs an earlier input changed are taken back to their planned
// state (Reset, then up again, receives and in-flight requests posted anew), then the input's
// packets are injected at their gaps and the simulation runs until nothing is pending; then the
// completions and memory the input left are checked. Broken invariants abort() with a message
// naming them (libFuzzer saves the input):
//   - still busy after fuzz::MAX_INPUT_SIM_NS of simulated time (hang);
//   - the control process blocked (a verb that never returned, a wedged command interface);
//   - a SystemC error report; a verb failing while restoring the planned states;
//   - a completion for a work request not outstanding (unknown or completed twice);
//   - a CQ overrun; memory without remote write access changed.
#pragma once
#include <systemc>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "firmware/verbs.h"
#include "model/system/fabric.h"
#include "testbench/fuzz/fuzz_input.h"
#include "testbench/host_software.h"

namespace hcasim::fuzz {

/// Simulated time after which an input that still has events pending counts as a hang (ns):
/// far beyond the longest RNR timer (655 ms) a few times over.
constexpr uint64_t MAX_INPUT_SIM_NS = 30'000'000'000ull;

/// Requests a QP of the target sends towards the silent peer.
enum class sends : uint8_t {
    none,      ///< none
    inflight,  ///< a few small requests, posted at the restore: all sent, awaiting ACK, when the input starts
    busy,      ///< a 32 KiB WRITE and a 4 KiB SEND posted as the input starts (only if a record targets
               ///< the QP): still being sent while the input's packets arrive (NAKs mid-message)
    timed,     ///< the inflight requests, posted as the input starts (only if a record targets the QP),
               ///< on a QP with a 131 us local ACK timeout and 3 retries: timeouts run during the input
};

/// One RC QP of the target and the state it is kept in.
struct qp_plan {
    const char* name;
    verbs::ibv_qp_state state;  ///< planned state
    unsigned mtu;               ///< path MTU bytes
    bool remote_access;         ///< remote write/read/atomic rights (else local write only)
    unsigned recvs;             ///< receive WRs posted (two SGEs each)
    uint32_t recv_bytes;        ///< capacity of each receive WR
    fuzz::sends sends;          ///< requests towards the silent peer
    uint16_t pkey_index;        ///< P_Key table index (1 = a limited-member partition)
    uint8_t min_rnr_timer;      ///< RNR NAK timer code the QP sends
    uint32_t sq_psn, rq_psn;    ///< initial PSNs
};

class control_module;

class port_bench {
public:
    /// Builds the machine and the target's software; elaborates. Once per process.
    port_bench();
    ~port_bench();
    port_bench(const port_bench&) = delete;
    port_bench& operator=(const port_bench&) = delete;

    /// Runs the setup (device, PD, CQs, MRs, QPs in every state) to completion.
    void start();
    /// Runs one input (see fuzz_input.h); aborts on a broken invariant.
    void run_input(const uint8_t* data, size_t size);

    /// Targets a record's sel chooses from: the live QPs (plans()) then the invalid QPNs.
    size_t target_count() const { return targets_.size(); }
    /// Name, QPN and P_Key of target i (for the seed generator and messages).
    const std::string& target_name(size_t i) const { return targets_.at(i).name; }
    uint32_t target_qpn(size_t i) const { return targets_.at(i).qpn; }
    uint16_t target_pkey(size_t i) const { return targets_.at(i).pkey; }
    /// Index of the target named `name` (aborts if none).
    size_t target_index(const std::string& name) const;
    /// LID of the target port.
    uint16_t target_lid() const;
    /// Inputs run so far.
    uint64_t inputs() const { return inputs_; }
    /// Simulated time of the last input (restore + packets + quiescence), ns.
    uint64_t last_input_sim_ns() const { return last_sim_ns_; }

    /// The planned QPs of the target, in target order.
    static const std::vector<qp_plan>& plans();

private:
    friend class control_module;
    struct live_qp {
        const qp_plan* plan = nullptr;
        verbs::ibv_qp* qp = nullptr;
        uint32_t generation = 0;            // restores so far (part of every wr_id)
        std::vector<uint64_t> outstanding;  // wr_ids posted since the restore and not completed
        uint8_t base_state = 0;             // hardware state and PSNs right after the restore
        uint32_t base_sq_psn = 0, base_rq_psn = 0;
        bool dirty = true;
    };
    struct target {
        std::string name;
        uint32_t qpn = 0;
        uint16_t pkey = 0xFFFF;
        uint32_t mtu = 256;
        live_qp* live = nullptr;  // nullptr: an invalid QPN
    };

    // In the control process.
    void setup();
    void check();
    void prepare();
    void inject();
    void restore(live_qp& q);
    void post_recvs(live_qp& q);
    void post_inflight(live_qp& q);
    void post_busy(live_qp& q);
    void drain_cqs();
    void check_protected_memory();
    [[noreturn]] void fail(const std::string& what) const;
    /// Wakes the control process with `go` and runs until nothing is pending; checks hang/blocked.
    void run_phase(sc_core::sc_event& go);

    std::unique_ptr<machine> m_;
    std::unique_ptr<host_software> sw_;
    std::unique_ptr<control_module> ctl_;
    verbs::ibv_context* ctx_ = nullptr;
    verbs::ibv_pd* pd_ = nullptr;
    verbs::ibv_cq* scq_ = nullptr;
    verbs::ibv_cq* rcq_ = nullptr;
    verbs::ibv_device_attr dev_{};
    unsigned full_access_ = 0;
    // Memory: remote read/write(/atomic) MR, remote-read-only MR, local-only MR, receive
    // buffers, source and READ-destination buffers of the in-flight requests.
    struct region {
        uint64_t va = 0;
        size_t len = 0;
        verbs::ibv_mr* mr = nullptr;
    };
    region rw_, ro_, local_, recv_, src_, readbuf_;
    uint32_t stale_rkey_ = 0;
    std::vector<mr_info> mrs_;  // LIVE_MR choices
    std::vector<uint8_t> ro_image_, local_image_, src_image_;
    std::vector<live_qp> qps_;
    std::vector<target> targets_;
    std::vector<target_info> tinfo_;  // per target, per input (PSN shadows)

    // The current input (decoded by the caller, used by the control process).
    record records_[MAX_RECORDS];
    size_t n_records_ = 0;
    uint8_t wire_[MAX_WIRE_BYTES];
    std::vector<uint32_t> touched_;  // DestQPs of the packets of the last input

    bool ready_ = false, busy_ = false;
    const char* phase_ = "elaboration";
    uint64_t inputs_ = 0, last_sim_ns_ = 0, overruns_base_ = 0;
};

/// The process-wide bench, built and set up on first use.
port_bench& bench();

}  // namespace hcasim::fuzz
