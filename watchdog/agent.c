/* The watchdog agent's loop: scan /proc for opted-in processes, sample each
 * pod once per period, apply the hang rule, and report or restart. This
 * file: the loop, the table of processes and pods, and what a process's
 * environment says. */
#include "watchdog/agent.h"

#include "watchdog/agent_int.h"

static volatile sig_atomic_t stop_requested;

const char *const wda_state_names[] = {"watch", "reported", "grace",
                                       "term",  "done",     "confirm"};

static void
on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

long long
wda_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
wd_options_defaults(struct wd_options *o)
{
    memset(o, 0, sizeof(*o));
    o->proc_root = "/proc";
    o->nvml_path = "libnvidia-ml.so.1";
    o->scan_ms = 5000;
    o->nvml_retry_ms = 60000;
    o->metrics_addr = "0.0.0.0";
    o->metrics_port = 9464;
    o->token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    o->ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    o->termination_log = "/dev/termination-log";
    o->node_max_procs = NODE_MAX_PROCS;
}

/* ---- logging ------------------------------------------------------- */

/* Prints o as one JSON line with the time first, then frees it. The
 * monotonic clock (mono_ms) is the one tests compare with. */
void
wda_logj(struct agent *a, const char *event, json_t *o)
{
    struct timespec ts;
    struct tm tm;
    char when[80];
    char *s;

    if (o == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    json_object_set_new(o, "time", json_string(when));
    json_object_set_new(o, "mono_ms", json_integer(wda_now_ms()));
    json_object_set_new(o, "event", json_string(event));
    (void)a;
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s != NULL) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
    json_decref(o);
}

/* Puts the pod's identity in front of the fields of o; returns o. */
json_t *
wda_podj(const struct wpod *p, json_t *o)
{
    json_t *r =
        json_pack("{s:s,s:s,s:s,s:s}", "namespace", p->ns[0] ? p->ns : "",
                  "pod", p->name, "pod_uid", p->uid, "container", p->container);

    if (r == NULL || o == NULL) {
        json_decref(r);
        return o;
    }
    json_object_update(r, o);
    json_decref(o);
    return r;
}

/* ---- tables -------------------------------------------------------- */

static void *
grow(void *v, size_t *cap, size_t need, size_t size)
{
    size_t ncap;
    void *nv;

    if (need <= *cap)
        return v;
    ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    nv = realloc(v, ncap * size);
    if (nv == NULL)
        return NULL;
    memset((char *)nv + *cap * size, 0, (ncap - *cap) * size);
    *cap = ncap;
    return nv;
}

static size_t
pid_slot(pid_t pid, size_t cap)
{
    return ((uint32_t)pid * 2654435761u) & (cap - 1);
}

/* Rebuilds the PID index after the table moved or shrank: at least twice
 * as many slots as processes, so that lookups stay O(1). */
static int
pidx_rebuild(struct agent *a)
{
    size_t cap = 64;

    while (cap < a->n_procs * 2 + 2)
        cap *= 2;
    if (cap != a->pidx_cap) {
        uint32_t *n = realloc(a->pidx, cap * sizeof(*n));

        if (n == NULL)
            return -1;
        a->pidx = n;
        a->pidx_cap = cap;
    }
    memset(a->pidx, 0, a->pidx_cap * sizeof(*a->pidx));
    for (size_t i = 0; i < a->n_procs; i++) {
        size_t k = pid_slot(a->procs[i].pid, a->pidx_cap);

        while (a->pidx[k] != 0)
            k = (k + 1) & (a->pidx_cap - 1);
        a->pidx[k] = (uint32_t)(i + 1);
    }
    return 0;
}

/* The watched process with this PID and start time (start 0: any live
 * one with this PID), or NULL. */
struct wproc *
wda_proc_find(struct agent *a, pid_t pid, uint64_t start)
{
    if (a->pidx_cap == 0)
        return NULL;
    for (size_t k = pid_slot(pid, a->pidx_cap); a->pidx[k] != 0;
         k = (k + 1) & (a->pidx_cap - 1)) {
        struct wproc *w = &a->procs[a->pidx[k] - 1];

        if (w->pid == pid && (start == 0 ? w->alive : w->start == start))
            return w;
    }
    return NULL;
}

