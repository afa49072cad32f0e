/* The watchdog agent: one period of one pod, its GPUs, sockets, CPU and
 * I/O judged, and the pods that are gone forgotten. */
#include "watchdog/agent_int.h"

/* ---- one period of one pod ------------------------------------------ */

int
wda_u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

    return a < b ? -1 : a > b;
}

static int
sockq_cmp(const void *x, const void *y)
{
    const struct sockq *a = x, *b = y;

    return a->inode < b->inode ? -1 : a->inode > b->inode;
}

/* Reads net/tcp and tcp6 of pid (its network namespace) into a->tcp. */
static size_t
tcp_table(struct agent *a, pid_t pid)
{
    static const char *const files[] = {"net/tcp", "net/tcp6"};
    size_t n = 0;

    for (int f = 0; f < 2; f++) {
        ssize_t len = wd_proc_read(a->o->proc_root, pid, files[f], a->tcpbuf,
                                   TCP_TEXT_MAX);

        if (len > 0)
            n += wd_tcp_parse(a->tcpbuf, (size_t)len, a->tcp + n,
                              MAX_TCP_ROWS - n, NULL);
    }
    return n;
}

/* Sockets of the pod's processes: counts, and the queues to compare with
 * the next period. */
static void
pod_sockets(struct agent *a, struct wpod *pod, size_t pi, struct wd_period *pr)
{
    size_t n_ino = 0, n_rows, n_q = 0, fds_left = POD_MAX_FDS;
    pid_t first = 0;
    struct sockq *q;

    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        ssize_t k;

        if (w->pod != pi || !w->alive)
            continue;
        if (first == 0)
            first = w->pid;
        k = wd_proc_socket_inodes(a->o->proc_root, w->pid, a->inodes + n_ino,
                                  MAX_SOCKETS - n_ino, &fds_left);
        if (k > 0)
            n_ino += (size_t)k;
    }
    pod->fds_read = (int)(POD_MAX_FDS - fds_left);
    if (fds_left == 0 && !pod->fd_budget_logged) {
        pod->fd_budget_logged = true;
        wda_logj(
            a, "budget",
            wda_podj(pod, json_pack("{s:i,s:s}", "max_open_files", POD_MAX_FDS,
                                    "effect",
                                    "open files past this are not looked at "
                                    "each period; sockets among them are not "
                                    "counted")));
    }
    qsort(a->inodes, n_ino, sizeof(*a->inodes), wda_u64_cmp);
    n_rows = first ? tcp_table(a, first) : 0;
    q = calloc(n_ino ? n_ino : 1, sizeof(*q));
    if (q == NULL)
        return;
    for (size_t r = 0; r < n_rows; r++) {
        const struct wd_tcp *t = &a->tcp[r];
        struct sockq key, *old;

        if (t->inode == 0 || bsearch(&t->inode, a->inodes, n_ino,
                                     sizeof(*a->inodes), wda_u64_cmp) == NULL)
            continue;
        pr->sockets++;
        if (t->state == WD_TCP_CLOSE_WAIT)
            pr->close_wait++;
        if (t->state != WD_TCP_ESTABLISHED ||
            (t->tx_queue == 0 && t->rx_queue == 0) || n_q >= n_ino)
            continue;
        key.inode = t->inode;
        old = pod->n_q ? bsearch(&key, pod->q, pod->n_q, sizeof(key), sockq_cmp)
                       : NULL;
        if (old != NULL && old->tx == t->tx_queue && old->rx == t->rx_queue)
            pr->stuck_queues++;
        q[n_q].inode = t->inode;
        q[n_q].tx = t->tx_queue;
        q[n_q].rx = t->rx_queue;
        n_q++;
    }
    qsort(q, n_q, sizeof(*q), sockq_cmp);
    free(pod->q);
    pod->q = q;
    pod->n_q = n_q;
}

/* Differences of NVML's counters between the start of the period (b; NULL
 * when unknown) and now (g). */
static void
gpu_period(const struct wd_gpu *g, const struct wd_gpu_counters *b,
           struct wd_gpu_period *gp)
{
    const struct wd_gpu_counters *c = &g->c;
    long long dt = b ? c->t_ms - b->t_ms : 0;

