#include "model/core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "model/core/param.h"

namespace hcasim {

namespace {

namespace fs = std::filesystem;

constexpr size_t BUFFER_BYTES = 1 << 20;

/// Where a path leads: a regular file (new or old) that a temporary replaces, or something
/// written directly (a device, a pipe, a descriptor of this process through /proc).
struct target {
    std::string file;
    bool direct = false;
    bool fifo = false;
    int own_fd = -1;  ///< /dev/stdout, /proc/self/fd/N: our descriptor N
    mode_t mode = 0;  ///< an existing regular file's permissions (kept)
    bool exists = false;
    int error = 0;  ///< errno: the path cannot be written
};

target resolve(const std::string& path) {
    target t;
    if (path.empty()) {
        t.error = ENOENT;
        return t;
    }
    fs::path p = path;
    for (int hops = 0; hops < 40; ++hops) {
        if (!p.has_filename()) {  // "dir/"
            t.error = EISDIR;
            return t;
        }
        std::error_code ec;
        const fs::path dir = fs::canonical(p.has_parent_path() ? p.parent_path() : fs::path("."), ec);
        if (ec) {
            t.error = ec.value();
            return t;
        }
        if (!fs::is_directory(dir, ec)) {
            t.error = ENOTDIR;
            return t;
        }
        t.file = (dir / p.filename()).string();
        struct stat st {};
        if (lstat(t.file.c_str(), &st) != 0) {
            if (errno != ENOENT) t.error = errno;
            return t;  // a new regular file
        }
        // A descriptor through /proc (/dev/stdout, /dev/fd/N) is written directly, never
        // replaced: its link names the file another process (the shell) has open.
        const std::string d = dir.string();
        if (d == "/proc" || d.rfind("/proc/", 0) == 0) {
            t.direct = true;
            if (d == "/proc/" + std::to_string(getpid()) + "/fd" &&
                p.filename().string().find_first_not_of("0123456789") == std::string::npos)
                t.own_fd = std::atoi(p.filename().c_str());
            if (stat(t.file.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) t.error = EISDIR;
            return t;
        }
        if (S_ISLNK(st.st_mode)) {
            const fs::path link = fs::read_symlink(t.file, ec);
            if (ec) {
                t.error = ec.value();
                return t;
            }
            p = link.is_absolute() ? link : dir / link;
            continue;
        }
        if (S_ISDIR(st.st_mode))
            t.error = EISDIR;
        else if (access(t.file.c_str(), W_OK) != 0)  // a read-only file is not replaced either
            t.error = errno;
        t.exists = true;
        t.mode = st.st_mode & 07777;
        t.direct = !S_ISREG(st.st_mode);
        t.fifo = S_ISFIFO(st.st_mode);
        return t;
    }
    t.error = ELOOP;
    return t;
}

/// A temporary file next to `file` (".name.XXXXXX"); returns its descriptor or -1 (errno).
int make_temporary(const std::string& file, std::string& tmp) {
    const fs::path f = file;
    tmp = (f.parent_path() / ("." + f.filename().string() + ".XXXXXX")).string();
    const int fd = mkostemp(tmp.data(), O_CLOEXEC);
    if (fd < 0) tmp.clear();
    return fd;
}

std::string message(const std::string& what, const std::string& path, int err) {
    if (path.empty()) return what + ": expected a file name";
    return what + ": cannot write '" + path + "': " + std::strerror(err);
}

}  // namespace

output_file::output_file(std::string path, std::string what)
    : path_(std::move(path)), what_(std::move(what)) {
    const target t = resolve(path_);
    if (t.error) fail(t.error);
    target_ = t.file;
    if (t.own_fd >= 0) {
        fd_ = fcntl(t.own_fd, F_DUPFD_CLOEXEC, 0);
        flush_stdout_ = true;
    } else if (t.direct) {
        fd_ = open(t.file.c_str(), O_WRONLY | O_CLOEXEC);
    } else {
        fd_ = make_temporary(t.file, tmp_);
        // The new file gets the old one's permissions, or those of a file created now.
        mode_t mode = t.mode;
        if (!t.exists) {
            const mode_t mask = umask(0);
            umask(mask);
            mode = 0666 & ~mask;
        }
        if (fd_ >= 0 && fchmod(fd_, mode) != 0) fail(errno);
    }
    if (fd_ < 0) fail(errno);
}

output_file::~output_file() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty()) unlink(tmp_.c_str());
}

void output_file::check(const std::string& path, const std::string& what) {
    const target t = resolve(path);
    if (t.error) throw config_error(message(what, path, t.error));
    if (t.fifo)  // opening it would wait for, then disappoint, its reader
        return;
    output_file probe(path, what);  // removed again: nothing is written
}

void output_file::fail(int err) {
    error_ = err;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!tmp_.empty()) unlink(tmp_.c_str());
    tmp_.clear();
    throw config_error(message(what_, path_, err));
}

void output_file::write(const void* p, size_t n) {
    if (error_) return;
    buf_.append(static_cast<const char*>(p), n);
    if (buf_.size() >= BUFFER_BYTES) drain();
}

void output_file::printf(const char* fmt, ...) {
    char small[512];
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    const int n = std::vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        error_ = error_ ? error_ : EINVAL;
    } else if (size_t(n) < sizeof small) {
        write(small, size_t(n));
    } else {
        std::string big(size_t(n) + 1, '\0');
        std::vsnprintf(big.data(), big.size(), fmt, again);
        write(big.data(), size_t(n));
    }
    va_end(again);
}

void output_file::drain() {
    if (flush_stdout_) {  // what the program printed to the same descriptor comes first
        std::cout.flush();
        std::fflush(nullptr);
    }
    size_t done = 0;
    while (!error_ && done < buf_.size()) {
        const ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
        if (w < 0 && errno != EINTR)
            error_ = errno;
        else if (w > 0)
            done += size_t(w);
    }
    buf_.clear();
}

void output_file::finish() {
    if (fd_ < 0) {
        if (error_)  // failed before: fails again
            fail(error_);
        return;
    }
    drain();
    if (!error_ && !tmp_.empty() && fsync(fd_) != 0) error_ = errno;
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && !error_) error_ = errno;
    if (error_) fail(error_);
}

void output_file::commit() {
    finish();
    if (!tmp_.empty() && rename(tmp_.c_str(), target_.c_str()) != 0) fail(errno);
    tmp_.clear();
}

}  // namespace hcasim
