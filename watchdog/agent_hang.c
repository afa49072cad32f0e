/* The watchdog agent: a hang, and the second signal it needs before any
 * action (NCCL RAS, asked twice off the loop). */
#include "watchdog/agent_int.h"

/* RAS: its own collective timeout (the client's TIMEOUT), and the time the
 * agent gives one query. STATUS runs two RAS collectives in turn (the RAS
 * network, then the communicators: "Gathering data about ..." in
 * client_support.cc), and RAS ends each one at most
 * RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC (5 s) past the client's timeout, so an
 * answer may take twice timeout + 5 s. The query runs on a thread of its
 * own (wd_ras_job), never on the decision loop. */
#define RAS_TIMEOUT_S 1
#define RAS_QUERY_MS                                                           \
    ((2 * (RAS_TIMEOUT_S + WD_RAS_EXTRA_TIMEOUT_S) + 1) * 1000LL)

/*
 * The address of the pod's NCCL RAS service: the port of the pod's
 * NCCL_RAS_ADDR, at the pod's own IP from the API, so that a pod's env can
 * point the agent at nothing but the pod itself; only under --pod-from-env
 * is the env's host believed too. Returns 0 with *ss and *len, or -1 after
 * a "ras" log line saying why not.
 */
static int
pod_ras_addr(struct agent *a, struct wpod *pod, struct sockaddr_storage *ss,
             socklen_t *len, const char **why_not)
{
    char host[128];
    const char *colon, *h = NULL;
    long port;
    char *end;

    memset(ss, 0, sizeof(*ss));
    if (pod->ras_addr[0] == '\0') {
        *why_not = "not-queried: NCCL_RAS_ADDR is not set, so RAS listens "
                   "on the pod's loopback";
        wda_logj(a, "ras",
                 wda_podj(pod, json_pack("{s:s}", "result", *why_not)));
        return -1;
    }
    colon = strrchr(pod->ras_addr, ':');
    errno = 0;
    port = strtol(colon ? colon + 1 : pod->ras_addr, &end, 10);
    if (errno != 0 || *end != '\0' || port <= 0 || port > 65535) {
        *why_not = "not-queried: bad NCCL_RAS_ADDR";
        wda_logj(a, "ras",
                 wda_podj(pod, json_pack("{s:s,s:s}", "result", *why_not,
                                         "value", pod->ras_addr)));
        return -1;
    }
    snprintf(host, sizeof(host), "%.*s",
             colon ? (int)(colon - pod->ras_addr) : 0, pod->ras_addr);
    if (a->o->pod_from_env && host[0] != '\0') {
        h = host;
    } else {
        if (pod->ip[0] == '\0' && a->ev.api_server && a->ev.api_server[0])
            (void)wda_pods_identify(a, pod, wda_now_ms());
        h = pod->ip;
    }
    if (h[0] == '[') { /* [v6] */
        snprintf(host, sizeof(host), "%s", h + 1);
        if (strchr(host, ']') != NULL)
            *strchr(host, ']') = '\0';
        h = host;
    }
    {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

        if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            *len = sizeof(*s4);
        } else if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            *len = sizeof(*s6);
        } else {
            *why_not = "not-queried: the pod's IP is unknown";
            wda_logj(a, "ras",
                     wda_podj(pod, json_pack("{s:s}", "result", *why_not)));
            return -1;
        }
    }
    return 0;
}

/* Where a host RAS names is: RAS prints an IP address (ncclSocketToHost:
 * inet_ntop), which is named after the watched pod that has it, or else
 * said to be an address. */
static void
ras_where(struct agent *a, const char *host, char *out, size_t n)
{
    for (size_t i = 0; i < a->n_pods; i++) {
        const struct wpod *p = &a->pods[i];

        if (p->used && p->ip[0] != '\0' && strcmp(p->ip, host) == 0 &&
            p->name[0] != '\0') {
            snprintf(out, n, "pod %.60s/%.60s on node %.60s", p->ns, p->name,
                     a->o->node_name ? a->o->node_name : "?");
            return;
        }
    }
    snprintf(out, n, "address %.45s", host);
}

/* A rank that RAS names behind or missing, whose pod runs on this node and
 * worked in its latest period (busy GPU, I/O, an idle CPU): the job waits
 * for that rank (a checkpoint, an evaluation), it is not stuck. Writes why
 * into out and returns true then. */
