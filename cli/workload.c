/* Finds the pod templates inside Kubernetes objects and mutates each one
 * exactly as the server would mutate that pod: through the admission core's
 * entry point, with the AdmissionReview the apiserver would send. */
#include "cli/workload.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/jsonmem.h"
#include "admission/patch.h"
#include "admission/review.h"

/* Bounds on one object: how deep to look and how many pods to mutate. */
#define WORKLOAD_MAX_DEPTH 48
#define WORKLOAD_MAX_PODS 1000
#define POINTER_MAX WORKLOAD_POINTER_MAX

struct walker {
    const char *ns;
    bool ns_fixed; /* the caller's namespace: nested objects cannot change it */
    const json_t *obj; /* the whole object, for its name */
    size_t document;   /* its number in the stream, for the reviews' uids */
    const struct policy *pol;
    const struct mutate_options *opt;
    struct workload_report *rep;
    size_t cap;
};

void
workload_report_release(struct workload_report *rep)
{
    if (rep == NULL)
        return;
    for (size_t i = 0; i < rep->n_pods; i++) {
        mutate_result_release(&rep->pods[i].result);
        json_decref(rep->pods[i].review);
        json_decref(rep->pods[i].derived);
    }
    free(rep->pods);
    free(rep->gpu_paths);
    memset(rep, 0, sizeof(*rep));
}

static bool
has_containers(const json_t *spec)
{
    return json_is_object(spec) &&
           json_is_array(json_object_get(spec, "containers"));
}

const char *
workload_object_name(const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const char *n = json_string_value(json_object_get(meta, "name"));

    if (n == NULL || n[0] == '\0')
        n = json_string_value(json_object_get(meta, "generateName"));
    if (n == NULL && json_is_object(json_object_get(obj, "request"))) {
        const json_t *pm = json_object_get(
            json_object_get(json_object_get(obj, "request"), "object"),
            "metadata");

        n = json_string_value(json_object_get(pm, "name"));
        if (n == NULL || n[0] == '\0')
            n = json_string_value(json_object_get(pm, "generateName"));
    }
    return n != NULL ? n : "";
}

/* ---- the AdmissionReview, and the core --------------------------------- */

/* Sets key to a new string when obj lacks it. Returns 0, or -1 when out of
 * memory. */
static int
default_set(json_t *obj, const char *key, const char *value)
{
    if (json_object_get(obj, key) != NULL)
        return 0;
    return json_object_set_new(obj, key, json_string(value));
}

/*
 * The pod the apiserver would put in the review (consumed: pod, a new
 * copy). It gets apiVersion v1 and kind Pod, and the name and namespace
 * the apiserver fills in (EnsureObjectNamespaceMatchesRequestNamespace in
 * k8s.io/apiserver's create handler sets an empty namespace from the
 * request's) where it has none; a pod without a name is named after the
 * object and its index among the object's pods.
 */
static json_t *
review_new(const struct walker *w, json_t *pod, const char *ns)
{
    json_t *meta, *req;
    char uid[64], name[300];
    size_t serial = w->rep->n_pods;

    if (pod == NULL)
        return NULL;
    meta = json_object_get(pod, "metadata");
    if (!json_is_object(meta)) {
        meta = json_object();
        if (json_object_set_new(pod, "metadata", meta) != 0)
            goto fail;
    }
    if (json_string_value(json_object_get(meta, "name")) == NULL) {
        const char *base = workload_object_name(w->obj);
        json_t *v;

        snprintf(name, sizeof(name), "%.200s-%zu", base[0] ? base : "pod",
                 serial);
        v = json_string(name);
        if (v == NULL) { /* the cut split a UTF-8 sequence */
            snprintf(name, sizeof(name), "pod-%zu", serial);
            v = json_string(name);
        }
        if (json_object_set_new(meta, "name", v) != 0)
            goto fail;
    }
    if (default_set(meta, "namespace", ns) != 0 ||
        default_set(pod, "apiVersion", "v1") != 0 ||
        default_set(pod, "kind", "Pod") != 0)
        goto fail;
    snprintf(uid, sizeof(uid), "00000000-0000-4000-8000-%012zx",
             (w->document + 1) * 4096 + serial);
    req = json_pack(
        "{s:s, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, "
        "s:{s:s, s:s, s:s}, s:s?, s:s, s:s, s:{s:s}, s:o, s:n, s:b, "
        "s:{s:s, s:s}}",
        "uid", uid, "kind", "group", "", "version", "v1", "kind", "Pod",
        "resource", "group", "", "version", "v1", "resource", "pods",
        "requestKind", "group", "", "version", "v1", "kind", "Pod",
        "requestResource", "group", "", "version", "v1", "resource", "pods",
        "name", json_string_value(json_object_get(meta, "name")), "namespace",
        ns, "operation", "CREATE", "userInfo", "username", "ncclguard-mutate",
        "object", pod, "oldObject", "dryRun", 0, "options", "apiVersion",
        "meta.k8s.io/v1", "kind", "CreateOptions");
    if (req == NULL)
        return NULL; /* "o" consumed pod */
    return json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1",
                     "kind", "AdmissionReview", "request", req);
