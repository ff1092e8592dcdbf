// P_Key checker, register-transfer level: the IBA 10.9 partition rules for every received
// packet, the P_Key table per port with its write port, the 16-bit saturating P_Key and Q_Key
// violation counters and the trap output. The model's TLM unit (model/hca/pkey_checker.*) is
// the reference it must match; docs/cosim.md is the pin-level contract.
//
// Timing: a request accepted at rising edge k (req_valid && req_ready) is looked up at edge k
// (the table entry of its QP and the scan of the whole table are registered there) and its
// verdict is registered at edge k+1: vrd_valid is high for the one cycle after edge k+1. One
// request per cycle, no stalls: req_ready is low only in reset. A table write at edge k is seen
// by requests accepted at edge k+1 and later.
//
// Build flag PKEY_BROKEN_MEMBERSHIP (tests only) breaks one rule on purpose: two limited
// members match, so the co-simulation comparator has something to catch.

`default_nettype none

module pkey_checker #(
    parameter int DEPTH = 128,  // P_Key table entries per port
    parameter int PORTS = 1     // ports (numbered 1..PORTS)
) (
    input  wire logic        clk,
    input  wire logic        rst_n,           // synchronous, active low

    // Check request: one received packet's fields
    input  wire logic        req_valid,
    output      logic        req_ready,
    input  wire logic [7:0]  req_tag,         // returned with the verdict
    input  wire logic [15:0] req_pkey,        // BTH P_Key
    input  wire logic [23:0] req_dqpn,        // BTH DestQP
    input  wire logic [15:0] req_dlid,        // LRH DLID
    input  wire logic        req_qp_bound,    // the destination QP has a P_Key table index
    input  wire logic [15:0] req_pkey_index,  // ...and this is it (from the QP context)
    input  wire logic [7:0]  req_port,        // receiving port, 1..PORTS

    // Verdict: in request order, no backpressure
    output      logic        vrd_valid,
    output      logic [7:0]  vrd_tag,
    output      logic        vrd_accept,
    output      logic [2:0]  vrd_reason,      // see REASON_* below
    output      logic [15:0] vrd_index,       // ACCEPT_GSI: the lowest matching entry
    output      logic [15:0] vrd_local_key,   // drops: the entry checked against (0: none)

    // P_Key table write port (the subnet manager's path)
    input  wire logic        tbl_we,
    input  wire logic [7:0]  tbl_port,        // 1..PORTS; other values are ignored
    input  wire logic [15:0] tbl_index,       // 0..DEPTH-1; other values are ignored
    input  wire logic [15:0] tbl_data,

    // Violation counters (PortInfo P_KeyViolations, Q_KeyViolations)
    input  wire logic        pkey_viol_in,    // one P_Key violation found elsewhere (multicast member QP)
    input  wire logic        qkey_viol_in,    // one Q_Key violation (found by the transport engine)
    output      logic [15:0] pkey_viol_count,
    output      logic [15:0] qkey_viol_count,

    // Trap: one pulse, with the verdict, per P_Key violation this unit finds
    output      logic        trap_valid,
    output      logic [15:0] trap_pkey,
    output      logic [15:0] trap_local_key,
    output      logic [23:0] trap_dqpn
);

    localparam logic [2:0] REASON_ACCEPT       = 3'd0;  // ordinary QP (or no QP: the transport engine drops it)
    localparam logic [2:0] REASON_ACCEPT_SMI   = 3'd1;  // QP0 takes any P_Key (C10-131)
    localparam logic [2:0] REASON_ACCEPT_GSI   = 3'd2;  // QP1: some valid entry matches (C10-132)
    localparam logic [2:0] REASON_ACCEPT_MCAST = 3'd3;  // multicast DLID: some valid entry matches
    localparam logic [2:0] REASON_DROP_QP      = 3'd4;  // the QP's entry does not match
    localparam logic [2:0] REASON_DROP_GSI     = 3'd5;  // QP1: no entry matches
    localparam logic [2:0] REASON_DROP_MCAST   = 3'd6;  // multicast: no entry matches
    localparam logic [2:0] REASON_DROP_PORT    = 3'd7;  // no such port

    localparam int PW = (PORTS > 1) ? $clog2(PORTS) : 1;
    localparam int IW = (DEPTH > 1) ? $clog2(DEPTH) : 1;

    // The IBA match (10.9.3): low 15 bits equal and not zero, at least one full member.
    function automatic logic pk_match(input logic [15:0] a, input logic [15:0] b);
`ifdef PKEY_BROKEN_MEMBERSHIP
        pk_match = (a[14:0] != 15'd0) && (a[14:0] == b[14:0]) && ((a[15] | b[15]) || 1'b1);