static bool
ras_named_pod_works(struct agent *a, const struct wd_ras_result *r, char *out,
                    size_t n)
{
    for (int k = 0; k < r->n_behind + r->n_missing; k++) {
        const struct wd_ras_rank *q =
            k < r->n_behind ? (k < WD_RAS_MAX_RANKS ? &r->behind[k] : NULL)
            : k - r->n_behind < WD_RAS_MAX_RANKS ? &r->missing[k - r->n_behind]
                                                 : NULL;

        if (q == NULL)
            continue;
        for (size_t i = 0; i < a->n_pods; i++) {
            const struct wpod *p = &a->pods[i];

            /* last_ms == watch_ms: no period judged yet. */
            if (!p->used || p->ip[0] == '\0' || strcmp(p->ip, q->host) != 0 ||
                p->last_ms == p->watch_ms || p->last_v == WD_UNKNOWN ||
                wd_verdict_stalled(p->last_v))
                continue;
            snprintf(out, n,
                     "RAS names a rank at %.45s, whose pod %.40s on this "
                     "node is not stalled (%s): the job waits for it",
                     q->host, p->uid, wd_verdict_name(p->last_v));
            return true;
        }
    }
    return false;
}

/* Appends what a RAS answer names to msg (used bytes of n). */
static void
ras_text(struct agent *a, const struct wd_ras_result *r, char *msg, size_t n)
{
    size_t u = strlen(msg);
    char where[200];

    if (r->n_missing == 0 && r->n_behind == 0 && u + 40 < n)
        u += (size_t)snprintf(msg + u, n - u,
                              "; RAS: no rank missing or behind");
    for (int i = 0; i < r->n_missing && i < 3 && u + 300 < n; i++) {
        const struct wd_ras_rank *k = &r->missing[i];
        const char *st = k->dead           ? "considered dead"
                         : k->unresponsive ? "unresponsive"
                                           : "no data";

        ras_where(a, k->host, where, sizeof(where));
        if (k->rank >= 0)
            u += (size_t)snprintf(msg + u, n - u,
                                  "; RAS: rank %d at %s (pid %d) missing (%s)",
                                  k->rank, where, k->pid, st);
        else
            u += (size_t)snprintf(msg + u, n - u,
                                  "; RAS: process %d at %s missing (%s)",
                                  k->pid, where, st);
    }
    for (int i = 0; i < r->n_behind && i < 3 && u + 300 < n; i++) {
        const struct wd_ras_rank *k = &r->behind[i];

        ras_where(a, k->host, where, sizeof(where));
        u += (size_t)snprintf(msg + u, n - u,
                              "; RAS: rank %d at %s (pid %d) behind (%lu of "
                              "%lu collectives issued)",
                              k->rank, where, k->pid, k->done, k->most);
    }
}

/* Ends a RAS confirmation that is under way: cancels its query. */
void
wda_pod_ras_drop(struct wpod *pod)
{
    wd_ras_job_free(pod->ras_job);
    pod->ras_job = NULL;
    pod->ras_step = 0;
    free(pod->ras1);
    pod->ras1 = NULL;
    free(pod->hang_msg);
    pod->hang_msg = NULL;
}

/* Starts the pod's next RAS query; false (after a log line) when no
 * thread could be started. */
static bool
pod_ras_start(struct agent *a, struct wpod *pod)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    const char *why_not;

    if (pod_ras_addr(a, pod, &ss, &len, &why_not) != 0)
        return false;
    pod->ras_job = wd_ras_job_start((struct sockaddr *)&ss, len, RAS_TIMEOUT_S,
                                    RAS_QUERY_MS);
    if (pod->ras_job == NULL)
        wda_logj(
            a, "ras",
            wda_podj(pod, json_pack("{s:s}", "result",
                                    "not-queried: cannot start a thread")));
    return pod->ras_job != NULL;
}

