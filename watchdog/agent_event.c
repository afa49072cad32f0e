/* The watchdog agent: Events (dedup, buckets), the pod list that names a
 * pod, the Node Event of a lost GPU, and /metrics. */
#include "watchdog/agent_int.h"

/* Events, as the kubelet's event recorder limits them
 * (client-go tools/record, events_cache.go: a spam filter of a token
 * bucket per object, and deduplication of repeats): per pod, the same
 * cause again within EV_DEDUP_MS is not posted, and at most EV_POD_BURST
 * Events, refilled one per EV_POD_REFILL_MS; per node, EV_NODE_BURST
 * refilled one per EV_NODE_REFILL_MS. */
#define EV_DEDUP_MS (10 * 60 * 1000LL)
#define EV_POD_BURST 5.0
#define EV_POD_REFILL_MS (5 * 60 * 1000LL)
#define EV_NODE_BURST 20.0
#define EV_NODE_REFILL_MS (10 * 1000LL)

/* Takes a token from a bucket; false when it is empty. */
bool
wda_bucket_take(double *tokens, long long *at, double burst, long long refill,
                long long t)
{
    if (*at == 0) {
        *tokens = burst;
    } else if (t > *at) {
        *tokens += (double)(t - *at) / (double)refill;
        if (*tokens > burst)
            *tokens = burst;
    }
    *at = t;
    if (*tokens < 1.0)
        return false;
    *tokens -= 1.0;
    return true;
}

/* Fills the name and namespace of every watched pod the API lists on this
 * node, matched by UID. At most one list per EV_IDENT_MS, except that a
 * pod (pod, may be NULL) whose UID never had a list of its own gets one
 * as soon as EV_IDENT_MIN_MS passed since the last: a pod whose processes
 * restart keeps its UID's ident_tried (podkeep), so it cannot hold the
 * lookup from the others. Returns true when a list was asked for now. */
#define EV_IDENT_MS 10000
#define EV_IDENT_MIN_MS 1000
#define POD_LIST_MAX (8 << 20)
bool
wda_pods_identify(struct agent *a, struct wpod *pod, long long t)
{
    char path[400], why[300];
    json_error_t je;
    json_t *root, *items, *it;
    char *body;
    size_t len, i;
    long code;

    if (a->ident_ms != 0 && t - a->ident_ms < EV_IDENT_MS) {
        if (pod == NULL || pod->keep.ident_tried ||
            t - a->ident_ms < EV_IDENT_MIN_MS)
            return false;
    }
    if (pod != NULL)
        pod->keep.ident_tried = true;
    a->ident_ms = t;
    if (a->o->node_name == NULL || a->o->node_name[0] == '\0') {
        wda_logj(a, "identity",
                 json_pack("{s:s}", "result",
                           "no --node-name: pods cannot be looked up"));
        return true;
    }
    snprintf(path, sizeof(path),
             "/api/v1/pods?fieldSelector=spec.nodeName%%3D%.200s",
             a->o->node_name);
    code =
        wd_api_get(&a->ev, path, POD_LIST_MAX, &body, &len, why, sizeof(why));
    if (code != 200) {
        wda_logj(a, "identity", json_pack("{s:s}", "result", why));
        return true;
    }
    root = json_loadb(body, len, 0, &je);
    free(body);
    items = json_object_get(root, "items");
    json_array_foreach(items, i, it)
    {
        json_t *md = json_object_get(it, "metadata");
        const char *uid = json_string_value(json_object_get(md, "uid"));
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *ip = json_string_value(
            json_object_get(json_object_get(it, "status"), "podIP"));
        ssize_t pi;

        if (uid == NULL || name == NULL || ns == NULL ||
            (pi = wda_pod_find(a, uid)) < 0)
            continue;
        snprintf(a->pods[pi].name, sizeof(a->pods[pi].name), "%s", name);
        snprintf(a->pods[pi].ns, sizeof(a->pods[pi].ns), "%s", ns);
        snprintf(a->pods[pi].ip, sizeof(a->pods[pi].ip), "%s", ip ? ip : "");
    }
    json_decref(root);
    return true;
}

