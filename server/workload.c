/* Finds the pod templates inside Kubernetes objects and mutates each one
 * exactly as the server would mutate that pod. */
#include "workload.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "patch.h"

/* Bounds on one object: how deep to look and how many pods to mutate. */
#define WORKLOAD_MAX_DEPTH 48
#define WORKLOAD_MAX_PODS 1000
#define POINTER_MAX sizeof(((struct workload_pod *)0)->pointer)

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
    for (size_t i = 0; i < rep->n_pods; i++)
        mutate_result_release(&rep->pods[i].result);
    free(rep->pods);
    rep->pods = NULL;
    rep->n_pods = 0;
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

int
workload_mutate(json_t *obj, const char *namespace, const struct policy *pol,
                const struct mutate_options *opt, struct workload_report *rep)
{
    struct walker w = {.pol = pol, .opt = opt, .rep = rep};
    char pointer[POINTER_MAX] = "";
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    int rc;

    memset(rep, 0, sizeof(*rep));
    w.ns = namespace;
    w.ns_fixed = namespace != NULL;
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
    }
    if (rc != 0)
        workload_report_release(rep);
    return rc;
}
