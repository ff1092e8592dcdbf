// One output file of the program (--stats-json, --record, --timeline, --pcap, --report, replay
// --update), written whole or not at all. The path is checked when the file is opened, before
// the simulation: not empty, not a directory, in a directory that exists and can be written, not
// a file that cannot be written.
// The data goes to a temporary file in the same directory; commit() syncs it and renames it over
// the path, so the old file stays until the new one is complete, and a failed or abandoned
// output leaves no trace. A path that is not a regular file (/dev/stdout, /dev/full, a pipe) is
// written directly. Every write is checked; the first error is kept and commit() throws it as
// config_error "<what>: cannot write '<path>': <reason>" (the CLI's exit status 2).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace hcasim {

class output_file {
public:
    /// Opens where `path` is written; `what` names the output in errors ("--stats-json").
    /// Throws config_error if the path is empty, a directory, a file that cannot be written, or
    /// in a directory that does not exist or cannot be written.
    output_file(std::string path, std::string what);
    /// Not committed: the temporary file is removed (the old file stays).
    ~output_file();
    output_file(const output_file&) = delete;
    output_file& operator=(const output_file&) = delete;

    /// Throws config_error as the constructor would for `path`, without writing anything (for
    /// an output written after the simulation: found wrong before it).
    static void check(const std::string& path, const std::string& what);

    /// Appends bytes (buffered; a write error is kept for commit()).
    void write(const void* p, size_t n);
    void write(std::string_view s) { write(s.data(), s.size()); }
    void printf(const char* fmt, ...) __attribute__((format(printf, 2, 3)));

    /// Writes what is buffered, syncs and closes the file; throws config_error on any error
    /// (the temporary is removed). Several files that belong together (--report) finish()
    /// first and commit() after.
    void finish();
    /// finish(), then the temporary file replaces the path. Throws config_error.
    void commit();

    const std::string& path() const { return path_; }
    /// A write failed (commit() will throw).
    bool failed() const { return error_ != 0; }

private:
    void drain();
    [[noreturn]] void fail(int err);

    std::string path_, what_;
    std::string target_;  // the file the path names (symbolic links followed)
    std::string tmp_;     // the temporary file; empty when written directly
    int fd_ = -1;
    bool flush_stdout_ = false;  // the target is our own standard output
    int error_ = 0;              // first errno of a failed write
    std::string buf_;
};

}  // namespace hcasim
