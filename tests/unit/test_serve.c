/* Unit tests for server/serve: the option table. Every option has a flag
 * and an environment variable named after it, one default that its own
 * parser accepts within its bounds, and values out of bounds are refused
 * with a message naming the option, the value and the bounds. */
#include "server/serve.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "policy/policy.h"

/* "NCCLGUARD_MAX_CONNECTIONS" for "max-connections". */
static void
env_of(const char *flag, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "NCCLGUARD_");

    for (; *flag != '\0' && k + 1 < n; flag++)
        buf[k++] = *flag == '-' ? '_' : (char)toupper((unsigned char)*flag);
    buf[k] = '\0';
}

/* Bounds as a user writes them, the way messages and --help show them. */
static void
bound_text(const struct serve_option *o, unsigned long long v, char *buf,
           size_t n)
{
    static const struct {
        unsigned long long unit;
        const char *suffix;
    } units[] = {{1ULL << 30, "Gi"}, {1ULL << 20, "Mi"}, {1ULL << 10, "Ki"}};

    if (o->kind == SERVE_OPT_BYTES && v != 0)
        for (size_t i = 0; i < 3; i++)
            if (v % units[i].unit == 0) {
                snprintf(buf, n, "%llu%s", v / units[i].unit, units[i].suffix);
                return;
            }
    snprintf(buf, n, "%llu", v);
}

/* Checks that value v (as text) is refused for o with exactly
 * "LABEL: V is out of range LO..HI". */
static void
check_out_of_range(const struct serve_option *o, const char *label,
                   const char *v)
{
    char msg[320], want[320], lo[32], hi[32];
    unsigned long long got = 12345;

    bound_text(o, o->min, lo, sizeof(lo));
    bound_text(o, o->max, hi, sizeof(hi));
    snprintf(want, sizeof(want), "%s: %s is out of range %s..%s", label, v, lo,
             hi);
    msg[0] = '\0';
    CHECK_INT(serve_option_parse(o, label, v, &got, msg, sizeof(msg)), -1);
    CHECK_STR(msg, want);
    CHECK_INT(got, 12345); /* left alone on failure */
}

static void
check_table(void)
{
    size_t n = 0;
    const struct serve_option *opts = serve_options(&n);
    size_t n_ranged = 0;

    CHECK(n >= 18);
    for (size_t i = 0; i < n; i++) {
        const struct serve_option *o = &opts[i];
        char env[64], flag[64], msg[320], v[48];
        unsigned long long got = 0;
        int n_defaults;

        CHECK(o->flag != NULL && o->flag[0] != '\0');
        if (o->flag == NULL)
            continue;
        CHECK(o->help != NULL && o->help[0] != '\0');
        for (size_t j = 0; j < i; j++)
            if (strcmp(opts[j].flag, o->flag) == 0) {
                fprintf(stderr, "flag --%s twice\n", o->flag);
                CHECK(0);
            }
        snprintf(flag, sizeof(flag), "--%s", o->flag);
        if (o->kind == SERVE_OPT_SWITCH) {
            CHECK(o->env == NULL && o->arg == NULL && o->def == NULL);
            continue;
        }
        env_of(o->flag, env, sizeof(env));
        CHECK_STR(o->env, env);
        CHECK(o->arg != NULL && o->arg[0] != '\0');

        /* One source of the default at most; a required option has none,
         * a computed one says in words what it is. */
        n_defaults =
            (o->def != NULL) + (o->def_env != NULL) + (o->def_fn != NULL);
        CHECK(n_defaults <= 1);
        if (o->required)
            CHECK_INT(n_defaults, 0);
        if (o->def_fn != NULL)
            CHECK(o->def_doc != NULL && o->def_doc[0] != '\0');
        if (o->kind != SERVE_OPT_TEXT) {
            /* Numbers, bytes and levels always have a value. */
            if (n_defaults != 1)
                fprintf(stderr, "--%s has no default\n", o->flag);
            CHECK_INT(n_defaults, 1);
        }

        /* A fixed default is accepted by the option's own parser, so it
         * lies within the bounds. */
        if (o->def != NULL) {
            msg[0] = '\0';
            if (serve_option_parse(o, flag, o->def, &got, msg, sizeof(msg)) !=
                0) {
                fprintf(stderr, "default of --%s refused: %s\n", o->flag, msg);
                CHECK(0);
            }
            if (o->kind == SERVE_OPT_NUMBER || o->kind == SERVE_OPT_BYTES)
                CHECK(got >= o->min && got <= o->max);
        }
        if (o->kind != SERVE_OPT_NUMBER && o->kind != SERVE_OPT_BYTES) {
            CHECK(o->min == 0 && o->max == 0 && o->zero == NULL);
            continue;
        }

        /* Bounds: sane, what 0 means only where 0 is allowed, and values
         * on either side refused with the bounds named, from a flag and
         * from the environment. */
        n_ranged++;
        CHECK(o->min <= o->max);
        CHECK(o->max < ~0ULL);
        if (o->zero != NULL)
            CHECK_INT(o->min, 0);
        bound_text(o, o->min, v, sizeof(v));
        CHECK_INT(serve_option_parse(o, flag, v, &got, msg, sizeof(msg)), 0);
        CHECK(got == o->min);
        bound_text(o, o->max, v, sizeof(v));
        CHECK_INT(serve_option_parse(o, flag, v, &got, msg, sizeof(msg)), 0);
        CHECK(got == o->max);
        if (o->min > 0) {
            snprintf(v, sizeof(v), "%llu", o->min - 1);
            check_out_of_range(o, flag, v);
            check_out_of_range(o, env, v);
        }
        snprintf(v, sizeof(v), "%llu", o->max + 1);
        check_out_of_range(o, flag, v);
        check_out_of_range(o, env, v);
        check_out_of_range(o, flag, "99999999999999999999999999");
    }
    CHECK(n_ranged >= 9);
}

