/* The HTTPS front end: libmicrohttpd with GnuTLS, routes, body limits,
 * client certificates, graceful drain. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "admission/jsonmem.h"
#include "admission/review.h"
#include "base/buf.h"
#include "server/heldsend.h"
#include "server/log.h"
#include "server/metrics.h"

/* TLS 1.2 and 1.3 only; GnuTLS's NORMAL set otherwise. */
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

/* Worker thread stacks: deep enough for the bounded JSON recursion of a
 * review, far below the 8 MiB default. */
#define THREAD_STACK (1024 * 1024)

/*
 * libmicrohttpd's memory pool per connection (MHD_OPTION_CONNECTION_MEMORY_
 * LIMIT, 32 KiB by default) holds the request line and headers, the read
 * buffer the body passes through on its way to the connection's own body
 * buffer, and the response's headers. libmicrohttpd 0.9.75 zeroes the whole
 * pool when a kept-alive connection starts its next request, and the part
 * of the read buffer it gives back before answering: with 32 KiB that was
 * 48 KiB cleared per request, about 49k of the 101k instructions the
 * server spent outside review_handle() on the 4-GPU review (callgrind,
 * bench/RESULTS.md, round 3). 8 KiB takes the API server's headers (a few
 * hundred bytes) and a review of any size, which arrives in read-buffer
 * sized pieces; headers of 8 KiB or more are refused with 431, as nginx's
 * default large_client_header_buffers (8k) refuses a longer line.
 */
#define CONN_POOL (8 * 1024)

/* A body buffer larger than this is freed after its request instead of
 * being kept for the connection's next one. */
#define BODY_KEEP (32 * 1024)

/*
 * An oversized body is read and dropped, up to this much, before the 413
 * goes out: closing a socket with unread data makes the kernel send a
 * reset, which can destroy the 413 before the client reads it. Past this
 * (or when the client waits for "100 Continue") the 413 goes out at once.
 */
#define DRAIN_LIMIT (16u * 1024 * 1024)

/*
 * The last eighth of the body budget is kept for buffers up to this size:
 * an AdmissionReview of a pod is a few KiB (100 KiB for a 20-container
 * pod), so held-open 4 MiB bodies that spend the rest of the budget still
 * leave room for the API server's ordinary reviews.
 */
#define SMALL_BODY (256 * 1024)

/* How often the reaper looks for connections past their deadline. */
#define REAP_PERIOD_MS 100

/* Retry-After, in seconds, on a 503 for an exhausted body budget: bodies
 * in flight finish or time out within a few seconds. */
#define BUDGET_RETRY_AFTER "1"

/*
 * Where a connection is, for its deadlines and for shedding. HEAD covers
 * the TLS handshake and the request headers, BODY the upload, BUSY the
 * admission and the answer (never cut by the server: the idle timeout
 * covers a client that stops reading).
 */
enum conn_phase { PHASE_HEAD = 0, PHASE_BODY, PHASE_BUSY };

struct route;

/* One request's state; lives inside its connection, so a request costs no
 * allocation of its own. */
struct request {
    bool active;
    bool answered;
    bool too_large;
    bool no_memory;
    bool over_budget; /* body refused: the global budget is spent */
    bool bad_framing; /* answered 400; the connection must close */
    bool head;        /* a HEAD request: the answer goes without its body */
    size_t dropped;   /* bytes of an oversized body read and thrown away */
    const struct route *route; /* NULL until request_begin() finds it */
    struct timespec t0;
    struct policy_snap *pol;
};

/* A client address, the key of the per-address connection counts. */
struct peer_key {
    uint8_t family; /* 0 = unknown */
    uint8_t addr[16];
};

/* One slot of the open-addressing table of connections per address. */
struct peer_slot {
    struct peer_key key;
    unsigned int count; /* 0 = free slot */
};

/* One connection's state, from accept to close. */
struct conn {
    struct http_server *srv;
    struct cert_snap *cert; /* pair this connection's handshake used */
    bool client_ok;         /* client certificate verified */
    /* The request body, at most max_body bytes; its whole allocation
     * (body.cap) is charged to the server's budget. */
    struct buf body;
    struct request req;

    /* In the server's list, ordered by phase_ns (a connection moves to the
     * tail when its phase starts); guarded by the server's conns_lock. */
    struct conn *prev, *next;
    int fd;
    enum conn_phase phase;
    bool kept_alive; /* a request already finished on it */
    bool cut;        /* shut down by the server; closing */
    uint64_t phase_ns;
    uint64_t deadline_ns; /* 0 = none */
    struct peer_key peer; /* the client's address */

    /* The answer's header record held back to go out with its body's
     * first record in one sendmsg (tls_push()); the connection's thread
     * alone touches it. */
    gnutls_session_t tls; /* NULL: libmicrohttpd's own push is in place */
    struct heldsend out;
};

struct http_server {
    struct http_config cfg;
    struct reload *reload;
    struct MHD_Daemon *daemon;
    struct mutate_options mopt;
    uint16_t port;
    atomic_bool quiesced;
    atomic_bool starting; /* libmicrohttpd's messages matter at start */
    atomic_uint_fast64_t in_flight;
    atomic_uint_fast64_t finished;
    atomic_size_t body_bytes; /* sum of every conn's body.cap */

    /* Every open connection, oldest phase first, and the reaper thread
     * that enforces their deadlines. */
    pthread_mutex_t conns_lock;
    pthread_cond_t reaper_cond;
    struct conn *conns_head, *conns_tail;
    size_t n_conns;
    size_t n_cut; /* of n_conns, those cut and not yet closed */
    size_t shed_at;
    /* Open connections per client address: a power-of-two table, at
     * least four times the connection limit, so probes stay short. */
    struct peer_slot *peers;
    size_t peers_mask; /* more open connections than this: shed the oldest */
    bool reaper_stop, reaper_running;
    pthread_t reaper;

    /* Certificates handed to handshakes whose connection could not be
     * found (a libmicrohttpd that keeps its own session pointer): they
     * are kept until the server stops. */
    pthread_mutex_t parked_lock;
    struct cert_snap **parked;
    size_t n_parked, cap_parked;
};

/* The connection a request lives in. */
static struct conn *
request_conn(struct request *req)
{
    return (struct conn *)((char *)req - offsetof(struct conn, req));
}

/* GnuTLS's retrieve callback has no user pointer: the one server. */
static struct http_server *the_server;

