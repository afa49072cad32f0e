/* The mutation of one pod: GPU count, profile envFrom, /dev/shm, IPC,
 * extra env, ring-check init container, recorded as a checked patch. The
 * plan_* steps fill struct plan; plan_emit() alone writes the patch. */
#include "admission/mutate.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "admission/jobmember.h"
#include "admission/patch.h"
#include "base/text.h"
#include "contract/limits.h"
#include "contract/profile_marker.h"
#include "contract/wdspec.h"
#include "policy/quantity.h"

/* Bounds on what one pod may hold before we give up on it (no patch). */
/* Containers: a pod past this is left unchanged with a warning (and so
 * escapes the policy: docs/mutate.md, "what the policy cannot enforce");
 * every step is linear in it, so it is generous. */
#define MUTATE_MAX_CONTAINERS 1024
#define MUTATE_MAX_RESOURCES 16
#define MUTATE_MAX_WARNINGS 16
#define MUTATE_MAX_GPUS_PER_CONTAINER (1 << 20)

#define RINGCHECK_NAME "ncclguard-ringcheck"
#define RINGCHECK_FIRST_ARG "--expect-gpus"
#define RUN_DIR "/run/ncclguard"
#define RUN_CONF RUN_DIR "/nccl.conf"
#define SHM_PATH "/dev/shm"

/* Annotations the webhook writes on pods. They never reuse the names users
 * set to ask for something (ncclguard.io/inject, shm-size, ring-check,
 * debug). */
#define ANN_MUTATED "ncclguard.io/mutated"
#define ANN_GPUS "ncclguard.io/gpus"
#define ANN_RULE "ncclguard.io/rule"
#define ANN_SHM "ncclguard.io/shm-size-applied"
#define ANN_INJECT "ncclguard.io/inject"

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
    json_decref(res->patch);
    json_decref(res->warnings);
    json_decref(res->audit);
    json_decref(res->injected);
    res->patch = res->warnings = res->audit = res->injected = NULL;
}

/*
 * A set of strings borrowed from the pod (they live as long as the pod):
 * open addressing with linear probing, at most half full, so that each
 * lookup costs O(1) on average whatever the names are.
 */
struct nameset {
    const char **slot; /* cap of them, NULL when empty */
    size_t cap, n;
};

