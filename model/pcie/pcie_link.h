// PCIe link between the host root complex and the HCA: TLP-layer bandwidth, read tags and
// latencies, after Neugebauer et al., "Understanding PCIe performance for end host networking",
// SIGCOMM 2018. See docs/pcie.md.
#pragma once
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
#include <tlm_utils/simple_target_socket.h>

#include <cstdint>
#include <vector>

#include "model/core/param.h"
#include "model/core/sim_time.h"
#include "model/core/stats.h"
#include "model/core/timeline.h"

namespace hcasim {

/// Loosely-timed PCIe link. Each direction (upstream = device to host, downstream = host to
/// device) is one serial resource with a `free_at` time: a transfer arriving at
/// sc_time_stamp() + delay occupies it for its TLP bytes / TLP-layer bandwidth, starting no
/// earlier than free_at. No process runs per transfer; the returned delay carries the timing.
///
/// - DMA write (upstream_in, posted): ceil(N/MPS) TLPs of payload + 24 B upstream; returns when
///   the last TLP has crossed; the data lands in host memory write_latency_ns later.
/// - DMA read: ceil(N/MRRS) 24-B requests upstream, each holding one of read_tags tags; its
///   completions (payload + 20 B per MPS) go downstream no earlier than request arrival +
///   read_latency_ns; returns when the last completion has crossed.
/// - Atomic (atomic_ext): 40-B request upstream, 28-B completion downstream, one tag.
/// - MMIO (downstream_in, BAR offset addresses): write = payload + 24 B downstream then
///   mmio_latency_ns, in TLPs of at most wc_chunk_bytes (the CPU's write-combining buffer) when set;
///   read = 24-B request down, mmio_latency_ns, target, completion
///   (payload + 20 B) up, mmio_latency_ns.
class pcie_link : public sc_core::sc_module {
public:
    tlm_utils::simple_target_socket<pcie_link> upstream_in;        ///< DMA from the device
    tlm_utils::simple_initiator_socket<pcie_link> upstream_out;    ///< to host_memory.dma
    tlm_utils::simple_target_socket<pcie_link> downstream_in;      ///< MMIO from the host CPU
    tlm_utils::simple_initiator_socket<pcie_link> downstream_out;  ///< to the device's BAR0

    param<unsigned> generation;
    param<unsigned> lanes;
    param<unsigned> mps_bytes;
    param<unsigned> mrrs_bytes;
    param<double> read_latency_ns;
    param<unsigned> read_tags;
    param<double> mmio_latency_ns;
    param<double> write_latency_ns;
    param<unsigned> wc_chunk_bytes;  ///< largest TLP of one CPU MMIO write (write combining); 0: MPS

    counter upstream_tlps, upstream_bytes, downstream_tlps, downstream_bytes, upstream_busy_ps,
        downstream_busy_ps;
    counter dma_reads, dma_writes, dma_atomics, dma_read_bytes, dma_write_bytes;
    counter mmio_reads, mmio_writes, tag_stall_ps, dma_write_errors;

    // TLP sizes on the wire (framing 8 B incl. DLL sequence number and LCRC, no ECRC).
    static constexpr unsigned write_overhead_bytes = 24;       ///< 8 B framing + 4-DW header
    static constexpr unsigned read_request_bytes = 24;         ///< 8 B framing + 4-DW header
    static constexpr unsigned completion_overhead_bytes = 20;  ///< 8 B framing + 3-DW header
    static constexpr unsigned atomic_request_bytes = 24 + 16;  ///< header + compare and swap/add
    static constexpr unsigned atomic_completion_bytes = 20 + 8;

    explicit pcie_link(const sc_core::sc_module_name& name);

    /// TLP-layer bandwidth of one direction of this link, Gb/s.
    double tlp_bandwidth_gbps() const { return tlp_gbps_; }
    /// Serialisation time of `bytes` TLP bytes on one direction.
    sc_core::sc_time tlp_time(uint64_t bytes) const { return ps_time(double(bytes) * ps_per_byte_); }
    /// When each direction becomes idle (absolute).
    sc_core::sc_time upstream_free_at() const { return up_free_.free_at(); }
    sc_core::sc_time downstream_free_at() const { return down_free_.free_at(); }

    // --- the formula, for presets and tests ------------------------------------------------
    /// Transfer rate per lane, GT/s: 2.5, 5, 8, 16, 32 for Gen1..5.
    static double gt_per_s(unsigned gen);
    /// Line encoding efficiency: 8b/10b (Gen1-2), 128b/130b (Gen3-5).
    static double encoding(unsigned gen);
    /// Raw = GT/s x lanes x encoding, Gb/s.
    static double raw_gbps(unsigned gen, unsigned lanes);
    /// ACK latency limit / UpdateFC guideline in symbol times (PCIe 5.0 tables 2-46..2-48);
    /// 0 if (gen, lanes, mps) is not in the table.
    static unsigned ack_limit(unsigned gen, unsigned lanes, unsigned mps);
    static unsigned fc_limit(unsigned gen, unsigned lanes, unsigned mps);
    /// Raw x (1 - 8/AckLimit - 8/FCLimit - 4/1538), Gb/s.
    static double tlp_gbps(unsigned gen, unsigned lanes, unsigned mps);
    /// TLP bytes of a posted write of `size` bytes: size + ceil(size/MPS) x 24.
    static uint64_t write_tlp_bytes(uint64_t size, unsigned mps);
    /// Upstream request bytes of a read of `size`: ceil(size/MRRS) x 24.
    static uint64_t read_request_tlp_bytes(uint64_t size, unsigned mrrs);
    /// Downstream completion bytes of a read: size + sum over requests of ceil(req/MPS) x 20.
    static uint64_t read_completion_tlp_bytes(uint64_t size, unsigned mps, unsigned mrrs);
    /// Effective DMA write bandwidth (SIGCOMM'18), Gb/s.
    static double write_gbps(unsigned gen, unsigned lanes, unsigned mps, uint64_t size);
    /// Effective DMA read bandwidth: the direction that saturates first limits, Gb/s.
    static double read_gbps(unsigned gen, unsigned lanes, unsigned mps, unsigned mrrs, uint64_t size);