void
wda_post_event(struct agent *a, struct wpod *pod, const char *reason,
               const char *msg, const char *key)
{
    long long t0 = wda_now_ms();
    char why[300], ts[40], name[300];
    struct timespec now;
    struct tm tm;
    json_t *ev;
    char *body;
    long code;

    if (a->ev.api_server == NULL || a->ev.api_server[0] == '\0')
        return;
    if ((pod->name[0] == '\0' || pod->ns[0] == '\0') && !a->o->pod_from_env &&
        !wda_pods_identify(a, pod, t0)) {
        /* The list was fetched a moment ago for another pod: try again
         * once it may be fetched (wda_ident_due), not give up. */
        free(pod->evw_msg);
        pod->evw_msg = strdup(msg);
        pod->evw_reason = reason;
        snprintf(pod->evw_key, sizeof(pod->evw_key), "%s", key);
        if (pod->evw_until_ms == 0)
            pod->evw_until_ms = t0 + 2 * EV_IDENT_MS;
        wda_logj(
            a, "event",
            wda_podj(pod, json_pack("{s:s}", "result",
                                    "deferred: the pod list was fetched less "
                                    "than a second ago")));
        return;
    }
    pod->evw_until_ms = 0;
    if (pod->name[0] == '\0' || pod->ns[0] == '\0') {
        wda_logj(
            a, "event",
            wda_podj(pod,
                     json_pack("{s:s}", "result",
                               a->o->pod_from_env
                                   ? "not-sent: the pod's name or namespace "
                                     "is unknown (no NCCLGUARD_POD_NAME or "
                                     "NCCLGUARD_POD_NAMESPACE)"
                                   : "not-sent: the API lists no pod with "
                                     "this UID on this node")));
        return;
    }
    if (strcmp(pod->keep.ev_key, key) == 0 &&
        t0 - pod->keep.ev_ms < EV_DEDUP_MS) {
        pod->keep.ev_dups++;
        a->m.events_suppressed++;
        wda_logj(
            a, "event",
            wda_podj(pod, json_pack("{s:s,s:I}", "result",
                                    "deduplicated: the same cause was posted "
                                    "less than 10 minutes ago",
                                    "repeats", (json_int_t)pod->keep.ev_dups)));
        return;
    }
    if (!wda_bucket_take(&pod->keep.ev_tokens, &pod->keep.ev_tokens_ms,
                         EV_POD_BURST, EV_POD_REFILL_MS, t0) ||
        !wda_bucket_take(&a->ev_tokens, &a->ev_tokens_ms, EV_NODE_BURST,
                         EV_NODE_REFILL_MS, t0)) {
        a->m.events_suppressed++;
        wda_logj(
            a, "event",
            wda_podj(pod, json_pack("{s:s}", "result",
                                    "rate-limited: too many Events from this "
                                    "pod or node")));
        return;
    }
    snprintf(pod->keep.ev_key, sizeof(pod->keep.ev_key), "%s", key);
    pod->keep.ev_ms = t0;
    pod->keep.ev_dups = 0;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof(name), "%.200s.ncclhang-", pod->name);
    ev = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,"
                   "s:{s:s,s:s},s:s,s:s,s:i,s:s,s:s}",
                   "apiVersion", "v1", "kind", "Event", "metadata",
                   "generateName", name, "namespace", pod->ns, "involvedObject",
                   "apiVersion", "v1", "kind", "Pod", "name", pod->name,
                   "namespace", pod->ns, "uid", pod->uid, "reason", reason,
                   "message", msg, "type", "Warning", "source", "component",
                   "ncclguard-watchdog", "host",
                   a->o->node_name ? a->o->node_name : "", "firstTimestamp", ts,
                   "lastTimestamp", ts, "count", 1, "reportingComponent",
                   "ncclguard-watchdog", "reportingInstance",
                   a->o->node_name ? a->o->node_name : "");
    body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (body == NULL)
        return;
    why[0] = '\0';
    code = wd_event_post(&a->ev, pod->ns, body, why, sizeof(why));
    free(body);
    if (code == 201)
        a->m.events++;
    else
        a->m.event_errors++;
    wda_logj(a, "event",
             wda_podj(pod, json_pack("{s:I,s:s}", "status", (json_int_t)code,
                                     "result", code == 201 ? "created" : why)));
}