/* Drops dead processes and those of forgotten pods from the table, and
 * recounts each pod's live processes. */
void
wda_procs_compact(struct agent *a)
{
    size_t out = 0;

    for (size_t i = 0; i < a->n_pods; i++)
        a->pods[i].n_procs = 0;
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];

        if (!w->alive || w->pod >= a->n_pods || !a->pods[w->pod].used) {
            free(w->fr_pipe);
            free(w->fr_dump);
            free(w->fr_dump_alt);
            continue;
        }
        a->pods[w->pod].n_procs++;
        a->procs[out++] = *w;
    }
    a->n_procs = out;
    if (pidx_rebuild(a) != 0)
        a->pidx_cap = 0; /* out of memory: lookups find nothing */
}

static int
seen_cmp(const void *x, const void *y)
{
    const struct seen *a = x, *b = y;

    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

static bool
seen_has(const struct agent *a, pid_t pid, const struct wd_stat *st)
{
    struct seen k = {pid, st->comm_hash, st->start};

    return a->seen.n > 0 &&
           bsearch(&k, a->seen.v, a->seen.n, sizeof(k), seen_cmp) != NULL;
}

static int
seen_add(struct agent *a, pid_t pid, const struct wd_stat *st)
{
    struct seenbuf *b = &a->seen_next;
    struct seen *ns = grow(b->v, &b->cap, b->n + 1, sizeof(*ns));

    if (ns == NULL)
        return -1;
    b->v = ns;
    ns[b->n].pid = pid;
    ns[b->n].comm = st->comm_hash;
    ns[b->n].start = st->start;
    b->n++;
    return 0;
}

ssize_t
wda_pod_find(struct agent *a, const char *uid)
{
    for (size_t i = 0; i < a->n_pods; i++)
        if (a->pods[i].used && strcmp(a->pods[i].uid, uid) == 0)
            return (ssize_t)i;
    return -1;
}

/* Drops kept entries that expired; with uid, that UID's entry too. */
static void
keep_prune(struct agent *a, const char *uid, long long t)
{
    for (size_t i = 0; i < a->n_kept;) {
        if (t - a->kept[i].at > UID_KEEP_MS ||
            (uid != NULL && strcmp(a->kept[i].uid, uid) == 0))
            a->kept[i] = a->kept[--a->n_kept];
        else
            i++;
    }
}

/* Keeps a forgotten pod's podkeep under its UID. */
void
wda_keep_save(struct agent *a, const struct wpod *pod, long long t)
{
    struct uidkeep *k;

    keep_prune(a, pod->uid, t);
    if (a->n_kept >= UID_KEEP_MAX) {
        size_t old = 0;

        for (size_t i = 1; i < a->n_kept; i++)
            if (a->kept[i].at < a->kept[old].at)
                old = i;
        a->kept[old] = a->kept[--a->n_kept];
    }
    if (a->kept == NULL) {
        a->kept = calloc(UID_KEEP_MAX, sizeof(*a->kept));
        if (a->kept == NULL)
            return;
    }
    k = &a->kept[a->n_kept++];
    snprintf(k->uid, sizeof(k->uid), "%s", pod->uid);
    k->at = t;
    k->k = pod->keep;
}

/* A new pod entry takes what its UID kept, if anything. */
static void
keep_restore(struct agent *a, struct wpod *pod, long long t)
{
    keep_prune(a, NULL, t);
    for (size_t i = 0; i < a->n_kept; i++) {
        if (strcmp(a->kept[i].uid, pod->uid) != 0)
            continue;
        pod->keep = a->kept[i].k;
        a->kept[i] = a->kept[--a->n_kept];
        return;
    }
}

/* The per-pod log limit, for the lines a pod's process churn makes
 * (watch, rewatch, exited, gone): LOG_POD_BURST lines, refilled one per
 * LOG_POD_REFILL_MS, kept for the UID's lifetime like the Event bucket.
 * What is dropped is counted, and said in one log-limited line per
 * LOG_POD_SAY_MS, so that one pod cannot push the other pods' lines out
 * of a rotated log. Hangs, decisions, actions and Events are never
 * dropped. */
#define LOG_POD_BURST 40.0
#define LOG_POD_REFILL_MS 1000LL
#define LOG_POD_SAY_MS 10000LL
bool
wda_pod_log_ok(struct agent *a, struct wpod *pod)
{
    long long t = wda_now_ms();

    if (wda_bucket_take(&pod->keep.log_tokens, &pod->keep.log_tokens_ms,
                        LOG_POD_BURST, LOG_POD_REFILL_MS, t))
        return true;
    pod->keep.log_dropped++;
    a->m.log_dropped++;
    if (pod->keep.log_said_ms == 0 ||
        t - pod->keep.log_said_ms >= LOG_POD_SAY_MS) {
        wda_logj(
            a, "log-limited",
            wda_podj(pod, json_pack("{s:I,s:s}", "dropped",
                                    (json_int_t)pod->keep.log_dropped, "why",
                                    "this pod's processes come and go faster "
                                    "than its log budget (watch, exited)")));
        pod->keep.log_said_ms = t;
        pod->keep.log_dropped = 0;
    }
    return false;
}

static void
copy_env(const char *env, size_t len, const char *name, char *out, size_t n)
{
    size_t vl;
    const char *v = wd_environ_find(env, len, name, &vl);

    out[0] = '\0';
    if (v == NULL)
        return;
    if (vl >= n)
        vl = n - 1;
    for (size_t i = 0; i < vl; i++)
        out[i] = isprint((unsigned char)v[i]) ? v[i] : '?';
    out[vl] = '\0';
}

/*
 * True when none of the pod's known processes is alive any more (checked
 * now, not at the last period), and drops them: a process that joins such
 * a pod belongs to a restarted container, not to the one being stopped.
 */
static bool
pod_restarted(struct agent *a, size_t pi)
{
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        struct wd_stat st;

        if (w->pod != pi || !w->alive)
            continue;
        if (wd_proc_stat(a->o->proc_root, w->pid, &st) == 0 &&
            st.start == w->start && st.state != 'Z' && st.state != 'X')
            return false;
    }
    for (size_t i = 0; i < a->n_procs; i++)
        if (a->procs[i].pod == pi)
            a->procs[i].alive = false;
    wda_procs_compact(a);
    return true;
}

