/* GPU counting: containers, native sidecars, the pod's aggregate, DRA
 * claims, and why a pod without GPUs is left alone (MIG, other vendors). */
#include "admission/plan_gpus.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/plan_names.h"

/* Reads one GPU count. Returns 0 and *out, or -1 with why filled. */
static int
gpu_value(const json_t *v, int64_t *out, char *why, size_t n)
{
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);

        if (i < 0) {
            snprintf(why, n, "%" JSON_INTEGER_FORMAT ", a negative count", i);
            return -1;
        }
        if (i > MUTATE_MAX_GPUS_PER_CONTAINER) {
            snprintf(why, n, "%" JSON_INTEGER_FORMAT ", too many", i);
            return -1;
        }
        *out = (int64_t)i;
        return 0;
    }
    if (json_is_real(v)) {
        /* A JSON number with a fraction or an exponent arrives as a
         * double, which cannot tell 8.0 from 8.000000000000000000001 (a
         * quantity the apiserver rounds up to 8000000001n and refuses for
         * an extended resource): such a count is never taken. The
         * apiserver itself always sends quantities as strings. */
        snprintf(why, n,
                 "%g as a JSON number with a fraction, not a whole "
                 "count",
                 json_real_value(v));
        return -1; /* a real is never a count */
    }
    if (json_is_string(v)) {
        struct quantity q;
        const char *s = json_string_value(v);

        if (quantity_parse(s, json_string_length(v), &q, NULL) != 0) {
            snprintf(why, n, "\"%.40s\", not a quantity", s);
            return -1;
        }
        if (q.negative) {
            snprintf(why, n, "\"%.40s\", a negative count", s);
            return -1;
        }
        if (!q.integer) {
            snprintf(why, n, "\"%.40s\", not a whole number", s);
            return -1;
        }
        if (q.saturated || q.value > MUTATE_MAX_GPUS_PER_CONTAINER) {
            snprintf(why, n, "\"%.40s\", too many", s);
            return -1;
        }
        *out = q.value;
        return 0;
    }
    if (json_is_null(v)) {
        *out = 0;
        return 0;
    }
    snprintf(why, n, "not a number");
    return -1;
}

/*
 * Counts the GPUs of every container for the resource names given, and the
 * pod total the way the scheduler and the kubelet's admission sum
 * resources: max(sum of app containers + sidecars, each init container +
 * the sidecars started before it, each sidecar + the sidecars before it).
 * That is AggregateContainerRequests() in Kubernetes'
 * staging/src/k8s.io/component-helpers/resource/helpers.go, which follows
 * KEP-753 (sig-node/753-sidecar-containers, "Resources calculation for
 * scheduling and pod admission"); a sidecar is an init container with
 * restartPolicy: Always. Returns 0, or -1 after a warning on a count that
 * is not a whole non-negative number.
 */
int
gpus_count(struct plan *p, char *const *names, size_t n_names)
{
    int64_t init_max[MUTATE_MAX_RESOURCES] = {0};
    int64_t app_sum[MUTATE_MAX_RESOURCES] = {0};
    int64_t side_sum[MUTATE_MAX_RESOURCES] = {0};

    p->n_res = n_names < MUTATE_MAX_RESOURCES ? n_names : MUTATE_MAX_RESOURCES;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        json_t *res = obj_get(c->c, "resources");
        json_t *lim = obj_get(res, "limits");
        json_t *req = obj_get(res, "requests");

        c->gpus = 0;
        for (size_t r = 0; r < p->n_res; r++) {
            json_t *v = json_object_get(lim, names[r]);
            char why[96];
            int64_t k;

            if (v == NULL || json_is_null(v))
                v = json_object_get(req, names[r]);
            if (v == NULL) {
                c->per_res[r] = 0;
                continue;
            }
            if (gpu_value(v, &k, why, sizeof(why)) != 0) {
                plan_warn(p->res,
                          "container \"%.30s\" asks for %.30s %s; pod left "
                          "unchanged: write a whole count",
                          c->name, names[r], why);
                return -1;
            }
            c->per_res[r] = k;
            c->gpus += k;
        }
        /* The ring check's GPUs count towards the pod, but the container
         * is ours: it is never treated as a workload container. */
        if (ctr_is_ringcheck(c))
            c->gpus = 0;
    }
    for (size_t r = 0; r < p->n_res; r++) {
        for (size_t i = 0; i < p->n_ctr; i++) {
            const struct ctr *c = &p->ctr[i];
            int64_t k = c->per_res[r];

            if (!c->init) {
                app_sum[r] += k;
            } else if (c->sidecar) {
                side_sum[r] += k;
                if (side_sum[r] > init_max[r])
                    init_max[r] = side_sum[r];
            } else if (k + side_sum[r] > init_max[r]) {
                init_max[r] = k + side_sum[r];
            }
        }
        app_sum[r] += side_sum[r];
        p->pod_per_res[r] = app_sum[r] > init_max[r] ? app_sum[r] : init_max[r];
        p->sidecar_per_res[r] = side_sum[r];
    }
    return 0;
}

int64_t
gpus_total(const struct plan *p)
{
    int64_t t = 0;

    for (size_t r = 0; r < p->n_res; r++)
        t += p->pod_per_res[r];
    return t;
}

bool
names_equal(const struct settings *a, const struct settings *b)
{
    if (a->n_gpu_resources != b->n_gpu_resources)
        return false;
    for (size_t i = 0; i < a->n_gpu_resources; i++)
        if (strcmp(a->gpu_resources[i], b->gpu_resources[i]) != 0)
            return false;
    return true;
}