int
http_listen_parse(const char *s, struct http_config *cfg, struct ng_error *err)
{
    char host[256];
    const char *colon, *port_s;
    char *end;
    unsigned long port;
    size_t hlen;

    if (s == NULL || *s == '\0') {
        ng_error_set(err, 0, 0, "listen address is empty");
        return -1;
    }
    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (close == NULL || close[1] != ':') {
            ng_error_set(err, 0, 0, "listen address %s: expected [IPv6]:PORT",
                         s);
            return -1;
        }
        hlen = (size_t)(close - s - 1);
        if (hlen >= sizeof(host)) {
            ng_error_set(err, 0, 0, "listen address %s: host too long", s);
            return -1;
        }
        memcpy(host, s + 1, hlen);
        host[hlen] = '\0';
        port_s = close + 2;
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL) {
            ng_error_set(err, 0, 0, "listen address %s: expected HOST:PORT", s);
            return -1;
        }
        hlen = (size_t)(colon - s);
        if (hlen >= sizeof(host)) {
            ng_error_set(err, 0, 0, "listen address %s: host too long", s);
            return -1;
        }
        memcpy(host, s, hlen);
        host[hlen] = '\0';
        port_s = colon + 1;
    }
    errno = 0;
    port = strtoul(port_s, &end, 10);
    if (*port_s == '\0' || *end != '\0' || errno != 0 || port > 65535 ||
        *port_s == '-' || *port_s == '+') {
        ng_error_set(err, 0, 0, "listen address %s: port must be 0-65535", s);
        return -1;
    }
    memset(&cfg->addr, 0, sizeof(cfg->addr));
    if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0) {
        struct sockaddr_in *a = (struct sockaddr_in *)&cfg->addr;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        a->sin_port = htons((uint16_t)port);
        cfg->addr_len = sizeof(*a);
        return 0;
    }
    if (strcmp(host, "localhost") == 0)
        snprintf(host, sizeof(host), "127.0.0.1");
    {
        struct sockaddr_in *a = (struct sockaddr_in *)&cfg->addr;
        if (inet_pton(AF_INET, host, &a->sin_addr) == 1) {
            a->sin_family = AF_INET;
            a->sin_port = htons((uint16_t)port);
            cfg->addr_len = sizeof(*a);
            return 0;
        }
    }
    {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&cfg->addr;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) == 1) {
            a->sin6_family = AF_INET6;
            a->sin6_port = htons((uint16_t)port);
            cfg->addr_len = sizeof(*a);
            return 0;
        }
    }
    ng_error_set(err, 0, 0,
                 "listen address %s: host must be an IP address or localhost",
                 s);
    return -1;
}

static uint64_t
micros_since(const struct timespec *t0)
{
    struct timespec t;
    int64_t us;

    clock_gettime(CLOCK_MONOTONIC, &t);
    us = (int64_t)(t.tv_sec - t0->tv_sec) * 1000000 +
         (t.tv_nsec - t0->tv_nsec) / 1000;
    return us < 0 ? 0 : (uint64_t)us;
}

static uint64_t
now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

size_t
http_body_budget(uint64_t memory_limit, unsigned int threads, size_t max_body)
{
    uint64_t budget, room;

    if (threads == 0)
        threads = 1;
    if (memory_limit == 0)
        return 64 * max_body;
    /* The other half of the limit is for everything that is not a body:
     * the program, TLS sessions and libmicrohttpd's per-connection pools
     * (about 70 KiB each, so 1,024 connections take ~70 MiB). Each worker
     * parses one review at a time, which takes up to about four times
     * the body in JSON values, patch and answer. */
    budget = memory_limit / 2;
    room = (uint64_t)threads * 4 * max_body;
    budget = budget > room ? budget - room : 0;
    if (budget < max_body)
        budget = max_body;
    if (budget > SIZE_MAX)
        budget = SIZE_MAX;
    return (size_t)budget;
}

/* Charges n bytes of body buffer to the global budget, of which a buffer
 * larger than SMALL_BODY may use only the first seven eighths; false when
 * that would pass it. Lock-free. */
static bool
budget_take(struct http_server *s, size_t n, size_t buffer)
{
    size_t cur = atomic_load_explicit(&s->body_bytes, memory_order_relaxed);
    size_t limit = s->cfg.body_budget;

    if (buffer > SMALL_BODY)
        limit -= limit / 8;
    do {
        if (limit > 0 && (n > limit || cur > limit - n))
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &s->body_bytes, &cur, cur + n, memory_order_relaxed,
        memory_order_relaxed));
    return true;
}

static void
budget_give(struct http_server *s, size_t n)
{
    atomic_fetch_sub_explicit(&s->body_bytes, n, memory_order_relaxed);
}

/* Frees a connection's body buffer and returns its bytes to the budget. */
static void
conn_body_free(struct conn *c)
{
    budget_give(c->srv, c->body.cap);
    buf_release(&c->body);
}

/* Makes room for more body bytes, charging the growth to the budget before
 * it is allocated (one announced body is reserved exactly; see
 * buf_reserve()). Returns 0, -1 when the budget is spent, -2 when out of
 * memory or past max_body (which the callers check first). */
static int
conn_body_reserve(struct conn *c, size_t more)
{
    size_t old = c->body.cap, ncap = buf_reserve_size(&c->body, more);

    if (ncap == 0)
        return -2;
    if (ncap <= old)
        return 0;
    if (!budget_take(c->srv, ncap - old, ncap))
        return -1;
    if (buf_reserve(&c->body, more) != 0) {
        budget_give(c->srv, ncap - old);
        return -2;
    }
    return 0;
}

/*
 * Puts REVIEW_BODY_PADDING zeros after the complete body, so that the
 * decoder reads it where it is instead of copying it (a twentieth of the
 * decode of a 97 KB review). The room is taken exactly (a buffer reserved
 * for its announced length grows by these bytes, not double) and charged
 * to the budget like the body; a kept-alive connection's buffer keeps it
 * for its next body. The
 * body's own limits (max_body, and the announced length reserved exactly)
 * are checked without it. Returns 0, or -1 when the budget or memory has
 * no room, and the body is then decoded from a copy as before.
 */
static int
conn_body_pad(struct conn *c)
{
    size_t old = c->body.cap,
           ncap = buf_reserve_exact_size(&c->body, REVIEW_BODY_PADDING);

    if (ncap == 0)
        return -1;
    if (ncap > old) {
        if (!budget_take(c->srv, ncap - old, ncap))
            return -1;
        if (buf_reserve_exact(&c->body, REVIEW_BODY_PADDING) != 0) {
            budget_give(c->srv, ncap - old);
            return -1;
        }
    }
    memset(c->body.p + c->body.len, 0, REVIEW_BODY_PADDING);
    return 0;
}

/* Unlinks c from the server's list; conns_lock held. */
static void
conn_unlink(struct http_server *s, struct conn *c)
{
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->conns_head = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    else
        s->conns_tail = c->prev;
    c->prev = c->next = NULL;
}

/* Appends c at the tail (the newest phase); conns_lock held. */
static void
conn_append(struct http_server *s, struct conn *c)
{
    c->prev = s->conns_tail;
    c->next = NULL;
    if (s->conns_tail != NULL)
        s->conns_tail->next = c;
    else
        s->conns_head = c;
    s->conns_tail = c;
}

/*
 * Starts phase p on c now, with its deadline: the handshake and headers
 * get header_timeout (plus the idle timeout on a kept-alive connection,
 * which may wait that long for its next request); a body gets
 * header_timeout plus its announced length (or the cap) at min_body_rate.
 */
static void
conn_phase_set(struct conn *c, enum conn_phase p, uint64_t body_len)
{
    struct http_server *s = c->srv;
    const struct http_config *cfg = &s->cfg;
    uint64_t now = now_ns(), secs = 0;

    pthread_mutex_lock(&s->conns_lock);
    c->phase = p;
    c->phase_ns = now;
    c->deadline_ns = 0;
    if (p == PHASE_HEAD && cfg->header_timeout > 0) {
        secs = cfg->header_timeout;
        if (c->kept_alive)
            secs += cfg->connection_timeout;
    } else if (p == PHASE_BODY && cfg->min_body_rate > 0) {
        secs = cfg->header_timeout +
               (body_len + cfg->min_body_rate - 1) / cfg->min_body_rate;
    }
    if (secs > 0)
        c->deadline_ns = now + secs * 1000000000u;
    if (c->fd >= 0) {
        conn_unlink(s, c);
        conn_append(s, c);
    }
    pthread_mutex_unlock(&s->conns_lock);
}

