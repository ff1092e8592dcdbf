#include "model/fabric/wire_capture.h"

#include "model/core/param.h"
#include "model/core/sim_time.h"
#include "tlm_if/wire/ib_headers.h"

namespace hcasim {

namespace {

constexpr uint32_t PCAP_MAGIC_NS = 0xa1b23c4d;  // pcap with nanosecond timestamps
constexpr uint32_t LINKTYPE_ERF = 197;
constexpr uint8_t ERF_TYPE_INFINIBAND = 21;
constexpr uint8_t ERF_FLAG_VLEN = 0x04;  // varying record length
constexpr size_t ERF_HEADER_BYTES = 16;
constexpr uint64_t PS_PER_S = 1000000000000ull;

void put_le16(std::vector<uint8_t>& v, uint16_t x) {
    v.push_back(uint8_t(x));
    v.push_back(uint8_t(x >> 8));
}
void put_le32(std::vector<uint8_t>& v, uint32_t x) {
    put_le16(v, uint16_t(x));
    put_le16(v, uint16_t(x >> 16));
}
void put_be16(std::vector<uint8_t>& v, uint16_t x) {
    v.push_back(uint8_t(x >> 8));
    v.push_back(uint8_t(x));
}

}  // namespace

wire_capture::wire_capture(const std::string& path)
    : path_(path), f_(std::make_unique<output_file>(path, "--pcap")) {
    std::vector<uint8_t> h;
    put_le32(h, PCAP_MAGIC_NS);
    put_le16(h, 2);  // version 2.4
    put_le16(h, 4);
    put_le32(h, 0);      // thiszone
    put_le32(h, 0);      // sigfigs
    put_le32(h, 65535);  // snaplen: every packet whole
    put_le32(h, LINKTYPE_ERF);
    f_->write(h.data(), h.size());
}

void wire_capture::record(unsigned dir, const sc_core::sc_time& start, const uint8_t* bytes, uint32_t len,
                          crc_state crc) {
    if (!f_) return;
    dir &= 1;
    entry e;
    e.ps = ps_count(start);
    if (!spare_.empty()) {
        e.bytes.swap(spare_.back());
        spare_.pop_back();
    }
    e.bytes.assign(bytes, bytes + len);
    if (crc == crc_state::unsealed && len >= wire::ICRC_BYTES + wire::VCRC_BYTES)
        wire::seal_packet(e.bytes.data(), len - wire::ICRC_BYTES - wire::VCRC_BYTES);
    pending_[dir].push_back(std::move(e));
    flush(ps_count(sc_core::sc_time_stamp()));
}

void wire_capture::flush(uint64_t before_ps) {
    for (;;) {
        const bool a = !pending_[0].empty() && pending_[0].front().ps < before_ps;
        const bool b = !pending_[1].empty() && pending_[1].front().ps < before_ps;
        if (!a && !b) return;
        // Both directions in time order; equal times: direction 0 first.
        const unsigned dir = a && (!b || pending_[0].front().ps <= pending_[1].front().ps) ? 0 : 1;
        entry& e = pending_[dir].front();
        write(dir, e);
        spare_.push_back(std::move(e.bytes));
        pending_[dir].pop_front();
    }
}

void wire_capture::write(unsigned dir, const entry& e) {
    const uint32_t len = uint32_t(e.bytes.size());
    const uint32_t rlen =
        uint32_t((ERF_HEADER_BYTES + len + 7) & ~size_t(7));  // 8-byte aligned, as DAG cards
    const uint64_t sec = e.ps / PS_PER_S, rem = e.ps % PS_PER_S;
    // ERF timestamp: 32.32 fixed-point seconds, little-endian (binary fraction, truncated).
    const uint64_t frac = uint64_t((static_cast<unsigned __int128>(rem) << 32) / PS_PER_S);
    out_.clear();
    // pcap record header: seconds, nanoseconds, captured and original length (the ERF record).
    put_le32(out_, uint32_t(sec));
    put_le32(out_, uint32_t(rem / 1000));
    put_le32(out_, rlen);
    put_le32(out_, rlen);
    // ERF header: timestamp, type, flags (capture interface = direction), rlen, lctr, wlen.
    put_le32(out_, uint32_t(frac));
    put_le32(out_, uint32_t(sec));
    out_.push_back(ERF_TYPE_INFINIBAND);
    out_.push_back(uint8_t(ERF_FLAG_VLEN | dir));
    put_be16(out_, uint16_t(rlen));
    put_be16(out_, 0);  // loss counter
    put_be16(out_, uint16_t(len));
    out_.insert(out_.end(), e.bytes.begin(), e.bytes.end());
    out_.resize(out_.size() + (rlen - ERF_HEADER_BYTES - len), 0);
    f_->write(out_.data(), out_.size());
    ++written_;
}

std::string wire_capture::close() {
    if (!f_) return "";
    flush(UINT64_MAX);
    std::string failed;
    try {
        f_->commit();
    } catch (const config_error& e) {
        failed = e.what();
    }
    f_.reset();
    return failed;
}

}  // namespace hcasim
