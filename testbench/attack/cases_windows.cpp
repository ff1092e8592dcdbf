// Attack cases on memory windows: type 1 (bound by the verb), bind errors, type 2 (bound by WR).
#include "testbench/attack/cases.h"

namespace hcasim::attack {

// Type 1 windows.
void type1_window_cases(table_builder& add) {
    add("C10_61_window_write_one_byte_past_end", "C10-61, C10-77",
        "RDMA WRITE ending one byte past a type 1 window (inside its region)", remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint64_t w = e.tgt + WO;
            e.ctl_write(mw->rkey, w + WL - 64, 64, w + WL - 64);
            e.remote(WRITE, w + WL - 63, 64, mw->rkey);
        });
    add("C10_61_window_write_one_byte_before_start", "C10-61, C10-77",
        "RDMA WRITE starting one byte before a type 1 window (inside its region)", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint64_t w = e.tgt + WO;
            e.ctl_write(mw->rkey, w, 64, w);
            e.remote(WRITE, w - 1, 64, mw->rkey);
        });
    add("C10_61_window_read_one_byte_past_end", "C10-61, C10-77",
        "RDMA READ ending one byte past a type 1 window", remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint64_t w = e.tgt + WO;
            e.ctl_read(mw->rkey, w + WL - 64, 64, w + WL - 64);
            e.remote(READ, w + WL - 63, 64, mw->rkey);
        });
    add("C10_61_window_fetch_add_one_byte_past_end", "C10-61, C10-77",
        "Fetch&Add on the last aligned word of a 2047-byte type 1 window (its last byte is one past the end)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR | RA, WL - 1);
            const uint64_t w = e.tgt + WO;
            e.ctl_atomic(mw->rkey, w + WL - 16, w + WL - 16);
            e.remote(FAA, w + WL - 8, 8, mw->rkey);
        });
    add("C10_77_window_write_without_write_right", "C10-77",
        "RDMA WRITE through a type 1 window bound with remote read only (the region allows writes; control: "
        "READ)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RR);
            e.ctl_read(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey);
        });
    add("C10_77_window_read_without_read_right", "C10-77",
        "RDMA READ through a type 1 window bound with remote write only (control: WRITE)", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            e.remote(READ, e.tgt + WO, 64, mw->rkey);
        });
    add("C10_77_window_atomic_without_atomic_right", "C10-77, o10-37",
        "Fetch&Add through a type 1 window bound without remote atomic over a region that has it (control: "
        "WRITE)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            e.remote(FAA, e.tgt + WO, 8, mw->rkey);
        });
    add("C10_66_2_2_type1_old_key_after_rebind", "C10-66.2.2, C10-68",
        "RDMA WRITE with the R_Key a type 1 window had before it was bound again (control: the new key)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k1 = mw->rkey;
            e.ctl_write(k1, e.tgt + WO, 64, e.tgt + WO);
            const uint32_t k2 = e.bind1(mw, mr, e.tgt + WO, WL, RW | RR);
            if (k2 == k1) abort_case("the rebind kept the R_Key");
            e.ctl_write(k2, e.tgt + WO, 64, e.tgt + WO);
            e.remote(WRITE, e.tgt + WO, 64, k1);
        });
    add("C10_66_2_4_zero_length_bind_revokes_access", "C10-66.2.4",
        "RDMA WRITE with a type 1 window's current R_Key after a zero-length bind", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            const uint32_t k2 = e.bind1(mw, nullptr, 0, 0, 0);
            e.remote(WRITE, e.tgt + WO, 64, k2);
        });
    add("C10_76_2_1_type1_window_of_another_pd", "C10-76.2.1",
        "RDMA WRITE through a type 1 window of another PD than the responding QP's (control: a QP of that "
        "PD)",
        remote_fault(), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL | MWB, 0, R, e.pd(1, true));
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1, e.pd(1, true));
            e.bind1(mw, mr, e.tgt + WO, WL, RW | RR, 1);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO, 1);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey, 0);
        });
    add("C10_70_deallocated_window", "C10-69, C10-70",
        "RDMA WRITE with the R_Key of a bound type 1 window after Deallocate MW", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.must_dealloc(mw);
            e.remote(WRITE, e.tgt + WO, 64, k);
        });
    add("C10_70_window_key_on_reused_index", "C10-70, o10-37.2.3",
        "RDMA WRITE with a deallocated window's R_Key once its MPT index names a new region over other "
        "memory "
        "(control: the new region's key)",
        remote_fault(), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            // The window's first bound key: the bind verb takes it from the driver's per-index key
            // generation, so the next allocation of the index gets another one.
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.must_dealloc(mw);
            const uint64_t other = e.alloc(1, 4096);
            e.put(1, other, pattern(4096, 77));
            ibv_mr* fresh = e.reg(1, other, 4096, ALL);
            if (hw::key_index(fresh->rkey) != hw::key_index(k))
                abort_case("the new region did not reuse the window's MPT index");
            if (fresh->rkey == k) abort_case("the new region got the dead window's R_Key (key byte reused)");
            e.ctl_write(fresh->rkey, other, 64, other);
            e.watch(1, other, 4096);
            e.remote(WRITE, other, 64, k);
        });
    add("C10_54_2_1_window_rkey_as_read_destination_lkey", "C10-54.2.1",
        "node1 RDMA READs from node0 into the window's range naming the window's R_Key as L_Key",
        local_prot(1, xs::bad_key), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            ibv_sge sge{e.tgt + WO, 64, mw->rkey};
            ibv_send_wr wr{};
            wr.opcode = READ;
            wr.send_flags = IBV_SEND_SIGNALED;
            wr.sg_list = &sge;
            wr.num_sge = 1;
            wr.wr.rdma.remote_addr = e.src;
            wr.wr.rdma.rkey = e.smr->rkey;
            e.attack_post(1, 0, wr);
        });
    add("C10_71_dereg_mr_with_window_bound", "C10-71",
        "Deregister MR of a region with a type 1 window bound (afterwards the window still works)",
        refused(EBUSY), [=](env& e) {
            auto [mr, mw] = win1(e, RW | RR);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO);
            ibv_mr* m = mr;
            e.attack_verb([&e, m] { return e.dereg(m); });
            const uint32_t k = mw->rkey;
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO); };
        });
}

