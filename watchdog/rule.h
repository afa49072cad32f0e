/* The hang rule, as a pure function of one period's observations, so that
 * unit tests can drive it without processes, GPUs or clocks. */
#ifndef NCCLGUARD_WD_RULE_H
#define NCCLGUARD_WD_RULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "watchdog/wdspec.h"

/* What one period showed for one pod. */
struct wd_period {
    bool gpu_known;    /* NVML answered for this period */
    int gpus;          /* GPUs that run one of the pod's processes */
    int gpus_busy;     /* of those, with utilisation above 0 % */
    int64_t cpu_milli; /* the pod's processes, millicores over the period */
    int sockets;       /* TCP sockets the processes hold */
    int close_wait;    /* of those, in CLOSE_WAIT */
    int stuck_queues;  /* established, non-empty queues that did not move */
};

enum wd_verdict {
    WD_BUSY = 0,       /* a GPU worked: not a hang */
    WD_UNKNOWN = 1,    /* NVML did not answer or no GPU is the pod's */
    WD_CPU_IDLE = 2,   /* GPUs idle but CPU below minCPU: data loading,
                          checkpoint writing, a debugger */
    WD_SOCKETS_OK = 3, /* GPUs idle, CPU busy, but the sockets move */
    WD_IDLE = 4        /* every part of the rule holds this period */
};

/* "busy", "unknown", "cpu-idle", "sockets-moving", "idle". */
const char *wd_verdict_name(enum wd_verdict v);

/* The verdict for one period under spec. Thread-safe, pure. */
enum wd_verdict wd_rule_judge(const struct wd_spec *spec,
                              const struct wd_period *p);

/* A pod's count of consecutive idle periods. */
struct wd_rule {
    int idle; /* consecutive WD_IDLE periods so far */
};

/*
 * Feeds one period's verdict: WD_IDLE counts up, anything else resets the
 * count to 0. Returns true exactly once per hang: on the period where the
 * count reaches spec->idle_periods. Pure.
 */
bool wd_rule_step(struct wd_rule *r, const struct wd_spec *spec,
                  enum wd_verdict v);

#endif
