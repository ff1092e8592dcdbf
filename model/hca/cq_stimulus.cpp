#include "model/hca/cq_stimulus.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "model/core/output_file.h"
#include "model/core/param.h"

namespace hcasim {

using namespace sc_core;

namespace {

/// Paths being written, and by which unit: two units writing one file would leave only one.
std::map<std::string, std::string>& open_paths() {
    static std::map<std::string, std::string> m;
    return m;
}
std::mutex open_paths_mutex;

uint64_t to_ps(const sc_time& t) { return uint64_t(t / sc_time(1, SC_PS) + 0.5); }

/// `n` bytes as the value of a pin carrying byte i at bits 8i+7..8i: byte n-1 first.
void put_hex_bytes(char* out, const void* data, uint32_t n) {
    static const char digits[] = "0123456789abcdef";
    const uint8_t* b = static_cast<const uint8_t*>(data);
    for (uint32_t i = 0; i < n; ++i) {
        const uint8_t v = b[n - 1 - i];
        out[2 * i] = digits[v >> 4];
        out[2 * i + 1] = digits[v & 15];
    }
}

class cq_stimulus_writer final : public cq_writer_probe {
public:
    cq_stimulus_writer(const std::string& path, const std::string& unit, const sc_time& clock,
                       unsigned write_cycles)
        : path_(path), f_(path, "--dump-stimulus " + unit) {
        f_.printf("%s\n", cq_stimulus_magic);
        f_.printf("# unit %s\n", unit.c_str());
        f_.printf("# rtl rtl/cq_writer.sv CQS=%u EQS=%u WRITE_CYCLES=%u\n", cq_writer_rtl::CQS,
                  cq_writer_rtl::EQS, cq_writer_rtl::WRITE_CYCLES);
        if (clock != SC_ZERO_TIME) f_.printf("# clock_ps %llu\n", (unsigned long long)to_ps(clock));
        if (write_cycles != ~0u) f_.printf("# write_cycles %u\n", write_cycles);
        f_.write(
            "# One transaction per line: a keyword, the simulated time in ps (decimal), then the pins'\n"
            "# values in hex without 0x (byte i of a CQE, an EQE or a write at bits 8i+7..8i, so the\n"
            "# last byte's digits come first). Inputs, in the order the unit takes them:\n"
            "#   C time tag cqn solicited cqe            completion (cmp_*; cqe: 128 digits)\n"
            "#   E time tag type subtype resource        asynchronous event (ev_*)\n"
            "#   Q time op cqn base log_size eqn consumer  CQ context write (cqc_*; op 1 load, 2 destroy, 3 "
            "resize)\n"
            "#   V time eqn base log_size                EQ context load (eqc_*)\n"
            "#   D time cqn consumer arm                 CQ doorbell (cqdb_*)\n"
            "#   M time addr data                        MSI registers (msi_*)\n"
            "# Expected outputs, after the C or E they belong to:\n"
            "#   W time addr len err data                host memory write (mw_*; data: 2*len digits) and\n"
            "#                                           the response to give it (mwr_err)\n"
            "#   A time tag written reason eqe msi disarmed  the answer (rsp_*)\n");
        std::lock_guard<std::mutex> lock(open_paths_mutex);
        open_paths()[path_] = unit;
        registered_ = true;
    }
    ~cq_stimulus_writer() override { release(); }

