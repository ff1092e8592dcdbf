// The CQ writer's transactor (model/hca/cq_writer_rtl.*): the verilated rtl/cq_writer.sv behind
// TLM-level calls, its write master turned into DMA writes on a TLM socket, beside the TLM
// cq_writer on a second memory with the same latency. Answers, counters and the two host
// memories must agree; times follow docs/cosim.md. The same through the RTL built as a plug-in
// library (rtl/abi/hcasim_rtl.h).
#define SC_INCLUDE_DYNAMIC_PROCESSES  // sc_spawn
#include <gtest/gtest.h>

#include <systemc>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtkwave/fstapi.h"  // Verilator's copy of GTKWave's FST reader/writer
#include "model/hca/cq_writer.h"
#include "model/hca/cq_writer_rtl.h"
#include "model/hca/pkey_checker_rtl.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::sc_time;
using sc_core::sc_time_stamp;

namespace {

constexpr uint64_t kMemBytes = 1 << 20;
constexpr uint64_t kFailFrom = 0xF0000, kFailTo = 0xF8000;
const sc_time kLatency(100, SC_NS);  // every host memory access, both sides

struct answers final : cq_rtl_client {
    std::vector<cq_rtl_answer> got;
    std::vector<sc_time> at;  // when each came
    sc_core::sc_event ev;
    unsigned idles = 0;
    void rtl_answer(const cq_rtl_answer& a) override {
        got.push_back(a);
        at.push_back(sc_time_stamp());
        ev.notify();
    }
    void rtl_idle() override { ++idles; }
};

struct bench {
    answers client;
    recording_memory tlm_mem{"tlm_mem", kMemBytes, kLatency};
    recording_memory cqc_mem{"cqc_mem", 1 << 16, kLatency};
    recording_memory rtl_mem{"rtl_mem", kMemBytes, kLatency};
    cq_writer tlm{"tlm_cq_writer", kBenchClock, 64, cq_writer_rtl::EQS};
    cq_writer_rtl rtl;
    std::vector<uint64_t> producer = std::vector<uint64_t>(64);
    std::vector<uint32_t> consumer = std::vector<uint32_t>(64);
    std::vector<uint8_t> log_size = std::vector<uint8_t>(64);
    std::vector<uint64_t> base = std::vector<uint64_t>(64);
    uint8_t tag = 0;

    explicit bench(const std::string& variant = "reference", const std::string& rtl_lib = "",
                   const std::string& waves = "")
        : rtl("rtl", variant, rtl_lib, kBenchClock, waves, client) {
        tlm.dma.socket.bind(tlm_mem.socket);
        tlm.cqc_dma.socket.bind(cqc_mem.socket);
        rtl.dma.socket.bind(rtl_mem.socket);
        for (recording_memory* m : {&tlm_mem, &rtl_mem}) {
            m->fail_from = kFailFrom;
            m->fail_to = kFailTo;
        }
    }

