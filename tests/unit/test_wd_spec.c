/* Unit tests for contract/wdspec.c: the NCCLGUARD_WATCHDOG format that the
 * webhook writes and the agent parses. */
#include <signal.h>
#include <string.h>

#include "contract/wdspec.h"
#include "harness.h"

struct ok_case {
    const char *in;
    long long period_ms;
    int idle;
    long long min_cpu_milli;
    enum wd_action action;
    int sig;
    const char *file;
    long long grace_ms;
    long long term_ms;
};

static const struct ok_case ok_cases[] = {
    {"", 60000, 5, 500, WD_ACTION_REPORT, 0, "", 120000, 30000},
    {"period=60s,idle=5", 60000, 5, 500, WD_ACTION_REPORT, 0, "", 120000,
     30000},
    {"period=200ms,idle=3,mincpu=0.25,action=restart,signal=SIGUSR1,"
     "file=/run/ncclguard-watchdog/checkpoint,grace=2m,term=45s",
     200, 3, 250, WD_ACTION_RESTART, SIGUSR1,
     "/run/ncclguard-watchdog/checkpoint", 120000, 45000},
    {"signal=USR2", 60000, 5, 500, WD_ACTION_REPORT, SIGUSR2, "", 120000,
     30000},
    {"signal=none,mincpu=2", 60000, 5, 2000, WD_ACTION_REPORT, 0, "", 120000,
     30000},
    {"mincpu=0", 60000, 5, 0, WD_ACTION_REPORT, 0, "", 120000, 30000},
    {"grace=0s,term=0ms", 60000, 5, 500, WD_ACTION_REPORT, 0, "", 0, 0},
    {"idle=1000,period=60m", 3600000, 1000, 500, WD_ACTION_REPORT, 0, "",
     120000, 30000},
    {"period=200ms,,", 200, 5, 500, WD_ACTION_REPORT, 0, "", 120000, 30000},
    {"file=", 60000, 5, 500, WD_ACTION_REPORT, 0, "", 120000, 30000},
};

struct bad_case {
    const char *in;
    const char *msg; /* a substring of the error */
};

static const struct bad_case bad_cases[] = {
    {"period=60", "needs a unit"},
    {"period=1h", "needs a unit"},
    {"period=-1s", "whole number"},
    {"period=199ms", "period must be between 200ms and 3600000ms"},
    {"period=61m", "period must be between"},
    {"period=99999999999999999999s", "too large"},
    {"idle=0", "idle must be between 1 and 1000"},
    {"idle=1001", "idle must be between"},
    {"idle=five", "whole number of periods"},
    {"idle=", "idle must not be empty"},
    {"mincpu=0.0005", "at most three decimals"},
    {"mincpu=-1", "mincpu must be cores"},
    {"mincpu=1025", "mincpu must be between"},
    {"mincpu=.5", "mincpu must be cores"},
    {"action=kill", "action must be report or restart"},
    {"signal=SIGTERM", "signal must be none or one of"},
    {"signal=SIGKILL", "signal must be none or one of"},
    {"signal=9", "signal must be none or one of"},
    {"file=relative/path", "absolute path"},
    {"file=/a b", "spaces or control"},
    {"grace=2h", "needs a unit"},
    {"bogus=1", "unknown key \"bogus\""},
    {"period", "is not key=value"},
    {"idle=3,idle=4", "given twice"},
};

static void
test_ok(void)
{
    for (size_t i = 0; i < sizeof(ok_cases) / sizeof(ok_cases[0]); i++) {
        const struct ok_case *c = &ok_cases[i];
        struct wd_spec s, back;
        struct ng_error e;
        char buf[512];
        int rc = wd_spec_parse(c->in, strlen(c->in), &s, &e);

        CHECK_INT(rc, 0);
        if (rc != 0) {
            fprintf(stderr, "  input \"%s\": %s\n", c->in, e.msg);
            continue;
        }
        CHECK_INT(s.period_ms, c->period_ms);
        CHECK_INT(s.idle_periods, c->idle);
        CHECK_INT(s.min_cpu_milli, c->min_cpu_milli);
        CHECK_INT(s.action, c->action);
        CHECK_INT(s.checkpoint_signal, c->sig);
        CHECK_STR(s.checkpoint_file, c->file);
        CHECK_INT(s.grace_ms, c->grace_ms);
        CHECK_INT(s.term_ms, c->term_ms);
        /* The writer's output parses back to the same spec. */
        CHECK_INT(wd_spec_format(&s, buf, sizeof(buf)), 0);
        CHECK_INT(wd_spec_parse(buf, strlen(buf), &back, &e), 0);
        CHECK(memcmp(&s, &back, sizeof(s)) == 0);
    }
}

static void
test_bad(void)
{
    for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
        const struct bad_case *c = &bad_cases[i];
        struct wd_spec s;
        struct ng_error e;

        memset(&s, 0x5a, sizeof(s));
        e.msg[0] = '\0';
        CHECK_INT(wd_spec_parse(c->in, strlen(c->in), &s, &e), -1);
        if (strstr(e.msg, c->msg) == NULL) {
            harness_failed++;
            fprintf(stderr, "input \"%s\": error \"%s\" lacks \"%s\"\n", c->in,
                    e.msg, c->msg);
        } else {
            harness_passed++;
        }
        /* The output is left untouched on failure. */
        CHECK(((unsigned char *)&s)[0] == 0x5a);
    }
}

