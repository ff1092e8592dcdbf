#include "testbench/fuzz/port_bench.h"

#include <pthread.h>
#include <tlm>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/core/param.h"
#include "tlm_if/commands.h"

// AddressSanitizer's fiber interface (weak: null without ASan).
extern "C" {
void __sanitizer_start_switch_fiber(void** fake_stack_save, const void* bottom, size_t size)
    __attribute__((weak));
void __sanitizer_finish_switch_fiber(void* fake_stack_save, const void** bottom_old, size_t* size_old)
    __attribute__((weak));
}

namespace hcasim::fuzz {

using namespace sc_core;
using namespace hcasim::verbs;

namespace {
constexpr unsigned TARGET_NODE = 1;
constexpr uint16_t PEER_LID = 1;  // node0: has no QPs, so nothing answers the target
constexpr uint32_t PEER_QPN_BASE = 0x00F000;
constexpr uint16_t LIMITED_PKEY = 0x0123;  // P_Key table entry 1: a limited member
constexpr uint64_t SETTLE_NS = 20'000;     // after a restore: WQE fetch and the in-flight packets leave
constexpr uint32_t QP_WR = 16;             // send and receive queue depth of every QP
constexpr size_t RECV_SLICE = 64 * 1024;   // receive buffer bytes per QP
constexpr uint32_t PSN_MASK = 0xFFFFFF;

/// wr_id of the j-th work request posted to QP `index` in restore `generation`.
uint64_t make_wr_id(size_t index, uint32_t generation, unsigned j) {
    return uint64_t(index) << 48 | uint64_t(generation) << 16 | j;
}

std::string hex(uint64_t v) {
    char b[24];
    std::snprintf(b, sizeof b, "0x%llx", (unsigned long long)v);
    return b;
}

// SystemC 2.3.4 announces its coroutine switches to AddressSanitizer but gives no bounds for the
// main stack, so once an SC_THREAD has run, LeakSanitizer no longer scans the main thread's stack
// and reports what only the main stack references (libFuzzer's own locals) as leaks. The bench
// records the main stack's bounds before the first switch and hands them back to ASan after each
// sc_start.
struct stack_bounds {
    const void* bottom = nullptr;
    size_t size = 0;
};
stack_bounds main_stack;

void restore_main_stack() {
    if (!__sanitizer_start_switch_fiber || !__sanitizer_finish_switch_fiber || !main_stack.size) return;
    __sanitizer_start_switch_fiber(nullptr, main_stack.bottom, main_stack.size);
    __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
}

void record_main_stack() {
    if (!__sanitizer_start_switch_fiber || !__sanitizer_finish_switch_fiber) return;
    pthread_attr_t a;
    void* addr = nullptr;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        pthread_attr_getstack(&a, &addr, &size);
        pthread_attr_destroy(&a);
    }
    // A switch to the same stack: ASan reports the bounds it had (its view of the main stack).
    __sanitizer_start_switch_fiber(nullptr, addr, size);
    __sanitizer_finish_switch_fiber(nullptr, &main_stack.bottom, &main_stack.size);
    restore_main_stack();
}

std::vector<uint8_t> fill_pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = uint8_t(seed + i * 7 + (i >> 8));
    return v;
}
}  // namespace

/// The control process: setup once, then per input restore and inject.
class control_module : public sc_module {
public:
    SC_HAS_PROCESS(control_module);
    control_module(const sc_module_name& n, port_bench& b) : sc_module(n), b_(b) { SC_THREAD(run); }
    sc_event start;  ///< restore, then inject the input's packets
    sc_event check;  ///< the input has run: check what it left

private:
    void run() {
        b_.setup();
        b_.ready_ = true;
        b_.busy_ = false;
        for (;;) {
            wait(start);
            b_.prepare();
            b_.inject();
            b_.phase_ = "run";
            b_.busy_ = false;
            wait(check);
            b_.check();
            b_.phase_ = "idle";
            b_.busy_ = false;
        }
    }
    port_bench& b_;
};

