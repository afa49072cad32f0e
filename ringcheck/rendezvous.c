/* The rendezvous protocol of the cross-node ring check: framing, strict
 * parsing, and socket I/O that never waits past a deadline. */
#include "ringcheck/rendezvous.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Addresses one name lookup may return to the parent. */
#define RDV_MAX_ADDRS 4

double
rdv_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *
rdv_type_name(enum rdv_type t)
{
    switch (t) {
    case RDV_HELLO:
        return "HELLO";
    case RDV_REJECT:
        return "REJECT";
    case RDV_RUN:
        return "RUN";
    case RDV_RESULT:
        return "RESULT";
    case RDV_VERDICT:
        return "VERDICT";
    case RDV_CHALLENGE:
        return "CHALLENGE";
    }
    return "unknown";
}

/* An encoder that stops at the first field that does not fit. */
struct enc {
    unsigned char *p;
    size_t len, cap;
    int bad;
};

static void
enc_u32(struct enc *e, uint32_t v)
{
    if (e->bad || e->cap - e->len < 4) {
        e->bad = 1;
        return;
    }
    e->p[e->len++] = (unsigned char)(v >> 24);
    e->p[e->len++] = (unsigned char)(v >> 16);
    e->p[e->len++] = (unsigned char)(v >> 8);
    e->p[e->len++] = (unsigned char)v;
}

static void
enc_bytes(struct enc *e, const void *b, size_t n)
{
    if (e->bad || e->cap - e->len < n) {
        e->bad = 1;
        return;
    }
    memcpy(e->p + e->len, b, n);
    e->len += n;
}

/* A string field; longer than field_size - 1 is a caller's error. */
static void
enc_str(struct enc *e, const char *s, size_t field_size)
{
    size_t n = strnlen(s, field_size);

    if (n >= field_size || e->bad || e->cap - e->len < 2 + n) {
        e->bad = 1;
        return;
    }
    e->p[e->len++] = (unsigned char)(n >> 8);
    e->p[e->len++] = (unsigned char)n;
    enc_bytes(e, s, n);
}

size_t
rdv_encode(const struct rdv_msg *m, unsigned char *buf, size_t len)
{
    struct enc e = {buf, 0, len, 0};
    size_t plen;

    enc_bytes(&e, RDV_MAGIC, 4);
    enc_bytes(
        &e, (const unsigned char[]){RDV_VERSION, (unsigned char)m->type, 0, 0},
        4);
    enc_u32(&e, 0); /* the length, filled in below */
    switch (m->type) {
    case RDV_HELLO:
        enc_str(&e, m->u.hello.job, RDV_JOB_MAX);
        enc_u32(&e, m->u.hello.node_rank);
        enc_u32(&e, m->u.hello.ngpus);
        enc_u32(&e, (uint32_t)m->u.hello.local_code);
        enc_str(&e, m->u.hello.host, RDV_HOST_MAX);
        enc_str(&e, m->u.hello.iface, RDV_IFACE_MAX);
        enc_str(&e, m->u.hello.addr, RDV_ADDR_MAX);
        enc_str(&e, m->u.hello.transport, RDV_WORD_MAX);
        enc_str(&e, m->u.hello.cure, RDV_SETTING_MAX);
        enc_bytes(&e, m->u.hello.proof, RDV_PROOF_BYTES);
        break;
    case RDV_REJECT:
        enc_str(&e, m->u.reject.reason, RDV_TEXT_MAX);
        break;
    case RDV_RUN:
        enc_u32(&e, m->u.run.round);
        enc_u32(&e, m->u.run.world);
        enc_u32(&e, m->u.run.rank_offset);
        enc_u32(&e, m->u.run.phase_ms);
        enc_u32(&e, m->u.run.left_ms);
        enc_str(&e, m->u.run.setting, RDV_SETTING_MAX);
        enc_bytes(&e, m->u.run.id, RDV_ID_BYTES);
        break;
    case RDV_RESULT:
        enc_u32(&e, m->u.result.round);
        enc_u32(&e, (uint32_t)m->u.result.code);
        enc_u32(&e, m->u.result.busbw_mbps);
        enc_u32(&e, m->u.result.wrong);
        enc_str(&e, m->u.result.what, RDV_TEXT_MAX);
        break;
    case RDV_VERDICT:
        enc_u32(&e, (uint32_t)m->u.verdict.code);
        enc_str(&e, m->u.verdict.result, RDV_WORD_MAX);
        enc_str(&e, m->u.verdict.cure, RDV_SETTING_MAX);
        enc_str(&e, m->u.verdict.transport, RDV_WORD_MAX);
        enc_str(&e, m->u.verdict.what, RDV_TEXT_MAX);
        break;
    case RDV_CHALLENGE:
        enc_bytes(&e, m->u.challenge.nonce, RDV_NONCE_BYTES);
        enc_u32(&e, m->u.challenge.left_ms);
        break;
    default:
        e.bad = 1;
        break;
    }
    if (e.bad || e.len - RDV_HEADER_LEN > RDV_MAX_PAYLOAD)
        return 0;
    plen = e.len - RDV_HEADER_LEN;
    buf[8] = (unsigned char)(plen >> 24);
    buf[9] = (unsigned char)(plen >> 16);
    buf[10] = (unsigned char)(plen >> 8);
    buf[11] = (unsigned char)plen;
    return e.len;
}