/* rchar + wchar of pid; -1 when unreadable. */
int
wda_proc_io(struct agent *a, pid_t pid, uint64_t *bytes)
{
    char buf[1024];
    ssize_t n = wd_proc_read(a->o->proc_root, pid, "io", buf, sizeof(buf));

    return n > 0 ? wd_io_parse(buf, (size_t)n, bytes) : -1;
}

/*
 * PyTorch's flight recorder, as ProcessGroupNCCL sets it up (its DumpPipe):
 * with TORCH_NCCL_TRACE_BUFFER_SIZE above 0 and
 * TORCH_NCCL_DEBUG_INFO_PIPE_FILE set, each rank makes a FIFO
 * <stem><rank>.pipe and dumps its trace to
 * <TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank> (default /tmp/nccl_trace_rank_)
 * when anything is written to it. The rank is the env's RANK.
 */
/* PyTorch's flight-recorder settings, each a list of names in PyTorch's
 * order. Its getCvarString and getCvarInt (c10d Utils.hpp) walk the list
 * from the end, so the first name that is set wins, even when set to "".
 * The lists are those of the c10d sources read: FlightRecorder's ring
 * ({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, default 2000;
 * releases before the TORCH_FR_* names read the second alone, default 0),
 * DebugInfoWriter::getWriter's dump prefix ({"TORCH_FR_DUMP_TEMP_FILE",
 * "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}, default
 * $XDG_CACHE_HOME/torch/comm_lib_trace_rank_ or
 * $HOME/.cache/torch/comm_lib_trace_rank_ with HOME defaulting to /tmp;
 * before that, TORCH_NCCL_DEBUG_INFO_TEMP_FILE alone, default
 * /tmp/nccl_trace_rank_), and ProcessGroupNCCL's DumpPipe
 * (TORCH_NCCL_DEBUG_INFO_PIPE_FILE). */
static const char *const fr_buffer_names[] = {
    "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", NULL};
static const char *const fr_dump_names[] = {
    "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", NULL};
static const char *const fr_pipe_names[] = {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
                                            NULL};

/* The value of the first of names that the environment sets, into out;
 * false when none is set. */
