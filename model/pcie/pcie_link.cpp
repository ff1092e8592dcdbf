// PCIe link timing; see pcie_link.h and docs/pcie.md.
#include "model/pcie/pcie_link.h"
#include "model/core/hex.h"
#include "model/core/sim_time.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "tlm_if/tlm_ext.h"

namespace hcasim {

using namespace sc_core;

namespace {

struct ack_fc_row {
    unsigned gen, lanes, mps, ack_limit, fc_limit;
};

// PCIe Base Spec 5.0 tables 2-46..2-48 (ACK latency limit, UpdateFC guideline; symbol times),
// as used by Neugebauer et al. SIGCOMM'18. Gen3-Gen5 share one table.
constexpr ack_fc_row ack_fc_table[] = {
    {1, 1, 128, 237, 237},    {1, 1, 256, 416, 416},    {1, 1, 512, 559, 559},    {1, 1, 1024, 1071, 1071},
    {1, 1, 2048, 2095, 2095}, {1, 1, 4096, 4143, 4143}, {1, 2, 128, 128, 128},    {1, 2, 256, 217, 217},
    {1, 2, 512, 289, 289},    {1, 2, 1024, 545, 545},   {1, 2, 2048, 1057, 1057}, {1, 2, 4096, 2081, 2081},
    {1, 4, 128, 73, 73},      {1, 4, 256, 118, 118},    {1, 4, 512, 154, 154},    {1, 4, 1024, 282, 282},
    {1, 4, 2048, 538, 538},   {1, 4, 4096, 1050, 1050}, {1, 8, 128, 67, 67},      {1, 8, 256, 107, 107},
    {1, 8, 512, 86, 86},      {1, 8, 1024, 150, 150},   {1, 8, 2048, 278, 278},   {1, 8, 4096, 534, 534},
    {1, 16, 128, 48, 48},     {1, 16, 256, 72, 72},     {1, 16, 512, 86, 86},     {1, 16, 1024, 150, 150},
    {1, 16, 2048, 278, 278},  {1, 16, 4096, 534, 534},  {2, 1, 128, 288, 288},    {2, 1, 256, 467, 467},
    {2, 1, 512, 610, 610},    {2, 1, 1024, 1122, 1122}, {2, 1, 2048, 2146, 2146}, {2, 1, 4096, 4194, 4194},
    {2, 2, 128, 179, 179},    {2, 2, 256, 268, 268},    {2, 2, 512, 340, 340},    {2, 2, 1024, 596, 596},
    {2, 2, 2048, 1108, 1108}, {2, 2, 4096, 2132, 2132}, {2, 4, 128, 124, 124},    {2, 4, 256, 169, 169},
    {2, 4, 512, 205, 205},    {2, 4, 1024, 333, 333},   {2, 4, 2048, 589, 589},   {2, 4, 4096, 1101, 1101},
    {2, 8, 128, 118, 118},    {2, 8, 256, 158, 158},    {2, 8, 512, 137, 137},    {2, 8, 1024, 201, 201},
    {2, 8, 2048, 329, 329},   {2, 8, 4096, 585, 585},   {2, 16, 128, 99, 99},     {2, 16, 256, 123, 123},
    {2, 16, 512, 137, 137},   {2, 16, 1024, 201, 201},  {2, 16, 2048, 329, 329},  {2, 16, 4096, 585, 585},
    {3, 1, 128, 333, 333},    {3, 1, 256, 512, 512},    {3, 1, 512, 655, 655},    {3, 1, 1024, 1167, 1167},
    {3, 1, 2048, 2191, 2191}, {3, 1, 4096, 4239, 4239}, {3, 2, 128, 224, 224},    {3, 2, 256, 313, 313},
    {3, 2, 512, 385, 385},    {3, 2, 1024, 641, 641},   {3, 2, 2048, 1153, 1153}, {3, 2, 4096, 2177, 2177},
    {3, 4, 128, 169, 169},    {3, 4, 256, 214, 214},    {3, 4, 512, 250, 250},    {3, 4, 1024, 378, 378},
    {3, 4, 2048, 634, 634},   {3, 4, 4096, 1146, 1146}, {3, 8, 128, 163, 163},    {3, 8, 256, 203, 203},
    {3, 8, 512, 182, 182},    {3, 8, 1024, 246, 246},   {3, 8, 2048, 374, 374},   {3, 8, 4096, 630, 630},
    {3, 16, 128, 144, 144},   {3, 16, 256, 168, 168},   {3, 16, 512, 182, 182},   {3, 16, 1024, 246, 246},
    {3, 16, 2048, 374, 374},  {3, 16, 4096, 630, 630},  {4, 1, 128, 333, 333},    {4, 1, 256, 512, 512},
    {4, 1, 512, 655, 655},    {4, 1, 1024, 1167, 1167}, {4, 1, 2048, 2191, 2191}, {4, 1, 4096, 4239, 4239},
    {4, 2, 128, 224, 224},    {4, 2, 256, 313, 313},    {4, 2, 512, 385, 385},    {4, 2, 1024, 641, 641},
    {4, 2, 2048, 1153, 1153}, {4, 2, 4096, 2177, 2177}, {4, 4, 128, 169, 169},    {4, 4, 256, 214, 214},
    {4, 4, 512, 250, 250},    {4, 4, 1024, 378, 378},   {4, 4, 2048, 634, 634},   {4, 4, 4096, 1146, 1146},
    {4, 8, 128, 163, 163},    {4, 8, 256, 203, 203},    {4, 8, 512, 182, 182},    {4, 8, 1024, 246, 246},
    {4, 8, 2048, 374, 374},   {4, 8, 4096, 630, 630},   {4, 16, 128, 144, 144},   {4, 16, 256, 168, 168},
    {4, 16, 512, 182, 182},   {4, 16, 1024, 246, 246},  {4, 16, 2048, 374, 374},  {4, 16, 4096, 630, 630},
    {5, 1, 128, 333, 333},    {5, 1, 256, 512, 512},    {5, 1, 512, 655, 655},    {5, 1, 1024, 1167, 1167},
    {5, 1, 2048, 2191, 2191}, {5, 1, 4096, 4239, 4239}, {5, 2, 128, 224, 224},    {5, 2, 256, 313, 313},
    {5, 2, 512, 385, 385},    {5, 2, 1024, 641, 641},   {5, 2, 2048, 1153, 1153}, {5, 2, 4096, 2177, 2177},
    {5, 4, 128, 169, 169},    {5, 4, 256, 214, 214},    {5, 4, 512, 250, 250},    {5, 4, 1024, 378, 378},
    {5, 4, 2048, 634, 634},   {5, 4, 4096, 1146, 1146}, {5, 8, 128, 163, 163},    {5, 8, 256, 203, 203},
    {5, 8, 512, 182, 182},    {5, 8, 1024, 246, 246},   {5, 8, 2048, 374, 374},   {5, 8, 4096, 630, 630},
    {5, 16, 128, 144, 144},   {5, 16, 256, 168, 168},   {5, 16, 512, 182, 182},   {5, 16, 1024, 246, 246},
    {5, 16, 2048, 374, 374},  {5, 16, 4096, 630, 630},
};

const ack_fc_row* find_row(unsigned gen, unsigned lanes, unsigned mps) {
    for (const auto& r : ack_fc_table)
        if (r.gen == gen && r.lanes == lanes && r.mps == mps) return &r;
    return nullptr;
}

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

}  // namespace

// --- formula ------------------------------------------------------------------------------

double pcie_link::gt_per_s(unsigned gen) {
    static constexpr double rate[] = {0.0, 2.5, 5.0, 8.0, 16.0, 32.0};
    return gen >= 1 && gen <= 5 ? rate[gen] : 0.0;
}

double pcie_link::encoding(unsigned gen) { return gen <= 2 ? 8.0 / 10.0 : 128.0 / 130.0; }

double pcie_link::raw_gbps(unsigned gen, unsigned lanes) { return gt_per_s(gen) * lanes * encoding(gen); }

unsigned pcie_link::ack_limit(unsigned gen, unsigned lanes, unsigned mps) {
    const ack_fc_row* r = find_row(gen, lanes, mps);
    return r ? r->ack_limit : 0;
}

unsigned pcie_link::fc_limit(unsigned gen, unsigned lanes, unsigned mps) {
    const ack_fc_row* r = find_row(gen, lanes, mps);
    return r ? r->fc_limit : 0;
}

double pcie_link::tlp_gbps(unsigned gen, unsigned lanes, unsigned mps) {
    const ack_fc_row* r = find_row(gen, lanes, mps);
    if (!r) return 0.0;
    return raw_gbps(gen, lanes) * (1.0 - 8.0 / r->ack_limit - 8.0 / r->fc_limit - 4.0 / 1538.0);
}

uint64_t pcie_link::write_tlp_bytes(uint64_t size, unsigned mps) {
    return size + ceil_div(size, mps) * write_overhead_bytes;
}

uint64_t pcie_link::read_request_tlp_bytes(uint64_t size, unsigned mrrs) {
    return ceil_div(size, mrrs) * read_request_bytes;
}

uint64_t pcie_link::read_completion_tlp_bytes(uint64_t size, unsigned mps, unsigned mrrs) {
    const uint64_t full = size / mrrs, rest = size % mrrs;
    const uint64_t cpls = full * ceil_div(mrrs, mps) + ceil_div(rest, mps);
    return size + cpls * completion_overhead_bytes;
}

double pcie_link::write_gbps(unsigned gen, unsigned lanes, unsigned mps, uint64_t size) {
    return tlp_gbps(gen, lanes, mps) * double(size) / double(write_tlp_bytes(size, mps));
}

double pcie_link::read_gbps(unsigned gen, unsigned lanes, unsigned mps, unsigned mrrs, uint64_t size) {
    const uint64_t worst =
        std::max(read_completion_tlp_bytes(size, mps, mrrs), read_request_tlp_bytes(size, mrrs));
    return tlp_gbps(gen, lanes, mps) * double(size) / double(worst);
}

// --- module -------------------------------------------------------------------------------

pcie_link::pcie_link(const sc_module_name& name)
    : sc_module(name),
      upstream_in("upstream_in"),
      upstream_out("upstream_out"),
      downstream_in("downstream_in"),
      downstream_out("downstream_out"),
      generation("generation", 3, "", "PCIe generation 1..5 (2.5/5/8/16/32 GT/s per lane)", {1, 5}),
      lanes("lanes", 16, "", "link width: 1, 2, 4, 8 or 16 lanes", {1, 16}),
      mps_bytes("mps_bytes", 256, "bytes", "Max_Payload_Size: 128..4096, power of 2", {128, 4096}),
      mrrs_bytes("mrrs_bytes", 512, "bytes", "Max_Read_Request_Size: 128..4096, power of 2", {128, 4096}),
      read_latency_ns("read_latency_ns", 535.0, "ns",
                      "root complex + memory latency from a read request's arrival to its first "
                      "completion (535: 64 B read round trip 549.9 ns on Gen3 x8)",
                      {0.0, 1e6}),
      read_tags("read_tags", 128, "", "max outstanding non-posted requests (tags), 1..768", {1, 768}),
      mmio_latency_ns("mmio_latency_ns", 200.0, "ns",
                      "one-way CPU-to-device MMIO latency on top of TLP serialisation", {0.0, 1e6}),
      write_latency_ns("write_latency_ns", 200.0, "ns",
                       "delay from a posted DMA write crossing the link to its data being visible in "
                       "host memory (flight to the root complex, the same path as mmio_latency_ns, "
                       "and the memory write)",
                       {0.0, 1e6}),
      wc_chunk_bytes("wc_chunk_bytes", 64, "bytes",
                     "largest TLP one CPU MMIO write becomes: a write-combining buffer flushes one "
                     "TLP per line (64 on x86); 0: up to Max_Payload_Size (one TLP for the 256-byte "
                     "inline window)",
                     {0, 4096}),
      upstream_tlps("upstream_tlps", "TLPs sent device to host"),
      upstream_bytes("upstream_bytes", "TLP bytes (with headers and framing) sent device to host"),
      downstream_tlps("downstream_tlps", "TLPs sent host to device"),
      downstream_bytes("downstream_bytes", "TLP bytes (with headers and framing) sent host to device"),
      upstream_busy_ps("upstream_busy_ps",
                       "ps the device-to-host direction spent serialising TLPs (utilisation)"),
      downstream_busy_ps("downstream_busy_ps",
                         "ps the host-to-device direction spent serialising TLPs (utilisation)"),
      dma_reads("dma_reads", "DMA read transactions from the device"),
      dma_writes("dma_writes", "DMA write transactions from the device"),
      dma_atomics("dma_atomics", "atomic operations from the device"),
      dma_read_bytes("dma_read_bytes", "payload bytes read by the device"),
      dma_write_bytes("dma_write_bytes", "payload bytes written by the device"),
      mmio_reads("mmio_reads", "MMIO reads from the host CPU"),
      mmio_writes("mmio_writes", "MMIO writes from the host CPU"),
      tag_stall_ps("tag_stall_ps", "ps read requests waited for a free tag"),
      dma_write_errors("dma_write_errors", "posted DMA writes host memory refused") {
    check_power_of_two(lanes);
    check_power_of_two(mps_bytes);
    check_power_of_two(mrrs_bytes);
    if (wc_chunk_bytes) check_power_of_two(wc_chunk_bytes);

    tlp_gbps_ = tlp_gbps(generation, lanes, mps_bytes);
    sc_assert(tlp_gbps_ > 0.0);
    ps_per_byte_ = 8000.0 / tlp_gbps_;
    read_latency_ = sc_time(read_latency_ns, SC_NS);
    mmio_latency_ = sc_time(mmio_latency_ns, SC_NS);
    write_latency_ = sc_time(write_latency_ns, SC_NS);
    tags_.assign(read_tags, SC_ZERO_TIME);

    upstream_in.register_b_transport(this, &pcie_link::upstream_b_transport);
    upstream_in.register_transport_dbg(this, &pcie_link::upstream_dbg);
    upstream_in.register_get_direct_mem_ptr(this, &pcie_link::no_dmi);
    downstream_in.register_b_transport(this, &pcie_link::downstream_b_transport);
    downstream_in.register_transport_dbg(this, &pcie_link::downstream_dbg);
    downstream_in.register_get_direct_mem_ptr(this, &pcie_link::no_dmi);
}

void pcie_link::check_power_of_two(const param<unsigned>& p) const {
    const unsigned v = p;
    if (v && !(v & (v - 1))) return;
    std::string origin = "default";
    broker::instance().lookup(p.key(), &origin);
    throw config_error("bad value '" + p.str() + "' for key '" + p.key() + "' (" + origin +
                       "): expected a power of 2");
}

sc_time pcie_link::calendar::book_anywhere(const sc_time& at, const sc_time& dur) {
    if (head > 64 && head * 2 > busy.size()) {  // compact without reallocating
        busy.erase(busy.begin(), busy.begin() + long(head));
        head = 0;
    }
    sc_time t = at;
    if (busy.size() == head || busy.back().second <= t) {  // after everything booked
        if (busy.size() > head && busy.back().second == t)
            busy.back().second = t + dur;
        else
            busy.push_back({t, t + dur});
        return t + dur;
    }
    // The first interval not wholly before `at` (intervals are sorted and disjoint: so are their
    // ends). Bookings land near the end of the list: look back a few intervals before searching.
    size_t i = busy.size() - 1;
    for (unsigned k = 0; k < 4 && i > head && busy[i - 1].second > t; ++k) --i;
    if (i > head && busy[i - 1].second > t)
        i = size_t(std::upper_bound(busy.begin() + long(head), busy.begin() + long(i), t,
                                    [](const sc_time& x, const std::pair<sc_time, sc_time>& iv) {
                                        return x < iv.second;
                                    }) -
                   busy.begin());
    while (i < busy.size() && busy[i].first < t + dur) {  // overlaps: move past it
        if (busy[i].second > t) t = busy[i].second;
        ++i;
    }
    const sc_time end = t + dur;
    // Insert [t, end) before i, merging with touching neighbours.
    const bool join_prev = i > head && busy[i - 1].second == t;
    const bool join_next = i < busy.size() && busy[i].first == end;
    if (join_prev && join_next) {
        busy[i - 1].second = busy[i].second;
        busy.erase(busy.begin() + long(i));
    } else if (join_prev) {
        busy[i - 1].second = end;
    } else if (join_next) {
        busy[i].first = t;
    } else {
        busy.insert(busy.begin() + long(i), {t, end});
    }
    return end;
}

sc_time pcie_link::tag_stall(const sc_time& ready) {
    const sc_time& avail = tags_[tag_head_];
    tag_stall_ps += ps_count(avail - ready);
    return avail;
}

void pcie_link::upstream_b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    const sc_time now = sim_now();
    const sc_time at = now + delay;
    const uint64_t n = gp.get_data_length();
    const unsigned mps = mps_bytes, mrrs = mrrs_bytes;