    cq_rtl_answer wait_answer() {
        const size_t n = client.got.size();
        while (client.got.size() == n) sc_core::wait(client.ev);
        const cq_rtl_answer a = client.got.back();
        EXPECT_EQ(a.tag, tag) << "answers in request order";
        return a;
    }
    void load_cq(uint32_t cqn, uint64_t b, unsigned log, unsigned eqn) {
        hw::cq_context c{};
        c.log_size = uint8_t(log);
        c.eqn = uint16_t(eqn);
        c.base = b;
        tlm.load_cq(cqn, c);
        rtl.load_cq(cqn, b, uint8_t(log), uint16_t(eqn));
        producer.at(cqn) = 0;
        consumer.at(cqn) = 0;
        log_size.at(cqn) = uint8_t(log);
        base.at(cqn) = b;
    }
    void load_eq(uint32_t eqn, uint64_t b, unsigned log) {
        hw::eq_context e{};
        e.base = b;
        e.log_size = uint8_t(log);
        tlm.load_eq(eqn, e);
        rtl.load_eq(eqn, b, uint8_t(log));
    }
    void doorbell(uint32_t cqn, uint32_t cons, hw::cq_arm arm) {
        tlm.doorbell(cqn, cons, arm);
        rtl.doorbell(cqn, cons, arm);
        if (tlm.cq_valid(cqn)) consumer.at(cqn) = cons & 0xFFFFFF;
    }
    cq_rtl_answer complete(uint32_t cqn, const hw::cqe& e, bool solicited) {
        const uint64_t events = tlm.events, msis = tlm.msi_writes;
        sc_time delay = sc_core::SC_ZERO_TIME;
        hw::cqe t = e;
        const bool written = tlm.complete(cqn, t, solicited, delay);
        rtl.complete(++tag, cqn, e, solicited);
        const cq_rtl_answer a = wait_answer();
        EXPECT_EQ(a.written, written) << "CQ " << cqn << ": " << a.str();
        EXPECT_EQ(a.eqe, tlm.events > events) << a.str();
        EXPECT_EQ(a.msi, tlm.msi_writes > msis) << a.str();
        if (a.written) ++producer.at(cqn);
        return a;
    }
    cq_rtl_answer post_event(uint8_t type, uint32_t resource, uint8_t subtype) {
        const uint64_t events = tlm.events;
        sc_time delay = sc_core::SC_ZERO_TIME;
        tlm.post_event(type, resource, delay, subtype);
        rtl.post_event(++tag, type, resource, subtype);
        const cq_rtl_answer a = wait_answer();
        EXPECT_EQ(a.written, tlm.events > events) << a.str();
        return a;
    }
    /// The TLM decides and copies; the RTL side copies [consumer, producer) in its memory as the
    /// cq_writer will for impl=rtl, then writes the resize port.
    void resize_cq(uint32_t cqn, uint64_t nb, unsigned nlog, uint32_t cons) {
        sc_time delay = sc_core::SC_ZERO_TIME;
        if (!tlm.resize_cq(cqn, nb, uint8_t(nlog), cons, delay)) return;
        const uint64_t p = producer.at(cqn), moved = (p - cons) & 0xFFFFFF;
        std::vector<hw::cqe> buf(moved);
        for (uint64_t i = 0; i < moved; ++i)
            buf[i] = rtl_mem.get<hw::cqe>(base[cqn] + ((p - moved + i) & ((1u << log_size[cqn]) - 1)) * 64);
        for (uint64_t i = 0; i < moved; ++i) {
            buf[i].owner =
                uint8_t((buf[i].owner & ~hw::CQE_OWNER_BIT) | hw::cqe_owner_for(p - moved + i, nlog));
            rtl_mem.put(nb + ((p - moved + i) & ((1u << nlog) - 1)) * 64, buf[i]);
        }
        rtl.resize_cq(cqn, nb, uint8_t(nlog), cons);
        base[cqn] = nb;
        log_size[cqn] = uint8_t(nlog);
        consumer[cqn] = cons;
    }
    uint64_t differences() const {
        uint64_t n = 0;
        for (uint64_t a = 0; a < kMemBytes; ++a) n += tlm_mem.get<uint8_t>(a) != rtl_mem.get<uint8_t>(a);
        return n;
    }
};

hw::cqe random_cqe(std::mt19937& rng, uint8_t status = 0) {
    hw::cqe e;
    uint8_t* b = reinterpret_cast<uint8_t*>(&e);
    for (size_t i = 0; i < sizeof e; ++i) b[i] = uint8_t(rng());
    e.status = status;
    return e;
}

/// Random completions, doorbells, events, loads, resizes on 8 CQs; returns CQEs written.
unsigned random_stream(bench& b, unsigned ops, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<unsigned> pick(0, 99), cq(0, 7), small(0, 3);
    b.tlm.set_msi(0xE000, 0xC0DE);
    b.rtl.set_msi(0xE000, 0xC0DE);
    for (unsigned e = 0; e < 4; ++e) b.load_eq(e, 0x8000 + e * 0x800, 2 + e);
    auto place = [&](uint32_t c) { return 0x20000 + c * 0x4000 + small(rng) * 0x1000; };
    for (uint32_t c = 0; c < 8; ++c) b.load_cq(c, place(c), 1 + small(rng), small(rng));
    unsigned written = 0;
    for (unsigned op = 0; op < ops && !::testing::Test::HasFailure(); ++op) {
        const unsigned p = pick(rng);
        const uint32_t c = cq(rng);
        if (pick(rng) < 10)  // software is away: the clock stops, then restarts off its grid
            sc_core::wait(sc_time(10 + 7.3 * small(rng) + 3.1 * cq(rng), SC_NS));
        if (p < 50) {
            written +=
                b.complete(c, random_cqe(rng, pick(rng) < 10 ? hw::CQE_LOC_LEN_ERR : 0), pick(rng) < 30)
                    .written;
        } else if (p < 80) {
            const uint32_t used = uint32_t(b.producer[c] - b.consumer[c]);
            const uint32_t take = pick(rng) < 50 ? used : used ? uint32_t(rng() % (used + 1)) : 0;
            b.doorbell(c, b.consumer[c] + take, hw::cq_arm(pick(rng) % 3));
        } else if (p < 88) {
            b.post_event(uint8_t(1 + small(rng)), rng() & 0xFFFFFF, uint8_t(small(rng)));
        } else if (p < 93) {
            b.load_cq(c, pick(rng) < 5 ? kFailFrom + 0x1000 : place(c), 1 + small(rng), small(rng));
        } else if (p < 96) {
            b.resize_cq(c, place(c), 1 + small(rng), b.consumer[c]);
        } else {
            b.tlm.destroy_cq(c);
            b.rtl.destroy_cq(c);
        }
    }
    return written;
}

}  // namespace

