// hcasim --pcap DIR (docs/traces.md): one wire capture per cable that tshark dissects as
// InfiniBand. Each test runs the program, reads the capture itself (pcap with LINKTYPE_ERF,
// ERF type 21 records: header fields, timestamps in order, every packet's ICRC and VCRC
// checked by the model's own parser) and runs tshark on it: no malformed packet or error,
// and the opcodes, PSNs and QPNs tshark decodes are those the model sent (its own decoding
// of the bytes, its port counters, and what the workload implies: packets per message,
// consecutive PSNs). tshark must be installed (scripts/test.sh installs it): without it these
// tests fail, they do not skip.
#include <gtest/gtest.h>

#include "testbench/tests/hcasim_run.h"
#include "tlm_if/wire/ib_headers.h"
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

namespace fs = std::filesystem;
namespace wire = hcasim::wire;
using hcasim::test::result;
using hcasim::test::run_hcasim;
using hcasim::test::slurp;
using hcasim::test::tshark;

// Wireshark 4.0's RPC-over-RDMA and Mellanox EoIB payload heuristics throw on SEND payloads
// shorter than their own headers (a 2-byte send_lat message, a zero-length SEND with
// immediate) and mark those valid packets [Malformed Packet: RPCoRDMA] (docs/traces.md).
const char* const BUGGY_HEURISTICS =
    " --disable-heuristic rpcrdma_infiniband --disable-heuristic mellanox_eoib";

bool have_tshark() { return std::system("command -v tshark >/dev/null 2>&1") == 0; }

#define REQUIRE_TSHARK()                                                                           \
    ASSERT_TRUE(have_tshark()) << "tshark is not installed: these tests need it (scripts/test.sh " \
                                  "installs it; or apt-get install tshark)"

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> v;
    std::string cur;
    std::istringstream in(s);
    while (std::getline(in, cur, sep)) v.push_back(cur);
    if (!s.empty() && s.back() == sep) v.push_back("");
    return v;
}

uint32_t le32(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }

/// One captured packet as the file holds it, and the model's decoding of it.
struct frame {
    unsigned dir = 0;
    uint64_t ns = 0;  // pcap record time, ns
    std::vector<uint8_t> bytes;
    wire::headers h;
    size_t payload_len = 0;
};

/// The frames of a capture that went in direction `dir` (0: what the node sent), in order.
std::vector<const frame*> in_direction(const std::vector<frame>& frames, unsigned dir) {
    std::vector<const frame*> v;
    for (const frame& f : frames)
        if (f.dir == dir) v.push_back(&f);
    return v;
}