static bool
env_first(struct agent *a, size_t envlen, const char *const *names, char *out,
          size_t n)
{
    for (; *names != NULL; names++) {
        size_t vl;

        if (wd_environ_find(a->envbuf, envlen, *names, &vl) != NULL) {
            copy_env(a->envbuf, envlen, *names, out, n);
            return true;
        }
    }
    out[0] = '\0';
    return false;
}

/*
 * The flight-recorder pipe of a process and where its dump will be: the
 * pipe is STEM<RANK>.pipe (DumpPipe names it after the process group's
 * global rank; RANK is that rank under torchrun, and where it is not, the
 * write finds no FIFO and the log says so). A ring size set to 0 or less
 * turns the recorder off; an unset one leaves it to the FIFO: PyTorch
 * makes the FIFO only when its recorder is on, and a write to a FIFO that
 * nobody opened fails at once. With the dump prefix unset, both PyTorch
 * defaults are watched (fr_dump_alt).
 */
static void
proc_flight_recorder(struct agent *a, size_t envlen, struct wproc *wp)
{
    char size[24], stem[200], rank[16], tmp[200], home[200], dyn[8];
    char *end;
    long long n;

    wp->fr_pipe = wp->fr_dump = wp->fr_dump_alt = NULL;
    if (!env_first(a, envlen, fr_pipe_names, stem, sizeof(stem)) ||
        stem[0] == '\0')
        return;
    if (env_first(a, envlen, fr_buffer_names, size, sizeof(size))) {
        errno = 0;
        n = strtoll(size, &end, 10);
        if (errno != 0 || end == size || *end != '\0' || n <= 0)
            return;
    }
    copy_env(a->envbuf, envlen, "RANK", rank, sizeof(rank));
    if (rank[0] == '\0' || strspn(rank, "0123456789") != strlen(rank))
        return;
    if (asprintf(&wp->fr_pipe, "%s%s.pipe", stem, rank) < 0)
        wp->fr_pipe = NULL;
    copy_env(a->envbuf, envlen, "TORCH_FR_DUMP_DYNAMIC_FILE_NAME", dyn,
             sizeof(dyn));
    if (env_first(a, envlen, fr_dump_names, tmp, sizeof(tmp))) {
        /* TORCH_FR_DUMP_DYNAMIC_FILE_NAME: the file is the prefix itself
         * (DebugInfoWriter::write). */
        bool whole = strcmp(dyn, "1") == 0 || strcasecmp(dyn, "true") == 0;

        if (asprintf(&wp->fr_dump, "%s%s", tmp, whole ? "" : rank) < 0)
            wp->fr_dump = NULL;
    } else {
        copy_env(a->envbuf, envlen, "XDG_CACHE_HOME", home, sizeof(home));
        if (home[0] == '\0') {
            if (!env_first(a, envlen, (const char *const[]){"HOME", NULL}, home,
                           sizeof(home)))
                snprintf(home, sizeof(home), "/tmp");
            if (asprintf(&wp->fr_dump, "%s/.cache/torch/comm_lib_trace_rank_%s",
                         home, rank) < 0)
                wp->fr_dump = NULL;
        } else if (asprintf(&wp->fr_dump, "%s/torch/comm_lib_trace_rank_%s",
                            home, rank) < 0) {
            wp->fr_dump = NULL;
        }
        if (asprintf(&wp->fr_dump_alt, "/tmp/nccl_trace_rank_%s", rank) < 0)
            wp->fr_dump_alt = NULL;
    }
    if (wp->fr_pipe == NULL || wp->fr_dump == NULL) {
        free(wp->fr_pipe);
        free(wp->fr_dump);
        free(wp->fr_dump_alt);
        wp->fr_pipe = wp->fr_dump = wp->fr_dump_alt = NULL;
    }
}

/* A newly found process: opted in? which pod? */
/*
 * The node's work budget: each period reads /proc for every watched
 * process, so the node watches at most node_max_procs of them. Past that
 * a pod may still add processes up to its share, node_max_procs over the
 * number of watched pods (at least 1): a tenant whose pods fork
 * thousands cannot take the budget from a pod that comes later.
 */
