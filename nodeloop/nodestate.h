/* A node's NCCL health as the node agent keeps it: the counted evidence,
 * the state (healthy .. quarantined), the breaker and re-validation
 * timers. Pure decisions: the caller reads the Node, calls these, and
 * writes back what they say (docs/nodeloop.md). */
#ifndef NCCLGUARD_NL_NODESTATE_H
#define NCCLGUARD_NL_NODESTATE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "nodeloop/nodeclass.h"

/* The policy's quarantine block (defaults.quarantine). */
enum nq_mode { NQ_OBSERVE, NQ_QUARANTINE };

struct nq_policy {
    enum nq_mode mode;
    int threshold;           /* K counted verdicts (from >= 2 pods) */
    int64_t window_ms;       /* evidence older than this is forgotten */
    int64_t cooldown_ms;     /* quarantine -> first validation pod */
    int64_t cooldown_max_ms; /* each failed validation doubles, up to this */
    int64_t expiry_ms;       /* the taint goes after this; 0 = never */
    int max_share_permille;  /* breaker: most GPU nodes under the taint */
};

/* observe, K 2, window 1h, cooldown 30m (max 8h), expiry 24h, 10 %. */
void nq_policy_defaults(struct nq_policy *p);

enum nq_kind {
    NQ_HEALTHY,     /* nothing counted in the window */
    NQ_SUSPECT,     /* counted evidence below the threshold */
    NQ_UNHEALTHY,   /* threshold reached, observe mode: condition only */
    NQ_WITHHELD,    /* threshold reached, the breaker held the taint */
    NQ_QUARANTINED, /* tainted */
};

#define NQ_MAX_EVIDENCE 32

struct nq_evidence {
    char key[96];  /* "<pod uid>/<container>/<restartCount>": seen once */
    char pod[160]; /* "namespace/name" */
    enum nc_class cls;
    char reason[48];
    int64_t at_ms; /* when the container finished */
    char peer[64]; /* the node whose pod saw it (a pair verdict that names
                      this node); "" for this node's own pods */
};

struct nq_node {
    enum nq_kind kind;
    enum nc_class cls; /* the class the taint names */
    int64_t since_ms;  /* kind entered */
    int64_t quarantined_ms;
    int64_t next_check_ms; /* validation pod due */
    int fails;             /* failed validations in this quarantine */
    char validation[160];  /* the running validation pod, "" none */
    int64_t cross_ms;      /* this node's own last cross-node failure, 0 none */
    int64_t cleared_ms;    /* evidence forgotten (a lift): older never counts */
    int nev;
    struct nq_evidence ev[NQ_MAX_EVIDENCE];
};

/* The GPU nodes of the cluster, for the breaker. */
struct nq_cluster {
    int gpu_nodes;
    int tainted; /* GPU nodes under the taint now, this one excluded */
};

/* What the caller must do after a decision. */
struct nq_actions {
    int changed; /* write the state back (annotation and condition) */
    int taint;   /* +1 add the taint, -1 remove it, 0 leave it */
    int withheld;
    int start_validation;
    int counted;           /* nq_add: the evidence counted against the node */
    char event_reason[48]; /* an Event on the Node, "" none */
    char event_msg[400];
    int event_warning;
};

void nq_node_init(struct nq_node *n);

/* Whether evidence of class c counts against a node (node and pair
 * only). The one place that rule lives. */
int nq_counts(enum nc_class c);

/*
 * Adds one piece of evidence seen at now_ms. Evidence that does not count
 * (job, unknown, none classes), that is older than the window, or whose
 * key is already recorded changes nothing. Decides the taint and the
 * breaker. Fills *a completely. Pure; n is the caller's.
 */
void nq_add(struct nq_node *n, const struct nq_policy *p,
            const struct nq_evidence *ev, int64_t now_ms,
            const struct nq_cluster *c, struct nq_actions *a);

/*
 * Whether this node's own evidence agrees with a pair verdict that
 * another node's pod reported against it: a counted verdict of its own
 * pods, or a cross-node failure of its own (cross_ms), within the window
 * at now_ms. Pure.
 */
int nq_agrees(const struct nq_node *n, const struct nq_policy *p,
              int64_t now_ms);

/*
 * Adds a pair verdict that another node's pod reported against this node
 * (ev->peer names that node). It counts, as nq_add, only once nq_agrees;
 * before that it changes nothing (a->counted 0), and the caller offers it
 * again later. Fills *a completely.
 */
void nq_add_peer(struct nq_node *n, const struct nq_policy *p,
                 const struct nq_evidence *ev, int64_t now_ms,
                 const struct nq_cluster *c, struct nq_actions *a);

/*
 * The periodic step: forgets evidence past the window, notices a taint
 * lifted by hand (tainted_now == 0 while quarantined), the expiry, a due
 * validation (only when no validation pod runs), and a withheld taint the
 * breaker now allows. Fills *a completely.
 */
void nq_tick(struct nq_node *n, const struct nq_policy *p, int64_t now_ms,
             int tainted_now, const struct nq_cluster *c, struct nq_actions *a);

/* A validation pod ended: passed lifts the taint and forgets the
 * evidence; a failure keeps it and doubles the cooldown. */
void nq_validated(struct nq_node *n, const struct nq_policy *p, int passed,
                  const char *why, int64_t now_ms, struct nq_actions *a);

/* "healthy", "suspect", "unhealthy", "withheld", "quarantined". */
const char *nq_kind_name(enum nq_kind k);

/* The NCCLHealthy condition for n: status "True" or "False", a CamelCase
 * reason and a message (into the caller's buffers). */
void nq_condition(const struct nq_node *n, const struct nq_policy *p,
                  const char **status, char *reason, size_t rn, char *msg,
                  size_t mn);

/*
 * The annotation form of n: one JSON object. Returns 0, or -1 when buf is
 * too small. nq_decode reads it back (bounded, every field checked);
 * returns 0, or -1 with err filled and n reset to healthy.
 */
int nq_encode(const struct nq_node *n, char *buf, size_t len)
    __attribute__((warn_unused_result));
int nq_decode(const char *json, size_t len, struct nq_node *n,
              struct ng_error *err) __attribute__((warn_unused_result));

#endif