const std::vector<qp_plan>& port_bench::plans() {
    // name, state, MTU, remote rights, receives, bytes each, sends, P_Key index, RNR timer, SQ PSN, RQ PSN
    constexpr sends N = sends::none, F = sends::inflight, B = sends::busy, T = sends::timed;
    static const std::vector<qp_plan> p = {
        {"reset", IBV_QPS_RESET, 256, true, 0, 1024, N, 0, 1, 0x000100, 0x000200},
        {"init", IBV_QPS_INIT, 256, true, 4, 1024, N, 0, 1, 0x000110, 0x000210},
        {"rtr", IBV_QPS_RTR, 256, true, 8, 1024, N, 0, 1, 0x000120, 0x000220},
        {"rts", IBV_QPS_RTS, 256, true, 8, 1024, F, 0, 1, 0x000130, 0x000230},
        {"rts_mtu4096", IBV_QPS_RTS, 4096, true, 4, 8192, N, 0, 1, 0x000140, 0x000240},
        {"rts_norecv", IBV_QPS_RTS, 256, true, 0, 1024, N, 0, 1, 0x000150, 0x000250},
        {"rts_noaccess", IBV_QPS_RTS, 256, false, 4, 1024, N, 0, 1, 0x000160, 0x000260},
        {"rts_pkey", IBV_QPS_RTS, 256, true, 4, 1024, N, 1, 1, 0x000170, 0x000270},
        {"rts_psnwrap", IBV_QPS_RTS, 256, true, 4, 1024, F, 0, 1, 0xFFFFFE, 0xFFFFFE},
        {"sqd", IBV_QPS_SQD, 256, true, 4, 1024, F, 0, 1, 0x000190, 0x000290},
        {"err", IBV_QPS_ERR, 256, true, 0, 1024, N, 0, 1, 0x0001A0, 0x0002A0},
        {"rts_busy", IBV_QPS_RTS, 256, true, 4, 1024, B, 0, 1, 0x0001B0, 0x0002B0},
        {"rts_timed", IBV_QPS_RTS, 256, true, 4, 1024, T, 0, 1, 0x0001C0, 0x0002C0},
    };
    return p;
}

port_bench::port_bench() {
    m_ = std::make_unique<machine>();
    sw_ = std::make_unique<host_software>(m_->at(TARGET_NODE).cpu, fw::driver_options{});
    ctl_ = std::make_unique<control_module>("fuzz_control", *this);
    broker::instance().check_unused();
}

port_bench::~port_bench() = default;

uint16_t port_bench::target_lid() const { return m_->at(TARGET_NODE).lid(); }

size_t port_bench::target_index(const std::string& name) const {
    for (size_t i = 0; i < targets_.size(); ++i)
        if (targets_[i].name == name) return i;
    fail("no target named " + name);
}

void port_bench::fail(const std::string& what) const {
    std::fflush(stdout);
    std::fprintf(stderr, "port_fuzz: FAILURE after %llu inputs at %s (phase %s): %s\n",
                 (unsigned long long)inputs_, sc_time_stamp().to_string().c_str(), phase_, what.c_str());
    std::fflush(stderr);
    std::abort();
}

void port_bench::start() {
    busy_ = true;
    phase_ = "setup";
    try {
        sc_start(sc_time(double(MAX_INPUT_SIM_NS), SC_NS), SC_EXIT_ON_STARVATION);
    } catch (const std::exception& e) {
        fail(std::string("SystemC error during setup: ") + e.what());
    }
    restore_main_stack();
    if (!ready_ || busy_) fail("setup did not finish");
}

// ---------------------------------------------------------------- control process

