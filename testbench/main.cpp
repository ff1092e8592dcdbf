// hcasim: the subcommands (compare, replay, serve, sweep-merge) or, by default, a run of a workload (testbench/cli/run.cpp).
#include <systemc>

#include <cstdlib>
#include <string>

#include "testbench/cli/commands.h"
#include "testbench/cli/run.h"
#include "testbench/replay/replay.h"
#include "testbench/serve/serve.h"

using namespace hcasim;

namespace {

// SystemC prints its banner when the kernel starts unless this is set; users diff our output.
const int quiet_banner = setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0);

/// `hcasim NAME ...`: the subcommands; any other first argument is an option of the default
/// command (testbench/cli/run.cpp).
struct subcommand {
    const char* name;
    int (*main)(int argc, char* argv[]);
};
const subcommand subcommands[] = {
    {"compare", cli::compare_main},
    {"replay", [](int argc, char* argv[]) { return replay_main(argc, argv); }},
    {"serve", [](int argc, char* argv[]) { return serve_main(argc, argv); }},
    {"sweep-merge", cli::sweep_merge_main},
};

}  // namespace

int sc_main(int argc, char* argv[]) {
    // The kernel's "simulation stopped by user" note is noise here: workloads stop it.
    sc_core::sc_report_handler::set_actions("/OSCI/SystemC", sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
    if (argc > 1)
        for (const subcommand& c : subcommands)
            if (std::string(argv[1]) == c.name) return c.main(argc, argv);
    return cli::launched_main(argc, argv);  // run_main, unless mpirun started ranks it cannot use
}
