// Attack cases on fast register work requests.
#include "testbench/attack/cases.h"

namespace hcasim::attack {

void fast_register_cases(table_builder& add) {
    // ------------------------------------------------ fast register (node1's QP of pair 0 created with it)
    add("o10_37_2_5_fast_register_on_qp_without_it", "o10-37.2.5, o10-36.2.1",
        "Fast Register WR on a QP created without fast register, then a WRITE with the key it would have "
        "made",
        mm_error(xs::not_enabled), [=](env& e) {
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            ibv_send_wr wr = e.fast_reg_wr(l, 0x51, IOVA, R, ALL, pages);
            e.attack_post(1, 0, wr);
            const uint32_t k = hw::make_key(l->handle, 0x51);
            e.after = [=](env& e) {
                e.open();
                e.probe_fault(WRITE, IOVA, 64, k, 1);
            };
        });
    add("o10_37_2_5_fast_register_of_a_valid_lkey", "o10-37.2.5",
        "Fast Register WR for an L_Key that is already Valid (afterwards the first registration still works)",
        mm_error(xs::bad_state), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x52, IOVA, R, ALL, pages);
            e.ctl_write(k, IOVA, 64, e.tgt);
            ibv_send_wr wr = e.fast_reg_wr(l, 0x53, IOVA + 0x100000, R, ALL, pages);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) { e.ctl_write(k, IOVA + 128, 64, e.tgt + 128, 1); };
        });
    add("o10_36_2_1_free_lkey_grants_nothing", "o10-36.2.1",
        "RDMA WRITE with the R_Key of an Allocate L_Key region never fast-registered (Free)", remote_fault(),
        [=](env& e) {
            ibv_mr* l = e.lkey1(2);
            e.remote(WRITE, 0, 64, l->rkey);
        });
    add("o10_37_2_5_fast_register_misaligned_page", "o10-37.2.5, C10-53.2.1",
        "Fast Register WR whose first page address is 16 bytes off a page boundary",
        mm_error(xs::bad_page_list), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            auto pages = e.pages1(e.tgt, R);
            pages[0] += 16;
            ibv_send_wr wr = e.fast_reg_wr(l, 0x54, IOVA, R - 16, ALL, pages);
            e.attack_post(1, 0, wr);
            const uint32_t k = hw::make_key(l->handle, 0x54);
            e.after = [=](env& e) {
                e.open();
                e.probe_fault(WRITE, IOVA, 64, k, 1);
            };
        });
    add("o10_37_2_5_fast_register_lkey_of_another_pd", "o10-37.2.5",
        "Fast Register WR on a PD 1 QP for an L_Key of PD 2", mm_error(xs::bad_pd), [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2, e.pd(1, true));
            const auto pages = e.pages1(e.tgt, R);
            ibv_send_wr wr = e.fast_reg_wr(l, 0x55, IOVA, R, ALL, pages);
            e.attack_post(1, 0, wr);
        });
    add("o10_37_2_18_fast_reg_mr_stale_after_local_invalidate", "o10-37.2.18, o10-37.2.13",
        "RDMA WRITE with a fast-registered region's R_Key after Local Invalidate", remote_fault(),
        [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x56, IOVA, R, ALL, pages);
            e.ctl_write(k, IOVA, 64, e.tgt);
            e.local_inv(k);
            e.remote(WRITE, IOVA, 64, k);
        });
    add("o10_37_2_18_fast_reg_mr_stale_after_send_with_invalidate", "o10-37.2.18, o10-37.2.21",
        "RDMA READ with a fast-registered region's R_Key after a SEND with Invalidate of it", remote_fault(),
        [=](env& e) {
            fr_pair(e);
            ibv_mr* l = e.lkey1(2);
            const auto pages = e.pages1(e.tgt, R);
            const uint32_t k = e.fast_reg(l, 0x57, IOVA, R, ALL, pages);
            e.ctl_read(k, IOVA, 64, e.tgt);
            e.ctl_send_inv(k);
            e.remote(READ, IOVA, 64, k);
        });
    add("o10_37_2_5_fast_register_of_register_mr_key", "o10-37.2.5, o10-36.2.3",
        "Fast Register WR naming a region made by Register MR", refused(EINVAL), [=](env& e) {
            fr_pair(e);
            ibv_mr* mr = e.mr1(ALL);
            const auto pages = e.pages1(e.tgt, R);
            ibv_send_wr wr = e.fast_reg_wr(mr, 0x5A, IOVA, R, ALL, pages);
            e.attack_post(1, 0, wr);
        });
}

}  // namespace hcasim::attack