/*
 * Cuts c: shuts its socket down, so libmicrohttpd's next read sees the
 * end and closes it in its own thread. The descriptor stays valid because
 * libmicrohttpd reports a connection closed (and c leaves the list, under
 * conns_lock, held here) before it closes the socket.
 */
static void
conn_cut(struct conn *c, enum metrics_close_reason why)
{
    if (c->cut || c->fd < 0)
        return;
    c->cut = true;
    c->srv->n_cut++;
    shutdown(c->fd, SHUT_RDWR);
    metrics_connection_close_record(why);
}

/* FNV-1a of a peer key, for the table's home slot. */
static size_t
peer_hash(const struct peer_key *k)
{
    uint64_t h = 1469598103934665603ull;

    h = (h ^ k->family) * 1099511628211ull;
    for (size_t i = 0; i < sizeof(k->addr); i++)
        h = (h ^ k->addr[i]) * 1099511628211ull;
    return (size_t)h;
}

/* The slot holding k, or the free slot where it would go; conns_lock
 * held. The table is never full: it has four times the connections. */
static size_t
peer_find(const struct http_server *s, const struct peer_key *k)
{
    size_t i = peer_hash(k) & s->peers_mask;

    while (s->peers[i].count != 0 &&
           memcmp(&s->peers[i].key, k, sizeof(*k)) != 0)
        i = (i + 1) & s->peers_mask;
    return i;
}

static unsigned int
peer_count(const struct http_server *s, const struct peer_key *k)
{
    return s->peers[peer_find(s, k)].count;
}

static void
peer_add(struct http_server *s, const struct peer_key *k)
{
    size_t i = peer_find(s, k);

    s->peers[i].key = *k;
    s->peers[i].count++;
}

/* Drops one connection of k; a count reaching 0 frees its slot by
 * shifting later entries of the probe run back (linear probing needs no
 * tombstones that way). */
static void
peer_remove(struct http_server *s, const struct peer_key *k)
{
    size_t i = peer_find(s, k), j;

    if (s->peers[i].count == 0 || --s->peers[i].count > 0)
        return;
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & s->peers_mask;
        if (s->peers[j].count == 0)
            break;
        home = peer_hash(&s->peers[j].key) & s->peers_mask;
        /* The entry at j may fill the hole at i unless its home lies
         * cyclically in (i, j]. */
        if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
            continue;
        s->peers[i] = s->peers[j];
        s->peers[j].count = 0;
        i = j;
    }
}

/* The oldest connection of the tier whose address holds the most
 * connections, or NULL; conns_lock held. Tier 0: first requests still in
 * their handshake, headers or body; tier 1: idle kept-alive ones. */
static struct conn *
shed_pick(struct http_server *s, int tier)
{
    struct conn *best = NULL;
    unsigned int best_n = 0;

    for (struct conn *c = s->conns_head; c != NULL; c = c->next) {
        unsigned int n;
        bool in = tier == 0 ? c->phase == PHASE_BODY ||
                                  (c->phase == PHASE_HEAD && !c->kept_alive)
                            : c->phase == PHASE_HEAD && c->kept_alive;
        if (c->cut || !in)
            continue;
        n = peer_count(s, &c->peer);
        if (n > best_n) {
            best = c;
            best_n = n;
        }
    }
    return best;
}

/*
 * While open connections (less those already cut) pass shed_at, cuts the
 * oldest incomplete request from the address that holds the most
 * connections: first connections still on their first request's
 * handshake, headers or body, then idle kept-alive ones, never one being
 * answered. The list is in phase order, so the first found of an address
 * is its oldest. A flood of slow clients, from one address or many, is
 * shed before a lone new client such as the API server, however fast the
 * flood reconnects. conns_lock held.
 */
static void
shed_oldest(struct http_server *s)
{
    while (s->shed_at > 0 && s->n_conns - s->n_cut > s->shed_at) {
        struct conn *c = shed_pick(s, 0);
        if (c == NULL)
            c = shed_pick(s, 1);
        if (c == NULL)
            return;
        conn_cut(c, METRICS_CLOSE_SHED);
    }
}

/* Cuts connections past their deadline, every REAP_PERIOD_MS. */
static void *
reaper_main(void *arg)
{
    struct http_server *s = arg;
    struct timespec until;

    pthread_mutex_lock(&s->conns_lock);
    while (!s->reaper_stop) {
        uint64_t now = now_ns();

        for (struct conn *c = s->conns_head; c != NULL; c = c->next)
            if (c->deadline_ns != 0 && now >= c->deadline_ns &&
                c->phase != PHASE_BUSY)
                conn_cut(c, METRICS_CLOSE_DEADLINE);
        /* Also here, not only when a connection arrives: at the limit
         * libmicrohttpd accepts none, and the grace may have kept the
         * newest from being shed. */
        shed_oldest(s);
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += REAP_PERIOD_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&s->reaper_cond, &s->conns_lock, &until);
    }
    pthread_mutex_unlock(&s->conns_lock);
    return NULL;
}

/* Parks a snapshot whose connection is unknown until the server stops. */
static void
park_cert(struct http_server *s, struct cert_snap *c)
{
    pthread_mutex_lock(&s->parked_lock);
    if (s->n_parked == s->cap_parked) {
        size_t ncap = s->cap_parked ? s->cap_parked * 2 : 8;
        struct cert_snap **np = realloc(s->parked, ncap * sizeof(*np));
        if (np == NULL) {
            /* Cannot track it: keep it forever rather than free it early. */
            pthread_mutex_unlock(&s->parked_lock);
            return;
        }
        s->parked = np;
        s->cap_parked = ncap;
    }
    s->parked[s->n_parked++] = c;
    pthread_mutex_unlock(&s->parked_lock);
}

/*
 * The connection a TLS session belongs to. libmicrohttpd stores its
 * connection as the session pointer; http_notify_connection() checked
 * that (or set it) when the connection started.
 */
static struct conn *
session_conn(gnutls_session_t session)
{
    struct MHD_Connection *mc = gnutls_session_get_ptr(session);
    const union MHD_ConnectionInfo *ci;

    if (mc == NULL)
        return NULL;
    ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci == NULL || ci->socket_context == NULL)
        return NULL;
    return ci->socket_context;
}

/*
 * GnuTLS asks for the serving pair at each handshake. The connection takes
 * a reference to the pair in force and keeps it until it closes, so a
 * rotation never frees a pair a handshake is using, and new connections
 * get the new pair at once.
 */
static int
cert_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn,
              int nreqs, const gnutls_pk_algorithm_t *pk_algos,
              int pk_algos_length, gnutls_pcert_st **pcert,
              unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
    struct http_server *s = the_server;
    struct conn *c;
    struct cert_snap *snap;

    (void)req_ca_rdn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    if (s == NULL)
        return -1;
    c = session_conn(session);
    if (c != NULL) {
        if (c->cert == NULL)
            c->cert = reload_cert_acquire(s->reload);
        snap = c->cert;
    } else {
        snap = reload_cert_acquire(s->reload);
        park_cert(s, snap);
    }
    tlspair_credentials(snap->pair, pcert, pcert_length, privkey);
    return 0;
}

