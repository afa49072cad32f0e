/* IPC: the capabilities NCCL's transports need (IPC_LOCK ...) in each GPU
 * container, and spec.hostIPC when the policy asks for it. */
#ifndef NCCLGUARD_PLAN_IPC_H
#define NCCLGUARD_PLAN_IPC_H

#include "admission/plan.h"

/* Plans the policy's ipc.capabilities (c->cap_add) that each GPU container
 * lacks, warning where IPC_LOCK has no effect (non-root), and hostIPC
 * (p->host_ipc_add). Returns 0, or -1 when out of memory. */
int plan_ipc(struct plan *p) __attribute__((warn_unused_result));

#endif
