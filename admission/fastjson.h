/* A fast JSON decoder for the review path: simdjson parses and validates
 * the whole document, and only the parts a shape names are built as
 * jansson values. */
#ifndef NCCLGUARD_FASTJSON_H
#define NCCLGUARD_FASTJSON_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The deepest nesting accepted (objects and arrays), as jansson's own
 * cap did before: deeper documents are refused. */
#define FASTJSON_MAX_DEPTH 1024

/* How much of one value to build. */
enum fastjson_keep {
    FASTJSON_ALL = 0, /* the value, whole */
    FASTJSON_FIELDS,  /* an object: only the fields listed, each shaped */
    FASTJSON_EACH,    /* an array: every element, shaped by each */
    FASTJSON_FIRST    /* an array: its first element only, whole */
};

struct fastjson_shape;

/* One field an object keeps; the list ends with a NULL key. */
struct fastjson_field {
    const char *key;
    const struct fastjson_shape *shape; /* NULL: the value, whole */
};

/*
 * What the decoder builds of a value. A value whose type does not match
 * the shape (a string where FIELDS expects an object, an object where
 * EACH expects an array) is built whole, so that the reader sees what
 * was sent. Arrays keep their order, and EACH keeps their length, so an
 * index into the built array is the same as into the document.
 */
struct fastjson_shape {
    enum fastjson_keep keep;
    const struct fastjson_field *fields; /* FIELDS */
    const struct fastjson_shape *each;   /* EACH; NULL: elements whole */
    /* FIELDS: a value that is not an object is built as null instead of
     * whole (for the elements of a list whose reader skips non-objects:
     * the list keeps its length, and 2 million numbers cost nothing). */
    bool others_null;
};

/* Why a document was refused: one line, lower case, at most 255 bytes,
 * saying where (a JSON pointer or a byte offset) when that is known. */
struct fastjson_error {
    char text[256];
    bool oom;    /* out of memory, not a bad document */
    bool syntax; /* a syntax error whose place simdjson does not say */
    bool depth;  /* nested deeper than FASTJSON_MAX_DEPTH somewhere */
};

/*
 * Parses text (len bytes, not NUL-terminated; any bytes) and returns the
 * parts of it that shape names (NULL: the whole document) as a new
 * jansson value, or NULL with *err filled when the document is refused:
 * not JSON, invalid UTF-8, nesting deeper than FASTJSON_MAX_DEPTH, a
 * number that does not fit (an integer outside int64, a real beyond
 * double), "\u0000" in a string or key, or a key given twice in one
 * object anywhere in the document (the parts not built are checked all
 * the same). Costs time linear in len. On allocation failure returns NULL
 * with err->oom set. The values come from jansson's
 * allocator (the per-request arena when one is open).
 *
 * Thread-safe: each thread keeps its own parser and buffers, reused from
 * one call to the next (a thread's parser is dropped after a document
 * over 256 KiB, so a huge review does not pin memory).
 */
json_t *fastjson_decode(const char *text, size_t len,
                        const struct fastjson_shape *shape,
                        struct fastjson_error *err);

/* Frees the calling thread's parser and buffers now (they are also freed
 * when the thread exits). */
void fastjson_thread_release(void);

#ifdef __cplusplus
}
#endif

#endif
