/* /proc readers for the watchdog: stat, environ, status, fd, net/tcp. */
#include "watchdog/procfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
wd_stat_parse(const char *buf, size_t len, struct wd_stat *st)
{
    const char *p = NULL, *end = buf + len;
    const char *name, *name_end;
    uint64_t v[23] = {0};
    char state;
    int field = 3;

    for (size_t i = len; i > 0; i--) {
        if (buf[i - 1] == ')') {
            p = buf + i;
            break;
        }
    }
    if (p == NULL || p + 3 > end || p[0] != ' ')
        return -1;
    name_end = p - 1; /* the last ')' */
    state = p[1];
    p += 2;
    /* Fields 4..22 are numbers (some may be negative: keep them apart). */
    while (field < 22) {
        uint64_t x = 0;
        int digits = 0;

        if (p >= end || *p != ' ')
            return -1;
        p++;
        field++;
        if (p < end && *p == '-')
            p++;
        while (p < end && *p >= '0' && *p <= '9') {
            if (x > UINT64_MAX / 10 - 10)
                return -1;
            x = x * 10 + (uint64_t)(*p - '0');
            p++;
            digits++;
        }
        if (digits == 0)
            return -1;
        v[field] = x;
    }
    st->state = state;
    st->cpu_ticks = v[14] + v[15];
    st->start = v[22];
    /* FNV-1a over the name between the first '(' and the last ')'. */
    st->comm_hash = 2166136261u;
    name = memchr(buf, '(', len);
    for (const char *c = name != NULL ? name + 1 : name_end; c < name_end; c++)
        st->comm_hash = (st->comm_hash ^ (unsigned char)*c) * 16777619u;
    return 0;
}

