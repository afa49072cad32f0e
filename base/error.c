/* Error reports shared by every module. */
#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
ng_error_set(struct ng_error *err, int line, int col, const char *fmt, ...)
{
    va_list ap;

    if (err == NULL)
        return;
    err->line = line;
    err->col = col;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
}

void
ng_error_clear(struct ng_error *err)
{
    if (err == NULL)
        return;
    err->line = 0;
    err->col = 0;
    err->msg[0] = '\0';
}

char *
ng_error_format(const struct ng_error *err, const char *file, char *buf,
                size_t n)
{
    if (n == 0)
        return buf;
    if (file == NULL)
        file = "<input>";
    if (err->line > 0)
        snprintf(buf, n, "%s:%d:%d: %s", file, err->line,
                 err->col > 0 ? err->col : 1, err->msg);
    else
        snprintf(buf, n, "%s: %s", file, err->msg);
    return buf;
}
