// What the ranks of a partitioned run (docs/fabric.md, "Partitioned runs") do together: the
// collective operations the simulation driver and the merge of outputs need. The testbench
// implements it over MPI (testbench/cli/mpi_comm.cpp); nothing under model/ knows MPI. Every
// rank calls each operation in the same order.
#pragma once
#include <cstdint>
#include <vector>

namespace hcasim {

class rank_comm {
public:
    virtual ~rank_comm() = default;
    virtual unsigned rank() const = 0;
    virtual unsigned size() const = 0;
    /// Sends `out[r]` to every rank r (out has size() entries; its own is ignored); returns what
    /// each rank sent this one, by rank (its own entry empty). `least` becomes, element by
    /// element, the least of every rank's (all the same length): one collective carries both
    /// when no rank sends bytes, two otherwise.
    virtual std::vector<std::vector<uint8_t>> exchange(const std::vector<std::vector<uint8_t>>& out,
                                                       std::vector<uint64_t>& least) = 0;
    /// Element by element, the least of every rank's `v` (all the same length).
    virtual void min_all(std::vector<uint64_t>& v) = 0;
    /// Every rank's `mine`, by rank, on rank 0 (empty elsewhere).
    virtual std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine) = 0;
    /// Rank 0's `v` on every rank.
    virtual void broadcast(std::vector<uint8_t>& v) = 0;
};

}  // namespace hcasim
