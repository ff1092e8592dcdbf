// Reliable datagram in verbs-level traces (issue 33, traces/README.md): an application on the
// simulation issues RD verbs (domains, EE contexts, RD QPs, SENDs, WRITEs and READs through an
// EE context) and records them through trace::recorder as a workload does; `hcasim replay`
// re-issues the recording and finds the same outcome, and finds a changed one.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "testbench/replay/verbs_trace.h"
#include "testbench/tests/bench_harness.h"
#include "testbench/tests/hcasim_run.h"
#include "testbench/tests/sim_fork.h"

extern "C" int sc_main(int, char*[]) { return 0; }

using namespace hcasim;
using namespace hcasim::test;
using namespace hcasim::verbs;
using trace::json;

namespace {

constexpr uint32_t kQkey = 0x11112222;
constexpr uint64_t kBytes = 16384;

/// One node's recorded RD objects.
struct rd_node {
    uint64_t buf = 0;
    ibv_pd* pd = nullptr;
    ibv_mr* mr = nullptr;
    ibv_cq* cq = nullptr;
    ibv_rdd* rdd = nullptr;
    ibv_eec* eec = nullptr;
    std::vector<ibv_qp*> qps;
};

/// The application: issues the RD verbs on both nodes and records each call as a workload
/// does (the time it was issued, its arguments through the recorder's encoders, its outcome).
void record_rd(rc_harness& h, trace::recorder& rec) {
    rd_node d[2];
    auto now = [] { return sc_core::sc_time_stamp(); };
    for (unsigned i = 0; i < 2; ++i) {
        ibv_context* ctx = h.s[i].ctx;
        rd_node& n = d[i];
        auto t0 = now();
        n.buf = h.alloc(i, kBytes, 4096);
        rec.call(i, "alloc", {{"len", kBytes}, {"align", 4096}, {"ret", rec.add_buffer(i, n.buf, kBytes)}},
                 t0);
        t0 = now();
        ASSERT_TRUE(h.as(i).fill(n.buf, kBytes, uint8_t(0x30 + i)));
        rec.call(i, "fill", {{"buf", "buf0"}, {"seed", 0x30 + i}}, t0);
        t0 = now();
        n.pd = ibv_alloc_pd(ctx);
        rec.call(i, "alloc_pd", {{"ret", rec.add(i, n.pd, "pd")}}, t0);
        const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        t0 = now();
        n.mr = ibv_reg_mr(n.pd, n.buf, kBytes, access);
        ASSERT_NE(n.mr, nullptr);
        rec.add_mr(i, n.mr, "mr0");
        rec.call(i, "reg_mr",
                 {{"pd", "pd0"},
                  {"buf", "buf0"},
                  {"access", trace::access_flags(access)},
                  {"lkey", n.mr->lkey},
                  {"rkey", n.mr->rkey},
                  {"ret", "mr0"}},
                 t0);
        t0 = now();
        n.cq = ibv_create_cq(ctx, 64);
        rec.call(i, "create_cq", {{"cqe", 64}, {"ret", rec.add(i, n.cq, "cq")}}, t0);
        t0 = now();
        n.rdd = ibv_alloc_rdd(ctx);
        ASSERT_NE(n.rdd, nullptr) << "ibv_alloc_rdd, errno " << errno;
        rec.call(i, "alloc_rdd", {{"ret", rec.add(i, n.rdd, "rdd")}}, t0);
        t0 = now();
        n.eec = ibv_create_eec(n.rdd);
        ASSERT_NE(n.eec, nullptr) << "ibv_create_eec, errno " << errno;
        const std::string eec_name = rec.add(i, nullptr, "eec");
        rec.add_eec(i, n.eec, eec_name);
        rec.call(i, "create_eec", {{"rdd", rec.name_of(i, n.rdd)}, {"eecn", n.eec->eecn}, {"ret", eec_name}},
                 t0);
        for (unsigned q = 0; q < (i ? 2u : 1u); ++q) {
            ibv_qp_init_attr a{};
            a.send_cq = a.recv_cq = n.cq;
            a.qp_type = IBV_QPT_RD;
            a.rdd = n.rdd;
            a.cap.max_send_wr = a.cap.max_recv_wr = 16;
            a.cap.max_send_sge = a.cap.max_recv_sge = 1;
            t0 = now();
            ibv_qp* qp = ibv_create_qp(n.pd, &a);
            ASSERT_NE(qp, nullptr) << "RD QP, errno " << errno;
            const std::string name = rec.add(i, nullptr, "qp");
            rec.add_qp(i, qp, name);
            rec.call(i, "create_qp",
                     {{"pd", "pd0"},
                      {"type", trace::qp_type_name(a.qp_type)},
                      {"rdd", rec.name_of(i, n.rdd)},
                      {"send_cq", rec.name_of(i, n.cq)},
                      {"recv_cq", rec.name_of(i, n.cq)},
                      {"qp_num", qp->qp_num},
                      {"ret", name}},
                     t0);
            n.qps.push_back(qp);
            // Reset -> Init (with the Q_Key) -> RTR -> RTS.
            ibv_qp_attr m{};
            m.qp_state = IBV_QPS_INIT;
            m.port_num = 1;
            m.qkey = kQkey;
            m.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
            int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS;
            for (ibv_qp_state st : {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS}) {
                m.qp_state = st;
                t0 = now();
                const int rc = ibv_modify_qp(qp, &m, mask);
                EXPECT_EQ(rc, 0);
                rec.call(i, "modify_qp", {{"qp", name}, {"attr", rec.qp_attr(i, m, mask)}, {"ret", rc}}, t0);
                m = ibv_qp_attr{};
                mask = IBV_QP_STATE;
            }
        }
    }
    // The EE contexts, towards each other: Init, RTR (the peer's LID and EE context), RTS.
    const uint32_t psn[2] = {0x321, 0xABC};
    for (int step = 0; step < 3; ++step)
        for (unsigned i = 0; i < 2; ++i) {
            const unsigned p = 1 - i;
            ibv_eec_attr a{};
            int mask = IBV_QP_STATE;
            if (step == 0) {
                a.eec_state = IBV_QPS_INIT;
                a.port_num = 1;
                mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
            } else if (step == 1) {
                a.eec_state = IBV_QPS_RTR;
                a.path_mtu = IBV_MTU_1024;
                a.ah_attr.dlid = h.s[p].lid;
                a.ah_attr.port_num = 1;
                a.dest_eecn = d[p].eec->eecn;
                a.rq_psn = psn[p];
                a.max_dest_rd_atomic = 4;
                a.min_rnr_timer = 1;
                mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
            } else {
                a.eec_state = IBV_QPS_RTS;
                a.sq_psn = psn[i];
                a.timeout = 14;
                a.retry_cnt = 7;
                a.rnr_retry = 7;
                a.max_rd_atomic = 4;
                // An alternate path (the same LID: no LMC here) and Rearm (o10-23): the alt keys.
                a.alt_ah_attr.dlid = h.s[p].lid;
                a.alt_ah_attr.port_num = 1;
                a.alt_port_num = 1;
                a.alt_timeout = 15;
                a.path_mig_state = IBV_MIG_REARM;
                mask |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                        IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
            }
            const auto t0 = now();
            const int rc = ibv_modify_eec(d[i].eec, &a, mask);
            EXPECT_EQ(rc, 0) << "modify_eec node" << i << " step " << step;
            rec.call(i, "modify_eec",
                     {{"eec", rec.name_of(i, d[i].eec)}, {"attr", rec.eec_attr(i, a, mask)}, {"ret", rc}},
                     t0);
        }
    // Node 1: a receive on each QP; node 0: SEND, SEND with immediate, WRITE and READ through
    // its one EE context, one doorbell.
    for (unsigned q = 0; q < 2; ++q) {
        ibv_sge sge{d[1].buf + q * 4096, 4096, d[1].mr->lkey};
        ibv_recv_wr wr{};
        wr.wr_id = 100 + q;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        ibv_recv_wr* bad = nullptr;
        const auto t0 = now();
        const int rc = ibv_post_recv(d[1].qps[q], &wr, &bad);
        EXPECT_EQ(rc, 0);
        rec.call(1, "post_recv",
                 {{"qp", rec.name_of(1, d[1].qps[q])}, {"wr", rec.recv_wrs(1, &wr)}, {"ret", rc}}, t0);
    }
    ibv_sge sge[4] = {{d[0].buf, 700, d[0].mr->lkey},
                      {d[0].buf + 1024, 2500, d[0].mr->lkey},
                      {d[0].buf + 4096, 1800, d[0].mr->lkey},
                      {d[0].buf + 8192, 1200, d[0].mr->lkey}};
    const ibv_wr_opcode ops[4] = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ};
    ibv_send_wr wr[4] = {};
    for (unsigned k = 0; k < 4; ++k) {
        wr[k].wr_id = k + 1;
        wr[k].sg_list = &sge[k];
        wr[k].num_sge = 1;
        wr[k].opcode = ops[k];
        wr[k].send_flags = IBV_SEND_SIGNALED;
        wr[k].imm_data = 0xBEEF;
        wr[k].rd.eec = d[0].eec;
        wr[k].rd.remote_qpn = d[1].qps[k % 2]->qp_num;
        wr[k].rd.remote_qkey = kQkey;
        wr[k].wr.rdma.remote_addr = d[1].buf + 8192 + (k == 3 ? 4096 : 0);
        wr[k].wr.rdma.rkey = d[1].mr->rkey;
        wr[k].next = k + 1 < 4 ? &wr[k + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    auto t0 = now();
    const int rc = ibv_post_send(d[0].qps[0], wr, &bad);
    EXPECT_EQ(rc, 0);
    rec.call(0, "post_send", {{"qp", rec.name_of(0, d[0].qps[0])}, {"wr", rec.send_wrs(0, wr)}, {"ret", rc}},
             t0);
    for (unsigned i : {1u, 0u}) {
        t0 = now();
        const auto wcs = h.expect_wc(d[i].cq, i ? 2 : 4, "node" + std::to_string(i));
        json w = json::array();
        for (const ibv_wc& c : wcs) {
            EXPECT_EQ(c.status, IBV_WC_SUCCESS) << "node" << i << " wr_id " << c.wr_id;
            w.push_back(rec.wc(i, c));
        }
        rec.call(i, "poll_cq",
                 {{"cq", rec.name_of(i, d[i].cq)},
                  {"ret", wcs.size()},
                  {"wc", w},
                  {"t_done_ps", uint64_t(sc_core::sc_time_stamp().value())}},
                 t0);
    }
    for (unsigned i = 0; i < 2; ++i) {
        ibv_eec_attr a{};
        t0 = now();
        const int q = ibv_query_eec(d[i].eec, &a);
        EXPECT_EQ(q, 0);
        rec.call(i, "query_eec",
                 {{"eec", rec.name_of(i, d[i].eec)},
                  {"eec_state", trace::qp_state_name(a.eec_state)},
                  {"sq_psn", a.sq_psn},
                  {"rq_psn", a.rq_psn},
                  {"ret", q}},
                 t0);
    }
    // The domain stays while its QPs and EE context are in it (EBUSY), then goes.
    for (unsigned i = 0; i < 2; ++i) {
        auto dealloc = [&](int want) {
            const auto t = now();
            const int r = ibv_dealloc_rdd(d[i].rdd);
            EXPECT_EQ(r, want);
            rec.call(i, "dealloc_rdd", {{"rdd", "rdd0"}, {"ret", r}}, t);
        };
        dealloc(EBUSY);
        for (ibv_qp* qp : d[i].qps) {
            const std::string name = rec.name_of(i, qp);
            t0 = now();
            const int r = ibv_destroy_qp(qp);
            EXPECT_EQ(r, 0);
            rec.call(i, "destroy_qp", {{"qp", name}, {"ret", r}}, t0);
        }
        dealloc(EBUSY);
        t0 = now();
        const int r = ibv_destroy_eec(d[i].eec);
        EXPECT_EQ(r, 0);
        rec.call(i, "destroy_eec", {{"eec", "eec0"}, {"ret", r}}, t0);
        dealloc(0);
    }
    rec.end(
        [&](unsigned n, uint64_t addr, uint8_t* dst, uint64_t len) {
            const auto v = h.read_mem(n, addr, len);
            std::copy(v.begin(), v.end(), dst);
        },
        json::object());
}

/// The one line of `text` that holds `what` (empty if none).
std::string line_with(const std::string& text, const std::string& what) {
    const size_t at = text.find(what);
    if (at == std::string::npos) return "";
    const size_t b = text.rfind('\n', at) + 1, e = text.find('\n', at);
    return text.substr(b, e - b);
}

}  // namespace

SIM_TEST(HcasimReplayRd, rd_calls_recorded_through_the_recorder_replay_equal_and_a_change_diverges) {
    const std::string f = ::testing::TempDir() + "replay_rd_" + std::to_string(getpid()) + ".jsonl";
    rc_harness h;
    trace::recorder rec(f, 2, "test");
    rec.header(trace::effective_config(), 1, "rd_test");
    h.run([&](rc_harness& h) { record_rd(h, rec); });
    const std::string t = slurp(f);
    ASSERT_NE(t.find("\"end\""), std::string::npos) << "the recording was written";
    // The encoders: the EE contexts name each other, the work requests their EE context, their
    // destination QP on the peer's node and the Q_Key; an RD receive its source QP.
    EXPECT_NE(line_with(t, "\"eec_state\":\"RTR\"").find("\"dest_eec\":\"1/eec0\""), std::string::npos) << t;
    EXPECT_NE(line_with(t, "\"eec_state\":\"RTS\"").find("\"alt_timeout\":15"), std::string::npos) << t;
    EXPECT_NE(line_with(t, "\"eec_state\":\"RTS\"").find("\"path_mig_state\":\"REARM\""), std::string::npos)
        << t;
    EXPECT_NE(
        t.find("\"wr_id\":2,\"opcode\":\"SEND_WITH_IMM\",\"flags\":[\"SIGNALED\"],\"sg\":[{\"mr\":\"mr0\","
               "\"offset\":1024,\"len\":2500}],\"imm\":48879,\"eec\":\"eec0\",\"remote_qp\":\"1/qp1\","
               "\"remote_qkey\":286335522}"),
        std::string::npos)
        << line_with(t, "post_send");
    // The WRITE's and READ's remote region is node 1's, though node 0's own has the same
    // addresses and rkey.
    EXPECT_NE(
        t.find("\"remote\":{\"mr\":\"1/mr0\",\"offset\":8192},\"eec\":\"eec0\",\"remote_qp\":\"1/qp0\""),
        std::string::npos)
        << line_with(t, "post_send");
    EXPECT_NE(
        t.find("\"remote\":{\"mr\":\"1/mr0\",\"offset\":12288},\"eec\":\"eec0\",\"remote_qp\":\"1/qp1\""),
        std::string::npos)
        << line_with(t, "post_send");
    EXPECT_NE(
        t.find("{\"wr_id\":101,\"status\":\"SUCCESS\",\"opcode\":\"RECV\",\"byte_len\":2500,\"imm\":48879,"
               "\"qp\":\"qp1\",\"src_qp\":\"0/qp0\"}"),
        std::string::npos)
        << line_with(t, "\"wr_id\":101");
    EXPECT_NE(t.find("\"call\":\"dealloc_rdd\",\"rdd\":\"rdd0\",\"ret\":16}"), std::string::npos);
    // Replayed by hcasim: the same outcome.
    result r = run_hcasim("replay '" + f + "'", "rd_equal");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("equal to the recording"), std::string::npos) << r.out;
    // The SEND with immediate to qp0 instead, whose one receive the first SEND took: it is
    // refused (RNR, retried until the polls give up), and the completions differ.
    std::string changed = t;
    const std::string from = "\"imm\":48879,\"eec\":\"eec0\",\"remote_qp\":\"1/qp1\"";
    changed.replace(changed.find(from), from.size(),
                    "\"imm\":48879,\"eec\":\"eec0\",\"remote_qp\":\"1/qp0\"");
    std::ofstream(f, std::ios::binary | std::ios::trunc) << changed;
    r = run_hcasim("replay '" + f + "'", "rd_changed");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("first divergence: " + f), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("poll_cq node 1 cq0: completion 2 of 2 never came"), std::string::npos) << r.out;
    std::remove(f.c_str());
}

