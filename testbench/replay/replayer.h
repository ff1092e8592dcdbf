// The replaying application of `hcasim replay` (replay.h): one SystemC process per node issuing
// the trace's calls in a global order, comparing each outcome with the recorded one. replayer.cpp
// holds the order and the comparisons; calls.cpp one handler per call of a trace.
#pragma once
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include <cerrno>
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/system/fabric.h"
#include "testbench/host_software.h"
#include "testbench/replay/trace_file.h"
#include "testbench/replay/verbs_trace.h"

namespace hcasim::replay {

using namespace sc_core;
using namespace verbs;

/// One difference between the recording and the replay.
struct divergence {
    std::string kind;  // return value, completion, event, memory, time
    std::string text;
};

/// The replaying application: one process issuing the trace's calls in order.
class replayer : public sc_module {
public:
    SC_HAS_PROCESS(replayer);
    replayer(sc_module_name n, machine& m, const trace_file& t, trace::recorder& rec, bool recorded_timing,
             double tolerance);

    std::vector<divergence> diffs;
    size_t calls_run = 0, completions = 0, compared = 0;
    bool finished = false;
    std::string failure;  // could not go on (e.g. a device would not open)

    /// Recorded events vs. the replay's, and memory digests; after the run.
    void compare_end(const json& actual_memory);
    bool compare_events_ = false;  // the trace has outcomes: an event it lacks is a divergence

private:
    struct node_objs {
        std::map<std::string, ibv_pd*> pd;
        std::map<std::string, ibv_mr*> mr;
        std::map<std::string, ibv_cq*> cq;
        std::map<std::string, ibv_qp*> qp;
        std::map<std::string, ibv_srq*> srq;
        std::map<std::string, ibv_ah*> ah;
        std::map<std::string, ibv_xrcd*> xrcd;
        std::map<std::string, ibv_rdd*> rdd;
        std::map<std::string, ibv_eec*> eec;
        std::map<std::string, std::pair<uint64_t, uint64_t>> buf;
    };

    void diff(const std::string& kind, size_t line, const std::string& text);

    template <class T>
    T* find(std::map<std::string, T*>& m, const std::string& name) {
        auto it = m.find(name);
        return it == m.end() ? nullptr : it->second;
    }
    node_objs& objs_of(const std::string& ref, unsigned own, std::string* name);

    uint64_t buf_addr(unsigned node, const json& j);

    std::vector<ibv_sge> sges(unsigned node, const json& sg);

    uint32_t qp_num_of(const std::string& ref, unsigned own);
    /// The number of the EE context `ref` names (0 if it does not exist in the replay).
    uint32_t eec_num_of(const std::string& ref, unsigned own);
    /// The number of the XRC SRQ `ref` names (0 if it does not exist in the replay).
    uint32_t srq_num_of(const std::string& ref, unsigned own);

    uint16_t lid_of(unsigned node) { return m_.at(node).lid(); }

    /// Compares the recorded outcome field `key` of the step with the replay's.
    void expect(const step& s, const char* key, const json& actual);

    void exec(const step& s);

    /// True if node `node` holds a live object `name` of `kind` (a creation may fail in the
    /// replay that succeeded in the recording).
    bool live(unsigned node, const std::string& kind, const std::string& name);

    void exec_checked(const step& s);

    using handler = void (replayer::*)(const step& s, unsigned node, json& out);
    /// One handler per call of a trace (replay::calls()): issues it, compares its outcome
    /// (expect) and adds the outcome to `out`, the replay's own record of the call.
    static const std::map<std::string, handler>& handlers();

    /// A destroying call: `destroy` of the object of `objects` its field `field` names, forgotten
    /// if that succeeded.
    template <class T>
    void destroy_named(const step& s, json& out, std::map<std::string, T*>& objects, const char* field,
                       int (*destroy)(T*)) {
        const std::string name = s.j[field];
        const int r = destroy(objects[name]);
        if (r == 0) objects.erase(name);
        expect(s, "ret", r);
        out["ret"] = r;
    }

    /// The name a creating call gives its object (its "ret"), or null if the creation failed.
    json created(const step& s, unsigned node, const void* obj, const char* kind);
    /// An object made by a call without other outcome (open_xrcd, alloc_rdd): named and kept in
    /// `named` (or errno recorded when null), its name compared with the recording's `ret`.
    template <class T, class Named>
    void adopt(const step& s, unsigned node, json& out, T* obj, const char* kind, Named& named) {
        const json r = created(s, node, obj, kind);
        if (obj)
            named[r] = obj;
        else
            out["errno"] = errno;
        expect(s, "ret", r);
        out["ret"] = r;
    }

    void call_alloc(const step& s, unsigned node, json& out);
    void call_fill(const step& s, unsigned node, json&);
    void call_wait_byte(const step& s, unsigned node, json& out);
    void call_sleep(const step& s, unsigned, json&);
    void call_alloc_pd(const step& s, unsigned node, json& out);
    void call_reg_mr(const step& s, unsigned node, json& out);
    void call_dereg_mr(const step& s, unsigned node, json& out);
    void call_create_cq(const step& s, unsigned node, json& out);
    void call_open_xrcd(const step& s, unsigned node, json& out);
    void call_close_xrcd(const step& s, unsigned node, json& out);
    void call_alloc_rdd(const step& s, unsigned node, json& out);
    void call_dealloc_rdd(const step& s, unsigned node, json& out);
    void call_create_eec(const step& s, unsigned node, json& out);
    void call_modify_eec(const step& s, unsigned node, json& out);
    void call_query_eec(const step& s, unsigned node, json& out);
    void call_destroy_eec(const step& s, unsigned node, json& out);
    void call_create_srq(const step& s, unsigned node, json& out);
    void call_destroy_srq(const step& s, unsigned node, json& out);
    void call_modify_srq(const step& s, unsigned node, json& out);
    void call_create_qp(const step& s, unsigned node, json& out);
    void call_destroy_qp(const step& s, unsigned node, json& out);
    void call_modify_qp(const step& s, unsigned node, json& out);
    void call_create_ah(const step& s, unsigned node, json& out);
    void call_attach_mcast(const step& s, unsigned node, json& out);
    void call_post_send(const step& s, unsigned node, json& out);
    void call_post_recv(const step& s, unsigned node, json& out);
    void call_poll_cq(const step& s, unsigned node, json& out);

    std::string line_text(size_t line) const;

    /// Opens node i's device (as an application does first; not a call of the trace) and
    /// installs the handler that records its asynchronous events.
    bool open(unsigned i);

    void run();

    void advance();

    void node_main(unsigned n);

    std::vector<size_t> order_;                  // global position -> index into t_.steps
    std::vector<uint8_t> state_;                 // by global position: 0 waiting, 1 started, 2 returned
    std::vector<bool> waits_;                    // by global position: a call that waits
    std::vector<std::vector<size_t>> per_node_;  // global positions of each node's calls
    size_t prefix_ = 0;                          // every call before this position may be passed
    sc_event progress_;
    unsigned running_ = 0;

    machine& m_;
    const trace_file& t_;
    trace::recorder& rec_;
    bool recorded_;
    double tolerance_;
    std::vector<std::unique_ptr<host_software>> sw_;
    std::vector<ibv_context*> ctx_;
    std::vector<node_objs> objs_;
    std::vector<std::vector<json>> events_;
    std::map<std::tuple<unsigned, std::string, uint64_t>, size_t> producers_;

public:
    host_software& sw(unsigned i) { return *sw_[i]; }
};

}  // namespace hcasim::replay
