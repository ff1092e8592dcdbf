// Transport engine, congestion control (IBA Annex A10; docs/fabric.md "Congestion control"):
// FECN answered with BECN or a CNP, BECN and CNPs acted on, and the requester's injection
// delay after each packet of a flow. Only built when fabric.cc.enable is set (cc_ non-null).
#include "model/core/sim_time.h"
#include "model/hca/pkey_checker.h"
#include "model/hca/port.h"
#include "model/hca/transport_engine.h"

namespace hcasim {

using namespace sc_core;
namespace op = wire::op;

transport_engine::cc_unit::cc_unit(const cc_config& c)
    : ca(ca_cc_settings::from(c)),
      fecn_received("fecn_received", "congestion control: packets that arrived with FECN set"),
      becn_sent("becn_sent", "congestion control: RC responses sent with BECN set (for a FECN)"),
      cnp_sent("cnp_sent", "congestion control: CNPs sent (for a UC or UD packet with FECN)"),
      cnp_received("cnp_received", "congestion control: CNPs received"),
      becn_received("becn_received", "congestion control: BECNs acted on (in RC responses and CNPs)"),
      ccti_max("ccti_max", "congestion control: the highest CCT index any flow of this HCA reached") {}

bool transport_engine::cc_receive(qp& q, const rx_packet& p) {
    const bool cnp = p.h.b.opcode == op::CNP;
    if (p.h.b.becn) {
        // The far end saw our packets marked: this QP's flow slows down.
        const uint64_t now = ps_count(sim_now());
        cc_->ca.on_becn(q.qpn, q.sl, now);
        ++cc_->becn_received;
        if (cnp) ++cc_->cnp_received;
        cc_->note_ccti(cc_->ca.ccti_at(q.qpn, q.sl, now));
    }
    if (cnp || !p.h.b.fecn) return cnp;
    ++cc_->fecn_received;
    const uint8_t tr = p.h.b.opcode & op::TRANSPORT_MASK;
    const uint8_t code = p.h.b.opcode & 0x1F;
    if (tr == op::RC) {
        // A request: its ACK (sent at once) or the QP's next response carries BECN. A marked
        // response is not answered [model]: its flow is the responder's, told nothing here.
        const bool response = code == op::ACKNOWLEDGE || code == op::ATOMIC_ACKNOWLEDGE ||
                              (code >= op::RDMA_READ_RESPONSE_FIRST && code <= op::RDMA_READ_RESPONSE_ONLY);
        if (!response) q.rsp.becn_owed = true;
    } else if (tr == op::UD) {
        cc_send_cnp(p, p.h.d.src_qp);
    } else if (tr == op::UC) {
        cc_send_cnp(p, q.dest_qpn);
    }
    return false;
}

void transport_engine::cc_send_cnp(const rx_packet& p, uint32_t dest_qp) {
    // To the packet's sender, on its SL and P_Key, without a GRH [model] (Linux hfi1
    // return_cnp builds it from the marked packet the same way).
    wire::headers h = wire::BLANK_HEADERS;
    h.l.sl = p.h.l.sl;
    h.l.dlid = p.h.l.slid;
    h.l.slid = lid_;
    h.b.pkey = p.h.b.pkey;
    h.b.dest_qp = dest_qp;
    const size_t len = wire::encode_cnp(h, ack_pkt_->bytes);
    port_->transmit(ack_pkt_, uint32_t(len - wire::ICRC_BYTES - wire::VCRC_BYTES), rx_latency_);
    ++cc_->cnp_sent;
}

bool transport_engine::cc_take_becn(qp& q) {
    if (!q.rsp.becn_owed) return false;
    q.rsp.becn_owed = false;
    ++cc_->becn_sent;
    return true;
}

bool transport_engine::cc_hold(qp& q) {
    if (!cc_->ca.settings().sl_based) return false;
    const sc_time& free = cc_->sl_free[q.sl & 15];
    if (free <= sim_now()) return false;
    park(q, free);
    return true;
}

void transport_engine::cc_space(qp& q, const sc_time& sent, const sc_time& lead, uint32_t len_before_icrc) {
    const uint32_t wire_len = len_before_icrc + uint32_t(wire::ICRC_BYTES + wire::VCRC_BYTES);
    const uint64_t t_pkt = ps_count(ps_time(double(wire_len) * cc_->ps_per_byte));
    const uint64_t now = ps_count(sim_now());
    const uint64_t gap = cc_->ca.injection_delay_ps(q.qpn, q.sl, now, t_pkt);
    cc_->note_ccti(cc_->ca.ccti_at(q.qpn, q.sl, now));  // a flow starts at CCTI_Min
    if (!gap) return;
    // The flow's next packet starts `gap` after this one's last bit: it is picked `lead`
    // earlier, the time this one needed from the requester to the wire (a wait for the wire
    // behind other packets is not counted: the next one would wait too).
    const sc_time next_start = sim_now() + sent + ps_time(double(gap));
    if (next_start <= sim_now() + lead) return;
    const sc_time until = next_start - lead;
    if (cc_->ca.settings().sl_based) cc_->sl_free[q.sl & 15] = until;
    park(q, until);
}

}  // namespace hcasim
