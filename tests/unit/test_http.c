/* Unit tests for server/http: the body budget and the listen address,
 * then the server itself, started in this process and driven by a small
 * TLS client, with failures injected through link-time wraps (see
 * server/http.mk): the clock, libc's allocator, libmicrohttpd's response
 * allocation, GnuTLS's peer verification and the review itself. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>

#include "admission/review.h"
#include "harness.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/reload.h"

#define MI (1024ull * 1024)

/* ---- Link-time wraps (server/http.mk: -Wl,--wrap=NAME). Each passes
 * through to the real function unless a test arms it. ---- */

time_t __real_time(time_t *t);
time_t __wrap_time(time_t *t);
void *__real_calloc(size_t n, size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_realloc(void *p, size_t size);
struct MHD_Response *
__real_MHD_create_response_from_buffer(size_t size, void *buffer,
                                       enum MHD_ResponseMemoryMode mode);
struct MHD_Response *
__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
                                       enum MHD_ResponseMemoryMode mode);
int __real_gnutls_certificate_verify_peers(gnutls_session_t session,
                                           gnutls_typed_vdata_st *data,
                                           unsigned int elements,
                                           unsigned int *status);
int __wrap_gnutls_certificate_verify_peers(gnutls_session_t session,
                                           gnutls_typed_vdata_st *data,
                                           unsigned int elements,
                                           unsigned int *status);
int __real_review_handle(const char *body, size_t len, const struct policy *pol,
                         const struct mutate_options *opt,
                         struct review_outcome *out);
int __wrap_review_handle(const char *body, size_t len, const struct policy *pol,
                         const struct mutate_options *opt,
                         struct review_outcome *out);
int __real_review_handle_padded(const char *body, size_t len,
                                const struct policy *pol,
                                const struct mutate_options *opt,
                                struct review_outcome *out);
int __wrap_review_handle_padded(const char *body, size_t len,
                                const struct policy *pol,
                                const struct mutate_options *opt,
                                struct review_outcome *out);

static atomic_llong fake_time;        /* 0 = the real clock */
static atomic_int fail_callocs;       /* the next N callocs fail */
static atomic_int fail_reallocs;      /* the next N reallocs fail */
static atomic_size_t fail_realloc_at; /* reallocs of this size or more fail */
static atomic_int fail_responses;     /* the next N responses cannot be made */
static atomic_int verify_error;       /* verify_peers returns this, ... */
static atomic_uint verify_status;     /* ... with these status bits */
static atomic_bool hold_review;       /* the next review waits for release */
static pthread_mutex_t hold_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hold_cond = PTHREAD_COND_INITIALIZER;
static bool held, released;

time_t
__wrap_time(time_t *t)
{
    long long v = atomic_load(&fake_time);

    if (v == 0)
        return __real_time(t);
    if (t != NULL)
        *t = (time_t)v;
    return (time_t)v;
}

/* Takes one from *n when it is above zero: true when this call fails. */
static bool
take_one(atomic_int *n)
{
    int v = atomic_load(n);

    while (v > 0)
        if (atomic_compare_exchange_weak(n, &v, v - 1))
            return true;
    return false;
}

void *
__wrap_calloc(size_t n, size_t size)
{
    if (take_one(&fail_callocs))
        return NULL;
    return __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t size)
{
    size_t at = atomic_load(&fail_realloc_at);

    if (take_one(&fail_reallocs) || (at > 0 && size >= at))
        return NULL;
    return __real_realloc(p, size);
}

struct MHD_Response *
__wrap_MHD_create_response_from_buffer(size_t size, void *buffer,
                                       enum MHD_ResponseMemoryMode mode)
{
    if (take_one(&fail_responses))
        return NULL;
    return __real_MHD_create_response_from_buffer(size, buffer, mode);
}

int
__wrap_gnutls_certificate_verify_peers(gnutls_session_t session,
                                       gnutls_typed_vdata_st *data,
                                       unsigned int elements,
                                       unsigned int *status)
{
    int e = atomic_load(&verify_error);

    if (e != 0) {
        *status = atomic_load(&verify_status);
        return e;
    }
    return __real_gnutls_certificate_verify_peers(session, data, elements,
                                                  status);
}

/* The next review waits here while hold_review is set. */
static void
review_hold(void)
{
    if (atomic_exchange(&hold_review, false)) {
        pthread_mutex_lock(&hold_lock);
        held = true;
        pthread_cond_broadcast(&hold_cond);
        while (!released)
            pthread_cond_wait(&hold_cond, &hold_lock);
        pthread_mutex_unlock(&hold_lock);
    }
}

/* The server calls review_handle_padded(), and review_handle() when the
 * body's padding found no room: both wait alike. */
int
__wrap_review_handle(const char *body, size_t len, const struct policy *pol,
                     const struct mutate_options *opt,
                     struct review_outcome *out)
{
    review_hold();
    return __real_review_handle(body, len, pol, opt, out);
}

int
__wrap_review_handle_padded(const char *body, size_t len,
                            const struct policy *pol,
                            const struct mutate_options *opt,
                            struct review_outcome *out)
{
    review_hold();
    return __real_review_handle_padded(body, len, pol, opt, out);
}

/* ---- The server's files, and a TLS client. ---- */

static char dir[] = "/tmp/ncclguard-http-XXXXXX";
static char policy_path[256], cert_path[256], key_path[256];
static char *cert_pem; /* the serving certificate, also the client's */

static void
write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "w");

    if (f == NULL)
        abort();
    fwrite(data, 1, len, f);
    fclose(f);
}

