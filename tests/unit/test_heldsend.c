/* Unit tests for server/heldsend.c: an answer's header record held back
 * and sent with the body's first record, over a socket pair whose buffer
 * the tests fill, so that sends stop part way through the held bytes. */
#include "server/heldsend.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

/*
 * send(2) and sendmsg(2) are wrapped at link time (server/http.mk): with
 * fake_on, a send takes at most fake_budget bytes (0: EAGAIN) into
 * fake_wire, so that a test can stop a send at every byte.
 */
static bool fake_on;
static size_t fake_budget;
static char fake_wire[8192];
static size_t fake_len;

ssize_t __real_send(int fd, const void *p, size_t n, int flags);
ssize_t __real_sendmsg(int fd, const struct msghdr *m, int flags);
ssize_t __wrap_send(int fd, const void *p, size_t n, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *m, int flags);

static ssize_t
fake_take(const void *p, size_t n, size_t *budget)
{
    size_t k = n < *budget ? n : *budget;

    if (fake_len + k > sizeof(fake_wire))
        k = sizeof(fake_wire) - fake_len;
    memcpy(fake_wire + fake_len, p, k);
    fake_len += k;
    *budget -= k;
    return (ssize_t)k;
}

ssize_t
__wrap_send(int fd, const void *p, size_t n, int flags)
{
    if (!fake_on)
        return __real_send(fd, p, n, flags);
    if (fake_budget == 0) {
        errno = EAGAIN;
        return -1;
    }
    return fake_take(p, n, &fake_budget);
}

ssize_t
__wrap_sendmsg(int fd, const struct msghdr *m, int flags)
{
    ssize_t total = 0;

    if (!fake_on)
        return __real_sendmsg(fd, m, flags);
    if (fake_budget == 0) {
        errno = EAGAIN;
        return -1;
    }
    for (size_t i = 0; i < m->msg_iovlen; i++)
        total += fake_take(m->msg_iov[i].iov_base, m->msg_iov[i].iov_len,
                           &fake_budget);
    return total;
}

/* A non-blocking socket pair with a small send buffer: sv[0] sends. */
static void
pair(int sv[2])
{
    int small = 4096;

    CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    CHECK_INT(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)),
              0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
}

/* Reads up to max bytes the peer has now into out (at *n). */
static void
drain(int fd, char *out, size_t *n, size_t cap, size_t max)
{
    while (max > 0 && *n < cap) {
        size_t want = cap - *n < max ? cap - *n : max;
        ssize_t k = recv(fd, out + *n, want, 0);

        if (k <= 0)
            return;
        *n += (size_t)k;
        max -= (size_t)k;
    }
}

static void
fill(char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)('a' + (seed + i * 7) % 26);
}

static void
test_hold_then_body(void)
{
    int sv[2], err = 0;
    struct heldsend h = {0};
    char hdr[200], body[3000], got[4000];
    size_t n = 0;

    pair(sv);
    h.fd = sv[0];
    fill(hdr, sizeof(hdr), 1);
    fill(body, sizeof(body), 2);
    h.hold_next = true;
    CHECK_INT((int)heldsend_push(&h, hdr, sizeof(hdr), &err), (int)sizeof(hdr));
    CHECK(!h.hold_next);
    /* Held: nothing on the wire yet. */
    CHECK_INT((int)recv(sv[1], got, sizeof(got), 0), -1);
    CHECK_INT((int)heldsend_push(&h, body, sizeof(body), &err),
              (int)sizeof(body));
    CHECK_INT((int)h.n_held, 0);
    drain(sv[1], got, &n, sizeof(got), sizeof(got));
    CHECK_INT((int)n, (int)(sizeof(hdr) + sizeof(body)));
    CHECK(memcmp(got, hdr, sizeof(hdr)) == 0);
    CHECK(memcmp(got + sizeof(hdr), body, sizeof(body)) == 0);
    close(sv[0]);
    close(sv[1]);
}

