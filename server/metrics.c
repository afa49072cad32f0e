/* Prometheus counters and gauges for the webhook, kept in lock-free atomics. */
#include "server/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "version.h"

static const uint64_t bucket_us[METRICS_N_BUCKETS - 1] = {
    50,    100,   250,   500,    1000,   2500,   5000,
    10000, 25000, 50000, 100000, 250000, 1000000};

static const char *const bucket_le[METRICS_N_BUCKETS] = {
    "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005",
    "0.01",  "0.025",  "0.05",    "0.1",    "0.25",  "1",      "+Inf"};

/* Status codes counted separately; anything else lands in "other". */
static const int http_codes[] = {200, 400, 403, 404, 405, 413, 415, 500, 503};
#define N_HTTP_CODES (sizeof(http_codes) / sizeof(http_codes[0]))

/*
 * Counters are relaxed atomics: each is exact on its own, and a scrape
 * needs no ordering between them. The hot ones sit on their own cache
 * lines so that two workers bumping different counters do not bounce one
 * line between cores.
 */
struct counters {
    _Alignas(64) atomic_uint_fast64_t admissions[REVIEW_RESULT_COUNT];
    _Alignas(64) atomic_uint_fast64_t buckets[METRICS_N_BUCKETS];
    atomic_uint_fast64_t latency_sum_us;
    atomic_uint_fast64_t latency_count;
    _Alignas(64) atomic_uint_fast64_t patch_ops;
    atomic_uint_fast64_t patched;
    atomic_uint_fast64_t warnings;
    atomic_uint_fast64_t errors;
    _Alignas(64) atomic_uint_fast64_t http[N_HTTP_CODES + 1];
    _Alignas(64) atomic_uint_fast64_t policy_reloads;
    atomic_uint_fast64_t policy_reload_errors;
    atomic_uint_fast64_t cert_reloads;
    atomic_uint_fast64_t cert_reload_errors;
    atomic_uint_fast64_t client_cert_rejects;
    atomic_uint_fast64_t closes[METRICS_CLOSE_N];
    atomic_uint_fast64_t policy_reload_failing; /* 0 or 1 */
};

static struct counters c;

