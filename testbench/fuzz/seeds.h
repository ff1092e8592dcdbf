// Seed corpus of the port fuzzer: valid RC SEND / WRITE / READ / atomic requests, ACKs and
// NAKs for the QPs of every state, PSN and opcode-sequence errors, P_Key mismatches, bad CRCs
// and lengths (testbench/fuzz/corpus/, written by `port_fuzz_replay --write-seeds DIR`).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace hcasim::fuzz {

class port_bench;

/// The seed inputs for this bench (QPNs and P_Keys as it allocated them): (file name, bytes).
std::vector<std::pair<std::string, std::vector<uint8_t>>> make_seeds(const port_bench& b);

}  // namespace hcasim::fuzz
