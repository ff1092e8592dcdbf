// rank_comm over MPI_COMM_WORLD (testbench/cli/mpi_comm.cpp); only in a build with MPI.
#pragma once
#include "model/core/rank_comm.h"

namespace hcasim::cli {

/// After MPI_Init, before MPI_Finalize.
class mpi_comm : public rank_comm {
public:
    mpi_comm();
    unsigned rank() const override { return rank_; }
    unsigned size() const override { return size_; }
    std::vector<std::vector<uint8_t>> exchange(const std::vector<std::vector<uint8_t>>& out,
                                               std::vector<uint64_t>& least) override;
    void min_all(std::vector<uint64_t>& v) override;
    std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& mine) override;
    void broadcast(std::vector<uint8_t>& v) override;

private:
    unsigned rank_ = 0, size_ = 1;
};

}  // namespace hcasim::cli
