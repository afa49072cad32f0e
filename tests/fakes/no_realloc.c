/* LD_PRELOAD for the watchdog's tests: realloc(3) of exactly
 * NO_REALLOC_SIZE bytes fails with ENOMEM, as it may at any size when the
 * node is out of memory; every other call goes on to the next realloc
 * (libc's, or a sanitizer's). Each refusal appends a line to
 * NO_REALLOC_LOG when that is set, so that a test can tell that the
 * failure it wants was hit. */
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

void *realloc(void *p, size_t n);

void *
realloc(void *p, size_t n)
{
    static void *(*next)(void *, size_t);
    /* Read on every call: a sanitizer's runtime may call realloc before
     * the environment is set up. */
    const char *e = getenv("NO_REALLOC_SIZE");
    long size = e != NULL ? atol(e) : -1;

    if (size >= 0 && n == (size_t)size) {
        const char *log = getenv("NO_REALLOC_LOG");
        FILE *f = log != NULL ? fopen(log, "a") : NULL;

        if (f != NULL) {
            fprintf(f, "refused %zu\n", n);
            fclose(f);
        }
        errno = ENOMEM;
        return NULL;
    }
    if (next == NULL)
        *(void **)&next = dlsym(RTLD_NEXT, "realloc");
    if (next == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    return next(p, n);
}
