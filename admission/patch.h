/* RFC 6902 JSON Patch: building operations with RFC 6901 pointers, a
 * local apply (RFC 6902 as written), and the stricter check every patch
 * passes before it is sent (no add onto an existing key). */
#ifndef NCCLGUARD_PATCH_H
#define NCCLGUARD_PATCH_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"

/* Most operations one patch may hold; patch_apply() refuses longer ones. */
#define PATCH_MAX_OPS 1024

/* Longest JSON pointer built or accepted, in bytes. */
#define PATCH_MAX_POINTER 1024

/*
 * Escapes one reference token (an object key) for a JSON pointer: '~'
 * becomes "~0" and '/' becomes "~1". Writes at most n bytes including the
 * NUL. Returns 0, or -1 when the result does not fit (buf then holds a
 * truncated, NUL-terminated prefix). Thread-safe. The same as
 * jsonptr_escape() in base/jsonptr.h.
 */
int patch_pointer_escape(const char *token, char *buf, size_t n)
    __attribute__((warn_unused_result));

/*
 * Appends one operation {"op", "path", "value"} to patch (a JSON array).
 * value is consumed (stolen) even on failure; it is ignored and may be
 * NULL for "remove". Returns 0, or -1 on allocation failure.
 */
int patch_append(json_t *patch, const char *op, const char *path, json_t *value)
    __attribute__((warn_unused_result));

/* One op of a patch_text: add or replace, and its path (raw, not JSON
 * escaped) at paths.p + path_off, path_len bytes and a NUL. */
struct patch_text_op {
    bool add;
    size_t path_off;
    size_t path_len;
};

/*
 * A patch written as text while it is built, so that the review's answer
 * needs no jansson patch: text holds the compact JSON array of
 * {"op","path","value"} objects, the very bytes jsonwrite_value() writes
 * for the jansson array that patch_append() would have built from the same
 * calls. ops keeps each op's kind and path for patch_text_check(). Set up
 * with patch_text_init(), freed with patch_text_release(). Not
 * thread-safe on one patch.
 */
struct patch_text {
    struct buf text;  /* "[op,op" until patch_text_close() adds the "]" */
    struct buf paths; /* the ops' paths, each NUL-terminated */
    struct patch_text_op *ops;
    size_t n_ops, cap_ops;
};

void patch_text_init(struct patch_text *pt);
void patch_text_release(struct patch_text *pt);

/*
 * As patch_append(), written as text: op is "add" or "replace", path
 * starts with '/', and value (not NULL) is consumed even on failure.
 * Returns 0; -1 for another op, path or a NULL value (nothing is written
 * then), or on allocation failure (the patch may then hold part of the
 * op, and is only fit for patch_text_release()).
 */
int patch_text_append(struct patch_text *pt, const char *op, const char *path,
                      json_t *value) __attribute__((warn_unused_result));

/* As patch_text_append(), with a value that is already compact JSON text:
 * len bytes at json (the caller vouches for them), written inside [ ] when
 * list. */
int patch_text_append_raw(struct patch_text *pt, const char *op,
                          const char *path, const char *json, size_t len,
                          bool list) __attribute__((warn_unused_result));

/* Ends the array ("[]" when no op was appended). Returns 0, or -1 on
 * allocation failure. No op may be appended after. */
int patch_text_close(struct patch_text *pt) __attribute__((warn_unused_result));

/*
 * patch_check() of a closed patch_text: the fast check on its ops, and,
 * when that cannot decide, the full check on the text loaded as jansson
 * values (so err has the same words). Returns 0, or -1 with err filled.
 */
int patch_text_check(const json_t *doc, const struct patch_text *pt,
                     struct ng_error *err) __attribute__((warn_unused_result));

/*
 * Resolves a JSON pointer in doc. Returns the node (borrowed), or NULL when
 * the pointer is malformed or names nothing. "" is the whole document.
 * The same as jsonptr_get() in base/jsonptr.h, which says how pointers
 * and array indices are read; patch_apply() reads them that way too.
 */
json_t *patch_pointer_get(json_t *doc, const char *pointer);

/*
 * Applies patch (a JSON array of RFC 6902 operations: add, remove,
 * replace, move, copy, test) to *doc, in order. The root may be replaced,
 * so doc is passed by reference; *doc is owned by the caller before and
 * after. On failure returns -1 and fills err with the failing operation's
 * 0-based index, its path and why; *doc may then be partly patched, so
 * callers check on a copy. Thread-safe for
 * distinct documents.
 */
int patch_apply(json_t **doc, const json_t *patch, struct ng_error *err)
    __attribute__((warn_unused_result));

/*
 * Checks that patch applies to doc as patch_apply() would apply it, and
 * one rule more, without writing doc. The rule: no op adds onto an
 * existing object member. Where RFC 6902 lets an "add" (and so a "copy"
 * or "move") whose path names a key its parent already has replace that
 * value, the check refuses it, with "add onto existing key" after the op
 * and its path in err; patch_apply() itself keeps RFC 6902's semantics.
 * So a writer says "replace" where it means to overwrite, and a plan that
 * took a member for absent is caught here. Inserts into arrays and an add
 * at the root ("") are not onto a member and are checked as RFC 6902 says.
 * A patch of "add" and "replace" ops only (at most 128) is checked against
 * doc directly, with nothing copied: every op's parent exists, its index
 * is in range, a replaced value exists, an added key does not, and no
 * op's path goes through a value an earlier op put there or through an
 * array an earlier op inserted into. Any other patch, or one such an op
 * fails, is applied copy-on-write: the containers a change goes through
 * are copied (shallowly), so the cost follows the patch rather than the
 * document. Returns 0, or -1 with err as patch_apply(): the failing
 * operation's index, op, path and why. Thread-safe as long as nobody
 * writes doc meanwhile.
 */
int patch_check(const json_t *doc, const json_t *patch, struct ng_error *err)
    __attribute__((warn_unused_result));

#endif
