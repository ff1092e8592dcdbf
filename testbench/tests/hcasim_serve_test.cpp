// `hcasim serve` as a client sees it (docs/libibverbs.md): the sysfs tree, the protocol's errors for
// bad clients, hostile clients (each case of "What a client can reach" in docs/libibverbs.md,
// after which the server still serves), cleanup after a client dies, an idle server that sleeps,
// shutdown statistics. The applications themselves (pingpongs, perftest, pyverbs) are the
// Libibverbs.* ctest tests.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "provider/fd_passing.h"
#include "provider/protocol.h"
#include "testbench/tests/hcasim_run.h"

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

namespace sp = hcasim::serve_proto;
using hcasim::test::slurp;

/// One `hcasim serve` process with its socket and sysfs tree in a directory of its own:
/// `options` are added to its command line, `in_child` runs in its process before the exec.
class server {
public:
    explicit server(const std::string& tag, const std::vector<std::string>& options = {},
                    const std::function<void()>& in_child = {}) {
        dir_ = ::testing::TempDir() + "serve_" + tag + "_" + std::to_string(getpid());
        std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str());
        pid_ = fork();
        if (pid_ == 0) {
            const int out = open((dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int err = open((dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(out, 1);
            dup2(err, 2);
            close(out);
            close(err);
            if (in_child) in_child();
            const std::string sysfs = dir_ + "/sysfs", path = sock();
            std::vector<const char*> argv{HCASIM_BIN, "serve",       "--socket", path.c_str(),
                                          "--sysfs",  sysfs.c_str(), "--verbose"};
            for (const auto& o : options) argv.push_back(o.c_str());
            argv.push_back(nullptr);
            execv(HCASIM_BIN, const_cast<char* const*>(argv.data()));
            _exit(127);
        }
        for (int i = 0; i < 600 && access(sock().c_str(), F_OK) != 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ~server() {
        if (pid_ > 0) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        std::system(("rm -rf '" + dir_ + "'").c_str());
    }
    std::string dir() const { return dir_; }
    std::string sock() const { return dir_ + "/hcasim.sock"; }
    std::string sysfs() const { return dir_ + "/sysfs"; }
    std::string out() const { return slurp(dir_ + "/out"); }
    std::string err() const { return slurp(dir_ + "/err"); }
    pid_t pid() const { return pid_; }
    /// Whether the process is still running.
    bool alive() const { return pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == 0; }
    /// How many times `what` occurs in the log.
    size_t count(const std::string& what) const {
        const std::string log = err();
        size_t n = 0;
        for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
        return n;
    }
    /// Waits (up to 20 s) until `what` occurs `n` times in the log.
    bool wait_for(const std::string& what, size_t n = 1) const {
        for (int i = 0; i < 1000 && count(what) < n; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return count(what) >= n;
    }
    /// SIGTERM, then the exit status (-1: not a normal exit).
    int stop() {
        kill(pid_, SIGTERM);
        int st = 0;
        waitpid(pid_, &st, 0);
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
    /// CPU seconds (user + system) the server has used.
    double cpu_s() const {
        std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
        std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
        std::istringstream rest(s.substr(s.rfind(')') + 2));
        std::string field;
        unsigned long long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i == 14) utime = std::stoull(field);
            if (i == 15) stime = std::stoull(field);
        }
        return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
    }

private:
    std::string dir_;
    pid_t pid_ = -1;
};

/// A client connection speaking the protocol by hand.
class client {
public:
    explicit client(const server& s) {
        fd_ = socket(AF_UNIX, SOCK_SEQPACKET, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::strncpy(a.sun_path, s.sock().c_str(), sizeof a.sun_path - 1);
        connected = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        if (!connected) connect_error = errno;
    }
    ~client() {
        if (fd_ >= 0) close(fd_);
        if (memfd >= 0) close(memfd);
        if (async_fd >= 0) close(async_fd);
    }
    int fd() const { return fd_; }
    void hang_up() {
        close(fd_);
        fd_ = -1;
    }
    void send_raw(const void* p, size_t n, int fd = -1) {
        ASSERT_EQ(sp::send_with_fd(fd_, p, n, fd), ssize_t(n));
    }
    /// The reply's status, its payload in *payload; -1 on timeout, -2 when the server hung up.
    int reply(std::vector<uint8_t>* payload = nullptr, int timeout_ms = 20000) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, timeout_ms) <= 0) return -1;
        uint8_t buf[sp::MAX_MESSAGE];
        std::vector<int> fds;
        const ssize_t n = sp::recv_with_fds(fd_, buf, sizeof buf, &fds);
        if (n <= 0) return -2;
        if (!fds.empty()) memfd = fds.front();
        sp::reply r;
        std::memcpy(&r, buf, sizeof r);
        if (payload) payload->assign(buf + sizeof r, buf + n);
        return r.status;
    }
    template <class T>
    int call(const T& req, std::vector<uint8_t>* payload = nullptr, int fd = -1) {
        send_raw(&req, sizeof req, fd);
        return reply(payload);
    }
    /// OPEN of node `node` with an async pipe; the status.
    int open_node(uint32_t node, uint32_t version = sp::VERSION, bool with_fd = true) {
        int p[2];
        EXPECT_EQ(pipe(p), 0);
        sp::open_req r{};
        r.h.op = sp::OPEN;
        r.version = version;
        r.node = node;
        r.pid = getpid();
        std::vector<uint8_t> rep;
        const int st = call(r, &rep, with_fd ? p[1] : -1);
        close(p[1]);
        if (async_fd >= 0) close(async_fd);
        async_fd = p[0];
        if (st == 0 && rep.size() >= sizeof info) std::memcpy(&info, rep.data(), sizeof info);
        return st;
    }
    template <class T>
    static T payload_as(const std::vector<uint8_t>& p) {
        T v{};
        std::memcpy(&v, p.data(), std::min(p.size(), sizeof v));
        return v;
    }

    bool connected = false;
    int connect_error = 0;
    int memfd = -1;
    int async_fd = -1;
    sp::open_rep info{};

private:
    int fd_ = -1;
};

sp::u64_req u64(uint32_t op, uint64_t v) { return sp::u64_req{{op, 0}, v}; }

/// After a hostile act: the server still runs, and a fresh client opens a device and gets its
/// requests served.
void expect_still_serving(const server& s) {
    ASSERT_TRUE(s.alive()) << s.err();
    client c(s);
    ASSERT_TRUE(c.connected) << std::strerror(c.connect_error) << "\n" << s.err();
    ASSERT_EQ(c.open_node(0), 0) << s.err();
    std::vector<uint8_t> rep;
    EXPECT_EQ(c.call(sp::header{sp::ALLOC_PD, 0}, &rep), 0);
    EXPECT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0);
    EXPECT_GT(client::payload_as<uint64_t>(rep), 0u);
}

/// A posted MMIO write of `bytes` at BAR0 `offset` (no reply).
void mmio_write(client& c, uint64_t offset, uint32_t bytes) {
    sp::mmio_write_req m{};
    m.h.op = sp::MMIO_WRITE;
    m.offset = offset;
    m.bytes = bytes;
    c.send_raw(&m, offsetof(sp::mmio_write_req, data) + std::min<size_t>(bytes, sizeof m.data));
}

/// The BAR0 offset of the client's UAR page.
uint64_t uar_page(const client& c) {
    return hcasim::hw::UAR_BASE + uint64_t(c.info.uar) * hcasim::hw::UAR_STRIDE;
}

/// Runs `body` in a child process; its exit status (-1: killed).
int in_child_process(const std::function<int()>& body) {
    const pid_t pid = fork();
    if (pid == 0) _exit(body());
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Serve, an_mmio_read_other_than_the_cq_arm_read_is_einval_and_ends_nothing) {
    server s("mmio_read");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    client c(s);
    ASSERT_EQ(c.open_node(0), 0);
    std::vector<uint8_t> rep;
    // The 32-bit read at BAR0 0x1000 (no register) that ended the server, and the registers
    // that are the kernel's.
    for (uint64_t off : {uint64_t(0x1000), uint64_t(hcasim::hw::REG_CMD_STATUS),
                         uint64_t(hcasim::hw::REG_CMD_MAILBOX), uar_page(c), ~uint64_t(0)})
        EXPECT_EQ(c.call(u64(sp::MMIO_READ32, off), &rep), EINVAL) << "offset " << off;
    // The read ibv_req_notify_cq makes to order the arm.
    ASSERT_EQ(c.call(u64(sp::MMIO_READ32, hcasim::hw::REG_HCA_ID), &rep), 0);
    EXPECT_EQ(client::payload_as<uint32_t>(rep), hcasim::hw::HCA_ID_VALUE);
    // Writes in its own UAR page at no register, or of a size the register does not take.
    mmio_write(c, uar_page(c) + 4, 4);
    mmio_write(c, uar_page(c) + hcasim::hw::UAR_SQ_DOORBELL, 4);
    mmio_write(c, uar_page(c) + 0x800, 8);
    mmio_write(c, uar_page(c) + hcasim::hw::UAR_INLINE_WQE, 48);
    EXPECT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0) << s.err();
    expect_still_serving(s);
    EXPECT_NE(s.err().find("MMIO read at BAR0 offset 0x1000: refused"), std::string::npos) << s.err();
    EXPECT_EQ(s.count("bytes writes no register: dropped"), 4u) << s.err();
    EXPECT_NE(s.err().find("doorbell at UAR offset 0x800 of 8 bytes writes no register"), std::string::npos);
    EXPECT_EQ(s.err().find("MMIO read failed"), std::string::npos) << s.err();
}

TEST(Serve, an_mmio_write_whose_end_wraps_past_2_64_is_dropped) {
    server s("mmio_wrap");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    client c(s);
    ASSERT_EQ(c.open_node(0), 0);
    mmio_write(c, 0xFFFFFFFFFFFFFFFCull, 8);  // offset + 8 wraps to 4: the check that let it through
    mmio_write(c, uar_page(c) + 0xFFC, 8);    // past the end of its own page
    mmio_write(c, uar_page(c) + hcasim::hw::UAR_STRIDE, 8);  // the next context's page
    std::vector<uint8_t> rep;
    EXPECT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0) << s.err();
    // A run whose end wraps is no run either.
    EXPECT_EQ(c.call(sp::run_req{{sp::MAP_RUN, 0}, 0xFFFFFFFFFFFFF000ull, 2}), EINVAL);
    expect_still_serving(s);
    EXPECT_EQ(s.count("doorbell outside its UAR page: dropped"), 3u) << s.err();
}

