/* Reading a whole file into memory, with a size cap (see file.h). */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The first buffer when the size is not known beforehand (a pipe). */
#define FILE_FIRST_CAP 4096

void
file_free_secret(char *buf, size_t len)
{
    if (buf == NULL)
        return;
    explicit_bzero(buf, len);
    free(buf);
}

char *
file_read_fd(int fd, const char *name, size_t max, size_t *len,
             struct ng_error *err)
{
    struct stat st;
    char *buf = NULL;
    size_t have = 0, cap = FILE_FIRST_CAP;

    if (max > SIZE_MAX - 2)
        max = SIZE_MAX - 2;
    /* A regular file's size is known: read it into one buffer of the right
     * size, with one spare byte so that the end shows without a regrow.
     * The size is only a hint; the loop below trusts what read() says. */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 0 &&
        (uintmax_t)st.st_size < max)
        cap = (size_t)st.st_size + 1;
    if (cap > max + 1)
        cap = max + 1;
    buf = malloc(cap + 1);
    if (buf == NULL)
        goto no_memory;
    for (;;) {
        ssize_t n;

        if (have == cap) {
            size_t ncap;
            char *nb;

            if (cap > max) {
                ng_error_set(err, 0, 0, "%s is larger than %zu bytes", name,
                             max);
                goto fail;
            }
            ncap = cap > (max + 1) / 2 ? max + 1 : cap * 2;
            /* Not realloc: it may leave a copy of a key behind. */
            nb = malloc(ncap + 1);
            if (nb == NULL)
                goto no_memory;
            memcpy(nb, buf, have);
            file_free_secret(buf, have);
            buf = nb;
            cap = ncap;
        }
        n = read(fd, buf + have, cap - have);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            ng_error_set(err, 0, 0, "cannot read %s: %s", name,
                         strerror(errno));
            goto fail;
        }
        if (n == 0)
            break;
        have += (size_t)n;
    }
    if (have > max) {
        ng_error_set(err, 0, 0, "%s is larger than %zu bytes", name, max);
        goto fail;
    }
    buf[have] = '\0';
    *len = have;
    return buf;
no_memory:
    ng_error_set(err, 0, 0, "out of memory reading %s", name);
fail:
    file_free_secret(buf, have);
    return NULL;
}

char *
file_read(const char *path, size_t max, size_t *len, struct ng_error *err)
{
    char *buf;
    int fd, saved;

    do
        fd = open(path, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        ng_error_set(err, 0, 0, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    buf = file_read_fd(fd, path, max, len, err);
    saved = errno;
    close(fd);
    errno = saved;
    return buf;
}
