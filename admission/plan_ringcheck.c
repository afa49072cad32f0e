/* The ring-check init container: the decision, membership, name,
 * arguments, env, resources, security context, mounts and run volume. */
#include "admission/plan_ringcheck.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/jsonwrite.h"
#include "admission/plan_env.h"
#include "admission/plan_names.h"
#include "base/text.h"
#include "contract/limits.h"
#include "contract/multinode_env.h"
#include "contract/profile_marker.h"

bool
ringcheck_present(const struct plan *p)
{
    for (size_t i = 0; i < p->n_ctr; i++)
        if (ctr_is_ringcheck(&p->ctr[i]))
            return true;
    return false;
}

/* The container whose env and envFrom the check runs under: the first
 * GPU app container, else the first GPU init container. */
static struct ctr *
ringcheck_model(const struct plan *p)
{
    for (size_t k = 0; k < p->n_ctr; k++)
        if (p->ctr[k].gpus > 0 && !p->ctr[k].init)
            return &p->ctr[k];
    for (size_t k = 0; k < p->n_ctr; k++)
        if (p->ctr[k].gpus > 0)
            return &p->ctr[k];
    return NULL;
}

static void __attribute__((format(printf, 2, 3)))
rc_note(struct plan *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    text_vformat(p->res->ringcheck, sizeof(p->res->ringcheck), NULL, fmt, ap);
    va_end(ap);
}

/*
 * Multi-node membership, when the policy allows it. Sets p->mn and
 * p->mn_env; a pod that cannot join (a template it cannot serve) is
 * warned about and stays single-pod. Returns -1 on allocation failure.
 */
static int
ringcheck_membership(struct plan *p)
{
    struct ctr *g = ringcheck_model(p);
    struct jobmember_env_seen seen = {0};
    char why[200] = "";
    int rc;

    memset(&p->mn, 0, sizeof(p->mn));
    if (p->s->ringcheck.multi_node == RINGCHECK_MULTINODE_OFF) {
        snprintf(p->mn.why, sizeof(p->mn.why), "ringCheck.multiNode is off");
        return 0;
    }
    if (g != NULL) {
        seen.pet_master_addr = env_has(g, "PET_MASTER_ADDR");
        seen.master_addr = env_has(g, "MASTER_ADDR");
        seen.pet_nnodes = env_has(g, "PET_NNODES");
    }
    jobmember_detect(p->pod, &seen, p->opt != NULL ? p->opt->workload : NULL,
                     p->s, &p->mn);
    if (p->mn.kind == MN_NONE)
        return 0;
    p->mn_env = json_array();
    if (p->mn_env == NULL)
        return -1;
    rc = jobmember_env(&p->mn, p->pod, p->s, p->mn_env, why, sizeof(why));
    if (rc < 0)
        return -1;
    if (rc > 0) {
        plan_warn(p->res, "%.40s pod checks alone: %.150s", p->mn.operator_name,
                  why);
        snprintf(p->mn.why, sizeof(p->mn.why), "%.40s pod, but %.100s",
                 p->mn.operator_name, why);
        p->mn.kind = MN_NONE;
        json_decref(p->mn_env);
        p->mn_env = NULL;
    }
    return 0;
}

/*
 * Pod-level resources (spec.resources, the PodLevelResources feature):
 * the apiserver refuses a pod whose spec.resources.requests is below the
 * aggregate of its containers' requests (validatePodResourceConsistency in
 * pkg/apis/core/validation/validation.go: "must be greater than or equal
 * to aggregate container requests"). That aggregate counts an init
 * container as its own request plus those of the native sidecars started
 * before it; the ring check is the last init container, so it adds the
 * term ring check + every native sidecar. Returns whether that fits, for
 * cpu and memory (the resources a pod may set at pod level); when it does
 * not, the check is left out with a warning that says how to fix it.
 */
static bool
ringcheck_fits_pod(struct plan *p)
{
    static const char *const names[2] = {"cpu", "memory"};
    const char *const want[2] = {p->s->ringcheck.cpu_request,
                                 p->s->ringcheck.memory_request};
    const json_t *pres = obj_get(p->spec, "resources");

    if (pres == NULL)
        return true;
    for (int k = 0; k < 2; k++) {
        int64_t cap = request_milli(pres, names[k]), side = 0, rc = 0;
        char a[32], b[32], c[32];
        struct quantity q;

        if (cap < 0)
            continue;
        if (want[k] != NULL &&
            quantity_parse(want[k], strlen(want[k]), &q, NULL) == 0)
            rc = q.milli;
        for (size_t i = 0; i < p->n_ctr; i++) {
            int64_t r;

            if (!p->ctr[i].sidecar)
                continue;
            r = request_milli(obj_get(p->ctr[i].c, "resources"), names[k]);
            if (r > 0 && side <= INT64_MAX - r)
                side += r;
        }
        if (rc <= cap - side)
            continue;
        milli_format(names[k], rc, a, sizeof(a));
        milli_format(names[k], side, b, sizeof(b));
        milli_format(names[k], cap, c, sizeof(c));
        plan_warn(p->res,
                  "ring check not added: its %s request %s (+%s of native "
                  "sidecars) exceeds spec.resources %s %s; raise that or "
                  "lower ringCheck's",
                  names[k], a, b, names[k], c);
        rc_note(p,
                "left out: pod-level spec.resources %s %s cannot hold its "
                "%s request %s",
                names[k], c, names[k], a);
        return false;
    }
    return true;
}