/* A self-signed P-256 pair valid for a day, without an extended key
 * usage: it serves, and it is also a client certificate that verifies
 * against itself (RFC 5280 section 4.2.1.12: no EKU, any purpose). */
static void
write_pair(void)
{
    gnutls_x509_privkey_t key;
    gnutls_x509_crt_t crt;
    gnutls_datum_t c = {NULL, 0}, k = {NULL, 0};
    unsigned char serial[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    time_t now = time(NULL);

    gnutls_x509_privkey_init(&key);
    gnutls_x509_privkey_generate(
        key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1),
        0);
    gnutls_x509_crt_init(&crt);
    gnutls_x509_crt_set_version(crt, 3);
    gnutls_x509_crt_set_serial(crt, serial, sizeof(serial));
    gnutls_x509_crt_set_activation_time(crt, now - 60);
    gnutls_x509_crt_set_expiration_time(crt, now + 86400);
    gnutls_x509_crt_set_dn(crt, "CN=http.test", NULL);
    gnutls_x509_crt_set_basic_constraints(crt, 1, -1);
    gnutls_x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE |
                                           GNUTLS_KEY_KEY_CERT_SIGN);
    gnutls_x509_crt_set_key(crt, key);
    gnutls_x509_crt_sign2(crt, crt, key, GNUTLS_DIG_SHA256, 0);
    gnutls_x509_crt_export2(crt, GNUTLS_X509_FMT_PEM, &c);
    gnutls_x509_privkey_export2(key, GNUTLS_X509_FMT_PEM, &k);
    write_file(key_path, k.data, k.size);
    write_file(cert_path, c.data, c.size);
    cert_pem = malloc(c.size + 1);
    if (cert_pem == NULL)
        abort();
    memcpy(cert_pem, c.data, c.size);
    cert_pem[c.size] = '\0';
    gnutls_free(c.data);
    gnutls_free(k.data);
    gnutls_x509_crt_deinit(crt);
    gnutls_x509_privkey_deinit(key);
}

/* The value of a metric line (name with its labels) in a fresh scrape. */
static long long
metric(const char *line)
{
    struct metrics_gauges g = {0};
    size_t len = 0;
    char *text = metrics_render(&g, &len), *p;
    long long v = -1;
    size_t n = strlen(line);

    for (p = text; p != NULL && *p != '\0'; p = strchr(p, '\n'), p += p != NULL)
        if (strncmp(p, line, n) == 0 && p[n] == ' ') {
            v = atoll(p + n + 1);
            break;
        }
    free(text);
    return v;
}

#define POLICY "apiVersion: ncclguard.io/v1alpha1\nkind: Policy\n"

#define SHED_METRIC "ncclguard_connections_cut_total{reason=\"shed\"}"

/* A TCP connection to the server, from src when not NULL, with 5 s
 * receive and send timeouts (a blocking socket then fails with EAGAIN,
 * which GnuTLS returns as GNUTLS_E_AGAIN: the client takes it as the
 * end); -1 on failure. */