TEST(Serve, a_client_cannot_shrink_or_grow_the_shared_memory) {
    server s("memfd");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    client c(s);
    ASSERT_EQ(c.open_node(0), 0);
    ASSERT_GE(c.memfd, 0);
    const int seals = fcntl(c.memfd, F_GET_SEALS);
    EXPECT_EQ(seals, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    EXPECT_EQ(ftruncate(c.memfd, 0), -1);  // the SIGBUS of the server, as it was
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(ftruncate(c.memfd, off_t(c.info.mem_bytes) * 2), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(fcntl(c.memfd, F_ADD_SEALS, F_SEAL_WRITE), -1) << "nor seal it against the server's writes";
    struct stat st {};
    ASSERT_EQ(fstat(c.memfd, &st), 0);
    EXPECT_EQ(uint64_t(st.st_size), c.info.mem_bytes);
    // The server writes its memory (a CQ ring, the firmware's tables) as before.
    std::vector<uint8_t> rep;
    EXPECT_EQ(c.call(sp::create_cq_req{{sp::CREATE_CQ, 0}, 64, 0, 1, 0, 0}, &rep), 0) << s.err();
    expect_still_serving(s);
}

TEST(Serve, contexts_are_released_when_the_client_process_is_gone_whatever_descriptors_it_passed) {
    // Room for the whole node in one process: what is tested is the release, not the limit.
    server s("peer_death", {"--max-contexts-per-client", "256"});
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    constexpr int hostile = 200;
    // A process opens 200 contexts, passes each one's own socket where an event pipe belongs
    // (a completion channel, an async pipe, and along with another request), and dies holding them.
    const int rc = in_child_process([&s] {
        for (int i = 0; i < hostile; ++i) {
            auto* c = new client(s);  // left open: the process's exit closes them
            if (c->open_node(0) != 0) return 10;
            sp::create_cq_req cq{{sp::CREATE_CQ, 0}, 16, 0, 1, 1, 0};
            if (c->call(cq, nullptr, c->fd()) != EINVAL) return 11;
            if (c->call(sp::header{sp::ALLOC_PD, 0}, nullptr, c->fd()) != EINVAL) return 12;
            sp::open_req o{{sp::OPEN, 0}, sp::VERSION, 1, 0, 0};
            if (c->call(o, nullptr, c->fd()) != EINVAL) return 13;
            if (c->call(sp::create_cq_req{{sp::CREATE_CQ, 0}, 16, 0, 1, 0, 0}) != 0) return 14;
        }
        return 0;
    });
    ASSERT_EQ(rc, 0) << s.err();
    ASSERT_TRUE(s.wait_for("closed after", hostile))
        << s.count("closed after") << " of " << hostile << " closed";
    EXPECT_EQ(s.count("a descriptor that is not a pipe: refused"), 3u * hostile);
    // Node 0 has room for 244 contexts: all of them are free again.
    std::vector<std::unique_ptr<client>> many;
    for (int i = 0; i < 240; ++i) {
        many.push_back(std::make_unique<client>(s));
        ASSERT_EQ(many.back()->open_node(0), 0) << "context " << i << "\n" << s.err().substr(0, 2000);
    }
    many.clear();
    expect_still_serving(s);
}

TEST(Serve, a_sleep_ends_when_its_client_is_gone) {
    server s("sleep");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    {
        client c(s);
        ASSERT_EQ(c.open_node(0), 0);
        EXPECT_EQ(c.call(u64(sp::SLEEP, ~uint64_t(0))), EINVAL) << "longer than an hour";
        const sp::u64_req nap = u64(sp::SLEEP, 3000ull * 1000000000);
        c.send_raw(&nap, sizeof nap);
    }  // gone while its SLEEP of 50 simulated minutes runs
    EXPECT_TRUE(s.wait_for("closed after")) << s.err();
    expect_still_serving(s);
}

TEST(Serve, a_client_that_floods_requests_is_read_no_faster_than_it_is_served) {
    server s("flood");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    {
        client c(s);
        ASSERT_EQ(c.open_node(0), 0);
        const sp::u64_req nap = u64(sp::SLEEP, 5000000000ull);  // 5 s of simulated time, at wall-clock pace
        c.send_raw(&nap, sizeof nap);
        // While its thread sleeps, requests pile up: the server stops reading them at its limit
        // (1024), and then the client's sends block.
        ASSERT_EQ(fcntl(c.fd(), F_SETFL, O_NONBLOCK), 0);
        const sp::header now{sp::NOW, 0};
        int sent = 0;
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
        while (sent < 100000 && std::chrono::steady_clock::now() < until)
            if (send(c.fd(), &now, sizeof now, MSG_NOSIGNAL) == ssize_t(sizeof now))
                ++sent;
            else
                std::this_thread::sleep_for(std::chrono::milliseconds(1));
        EXPECT_GE(sent, 1024);
        EXPECT_LT(sent, 5000) << "requests taken while the client's thread sleeps";
    }  // gone, its requests unserved
    EXPECT_TRUE(s.wait_for("closed after")) << s.err();
    expect_still_serving(s);
}

TEST(Serve, out_of_file_descriptors_the_server_backs_off_and_keeps_serving) {
    constexpr rlim_t limit = 48;
    server s("emfile", {}, [] {
        const rlimit r{limit, limit};
        setrlimit(RLIMIT_NOFILE, &r);
    });
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    // More clients than the server has descriptors: the last ones wait in the backlog.
    std::vector<std::unique_ptr<client>> cs;
    for (int i = 0; i < 60; ++i) {
        cs.push_back(std::make_unique<client>(s));
        ASSERT_TRUE(cs.back()->connected) << i;
    }
    ASSERT_TRUE(s.wait_for("cannot accept a client (Too many open files): trying again every 100 ms"))
        << s.err();
    const double cpu0 = s.cpu_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_LT(s.cpu_s() - cpu0, 0.3) << "CPU seconds used in 1.5 s by a server out of descriptors";
    // A descriptor sent now cannot be received: the request fails, the connection stays.
    EXPECT_EQ(cs.front()->open_node(0), EMFILE) << s.err();
    std::vector<uint8_t> rep;
    EXPECT_EQ(cs.front()->call(sp::header{sp::NOW, 0}, &rep), EBADF) << "served, not opened";
    // Descriptors come free: the clients that waited are served.
    cs.erase(cs.begin() + 1, cs.begin() + 40);
    EXPECT_EQ(cs.back()->open_node(0), 0) << s.err();
    EXPECT_EQ(cs.front()->open_node(0), 0) << s.err();
    cs.clear();
    expect_still_serving(s);
    EXPECT_EQ(s.count("cannot accept a client"), 1u) << "said once per shortage";
}

TEST(Serve, map_run_and_contexts_are_limited_per_client_and_released_on_disconnect) {
    server s("limits", {"--max-contexts-per-client", "2", "--max-mapped-mib-per-client", "1"});
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    constexpr uint64_t mib_pages = (1u << 20) / 4096;
    {
        client a(s), b(s), c(s);
        ASSERT_EQ(a.open_node(0), 0);
        ASSERT_EQ(b.open_node(1), 0);
        EXPECT_EQ(c.open_node(0), EDQUOT) << "a third context of the process";
        EXPECT_EQ(a.call(sp::run_req{{sp::MAP_RUN, 0}, 0x10000000, uint64_t(1) << 22}), EDQUOT) << "16 GiB";
        EXPECT_EQ(a.call(sp::run_req{{sp::MAP_RUN, 0}, 0x10000000, mib_pages}), 0);
        EXPECT_EQ(b.call(sp::run_req{{sp::MAP_RUN, 0}, 0x20000000, 1}), EDQUOT)
            << "the process's MiB is used up";
        EXPECT_EQ(a.call(sp::run_req{{sp::UNMAP_RUN, 0}, 0x10000000, mib_pages}), 0);
        EXPECT_EQ(b.call(sp::run_req{{sp::MAP_RUN, 0}, 0x20000000, 1}), 0) << "given back";
        EXPECT_EQ(a.call(sp::run_req{{sp::MAP_RUN, 0}, 0x10000000, mib_pages - 1}), 0);
        // Another process has limits of its own.
        EXPECT_EQ(in_child_process([&s] {
                      client d(s);
                      return d.open_node(0) == 0 &&
                                     d.call(sp::run_req{{sp::MAP_RUN, 0}, 0x10000000, mib_pages}) == 0
                                 ? 0
                                 : 1;
                  }),
                  0);
    }  // a and b leave holding the whole MiB and both contexts
    ASSERT_TRUE(s.wait_for("closed after", 4)) << s.err();
    client d(s), e(s);
    ASSERT_EQ(d.open_node(0), 0);
    ASSERT_EQ(e.open_node(0), 0);
    EXPECT_EQ(d.call(sp::run_req{{sp::MAP_RUN, 0}, 0x10000000, mib_pages}), 0);
    EXPECT_NE(s.err().find("OPEN refused: the process has 2 contexts (--max-contexts-per-client)"),
              std::string::npos)
        << s.err();
    EXPECT_NE(s.err().find("MAP_RUN of 17179869184 bytes refused: the process has 0 of its 1048576 "
                           "(--max-mapped-mib-per-client)"),
              std::string::npos)
        << s.err();
    d.hang_up();
    e.hang_up();
    expect_still_serving(s);
    const auto r = hcasim::test::run_hcasim("serve --max-contexts-per-client 0", "serve_limit0");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--max-contexts-per-client must be 1 .. 256"), std::string::npos) << r.err;
    const auto q = hcasim::test::run_hcasim("serve --max-mapped-mib-per-client 0", "serve_mib0");
    EXPECT_EQ(q.code, 2);
    EXPECT_NE(q.err.find("--max-mapped-mib-per-client must be 1 .. 16777216"), std::string::npos) << q.err;
}

TEST(Serve, socket_path_refuses_a_non_socket_and_a_live_server_and_replaces_a_stale_socket) {
    const std::string dir = ::testing::TempDir() + "serve_path_" + std::to_string(getpid());
    std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
    {  // a file that is not a socket: refused, left as it is
        const std::string file = dir + "/notes.txt";
        std::ofstream(file) << "keep me\n";
        const auto r = hcasim::test::run_hcasim("serve --socket '" + file + "'", "serve_file");
        EXPECT_EQ(r.code, 2);
        EXPECT_NE(r.err.find("hcasim: error: serve: --socket " + file + ": exists and is not a socket"),
                  std::string::npos)
            << r.err;
        EXPECT_EQ(slurp(file), "keep me\n");
    }
    server s("path", {}, [] {});
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    struct stat st {};
    ASSERT_EQ(stat(s.sock().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "the socket is the server user's";
    {  // a live server's socket: refused, and the server keeps its clients
        const auto r = hcasim::test::run_hcasim("serve --socket '" + s.sock() + "'", "serve_live");
        EXPECT_EQ(r.code, 2);
        EXPECT_NE(r.err.find("--socket " + s.sock() + ": a server is listening there already"),
                  std::string::npos)
            << r.err;
        expect_still_serving(s);
    }
    // A stale socket (its server killed): replaced.
    EXPECT_EQ(kill(s.pid(), SIGKILL), 0);
    while (s.alive()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << "a SIGKILLed server leaves its socket";
    const std::string stale = s.sock();
    const pid_t pid = fork();
    if (pid == 0) {
        const int out = open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(out, 1);
        dup2(out, 2);
        execl(HCASIM_BIN, HCASIM_BIN, "serve", "--socket", stale.c_str(), static_cast<char*>(nullptr));
        _exit(127);
    }
    bool ready = false;
    for (int i = 0; i < 600 && !ready; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        ready = slurp(dir + "/out").find("ready at " + stale) != std::string::npos;
    }
    EXPECT_TRUE(ready) << slurp(dir + "/out");
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(dir + "/out");
    EXPECT_NE(access(stale.c_str(), F_OK), 0) << "its own socket is removed at the end";
    std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Serve, other_unix_users_are_refused_unless_allowed) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to act as another user";
    constexpr uid_t nobody = 65534;
    // Another user's OPEN through the socket; its status (exit 100: the connection failed).
    auto open_as_nobody = [](const server& s) {
        return in_child_process([&s] {
            if (setgid(nobody) != 0 || setuid(nobody) != 0) return 101;
            client c(s);
            if (!c.connected) return 100;
            return c.open_node(0);
        });
    };
    {
        server s("users");
        ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
        EXPECT_EQ(open_as_nobody(s), 100) << "socket mode 0600";
        // Even through a socket someone made reachable, the server asks the kernel who connects.
        ASSERT_EQ(chmod(s.sock().c_str(), 0666), 0);
        EXPECT_EQ(open_as_nobody(s), EACCES);
        EXPECT_NE(s.err().find("hcasim serve: refused a client of uid 65534"), std::string::npos) << s.err();
        EXPECT_NE(s.err().find("(--allow-other-users admits other users)"), std::string::npos) << s.err();
        expect_still_serving(s);
    }
    server s("users_allowed", {"--allow-other-users"});
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    struct stat st {};
    ASSERT_EQ(stat(s.sock().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0666u);
    EXPECT_EQ(open_as_nobody(s), 0) << s.err();
    expect_still_serving(s);
}

TEST(Serve, writes_a_sysfs_tree_describing_its_hcas) {
    server s("sysfs");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    EXPECT_NE(s.out().find("2 HCAs (hcasim0..hcasim1) ready at"), std::string::npos) << s.out();
    const std::string ib = s.sysfs() + "/class/infiniband/";
    EXPECT_EQ(slurp(s.sysfs() + "/class/infiniband_verbs/abi_version"), "6\n");
    EXPECT_EQ(slurp(s.sysfs() + "/class/infiniband_verbs/uverbs1/ibdev"), "hcasim1\n");
    EXPECT_EQ(slurp(ib + "hcasim0/node_type"), "1: CA\n");
    EXPECT_EQ(slurp(ib + "hcasim1/node_guid"), "0002:c903:0000:0002\n");
    EXPECT_EQ(slurp(ib + "hcasim0/ports/1/lid"), "0x1\n");
    EXPECT_EQ(slurp(ib + "hcasim1/ports/1/lid"), "0x2\n");
    EXPECT_EQ(slurp(ib + "hcasim0/ports/1/state"), "4: ACTIVE\n");
    EXPECT_EQ(slurp(ib + "hcasim0/ports/1/rate"), "100 Gb/sec (4X EDR)\n");
    EXPECT_EQ(slurp(ib + "hcasim0/ports/1/pkeys/0"), "0xffff\n");
    EXPECT_EQ(slurp(ib + "hcasim1/ports/1/gids/0"), "fe80:0000:0000:0000:0002:c903:0000:0002\n");
}

TEST(Serve, refuses_what_a_bad_client_sends_and_goes_on) {
    server s("bad");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    {  // shorter than a header: the connection is closed
        client c(s);
        ASSERT_TRUE(c.connected);
        const uint8_t junk[3] = {1, 2, 3};
        c.send_raw(junk, sizeof junk);
        EXPECT_EQ(c.reply(), -2);
    }
    client c(s);
    ASSERT_TRUE(c.connected);
    EXPECT_EQ(c.call(sp::header{sp::ALLOC_PD, 0}), EBADF) << "a request before OPEN";
    EXPECT_EQ(c.open_node(0, sp::VERSION + 1), EPROTO);
    EXPECT_EQ(c.open_node(0, sp::VERSION, false), EINVAL) << "OPEN without its async pipe";
    EXPECT_EQ(c.open_node(7), ENODEV) << "no node 7 on a 2-node fabric";
    EXPECT_EQ(c.call(sp::header{sp::OPEN, 0}), EINVAL) << "an OPEN without its body";
    ASSERT_EQ(c.open_node(0), 0);
    EXPECT_GE(c.memfd, 0) << "the shared host memory comes with the reply";
    EXPECT_EQ(c.info.nports, 1u);
    EXPECT_EQ(c.info.ports[0].lid, 1);
    EXPECT_EQ(c.call(sp::header{sp::ALLOC_PD, 0}), 0);
    EXPECT_EQ(c.call(sp::header{999, 0}), EOPNOTSUPP);
    EXPECT_EQ(c.call(u64(sp::ALLOC_PD, 5)), EINVAL) << "wrong size";
    EXPECT_EQ(c.call(u64(sp::DEALLOC_PD, 12345)), EINVAL) << "no such PD";
    EXPECT_EQ(c.call(sp::run_req{{sp::MAP_RUN, 0}, 0x1001, 1}), EINVAL) << "misaligned run";
    EXPECT_EQ(c.call(sp::run_req{{sp::MAP_RUN, 0}, 0x1000, 0}), EINVAL) << "empty run";
    EXPECT_EQ(c.call(sp::reg_mr_req{{sp::REG_MR, 0}, 1, 0x7000000000, 4096, 1, 0}), EFAULT)
        << "a region over pages that were never moved into simulated memory";
    {  // doorbells: outside the context's UAR page, or malformed: dropped without a reply
        sp::mmio_write_req m{};
        m.h.op = sp::MMIO_WRITE;
        m.offset = hcasim::hw::REG_CMD_DOORBELL;
        m.bytes = 4;
        c.send_raw(&m, offsetof(sp::mmio_write_req, data) + 4);
        m.offset = hcasim::hw::UAR_BASE + uint64_t(c.info.uar) * hcasim::hw::UAR_STRIDE;
        m.bytes = 300;
        c.send_raw(&m, offsetof(sp::mmio_write_req, data) + 4);
    }
    std::vector<uint8_t> rep;
    EXPECT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0) << "still serving";
    EXPECT_GT(client::payload_as<uint64_t>(rep), 0u);
    // Objects belong to their context.
    sp::create_cq_req cq{{sp::CREATE_CQ, 0}, 16, 0, 0x1234, 0, 0};
    ASSERT_EQ(c.call(cq, &rep), 0);
    const auto cqr = client::payload_as<sp::cq_rep>(rep);
    EXPECT_GE(cqr.cqe, 16);
    client other(s);
    ASSERT_EQ(other.open_node(0), 0);
    EXPECT_EQ(other.call(u64(sp::DESTROY_CQ, cqr.id)), EINVAL);
    EXPECT_EQ(c.call(u64(sp::DESTROY_CQ, cqr.id)), 0);
    const std::string log = s.err();
    EXPECT_NE(log.find("malformed message (3 bytes): closing"), std::string::npos) << log;
    EXPECT_NE(log.find("doorbell outside its UAR page: dropped"), std::string::npos) << log;
    EXPECT_NE(log.find("malformed doorbell: dropped"), std::string::npos) << log;
    EXPECT_NE(log.find("unknown request 999"), std::string::npos) << log;
}

TEST(Serve, bad_xrc_requests_are_refused_and_the_server_goes_on) {
    namespace v = hcasim::verbs;
    server s("xrc");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    client c(s), other(s);
    ASSERT_EQ(c.open_node(1), 0);
    ASSERT_EQ(other.open_node(1), 0);
    std::vector<uint8_t> rep;
    auto id_of = [&](int status) {
        EXPECT_EQ(status, 0) << s.err();
        return client::payload_as<uint64_t>(rep);  // every reply's payload starts with the id
    };
    // The other context: a domain and a CQ (ids are per context: checked to differ from this one's).
    const uint64_t other_xrcd = id_of(other.call(sp::open_xrcd_req{{sp::OPEN_XRCD, 0}, 0, 0}, &rep));
    id_of(other.call(sp::header{sp::ALLOC_PD, 0}, &rep));
    const uint64_t other_cq = id_of(other.call(sp::create_cq_req{{sp::CREATE_CQ, 0}, 16, 0, 1, 0, 0}, &rep));
    const uint64_t cq = id_of(c.call(sp::create_cq_req{{sp::CREATE_CQ, 0}, 16, 0, 1, 0, 0}, &rep));
    const uint64_t pd = id_of(c.call(sp::header{sp::ALLOC_PD, 0}, &rep));
    ASSERT_NE(other_cq, cq);

    EXPECT_EQ(c.call(sp::header{sp::OPEN_XRCD, 0}), EINVAL) << "an OPEN_XRCD without its body";
    const uint64_t xrcd = id_of(c.call(sp::open_xrcd_req{{sp::OPEN_XRCD, 0}, 0, 0}, &rep));
    ASSERT_NE(other_xrcd, xrcd);
    EXPECT_EQ(c.call(u64(sp::CLOSE_XRCD, 12345)), EINVAL) << "no such domain";
    EXPECT_EQ(c.call(u64(sp::CLOSE_XRCD, other_xrcd)), EINVAL) << "another context's domain";

    auto srq = [&](int32_t type, uint64_t x, uint64_t q) {
        sp::create_srq_req r{};
        r.h.op = sp::CREATE_SRQ;
        r.pd = pd;
        r.attr = v::ibv_srq_attr{16, 1, 0};
        r.srq_type = type;
        r.xrcd = x;
        r.cq = q;
        return c.call(r, &rep);
    };
    EXPECT_EQ(srq(v::IBV_SRQT_XRC, 12345, cq), EINVAL) << "an unknown domain";
    EXPECT_EQ(srq(v::IBV_SRQT_XRC, xrcd, 12345), EINVAL) << "an unknown CQ";
    EXPECT_EQ(srq(v::IBV_SRQT_XRC, xrcd, other_cq), EINVAL) << "another context's CQ";
    EXPECT_EQ(srq(v::IBV_SRQT_XRC, other_xrcd, cq), EINVAL) << "another context's domain";
    EXPECT_EQ(srq(v::IBV_SRQT_BASIC, xrcd, 0), EINVAL) << "a domain on an ordinary SRQ";
    const uint64_t xsrq = id_of(srq(v::IBV_SRQT_XRC, xrcd, cq));
    EXPECT_EQ(c.call(u64(sp::CLOSE_XRCD, xrcd)), EBUSY) << "an XRC SRQ is in it";

    auto qp = [&](int32_t type, uint64_t p, uint64_t x, uint64_t scq) {
        sp::create_qp_req r{};
        r.h.op = sp::CREATE_QP;
        r.pd = p;
        r.send_cq = scq;
        r.xrcd = x;
        r.cap = v::ibv_qp_cap{16, 0, 1, 0, 0};
        r.qp_type = type;
        return c.call(r, &rep);
    };
    EXPECT_EQ(qp(v::IBV_QPT_XRC_RECV, pd, xrcd, 0), EINVAL) << "a target with a PD";
    EXPECT_EQ(qp(v::IBV_QPT_XRC_RECV, 0, 0, 0), EINVAL) << "a target without a domain";
    EXPECT_EQ(qp(v::IBV_QPT_XRC_RECV, 0, other_xrcd, 0), EINVAL) << "a target in another context's domain";
    EXPECT_EQ(qp(v::IBV_QPT_XRC_SEND, pd, xrcd, cq), EINVAL) << "an initiator with a domain";
    EXPECT_EQ(qp(v::IBV_QPT_RC, pd, xrcd, cq), EINVAL) << "an RC QP with a domain";
    const uint64_t tgt = id_of(qp(v::IBV_QPT_XRC_RECV, 0, xrcd, 0));
    id_of(qp(v::IBV_QPT_XRC_SEND, pd, 0, cq));

    // The good objects work on: the domain closes once its target and SRQ are gone.
    EXPECT_EQ(c.call(u64(sp::DESTROY_QP, tgt)), 0);
    EXPECT_EQ(c.call(u64(sp::CLOSE_XRCD, xrcd)), EBUSY) << "its SRQ is left";
    EXPECT_EQ(c.call(u64(sp::DESTROY_SRQ, xsrq)), 0);
    EXPECT_EQ(c.call(u64(sp::CLOSE_XRCD, xrcd)), 0);
    EXPECT_EQ(c.call(u64(sp::CLOSE_XRCD, xrcd)), EINVAL) << "closed already";
    EXPECT_EQ(other.call(u64(sp::CLOSE_XRCD, other_xrcd)), 0);
    expect_still_serving(s);
    EXPECT_EQ(s.count("malformed request " + std::to_string(sp::OPEN_XRCD)), 1u) << s.err();
    EXPECT_EQ(s.count("malformed request " + std::to_string(sp::CLOSE_XRCD)), 3u) << s.err();
    EXPECT_EQ(s.count("malformed request " + std::to_string(sp::CREATE_SRQ)), 5u) << s.err();
    EXPECT_EQ(s.count("malformed request " + std::to_string(sp::CREATE_QP)), 5u) << s.err();
}

TEST(Serve, a_client_that_dies_leaves_nothing_behind) {
    server s("dies");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    auto make_qp = [](client& c) {
        std::vector<uint8_t> rep;
        EXPECT_EQ(c.call(sp::header{sp::ALLOC_PD, 0}, &rep), 0);
        const uint64_t pd = client::payload_as<uint64_t>(rep);
        EXPECT_EQ(c.call(sp::create_cq_req{{sp::CREATE_CQ, 0}, 16, 0, 1, 0, 0}, &rep), 0);
        const uint64_t cq = client::payload_as<sp::cq_rep>(rep).id;
        sp::create_qp_req q{};
        q.h.op = sp::CREATE_QP;
        q.pd = pd;
        q.send_cq = q.recv_cq = cq;
        q.cap = hcasim::verbs::ibv_qp_cap{16, 16, 1, 1, 0};
        q.qp_type = hcasim::verbs::IBV_QPT_RC;
        EXPECT_EQ(c.call(q, &rep), 0);
        return client::payload_as<sp::qp_rep>(rep).qp_num;
    };
    uint32_t first;
    {
        client c(s);
        ASSERT_EQ(c.open_node(1), 0);
        first = make_qp(c);
        c.hang_up();  // without destroying anything
    }
    // Its QP, CQ and PD were destroyed: the next QP gets the same (lowest free) number.
    ASSERT_TRUE(s.wait_for("closed after")) << s.err();
    client c(s);
    ASSERT_EQ(c.open_node(1), 0);
    EXPECT_EQ(make_qp(c), first);
    EXPECT_NE(s.err().find("client 1 (pid"), std::string::npos);
    EXPECT_NE(s.err().find("node 1): closed after 4 requests and 0 doorbells"), std::string::npos) << s.err();
}

TEST(Serve, an_idle_simulation_sleeps_and_stops_with_its_statistics) {
    server s("idle");
    ASSERT_EQ(access(s.sock().c_str(), F_OK), 0) << s.err();
    client c(s);
    ASSERT_EQ(c.open_node(0), 0);
    std::vector<uint8_t> rep;
    const auto wall0 = std::chrono::steady_clock::now();
    ASSERT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0);
    const uint64_t t0 = client::payload_as<uint64_t>(rep);
    // A client that waits and a simulation with nothing to do: the server sleeps in poll().
    const double cpu0 = s.cpu_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_LT(s.cpu_s() - cpu0, 0.3) << "CPU seconds used by an idle server in 1.5 s";
    // Simulated time does not run ahead while nothing happens: at most at wall-clock pace over
    // the wall time that really passed between the two requests (a loaded machine oversleeps).
    ASSERT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0);
    const auto wall_ns = uint64_t(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - wall0)
            .count());
    EXPECT_LE(client::payload_as<uint64_t>(rep) - t0, wall_ns / 1000 + 100'000u)
        << "at most wall-clock pace across the gap";
    EXPECT_EQ(s.stop(), 0);
    EXPECT_NE(s.out().find("hcasim serve: stopped at simulated time"), std::string::npos) << s.out();
    EXPECT_NE(s.out().find(" node1: tx 0 packets"), std::string::npos) << s.out();
}

TEST(Serve, bad_options_are_refused_with_one_line) {
    const auto r =
        hcasim::test::run_hcasim("serve --set hca.no_such_key=1 --socket /tmp/x.sock", "serve_badkey");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("hcasim: error: serve:"), std::string::npos) << r.err;
    const auto q = hcasim::test::run_hcasim("serve --quantum-ns 0", "serve_quantum");
    EXPECT_EQ(q.code, 2);
    EXPECT_NE(q.err.find("--quantum-ns must be 1 .. 1e9"), std::string::npos) << q.err;
}

}  // namespace