/*
 * Whether GPUs of the resource name can run the ring check: it is NCCL on
 * CUDA, so only NVIDIA's device plugin resources (nvidia.com/gpu, and the
 * nvidia.com/ names of time-sliced or renamed shares) qualify. amd.com/gpu
 * and the other vendors' GPUs run RCCL or oneCCL, with no CUDA driver for
 * the check's image: injecting it would stop the pod at init. Such pods
 * still get the profile, /dev/shm and IPC settings, which RCCL reads too
 * (it honours the NCCL_* variables and uses /dev/shm the same way).
 */
static bool
ringcheck_resource(const char *name)
{
    return strncmp(name, "nvidia.com/", strlen("nvidia.com/")) == 0;
}

static int ringcheck_env(struct plan *p, struct buf *b);

/* What the check's container adds besides its env and envFrom (name,
 * image, about a dozen arguments, resources, mounts, security context),
 * as compact JSON: about 1 KiB, bounded by the policy's strings. */
#define RINGCHECK_FIXED_BYTES 4096u

/*
 * Whether the check fits the size bounds: the container, its env as
 * ringcheck_env() copies it included, adds at most
 * MUTATE_RINGCHECK_MAX_BYTES, and the pod stays within etcd's request
 * limit (MUTATE_OBJECT_MAX_BYTES) with it. Returns 1, 0 after a warning
 * and a note (the check is left out), or -1 when out of memory.
 */
static int
ringcheck_fits_size(struct plan *p)
{
    size_t bytes, have = p->opt != NULL ? p->opt->object_bytes : 0;
    struct buf text;

    /* The env members as the container gets them (",\"envFrom\":[...]"
     * and ",\"env\":[...]"), measured as the object holding only them
     * would be: one byte more, or "{}". */
    buf_init(&text, SIZE_MAX);
    if (ringcheck_env(p, &text) != 0) {
        buf_release(&text);
        return -1;
    }
    bytes = (text.len == 0 ? 2 : text.len + 1) + RINGCHECK_FIXED_BYTES +
            strlen(p->s->ringcheck.image);
    buf_release(&text);
    if (bytes > MUTATE_RINGCHECK_MAX_BYTES) {
        plan_warn(p->res,
                  "ring check not added: with the workload's NCCL and CUDA env "
                  "it would add %zu KiB, more than %u KiB",
                  bytes / 1024, MUTATE_RINGCHECK_MAX_BYTES / 1024);
        rc_note(p, "left out: it would add %zu KiB to the pod", bytes / 1024);
        return 0;
    }
    if (have > 0 && have + bytes > MUTATE_OBJECT_MAX_BYTES) {
        plan_warn(p->res,
                  "ring check not added: the pod (%zu KiB) would pass etcd's "
                  "%u KiB request limit with it",
                  have / 1024, MUTATE_OBJECT_MAX_BYTES / 1024);
        rc_note(p, "left out: the pod would pass etcd's %u KiB limit",
                MUTATE_OBJECT_MAX_BYTES / 1024);
        return 0;
    }
    return 1;
}

/*
 * Decides whether the ring-check init container is added, before any
 * other part of the plan, so that nothing refers to a check that is left
 * out. The webhook never injects arguments ncclguard-ringcheck would
 * refuse (contract/limits.h holds the bounds both sides use): such a pod
 * keeps its workload mutation and gets a warning saying how to fix it.
 * Returns -1 on allocation failure.
 */
int
ringcheck_decide(struct plan *p)
{
    const struct settings *s = p->s;
    int64_t side = 0;
    const char *other = NULL; /* a counted resource that is not NVIDIA's */
    int fits;

    p->rc_inject = false;
    p->rc_expect = 0;
    if (!p->dec->ringcheck) {
        rc_note(p, "off (policy or ncclguard.io/ring-check annotation)");
        return 0;
    }
    if (ringcheck_present(p)) {
        rc_note(p, "already present");
        return 0;
    }
    if (s->ringcheck.image == NULL || s->ringcheck.image[0] == '\0') {
        plan_warn(p->res, "ring check not added: no image; set ringCheck.image "
                          "or the webhook's --ringcheck-image");
        rc_note(p, "left out: the policy names no image");
        return 0;
    }
    /* The check is the last init container, so every native sidecar has
     * started and holds its GPUs: it can use only the rest, and of those
     * only NVIDIA's (ringcheck_resource()). */
    for (size_t r = 0; r < p->n_res; r++) {
        int64_t k = p->pod_per_res[r] - p->sidecar_per_res[r];

        if (!ringcheck_resource(s->gpu_resources[r])) {
            if (k > 0 && other == NULL)
                other = s->gpu_resources[r];
            continue;
        }
        side += p->sidecar_per_res[r];
        if (k > 0)
            p->rc_expect += k;
    }
    if (p->rc_expect == 0 && side == 0 && other != NULL) {
        rc_note(p,
                "left out: %.60s is not an NVIDIA GPU; the check runs NCCL "
                "on CUDA",
                other);
        return 0;
    }
    /* A pod whose GPUs come through DRA claims has no GPU resource: the
     * check shares those claims and expects the GPUs they give. */
    if (p->rc_expect == 0 && side == 0)
        p->rc_expect = p->dra_gpus;
    if (p->rc_expect == 0) {
        plan_warn(p->res,
                  "all %" PRId64 " GPUs are in native sidecars (restartPolicy: "
                  "Always), which the ring check cannot use; not added",
                  side);
        rc_note(p, "left out: the GPUs are all in native sidecars");
        return 0;
    }
    if (p->rc_expect > RINGCHECK_MAX_GPUS) {
        plan_warn(p->res,
                  "%" PRId64
                  " GPUs is more than the ring check's %d; not added "
                  "(check the GPU count, or turn ringCheck off in a rule)",
                  p->rc_expect, RINGCHECK_MAX_GPUS);
        rc_note(p, "left out: %" PRId64 " GPUs, more than %d", p->rc_expect,
                RINGCHECK_MAX_GPUS);
        return 0;
    }
    if ((size_t)s->ringcheck.bandwidth_bytes > RINGCHECK_MAX_BW_BYTES ||
        s->ringcheck.min_busbw_gbps > RINGCHECK_MAX_BUSBW_GBPS ||
        s->ringcheck.min_net_busbw_gbps > RINGCHECK_MAX_BUSBW_GBPS) {
        plan_warn(p->res, "ringCheck.bandwidthBytes or minBusBandwidthGBps is "
                          "beyond what the ring check accepts; not added");
        rc_note(p, "left out: policy values beyond the binary's bounds");
        return 0;
    }
    if (!ringcheck_fits_pod(p))
        return 0;
    if (ringcheck_membership(p) != 0)
        return -1;
    if (p->mn.kind != MN_NONE) {
        if ((fits = ringcheck_fits_size(p)) <= 0)
            return fits;
        rc_note(p, "multi-node (%s: %s), rendezvous port %d",
                p->mn.operator_name, p->mn.why, s->ringcheck.rendezvous_port);
        p->res->multinode = true;
        p->rc_inject = true;
        return 0;
    }
    /* One GPU has no ring: nothing for a single-pod check to test. */
    if (p->rc_expect < s->ringcheck.min_gpus) {
        rc_note(p,
                "left out: %" PRId64 " GPU%s, below ringCheck.minGPUs %d "
                "(single-pod: %s)",
                p->rc_expect, p->rc_expect == 1 ? "" : "s",
                s->ringcheck.min_gpus, p->mn.why);
        return 0;
    }
    if ((fits = ringcheck_fits_size(p)) <= 0)
        return fits;
    rc_note(p, "single-pod (%s)", p->mn.why);
    p->rc_inject = true;
    return 0;
}

