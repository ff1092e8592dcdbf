// A plug-in library (hcasim_rtl.h) for the P_Key checker's contract around a Verilator --cc
// build of it: `verilator --cc --trace-fst rtl/pkey_checker.sv` makes Vpkey_checker (build with
// -DHCASIM_RTL_TOP=Vother for another prefix). docs/cosim.md, "Plug-in libraries".
#ifndef HCASIM_RTL_TOP
#define HCASIM_RTL_TOP Vpkey_checker
#endif
#define HCASIM_RTL_STR2(x) #x
#define HCASIM_RTL_STR(x) HCASIM_RTL_STR2(x)
#include HCASIM_RTL_STR(HCASIM_RTL_TOP.h)

#include "hcasim_rtl_shim.h"

namespace {

using V = HCASIM_RTL_TOP;
using pins = hcasim_rtl_pkey_checker_pins;

void in(V& t, const pins& p) {
    t.clk = p.clk;
    t.rst_n = p.rst_n;
    t.req_valid = p.req_valid;
    t.req_tag = p.req_tag;
    t.req_pkey = p.req_pkey;
    t.req_dqpn = p.req_dqpn & 0xFFFFFF;
    t.req_dlid = p.req_dlid;
    t.req_qp_bound = p.req_qp_bound;
    t.req_pkey_index = p.req_pkey_index;
    t.req_port = p.req_port;
    t.tbl_we = p.tbl_we;
    t.tbl_port = p.tbl_port;
    t.tbl_index = p.tbl_index;
    t.tbl_data = p.tbl_data;
    t.pkey_viol_in = p.pkey_viol_in;
    t.qkey_viol_in = p.qkey_viol_in;
}

void out(const V& t, pins& p) {
    p.req_ready = t.req_ready;
    p.vrd_valid = t.vrd_valid;
    p.vrd_tag = t.vrd_tag;
    p.vrd_accept = t.vrd_accept;
    p.vrd_reason = t.vrd_reason;
    p.vrd_index = t.vrd_index;
    p.vrd_local_key = t.vrd_local_key;
    p.pkey_viol_count = t.pkey_viol_count;
    p.qkey_viol_count = t.qkey_viol_count;
    p.trap_valid = t.trap_valid;
    p.trap_pkey = t.trap_pkey;
    p.trap_local_key = t.trap_local_key;
    p.trap_dqpn = t.trap_dqpn;
}

}  // namespace

HCASIM_RTL_SHIM(HCASIM_RTL_UNIT_PKEY_CHECKER, V, pins, in, out)
