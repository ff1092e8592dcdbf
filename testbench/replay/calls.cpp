#include "testbench/replay/replayer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "testbench/workloads/workloads.h"

namespace hcasim::replay {

namespace {

/// The attribute keys Modify QP and Modify EEC share, with the same mask bits (ibv_qp_attr_mask):
/// P_Key index, port, PSNs, READ/atomic limits, RNR timer, timeout, retries, the path MTU and the
/// primary path (`dlid` or `dest_node`, through `lid_of`). Returns their mask bits.
/// The alternate path keys (IBA 10.4: the alt_* keys together) and path_mig_state of
/// modify_qp and modify_eec (o10-23) into `at`; returns their mask bits.
template <class Attr>
int alt_path_attrs(const json& a, Attr& at) {
    int mask = 0;
    if (a.contains("alt_dlid")) {
        at.alt_ah_attr.dlid = a["alt_dlid"].get<uint16_t>();
        at.alt_ah_attr.sl = a.value("alt_sl", uint8_t(0));
        at.alt_ah_attr.src_path_bits = a.value("alt_src_path_bits", uint8_t(0));
        at.alt_ah_attr.port_num = at.alt_port_num = a.value("alt_port_num", uint8_t(1));
        at.alt_pkey_index = a.value("alt_pkey_index", uint16_t(0));
        at.alt_timeout = a.value("alt_timeout", uint8_t(0));
        mask |= IBV_QP_ALT_PATH;
    }
    if (a.contains("path_mig_state")) {
        trace::mig_state_of(a["path_mig_state"], &at.path_mig_state);  // checked when the trace was read
        mask |= IBV_QP_PATH_MIG_STATE;
    }
    return mask;
}

template <class Attr, class LidOf>
int path_attrs(const json& a, Attr& at, LidOf lid_of) {
    int mask = 0;
    auto num = [&](const char* k, auto& field, int bit) {
        if (a.contains(k)) {
            field = a[k].get<std::remove_reference_t<decltype(field)>>();
            mask |= bit;
        }
    };
    num("pkey_index", at.pkey_index, IBV_QP_PKEY_INDEX);
    num("port_num", at.port_num, IBV_QP_PORT);
    num("rq_psn", at.rq_psn, IBV_QP_RQ_PSN);
    num("sq_psn", at.sq_psn, IBV_QP_SQ_PSN);
    num("max_rd_atomic", at.max_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC);
    num("max_dest_rd_atomic", at.max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC);
    num("min_rnr_timer", at.min_rnr_timer, IBV_QP_MIN_RNR_TIMER);
    num("timeout", at.timeout, IBV_QP_TIMEOUT);
    num("retry_cnt", at.retry_cnt, IBV_QP_RETRY_CNT);
    num("rnr_retry", at.rnr_retry, IBV_QP_RNR_RETRY);
    if (a.contains("path_mtu")) {
        const unsigned mtu = a["path_mtu"];
        at.path_mtu = ibv_mtu(mtu >= 256 ? __builtin_ctz(mtu) - 7 : 0);
        mask |= IBV_QP_PATH_MTU;
    }
    if (a.contains("dlid") || a.contains("dest_node")) {
        at.ah_attr.dlid =
            a.contains("dlid") ? a["dlid"].get<uint16_t>() : lid_of(a["dest_node"].get<unsigned>());
        at.ah_attr.sl = a.value("sl", uint8_t(0));
        at.ah_attr.src_path_bits = a.value("src_path_bits", uint8_t(0));
        at.ah_attr.port_num = 1;
        mask |= IBV_QP_AV;
    }
    return mask;
}

}  // namespace

replayer::node_objs& replayer::objs_of(const std::string& ref, unsigned own, std::string* name) {
    unsigned n = own;
    split_ref(ref, own, &n, name);
    return objs_.at(n);
}

uint64_t replayer::buf_addr(unsigned node, const json& j) {
    if (j.contains("buf")) {
        auto& b = objs_[node].buf[j["buf"].get<std::string>()];
        return b.first + j.value("offset", uint64_t(0));
    }
    return j.value("addr", uint64_t(0));
}

std::vector<ibv_sge> replayer::sges(unsigned node, const json& sg) {
    std::vector<ibv_sge> out;
    for (const json& s : sg) {
        ibv_sge e{};
        e.length = s["len"].get<uint32_t>();
        if (s.contains("mr")) {
            std::string name;
            ibv_mr* mr = find(objs_of(s["mr"], node, &name).mr, name);
            e.addr = (mr ? mr->addr : 0) + s.value("offset", uint64_t(0));
            e.lkey = mr ? mr->lkey : 0;
        } else {
            e.addr = s["addr"];
            e.lkey = s["lkey"];
        }
        out.push_back(e);
    }
    return out;
}

uint32_t replayer::qp_num_of(const std::string& ref, unsigned own) {
    std::string name;
    ibv_qp* q = find(objs_of(ref, own, &name).qp, name);
    return q ? q->qp_num : 0;
}

uint32_t replayer::eec_num_of(const std::string& ref, unsigned own) {
    std::string name;
    ibv_eec* e = find(objs_of(ref, own, &name).eec, name);
    return e ? e->eecn : 0;
}

uint32_t replayer::srq_num_of(const std::string& ref, unsigned own) {
    std::string name;
    ibv_srq* q = find(objs_of(ref, own, &name).srq, name);
    uint32_t n = 0;
    if (q) ibv_get_srq_num(q, &n);
    return n;
}

const std::map<std::string, replayer::handler>& replayer::handlers() {
    static const std::map<std::string, handler> h = {
        {"alloc", &replayer::call_alloc},
        {"fill", &replayer::call_fill},
        {"wait_byte", &replayer::call_wait_byte},
        {"sleep", &replayer::call_sleep},
        {"alloc_pd", &replayer::call_alloc_pd},
        {"reg_mr", &replayer::call_reg_mr},
        {"dereg_mr", &replayer::call_dereg_mr},
        {"create_cq", &replayer::call_create_cq},
        {"open_xrcd", &replayer::call_open_xrcd},
        {"close_xrcd", &replayer::call_close_xrcd},
        {"alloc_rdd", &replayer::call_alloc_rdd},
        {"dealloc_rdd", &replayer::call_dealloc_rdd},
        {"create_eec", &replayer::call_create_eec},
        {"modify_eec", &replayer::call_modify_eec},
        {"query_eec", &replayer::call_query_eec},
        {"destroy_eec", &replayer::call_destroy_eec},
        {"create_srq", &replayer::call_create_srq},
        {"destroy_srq", &replayer::call_destroy_srq},
        {"modify_srq", &replayer::call_modify_srq},
        {"create_qp", &replayer::call_create_qp},
        {"modify_qp", &replayer::call_modify_qp},
        {"destroy_qp", &replayer::call_destroy_qp},
        {"create_ah", &replayer::call_create_ah},
        {"attach_mcast", &replayer::call_attach_mcast},
        {"post_send", &replayer::call_post_send},
        {"post_recv", &replayer::call_post_recv},
        {"post_srq_recv", &replayer::call_post_recv},
        {"poll_cq", &replayer::call_poll_cq},
    };
    return h;
}

json replayer::created(const step& s, unsigned node, const void* obj, const char* kind) {
    const json& j = s.j;
    const std::string name = j["ret"].is_string() ? j["ret"].get<std::string>() : "";
    if (!obj) return json();
    return rec_.add(node, obj, kind, name);
}

void replayer::call_alloc(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    host_software& sw = *sw_[node];
    node_objs& o = objs_[node];
    const uint64_t len = j.value("len", uint64_t(4096)), align = j.value("align", uint64_t(4096));
    const uint64_t va = sw.as.alloc(len, align);
    json r;
    if (va) {
        r = rec_.add_buffer(node, va, len, j["ret"].is_string() ? j["ret"].get<std::string>() : "");
        o.buf[r] = {va, len};
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_fill(const step& s, unsigned node, json&) {
    const json& j = s.j;
    host_software& sw = *sw_[node];
    node_objs& o = objs_[node];
    const auto& b = o.buf[j["buf"].get<std::string>()];
    const uint64_t off = j.value("offset", uint64_t(0));
    const uint64_t len = j.value("len", b.second > off ? b.second - off : 0);
    const uint64_t va = b.first + off;
    bool mapped;
    if (j.contains("hex")) {
        std::vector<uint8_t> bytes;
        trace::unhex(j["hex"], &bytes);  // checked when the trace was read
        mapped = sw.as.write(va, bytes.data(), bytes.size());
    } else if (j.contains("byte")) {
        mapped = sw.as.fill_byte(va, len, j["byte"].get<uint8_t>());
    } else if (j.contains("key")) {
        std::vector<uint8_t> bytes(len);
        verify::fill(j["key"].get<uint64_t>(), bytes.data(), len);
        mapped = sw.as.write(va, bytes.data(), len);
    } else {
        mapped = sw.as.fill(va, len, uint8_t(j.value("seed", 0u)));
    }
    if (!mapped) throw std::runtime_error("the range it fills runs past its buffer into unmapped memory");
}

void replayer::call_wait_byte(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    host_software& sw = *sw_[node];
    node_objs& o = objs_[node];
    const uint64_t va = o.buf[j["buf"].get<std::string>()].first + j.value("offset", uint64_t(0));
    const uint8_t v = j.value("value", uint8_t(0));
    uint64_t pa = 0;
    if (!sw.as.translate(va, &pa)) throw std::runtime_error("the byte it waits for is not mapped");
    int r = 0;
    for (;;) {
        uint8_t b = 0;
        (void)sw.as.read(va, &b, 1);  // cannot fail: translated just above
        if (b == v) break;
        if (!m_.at(node).cpu.wait_write(pa, 1, j.value("timeout_ns", uint64_t(10'000'000)))) {
            r = -1;
            break;
        }
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_sleep(const step& s, unsigned, json&) {
    const json& j = s.j;
    wait(sc_time(double(j.value("ns", uint64_t(0))), SC_NS));
}

void replayer::call_alloc_pd(const step& s, unsigned node, json& out) {
    node_objs& o = objs_[node];
    ibv_context* ctx = ctx_[node];
    ibv_pd* pd = ibv_alloc_pd(ctx);
    const json r = created(s, node, pd, "pd");
    if (pd) o.pd[r] = pd;
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_reg_mr(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    unsigned access = 0;
    std::string why;
    if (j.contains("access")) trace::access_flags_of(j["access"], &access, &why);
    const uint64_t va = buf_addr(node, j);
    const uint64_t len = j.value("len", j.contains("buf") ? o.buf[j["buf"].get<std::string>()].second : 0);
    ibv_mr* mr = ibv_reg_mr(o.pd[j["pd"].get<std::string>()], va, len, int(access));
    json r;
    if (mr) {
        r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "mr");
        rec_.add_mr(node, mr, r);
        o.mr[r] = mr;
        out["lkey"] = mr->lkey;
        out["rkey"] = mr->rkey;
    } else {
        out["errno"] = errno;
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_dereg_mr(const step& s, unsigned node, json& out) {
    destroy_named(s, out, objs_[node].mr, "mr", ibv_dereg_mr);
}

void replayer::call_create_cq(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_context* ctx = ctx_[node];
    ibv_cq* cq = ibv_create_cq(ctx, j.value("cqe", 64));
    const json r = created(s, node, cq, "cq");
    if (cq) o.cq[r] = cq;
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_open_xrcd(const step& s, unsigned node, json& out) {
    adopt(s, node, out, ibv_open_xrcd(ctx_[node]), "xrcd", objs_[node].xrcd);
}

void replayer::call_close_xrcd(const step& s, unsigned node, json& out) {
    destroy_named(s, out, objs_[node].xrcd, "xrcd", ibv_close_xrcd);
}

// Reliable datagram (IBA 10.2.8, 10.2.7): domains and EE contexts.
void replayer::call_alloc_rdd(const step& s, unsigned node, json& out) {
    adopt(s, node, out, ibv_alloc_rdd(ctx_[node]), "rdd", objs_[node].rdd);
}

void replayer::call_dealloc_rdd(const step& s, unsigned node, json& out) {
    destroy_named(s, out, objs_[node].rdd, "rdd", ibv_dealloc_rdd);
}

void replayer::call_create_eec(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_eec* e = ibv_create_eec(o.rdd[j["rdd"].get<std::string>()]);
    json r;
    if (e) {
        r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "eec");
        rec_.add_eec(node, e, r);
        o.eec[r] = e;
        out["eecn"] = e->eecn;
    } else {
        out["errno"] = errno;
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_modify_eec(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    ibv_eec* e = objs_[node].eec[j["eec"].get<std::string>()];
    const json& a = j["attr"];
    ibv_eec_attr at{};
    int mask = 0;
    if (a.contains("eec_state")) {
        trace::qp_state_of(a["eec_state"], &at.eec_state);  // checked when the trace was read
        mask |= IBV_QP_STATE;
    }
    mask |= path_attrs(a, at, [this](unsigned n) { return lid_of(n); });
    mask |= alt_path_attrs(a, at);
    if (a.contains("dest_eecn")) {
        at.dest_eecn = a["dest_eecn"].get<uint32_t>();
        mask |= IBV_QP_DEST_QPN;
    }
    if (a.contains("dest_eec")) {
        at.dest_eecn = eec_num_of(a["dest_eec"], node);
        mask |= IBV_QP_DEST_QPN;
    }
    const int r = ibv_modify_eec(e, &at, mask);
    expect(s, "ret", r);
    out["ret"] = r;
}

// Query EEC: its return value and state are compared; the PSNs, which depend on how far the
// traffic had gone when the call was made, are for information.
void replayer::call_query_eec(const step& s, unsigned node, json& out) {
    ibv_eec_attr a{};
    const int r = ibv_query_eec(objs_[node].eec[s.j["eec"].get<std::string>()], &a);
    if (r == 0) {
        out["eec_state"] = trace::qp_state_name(a.eec_state);
        out["sq_psn"] = a.sq_psn;
        out["rq_psn"] = a.rq_psn;
        expect(s, "eec_state", out["eec_state"]);
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_destroy_eec(const step& s, unsigned node, json& out) {
    destroy_named(s, out, objs_[node].eec, "eec", ibv_destroy_eec);
}

void replayer::call_create_srq(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_srq_init_attr a{};
    a.attr.max_wr = j.value("max_wr", 64u);
    a.attr.max_sge = j.value("max_sge", 1u);
    if (j.contains("type")) trace::srq_type_of(j["type"], &a.srq_type);  // checked when the trace was read
    if (a.srq_type == IBV_SRQT_XRC) {
        a.xrcd = o.xrcd[j["xrcd"].get<std::string>()];
        a.cq = o.cq[j["cq"].get<std::string>()];
    }
    ibv_srq* srq = ibv_create_srq(o.pd[j["pd"].get<std::string>()], &a);
    json r;
    if (srq) {
        r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "srq");
        rec_.add_srq(node, srq, r);
        o.srq[r] = srq;
        if (srq->xrcd) out["srq_num"] = srq->handle;
    } else {
        out["errno"] = errno;
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_destroy_srq(const step& s, unsigned node, json& out) {
    destroy_named(s, out, objs_[node].srq, "srq", ibv_destroy_srq);
}

void replayer::call_modify_srq(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_srq_attr a{};
    a.srq_limit = j.value("srq_limit", 0u);
    const int r = ibv_modify_srq(o.srq[j["srq"].get<std::string>()], &a, IBV_SRQ_LIMIT);
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_create_qp(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_qp_init_attr a{};
    trace::qp_type_of(j["type"], &a.qp_type);
    // Which of these a QP of its type has was checked when the trace was read.
    if (j.contains("send_cq")) a.send_cq = o.cq[j["send_cq"].get<std::string>()];
    if (j.contains("recv_cq")) a.recv_cq = o.cq[j["recv_cq"].get<std::string>()];
    if (j.contains("srq")) a.srq = o.srq[j["srq"].get<std::string>()];
    if (j.contains("xrcd")) a.xrcd = o.xrcd[j["xrcd"].get<std::string>()];
    if (j.contains("rdd")) a.rdd = o.rdd[j["rdd"].get<std::string>()];
    const json cap = j.value("cap", json::object());
    a.cap.max_send_wr = cap.value("max_send_wr", 64u);
    a.cap.max_recv_wr = cap.value("max_recv_wr", 64u);
    a.cap.max_send_sge = cap.value("max_send_sge", 1u);
    a.cap.max_recv_sge = cap.value("max_recv_sge", 1u);
    a.cap.max_inline_data = cap.value("max_inline_data", 0u);
    a.sq_sig_all = j.value("sq_sig_all", false) ? 1 : 0;
    ibv_qp* qp = ibv_create_qp(j.contains("pd") ? o.pd[j["pd"].get<std::string>()] : nullptr, &a);
    json r;
    if (qp) {
        r = j["ret"].is_string() ? j["ret"].get<std::string>() : rec_.add(node, nullptr, "qp");
        rec_.add_qp(node, qp, r);
        o.qp[r] = qp;
        out["qp_num"] = qp->qp_num;
    } else {
        out["errno"] = errno;
    }
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_destroy_qp(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_qp* qp = o.qp[j["qp"].get<std::string>()];
    int r = 0;
    r = ibv_destroy_qp(qp);
    if (r == 0) o.qp.erase(j["qp"].get<std::string>());
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_modify_qp(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_qp* qp = o.qp[j["qp"].get<std::string>()];
    int r = 0;
    const json& a = j["attr"];
    ibv_qp_attr at{};
    int mask = 0;
    if (a.contains("qp_state")) {
        trace::qp_state_of(a["qp_state"], &at.qp_state);
        mask |= IBV_QP_STATE;
    }
    mask |= path_attrs(a, at, [this](unsigned n) { return lid_of(n); });
    if (a.contains("qkey")) {
        at.qkey = a["qkey"].get<uint32_t>();
        mask |= IBV_QP_QKEY;
    }
    if (a.contains("dest_qp_num")) {
        at.dest_qp_num = a["dest_qp_num"].get<uint32_t>();
        mask |= IBV_QP_DEST_QPN;
    }
    if (a.contains("qp_access_flags")) {
        std::string why;
        trace::access_flags_of(a["qp_access_flags"], &at.qp_access_flags, &why);
        mask |= IBV_QP_ACCESS_FLAGS;
    }
    if (a.contains("dest_qp")) {
        at.dest_qp_num = qp_num_of(a["dest_qp"], node);
        mask |= IBV_QP_DEST_QPN;
    }
    mask |= alt_path_attrs(a, at);
    r = ibv_modify_qp(qp, &at, mask);
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_create_ah(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_ah_attr a{};
    a.dlid = j.contains("dlid") ? j["dlid"].get<uint16_t>() : lid_of(j.value("dest_node", 0u));
    a.sl = j.value("sl", uint8_t(0));
    a.port_num = 1;
    if (j.contains("dgid")) {  // a global route (multicast needs it)
        a.is_global = 1;
        trace::gid_of(j["dgid"], &a.grh.dgid);
        a.grh.hop_limit = j.value("hop_limit", uint8_t(1));
    }
    ibv_ah* ah = ibv_create_ah(o.pd[j["pd"].get<std::string>()], &a);
    const json r = created(s, node, ah, "ah");
    if (ah) o.ah[r] = ah;
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_attach_mcast(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_gid g{};
    trace::gid_of(j["gid"], &g);
    const int r = ibv_attach_mcast(o.qp[j["qp"].get<std::string>()], &g, j["lid"].get<uint16_t>());
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_post_send(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    const json& list = j["wr"];
    std::vector<ibv_send_wr> wrs(list.size());
    std::vector<std::vector<ibv_sge>> sg(list.size());
    for (size_t k = 0; k < list.size(); ++k) {
        const json& w = list[k];
        ibv_send_wr& wr = wrs[k];
        wr.wr_id = w["wr_id"];
        trace::wr_opcode_of(w["opcode"], &wr.opcode);
        std::string why;
        if (w.contains("flags")) trace::send_flags_of(w["flags"], &wr.send_flags, &why);
        sg[k] = sges(node, w.value("sg", json::array()));
        wr.sg_list = sg[k].empty() ? nullptr : sg[k].data();
        wr.num_sge = int(sg[k].size());
        wr.imm_data = w.value("imm", 0u);
        wr.invalidate_rkey = w.value("invalidate_rkey", 0u);
        if (w.contains("remote")) {
            const json& r = w["remote"];
            uint64_t addr = r.value("addr", uint64_t(0));
            uint32_t rkey = r.value("rkey", 0u);
            if (r.contains("mr")) {
                std::string name;
                ibv_mr* mr = find(objs_of(r["mr"], node, &name).mr, name);
                addr = (mr ? mr->addr : 0) + r.value("offset", uint64_t(0));
                rkey = mr ? mr->rkey : 0;
            }
            wr.wr.rdma.remote_addr = wr.wr.atomic.remote_addr = addr;
            wr.wr.rdma.rkey = wr.wr.atomic.rkey = rkey;
        }
        wr.wr.atomic.compare_add = w.value("compare_add", uint64_t(0));
        wr.wr.atomic.swap = w.value("swap", uint64_t(0));
        if (w.contains("ah")) {
            wr.wr.ud.ah = o.ah[w["ah"].get<std::string>()];
            wr.wr.ud.remote_qpn =
                w.contains("remote_qp") ? qp_num_of(w["remote_qp"], node) : w.value("remote_qpn", 0u);
            wr.wr.ud.remote_qkey = w.value("remote_qkey", 0u);
        }
        if (w.contains("eec")) {  // reliable datagram: through an EE context to the QP behind its peer
            wr.rd.eec = o.eec[w["eec"].get<std::string>()];
            wr.rd.remote_qpn =
                w.contains("remote_qp") ? qp_num_of(w["remote_qp"], node) : w.value("remote_qpn", 0u);
            wr.rd.remote_qkey = w.value("remote_qkey", 0u);
        }
        wr.xrc_remote_srqn =
            w.contains("remote_srq") ? srq_num_of(w["remote_srq"], node) : w.value("remote_srqn", 0u);
        wr.next = k + 1 < list.size() ? &wrs[k + 1] : nullptr;
        producers_[{node, j["qp"].get<std::string>(), wr.wr_id}] = s.line;
    }
    ibv_send_wr* bad = nullptr;
    const int r = ibv_post_send(o.qp[j["qp"].get<std::string>()], wrs.data(), &bad);
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_post_recv(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    const std::string call = j["call"];
    node_objs& o = objs_[node];
    const json& list = j["wr"];
    std::vector<ibv_recv_wr> wrs(list.size());
    std::vector<std::vector<ibv_sge>> sg(list.size());
    const std::string owner = call == "post_recv" ? j["qp"].get<std::string>() : j["srq"].get<std::string>();
    for (size_t k = 0; k < list.size(); ++k) {
        wrs[k].wr_id = list[k]["wr_id"];
        sg[k] = sges(node, list[k].value("sg", json::array()));
        wrs[k].sg_list = sg[k].empty() ? nullptr : sg[k].data();
        wrs[k].num_sge = int(sg[k].size());
        wrs[k].next = k + 1 < list.size() ? &wrs[k + 1] : nullptr;
        producers_[{node, owner, wrs[k].wr_id}] = s.line;
    }
    ibv_recv_wr* bad = nullptr;
    const int r = call == "post_recv" ? ibv_post_recv(o.qp[owner], wrs.data(), &bad)
                                      : ibv_post_srq_recv(o.srq[owner], wrs.data(), &bad);
    expect(s, "ret", r);
    out["ret"] = r;
}

void replayer::call_poll_cq(const step& s, unsigned node, json& out) {
    const json& j = s.j;
    node_objs& o = objs_[node];
    ibv_cq* cq = o.cq[j["cq"].get<std::string>()];
    const size_t want = j.contains("wc") ? j["wc"].size() : j["count"].get<size_t>();
    const uint64_t timeout = j.value("timeout_ns", uint64_t(10'000'000));
    json got = json::array();
    std::vector<ibv_wc> wcs(std::max<size_t>(want, 1));
    while (got.size() < want) {
        const int n = ibv_poll_cq(cq, int(want - got.size()), wcs.data());
        if (n < 0) break;
        for (int k = 0; k < n; ++k) got.push_back(rec_.wc(node, wcs[k]));
        if (got.size() < want && n == 0 && ibv_wait_cq(cq, timeout) != 0) break;
    }
    completions += got.size();
    if (j.contains("wc")) {
        const json& exp = j["wc"];
        for (size_t k = 0; k < exp.size(); ++k) {
            ++compared;
            if (k >= got.size()) {
                diff("completion", s.line,
                     "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() +
                         ": completion " + std::to_string(k + 1) + " of " + std::to_string(exp.size()) +
                         " never came (timed out after " + std::to_string(timeout) + " ns); expected " +
                         exp[k].dump());
                break;
            }
            if (exp[k] != got[k]) {
                std::string field;
                for (auto& kv : exp[k].items())
                    if (got[k].value(kv.key(), json()) != kv.value()) {
                        field = kv.key() + " expected " + kv.value().dump() + ", got " +
                                got[k].value(kv.key(), json()).dump();
                        break;
                    }
                if (field.empty()) field = "expected " + exp[k].dump() + ", got " + got[k].dump();
                std::string ctx_line;
                const std::string owner = exp[k].value("qp", std::string());
                auto it = producers_.find({node, owner, exp[k].value("wr_id", uint64_t(0))});
                if (it == producers_.end())  // an SRQ's WR: any owner on the node
                    for (auto p = producers_.begin(); p != producers_.end(); ++p)
                        if (std::get<0>(p->first) == node &&
                            std::get<2>(p->first) == exp[k].value("wr_id", uint64_t(0)))
                            it = p;
                if (it != producers_.end())
                    ctx_line = "\n  produced by " + t_.path + ":" + std::to_string(it->second) + ": " +
                               line_text(it->second);
                diff("completion", s.line,
                     "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() +
                         ": completion " + std::to_string(k + 1) + " of " + std::to_string(exp.size()) +
                         ": " + field + "\n  expected " + exp[k].dump() + "\n  got      " + got[k].dump() +
                         ctx_line);
                break;
            }
        }
        if (tolerance_ >= 0 && j.contains("t_done_ps")) {
            const double e = j["t_done_ps"].get<double>(), a = double(sc_time_stamp().value());
            if (std::abs(a - e) > tolerance_ * e) {
                char b[200];
                std::snprintf(b, sizeof b,
                              "poll_cq node %u: the completions were there at %.3f ns, recorded at "
                              "%.3f ns (tolerance %g%%)",
                              node, a / 1000.0, e / 1000.0, tolerance_ * 100.0);
                diff("time", s.line, b);
            }
        }
    } else if (got.size() < want) {
        diff("completion", s.line,
             "poll_cq node " + std::to_string(node) + " " + j["cq"].get<std::string>() + ": " +
                 std::to_string(got.size()) + " of " + std::to_string(want) + " completions within " +
                 std::to_string(timeout) + " ns");
    }
    out.erase("count");
    out.erase("t_done_ps");
    out["ret"] = got.size();
    out["wc"] = got;
    out["t_done_ps"] = uint64_t(sc_time_stamp().value());
}

std::string replayer::line_text(size_t line) const {
    for (const step& s : t_.steps)
        if (s.line == line) {
            std::string d = s.j.dump();
            return d.size() > 240 ? d.substr(0, 240) + "..." : d;
        }
    return "";
}

}  // namespace hcasim::replay