    void complete(const sc_time& t, uint8_t tag, uint32_t cqn, const hw::cqe& e, bool solicited) override {
        int n = std::snprintf(line_, sizeof line_, "C %llu %02x %06x %u ", (unsigned long long)to_ps(t), tag,
                              cqn & 0xFFFFFF, solicited ? 1u : 0u);
        n += put_data(line_ + n, &e, sizeof e);
        input(n, true);
    }
    void event(const sc_time& t, uint8_t tag, uint8_t type, uint32_t resource, uint8_t subtype) override {
        input(std::snprintf(line_, sizeof line_, "E %llu %02x %02x %02x %08x\n", (unsigned long long)to_ps(t),
                            tag, type, subtype, resource),
              true);
    }
    void cq_context(const sc_time& t, uint8_t op, uint32_t cqn, uint64_t base, uint8_t log_size, uint16_t eqn,
                    uint32_t consumer) override {
        input(std::snprintf(line_, sizeof line_, "Q %llu %x %06x %016llx %02x %04x %06x\n",
                            (unsigned long long)to_ps(t), op & 3u, cqn & 0xFFFFFF, (unsigned long long)base,
                            log_size & 0x1Fu, eqn, consumer & 0xFFFFFF),
              false);
    }
    void eq_context(const sc_time& t, uint32_t eqn, uint64_t base, uint8_t log_size) override {
        input(std::snprintf(line_, sizeof line_, "V %llu %04x %016llx %02x\n", (unsigned long long)to_ps(t),
                            eqn & 0xFFFF, (unsigned long long)base, log_size & 0x1Fu),
              false);
    }
    void doorbell(const sc_time& t, uint32_t cqn, uint32_t consumer, uint8_t arm) override {
        input(std::snprintf(line_, sizeof line_, "D %llu %06x %06x %x\n", (unsigned long long)to_ps(t),
                            cqn & 0xFFFFFF, consumer & 0xFFFFFF, arm & 3u),
              false);
    }
    void msi(const sc_time& t, uint64_t addr, uint32_t data) override {
        input(std::snprintf(line_, sizeof line_, "M %llu %016llx %08x\n", (unsigned long long)to_ps(t),
                            (unsigned long long)addr, data),
              false);
    }
    void write(const sc_time& t, uint64_t addr, const void* data, uint32_t len, bool err) override {
        if (len > 64) len = 64;  // the write master's widest write (never more: CQE, EQE, MSI)
        int n = std::snprintf(line_, sizeof line_, "W %llu %016llx %02x %u ", (unsigned long long)to_ps(t),
                              (unsigned long long)addr, len, err ? 1u : 0u);
        n += put_data(line_ + n, data, len);
        f_.write(line_, size_t(n));
    }
    void answer(const sc_time& t, const cq_rtl_answer& a) override {
        f_.write(line_,
                 size_t(std::snprintf(line_, sizeof line_, "A %llu %02x %u %u %u %u %u\n",
                                      (unsigned long long)to_ps(t), a.tag, a.written ? 1u : 0u, a.reason & 7u,
                                      a.eqe ? 1u : 0u, a.msi ? 1u : 0u, a.disarmed ? 1u : 0u)));
        open_ = false;
        // The inputs reported meanwhile, in order, up to the next completion or event: what the
        // transactor drives now that the unit is idle again.
        size_t done = 0, k = 0;
        while (k < held_.size() && !open_) {
            f_.write(held_text_.data() + done, held_[k].len);
            done += held_[k].len;
            open_ = held_[k++].request;
        }
        held_text_.erase(0, done);  // capacities are kept: no allocation once warmed
        held_.erase(held_.begin(), held_.begin() + long(k));
    }
    void close() override {
        if (closed_) return;
        closed_ = true;
        release();
        if (open_ || !held_.empty()) {  // the run ended inside a transaction
            f_.write("# the run ended before the answer to the last C or E above; held inputs follow\n");
            f_.write(held_text_);
        }
        f_.commit();  // throws config_error naming the file; the temporary is removed then
    }

private:
    /// `n` bytes as hex (put_hex_bytes) and a newline; returns the characters written.
    static int put_data(char* out, const void* data, uint32_t n) {
        put_hex_bytes(out, data, n);
        out[2 * n] = '\n';
        return int(2 * n + 1);
    }
    /// An input line in line_: written now, or, while a completion or event is unanswered, held
    /// until its answer. The unit takes inputs only while idle (the transactor drives a port
    /// write or request queued meanwhile after the answer), so the file keeps the pins' order
    /// whether the caller reports in call order (impl=rtl: calls queue in the transactor) or
    /// not (impl=tlm: every call is whole).
    void input(int n, bool request) {
        if (open_) {
            held_text_.append(line_, size_t(n));
            held_.push_back({uint32_t(n), request});
            return;
        }
        f_.write(line_, size_t(n));
        open_ = request;
    }
    void release() {
        std::lock_guard<std::mutex> lock(open_paths_mutex);
        if (registered_) open_paths().erase(path_);
        registered_ = false;
    }