int
rdv_decode_header(const unsigned char *hdr, enum rdv_type *type, uint32_t *plen,
                  char *err, size_t errlen)
{
    uint32_t n = (uint32_t)hdr[8] << 24 | (uint32_t)hdr[9] << 16 |
                 (uint32_t)hdr[10] << 8 | hdr[11];

    if (memcmp(hdr, RDV_MAGIC, 4) != 0) {
        snprintf(err, errlen, "not a ncclguard rendezvous frame (bad magic)");
        return RDV_EPEER;
    }
    if (hdr[4] != RDV_VERSION) {
        snprintf(err, errlen,
                 "rendezvous protocol version %u, this check speaks %d", hdr[4],
                 RDV_VERSION);
        return RDV_EPEER;
    }
    if (hdr[5] < RDV_HELLO || hdr[5] > RDV_CHALLENGE || hdr[6] != 0 ||
        hdr[7] != 0) {
        snprintf(err, errlen, "unknown rendezvous message type %u", hdr[5]);
        return RDV_EPEER;
    }
    if (n > RDV_MAX_PAYLOAD) {
        snprintf(err, errlen,
                 "rendezvous payload of %u bytes, at most %d allowed", n,
                 RDV_MAX_PAYLOAD);
        return RDV_EPEER;
    }
    *type = (enum rdv_type)hdr[5];
    *plen = n;
    return RDV_OK;
}

struct dec {
    const unsigned char *p;
    size_t len, off;
    const char *bad; /* the first field that did not parse */
};

static uint32_t
dec_u32(struct dec *d, const char *field)
{
    uint32_t v;

    if (d->bad != NULL)
        return 0;
    if (d->len - d->off < 4) {
        d->bad = field;
        return 0;
    }
    v = (uint32_t)d->p[d->off] << 24 | (uint32_t)d->p[d->off + 1] << 16 |
        (uint32_t)d->p[d->off + 2] << 8 | d->p[d->off + 3];
    d->off += 4;
    return v;
}

/* A string into out (field_size bytes with the NUL): printable ASCII only,
 * so that nothing a peer sends can forge a line of the report. */
