// CQ writer, register-transfer level: keeps the CQ and EQ contexts, formats CQEs with the
// owner bit and writes them into the CQ rings in host memory over a write master with
// valid/ready back-pressure, detects CQ overrun (CQ error EQE on EQ 0), raises completion
// events for armed CQs (EQE on the CQ's EQ, then the MSI write) and writes asynchronous events
// to EQ 0. The model's TLM unit (model/hca/cq_writer.*) is the reference it must match;
// docs/cosim.md ("The CQ writer's pin-level contract") is the contract.
//
// One operation (a completion or an event) at a time: taken in S_IDLE, answered on rsp_* in
// request order. Per operation at most three host memory writes, one after the other (CQE,
// EQE, MSI), each waiting for its write response. Context writes, doorbells and the MSI
// registers are taken at any edge; at the same edge as the unit's own update of the same
// field, the port's write wins.
//
// Build flag CQW_BROKEN_OWNER (tests only) breaks one rule on purpose: the CQE owner bit
// ignores the ring's wrap count (always 1, right on the first pass only), so the
// co-simulation comparator has something to catch.

`default_nettype none

module cq_writer #(
    parameter int CQS = 1024,         // CQ contexts (CQNs 0..CQS-1)
    parameter int EQS = 16,           // EQ contexts (EQNs 0..EQS-1)
    parameter int WRITE_CYCLES = 8    // cycles formatting a CQE before its write (hca.cq_writer.write_cycles)
) (
    input  wire logic         clk,
    input  wire logic         rst_n,          // synchronous, active low

    // Completion request (the transport engine's complete())
    input  wire logic         cmp_valid,
    output      logic         cmp_ready,
    input  wire logic [7:0]   cmp_tag,        // returned on rsp_tag
    input  wire logic [23:0]  cmp_cqn,
    input  wire logic         cmp_solicited,  // a solicited receive completion (CQ_ARM_SOLICITED)
    input  wire logic [511:0] cmp_cqe,        // the 64-byte CQE, byte i at bits 8i+7..8i (owner bit filled in here)

    // Asynchronous event request (post_event(): an EQE on EQ 0)
    input  wire logic         ev_valid,
    output      logic         ev_ready,       // = idle and no cmp_valid: a completion goes first
    input  wire logic [7:0]   ev_tag,
    input  wire logic [7:0]   ev_type,
    input  wire logic [7:0]   ev_subtype,
    input  wire logic [31:0]  ev_resource,

    // Response: one per request, in request order, for one cycle, no backpressure
    output      logic         rsp_valid,
    output      logic [7:0]   rsp_tag,
    output      logic         rsp_written,    // completion: the CQE was written; event: the EQE was
    output      logic [2:0]   rsp_reason,     // see RSN_* below
    output      logic         rsp_eqe,        // an EQE was written (completion or CQ error event, or the event)
    output      logic         rsp_msi,        // an MSI write was issued (whatever its response)
    output      logic         rsp_disarmed,   // the CQ's arm went back to NONE (completion event raised)

    // CQ context write port (the command unit)
    input  wire logic         cqc_we,
    input  wire logic [1:0]   cqc_op,         // 1 load, 2 destroy, 3 resize (keeps producer, arm, overrun, EQ)
    input  wire logic [23:0]  cqc_cqn,        // >= CQS: ignored
    input  wire logic [63:0]  cqc_base,       // load, resize
    input  wire logic [4:0]   cqc_log_size,   // load, resize (0..24)
    input  wire logic [15:0]  cqc_eqn,        // load
    input  wire logic [23:0]  cqc_consumer,   // resize

    // EQ context write port (the command unit)
    input  wire logic         eqc_we,
    input  wire logic [15:0]  eqc_eqn,        // >= EQS: ignored
    input  wire logic [63:0]  eqc_base,
    input  wire logic [4:0]   eqc_log_size,   // 0..24

    // CQ doorbell (the doorbell unit): new consumer index, arm request
    input  wire logic         cqdb_valid,
    input  wire logic [23:0]  cqdb_cqn,       // not loaded or >= CQS: ignored
    input  wire logic [23:0]  cqdb_consumer,
    input  wire logic [1:0]   cqdb_arm,       // 0 none (consumer only), 1 next, 2 solicited

    // MSI registers (the doorbell unit); address 0: no MSI writes
    input  wire logic         msi_we,
    input  wire logic [63:0]  msi_addr_in,
    input  wire logic [31:0]  msi_data_in,

    // Host memory write master: one write outstanding at a time
    output      logic         mw_valid,
    input  wire logic         mw_ready,
    output      logic [63:0]  mw_addr,
    output      logic [511:0] mw_data,        // byte i at bits 8i+7..8i; bytes >= mw_len are zero
    output      logic [6:0]   mw_len,         // bytes: 64 (CQE), 32 (EQE) or 4 (MSI)
    input  wire logic         mwr_valid,      // the write's response, in order, after its handshake
    input  wire logic         mwr_err,        // with mwr_valid: the write failed (PCIe access error)

    output      logic         idle            // no operation in flight
);

    localparam logic [2:0] RSN_WRITTEN   = 3'd0;  // written
    localparam logic [2:0] RSN_NO_CQ     = 3'd1;  // completion: the CQ is not loaded (or CQN >= CQS)
    localparam logic [2:0] RSN_OVERRUN   = 3'd2;  // completion: the CQ is full or already in error
    localparam logic [2:0] RSN_CQE_ERR   = 3'd3;  // completion: the CQE write failed (the CQ is now in error)
    localparam logic [2:0] RSN_NO_EQ     = 3'd4;  // event: EQ 0 is not loaded
    localparam logic [2:0] RSN_EQE_ERR   = 3'd5;  // event: the EQE write failed (the event is lost)

    localparam logic [1:0] ARM_NONE      = 2'd0;
    localparam logic [1:0] ARM_NEXT      = 2'd1;
    localparam logic [1:0] ARM_SOLICITED = 2'd2;

    localparam logic [7:0] EQE_COMPLETION = 8'h00;
    localparam logic [7:0] EQE_CQ_ERROR   = 8'h04;

    localparam int CW = (CQS > 1) ? $clog2(CQS) : 1;
    localparam int EW = (EQS > 1) ? $clog2(EQS) : 1;
    localparam int KW = (WRITE_CYCLES > 1) ? $clog2(WRITE_CYCLES + 1) : 1;

    typedef enum logic [3:0] {
        S_IDLE, S_DECIDE, S_FORMAT, S_CQE_AW, S_CQE_B, S_EQE, S_EQE_AW, S_EQE_B, S_MSI_AW, S_MSI_B, S_RSP
    } state_t;

    // Contexts
    logic [CQS-1:0] cq_valid;         // reset clears these; a load writes every other field
    logic         cq_overrun [CQS];
    logic [1:0]   cq_arm     [CQS];
    logic [4:0]   cq_log     [CQS];
    logic [15:0]  cq_eqn     [CQS];
    logic [63:0]  cq_base    [CQS];
    logic [31:0]  cq_prod    [CQS];   // CQEs written (bit 24 and below matter: slot, owner, fill)
    logic [23:0]  cq_cons    [CQS];
    logic [EQS-1:0] eq_valid;
    logic [4:0]   eq_log     [EQS];
    logic [63:0]  eq_base    [EQS];
    logic [31:0]  eq_prod    [EQS];
    logic [63:0]  msi_addr;
    logic [31:0]  msi_data;

    // The operation in flight
    state_t       state;
    logic         op_event;
    logic [7:0]   op_tag;
    logic         op_cq_ok;    // CQN < CQS
    logic [CW-1:0] op_cq;
    logic [23:0]  op_cqn;
    logic         op_sol;
    /* verilator lint_off UNUSEDSIGNAL */
    logic [511:0] op_cqe;      // bit 504 (the owner bit) is replaced
    /* verilator lint_on UNUSEDSIGNAL */
    logic [15:0]  op_eqn;      // EQ of the EQE to write
    logic [7:0]   op_type, op_subtype;
    logic [31:0]  op_resource;
    logic [KW-1:0] op_count;
    logic [2:0]   op_reason;
    logic         op_eqe, op_msi, op_disarmed;
    logic [63:0]  wr_addr;
    logic [511:0] wr_data;
    logic [6:0]   wr_len;
    logic         started;     // one cycle after reset

    // The CQ of the operation, as read in S_DECIDE / S_CQE_B
    wire  [4:0]   c_log  = cq_log[op_cq];
    wire  [31:0]  c_prod = cq_prod[op_cq];
    wire  [31:0]  c_mask = (32'd1 << c_log) - 32'd1;
    wire  [23:0]  c_used = c_prod[23:0] - cq_cons[op_cq];
    wire          c_full = {8'd0, c_used} >= (32'd1 << c_log);
`ifdef CQW_BROKEN_OWNER
    wire          c_owner = 1'b1;
