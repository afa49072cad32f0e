/* Fuzz target: the leader's and the followers' reading of rendezvous
 * frames (ringcheck/rendezvous.c), which anyone who reaches the port can
 * send: the bytes arrive on a socket, rdv_reader_feed collects them frame
 * by frame as the leader's gathering loop does (ringcheck/multinode.c),
 * and every frame it accepts must be exactly what rdv_encode writes for
 * the message it decoded (the format has one encoding). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ringcheck/rendezvous.h"

/* A decoded string: NUL-terminated inside its field, printable ASCII. */
static void
check_str(const char *s, size_t field)
{
    const char *end = memchr(s, '\0', field);

    FUZZ_ASSERT(end != NULL);
    for (; s < end; s++)
        FUZZ_ASSERT(*s >= 0x20 && *s <= 0x7e);
}

static void
check_msg(const struct rdv_msg *m)
{
    switch (m->type) {
    case RDV_HELLO:
        check_str(m->u.hello.job, RDV_JOB_MAX);
        check_str(m->u.hello.host, RDV_HOST_MAX);
        check_str(m->u.hello.iface, RDV_IFACE_MAX);
        check_str(m->u.hello.addr, RDV_ADDR_MAX);
        check_str(m->u.hello.transport, RDV_WORD_MAX);
        check_str(m->u.hello.cure, RDV_SETTING_MAX);
        break;
    case RDV_REJECT:
        check_str(m->u.reject.reason, RDV_TEXT_MAX);
        break;
    case RDV_RUN:
        check_str(m->u.run.setting, RDV_SETTING_MAX);
        break;
    case RDV_RESULT:
        check_str(m->u.result.what, RDV_TEXT_MAX);
        break;
    case RDV_VERDICT:
        check_str(m->u.verdict.result, RDV_WORD_MAX);
        check_str(m->u.verdict.cure, RDV_SETTING_MAX);
        check_str(m->u.verdict.transport, RDV_WORD_MAX);
        check_str(m->u.verdict.what, RDV_TEXT_MAX);
        break;
    case RDV_CHALLENGE:
        break;
    default:
        FUZZ_ASSERT(!"a decoded message of an unknown type");
    }
    FUZZ_ASSERT(strcmp(rdv_type_name(m->type), "unknown") != 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct rdv_reader rd;
    unsigned char frame[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
    struct rdv_msg m;
    char err[256];
    size_t off = 0;
    int sv[2], r;

    if (size > 64 * 1024 ||
        socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
                   sv) != 0)
        return 0;
    if (size > 0 && write(sv[1], data, size) != (ssize_t)size) {
        close(sv[0]);
        close(sv[1]);
        return 0;
    }
    close(sv[1]);
    memset(&rd, 0, sizeof(rd));
    for (;;) {
        err[0] = '\0';
        r = rdv_reader_feed(&rd, sv[0], &m, err, sizeof(err));
        /* All bytes are there and the peer has closed: never "again". */
        FUZZ_ASSERT(r == RDV_OK || r == RDV_EPEER);
        FUZZ_ASSERT(memchr(err, '\0', sizeof(err)) != NULL);
        if (r != RDV_OK) {
            /* Garbage or the end: always said why. */
            FUZZ_ASSERT(err[0] != '\0');
            break;
        }
        check_msg(&m);
        {
            size_t plen = (size_t)data[off + 8] << 24 |
                          (size_t)data[off + 9] << 16 |
                          (size_t)data[off + 10] << 8 | data[off + 11];
            size_t n = rdv_encode(&m, frame, sizeof(frame));

            FUZZ_ASSERT(off + RDV_HEADER_LEN + plen <= size);
            if (n != RDV_HEADER_LEN + plen ||
                memcmp(frame, data + off, n) != 0) {
                fprintf(stderr,
                        "frame at %zu (%zu bytes) decodes to a %s message "
                        "that encodes to %zu other bytes\n",
                        off, RDV_HEADER_LEN + plen, rdv_type_name(m.type), n);
                abort();
            }
            off += n;
        }
        /* The reader starts afresh for the next frame. */
        FUZZ_ASSERT(rd.got == 0 && rd.need == 0);
    }
    close(sv[0]);
    return 0;
}
