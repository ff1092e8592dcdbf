#include "testbench/attack/case_env.h"

namespace hcasim::attack {

env::env(bench& b, uint64_t seed) : b_(b), seed_(seed) {
    base = alloc(1, kLayout);
    tgt = base + kGuard;
    put(1, base, pattern(kLayout, seed));
    src = alloc(0, kBuf);
    put(0, src, pattern(kBuf, seed + 1));
    dst = alloc(0, kBuf);
    put(0, dst, pattern(kBuf, seed + 2));
    smr = reg(0, src, kBuf, LW | RR);
    dmr = reg(0, dst, kBuf, LW);
    rbuf = alloc(1, 8192);
}

uint64_t env::alloc(unsigned node, uint64_t bytes) {
    const uint64_t va = b_.sw[node]->as.alloc(bytes, 4096);
    if (!va) abort_case("node" + std::to_string(node) + ": out of virtual memory");
    return va;
}

void env::put(unsigned node, uint64_t va, const std::vector<uint8_t>& v) {
    if (!b_.sw[node]->as.write(va, v.data(), v.size())) abort_case("write to an unmapped address");
}

std::vector<uint8_t> env::get(unsigned node, uint64_t va, uint64_t n) {
    std::vector<uint8_t> v(n);
    if (!b_.sw[node]->as.read(va, v.data(), n)) abort_case("read of an unmapped address");
    return v;
}

uint64_t env::pa(unsigned node, uint64_t va) {
    uint64_t p = 0;
    if (!b_.sw[node]->as.translate(va, &p)) abort_case("no translation for a buffer");
    return p;
}

uint64_t env::word(unsigned node, uint64_t va) {
    uint64_t w = 0;
    const auto v = get(node, va, 8);
    std::memcpy(&w, v.data(), 8);
    return w;
}

ibv_mr* env::reg(unsigned node, uint64_t va, uint64_t len, int access, ibv_pd* p) {
    ibv_mr* mr = ibv_reg_mr(p ? p : b_.pd[node], va, len, access);
    if (!mr)
        abort_case("node" + std::to_string(node) + ": ibv_reg_mr failed, errno " + std::to_string(errno));
    mrs_[node].push_back(mr);
    return mr;
}

ibv_mr* env::mr1(int access, uint64_t va, uint64_t len, ibv_pd* p) {
    return reg(1, va ? va : tgt, len, access, p);
}

ibv_mr* env::shared1(ibv_mr* from, ibv_pd* p, int access, uint64_t iova) {
    ibv_mr* mr = ibv_reg_shared_mr(from, p, access, iova);
    if (!mr) abort_case("ibv_reg_shared_mr failed, errno " + std::to_string(errno));
    mrs_[1].push_back(mr);
    return mr;
}

ibv_mr* env::phys1(const ibv_phys_mr_attr& a, ibv_pd* p) {
    ibv_mr* mr = ibv_reg_phys_mr(p ? p : b_.pd[1], &a);
    if (!mr) abort_case("ibv_reg_phys_mr failed, errno " + std::to_string(errno));
    mrs_[1].push_back(mr);
    return mr;
}

ibv_mr* env::lkey1(uint32_t pages, ibv_pd* p) {
    ibv_mr* mr = ibv_alloc_lkey(p ? p : b_.pd[1], pages);
    if (!mr) abort_case("ibv_alloc_lkey failed, errno " + std::to_string(errno));
    mrs_[1].push_back(mr);
    return mr;
}

int env::dereg(ibv_mr* mr) {
    const int rc = ibv_dereg_mr(mr);
    if (rc == 0)
        for (auto& v : mrs_)
            for (auto it = v.begin(); it != v.end(); ++it)
                if (*it == mr) {
                    v.erase(it);
                    break;
                }
    return rc;
}

void env::must_dereg(ibv_mr* mr) {
    if (int rc = dereg(mr)) abort_case("ibv_dereg_mr failed: " + errno_name(rc));
}

ibv_mw* env::mw1(ibv_mw_type t, ibv_pd* p) {
    ibv_mw* mw = ibv_alloc_mw(p ? p : b_.pd[1], t);
    if (!mw) abort_case("ibv_alloc_mw failed, errno " + std::to_string(errno));
    mws_.push_back(mw);
    return mw;
}

void env::must_dealloc(ibv_mw* mw) {
    if (int rc = ibv_dealloc_mw(mw)) abort_case("ibv_dealloc_mw failed: " + errno_name(rc));
    for (auto it = mws_.begin(); it != mws_.end(); ++it)
        if (*it == mw) {
            mws_.erase(it);
            break;
        }
}

std::vector<uint64_t> env::pages1(uint64_t va, uint64_t len) {
    std::vector<uint64_t> p;
    if (int rc = ibv_map_pages(b_.ctx[1], va, len, &p)) abort_case("ibv_map_pages failed: " + errno_name(rc));
    mapped_.emplace_back(va, len);
    return p;
}

unsigned env::open(const pair_opts& o) {
    auto p = std::make_unique<qp_pair>();
    p->o = o;
    pairs_.push_back(std::move(p));
    qp_pair& q = *pairs_.back();
    for (unsigned i = 0; i < 2; ++i) {
        q.cq[i ? S1 : S0] = ibv_create_cq(b_.ctx[i], 16);
        q.cq[i ? R1 : R0] = ibv_create_cq(b_.ctx[i], 16);
        if (!q.cq[i ? S1 : S0] || !q.cq[i ? R1 : R0]) abort_case("ibv_create_cq failed");
        ibv_qp_init_attr a{};
        a.send_cq = q.cq[i ? S1 : S0];
        a.recv_cq = q.cq[i ? R1 : R0];
        a.qp_type = IBV_QPT_RC;
        a.cap.max_send_wr = 16;
        a.cap.max_recv_wr = 16;
        a.cap.max_send_sge = 2;
        a.cap.max_recv_sge = 2;
        a.create_flags = i ? o.create1 : o.create0;
        q.qp[i] = ibv_create_qp(i ? pd(1, o.pd2) : b_.pd[0], &a);
        if (!q.qp[i])
            abort_case("node" + std::to_string(i) + ": ibv_create_qp failed, errno " + std::to_string(errno));
    }
    for (unsigned i = 0; i < 2; ++i)
        if (int rc = connect(q, i))
            abort_case("node" + std::to_string(i) + ": modify_qp to RTS failed: " + errno_name(rc));
    return unsigned(pairs_.size() - 1);
}

qp_pair& env::p(unsigned k) {
    while (pairs_.size() <= k) open();
    return *pairs_[k];
}

void env::reconnect(unsigned k) {
    qp_pair& q = p(k);
    for (unsigned i = 0; i < 2; ++i) {
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_RESET;
        if (int rc = ibv_modify_qp(q.qp[i], &a, IBV_QP_STATE))
            abort_case("reset of node" + std::to_string(i) + "'s QP failed: " + errno_name(rc));
        q.recvs[i] = 0;
    }
    for (unsigned i = 0; i < 2; ++i)
        if (int rc = connect(q, i)) abort_case("reconnect failed: " + errno_name(rc));
    q.expect[0] = q.expect[1] = RTS;
}

uint32_t env::rbuf_lkey(unsigned k) {
    const bool second = p(k).o.pd2;
    ibv_mr*& m = rmr_[second];
    if (!m) m = reg(1, rbuf, 8192, LW, pd(1, second));
    return m->lkey;
}

std::vector<ibv_wc> env::wait(ibv_cq* cq, size_t n, uint64_t timeout_ns) {
    std::vector<ibv_wc> out;
    host_bus& bus = b_.bus(cq->context == b_.ctx[1] ? 1 : 0);
    const uint64_t deadline = bus.now_ns() + timeout_ns;
    while (out.size() < n) {
        ibv_wc wc[8];
        const int got = ibv_poll_cq(cq, int(std::min<size_t>(8, n - out.size())), wc);
        if (got < 0) abort_case("ibv_poll_cq returned " + std::to_string(got));
        out.insert(out.end(), wc, wc + got);
        if (got > 0) continue;
        const uint64_t now = bus.now_ns();
        if (now >= deadline || ibv_wait_cq(cq, deadline - now) != 0) break;
    }
    return out;
}

std::string env::stray_completion() {
    for (size_t k = 0; k < pairs_.size(); ++k)
        for (unsigned c = 0; c < 4; ++c) {
            ibv_wc wc{};
            if (ibv_poll_cq(pairs_[k]->cq[c], 1, &wc) > 0)
                return "unexpected completion on pair " + std::to_string(k) + "'s " + cq_names[c] + ": " +
                       status_name(wc.status) + " " + opcode_name(wc.opcode);
        }
    return "";
}

void env::collect_events() {
    for (unsigned i = 0; i < 2; ++i) {
        ibv_async_event ev;
        while (ibv_get_async_event(b_.ctx[i], &ev, 1) == 0) {
            ibv_ack_async_event(&ev);
            if (ev.event_type != IBV_EVENT_COMM_EST) events_[i].push_back(ev);
        }
    }
}

bool env::take_event(unsigned i, ibv_qp* qp, int type) {
    for (auto it = events_[i].begin(); it != events_[i].end(); ++it)
        if (it->event_type == type && it->element.qp == qp) {
            events_[i].erase(it);
            return true;
        }
    return false;
}

std::string env::event_on(unsigned i, ibv_qp* qp) {
    for (const auto& ev : events_[i])
        if (ev.element.qp == qp) return event_name(ev.event_type);
    return "";
}

std::string env::stray_event() {
    for (unsigned i = 0; i < 2; ++i)
        if (!events_[i].empty())
            return "unexpected async event " + event_name(events_[i].front().event_type) + " on node" +
                   std::to_string(i);
    return "";
}

ibv_qp_state env::state(ibv_qp* qp) {
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia)) return IBV_QPS_UNKNOWN;
    return a.qp_state;
}

