/* ncclguard-loadgen: an HTTPS load client for the benchmark, the soak and
 * the fault runs: fixed-rate (open-loop) and closed-loop POST load with
 * latency percentiles, /readyz time after exec, connection churn, and
 * slowloris-style idle connections. OpenSSL, keep-alive, one connection
 * per thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#define MAX_BODIES 16
#define MAX_CONNS 1024
#define RESP_MAX (8u << 20)

struct body {
    char *path;
    char *req; /* the whole HTTP request, headers and body */
    size_t req_len;
    int want; /* expected status */
    atomic_ulong ok, bad;
};

static struct {
    const char *host;
    int port;
    const char *cafile;
    const char *source; /* local address to bind, NULL = any */
    const char *path;
    const char *ctype;
    struct body bodies[MAX_BODIES];
    int n_bodies;
    int conns;
    double rate;       /* requests per second; 0 = closed loop */
    double duration;   /* seconds (rate mode) */
    uint64_t requests; /* total (closed mode) */
    double hold;       /* idle mode: seconds */
    SSL_CTX *ctx;
} cfg = {.host = "127.0.0.1",
         .path = "/mutate",
         .ctype = "application/json",
         .conns = 8,
         .duration = 10};

struct worker {
    pthread_t thread;
    int index;
    double *lat; /* seconds */
    size_t n_lat, cap_lat;
    uint64_t failures, reconnects;
    double first_failure, last_failure; /* epoch seconds, 0 = none */
    double first_failed_sent;           /* epoch when it was sent */
    char first_reason[160];
};

static atomic_ullong next_slot;
static double start_mono, start_epoch;

static double
now_mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double
now_epoch(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
sleep_until(double t)
{
    struct timespec ts;

    ts.tv_sec = (time_t)t;
    ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static void
die(const char *what)
{
    fprintf(stderr, "loadgen: %s\n", what);
    exit(2);
}

/* A TCP connection to host:port, from cfg.source when set; -1 on error. */
static int
tcp_connect(const char *source, int linger_rst)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = 10};
    int one = 1, fd;

    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (linger_rst) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    if (source != NULL) {
        struct sockaddr_in la = {.sin_family = AF_INET};
        if (inet_pton(AF_INET, source, &la.sin_addr) != 1 ||
            bind(fd, (struct sockaddr *)&la, sizeof(la)) != 0)
            goto fail;
    }
    sa.sin_port = htons((uint16_t)cfg.port);
    if (inet_pton(AF_INET, cfg.host, &sa.sin_addr) != 1)
        goto fail;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        goto fail;
    return fd;
fail:
    close(fd);
    return -1;
}

struct conn {
    int fd;
    SSL *ssl;
};

static void
conn_close(struct conn *c)
{
    if (c->ssl != NULL) {
        SSL_shutdown(c->ssl);
        SSL_free(c->ssl);
    }
    if (c->fd >= 0)
        close(c->fd);
    c->ssl = NULL;
    c->fd = -1;
}

/* TCP connect plus a verified TLS handshake; 0 or -1. */
static int
conn_open(struct conn *c, const char *source)
{
    c->ssl = NULL;
    c->fd = tcp_connect(source, 0);
    if (c->fd < 0)
        return -1;
    c->ssl = SSL_new(cfg.ctx);
    if (c->ssl == NULL)
        goto fail;
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), cfg.host);
    SSL_set_fd(c->ssl, c->fd);
    if (SSL_connect(c->ssl) != 1)
        goto fail;
    return 0;
fail:
    conn_close(c);
    return -1;
}

