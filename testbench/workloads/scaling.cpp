// The scaling workloads: mr_scale (write_bw over N memory regions per node, for the
// translation caches) and dma_read_bw, dma_write_bw (the PCIe link alone, pcie_bench).
// qp_scale runs one process per QP count (testbench/cli/sweep.cpp).
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "model/pcie/dma_traffic_gen.h"
#include "testbench/workloads/base.h"

namespace hcasim::workloads {

/// mr_scale with N regions needs N + 2 MPT entries per node (index 0 is reserved, the MR of
/// the QP buffers takes one), 65538 at the default sweep's 64K: unless hca.max_mrs is
/// configured, nodes 0 and 1 get the next power of two when the model's default is too small.
void size_mpt_tables(uint64_t max_regions) {
    constexpr uint64_t model_default = 65536;  // hca.max_mrs (model/hca/hca.cpp)
    const uint64_t need = uint64_t(1) << ceil_log2(max_regions + 2);
    if (need <= model_default) return;
    for (unsigned i = 0; i < 2; ++i) {
        const std::string key = "node" + std::to_string(i) + ".hca.max_mrs";
        if (!broker::instance().lookup(key))
            broker::instance().set(key, std::to_string(need), "mr_scale (workload.mrs)");
    }
}

/// mr_scale's table: perftest's bandwidth columns with N and the hit rates.
void print_mr_table(std::ostream& os, const std::vector<mr_point>& points) {
    char line[256];
    std::snprintf(line, sizeof line, " %-9s %-10s %-12s %-20s %-15s %-9s %s", "#mrs", "#bytes", "#messages",
                  "BW average[Gb/sec]", "MsgRate[Mpps]", "MPT hit", "MTT hit");
    os << " hcasim mr_scale: memory regions per node (message n uses region n mod #mrs on both nodes); hit\n"
          " rates are both nodes' translation units over the timed WRITEs, after a pass over every region\n"
       << line << "\n";
    const auto fmt_rate = [](double r) {
        char b[16];
        if (r < 0) return std::string("-");
        std::snprintf(b, sizeof b, "%.4f", r);
        return std::string(b);
    };
    for (const mr_point& p : points) {
        std::snprintf(line, sizeof line, " %-9llu %-10llu %-12llu %-20.2f %-15.6f %-9s %s",
                      static_cast<unsigned long long>(p.mrs), static_cast<unsigned long long>(p.size),
                      static_cast<unsigned long long>(p.iters), p.bw_gbps, p.msg_rate_mpps,
                      fmt_rate(p.mpt_hit_rate).c_str(), fmt_rate(p.mtt_hit_rate).c_str());
        os << line << "\n";
    }
}

// ------------------------------------------------------------------ mr_scale
// node1 registers N regions, node0 N local source regions; WRITE n goes from node0's region
// n mod N to node1's region n mod N (L_Key and R_Key rotate), on QP n mod --qps, with the
// transmit depth of write_bw. Each size registers max(N) regions of the size rounded up to a
// page, once; each N of the sweep uses the first N of them. A pass over the N regions warms
// the translation caches, then max(iters, 4 N) WRITEs are timed (iters: --iters x --qps) and the translation units'
// counters of both nodes are read around them.

/// Sizes the driver's MPT and MTT tables for the largest N and finds the counters.
void perftest::mr_scale_init(const phase_spec& p, fw::driver_options& opts) {
    for (uint64_t n : mrs_) max_regions_ = std::max(max_regions_, n);
    for (uint64_t size : p.sizes) region_stride_ = std::max(region_stride_, region_bytes(size));
    if (max_regions_ * region_stride_ > host_software::phys_bytes)
        throw config_error("--mrs " + std::to_string(max_regions_) + " with --size " +
                           std::to_string(region_stride_) + ": each node's regions would take " +
                           std::to_string(max_regions_ * region_stride_) + " bytes, more than the " +
                           std::to_string(host_software::phys_bytes) +
                           " bytes of host memory its application has");
    // Index 0 is reserved and setup()'s MR takes one more.
    opts.log_num_mpts = uint8_t(std::max<unsigned>(opts.log_num_mpts, ceil_log2(max_regions_ + 2)));
    const uint64_t mtts =
        max_regions_ * (region_stride_ / fw::PAGE_BYTES) +
        2 * uint64_t(spec_.qps) * (std::max<uint64_t>(region_stride_, 4096) / fw::PAGE_BYTES + 1) + 64;
    opts.log_num_mtts = uint8_t(std::max<unsigned>(opts.log_num_mtts, ceil_log2(mtts)));
    static const char* const names[4] = {"mpt_hits", "mpt_misses", "mtt_hits", "mtt_misses"};
    for (unsigned i = 0; i < 2; ++i)
        for (unsigned k = 0; k < 4; ++k) {
            const std::string key = std::string(m_.at(i).name()) + ".hca.translation_unit." + names[k];
            tu_[i][k] = stats_registry::instance().find(key);
            if (!tu_[i][k])
                throw workload_error("mr_scale reads the translation unit's counters, but '" + key +
                                     "' does not exist");
        }
}

/// (Re)registers node i's max(N) regions with `bytes` each, unless they already have that size.
void perftest::register_regions(unsigned i, uint64_t bytes) {
    region_set& rs = regions_[i];
    if (rs.bytes == bytes) return;
    const std::string node = "node" + std::to_string(i);
    host_software& sw = *sw_[i];
    for (ibv_mr* mr : rs.mrs)
        if (const int rc = ibv_dereg_mr(mr))
            fail(node + ": mr_scale: ibv_dereg_mr failed (" + std::to_string(rc) + ")");
    rs.mrs.clear();
    rs.bytes = 0;
    const uint64_t pages = bytes / fw::PAGE_BYTES;
    if (sw.driver.num_mpts() < max_regions_ + 2 || sw.driver.num_mtts() < max_regions_ * pages + 2)
        fail(node + ": mr_scale: " + std::to_string(max_regions_) + " regions of " + std::to_string(bytes) +
             " bytes need " + std::to_string(max_regions_ + 2) + " MPT and " +
             std::to_string(max_regions_ * pages) + " MTT entries, the driver has " +
             std::to_string(sw.driver.num_mpts()) + " and " + std::to_string(sw.driver.num_mtts()) +
             " (raise hca.max_mrs / hca.max_mtts)");
    if (!rs.va) {
        rs.va = sw.as.alloc(max_regions_ * region_stride_, fw::PAGE_BYTES);
        if (!rs.va)
            fail(node + ": mr_scale: cannot allocate " + std::to_string(max_regions_) + " regions of " +
                 std::to_string(region_stride_) + " bytes (host memory is " +
                 std::to_string(host_software::phys_bytes >> 20) + " MiB)");
    }
    const int access = i == 0 ? IBV_ACCESS_LOCAL_WRITE : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    rs.mrs.reserve(max_regions_);
    for (uint64_t r = 0; r < max_regions_; ++r) {
        ibv_mr* mr = ibv_reg_mr(side_[i].pd, region_va(i, r), bytes, access);
        if (!mr)
            fail(node + ": mr_scale: ibv_reg_mr of region " + std::to_string(r) + " (" +
                 std::to_string(bytes) + " bytes) failed, errno " + std::to_string(errno) + " (" +
                 std::strerror(errno) + ")");
        rs.mrs.push_back(mr);
    }
    rs.bytes = bytes;
    if (i == 0)  // without --verify, the end-of-point check compares these bytes
        for (uint64_t r = 0; r < max_regions_; ++r)
            (void)sw.as.write(region_va(0, r), &r, sizeof r);  // registered just above: mapped
}

/// One WRITE from node0's region `src` to node1's region `dst`.
void perftest::post_region_write(unsigned q, uint64_t src, uint64_t dst, uint64_t size, uint64_t wr_id,
                                 bool signaled, bool inl) {
    ibv_sge sge{};
    ibv_send_wr wr = make_wr(0, q, IBV_WR_RDMA_WRITE, region_va(0, src), size, region_va(1, dst), wr_id,
                             signaled, inl, 0, 0, sge);
    sge.lkey = regions_[0].mrs[src]->lkey;  // the regions' keys, not the QP buffers' MR's
    wr.wr.rdma.rkey = regions_[1].mrs[dst]->rkey;
    ibv_send_wr* bad = nullptr;
    if (const int rc = ibv_post_send(side_[0].qps[q], &wr, &bad))
        fail("node0: ibv_post_send failed (" + std::to_string(rc) + ")");
}

/// node0 streams `count` WRITEs (message n: region n mod nr, QP n mod --qps, at most
/// tx_depth outstanding per QP) and returns when all have completed.
void perftest::region_stream(const phase_spec& ph, uint64_t size, uint64_t nr, uint64_t count) {
    side& s = side_[0];
    const unsigned nq = nq_, depth = wp_.tx_depth;
    const unsigned cq_mod = std::min<unsigned>(wp_.cq_mod, depth);
    const bool v = spec_.verify, inl = size <= inline_limit(false);
    const auto quota = [&](unsigned q) { return count / nq + (q < count % nq ? 1 : 0); };
    std::vector<uint64_t> posted(nq, 0), completed(nq, 0);
    uint64_t total_posted = 0, total_completed = 0;
    while (total_completed < count) {
        bool progress = false;
        while (total_posted < count) {
            const unsigned q = unsigned(total_posted % nq);
            if (posted[q] - completed[q] >= depth) break;
            const uint64_t m = posted[q];
            const bool sig = (m + 1) % cq_mod == 0 || m + 1 == quota(q);
            const uint64_t r = total_posted % nr;
            post_region_write(q, r, r, size, (uint64_t(q) << 48) | m, sig, inl);
            ++posted[q];
            ++total_posted;
            progress = true;
        }
        ibv_wc wcs[16];
        const int n = ibv_poll_cq(s.scq, 16, wcs);
        if (n < 0) fail("node0: ibv_poll_cq failed");
        record_poll(0, s.scq, wcs, n);
        for (int k = 0; k < n; ++k) {
            const ibv_wc& wc = wcs[k];
            if (wc.status != IBV_WC_SUCCESS) fail(completion_error("node0", wc, hex(wc.wr_id)));
            const unsigned q = unsigned(wc.wr_id >> 48);
            const uint64_t idx = wc.wr_id & ((uint64_t(1) << 48) - 1);
            if (q >= nq || idx < completed[q] || idx >= posted[q]) {
                if (!v)
                    fail("node0: completion for a work request that is not outstanding (wr_id " +
                         hex(wc.wr_id) + ")");
                chk_.bad_completion(at(ph, size, 0, q < nq ? q : 0, idx, "send completion"),
                                    "wr_id " + hex(wc.wr_id) + " is not an outstanding work request");
                continue;
            }
            if (v) {  // signaled: every cq_mod-th WR and the QP's last, in posting order
                const uint64_t want = std::min(quota(q) - 1, (completed[q] / cq_mod + 1) * cq_mod - 1);
                check_send_wc(at(ph, size, 0, q, idx, "send completion"), wc, IBV_WC_RDMA_WRITE,
                              (uint64_t(q) << 48) | want);
            }
            total_completed += idx + 1 - completed[q];
            completed[q] = idx + 1;
        }
        if (n == 0 && !progress && ibv_wait_cq(s.scq, timeout_ns()) != 0)
            fail("node0: mr_scale stalled (no completion within workload.timeout_us)" + cable_faults());
    }
}

/// The four translation counters of both nodes (mpt_hits, mpt_misses, mtt_hits, mtt_misses).
std::array<uint64_t, 4> perftest::tu_counts() const {
    std::array<uint64_t, 4> c{};
    for (unsigned i = 0; i < 2; ++i)
        for (unsigned k = 0; k < 4; ++k) c[k] += tu_[i][k]->value();
    return c;
}

void perftest::mr_phase(unsigned i, const phase_spec& ph, uint64_t step0, op_kind, run_report& rep) {
    uint64_t step = step0;
    for (uint64_t size : ph.sizes) {
        register_regions(i, region_bytes(size));
        bar_.arrive();  // both sides' regions exist (node0 reads node1's R_Keys out of band)
        if (i == 0)
            for (uint64_t nr : mrs_) mr_point_run(ph, size, nr, step++, rep);
        bar_.arrive();
    }
}

/// node0: one point of the sweep, N = nr regions.
void perftest::mr_point_run(const phase_spec& ph, uint64_t size, uint64_t nr, uint64_t step,
                            run_report& rep) {
    const bool v = spec_.verify;
    const uint64_t iters = std::max(ph.iters, 4 * nr);
    const uint64_t guard = size + 8 <= regions_[1].bytes ? 8 : 0;  // bytes after the message that stay 0
    if (v)
        for (uint64_t r = 0; r < nr; ++r) {
            poke_data(0, region_va(0, r), size, key(0, 0, step, r));
            clear(1, region_va(1, r), size + guard);
        }
    region_stream(ph, size, nr, nr);  // warm-up: every region once
    const std::array<uint64_t, 4> c0 = tu_counts();
    const std::vector<uint64_t> busy0 = busy_counts();
    const uint64_t t0 = bus(0).now_ns();
    region_stream(ph, size, nr, iters);
    const uint64_t t1 = bus(0).now_ns();
    const std::array<uint64_t, 4> c1 = tu_counts();
    if (v) {
        for (uint64_t r = 0; r < nr; ++r) {
            chk_.bytes(at(ph, size, 1, 0, r, "destination region"), peek(1, region_va(1, r), size), size,
                       key(0, 0, step, r));
            if (guard)
                chk_.value(at(ph, size, 1, 0, r, "8 bytes after the message in its region"),
                           peek64(1, region_va(1, r) + size), 0);
        }
    } else {
        const uint64_t last = (iters - 1) % nr;
        same_bytes(0, region_va(0, last), 1, region_va(1, last), size);
    }
    size_result r;
    r.size_bytes = size;
    r.iters = (iters + nq_ - 1) / nq_;  // per QP, as the other bandwidth rows
    r.messages = iters;
    const double secs = double(t1 - t0) * 1e-9;
    r.bw_gbps = secs > 0 ? double(size) * double(iters) * 8.0 / secs / 1e9 : 0;
    r.msg_rate_mpps = secs > 0 ? double(iters) / secs / 1e6 : 0;
    if (v) take_counts(r);
    take_util(r, busy0, t1 - t0);
    rep.results.push_back(r);
    const auto rate = [](uint64_t hits, uint64_t misses) {
        return hits + misses ? double(hits) / double(hits + misses) : -1.0;
    };
    points.push_back(mr_point{nr, size, iters, r.bw_gbps, r.msg_rate_mpps, rate(c1[0] - c0[0], c1[1] - c0[1]),
                              rate(c1[2] - c0[2], c1[3] - c0[3])});
}

namespace {

/// The PCIe link alone: host memory, the link and a DMA traffic generator in the device's place.
class pcie_bench : public sc_module {
public:
    host_memory memory;
    pcie_link pcie;
    dma_traffic_gen dma;