ssize_t
wd_proc_read(const char *root, pid_t pid, const char *file, char *buf,
             size_t cap)
{
    char path[256];
    size_t got = 0;
    int fd, w;

    w = snprintf(path, sizeof(path), "%s/%d/%s", root, (int)pid, file);
    if (w < 0 || (size_t)w >= sizeof(path) || cap == 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    while (got < cap - 1) {
        ssize_t r = read(fd, buf + got, cap - 1 - got);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;

            close(fd);
            errno = e;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

/* The value of the "name: N" line of an io block; -1 when missing. */
static int
io_field(const char *buf, size_t len, const char *name, uint64_t *out)
{
    size_t nl = strlen(name);

    for (size_t i = 0; i + nl < len;) {
        if ((i == 0 || buf[i - 1] == '\n') && memcmp(buf + i, name, nl) == 0 &&
            buf[i + nl] == ':') {
            uint64_t v = 0;
            size_t k = i + nl + 1;
            bool any = false;

            while (k < len && buf[k] == ' ')
                k++;
            for (; k < len && buf[k] >= '0' && buf[k] <= '9'; k++) {
                if (v > (UINT64_MAX - 9) / 10)
                    return -1;
                v = v * 10 + (uint64_t)(buf[k] - '0');
                any = true;
            }
            if (!any)
                return -1;
            *out = v;
            return 0;
        }
        i++;
    }
    return -1;
}

int
wd_io_parse(const char *buf, size_t len, uint64_t *bytes)
{
    uint64_t r, w;

    if (io_field(buf, len, "rchar", &r) != 0 ||
        io_field(buf, len, "wchar", &w) != 0)
        return -1;
    *bytes = r + w;
    return 0;
}

int
wd_proc_stat(const char *root, pid_t pid, struct wd_stat *st)
{
    char buf[1024];
    ssize_t n = wd_proc_read(root, pid, "stat", buf, sizeof(buf));

    if (n <= 0)
        return -1;
    return wd_stat_parse(buf, (size_t)n, st);
}

const char *
wd_environ_find(const char *buf, size_t len, const char *name, size_t *vlen)
{
    size_t nl = strlen(name), i = 0;

    while (i < len) {
        const char *e = buf + i;
        const char *z = memchr(e, '\0', len - i);
        size_t el = z ? (size_t)(z - e) : len - i;

        if (el > nl && memcmp(e, name, nl) == 0 && e[nl] == '=') {
            *vlen = el - nl - 1;
            return e + nl + 1;
        }
        i += el + 1;
    }
    return NULL;
}

bool
wd_status_catches(const char *buf, size_t len, int sig)
{
    static const char key[] = "\nSigCgt:";
    const char *p = NULL;
    uint64_t mask = 0;

    for (size_t i = 0; i + sizeof(key) - 1 <= len; i++) {
        if (memcmp(buf + i, key, sizeof(key) - 1) == 0) {
            p = buf + i + sizeof(key) - 1;
            break;
        }
    }
    if (p == NULL || sig < 1 || sig > 64)
        return false;
    while (p < buf + len && (*p == ' ' || *p == '\t'))
        p++;
    for (int d = 0; d < 16 && p < buf + len; d++, p++) {
        int x;

        if (*p >= '0' && *p <= '9')
            x = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            x = *p - 'a' + 10;
        else
            break;
        mask = (mask << 4) | (uint64_t)x;
    }
    return (mask >> (sig - 1)) & 1u;
}

/* A hex number at *p up to a non-hex character. */
static bool
hex_field(const char **p, const char *end, uint64_t *out)
{
    uint64_t x = 0;
    int n = 0;

    while (*p < end) {
        char c = **p;
        int d;

        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else
            break;
        if (++n > 16)
            return false;
        x = (x << 4) | (uint64_t)d;
        (*p)++;
    }
    *out = x;
    return n > 0;
}

static void
skip_spaces(const char **p, const char *end)
{
    while (*p < end && **p == ' ')
        (*p)++;
}

static void
skip_token(const char **p, const char *end)
{
    while (*p < end && **p != ' ' && **p != '\n')
        (*p)++;
}

/* One line: "sl local rem st tx:rx tr:when retrnsmt uid timeout inode". */
static bool
tcp_line(const char *p, const char *end, struct wd_tcp *row)
{
    uint64_t st, tx, rx, inode = 0;

    skip_spaces(&p, end);
    skip_token(&p, end); /* sl */
    skip_spaces(&p, end);
    skip_token(&p, end); /* local */
    skip_spaces(&p, end);
    skip_token(&p, end); /* remote */
    skip_spaces(&p, end);
    if (!hex_field(&p, end, &st))
        return false;
    skip_spaces(&p, end);
    if (!hex_field(&p, end, &tx) || p >= end || *p != ':')
        return false;
    p++;
    if (!hex_field(&p, end, &rx))
        return false;
    for (int i = 0; i < 4; i++) { /* tr:when, retrnsmt, uid, timeout */
        skip_spaces(&p, end);
        skip_token(&p, end);
    }
    skip_spaces(&p, end);
    while (p < end && *p >= '0' && *p <= '9') {
        if (inode > UINT64_MAX / 10 - 10)
            return false;
        inode = inode * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (st > 0xff || tx > UINT32_MAX || rx > UINT32_MAX)
        return false;
    row->state = (int)st;
    row->tx_queue = (uint32_t)tx;
    row->rx_queue = (uint32_t)rx;
    row->inode = inode;
    return true;
}

size_t
wd_tcp_parse(const char *buf, size_t len, struct wd_tcp *rows, size_t cap,
             size_t *dropped)
{
    const char *p = buf, *end = buf + len;
    size_t n = 0, drop = 0;
    bool header = true;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        struct wd_tcp row;

        if (!header && tcp_line(p, le, &row)) {
            if (n < cap)
                rows[n++] = row;
            else
                drop++;
        }
        header = false;
        p = nl ? nl + 1 : end;
    }
    if (dropped != NULL)
        *dropped = drop;
    return n;
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

ssize_t
wd_proc_socket_inodes(const char *root, pid_t pid, uint64_t *inodes, size_t cap,
                      size_t *entries_left)
{
    char path[256], link[64];
    struct dirent *de;
    size_t n = 0, out = 0;
    DIR *d;
    int w;

    w = snprintf(path, sizeof(path), "%s/%d/fd", root, (int)pid);
    if (w < 0 || (size_t)w >= sizeof(path))
        return -1;
    d = opendir(path);
    if (d == NULL)
        return -1;
    while (n < cap && (entries_left == NULL || *entries_left > 0) &&
           (de = readdir(d)) != NULL) {
        ssize_t l;
        char *end;
        unsigned long long ino;

        if (de->d_name[0] == '.')
            continue;
        if (entries_left != NULL)
            (*entries_left)--;
        l = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
        if (l <= 0)
            continue;
        link[l] = '\0';
        if (strncmp(link, "socket:[", 8) != 0)
            continue;
        errno = 0;
        ino = strtoull(link + 8, &end, 10);
        if (errno != 0 || *end != ']')
            continue;
        inodes[n++] = ino;
    }
    closedir(d);
    qsort(inodes, n, sizeof(*inodes), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (out == 0 || inodes[out - 1] != inodes[i])
            inodes[out++] = inodes[i];
    return (ssize_t)out;
}
