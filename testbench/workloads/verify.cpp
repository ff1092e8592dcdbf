// --verify: the data every message carries, the checker that compares it and counts what it
// compared, and the application's zero-time loads and stores of its buffers.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "testbench/workloads/base.h"

namespace hcasim {

namespace verify {

namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

std::string hex(uint64_t v, int digits) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%0*llx", digits, static_cast<unsigned long long>(v));
    return b;
}

}  // namespace

uint64_t data_key(uint64_t seed, unsigned node, unsigned qp, uint64_t step, uint64_t message) {
    return mix(mix(mix(mix(mix(seed) ^ node) ^ qp) ^ step) ^ message);
}

void fill(uint64_t key, uint8_t* dst, uint64_t n) {
    uint64_t w = 0;
    for (; (w + 1) * 8 <= n; ++w) {
        const uint64_t v = mix(key + w);
        std::memcpy(dst + w * 8, &v, 8);
    }
    if (w * 8 < n) {
        const uint64_t v = mix(key + w);
        std::memcpy(dst + w * 8, &v, n - w * 8);
    }
}

uint64_t value(uint64_t key) { return mix(key ^ 0xa70311cull); }

bool checker::bytes(const where& w, const uint8_t* actual, uint64_t n, uint64_t key, int last) {
    if (expected_key_ != key || expected_n_ != n || expected_last_ != last || expected_.size() < n) {
        expected_.resize(n);
        fill(key, expected_.data(), n);
        if (last >= 0 && n) expected_[n - 1] = uint8_t(last);
        expected_key_ = key;
        expected_n_ = n;
        expected_last_ = last;
    }
    bytes_checked += n;
    if (n == 0 || std::memcmp(actual, expected_.data(), n) == 0) return true;
    uint64_t first = n, differ = 0;
    for (uint64_t k = 0; k < n; ++k)
        if (actual[k] != expected_[k]) {
            first = std::min(first, k);
            ++differ;
        }
    mismatches += differ;
    failed(w, "byte " + std::to_string(first) + " expected " + hex(expected_[first], 2) + ", got " +
                  hex(actual[first], 2) + " (" + std::to_string(differ) + " of " + std::to_string(n) +
                  " bytes differ)");
    return false;
}

bool checker::value(const where& w, uint64_t actual, uint64_t expected) {
    bytes_checked += 8;
    if (actual == expected) return true;
    for (unsigned k = 0; k < 8; ++k) mismatches += ((actual ^ expected) >> (8 * k)) & 0xFF ? 1 : 0;
    failed(w, "expected " + hex(expected, 16) + ", got " + hex(actual, 16));
    return false;
}

void checker::shared_word(const where& w, bool cas, uint64_t init, const std::vector<shared_atomic>& ops,
                          uint64_t final_value) {
    const auto at = [&](const shared_atomic& a, const char* what) {
        where x = w;
        x.node = 0;
        x.qp = a.qp;
        x.message = a.message;
        x.what = what;
        return x;
    };
    uint64_t word = init;
    if (cas) {
        // The first one executed swaps; every later one fetches its swap value.
        const shared_atomic* winner = nullptr;
        for (const shared_atomic& a : ops)
            if (a.fetched == init) {
                winner = &a;
                break;
            }
        for (const shared_atomic& a : ops)
            value(at(a, "fetched value (shared word)"), a.fetched,
                  &a == winner || !winner ? init : winner->operand);
        if (winner) word = winner->operand;
    } else {
        // Follow the chain: the atomic that fetched `word` executed next and added its operand.
        std::unordered_map<uint64_t, const shared_atomic*> by_fetched;
        by_fetched.reserve(ops.size());
        std::vector<const shared_atomic*> off_chain;  // fetched a value another one fetched too
        for (const shared_atomic& a : ops)
            if (!by_fetched.emplace(a.fetched, &a).second) off_chain.push_back(&a);
        for (auto it = by_fetched.find(word); it != by_fetched.end(); it = by_fetched.find(word)) {
            value(at(*it->second, "fetched value (shared word)"), it->second->fetched, word);
            word += it->second->operand;
            by_fetched.erase(it);
        }
        // The chain broke: these fetched no value a serial execution reaches.
        for (const auto& [fetched, a] : by_fetched) off_chain.push_back(a);
        std::sort(off_chain.begin(), off_chain.end(), [](const shared_atomic* x, const shared_atomic* y) {
            return x->qp != y->qp ? x->qp < y->qp : x->message < y->message;
        });
        for (const shared_atomic* a : off_chain)
            value(at(*a, "fetched value (shared word: off the serial chain)"), a->fetched, word);
    }
    where end = w;
    end.node = 1;
    end.qp = 0;
    end.message = ops.empty() ? 0 : ops.size() - 1;
    end.what = "shared word after the last atomic";
    value(end, final_value, word);
}

void checker::bad_completion(const where& w, const std::string& why) {
    ++bad_completions;
    failed(w, why);
}

void checker::lost(const where& w, uint64_t n, uint64_t sent) {
    lost_messages += n;
    if (n && first_failure.empty())
        first_failure = std::string(w.workload) + " " + std::to_string(w.size) + " B, node" +
                        std::to_string(w.node) + " QP " + std::to_string(w.qp) + ", " + w.what + ": " +
                        std::to_string(n) + " of " + std::to_string(sent) +
                        " datagrams lost (UD does not retransmit)";
}

