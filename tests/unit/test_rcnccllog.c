/* Unit tests of ringcheck/nccllog.c: NCCL 2.28's INFO lines (formats from
 * src/transport/p2p.cc, shm.cc, net.cc, coll_net.cc, nvls.cc, src/init.cc,
 * net_socket.cc) into the transports NCCL chose. */
#include "harness.h"
#include "ringcheck/nccllog.h"

#include <string.h>

#define P "node-a:100:101 [0] NCCL INFO "

static void
feed(struct nccllog *l, const char *const *lines, int lo, int n)
{
    nccllog_init(l);
    for (; *lines != NULL; lines++)
        nccllog_line(l, *lines, lo, n);
}

static void
test_p2p_ring(void)
{
    static const char *const lines[] = {
        P "comm 0x5555 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 "
          "MNNVL 0",
        P "Channel 00/02 : 0 1",
        P "Ring 00 : 1 -> 0 -> 1",
        "node-a:100:102 [1] NCCL INFO Ring 00 : 0 -> 1 -> 0",
        P "Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
        P "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
        P "Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM",
        "node-a:100:102 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via "
        "P2P/CUMEM",
        P "NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS "
          "0)",
        "node-a:100:101 [0] enqueue.cc:1412 NCCL WARN Cuda failure",
        NULL};
    struct nccllog l;
    char buf[512];
    unsigned char nv[NCCLLOG_MAX_LOCAL][NCCLLOG_MAX_LOCAL];

    feed(&l, lines, 0, 2);
    CHECK_INT(l.nchannels, 2);
    CHECK_INT(l.intra[NL_P2P], 3);
    CHECK_INT(l.inter[NL_P2P], 0);
    CHECK_INT(nccllog_worst(&l, 0), NL_P2P);
    CHECK_INT(nccllog_worst(&l, 1), -1);
    CHECK_STR(l.p2p_kind, "P2P/CUMEM");
    CHECK_INT(l.ring_lines, 2);
    CHECK_INT(l.ring0_next[0], 1);
    CHECK_INT(l.nvls_available, 0);
    CHECK(strncmp(l.trees, "Trees [0] 1/-1/-1->0->-1", 24) == 0);
    CHECK_INT(nccllog_expect(&l, "p2p", "", NULL, 2, 0, buf, sizeof(buf)), 0);
    /* NVLink asked, the pair has none: P2P through PCIe. */
    memset(nv, 0, sizeof(nv));
    CHECK_INT(nccllog_expect(&l, "nvlink", "", nv, 2, 0, buf, sizeof(buf)), -1);
    CHECK(strstr(buf, "not NVLink") != NULL);
    nv[0][1] = nv[1][0] = 1;
    CHECK_INT(nccllog_expect(&l, "nvlink", "", nv, 2, 0, buf, sizeof(buf)), 0);
    nccllog_summary(&l, 0, 2, buf, sizeof(buf));
    CHECK(strstr(buf, "intra P2P/CUMEM (3 channel lines)") != NULL);
    CHECK(strstr(buf, "ring 0: 0 1") != NULL);
    CHECK(strstr(buf, "NVLS no") != NULL);
    nccllog_json(&l, 0, 2, buf, sizeof(buf));
    CHECK(strstr(buf, "\"intra\":\"P2P\"") != NULL);
    CHECK(strstr(buf, "\"ring0\":[0,1]") != NULL);
}