    memset(gp, 0, sizeof(*gp));
    gp->answer = g->state == WD_NVML_GPU_OK        ? WD_ANSWER_OK
                 : g->state == WD_NVML_GPU_LOST    ? WD_ANSWER_LOST
                 : g->state == WD_NVML_GPU_NO_UTIL ? WD_ANSWER_NO_UTIL
                                                   : WD_ANSWER_ERROR;
    if (b == NULL || dt <= 0)
        return;
    gp->util_n = c->util_n - b->util_n;
    gp->util_nonzero = c->util_nonzero - b->util_nonzero;
    if (gp->util_n > 0)
        gp->util_mean = (unsigned)((c->util_sum - b->util_sum) / gp->util_n);
    if (c->mem_n > b->mem_n) {
        gp->mem_known = true;
        gp->mem_mean =
            (unsigned)((c->mem_sum - b->mem_sum) / (c->mem_n - b->mem_n));
    }
    if (c->energy_ok && b->energy_ok && g->limit_mw > 0) {
        /* mJ per ms is W; times 1000 is mW. */
        uint64_t mw = (c->energy_mj - b->energy_mj) * 1000 / (uint64_t)dt;

        gp->power_known = true;
        gp->power_pct = (unsigned)(mw * 100 / g->limit_mw);
    }
    if (c->links_ok && b->links_ok) {
        gp->links_known = true;
        gp->link_bps =
            (int64_t)((c->link_bytes - b->link_bytes) * 1000 / (uint64_t)dt);
    }
}

/* Marks the pod shared when GPU d also runs what is not the pod's: a
 * process of another watched pod, a live process the agent does not watch
 * (another pod that did not opt in, an MPS server), or MPS clients. NVML's
 * utilisation, power and memory are the GPU's, not a process's, so such a
 * GPU's signature says nothing certain about this pod. A PID that no
 * longer exists (NVML lists a process until its context is gone) is not
 * counted. */
static void
gpu_shared(struct agent *a, struct wpod *pod, size_t pi, size_t d,
           const struct wd_gpu *gd)
{
    if (gd->mps) {
        pod->shared = true;
        snprintf(pod->shared_why, sizeof(pod->shared_why),
                 "GPU %zu is shared through an MPS server", d);
        return;
    }
    for (size_t k = 0; k < gd->n_pids; k++) {
        struct wproc *w = wda_proc_find(a, gd->pids[k], 0);
        struct wd_stat st;

        if (w != NULL && w->pod == pi)
            continue;
        if (w != NULL) {
            pod->shared = true;
            snprintf(pod->shared_why, sizeof(pod->shared_why),
                     "GPU %zu is shared with pod %s (pid %d)", d,
                     a->pods[w->pod].uid, (int)gd->pids[k]);
            return;
        }
        if (wd_proc_stat(a->o->proc_root, gd->pids[k], &st) == 0 &&
            st.state != 'Z' && st.state != 'X') {
            pod->shared = true;
            snprintf(pod->shared_why, sizeof(pod->shared_why),
                     "GPU %zu also runs pid %d, which is not this pod's "
                     "(another pod, or an MPS server)",
                     d, (int)gd->pids[k]);
            return;
        }
    }
}

/* The pod's GPUs over the period, each judged on its own; their lines go
 * into det (may be NULL). Moves every GPU's baseline to now. */