void
wda_pod_hang(struct agent *a, struct wpod *pod, size_t pi)
{
    const struct wd_spec *s = &pod->spec;
    const struct wd_period *pr = &pod->last;
    char msg[1600], period[24];
    const char *why_not = NULL;

    a->m.hangs++;
    pod->hang_v = pod->last_v;
    if (pod->last_v == WD_GPU_LOST)
        wda_node_gpu_lost_event(a, pod);
    wda_duration_text(s->period_ms, period, sizeof(period));
    if (pod->last_v == WD_GPU_LOST)
        snprintf(msg, sizeof(msg),
                 "NCCLHang: GPU %s lost %dx%s (NVML_ERROR_GPU_IS_LOST: "
                 "fallen off the bus, an Xid-class fault; see the node's "
                 "kernel log)",
                 pod->lost_gpus, s->idle_periods, period);
    else if (pod->last_v == WD_SPINNING)
        snprintf(msg, sizeof(msg),
                 "NCCLHang: %d/%d GPUs spinning %dx%s (utilisation %u%%, "
                 "power %u%% of limit, memory %u%%, links still), CPU "
                 "%lld.%01lld cores, no I/O",
                 pr->gpus_spinning, pr->gpus, s->idle_periods, period,
                 pod->spin_util, pod->spin_power, pod->spin_mem,
                 (long long)(pr->cpu_milli / 1000),
                 (long long)(pr->cpu_milli % 1000 / 100));
    else
        snprintf(msg, sizeof(msg),
                 "NCCLHang: %d/%d GPUs idle %dx%s, CPU %lld.%01lld cores, %d "
                 "sockets CLOSE_WAIT, %d queues stuck",
                 pr->gpus, pr->gpus, s->idle_periods, period,
                 (long long)(pr->cpu_milli / 1000),
                 (long long)(pr->cpu_milli % 1000 / 100), pr->close_wait,
                 pr->stuck_queues);
    wda_logj(
        a, "hang",
        wda_podj(
            pod,
            json_pack(
                "{s:s,s:s,s:i,s:i,s:i,s:I,s:i,s:i,s:s,s:b,s:s,s:I}", "message",
                msg, "cause", wd_verdict_name(pod->last_v), "idle_periods",
                pod->rule.idle, "gpus", pr->gpus, "gpus_busy", pr->gpus_busy,
                "cpu_milli", (json_int_t)pr->cpu_milli, "close_wait",
                pr->close_wait, "stuck_queues", pr->stuck_queues, "action",
                s->action == WD_ACTION_RESTART ? "restart" : "report", "shared",
                pod->shared, "shared_why", pod->shared_why, "since_watch_ms",
                (json_int_t)(wda_now_ms() - pod->watch_ms))));
    /* A lost GPU is a fault NVML reports of the device itself, not the
     * hang signature: the job cannot finish on it. */
    if (pod->last_v == WD_GPU_LOST) {
        wda_pod_finish(a, pod, pi, msg, sizeof(msg), true,
                       "NVML reports the GPU lost");
        return;
    }
    if (pod->shared) {
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                 "; %s, so the GPU's signals are not this pod's alone",
                 pod->shared_why);
        wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                       "the GPU is shared, judged for reports only");
        return;
    }
    /* In report mode RAS only adds to the Event: an Event that would be
     * deduplicated or rate-limited is not worth its queries. */
    if (s->action == WD_ACTION_REPORT &&
        !wda_event_would_post(a, pod, wd_verdict_name(pod->hang_v),
                              wda_now_ms())) {
        wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                       "the Event is deduplicated or rate-limited");
        return;
    }
    /* The NVML signature alone is never enough to act: a second signal
     * must agree (RAS counts that do not move across two queries). */
    if (!pod_ras_start(a, pod)) {
        why_not = "no second signal (NCCL RAS not reachable), and the GPU "
                  "signature alone is never acted on";
        wda_pod_finish(a, pod, pi, msg, sizeof(msg), false, why_not);
        return;
    }
    pod->hang_msg = strdup(msg);
    pod->ras_step = 1;
    pod->state = POD_CONFIRM;
    if (pod->hang_msg == NULL) {
        wda_pod_ras_drop(pod);
        wda_pod_finish(a, pod, pi, msg, sizeof(msg), false, "out of memory");
    }
}

/* Pods waiting for RAS: collects each answer, asks again a period after
 * the first, and decides once the second is in. */
