/* Unit tests for base/opts.c: the option values both node programs read
 * (ncclguard-watchdog's --metrics-port and --max-procs, ncclguard-nodeloop's
 * --threshold, --validation-timeout and --metrics-port) and their API
 * server from the pod's environment. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/opts.h"
#include "harness.h"

struct long_case {
    const char *in;
    long min, max;
    int rc;
    long want; /* when rc is 0 */
};

static const struct long_case long_cases[] = {
    {"0", 0, 65535, 0, 0},
    {"65535", 0, 65535, 0, 65535},
    {"65536", 0, 65535, -1, 0},
    {"-1", 0, 65535, -1, 0},
    {"1", 1, 1000000, 0, 1},
    {"0", 1, 1000000, -1, 0},
    {"1000000", 1, 1000000, 0, 1000000},
    {"1000001", 1, 1000000, -1, 0},
    {"3600", 1, 3600, 0, 3600},
    {"12x", 0, 65535, -1, 0},
    {"x", 0, 65535, -1, 0},
    {"1.5", 0, 65535, -1, 0},
    {"8 ", 0, 65535, -1, 0},
    {"99999999999999999999999", LONG_MIN, LONG_MAX, -1, 0}, /* ERANGE */
    /* As strtol(3) reads it, which both programs always did: leading
     * white space and a sign are taken, and "" is 0. */
    {" 8", 0, 65535, 0, 8},
    {"+8", 0, 65535, 0, 8},
    {"", 0, 65535, 0, 0},
    {"", 1, 3600, -1, 0},
};

static void
test_long(void)
{
    for (size_t i = 0; i < sizeof(long_cases) / sizeof(long_cases[0]); i++) {
        const struct long_case *c = &long_cases[i];
        long v = 4242;
        int rc = opts_long(c->in, c->min, c->max, &v);

        CHECK_INT(rc, c->rc);
        if (rc != c->rc)
            fprintf(stderr, "  input \"%s\" in [%ld, %ld]\n", c->in, c->min,
                    c->max);
        /* Untouched on failure. */
        CHECK_INT(v, c->rc == 0 ? c->want : 4242);
    }
}

static void
test_in_cluster_api(void)
{
    char buf[300], tiny[16];

    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    snprintf(buf, sizeof(buf), "untouched");
    CHECK(opts_in_cluster_api(buf, sizeof(buf)) == NULL);
    CHECK_STR(buf, "untouched");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    CHECK(opts_in_cluster_api(buf, sizeof(buf)) == NULL); /* no port */
    CHECK_STR(buf, "untouched");
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    CHECK(opts_in_cluster_api(buf, sizeof(buf)) == buf);
    CHECK_STR(buf, "https://10.96.0.1:443");
    /* An IPv6 service address goes in brackets (RFC 3986 section 3.2.2). */
    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    CHECK(opts_in_cluster_api(buf, sizeof(buf)) == buf);
    CHECK_STR(buf, "https://[fd00:10:96::1]:443");
    /* A buffer too small cuts the URL, NUL-terminated. */
    CHECK(opts_in_cluster_api(tiny, sizeof(tiny)) == tiny);
    CHECK_STR(tiny, "https://[fd00:1");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

int
main(void)
{
    test_long();
    test_in_cluster_api();
    return harness_finish();
}
