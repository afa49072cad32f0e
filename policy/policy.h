/* The ncclguard policy: an immutable snapshot loaded from YAML, the settings
 * the mutation uses, and the decision for one pod. */
#ifndef NCCLGUARD_POLICY_H
#define NCCLGUARD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "base/error.h"
#include "policy/diag.h"

struct policy;

enum shm_existing {
    SHM_EXISTING_KEEP = 0, /* leave a smaller user /dev/shm volume, warn */
    SHM_EXISTING_GROW = 1  /* raise a smaller memory emptyDir's sizeLimit */
};

enum shm_memory_limit {
    SHM_MEMLIMIT_WARN = 0, /* warn when shm exceeds a container's limit */
    SHM_MEMLIMIT_RAISE = 1 /* raise memory request and limit by shm size */
};

enum ringcheck_mode {
    RINGCHECK_MODE_PROCESS = 0, /* one process per GPU ("process") */
    RINGCHECK_MODE_GROUP = 1    /* one process, group init ("group") */
};

enum ringcheck_on_failure {
    RINGCHECK_FAIL = 0,
    RINGCHECK_WARN = 1,
    RINGCHECK_FALLBACK = 2
};

enum ringcheck_multinode {
    RINGCHECK_MULTINODE_AUTO = 0, /* join the job's pods when detected */
    RINGCHECK_MULTINODE_OFF = 1   /* every pod checks itself only */
};

/* What a multi-node check does when peers are missing at its deadline. */
enum ringcheck_on_missing {
    RINGCHECK_MISSING_WARN = 0,
    RINGCHECK_MISSING_FAIL = 1
};

/* What a fallback check does when no single setting passes, or its
 * deadline comes first (ringCheck.onNoCure, given to the check as
 * --on-no-cure=fail|warn). DEFAULT: not given, the binary's default. */
enum ringcheck_on_no_cure {
    RINGCHECK_NOCURE_DEFAULT = 0,
    RINGCHECK_NOCURE_FAIL = 1,
    RINGCHECK_NOCURE_WARN = 2
};

struct env_var {
    char *name;
    char *value;
};

/*
 * Every setting the mutation uses. Their default values are written in one
 * place people read, policy/default.yaml; the rows of policy/schema.c
 * build the same values in, and tests/unit/test_policy.c and test_schema.c
 * fail when the two differ, so the comments here give meanings and units,
 * not values. Sizes are bytes. Strings are owned by the policy snapshot;
 * callers only read them. New fields may be added; existing ones keep their
 * names and meaning. A new key is a row in policy/schema.c (and a line in
 * policy/default.yaml) plus the code that uses it.
 */
struct settings {
    /* Extended-resource names that count as GPUs, matched exactly. */
    char **gpu_resources;
    size_t n_gpu_resources;

    struct {
        bool enabled;  /* inject the envFrom at all */
        char *name;    /* ConfigMap name */
        bool optional; /* configMapRef.optional */
    } profile;

    struct {
        bool enabled;
        int64_t per_gpu; /* size per GPU of the pod */
        int64_t min;     /* floor of the computed size */
        int64_t max;     /* its ceiling; also caps the shm-size annotation */
        enum shm_existing existing;
        enum shm_memory_limit memory_limit;
    } shm;

    struct {
        char **capabilities; /* added to GPU containers, e.g. IPC_LOCK */
        size_t n_capabilities;
        bool host_ipc;
        bool warn_non_root; /* warn that IPC_LOCK is moot for non-root */
    } ipc;

    struct {
        bool enabled;
        char *image;
        int timeout_seconds;     /* whole-check deadline */
        int64_t bandwidth_bytes; /* bandwidth phase message size */
        enum ringcheck_mode mode;
        enum ringcheck_on_failure on_failure;
        enum ringcheck_on_no_cure on_no_cure; /* onFailure: fallback only */
        double min_busbw_gbps;                /* 0 = no threshold */
        bool allow_opt_out;   /* honour ncclguard.io/ring-check: "false" */
        char *cpu_request;    /* a quantity; also the limit when Guaranteed */
        char *memory_request; /* a quantity; also the limit when Guaranteed */
        /* Limits outside Guaranteed pods (never below the requests): a
         * ResourceQuota on limits.cpu or limits.memory with no LimitRange
         * default refuses a container without limits. */
        char *cpu_limit;
        char *memory_limit;
        int min_gpus; /* single-pod check only from this many GPUs */
        enum ringcheck_multinode multi_node;
        int rendezvous_port;    /* TCP, on node rank 0's pod */
        int multi_node_timeout; /* seconds, cross-node deadline */
        enum ringcheck_on_missing on_missing;
        /* --min-busbw-net, GB/s across nodes; 0 = no threshold */
        double min_net_busbw_gbps;
        char *leader_address; /* template; NULL: the operator's default */
        char *nodes;          /* template of the node count */
        /* --expect-transport: the word NCCL must choose within the pod and
         * across pods (static strings); NULL = no expectation */
        const char *expect_intra;
        const char *expect_inter;
    } ringcheck;

