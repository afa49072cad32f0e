/* Rule matching: which pods a policy rule applies to, and whether one
 * rule's match catches everything another's would. */
#ifndef NCCLGUARD_MATCH_H
#define NCCLGUARD_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

enum label_op { LABEL_IN, LABEL_NOT_IN, LABEL_EXISTS, LABEL_NOT_EXISTS };

/* One Kubernetes set-based requirement on pod labels. */
struct label_req {
    char *key;
    enum label_op op;
    char **values;
    size_t n_values;
};

/*
 * A rule's match block. Empty lists mean "no constraint". Strings are
 * owned by the policy snapshot that holds the match.
 */
struct match {
    char **namespaces; /* fnmatch globs; any one must match */
    size_t n_namespaces;
    char **exclude; /* fnmatch globs; none may match */
    size_t n_exclude;
    char **label_keys; /* podLabels: every key must equal its value */
    char **label_values;
    size_t n_labels;
    struct label_req *exprs; /* matchExpressions: all must hold */
    size_t n_exprs;
    char **ann_keys; /* annotations: every key must equal its value */
    char **ann_values;
    size_t n_ann;
    int64_t min_gpus; /* 0 = no minimum */
    int64_t max_gpus; /* -1 = no maximum */
    /* What node pools are made of (match_pod_spec()): */
    char **resources; /* any one asked for by a container */
    size_t n_resources;
    char **node_keys; /* nodeSelector: every key=value targeted */
    char **node_values;
    size_t n_node;
    char **tolerations; /* every taint key tolerated */
    size_t n_tolerations;
};

/*
 * True when a pod with these properties satisfies m. pod_ns, the pod's
 * namespace, may be NULL (treated as ""); labels and annotations are the pod's
 * metadata objects and may be NULL. Thread-safe; m is only read.
 */
bool match_pod(const struct match *m, const char *pod_ns, const json_t *labels,
               const json_t *annotations, int64_t gpus);

/*
 * True when the pod spec (spec, may be NULL: then only a match without
 * these constraints holds) satisfies m's node-pool constraints:
 *   resources    a container or init container asks for one of them
 *                (limits or requests, a value other than 0);
 *   nodeSelector every key=value is in spec.nodeSelector, or every term
 *                of the required node affinity has key In [..value..];
 *   tolerations  every taint key is tolerated (a toleration of that key,
 *                or an Exists toleration without a key).
 * Thread-safe; m is only read.
 */
bool match_pod_spec(const struct match *m, const json_t *spec);

/*
 * True when every pod that b matches is certainly matched by a as well
 * (so a rule with b after a rule with a can never match). Conservative:
 * false means "not proven", never "proven not".
 */
bool match_covers(const struct match *a, const struct match *b);

/* True when pattern is a well-formed namespace glob; else fills why. */
bool match_glob_valid(const char *pattern, char *why, size_t n);

#endif
