/* The emit pass: the one place that writes patch operations, and so the
 * one place that decides their order. */
#ifndef NCCLGUARD_PLAN_EMIT_H
#define NCCLGUARD_PLAN_EMIT_H

#include "admission/plan.h"

/* Writes into p->pt, as text, the operations for what the plan_* steps
 * planned, in the fixed order documented at its definition, and the
 * ncclguard.io/ annotations when anything else was written (compact
 * JSON, the planned values written as they are, so no op object is
 * built). Returns 0 (an empty patch: nothing to do), or -1 when out of memory.
 */
int plan_emit(struct plan *p) __attribute__((warn_unused_result));

#endif