static uint64_t
name_hash(const char *s)
{
    uint64_t h = 14695981039346656037ULL; /* FNV-1a, 64 bits */

    for (; *s != '\0'; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static bool
nameset_has(const struct nameset *set, const char *name)
{
    if (set->cap == 0)
        return false;
    for (size_t i = name_hash(name) & (set->cap - 1); set->slot[i] != NULL;
         i = (i + 1) & (set->cap - 1))
        if (strcmp(set->slot[i], name) == 0)
            return true;
    return false;
}

/* Grows set to cap slots (a power of two, at least twice the names it
 * holds). Returns 0, or -1 when out of memory. */
static int
nameset_grow(struct nameset *set, size_t cap)
{
    size_t i;
    const char **slot = calloc(cap, sizeof(*slot));

    if (slot == NULL)
        return -1;
    for (size_t k = 0; k < set->cap; k++) {
        if (set->slot[k] == NULL)
            continue;
        for (i = name_hash(set->slot[k]) & (cap - 1); slot[i] != NULL;
             i = (i + 1) & (cap - 1))
            ;
        slot[i] = set->slot[k];
    }
    free(set->slot);
    set->slot = slot;
    set->cap = cap;
    return 0;
}

/* Makes room for about n names at once, so that filling the set from a
 * list of known length rehashes nothing; at most 65,536 names are reserved
 * (a long list of non-objects names nothing). Returns 0, or -1 when out of
 * memory. */
static int
nameset_reserve(struct nameset *set, size_t n)
{
    size_t cap = 16;

    if (n > 65536)
        n = 65536;
    while (cap < 2 * (set->n + n))
        cap *= 2;
    return cap > set->cap ? nameset_grow(set, cap) : 0;
}

/* Adds name (borrowed) unless present. Returns 0, or -1 when out of
 * memory. */
static int
nameset_add(struct nameset *set, const char *name)
{
    size_t i;

    if (2 * (set->n + 1) > set->cap &&
        nameset_grow(set, set->cap ? 2 * set->cap : 16) != 0)
        return -1;
    for (i = name_hash(name) & (set->cap - 1); set->slot[i] != NULL;
         i = (i + 1) & (set->cap - 1))
        if (strcmp(set->slot[i], name) == 0)
            return 0;
    set->slot[i] = name;
    set->n++;
    return 0;
}

static void
nameset_release(struct nameset *set)
{
    free(set->slot);
    memset(set, 0, sizeof(*set));
}

/* One container of the pod and what the plan adds to it. */
struct ctr {
    json_t *c;     /* borrowed from the pod */
    char base[48]; /* "/spec/containers/3" */
    const char *name;
    bool init;
    bool sidecar; /* init container with restartPolicy: Always */
    int64_t gpus; /* over the counted resources */
    int64_t per_res[MUTATE_MAX_RESOURCES];
    /* What the plan adds to this container; plan_emit() writes it. */
    bool profile_add;    /* the profile's configMapRef, first in envFrom */
    char mem_new[2][32]; /* new memory limit, request; "" = unchanged */
    json_t *env_add;     /* env entries to append, owned */
    json_t *mount_add;   /* volumeMounts to append, owned */
    json_t *cap_add;     /* capabilities to add, owned */
};

struct plan {
    const json_t *pod;
    json_t *meta, *spec, *annotations;
    const struct settings *s;
    const struct decision *dec;
    struct mutate_result *res;
    struct ctr *ctr; /* n_ctr of them, owned */
    size_t n_ctr;
    size_t n_res; /* resources counted: min(n_gpu_resources, MAX) */
    int64_t pod_per_res[MUTATE_MAX_RESOURCES];
    int64_t sidecar_per_res[MUTATE_MAX_RESOURCES];
    /* What the plan adds to the pod; plan_emit() writes it. */
    json_t *vol_add;      /* volumes to append, owned */
    long shm_grow;        /* index in spec.volumes of the /dev/shm emptyDir
                           * whose sizeLimit becomes shm_size, or -1 */
    bool host_ipc_add;    /* spec.hostIPC: true */
    json_t *rc_container; /* the ring-check init container, owned, or NULL */
    char shm_volume[256];
    int64_t shm_size;
    bool shm_applied; /* we set the size (new volume or grown) */
    char run_volume[256];
    /* The ring check, decided before anything is planned. */
    const struct mutate_options *opt;
    bool rc_inject;      /* add the init container */
    int64_t rc_expect;   /* its GPUs: the pod's, less native sidecars' */
    struct jobmember mn; /* multi-node membership (MN_NONE: single-pod) */
    json_t *mn_env;      /* its extra env entries, owned */
    int64_t dra_gpus;    /* GPUs through DRA claims (see dra_apply), or 0 */
    json_t *dra_claims;  /* [{name}] of those claims, for the ring check */
    /* Names already in the pod, each set built once on first use so that
     * a unique-name search costs one lookup per candidate, not a rescan
     * of the pod: spec.volumes[*].name, and the names of containers, init
     * containers and ephemeral containers. */
    struct nameset vol_names, ctr_names;
    bool vol_names_built, ctr_names_built;
    char rc_name[64]; /* the injected ring check's container name */
};

/* ---- small helpers ---------------------------------------------------- */

/* A string for the patch. Everything the plan writes is valid UTF-8
 * already (constants, numbers, text from the policy or the decoded pod),
 * so jansson's check is skipped on this hot path. */
static json_t *
jstr(const char *s)
{
    return s != NULL ? json_string_nocheck(s) : NULL;
}

/* {k1: v1[, k2: v2]}; the values are consumed, even on failure. */
static json_t *
jobj(const char *k1, json_t *v1, const char *k2, json_t *v2)
{
    json_t *o = json_object();

    if (o == NULL || v1 == NULL || (k2 != NULL && v2 == NULL)) {
        json_decref(o);
        json_decref(v1);
        json_decref(v2);
        return NULL;
    }
    if (json_object_set_new_nocheck(o, k1, v1) != 0) {
        json_decref(o);
        json_decref(v2);
        return NULL;
    }
    if (k2 != NULL && json_object_set_new_nocheck(o, k2, v2) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* [v]; v is consumed, even on failure. */
static json_t *
jlist(json_t *v)
{
    json_t *a = json_array();

    if (a == NULL || v == NULL || json_array_append_new(a, v) != 0) {
        json_decref(a);
        if (a == NULL)
            json_decref(v);
        return NULL;
    }
    return a;
}

/*
 * Writes the strings given, up to a NULL, one after the other into out (n
 * > 0 bytes), NUL-terminated and cut to n - 1 bytes: what snprintf(out, n,
 * "%s%s...") writes, without the format interpreter (the plan writes a
 * few dozen paths and names per pod).
 */
static void __attribute__((sentinel)) join(char *out, size_t n, ...)
{
    size_t o = 0;
    const char *s;
    va_list ap;

    va_start(ap, n);
    while ((s = va_arg(ap, const char *)) != NULL) {
        size_t k = strlen(s);

        if (k > n - 1 - o)
            k = n - 1 - o;
        memcpy(out + o, s, k);
        o += k;
    }
    va_end(ap);
    out[o] = '\0';
}

/* v in decimal, as "%" PRId64 writes it, in t; returns where it starts. */
static const char *
i64_text(int64_t v, char t[24])
{
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t i = 23;

    t[i] = '\0';
    do {
        t[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0)
        t[--i] = '-';
    return t + i;
}

/* Appends s to the NUL-terminated text in buf (n bytes), truncating. */
static void
buf_append(char *buf, size_t n, const char *s)
{
    size_t len = strlen(buf);

    if (len + 1 < n)
        join(buf + len, n - len, s, (char *)NULL);
}

/* Adds a warning "ncclguard: ..." of at most TEXT_WARNING_MAX bytes, cut
 * on a UTF-8 boundary (base/text.h). */
static void __attribute__((format(printf, 2, 3)))
warn(struct mutate_result *res, const char *fmt, ...)
{
    char buf[TEXT_WARNING_MAX + 1];
    va_list ap;

    if (json_array_size(res->warnings) >= MUTATE_MAX_WARNINGS)
        return;
    va_start(ap, fmt);
    text_vformat(buf, sizeof(buf), "ncclguard: ", fmt, ap);
    va_end(ap);
    json_array_append_new(res->warnings, jstr(buf));
}

/* Adds a policy-made warning, prefixing and cutting it as ours. */
static void
warn_text(struct mutate_result *res, const char *text)
{
    const char *p = "ncclguard: ";

    if (strncmp(text, p, strlen(p)) == 0)
        text += strlen(p);
    warn(res, "%s", text);
}

static void
injected_add(struct mutate_result *res, const char *what)
{
    size_t i;
    json_t *v;

    json_array_foreach(res->injected, i, v)
    {
        if (strcmp(json_string_value(v), what) == 0)
            return;
    }
    json_array_append_new(res->injected, jstr(what));
}

static const char *
str_get(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

static json_t *
obj_get(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    return json_is_object(v) ? v : NULL;
}

static json_t *
arr_get(const json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);

    return json_is_array(v) ? v : NULL;
}

/* A list of additions to a container, created on first use (most
 * containers get none). NULL when out of memory; jansson's append then fails
 * cleanly. */
static json_t *
add_list(json_t **list)
{
    if (*list == NULL)
        *list = json_array();
    return *list;
}

/* The next component of path at *p (no slashes, not "."), with its
 * length in *len; NULL at the end. */
static const char *
path_next(const char **p, size_t *len)
{
    for (;;) {
        const char *s = *p, *e;

        while (*s == '/')
            s++;
        if (*s == '\0')
            return NULL;
        for (e = s; *e != '\0' && *e != '/'; e++)
            ;
        *p = e;
        if (e - s == 1 && s[0] == '.')
            continue;
        *len = (size_t)(e - s);
        return s;
    }
}

/*
 * Mount paths compare equal when they name the same place once cleaned
 * the way the kubelet and the runtime clean them (filepath.Clean):
 * repeated slashes are one (//dev/shm, /dev//shm), trailing slashes and
 * "." components are dropped. Otherwise a pod mounting //dev/shm got a
 * second /dev/shm mount, which the apiserver refuses ("must be unique").
 */
static bool
path_eq(const char *a, const char *b)
{
    const char *ca, *cb;
    size_t la = 0, lb = 0;

    if ((a[0] == '/') != (b[0] == '/'))
        return false;
    for (;;) {
        ca = path_next(&a, &la);
        cb = path_next(&b, &lb);
        if (ca == NULL || cb == NULL)
            return ca == cb;
        if (la != lb || memcmp(ca, cb, la) != 0)
            return false;
    }
}

/* The volume name of c's mount at path, in the pod or planned; or NULL. */
static const char *
mount_at(const struct ctr *c, const char *path)
{
    const json_t *lists[2] = {arr_get(c->c, "volumeMounts"), c->mount_add};

    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *m;

        json_array_foreach(lists[l], i, m)
        {
            const char *mp = str_get(m, "mountPath");

            if (mp != NULL && path_eq(mp, path)) {
                const char *n = str_get(m, "name");

                return n != NULL ? n : "";
            }
        }
    }
    return NULL;
}

static bool
env_has(const struct ctr *c, const char *name)
{
    const json_t *lists[2] = {arr_get(c->c, "env"), c->env_add};

    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *e;

        json_array_foreach(lists[l], i, e)
        {
            const char *n = str_get(e, "name");

            if (n != NULL && strcmp(n, name) == 0)
                return true;
        }
    }
    return false;
}

static int
env_add(struct ctr *c, const char *name, const char *value)
{
    if (env_has(c, name))
        return 0;
    return json_array_append_new(
        add_list(&c->env_add), jobj("name", jstr(name), "value", jstr(value)));
}

static int
mount_add(struct ctr *c, const char *volume, const char *path, bool ro)
{
    json_t *m;

    if (mount_at(c, path) != NULL)
        return 0; /* never two mounts at one path */
    m = jobj("name", jstr(volume), "mountPath", jstr(path));
    if (m == NULL)
        return -1;
    if (ro && json_object_set_new_nocheck(m, "readOnly", json_true()) != 0) {
        json_decref(m);
        return -1;
    }
    return json_array_append_new(add_list(&c->mount_add), m);
}

/* Builds p->vol_names from spec.volumes, once. Returns 0, or -1 when out
 * of memory. */
static int
volume_names_build(struct plan *p)
{
    json_t *list;
    size_t i;
    json_t *v;

    if (p->vol_names_built)
        return 0;
    list = arr_get(p->spec, "volumes");
    if (nameset_reserve(&p->vol_names, json_array_size(list)) != 0)
        return -1;
    json_array_foreach(list, i, v)
    {
        /* (The view builds a volume that is not an object as null.) */
        const char *n = json_is_object(v) ? str_get(v, "name") : NULL;

        if (n != NULL && nameset_add(&p->vol_names, n) != 0)
            return -1;
    }
    p->vol_names_built = true;
    return 0;
}

/* Whether a volume of the pod, or one the plan adds (a handful), is called
 * name. Call volume_names_build() first. */
static bool
volume_name_taken(const struct plan *p, const char *name)
{
    size_t i;
    json_t *v;

    if (nameset_has(&p->vol_names, name))
        return true;
    json_array_foreach(p->vol_add, i, v)
    {
        const char *n = str_get(v, "name");

        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

static const json_t *
volume_find(const struct plan *p, const char *name)
{
    json_t *list;
    size_t i;
    json_t *v;

    list = arr_get(p->spec, "volumes");
    json_array_foreach(list, i, v)
    {
        const char *n = json_is_object(v) ? str_get(v, "name") : NULL;

        if (n != NULL && strcmp(n, name) == 0)
            return v;
    }
    return NULL;
}

/* Picks base, or base-2, base-3, ... that no volume uses yet. Kubernetes
 * refuses a pod whose volume names repeat (ValidateVolumes in
 * pkg/apis/core/validation/validation.go: "must be unique"). Each candidate
 * is one set lookup, so a pod holding a long run of the candidates costs
 * time linear in its size. */
static int
volume_name_unique(struct plan *p, const char *base, char *out, size_t n)
{
    if (volume_names_build(p) != 0)
        return -1;
    join(out, n, base, (char *)NULL);
    for (int i = 2; volume_name_taken(p, out); i++) {
        char t[24];

        if (i > 1000)
            return -1;
        join(out, n, base, "-", i64_text(i, t), (char *)NULL);
    }
    return 0;
}

/*
 * Whether c is a ring check this webhook injected: an init container named
 * ncclguard-ringcheck, or ncclguard-ringcheck-N (the name taken when the
 * pod already had a container called ncclguard-ringcheck) whose first
 * argument is the one ringcheck_args() always writes first. A later review
 * of the same pod (reinvocation) then finds its check and adds no other.
 */
static bool
ctr_is_ringcheck(const struct ctr *c)
{
    const size_t n = strlen(RINGCHECK_NAME);
    const json_t *arg0 = json_array_get(arr_get(c->c, "args"), 0);
    const char *rest;

    if (!c->init || strncmp(c->name, RINGCHECK_NAME, n) != 0)
        return false;
    rest = c->name + n;
    if (*rest == '\0')
        return true;
    if (*rest != '-' || rest[1] < '1' || rest[1] > '9')
        return false;
    for (rest++; *rest != '\0'; rest++)
        if (*rest < '0' || *rest > '9')
            return false;
    return json_is_string(arg0) &&
           strcmp(json_string_value(arg0), RINGCHECK_FIRST_ARG) == 0;
}

/* Builds p->ctr_names, once: every container name of the pod, ephemeral
 * containers included, since Kubernetes wants them all distinct
 * (validateContainers / validateInitContainers in
 * pkg/apis/core/validation/validation.go check one set of names across
 * containers, init containers and ephemeral containers). */
static int
ctr_names_build(struct plan *p)
{
    json_t *list;
    size_t i;
    json_t *c;

    if (p->ctr_names_built)
        return 0;
    for (size_t k = 0; k < p->n_ctr; k++)
        if (nameset_add(&p->ctr_names, p->ctr[k].name) != 0)
            return -1;
    list = arr_get(p->spec, "ephemeralContainers");
    json_array_foreach(list, i, c)
    {
        const char *n = str_get(c, "name");

        if (n != NULL && nameset_add(&p->ctr_names, n) != 0)
            return -1;
    }
    p->ctr_names_built = true;
    return 0;
}

/* Parses a Kubernetes quantity held as a JSON string or number. */
static int
quantity_of(const json_t *v, struct quantity *q)
{
    char buf[64];
    const char *s;
    size_t len;

    if (json_is_string(v)) {
        s = json_string_value(v);
        len = json_string_length(v);
    } else if (json_is_integer(v)) {
        len = (size_t)snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT,
                               json_integer_value(v));
        s = buf;
    } else if (json_is_real(v)) {
        int k = snprintf(buf, sizeof(buf), "%.17g", json_real_value(v));

        if (k < 0 || (size_t)k >= sizeof(buf))
            return -1;
        len = (size_t)k;
        s = buf;
    } else {
        return -1;
    }
    return quantity_parse(s, len, q, NULL);
}

static void
size_format(int64_t bytes, char *buf, size_t n)
{
    quantity_format_binary(bytes, buf, n);
}

/*
 * One request as the apiserver sees it after defaulting, in milli-units:
 * requests[name], else limits[name] (a missing request defaults to the
 * limit), of res (a container's or the pod's resources). Returns -1 when
 * neither is set or the value is not a quantity.
 */
static int64_t
request_milli(const json_t *res, const char *name)
{
    const json_t *v = json_object_get(obj_get(res, "requests"), name);
    struct quantity q;

    if (v == NULL)
        v = json_object_get(obj_get(res, "limits"), name);
    if (v == NULL || quantity_of(v, &q) != 0 || q.negative)
        return -1;
    return q.milli;
}

static void
milli_format(const char *name, int64_t milli, char *buf, size_t n)
{
    char t[24];

    if (strcmp(name, "memory") == 0)
        size_format(milli / 1000, buf, n);
    else
        join(buf, n, i64_text(milli, t), "m", (char *)NULL);
}

/* ---- GPU count -------------------------------------------------------- */

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
static int
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
                warn(p->res,
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

static int64_t
gpus_total(const struct plan *p)
{
    int64_t t = 0;

    for (size_t r = 0; r < p->n_res; r++)
        t += p->pod_per_res[r];
    return t;
}

static bool
names_equal(const struct settings *a, const struct settings *b)
{
    if (a->n_gpu_resources != b->n_gpu_resources)
        return false;
    for (size_t i = 0; i < a->n_gpu_resources; i++)
        if (strcmp(a->gpu_resources[i], b->gpu_resources[i]) != 0)
            return false;
    return true;
}

/* ---- the plan --------------------------------------------------------- */

static int
ctrs_collect(struct plan *p)
{
    static const char *const keys[2] = {"containers", "initContainers"};
    size_t total = json_array_size(arr_get(p->spec, keys[0])) +
                   json_array_size(arr_get(p->spec, keys[1]));

    if (total > MUTATE_MAX_CONTAINERS) {
        snprintf(p->res->reason, sizeof(p->res->reason),
                 "pod has more than %d containers", MUTATE_MAX_CONTAINERS);
        return -1;
    }
    if (total == 0)
        return 0;
    p->ctr = calloc(total, sizeof(*p->ctr));
    if (p->ctr == NULL)
        return -1;
    for (int k = 0; k < 2; k++) {
        json_t *list;
        size_t i;
        json_t *c;

        list = arr_get(p->spec, keys[k]);
        json_array_foreach(list, i, c)
        {
            struct ctr *t;
            char num[24];

            if (!json_is_object(c)) {
                snprintf(p->res->reason, sizeof(p->res->reason),
                         "spec.%s[%zu] is not an object", keys[k], i);
                return -1;
            }
            t = &p->ctr[p->n_ctr++];
            t->c = c;
            join(t->base, sizeof(t->base), "/spec/", keys[k], "/",
                 i64_text((int64_t)i, num), (char *)NULL);
            t->name = str_get(c, "name") ? str_get(c, "name") : "";
            t->init = k == 1;
            t->sidecar = t->init && str_get(c, "restartPolicy") != NULL &&
                         strcmp(str_get(c, "restartPolicy"), "Always") == 0;
        }
    }
    return 0;
}

static void
ctrs_release(struct plan *p)
{
    for (size_t i = 0; i < p->n_ctr; i++) {
        json_decref(p->ctr[i].env_add);
        json_decref(p->ctr[i].mount_add);
        json_decref(p->ctr[i].cap_add);
    }
    free(p->ctr);
    nameset_release(&p->vol_names);
    nameset_release(&p->ctr_names);
    json_decref(p->vol_add);
    json_decref(p->rc_container);
    json_decref(p->mn_env);
    json_decref(p->dra_claims);
}

static json_t *
profile_ref(const struct settings *s)
{
    return jobj("configMapRef",
                jobj("name", jstr(s->profile.name), "optional",
                     json_boolean(s->profile.optional)),
                NULL, NULL);
}

static bool
profile_present(const json_t *c, const char *name)
{
    json_t *list;
    size_t i;
    json_t *e;

    list = arr_get(c, "envFrom");
    json_array_foreach(list, i, e)
    {
        const char *n = str_get(obj_get(e, "configMapRef"), "name");

        if (n != NULL && strcmp(n, name) == 0)
            return true;
    }
    return false;
}

/* envFrom: the profile first, so that the user's own sources win. */
static void
plan_profile(struct plan *p)
{
    const struct settings *s = p->s;

    if (!s->profile.enabled || s->profile.name == NULL ||
        s->profile.name[0] == '\0')
        return;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (c->gpus == 0 || profile_present(c->c, s->profile.name))
            continue;
        c->profile_add = true;
        injected_add(p->res, "envFrom");
    }
}

static int64_t
shm_size_compute(const struct plan *p, int64_t gpus)
{
    const struct settings *s = p->s;
    int64_t size;

    if (p->dec->shm_override >= 0)
        return p->dec->shm_override;
    if (s->shm.per_gpu > 0 && gpus > INT64_MAX / s->shm.per_gpu)
        size = INT64_MAX;
    else
        size = s->shm.per_gpu * gpus;
    if (size < s->shm.min)
        size = s->shm.min;
    if (s->shm.max > 0 && size > s->shm.max)
        size = s->shm.max;
    return size;
}

/* Looks at an existing /dev/shm volume: grow or warn when it is smaller. */
static void
shm_existing(struct plan *p, const char *vname)
{
    const json_t *vol = volume_find(p, vname);
    const json_t *ed;
    const json_t *lim;
    struct quantity q;
    char want[32], have[32];
    size_t idx = 0;

    if (vol == NULL) {
        warn(p->res,
             "/dev/shm mounts volume \"%.40s\", which the pod lacks; "
             "add it to spec.volumes",
             vname);
        return;
    }
    ed = json_object_get(vol, "emptyDir");
    if (!json_is_object(ed))
        return; /* hostPath or another source: the user's choice */
    if (str_get(ed, "medium") == NULL ||
        strcmp(str_get(ed, "medium"), "Memory") != 0) {
        warn(p->res,
             "/dev/shm volume \"%.40s\" is on disk; kept: set its "
             "emptyDir medium: Memory",
             vname);
        return;
    }
    lim = json_object_get(ed, "sizeLimit");
    if (lim == NULL || json_is_null(lim))
        return; /* bounded by the pod's memory limit only */
    if (quantity_of(lim, &q) != 0 || q.value >= p->shm_size)
        return;
    size_format(p->shm_size, want, sizeof(want));
    size_format(q.value, have, sizeof(have));
    if (p->s->shm.existing == SHM_EXISTING_GROW) {
        json_t *list;
        size_t i;
        json_t *v;

        list = arr_get(p->spec, "volumes");
        json_array_foreach(list, i, v)
        {
            if (v == vol)
                idx = i;
        }
        p->shm_grow = (long)idx;
        p->shm_applied = true;
        injected_add(p->res, "shm-grow");
        return;
    }
    warn(p->res,
         "/dev/shm \"%.30s\" is %s, below the %s for %" PRId64
         " GPUs; kept: drop it or set shm.existing: grow",
         vname, have, want, p->res->gpus);
}

static int
plan_shm(struct plan *p)
{
    const char *existing = NULL;

    for (size_t i = 0; i < p->n_ctr && existing == NULL; i++)
        existing = mount_at(&p->ctr[i], SHM_PATH);
    if (!p->s->shm.enabled) {
        /* Nothing to add, but the ring check still shares the pod's own
         * /dev/shm, if it has one. */
        if (existing != NULL)
            join(p->shm_volume, sizeof(p->shm_volume), existing, (char *)NULL);
        return 0;
    }
    p->shm_size = shm_size_compute(p, p->res->gpus);
    if (existing != NULL) {
        join(p->shm_volume, sizeof(p->shm_volume), existing, (char *)NULL);
        shm_existing(p, existing);
    } else {
        char size[32];
        json_t *v;

        if (volume_name_unique(p, "ncclguard-shm", p->shm_volume,
                               sizeof(p->shm_volume)) != 0)
            return -1;
        size_format(p->shm_size, size, sizeof(size));
        v = jobj("name", jstr(p->shm_volume), "emptyDir",
                 jobj("medium", jstr("Memory"), "sizeLimit", jstr(size)));
        if (v == NULL || json_array_append_new(p->vol_add, v) != 0)
            return -1;
        p->shm_applied = true;
        injected_add(p->res, "shm");
    }
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        size_t before = json_array_size(c->mount_add);

        if (c->gpus == 0)
            continue;
        if (mount_add(c, p->shm_volume, SHM_PATH, false) != 0)
            return -1;
        if (existing != NULL && json_array_size(c->mount_add) > before)
            injected_add(p->res, "shm-mount");
    }
    return 0;
}

/* The resources kinds memory_raise() works on, indexing ctr.mem_new. */
static const char *const mem_kinds[2] = {"limits", "requests"};

/* Plans delta more bytes for the memory quantity at
 * base/resources/<mem_kinds[k]>/memory, where it is set. */
static void
memory_raise(struct plan *p, struct ctr *c, int k, int64_t delta)
{
    const json_t *v = json_object_get(
        obj_get(obj_get(c->c, "resources"), mem_kinds[k]), "memory");
    struct quantity q;

    if (v == NULL || json_is_null(v) || quantity_of(v, &q) != 0)
        return; /* only where it is set */
    if (q.value > INT64_MAX - delta)
        return;
    size_format(q.value + delta, c->mem_new[k], sizeof(c->mem_new[k]));
    injected_add(p->res, "memory");
}

/*
 * shm.memoryLimit: raise, for a container whose memory limit (*lim) the
 * shm size exceeds: the limit grows by the shm size, so that the workload
 * keeps its own memory beside a full /dev/shm. The request stays, unless
 * it equals the limit: then it grows too, so that a Guaranteed pod stays
 * Guaranteed (a request is never needed above its old value otherwise).
 */
static void
memory_raise_limit(struct plan *p, struct ctr *c, const struct quantity *lim)
{
    const json_t *rv = json_object_get(
        obj_get(obj_get(c->c, "resources"), "requests"), "memory");
    struct quantity rq;

    memory_raise(p, c, 0, p->shm_size);
    if (rv != NULL && !json_is_null(rv) && quantity_of(rv, &rq) == 0 &&
        rq.milli == lim->milli)
        memory_raise(p, c, 1, p->shm_size);
}

/* tmpfs pages count against the memory limit of the container writing
 * them: warn, or raise the limit where the shm size exceeds it. */
static void
plan_memory(struct plan *p)
{
    char shm[32], lim[32];
    const bool pod_memory =
        request_milli(obj_get(p->spec, "resources"), "memory") >= 0;

    if (!p->shm_applied)
        return;
    size_format(p->shm_size, shm, sizeof(shm));
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        const json_t *v;
        struct quantity q;

        if (c->gpus == 0)
            continue;
        if (p->s->shm.memory_limit == SHM_MEMLIMIT_RAISE && pod_memory &&
            request_milli(obj_get(c->c, "resources"), "memory") >= 0) {
            /* Raising a container's memory could push the aggregate of
             * requests past spec.resources.requests.memory, or its limit
             * past spec.resources.limits.memory, both of which the
             * apiserver refuses (validatePodResourceConsistency). */
            warn(p->res,
                 "/dev/shm %s not added to \"%.20s\"'s memory: the pod sets "
                 "spec.resources memory; make sure it covers /dev/shm",
                 shm, c->name);
            continue;
        }
        v = json_object_get(obj_get(obj_get(c->c, "resources"), "limits"),
                            "memory");
        if (v == NULL || quantity_of(v, &q) != 0 || p->shm_size <= q.value)
            continue;
        if (p->s->shm.memory_limit == SHM_MEMLIMIT_RAISE) {
            memory_raise_limit(p, c, &q);
            continue;
        }
        size_format(q.value, lim, sizeof(lim));
        warn(p->res,
             "/dev/shm %s exceeds the %s memory limit of \"%.20s\"; "
             "raise it or set shm.memoryLimit: raise",
             shm, lim, c->name);
    }
}

static bool
cap_eq(const char *a, const char *b)
{
    if (strncasecmp(a, "CAP_", 4) == 0)
        a += 4;
    if (strncasecmp(b, "CAP_", 4) == 0)
        b += 4;
    return strcasecmp(a, b) == 0;
}

static bool
cap_has(const struct ctr *c, const char *cap)
{
    const json_t *lists[2] = {
        arr_get(obj_get(obj_get(c->c, "securityContext"), "capabilities"),
                "add"),
        c->cap_add};

    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *v;

        json_array_foreach(lists[l], i, v)
        {
            if (json_is_string(v) && cap_eq(json_string_value(v), cap))
                return true;
        }
    }
    return false;
}

/* Whether a container runs as non-root: runAsNonRoot, or a runAsUser other
 * than 0, at container level, else at pod level. */
static bool
runs_non_root(const struct plan *p, const struct ctr *c)
{
    const json_t *levels[2] = {obj_get(c->c, "securityContext"),
                               obj_get(p->spec, "securityContext")};
    bool have_nonroot = false, nonroot = false, have_user = false;
    json_int_t user = 0;

    for (int l = 0; l < 2; l++) {
        const json_t *sc = levels[l];
        const json_t *v;

        if (sc == NULL)
            continue;
        v = json_object_get(sc, "runAsNonRoot");
        if (!have_nonroot && json_is_boolean(v)) {
            have_nonroot = true;
            nonroot = json_is_true(v);
        }
        v = json_object_get(sc, "runAsUser");
        if (!have_user && json_is_integer(v)) {
            have_user = true;
            user = json_integer_value(v);
        }
    }
    return nonroot || (have_user && user != 0);
}

static int
plan_ipc(struct plan *p)
{
    const struct settings *s = p->s;

    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (c->gpus == 0)
            continue;
        for (size_t k = 0; k < s->ipc.n_capabilities; k++) {
            const char *cap = s->ipc.capabilities[k];

            if (cap_has(c, cap))
                continue;
            if (json_array_append_new(add_list(&c->cap_add), jstr(cap)) != 0)
                return -1;
            injected_add(p->res, "capabilities");
            if (cap_eq(cap, "IPC_LOCK") && s->ipc.warn_non_root &&
                runs_non_root(p, c))
                warn(p->res,
                     "IPC_LOCK in container \"%.30s\" has no effect: it "
                     "runs as non-root; run it as root or drop IPC_LOCK",
                     c->name);
        }
    }
    if (s->ipc.host_ipc && !json_is_true(json_object_get(p->spec, "hostIPC"))) {
        p->host_ipc_add = true;
        injected_add(p->res, "hostIPC");
    }
    return 0;
}

