/* Unit tests for watchdog/rule.c: each GPU's own verdict from its signals,
 * each part of the pod's hang rule, and the count of consecutive stalled
 * periods. */
#include <string.h>

#include "harness.h"
#include "watchdog/rule.h"

struct gpu_case {
    const char *name;
    struct wd_gpu_period g;
    enum wd_gpu_verdict want;
    const char *util, *power, *memory, *links; /* signal verdicts */
};

#define OK WD_ANSWER_OK
/* answer, util_n, util_mean, util_nonzero, mem_known, mem_mean,
 * power_known, power_pct, links_known, link_bps */
static const struct gpu_case gpu_cases[] = {
    {"spinning: NVIDIA/nccl #968, 100 % at about 70 W",
     {OK, 6, 100, 6, true, 0, true, 17, true, 0},
     WD_GPU_SPINNING,
     "high",
     "near-idle",
     "idle",
     "still"},
    {"spinning: vllm #41725, about 96 % at about 20 W",
     {OK, 6, 96, 6, true, 0, true, 6, true, 1000},
     WD_GPU_SPINNING,
     "high",
     "near-idle",
     "idle",
     "still"},
    {"spinning without link counters (power and memory suffice)",
     {OK, 6, 100, 6, true, 0, true, 17, false, 0},
     WD_GPU_SPINNING,
     "high",
     "near-idle",
     "idle",
     "unknown"},
    {"healthy training step at 100 %",
     {OK, 6, 100, 6, true, 45, true, 80, true, 2000000000},
     WD_GPU_WORKING,
     "high",
     "working",
     "working",
     "moving"},
    {"100 % at idle power but NVLink bytes moving",
     {OK, 6, 100, 6, true, 0, true, 15, true, 500000000},
     WD_GPU_WORKING,
     "high",
     "near-idle",
     "idle",
     "moving"},
    {"100 % at idle power but memory traffic",
     {OK, 6, 100, 6, true, 30, true, 15, true, 0},
     WD_GPU_WORKING,
     "high",
     "near-idle",
     "working",
     "still"},
    {"100 % drawing power (compute-bound, no links)",
     {OK, 6, 100, 6, true, 2, true, 70, true, 0},
     WD_GPU_WORKING,
     "high",
     "working",
     "idle",
     "still"},
    {"power just at the threshold is working",
     {OK, 6, 100, 6, true, 0, true, WD_POWER_IDLE_PCT, true, 0},
     WD_GPU_WORKING,
     "high",
     "working",
     "idle",
     "still"},
    {"memory just at the threshold is working",
     {OK, 6, 100, 6, true, WD_MEM_IDLE_PCT, true, 10, true, 0},
     WD_GPU_WORKING,
     "high",
     "near-idle",
     "working",
     "still"},
    {"utilisation below high is work",
     {OK, 6, WD_UTIL_HIGH_PCT - 1, 6, true, 0, true, 10, true, 0},
     WD_GPU_WORKING,
     "some",
     "near-idle",
     "idle",
     "still"},
    {"utilisation exactly high can spin",
     {OK, 6, WD_UTIL_HIGH_PCT, 6, true, 0, true, 10, true, 0},
     WD_GPU_SPINNING,
     "high",
     "near-idle",
     "idle",
     "still"},
    {"idle: no sample above 0 %",
     {OK, 6, 0, 0, true, 0, true, 15, true, 0},
     WD_GPU_IDLE,
     "zero",
     "near-idle",
     "idle",
     "still"},
    {"one sample above 0 % in the period is not idle",
     {OK, 6, 1, 1, true, 0, true, 15, true, 0},
     WD_GPU_WORKING,
     "some",
     "near-idle",
     "idle",
     "still"},
    {"0 % but copy engines move bytes",
     {OK, 6, 0, 0, true, 0, true, 15, true, WD_LINK_STILL_BPS},
     WD_GPU_WORKING,
     "zero",
     "near-idle",
     "idle",
     "moving"},
    {"high utilisation, no power reading: cannot tell",
     {OK, 6, 100, 6, true, 0, false, 0, true, 0},
     WD_GPU_UNJUDGED,
     "high",
     "unknown",
     "idle",
     "still"},
    {"no samples in the period",
     {OK, 0, 0, 0, false, 0, true, 15, true, 0},
     WD_GPU_UNJUDGED,
     "unknown",
     "near-idle",
     "unknown",
     "still"},
    {"MIG: no utilisation",
     {WD_ANSWER_NO_UTIL, 0, 0, 0, false, 0, true, 15, false, 0},
     WD_GPU_UNJUDGED,
     "unknown",
     "near-idle",
     "unknown",
     "unknown"},
    {"lost",
     {WD_ANSWER_LOST, 0, 0, 0, false, 0, false, 0, false, 0},
     WD_GPU_GONE,
     "unknown",
     "unknown",
     "unknown",
     "unknown"},
    {"one sample in the period is enough to judge",
     {OK, 1, 0, 0, true, 0, true, 15, true, 0},
     WD_GPU_IDLE,
     "zero",
     "near-idle",
     "idle",
     "still"},
    {"link bytes not known are not read, whatever the field holds",
     {OK, 6, 100, 6, true, 0, true, 17, false, 1LL << 40},
     WD_GPU_SPINNING,
     "high",
     "near-idle",
     "idle",
     "unknown"},
    {"high utilisation at idle power, no memory reading: cannot tell",
     {OK, 6, 100, 6, false, 0, true, 17, true, 0},
     WD_GPU_UNJUDGED,
     "high",
     "near-idle",
     "unknown",
     "still"},
    {"another NVML error",
     {WD_ANSWER_ERROR, 6, 0, 0, true, 0, true, 15, true, 0},
     WD_GPU_UNJUDGED,
     "unknown",
     "near-idle",
     "idle",
     "still"},
};