TEST(Serve, memory_size_bytes_too_small_for_the_host_software_is_refused_at_start_up) {
    const std::string dir = ::testing::TempDir() + "serve_mem_" + std::to_string(getpid());
    std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str());
    const auto r = hcasim::test::run_hcasim(
        "serve --socket '" + dir + "/s.sock' --set memory.size_bytes=1073741824", "serve_mem");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("hcasim: error: serve: bad value '1073741824' for key 'node0.memory.size_bytes'"),
              std::string::npos)
        << r.err;
    EXPECT_NE(r.err.find("memory.size_bytes must be at least 17448304640"), std::string::npos) << r.err;
    EXPECT_NE(access((dir + "/s.sock").c_str(), F_OK), 0) << "no socket is left behind";
    std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Serve, unwritable_output_paths_exit_2_before_the_server_listens) {
    const std::string dir = ::testing::TempDir() + "serve_outputs_" + std::to_string(getpid());
    std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "' && touch '" + dir + "/file'").c_str());
    const std::string sock = dir + "/s.sock", missing = dir + "/no/such/dir/out.json";
    struct refusal {
        std::string option, path, message;
    };
    // A path under a directory that does not exist, and a --pcap directory under a plain file.
    const std::vector<refusal> cases = {
        {"--stats-json", missing, "--stats-json: cannot write '" + missing + "'"},
        {"--timeline", missing, "--timeline: cannot write '" + missing + "'"},
        {"--record", missing, "--record: cannot write '" + missing + "'"},
        {"--pcap", dir + "/file/caps", "--pcap: cannot create directory '" + dir + "/file/caps'"},
    };
    for (const refusal& c : cases) {
        const auto r = hcasim::test::run_hcasim(
            "serve --socket '" + sock + "' " + c.option + " '" + c.path + "'", "serve_outputs");
        EXPECT_EQ(r.code, 2) << c.option << "\n" << r.out << r.err;
        EXPECT_EQ(r.err.rfind("hcasim: error: serve: " + c.message, 0), 0u) << r.err;
        EXPECT_EQ(r.out.find("ready at"), std::string::npos) << c.option << ": " << r.out;
        EXPECT_NE(access(sock.c_str(), F_OK), 0) << c.option << ": the server never listened";
    }
    std::system(("rm -rf '" + dir + "'").c_str());
}