static bool
quantity_same(const json_t *a, const json_t *b)
{
    struct quantity qa, qb;

    if (a == NULL || json_is_null(a))
        return true; /* a request defaults to its limit */
    if (quantity_of(a, &qa) != 0 || quantity_of(b, &qb) != 0)
        return false;
    return qa.milli == qb.milli;
}

/* Guaranteed QoS: every container has cpu and memory limits equal to its
 * requests. The init container must keep the pod in that class. */
static bool
pod_guaranteed(const struct plan *p)
{
    if (p->n_ctr == 0)
        return false;
    for (size_t i = 0; i < p->n_ctr; i++) {
        const json_t *res = obj_get(p->ctr[i].c, "resources");
        const json_t *lim = obj_get(res, "limits");
        const json_t *req = obj_get(res, "requests");
        static const char *const kinds[2] = {"cpu", "memory"};

        for (int k = 0; k < 2; k++) {
            const json_t *l = json_object_get(lim, kinds[k]);

            if (l == NULL || json_is_null(l) ||
                !quantity_same(json_object_get(req, kinds[k]), l))
                return false;
        }
    }
    return true;
}

/* The pod requires non-root: runAsNonRoot at pod level, or in every
 * container (Pod Security "restricted" accepts either). */
static bool
pod_requires_non_root(const struct plan *p)
{
    const json_t *psc = obj_get(p->spec, "securityContext");

    if (json_is_true(json_object_get(psc, "runAsNonRoot")))
        return true;
    if (p->n_ctr == 0)
        return false;
    for (size_t i = 0; i < p->n_ctr; i++) {
        const json_t *sc = obj_get(p->ctr[i].c, "securityContext");

        if (!json_is_true(json_object_get(sc, "runAsNonRoot")))
            return false;
    }
    return true;
}

static const char *
mode_name(enum ringcheck_mode m)
{
    return m == RINGCHECK_MODE_GROUP ? "group" : "process";
}

static const char *
on_failure_name(enum ringcheck_on_failure f)
{
    switch (f) {
    case RINGCHECK_WARN:
        return "warn";
    case RINGCHECK_FALLBACK:
        return "fallback";
    case RINGCHECK_FAIL:
        break;
    }
    return "fail";
}

/*
 * Whether a variable of the workload container is one the check may need
 * by its name: NCCL's and CUDA's own (NCCL_*, CUDA_*), PyTorch's NCCL
 * settings (TORCH_NCCL_*), and the job operators' membership variables of
 * the shared table (contract/multinode_env.h) the binary reads. Nothing
 * else of the workload's env goes into the check (tokens, credentials,
 * application settings).
 */
/* The exact names rcenv_name_wanted() accepts: the j-th of
 * RCENV_EXACT_N, or NULL for an unused slot of the table. The job
 * operators' variables of the shared table, then the two that
 * training-operator v1 sets next to WORLD_SIZE (docs/mutate.md,
 * multi-node), which the binary prefers. */
#define RCENV_EXACT_N (4 * MN_VARS_COUNT + 2)

static const char *
rcenv_exact_at(size_t j)
{
    static const char *const extra[2] = {"PET_NNODES", "PET_NODE_RANK"};

    if (j >= 4 * MN_VARS_COUNT)
        return extra[j - 4 * MN_VARS_COUNT];
    const struct mn_vars *v = &MN_VARS[j / 4];
    const char *const f[4] = {v->leader, v->port, v->nnodes, v->rank};

    return f[j % 4];
}

