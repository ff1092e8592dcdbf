// Test doubles for the benches of single HCA units (*_bench_test.cpp), in the style of VCML's
// model tests: the unit under test is the only real module; its DMA port is bound to a
// recording host memory and its neighbours are fakes implementing the narrow interfaces it
// holds (model/hca/*.h), which record each call with the simulated time it was made at.
#pragma once
#include <gtest/gtest.h>

#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "testbench/tests/bench_harness.h"

// Each bench is a test program of one source file, run by gtest's main: SystemC's main is
// defined here, once per program.
extern "C" int sc_main(int, char*[]) { return 0; }

namespace hcasim::test {

/// The HCA clock of the benches (800 MHz): cycle counts in their comments are of this clock.
inline const sc_core::sc_time kBenchClock(1.25, sc_core::SC_NS);

/// Host memory behind PCIe as a unit's DMA sees it: a flat byte store from address 0, every
/// access taking `latency`, and a log of the accesses with the (local) time each was issued.
/// Accesses inside [fail_from, fail_to) answer with an address error.
class recording_memory : public sc_core::sc_module {
public:
    struct access {
        sc_core::sc_time at;  ///< sc_time_stamp() plus the initiator's local time offset
        bool write;
        uint64_t addr;
        uint32_t len;
        bool operator==(const access& o) const {
            return at == o.at && write == o.write && addr == o.addr && len == o.len;
        }
        friend std::ostream& operator<<(std::ostream& os, const access& a) {
            return os << (a.write ? "write 0x" : "read 0x") << std::hex << a.addr << std::dec << " +" << a.len
                      << " at " << a.at;
        }
    };

    tlm_utils::simple_target_socket<recording_memory> socket{"socket"};
    sc_core::sc_time latency;
    std::vector<access> log;
    uint64_t fail_from = 0, fail_to = 0;

    recording_memory(const sc_core::sc_module_name& name, uint64_t size, const sc_core::sc_time& latency)
        : sc_module(name), latency(latency), bytes_(size) {
        socket.register_b_transport(this, &recording_memory::b_transport);
    }

    template <class T>
    void put(uint64_t addr, const T& v) {
        std::memcpy(&bytes_.at(addr + sizeof v - 1) - (sizeof v - 1), &v, sizeof v);
    }
    template <class T>
    T get(uint64_t addr) const {
        T v;
        std::memcpy(&v, &bytes_.at(addr + sizeof v - 1) - (sizeof v - 1), sizeof v);
        return v;
    }

private:
    void b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay) {
        const uint64_t a = gp.get_address();
        const uint32_t n = gp.get_data_length();
        log.push_back({sc_core::sc_time_stamp() + delay, gp.is_write(), a, n});
        delay += latency;
        if ((a < fail_to && a + n > fail_from) || a + n > bytes_.size()) {
            gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
            return;
        }
        if (unsigned char* d = gp.get_data_ptr()) {  // null: a timing-only read
            if (gp.is_write())
                std::memcpy(&bytes_[a], d, n);
            else
                std::memcpy(d, &bytes_[a], n);
        }
        gp.set_response_status(tlm::TLM_OK_RESPONSE);
    }
    std::vector<uint8_t> bytes_;
};

/// What a fake was called with ("method(arguments)") and when, in call order.
using timed_call = std::pair<sc_core::sc_time, std::string>;
struct call_log {
    std::vector<timed_call> calls;
    void add(const std::string& what) { calls.emplace_back(sc_core::sc_time_stamp(), what); }
};

/// Runs `body` in an SC_THREAD from time 0 and simulates until it returns (or `limit`).
inline void run_bench(std::function<void()> body,
                      const sc_core::sc_time& limit = sc_core::sc_time(1, sc_core::SC_MS)) {
    app_module app("bench_driver", std::move(body));
    sc_core::sc_start(limit);
    EXPECT_TRUE(app.finished) << "the bench driver did not finish by " << limit;
}

}  // namespace hcasim::test
