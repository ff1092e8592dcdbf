// See session.h.
#include "provider/session.h"
#include "provider/fd_passing.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace hcasim::provider {

namespace sp = serve_proto;

namespace {
/// Every run of every context of this process, first va -> (end, owner): a page lives in one
/// node's memory file at a time, so two contexts cannot both move it.
std::mutex all_runs_lock;
std::map<uint64_t, std::pair<uint64_t, const session*>> all_runs;

/// Whether [lo, hi) overlaps a run of another context.
bool taken_by_other(uint64_t lo, uint64_t hi, const session* me) {
    std::lock_guard<std::mutex> g(all_runs_lock);
    auto it = all_runs.upper_bound(lo);
    if (it != all_runs.begin()) --it;
    for (; it != all_runs.end() && it->first < hi; ++it)
        if (it->second.first > lo && it->second.second != me) return true;
    return false;
}
/// The pages [*lo, *hi) covering [addr, addr + len); false if that range, rounded up to a page,
/// would pass the top of the address space (checked without computing the sum that wraps).
bool page_span(uint64_t addr, uint64_t len, uint64_t* lo, uint64_t* hi) {
    const uint64_t top = ~uint64_t(0) - (fw::PAGE_BYTES - 1);
    if (addr > top || len > top - addr) return false;
    *lo = addr & ~(fw::PAGE_BYTES - 1);
    *hi = (addr + len + fw::PAGE_BYTES - 1) & ~(fw::PAGE_BYTES - 1);
    return true;
}
void note_run(uint64_t va, uint64_t end, const session* owner) {
    std::lock_guard<std::mutex> g(all_runs_lock);
    if (owner)
        all_runs[va] = {end, owner};
    else
        all_runs.erase(va);
}
}  // namespace

// ---------------------------------------------------------------------------- user_bus

void user_bus::mem_read(uint64_t pa, void* dst, size_t n) { s_.memory().read(pa, dst, n); }

uint8_t user_bus::load_acquire8(uint64_t pa) { return s_.memory().load_acquire8(pa); }

void user_bus::mem_write(uint64_t pa, const void* src, size_t n) { s_.memory().write(pa, src, n); }

void user_bus::mmio_write(uint64_t bar_offset, const void* src, size_t n) {
    sp::mmio_write_req m{};
    m.h.op = sp::MMIO_WRITE;
    m.offset = bar_offset;
    m.bytes = uint32_t(std::min(n, sizeof m.data));
    std::memcpy(m.data, src, m.bytes);
    // Only the bytes used travel.
    s_.post(&m, offsetof(sp::mmio_write_req, data) + m.bytes);
}

uint32_t user_bus::mmio_read32(uint64_t bar_offset) {
    uint32_t v = 0;
    // A server that is gone answers nothing: the read gives 0 and dead() tells the verbs, which
    // fail from then on (host_bus reads have no error path).
    (void)s_.call(sp::u64_req{{sp::MMIO_READ32, 0}, bar_offset}, &v);
    return v;
}

bool user_bus::wait_write(uint64_t pa, size_t n, uint64_t timeout_ns) {
    // Nothing in the user half waits on memory through the bus (applications poll the CQ or
    // their buffers themselves); watch the bytes change, with simulated timeouts.
    std::vector<uint8_t> before(n);
    mem_read(pa, before.data(), n);
    const uint64_t deadline = timeout_ns ? now_ns() + timeout_ns : 0;
    for (;;) {
        std::vector<uint8_t> now(n);
        mem_read(pa, now.data(), n);
        if (now != before) return true;
        if (deadline && now_ns() >= deadline) return false;
        std::this_thread::yield();
    }
}

uint64_t user_bus::now_ns() const {
    uint64_t v = 0;
    (void)s_.call(sp::header{sp::NOW, 0}, &v);  // as mmio_read32: 0 once the server is gone
    return v;
}

void user_bus::sleep_ns(uint64_t ns) {
    (void)s_.call(sp::u64_req{{sp::SLEEP, 0}, ns});  // a server that is gone has no time left to wait
}

// ---------------------------------------------------------------------------- session

