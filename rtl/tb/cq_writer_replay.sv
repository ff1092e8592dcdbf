// Replays a CQ writer stimulus dump (`--dump-stimulus hca.cq_writer=FILE`, docs/cosim.md
// "Stimulus dumps") against rtl/cq_writer.sv, in plain SystemVerilog: the testbench an RTL team
// would write, reading the dump with $fgets/$sscanf. Each input record is driven at a falling
// edge while the unit is idle; each host memory write the unit presents is checked against the
// next W record and answered with its err; each answer against the next A record. The first
// mismatch ends the run with $fatal and the dump's FILE:LINE; a full match prints a summary.
//
//   $ verilator --binary -Wall --top-module cq_writer_replay rtl/tb/cq_writer_replay.sv rtl/cq_writer.sv
//   $ obj_dir/Vcq_writer_replay +stim=cq.node0.stim
//
// (Verilator 5 with --binary, i.e. --timing; any simulator with $fgets/$sscanf on strings.)

`default_nettype none
`timescale 1ns / 1ps

module cq_writer_replay;
    logic         clk = 1'b0;
    /* verilator lint_off BLKSEQ */
    always #5 clk = ~clk;
    /* verilator lint_on BLKSEQ */

    logic         rst_n = 1'b0;
    logic         cmp_valid = 1'b0, cmp_solicited = 1'b0;
    logic [7:0]   cmp_tag = 8'd0;
    logic [23:0]  cmp_cqn = 24'd0;
    logic [511:0] cmp_cqe = '0;
    wire          cmp_ready, ev_ready;
    logic         ev_valid = 1'b0;
    logic [7:0]   ev_tag = 8'd0, ev_type = 8'd0, ev_subtype = 8'd0;
    logic [31:0]  ev_resource = 32'd0;
    wire          rsp_valid, rsp_written, rsp_eqe, rsp_msi, rsp_disarmed;
    wire  [7:0]   rsp_tag;
    wire  [2:0]   rsp_reason;
    logic         cqc_we = 1'b0;
    logic [1:0]   cqc_op = 2'd0;
    logic [23:0]  cqc_cqn = 24'd0, cqc_consumer = 24'd0;
    logic [63:0]  cqc_base = 64'd0;
    logic [4:0]   cqc_log_size = 5'd0;
    logic [15:0]  cqc_eqn = 16'd0;
    logic         eqc_we = 1'b0;
    logic [15:0]  eqc_eqn = 16'd0;
    logic [63:0]  eqc_base = 64'd0;
    logic [4:0]   eqc_log_size = 5'd0;
    logic         cqdb_valid = 1'b0;
    logic [23:0]  cqdb_cqn = 24'd0, cqdb_consumer = 24'd0;
    logic [1:0]   cqdb_arm = 2'd0;
    logic         msi_we = 1'b0;
    logic [63:0]  msi_addr_in = 64'd0;
    logic [31:0]  msi_data_in = 32'd0;
    wire          mw_valid;
    logic         mw_ready = 1'b1;  // the bus takes every write at once
    wire  [63:0]  mw_addr;
    wire  [511:0] mw_data;
    wire  [6:0]   mw_len;
    logic         mwr_valid = 1'b0, mwr_err = 1'b0;
    wire          idle;

    cq_writer dut (.*);

    // The dump and where we are in it.
    string        path, line, kw;
    int           fd = 0, lineno = 0, inputs = 0, writes = 0, answers = 0;
    /* verilator lint_off UNUSEDSIGNAL */
    longint       t;  // the record's time: informative only
    /* verilator lint_on UNUSEDSIGNAL */
    // One record's fields.
    logic [7:0]   f_tag, f_type, f_sub;
    logic [23:0]  f_cqn, f_cons;
    logic         f_sol, f_err, f_w, f_e, f_m, f_d;
    logic [511:0] f_data;
    logic [63:0]  f_addr;
    logic [6:0]   f_len;
    logic [31:0]  f_res;
    logic [1:0]   f_op, f_arm;
    logic [4:0]   f_log;
    logic [15:0]  f_eqn;
    logic [2:0]   f_rsn;

    // The next record's line (comments and blank lines skipped); kw "" at the end.
    task automatic next_record();
        kw = "";
        while ($fgets(line, fd) != 0) begin
            lineno++;
            if (line.len() == 0 || line.getc(0) == 8'h23 || line.getc(0) == 8'h0A) continue;  // '#', '\n'
            if ($sscanf(line, "%s", kw) != 1) kw = "";
            if (kw != "") return;
        end
    endtask

    task automatic fields(input int got, input int want);
        if (got != want) $fatal(1, "%s:%0d: %0d fields read, expected %0d", path, lineno, got, want);
    endtask

    // With a C or E taken: its writes and its answer.
    task automatic serve(input int request_line);
        int stall = 0;
        forever begin
            if (rsp_valid) begin
                next_record();
                if (kw != "A")
                    $fatal(1, "%s:%0d: the RTL answered (tag 0x%0h, reason %0d); the dump expects '%s' (request at line %0d)",
                           path, lineno, rsp_tag, rsp_reason, kw, request_line);
                fields($sscanf(line, "%s %d %h %h %h %h %h %h", kw, t, f_tag, f_w, f_rsn, f_e, f_m, f_d), 8);
                if (rsp_tag != f_tag || rsp_written != f_w || rsp_reason != f_rsn || rsp_eqe != f_e ||
                    rsp_msi != f_m || rsp_disarmed != f_d)
                    $fatal(1, "%s:%0d: the answers differ: dump tag 0x%0h written %0d reason %0d eqe %0d msi %0d disarmed %0d; RTL tag 0x%0h written %0d reason %0d eqe %0d msi %0d disarmed %0d",
                           path, lineno, f_tag, f_w, f_rsn, f_e, f_m, f_d, rsp_tag, rsp_written, rsp_reason,
                           rsp_eqe, rsp_msi, rsp_disarmed);
                answers++;
                @(negedge clk);
                while (!idle) @(negedge clk);
                return;
            end
            if (mw_valid) begin  // mw_ready is high: the handshake is at the next rising edge
                next_record();
                if (kw != "W")
                    $fatal(1, "%s:%0d: the RTL wrote %0d bytes to 0x%0h; the dump expects '%s' (request at line %0d)",
                           path, lineno, mw_len, mw_addr, kw, request_line);
                fields($sscanf(line, "%s %d %h %h %h %h", kw, t, f_addr, f_len, f_err, f_data), 6);
                if (mw_addr != f_addr || mw_len != f_len)
                    $fatal(1, "%s:%0d: the RTL wrote %0d bytes to 0x%0h, the dump %0d bytes to 0x%0h", path, lineno,
                           mw_len, mw_addr, f_len, f_addr);
                for (int b = 0; b < 64; b++)
                    if (mw_data[8*b +: 8] != f_data[8*b +: 8])
                        $fatal(1, "%s:%0d: byte %0d of the %0d-byte write to 0x%0h differs: dump 0x%0h, RTL 0x%0h",
                               path, lineno, b, f_len, f_addr, f_data[8*b +: 8], mw_data[8*b +: 8]);
                writes++;
                @(negedge clk);  // after the handshake: the response, for one cycle
                mwr_valid = 1'b1;
                mwr_err = f_err;
                @(negedge clk);
                mwr_valid = 1'b0;
                mwr_err = 1'b0;
                stall = 0;
                continue;
            end
            @(negedge clk);
            if (++stall > 100000)
                $fatal(1, "%s:%0d: the RTL neither wrote nor answered for 100000 cycles", path, request_line);
        end
    endtask

    initial begin
        int request_line;
        if (!$value$plusargs("stim=%s", path)) $fatal(1, "usage: +stim=FILE (a --dump-stimulus hca.cq_writer dump)");
        fd = $fopen(path, "r");
        if (fd == 0) $fatal(1, "%s: cannot open", path);
        if ($fgets(line, fd) == 0 || line.substr(0, 28) != "# hcasim-stimulus cq_writer 1")
            $fatal(1, "%s:1: not a CQ writer stimulus dump of format 1", path);
        lineno = 1;
        repeat (3) @(negedge clk);
        rst_n = 1'b1;
        repeat (2) @(negedge clk);
        forever begin
            next_record();
            if (kw == "") break;
            inputs++;
            request_line = lineno;
            case (kw)
                "Q": begin
                    fields($sscanf(line, "%s %d %h %h %h %h %h %h", kw, t, f_op, f_cqn, f_addr, f_log, f_eqn, f_cons), 8);
                    cqc_op = f_op; cqc_cqn = f_cqn; cqc_base = f_addr; cqc_log_size = f_log; cqc_eqn = f_eqn;
                    cqc_consumer = f_cons; cqc_we = 1'b1;
                    @(negedge clk);
                    cqc_we = 1'b0;
                end
                "V": begin
                    fields($sscanf(line, "%s %d %h %h %h", kw, t, f_eqn, f_addr, f_log), 5);
                    eqc_eqn = f_eqn; eqc_base = f_addr; eqc_log_size = f_log; eqc_we = 1'b1;
                    @(negedge clk);
                    eqc_we = 1'b0;
                end
                "D": begin
                    fields($sscanf(line, "%s %d %h %h %h", kw, t, f_cqn, f_cons, f_arm), 5);
                    cqdb_cqn = f_cqn; cqdb_consumer = f_cons; cqdb_arm = f_arm; cqdb_valid = 1'b1;
                    @(negedge clk);
                    cqdb_valid = 1'b0;
                end
                "M": begin
                    fields($sscanf(line, "%s %d %h %h", kw, t, f_addr, f_res), 4);
                    msi_addr_in = f_addr; msi_data_in = f_res; msi_we = 1'b1;
                    @(negedge clk);
                    msi_we = 1'b0;
                end
                "C": begin
                    fields($sscanf(line, "%s %d %h %h %h %h", kw, t, f_tag, f_cqn, f_sol, f_data), 6);
                    cmp_tag = f_tag; cmp_cqn = f_cqn; cmp_solicited = f_sol; cmp_cqe = f_data; cmp_valid = 1'b1;
                    while (!cmp_ready) @(negedge clk);
                    @(negedge clk);  // taken at the rising edge in between
                    cmp_valid = 1'b0;
                    serve(request_line);
                end
                "E": begin
                    fields($sscanf(line, "%s %d %h %h %h %h", kw, t, f_tag, f_type, f_sub, f_res), 6);
                    ev_tag = f_tag; ev_type = f_type; ev_subtype = f_sub; ev_resource = f_res; ev_valid = 1'b1;
                    while (!ev_ready) @(negedge clk);
                    @(negedge clk);
                    ev_valid = 1'b0;
                    serve(request_line);
                end
                default: $fatal(1, "%s:%0d: a '%s' record with no completion or event in flight", path, lineno, kw);
            endcase
        end
        $display("cq_writer_replay: %s: %0d inputs, %0d writes and %0d answers match", path, inputs, writes,
                 answers);
        $finish;
    end
endmodule

`default_nettype wire