/* Those names sorted, once per process (the strings are static): a
 * search allocates nothing, so there is no failure to fall back from.
 * n_sorted counts the table's used slots. */
static const char *rcenv_sorted[RCENV_EXACT_N];
static size_t rcenv_n_sorted;
static pthread_once_t rcenv_exact_once = PTHREAD_ONCE_INIT;

static int
rcenv_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
rcenv_exact_build(void)
{
    size_t n = 0;

    for (size_t j = 0; j < RCENV_EXACT_N; j++)
        if (rcenv_exact_at(j) != NULL)
            rcenv_sorted[n++] = rcenv_exact_at(j);
    qsort(rcenv_sorted, n, sizeof(rcenv_sorted[0]), rcenv_cmp);
    rcenv_n_sorted = n;
}

static bool
rcenv_name_wanted(const char *name)
{
    /* The first letters first: a workload's env is mostly other names (a
     * platform may inject hundreds), and this runs for each of them, twice
     * per review (the size bound, then the container). */
    static const struct {
        const char *s;
        size_t n;
    } prefixes[] = {{"NCCL_", 5}, {"CUDA_", 5}, {"TORCH_NCCL_", 11}};

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (name[0] == prefixes[i].s[0] &&
            strncmp(name, prefixes[i].s, prefixes[i].n) == 0)
            return true;
    pthread_once(&rcenv_exact_once, rcenv_exact_build);
    return bsearch(&name, rcenv_sorted, rcenv_n_sorted, sizeof(rcenv_sorted[0]),
                   rcenv_cmp) != NULL;
}

/*
 * How an env entry's value is given: a plain value, a Downward API field
 * (fieldRef: names, addresses, labels; never secret), a ConfigMap key, or
 * one of the sources the check never gets: secretKeyRef (a secret), and
 * resourceFieldRef or any other source (the check's own resources differ
 * from the workload's, so such a value would mislead it).
 */
enum rcenv_source { RCENV_VALUE, RCENV_FIELD, RCENV_CONFIGMAP, RCENV_NEVER };

static enum rcenv_source
rcenv_source_of(struct pod_value e)
{
    struct pod_value from = pod_value_member(e, "valueFrom");
    int t = pod_value_type(from);

    if (t < 0 || t == JSON_NULL)
        return RCENV_VALUE;
    if (t != JSON_OBJECT || pod_value_size(from) != 1)
        return RCENV_NEVER;
    if (pod_value_type(pod_value_member(from, "fieldRef")) == JSON_OBJECT)
        return RCENV_FIELD;
    if (pod_value_type(pod_value_member(from, "configMapKeyRef")) ==
        JSON_OBJECT)
        return RCENV_CONFIGMAP;
    return RCENV_NEVER; /* secretKeyRef, resourceFieldRef, fileKeyRef ... */
}

/* Adds to set the names that value refers to as $(NAME), the kubelet's
 * syntax ($$ escapes a $; expansion.go in kubernetes/third_party/
 * forked/golang/expansion). Returns 0, or -1 when out of memory. */
static int
rcenv_refs_add(struct nameset *set, json_t *pool, const char *value)
{
    for (const char *c = value; c != NULL && *c != '\0'; c++) {
        const char *end;
        json_t *name;

        if (c[0] != '$')
            continue;
        if (c[1] == '$') {
            c++;
            continue;
        }
        if (c[1] != '(' || (end = strchr(c + 2, ')')) == NULL)
            continue;
        /* The set borrows its strings: they live in pool. */
        name = json_stringn_nocheck(c + 2, (size_t)(end - (c + 2)));
        if (name == NULL || json_array_append_new(pool, name) != 0 ||
            nameset_add(set, json_string_value(name)) != 0)
            return -1;
        c = end;
    }
    return 0;
}

/* What rcenv_select() needs of one entry besides its name: its
 * rcenv_source, with RCENV_WANTED when rcenv_name_wanted() accepts the
 * name. */
#define RCENV_WANTED 4u

static unsigned char
rcenv_fact(struct pod_value e, const char *name)
{
    return (unsigned char)(rcenv_source_of(e) |
                           (name != NULL && rcenv_name_wanted(name)
                                ? RCENV_WANTED
                                : 0u));
}

/*
 * Marks which entries of the workload's env (n of them, in list order,
 * with their names, NULL for none, and their rcenv_fact()) the check
 * copies: a Downward API field, an entry whose name rcenv_name_wanted()
 * accepts, or one that a copied entry refers to as $(NAME) (the kubelet
 * expands only names defined earlier, so one pass from the end finds
 * every entry needed), and only with a plain value, a fieldRef or a
 * configMapKeyRef. A secretKeyRef is never copied, whatever its name.
 * Fills keep[]; returns 0, or -1 when out of memory.
 */
static int
rcenv_select(const struct pod_value *ent, const char *const *names,
             const unsigned char *facts, size_t n, bool *keep)
{
    struct nameset refs = {0};
    json_t *pool = json_array();
    int rc = -1;

    if (pool == NULL)
        return -1;
    for (size_t i = n; i-- > 0;) {
        const char *name = names[i];
        enum rcenv_source src = (enum rcenv_source)(facts[i] & 3u);

        keep[i] = name != NULL && src != RCENV_NEVER &&
                  (src == RCENV_FIELD || (facts[i] & RCENV_WANTED) != 0 ||
                   nameset_has(&refs, name));
        if (keep[i] && src == RCENV_VALUE &&
            rcenv_refs_add(&refs, pool, pod_value_str(ent[i], "value")) != 0)
            goto done;
    }
    rc = 0;
done:
    nameset_release(&refs);
    json_decref(pool);
    return rc;
}

