// See progress.h.
#include "testbench/cli/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace hcasim {

progress_line::progress_line(std::FILE* out) : out_(out), start_(std::chrono::steady_clock::now()) {
    const char* env = std::getenv("HCASIM_PROGRESS");
    if (env && std::strcmp(env, "0") == 0)
        shown_ = false;
    else if (env && std::strcmp(env, "1") == 0)
        shown_ = true;
    else
        shown_ = isatty(fileno(out_)) != 0;
    last_ = start_ - std::chrono::seconds(1);
}

progress_line::~progress_line() { clear(); }

void progress_line::show(const std::string& text, bool now) {
    if (!shown_) return;
    const auto t = std::chrono::steady_clock::now();
    if (!now && t - last_ < std::chrono::milliseconds(200)) return;
    last_ = t;
    // Narrower than the terminal: a line that wrapped would not be redrawn in place.
    std::string line = text;
    winsize ws{};
    if (ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 && line.size() >= ws.ws_col)
        line.resize(ws.ws_col - 1u);
    // Carriage return, the text, then erase to the end of the line (ECMA-48 EL).
    std::fprintf(out_, "\r%s\x1b[K", line.c_str());
    std::fflush(out_);
    drawn_ = true;
}

void progress_line::clear() {
    if (!drawn_) return;
    std::fputs("\r\x1b[K", out_);
    std::fflush(out_);
    drawn_ = false;
}

double progress_line::elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

std::string progress_line::time_left(double fraction_done) const {
    const double el = elapsed_s();
    if (fraction_done <= 0 || fraction_done > 1 || el < 0.5) return "";
    const double left = el * (1 - fraction_done) / fraction_done;
    char b[48];
    if (left < 90)
        std::snprintf(b, sizeof b, "~%.0f s left", left);
    else
        std::snprintf(b, sizeof b, "~%.0f min left", left / 60);
    return b;
}

}  // namespace hcasim
