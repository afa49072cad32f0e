/* A small Kubernetes API client for the node loop: one request with a
 * bounded answer, and a streaming watch split into lines (libcurl). */
#ifndef NCCLGUARD_NL_KUBE_H
#define NCCLGUARD_NL_KUBE_H

#include <stddef.h>

#include "base/buf.h"

/* Where the API server is. Strings are borrowed. */
struct kube_client {
    const char *api_server; /* "https://10.96.0.1:443" or http://... */
    const char *token_file; /* read per request (tokens rotate); NULL none */
    const char *ca_file;    /* NULL: the system's CA bundle */
    long timeout_ms;        /* per plain request */
    /* Who is asking, for the apiserver's audit log and managedFields:
     * sent as the User-Agent header on every request, and as the
     * fieldManager query parameter of every write (POST, PUT, PATCH),
     * which the apiserver otherwise derives from the User-Agent. NULL:
     * libcurl's default and none. */
    const char *user_agent;    /* "ncclguard-node-loop/0.1.0" */
    const char *field_manager; /* "ncclguard-node-loop" */
};

/*
 * Sends one request (method "GET", "POST", "PATCH", "DELETE") to
 * api_server + path with body (NUL-terminated, or NULL) and the given
 * Content-Type. The answer goes into *resp (released and set up again
 * first, with a cap of 8 MiB: more fails; free it with buf_release; resp->p
 * is NULL for an empty answer). Returns the HTTP status, or -1 with why filled
 * when no answer came. Safe from several threads: the client is only read and
 * each call has a curl handle of its own.
 */
long kube_request(const struct kube_client *kc, const char *method,
                  const char *path, const char *content_type, const char *body,
                  struct buf *resp, char *why, size_t wn);

/*
 * Opens a watch (path carries ?watch=1&resourceVersion=...) and calls
 * on_line for each complete line the server sends (one watch event each,
 * at most 4 MiB), until the server ends the stream, the callback returns
 * non-zero (then the stream is closed), or max_ms pass. Returns the HTTP
 * status (200 for a stream that ended), or -1 with why filled (connection
 * refused, dropped mid-stream, a line over the cap).
 */
long kube_watch(const struct kube_client *kc, const char *path, long max_ms,
                int (*on_line)(const char *line, size_t len, void *ud),
                void *ud, char *why, size_t wn);

#endif