void checker::failed(const where& w, const std::string& detail) {
    if (!first_failure.empty()) return;
    first_failure = std::string(w.workload) + " " + std::to_string(w.size) + " B, node" +
                    std::to_string(w.node) + " QP " + std::to_string(w.qp) + " message " +
                    std::to_string(w.message) + ", " + w.what + ": " + detail;
}

}  // namespace verify

namespace workloads {

// The application's --verify helpers.
// Loads and stores of simulated memory through the processes' address spaces, charging no CPU
// cost: they take no simulated time. They address the workload's own buffers, mapped since
// setup, so they cannot fail (hence the (void) casts).
const uint8_t* perftest::peek(unsigned i, uint64_t va, uint64_t n) {
    got_.resize(n);
    (void)sw_[i]->as.read(va, got_.data(), n);
    return got_.data();
}

uint64_t perftest::peek64(unsigned i, uint64_t va) {
    uint64_t v = 0;
    (void)sw_[i]->as.read(va, &v, 8);
    return v;
}

void perftest::poke64(unsigned i, uint64_t va, uint64_t v) {
    record_write(i, va, &v, 8);
    (void)sw_[i]->as.write(va, &v, 8);
}

void perftest::poke_data(unsigned i, uint64_t va, uint64_t n, uint64_t key, int last) {
    scratch_.resize(n);
    verify::fill(key, scratch_.data(), n);
    if (rec_)
        rec_->call(i, "fill", {{"buf", "buf0"}, {"offset", va - side_[i].buf}, {"len", n}, {"key", key}});
    if (last >= 0 && n) {
        scratch_[n - 1] = uint8_t(last);
        record_write(i, va + n - 1, &scratch_[n - 1], 1);
    }
    (void)sw_[i]->as.write(va, scratch_.data(), n);
}

void perftest::clear(unsigned i, uint64_t va, uint64_t n) {
    scratch_.assign(n, 0);
    if (rec_)
        rec_->call(i, "fill", {{"buf", "buf0"}, {"offset", va - side_[i].buf}, {"len", n}, {"byte", 0}});
    (void)sw_[i]->as.write(va, scratch_.data(), n);
}

/// Checks a send completion's opcode, wr_id and QP.
void perftest::check_send_wc(const verify::where& w, const ibv_wc& wc, ibv_wc_opcode op, uint64_t wr_id) {
    if (wc.opcode != op)
        chk_.bad_completion(w, "opcode " + std::to_string(wc.opcode) + ", expected " + std::to_string(op));
    if (wc.wr_id != wr_id)
        chk_.bad_completion(w, "wr_id " + hex(wc.wr_id) + ", expected " + hex(wr_id) +
                                   " (completions out of order or missing)");
    if (wc.qp_num != side_[w.node].qps[w.qp]->qp_num)
        chk_.bad_completion(w, "QP number " + std::to_string(wc.qp_num) + ", expected " +
                                   std::to_string(side_[w.node].qps[w.qp]->qp_num));
}

/// Checks a receive completion of a `size`-byte message (opcode RECV, byte_len, no immediate,
/// wr_id in posting order; UD: the GRH area in byte_len; UD and RD: the sender's QP as source).
void perftest::check_recv_wc(const verify::where& w, const ibv_wc& wc, uint64_t size) {
    check_send_wc(w, wc, IBV_WC_RECV, side_[w.node].rq_done[w.qp]);
    if (wc.byte_len != recv_len(size))
        chk_.bad_completion(
            w, "byte_len " + std::to_string(wc.byte_len) + ", expected " + std::to_string(recv_len(size)));
    if (wc.wc_flags & IBV_WC_WITH_IMM) chk_.bad_completion(w, "carries immediate data, none was sent");
    if ((tr_ == transport::ud || tr_ == transport::rd) && wc.src_qp != info_[peer_of(w.node)].qpn[w.qp])
        chk_.bad_completion(w, "source QP " + std::to_string(wc.src_qp) + ", expected " +
                                   std::to_string(info_[peer_of(w.node)].qpn[w.qp]));
    if (mcast_ && !(wc.wc_flags & IBV_WC_GRH))
        chk_.bad_completion(w, "no GRH flag: a multicast datagram carries a GRH");
}

/// Puts this size's counts into its row.
void perftest::take_counts(size_result& r) {
    r.verified = true;
    r.bytes_checked = chk_.bytes_checked;
    r.mismatches = chk_.mismatches;
    r.bad_completions = chk_.bad_completions;
    chk_.bytes_checked = chk_.mismatches = chk_.bad_completions = 0;
}

/// The plain end-of-size data check without --verify: every QP's destination holds its source.
void perftest::same_bytes(unsigned src_node, uint64_t src, unsigned dst_node, uint64_t dst, uint64_t size) {
    std::vector<uint8_t> a(size), b(size);
    (void)sw_[src_node]->as.read(src, a.data(), size);
    (void)sw_[dst_node]->as.read(dst, b.data(), size);
    if (a != b)
        fail("data check failed: " + std::to_string(size) + " bytes at node" + std::to_string(dst_node) +
             " differ from node" + std::to_string(src_node) + "'s" +
             (tr_ == transport::uc ? " (UC does not retransmit a lost WRITE)" : ""));
}

}  // namespace workloads

}  // namespace hcasim
