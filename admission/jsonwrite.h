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

/* Appends s (n bytes, valid UTF-8: the caller vouches) as a quoted JSON
 * string with jansson's escapes, the bytes jsonwrite_value() writes for
 * json_stringn(s, n). Returns as jsonwrite_value(). */
int jsonwrite_string(struct buf *b, const char *s, size_t n)
    __attribute__((warn_unused_result));

/* Appends an integer / a real as jsonwrite_value() writes json_integer(i)
 * / json_real(d) (a NaN or an infinity fails). Returns as
 * jsonwrite_value(). */
int jsonwrite_integer(struct buf *b, json_int_t i)
    __attribute__((warn_unused_result));
int jsonwrite_real(struct buf *b, double d) __attribute__((warn_unused_result));

/*
 * As jsonwrite_value(), within the caps of a log line (base/text.h says
 * them; str_max at least 3): a string longer than str_max bytes is written
 * cut on a UTF-8 character boundary and ending in "…" (U+2026), str_max
 * bytes at most in all; an array longer than array_max is written as its
 * first array_max elements and then the string "… N more". The caps apply
 * to v and to 16 levels below it; deeper values are written whole. v is
 * left as it is. Returns as jsonwrite_value().
 */
int jsonwrite_capped(struct buf *b, const json_t *v, size_t str_max,
                     size_t array_max) __attribute__((warn_unused_result));

#endif
