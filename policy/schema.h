/* The policy's settings schema: every key under defaults: (and a rule's
 * settings:) is one row of one table, with its type, bounds, default and
 * description. The loader, lint, the built-in defaults and the reference
 * table in docs/policy.md all come from these rows. */
#ifndef NCCLGUARD_POLICY_SCHEMA_H
#define NCCLGUARD_POLICY_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy/loader.h"

enum schema_type {
    SCHEMA_SECTION,  /* a mapping of the rows under this path */
    SCHEMA_BOOL,     /* true or false */
    SCHEMA_INT,      /* an integer in [lo, hi] */
    SCHEMA_NUMBER,   /* a non-negative number */
    SCHEMA_BYTES,    /* a quantity of whole bytes */
    SCHEMA_QBYTES,   /* the same, kept as the text written */
    SCHEMA_STRING,   /* text, passing check (or the NCCL catalog) */
    SCHEMA_ENUM,     /* one of names */
    SCHEMA_DURATION, /* ms, s or m in [lo, hi] ms */
    SCHEMA_MINUTES,  /* the same, bounds written in minutes */
    SCHEMA_LIST,     /* distinct strings, each passing check */
    SCHEMA_CUSTOM    /* parse() does it all */
};

/* How a value is stored at the row's offset. */
enum schema_field {
    SF_NONE,
    SF_BOOL, /* bool */
    SF_INT,  /* int */
    SF_I64,  /* int64_t */
    SF_DBL,  /* double */
    SF_STR,  /* char *, owned by the snapshot */
    SF_CSTR, /* const char *, one of the row's static names */
    SF_ENUM, /* an enum (int-sized): base + the name's index */
    SF_LIST  /* char ** at off, its size_t count at off2 */
};

/* Row flags. */
#define SCHEMA_LATE 1u /* read after its siblings (their order in lint) */
#define SCHEMA_NODE                                                            \
    2u /* node-level: under defaults: only; the row and                        \
        * its children store into struct policy_quarantine */

/* The most rows the table may have (a static check in schema.c). */
#define SCHEMA_MAX_ROWS 96

/* What a settings block set, row by row: the node of each value that was
 * stored, for checks across keys (shm.min <= shm.max). */
struct schema_ctx {
    const struct ynode *set[SCHEMA_MAX_ROWS];
};

struct schema_key {
    const char *path; /* "ringCheck.resources.cpu": also its name in messages */
    enum schema_type type;
    enum schema_field field;
    size_t off, off2;         /* in struct settings (or policy_quarantine) */
    int64_t lo, hi;           /* INT, DURATION, MINUTES */
    const char *const *names; /* ENUM, NULL-terminated */
    int base;                 /* ENUM: the value of names[0] */
    pl_check_fn check;        /* STRING, LIST */
    const char *nccl;         /* STRING: the NCCL variable its value sets */
    /* CUSTOM: reads v into base; true when it stored a value. */
    bool (*parse)(struct loader *L, const struct ynode *v, void *base);
    /* After a value was stored (warnings on it). */
    void (*on_set)(struct loader *L, const struct ynode *v, void *base);
    /* SECTION: after its rows, when it is present and a mapping. */
    void (*after)(struct loader *L, const struct ynode *sec, void *base,
                  const struct schema_ctx *ctx);
    /* After the row in its parent mapping, present or not. */
    void (*next)(struct loader *L, const struct ynode *parent, void *base);
    unsigned flags;
    const char *def;    /* the default as policy/default.yaml writes it;
                         * NULL: left out; "[]": the empty list */
    const char *bounds; /* docs: what is allowed, where the type and
                         * lo/hi/names do not say it */
    const char *doc;    /* one line */
};

/* The rows, in the order policy/default.yaml writes them (a section before
 * its rows). Static; thread-safe. */
size_t schema_count(void);
const struct schema_key *schema_row(size_t i);

/* The index of the row with this path, or -1. */
int schema_find(const char *path);

/* The node that set the row named path in ctx, or NULL. */
const struct ynode *schema_set_node(const struct schema_ctx *ctx,
                                    const char *path);

/*
 * The built-in defaults: every row's def, read as if written in the
 * policy, into *s and *q (zeroed first). A default the rows cannot read is
 * an error at 0:0 in L (a bug in the table; the unit tests load it).
 */
void schema_builtin(struct loader *L, struct settings *s,
                    struct policy_quarantine *q);

/*
 * Reads a settings block n over *s (already holding the base values). q:
 * the policy's node-level block for defaults:, NULL for a rule's settings,
 * where a node-level key is an error. what names the block in messages
 * ("defaults", "settings"). ctx is filled.
 */
void schema_parse_settings(struct loader *L, const struct ynode *n,
                           struct settings *s, struct policy_quarantine *q,
                           const char *what, struct schema_ctx *ctx);

/*
 * The names of the direct children of the section at path ("" = the
 * settings block), in table order, NULL-terminated, into names[max].
 * node_level: 1 only node-level rows, 0 only the others, -1 both.
 * Returns their number.
 */
size_t schema_children(const char *path, int node_level, const char **names,
                       size_t max);

/*
 * The reference table of docs/policy.md (Markdown, one line per row), into
 * a buffer the caller frees; NULL when out of memory.
 */
char *schema_markdown(void) __attribute__((warn_unused_result));

#endif
