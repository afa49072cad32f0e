/* Worker processes of the ring check: CUDA and NCCL calls, each phase
 * reported to the supervisor as events, every wait interruptible. */
#include "worker.h"

#include "proto.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Set by SIGUSR1: the supervisor asks us to abort our communicators. */
static volatile sig_atomic_t abort_requested;

static void
on_abort_signal(int sig)
{
    (void)sig;
    abort_requested = 1;
}

static void
worker_signals_init(void)
{
    struct sigaction sa;
    sigset_t set;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_abort_signal;
    sigemptyset(&sa.sa_mask);
    /* No SA_RESTART: a blocking read of the unique id must wake up. */
    sigaction(SIGUSR1, &sa, NULL);
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
nap(void)
{
    struct timespec ts = {0, 100000};

    nanosleep(&ts, NULL);
}

/* CUDA's "there is no usable GPU here" answers: an environment problem
 * (exit 9), not a CUDA failure. */
static int
cuda_env_error(cudaError_t e)
{
    switch (e) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorDevicesUnavailable:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorStubLibrary:
    case cudaErrorCallRequiresNewerDriver:
    case cudaErrorNotPermitted:
    case cudaErrorSystemNotReady:
        return 1;
    default:
        return 0;
    }
}

void
worker_preflight_main(int evfd)
{
    int nccl = 0, rt = 0, drv = 0, n = 0;
    cudaError_t e;

    worker_signals_init();
    proto_send(evfd, "P b 0");
    if (ncclGetVersion(&nccl) != ncclSuccess)
        nccl = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
        rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    proto_send(evfd, "V %d %d %d", nccl, rt, drv);
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (cuda_env_error(e))
            proto_send(evfd,
                       "E %d 0 no usable GPU or driver: cudaGetDeviceCount "
                       "failed: %s (%s)",
                       RC_EXIT_ENV, cudaGetErrorString(e), cudaGetErrorName(e));
        else
            proto_send(evfd, "E %d 0 cudaGetDeviceCount failed: %s (%s)",
                       RC_EXIT_CUDA, cudaGetErrorString(e),
                       cudaGetErrorName(e));
        _exit(cuda_env_error(e) ? RC_EXIT_ENV : RC_EXIT_CUDA);
    }
    proto_send(evfd, "N %d", n);
    for (int d = 0; d < n && d < WORKER_MAX_GPUS; d++) {
        struct cudaDeviceProp p;
        char bus[64] = "unknown";
        char uuid[40];
        size_t k = 0;

        e = cudaGetDeviceProperties(&p, d);
        if (e != cudaSuccess) {
            proto_send(evfd, "E %d 0 cudaGetDeviceProperties(%d) failed: %s",
                       RC_EXIT_CUDA, d, cudaGetErrorString(e));
            _exit(RC_EXIT_CUDA);
        }
        if (cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), d) != cudaSuccess)
            snprintf(bus, sizeof(bus), "unknown");
        for (int i = 0; i < 16; i++) {
            k += (size_t)snprintf(uuid + k, sizeof(uuid) - k, "%02x",
                                  (unsigned char)p.uuid.bytes[i]);
        }
        for (char *c = p.name; *c != '\0'; c++)
            if (*c == '\n')
                *c = ' ';
        proto_send(evfd, "G %d %zu %s %s %.60s", d, p.totalGlobalMem >> 20, bus,
                   uuid, p.name);
    }
    proto_send(evfd, "P e 0");
    proto_send(evfd, "X");
    _exit(0);
}

