// CQ writer stimulus dumps (model/hca/cq_stimulus.*, docs/cosim.md "Stimulus dumps"): every
// record kind through the writer and back through the reader, malformed lines refused with
// FILE:LINE, output errors named; then a dump of the TLM cq_writer under a random stream of
// operations replayed against the verilated RTL alone (testbench/tests/cq_replay.h): the
// reference build matches every write and answer, the broken build is stopped at the first
// wrong owner byte with the dump's FILE:LINE, and so is a dump edited by hand.
#include <gtest/gtest.h>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "Vcq_writer.h"
#include "Vcq_writer_broken.h"
#include "model/core/param.h"
#include "model/hca/cq_stimulus.h"
#include "model/hca/cq_writer.h"
#include "testbench/tests/cq_replay.h"
#include "testbench/tests/fixtures.h"
#include "testbench/tests/sim_fork.h"
#include "testbench/tests/unit_bench.h"
#include "tlm_if/contexts.h"
#include "tlm_if/cqe.h"

using namespace hcasim;
using namespace hcasim::test;
using sc_core::SC_NS;
using sc_core::SC_PS;
using sc_core::sc_time;

namespace {

std::string temp_file(const std::string& name) {
    return ::testing::TempDir() + "cq_stimulus_" + std::to_string(getpid()) + "_" + name;
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

hw::cqe random_cqe(std::mt19937& rng, uint8_t status = 0) {
    hw::cqe e;
    uint8_t* b = reinterpret_cast<uint8_t*>(&e);
    for (size_t i = 0; i < sizeof e; ++i) b[i] = uint8_t(rng());
    e.status = status;
    return e;
}

/// A dump's header and one record of every kind, as a writer writes them.
std::string header() { return std::string(cq_stimulus_magic) + "\n# unit node0.hca.cq_writer\n"; }

}  // namespace

TEST(CqStimulus, every_record_kind_round_trips_through_the_writer_and_the_reader) {
    const std::string path = temp_file("roundtrip.stim");
    std::mt19937 rng(4);
    const hw::cqe e = random_cqe(rng, hw::CQE_REM_ACCESS_ERR);
    uint8_t eqe[32];
    for (uint8_t& b : eqe) b = uint8_t(rng());
    const uint32_t msi_data = 0xC0DE0042;
    cq_rtl_answer a;
    {
        auto w = open_cq_stimulus(path, "node3.hca.cq_writer", sc_time(1250, SC_PS), 8);
        w->cq_context(sc_time(1, SC_NS), 1, 0x123456, 0xFEDCBA9876543210ull, 24, 0xBEEF, 0);
        w->cq_context(sc_time(2, SC_NS), 3, 7, 0x3000, 3, 0, 0xABCDEF);
        w->eq_context(sc_time(3, SC_NS), 15, 0x8000, 5);
        w->doorbell(sc_time(4, SC_NS), 7, 0xFFFFFF, 2);
        w->msi(sc_time(5, SC_NS), 0xE000, msi_data);
        w->complete(sc_time(6, SC_NS), 0xA5, 7, e, true);
        w->write(sc_time(16, SC_NS), 0x3040, &e, 64, false);
        w->write(sc_time(17, SC_NS), 0x8020, eqe, 32, true);
        w->write(sc_time(18, SC_NS), 0xE000, &msi_data, 4, false);
        a.tag = 0xA5;
        a.written = true;
        a.eqe = a.msi = a.disarmed = true;
        w->answer(sc_time(19, SC_NS), a);
        w->event(sc_time(20, SC_NS), 0xA6, hw::EQE_PORT_CHANGE, 0xDEADBEEF, hw::EQE_PORT_ACTIVE);
        a = {};
        a.tag = 0xA6;
        a.reason = CQR_NO_EQ;
        w->answer(sc_time(21, SC_NS), a);
        w->close();
        w->close();  // a second close does nothing
    }
    const cq_stimulus s = read_cq_stimulus(path);
    EXPECT_EQ(s.unit, "node3.hca.cq_writer");
    EXPECT_EQ(s.cqs, cq_writer_rtl::CQS);
    EXPECT_EQ(s.eqs, cq_writer_rtl::EQS);
    EXPECT_EQ(s.rtl_write_cycles, cq_writer_rtl::WRITE_CYCLES);
    EXPECT_EQ(s.clock_ps, 1250u);
    EXPECT_EQ(s.write_cycles, 8u);
    ASSERT_EQ(s.records.size(), 12u);
    std::string kinds;
    for (const cq_stim_record& r : s.records) kinds += r.kind;
    EXPECT_EQ(kinds, "QQVDMCWWWAEA");
    const auto& r = s.records;
    EXPECT_EQ(r[0].t_ps, 1000u);
    EXPECT_EQ(r[0].code, 1u);
    EXPECT_EQ(r[0].num, 0x123456u);
    EXPECT_EQ(r[0].addr, 0xFEDCBA9876543210ull);
    EXPECT_EQ(r[0].log_size, 24u);
    EXPECT_EQ(r[0].eqn, 0xBEEFu);
    EXPECT_EQ(r[1].code, 3u);
    EXPECT_EQ(r[1].value, 0xABCDEFu);
    EXPECT_EQ(r[1].log_size, 3u);
    EXPECT_EQ(r[2].num, 15u);
    EXPECT_EQ(r[2].addr, 0x8000u);
    EXPECT_EQ(r[2].log_size, 5u);
    EXPECT_EQ(r[3].num, 7u);
    EXPECT_EQ(r[3].value, 0xFFFFFFu);
    EXPECT_EQ(r[3].code, 2u);
    EXPECT_EQ(r[4].addr, 0xE000u);
    EXPECT_EQ(r[4].value, msi_data);
    EXPECT_EQ(r[5].tag, 0xA5u);
    EXPECT_EQ(r[5].num, 7u);
    EXPECT_TRUE(r[5].flag);
    EXPECT_EQ(std::memcmp(r[5].data, &e, 64), 0);
    EXPECT_EQ(r[6].addr, 0x3040u);
    EXPECT_EQ(r[6].len, 64u);
    EXPECT_FALSE(r[6].flag);
    EXPECT_EQ(std::memcmp(r[6].data, &e, 64), 0);
    EXPECT_EQ(r[7].len, 32u);
    EXPECT_TRUE(r[7].flag);
    EXPECT_EQ(std::memcmp(r[7].data, eqe, 32), 0);
    EXPECT_EQ(r[8].len, 4u);
    EXPECT_EQ(std::memcmp(r[8].data, &msi_data, 4), 0);
    EXPECT_TRUE(r[9].answer.written && r[9].answer.eqe && r[9].answer.msi && r[9].answer.disarmed);
    EXPECT_EQ(r[9].answer.tag, 0xA5u);
    EXPECT_EQ(r[10].tag, 0xA6u);
    EXPECT_EQ(r[10].code, hw::EQE_PORT_CHANGE);
    EXPECT_EQ(r[10].subtype, hw::EQE_PORT_ACTIVE);
    EXPECT_EQ(r[10].value, 0xDEADBEEFu);
    EXPECT_TRUE(r[11].answer == a);
    EXPECT_EQ(r[11].t_ps, 21000u);
    EXPECT_EQ(s.where(r[11]), path + ":" + std::to_string(r[11].line));
    // The text itself: a CQE is the pin's value, its last byte (the owner byte) first.
    const std::string text = slurp(path);
    char owner[3];
    std::snprintf(owner, sizeof owner, "%02x", e.owner);
    EXPECT_NE(text.find(std::string("C 6000 a5 000007 1 ") + owner), std::string::npos) << text;
    EXPECT_NE(text.find("W 18000 000000000000e000 04 0 c0de0042\n"), std::string::npos) << text;
    EXPECT_NE(text.find("A 21000 a6 0 4 0 0 0\n"), std::string::npos) << text;
    std::remove(path.c_str());
}

TEST(CqStimulus, inputs_reported_inside_a_transaction_are_written_after_its_answer_as_the_pins_take_them) {
    // impl=rtl: the cq_writer reports calls as they come, the transactor queues them and drives
    // each only when the unit is idle. The file keeps the pins' order.
    const std::string path = temp_file("order.stim");
    std::mt19937 rng(9);
    const hw::cqe e = random_cqe(rng);
    const uint32_t msi_data = 7;
    auto w = open_cq_stimulus(path, "node0.hca.cq_writer");
    auto answer = [](uint8_t tag) {
        cq_rtl_answer a;
        a.tag = tag;
        a.written = true;
        return a;
    };
    w->complete(sc_time(1, SC_NS), 1, 3, e, false);              // C1 taken
    w->doorbell(sc_time(2, SC_NS), 3, 1, 1);                     // queued behind C1
    w->complete(sc_time(3, SC_NS), 2, 3, e, false);              // queued
    w->msi(sc_time(4, SC_NS), 0xE000, msi_data);                 // queued behind C2
    w->write(sc_time(10, SC_NS), 0x1000, &e, 64, false);         // C1's CQE
    w->answer(sc_time(11, SC_NS), answer(1));                    // -> D, C2 go out
    w->write(sc_time(20, SC_NS), 0x1040, &e, 64, false);         // C2's CQE
    w->event(sc_time(21, SC_NS), 3, hw::EQE_PORT_CHANGE, 1, 0);  // queued behind C2
    w->answer(sc_time(22, SC_NS), answer(2));                    // -> M, E
    w->write(sc_time(30, SC_NS), 0x8000, &e, 32, false);         // E's EQE
    w->answer(sc_time(31, SC_NS), answer(3));
    w->complete(sc_time(40, SC_NS), 4, 3, e, false);  // never answered: the run ends
    w->doorbell(sc_time(41, SC_NS), 3, 2, 0);
    w->close();
    const cq_stimulus s = read_cq_stimulus(path);
    std::string order;
    for (const cq_stim_record& r : s.records)
        order += r.kind + std::to_string(r.kind == 'W' ? r.addr : r.tag) + " ";
    EXPECT_EQ(order, "C1 W4096 A1 D0 C2 W4160 A2 M0 E3 W32768 A3 C4 D0 ");
    EXPECT_NE(
        slurp(path).find("# the run ended before the answer to the last C or E above; held inputs follow\n"
                         "D 41000 000003 000002 0\n"),
        std::string::npos);
    std::remove(path.c_str());
}

TEST(CqStimulus, malformed_lines_are_refused_with_file_and_line) {
    const std::string path = temp_file("bad.stim");
    const std::string cqe(128, '0');
    struct bad_case {
        std::string line, error;  // the error after "FILE:3: "
    };
    const bad_case cases[] = {
        {"X 0 00", "unknown record 'X' (expected C, E, Q, V, D, M, W or A)"},
        {"CC 0 00", "unknown record 'CC' (expected C, E, Q, V, D, M, W or A)"},
        {"E 0 01 02 03", "5 fields, expected 6 (E time tag type subtype resource)"},
        {"E 10ns 01 02 03 04", "time '10ns' is not a decimal number of ps"},
        {"E 99999999999999999999 01 02 03 04", "time '99999999999999999999' is out of range"},
        {"E 0 0x1 02 03 04", "tag '0x1' is not a hex number (at most 16 digits, no 0x)"},
        {"E 0 100 02 03 04", "tag 0x100 does not fit its 8-bit pins"},
        {"C 0 01 1000000 0 " + cqe, "cqn 0x1000000 does not fit its 24-bit pins"},
        {"C 0 01 000001 2 " + cqe, "solicited '2': expected 0 or 1"},
        {"C 0 01 000001 0 " + cqe.substr(2), "cqe: expected 128 hex digits (64 bytes), got 126"},
        {"C 0 01 000001 0 " + cqe.substr(2) + "g0", "cqe: 'g0' at digit 127 is not hex"},
        {"Q 0 0 000001 0 00 0000 000000", "op 0: expected 1 (load), 2 (destroy) or 3 (resize)"},
        {"Q 0 1 000001 0 20 0000 000000", "log_size 0x20 does not fit its 5-bit pins"},
        {"D 0 000001 000000 3", "arm 3: expected 0 (none), 1 (next) or 2 (solicited)"},
        {"M 0 e000", "3 fields, expected 4 (M time addr data)"},
        {"W 0 1000 41 0 00", "len 41: expected 1 to 40 (hex: 64 bytes)"},
        {"W 0 1000 04 0 000000", "data: expected 8 hex digits (4 bytes), got 6"},
        {"A 0 01 1 2 0 0 0", "written 1 with reason 2: written is 1 exactly when the reason is 0"},
        {"A 0 01 0 6 0 0 0", "reason 6: expected 0 to 5"},
        {"A 0 01 0 1 0 0 x", "disarmed 'x': expected 0 or 1"},
    };
    for (const bad_case& c : cases) {
        spit(path, header() + c.line + "\n");
        EXPECT_EQ(error_of([&] { read_cq_stimulus(path); }), path + ":3: " + c.error) << c.line;
    }
    // A good line before a bad one: the bad one's number; comments and blank lines count.
    spit(path, header() + "\n# a comment\nM 5 e000 1\nV 7 0010 1000\n");
    EXPECT_EQ(error_of([&] { read_cq_stimulus(path); }),
              path + ":6: 4 fields, expected 5 (V time eqn base log_size)");
    spit(path, "# hcasim-stimulus cq_writer 2\nM 5 e000 1\n");
    EXPECT_EQ(error_of([&] { read_cq_stimulus(path); }),
              path + ":1: not a CQ writer stimulus dump of this version (expected the line '" +
                  std::string(cq_stimulus_magic) + "')");
    spit(path, "");
    EXPECT_EQ(error_of([&] { read_cq_stimulus(path); }),
              path + ":1: empty (expected the line '" + std::string(cq_stimulus_magic) + "')");
    std::remove(path.c_str());
    EXPECT_EQ(error_of([&] { read_cq_stimulus(path); }),
              path + ": cannot read the stimulus file: No such file or directory");
}

TEST(CqStimulus, an_unwritable_file_is_a_config_error_naming_it_and_nothing_partial_is_left) {
    EXPECT_EQ(error_of([] { open_cq_stimulus("/nonexistent-dir/cq.stim", "node0.hca.cq_writer"); }),
              "--dump-stimulus node0.hca.cq_writer: cannot write '/nonexistent-dir/cq.stim': No such file or "
              "directory");
    // A write error (a full disk) is reported when the dump is closed, naming the file.
    if (access("/dev/full", W_OK) == 0) {
        auto w = open_cq_stimulus("/dev/full", "node1.hca.cq_writer");
        w->msi(sc_time(1, SC_NS), 0xE000, 1);
        EXPECT_EQ(error_of([&] { w->close(); }),
                  "--dump-stimulus node1.hca.cq_writer: cannot write '/dev/full': No space left on device");
    }
    // A dump never closed (the run failed) leaves no file, not a partial one.
    const std::string path = temp_file("abandoned.stim");
    {
        auto w = open_cq_stimulus(path, "node0.hca.cq_writer");
        w->msi(sc_time(1, SC_NS), 0xE000, 1);
    }
    EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " exists";
}

TEST(CqStimulus, node_in_the_path_names_each_unit_and_two_units_on_one_file_are_refused) {
    EXPECT_EQ(cq_stimulus_per_node("cq.stim"), "cq.{node}.stim");
    EXPECT_EQ(cq_stimulus_per_node("out.d/cq.v1.stim"), "out.d/cq.v1.{node}.stim");
    EXPECT_EQ(cq_stimulus_per_node("out.d/cq"), "out.d/cq.{node}");
    EXPECT_EQ(cq_stimulus_per_node(".stim"), ".stim.{node}");
    const std::string pattern = temp_file("cq.{node}.stim");
    auto a = open_cq_stimulus(pattern, "node0.hca.cq_writer");
    auto b = open_cq_stimulus(pattern, "node1.hca.cq_writer");
    const std::string node0 = temp_file("cq.node0.stim");
    EXPECT_EQ(error_of([&] { open_cq_stimulus(node0, "node2.hca.cq_writer"); }),
              "--dump-stimulus: node0.hca.cq_writer and node2.hca.cq_writer would both write '" + node0 +
                  "' (put {node} in the path, or give each node its own file)");
    a->close();
    b->close();
    EXPECT_EQ(read_cq_stimulus(node0).unit, "node0.hca.cq_writer");
    EXPECT_EQ(read_cq_stimulus(temp_file("cq.node1.stim")).unit, "node1.hca.cq_writer");
    // Closed: the path is free again.
    open_cq_stimulus(node0, "node2.hca.cq_writer")->close();
    EXPECT_EQ(read_cq_stimulus(node0).unit, "node2.hca.cq_writer");
    std::remove(node0.c_str());
    std::remove(temp_file("cq.node1.stim").c_str());
}

// --- the TLM unit's dump, replayed against the RTL ----------------------------------------------

namespace {

constexpr uint64_t kMemBytes = 1 << 20;
constexpr uint64_t kFailFrom = 0xF0000, kFailTo = 0xF8000;
constexpr uint64_t kEqBase = 0x8000, kMsi = 0xE000;
constexpr unsigned kCqs = 8;

/// Between the TLM cq_writer's DMA port and its memory: reports every write and its response
/// to the stimulus writer, unless muted (resize's copy, which stays in the model).
class write_tap : public sc_core::sc_module {
public:
    tlm_utils::simple_target_socket<write_tap> in{"in"};
    tlm_utils::simple_initiator_socket<write_tap> out{"out"};
    cq_writer_probe* probe = nullptr;
    bool muted = false;