`else
        pk_match = (a[14:0] != 15'd0) && (a[14:0] == b[14:0]) && (a[15] | b[15]);
`endif
    endfunction

    logic [15:0] table_q [PORTS][DEPTH];
    logic        ready_q;

    // ---- Stage 1: accept, read the QP's entry, scan the table ----
    logic          s1_valid;
    logic [7:0]    s1_tag;
    logic [15:0]   s1_pkey;
    logic [23:0]   s1_dqpn;
    logic          s1_port_ok, s1_mcast, s1_bound;
    logic [15:0]   s1_entry;       // the QP's entry
    logic          s1_any;         // some entry matches
    logic [IW-1:0] s1_first;       // the lowest entry that matches
    logic          s1_limited;     // some limited entry has the packet's key (multicast trap data)

    logic          port_ok;
    logic [PW-1:0] port_idx;
    logic          bound;
    logic [IW-1:0] entry_idx;
    logic          any_c, limited_c;
    logic [IW-1:0] first_c;

    always_comb begin
        port_ok  = (req_port != 8'd0) && ({24'd0, req_port} <= 32'(PORTS));
        port_idx = port_ok ? PW'({24'd0, req_port} - 32'd1) : '0;
        bound    = req_qp_bound && ({16'd0, req_pkey_index} < 32'(DEPTH));
        entry_idx = bound ? IW'(req_pkey_index) : '0;
        any_c = 1'b0;
        limited_c = 1'b0;
        first_c = '0;
        for (int i = DEPTH - 1; i >= 0; i--) begin
            if (pk_match(req_pkey, table_q[port_idx][i])) begin
                any_c = 1'b1;
                first_c = IW'(i);
            end
            if (table_q[port_idx][i][15] == 1'b0 && table_q[port_idx][i][14:0] == req_pkey[14:0] &&
                req_pkey[14:0] != 15'd0)
                limited_c = 1'b1;
        end
    end

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            s1_valid <= 1'b0;
            ready_q  <= 1'b0;
        end else begin
            ready_q  <= 1'b1;
            s1_valid <= req_valid && ready_q;
            if (req_valid && ready_q) begin
                s1_tag     <= req_tag;
                s1_pkey    <= req_pkey;
                s1_dqpn    <= req_dqpn;
                s1_port_ok <= port_ok;
                s1_mcast   <= req_dlid >= 16'hC000 && req_dlid != 16'hFFFF;
                s1_bound   <= bound;
                s1_entry   <= table_q[port_idx][entry_idx];
                s1_any     <= any_c;
                s1_first   <= first_c;
                s1_limited <= limited_c;
            end
        end
    end
    assign req_ready = ready_q;

    // ---- Stage 2: the verdict, the counters, the trap ----
    logic       accept_c;
    logic [2:0] reason_c;
    logic [15:0] local_c;

    always_comb begin
        accept_c = 1'b1;
        reason_c = REASON_ACCEPT;
        local_c  = 16'd0;
        if (!s1_port_ok) begin
            accept_c = 1'b0;
            reason_c = REASON_DROP_PORT;
        end else if (s1_dqpn == 24'd0) begin
            reason_c = REASON_ACCEPT_SMI;
        end else if (s1_dqpn == 24'd1) begin
            accept_c = s1_any;
            reason_c = s1_any ? REASON_ACCEPT_GSI : REASON_DROP_GSI;
        end else if (s1_mcast) begin
            accept_c = s1_any;
            reason_c = s1_any ? REASON_ACCEPT_MCAST : REASON_DROP_MCAST;
            local_c  = (!s1_any && s1_limited) ? {1'b0, s1_pkey[14:0]} : 16'd0;
        end else if (s1_bound && !pk_match(s1_pkey, s1_entry)) begin
            accept_c = 1'b0;
            reason_c = REASON_DROP_QP;
            local_c  = s1_entry;
        end
    end

    wire violation = s1_valid && !accept_c && reason_c != REASON_DROP_PORT;

    function automatic logic [15:0] sat_add(input logic [15:0] c, input logic [1:0] n);
        logic [16:0] s;
        s = {1'b0, c} + {15'd0, n};
        sat_add = s[16] ? 16'hFFFF : s[15:0];
    endfunction

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            vrd_valid       <= 1'b0;
            trap_valid      <= 1'b0;
            pkey_viol_count <= 16'd0;
            qkey_viol_count <= 16'd0;
            vrd_tag         <= 8'd0;
            vrd_accept      <= 1'b0;
            vrd_reason      <= 3'd0;
            vrd_index       <= 16'd0;
            vrd_local_key   <= 16'd0;
            trap_pkey       <= 16'd0;
            trap_local_key  <= 16'd0;
            trap_dqpn       <= 24'd0;
        end else begin
            vrd_valid  <= s1_valid;
            trap_valid <= violation;
            if (s1_valid) begin
                vrd_tag       <= s1_tag;
                vrd_accept    <= accept_c;
                vrd_reason    <= reason_c;
                vrd_index     <= (reason_c == REASON_ACCEPT_GSI) ? 16'(s1_first) : 16'd0;
                vrd_local_key <= local_c;
            end
            if (violation) begin
                trap_pkey      <= s1_pkey;
                trap_local_key <= local_c;
                trap_dqpn      <= s1_dqpn;
            end
            pkey_viol_count <= sat_add(pkey_viol_count, {1'b0, violation} + {1'b0, pkey_viol_in});
            qkey_viol_count <= sat_add(qkey_viol_count, {1'b0, qkey_viol_in});
        end
    end

    // ---- The table: entry 0 of every port is the default partition (0xFFFF) after reset ----
    wire tbl_hit_port = tbl_we && tbl_port != 8'd0 && {24'd0, tbl_port} <= 32'(PORTS);
    wire tbl_hit_index = {16'd0, tbl_index} < 32'(DEPTH);
    for (genvar p = 0; p < PORTS; p++) begin : g_port
        for (genvar i = 0; i < DEPTH; i++) begin : g_entry
            always_ff @(posedge clk) begin
                if (!rst_n)
                    table_q[p][i] <= (i == 0) ? 16'hFFFF : 16'h0000;
                else if (tbl_hit_port && tbl_hit_index && {24'd0, tbl_port} == 32'(p + 1) &&
                         {16'd0, tbl_index} == 32'(i))
                    table_q[p][i] <= tbl_data;
            end
        end
    end

endmodule

`default_nettype wire
