// RC under loss: streams of WRITEs (with and without immediate), SENDs, READs and both atomics
// over links that drop, corrupt, duplicate and reorder packets (link.* fault injection), one
// to four packets per message. Every byte must arrive exactly once and in order (checked in
// host memory at each completion, and by the responder's placed-byte counter), every
// completion must be SUCCESS, and the atomics' results must be the sequence a lossless run
// returns. A link that dies mid-stream gives RETRY_EXC_ERR on the first unacknowledged WQE and
// WR_FLUSH_ERR on the rest.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "testbench/tests/bench_harness.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;

namespace {

enum class kind { write, write_imm, send, read, atomic, cmp_swap };

constexpr unsigned kDepth = 32;    // WRs outstanding
constexpr uint32_t kSlot = 16384;  // bytes per buffer slot (largest message)
constexpr unsigned kMessages = 10'000;

/// Message sizes, a fixed cycle: 1 byte to 3 packets at MTU 4096.
const std::vector<uint32_t> kMixedSizes = {1, 64, 1000, 4096, 4097, 8192, 12288, 300};
/// The same with 4-packet messages (16 KiB READs: their responses reordered among themselves).
const std::vector<uint32_t> kMultiSizes = {16384, 1, 12288, 16384, 4097, 16384, 8192, 64};

rc_config lossy(const std::vector<std::pair<std::string, std::string>>& faults) {
    rc_config c;
    c.max_send_wr = 64;
    c.max_recv_wr = 2 * kDepth;
    c.cqe = 512;
    c.timeout = 8;  // 1.05 ms: tail losses recover quickly in simulated time
    c.retry_cnt = 7;
    c.sim_limit_ns = 600'000'000'000ull;
    c.keys = faults;
    return c;
}

struct outcome {
    unsigned completed = 0, bad = 0, mismatches = 0;
    uint64_t bytes = 0;
};

/// Runs the stream from node0 to node1 and checks every completion and every byte.
outcome stream(rc_harness& h, kind k, unsigned n, const std::vector<uint32_t>& sizes) {
    auto size_of = [&](unsigned i) { return sizes[i % sizes.size()]; };
    const bool atomic = k == kind::atomic || k == kind::cmp_swap;
    const bool receives = k == kind::send || k == kind::write_imm;  // the responder completes each message
    outcome r;
    const uint64_t lbuf = h.alloc(0, kDepth * kSlot, 4096);
    // The remote slots, and room for the last READ's offset (i % 7) past its slot.
    const uint64_t rsize = 2 * kDepth * kSlot + 4096;
    const uint64_t rbuf = h.alloc(1, rsize, 4096);
    const int ratomic =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    ibv_mr* lmr = h.reg(0, lbuf, kDepth * kSlot);
    ibv_mr* rmr = h.reg(1, rbuf, rsize, ratomic);
    if (!lmr || !rmr) return r;
    // READ sources: the remote buffer holds a pattern the reads copy from.
    const auto remote_src = pattern(rsize, 777);
    if (k == kind::read) h.write_mem(1, rbuf, remote_src);
    if (atomic) h.fill_mem(1, rbuf, 8, 0);
    unsigned posted = 0, recv_posted = 0, recv_done = 0;
    auto post_recv = [&] {
        const unsigned slot = recv_posted % (2 * kDepth);
        EXPECT_EQ(h.post_recv(1, {{rbuf + uint64_t(slot) * kSlot, kSlot, rmr->lkey}}, recv_posted), 0);
        ++recv_posted;
    };
    if (receives)
        for (unsigned i = 0; i < 2 * kDepth; ++i) post_recv();
    auto post = [&](unsigned i) {
        const unsigned slot = i % kDepth;
        const uint64_t la = lbuf + uint64_t(slot) * kSlot;
        const uint32_t len = size_of(i);
        int rc = 0;
        switch (k) {
        case kind::write:
        case kind::write_imm:
            h.write_mem(0, la, pattern(len, i + 1));
            rc = h.post_send(0, k == kind::write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_WRITE_WITH_IMM,
                             {{la, len, lmr->lkey}}, i, IBV_SEND_SIGNALED,
                             rbuf + uint64_t(i % (2 * kDepth)) * kSlot, rmr->rkey, 0x1000 + i);
            break;
        case kind::send:
            h.write_mem(0, la, pattern(len, i + 1));
            rc = h.post_send(0, IBV_WR_SEND, {{la, len, lmr->lkey}}, i);
            break;
        case kind::read:
            h.fill_mem(0, la, len, 0xEE);
            rc = h.post_send(0, IBV_WR_RDMA_READ, {{la, len, lmr->lkey}}, i, IBV_SEND_SIGNALED,
                             rbuf + uint64_t(i % (2 * kDepth)) * kSlot + (i % 7), rmr->rkey);
            break;
        case kind::atomic:
            rc = h.post_atomic(0, IBV_WR_ATOMIC_FETCH_AND_ADD, la, lmr->lkey, i, rbuf, rmr->rkey, 1);
            break;
        case kind::cmp_swap:  // i -> i + 1: each succeeds only if every earlier one executed once
            rc = h.post_atomic(0, IBV_WR_ATOMIC_CMP_AND_SWP, la, lmr->lkey, i, rbuf, rmr->rkey, i, i + 1);
            break;
        }
        EXPECT_EQ(rc, 0) << "post " << i;
    };
    // A WRITE's ACK leaves the responder once its DMA writes are posted to PCIe; they land
    // behind whatever the responder's PCIe link is busy with. So a WRITE's bytes are checked
    // kLag completions later (its slot is reused only 2 x kDepth messages later), the last
    // ones after the stream.
    constexpr unsigned kLag = 16;
    auto verify_write = [&](unsigned i) {
        const uint32_t len = size_of(i);
        const auto want = pattern(len, i + 1);
        const auto got = h.read_mem(1, rbuf + uint64_t(i % (2 * kDepth)) * kSlot, len);
        r.bytes += len;
        if (got != want && r.mismatches++ == 0) {
            size_t off = 0;
            while (off < len && got[off] == want[off]) ++off;
            ADD_FAILURE() << "message " << i << " (" << len << " bytes): data differs at offset " << off
                          << " (got 0x" << std::hex << unsigned(got[off]) << ", want 0x"
                          << unsigned(want[off]) << std::dec << ")";
        }
    };
    auto check = [&](const ibv_wc& wc) {
        const unsigned i = unsigned(wc.wr_id);
        const uint64_t la = lbuf + uint64_t(i % kDepth) * kSlot;
        const uint32_t len = size_of(i);
        if (i != r.completed || wc.status != IBV_WC_SUCCESS) {
            if (r.bad++ == 0)
                ADD_FAILURE() << "completion " << r.completed << ": wr_id " << wc.wr_id << " status "
                              << wc.status;
            return;
        }
        std::vector<uint8_t> want, got;
        switch (k) {
        case kind::write:
            if (i >= kLag) verify_write(i - kLag);
            return;
        case kind::write_imm:
        case kind::send: return;  // checked at the receive completion
        case kind::read: {
            const size_t off = size_t(i % (2 * kDepth)) * kSlot + (i % 7);
            want.assign(remote_src.begin() + off, remote_src.begin() + off + len);
            got = h.read_mem(0, la, len);
            break;
        }
        case kind::atomic:
        case kind::cmp_swap: {
            uint64_t v = 0;
            const auto b = h.read_mem(0, la, 8);
            std::memcpy(&v, b.data(), 8);
            if (v != i && r.mismatches++ == 0)
                ADD_FAILURE() << (k == kind::atomic ? "fetch-and-add " : "compare-and-swap ") << i
                              << " returned " << v;
            r.bytes += 8;
            return;
        }
        }
        r.bytes += len;
        if (got != want && r.mismatches++ == 0) {
            size_t off = 0;
            while (off < len && got[off] == want[off]) ++off;

            ADD_FAILURE() << "message " << i << " (" << len << " bytes): data differs at offset " << off
                          << " (got 0x" << std::hex << unsigned(got[off]) << ", want 0x"
                          << unsigned(want[off]) << std::dec << ")";
        }
    };
    auto check_recv = [&](const ibv_wc& wc) {
        const unsigned i = recv_done;
        const uint32_t len = size_of(i);
        const bool imm = k == kind::write_imm;
        if (wc.wr_id != i || wc.status != IBV_WC_SUCCESS || wc.byte_len != len ||
            wc.opcode != (imm ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV) ||
            (imm && (!(wc.wc_flags & IBV_WC_WITH_IMM) || wc.imm_data != 0x1000 + i))) {
            if (r.bad++ == 0)
                ADD_FAILURE() << "receive " << i << ": wr_id " << wc.wr_id << " status " << wc.status
                              << " byte_len " << wc.byte_len << " opcode " << wc.opcode << " imm 0x"
                              << std::hex << wc.imm_data;
        } else {
            // The WRITE's bytes are in place before its receive completion is written.
            const auto got = h.read_mem(1, rbuf + uint64_t(i % (2 * kDepth)) * kSlot, len);
            if (got != pattern(len, i + 1) && r.mismatches++ == 0)
                ADD_FAILURE() << "received message " << i << " differs";
            r.bytes += len;
        }
        ++recv_done;
        if (recv_posted < n) post_recv();
    };
    while (r.completed < n && r.bad == 0) {
        while (posted < n && posted - r.completed < kDepth) post(posted++);
        ibv_wc wc[16];
        if (receives) {
            const int got = ibv_poll_cq(h.s[1].rcq, 16, wc);
            for (int j = 0; j < got; ++j) check_recv(wc[j]);
        }
        const int got = ibv_poll_cq(h.s[0].scq, 16, wc);
        if (got < 0) {
            ADD_FAILURE() << "poll " << got;
            break;
        }
        for (int j = 0; j < got; ++j) {
            check(wc[j]);
            ++r.completed;
        }
        if (got == 0 && ibv_wait_cq(h.s[0].scq, 2'000'000'000ull) == ETIMEDOUT) {
            ADD_FAILURE() << "stalled after " << r.completed << " completions";
            break;
        }
    }
    if (k == kind::write && r.bad == 0) {
        h.sleep(0, 100'000);
        for (unsigned i = r.completed >= kLag ? r.completed - kLag : 0; i < r.completed; ++i) verify_write(i);
    }
    if (receives) {
        while (recv_done < n && r.bad == 0) {
            ibv_wc wc[16];
            const int got = ibv_poll_cq(h.s[1].rcq, 16, wc);
            for (int j = 0; j < got; ++j) check_recv(wc[j]);
            if (got == 0 && ibv_wait_cq(h.s[1].rcq, 100'000'000) == ETIMEDOUT) {
                ADD_FAILURE() << "receives stalled after " << recv_done;
                break;
            }
        }
    }
    if (atomic) {
        const auto b = h.read_mem(1, rbuf, 8);
        uint64_t v = 0;
        std::memcpy(&v, b.data(), 8);
        EXPECT_EQ(v, n) << "every atomic executed exactly once";
    }
    return r;
}

void run_loss(kind k, const std::vector<std::pair<std::string, std::string>>& faults, bool expect_retransmits,
              unsigned n = kMessages, const std::vector<uint32_t>& sizes = kMixedSizes,
              const std::function<void()>& also = {}) {
    rc_harness h(lossy(faults));
    h.run([&](rc_harness& h) {
        const outcome r = stream(h, k, n, sizes);
        EXPECT_EQ(r.completed, n);
        EXPECT_EQ(r.bad, 0u);
        EXPECT_EQ(r.mismatches, 0u);
        uint64_t total = 0;
        for (unsigned i = 0; i < n; ++i) total += sizes[i % sizes.size()];
        if (k == kind::write || k == kind::write_imm || k == kind::send) {
            EXPECT_EQ(r.bytes, total);
            EXPECT_EQ(ctr(1, "transport_engine.rx_payload_bytes"), total) << "each byte placed exactly once";
        }
        if (k == kind::read) {
            EXPECT_EQ(r.bytes, total);
        }
        if (k == kind::atomic || k == kind::cmp_swap) {
            EXPECT_EQ(ctr(1, "transport_engine.atomics_executed"), n)
                << "duplicates replayed, not re-executed";
        }
        if (expect_retransmits) {
            EXPECT_GT(ctr(0, "transport_engine.retransmits"), 0u) << "the faults did bite";
        }
        if (also) also();
        std::fprintf(stderr, "retransmits %llu timeouts %llu duplicates %llu replays %llu at %.3f ms\n",
                     (unsigned long long)ctr(0, "transport_engine.retransmits"),
                     (unsigned long long)ctr(0, "transport_engine.timeouts"),
                     (unsigned long long)ctr(1, "transport_engine.duplicates"),
                     (unsigned long long)ctr(1, "transport_engine.atomic_replays"), double(h.now_ns()) / 1e6);
    });
}

const std::vector<std::pair<std::string, std::string>> kDrop1 = {{"link.drop_rate", "0.01"}};
const std::vector<std::pair<std::string, std::string>> kDrop10 = {{"link.drop_rate", "0.1"}};
const std::vector<std::pair<std::string, std::string>> kMixed = {{"link.bit_error_rate", "1e-6"},
                                                                 {"link.reorder_rate", "0.02"},
                                                                 {"link.dup_rate", "0.02"},
                                                                 {"link.drop_rate", "0.005"}};

}  // namespace

SIM_TEST(E2eLoss, lossless_baseline_write) { run_loss(kind::write, {}, false); }
SIM_TEST(E2eLoss, write_stream_survives_1pct_drop) { run_loss(kind::write, kDrop1, true); }
SIM_TEST(E2eLoss, write_stream_survives_10pct_drop) { run_loss(kind::write, kDrop10, true); }
SIM_TEST(E2eLoss, write_stream_survives_bit_errors_reordering_duplication) {
    run_loss(kind::write, kMixed, true);
}
SIM_TEST(E2eLoss, send_stream_survives_1pct_drop) { run_loss(kind::send, kDrop1, true); }
SIM_TEST(E2eLoss, send_stream_survives_10pct_drop) { run_loss(kind::send, kDrop10, true); }
SIM_TEST(E2eLoss, send_stream_survives_bit_errors_reordering_duplication) {
    run_loss(kind::send, kMixed, true);
}
SIM_TEST(E2eLoss, read_stream_survives_1pct_drop) { run_loss(kind::read, kDrop1, true); }
SIM_TEST(E2eLoss, read_stream_survives_10pct_drop) { run_loss(kind::read, kDrop10, true); }
SIM_TEST(E2eLoss, read_stream_survives_bit_errors_reordering_duplication) {
    run_loss(kind::read, kMixed, true);
}
// Three nodes on a switch: reordering happens at the switch's output queues, both directions
// of each cable lose packets.
const std::vector<std::pair<std::string, std::string>> kSwitched = {
    {"fabric.nodes", "3"}, {"link.reorder_rate", "0.05"}, {"link.drop_rate", "0.01"}};
SIM_TEST(E2eLoss, write_stream_survives_switch_reordering_and_drop) {
    run_loss(kind::write, kSwitched, true);
}
SIM_TEST(E2eLoss, read_stream_survives_switch_reordering_and_drop) { run_loss(kind::read, kSwitched, true); }
SIM_TEST(E2eLoss, atomic_stream_survives_1pct_drop) { run_loss(kind::atomic, kDrop1, true); }
SIM_TEST(E2eLoss, atomic_stream_survives_10pct_drop) { run_loss(kind::atomic, kDrop10, true); }
SIM_TEST(E2eLoss, atomic_stream_survives_bit_errors_reordering_duplication) {
    run_loss(kind::atomic, kMixed, true);
}

// Reordering and duplication alone, for every RC operation, messages of one to four packets
// (16 KiB): 2,000 messages each, so the suite stays fast. Each reordered or duplicated packet
// lands in the middle of a multi-packet message or its responses at one point or another.
const std::vector<std::pair<std::string, std::string>> kReorderDup = {{"link.reorder_rate", "0.05"},
                                                                      {"link.dup_rate", "0.05"}};
constexpr unsigned kShort = 2000;
SIM_TEST(E2eLoss, write_stream_survives_reordering_and_duplication) {
    run_loss(kind::write, kReorderDup, true, kShort, kMultiSizes);
}
SIM_TEST(E2eLoss, write_with_immediate_stream_survives_reordering_and_duplication) {
    run_loss(kind::write_imm, kReorderDup, true, kShort, kMultiSizes);
}
SIM_TEST(E2eLoss, send_stream_survives_reordering_and_duplication) {
    run_loss(kind::send, kReorderDup, true, kShort, kMultiSizes);
}
SIM_TEST(E2eLoss, read_stream_survives_reordering_and_duplication) {
    run_loss(kind::read, kReorderDup, true, kShort, kMultiSizes);
}
SIM_TEST(E2eLoss, fetch_add_stream_survives_reordering_and_duplication) {
    run_loss(kind::atomic, kReorderDup, true, kShort, kMultiSizes);
}
SIM_TEST(E2eLoss, compare_swap_stream_survives_reordering_and_duplication) {
    run_loss(kind::cmp_swap, kReorderDup, true, kShort, kMultiSizes);
}
// The case: 16 KiB READs (four responses each) under 5% reordering used up the retry
// budget (RETRY_EXC_ERR). Out-of-sequence responses are dropped and re-requested without
// spending retries; only the local ACK timeout and NAKs do (IBA 9.7.5).
SIM_TEST(E2eLoss, reordered_multi_packet_read_responses_do_not_use_up_the_retry_budget) {
    run_loss(kind::read, {{"link.reorder_rate", "0.05"}}, true, kShort, {16384}, [] {
        EXPECT_GT(ctr(0, "transport_engine.retransmits"), 100u) << "many reorderings to recover from";
        EXPECT_EQ(ctr(0, "transport_engine.timeouts"), 0u)
            << "recovered by re-requests, not by the ACK timer";
    });
}

// The cable of node0 dies 200 us into a WRITE stream: a prefix completes, the first WQE not
// acknowledged gets RETRY_EXC_ERR, every later one WR_FLUSH_ERR, the QP is in Error, and no
// message was placed twice.
SIM_TEST(E2eLoss, dead_link_retry_exceeded_then_flush) {
    rc_config cfg = lossy({{"link0.down_at_ns", "200000"}});
    cfg.timeout = 6;  // 262 us
    cfg.retry_cnt = 3;
    rc_harness h(cfg);
    h.run([](rc_harness& h) {
        const uint64_t lbuf = h.alloc(0, 64 * 4096, 4096);
        const uint64_t rbuf = h.alloc(1, 64 * 4096, 4096);
        h.fill_mem(1, rbuf, 64 * 4096, 0);
        ibv_mr* lmr = h.reg(0, lbuf, 64 * 4096);
        ibv_mr* rmr = h.reg(1, rbuf, 64 * 4096);
        const uint64_t start = h.now_ns();
        ASSERT_LT(start, 150'000u) << "setup must end before the link dies";
        unsigned posted = 0, ok = 0, retry_exc = 0, flushed = 0, other = 0;
        bool error_seen = false;
        for (;;) {
            while (posted < 2000 && posted < ok + retry_exc + flushed + other + 32 && !error_seen) {
                const unsigned slot = posted % 64;
                h.write_mem(0, lbuf + slot * 4096, pattern(4096, posted + 1));
                if (h.post_send(0, IBV_WR_RDMA_WRITE, {{lbuf + slot * 4096, 4096, lmr->lkey}}, posted,
                                IBV_SEND_SIGNALED, rbuf + slot * 4096, rmr->rkey) != 0)
                    break;
                ++posted;
            }
            ibv_wc wc[16];
            const int got = ibv_poll_cq(h.s[0].scq, 16, wc);
            for (int j = 0; j < got; ++j) {
                if (wc[j].status == IBV_WC_SUCCESS) {
                    EXPECT_EQ(retry_exc + flushed, 0u) << "a success after the error";
                    EXPECT_EQ(wc[j].wr_id, ok);
                    ++ok;
                } else if (wc[j].status == IBV_WC_RETRY_EXC_ERR) {
                    EXPECT_EQ(retry_exc, 0u) << "one RETRY_EXC_ERR";
                    EXPECT_EQ(wc[j].wr_id, ok) << "on the first WQE not acknowledged";
                    ++retry_exc;
                    error_seen = true;
                } else if (wc[j].status == IBV_WC_WR_FLUSH_ERR) {
                    EXPECT_EQ(retry_exc, 1u) << "flushes follow the error";
                    ++flushed;
                } else {
                    ++other;
                }
            }
            if (ok + retry_exc + flushed + other == posted && error_seen) break;
            if (got == 0 && ibv_wait_cq(h.s[0].scq, 100'000'000) == ETIMEDOUT) {
                ADD_FAILURE() << "stalled: " << ok << " ok, " << retry_exc << " retry_exc, " << flushed
                              << " flushed";
                break;
            }
        }
        EXPECT_GT(ok, 10u) << "messages before the link died completed";
        EXPECT_EQ(retry_exc, 1u);
        EXPECT_GT(flushed, 0u);
        EXPECT_EQ(other, 0u);
        ibv_qp_attr a{};
        ibv_qp_init_attr ia{};
        ASSERT_EQ(ibv_query_qp(h.s[0].qp, &a, 0, &ia), 0);
        EXPECT_EQ(a.qp_state, IBV_QPS_ERR);
        // Each acknowledged message is in place; placed bytes add up to whole messages, once each.
        for (unsigned i = ok > 64 ? ok - 64 : 0; i < ok; ++i)  // slots not overwritten by a later message
            h.expect_mem(1, rbuf + (i % 64) * 4096, pattern(4096, i + 1), "message " + std::to_string(i));
        const uint64_t placed = ctr(1, "transport_engine.rx_payload_bytes");
        EXPECT_EQ(placed % 4096, 0u) << "no message placed partially twice";
        EXPECT_GE(placed, uint64_t(ok) * 4096);
        EXPECT_EQ(ctr(1, "transport_engine.duplicates"), 0u) << "nothing arrived twice";
    });
}
