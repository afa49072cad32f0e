/* Unit tests for server/metrics: counters, histogram, exposition text. */
#include "server/metrics.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* The value on the line that starts with name followed by a space. */
static long long
value_of(const char *text, const char *name)
{
    size_t n = strlen(name);
    const char *p = text;

    while ((p = strstr(p, name)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtoll(p + n + 1, NULL, 10);
        p += n;
    }
    return -1;
}

int
main(void)
{
    struct metrics_gauges g = {0};
    char *text;
    size_t len = 0;

    metrics_reset();
    metrics_admission_record(REVIEW_PATCHED, 40, 5, 1);      /* <= 50 us */
    metrics_admission_record(REVIEW_PATCHED, 900, 3, 0);     /* <= 1 ms */
    metrics_admission_record(REVIEW_NOT_GPU, 2000000, 0, 0); /* +Inf */
    metrics_admission_record(REVIEW_ERROR, 100, 0, 2);
    metrics_http_record(200);
    metrics_http_record(413);
    metrics_http_record(418);
    metrics_policy_reload_record(1);
    metrics_policy_reload_record(0);
    metrics_policy_reload_record(0);
    metrics_cert_reload_record(0);

    g.policy_loaded = 1;
    g.policy_generation = 3;
    g.policy_hash = "abc123";
    g.cert_loaded = 1;
    g.cert_generation = 2;
    g.cert_not_after = 1800000000;
    g.in_flight = 4;
    text = metrics_render(&g, &len);
    CHECK(text != NULL);
    if (text == NULL)
        return harness_finish();
    CHECK_INT(len, strlen(text));
    /* The page has room to grow under its cap: a quarter of it at most, so
     * that new families get noticed here before scrapes start failing. */
    if (len > METRICS_PAGE_MAX / 4)
        fprintf(stderr, "metrics page is %zu bytes\n", len);
    CHECK(len <= METRICS_PAGE_MAX / 4);

    CHECK_INT(value_of(text, "ncclguard_admissions_total{result=\"patched\"}"),
              2);
    CHECK_INT(value_of(text, "ncclguard_admissions_total{result=\"not_gpu\"}"),
              1);
    CHECK_INT(value_of(text, "ncclguard_admissions_total{result=\"error\"}"),
              1);
    /* Buckets are cumulative. */
    CHECK_INT(value_of(text, "ncclguard_admission_duration_seconds_bucket"
                             "{le=\"5e-05\"}"),
              1);
    CHECK_INT(value_of(text, "ncclguard_admission_duration_seconds_bucket"
                             "{le=\"0.0001\"}"),
              2);
    CHECK_INT(value_of(text, "ncclguard_admission_duration_seconds_bucket"
                             "{le=\"0.001\"}"),
              3);
    CHECK_INT(value_of(text, "ncclguard_admission_duration_seconds_bucket"
                             "{le=\"1\"}"),
              3);
    CHECK_INT(value_of(text, "ncclguard_admission_duration_seconds_bucket"
                             "{le=\"+Inf\"}"),
              4);
    CHECK_INT(value_of(text, "ncclguard_admission_duration_seconds_count"), 4);
    CHECK(strstr(text, "ncclguard_admission_duration_seconds_sum 2.001040\n") !=
          NULL);
    CHECK_INT(value_of(text, "ncclguard_patch_operations_total"), 8);
    CHECK_INT(value_of(text, "ncclguard_patched_pods_total"), 2);
    CHECK_INT(value_of(text, "ncclguard_warnings_total"), 3);
    CHECK_INT(value_of(text, "ncclguard_errors_total"), 1);
    CHECK_INT(value_of(text, "ncclguard_http_responses_total{code=\"200\"}"),
              1);
    CHECK_INT(value_of(text, "ncclguard_http_responses_total{code=\"413\"}"),
              1);
    CHECK_INT(value_of(text, "ncclguard_http_responses_total{code=\"other\"}"),
              1);
    CHECK_INT(value_of(text, "ncclguard_policy_reloads_total"), 1);
    CHECK_INT(value_of(text, "ncclguard_policy_reload_errors_total"), 2);
    CHECK_INT(value_of(text, "ncclguard_policy_generation"), 3);
    CHECK_INT(value_of(text, "ncclguard_policy_info{hash=\"abc123\"}"), 1);
    CHECK_INT(value_of(text, "ncclguard_cert_reload_errors_total"), 1);
    CHECK_INT(value_of(text, "ncclguard_cert_generation"), 2);
    CHECK_INT(value_of(text, "ncclguard_cert_not_after_seconds"), 1800000000);
    CHECK_INT(value_of(text, "ncclguard_requests_in_flight"), 4);
    /* Every family has HELP and TYPE, and the text ends with a newline. */
    CHECK(strstr(text, "# TYPE ncclguard_admission_duration_seconds "
                       "histogram\n") != NULL);
    CHECK(strstr(text, "# TYPE ncclguard_admissions_total counter\n") != NULL);
    CHECK(len > 0 && text[len - 1] == '\n');
    free(text);

    /* A hash that could break the exposition is not printed as is. */
    g.policy_hash = "a\"b\nc";
    text = metrics_render(&g, &len);
    CHECK(text != NULL && strstr(text, "{hash=\"invalid\"} 1") != NULL);
    free(text);

    /* Out-of-range results are counted as errors, not out of bounds. */
    metrics_reset();
    metrics_admission_record((enum review_result)99, 1, 0, 0);
    g.policy_hash = "x";
    text = metrics_render(&g, &len);
    CHECK(text != NULL &&
          value_of(text, "ncclguard_admissions_total{result=\"error\"}") == 1);
    free(text);
    return harness_finish();
}
