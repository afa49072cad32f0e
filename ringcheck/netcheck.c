/* Checks NCCL_SOCKET_IFNAME and NCCL_IB_HCA against the pod's network
 * namespace and sysfs, with NCCL's own list syntax. */
#include "ringcheck/netcheck.h"

#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>

const char *
netcheck_sysfs_root(void)
{
    const char *v = getenv("RINGCHECK_SYSFS");

    return v != NULL && v[0] != '\0' ? v : "/sys";
}

static int
name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static void
names_add(struct netcheck_names *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0)
            return;
    if (l->n == NETCHECK_MAX_NAMES)
        return;
    snprintf(l->name[l->n++], NETCHECK_NAME_LEN, "%s", name);
}

static void
names_sort(struct netcheck_names *l)
{
    qsort(l->name, (size_t)l->n, sizeof(l->name[0]), name_cmp);
}

int
netcheck_interfaces(struct netcheck_names *out)
{
    struct ifaddrs *ifa, *i;

    out->n = 0;
    if (getifaddrs(&ifa) != 0)
        return -1;
    for (i = ifa; i != NULL; i = i->ifa_next)
        if (i->ifa_addr != NULL && (i->ifa_addr->sa_family == AF_INET ||
                                    i->ifa_addr->sa_family == AF_INET6))
            names_add(out, i->ifa_name);
    freeifaddrs(ifa);
    names_sort(out);
    return 0;
}

void
netcheck_hcas(const char *sysfs_root, struct netcheck_names *out)
{
    char path[512];
    DIR *d;
    struct dirent *de;

    out->n = 0;
    snprintf(path, sizeof(path), "%s/class/infiniband", sysfs_root);
    d = opendir(path);
    if (d == NULL)
        return;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            names_add(out, de->d_name);
    closedir(d);
    names_sort(out);
}

/* "a, b, c" or "none". */
static void
names_join(const struct netcheck_names *l, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (int i = 0; i < l->n && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i > 0 ? ", " : "",
                              l->name[i]);
    if (l->n == 0)
        snprintf(buf, len, "none");
}

/* One entry of an NCCL list: the name and the port (-1: none). */
struct entry {
    char name[NETCHECK_NAME_LEN];
    int port;
};

/* Splits spec as NCCL's parseStringList does; sets *exclude and *exact
 * from the '^' and '=' marks. Returns the number of entries. */
static int
parse_list(const char *spec, int *exclude, int *exact, struct entry *e, int max)
{
    const char *p = spec;
    int n = 0;

    *exclude = *exact = 0;
    if (*p == '^') {
        *exclude = 1;
        p++;
    }
    if (*p == '=') {
        *exact = 1;
        p++;
    }
    while (*p != '\0' && n < max) {
        size_t len = strcspn(p, ",");
        size_t nl = strcspn(p, ":,");
        char *end;

        if (nl > 0) {
            snprintf(e[n].name, sizeof(e[n].name), "%.*s", (int)nl, p);
            e[n].port = -1;
            if (nl < len && p[nl] == ':') {
                long port = strtol(p + nl + 1, &end, 10);

                e[n].port = end != p + nl + 1 && port >= 0 && port < 65536
                                ? (int)port
                                : 0;
            }
            n++;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return n;
}

static int
name_matches(const char *have, const char *want, int exact)
{
    return exact ? strcmp(have, want) == 0
                 : strncmp(have, want, strlen(want)) == 0;
}

int
netcheck_ifname_match(const char *name, const char *spec)
{
    struct entry e[NETCHECK_MAX_NAMES];
    int exclude, exact,
        hit = 0, n = parse_list(spec, &exclude, &exact, e, NETCHECK_MAX_NAMES);

    for (int k = 0; k < n && !hit; k++)
        hit = name_matches(name, e[k].name, exact);
    return exclude ? !hit : hit;
}

int
netcheck_ifname(const char *spec, const struct netcheck_names *have, char *err,
                size_t errlen)
{
    struct entry e[NETCHECK_MAX_NAMES];
    int exclude, exact,
        n = parse_list(spec, &exclude, &exact, e, NETCHECK_MAX_NAMES);
    char list[1024];

    names_join(have, list, sizeof(list));
    if (exclude) {
        for (int i = 0; i < have->n; i++) {
            int out = 0;

            for (int k = 0; k < n && !out; k++)
                out = name_matches(have->name[i], e[k].name, exact);
            if (!out)
                return 0;
        }
        snprintf(err, errlen,
                 "NCCL_SOCKET_IFNAME=%s excludes every interface; this pod "
                 "has: %s",
                 spec, list);
        return -1;
    }
    if (n == 0) {
        snprintf(err, errlen,
                 "NCCL_SOCKET_IFNAME=%s names no interface; this pod has: %s",
                 spec, list);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        int found = 0;

        for (int i = 0; i < have->n && !found; i++)
            found = name_matches(have->name[i], e[k].name, exact);
        if (!found) {
            snprintf(err, errlen,
                     "NCCL_SOCKET_IFNAME=%s: no interface %s \"%s\"; this "
                     "pod has: %s",
                     spec, exact ? "is exactly" : "matches", e[k].name, list);
            return -1;
        }
    }
    return 0;
}

int
netcheck_hca(const char *spec, const char *sysfs_root,
             const struct netcheck_names *have, char *err, size_t errlen)
{
    struct entry e[NETCHECK_MAX_NAMES];
    int exclude, exact,
        n = parse_list(spec, &exclude, &exact, e, NETCHECK_MAX_NAMES);
    char list[1024];

    if (exclude)
        return 0;
    names_join(have, list, sizeof(list));
    if (n == 0) {
        snprintf(err, errlen, "NCCL_IB_HCA=%s names no HCA; this pod has: %s",
                 spec, list);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        int found = 0, port_ok = e[k].port < 0;
        const char *first = NULL;

        for (int i = 0; i < have->n; i++) {
            char path[512];
            struct stat sb;

            if (!name_matches(have->name[i], e[k].name, exact))
                continue;
            found = 1;
            if (first == NULL)
                first = have->name[i];
            snprintf(path, sizeof(path), "%s/class/infiniband/%s/ports/%d",
                     sysfs_root, have->name[i], e[k].port);
            if (e[k].port >= 0 && stat(path, &sb) == 0)
                port_ok = 1;
        }
        if (!found) {
            snprintf(err, errlen,
                     "NCCL_IB_HCA=%s: no HCA %s \"%s\"; this pod has: %s", spec,
                     exact ? "is exactly" : "matches", e[k].name, list);
            return -1;
        }
        if (!port_ok) {
            snprintf(err, errlen,
                     "NCCL_IB_HCA=%s: \"%s\" has no port %d; this pod has: "
                     "%s",
                     spec, first, e[k].port, list);
            return -1;
        }
    }
    return 0;
}