    /// --timeline: a span per DMA read, DMA write and MMIO access, on tracks of node `node`.
    void set_timeline(timeline* tl, unsigned node) {
        tl_ = tl;
        read_track_ = tl->track(node, "PCIe: DMA reads");
        write_track_ = tl->track(node, "PCIe: DMA writes (posted)");
        mmio_track_ = tl->track(node, "PCIe: MMIO");
    }

private:
    timeline* tl_ = nullptr;
    unsigned read_track_ = 0, write_track_ = 0, mmio_track_ = 0;
    void upstream_b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    void downstream_b_transport(tlm::tlm_generic_payload& gp, sc_core::sc_time& delay);
    unsigned int upstream_dbg(tlm::tlm_generic_payload& gp);
    unsigned int downstream_dbg(tlm::tlm_generic_payload& gp);
    bool no_dmi(tlm::tlm_generic_payload& gp, tlm::tlm_dmi& dmi);

    /// One direction of the link: the busy intervals booked so far, in time order. Transfers
    /// are booked when they are called but may lie in the future (loosely timed initiators
    /// annotate delays); a transfer takes the first idle gap at or after its arrival that fits,
    /// so one booked far ahead does not block one that arrives earlier. Intervals that ended
    /// before now are dropped; the list stays as short as the booked-ahead window.
    struct calendar {
        std::vector<std::pair<sc_core::sc_time, sc_core::sc_time>> busy;  // [start, end), sorted, disjoint
        size_t head = 0;                                                  // first live interval
        /// Books `dur` at the first gap starting at or after `at` (>= now); returns its end.
        /// The usual cases inline: after everything booked, or right after the last interval.
        sc_core::sc_time book(const sc_core::sc_time& now, const sc_core::sc_time& at,
                              const sc_core::sc_time& dur) {
            while (head < busy.size() && busy[head].second <= now) ++head;
            const size_t n = busy.size();
            if (head > 64 && head * 2 > n) return book_anywhere(at, dur);  // compacts first
            if (n == head || busy[n - 1].second <= at) {                   // after everything booked
                if (n > head && busy[n - 1].second == at)
                    busy[n - 1].second = at + dur;
                else
                    busy.push_back({at, at + dur});
                return at + dur;
            }
            if ((n - 1 == head || busy[n - 2].second <= at) && busy[n - 1].first < at + dur) {
                // Only the last interval ends after `at`, and the transfer does not fit before
                // it: it goes right after it (what book_anywhere() finds, in short; the next
                // chunk of a read arriving while the previous one's TLPs still occupy the link).
                busy[n - 1].second += dur;
                return busy[n - 1].second;
            }
            return book_anywhere(at, dur);
        }
        /// The general case of book(), once `head` is up to date.
        sc_core::sc_time book_anywhere(const sc_core::sc_time& at, const sc_core::sc_time& dur);
        /// End of the last booked interval.
        sc_core::sc_time free_at() const {
            return busy.size() > head ? busy.back().second : sc_core::SC_ZERO_TIME;
        }
    };
    /// Occupies a direction for `bytes` from the first idle gap at or after `at`; returns the end time.
    sc_core::sc_time occupy(calendar& dir, const sc_core::sc_time& now, const sc_core::sc_time& at,
                            uint64_t bytes) {
        const tlp_memo& m = tlp_cost(bytes);
        (&dir == &up_free_ ? upstream_busy_ps : downstream_busy_ps) += m.ps;
        return dir.book(now, at, m.time);
    }
    struct tlp_memo {
        uint64_t bytes = ~uint64_t(0);
        sc_core::sc_time time;
        uint64_t ps = 0;
    };
    /// The serialisation time of `bytes` TLP bytes and its ps: the few TLP sizes a run uses
    /// are remembered (the entry may be replaced by the next call).
    const tlp_memo& tlp_cost(uint64_t bytes) {
        tlp_memo& m = tlp_memo_[(bytes * 0x9E3779B97F4A7C15ull) >> 60];
        if (m.bytes != bytes) {
            m.bytes = bytes;
            m.time = tlp_time(bytes);
            m.ps = ps_count(m.time);
        }
        return m;
    }
    /// Oldest tag's release time; accounts the stall of a request ready at `ready`.
    sc_core::sc_time tag_ready(const sc_core::sc_time& ready) {
        const sc_core::sc_time& avail = tags_[tag_head_];
        return avail <= ready ? ready : tag_stall(ready);
    }
    sc_core::sc_time tag_stall(const sc_core::sc_time& ready);
    void tag_release(const sc_core::sc_time& at) {
        tags_[tag_head_] = at;
        if (++tag_head_ == tags_.size()) tag_head_ = 0;
    }
    void check_power_of_two(const param<unsigned>& p) const;

    sc_core::sc_time last_landing_;  // posted writes land in posting order

    double tlp_gbps_ = 0, ps_per_byte_ = 0;
    tlp_memo tlp_memo_[16];  // occupy(): tlp_time(bytes) and its ps, by a hash of bytes
    sc_core::sc_time read_latency_, mmio_latency_, write_latency_;
    calendar up_free_, down_free_;
    std::vector<sc_core::sc_time> tags_;  // release times, FIFO (completions cross in order)
    size_t tag_head_ = 0;
};

}  // namespace hcasim