    /* Env vars added to GPU containers unless the user set the name. */
    struct env_var *extra_env;
    size_t n_extra_env;

    struct {
        bool allow_annotation; /* honour ncclguard.io/debug: "true" */
        char *level;           /* NCCL_DEBUG value */
        char *subsys;          /* NCCL_DEBUG_SUBSYS value */
    } debug;

    /* The ncclguard-watchdog opt-in (NCCLGUARD_WATCHDOG in GPU
     * containers); the fields mean what contract/wdspec.h says. */
    struct {
        bool enabled;
        int64_t period_ms;     /* one observation period */
        int idle_periods;      /* idle periods in a row that make a hang */
        int64_t min_cpu_milli; /* CPU still burnt, 1000 = one core */
        bool restart;          /* action: restart (else report) */
        int checkpoint_signal; /* 0 = none, else e.g. SIGUSR1 */
        char *checkpoint_file; /* NULL = none; absolute path */
        int64_t grace_ms;      /* checkpoint request -> SIGTERM */
    } watchdog;
};

/* At most this many warnings come out of one decision. */
#define POLICY_MAX_WARNINGS 8

/*
 * The outcome of matching one pod against the policy. `settings` is
 * borrowed from the policy snapshot and stays valid as long as the
 * snapshot. The annotation overrides, already bounded by the policy, are
 * given separately so the shared snapshot is never written.
 */
struct decision {
    const char *rule; /* matched rule's name, or "default" */
    bool skip;        /* rule says skip: true */
    const struct settings *settings;
    int64_t shm_override; /* accepted ncclguard.io/shm-size, or -1 */
    bool ringcheck;       /* settings->ringcheck.enabled after opt-out */
    bool debug;           /* accepted ncclguard.io/debug: "true" */
    size_t n_warnings;    /* refused overrides, each saying why */
    char warnings[POLICY_MAX_WARNINGS][160];
};

/* Longest ring-check image reference policy_ringcheck_image_set_default()
 * takes. */
#define POLICY_MAX_IMAGE 255

/*
 * Sets the ring-check image that policies loaded from now on get when they
 * name none (built in: ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0), so
 * that the Deployment, not each policy, says which registry to pull from.
 * A policy's own ringCheck.image still wins. image is copied. Returns 0,
 * or -1 when image is empty, longer than POLICY_MAX_IMAGE or holds
 * whitespace or control characters (the default is then unchanged). Not
 * thread-safe: call it before any policy is loaded.
 */
int policy_ringcheck_image_set_default(const char *image)
    __attribute__((warn_unused_result));

/*
 * Loads a policy from YAML text. name is used in messages (a file name).
 * On failure returns NULL and fills err with the first error and its
 * line:column. The returned snapshot is immutable and safe to share
 * between threads; free it with policy_free().
 */
struct policy *policy_load(const char *buf, size_t len, const char *name,
                           struct ng_error *err)
    __attribute__((warn_unused_result));

/* Reads (base/file.h, at most POLICY_MAX_BYTES) and loads a file; as
 * policy_load(). */
