/* The held header record of server/heldsend.h. */
#include "server/heldsend.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

ssize_t
heldsend_push(struct heldsend *h, const void *data, size_t len, int *err)
{
    ssize_t n;

    if (h->hold_next) {
        h->hold_next = false;
        if (h->n_held == 0 && len <= sizeof(h->held)) {
            memcpy(h->held, data, len);
            h->n_held = len;
            h->off = 0;
            return (ssize_t)len;
        }
    }
    if (h->n_held > h->off) {
        const size_t rest = h->n_held - h->off;
        struct iovec iov[2] = {{h->held + h->off, rest},
                               {(void *)(uintptr_t)data, len}};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = len > 0 ? 2 : 1};

        n = sendmsg(h->fd, &m, MSG_NOSIGNAL);
        if (n < 0) {
            *err = errno;
            return -1;
        }
        if ((size_t)n < rest) {
            h->off += (size_t)n; /* the rest of them first, next time */
            *err = EAGAIN;
            return -1;
        }
        h->n_held = h->off = 0;
        if ((size_t)n == rest) {
            /* Nothing of data went: GnuTLS pushes it again. */
            *err = EAGAIN;
            return -1;
        }
        return n - (ssize_t)rest;
    }
    n = send(h->fd, data, len, MSG_NOSIGNAL);
    if (n < 0)
        *err = errno;
    return n;
}

static int64_t
now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int
heldsend_flush(struct heldsend *h, int timeout_ms)
{
    const int64_t end = now_ms() + timeout_ms;
    int rc = 0;

    h->hold_next = false;
    while (h->n_held > h->off) {
        ssize_t n =
            send(h->fd, h->held + h->off, h->n_held - h->off, MSG_NOSIGNAL);
        int64_t left;

        if (n > 0) {
            h->off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        left = end - now_ms();
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && left > 0) {
            struct pollfd p = {.fd = h->fd, .events = POLLOUT};

            if (poll(&p, 1, (int)left) >= 0)
                continue;
        }
        rc = -1;
        break;
    }
    h->n_held = h->off = 0;
    return rc;
}
