/* The node loop: list and watch this node's pods, turn each ring-check
 * verdict into an Event, a metric and node evidence, and keep the Node's
 * condition, state annotation and taint (docs/nodeloop.md). */
#include "watchdog/nodeloop.h"

#include "version.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/text.h"
#include "contract/nodeevent.h"
#include "contract/wdspec.h"
#include "policy/policy.h"
#include "watchdog/kube.h"
#include "watchdog/nodeclass.h"
#include "watchdog/nodestate.h"

#define NL_MAX_PODS 1024
#define NL_SEEN 2048
#define NL_TAINT_KEY "ncclguard.io/nccl-unhealthy"
#define NL_STATE_ANN "ncclguard.io/nccl-state"
#define NL_COND "NCCLHealthy"
#define NL_RINGCHECK "ncclguard-ringcheck"
#define NL_VALIDATION_LABEL "ncclguard.io/validation-for"
/* The breaker's count: Nodes per list page, and how long a count holds. */
#define NL_COUNT_PAGE 100
#define NL_COUNT_KEEP_MS 30000

/* The quarantine flags given on the command line: each overrides the
 * policy file's value (docs/nodeloop.md, "Policy"). */
enum {
    NLF_MODE = 1 << 0,
    NLF_THRESHOLD = 1 << 1,
    NLF_WINDOW = 1 << 2,
    NLF_COOLDOWN = 1 << 3,
    NLF_COOLDOWN_MAX = 1 << 4,
    NLF_EXPIRY = 1 << 5,
    NLF_SHARE = 1 << 6,
};

/* The policy file is read whole, at most this much (the webhook's cap,
 * RELOAD_MAX_POLICY_BYTES in server/reload.h). */
#define NL_POLICY_MAX (4u << 20)

struct nl_opts {
    struct kube_client kc;
    const char *policy_path;   /* --policy, NULL: the flags and defaults */
    struct nq_policy flag_pol; /* what the flags said */
    unsigned flags_set;        /* NLF_*: which of them were given */
    const char *node, *ns, *image, *gpu_resource, *gpu_selector;
    const char *metrics_file;
    int metrics_port;
    int metrics_fd; /* the listening socket, -1 none */
    const char *port_file;
    struct nq_policy pol;
    long watch_s;
    int64_t run_ms, heartbeat_ms, tick_ms, event_poll_ms;
    int validation_timeout_s;
};

struct podrec {
    char uid[64];
    int gpus;
    int active;
    unsigned gen; /* the list (or watch) generation that last saw it */
};

struct nl {
    struct nl_opts *o;
    struct nq_node st;
    char rv[64];
    int need_list;
    long watch_error; /* the code of the last ERROR event, 0 none */
    /* After a 410 the next list is a consistent read (resourceVersion
     * unset); otherwise the watch cache serves it (resourceVersion=0), as
     * client-go's reflector chooses (relistResourceVersion in
     * tools/cache/reflector.go). */
    int rv_gone;
    struct podrec pods[NL_MAX_PODS];
    int npods;
    unsigned list_gen;
    /* The breaker's count, kept a while (cluster_count). */
    struct nq_cluster count;
    int64_t count_until_ms;
    /* The periodic step runs on a timer (ticker), not on watch traffic: a
     * real apiserver sends a bookmark about once a minute. step_mu keeps
     * the step and the watch's events apart. */
    pthread_mutex_t step_mu;
    char seen[NL_SEEN][96];
    int nseen, seen_next;
    int64_t last_tick_ms, last_cond_ms, last_poll_ms;
    char *pol_seen; /* the policy file's bytes last read, good or bad */
    size_t pol_seen_len;
    int pol_failing;
    /* metrics, under mu */
    pthread_mutex_t mu;
    long verdicts[7][5];
    long taints_applied, taints_lifted, taints_withheld;
    long validations_pass, validations_fail;
    long watch_dropped, watch_gone, api_errors, events_posted;
    long pair_sent, pair_counted, gpu_lost_counted;
    long pol_reloads, pol_reload_errors;
    char metrics[16384];
};

static int64_t
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
rfc3339(int64_t ms, char *buf, size_t n)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* "2026-12-01T21:40:25Z" (optionally with fractions) -> ms; -1 bad. */
static int64_t
parse_time(const char *s)
{
    struct tm tm;
    const char *end;

    if (s == NULL)
        return -1;
    memset(&tm, 0, sizeof(tm));
    end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (end == NULL)
        return -1;
    return (int64_t)timegm(&tm) * 1000;
}

static void
logj(const char *what, json_t *fields)
{
    char ts[32];
    char *text;

    rfc3339(now_ms(), ts, sizeof(ts));
    if (fields == NULL)
        fields = json_object();
    json_object_set_new(fields, "ts", json_string(ts));
    json_object_set_new(fields, "event", json_string(what));
    text = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
    if (text != NULL) {
        printf("%s\n", text);
        fflush(stdout);
        free(text);
    }
    json_decref(fields);
}

/* --- the policy --------------------------------------------------------- */

static volatile sig_atomic_t nl_hup;

static void
on_hup(int sig)
{
    (void)sig;
    nl_hup = 1;
}

/* The quarantine settings in force: the policy's block (or the built-in
 * defaults without --policy), then every flag given on top. */
static void
policy_apply(struct nl_opts *o, const struct policy_quarantine *q)
{
    const struct nq_policy *f = &o->flag_pol;

    if (q != NULL) {
        o->pol.mode = q->mode == QUARANTINE_TAINT ? NQ_QUARANTINE : NQ_OBSERVE;
        o->pol.threshold = q->threshold;
        o->pol.window_ms = q->window_ms;
        o->pol.cooldown_ms = q->cooldown_ms;
        o->pol.cooldown_max_ms = q->cooldown_max_ms;
        o->pol.expiry_ms = q->expiry_ms;
        o->pol.max_share_permille = q->max_share_permille;
    }
    if (o->flags_set & NLF_MODE)
        o->pol.mode = f->mode;
    if (o->flags_set & NLF_THRESHOLD)
        o->pol.threshold = f->threshold;
    if (o->flags_set & NLF_WINDOW)
        o->pol.window_ms = f->window_ms;
    if (o->flags_set & NLF_COOLDOWN)
        o->pol.cooldown_ms = f->cooldown_ms;
    if (o->flags_set & NLF_COOLDOWN_MAX)
        o->pol.cooldown_max_ms = f->cooldown_max_ms;
    if (o->flags_set & NLF_EXPIRY)
        o->pol.expiry_ms = f->expiry_ms;
    if (o->flags_set & NLF_SHARE)
        o->pol.max_share_permille = f->max_share_permille;
}

/*
 * Reads the policy file and, when its bytes changed (or force: SIGHUP),
 * loads it and puts its quarantine block in force. The same rules as the
 * webhook's reload (policy_try in server/reload.c): a file that does not
 * load leaves the last good policy in force, is reported once (not on
 * every step while it stays the same), and raises the failing gauge until
 * a good one comes. Returns 0 when a policy is in force, -1 when none
 * ever loaded (at start: the loop does not run without it).
 */
static int
policy_reload(struct nl *nl, int force)
{
    struct nl_opts *o = nl->o;
    struct ng_error e;
    struct policy *p;
    char msg[sizeof(e.msg) + 600];
    size_t len = 0;
    char *buf;

    if (o->policy_path == NULL)
        return 0;
    ng_error_clear(&e);
    buf = file_read(o->policy_path, NL_POLICY_MAX, &len, &e);
    if (buf != NULL && !force && nl->pol_seen != NULL &&
        len == nl->pol_seen_len && memcmp(buf, nl->pol_seen, len) == 0) {
        free(buf);
        return 0;
    }
    p = buf != NULL ? policy_load(buf, len, o->policy_path, &e) : NULL;
    if (p == NULL) {
        int first = nl->pol_seen == NULL;

        ng_error_format(&e, o->policy_path, msg, sizeof(msg));
        pthread_mutex_lock(&nl->mu);
        nl->pol_reload_errors++;
        nl->pol_failing = 1;
        pthread_mutex_unlock(&nl->mu);
        logj("policy-error",
             json_pack("{s:s,s:s}", "path", o->policy_path, "error", msg));
        /* Remembered as seen, so the same bad bytes are not reported on
         * every step; a file that cannot be read is tried again. */
        if (buf != NULL) {
            free(nl->pol_seen);
            nl->pol_seen = buf;
            nl->pol_seen_len = len;
        }
        return first ? -1 : 0;
    }
    pthread_mutex_lock(&nl->mu);
    policy_apply(o, policy_quarantine(p));
    nl->pol_reloads++;
    nl->pol_failing = 0;
    pthread_mutex_unlock(&nl->mu);
    logj("policy",
         json_pack("{s:s,s:s,s:s,s:i,s:I,s:I,s:I,s:I,s:i}", "path",
                   o->policy_path, "hash", policy_hash(p), "mode",
                   o->pol.mode == NQ_QUARANTINE ? "quarantine" : "observe",
                   "threshold", o->pol.threshold, "windowMs",
                   (json_int_t)o->pol.window_ms, "cooldownMs",
                   (json_int_t)o->pol.cooldown_ms, "cooldownMaxMs",
                   (json_int_t)o->pol.cooldown_max_ms, "expiryMs",
                   (json_int_t)o->pol.expiry_ms, "maxSharePermille",
                   o->pol.max_share_permille));
    policy_free(p);
    free(nl->pol_seen);
    nl->pol_seen = buf;
    nl->pol_seen_len = len;
    return 0;
}

/* --- metrics ------------------------------------------------------------ */

