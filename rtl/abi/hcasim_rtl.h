/* hcasim RTL plug-in ABI: the C boundary between hcasim's transactors and a unit's RTL built by
 * its team (Verilator --cc, plain C++, no SystemC) into a shared library, loaded with
 * `--set hca.<unit>.rtl_lib=PATH` (docs/cosim.md, "Plug-in libraries").
 *
 * One pin struct per unit mirrors that unit's pin-level contract in docs/cosim.md, pin for pin
 * under the same names: inputs (hcasim writes them) then outputs (the library writes them).
 * Widths up to 64 bits are the smallest fixed-width unsigned integer holding them (1-bit pins:
 * 0 or 1); a 512-bit bus is uint32_t[16], word i holding bits 32i+31..32i (little-endian:
 * byte i of a CQE is bits 8i+7..8i). Bits above a pin's width are zero both ways.
 *
 * Version rule: HCASIM_RTL_ABI_VERSION changes with any change to a pin struct (a pin added,
 * removed, renamed, widened or moved) or to a function below. hcasim loads a library only if
 * hcasim_rtl_abi_version() returns exactly the version hcasim was built with; rebuild the
 * library against the new header (and contract) when it changes.
 *
 * C99 and C++. */
#ifndef HCASIM_RTL_H
#define HCASIM_RTL_H

#include <stddef.h>
#include <stdint.h>

#define HCASIM_RTL_ABI_VERSION 1u

/* hcasim_rtl_unit() of a library implementing the contract of... */
#define HCASIM_RTL_UNIT_PKEY_CHECKER "pkey_checker" /* rtl/pkey_checker.sv */
#define HCASIM_RTL_UNIT_CQ_WRITER "cq_writer"       /* rtl/cq_writer.sv */

/* The P_Key checker's pins (docs/cosim.md, "The pin-level contract"). */
struct hcasim_rtl_pkey_checker_pins {
    /* inputs */
    uint8_t clk, rst_n;
    uint8_t req_valid, req_tag;
    uint16_t req_pkey;
    uint32_t req_dqpn; /* 24 bits */
    uint16_t req_dlid;
    uint8_t req_qp_bound;
    uint16_t req_pkey_index;
    uint8_t req_port;
    uint8_t tbl_we, tbl_port;
    uint16_t tbl_index, tbl_data;
    uint8_t pkey_viol_in, qkey_viol_in;
    /* outputs */
    uint8_t req_ready;
    uint8_t vrd_valid, vrd_tag, vrd_accept, vrd_reason; /* reason: 3 bits */
    uint16_t vrd_index, vrd_local_key;
    uint16_t pkey_viol_count, qkey_viol_count;
    uint8_t trap_valid;
    uint16_t trap_pkey, trap_local_key;
    uint32_t trap_dqpn; /* 24 bits */
};

/* The CQ writer's pins (docs/cosim.md, "The CQ writer as RTL"). */
struct hcasim_rtl_cq_writer_pins {
    /* inputs */
    uint8_t clk, rst_n;
    uint8_t cmp_valid, cmp_tag;
    uint32_t cmp_cqn; /* 24 bits */
    uint8_t cmp_solicited;
    uint32_t cmp_cqe[16]; /* 512 bits */
    uint8_t ev_valid, ev_tag, ev_type, ev_subtype;
    uint32_t ev_resource;
    uint8_t cqc_we, cqc_op; /* op: 2 bits */
    uint32_t cqc_cqn;       /* 24 bits */
    uint64_t cqc_base;
    uint8_t cqc_log_size; /* 5 bits */
    uint16_t cqc_eqn;
    uint32_t cqc_consumer; /* 24 bits */
    uint8_t eqc_we;
    uint16_t eqc_eqn;
    uint64_t eqc_base;
    uint8_t eqc_log_size; /* 5 bits */
    uint8_t cqdb_valid;
    uint32_t cqdb_cqn, cqdb_consumer; /* 24 bits each */
    uint8_t cqdb_arm;                 /* 2 bits */
    uint8_t msi_we;
    uint64_t msi_addr_in;
    uint32_t msi_data_in;
    uint8_t mw_ready, mwr_valid, mwr_err;
    /* outputs */
    uint8_t cmp_ready, ev_ready;
    uint8_t rsp_valid, rsp_tag, rsp_written, rsp_reason; /* reason: 3 bits */
    uint8_t rsp_eqe, rsp_msi, rsp_disarmed;
    uint8_t mw_valid;
    uint64_t mw_addr;
    uint32_t mw_data[16]; /* 512 bits */
    uint8_t mw_len;       /* 7 bits */
    uint8_t idle;
};

#ifdef __cplusplus
extern "C" {
#endif

/* The symbols a library exports (all five; hcasim names a missing one). */

/* HCASIM_RTL_ABI_VERSION as the library was built. */
uint32_t hcasim_rtl_abi_version(void);
/* The unit whose contract (and pin struct) the library implements: HCASIM_RTL_UNIT_*. */
const char* hcasim_rtl_unit(void);
/* One instance of the RTL, in reset state as after power-on (inputs all zero). `scope`: its
 * hierarchical name in hcasim (e.g. "node0.hca.pkey_checker.rtl.pkey_checker"), for waves and
 * messages.
 * `waves`: an FST file to write the instance's signals to, "" for none (hcasim gives every
 * instance a file of its own). Returns NULL on failure with a one-line reason in `error`
 * (`error_len` bytes, NUL-terminated). Several instances may live at once. */
void* hcasim_rtl_create(const char* scope, const char* waves, char* error, size_t error_len);
/* Reads every input of `pins` (the unit's struct), evaluates the RTL until it settles (a
 * clock edge when clk changed since the last call) and writes every output to `pins`.
 * `time_ps`: hcasim's time in picoseconds (non-decreasing; several calls may share one time),
 * for the waves. hcasim calls it whenever an input pin changes, as a verilated SystemC model
 * evaluates, so outputs change one delta cycle after the inputs that caused them. */
void hcasim_rtl_eval(void* instance, void* pins, uint64_t time_ps);
/* Ends the instance (the RTL's final blocks, the waves file closed) and frees it. */
void hcasim_rtl_destroy(void* instance);

typedef uint32_t (*hcasim_rtl_abi_version_fn)(void);
typedef const char* (*hcasim_rtl_unit_fn)(void);
typedef void* (*hcasim_rtl_create_fn)(const char*, const char*, char*, size_t);
typedef void (*hcasim_rtl_eval_fn)(void*, void*, uint64_t);
typedef void (*hcasim_rtl_destroy_fn)(void*);

#ifdef __cplusplus
}
#endif

#endif /* HCASIM_RTL_H */
