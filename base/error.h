/* Error reports shared by every module: a message plus an optional place. */
#ifndef NCCLGUARD_ERROR_H
#define NCCLGUARD_ERROR_H

#include <stddef.h>

/*
 * A caller-supplied error report. Functions that can fail take a
 * `struct ng_error *` (which may be NULL) and fill it on failure only.
 * Lines and columns are 1-based; 0 means "no position".
 */
struct ng_error {
    int line;
    int col;
    char msg[512];
};

/* Fills err (if not NULL) with a printf-style message and a position. */
void ng_error_set(struct ng_error *err, int line, int col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Resets err to "no error". err may be NULL. */
void ng_error_clear(struct ng_error *err);

/*
 * Writes "file:line:col: msg" (or "file: msg" without a position) into buf,
 * truncating to n bytes. file may be NULL. Returns buf.
 */
char *ng_error_format(const struct ng_error *err, const char *file, char *buf,
                      size_t n);

#endif
