/* Writes and reads the supervisor/worker line protocol. */
#include "ringcheck/proto.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Copies src into dst (len bytes), a word: blanks and newlines become '_'
 * so that the field stays one token; empty becomes "-". */
static void
word_copy(char *dst, size_t len, const char *src)
{
    size_t i = 0;

    for (; src[i] != '\0' && i + 1 < len; i++)
        dst[i] = (src[i] == ' ' || src[i] == '\t' || src[i] == '\n' ||
                  src[i] == '\r')
                     ? '_'
                     : src[i];
    dst[i] = '\0';
    if (i == 0 && len > 1)
        snprintf(dst, len, "-");
}

int
proto_encode(const struct proto_msg *m, char *buf, size_t len)
{
    char a[96], b[64];
    int n;

    if (len < 2)
        return -1;
    switch (m->kind) {
    case 'P':
        n = snprintf(buf, len, "P %c %d", m->u.phase.begin ? 'b' : 'e',
                     m->u.phase.phase);
        break;
    case 'V':
        n = snprintf(buf, len, "V %d %d %d", m->u.versions.nccl,
                     m->u.versions.runtime, m->u.versions.driver);
        break;
    case 'N':
        n = snprintf(buf, len, "N %d", m->u.ndev.count);
        break;
    case 'G':
        word_copy(a, sizeof(a), m->u.gpu.busid);
        word_copy(b, sizeof(b), m->u.gpu.uuid);
        n = snprintf(buf, len, "G %d %lu %s %s %s", m->u.gpu.dev,
                     m->u.gpu.total_mib, a, b, m->u.gpu.name);
        break;
    case 'F':
        n = snprintf(buf, len, "F %d %lu", m->u.free.dev, m->u.free.free_mib);
        break;
    case 'C':
        n = snprintf(buf, len, "C %d %d %d", m->u.cc.dev, m->u.cc.major,
                     m->u.cc.minor);
        break;
    case 'T':
        n = snprintf(buf, len, "T %d %d %d %d %d", m->u.topo.dev,
                     m->u.topo.peer, m->u.topo.access, m->u.topo.perf,
                     m->u.topo.atomics);
        break;
    case 'U':
        n = snprintf(buf, len, "U %s", m->u.uid.hex);
        break;
    case 'R':
        word_copy(a, sizeof(a), m->u.result.op);
        word_copy(b, sizeof(b), m->u.result.type);
        n = snprintf(buf, len, "R %d %s %s %zu %zu %d %.1f %ld %lld",
                     m->u.result.rank, a, b, m->u.result.bytes,
                     m->u.result.count, m->u.result.root, m->u.result.time_us,
                     m->u.result.wrong, m->u.result.first);
        break;
    case 'B':
        n = snprintf(buf, len, "B %d %zu %d %.1f %ld %lld", m->u.bw.rank,
                     m->u.bw.bytes, m->u.bw.iters, m->u.bw.time_us,
                     m->u.bw.wrong, m->u.bw.first);
        break;
    case 'S':
        n = snprintf(buf, len, "S %d %d %s", m->u.stuck.rank, m->u.stuck.dev,
                     m->u.stuck.what);
        break;
    case 'A':
    case 'X':
        n = snprintf(buf, len, "%c", m->kind);
        break;
    case 'E':
        word_copy(a, sizeof(a), m->u.error.ranks);
        n = snprintf(buf, len, "E %d %d %s %s", m->u.error.code,
                     m->u.error.phase, a, m->u.error.msg);
        break;
    case 'I':
        n = snprintf(buf, len, "I %s", m->u.info.msg);
        break;
    default:
        return -1;
    }
    if (n < 0 || (size_t)n + 1 >= len)
        return -1;
    for (int i = 0; i < n; i++)
        if (buf[i] == '\n' || buf[i] == '\r')
            buf[i] = ' ';
    buf[n++] = '\n';
    buf[n] = '\0';
    return n;
}

/* The rest of the line after offset off, into dst (cut to fit). */
static void
rest_copy(char *dst, size_t len, const char *line, int off)
{
    snprintf(dst, len, "%s", off > 0 ? line + off : "");
}