void port_bench::setup() {
    ctx_ = ibv_open_device(sw_->driver, sw_->as);
    if (!ctx_) fail("ibv_open_device: " + sw_->driver.last_error());
    if (ibv_query_device(ctx_, &dev_)) fail("ibv_query_device failed");
    const uint16_t limited = LIMITED_PKEY;
    if (sw_->driver.exec(hw::CMD_SET_PKEY, 1, 1, &limited, sizeof limited) != hw::CMD_OK)
        fail("SET_PKEY failed");
    pd_ = ibv_alloc_pd(ctx_);
    scq_ = ibv_create_cq(ctx_, 1024);
    rcq_ = ibv_create_cq(ctx_, 1024);
    if (!pd_ || !scq_ || !rcq_) fail("PD/CQ setup failed");
    full_access_ = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    if (dev_.atomic_cap != IBV_ATOMIC_NONE) full_access_ |= IBV_ACCESS_REMOTE_ATOMIC;

    auto make = [&](region& r, size_t len, int access, uint8_t seed) {
        r.len = len;
        r.va = sw_->as.alloc(len, 4096);
        if (!r.va) fail("out of memory");
        const std::vector<uint8_t> v = fill_pattern(len, seed);
        if (!sw_->as.write(r.va, v.data(), len)) fail("cannot fill a region: not mapped");
        r.mr = ibv_reg_mr(pd_, r.va, len, access);
        if (!r.mr) fail("ibv_reg_mr failed, errno " + std::to_string(errno));
    };
    make(rw_, 64 * 1024, int(full_access_), 0x11);
    make(ro_, 8 * 1024, IBV_ACCESS_REMOTE_READ, 0x22);
    make(local_, 8 * 1024, IBV_ACCESS_LOCAL_WRITE, 0x33);
    make(recv_, RECV_SLICE * plans().size(), IBV_ACCESS_LOCAL_WRITE, 0x44);
    make(src_, 16 * 1024, IBV_ACCESS_LOCAL_WRITE, 0x55);
    make(readbuf_, 8 * 1024, IBV_ACCESS_LOCAL_WRITE, 0x66);
    region stale;
    make(stale, 4096, int(full_access_), 0x77);
    stale_rkey_ = stale.mr->rkey;
    const mr_info stale_info{stale.va, stale.len, stale_rkey_};
    if (ibv_dereg_mr(stale.mr)) fail("ibv_dereg_mr failed");
    for (const region* r : {&rw_, &ro_, &local_, &recv_}) mrs_.push_back({r->va, r->len, r->mr->rkey});
    mrs_.push_back(stale_info);
    ro_image_ = fill_pattern(ro_.len, 0x22);
    local_image_ = fill_pattern(local_.len, 0x33);
    src_image_ = fill_pattern(src_.len, 0x55);

    ibv_qp_init_attr a{};
    a.send_cq = scq_;
    a.recv_cq = rcq_;
    a.qp_type = IBV_QPT_RC;
    a.cap.max_send_wr = QP_WR;
    a.cap.max_recv_wr = QP_WR;
    a.cap.max_send_sge = 2;
    a.cap.max_recv_sge = 2;
    qps_.resize(plans().size());
    for (size_t i = 0; i < plans().size(); ++i) {
        ibv_qp_init_attr ia = a;
        qps_[i].plan = &plans()[i];
        qps_[i].qp = ibv_create_qp(pd_, &ia);
        if (!qps_[i].qp) fail(std::string("ibv_create_qp failed for ") + plans()[i].name);
    }
    ibv_qp_init_attr ia = a;
    ibv_qp* gone = ibv_create_qp(pd_, &ia);
    if (!gone) fail("ibv_create_qp failed");
    const uint32_t destroyed_qpn = gone->qp_num;
    if (ibv_destroy_qp(gone)) fail("ibv_destroy_qp failed");

    for (size_t i = 0; i < qps_.size(); ++i) {
        const qp_plan& p = *qps_[i].plan;
        target t;
        t.name = p.name;
        t.qpn = qps_[i].qp->qp_num;
        t.pkey = p.pkey_index == 1 ? uint16_t(LIMITED_PKEY | 0x8000) : uint16_t(0xFFFF);
        t.mtu = p.mtu;
        t.live = &qps_[i];
        targets_.push_back(t);
    }
    const uint32_t num_qps = sw_->driver.num_qps();
    const std::pair<const char*, uint32_t> invalid[] = {{"qpn0", 0},
                                                        {"destroyed", destroyed_qpn},
                                                        {"unused", num_qps - 1},
                                                        {"beyond", num_qps},
                                                        {"qpn_max", PSN_MASK}};
    for (const auto& [name, qpn] : invalid) {
        target t;
        t.name = name;
        t.qpn = qpn;
        targets_.push_back(t);
    }
    tinfo_.resize(targets_.size());
    overruns_base_ = m_->at(TARGET_NODE).adapter.cqs.overruns.value();
    phase_ = "setup restore";
    prepare();  // every QP starts dirty
}

