// libFuzzer entry points of the port fuzzer (docs/fuzzing.md): every input runs against the one
// live target HCA of this process (port_bench). With HCASIM_FUZZ_COUNTERS=FILE in the
// environment, the counters of the whole run (every non-zero one) are written to FILE at exit.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "model/core/stats.h"
#include "testbench/fuzz/port_bench.h"

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {
void write_counters() {
    const char* path = std::getenv("HCASIM_FUZZ_COUNTERS");
    FILE* f = path ? std::fopen(path, "w") : nullptr;
    if (!f) return;
    std::fprintf(f, "inputs %llu\n", (unsigned long long)hcasim::fuzz::bench().inputs());
    for (const hcasim::counter* c : hcasim::stats_registry::instance().counters())
        if (c->value()) std::fprintf(f, "%s %llu\n", c->key().c_str(), (unsigned long long)c->value());
    std::fclose(f);
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    hcasim::fuzz::bench();
    if (std::getenv("HCASIM_FUZZ_COUNTERS")) std::atexit(write_counters);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    hcasim::fuzz::bench().run_input(data, size);
    return 0;
}