`else
    wire          c_owner = ~c_prod[c_log];
`endif
    wire  [7:0]   c_status = op_cqe[31*8 +: 8];
    wire          c_event = cq_arm[op_cq] == ARM_NEXT ||
                            (cq_arm[op_cq] == ARM_SOLICITED && (op_sol || c_status != 8'd0));

    // The EQ of the EQE to write, as read in S_EQE
    wire          e_ok   = {16'd0, op_eqn} < EQS;
    wire  [EW-1:0] e_q   = op_eqn[EW-1:0];
    wire  [4:0]   e_log  = eq_log[e_q];
    wire  [31:0]  e_prod = eq_prod[e_q];
    wire  [31:0]  e_mask = (32'd1 << e_log) - 32'd1;

    wire cq_load_ok = cqc_we && {8'd0, cqc_cqn} < CQS;
    wire eq_load_ok = eqc_we && {16'd0, eqc_eqn} < EQS;
    wire db_ok      = cqdb_valid && {8'd0, cqdb_cqn} < CQS && cq_valid[cqdb_cqn[CW-1:0]];

    assign cmp_ready    = started && state == S_IDLE;
    assign ev_ready     = started && state == S_IDLE && !cmp_valid;
    assign idle         = state == S_IDLE;
    assign rsp_valid    = state == S_RSP;
    assign rsp_tag      = op_tag;
    assign rsp_reason   = op_reason;
    assign rsp_written  = op_reason == RSN_WRITTEN;
    assign rsp_eqe      = op_eqe;
    assign rsp_msi      = op_msi;
    assign rsp_disarmed = op_disarmed;
    assign mw_valid     = state == S_CQE_AW || state == S_EQE_AW || state == S_MSI_AW;
    assign mw_addr      = wr_addr;
    assign mw_data      = wr_data;
    assign mw_len       = wr_len;

    always_ff @(posedge clk) begin
        if (!rst_n) begin
            state <= S_IDLE;
            started <= 1'b0;
            msi_addr <= 64'd0;
            msi_data <= 32'd0;
            cq_valid <= '0;  // power-on: no CQ and no EQ loaded
            eq_valid <= '0;
            op_event <= 1'b0; op_tag <= 8'd0; op_cq_ok <= 1'b0; op_cq <= '0; op_cqn <= 24'd0;
            op_sol <= 1'b0; op_cqe <= '0; op_eqn <= 16'd0; op_type <= 8'd0; op_subtype <= 8'd0;
            op_resource <= 32'd0; op_count <= '0; op_reason <= RSN_WRITTEN; op_eqe <= 1'b0;
            op_msi <= 1'b0; op_disarmed <= 1'b0; wr_addr <= 64'd0; wr_data <= '0; wr_len <= 7'd0;
        end else begin
            started <= 1'b1;
            unique case (state)
                S_IDLE: begin
                    op_eqe <= 1'b0;
                    op_msi <= 1'b0;
                    op_disarmed <= 1'b0;
                    if (cmp_valid && cmp_ready) begin
                        op_event <= 1'b0;
                        op_tag <= cmp_tag;
                        op_cq_ok <= {8'd0, cmp_cqn} < CQS;
                        op_cq <= cmp_cqn[CW-1:0];
                        op_cqn <= cmp_cqn;
                        op_sol <= cmp_solicited;
                        op_cqe <= cmp_cqe;
                        state <= S_DECIDE;
                    end else if (ev_valid && ev_ready) begin
                        op_event <= 1'b1;
                        op_tag <= ev_tag;
                        op_eqn <= 16'd0;
                        op_type <= ev_type;
                        op_subtype <= ev_subtype;
                        op_resource <= ev_resource;
                        op_reason <= RSN_NO_EQ;
                        state <= S_EQE;
                    end
                end
                S_DECIDE: begin
                    if (!op_cq_ok || !cq_valid[op_cq]) begin
                        op_reason <= RSN_NO_CQ;
                        state <= S_RSP;
                    end else if (cq_overrun[op_cq] || c_full) begin
                        op_reason <= RSN_OVERRUN;
                        if (!cq_overrun[op_cq]) begin  // the first lost completion: CQ error event
                            cq_overrun[op_cq] <= 1'b1;
                            op_eqn <= 16'd0;
                            op_type <= EQE_CQ_ERROR;
                            op_subtype <= 8'd0;
                            op_resource <= {8'd0, op_cqn};
                            state <= S_EQE;
                        end else begin
                            state <= S_RSP;
                        end
                    end else begin
                        wr_addr <= cq_base[op_cq] + {26'd0, (c_prod & c_mask), 6'd0};
                        wr_data <= {op_cqe[511:505], c_owner, op_cqe[503:0]};
                        wr_len <= 7'd64;
                        op_count <= KW'(WRITE_CYCLES);
                        state <= (WRITE_CYCLES == 0) ? S_CQE_AW : S_FORMAT;
                    end
                end
                S_FORMAT: begin
                    op_count <= op_count - 1'b1;
                    if (op_count <= KW'(1)) state <= S_CQE_AW;
                end
                S_CQE_AW: if (mw_ready) state <= S_CQE_B;
                S_CQE_B: if (mwr_valid) begin
                    op_eqn <= 16'd0;
                    op_subtype <= 8'd0;
                    op_resource <= {8'd0, op_cqn};
                    if (mwr_err) begin  // the ring is outside host memory: the CQ is in error
                        cq_overrun[op_cq] <= 1'b1;
                        op_reason <= RSN_CQE_ERR;
                        op_type <= EQE_CQ_ERROR;
                        state <= S_EQE;
                    end else begin
                        cq_prod[op_cq] <= c_prod + 32'd1;
                        op_reason <= RSN_WRITTEN;
                        if (c_event) begin
                            cq_arm[op_cq] <= ARM_NONE;
                            op_disarmed <= 1'b1;
                            op_eqn <= cq_eqn[op_cq];
                            op_type <= EQE_COMPLETION;
                            state <= S_EQE;
                        end else begin
                            state <= S_RSP;
                        end
                    end
                end
                S_EQE: begin
                    if (!e_ok || !eq_valid[e_q]) begin
                        state <= S_RSP;  // no such EQ: the event goes nowhere
                    end else begin
                        wr_addr <= eq_base[e_q] + {27'd0, (e_prod & e_mask), 5'd0};
                        wr_data <= {256'd0, 7'd0, ~e_prod[e_log], 184'd0, op_resource, 8'd0, 8'd0,
                                    op_subtype, op_type};
                        wr_len <= 7'd32;
                        state <= S_EQE_AW;
                    end
                end
                S_EQE_AW: if (mw_ready) state <= S_EQE_B;
                S_EQE_B: if (mwr_valid) begin
                    if (mwr_err) begin  // the EQ is outside host memory: the event is lost
                        if (op_event) op_reason <= RSN_EQE_ERR;
                        state <= S_RSP;
                    end else begin
                        eq_prod[e_q] <= e_prod + 32'd1;
                        op_eqe <= 1'b1;
                        if (op_event) op_reason <= RSN_WRITTEN;
                        if (msi_addr != 64'd0) begin
                            wr_addr <= msi_addr;
                            wr_data <= {480'd0, msi_data};
                            wr_len <= 7'd4;
                            op_msi <= 1'b1;
                            state <= S_MSI_AW;
                        end else begin
                            state <= S_RSP;
                        end
                    end
                end
                S_MSI_AW: if (mw_ready) state <= S_MSI_B;
                S_MSI_B: if (mwr_valid) state <= S_RSP;  // a failed MSI write is not reported further
                S_RSP: state <= S_IDLE;
                default: state <= S_IDLE;
            endcase

            // Port writes, after the unit's own updates: at the same edge they win.
            if (cq_load_ok && cqc_op != 2'd0) begin
                if (cqc_op == 2'd1 || cqc_op == 2'd2) begin  // load / destroy: a fresh context
                    cq_valid[cqc_cqn[CW-1:0]] <= cqc_op == 2'd1;
                    cq_overrun[cqc_cqn[CW-1:0]] <= 1'b0;
                    cq_arm[cqc_cqn[CW-1:0]] <= ARM_NONE;
                    cq_prod[cqc_cqn[CW-1:0]] <= 32'd0;
                    cq_cons[cqc_cqn[CW-1:0]] <= 24'd0;
                    cq_log[cqc_cqn[CW-1:0]] <= (cqc_op == 2'd1) ? cqc_log_size : 5'd0;
                    cq_eqn[cqc_cqn[CW-1:0]] <= (cqc_op == 2'd1) ? cqc_eqn : 16'd0;
                    cq_base[cqc_cqn[CW-1:0]] <= (cqc_op == 2'd1) ? cqc_base : 64'd0;
                end else if (cq_valid[cqc_cqn[CW-1:0]]) begin  // resize
                    cq_base[cqc_cqn[CW-1:0]] <= cqc_base;
                    cq_log[cqc_cqn[CW-1:0]] <= cqc_log_size;
                    cq_cons[cqc_cqn[CW-1:0]] <= cqc_consumer;
                end
            end
            if (eq_load_ok) begin
                eq_valid[eqc_eqn[EW-1:0]] <= 1'b1;
                eq_log[eqc_eqn[EW-1:0]] <= eqc_log_size;
                eq_base[eqc_eqn[EW-1:0]] <= eqc_base;
                eq_prod[eqc_eqn[EW-1:0]] <= 32'd0;
            end
            if (db_ok) begin
                cq_cons[cqdb_cqn[CW-1:0]] <= cqdb_consumer;
                if (cqdb_arm != ARM_NONE) cq_arm[cqdb_cqn[CW-1:0]] <= cqdb_arm;
            end
            if (msi_we) begin
                msi_addr <= msi_addr_in;
                msi_data <= msi_data_in;
            end
        end
    end

endmodule

`default_nettype wire
