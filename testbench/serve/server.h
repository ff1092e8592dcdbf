// The server of `hcasim serve` (serve.h): one SystemC module holding the kernel half of the driver
// for every node and one thread per client context. server.cpp holds its connections, boot and
// interrupts; requests.cpp its requests, one handler each (server::handlers()).
#pragma once
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include <systemc>

#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/system/fabric.h"
#include "provider/protocol.h"
#include "testbench/host_software.h"
#include "testbench/serve/fake_sysfs.h"
#include "testbench/serve/op_latency.h"
#include "testbench/serve/recording.h"

namespace hcasim::serve {

using namespace sc_core;
namespace sp = serve_proto;

/// One request as it arrived: the bytes and the descriptors that came with them.
struct message {
    std::vector<uint8_t> data;
    std::vector<int> fds;
    int fd_error = 0;  // descriptors that came with it were refused (EINVAL) or lost (EMFILE)
};

/// What one client (one process, by its SO_PEERCRED pid) may hold: `hcasim serve` options.
struct client_limits {
    unsigned contexts = 64;                     // --max-contexts-per-client
    uint64_t mapped_bytes = uint64_t(4) << 30;  // --max-mapped-mib-per-client
    bool other_users = false;                   // --allow-other-users
};

/// One client context (a libibverbs ibv_open_device of device hcasim<node>).
struct connection {
    int fd = -1;
    unsigned id = 0;
    unsigned node = 0;
    int pid = 0;           // the peer's, from SO_PEERCRED: what the per-client limits count by
    bool refused = false;  // another Unix user's: EACCES to its first request, then closed
    uint64_t mapped = 0;   // bytes of its MAP_RUN runs
    std::deque<message> inbox;
    sc_event wake;
    bool hangup = false;  // the client closed its end
    bool done = false;    // its thread has cleaned up and ended
    int async_fd = -1;
    std::unique_ptr<fw::address_space> as;
    verbs::ibv_context* ctx = nullptr;
    uint64_t next_id = 1;
    std::map<uint64_t, verbs::ibv_pd*> pds;
    std::map<uint64_t, verbs::ibv_mr*> mrs;
    std::map<uint64_t, verbs::ibv_cq*> cqs;
    std::map<uint64_t, verbs::ibv_qp*> qps;
    std::map<uint64_t, verbs::ibv_srq*> srqs;
    std::map<uint64_t, verbs::ibv_xrcd*> xrcds;
    std::map<uint64_t, verbs::ibv_mw*> mws;
    std::map<const void*, uint64_t> user;         // QP, CQ, SRQ -> the application's pointer
    std::map<const verbs::ibv_cq*, int> channel;  // CQ -> write end of its completion channel
    uint64_t requests = 0, doorbells = 0;
};

/// The kernel side of one node: its software (OS, driver), the lock that keeps the firmware
/// single-threaded, and what the boot found out.
struct kernel_node {
    std::unique_ptr<host_software> sw;
    std::unique_ptr<sc_mutex> lock;
    verbs::ibv_context* ctx = nullptr;  // the kernel's own context (boot, port queries)
    bool up = false;
    std::string boot_error;
    fake_ib_device dev;
};

template <class T>
const T* request_as(const message& m) {
    return m.data.size() == sizeof(T) ? reinterpret_cast<const T*>(m.data.data()) : nullptr;
}

/// Most requests read ahead of a connection's thread. A connection with this many waiting is
/// not read until its thread catches up (the client's sends block): one that floods requests
/// while its thread waits does not grow the server's memory without bound.
constexpr size_t MAX_INBOX = 1024;

/// Longest SLEEP a client may ask for (simulated ns): an hour.
constexpr uint64_t MAX_SLEEP_NS = uint64_t(3600) * 1000000000;

class server : public sc_module {
public:
    SC_HAS_PROCESS(server);
    server(sc_module_name n, machine& m, bool verbose, const client_limits& limits);

    bool all_up() const;
    std::string boot_error() const;
    std::vector<fake_ib_device> devices() const;

    /// A client connected (called between simulation slices). Its process is the kernel's
    /// word (SO_PEERCRED); another Unix user gets EACCES as the reply to its first request,
    /// then the connection closes, unless --allow-other-users. (Closed at once, its request
    /// unread, the client would see ECONNRESET instead of the reason.)
    void accept(int fd);
    /// Reads every message waiting on a connection (marks it hung up when it closed).
    void read_client(connection& c);
    /// The client closed its end: its thread serves what it has read, then ends.
    void hang_up(connection& c);
    /// The connections whose sockets the main loop watches (ended ones are dropped here).
    std::vector<connection*> live();
    size_t clients() const { return conns_.size(); }
    uint64_t served_requests() const { return requests_; }
    uint64_t served_doorbells() const { return doorbells_; }
    /// The model's latency of the clients' operations (--stats-json, the closing summary).
    const op_latency& operations() const { return ops_; }
    /// --record: the clients' verbs go to `r` from now on (null: none).
    void set_recording(recording* r) { rec_ = r; }
    /// --record, when the server stops: the contents of the regions still registered, then the
    /// end record; writes the file (throws config_error).
    void end_recording();

private:
    machine& m_;
    bool verbose_;
    client_limits limits_;
    std::vector<std::unique_ptr<kernel_node>> kernel_;
    std::list<std::unique_ptr<connection>> conns_;
    unsigned next_conn_ = 1;
    std::vector<std::vector<uint8_t>> spare_;  // message buffers to reuse
    uint64_t requests_ = 0, doorbells_ = 0;
    op_latency ops_;
    recording* rec_ = nullptr;

