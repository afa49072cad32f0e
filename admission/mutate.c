/* The mutation of one pod: the view and the decision, then the plan_*
 * steps in order (admission/plan_*.h, one concern each), plan_emit()
 * writing the patch, and the check that it applies. */
#include "admission/mutate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admission/fastjson.h"
#include "admission/patch.h"
#include "admission/plan.h"
#include "admission/plan_emit.h"
#include "admission/plan_env.h"
#include "admission/plan_gpus.h"
#include "admission/plan_ipc.h"
#include "admission/plan_ringcheck.h"
#include "admission/plan_shm.h"
#include "admission/plan_watchdog.h"

const char *
mutate_status_name(enum mutate_status s)
{
    switch (s) {
    case MUTATE_PATCHED:
        return "patched";
    case MUTATE_UNCHANGED:
        return "unchanged";
    case MUTATE_SKIPPED:
        return "skipped";
    case MUTATE_NOT_GPU:
        return "not_gpu";
    case MUTATE_ERROR:
        return "error";
    }
    return "unknown";
}

void
mutate_result_release(struct mutate_result *res)
{
    if (res == NULL)
        return;
    free(res->patch_text);
    res->patch_text = NULL;
    res->patch_len = res->patch_ops = 0;
    json_decref(res->patch);
    json_decref(res->warnings);
    json_decref(res->audit);
    json_decref(res->injected);
    res->patch = res->warnings = res->audit = res->injected = NULL;
}

static bool
namespace_skipped(const char *ns, const struct mutate_options *opt)
{
    static const char *const system[] = {"kube-system", "kube-public",
                                         "kube-node-lease"};

    if (ns == NULL || ns[0] == '\0')
        return false;
    for (size_t i = 0; i < sizeof(system) / sizeof(system[0]); i++)
        if (strcmp(ns, system[i]) == 0)
            return true;
    return opt != NULL && opt->own_namespace != NULL &&
           opt->own_namespace[0] != '\0' && strcmp(ns, opt->own_namespace) == 0;
}

/* Checks that the patch applies to the pod (on a copy of what it touches):
 * the apiserver rejects a pod whose patch does not apply, whatever
 * failurePolicy says. */
static int
patch_verify(const json_t *pod, const struct patch_text *pt,
             struct mutate_result *res)
{
    struct ng_error err;

    if (pt->n_ops > PATCH_MAX_OPS) {
        snprintf(res->reason, sizeof(res->reason),
                 "patch would have %zu operations, more than %d", pt->n_ops,
                 PATCH_MAX_OPS);
        return -1;
    }
    ng_error_clear(&err);
    if (patch_text_check(pod, pt, &err) != 0) {
        snprintf(res->reason, sizeof(res->reason),
                 "patch does not apply: %.130s", err.msg);
        return -1;
    }
    return 0;
}

/*
 * Hands a patched pod's patch text to the result, and loads it as jansson
 * values unless the caller needs the text only. Returns 0, or -1 when out
 * of memory.
 */
static int
result_patch(struct plan *p, struct mutate_result *res)
{
    struct fastjson_error ferr;

    if (res->status == MUTATE_PATCHED) {
        res->patch_ops = p->pt.n_ops;
        res->patch_text = buf_take(&p->pt.text, &res->patch_len);
        if (res->patch_text == NULL)
            return -1;
    }
    if (p->opt != NULL && p->opt->patch_text_only)
        return 0;
    /* Loaded by the review's decoder: jansson's own loader drops bytes
     * when an allocation fails instead of failing (patch_text_check()). */
    res->patch =
        res->patch_text != NULL
            ? fastjson_decode(res->patch_text, res->patch_len, NULL, &ferr)
            : json_array();
    return res->patch != NULL ? 0 : -1;
}

/*
 * An object that says it is something else than a v1 Pod (kind
 * Deployment in a review sent as a Pod's) gets no Pod patch: the paths
 * would mean other things in it. A pod template has no kind and passes.
 * Returns whether the pod was turned down (skipped, with a warning).
 */
static bool
object_not_pod(struct plan *p)
{
    const json_t *kind = json_object_get(p->pod, "kind");
    const json_t *api = json_object_get(p->pod, "apiVersion");

    if ((kind == NULL || (json_is_string(kind) &&
                          strcmp(json_string_value(kind), "Pod") == 0)) &&
        (api == NULL ||
         (json_is_string(api) && strcmp(json_string_value(api), "v1") == 0)))
        return false;
    p->res->status = MUTATE_SKIPPED;
    snprintf(p->res->reason, sizeof(p->res->reason),
             "object is %.40s %.40s, not a v1 Pod",
             json_is_string(api) ? json_string_value(api) : "(no apiVersion)",
             json_is_string(kind) ? json_string_value(kind) : "(no kind)");
    plan_warn(p->res, "%s; left unchanged", p->res->reason);
    return true;
}

