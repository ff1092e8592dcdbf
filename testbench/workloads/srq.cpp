// srq_bw, ud_srq_bw: node1's QPs share one shared receive queue. The SRQ's size, its slots
// (receive buffers after the QPs' areas, each reposted once its completion is polled), the
// checks of an SRQ completion and node1's receive loop of srq_bw.
#include <algorithm>
#include <cerrno>

#include "testbench/workloads/base.h"

namespace hcasim::workloads {

/// node1's SRQ counters, read around each size.
void perftest::find_srq_counters() {
    static const char* const names[3] = {"wqe_fetcher.srq_taken", "transport_engine.rnr_naks_sent",
                                         "wqe_fetcher.srq_empty"};
    for (unsigned k = 0; k < 3; ++k) {
        const std::string key = std::string(m_.at(1).name()) + ".hca." + names[k];
        srq_ctr_[k] = stats_registry::instance().find(key);
        if (!srq_ctr_[k])
            throw workload_error(spec_.phases.front().workload + " reads the SRQ counters, but '" + key +
                                 "' does not exist");
    }
}

/// srq_bw, ud_srq_bw, node1: the WRs kept posted to the SRQ (workload.rx_depth, as perftest's
/// -r with --use_srq; ud_srq_bw: every datagram of a size and the markers, like ud_send_bw's
/// receive queues, within the device's max_srq_wr and max_cqe). Sets s.srq_slots and returns
/// the receive CQ's size. Fails the run when the device has no SRQs or rx_depth exceeds them.
unsigned perftest::srq_size(unsigned i, const std::string& node) {
    side& s = side_[i];
    const std::string& w = spec_.phases.front().workload;
    ibv_device_attr dev{};
    if (ibv_query_device(s.ctx, &dev) != 0) fail(node + ": ibv_query_device failed");
    if (dev.max_srq <= 0 || dev.max_srq_wr <= 0)
        fail(w + " needs a shared receive queue, but " + node + "'s HCA reports max_srq " +
             std::to_string(dev.max_srq) + " and max_srq_wr " + std::to_string(dev.max_srq_wr) +
             " (ibv_query_device)");
    if (wp_.rx_depth.get() > unsigned(dev.max_srq_wr) || wp_.rx_depth.get() > unsigned(dev.max_cqe))
        fail(w + ": workload.rx_depth " + std::to_string(wp_.rx_depth.get()) +
             " receive WRs do not fit one SRQ of " + node + " (max_srq_wr " + std::to_string(dev.max_srq_wr) +
             ", max_cqe " + std::to_string(dev.max_cqe) + "; hca.max_qp_wr, hca.max_cqe)");
    uint64_t want = wp_.rx_depth;
    if (tr_ == transport::ud)
        want = std::max<uint64_t>(
            want, std::min<uint64_t>({ud_srq_need_, uint64_t(dev.max_srq_wr), uint64_t(dev.max_cqe)}));
    s.srq_slots = unsigned(want);
    return s.srq_slots;
}

/// Posts the SRQ slots `slots` (each its whole buffer) as one list: one doorbell.
void perftest::post_srq(unsigned i, const std::vector<uint32_t>& slots) {
    side& s = side_[i];
    if (slots.empty()) return;
    srq_sges_.resize(slots.size());
    srq_wrs_.resize(slots.size());
    for (size_t k = 0; k < slots.size(); ++k) {
        const uint32_t slot = slots[k];
        const uint64_t seq = s.srq_posted++;
        s.slot_seq[slot] = seq;
        s.slot_busy[slot] = 1;
        srq_sges_[k] = ibv_sge{srq_slot(i, slot), uint32_t(area_), s.mr->lkey};
        srq_wrs_[k] = ibv_recv_wr{};
        srq_wrs_[k].wr_id = (seq << 24) | slot;
        srq_wrs_[k].sg_list = &srq_sges_[k];
        srq_wrs_[k].num_sge = 1;
        srq_wrs_[k].next = k + 1 < slots.size() ? &srq_wrs_[k + 1] : nullptr;
    }
    ibv_recv_wr* bad = nullptr;
    const sc_time t0 = sc_time_stamp();
    const int rc = ibv_post_srq_recv(s.srq, srq_wrs_.data(), &bad);
    if (rec_)
        rec_->call(
            i, "post_srq_recv",
            {{"srq", rec_->name_of(i, s.srq)}, {"wr", rec_->recv_wrs(i, srq_wrs_.data())}, {"ret", rc}}, t0);
    if (rc) fail("node" + std::to_string(i) + ": ibv_post_srq_recv failed (" + std::to_string(rc) + ")");
}

/// An SRQ receive completion of node i's QP q: the slot its wr_id names (the SRQ's slot count
/// if it names none outstanding: a bad completion). Checks the WQEs of one QP come in posting
/// order (o10-53.2.1: an SRQ hands out its WQEs in order, and a QP's messages arrive in
/// order) and, with --verify, the fields check_recv_wc checks except wr_id.
unsigned perftest::srq_completion(unsigned i, const phase_spec& ph, uint64_t size, unsigned q,
                                  const ibv_wc& wc, bool marker) {
    side& s = side_[i];
    const bool v = spec_.verify;
    const uint64_t slot = wc.wr_id & 0xFFFFFF, seq = wc.wr_id >> 24;
    const verify::where w =
        at(ph, size, i, q, s.rq_done[q], marker ? "marker receive completion" : "SRQ receive completion");
    if (slot >= s.srq_slots || !s.slot_busy[slot] || s.slot_seq[slot] != seq) {
        if (!v)
            fail("node" + std::to_string(i) +
                 ": SRQ receive completion for a work request that is not "
                 "outstanding (wr_id " +
                 hex(wc.wr_id) + ")");
        chk_.bad_completion(w, "wr_id " + hex(wc.wr_id) + " is not an outstanding SRQ work request");
        return s.srq_slots;
    }
    s.slot_busy[slot] = 0;
    if (seq + 1 <= s.qp_last_seq[q]) {
        if (!v)
            fail("node" + std::to_string(i) + ": QP " + std::to_string(q) + " took SRQ WQE " +
                 std::to_string(seq) + " after WQE " + std::to_string(s.qp_last_seq[q] - 1) +
                 " (an SRQ hands out its WQEs in order, o10-53.2.1)");
        chk_.bad_completion(w, "SRQ WQE " + std::to_string(seq) + " after WQE " +
                                   std::to_string(s.qp_last_seq[q] - 1) + " (out of order)");
    }
    s.qp_last_seq[q] = seq + 1;
    if (!v) return unsigned(slot);
    const ibv_wc_opcode op = marker && tr_ != transport::ud ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
    const uint64_t len = marker ? payload_off() : recv_len(size);
    if (wc.opcode != op)
        chk_.bad_completion(w, "opcode " + std::to_string(wc.opcode) + ", expected " + std::to_string(op));
    if (wc.byte_len != len)
        chk_.bad_completion(w,
                            "byte_len " + std::to_string(wc.byte_len) + ", expected " + std::to_string(len));
    if (!marker && (wc.wc_flags & IBV_WC_WITH_IMM))
        chk_.bad_completion(w, "carries immediate data, none was sent");
    if (tr_ == transport::ud && wc.src_qp != info_[peer_of(i)].qpn[q])
        chk_.bad_completion(w, "source QP " + std::to_string(wc.src_qp) + ", expected " +
                                   std::to_string(info_[peer_of(i)].qpn[q]));
    return unsigned(slot);
}

/// srq_bw, node1: takes the size's receive completions from the receive CQ in batches of 16
/// (perftest's CTX_POLL_BATCH), checks each and reposts the batch's buffers to the SRQ as one
/// list (one doorbell), so the SRQ stays topped up.
void perftest::srq_receive(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step) {
    side& s = side_[i];
    const bool v = spec_.verify;
    const std::string node = "node" + std::to_string(i);
    std::vector<uint64_t> got(nq_, 0);
    std::vector<uint32_t> repost;
    ibv_wc wcs[16];
    uint64_t done = 0;
    while (done < ph.iters) {
        const int n = ibv_poll_cq(s.rcq, 16, wcs);
        if (n < 0) fail(node + ": ibv_poll_cq failed");
        record_poll(i, s.rcq, wcs, n);
        if (n == 0) {
            if (ibv_wait_cq(s.rcq, timeout_ns()) != 0)
                fail(node + ": " + ph.workload +
                     " stalled (no receive completion within workload.timeout_us)" + cable_faults());
            continue;
        }
        repost.clear();
        for (int k = 0; k < n; ++k) {
            const ibv_wc& wc = wcs[k];
            if (wc.status != IBV_WC_SUCCESS) fail(completion_error(node, wc, hex(wc.wr_id)));
            ++done;
            unsigned q = qp_index(i, wc.qp_num);
            if (q == nq_) {
                if (!v) fail(node + ": receive completion for unknown QP " + std::to_string(wc.qp_num));
                chk_.bad_completion(at(ph, size, i, 0, done - 1, "receive completion"),
                                    "QP number " + std::to_string(wc.qp_num) + " is not one of ours");
                q = 0;
            }
            const unsigned slot = srq_completion(i, ph, size, q, wc, false);
            if (slot < s.srq_slots) {
                srq_payload(i, ph, size, step, q, slot, ++got[q]);
                repost.push_back(slot);
            }
            ++s.rq_done[q];
        }
        post_srq(i, repost);
    }
}

/// srq_bw, ud_srq_bw: the payload of QP q's `nth` message of the size (from 1), in SRQ slot
/// `slot`. --verify: every message, then the slot is cleared (in zero time), so a later
/// completion whose buffer was never written is caught. Otherwise the QP's last message of
/// the size against node0's send area (the plain end-of-size check of the other workloads).
void perftest::srq_payload(unsigned i, const phase_spec& ph, uint64_t size, uint64_t step, unsigned q,
                           unsigned slot, uint64_t nth) {
    const uint64_t va = srq_slot(i, slot) + payload_off();
    if (spec_.verify) {
        chk_.bytes(at(ph, size, i, q, side_[i].rq_done[q], "SRQ receive buffer"), peek(i, va, size), size,
                   key(0, q, step, 0));
        clear(i, srq_slot(i, slot), payload_off() + size);
    } else if (nth == quota_of(ph, q)) {
        same_bytes(0, send_area(0, q), i, va, size);
    }
}

/// node1's wqe_fetcher.srq_taken, transport_engine.rnr_naks_sent, wqe_fetcher.srq_empty.
std::array<uint64_t, 3> perftest::srq_counts() const {
    return {srq_ctr_[0]->value(), srq_ctr_[1]->value(), srq_ctr_[2]->value()};
}

/// Creates node i's SRQ of s.srq_slots WRs (srq_size set the count).
void perftest::create_srq(unsigned i, const std::string& node) {
    side& s = side_[i];
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = s.srq_slots;
    sa.attr.max_sge = 1;
    const sc_time t0 = sc_time_stamp();
    s.srq = ibv_create_srq(s.pd, &sa);
    if (rec_ && s.srq)
        rec_->call(
            i, "create_srq",
            {{"pd", "pd0"}, {"max_wr", s.srq_slots}, {"max_sge", 1}, {"ret", rec_->add(i, s.srq, "srq")}},
            t0);
    if (!s.srq)
        fail(node + ": ibv_create_srq of " + std::to_string(s.srq_slots) + " WRs failed (errno " +
             std::to_string(errno) + ")");
}

/// Posts every slot of node i's SRQ once, in slot order; each completion reposts its slot.
void perftest::post_srq_slots(unsigned i) {
    side& s = side_[i];
    s.slot_seq.assign(s.srq_slots, 0);
    s.slot_busy.assign(s.srq_slots, 0);
    std::vector<uint32_t> all(s.srq_slots);
    for (unsigned k = 0; k < s.srq_slots; ++k) all[k] = k;
    post_srq(i, all);
}

/// The size's row: node1's SRQ counters since `c0` (its start).
void perftest::take_srq_counts(size_result& r, const std::array<uint64_t, 3>& c0) const {
    const std::array<uint64_t, 3> c1 = srq_counts();
    r.srq = true;
    r.srq_qps = nq_;
    r.srq_wqes_taken = c1[0] - c0[0];
    r.srq_rnr_naks = c1[1] - c0[1];
    r.srq_empty = c1[2] - c0[2];
}

}  // namespace hcasim::workloads