/* Events waiting for the pod list: posted (or given up) once it can be
 * fetched, at most 2 x EV_IDENT_MS after the first try. */
void
wda_ident_due(struct agent *a, long long t)
{
    for (size_t pi = 0; pi < a->n_pods; pi++) {
        struct wpod *pod = &a->pods[pi];
        char key[24];
        char *msg;

        if (!pod->used || pod->evw_msg == NULL)
            continue;
        msg = pod->evw_msg;
        pod->evw_msg = NULL;
        snprintf(key, sizeof(key), "%s", pod->evw_key);
        if (t > pod->evw_until_ms) {
            pod->evw_until_ms = 0;
            wda_logj(
                a, "event",
                wda_podj(pod, json_pack("{s:s}", "result",
                                        "not-sent: the pod list could not be "
                                        "fetched in time")));
        } else {
            wda_post_event(a, pod, pod->evw_reason, msg, key);
        }
        free(msg);
    }
}

/* A lost GPU is this node's fault whatever the job did: besides the pod's
 * Event, one on the Node that the node loop counts as node-class evidence
 * (contract/nodeevent.h). Its name is the pod's, so a second hang of the
 * same pod answers 409 and the GPU counts once. */
void
wda_node_gpu_lost_event(struct agent *a, struct wpod *pod)
{
    const char *node = a->o->node_name;
    char why[700], ts[40], name[300], podref[340];
    struct timespec now;
    struct tm tm;
    json_t *ev, *evid;
    char *body, *evtext;
    long code;

    if (a->ev.api_server == NULL || a->ev.api_server[0] == '\0' ||
        node == NULL || node[0] == '\0' || pod->uid[0] == '\0')
        return;
    if ((pod->name[0] == '\0' || pod->ns[0] == '\0') && !a->o->pod_from_env)
        (void)wda_pods_identify(a, pod, wda_now_ms());
    if (pod->name[0] == '\0' || pod->ns[0] == '\0')
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof(name), "%.180s.ncclguard-gpulost.%.64s", node,
             pod->uid);
    snprintf(podref, sizeof(podref), "%s/%s", pod->ns, pod->name);
    snprintf(why, sizeof(why), "%s/gpu-lost", pod->uid);
    evid = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s}", "key", why, "pod", podref,
                     "node", node, "reason", "GPULost", "at",
                     (json_int_t)wda_now_ms(), "gpus", pod->lost_gpus);
    evtext = evid != NULL ? json_dumps(evid, JSON_COMPACT) : NULL;
    json_decref(evid);
    if (evtext == NULL)
        return;
    ev = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:s,s:s},s:{s:s,s:s,s:s,s:s},"
        "s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,s:i,s:s,s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
        "namespace", NG_NODE_EVENT_NS, "annotations", NG_EVIDENCE_ANN, evtext,
        "involvedObject", "apiVersion", "v1", "kind", "Node", "name", node,
        "related", "apiVersion", "v1", "kind", "Pod", "name", pod->name,
        "namespace", pod->ns, "reason", NG_EVENT_GPU_LOST, "message", "",
        "type", "Warning", "source", "component", "ncclguard-watchdog", "host",
        node, "firstTimestamp", ts, "lastTimestamp", ts, "count", 1,
        "reportingComponent", "ncclguard-watchdog", "reportingInstance", node);
    free(evtext);
    if (ev == NULL)
        return;
    snprintf(why, sizeof(why),
             "NVML reports GPU %s lost (NVML_ERROR_GPU_IS_LOST) under pod %s",
             pod->lost_gpus, podref);
    json_object_set_new(ev, "message", json_string(why));
    json_object_set_new(json_object_get(ev, "related"), "uid",
                        json_string(pod->uid));
    body = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (body == NULL)
        return;
    why[0] = '\0';
    code = wd_event_post(&a->ev, NG_NODE_EVENT_NS, body, why, sizeof(why));
    free(body);
    if (code == 201)
        a->m.events++;
    else if (code != 409)
        a->m.event_errors++;
    wda_logj(
        a, "event",
        wda_podj(pod, json_pack("{s:s,s:I,s:s}", "reason", NG_EVENT_GPU_LOST,
                                "status", (json_int_t)code, "result",
                                code == 201   ? "created"
                                : code == 409 ? "already posted"
                                              : why)));
}

