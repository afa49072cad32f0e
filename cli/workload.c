/* Finds the pod templates inside Kubernetes objects and mutates each one
 * exactly as the server would mutate that pod. */
#include "cli/workload.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/patch.h"

/* Bounds on one object: how deep to look and how many pods to mutate. */
#define WORKLOAD_MAX_DEPTH 48
#define WORKLOAD_MAX_PODS 1000
#define POINTER_MAX WORKLOAD_POINTER_MAX

struct walker {
    const char *ns;
    bool ns_fixed; /* the caller's namespace: nested objects cannot change it */
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

/* Mutates one pod: node is a Pod or a template ({metadata, spec}), or,
 * when bare, a PodSpec on its own (its pod metadata is then out of reach
 * and the annotations the server would add are dropped). */
static int
pod_mutate(struct walker *w, json_t *node, const char *pointer, bool bare)
{
    struct workload_pod *wp;
    json_t *pod = node, *target;
    struct ng_error err;

    if (w->rep->n_pods == WORKLOAD_MAX_PODS)
        return 0;
    if (w->rep->n_pods == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 4;
        struct workload_pod *p = realloc(w->rep->pods, cap * sizeof(*p));

        if (p == NULL)
            return -1;
        w->rep->pods = p;
        w->cap = cap;
    }
    wp = &w->rep->pods[w->rep->n_pods];
    memset(wp, 0, sizeof(*wp));
    snprintf(wp->pointer, sizeof(wp->pointer), "%s", pointer);
    if (bare) {
        pod = json_pack("{s:O}", "spec", node);
        if (pod == NULL)
            return -1;
    }
    if (mutate_pod(pod, w->ns, w->pol, w->opt, &wp->result) != 0) {
        if (bare)
            json_decref(pod);
        return -1;
    }
    w->rep->n_pods++;
    if (wp->result.status == MUTATE_PATCHED) {
        /* mutate_pod() checked this patch on a copy, so it applies here;
         * the root itself is never replaced. */
        target = pod;
        if (patch_apply(&target, wp->result.patch, &err) != 0 ||
            target != pod) {
            json_array_clear(wp->result.patch);
            wp->result.status = MUTATE_ERROR;
            snprintf(wp->result.reason, sizeof(wp->result.reason),
                     "patch does not apply");
        }
    }
    if (bare)
        json_decref(pod);
    return 0;
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
    if (w->rep->n_pods == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 4;
        struct workload_pod *p = realloc(w->rep->pods, cap * sizeof(*p));

        if (p == NULL) {
            json_decref(pod);
            return -1;
        }
        w->rep->pods = p;
        w->cap = cap;
    }
    wp = &w->rep->pods[w->rep->n_pods];
    memset(wp, 0, sizeof(*wp));
    snprintf(wp->pointer, sizeof(wp->pointer), "%s", pointer);
    if (mutate_pod(pod, w->ns, w->pol, w->opt, &wp->result) != 0) {
        json_decref(pod);
        return -1;
    }
    wp->derived = pod;
    wp->controller = controller;
    w->rep->n_pods++;
    return 0;
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
workload_mutate(json_t *obj, const char *pod_ns, const struct policy *pol,
                const struct mutate_options *opt, struct workload_report *rep)
{
    struct walker w = {.pol = pol, .opt = opt, .rep = rep};
    char pointer[POINTER_MAX] = "";
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    int rc;

    memset(rep, 0, sizeof(*rep));
    w.ns = pod_ns;
    w.ns_fixed = pod_ns != NULL;
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