// Bind errors (type 1, by the verb).
void bind_error_cases(table_builder& add) {
    add("C10_72_type1_bind_window_of_another_pd", "C10-72",
        "Bind MW on a QP of PD 1 for a window (and region) of PD 2 (control: the bind on a QP of PD 2)",
        mm_error(xs::bad_pd), [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            ibv_mr* mr = e.mr1(ALL | MWB, 0, R, e.pd(1, true));
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1, e.pd(1, true));
            e.bind1(mw, mr, e.tgt, 64, RW, 1);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR, 0);
        });
    add("C10_73_bind_region_without_mw_bind_right", "C10-73",
        "Bind a type 1 window to a region registered without MW_BIND (control: a region with it)",
        mm_error(xs::no_access), [=](env& e) {
            ibv_mr* ok = e.mr1(ALL | MWB);
            ibv_mr* mr = e.mr1(ALL);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.bind1(mw, ok, e.tgt, 64, RW);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR);
        });
    add("C10_74_bind_remote_write_on_region_without_local_write", "C10-62, C10-74",
        "Bind a type 1 window with remote write to a region without local write (control: remote read)",
        mm_error(xs::no_access), [=](env& e) {
            ibv_mr* mr = e.mr1(RR | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.bind1(mw, mr, e.tgt, 64, RR);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR);
        });
    add("C10_75_bind_past_region_end", "C10-75",
        "Bind a type 1 window whose range ends one byte past the region (control: ending at the last byte)",
        mm_error(xs::out_of_bounds), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.bind1(mw, mr, e.tgt + R - 64, 64, RW);
            e.attack_bind1(mw, mr, e.tgt + R - 63, 64, RW);
        });
    add("C10_75_bind_window_to_region_of_another_pd", "C10-75, C10-79.2.2",
        "Bind a PD 1 type 1 window to a PD 2 region, then WRITE there with the key the verb returned (the "
        "attempt to reach another PD's memory through a window of this PD)",
        mm_error(xs::bad_pd), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB, 0, R, e.pd(1, true));
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.attack_bind1(mw, mr, e.tgt, R, RW | RR);
            const uint32_t k = mw->rkey;
            e.after = [=](env& e) {
                e.open();
                e.probe_fault(WRITE, e.tgt, 64, k, 1);
            };
        });
    add("o10_36_2_2_bind_onto_zbva_region", "o10-36.2.2", "Bind a type 1 window to a zero-based region",
        mm_error(xs::bad_zbva), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB | ZB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            e.attack_bind1(mw, mr, 0, 64, RW);
        });
    add("C10_60_bind_with_deregistered_region_lkey", "C10-60",
        "Bind a type 1 window naming a region that was deregistered", mm_error(xs::bad_key), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            auto copy = std::make_shared<ibv_mr>(*mr);
            e.must_dereg(mr);
            e.attack_bind1(mw, copy.get(), e.tgt, 64, RW);
            e.after = [copy](env&) {};  // keeps the copy alive until the case ends
        });
    add("o10_37_2_34_type1_window_in_bind_wr", "o10-37.2.34", "Post Send Bind MW WR for a type 1 window",
        refused(EINVAL), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
            ibv_send_wr wr = e.bind2_wr(mw, 0x21, mr, e.tgt, 64, RW);
            e.attack_post(1, 0, wr);
        });
    add("o10_37_2_35_type2_window_by_bind_verb", "o10-37.2.35", "Bind MW verb on a type 2 window",
        refused(EINVAL), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
            e.attack_bind1(mw, mr, e.tgt, 64, RW);
        });
    add("o10_37_2_40_zero_length_type2_bind", "o10-37.2.40",
        "Post Send Bind MW WR of length 0 on a bound type 2 window (an attempt to invalidate it by a bind)",
        refused(EINVAL), [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
            e.bind2(mw, 0x31, mr, e.tgt + WO, WL, RW | RR);
            ibv_send_wr wr = e.bind2_wr(mw, 0x32, mr, e.tgt, 0, 0);
            e.attack_post(1, 0, wr);
        });
}