/// Reads a capture, checking the pcap and ERF framing, the time order and every packet's CRCs.
std::vector<frame> read_capture(const std::string& path) {
    std::vector<frame> frames;
    const std::string d = slurp(path);
    const auto* p = reinterpret_cast<const uint8_t*>(d.data());
    if (d.size() < 24) {
        ADD_FAILURE() << path << ": no pcap header";
        return frames;
    }
    EXPECT_EQ(le32(p), 0xa1b23c4du) << path << ": not a nanosecond pcap";
    EXPECT_EQ(le32(p + 20), 197u) << path << ": link type is not LINKTYPE_ERF";
    size_t off = 24;
    uint64_t last_ns = 0;
    while (off < d.size()) {
        if (d.size() - off < 32) {
            ADD_FAILURE() << path << ": truncated record at " << off;
            break;
        }
        frame f;
        const uint64_t sec = le32(p + off), nsec = le32(p + off + 4);
        const uint32_t incl = le32(p + off + 8), orig = le32(p + off + 12);
        EXPECT_EQ(incl, orig);
        EXPECT_LT(nsec, 1000000000u);
        f.ns = sec * 1000000000u + nsec;
        const uint8_t* erf = p + off + 16;
        // ERF: 32.32 fixed-point seconds, little-endian; the same time as the pcap record.
        const uint64_t erf_frac = le32(erf), erf_sec = le32(erf + 4);
        EXPECT_EQ(erf_sec, sec);
        const uint64_t erf_ns = (erf_frac * 1000000000u) >> 32;
        EXPECT_LE(nsec - erf_ns, 1u) << "ERF and pcap timestamps disagree";
        EXPECT_EQ(erf[8], 21) << "ERF type is not INFINIBAND";
        EXPECT_EQ(erf[9] & ~0x05, 0) << "ERF flags: only varying length and the interface (direction)";
        f.dir = erf[9] & 1;
        const uint16_t rlen = be16(erf + 10), wlen = be16(erf + 14);
        EXPECT_EQ(rlen, incl);
        EXPECT_EQ(rlen % 8, 0);
        EXPECT_GE(rlen, 16u + wlen);
        EXPECT_LE(off + 16 + incl, d.size());
        f.bytes.assign(erf + 16, erf + 16 + wlen);
        EXPECT_GE(f.ns, last_ns) << path << ": records out of time order";
        last_ns = f.ns;
        size_t poff = 0;
        const wire::parse_status st =
            wire::parse_packet(f.bytes.data(), f.bytes.size(), f.h, poff, f.payload_len, true);
        EXPECT_EQ(st, wire::parse_status::ok)
            << path << " frame " << frames.size() + 1 << ": " << wire::to_string(st) << " (CRCs checked)";
        frames.push_back(std::move(f));
        off += 16 + incl;
    }
    return frames;
}

/// tshark's decoding of a capture: per frame direction, opcode, PSN, destination QP, source QP.
struct decoded {
    unsigned dir = 0, opcode = 0, psn = 0, dest_qp = 0, slid = 0, dlid = 0;
    long src_qp = -1;  // DETH
};

std::vector<decoded> tshark_fields(const std::string& path) {
    std::vector<decoded> v;
    const std::string out = tshark(
        "-r '" + path + "'" + BUGGY_HEURISTICS +
        " -T fields -E separator=, -e erf.flags.cap -e infiniband.lrh.slid -e infiniband.lrh.dlid "
        "-e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.bth.destqp -e infiniband.deth.srcqp");
    for (const std::string& line : split(out, '\n')) {
        if (line.empty()) continue;
        const std::vector<std::string> f = split(line, ',');
        if (f.size() != 7 || f[3].empty()) {
            ADD_FAILURE() << path << ": tshark did not decode a BTH: '" << line << "'";
            continue;
        }
        decoded x;
        x.dir = unsigned(std::stoul(f[0], nullptr, 0));
        x.slid = unsigned(std::stoul(f[1], nullptr, 0));
        x.dlid = unsigned(std::stoul(f[2], nullptr, 0));
        x.opcode = unsigned(std::stoul(f[3], nullptr, 0));
        x.psn = unsigned(std::stoul(f[4], nullptr, 0));
        x.dest_qp = unsigned(std::stoul(f[5], nullptr, 0));
        if (!f[6].empty()) x.src_qp = long(std::stoul(f[6], nullptr, 0));
        v.push_back(x);
    }
    return v;
}

/// Frames tshark reports malformed or with an error-level expert item (with `extra` options).
std::string problems(const std::string& path, const std::string& extra = BUGGY_HEURISTICS) {
    return tshark("-r '" + path + "'" + extra + " -Y '_ws.malformed || _ws.expert.severity >= error'");
}

