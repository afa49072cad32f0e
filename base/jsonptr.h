/* RFC 6901 JSON pointers over jansson trees: one reading for everyone. */
#ifndef NCCLGUARD_JSONPTR_H
#define NCCLGUARD_JSONPTR_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* Longest reference token accepted, in bytes after unescaping, NUL
 * included. Longer tokens make the pointer malformed rather than being cut
 * short: a cut token could name another member. */
#define JSONPTR_MAX_TOKEN 1024

/*
 * The grammar, as RFC 6901 has it:
 *   - a pointer is "" (the whole document) or a sequence of "/" tokens;
 *     anything else (say "a/b") is malformed;
 *   - in a token "~0" stands for '~' and "~1" for '/'; any other '~' is
 *     malformed; escapes are undone once, left to right, so "~01" is the
 *     key "~1";
 *   - on an array a token is an index: decimal digits with no leading zero
 *     ("0" itself is fine, "01", "+1", " 1", "1e0" are not), below the
 *     array's size; "-" (one past the end) only where the caller says an
 *     append is meant (jsonptr_index() with end_ok), never when resolving.
 * Everything here is linear in the pointer's length; an index is never
 * read past the digits the array's size has, so a huge one costs nothing.
 */

/*
 * Reads the reference token that starts at *p, which must point at its
 * '/', unescaped into tok (n bytes, NUL included). On success advances *p
 * to the next '/' or the terminating NUL and returns the token's length;
 * returns -1 (p and tok unspecified) on a bad escape or a token that does
 * not fit. Thread-safe.
 */
int jsonptr_token_next(const char **p, char *tok, size_t n)
    __attribute__((warn_unused_result));

/*
 * Reads tok as an index into an array of size elements. "-" is size when
 * end_ok (an append) and refused otherwise. Returns 0 with *i set (below
 * size, or equal to it for "-" or when end_ok), or -1 for a token that is
 * not an index or is out of range. Thread-safe.
 */
int jsonptr_index(const char *tok, size_t size, bool end_ok, size_t *i)
    __attribute__((warn_unused_result));

/*
 * Resolves pointer in doc. Returns the node it names (borrowed from doc),
 * or NULL when the pointer is NULL or malformed or names nothing. Thread-
 * safe as long as nobody writes doc meanwhile.
 */
json_t *jsonptr_get(json_t *doc, const char *pointer);

/*
 * Escapes token (an object key) for a pointer: '~' becomes "~0" and '/'
 * becomes "~1". Writes at most n bytes including the NUL. Returns 0, or -1
 * when the result does not fit (buf then holds a NUL-terminated prefix
 * that ends on a whole escape, when n > 0). Thread-safe.
 */
int jsonptr_escape(const char *token, char *buf, size_t n)
    __attribute__((warn_unused_result));

#endif