static void
metrics_render(struct nl *nl)
{
    char *b = nl->metrics;
    size_t n = sizeof(nl->metrics), k = 0;
    const char *node = nl->o->node;

#define ADD(...)                                                               \
    do {                                                                       \
        int w_ = snprintf(b + k, n - k, __VA_ARGS__);                          \
        if (w_ > 0 && (size_t)w_ < n - k)                                      \
            k += (size_t)w_;                                                   \
    } while (0)
    ADD("# HELP ncclguard_node_verdicts_total Ring-check and agent verdicts "
        "on this node, by verdict and class.\n"
        "# TYPE ncclguard_node_verdicts_total counter\n");
    for (int v = 0; v < 7; v++)
        for (int c = 0; c < 5; c++)
            if (nl->verdicts[v][c] > 0)
                ADD("ncclguard_node_verdicts_total{node=\"%s\",verdict=\"%s\","
                    "class=\"%s\"} %ld\n",
                    node, nc_verdict_name((enum nc_verdict)v),
                    nc_class_name((enum nc_class)c), nl->verdicts[v][c]);
    ADD("# HELP ncclguard_node_state 1 for the node's NCCL state.\n"
        "# TYPE ncclguard_node_state gauge\n");
    for (int s = NQ_HEALTHY; s <= NQ_QUARANTINED; s++)
        ADD("ncclguard_node_state{node=\"%s\",state=\"%s\"} %d\n", node,
            nq_kind_name((enum nq_kind)s), nl->st.kind == (enum nq_kind)s);
    ADD("# HELP ncclguard_node_evidence Counted verdicts in the window.\n"
        "# TYPE ncclguard_node_evidence gauge\n"
        "ncclguard_node_evidence{node=\"%s\"} %d\n",
        node, nl->st.nev);
    ADD("# HELP ncclguard_node_taints_total Taints applied, lifted, or "
        "withheld by the circuit breaker.\n"
        "# TYPE ncclguard_node_taints_total counter\n"
        "ncclguard_node_taints_total{node=\"%s\",action=\"applied\"} %ld\n"
        "ncclguard_node_taints_total{node=\"%s\",action=\"lifted\"} %ld\n"
        "ncclguard_node_taints_total{node=\"%s\",action=\"withheld\"} %ld\n",
        node, nl->taints_applied, node, nl->taints_lifted, node,
        nl->taints_withheld);
    ADD("# HELP ncclguard_node_breaker_open 1 while the breaker holds this "
        "node's taint.\n"
        "# TYPE ncclguard_node_breaker_open gauge\n"
        "ncclguard_node_breaker_open{node=\"%s\"} %d\n",
        node, nl->st.kind == NQ_WITHHELD);
    ADD("# TYPE ncclguard_node_validations_total counter\n"
        "ncclguard_node_validations_total{node=\"%s\",result=\"pass\"} %ld\n"
        "ncclguard_node_validations_total{node=\"%s\",result=\"fail\"} %ld\n",
        node, nl->validations_pass, node, nl->validations_fail);
    ADD("# TYPE ncclguard_node_watch_restarts_total counter\n"
        "ncclguard_node_watch_restarts_total{node=\"%s\",why=\"dropped\"} "
        "%ld\n"
        "ncclguard_node_watch_restarts_total{node=\"%s\",why=\"gone\"} %ld\n",
        node, nl->watch_dropped, node, nl->watch_gone);
    ADD("# TYPE ncclguard_node_api_errors_total counter\n"
        "ncclguard_node_api_errors_total{node=\"%s\"} %ld\n"
        "# TYPE ncclguard_node_events_total counter\n"
        "ncclguard_node_events_total{node=\"%s\"} %ld\n",
        node, nl->api_errors, node, nl->events_posted);
    ADD("# HELP ncclguard_node_quarantine_mode 1 for the quarantine mode in "
        "force (the policy's defaults.quarantine.mode, or --mode).\n"
        "# TYPE ncclguard_node_quarantine_mode gauge\n"
        "ncclguard_node_quarantine_mode{node=\"%s\",mode=\"observe\"} %d\n"
        "ncclguard_node_quarantine_mode{node=\"%s\",mode=\"quarantine\"} %d\n",
        node, nl->o->pol.mode == NQ_OBSERVE, node,
        nl->o->pol.mode == NQ_QUARANTINE);
    ADD("# HELP ncclguard_node_policy_reloads_total Reads of a changed "
        "policy file, by result.\n"
        "# TYPE ncclguard_node_policy_reloads_total counter\n"
        "ncclguard_node_policy_reloads_total{node=\"%s\",result=\"ok\"} %ld\n"
        "ncclguard_node_policy_reloads_total{node=\"%s\",result=\"error\"} "
        "%ld\n"
        "# HELP ncclguard_node_policy_reload_failing 1 while the policy file "
        "does not load (the last good one stays in force).\n"
        "# TYPE ncclguard_node_policy_reload_failing gauge\n"
        "ncclguard_node_policy_reload_failing{node=\"%s\"} %d\n",
        node, nl->pol_reloads, node, nl->pol_reload_errors, node,
        nl->pol_failing);
    ADD("# HELP ncclguard_node_peer_evidence_total Evidence carried by Node "
        "Events: pair verdicts sent to the other node, pair verdicts from "
        "another node counted here, lost GPUs from the watchdog counted.\n"
        "# TYPE ncclguard_node_peer_evidence_total counter\n"
        "ncclguard_node_peer_evidence_total{node=\"%s\",action=\"pair-sent\"} "
        "%ld\n"
        "ncclguard_node_peer_evidence_total{node=\"%s\",action=\"pair-"
        "counted\"} "
        "%ld\n"
        "ncclguard_node_peer_evidence_total{node=\"%s\",action=\"gpu-lost-"
        "counted\"} %ld\n",
        node, nl->pair_sent, node, nl->pair_counted, node,
        nl->gpu_lost_counted);
#undef ADD
}

/* Renders the metrics and, with --metrics-file, writes them through a
 * temporary file and rename (readers never see half a file). */
static void
metrics_publish(struct nl *nl)
{
    char tmp[512];
    FILE *f;

    pthread_mutex_lock(&nl->mu);
    metrics_render(nl);
    pthread_mutex_unlock(&nl->mu);
    if (nl->o->metrics_file == NULL)
        return;
    snprintf(tmp, sizeof(tmp), "%s.tmp", nl->o->metrics_file);
    if ((f = fopen(tmp, "w")) == NULL)
        return;
    fputs(nl->metrics, f);
    if (fclose(f) == 0)
        rename(tmp, nl->o->metrics_file);
}

static void *
metrics_serve(void *arg)
{
    struct nl *nl = arg;

    for (;;) {
        char req[1024], hdr[160];
        int c = accept(nl->o->metrics_fd, NULL, NULL);
        size_t len;

        struct timeval tv = {2, 0};

        if (c < 0) {
            if (errno == EINTR)
                continue;
            return NULL;
        }
        /* A client that sends nothing must not hold the only thread. */
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        (void)!read(c, req, sizeof(req));
        pthread_mutex_lock(&nl->mu);
        len = strlen(nl->metrics);
        snprintf(hdr, sizeof(hdr),
                 "HTTP/1.1 200 OK\r\nContent-Type: text/plain; "
                 "version=0.0.4\r\nContent-Length: %zu\r\nConnection: "
                 "close\r\n\r\n",
                 len);
        (void)!write(c, hdr, strlen(hdr));
        (void)!write(c, nl->metrics, len);
        pthread_mutex_unlock(&nl->mu);
        close(c);
    }
}

/* --- Node reads and writes ---------------------------------------------- */

struct nodeview {
    json_t *obj; /* the Node, owned */
    const char *rv;
    const char *uid;
    const char *state_ann; /* or NULL */
    int tainted;
    int gpus; /* allocatable */
    const char *cond_status, *cond_ltt;
};

static void
nodeview_release(struct nodeview *v)
{
    json_decref(v->obj);
    memset(v, 0, sizeof(*v));
}

/* A GPU count: 0 .. NL_GPUS_MAX - 1, else 0 (the same bound for a JSON
 * number as for a string). */
#define NL_GPUS_MAX 100000

static int
quantity_int(json_t *q)
{
    if (json_is_integer(q)) {
        json_int_t v = json_integer_value(q);

        return v >= 0 && v < NL_GPUS_MAX ? (int)v : 0;
    }
    if (json_is_string(q)) {
        char *end;
        long v = strtol(json_string_value(q), &end, 10);

        if (*end == '\0' && v >= 0 && v < NL_GPUS_MAX)
            return (int)v;
    }
    return 0;
}

/* GETs path and returns its JSON body (the caller's), or NULL after
 * counting and logging an API error: a status other than 200, or an
 * answer that is not JSON. */
static json_t *
nl_get_json(struct nl *nl, const char *path)
{
    char why[300];
    struct buf b = {0};
    json_t *doc = NULL;
    long code =
        kube_request(&nl->o->kc, "GET", path, NULL, NULL, &b, why, sizeof(why));

    if (code == 200)
        doc = json_loadb(b.p != NULL ? b.p : "", b.len, 0, NULL);
    if (doc == NULL) {
        /* What came back, cut and made valid UTF-8 (json_pack refuses
         * anything else, and an error page can be long). */
        if (code == 200)
            text_format(why, sizeof(why), NULL,
                        "the answer is not JSON; check what answers in the "
                        "API server's place (a proxy?): %s",
                        b.p != NULL ? b.p : "");
        else if (code >= 0)
            text_format(why, sizeof(why), NULL, "%s", b.p != NULL ? b.p : "");
        nl->api_errors++;
        logj("api-error", json_pack("{s:s,s:I,s:s}", "path", path, "status",
                                    (json_int_t)code, "why", why));
    }
    buf_release(&b);
    return doc;
}

static int
node_get(struct nl *nl, struct nodeview *v)
{
    char path[512];
    json_t *taints, *t, *conds, *c;
    size_t i;

    memset(v, 0, sizeof(*v));
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", nl->o->node);
    v->obj = nl_get_json(nl, path);
    if (!json_is_object(v->obj)) {
        nodeview_release(v);
        return -1;
    }
    v->rv = json_string_value(json_object_get(
        json_object_get(v->obj, "metadata"), "resourceVersion"));
    v->uid = json_string_value(
        json_object_get(json_object_get(v->obj, "metadata"), "uid"));
    v->state_ann = json_string_value(json_object_get(
        json_object_get(json_object_get(v->obj, "metadata"), "annotations"),
        NL_STATE_ANN));
    taints = json_object_get(json_object_get(v->obj, "spec"), "taints");
    json_array_foreach(taints, i, t)
    {
        const char *k = json_string_value(json_object_get(t, "key"));

        if (k != NULL && strcmp(k, NL_TAINT_KEY) == 0)
            v->tainted = 1;
    }
    v->gpus = quantity_int(json_object_get(
        json_object_get(json_object_get(v->obj, "status"), "allocatable"),
        nl->o->gpu_resource));
    conds = json_object_get(json_object_get(v->obj, "status"), "conditions");
    json_array_foreach(conds, i, c)
    {
        const char *type = json_string_value(json_object_get(c, "type"));

        if (type != NULL && strcmp(type, NL_COND) == 0) {
            v->cond_status = json_string_value(json_object_get(c, "status"));
            v->cond_ltt =
                json_string_value(json_object_get(c, "lastTransitionTime"));
        }
    }
    if (v->rv == NULL) {
        /* No resourceVersion to write against: callers see a failed read
         * and own nothing. */
        nodeview_release(v);
        return -1;
    }
    return 0;
}