/// tshark and the model's parser agree on every packet, and tshark's text view says InfiniBand.
void expect_same_decoding(const std::string& path, const std::vector<frame>& frames,
                          const std::vector<decoded>& ts) {
    ASSERT_EQ(ts.size(), frames.size()) << path;
    for (size_t i = 0; i < frames.size(); ++i) {
        const wire::headers& h = frames[i].h;
        EXPECT_EQ(ts[i].dir, frames[i].dir) << "frame " << i + 1;
        EXPECT_EQ(ts[i].opcode, h.b.opcode) << "frame " << i + 1;
        EXPECT_EQ(ts[i].psn, h.b.psn) << "frame " << i + 1;
        EXPECT_EQ(ts[i].dest_qp, h.b.dest_qp) << "frame " << i + 1;
        EXPECT_EQ(ts[i].slid, h.l.slid) << "frame " << i + 1;
        EXPECT_EQ(ts[i].dlid, h.l.dlid) << "frame " << i + 1;
        if (ts[i].src_qp >= 0) {
            EXPECT_EQ(uint32_t(ts[i].src_qp), h.d.src_qp) << "frame " << i + 1;
        }
    }
    const std::string text = tshark("-r '" + path + "' -V -c 3");
    EXPECT_NE(text.find("InfiniBand\n    Local Route Header"), std::string::npos) << text.substr(0, 2000);
    EXPECT_NE(text.find("Base Transport Header"), std::string::npos);
    EXPECT_NE(text.find("Type: INFINIBAND (21)"), std::string::npos);
}

/// Fresh directories for one test's captures, removed when the test ends.
std::vector<std::string>& dirs_made() {
    static std::vector<std::string> d;
    return d;
}
struct remove_dirs : ::testing::EmptyTestEventListener {
    void OnTestEnd(const ::testing::TestInfo&) override {
        for (const std::string& d : dirs_made()) fs::remove_all(d);
        dirs_made().clear();
    }
};
const bool listener_added = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new remove_dirs);
    return true;
}();

std::string fresh_dir(const std::string& tag) {
    const std::string d = ::testing::TempDir() + "pcap_" + tag + "_" + std::to_string(getpid());
    fs::remove_all(d);
    dirs_made().push_back(d);
    return d;
}

/// Runs hcasim with --pcap DIR and --stats-json; returns the counters.
nlohmann::json run_captured(const std::string& args, const std::string& dir) {
    const std::string json_path = dir + ".json";
    const result r = run_hcasim(args + " --pcap '" + dir + "' --stats-json '" + json_path + "'", "pcap");
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find(" pcap: " + dir + "/link0.pcap ("), std::string::npos) << r.out;
    if (r.code != 0) return {};
    nlohmann::json j = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    return j;
}

uint64_t counter(const nlohmann::json& j, const std::string& key) {
    return j["counters"][key].get<uint64_t>();
}

bool psn_next(unsigned a, unsigned b) { return b == ((a + 1) & 0xFFFFFF); }

TEST(HcasimPcap, write_bw_matches_what_the_model_sent) {
    REQUIRE_TSHARK();
    const std::string dir = fresh_dir("write");
    const nlohmann::json j = run_captured("--workload write_bw --size 8K --iters 20", dir);
    ASSERT_FALSE(j.is_null());
    const std::string file = dir + "/link0.pcap";
    ASSERT_TRUE(fs::exists(file));
    EXPECT_EQ(std::vector<std::string>({file}), [&] {
        std::vector<std::string> v;
        for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().string());
        return v;
    }()) << "back to back: one cable, one file";
    const std::vector<frame> frames = read_capture(file);
    const std::vector<decoded> ts = tshark_fields(file);
    expect_same_decoding(file, frames, ts);
    EXPECT_EQ(problems(file, ""), "") << "no malformed packet even with every heuristic on";

    // What each port transmitted, by its counters: all of it is in the capture.
    size_t n0 = 0, n1 = 0;
    for (const decoded& d : ts) (d.dir == 0 ? n0 : n1)++;
    EXPECT_EQ(n0, counter(j, "node0.hca.port.tx_packets"));
    EXPECT_EQ(n1, counter(j, "node1.hca.port.tx_packets"));
    // node0: 20 messages of 8 KiB at MTU 4096: WRITE First (6) and Last (8), PSNs consecutive,
    // all to one QP of node1; node1 answers with ACKs (17) to one QP of node0.
    std::map<unsigned, unsigned> ops0;
    std::set<unsigned> qp0, qp1;
    const decoded* prev = nullptr;
    unsigned last_req_psn = 0, last_ack_psn = 0;
    for (const decoded& d : ts) {
        if (d.dir == 0) {
            ++ops0[d.opcode];
            qp1.insert(d.dest_qp);
            EXPECT_EQ(d.slid, 1u);
            EXPECT_EQ(d.dlid, 2u);
            if (prev) {
                EXPECT_TRUE(psn_next(prev->psn, d.psn)) << prev->psn << " then " << d.psn;
            }
            prev = &d;
            last_req_psn = d.psn;
        } else {
            EXPECT_EQ(d.opcode, 17u) << "node1 sends only ACKs";
            qp0.insert(d.dest_qp);
            EXPECT_GE(d.psn, last_ack_psn) << "ACK PSNs never go back";
            last_ack_psn = d.psn;
        }
    }
    EXPECT_EQ(ops0, (std::map<unsigned, unsigned>{{6, 20}, {8, 20}}));
    EXPECT_EQ(qp1.size(), 1u);
    EXPECT_EQ(qp0.size(), 1u);
    EXPECT_EQ(last_ack_psn, last_req_psn) << "the last ACK acknowledges the last packet";
}

