/* A strict, bounded JSON (RFC 8259) parser that builds jansson values
 * straight from the request buffer: the decode step of review_handle(). */
#ifndef NCCLGUARD_JPARSE_H
#define NCCLGUARD_JPARSE_H

#include <stddef.h>

#include <jansson.h>

#include "error.h"

/* Deepest nesting of arrays and objects accepted. */
#define JPARSE_MAX_DEPTH 128

/*
 * Parses exactly one JSON value (surrounding whitespace allowed) from the
 * len bytes at buf, which need not be NUL-terminated. Accepts what jansson's
 * json_loadb(buf, len, JSON_REJECT_DUPLICATES) accepts, with the same
 * values (integers that do not fit in json_int_t are rejected, and so is
 * an object with a key twice), except that nesting stops at
 * JPARSE_MAX_DEPTH. Strings must be valid UTF-8 without NUL characters.
 * Returns an owned value, or NULL with err holding the reason and its
 * line:column. Thread-safe.
 */
json_t *jparse_load(const char *buf, size_t len, struct ng_error *err)
    __attribute__((warn_unused_result));

#endif
