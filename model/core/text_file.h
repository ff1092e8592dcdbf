// Line by line reading of the text files a user hands the simulator (INI configurations, verbs
// traces). What is not a readable text file is refused with its path (and line) before anything
// is built from it: a directory, a file that fails to read (/proc/self/mem), a NUL byte (a
// binary file, /dev/zero), a line longer than the caller's limit (a stream without newlines).
#pragma once
#include <cstddef>
#include <string>

namespace hcasim {

class text_file {
public:
    /// Opens `path` for reading; `what` names it in errors ("configuration file", "trace").
    /// Throws config_error: "cannot open <what> 'PATH': <reason>".
    text_file(const std::string& path, const char* what, std::size_t max_line_bytes);
    ~text_file();
    text_file(const text_file&) = delete;
    text_file& operator=(const text_file&) = delete;

    /// The next line, without its '\n'; false at the end of the file. Throws config_error
    /// "PATH:N: why" for a NUL byte, a line longer than the limit, or a read error.
    bool next(std::string& line);
    /// Number of the line `next` returned last (1-based).
    std::size_t line_number() const { return line_no_; }

private:
    [[noreturn]] void fail(const std::string& why) const;
    std::string path_;
    std::size_t max_line_;
    int fd_ = -1;
    std::size_t line_no_ = 0;
    std::string buf_;      ///< bytes read and not yet returned
    std::size_t pos_ = 0;  ///< start of the next line in buf_
    bool eof_ = false;
};

}  // namespace hcasim