static void
dec_str(struct dec *d, char *out, size_t field_size, const char *field)
{
    size_t n;

    out[0] = '\0';
    if (d->bad != NULL)
        return;
    if (d->len - d->off < 2) {
        d->bad = field;
        return;
    }
    n = (size_t)d->p[d->off] << 8 | d->p[d->off + 1];
    if (n >= field_size || d->len - d->off - 2 < n) {
        d->bad = field;
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (d->p[d->off + 2 + i] < 0x20 || d->p[d->off + 2 + i] > 0x7e) {
            d->bad = field;
            return;
        }
    memcpy(out, d->p + d->off + 2, n);
    out[n] = '\0';
    d->off += 2 + n;
}

static void
dec_bytes(struct dec *d, unsigned char *out, size_t n, const char *field)
{
    if (d->bad != NULL)
        return;
    if (d->len - d->off < n) {
        d->bad = field;
        return;
    }
    memcpy(out, d->p + d->off, n);
    d->off += n;
}

int
rdv_decode_payload(enum rdv_type type, const unsigned char *p, size_t len,
                   struct rdv_msg *m, char *err, size_t errlen)
{
    struct dec d = {p, len, 0, NULL};

    memset(m, 0, sizeof(*m));
    m->type = type;
    switch (type) {
    case RDV_HELLO:
        dec_str(&d, m->u.hello.job, RDV_JOB_MAX, "job id");
        m->u.hello.node_rank = dec_u32(&d, "node rank");
        m->u.hello.ngpus = dec_u32(&d, "GPU count");
        m->u.hello.local_code = (int32_t)dec_u32(&d, "local result");
        dec_str(&d, m->u.hello.host, RDV_HOST_MAX, "host");
        dec_str(&d, m->u.hello.iface, RDV_IFACE_MAX, "interface");
        dec_str(&d, m->u.hello.addr, RDV_ADDR_MAX, "address");
        dec_str(&d, m->u.hello.transport, RDV_WORD_MAX, "transport");
        dec_str(&d, m->u.hello.cure, RDV_SETTING_MAX, "cure");
        dec_bytes(&d, m->u.hello.proof, RDV_PROOF_BYTES, "proof");
        break;
    case RDV_REJECT:
        dec_str(&d, m->u.reject.reason, RDV_TEXT_MAX, "reason");
        break;
    case RDV_RUN:
        m->u.run.round = dec_u32(&d, "round");
        m->u.run.world = dec_u32(&d, "world size");
        m->u.run.rank_offset = dec_u32(&d, "rank offset");
        m->u.run.phase_ms = dec_u32(&d, "phase timeout");
        m->u.run.left_ms = dec_u32(&d, "round deadline");
        dec_str(&d, m->u.run.setting, RDV_SETTING_MAX, "setting");
        dec_bytes(&d, m->u.run.id, RDV_ID_BYTES, "unique id");
        break;
    case RDV_RESULT:
        m->u.result.round = dec_u32(&d, "round");
        m->u.result.code = (int32_t)dec_u32(&d, "code");
        m->u.result.busbw_mbps = dec_u32(&d, "bandwidth");
        m->u.result.wrong = dec_u32(&d, "wrong values");
        dec_str(&d, m->u.result.what, RDV_TEXT_MAX, "message");
        break;
    case RDV_VERDICT:
        m->u.verdict.code = (int32_t)dec_u32(&d, "code");
        dec_str(&d, m->u.verdict.result, RDV_WORD_MAX, "result");
        dec_str(&d, m->u.verdict.cure, RDV_SETTING_MAX, "cure");
        dec_str(&d, m->u.verdict.transport, RDV_WORD_MAX, "transport");
        dec_str(&d, m->u.verdict.what, RDV_TEXT_MAX, "message");
        break;
    case RDV_CHALLENGE:
        dec_bytes(&d, m->u.challenge.nonce, RDV_NONCE_BYTES, "nonce");
        m->u.challenge.left_ms = dec_u32(&d, "deadline");
        break;
    default:
        snprintf(err, errlen, "unknown rendezvous message type %d", type);
        return RDV_EPEER;
    }
    if (d.bad != NULL) {
        snprintf(err, errlen, "bad %s message: the %s field is malformed",
                 rdv_type_name(type), d.bad);
        return RDV_EPEER;
    }
    if (d.off != d.len) {
        snprintf(err, errlen, "bad %s message: %zu bytes after its fields",
                 rdv_type_name(type), d.len - d.off);
        return RDV_EPEER;
    }
    return RDV_OK;
}

static int
wait_fd(int fd, short events, double deadline)
{
    for (;;) {
        double left = deadline - rdv_now();
        struct pollfd pfd = {fd, events, 0};
        int r;

        if (left <= 0)
            return RDV_ETIME;
        r = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (r > 0)
            return RDV_OK;
        if (r < 0 && errno != EINTR)
            return RDV_EPEER;
    }
}

int
rdv_read_full(int fd, void *buf, size_t n, double deadline)
{
    size_t off = 0;

    while (off < n) {
        ssize_t r = recv(fd, (char *)buf + off, n - off, 0);

        if (r > 0) {
            off += (size_t)r;
            continue;
        }
        if (r == 0)
            return RDV_EPEER;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return RDV_EPEER;
        r = wait_fd(fd, POLLIN, deadline);
        if (r != RDV_OK)
            return (int)r;
    }
    return RDV_OK;
}

int
rdv_write_full(int fd, const void *buf, size_t n, double deadline)
{
    size_t off = 0;

    while (off < n) {
        ssize_t r = send(fd, (const char *)buf + off, n - off, MSG_NOSIGNAL);

        if (r > 0) {
            off += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return RDV_EPEER;
        r = wait_fd(fd, POLLOUT, deadline);
        if (r != RDV_OK)
            return (int)r;
    }
    return RDV_OK;
}

int
rdv_send(int fd, const struct rdv_msg *m, double deadline, char *err,
         size_t errlen)
{
    unsigned char buf[RDV_HEADER_LEN + RDV_MAX_PAYLOAD];
    size_t n = rdv_encode(m, buf, sizeof(buf));
    int r;

    if (n == 0) {
        snprintf(err, errlen, "cannot encode a %s message",
                 rdv_type_name(m->type));
        return RDV_EPEER;
    }
    r = rdv_write_full(fd, buf, n, deadline);
    if (r == RDV_ETIME)
        snprintf(err, errlen, "sending %s timed out", rdv_type_name(m->type));
    else if (r != RDV_OK)
        snprintf(err, errlen, "sending %s failed: %s", rdv_type_name(m->type),
                 strerror(errno));
    return r;
}

int
rdv_recv(int fd, struct rdv_msg *m, double deadline, char *err, size_t errlen)
{
    unsigned char hdr[RDV_HEADER_LEN];
    unsigned char payload[RDV_MAX_PAYLOAD];
    enum rdv_type type;
    uint32_t plen;
    int r = rdv_read_full(fd, hdr, sizeof(hdr), deadline);

    if (r == RDV_OK &&
        (r = rdv_decode_header(hdr, &type, &plen, err, errlen)) != RDV_OK)
        return r;
    if (r == RDV_OK)
        r = rdv_read_full(fd, payload, plen, deadline);
    if (r == RDV_ETIME) {
        snprintf(err, errlen, "no complete message before the deadline");
        return r;
    }
    if (r != RDV_OK) {
        snprintf(err, errlen, "connection closed");
        return r;
    }
    return rdv_decode_payload(type, payload, plen, m, err, errlen);
}

int
rdv_reader_feed(struct rdv_reader *r, int fd, struct rdv_msg *m, char *err,
                size_t errlen)
{
    for (;;) {
        /* The header first; its length then says how much more. */
        size_t want = r->need == 0 ? RDV_HEADER_LEN : r->need;
        ssize_t n;

        if (r->got == want) {
            int rc;

            if (r->need == 0) {
                uint32_t plen;

                rc = rdv_decode_header(r->buf, &r->type, &plen, err, errlen);
                if (rc != RDV_OK)
                    return rc;
                r->need = RDV_HEADER_LEN + plen;
                if (plen > 0)
                    continue;
            }
            rc = rdv_decode_payload(r->type, r->buf + RDV_HEADER_LEN,
                                    r->need - RDV_HEADER_LEN, m, err, errlen);
            r->got = r->need = 0;
            return rc;
        }
        n = recv(fd, r->buf + r->got, want - r->got, 0);
        if (n > 0) {
            r->got += (size_t)n;
            continue;
        }
        if (n == 0) {
            snprintf(err, errlen, "connection closed%s",
                     r->got > 0 ? " in the middle of a message" : "");
            return RDV_EPEER;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return RDV_AGAIN;
        snprintf(err, errlen, "connection failed: %s", strerror(errno));
        return RDV_EPEER;
    }
}

int
rdv_token_valid(const char *s)
{
    size_t n = 0;

    for (; n <= RDV_TOKEN_HEX && s[n] != '\0'; n++)
        if (!((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
            return 0;
    return n == RDV_TOKEN_HEX;
}

int
rdv_proof(const char *token, const unsigned char *nonce, const char *job,
          uint32_t node_rank, unsigned char *out)
{
    /* The context string keeps a proof for this protocol from being
     * mistaken for any other use of the token. */
    static const char ctx[] = "ncclguard-rendezvous-v2";
    unsigned char msg[sizeof(ctx) + RDV_NONCE_BYTES + RDV_JOB_MAX + 4];
    size_t n = 0, jl = strnlen(job, RDV_JOB_MAX - 1);
    unsigned int outlen = 0;
    unsigned char *r;

    memcpy(msg, ctx, sizeof(ctx)); /* with its NUL */
    n += sizeof(ctx);
    memcpy(msg + n, nonce, RDV_NONCE_BYTES);
    n += RDV_NONCE_BYTES;
    memcpy(msg + n, job, jl);
    n += jl;
    msg[n++] = '\0';
    msg[n++] = (unsigned char)(node_rank >> 24);
    msg[n++] = (unsigned char)(node_rank >> 16);
    msg[n++] = (unsigned char)(node_rank >> 8);
    msg[n++] = (unsigned char)node_rank;
    r = HMAC(EVP_sha256(), token, (int)strlen(token), msg, n, out, &outlen);
    return r != NULL && outlen == RDV_PROOF_BYTES ? 0 : -1;
}

int
rdv_proof_equal(const unsigned char *a, const unsigned char *b)
{
    return CRYPTO_memcmp(a, b, RDV_PROOF_BYTES) == 0;
}

static int
set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);

    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

int
rdv_listen(int port, char *err, size_t errlen)
{
    int one = 1, zero = 0;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    if (fd >= 0) {
        struct sockaddr_in6 a6;

        memset(&a6, 0, sizeof(a6));
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)port);
        a6.sin6_addr = in6addr_any;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
        if (bind(fd, (struct sockaddr *)&a6, sizeof(a6)) == 0)
            goto listen;
        close(fd);
    }
    /* No IPv6 in this network namespace: IPv4 only. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    {
        struct sockaddr_in a4;

        memset(&a4, 0, sizeof(a4));
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)port);
        a4.sin_addr.s_addr = htonl(INADDR_ANY);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&a4, sizeof(a4)) != 0) {
            snprintf(err, errlen, "cannot listen on port %d: %s", port,
                     strerror(errno));
            close(fd);
            return -1;
        }
    }
listen:
    if (listen(fd, 64) != 0) {
        snprintf(err, errlen, "cannot listen on port %d: %s", port,
                 strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* One lookup result passed from the resolver child. */
struct rdv_addr {
    socklen_t len;
    struct sockaddr_storage sa;
};

/*
 * Resolves host in a child process, waiting at most until deadline.
 * Returns the number of addresses (> 0), or -1 with the reason in err.
 */
static int
resolve(const char *host, int port, struct rdv_addr *out, double deadline,
        char *err, size_t errlen)
{
    int p[2];
    pid_t pid;
    int gai = 0, n = 0;
    unsigned char buf[sizeof(int) + RDV_MAX_ADDRS * sizeof(struct rdv_addr)];
    size_t got = 0;

    if (pipe2(p, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, strerror(errno));
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot resolve %s: fork: %s", host,
                 strerror(errno));
        close(p[0]);
        close(p[1]);
        return -1;
    }
    if (pid == 0) {
        struct addrinfo hints, *res = NULL;
        char sport[16];
        int k = 0;

        close(p[0]);
        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        snprintf(sport, sizeof(sport), "%d", port);
        gai = getaddrinfo(host, sport, &hints, &res);
        memcpy(buf, &gai, sizeof(int));
        for (struct addrinfo *a = res; a != NULL && k < RDV_MAX_ADDRS;
             a = a->ai_next) {
            struct rdv_addr ra;

            if (a->ai_addrlen > sizeof(ra.sa))
                continue;
            memset(&ra, 0, sizeof(ra));
            ra.len = a->ai_addrlen;
            memcpy(&ra.sa, a->ai_addr, a->ai_addrlen);
            memcpy(buf + sizeof(int) + (size_t)k * sizeof(ra), &ra, sizeof(ra));
            k++;
        }
        if (write(p[1], buf,
                  sizeof(int) + (size_t)k * sizeof(struct rdv_addr)) < 0)
            _exit(1);
        _exit(0);
    }
    close(p[1]);
    set_nonblock(p[0]);
    for (;;) {
        ssize_t r = read(p[0], buf + got, sizeof(buf) - got);

        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno == EINTR)
            continue;
        if ((errno != EAGAIN && errno != EWOULDBLOCK) ||
            wait_fd(p[0], POLLIN, deadline) != RDV_OK) {
            kill(pid, SIGKILL);
            got = 0;
            gai = EAI_AGAIN;
            snprintf(err, errlen,
                     "name %s did not resolve before the deadline (the "
                     "resolver did not answer)",
                     host);
            break;
        }
    }
    close(p[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (got < sizeof(int)) {
        if (gai == 0)
            snprintf(err, errlen, "cannot resolve %s: the resolver failed",
                     host);
        return -1;
    }
    memcpy(&gai, buf, sizeof(int));
    if (gai != 0) {
        snprintf(err, errlen, "name %s does not resolve: %s", host,
                 gai_strerror(gai));
        return -1;
    }
    n = (int)((got - sizeof(int)) / sizeof(struct rdv_addr));
    for (int i = 0; i < n; i++)
        memcpy(&out[i], buf + sizeof(int) + (size_t)i * sizeof(*out),
               sizeof(*out));
    if (n == 0)
        snprintf(err, errlen, "name %s has no address", host);
    return n > 0 ? n : -1;
}

static void
addr_str(const struct rdv_addr *a, char *buf, size_t len)
{
    if (getnameinfo((const struct sockaddr *)&a->sa, a->len, buf,
                    (socklen_t)len, NULL, 0, NI_NUMERICHOST) != 0)
        snprintf(buf, len, "?");
}

/* One connect attempt to a, at most until deadline. */
static int
connect_one(const struct rdv_addr *a, int port, double deadline, char *err,
            size_t errlen)
{
    char as[64];
    int fd =
        socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int soerr = 0;
    socklen_t sl = sizeof(soerr);

    addr_str(a, as, sizeof(as));
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)&a->sa, a->len) == 0)
        return fd;
    if (errno == EINPROGRESS) {
        if (wait_fd(fd, POLLOUT, deadline) != RDV_OK) {
            snprintf(err, errlen, "connection to %s port %d timed out", as,
                     port);
            close(fd);
            return -1;
        }
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
            soerr == 0)
            return fd;
        errno = soerr;
    }
    if (errno == ECONNREFUSED)
        snprintf(err, errlen,
                 "connection to %s port %d refused (nothing listens there "
                 "yet)",
                 as, port);
    else
        snprintf(err, errlen, "cannot connect to %s port %d: %s", as, port,
                 strerror(errno));
    close(fd);
    return -1;
}