/* The Node's taints with ours added (want) or removed (!want). */
static json_t *
taints_wanted(json_t *node, int want, enum nc_class cls)
{
    json_t *out = json_array(), *t;
    json_t *have = json_object_get(json_object_get(node, "spec"), "taints");
    size_t i;

    json_array_foreach(have, i, t)
    {
        const char *k = json_string_value(json_object_get(t, "key"));

        if (k == NULL || strcmp(k, NL_TAINT_KEY) != 0)
            json_array_append(out, t);
    }
    /* NoSchedule only: running pods stay; never NoExecute. */
    if (want)
        json_array_append_new(
            out, json_pack("{s:s,s:s,s:s}", "key", NL_TAINT_KEY, "value",
                           nc_class_name(cls), "effect", "NoSchedule"));
    return out;
}

static int
patch_send(struct nl *nl, const char *path, const char *type, json_t *patch,
           long *code_out)
{
    char why[300];
    struct buf b = {0};
    char *body = json_dumps(patch, JSON_COMPACT);
    long code;

    if (body == NULL)
        return -1;
    code = kube_request(&nl->o->kc, "PATCH", path, type, body, &b, why,
                        sizeof(why));
    *code_out = code;
    if (code != 200) {
        nl->api_errors++;
        logj("api-error",
             json_pack("{s:s,s:I,s:s,s:s}", "path", path, "status",
                       (json_int_t)code, "why", code < 0 ? why : "", "answer",
                       b.p != NULL ? b.p : ""));
    }
    free(body);
    buf_release(&b);
    return code == 200 ? 0 : -1;
}

/* Writes the condition through nodes/status, as Node Problem Detector
 * does (SetConditions and generatePatch in node-problem-detector's
 * pkg/exporters/k8sexporter/problemclient/problem_client.go): a
 * strategic-merge patch of status.conditions, whose merge key is type, so
 * the kubelet's conditions are left alone. */
static int
condition_write(struct nl *nl, const struct nodeview *v)
{
    const char *status;
    char reason[64], msg[400], now[32], path[512];
    const char *ltt;
    json_t *patch;
    long code;
    int rc;

    nq_condition(&nl->st, &nl->o->pol, &status, reason, sizeof(reason), msg,
                 sizeof(msg));
    rfc3339(now_ms(), now, sizeof(now));
    ltt = v->cond_status != NULL && strcmp(v->cond_status, status) == 0 &&
                  v->cond_ltt != NULL
              ? v->cond_ltt
              : now;
    patch = json_pack("{s:{s:[{s:s,s:s,s:s,s:s,s:s,s:s}]}}", "status",
                      "conditions", "type", NL_COND, "status", status, "reason",
                      reason, "message", msg, "lastHeartbeatTime", now,
                      "lastTransitionTime", ltt);
    snprintf(path, sizeof(path), "/api/v1/nodes/%s/status", nl->o->node);
    rc = patch_send(nl, path, "application/strategic-merge-patch+json", patch,
                    &code);
    json_decref(patch);
    if (rc == 0)
        nl->last_cond_ms = now_ms();
    return rc;
}

/* Writes the state annotation and the taint that the state implies in one
 * JSON patch whose first operation tests the resourceVersion: a Node
 * changed in between (another controller's taint) fails the test, and the
 * write is redone on a fresh read, so no other taint is ever lost. */
static int
node_write(struct nl *nl)
{
    char state[8192], path[512];
    int tries;

    if (nq_encode(&nl->st, state, sizeof(state)) != 0)
        return -1;
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", nl->o->node);
    for (tries = 0; tries < 4; tries++) {
        struct nodeview v;
        json_t *ops, *taints, *ann;
        long code;
        int rc, want = nl->st.kind == NQ_QUARANTINED;

        if (node_get(nl, &v) != 0)
            return -1;
        ops = json_array();
        json_array_append_new(
            ops, json_pack("{s:s,s:s,s:s}", "op", "test", "path",
                           "/metadata/resourceVersion", "value", v.rv));
        ann =
            json_object_get(json_object_get(v.obj, "metadata"), "annotations");
        if (!json_is_object(ann))
            json_array_append_new(
                ops, json_pack("{s:s,s:s,s:{}}", "op", "add", "path",
                               "/metadata/annotations", "value"));
        json_array_append_new(
            ops, json_pack("{s:s,s:s,s:s}", "op", "add", "path",
                           "/metadata/annotations/ncclguard.io~1nccl-state",
                           "value", state));
        if (want != v.tainted) {
            taints = taints_wanted(v.obj, want, nl->st.cls);
            json_array_append_new(
                ops, json_pack("{s:s,s:s,s:o}", "op",
                               json_object_get(json_object_get(v.obj, "spec"),
                                               "taints") != NULL
                                   ? "replace"
                                   : "add",
                               "path", "/spec/taints", "value", taints));
        }
        rc = patch_send(nl, path, "application/json-patch+json", ops, &code);
        json_decref(ops);
        if (rc == 0) {
            rc = condition_write(nl, &v);
            nodeview_release(&v);
            return rc;
        }
        nodeview_release(&v);
        if (code != 409 && code != 422)
            return -1;
    }
    return -1;
}

/* --- Events ------------------------------------------------------------- */

/* Event names are DNS subdomains: lower-case the parts we make up. */
static void
post_event(struct nl *nl, const char *ns, const char *name, const char *kind,
           const char *obj_name, const char *obj_ns, const char *uid,
           int warning, const char *reason, const char *msg, json_t *related,
           json_t *ann)
{
    char path[512], why[300], now[32];
    struct buf b = {0};
    json_t *ev, *inv;
    char *body;
    long code;

    rfc3339(now_ms(), now, sizeof(now));
    inv = json_pack("{s:s,s:s,s:s}", "apiVersion", "v1", "kind", kind, "name",
                    obj_name);
    if (obj_ns != NULL)
        json_object_set_new(inv, "namespace", json_string(obj_ns));
    if (uid != NULL)
        json_object_set_new(inv, "uid", json_string(uid));
    ev = json_pack("{s:s,s:s,s:{s:s,s:s},s:o,s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,"
                   "s:i,s:s,s:s}",
                   "apiVersion", "v1", "kind", "Event", "metadata", "name",
                   name, "namespace", ns, "involvedObject", inv, "reason",
                   reason, "message", msg, "type",
                   warning ? "Warning" : "Normal", "source", "component",
                   "ncclguard-node-loop", "host", nl->o->node, "firstTimestamp",
                   now, "lastTimestamp", now, "count", 1, "reportingComponent",
                   "ncclguard.io/node-loop", "reportingInstance", nl->o->node);
    if (related != NULL)
        json_object_set_new(ev, "related", related);
    if (ann != NULL)
        json_object_set_new(json_object_get(ev, "metadata"), "annotations",
                            ann);
    body = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (body == NULL)
        return;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
    code = kube_request(&nl->o->kc, "POST", path, "application/json", body, &b,
                        why, sizeof(why));
    free(body);
    /* 409: the same verdict was already posted (a relist, a restart). */
    if (code == 201 || code == 200)
        nl->events_posted++;
    else if (code != 409) {
        nl->api_errors++;
        logj("api-error", json_pack("{s:s,s:I,s:s}", "path", path, "status",
                                    (json_int_t)code, "why", why));
    }
    buf_release(&b);
}

static void
node_event(struct nl *nl, const struct nq_actions *a)
{
    char name[300];

    if (a->event_reason[0] == '\0')
        return;
    snprintf(name, sizeof(name), "%s.ncclguard.%llx", nl->o->node,
             (unsigned long long)now_ms());
    /* involvedObject.uid is the node's name, as the kubelet's own node
     * reference has it (nodeRef in pkg/kubelet/kubelet.go): `kubectl
     * describe node` selects Events on involvedObject.uid, trying the
     * Node's UID and then its name (NodeDescriber in
     * k8s.io/kubectl/pkg/describe), so an Event without one never shows. */
    post_event(nl, NG_NODE_EVENT_NS, name, "Node", nl->o->node, NULL,
               nl->o->node, a->event_warning, a->event_reason, a->event_msg,
               NULL, NULL);
    logj("node-event", json_pack("{s:s,s:s}", "reason", a->event_reason,
                                 "message", a->event_msg));
}

/* --- the breaker's count ------------------------------------------------ */

/* One page of GPU Nodes into *c; the continue token into cont ("" at the
 * end). -1 when the page could not be read. */
static int
count_page(struct nl *nl, struct nq_cluster *c, char *cont, size_t cn)
{
    char path[1400], *esc, *cesc = NULL;
    json_t *list, *n;
    const char *next;
    size_t i;

    esc = curl_easy_escape(NULL, nl->o->gpu_selector, 0);
    if (cont[0] != '\0')
        cesc = curl_easy_escape(NULL, cont, 0);
    snprintf(path, sizeof(path), "/api/v1/nodes?labelSelector=%s&limit=%d%s%s",
             esc != NULL ? esc : "", NL_COUNT_PAGE, cesc != NULL ? "&continue=" : "",
             cesc != NULL ? cesc : "");
    curl_free(esc);
    curl_free(cesc);
    if ((list = nl_get_json(nl, path)) == NULL)
        return -1;
    json_array_foreach(json_object_get(list, "items"), i, n)
    {
        const char *name = json_string_value(
            json_object_get(json_object_get(n, "metadata"), "name"));
        json_t *t,
            *taints = json_object_get(json_object_get(n, "spec"), "taints");
        size_t j;

        c->gpu_nodes++;
        if (name != NULL && strcmp(name, nl->o->node) == 0)
            continue;
        json_array_foreach(taints, j, t)
        {
            const char *k = json_string_value(json_object_get(t, "key"));

            if (k != NULL && strcmp(k, NL_TAINT_KEY) == 0) {
                c->tainted++;
                break;
            }
        }
    }
    next = json_string_value(
        json_object_get(json_object_get(list, "metadata"), "continue"));
    snprintf(cont, cn, "%s", next != NULL ? next : "");
    json_decref(list);
    return 0;
}

/*
 * The breaker's count: GPU Nodes, and those of them (other than this one)
 * under the taint. Listed in pages of NL_COUNT_PAGE Nodes, each far below
 * the client's 8 MiB answer cap however large the Nodes' status grows
 * (a GPU Node with its image list is tens of KB); a continue token that
 * expired (410) starts over once. A count is kept for NL_COUNT_KEEP_MS,
 * give or take a fifth, so that the loops of a fabric-wide failure do not
 * list every Node at every step, nor all at the same moment. Unknown size:
 * the breaker holds (gpu_nodes 0 taints nothing).
 */