/* The messages exactly as a user sees them (after "ncclguard serve: "). */
static void
check_messages(void)
{
    static const struct {
        const char *flag, *label, *value, *want;
    } cases[] = {
        {"max-connections", "--max-connections", "0",
         "--max-connections: 0 is out of range 1..1000000"},
        {"max-connections", "NCCLGUARD_MAX_CONNECTIONS", "1000001",
         "NCCLGUARD_MAX_CONNECTIONS: 1000001 is out of range 1..1000000"},
        {"threads", "--threads", "0", "--threads: 0 is out of range 1..256"},
        {"threads", "--threads", "x",
         "--threads x: expected a whole number from 1 to 256"},
        {"threads", "NCCLGUARD_THREADS", "-1",
         "NCCLGUARD_THREADS=-1: expected a whole number from 1 to 256"},
        {"max-body", "--max-body", "1023",
         "--max-body: 1023 is out of range 1Ki..1Gi"},
        {"max-body", "--max-body", "2Gi",
         "--max-body: 2Gi is out of range 1Ki..1Gi"},
        {"max-body", "--max-body", "lots",
         "--max-body lots: expected bytes, e.g. 4194304 or 4Mi"},
        {"max-body", "--max-body", "Mi",
         "--max-body Mi: expected bytes, e.g. 4194304 or 4Mi"},
        {"memory-limit", "--memory-limit", "1023Ki",
         "--memory-limit: 1023Ki is out of range 1Mi..1048576Gi"},
        {"min-body-rate", "--min-body-rate", "1048577Ki",
         "--min-body-rate: 1048577Ki is out of range 0..1Gi"},
        {"log-level", "--log-level", "loud",
         "--log-level loud: expected debug, info, warn or error"},
        {"log-level", "NCCLGUARD_LOG_LEVEL", "verbose",
         "NCCLGUARD_LOG_LEVEL=verbose: expected debug, info, warn or error"},
    };
    static const struct {
        const char *flag, *value;
        unsigned long long want;
    } good[] = {
        {"max-body", "4Mi", 4ULL << 20},
        {"max-body", "1Gi", 1ULL << 30},
        {"max-body", "1024", 1024},
        {"min-body-rate", "0", 0},
        {"threads", "256", 256},
        {"memory-limit", "256Mi", 256ULL << 20},
    };
    size_t n = 0;
    const struct serve_option *opts = serve_options(&n);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char msg[320] = "";
        unsigned long long got = 0;
        const struct serve_option *o = NULL;
        for (size_t j = 0; j < n; j++)
            if (strcmp(opts[j].flag, cases[i].flag) == 0)
                o = &opts[j];
        CHECK(o != NULL);
        if (o == NULL)
            continue;
        CHECK_INT(serve_option_parse(o, cases[i].label, cases[i].value, &got,
                                     msg, sizeof(msg)),
                  -1);
        CHECK_STR(msg, cases[i].want);
    }
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char msg[320] = "";
        unsigned long long got = 0;
        for (size_t j = 0; j < n; j++)
            if (strcmp(opts[j].flag, good[i].flag) == 0) {
                CHECK_INT(serve_option_parse(&opts[j], "--x", good[i].value,
                                             &got, msg, sizeof(msg)),
                          0);
                CHECK(got == good[i].want);
            }
    }
}

/* The ring-check image is built into policy/: --help must name that one. */
static void
check_ringcheck_image(void)
{
    static const char yaml[] = "apiVersion: ncclguard.io/v1alpha1\n"
                               "kind: Policy\n";
    size_t n = 0;
    const struct serve_option *opts = serve_options(&n);
    struct ng_error e;
    struct policy *p;
    const char *doc = NULL;

    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i].flag, "ringcheck-image") == 0)
            doc = opts[i].def_doc;
    ng_error_clear(&e);
    p = policy_load(yaml, sizeof(yaml) - 1, "test.yaml", &e);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    CHECK_STR(doc, policy_defaults(p)->ringcheck.image);
    policy_free(p);
}

int
main(void)
{
    check_table();
    check_messages();
    check_ringcheck_image();
    return harness_finish();
}