SIM_TEST(CosimCqWriterTransactor, a_random_stream_through_the_transactor_equals_the_tlm_byte_for_byte) {
    bench b;
    run_bench(
        [&] {
            const unsigned written = random_stream(b, 5000, 21);
            sc_core::wait(sc_time(1, sc_core::SC_US));  // the last MSI write lands
            EXPECT_EQ(b.differences(), 0u);
            EXPECT_GT(written, 900u);
            EXPECT_EQ(b.tlm.cqes, written);
            EXPECT_GT(b.rtl.write_errors(), 0u);
            EXPECT_GT(b.client.idles, 100u) << "the clock stops between operations";
            std::printf("%u CQEs, %llu RTL writes (%llu failed), %llu RTL cycles\n", written,
                        (unsigned long long)b.rtl.writes(), (unsigned long long)b.rtl.write_errors(),
                        (unsigned long long)b.rtl.cycles());
        },
        sc_time(1, sc_core::SC_SEC));
}

SIM_TEST(CosimCqWriterTransactor,
         the_cqe_write_starts_write_cycles_plus_two_cycles_after_the_accepting_edge) {
    bench b;
    std::mt19937 rng(1);
    run_bench([&] {
        b.load_cq(3, 0x1000, 3, 0);
        sc_core::wait(sc_time(1, sc_core::SC_US));  // reset done, clock stopped
        const sc_time t0 = sc_time_stamp();         // on the clock grid: accepted at this edge
        sc_time delay = sc_core::SC_ZERO_TIME;
        hw::cqe e = random_cqe(rng);
        ASSERT_TRUE(b.tlm.complete(3, e, false, delay));
        b.rtl.complete(++b.tag, 3, random_cqe(rng), false);
        const cq_rtl_answer a = b.wait_answer();
        EXPECT_TRUE(a.written);
        const recording_memory::access& w = b.rtl_mem.log.back();
        EXPECT_TRUE(w.write && w.addr == 0x1000 && w.len == 64) << w;
        // Accepted at edge k = t0; mw_valid registered at k+1+8, taken at k+2+8: the DMA write
        // starts 10 cycles after t0 (the TLM's: write_cycles = 8 after its call, after the
        // context cache's miss read).
        EXPECT_EQ(w.at, t0 + kBenchClock * 10.0);
        // The response is driven at the first falling edge at or after the write's completion
        // and taken at the next rising edge; rsp_valid follows that edge and is seen half a
        // cycle later.
        const sc_time done = w.at + kLatency;
        const double falls = std::ceil((done - t0 - kBenchClock * 0.5) / kBenchClock);
        const sc_time fall = t0 + kBenchClock * (falls + 0.5);
        EXPECT_EQ(sc_time_stamp(), fall + kBenchClock * 1.0);
    });
}

