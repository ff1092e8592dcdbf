// RC (write_lat, send_lat, read_lat, atomic_lat, write_bw, send_bw, read_bw, atomic_rate) and
// UC (uc_write_bw): connecting an RC QP, the ping-pong latency phase (ud_send_lat runs it too)
// with its latency breakdown, and the bandwidth stream the client runs in every bandwidth
// workload: post round robin over the QPs within the transmit depth, take the completions.
#define SC_INCLUDE_DYNAMIC_PROCESSES  // sc_spawn: --threads
#include <algorithm>

#include "testbench/workloads/base.h"

namespace hcasim::workloads {

/// Reset -> INIT -> RTR -> RTS of node i's RC QP q towards the peer's QP q.
void perftest::connect_rc(unsigned i, unsigned q, const rd_limits& rd) {
    side& s = side_[i];
    const peer_info& peer = info_[peer_of(i)];
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = 1;
    attr.qp_access_flags = unsigned(rd.access);
    int rc = modify(i, s.qps[q], attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTR;
    attr.dest_qp_num = peer.qpn[q];
    rtr_attrs(attr, peer, rd);
    rc |= modify(i, s.qps[q], attr, rtr_mask);
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    rts_attrs(attr, i, rd);
    rc |= modify(i, s.qps[q], attr, rts_mask);
    if (rc) fail("node" + std::to_string(i) + ": ibv_modify_qp to RTS failed (" + std::to_string(rc) + ")");
}

/// Every latency workload, size by size: ph.iters ping-pongs (write_lat, send_lat, ud_send_lat)
/// or round trips (read_lat, atomic_lat), one sample each; the middle iteration is traced for
/// the latency breakdown. The server's CPU takes part in the ping-pongs only.
void perftest::lat_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind op, run_report& rep) {
    const bool client = i == 0;
    const bool v = spec_.verify;
    for (size_t si = 0; si < ph.sizes.size(); ++si) {
        if (client) meter_.size_begin(si, ph.iters, "iters", true);
        lat_size l;
        l.size = ph.sizes[si];
        l.step = step0 + si;
        l.inl = (op == op_kind::write || op == op_kind::send) && l.size <= inline_limit(true);
        l.last = l.size ? l.size - 1 : 0;
        l.cas = spec_.atomic == "cmp_swap";
        l.samples.reserve(ph.iters);
        if (client) {
            if (op == op_kind::write) {
                // The flag byte must not already hold the first iteration's value.
                clear(0, recv_area(0, 0), std::max<uint64_t>(l.size, 1));
                clear(1, recv_area(1, 0), std::max<uint64_t>(l.size, 1));
            } else if (op == op_kind::atomic) {
                l.current = verify::value(key(1, 0, l.step, ~uint64_t(0)));
                poke64(1, recv_area(1, 0), l.current);
            }
        }
        bar_.arrive();
        for (uint64_t it = 0; it < ph.iters; ++it) {
            lat_iter x;
            x.it = it;
            x.flag = uint8_t(1 + (it % 254));
            x.traced = it == ph.iters / 2;
            if (client) {
                ping(i, ph, op, l, x);
                meter_.step(it + 1);
            } else if (op == op_kind::write)
                pong_write(i, ph, l, x);
            else if (op == op_kind::send)
                pong_send(i, ph, l, x);
            // READ and atomics: the server's CPU takes no part.
        }
        bar_.arrive();
        if (client) {
            size_result r = latency_stats(l.size, l.samples);
            r.iters = ph.iters;
            take_breakdown(r, op);
            if (v && op == op_kind::atomic)
                chk_.value(at(ph, l.size, 1, 0, ph.iters, "remote value after the last atomic"),
                           peek64(1, recv_area(1, 0)), l.current);
            if (v) take_counts(r);
            rep.results.push_back(r);
        }
        bar_.arrive();
        if (client) meter_.row(rep);  // the size ends here: the next one's counters start
    }
}

/// The client's iteration x: starts the sample (and, traced, the breakdown's probes) and runs
/// the workload's exchange.
void perftest::ping(unsigned i, const phase_spec& ph, op_kind op, lat_size& l, lat_iter& x) {
    if (x.traced) {  // the latency breakdown: this iteration's path through both HCAs
        m_.at(0).adapter.probe.arm();
        m_.at(1).adapter.probe.arm();
    }
    x.t0 = bus(i).now_ns();
    // The breakdown partitions this iteration's sample: from the sample's own
    // start to its own end (the times the sample is taken from).
    if (x.traced) cpu_mark_[0] = ns_time(x.t0);
    if (op == op_kind::write)
        ping_write(i, ph, l, x);
    else if (op == op_kind::send)
        ping_send(i, ph, l, x);
    else if (op == op_kind::read)
        read_round_trip(i, ph, l, x);
    else
        atomic_round_trip(i, ph, l, x);
}

/// The sample of iteration x, ended now: its time divided by `div` (2: half the round trip).
void perftest::take_sample(unsigned i, lat_size& l, const lat_iter& x, double div) {
    const uint64_t t1 = bus(i).now_ns();
    l.samples.push_back(to_us(t1 - x.t0) / div);
    if (x.traced) cpu_mark_[4] = ns_time(t1);
}

/// write_lat, client: WRITE the message with the flag in its last byte, wait for the server's.
void perftest::ping_write(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x) {
    const bool v = spec_.verify;
    const uint64_t size = l.size, step = l.step, it = x.it;
    if (v) poke_data(0, send_area(0, 0), size, key(0, 0, step, it), x.flag);
    set_send_byte(i, l.last, x.flag);
    post(i, 0, IBV_WR_RDMA_WRITE, send_area(0, 0), size, info_[1].addr, it, true, l.inl);
    wait_byte(i, l.last, x.flag);
    take_sample(i, l, x, 2.0);
    if (x.traced) cpu_mark_[3] = cpu_mark_[4];
    if (v)
        chk_.bytes(at(ph, size, 0, 0, it, "destination buffer"), peek(0, recv_area(0, 0), size), size,
                   key(1, 0, step, it), x.flag);
    const ibv_wc wc = poll_one(i, side_[i].scq);
    if (v) check_send_wc(at(ph, size, 0, 0, it, "send completion"), wc, IBV_WC_RDMA_WRITE, it);
}

/// send_lat, ud_send_lat, client: SEND, then take the server's answer.
void perftest::ping_send(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x) {
    const bool v = spec_.verify;
    const uint64_t size = l.size, step = l.step, it = x.it;
    if (v) poke_data(0, send_area(0, 0), size, key(0, 0, step, it));
    post(i, 0, IBV_WR_SEND, send_area(0, 0), size, 0, it, true, l.inl);
    take_lat_send(i, ph, l, x, 3);
    ++side_[i].rq_done[0];
    post_recv(i, 0);
    take_sample(i, l, x, 2.0);
    const ibv_wc wc = poll_one(i, side_[i].scq);
    if (v) check_send_wc(at(ph, size, 0, 0, it, "send completion"), wc, IBV_WC_SEND, it);
}

/// send_lat, ud_send_lat: node i takes the peer's message (its receive completion; --verify: the
/// completion's fields and the data); when traced, sets the breakdown's CPU mark `mark`.
void perftest::take_lat_send(unsigned i, const phase_spec& ph, const lat_size& l, const lat_iter& x,
                             int mark) {
    const ibv_wc rwc = poll_one(i, side_[i].rcq);
    if (x.traced) cpu_mark_[mark] = sc_time_stamp();
    if (!spec_.verify) return;
    check_recv_wc(at(ph, l.size, i, 0, x.it, "receive completion"), rwc, l.size);
    chk_.bytes(at(ph, l.size, i, 0, x.it, "receive buffer"), peek(i, recv_area(i, 0) + payload_off(), l.size),
               l.size, key(peer_of(i), 0, l.step, x.it));
}

/// read_lat: one READ of the server's send area.
void perftest::read_round_trip(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x) {
    const bool v = spec_.verify;
    const uint64_t size = l.size, step = l.step, it = x.it;
    if (v) {  // a new remote pattern each iteration, so stale data is caught
        poke_data(1, send_area(1, 0), size, key(1, 0, step, it));
        clear(0, recv_area(0, 0), size);
    }
    post(i, 0, IBV_WR_RDMA_READ, recv_area(0, 0), size, info_[1].send_addr, it, true, false);
    const ibv_wc wc = poll_one(i, side_[i].scq);
    take_sample(i, l, x, 1.0);  // perftest: the whole round trip
    if (x.traced) cpu_mark_[3] = cpu_mark_[4];
    if (v) {
        check_send_wc(at(ph, size, 0, 0, it, "READ completion"), wc, IBV_WC_RDMA_READ, it);
        chk_.bytes(at(ph, size, 0, 0, it, "READ destination"), peek(0, recv_area(0, 0), size), size,
                   key(1, 0, step, it));
    }
}

/// atomic_lat: one atomic on the server's word (l.current: its value in a serial execution).
void perftest::atomic_round_trip(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x) {
    const bool v = spec_.verify, cas = l.cas;
    const uint64_t size = l.size, step = l.step, it = x.it;
    const uint64_t operand = verify::value(key(0, 0, step, it));
    const uint64_t before = l.current;
    l.current = cas ? operand : l.current + operand;
    if (v) clear(0, recv_area(0, 0), 8);
    if (cas)
        post(i, 0, IBV_WR_ATOMIC_CMP_AND_SWP, recv_area(0, 0), 8, info_[1].addr, it, true, false, before,
             operand);
    else
        post(i, 0, IBV_WR_ATOMIC_FETCH_AND_ADD, recv_area(0, 0), 8, info_[1].addr, it, true, false, operand);
    const ibv_wc wc = poll_one(i, side_[i].scq);
    take_sample(i, l, x, 1.0);  // perftest: the whole round trip
    if (x.traced) cpu_mark_[3] = cpu_mark_[4];
    if (v) {
        check_send_wc(at(ph, size, 0, 0, it, "atomic completion"), wc,
                      cas ? IBV_WC_COMP_SWAP : IBV_WC_FETCH_ADD, it);
        chk_.value(at(ph, size, 0, 0, it, "fetched value"), peek64(0, recv_area(0, 0)), before);
    }
}

/// write_lat, server: wait for the client's flag, WRITE the answer back.
void perftest::pong_write(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x) {
    const bool v = spec_.verify;
    const uint64_t size = l.size, step = l.step, it = x.it;
    wait_byte(i, l.last, x.flag);
    if (x.traced) cpu_mark_[1] = sc_time_stamp();
    if (v) {
        chk_.bytes(at(ph, size, 1, 0, it, "destination buffer"), peek(1, recv_area(1, 0), size), size,
                   key(0, 0, step, it), x.flag);
        poke_data(1, send_area(1, 0), size, key(1, 0, step, it), x.flag);
    }
    set_send_byte(i, l.last, x.flag);
    if (x.traced) cpu_mark_[2] = sc_time_stamp();
    post(i, 0, IBV_WR_RDMA_WRITE, send_area(1, 0), size, info_[0].addr, it, true, l.inl);
    const ibv_wc wc = poll_one(i, side_[i].scq);
    if (v) check_send_wc(at(ph, size, 1, 0, it, "send completion"), wc, IBV_WC_RDMA_WRITE, it);
}

/// send_lat, ud_send_lat, server: take the client's SEND, answer it.
void perftest::pong_send(unsigned i, const phase_spec& ph, lat_size& l, const lat_iter& x) {
    const bool v = spec_.verify;
    const uint64_t size = l.size, step = l.step, it = x.it;
    take_lat_send(i, ph, l, x, 1);
    if (v) poke_data(1, send_area(1, 0), size, key(1, 0, step, it));
    ++side_[i].rq_done[0];
    if (x.traced) cpu_mark_[2] = sc_time_stamp();
    post(i, 0, IBV_WR_SEND, send_area(1, 0), size, 0, it, true, l.inl);  // answer first, like perftest
    post_recv(i, 0);
    const ibv_wc wc = poll_one(i, side_[i].scq);
    if (v) check_send_wc(at(ph, size, 1, 0, it, "send completion"), wc, IBV_WC_SEND, it);
}

/// Waits until the byte at our receive area offset `off` equals `v` (perftest's
/// write_lat spins on the last byte; here the CPU sleeps on the watched address).
void perftest::wait_byte(unsigned i, uint64_t off, uint8_t v) {
    if (rec_)
        rec_->call(i, "wait_byte",
                   {{"buf", "buf0"}, {"offset", recv_area(i, 0) + off - side_[i].buf}, {"value", v}});
    uint64_t pa = 0;
    (void)sw_[i]->as.translate(recv_area(i, 0) + off, &pa);  // its own buffer, mapped since setup
    for (;;) {
        uint8_t b = 0;
        bus(i).mem_read(pa, &b, 1);
        if (b == v) return;
        if (!bus(i).wait_write(pa, 1, timeout_ns()))
            fail("node" + std::to_string(i) + ": RDMA WRITE did not arrive within workload.timeout_us" +
                 cable_faults());
    }
}

void perftest::set_send_byte(unsigned i, uint64_t off, uint8_t v) {
    record_write(i, send_area(i, 0) + off, &v, 1);
    (void)sw_[i]->as.write(send_area(i, 0) + off, &v, 1);  // its own buffer, mapped since setup
    bus(i).cpu_cost(cpu_op::memcpy_64b);
}

/// Latency breakdown of the traced iteration (docs/architecture.md, "Path probe"): its
/// sample cut into consecutive intervals at the times the message passes each stage
/// (critical-path attribution: for a message of several packets, the times of its last
/// packet, which the completion waits for). A boundary that comes before the previous one
/// (work overlapped with the previous stage) is moved up to it, one after the sample's end
/// down to the end: the stages partition the sample. write_lat, send_lat: the CPU times
/// (cpu_mark_: client post, server sees, server posts, client sees, sample end) and both
/// HCAs' probe marks on one time line, each stage averaged over the two directions (the
/// round trip's halves, as the reported latency is half the round trip). read_lat,
/// atomic_lat: the one round trip (take_round_trip).
void perftest::take_breakdown(size_result& r, op_kind op) {
    path_probe& p0 = m_.at(0).adapter.probe;
    path_probe& p1 = m_.at(1).adapter.probe;
    p0.disarm();
    p1.disarm();
    using S = path_probe;
    if (op == op_kind::read || op == op_kind::atomic) {
        take_round_trip(r, op, p0, p1);
        return;
    }
    for (path_probe* p : {&p0, &p1})
        for (S::stage s : {S::doorbell, S::wqe_start, S::wire_end, S::rx_engine, S::data_placed})
            if (!p->seen(s)) return;  // a stage was not reached (e.g. a retransmission): no breakdown
    // The CPU marks in order inside the sample.
    const sc_time& end = cpu_mark_[4];
    sc_time m[5] = {cpu_mark_[0]};
    for (int k = 1; k < 4; ++k) m[k] = std::min(std::max(cpu_mark_[k], m[k - 1]), end);
    m[4] = end;
    // One direction: sender post -> doorbell -> WQE -> wire -> responder -> data -> seen.
    auto one_way = [](const sc_time& post, const path_probe& tx, const path_probe& rx, const sc_time& seen) {
        return partition({post, tx.at(S::doorbell), tx.at(S::wqe_start), tx.at(S::wire_end),
                          rx.at(S::rx_engine), rx.at(S::data_placed), seen});
    };
    const std::vector<sc_time> a = one_way(m[0], p0, p1, m[1]);
    const std::vector<sc_time> b = one_way(m[2], p1, p0, m[3]);
    static const char* const names[6] = {"host post + MMIO doorbell",
                                         "doorbell unit + WQE",
                                         "requester: pipeline, payload DMA read, serialisation",
                                         "cable, switch and receive pipeline",
                                         "responder: pipeline, DMA write",
                                         "DMA write lands, host sees it"};
    for (int k = 0; k < 6; ++k) {
        std::string n = names[k];
        if (k == 5 && op == op_kind::send) n = "DMA writes land, CQE, host poll";
        r.breakdown.push_back({n, (a[size_t(k)] + b[size_t(k)]).to_seconds() * 1e6 / 2.0});
    }
    // Software between the directions: the server's turnaround and the client's own (send_lat:
    // reposting its receive before the sample is taken).
    const sc_time sw = (m[2] - m[1]) + (m[4] - m[3]);
    r.breakdown.push_back({"application software (half)", sw.to_seconds() * 1e6 / 2.0});
}

/// The intervals between consecutive boundaries t[0] .. t[n-1], each boundary clamped into
/// [previous boundary, t[n-1]]: n-1 intervals that add up to t[n-1] - t[0] exactly.
std::vector<sc_time> perftest::partition(std::initializer_list<sc_time> t) {
    std::vector<sc_time> d;
    const sc_time& first = *t.begin();
    const sc_time last = std::max(*(t.end() - 1), first);
    sc_time prev = first;
    for (auto it = t.begin() + 1; it != t.end(); ++it) {
        const sc_time at = std::min(std::max(*it, prev), last);
        d.push_back(at - prev);
        prev = at;
    }
    return d;
}

/// READ or atomic: post -> doorbell -> WQE -> request on the wire -> responder -> response
/// on the wire -> requester places it and writes the CQE -> the poll sees it. Sums to the
/// reported latency (the whole round trip, as perftest reports it).
void perftest::take_round_trip(size_result& r, op_kind op, const path_probe& p0, const path_probe& p1) {
    using S = path_probe;
    for (S::stage s : {S::doorbell, S::wqe_start, S::wire_end, S::resp_rx, S::completion})
        if (!p0.seen(s)) return;
    for (S::stage s : {S::rx_engine, S::resp_sent})
        if (!p1.seen(s)) return;
    const std::vector<sc_time> d = partition({cpu_mark_[0], p0.at(S::doorbell), p0.at(S::wqe_start),
                                              p0.at(S::wire_end), p1.at(S::rx_engine), p1.at(S::resp_sent),
                                              p0.at(S::resp_rx), p0.at(S::completion), cpu_mark_[4]});
    const char* const names[8] = {
        "host post + MMIO doorbell",
        "doorbell unit + WQE",
        "requester: pipeline, serialisation",
        "cable, switch and receive pipeline",
        op == op_kind::read ? "responder: pipeline, payload DMA read, serialisation"
                            : "responder: pipeline, atomic at host memory, serialisation",
        "cable back, receive pipeline",
        op == op_kind::read ? "requester: data DMA write, CQE" : "requester: result DMA write, CQE",
        "CQE lands, host poll sees it"};
    for (int k = 0; k < 8; ++k) r.breakdown.push_back({names[k], d[size_t(k)].to_seconds() * 1e6});
}

/// The client's timed stream of one bandwidth size: each application thread (--threads, a
/// process of its own on a core of its own) runs stream_thread over its QPs; then the size's
/// row, and (UC, UD) the end-of-stream markers.
void perftest::stream(unsigned i, const phase_spec& ph, op_kind op, bw_size& b, run_report& rep) {
    if (wp_.post_list > 1) {
        lists_.assign(nq_, pending_list{});
        for (pending_list& l : lists_) {
            l.wrs.reserve(wp_.post_list);
            l.sges.reserve(wp_.post_list);
        }
    }
    if (nt_ > 1) bus(i).cpu_settle();  // the threads start from this process's time
    const std::vector<uint64_t> busy0 = busy_counts();
    const uint64_t t0 = bus(i).now_ns();
    uint64_t t1 = 0;
    size_result r;
    if (nt_ == 1) {
        stream_thread(i, 0, ph, op, b);
        t1 = bus(i).now_ns();
    } else {
        // Each thread's own figures: the messages its completions completed, over its own
        // start to its last completion (the row's interval ends at the last thread's).
        r.threads.resize(nt_);
        unsigned running = nt_;
        sc_event done;
        for (unsigned t = 0; t < nt_; ++t)
            sc_spawn(
                [this, i, t, &ph, op, &b, &running, &done, &t1, &r] {
                    const uint64_t start = bus(i).now_ns();
                    const uint64_t messages = stream_thread(i, t, ph, op, b);
                    bus(i).cpu_settle();
                    const uint64_t end = bus(i).now_ns();
                    t1 = std::max(t1, end);
                    thread_result& tr = r.threads[t];
                    tr.thread = t;
                    tr.qps = qps_of_thread(t);
                    tr.messages = messages;
                    tr.active_ns = end - start;
                    tr.msg_rate_mpps = end > start ? double(messages) * 1e3 / double(end - start) : 0;
                    if (--running == 0) done.notify(SC_ZERO_TIME);
                },
                sc_gen_unique_name("thread"));
        wait(done);
    }
    lists_.clear();
    r.size_bytes = b.size;
    r.iters = quota_of(ph, 0);  // per QP (--iters); QP 0's share is the largest
    r.messages = ph.iters;
    const double secs = double(t1 - t0) * 1e-9;
    r.bw_gbps = secs > 0 ? double(b.size) * double(ph.iters) * 8.0 / secs / 1e9 : 0;
    r.msg_rate_mpps = secs > 0 ? double(ph.iters) / secs / 1e6 : 0;
    take_util(r, busy0, t1 - t0);
    rep.results.push_back(r);
    if (!acked()) send_markers(ph, b.size);
}

/// Application thread t's stream: its QPs are t, t + threads, ... (QP q's quota of the size's
/// messages each); its WR n goes to its QP n mod (its QP count), each QP with at most tx_depth
/// outstanding, and it polls its own send CQ. Returns the messages its completions completed.
uint64_t perftest::stream_thread(unsigned i, unsigned t, const phase_spec& ph, op_kind op, bw_size& b) {
    const unsigned depth = wp_.tx_depth;
    ibv_cq* cq = send_cq(i, t);
    stream_state st;
    st.cq_mod = std::min<unsigned>(wp_.cq_mod, depth);
    st.want_op = op == op_kind::write  ? IBV_WC_RDMA_WRITE
                 : op == op_kind::send ? IBV_WC_SEND
                 : op == op_kind::read ? IBV_WC_RDMA_READ
                 : b.cas               ? IBV_WC_COMP_SWAP
                                       : IBV_WC_FETCH_ADD;
    st.posted.assign(nq_, 0);
    st.completed.assign(nq_, 0);
    const unsigned nql = qps_of_thread(t);
    uint64_t total = 0;
    for (unsigned q = t; q < nq_; q += nt_) total += quota_of(ph, q);
    while (st.total_completed < total) {
        // Each QP signals every cq_mod-th WR and its last.
        bool progress = false;
        while (st.total_posted < total) {
            const unsigned q = t + unsigned(st.total_posted % nql) * nt_;
            if (st.posted[q] - st.completed[q] >= depth) break;
            const uint64_t m = st.posted[q];
            const bool sig = (m + 1) % st.cq_mod == 0 || m + 1 == quota_of(ph, q);
            post_message(i, q, m, sig, op, b);
            ++st.posted[q];
            ++st.total_posted;
            progress = true;
        }
        // Lists not full when the QPs ran out of credit (or work): posted now.
        for (unsigned q = t; q < lists_.size(); q += nt_) flush_list(i, q);
        ibv_wc wcs[16];
        int n = ibv_poll_cq(cq, 16, wcs);
        if (n < 0) fail("node0: ibv_poll_cq failed");
        record_poll(i, cq, wcs, n);
        for (int k = 0; k < n; ++k) take_send_completion(ph, op, b, st, wcs[k]);
        if (n == 0 && !progress && ibv_wait_cq(cq, timeout_ns()) != 0)
            fail("node0: bandwidth test stalled (no completion within workload.timeout_us)" + cable_faults());
    }
    return st.total_completed;
}

/// Posts message m of QP q (WR n of the stream), signaled or not.
void perftest::post_message(unsigned i, unsigned q, uint64_t m, bool sig, op_kind op, bw_size& b) {
    const unsigned depth = wp_.tx_depth;
    const uint64_t size = b.size;
    const bool inl = b.inl;
    const uint64_t wr_id = (uint64_t(q) << 48) | m;
    const uint64_t peer_recv = info_[1].addr + uint64_t(q) * area_;
    if (op == op_kind::write)
        post(i, q, IBV_WR_RDMA_WRITE, send_area(0, q), size, peer_recv, wr_id, sig, inl);
    else if (op == op_kind::send)
        post(i, q, IBV_WR_SEND, send_area(0, q), size, 0, wr_id, sig, inl);
    else if (op == op_kind::read)
        post(i, q, IBV_WR_RDMA_READ, recv_area(0, q), size, info_[1].send_addr + uint64_t(q) * area_, wr_id,
             sig, false);
    else {
        const uint64_t operand = verify::value(key(0, q, b.step, m));
        // Shared: every compare-and-swap expects the word's initial value
        // (the first one executed swaps, the others fetch its operand).
        const uint64_t before = b.current[b.shared ? 0 : q];
        if (!b.shared) {
            b.current[q] = b.cas ? operand : before + operand;
            b.fetched[uint64_t(q) * depth + m % depth] = before;
        }
        const uint64_t slot = recv_area(0, q) + (m % depth) * 8;
        const uint64_t target = b.shared ? info_[1].addr : peer_recv;
        if (b.cas)
            post(i, q, IBV_WR_ATOMIC_CMP_AND_SWP, slot, 8, target, wr_id, sig, false, before, operand);
        else
            post(i, q, IBV_WR_ATOMIC_FETCH_AND_ADD, slot, 8, target, wr_id, sig, false, operand);
    }
}

/// One send completion of the stream: the WRs it completes (a QP's signaled WR completes every
/// earlier one of the QP) and, with --verify, its fields and the data now known complete.
void perftest::take_send_completion(const phase_spec& ph, op_kind op, bw_size& b, stream_state& st,
                                    const ibv_wc& wc) {
    const bool v = spec_.verify;
    const unsigned nq = nq_;
    const unsigned depth = wp_.tx_depth;
    const uint64_t size = b.size, step = b.step;
    std::vector<uint64_t>& completed = st.completed;
    if (wc.status != IBV_WC_SUCCESS) fail(completion_error("node0", wc, hex(wc.wr_id)));
    const unsigned q = unsigned(wc.wr_id >> 48);
    const uint64_t idx = wc.wr_id & ((uint64_t(1) << 48) - 1);
    if (q >= nq || idx < completed[q] || idx >= st.posted[q]) {
        if (!v)
            fail("node0: completion for a work request that is not outstanding (wr_id " + hex(wc.wr_id) +
                 ")");
        chk_.bad_completion(at(ph, size, 0, q < nq ? q : 0, idx, "send completion"),
                            "wr_id " + hex(wc.wr_id) + " is not an outstanding work request");
        return;
    }
    const uint64_t first = completed[q];
    if (v) {
        // Signaled: every cq_mod-th WR and the QP's last, in posting order.
        const uint64_t want = std::min(quota_of(ph, q) - 1, (first / st.cq_mod + 1) * st.cq_mod - 1);
        check_send_wc(at(ph, size, 0, q, idx, "send completion"), wc, st.want_op, (uint64_t(q) << 48) | want);
    }
    st.total_completed += idx + 1 - first;
    completed[q] = idx + 1;
    stream_done_ += idx + 1 - first;  // every thread's, for the progress
    meter_.step(stream_done_);
    if (!v) return;
    // Known complete, and not yet overwritten by a later message: check now.
    // (UC: the completion only says the WRITE is on the wire; checked after
    // the markers.)
    if (op == op_kind::write && acked())
        chk_.bytes(at(ph, size, 1, q, idx, "destination buffer"), peek(1, recv_area(1, q), size), size,
                   key(0, q, step, 0));
    else if (op == op_kind::read)
        chk_.bytes(at(ph, size, 0, q, idx, "READ destination"), peek(0, recv_area(0, q), size), size,
                   key(1, q, step, 0));
    else if (op == op_kind::atomic)
        for (uint64_t m = first; m <= idx; ++m) {
            const uint64_t got = peek64(0, recv_area(0, q) + (m % depth) * 8);
            if (b.shared)
                b.shared_ops.push_back({q, m, got, verify::value(key(0, q, step, m))});
            else
                chk_.value(at(ph, size, 0, q, m, "fetched value"), got,
                           b.fetched[uint64_t(q) * depth + m % depth]);
        }
}

/// send_bw, node1: takes the size's receive completions, checks each and reposts its receive.
void perftest::send_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step) {
    side& s = side_[i];
    const bool v = spec_.verify;
    const unsigned nq = nq_;
    uint64_t recv_done = 0;
    while (recv_done < ph.iters) {
        const ibv_wc wc = poll_one(i, s.rcq);
        ++recv_done;
        unsigned q = qp_index(i, wc.qp_num);
        if (q == nq) {
            if (!v) fail("node1: receive completion for unknown QP " + std::to_string(wc.qp_num));
            chk_.bad_completion(at(ph, size, 1, 0, recv_done - 1, "receive completion"),
                                "QP number " + std::to_string(wc.qp_num) + " is not one of ours");
            q = 0;
        }
        if (v) {
            const verify::where w = at(ph, size, 1, q, s.rq_done[q], "receive completion");
            check_recv_wc(w, wc, size);
            chk_.bytes(at(ph, size, 1, q, s.rq_done[q], "receive buffer"), peek(1, recv_area(1, q), size),
                       size, key(0, q, step, 0));
        }
        ++s.rq_done[q];
        post_recv(i, q);
    }
}

}  // namespace hcasim::workloads
