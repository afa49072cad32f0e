/* A fast compact JSON encoder for jansson values, byte-for-byte the same
 * output as json_dumps(v, JSON_COMPACT), for the request path. */
#ifndef NCCLGUARD_JSONENC_H
#define NCCLGUARD_JSONENC_H

#include <stddef.h>

#include <jansson.h>

/*
 * Encodes v (any JSON value; borrowed) as compact JSON, exactly as
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) would: insertion order,
 * no spaces, the same string escapes and number formats. jansson's own
 * dumper validates every string's UTF-8 again and grows its buffer in
 * small steps; jansson strings are valid UTF-8 already, so this one
 * copies runs of plain bytes at once. Returns a NUL-terminated string to
 * free() and its length in *len (may be NULL), or NULL when out of memory
 * or when v nests deeper than 2048 levels or holds a non-finite real.
 * Thread-safe: v is only read.
 */
char *jsonenc_dumps(const json_t *v, size_t *len)
    __attribute__((warn_unused_result));

#endif