/* The silent fallback: P2P unusable, NCCL picks the network on one node. */
static void
test_socket_fallback(void)
{
    static const char *const lines[] = {
        P "NET/Socket : Using [0]eth0:10.0.0.2<0> [1]eth1:10.1.0.2<0>",
        P "Using network Socket",
        P "Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0",
        P "Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0",
        P "Channel 01 : 0[0] -> 1[1] via SHM/direct/direct",
        NULL};
    struct nccllog l;
    char buf[512];

    feed(&l, lines, 0, 2);
    CHECK_STR(l.socket_if, "eth0");
    CHECK_INT(l.intra[NL_NET_SOCKET], 2);
    CHECK_INT(l.intra[NL_SHM], 1);
    CHECK_INT(nccllog_worst(&l, 0), NL_NET_SOCKET);
    CHECK_INT(nccllog_expect(&l, "p2p", NULL, NULL, 2, 0, buf, sizeof(buf)),
              -1);
    CHECK(strstr(buf, "the ring works but over NET/Socket on eth0 between "
                      "ranks 0 and 1, not P2P") != NULL);
    CHECK_INT(nccllog_expect(&l, "shm", NULL, NULL, 2, 0, buf, sizeof(buf)),
              -1);
    CHECK_INT(nccllog_expect(&l, "net", NULL, NULL, 2, 0, buf, sizeof(buf)), 0);
    CHECK_INT(nccllog_expect(&l, "", "", NULL, 2, 0, buf, sizeof(buf)), 0);
}

/* Across pods: ranks 2 and 3 are this pod's; IB with and without GDR. */
static void
test_inter(void)
{
    static const char *const gdr[] = {
        P "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.2<0>",
        P "Channel 00/0 : 2[0] -> 3[1] via P2P/IPC",
        P "Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0/GDRDMA",
        P "Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA",
        P "Channel 01/0 : 3[1] -> 0[0] [send] via NET/IB/1(2)/GDRDMA(PCI)",
        P "Connected NVLS tree",
        P "CollNet 00/0 : 2 [send] via COLLNET/SHARP/0/GDRDMA",
        NULL};
    static const char *const nogdr[] = {
        P "Channel 00/0 : 3[1] -> 0[0] [send] via NET/IB/0",
        P "Channel 00/0 : 1[1] -> 2[0] [receive] via NET/IB/0/GDRDMA", NULL};
    struct nccllog l;
    char buf[512];

    feed(&l, gdr, 2, 2);
    CHECK_INT(l.intra[NL_P2P], 1);
    CHECK_INT(l.inter[NL_NET_IB_GDR], 3);
    CHECK_STR(l.ib_dev, "mlx5_0");
    CHECK_INT(l.nvls_used, 1);
    CHECK_INT(l.collnet, 1);
    CHECK_INT(nccllog_expect(&l, "p2p", "ib-gdr", NULL, 2, 2, buf, sizeof(buf)),
              0);
    feed(&l, nogdr, 2, 2);
    CHECK_INT(nccllog_worst(&l, 1), NL_NET_IB);
    CHECK_INT(nccllog_expect(&l, "", "ib-gdr", NULL, 2, 2, buf, sizeof(buf)),
              -1);
    CHECK(strstr(buf, "over NET/IB, not NET/IB with GPU Direct RDMA") != NULL);
    CHECK_INT(nccllog_expect(&l, "", "ib", NULL, 2, 2, buf, sizeof(buf)), 0);
}

static void
test_nothing(void)
{
    struct nccllog l;
    char small[64], buf[1024];

    nccllog_init(&l);
    nccllog_json(&l, 0, 2, buf, sizeof(buf));
    CHECK_STR(buf, "null");
    nccllog_summary(&l, 0, 2, buf, sizeof(buf));
    CHECK_STR(buf, "unknown (no NCCL INFO log)");
    nccllog_line(&l, "plain output line", 0, 2);
    nccllog_line(&l, P "Channel 00/02 : 0 1", 0, 2);
    CHECK_INT(nccllog_has_channels(&l), 0);
    CHECK_INT(l.lines, 1);
    nccllog_json(&l, 0, 2, buf, sizeof(buf));
    CHECK(strncmp(buf, "{\"channels\":0,\"intra\":null,", 27) == 0);
    /* Cut short: valid JSON ("null"), never half an object. */
    nccllog_json(&l, 0, 2, small, sizeof(small));
    CHECK_STR(small, "null");
}

int
main(void)
{
    test_p2p_ring();
    test_socket_fallback();
    test_inter();
    test_nothing();
    return harness_finish();
}