static void
cluster_count(struct nl *nl, struct nq_cluster *c)
{
    char cont[1024] = "";
    struct nq_cluster n = {0, 0};
    int pages = 0, restarted = 0;

    if (now_ms() < nl->count_until_ms) {
        *c = nl->count;
        return;
    }
    c->gpu_nodes = 0;
    c->tainted = 0;
    do {
        if (count_page(nl, &n, cont, sizeof(cont)) != 0) {
            if (pages == 0 || restarted)
                return;
            /* The continue token expired: once more from the start. */
            restarted = 1;
            pages = 0;
            n.gpu_nodes = n.tainted = 0;
            cont[0] = '\0';
            continue;
        }
        pages++;
    } while (cont[0] != '\0' && pages < 10000);
    *c = n;
    nl->count = n;
    nl->count_until_ms =
        now_ms() + NL_COUNT_KEEP_MS * 4 / 5 +
        (int64_t)(random() % (NL_COUNT_KEEP_MS * 2 / 5 + 1));
}

/* --- applying decisions ------------------------------------------------- */

static void
apply(struct nl *nl, const struct nq_actions *a)
{
    pthread_mutex_lock(&nl->mu);
    if (a->taint > 0)
        nl->taints_applied++;
    if (a->taint < 0)
        nl->taints_lifted++;
    if (a->withheld)
        nl->taints_withheld++;
    pthread_mutex_unlock(&nl->mu);
    if (a->changed || a->taint != 0)
        node_write(nl);
    node_event(nl, a);
    if (a->changed)
        logj("state",
             json_pack("{s:s,s:s,s:i}", "state", nq_kind_name(nl->st.kind),
                       "class", nc_class_name(nl->st.cls), "evidence",
                       nl->st.nev));
    metrics_publish(nl);
}

/* --- pods ---------------------------------------------------------------- */

static int
seen_add(struct nl *nl, const char *key)
{
    for (int i = 0; i < nl->nseen; i++)
        if (strcmp(nl->seen[i], key) == 0)
            return 1;
    snprintf(nl->seen[nl->seen_next], sizeof(nl->seen[0]), "%s", key);
    nl->seen_next = (nl->seen_next + 1) % NL_SEEN;
    if (nl->nseen < NL_SEEN)
        nl->nseen++;
    return 0;
}

static int
pod_gpus(struct nl *nl, json_t *spec)
{
    int total = 0, init_max = 0;
    json_t *c;
    size_t i;

    json_array_foreach(json_object_get(spec, "containers"), i, c)
    {
        json_t *r = json_object_get(c, "resources");
        json_t *q =
            json_object_get(json_object_get(r, "limits"), nl->o->gpu_resource);

        if (q == NULL)
            q = json_object_get(json_object_get(r, "requests"),
                                nl->o->gpu_resource);
        /* Saturated: a pod of many containers cannot overflow the sum
         * (nor gpus_in_use, over at most NL_MAX_PODS pods). */
        total += quantity_int(q);
        if (total > NL_GPUS_MAX)
            total = NL_GPUS_MAX;
    }
    json_array_foreach(json_object_get(spec, "initContainers"), i, c)
    {
        json_t *r = json_object_get(c, "resources");
        int g = quantity_int(
            json_object_get(json_object_get(r, "limits"), nl->o->gpu_resource));

        if (g > init_max)
            init_max = g;
    }
    return total > init_max ? total : init_max;
}

static void
cache_update(struct nl *nl, const char *uid, int gpus, int active, int gone)
{
    int i;

    for (i = 0; i < nl->npods; i++)
        if (strcmp(nl->pods[i].uid, uid) == 0)
            break;
    if (gone) {
        if (i < nl->npods)
            nl->pods[i] = nl->pods[--nl->npods];
        return;
    }
    if (i == nl->npods) {
        if (nl->npods == NL_MAX_PODS)
            return;
        nl->npods++;
        snprintf(nl->pods[i].uid, sizeof(nl->pods[i].uid), "%s", uid);
    }
    nl->pods[i].gpus = gpus;
    nl->pods[i].active = active;
    nl->pods[i].gen = nl->list_gen;
}

/* After a full list: a pod the list did not show is gone (deleted while
 * no watch was open, such as in the gap that ended in a 410), so the
 * cache becomes the list. */
static void
cache_prune(struct nl *nl)
{
    int i = 0;

    while (i < nl->npods) {
        if (nl->pods[i].gen != nl->list_gen)
            nl->pods[i] = nl->pods[--nl->npods];
        else
            i++;
    }
}

static int
gpus_in_use(const struct nl *nl)
{
    int n = 0;

    for (int i = 0; i < nl->npods; i++)
        if (nl->pods[i].active)
            n += nl->pods[i].gpus;
    return n;
}

struct podid {
    const char *ns, *name, *uid;
};

static const char *const verdict_reasons[] = {
    "NCCLRingCheckPassed", "NCCLRingCheckFallback", "NCCLRingCheckWarning",
    "NCCLRingCheckFailed", "NCCLRingCheckCannotRun", "NCCLHang",
    /* A lost GPU in a hang report is a hang report: NCCLGPULost is the
     * watchdog's own Node Event (validatingadmissionpolicy-events.yaml). */
    "NCCLHang"};

/* The node a pod of namespace ns named host runs on (a pod's hostname is
 * its name), into node; 0, or -1 when the API does not say. */
static int
pod_node(struct nl *nl, const char *ns, const char *host, char *node, size_t nn)
{
    char path[700], sel[120], *esc;
    json_t *list, *name;
    int rc = -1;

    snprintf(sel, sizeof(sel), "metadata.name=%.63s", host);
    esc = curl_easy_escape(NULL, sel, 0);
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods?fieldSelector=%s",
             ns, esc != NULL ? esc : "");
    curl_free(esc);
    if ((list = nl_get_json(nl, path)) == NULL)
        return -1;
    name = json_object_get(
        json_object_get(json_array_get(json_object_get(list, "items"), 0),
                        "spec"),
        "nodeName");
    if (json_is_string(name) && json_string_length(name) > 0 &&
        json_string_length(name) < nn) {
        memcpy(node, json_string_value(name), json_string_length(name) + 1);
        rc = 0;
    }
    json_decref(list);
    return rc;
}

/*
 * A pair verdict names the other node: an Event on that Node carries the
 * evidence to its node loop, which counts it only once its own evidence
 * agrees (nq_add_peer). The Event's name is made of the verdict's key and
 * the node, so a relist or a restart posts it once.
 */
static void
pair_report(struct nl *nl, const struct podid *p, const char *key,
            const char *text, int64_t at, const struct nc_result *r)
{
    char hosts[NC_PAIR_HOSTS][NC_HOST_MAX];
    int n = nc_pair_hosts(text, strlen(text), hosts, NC_PAIR_HOSTS);

    for (int i = 0; i < n; i++) {
        char peer[254], name[400], msg[1000], podref[320];
        json_t *evid, *related;
        char *evtext;

        if (strcmp(hosts[i], p->name) == 0 ||
            pod_node(nl, p->ns, hosts[i], peer, sizeof(peer)) != 0 ||
            strcmp(peer, nl->o->node) == 0)
            continue;
        snprintf(podref, sizeof(podref), "%s/%s", p->ns, p->name);
        snprintf(name, sizeof(name), "%.180s.ncclguard-pair.%.40s.%.60s", peer,
                 p->uid, strchr(key, '/') ? strchr(key, '/') + 1 : key);
        for (char *c = name; *c != '\0'; c++)
            if (*c == '/')
                *c = '.';
        snprintf(msg, sizeof(msg),
                 "the cross-node ring check of pod %.200s on %.100s fails "
                 "between %.100s and %.100s (pod %.63s here); it counts "
                 "against this node once its own checks agree: %.250s",
                 podref, nl->o->node, nl->o->node, peer, hosts[i], r->summary);
        evid = json_pack("{s:s,s:s,s:s,s:s,s:I}", "key", key, "pod", podref,
                         "node", nl->o->node, "reason", r->reason, "at",
                         (json_int_t)at);
        evtext = evid != NULL ? json_dumps(evid, JSON_COMPACT) : NULL;
        json_decref(evid);
        if (evtext == NULL)
            continue;
        related = json_pack("{s:s,s:s,s:s,s:s,s:s}", "apiVersion", "v1", "kind",
                            "Pod", "namespace", p->ns, "name", p->name, "uid",
                            p->uid);
        /* uid: the peer's name, as for this node's own Events. */
        post_event(nl, NG_NODE_EVENT_NS, name, "Node", peer, NULL, peer, 1,
                   NG_EVENT_PAIR, msg, related,
                   json_pack("{s:s}", NG_EVIDENCE_ANN, evtext));
        free(evtext);
        pthread_mutex_lock(&nl->mu);
        nl->pair_sent++;
        pthread_mutex_unlock(&nl->mu);
        logj("pair-sent", json_pack("{s:s,s:s,s:s}", "peer", peer, "pod",
                                    podref, "key", key));
    }
}

/* One evidence annotation of a Node Event, bounded and every field
 * checked; 0 and *ev filled, or -1. */
static int
evidence_decode(const char *text, struct nq_evidence *ev, char *gpus, size_t gn)
{
    json_t *o, *v;
    int rc = -1;

    if (text == NULL || strlen(text) > 2048)
        return -1;
    o = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    memset(ev, 0, sizeof(*ev));
#define STR(k, dst)                                                            \
    ((v = json_object_get(o, k)) != NULL && json_is_string(v) &&               \
     json_string_length(v) > 0 && json_string_length(v) < sizeof(dst) &&       \
     memcpy(dst, json_string_value(v), json_string_length(v) + 1) != NULL)
    if (json_is_object(o) && STR("key", ev->key) && STR("pod", ev->pod) &&
        STR("node", ev->peer) && STR("reason", ev->reason) &&
        json_is_integer(v = json_object_get(o, "at")) &&
        json_integer_value(v) > 0) {
        ev->at_ms = (int64_t)json_integer_value(v);
        v = json_object_get(o, "gpus");
        snprintf(gpus, gn, "%.40s",
                 json_is_string(v) ? json_string_value(v) : "?");
        rc = 0;
    }
#undef STR
    json_decref(o);
    return rc;
}

/*
 * Reads the ncclguard Events on this Node: pair verdicts that another
 * node's pod reported against it, and the watchdog's lost GPUs. Events
 * about one Node by field selector (the fields an Event can be selected
 * by: AddFieldLabelConversionsForEvent in kubernetes
 * pkg/apis/core/v1/conversion.go).
 */
