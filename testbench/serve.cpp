// `hcasim serve`: see serve.h and docs/libibverbs.md.
//
// One OS thread. The main loop alternates between the sockets (accepting clients, reading their
// messages into per-connection inboxes) and the simulation (sc_start in slices while anything is
// scheduled). With no scheduled activity it blocks in poll(), so a simulation whose clients all
// wait costs no CPU. Each connection is served by one SystemC thread that executes its requests
// in order, in simulated time, through the node's firmware (the kernel half of the driver); a
// per-node mutex keeps the firmware single-threaded, and one more thread per node plays the
// interrupt handler (processes the event queue, forwards completion and async events).
#define SC_INCLUDE_DYNAMIC_PROCESSES
#include "testbench/serve.h"

#include <systemc>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/core/param.h"
#include "model/core/stats.h"
#include "model/system/fabric.h"
#include "provider/fd_passing.h"
#include "provider/protocol.h"
#include "testbench/fake_sysfs.h"
#include "model/core/hex.h"
#include "testbench/host_software.h"

namespace hcasim {

using namespace sc_core;
namespace sp = serve_proto;

namespace {

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

void close_fds(std::vector<int>& fds) {
    for (int f : fds)
        if (f >= 0) close(f);
    fds.clear();
}

/// A descriptor a client passed, made the server's own; -1 (and *error set) if refused.
///
/// Why: the server must see a client's connection end when the client's process is gone,
/// whatever it sent. Had the server kept what came (a client could send its own end of the
/// connection as a "completion channel"), the connection would hold itself open for ever.
/// So the only descriptors taken are pipes, the write ends of event pipes (async events,
/// completion channels), and of those only a description of the server's own: the pipe is
/// opened anew through /proc/self/fd, non-blocking whatever the client later does to its own
/// flags, and the descriptor that came is closed at once, before the message waits for its
/// turn. A pipe cannot carry descriptors, so nothing the server holds can keep a client's
/// socket open: the connection ends when every process holding the client's end (the client,
/// and a child that inherited it) has closed it or exited, and the context goes with it.
int own_pipe(int fd, int* error) {
    struct stat st {};
    int mine = -1;
    if (fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
        mine = ::open(("/proc/self/fd/" + std::to_string(fd)).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (mine < 0 && !*error) *error = errno == EMFILE || errno == ENFILE ? errno : EINVAL;
    } else if (!*error) {
        *error = EINVAL;
    }
    close(fd);
    return mine;
}

/// Whether a posted write of `bytes` at offset `in_page` of a UAR page is one the HCA takes
/// (tlm_if/mmio_map.h): a doorbell word, or a WQE through the inline window.
bool uar_write_ok(uint64_t in_page, uint32_t bytes) {
    switch (in_page) {
    case hw::UAR_SQ_DOORBELL:
    case hw::UAR_RQ_DOORBELL:
    case hw::UAR_CQ_DOORBELL:
    case hw::UAR_SRQ_DOORBELL: return bytes == 8;
    case hw::UAR_INLINE_WQE: return bytes >= 64 && bytes % 16 == 0 && bytes <= hw::INLINE_WINDOW_BYTES;
    default: return false;
    }
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
    server(sc_module_name n, machine& m, bool verbose, const client_limits& limits)
        : sc_module(n), m_(m), verbose_(verbose), limits_(limits) {
        fw::driver_options opts;
        opts.rereg_keeps_keys = true;  // ibv_rereg_mr as libibverbs applications know it
        for (unsigned i = 0; i < m.size(); ++i) {
            auto k = std::make_unique<kernel_node>();
            k->sw = std::make_unique<host_software>(m.at(i), opts);  // checks memory.size_bytes first
            m.at(i).memory.share();
            k->lock = std::make_unique<sc_mutex>(sc_gen_unique_name("firmware_lock"));
            kernel_.push_back(std::move(k));
        }
        for (unsigned i = 0; i < m.size(); ++i) {
            sc_spawn([this, i] { boot(i); }, sc_gen_unique_name("boot"));
        }
    }

    bool all_up() const {
        for (const auto& k : kernel_)
            if (!k->up) return false;
        return true;
    }
    std::string boot_error() const {
        for (size_t i = 0; i < kernel_.size(); ++i)
            if (!kernel_[i]->boot_error.empty())
                return "node" + std::to_string(i) + ": " + kernel_[i]->boot_error;
        return "";
    }
    std::vector<fake_ib_device> devices() const {
        std::vector<fake_ib_device> v;
        for (const auto& k : kernel_) v.push_back(k->dev);
        return v;
    }

    /// A client connected (called between simulation slices). Its process is the kernel's
    /// word (SO_PEERCRED); another Unix user gets EACCES as the reply to its first request,
    /// then the connection closes, unless --allow-other-users. (Closed at once, its request
    /// unread, the client would see ECONNRESET instead of the reason.)
    void accept(int fd) {
        ucred cr{};
        socklen_t len = sizeof cr;
        const bool refused = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 ||
                             (cr.uid != geteuid() && !limits_.other_users);
        if (refused)
            std::fprintf(stderr,
                         "hcasim serve: refused a client of uid %u (pid %d): the server runs as uid %u "
                         "(--allow-other-users admits other users)\n",
                         unsigned(cr.uid), int(cr.pid), unsigned(geteuid()));
        auto c = std::make_unique<connection>();
        c->fd = fd;
        c->pid = int(cr.pid);
        c->refused = refused;
        c->id = next_conn_++;
        connection* p = c.get();
        conns_.push_back(std::move(c));
        sc_spawn([this, p] { serve_client(*p); }, sc_gen_unique_name("client"));
    }
    /// Reads every message waiting on a connection (marks it hung up when it closed).
    void read_client(connection& c) {
        for (;;) {
            message m;
            // Buffers are recycled (serve_client gives them back): no allocation per doorbell.
            if (!spare_.empty()) {
                m.data = std::move(spare_.back());
                spare_.pop_back();
            }
            m.data.resize(sp::MAX_MESSAGE);
            bool truncated = false, lost = false;
            const ssize_t n = sp::recv_with_fds(c.fd, m.data.data(), m.data.size(), &m.fds, MSG_DONTWAIT,
                                                &truncated, &lost);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                spare_.push_back(std::move(m.data));
                return;
            }
            if (n <= 0) {
                close_fds(m.fds);
                hang_up(c);
                return;
            }
            m.data.resize(truncated ? 0 : size_t(n));  // a truncated message is refused as malformed
            m.fd_error = lost ? EMFILE : 0;  // the kernel dropped them: this process is out of descriptors
            for (int& f : m.fds) f = own_pipe(f, &m.fd_error);
            c.inbox.push_back(std::move(m));
            c.wake.notify(SC_ZERO_TIME);
            if (c.inbox.size() >= MAX_INBOX) return;
        }
    }
    /// The client closed its end: its thread serves what it has read, then ends.
    void hang_up(connection& c) {
        c.hangup = true;
        c.wake.notify(SC_ZERO_TIME);
    }
    /// The connections whose sockets the main loop watches (ended ones are dropped here).
    std::vector<connection*> live() {
        std::vector<connection*> v;
        for (auto it = conns_.begin(); it != conns_.end();) {
            if ((*it)->done) {
                it = conns_.erase(it);
                continue;
            }
            if (!(*it)->hangup) v.push_back(it->get());
            ++it;
        }
        return v;
    }
    size_t clients() const { return conns_.size(); }
    uint64_t served_requests() const { return requests_; }
    uint64_t served_doorbells() const { return doorbells_; }

private:
    machine& m_;
    bool verbose_;
    client_limits limits_;
    std::vector<std::unique_ptr<kernel_node>> kernel_;
    std::list<std::unique_ptr<connection>> conns_;
    unsigned next_conn_ = 1;
    std::vector<std::vector<uint8_t>> spare_;  // message buffers to reuse
    uint64_t requests_ = 0, doorbells_ = 0;

    // ------------------------------------------------------------------ boot and interrupts

    void boot(unsigned i) {
        kernel_node& k = *kernel_[i];
        host_software& sw = *k.sw;
        k.lock->lock();
        k.ctx = verbs::ibv_open_device(sw.driver, sw.as);
        if (!k.ctx) {
            k.boot_error = "the driver did not start: " + sw.driver.last_error();
            k.lock->unlock();
            return;
        }
        verbs::ibv_port_attr pa{};
        // The port comes up once the link has trained (and, on a switch, the SM has swept).
        for (int tries = 0; tries < 1000; ++tries) {
            verbs::ibv_query_port(k.ctx, 1, &pa);
            if (pa.state == verbs::IBV_PORT_ACTIVE) break;
            k.lock->unlock();
            wait(sc_time(10, SC_US));
            k.lock->lock();
        }
        verbs::ibv_device_attr da{};
        verbs::ibv_query_device(k.ctx, &da);
        const hw::port_info* pi = sw.driver.port(1);
        fake_ib_device& d = k.dev;
        d.name = "hcasim" + std::to_string(i);
        d.node_guid = da.node_guid;
        d.sys_image_guid = da.sys_image_guid;
        d.fw_ver = da.fw_ver;
        d.hca_type = "hcasim";
        d.board_id = "HCASIM0001";
        fake_ib_port p{};
        p.lid = pa.lid;
        p.sm_lid = pa.sm_lid;
        p.lmc = pa.lmc;
        p.state = uint8_t(pa.state);
        p.phys_state = pa.state == verbs::IBV_PORT_ACTIVE ? 5 : 3;  // LinkUp, Disabled
        p.width_code = sp::ibv_width_code(pa.active_width);
        p.speed_code = sp::ibv_speed_code(pa.active_speed);
        p.subnet_prefix = pi ? pi->gid_prefix : 0;
        p.port_guid = pi ? pi->port_guid : 0;
        p.gid_count = pa.gid_tbl_len;
        p.max_mtu = int(pa.max_mtu);
        for (int j = 0; j < pa.pkey_tbl_len; ++j) {
            uint16_t key = 0;
            if (verbs::ibv_query_pkey(k.ctx, 1, j, &key) == 0) p.pkeys.push_back(key);
        }
        d.ports.push_back(p);
        k.lock->unlock();
        k.up = true;
        sc_spawn([this, i] { interrupts(i); }, sc_gen_unique_name("irq"));
    }

    /// The interrupt handler of one node: sleeps until the event queue holds an entry, then
    /// processes it (the verbs layer's handlers forward the events to the clients).
    void interrupts(unsigned i) {
        kernel_node& k = *kernel_[i];
        fw::hca_driver& drv = k.sw->driver;
        for (;;) {
            k.lock->lock();
            const bool pending = drv.eq_pending();
            k.lock->unlock();
            if (!pending) drv.wait_eq(0);
            k.lock->lock();
            drv.process_eq();
            k.lock->unlock();
        }
    }

    // ------------------------------------------------------------------ one client

    void log(const connection& c, const std::string& s) {
        if (verbose_)
            std::fprintf(stderr, "hcasim serve: client %u (pid %d, node %u): %s\n", c.id, c.pid, c.node,
                         s.c_str());
    }

    void send_reply(connection& c, int status, const void* payload, size_t n, int fd = -1) {
        std::vector<uint8_t> buf(sizeof(sp::reply) + n);
        sp::reply r{status, 0};
        std::memcpy(buf.data(), &r, sizeof r);
        if (n) std::memcpy(buf.data() + sizeof r, payload, n);
        if (sp::send_with_fd(c.fd, buf.data(), buf.size(), fd) < 0) c.hangup = true;
    }
    template <class T>
    void reply_with(connection& c, int status, const T& payload) {
        send_reply(c, status, &payload, sizeof payload);
    }
    void reply_status(connection& c, int status) { send_reply(c, status, nullptr, 0); }

    /// Writes one event record to a client's pipe without blocking (a client that never reads
    /// its events loses the newest, with a warning, rather than stalling the simulation).
    void post_record(connection& c, int fd, const void* rec, size_t n) {
        if (fd < 0) return;
        if (write(fd, rec, n) != ssize_t(n))
            std::fprintf(stderr, "hcasim serve: client %u: an event record was dropped (%s)\n", c.id,
                         std::strerror(errno));
    }

    void on_async_event(connection& c, const verbs::ibv_async_event& e) {
        sp::async_event_record r{};
        r.event_type = uint32_t(e.event_type);
        switch (e.event_type) {
        case verbs::IBV_EVENT_CQ_ERR:
            r.element = c.user.count(e.element.cq) ? c.user[e.element.cq] : 0;
            break;
        case verbs::IBV_EVENT_SRQ_ERR:
        case verbs::IBV_EVENT_SRQ_LIMIT_REACHED:
            r.element = c.user.count(e.element.srq) ? c.user[e.element.srq] : 0;
            break;
        case verbs::IBV_EVENT_PORT_ACTIVE:
        case verbs::IBV_EVENT_PORT_ERR:
        case verbs::IBV_EVENT_LID_CHANGE:
        case verbs::IBV_EVENT_PKEY_CHANGE:
        case verbs::IBV_EVENT_SM_CHANGE:
        case verbs::IBV_EVENT_CLIENT_REREGISTER:
        case verbs::IBV_EVENT_GID_CHANGE: r.element = uint64_t(e.element.port_num); break;
        case verbs::IBV_EVENT_DEVICE_FATAL: r.element = 0; break;
        default: r.element = c.user.count(e.element.qp) ? c.user[e.element.qp] : 0; break;
        }
        log(c, "async event " + std::to_string(r.event_type));
        post_record(c, c.async_fd, &r, sizeof r);
    }

    void on_comp_event(connection& c, verbs::ibv_cq* cq) {
        auto it = c.channel.find(cq);
        log(c, "completion event on CQ " + std::to_string(cq->handle) +
                   (it == c.channel.end() ? " (no channel)" : ""));
        if (it == c.channel.end()) return;  // armed without a channel: nobody to tell
        sp::comp_event_record r{c.user[cq]};
        post_record(c, it->second, &r, sizeof r);
    }

    /// One message of a client; false when the connection is to be closed. The descriptors
    /// handlers keep are taken out of m.fds.
    bool serve_one(connection& c, message& m) {
        if (m.data.size() < sizeof(sp::header)) {
            log(c, "malformed message (" + std::to_string(m.data.size()) + " bytes): closing");
            return false;
        }
        if (c.refused) {
            reply_status(c, EACCES);
            return false;
        }
        sp::header h;
        std::memcpy(&h, m.data.data(), sizeof h);
        if (m.fd_error) {  // a descriptor that is not a pipe, or none left to take it with
            log(c, "request " + std::to_string(h.op) + ": " +
                       (m.fd_error == EINVAL ? "a descriptor that is not a pipe: refused"
                                             : "out of descriptors"));
            if (h.op != sp::MMIO_WRITE) reply_status(c, m.fd_error);
            return true;
        }
        if (h.op == sp::MMIO_WRITE) {
            mmio_write(c, m);
            return true;
        }
        ++requests_;
        ++c.requests;
        if (h.op != sp::OPEN && !c.ctx) {
            reply_status(c, EBADF);
            return true;
        }
        if (h.op == sp::OPEN && !request_as<sp::open_req>(m)) {
            reply_status(c, EINVAL);  // a malformed OPEN names no node
            return true;
        }
        kernel_node* k = kernel_for(c, m);
        if (!k) {
            reply_status(c, ENODEV);
            return true;
        }
        k->lock->lock();
        execute(c, *k, h.op, m);
        k->lock->unlock();
        return true;
    }

    void serve_client(connection& c) {
        for (;;) {
            while (c.inbox.empty() && !c.hangup) wait(c.wake);
            if (c.inbox.empty()) break;
            message m = std::move(c.inbox.front());
            c.inbox.pop_front();
            const bool go_on = serve_one(c, m);
            close_fds(m.fds);
            spare_.push_back(std::move(m.data));
            if (!go_on) break;
        }
        if (!c.inbox.empty())
            for (auto& m : c.inbox) close_fds(m.fds);
        if (c.ctx) {
            kernel_node& k = *kernel_[c.node];
            k.lock->lock();
            teardown(c);
            k.lock->unlock();
        }
        close(c.fd);
        if (c.async_fd >= 0) close(c.async_fd);
        log(c, "closed after " + std::to_string(c.requests) + " requests and " + std::to_string(c.doorbells) +
                   " doorbells");
        c.done = true;
    }

    kernel_node* kernel_for(connection& c, const message& m) {
        unsigned node = c.node;
        if (!c.ctx) {
            const auto* r = request_as<sp::open_req>(m);
            if (!r) return nullptr;
            node = r->node;
        }
        return node < kernel_.size() && kernel_[node]->up ? kernel_[node].get() : nullptr;
    }

    void mmio_write(connection& c, const message& m) {
        // Only the bytes written travel: the header, then `bytes` of data.
        sp::mmio_write_req w{};
        const size_t head = offsetof(sp::mmio_write_req, data);
        if (m.data.size() >= head && m.data.size() <= sizeof w) std::memcpy(&w, m.data.data(), m.data.size());
        const sp::mmio_write_req* r = &w;
        if (!c.ctx || m.data.size() < head || r->bytes == 0 || r->bytes > sizeof r->data ||
            m.data.size() != head + r->bytes) {
            log(c, "malformed doorbell: dropped");
            return;
        }
        // A context may only write its own UAR page, as with a real UAR mapping, and there only
        // the registers the HCA takes. (r->bytes <= 256 < UAR_STRIDE: the bound cannot wrap.)
        const uint64_t lo = fw::hca_driver::uar_offset(c.ctx->uar);
        if (r->offset < lo || r->offset - lo > hw::UAR_STRIDE - r->bytes) {
            log(c, "doorbell outside its UAR page: dropped");
            return;
        }
        if (!uar_write_ok(r->offset - lo, r->bytes)) {
            log(c, "doorbell at UAR offset " + hex_address(r->offset - lo) + " of " +
                       std::to_string(r->bytes) + " bytes writes no register: dropped");
            return;
        }
        kernel_node& k = *kernel_[c.node];
        ++doorbells_;
        ++c.doorbells;
        k.lock->lock();
        try {  // whatever the model says of a write, it ends no more than the write
            k.sw->driver.bus().mmio_write(r->offset, r->data, r->bytes);
        } catch (const sc_report& e) {
            log(c, std::string("doorbell failed: ") + e.what());
        }
        k.lock->unlock();
    }

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

    static sp::qp_rep qp_reply(uint64_t id, const verbs::ibv_qp* qp) {
        sp::qp_rep r{};
        r.id = id;
        r.qp_num = qp->qp_num;
        r.state = int32_t(qp->state);
        r.max_inline_data = qp->max_inline_data;
        r.port = qp->hw_ctx.port;
        r.cap.max_send_wr = qp->sq.max_wr;
        r.cap.max_send_sge = qp->sq.max_sge;
        r.cap.max_recv_wr = qp->rq.max_wr;
        r.cap.max_recv_sge = qp->rq.max_sge;
        r.cap.max_inline_data = qp->max_inline_data;
        r.sq = qp->sq;
        r.rq = qp->rq;
        return r;
    }
    static sp::srq_rep srq_reply(uint64_t id, const verbs::ibv_srq* s) {
        sp::srq_rep r{};
        r.id = id;
        r.srqn = s->handle;
        r.attr.max_wr = s->ring.max_wr;
        r.attr.max_sge = s->ring.max_sge;
        r.ring = s->ring;
        return r;
    }
    static sp::cq_rep cq_reply(uint64_t id, const verbs::ibv_cq* cq) {
        sp::cq_rep r{};
        r.id = id;
        r.cqn = cq->handle;
        r.cqe = cq->cqe;
        r.ring_pa = cq->ring_pa;
        r.log_size = cq->log_size;
        return r;
    }

    int take_fd(message& m) {
        if (m.fds.empty()) return -1;
        const int f = m.fds.front();
        m.fds.erase(m.fds.begin());
        return f;
    }

    void open(connection& c, kernel_node& k, message& m) {
        const auto* r = request_as<sp::open_req>(m);
        if (r->version != sp::VERSION) return reply_status(c, EPROTO);
        const int afd = take_fd(m);
        if (afd < 0) return reply_status(c, EINVAL);
        unsigned held = 0;  // contexts of this client's process
        for (const auto& o : conns_) held += o->ctx && o->pid == c.pid;
        if (held >= limits_.contexts) {
            close(afd);
            log(c, "OPEN refused: the process has " + std::to_string(held) +
                       " contexts (--max-contexts-per-client)");
            return reply_status(c, EDQUOT);
        }
        c.node = r->node;
        c.async_fd = afd;  // non-blocking: own_pipe
        host_software& sw = *k.sw;
        c.as = std::make_unique<fw::address_space>(sw.os);
        c.ctx = verbs::ibv_open_device(sw.driver, *c.as);
        if (!c.ctx) {
            c.as.reset();
            return reply_status(c, errno ? errno : EIO);
        }
        verbs::ibv_set_async_event_handler(
            c.ctx, [this, &c](const verbs::ibv_async_event& e) { on_async_event(c, e); });
        for (int v = 0; v < c.ctx->num_comp_vectors; ++v)
            verbs::ibv_set_comp_event_handler(c.ctx, v,
                                              [this, &c](verbs::ibv_cq* cq, void*) { on_comp_event(c, cq); });
        sp::open_rep rep{};
        rep.mem_bytes = m_.at(c.node).memory.size_bytes.get();
        rep.uar = c.ctx->uar;
        rep.num_qps = sw.driver.num_qps();
        rep.num_comp_vectors = c.ctx->num_comp_vectors;
        rep.caps = sw.driver.caps();
        for (uint8_t p = 1; p <= sp::MAX_PORTS && sw.driver.port(p); ++p) {
            rep.ports[p - 1] = *sw.driver.port(p);
            rep.nports = p;
        }
        verbs::ibv_query_device(c.ctx, &rep.dev);
        rep.node_guid = rep.dev.node_guid;
        log(c, "opened hcasim" + std::to_string(c.node));
        send_reply(c, 0, &rep, sizeof rep, m_.at(c.node).memory.shared_fd());
    }

    void execute(connection& c, kernel_node& k, uint32_t op, message& m) {
        // Requests that carry nothing but their header are that size exactly.
        const bool bare = m.data.size() == sizeof(sp::header);
        switch (op) {
        case sp::OPEN:
            if (c.ctx) return reply_status(c, EBUSY);
            return open(c, k, m);
        case sp::MMIO_READ32: {
            // The provider reads one register, REG_HCA_ID, to order a CQ arm behind its doorbell
            // (req_notify_cq); the command and interrupt registers are the kernel's.
            const auto* r = request_as<sp::u64_req>(m);
            if (!r) break;
            if (r->value != hw::REG_HCA_ID) {
                log(c, "MMIO read at BAR0 offset " + hex_address(r->value) + ": refused");
                return reply_status(c, EINVAL);
            }
            try {
                const uint32_t v = k.sw->driver.bus().mmio_read32(r->value);
                return reply_with(c, 0, v);
            } catch (const sc_report& e) {
                log(c, std::string("MMIO read failed: ") + e.what());
                return reply_status(c, EIO);
            }
        }
        case sp::NOW:
            if (!bare) break;
            return reply_with(c, 0, uint64_t(k.sw->driver.bus().now_ns()));
        case sp::SLEEP: {
            const auto* r = request_as<sp::u64_req>(m);
            if (!r || r->value > MAX_SLEEP_NS) break;
            k.lock->unlock();  // sleeping holds nothing, and ends early when the client is gone
            const sc_time until = sc_time_stamp() + sc_time(double(r->value), SC_NS);
            while (!c.hangup && sc_time_stamp() < until) wait(until - sc_time_stamp(), c.wake);
            k.lock->lock();
            return reply_status(c, 0);
        }
        case sp::QUERY_DEVICE: {
            if (!bare) break;
            verbs::ibv_device_attr a{};
            const int e = verbs::ibv_query_device(c.ctx, &a);
            return reply_with(c, e, a);
        }
        case sp::QUERY_PORT: {
            const auto* r = request_as<sp::u64_req>(m);
            if (!r || r->value > 255) break;
            verbs::ibv_port_attr a{};
            const int e = verbs::ibv_query_port(c.ctx, uint8_t(r->value), &a);
            return reply_with(c, e, a);
        }
        case sp::QUERY_GID: {
            const auto* r = request_as<sp::index_req>(m);
            if (!r || r->port > 255) break;
            verbs::ibv_gid g{};
            const int e = verbs::ibv_query_gid(c.ctx, uint8_t(r->port), r->index, &g);
            return reply_with(c, e, g);
        }
        case sp::QUERY_PKEY: {
            const auto* r = request_as<sp::index_req>(m);
            if (!r || r->port > 255) break;
            uint16_t key = 0;
            const int e = verbs::ibv_query_pkey(c.ctx, uint8_t(r->port), r->index, &key);
            return reply_with(c, e, key);
        }
        case sp::ALLOC_PD: {
            if (!bare) break;
            verbs::ibv_pd* pd = verbs::ibv_alloc_pd(c.ctx);
            if (!pd) return reply_status(c, errno ? errno : ENOMEM);
            const uint64_t id = c.next_id++;
            c.pds[id] = pd;
            return reply_with(c, 0, id);
        }
        case sp::DEALLOC_PD: {
            const int e = destroy_named(
                m, c.pds, [](verbs::ibv_pd* pd) { return verbs::ibv_dealloc_pd(pd); },
                [&](uint64_t id, verbs::ibv_pd*) { c.pds.erase(id); });
            if (e < 0) break;
            return reply_status(c, e);
        }
        case sp::MAP_RUN: {
            const auto* r = request_as<sp::run_req>(m);
            if (!r || !r->pages || r->pages > (uint64_t(1) << 22) || (r->va & (fw::PAGE_BYTES - 1))) break;
            const uint64_t bytes = r->pages * fw::PAGE_BYTES;
            if (r->va > ~uint64_t(0) - (bytes - 1)) break;  // past 2^64
            uint64_t held = 0;                              // by this client's process, all its contexts
            for (const auto& o : conns_) held += o->pid == c.pid ? o->mapped : 0;
            if (bytes > limits_.mapped_bytes || held > limits_.mapped_bytes - bytes) {
                log(c, "MAP_RUN of " + std::to_string(bytes) + " bytes refused: the process has " +
                           std::to_string(held) + " of its " + std::to_string(limits_.mapped_bytes) +
                           " (--max-mapped-mib-per-client)");
                return reply_status(c, EDQUOT);
            }
            uint64_t pa = 0;
            if (!k.sw->os.alloc_contiguous(bytes, fw::PAGE_BYTES, &pa)) return reply_status(c, ENOMEM);
            const int e = c.as->map_run(r->va, pa, r->pages);
            if (e)
                k.sw->os.free(pa);
            else
                c.mapped += bytes;
            return reply_with(c, e, pa);
        }
        case sp::UNMAP_RUN: {
            const auto* r = request_as<sp::run_req>(m);
            if (!r) break;
            const int e = c.as->unmap_run(r->va, r->pages);
            if (!e) c.mapped -= r->pages * fw::PAGE_BYTES;
            return reply_status(c, e);
        }
        case sp::REG_MR: {
            const auto* r = request_as<sp::reg_mr_req>(m);
            verbs::ibv_pd* pd = r ? lookup(c.pds, r->pd) : nullptr;
            if (!pd) break;
            verbs::ibv_mr* mr = verbs::ibv_reg_mr(pd, r->va, r->length, r->access);
            if (!mr) return reply_status(c, errno ? errno : EINVAL);
            const uint64_t id = c.next_id++;
            c.mrs[id] = mr;
            return reply_with(c, 0, sp::reg_mr_rep{id, mr->lkey, mr->rkey});
        }
        case sp::DEREG_MR: {
            const int e = destroy_named(
                m, c.mrs, [](verbs::ibv_mr* mr) { return verbs::ibv_dereg_mr(mr); },
                [&](uint64_t id, verbs::ibv_mr*) { c.mrs.erase(id); });
            if (e < 0) break;
            return reply_status(c, e);
        }
        case sp::REREG_MR: {
            const auto* r = request_as<sp::rereg_mr_req>(m);
            verbs::ibv_mr* mr = r ? lookup(c.mrs, r->id) : nullptr;
            verbs::ibv_pd* pd =
                r && (r->flags & verbs::IBV_REREG_MR_CHANGE_PD) ? lookup(c.pds, r->pd) : nullptr;
            if (!mr || (r->flags & verbs::IBV_REREG_MR_CHANGE_PD && !pd)) break;
            const int e = verbs::ibv_rereg_mr(mr, r->flags, pd, r->va, r->length, r->access);
            return reply_with(c, e, sp::reg_mr_rep{r->id, mr->lkey, mr->rkey});
        }
        case sp::ALLOC_MW: {
            const auto* r = request_as<sp::alloc_mw_req>(m);
            verbs::ibv_pd* pd = r ? lookup(c.pds, r->pd) : nullptr;
            if (!pd) break;
            verbs::ibv_mw* mw = verbs::ibv_alloc_mw(pd, verbs::ibv_mw_type(r->type));
            if (!mw) return reply_status(c, errno ? errno : EINVAL);
            const uint64_t id = c.next_id++;
            c.mws[id] = mw;
            return reply_with(c, 0, sp::mw_rep{id, mw->rkey, mw->handle});
        }
        case sp::DEALLOC_MW: {
            const int e = destroy_named(
                m, c.mws, [](verbs::ibv_mw* mw) { return verbs::ibv_dealloc_mw(mw); },
                [&](uint64_t id, verbs::ibv_mw*) { c.mws.erase(id); });
            if (e < 0) break;
            return reply_status(c, e);
        }
        case sp::NEXT_KEY: {
            const auto* r = request_as<sp::u64_req>(m);
            bool owned = false;  // only a window of this context
            for (auto& kv : c.mws) owned |= r && kv.second->handle == r->value;
            if (!owned) break;
            return reply_with(c, 0, k.sw->driver.next_key_byte(uint32_t(r->value)));
        }
        case sp::CREATE_CQ: {
            const auto* r = request_as<sp::create_cq_req>(m);
            if (!r) break;
            const int chan = r->has_channel ? take_fd(m) : -1;
            if (r->has_channel && chan < 0) break;
            verbs::ibv_cq* cq = verbs::ibv_create_cq(c.ctx, r->cqe, nullptr, nullptr, r->comp_vector);
            if (!cq) {
                if (chan >= 0) close(chan);
                return reply_status(c, errno ? errno : EINVAL);
            }
            const uint64_t id = c.next_id++;
            c.cqs[id] = cq;
            c.user[cq] = r->user_handle;
            if (chan >= 0) c.channel[cq] = chan;  // non-blocking: own_pipe
            return reply_with(c, 0, cq_reply(id, cq));
        }
        case sp::DESTROY_CQ: {
            const int e = destroy_named(
                m, c.cqs, [](verbs::ibv_cq* cq) { return verbs::ibv_destroy_cq(cq); },
                [&](uint64_t id, verbs::ibv_cq* cq) { forget_cq(c, id, cq); });
            if (e < 0) break;
            return reply_status(c, e);
        }
        case sp::RESIZE_CQ: {
            const auto* r = request_as<sp::resize_cq_req>(m);
            verbs::ibv_cq* cq = r ? lookup(c.cqs, r->id) : nullptr;
            if (!cq) break;
            cq->consumer = r->consumer;
            const int e = verbs::ibv_resize_cq(cq, r->cqe);
            return reply_with(c, e, cq_reply(r->id, cq));
        }
        case sp::CREATE_QP: {
            const auto* r = request_as<sp::create_qp_req>(m);
            if (!r) break;
            verbs::ibv_pd* pd = lookup(c.pds, r->pd);
            verbs::ibv_qp_init_attr ia{};
            ia.send_cq = lookup(c.cqs, r->send_cq);
            ia.recv_cq = lookup(c.cqs, r->recv_cq);
            ia.srq = r->srq ? lookup(c.srqs, r->srq) : nullptr;
            if (!pd || !ia.send_cq || !ia.recv_cq || (r->srq && !ia.srq)) break;
            ia.cap = r->cap;
            ia.qp_type = verbs::ibv_qp_type(r->qp_type);
            ia.sq_sig_all = r->sq_sig_all;
            verbs::ibv_qp* qp = verbs::ibv_create_qp(pd, &ia);
            if (!qp) return reply_status(c, errno ? errno : EINVAL);
            const uint64_t id = c.next_id++;
            c.qps[id] = qp;
            c.user[qp] = r->user_handle;
            return reply_with(c, 0, qp_reply(id, qp));
        }
        case sp::MODIFY_QP: {
            const auto* r = request_as<sp::modify_qp_req>(m);
            verbs::ibv_qp* qp = r ? lookup(c.qps, r->id) : nullptr;
            if (!qp) break;
            set_counts(qp, r->counts);
            verbs::ibv_qp_attr a = r->attr;
            const int e = verbs::ibv_modify_qp(qp, &a, r->mask);
            return reply_with(c, e, qp_reply(r->id, qp));
        }
        case sp::QUERY_QP: {
            const auto* r = request_as<sp::modify_qp_req>(m);
            verbs::ibv_qp* qp = r ? lookup(c.qps, r->id) : nullptr;
            if (!qp) break;
            set_counts(qp, r->counts);
            sp::query_qp_rep q{};
            verbs::ibv_qp_init_attr ia{};
            const int e = verbs::ibv_query_qp(qp, &q.attr, r->mask, &ia);
            q.cap = ia.cap;
            q.sq_sig_all = ia.sq_sig_all;
            return reply_with(c, e, q);
        }
        case sp::DESTROY_QP: {
            const int e = destroy_named(
                m, c.qps, [](verbs::ibv_qp* qp) { return verbs::ibv_destroy_qp(qp); },
                [&](uint64_t id, verbs::ibv_qp* qp) {
                    c.qps.erase(id);
                    c.user.erase(qp);
                });
            if (e < 0) break;
            return reply_status(c, e);
        }
        case sp::CREATE_SRQ: {
            const auto* r = request_as<sp::create_srq_req>(m);
            verbs::ibv_pd* pd = r ? lookup(c.pds, r->pd) : nullptr;
            if (!pd) break;
            verbs::ibv_srq_init_attr ia{};
            ia.attr = r->attr;
            verbs::ibv_srq* s = verbs::ibv_create_srq(pd, &ia);
            if (!s) return reply_status(c, errno ? errno : EINVAL);
            const uint64_t id = c.next_id++;
            c.srqs[id] = s;
            c.user[s] = r->user_handle;
            sp::srq_rep rep = srq_reply(id, s);
            rep.attr = ia.attr;
            return reply_with(c, 0, rep);
        }
        case sp::MODIFY_SRQ:
        case sp::QUERY_SRQ: {
            const auto* r = request_as<sp::modify_srq_req>(m);
            verbs::ibv_srq* s = r ? lookup(c.srqs, r->id) : nullptr;
            if (!s) break;
            s->ring.producer = r->producer;
            s->ring.completed = r->completed;
            verbs::ibv_srq_attr a = r->attr;
            const int e =
                op == sp::MODIFY_SRQ ? verbs::ibv_modify_srq(s, &a, r->mask) : verbs::ibv_query_srq(s, &a);
            sp::srq_rep rep = srq_reply(r->id, s);
            rep.attr = a;
            return reply_with(c, e, rep);
        }
        case sp::DESTROY_SRQ: {
            const int e = destroy_named(
                m, c.srqs, [](verbs::ibv_srq* s) { return verbs::ibv_destroy_srq(s); },
                [&](uint64_t id, verbs::ibv_srq* s) {
                    c.srqs.erase(id);
                    c.user.erase(s);
                });
            if (e < 0) break;
            return reply_status(c, e);
        }
        case sp::ATTACH_MCAST:
        case sp::DETACH_MCAST: {
            const auto* r = request_as<sp::mcast_req>(m);
            verbs::ibv_qp* qp = r ? lookup(c.qps, r->qp) : nullptr;
            if (!qp) break;
            verbs::ibv_gid g{};
            std::memcpy(g.raw, r->gid, 16);
            const int e = op == sp::ATTACH_MCAST ? verbs::ibv_attach_mcast(qp, &g, r->lid)
                                                 : verbs::ibv_detach_mcast(qp, &g, r->lid);
            return reply_status(c, e);
        }
        default: log(c, "unknown request " + std::to_string(op)); return reply_status(c, EOPNOTSUPP);
        }
        // A request of the wrong size or naming an object this context does not own.
        log(c, "malformed request " + std::to_string(op));
        reply_status(c, EINVAL);
    }

    static void set_counts(verbs::ibv_qp* qp, const sp::ring_counts& n) {
        qp->sq.producer = n.sq_producer;
        qp->sq.completed = n.sq_completed;
        qp->rq.producer = n.rq_producer;
        qp->rq.completed = n.rq_completed;
    }

    void forget_cq(connection& c, uint64_t id, verbs::ibv_cq* cq) {
        auto it = c.channel.find(cq);
        if (it != c.channel.end()) {
            close(it->second);
            c.channel.erase(it);
        }
        c.user.erase(cq);
        c.cqs.erase(id);
    }

    /// A client went away: everything it still owned is destroyed, as the kernel does for a
    /// process that exits.
    void teardown(connection& c) {
        for (auto& [id, qp] : c.qps) verbs::ibv_destroy_qp(qp);
        for (auto& [id, s] : c.srqs) verbs::ibv_destroy_srq(s);
        for (auto& [id, cq] : c.cqs) {
            verbs::ibv_destroy_cq(cq);
            if (c.channel.count(cq)) close(c.channel[cq]);
        }
        for (auto& [id, mw] : c.mws) verbs::ibv_dealloc_mw(mw);
        for (auto& [id, mr] : c.mrs) verbs::ibv_dereg_mr(mr);
        for (auto& [id, pd] : c.pds) verbs::ibv_dealloc_pd(pd);
        c.qps.clear();
        c.srqs.clear();
        c.cqs.clear();
        c.mws.clear();
        c.mrs.clear();
        c.pds.clear();
        c.channel.clear();
        c.user.clear();
        if (verbs::ibv_close_device(c.ctx) != 0) log(c, "ibv_close_device failed");
        c.ctx = nullptr;
        c.as.reset();  // frees the runs
        c.mapped = 0;
    }
};

/// The address of socket `path`; false (and *err) if the path is too long.
bool socket_address(const std::string& path, sockaddr_un* a, std::string* err) {
    *a = sockaddr_un{};
    if (path.size() >= sizeof a->sun_path) {
        *err = "--socket " + path + ": path too long";
        return false;
    }
    a->sun_family = AF_UNIX;
    std::memcpy(a->sun_path, path.c_str(), path.size() + 1);
    return true;
}

/// Whether the server may listen at `path`: nothing is there, or a socket nobody listens on (a
/// server that is gone), which it removes. A file that is not a socket, or a live server's
/// socket, is refused (*err): a second server must not take the first's clients.
bool claim_socket_path(const std::string& path, std::string* err) {
    sockaddr_un a;
    if (!socket_address(path, &a, err)) return false;
    struct stat st {};
    if (lstat(path.c_str(), &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            *err = "--socket " + path + ": exists and is not a socket (left as it is)";
            return false;
        }
        // Non-blocking: a live server with a full backlog says EAGAIN rather than keep us waiting.
        const int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        const int e = probe < 0                                                        ? errno
                      : connect(probe, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 0
                                                                                       : errno;
        if (probe >= 0) close(probe);
        if (e == 0) {
            *err = "--socket " + path + ": a server is listening there already";
            return false;
        }
        if (e != ECONNREFUSED) {
            *err = "--socket " + path + ": cannot tell whether a server listens there (" + std::strerror(e) +
                   ")";
            return false;
        }
        unlink(path.c_str());  // stale: its server is gone
    }
    return true;
}

/// Listens on `path` (claim_socket_path), a socket file of mode 0600 (0666 with `other_users`);
/// *ino is its inode. The socket is bound and listening under a temporary name first and then
/// linked to `path`: a client that sees the file (with-simhca.sh and the tests wait for it) can
/// connect at once, and link() refuses to replace a server that took the path meanwhile.
int listen_on(const std::string& path, bool other_users, ino_t* ino, std::string* err) {
    sockaddr_un a;
    if (!claim_socket_path(path, err) || !socket_address(path, &a, err)) return -1;
    std::string tmp = path + ".new" + std::to_string(getpid()), too_long;
    const bool in_place = !socket_address(tmp, &a, &too_long);  // no room for the other name
    if (in_place) {
        tmp = path;
        socket_address(path, &a, err);
    }
    struct stat st {};
    const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *err = std::string("socket: ") + std::strerror(errno);
        return -1;
    }
    if (!in_place) unlink(tmp.c_str());  // left by a server of this PID that died before linking it
    // bind() creates the file with the socket's mode: never more than 0600 before the chmod.
    const bool ok = fchmod(fd, 0600) == 0 && bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                    listen(fd, 64) == 0 && (!other_users || chmod(tmp.c_str(), 0666) == 0) &&
                    (in_place || ::link(tmp.c_str(), path.c_str()) == 0) && stat(path.c_str(), &st) == 0;
    const int e = errno;
    if (!in_place) unlink(tmp.c_str());
    if (!ok) {
        *err = "--socket " + path +
               (e == EEXIST ? ": another server took the path meanwhile"
                            : std::string(": cannot listen there: ") + std::strerror(e));
        close(fd);
        return -1;
    }
    *ino = st.st_ino;
    return fd;
}

}  // namespace

int serve_main(int argc, char* argv[]) {
    namespace po = boost::program_options;
    po::options_description od(
        "hcasim serve: simulated HCAs for libibverbs applications (docs/libibverbs.md)");
    od.add_options()("help,h", "this help")("socket", po::value<std::string>()->default_value("hcasim.sock"),
                                            "Unix socket the provider connects to (the provider reads "
                                            "HCASIM_SOCKET); made 0600, refused if the path "
                                            "holds anything but a socket nobody listens on")(
        "allow-other-users",
        "serve clients of other Unix users too (socket 0666; otherwise they get EACCES)")(
        "max-contexts-per-client", po::value<unsigned>()->default_value(64),
        "device contexts one client process may have open at a time (more: EDQUOT)")(
        "max-mapped-mib-per-client", po::value<uint64_t>()->default_value(4096),
        "MiB of registered buffers one client process may have in simulated memory (more: EDQUOT)")(
        "sysfs", po::value<std::string>(),
        "write a sysfs tree describing the HCAs under this directory (for libibverbs' SYSFS_PATH)")(
        "config", po::value<std::vector<std::string>>()->composing(), "INI file of parameters (repeatable)")(
        "set", po::value<std::vector<std::string>>()->composing(),
        "key=value parameter override (repeatable)")("quantum-ns",
                                                     po::value<double>()->default_value(10000.0),
                                                     "longest gap between two events the simulation runs "
                                                     "through at full speed; across longer gaps simulated "
                                                     "time advances no faster than wall-clock time")(
        "verbose,v", "log every client's requests and events to stderr");
    po::variables_map vm;
    try {
        po::store(po::command_line_parser(argc - 1, argv + 1).options(od).run(), vm);
        po::notify(vm);
    } catch (const po::error& e) {
        std::cerr << "hcasim: error: serve: " << e.what() << "\n";
        return 2;
    }
    if (vm.count("help")) {
        std::cout << od << "\n";
        return 0;
    }
    const double quantum_ns = vm["quantum-ns"].as<double>();
    if (!(quantum_ns >= 1.0 && quantum_ns <= 1e9)) {
        std::cerr << "hcasim: error: serve: --quantum-ns must be 1 .. 1e9\n";
        return 2;
    }
    client_limits limits;
    limits.contexts = vm["max-contexts-per-client"].as<unsigned>();
    const uint64_t mib = vm["max-mapped-mib-per-client"].as<uint64_t>();
    limits.other_users = vm.count("allow-other-users") > 0;
    if (limits.contexts < 1 || limits.contexts > hw::MAX_UARS) {
        std::cerr << "hcasim: error: serve: --max-contexts-per-client must be 1 .. " << hw::MAX_UARS << "\n";
        return 2;
    }
    if (mib < 1 || mib > (uint64_t(1) << 24)) {  // memory.size_bytes is at most 2^44
        std::cerr << "hcasim: error: serve: --max-mapped-mib-per-client must be 1 .. 16777216\n";
        return 2;
    }
    limits.mapped_bytes = mib << 20;
    const std::string sock_path = vm["socket"].as<std::string>();
    if (std::string err; !claim_socket_path(sock_path, &err)) {  // before the boot, which takes a while
        std::cerr << "hcasim: error: serve: " << err << "\n";
        return 2;
    }
    std::unique_ptr<machine> m;
    std::unique_ptr<server> srv;
    try {
        broker& b = broker::instance();
        if (vm.count("config"))
            for (const auto& f : vm["config"].as<std::vector<std::string>>()) b.load_ini(f);
        if (vm.count("set"))
            for (const auto& s : vm["set"].as<std::vector<std::string>>()) b.set_override(s);
        m = std::make_unique<machine>();
        srv = std::make_unique<server>("serve", *m, vm.count("verbose") > 0, limits);
        b.check_unused();
    } catch (const config_error& e) {
        std::cerr << "hcasim: error: serve: " << e.what() << "\n";
        return 2;
    }
    sc_report_handler::set_actions(SC_ID_NO_SC_START_ACTIVITY_, SC_DO_NOTHING);

    // SIGINT / SIGTERM end the server through the poll loop.
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigprocmask(SIG_BLOCK, &sigs, nullptr);
    const int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    signal(SIGPIPE, SIG_IGN);

    // Simulated time. While events follow each other closely (within the quantum) the simulation
    // runs as fast as it can, one event time per sc_start (stopping 1 ps after it, so that time
    // never jumps past a moment a client message could have arrived in). Across a longer gap
    // (a timer far ahead, or a cancelled one the kernel still keeps) simulated time advances no
    // faster than wall-clock time: a client that takes a while to post its next request meets the
    // same timers it would meet on hardware, and the reported simulated time is not inflated by
    // jumps to notifications nobody waits for.
    const sc_time quantum(quantum_ns, SC_NS);
    const sc_time step_past(1, SC_PS);
    auto run_burst = [&] {
        // At most ~2 ms of wall time, then the sockets get a look.
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
        for (unsigned n = 0; sc_pending_activity(); ++n) {
            const sc_time dt = sc_time_to_pending_activity();
            if (dt > quantum) break;
            sc_start(dt + step_past, SC_EXIT_ON_STARVATION);
            if ((n & 255) == 255 && std::chrono::steady_clock::now() > until) break;
        }
    };
    // Boot: every driver up, every port active (at full speed: nobody is waiting yet).
    auto boot_slice = [&] {
        sc_time dt = sc_time_to_pending_activity();
        if (dt < quantum) dt = quantum;
        sc_start(dt, SC_EXIT_ON_STARVATION);
    };
    // Boot: every driver up, every port active.
    sc_start(SC_ZERO_TIME);
    while (!srv->all_up() && srv->boot_error().empty() && sc_pending_activity()) boot_slice();
    if (!srv->all_up()) {
        const std::string e = srv->boot_error();
        std::cerr << "hcasim: error: serve: " << (e.empty() ? "the HCAs did not come up" : e) << "\n";
        return 1;
    }
    if (vm.count("sysfs")) {
        const std::string dir = vm["sysfs"].as<std::string>();
        if (const std::string e = write_fake_sysfs(dir, srv->devices()); !e.empty()) {
            std::cerr << "hcasim: error: serve: --sysfs " << dir << ": " << e << "\n";
            return 2;
        }
    }
    std::string err;
    ino_t sock_ino = 0;
    const int lfd = listen_on(sock_path, limits.other_users, &sock_ino, &err);
    if (lfd < 0) {
        std::cerr << "hcasim: error: serve: " << err << "\n";
        return 2;
    }
    std::printf("hcasim serve: %zu HCAs (hcasim0..hcasim%zu) ready at %s, simulated time %.0f ns\n",
                m->size(), m->size() - 1, sock_path.c_str(), sc_time_stamp().to_seconds() * 1e9);
    std::fflush(stdout);

    // Out of descriptors (EMFILE, ENFILE), accept() fails and leaves the listening socket
    // readable: polled again at once it would spin. It is left out of the poll for a while
    // instead; new clients wait in the backlog, connected ones are served meanwhile.
    const auto accept_backoff = std::chrono::milliseconds(100);
    std::chrono::steady_clock::time_point accept_again{};
    bool short_of_fds = false;
    bool stop = false;
    bool in_gap = false;
    sc_time gap_start;
    std::chrono::steady_clock::time_point gap_end;
    while (!stop) {
        std::vector<connection*> conns = srv->live();
        std::vector<pollfd> pf;
        pf.push_back({sfd, POLLIN, 0});
        const auto now = std::chrono::steady_clock::now();
        const bool accepting = now >= accept_again;
        pf.push_back({lfd, short(accepting ? POLLIN : 0), 0});
        // A connection whose inbox is full is watched only for its client going away.
        for (connection* c : conns)
            pf.push_back({c->fd, short(c->inbox.size() < MAX_INBOX ? POLLIN : POLLRDHUP), 0});
        int wait_ms = -1;  // nothing scheduled: sleep until a client or a signal comes
        if (sc_pending_activity()) {
            const sc_time dt = sc_time_to_pending_activity();
            wait_ms = 0;
            if (dt > quantum) {  // a gap: let wall-clock time catch up with it
                if (!in_gap || gap_start != sc_time_stamp()) {
                    in_gap = true;
                    gap_start = sc_time_stamp();
                    gap_end = now + std::chrono::nanoseconds(int64_t(dt.to_seconds() * 1e9));
                }
                if (gap_end > now)
                    wait_ms =
                        int(std::chrono::duration_cast<std::chrono::milliseconds>(gap_end - now).count()) + 1;
            }
        }
        if (!accepting) {
            const int left =
                int(std::chrono::duration_cast<std::chrono::milliseconds>(accept_again - now).count()) + 1;
            if (wait_ms < 0 || wait_ms > left) wait_ms = left;
        }
        if (poll(pf.data(), pf.size(), wait_ms) < 0 && errno != EINTR) {
            std::perror("hcasim serve: poll");
            break;
        }
        if (pf[0].revents) stop = true;
        if (pf[1].revents & POLLIN)
            for (;;) {
                const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) {
                    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                        accept_again = std::chrono::steady_clock::now() + accept_backoff;
                        if (!short_of_fds)
                            std::fprintf(
                                stderr,
                                "hcasim serve: cannot accept a client (%s): trying again every %lld ms\n",
                                std::strerror(errno), static_cast<long long>(accept_backoff.count()));
                        short_of_fds = true;
                    }
                    break;
                }
                short_of_fds = false;
                srv->accept(fd);
            }
        for (size_t i = 0; i < conns.size(); ++i) {
            if (!pf[i + 2].revents) continue;
            if (pf[i + 2].events & POLLIN)
                srv->read_client(*conns[i]);
            else
                srv->hang_up(*conns[i]);
        }
        if (!sc_pending_activity()) continue;
        if (sc_time_to_pending_activity() <= quantum) {
            in_gap = false;
            run_burst();
        } else if (in_gap && std::chrono::steady_clock::now() >= gap_end) {
            in_gap = false;
            sc_start(sc_time_to_pending_activity() + step_past, SC_EXIT_ON_STARVATION);
        }
    }
    close(lfd);
    struct stat sock_st {};  // the socket file, unless someone has put another there meanwhile
    if (lstat(sock_path.c_str(), &sock_st) == 0 && sock_st.st_ino == sock_ino) unlink(sock_path.c_str());
    const stats_registry& st = stats_registry::instance();
    std::printf(
        "hcasim serve: stopped at simulated time %.0f ns: %llu wire packets, %llu requests, %llu doorbells "
        "served\n",
        sc_time_stamp().to_seconds() * 1e9, static_cast<unsigned long long>(st.sum("port.tx_packets")),
        static_cast<unsigned long long>(srv->served_requests()),
        static_cast<unsigned long long>(srv->served_doorbells()));
    for (unsigned i = 0; i < m->size(); ++i) {
        auto v = [&](const char* k) {
            const counter* c = st.find("node" + std::to_string(i) + ".hca." + k);
            return static_cast<unsigned long long>(c ? c->value() : 0);
        };
        std::printf(" node%u: tx %llu packets / %llu bytes, rx %llu packets, %llu CQEs, %llu doorbells\n", i,
                    v("port.tx_packets"), v("port.tx_bytes"), v("port.rx_packets"), v("cq_writer.cqes"),
                    v("doorbell_unit.writes"));
    }
    return 0;
}

}  // namespace hcasim