    explicit write_tap(const sc_core::sc_module_name& n) : sc_module(n) {
        in.register_b_transport(this, &write_tap::b_transport);
    }

private:
    void b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
        const sc_time at = sc_core::sc_time_stamp() + delay;
        out->b_transport(gp, delay);
        if (gp.is_write() && probe && !muted)
            probe->write(at, gp.get_address(), gp.get_data_ptr(), gp.get_data_length(), !gp.is_response_ok());
    }
};

/// The TLM cq_writer driven by a random stream of operations, each reported to the stimulus
/// writer as the cq_writer will report it: the input, the writes (through the tap), and the
/// answer made from complete()'s return, the counters and the CQ's context before and after.
struct tlm_bench {
    recording_memory mem{"mem", kMemBytes, sc_time(0, SC_NS)};
    recording_memory cqc_mem{"cqc_mem", 1 << 16, sc_time(0, SC_NS)};
    write_tap tap{"tap"};
    cq_writer tlm{"tlm_cq_writer", kBenchClock, 64, cq_writer_rtl::EQS};
    std::unique_ptr<cq_writer_probe> probe;
    std::vector<uint64_t> producer = std::vector<uint64_t>(kCqs);
    std::vector<uint32_t> consumer = std::vector<uint32_t>(kCqs);
    bool eq0 = false;
    uint8_t tag = 0;
    sc_time delay;