TEST(HcasimPcap, read_bw_responses_follow_their_requests) {
    REQUIRE_TSHARK();
    const std::string dir = fresh_dir("read");
    const nlohmann::json j = run_captured("--workload read_bw --size 8K --iters 10", dir);
    ASSERT_FALSE(j.is_null());
    const std::string file = dir + "/link0.pcap";
    const std::vector<frame> frames = read_capture(file);
    const std::vector<decoded> ts = tshark_fields(file);
    expect_same_decoding(file, frames, ts);
    EXPECT_EQ(problems(file, ""), "");
    // Requests (12) from node0, each naming 8 KiB: two PSNs; responses First (13), Last (15).
    std::vector<unsigned> req, resp;
    std::set<unsigned> req_qps, resp_qps;
    for (const decoded& d : ts) {
        if (d.dir == 0) {
            EXPECT_EQ(d.opcode, 12u);
            req.push_back(d.psn);
            req_qps.insert(d.dest_qp);
        } else {
            EXPECT_TRUE(d.opcode == 13 || d.opcode == 15) << d.opcode;
            EXPECT_EQ(d.opcode, resp.size() % 2 == 0 ? 13u : 15u);
            resp.push_back(d.psn);
            resp_qps.insert(d.dest_qp);
        }
    }
    ASSERT_EQ(req.size(), 10u);
    ASSERT_EQ(resp.size(), 20u);
    EXPECT_EQ(req.size(), counter(j, "node0.hca.port.tx_packets"));
    EXPECT_EQ(resp.size(), counter(j, "node1.hca.port.tx_packets"));
    for (size_t i = 0; i < req.size(); ++i) {
        if (i) {
            EXPECT_EQ(req[i], (req[i - 1] + 2) & 0xFFFFFF) << "a request takes one PSN per response packet";
        }
        EXPECT_EQ(resp[2 * i], req[i]);
        EXPECT_TRUE(psn_next(resp[2 * i], resp[2 * i + 1]));
    }
    EXPECT_EQ(req_qps.size(), 1u);
    EXPECT_EQ(resp_qps.size(), 1u);
    EXPECT_NE(*req_qps.begin(), 0u);
}