SIM_TEST(CosimCqWriterTransactor, the_broken_build_behind_the_transactor_differs_after_a_wrap) {
    bench b("broken_owner");
    run_bench(
        [&] {
            random_stream(b, 2000, 21);
            sc_core::wait(sc_time(1, sc_core::SC_US));
            EXPECT_GT(b.differences(), 0u);
        },
        sc_time(1, sc_core::SC_SEC));
}

/// Two benches in one simulation, each under its own name.
struct named_bench : sc_core::sc_module {
    bench b;
    named_bench(sc_core::sc_module_name n, const std::string& rtl_lib)
        : sc_core::sc_module(n), b("reference", rtl_lib) {}
};

SIM_TEST(CosimCqWriterTransactor,
         the_reference_plugin_behind_the_transactor_equals_the_builtin_build_cycle_for_cycle) {
    // The same random stream into the built-in verilated build and into the reference RTL built
    // as a plug-in library (rtl/abi/hcasim_rtl.h), side by side.
    named_bench builtin("builtin", ""), plugin("plugin", HCASIM_RTL_CQ_WRITER_LIB);
    bool plugin_done = false;
    sc_core::sc_event plugin_end;
    sc_core::sc_spawn([&] {
        random_stream(plugin.b, 3000, 34);
        plugin_done = true;
        plugin_end.notify();
    });
    run_bench(
        [&] {
            const unsigned written = random_stream(builtin.b, 3000, 34);
            if (!plugin_done) sc_core::wait(plugin_end);
            sc_core::wait(sc_time(1, sc_core::SC_US));
            EXPECT_GT(written, 500u);
            EXPECT_EQ(plugin.b.differences(), 0u) << "the plug-in's memory equals the TLM's";
            EXPECT_TRUE(plugin.b.client.got == builtin.b.client.got) << "the same answers";
            EXPECT_TRUE(plugin.b.client.at == builtin.b.client.at) << "at the same times";
            EXPECT_EQ(plugin.b.rtl.cycles(), builtin.b.rtl.cycles());
            EXPECT_EQ(plugin.b.rtl.writes(), builtin.b.rtl.writes());
            EXPECT_EQ(plugin.b.rtl.write_errors(), builtin.b.rtl.write_errors());
            ASSERT_EQ(plugin.b.rtl_mem.log.size(), builtin.b.rtl_mem.log.size());
            for (size_t i = 0; i < builtin.b.rtl_mem.log.size(); ++i) {
                const recording_memory::access &p = plugin.b.rtl_mem.log[i], &q = builtin.b.rtl_mem.log[i];
                ASSERT_TRUE(p.at == q.at && p.addr == q.addr && p.len == q.len && p.write == q.write)
                    << "host memory access " << i << ": " << p << " vs " << q;
            }
        },
        sc_time(1, sc_core::SC_SEC));
}