static bool
node_budget_ok(const struct agent *a, const struct wpod *pod)
{
    size_t live = 0, pods = 0, share;

    for (size_t i = 0; i < a->n_pods; i++)
        if (a->pods[i].used) {
            live += a->pods[i].n_procs;
            pods++;
        }
    if ((long)live < a->o->node_max_procs)
        return true;
    share = (size_t)a->o->node_max_procs / (pods ? pods : 1);
    return pod->n_procs < (share ? share : 1);
}

static void
proc_consider(struct agent *a, pid_t pid, const struct wd_stat *st)
{
    const struct wd_options *o = a->o;
    struct wd_podref ref;
    struct ng_error err;
    struct wd_spec spec;
    struct wproc *wp;
    struct wpod *pod;
    char cg[4096];
    const char *v;
    size_t vl;
    ssize_t n, envlen, pi;
    long long t = wda_now_ms();

    envlen = wd_proc_read(o->proc_root, pid, "environ", a->envbuf, ENVIRON_MAX);
    if (envlen < 0 || (v = wd_environ_find(a->envbuf, (size_t)envlen,
                                           WD_ENV_NAME, &vl)) == NULL) {
        seen_add(a, pid, st);
        return;
    }
    if (wd_spec_parse(v, vl, &spec, &err) != 0) {
        wda_logj(a, "bad-spec",
                 json_pack("{s:i,s:s#,s:s}", "pid", (int)pid, "value", v,
                           (int)(vl > 200 ? 200 : vl), "error", err.msg));
        seen_add(a, pid, st);
        return;
    }
    memset(&ref, 0, sizeof(ref));
    n = wd_proc_read(o->proc_root, pid, "cgroup", cg, sizeof(cg));
    if (n < 0 || wd_cgroup_parse(cg, (size_t)n, &ref) != 0) {
        char uid[64];

        copy_env(a->envbuf, (size_t)envlen, "NCCLGUARD_POD_UID", uid,
                 sizeof(uid));
        if (!o->pod_from_env || uid[0] == '\0' || strlen(uid) > 36) {
            wda_logj(
                a, "not-a-pod",
                json_pack("{s:i,s:s}", "pid", (int)pid, "why",
                          "opted in but its cgroup names no pod; ignored"));
            seen_add(a, pid, st);
            return;
        }
        snprintf(ref.pod_uid, sizeof(ref.pod_uid), "%.36s", uid);
    }
    pi = wda_pod_find(a, ref.pod_uid);
    if (pi < 0) {
        /* Reuse the slot of a pod that is gone, else grow. */
        for (size_t i = 0; i < a->n_pods && pi < 0; i++)
            if (!a->pods[i].used)
                pi = (ssize_t)i;
        if (pi < 0) {
            struct wpod *np =
                grow(a->pods, &a->cap_pods, a->n_pods + 1, sizeof(*np));

            if (np == NULL)
                return;
            a->pods = np;
            pi = (ssize_t)a->n_pods++;
        }
        pod = &a->pods[pi];
        memset(pod, 0, sizeof(*pod));
        pod->used = true;
        snprintf(pod->uid, sizeof(pod->uid), "%s", ref.pod_uid);
        keep_restore(a, pod, t);
        snprintf(pod->container, sizeof(pod->container), "%s",
                 ref.container_id);
        /* The env is the tenant's: its name and namespace are believed
         * only under the test flag. On a node they come from the API,
         * looked up by the UID that the cgroup path gives. */
        if (o->pod_from_env) {
            copy_env(a->envbuf, (size_t)envlen, "NCCLGUARD_POD_NAME", pod->name,
                     sizeof(pod->name));
            copy_env(a->envbuf, (size_t)envlen, "NCCLGUARD_POD_NAMESPACE",
                     pod->ns, sizeof(pod->ns));
        }
        copy_env(a->envbuf, (size_t)envlen, "NCCL_RAS_ADDR", pod->ras_addr,
                 sizeof(pod->ras_addr));
        /* Under the test flag the pod's IP is its RAS address's host, as
         * the webhook sets NCCL_RAS_ADDR=$(NCCLGUARD_POD_IP):28028. */
        if (o->pod_from_env && strrchr(pod->ras_addr, ':') != NULL)
            snprintf(pod->ip, sizeof(pod->ip), "%.*s",
                     (int)(strrchr(pod->ras_addr, ':') - pod->ras_addr),
                     pod->ras_addr);
        pod->spec = spec;
        if (wd_spec_format(&spec, pod->spec_text, sizeof(pod->spec_text)) != 0)
            pod->spec_text[0] = '\0';
        pod->watch_ms = pod->last_ms = t;
        pod->next_ms = t + spec.period_ms;
    }
    pod = &a->pods[pi];
    if (pod->state != POD_WATCH && pod->state != POD_REPORTED &&
        pod_restarted(a, (size_t)pi)) {
        /* The restart worked: the kubelet started the container again in
         * the same pod. Watch it afresh. */
        pod->spec = spec;
        if (wd_spec_format(&spec, pod->spec_text, sizeof(pod->spec_text)) != 0)
            pod->spec_text[0] = '\0';
        pod->state = POD_WATCH;
        pod->rule.idle = 0;
        pod->watch_ms = pod->last_ms = t;
        pod->next_ms = t + spec.period_ms;
        free(pod->q);
        pod->q = NULL;
        pod->n_q = 0;
        if (wda_pod_log_ok(a, pod))
            wda_logj(a, "rewatch",
                     wda_podj(pod, json_pack("{s:i}", "pid", (int)pid)));
    }
    if (pod->n_procs >= POD_MAX_PROCS || !node_budget_ok(a, pod)) {
        /* The work budget: a pod that forks without end does not make
         * every scan and period cost more, nor do many pods that fork. */
        if (!pod->budget_logged)
            wda_logj(
                a, "budget",
                wda_podj(pod, json_pack("{s:i,s:i,s:I,s:s}", "pid", (int)pid,
                                        "max_processes", POD_MAX_PROCS,
                                        "node_max_processes",
                                        (json_int_t)o->node_max_procs, "effect",
                                        "further processes of this pod are "
                                        "not watched")));
        pod->budget_logged = true;
        seen_add(a, pid, st);
        return;
    }
    wp = grow(a->procs, &a->cap_procs, a->n_procs + 1, sizeof(*wp));
    if (wp == NULL)
        return;
    a->procs = wp;
    wp = &a->procs[a->n_procs++];
    wp->pid = pid;
    wp->start = st->start;
    wp->prev_ticks = st->cpu_ticks;
    wp->io_ok = wda_proc_io(a, pid, &wp->prev_io) == 0;
    proc_flight_recorder(a, (size_t)envlen, wp);
    wp->pod = (size_t)pi;
    wp->gen = a->scan_gen;
    wp->alive = true;
    pod->n_procs++;
    if (a->n_procs * 2 + 2 > a->pidx_cap) {
        if (pidx_rebuild(a) != 0)
            a->pidx_cap = 0;
    } else {
        size_t k = pid_slot(pid, a->pidx_cap);

        while (a->pidx[k] != 0)
            k = (k + 1) & (a->pidx_cap - 1);
        a->pidx[k] = (uint32_t)a->n_procs;
    }
    if (wda_pod_log_ok(a, pod))
        wda_logj(a, "watch",
                 wda_podj(pod, json_pack("{s:i,s:I,s:s,s:s}", "pid", (int)pid,
                                         "start", (json_int_t)st->start, "spec",
                                         pod->spec_text, "state",
                                         wda_state_names[pod->state])));
}

