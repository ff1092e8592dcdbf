// Wire capture of one cable (--pcap DIR, docs/traces.md): every packet either end puts on the
// cable, from LRH through VCRC with its ICRC and VCRC sealed, in a pcap file Wireshark and
// tshark dissect as InfiniBand. Encapsulation: pcap (nanosecond variant) with link type
// LINKTYPE_ERF (197), each record an ERF record of type 21 (INFINIBAND); Debian's Wireshark
// 4.0 does not decode LINKTYPE_INFINIBAND (247) but decodes this. The ERF flags' capture
// interface tells the direction: 0 (Wireshark "Port A") from the cable's node (or the subnet
// manager), 1 ("Port B") toward it.
//
// The timestamp is the simulated time the packet's first bit goes on the wire at its sender.
// Senders hand a packet to the cable when they schedule it, possibly ahead of the simulated
// time, and each direction's packets start in order; the writer holds them until no earlier
// packet can come (its start lies before now: a later packet of either direction starts at or
// after the time it is handed over) and writes both directions merged in time order (ties:
// direction 0 first). Not a module: a sender with a capture calls record(); with no capture
// nothing is called on the hot path.
#pragma once
#include <systemc>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "model/core/output_file.h"
#include "tlm_if/tlm_ext.h"

namespace hcasim {

class wire_capture {
public:
    /// Opens `path` (an output_file: written whole when closed, or not at all) and writes the
    /// pcap file header. Throws config_error naming the file if it cannot be opened.
    explicit wire_capture(const std::string& path);
    ~wire_capture() = default;  ///< not closed: the file is not written (the old one stays)
    wire_capture(const wire_capture&) = delete;
    wire_capture& operator=(const wire_capture&) = delete;

    /// Direction `dir` (0: from the cable's node, 1: toward it) puts the packet bytes[0..len)
    /// on the wire, its first bit at `start` (absolute, >= now). `crc`: what is known of its
    /// CRCs (crc_intact_ext): unsealed bytes are sealed in the capture's copy; sealed and
    /// unknown bytes are written as they are (a corrupted packet keeps its bad CRCs).
    void record(unsigned dir, const sc_core::sc_time& start, const uint8_t* bytes, uint32_t len,
                crc_state crc);

    /// Writes every packet held back and commits the file. Returns an empty string, or what
    /// failed ("--pcap: cannot write 'PATH': REASON"; the old file stays). Idempotent.
    std::string close();

    const std::string& path() const { return path_; }
    uint64_t packets() const { return written_; }

private:
    struct entry {
        uint64_t ps = 0;             // first bit, picoseconds of simulated time
        std::vector<uint8_t> bytes;  // LRH .. VCRC, sealed
    };
    /// Writes, in time order, the held packets that start before `before_ps`.
    void flush(uint64_t before_ps);
    void write(unsigned dir, const entry& e);

    std::string path_;
    std::unique_ptr<output_file> f_;  // null once closed
    uint64_t written_ = 0;
    std::deque<entry> pending_[2];             // per direction, in start order
    std::vector<std::vector<uint8_t>> spare_;  // buffers of written entries, reused
    std::vector<uint8_t> out_;                 // one record being assembled
};

}  // namespace hcasim