    struct held {
        uint32_t len;
        bool request;
    };
    std::string path_;
    output_file f_;
    char line_[64 + 2 * 64 + 2] = {};  // the longest record: C or W with 64 bytes
    bool open_ = false;                // a C or E written, its A not yet
    std::string held_text_;            // inputs reported while open_, in order
    std::vector<held> held_;
    bool closed_ = false, registered_ = false;
};

// --- reading ---------------------------------------------------------------------------------

struct line_error {
    std::string what;
};

bool parse_hex(const std::string& s, uint64_t& v) {
    if (s.empty() || s.size() > 16) return false;
    v = 0;
    for (char c : s) {
        unsigned d;
        if (c >= '0' && c <= '9')
            d = unsigned(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = unsigned(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = unsigned(c - 'A' + 10);
        else
            return false;
        v = v << 4 | d;
    }
    return true;
}

/// The fields of one record line, with the checks every field gets.
class fields {
public:
    fields(const std::vector<std::string>& tok) : tok_(tok) {}
    uint64_t hex(size_t i, const char* name, unsigned bits) const {
        uint64_t v = 0;
        if (!parse_hex(tok_[i], v))
            throw line_error{std::string(name) + " '" + tok_[i] +
                             "' is not a hex number (at most 16 digits, no 0x)"};
        if (bits < 64 && v >> bits)
            throw line_error{std::string(name) + " 0x" + tok_[i] + " does not fit its " +
                             std::to_string(bits) + "-bit pins"};
        return v;
    }
    bool bit(size_t i, const char* name) const {
        if (tok_[i] != "0" && tok_[i] != "1")
            throw line_error{std::string(name) + " '" + tok_[i] + "': expected 0 or 1"};
        return tok_[i] == "1";
    }
    uint64_t time() const {
        const std::string& s = tok_[1];
        if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
            throw line_error{"time '" + s + "' is not a decimal number of ps"};
        unsigned long long v = 0;
        try {
            v = std::stoull(s);
        } catch (const std::exception&) {
            throw line_error{"time '" + s + "' is out of range"};
        }
        return v;
    }
    void bytes(size_t i, const char* name, uint32_t n, uint8_t* out) const {
        const std::string& s = tok_[i];
        if (s.size() != 2 * n)
            throw line_error{std::string(name) + ": expected " + std::to_string(2 * n) + " hex digits (" +
                             std::to_string(n) + " bytes), got " + std::to_string(s.size())};
        for (uint32_t b = 0; b < n; ++b) {
            uint64_t v = 0;
            if (!parse_hex(s.substr(2 * b, 2), v))
                throw line_error{std::string(name) + ": '" + s.substr(2 * b, 2) + "' at digit " +
                                 std::to_string(2 * b + 1) + " is not hex"};
            out[n - 1 - b] = uint8_t(v);  // the last byte's digits come first
        }
    }

private:
    const std::vector<std::string>& tok_;
};

/// Number of fields (keyword and time included) of each record kind.
size_t field_count(char kind) {
    switch (kind) {
    case 'C': return 6;
    case 'E': return 6;
    case 'Q': return 8;
    case 'V': return 5;
    case 'D': return 5;
    case 'M': return 4;
    case 'W': return 6;
    case 'A': return 8;
    default: return 0;
    }
}

const char* field_names(char kind) {
    switch (kind) {
    case 'C': return "C time tag cqn solicited cqe";
    case 'E': return "E time tag type subtype resource";
    case 'Q': return "Q time op cqn base log_size eqn consumer";
    case 'V': return "V time eqn base log_size";
    case 'D': return "D time cqn consumer arm";
    case 'M': return "M time addr data";
    case 'W': return "W time addr len err data";
    case 'A': return "A time tag written reason eqe msi disarmed";
    default: return "";
    }
}

cq_stim_record parse_record(const std::vector<std::string>& tok) {
    cq_stim_record r;
    if (tok[0].size() != 1 || !field_count(tok[0][0]))
        throw line_error{"unknown record '" + tok[0] + "' (expected C, E, Q, V, D, M, W or A)"};
    r.kind = tok[0][0];
    if (tok.size() != field_count(r.kind))
        throw line_error{std::to_string(tok.size()) + " fields, expected " +
                         std::to_string(field_count(r.kind)) + " (" + field_names(r.kind) + ")"};
    const fields f(tok);
    r.t_ps = f.time();
    switch (r.kind) {
    case 'C':
        r.tag = uint8_t(f.hex(2, "tag", 8));
        r.num = uint32_t(f.hex(3, "cqn", 24));
        r.flag = f.bit(4, "solicited");
        f.bytes(5, "cqe", 64, r.data);
        r.len = 64;
        break;
    case 'E':
        r.tag = uint8_t(f.hex(2, "tag", 8));
        r.code = uint8_t(f.hex(3, "type", 8));
        r.subtype = uint8_t(f.hex(4, "subtype", 8));
        r.value = uint32_t(f.hex(5, "resource", 32));
        break;
    case 'Q':
        r.code = uint8_t(f.hex(2, "op", 2));
        if (r.code == 0) throw line_error{"op 0: expected 1 (load), 2 (destroy) or 3 (resize)"};
        r.num = uint32_t(f.hex(3, "cqn", 24));
        r.addr = f.hex(4, "base", 64);
        r.log_size = uint8_t(f.hex(5, "log_size", 5));
        r.eqn = uint16_t(f.hex(6, "eqn", 16));
        r.value = uint32_t(f.hex(7, "consumer", 24));
        break;
    case 'V':
        r.num = uint32_t(f.hex(2, "eqn", 16));
        r.addr = f.hex(3, "base", 64);
        r.log_size = uint8_t(f.hex(4, "log_size", 5));
        break;
    case 'D':
        r.num = uint32_t(f.hex(2, "cqn", 24));
        r.value = uint32_t(f.hex(3, "consumer", 24));
        r.code = uint8_t(f.hex(4, "arm", 2));
        if (r.code == 3) throw line_error{"arm 3: expected 0 (none), 1 (next) or 2 (solicited)"};
        break;
    case 'M':
        r.addr = f.hex(2, "addr", 64);
        r.value = uint32_t(f.hex(3, "data", 32));
        break;
    case 'W':
        r.addr = f.hex(2, "addr", 64);
        r.len = uint32_t(f.hex(3, "len", 7));
        if (r.len == 0 || r.len > 64)
            throw line_error{"len " + tok[3] + ": expected 1 to 40 (hex: 64 bytes)"};
        r.flag = f.bit(4, "err");
        f.bytes(5, "data", r.len, r.data);
        break;
    case 'A':
        r.answer.tag = uint8_t(f.hex(2, "tag", 8));
        r.answer.written = f.bit(3, "written");
        r.answer.reason = uint8_t(f.hex(4, "reason", 3));
        if (r.answer.reason > CQR_EQE_ERR) throw line_error{"reason " + tok[4] + ": expected 0 to 5"};
        if (r.answer.written != (r.answer.reason == CQR_WRITTEN))
            throw line_error{"written " + tok[3] + " with reason " + tok[4] +
                             ": written is 1 exactly when the reason is 0"};
        r.answer.eqe = f.bit(5, "eqe");
        r.answer.msi = f.bit(6, "msi");
        r.answer.disarmed = f.bit(7, "disarmed");
        r.tag = r.answer.tag;
        break;
    }
    return r;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < s.size()) {
        while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r')) ++i;
        if (i == s.size()) break;
        size_t j = i;
        while (j < s.size() && s[j] != ' ' && s[j] != '\t' && s[j] != '\r') ++j;
        out.push_back(s.substr(i, j - i));
        i = j;
    }
    return out;
}

/// The header's "# key value" lines this reader knows; other comments are skipped.
void parse_header(const std::string& line, cq_stimulus& s) {
    const std::vector<std::string> tok = split(line.substr(1));
    if (tok.size() == 2 && tok[0] == "unit") s.unit = tok[1];
    if (tok.size() == 2 && tok[0] == "clock_ps") s.clock_ps = std::strtoull(tok[1].c_str(), nullptr, 10);
    if (tok.size() == 2 && tok[0] == "write_cycles")
        s.write_cycles = unsigned(std::strtoul(tok[1].c_str(), nullptr, 10));
    if (tok.size() >= 2 && tok[0] == "rtl")
        for (size_t i = 2; i < tok.size(); ++i) {
            const auto eq = tok[i].find('=');
            if (eq == std::string::npos) continue;
            const std::string k = tok[i].substr(0, eq);
            const unsigned v = unsigned(std::strtoul(tok[i].c_str() + eq + 1, nullptr, 10));
            if (k == "CQS") s.cqs = v;
            if (k == "EQS") s.eqs = v;
            if (k == "WRITE_CYCLES") s.rtl_write_cycles = v;
        }
}

}  // namespace

std::unique_ptr<cq_writer_probe> open_cq_stimulus(const std::string& path, const std::string& unit,
                                                  const sc_time& clock, unsigned write_cycles) {
    std::string p = path;
    const std::string node = unit.substr(0, unit.find('.'));
    for (size_t at; (at = p.find("{node}")) != std::string::npos;) p.replace(at, 6, node);
    {
        std::lock_guard<std::mutex> lock(open_paths_mutex);
        const auto it = open_paths().find(p);
        if (it != open_paths().end())
            throw config_error("--dump-stimulus: " + it->second + " and " + unit + " would both write '" + p +
                               "' (put {node} in the path, or give each node its own file)");
    }
    return std::make_unique<cq_stimulus_writer>(p, unit, clock, write_cycles);
}

std::unique_ptr<cq_writer_probe> open_cq_stimulus(const std::string& path, const std::string& unit) {
    return open_cq_stimulus(path, unit, SC_ZERO_TIME, ~0u);
}

std::string cq_stimulus_per_node(const std::string& file) {
    const size_t slash = file.rfind('/');
    const size_t name = slash == std::string::npos ? 0 : slash + 1;
    const size_t dot = file.rfind('.');
    if (dot == std::string::npos || dot <= name) return file + ".{node}";  // no extension (or a dot file)
    return file.substr(0, dot) + ".{node}" + file.substr(dot);
}

cq_stimulus read_cq_stimulus(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw config_error(path + ": cannot read the stimulus file: " + std::strerror(errno));
    cq_stimulus s;
    s.path = path;
    std::string line;
    unsigned n = 0;
    while (std::getline(in, line)) {
        ++n;
        if (n == 1) {
            std::string first = line;
            while (!first.empty() && (first.back() == ' ' || first.back() == '\r')) first.pop_back();
            if (first != cq_stimulus_magic)
                throw config_error(path +
                                   ":1: not a CQ writer stimulus dump of this version (expected the line '" +
                                   cq_stimulus_magic + "')");
            continue;
        }
        if (!line.empty() && line[0] == '#') {
            parse_header(line, s);
            continue;
        }
        const std::vector<std::string> tok = split(line);
        if (tok.empty()) continue;
        try {
            s.records.push_back(parse_record(tok));
        } catch (const line_error& e) {
            throw config_error(path + ":" + std::to_string(n) + ": " + e.what);
        }
        s.records.back().line = n;
    }
    if (in.bad()) throw config_error(path + ": read error: " + std::strerror(errno));
    if (n == 0)
        throw config_error(path + ":1: empty (expected the line '" + std::string(cq_stimulus_magic) + "')");
    return s;
}

}  // namespace hcasim