    // ------------------------------------------------------------------ boot and interrupts

    void boot(unsigned i);

    /// The interrupt handler of one node: sleeps until the event queue holds an entry, then
    /// processes it (the verbs layer's handlers forward the events to the clients).
    void interrupts(unsigned i);

    // ------------------------------------------------------------------ one client

    void log(const connection& c, const std::string& s);

    void send_reply(connection& c, int status, const void* payload, size_t n, int fd = -1);
    template <class T>
    void reply_with(connection& c, int status, const T& payload) {
        send_reply(c, status, &payload, sizeof payload);
    }
    void reply_status(connection& c, int status) { send_reply(c, status, nullptr, 0); }

    /// Writes one event record to a client's pipe without blocking (a client that never reads
    /// its events loses the newest, with a warning, rather than stalling the simulation).
    void post_record(connection& c, int fd, const void* rec, size_t n);

    void on_async_event(connection& c, const verbs::ibv_async_event& e);

    void on_comp_event(connection& c, verbs::ibv_cq* cq);

    /// One message of a client; false when the connection is to be closed. The descriptors
    /// handlers keep are taken out of m.fds.
    bool serve_one(connection& c, message& m);

    void serve_client(connection& c);

    kernel_node* kernel_for(connection& c, const message& m);

    void mmio_write(connection& c, const message& m);

    template <class T>
    T* lookup(std::map<uint64_t, T*>& t, uint64_t id) {
        auto it = t.find(id);
        return it == t.end() ? nullptr : it->second;
    }

    /// A destroy request (its body the object's id): destroys the object of `objects` it names
    /// with `destroy` and, if that succeeded, forgets it (`forget(id, object)`). Returns the
    /// verb's result, or -1 if the request names no object of this context (a bad request).
    template <class T, class Destroy, class Forget>
    int destroy_named(const message& m, std::map<uint64_t, T*>& objects, Destroy destroy, Forget forget) {
        const auto* r = request_as<sp::u64_req>(m);
        T* object = r ? lookup(objects, r->value) : nullptr;
        if (!object) return -1;
        const int e = destroy(object);
        if (!e) forget(r->value, object);
        return e;
    }

    static sp::qp_rep qp_reply(uint64_t id, const verbs::ibv_qp* qp);
    static sp::srq_rep srq_reply(uint64_t id, const verbs::ibv_srq* s);
    static sp::cq_rep cq_reply(uint64_t id, const verbs::ibv_cq* cq);

    int take_fd(message& m);

    void open(connection& c, kernel_node& k, message& m);

    /// A request of the wrong size or naming an object this context does not own.
    void malformed(connection& c, uint32_t op);
    /// Requests that carry nothing but their header are that size exactly.
    static bool bare(const message& m) { return m.data.size() == sizeof(sp::header); }

    /// One request, executed by its handler (handlers()); the firmware lock is held.
    void execute(connection& c, kernel_node& k, uint32_t op, message& m);

    using handler = void (server::*)(connection& c, kernel_node& k, uint32_t op, message& m);
    /// One handler per request of serve_proto; a request not listed gets EOPNOTSUPP.
    static const std::map<uint32_t, handler>& handlers();

    // ------------------------------------------------------------------ the requests

    void handle_open(connection& c, kernel_node& k, uint32_t, message& m);
    void handle_mmio_read32(connection& c, kernel_node& k, uint32_t op, message& m);
    void handle_now(connection& c, kernel_node& k, uint32_t op, message& m);
    void handle_sleep(connection& c, kernel_node& k, uint32_t op, message& m);
    void handle_query_device(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_query_port(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_query_gid(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_query_pkey(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_alloc_pd(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_dealloc_pd(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_map_run(connection& c, kernel_node& k, uint32_t op, message& m);
    void handle_unmap_run(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_reg_mr(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_dereg_mr(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_rereg_mr(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_alloc_mw(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_dealloc_mw(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_next_key(connection& c, kernel_node& k, uint32_t op, message& m);
    void handle_create_cq(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_destroy_cq(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_resize_cq(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_create_qp(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_modify_qp(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_query_qp(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_destroy_qp(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_create_srq(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_srq_attr(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_destroy_srq(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_open_xrcd(connection& c, kernel_node&, uint32_t op, message& m);
    void create_xrc_qp(connection& c, uint32_t op, const serve_proto::create_qp_req& r);
    void handle_close_xrcd(connection& c, kernel_node&, uint32_t op, message& m);
    void handle_mcast(connection& c, kernel_node&, uint32_t op, message& m);

    static void set_counts(verbs::ibv_qp* qp, const sp::ring_counts& n);

    void forget_cq(connection& c, uint64_t id, verbs::ibv_cq* cq);

    /// A client went away: everything it still owned is destroyed, as the kernel does for a
    /// process that exits.
    void teardown(connection& c);
};

}  // namespace hcasim::serve