TEST(HcasimPcap, ud_send_carries_deth_and_source_qp) {
    REQUIRE_TSHARK();
    const std::string dir = fresh_dir("ud");
    const nlohmann::json j = run_captured("--workload ud_send_bw --size 1K --iters 20", dir);
    ASSERT_FALSE(j.is_null());
    const std::string file = dir + "/link0.pcap";
    const std::vector<frame> frames = read_capture(file);
    const std::vector<decoded> ts = tshark_fields(file);
    expect_same_decoding(file, frames, ts);
    EXPECT_EQ(problems(file), "");
    std::map<unsigned, unsigned> ops;
    std::set<long> src;
    for (const decoded& d : ts) {
        EXPECT_EQ(d.dir, 0u) << "UD: only node0 sends";
        ++ops[d.opcode];
        EXPECT_GE(d.src_qp, 0) << "a UD packet carries a DETH";
        src.insert(d.src_qp);
    }
    // 20 SEND Only (0x64) datagrams of 1 KiB, then the end-of-stream SEND Only with Immediate (0x65).
    EXPECT_EQ(ops, (std::map<unsigned, unsigned>{{0x64, 20}, {0x65, 1}}));
    EXPECT_EQ(src.size(), 1u);
    EXPECT_EQ(ts.size(), counter(j, "node0.hca.port.tx_packets"));
    for (size_t i = 0; i < frames.size(); ++i)
        if (frames[i].h.b.opcode == 0x64) {
            EXPECT_EQ(frames[i].payload_len, 1024u);
        }
}

// rd_send_bw over two RD QPs and one EE context per node: every request carries an RDETH naming
// the far EE context and a DETH naming the sending QP; both QPs' messages share the EE context's
// one PSN sequence, one message at a time (the next starts after the ACK of the last), and node1
// acknowledges through its EE context (RD ACKNOWLEDGE, an RDETH too).
TEST(HcasimPcap, rd_send_shares_one_ee_context_and_its_psns_between_qps) {
    REQUIRE_TSHARK();
    const std::string dir = fresh_dir("rd");
    const nlohmann::json j = run_captured("--workload rd_send_bw --size 8K --iters 5 --qps 2", dir);
    ASSERT_FALSE(j.is_null());
    const std::string file = dir + "/link0.pcap";
    const std::vector<frame> frames = read_capture(file);
    const std::vector<decoded> ts = tshark_fields(file);
    // tshark 4.0 names the RD opcodes and agrees on the BTH, but reads the RDETH and DETH 8 bytes
    // late (its BTH item spans 20 bytes): its EE context and source QP are payload bytes. The
    // model's parser reads them where IBA puts them, straight after the BTH (docs/traces.md).
    ASSERT_EQ(ts.size(), frames.size());
    for (size_t i = 0; i < frames.size(); ++i) {
        EXPECT_EQ(ts[i].dir, frames[i].dir) << "frame " << i + 1;
        EXPECT_EQ(ts[i].opcode, frames[i].h.b.opcode) << "frame " << i + 1;
        EXPECT_EQ(ts[i].psn, frames[i].h.b.psn) << "frame " << i + 1;
        EXPECT_EQ(ts[i].dest_qp, frames[i].h.b.dest_qp) << "frame " << i + 1;
    }
    EXPECT_NE(tshark("-r '" + file + "' -V -c 1").find("Opcode: Reliable Datagram (RD) - SEND First (64)"),
              std::string::npos);
    EXPECT_EQ(problems(file), "");
    std::map<unsigned, unsigned> ops0, ops1;
    std::set<unsigned> dest_qps, src_qps, eec0, eec1;
    const frame* prev = nullptr;
    long acked = -1;  // the last PSN node1 has acknowledged so far (the frames are in time order)
    for (const frame& f : frames) {
        const wire::opcode_layout l = wire::layout_of(f.h.b.opcode);
        EXPECT_TRUE(l.rdeth) << "opcode " << unsigned(f.h.b.opcode) << ": RD packets carry an RDETH";
        if (f.dir == 0) {
            ++ops0[f.h.b.opcode];
            // A message starts only once the one before it on the EE context is acknowledged.
            if (prev && f.h.b.opcode == 0x40) {
                EXPECT_EQ(acked, long(prev->h.b.psn)) << "message at PSN " << f.h.b.psn << " started at "
                                                      << f.ns << " ns, before the ACK of the one before";
            }
            EXPECT_TRUE(l.deth) << "an RD request carries a DETH";
            dest_qps.insert(f.h.b.dest_qp);
            src_qps.insert(f.h.d.src_qp);
            eec0.insert(f.h.rd.ee_context);
            if (prev) {
                EXPECT_TRUE(psn_next(prev->h.b.psn, f.h.b.psn)) << prev->h.b.psn << " then " << f.h.b.psn;
            }
            prev = &f;
        } else {
            ++ops1[f.h.b.opcode];
            eec1.insert(f.h.rd.ee_context);
            acked = long(f.h.b.psn);
        }
    }
    // 10 messages of 8 KiB at MTU 4096: RD SEND First (0x40) and Last (0x42), two QPs on each side.
    EXPECT_EQ(ops0, (std::map<unsigned, unsigned>{{0x40, 10}, {0x42, 10}}));
    EXPECT_EQ(dest_qps.size(), 2u);
    EXPECT_EQ(src_qps.size(), 2u);
    EXPECT_EQ(eec0.size(), 1u) << "one EE context carries both QPs' messages";
    EXPECT_EQ(eec1.size(), 1u);
    ASSERT_EQ(ops1.size(), 1u);
    EXPECT_EQ(ops1.begin()->first, 0x51u) << "node1 sends RD ACKNOWLEDGE only";
    // The RDETH and the DETH at IBA's offsets: bytes 20..23 and 24..31 of a packet without GRH.
    const std::vector<uint8_t>& b = frames.front().bytes;
    ASSERT_GT(b.size(), 32u);
    EXPECT_EQ((uint32_t(b[21]) << 16) | (uint32_t(b[22]) << 8) | b[23], frames.front().h.rd.ee_context);
    EXPECT_EQ((uint32_t(b[24]) << 24) | (uint32_t(b[25]) << 16) | (uint32_t(b[26]) << 8) | b[27], 0x11111111u)
        << "the DETH's Q_Key: the workload's";
    EXPECT_EQ((uint32_t(b[29]) << 16) | (uint32_t(b[30]) << 8) | b[31], frames.front().h.d.src_qp);
}