    explicit tlm_bench(const std::string& path) {
        tlm.dma.socket.bind(tap.in);
        tap.out.bind(mem.socket);
        tlm.cqc_dma.socket.bind(cqc_mem.socket);
        mem.fail_from = kFailFrom;
        mem.fail_to = kFailTo;
        probe = open_cq_stimulus(path, "node0.hca.cq_writer", kBenchClock, 8);
        tap.probe = probe.get();
    }
    sc_time now() const { return sc_core::sc_time_stamp() + delay; }
    /// Keeps the loosely timed caller in step now and then.
    void sync() {
        sc_core::wait(delay + sc_time(5, SC_NS));
        delay = sc_core::SC_ZERO_TIME;
    }

    void load_cq(uint32_t cqn, uint64_t base, unsigned log, unsigned eqn) {
        hw::cq_context c{};
        c.cqn = cqn;
        c.log_size = uint8_t(log);
        c.valid = 1;
        c.eqn = uint16_t(eqn);
        c.base = base;
        probe->cq_context(now(), 1, cqn, base, uint8_t(log), uint16_t(eqn), 0);
        tlm.load_cq(cqn, c);
        producer.at(cqn) = consumer.at(cqn) = 0;
    }
    void destroy_cq(uint32_t cqn) {
        probe->cq_context(now(), 2, cqn, 0, 0, 0, 0);
        tlm.destroy_cq(cqn);
    }
    void resize_cq(uint32_t cqn, uint64_t base, unsigned log, uint32_t cons) {
        tap.muted = true;  // the copy stays in the model: not at the RTL's pins
        const bool ok = tlm.resize_cq(cqn, base, uint8_t(log), cons, delay);
        tap.muted = false;
        if (ok) {
            probe->cq_context(now(), 3, cqn, base, uint8_t(log), 0, cons & 0xFFFFFF);
            consumer.at(cqn) = cons & 0xFFFFFF;
        }
    }
    void load_eq(uint32_t eqn, uint64_t base, unsigned log) {
        hw::eq_context e{};
        e.base = base;
        e.log_size = uint8_t(log);
        e.valid = 1;
        probe->eq_context(now(), eqn, base, uint8_t(log));
        tlm.load_eq(eqn, e);
        eq0 = eq0 || eqn == 0;
    }
    void doorbell(uint32_t cqn, uint32_t cons, hw::cq_arm arm) {
        probe->doorbell(now(), cqn, cons & 0xFFFFFF, uint8_t(arm));
        tlm.doorbell(cqn, cons, arm);
        if (cqn < kCqs && tlm.cq_valid(cqn)) consumer[cqn] = cons & 0xFFFFFF;
    }
    void set_msi(uint64_t addr, uint32_t data) {
        probe->msi(now(), addr, data);
        tlm.set_msi(addr, data);
    }
    cq_rtl_answer complete(uint32_t cqn, const hw::cqe& e, bool solicited) {
        cq_rtl_answer a;
        a.tag = ++tag;
        hw::cq_context before{}, after{};
        const bool valid = tlm.query_cq(cqn, before);
        const uint64_t events = tlm.events.value(), msis = tlm.msi_writes.value();
        probe->complete(now(), a.tag, cqn, e, solicited);
        hw::cqe copy = e;
        a.written = tlm.complete(cqn, copy, solicited, delay);
        if (!valid) {
            a.reason = CQR_NO_CQ;
        } else if (!a.written) {
            const bool full =
                before.overrun || ((before.producer - before.consumer) & 0xFFFFFF) >= (1u << before.log_size);
            a.reason = full ? CQR_OVERRUN : CQR_CQE_ERR;
        }
        a.eqe = tlm.events.value() > events;
        a.msi = tlm.msi_writes.value() > msis;
        a.disarmed = valid && before.arm != hw::CQ_ARM_NONE && tlm.query_cq(cqn, after) &&
                     after.arm == hw::CQ_ARM_NONE;
        probe->answer(now(), a);
        if (a.written && cqn < kCqs) ++producer[cqn];
        return a;
    }
    cq_rtl_answer post_event(uint8_t type, uint32_t resource, uint8_t subtype) {
        cq_rtl_answer a;
        a.tag = ++tag;
        const uint64_t events = tlm.events.value(), msis = tlm.msi_writes.value();
        probe->event(now(), a.tag, type, resource, subtype);
        tlm.post_event(type, resource, delay, subtype);
        a.written = a.eqe = tlm.events.value() > events;
        a.msi = tlm.msi_writes.value() > msis;
        a.reason = a.written ? CQR_WRITTEN : eq0 ? CQR_EQE_ERR : CQR_NO_EQ;
        probe->answer(now(), a);
        return a;
    }
};

struct stream_stats {
    unsigned written = 0, lost = 0, events = 0, disarmed = 0, reasons[8] = {};
};

/// `ops` random operations on 8 small CQs and 4 EQs (as CosimCqWriterRtl's random stream),
/// dumped to `path`. Run in a child process (one simulation per process).
void dump_random_stream(const std::string& path, unsigned ops, unsigned seed) {
    tlm_bench b(path);
    stream_stats st;
    run_bench(
        [&] {
            std::mt19937 rng(seed);
            std::uniform_int_distribution<unsigned> pick(0, 99), cq(0, kCqs - 1), small(0, 3);
            auto place = [&](uint32_t cqn) { return 0x20000 + cqn * 0x4000 + small(rng) * 0x1000; };
            ++st.reasons[b.post_event(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_ACTIVE).reason];  // no EQ 0: 4
            b.load_eq(0, kFailFrom, 2);  // EQ 0 outside host memory: 5
            ++st.reasons[b.post_event(hw::EQE_PORT_CHANGE, 1, hw::EQE_PORT_DOWN).reason];
            b.set_msi(kMsi, 0xC0DE0042);
            for (unsigned e = 0; e < 4; ++e) b.load_eq(e, kEqBase + e * 0x800, 2 + e);
            for (uint32_t c = 0; c < kCqs; ++c) b.load_cq(c, place(c), 1 + small(rng), small(rng));
            for (unsigned op = 0; op < ops; ++op) {
                const unsigned p = pick(rng);
                const uint32_t c = cq(rng);
                if (p < 50) {
                    const uint32_t target = pick(rng) < 2 ? (pick(rng) < 50 ? 40 : 1000) : c;  // unloaded CQs
                    const hw::cqe e = random_cqe(rng, pick(rng) < 10 ? hw::CQE_LOC_LEN_ERR : 0);
                    const cq_rtl_answer a = b.complete(target, e, pick(rng) < 30);
                    (a.written ? st.written : st.lost)++;
                    st.events += a.eqe;
                    st.disarmed += a.disarmed;
                    ++st.reasons[a.reason];
                } else if (p < 80) {
                    const uint32_t used = uint32_t(b.producer[c] - b.consumer[c]) & 0xFFFFFF;
                    const uint32_t take = pick(rng) < 50 ? used : used ? uint32_t(rng() % (used + 1)) : 0;
                    b.doorbell(c, b.consumer[c] + take, hw::cq_arm(pick(rng) % 3));
                } else if (p < 88) {
                    const cq_rtl_answer a =
                        b.post_event(uint8_t(1 + small(rng)), rng() & 0xFFFFFF, uint8_t(small(rng)));
                    st.events += a.eqe;
                    ++st.reasons[a.reason];
                } else if (p < 93) {
                    b.load_cq(c, pick(rng) < 5 ? kFailFrom + 0x1000 : place(c), 1 + small(rng), small(rng));
                } else if (p < 96) {
                    b.resize_cq(c, place(c), 1 + small(rng), b.consumer[c]);
                } else if (p < 97) {
                    b.destroy_cq(c);
                } else if (p < 98) {
                    b.load_eq(small(rng), pick(rng) < 10 ? kFailFrom : kEqBase + small(rng) * 0x800,
                              2 + small(rng));
                } else {
                    b.set_msi(pick(rng) < 20 ? 0 : kMsi + 4 * small(rng), uint32_t(rng()));
                }
                if (op % 16 == 0) b.sync();
            }
        },
        sc_time(1, sc_core::SC_SEC));
    b.probe->close();
    std::printf("dump: %u CQEs written, %u completions lost, %u EQEs, %u disarmed; reasons", st.written,
                st.lost, st.events, st.disarmed);
    for (unsigned r = 0; r < 6; ++r) std::printf(" %u:%u", r, st.reasons[r]);
    std::printf("\n");
    // The stream covers what the dump must carry: every reason, events, arming, wraps.
    EXPECT_GT(st.written, ops / 5);
    for (unsigned r = 0; r < 6; ++r) EXPECT_GT(st.reasons[r], 0u) << "reason " << r;
    EXPECT_GT(st.disarmed, ops / 50);
}

struct kinds {
    uint64_t inputs = 0, writes = 0, answers = 0;
};
kinds count(const cq_stimulus& s) {
    kinds k;
    for (const cq_stim_record& r : s.records)
        (r.kind == 'W' ? k.writes : r.kind == 'A' ? k.answers : k.inputs)++;
    return k;
}

}  // namespace