static void
test_gpu(void)
{
    for (size_t i = 0; i < sizeof(gpu_cases) / sizeof(gpu_cases[0]); i++) {
        const struct gpu_case *c = &gpu_cases[i];
        struct wd_signals s;
        enum wd_gpu_verdict v = wd_rule_gpu(&c->g, &s);

        if (v != c->want)
            fprintf(stderr, "case: %s: got %s\n", c->name,
                    wd_gpu_verdict_name(v));
        CHECK_INT(v, c->want);
        CHECK_STR(s.util, c->util);
        CHECK_STR(s.power, c->power);
        CHECK_STR(s.memory, c->memory);
        CHECK_STR(s.links, c->links);
    }
}

struct judge_case {
    const char *name;
    struct wd_period p;
    enum wd_verdict want;
};

/* gpu_known, gpus, busy, idle, spinning, lost, unjudged, cpu_milli, io_bps,
 * sockets, close_wait, stuck */
static const struct judge_case judge_cases[] = {
    {"hung: idle GPUs, spinning CPU, CLOSE_WAIT",
     {true, 8, 0, 8, 0, 0, 0, 3200, 0, 12, 12, 0},
     WD_IDLE},
    {"hung: a queue that does not move",
     {true, 1, 0, 1, 0, 0, 0, 900, 0, 2, 0, 1},
     WD_IDLE},
    {"spinning hang over InfiniBand: no socket at all",
     {true, 8, 0, 0, 8, 0, 0, 3200, 0, 0, 0, 0},
     WD_SPINNING},
    {"one spinning GPU of eight, the others idle",
     {true, 8, 0, 7, 1, 0, 0, 3200, 0, 0, 0, 0},
     WD_SPINNING},
    {"spinning and idle GPUs together",
     {true, 8, 0, 1, 7, 0, 0, 3200, 0, 0, 0, 0},
     WD_SPINNING},
    {"one working GPU of eight",
     {true, 8, 1, 0, 7, 0, 0, 3200, 0, 12, 12, 0},
     WD_BUSY},
    {"a lost GPU is a hang cause",
     {true, 8, 7, 0, 0, 1, 0, 3200, 0, 12, 0, 0},
     WD_GPU_LOST},
    {"a MIG GPU leaves the pod unknown",
     {true, 2, 0, 1, 0, 0, 1, 3200, 0, 12, 12, 0},
     WD_UNKNOWN},
    {"CPU below minCPU (a debugger)",
     {true, 8, 0, 8, 0, 0, 0, 499, 0, 12, 12, 0},
     WD_CPU_IDLE},
    {"CPU exactly minCPU counts as busy CPU",
     {true, 8, 0, 8, 0, 0, 0, 500, 0, 1, 1, 0},
     WD_IDLE},
    {"checkpoint write: idle GPUs, I/O moving",
     {true, 8, 0, 8, 0, 0, 0, 3200, WD_IO_MOVING_BPS, 12, 12, 0},
     WD_IO_MOVING},
    {"I/O just below the threshold is no progress",
     {true, 8, 0, 8, 0, 0, 0, 3200, WD_IO_MOVING_BPS - 1, 12, 12, 0},
     WD_IDLE},
    {"spinning GPUs while writing",
     {true, 8, 0, 0, 8, 0, 0, 3200, 50LL << 20, 0, 0, 0},
     WD_IO_MOVING},
    {"sockets all moving",
     {true, 8, 0, 8, 0, 0, 0, 3200, 0, 12, 0, 0},
     WD_SOCKETS_OK},
    {"no TCP sockets at all",
     {true, 8, 0, 8, 0, 0, 0, 3200, 0, 0, 0, 0},
     WD_SOCKETS_OK},
    {"NVML did not answer",
     {false, 0, 0, 0, 0, 0, 0, 3200, 0, 12, 12, 0},
     WD_UNKNOWN},
    {"NVML did not answer, GPUs counted from an earlier period",
     {false, 8, 0, 8, 0, 0, 0, 3200, 0, 12, 12, 0},
     WD_UNKNOWN},
    {"no GPU runs the pod's processes",
     {true, 0, 0, 0, 0, 0, 0, 3200, 0, 12, 12, 0},
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

/* Feeds a string of verdicts (I idle, S spinning, L gpu-lost, B busy, U
 * unknown, C cpu-idle, O io-moving) and returns the 1-based periods where
 * the rule fired, as letters. */
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
                            : seq[i] == 'S' ? WD_SPINNING
                            : seq[i] == 'L' ? WD_GPU_LOST
                            : seq[i] == 'B' ? WD_BUSY
                            : seq[i] == 'U' ? WD_UNKNOWN
                            : seq[i] == 'O' ? WD_IO_MOVING
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
    run("IIOII", 3, f);
    CHECK_STR(f, ""); /* nor is one with I/O */
    run("ICIII", 3, f);
    CHECK_STR(f, "e");
    run("SSS", 3, f);
    CHECK_STR(f, "c"); /* spinning periods count */
    run("ISL", 3, f);
    CHECK_STR(f, "c"); /* and mix with idle and lost ones */
    run("I", 1, f);
    CHECK_STR(f, "a");
    run("B", 1, f);
    CHECK_STR(f, ""); /* a busy period never fires, even with N = 1 */
}

/* The count stops at idle_periods once the rule fired: the agent logs it
 * in each period line and exports it (ncclguard_watchdog_idle_periods),
 * so a hang that lasts shows N, not a number that keeps growing. */
static void
test_step_count(void)
{
    struct wd_spec s;
    struct wd_rule r = {0};

    wd_spec_defaults(&s);
    s.idle_periods = 3;
    CHECK(!wd_rule_step(&r, &s, WD_IDLE));
    CHECK_INT(r.idle, 1);
    CHECK(!wd_rule_step(&r, &s, WD_SPINNING));
    CHECK_INT(r.idle, 2);
    CHECK(wd_rule_step(&r, &s, WD_GPU_LOST));
    CHECK_INT(r.idle, 3);
    for (int i = 0; i < 4; i++) {
        CHECK(!wd_rule_step(&r, &s, WD_IDLE));
        CHECK_INT(r.idle, 3);
    }
    CHECK(!wd_rule_step(&r, &s, WD_SOCKETS_OK));
    CHECK_INT(r.idle, 0);
}

/* The names the agent's log lines and metrics carry, one for each value,
 * and "?" for a value outside the enum. */
static void
test_names(void)
{
    CHECK_STR(wd_gpu_verdict_name(WD_GPU_WORKING), "working");
    CHECK_STR(wd_gpu_verdict_name(WD_GPU_IDLE), "idle");
    CHECK_STR(wd_gpu_verdict_name(WD_GPU_SPINNING), "spinning");
    CHECK_STR(wd_gpu_verdict_name(WD_GPU_GONE), "lost");
    CHECK_STR(wd_gpu_verdict_name(WD_GPU_UNJUDGED), "unjudged");
    CHECK_STR(wd_gpu_verdict_name((enum wd_gpu_verdict)99), "?");
    CHECK_STR(wd_verdict_name(WD_BUSY), "busy");
    CHECK_STR(wd_verdict_name(WD_UNKNOWN), "unknown");
    CHECK_STR(wd_verdict_name(WD_CPU_IDLE), "cpu-idle");
    CHECK_STR(wd_verdict_name(WD_SOCKETS_OK), "sockets-moving");
    CHECK_STR(wd_verdict_name(WD_IDLE), "idle");
    CHECK_STR(wd_verdict_name(WD_IO_MOVING), "io-moving");
    CHECK_STR(wd_verdict_name(WD_SPINNING), "spinning");
    CHECK_STR(wd_verdict_name(WD_GPU_LOST), "gpu-lost");
    CHECK_STR(wd_verdict_name((enum wd_verdict)99), "?");
}

int
main(void)
{
    test_gpu();
    test_judge();
    test_step();
    test_step_count();
    test_names();
    return harness_finish();
}
