/* Memory for jansson values: a per-thread bump arena that the HTTP layer
 * opens around one admission, so decoding, planning and encoding a review
 * make no malloc/free calls of their own. */
#ifndef NCCLGUARD_JSONMEM_H
#define NCCLGUARD_JSONMEM_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Routes jansson's allocations through this module (json_set_alloc_funcs).
 * Call once, before threads use jansson. Outside an open arena the
 * allocations go to malloc/free as before. NCCLGUARD_JSON_ARENA=0 in the
 * environment keeps plain malloc (make valgrind sets it, so that memcheck
 * sees every value). Under AddressSanitizer the arena stays on and poisons
 * memory no live value owns (see jsonmem_poisoning). Not thread-safe.
 */
void jsonmem_install(void);

/*
 * Opens the calling thread's arena: jansson values made from now on come
 * from it, and freeing them costs nothing. Thread-safe (per thread).
 */
void jsonmem_begin(void);

/*
 * Closes the calling thread's arena and reclaims everything allocated
 * since jsonmem_begin(). Every value made inside must be dead by then
 * (decref'd, or simply abandoned): nothing from the arena may be used
 * after this call. Keeps one modest chunk for the next request.
 */
void jsonmem_end(void);

/*
 * Frees text returned by json_dumps() and friends, which may come from
 * the arena; use it instead of free() for such text. NULL is a no-op.
 */
void jsonmem_free(void *p);

/* True when jsonmem_install() routed jansson through the arena. */
bool jsonmem_installed(void);

/* True when the arena is installed in an AddressSanitizer build: a freed
 * value, the red zone after each value and a closed arena's memory are
 * poisoned, so touching them is reported. */
bool jsonmem_poisoning(void);

/* Bytes handed out by the calling thread's arena since it was last reset
 * (0 when none is open). For tests and diagnostics. */
size_t jsonmem_used(void);

#endif