fail:
    json_decref(pod);
    return NULL;
}

/* The namespace a pod is created in: the walker's (the caller's, the
 * object's), else the pod's own, else "default", as the apiserver does for
 * a request that names none. */
static const char *
pod_namespace(const struct walker *w, const json_t *pod)
{
    const char *own = json_string_value(
        json_object_get(json_object_get(pod, "metadata"), "namespace"));

    if (w->ns != NULL && w->ns[0] != '\0')
        return w->ns;
    if (own != NULL && own[0] != '\0')
        return own;
    return "default";
}

/* A result for a review the core did not plan (it cannot happen for the
 * reviews built here): an error with a reason, no patch. */
static int
result_refused(struct mutate_result *res, const struct review_outcome *out)
{
    memset(res, 0, sizeof(*res));
    res->status = MUTATE_ERROR;
    res->patch = json_array();
    res->warnings = json_array();
    res->audit = json_object();
    res->injected = json_array();
    snprintf(res->rule, sizeof(res->rule), "default");
    snprintf(res->reason, sizeof(res->reason),
             "the admission core answered %s: %.100s",
             review_result_name(out->result),
             out->http_status == 400 && out->body != NULL ? out->body : "");
    res->reason[strcspn(res->reason, "\n")] = '\0';
    if (res->patch == NULL || res->warnings == NULL || res->audit == NULL ||
        res->injected == NULL ||
        json_array_append_new(res->warnings, json_string(res->reason)) != 0) {
        mutate_result_release(res);
        return -1;
    }
    return 0;
}

/*
 * Hands wp->review to the core, as the server's transport does with a
 * request body, and keeps the plan and the patch text it answers. Returns
 * 0, or -1 when out of memory.
 */
static int
core_run(const struct walker *w, struct workload_pod *wp)
{
    struct review_outcome out;
    char *text = json_dumps(wp->review, JSON_COMPACT);
    int rc;

    if (text == NULL)
        return -1;
    rc = review_handle(text, strlen(text), w->pol, w->opt, &out);
    jsonmem_free(text);
    if (rc != 0)
        return -1;
    if (out.http_status != 200 || out.mutation.patch == NULL) {
        rc = result_refused(&wp->result, &out);
    } else {
        wp->result = out.mutation; /* wp owns these now */
        memset(&out.mutation, 0, sizeof(out.mutation));
    }
    review_outcome_release(&out);
    return rc;
}

/* The next free slot of the report, zeroed, or NULL when out of memory. */
static struct workload_pod *
slot_next(struct walker *w, const char *pointer)
{
    struct workload_pod *wp;

    if (w->rep->n_pods == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 4;
        struct workload_pod *p = realloc(w->rep->pods, cap * sizeof(*p));

        if (p == NULL)
            return NULL;
        w->rep->pods = p;
        w->cap = cap;
    }
    wp = &w->rep->pods[w->rep->n_pods];
    memset(wp, 0, sizeof(*wp));
    snprintf(wp->pointer, sizeof(wp->pointer), "%s", pointer);
    return wp;
}

/* Releases what slot_next()'s slot came to own, when it is not kept. */
static void
slot_drop(struct workload_pod *wp)
{
    mutate_result_release(&wp->result);
    json_decref(wp->review);
    memset(wp, 0, sizeof(*wp));
}

/*
 * Applies the core's patch to pod, the template it was planned for. The
 * review's pod always had metadata (its name), so the patch adds
 * annotations under /metadata; a template without metadata (or with null
 * there) gets an empty one for the time of the patch, and has its own
 * back when nothing went there.
 */
