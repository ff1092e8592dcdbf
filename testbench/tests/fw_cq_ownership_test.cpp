// The ownership protocol of rings the HCA writes and software polls (tlm_if/cqe.h, publication
// order) against a writer that publishes entries in the worst legal order: the body's bytes from
// the last to the first, the owner byte after them. No entry that ibv_poll_cq accepts may mix
// bytes of two entries.
//
// Two ways to meet that writer:
// - in one process, with a bus that lets the writer store bytes between every two byte loads of
//   the reader, in a seeded mix of step sizes: deterministic, and it catches a reader that
//   copies an entry before it looks at the owner byte (checked here too, so the test can fail);
// - in two processes, the writer forked, the reader polling through the provider's own view of
//   shared memory (provider/shared_memory.h) as libibverbs applications do, many thousands of
//   entries on a small ring that the writer laps continually.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <vector>

#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "firmware/verbs.h"
#include "provider/shared_memory.h"
#include "tlm_if/cqe.h"
#include "tlm_if/mmio_map.h"

using namespace hcasim;
namespace fv = hcasim::verbs;

// libsystemc references sc_main; gtest_main provides main().
extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

constexpr uint32_t kLogSize = 4;  // 16 entries: the writer laps the ring every 16 entries
constexpr uint64_t kRingPa = 0x1000;
constexpr uint64_t kMemBytes = 0x4000;
constexpr uint32_t kCqn = 5;

/// What the N-th completion holds: every field ibv_poll_cq returns derives from N, so entries
/// N and N - 16 (the slot's previous content) differ in every field.
hw::cqe entry_for(uint64_t n) {
    hw::cqe e{};
    e.wr_id = 0x9E3779B97F4A7C15ull * (n + 1);
    e.byte_len = uint32_t(n * 2654435761u) ^ 0x5a5a5a5au;
    e.imm = ~uint32_t(n * 40503u);
    e.qpn = 0x100000u | (uint32_t(n) & 0xFFFFFu);
    e.src_qp = uint32_t(n * 7u) & 0xFFFFFFu;
    e.slid = uint16_t(n * 3u + 1u);
    e.pkey_index = uint16_t(n >> 4);
    e.wqe_counter = uint16_t(n);
    e.opcode = (n & 1) ? hw::CQE_OP_RECV : hw::CQE_OP_SEND;
    e.status = uint8_t(n % 7u);
    e.sl = uint8_t(n & 15u);
    e.flags = uint8_t(n % 3u);
    e.dlid_path_bits = uint8_t(n >> 2);
    e.vendor_err = uint8_t(n >> 8);
    std::memset(e.rsvd, int(n & 0xFF), sizeof e.rsvd);
    e.owner = hw::cqe_owner_for(n, kLogSize) | ((n & 1) ? 0 : hw::CQE_IS_SEND);
    return e;
}

/// Whether a completion the verbs returned is exactly entry n's.
bool is_entry(const fv::ibv_wc& w, uint64_t n) {
    const hw::cqe e = entry_for(n);
    return w.wr_id == e.wr_id && w.byte_len == e.byte_len && w.imm_data == e.imm && w.qp_num == e.qpn &&
           w.src_qp == e.src_qp && w.slid == e.slid && w.pkey_index == e.pkey_index &&
           w.opcode == ((n & 1) ? fv::IBV_WC_RECV : fv::IBV_WC_SEND) && unsigned(w.status) == e.status &&
           w.sl == e.sl && w.wc_flags == e.flags && w.dlid_path_bits == e.dlid_path_bits &&
           w.vendor_err == e.vendor_err;
}

/// Byte i of the worst legal publication order of one entry: body bytes last to first, then
/// the owner byte.
size_t publish_order(size_t i) {
    return i + 1 < sizeof(hw::cqe) ? sizeof(hw::cqe) - 2 - i : sizeof(hw::cqe) - 1;
}

/// The consumer count the CQ doorbell carries (24 bits), widened against what is known.
uint64_t widen_consumer(uint64_t known, uint32_t low24) {
    return known + ((low24 - uint32_t(known)) & 0xFFFFFFu);
}

