/* The hang rule: each GPU judged on its own signals over the whole period
 * (idle, spinning, working, lost), then the pod: stalled GPUs, busy CPU, no
 * I/O, and for an idle hang stuck sockets, for N consecutive periods. */
#include "watchdog/rule.h"

const char *
wd_gpu_verdict_name(enum wd_gpu_verdict v)
{
    switch (v) {
    case WD_GPU_WORKING:
        return "working";
    case WD_GPU_IDLE:
        return "idle";
    case WD_GPU_SPINNING:
        return "spinning";
    case WD_GPU_GONE:
        return "lost";
    case WD_GPU_UNJUDGED:
        return "unjudged";
    }
    return "?";
}

enum wd_gpu_verdict
wd_rule_gpu(const struct wd_gpu_period *g, struct wd_signals *sig)
{
    struct wd_signals s = {"unknown", "unknown", "unknown", "unknown"};
    enum wd_gpu_verdict v;
    bool util_ok = g->answer == WD_ANSWER_OK && g->util_n > 0;

    if (util_ok)
        s.util = g->util_nonzero == 0               ? "zero"
                 : g->util_mean >= WD_UTIL_HIGH_PCT ? "high"
                                                    : "some";
    if (g->power_known)
        s.power = g->power_pct < WD_POWER_IDLE_PCT ? "near-idle" : "working";
    if (g->mem_known)
        s.memory = g->mem_mean < WD_MEM_IDLE_PCT ? "idle" : "working";
    if (g->links_known)
        s.links = g->link_bps < WD_LINK_STILL_BPS ? "still" : "moving";
    if (sig != NULL)
        *sig = s;
    if (g->answer == WD_ANSWER_LOST)
        return WD_GPU_GONE;
    if (!util_ok)
        return WD_GPU_UNJUDGED;
    /* Bytes over NVLink or PCIe are work, whatever the SMs do: copy
     * engines move data with no kernel running. */
    if (g->links_known && g->link_bps >= WD_LINK_STILL_BPS)
        return WD_GPU_WORKING;
    if (g->util_nonzero == 0)
        return WD_GPU_IDLE;
    if (g->util_mean < WD_UTIL_HIGH_PCT)
        return WD_GPU_WORKING;
    /* High utilisation: a spin only when power and memory both say that
     * nothing is computed. Without them it cannot be told from work. */
    if (!g->power_known || !g->mem_known)
        v = WD_GPU_UNJUDGED;
    else if (g->power_pct < WD_POWER_IDLE_PCT && g->mem_mean < WD_MEM_IDLE_PCT)
        v = WD_GPU_SPINNING;
    else
        v = WD_GPU_WORKING;
    return v;
}

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
    case WD_IO_MOVING:
        return "io-moving";
    case WD_SPINNING:
        return "spinning";
    case WD_GPU_LOST:
        return "gpu-lost";
    }
    return "?";
}

bool
wd_verdict_stalled(enum wd_verdict v)
{
    return v == WD_IDLE || v == WD_SPINNING || v == WD_GPU_LOST;
}

enum wd_verdict
wd_rule_judge(const struct wd_spec *spec, const struct wd_period *p)
{
    if (!p->gpu_known || p->gpus == 0)
        return WD_UNKNOWN;
    /* A GPU that fell off the bus stops the job whatever the others do. */
    if (p->gpus_lost > 0)
        return WD_GPU_LOST;
    if (p->gpus_unjudged > 0)
        return WD_UNKNOWN;
    if (p->gpus_busy > 0)
        return WD_BUSY;
    if (p->cpu_milli < spec->min_cpu_milli)
        return WD_CPU_IDLE;
    if (p->io_bps >= WD_IO_MOVING_BPS)
        return WD_IO_MOVING;
    /* Spinning GPUs are their own proof: the kernel waits for a peer, and
     * over InfiniBand the sockets are quiet whether or not the job works. */
    if (p->gpus_spinning > 0)
        return WD_SPINNING;
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
    if (!wd_verdict_stalled(v)) {
        r->idle = 0;
        return false;
    }
    if (r->idle < spec->idle_periods)
        r->idle++;
    else
        return false; /* already reported; stays until a reset */
    return r->idle == spec->idle_periods;
}