static void
patch_apply_here(json_t *pod, struct workload_pod *wp)
{
    struct ng_error err;
    json_t *target = pod, *old = json_object_get(pod, "metadata");
    bool made = false;
    int rc;

    if (!json_is_object(old)) {
        json_incref(old);
        made = true;
        if (json_object_set_new(pod, "metadata", json_object()) != 0) {
            json_decref(old);
            goto fail;
        }
    }
    /* The core checked this patch on the same pod, so it applies here;
     * the root itself is never replaced. */
    rc = patch_apply(&target, wp->result.patch, &err);
    if (made) {
        if (json_object_size(json_object_get(pod, "metadata")) == 0 &&
            (old != NULL ? json_object_set(pod, "metadata", old)
                         : json_object_del(pod, "metadata")) != 0)
            rc = -1;
        json_decref(old);
    }
    if (rc == 0 && target == pod)
        return;
fail:
    json_array_clear(wp->result.patch);
    free(wp->result.patch_text);
    wp->result.patch_text = NULL;
    wp->result.patch_len = wp->result.patch_ops = 0;
    wp->result.status = MUTATE_ERROR;
    snprintf(wp->result.reason, sizeof(wp->result.reason),
             "patch does not apply");
}

/* Mutates one pod: node is a Pod or a template ({metadata, spec}), or,
 * when bare, a PodSpec on its own (its pod metadata is then out of reach
 * and the annotations the server would add are dropped). whole: node is
 * the pod itself (a Pod object, an AdmissionReview's object), copied into
 * the review as it is; a template gives only its metadata and spec. */
static int
pod_mutate(struct walker *w, json_t *node, const char *pointer, bool bare)
{
    struct workload_pod *wp;
    json_t *pod = node, *copy;
    bool whole = pointer[0] == '\0' || strcmp(pointer, "/request/object") == 0;

    if (w->rep->n_pods == WORKLOAD_MAX_PODS)
        return 0;
    if (bare) {
        pod = json_pack("{s:{}, s:O}", "metadata", "spec", node);
        if (pod == NULL)
            return -1;
    }
    if ((wp = slot_next(w, pointer)) == NULL)
        goto fail;
    if (whole && !bare) {
        copy = json_deep_copy(pod);
    } else {
        json_t *meta = json_object_get(pod, "metadata");

        copy = json_pack("{s:s, s:s, s:o, s:o}", "apiVersion", "v1", "kind",
                         "Pod", "metadata",
                         json_is_object(meta) ? json_deep_copy(meta)
                                              : json_object(),
                         "spec", json_deep_copy(json_object_get(pod, "spec")));
    }
    wp->review = review_new(w, copy, pod_namespace(w, pod));
    if (wp->review == NULL || core_run(w, wp) != 0) {
        slot_drop(wp);
        goto fail;
    }
    w->rep->n_pods++;
    if (wp->result.status == MUTATE_PATCHED)
        patch_apply_here(pod, wp);
    if (bare)
        json_decref(pod);
    return 0;
fail:
    if (bare)
        json_decref(pod);
    return -1;
}

static int walk(struct walker *w, json_t *node, char *pointer, size_t len,
                int depth);

/* Walks into child (under key or index) with its pointer appended. */
static int
walk_child(struct walker *w, json_t *child, const char *token, char *pointer,
           size_t len, int depth)
{
    int n;

    if (!json_is_object(child) && !json_is_array(child))
        return 0;
    n = snprintf(pointer + len, POINTER_MAX - len, "/%s", token);
    if (n < 0 || len + (size_t)n >= POINTER_MAX) {
        pointer[len] = '\0';
        return 0; /* too deep to name: not a pod we can report */
    }
    n = walk(w, child, pointer, len + (size_t)n, depth + 1);
    pointer[len] = '\0';
    return n;
}

static int
walk_object(struct walker *w, json_t *node, char *pointer, size_t len,
            int depth)
{
    const char *key;
    json_t *v;

    if (has_containers(json_object_get(node, "spec")))
        return pod_mutate(w, node, pointer, false);
    if (depth > 0 && json_is_array(json_object_get(node, "containers")))
        return pod_mutate(w, node, pointer, true);
    json_object_foreach(node, key, v)
    {
        char esc[256];

        if (strcmp(key, "status") == 0 ||
            patch_pointer_escape(key, esc, sizeof(esc)) != 0)
            continue;
        if (walk_child(w, v, esc, pointer, len, depth) != 0)
            return -1;
    }
    return 0;
}