std::unique_ptr<session> session::open(unsigned node, int* err, std::string* why) {
    std::unique_ptr<session> s(new session());
    const char* env = std::getenv("HCASIM_SOCKET");
    const std::string path = env && *env ? env : "hcasim.sock";
    sockaddr_un a{};
    if (path.size() >= sizeof a.sun_path) {
        *err = ENAMETOOLONG;
        *why = "HCASIM_SOCKET is too long: " + path;
        return nullptr;
    }
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
    s->fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (s->fd_ < 0 || connect(s->fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0) {
        *err = errno;
        *why = "cannot reach hcasim serve at " + path + " (" + std::strerror(errno) +
               "): start it, or set HCASIM_SOCKET (scripts/with-simhca.sh does both)";
        return nullptr;
    }
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) < 0) {
        *err = errno;
        *why = "pipe2 failed";
        return nullptr;
    }
    s->async_fd_ = pipe_fds[0];
    sp::open_req req{};
    req.h.op = sp::OPEN;
    req.version = sp::VERSION;
    req.node = node;
    req.pid = getpid();
    int memfd = -1;
    const int st = s->call(&req, sizeof req, &s->info_, sizeof s->info_, pipe_fds[1], &memfd);
    s->async_wr_ = pipe_fds[1];
    if (st) {
        *err = st;
        *why = st == EPROTO   ? "hcasim serve speaks another protocol version (rebuild both)"
               : st == EACCES ? "hcasim serve at " + path +
                                    " runs as another user (it admits others with --allow-other-users)"
               : st == EDQUOT ? "this process has as many contexts open as hcasim serve allows one client "
                                "(--max-contexts-per-client)"
                              : std::string("hcasim serve refused to open the device: ") + std::strerror(st);
        if (memfd >= 0) close(memfd);
        return nullptr;
    }
    if (memfd < 0) {
        *err = EPROTO;
        *why = "hcasim serve sent no memory";
        return nullptr;
    }
    s->mem_fd_ = memfd;
    void* m = mmap(nullptr, s->info_.mem_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, memfd, 0);
    if (m == MAP_FAILED) {
        *err = errno;
        *why = "cannot map the simulated host memory";
        return nullptr;
    }
    s->mem_ = static_cast<uint8_t*>(m);
    // The user-space view of the node's driver, and the context the data-path verbs take.
    std::vector<hw::port_info> ports(s->info_.ports,
                                     s->info_.ports + std::min(s->info_.nports, sp::MAX_PORTS));
    session* self = s.get();
    s->driver.attach_user_view(s->info_.caps, ports, s->info_.num_qps, [self](uint32_t index) {
        uint8_t b = 0;
        // Once the server is gone the byte is 0: the bind's doorbell reaches no HCA anyway.
        (void)self->call(sp::u64_req{{sp::NEXT_KEY, 0}, index}, &b);
        return b;
    });
    s->as.direct = true;
    s->ctx.driver = &s->driver;
    s->ctx.as = &s->as;
    s->ctx.uar = s->info_.uar;
    s->ctx.num_comp_vectors = s->info_.num_comp_vectors;
    s->opener_ = getpid();
    s->watcher_ = std::thread([self] { self->watch_server(); });
    return s;
}

void session::watch_server() {
    pollfd p{fd_, POLLRDHUP, 0};
    for (;;) {
        const int r = ::poll(&p, 1, -1);
        if (closing_.load(std::memory_order_acquire)) return;
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 || (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) break;
    }
    lost();
}

void session::lost() {
    if (dead_.exchange(true, std::memory_order_acq_rel)) return;
    // What the kernel queues after a catastrophic error: ibv_get_async_event returns it, once.
    sp::async_event_record r{};
    r.event_type = uint32_t(verbs::IBV_EVENT_DEVICE_FATAL);
    if (async_wr_ >= 0) (void)!write(async_wr_, &r, sizeof r);
}

session::~session() {
    if (watcher_.joinable()) {
        if (getpid() != opener_) {
            // A child of the process that opened the context (fork without exec): the watcher is
            // the parent's; shutting the shared connection down would end the parent's context.
            watcher_.detach();
        } else {
            // Our own shutdown hangs the connection up for the watcher, which then sees closing_.
            closing_.store(true, std::memory_order_release);
            shutdown(fd_, SHUT_RDWR);
            watcher_.join();
        }
    }
    // Buffers still registered go back to private memory before the server frees their pages.
    std::map<uint64_t, run> left;
    {
        std::lock_guard<std::mutex> g(runs_lock_);
        left.swap(runs_);
    }
    for (auto& [va, r] : left) release_run(va, r);
    if (mem_) munmap(mem_, info_.mem_bytes);
    if (mem_fd_ >= 0) close(mem_fd_);
    if (fd_ >= 0) close(fd_);
    if (async_wr_ >= 0) close(async_wr_);
    // async_fd_ is closed by libibverbs (verbs_uninit_context).
}

int session::call(const void* req, size_t n, void* rep, size_t rep_n, int fd_out, int* fd_in) {
    std::lock_guard<std::mutex> g(call_lock_);
    if (dead()) return EIO;
    if (sp::send_with_fd(fd_, req, n, fd_out) < 0) {
        lost();
        return EIO;
    }
    uint8_t buf[sp::MAX_MESSAGE];
    std::vector<int> fds;
    const ssize_t got = sp::recv_with_fds(fd_, buf, sizeof buf, &fds);
    for (size_t i = 0; i < fds.size(); ++i) {
        if (i == 0 && fd_in)
            *fd_in = fds[0];
        else
            close(fds[i]);
    }
    if (got < ssize_t(sizeof(sp::reply))) {
        lost();
        return EIO;
    }
    sp::reply rp;
    std::memcpy(&rp, buf, sizeof rp);
    if (rep) {
        const size_t have = size_t(got) - sizeof rp;
        std::memset(rep, 0, rep_n);
        std::memcpy(rep, buf + sizeof rp, std::min(have, rep_n));
    }
    return rp.status;
}