static bool ringcheck_present(const struct plan *p);

static int
plan_env(struct plan *p)
{
    const struct settings *s = p->s;
    bool fallback = (p->rc_inject || ringcheck_present(p)) &&
                    s->ringcheck.on_failure == RINGCHECK_FALLBACK;

    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];
        size_t before = json_array_size(c->env_add);

        if (c->gpus == 0)
            continue;
        for (size_t k = 0; k < s->n_extra_env; k++)
            if (env_add(c, s->extra_env[k].name, s->extra_env[k].value) != 0)
                return -1;
        if (p->dec->debug) {
            if (s->debug.level != NULL && s->debug.level[0] != '\0' &&
                env_add(c, "NCCL_DEBUG", s->debug.level) != 0)
                return -1;
            if (s->debug.subsys != NULL && s->debug.subsys[0] != '\0' &&
                env_add(c, "NCCL_DEBUG_SUBSYS", s->debug.subsys) != 0)
                return -1;
        }
        if (fallback && env_add(c, "NCCL_CONF_FILE", RUN_CONF) != 0)
            return -1;
        if (json_array_size(c->env_add) > before)
            injected_add(p->res, "env");
    }
    return 0;
}

/* ---- the watchdog opt-in ------------------------------------------------ */

/* An env entry whose value comes from the Downward API (fieldRef). */
static int
env_add_field(struct ctr *c, const char *name, const char *field)
{
    json_t *e;

    if (env_has(c, name))
        return 0;
    e = json_pack("{s:s,s:{s:{s:s}}}", "name", name, "valueFrom", "fieldRef",
                  "fieldPath", field);
    return e ? json_array_append_new(add_list(&c->env_add), e) : -1;
}

