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
    FASTJSON_FIRST,   /* an array: its first element only, whole */
    /* An array: built as that many nulls (so that its length and every
     * index stay the document's), its elements left on the decoder's
     * tape, read through fastjson_lazy_of() (fastjson_decode_doc() only;
     * fastjson_decode() builds such an array whole). */
    FASTJSON_LAZY
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

/*
 * The lazy arrays of one decode (FASTJSON_LAZY) and the parsed document
 * they are read from. It owns that document: it stays valid, whatever the
 * thread decodes next, until fastjson_doc_release(), which may run on any
 * thread.
 */
struct fastjson_doc;

/* A value inside a lazy array, read off its document's tape (at 0: no
 * value: a member that is not there, an index past the end). Valid while
 * the document is. */
struct fastjson_ref {
    const struct fastjson_doc *doc;
    size_t at;
};

/*
 * As fastjson_decode(), but the arrays the shape marks FASTJSON_LAZY are
 * built as nulls and registered in *doc, a new document (NULL when the
 * decode fails), which the caller releases, after the last read of its
 * lazy arrays and of the strings they gave.
 */
json_t *fastjson_decode_doc(const char *text, size_t len,
                            const struct fastjson_shape *shape,
                            struct fastjson_doc **doc,
                            struct fastjson_error *err);

/* The zero bytes a text given to fastjson_decode_doc_padded() must be
 * followed by: simdjson's padding (its parser reads up to 64 bytes past
 * the text) and room for the "\u0000" scan's last step. */
#define FASTJSON_PADDING 80

/*
 * As fastjson_decode_doc(), for text (len bytes, borrowed) followed by
 * FASTJSON_PADDING readable zero bytes: the parser reads it where it is,
 * where fastjson_decode_doc() first copies it into a padded buffer of the
 * thread's (for a 97 KB review, about a twentieth of the decode). The
 * same documents, errors and refusals as fastjson_decode_doc().
 */
json_t *fastjson_decode_doc_padded(const char *text, size_t len,
                                   const struct fastjson_shape *shape,
                                   struct fastjson_doc **doc,
                                   struct fastjson_error *err);

void fastjson_doc_release(struct fastjson_doc *doc);

/* When arr is one of doc's lazy arrays: true, with *n its length and
 * (*at)[i] the tape index of element i (the fastjson_ref {doc, (*at)[i]}).
 * Else false (doc NULL included): arr was built, read it as it is. */
bool fastjson_lazy_of(const struct fastjson_doc *doc, const json_t *arr,
                      const size_t **at, size_t *n);

/* The type of r as jansson names it (JSON_INTEGER for every integer, the
 * decoder refuses those beyond int64), or -1 for no value. */
int fastjson_ref_type(struct fastjson_ref r);

/* Member key of object r, or no value (r no object, or no such key). */
struct fastjson_ref fastjson_ref_member(struct fastjson_ref r, const char *key);

/* The members of object r, the elements of array r, else 0. */
size_t fastjson_ref_size(struct fastjson_ref r);

/* String r, NUL-terminated (the decoder refuses "\u0000"), or NULL when r
 * is no string; valid while the document is. */
const char *fastjson_ref_string(struct fastjson_ref r);

/* Appends r as compact JSON: the bytes jsonwrite_value() writes for the
 * value fastjson_decode() would have built. Returns 0, or -1 when the
 * buffer refuses (its cap, out of memory) or r is no value. */
struct buf;
int fastjson_ref_write(struct buf *b, struct fastjson_ref r);

/* Frees the calling thread's parser and buffers now (they are also freed
 * when the thread exits). */
void fastjson_thread_release(void);

#ifdef __cplusplus
}
#endif

#endif