void
worker_devices_main(int evfd, const int *dev, int ndev)
{
    cudaError_t e;
    void *p = NULL;

    worker_signals_init();
    proto_send(evfd, "P b 1");
    for (int i = 0; i < ndev; i++) {
        size_t fr = 0, tot = 0;
        const char *step = "cudaSetDevice";

        e = cudaSetDevice(dev[i]);
        if (e == cudaSuccess) {
            step = "cudaMalloc";
            e = cudaMalloc(&p, (size_t)1 << 20);
        }
        if (e == cudaSuccess) {
            step = "cudaMemset";
            e = cudaMemset(p, 0x5a, (size_t)1 << 20);
        }
        if (e == cudaSuccess) {
            step = "cudaDeviceSynchronize";
            e = cudaDeviceSynchronize();
        }
        if (e == cudaSuccess) {
            step = "cudaMemGetInfo";
            e = cudaMemGetInfo(&fr, &tot);
        }
        if (p != NULL) {
            cudaFree(p);
            p = NULL;
        }
        if (e != cudaSuccess) {
            proto_send(evfd, "E %d 1 %s on GPU %d failed: %s (%s)",
                       cuda_env_error(e) ? RC_EXIT_ENV : RC_EXIT_CUDA, step,
                       dev[i], cudaGetErrorString(e), cudaGetErrorName(e));
            _exit(RC_EXIT_CUDA);
        }
        proto_send(evfd, "F %d %zu", dev[i], fr >> 20);
    }
    proto_send(evfd, "P e 1");
    proto_send(evfd, "P b 2");
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < ndev; j++) {
            int can = 0, perf = 0;

            if (i == j)
                continue;
            e = cudaDeviceCanAccessPeer(&can, dev[i], dev[j]);
            if (e != cudaSuccess) {
                proto_send(evfd,
                           "E %d 2 cudaDeviceCanAccessPeer(%d, %d) failed: %s",
                           RC_EXIT_CUDA, dev[i], dev[j], cudaGetErrorString(e));
                _exit(RC_EXIT_CUDA);
            }
            if (cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank,
                                          dev[i], dev[j]) != cudaSuccess)
                perf = -1;
            proto_send(evfd, "T %d %d %d %d", dev[i], dev[j], can, perf);
        }
    proto_send(evfd, "P e 2");
    proto_send(evfd, "X");
    _exit(0);
}

/* State of the ranks one ring worker drives. */
struct ring {
    const struct worker_ring *w;
    int phase;
    ncclComm_t comm[WORKER_MAX_GPUS];
    cudaStream_t stream[WORKER_MAX_GPUS];
    void *dsend[WORKER_MAX_GPUS];
    void *drecv[WORKER_MAX_GPUS];
    int32_t *host; /* staging, buf_bytes * nranks */
    size_t buf_bytes;
};

static void
ring_abort_all(struct ring *r)
{
    for (int l = 0; l < r->w->nlocal; l++)
        if (r->comm[l] != NULL) {
            ncclCommAbort(r->comm[l]);
            r->comm[l] = NULL;
        }
}

static void ring_fail(struct ring *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), noreturn));

static void
ring_fail(struct ring *r, int code, const char *fmt, ...)
{
    char msg[700];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    proto_send(r->w->evfd, "E %d %d %s", code, r->phase, msg);
    ring_abort_all(r);
    _exit(code);
}

/* The supervisor asked us to stop: say which ranks were still busy, abort
 * the communicators, and go. */
static void
ring_abort_requested(struct ring *r, const int *busy)
{
    for (int l = 0; l < r->w->nlocal; l++)
        if (busy == NULL || busy[l])
            proto_send(r->w->evfd, "S %d", r->w->first_rank + l);
    ring_abort_all(r);
    proto_send(r->w->evfd, "A");
    _exit(RC_EXIT_TIMEOUT);
}

static void ring_nccl_fail(struct ring *r, int l, ncclResult_t res,
                           const char *what) __attribute__((noreturn));
static void ring_cuda_fail(struct ring *r, int l, cudaError_t e,
                           const char *what) __attribute__((noreturn));

