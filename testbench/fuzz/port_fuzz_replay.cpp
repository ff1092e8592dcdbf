// port_fuzz_replay: the port fuzzer's harness without libFuzzer. Runs each input file once
// (a directory: its files in name order) against one live target HCA and exits 0 if none broke
// an invariant (a broken one aborts with a message). `--write-seeds DIR` writes the seed corpus.
//
//   port_fuzz_replay [-v] FILE|DIR...      (-v: the target's counters each input changed)
//   port_fuzz_replay --write-seeds testbench/fuzz/corpus
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "model/core/stats.h"
#include "testbench/fuzz/port_bench.h"
#include "testbench/fuzz/seeds.h"

extern "C" int sc_main(int, char*[]) { return 0; }

namespace {

namespace fs = std::filesystem;

int usage() {
    std::fprintf(stderr,
                 "usage: port_fuzz_replay [-v] FILE|DIR...\n"
                 "       port_fuzz_replay --write-seeds DIR\n");
    return 2;
}

/// Every counter's value, in declaration order.
std::vector<uint64_t> counter_values() {
    std::vector<uint64_t> v;
    for (const hcasim::counter* c : hcasim::stats_registry::instance().counters()) v.push_back(c->value());
    return v;
}

int write_seeds(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
        std::fprintf(stderr, "port_fuzz_replay: error: cannot create %s: %s\n", dir.c_str(),
                     ec.message().c_str());
        return 2;
    }
    const auto seeds = hcasim::fuzz::make_seeds(hcasim::fuzz::bench());
    for (const auto& [name, bytes] : seeds) {
        const std::string path = (fs::path(dir) / name).string();
        std::ofstream out(path, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
        if (!out) {
            std::fprintf(stderr, "port_fuzz_replay: error: cannot write %s\n", path.c_str());
            return 2;
        }
    }
    std::printf("wrote %zu seeds to %s\n", seeds.size(), dir.c_str());
    return 0;
}

}  // namespace

int main(int argc, char* argv[]) {
    if (argc == 3 && std::strcmp(argv[1], "--write-seeds") == 0) return write_seeds(argv[2]);
    int first = 1;
    const bool verbose = argc > 1 && std::strcmp(argv[1], "-v") == 0;
    if (verbose) ++first;
    if (argc <= first || argv[first][0] == '-') return usage();
    std::vector<std::string> files;
    for (int i = first; i < argc; ++i) {
        std::error_code ec;
        if (fs::is_directory(argv[i], ec)) {
            std::vector<std::string> in_dir;
            for (const auto& e : fs::directory_iterator(argv[i], ec))
                if (e.is_regular_file()) in_dir.push_back(e.path().string());
            std::sort(in_dir.begin(), in_dir.end());
            files.insert(files.end(), in_dir.begin(), in_dir.end());
        } else if (fs::is_regular_file(argv[i], ec)) {
            files.push_back(argv[i]);
        } else {
            std::fprintf(stderr, "port_fuzz_replay: error: no such file or directory: %s\n", argv[i]);
            return 2;
        }
    }
    if (files.empty()) {
        std::fprintf(stderr, "port_fuzz_replay: error: no input files\n");
        return 2;
    }
    hcasim::fuzz::port_bench& b = hcasim::fuzz::bench();
    for (const std::string& f : files) {
        std::ifstream in(f, std::ios::binary);
        const std::vector<uint8_t> data((std::istreambuf_iterator<char>(in)),
                                        std::istreambuf_iterator<char>());
        if (!in.good() && !in.eof()) {
            std::fprintf(stderr, "port_fuzz_replay: error: cannot read %s\n", f.c_str());
            return 2;
        }
        const std::vector<uint64_t> before = verbose ? counter_values() : std::vector<uint64_t>{};
        b.run_input(data.data(), data.size());
        std::printf("ok %s (%zu bytes, %llu ns simulated)\n", f.c_str(), data.size(),
                    (unsigned long long)b.last_input_sim_ns());
        if (verbose) {
            const std::vector<uint64_t> after = counter_values();
            const auto& all = hcasim::stats_registry::instance().counters();
            for (size_t i = 0; i < all.size() && i < before.size(); ++i)
                if (after[i] != before[i])
                    std::printf("    %s +%llu\n", all[i]->key().c_str(),
                                (unsigned long long)(after[i] - before[i]));
        }
    }
    std::printf("%zu passed, 0 failed\n", files.size());
    return 0;
}