/* One evidence Event about this Node: counted, and acted on. */
static void
evidence_event(struct nl *nl, json_t *item)
{
    const char *reason = json_string_value(json_object_get(item, "reason"));
    const char *about = json_string_value(
        json_object_get(json_object_get(item, "involvedObject"), "name"));
    const char *text = json_string_value(json_object_get(
        json_object_get(json_object_get(item, "metadata"), "annotations"),
        NG_EVIDENCE_ANN));
    const char *reporter;
    struct nq_evidence ev;
    struct nq_cluster c = {0, 0};
    struct nq_actions a;
    char gpus[48];
    int lost;

    if (reason == NULL || about == NULL || strcmp(about, nl->o->node) != 0)
        return;
    lost = strcmp(reason, NG_EVENT_GPU_LOST) == 0;
    if (!lost && strcmp(reason, NG_EVENT_PAIR) != 0)
        return;
    if (evidence_decode(text, &ev, gpus, sizeof(gpus)) != 0)
        return;
    /* The poster's node as the admission policy checked it against
     * the poster's token (validatingadmissionpolicy-events.yaml) must
     * be the node the evidence names. */
    reporter =
        json_string_value(json_object_get(item, "reportingInstance"));
    if (reporter == NULL || strcmp(reporter, ev.peer) != 0)
        return;
    if (lost) {
        struct nc_result r;

        /* The watchdog of this node saw it: own evidence. */
        if (strcmp(ev.peer, nl->o->node) != 0)
            return;
        ev.peer[0] = '\0';
        nc_classify_lost_gpu(gpus, &r);
        ev.cls = r.cls;
        if (!seen_add(nl, ev.key)) {
            pthread_mutex_lock(&nl->mu);
            nl->verdicts[r.verdict][r.cls]++;
            pthread_mutex_unlock(&nl->mu);
        }
    } else {
        if (strcmp(ev.peer, nl->o->node) == 0)
            return;
        ev.cls = NC_CLASS_PAIR;
    }
    if (nl->o->pol.mode == NQ_QUARANTINE)
        cluster_count(nl, &c);
    if (lost)
        nq_add(&nl->st, &nl->o->pol, &ev, now_ms(), &c, &a);
    else
        nq_add_peer(&nl->st, &nl->o->pol, &ev, now_ms(), &c, &a);
    if (!a.counted)
        return;
    pthread_mutex_lock(&nl->mu);
    if (lost)
        nl->gpu_lost_counted++;
    else
        nl->pair_counted++;
    pthread_mutex_unlock(&nl->mu);
    logj(lost ? "gpu-lost-counted" : "pair-counted",
         json_pack("{s:s,s:s,s:s}", "key", ev.key, "pod", ev.pod, "from",
                   lost ? nl->o->node : ev.peer));
    apply(nl, &a);
}

static void
node_events_poll(struct nl *nl)
{
    static const char *const reasons[] = {NG_EVENT_GPU_LOST, NG_EVENT_PAIR};

    nl->last_poll_ms = now_ms();
    /* One list per reason (a field selector has no "or"), page by page:
     * Events list in name order, and a busy node's other Events would
     * otherwise push ncclguard's past a single page. */
    for (size_t r = 0; r < sizeof(reasons) / sizeof(reasons[0]); r++) {
        char path[1600], sel[400], cont[1024] = "", *esc, *cesc;
        int pages = 0;

        snprintf(sel, sizeof(sel),
                 "involvedObject.kind=Node,involvedObject.name=%s,reason=%s",
                 nl->o->node, reasons[r]);
        esc = curl_easy_escape(NULL, sel, 0);
        do {
            json_t *list, *item;
            const char *next;
            size_t i;

            cesc = cont[0] != '\0' ? curl_easy_escape(NULL, cont, 0) : NULL;
            snprintf(path, sizeof(path),
                     "/api/v1/namespaces/" NG_NODE_EVENT_NS
                     "/events?fieldSelector=%s&limit=500%s%s",
                     esc != NULL ? esc : "", cesc != NULL ? "&continue=" : "",
                     cesc != NULL ? cesc : "");
            curl_free(cesc);
            if ((list = nl_get_json(nl, path)) == NULL)
                break;
            json_array_foreach(json_object_get(list, "items"), i, item)
                evidence_event(nl, item);
            next = json_string_value(json_object_get(
                json_object_get(list, "metadata"), "continue"));
            snprintf(cont, sizeof(cont), "%s", next != NULL ? next : "");
            json_decref(list);
        } while (cont[0] != '\0' && ++pages < 100);
        curl_free(esc);
    }
}

/* One terminated container: classify, show, count. */
static void
terminated(struct nl *nl, const struct podid *p, const char *container,
           long restart, json_t *term, int ringcheck)
{
    char key[96], ev_name[400], podref[160], msg[700];
    const char *text = json_string_value(json_object_get(term, "message"));
    int exit_code = (int)json_integer_value(json_object_get(term, "exitCode"));
    int64_t at =
        parse_time(json_string_value(json_object_get(term, "finishedAt")));
    struct nc_result r;

    snprintf(key, sizeof(key), "%.40s/%.40s/%ld", p->uid, container, restart);
    if (ringcheck)
        nc_classify_ringcheck(exit_code, text, text ? strlen(text) : 0, &r);
    else if (text == NULL ||
             nc_classify_hang_report(text, strlen(text), &r) != 0)
        return;
    if (seen_add(nl, key))
        return;
    pthread_mutex_lock(&nl->mu);
    nl->verdicts[r.verdict][r.cls]++;
    pthread_mutex_unlock(&nl->mu);
    snprintf(podref, sizeof(podref), "%s/%s", p->ns, p->name);
    logj("verdict",
         json_pack("{s:s,s:s,s:I,s:s,s:s,s:s,s:i,s:s}", "pod", podref,
                   "container", container, "restart", (json_int_t)restart,
                   "verdict", nc_verdict_name(r.verdict), "class",
                   nc_class_name(r.cls), "reason", r.reason, "exit", exit_code,
                   "summary", r.summary));
    /* A name made of the verdict's key: posting it again after a relist
     * or an agent restart answers 409, so each verdict is one Event. */
    snprintf(ev_name, sizeof(ev_name), "%.200s.ncclguard.%.40s.%.40s.%ld",
             p->name, p->uid, container, restart);
    snprintf(msg, sizeof(msg), "%s", r.summary);
    post_event(nl, p->ns, ev_name, "Pod", p->name, p->ns, p->uid,
               r.verdict != NC_VERDICT_PASS, verdict_reasons[r.verdict], msg,
               NULL, NULL);
    if (ringcheck && r.phase == 7 && r.verdict != NC_VERDICT_PASS) {
        /* This node's own view of a failed cross-node ring: what a pair
         * verdict from another node needs before it counts here. */
        int64_t when = at > 0 ? at : now_ms();

        if (when > nl->st.cross_ms) {
            struct nq_actions a;

            memset(&a, 0, sizeof(a));
            nl->st.cross_ms = when;
            a.changed = 1;
            apply(nl, &a);
        }
    }
    if (r.cls == NC_CLASS_PAIR && text != NULL)
        pair_report(nl, p, key, text, at > 0 ? at : now_ms(), &r);
    if (nq_counts(r.cls)) {
        struct nq_evidence ev;
        struct nq_cluster c = {0, 0};
        struct nq_actions a;

        memset(&ev, 0, sizeof(ev));
        snprintf(ev.key, sizeof(ev.key), "%s", key);
        snprintf(ev.pod, sizeof(ev.pod), "%s", podref);
        ev.cls = r.cls;
        snprintf(ev.reason, sizeof(ev.reason), "%s", r.reason);
        ev.at_ms = at > 0 ? at : now_ms();
        if (nl->o->pol.mode == NQ_QUARANTINE)
            cluster_count(nl, &c);
        nq_add(&nl->st, &nl->o->pol, &ev, now_ms(), &c, &a);
        if (a.counted || a.changed)
            apply(nl, &a);
    }
    metrics_publish(nl);
}

static void
statuses(struct nl *nl, const struct podid *p, json_t *list, int ringcheck)
{
    json_t *cs;
    size_t i;

    json_array_foreach(list, i, cs)
    {
        const char *name = json_string_value(json_object_get(cs, "name"));
        long rc = (long)json_integer_value(json_object_get(cs, "restartCount"));
        json_t *t = json_object_get(json_object_get(cs, "state"), "terminated");
        json_t *lt =
            json_object_get(json_object_get(cs, "lastState"), "terminated");

        if (name == NULL)
            continue;
        if (ringcheck && strcmp(name, NL_RINGCHECK) != 0)
            continue;
        if (lt != NULL && rc > 0)
            terminated(nl, p, name, rc - 1, lt, ringcheck);
        if (t != NULL)
            terminated(nl, p, name, rc, t, ringcheck);
    }
}

static void
pod_delete(struct nl *nl, const char *ns, const char *name)
{
    char path[512], why[300];
    struct buf b = {0};

    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, name);
    if (kube_request(&nl->o->kc, "DELETE", path, NULL, NULL, &b, why,
                     sizeof(why)) /
            100 !=
        2)
        nl->api_errors++;
    buf_release(&b);
}

/* Our own validation pod changed. */
static void
validation_pod(struct nl *nl, const struct podid *p, json_t *status)
{
    const char *phase = json_string_value(json_object_get(status, "phase"));
    json_t *cs, *term = NULL;
    struct nc_result r;
    struct nq_actions a;
    size_t i;
    int passed, exit_code = -1;
    const char *text = NULL;

    json_array_foreach(json_object_get(status, "containerStatuses"), i, cs)
    {
        json_t *t = json_object_get(json_object_get(cs, "state"), "terminated");

        if (t != NULL)
            term = t;
    }
    if (strcmp(p->name, nl->st.validation) != 0) {
        /* A leftover from an earlier try: it decides nothing. */
        if (term != NULL ||
            (phase != NULL &&
             (strcmp(phase, "Failed") == 0 || strcmp(phase, "Succeeded") == 0)))
            pod_delete(nl, p->ns, p->name);
        return;
    }
    if (term == NULL && (phase == NULL || (strcmp(phase, "Failed") != 0 &&
                                           strcmp(phase, "Succeeded") != 0)))
        return;
    if (term != NULL) {
        exit_code = (int)json_integer_value(json_object_get(term, "exitCode"));
        text = json_string_value(json_object_get(term, "message"));
    }
    nc_classify_ringcheck(exit_code, text, text != NULL ? strlen(text) : 0, &r);
    passed = exit_code == 0 && r.verdict == NC_VERDICT_PASS;
    pthread_mutex_lock(&nl->mu);
    if (passed)
        nl->validations_pass++;
    else
        nl->validations_fail++;
    pthread_mutex_unlock(&nl->mu);
    logj("validation", json_pack("{s:s,s:b,s:s}", "pod", p->name, "passed",
                                 passed, "summary", r.summary));
    nq_validated(&nl->st, &nl->o->pol, passed, r.summary, now_ms(), &a);
    apply(nl, &a);
    pod_delete(nl, p->ns, p->name);
}