int
mutate_pod(const json_t *pod, const char *ns, const struct policy *pol,
           const struct mutate_options *opt, struct mutate_result *res)
{
    struct plan *p = NULL;
    struct decision dec;
    const struct settings *defs;
    const char *inject;

    memset(res, 0, sizeof(*res));
    res->warnings = json_array();
    res->audit = json_object();
    res->injected = json_array();
    join(res->rule, sizeof(res->rule), "default", (char *)NULL);
    if (!res->warnings || !res->audit || !res->injected)
        goto oom;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        goto oom;
    patch_text_init(&p->pt);
    p->pod = pod;
    p->res = res;
    p->opt = opt;
    p->vol_add = json_array();
    if (p->vol_add == NULL)
        goto oom;
    p->shm_grow = -1;
    if (!json_is_object(pod)) {
        res->status = MUTATE_NOT_GPU;
        snprintf(res->reason, sizeof(res->reason), "object is not a pod");
        goto done;
    }
    if (object_not_pod(p))
        goto done;
    p->meta = obj_get(pod, "metadata");
    p->spec = obj_get(pod, "spec");
    p->annotations = obj_get(p->meta, "annotations");
    if (ns == NULL || ns[0] == '\0')
        ns = str_get(p->meta, "namespace");

    if (namespace_skipped(ns, opt)) {
        res->status = MUTATE_SKIPPED;
        snprintf(res->reason, sizeof(res->reason), "namespace %s is skipped",
                 ns);
        skipped_gpus(p, pol);
        goto done;
    }
    inject = str_get(p->annotations, ANN_INJECT);
    if (inject != NULL && strcasecmp(inject, "false") == 0) {
        res->status = MUTATE_SKIPPED;
        snprintf(res->reason, sizeof(res->reason),
                 "annotation " ANN_INJECT " is \"false\"");
        skipped_gpus(p, pol);
        goto done;
    }
    if (p->spec == NULL) {
        res->status = MUTATE_NOT_GPU;
        snprintf(res->reason, sizeof(res->reason), "pod has no spec");
        goto done;
    }
    /* NCCL runs on Linux only, and the apiserver refuses Linux-only fields
     * (securityContext capabilities, seccompProfile,
     * allowPrivilegeEscalation, runAsNonRoot with a user...) in a pod whose
     * spec.os.name is windows (validateWindows in
     * pkg/apis/core/validation/validation.go); the ring check sets them,
     * and Windows has no tmpfs for /dev/shm. Such a pod is left alone. */
    if (str_get(obj_get(p->spec, "os"), "name") != NULL &&
        strcmp(str_get(obj_get(p->spec, "os"), "name"), "windows") == 0) {
        res->status = MUTATE_SKIPPED;
        snprintf(res->reason, sizeof(res->reason),
                 "spec.os.name is windows: NCCL and the ring check run on "
                 "Linux only");
        skipped_gpus(p, pol);
        if (res->gpus > 0)
            plan_warn(res,
                      "Windows pod left unchanged: NCCL and the ring check "
                      "run on Linux only");
        goto done;
    }
    if (ctrs_collect(p) != 0)
        goto error;

    defs = policy_defaults(pol);
    if (gpus_count(p, defs->gpu_resources, defs->n_gpu_resources) != 0) {
        res->status = MUTATE_NOT_GPU;
        snprintf(res->reason, sizeof(res->reason), "bad GPU count");
        goto done;
    }
    res->gpus = gpus_total(p);
    if (res->gpus == 0 && dra_apply(p, pol) != 0)
        goto bad_claim;
    if (res->gpus == 0)
        res->gpus = p->dra_gpus;
    policy_decide_pod(pol, ns, obj_get(p->meta, "labels"), p->annotations,
                      p->spec, res->gpus, &dec);
    p->dec = &dec;
    p->s = dec.settings != NULL ? dec.settings : defs;
    join(res->rule, sizeof(res->rule), dec.rule != NULL ? dec.rule : "default",
         (char *)NULL);
    if (json_object_set_new_nocheck(res->audit, "rule",
                                    json_string(res->rule)) != 0)
        goto oom;
    for (size_t i = 0; i < dec.n_warnings && i < POLICY_MAX_WARNINGS; i++)
        plan_warn_text(res, dec.warnings[i]);
    if (dec.skip) {
        res->status = MUTATE_SKIPPED;
        snprintf(res->reason, sizeof(res->reason), "rule %.100s says skip",
                 res->rule);
        goto done;
    }
    if (p->s != defs && !names_equal(p->s, defs)) {
        if (gpus_count(p, p->s->gpu_resources, p->s->n_gpu_resources) != 0) {
            res->status = MUTATE_NOT_GPU;
            snprintf(res->reason, sizeof(res->reason), "bad GPU count");
            goto done;
        }
        res->gpus = gpus_total(p);
        if (res->gpus == 0 && dra_apply(p, pol) != 0)
            goto bad_claim;
        if (res->gpus == 0)
            res->gpus = p->dra_gpus;
    }
    if (res->gpus == 0) {
        res->status = MUTATE_NOT_GPU;
        not_gpu_reason(p);
        goto done;
    }

    if (ringcheck_decide(p) != 0)
        goto error;
    plan_profile(p);
    if (plan_shm(p) != 0)
        goto error;
    plan_memory(p);
    if (plan_ipc(p) != 0 || plan_env(p) != 0 || plan_watchdog(p) != 0 ||
        plan_ringcheck(p) != 0 || plan_emit(p) != 0)
        goto error;
    if (p->pt.n_ops == 0) {
        res->status = MUTATE_UNCHANGED;
        goto done;
    }
    if (patch_text_close(&p->pt) != 0)
        goto error;
    if (patch_verify(pod, &p->pt, res) != 0)
        goto error_reason;
    res->status = MUTATE_PATCHED;
done:
    if (result_patch(p, res) != 0)
        goto oom;
    ctrs_release(p);
    patch_text_release(&p->pt);
    free(p);
    return 0;
bad_claim:
    res->status = MUTATE_NOT_GPU;
    snprintf(res->reason, sizeof(res->reason), "bad " ANN_CLAIM_GPUS);
    goto done;
error:
    if (res->reason[0] == '\0')
        snprintf(res->reason, sizeof(res->reason), "could not plan the patch");
error_reason:
    json_array_clear(res->injected);
    res->status = MUTATE_ERROR;
    plan_warn(res, "%.90s; pod left unchanged", res->reason);
    goto done;
oom:
    if (p != NULL) {
        ctrs_release(p);
        patch_text_release(&p->pt);
        free(p);
    }
    mutate_result_release(res);
    return -1;
}