/* ---- the container written as text ---------------------------------- */

/* s as a JSON string; -1 when it is not UTF-8 (a name cut to fit its
 * buffer mid-character), as jansson's json_string() refused such text, or
 * when out of memory. */
static int
put_str(struct buf *b, const char *s)
{
    size_t n;

    return text_utf8_valid_len(s, &n) ? jsonwrite_string(b, s, n) : -1;
}

/* A list member of the container, written as its entries come:
 * ,"key":[ before the first, a comma before each other, and the ] at
 * list_end() when there was one; nothing for an empty list (the member
 * is left out, as the jansson container left it out). */
struct rc_list {
    struct buf *b;
    const char *key; /* "\"env\"": quoted, plain ASCII */
    size_t n;
};

static int
list_next(struct rc_list *l)
{
    if (l->n++ > 0)
        return buf_addc(l->b, ',');
    return buf_addc(l->b, ',') || buf_adds(l->b, l->key) || BUF_LIT(l->b, ":[");
}

static int
list_put(struct rc_list *l, const json_t *v)
{
    return list_next(l) || jsonwrite_value(l->b, v);
}

static int
list_end(const struct rc_list *l)
{
    return l->n > 0 ? buf_addc(l->b, ']') : 0;
}

/* Whether an envFrom source may go into the check: ConfigMaps (the
 * platform's profile, the user's NCCL settings), never a secretRef. */
static bool
rcenv_from_wanted(const json_t *e)
{
    return json_is_object(e) && obj_get(e, "configMapRef") != NULL &&
           json_object_get(e, "secretRef") == NULL;
}

/*
 * The profile is optional in envFrom, so a namespace without the
 * ConfigMap starts pods without the platform's NCCL settings, silently.
 * The webhook cannot look (it has no API access); the check can: it gets
 * the name the policy expects (PROFILE_EXPECTED_ENV) and compares it
 * with the marker key the profile ConfigMap carries (PROFILE_MARKER_KEY,
 * contract/profile_marker.h), which envFrom makes a variable. Returns
 * 0, or -1 when out of memory.
 */
static int
ringcheck_profile_expected(const struct plan *p, struct rc_list *env)
{
    const struct settings *s = p->s;

    if (!s->profile.enabled || s->profile.name == NULL ||
        s->profile.name[0] == '\0')
        return 0;
    return list_next(env) || BUF_LIT(env->b, "{\"name\":") ||
           put_str(env->b, PROFILE_EXPECTED_ENV) ||
           BUF_LIT(env->b, ",\"value\":") || put_str(env->b, s->profile.name) ||
           buf_addc(env->b, '}');
}

/* The env and envFrom the check runs under: those of the first GPU
 * container that rcenv_select() and rcenv_from_wanted() let through, with
 * what this plan adds, without NCCL_CONF_FILE (the check writes that file;
 * it does not read it). Written into b as the container's members
 * ,"envFrom":[...] then ,"env":[...], each left out when empty. */
static int
ringcheck_env(struct plan *p, struct buf *b)
{
    json_t *list;
    struct ctr *g = ringcheck_model(p);
    const struct env_names *own;
    struct rc_list env = {b, "\"env\"", 0}, from = {b, "\"envFrom\"", 0};
    struct pod_value *all = NULL;
    const char **names = NULL;
    unsigned char *facts = NULL;
    bool *keep = NULL;
    size_t i;
    json_t *e;

    if (g == NULL)
        return 0;
    if (p->s->profile.enabled && p->s->profile.name != NULL &&
        p->s->profile.name[0] != '\0' &&
        !profile_present(g->c, p->s->profile.name)) {
        json_t *ref = profile_ref(p->s);
        int rc = ref != NULL ? list_put(&from, ref) : -1;

        json_decref(ref);
        if (rc != 0)
            goto fail;
    }
    list = arr_get(g->c, "envFrom");
    json_array_foreach(list, i, e)
    {
        if (rcenv_from_wanted(e) && list_put(&from, e) != 0)
            goto fail;
    }
    if (list_end(&from) != 0)
        goto fail;
    /* The workload's env and the plan's additions, as one list in order,
     * so that a $(NAME) in an added entry can keep the entry it needs. */
    const struct pod_list own_list = pod_list_of(g, "env");
    size_t n_all = own_list.n + json_array_size(g->env_add), k = 0;

    /* The four per-entry arrays in one block (this runs twice per review
     * that gets the check): the pointers first, for their alignment. An
     * env is bounded by the body, far from overflowing the product. */
    all = calloc(n_all ? n_all : 1, sizeof(*all) + sizeof(*names) +
                                        sizeof(*facts) + sizeof(*keep));
    if (all == NULL || (own = env_names_of(g)) == NULL)
        goto fail;
    names = (const char **)(all + (n_all ? n_all : 1));
    facts = (unsigned char *)(names + (n_all ? n_all : 1));
    keep = (bool *)(facts + (n_all ? n_all : 1));
    if (p->rc_env_facts == NULL) {
        p->rc_env_facts = calloc(own->n ? own->n : 1, 1);
        if (p->rc_env_facts == NULL)
            goto fail;
        for (i = 0; i < own->n; i++)
            p->rc_env_facts[i] =
                rcenv_fact(pod_list_at(&own_list, i), own->name[i]);
    }
    /* The workload's names were read once for the plan (the size bound
     * and the container each come here); the additions are a few. */
    for (i = 0; i < own_list.n; i++, k++) {
        all[k] = pod_list_at(&own_list, i);
        names[k] = own->name[i];
        facts[k] = p->rc_env_facts[i];
    }
    json_array_foreach(g->env_add, i, e)
    {
        all[k] = pod_value_of(e);
        names[k] = str_get(e, "name");
        facts[k] = rcenv_fact(all[k], names[k]);
        k++;
    }
    if (rcenv_select(all, names, facts, n_all, keep) != 0)
        goto fail;
    for (k = 0; k < n_all; k++) {
        const char *n;

        if (!keep[k])
            continue;
        n = names[k];
        if (n != NULL && strcmp(n, "NCCL_CONF_FILE") == 0)
            continue;
        /* The multi-node variables are ours: a workload's own POD_IP or
         * NCCLGUARD_* must not shadow them. */
        if (n != NULL && p->mn_env != NULL && jobmember_owns(n))
            continue;
        if (list_next(&env) != 0 || pod_value_write(env.b, all[k]) != 0)
            goto fail;
    }
    /* After the copied entries, so that $(VAR) references in them
     * resolve (the kubelet expands only variables defined earlier). */
    json_array_foreach(p->mn_env, i, e)
    {
        if (list_put(&env, e) != 0)
            goto fail;
    }
    if (ringcheck_profile_expected(p, &env) != 0 || list_end(&env) != 0)
        goto fail;
    free(all);
    return 0;
fail:
    free(all);
    return -1;
}

