// Attack cases on memory regions: keys, bounds, rights and PDs; zero-based, physical and shared regions.
#include "testbench/attack/cases.h"

namespace hcasim::attack {

// Regions: keys.
void region_key_cases(table_builder& add) {
    add("C10_44_2_1_write_rkey_of_no_region", "C10-44.2.1, o10-36.2.1",
        "RDMA WRITE with an R_Key whose index names no region (control: the region's R_Key; a zero-length "
        "WRITE with the bogus key, which is never checked)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.ctl_write(kNoKey, e.tgt, 0, e.tgt);
            e.remote(WRITE, e.tgt, 64, kNoKey);
        });
    add("o10_37_2_3_write_wrong_key_byte", "o10-37.2.3",
        "RDMA WRITE with the region's index but another key byte", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, other_byte(mr->rkey));
        });
    add("o10_37_2_3_fetch_add_wrong_key_byte", "o10-37.2.3",
        "Fetch&Add with the region's index but another key byte", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_atomic(mr->rkey, e.tgt + 64, e.tgt + 64);
            e.remote(FAA, e.tgt + 64, 8, other_byte(mr->rkey));
        });
    add("o10_37_2_8_reserved_lkey_as_rkey", "o10-37.2.8, o10-37.2.11",
        "RDMA WRITE naming the reserved L_Key (0) as R_Key and the target's physical address, to a QP "
        "created with the reserved L_Key enabled",
        remote_fault(), [=](env& e) {
            pair_opts o;
            o.create1 = IBV_QP_CREATE_RESERVED_LKEY;
            e.open(o);
            e.remote(WRITE, e.pa(1, e.tgt), 64, hw::RESERVED_LKEY);
        });
    add("C10_60_write_stale_rkey_after_dereg", "C10-60",
        "RDMA WRITE with the R_Key of a region deregistered after a successful WRITE", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t k = mr->rkey;
            e.ctl_write(k, e.tgt, 64, e.tgt);
            e.must_dereg(mr);
            e.remote(WRITE, e.tgt, 64, k);
        });
    add("o10_37_2_4_write_stale_rkey_after_rereg", "o10-37.2.4, C10-60",
        "RDMA WRITE with the R_Key a region had before Reregister MR gave it new keys (control: the new key)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t old = mr->rkey;
            e.ctl_write(old, e.tgt, 64, e.tgt);
            if (int rc = ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0, 0, ALL))
                abort_case("ibv_rereg_mr failed: " + errno_name(rc));
            if (mr->rkey == old) abort_case("reregister kept the R_Key");
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, old);
        });
}

// Regions: bounds.
void region_bound_cases(table_builder& add) {
    add("C10_56_write_one_byte_before_mr", "C10-56",
        "RDMA WRITE of 64 bytes starting one byte before the region", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt - 1, 64, mr->rkey);
        });
    add("C10_56_write_one_byte_past_mr_end", "C10-56",
        "RDMA WRITE of 64 bytes ending one byte past the region", remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt + R - 64, 64, e.tgt + R - 64);
            e.remote(WRITE, e.tgt + R - 63, 64, mr->rkey);
        });
    add("C10_56_read_one_byte_past_mr_end", "C10-56", "RDMA READ of 64 bytes ending one byte past the region",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_read(mr->rkey, e.tgt + R - 64, 64, e.tgt + R - 64);
            e.remote(READ, e.tgt + R - 63, 64, mr->rkey);
        });
    add("C10_56_fetch_add_one_byte_past_mr_end", "C10-56",
        "Fetch&Add on the last aligned word of a region of 8191 bytes (its last byte is one past the end)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL, e.tgt, R - 1);
            e.ctl_atomic(mr->rkey, e.tgt + R - 16, e.tgt + R - 16);
            e.remote(FAA, e.tgt + R - 8, 8, mr->rkey);
        });
    add("C10_56_cmp_swap_one_byte_before_mr", "C10-56",
        "Compare&Swap on the aligned word whose first byte is one before a region starting at an odd address",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL, e.tgt + 1, R - 1);
            e.ctl_atomic(mr->rkey, e.tgt + 8, e.tgt + 8);
            e.remote(CAS, e.tgt, 8, mr->rkey);
        });
    add("C10_56_write_va_plus_len_wraps", "C10-56",
        "RDMA WRITE of 64 bytes at 2^64-32 (va + len wraps to 32, below the region end)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, kTop - 31, 64, mr->rkey);
        });
    add("C10_56_write_crossing_mr_end_stops_at_the_faulting_packet", "C10-56",
        "RDMA WRITE of 8192 bytes (two 4 KiB packets) from the region's middle: the second packet lies past "
        "the end; the guard band after the region and the bytes before the WRITE are watched",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.watch_layout = false;
            e.watch(1, e.base, kGuard + 4096);
            e.watch(1, e.tgt + R, kGuard);
            e.remote(WRITE, e.tgt + 4096, 8192, mr->rkey);
            // Protection is per packet: the first packet was in bounds and was placed.
            e.after = [=](env& e) {
                e.expect_mem(1, e.tgt + 4096, e.get(0, e.src, 4096), "the in-bounds packet");
            };
        });
}