/* The client address of mc as a table key (family 0 when unknown). */
static struct peer_key
peer_key_of(struct MHD_Connection *mc)
{
    struct peer_key k;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CLIENT_ADDRESS);

    memset(&k, 0, sizeof(k));
    if (ci == NULL || ci->client_addr == NULL)
        return k;
    if (ci->client_addr->sa_family == AF_INET) {
        const struct sockaddr_in *a =
            (const struct sockaddr_in *)ci->client_addr;
        k.family = AF_INET;
        memcpy(k.addr, &a->sin_addr, 4);
    } else if (ci->client_addr->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a =
            (const struct sockaddr_in6 *)ci->client_addr;
        k.family = AF_INET6;
        memcpy(k.addr, &a->sin6_addr, 16);
    }
    return k;
}

/*
 * GnuTLS's push function for a connection: libmicrohttpd 0.9.75 sends the
 * header and the body of a TLS answer in two gnutls_record_send() calls
 * (mhd_send.c, MHD_send_hdr_and_body_(): it gives GnuTLS no vector), and
 * each send costs the server a wake-up of the reader, on loopback as on a
 * node's network. answer() marks the connection when it queues an answer
 * with a body; the header's record is then held and goes out with the
 * body's first record in one sendmsg (server/heldsend.h), as nginx
 * answers with one write. Held bytes the body never followed (an answer
 * sent without it) are flushed when the request completes.
 */
static ssize_t
tls_push(gnutls_transport_ptr_t ptr, const void *data, size_t len)
{
    struct conn *c = ptr;
    int err = 0;
    ssize_t n = heldsend_push(&c->out, data, len, &err);

    if (n < 0)
        gnutls_transport_set_errno(c->tls, err);
    return n;
}

static void
notify_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                  enum MHD_ConnectionNotificationCode code)
{
    struct http_server *s = cls;
    struct conn *c;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci;

        c = calloc(1, sizeof(*c));
        *socket_context = c;
        if (c == NULL)
            return; /* handled as "no context": the request gets a 500 */
        c->srv = s;
        buf_init(&c->body, s->cfg.max_body + REVIEW_BODY_PADDING);
        c->fd = -1;
        ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci != NULL) {
            pthread_mutex_lock(&s->conns_lock);
            c->fd = ci->connect_fd;
            c->phase = PHASE_BUSY; /* set to HEAD, with its deadline, below */
            c->peer = peer_key_of(mc);
            conn_append(s, c);
            s->n_conns++;
            peer_add(s, &c->peer);
            shed_oldest(s);
            pthread_mutex_unlock(&s->conns_lock);
            conn_phase_set(c, PHASE_HEAD, 0);
        }
        ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        if (ci != NULL && ci->tls_session != NULL) {
            gnutls_session_t session = ci->tls_session;
            /* Versions that do not keep their connection there leave
             * the pointer free for us. */
            if (gnutls_session_get_ptr(session) == NULL)
                gnutls_session_set_ptr(session, mc);
            /* libmicrohttpd made the socket the session's transport, for
             * reading and writing, before this notice (daemon.c,
             * new_connection_prepare_()); the writes now go through
             * tls_push(), the reads stay as they were. */
            if (c->fd >= 0) {
                c->tls = session;
                c->out.fd = c->fd;
                gnutls_transport_set_ptr2(
                    session, (gnutls_transport_ptr_t)(intptr_t)c->fd, c);
                gnutls_transport_set_push_function(session, tls_push);
            }
        }
        return;
    }
    c = *socket_context;
    if (c == NULL)
        return;
    if (c->fd >= 0) {
        pthread_mutex_lock(&s->conns_lock);
        conn_unlink(s, c);
        s->n_conns--;
        peer_remove(s, &c->peer);
        if (c->cut)
            s->n_cut--;
        c->fd = -1;
        pthread_mutex_unlock(&s->conns_lock);
    }
    if (c->req.active) {
        /* A request libmicrohttpd never reported complete. */
        atomic_fetch_sub(&s->in_flight, 1);
    }
    reload_cert_release(c->cert);
    reload_policy_release(c->req.pol);
    conn_body_free(c);
    free(c);
    *socket_context = NULL;
}

/* Ends a request's bookkeeping (also for requests aborted mid-body). */
static void
request_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                  enum MHD_RequestTerminationCode toe)
{
    struct http_server *s = cls;
    struct request *req = *con_cls;
    struct conn *c;

    (void)mc;
    (void)toe;
    if (req == NULL)
        return;
    c = request_conn(req);
    if (c->tls != NULL)
        (void)heldsend_flush(&c->out, 1000);
    reload_policy_release(req->pol);
    if (c->body.cap > BODY_KEEP)
        conn_body_free(c);
    else
        buf_reset(&c->body);
    memset(req, 0, sizeof(*req));
    *con_cls = NULL;
    c->kept_alive = true;
    conn_phase_set(c, PHASE_HEAD, 0);
    atomic_fetch_sub(&s->in_flight, 1);
    atomic_fetch_add(&s->finished, 1);
}

/* Queues an answer whose body is static or owned by the response. */
static enum MHD_Result
answer(struct http_server *s, struct MHD_Connection *mc, struct request *req,
       unsigned int status, const char *ctype, char *body, size_t len,
       enum MHD_ResponseMemoryMode mode, const char *allow)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(len, body, mode);
    if (r == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return MHD_NO;
    }
    if (ctype != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (allow != NULL)
        MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, allow);
    if (req->over_budget)
        MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER,
                                BUDGET_RETRY_AFTER);
    if (atomic_load_explicit(&s->quiesced, memory_order_relaxed) ||
        req->too_large || req->over_budget || req->bad_framing)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    ret = MHD_queue_response(mc, status, r);
    MHD_destroy_response(r);
    if (ret == MHD_YES) {
        struct conn *c = request_conn(req);

        /* The header's record waits for the body's (tls_push()). */
        if (c->tls != NULL && len > 0 && !req->head)
            c->out.hold_next = true;
        req->answered = true;
        metrics_http_record((int)status);
    }
    return ret;
}

static enum MHD_Result
answer_text(struct http_server *s, struct MHD_Connection *mc,
            struct request *req, unsigned int status, const char *text,
            const char *allow)
{
    return answer(s, mc, req, status, "text/plain; charset=utf-8", (char *)text,
                  strlen(text), MHD_RESPMEM_PERSISTENT, allow);
}

/* "application/json", optionally followed by parameters (";charset=..."). */
static bool
is_json_type(const char *ct)
{
    static const char want[] = "application/json";
    size_t n = sizeof(want) - 1;

    if (ct == NULL)
        return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, want, n) != 0)
        return false;
    ct += n;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

