// The ranks of a partitioned run over MPI (rank_comm, model/core/rank_comm.h): the collectives
// the simulation driver and the merge of outputs use, on MPI_COMM_WORLD. Built with MPI only.
#if HCASIM_HAVE_MPI
#include "testbench/cli/mpi_comm.h"

#include <mpi.h>

#include <algorithm>
#include <stdexcept>

namespace hcasim::cli {

namespace {
int as_int(size_t n) {
    if (n > size_t(INT32_MAX)) throw std::runtime_error("mpi_comm: a message over 2 GiB");
    return int(n);
}
std::vector<int> displacements(const std::vector<int>& counts) {
    std::vector<int> d(counts.size(), 0);
    for (size_t r = 1; r < counts.size(); ++r) d[r] = d[r - 1] + counts[r - 1];
    return d;
}
}  // namespace

mpi_comm::mpi_comm() {
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    rank_ = unsigned(r);
    size_ = unsigned(n);
}

std::vector<std::vector<uint8_t>> mpi_comm::exchange(const std::vector<std::vector<uint8_t>>& out,
                                                     std::vector<uint64_t>& least) {
    // One MPI_Alltoall: to each rank, how many bytes follow, whether this rank sends any, and
    // `least`; the bytes in an MPI_Alltoallv only when some rank sends some.
    const size_t k = least.size() + 2;
    std::vector<uint64_t> head(size_ * k), got(size_ * k);
    bool sends = false;
    for (unsigned r = 0; r < size_; ++r) {
        head[r * k] = r == rank_ ? 0 : out.at(r).size();
        sends |= head[r * k] > 0;
    }
    for (unsigned r = 0; r < size_; ++r) {
        head[r * k + 1] = sends ? 1 : 0;
        std::copy(least.begin(), least.end(), head.begin() + std::ptrdiff_t(r * k + 2));
    }
    MPI_Alltoall(head.data(), as_int(k), MPI_UINT64_T, got.data(), as_int(k), MPI_UINT64_T, MPI_COMM_WORLD);
    bool any = false;
    std::vector<int> send_counts(size_), recv_counts(size_);
    for (unsigned r = 0; r < size_; ++r) {
        any |= got[r * k + 1] != 0;
        send_counts[r] = as_int(head[r * k]);
        recv_counts[r] = as_int(got[r * k]);
        for (size_t i = 0; i < least.size(); ++i) least[i] = std::min(least[i], got[r * k + 2 + i]);
    }
    std::vector<std::vector<uint8_t>> in(size_);
    if (!any) return in;
    std::vector<uint8_t> send, recv;
    for (unsigned r = 0; r < size_; ++r)
        if (r != rank_) send.insert(send.end(), out[r].begin(), out[r].end());
    const std::vector<int> sd = displacements(send_counts), rd = displacements(recv_counts);
    recv.resize(size_t(rd.back()) + size_t(recv_counts.back()));
    MPI_Alltoallv(send.data(), send_counts.data(), sd.data(), MPI_BYTE, recv.data(), recv_counts.data(),
                  rd.data(), MPI_BYTE, MPI_COMM_WORLD);
    for (unsigned r = 0; r < size_; ++r)
        in[r].assign(recv.begin() + rd[r], recv.begin() + rd[r] + recv_counts[r]);
    return in;
}

void mpi_comm::min_all(std::vector<uint64_t>& v) {
    MPI_Allreduce(MPI_IN_PLACE, v.data(), as_int(v.size()), MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
}

std::vector<std::vector<uint8_t>> mpi_comm::gather(const std::vector<uint8_t>& mine) {
    const int n = as_int(mine.size());
    std::vector<int> counts(rank_ == 0 ? size_ : 0);
    MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> d;
    std::vector<uint8_t> all;
    if (rank_ == 0) {
        d = displacements(counts);
        all.resize(size_t(d.back()) + size_t(counts.back()));
    }
    MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), d.data(), MPI_BYTE, 0, MPI_COMM_WORLD);
    std::vector<std::vector<uint8_t>> out;
    if (rank_ == 0)
        for (unsigned r = 0; r < size_; ++r)
            out.emplace_back(all.begin() + d[r], all.begin() + d[r] + counts[r]);
    return out;
}

void mpi_comm::broadcast(std::vector<uint8_t>& v) {
    uint64_t n = v.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    v.resize(size_t(n));
    MPI_Bcast(v.data(), as_int(v.size()), MPI_BYTE, 0, MPI_COMM_WORLD);
}

}  // namespace hcasim::cli
#endif