static int
write_all(struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        int w = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/*
 * Reads one HTTP/1.1 response with a Content-Length. Returns the status,
 * or -1 on a transport or framing error; *close_after is set when the
 * server said Connection: close.
 */
static int
read_response(struct conn *c, char *buf, size_t cap, bool *close_after)
{
    size_t have = 0, head_len = 0, body_len = 0;
    char *end = NULL;
    int status = -1;

    *close_after = false;
    while (end == NULL) {
        int r;
        if (have + 1 >= cap)
            return -1;
        r = SSL_read(c->ssl, buf + have, (int)(cap - 1 - have));
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    head_len = (size_t)(end - buf) + 4;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
        return -1;
    bool have_len = false;
    for (char *line = strstr(buf, "\r\n"); line != NULL && line < end;
         line = strstr(line + 2, "\r\n")) {
        char *h = line + 2;
        if (strncasecmp(h, "Content-Length:", 15) == 0) {
            char *e;
            unsigned long long v = strtoull(h + 15, &e, 10);
            if (e == h + 15 || v > RESP_MAX)
                return -1;
            body_len = (size_t)v;
            have_len = true;
        } else if (strncasecmp(h, "Connection:", 11) == 0 &&
                   strncasecmp(h + 11 + strspn(h + 11, " "), "close", 5) == 0) {
            *close_after = true;
        } else if (strncasecmp(h, "Transfer-Encoding:", 18) == 0) {
            return -1; /* the servers measured here never chunk */
        }
    }
    if (!have_len)
        return -1;
    while (have < head_len + body_len) {
        char sink[16384];
        size_t want = head_len + body_len - have;
        int r = SSL_read(c->ssl, sink,
                         (int)(want < sizeof(sink) ? want : sizeof(sink)));
        if (r <= 0)
            return -1;
        have += (size_t)r;
    }
    if (have > head_len + body_len)
        return -1; /* pipelining is never used, so nothing may follow */
    return status;
}

static void
worker_fail(struct worker *w, double sched, const char *fmt, const char *detail)
{
    double t = now_epoch();

    if (w->failures == 0) {
        w->first_failure = t;
        w->first_failed_sent = start_epoch + (sched - start_mono);
        snprintf(w->first_reason, sizeof(w->first_reason), fmt, detail);
    }
    w->last_failure = t;
    w->failures++;
}

static void
worker_record(struct worker *w, double lat)
{
    if (w->n_lat == w->cap_lat) {
        size_t cap = w->cap_lat ? w->cap_lat * 2 : 65536;
        double *p = realloc(w->lat, cap * sizeof(*p));
        if (p == NULL)
            die("out of memory");
        w->lat = p;
        w->cap_lat = cap;
    }
    w->lat[w->n_lat++] = lat;
}

/*
 * Sends one request on c (reconnecting once if needed); the status or -1.
 * *sent is when its first byte was written (or the connect began), which
 * under overload is later than its scheduled time.
 */
static int
do_request(struct worker *w, struct conn *c, struct body *b, char *buf,
           double *sent)
{
    bool close_after;
    int status;

    *sent = now_mono();
    for (int attempt = 0; attempt < 2; attempt++) {
        if (c->ssl == NULL) {
            if (conn_open(c, cfg.source) != 0)
                return -1;
            w->reconnects++;
        }
        if (write_all(c, b->req, b->req_len) == 0) {
            status = read_response(c, buf, 65536, &close_after);
            if (status > 0) {
                if (close_after)
                    conn_close(c);
                return status;
            }
        }
        /* A keep-alive connection the server closed while idle: retry
         * once on a fresh one, as HTTP clients do. */
        conn_close(c);
    }
    return -1;
}

static void *
worker_run(void *arg)
{
    struct worker *w = arg;
    struct conn c = {.fd = -1};
    char *buf = malloc(65536);

    if (buf == NULL)
        die("out of memory");
    /* Connect before the clock starts: the handshake is not a request. */
    if (conn_open(&c, cfg.source) != 0)
        worker_fail(w, start_mono, "%s", "cannot connect");
    for (;;) {
        uint64_t slot = atomic_fetch_add(&next_slot, 1);
        double sched;

        if (cfg.rate > 0) {
            sched = start_mono + (double)slot / cfg.rate;
            if (sched - start_mono >= cfg.duration)
                break;
            sleep_until(sched);
        } else {
            if (slot >= cfg.requests)
                break;
            sched = now_mono();
        }
        struct body *b = &cfg.bodies[slot % (uint64_t)cfg.n_bodies];
        double sent;
        int status = do_request(w, &c, b, buf, &sent);
        double lat = now_mono() - sched;
        if (status == b->want) {
            atomic_fetch_add(&b->ok, 1);
            worker_record(w, lat);
        } else {
            char detail[64];
            atomic_fetch_add(&b->bad, 1);
            snprintf(detail, sizeof(detail), "%d", status);
            worker_fail(w, sent, "status %s", detail);
        }
    }
    conn_close(&c);
    free(buf);
    return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double
pct(const double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i];
}

static int
run_load(void)
{
    struct worker *ws = calloc((size_t)cfg.conns, sizeof(*ws));
    double *all = NULL, t0, elapsed, first = 0, last = 0, first_sent = 0;
    size_t n = 0;
    uint64_t failures = 0, reconnects = 0;
    const char *reason = "";

    if (ws == NULL)
        die("out of memory");
    t0 = now_epoch();
    start_mono = now_mono() + 0.05 + 0.002 * cfg.conns;
    start_epoch = t0 + 0.05 + 0.002 * cfg.conns;
    for (int i = 0; i < cfg.conns; i++) {
        ws[i].index = i;
        if (pthread_create(&ws[i].thread, NULL, worker_run, &ws[i]) != 0)
            die("cannot start a thread");
    }
    for (int i = 0; i < cfg.conns; i++)
        pthread_join(ws[i].thread, NULL);
    elapsed = now_mono() - start_mono;
    for (int i = 0; i < cfg.conns; i++)
        n += ws[i].n_lat;
    all = malloc((n ? n : 1) * sizeof(*all));
    if (all == NULL)
        die("out of memory");
    n = 0;
    for (int i = 0; i < cfg.conns; i++) {
        memcpy(all + n, ws[i].lat, ws[i].n_lat * sizeof(*all));
        n += ws[i].n_lat;
        failures += ws[i].failures;
        reconnects += ws[i].reconnects;
        if (ws[i].failures && (first == 0 || ws[i].first_failure < first)) {
            first = ws[i].first_failure;
            reason = ws[i].first_reason;
        }
        if (ws[i].failures &&
            (first_sent == 0 || ws[i].first_failed_sent < first_sent))
            first_sent = ws[i].first_failed_sent;
        if (ws[i].last_failure > last)
            last = ws[i].last_failure;
        free(ws[i].lat);
    }
    qsort(all, n, sizeof(*all), cmp_double);
    printf("mode=%s conns=%d target_rate=%.0f\n",
           cfg.rate > 0 ? "rate" : "closed", cfg.conns, cfg.rate);
    printf("start_epoch=%.6f elapsed_s=%.3f\n", t0, elapsed);
    printf("ok=%zu failures=%" PRIu64 " reconnects=%" PRIu64
           " achieved_rps=%.1f\n",
           n, failures, reconnects, (double)(n + failures) / elapsed);
    printf("latency_ms p50=%.3f p90=%.3f p99=%.3f p999=%.3f max=%.3f\n",
           pct(all, n, 0.5) * 1e3, pct(all, n, 0.9) * 1e3,
           pct(all, n, 0.99) * 1e3, pct(all, n, 0.999) * 1e3,
           n ? all[n - 1] * 1e3 : 0.0);
    if (failures)
        printf("first_failure_epoch=%.6f last_failure_epoch=%.6f "
               "first_failed_sent_epoch=%.6f first_reason=\"%s\"\n",
               first, last, first_sent, reason);
    for (int i = 0; i < cfg.n_bodies; i++)
        printf("body %s want=%d ok=%lu bad=%lu\n", cfg.bodies[i].path,
               cfg.bodies[i].want, atomic_load(&cfg.bodies[i].ok),
               atomic_load(&cfg.bodies[i].bad));
    free(all);
    free(ws);
    return failures ? 1 : 0;
}

/* GET path on a fresh connection; the status or -1. */
static int
get_once(const char *path)
{
    struct conn c;
    char req[256], buf[4096];
    bool close_after;
    int status = -1, n;

    if (conn_open(&c, NULL) != 0)
        return -1;
    n = snprintf(req, sizeof(req),
                 "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n",
                 path, cfg.host, cfg.port);
    if (n > 0 && (size_t)n < sizeof(req) && write_all(&c, req, (size_t)n) == 0)
        status = read_response(&c, buf, sizeof(buf), &close_after);
    conn_close(&c);
    return status;
}

/* Execs argv and times until GET /readyz answers 200. */
static int
run_readyz(char **argv)
{
    double t0 = now_mono(), t;
    pid_t pid = fork();
    int status = -1, wst;

    if (pid < 0)
        die("fork failed");
    if (pid == 0) {
        execvp(argv[0], argv);
        _exit(127);
    }
    for (;;) {
        if (waitpid(pid, &wst, WNOHANG) == pid) {
            fprintf(stderr, "loadgen: server exited before /readyz\n");
            return 1;
        }
        status = get_once("/readyz");
        if (status == 200)
            break;
        if (now_mono() - t0 > 30) {
            fprintf(stderr, "loadgen: no 200 from /readyz within 30s\n");
            break;
        }
        usleep(500);
    }
    t = now_mono() - t0;
    if (status == 200)
        printf("readyz_ms=%.2f\n", t * 1e3);
    kill(pid, SIGTERM);
    waitpid(pid, &wst, 0);
    return status == 200 ? 0 : 1;
}

struct churn_arg {
    pthread_t thread;
    uint64_t n, failed;
};

static atomic_ullong churn_left;

static void *
churn_run(void *arg)
{
    struct churn_arg *a = arg;

    for (;;) {
        uint64_t left = atomic_load(&churn_left);
        if (left == 0)
            break;
        if (!atomic_compare_exchange_weak(&churn_left, &left, left - 1))
            continue;
        if (left % 2) {
            /* TCP only, then reset: no ClientHello at all. */
            int fd = tcp_connect(NULL, 1);
            if (fd < 0)
                a->failed++;
            else
                close(fd);
        } else {
            /* A full handshake, then drop without a request. */
            struct conn c;
            if (conn_open(&c, NULL) != 0) {
                a->failed++;
            } else {
                close(c.fd); /* no close_notify: an abrupt drop */
                c.fd = -1;
                SSL_free(c.ssl);
            }
        }
        a->n++;
        if (left == 1)
            break;
    }
    return NULL;
}

static int
run_churn(uint64_t total)
{
    struct churn_arg as[8];
    uint64_t n = 0, failed = 0;
    double t0 = now_mono();
    int threads = cfg.conns < 8 ? cfg.conns : 8;

    memset(as, 0, sizeof(as));
    atomic_store(&churn_left, total);
    for (int i = 0; i < threads; i++)
        pthread_create(&as[i].thread, NULL, churn_run, &as[i]);
    for (int i = 0; i < threads; i++) {
        pthread_join(as[i].thread, NULL);
        n += as[i].n;
        failed += as[i].failed;
    }
    printf("churn opened=%" PRIu64 " failed=%" PRIu64 " seconds=%.2f\n", n,
           failed, now_mono() - t0);
    return 0;
}

/*
 * Slowloris: holds n connections from cfg.source; half never send a
 * ClientHello, half finish the handshake and drip one header byte a
 * second. Reports how many the server refused or closed, and how soon.
 */
static int
run_idle(int n)
{
    struct conn *cs = calloc((size_t)n, sizeof(*cs));
    double *opened = calloc((size_t)n, sizeof(*opened));
    double *closed_at = calloc((size_t)n, sizeof(*closed_at));
    int refused = 0, closed = 0;
    double t0 = now_mono(), last_drip = t0;

    if (cs == NULL || opened == NULL || closed_at == NULL)
        die("out of memory");
    for (int i = 0; i < n; i++) {
        cs[i].fd = -1;
        cs[i].ssl = NULL;
        if (i % 2 == 0) {
            cs[i].fd = tcp_connect(cfg.source, 0);
        } else if (conn_open(&cs[i], cfg.source) == 0) {
            char head[128];
            int len =
                snprintf(head, sizeof(head), "POST %s HTTP/1.1\r\nHost: %s\r\n",
                         cfg.path, cfg.host);
            if (write_all(&cs[i], head, (size_t)len) != 0)
                conn_close(&cs[i]);
        }
        if (cs[i].fd < 0)
            refused++;
        opened[i] = now_mono();
        if (cs[i].fd >= 0)
            fcntl(cs[i].fd, F_SETFL, fcntl(cs[i].fd, F_GETFL) | O_NONBLOCK);
    }
    printf("idle_opened=%d idle_refused=%d\n", n - refused, refused);
    fflush(stdout);
    while (now_mono() - t0 < cfg.hold) {
        bool drip = now_mono() - last_drip >= 1.0;
        for (int i = 0; i < n; i++) {
            char b[256];
            ssize_t r;
            if (cs[i].fd < 0 || closed_at[i] > 0)
                continue;
            /* TCP-only connections: read (and drop) what the server sends,
             * a TLS alert before it closes; end of stream means closed.
             * TLS ones: peek, so the TLS stream is left intact. */
            r = recv(cs[i].fd, b, cs[i].ssl == NULL ? sizeof(b) : 1,
                     cs[i].ssl == NULL ? MSG_DONTWAIT
                                       : MSG_PEEK | MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
                closed_at[i] = now_mono();
                closed++;
                continue;
            }
            if (drip && cs[i].ssl != NULL) {
                /* One more header byte; the request never completes. */
                if (SSL_write(cs[i].ssl, "X", 1) <= 0 && closed_at[i] == 0) {
                    closed_at[i] = now_mono();
                    closed++;
                }
            }
        }
        if (drip)
            last_drip = now_mono();
        usleep(20000);
    }
    double first = 0, lastc = 0;
    for (int i = 0; i < n; i++) {
        if (closed_at[i] > 0) {
            double d = closed_at[i] - opened[i];
            if (first == 0 || d < first)
                first = d;
            if (d > lastc)
                lastc = d;
        }
        if (cs[i].ssl != NULL) {
            SSL_free(cs[i].ssl);
            cs[i].ssl = NULL;
        }
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    }
    printf("idle_closed_by_server=%d of %d within %.0fs "
           "(first after %.1fs, last after %.1fs)\n",
           closed, n - refused, cfg.hold, first, lastc);
    free(cs);
    free(opened);
    free(closed_at);
    return 0;
}

static void
add_body(const char *spec)
{
    struct body *b;
    const char *colon = strrchr(spec, ':');
    FILE *f;
    struct stat st;
    char head[512];
    int hl;

    if (cfg.n_bodies == MAX_BODIES)
        die("too many --body options");
    b = &cfg.bodies[cfg.n_bodies++];
    b->want = 200;
    b->path = strdup(spec);
    if (b->path == NULL)
        die("out of memory");
    if (colon != NULL && colon[1] >= '1' && colon[1] <= '5') {
        b->want = (int)strtol(colon + 1, NULL, 10);
        b->path[colon - spec] = '\0';
    }
    f = fopen(b->path, "rb");
    if (f == NULL || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "loadgen: %s: %s\n", b->path, strerror(errno));
        exit(2);
    }
    hl = snprintf(head, sizeof(head),
                  "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: %s\r\n"
                  "Content-Length: %lld\r\n\r\n",
                  cfg.path, cfg.host, cfg.port, cfg.ctype,
                  (long long)st.st_size);
    if (hl < 0 || (size_t)hl >= sizeof(head))
        die("request head too long");
    b->req_len = (size_t)hl + (size_t)st.st_size;
    b->req = malloc(b->req_len);
    if (b->req == NULL)
        die("out of memory");
    memcpy(b->req, head, (size_t)hl);
    if (fread(b->req + hl, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        die("short read on a body file");
    fclose(f);
}

static void
usage(void)
{
    fprintf(stderr,
            "usage: ncclguard-loadgen --port P --cacert CA [options] MODE\n"
            "  --host IP (127.0.0.1)  --path /mutate  --source IP\n"
            "  --body FILE[:STATUS]   (repeatable; round-robin; default "
            "status 200)\n"
            "  --conns N (8)\n"
            "modes:\n"
            "  --rate R --duration S   open loop: R req/s for S seconds, "
            "latency measured\n"
            "                          from each request's scheduled time\n"
            "  --requests N            closed loop: N requests as fast as "
            "possible\n"
            "  --readyz -- CMD ARGS    exec CMD, time until /readyz is 200\n"
            "  --churn N               open and drop N connections\n"
            "  --idle N --hold S       hold N idle connections for S "
            "seconds\n");
    exit(2);
}

int
main(int argc, char **argv)
{
    const char *bodies[MAX_BODIES];
    int n_bodies = 0, idle = 0;
    uint64_t churn = 0;
    char **readyz = NULL;

    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--readyz") == 0) {
            if (i + 2 >= argc || strcmp(argv[i + 1], "--") != 0)
                usage();
            readyz = argv + i + 2;
            break;
        }
        if (v == NULL)
            usage();
        i++;
        if (strcmp(a, "--host") == 0)
            cfg.host = v;
        else if (strcmp(a, "--port") == 0)
            cfg.port = (int)strtol(v, NULL, 10);
        else if (strcmp(a, "--cacert") == 0)
            cfg.cafile = v;
        else if (strcmp(a, "--source") == 0)
            cfg.source = v;
        else if (strcmp(a, "--path") == 0)
            cfg.path = v;
        else if (strcmp(a, "--content-type") == 0)
            cfg.ctype = v;
        else if (strcmp(a, "--body") == 0 && n_bodies < MAX_BODIES)
            bodies[n_bodies++] = v;
        else if (strcmp(a, "--conns") == 0)
            cfg.conns = (int)strtol(v, NULL, 10);
        else if (strcmp(a, "--rate") == 0)
            cfg.rate = strtod(v, NULL);
        else if (strcmp(a, "--duration") == 0)
            cfg.duration = strtod(v, NULL);
        else if (strcmp(a, "--requests") == 0)
            cfg.requests = strtoull(v, NULL, 10);
        else if (strcmp(a, "--churn") == 0)
            churn = strtoull(v, NULL, 10);
        else if (strcmp(a, "--idle") == 0)
            idle = (int)strtol(v, NULL, 10);
        else if (strcmp(a, "--hold") == 0)
            cfg.hold = strtod(v, NULL);
        else
            usage();
    }
    if (cfg.port <= 0 || cfg.port > 65535 || cfg.cafile == NULL ||
        cfg.conns < 1 || cfg.conns > MAX_CONNS)
        usage();
    cfg.ctx = SSL_CTX_new(TLS_client_method());
    if (cfg.ctx == NULL ||
        SSL_CTX_load_verify_locations(cfg.ctx, cfg.cafile, NULL) != 1)
        die("cannot load the CA certificate");
    SSL_CTX_set_verify(cfg.ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_min_proto_version(cfg.ctx, TLS1_2_VERSION);
    if (readyz != NULL)
        return run_readyz(readyz);
    if (churn > 0)
        return run_churn(churn);
    if (idle > 0)
        return run_idle(idle);
    for (int i = 0; i < n_bodies; i++)
        add_body(bodies[i]);
    if (cfg.n_bodies == 0 || (cfg.rate <= 0 && cfg.requests == 0))
        usage();
    return run_load();
}
