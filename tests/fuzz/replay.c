/* Corpus replay: runs a fuzz target's LLVMFuzzerTestOneInput on every file
 * of its corpus without libFuzzer, so `make test` (and `make asan`, and
 * `make valgrind`) exercise the corpus with any compiler. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Weak so that targets without set-up need not define it. */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int verbose;

/* Reads path into an exactly-sized heap buffer; returns 0 or -1. */
static int
replay_read(const char *path, uint8_t **out, size_t *len)
{
    FILE *f = NULL;
    uint8_t *buf = NULL;
    struct stat st;

    f = fopen(path, "rb");
    if (f == NULL || fstat(fileno(f), &st) != 0)
        goto fail;
    if (st.st_size < 0 || (unsigned long long)st.st_size > (64u << 20)) {
        fprintf(stderr, "replay: %s: larger than 64 MiB\n", path);
        goto fail;
    }
    /* malloc(0) may return NULL; keep one byte so empty inputs replay too. */
    buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (buf == NULL)
        goto fail;
    if (st.st_size > 0 &&
        fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
        goto fail;
    fclose(f);
    *out = buf;
    *len = (size_t)st.st_size;
    return 0;
fail:
    if (errno != 0)
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
    free(buf);
    if (f != NULL)
        fclose(f);
    return -1;
}

static int
replay_file(const char *path, size_t *count)
{
    uint8_t *buf = NULL;
    size_t len = 0;

    if (replay_read(path, &buf, &len) != 0)
        return -1;
    if (verbose)
        fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    (*count)++;
    return 0;
}

static int
select_visible(const struct dirent *d)
{
    return d->d_name[0] != '.';
}

/* Replays a file, or every regular file of a directory in name order. */
static int
replay_path(const char *path, size_t *count)
{
    struct stat st;
    struct dirent **names = NULL;
    int n, rc = 0;

    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path, count);
    n = scandir(path, &names, select_visible, alphasort);
    if (n < 0) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        char full[4096];
        struct stat fst;
        int w = snprintf(full, sizeof(full), "%s/%s", path, names[i]->d_name);

        if (w < 0 || (size_t)w >= sizeof(full)) {
            fprintf(stderr, "replay: %s/%s: path too long\n", path,
                    names[i]->d_name);
            rc = -1;
        } else if (stat(full, &fst) == 0 && S_ISREG(fst.st_mode)) {
            if (replay_file(full, count) != 0)
                rc = -1;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int
main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0, first = 1;

    if (argc > 1 && strcmp(argv[1], "-v") == 0) {
        verbose = 1;
        first = 2;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: %s [-v] FILE|DIR...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize != NULL)
        LLVMFuzzerInitialize(&argc, &argv);
    for (int i = first; i < argc; i++)
        if (replay_path(argv[i], &count) != 0)
            rc = 1;
    printf("%s: replayed %zu inputs%s\n", argv[0], count,
           rc ? ", some unreadable" : "");
    if (count == 0) {
        fprintf(stderr, "replay: no inputs found\n");
        rc = 1;
    }
    return rc;
}