int
rdv_connect(const char *host, int port, double deadline, int *attempts,
            char *err, size_t errlen)
{
    double backoff = 0.1;
    int tries = 0;

    snprintf(err, errlen, "no attempt before the deadline");
    for (;;) {
        struct rdv_addr addrs[RDV_MAX_ADDRS];
        int n;
        double now = rdv_now();
        struct timespec ts;
        double nap;

        if (now >= deadline)
            break;
        tries++;
        n = resolve(host, port, addrs, deadline, err, errlen);
        for (int i = 0; i < n; i++) {
            /* One attempt may take at most 1 s: a dropped SYN must not eat
             * the whole deadline. */
            double d = rdv_now() + 1.0;
            int fd = connect_one(&addrs[i], port, d < deadline ? d : deadline,
                                 err, errlen);

            if (fd >= 0) {
                int one = 1;

                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                if (attempts != NULL)
                    *attempts = tries;
                return fd;
            }
        }
        nap = deadline - rdv_now();
        if (nap > backoff)
            nap = backoff;
        if (nap <= 0)
            break;
        ts.tv_sec = (time_t)nap;
        ts.tv_nsec = (long)((nap - (double)ts.tv_sec) * 1e9);
        nanosleep(&ts, NULL);
        backoff = backoff * 2 > 1.0 ? 1.0 : backoff * 2;
    }
    if (attempts != NULL)
        *attempts = tries;
    return RDV_ETIME;
}