/* Verifies the client's certificate once per connection. */
static bool
client_verified(struct http_server *s, struct MHD_Connection *mc,
                struct conn *c, const char **why)
{
    const union MHD_ConnectionInfo *ci;
    unsigned int status = 0;
    int rc;
    /* The certificate must be meant for TLS clients: GnuTLS fails the
     * check with GNUTLS_CERT_PURPOSE_MISMATCH when a certificate of the
     * chain has an extended key usage without this purpose, and passes one
     * with no extended key usage at all (RFC 5280 section 4.2.1.12). */
    gnutls_typed_vdata_st purpose = {
        .type = GNUTLS_DT_KEY_PURPOSE_OID,
        .data = (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT,
        .size = 0};

    if (s->cfg.client_ca_pem == NULL || c->client_ok)
        return true;
    ci = MHD_get_connection_info(mc, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (ci == NULL || ci->tls_session == NULL) {
        *why = "client certificate required\n";
        return false;
    }
    rc = gnutls_certificate_verify_peers(ci->tls_session, &purpose, 1, &status);
    if (rc == GNUTLS_E_NO_CERTIFICATE_FOUND ||
        gnutls_certificate_get_peers(ci->tls_session, NULL) == NULL) {
        *why = "client certificate required\n";
        return false;
    }
    if (rc == 0 && (status & GNUTLS_CERT_PURPOSE_MISMATCH)) {
        *why = "client certificate not for client authentication: its "
               "extended key usage lacks clientAuth\n";
        return false;
    }
    if (rc < 0 || status != 0) {
        *why = "client certificate not trusted\n";
        return false;
    }
    c->client_ok = true;
    return true;
}

static enum MHD_Result
serve_healthz(struct http_server *s, struct MHD_Connection *mc, struct conn *c,
              struct request *req)
{
    (void)c;
    return answer_text(s, mc, req, MHD_HTTP_OK, "ok\n", NULL);
}

static enum MHD_Result
serve_readyz(struct http_server *s, struct MHD_Connection *mc, struct conn *c,
             struct request *req)
{
    struct cert_snap *cs;
    int64_t not_after;

    (void)c;
    if (atomic_load(&s->quiesced))
        return answer_text(s, mc, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "shutting down\n", NULL);
    cs = reload_cert_acquire(s->reload);
    not_after = tlspair_not_after(cs->pair);
    reload_cert_release(cs);
    if ((int64_t)time(NULL) >= not_after)
        return answer_text(s, mc, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                           "serving certificate expired\n", NULL);
    return answer_text(s, mc, req, MHD_HTTP_OK, "ok\n", NULL);
}

static enum MHD_Result
serve_metrics(struct http_server *s, struct MHD_Connection *mc, struct conn *c,
              struct request *req)
{
    struct metrics_gauges g = {0};
    struct policy_snap *ps = reload_policy_acquire(s->reload);
    struct cert_snap *cs = reload_cert_acquire(s->reload);
    char *text;
    size_t len = 0;

    (void)c;
    g.policy_loaded = 1;
    g.policy_generation = ps->generation;
    g.policy_hash = ps->hash;
    g.cert_loaded = 1;
    g.cert_generation = cs->generation;
    g.cert_not_after = tlspair_not_after(cs->pair);
    g.in_flight = atomic_load(&s->in_flight);
    pthread_mutex_lock(&s->conns_lock);
    g.connections_open = s->n_conns;
    pthread_mutex_unlock(&s->conns_lock);
    g.body_bytes = atomic_load(&s->body_bytes);
    g.body_budget = s->cfg.body_budget;
    text = metrics_render(&g, &len);
    reload_policy_release(ps);
    reload_cert_release(cs);
    if (text == NULL)
        return answer_text(s, mc, req, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "out of memory\n", NULL);
    return answer(s, mc, req, MHD_HTTP_OK, "text/plain; version=0.0.4", text,
                  len, MHD_RESPMEM_MUST_FREE, NULL);
}

/* Appends name (a JSON key with its quotes and colon, and a leading comma
 * where one is due) and v in decimal at p, which has room for both;
 * returns the end, where a NUL now stands. */
static char *
tail_put(char *p, const char *name, unsigned long long v)
{
    char digits[20];
    size_t n = 0;

    p = stpcpy(p, name);
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = digits[--n];
    *p = '\0';
    return p;
}

/* Writes the admission line: the outcome's log record (JSON text from the
 * admission core), then the server's own numbers, with no JSON values
 * built for either and no format parsed (snprintf() was a third of the
 * line's cost). */
static void
log_admission(const struct review_outcome *out, uint64_t us,
              uint64_t generation)
{
    enum log_level level = LOG_INFO;
    /* The result's name (a few letters), five keys and five numbers of
     * at most 20 digits each. */
    char tail[256];
    char *p = tail;

    if (out->result == REVIEW_ERROR)
        level = LOG_ERROR;
    else if (out->result == REVIEW_BAD_REQUEST)
        level = LOG_WARN;
    if (!log_level_enabled(level))
        return;
    /* A record always names its result; without one, the tail does. */
    if (out->log == NULL || out->log_len == 0) {
        p = stpcpy(p, "\"result\":\"");
        p = stpcpy(p, review_result_name(out->result));
        p = stpcpy(p, "\",");
    }
    /* http_status is 200 or 400 (500 answers are not logged here). */
    p = tail_put(p, "\"status\":", (unsigned)out->http_status);
    p = tail_put(p, ",\"patch_ops\":", out->patch_ops);
    p = tail_put(p, ",\"warnings_count\":", out->warnings);
    p = tail_put(p, ",\"policy_generation\":", generation);
    tail_put(p, ",\"duration_us\":", us);
    log_members_write(level, "admission", out->log, out->log_len, tail);
}

static enum MHD_Result
serve_mutate(struct http_server *s, struct MHD_Connection *mc, struct conn *c,
             struct request *req)
{
    struct review_outcome out;
    enum MHD_Result ret;
    uint64_t us;
    const char *ctype;

    memset(&out, 0, sizeof(out));
    /* Every jansson value of this admission comes from the thread's arena
     * and is reclaimed at once below; nothing made here outlives it (the
     * response body is plain heap memory). */
    jsonmem_begin();
    if ((conn_body_pad(c) == 0
             ? review_handle_padded(c->body.p, c->body.len, req->pol->pol,
                                    &s->mopt, &out)
             : review_handle(c->body.p ? c->body.p : "", c->body.len,
                             req->pol->pol, &s->mopt, &out)) != 0) {
        review_outcome_release(&out);
        jsonmem_end();
        log_error_write(LOG_ERROR, "admission failed", NULL, NULL,
                        "out of memory");
        return answer_text(s, mc, req, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "out of memory\n", NULL);
    }
    ctype = out.content_type ? out.content_type : "application/json";
    if (out.body == NULL) {
        ret = answer_text(s, mc, req, MHD_HTTP_INTERNAL_SERVER_ERROR,
                          "empty answer\n", NULL);
    } else {
        ret = answer(s, mc, req, (unsigned int)out.http_status, ctype, out.body,
                     out.body_len, MHD_RESPMEM_MUST_FREE, NULL);
        out.body = NULL; /* the response owns it now, or it was freed */
    }
    us = micros_since(&req->t0);
    metrics_admission_record(out.result, us, out.patch_ops, out.warnings);
    log_admission(&out, us, req->pol->generation);
    review_outcome_release(&out);
    jsonmem_end();
    return ret;
}

/* Appends a body chunk, growing the connection's buffer as needed.
 * Returns 0, -1 when the body budget is spent, -2 when out of memory. */
static int
body_append(struct conn *c, const char *data, size_t n)
{
    int rc = conn_body_reserve(c, n);

    if (rc != 0)
        return rc;
    return buf_add(&c->body, data, n) == 0 ? 0 : -2;
}

/* Answers 503 for a body the global budget cannot hold. */
static enum MHD_Result
answer_over_budget(struct http_server *s, struct MHD_Connection *mc,
                   struct request *req)
{
    req->over_budget = true;
    metrics_connection_close_record(METRICS_CLOSE_BUDGET);
    return answer_text(s, mc, req, MHD_HTTP_SERVICE_UNAVAILABLE,
                       "request bodies in flight use all the memory "
                       "budget; retry shortly\n",
                       NULL);
}

/* What framing_check() collects from the request's header fields. */
struct framing {
    unsigned int n_te; /* Transfer-Encoding field lines */
    bool te_chunked;   /* the (one) Transfer-Encoding is exactly chunked */
    unsigned int n_cl; /* Content-Length field lines */
    bool cl_bad;       /* a value not a plain decimal number */
    bool cl_conflict;  /* values that differ */
    unsigned long long cl;
};

static enum MHD_Result
framing_field(void *cls, enum MHD_ValueKind kind, const char *key,
              const char *value)
{
    struct framing *f = cls;

    (void)kind;
    if (key == NULL)
        return MHD_YES;
    if (value == NULL)
        value = "";
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        f->n_te++;
        f->te_chunked = strcasecmp(value, "chunked") == 0;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        char *end;
        unsigned long long n;
        errno = 0;
        n = strtoull(value, &end, 10);
        if (value[0] < '0' || value[0] > '9' || *end != '\0' || errno != 0)
            f->cl_bad = true;
        else if (f->n_cl > 0 && n != f->cl)
            f->cl_conflict = true;
        f->cl = n;
        f->n_cl++;
    }
    return MHD_YES;
}

/*
 * RFC 9112 section 6: a request whose body length is ambiguous is refused
 * with 400 and the connection closed, since the two ends could otherwise
 * disagree on where the next request starts (request smuggling). Refused
 * here: Transfer-Encoding other than exactly "chunked" (section 6.1; this
 * server decodes no other coding), Transfer-Encoding together with
 * Content-Length (section 6.3 item 3), and Content-Length values that
 * differ or are not a number (section 6.3 item 5). Returns the reason, or
 * NULL when the framing is sound.
 */
static const char *
framing_check(struct MHD_Connection *mc)
{
    struct framing f;

    memset(&f, 0, sizeof(f));
    MHD_get_connection_values(mc, MHD_HEADER_KIND, framing_field, &f);
    if (f.n_te > 1 || (f.n_te == 1 && !f.te_chunked))
        return "bad request: Transfer-Encoding must be exactly \"chunked\"\n";
    if (f.n_te > 0 && f.n_cl > 0)
        return "bad request: Content-Length and Transfer-Encoding together\n";
    if (f.cl_bad)
        return "bad request: Content-Length is not a decimal number\n";
    if (f.cl_conflict)
        return "bad request: Content-Length fields that differ\n";
    return NULL;
}

/* A route's answer, given on the request's last call: its headers, and
 * for a route that takes a body the whole body in c, are in. */
typedef enum MHD_Result (*route_handler)(struct http_server *s,
                                         struct MHD_Connection *mc,
                                         struct conn *c, struct request *req);

/*
 * One route. methods is what a 405 sends as its Allow header; its text
 * names the first ("method not allowed; use POST"). A route with a body
 * takes AdmissionReviews: request_begin() checks the client certificate
 * (with --client-ca), the content type, the announced length and the
 * budget, and takes the policy snapshot the review uses. A route without
 * one is answered without reading anything.
 */
struct route {
    const char *path;
    const char *methods;
    bool body;
    route_handler handler;
};

static const struct route routes[] = {
    {"/mutate", "POST", true, serve_mutate},
    {"/healthz", "GET, HEAD", false, serve_healthz},
    {"/readyz", "GET, HEAD", false, serve_readyz},
    {"/metrics", "GET, HEAD", false, serve_metrics},
};

/* The route of url, or NULL. */
static const struct route *
route_find(const char *url)
{
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (strcmp(url, routes[i].path) == 0)
            return &routes[i];
    return NULL;
}

/* True when method is one of r's methods (a list joined by ", "). */
static bool
route_allows(const struct route *r, const char *method)
{
    size_t n = strlen(method);
    const char *m = r->methods;

    for (;;) {
        size_t len = strcspn(m, ",");
        if (len == n && strncmp(m, method, n) == 0)
            return true;
        if (m[len] == '\0')
            return false;
        m += len + 1;
        while (*m == ' ')
            m++;
    }
}

/* 405 with the route's methods: "method not allowed; use POST". */
static enum MHD_Result
answer_not_allowed(struct http_server *s, struct MHD_Connection *mc,
                   struct request *req)
{
    const char *methods = req->route->methods;
    char text[64];
    int n = snprintf(text, sizeof(text), "method not allowed; use %.*s\n",
                     (int)strcspn(methods, ","), methods);