/// A host_bus that answers only what the polling verbs use: memory, the CQ doorbell.
class polling_bus : public host_bus {
public:
    void mmio_write(uint64_t bar_offset, const void* src, size_t n) override {
        uint64_t v = 0;
        std::memcpy(&v, src, std::min(n, sizeof v));
        if (bar_offset % hw::UAR_STRIDE == hw::UAR_CQ_DOORBELL && hw::cq_doorbell_cqn(v) == kCqn)
            consumed(hw::cq_doorbell_consumer(v));
    }
    uint32_t mmio_read32(uint64_t) override { return 0; }
    void cpu_cost(cpu_op, uint32_t) override {}
    bool wait_write(uint64_t, size_t, uint64_t) override { return false; }
    uint64_t now_ns() const override { return 0; }
    void sleep_ns(uint64_t) override {}

protected:
    /// The HCA learns the consumer count from the doorbell (it may write that many entries on).
    virtual void consumed(uint32_t low24) = 0;
};

/// The firmware's user-space view over a bus, and one CQ mirror on the ring, as the provider has.
struct poller {
    explicit poller(host_bus& bus) : os(bus, 0, 0), drv(bus, os) {
        hw::hca_caps caps{};
        caps.max_cqe = 1u << kLogSize;
        hw::port_info p{};
        p.state = 4;
        drv.attach_user_view(caps, {p}, 64, [](uint32_t) { return uint8_t(0); });
        ctx.driver = &drv;
        cq.context = &ctx;
        cq.handle = kCqn;
        cq.cqe = (1 << kLogSize) - 1;
        cq.log_size = kLogSize;
        cq.ring_pa = kRingPa;
    }
    /// Polls up to 16 completions; counts those that are not the entry they claim to be.
    int poll(uint64_t* received, uint64_t* torn) {
        fv::ibv_wc wc[16];
        const int got = fv::ibv_poll_cq(&cq, 16, wc);
        for (int i = 0; i < got; ++i, ++*received)
            if (!is_entry(wc[i], *received)) ++*torn;
        return got;
    }
    fw::host_os os;
    fw::hca_driver drv;
    fv::ibv_context ctx{};
    fv::ibv_cq cq{};
};

// ------------------------------------------------------------ one process, worst interleaving

/// Memory a writer fills between the reader's byte loads. Every load of the reader is made a
/// byte at a time, first to last (a legal way for a CPU to copy), and before each byte the
/// writer stores none (3 times in 4) or 1 to 4 bytes of its own, seeded: on average slower than
/// the reader, so the reader keeps catching up with the entry being written, and in bursts
/// faster, so it also meets entries finished behind its back.
class interleaving_bus : public polling_bus {
public:
    interleaving_bus() : mem_(kMemBytes, 0) {}
    void mem_read(uint64_t pa, void* dst, size_t n) override {
        for (size_t i = 0; i < n; ++i) {
            writer_steps();
            static_cast<uint8_t*>(dst)[i] = mem_[pa + i];
        }
    }
    void mem_write(uint64_t pa, const void* src, size_t n) override { std::memcpy(mem_.data() + pa, src, n); }
    uint64_t published() const { return next_; }

private:
    void consumed(uint32_t low24) override { consumed_ = widen_consumer(consumed_, low24); }
    void writer_steps() {
        seed_ = seed_ * 6364136223846793005ull + 1442695040888963407ull;
        const unsigned draw = unsigned(seed_ >> 60);
        for (unsigned k = draw < 12 ? 0 : draw - 11; k; --k) {
            if (next_ - consumed_ >= (1u << kLogSize)) return;  // the ring is full until a doorbell
            const hw::cqe e = entry_for(next_);
            const size_t b = publish_order(byte_);
            mem_[kRingPa + (next_ & ((1u << kLogSize) - 1)) * sizeof(hw::cqe) + b] =
                reinterpret_cast<const uint8_t*>(&e)[b];
            if (++byte_ == sizeof(hw::cqe)) {
                byte_ = 0;
                ++next_;
            }
        }
    }
    std::vector<uint8_t> mem_;
    uint64_t seed_ = 0x2545F4914F6CDD1Dull;
    uint64_t next_ = 0, consumed_ = 0;
    size_t byte_ = 0;
};

constexpr uint64_t kInterleavedEntries = 20000;

TEST(CqOwnership, poll_cq_never_accepts_a_torn_entry_from_a_writer_storing_between_every_two_loads) {
    interleaving_bus bus;
    poller p(bus);
    uint64_t received = 0, torn = 0;
    for (uint64_t attempts = 0; received < kInterleavedEntries && attempts < 50 * kInterleavedEntries;
         ++attempts)
        p.poll(&received, &torn);
    EXPECT_EQ(received, kInterleavedEntries);
    EXPECT_EQ(torn, 0u);
    EXPECT_EQ(p.cq.consumer, received);
}

