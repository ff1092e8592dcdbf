#include "model/hca/pkey_checker.h"

#include <cstdio>

#include "model/core/unit_clock.h"
#include "tlm_if/wire/mad.h"

namespace hcasim {

pkey_checker::pkey_checker(const sc_core::sc_module_name& name, unsigned max_qps,
                           const sc_core::sc_time& hca_clock)
    : sc_module(name),
      table_len("table_len", 128, "entries", "P_Key table entries per port (1..65535)",
                {1, 65535}),  // C10-121; port_info.pkey_table_len is 16 bits
      impl("impl", "tlm", "",
           "tlm: the TLM model checks (zero time); rtl: the verilated RTL (rtl/pkey_checker.sv) checks, "
           "clocked at clock_mhz; both: the two check every packet, the RTL's verdict counts and the first "
           "disagreement stops the run (docs/cosim.md)",
           {"tlm", "rtl", "both"}),
      rtl_variant("rtl_variant", "reference", "",
                  "the verilated build impl=rtl|both runs: reference, or broken_membership (built with "
                  "PKEY_BROKEN_MEMBERSHIP: two limited members match; for testing the comparator)",
                  pkey_checker_rtl::variants()),
      rtl_lib("rtl_lib", "", "",
              "impl=rtl|both: run this plug-in library (a team's own build of the unit's contract, "
              "rtl/abi/hcasim_rtl.h) instead of a built-in rtl_variant (docs/cosim.md)"),
      clock_mhz("clock_mhz", 0.0, "MHz",
                "clock of the RTL (impl=rtl|both; 0: the HCA's clock_mhz); gated when idle",
                unit_clock_bounds()),
      waves("waves", "", "",
            "impl=rtl|both: write the RTL's pins to this FST file (GTKWave); nodes naming the same file "
            "share it "
            "(--waves FILE)"),
      checked("checked", "packets checked"),
      violations("violations",
                 "packets dropped for a P_Key mismatch (not saturating; see port_info.pkey_violations)"),
      qkey_violations("qkey_violations",
                      "packets dropped for a Q_Key mismatch (not saturating; see port_info.qkey_violations)"),
      rtl_checks("rtl_checks", "packets checked by the RTL (impl=rtl|both)"),
      rtl_cycles("rtl_cycles", "clock cycles the RTL ran (its clock is gated while idle)"),
      rtl_compared("rtl_compared", "impl=both: verdicts of the TLM model and the RTL compared"),
      divergences("divergences",
                  "impl=both: disagreements between the TLM model and the RTL (the first stops the run)"),
      qp_index_(max_qps, -1) {
    table_.assign(table_len, 0);
    full_.assign(0x8000, 0);
    limited_.assign(0x8000, 0);
    table_[0] = 0xFFFF;  // default partition, full member
    full_[0x7FFF] = 1;
    if (impl.get() != "tlm") {
        if (table_len > pkey_checker_rtl::DEPTH)
            throw config_error(table_len.key() + ": " + std::to_string(table_len.get()) +
                               " entries, but the RTL (impl=" + impl.get() + ") is built with " +
                               std::to_string(pkey_checker_rtl::DEPTH) + " per port");
        compare_ = impl.get() == "both";
        rtl_ =
            std::make_unique<pkey_checker_rtl>("rtl", rtl_variant, rtl_lib, unit_period(clock_mhz, hca_clock),
                                               waves, static_cast<pkey_rtl_client&>(*this));
        held_.resize(8);
    }
}

pkey_checker::~pkey_checker() = default;

bool pkey_checker::set_pkey(unsigned index, uint16_t pkey) {
    if (index >= table_.size()) return false;
    auto count = [&](uint16_t key, int d) {
        if (key & 0x7FFF)  // invalid keys (low 15 bits zero) match nothing
            ((key & 0x8000) ? full_ : limited_)[key & 0x7FFF] += uint16_t(d);
    };
    count(table_[index], -1);
    table_[index] = pkey;
    count(pkey, +1);
    if (rtl_) rtl_->write_table(1, uint16_t(index), pkey);  // the RTL's copy, through its write port
    return true;
}

void pkey_checker::bind_qp(uint32_t qpn, uint16_t pkey_index) {
    if (qpn < qp_index_.size()) qp_index_[qpn] = pkey_index < table_.size() ? pkey_index : -1;
}

void pkey_checker::unbind_qp(uint32_t qpn) {
    if (qpn < qp_index_.size()) qp_index_[qpn] = -1;
}

int32_t pkey_checker::find_match(uint16_t pkey) const {
    // A linear scan: only QP1 (management traffic) needs it.
    for (size_t i = 0; i < table_.size(); ++i)
        if (match(pkey, table_[i])) return int32_t(i);
    return -1;
}

pkey_verdict pkey_checker::decide(const rx_packet& p) const {
    pkey_verdict v;
    const uint32_t qpn = p.h.b.dest_qp;
    auto drop = [&](uint8_t reason, uint16_t local_key) {
        v.accept = false;
        v.reason = reason;
        v.local_key = local_key;
        v.trap = true;
        return v;
    };
    if (qpn == SMI_QPN) {
        // C10-131: QP0 takes any P_Key (M_Keys protect management, not partitions).
        v.reason = PKEY_ACCEPT_SMI;
        return v;
    }
    if (qpn == GSI_QPN) {
        // C10-132: QP1 takes a P_Key that matches any valid entry; the entry's index goes with
        // the packet (the CQE's pkey_index).
        const int32_t idx = any_match(p.h.b.pkey) ? find_match(p.h.b.pkey) : -1;
        if (idx < 0) return drop(PKEY_DROP_GSI, 0);
        v.reason = PKEY_ACCEPT_GSI;
        v.index = uint16_t(idx);
        return v;
    }
    if (p.h.l.dlid >= 0xC000 && p.h.l.dlid != 0xFFFF) {
        // Multicast: the port takes a P_Key some valid entry of its table matches (else it is
        // a violation); each attached QP's own entry is matched again when the transport
        // engine delivers the datagram to it.
        if (!any_match(p.h.b.pkey)) {
            // The entry it was refused by: a limited member of its partition if the table has
            // one (both limited: the SMA's multicast trap suppression applies), else none.
            const uint16_t k = p.h.b.pkey & 0x7FFF;
            return drop(PKEY_DROP_MCAST, k && limited_[k] ? k : 0);
        }
        v.reason = PKEY_ACCEPT_MCAST;
        return v;
    }
    const int32_t idx = qpn < qp_index_.size() ? qp_index_[qpn] : -1;
    // A QPN with no binding is no QP of ours in a receiving state: the transport engine
    // drops it and counts it there.
    if (idx >= 0 && !match(p.h.b.pkey, table_[idx])) return drop(PKEY_DROP_QP, table_[idx]);
    return v;
}

void pkey_checker::apply(const rx_packet& p, const pkey_verdict& v) {
    if (!v.accept) {
        if (v.reason != PKEY_DROP_PORT) count_violation(p, v.local_key);
        return;
    }
    if (v.reason == PKEY_ACCEPT_SMI) {
        // C10-12: subnet management MADs are the SMA's, below the verbs: they never reach the
        // transport engine, so never a consumer's QP0 WQEs or CQEs.
        if (smi_ && p.h.b.opcode == wire::op::UD_SEND_ONLY && wire::is_subn_mgmt(p.payload, p.payload_len)) {
            smi_->receive(p);
            return;
        }
    } else if (v.reason == PKEY_ACCEPT_GSI) {
        if (sink_) {
            rx_packet q = p;
            q.pkey_index = v.index;
            sink_->receive(q);
        }
        return;
    }
    if (sink_) sink_->receive(p);
}

void pkey_checker::receive(const rx_packet& p) {
    ++checked;
    if (!rtl_) {
        apply(p, decide(p));
        return;
    }
    if (!divergence_.empty()) return;  // stopped at a divergence: nothing more is checked
    // Hold a copy of the packet until the RTL's verdict.
    if (held_count_ == held_.size()) {
        std::vector<held> bigger(held_.size() * 2);
        for (size_t i = 0; i < held_count_; ++i)
            bigger[i] = std::move(held_[(held_head_ + i) % held_.size()]);
        held_.swap(bigger);
        held_head_ = 0;
    }
    held& h = held_[(held_head_ + held_count_) % held_.size()];
    ++held_count_;
    h.p = p;
    h.bytes.assign(p.payload, p.payload + p.payload_len);
    h.p.payload = h.bytes.data();
    if (compare_) h.tlm = decide(p);
    pkey_request r;
    r.tag = next_tag_++;
    h.tlm.tag = r.tag;
    r.pkey = p.h.b.pkey;
    r.dqpn = p.h.b.dest_qp;
    r.dlid = p.h.l.dlid;
    const uint32_t qpn = p.h.b.dest_qp;
    const int32_t idx = qpn < qp_index_.size() ? qp_index_[qpn] : -1;
    r.qp_bound = idx >= 0;
    r.pkey_index = idx >= 0 ? uint16_t(idx) : 0;
    r.port = 1;
    ++rtl_checks;
    rtl_->check(r);
}

void pkey_checker::rtl_verdict(const pkey_verdict& v) {
    if (!held_count_) {
        diverge("the RTL gave a verdict (tag " + std::to_string(v.tag) + ") with no request outstanding",
                nullptr, nullptr, &v);
        return;
    }
    held& h = held_[held_head_];
    held_head_ = (held_head_ + 1) % held_.size();
    --held_count_;
    if (!divergence_.empty()) return;
    if (v.tag != h.tlm.tag) {
        diverge("verdicts out of order (expected tag " + std::to_string(h.tlm.tag) + ")", &h.p,
                compare_ ? &h.tlm : nullptr, &v);
        return;
    }
    if (compare_) {
        ++rtl_compared;
        if (!(v == h.tlm)) {
            diverge("the verdicts differ", &h.p, &h.tlm, &v);
            return;
        }
    }
    apply(h.p, v);
}

void pkey_checker::rtl_idle() {
    rtl_cycles += rtl_->cycles() - rtl_cycles.value();
    if (!compare_ || !divergence_.empty()) return;
    // Everything handed to the RTL has taken effect: its counters must equal the model's.
    if (rtl_->pkey_violation_count() != pkey_viol_ || rtl_->qkey_violation_count() != qkey_viol_) {
        char b[200];
        std::snprintf(b, sizeof b,
                      "the violation counters differ when idle: P_Key TLM %u RTL %u, Q_Key TLM %u RTL %u",
                      unsigned(pkey_viol_), unsigned(rtl_->pkey_violation_count()), unsigned(qkey_viol_),
                      unsigned(rtl_->qkey_violation_count()));
        diverge(b, nullptr, nullptr, nullptr);
    }
}

void pkey_checker::diverge(const std::string& what, const rx_packet* p, const pkey_verdict* tlm,
                           const pkey_verdict* rtl) {
    ++divergences;
    if (!divergence_.empty()) return;
    char b[256];
    std::snprintf(b, sizeof b, "%s: TLM and RTL diverge at %.3f ns: ", name(),
                  sc_core::sc_time_stamp().to_seconds() * 1e9);
    std::string r = b + what + "\n";
    if (p) {
        std::snprintf(
            b, sizeof b,
            "  packet: LRH SLID 0x%04x DLID 0x%04x SL %u; BTH opcode 0x%02x P_Key 0x%04x DestQP 0x%06x "
            "PSN %u; %u payload bytes\n",
            unsigned(p->h.l.slid), unsigned(p->h.l.dlid), unsigned(p->h.l.sl), unsigned(p->h.b.opcode),
            unsigned(p->h.b.pkey), unsigned(p->h.b.dest_qp), unsigned(p->h.b.psn), unsigned(p->payload_len));
        r += b;
        const uint32_t qpn = p->h.b.dest_qp;
        const int32_t idx = qpn < qp_index_.size() ? qp_index_[qpn] : -1;
        if (idx >= 0) {
            std::snprintf(b, sizeof b, "  destination QP bound to P_Key table index %d (entry 0x%04x)\n",
                          int(idx), unsigned(table_[idx]));
            r += b;
        }
    }
    if (tlm) r += "  TLM verdict: " + tlm->str() + "\n";
    if (rtl) r += "  RTL verdict: " + rtl->str() + "\n";
    r += rtl_->waves_file().empty() ? std::string("  waveform: none (run with --waves FILE.fst)\n")
                                    : "  waveform: " + rtl_->waves_file() + "\n";
    divergence_ = r;
    sc_core::sc_stop();
}

uint16_t pkey_checker::pkey_violation_count() const {
    return rtl_ && !compare_ ? rtl_->pkey_violation_count() : pkey_viol_;
}

uint16_t pkey_checker::qkey_violation_count() const {
    return rtl_ && !compare_ ? rtl_->qkey_violation_count() : qkey_viol_;
}

void pkey_checker::qkey_violation() {
    ++qkey_violations;
    if (qkey_viol_ != 0xFFFF) ++qkey_viol_;
    if (rtl_) rtl_->count_qkey_violation();
}

void pkey_checker::count_violation(const rx_packet& p, uint16_t local_key) {
    ++violations;
    HCASIM_LOG(log_, info,
               "drops a packet for QP 0x" << std::hex << p.h.b.dest_qp << " from SLID 0x" << p.h.l.slid
                                          << ": P_Key 0x" << p.h.b.pkey << " does not match 0x" << local_key);
    if (pkey_viol_ != 0xFFFF) ++pkey_viol_;
    if (violation_sink_) violation_sink_->bad_pkey(p, local_key);
}

void pkey_checker::pkey_violation(const rx_packet& p, uint16_t local_key) {
    if (rtl_) rtl_->count_pkey_violation();  // found outside the checker: the RTL's counter counts it too
    count_violation(p, local_key);
}

}  // namespace hcasim
