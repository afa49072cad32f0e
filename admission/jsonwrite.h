/* jansson values written as compact JSON text straight into a buffer. */
#ifndef NCCLGUARD_JSONWRITE_H
#define NCCLGUARD_JSONWRITE_H

#include <jansson.h>

#include "base/buf.h"

/*
 * Appends v as compact JSON: the same bytes as json_dumps(v, JSON_COMPACT |
 * JSON_ENCODE_ANY) (object keys in insertion order, jansson's escapes and
 * real formatting), without building the text elsewhere first. v is
 * borrowed; its strings must be valid UTF-8 (jansson's constructors make
 * sure of that). Nesting deeper than 2048 levels, a NaN or an infinity
 * fails. Returns 0, or -1 when the buffer's cap would be passed or memory
 * ran out (the buffer then holds part of v: the caller drops it). Not
 * thread-safe on one buffer.
 */
int jsonwrite_value(struct buf *b, const json_t *v)
    __attribute__((warn_unused_result));

#endif