struct policy *policy_load_file(const char *path, struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * Checks YAML text the way policy_load() does but collects every error and
 * warning, with line:column, into *d (sorted by position). Returns the
 * snapshot when there are no errors (warnings allowed), else NULL. Pure on
 * (buf, len): no I/O, no global state, so it is safe to fuzz. Thread-safe.
 */
struct policy *policy_check(const char *buf, size_t len, struct diags *d)
    __attribute__((warn_unused_result));

/*
 * Drops one reference to a snapshot and frees it when none is left.
 * A snapshot starts with one reference. policy_free(NULL) is a no-op.
 * Thread-safe (atomic count), so a reloader can swap the pointer it
 * publishes while requests still hold references to the old snapshot.
 */
void policy_free(struct policy *p);

/* Takes one more reference to p (atomic); returns p. NULL is passed
 * through. Each reference is dropped with policy_free(). */
struct policy *policy_ref(struct policy *p);

/* Number of rules, and the i-th rule's name (borrowed from p). */
size_t policy_rule_count(const struct policy *p);
const char *policy_rule_name(const struct policy *p, size_t i);

/* The policy's dra.claimTemplates: ResourceClaimTemplate names and the
 * GPUs a claim made from each gives a pod. Strings borrowed from the
 * policy. */
struct policy_dra {
    char **names;
    int64_t *gpus;
    size_t n;
};

/*
 * The GPUs a claim from the ResourceClaimTemplate name gives, from the
 * policy's dra.claimTemplates; 0 when the policy does not name it.
 * Thread-safe (reads an immutable snapshot).
 */
int64_t policy_claim_template_gpus(const struct policy *p, const char *name);

/*
 * The node agent's quarantine block (defaults.quarantine; node-level, so a
 * rule cannot set it): what node-class verdicts do to the node
 * (docs/policy.md, "Quarantine"). Durations in milliseconds.
 */
enum quarantine_mode { QUARANTINE_OBSERVE = 0, QUARANTINE_TAINT = 1 };
struct policy_quarantine {
    enum quarantine_mode mode; /* observe | quarantine */
    int threshold;             /* K counted verdicts from >= 2 pods */
    /* window, first cooldown, its ceiling; expiry 0 = never */
    int64_t window_ms, cooldown_ms, cooldown_max_ms, expiry_ms;
    int max_share_permille; /* breaker: most GPU nodes under the taint */
};
/* Never NULL for a loaded policy: the built-in defaults when the block is
 * absent. Borrowed from p. */
const struct policy_quarantine *policy_quarantine(const struct policy *p);

/* The settings used when no rule matches. Borrowed from p. */
const struct settings *policy_defaults(const struct policy *p);

/*
 * Hex digest (SHA-256 of the source text) identifying the snapshot, for
 * /metrics and logs. Borrowed from p.
 */
const char *policy_hash(const struct policy *p);

/*
 * Decides for one pod in namespace ns, which may be NULL or ""; labels and
 * annotations are the pod's metadata objects (may be NULL). gpus is the
 * pod's GPU count computed with policy_defaults(p)->gpu_resources. Fills
 * *out; never fails. Thread-safe: p is only read.
 */
void policy_decide(const struct policy *p, const char *ns, const json_t *labels,
                   const json_t *annotations, int64_t gpus,
                   struct decision *out);

/*
 * As policy_decide(), with the pod's spec (may be NULL) for the rules
 * that match node pools: match.resources, match.nodeSelector and
 * match.tolerations (policy/match.h, match_pod_spec()). Thread-safe.
 */
void policy_decide_pod(const struct policy *p, const char *ns,
                       const json_t *labels, const json_t *annotations,
                       const json_t *spec, int64_t gpus, struct decision *out);

/*
 * Address templates (ringCheck.leaderAddress, ringCheck.nodes): literal
 * text with references the kubelet fills in when the ring check starts:
 *   {label:KEY}       the pod's label KEY (downward API)
 *   {annotation:KEY}  the pod's annotation KEY (downward API)
 *   {env:NAME}        the variable NAME of the workload container
 *   {namespace}       the pod's namespace
 * Literal braces and "$" are not allowed, so nothing else is expanded.
 */
enum policy_template_kind {
    POLICY_TMPL_TEXT = 0,
    POLICY_TMPL_LABEL,
    POLICY_TMPL_ANNOTATION,
    POLICY_TMPL_ENV,
    POLICY_TMPL_NAMESPACE
};

struct policy_template_piece {
    enum policy_template_kind kind;
    const char *s; /* the text or the KEY/NAME, borrowed, not terminated */
    size_t len;
};

/*
 * Reads the next piece of the template at *cur and advances *cur. Returns
 * 1 with *out filled, 0 at the end, or -1 with a lower-case reason in why
 * (what is wrong and at which character). Pure and thread-safe.
 */
int policy_template_next(const char **cur, struct policy_template_piece *out,
                         char *why, size_t why_len)
    __attribute__((warn_unused_result));

#endif
