/* The watchdog env: NCCLGUARD_WATCHDOG and the pod's identity for the
 * node agent, NCCL's RAS address and PyTorch's flight recorder, and the
 * checkpoint folder's volume. */
#ifndef NCCLGUARD_PLAN_WATCHDOG_H
#define NCCLGUARD_PLAN_WATCHDOG_H

#include "admission/plan.h"

/* When the policy enables the watchdog, plans for each GPU app container
 * and native sidecar the agent's spec (contract/wdspec.h), the Downward
 * API variables, the hang-confirmation variables and a mount of the
 * checkpoint file's folder. A variable the pod sets itself wins. Returns
 * 0, or -1 when out of memory or no volume name is free. */
int plan_watchdog(struct plan *p) __attribute__((warn_unused_result));

#endif