/*
 * Names the ring check: ncclguard-ringcheck, or ncclguard-ringcheck-2, -3,
 * ... when a container of the pod (one that is not a ring check of ours,
 * see ctr_is_ringcheck()) already has the name, since two containers of
 * one name make the apiserver refuse the pod. Returns 0, or -1 with a
 * reason.
 */
static int
ringcheck_name(struct plan *p)
{
    if (ctr_names_build(p) != 0)
        return -1;
    join(p->rc_name, sizeof(p->rc_name), RINGCHECK_NAME, (char *)NULL);
    for (int i = 2; nameset_has(&p->ctr_names, p->rc_name); i++) {
        char t[24];

        if (i > 1000) {
            snprintf(p->res->reason, sizeof(p->res->reason),
                     "no free name for the ring check: " RINGCHECK_NAME
                     " to -1000 are all taken");
            return -1;
        }
        join(p->rc_name, sizeof(p->rc_name), RINGCHECK_NAME "-", i64_text(i, t),
             (char *)NULL);
    }
    return 0;
}

/* One argument of the ring check: --flag value, left out when value is
 * NULL. */
struct rc_arg {
    const char *flag;
    const char *value;
};

/*
 * The check's arguments, from a table in the order it is given them,
 * written into b as a JSON array. The first is always
 * RINGCHECK_FIRST_ARG: ctr_is_ringcheck() recognises a check of ours by it
 * on a later review. Returns 0, or -1 when out of memory.
 */
static int
ringcheck_args(const struct plan *p, struct buf *b)
{
    const struct settings *s = p->s;
    const bool fallback = s->ringcheck.on_failure == RINGCHECK_FALLBACK;
    const bool mn = p->mn.kind != MN_NONE;
    const char *on_missing =
        s->ringcheck.on_missing == RINGCHECK_MISSING_FAIL ? "fail" : "warn";
    const char *on_no_cure =
        s->ringcheck.on_no_cure == RINGCHECK_NOCURE_FAIL   ? "fail"
        : s->ringcheck.on_no_cure == RINGCHECK_NOCURE_WARN ? "warn"
                                                           : NULL;
    char expect[32], timeout[32], bw[32], busbw[32], port[32], mn_timeout[32];
    char busbw_net[32], transport[48] = "";
    size_t n = 0;
    char t[24];

    join(expect, sizeof(expect), i64_text(p->rc_expect, t), (char *)NULL);
    join(timeout, sizeof(timeout), i64_text(s->ringcheck.timeout_seconds, t),
         (char *)NULL);
    join(bw, sizeof(bw), i64_text(s->ringcheck.bandwidth_bytes, t),
         (char *)NULL);
    snprintf(busbw, sizeof(busbw), "%g", s->ringcheck.min_busbw_gbps);
    snprintf(busbw_net, sizeof(busbw_net), "%g",
             s->ringcheck.min_net_busbw_gbps);
    join(port, sizeof(port), i64_text(s->ringcheck.rendezvous_port, t),
         (char *)NULL);
    if (s->ringcheck.expect_intra != NULL || s->ringcheck.expect_inter != NULL)
        join(transport, sizeof(transport),
             s->ringcheck.expect_intra != NULL ? "intra=" : "",
             s->ringcheck.expect_intra != NULL ? s->ringcheck.expect_intra : "",
             s->ringcheck.expect_intra != NULL &&
                     s->ringcheck.expect_inter != NULL
                 ? ","
                 : "",
             s->ringcheck.expect_inter != NULL ? "inter=" : "",
             s->ringcheck.expect_inter != NULL ? s->ringcheck.expect_inter : "",
             (char *)NULL);
    join(mn_timeout, sizeof(mn_timeout),
         i64_text(s->ringcheck.multi_node_timeout, t), (char *)NULL);
    const struct rc_arg table[] = {
        {RINGCHECK_FIRST_ARG, expect},
        {"--timeout", timeout},
        {"--mode", mode_name(s->ringcheck.mode)},
        {"--bw-bytes", bw},
        {"--on-failure", on_failure_name(s->ringcheck.on_failure)},
        {"--min-busbw", s->ringcheck.min_busbw_gbps > 0 ? busbw : NULL},
        {"--fallback-conf", fallback ? RUN_CONF : NULL},
        {"--multi-node", mn ? "auto" : NULL},
        {"--rendezvous-port", mn ? port : NULL},
        {"--multi-node-timeout", mn ? mn_timeout : NULL},
        {"--on-missing", mn ? on_missing : NULL},
        {"--on-no-cure=", fallback ? on_no_cure : NULL},
        {"--min-busbw-net",
         mn && s->ringcheck.min_net_busbw_gbps > 0 ? busbw_net : NULL},
        {"--expect-transport=", transport[0] != '\0' ? transport : NULL},
    };

    if (buf_addc(b, '[') != 0)
        return -1;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].value == NULL)
            continue;
        size_t fl = strlen(table[i].flag);

        if (n++ > 0 && buf_addc(b, ',') != 0)
            return -1;
        /* A flag ending in '=' takes its value in the same argument. */
        if (table[i].flag[fl - 1] == '=') {
            char one[80];

            join(one, sizeof(one), table[i].flag, table[i].value, (char *)NULL);
            if (put_str(b, one) != 0)
                return -1;
            continue;
        }
        if (put_str(b, table[i].flag) || buf_addc(b, ',') ||
            put_str(b, table[i].value))
            return -1;
    }
    return buf_addc(b, ']');
}

