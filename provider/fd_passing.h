// One message over a Unix socket with file descriptors riding along (SCM_RIGHTS): how
// `hcasim serve` and its provider exchange requests, replies, memory files and event pipes.
#pragma once
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

namespace hcasim::serve_proto {

/// Most descriptors one message carries.
constexpr size_t MAX_FDS = 4;

/// sendmsg of n bytes with descriptor `fd` (-1: none); sendmsg's result.
inline ssize_t send_with_fd(int sock, const void* p, size_t n, int fd = -1) {
    iovec iov{const_cast<void*>(p), n};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
    if (fd >= 0) {
        h.msg_control = ctl;
        h.msg_controllen = sizeof ctl;
        cmsghdr* cm = CMSG_FIRSTHDR(&h);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    }
    return sendmsg(sock, &h, MSG_NOSIGNAL);
}

/// recvmsg of one message into buf (n bytes at most; `flags` as recvmsg's, MSG_CMSG_CLOEXEC is
/// added). The descriptors that came with it are appended to *fds (closed if fds is null);
/// *truncated says whether the message was longer than n, *fds_lost whether descriptors that came
/// with it were dropped (the receiver was out of descriptors). recvmsg's result (EINTR retried).
inline ssize_t recv_with_fds(int sock, void* buf, size_t n, std::vector<int>* fds, int flags = 0,
                             bool* truncated = nullptr, bool* fds_lost = nullptr) {
    iovec iov{buf, n};
    alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * MAX_FDS)];
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    h.msg_control = ctl;
    h.msg_controllen = sizeof ctl;
    ssize_t got;
    do got = recvmsg(sock, &h, flags | MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got < 0) return got;
    for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm; cm = CMSG_NXTHDR(&h, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        const size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int f;
            std::memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof f);
            if (fds)
                fds->push_back(f);
            else
                ::close(f);
        }
    }
    if (truncated) *truncated = h.msg_flags & MSG_TRUNC;
    if (fds_lost) *fds_lost = h.msg_flags & MSG_CTRUNC;
    return got;
}

}  // namespace hcasim::serve_proto
