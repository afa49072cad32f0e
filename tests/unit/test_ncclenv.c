/* Unit tests for contract/ncclenv.c: the NCCL 2.28 catalog and its checks. */
#include <string.h>

#include "contract/ncclenv.h"
#include "harness.h"

struct env_case {
    const char *name;
    const char *value; /* NULL: name only */
    enum ncclenv_severity want;
    const char *needle; /* substring of the message, or NULL */
};

static const struct env_case cases[] = {
    /* not NCCL's business */
    {"PATH", "/bin", NCCLENV_OK, NULL},
    {"CUDA_VISIBLE_DEVICES", "0,1", NCCLENV_OK, NULL},
    /* inventions and PyTorch names */
    {"NCCL_TIMEOUT", "1800", NCCLENV_ERROR, "NCCL has no timeout variable"},
    {"NCCL_ASYNC_ERROR_HANDLING", "1", NCCLENV_WARNING,
     "use TORCH_NCCL_ASYNC_ERROR_HANDLING"},
    {"NCCL_BLOCKING_WAIT", "1", NCCLENV_WARNING,
     "use TORCH_NCCL_BLOCKING_WAIT"},
    {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3", NCCLENV_OK, NULL},
    {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "yes", NCCLENV_ERROR, "0|1|2|3"},
    {"TORCH_NCCL_SOMETHING_NEW", "x", NCCLENV_OK, NULL},
    /* deprecated and removed names */
    {"NCCL_MAX_NCHANNELS", "16", NCCLENV_WARNING, "use NCCL_MAX_CTAS"},
    {"NCCL_MIN_NCHANNELS", "4", NCCLENV_WARNING, "use NCCL_MIN_CTAS"},
    {"NCCL_IB_GDR_LEVEL", "PHB", NCCLENV_ERROR, "use NCCL_NET_GDR_LEVEL"},
    {"NCCL_IB_CUDA_SUPPORT", "1", NCCLENV_ERROR, "use NCCL_NET_GDR_LEVEL"},
    {"NCCL_LL_THRESHOLD", "0", NCCLENV_ERROR, "use NCCL_PROTO"},
    {"NCCL_CHECKS_DISABLE", "1", NCCLENV_ERROR, "use NCCL_CHECK_POINTERS"},
    /* unknown names: a typo is an error, anything else a warning */
    {"NCCL_P2P_DISBALE", "1", NCCLENV_ERROR, "did you mean NCCL_P2P_DISABLE?"},
    {"NCCL_SOCKET_IFNAM", "eth0", NCCLENV_ERROR,
     "did you mean NCCL_SOCKET_IFNAME?"},
    {"NCCL_GPUDIRECTTCPX_SOCKET_IFNAME", "eth1", NCCLENV_WARNING,
     "does not read"},
    /* GDR and P2P levels */
    {"NCCL_NET_GDR_LEVEL", "PHB", NCCLENV_OK, NULL},
    {"NCCL_NET_GDR_LEVEL", "SYS", NCCLENV_OK, NULL},
    {"NCCL_NET_GDR_LEVEL", "3", NCCLENV_OK, NULL},
    {"NCCL_NET_GDR_LEVEL", "NVL", NCCLENV_ERROR, "LOC, PIX, PXB, PHB, SYS"},
    {"NCCL_NET_GDR_LEVEL", "phb", NCCLENV_ERROR, "write PHB"},
    {"NCCL_NET_GDR_LEVEL", "-1", NCCLENV_ERROR, "negative"},
    {"NCCL_P2P_LEVEL", "NVL", NCCLENV_OK, NULL},
    {"NCCL_P2P_LEVEL", "PXB", NCCLENV_OK, NULL},
    {"NCCL_P2P_LEVEL", "NVLINK", NCCLENV_ERROR, "or an integer"},
    /* interface lists */
    {"NCCL_SOCKET_IFNAME", "eth0", NCCLENV_OK, NULL},
    {"NCCL_SOCKET_IFNAME", "^docker0,lo", NCCLENV_OK, NULL},
    {"NCCL_SOCKET_IFNAME", "=eth0", NCCLENV_OK, NULL},
    {"NCCL_SOCKET_IFNAME", "^=docker0", NCCLENV_OK, NULL},
    {"NCCL_SOCKET_IFNAME", "eth0,,eth1", NCCLENV_ERROR, "empty entry"},
    {"NCCL_SOCKET_IFNAME", "eth0, eth1", NCCLENV_ERROR, "spaces"},
    {"NCCL_SOCKET_IFNAME", "eth0,^lo", NCCLENV_ERROR, "only at the start"},
    {"NCCL_SOCKET_IFNAME", "^", NCCLENV_ERROR, "names no interface"},
    {"NCCL_SOCKET_IFNAME", "averyveryverylongname", NCCLENV_ERROR,
     "longer than an interface"},
    {"NCCL_IB_HCA", "mlx5_0:1,mlx5_1", NCCLENV_OK, NULL},
    {"NCCL_IB_HCA", "=mlx5_0", NCCLENV_OK, NULL},
    {"NCCL_IB_HCA", "mlx5_0:x", NCCLENV_ERROR, "port"},
    /* 0/1 switches */
    {"NCCL_IB_DISABLE", "1", NCCLENV_OK, NULL},
    {"NCCL_IB_DISABLE", "true", NCCLENV_ERROR, "0 or 1"},
    {"NCCL_CUMEM_ENABLE", "2", NCCLENV_WARNING, "0 or 1"},
    /* settings that only pin the default and block the fallback file */
    {"NCCL_P2P_DISABLE", "0", NCCLENV_WARNING, "overrides NCCL_CONF_FILE"},
    {"NCCL_IB_DISABLE", "0", NCCLENV_WARNING, "overrides NCCL_CONF_FILE"},
    {"NCCL_SHM_DISABLE", "0", NCCLENV_WARNING, "restates NCCL's default"},
    {"NCCL_P2P_DISABLE", "1", NCCLENV_OK, NULL},
    /* byte sizes */
    {"NCCL_BUFFSIZE", "4194304", NCCLENV_OK, NULL},
    {"NCCL_BUFFSIZE", "0x400000", NCCLENV_OK, NULL},
    {"NCCL_BUFFSIZE", "4M", NCCLENV_ERROR, "did you mean 4194304?"},
    {"NCCL_BUFFSIZE", "4MiB", NCCLENV_ERROR, "did you mean 4194304?"},
    {"NCCL_BUFFSIZE", "lots", NCCLENV_ERROR, "number of bytes"},
    {"NCCL_BUFFSIZE", "-1", NCCLENV_ERROR, "negative"},
    {"NCCL_BUFFSIZE", "0400", NCCLENV_WARNING, "octal"},
    /* integers, enums, lists */
    {"NCCL_NTHREADS", "512", NCCLENV_OK, NULL},
    {"NCCL_NTHREADS", "-2", NCCLENV_ERROR, "negative"},
    {"NCCL_IB_GID_INDEX", "-1", NCCLENV_OK, NULL},
    {"NCCL_IB_TIMEOUT", "20s", NCCLENV_ERROR, "integer"},
    {"NCCL_DEBUG", "INFO", NCCLENV_OK, NULL},
    {"NCCL_DEBUG", "warn", NCCLENV_OK, NULL},
    {"NCCL_DEBUG", "VERBOSE", NCCLENV_ERROR, "VERSION, WARN, INFO"},
    {"NCCL_DEBUG_SUBSYS", "INIT,COLL,ENV,NET", NCCLENV_OK, NULL},
    {"NCCL_DEBUG_SUBSYS", "^CALL", NCCLENV_OK, NULL},
    {"NCCL_DEBUG_SUBSYS", "INIT,NETWORK", NCCLENV_ERROR, "NETWORK"},
    {"NCCL_DEBUG_SUBSYS", "INIT,", NCCLENV_ERROR, "comma"},
    {"NCCL_ALGO", "Ring,Tree", NCCLENV_OK, NULL},
    {"NCCL_ALGO", "^NVLS", NCCLENV_OK, NULL},
    {"NCCL_ALGO", "allreduce:tree,ring;allgather:ring", NCCLENV_OK, NULL},
    {"NCCL_ALGO", "Rings", NCCLENV_ERROR, "algorithm"},
    {"NCCL_ALGO", "allreduse:tree", NCCLENV_ERROR, "collective"},
    {"NCCL_PROTO", "^LL128", NCCLENV_OK, NULL},
    {"NCCL_PROTO", "LL256", NCCLENV_ERROR, "protocol"},
    {"NCCL_LAUNCH_MODE", "GROUP", NCCLENV_OK, NULL},
    {"NCCL_LAUNCH_MODE", "SERIAL", NCCLENV_ERROR, "PARALLEL, GROUP"},
    {"NCCL_SOCKET_FAMILY", "AF_INET6", NCCLENV_OK, NULL},
    /* a known name with no value to check */
    {"NCCL_NET_GDR_LEVEL", NULL, NCCLENV_OK, NULL},
};

int
main(void)
{
    CHECK_STR(ncclenv_catalog_version(), "2.28");
    CHECK(ncclenv_catalog_size() > 150);
    CHECK(ncclenv_catalog_name(ncclenv_catalog_size()) == NULL);
    /* The catalog has no duplicates and only NCCL_ names. */
    for (size_t i = 0; i < ncclenv_catalog_size(); i++) {
        const char *a = ncclenv_catalog_name(i);

        CHECK(strncmp(a, "NCCL_", 5) == 0);
        for (size_t j = i + 1; j < ncclenv_catalog_size(); j++)
            if (strcmp(a, ncclenv_catalog_name(j)) == 0) {
                fprintf(stderr, "duplicate %s\n", a);
                CHECK(0);
            }
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct env_case *c = &cases[i];
        struct ncclenv_finding f;
        enum ncclenv_severity s = ncclenv_check(c->name, c->value, &f);

        if (s != c->want ||
            (c->needle != NULL && strstr(f.msg, c->needle) == NULL))
            fprintf(stderr, "%s=%s: severity %d, message \"%s\"\n", c->name,
                    c->value ? c->value : "(null)", s, f.msg);
        CHECK_INT(s, c->want);
        CHECK_INT(f.severity, c->want);
        if (c->needle != NULL)
            CHECK(strstr(f.msg, c->needle) != NULL);
        if (c->want == NCCLENV_OK)
            CHECK_STR(f.msg, "");
    }
    return harness_finish();
}