static void
pod_seen(struct nl *nl, json_t *pod, int gone)
{
    json_t *meta = json_object_get(pod, "metadata");
    json_t *status = json_object_get(pod, "status");
    const char *phase = json_string_value(json_object_get(status, "phase"));
    const char *vfor = json_string_value(
        json_object_get(json_object_get(meta, "labels"), NL_VALIDATION_LABEL));
    struct podid p = {json_string_value(json_object_get(meta, "namespace")),
                      json_string_value(json_object_get(meta, "name")),
                      json_string_value(json_object_get(meta, "uid"))};

    if (p.ns == NULL || p.name == NULL || p.uid == NULL)
        return;
    cache_update(nl, p.uid, pod_gpus(nl, json_object_get(pod, "spec")),
                 phase == NULL || (strcmp(phase, "Succeeded") != 0 &&
                                   strcmp(phase, "Failed") != 0),
                 gone);
    if (gone)
        return;
    if (vfor != NULL && strcmp(vfor, nl->o->node) == 0 &&
        strcmp(p.ns, nl->o->ns) == 0) {
        validation_pod(nl, &p, status);
        return;
    }
    statuses(nl, &p, json_object_get(status, "initContainerStatuses"), 1);
    statuses(nl, &p, json_object_get(status, "containerStatuses"), 0);
}

/* --- validation --------------------------------------------------------- */

static void
validation_start(struct nl *nl, int gpus)
{
    char name[160], path[512], why[300], g[16], tmo[16];
    struct buf b = {0};
    json_t *pod;
    char *body;
    long code;

    snprintf(name, sizeof(name), "ncclguard-validate-%.100s-%lld", nl->o->node,
             (long long)(now_ms() / 1000));
    snprintf(g, sizeof(g), "%d", gpus);
    snprintf(tmo, sizeof(tmo), "%d", nl->o->validation_timeout_s);
    /* Pinned by nodeName (no scheduler), tolerating our own taint; all the
     * node's GPUs; the webhook told to leave it alone (its own check is
     * the pod) by the annotation its registration's matchConditions
     * honour (ncclguard.io/inject: "false"): the apiserver never sends
     * it, so it gets none of the webhook's mutations. */
    pod = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:{s:s,s:s,s:s},s:{s:s}},"
        "s:{s:s,s:s,s:[{s:s,s:s,s:s}],s:[{s:s,s:s,s:[s,s,s,s,s,s],"
        "s:{s:{s:s}},s:s,s:{s:b,s:b,s:{s:[s]}}}]}}",
        "apiVersion", "v1", "kind", "Pod", "metadata", "name", name,
        "namespace", nl->o->ns, "labels", "app.kubernetes.io/name", "ncclguard",
        "app.kubernetes.io/component", "node-validation", NL_VALIDATION_LABEL,
        nl->o->node, "annotations", "ncclguard.io/inject", "false", "spec",
        "nodeName", nl->o->node, "restartPolicy", "Never", "tolerations", "key",
        NL_TAINT_KEY, "operator", "Exists", "effect", "NoSchedule",
        "containers", "name", "ringcheck", "image", nl->o->image, "args",
        "--expect-gpus", g, "--timeout", tmo, "--on-failure", "fail",
        "resources", "limits", nl->o->gpu_resource, g,
        "terminationMessagePolicy", "File", "securityContext",
        "allowPrivilegeEscalation", 0, "runAsNonRoot", 1, "capabilities",
        "drop", "ALL");
    body = json_dumps(pod, JSON_COMPACT);
    json_decref(pod);
    if (body == NULL)
        return;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", nl->o->ns);
    code = kube_request(&nl->o->kc, "POST", path, "application/json", body, &b,
                        why, sizeof(why));
    free(body);
    if (code != 201) {
        /* What the server said (a policy's message, RBAC's), cut to valid
         * UTF-8: json_pack refuses anything else. */
        if (code >= 0)
            text_format(why, sizeof(why), NULL, "%s", b.p != NULL ? b.p : "");
        buf_release(&b);
        nl->api_errors++;
        logj("api-error", json_pack("{s:s,s:I,s:s}", "path", path, "status",
                                    (json_int_t)code, "why", why));
        return;
    }
    buf_release(&b);
    snprintf(nl->st.validation, sizeof(nl->st.validation), "%s", name);
    logj("validation-start", json_pack("{s:s,s:i}", "pod", name, "gpus", gpus));
}

/* Whether the running validation pod (named ...-<unix seconds>) is older
 * than five times the check's own deadline, and at least 10 minutes. */
static int
validation_overdue(const struct nl *nl)
{
    const char *dash = strrchr(nl->st.validation, '-');
    int64_t limit = (int64_t)nl->o->validation_timeout_s * 5 * 1000;
    char *end;
    long long created;

    if (dash == NULL)
        return 1;
    errno = 0;
    created = strtoll(dash + 1, &end, 10);
    if (errno != 0 || *end != '\0' || created <= 0)
        return 1;
    if (limit < 600 * 1000)
        limit = 600 * 1000;
    return now_ms() - created * 1000 > limit;
}

/*
 * Who last wrote the Node's taints, from managedFields: the manager of the
 * newest entry (not a subresource) that owns spec.taints. A manager that
 * removes a taint owns the list it left behind (f:spec.f:taints), and the
 * loop's own entry goes when it owns no field any more, so after our taint
 * disappears this names whoever removed it: "kubectl-taint" (or another
 * kubectl verb) when a person lifted it, another controller's name when
 * that controller wrote the taints back from a copy older than ours.
 * Empty when managedFields do not say.
 */
static void
taint_writer(json_t *node, char *out, size_t n)
{
    json_t *mf = json_object_get(json_object_get(node, "metadata"),
                                 "managedFields"),
           *e;
    const char *best_time = NULL;
    size_t i;

    out[0] = '\0';
    json_array_foreach(mf, i, e)
    {
        const char *mgr = json_string_value(json_object_get(e, "manager"));
        const char *t = json_string_value(json_object_get(e, "time"));
        const char *sub =
            json_string_value(json_object_get(e, "subresource"));
        json_t *spec =
            json_object_get(json_object_get(e, "fieldsV1"), "f:spec");

        if (mgr == NULL || t == NULL || (sub != NULL && sub[0] != '\0') ||
            json_object_get(spec, "f:taints") == NULL)
            continue;
        /* RFC 3339 in UTC, one format: the string order is the time's. */
        if (best_time == NULL || strcmp(t, best_time) >= 0) {
            best_time = t;
            snprintf(out, n, "%s", mgr);
        }
    }
}

/* Our taint is gone while quarantined. A person lifts it with kubectl;
 * anything else that dropped it (a controller that rewrote the taints
 * from a stale copy) did not mean to, and the taint goes back, the
 * evidence kept. Returns 1 when it was put back. */
static int
taint_restore(struct nl *nl, const struct nodeview *v)
{
    char who[128], msg[400];
    struct nq_actions a;

    taint_writer(v->obj, who, sizeof(who));
    if (who[0] == '\0' || strncmp(who, "kubectl", 7) == 0 ||
        strcmp(who, nl->o->kc.field_manager != NULL
                        ? nl->o->kc.field_manager
                        : "ncclguard-node-loop") == 0)
        return 0;
    if (node_write(nl) != 0)
        return 0;
    snprintf(msg, sizeof(msg),
             "the %s taint was dropped by %.100s, not lifted by hand: put "
             "back, evidence kept (to lift it: kubectl taint nodes %.100s "
             "%s-)",
             NL_TAINT_KEY, who, nl->o->node, NL_TAINT_KEY);
    memset(&a, 0, sizeof(a));
    a.event_warning = 1;
    snprintf(a.event_reason, sizeof(a.event_reason), "NCCLTaintRestored");
    snprintf(a.event_msg, sizeof(a.event_msg), "%s", msg);
    node_event(nl, &a);
    logj("taint-restored", json_pack("{s:s}", "by", who));
    return 1;
}

static void
tick(struct nl *nl)
{
    struct nodeview v;
    struct nq_cluster c = {0, 0};
    struct nq_actions a;

    nl->last_tick_ms = now_ms();
    /* A changed policy file (or SIGHUP) first: the step below decides
     * with the settings now in force. */
    policy_reload(nl, nl_hup != 0);
    nl_hup = 0;
    /* Before the Node is read: what the Events add is written first, and
     * the taint the step sees is the one now on the Node. */
    if (nl->st.kind != NQ_QUARANTINED &&
        now_ms() - nl->last_poll_ms >= nl->o->event_poll_ms)
        node_events_poll(nl);
    if (node_get(nl, &v) != 0)
        return;
    /* Only a withheld taint, or a node left unhealthy when the policy
     * turns quarantine on, needs the count again (the evidence cannot
     * grow here); an agent per node listing the GPU nodes every tick would
     * load the API server for nothing. */
    if (nl->o->pol.mode == NQ_QUARANTINE &&
        (nl->st.kind == NQ_WITHHELD || nl->st.kind == NQ_UNHEALTHY))
        cluster_count(nl, &c);
    if (nl->st.kind == NQ_QUARANTINED && !v.tainted && taint_restore(nl, &v))
        v.tainted = 1;
    nq_tick(&nl->st, &nl->o->pol, now_ms(), v.tainted, &c, &a);
    if (nl->st.kind == NQ_QUARANTINED && nl->st.validation[0] != '\0' &&
        validation_overdue(nl)) {
        /* Deleted by someone, stuck Pending, or its node never ran it: a
         * failure, so the cooldown grows and a new one follows. */
        char name[160];

        snprintf(name, sizeof(name), "%s", nl->st.validation);
        nq_validated(&nl->st, &nl->o->pol, 0,
                     "the validation pod did not finish in time", now_ms(), &a);
        pthread_mutex_lock(&nl->mu);
        nl->validations_fail++;
        pthread_mutex_unlock(&nl->mu);
        pod_delete(nl, nl->o->ns, name);
    }
    if (a.start_validation) {
        int used = gpus_in_use(nl);

        if (v.gpus > 0 && used == 0) {
            validation_start(nl, v.gpus);
            if (nl->st.validation[0] != '\0')
                a.changed = 1;
        }
    }
    if (a.changed || a.taint != 0 || a.event_reason[0] != '\0')
        apply(nl, &a);
    else if (now_ms() - nl->last_cond_ms >= nl->o->heartbeat_ms)
        condition_write(nl, &v);
    nodeview_release(&v);
}

/* --- list and watch ----------------------------------------------------- */