ibv_send_wr env::remote_wr(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, ibv_sge* sge) {
    ibv_send_wr wr{};
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr_id = 0xA77AC4;
    const bool into_dst = op == IBV_WR_RDMA_READ || is_atomic(op);
    *sge = ibv_sge{into_dst ? dst : src, is_atomic(op) ? 8u : len, into_dst ? dmr->lkey : smr->lkey};
    wr.sg_list = sge;
    wr.num_sge = sge->length ? 1 : 0;
    wr.wr.rdma.remote_addr = va;
    wr.wr.rdma.rkey = rkey;
    wr.wr.atomic.remote_addr = va;
    wr.wr.atomic.rkey = rkey;
    wr.wr.atomic.compare_add = 1;
    wr.wr.atomic.swap = 0x5757575757575757ull;
    if (op == IBV_WR_SEND_WITH_INV) wr.invalidate_rkey = rkey;
    if (op == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = 0x1234;
    return wr;
}

int env::post(unsigned node, unsigned k, ibv_send_wr& wr) {
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(p(k).qp[node], &wr, &bad);
}

void env::recv1(std::vector<ibv_sge> sges, unsigned k) {
    ibv_recv_wr wr{};
    wr.wr_id = 0x2ECF;
    wr.sg_list = sges.data();
    wr.num_sge = int(sges.size());
    ibv_recv_wr* bad = nullptr;
    if (int rc = ibv_post_recv(p(k).qp[1], &wr, &bad)) abort_case("ibv_post_recv failed: " + errno_name(rc));
    ++p(k).recvs[1];
}

ibv_wc env::expect_ok(ibv_cq* cq, int opcode, const std::string& what) {
    auto v = wait(cq, 1, kWaitNs);
    if (v.empty()) abort_case(what + ": no completion");
    if (v[0].status != IBV_WC_SUCCESS)
        abort_case(what + ": " + status_name(v[0].status) + " (vendor_err " +
                   std::to_string(v[0].vendor_err) + ")");
    if (int(v[0].opcode) != opcode)
        abort_case(what + ": opcode " + opcode_name(v[0].opcode) + ", expected " + opcode_name(opcode));
    return v[0];
}

void env::expect_mem(unsigned node, uint64_t va, const std::vector<uint8_t>& want, const std::string& what) {
    const auto got = get(node, va, want.size());
    for (size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i]) abort_case(what + ": byte " + std::to_string(i) + " differs");
}