/*
 * The check's limit for one of cpu and memory outside a Guaranteed pod:
 * the policy's limit, raised to the request when a rule raised only that
 * (a limit below its request is refused), and lowered to the pod-level
 * spec.resources limit when the pod sets one (a container's limit above
 * it is refused: validatePodResourceConsistency). Writes the quantity
 * text into out; "" when the policy gives neither.
 */
static void
ringcheck_limit_of(const struct plan *p, int k, char *out, size_t n)
{
    static const char *const names[2] = {"cpu", "memory"};
    const char *req =
        k == 0 ? p->s->ringcheck.cpu_request : p->s->ringcheck.memory_request;
    const char *lim =
        k == 0 ? p->s->ringcheck.cpu_limit : p->s->ringcheck.memory_limit;
    const json_t *plim = json_object_get(
        obj_get(obj_get(p->spec, "resources"), "limits"), names[k]);
    struct quantity qr, ql, qp;
    const char *pick = lim != NULL ? lim : req;

    out[0] = '\0';
    if (pick == NULL)
        return;
    if (lim != NULL && req != NULL &&
        quantity_parse(req, strlen(req), &qr, NULL) == 0 &&
        quantity_parse(lim, strlen(lim), &ql, NULL) == 0 && ql.milli < qr.milli)
        pick = req;
    join(out, n, pick, (char *)NULL);
    if (plim != NULL && quantity_of(plim, &qp) == 0 && !qp.negative &&
        quantity_parse(pick, strlen(pick), &ql, NULL) == 0 &&
        qp.milli < ql.milli)
        milli_format(names[k], qp.milli, out, n);
}

/* Sets the check's cpu and memory limits outside a Guaranteed pod (see
 * ringcheck_limit_of()). Returns 0, or -1 when out of memory. */
static int
ringcheck_limits(const struct plan *p, json_t *lim)
{
    static const char *const names[2] = {"cpu", "memory"};

    for (int k = 0; k < 2; k++) {
        char q[32];

        ringcheck_limit_of(p, k, q, sizeof(q));
        if (q[0] != '\0' &&
            json_object_set_new_nocheck(lim, names[k], jstr(q)) != 0)
            return -1;
    }
    return 0;
}

/*
 * The check's resources: the GPUs the pod holds outside its native
 * sidecars (those keep theirs while the check runs), ringCheck.resources
 * as requests, and as limits too in a Guaranteed pod so that the pod keeps
 * its QoS class, else the policy's limits (ringcheck_limits()); and the
 * pod's DRA claims when its GPUs come through them.
 * Returns the resources object, or NULL when out of memory.
 */
static json_t *
ringcheck_resources(const struct plan *p)
{
    const struct settings *s = p->s;
    const char *cpu = s->ringcheck.cpu_request;
    const char *mem = s->ringcheck.memory_request;
    json_t *lim = json_object(), *req = json_object(), *res;
    char buf[32], t[24];
    /* Once: it parses every container's cpu and memory quantities. */
    const bool guaranteed = pod_guaranteed(p);

    if (lim == NULL || req == NULL)
        goto fail;
    for (size_t r = 0; r < p->n_res; r++) {
        int64_t k = p->pod_per_res[r] - p->sidecar_per_res[r];

        if (k <= 0 || !ringcheck_resource(s->gpu_resources[r]))
            continue;
        join(buf, sizeof(buf), i64_text(k, t), (char *)NULL);
        if (json_object_set_new(lim, s->gpu_resources[r], jstr(buf)) ||
            json_object_set_new(req, s->gpu_resources[r], jstr(buf)))
            goto fail;
    }
    if ((cpu != NULL && json_object_set_new_nocheck(req, "cpu", jstr(cpu))) ||
        (mem != NULL && json_object_set_new_nocheck(req, "memory", jstr(mem))))
        goto fail;
    if (guaranteed &&
        ((cpu != NULL && json_object_set_new_nocheck(lim, "cpu", jstr(cpu))) ||
         (mem != NULL &&
          json_object_set_new_nocheck(lim, "memory", jstr(mem)))))
        goto fail;
    if (!guaranteed && ringcheck_limits(p, lim) != 0)
        goto fail;
    res = jobj("limits", lim, "requests", req);
    if (res != NULL && p->dra_gpus > 0 &&
        json_object_set_nocheck(res, "claims", p->dra_claims) != 0) {
        json_decref(res);
        return NULL;
    }
    return res;
fail:
    json_decref(lim);
    json_decref(req);
    return NULL;
}

