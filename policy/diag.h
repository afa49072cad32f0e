/* A list of positioned errors and warnings, as `policy lint` prints them. */
#ifndef NCCLGUARD_DIAG_H
#define NCCLGUARD_DIAG_H

#include <stddef.h>

enum diag_severity { DIAG_WARNING = 0, DIAG_ERROR = 1 };

struct diag {
    enum diag_severity severity;
    int line; /* 1-based; 0 = no position */
    int col;
    char msg[300];
};

/*
 * A growing list. At most DIAGS_MAX entries are kept (later ones are
 * counted but dropped) so that a hostile file cannot make it grow
 * without bound. Zero-initialise; release with diags_release().
 */
#define DIAGS_MAX 200

struct diags {
    struct diag *v;
    size_t n;
    size_t cap;
    size_t n_errors;   /* including dropped ones */
    size_t n_warnings; /* including dropped ones */
};

/* Appends a diagnostic. Allocation failure drops the entry but still
 * counts it, so an error is never lost from n_errors. */
void diags_add(struct diags *d, enum diag_severity sev, int line, int col,
               const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Sorts by position (stable for equal positions). */
void diags_sort(struct diags *d);

/* Frees the list and zeroes *d. */
void diags_release(struct diags *d);

/*
 * After a YAML syntax error at (line, index) (libyaml's 0-based problem
 * mark): is a tab to blame? YAML forbids tabs in indentation, and libyaml
 * then says only "found character that cannot start any token". Returns 1
 * and sets *col (1-based) to the tab's column when the character at index
 * is a tab or line's indentation holds one; 0 otherwise. Thread-safe.
 */
int diag_yaml_tab(const char *buf, size_t len, size_t line, size_t index,
                  int *col);

/* The message for such a tab. */
#define DIAG_YAML_TAB_MSG "tabs cannot indent YAML; use spaces"

#endif
