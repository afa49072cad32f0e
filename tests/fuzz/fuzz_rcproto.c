/* Fuzz target: the supervisor's reading of a worker's event pipe
 * (ringcheck/proto.c): the bytes collected into lines by proto_read and
 * proto_next as sv_drain in ringcheck/supervisor.c does, each line parsed
 * by proto_parse, and whatever parses encoded again by proto_encode. */
#include "fuzz.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringcheck/proto.h"

#define BOUNDED(a) FUZZ_ASSERT(memchr((a), '\0', sizeof(a)) != NULL)

/* Every string field of m ends inside its array. */
static void
check_fields(const struct proto_msg *m)
{
    switch (m->kind) {
    case 'G':
        BOUNDED(m->u.gpu.busid);
        BOUNDED(m->u.gpu.uuid);
        BOUNDED(m->u.gpu.name);
        break;
    case 'U':
        BOUNDED(m->u.uid.hex);
        FUZZ_ASSERT(strspn(m->u.uid.hex, "0123456789abcdef") ==
                    strlen(m->u.uid.hex));
        break;
    case 'R':
        BOUNDED(m->u.result.op);
        BOUNDED(m->u.result.type);
        break;
    case 'S':
        BOUNDED(m->u.stuck.what);
        break;
    case 'E':
        BOUNDED(m->u.error.ranks);
        BOUNDED(m->u.error.msg);
        break;
    case 'I':
        BOUNDED(m->u.info.msg);
        break;
    default:
        break;
    }
}

/* Encodes as proto_send does (free text cut when the line is too long). */
static int
encode(const struct proto_msg *m, char *buf, size_t len)
{
    struct proto_msg cut = *m;
    int n = proto_encode(m, buf, len);

    if (n >= 0)
        return n;
    if (m->kind == 'E')
        cut.u.error.msg[PROTO_LINE_MAX / 2] = '\0';
    else if (m->kind == 'I')
        cut.u.info.msg[PROTO_LINE_MAX / 2] = '\0';
    return proto_encode(&cut, buf, len);
}

/* What the supervisor does with one line: parse it; what parses, the
 * worker's encoder writes back as a line that parses to the same kind,
 * and encoding that again changes nothing. */
static void
one_line(const char *line)
{
    struct proto_msg m, again;
    char enc[PROTO_LINE_MAX], enc2[PROTO_LINE_MAX];
    int n, n2;

    if (proto_parse(line, &m) != 0)
        return;
    FUZZ_ASSERT(m.kind == line[0]);
    check_fields(&m);
    n = encode(&m, enc, sizeof(enc));
    if (n < 0)
        return;
    FUZZ_ASSERT(n > 0 && enc[n - 1] == '\n' && enc[n] == '\0');
    FUZZ_ASSERT(memchr(enc, '\n', (size_t)n - 1) == NULL);
    enc[n - 1] = '\0';
    if (proto_parse(enc, &again) != 0) {
        fprintf(stderr, "encoded line does not parse: \"%s\" from \"%s\"\n",
                enc, line);
        abort();
    }
    FUZZ_ASSERT(again.kind == m.kind);
    n2 = encode(&again, enc2, sizeof(enc2));
    FUZZ_ASSERT(n2 == n);
    enc2[n2 - 1] = '\0';
    if (strcmp(enc, enc2) != 0) {
        fprintf(stderr, "encoding is not stable: \"%s\" then \"%s\"\n", enc,
                enc2);
        abort();
    }
}

/* The next line the supervisor must see: input line i cut to
 * PROTO_LINE_MAX - 1 bytes (and, as a C string, at its first NUL). */
static int
expected_line(const uint8_t *data, size_t size, size_t *pos, char *out)
{
    size_t start = *pos, end = start, take;

    if (start >= size)
        return 0;
    while (end < size && data[end] != '\n')
        end++;
    take = end - start < PROTO_LINE_MAX - 1 ? end - start : PROTO_LINE_MAX - 1;
    memcpy(out, data + start, take);
    out[take] = '\0';
    *pos = end < size ? end + 1 : end;
    return 1;
}

/* Feeds the input through a pipe in pieces of chunk bytes (0: all of it
 * before the first read, a burst the supervisor was too busy to drain),
 * draining after each read as sv_drain does. */
static void
run(const uint8_t *data, size_t size, size_t chunk)
{
    static struct proto_buf b;
    char line[PROTO_LINE_MAX], want[PROTO_LINE_MAX];
    size_t written = 0, pos = 0;
    int p[2], r = 1;

    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return;
    memset(&b, 0, sizeof(b));
    while (r > 0) {
        size_t n =
            chunk == 0 || size - written < chunk ? size - written : chunk;

        if (n > 0) {
            FUZZ_ASSERT(write(p[1], data + written, n) == (ssize_t)n);
            written += n;
        }
        if (written == size && p[1] >= 0) {
            close(p[1]);
            p[1] = -1;
        }
        r = proto_read(p[0], &b);
        FUZZ_ASSERT(r >= 0 && b.len <= sizeof(b.data));
        while (proto_next(&b, r <= 0, line, sizeof(line))) {
            FUZZ_ASSERT(strlen(line) < PROTO_LINE_MAX);
            /* Lines arrive whole and in order, long ones cut: never a
             * piece of one line as a message of its own. */
            if (!expected_line(data, size, &pos, want) ||
                strcmp(line, want) != 0) {
                fprintf(stderr,
                        "line \"%.80s\" is not input line \"%.80s\" "
                        "(pieces of %zu bytes)\n",
                        line, want, chunk);
                abort();
            }
            one_line(line);
        }
    }
    close(p[0]);
    FUZZ_ASSERT(b.len == 0);
    /* Every input line came out (an empty last piece is no line). */
    FUZZ_ASSERT(pos == size);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Within one pipe's capacity, so that every write completes. */
    if (size > 60000)
        return 0;
    run(data, size, 700);
    run(data, size, 0);
    return 0;
}
