// The attack cases as data: one row per case (what it documents, how the attack must be
// rejected, the steps that set it up and make the attack), built by one function per kind of
// case (cases_*.cpp), in run order. attack_suite.cpp runs them.
#pragma once
#include <functional>
#include <utility>
#include <vector>

#include "testbench/attack/attack_suite.h"
#include "testbench/attack/case_env.h"

namespace hcasim::attack {

struct row {
    case_info info;
    outcome expect;
    std::function<void(env&)> run;
};

/// Appends rows: add(name, spec, attack, expected outcome, the case[, the window kind it needs]).
class table_builder {
public:
    explicit table_builder(std::vector<row>& t) : t_(t) {}
    void operator()(const char* name, const char* spec, const char* attack, outcome x,
                    std::function<void(env&)> run, const char* needs = "") {
        row r;
        r.info = {name, spec, attack, describe(x), needs};
        r.expect = std::move(x);
        r.run = std::move(run);
        t_.push_back(std::move(r));
    }

private:
    std::vector<row>& t_;
};

// Shorthands of the cases.
constexpr uint64_t R = kRegion;
constexpr ibv_wr_opcode WRITE = IBV_WR_RDMA_WRITE, READ = IBV_WR_RDMA_READ, FAA = IBV_WR_ATOMIC_FETCH_AND_ADD,
                        CAS = IBV_WR_ATOMIC_CMP_AND_SWP, SEND = IBV_WR_SEND, SEND_INV = IBV_WR_SEND_WITH_INV;
/// An R_Key with the same index and another key byte.
inline uint32_t other_byte(uint32_t key) { return key ^ 0x5Au; }

/// The region: the target with every right and MW_BIND; the window: [tgt + 1024, + 2048).
inline std::pair<ibv_mr*, ibv_mw*> win1(env& e, unsigned access, uint64_t len = WL, unsigned k = 0) {
    ibv_mr* mr = e.mr1(ALL | MWB);
    ibv_mw* mw = e.mw1(IBV_MW_TYPE_1);
    e.bind1(mw, mr, e.tgt + WO, len, access, k);
    return std::make_pair(mr, mw);
}

/// Fast register's I/O virtual address; fr_pair opens pair 0 with node1's QP created with fast register.
constexpr uint64_t IOVA = 0x60000000;
inline void fr_pair(env& e) {
    pair_opts o;
    o.create1 = IBV_QP_CREATE_FAST_REG;
    e.open(o);
}

// The kinds of cases, in run order (each appends its rows).
void region_key_cases(table_builder& add);  // cases_regions.cpp
void region_bound_cases(table_builder& add);
void region_right_cases(table_builder& add);
void special_region_cases(table_builder& add);
void type1_window_cases(table_builder& add);  // cases_windows.cpp
void bind_error_cases(table_builder& add);
void type2_window_cases(table_builder& add);
void fast_register_cases(table_builder& add);  // cases_fast_register.cpp
void invalidate_cases(table_builder& add);     // cases_invalidate.cpp
void local_segment_cases(table_builder& add);  // cases_local.cpp

}  // namespace hcasim::attack