static void
pod_gpus(struct agent *a, struct wpod *pod, size_t pi, struct wd_period *pr,
         json_t *det)
{
    const struct wd_gpus *g = a->gpus;
    size_t lu = 0;

    pr->gpu_known = g->ok;
    if (!g->ok)
        return;
    pod->spin_util = 100;
    pod->spin_power = pod->spin_mem = 0;
    pod->lost_gpus[0] = '\0';
    pod->shared = false;
    pod->shared_why[0] = '\0';
    for (size_t d = 0; d < g->n; d++) {
        const struct wd_gpu *gd = &g->gpu[d];
        struct wd_gpu_period gp;
        struct wd_signals sig;
        enum wd_gpu_verdict v;
        bool mine = false;

        for (size_t k = 0; k < gd->n_pids && !mine; k++) {
            struct wproc *w = wda_proc_find(a, gd->pids[k], 0);

            mine = w != NULL && w->pod == pi && w->alive;
        }
        if (mine && !pod->shared)
            gpu_shared(a, pod, pi, d, gd);
        if (mine) {
            gpu_period(gd, pod->base_ok[d] ? &pod->base[d] : NULL, &gp);
            v = wd_rule_gpu(&gp, &sig);
            pr->gpus++;
            switch (v) {
            case WD_GPU_WORKING:
                pr->gpus_busy++;
                break;
            case WD_GPU_IDLE:
                pr->gpus_idle++;
                break;
            case WD_GPU_SPINNING:
                pr->gpus_spinning++;
                if (gp.util_mean < pod->spin_util)
                    pod->spin_util = gp.util_mean;
                if (gp.power_pct > pod->spin_power)
                    pod->spin_power = gp.power_pct;
                if (gp.mem_mean > pod->spin_mem)
                    pod->spin_mem = gp.mem_mean;
                break;
            case WD_GPU_GONE:
                pr->gpus_lost++;
                if (lu + 8 < sizeof(pod->lost_gpus))
                    lu += (size_t)snprintf(pod->lost_gpus + lu,
                                           sizeof(pod->lost_gpus) - lu, "%s%zu",
                                           lu ? "," : "", d);
                break;
            case WD_GPU_UNJUDGED:
                pr->gpus_unjudged++;
                break;
            }
            if (det != NULL)
                json_array_append_new(
                    det,
                    json_pack(
                        "{s:i,s:s,s:s,s:I,s:I,s:s,s:I,s:s,s:I,s:s,s:I,"
                        "s:s}",
                        "gpu", (int)d, "verdict", wd_gpu_verdict_name(v),
                        "util", sig.util, "util_samples", (json_int_t)gp.util_n,
                        "util_mean", (json_int_t)gp.util_mean, "power",
                        sig.power, "power_pct_of_limit",
                        (json_int_t)gp.power_pct, "memory", sig.memory,
                        "mem_mean", (json_int_t)gp.mem_mean, "links", sig.links,
                        "link_bytes_per_s", (json_int_t)gp.link_bps, "nvml",
                        gd->state == WD_NVML_GPU_OK     ? "ok"
                        : gd->state == WD_NVML_GPU_LOST ? "GPU_IS_LOST"
                        : gd->state == WD_NVML_GPU_NO_UTIL
                            ? "NOT_SUPPORTED (MIG mode?)"
                            : gd->failed));
        }
        pod->base[d] = gd->c;
        pod->base_ok[d] = true;
    }
}

/* Sets every GPU's baseline of a new pod to NVML's latest reading. */
void
wda_pod_base(struct agent *a, struct wpod *pod)
{
    if (!a->gpus->ok)
        return;
    for (size_t d = 0; d < a->gpus->n; d++) {
        pod->base[d] = a->gpus->gpu[d].c;
        pod->base_ok[d] = true;
    }
    pod->base_set = true;
}

/* Drops the pod's dead processes; returns how many are left. */
static size_t
pod_refresh(struct agent *a, size_t pi, uint64_t *ticks, uint64_t *io)
{
    size_t left = 0;

    *ticks = 0;
    *io = 0;
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        struct wd_stat st;

        if (w->pod != pi || !w->alive)
            continue;
        if (wd_proc_stat(a->o->proc_root, w->pid, &st) != 0 ||
            st.start != w->start || st.state == 'Z' || st.state == 'X') {
            w->alive = false;
            if (wda_pod_log_ok(a, &a->pods[pi]))
                wda_logj(a, "exited",
                         wda_podj(&a->pods[pi],
                                  json_pack("{s:i}", "pid", (int)w->pid)));
            continue;
        }
        if (st.cpu_ticks > w->prev_ticks)
            *ticks += st.cpu_ticks - w->prev_ticks;
        w->prev_ticks = st.cpu_ticks;
        {
            uint64_t b;

            if (wda_proc_io(a, w->pid, &b) == 0) {
                if (w->io_ok && b > w->prev_io)
                    *io += b - w->prev_io;
                w->prev_io = b;
                w->io_ok = true;
            }
        }
        left++;
    }
    return left;
}

