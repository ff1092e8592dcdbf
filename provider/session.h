// One device context of the hcasim libibverbs provider: the connection to `hcasim serve`, the
// node's simulated host memory mapped into this process, the host_bus the firmware's data-path
// verbs run on here, and the application's buffers moved into simulated host memory.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "firmware/verbs.h"
#include "provider/protocol.h"
#include "provider/shared_memory.h"
#include "tlm_if/host_bus.h"

namespace hcasim::provider {

class session;

/// host_bus of the user half: loads and stores go to the shared mapping of simulated host
/// memory, MMIO writes become doorbell messages, CPU costs are the real CPU's (nothing to charge).
class user_bus : public host_bus {
public:
    explicit user_bus(session& s) : s_(s) {}
    void mem_read(uint64_t pa, void* dst, size_t n) override;
    uint8_t load_acquire8(uint64_t pa) override;
    void mem_write(uint64_t pa, const void* src, size_t n) override;
    void mmio_write(uint64_t bar_offset, const void* src, size_t n) override;
    uint32_t mmio_read32(uint64_t bar_offset) override;
    void cpu_cost(cpu_op, uint32_t) override {}
    bool wait_write(uint64_t pa, size_t n, uint64_t timeout_ns) override;
    uint64_t now_ns() const override;
    void sleep_ns(uint64_t ns) override;

private:
    session& s_;
};

/// One connection = one ibv_context.
class session {
public:
    /// Connects to the server (HCASIM_SOCKET, default ./hcasim.sock) and opens node `node`.
    /// On failure returns nullptr and sets *err (errno-like) and *why.
    static std::unique_ptr<session> open(unsigned node, int* err, std::string* why);
    ~session();
    session(const session&) = delete;
    session& operator=(const session&) = delete;

    /// One request/reply exchange. `fd_out` (>= 0) rides along; a descriptor in the reply is
    /// stored in *fd_in (if given). Returns the server's status (0 or errno), EIO once the server is gone (dead()).
    [[nodiscard]] int call(const void* req, size_t n, void* rep = nullptr, size_t rep_n = 0, int fd_out = -1,
                           int* fd_in = nullptr);
    template <class Req>
    [[nodiscard]] int call(const Req& req) {
        return call(&req, sizeof req);
    }
    template <class Req, class Rep>
    [[nodiscard]] int call(const Req& req, Rep* rep) {
        return call(&req, sizeof req, rep, sizeof *rep);
    }
    /// A one-way message (a doorbell).
    void post(const void* msg, size_t n);

    /// The read end of the async event pipe (becomes ibv_context::async_fd).
    int async_fd() const { return async_fd_; }
    /// The server is gone (its process ended or the connection broke): every verb that needs it
    /// fails with EIO, polls that find nothing fail too, and IBV_EVENT_DEVICE_FATAL was queued
    /// on the async event pipe. Never cleared: the context is dead for good, as after a real
    /// device's catastrophic error.
    bool dead() const { return dead_.load(std::memory_order_acquire); }
    const serve_proto::open_rep& info() const { return info_; }
    uint8_t* mem() const { return mem_; }
    uint64_t mem_bytes() const { return info_.mem_bytes; }
    shared_memory memory() const { return {mem_, info_.mem_bytes}; }

    /// Makes [addr, addr+len) of this process simulated host memory (the pages stay where they
    /// are, with their contents, now backed by the node's shared memory file), one reference
    /// per call; 0 or errno (EFAULT: a page is not mapped; EBUSY: another context of this
    /// process registered some of these pages, which live in its node's memory now).
    [[nodiscard]] int share_range(uint64_t addr, uint64_t len);
    /// Drops the references share_range(addr, len) took; runs nobody uses go back to private
    /// memory (contents kept) and their simulated memory is freed.
    void unshare_range(uint64_t addr, uint64_t len);

    /// The firmware objects the data-path verbs run on.
    user_bus bus{*this};
    fw::host_os os{bus, 0, 0};
    fw::hca_driver driver{bus, os};
    fw::address_space as{os};
    verbs::ibv_context ctx{};
    /// Serialises the data-path verbs of this context (the firmware objects are not thread-safe).
    std::mutex data_lock;

private:
    session() = default;
    struct run {
        uint64_t pages;
        uint64_t pa;
        uint32_t refs;
    };
    [[nodiscard]] int map_run(uint64_t va, uint64_t pages);
    /// Marks the server gone; the first call queues IBV_EVENT_DEVICE_FATAL.
    void lost();
    /// Waits for the connection to hang up (the server's end closed); then lost(). Ends early
    /// when the session closes its own end.
    void watch_server();
    void release_run(uint64_t va, const run& r);
    int fd_ = -1;
    int async_fd_ = -1;
    int async_wr_ = -1;  ///< the pipe's write end, kept to queue IBV_EVENT_DEVICE_FATAL ourselves
    std::atomic<bool> dead_{false};
    std::atomic<bool> closing_{false};
    std::thread watcher_;
    pid_t opener_ = 0;  ///< the process whose thread watcher_ is (a forked child has none)
    int mem_fd_ = -1;
    uint8_t* mem_ = nullptr;
    serve_proto::open_rep info_{};
    std::mutex call_lock_;
    std::mutex runs_lock_;
    std::map<uint64_t, run> runs_;  ///< first va -> run (disjoint, page aligned)
};

}  // namespace hcasim::provider