void env::ctl_write(uint32_t rkey, uint64_t va, uint32_t len, uint64_t land, unsigned k) {
    const auto data = pattern(len, seed_ * 31 + ++controls);
    put(0, src, data);
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(IBV_WR_RDMA_WRITE, va, len, rkey, &sge);
    if (int rc = post(0, k, wr)) abort_case("control WRITE: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[S0], IBV_WC_RDMA_WRITE, "control WRITE");
    if (len) expect_mem(1, land, data, "control WRITE data");
}

void env::ctl_read(uint32_t rkey, uint64_t va, uint32_t len, uint64_t from, unsigned k) {
    put(0, dst, std::vector<uint8_t>(len, 0xEE));
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(IBV_WR_RDMA_READ, va, len, rkey, &sge);
    if (int rc = post(0, k, wr)) abort_case("control READ: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[S0], IBV_WC_RDMA_READ, "control READ");
    expect_mem(0, dst, get(1, from, len), "control READ data");
}

void env::ctl_atomic(uint32_t rkey, uint64_t va, uint64_t land, unsigned k) {
    const uint64_t old = word(1, land);
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(IBV_WR_ATOMIC_FETCH_AND_ADD, va, 8, rkey, &sge);
    if (int rc = post(0, k, wr)) abort_case("control FETCH_ADD: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[S0], IBV_WC_FETCH_ADD, "control FETCH_ADD");
    if (word(0, dst) != old || word(1, land) != old + 1)
        abort_case("control FETCH_ADD: wrong result or memory");
}

void env::ctl_send(std::vector<ibv_sge> recv_sges, uint64_t land, unsigned k) {
    recv1(std::move(recv_sges), k);
    const auto data = pattern(64, seed_ * 37 + ++controls);
    put(0, src, data);
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(IBV_WR_SEND, 0, 64, 0, &sge);
    if (int rc = post(0, k, wr)) abort_case("control SEND: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[R1], IBV_WC_RECV, "control receive");
    --p(k).recvs[1];
    expect_ok(p(k).cq[S0], IBV_WC_SEND, "control SEND");
    expect_mem(1, land, data, "control SEND data");
}

void env::ctl_send_inv(uint32_t key, unsigned k) {
    recv1_spare(k);
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(IBV_WR_SEND_WITH_INV, 0, 64, key, &sge);
    if (int rc = post(0, k, wr)) abort_case("control SEND_WITH_INV: post failed: " + errno_name(rc));
    const ibv_wc r = expect_ok(p(k).cq[R1], IBV_WC_RECV, "control SEND_WITH_INV receive");
    --p(k).recvs[1];
    if (!(r.wc_flags & IBV_WC_WITH_INV) || r.imm_data != key)
        abort_case("control SEND_WITH_INV: receive without WITH_INV / the key");
    expect_ok(p(k).cq[S0], IBV_WC_SEND, "control SEND_WITH_INV");
}

uint32_t env::bind1(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access, unsigned k) {
    ibv_mw_bind b{};
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info = {mr, addr, len, access};
    if (int rc = ibv_bind_mw(p(k).qp[1], mw, &b))
        abort_case("control bind: ibv_bind_mw failed: " + errno_name(rc));
    expect_ok(p(k).cq[S1], IBV_WC_BIND_MW, "control bind");
    return mw->rkey;
}

ibv_send_wr env::bind2_wr(ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len,
                          unsigned access) {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = key_byte;
    wr.bind_mw.bind_info = {mr, addr, len, access};
    return wr;
}

uint32_t env::bind2(ibv_mw* mw, uint8_t key_byte, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access,
                    unsigned k) {
    ibv_send_wr wr = bind2_wr(mw, key_byte, mr, addr, len, access);
    if (int rc = post(1, k, wr)) abort_case("control bind WR: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[S1], IBV_WC_BIND_MW, "control bind WR");
    if (mw->rkey != hw::make_key(hw::key_index(mw->rkey), key_byte))
        abort_case("control bind WR: the R_Key does not carry the consumer's key byte");
    return mw->rkey;
}

ibv_send_wr env::local_inv_wr(uint32_t key) {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = key;
    return wr;
}

void env::local_inv(uint32_t key, unsigned k) {
    ibv_send_wr wr = local_inv_wr(key);
    if (int rc = post(1, k, wr)) abort_case("control LOCAL_INV: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[S1], IBV_WC_LOCAL_INV, "control LOCAL_INV");
}

ibv_send_wr env::fast_reg_wr(ibv_mr* mr, uint8_t key_byte, uint64_t iova, uint64_t len, int access,
                             const std::vector<uint64_t>& pages, uint32_t page_offset) {
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_FAST_REG_MR;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.fast_reg.mr = mr;
    wr.fast_reg.key_byte = key_byte;
    wr.fast_reg.iova = iova;
    wr.fast_reg.length = len;
    wr.fast_reg.access = access;
    wr.fast_reg.page_list = pages.data();
    wr.fast_reg.page_count = uint32_t(pages.size());
    wr.fast_reg.page_offset = page_offset;
    wr.fast_reg.log_page_size = 12;
    return wr;
}

uint32_t env::fast_reg(ibv_mr* mr, uint8_t key_byte, uint64_t iova, uint64_t len, int access,
                       const std::vector<uint64_t>& pages, unsigned k) {
    ibv_send_wr wr = fast_reg_wr(mr, key_byte, iova, len, access, pages);
    if (int rc = post(1, k, wr)) abort_case("control FAST_REG: post failed: " + errno_name(rc));
    expect_ok(p(k).cq[S1], IBV_WC_FAST_REG_MR, "control FAST_REG");
    if (hw::key_byte(mr->rkey) != key_byte)
        abort_case("control FAST_REG: the R_Key does not carry the consumer's key byte");
    return mr->rkey;
}

void env::snapshot() {
    if (snapped_) return;
    snapped_ = true;
    if (watch_layout) {
        watch(1, base, kLayout);
        watch(0, dst, kBuf);
    }
    for (area& a : areas_) a.before = get(a.node, a.va, a.len);
}

uint64_t env::changed(std::string* where) {
    uint64_t n = 0;
    for (const area& a : areas_) {
        const auto now = get(a.node, a.va, a.len);
        for (uint64_t i = 0; i < a.len; ++i)
            if (now[i] != a.before[i]) {
                if (!n && where)
                    *where = "node" + std::to_string(a.node) + " byte at offset " + std::to_string(i) +
                             " of a watched range changed";
                ++n;
            }
    }
    return n;
}

void env::remote(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, unsigned k) {
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(op, va, len, rkey, &sge);
    attack_post(0, k, wr);
}

void env::attack_post(unsigned node, unsigned k, ibv_send_wr& wr) {
    p(k);
    snapshot();
    fresh_source();
    mark(k, wc_op_of(wr.opcode));
    attack_rc = post(node, k, wr);
}

void env::attack_bind1(ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len, unsigned access, unsigned k) {
    p(k);
    snapshot();
    mark(k, IBV_WC_BIND_MW);
    ibv_mw_bind b{};
    b.send_flags = IBV_SEND_SIGNALED;
    b.bind_info = {mr, addr, len, access};
    attack_rc = ibv_bind_mw(p(k).qp[1], mw, &b);
}

void env::attack_verb(const std::function<int()>& verb, unsigned k) {
    p(k);
    snapshot();
    mark(k, OP_ANY);
    attack_rc = verb();
}

void env::probe_fault(ibv_wr_opcode op, uint64_t va, uint32_t len, uint32_t rkey, unsigned k) {
    qp_pair& q = p(k);
    for (area& a : areas_) a.before = get(a.node, a.va, a.len);
    fresh_source();
    ibv_sge sge;
    ibv_send_wr wr = remote_wr(op, va, len, rkey, &sge);
    if (int rc = post(0, k, wr)) abort_case("probe: post failed: " + errno_name(rc));
    auto v = wait(q.cq[S0], 1, kWaitNs);
    if (v.empty() || v[0].status != IBV_WC_REM_ACCESS_ERR)
        abort_case("probe " + opcode_name(wc_op_of(op)) + ": " +
                   (v.empty() ? std::string("no completion") : status_name(v[0].status)) +
                   ", expected REM_ACCESS_ERR");
    sleep(kQuietNs);
    collect_events();
    if (!take_event(1, q.qp[1], IBV_EVENT_QP_ACCESS_ERR))
        abort_case("probe: no QP_ACCESS_ERR event on node1");
    q.expect[0] = q.expect[1] = ERR;
    std::string where;
    const uint64_t n = changed(&where);
    probe_changed += n;
    if (n) abort_case("probe: " + where);
}

std::string env::judge(const outcome& x) {
    if (!attacked) return "the case made no attack";
    qp_pair& q = p(attack_pair);
    if (attack_rc != x.post) return "returned " + errno_name(attack_rc) + ", expected " + errno_name(x.post);
    std::string why;
    for (unsigned c = 0; c < 4; ++c) {
        std::vector<wc_exp> want = x.cq[c];
        const unsigned node = c >= S1;
        if ((c == R0 || c == R1) && x.state[node] == ERR) {
            const size_t consumed = want.size();
            for (size_t f = consumed; f < q.recvs[node]; ++f) want.push_back({IBV_WC_WR_FLUSH_ERR, OP_ANY});
        }
        const auto got = wait(q.cq[c], want.size(), kWaitNs);
        for (size_t i = 0; i < want.size() && why.empty(); ++i) {
            const std::string at = std::string(cq_names[c]) + " completion " + std::to_string(i + 1);
            if (i >= got.size()) {
                why = at + ": none arrived, expected " + status_name(want[i].status);
                break;
            }
            const ibv_wc& w = got[i];
            const int op = want[i].opcode == OP_OF_ATTACK ? attack_op : want[i].opcode;
            if (int(w.status) != want[i].status)
                why = at + ": " + status_name(w.status) + " (vendor_err " + std::to_string(w.vendor_err) +
                      "), expected " + status_name(want[i].status);
            else if (op >= 0 && int(w.opcode) != op)
                why = at + ": opcode " + opcode_name(w.opcode) + ", expected " + opcode_name(op);
            else if (want[i].vendor >= 0 && int(w.vendor_err) != want[i].vendor)
                why = at + ": vendor_err " + vendor_name(int(w.vendor_err)) + ", expected " +
                      vendor_name(want[i].vendor);
        }
        if (!why.empty()) return why;
        if (c == R1 || c == R0) q.recvs[node] = 0;
    }
    sleep(kQuietNs);
    why = stray_completion();
    if (!why.empty()) return why;
    collect_events();
    for (unsigned i = 0; i < 2; ++i)
        if (x.event[i] >= 0 && !take_event(i, q.qp[i], x.event[i]))
            return "no " + event_name(x.event[i]) + " event on node" + std::to_string(i) + "'s QP" +
                   (event_on(i, q.qp[i]).empty() ? "" : " (got " + event_on(i, q.qp[i]) + ")");
    why = stray_event();
    if (!why.empty()) return why;
    for (unsigned i = 0; i < 2; ++i) {
        const ibv_qp_state s = state(q.qp[i]);
        if (s != x.state[i])
            return "node" + std::to_string(i) + "'s QP is " + state_name(s) + ", expected " +
                   state_name(x.state[i]);
        q.expect[i] = x.state[i];
    }
    return "";
}

std::string env::final_check() {
    sleep(kQuietNs);
    std::string why = stray_completion();
    if (!why.empty()) return why;
    collect_events();
    why = stray_event();
    if (!why.empty()) return why;
    for (size_t k = 0; k < pairs_.size(); ++k)
        for (unsigned i = 0; i < 2; ++i) {
            const ibv_qp_state s = state(pairs_[k]->qp[i]);
            if (s != pairs_[k]->expect[i])
                return "pair " + std::to_string(k) + " node" + std::to_string(i) + "'s QP is " +
                       state_name(s) + ", expected " + state_name(pairs_[k]->expect[i]);
        }
    return "";
}

std::string env::cleanup() {
    std::string why;
    auto note = [&](const std::string& w) {
        if (why.empty()) why = "cleanup: " + w;
    };
    for (ibv_mw* mw : mws_)
        if (int rc = ibv_dealloc_mw(mw)) note("ibv_dealloc_mw: " + errno_name(rc));
    mws_.clear();
    for (auto& q : pairs_) {
        for (unsigned i = 0; i < 2; ++i)
            if (q->qp[i])
                if (int rc = ibv_destroy_qp(q->qp[i])) note("ibv_destroy_qp: " + errno_name(rc));
        for (ibv_cq* cq : q->cq)
            if (cq)
                if (int rc = ibv_destroy_cq(cq)) note("ibv_destroy_cq: " + errno_name(rc));
    }
    pairs_.clear();
    for (auto& v : mrs_) {
        for (auto it = v.rbegin(); it != v.rend(); ++it)
            if (int rc = ibv_dereg_mr(*it)) note("ibv_dereg_mr: " + errno_name(rc));
        v.clear();
    }
    for (auto& m : mapped_)
        if (int rc = ibv_unmap_pages(b_.ctx[1], m.first, m.second))
            note("ibv_unmap_pages: " + errno_name(rc));
    mapped_.clear();
    collect_events();  // what the teardown raised does not belong to the next case
    events_[0].clear();
    events_[1].clear();
    return why;
}

void env::mark(unsigned k, int op) {
    if (attacked) abort_case("the case made more than one attack");
    attacked = true;
    attack_pair = k;
    attack_op = op;
}

int env::connect(qp_pair& q, unsigned i) {
    const unsigned peer = 1 - i;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = 1;
    a.qp_access_flags = i ? q.o.access1 : ALL;
    int rc = ibv_modify_qp(q.qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    if (rc) return rc;
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = q.qp[peer]->qp_num;
    a.rq_psn = peer ? 0x200 : 0x100;
    a.max_dest_rd_atomic = 4;
    a.min_rnr_timer = 12;
    a.ah_attr.dlid = b_.lid[peer];
    a.ah_attr.port_num = 1;
    rc = ibv_modify_qp(q.qp[i], &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
    if (rc) return rc;
    a = ibv_qp_attr{};
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = i ? 0x200 : 0x100;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 4;
    return ibv_modify_qp(q.qp[i], &a,
                         IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_MAX_QP_RD_ATOMIC);
}

}  // namespace hcasim::attack