    // No CPU and no device registers here: the MMIO side of the link ends in stubs.
    tlm_utils::simple_initiator_socket<pcie_bench> cpu_stub;
    tlm_utils::simple_target_socket<pcie_bench> bar0_stub;
    tlm_utils::simple_initiator_socket<pcie_bench> cpu_mem_stub;

    SC_HAS_PROCESS(pcie_bench);
    pcie_bench(sc_module_name name, const run_spec& spec, const workload_params& wp,
               std::vector<run_report>& out)
        : sc_module(name),
          memory("memory"),
          pcie("pcie"),
          dma("dma"),
          cpu_stub("cpu_stub"),
          bar0_stub("bar0_stub"),
          cpu_mem_stub("cpu_mem_stub"),
          spec_(spec),
          wp_(wp),
          out_(out),
          meter_(spec) {
        pcie.upstream_out.bind(memory.dma);
        dma.out.bind(pcie.upstream_in);
        cpu_stub.bind(pcie.downstream_in);
        pcie.downstream_out.bind(bar0_stub);
        cpu_mem_stub.bind(memory.cpu);
        bar0_stub.register_b_transport(this, &pcie_bench::no_device);
        SC_THREAD(run);
    }

private:
    static constexpr uint64_t base = 0x100000000ull;  ///< first host address the transfers use

