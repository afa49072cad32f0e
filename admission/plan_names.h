/* Names in one pod: a set of borrowed strings, unique volume names, the
 * pod's container names, and how a ring check of ours is recognised. */
#ifndef NCCLGUARD_PLAN_NAMES_H
#define NCCLGUARD_PLAN_NAMES_H

#include "admission/plan.h"

/* Whether set holds name. A zeroed set is empty. */
bool nameset_has(const struct nameset *set, const char *name);

/* Adds name (borrowed: it must outlive the set) unless present. Returns 0,
 * or -1 when out of memory (the set is unchanged). */
int nameset_add(struct nameset *set, const char *name)
    __attribute__((warn_unused_result));

/* Makes room for about n more names at once, so that filling the set from
 * a list of known length rehashes nothing. Returns 0, or -1 when out of
 * memory. */
int nameset_reserve(struct nameset *set, size_t n)
    __attribute__((warn_unused_result));

/* Frees the set's slots and zeroes it; safe on a zeroed set. */
void nameset_release(struct nameset *set);

/* The volume of spec.volumes called name (borrowed from the pod), or
 * NULL. */
const json_t *volume_find(const struct plan *p, const char *name);

/* Writes into out (n bytes) base, or base-2, base-3, ... up to base-1000,
 * whichever no volume of the pod or of the plan uses yet. Returns 0, or -1
 * when out of memory or all are taken. */
int volume_name_unique(struct plan *p, const char *base, char *out, size_t n)
    __attribute__((warn_unused_result));

/* Whether c is a ring check this webhook injected (on an earlier review of
 * the same pod): an init container called RINGCHECK_NAME, or
 * RINGCHECK_NAME-N whose first argument is RINGCHECK_FIRST_ARG. */
bool ctr_is_ringcheck(const struct ctr *c);

/* Builds p->ctr_names once: every container name of the pod, ephemeral
 * containers included. Returns 0, or -1 when out of memory. */
int ctr_names_build(struct plan *p) __attribute__((warn_unused_result));

#endif