// Regions: rights, PDs.
void region_right_cases(table_builder& add) {
    add("C10_57_write_without_remote_write_right", "C10-57",
        "RDMA WRITE into a region registered with local write and remote read only (control: READ)",
        remote_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(LW | RR);
            e.ctl_read(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, mr->rkey);
        });
    add("C10_57_read_without_remote_read_right", "C10-57",
        "RDMA READ of a region registered with local and remote write only (control: WRITE)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(LW | RW);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(READ, e.tgt, 64, mr->rkey);
        });
    add("C10_57_atomic_without_remote_atomic_right", "C10-57, o10-37",
        "Fetch&Add on a region registered without remote atomic (control: WRITE)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(LW | RW | RR);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(FAA, e.tgt, 8, mr->rkey);
        });
    add("C10_88_write_to_qp_without_remote_write", "C10-88",
        "RDMA WRITE to a QP whose access flags lack remote write, through a region that allows it (control: "
        "READ)",
        remote_fault(), [=](env& e) {
            pair_opts o;
            o.access1 = LW | RR | RA;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_read(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, mr->rkey);
        });
    add("C10_56_write_mr_of_another_pd", "C10-56",
        "RDMA WRITE through a region of another PD than the responding QP's (control: a QP of that PD)",
        remote_fault(), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL, 0, R, e.pd(1, true));
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt, 1);
            e.remote(WRITE, e.tgt, 64, mr->rkey, 0);
        });
    add("o10_43_misaligned_fetch_add_refused_at_post", "o10-43",
        "Fetch&Add at an address 4 bytes off an 8-byte boundary (control: the aligned word)", refused(EINVAL),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.ctl_atomic(mr->rkey, e.tgt + 8, e.tgt + 8);
            e.remote(FAA, e.tgt + 4, 8, mr->rkey);
        });
    add("C10_87_write_with_imm_wrong_key_byte", "C10-86, C10-87, o10-37.2.3",
        "RDMA WRITE with immediate and a wrong key byte; it takes the posted receive (control: with the "
        "right "
        "key it lands and completes the receive)",
        write_imm_fault(), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            e.recv1_spare();
            ibv_sge sge;
            ibv_send_wr ok = e.remote_wr(IBV_WR_RDMA_WRITE_WITH_IMM, e.tgt, 64, mr->rkey, &sge);
            if (e.post(0, 0, ok)) abort_case("control WRITE_WITH_IMM: post failed");
            e.expect_ok(e.p().cq[R1], IBV_WC_RECV_RDMA_WITH_IMM, "control WRITE_WITH_IMM receive");
            --e.p().recvs[1];
            e.expect_ok(e.p().cq[S0], IBV_WC_RDMA_WRITE, "control WRITE_WITH_IMM");
            e.expect_mem(1, e.tgt, e.get(0, e.src, 64), "control WRITE_WITH_IMM data");
            e.recv1_spare();
            e.watch(1, e.rbuf, 4096);
            e.remote(IBV_WR_RDMA_WRITE_WITH_IMM, e.tgt, 64, other_byte(mr->rkey));
        });
}

// Zero-based, physical and shared regions.
void special_region_cases(table_builder& add) {
    add("o10_36_2_2_zbva_write_one_byte_past_end", "o10-36.2.2, C10-56",
        "RDMA WRITE ending one byte past a zero-based region (addressed 0 .. 8191)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | ZB);
            e.ctl_write(mr->rkey, R - 64, 64, e.tgt + R - 64);
            e.remote(WRITE, R - 63, 64, mr->rkey);
        });
    add("C10_56_pmr_write_one_byte_past_end", "C10-56, o10-37.2.4",
        "RDMA WRITE ending one byte past a physical region over the target's pages (first byte at offset 50, "
        "8092 bytes)",
        remote_fault(), [=](env& e) {
            const auto pages = e.pages1(e.tgt, R);
            ibv_phys_mr_attr a;
            a.list = pages.data();
            a.count = uint32_t(pages.size());
            a.size = 4096;
            a.iova = 0x40000000;
            a.length = R - 100;
            a.first_offset = 50;
            a.access = ALL;
            a.key_byte = 0x3C;
            ibv_mr* mr = e.phys1(a);
            if (hw::key_byte(mr->rkey) != 0x3C)
                abort_case("the PMR's R_Key does not carry the consumer's key byte");
            const uint64_t end = a.iova + a.length;
            e.ctl_write(mr->rkey, end - 64, 64, e.tgt + 50 + a.length - 64);
            e.remote(WRITE, end - 63, 64, mr->rkey);
        });
    add("C10_57_shared_mr_without_remote_write", "C10-57, o10-36.2.4",
        "RDMA WRITE through a shared region registered read-only over a writable region's pages (control: "
        "READ "
        "through the shared region)",
        remote_fault(), [=](env& e) {
            ibv_mr* from = e.mr1(ALL);
            ibv_mr* sh = e.shared1(from, e.pd(1), LW | RR, 0x80000000);
            e.ctl_read(sh->rkey, 0x80000000, 64, e.tgt);
            e.remote(WRITE, 0x80000000, 64, sh->rkey);
        });
}

}  // namespace hcasim::attack
