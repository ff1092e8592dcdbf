#include "testbench/attack/attack_suite.h"

#include <systemc>

#include <memory>

#include "model/system/fabric.h"
#include "testbench/attack/cases.h"
#include "testbench/host_software.h"

namespace hcasim::attack {

namespace {

// ---------------------------------------------------------------- the table

const std::vector<row>& rows() {
    static const std::vector<row> r = [] {
        std::vector<row> t;
        table_builder add(t);
        region_key_cases(add);
        region_bound_cases(add);
        region_right_cases(add);
        special_region_cases(add);
        type1_window_cases(add);
        bind_error_cases(add);
        type2_window_cases(add);
        fast_register_cases(add);
        invalidate_cases(add);
        local_segment_cases(add);
        return t;
    }();
    return r;
}

// ---------------------------------------------------------------- running

case_result run_case(bench& b, const row& r, uint64_t seed) {
    case_result res;
    res.name = r.info.name;
    res.ran = true;
    env e(b, seed);
    std::string why;
    try {
        r.run(e);
        why = e.judge(r.expect);
        res.rejected = why.empty();
        std::string where;
        res.bytes_changed = e.changed(&where);
        if (res.bytes_changed)
            why += (why.empty() ? "" : "; ") + std::to_string(res.bytes_changed) + " target bytes changed (" +
                   where + ")";
        if (why.empty() && e.after) e.after(e);
        res.bytes_changed += e.probe_changed;
        if (why.empty()) why = e.final_check();
    } catch (const case_abort& a) {
        res.bytes_changed += e.probe_changed;
        why = a.why;
    } catch (const std::exception& x) {
        why = std::string("exception: ") + x.what();
    }
    const std::string c = e.cleanup();
    if (why.empty()) why = c;
    res.passed = why.empty();
    res.why = why;
    return res;
}

class suite_app : public sc_core::sc_module {
public:
    SC_HAS_PROCESS(suite_app);
    suite_app(sc_core::sc_module_name n, machine& m, const suite_options& o, suite_result& out)
        : sc_module(n), b_(m), o_(o), out_(out) {
        SC_THREAD(main);
    }
    bool finished = false;

private:
    void main() {
        out_.error = b_.open();
        if (out_.error.empty()) {
            uint64_t index = 0;
            for (const row& r : rows()) {
                ++index;
                if (!o_.only.empty() && r.info.name.find(o_.only) == std::string::npos) continue;
                const std::string& needs = r.info.needs;
                if (!needs.empty() && (needs == "2A") != b_.two_a) {
                    case_result s;
                    s.name = r.info.name;
                    s.why = "needs type " + needs + " windows (hca.mw_type2=" + needs + ")";
                    out_.results.push_back(s);
                    continue;
                }
                case_result c = run_case(b_, r, o_.seed * 1000003 + index);
                ++out_.ran;
                out_.passed += c.passed;
                out_.rejected += c.rejected;
                out_.bytes_changed += c.bytes_changed;
                out_.results.push_back(std::move(c));
            }
        }
        finished = true;
        sc_core::sc_stop();
    }

    bench b_;
    suite_options o_;
    suite_result& out_;
};

}  // namespace

const std::vector<case_info>& cases() {
    static const std::vector<case_info> c = [] {
        std::vector<case_info> v;
        for (const row& r : rows()) v.push_back(r.info);
        return v;
    }();
    return c;
}

suite_result run_suite(const suite_options& opts, elaboration_help* help_out) {
    auto m = std::make_unique<machine>();
    if (m->size() < 2) throw config_error("attack_suite needs fabric.nodes >= 2");
    suite_result res;
    auto app = std::make_unique<suite_app>("attack_suite", *m, opts, res);
    if (help_out) {
        *help_out = {broker::instance().help(), stats_registry::instance().help()};
        return res;
    }
    broker::instance().check_unused();
    sc_core::sc_start(sc_core::sc_time(60.0, sc_core::SC_SEC));
    if (!app->finished && res.error.empty())
        res.error = "the suite did not finish (stalled at " + sc_core::sc_time_stamp().to_string() + ")";
    return res;
}

void print(std::ostream& os, const suite_result& r) {
    for (const case_result& c : r.results) {
        if (!c.ran)
            os << "SKIP " << c.name << ": " << c.why << "\n";
        else if (c.passed)
            os << "PASS " << c.name << "\n";
        else
            os << "FAIL " << c.name << ": " << c.why << "\n";
    }
    if (!r.error.empty()) os << "ERROR " << r.error << "\n";
    os << r.ran << " cases, " << r.rejected << " rejected, " << r.bytes_changed << " bytes changed\n";
}

}  // namespace hcasim::attack