void session::post(const void* msg, size_t n) {
    std::lock_guard<std::mutex> g(call_lock_);
    if (!dead() && send(fd_, msg, n, MSG_NOSIGNAL) < 0 && errno != EINTR) lost();
}

int session::map_run(uint64_t va, uint64_t pages) {
    const uint64_t len = pages * fw::PAGE_BYTES;
    uint64_t pa = 0;
    if (int e = call(sp::run_req{{sp::MAP_RUN, 0}, va, pages}, &pa)) return e;
    // The pages' current contents move with them; an unmapped page makes the registration fail
    // (EFAULT, like the kernel's get_user_pages) without touching anything.
    iovec local{mem_ + pa, len}, remote{reinterpret_cast<void*>(uintptr_t(va)), len};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(len) ||
        mmap(reinterpret_cast<void*>(uintptr_t(va)), len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
             mem_fd_, off_t(pa)) == MAP_FAILED) {
        // Undoes MAP_RUN; if that fails the server is gone, and the run with it.
        (void)call(sp::run_req{{sp::UNMAP_RUN, 0}, va, pages});
        return EFAULT;
    }
    runs_[va] = run{pages, pa, 0};
    note_run(va, va + len, this);
    return 0;
}

void session::release_run(uint64_t va, const run& r) {
    const uint64_t len = r.pages * fw::PAGE_BYTES;
    note_run(va, 0, nullptr);
    void* p = reinterpret_cast<void*>(uintptr_t(va));
    // Back to private memory with the same contents, unless the application unmapped the range
    // meanwhile (then there is nothing to keep). The copy lives in a mapping of its own: heap
    // memory could lie inside the very range being replaced.
    void* keep = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (keep != MAP_FAILED) {
        iovec local{keep, len}, remote{p, len};
        if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == ssize_t(len) &&
            mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
                MAP_FAILED)
            std::memcpy(p, keep, len);
        munmap(keep, len);
    }
    (void)call(sp::run_req{{sp::UNMAP_RUN, 0}, va, r.pages});  // fails only once the server is gone
}

int session::share_range(uint64_t addr, uint64_t len) {
    if (len == 0) return 0;
    uint64_t lo, hi;
    if (!page_span(addr, len, &lo, &hi)) return EINVAL;
    // Pages another context of this process registered are in another memory (or belong to
    // another simulated process): registering them here too would move them from under it.
    if (taken_by_other(lo, hi, this)) return EBUSY;
    std::lock_guard<std::mutex> g(runs_lock_);
    // New runs for the gaps between the runs there are.
    std::vector<uint64_t> made;
    uint64_t at = lo;
    auto it = runs_.upper_bound(lo);
    if (it != runs_.begin() && std::prev(it)->first + std::prev(it)->second.pages * fw::PAGE_BYTES > lo) --it;
    while (at < hi) {
        if (it != runs_.end() && it->first <= at) {
            at = it->first + it->second.pages * fw::PAGE_BYTES;
            ++it;
            continue;
        }
        const uint64_t gap_end = it != runs_.end() ? std::min(hi, it->first) : hi;
        if (int e = map_run(at, (gap_end - at) / fw::PAGE_BYTES)) {
            for (uint64_t v : made) {
                run r = runs_[v];
                runs_.erase(v);
                release_run(v, r);
            }
            return e;
        }
        made.push_back(at);
        at = gap_end;
        it = runs_.upper_bound(at);
    }
    for (auto r = runs_.upper_bound(lo);;) {
        if (r != runs_.begin() && std::prev(r)->first + std::prev(r)->second.pages * fw::PAGE_BYTES > lo) --r;
        for (; r != runs_.end() && r->first < hi; ++r) ++r->second.refs;
        break;
    }
    return 0;
}

void session::unshare_range(uint64_t addr, uint64_t len) {
    uint64_t lo, hi;
    if (len == 0 || !page_span(addr, len, &lo, &hi)) return;
    std::lock_guard<std::mutex> g(runs_lock_);
    auto r = runs_.upper_bound(lo);
    if (r != runs_.begin() && std::prev(r)->first + std::prev(r)->second.pages * fw::PAGE_BYTES > lo) --r;
    while (r != runs_.end() && r->first < hi) {
        if (r->second.refs && --r->second.refs == 0) {
            const uint64_t va = r->first;
            const run keep = r->second;
            r = runs_.erase(r);
            release_run(va, keep);
            continue;
        }
        ++r;
    }
}

}  // namespace hcasim::provider