static void
selector_path(struct nl *nl, char *buf, size_t n, const char *extra)
{
    char *esc;
    char sel[300];

    snprintf(sel, sizeof(sel), "spec.nodeName=%s", nl->o->node);
    esc = curl_easy_escape(NULL, sel, 0);
    snprintf(buf, n, "/api/v1/pods?fieldSelector=%s%s", esc ? esc : "", extra);
    curl_free(esc);
}

/* Lists the node's pods (in pages) and processes each one; sets nl->rv to
 * the list's resourceVersion, where the watch starts. */
static int
list_pods(struct nl *nl)
{
    char path[1200], extra[700], cont[512] = "";

    nl->list_gen++;
    for (;;) {
        json_t *list, *items, *pod, *meta;
        const char *rv, *next;
        size_t i;

        if (cont[0] != '\0') {
            char *esc = curl_easy_escape(NULL, cont, 0);
            snprintf(extra, sizeof(extra), "&limit=500&continue=%s",
                     esc ? esc : "");
            curl_free(esc);
        } else if (!nl->rv_gone)
            /* From the watch cache, not etcd: no scan of every pod of the
             * cluster at each start (limit is not honoured with
             * resourceVersion=0 on every release; the node's pods are
             * few). */
            snprintf(extra, sizeof(extra), "&limit=500&resourceVersion=0");
        else
            snprintf(extra, sizeof(extra), "&limit=500");
        selector_path(nl, path, sizeof(path), extra);
        if ((list = nl_get_json(nl, path)) == NULL)
            return -1;
        items = json_object_get(list, "items");
        json_array_foreach(items, i, pod) pod_seen(nl, pod, 0);
        meta = json_object_get(list, "metadata");
        rv = json_string_value(json_object_get(meta, "resourceVersion"));
        next = json_string_value(json_object_get(meta, "continue"));
        if (rv != NULL)
            snprintf(nl->rv, sizeof(nl->rv), "%s", rv);
        if (next != NULL && next[0] != '\0')
            snprintf(cont, sizeof(cont), "%s", next);
        else
            cont[0] = '\0';
        json_decref(list);
        if (cont[0] == '\0')
            break;
    }
    cache_prune(nl);
    nl->rv_gone = 0;
    logj("listed",
         json_pack("{s:s,s:i}", "resourceVersion", nl->rv, "pods", nl->npods));
    return 0;
}

static int
on_event(const char *line, size_t len, void *ud)
{
    struct nl *nl = ud;
    json_t *ev = json_loadb(line, len, 0, NULL);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    const char *rv = json_string_value(
        json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    int stop = 0;

    if (type == NULL) {
        json_decref(ev);
        return 0;
    }
    if (strcmp(type, "ERROR") == 0) {
        /* 410 Gone: our resourceVersion was compacted away; relist. Any
         * other error (an overloaded or restarting server): the caller
         * backs off before it watches again. */
        json_int_t code = json_integer_value(json_object_get(obj, "code"));

        if (code == 410) {
            nl->watch_gone++;
            nl->need_list = 1;
            nl->rv_gone = 1;
        } else
            nl->watch_error = code != 0 ? (long)code : 500;
        logj("watch-error", json_pack("{s:I}", "code", code));
        stop = 1;
    } else {
        pthread_mutex_lock(&nl->step_mu);
        if (strcmp(type, "BOOKMARK") != 0)
            pod_seen(nl, obj, strcmp(type, "DELETED") == 0);
        if (rv != NULL)
            snprintf(nl->rv, sizeof(nl->rv), "%s", rv);
        pthread_mutex_unlock(&nl->step_mu);
    }
    json_decref(ev);
    return stop;
}

/* Sleeps about ms (between half and one and a half times), so that the
 * node loops of many nodes that lost the API server together do not come
 * back in step. */
static void
nap(int64_t ms)
{
    static __thread unsigned seed;
    int64_t j;

    if (seed == 0)
        seed = (unsigned)now_ms() ^ (unsigned)getpid();
    j = ms / 2 + (int64_t)(rand_r(&seed) % (unsigned)(ms > 0 ? ms : 1));
    usleep((useconds_t)(j * 1000));
}

/* The periodic step, every tick_ms whatever the watch brings. */
static void *
ticker(void *arg)
{
    struct nl *nl = arg;

    for (;;) {
        int64_t due;

        pthread_mutex_lock(&nl->step_mu);
        due = nl->last_tick_ms + nl->o->tick_ms - now_ms();
        if (due <= 0)
            tick(nl);
        pthread_mutex_unlock(&nl->step_mu);
        due = due <= 0 ? nl->o->tick_ms : due;
        usleep((useconds_t)((due < 1000 ? due : 1000) * 1000));
    }
    return NULL;
}

static int
run(struct nl *nl)
{
    int64_t end = nl->o->run_ms > 0 ? now_ms() + nl->o->run_ms : 0;
    struct nodeview v;
    struct ng_error e;
    int64_t backoff = 200;

    /* The state lives on the Node: a restarted agent reads it back. */
    while (node_get(nl, &v) != 0) {
        if (end > 0 && now_ms() >= end)
            return 1;
        sleep(1);
    }
    if (v.state_ann != NULL &&
        nq_decode(v.state_ann, strlen(v.state_ann), &nl->st, &e) != 0)
        logj("bad-state", json_pack("{s:s}", "why", e.msg));
    logj("start",
         json_pack("{s:s,s:s,s:s,s:i}", "node", nl->o->node, "mode",
                   nl->o->pol.mode == NQ_QUARANTINE ? "quarantine" : "observe",
                   "state", nq_kind_name(nl->st.kind), "evidence", nl->st.nev));
    condition_write(nl, &v);
    nodeview_release(&v);
    metrics_publish(nl);
    nl->need_list = 1;
    /* The first list, and the first step after it, before the timer. */
    nl->last_tick_ms = now_ms();
    {
        pthread_t th;

        if (pthread_create(&th, NULL, ticker, nl) == 0)
            pthread_detach(th);
        else
            logj("no-ticker", json_pack("{s:s}", "why", strerror(errno)));
    }
    while (end == 0 || now_ms() < end) {
        char path[1200], extra[300], why[300];
        long code, budget;

        if (nl->need_list) {
            int rc;

            pthread_mutex_lock(&nl->step_mu);
            rc = list_pods(nl);
            if (rc == 0)
                tick(nl);
            pthread_mutex_unlock(&nl->step_mu);
            if (rc != 0) {
                nap(backoff);
                backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
                continue;
            }
            nl->need_list = 0;
        }
        nl->watch_error = 0;
        snprintf(extra, sizeof(extra),
                 "&watch=1&allowWatchBookmarks=true&resourceVersion=%s"
                 "&timeoutSeconds=%ld",
                 nl->rv, nl->o->watch_s);
        selector_path(nl, path, sizeof(path), extra);
        budget = nl->o->watch_s * 1000 + 5000;
        if (end > 0 && end - now_ms() < budget)
            budget = (long)(end - now_ms()) > 0 ? (long)(end - now_ms()) : 1;
        code = kube_watch(&nl->o->kc, path, budget, on_event, nl, why,
                          sizeof(why));
        if (code == 410) {
            nl->watch_gone++;
            nl->need_list = 1;
            nl->rv_gone = 1;
        } else if (code < 0 && !(end > 0 && now_ms() >= end)) {
            /* A dropped stream: resume from the last resourceVersion seen
             * (events or bookmarks); nothing is relisted. */
            nl->watch_dropped++;
            logj("watch-dropped",
                 json_pack("{s:s,s:s}", "why", why, "resourceVersion", nl->rv));
            nap(backoff);
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
        } else if (code != 200 && code > 0) {
            /* 429 (too many requests), 5xx, 403: the server is busy or
             * says no; a relist would only add load. Back off and watch
             * again from where the stream was. */
            logj("watch-refused", json_pack("{s:I,s:I}", "status",
                                            (json_int_t)code, "backoff_ms",
                                            (json_int_t)backoff));
            nap(backoff);
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
        } else if (nl->watch_error != 0) {
            nap(backoff);
            backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
        } else
            backoff = 200;
        metrics_publish(nl);
    }
    return 0;
}

/* --- options ------------------------------------------------------------ */

static void
usage(FILE *f)
{
    fprintf(f,
            "usage: ncclguard-watchdog node-loop [options]\n"
            "  --api-server URL       default from KUBERNETES_SERVICE_HOST\n"
            "  --token-file PATH      service-account token\n"
            "  --ca-file PATH         CA bundle for the API server\n"
            "  --node-name NAME       this node (env NODE_NAME)\n"
            "  --namespace NS         where validation pods go (env "
            "POD_NAMESPACE)\n"
            "  --image IMAGE          the ring-check image for validation\n"
            "  --gpu-resource NAME    default nvidia.com/gpu\n"
            "  --gpu-nodes SELECTOR   label selector of GPU nodes (breaker)\n"
            "  --policy FILE          the webhook's policy: its "
            "defaults.quarantine,\n"
            "                         read again when the file changes or on "
            "SIGHUP\n"
            "  --mode observe|quarantine   (each quarantine flag overrides "
            "the policy)\n"
            "  --threshold K          counted verdicts (from >= 2 pods)\n"
            "  --window D --cooldown D --cooldown-max D --expiry D (0 never)\n"
            "  --max-share PERCENT    breaker share of GPU nodes (10)\n"
            "  --watch-timeout D      server-side watch timeout (5m)\n"
            "  --tick D               periodic step at most this often (10s)\n"
            "  --heartbeat D          condition heartbeat (5m)\n"
            "  --event-poll D         read this Node's evidence Events (1m)\n"
            "  --validation-timeout S ring-check --timeout (120)\n"
            "  --metrics-port N       serve /metrics on 0.0.0.0:N (0 off)\n"
            "  --metrics-file PATH    also write the metrics there\n"
            "  --run-for D            stop after this long (tests)\n"
            "  --classify EXIT FILE   classify a termination message, print\n"
            "                         the result as JSON, exit\n");
}

static int
dur(const char *name, const char *v, int64_t *out, int zero_ok)
{
    struct ng_error e;
    int64_t ms;

    size_t len = strlen(v);

    if (zero_ok && strcmp(v, "0") == 0) {
        *out = 0;
        return 0;
    }
    /* Hours too: quarantine windows and expiries are long. */
    if (len > 1 && v[len - 1] == 'h') {
        char *end;
        long long h;

        errno = 0;
        h = strtoll(v, &end, 10);
        if (errno == 0 && end == v + len - 1 && h > 0 && h <= 24 * 365) {
            *out = h * 3600 * 1000;
            return 0;
        }
    }
    if (wd_duration_parse(v, strlen(v), &ms, &e) != 0 || ms <= 0) {
        fprintf(stderr, "ncclguard-watchdog node-loop: --%s: %s\n", name,
                ms <= 0 ? "must be positive" : e.msg);
        return -1;
    }
    *out = ms;
    return 0;
}

static int
classify_file(const char *exit_s, const char *path)
{
    char buf[8192];
    struct nc_result r;
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "r");
    size_t n;
    char *end;
    long ex = strtol(exit_s, &end, 10);
    json_t *o;
    char *text;

    if (*end != '\0' || f == NULL) {
        fprintf(stderr, "ncclguard-watchdog node-loop: --classify: bad exit "
                        "code or unreadable file\n");
        return 2;
    }
    n = fread(buf, 1, sizeof(buf), f);
    if (f != stdin)
        fclose(f);
    if (nc_classify_hang_report(buf, n, &r) != 0)
        nc_classify_ringcheck((int)ex, buf, n, &r);
    o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:s,s:s}", "verdict",
                  nc_verdict_name(r.verdict), "class", nc_class_name(r.cls),
                  "reason", r.reason, "code", r.code, "phase", r.phase, "cure",
                  r.cure, "summary", r.summary);
    if (r.cls == NC_CLASS_PAIR) {
        /* The pods on either side of the failing pairs: their nodes get
         * the pair Event. */
        char hosts[NC_PAIR_HOSTS][NC_HOST_MAX];
        int nh = nc_pair_hosts(buf, n, hosts, NC_PAIR_HOSTS);
        json_t *arr = json_array();

        for (int i = 0; i < nh; i++)
            json_array_append_new(arr, json_string(hosts[i]));
        json_object_set_new(o, "pair_hosts", arr);
    }
    text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(o);
    return 0;
}

