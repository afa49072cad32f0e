/* Finds the pod templates inside Kubernetes objects and mutates each one
 * exactly as the server would mutate that pod. */
#include "workload.h"

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

static int
walk(struct walker *w, json_t *node, char *pointer, size_t len, int depth)
{
    if (depth > WORKLOAD_MAX_DEPTH)
        return 0;
    if (json_is_object(node)) {
        const char *key;
        json_t *v;

        if (has_containers(json_object_get(node, "spec")))
            return pod_mutate(w, node, pointer, false);
        if (depth > 0 && json_is_array(json_object_get(node, "containers")))
            return pod_mutate(w, node, pointer, true);
        json_object_foreach(node, key, v)
        {
            char esc[256];
            int n;

            if (!json_is_object(v) && !json_is_array(v))
                continue;
            if (strcmp(key, "status") == 0 ||
                patch_pointer_escape(key, esc, sizeof(esc)) != 0)
                continue;
            n = snprintf(pointer + len, POINTER_MAX - len, "/%s", esc);
            if (n < 0 || len + (size_t)n >= POINTER_MAX) {
                pointer[len] = '\0';
                continue;
            }
            if (walk(w, v, pointer, len + (size_t)n, depth + 1) != 0)
                return -1;
            pointer[len] = '\0';
        }
        return 0;
    }
    if (json_is_array(node)) {
        size_t i;
        json_t *v;

        json_array_foreach(node, i, v)
        {
            int n;

            if (!json_is_object(v) && !json_is_array(v))
                continue;
            n = snprintf(pointer + len, POINTER_MAX - len, "/%zu", i);
            if (n < 0 || len + (size_t)n >= POINTER_MAX) {
                pointer[len] = '\0';
                continue;
            }
            if (walk(w, v, pointer, len + (size_t)n, depth + 1) != 0)
                return -1;
            pointer[len] = '\0';
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