static void
ring_nccl_fail(struct ring *r, int l, ncclResult_t res, const char *what)
{
    const char *last = r->comm[l] != NULL ? ncclGetLastError(r->comm[l]) : "";

    ring_fail(r, RC_EXIT_NCCL, "%s failed on rank %d (GPU %d): %s%s%s", what,
              r->w->first_rank + l, r->w->dev[l], ncclGetErrorString(res),
              last != NULL && *last != '\0' ? ": " : "",
              last != NULL ? last : "");
}

static void
ring_cuda_fail(struct ring *r, int l, cudaError_t e, const char *what)
{
    ring_fail(r, RC_EXIT_CUDA, "%s failed on rank %d (GPU %d): %s (%s)", what,
              r->w->first_rank + l, r->w->dev[l], cudaGetErrorString(e),
              cudaGetErrorName(e));
}

/* Polls until no communicator is in progress (after init or a group). */
static void
ring_settle(struct ring *r, const char *what)
{
    int busy[WORKER_MAX_GPUS];

    for (;;) {
        int any = 0;

        for (int l = 0; l < r->w->nlocal; l++) {
            ncclResult_t st = ncclSuccess;
            ncclResult_t res = ncclCommGetAsyncError(r->comm[l], &st);

            if (res != ncclSuccess)
                ring_nccl_fail(r, l, res, "ncclCommGetAsyncError");
            if (st != ncclSuccess && st != ncclInProgress)
                ring_nccl_fail(r, l, st, what);
            busy[l] = st == ncclInProgress;
            any |= busy[l];
        }
        if (!any)
            return;
        if (abort_requested)
            ring_abort_requested(r, busy);
        nap();
    }
}

/* Polls streams and communicators until the enqueued work is done. */
static void
ring_wait(struct ring *r, const char *what)
{
    int busy[WORKER_MAX_GPUS];

    for (;;) {
        int any = 0;

        for (int l = 0; l < r->w->nlocal; l++) {
            ncclResult_t st = ncclSuccess;
            cudaError_t e;

            if (ncclCommGetAsyncError(r->comm[l], &st) != ncclSuccess ||
                (st != ncclSuccess && st != ncclInProgress))
                ring_nccl_fail(r, l, st, what);
            e = cudaStreamQuery(r->stream[l]);
            if (e != cudaSuccess && e != cudaErrorNotReady)
                ring_cuda_fail(r, l, e, what);
            busy[l] = e == cudaErrorNotReady || st == ncclInProgress;
            any |= busy[l];
        }
        if (!any)
            return;
        if (abort_requested)
            ring_abort_requested(r, busy);
        nap();
    }
}

static void
ring_get_id(struct ring *r, ncclUniqueId *id)
{
    const struct worker_ring *w = r->w;
    char line[2 * NCCL_UNIQUE_ID_BYTES + 8];
    size_t len = 0;

    if (w->first_rank == 0) {
        char hex[2 * NCCL_UNIQUE_ID_BYTES + 1];
        ncclResult_t res = ncclGetUniqueId(id);

        if (res != ncclSuccess)
            ring_nccl_fail(r, 0, res, "ncclGetUniqueId");
        if (w->nlocal == w->nranks)
            return;
        for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
            snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id->internal[i]);
        proto_send(w->evfd, "U %s", hex);
        return;
    }
    /* Ranks > 0 wait for rank 0's id, which the supervisor forwards. */
    while (len < sizeof(line) - 1) {
        ssize_t n = read(w->cmdfd, line + len, sizeof(line) - 1 - len);

        if (n < 0 && errno == EINTR) {
            if (abort_requested)
                ring_abort_requested(r, NULL);
            continue;
        }
        if (n <= 0)
            ring_fail(r, RC_EXIT_INTERNAL,
                      "lost the supervisor before the unique id arrived");
        len += (size_t)n;
        if (memchr(line, '\n', len) != NULL)
            break;
    }
    line[len] = '\0';
    if (line[0] != 'U' || strlen(line) < 2 + 2 * NCCL_UNIQUE_ID_BYTES)
        ring_fail(r, RC_EXIT_INTERNAL, "bad unique id from the supervisor");
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        unsigned int b;

        if (sscanf(line + 2 + 2 * i, "%2x", &b) != 1)
            ring_fail(r, RC_EXIT_INTERNAL, "bad unique id from the supervisor");
        id->internal[i] = (char)b;
    }
}