    if (gp.get_extension<atomic_ext>()) {
        const sc_time start = tag_ready(at);
        const sc_time req_end = occupy(up_free_, now, start, atomic_request_bytes);
        sc_time d = req_end - now;
        upstream_out->b_transport(gp, d);  // executes at host memory when the request arrives
        const sc_time cpl_end = occupy(down_free_, now, now + d + read_latency_, atomic_completion_bytes);
        tag_release(cpl_end);
        ++upstream_tlps;
        upstream_bytes += atomic_request_bytes;
        ++downstream_tlps;
        downstream_bytes += atomic_completion_bytes;
        ++dma_atomics;
        delay = cpl_end - now;
        return;
    }

    switch (gp.get_command()) {
    case tlm::TLM_WRITE_COMMAND: {
        const uint64_t tlps = (n + mps - 1) / mps;
        const uint64_t bytes = n + tlps * write_overhead_bytes;
        const sc_time end = occupy(up_free_, now, at, bytes);
        // The data lands (and watches fire) at end + write_latency, not now: host memory takes
        // the write with that delay and keeps it from everyone until then. Posted writes land
        // in posting order even when a later one found an earlier gap.
        last_landing_ = std::max(last_landing_, end + write_latency_);
        sc_time land = last_landing_ - now;
        gp.set_extension(posted_write_ext::instance());
        upstream_out->b_transport(gp, land);
        gp.clear_extension(posted_write_ext::instance());
        if (gp.is_response_error() && ++dma_write_errors)
            SC_REPORT_WARNING(
                name(),
                ("posted DMA write to " + hex_address(gp.get_address()) + " refused by host memory").c_str());
        gp.set_response_status(tlm::TLM_OK_RESPONSE);  // posted: no completion to the device
        upstream_tlps += tlps;
        upstream_bytes += bytes;
        ++dma_writes;
        dma_write_bytes += n;
        if (tl_) tl_->span(write_track_, "DMA write", at, last_landing_, "\"bytes\":" + std::to_string(n));
        delay = end - now;  // posted: done once the last TLP has crossed
        return;
    }
    case tlm::TLM_READ_COMMAND: {
        sc_time last = at, mem_extra = SC_ZERO_TIME;
        uint64_t left = n;
        bool first = true;
        // Every request is the same TLP, and every full chunk's completions the same bytes:
        // their serialisation times are looked up once per read, and the counters added once.
        const tlp_memo req = tlp_cost(read_request_bytes);
        tlp_memo cpl;
        uint64_t cpl_chunk = ~uint64_t(0), cpl_tlps = 0, requests = 0, down_tlps = 0, down_bytes = 0,
                 down_ps = 0;
        do {
            const uint64_t chunk = std::min<uint64_t>(left, mrrs);
            const sc_time start = tag_ready(at);
            const sc_time req_end = up_free_.book(now, start, req.time);
            if (first) {  // memory is read once, when the first request arrives
                first = false;
                sc_time d = req_end - now;
                upstream_out->b_transport(gp, d);
                mem_extra = now + d - req_end;
            }
            if (chunk != cpl_chunk) {
                cpl_chunk = chunk;
                cpl_tlps = (chunk + mps - 1) / mps;
                cpl = tlp_cost(chunk + cpl_tlps * completion_overhead_bytes);
            }
            last = down_free_.book(now, req_end + read_latency_ + mem_extra, cpl.time);
            tag_release(last);
            ++requests;
            down_tlps += cpl_tlps;
            down_bytes += cpl.bytes;
            down_ps += cpl.ps;
            left -= chunk;
        } while (left);
        upstream_busy_ps += req.ps * requests;
        downstream_busy_ps += down_ps;
        upstream_tlps += requests;
        upstream_bytes += read_request_bytes * requests;
        downstream_tlps += down_tlps;
        downstream_bytes += down_bytes;
        ++dma_reads;
        dma_read_bytes += n;
        if (tl_) tl_->span(read_track_, "DMA read", at, last, "\"bytes\":" + std::to_string(n));
        delay = last - now;
        return;
    }
    default: gp.set_response_status(tlm::TLM_OK_RESPONSE); return;
    }
}

