/* The HTTPS front end: libmicrohttpd with GnuTLS, routes, body limits,
 * client certificates, graceful drain. */
#ifndef NCCLGUARD_HTTP_H
#define NCCLGUARD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "base/error.h"
#include "server/reload.h"

struct http_config {
    struct sockaddr_storage addr; /* where to listen; port 0 = any free */
    socklen_t addr_len;
    size_t max_body;                 /* bytes; larger bodies get 413 */
    unsigned int threads;            /* worker threads, >= 1 */
    unsigned int connection_timeout; /* idle seconds; 0 = none */
    unsigned int max_connections;    /* open connections at most; 0 = 1024 */
    unsigned int per_ip_connections; /* 0 = no per-IP limit */
    const char *client_ca_pem;       /* NUL-terminated PEM, or NULL; borrowed */
    const char *own_namespace;       /* skipped namespace, or NULL; borrowed */
    /* Absolute deadline, in seconds, for the TLS handshake plus the request
     * headers, counted from accept (or from the end of the previous request
     * on a kept-alive connection); 0 = none. */
    unsigned int header_timeout;
    /* A body must arrive at this many bytes a second on average, after a
     * grace of header_timeout; 0 = no body deadline. */
    size_t min_body_rate;
    /* Bytes of request-body buffers all connections together may hold;
     * a body that would pass it gets 503 with Retry-After. Buffers over
     * 256 KiB may use only seven eighths of it, so small reviews still
     * get through when large held bodies spend the rest. 0 = no cap. */
    size_t body_budget;
};

/*
 * The body budget for a process limited to memory_limit bytes (0 = no
 * limit known) with this many worker threads and this body cap: half the
 * limit, less four bodies' worth of parsing room per worker thread, and
 * never less than one body. Without a limit, 64 bodies. Thread-safe.
 */
size_t http_body_budget(uint64_t memory_limit, unsigned int threads,
                        size_t max_body);

struct http_server;

/*
 * Parses "HOST:PORT", "[V6]:PORT" or ":PORT" (all addresses) into cfg's
 * addr. Returns 0, or -1 with err saying what is wrong.
 */
int http_listen_parse(const char *s, struct http_config *cfg,
                      struct ng_error *err) __attribute__((warn_unused_result));

/*
 * Starts listening and serving with the snapshots of r (borrowed: it must
 * outlive the server). cfg is copied, the strings it points to are
 * borrowed. Only one server may run in a process, because GnuTLS's
 * certificate callback carries no user pointer. Returns NULL with err set
 * when the address cannot be bound or TLS cannot be set up.
 */
struct http_server *http_server_start(const struct http_config *cfg,
                                      struct reload *r, struct ng_error *err)
    __attribute__((warn_unused_result));

/* The port actually bound (useful with port 0). */
uint16_t http_server_port(const struct http_server *s);

/*
 * Stops accepting new connections; /readyz answers 503 and answers carry
 * "Connection: close" from now on. Requests in flight go on.
 */
void http_server_quiesce(struct http_server *s);

/*
 * Waits until no request has been in flight for a short moment, at most
 * timeout_ms. Returns true when drained, false on timeout.
 */
bool http_server_drain(struct http_server *s, unsigned int timeout_ms);

/* Closes every connection and frees the server. NULL is a no-op. */
void http_server_stop(struct http_server *s);

#endif