static void
ring_init(struct ring *r)
{
    const struct worker_ring *w = r->w;
    ncclUniqueId id;
    ncclResult_t res;
    cudaError_t e;

    memset(&id, 0, sizeof(id));
    ring_get_id(r, &id);
    res = ncclGroupStart();
    if (res != ncclSuccess)
        ring_nccl_fail(r, 0, res, "ncclGroupStart");
    for (int l = 0; l < w->nlocal; l++) {
        ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

        /* Non-blocking, so that a hung init can be aborted. */
        cfg.blocking = 0;
        e = cudaSetDevice(w->dev[l]);
        if (e != cudaSuccess)
            ring_cuda_fail(r, l, e, "cudaSetDevice");
        e = cudaStreamCreateWithFlags(&r->stream[l], cudaStreamNonBlocking);
        if (e != cudaSuccess)
            ring_cuda_fail(r, l, e, "cudaStreamCreateWithFlags");
        res = ncclCommInitRankConfig(&r->comm[l], w->nranks, id,
                                     w->first_rank + l, &cfg);
        if (res != ncclSuccess && res != ncclInProgress)
            ring_nccl_fail(r, l, res, "ncclCommInitRankConfig");
    }
    res = ncclGroupEnd();
    if (res != ncclSuccess && res != ncclInProgress)
        ring_nccl_fail(r, 0, res, "ncclGroupEnd");
    ring_settle(r, "ncclCommInitRankConfig");
}

static void
ring_alloc(struct ring *r)
{
    const struct worker_ring *w = r->w;
    size_t need = (size_t)1 << 20;
    size_t gather = (size_t)WORKER_GATHER_BYTES * (size_t)w->nranks;

    if (gather > need)
        need = gather;
    if (w->bw_bytes > need)
        need = w->bw_bytes;
    r->buf_bytes = need;
    /* Host staging holds one rank's largest correctness buffer. */
    r->host = malloc(gather > ((size_t)1 << 20) ? gather : (size_t)1 << 20);
    if (r->host == NULL)
        ring_fail(r, RC_EXIT_INTERNAL, "out of host memory");
    for (int l = 0; l < w->nlocal; l++) {
        cudaError_t e = cudaSetDevice(w->dev[l]);

        if (e == cudaSuccess)
            e = cudaMalloc(&r->dsend[l], need);
        if (e == cudaSuccess)
            e = cudaMalloc(&r->drecv[l], need);
        if (e != cudaSuccess)
            ring_cuda_fail(r, l, e, "cudaMalloc");
    }
}

static void
ring_free(struct ring *r)
{
    for (int l = 0; l < r->w->nlocal; l++) {
        cudaSetDevice(r->w->dev[l]);
        cudaFree(r->dsend[l]);
        cudaFree(r->drecv[l]);
        if (r->stream[l] != NULL)
            cudaStreamDestroy(r->stream[l]);
    }
    free(r->host);
    r->host = NULL;
}