SIM_TEST(CosimCqStimulus, a_dump_of_the_tlm_cq_writer_replays_against_the_rtl_alone_and_matches) {
    const std::string path = temp_file("tlm.stim");
    run_forked([&] { dump_random_stream(path, 6000, 21); });
    ASSERT_FALSE(::testing::Test::HasFailure());
    // A bus that takes every write at once, then one that pushes back: the same writes and answers.
    for (unsigned ready : {100u, 35u})
        replay_forked<Vcq_writer>(path, ready, [&](const cq_stimulus& s, const cq_replay_result& r) {
            EXPECT_TRUE(r.ok()) << r.mismatch;
            const kinds k = count(s);
            EXPECT_EQ(r.inputs, k.inputs);
            EXPECT_EQ(r.writes, k.writes);
            EXPECT_EQ(r.answers, k.answers);
            EXPECT_GT(k.writes, 1500u);
            EXPECT_EQ(r.stalled_cycles > 0, ready < 100) << "back-pressure";
            std::printf("replay (mw_ready %u%%): %llu records, %llu writes, %llu answers, %llu cycles\n",
                        ready, (unsigned long long)s.records.size(), (unsigned long long)r.writes,
                        (unsigned long long)r.answers, (unsigned long long)r.cycles);
        });
    // An answer edited by hand: the replay names its line.
    const cq_stimulus s = read_cq_stimulus(path);
    const cq_stim_record* edited = nullptr;
    for (const cq_stim_record& r : s.records)
        if (r.kind == 'A' && r.answer.disarmed && r.line > 2000) {
            edited = &r;
            break;
        }
    ASSERT_NE(edited, nullptr);
    std::istringstream in(slurp(path));
    std::string out, line;
    for (unsigned n = 1; std::getline(in, line); ++n) {
        if (n == edited->line) {
            ASSERT_EQ(line.back(), '1');
            line.back() = '0';  // disarmed 1 -> 0
        }
        out += line + "\n";
    }
    const std::string edited_path = temp_file("edited.stim");
    spit(edited_path, out);
    replay_forked<Vcq_writer>(edited_path, 100, [&](const cq_stimulus& e, const cq_replay_result& r) {
        EXPECT_FALSE(r.ok());
        cq_rtl_answer want = edited->answer;
        want.disarmed = false;
        char tag[8];
        std::snprintf(tag, sizeof tag, "0x%x", unsigned(want.tag));
        EXPECT_EQ(r.mismatch, e.where(*edited) + ": the answers differ: dump tag " + tag + ", " + want.str() +
                                  "; RTL tag " + tag + ", " + edited->answer.str());
        std::printf("edited dump: %s\n", r.mismatch.c_str());
    });
    std::remove(edited_path.c_str());
    std::remove(path.c_str());
}

