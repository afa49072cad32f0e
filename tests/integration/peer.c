/* ncclguard-peer: misbehaving TLS and TCP clients for the transport tests
 * (stalled handshakes, slow headers, bodies that never finish, raw
 * requests with ambiguous framing). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#define MAX_CONNS 4096
#define MAX_SOURCES 16

enum mode { M_RAW, M_HELLO, M_TRICKLE, M_BODY, M_SEND };

struct peer {
    int fd;
    SSL *ssl;
    bool open;
    char status[4]; /* first answer's status code, "" if none */
    bool retry_after;
    char in[512];
    size_t in_len;
};

static const char *host = "127.0.0.1";
static int port;
static const char *sources[MAX_SOURCES];
static int n_sources;
static int conns = 1;
static double hold = 1.0;
static int every_ms = 200;
static bool reconnect;
static SSL_CTX *ctx;

static void
die(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fprintf(stderr, "ncclguard-peer: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static double
now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* A blocking TCP connection from source (or any), or -1. */
static int
tcp_connect(const char *source)
{
    struct sockaddr_in a = {0}, s = {0};
    struct timeval tv = {5, 0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (source != NULL) {
        s.sin_family = AF_INET;
        if (inet_pton(AF_INET, source, &s.sin_addr) != 1)
            die("bad --source %s", source);
        if (bind(fd, (struct sockaddr *)&s, sizeof(s)) != 0)
            die("cannot bind %s: %s", source, strerror(errno));
    }
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &a.sin_addr) != 1)
        die("bad --host %s", host);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Writes all of buf in plain TCP or TLS; false when the peer is gone. */
static bool
send_all(struct peer *p, const void *buf, size_t len)
{
    const char *b = buf;

    while (len > 0) {
        int n = p->ssl ? SSL_write(p->ssl, b, (int)len)
                       : (int)send(p->fd, b, len, MSG_NOSIGNAL);
        if (n <= 0)
            return false;
        b += n;
        len -= (size_t)n;
    }
    return true;
}

/* The bytes of a real ClientHello for host, made with memory BIOs. */
static size_t
client_hello(unsigned char *out, size_t cap)
{
    SSL *s = SSL_new(ctx);
    BIO *rb = BIO_new(BIO_s_mem()), *wb = BIO_new(BIO_s_mem());
    int n;

    SSL_set_bio(s, rb, wb);
    SSL_set_connect_state(s);
    SSL_set_tlsext_host_name(s, "localhost");
    SSL_do_handshake(s);
    n = BIO_read(wb, out, (int)cap);
    SSL_free(s);
    if (n <= 0)
        die("cannot build a ClientHello");
    return (size_t)n;
}

static bool
tls_open(struct peer *p)
{
    p->ssl = SSL_new(ctx);
    SSL_set_fd(p->ssl, p->fd);
    SSL_set_tlsext_host_name(p->ssl, "localhost");
    if (SSL_connect(p->ssl) != 1) {
        SSL_free(p->ssl);
        p->ssl = NULL;
        return false;
    }
    return true;
}

static void
peer_close(struct peer *p)
{
    if (p->ssl != NULL)
        SSL_free(p->ssl);
    if (p->fd >= 0)
        close(p->fd);
    p->ssl = NULL;
    p->fd = -1;
    p->open = false;
}

/* Opens connection i and sends what mode sends before holding. */
static bool
peer_open(struct peer *p, int i, enum mode m, const unsigned char *data,
          size_t len, unsigned long long body_len)
{
    char head[512];
    int n;

    memset(p, 0, sizeof(*p));
    p->fd = tcp_connect(n_sources ? sources[i % n_sources] : NULL);
    if (p->fd < 0)
        return false;
    p->open = true;
    switch (m) {
    case M_RAW:
    case M_HELLO:
        if (!send_all(p, data, len))
            goto gone;
        return true;
    case M_TRICKLE:
        if (!tls_open(p))
            goto gone;
        n = snprintf(head, sizeof(head),
                     "POST /mutate HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\n");
        if (!send_all(p, head, (size_t)n))
            goto gone;
        return true;
    case M_BODY:
        if (!tls_open(p))
            goto gone;
        n = snprintf(head, sizeof(head),
                     "POST /mutate HTTP/1.1\r\nHost: localhost\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %llu\r\n\r\n",
                     body_len);
        /* The body goes out later (send_bodies), once the answers sent
         * right after the headers have been read. */
        if (!send_all(p, head, (size_t)n))
            goto gone;
        (void)data;
        (void)len;
        return true;
    case M_SEND:
        if (!tls_open(p) || !send_all(p, data, len))
            goto gone;
        return true;
    }
gone:
    peer_close(p);
    return false;
}

/* Reads what is there; notes the first status line; false at the end. */
static bool
peer_read(struct peer *p)
{
    char buf[4096];
    int n;

    for (;;) {
        if (p->ssl != NULL) {
            n = SSL_read(p->ssl, buf, sizeof(buf));
            if (n <= 0) {
                int e = SSL_get_error(p->ssl, n);
                if (e == SSL_ERROR_WANT_READ)
                    return true;
                return false;
            }
        } else {
            n = (int)recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT);
            if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return true;
            if (n <= 0)
                return false;
        }
        if (p->in_len < sizeof(p->in) - 1) {
            size_t k = (size_t)n;
            if (k > sizeof(p->in) - 1 - p->in_len)
                k = sizeof(p->in) - 1 - p->in_len;
            memcpy(p->in + p->in_len, buf, k);
            p->in_len += k;
            p->in[p->in_len] = '\0';
            if (p->status[0] == '\0' && strncmp(p->in, "HTTP/1.1 ", 9) == 0 &&
                p->in_len >= 12)
                memcpy(p->status, p->in + 9, 3);
            if (strstr(p->in, "\r\nRetry-After:") != NULL)
                p->retry_after = true;
        }
        if (p->ssl == NULL || SSL_pending(p->ssl) == 0)
            return true;
    }
}

/*
 * Body mode, after every connection sent its headers: reads for a moment
 * the answers given at once (503 for a spent budget), then sends the body
 * on the connections that got none. Reading first keeps the server from
 * closing a socket with unread data, whose reset could destroy the answer.
 */
static void
send_bodies(struct peer *peers, int n, const unsigned char *data, size_t len,
            int *closed)
{
    double until = now_s() + 0.3;

    while (now_s() < until) {
        struct pollfd pf[MAX_CONNS];
        for (int k = 0; k < n; k++) {
            pf[k].fd = peers[k].open ? peers[k].fd : -1;
            pf[k].events = POLLIN;
            pf[k].revents = 0;
        }
        poll(pf, (nfds_t)n, 20);
        for (int k = 0; k < n; k++)
            if (peers[k].open && pf[k].revents != 0 && !peer_read(&peers[k])) {
                (*closed)++;
                peer_close(&peers[k]);
            }
    }
    for (int k = 0; k < n; k++)
        if (peers[k].open && peers[k].status[0] == '\0' &&
            !send_all(&peers[k], data, len)) {
            (*closed)++;
            peer_close(&peers[k]);
        }
}

static unsigned char *
read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *b;
    long n;

    if (f == NULL)
        die("cannot open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)n + 1);
    if (b == NULL || fread(b, 1, (size_t)n, f) != (size_t)n)
        die("cannot read %s", path);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static size_t
from_hex(const char *hex, unsigned char *out, size_t cap)
{
    size_t n = 0;

    while (hex[0] && hex[1] && n < cap) {
        unsigned int v;
        if (hex[0] == ' ') {
            hex++;
            continue;
        }
        if (sscanf(hex, "%2x", &v) != 1)
            die("bad hex at %s", hex);
        out[n++] = (unsigned char)v;
        hex += 2;
    }
    return n;
}

static void
usage(void)
{
    fprintf(stderr,
            "usage: ncclguard-peer --port P [--host IP] [--source IP]... "
            "[--conns N] [--hold S] [--every MS] [--reconnect] MODE\n"
            "modes:\n"
            "  raw HEX            TCP: send these bytes, then nothing\n"
            "  hello half|whole   TCP: part or all of a real ClientHello\n"
            "  trickle            TLS: partial headers, then a byte every "
            "--every ms\n"
            "  body LEN SENT      TLS: POST announcing LEN bytes, send SENT\n"
            "  send FILE          TLS: send FILE's bytes as they are\n"
            "prints opened=, closed= (by the server), reconnects=, "
            "status_NNN= counts, retry_after=, first_status=, first_ms=\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    static struct peer peers[MAX_CONNS];
    static unsigned char data[1 << 16];
    unsigned char *big = NULL;
    const unsigned char *payload = data;
    size_t len = 0;
    unsigned long long body_len = 0;
    enum mode m;
    int i = 1, opened = 0, closed = 0, reconnects = 0;
    int counts[600] = {0}, retry = 0;
    double t0, end, next_drip, first_ms = -1;
    const char *first_status = NULL;

    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--reconnect") == 0) {
            reconnect = true;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (strcmp(a, "--port") == 0)
            port = atoi(argv[++i]);
        else if (strcmp(a, "--host") == 0)
            host = argv[++i];
        else if (strcmp(a, "--source") == 0 && n_sources < MAX_SOURCES)
            sources[n_sources++] = argv[++i];
        else if (strcmp(a, "--conns") == 0)
            conns = atoi(argv[++i]);
        else if (strcmp(a, "--hold") == 0)
            hold = atof(argv[++i]);
        else if (strcmp(a, "--every") == 0)
            every_ms = atoi(argv[++i]);
        else
            usage();
    }
    if (port <= 0 || i >= argc || conns < 1 || conns > MAX_CONNS)
        usage();
    /* The server closes connections it refuses; a write then must fail,
     * not kill this program. */
    signal(SIGPIPE, SIG_IGN);
    ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    if (strcmp(argv[i], "raw") == 0 && i + 1 < argc) {
        m = M_RAW;
        len = from_hex(argv[i + 1], data, sizeof(data));
    } else if (strcmp(argv[i], "hello") == 0 && i + 1 < argc) {
        m = M_HELLO;
        len = client_hello(data, sizeof(data));
        if (strcmp(argv[i + 1], "half") == 0)
            len /= 2;
    } else if (strcmp(argv[i], "trickle") == 0) {
        m = M_TRICKLE;
    } else if (strcmp(argv[i], "body") == 0 && i + 2 < argc) {
        m = M_BODY;
        body_len = strtoull(argv[i + 1], NULL, 10);
        len = strtoull(argv[i + 2], NULL, 10);
        big = calloc(1, len + 1);
        if (big == NULL)
            die("out of memory");
        memset(big, ' ', len);
        payload = big;
    } else if (strcmp(argv[i], "send") == 0 && i + 1 < argc) {
        m = M_SEND;
        big = read_file(argv[i + 1], &len);
        payload = big;
    } else {
        usage();
    }

    t0 = now_s();
    for (int k = 0; k < conns; k++)
        if (peer_open(&peers[k], k, m, payload, len, body_len))
            opened++;
    if (m == M_BODY)
        send_bodies(peers, conns, payload, len, &closed);
    end = now_s() + hold;
    next_drip = now_s() + every_ms / 1000.0;
    while (now_s() < end) {
        struct pollfd pf[MAX_CONNS];
        int n_open = 0;

        for (int k = 0; k < conns; k++) {
            pf[k].fd = peers[k].open ? peers[k].fd : -1;
            pf[k].events = POLLIN;
            pf[k].revents = 0;
            n_open += peers[k].open;
        }
        if (n_open == 0 && !reconnect)
            break;
        poll(pf, (nfds_t)conns, 20);
        for (int k = 0; k < conns; k++) {
            struct peer *p = &peers[k];
            if (!p->open || pf[k].revents == 0)
                continue;
            if (!peer_read(p)) {
                closed++;
                peer_close(p);
            }
            if (p->status[0] != '\0' && first_status == NULL) {
                static char st[4];
                memcpy(st, p->status, 4);
                first_status = st;
                first_ms = (now_s() - t0) * 1000;
            }
        }
        if (m == M_TRICKLE && now_s() >= next_drip) {
            for (int k = 0; k < conns; k++)
                if (peers[k].open && !send_all(&peers[k], "X", 1)) {
                    closed++;
                    peer_close(&peers[k]);
                }
            next_drip += every_ms / 1000.0;
        }
        if (reconnect)
            for (int k = 0; k < conns; k++)
                if (!peers[k].open && peers[k].status[0] == '\0' &&
                    peer_open(&peers[k], k, m, payload, len, body_len))
                    reconnects++;
    }
    for (int k = 0; k < conns; k++) {
        struct peer *p = &peers[k];
        if (p->status[0] != '\0') {
            int code = atoi(p->status);
            if (code >= 100 && code < 600)
                counts[code]++;
            retry += p->retry_after;
        }
        peer_close(p);
    }
    printf("opened=%d closed=%d reconnects=%d retry_after=%d", opened, closed,
           reconnects, retry);
    for (int c = 100; c < 600; c++)
        if (counts[c] > 0)
            printf(" status_%d=%d", c, counts[c]);
    printf(" first_status=%s first_ms=%.0f\n",
           first_status ? first_status : "none", first_ms);
    free(big);
    SSL_CTX_free(ctx);
    return 0;
}