static void
ring_upload(struct ring *r, int l, const void *src, size_t bytes,
            size_t recv_bytes)
{
    cudaError_t e = cudaSetDevice(r->w->dev[l]);

    if (e == cudaSuccess)
        e = cudaMemcpy(r->dsend[l], src, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemset(r->drecv[l], 0xff, recv_bytes);
    /* The copies run on the default stream, the collectives on a
     * non-blocking one that does not wait for it. */
    if (e == cudaSuccess)
        e = cudaDeviceSynchronize();
    if (e != cudaSuccess)
        ring_cuda_fail(r, l, e, "cudaMemcpy to the device");
}

static void
ring_download(struct ring *r, int l, void *dst, size_t bytes)
{
    cudaError_t e = cudaSetDevice(r->w->dev[l]);

    if (e == cudaSuccess)
        e = cudaMemcpy(dst, r->drecv[l], bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess)
        ring_cuda_fail(r, l, e, "cudaMemcpy from the device");
}

enum coll { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_BROADCAST };

/* Issues one collective on every local rank in a group; does not wait. */
static void
ring_issue(struct ring *r, enum coll kind, size_t count, ncclDataType_t type)
{
    ncclResult_t res = ncclGroupStart();

    if (res != ncclSuccess)
        ring_nccl_fail(r, 0, res, "ncclGroupStart");
    for (int l = 0; l < r->w->nlocal; l++) {
        const char *what = "ncclAllReduce";

        cudaSetDevice(r->w->dev[l]);
        if (kind == COLL_ALLREDUCE) {
            res = ncclAllReduce(r->dsend[l], r->drecv[l], count, type, ncclSum,
                                r->comm[l], r->stream[l]);
        } else if (kind == COLL_ALLGATHER) {
            what = "ncclAllGather";
            res = ncclAllGather(r->dsend[l], r->drecv[l], count, type,
                                r->comm[l], r->stream[l]);
        } else {
            what = "ncclBroadcast";
            res = ncclBroadcast(r->dsend[l], r->drecv[l], count, type, 0,
                                r->comm[l], r->stream[l]);
        }
        if (res != ncclSuccess && res != ncclInProgress)
            ring_nccl_fail(r, l, res, what);
    }
    res = ncclGroupEnd();
    if (res != ncclSuccess && res != ncclInProgress)
        ring_nccl_fail(r, 0, res, "ncclGroupEnd");
    if (res == ncclInProgress)
        ring_settle(r, "ncclGroupEnd");
}

static int32_t
pattern_reduce(int rank, size_t i)
{
    return (int32_t)((rank + 1) * (int)((i % 997) + 1));
}

static int32_t
pattern_gather(int rank, size_t i)
{
    return (int32_t)(rank * 100003 + (int)i);
}

static int32_t
pattern_bcast(size_t i)
{
    return (int32_t)(i * 7 + 3);
}

/* Runs one collective with known data and counts wrong elements per rank. */
static void
ring_check(struct ring *r, enum coll kind, size_t bytes)
{
    const struct worker_ring *w = r->w;
    size_t count = bytes / 4;
    size_t out = kind == COLL_ALLGATHER ? count * (size_t)w->nranks : count;
    const char *name = kind == COLL_ALLREDUCE   ? "allreduce"
                       : kind == COLL_ALLGATHER ? "allgather"
                                                : "broadcast";
    long long n = w->nranks;
    double t0, us;

    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->first_rank + l;

        for (size_t i = 0; i < count; i++)
            r->host[i] = kind == COLL_ALLREDUCE   ? pattern_reduce(rank, i)
                         : kind == COLL_ALLGATHER ? pattern_gather(rank, i)
                         : rank == 0              ? pattern_bcast(i)
                                                  : -1;
        ring_upload(r, l, r->host, bytes, out * 4);
    }
    t0 = now_s();
    ring_issue(r, kind, count, ncclInt32);
    ring_wait(r, name);
    us = (now_s() - t0) * 1e6;
    for (int l = 0; l < w->nlocal; l++) {
        long wrong = 0;

        ring_download(r, l, r->host, out * 4);
        for (size_t i = 0; i < out; i++) {
            int32_t want;

            if (kind == COLL_ALLREDUCE)
                want = (int32_t)(n * (n + 1) / 2 * (long long)((i % 997) + 1));
            else if (kind == COLL_ALLGATHER)
                want = pattern_gather((int)(i / count), i % count);
            else
                want = pattern_bcast(i);
            wrong += r->host[i] != want;
        }
        proto_send(w->evfd, "R %d %s %zu %zu %d %.1f %ld", w->first_rank + l,
                   name, bytes, count, kind == COLL_BROADCAST ? 0 : -1, us,
                   wrong);
    }
}

