/* /metrics and /healthz, served by a thread of their own, off the decision
 * loop: non-blocking sockets, a deadline per connection, a bounded number of
 * connections. The loop publishes the metrics text; the server never reads
 * the agent's state. */
#ifndef NCCLGUARD_WD_MSERVER_H
#define NCCLGUARD_WD_MSERVER_H

#include <stddef.h>

/* Connections served at once; a new one past this closes the oldest that
 * has not sent its request yet. */
#define WD_MSERVER_MAX_CONN 64
/* A connection's whole life: request in, response out. */
#define WD_MSERVER_DEADLINE_MS 2000
/* /healthz fails once the loop has not ticked for this long. */
#define WD_MSERVER_STALE_MS 60000

struct wd_mserver;

/*
 * Starts the server thread on listen_fd (bound and listening; consumed:
 * closed by wd_mserver_stop, or here on failure). Returns NULL when the
 * thread cannot start. The thread blocks SIGTERM, SIGINT and SIGPIPE, so
 * that signals reach the loop.
 */
struct wd_mserver *wd_mserver_start(int listen_fd);

/* Replaces the /metrics body with a copy of text (len bytes). Thread-safe;
 * called by the loop. Out of memory keeps the previous body. */
void wd_mserver_publish(struct wd_mserver *s, const char *text, size_t len);

/* The loop's heartbeat, its monotonic clock in ms. Thread-safe. */
void wd_mserver_tick(struct wd_mserver *s, long long now_ms);

/* Stops and joins the thread, closes every socket, frees s. NULL is a
 * no-op. */
void wd_mserver_stop(struct wd_mserver *s);

#endif