/* Walks /proc: new opted-in processes join their pod. */
static void
scan(struct agent *a)
{
    struct dirent *de;
    DIR *d = opendir(a->o->proc_root);

    if (d == NULL) {
        wda_logj(a, "error",
                 json_pack("{s:s,s:s}", "what", "cannot read /proc", "why",
                           strerror(errno)));
        return;
    }
    a->seen_next.n = 0;
    a->scan_gen++;
    while ((de = readdir(d)) != NULL) {
        struct wproc *w;
        struct wd_stat st;
        char *end;
        long pid;

        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        errno = 0;
        pid = strtol(de->d_name, &end, 10);
        if (errno != 0 || *end != '\0' || pid <= 0 || pid > INT32_MAX)
            continue;
        if (pid == (long)getpid())
            continue;
        if (wd_proc_stat(a->o->proc_root, (pid_t)pid, &st) != 0)
            continue;
        if ((w = wda_proc_find(a, (pid_t)pid, st.start)) != NULL) {
            if (st.state != 'Z' && st.state != 'X')
                w->gen = a->scan_gen;
            continue;
        }
        if (seen_has(a, (pid_t)pid, &st)) {
            seen_add(a, (pid_t)pid, &st);
            continue;
        }
        proc_consider(a, (pid_t)pid, &st);
    }
    closedir(d);
    /* A watched process this walk did not find is gone: drop it now, so
     * that the table holds the live processes only, however many come
     * and go between two periods. */
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];

        if (w->alive && w->gen != a->scan_gen) {
            w->alive = false;
            if (wda_pod_log_ok(a, &a->pods[w->pod]))
                wda_logj(a, "exited",
                         wda_podj(&a->pods[w->pod],
                                  json_pack("{s:i}", "pid", (int)w->pid)));
        }
    }
    wda_procs_compact(a);
    /* Keep only what still exists: the cache is rebuilt on every walk. */
    {
        struct seenbuf t = a->seen;

        a->seen = a->seen_next;
        a->seen_next = t;
    }
    /* An empty list may have no table (nothing seen, or out of memory):
     * qsort(3) takes no NULL base, whatever the count. */
    if (a->seen.n > 1)
        qsort(a->seen.v, a->seen.n, sizeof(*a->seen.v), seen_cmp);
}

