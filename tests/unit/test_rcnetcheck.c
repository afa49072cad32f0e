/* Unit tests of ringcheck/netcheck.c: NCCL_SOCKET_IFNAME and NCCL_IB_HCA
 * in NCCL's list syntax (prefix, '=' exact, '^' exclude, ':port'). */
#include "harness.h"
#include "ringcheck/netcheck.h"

#include <stdlib.h>
#include <string.h>
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

int
main(void)
{
    test_ifname_match();
    test_ifname();
    test_hca();
    return harness_finish();
}
