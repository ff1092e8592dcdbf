// The software of one node: the simulated OS, the HCA driver and one application address
// space. Built before sc_start; the driver is initialised from the application's process.
#pragma once
#include "firmware/hca_driver.h"
#include "firmware/host_os.h"
#include "firmware/verbs.h"

namespace hcasim {

class host_bus;

struct host_software {
    /// Physical memory the OS manages: [phys_base, phys_base + phys_bytes).
    static constexpr uint64_t phys_base = 0x10000000ull;       // 256 MiB
    static constexpr uint64_t phys_bytes = 16ull << 30;         // 16 GiB

    host_software(host_bus& bus, const fw::driver_options& opts)
        : os(bus, phys_base, phys_bytes), driver(bus, os, opts), as(os) {}

    fw::host_os os;
    fw::hca_driver driver;
    fw::address_space as;
};

}  // namespace hcasim