static void
test_format(void)
{
    struct wd_spec s;
    char buf[512], tiny[20];

    wd_spec_defaults(&s);
    CHECK_INT(wd_spec_format(&s, buf, sizeof(buf)), 0);
    CHECK_STR(buf, "period=1m,idle=5,mincpu=0.500,action=report,signal=none,"
                   "file=,grace=2m,term=30s");
    s.period_ms = 1500;
    s.checkpoint_signal = SIGHUP;
    CHECK_INT(wd_spec_format(&s, buf, sizeof(buf)), 0);
    CHECK(strstr(buf, "period=1500ms,") == buf);
    CHECK(strstr(buf, "signal=SIGHUP,") != NULL);
    CHECK_INT(wd_spec_format(&s, tiny, sizeof(tiny)), -1);
    /* A value the parser takes without a NUL terminator. */
    {
        struct ng_error e;
        const char text[] = "idle=7XXXX";

        CHECK_INT(wd_spec_parse(text, 6, &s, &e), 0);
        CHECK_INT(s.idle_periods, 7);
    }
}

static void
test_signals(void)
{
    CHECK_INT(wd_signal_from_name("SIGUSR1"), SIGUSR1);
    CHECK_INT(wd_signal_from_name("USR1"), SIGUSR1);
    CHECK_INT(wd_signal_from_name("SIGTERM"), 0);
    CHECK_INT(wd_signal_from_name("sigusr1"), 0);
    CHECK_STR(wd_signal_name(0), "none");
    CHECK_STR(wd_signal_name(SIGWINCH), "SIGWINCH");
    CHECK(wd_signal_name(SIGKILL) == NULL);
    /* signal(7): USR1, USR2, HUP, INT terminate by default; WINCH, URG
     * are ignored and CONT continues. */
    CHECK(wd_signal_kills_by_default(SIGUSR1));
    CHECK(wd_signal_kills_by_default(SIGHUP));
    CHECK(!wd_signal_kills_by_default(SIGWINCH));
    CHECK(!wd_signal_kills_by_default(SIGCONT));
    CHECK(wd_signal_kills_by_default(SIGSEGV));
    for (const char *const *n = wd_signal_names(); *n != NULL; n++)
        CHECK(wd_signal_from_name(*n) != 0);
}

/* wd_duration_arg(): the duration options of both node programs. */
struct arg_case {
    const char *in;
    unsigned flags;
    long long ms;    /* when msg is NULL */
    const char *msg; /* a substring of the error, or NULL */
};

static const struct arg_case arg_cases[] = {
    {"200ms", 0, 200, NULL},
    {"5s", 0, 5000, NULL},
    {"2m", WD_DURATION_HOURS, 120000, NULL},
    {"0s", 0, 0, "must be positive"},
    {"0ms", WD_DURATION_ZERO, 0, "must be positive"},
    {"0", 0, 0, "needs a unit"},
    {"0", WD_DURATION_ZERO, 0, NULL},
    {"0", WD_DURATION_ZERO | WD_DURATION_HOURS, 0, NULL},
    {"5x", 0, 0, "duration \"5x\" needs a unit: ms, s or m"},
    {"abc", 0, 0, "must be a whole number"},
    {"", 0, 0, "must be a whole number"},
    {"99999999999999999999s", 0, 0, "too large"},
    {"1h", 0, 0, "needs a unit"},
    {"1h", WD_DURATION_HOURS, 3600000, NULL},
    {"8760h", WD_DURATION_HOURS, 8760LL * 3600000, NULL},
    {"8761h", WD_DURATION_HOURS, 0, "needs a unit"},
    {"0h", WD_DURATION_HOURS, 0, "needs a unit"},
    {"h", WD_DURATION_HOURS, 0, "must be a whole number"},
    {"1.5h", WD_DURATION_HOURS, 0, "needs a unit"},
};

static void
test_arg(void)
{
    for (size_t i = 0; i < sizeof(arg_cases) / sizeof(arg_cases[0]); i++) {
        const struct arg_case *c = &arg_cases[i];
        struct ng_error e;
        int64_t ms = -7;
        int rc;

        e.msg[0] = '\0';
        rc = wd_duration_arg(c->in, c->flags, &ms, &e);
        CHECK_INT(rc, c->msg == NULL ? 0 : -1);
        /* *ms is untouched on failure. */
        CHECK_INT(ms, c->msg == NULL ? c->ms : -7);
        if (c->msg != NULL && strstr(e.msg, c->msg) == NULL) {
            harness_failed++;
            fprintf(stderr, "input \"%s\": error \"%s\" lacks \"%s\"\n", c->in,
                    e.msg, c->msg);
        }
    }
}

int
main(void)
{
    test_ok();
    test_bad();
    test_format();
    test_signals();
    test_arg();
    return harness_finish();
}