SIM_TEST(CosimCqStimulus, the_broken_rtl_fails_the_replay_at_the_first_wrong_owner_byte_with_file_and_line) {
    const std::string path = temp_file("tlm_broken.stim");
    run_forked([&] { dump_random_stream(path, 3000, 22); });
    ASSERT_FALSE(::testing::Test::HasFailure());
    replay_forked<Vcq_writer_broken>(path, 50, [&](const cq_stimulus& s, const cq_replay_result& r) {
        // Vcq_writer_broken writes owner bit 1 on every pass: the first CQE the TLM wrote with
        // owner bit 0 (the ring's second pass) is where it must stop.
        const cq_stim_record* first = nullptr;
        uint64_t cqes_before = 0;
        for (const cq_stim_record& w : s.records) {
            if (w.kind != 'W' || w.len != 64) continue;
            if (!(w.data[63] & hw::CQE_OWNER_BIT)) {
                first = &w;
                break;
            }
            ++cqes_before;
        }
        ASSERT_NE(first, nullptr) << "no ring wrapped in the dump";
        EXPECT_GT(cqes_before, 4u) << "CQEs before the first wrap replayed equal";
        EXPECT_FALSE(r.ok());
        char want[160];
        std::snprintf(want, sizeof want,
                      ": byte 63 of the 64-byte write to 0x%llx differs: dump 0x%x, RTL 0x%x",
                      (unsigned long long)first->addr, unsigned(first->data[63]),
                      unsigned(first->data[63] | hw::CQE_OWNER_BIT));
        EXPECT_EQ(r.mismatch, s.where(*first) + want);
        std::printf("broken build: %s\n", r.mismatch.c_str());
    });
    std::remove(path.c_str());
}

