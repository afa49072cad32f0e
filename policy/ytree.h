/* A small YAML document tree with source positions, built from libyaml's
 * events under explicit caps, for the policy loader and `policy lint`. */
#ifndef NCCLGUARD_YTREE_H
#define NCCLGUARD_YTREE_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/diag.h"

enum ynode_kind { YNODE_SCALAR, YNODE_SEQ, YNODE_MAP };

struct ynode {
    enum ynode_kind kind;
    int line; /* 1-based */
    int col;
    /* Scalars: the text (NUL-terminated, may contain NULs: use len). */
    char *str;
    size_t len;
    bool plain;    /* unquoted, untagged: subject to implicit typing */
    bool null_tag; /* "~", "null", "" plain, or !!null */
    /* Sequences: items. Mappings: keys[i] -> items[i]. */
    struct ynode **items;
    struct ynode **keys;
    size_t n;
};

/* Limits a tree is built under; exceeding one is an error. */
struct ytree_caps {
    size_t max_bytes; /* whole input */
    int max_depth;    /* nesting of collections */
    size_t max_nodes; /* nodes created (aliases count) */
    size_t max_docs;
};

struct ytree;

/*
 * Parses buf (len bytes, need not be NUL-terminated) into a tree. Errors
 * (syntax, caps, unknown alias) go into *d with positions; on any error
 * returns NULL. A mapping may hold at most 1024 keys and a stream at most
 * 256 aliases. Duplicate mapping keys are reported as errors too, since
 * a YAML mapping with repeated keys is ambiguous. Free with ytree_free().
 * Pure on (buf, len): no I/O, no global state. Thread-safe.
 */
struct ytree *ytree_parse(const char *buf, size_t len,
                          const struct ytree_caps *caps, struct diags *d)
    __attribute__((warn_unused_result));

/* Number of documents and the i-th root (never NULL for i < n). */
size_t ytree_ndocs(const struct ytree *t);
const struct ynode *ytree_doc(const struct ytree *t, size_t i);

/* Frees the tree. ytree_free(NULL) is a no-op. */
void ytree_free(struct ytree *t);

/* Mapping lookup by key text; NULL when absent or n is not a mapping. */
const struct ynode *ynode_get(const struct ynode *n, const char *key);

/* A short description of the node's type for messages ("a string",
 * "a list", "a mapping", "a number", "a boolean", "null"). */
const char *ynode_type_name(const struct ynode *n);

#endif
