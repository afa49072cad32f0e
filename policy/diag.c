/* Positioned diagnostics for the policy loader and `policy lint`. */
#include "policy/diag.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
diags_add(struct diags *d, enum diag_severity sev, int line, int col,
          const char *fmt, ...)
{
    va_list ap;
    struct diag *e;

    if (sev == DIAG_ERROR)
        d->n_errors++;
    else
        d->n_warnings++;
    if (d->n >= DIAGS_MAX)
        return;
    if (d->n == d->cap) {
        size_t ncap = d->cap ? d->cap * 2 : 8;
        struct diag *nv = realloc(d->v, ncap * sizeof(*nv));

        if (nv == NULL)
            return;
        d->v = nv;
        d->cap = ncap;
    }
    e = &d->v[d->n++];
    e->severity = sev;
    e->line = line;
    e->col = col;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
}

void
diags_sort(struct diags *d)
{
    /* Insertion sort: stable, and the lists are short. */
    for (size_t i = 1; i < d->n; i++) {
        struct diag t = d->v[i];
        size_t j = i;

        while (j > 0 &&
               (d->v[j - 1].line > t.line ||
                (d->v[j - 1].line == t.line && d->v[j - 1].col > t.col))) {
            d->v[j] = d->v[j - 1];
            j--;
        }
        d->v[j] = t;
    }
}

void
diags_release(struct diags *d)
{
    free(d->v);
    memset(d, 0, sizeof(*d));
}

int
diag_yaml_tab(const char *buf, size_t len, size_t line, size_t index, int *col)
{
    size_t i = 0, l = 0;

    if (buf == NULL)
        return 0;
    /* libyaml stops at the tab itself when it cannot start a token. */
    if (index < len && buf[index] == '\t') {
        size_t start = index;

        while (start > 0 && buf[start - 1] != '\n')
            start--;
        *col = (int)(index - start) + 1;
        return 1;
    }
    while (i < len && l < line) {
        if (buf[i++] == '\n')
            l++;
    }
    for (size_t k = i; k < len && (buf[k] == ' ' || buf[k] == '\t'); k++) {
        if (buf[k] == '\t') {
            *col = (int)(k - i) + 1;
            return 1;
        }
    }
    return 0;
}
