/* The ring check's worker processes: the only code that calls CUDA and
 * NCCL. Each entry point runs in a freshly forked child and never returns. */
#ifndef NCCLGUARD_RINGCHECK_WORKER_H
#define NCCLGUARD_RINGCHECK_WORKER_H

#include <stddef.h>

#include "contract/limits.h"

#define WORKER_MAX_GPUS RINGCHECK_MAX_GPUS

/* Exit codes shared with the supervisor (nccl-tests' meanings). */
enum {
    RC_EXIT_OK = 0,
    RC_EXIT_INTERNAL = 1,
    RC_EXIT_CUDA = 2,
    RC_EXIT_NCCL = 3,
    RC_EXIT_TIMEOUT = 4,
    RC_EXIT_USAGE = 6,
    RC_EXIT_WRONG = 7,
    RC_EXIT_BANDWIDTH = 8,
    RC_EXIT_ENV = 9,
    RC_EXIT_TRANSPORT = 10 /* ours: NCCL chose another transport than
                              --expect-transport names */
};

/* Sizes of the correctness phase: AllReduce at 8 B, 4 KiB, 1 MiB and,
 * where memory allows, WORKER_CHECK_MAX_BYTES, past the sizes where NCCL
 * moves from the LL to the LL128 and Simple protocols and uses all its
 * channels. */
#define WORKER_CHECK_MAX_BYTES ((size_t)16 << 20)
#define WORKER_GATHER_BYTES (64 * 1024)
#define WORKER_BCAST_BYTES (64 * 1024)
#define WORKER_BW_WARMUP 5
#define WORKER_BW_ITERS 20

struct worker_ring {
    int evfd;       /* events to the supervisor */
    int cmdfd;      /* the unique id from the supervisor (ranks > 0) */
    int nranks;     /* ranks in the communicator */
    int first_rank; /* the first rank this process drives */
    int nlocal;     /* ranks this process drives (1, or all in group mode) */
    int dev[WORKER_MAX_GPUS]; /* CUDA device of each local rank */
    size_t bw_bytes;          /* 0: no bandwidth phase */
    size_t check_max_bytes;   /* largest correctness AllReduce (>= 1 MiB) */
};

/*
 * The entry points below run in a freshly forked child that has not touched
 * CUDA, report over evfd (see proto.h) and end the process with _exit: 0
 * after the "X" event, or the RC_EXIT_* code of the failure they reported.
 * A SIGUSR1 asks them to abort: they report what they were waiting for
 * ("S"), the ring worker aborts its communicators, and they exit with
 * RC_EXIT_TIMEOUT. They never block in a CUDA call that ignores it: device
 * work is queued on streams and polled. When an event cannot be written
 * (the supervisor is gone) they abort and exit with RC_EXIT_INTERNAL.
 * Arguments are borrowed.
 * One entry point per process; not for threads.
 */

/* Phase 0's CUDA part: versions, device count and identities. */
void worker_preflight_main(int evfd) __attribute__((noreturn));

/* Phases 1 and 2 on devices dev[0..ndev-1]. */
void worker_devices_main(int evfd, const int *dev, int ndev)
    __attribute__((noreturn));

/* Phases 3 to 6 for the local ranks described by *w. */
void worker_ring_main(const struct worker_ring *w) __attribute__((noreturn));

#endif
