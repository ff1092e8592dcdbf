// The software of one node: the simulated OS, the HCA driver and one application address
// space. Built before sc_start; the driver is initialised from the application's process.
#pragma once
#include <string>

#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "firmware/verbs.h"
#include "model/core/hex.h"
#include "model/core/param.h"
#include "model/system/node.h"

namespace hcasim {

class host_bus;

struct host_software {
    /// Physical memory the OS manages: [phys_base, phys_base + phys_bytes).
    static constexpr uint64_t phys_base = 0x10000000ull;  // 256 MiB
    static constexpr uint64_t phys_bytes = 16ull << 30;   // 16 GiB

    host_software(host_bus& bus, const fw::driver_options& opts)
        : os(bus, phys_base, phys_bytes), driver(bus, os, opts), as(os) {}
    /// The software of node `n`, on its CPU. Throws config_error (before the simulation starts)
    /// if the node's memory.size_bytes ends below the OS's range.
    host_software(node& n, const fw::driver_options& opts) : host_software(checked(n), opts) {}

    /// Host memory the software needs: the OS's range ends here.
    static constexpr uint64_t memory_needed = phys_base + phys_bytes;

    fw::host_os os;
    fw::hca_driver driver;
    fw::address_space as;

private:
    static host_bus& checked(node& n) {
        const uint64_t size = n.memory.size_bytes;
        if (size < memory_needed)
            throw config_error(
                "bad value '" + std::to_string(size) + "' for key '" + n.memory.size_bytes.key() +
                "': the simulated host software (OS, driver, applications) uses physical memory up "
                "to " +
                hex_address(memory_needed) + ": memory.size_bytes must be at least " +
                std::to_string(memory_needed) + " (16.25 GiB)");
        return n.cpu;
    }
};

}  // namespace hcasim
