/* Unit tests for base/file.c: the whole-file reader. */
#include "base/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static char dir[] = "/tmp/ncclguard-test-file-XXXXXX";

/* Writes n bytes of fill (or s when not NULL) to dir/name; returns the path
 * in a static buffer. */
static const char *
make_file(const char *name, const char *s, size_t n, char fill)
{
    static char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL)
        return path;
    for (size_t i = 0; i < n; i++)
        fputc(s != NULL ? s[i] : fill, f);
    fclose(f);
    return path;
}

/* Sizes around the cap, and around the reader's first buffer, read whole
 * or refused with the cap in the message. */
static void
test_sizes(void)
{
    static const struct {
        size_t size, max;
        int ok;
    } cases[] = {
        {0, 10, 1},          {10, 10, 1},         {11, 10, 0},
        {4095, 1 << 20, 1},  {4096, 1 << 20, 1},  {4097, 1 << 20, 1},
        {100000, 100000, 1}, {100001, 100000, 0}, {300000, 65536, 0},
        {8192, 8191, 0},     {1, 0, 0},           {0, 0, 1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *path = make_file("sized", NULL, cases[i].size, 'x');
        struct ng_error e;
        size_t len = 12345;
        char *buf;

        ng_error_clear(&e);
        buf = file_read(path, cases[i].max, &len, &e);
        if (cases[i].ok) {
            CHECK(buf != NULL);
            CHECK_INT(len, cases[i].size);
            if (buf != NULL) {
                CHECK(buf[len] == '\0');
                CHECK(len == 0 || (buf[0] == 'x' && buf[len - 1] == 'x'));
            }
        } else {
            char want[300];

            CHECK(buf == NULL);
            CHECK_INT(len, 12345); /* untouched */
            snprintf(want, sizeof(want), "%s is larger than %zu bytes", path,
                     cases[i].max);
            CHECK_STR(e.msg, want);
        }
        free(buf);
    }
}

static void
test_content_and_errors(void)
{
    static const char data[] = "a\0b\nc";
    const char *path = make_file("bytes", data, sizeof(data) - 1, 0);
    struct ng_error e;
    size_t len = 0;
    char *buf, want[300];

    /* Embedded NULs are kept; the length counts them. */
    buf = file_read(path, 100, &len, NULL);
    CHECK(buf != NULL && len == 5 && memcmp(buf, data, 5) == 0);
    file_free_secret(buf, len);
    file_free_secret(NULL, 0); /* a no-op */

    ng_error_clear(&e);
    snprintf(want, sizeof(want), "%s/none", dir);
    CHECK(file_read(want, 100, &len, &e) == NULL);
    CHECK(strstr(e.msg, "cannot open ") == e.msg);
    CHECK(strstr(e.msg, "/none: No such file or directory") != NULL);

    /* A directory opens but does not read. */
    ng_error_clear(&e);
    CHECK(file_read(dir, 100, &len, &e) == NULL);
    snprintf(want, sizeof(want), "cannot read %s: Is a directory", dir);
    CHECK_STR(e.msg, want);
}

/* Opens a pipe whose write end has had 20 chunks of 1000 bytes written
 * and is closed; returns its read end, or -1. */
static int
pipe_filled(void)
{
    char chunk[1000];
    int fds[2];

    memset(chunk, 'p', sizeof(chunk));
    if (pipe(fds) != 0)
        return -1;
    for (int i = 0; i < 20; i++)
        CHECK_INT(write(fds[1], chunk, sizeof(chunk)), sizeof(chunk));
    close(fds[1]);
    return fds[0];
}

/* A pipe has no size to go by: the reader grows, and still stops at the
 * cap rather than reading everything the writer offers. */
static void
test_pipe(void)
{
    struct ng_error e;
    size_t len = 0;
    char *buf;
    int fd;

    fd = pipe_filled();
    CHECK(fd >= 0);
    buf = file_read_fd(fd, "<stdin>", 20000, &len, NULL);
    CHECK(buf != NULL && len == 20000 && buf[19999] == 'p' && !buf[20000]);
    free(buf);
    close(fd);

    fd = pipe_filled();
    CHECK(fd >= 0);
    ng_error_clear(&e);
    CHECK(file_read_fd(fd, "<stdin>", 19999, &len, &e) == NULL);
    CHECK_STR(e.msg, "<stdin> is larger than 19999 bytes");
    close(fd);
}

int
main(void)
{
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_sizes();
    test_content_and_errors();
    test_pipe();
    {
        char path[300];

        snprintf(path, sizeof(path), "%s/sized", dir);
        unlink(path);
        snprintf(path, sizeof(path), "%s/bytes", dir);
        unlink(path);
        rmdir(dir);
    }
    return harness_finish();
}
