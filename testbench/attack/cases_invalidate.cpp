// Attack cases on invalidation refused (local invalidate, send with invalidate).
#include "testbench/attack/cases.h"

namespace hcasim::attack {

void invalidate_cases(table_builder& add) {
    // ------------------------------------------------ invalidate: refused
    add("o10_37_2_13_local_invalidate_register_mr_region", "o10-37.2.13",
        "Local Invalidate of a region made by Register MR (afterwards it still works)",
        mm_error(xs::bad_type), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t k = mr->rkey;
            e.ctl_write(k, e.tgt, 64, e.tgt);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt, 64, e.tgt, 1); };
        });
    add("o10_37_2_15_local_invalidate_shared_mr", "o10-37.2.15, o10-36.2.5",
        "Local Invalidate of a shared region (afterwards it still works)", mm_error(xs::shared), [=](env& e) {
            ibv_mr* from = e.mr1(ALL);
            ibv_mr* sh = e.shared1(from, e.pd(1), ALL, 0xA0000000);
            const uint32_t k = sh->rkey;
            e.ctl_write(k, 0xA0000000, 64, e.tgt);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, 0xA0000000, 64, e.tgt, 1); };
        });
    add("o10_37_2_26_local_invalidate_type1_window", "o10-37.2.26",
        "Local Invalidate of a type 1 window (afterwards it still works)", mm_error(xs::bad_type),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1); };
        });
    add("o10_37_2_17_local_invalidate_region_with_window_bound", "o10-37.2.17",
        "Local Invalidate of a fast-registered region with a type 1 window bound (afterwards both still "
        "work)",
        mm_error(xs::busy), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x61, IOVA, R, ALL | MWB, pages);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            const uint32_t wk = e.bind1(mw, l, IOVA + WO, WL, RW | RR);
            e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) {
                e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO, 1);
                e.ctl_write(k, IOVA, 64, e.tgt, 1);
            };
        });
    add("o10_37_2_27_send_inv_type1_window", "o10-37.2.27, o10-37.2.44",
        "SEND with Invalidate of a type 1 window's R_Key (afterwards the window still works)",
        send_inv_refused(xs::bad_type), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1); };
        });
    add("o10_37_2_13_send_inv_register_mr_region", "o10-37.2.13, o10-37.2.24",
        "SEND with Invalidate of a Register MR region's R_Key (afterwards it still works)",
        send_inv_refused(xs::bad_type), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL);
            const uint32_t k = mr->rkey;
            e.ctl_write(k, e.tgt, 64, e.tgt);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt, 64, e.tgt, 1); };
        });
    add("o10_37_2_16_send_inv_shared_mr", "o10-37.2.16",
        "SEND with Invalidate of a shared region's R_Key (afterwards it still works)",
        send_inv_refused(xs::shared), [=](env& e) {
            ibv_mr* from = e.mr1(ALL);
            ibv_mr* sh = e.shared1(from, e.pd(1), ALL, 0xB0000000);
            const uint32_t k = sh->rkey;
            e.ctl_write(k, 0xB0000000, 64, e.tgt);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) { e.ctl_write(k, 0xB0000000, 64, e.tgt, 1); };
        });
    add("o10_37_2_17_send_inv_region_with_window_bound", "o10-37.2.17, o10-37.2.24",
        "SEND with Invalidate of a fast-registered region with a type 1 window bound (afterwards both still "
        "work)",
        send_inv_refused(xs::busy), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x62, IOVA, R, ALL | MWB, pages);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            const uint32_t wk = e.bind1(mw, l, IOVA + WO, WL, RW | RR);
            e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO);
            e.recv1_spare();
            e.remote(SEND_INV, 0, 64, k);
            e.after = [=](env& e) {
                e.ctl_write(wk, IOVA + WO, 64, e.tgt + WO, 1);
                e.ctl_write(k, IOVA, 64, e.tgt, 1);
            };
        });
    add("o10_37_2_24_send_inv_fast_reg_mr_of_another_pd", "o10-37.2.24",
        "SEND with Invalidate, arriving on a PD 1 QP, of a region fast-registered in PD 2 (afterwards it "
        "still "
        "works)",
        send_inv_refused(xs::bad_pd), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            o.create1 = IBV_QP_CREATE_FAST_REG;
            e.open(o);
            ibv_mr* l = e.lkey1(2, e.pd(1, true));
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x63, IOVA, R, ALL, pages, 1);
            e.ctl_write(k, IOVA, 64, e.tgt, 1);
            e.recv1_spare(0);
            e.remote(SEND_INV, 0, 64, k, 0);
            e.after = [=](env& e) { e.ctl_write(k, IOVA, 64, e.tgt, 1); };
        });
}

}  // namespace hcasim::attack
