// A plug-in library (hcasim_rtl.h) for the CQ writer's contract around a Verilator --cc build of
// it: `verilator --cc --trace-fst rtl/cq_writer.sv` makes Vcq_writer (build with
// -DHCASIM_RTL_TOP=Vother for another prefix). docs/cosim.md, "Plug-in libraries".
#ifndef HCASIM_RTL_TOP
#define HCASIM_RTL_TOP Vcq_writer
#endif
#define HCASIM_RTL_STR2(x) #x
#define HCASIM_RTL_STR(x) HCASIM_RTL_STR2(x)
#include HCASIM_RTL_STR(HCASIM_RTL_TOP.h)

#include "hcasim_rtl_shim.h"

namespace {

using V = HCASIM_RTL_TOP;
using pins = hcasim_rtl_cq_writer_pins;

void in(V& t, const pins& p) {
    t.clk = p.clk;
    t.rst_n = p.rst_n;
    t.cmp_valid = p.cmp_valid;
    t.cmp_tag = p.cmp_tag;
    t.cmp_cqn = p.cmp_cqn & 0xFFFFFF;
    t.cmp_solicited = p.cmp_solicited;
    for (int i = 0; i < 16; ++i) t.cmp_cqe[i] = p.cmp_cqe[i];
    t.ev_valid = p.ev_valid;
    t.ev_tag = p.ev_tag;
    t.ev_type = p.ev_type;
    t.ev_subtype = p.ev_subtype;
    t.ev_resource = p.ev_resource;
    t.cqc_we = p.cqc_we;
    t.cqc_op = p.cqc_op & 3;
    t.cqc_cqn = p.cqc_cqn & 0xFFFFFF;
    t.cqc_base = p.cqc_base;
    t.cqc_log_size = p.cqc_log_size & 0x1F;
    t.cqc_eqn = p.cqc_eqn;
    t.cqc_consumer = p.cqc_consumer & 0xFFFFFF;
    t.eqc_we = p.eqc_we;
    t.eqc_eqn = p.eqc_eqn;
    t.eqc_base = p.eqc_base;
    t.eqc_log_size = p.eqc_log_size & 0x1F;
    t.cqdb_valid = p.cqdb_valid;
    t.cqdb_cqn = p.cqdb_cqn & 0xFFFFFF;
    t.cqdb_consumer = p.cqdb_consumer & 0xFFFFFF;
    t.cqdb_arm = p.cqdb_arm & 3;
    t.msi_we = p.msi_we;
    t.msi_addr_in = p.msi_addr_in;
    t.msi_data_in = p.msi_data_in;
    t.mw_ready = p.mw_ready;
    t.mwr_valid = p.mwr_valid;
    t.mwr_err = p.mwr_err;
}

void out(const V& t, pins& p) {
    p.cmp_ready = t.cmp_ready;
    p.ev_ready = t.ev_ready;
    p.rsp_valid = t.rsp_valid;
    p.rsp_tag = t.rsp_tag;
    p.rsp_written = t.rsp_written;
    p.rsp_reason = t.rsp_reason;
    p.rsp_eqe = t.rsp_eqe;
    p.rsp_msi = t.rsp_msi;
    p.rsp_disarmed = t.rsp_disarmed;
    p.mw_valid = t.mw_valid;
    p.mw_addr = t.mw_addr;
    for (int i = 0; i < 16; ++i) p.mw_data[i] = t.mw_data[i];
    p.mw_len = t.mw_len;
    p.idle = t.idle;
}

}  // namespace

HCASIM_RTL_SHIM(HCASIM_RTL_UNIT_CQ_WRITER, V, pins, in, out)