static void
ring_bandwidth(struct ring *r)
{
    const struct worker_ring *w = r->w;
    size_t count = w->bw_bytes / 4;
    double t0, us;

    for (int l = 0; l < w->nlocal; l++) {
        cudaError_t e = cudaSetDevice(w->dev[l]);

        if (e == cudaSuccess)
            e = cudaMemset(r->dsend[l], 0, w->bw_bytes);
        if (e == cudaSuccess)
            e = cudaDeviceSynchronize();
        if (e != cudaSuccess)
            ring_cuda_fail(r, l, e, "cudaMemset");
    }
    for (int i = 0; i < WORKER_BW_WARMUP; i++)
        ring_issue(r, COLL_ALLREDUCE, count, ncclFloat32);
    ring_wait(r, "ncclAllReduce (warm-up)");
    t0 = now_s();
    for (int i = 0; i < WORKER_BW_ITERS; i++)
        ring_issue(r, COLL_ALLREDUCE, count, ncclFloat32);
    ring_wait(r, "ncclAllReduce (timed)");
    us = (now_s() - t0) * 1e6 / WORKER_BW_ITERS;
    for (int l = 0; l < w->nlocal; l++)
        proto_send(w->evfd, "B %d %zu %d %.1f", w->first_rank + l, w->bw_bytes,
                   WORKER_BW_ITERS, us);
}

static void
ring_teardown(struct ring *r)
{
    for (int l = 0; l < r->w->nlocal; l++) {
        ncclResult_t res = ncclCommFinalize(r->comm[l]);

        if (res != ncclSuccess && res != ncclInProgress)
            ring_nccl_fail(r, l, res, "ncclCommFinalize");
    }
    ring_settle(r, "ncclCommFinalize");
    for (int l = 0; l < r->w->nlocal; l++) {
        ncclResult_t res = ncclCommDestroy(r->comm[l]);

        r->comm[l] = NULL;
        if (res != ncclSuccess)
            ring_fail(r, RC_EXIT_NCCL,
                      "ncclCommDestroy failed on rank %d (GPU %d): %s",
                      r->w->first_rank + l, r->w->dev[l],
                      ncclGetErrorString(res));
    }
    ring_free(r);
}

void
worker_ring_main(const struct worker_ring *w)
{
    static struct ring r;

    worker_signals_init();
    memset(&r, 0, sizeof(r));
    r.w = w;
    /* NCCL prints nothing unless asked; the supervisor needs its WARN
     * lines for the verdict. A user's own NCCL_DEBUG wins. */
    setenv("NCCL_DEBUG", "WARN", 0);

    r.phase = 3;
    proto_send(w->evfd, "P b 3");
    ring_init(&r);
    proto_send(w->evfd, "P e 3");

    r.phase = 4;
    proto_send(w->evfd, "P b 4");
    ring_alloc(&r);
    ring_check(&r, COLL_ALLREDUCE, 8);
    ring_check(&r, COLL_ALLREDUCE, 4096);
    ring_check(&r, COLL_ALLREDUCE, (size_t)1 << 20);
    ring_check(&r, COLL_ALLGATHER, WORKER_GATHER_BYTES);
    ring_check(&r, COLL_BROADCAST, WORKER_BCAST_BYTES);
    proto_send(w->evfd, "P e 4");

    if (w->bw_bytes > 0) {
        r.phase = 5;
        proto_send(w->evfd, "P b 5");
        ring_bandwidth(&r);
        proto_send(w->evfd, "P e 5");
    }

    r.phase = 6;
    proto_send(w->evfd, "P b 6");
    ring_teardown(&r);
    proto_send(w->evfd, "P e 6");
    proto_send(w->evfd, "X");
    _exit(0);
}
