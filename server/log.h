/* JSON log lines: one object per line on stderr, with time, level and msg. */
#ifndef NCCLGUARD_LOG_H
#define NCCLGUARD_LOG_H

#include <stdbool.h>

#include <jansson.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR };

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
 * field named time, level or msg is dropped. The line goes out in a single
 * write(2), so lines from several threads never interleave. Never fails
 * visibly: a line that cannot be built is replaced by a short fallback.
 * Thread-safe.
 */
void log_fields_write(enum log_level level, const char *msg,
                      const json_t *fields);

/*
 * As log_fields_write(), followed by tail: object members already in JSON
 * ("\"status\":200,\"duration_us\":41"), from trusted, fixed formats
 * only, since they are written as they are. Keys in tail must not repeat
 * keys of fields. Saves building JSON values for a few numbers on a hot
 * path. Thread-safe.
 */
void log_fields_tail_write(enum log_level level, const char *msg,
                           const json_t *fields, const char *tail);

/*
 * Writes one line whose "error" field is the printf-style text, plus an
 * optional extra string field (key may be NULL). Thread-safe.
 */
void log_error_write(enum log_level level, const char *msg, const char *key,
                     const char *value, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#endif