/* True when an Event for key would be posted now: not a repeat within
 * the dedup window, and a token in the pod's and the node's buckets. Takes
 * nothing. */
bool
wda_event_would_post(const struct agent *a, const struct wpod *pod,
                     const char *key, long long t)
{
    const struct podkeep *k = &pod->keep;
    double pt = k->ev_tokens_ms == 0
                    ? EV_POD_BURST
                    : k->ev_tokens + (double)(t - k->ev_tokens_ms) /
                                         (double)EV_POD_REFILL_MS;
    double nt = a->ev_tokens_ms == 0
                    ? EV_NODE_BURST
                    : a->ev_tokens + (double)(t - a->ev_tokens_ms) /
                                         (double)EV_NODE_REFILL_MS;

    if (strcmp(k->ev_key, key) == 0 && t - k->ev_ms < EV_DEDUP_MS)
        return false;
    return pt >= 1.0 && nt >= 1.0;
}

/* ---- /metrics -------------------------------------------------------- */

static void
label(char *out, size_t n, const char *s)
{
    size_t o = 0;

    for (; *s != '\0' && o + 3 < n; s++) {
        if (*s == '"' || *s == '\\')
            out[o++] = '\\';
        out[o++] = *s == '\n' ? ' ' : *s;
    }
    out[o] = '\0';
}

/* The labels of one pod's series, in the order each series names them. */
#define POD_LABELS "namespace=\"%s\",pod=\"%s\",pod_uid=\"%s\""

/* A watched pod and its name and namespace escaped as label values. */
struct pod_labels {
    const struct wpod *p;
    char ns[140];
    char name[520];
};

/* Steps *i to the next watched pod (with a known /dev/shm when shm is
 * set) and fills l with it; false once no pod is left. Every per-pod
 * series walks the pods through it, so all skip the same ones. */
static bool
pod_labels_next(const struct agent *a, size_t *i, bool shm,
                struct pod_labels *l)
{
    for (; *i < a->n_pods; (*i)++) {
        const struct wpod *p = &a->pods[*i];

        if (!p->used || (shm && !p->shm_known))
            continue;
        l->p = p;
        label(l->ns, sizeof(l->ns), p->ns);
        label(l->name, sizeof(l->name), p->name);
        (*i)++;
        return true;
    }
    return false;
}

