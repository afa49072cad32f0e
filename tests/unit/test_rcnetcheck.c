/* Unit tests of ringcheck/netcheck.c: NCCL_SOCKET_IFNAME and NCCL_IB_HCA
 * in NCCL's list syntax (prefix, '=' exact, '^' exclude, ':port'). */
#include "harness.h"
#include "ringcheck/netcheck.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static void
names_set(struct netcheck_names *l, const char *const *names)
{
    l->n = 0;
    for (; *names != NULL; names++)
        snprintf(l->name[l->n++], NETCHECK_NAME_LEN, "%s", *names);
}

/* The single-interface matcher the cross-node phase picks with. */
static void
test_ifname_match(void)
{
    static const struct {
        const char *name, *spec;
        int want;
    } cases[] = {
        {"eth0", "eth", 1},
        {"eth0", "=eth", 0},
        {"eth0", "=eth0", 1},
        {"eth0", "ib,eth0:5000", 1},
        {"docker0", "^docker,lo", 0},
        {"eth0", "^docker,lo", 1},
        {"lo", "^=lo", 0},
        {"lo0", "^=lo", 1},
        {"eth0", "", 0},
        {"eth0", "^", 1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK(netcheck_ifname_match(cases[i].name, cases[i].spec) ==
              cases[i].want);
}

static void
test_ifname(void)
{
    static const char *const pod[] = {"eth0", "lo", "net1", NULL};
    static const struct {
        const char *spec;
        int ok;
        const char *msg; /* a part of the error, or NULL */
    } cases[] = {
        {"eth0", 0, NULL},
        {"eth", 0, NULL},
        {"eth,net", 0, NULL},
        {"=eth0", 0, NULL},
        {"=eth", -1, "no interface is exactly \"eth\""},
        {"ib0", -1,
         "no interface matches \"ib0\"; this pod has: eth0, lo, "
         "net1"},
        {"eth0,ib", -1, "\"ib\""},
        {"eth0:5000", 0, NULL},
        {"^lo", 0, NULL},
        {"^eth,lo,net", -1, "excludes every interface"},
        {"^=eth0,lo,net1", -1, "excludes every interface"},
        {"^=eth,lo,net", 0, NULL},
        {",", -1, "names no interface"},
    };
    struct netcheck_names have;
    char err[512];

    names_set(&have, pod);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int r;

        err[0] = '\0';
        r = netcheck_ifname(cases[i].spec, &have, err, sizeof(err));
        if (r != cases[i].ok)
            fprintf(stderr, "NCCL_SOCKET_IFNAME=%s: got %d (%s)\n",
                    cases[i].spec, r, err);
        CHECK_INT(r, cases[i].ok);
        if (cases[i].msg != NULL)
            CHECK(strstr(err, cases[i].msg) != NULL);
    }
}

static void
test_hca(void)
{
    char root[] = "/tmp/rcnetcheck.XXXXXX", path[256];
    struct netcheck_names have;
    char err[512];
    static const struct {
        const char *spec;
        int ok;
        const char *msg;
    } cases[] = {
        {"mlx5", 0, NULL},
        {"mlx5_0,mlx5_1", 0, NULL},
        {"=mlx5_0:1", 0, NULL},
        {"=mlx5", -1, "no HCA is exactly \"mlx5\""},
        {"mlx5_0:2", -1, "\"mlx5_0\" has no port 2"},
        {"mlx5_7", -1, "this pod has: mlx5_0, mlx5_1"},
        {"^mlx5_0,mlx5_1", 0, NULL},
    };

    CHECK(mkdtemp(root) != NULL);
    snprintf(path, sizeof(path),
             "mkdir -p %s/class/infiniband/mlx5_0/ports/1 "
             "%s/class/infiniband/mlx5_1/ports/1",
             root, root);
    CHECK_INT(system(path), 0);
    netcheck_hcas(root, &have);
    CHECK_INT(have.n, 2);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int r;

        err[0] = '\0';
        r = netcheck_hca(cases[i].spec, root, &have, err, sizeof(err));
        if (r != cases[i].ok)
            fprintf(stderr, "NCCL_IB_HCA=%s: got %d (%s)\n", cases[i].spec, r,
                    err);
        CHECK_INT(r, cases[i].ok);
        if (cases[i].msg != NULL)
            CHECK(strstr(err, cases[i].msg) != NULL);
    }
    snprintf(path, sizeof(path), "rm -rf %s", root);
    CHECK_INT(system(path), 0);
    /* No infiniband folder at all: nothing matches. */
    netcheck_hcas("/nonexistent-sysfs", &have);
    CHECK_INT(have.n, 0);
    CHECK_INT(
        netcheck_hca("mlx5", "/nonexistent-sysfs", &have, err, sizeof(err)),
        -1);
    CHECK(strstr(err, "this pod has: none") != NULL);
}

#define UP (IFF_UP | IFF_RUNNING)

