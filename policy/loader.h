/* Shared inside policy/ only: the snapshot's layout, the loader's state,
 * and the validation helpers (policy/validate.c) the loader, the settings
 * schema and the decision use. Not an interface for other modules. */
#ifndef NCCLGUARD_POLICY_LOADER_H
#define NCCLGUARD_POLICY_LOADER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/diag.h"
#include "policy/match.h"
#include "policy/policy.h"
#include "policy/ytree.h"

/* Caps on what a policy file may contain. */
#define POLICY_MAX_BYTES (1024 * 1024)
#define POLICY_MAX_DEPTH 32
#define POLICY_MAX_NODES 50000
#define POLICY_MAX_RULES 256
#define POLICY_MAX_LIST 256
#define POLICY_MAX_STRING 1024
/* Milliseconds in a minute and a day, for duration bounds. */
#define Q_MINUTE_MS (60 * 1000LL)
#define Q_DAY_MS (24 * 60 * Q_MINUTE_MS)

struct rule {
    char *name;
    int line;
    int col;
    struct match match;
    bool skip;
    struct settings settings; /* defaults merged with the rule's own */
};

struct policy {
    atomic_int refs;
    char hash[65];
    struct settings defaults;
    struct rule *rules;
    size_t n_rules;
    struct policy_dra dra;
    struct policy_quarantine quarantine; /* defaults.quarantine */
    /* Every allocation the snapshot owns, freed together. */
    void **blocks;
    size_t n_blocks;
    size_t cap_blocks;
    bool oom;
};

struct loader {
    struct policy *p;
    struct diags *d;
};

/* An allocation owned by p's snapshot, zeroed; NULL (and p->oom set) when
 * memory runs out. Freed with the snapshot. */
void *pl_alloc(struct policy *p, size_t n);
/* A copy of s owned by p's snapshot, or NULL as pl_alloc(). */
char *pl_strdup(struct policy *p, const char *s);

/* An error or a warning at node n's line:column (none when n is NULL). */
void pl_err(struct loader *L, const struct ynode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pl_warn(struct loader *L, const struct ynode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reports each key of map that is not in the NULL-terminated allowed,
 * with a did-you-mean or the section it belongs under; where names the
 * mapping in messages. */
void pl_check_keys(struct loader *L, const struct ynode *map,
                   const char *const *allowed, const char *where);

/* The name in the NULL-terminated names closest to word, for "did you
 * mean", or NULL when none is close enough. */
const char *pl_closest(const char *word, const char *const *names);

/*
 * The getters: each checks node n for what it must be (what names it in
 * messages), reports the error at n and returns false, or stores the value
 * in *out and returns true. Strings are copied into the snapshot.
 */
bool pl_want_map(struct loader *L, const struct ynode *n, const char *what);
bool pl_want_text(struct loader *L, const struct ynode *n, const char *what);
bool pl_get_bool(struct loader *L, const struct ynode *n, const char *what,
                 bool *out);
bool pl_get_string(struct loader *L, const struct ynode *n, const char *what,
                   char **out);
bool pl_get_int(struct loader *L, const struct ynode *n, const char *what,
                int64_t lo, int64_t hi, int64_t *out);
/* A non-negative finite number. */
bool pl_get_number(struct loader *L, const struct ynode *n, const char *what,
                   double *out);
/* A quantity of whole, non-negative bytes. */
bool pl_get_bytes(struct loader *L, const struct ynode *n, const char *what,
                  int64_t *out);
/* One of the NULL-terminated names; *out is its index. */
bool pl_get_enum(struct loader *L, const struct ynode *n, const char *what,
                 const char *const *names, int *out);
/* A duration in ms, s or m within [lo, hi] ms (the agent's parser). */
bool pl_get_duration(struct loader *L, const struct ynode *n, const char *what,
                     int64_t lo, int64_t hi, int64_t *out);
/* As pl_get_duration(), the bounds written in the largest whole unit. */
bool pl_get_duration_minutes(struct loader *L, const struct ynode *n,
                             const char *what, int64_t lo, int64_t hi,
                             int64_t *out);
/* ms in the largest of m, s, ms that writes it whole; returns buf. */
const char *pl_duration_text(int64_t ms, char *buf, size_t n);

/* A check of one string node (already known to be text). */
typedef bool (*pl_check_fn)(struct loader *L, const struct ynode *n,
                            const char *what);

/* A list of distinct strings, each passing check (may be NULL); a null
 * node is the empty list. */
bool pl_get_string_list(struct loader *L, const struct ynode *n,
                        const char *what, pl_check_fn check, char ***out,
                        size_t *count);

/* Single-value checks, as pl_check_fn. */
bool pl_check_resource_name(struct loader *L, const struct ynode *n,
                            const char *what);
bool pl_check_dns_name(struct loader *L, const struct ynode *n,
                       const char *what);
/* Warns for capabilities Pod Security "baseline" refuses. */
bool pl_check_capability(struct loader *L, const struct ynode *n,
                         const char *what);
bool pl_check_image(struct loader *L, const struct ynode *n, const char *what);
bool pl_check_cpu_quantity(struct loader *L, const struct ynode *n,
                           const char *what);
bool pl_check_env_name(struct loader *L, const struct ynode *n,
                       const char *what);
/* An address template (policy_template_next()). */
bool pl_check_template(struct loader *L, const struct ynode *n,
                       const char *what);
/* The NCCL catalog on NAME=VALUE; its warnings and errors at n. */
bool pl_check_nccl(struct loader *L, const struct ynode *n, const char *name,
                   const char *value);

#endif