static int
metrics_listen(struct nl_opts *o)
{
    struct sockaddr_in a;
    socklen_t al = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)o->metrics_port);
    if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 16) != 0) {
        close(s);
        return -1;
    }
    if (o->port_file != NULL &&
        getsockname(s, (struct sockaddr *)&a, &al) == 0) {
        FILE *f = fopen(o->port_file, "w");
        if (f != NULL) {
            fprintf(f, "%d\n", ntohs(a.sin_port));
            fclose(f);
        }
    }
    return s;
}

int
nodeloop_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"api-server", required_argument, NULL, 'A'},
        {"policy", required_argument, NULL, 'p'},
        {"token-file", required_argument, NULL, 'T'},
        {"ca-file", required_argument, NULL, 'C'},
        {"node-name", required_argument, NULL, 'N'},
        {"namespace", required_argument, NULL, 'n'},
        {"image", required_argument, NULL, 'i'},
        {"gpu-resource", required_argument, NULL, 'g'},
        {"gpu-nodes", required_argument, NULL, 'G'},
        {"mode", required_argument, NULL, 'm'},
        {"threshold", required_argument, NULL, 'k'},
        {"window", required_argument, NULL, 'w'},
        {"cooldown", required_argument, NULL, 'c'},
        {"cooldown-max", required_argument, NULL, 'x'},
        {"expiry", required_argument, NULL, 'e'},
        {"max-share", required_argument, NULL, 's'},
        {"watch-timeout", required_argument, NULL, 'W'},
        {"tick", required_argument, NULL, 't'},
        {"event-poll", required_argument, NULL, 'E'},
        {"heartbeat", required_argument, NULL, 'H'},
        {"validation-timeout", required_argument, NULL, 'V'},
        {"metrics-port", required_argument, NULL, 'P'},
        {"metrics-file", required_argument, NULL, 'M'},
        {"port-file", required_argument, NULL, 'f'},
        {"run-for", required_argument, NULL, 'R'},
        {"classify", required_argument, NULL, 'K'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    static struct nl nl;
    static struct nl_opts o;
    static char api[300];
    int64_t ms;
    int c, rc;

    memset(&o, 0, sizeof(o));
    nq_policy_defaults(&o.pol);
    nq_policy_defaults(&o.flag_pol);
    o.kc.timeout_ms = 10000;
    /* Named in the audit log and in managedFields (finding 10 of the
     * real-server review): the apiserver records fieldManager per write,
     * and falls back to the User-Agent's program name without one. */
    o.kc.user_agent = "ncclguard-node-loop/" NCCLGUARD_VERSION;
    o.kc.field_manager = "ncclguard-node-loop";
    o.node = getenv("NODE_NAME");
    o.ns = getenv("POD_NAMESPACE");
    o.image = "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0";
    o.gpu_resource = "nvidia.com/gpu";
    o.gpu_selector = "nvidia.com/gpu.present=true";
    o.watch_s = 300;
    o.tick_ms = 10000;
    o.event_poll_ms = 60000;
    o.heartbeat_ms = 300000;
    o.validation_timeout_s = 120;
    if (getenv("KUBERNETES_SERVICE_HOST") != NULL &&
        getenv("KUBERNETES_SERVICE_PORT") != NULL) {
        const char *h = getenv("KUBERNETES_SERVICE_HOST");

        snprintf(api, sizeof(api),
                 strchr(h, ':') ? "https://[%s]:%s" : "https://%s:%s", h,
                 getenv("KUBERNETES_SERVICE_PORT"));
        o.kc.api_server = api;
        o.kc.token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
        o.kc.ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    }
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end;
        double d;
        long v;

        switch (c) {
        case 'A':
            o.kc.api_server = optarg;
            break;
        case 'p':
            o.policy_path = optarg;
            break;
        case 'T':
            o.kc.token_file = optarg;
            break;
        case 'C':
            o.kc.ca_file = optarg;
            break;
        case 'N':
            o.node = optarg;
            break;
        case 'n':
            o.ns = optarg;
            break;
        case 'i':
            o.image = optarg;
            break;
        case 'g':
            o.gpu_resource = optarg;
            break;
        case 'G':
            o.gpu_selector = optarg;
            break;
        case 'm':
            o.flags_set |= NLF_MODE;
            if (strcmp(optarg, "observe") == 0)
                o.flag_pol.mode = NQ_OBSERVE;
            else if (strcmp(optarg, "quarantine") == 0)
                o.flag_pol.mode = NQ_QUARANTINE;
            else {
                fprintf(stderr, "ncclguard-watchdog node-loop: --mode: "
                                "expected observe or quarantine\n");
                return 2;
            }
            break;
        case 'k':
        case 'V':
        case 'P':
            errno = 0;
            v = strtol(optarg, &end, 10);
            if (errno != 0 || *end != '\0' || v < (c == 'P' ? 0 : 1) ||
                v > (c == 'P' ? 65535 : 3600)) {
                fprintf(stderr,
                        "ncclguard-watchdog node-loop: bad number \"%s\"\n",
                        optarg);
                return 2;
            }
            if (c == 'k') {
                o.flag_pol.threshold = (int)v;
                o.flags_set |= NLF_THRESHOLD;
            } else if (c == 'V')
                o.validation_timeout_s = (int)v;
            else
                o.metrics_port = (int)v;
            break;
        case 'w':
            if (dur("window", optarg, &o.flag_pol.window_ms, 0) != 0)
                return 2;
            o.flags_set |= NLF_WINDOW;
            break;
        case 'c':
            if (dur("cooldown", optarg, &o.flag_pol.cooldown_ms, 0) != 0)
                return 2;
            o.flags_set |= NLF_COOLDOWN;
            break;
        case 'x':
            if (dur("cooldown-max", optarg, &o.flag_pol.cooldown_max_ms, 0) !=
                0)
                return 2;
            o.flags_set |= NLF_COOLDOWN_MAX;
            break;
        case 'e':
            if (dur("expiry", optarg, &o.flag_pol.expiry_ms, 1) != 0)
                return 2;
            o.flags_set |= NLF_EXPIRY;
            break;
        case 's':
            d = strtod(optarg, &end);
            if (*end != '\0' || !(d >= 0 && d <= 100)) {
                fprintf(stderr, "ncclguard-watchdog node-loop: --max-share: "
                                "a percentage 0-100\n");
                return 2;
            }
            o.flag_pol.max_share_permille = (int)(d * 10 + 0.5);
            o.flags_set |= NLF_SHARE;
            break;
        case 'W':
            if (dur("watch-timeout", optarg, &ms, 0) != 0)
                return 2;
            o.watch_s = ms / 1000 > 0 ? (long)(ms / 1000) : 1;
            break;
        case 't':
            if (dur("tick", optarg, &o.tick_ms, 0) != 0)
                return 2;
            break;
        case 'E':
            if (dur("event-poll", optarg, &o.event_poll_ms, 0) != 0)
                return 2;
            break;
        case 'H':
            if (dur("heartbeat", optarg, &o.heartbeat_ms, 0) != 0)
                return 2;
            break;
        case 'M':
            o.metrics_file = optarg;
            break;
        case 'f':
            o.port_file = optarg;
            break;
        case 'R':
            if (dur("run-for", optarg, &o.run_ms, 0) != 0)
                return 2;
            break;
        case 'K':
            if (optind >= argc) {
                fprintf(stderr, "ncclguard-watchdog node-loop: --classify "
                                "EXIT FILE\n");
                return 2;
            }
            return classify_file(optarg, argv[optind]);
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (o.node == NULL || o.node[0] == '\0' || o.kc.api_server == NULL ||
        o.ns == NULL || o.ns[0] == '\0') {
        fprintf(stderr, "ncclguard-watchdog node-loop: needs --node-name, "
                        "--namespace and an API server\n");
        return 1;
    }
    policy_apply(&o, NULL);
    memset(&nl, 0, sizeof(nl));
    nl.o = &o;
    nq_node_init(&nl.st);
    pthread_mutex_init(&nl.mu, NULL);
    pthread_mutex_init(&nl.step_mu, NULL);
    /* As the webhook: no start without a policy that loads. */
    if (policy_reload(&nl, 1) != 0) {
        fprintf(stderr,
                "ncclguard-watchdog node-loop: the policy %s does "
                "not load (above)\n",
                o.policy_path);
        return 1;
    }
    {
        struct sigaction sa;

        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_hup;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGHUP, &sa, NULL);
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return 1;
    if (o.metrics_port > 0 || o.port_file != NULL) {
        pthread_t th;
        int s = metrics_listen(&o);

        if (s < 0) {
            fprintf(stderr, "ncclguard-watchdog node-loop: cannot listen on "
                            "the metrics port\n");
            curl_global_cleanup();
            return 1;
        }
        o.metrics_fd = s;
        if (pthread_create(&th, NULL, metrics_serve, &nl) == 0)
            pthread_detach(th);
    }
    rc = run(&nl);
    curl_global_cleanup();
    return rc;
}
