/* The ring-check plan, all of it: whether the init container is added
 * (the decision and its size bounds), multi-node membership, its name,
 * arguments, env (least privilege), resources, security context, mounts
 * and run volume. */
#ifndef NCCLGUARD_PLAN_RINGCHECK_H
#define NCCLGUARD_PLAN_RINGCHECK_H

#include "admission/plan.h"

/* Whether the pod holds a ring check of ours already (ctr_is_ringcheck()). */
bool ringcheck_present(const struct plan *p);

/* Decides whether the init container is added (p->rc_inject, with its GPU
 * count p->rc_expect and membership p->mn, p->mn_env), before any other
 * step, so that nothing refers to a check that is left out; notes why in
 * p->res->ringcheck and warns where the user can fix it. Returns 0, or -1
 * when out of memory. */
int ringcheck_decide(struct plan *p) __attribute__((warn_unused_result));

/* Builds the init container that ringcheck_decide() chose into
 * p->rc_text (its compact JSON, owned by the plan), with its run volume under
 * onFailure: fallback. Call after every other plan step: the check copies
 * the env they give its model container. Returns 0, or -1 when out of
 * memory or no name is free (with p->res->reason). */
int plan_ringcheck(struct plan *p) __attribute__((warn_unused_result));

#endif