// The packets Wireshark 4.0 calls malformed with its default heuristics are exactly the SEND
// packets whose payload is shorter than an RPC-over-RDMA header: valid packets (the model's
// parser accepts them, CRCs included) that its payload heuristics cannot handle.
TEST(HcasimPcap, only_short_send_payloads_trip_wireshark_heuristics) {
    REQUIRE_TSHARK();
    const std::string dir = fresh_dir("sendlat");
    const nlohmann::json j = run_captured("--workload send_lat --size 2 --iters 10", dir);
    ASSERT_FALSE(j.is_null());
    const std::string file = dir + "/link0.pcap";
    const std::vector<frame> frames = read_capture(file);
    expect_same_decoding(file, frames, tshark_fields(file));
    EXPECT_EQ(problems(file), "");
    const std::string numbers = tshark(
        "-r '" + file + "' -Y '_ws.malformed || _ws.expert.severity >= error' -T fields -e frame.number");
    size_t flagged = 0;
    for (const std::string& n : split(numbers, '\n')) {
        if (n.empty()) continue;
        ++flagged;
        const frame& f = frames.at(std::stoul(n) - 1);
        EXPECT_LT(f.payload_len, 28u) << "frame " << n;
        EXPECT_EQ(f.h.b.opcode & 0x1F, 4u) << "frame " << n << ": a SEND Only";
    }
    EXPECT_EQ(flagged, 20u) << "every 2-byte SEND of both directions";
}