static inline void
bump(atomic_uint_fast64_t *a, uint64_t n)
{
    atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

static inline uint64_t
get(atomic_uint_fast64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

void
metrics_admission_record(enum review_result result, uint64_t micros,
                         size_t patch_ops, size_t warnings)
{
    size_t b = 0;

    if ((int)result < 0 || result >= REVIEW_RESULT_COUNT)
        result = REVIEW_ERROR;
    bump(&c.admissions[result], 1);
    while (b < METRICS_N_BUCKETS - 1 && micros > bucket_us[b])
        b++;
    bump(&c.buckets[b], 1);
    bump(&c.latency_sum_us, micros);
    bump(&c.latency_count, 1);
    if (patch_ops > 0) {
        bump(&c.patch_ops, patch_ops);
        bump(&c.patched, 1);
    }
    if (warnings > 0)
        bump(&c.warnings, warnings);
    if (result == REVIEW_ERROR)
        bump(&c.errors, 1);
}

void
metrics_http_record(int status)
{
    size_t i;

    for (i = 0; i < N_HTTP_CODES; i++)
        if (http_codes[i] == status)
            break;
    bump(&c.http[i], 1);
}

void
metrics_policy_reload_record(int ok)
{
    bump(ok ? &c.policy_reloads : &c.policy_reload_errors, 1);
}

void
metrics_policy_reload_failing_set(int failing)
{
    atomic_store_explicit(&c.policy_reload_failing, failing ? 1 : 0,
                          memory_order_relaxed);
}

void
metrics_cert_reload_record(int ok)
{
    bump(ok ? &c.cert_reloads : &c.cert_reload_errors, 1);
}

void
metrics_client_cert_reject_record(void)
{
    bump(&c.client_cert_rejects, 1);
}

void
metrics_connection_close_record(enum metrics_close_reason reason)
{
    if ((int)reason >= 0 && reason < METRICS_CLOSE_N)
        bump(&c.closes[reason], 1);
}

void
metrics_reset(void)
{
    memset(&c, 0, sizeof(c));
}

/* The page being written; once an append fails, `failed` sticks and the
 * rest is skipped. */
struct out {
    struct buf b;
    int failed;
};

static void out_printf(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
out_printf(struct out *o, const char *fmt, ...)
{
    va_list ap;

    if (o->failed)
        return;
    va_start(ap, fmt);
    if (buf_addvf(&o->b, fmt, ap) != 0)
        o->failed = 1;
    va_end(ap);
}

/* Writes the HELP and TYPE lines of one metric family. */
static void
family(struct out *o, const char *name, const char *type, const char *help)
{
    out_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Policy hashes are hex digests; anything else is dropped from the label
 * so that the exposition can never be broken by a quote or newline. */
static const char *
safe_label(const char *s)
{
    if (s == NULL)
        return "";
    for (const char *p = s; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '_' || *p == '.' ||
              *p == ':'))
            return "invalid";
    return s;
}

char *
metrics_render(const struct metrics_gauges *g, size_t *len)
{
    struct out o = {.failed = 0};
    uint64_t cum = 0;

    buf_init(&o.b, METRICS_PAGE_MAX);

    family(&o, "ncclguard_build_info", "gauge",
           "Always 1; the version label is the running build's.");
    out_printf(&o, "ncclguard_build_info{version=\"%s\"} 1\n",
               safe_label(NCCLGUARD_VERSION));
    family(&o, "ncclguard_admissions_total", "counter",
           "AdmissionReviews answered, by result.");
    for (int r = 0; r < REVIEW_RESULT_COUNT; r++)
        out_printf(&o, "ncclguard_admissions_total{result=\"%s\"} %llu\n",
                   review_result_name((enum review_result)r),
                   (unsigned long long)get(&c.admissions[r]));

    family(&o, "ncclguard_admission_duration_seconds", "histogram",
           "Time from the request's headers to the queued answer.");
    for (int b = 0; b < METRICS_N_BUCKETS; b++) {
        cum += get(&c.buckets[b]);
        out_printf(&o,
                   "ncclguard_admission_duration_seconds_bucket{le=\"%s\"} "
                   "%llu\n",
                   bucket_le[b], (unsigned long long)cum);
    }
    {
        uint64_t sum = get(&c.latency_sum_us);
        out_printf(&o,
                   "ncclguard_admission_duration_seconds_sum %llu.%06llu\n"
                   "ncclguard_admission_duration_seconds_count %llu\n",
                   (unsigned long long)(sum / 1000000),
                   (unsigned long long)(sum % 1000000),
                   (unsigned long long)cum);
    }

    family(&o, "ncclguard_patched_pods_total", "counter",
           "Admissions answered with a non-empty JSON patch.");
    out_printf(&o, "ncclguard_patched_pods_total %llu\n",
               (unsigned long long)get(&c.patched));
    family(&o, "ncclguard_patch_operations_total", "counter",
           "JSON patch operations sent.");
    out_printf(&o, "ncclguard_patch_operations_total %llu\n",
               (unsigned long long)get(&c.patch_ops));
    family(&o, "ncclguard_warnings_total", "counter",
           "Warnings returned to the API server.");
    out_printf(&o, "ncclguard_warnings_total %llu\n",
               (unsigned long long)get(&c.warnings));
    family(&o, "ncclguard_errors_total", "counter",
           "Internal failures answered allowed with no patch.");
    out_printf(&o, "ncclguard_errors_total %llu\n",
               (unsigned long long)get(&c.errors));

    family(&o, "ncclguard_http_responses_total", "counter",
           "HTTP responses, by status code.");
    for (size_t i = 0; i <= N_HTTP_CODES; i++) {
        if (i < N_HTTP_CODES)
            out_printf(&o, "ncclguard_http_responses_total{code=\"%d\"} %llu\n",
                       http_codes[i], (unsigned long long)get(&c.http[i]));
        else
            out_printf(&o,
                       "ncclguard_http_responses_total{code=\"other\"} %llu\n",
                       (unsigned long long)get(&c.http[i]));
    }

    family(&o, "ncclguard_policy_reloads_total", "counter",
           "Policy files loaded and swapped in after start.");
    out_printf(&o, "ncclguard_policy_reloads_total %llu\n",
               (unsigned long long)get(&c.policy_reloads));
    family(&o, "ncclguard_policy_reload_errors_total", "counter",
           "Policy reloads refused; the last good policy kept serving.");
    out_printf(&o, "ncclguard_policy_reload_errors_total %llu\n",
               (unsigned long long)get(&c.policy_reload_errors));
    family(&o, "ncclguard_policy_reload_failing", "gauge",
           "1 while the policy file on disk fails to load and the last good "
           "policy is served.");
    out_printf(&o, "ncclguard_policy_reload_failing %llu\n",
               (unsigned long long)get(&c.policy_reload_failing));
    family(&o, "ncclguard_policy_generation", "gauge",
           "Generation of the policy in force (1 at start, +1 per reload).");
    out_printf(&o, "ncclguard_policy_generation %llu\n",
               (unsigned long long)g->policy_generation);
    family(&o, "ncclguard_policy_info", "gauge",
           "The policy in force, by SHA-256 of its text.");
    if (g->policy_loaded)
        out_printf(&o, "ncclguard_policy_info{hash=\"%s\"} 1\n",
                   safe_label(g->policy_hash));

    family(&o, "ncclguard_cert_reloads_total", "counter",
           "Certificate pairs loaded and swapped in after start.");
    out_printf(&o, "ncclguard_cert_reloads_total %llu\n",
               (unsigned long long)get(&c.cert_reloads));
    family(&o, "ncclguard_cert_reload_errors_total", "counter",
           "Certificate reloads refused; the last good pair kept serving.");
    out_printf(&o, "ncclguard_cert_reload_errors_total %llu\n",
               (unsigned long long)get(&c.cert_reload_errors));
    family(&o, "ncclguard_cert_generation", "gauge",
           "Generation of the serving certificate in force.");
    out_printf(&o, "ncclguard_cert_generation %llu\n",
               (unsigned long long)g->cert_generation);
    family(&o, "ncclguard_cert_not_after_seconds", "gauge",
           "Expiry of the serving certificate, Unix time.");
    if (g->cert_loaded)
        out_printf(&o, "ncclguard_cert_not_after_seconds %lld\n",
                   (long long)g->cert_not_after);
    family(&o, "ncclguard_client_cert_rejects_total", "counter",
           "Requests refused for a missing or untrusted client certificate.");
    out_printf(&o, "ncclguard_client_cert_rejects_total %llu\n",
               (unsigned long long)get(&c.client_cert_rejects));
    family(&o, "ncclguard_requests_in_flight", "gauge",
           "Requests being handled now.");
    out_printf(&o, "ncclguard_requests_in_flight %llu\n",
               (unsigned long long)g->in_flight);
    family(&o, "ncclguard_connections_open", "gauge",
           "Client connections open now, handshakes included.");
    out_printf(&o, "ncclguard_connections_open %llu\n",
               (unsigned long long)g->connections_open);
    family(&o, "ncclguard_connections_cut_total", "counter",
           "Connections closed or bodies refused by the server's transport "
           "limits, by reason.");
    {
        static const char *const why[METRICS_CLOSE_N] = {"deadline", "shed",
                                                         "budget"};
        for (int i = 0; i < METRICS_CLOSE_N; i++)
            out_printf(&o,
                       "ncclguard_connections_cut_total{reason=\"%s\"} "
                       "%llu\n",
                       why[i], (unsigned long long)get(&c.closes[i]));
    }
    family(&o, "ncclguard_body_buffer_bytes", "gauge",
           "Bytes of request-body buffers held now.");
    out_printf(&o, "ncclguard_body_buffer_bytes %llu\n",
               (unsigned long long)g->body_bytes);
    family(&o, "ncclguard_body_budget_bytes", "gauge",
           "Cap on request-body buffers, derived from the memory limit.");
    out_printf(&o, "ncclguard_body_budget_bytes %llu\n",
               (unsigned long long)g->body_budget);

    if (o.failed) {
        buf_release(&o.b);
        return NULL;
    }
    return buf_take(&o.b, len);
}
