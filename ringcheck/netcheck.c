/* Checks NCCL_SOCKET_IFNAME and NCCL_IB_HCA against the pod's network
 * namespace and sysfs, with NCCL's own list syntax. */
#include "ringcheck/netcheck.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
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
    for (i = ifa; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || (i->ifa_addr->sa_family != AF_INET &&
                                    i->ifa_addr->sa_family != AF_INET6))
            continue;
        /* NCCL: "Only consider running interfaces", and never ::1. */
        if (!(i->ifa_flags & IFF_RUNNING))
            continue;
        if (i->ifa_addr->sa_family == AF_INET6 &&
            IN6_IS_ADDR_LOOPBACK(
                &((const struct sockaddr_in6 *)(const void *)i->ifa_addr)
                     ->sin6_addr))
            continue;
        names_add(out, i->ifa_name);
    }
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

int
netcheck_if_list(struct netcheck_if *out, int max)
{
    struct ifaddrs *ifa, *i;
    int n = 0;

    if (getifaddrs(&ifa) != 0)
        return -1;
    for (i = ifa; i != NULL && n < max; i = i->ifa_next) {
        const void *a;
        int fam;

        if (i->ifa_addr == NULL)
            continue;
        fam = i->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        memset(&out[n], 0, sizeof(out[n]));
        snprintf(out[n].name, sizeof(out[n].name), "%s", i->ifa_name);
        out[n].family = fam;
        out[n].flags = i->ifa_flags;
        if (fam == AF_INET) {
            a = &((const struct sockaddr_in *)(const void *)i->ifa_addr)
                     ->sin_addr;
        } else {
            a = &((const struct sockaddr_in6 *)(const void *)i->ifa_addr)
                     ->sin6_addr;
            out[n].loopback6 = IN6_IS_ADDR_LOOPBACK((const struct in6_addr *)a);
        }
        if (inet_ntop(fam, a, out[n].addr, sizeof(out[n].addr)) == NULL)
            out[n].addr[0] = '\0';
        n++;
    }
    freeifaddrs(ifa);
    return n;
}

int
netcheck_pick(const struct netcheck_if *ifs, int n, const char *ifname,
              int family)
{
    static const char *const order[] = {"ib", "^docker,lo,virbr", "docker",
                                        "lo", "virbr"};
    int user = ifname != NULL && strlen(ifname) > 1;
    size_t steps = user ? 1 : sizeof(order) / sizeof(order[0]);

    for (size_t k = 0; k < steps; k++) {
        const char *spec = user ? ifname : order[k];

        for (int i = 0; i < n; i++) {
            if (!(ifs[i].flags & IFF_RUNNING) || ifs[i].loopback6)
                continue;
            if (family != 0 && ifs[i].family != family)
                continue;
            if (netcheck_ifname_match(ifs[i].name, spec))
                return i;
        }
    }
    return -1;
}

int
netcheck_ib_usable(const char *sysfs_root, const char *dev_root, char *why,
                   size_t whylen)
{
    struct netcheck_names hcas;
    char path[512], list[512];
    DIR *d;
    struct dirent *de;
    int verbs = 0;

    netcheck_hcas(sysfs_root, &hcas);
    if (hcas.n == 0) {
        if (why != NULL)
            snprintf(why, whylen, "no HCA in %s/class/infiniband", sysfs_root);
        return 0;
    }
    snprintf(path, sizeof(path), "%s/infiniband", dev_root);
    d = opendir(path);
    if (d != NULL) {
        while ((de = readdir(d)) != NULL)
            verbs += strncmp(de->d_name, "uverbs", 6) == 0;
        closedir(d);
    }
    if (verbs > 0)
        return hcas.n;
    if (why != NULL) {
        names_join(&hcas, list, sizeof(list));
        snprintf(why, whylen,
                 "%s/class/infiniband lists %s, but this pod has no "
                 "%s/infiniband/uverbs* device: the HCAs are the host's, not "
                 "given to the pod (the RDMA device plugin's resource)",
                 sysfs_root, list, dev_root);
    }
    return 0;
}

int
netcheck_id_addr(const unsigned char *id, size_t len, char *out, size_t outlen)
{
    /* The handle: uint64_t magic, then the sockaddr, whose family comes
     * first in host order. */
    unsigned short family;
    char a[INET6_ADDRSTRLEN];
    unsigned port;

    if (len < 8 + sizeof(struct sockaddr_in6))
        return -1;
    memcpy(&family, id + 8, sizeof(family));
    if (family == AF_INET) {
        struct sockaddr_in sin;

        memcpy(&sin, id + 8, sizeof(sin));
        port = ntohs(sin.sin_port);
        if (inet_ntop(AF_INET, &sin.sin_addr, a, sizeof(a)) == NULL ||
            port == 0)
            return -1;
        snprintf(out, outlen, "%s:%u", a, port);
        return 0;
    }
    if (family == AF_INET6) {
        struct sockaddr_in6 sin6;

        memcpy(&sin6, id + 8, sizeof(sin6));
        port = ntohs(sin6.sin6_port);
        if (inet_ntop(AF_INET6, &sin6.sin6_addr, a, sizeof(a)) == NULL ||
            port == 0)
            return -1;
        snprintf(out, outlen, "[%s]:%u", a, port);
        return 0;
    }
    return -1;
}