void port_bench::restore(live_qp& q) {
    const qp_plan& p = *q.plan;
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_RESET;
    if (int rc = ibv_modify_qp(q.qp, &attr, IBV_QP_STATE))
        fail(std::string("restore ") + p.name + ": modify to Reset failed (" + std::to_string(rc) + ")");
    ++q.generation;
    q.outstanding.clear();
    if (p.state == IBV_QPS_RESET) return;
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = p.pkey_index;
    attr.port_num = 1;
    attr.qp_access_flags = p.remote_access ? full_access_ : unsigned(IBV_ACCESS_LOCAL_WRITE);
    if (int rc =
            ibv_modify_qp(q.qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        fail(std::string("restore ") + p.name + ": modify to Init failed (" + std::to_string(rc) + ")");
    post_recvs(q);
    if (p.state == IBV_QPS_INIT) return;
    if (p.state == IBV_QPS_ERR) {
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_ERR;
        if (int rc = ibv_modify_qp(q.qp, &attr, IBV_QP_STATE))
            fail(std::string("restore ") + p.name + ": modify to Error failed (" + std::to_string(rc) + ")");
        return;
    }
    const size_t index = size_t(q.plan - plans().data());
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = ibv_mtu(__builtin_ctz(p.mtu) - 7);
    attr.dest_qp_num = PEER_QPN_BASE + uint32_t(index);
    attr.rq_psn = p.rq_psn;
    attr.max_dest_rd_atomic = uint8_t(std::min(dev_.max_qp_rd_atom, 4));
    attr.min_rnr_timer = p.min_rnr_timer;
    attr.ah_attr.dlid = PEER_LID;
    attr.ah_attr.port_num = 1;
    if (int rc = ibv_modify_qp(q.qp, &attr,
                               IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        fail(std::string("restore ") + p.name + ": modify to RTR failed (" + std::to_string(rc) + ")");
    if (p.state == IBV_QPS_RTR) return;
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = p.sq_psn;
    // IBA: timeout 0 = no local ACK timeout, so requests stay in flight until answered; the timed
    // QP waits 4.096 us x 2^5 = 131 us and gives up after 3 retries (2 for RNR NAKs).
    const bool timed = p.sends == sends::timed;
    attr.timeout = timed ? 5 : 0;
    attr.retry_cnt = timed ? 3 : 7;
    attr.rnr_retry = timed ? 2 : 7;
    attr.max_rd_atomic = uint8_t(std::min(dev_.max_qp_init_rd_atom, 4));
    if (int rc = ibv_modify_qp(q.qp, &attr,
                               IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
        fail(std::string("restore ") + p.name + ": modify to RTS failed (" + std::to_string(rc) + ")");
    if (p.sends == sends::inflight) post_inflight(q);
    if (p.state == IBV_QPS_SQD) {
        attr = ibv_qp_attr{};
        attr.qp_state = IBV_QPS_SQD;
        if (int rc = ibv_modify_qp(q.qp, &attr, IBV_QP_STATE))
            fail(std::string("restore ") + p.name + ": modify to SQD failed (" + std::to_string(rc) + ")");
    }
}

void port_bench::post_recvs(live_qp& q) {
    const qp_plan& p = *q.plan;
    const size_t index = size_t(q.plan - plans().data());
    const uint64_t base = recv_.va + index * RECV_SLICE;
    const uint32_t first = p.recv_bytes / 4;  // two SGEs: a quarter, then the rest
    for (unsigned j = 0; j < p.recvs; ++j) {
        const uint64_t va = base + uint64_t(j) * p.recv_bytes;
        ibv_sge sg[2] = {{va, first, recv_.mr->lkey}, {va + first, p.recv_bytes - first, recv_.mr->lkey}};
        ibv_recv_wr wr{};
        wr.wr_id = make_wr_id(index, q.generation, j);
        wr.sg_list = sg;
        wr.num_sge = 2;
        ibv_recv_wr* bad = nullptr;
        if (int rc = ibv_post_recv(q.qp, &wr, &bad))
            fail(std::string("restore ") + p.name + ": ibv_post_recv failed (" + std::to_string(rc) + ")");
        q.outstanding.push_back(wr.wr_id);
    }
}

void port_bench::post_inflight(live_qp& q) {
    const size_t index = size_t(q.plan - plans().data());
    // Requests towards the silent peer: a 3-packet SEND, an RDMA WRITE, then (where the HCA
    // offers them) an RDMA READ and an atomic, and an unsignaled SEND with immediate.
    struct req {
        ibv_wr_opcode op;
        uint32_t len;
        unsigned flags;
        bool optional;  // refused by an HCA without the feature: skipped
    };
    const req reqs[] = {{IBV_WR_SEND, 600, IBV_SEND_SIGNALED, false},
                        {IBV_WR_RDMA_WRITE, 100, IBV_SEND_SIGNALED, false},
                        {IBV_WR_RDMA_READ, 300, IBV_SEND_SIGNALED, true},
                        {IBV_WR_ATOMIC_FETCH_AND_ADD, 8, IBV_SEND_SIGNALED, true},
                        {IBV_WR_SEND_WITH_IMM, 16, 0, false}};
    unsigned j = 100;
    for (const req& r : reqs) {
        const bool to_local = r.op == IBV_WR_RDMA_READ || r.op == IBV_WR_ATOMIC_FETCH_AND_ADD;
        ibv_sge sg{to_local ? readbuf_.va + 1024 * (j - 100) : src_.va + 1024 * (j - 100), r.len,
                   to_local ? readbuf_.mr->lkey : src_.mr->lkey};
        ibv_send_wr wr{};
        wr.wr_id = make_wr_id(index, q.generation, j++);
        wr.sg_list = &sg;
        wr.num_sge = 1;
        wr.opcode = r.op;
        wr.send_flags = r.flags;
        wr.imm_data = 0xC0FFEE;
        wr.wr.rdma.remote_addr = 0x10000;
        wr.wr.rdma.rkey = 0x1234;
        wr.wr.atomic.remote_addr = 0x10000;
        wr.wr.atomic.rkey = 0x1234;
        wr.wr.atomic.compare_add = 1;
        ibv_send_wr* bad = nullptr;
        const int rc = ibv_post_send(q.qp, &wr, &bad);
        if (rc && !(r.optional && rc == EINVAL))
            fail(std::string("restore ") + q.plan->name + ": ibv_post_send failed (" + std::to_string(rc) +
                 ")");
        if (!rc) q.outstanding.push_back(wr.wr_id);
    }
}

void port_bench::post_busy(live_qp& q) {
    q.dirty = true;  // its PSNs move during the input: restored before the next one
    if (q.plan->sends == sends::timed) {
        post_inflight(q);
        return;
    }
    const size_t index = size_t(q.plan - plans().data());
    const std::pair<ibv_wr_opcode, uint32_t> reqs[] = {{IBV_WR_RDMA_WRITE, 32 * 1024}, {IBV_WR_SEND, 4096}};
    unsigned j = 200;
    for (const auto& [op, len] : reqs) {
        // Gather from the whole source buffer (16 KiB): the WRITE reads it twice (two SGEs).
        ibv_sge sg[2] = {{src_.va, std::min<uint32_t>(len, uint32_t(src_.len)), src_.mr->lkey},
                         {src_.va, len > src_.len ? len - uint32_t(src_.len) : 0, src_.mr->lkey}};
        ibv_send_wr wr{};
        wr.wr_id = make_wr_id(index, q.generation, j++);
        wr.sg_list = sg;
        wr.num_sge = len > src_.len ? 2 : 1;
        wr.opcode = op;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.wr.rdma.remote_addr = 0x20000;
        wr.wr.rdma.rkey = 0x1234;
        ibv_send_wr* bad = nullptr;
        if (int rc = ibv_post_send(q.qp, &wr, &bad))
            fail(std::string("busy ") + q.plan->name + ": ibv_post_send failed (" + std::to_string(rc) + ")");
        q.outstanding.push_back(wr.wr_id);
    }
}

void port_bench::drain_cqs() {
    sw_->driver.process_eq();
    for (ibv_cq* cq : {scq_, rcq_}) {
        ibv_wc wc[16];
        int n;
        while ((n = ibv_poll_cq(cq, 16, wc)) > 0) {
            for (int k = 0; k < n; ++k) {
                live_qp* q = nullptr;
                for (live_qp& c : qps_)
                    if (c.qp->qp_num == wc[k].qp_num) q = &c;
                if (!q)
                    fail("completion for QPN " + std::to_string(wc[k].qp_num) +
                         ", which the target does not own");
                q->dirty = true;
                auto it = std::find(q->outstanding.begin(), q->outstanding.end(), wc[k].wr_id);
                if (it == q->outstanding.end())
                    fail(std::string("completion on QP ") + q->plan->name + " for wr_id " + hex(wc[k].wr_id) +
                         " (status " + std::to_string(wc[k].status) + ", opcode " +
                         std::to_string(wc[k].opcode) +
                         "), which is not outstanding (never posted, or completed twice)");
                q->outstanding.erase(it);
            }
        }
        if (n < 0) fail("ibv_poll_cq returned " + std::to_string(n));
    }
    const uint64_t overruns = m_->at(TARGET_NODE).adapter.cqs.overruns.value();
    if (overruns != overruns_base_)
        fail("CQ overrun: the HCA wrote more completions than work requests were posted");
}

void port_bench::check_protected_memory() {
    // No remote write access: nothing a packet does may change these bytes.
    const std::pair<const region*, const std::vector<uint8_t>*> guarded[] = {
        {&ro_, &ro_image_}, {&local_, &local_image_}, {&src_, &src_image_}};
    std::vector<uint8_t> now;
    for (const auto& [r, image] : guarded) {
        now.resize(r->len);
        if (!sw_->as.read(r->va, now.data(), r->len)) fail("protected buffer unmapped");
        if (now != *image) {
            size_t at = 0;
            while (now[at] == (*image)[at]) ++at;
            fail("memory without remote write access changed: MR rkey " + hex(r->mr->rkey) + " offset " +
                 std::to_string(at));
        }
    }
}

void port_bench::check() {
    phase_ = "check";
    drain_cqs();
    check_protected_memory();
    transport_engine& eng = m_->at(TARGET_NODE).adapter.engine;
    for (live_qp& q : qps_) {
        uint32_t sq = 0, rq = 0;
        eng.current_psns(q.qp->qp_num, sq, rq);
        if (eng.state(q.qp->qp_num) != q.base_state || sq != q.base_sq_psn || rq != q.base_rq_psn)
            q.dirty = true;
        for (uint32_t t : touched_)
            if (t == q.qp->qp_num) q.dirty = true;
    }
    touched_.clear();
}

void port_bench::prepare() {
    transport_engine& eng = m_->at(TARGET_NODE).adapter.engine;
    bool any = false;
    phase_ = "restore";
    for (live_qp& q : qps_)
        if (q.dirty) {
            restore(q);
            any = true;
        }
    if (any) {
        phase_ = "settle";
        m_->at(TARGET_NODE).cpu.sleep_ns(SETTLE_NS);
        for (live_qp& q : qps_) q.dirty = false;
        drain_cqs();  // marks a QP that completed something while settling dirty again
        for (live_qp& q : qps_) {
            q.base_state = eng.state(q.qp->qp_num);
            eng.current_psns(q.qp->qp_num, q.base_sq_psn, q.base_rq_psn);
        }
    }
    // A busy or timed QP starts sending only if a record of this input targets it.
    for (size_t r = 0; r < n_records_; ++r) {
        live_qp* q = targets_[records_[r].sel % targets_.size()].live;
        if (q && (q->plan->sends == sends::busy || q->plan->sends == sends::timed) && !q->dirty)
            post_busy(*q);
    }
    for (size_t i = 0; i < targets_.size(); ++i) {
        const target& t = targets_[i];
        target_info& ti = tinfo_[i];
        ti.qpn = t.qpn;
        ti.lid = target_lid();
        ti.pkey = t.pkey;
        ti.mtu_bytes = t.mtu;
        ti.req_psn = t.live ? t.live->base_rq_psn : 0;
        ti.resp_psn = t.live ? t.live->plan->sq_psn : 0;
    }
}

void port_bench::inject() {
    phase_ = "inject";
    port& p = m_->at(TARGET_NODE).adapter.port0;
    tlm::tlm_generic_payload gp;
    for (size_t i = 0; i < n_records_; ++i) {
        const record& r = records_[i];
        if (const uint64_t gap = gap_ps(r.gap)) wait(sc_time(double(gap), SC_PS));
        const size_t t = r.sel % targets_.size();
        const size_t len = build_packet(r, tinfo_[t], mrs_.data(), mrs_.size(), wire_);
        touched_.push_back(dest_qp_of(wire_, len));
        gp.set_command(tlm::TLM_WRITE_COMMAND);
        gp.set_address(0);
        gp.set_data_ptr(wire_);
        gp.set_data_length(unsigned(len));
        gp.set_streaming_width(unsigned(len));
        gp.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
        sc_time delay = SC_ZERO_TIME;
        p.rx.get_base_export()->b_transport(gp, delay);  // the port copies the bytes: wire_ is free again
    }
}

// ---------------------------------------------------------------- one input

void port_bench::run_input(const uint8_t* data, size_t size) {
    if (!ready_) start();
    n_records_ = split_records(data, size, records_, MAX_RECORDS);
    ++inputs_;
    const sc_time t0 = sc_time_stamp();
    run_phase(ctl_->start);  // restore, inject, run until nothing is pending
    last_sim_ns_ = uint64_t((sc_time_stamp() - t0).to_seconds() * 1e9 + 0.5);
    run_phase(ctl_->check);  // what this input left, so a failure names this input
}

void port_bench::run_phase(sc_event& go) {
    busy_ = true;
    go.notify(SC_ZERO_TIME);
    try {
        sc_start(sc_time(double(MAX_INPUT_SIM_NS), SC_NS), SC_EXIT_ON_STARVATION);
    } catch (const std::exception& e) {
        fail(std::string("SystemC error: ") + e.what());
    }
    restore_main_stack();
    if (sc_pending_activity())
        fail("hang: events still pending after " + std::to_string(MAX_INPUT_SIM_NS) +
             " ns of simulated time");
    if (busy_) fail("the control process is blocked (nothing left to wake it)");
}

port_bench& bench() {
    static port_bench* b = [] {
        setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);
        record_main_stack();
        if (!std::getenv("HCASIM_FUZZ_VERBOSE")) {
            sc_report_handler::set_actions(SC_INFO, SC_DO_NOTHING);
            sc_report_handler::set_actions(SC_WARNING, SC_DO_NOTHING);
        }
        auto* p = new port_bench();  // lives for the whole process (SystemC cannot elaborate again)
        p->start();
        return p;
    }();
    return *b;
}

}  // namespace hcasim::fuzz