/* ---- the loop --------------------------------------------------------- */

static void
nvml_sample(struct agent *a, long long t)
{
    bool ok = wd_nvml_read(a->nvml, a->gpus, t, a->o->nvml_retry_ms);

    if (ok && !a->nvml_was_up)
        wda_logj(
            a, "nvml",
            json_pack("{s:s,s:i}", "state", "up", "gpus", (int)a->gpus->n));
    if (!ok && (a->nvml_was_up || !a->nvml_logged_down)) {
        wda_logj(a, "nvml",
                 json_pack("{s:s,s:s,s:s}", "state", "down", "why",
                           a->gpus->why, "effect",
                           "no pod is judged until NVML answers; "
                           "retrying"));
        a->nvml_logged_down = true;
    }
    a->nvml_was_up = ok;
}

static void
agent_release(struct agent *a)
{
    for (size_t i = 0; i < a->n_pods; i++) {
        free(a->pods[i].q);
        free(a->pods[i].ev_msg);
        free(a->pods[i].evw_msg);
        wda_pod_ras_drop(&a->pods[i]);
    }
    free(a->pods);
    free(a->kept);
    for (size_t i = 0; i < a->n_procs; i++) {
        free(a->procs[i].fr_pipe);
        free(a->procs[i].fr_dump);
        free(a->procs[i].fr_dump_alt);
    }
    free(a->procs);
    free(a->pidx);
    free(a->seen.v);
    free(a->seen_next.v);
    free(a->tcp);
    free(a->inodes);
    free(a->envbuf);
    free(a->tcpbuf);
    free(a->gpus);
    wd_nvml_free(a->nvml);
    wd_mserver_stop(a->ms);
    if (a->ms == NULL && a->listen_fd >= 0)
        close(a->listen_fd);
    free(a->mtext);
}

