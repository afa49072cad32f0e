/* What NCCL chose, read from its INFO log: the rings and trees, the
 * transport of every channel (P2P, SHM, NET/IB with or without GDRDMA,
 * NET/Socket and other network plugins), NVLS and CollNet. Libc only. */
#ifndef NCCLGUARD_RINGCHECK_NCCLLOG_H
#define NCCLGUARD_RINGCHECK_NCCLLOG_H

#include <stddef.h>

#include "contract/limits.h"

#define NCCLLOG_MAX_LOCAL RINGCHECK_MAX_GPUS

/* Transport classes, best first within each kind of path. */
enum nccllog_class {
    NL_P2P = 0,    /* "via P2P/..." (CUMEM, IPC, direct pointer, ...) */
    NL_SHM,        /* "via SHM/..." */
    NL_NET_IB_GDR, /* "via NET/IB/N/GDRDMA" */
    NL_NET_IB,     /* "via NET/IB/N" */
    NL_NET_OTHER,  /* "via NET/<plugin>/N" other than IB and Socket */
    NL_NET_SOCKET, /* "via NET/Socket/N" */
    NL_NCLASSES
};

struct nccllog {
    int lines;      /* INFO lines seen */
    int nchannels;  /* highest channel index seen in a channel line, + 1 */
    int ring_lines; /* "Ring NN : prev -> rank -> next" */
    int tree_lines; /* "Trees [0] ..." */
    /* channel connections, by class, within the pod (both ranks local)
     * and across pods */
    int intra[NL_NCLASSES];
    int inter[NL_NCLASSES];
    /* classes seen between local ranks a and b (bit per class) */
    unsigned char pair[NCCLLOG_MAX_LOCAL][NCCLLOG_MAX_LOCAL];
    /* channel 0's ring: the next rank of each local rank, -1 unknown */
    int ring0_next[NCCLLOG_MAX_LOCAL];
    char p2p_kind[24];  /* "P2P/CUMEM", "P2P/IPC", "P2P/direct pointer" */
    char socket_if[32]; /* first interface of "NET/Socket : Using" */
    char ib_dev[32];    /* first device of "NET/IB : Using" */
    char net_name[32];  /* "Socket", "IB" or a plugin's name */
    int nvls_available; /* "NVLS multicast support is available" */
    int nvls_used;      /* "NVLS comm ..." buffers set up, or NVLS tree */
    int collnet;        /* "CollNet NN/N : ... via COLLNET/" */
    char trees[120];    /* the first "Trees" line's text, cut */
};

/* Empties *l. */
void nccllog_init(struct nccllog *l);

/*
 * Takes one line of NCCL's log (as NCCL writes it: "host:pid:tid [dev]
 * NCCL INFO message"; any other line is ignored). Ranks lo .. lo + n - 1
 * are this pod's. The formats are NCCL 2.28's (src/transport/p2p.cc,
 * shm.cc, net.cc, coll_net.cc, nvls.cc, src/init.cc, src/graph/rings.cc,
 * src/transport/net_socket.cc, net_ib.cc). Thread-compatible.
 */
void nccllog_line(struct nccllog *l, const char *line, int lo, int n);

/* Whether any channel line was seen. */
int nccllog_has_channels(const struct nccllog *l);

/* The worst class among the pod's own (inter = 0) or the cross-pod
 * (inter = 1) connections, or -1 when there are none. */
int nccllog_worst(const struct nccllog *l, int inter);

/* A class's name as NCCL writes it ("P2P", "SHM", "NET/IB/GDRDMA",
 * "NET/IB", "NET/<plugin>", "NET/Socket"). Never NULL. */
const char *nccllog_class_name(int cls);

/*
 * Checks what NCCL chose against an expectation: intra one of "p2p",
 * "nvlink", "shm", "net" (each accepts what is better), inter one of
 * "ib-gdr", "ib", "socket", "net"; "" expects nothing. nv[a][b] says
 * whether local ranks a and b are joined by NVLink (for "nvlink"; NULL:
 * unknown, which fails it). Returns 0 when the expectation holds or cannot
 * be judged (no connections of that kind: *judged stays 0 for it), or -1
 * with what differs in why ("the ring works but over NET/Socket on eth0
 * between ranks 0 and 1, not P2P"). Thread-compatible.
 */
int nccllog_expect(const struct nccllog *l, const char *intra,
                   const char *inter,
                   const unsigned char (*nv)[NCCLLOG_MAX_LOCAL], int n, int lo,
                   char *why, size_t len) __attribute__((warn_unused_result));

/* One line for people: "intra P2P/CUMEM (4 connections), inter none;
 * ring 0: 0 1 2 3; NVLS no; CollNet no". */
void nccllog_summary(const struct nccllog *l, int lo, int n, char *buf,
                     size_t len);

/* The same as one JSON object (no trailing newline); "null" when nothing
 * was logged. */
void nccllog_json(const struct nccllog *l, int lo, int n, char *buf,
                  size_t len);

#endif
