/* /dev/shm and memory: a memory-backed /dev/shm sized per GPU (or the
 * pod's own grown), mounted in every GPU container, and the memory limits
 * that tmpfs pages count against. */
#ifndef NCCLGUARD_PLAN_SHM_H
#define NCCLGUARD_PLAN_SHM_H

#include "admission/plan.h"

/* The resources kinds that ctr.mem_new indexes: "limits", "requests". */
extern const char *const mem_kinds[2];

/* Plans /dev/shm: its size (p->shm_size), the new volume or the growth of
 * the pod's own (p->shm_grow), its name (p->shm_volume, also when
 * shm is off but the pod has one, for the ring check) and its mount in
 * each GPU container; warns about a /dev/shm it keeps. Returns 0, or -1
 * when out of memory or no volume name is free. */
int plan_shm(struct plan *p) __attribute__((warn_unused_result));

/* After plan_shm(): warns about, or under shm.memoryLimit: raise plans
 * (c->mem_new), the memory limits the shm size exceeds. */
void plan_memory(struct plan *p);

#endif