int
wd_agent_run(const struct wd_options *o)
{
    struct sigaction sa;
    struct agent a;
    long long next_scan, t;
    int rc = 1;

    memset(&a, 0, sizeof(a));
    a.o = o;
    a.listen_fd = -1;
    a.t0_ms = wda_now_ms();
    a.clk_tck = sysconf(_SC_CLK_TCK);
    if (a.clk_tck <= 0)
        a.clk_tck = 100;
    a.ev.api_server = o->api_server;
    a.ev.token_file = o->token_file;
    a.ev.ca_file = o->ca_file;
    a.ev.timeout_ms = 3000;
    a.nvml = wd_nvml_new(o->nvml_path);
    a.gpus = calloc(1, sizeof(*a.gpus));
    a.tcp = calloc(MAX_TCP_ROWS, sizeof(*a.tcp));
    a.inodes = calloc(MAX_SOCKETS, sizeof(*a.inodes));
    a.envbuf = malloc(ENVIRON_MAX);
    a.tcpbuf = malloc(TCP_TEXT_MAX);
    if (!a.nvml || !a.gpus || !a.tcp || !a.inodes || !a.envbuf || !a.tcpbuf) {
        fprintf(stderr, "ncclguard-watchdog: out of memory\n");
        goto done;
    }
    a.mtext = malloc(METRICS_MAX);
    if (a.mtext == NULL || wda_metrics_listen(&a) != 0)
        goto done;
    if (a.listen_fd >= 0) {
        a.ms = wd_mserver_start(a.listen_fd);
        if (a.ms == NULL) {
            a.listen_fd = -1;
            fprintf(stderr, "ncclguard-watchdog: cannot start the metrics "
                            "thread\n");
            goto done;
        }
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    wda_logj(
        &a, "start",
        json_pack("{s:s,s:s,s:I,s:s}", "proc", o->proc_root, "nvml",
                  o->nvml_path, "scan_ms", (json_int_t)o->scan_ms, "events",
                  o->api_server && o->api_server[0] ? o->api_server : "off"));
    nvml_sample(&a, wda_now_ms());
    next_scan = wda_now_ms();
    while (!stop_requested) {
        long long wake;
        bool due = false;

        t = wda_now_ms();
        if (o->run_ms > 0 && t - a.t0_ms >= o->run_ms)
            break;
        if (t >= next_scan) {
            bool any = false, fresh = false;

            scan(&a);
            next_scan = t + o->scan_ms;
            /* NVML's sample buffer holds seconds, not a period: read it
             * on every walk while pods are watched, and give new pods
             * their baseline. */
            for (size_t i = 0; i < a.n_pods; i++) {
                any |= a.pods[i].used;
                fresh |= a.pods[i].used && !a.pods[i].base_set;
            }
            if (any)
                nvml_sample(&a, wda_now_ms());
            if (fresh)
                for (size_t i = 0; i < a.n_pods; i++)
                    if (a.pods[i].used && !a.pods[i].base_set)
                        wda_pod_base(&a, &a.pods[i]);
        }
        t = wda_now_ms();
        for (size_t i = 0; i < a.n_pods && !due; i++)
            due = a.pods[i].used && a.pods[i].next_ms <= t;
        if (due) {
            nvml_sample(&a, t);
            for (size_t i = 0; i < a.n_pods; i++)
                if (a.pods[i].used && a.pods[i].next_ms <= t)
                    wda_pod_sample(&a, i, t);
        }
        wda_ras_due(&a, wda_now_ms());
        wda_fr_due(&a, wda_now_ms());
        wda_ident_due(&a, wda_now_ms());
        wda_actions_due(&a, wda_now_ms());
        wda_reap_children();
        /* Sleep until the next period, deadline or scan. */
        wake = next_scan;
        for (size_t i = 0; i < a.n_pods; i++) {
            const struct wpod *p = &a.pods[i];

            if (!p->used)
                continue;
            if (p->next_ms < wake)
                wake = p->next_ms;
            if ((p->state == POD_GRACE || p->state == POD_TERM) &&
                p->deadline_ms < wake)
                wake = p->deadline_ms;
            if (p->fr_pending && wda_now_ms() + 100 < wake)
                wake = wda_now_ms() + 100; /* look for the dumps */
            if (p->state == POD_CONFIRM) {
                /* RAS's answer, looked for every 20 ms while a query
                 * runs; the second query, at its time. */
                long long w =
                    p->ras_step == 2 ? p->ras_next_ms : wda_now_ms() + 20;

                if (w < wake)
                    wake = w;
            }
            if (p->evw_msg != NULL && wda_now_ms() + 200 < wake)
                wake = wda_now_ms() + 200; /* the pod list, again */
        }
        if (o->run_ms > 0 && a.t0_ms + o->run_ms < wake)
            wake = a.t0_ms + o->run_ms;
        t = wda_now_ms();
        if (a.ms != NULL) {
            wd_mserver_publish(a.ms, a.mtext,
                               wda_metrics_text(&a, a.mtext, METRICS_MAX));
            wd_mserver_tick(a.ms, t);
        }
        /* /metrics has its own thread: the loop only sleeps here. */
        (void)poll(NULL, 0, wake > t ? (int)(wake - t) : 0);
    }
    wda_logj(&a, "stop", json_object());
    rc = 0;
done:
    agent_release(&a);
    return rc;
}