/*
 * What lets the agent confirm a hang and name its culprit
 * (docs/watchdog.md): NCCL's RAS (2.24+) listening on the pod's own IP,
 * where the agent connects from the node, instead of the default
 * localhost:28028 that only the pod reaches (NCCL_RAS_ADDR, NCCL's
 * environment variables; the pod IP from the Downward API, status.podIP);
 * and, when the watchdog has a folder of its own in the pod (the
 * checkpoint file's), PyTorch's flight recorder: a trace buffer
 * (TORCH_NCCL_TRACE_BUFFER_SIZE), the FIFO per rank that an outside
 * process writes to ask for a dump (TORCH_NCCL_DEBUG_INFO_PIPE_FILE, the
 * DumpPipe of ProcessGroupNCCL) and the dump's file stem
 * (TORCH_NCCL_DEBUG_INFO_TEMP_FILE), both on that volume. A variable the
 * pod sets itself wins: env_add() never replaces one.
 */
static int
plan_watchdog_confirm(struct ctr *c, const char *dir)
{
    char path[WD_FILE_MAX + 64];
    if (!env_has(c, "NCCL_RAS_ADDR") &&
        (env_add_field(c, "NCCLGUARD_POD_IP", "status.podIP") != 0 ||
         env_add(c, "NCCL_RAS_ADDR", "$(NCCLGUARD_POD_IP):28028") != 0))
        return -1;
    if (dir[0] == '\0' || strcmp(dir, "/") == 0)
        return 0; /* no volume of the pod's to dump on */
    if (env_add(c, "TORCH_NCCL_TRACE_BUFFER_SIZE", "2000") != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/nccl_trace_pipe_", dir);
    if (env_add(c, "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", path) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/nccl_trace_rank_", dir);
    return env_add(c, "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", path);
}

/*
 * NCCLGUARD_WATCHDOG for each GPU container when the policy enables the
 * watchdog, written with the agent's own writer (contract/wdspec.c), with
 * the pod's termination grace as the SIGTERM -> SIGKILL delay; the pod's
 * name, namespace and UID through the Downward API, for the agent's
 * Events; and, when a checkpoint file is configured, an emptyDir mounted
 * at its folder so that the agent can write it and the job can poll it.
 */
static int
plan_watchdog(struct plan *p)
{
    const struct settings *s = p->s;
    const json_t *tg =
        json_object_get(p->spec, "terminationGracePeriodSeconds");
    struct wd_spec w;
    char value[512], dir[WD_FILE_MAX + 1] = "", vname[256] = "";
    const char *file = s->watchdog.checkpoint_file;
    bool any = false;

    if (!s->watchdog.enabled)
        return 0;
    wd_spec_defaults(&w);
    w.period_ms = s->watchdog.period_ms;
    w.idle_periods = s->watchdog.idle_periods;
    w.min_cpu_milli = s->watchdog.min_cpu_milli;
    w.action = s->watchdog.restart ? WD_ACTION_RESTART : WD_ACTION_REPORT;
    w.checkpoint_signal = s->watchdog.checkpoint_signal;
    w.grace_ms = s->watchdog.grace_ms;
    if (json_is_integer(tg) && json_integer_value(tg) >= 0)
        w.term_ms = json_integer_value(tg) > WD_TERM_MAX_MS / 1000
                        ? WD_TERM_MAX_MS
                        : json_integer_value(tg) * 1000;
    if (file != NULL && file[0] != '\0') {
        char *slash;

        snprintf(w.checkpoint_file, sizeof(w.checkpoint_file), "%s", file);
        snprintf(dir, sizeof(dir), "%s", file);
        slash = strrchr(dir, '/');
        if (slash == dir)
            slash[1] = '\0'; /* a file right under / */
        else if (slash != NULL)
            *slash = '\0';
    }
    if (wd_spec_format(&w, value, sizeof(value)) != 0)
        return -1;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (c->gpus == 0 || (c->init && !c->sidecar))
            continue;
        if (env_add(c, WD_ENV_NAME, value) != 0 ||
            env_add_field(c, "NCCLGUARD_POD_NAME", "metadata.name") != 0 ||
            env_add_field(c, "NCCLGUARD_POD_NAMESPACE", "metadata.namespace") !=
                0 ||
            env_add_field(c, "NCCLGUARD_POD_UID", "metadata.uid") != 0 ||
            plan_watchdog_confirm(c, dir) != 0)
            return -1;
        any = true;
        if (w.checkpoint_file[0] == '\0' || strcmp(dir, "/") == 0 ||
            mount_at(c, dir) != NULL)
            continue; /* the pod already mounts something there */
        if (vname[0] == '\0') {
            json_t *v;

            if (volume_name_unique(p, "ncclguard-watchdog", vname,
                                   sizeof(vname)) != 0)
                return -1;
            v = jobj("name", jstr(vname), "emptyDir", json_object());
            if (v == NULL || json_array_append_new(p->vol_add, v) != 0)
                return -1;
        }
        if (mount_add(c, vname, dir, false) != 0)
            return -1;
    }
    if (any)
        injected_add(p->res, "watchdog");
    return 0;
}

static bool
ringcheck_present(const struct plan *p)
{
    for (size_t i = 0; i < p->n_ctr; i++)
        if (ctr_is_ringcheck(&p->ctr[i]))
            return true;
    return false;
}

/* The container whose env and envFrom the check runs under: the first
 * GPU app container, else the first GPU init container. */
static const struct ctr *
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
    const struct ctr *g = ringcheck_model(p);
    char why[200] = "";
    int rc;

    memset(&p->mn, 0, sizeof(p->mn));
    if (p->s->ringcheck.multi_node == RINGCHECK_MULTINODE_OFF) {
        snprintf(p->mn.why, sizeof(p->mn.why), "ringCheck.multiNode is off");
        return 0;
    }
    jobmember_detect(p->pod, g != NULL ? g->c : NULL,
                     p->opt != NULL ? p->opt->workload : NULL, p->s, &p->mn);
    if (p->mn.kind == MN_NONE)
        return 0;
    p->mn_env = json_array();
    if (p->mn_env == NULL)
        return -1;
    rc = jobmember_env(&p->mn, p->pod, p->s, p->mn_env, why, sizeof(why));
    if (rc < 0)
        return -1;
    if (rc > 0) {
        warn(p->res, "%.40s pod checks alone: %.150s", p->mn.operator_name,
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
        warn(p->res,
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

static int ringcheck_env(const struct plan *p, json_t *rc);

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
    json_t *probe = json_object();
    size_t bytes, have = p->opt != NULL ? p->opt->object_bytes : 0;

    if (probe == NULL || ringcheck_env(p, probe) != 0) {
        json_decref(probe);
        return -1;
    }
    bytes = json_dumpb(probe, NULL, 0, JSON_COMPACT) + RINGCHECK_FIXED_BYTES +
            strlen(p->s->ringcheck.image);
    json_decref(probe);
    if (bytes > MUTATE_RINGCHECK_MAX_BYTES) {
        warn(p->res,
             "ring check not added: with the workload's NCCL and CUDA env "
             "it would add %zu KiB, more than %u KiB",
             bytes / 1024, MUTATE_RINGCHECK_MAX_BYTES / 1024);
        rc_note(p, "left out: it would add %zu KiB to the pod", bytes / 1024);
        return 0;
    }
    if (have > 0 && have + bytes > MUTATE_OBJECT_MAX_BYTES) {
        warn(p->res,
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
static int
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
        warn(p->res, "ring check not added: no image; set ringCheck.image "
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
        warn(p->res,
             "all %" PRId64 " GPUs are in native sidecars (restartPolicy: "
             "Always), which the ring check cannot use; not added",
             side);
        rc_note(p, "left out: the GPUs are all in native sidecars");
        return 0;
    }
    if (p->rc_expect > RINGCHECK_MAX_GPUS) {
        warn(p->res,
             "%" PRId64 " GPUs is more than the ring check's %d; not added "
             "(check the GPU count, or turn ringCheck off in a rule)",
             p->rc_expect, RINGCHECK_MAX_GPUS);
        rc_note(p, "left out: %" PRId64 " GPUs, more than %d", p->rc_expect,
                RINGCHECK_MAX_GPUS);
        return 0;
    }
    if ((size_t)s->ringcheck.bandwidth_bytes > RINGCHECK_MAX_BW_BYTES ||
        s->ringcheck.min_busbw_gbps > RINGCHECK_MAX_BUSBW_GBPS ||
        s->ringcheck.min_net_busbw_gbps > RINGCHECK_MAX_BUSBW_GBPS) {
        warn(p->res, "ringCheck.bandwidthBytes or minBusBandwidthGBps is "
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

/* ---- the check's env: least privilege -------------------------------- */

/*
 * Whether a variable of the workload container is one the check may need
 * by its name: NCCL's and CUDA's own (NCCL_*, CUDA_*), PyTorch's NCCL
 * settings (TORCH_NCCL_*), and the job operators' membership variables of
 * the shared table (contract/multinode_env.h) the binary reads. Nothing
 * else of the workload's env goes into the check (tokens, credentials,
 * application settings).
 */
static bool
rcenv_name_wanted(const char *name)
{
    static const char *const prefixes[] = {"NCCL_", "CUDA_", "TORCH_NCCL_"};

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
            return true;
    for (size_t i = 0; i < MN_VARS_COUNT; i++) {
        const char *const v[4] = {MN_VARS[i].leader, MN_VARS[i].port,
                                  MN_VARS[i].nnodes, MN_VARS[i].rank};

        for (int k = 0; k < 4; k++)
            if (v[k] != NULL && strcmp(name, v[k]) == 0)
                return true;
    }
    /* training-operator v1 sets these next to WORLD_SIZE (docs/mutate.md,
     * multi-node): the binary prefers them. */
    return strcmp(name, "PET_NNODES") == 0 ||
           strcmp(name, "PET_NODE_RANK") == 0;
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
rcenv_source_of(const json_t *e)
{
    const json_t *from = json_object_get(e, "valueFrom");

    if (from == NULL || json_is_null(from))
        return RCENV_VALUE;
    if (!json_is_object(from) || json_object_size(from) != 1)
        return RCENV_NEVER;
    if (obj_get(from, "fieldRef") != NULL)
        return RCENV_FIELD;
    if (obj_get(from, "configMapKeyRef") != NULL)
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

/*
 * Marks which entries of the workload's env (n of them, in list order)
 * the check copies: a Downward API field, an entry whose name
 * rcenv_name_wanted() accepts, or one that a copied entry refers to as
 * $(NAME) (the kubelet expands only
 * names defined earlier, so one pass from the end finds every entry
 * needed), and only with a plain value, a fieldRef or a configMapKeyRef.
 * A secretKeyRef is never copied, whatever its name. Fills keep[];
 * returns 0, or -1 when out of memory.
 */
static int
rcenv_select(json_t *const *ent, size_t n, bool *keep)
{
    struct nameset refs = {0};
    json_t *pool = json_array();
    int rc = -1;

    if (pool == NULL)
        return -1;
    for (size_t i = n; i-- > 0;) {
        const char *name = str_get(ent[i], "name");
        enum rcenv_source src = rcenv_source_of(ent[i]);

        keep[i] = name != NULL && src != RCENV_NEVER &&
                  (src == RCENV_FIELD || rcenv_name_wanted(name) ||
                   nameset_has(&refs, name));
        if (keep[i] && src == RCENV_VALUE &&
            rcenv_refs_add(&refs, pool, str_get(ent[i], "value")) != 0)
            goto done;
    }
    rc = 0;
done:
    nameset_release(&refs);
    json_decref(pool);
    return rc;
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
ringcheck_profile_expected(const struct plan *p, json_t *env)
{
    const struct settings *s = p->s;

    if (!s->profile.enabled || s->profile.name == NULL ||
        s->profile.name[0] == '\0')
        return 0;
    return json_array_append_new(env, jobj("name", jstr(PROFILE_EXPECTED_ENV),
                                           "value", jstr(s->profile.name)));
}

/* The env and envFrom the check runs under: those of the first GPU
 * container that rcenv_select() and rcenv_from_wanted() let through, with
 * what this plan adds, without NCCL_CONF_FILE (the check writes that file;
 * it does not read it). */
static int
ringcheck_env(const struct plan *p, json_t *rc)
{
    json_t *list;
    const struct ctr *g = ringcheck_model(p);
    json_t *env = NULL, *from = NULL;
    json_t **all = NULL;
    bool *keep = NULL;
    size_t i;
    json_t *e;

    if (g == NULL)
        return 0;
    env = json_array();
    from = json_array();
    if (env == NULL || from == NULL)
        goto fail;
    if (p->s->profile.enabled && p->s->profile.name != NULL &&
        p->s->profile.name[0] != '\0' &&
        !profile_present(g->c, p->s->profile.name))
        if (json_array_append_new(from, profile_ref(p->s)) != 0)
            goto fail;
    /* The pod is only read while the patch lives, so the check's env
     * shares the container's entries. */
    list = arr_get(g->c, "envFrom");
    json_array_foreach(list, i, e)
    {
        if (rcenv_from_wanted(e) && json_array_append(from, e) != 0)
            goto fail;
    }
    /* The workload's env and the plan's additions, as one list in order,
     * so that a $(NAME) in an added entry can keep the entry it needs. */
    const json_t *lists[2] = {arr_get(g->c, "env"), g->env_add};
    size_t n_all = json_array_size(lists[0]) + json_array_size(lists[1]), k = 0;

    all = calloc(n_all ? n_all : 1, sizeof(*all));
    keep = calloc(n_all ? n_all : 1, sizeof(*keep));
    if (all == NULL || keep == NULL)
        goto fail;
    for (int l = 0; l < 2; l++)
        json_array_foreach(lists[l], i, e) all[k++] = e;
    if (rcenv_select(all, n_all, keep) != 0)
        goto fail;
    for (k = 0; k < n_all; k++) {
        const char *n = str_get(all[k], "name");

        if (!keep[k])
            continue;
        if (n != NULL && strcmp(n, "NCCL_CONF_FILE") == 0)
            continue;
        /* The multi-node variables are ours: a workload's own POD_IP or
         * NCCLGUARD_* must not shadow them. */
        if (n != NULL && p->mn_env != NULL && jobmember_owns(n))
            continue;
        if (json_array_append(env, all[k]) != 0)
            goto fail;
    }
    /* After the copied entries, so that $(VAR) references in them
     * resolve (the kubelet expands only variables defined earlier). */
    json_array_foreach(p->mn_env, i, e)
    {
        if (json_array_append(env, e) != 0)
            goto fail;
    }
    if (ringcheck_profile_expected(p, env) != 0)
        goto fail;
    if (json_array_size(from) > 0 &&
        json_object_set_nocheck(rc, "envFrom", from) != 0)
        goto fail;
    if (json_array_size(env) > 0 &&
        json_object_set_nocheck(rc, "env", env) != 0)
        goto fail;
    json_decref(env);
    json_decref(from);
    free(all);
    free(keep);
    return 0;
fail:
    json_decref(env);
    json_decref(from);
    free(all);
    free(keep);
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
 * The check's arguments, from a table in the order it is given them. The
 * first is always RINGCHECK_FIRST_ARG: ctr_is_ringcheck() recognises a
 * check of ours by it on a later review. Returns the array, or NULL when
 * out of memory.
 */
static json_t *
ringcheck_args(const struct plan *p)
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
    json_t *args = json_array();

    if (args == NULL)
        return NULL;
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

    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].value == NULL)
            continue;
        size_t fl = strlen(table[i].flag);

        /* A flag ending in '=' takes its value in the same argument. */
        if (table[i].flag[fl - 1] == '=') {
            char one[80];

            join(one, sizeof(one), table[i].flag, table[i].value, (char *)NULL);
            if (json_array_append_new(args, jstr(one)) != 0) {
                json_decref(args);
                return NULL;
            }
            continue;
        }
        if (json_array_append_new(args, jstr(table[i].flag)) != 0 ||
            json_array_append_new(args, jstr(table[i].value)) != 0) {
            json_decref(args);
            return NULL;
        }
    }
    return args;
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
    if (pod_guaranteed(p) &&
        ((cpu != NULL && json_object_set_new_nocheck(lim, "cpu", jstr(cpu))) ||
         (mem != NULL &&
          json_object_set_new_nocheck(lim, "memory", jstr(mem)))))
        goto fail;
    if (!pod_guaranteed(p) && ringcheck_limits(p, lim) != 0)
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
 * The check's security context: no privilege escalation, no capabilities,
 * the runtime's seccomp profile, and non-root with a numeric user when
 * the pod requires non-root. Returns the object, or NULL when out of
 * memory.
 */
static json_t *
ringcheck_security(const struct plan *p)
{
    json_t *sc = jobj("allowPrivilegeEscalation", json_false(), "capabilities",
                      jobj("drop", jlist(jstr("ALL")), NULL, NULL));

    if (sc == NULL ||
        json_object_set_new_nocheck(
            sc, "seccompProfile",
            jobj("type", jstr("RuntimeDefault"), NULL, NULL)) != 0)
        goto fail;
    if (pod_requires_non_root(p)) {
        const json_t *psc = obj_get(p->spec, "securityContext");

        if (json_object_set_new_nocheck(sc, "runAsNonRoot", json_true()))
            goto fail;
        /* A numeric user, so the kubelet need not trust the image's. */
        if (json_object_get(psc, "runAsUser") == NULL &&
            json_object_set_new_nocheck(sc, "runAsUser", json_integer(65532)))
            goto fail;
    }
    return sc;
fail:
    json_decref(sc);
    return NULL;
}

/* The check's volumeMounts: the pod's /dev/shm, and the run folder its
 * fallback config is written to. NULL when out of memory. */
static json_t *
ringcheck_mounts(const struct plan *p, bool fallback)
{
    json_t *mounts = json_array();

    if (mounts == NULL)
        return NULL;
    if ((p->shm_volume[0] != '\0' &&
         json_array_append_new(mounts, jobj("name", jstr(p->shm_volume),
                                            "mountPath", jstr(SHM_PATH)))) ||
        (fallback &&
         json_array_append_new(mounts, jobj("name", jstr(p->run_volume),
                                            "mountPath", jstr(RUN_DIR))))) {
        json_decref(mounts);
        return NULL;
    }
    return mounts;
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
 * p->rc_container: a free name, the run volume of onFailure: fallback,
 * then the container from its parts. Runs after every other plan step,
 * since the check copies the env they give its model container. Returns
 * -1 on allocation failure or when no name is free (with a reason).
 */
static int
plan_ringcheck(struct plan *p)
{
    const struct settings *s = p->s;
    const bool fallback = s->ringcheck.on_failure == RINGCHECK_FALLBACK;
    json_t *rc, *mounts;

    if (!p->rc_inject)
        return 0;
    if (ringcheck_name(p) != 0)
        return -1;
    if (fallback && ringcheck_run_volume(p) != 0)
        return -1;
    rc = jobj("name", jstr(p->rc_name), "image", jstr(s->ringcheck.image));
    if (rc == NULL ||
        json_object_set_new_nocheck(rc, "args", ringcheck_args(p)) ||
        ringcheck_env(p, rc) != 0 ||
        json_object_set_new_nocheck(rc, "resources", ringcheck_resources(p)))
        goto fail;
    mounts = ringcheck_mounts(p, fallback);
    if (mounts == NULL)
        goto fail;
    if (json_array_size(mounts) == 0)
        json_decref(mounts);
    else if (json_object_set_new_nocheck(rc, "volumeMounts", mounts) != 0)
        goto fail;
    if (json_object_set_new_nocheck(rc, "terminationMessagePolicy",
                                    jstr("FallbackToLogsOnError")) ||
        json_object_set_new_nocheck(rc, "securityContext",
                                    ringcheck_security(p)))
        goto fail;
    p->rc_container = rc;
    injected_add(p->res, "ringcheck");
    if (p->mn.kind != MN_NONE)
        injected_add(p->res, "multinode");
    return 0;
fail:
    json_decref(rc);
    return -1;
}

/*
 * The op that sets member key of parent to a new value: "replace" where
 * the pod has that key already, whatever its value (null, a string where
 * an object belongs), else "add". patch_check() refuses an add onto an
 * existing key, so every emitter that writes a whole member asks here.
 * parent may be NULL (then "add": its own add makes it).
 */
static const char *
member_op(const json_t *parent, const char *key)
{
    return json_object_get(parent, key) != NULL ? "replace" : "add";
}

/* Emits a planned list of additions: the whole list in one op when the
 * pod has none (a replace when it has null or another non-list), else one
 * append per item. list is borrowed. */
static int
emit_list(struct plan *p, json_t *parent, const char *base, const char *key,
          json_t *list)
{
    char path[256];
    size_t i;
    json_t *v;

    if (json_array_size(list) == 0)
        return 0;
    /* The planned lists are never changed once emitted, so the patch
     * shares their values instead of copying them. */
    if (arr_get(parent, key) == NULL) {
        join(path, sizeof(path), base, "/", key, (char *)NULL);
        return patch_append(p->res->patch, member_op(parent, key), path,
                            json_incref(list));
    }
    join(path, sizeof(path), base, "/", key, "/-", (char *)NULL);
    json_array_foreach(list, i, v)
    {
        if (patch_append(p->res->patch, "add", path, json_incref(v)) != 0)
            return -1;
    }
    return 0;
}

static int
emit_caps(struct plan *p, struct ctr *c)
{
    json_t *sc = obj_get(c->c, "securityContext");
    json_t *caps = obj_get(sc, "capabilities");
    char path[160];

    if (json_array_size(c->cap_add) == 0)
        return 0;
    if (sc == NULL) {
        join(path, sizeof(path), c->base, "/securityContext", (char *)NULL);
        return patch_append(
            p->res->patch, member_op(c->c, "securityContext"), path,
            jobj("capabilities",
                 jobj("add", json_incref(c->cap_add), NULL, NULL), NULL, NULL));
    }
    if (caps == NULL) {
        join(path, sizeof(path), c->base, "/securityContext/capabilities",
             (char *)NULL);
        return patch_append(p->res->patch, member_op(sc, "capabilities"), path,
                            jobj("add", json_incref(c->cap_add), NULL, NULL));
    }
    join(path, sizeof(path), c->base, "/securityContext/capabilities",
         (char *)NULL);
    return emit_list(p, caps, path, "add", c->cap_add);
}

/* Records what was done in the pod's annotations and the audit record. */
static int
emit_annotations(struct plan *p)
{
    char mutated[256] = "", gpus[32], shm[32], t[24];
    size_t i;
    json_t *v;
    json_t *add = NULL;
    const char *key;

    json_array_foreach(p->res->injected, i, v)
    {
        if (mutated[0] != '\0')
            buf_append(mutated, sizeof(mutated), ",");
        buf_append(mutated, sizeof(mutated), json_string_value(v));
    }
    join(gpus, sizeof(gpus), i64_text(p->res->gpus, t), (char *)NULL);
    add = jobj(ANN_MUTATED, jstr(mutated), ANN_GPUS, jstr(gpus));
    if (add == NULL)
        return -1;
    /* The rule name was cut to fit: checked, not assumed, UTF-8. */
    if (json_object_set_new_nocheck(add, ANN_RULE, json_string(p->res->rule)) !=
        0)
        goto fail;
    if (p->shm_applied) {
        size_format(p->shm_size, shm, sizeof(shm));
        if (json_object_set_new_nocheck(add, ANN_SHM, jstr(shm)) != 0)
            goto fail;
        if (json_object_set_new_nocheck(p->res->audit, "shm-size", jstr(shm)))
            goto fail;
    }
    if (json_object_set_new_nocheck(p->res->audit, "mutated",
                                    json_string(mutated)) ||
        json_object_set_new_nocheck(p->res->audit, "gpus", jstr(gpus)))
        goto fail;

    if (p->meta == NULL) {
        if (patch_append(p->res->patch, member_op(p->pod, "metadata"),
                         "/metadata",
                         jobj("annotations", json_incref(add), NULL, NULL)))
            goto fail;
    } else if (p->annotations == NULL) {
        if (patch_append(p->res->patch, member_op(p->meta, "annotations"),
                         "/metadata/annotations", json_incref(add)))
            goto fail;
    } else {
        json_object_foreach(add, key, v)
        {
            char esc[256], path[300];
            const json_t *cur = json_object_get(p->annotations, key);

            if (json_is_string(cur) &&
                strcmp(json_string_value(cur), json_string_value(v)) == 0)
                continue;
            if (patch_pointer_escape(key, esc, sizeof(esc)) != 0)
                goto fail;
            join(path, sizeof(path), "/metadata/annotations/", esc,
                 (char *)NULL);
            /* A reviewed-again pod whose value changed (or is no string):
             * replaced. */
            if (patch_append(p->res->patch, cur != NULL ? "replace" : "add",
                             path, json_incref(v)))
                goto fail;
        }
    }
    json_decref(add);
    return 0;
fail:
    json_decref(add);
    return -1;
}

/* The profile's configMapRef, first in c's envFrom (the list itself when
 * c has none). */
static int
emit_profile(struct plan *p, const struct ctr *c)
{
    bool have_list = arr_get(c->c, "envFrom") != NULL;
    json_t *v = profile_ref(p->s);
    char path[96];

    if (!have_list)
        v = jlist(v);
    join(path, sizeof(path), c->base, "/envFrom", have_list ? "/0" : "",
         (char *)NULL);
    if (v == NULL)
        return -1;
    /* An insert at the head of the list, else the list itself (replacing
     * an envFrom: null). */
    return patch_append(
        p->res->patch, have_list ? "add" : member_op(c->c, "envFrom"), path, v);
}

/* The ring-check init container, last of the init containers. */
static int
emit_ringcheck(struct plan *p)
{
    json_t *rc = json_incref(p->rc_container);

    if (arr_get(p->spec, "initContainers") != NULL)
        return patch_append(p->res->patch, "add", "/spec/initContainers/-", rc);
    rc = jlist(rc);
    return rc != NULL ? patch_append(p->res->patch,
                                     member_op(p->spec, "initContainers"),
                                     "/spec/initContainers", rc)
                      : -1;
}

/*
 * The emit pass: the one place that writes patch operations. The plan_*
 * steps only fill struct plan (and the warnings, the injected list and
 * the ring-check note); this writes what they planned, in this fixed
 * order:
 *
 *   1. envFrom: the profile's configMapRef, per GPU container, in the
 *      order of spec.containers then spec.initContainers (ctr order);
 *   2. the sizeLimit of the pod's own /dev/shm emptyDir (shm.existing:
 *      grow);
 *   3. per container, its memory limit then its memory request
 *      (shm.memoryLimit: raise);
 *   4. spec.hostIPC;
 *   5. the ring-check init container, appended to initContainers;
 *   6. per container, its env, then volumeMounts, then capabilities;
 *   7. spec.volumes;
 *   8. the ncclguard.io/ annotations, only when 1-7 wrote something.
 *
 * No op inserts before an index that a later op names: the ring check goes
 * at the end of initContainers and the profile at the head of one
 * container's envFrom, so every path computed from the pod stays valid.
 * An op that writes a whole member (a list, securityContext, hostIPC, an
 * annotation) is a "replace" where the pod has that member already (null,
 * false, a changed value on a pod reviewed again), else an "add"
 * (member_op()): patch_check() refuses an add onto an existing key.
 * Returns 0 (an empty patch: nothing to do), or -1 when out of memory.
 */
static int
plan_emit(struct plan *p)
{
    json_t *patch = p->res->patch;
    char path[128], t[24];

    for (size_t i = 0; i < p->n_ctr; i++)
        if (p->ctr[i].profile_add && emit_profile(p, &p->ctr[i]) != 0)
            return -1;
    if (p->shm_grow >= 0) {
        char want[32];

        size_format(p->shm_size, want, sizeof(want));
        join(path, sizeof(path), "/spec/volumes/", i64_text(p->shm_grow, t),
             "/emptyDir/sizeLimit", (char *)NULL);
        if (patch_append(patch, "replace", path, jstr(want)) != 0)
            return -1;
    }
    for (size_t i = 0; i < p->n_ctr; i++) {
        const struct ctr *c = &p->ctr[i];

        for (int k = 0; k < 2; k++) {
            if (c->mem_new[k][0] == '\0')
                continue;
            join(path, sizeof(path), c->base, "/resources/", mem_kinds[k],
                 "/memory", (char *)NULL);
            if (patch_append(patch, "replace", path, jstr(c->mem_new[k])))
                return -1;
        }
    }
    if (p->host_ipc_add && patch_append(patch, member_op(p->spec, "hostIPC"),
                                        "/spec/hostIPC", json_true()) != 0)
        return -1;
    if (p->rc_container != NULL && emit_ringcheck(p) != 0)
        return -1;
    for (size_t i = 0; i < p->n_ctr; i++) {
        struct ctr *c = &p->ctr[i];

        if (emit_list(p, c->c, c->base, "env", c->env_add) != 0 ||
            emit_list(p, c->c, c->base, "volumeMounts", c->mount_add) != 0 ||
            emit_caps(p, c) != 0)
            return -1;
    }
    if (emit_list(p, p->spec, "/spec", "volumes", p->vol_add) != 0)
        return -1;
    if (json_array_size(patch) == 0)
        return 0;
    return emit_annotations(p);
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
patch_verify(const json_t *pod, struct mutate_result *res)
{
    struct ng_error err;

    if (json_array_size(res->patch) > PATCH_MAX_OPS) {
        snprintf(res->reason, sizeof(res->reason),
                 "patch would have %zu operations, more than %d",
                 json_array_size(res->patch), PATCH_MAX_OPS);
        return -1;
    }
    ng_error_clear(&err);
    if (patch_check(pod, res->patch, &err) != 0) {
        snprintf(res->reason, sizeof(res->reason),
                 "patch does not apply: %.130s", err.msg);
        return -1;
    }
    return 0;
}

/* ---- pods that are not GPU pods, and DRA --------------------------- */

#define ANN_CLAIM_GPUS "ncclguard.io/claim-gpus"
#define CLAIM_GPUS_MAX 1024

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
static int
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
            warn(p->res,
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
static void
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
static void
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
    warn(p->res, "%s; left unchanged", p->res->reason);
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
    res->patch = json_array();
    res->warnings = json_array();
    res->audit = json_object();
    res->injected = json_array();
    join(res->rule, sizeof(res->rule), "default", (char *)NULL);
    if (!res->patch || !res->warnings || !res->audit || !res->injected)
        goto oom;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        goto oom;
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
            warn(res, "Windows pod left unchanged: NCCL and the ring check "
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
        warn_text(res, dec.warnings[i]);
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
    if (json_array_size(res->patch) == 0) {
        res->status = MUTATE_UNCHANGED;
        goto done;
    }
    if (patch_verify(pod, res) != 0)
        goto error_reason;
    res->status = MUTATE_PATCHED;
done:
    ctrs_release(p);
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
    json_array_clear(res->patch);
    json_array_clear(res->injected);
    res->status = MUTATE_ERROR;
    warn(res, "%.90s; pod left unchanged", res->reason);
    goto done;
oom:
    if (p != NULL) {
        ctrs_release(p);
        free(p);
    }
    mutate_result_release(res);
    return -1;
}