/*
 * The check's security context, written into b: no privilege escalation,
 * no capabilities, the runtime's seccomp profile, and non-root with a
 * numeric user when the pod requires non-root. Returns 0, or -1 when out
 * of memory.
 */
static int
ringcheck_security(const struct plan *p, struct buf *b)
{
    if (BUF_LIT(b, "{\"allowPrivilegeEscalation\":false,\"capabilities\":{"
                   "\"drop\":[\"ALL\"]},\"seccompProfile\":{\"type\":"
                   "\"RuntimeDefault\"}"))
        return -1;
    if (pod_requires_non_root(p)) {
        const json_t *psc = obj_get(p->spec, "securityContext");

        if (BUF_LIT(b, ",\"runAsNonRoot\":true"))
            return -1;
        /* A numeric user, so the kubelet need not trust the image's. */
        if (json_object_get(psc, "runAsUser") == NULL &&
            BUF_LIT(b, ",\"runAsUser\":65532"))
            return -1;
    }
    return buf_addc(b, '}');
}

/* One volumeMount of the check, {"name","mountPath"}, as the next entry
 * of mounts. */
static int
ringcheck_mount(struct rc_list *mounts, const char *name, const char *path)
{
    return list_next(mounts) || BUF_LIT(mounts->b, "{\"name\":") ||
           put_str(mounts->b, name) || BUF_LIT(mounts->b, ",\"mountPath\":") ||
           put_str(mounts->b, path) || buf_addc(mounts->b, '}');
}

/* The check's volumeMounts, the member left out when there is none: the
 * pod's /dev/shm, and the run folder its fallback config is written to.
 * Returns 0, or -1 when out of memory. */
static int
ringcheck_mounts(const struct plan *p, bool fallback, struct buf *b)
{
    struct rc_list mounts = {b, "\"volumeMounts\"", 0};

    if ((p->shm_volume[0] != '\0' &&
         ringcheck_mount(&mounts, p->shm_volume, SHM_PATH) != 0) ||
        (fallback && ringcheck_mount(&mounts, p->run_volume, RUN_DIR) != 0))
        return -1;
    return list_end(&mounts);
}

/* onFailure: fallback: the volume at /run/ncclguard that the check writes
 * its fallback NCCL config to, the pod's own if it mounts one there, and
 * its read-only mount in every GPU container. */
static int
ringcheck_run_volume(struct plan *p)
{
    const char *existing = NULL;

    for (size_t i = 0; i < p->n_ctr && existing == NULL; i++)
        existing = mount_at(&p->ctr[i], RUN_DIR);
    if (existing != NULL) {
        join(p->run_volume, sizeof(p->run_volume), existing, (char *)NULL);
    } else {
        json_t *v;

        if (volume_name_unique(p, "ncclguard-run", p->run_volume,
                               sizeof(p->run_volume)) != 0)
            return -1;
        v = jobj("name", jstr(p->run_volume), "emptyDir", json_object());
        if (v == NULL || json_array_append_new(p->vol_add, v) != 0)
            return -1;
    }
    for (size_t i = 0; i < p->n_ctr; i++)
        if (p->ctr[i].gpus > 0 &&
            mount_add(&p->ctr[i], p->run_volume, RUN_DIR, true) != 0)
            return -1;
    return 0;
}

/*
 * Plans the init container that ringcheck_decide() chose to add, into
 * p->rc_text: a free name, the run volume of onFailure: fallback, then
 * the container from its parts, written as the compact JSON object the
 * patch carries (name, image, args, envFrom, env, resources,
 * volumeMounts, terminationMessagePolicy, securityContext; no jansson
 * container is built). Runs after every other plan step, since the check
 * copies the env they give its model container. Returns -1 on allocation
 * failure or when no name is free (with a reason).
 */
int
plan_ringcheck(struct plan *p)
{
    const struct settings *s = p->s;
    const bool fallback = s->ringcheck.on_failure == RINGCHECK_FALLBACK;
    struct buf *b = &p->rc_text;
    json_t *res;
    int rc;

    if (!p->rc_inject)
        return 0;
    if (ringcheck_name(p) != 0)
        return -1;
    if (fallback && ringcheck_run_volume(p) != 0)
        return -1;
    buf_init(b, SIZE_MAX);
    /* One block for most checks (1 to 2 KiB), not doublings from 256. */
    if (buf_reserve(b, 3072) != 0 || BUF_LIT(b, "{\"name\":") ||
        put_str(b, p->rc_name) || BUF_LIT(b, ",\"image\":") ||
        put_str(b, s->ringcheck.image) || BUF_LIT(b, ",\"args\":") ||
        ringcheck_args(p, b) || ringcheck_env(p, b) != 0 ||
        BUF_LIT(b, ",\"resources\":"))
        return -1;
    res = ringcheck_resources(p);
    rc = res != NULL ? jsonwrite_value(b, res) : -1;
    json_decref(res);
    if (rc != 0 || ringcheck_mounts(p, fallback, b) != 0 ||
        BUF_LIT(b, ",\"terminationMessagePolicy\":\"FallbackToLogsOnError\","
                   "\"securityContext\":") ||
        ringcheck_security(p, b) != 0 || buf_addc(b, '}'))
        return -1;
    injected_add(p->res, "ringcheck");
    if (p->mn.kind != MN_NONE)
        injected_add(p->res, "multinode");
    return 0;
}
