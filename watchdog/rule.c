/* The hang rule: every GPU of the pod at 0 % for N consecutive periods,
 * while its processes still burn CPU and its sockets are stuck. */
#include "watchdog/rule.h"

const char *
wd_verdict_name(enum wd_verdict v)
{
    switch (v) {
    case WD_BUSY:
        return "busy";
    case WD_UNKNOWN:
        return "unknown";
    case WD_CPU_IDLE:
        return "cpu-idle";
    case WD_SOCKETS_OK:
        return "sockets-moving";
    case WD_IDLE:
        return "idle";
    }
    return "?";
}

enum wd_verdict
wd_rule_judge(const struct wd_spec *spec, const struct wd_period *p)
{
    if (!p->gpu_known || p->gpus == 0)
        return WD_UNKNOWN;
    if (p->gpus_busy > 0)
        return WD_BUSY;
    if (p->cpu_milli < spec->min_cpu_milli)
        return WD_CPU_IDLE;
    /* NCCL spins on the CPU while it waits; a rank that lost its peer
     * holds a CLOSE_WAIT socket, and one whose peer stopped reading keeps
     * bytes in a queue that never drains. Sockets that show neither are
     * moving (or idle between steps), so the job may still be working. */
    if (p->close_wait == 0 && p->stuck_queues == 0)
        return WD_SOCKETS_OK;
    return WD_IDLE;
}

bool
wd_rule_step(struct wd_rule *r, const struct wd_spec *spec, enum wd_verdict v)
{
    if (v != WD_IDLE) {
        r->idle = 0;
        return false;
    }
    if (r->idle < spec->idle_periods)
        r->idle++;
    else
        return false; /* already reported; stays until a reset */
    return r->idle == spec->idle_periods;
}