namespace {

/// Runs a command; its exit status and what it printed (stdout and stderr).

}  // namespace

SIM_TEST(CosimCqStimulus, a_systemverilog_testbench_reads_the_dump_with_sscanf_and_replays_it_on_the_rtl) {
    const std::string path = temp_file("sv.stim");
    run_forked([&] { dump_random_stream(path, 3000, 23); });
    ASSERT_FALSE(::testing::Test::HasFailure());
    const cq_stimulus s = read_cq_stimulus(path);
    const kinds k = count(s);
    // rtl/tb/cq_writer_replay.sv with rtl/cq_writer.sv: every record matches.
    std::string out;
    EXPECT_EQ(run_command(std::string(SV_REPLAY_REFERENCE) + " +stim=" + path, out), 0) << out;
    EXPECT_NE(
        out.find("cq_writer_replay: " + path + ": " + std::to_string(k.inputs) + " inputs, " +
                 std::to_string(k.writes) + " writes and " + std::to_string(k.answers) + " answers match"),
        std::string::npos)
        << out;
    // With the broken build: $fatal at the first CQE of a ring's second pass, the same line and
    // words as the SystemC replay (cq_replay.h).
    const cq_stim_record* first = nullptr;
    for (const cq_stim_record& w : s.records)
        if (w.kind == 'W' && w.len == 64 && !(w.data[63] & hw::CQE_OWNER_BIT)) {
            first = &w;
            break;
        }
    ASSERT_NE(first, nullptr);
    EXPECT_NE(run_command(std::string(SV_REPLAY_BROKEN) + " +stim=" + path, out), 0) << out;
    char want[160];
    std::snprintf(want, sizeof want, ": byte 63 of the 64-byte write to 0x%llx differs: dump 0x%x, RTL 0x%x",
                  (unsigned long long)first->addr, unsigned(first->data[63]),
                  unsigned(first->data[63] | hw::CQE_OWNER_BIT));
    EXPECT_NE(out.find(s.where(*first) + want), std::string::npos) << out;
    std::remove(path.c_str());
}

