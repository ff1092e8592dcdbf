#include "testbench/serve/server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/core/hex.h"
#include "provider/fd_passing.h"

namespace hcasim::serve {

namespace {

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

}  // namespace

server::server(sc_module_name n, machine& m, bool verbose, const client_limits& limits)
    : sc_module(n), m_(m), verbose_(verbose), limits_(limits), ops_(m) {
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
    ops_.on_cqe = [this](unsigned node, const void* cq, const hw::cqe& e) {
        if (rec_) rec_->completion(node, cq, e);
    };
}

void server::end_recording() {
    for (const auto& c : conns_)
        if (c->ctx)
            for (auto& [id, mr] : c->mrs) rec_->keep_contents(c->node, mr, *c->as);
    rec_->end();
}

bool server::all_up() const {
    for (const auto& k : kernel_)
        if (!k->up) return false;
    return true;
}

std::string server::boot_error() const {
    for (size_t i = 0; i < kernel_.size(); ++i)
        if (!kernel_[i]->boot_error.empty())
            return "node" + std::to_string(i) + ": " + kernel_[i]->boot_error;
    return "";
}

std::vector<fake_ib_device> server::devices() const {
    std::vector<fake_ib_device> v;
    for (const auto& k : kernel_) v.push_back(k->dev);
    return v;
}

void server::accept(int fd) {
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

void server::read_client(connection& c) {
    for (;;) {
        message m;
        // Buffers are recycled (serve_client gives them back): no allocation per doorbell.
        if (!spare_.empty()) {
            m.data = std::move(spare_.back());
            spare_.pop_back();
        }
        m.data.resize(sp::MAX_MESSAGE);
        bool truncated = false, lost = false;
        const ssize_t n =
            sp::recv_with_fds(c.fd, m.data.data(), m.data.size(), &m.fds, MSG_DONTWAIT, &truncated, &lost);
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

void server::hang_up(connection& c) {
    c.hangup = true;
    c.wake.notify(SC_ZERO_TIME);
}

std::vector<connection*> server::live() {
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

void server::boot(unsigned i) {
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

void server::interrupts(unsigned i) {
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

void server::log(const connection& c, const std::string& s) {
    if (verbose_)
        std::fprintf(stderr, "hcasim serve: client %u (pid %d, node %u): %s\n", c.id, c.pid, c.node,
                     s.c_str());
}

void server::send_reply(connection& c, int status, const void* payload, size_t n, int fd) {
    std::vector<uint8_t> buf(sizeof(sp::reply) + n);
    sp::reply r{status, 0};
    std::memcpy(buf.data(), &r, sizeof r);
    if (n) std::memcpy(buf.data() + sizeof r, payload, n);
    if (sp::send_with_fd(c.fd, buf.data(), buf.size(), fd) < 0) c.hangup = true;
}

void server::post_record(connection& c, int fd, const void* rec, size_t n) {
    if (fd < 0) return;
    if (write(fd, rec, n) != ssize_t(n))
        std::fprintf(stderr, "hcasim serve: client %u: an event record was dropped (%s)\n", c.id,
                     std::strerror(errno));
}

void server::on_async_event(connection& c, const verbs::ibv_async_event& e) {
    sp::async_event_record r{};
    r.event_type = uint32_t(e.event_type);
    switch (e.event_type) {
    case verbs::IBV_EVENT_CQ_ERR: r.element = c.user.count(e.element.cq) ? c.user[e.element.cq] : 0; break;
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
    if (rec_) rec_->event(c.node, e);
    post_record(c, c.async_fd, &r, sizeof r);
}

void server::on_comp_event(connection& c, verbs::ibv_cq* cq) {
    auto it = c.channel.find(cq);
    log(c, "completion event on CQ " + std::to_string(cq->handle) +
               (it == c.channel.end() ? " (no channel)" : ""));
    if (it == c.channel.end()) return;  // armed without a channel: nobody to tell
    sp::comp_event_record r{c.user[cq]};
    post_record(c, it->second, &r, sizeof r);
}

bool server::serve_one(connection& c, message& m) {
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
        log(c,
            "request " + std::to_string(h.op) + ": " +
                (m.fd_error == EINVAL ? "a descriptor that is not a pipe: refused" : "out of descriptors"));
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

void server::serve_client(connection& c) {
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

kernel_node* server::kernel_for(connection& c, const message& m) {
    unsigned node = c.node;
    if (!c.ctx) {
        const auto* r = request_as<sp::open_req>(m);
        if (!r) return nullptr;
        node = r->node;
    }
    return node < kernel_.size() && kernel_[node]->up ? kernel_[node].get() : nullptr;
}

void server::mmio_write(connection& c, const message& m) {
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
        log(c, "doorbell at UAR offset " + hex_address(r->offset - lo) + " of " + std::to_string(r->bytes) +
                   " bytes writes no register: dropped");
        return;
    }
    kernel_node& k = *kernel_[c.node];
    ++doorbells_;
    ++c.doorbells;
    ops_.doorbell(c.node, r->offset - lo, r->data, r->bytes, sc_time_stamp());
    if (rec_) rec_->doorbell(c.node, *c.as, r->offset - lo, r->data, r->bytes);
    k.lock->lock();
    try {  // whatever the model says of a write, it ends no more than the write
        k.sw->driver.bus().mmio_write(r->offset, r->data, r->bytes);
    } catch (const sc_report& e) {
        log(c, std::string("doorbell failed: ") + e.what());
    }
    k.lock->unlock();
}

void server::teardown(connection& c) {
    for (auto& [id, qp] : c.qps) verbs::ibv_destroy_qp(qp);
    for (auto& [id, s] : c.srqs) verbs::ibv_destroy_srq(s);
    for (auto& [id, x] : c.xrcds) verbs::ibv_close_xrcd(x);
    for (auto& [id, cq] : c.cqs) {
        ops_.unwatch_cq(cq);
        verbs::ibv_destroy_cq(cq);
        if (c.channel.count(cq)) close(c.channel[cq]);
    }
    for (auto& [id, mw] : c.mws) verbs::ibv_dealloc_mw(mw);
    for (auto& [id, mr] : c.mrs) {
        if (rec_) rec_->keep_contents(c.node, mr, *c.as);
        verbs::ibv_dereg_mr(mr);
    }
    for (auto& [id, pd] : c.pds) verbs::ibv_dealloc_pd(pd);
    c.qps.clear();
    c.srqs.clear();
    c.xrcds.clear();
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

}  // namespace hcasim::serve
