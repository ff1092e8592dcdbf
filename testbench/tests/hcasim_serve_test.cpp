// `hcasim serve` as a client sees it (docs/libibverbs.md): the sysfs tree, the protocol's errors for
// bad clients, cleanup after a client dies, an idle server that sleeps, shutdown statistics. The
// applications themselves (pingpongs, perftest, pyverbs) are the Libibverbs.* ctest tests.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
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

/// One `hcasim serve` process with its socket and sysfs tree in a directory of its own.
class server {
public:
    explicit server(const std::string& tag) {
        dir_ = ::testing::TempDir() + "serve_" + tag + "_" + std::to_string(getpid());
        std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str());
        pid_ = fork();
        if (pid_ == 0) {
            const int out = open((dir_ + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const int err = open((dir_ + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            dup2(out, 1);
            dup2(err, 2);
            execl(HCASIM_BIN, HCASIM_BIN, "serve", "--socket", sock().c_str(), "--sysfs", (dir_ + "/sysfs").c_str(),
                  "--verbose", static_cast<char*>(nullptr));
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
    std::string sock() const { return dir_ + "/hcasim.sock"; }
    std::string sysfs() const { return dir_ + "/sysfs"; }
    std::string out() const { return slurp(dir_ + "/out"); }
    std::string err() const { return slurp(dir_ + "/err"); }
    pid_t pid() const { return pid_; }
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
    }
    ~client() {
        if (fd_ >= 0) close(fd_);
        if (memfd >= 0) close(memfd);
    }
    void hang_up() {
        close(fd_);
        fd_ = -1;
    }
    void send_raw(const void* p, size_t n, int fd = -1) { ASSERT_EQ(sp::send_with_fd(fd_, p, n, fd), ssize_t(n)); }
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
    int memfd = -1;
    int async_fd = -1;
    sp::open_rep info{};

private:
    int fd_ = -1;
};

sp::u64_req u64(uint32_t op, uint64_t v) { return sp::u64_req{{op, 0}, v}; }

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
    EXPECT_EQ(c.call(sp::header{sp::ALLOC_PD, 0}) , 0);
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
    for (int i = 0; i < 500 && s.err().find("closed after") == std::string::npos; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
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
    ASSERT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0);
    const uint64_t t0 = client::payload_as<uint64_t>(rep);
    // A client that waits and a simulation with nothing to do: the server sleeps in poll().
    const double cpu0 = s.cpu_s();
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    EXPECT_LT(s.cpu_s() - cpu0, 0.3) << "CPU seconds used by an idle server in 1.5 s";
    // Simulated time does not run ahead while nothing happens.
    ASSERT_EQ(c.call(sp::header{sp::NOW, 0}, &rep), 0);
    EXPECT_LT(client::payload_as<uint64_t>(rep) - t0, 1'600'000u) << "at most wall-clock pace across the gap";
    EXPECT_EQ(s.stop(), 0);
    EXPECT_NE(s.out().find("hcasim serve: stopped at simulated time"), std::string::npos) << s.out();
    EXPECT_NE(s.out().find(" node1: tx 0 packets"), std::string::npos) << s.out();
}

TEST(Serve, bad_options_are_refused_with_one_line) {
    const auto r = hcasim::test::run_hcasim("serve --set hca.no_such_key=1 --socket /tmp/x.sock", "serve_badkey");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("hcasim: error: serve:"), std::string::npos) << r.err;
    const auto q = hcasim::test::run_hcasim("serve --quantum-ns 0", "serve_quantum");
    EXPECT_EQ(q.code, 2);
    EXPECT_NE(q.err.find("--quantum-ns must be 1 .. 1e9"), std::string::npos) << q.err;
}

}  // namespace
