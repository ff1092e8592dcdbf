#include "model/core/timeline.h"

#include <cinttypes>

#include "model/core/param.h"

namespace hcasim {

namespace {
/// Microseconds with picosecond digits (trace-event "ts" is in microseconds).
void print_us(std::FILE* f, const sc_core::sc_time& t) {
    const uint64_t ps = t.value();
    std::fprintf(f, "%" PRIu64 ".%06" PRIu64, ps / 1000000, ps % 1000000);
}
}  // namespace

timeline::timeline(const std::string& path) : f_(std::fopen(path.c_str(), "w")) {
    if (!f_)
        throw config_error("--timeline: cannot write '" + path + "'");
    std::fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f_);
}

timeline::~timeline() {
    std::fputs("\n]}\n", f_);
    std::fclose(f_);
}

void timeline::event_prefix() {
    if (!first_)
        std::fputs(",\n", f_);
    first_ = false;
}

unsigned timeline::track(unsigned node, const std::string& name) {
    if (next_tid_.size() <= node) {
        next_tid_.resize(node + 1, 0);
    }
    if (next_tid_[node] == 0) {  // first track of the node: name its process
        event_prefix();
        std::fprintf(f_, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%u,\"tid\":0,\"args\":{\"name\":\"node%u\"}}", node,
                     node);
        event_prefix();
        std::fprintf(f_, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%u,\"tid\":0,\"args\":{\"sort_index\":%u}}",
                     node, node);
    }
    const unsigned tid = ++next_tid_[node];
    event_prefix();
    std::fprintf(f_, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%u,\"tid\":%u,\"args\":{\"name\":\"%s\"}}", node, tid,
                 name.c_str());
    event_prefix();
    std::fprintf(f_, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%u,\"tid\":%u,\"args\":{\"sort_index\":%u}}",
                 node, tid, tid);
    tracks_.emplace_back(node, tid);
    return unsigned(tracks_.size() - 1);
}

void timeline::span(unsigned track, const char* name, const sc_core::sc_time& begin, const sc_core::sc_time& end,
                    const std::string& args) {
    const auto& t = tracks_.at(track);
    event_prefix();
    std::fprintf(f_, "{\"ph\":\"X\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", name, t.first, t.second);
    print_us(f_, begin);
    std::fputs(",\"dur\":", f_);
    print_us(f_, end > begin ? end - begin : sc_core::SC_ZERO_TIME);
    if (!args.empty())
        std::fprintf(f_, ",\"args\":{%s}", args.c_str());
    std::fputc('}', f_);
}

void timeline::instant(unsigned track, const char* name, const sc_core::sc_time& at, const std::string& args) {
    const auto& t = tracks_.at(track);
    event_prefix();
    std::fprintf(f_, "{\"ph\":\"i\",\"s\":\"t\",\"name\":\"%s\",\"pid\":%u,\"tid\":%u,\"ts\":", name, t.first, t.second);
    print_us(f_, at);
    if (!args.empty())
        std::fprintf(f_, ",\"args\":{%s}", args.c_str());
    std::fputc('}', f_);
}

std::string timeline::opcode_name(uint8_t op) {
    static const char* const transport[] = {"RC", "UC", "RD", "UD", "CNP", "XRC", "?", "?"};
    static const char* const ops[] = {
        "SEND_FIRST", "SEND_MIDDLE", "SEND_LAST", "SEND_LAST_IMM", "SEND_ONLY", "SEND_ONLY_IMM", "WRITE_FIRST",
        "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM", "WRITE_ONLY", "WRITE_ONLY_IMM", "READ_REQUEST",
        "READ_RESPONSE_FIRST", "READ_RESPONSE_MIDDLE", "READ_RESPONSE_LAST", "READ_RESPONSE_ONLY", "ACK",
        "ATOMIC_ACK", "CMP_SWAP", "FETCH_ADD", "?", "SEND_LAST_INV", "SEND_ONLY_INV"};
    const unsigned o = op & 0x1F;
    return std::string(transport[op >> 5]) + " " + (o < sizeof ops / sizeof *ops ? ops[o] : "?");
}

}  // namespace hcasim
