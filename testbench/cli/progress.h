// A one-line progress display on a terminal: what a run or a sweep has done so far and an
// estimate of the time left, redrawn in place on stderr. Nothing at all when stderr is not a
// terminal (a pipe, a file, CI), so outputs stay byte-identical.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace hcasim {

class progress_line {
public:
    /// Shown when `out` is a terminal; the environment variable HCASIM_PROGRESS=0 turns it off
    /// and HCASIM_PROGRESS=1 turns it on for any stream (tests).
    explicit progress_line(std::FILE* out = stderr);
    ~progress_line();
    progress_line(const progress_line&) = delete;
    progress_line& operator=(const progress_line&) = delete;

    bool shown() const { return shown_; }
    /// Redraws the line with `text` (cut to the terminal's width), at most every 200 ms of wall
    /// time unless `now`.
    void show(const std::string& text, bool now = false);
    /// Erases the line (call before printing anything else to the terminal).
    void clear();
    /// Seconds of wall time since construction.
    double elapsed_s() const;
    /// "~12 s left" (or "~3 min left") from the fraction done so far and the time it took; ""
    /// until there is something to extrapolate from.
    std::string time_left(double fraction_done) const;

private:
    std::FILE* out_;
    bool shown_ = false;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace hcasim
