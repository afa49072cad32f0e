/* Unit tests for watchdog/rule.c: each part of the hang rule, and the count
 * of consecutive idle periods. */
#include <string.h>

#include "harness.h"
#include "watchdog/rule.h"

struct judge_case {
    const char *name;
    struct wd_period p;
    enum wd_verdict want;
};

/* gpu_known, gpus, gpus_busy, cpu_milli, sockets, close_wait, stuck */
static const struct judge_case judge_cases[] = {
    {"hung: idle GPUs, spinning CPU, CLOSE_WAIT",
     {true, 8, 0, 3200, 12, 12, 0},
     WD_IDLE},
    {"hung: a queue that does not move", {true, 1, 0, 900, 2, 0, 1}, WD_IDLE},
    {"one busy GPU of eight", {true, 8, 1, 3200, 12, 12, 0}, WD_BUSY},
    {"CPU below minCPU (data loading)",
     {true, 8, 0, 499, 12, 12, 0},
     WD_CPU_IDLE},
    {"CPU exactly minCPU counts as busy CPU",
     {true, 8, 0, 500, 1, 1, 0},
     WD_IDLE},
    {"sockets all moving", {true, 8, 0, 3200, 12, 0, 0}, WD_SOCKETS_OK},
    {"no TCP sockets at all", {true, 8, 0, 3200, 0, 0, 0}, WD_SOCKETS_OK},
    {"NVML did not answer", {false, 0, 0, 3200, 12, 12, 0}, WD_UNKNOWN},
    {"no GPU runs the pod's processes",
     {true, 0, 0, 3200, 12, 12, 0},
     WD_UNKNOWN},
};

static void
test_judge(void)
{
    struct wd_spec s;

    wd_spec_defaults(&s); /* minCPU 0.5 */
    for (size_t i = 0; i < sizeof(judge_cases) / sizeof(judge_cases[0]); i++) {
        enum wd_verdict v = wd_rule_judge(&s, &judge_cases[i].p);

        if (v != judge_cases[i].want)
            fprintf(stderr, "case: %s: got %s\n", judge_cases[i].name,
                    wd_verdict_name(v));
        CHECK_INT(v, judge_cases[i].want);
    }
}

/* Feeds a string of verdicts (I idle, B busy, U unknown, C cpu-idle) and
 * returns the 1-based periods where the rule fired, as digits. */
static void
run(const char *seq, int n, char *fired)
{
    struct wd_spec s;
    struct wd_rule r = {0};
    size_t k = 0;

    wd_spec_defaults(&s);
    s.idle_periods = n;
    for (size_t i = 0; seq[i] != '\0'; i++) {
        enum wd_verdict v = seq[i] == 'I'   ? WD_IDLE
                            : seq[i] == 'B' ? WD_BUSY
                            : seq[i] == 'U' ? WD_UNKNOWN
                                            : WD_CPU_IDLE;

        if (wd_rule_step(&r, &s, v))
            fired[k++] = (char)('a' + i); /* period i+1 as a letter */
    }
    fired[k] = '\0';
}

static void
test_step(void)
{
    char f[32];

    run("IIIII", 5, f);
    CHECK_STR(f, "e"); /* exactly at period 5 */
    run("IIII", 5, f);
    CHECK_STR(f, ""); /* N-1 is not enough */
    run("IIIIBIIIII", 5, f);
    CHECK_STR(f, "j"); /* a busy period N-1... starts over */
    run("IIIIIIIII", 5, f);
    CHECK_STR(f, "e"); /* fires once per episode */
    run("IIIIIBIIIII", 5, f);
    CHECK_STR(f, "ek"); /* and again after a recovery */
    run("IIUII", 3, f);
    CHECK_STR(f, ""); /* an unknown period is not idle */
    run("ICIII", 3, f);
    CHECK_STR(f, "e");
    run("I", 1, f);
    CHECK_STR(f, "a");
}

int
main(void)
{
    test_judge();
    test_step();
    return harness_finish();
}