TEST(CqOwnership, the_same_writer_catches_a_reader_that_copies_the_entry_before_its_owner_byte) {
    // The order ibv_poll_cq used to read in: the whole entry, then a look at its owner byte.
    interleaving_bus bus;
    uint64_t received = 0, torn = 0;
    for (uint64_t attempts = 0; received < kInterleavedEntries && attempts < 50 * kInterleavedEntries;
         ++attempts) {
        hw::cqe e;
        bus.mem_read(kRingPa + (received & ((1u << kLogSize) - 1)) * sizeof e, &e, sizeof e);
        if ((e.owner & hw::CQE_OWNER_BIT) != hw::cqe_owner_for(received, kLogSize)) continue;
        const hw::cqe want = entry_for(received);
        if (std::memcmp(&e, &want, sizeof e) != 0) ++torn;
        ++received;
        const uint64_t db = hw::cq_doorbell(kCqn, uint32_t(received), hw::CQ_ARM_NONE);
        bus.mmio_write(hw::UAR_BASE + hw::UAR_CQ_DOORBELL, &db, sizeof db);
    }
    EXPECT_EQ(received, kInterleavedEntries);
    EXPECT_GT(torn, kInterleavedEntries / 100) << "the interleaving no longer exposes the wrong order";
}

// ------------------------------------------------------------------ two processes

/// The page both processes share: the ring, and the consumer count the reader's doorbells carry.
struct shared_page {
    std::atomic<uint64_t> consumed;
    std::atomic<uint32_t> writer_alive;
    alignas(64) uint8_t mem[kMemBytes];
};

/// The reader's bus: the provider's own loads from shared memory.
class shared_bus : public polling_bus {
public:
    explicit shared_bus(shared_page* page) : page_(page), view_{page->mem, kMemBytes} {}
    void mem_read(uint64_t pa, void* dst, size_t n) override { view_.read(pa, dst, n); }
    uint8_t load_acquire8(uint64_t pa) override { return view_.load_acquire8(pa); }
    void mem_write(uint64_t pa, const void* src, size_t n) override { view_.write(pa, src, n); }

private:
    void consumed(uint32_t low24) override {
        page_->consumed.store(widen_consumer(page_->consumed.load(std::memory_order_relaxed), low24),
                              std::memory_order_release);
    }
    shared_page* page_;
    provider::shared_memory view_;
};

/// The writer process: entries 0 .. count-1, each body byte stored on its own from the last to
/// the first with a pause after each, then the owner byte with release ordering.
[[noreturn]] void write_entries(shared_page* page, uint64_t count) {
    for (uint64_t n = 0; n < count; ++n) {
        while (n - page->consumed.load(std::memory_order_acquire) >= (1u << kLogSize)) sched_yield();
        const hw::cqe e = entry_for(n);
        uint8_t* slot = page->mem + kRingPa + (n & ((1u << kLogSize) - 1)) * sizeof(hw::cqe);
        for (size_t i = 0; i < sizeof e; ++i) {
            const size_t b = publish_order(i);
            const uint8_t v = reinterpret_cast<const uint8_t*>(&e)[b];
            __atomic_store_n(slot + b, v,
                             b == offsetof(hw::cqe, owner) ? __ATOMIC_RELEASE : __ATOMIC_RELAXED);
            for (volatile int spin = 0; spin < 8; ++spin) {}
        }
    }
    page->writer_alive.store(0, std::memory_order_release);
    _exit(0);
}

TEST(CqOwnership,
     a_writer_process_publishing_body_last_to_first_then_owner_never_gets_a_torn_entry_past_poll_cq) {
    constexpr uint64_t kEntries = 200000;
    void* m = mmap(nullptr, sizeof(shared_page), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    auto* page = new (m) shared_page{};
    page->writer_alive.store(1);
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) write_entries(page, kEntries);

    shared_bus bus(page);
    poller p(bus);
    uint64_t received = 0, torn = 0;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (received < kEntries && std::chrono::steady_clock::now() < give_up)
        if (!p.poll(&received, &torn)) sched_yield();
    int status = 0;
    if (received < kEntries) kill(child, SIGKILL);
    ASSERT_EQ(waitpid(child, &status, 0), child);
    EXPECT_EQ(received, kEntries);
    EXPECT_EQ(torn, 0u);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    munmap(m, sizeof(shared_page));
}

}  // namespace