static int
walk(struct walker *w, json_t *node, char *pointer, size_t len, int depth)
{
    if (depth > WORKLOAD_MAX_DEPTH)
        return 0;
    if (json_is_object(node)) {
        const char *outer = w->ns;
        const char *own = json_string_value(
            json_object_get(json_object_get(node, "metadata"), "namespace"));
        int rc;

        /* An object inside another (a List's items) keeps its own
         * namespace for the pods it holds, unless the caller set one. */
        if (!w->ns_fixed && own != NULL && own[0] != '\0')
            w->ns = own;
        rc = walk_object(w, node, pointer, len, depth);
        w->ns = outer;
        return rc;
    }
    if (json_is_array(node)) {
        size_t i;
        json_t *v;

        json_array_foreach(node, i, v)
        {
            char idx[24];

            snprintf(idx, sizeof(idx), "%zu", i);
            if (walk_child(w, v, idx, pointer, len, depth) != 0)
                return -1;
        }
    }
    return 0;
}

/* ---- objects without pod templates --------------------------------- */

/*
 * Mutates pod, a pod this object's controller would create, for the report
 * only: it is kept in the report (consumed) and the object is not changed.
 */
static int
derived_mutate(struct walker *w, json_t *pod, const char *pointer,
               const char *controller)
{
    struct workload_pod *wp;

    if (pod == NULL)
        return -1;
    if ((wp = slot_next(w, pointer)) == NULL)
        goto fail;
    wp->review = review_new(w, json_deep_copy(pod), pod_namespace(w, pod));
    if (wp->review == NULL || core_run(w, wp) != 0) {
        slot_drop(wp);
        goto fail;
    }
    wp->derived = pod;
    wp->controller = controller;
    w->rep->n_pods++;
    return 0;
fail:
    json_decref(pod);
    return -1;
}

/* A pod with the object's name, namespace, labels and annotations and one
 * container, c (borrowed, copied) named name. */
static json_t *
derived_pod_new(const json_t *obj, const json_t *c, const char *name)
{
    const json_t *meta = json_object_get(obj, "metadata");
    json_t *m = json_object(), *ctr = json_deep_copy(c), *pod;
    static const char *const keep[] = {"name", "namespace", "labels",
                                       "annotations"};

    if (m == NULL || ctr == NULL)
        goto fail;
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++) {
        json_t *v = json_object_get(meta, keep[i]);

        if (v != NULL && json_object_set(m, keep[i], v) != 0)
            goto fail;
    }
    if (json_object_set_new(ctr, "name", json_string(name)) != 0)
        goto fail;
    pod = json_pack("{s:s, s:s, s:o, s:{s:[o]}}", "apiVersion", "v1", "kind",
                    "Pod", "metadata", m, "spec", "containers", ctr);
    return pod;
fail:
    json_decref(m);
    json_decref(ctr);
    return NULL;
}

/*
 * Objects that describe their pods' containers without a pod template:
 *  - KServe InferenceService: spec.predictor.model (or a framework key such
 *    as spec.predictor.pytorch) is the container KServe names
 *    "kserve-container" in the predictor's pods, which carry the
 *    InferenceService's labels and annotations.
 *  - Kubeflow Trainer TrainJob: spec.trainer.resourcesPerNode are the
 *    resources of the trainer container of each node's pod ("node"),
 *    image spec.trainer.image; the runtime's template gives the rest.
 * Each is mutated as a pod of its own for the report.
 */
static int
derived_pods(struct walker *w, json_t *obj)
{
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    json_t *spec = json_object_get(obj, "spec");

    if (kind == NULL || !json_is_object(spec))
        return 0;
    if (strcmp(kind, "InferenceService") == 0) {
        json_t *pred = json_object_get(spec, "predictor");
        const char *key;
        json_t *v;

        json_object_foreach(pred, key, v)
        {
            char ptr[POINTER_MAX], esc[128];

            if (!json_is_object(v) ||
                !json_is_object(json_object_get(v, "resources")) ||
                patch_pointer_escape(key, esc, sizeof(esc)) != 0)
                continue;
            snprintf(ptr, sizeof(ptr), "/spec/predictor/%s", esc);
            if (derived_mutate(w, derived_pod_new(obj, v, "kserve-container"),
                               ptr, "KServe") != 0)
                return -1;
            break; /* one model per predictor */
        }
    } else if (strcmp(kind, "TrainJob") == 0) {
        json_t *tr = json_object_get(spec, "trainer");
        json_t *res = json_object_get(tr, "resourcesPerNode");
        json_t *c;
        int rc;

        if (!json_is_object(res))
            return 0;
        c = json_pack("{s:O}", "resources", res);
        if (c == NULL)
            return -1;
        if (json_is_string(json_object_get(tr, "image")))
            json_object_set(c, "image", json_object_get(tr, "image"));
        rc = derived_mutate(w, derived_pod_new(obj, c, "node"),
                            "/spec/trainer/resourcesPerNode",
                            "Kubeflow Trainer");
        json_decref(c);
        return rc;
    }
    return 0;
}

