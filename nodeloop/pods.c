/* The node loop's pods and verdicts: the pod cache, ring-check
 * statuses turned into verdicts, evidence Events, and validation pods. */
#include "nodeloop/loop.h"

#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "contract/nodeevent.h"
#include "nodeloop/kube.h"
#include "nodeloop/nodeclass.h"
#include "nodeloop/nodestate.h"

#define NL_RINGCHECK "ncclguard-ringcheck"
#define NL_VALIDATION_LABEL "ncclguard.io/validation-for"

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
void
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

int
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
    reporter = json_string_value(json_object_get(item, "reportingInstance"));
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

void
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
            next = json_string_value(
                json_object_get(json_object_get(list, "metadata"), "continue"));
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

void
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

void
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

void
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
int
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
