// Attack cases on local segments: source, destination and receive SGEs.
#include "testbench/attack/cases.h"

namespace hcasim::attack {

void local_segment_cases(table_builder& add) {
    // ------------------------------------------------ local segments
    add("C10_54_2_1_write_source_bad_lkey", "C10-54.2.1",
        "RDMA WRITE whose source SGE names an L_Key no region has (control: the source region's key)",
        local_prot(0, xs::bad_key), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(WRITE, e.tgt, 64, mr->rkey, &sge);
            sge = ibv_sge{e.src, 64, kNoKey};
            e.attack_post(0, 0, wr);
        });
    add("C10_9_2_1_write_source_mr_of_another_pd", "C10-9.2.1, C10-54.2.1",
        "RDMA WRITE whose source SGE names a region of another PD than node0's QP", local_prot(0, xs::bad_pd),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* foreign = e.reg(0, e.src, 4096, LW, e.pd(0, true));
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(WRITE, e.tgt, 64, mr->rkey, &sge);
            sge = ibv_sge{e.src, 64, foreign->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_54_2_1_write_source_one_byte_past_mr", "C10-54.2.1",
        "RDMA WRITE whose source SGE ends one byte past its 1000-byte region (control: ending at its last "
        "byte)",
        local_prot(0, xs::out_of_bounds), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* small = e.reg(0, e.src, 1000, LW);
            ibv_sge sge;
            ibv_send_wr ok = e.remote_wr(WRITE, e.tgt, 100, mr->rkey, &sge);
            sge = ibv_sge{e.src + 900, 100, small->lkey};
            if (e.post(0, 0, ok)) abort_case("control WRITE: post failed");
            e.expect_ok(e.p().cq[S0], IBV_WC_RDMA_WRITE, "control WRITE");
            e.expect_mem(1, e.tgt, e.get(0, e.src + 900, 100), "control WRITE data");
            ibv_send_wr wr = e.remote_wr(WRITE, e.tgt, 101, mr->rkey, &sge);
            sge = ibv_sge{e.src + 900, 101, small->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_55_read_destination_without_local_write", "C10-55",
        "RDMA READ into a node0 region registered without local write", local_prot(0, xs::no_access),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* ro = e.reg(0, e.dst, 4096, 0);
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(READ, e.tgt, 64, mr->rkey, &sge);
            sge = ibv_sge{e.dst, 64, ro->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_55_atomic_result_without_local_write", "C10-55, o10-47",
        "Fetch&Add whose result SGE is a node0 region without local write (the target word must not change "
        "either)",
        local_prot(0, xs::no_access), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            ibv_mr* ro = e.reg(0, e.dst, 4096, 0);
            ibv_sge sge;
            ibv_send_wr wr = e.remote_wr(FAA, e.tgt, 8, mr->rkey, &sge);
            sge = ibv_sge{e.dst, 8, ro->lkey};
            e.attack_post(0, 0, wr);
        });
    add("C10_55_receive_buffer_without_local_write", "C10-55",
        "SEND into a receive SGE over the target region registered without local write (control: a receive "
        "region with it)",
        recv_prot(xs::no_access), [=](env& e) {
            ibv_mr* good = e.mr1(ALL);
            ibv_mr* ro = e.mr1(RR);
            e.ctl_send({{e.tgt, 64, good->lkey}}, e.tgt);
            e.recv1({{e.tgt + 64, 64, ro->lkey}});
            e.remote(SEND, 0, 64, 0);
        });
    add("C10_54_2_1_receive_sge_past_mr_end", "C10-54.2.1",
        "SEND of 64 bytes into a receive SGE that ends 32 bytes past its region",
        recv_prot(xs::out_of_bounds), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_send({{e.tgt + R - 64, 64, mr->lkey}}, e.tgt + R - 64);
            e.recv1({{e.tgt + R - 32, 64, mr->lkey}});
            e.remote(SEND, 0, 64, 0);
        });
    add("o10_37_2_11_reserved_lkey_receive_not_enabled", "o10-37.2.11, o10-36.2.1",
        "SEND into a receive SGE naming the target's physical address with the reserved L_Key, on a QP "
        "created "
        "without it (control: a QP created with it)",
        recv_prot(xs::not_enabled), [=](env& e) {
            e.open();
            pair_opts o;
            o.create1 = IBV_QP_CREATE_RESERVED_LKEY;
            e.open(o);
            e.ctl_send({{e.pa(1, e.tgt), 64, hw::RESERVED_LKEY}}, e.tgt, 1);
            e.recv1({{e.pa(1, e.tgt + 64), 64, hw::RESERVED_LKEY}}, 0);
            e.remote(SEND, 0, 64, 0, 0);
        });
    add("o10_37_2_11_reserved_lkey_read_destination_not_enabled", "o10-37.2.11",
        "node1 RDMA READs from node0 into the target's physical address with the reserved L_Key, on a QP "
        "created without it (control: a QP created with it)",
        local_prot(1, xs::not_enabled), [=](env& e) {
            e.open();
            pair_opts o;
            o.create1 = IBV_QP_CREATE_RESERVED_LKEY;
            e.open(o);
            auto read_wr = [&e](ibv_sge* sge) {
                ibv_send_wr wr{};
                wr.opcode = IBV_WR_RDMA_READ;
                wr.send_flags = IBV_SEND_SIGNALED;
                wr.sg_list = sge;
                wr.num_sge = 1;
                wr.wr.rdma.remote_addr = e.src;
                wr.wr.rdma.rkey = e.smr->rkey;
                return wr;
            };
            ibv_sge ok_sge{e.pa(1, e.tgt), 64, hw::RESERVED_LKEY};
            ibv_send_wr ok = read_wr(&ok_sge);
            if (e.post(1, 1, ok)) abort_case("control READ: post failed");
            e.expect_ok(e.p(1).cq[S1], IBV_WC_RDMA_READ, "control READ");
            e.expect_mem(1, e.tgt, e.get(0, e.src, 64), "control READ data");
            ibv_sge sge{e.pa(1, e.tgt + 64), 64, hw::RESERVED_LKEY};
            ibv_send_wr wr = read_wr(&sge);
            e.attack_post(1, 0, wr);
        });
}

}  // namespace hcasim::attack
