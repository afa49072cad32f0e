/* Writes and reads the supervisor/worker line protocol. */
#include "proto.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int
proto_send(int fd, const char *fmt, ...)
{
    char line[PROTO_LINE_MAX];
    va_list ap;
    int n;
    size_t len, off = 0;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return -1;
    len = (size_t)n < sizeof(line) - 2 ? (size_t)n : sizeof(line) - 2;
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';
    while (off < len) {
        ssize_t w = write(fd, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

int
proto_read(int fd, struct proto_buf *b)
{
    for (;;) {
        ssize_t r;

        if (b->len == sizeof(b->data)) {
            /* A line longer than the buffer: keep its start, drop the
             * rest by ending it here. */
            b->data[sizeof(b->data) - 1] = '\n';
            return 1;
        }
        r = read(fd, b->data + b->len, sizeof(b->data) - b->len);
        if (r > 0) {
            b->len += (size_t)r;
            continue;
        }
        if (r == 0)
            return 0;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 1;
        return -1;
    }
}

int
proto_next(struct proto_buf *b, int eof, char *line, size_t linelen)
{
    char *nl = memchr(b->data, '\n', b->len);
    size_t n, take;

    if (nl == NULL && (!eof || b->len == 0))
        return 0;
    n = nl != NULL ? (size_t)(nl - b->data) : b->len;
    take = n < linelen - 1 ? n : linelen - 1;
    memcpy(line, b->data, take);
    line[take] = '\0';
    if (nl != NULL)
        n++;
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    return 1;
}