/* Does container c reference a claim listed in names ([{name}])? */
static bool
ctr_uses_claim(const struct ctr *c, const json_t *names)
{
    json_t *list;
    size_t i, j;
    json_t *ref, *n;

    list = arr_get(obj_get(c->c, "resources"), "claims");
    json_array_foreach(list, i, ref)
    {
        const char *rn = str_get(ref, "name");

        if (rn == NULL)
            continue;
        json_array_foreach(names, j, n)
        {
            if (strcmp(rn, str_get(n, "name")) == 0)
                return true;
        }
    }
    return false;
}

/*
 * A pod that gets its GPUs through DRA (spec.resourceClaims, referenced
 * from containers' resources.claims) shows no GPU count: the scheduler
 * allocates the devices after admission. Its count comes from the
 * annotation ncclguard.io/claim-gpus, which the user sets, else from the
 * policy's dra.claimTemplates for the claims' ResourceClaimTemplates.
 * The claims counted are those whose template the policy maps, or, with
 * only the annotation, every claim of the pod. Containers that use one
 * become GPU containers, and the ring check gets the same claims instead
 * of GPU resources. Call after gpus_count(), which resets the containers'
 * counts. Returns 0 (p->dra_gpus set, maybe 0), or -1 after a warning
 * about the annotation.
 */
int
dra_apply(struct plan *p, const struct policy *pol)
{
    const json_t *claims = arr_get(p->spec, "resourceClaims");
    const char *ann = str_get(p->annotations, ANN_CLAIM_GPUS);
    int64_t mapped = 0, count = 0;
    size_t i;
    json_t *cl;

    p->dra_gpus = 0;
    json_decref(p->dra_claims);
    p->dra_claims = json_array();
    if (p->dra_claims == NULL)
        return -1;
    if (json_array_size(claims) == 0)
        return 0;
    json_array_foreach(claims, i, cl)
    {
        const char *tmpl = str_get(cl, "resourceClaimTemplateName");
        int64_t g = policy_claim_template_gpus(pol, tmpl);

        if (g > 0 && str_get(cl, "name") != NULL) {
            mapped += g;
            json_array_append_new(
                p->dra_claims,
                jobj("name", jstr(str_get(cl, "name")), NULL, NULL));
        }
    }
    if (ann != NULL) {
        char *end;
        long long v;

        errno = 0;
        v = strtoll(ann, &end, 10);
        if (ann[0] < '0' || ann[0] > '9' || *end != '\0' || errno != 0 ||
            v < 1 || v > CLAIM_GPUS_MAX) {
            plan_warn(p->res,
                      ANN_CLAIM_GPUS " \"%.20s\" is not a GPU count; pod left "
                                     "unchanged: write 1 to %d",
                      ann, CLAIM_GPUS_MAX);
            return -1;
        }
        count = v;
        if (json_array_size(p->dra_claims) == 0)
            json_array_foreach(claims, i, cl) if (str_get(cl, "name") != NULL)
                json_array_append_new(
                    p->dra_claims,
                    jobj("name", jstr(str_get(cl, "name")), NULL, NULL));
    } else {
        count = mapped;
    }
    if (count == 0)
        return 0;
    for (size_t k = 0; k < p->n_ctr; k++) {
        struct ctr *c = &p->ctr[k];

        if (ctr_is_ringcheck(c))
            continue;
        if (ctr_uses_claim(c, p->dra_claims))
            c->gpus = count;
    }
    p->dra_gpus = count;
    return 0;
}

/*
 * Why a pod with no GPU the policy counts is left alone, when the reason
 * is one a user would not guess: writes it into p->res->reason.
 */
void
not_gpu_reason(struct plan *p)
{
    char *r = p->res->reason;
    size_t n = sizeof(p->res->reason);

    for (size_t i = 0; i < p->n_ctr; i++) {
        const json_t *res = obj_get(p->ctr[i].c, "resources");
        const json_t *lists[2] = {obj_get(res, "limits"),
                                  obj_get(res, "requests")};

        for (int l = 0; l < 2; l++) {
            const char *key;
            json_t *v;

            json_object_foreach((json_t *)lists[l], key, v)
            {
                if (strcmp(key, "amd.com/gpu") == 0) {
                    snprintf(r, n,
                             "asks for amd.com/gpu: NCCL runs on NVIDIA GPUs "
                             "only (AMD GPUs use RCCL)");
                    return;
                }
                if (strncmp(key, "nvidia.com/mig-", 15) == 0) {
                    snprintf(r, n,
                             "asks for a MIG slice (%.60s): one MIG "
                             "instance has no NCCL ring to check",
                             key);
                    return;
                }
            }
        }
    }
    if (json_array_size(arr_get(p->spec, "resourceClaims")) > 0)
        snprintf(r, n,
                 "DRA claims, GPU count unknown at admission: "
                 "annotate " ANN_CLAIM_GPUS
                 " with it, or map the template in the "
                 "policy's dra.claimTemplates");
}

/*
 * A pod skipped before its GPUs were counted (opt-out annotation, skipped
 * namespace) still shows its GPU count in summaries: counted here without
 * the warnings a bad count would give, since the pod is not touched.
 */
void
skipped_gpus(struct plan *p, const struct policy *pol)
{
    const struct settings *defs = policy_defaults(pol);
    size_t nw = json_array_size(p->res->warnings);
    char reason[sizeof(p->res->reason)];

    memcpy(reason, p->res->reason, sizeof(reason));
    if (p->spec != NULL && ctrs_collect(p) == 0 &&
        gpus_count(p, defs->gpu_resources, defs->n_gpu_resources) == 0)
        p->res->gpus = gpus_total(p);
    while (json_array_size(p->res->warnings) > nw)
        json_array_remove(p->res->warnings, nw);
    memcpy(p->res->reason, reason, sizeof(reason));
}