    if (n < 0 || (size_t)n >= sizeof(text))
        n = (int)strlen(text);
    return answer(s, mc, req, MHD_HTTP_METHOD_NOT_ALLOWED,
                  "text/plain; charset=utf-8", text, (size_t)n,
                  MHD_RESPMEM_MUST_COPY, methods);
}

/* The body length the request announces, capped at max_body (the cap when
 * it announces none): what the body's deadline allows for. */
static uint64_t
announced_length(struct http_server *s, struct MHD_Connection *mc)
{
    const char *cl = MHD_lookup_connection_value(
        mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    unsigned long long n = s->cfg.max_body;
    char *end;

    if (cl != NULL) {
        errno = 0;
        n = strtoull(cl, &end, 10);
        if (errno != 0 || *end != '\0' || n > s->cfg.max_body)
            n = s->cfg.max_body;
    }
    return n;
}

/*
 * The header checks of a route with a body, and its policy snapshot.
 * Returns MHD_YES to read the body, or the result of a refusal's answer.
 */
static enum MHD_Result
body_begin(struct http_server *s, struct MHD_Connection *mc, struct conn *c,
           struct request *req)
{
    /* With --client-ca, reviews need a trusted client certificate. The
     * handshake only requests one, so that kubelet probes and Prometheus
     * (which present none) still reach /healthz, /readyz and /metrics. */
    {
        const char *why = NULL;
        if (!client_verified(s, mc, c, &why)) {
            metrics_client_cert_reject_record();
            return answer_text(s, mc, req, MHD_HTTP_FORBIDDEN, why, NULL);
        }
    }
    if (!is_json_type(MHD_lookup_connection_value(
            mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)))
        return answer_text(s, mc, req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE,
                           "content type must be application/json\n", NULL);
    {
        const char *cl = MHD_lookup_connection_value(
            mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl != NULL) {
            char *end;
            unsigned long long n;
            errno = 0;
            n = strtoull(cl, &end, 10);
            if (errno == 0 && end != cl && *end == '\0' &&
                n > (unsigned long long)s->cfg.max_body) {
                /* Refused without storing a byte. A client that waits
                 * for "100 Continue" never sends the body; others' bodies
                 * are drained (see DRAIN_LIMIT) unless far too large. */
                const char *expect = MHD_lookup_connection_value(
                    mc, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);
                req->too_large = true;
                if (expect != NULL || n - s->cfg.max_body > DRAIN_LIMIT)
                    return answer_text(s, mc, req, MHD_HTTP_CONTENT_TOO_LARGE,
                                       "request body too large\n", NULL);
                return MHD_YES;
            }
            /* Reserve the whole body at once when it is announced, with
             * the decoder's padding after it (conn_body_pad()), and refuse
             * it at once when the budget cannot hold it. One allocation:
             * growing a 97 KB buffer by the padding once it had arrived
             * moved it, and 32 connections' worth of those left 0.8 MiB
             * more peak RSS. */
            if (errno == 0 && end != cl && *end == '\0' &&
                conn_body_reserve(c, (size_t)n + REVIEW_BODY_PADDING) == -1)
                return answer_over_budget(s, mc, req);
        }
    }
    req->pol = reload_policy_acquire(s->reload);
    return MHD_YES;
}

/*
 * Stage one, the first call (the headers are in): the request's
 * bookkeeping and body deadline, the framing, the route and its method,
 * and for a route with a body its header checks. A refusal is answered
 * at once; anything else on the last call, once libmicrohttpd has read
 * the whole request (an answer queued earlier closes the connection).
 */
static enum MHD_Result
request_begin(struct http_server *s, struct MHD_Connection *mc, const char *url,
              const char *method, void **con_cls)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(mc, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    struct conn *c = ci != NULL ? ci->socket_context : NULL;
    struct request *req;
    const char *why;

    if (c == NULL)
        return MHD_NO;
    req = &c->req;
    memset(req, 0, sizeof(*req));
    req->active = true;
    req->head = strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
    clock_gettime(CLOCK_MONOTONIC, &req->t0);
    *con_cls = req;
    atomic_fetch_add(&s->in_flight, 1);
    conn_phase_set(c, PHASE_BODY, announced_length(s, mc));
    why = framing_check(mc);
    if (why != NULL) {
        req->bad_framing = true;
        return answer_text(s, mc, req, MHD_HTTP_BAD_REQUEST, why, NULL);
    }
    req->route = route_find(url);
    if (req->route == NULL)
        return answer_text(s, mc, req, MHD_HTTP_NOT_FOUND, "not found\n", NULL);
    if (!route_allows(req->route, method))
        return answer_not_allowed(s, mc, req);
    if (!req->route->body)
        return MHD_YES;
    return body_begin(s, mc, c, req);
}

/*
 * Stage two, each chunk of the body: kept up to --max-body. Past it, or
 * once out of memory, chunks are read and dropped, so that the answer is
 * not lost to a reset, until DRAIN_LIMIT, where the 413 goes out at once.
 */
static enum MHD_Result
request_body(struct http_server *s, struct MHD_Connection *mc,
             struct request *req, const char *data, size_t *size)
{
    struct conn *c = request_conn(req);
    size_t n = *size;

    *size = 0;
    if (req->answered)
        return MHD_YES;
    if (req->too_large || req->no_memory || c->body.len + n > s->cfg.max_body) {
        if (!req->no_memory)
            req->too_large = true;
        req->dropped += n;
        if (req->dropped > DRAIN_LIMIT)
            return answer_text(s, mc, req, MHD_HTTP_CONTENT_TOO_LARGE,
                               "request body too large\n", NULL);
        return MHD_YES;
    }
    switch (body_append(c, data, n)) {
    case 0:
        break;
    case -1:
        return answer_over_budget(s, mc, req);
    default:
        req->no_memory = true;
    }
    return MHD_YES;
}

/*
 * Stage three, the last call (the whole request is in): unless already
 * answered, the route's handler answers. For a route with a body, a body
 * past --max-body is 413 and one that could not be kept is 500 first.
 */
static enum MHD_Result
request_end(struct http_server *s, struct MHD_Connection *mc,
            struct request *req)
{
    struct conn *c = request_conn(req);

    if (req->answered)
        return MHD_YES;
    if (req->route == NULL)
        return MHD_NO; /* not reached: request_begin() answered it */
    conn_phase_set(c, PHASE_BUSY, 0);
    if (req->route->body && req->too_large)
        return answer_text(s, mc, req, MHD_HTTP_CONTENT_TOO_LARGE,
                           "request body too large\n", NULL);
    if (req->route->body && req->no_memory)
        return answer_text(s, mc, req, MHD_HTTP_INTERNAL_SERVER_ERROR,
                           "out of memory\n", NULL);
    return req->route->handler(s, mc, c, req);
}

/*
 * libmicrohttpd's access handler: it calls once with the headers
 * (*con_cls still NULL), once per body chunk (*upload_data_size > 0), and
 * once at the end (*upload_data_size == 0). Each call goes to its stage.
 */
static enum MHD_Result
handle(void *cls, struct MHD_Connection *mc, const char *url,
       const char *method, const char *version, const char *upload_data,
       size_t *upload_data_size, void **con_cls)
{
    struct http_server *s = cls;
    struct request *req = *con_cls;

    (void)version;
    if (req == NULL)
        return request_begin(s, mc, url, method, con_cls);
    if (*upload_data_size > 0)
        return request_body(s, mc, req, upload_data, upload_data_size);
    return request_end(s, mc, req);
}

static void
mhd_logger(void *cls, const char *fmt, va_list ap)
{
    struct http_server *s = cls;
    enum log_level level = LOG_DEBUG;
    char text[512];
    size_t n;

    /* At start a message explains a failure (address in use, TLS set-up);
     * later ones are mostly clients dropping handshakes. */
    if (atomic_load(&s->starting))
        level = LOG_ERROR;
    if (!log_level_enabled(level))
        return;
    vsnprintf(text, sizeof(text), fmt, ap);
    n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    log_error_write(level, "libmicrohttpd", NULL, NULL, "%s", text);
}

/* "127.0.0.1:8443" or "[::1]:8443" for addr. */
static void
format_addr(const struct sockaddr_storage *addr, char *buf, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        snprintf(buf, n, "[%s]:%u", host, (unsigned)ntohs(a->sin6_port));
    } else {
        const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        snprintf(buf, n, "%s:%u", host, (unsigned)ntohs(a->sin_port));
    }
}

/*
 * Opens the listening socket here rather than in libmicrohttpd, whose
 * message names neither the address nor a remedy ("Failed to bind to port
 * 0"). Returns the socket, or -1 with err saying what to do.
 */
static int
listen_socket(const struct http_config *cfg, struct ng_error *err)
{
    char where[INET6_ADDRSTRLEN + 16];
    int fd, one = 1, e;
    const char *hint;

    format_addr(&cfg->addr, where, sizeof(where));
    fd = socket(cfg->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                0);
    if (fd < 0) {
        ng_error_set(err, 0, 0, "cannot open a socket for %s: %s", where,
                     strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (cfg->addr.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    if (bind(fd, (const struct sockaddr *)&cfg->addr, cfg->addr_len) == 0 &&
        listen(fd, 1024) == 0)
        return fd;
    e = errno;
    close(fd);
    switch (e) {
    case EADDRINUSE:
        hint = "another process is listening there; stop it or pick another "
               "port with --listen";
        break;
    case EACCES:
        hint = "ports below 1024 need CAP_NET_BIND_SERVICE; pick a port from "
               "1024 up with --listen";
        break;
    case EADDRNOTAVAIL:
        hint = "no interface of this host has that address; use one it has, "
               "or :PORT for all";
        break;
    default:
        hint = "check the --listen address";
    }
    ng_error_set(err, 0, 0, "cannot listen on %s: %s; %s", where, strerror(e),
                 hint);
    return -1;
}

struct http_server *
http_server_start(const struct http_config *cfg, struct reload *r,
                  struct ng_error *err)
{
    int lfd = -1;
    pthread_condattr_t ca;
    struct http_server *s;
    struct MHD_OptionItem opts[16];
    unsigned int flags;
    size_t i = 0;
    const union MHD_DaemonInfo *di;

    if (the_server != NULL) {
        ng_error_set(err, 0, 0, "a server is already running");
        return NULL;
    }
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    if (s->cfg.max_connections == 0)
        s->cfg.max_connections = 1024;
    if (s->cfg.threads == 0)
        s->cfg.threads = 1;
    s->reload = r;
    s->mopt.own_namespace = cfg->own_namespace;
    /* The answer carries the patch as text; no jansson copy of it. */
    s->mopt.patch_text_only = true;
    pthread_mutex_init(&s->parked_lock, NULL);
    pthread_mutex_init(&s->conns_lock, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->reaper_cond, &ca);
    pthread_condattr_destroy(&ca);
    atomic_init(&s->body_bytes, 0);
    /* Slots run short when seven eighths are taken: from then on each new
     * connection sheds the oldest incomplete one, so the pool never fills
     * and a new client is always accepted. */
    if (s->cfg.max_connections > 0)
        s->shed_at = s->cfg.max_connections - s->cfg.max_connections / 8 - 1;
    if (s->cfg.max_connections > 0 && s->shed_at == 0)
        s->shed_at = 1;
    {
        size_t want = 4 * (size_t)s->cfg.max_connections, n = 64;
        while (n < want)
            n *= 2;
        s->peers = calloc(n, sizeof(*s->peers));
        s->peers_mask = n - 1;
    }
    atomic_init(&s->starting, true);
    atomic_init(&s->in_flight, 0);
    atomic_init(&s->finished, 0);
    the_server = s;
    if (s->peers == NULL) {
        ng_error_set(err, 0, 0, "out of memory");
        goto fail;
    }

    /*
     * poll(2), not epoll. libmicrohttpd 0.9.75's epoll loop is
     * edge-triggered: it keeps a connection on its "ready" list while the
     * connection waits to read and its READ_READY flag is set, and clears
     * that flag only when its own recv wrapper sees EAGAIN
     * (connection_https.c, recv_tls_adapter). During the TLS handshake
     * GnuTLS reads the socket itself (gnutls_transport_set_int in
     * daemon.c), so a partial ClientHello, or a client silent after its
     * first flight, leaves the flag set forever: MHD_epoll() processes the
     * connection again and again with a zero epoll_wait timeout, one CPU
     * at 100 % until the idle timeout. Level-triggered poll(2) wakes only
     * when bytes arrive. No MHD_USE_TURBO either: with TLS it spun a worker
     * for every connection that had not finished its handshake.
     */
    flags = MHD_USE_TLS | MHD_USE_POLL_INTERNAL_THREAD | MHD_USE_ITC |
            MHD_USE_ERROR_LOG;
    if (cfg->addr.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;

    lfd = listen_socket(&s->cfg, err);
    if (lfd < 0)
        goto fail;
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, lfd, NULL};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                        (void *)TLS_PRIORITIES};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0,
                                        (void *)&cert_retrieve};
    if (cfg->client_ca_pem != NULL)
        opts[i++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0,
                                            (void *)cfg->client_ca_pem};
    if (s->cfg.threads > 1)
        opts[i++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE,
                                            s->cfg.threads, NULL};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE,
                                        THREAD_STACK, NULL};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                                        CONN_POOL, NULL};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT,
                                        cfg->connection_timeout, NULL};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT,
                                        s->cfg.max_connections, NULL};
    if (cfg->per_ip_connections > 0)
        opts[i++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                                            cfg->per_ip_connections, NULL};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_CONNECTION,
                                        (intptr_t)&notify_connection, s};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_NOTIFY_COMPLETED,
                                        (intptr_t)&request_completed, s};
    opts[i++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};

    /* The logger must come first to catch messages about the others. */
    s->daemon = MHD_start_daemon(flags, 0, NULL, NULL, &handle, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, &mhd_logger, s,
                                 MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (s->daemon == NULL) {
        ng_error_set(err, 0, 0,
                     "cannot start the HTTPS server (see the libmicrohttpd "
                     "line above)");
        goto fail;
    }
    lfd = -1; /* the daemon's now */
    atomic_store(&s->starting, false);
    di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di != NULL ? di->port : 0;
    {
        struct sockaddr_storage bound;
        socklen_t blen = sizeof(bound);
        const union MHD_DaemonInfo *li =
            MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_LISTEN_FD);
        if (li != NULL &&
            getsockname(li->listen_fd, (struct sockaddr *)&bound, &blen) == 0)
            s->port = ntohs(bound.ss_family == AF_INET6
                                ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                : ((struct sockaddr_in *)&bound)->sin_port);
    }
    if (pthread_create(&s->reaper, NULL, reaper_main, s) != 0) {
        ng_error_set(err, 0, 0, "cannot start the connection reaper thread");
        MHD_stop_daemon(s->daemon);
        goto fail;
    }
    s->reaper_running = true;
    return s;