// An EE context's own error (IBV_EVENT_EEC_ERR, hcasim's) is recorded naming the EE context, and
// a trace holding one is read and compared: the replay, where no EE context fails, misses it.
SIM_TEST(HcasimReplayRd, an_eec_error_event_names_its_ee_context_and_replays_are_compared_with_it) {
    const std::string f = ::testing::TempDir() + "replay_rd_event_" + std::to_string(getpid()) + ".jsonl";
    rc_harness h;
    trace::recorder rec(f, 2, "test");
    json ev;
    h.run([&](rc_harness& h) {
        ibv_rdd* rdd = ibv_alloc_rdd(h.s[0].ctx);
        ASSERT_NE(rdd, nullptr);
        rec.call(0, "alloc_rdd", {{"ret", rec.add(0, rdd, "rdd")}});
        ibv_eec* e = ibv_create_eec(rdd);
        ASSERT_NE(e, nullptr);
        rec.add_eec(0, e, "eec0");
        rec.call(0, "create_eec", {{"rdd", "rdd0"}, {"ret", "eec0"}, {"eecn", e->eecn}});
        ibv_async_event a{};
        a.event_type = IBV_EVENT_EEC_ERR;
        a.element.eec = e;
        ev = rec.event(0, a);
    });
    EXPECT_EQ(ev["event"], "EEC_ERR");
    EXPECT_EQ(ev["eec"], "eec0");
    // A hand-written trace (no end record needed) with that event.
    std::ofstream(f, std::ios::binary | std::ios::trunc)
        << "{\"hcasim_trace\":1,\"nodes\":2}\n"
           "{\"node\":0,\"call\":\"alloc_rdd\",\"ret\":\"rdd0\"}\n"
           "{\"node\":0,\"call\":\"create_eec\",\"rdd\":\"rdd0\",\"ret\":\"eec0\"}\n"
           "{\"node\":0,\"event\":\"EEC_ERR\",\"eec\":\"eec0\"}\n";
    const result r = run_hcasim("replay '" + f + "'", "rd_event");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("node 0: 1 asynchronous events recorded, 0 in the replay"), std::string::npos)
        << r.out;
    std::remove(f.c_str());
}