SIM_TEST(CosimCqStimulus, a_python_reader_parses_every_record_of_a_dump_and_writes_it_back_the_same) {
    if (!have_python3()) GTEST_SKIP() << "python3 not on the PATH";
    const std::string path = temp_file("py.stim");
    run_forked([&] { dump_random_stream(path, 2000, 24); });
    ASSERT_FALSE(::testing::Test::HasFailure());
    // testbench/cosim/cq_stimulus.py (for cocotb): each record to ints, then back in the
    // format's layout: the file's record lines exactly.
    std::string out;
    EXPECT_EQ(
        run_command("python3 " HCASIM_SOURCE_DIR "/testbench/cosim/cq_stimulus.py --canonical " + path, out),
        0)
        << out;
    std::istringstream in(slurp(path));
    std::string want, line;
    while (std::getline(in, line))
        if (!line.empty() && line[0] != '#') want += line + "\n";
    EXPECT_EQ(out, want);
    EXPECT_EQ(uint64_t(std::count(out.begin(), out.end(), '\n')), read_cq_stimulus(path).records.size());
    // A malformed line: FILE:LINE from it too.
    spit(path, std::string(cq_stimulus_magic) + "\n# x\nD 0 000001 zz 0\n");
    EXPECT_NE(
        run_command("python3 " HCASIM_SOURCE_DIR "/testbench/cosim/cq_stimulus.py --canonical " + path, out),
        0);
    EXPECT_NE(out.find(path + ":3: "), std::string::npos) << out;
    std::remove(path.c_str());
}
