/* The plan of one pod's mutation: what every step of admission/plan_*.c
 * reads and fills, and the small helpers they share. Internal to
 * admission/: mutate_pod() (admission/mutate.c) is the public entry. */
#ifndef NCCLGUARD_PLAN_H
#define NCCLGUARD_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "admission/fastjson.h"
#include "admission/jobmember.h"
#include "admission/mutate.h"
#include "admission/patch.h"
#include "policy/policy.h"
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
/* The argument the ring check is always given first: ctr_is_ringcheck()
 * recognises a check of ours by it on a later review. */
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

/*
 * A set of strings borrowed from the pod (they live as long as the pod):
 * open addressing with linear probing, at most half full, so that each
 * lookup costs O(1) on average whatever the names are
 * (admission/plan_names.h).
 */
struct nameset {
    const char **slot; /* cap of them, NULL when empty */
    size_t cap, n;
};

/*
 * A container's own env by name only, read once when first asked: a
 * long env (a platform may inject hundreds of variables) is looked at
 * for a few names per review, and only the ring check's model container
 * has its entries copied. Borrowed from the pod.
 */
struct env_names {
    const char **name; /* n of them, in list order; NULL: no string name */
    size_t n;
    struct nameset set; /* the names that are there, for env_has() */
    bool built, failed; /* failed: out of memory, read the pod instead */
};

/* One container of the pod and what the plan adds to it. */
struct ctr {
    json_t *c; /* borrowed from the pod */
    /* Where the review's decoder left c's env and volumeMounts on its
     * tape (their entries then read as nulls in c): the plan's doc, else
     * NULL. */
    const struct fastjson_doc *doc;
    char base[48]; /* "/spec/containers/3" */
    const char *name;
    bool init;
    bool sidecar; /* init container with restartPolicy: Always */
    int64_t gpus; /* over the counted resources */
    int64_t per_res[MUTATE_MAX_RESOURCES];
    /* What the plan adds to this container; plan_emit() writes it. */
    bool profile_add;     /* the profile's configMapRef, first in envFrom */
    char mem_new[2][32];  /* new memory limit, request; "" = unchanged */
    json_t *env_add;      /* env entries to append, owned */
    json_t *mount_add;    /* volumeMounts to append, owned */
    json_t *cap_add;      /* capabilities to add, owned */
    struct env_names env; /* its own env's names, see env_names_of() */
};

/*
 * The plan of one pod. mutate_pod() fills the view (pod, meta, spec,
 * annotations, ctr) and the decision; the plan_* steps then fill the
 * additions, in the order mutate_pod() calls them; plan_emit() alone
 * turns the additions into patch operations.
 */
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
    /* What the plan adds to the pod; plan_emit() writes it, as text, into
     * pt (set up by mutate_pod(), which moves it into the result). */
    struct patch_text pt;
    json_t *vol_add;   /* volumes to append, owned */
    long shm_grow;     /* index in spec.volumes of the /dev/shm emptyDir
                        * whose sizeLimit becomes shm_size, or -1 */
    bool host_ipc_add; /* spec.hostIPC: true */
    /* The ring-check init container as compact JSON (plan_ringcheck()),
     * empty when there is none. */
    struct buf rc_text;
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
    /* Per entry of the ring check's model container's own env: how its
     * value is given and whether its name is one the check copies
     * (plan_ringcheck.c), read on the first ringcheck_env() of the plan;
     * owned, NULL until then. */
    unsigned char *rc_env_facts;
};

/* ---- the plan's containers --------------------------------------------- */

/* Fills p->ctr from spec.containers then spec.initContainers (the order
 * every step and plan_emit() walk). Returns 0, or -1 with
 * p->res->reason set (too many containers, one that is no object) or
 * when out of memory. */
int ctrs_collect(struct plan *p) __attribute__((warn_unused_result));

/* Frees what the plan owns (its containers' additions, the name sets,
 * the planned volumes, the ring check, the membership env, the DRA
 * claims); p itself stays the caller's. */
void ctrs_release(struct plan *p);

/* ---- JSON and text helpers ------------------------------------------------
 * Everything here is pure: no state, safe from any thread. */

/* A string for the patch, or NULL for s NULL or when out of memory.
 * Everything the plan writes is valid UTF-8 already, so jansson's check
 * is skipped. */
json_t *jstr(const char *s);

/* {k1: v1[, k2: v2]} (k2 NULL: one member); the values are consumed, even
 * on failure (NULL). */
json_t *jobj(const char *k1, json_t *v1, const char *k2, json_t *v2);

/* [v]; v is consumed, even on failure (NULL). */
json_t *jlist(json_t *v);

/* Writes the strings given, up to a NULL, one after the other into out (n
 * > 0 bytes), NUL-terminated and cut to n - 1 bytes. */