static int
tcp_to(const struct sockaddr_storage *to, socklen_t to_len,
       const struct sockaddr_storage *src, socklen_t src_len)
{
    struct timeval tv = {5, 0};
    int fd = socket(to->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if ((src != NULL && bind(fd, (const struct sockaddr *)src, src_len) != 0) ||
        connect(fd, (const struct sockaddr *)to, to_len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static struct sockaddr_storage
loopback4(uint16_t port)
{
    struct sockaddr_storage ss;
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;

    memset(&ss, 0, sizeof(ss));
    a->sin_family = AF_INET;
    a->sin_port = htons(port);
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ss;
}

struct client {
    int fd;
    gnutls_session_t tls;
    gnutls_certificate_credentials_t cred;
};

/* A TLS session over fd (the server's certificate is not checked: the
 * client is the test); with_cert presents the pair as client
 * certificate. Returns 0, or -1 when the handshake fails. */
static int
client_start(struct client *c, int fd, bool with_cert)
{
    int rc;

    memset(c, 0, sizeof(*c));
    c->fd = fd;
    if (fd < 0)
        return -1;
    gnutls_certificate_allocate_credentials(&c->cred);
    if (with_cert)
        gnutls_certificate_set_x509_key_file(c->cred, cert_path, key_path,
                                             GNUTLS_X509_FMT_PEM);
    gnutls_init(&c->tls, GNUTLS_CLIENT);
    gnutls_set_default_priority(c->tls);
    gnutls_credentials_set(c->tls, GNUTLS_CRD_CERTIFICATE, c->cred);
    gnutls_transport_set_int(c->tls, fd);
    gnutls_handshake_set_timeout(c->tls, 5000);
    do
        rc = gnutls_handshake(c->tls);
    while (rc == GNUTLS_E_INTERRUPTED);
    return rc < 0 ? -1 : 0;
}

static void
client_end(struct client *c)
{
    if (c->tls != NULL)
        gnutls_deinit(c->tls);
    if (c->cred != NULL)
        gnutls_certificate_free_credentials(c->cred);
    if (c->fd >= 0)
        close(c->fd);
    memset(c, 0, sizeof(*c));
    c->fd = -1;
}

/* Sends one request. Returns 0, or -1. */
static int
client_send(struct client *c, const char *method, const char *path,
            const char *body)
{
    size_t cap = 512 + (body != NULL ? strlen(body) : 0);
    char *req = malloc(cap);
    int n, rc;

    if (req == NULL)
        abort();
    if (body != NULL)
        n = snprintf(req, cap,
                     "%s %s HTTP/1.1\r\nHost: t\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     method, path, strlen(body), body);
    else
        n = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: t\r\n\r\n", method,
                     path);
    if (n < 0 || (size_t)n >= cap)
        abort();
    rc = gnutls_record_send(c->tls, req, (size_t)n) == n ? 0 : -1;
    free(req);
    return rc;
}

/* Sends n bytes of text as they are, in as many records as it takes.
 * Returns 0, or -1. */
static int
client_write(struct client *c, const char *text, size_t n)
{
    while (n > 0) {
        ssize_t w = gnutls_record_send(c->tls, text, n);

        if (w == GNUTLS_E_INTERRUPTED)
            continue;
        if (w <= 0)
            return -1;
        text += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Sends the head of a review of len bytes, without its body. */
static int
client_send_head(struct client *c, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "POST /mutate HTTP/1.1\r\nHost: t\r\n"
                     "Content-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     len);

    return client_write(c, head, (size_t)n);
}

/* Reads one answer: its status, and its body into text (NUL-terminated,
 * cut to n bytes); -1 when the connection ends or fails first. */
static int
client_read(struct client *c, char *text, size_t n)
{
    static _Thread_local char buf[65536];
    size_t have = 0, want = 0;
    char *end = NULL;
    int status;

    for (;;) {
        ssize_t r;

        if (end != NULL && have >= want)
            break;
        if (have == sizeof(buf) - 1)
            return -1;
        r = gnutls_record_recv(c->tls, buf + have, sizeof(buf) - 1 - have);
        if (r == GNUTLS_E_INTERRUPTED)
            continue;
        if (r <= 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) {
            const char *cl = strcasestr(buf, "\r\nContent-Length:");
            want = (size_t)(end + 4 - buf) +
                   (cl != NULL && cl < end ? (size_t)atol(cl + 17) : 0);
        }
    }
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return -1;
    if (text != NULL && n > 0)
        snprintf(text, n, "%s", end + 4);
    return status;
}

/* One request on a new connection to port: the status, or -1. */
static int
fetch(uint16_t port, const char *method, const char *path, const char *body,
      bool with_cert, char *text, size_t n)
{
    struct sockaddr_storage to = loopback4(port);
    struct client c;
    int status = -1;

    if (client_start(&c, tcp_to(&to, sizeof(struct sockaddr_in), NULL, 0),
                     with_cert) == 0 &&
        client_send(&c, method, path, body) == 0)
        status = client_read(&c, text, n);
    client_end(&c);
    return status;
}

static struct reload *the_reload;

static struct http_server *
start(struct http_config *cfg)
{
    struct ng_error e;
    struct http_server *s;

    if (cfg->addr_len == 0 && http_listen_parse("127.0.0.1:0", cfg, &e) != 0)
        abort();
    if (cfg->max_body == 0)
        cfg->max_body = 1024 * 1024;
    ng_error_clear(&e);
    s = http_server_start(cfg, the_reload, &e);
    if (s == NULL)
        fprintf(stderr, "http_server_start: %s\n", e.msg);
    return s;
}

/* Waits up to ms for the counter at line to pass since; its value. */
static long long
wait_metric(const char *line, long long since, int ms)
{
    long long v = metric(line);

    for (int i = 0; i < ms / 10 && v <= since; i++) {
        usleep(10000);
        v = metric(line);
    }
    return v;
}

/* Whether the peer closed fd within 3 s (a read sees the end or a reset). */
static bool
closed_by_peer(int fd)
{
    char b;
    struct timeval tv = {3, 0};

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return read(fd, &b, 1) <= 0 && errno != EAGAIN && errno != EWOULDBLOCK;
}

/* /readyz turns 503 at the second the serving certificate's notAfter is
 * reached (RFC 5280 section 4.1.2.5: the validity period includes
 * notAfter, so readiness must drop no later than that second), 200 the
 * second before. */
static void
test_readyz_expiry(void)
{
    struct http_config cfg = {0};
    struct http_server *s = start(&cfg);
    struct cert_snap *cs;
    int64_t not_after;
    char text[256];

    CHECK(s != NULL);
    if (s == NULL)
        return;
    cs = reload_cert_acquire(the_reload);
    not_after = tlspair_not_after(cs->pair);
    reload_cert_release(cs);
    atomic_store(&fake_time, (long long)not_after - 1);
    CHECK_INT(fetch(http_server_port(s), "GET", "/readyz", NULL, false, text,
                    sizeof(text)),
              200);
    atomic_store(&fake_time, (long long)not_after);
    CHECK_INT(fetch(http_server_port(s), "GET", "/readyz", NULL, false, text,
                    sizeof(text)),
              503);
    CHECK_STR(text, "serving certificate expired\n");
    atomic_store(&fake_time, 0);
    http_server_stop(s);
}

/* Out of descriptors: the start fails and says it could not open a
 * socket, rather than going on to bind descriptor -1. */
static void
test_no_socket(void)
{
    struct http_config cfg = {0};
    struct ng_error e;
    struct rlimit old, none;
    struct http_server *s;

    if (http_listen_parse("127.0.0.1:0", &cfg, &e) != 0)
        abort();
    cfg.max_body = 1024;
    getrlimit(RLIMIT_NOFILE, &old);
    none = old;
    none.rlim_cur = 0; /* no descriptor can be opened: EMFILE */
    setrlimit(RLIMIT_NOFILE, &none);
    ng_error_clear(&e);
    s = http_server_start(&cfg, the_reload, &e);
    setrlimit(RLIMIT_NOFILE, &old);
    CHECK(s == NULL);
    http_server_stop(s);
    CHECK(strstr(e.msg, "cannot open a socket for 127.0.0.1:0") != NULL);
    if (strstr(e.msg, "cannot open a socket") == NULL)
        fprintf(stderr, "no socket: %s\n", e.msg);
}

/* Failures the server must survive, each injected once: libmicrohttpd
 * out of memory for a response, a connection whose state cannot be
 * allocated (its certificate is then parked, and the list of parked ones
 * cannot grow either), a body buffer that cannot grow, and GnuTLS
 * failing a verification with an error code and no status bits. */
static void
test_failures(void)
{
    struct http_config cfg = {0};
    struct http_server *s;
    char text[256];
    char big[2048];
    uint16_t port;

    /* A response libmicrohttpd cannot allocate: the connection closes
     * unanswered, and the static text is not freed. */
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    port = http_server_port(s);
    atomic_store(&fail_responses, 1);
    CHECK_INT(fetch(port, "GET", "/healthz", NULL, false, NULL, 0), -1);
    CHECK_INT(atomic_load(&fail_responses), 0);
    CHECK_INT(fetch(port, "GET", "/healthz", NULL, false, text, sizeof(text)),
              200);

    /* The connection's state cannot be allocated, and then neither can
     * the list of parked certificates: the request is refused (the
     * connection closes) and the server goes on. */
    atomic_store(&fail_callocs, 1);
    atomic_store(&fail_reallocs, 1);
    CHECK_INT(fetch(port, "GET", "/healthz", NULL, false, NULL, 0), -1);
    CHECK_INT(atomic_load(&fail_callocs), 0);
    CHECK_INT(atomic_load(&fail_reallocs), 0);
    atomic_store(&fail_callocs, 0);
    atomic_store(&fail_reallocs, 0);
    CHECK_INT(fetch(port, "GET", "/healthz", NULL, false, text, sizeof(text)),
              200);

    /* A body buffer that cannot grow: 500, not a review of what came. */
    memset(big, ' ', sizeof(big) - 3);
    big[0] = '{';
    big[sizeof(big) - 3] = '}';
    big[sizeof(big) - 2] = '\0';
    atomic_store(&fail_realloc_at, 1000);
    CHECK_INT(fetch(port, "POST", "/mutate", big, false, text, sizeof(text)),
              500);
    CHECK_STR(text, "out of memory\n");
    atomic_store(&fail_realloc_at, 0);
    http_server_stop(s);

    /* With --client-ca: GnuTLS failing the verification with an error and
     * no status bits is not trust. The same certificate verified for
     * real gets its review (400 for a review that is not one). */
    memset(&cfg, 0, sizeof(cfg));
    cfg.client_ca_pem = cert_pem;
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    port = http_server_port(s);
    CHECK_INT(fetch(port, "POST", "/mutate", "{}", true, text, sizeof(text)),
              400);
    /* GnuTLS saying it found no certificate is "required", whatever
     * else it reports (here a peer certificate list as well). */
    atomic_store(&verify_error, GNUTLS_E_NO_CERTIFICATE_FOUND);
    CHECK_INT(fetch(port, "POST", "/mutate", "{}", true, text, sizeof(text)),
              403);
    CHECK_STR(text, "client certificate required\n");
    atomic_store(&verify_error, GNUTLS_E_CERTIFICATE_ERROR);
    CHECK_INT(fetch(port, "POST", "/mutate", "{}", true, text, sizeof(text)),
              403);
    CHECK_STR(text, "client certificate not trusted\n");
    /* GnuTLS defines the status bits only when the call succeeds: with an
     * error, a purpose bit left there is not read as a purpose mismatch. */
    atomic_store(&verify_status, GNUTLS_CERT_PURPOSE_MISMATCH);
    CHECK_INT(fetch(port, "POST", "/mutate", "{}", true, text, sizeof(text)),
              403);
    CHECK_STR(text, "client certificate not trusted\n");
    atomic_store(&verify_status, 0);
    atomic_store(&verify_error, 0);

    /* A body of one byte is a body: its review says what it is. */
    CHECK_INT(fetch(port, "POST", "/mutate", "1", true, text, sizeof(text)),
              400);
    CHECK(strstr(text, "empty") == NULL);
    if (strstr(text, "empty") != NULL)
        fprintf(stderr, "one-byte body: %s", text);
    http_server_stop(s);
}

/* Microseconds since t0 (CLOCK_MONOTONIC). */
static long long
micros_since_ts(const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)(t.tv_sec - t0->tv_sec) * 1000000 +
           (t.tv_nsec - t0->tv_nsec) / 1000;
}

/* A gauge of the server's own /metrics, or -1. */
static long long
server_gauge(uint16_t port, const char *name)
{
    static char text[60000];
    size_t n = strlen(name);

    if (fetch(port, "GET", "/metrics", NULL, false, text, sizeof(text)) != 200)
        return -1;
    for (char *p = text; p != NULL && *p != '\0';
         p = strchr(p, '\n'), p += p != NULL)
        if (strncmp(p, name, n) == 0 && p[n] == ' ')
            return atoll(p + n + 1);
    return -1;
}

/* A TLS connection to port on 127.0.0.1, or one with fd -1. */
static int
client_open(struct client *c, uint16_t port)
{
    struct sockaddr_storage to = loopback4(port);

    return client_start(c, tcp_to(&to, sizeof(struct sockaddr_in), NULL, 0),
                        false);
}

/* A connection on descriptor 0 (stdin closed after the start, so accept()
 * hands out 0, the lowest free descriptor: POSIX, open() and accept()) is
 * cut at its deadline like any other. */
static void
test_fd0_cut(void)
{
    struct http_config cfg = {0};
    struct http_server *s;
    struct sockaddr_storage to;
    struct timeval tv = {5, 0};
    char link[64] = "";
    int fd, saved;

    cfg.header_timeout = 1;
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    to = loopback4(http_server_port(s));
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    saved = fcntl(0, F_DUPFD_CLOEXEC, 3);
    CHECK(fd > 0 && saved > 0);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    close(0);
    CHECK_INT(connect(fd, (struct sockaddr *)&to, sizeof(struct sockaddr_in)),
              0);
    /* The server's end took descriptor 0 once accept() returned. */
    for (int i = 0; i < 100; i++) {
        ssize_t n = readlink("/proc/self/fd/0", link, sizeof(link) - 1);

        link[n > 0 ? n : 0] = '\0';
        if (strncmp(link, "socket:", 7) == 0)
            break;
        usleep(10000);
    }
    CHECK(strncmp(link, "socket:", 7) == 0);
    CHECK(closed_by_peer(fd));
    close(fd);
    /* And leaves the server's count (only /metrics' own is open then). */
    {
        struct timespec t0;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (server_gauge(http_server_port(s),
                            "ncclguard_connections_open") != 1 &&
               micros_since_ts(&t0) < 3000000)
            usleep(10000);
        CHECK_INT(
            server_gauge(http_server_port(s), "ncclguard_connections_open"), 1);
    }
    http_server_stop(s);
    if (saved > 0) {
        dup2(saved, 0);
        close(saved);
    }
}

/* The body budget's shares (1 MiB here): a buffer over 256 KiB may use
 * seven eighths of it, so a 1 MiB body is refused at once even with
 * nothing else held; and a buffer reserved within its share keeps it
 * while its body arrives, though small bodies then fill the budget past
 * seven eighths. */
static void
test_budget_shares(void)
{
    struct http_config cfg = {0};
    struct http_server *s;
    struct client a, small[3];
    char text[256];
    uint16_t port;
    size_t want;
    char *body;

    cfg.max_body = 1024 * 1024;
    cfg.body_budget = 1024 * 1024;
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    port = http_server_port(s);

    /* 1 MiB + the padding and the NUL, past 896 KiB: 503 on the head
     * alone. */
    CHECK_INT(client_open(&a, port), 0);
    CHECK_INT(client_send_head(&a, 1024 * 1024), 0);
    CHECK_INT(client_read(&a, text, sizeof(text)), 503);
    CHECK(strstr(text, "memory budget") != NULL);
    client_end(&a);

    /* 300 KiB reserved (within 896 KiB), then three of 200 KiB: 900 KiB
     * held, past seven eighths but within the whole. The 300 KiB body
     * still arrives and gets its review. */
    CHECK_INT(client_open(&a, port), 0);
    CHECK_INT(client_send_head(&a, 300 * 1024), 0);
    for (int i = 0; i < 3; i++) {
        CHECK_INT(client_open(&small[i], port), 0);
        CHECK_INT(client_send_head(&small[i], 200 * 1024), 0);
    }
    /* Each buffer: the body, the decoder's padding and the NUL. */
    want = 300 * 1024 + REVIEW_BODY_PADDING + 1 +
           3 * (200 * 1024 + REVIEW_BODY_PADDING + 1);
    {
        struct timespec t0;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (server_gauge(port, "ncclguard_body_buffer_bytes") !=
                   (long long)want &&
               micros_since_ts(&t0) < 3000000)
            usleep(10000);
    }
    CHECK_INT(server_gauge(port, "ncclguard_body_buffer_bytes"),
              (long long)want);
    body = malloc(300 * 1024);
    if (body == NULL)
        abort();
    memset(body, ' ', 300 * 1024);
    body[0] = '{';
    body[300 * 1024 - 1] = '}';
    CHECK_INT(client_write(&a, body, 300 * 1024), 0);
    CHECK_INT(client_read(&a, text, sizeof(text)), 400);
    free(body);
    client_end(&a);
    for (int i = 0; i < 3; i++)
        client_end(&small[i]);
    http_server_stop(s);
}

/* A connection's address stops counting once it closes: an address whose
 * two connections came and went counts only the one it opens next, and a
 * flood of two from another address is shed before it. 8 connections at
 * most (shedding past 6), from 127.0.0.2 to .7 (all of 127.0.0.0/8 is the
 * loopback's). */
static void
test_peer_counts_drop(void)
{
    struct http_config cfg = {0};
    struct http_server *s;
    struct sockaddr_storage to, from[6];
    struct timespec t0;
    struct client x;
    int old[2], y[2], z[4], hs;
    long long shed0;
    uint16_t port;
    char text[64];

    cfg.max_connections = 8;
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    port = http_server_port(s);
    to = loopback4(port);
    for (int i = 0; i < 6; i++) {
        from[i] = loopback4(0);
        ((struct sockaddr_in *)&from[i])->sin_addr.s_addr =
            htonl(INADDR_LOOPBACK + 1 + (uint32_t)i);
    }
    /* Two from 127.0.0.2 come and go; then only /metrics' own is open. */
    for (int i = 0; i < 2; i++)
        old[i] = tcp_to(&to, sizeof(struct sockaddr_in), &from[0],
                        sizeof(struct sockaddr_in));
    usleep(50000);
    for (int i = 0; i < 2; i++)
        if (old[i] >= 0)
            close(old[i]);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (server_gauge(port, "ncclguard_connections_open") != 1 &&
           micros_since_ts(&t0) < 3000000)
        usleep(10000);
    CHECK_INT(server_gauge(port, "ncclguard_connections_open"), 1);
    usleep(50000);
    shed0 = metric(SHED_METRIC);
    x.fd = tcp_to(&to, sizeof(struct sockaddr_in), &from[0],
                  sizeof(struct sockaddr_in));
    CHECK(x.fd >= 0);
    usleep(30000);
    for (int i = 0; i < 2; i++) {
        y[i] = tcp_to(&to, sizeof(struct sockaddr_in), &from[1],
                      sizeof(struct sockaddr_in));
        usleep(30000);
    }
    for (int i = 0; i < 4; i++) {
        z[i] = tcp_to(&to, sizeof(struct sockaddr_in), &from[2 + i],
                      sizeof(struct sockaddr_in));
        usleep(30000);
    }
    CHECK_INT(wait_metric(SHED_METRIC, shed0, 3000), shed0 + 1);
    CHECK(y[0] >= 0 && closed_by_peer(y[0]));
    hs = client_start(&x, x.fd, false);
    CHECK_INT(hs, 0);
    CHECK_INT(hs == 0 && client_send(&x, "GET", "/healthz", NULL) == 0
                  ? client_read(&x, text, sizeof(text))
                  : -1,
              200);
    client_end(&x);
    for (int i = 0; i < 2; i++)
        if (y[i] >= 0)
            close(y[i]);
    for (int i = 0; i < 4; i++)
        if (z[i] >= 0)
            close(z[i]);
    http_server_stop(s);
}

/* A body announced past --max-body is drained up to 16 MiB over it
 * (DRAIN_LIMIT) and answered at once past that; while drained, its
 * deadline counts the cap, not what it announced. 1 KiB at most here,
 * 1 KiB/s after a 1 s grace: cut after 2 s. */
static void
test_oversized_heads(void)
{
    struct http_config cfg = {0};
    struct http_server *s;
    struct client c;
    struct timespec t0;
    struct timeval tv = {1, 0};
    const size_t drain = 16u * 1024 * 1024;
    char text[256];
    uint16_t port;

    cfg.max_body = 1024;
    cfg.header_timeout = 1;
    cfg.min_body_rate = 1024;
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    port = http_server_port(s);

    /* Past the drain limit by one byte: 413 on the head. */
    CHECK_INT(client_open(&c, port), 0);
    CHECK_INT(client_send_head(&c, 1024 + drain + 1), 0);
    CHECK_INT(client_read(&c, text, sizeof(text)), 413);
    client_end(&c);

    /* At the drain limit: no answer on the head (the body would be read
     * and dropped first), then the cut at the cap's deadline. */
    CHECK_INT(client_open(&c, port), 0);
    CHECK_INT(client_send_head(&c, 1024 + drain), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    CHECK_INT(client_read(&c, text, sizeof(text)), -1);
    tv.tv_sec = 6;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    CHECK_INT(client_read(&c, text, sizeof(text)), -1);
    /* Cut by the deadline (2 s), long before the 6 s receive timeout. */
    CHECK(micros_since_ts(&t0) < 5000000);
    if (micros_since_ts(&t0) >= 5000000)
        fprintf(stderr, "drained head: open for %lld us\n",
                micros_since_ts(&t0));
    client_end(&c);
    http_server_stop(s);
}

/* Two Content-Length fields whose second is not a plain decimal number
 * (libmicrohttpd reads the first only): 400 with the framing's own words,
 * RFC 9112 section 6.3 item 5, not a review of the body. */
static void
test_two_lengths(void)
{
    static const char *const second[] = {"2x", "-2", "+2"};
    struct http_config cfg = {0};
    struct http_server *s = start(&cfg);
    char text[256];

    CHECK(s != NULL);
    if (s == NULL)
        return;
    for (size_t i = 0; i < sizeof(second) / sizeof(second[0]); i++) {
        struct client c;
        char req[256];
        int n = snprintf(req, sizeof(req),
                         "POST /mutate HTTP/1.1\r\nHost: t\r\n"
                         "Content-Type: application/json\r\n"
                         "Content-Length: 2\r\nContent-Length: %s\r\n\r\n{}",
                         second[i]);

        CHECK_INT(client_open(&c, http_server_port(s)), 0);
        CHECK_INT(client_write(&c, req, (size_t)n), 0);
        CHECK_INT(client_read(&c, text, sizeof(text)), 400);
        CHECK_STR(text,
                  "bad request: Content-Length is not a decimal number\n");
        client_end(&c);
    }
    http_server_stop(s);
}

/* At the connection limit, a review being answered on a kept-alive
 * connection is never shed: the newcomer is. With 2 connections at most
 * shedding starts past 1; the newcomer arrives while the review is held
 * in the admission (a second worker accepts it), at a moment when no
 * other connection is a first request or idle. */
static void
test_busy_not_shed(void)
{
    struct http_config cfg = {0};
    struct http_server *s;
    struct sockaddr_storage to;
    struct client a;
    struct timespec until;
    long long shed0;
    int b, status;
    char text[256];

    cfg.max_connections = 2;
    cfg.threads = 2;
    s = start(&cfg);
    CHECK(s != NULL);
    if (s == NULL)
        return;
    to = loopback4(http_server_port(s));
    CHECK_INT(client_start(&a, tcp_to(&to, sizeof(struct sockaddr_in), NULL, 0),
                           false),
              0);
    CHECK_INT(client_send(&a, "GET", "/healthz", NULL), 0);
    CHECK_INT(client_read(&a, text, sizeof(text)), 200);
    atomic_store(&hold_review, true);
    CHECK_INT(client_send(&a, "POST", "/mutate", "{}"), 0);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&hold_lock);
    while (!held)
        if (pthread_cond_timedwait(&hold_cond, &hold_lock, &until) != 0)
            break;
    CHECK(held);
    pthread_mutex_unlock(&hold_lock);
    shed0 = metric(SHED_METRIC);
    b = tcp_to(&to, sizeof(struct sockaddr_in), NULL, 0);
    CHECK(b >= 0);
    CHECK_INT(wait_metric(SHED_METRIC, shed0, 3000), shed0 + 1);
    pthread_mutex_lock(&hold_lock);
    released = true;
    pthread_cond_broadcast(&hold_cond);
    pthread_mutex_unlock(&hold_lock);
    status = client_read(&a, text, sizeof(text));
    if (status != 400)
        fprintf(stderr, "held review: %d, want its 400 (the review of {})\n",
                status);
    CHECK_INT(status, 400);
    CHECK(b >= 0 && closed_by_peer(b));
    if (b >= 0)
        close(b);
    client_end(&a);
    http_server_stop(s);
}

/* IPv6 clients are told apart by their address: one client at fd00::2
 * keeps its connection while six from fd00::3 pass the limit (8
 * connections, shedding past 6), and the flood's oldest is shed, not the
 * lone client that came first. Needs a second IPv6 address, so it runs
 * in a child in a network namespace of its own (lo has only ::1
 * otherwise); returns the child's exit status, or 0 after a SKIP line. */
static int
test_ipv6_peers(void)
{
    pid_t pid;
    int st;

    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        struct http_config cfg = {0};
        struct http_server *s;
        struct sockaddr_storage to, from2, from3;
        struct sockaddr_in6 *a;
        struct ng_error e;
        struct client x;
        int y[6];
        char text[64];

        /* The child's status counts its own checks only. */
        harness_failed = 0;
        if (unshare(CLONE_NEWNET) != 0) {
            printf("SKIP http: IPv6 clients told apart (no network namespace: "
                   "unshare: %s)\n",
                   strerror(errno));
            _exit(0);
        }
        if (system("ip link set lo up && ip -6 addr add fd00::2/128 dev lo "
                   "nodad && ip -6 addr add fd00::3/128 dev lo nodad") != 0) {
            printf("SKIP http: IPv6 clients told apart (ip cannot add "
                   "fd00::2 and fd00::3 to lo in a new network namespace)\n");
            _exit(0);
        }
        ng_error_clear(&e);
        the_reload =
            reload_new(&(struct reload_config){.policy_path = policy_path,
                                               .cert_path = cert_path,
                                               .key_path = key_path},
                       &e);
        if (the_reload == NULL || http_listen_parse("[::]:0", &cfg, &e) != 0)
            _exit(2);
        cfg.max_connections = 8;
        s = start(&cfg);
        if (s == NULL)
            _exit(3);
        memset(&to, 0, sizeof(to));
        a = (struct sockaddr_in6 *)&to;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(http_server_port(s));
        a->sin6_addr = in6addr_loopback;
        from2 = from3 = to;
        ((struct sockaddr_in6 *)&from2)->sin6_port = 0;
        ((struct sockaddr_in6 *)&from3)->sin6_port = 0;
        inet_pton(AF_INET6, "fd00::2",
                  &((struct sockaddr_in6 *)&from2)->sin6_addr);
        inet_pton(AF_INET6, "fd00::3",
                  &((struct sockaddr_in6 *)&from3)->sin6_addr);
        x.fd = tcp_to(&to, sizeof(*a), &from2, sizeof(*a));
        CHECK(x.fd >= 0);
        usleep(50000);
        for (int i = 0; i < 6; i++) {
            y[i] = tcp_to(&to, sizeof(*a), &from3, sizeof(*a));
            CHECK(y[i] >= 0);
            usleep(20000);
        }
        CHECK_INT(wait_metric(SHED_METRIC, 0, 3000), 1);
        CHECK(y[0] >= 0 && closed_by_peer(y[0]));
        /* The lone client still gets its answer. */
        {
            int fd = x.fd;
            int hs = client_start(&x, fd, false);

            CHECK_INT(hs, 0);
            CHECK_INT(hs == 0 && client_send(&x, "GET", "/healthz", NULL) == 0
                          ? client_read(&x, text, sizeof(text))
                          : -1,
                      200);
        }
        client_end(&x);
        for (int i = 0; i < 6; i++)
            if (y[i] >= 0)
                close(y[i]);
        http_server_stop(s);
        fflush(stdout);
        _exit(harness_failed != 0 ? 1 : 0);
    }
    if (waitpid(pid, &st, 0) != pid)
        return 1;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "IPv6 child: status %d\n", st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
main(void)
{
    /* The body budget: half the limit less four bodies per worker, never
     * below one body; 64 bodies without a limit. */
    static const struct {
        uint64_t limit;
        unsigned int threads;
        size_t max_body;
        size_t want;
    } budgets[] = {
        {256 * MI, 1, 4 * MI, 112 * MI}, /* the Deployment's figure */
        {256 * MI, 0, 4 * MI, 112 * MI}, /* 0 threads counts as one */
        {256 * MI, 4, 4 * MI, 64 * MI},
        {1024 * MI, 8, 4 * MI, 384 * MI},
        {64 * MI, 16, 4 * MI, 4 * MI}, /* floor: one body */
        {0, 1, 4 * MI, 256 * MI},      /* no limit known */
        {256 * MI, 1, 64 * 1024, 128 * MI - 256 * 1024},
    };
    struct http_config cfg;
    struct ng_error e;

    for (size_t i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++)
        CHECK_INT(http_body_budget(budgets[i].limit, budgets[i].threads,
                                   budgets[i].max_body),
                  budgets[i].want);

    CHECK_INT(http_listen_parse("127.0.0.1:8443", &cfg, &e), 0);
    CHECK_INT(ntohs(((struct sockaddr_in *)&cfg.addr)->sin_port), 8443);
    CHECK_INT(http_listen_parse("[::1]:0", &cfg, &e), 0);
    CHECK_INT(cfg.addr.ss_family, AF_INET6);
    CHECK_INT(http_listen_parse("127.0.0.1:65536", &cfg, &e), -1);
    CHECK(strstr(e.msg, "0-65535") != NULL);
    CHECK_INT(http_listen_parse("nohost:1", &cfg, &e), -1);
    /* Each form the listen address takes, and the edges of the port. */
    {
        static const struct {
            const char *s;
            int rc, family;
            unsigned port;
            const char *addr; /* what inet_ntop gives, or NULL */
        } cases[] = {
            {":8443", 0, AF_INET, 8443, "0.0.0.0"},
            {"0.0.0.0:1", 0, AF_INET, 1, "0.0.0.0"},
            {"localhost:2", 0, AF_INET, 2, "127.0.0.1"},
            {"10.0.0.1:65535", 0, AF_INET, 65535, "10.0.0.1"},
            {"[::]:3", 0, AF_INET6, 3, "::"},
            {"[fe80::1]:0", 0, AF_INET6, 0, "fe80::1"},
            {"", -1, 0, 0, NULL},
            {"8443", -1, 0, 0, NULL},
            {"127.0.0.1:", -1, 0, 0, NULL},
            {"127.0.0.1:1x", -1, 0, 0, NULL},
            {"127.0.0.1:-1", -1, 0, 0, NULL},
            {"127.0.0.1:+1", -1, 0, 0, NULL},
            {"[::1]", -1, 0, 0, NULL},
            {"[::1:8443", -1, 0, 0, NULL},
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            char text[64] = "";
            int rc = http_listen_parse(cases[i].s, &cfg, &e);

            if (rc != cases[i].rc)
                fprintf(stderr, "listen '%s': %d, want %d\n", cases[i].s, rc,
                        cases[i].rc);
            CHECK_INT(rc, cases[i].rc);
            if (rc != 0 || cases[i].rc != 0)
                continue;
            CHECK_INT(cfg.addr.ss_family, cases[i].family);
            if (cases[i].family == AF_INET) {
                struct sockaddr_in *a = (struct sockaddr_in *)&cfg.addr;

                inet_ntop(AF_INET, &a->sin_addr, text, sizeof(text));
                CHECK_INT(ntohs(a->sin_port), cases[i].port);
                CHECK_INT(cfg.addr_len, sizeof(*a));
            } else {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *)&cfg.addr;

                inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof(text));
                CHECK_INT(ntohs(a->sin6_port), cases[i].port);
                CHECK_INT(cfg.addr_len, sizeof(*a));
            }
            CHECK_STR(text, cases[i].addr);
        }
    }

    /* What each refusal says: the empty address, hosts too long for the
     * buffer (in brackets or not), and signed ports, "-0" included, which
     * strtoul() would read as 0. */
    {
        char long6[320], long4[320];
        const struct {
            const char *s, *msg;
        } says[] = {
            {"", "listen address is empty"},
            {long6, "host too long"},
            {long4, "host too long"},
            {"127.0.0.1:-0", "port must be 0-65535"},
            {"[::1]:+0", "port must be 0-65535"},
            {"127.0.0.1:99999999999999999999999", "port must be 0-65535"},
        };

        memset(long6, 'a', sizeof(long6));
        long6[0] = '[';
        snprintf(long6 + 300, sizeof(long6) - 300, "]:1");
        memset(long4, 'b', sizeof(long4));
        snprintf(long4 + 300, sizeof(long4) - 300, ":1");
        for (size_t i = 0; i < sizeof(says) / sizeof(says[0]); i++) {
            ng_error_clear(&e);
            CHECK_INT(http_listen_parse(says[i].s, &cfg, &e), -1);
            if (strstr(e.msg, says[i].msg) == NULL)
                fprintf(stderr, "listen '%.40s': '%s', want '%s'\n", says[i].s,
                        e.msg, says[i].msg);
            CHECK(strstr(e.msg, says[i].msg) != NULL);
        }
    }

    /* The server itself, in this process. */
    {
        int devnull = open("/dev/null", O_WRONLY);

        if (mkdtemp(dir) == NULL)
            return 1;
        snprintf(policy_path, sizeof(policy_path), "%s/policy.yaml", dir);
        snprintf(cert_path, sizeof(cert_path), "%s/tls.crt", dir);
        snprintf(key_path, sizeof(key_path), "%s/tls.key", dir);
        write_file(policy_path, POLICY, strlen(POLICY));
        write_pair();
        /* The server's log lines are not what is tested here. */
        if (getenv("TEST_HTTP_LOG") == NULL)
            log_output_set(devnull);
        signal(SIGPIPE, SIG_IGN);
        metrics_reset();
        /* First, before any thread: the child forks from this one. */
        CHECK_INT(test_ipv6_peers(), 0);
        ng_error_clear(&e);
        the_reload =
            reload_new(&(struct reload_config){.policy_path = policy_path,
                                               .cert_path = cert_path,
                                               .key_path = key_path},
                       &e);
        if (the_reload == NULL) {
            fprintf(stderr, "reload_new: %s\n", e.msg);
            return 1;
        }
        test_readyz_expiry();
        test_no_socket();
        test_failures();
        test_busy_not_shed();
        test_fd0_cut();
        test_budget_shares();
        test_peer_counts_drop();
        test_oversized_heads();
        test_two_lengths();
        /* the_reload is not freed: a certificate parked when its list
         * could not grow keeps its reference for good (by design), and
         * stays reachable through the reload as the pair in force. */
        unlink(policy_path);
        unlink(cert_path);
        unlink(key_path);
        rmdir(dir);
        close(devnull);
    }
    return harness_finish();
}