void pcie_link::downstream_b_transport(tlm::tlm_generic_payload& gp, sc_time& delay) {
    const sc_time now = sim_now();
    const sc_time at = now + delay;
    const uint64_t n = gp.get_data_length();
    const unsigned mps = mps_bytes;
    const uint64_t tlps = std::max<uint64_t>(1, (n + mps - 1) / mps);

    switch (gp.get_command()) {
    case tlm::TLM_WRITE_COMMAND: {
        // A CPU store sequence leaves through its write-combining buffer one line per TLP
        // (mlx5's BlueFlame copy writes a WQE in 64-byte chunks): a 128-byte WQE is two TLPs,
        // each booked on its own, in order, so other cores' TLPs can fill the gaps between them.
        const unsigned chunk = wc_chunk_bytes && wc_chunk_bytes < mps ? unsigned(wc_chunk_bytes) : mps;
        const uint64_t tlps = std::max<uint64_t>(1, (n + chunk - 1) / chunk);
        const uint64_t bytes = n + tlps * write_overhead_bytes;
        sc_time end = at;
        if (chunk < mps) {
            for (uint64_t i = 1; i < tlps; ++i)
                end = occupy(down_free_, now, end, chunk + write_overhead_bytes);
            end = occupy(down_free_, now, end, bytes - (tlps - 1) * (chunk + write_overhead_bytes));
        } else {
            end = occupy(down_free_, now, at, bytes);
        }
        sc_time d = end + mmio_latency_ - now;
        downstream_out->b_transport(gp, d);
        downstream_tlps += tlps;
        downstream_bytes += bytes;
        ++mmio_writes;
        if (tl_) tl_->span(mmio_track_, "MMIO write", at, now + d, "\"bytes\":" + std::to_string(n));
        delay = d;  // completes when the device has taken the write
        return;
    }
    case tlm::TLM_READ_COMMAND: {
        const sc_time req_end = occupy(down_free_, now, at, read_request_bytes);
        sc_time d = req_end + mmio_latency_ - now;
        downstream_out->b_transport(gp, d);
        const uint64_t cpl_bytes = n + tlps * completion_overhead_bytes;
        const sc_time cpl_end = occupy(up_free_, now, now + d, cpl_bytes);
        ++downstream_tlps;
        downstream_bytes += read_request_bytes;
        upstream_tlps += tlps;
        upstream_bytes += cpl_bytes;
        ++mmio_reads;
        delay = cpl_end + mmio_latency_ - now;
        if (tl_) tl_->span(mmio_track_, "MMIO read", at, now + delay, "\"bytes\":" + std::to_string(n));
        return;
    }
    default: downstream_out->b_transport(gp, delay); return;
    }
}

unsigned int pcie_link::upstream_dbg(tlm::tlm_generic_payload& gp) { return upstream_out->transport_dbg(gp); }

unsigned int pcie_link::downstream_dbg(tlm::tlm_generic_payload& gp) {
    return downstream_out->transport_dbg(gp);
}

bool pcie_link::no_dmi(tlm::tlm_generic_payload&, tlm::tlm_dmi& dmi) {
    dmi.allow_none();  // all accesses cross the link, where contention is modelled
    return false;
}

}  // namespace hcasim
