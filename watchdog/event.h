/* The Kubernetes Event the watchdog posts about a hang: one POST to the API
 * server with the agent's service-account token, through libcurl. */
#ifndef NCCLGUARD_WD_EVENT_H
#define NCCLGUARD_WD_EVENT_H

#include <stddef.h>

/* Where Events go. Strings are borrowed. */
struct wd_event_cfg {
    const char *api_server; /* "https://10.96.0.1:443"; NULL/"" = off */
    const char *token_file; /* the service-account token, read per POST */
    const char *ca_file;    /* CA bundle for https; NULL = system's */
    long timeout_ms;
};

/*
 * POSTs body (a JSON Event, NUL-terminated) to
 * <api_server>/api/v1/namespaces/<ns>/events. Returns the HTTP status
 * (201 on success), or -1 with why filled when no answer came (token
 * unreadable, connection refused, timeout). The token is wiped from
 * memory after use. Blocks for at most cfg->timeout_ms. Not thread-safe
 * (one agent thread).
 */
long wd_event_post(const struct wd_event_cfg *cfg, const char *ns,
                   const char *body, char *why, size_t wn);

/*
 * GETs <api_server><path> with the service-account token. The body goes
 * into a buffer of at most cap bytes (NUL-terminated), returned in *body
 * for the caller to free(); a larger answer fails. Returns the HTTP status
 * (200 on success), or -1 with why filled. Blocks for at most
 * cfg->timeout_ms. Not thread-safe (one agent thread).
 */
long wd_api_get(const struct wd_event_cfg *cfg, const char *path, size_t cap,
                char **body, size_t *len, char *why, size_t wn);

/* libcurl's global set-up and tear-down, once per process. */
int wd_event_global_init(void) __attribute__((warn_unused_result));
void wd_event_global_cleanup(void);

/*
 * Reads a service-account token file (one line, at most n - 1 bytes,
 * printable, the trailing newline dropped) into buf, for an Authorization
 * header. Returns 0, or -1 (errno from open or read, or 0 for an empty or
 * unprintable token). The caller wipes buf. Thread-safe.
 */
int wd_token_read(const char *path, char *buf, size_t n)
    __attribute__((warn_unused_result));

#endif
