// `hcasim serve`: one simulation holding N HCAs on a fabric, serving libibverbs applications
// through the hcasim provider (provider/, docs/libibverbs.md).
#pragma once

namespace hcasim {

/// Entry point of `hcasim serve ...` (argv[1] is "serve"); returns the process exit code.
int serve_main(int argc, char* argv[]);

}  // namespace hcasim
