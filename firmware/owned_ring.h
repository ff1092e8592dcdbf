// Reading a ring that the HCA writes and software consumes (CQs, the EQ): the ownership rule and
// publication order of tlm_if/cqe.h, in one place for every reader.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tlm_if/cqe.h"
#include "tlm_if/host_bus.h"

namespace hcasim::fw {

/// Whether entry number n (counting from 0 since the ring was made) of a ring of 2^log_size
/// `Entry`s at ring_pa is software's. Only the owner byte is read, with acquire ordering: after
/// a true answer the entry's other bytes are complete and may be read; before it, they may not
/// (the writer may be storing them).
template <class Entry>
bool software_owns(host_bus& bus, uint64_t ring_pa, uint32_t log_size, uint64_t n) {
    const uint64_t slot = ring_pa + (n & ((uint64_t(1) << log_size) - 1)) * sizeof(Entry);
    const uint8_t owner = bus.load_acquire8(slot + offsetof(Entry, owner));
    return (owner & hw::CQE_OWNER_BIT) == hw::cqe_owner_for(n, log_size);
}

/// How many consecutive entries from number `from` on are software's (at most the ring's size).
template <class Entry>
uint64_t software_owned_run(host_bus& bus, uint64_t ring_pa, uint32_t log_size, uint64_t from) {
    const uint64_t size = uint64_t(1) << log_size;
    uint64_t n = 0;
    while (n < size && software_owns<Entry>(bus, ring_pa, log_size, from + n)) ++n;
    return n;
}

}  // namespace hcasim::fw