SIM_TEST(CosimCqWriterTransactor, the_broken_plugin_behind_the_transactor_differs_after_a_wrap) {
    bench b("reference", HCASIM_RTL_CQ_WRITER_BROKEN_LIB);
    run_bench(
        [&] {
            random_stream(b, 2000, 21);
            sc_core::wait(sc_time(1, sc_core::SC_US));
            EXPECT_GT(b.differences(), 0u);
        },
        sc_time(1, sc_core::SC_SEC));
}

SIM_TEST(CosimCqWriterTransactor, waves_writes_its_pins_to_the_fst_file_it_shares_with_the_pkey_checker) {
    const std::string file =
        (std::filesystem::temp_directory_path() / ("hcasim_cqw_waves_" + std::to_string(getpid()) + ".fst"))
            .string();
    std::filesystem::remove(file);
    uint64_t cycles = 0;
    {
        struct no_verdicts final : pkey_rtl_client {
            void rtl_verdict(const pkey_verdict&) override {}
            void rtl_idle() override {}
        } pk_client;
        bench b("reference", "", file);
        pkey_checker_rtl pk("pk", "reference", "", kBenchClock, file, pk_client);
        EXPECT_EQ(b.rtl.waves_file(), file);
        run_bench(
            [&] {
                random_stream(b, 200, 5);
                pk.write_table(1, 3, 0x8001);
                sc_core::wait(sc_time(1, sc_core::SC_US));
                sc_core::sc_stop();  // end_of_simulation: the file is closed
            },
            sc_time(1, sc_core::SC_SEC));
        cycles = b.rtl.cycles();
    }
    void* r = fstReaderOpen(file.c_str());
    ASSERT_NE(r, nullptr) << file << " is no FST file";
    // Each unit's pins under its own scope.
    std::vector<std::string> scope, names;
    fstHandle clk = 0;
    while (fstHier* h = fstReaderIterateHier(r)) {
        if (h->htyp == FST_HT_SCOPE) {
            scope.emplace_back(h->u.scope.name, h->u.scope.name_length);
        } else if (h->htyp == FST_HT_UPSCOPE) {
            scope.pop_back();
        } else if (h->htyp == FST_HT_VAR) {
            std::string n(h->u.var.name, h->u.var.name_length);
            n = n.substr(0, n.find(' '));
            std::string path;
            for (const std::string& s : scope) path += s + ".";
            if (path.find("rtl.cq_writer.") != std::string::npos && n == "clk" && !clk) clk = h->u.var.handle;
            names.push_back(path + n);
        }
    }
    auto has = [&](const std::string& suffix) {
        return std::any_of(names.begin(), names.end(), [&](const std::string& n) {
            return n.size() >= suffix.size() &&
                   n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
        });
    };
    for (const char* pin : {"rtl.cq_writer.cq_writer.cmp_valid", "rtl.cq_writer.cq_writer.cmp_cqe",
                            "rtl.cq_writer.cq_writer.mw_valid", "rtl.cq_writer.cq_writer.mw_data",
                            "rtl.cq_writer.cq_writer.rsp_reason", "pk.pkey_checker.pkey_checker.req_pkey",
                            "pk.pkey_checker.pkey_checker.tbl_we"})
        EXPECT_TRUE(has(pin)) << pin << " not among " << ::testing::PrintToString(names);
    // The CQ writer's clock rises once per cycle its transactor ran: gated while idle.
    ASSERT_NE(clk, 0u);
    struct edges {
        uint64_t rising = 0;
    } e;
    fstReaderClrFacProcessMaskAll(r);
    fstReaderSetFacProcessMask(r, clk);
    fstReaderIterBlocks(
        r,
        [](void* user, uint64_t, fstHandle, const unsigned char* v) {
            if (v && v[0] == '1') ++static_cast<edges*>(user)->rising;
        },
        &e, nullptr);
    EXPECT_EQ(e.rising, cycles);
    EXPECT_GT(cycles, 200u);
    fstReaderClose(r);
    std::filesystem::remove(file);
}