// Type 2 windows (bound by WR on pair 0's node1 QP).
void type2_window_cases(table_builder& add) {
    auto win2 = [=](env& e, unsigned access, unsigned k = 0, ibv_mr* mr = nullptr) {
        if (!mr) mr = e.mr1(ALL | MWB);
        ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
        e.bind2(mw, 0x41, mr, e.tgt + WO, WL, access, k);
        return std::make_pair(mr, mw);
    };
    add("o10_37_2_42_43_type2_window_from_another_qp", "o10-37.2.42, o10-37.2.43",
        "RDMA WRITE through a type 2 window arriving on another QP (same PD) than the one that bound it "
        "(control: the binding QP)",
        remote_fault(), [=](env& e) {
            e.open();
            e.open();
            auto [mr, mw] = win2(e, RW | RR, 0);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO, 0);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey, 1);
        });
    add(
        "o10_37_2_43_type2b_window_from_qp_of_another_pd", "o10-37.2.43",
        "RDMA WRITE through a type 2B window arriving on a QP of another PD (control: the binding QP)",
        remote_fault(),
        [=](env& e) {
            e.open();
            pair_opts o;
            o.pd2 = true;
            e.open(o);
            auto [mr, mw] = win2(e, RW | RR, 0);
            e.ctl_write(mw->rkey, e.tgt + WO, 64, e.tgt + WO, 0);
            e.remote(WRITE, e.tgt + WO, 64, mw->rkey, 1);
        },
        "2B");
    add("o10_37_2_30_type2_stale_key_after_local_invalidate", "o10-37.2.29, o10-37.2.30, o10-37.2.18",
        "RDMA WRITE through a type 2 window after its binding QP invalidated it", remote_fault(),
        [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            e.local_inv(k);
            e.remote(WRITE, e.tgt + WO, 64, k);
        });
    add("o10_37_2_29_type2_bind_of_a_valid_window", "o10-37.2.29, o10-37.2.30",
        "Post Send Bind MW WR over the whole region for a type 2 window that is already bound (afterwards "
        "the "
        "first binding still works)",
        mm_error(xs::bad_state), [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_send_wr wr = e.bind2_wr(mw, 0x42, mr, e.tgt, R, RW | RR | RA);
            e.attack_post(1, 0, wr);
            e.after = [=](env& e) {
                if (e.two_a()) return;  // a QP with 2A windows bound cannot be reset to reconnect it
                e.reconnect(0);
                e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            };
        });
    add("o10_37_2_30_local_invalidate_type2_window_of_another_qp", "o10-37.2.29, o10-37.2.30",
        "Local Invalidate of a type 2 window by a QP that did not bind it (afterwards it still works)",
        mm_error(xs::bad_qpn), [=](env& e) {
            e.open();
            e.open();
            auto [mr, mw] = win2(e, RW | RR, 0);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 0);
            ibv_send_wr wr = e.local_inv_wr(k);
            e.attack_post(1, 1, wr);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 0); };
        });
    add("o10_36_2_1_free_type2_window_grants_nothing", "o10-36.2.1",
        "RDMA WRITE with the R_Key of a type 2 window that was never bound (Free)", remote_fault(),
        [=](env& e) {
            ibv_mr* mr = e.mr1(ALL | MWB);
            ibv_mw* mw = e.mw1(IBV_MW_TYPE_2);
            e.ctl_write(mr->rkey, e.tgt, 64, e.tgt);
            e.remote(WRITE, e.tgt, 64, mw->rkey);
        });
    add("o10_37_2_44_send_inv_type2_window_of_another_qp", "o10-37.2.44, o10-37.2.39",
        "SEND with Invalidate of a type 2 window bound by another QP (afterwards it still works)",
        send_inv_refused(xs::bad_qpn), [=](env& e) {
            e.open();
            e.open();
            auto [mr, mw] = win2(e, RW | RR, 1);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1);
            e.recv1_spare(0);
            e.remote(SEND_INV, 0, 64, k, 0);
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO, 1); };
        });
    add(
        "o10_37_2_29_destroy_qp_with_type2a_window_bound", "o10-37.2.29",
        "Destroy QP of the QP a type 2A window is bound to (afterwards the window still works)",
        refused(EBUSY),
        [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_qp* qp = e.p().qp[1];
            e.attack_verb([qp] { return ibv_destroy_qp(qp); });
            if (e.attack_rc == 0) {
                e.p().qp[1] = nullptr;
                abort_case("the QP was destroyed with a type 2A window bound");
            }
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO); };
        },
        "2A");
    add(
        "o10_37_2_29_reset_qp_with_type2a_window_bound", "o10-37.2.29",
        "Modify QP to Reset for the QP a type 2A window is bound to (afterwards the window still works)",
        refused(EBUSY),
        [=](env& e) {
            auto [mr, mw] = win2(e, RW | RR);
            const uint32_t k = mw->rkey;
            e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO);
            ibv_qp* qp = e.p().qp[1];
            e.attack_verb([qp] {
                ibv_qp_attr a{};
                a.qp_state = IBV_QPS_RESET;
                return ibv_modify_qp(qp, &a, IBV_QP_STATE);
            });
            e.after = [=](env& e) { e.ctl_write(k, e.tgt + WO, 64, e.tgt + WO); };
        },
        "2A");
}

}  // namespace hcasim::attack