TEST(HcasimPcap, two_runs_give_identical_captures_and_capture_changes_nothing) {
    REQUIRE_TSHARK();
    const std::string a = fresh_dir("det_a"), b = fresh_dir("det_b");
    // Faults too: their random streams are seeded, and a dropped packet is still captured.
    const std::string args = "--workload write_bw --size 4K --iters 200 --seed 7 --set link.drop_rate=0.02";
    nlohmann::json ja = run_captured(args, a), jb = run_captured(args, b);
    ASSERT_FALSE(ja.is_null());
    ASSERT_FALSE(jb.is_null());
    const std::string fa = slurp(a + "/link0.pcap"), fb = slurp(b + "/link0.pcap");
    EXPECT_GT(fa.size(), 200u * 4096u);
    EXPECT_TRUE(fa == fb) << "two runs with the same configuration and seed differ";
    const std::vector<frame> frames = read_capture(a + "/link0.pcap");
    size_t n0 = 0, n1 = 0;
    for (const frame& f : frames) (f.dir == 0 ? n0 : n1)++;
    EXPECT_EQ(n0, counter(ja, "node0.hca.port.tx_packets")) << "what node0 sent, dropped packets included";
    EXPECT_EQ(n1, counter(ja, "node1.hca.port.tx_packets"));
    EXPECT_GT(counter(ja, "node0.link.dropped"), 0u);
    EXPECT_GT(n0, 200u) << "retransmissions are on the wire too";

    // The same run without --pcap: the same results and counters (wall-clock times aside).
    const std::string json_path = a + "_nocap.json";
    const result r = run_hcasim(args + " --stats-json '" + json_path + "'", "pcap");
    ASSERT_EQ(r.code, 0) << r.err;
    nlohmann::json jn = nlohmann::json::parse(slurp(json_path));
    std::remove(json_path.c_str());
    for (nlohmann::json* x : {&ja, &jn}) {
        (*x)["sim"].erase("wall_s");
        (*x)["sim"].erase("traffic_wall_s");
        (*x)["sim"].erase("wire_packets_per_wall_s");
    }
    EXPECT_EQ(ja["results"], jn["results"]);
    EXPECT_EQ(ja["sim"], jn["sim"]);
    EXPECT_EQ(ja["counters"], jn["counters"]);
    EXPECT_EQ(ja["config"], jn["config"]);
}

TEST(HcasimPcap, switch_topology_has_one_file_per_cable) {
    REQUIRE_TSHARK();
    const std::string dir = fresh_dir("switch");
    const nlohmann::json j = run_captured(
        "--workload write_bw --size 4K --iters 10 --set fabric.nodes=3 --set fabric.subnet_manager=true",
        dir);
    ASSERT_FALSE(j.is_null());
    for (const char* f : {"link0.pcap", "link1.pcap", "link2.pcap", "link_sm.pcap"})
        EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
    const std::vector<frame> c0 = read_capture(dir + "/link0.pcap");
    const std::vector<frame> c1 = read_capture(dir + "/link1.pcap");
    EXPECT_TRUE(read_capture(dir + "/link2.pcap").empty()) << "node2 takes no part";
    EXPECT_EQ(problems(dir + "/link0.pcap", ""), "");
    EXPECT_EQ(problems(dir + "/link1.pcap", ""), "");
    expect_same_decoding(dir + "/link1.pcap", c1, tshark_fields(dir + "/link1.pcap"));
    // What node0 sends on its cable the switch sends on node1's, unchanged and later.
    const std::vector<const frame*> from0 = in_direction(c0, 0), to1 = in_direction(c1, 1);
    ASSERT_EQ(from0.size(), 10u);
    ASSERT_EQ(to1.size(), from0.size());
    for (size_t i = 0; i < from0.size(); ++i) {
        EXPECT_TRUE(from0[i]->bytes == to1[i]->bytes) << "packet " << i;
        EXPECT_GT(to1[i]->ns, from0[i]->ns) << "packet " << i;
    }
}