    void no_device(tlm::tlm_generic_payload& gp, sc_time&) {
        gp.set_response_status(tlm::TLM_ADDRESS_ERROR_RESPONSE);
    }

    // --verify: zero-time accesses to host memory, as the host CPU's loads and stores.
    void clear(uint64_t span) {
        const std::vector<uint8_t> zero(std::min<uint64_t>(span, 1u << 20), 0);
        for (uint64_t off = 0; off < span; off += zero.size())
            memory.write(base + off, zero.data(), std::min<uint64_t>(zero.size(), span - off));
    }
    void check(const std::string& workload, uint64_t size, uint64_t span, size_result& r) {
        std::vector<uint8_t> got(std::min<uint64_t>(span, 1u << 20));
        for (uint64_t off = 0; off < span; off += got.size()) {
            const uint64_t n = std::min<uint64_t>(got.size(), span - off);
            memory.read(base + off, got.data(), n);
            for (uint64_t k = 0; k < n; ++k) {
                const uint8_t want = dma_traffic_gen::pattern(base + off + k);
                if (got[k] == want) continue;
                if (!r.mismatches) {
                    char b[160];
                    std::snprintf(b, sizeof b,
                                  "%s %llu B, host memory 0x%llx (transfer %llu, byte %llu): expected "
                                  "0x%02x, got 0x%02x",
                                  workload.c_str(), static_cast<unsigned long long>(size),
                                  static_cast<unsigned long long>(base + off + k),
                                  static_cast<unsigned long long>((off + k) / size),
                                  static_cast<unsigned long long>((off + k) % size), want, got[k]);
                    first_mismatch_ = b;
                }
                ++r.mismatches;
            }
            r.bytes_checked += n;
        }
    }
    void run() {
        for (size_t p = 0; p < spec_.phases.size(); ++p) {
            const phase_spec& ph = spec_.phases[p];
            run_report rep;
            rep.workload = ph.workload;
            rep.seed = spec_.seed;
            meter_.phase_begin(p, rep);
            const sc_time t0 = sc_time_stamp();
            sc_time drained = SC_ZERO_TIME;
            const bool write = ph.workload == "dma_write_bw";
            for (size_t si = 0; si < ph.sizes.size(); ++si) {
                const uint64_t size = ph.sizes[si];
                meter_.size_begin(si, ph.iters, "transfers", false);
                // The transfers cycle through [base, base + span) (dma_traffic_gen::run).
                const uint64_t window = std::max(size, dma.window_bytes.get() / size * size);
                const uint64_t span = ph.iters >= window / size ? window : size * ph.iters;
                const uint64_t errors0 = dma.errors.value() + pcie.dma_write_errors.value();
                // Host memory ends at memory.size_bytes: bytes beyond it cannot hold the data.
                const uint64_t mem = memory.size_bytes.get();
                const uint64_t in_memory = mem > base ? std::min(span, mem - base) : 0;
                if (spec_.verify && write) clear(in_memory);
                dma.start(write, base, size, ph.iters, wp_.dma_outstanding);
                wait(dma.done_event());
                size_result r;
                r.size_bytes = size;
                r.iters = r.messages = ph.iters;  // no QPs: the transfers
                r.bw_gbps = dma.bandwidth_gbps();
                const double secs = (dma.last_completion() - dma.first_issue()).to_seconds();
                r.msg_rate_mpps = secs > 0 ? double(ph.iters) / secs / 1e6 : 0;
                if (spec_.verify) {
                    // Writes: every byte written holds the generator's pattern, once the posted
                    // writes still in the link have landed (that wait is not part of the phase's
                    // time). Reads: the data is discarded, so only transfer errors count.
                    const sc_time drain0 = sc_time_stamp();
                    while (write && memory.writes_in_flight())
                        wait(sc_time(std::max(pcie.write_latency_ns.get(), 1.0), SC_NS));
                    drained += sc_time_stamp() - drain0;
                    r.verified = true;
                    r.verify_data = write;
                    r.bad_completions = dma.errors.value() + pcie.dma_write_errors.value() - errors0;
                    if (write) {
                        check(ph.workload, size, in_memory, r);
                        if (in_memory < span) {
                            if (!r.mismatches)
                                first_mismatch_ = ph.workload + " " + std::to_string(size) +
                                                  " B: host memory from " + hex(base + in_memory) +
                                                  " lies beyond memory.size_bytes";
                            r.bytes_checked += span - in_memory;
                            r.mismatches += span - in_memory;
                        }
                    }
                    if (r.bad_completions && rep.verify_failure.empty())
                        rep.verify_failure = ph.workload + " " + std::to_string(size) +
                                             " B: " + std::to_string(r.bad_completions) +
                                             " DMA transfers failed";
                    if (r.mismatches && rep.verify_failure.empty()) rep.verify_failure = first_mismatch_;
                }
                rep.results.push_back(r);
                meter_.row(rep);
            }
            rep.sim_time_ns = uint64_t((sc_time_stamp() - t0 - drained).to_seconds() * 1e9 + 0.5);
            meter_.phase_end(rep);
            out_.push_back(rep);
        }
        sc_stop();
    }
    const run_spec& spec_;
    const workload_params& wp_;
    std::vector<run_report>& out_;
    std::string first_mismatch_;
    run_meter meter_;  ///< the rows to spec_.observer
};

}  // namespace

std::unique_ptr<sc_module> make_pcie_bench(sc_module_name name, const run_spec& spec,
                                           const workload_params& wp, std::vector<run_report>& out) {
    return std::make_unique<pcie_bench>(name, spec, wp, out);
}

}  // namespace hcasim::workloads
