/* A growable byte buffer whose size cap is fixed when it is set up. */
#ifndef NCCLGUARD_BUF_H
#define NCCLGUARD_BUF_H

#include <stdarg.h>
#include <stddef.h>

/*
 * Text or bytes built up piece by piece (the response to a review, a
 * metrics page, a log line). The cap is fixed at buf_init() and never
 * exceeded: an append that would pass it fails and leaves the buffer as it
 * was, so a caller cannot be made to build an unbounded answer. The bytes
 * are always followed by a NUL that len does not count, so p can be used as
 * a C string when no NUL was appended.
 *
 * Not thread-safe: one buffer belongs to one thread at a time.
 */
struct buf {
    char *p;    /* NULL until the first append */
    size_t len; /* bytes used, not counting the trailing NUL */
    size_t cap; /* bytes allocated */
    size_t max; /* the most len may become (fixed by buf_init) */
};

/* Sets up an empty buffer that may grow to max bytes. Allocates nothing. */
void buf_init(struct buf *b, size_t max);

/* Frees what the buffer holds and leaves it empty (the cap stays). Safe on
 * a zeroed or released buffer. */
void buf_release(struct buf *b);

/* Forgets the contents but keeps the memory, for reuse. */
void buf_reset(struct buf *b);

/*
 * Hands the bytes over to the caller, who frees them with free(); *len
 * (when not NULL) gets their length. The buffer is left empty. A block
 * with more than 1 KiB unused is first cut to size (kept as it is when
 * that fails). Returns a freshly allocated "" when nothing was appended,
 * NULL only when that allocation fails.
 */
char *buf_take(struct buf *b, size_t *len) __attribute__((warn_unused_result));

/* Makes room for at least more bytes after len. Returns 0, or -1 when the
 * cap would be passed or memory ran out (the buffer is unchanged). The
 * allocation doubles, or grows to just what is asked when doubling is not
 * enough (so one large reservation is exact), and never passes max + 1. */
int buf_reserve(struct buf *b, size_t more) __attribute__((warn_unused_result));

/* The allocation, in bytes, that buf_reserve(b, more) would leave: b->cap
 * when no growth is needed, 0 when the cap forbids it. For a caller that
 * charges memory to a budget before it is taken. */
size_t buf_reserve_size(const struct buf *b, size_t more);

/* As buf_reserve(), but the allocation grows to just what is asked
 * (len + more + 1), never doubling: for a last few bytes after a buffer
 * that was reserved exactly. */
int buf_reserve_exact(struct buf *b, size_t more)
    __attribute__((warn_unused_result));

/* The allocation, in bytes, that buf_reserve_exact(b, more) would leave,
 * as buf_reserve_size() says it for buf_reserve(). */
size_t buf_reserve_exact_size(const struct buf *b, size_t more);

/* Appends a string literal (its length known at compile time). Returns as
 * buf_add. */
#define BUF_LIT(b, lit) buf_add((b), (lit), sizeof(lit) - 1)

/* Appends n bytes. Returns 0, or -1 as buf_reserve (nothing appended). */
int buf_add(struct buf *b, const void *s, size_t n)
    __attribute__((warn_unused_result));

/* Appends a NUL-terminated string. Returns as buf_add. */
int buf_adds(struct buf *b, const char *s) __attribute__((warn_unused_result));

/* Appends one byte. Returns as buf_add. */
int buf_addc(struct buf *b, char c) __attribute__((warn_unused_result));

/* Appends printf-style text. Returns 0, or -1 (nothing appended) when the
 * cap would be passed, memory ran out or the format failed. */
int buf_addf(struct buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), warn_unused_result));

/* As buf_addf(), for a caller that has a va_list (which it still owns and
 * ends; it is not used up). */
int buf_addvf(struct buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0), warn_unused_result));

/* Appends the standard base64 (RFC 4648, with padding) of n bytes. Returns
 * as buf_add. */
int buf_add_base64(struct buf *b, const void *s, size_t n)
    __attribute__((warn_unused_result));

#endif
