/* The plan for one pod: GPU count, envFrom, /dev/shm, IPC, ring-check init
 * container, recorded as an RFC 6902 patch that has been applied locally. */
#ifndef NCCLGUARD_MUTATE_H
#define NCCLGUARD_MUTATE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "policy/policy.h"

/* Settings that come from the command line, not from the policy. */
struct fastjson_doc;

struct mutate_options {
    const char *own_namespace; /* the webhook's namespace; skipped. NULL ok */
    /* Dry run only: the object holding the pod template (a JobSet, a
     * LeaderWorkerSet, ...), standing in for the labels and variables its
     * operator adds to the pods it creates. NULL on the server. */
    const json_t *workload;
    /* Bytes of the object as the apiserver sent it (the review's body is
     * an upper bound), 0 when unknown: the ring check is left out when the
     * pod would grow past MUTATE_OBJECT_MAX_BYTES with it. */
    size_t object_bytes;
    /* The server's answer needs the patch's text only: res->patch is then
     * left NULL instead of loaded from it. */
    bool patch_text_only;
    /* Where the review's decoder left parts of the pod on its tape
     * (admission/fastjson.h, FASTJSON_LAZY: the containers' env), or NULL
     * when the pod was built whole. */
    const struct fastjson_doc *doc;
};

/* etcd's default request limit (--max-request-bytes, 1.5 MiB): a pod that
 * the patch grows past it cannot be created. */
#define MUTATE_OBJECT_MAX_BYTES (1536u * 1024u)
/* The most the ring-check container may add to a pod, as compact JSON. */
#define MUTATE_RINGCHECK_MAX_BYTES (64u * 1024u)

enum mutate_status {
    MUTATE_PATCHED = 0,   /* patch is non-empty */
    MUTATE_UNCHANGED = 1, /* GPU pod already carries everything */
    MUTATE_SKIPPED = 2,   /* policy rule, annotation or namespace says no */
    MUTATE_NOT_GPU = 3,   /* no GPU requested (or a bad count, warned) */
    MUTATE_ERROR = 4      /* internal failure: no patch, a warning */
};

/* Short names for the log line and metrics: "patched", "skipped", ... */
const char *mutate_status_name(enum mutate_status s);

struct mutate_result {
    enum mutate_status status;
    /* The patch as compact JSON text: NUL-terminated, patch_len bytes of
     * patch_ops ops, owned; NULL and 0 when there is no patch. */
    char *patch_text;
    size_t patch_len;
    size_t patch_ops;
    /* The same patch as jansson values (the text loaded), owned: [] when
     * there is no patch; NULL when opt->patch_text_only. */
    json_t *patch;
    json_t *warnings; /* array of strings (<= 120 chars each), owned */
    json_t *audit;    /* object, auditAnnotations key -> string, owned */
    json_t *injected; /* array of short strings for the log line, owned */
    char rule[128];   /* rule that decided ("default" when none) */
    int64_t gpus;
    char reason[160]; /* why skipped / error, "" otherwise */
    /* What became of the ring check and why, for the dry run's summary:
     * "multi-node (LeaderWorkerSet: ...)", "single-pod (...)", "left out:
     * ..."; "" when the pod is not mutated. */
    char ringcheck[240];
    bool multinode; /* the check joins the job's other pods */
};

/*
 * Plans the mutation of pod (a Pod object, borrowed, not modified) created
 * in namespace ns (may be NULL: taken from metadata.namespace). The patch is
 * applied to a copy before returning; if it does not apply, the result is
 * MUTATE_ERROR with no patch and a warning. Returns 0 and fills *res (to be
 * released with mutate_result_release()) in every case except allocation
 * failure (-1). Thread-safe: pol is only read.
 */
int mutate_pod(const json_t *pod, const char *ns, const struct policy *pol,
               const struct mutate_options *opt, struct mutate_result *res)
    __attribute__((warn_unused_result));

/* Frees what a result owns. Safe on a zeroed struct. */
void mutate_result_release(struct mutate_result *res);

#endif