void
wda_ras_due(struct agent *a, long long t)
{
    for (size_t pi = 0; pi < a->n_pods; pi++) {
        struct wpod *pod = &a->pods[pi];
        struct wd_ras_result r;
        char msg[1600], why[300], gap[24];
        int rc;

        if (!pod->used || pod->state != POD_CONFIRM)
            continue;
        if (pod->ras_step == 2) {
            if (t < pod->ras_next_ms)
                continue;
            if (!pod_ras_start(a, pod)) {
                snprintf(msg, sizeof(msg), "%s", pod->hang_msg);
                wda_pod_ras_drop(pod);
                wda_pod_finish(
                    a, pod, pi, msg, sizeof(msg), false,
                    "RAS answered once and could not be asked again");
                continue;
            }
            pod->ras_step = 3;
            continue;
        }
        if (pod->ras_job == NULL || !wd_ras_job_done(pod->ras_job))
            continue;
        rc = wd_ras_job_result(pod->ras_job, &r, why, sizeof(why));
        wd_ras_job_free(pod->ras_job);
        pod->ras_job = NULL;
        wda_logj(
            a, "ras",
            wda_podj(pod,
                     json_pack("{s:s,s:i,s:s,s:s,s:i,s:i,s:i,s:I}", "result",
                               rc == 0 ? "answered" : why, "query",
                               pod->ras_step == 1 ? 1 : 2, "format",
                               rc != 0  ? ""
                               : r.text ? "text"
                                        : "json",
                               "nccl", rc == 0 ? r.version : "",
                               "communicators", rc == 0 ? r.communicators : 0,
                               "missing", rc == 0 ? r.n_missing : 0, "behind",
                               rc == 0 ? r.n_behind : 0, "counts",
                               (json_int_t)(rc == 0 ? r.n_counts : 0))));
        snprintf(msg, sizeof(msg), "%s", pod->hang_msg);
        if (rc != 0) {
            snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), "; RAS: %s",
                     why);
            wda_pod_ras_drop(pod);
            wda_pod_finish(
                a, pod, pi, msg, sizeof(msg), false,
                "no second signal (NCCL RAS did not answer), and the "
                "GPU signature alone is never acted on");
            continue;
        }
        if (pod->ras_step == 1) {
            pod->ras1 = malloc(sizeof(*pod->ras1));
            if (pod->ras1 == NULL) {
                wda_pod_ras_drop(pod);
                wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                               "out of memory");
                continue;
            }
            *pod->ras1 = r;
            pod->ras_step = 2;
            pod->ras_next_ms = t + pod->spec.period_ms;
            continue;
        }
        ras_text(a, &r, msg, sizeof(msg));
        wda_duration_text(pod->spec.period_ms, gap, sizeof(gap));
        switch (wd_ras_compare(pod->ras1, &r)) {
        case WD_RAS_STILL:
            snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                     "; RAS: no rank issued a collective in %s", gap);
            wda_pod_ras_drop(pod);
            /* Counts that did not move are a stall only where the ranks
             * disagree (one is behind or missing: a collective entered by
             * some and never completed). Equal counts that do not move
             * are also what a pause between collectives looks like (a CPU
             * phase, evaluation, a checkpoint elsewhere). */
            if (ras_named_pod_works(a, &r, why, sizeof(why)))
                wda_pod_finish(a, pod, pi, msg, sizeof(msg), false, why);
            else if (r.n_behind > 0 || r.n_missing > 0)
                wda_pod_finish(a, pod, pi, msg, sizeof(msg), true,
                               "RAS: the counts of issued collectives did not "
                               "move, and a rank is behind or missing");
            else
                wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                               "RAS: no rank moved, but none is behind or "
                               "missing either, which a pause between "
                               "collectives looks like too");
            break;
        case WD_RAS_MOVED:
            snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                     "; RAS: collectives were issued within %s, so the job "
                     "still progresses",
                     gap);
            wda_pod_ras_drop(pod);
            wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                           "RAS shows collectives issued between two queries");
            break;
        case WD_RAS_NO_COUNTS:
            wda_pod_ras_drop(pod);
            wda_pod_finish(a, pod, pi, msg, sizeof(msg), false,
                           r.text
                               ? "RAS answered in the text format of NCCL "
                                 "before 2.28.7, which shows no counts where "
                                 "all ranks agree: nothing to compare"
                               : "RAS answered with no collective counts: "
                                 "nothing to compare");
            break;
        }
    }
}