size_t
wda_metrics_text(struct agent *a, char *buf, size_t n)
{
    size_t u = 0, watched = 0;
    const struct metrics *m = &a->m;
    struct pod_labels l;

#define OUT(...)                                                               \
    do {                                                                       \
        int w_ = snprintf(buf + u, n - u, __VA_ARGS__);                        \
        if (w_ < 0 || (size_t)w_ >= n - u)                                     \
            return u;                                                          \
        u += (size_t)w_;                                                       \
    } while (0)
    for (size_t i = 0; i < a->n_pods; i++)
        watched += a->pods[i].used;
    OUT("# HELP ncclguard_watchdog_nvml_up Whether NVML answered the last "
        "read.\n# TYPE ncclguard_watchdog_nvml_up gauge\n"
        "ncclguard_watchdog_nvml_up %d\n",
        a->gpus->ok ? 1 : 0);
    OUT("# HELP ncclguard_watchdog_watched_pods Pods with opted-in "
        "processes.\n# TYPE ncclguard_watchdog_watched_pods gauge\n"
        "ncclguard_watchdog_watched_pods %zu\n",
        watched);
    OUT("# HELP ncclguard_watchdog_watched_processes Entries of the table "
        "of watched processes (live ones only).\n"
        "# TYPE ncclguard_watchdog_watched_processes gauge\n"
        "ncclguard_watchdog_watched_processes %zu\n",
        a->n_procs);
    OUT("# HELP ncclguard_watchdog_idle_periods Consecutive idle periods "
        "per pod.\n# TYPE ncclguard_watchdog_idle_periods gauge\n");
    for (size_t i = 0; pod_labels_next(a, &i, false, &l);)
        OUT("ncclguard_watchdog_idle_periods{" POD_LABELS "} %d\n", l.ns,
            l.name, l.p->uid, l.p->rule.idle);
    OUT("# HELP ncclguard_watchdog_shm_bytes /dev/shm of each watched pod: "
        "used and size (the tmpfs, as the kubelet sized it).\n"
        "# TYPE ncclguard_watchdog_shm_bytes gauge\n");
    for (size_t i = 0; pod_labels_next(a, &i, true, &l);)
        OUT("ncclguard_watchdog_shm_bytes{" POD_LABELS ",kind=\"used\"} %llu\n"
            "ncclguard_watchdog_shm_bytes{" POD_LABELS ",kind=\"size\"} %llu\n",
            l.ns, l.name, l.p->uid, (unsigned long long)l.p->shm_used, l.ns,
            l.name, l.p->uid, (unsigned long long)l.p->shm_size);
    OUT("# HELP ncclguard_watchdog_shm_orphan_segments NCCL segments in a "
        "pod's /dev/shm that no live process of the pod maps.\n"
        "# TYPE ncclguard_watchdog_shm_orphan_segments gauge\n");
    for (size_t i = 0; pod_labels_next(a, &i, true, &l);)
        OUT("ncclguard_watchdog_shm_orphan_segments{" POD_LABELS "} %d\n", l.ns,
            l.name, l.p->uid, l.p->shm_orphans);
    OUT("# HELP ncclguard_watchdog_hangs_total Hangs detected.\n"
        "# TYPE ncclguard_watchdog_hangs_total counter\n"
        "ncclguard_watchdog_hangs_total %llu\n",
        m->hangs);
    OUT("# HELP ncclguard_watchdog_actions_total Actions taken, by kind.\n"
        "# TYPE ncclguard_watchdog_actions_total counter\n"
        "ncclguard_watchdog_actions_total{action=\"checkpoint_signal\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"checkpoint_file\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"sigterm\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"sigkill\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"event\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"hang_report\"} %llu\n",
        m->checkpoint_signal, m->checkpoint_file, m->sigterm, m->sigkill,
        m->events, m->report_files);
    OUT("# HELP ncclguard_watchdog_event_errors_total Event POSTs that "
        "failed.\n# TYPE ncclguard_watchdog_event_errors_total counter\n"
        "ncclguard_watchdog_event_errors_total %llu\n",
        m->event_errors);
    OUT("# HELP ncclguard_watchdog_events_suppressed_total Events not "
        "posted: deduplicated or rate-limited.\n"
        "# TYPE ncclguard_watchdog_events_suppressed_total counter\n"
        "ncclguard_watchdog_events_suppressed_total %llu\n",
        m->events_suppressed);
    OUT("# HELP ncclguard_watchdog_log_lines_dropped_total Log lines not "
        "written: a pod's processes came and went past its log budget.\n"
        "# TYPE ncclguard_watchdog_log_lines_dropped_total counter\n"
        "ncclguard_watchdog_log_lines_dropped_total %llu\n",
        m->log_dropped);
    OUT("# HELP ncclguard_watchdog_pid_reused_total Signals not sent because "
        "the PID now names another process.\n"
        "# TYPE ncclguard_watchdog_pid_reused_total counter\n"
        "ncclguard_watchdog_pid_reused_total %llu\n",
        m->pid_reused);
#undef OUT
    return u;
}

int
wda_metrics_listen(struct agent *a)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int one = 1;

    a->listen_fd = -1;
    if (a->o->metrics_addr == NULL)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->o->metrics_port);
    if (inet_pton(AF_INET, a->o->metrics_addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "ncclguard-watchdog: bad --metrics-addr %s\n",
                a->o->metrics_addr);
        return -1;
    }
    a->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (a->listen_fd < 0)
        return -1;
    setsockopt(a->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(a->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(a->listen_fd, 2 * WD_MSERVER_MAX_CONN) != 0 ||
        getsockname(a->listen_fd, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "ncclguard-watchdog: cannot listen on %s:%d: %s\n",
                a->o->metrics_addr, a->o->metrics_port, strerror(errno));
        return -1;
    }
    if (a->o->port_file != NULL) {
        FILE *f = fopen(a->o->port_file, "w");

        if (f != NULL) {
            fprintf(f, "%d\n", ntohs(sa.sin_port));
            fclose(f);
        }
    }
    return 0;
}