/* Interfaces the way NCCL picks them (socket.cc, ncclFindInterfaces). */
static void
test_pick(void)
{
    /* Regression: an IPv6-only pod. The old picker took only IPv4 and
     * found nothing but lo. */
    static const struct netcheck_if v6only[] = {
        {"lo", AF_INET, UP | IFF_LOOPBACK, 0, "127.0.0.1"},
        {"lo", AF_INET6, UP | IFF_LOOPBACK, 1, "::1"},
        {"eth0", AF_INET6, UP, 0, "fd00:10::5"},
    };
    /* virbr and docker come after everything else; an interface that is
     * up but not running (no carrier) never counts. */
    static const struct netcheck_if bridges[] = {
        {"virbr0", AF_INET, UP, 0, "192.168.122.1"},
        {"docker0", AF_INET, UP, 0, "172.17.0.1"},
        {"eth1", AF_INET, IFF_UP, 0, "10.1.0.5"},
        {"eth0", AF_INET, UP, 0, "10.0.0.5"},
        {"ib0", AF_INET, IFF_UP, 0, "10.2.0.5"},
        {"lo", AF_INET, UP | IFF_LOOPBACK, 0, "127.0.0.1"},
    };
    static const struct netcheck_if only_virbr[] = {
        {"virbr0", AF_INET, UP, 0, "192.168.122.1"},
        {"lo", AF_INET, UP | IFF_LOOPBACK, 0, "127.0.0.1"},
        {"docker0", AF_INET, UP, 0, "172.17.0.1"},
    };
    static const struct netcheck_if ib[] = {
        {"eth0", AF_INET, UP, 0, "10.0.0.5"},
        {"ib0", AF_INET, UP, 0, "10.2.0.5"},
    };

    CHECK_INT(netcheck_pick(v6only, 3, NULL, 0), 2);
    CHECK_INT(netcheck_pick(v6only, 3, NULL, AF_INET), 0);
    CHECK_INT(netcheck_pick(v6only, 2, NULL, AF_INET6), -1);
    CHECK_INT(netcheck_pick(bridges, 6, NULL, 0), 3);
    CHECK_INT(netcheck_pick(bridges, 6, "eth1", 0), -1);
    CHECK_INT(netcheck_pick(bridges, 6, "=virbr0", 0), 0);
    /* One character is no NCCL_SOCKET_IFNAME for NCCL (strlen > 1). */
    CHECK_INT(netcheck_pick(bridges, 6, "e", 0), 3);
    CHECK_INT(netcheck_pick(only_virbr, 3, NULL, 0), 2);
    CHECK_INT(netcheck_pick(only_virbr, 2, NULL, 0), 1);
    CHECK_INT(netcheck_pick(only_virbr, 1, NULL, 0), 0);
    CHECK_INT(netcheck_pick(ib, 2, NULL, 0), 1);
}

/* Regression: /sys/class/infiniband lists the host's HCAs in a pod that
 * has no /dev/infiniband/uverbs*; NCCL cannot use them there. */
static void
test_ib_usable(void)
{
    char root[] = "/tmp/rcnetcheck-ib.XXXXXX", path[600], why[600];

    CHECK(mkdtemp(root) != NULL);
    snprintf(path, sizeof(path),
             "mkdir -p %s/sys/class/infiniband/mlx5_0 %s/dev", root, root);
    CHECK_INT(system(path), 0);
    snprintf(path, sizeof(path), "%s/sys", root);
    {
        char dev[600];

        snprintf(dev, sizeof(dev), "%s/dev", root);
        CHECK_INT(netcheck_ib_usable(path, dev, why, sizeof(why)), 0);
        CHECK(strstr(why, "lists mlx5_0, but this pod has no") != NULL);
        snprintf(dev, sizeof(dev),
                 "mkdir -p %s/dev/infiniband && touch "
                 "%s/dev/infiniband/uverbs0",
                 root, root);
        CHECK_INT(system(dev), 0);
        snprintf(dev, sizeof(dev), "%s/dev", root);
        CHECK_INT(netcheck_ib_usable(path, dev, why, sizeof(why)), 1);
    }
    CHECK_INT(
        netcheck_ib_usable("/nonexistent-sysfs", "/dev", why, sizeof(why)), 0);
    snprintf(path, sizeof(path), "rm -rf %s", root);
    CHECK_INT(system(path), 0);
}

/* The address in a unique id: NCCL's ncclBootstrapHandle layout. */
static void
test_id_addr(void)
{
    unsigned char id[128];
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    char out[80];

    memset(id, 0, sizeof(id));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons(43123);
    inet_pton(AF_INET, "10.0.0.5", &sin.sin_addr);
    memcpy(id + 8, &sin, sizeof(sin));
    CHECK_INT(netcheck_id_addr(id, sizeof(id), out, sizeof(out)), 0);
    CHECK_STR(out, "10.0.0.5:43123");
    memset(&sin6, 0, sizeof(sin6));
    sin6.sin6_family = AF_INET6;
    sin6.sin6_port = htons(40000);
    inet_pton(AF_INET6, "fd00:10::5", &sin6.sin6_addr);
    memcpy(id + 8, &sin6, sizeof(sin6));
    CHECK_INT(netcheck_id_addr(id, sizeof(id), out, sizeof(out)), 0);
    CHECK_STR(out, "[fd00:10::5]:40000");
    memcpy(id, "tcp:10.0.0.5:1234", 18);
    CHECK_INT(netcheck_id_addr(id, sizeof(id), out, sizeof(out)), -1);
    CHECK_INT(netcheck_id_addr(id, 16, out, sizeof(out)), -1);
}

int
main(void)
{
    test_pick();
    test_ib_usable();
    test_id_addr();
    test_ifname_match();
    test_ifname();
    test_hca();
    return harness_finish();
}
