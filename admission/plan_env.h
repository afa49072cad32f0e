/* Env and the profile: the platform's NCCL profile first in envFrom, and
 * the policy's extra env, debug variables and NCCL_CONF_FILE in each GPU
 * container. */
#ifndef NCCLGUARD_PLAN_ENV_H
#define NCCLGUARD_PLAN_ENV_H

#include "admission/plan.h"

/* {configMapRef: {name, optional}} of the policy's profile; NULL when out
 * of memory. Returned to the caller, who owns it. */
json_t *profile_ref(const struct settings *s);

/* Whether container object c already has a configMapRef called name in
 * its envFrom. */
bool profile_present(const json_t *c, const char *name);

/* Plans the profile's envFrom (c->profile_add) for each GPU container that
 * lacks it, when the policy enables the profile. */
void plan_profile(struct plan *p);

/* Plans each GPU container's extra env, debug variables (when the
 * decision asks for debug) and, under onFailure: fallback with a ring
 * check, NCCL_CONF_FILE. Call after ringcheck_decide(). Returns 0, or -1
 * when out of memory. */
int plan_env(struct plan *p) __attribute__((warn_unused_result));

#endif