static void
test_not_held(void)
{
    int sv[2], err = 0;
    struct heldsend h = {0};
    char big[HELDSEND_MAX + 1], got[2 * HELDSEND_MAX];
    size_t n = 0;

    pair(sv);
    h.fd = sv[0];
    fill(big, sizeof(big), 3);
    /* Not marked: sent at once. */
    CHECK_INT((int)heldsend_push(&h, "abc", 3, &err), 3);
    drain(sv[1], got, &n, sizeof(got), sizeof(got));
    CHECK_INT((int)n, 3);
    /* Marked, but larger than what is held: sent at once too. */
    h.hold_next = true;
    CHECK_INT((int)heldsend_push(&h, big, sizeof(big), &err), (int)sizeof(big));
    CHECK(!h.hold_next);
    CHECK_INT((int)h.n_held, 0);
    n = 0;
    drain(sv[1], got, &n, sizeof(got), sizeof(got));
    CHECK_INT((int)n, (int)sizeof(big));
    close(sv[0]);
    close(sv[1]);
}

/*
 * The first send after the header was held stops at every byte from 0 to
 * all of header and body, then the socket takes the rest; the body is
 * pushed again after each EAGAIN, as GnuTLS does. The wire always holds
 * header then body, each byte once.
 */
static void
test_every_cut(void)
{
    enum { HDR = 300, BODY = 2000 };
    char hdr[HDR], body[BODY], want[HDR + BODY];
    int bad = 0, again_in_held = 0;

    fill(hdr, HDR, 5);
    fill(body, BODY, 6);
    memcpy(want, hdr, HDR);
    memcpy(want + HDR, body, BODY);
    fake_on = true;
    for (size_t cut = 0; cut <= HDR + BODY; cut++) {
        struct heldsend h = {.fd = -1, .hold_next = true};
        size_t done = 0;
        int err = 0, rounds = 0;

        fake_len = 0;
        fake_budget = SIZE_MAX;
        if (heldsend_push(&h, hdr, HDR, &err) != HDR || fake_len != 0)
            bad++;
        fake_budget = cut;
        while (done < BODY && rounds++ < 10) {
            ssize_t k = heldsend_push(&h, body + done, BODY - done, &err);

            if (k < 0) {
                if (err != EAGAIN)
                    bad++;
                if (h.off > 0 && h.n_held > 0)
                    again_in_held++;
                fake_budget = SIZE_MAX; /* the socket has room again */
                continue;
            }
            if (k == 0)
                bad++; /* GnuTLS reads 0 as nothing sent, never EAGAIN */
            done += (size_t)k;
            fake_budget = SIZE_MAX;
        }
        if (done != BODY || fake_len != HDR + BODY ||
            memcmp(fake_wire, want, HDR + BODY) != 0 || h.n_held != 0)
            bad++;
    }
    fake_on = false;
    CHECK_INT(bad, 0);
    /* Cuts 1 to HDR - 1 stop inside the held bytes. */
    CHECK_INT(again_in_held, HDR - 1);
}

static void
test_flush(void)
{
    int sv[2], err = 0;
    struct heldsend h = {0};
    char hdr[300], got[400], *filler = malloc(256 * 1024);
    size_t n = 0;

    pair(sv);
    h.fd = sv[0];
    fill(hdr, sizeof(hdr), 7);
    /* An answer sent without its body: the held header goes at the end. */
    h.hold_next = true;
    CHECK_INT((int)heldsend_push(&h, hdr, sizeof(hdr), &err), (int)sizeof(hdr));
    CHECK_INT(heldsend_flush(&h, 1000), 0);
    CHECK_INT((int)h.n_held, 0);
    drain(sv[1], got, &n, sizeof(got), sizeof(got));
    CHECK_INT((int)n, (int)sizeof(hdr));
    CHECK(memcmp(got, hdr, sizeof(hdr)) == 0);
    /* A socket that stays full: flush gives up after its time, holds
     * nothing after, and says so. */
    fill(filler, 256 * 1024, 8);
    while (heldsend_push(&h, filler, 256 * 1024, &err) > 0)
        ;
    h.hold_next = true;
    CHECK_INT((int)heldsend_push(&h, hdr, sizeof(hdr), &err), (int)sizeof(hdr));
    CHECK_INT(heldsend_flush(&h, 50), -1);
    CHECK_INT((int)h.n_held, 0);
    CHECK(!h.hold_next);
    /* A closed peer: the send's error comes back. */
    close(sv[1]);
    h.hold_next = true;
    CHECK_INT((int)heldsend_push(&h, hdr, sizeof(hdr), &err), (int)sizeof(hdr));
    CHECK_INT((int)heldsend_push(&h, "x", 1, &err), -1);
    CHECK_INT(err, EPIPE);
    free(filler);
    close(sv[0]);
}

int
main(void)
{
    test_hold_then_body();
    test_not_held();
    test_every_cut();
    test_flush();
    return harness_finish();
}
