/* Prometheus counters and gauges for the webhook, kept in lock-free atomics. */
#ifndef NCCLGUARD_METRICS_H
#define NCCLGUARD_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "admission/review.h"

/* Latency histogram bucket upper bounds, in microseconds (+Inf is last). */
#define METRICS_N_BUCKETS 14

/*
 * Counts one answered AdmissionReview: its result, how long it took, how
 * many patch operations and warnings it carried. Thread-safe, lock-free.
 */
void metrics_admission_record(enum review_result result, uint64_t micros,
                              size_t patch_ops, size_t warnings);

/*
 * Counts one HTTP answer by status code class of interest (every request,
 * admission or not). Thread-safe, lock-free.
 */
void metrics_http_record(int status);

/* Counts one policy reload attempt. Thread-safe. */
void metrics_policy_reload_record(int ok);

/* Sets the gauge that says whether the policy file on disk currently
 * fails to load (the last good policy is still served). Thread-safe. */
void metrics_policy_reload_failing_set(int failing);

/* Counts one certificate reload attempt. Thread-safe. */
void metrics_cert_reload_record(int ok);

/* Counts one failed TLS client-certificate check. Thread-safe. */
void metrics_client_cert_reject_record(void);

/* Why the server closed a connection before its request was complete. */
enum metrics_close_reason {
    METRICS_CLOSE_DEADLINE = 0, /* handshake+headers or body deadline */
    METRICS_CLOSE_SHED,         /* slots ran short; oldest incomplete shed */
    METRICS_CLOSE_BUDGET,       /* body refused: buffer budget exhausted */
    METRICS_CLOSE_N
};

/* Counts one connection closed (or body refused) for reason. Thread-safe. */
void metrics_connection_close_record(enum metrics_close_reason reason);

/* State read from the current snapshots when /metrics is scraped. */
struct metrics_gauges {
    int policy_loaded;
    uint64_t policy_generation;
    const char *policy_hash; /* borrowed; may be NULL */
    int cert_loaded;
    uint64_t cert_generation;
    int64_t cert_not_after; /* Unix seconds */
    uint64_t in_flight;
    uint64_t connections_open;
    uint64_t body_bytes;  /* request body buffers held now */
    uint64_t body_budget; /* their global cap */
};

/* Largest page metrics_render() writes. The page is about 5 KiB and its
 * size is fixed by the code (no label comes from a request), so the cap only
 * stops a bug from growing a scrape's answer without bound; a test keeps
 * the page well below it. */
#define METRICS_PAGE_MAX (64 * 1024)

/*
 * Writes the Prometheus text exposition (version 0.0.4) into a new buffer
 * and returns it (free with free()), its length in *len. Returns NULL on
 * allocation failure, or when the page would pass METRICS_PAGE_MAX. The
 * counters are read one by one, so a scrape during traffic may see a request in
 * one counter and not yet in another. Thread-safe.
 */
char *metrics_render(const struct metrics_gauges *g, size_t *len)
    __attribute__((warn_unused_result));

/* Zeroes every counter (tests only; not safe while requests run). */
void metrics_reset(void);

#endif
