/* Short human text in bounded buffers: warnings cut on UTF-8 boundaries. */
#ifndef NCCLGUARD_TEXT_H
#define NCCLGUARD_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* Longest warning, in bytes, that the admission API passes on whole: the
 * Kubernetes API documents 120 characters as the most a warning should
 * carry, and bytes are never fewer than characters. */
#define TEXT_WARNING_MAX 120

/*
 * Caps on what one value can put in a log line, so that a request cannot
 * make the log echo megabytes (a 3 MB uid or generateName): a string
 * longer than TEXT_LOG_FIELD_MAX bytes is cut on a UTF-8 character
 * boundary and ends with "…" (U+2026), the whole no longer than
 * TEXT_LOG_FIELD_MAX; an array keeps its first TEXT_LOG_ARRAY_MAX elements
 * and then a string "… N more". The admission core writes its log
 * record within them (admission/review.c), and server/log.c caps other
 * lines' fields the same way.
 */
#define TEXT_LOG_FIELD_MAX 1024
#define TEXT_LOG_ARRAY_MAX 32

/* What a cut text ends with. */
#define TEXT_CUT_MARK "..."

/*
 * Formats prefix (may be NULL) and then fmt into buf, n bytes with the
 * NUL. The result is always valid UTF-8: a byte that does not belong to a
 * well-formed sequence (for example half a character that a "%.40s" cut
 * off) becomes '?'. When the text does not fit in n - 1 bytes it is cut
 * on a character boundary and ends in TEXT_CUT_MARK, all within n - 1
 * bytes, so a multi-byte character is never split. Returns the length
 * written. n must be at least sizeof(TEXT_CUT_MARK); a smaller buffer gets
 * "" (or nothing, when n is 0) and 0. Thread-safe.
 */
size_t text_vformat(char *buf, size_t n, const char *prefix, const char *fmt,
                    va_list ap) __attribute__((format(printf, 4, 0)));

/* As text_vformat(), with the arguments inline. */
size_t text_format(char *buf, size_t n, const char *prefix, const char *fmt,
                   ...) __attribute__((format(printf, 4, 5)));

/*
 * The length of the longest prefix of s (len bytes, no NUL needed) that
 * has at most max bytes and does not split a UTF-8 character: len when
 * len <= max, else max backed up to the start of a character. Thread-safe.
 */
size_t text_utf8_prefix(const char *s, size_t len, size_t max);

/*
 * Cuts the NUL-terminated s to at most max bytes, backing up to the start
 * of a UTF-8 character so that none is split. Returns the new length.
 * Thread-safe.
 */
size_t text_utf8_cut(char *s, size_t max);

/* The length of the well-formed UTF-8 sequence (RFC 3629: no overlong
 * form, no surrogate, nothing past U+10FFFF) that starts at p, 1 to 4, or
 * 0 when none does; a NUL ends a sequence. Thread-safe. */
size_t text_utf8_seq_len(const unsigned char *p);

/* Whether the NUL-terminated s is well-formed UTF-8 (RFC 3629, as
 * text_utf8_fix() reads it). Thread-safe. */
bool text_utf8_valid(const char *s);
/* As text_utf8_valid(), and *len is strlen(s), counted on the way. */
bool text_utf8_valid_len(const char *s, size_t *len);

/*
 * Replaces, in place, each byte of s that does not start a well-formed
 * UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, nothing past
 * U+10FFFF) with '?'. Returns the number of bytes replaced. Thread-safe.
 */
size_t text_utf8_fix(char *s);

/*
 * Levenshtein distance between a and b, ASCII letters compared without
 * case: the "did you mean" of policy keys, NCCL variables and policy test
 * keys. TEXT_DISTANCE_FAR when either is TEXT_DISTANCE_MAXLEN bytes or
 * longer (no key is). Pure, thread-safe.
 */
#define TEXT_DISTANCE_MAXLEN 63
#define TEXT_DISTANCE_FAR 99
size_t text_edit_distance(const char *a, const char *b);

#endif