void join(char *out, size_t n, ...) __attribute__((sentinel));

/* v in decimal, as "%" PRId64 writes it, in t; returns where it starts
 * (inside t). */
const char *i64_text(int64_t v, char t[24]);

/* Appends s to the NUL-terminated text in buf (n bytes), truncating. */
void buf_append(char *buf, size_t n, const char *s);

/* Adds a warning "ncclguard: ..." of at most TEXT_WARNING_MAX bytes, cut
 * on a UTF-8 boundary, to res->warnings (at most MUTATE_MAX_WARNINGS;
 * later ones are dropped). */
void plan_warn(struct mutate_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Adds a policy-made warning, prefixing and cutting it as ours. */
void plan_warn_text(struct mutate_result *res, const char *text);

/* Adds what (copied) to res->injected, the log line's list, once. */
void injected_add(struct mutate_result *res, const char *what);

/* Member key of o when it is a string / an object / an array (borrowed
 * from o), else NULL; o may be NULL. */
const char *str_get(const json_t *o, const char *key);
json_t *obj_get(const json_t *o, const char *key);
json_t *arr_get(const json_t *o, const char *key);

/* *list, created empty on first use. NULL when out of memory (jansson's
 * append on NULL then fails cleanly). */
json_t *add_list(json_t **list);

/* ---- a value of the pod, built or left on the decoder's tape -------------
 * A container's env and volumeMounts entries are read through these: the
 * review's decoder leaves them on its tape (FASTJSON_LAZY), the dry run
 * and the tests give them built. Exactly one of j and r.at is set, or neither
 * (no value). */
struct pod_value {
    const json_t *j;
    struct fastjson_ref r;
};

/* A list of a container (its env, its volumeMounts) as the pod gives it,
 * to read (pod_list_of()). */
struct pod_list {
    const json_t *j;                /* built: the array */
    const struct fastjson_doc *doc; /* else on the tape: at[0..n) */
    const size_t *at;
    size_t n;
};

/* c's list key ("env", "volumeMounts"), however it was decoded (empty
 * when c has none). */
struct pod_list pod_list_of(const struct ctr *c, const char *key);

/* Entry i of l, or no value past its end. */
struct pod_value pod_list_at(const struct pod_list *l, size_t i);

/* A built value as a pod_value (NULL: no value). */
struct pod_value pod_value_of(const json_t *j);

/* v's type as jansson names it, or -1 for no value. */
int pod_value_type(struct pod_value v);

/* Member key of object v, or no value. */
struct pod_value pod_value_member(struct pod_value v, const char *key);

/* The members of object v (the elements of an array), else 0. */
size_t pod_value_size(struct pod_value v);

/* Member key of v when it is a string (borrowed), else NULL: str_get(). */
const char *pod_value_str(struct pod_value v, const char *key);

/* Appends v as compact JSON (jsonwrite_value()'s bytes). Returns 0, or -1
 * when the buffer refuses or v is no value. */
int pod_value_write(struct buf *b, struct pod_value v);

/* ---- a container's mounts and env ---------------------------------------- */

/* The volume name of c's mount at path (compared as the kubelet cleans
 * paths), in the pod or planned; "" for a mount without a name; NULL when
 * there is none. Borrowed from the pod or the plan. */
const char *mount_at(const struct ctr *c, const char *path);

/* The names of c's own env (the pod's, not the planned additions), read
 * on the first call; NULL when out of memory (then read the pod). */
const struct env_names *env_names_of(struct ctr *c);

/* Whether c's env, in the pod or planned, has a variable called name. */
bool env_has(struct ctr *c, const char *name);

/* Plans {name, value} in c's env unless the variable is there already
 * (the pod's own value wins). Returns 0, or -1 when out of memory. */
int env_add(struct ctr *c, const char *name, const char *value);

/* Plans a mount of volume at path in c (readOnly when ro) unless c mounts
 * something there already. Returns 0, or -1 when out of memory. */
int mount_add(struct ctr *c, const char *volume, const char *path, bool ro);

/* ---- quantities ---------------------------------------------------------- */

/* Parses a Kubernetes quantity held as a JSON string or number. Returns
 * 0, or -1 (q unspecified) when v is neither or no quantity. */
int quantity_of(const json_t *v, struct quantity *q);

/* bytes as a binary quantity ("16Gi") into buf (n bytes). */
void size_format(int64_t bytes, char *buf, size_t n);

/* One request as the apiserver sees it after defaulting, in milli-units:
 * requests[name], else limits[name], of res (a container's or the pod's
 * resources). -1 when neither is set or the value is not a quantity. */
int64_t request_milli(const json_t *res, const char *name);

/* milli of resource name as a quantity: bytes for memory, "Nm" else. */
void milli_format(const char *name, int64_t milli, char *buf, size_t n);

#endif
