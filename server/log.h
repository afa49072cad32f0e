/* JSON log lines: one object per line on stderr, with time, level and msg. */
#ifndef NCCLGUARD_LOG_H
#define NCCLGUARD_LOG_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "base/text.h"

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

/*
 * Caps on what a field can put in a line, so that a request cannot make
 * the log echo megabytes (a 3 MB uid or generateName): a string value
 * longer than LOG_FIELD_MAX bytes is cut on a UTF-8 character boundary and
 * ends with "…" (U+2026), the whole no longer than LOG_FIELD_MAX; an array
 * keeps its first LOG_ARRAY_MAX elements and then a string "… N more".
 * They are base/text.h's, which the admission core's log record (already
 * text) is written within.
 */
#define LOG_FIELD_MAX TEXT_LOG_FIELD_MAX
#define LOG_ARRAY_MAX TEXT_LOG_ARRAY_MAX

/*
 * The most bytes of members that log_members_write() puts in a line. A
 * review's record stays far below it (each value is capped; the worst,
 * every byte an escaped control character, is some 50 KiB); past it the
 * members are left out and "members_dropped" gives their length.
 */
#define LOG_MEMBERS_MAX (256u * 1024u)

/*
 * How many bytes of the UTF-8 text s (len bytes) to keep so that, with
 * the 3-byte "…" after them, it fits in max bytes without splitting a
 * character; len itself when it fits in max already. Thread-safe.
 */
size_t log_cut_len(const char *s, size_t len, size_t max);

/*
 * Parses "debug", "info", "warn" (or "warning") or "error" into *out.
 * Returns 0, or -1 (leaving *out untouched) for any other text.
 */
int log_level_parse(const char *s, enum log_level *out)
    __attribute__((warn_unused_result));

/* Lower-case name of a level ("info"). */
const char *log_level_name(enum log_level level);

/* Sets the lowest level written (default info). Call before threads start. */
void log_level_set(enum log_level level);

/* True when lines at this level are written. Thread-safe. */
bool log_level_enabled(enum log_level level);

/*
 * Sends lines to fd instead of stderr (tests). The fd stays the caller's.
 * Call before threads start.
 */
void log_output_set(int fd);

/*
 * Writes one line: {"time":..., "level":..., "msg": msg, <fields>...}.
 * fields is borrowed (may be NULL); its keys follow the fixed ones, and a
 * field named time, level or msg is dropped. Field values are capped as
 * LOG_FIELD_MAX and LOG_ARRAY_MAX say (fields itself is left as it is). The
 * line goes out in a single writev(2), so lines from several threads never
 * interleave. Never fails visibly: a line that cannot be built is replaced by a
 * short fallback. Thread-safe.
 */
void log_fields_write(enum log_level level, const char *msg,
                      const json_t *fields);

/*
 * Writes one line from text, with no JSON values built: {"time":...,
 * "level":..., "msg": msg, <members>, <tail>}. members (len bytes, need
 * not end in a NUL; NULL or len 0 for none) and tail (NUL-terminated, may
 * be NULL) are object members already in JSON, "\"uid\":\"u-1\",\"gpus\":2"
 * with no braces: members is a record such as review_handle()'s, whose
 * values its writer kept within LOG_FIELD_MAX and LOG_ARRAY_MAX; tail is
 * from trusted, fixed formats (the server's own numbers). Both go into the
 * line as they are, so they must be well-formed, must not name time, level
 * or msg, and must not repeat each other's keys. Members longer than
 * LOG_MEMBERS_MAX are left out, replaced by "members_dropped":<len>. The
 * line goes out in a single writev(2). Never fails visibly, as
 * log_fields_write(). Thread-safe.
 */
void log_members_write(enum log_level level, const char *msg,
                       const char *members, size_t len, const char *tail);

/*
 * Writes one line whose "error" field is the printf-style text, plus an
 * optional extra string field (key may be NULL). Thread-safe.
 */
void log_error_write(enum log_level level, const char *msg, const char *key,
                     const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