int
proto_parse(const char *line, struct proto_msg *m)
{
    int off = 0;
    char c;

    memset(m, 0, sizeof(*m));
    m->kind = line[0];
    switch (line[0]) {
    case 'P':
        if (sscanf(line, "P %c %d%n", &c, &m->u.phase.phase, &off) != 2 ||
            (c != 'b' && c != 'e') || line[off] != '\0')
            return -1;
        m->u.phase.begin = c == 'b';
        return 0;
    case 'V':
        return sscanf(line, "V %d %d %d%n", &m->u.versions.nccl,
                      &m->u.versions.runtime, &m->u.versions.driver,
                      &off) == 3 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'N':
        return sscanf(line, "N %d%n", &m->u.ndev.count, &off) == 1 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'G':
        if (sscanf(line, "G %d %lu %31s %39s %n", &m->u.gpu.dev,
                   &m->u.gpu.total_mib, m->u.gpu.busid, m->u.gpu.uuid,
                   &off) != 4 ||
            off == 0)
            return -1;
        rest_copy(m->u.gpu.name, sizeof(m->u.gpu.name), line, off);
        return 0;
    case 'F':
        return sscanf(line, "F %d %lu%n", &m->u.free.dev, &m->u.free.free_mib,
                      &off) == 2 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'C':
        return sscanf(line, "C %d %d %d%n", &m->u.cc.dev, &m->u.cc.major,
                      &m->u.cc.minor, &off) == 3 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'T':
        return sscanf(line, "T %d %d %d %d %d%n", &m->u.topo.dev,
                      &m->u.topo.peer, &m->u.topo.access, &m->u.topo.perf,
                      &m->u.topo.atomics, &off) == 5 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'U':
        if (sscanf(line, "U %256[0-9a-f]%n", m->u.uid.hex, &off) != 1 ||
            line[off] != '\0')
            return -1;
        return 0;
    case 'R':
        return sscanf(line, "R %d %15s %7s %zu %zu %d %lf %ld %lld%n",
                      &m->u.result.rank, m->u.result.op, m->u.result.type,
                      &m->u.result.bytes, &m->u.result.count, &m->u.result.root,
                      &m->u.result.time_us, &m->u.result.wrong,
                      &m->u.result.first, &off) == 9 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'B':
        return sscanf(line, "B %d %zu %d %lf %ld %lld%n", &m->u.bw.rank,
                      &m->u.bw.bytes, &m->u.bw.iters, &m->u.bw.time_us,
                      &m->u.bw.wrong, &m->u.bw.first, &off) == 6 &&
                       line[off] == '\0'
                   ? 0
                   : -1;
    case 'S':
        if (sscanf(line, "S %d %d%n", &m->u.stuck.rank, &m->u.stuck.dev,
                   &off) != 2)
            return -1;
        if (line[off] == ' ')
            off++;
        rest_copy(m->u.stuck.what, sizeof(m->u.stuck.what), line, off);
        return 0;
    case 'A':
    case 'X':
        return line[1] == '\0' ? 0 : -1;
    case 'E':
        if (sscanf(line, "E %d %d %95s %n", &m->u.error.code, &m->u.error.phase,
                   m->u.error.ranks, &off) != 3 ||
            off == 0)
            return -1;
        if (strcmp(m->u.error.ranks, "-") == 0)
            m->u.error.ranks[0] = '\0';
        rest_copy(m->u.error.msg, sizeof(m->u.error.msg), line, off);
        return 0;
    case 'I':
        if (line[1] != ' ')
            return -1;
        rest_copy(m->u.info.msg, sizeof(m->u.info.msg), line, 2);
        return 0;
    default:
        return -1;
    }
}

int
proto_send(int fd, const struct proto_msg *m)
{
    char line[PROTO_LINE_MAX];
    int n = proto_encode(m, line, sizeof(line));
    size_t off = 0;

    if (n < 0) {
        /* Too long: cut the free text, never the structure. */
        struct proto_msg cut = *m;

        if (m->kind == 'E')
            cut.u.error.msg[PROTO_LINE_MAX / 2] = '\0';
        else if (m->kind == 'I')
            cut.u.info.msg[PROTO_LINE_MAX / 2] = '\0';
        n = proto_encode(&cut, line, sizeof(line));
        if (n < 0)
            return -1;
    }
    while (off < (size_t)n) {
        ssize_t w = write(fd, line + off, (size_t)n - off);
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
            /* Full of whole lines (a burst): the caller takes them first.
             * Overwriting the last byte here would cut a line in two. */
            if (memchr(b->data, '\n', b->len) != NULL)
                return 1;
            /* One line longer than the buffer: keep its start, end it
             * here, and drop the rest of it as it arrives. */
            b->data[sizeof(b->data) - 1] = '\n';
            b->skip = 1;
            return 1;
        }
        r = read(fd, b->data + b->len, sizeof(b->data) - b->len);
        if (r > 0 && b->skip) {
            /* Still inside the cut line: drop it up to its newline. */
            char *start = b->data + b->len;
            char *nl = memchr(start, '\n', (size_t)r);
            size_t rest;

            if (nl == NULL)
                continue;
            rest = (size_t)(start + r - (nl + 1));
            memmove(start, nl + 1, rest);
            b->skip = 0;
            b->len += rest;
            continue;
        }
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
