// Reading user-supplied text files; see text_file.h.
#include "model/core/text_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/core/param.h"

namespace hcasim {

text_file::text_file(const std::string& path, const char* what, std::size_t max_line_bytes)
    : path_(path), max_line_(max_line_bytes) {
    const std::string head = std::string("cannot open ") + what + " '" + path + "': ";
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) throw config_error(head + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || S_ISDIR(st.st_mode)) {
        const int err = S_ISDIR(st.st_mode) ? EISDIR : errno;
        ::close(fd_);
        throw config_error(head + std::strerror(err));
    }
}

text_file::~text_file() {
    if (fd_ >= 0) ::close(fd_);
}

void text_file::fail(const std::string& why) const {
    throw config_error(path_ + ":" + std::to_string(line_no_) + ": " + why);
}

bool text_file::next(std::string& line) {
    ++line_no_;
    std::size_t scanned = pos_;  // bytes of the current line already checked
    for (;;) {
        const std::size_t nl = buf_.find('\n', scanned);
        const std::size_t end = nl == std::string::npos ? buf_.size() : nl;
        if (std::memchr(buf_.data() + scanned, '\0', end - scanned)) fail("NUL byte: not a text file");
        if (end - pos_ > max_line_) fail("line longer than " + std::to_string(max_line_) + " bytes");
        if (nl != std::string::npos || (eof_ && end > pos_)) {
            line.assign(buf_, pos_, end - pos_);
            pos_ = nl == std::string::npos ? end : nl + 1;
            return true;
        }
        if (eof_) {
            --line_no_;
            return false;
        }
        scanned = end;
        buf_.erase(0, pos_);  // keep only the line being assembled
        scanned -= pos_;
        pos_ = 0;
        char chunk[65536];
        ssize_t n;
        do n = ::read(fd_, chunk, sizeof chunk);
        while (n < 0 && errno == EINTR);
        if (n < 0) fail(std::string("read error: ") + std::strerror(errno));
        if (n == 0)
            eof_ = true;
        else
            buf_.append(chunk, std::size_t(n));
    }
}

}  // namespace hcasim