fail:
    if (lfd >= 0)
        close(lfd);
    the_server = NULL;
    pthread_mutex_destroy(&s->parked_lock);
    pthread_mutex_destroy(&s->conns_lock);
    pthread_cond_destroy(&s->reaper_cond);
    free(s->peers);
    free(s);
    return NULL;
}

uint16_t
http_server_port(const struct http_server *s)
{
    return s->port;
}

void
http_server_quiesce(struct http_server *s)
{
    MHD_socket fd;

    if (atomic_exchange(&s->quiesced, true))
        return;
    fd = MHD_quiesce_daemon(s->daemon);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

bool
http_server_drain(struct http_server *s, unsigned int timeout_ms)
{
    unsigned int waited = 0, idle = 0;
    const struct timespec tick = {0, 10 * 1000 * 1000};

    /* Drained once nothing has been in flight for 50 ms: a keep-alive
     * client may already be sending its next request. */
    while (waited < timeout_ms) {
        if (atomic_load(&s->in_flight) == 0) {
            if (++idle >= 5)
                return true;
        } else {
            idle = 0;
        }
        nanosleep(&tick, NULL);
        waited += 10;
    }
    return atomic_load(&s->in_flight) == 0;
}

void
http_server_stop(struct http_server *s)
{
    if (s == NULL)
        return;
    if (s->reaper_running) {
        pthread_mutex_lock(&s->conns_lock);
        s->reaper_stop = true;
        pthread_cond_signal(&s->reaper_cond);
        pthread_mutex_unlock(&s->conns_lock);
        pthread_join(s->reaper, NULL);
    }
    MHD_stop_daemon(s->daemon);
    for (size_t i = 0; i < s->n_parked; i++)
        reload_cert_release(s->parked[i]);
    free(s->parked);
    pthread_mutex_destroy(&s->parked_lock);
    pthread_mutex_destroy(&s->conns_lock);
    pthread_cond_destroy(&s->reaper_cond);
    free(s->peers);
    if (the_server == s)
        the_server = NULL;
    free(s);
}
