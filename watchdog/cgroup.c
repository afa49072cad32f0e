/* /proc/PID/cgroup -> pod UID and container ID, for every path shape the
 * kubelet's cgroup drivers and the container runtimes produce. */
#include "watchdog/cgroup.h"

#include <stdbool.h>
#include <string.h>

static bool
is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A pod UID at s: 8-4-4-4-12 hex digits separated by sep ('-' or '_'). */
static bool
uid_at(const char *s, size_t n, char sep, char out[37])
{
    static const size_t groups[] = {8, 4, 4, 4, 12};
    size_t k = 0;

    if (n != 36)
        return false;
    for (size_t g = 0; g < 5; g++) {
        for (size_t i = 0; i < groups[g]; i++, k++) {
            if (!is_hex(s[k]))
                return false;
            out[k] = s[k];
        }
        if (g < 4) {
            if (s[k] != sep)
                return false;
            out[k++] = '-';
        }
    }
    out[36] = '\0';
    return true;
}

/* A path component that names a pod: "pod<uid>" (cgroupfs) or
 * "kubepods[-<qos>]-pod<uid_>.slice" (systemd). */
static bool
pod_component(const char *c, size_t n, char uid[37])
{
    static const char slice[] = ".slice";
    const char *p;

    if (n == 39 && memcmp(c, "pod", 3) == 0)
        return uid_at(c + 3, 36, '-', uid);
    if (n < 9 + 36 + 6 || memcmp(c, "kubepods-", 9) != 0 ||
        memcmp(c + n - 6, slice, 6) != 0)
        return false;
    p = c + n - 6 - 36;
    if (memcmp(p - 3, "pod", 3) != 0 || (p - 4 >= c && p[-4] != '-'))
        return false;
    return uid_at(p, 36, '_', uid);
}

/* A path component that names a container: "<64 hex>" (cgroupfs) or
 * "<runtime>-<64 hex>.scope" (systemd). */
static bool
container_component(const char *c, size_t n, char id[65])
{
    static const char *const prefixes[] = {"cri-containerd-", "crio-",
                                           "docker-", "containerd-"};
    const char *h = NULL;

    if (n == 64) {
        h = c;
    } else if (n > 6 && memcmp(c + n - 6, ".scope", 6) == 0) {
        for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
            size_t pl = strlen(prefixes[i]);

            if (n == pl + 64 + 6 && memcmp(c, prefixes[i], pl) == 0)
                h = c + pl;
        }
    }
    if (h == NULL)
        return false;
    for (size_t i = 0; i < 64; i++)
        if (!is_hex(h[i]))
            return false;
    memcpy(id, h, 64);
    id[64] = '\0';
    return true;
}

/* Looks for a pod in one cgroup path. */
static bool
path_parse(const char *s, size_t n, struct wd_podref *r)
{
    size_t i = 0;
    bool found = false;

    while (i < n) {
        size_t start, len;

        while (i < n && s[i] == '/')
            i++;
        start = i;
        while (i < n && s[i] != '/')
            i++;
        len = i - start;
        if (len == 0)
            break;
        if (!found) {
            found = pod_component(s + start, len, r->pod_uid);
            continue;
        }
        /* The component right below the pod, if it is a container. */
        if (!container_component(s + start, len, r->container_id))
            r->container_id[0] = '\0';
        return true;
    }
    return found;
}

int
wd_cgroup_parse(const char *buf, size_t len, struct wd_podref *out)
{
    struct wd_podref best, cur;
    bool have = false;
    size_t i = 0;

    memset(&best, 0, sizeof(best));
    while (i < len) {
        size_t start = i, colons = 0, path = 0;

        while (i < len && buf[i] != '\n') {
            if (buf[i] == ':' && colons < 2 && ++colons == 2)
                path = i + 1;
            i++;
        }
        if (colons == 2) {
            memset(&cur, 0, sizeof(cur));
            if (path_parse(buf + path, i - path, &cur)) {
                /* Prefer a line that also names the container: with
                 * cgroup v1 every hierarchy says the same, but a
                 * hierarchy the runtime does not manage may stop at the
                 * pod. */
                if (!have || (best.container_id[0] == '\0' &&
                              cur.container_id[0] != '\0'))
                    best = cur;
                have = true;
            }
        }
        (void)start;
        if (i < len)
            i++;
    }
    if (!have)
        return -1;
    *out = best;
    return 0;
}
