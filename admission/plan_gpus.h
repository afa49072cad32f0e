/* GPU counting: the GPUs of each container and of the pod as the
 * scheduler sums them (native sidecars included), DRA claims, and why a
 * pod with none is left alone (MIG slices, other vendors, DRA). */
#ifndef NCCLGUARD_PLAN_GPUS_H
#define NCCLGUARD_PLAN_GPUS_H

#include "admission/plan.h"

/* The annotation a user sets to give a DRA pod's GPU count, and its bound. */
#define ANN_CLAIM_GPUS "ncclguard.io/claim-gpus"
#define CLAIM_GPUS_MAX 1024

/* Counts, for the n_names resource names given (at most
 * MUTATE_MAX_RESOURCES are used), each container's GPUs (c->gpus,
 * c->per_res; 0 for a ring check of ours) and the pod's per resource
 * (p->pod_per_res, p->sidecar_per_res). Returns 0, or -1 after a warning
 * on a count that is not a whole non-negative number. */
int gpus_count(struct plan *p, char *const *names, size_t n_names)
    __attribute__((warn_unused_result));

/* The pod's GPUs over every counted resource, after gpus_count(). */
int64_t gpus_total(const struct plan *p);

/* Whether two settings count the same GPU resource names, in order. */
bool names_equal(const struct settings *a, const struct settings *b);

/* For a pod with no counted GPU: its GPUs through DRA claims, from
 * ANN_CLAIM_GPUS or the policy's dra.claimTemplates; the containers that
 * use those claims become GPU containers. Sets p->dra_gpus (maybe 0) and
 * p->dra_claims. Call after gpus_count(). Returns 0, or -1 after a warning
 * about the annotation or when out of memory. */
int dra_apply(struct plan *p, const struct policy *pol)
    __attribute__((warn_unused_result));

/* Writes into p->res->reason why a pod with no counted GPU is left alone,
 * when the reason is one a user would not guess; else leaves it. */
void not_gpu_reason(struct plan *p);

/* Counts the GPUs of a pod skipped before counting (for the summaries),
 * into p->res->gpus, leaving its warnings and reason as they were. */
void skipped_gpus(struct plan *p, const struct policy *pol);

#endif
