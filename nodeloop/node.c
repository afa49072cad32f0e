/* The node loop's Kubernetes writes: the Node read and patched
 * (condition, state annotation, taint), Events, the breaker's count of GPU
 * Nodes, and a taint put back after another writer dropped it. */
#include "nodeloop/loop.h"

#include <curl/curl.h>
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

#define NL_STATE_ANN "ncclguard.io/nccl-state"
#define NL_COND "NCCLHealthy"
/* The breaker's count: Nodes per list page, and how long a count holds. */
#define NL_COUNT_PAGE 100
#define NL_COUNT_KEEP_MS 30000

/* --- Node reads and writes ---------------------------------------------- */

void
nodeview_release(struct nodeview *v)
{
    json_decref(v->obj);
    memset(v, 0, sizeof(*v));
}

int
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
json_t *
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

int
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
int
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
void
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
             esc != NULL ? esc : "", NL_COUNT_PAGE,
             cesc != NULL ? "&continue=" : "", cesc != NULL ? cesc : "");
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
void
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
    nl->count_until_ms = now_ms() + NL_COUNT_KEEP_MS * 4 / 5 +
                         (int64_t)(random() % (NL_COUNT_KEEP_MS * 2 / 5 + 1));
}

/* --- applying decisions ------------------------------------------------- */

void
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

/* --- the taint put back ------------------------------------------------- */

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
        const char *sub = json_string_value(json_object_get(e, "subresource"));
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
int
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