static void
pod_forget(struct agent *a, size_t pi)
{
    struct wpod *pod = &a->pods[pi];

    if (wda_pod_log_ok(a, pod))
        wda_logj(a, "gone",
                 wda_podj(pod, json_pack("{s:s}", "state",
                                         wda_state_names[pod->state])));
    wda_keep_save(a, pod, wda_now_ms());
    free(pod->q);
    pod->q = NULL;
    pod->n_q = 0;
    free(pod->ev_msg);
    pod->ev_msg = NULL;
    free(pod->evw_msg);
    pod->evw_msg = NULL;
    pod->fr_pending = false;
    wda_pod_ras_drop(pod);
    pod->used = false;
    wda_procs_compact(a);
}

void
wda_pod_sample(struct agent *a, size_t pi, long long t)
{
    struct wpod *pod = &a->pods[pi];
    struct wd_period pr;
    enum wd_verdict v;
    uint64_t ticks, io;
    long long elapsed = t - pod->last_ms;
    json_t *det = a->o->verbose ? json_array() : NULL;
    bool fired;

    memset(&pr, 0, sizeof(pr));
    if (pod_refresh(a, pi, &ticks, &io) == 0) {
        json_decref(det);
        pod_forget(a, pi);
        return;
    }
    if (elapsed <= 0)
        elapsed = 1;
    pr.cpu_milli = (int64_t)((long double)ticks * 1000.0L * 1000.0L /
                             (long double)a->clk_tck / (long double)elapsed);
    pr.io_bps = (int64_t)(io * 1000 / (uint64_t)elapsed);
    pod_gpus(a, pod, pi, &pr, det);
    pod_sockets(a, pod, pi, &pr);
    v = wd_rule_judge(&pod->spec, &pr);
    fired = wd_rule_step(&pod->rule, &pod->spec, v);
    pod->last = pr;
    pod->last_v = v;
    pod->last_ms = t;
    while (pod->next_ms <= t)
        pod->next_ms += pod->spec.period_ms;
    if (a->o->verbose)
        wda_logj(
            a, "period",
            wda_podj(
                pod,
                json_pack(
                    "{s:s,s:i,s:b,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:s,"
                    "s:I,s:s,s:i,s:i,s:i,s:i,s:s,s:o}",
                    "verdict", wd_verdict_name(v), "idle_periods",
                    pod->rule.idle, "gpu_known", pr.gpu_known, "gpus", pr.gpus,
                    "gpus_busy", pr.gpus_busy, "gpus_idle", pr.gpus_idle,
                    "gpus_spinning", pr.gpus_spinning, "gpus_lost",
                    pr.gpus_lost, "gpus_unjudged", pr.gpus_unjudged,
                    "cpu_milli", (json_int_t)pr.cpu_milli, "cpu",
                    pr.cpu_milli >= pod->spec.min_cpu_milli ? "busy" : "idle",
                    "io_bytes_per_s", (json_int_t)pr.io_bps, "io",
                    pr.io_bps >= WD_IO_MOVING_BPS ? "moving" : "still",
                    "sockets", pr.sockets, "open_files_read", pod->fds_read,
                    "close_wait", pr.close_wait, "stuck_queues",
                    pr.stuck_queues, "state", wda_state_names[pod->state],
                    "gpu", det ? det : json_array())));
    if (pod->state == POD_CONFIRM &&
        (v == WD_BUSY || v == WD_IO_MOVING || v == WD_SOCKETS_OK)) {
        /* Working again before a second signal agreed: the hang is
         * reported, nothing else. A period that cannot be judged
         * (unknown) or whose CPU idles is no sign of work and leaves the
         * confirmation running. */
        char msg[1600];

        snprintf(msg, sizeof(msg), "%s", pod->hang_msg ? pod->hang_msg : "");
        wda_pod_ras_drop(pod);
        wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                       "the pod worked again before a second signal agreed");
    }
    if (pod->state == POD_REPORTED && !wd_verdict_stalled(v)) {
        pod->state = POD_WATCH;
        wda_logj(
            a, "recovered",
            wda_podj(pod, json_pack("{s:s}", "verdict", wd_verdict_name(v))));
    }
    if (fired && pod->state == POD_WATCH)
        wda_pod_hang(a, pod, pi);
    wda_pod_shm(a, pod, pi);
}