/* Does key name a GPU? parent is the key of the mapping that holds it. */
static bool
gpu_key(const char *key, const char *parent)
{
    bool in_resources = parent != NULL && (strcmp(parent, "limits") == 0 ||
                                           strcmp(parent, "requests") == 0);
    bool gpu = strcasestr(key, "gpu") != NULL;

    return (gpu && (in_resources || strchr(key, '/') != NULL)) ||
           (in_resources && strncmp(key, "nvidia.com/", 11) == 0);
}

/* Records the pointer of every GPU request under node (bounded). */
static int
gpu_paths_find(struct workload_report *rep, json_t *node, char *pointer,
               size_t len, const char *parent, int depth)
{
    const char *key;
    json_t *v;

    if (depth > WORKLOAD_MAX_DEPTH)
        return 0;
    if (json_is_array(node)) {
        size_t i;

        json_array_foreach(node, i, v)
        {
            int n = snprintf(pointer + len, POINTER_MAX - len, "/%zu", i);

            if (n > 0 && len + (size_t)n < POINTER_MAX &&
                gpu_paths_find(rep, v, pointer, len + (size_t)n, NULL,
                               depth + 1) != 0)
                return -1;
            pointer[len] = '\0';
        }
        return 0;
    }
    json_object_foreach(node, key, v)
    {
        char esc[256];
        int n;

        if (strcmp(key, "status") == 0 ||
            patch_pointer_escape(key, esc, sizeof(esc)) != 0)
            continue;
        n = snprintf(pointer + len, POINTER_MAX - len, "/%s", esc);
        if (n < 0 || len + (size_t)n >= POINTER_MAX) {
            pointer[len] = '\0';
            continue;
        }
        if ((json_is_string(v) || json_is_integer(v)) && gpu_key(key, parent)) {
            if (rep->n_gpu_paths == WORKLOAD_MAX_GPU_PATHS) {
                rep->gpu_paths_truncated = true;
            } else {
                if (rep->gpu_paths == NULL) {
                    rep->gpu_paths =
                        calloc(WORKLOAD_MAX_GPU_PATHS, sizeof(*rep->gpu_paths));
                    if (rep->gpu_paths == NULL)
                        return -1;
                }
                snprintf(rep->gpu_paths[rep->n_gpu_paths++], POINTER_MAX, "%s",
                         pointer);
            }
        } else if ((json_is_object(v) || json_is_array(v)) &&
                   gpu_paths_find(rep, v, pointer, len + (size_t)n, key,
                                  depth + 1) != 0) {
            return -1;
        }
        pointer[len] = '\0';
    }
    return 0;
}

int
workload_mutate_document(json_t *obj, size_t document, const char *ns_given,
                         const struct policy *pol,
                         const struct mutate_options *opt,
                         struct workload_report *rep)
{
    struct walker w = {
        .pol = pol, .opt = opt, .rep = rep, .obj = obj, .document = document};
    char pointer[POINTER_MAX] = "";
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    int rc;

    memset(rep, 0, sizeof(*rep));
    w.ns = ns_given;
    w.ns_fixed = ns_given != NULL;
    if (kind != NULL && strcmp(kind, "AdmissionReview") == 0) {
        json_t *req = json_object_get(obj, "request");
        json_t *pod = json_object_get(req, "object");

        if (!json_is_object(pod))
            return 0;
        if (w.ns == NULL)
            w.ns = json_string_value(json_object_get(req, "namespace"));
        rc = pod_mutate(&w, pod, "/request/object", false);
    } else {
        if (w.ns == NULL)
            w.ns = json_string_value(
                json_object_get(json_object_get(obj, "metadata"), "namespace"));
        rc = walk(&w, obj, pointer, 0, 0);
        if (rc == 0 && rep->n_pods == 0)
            rc = derived_pods(&w, obj);
        if (rc == 0 && rep->n_pods == 0)
            rc = gpu_paths_find(rep, obj, pointer, 0, NULL, 0);
    }
    if (rc != 0)
        workload_report_release(rep);
    return rc;
}

int
workload_mutate(json_t *obj, const char *ns_given, const struct policy *pol,
                const struct mutate_options *opt, struct workload_report *rep)
{
    return workload_mutate_document(obj, 0, ns_given, pol, opt, rep);
}