// C10-118: switches never alter a packet's P_Key. Through a two-level fat tree (leaf, spine,
// leaf) whose switches map SL 0 to VL 1 (the HCA ports send it on VL 0): every hop rewrites
// the LRH's VL and so the VCRC (checked by read_capture), and nothing else; the P_Key, the
// SL, the addresses and the payload reach node1 as node0 sent them.
TEST(HcasimPcap, C10_118_switches_never_alter_a_packets_pkey) {
    const std::string dir = fresh_dir("c10_118");
    const nlohmann::json j = run_captured(
        "--workload write_bw --size 4K --iters 10 --set fabric.topology=fat_tree --set fabric.nodes=2 "
        "--set fabric.switch.radix=2 --set fabric.subnet_manager=false --set link.data_vls=2 "
        "--set fabric.switch.data_vls=2 --set fabric.switch.sl2vl=1,0,1,0,1,0,1,0,1,0,1,0,1,0,1,0 "
        "--set hca.port.lazy_crc=false",
        dir);
    ASSERT_FALSE(j.is_null());
    EXPECT_EQ(j["counters"]["fabric.spine0.forwarded"], 20u) << "10 WRITEs and 10 ACKs cross the spine";
    const std::vector<frame> c0 = read_capture(dir + "/link0.pcap");
    const std::vector<frame> c1 = read_capture(dir + "/link1.pcap");
    const std::vector<const frame*> from0 = in_direction(c0, 0), to1 = in_direction(c1, 1);
    ASSERT_EQ(from0.size(), 10u);
    ASSERT_EQ(to1.size(), from0.size());
    for (size_t i = 0; i < from0.size(); ++i) {
        EXPECT_EQ(from0[i]->h.l.vl, 0) << "packet " << i;
        EXPECT_EQ(to1[i]->h.l.vl, 1) << "packet " << i << ": the last switch's SL-to-VL table";
        EXPECT_EQ(to1[i]->h.b.pkey, from0[i]->h.b.pkey) << "packet " << i;
        EXPECT_EQ(to1[i]->h.l.sl, from0[i]->h.l.sl) << "packet " << i;
        // Past the VL nibble every byte but the VCRC is the same.
        const std::vector<uint8_t>& a = from0[i]->bytes;
        const std::vector<uint8_t>& b = to1[i]->bytes;
        ASSERT_EQ(a.size(), b.size());
        EXPECT_TRUE(std::equal(a.begin() + 1, a.end() - 2, b.begin() + 1)) << "packet " << i;
        EXPECT_EQ(a[0] & 0x0F, b[0] & 0x0F);
    }
}

TEST(HcasimPcap, errors) {
    result r = run_hcasim("--workload write_bw --iters 2 --pcap /dev/null/x", "pcap");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --pcap: cannot create directory '/dev/null/x': Not a directory\n");
    r = run_hcasim("--workload dma_read_bw --pcap /tmp", "pcap");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(
        r.err,
        "hcasim: error: --pcap: dma_read_bw sends nothing over an InfiniBand cable (nothing to capture)\n");
    r = run_hcasim("--workload write_bw --sweep qps=1,2 --pcap /tmp", "pcap");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("--pcap captures one simulation"), std::string::npos) << r.err;
    r = run_hcasim("--workload write_bw --pcap ''", "pcap");
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --pcap: expected a directory\n");
}

// Issue 27: a capture is written whole or not at all.
TEST(HcasimPcap, pcap_on_a_full_disk_leaves_the_old_capture_and_exits_2) {
    HCASIM_SKIP_WHERE_ASAN_MISREADS_A_THROW_AFTER_THE_RUN();
    const std::string dir = hcasim::test::empty_dir("pcap_disk");
    const std::string f = dir + "/link0.pcap";
    std::ofstream(f) << "old";
    // 20 x 64 KiB on the wire; files stop growing at 64 KiB.
    const std::string args = "--workload write_bw --size 64K --iters 20 --pcap '" + dir + "'";
    const result r = run_hcasim(args, "pcap", hcasim::test::file_limit(64));
    EXPECT_EQ(r.code, 2);
    EXPECT_EQ(r.err, "hcasim: error: --pcap: cannot write '" + f + "': File too large\n");
    EXPECT_EQ(slurp(f), "old");
    EXPECT_EQ(hcasim::test::dir_entries(dir), std::vector<std::string>{"link0.pcap"});
    const result ok = run_hcasim(args, "pcap");
    ASSERT_EQ(ok.code, 0) << ok.err;
    EXPECT_GT(slurp(f).size(), 20u * 65536u);
    EXPECT_EQ(hcasim::test::dir_entries(dir), std::vector<std::string>{"link0.pcap"});
    fs::remove_all(dir);
}

}  // namespace
