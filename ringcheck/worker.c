/* Worker processes of the ring check: CUDA and NCCL calls, each phase
 * reported to the supervisor as events, every wait interruptible. */
#include "ringcheck/worker.h"

#include "ringcheck/pattern.h"
#include "ringcheck/proto.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

/* The API this file uses: non-blocking communicators with
 * ncclCommInitRankConfig, ncclCommFinalize and ncclGetLastError (NCCL
 * 2.14), the CUDA error codes of CUDA 11.1 and later. It builds against the
 * headers of CUDA 12 and 13 alike. */
#if !defined(NCCL_VERSION_CODE) || NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error                                                                         \
    "ncclguard-ringcheck needs NCCL 2.14 or newer (non-blocking communicators)"
#endif
#if !defined(CUDART_VERSION) || CUDART_VERSION < 11010
#error "ncclguard-ringcheck needs the CUDA 11.1 runtime or newer"
#endif

#include <errno.h>
#include <sched.h>
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

/*
 * One pause of a polling wait. The first ones only yield the CPU, so that
 * a collective of a few microseconds is seen done at once (a sleep per
 * iteration would cap the measured bandwidth at small sizes); after about
 * 2 ms of waiting, the poll sleeps 100 us between looks.
 */
static void
poll_pause(int *spins)
{
    struct timespec ts = {0, 100000};

    if (*spins < 4000) {
        (*spins)++;
        sched_yield();
        return;
    }
    nanosleep(&ts, NULL);
}

/* Sends m; when that fails the supervisor is gone or its pipe broke, so
 * nothing this process finds can be reported: stop (after abort_fn, which
 * frees what must not outlive us). */
static void
send_or_exit(int fd, const struct proto_msg *m, void (*abort_fn)(void *),
             void *arg)
{
    if (proto_send(fd, m) == 0)
        return;
    if (abort_fn != NULL)
        abort_fn(arg);
    _exit(RC_EXIT_INTERNAL);
}

static void
send_phase(int fd, int begin, int phase)
{
    struct proto_msg m = {.kind = 'P'};

    m.u.phase.begin = begin;
    m.u.phase.phase = phase;
    send_or_exit(fd, &m, NULL, NULL);
}

static void
send_simple(int fd, char kind)
{
    struct proto_msg m = {.kind = kind};

    send_or_exit(fd, &m, NULL, NULL);
}

/* Reports a failure of the whole worker and exits with code. */
static void send_error_exit(int fd, int code, int phase, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));

static void
send_error_exit(int fd, int code, int phase, const char *fmt, ...)
{
    struct proto_msg m = {.kind = 'E'};
    va_list ap;

    m.u.error.code = code;
    m.u.error.phase = phase;
    va_start(ap, fmt);
    vsnprintf(m.u.error.msg, sizeof(m.u.error.msg), fmt, ap);
    va_end(ap);
    send_or_exit(fd, &m, NULL, NULL);
    _exit(code);
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

    struct proto_msg m;

    worker_signals_init();
    send_phase(evfd, 1, 0);
    if (ncclGetVersion(&nccl) != ncclSuccess)
        nccl = 0;
    if (cudaRuntimeGetVersion(&rt) != cudaSuccess)
        rt = 0;
    if (cudaDriverGetVersion(&drv) != cudaSuccess)
        drv = 0;
    m = (struct proto_msg){.kind = 'V'};
    m.u.versions.nccl = nccl;
    m.u.versions.runtime = rt;
    m.u.versions.driver = drv;
    send_or_exit(evfd, &m, NULL, NULL);
    e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (cuda_env_error(e))
            send_error_exit(evfd, RC_EXIT_ENV, 0,
                            "no usable GPU or driver: cudaGetDeviceCount "
                            "failed: %s (%s)",
                            cudaGetErrorString(e), cudaGetErrorName(e));
        send_error_exit(evfd, RC_EXIT_CUDA, 0,
                        "cudaGetDeviceCount failed: %s (%s)",
                        cudaGetErrorString(e), cudaGetErrorName(e));
    }
    m = (struct proto_msg){.kind = 'N'};
    m.u.ndev.count = n;
    send_or_exit(evfd, &m, NULL, NULL);
    for (int d = 0; d < n && d < WORKER_MAX_GPUS; d++) {
        struct cudaDeviceProp p;
        char bus[64] = "unknown";
        char uuid[40];
        size_t k = 0;

        e = cudaGetDeviceProperties(&p, d);
        if (e != cudaSuccess)
            send_error_exit(evfd, RC_EXIT_CUDA, 0,
                            "cudaGetDeviceProperties(%d) failed: %s", d,
                            cudaGetErrorString(e));
        if (cudaDeviceGetPCIBusId(bus, (int)sizeof(bus), d) != cudaSuccess)
            snprintf(bus, sizeof(bus), "unknown");
        for (int i = 0; i < 16; i++) {
            k += (size_t)snprintf(uuid + k, sizeof(uuid) - k, "%02x",
                                  (unsigned char)p.uuid.bytes[i]);
        }
        m = (struct proto_msg){.kind = 'G'};
        m.u.gpu.dev = d;
        m.u.gpu.total_mib = (unsigned long)(p.totalGlobalMem >> 20);
        snprintf(m.u.gpu.busid, sizeof(m.u.gpu.busid), "%.31s", bus);
        snprintf(m.u.gpu.uuid, sizeof(m.u.gpu.uuid), "%s", uuid);
        snprintf(m.u.gpu.name, sizeof(m.u.gpu.name), "%.60s", p.name);
        send_or_exit(evfd, &m, NULL, NULL);
        m = (struct proto_msg){.kind = 'C'};
        m.u.cc.dev = d;
        m.u.cc.major = p.major;
        m.u.cc.minor = p.minor;
        send_or_exit(evfd, &m, NULL, NULL);
    }
    send_phase(evfd, 0, 0);
    send_simple(evfd, 'X');
    _exit(0);
}

/* Waits for stream s of GPU dev; an abort request ends the worker with a
 * note of what it was waiting for. */
static cudaError_t
devices_wait(int evfd, cudaStream_t s, int dev, const char *what)
{
    int spins = 0;

    for (;;) {
        cudaError_t e = cudaStreamQuery(s);

        if (e != cudaErrorNotReady)
            return e;
        if (abort_requested) {
            struct proto_msg m = {.kind = 'S'};

            m.u.stuck.rank = -1;
            m.u.stuck.dev = dev;
            snprintf(m.u.stuck.what, sizeof(m.u.stuck.what), "%s", what);
            send_or_exit(evfd, &m, NULL, NULL);
            send_simple(evfd, 'A');
            _exit(RC_EXIT_TIMEOUT);
        }
        poll_pause(&spins);
    }
}

void
worker_devices_main(int evfd, const int *dev, int ndev)
{
    cudaError_t e;
    struct proto_msg m;

    worker_signals_init();
    send_phase(evfd, 1, 1);
    for (int i = 0; i < ndev; i++) {
        size_t fr = 0, tot = 0;
        const char *step = "cudaSetDevice";
        cudaStream_t s = NULL;
        void *p = NULL;

        e = cudaSetDevice(dev[i]);
        if (e == cudaSuccess) {
            step = "cudaStreamCreateWithFlags";
            e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
        }
        if (e == cudaSuccess) {
            step = "cudaMalloc";
            e = cudaMalloc(&p, (size_t)1 << 20);
        }
        if (e == cudaSuccess) {
            step = "cudaMemsetAsync";
            e = cudaMemsetAsync(p, 0x5a, (size_t)1 << 20, s);
        }
        if (e == cudaSuccess)
            e = devices_wait(evfd, s, dev[i], step);
        if (e == cudaSuccess) {
            step = "cudaMemGetInfo";
            e = cudaMemGetInfo(&fr, &tot);
        }
        if (p != NULL)
            cudaFree(p);
        if (s != NULL)
            cudaStreamDestroy(s);
        if (e != cudaSuccess)
            send_error_exit(evfd,
                            cuda_env_error(e) ? RC_EXIT_ENV : RC_EXIT_CUDA, 1,
                            "%s on GPU %d failed: %s (%s)", step, dev[i],
                            cudaGetErrorString(e), cudaGetErrorName(e));
        m = (struct proto_msg){.kind = 'F'};
        m.u.free.dev = dev[i];
        m.u.free.free_mib = (unsigned long)(fr >> 20);
        send_or_exit(evfd, &m, NULL, NULL);
    }
    send_phase(evfd, 0, 1);
    send_phase(evfd, 1, 2);
    for (int i = 0; i < ndev; i++)
        for (int j = 0; j < ndev; j++) {
            int can = 0, perf = 0, atomics = 0;

            if (i == j)
                continue;
            e = cudaDeviceCanAccessPeer(&can, dev[i], dev[j]);
            if (e != cudaSuccess)
                send_error_exit(evfd, RC_EXIT_CUDA, 2,
                                "cudaDeviceCanAccessPeer(%d, %d) failed: %s",
                                dev[i], dev[j], cudaGetErrorString(e));
            if (cudaDeviceGetP2PAttribute(&perf, cudaDevP2PAttrPerformanceRank,
                                          dev[i], dev[j]) != cudaSuccess)
                perf = -1;
            /* Native peer atomics: NVLink gives them, PCIe does not. */
            if (cudaDeviceGetP2PAttribute(&atomics,
                                          cudaDevP2PAttrNativeAtomicSupported,
                                          dev[i], dev[j]) != cudaSuccess)
                atomics = -1;
            m = (struct proto_msg){.kind = 'T'};
            m.u.topo.dev = dev[i];
            m.u.topo.peer = dev[j];
            m.u.topo.access = can;
            m.u.topo.perf = perf;
            m.u.topo.atomics = atomics;
            send_or_exit(evfd, &m, NULL, NULL);
        }
    send_phase(evfd, 0, 2);
    send_simple(evfd, 'X');
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
    void *host; /* pinned staging, host_bytes */
    size_t host_bytes;
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

static void
ring_abort_cb(void *arg)
{
    ring_abort_all(arg);
}

static void
ring_send(struct ring *r, const struct proto_msg *m)
{
    send_or_exit(r->w->evfd, m, ring_abort_cb, r);
}

/* Reports a failure of the ranks in `ranks` ("" for the whole worker),
 * aborts the communicators and exits with code. */
static void ring_fail(struct ring *r, int code, const char *ranks,
                      const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));

static void
ring_fail(struct ring *r, int code, const char *ranks, const char *fmt, ...)
{
    struct proto_msg m = {.kind = 'E'};
    va_list ap;

    m.u.error.code = code;
    m.u.error.phase = r->phase;
    snprintf(m.u.error.ranks, sizeof(m.u.error.ranks), "%s", ranks);
    va_start(ap, fmt);
    vsnprintf(m.u.error.msg, sizeof(m.u.error.msg), fmt, ap);
    va_end(ap);
    /* Abort first if the report cannot go out; then abort anyway. */
    ring_send(r, &m);
    ring_abort_all(r);
    _exit(code);
}

/* The supervisor asked us to stop: say which ranks were still busy and in
 * what, abort the communicators, and go. */
static void
ring_abort_requested(struct ring *r, const int *busy, const char *what)
{
    for (int l = 0; l < r->w->nlocal; l++)
        if (busy == NULL || busy[l]) {
            struct proto_msg m = {.kind = 'S'};

            m.u.stuck.rank = r->w->first_rank + l;
            m.u.stuck.dev = r->w->dev[l];
            snprintf(m.u.stuck.what, sizeof(m.u.stuck.what), "%s", what);
            ring_send(r, &m);
        }
    ring_abort_all(r);
    send_or_exit(r->w->evfd, &(struct proto_msg){.kind = 'A'}, NULL, NULL);
    _exit(RC_EXIT_TIMEOUT);
}

static void ring_nccl_fail(struct ring *r, int l, ncclResult_t res,
                           const char *what) __attribute__((noreturn));
static void ring_cuda_fail(struct ring *r, int l, cudaError_t e,
                           const char *what) __attribute__((noreturn));

static void
rank_str(const struct ring *r, int l, char *buf, size_t len)
{
    snprintf(buf, len, "%d", r->w->first_rank + l);
}

static void
ring_nccl_fail(struct ring *r, int l, ncclResult_t res, const char *what)
{
    const char *last = r->comm[l] != NULL ? ncclGetLastError(r->comm[l]) : "";
    char rk[16];

    rank_str(r, l, rk, sizeof(rk));
    ring_fail(r, RC_EXIT_NCCL, rk, "%s failed on rank %d (GPU %d): %s%s%s",
              what, r->w->first_rank + l, r->w->dev[l], ncclGetErrorString(res),
              last != NULL && *last != '\0' ? ": " : "",
              last != NULL ? last : "");
}

static void
ring_cuda_fail(struct ring *r, int l, cudaError_t e, const char *what)
{
    char rk[16];

    rank_str(r, l, rk, sizeof(rk));
    ring_fail(r, RC_EXIT_CUDA, rk, "%s failed on rank %d (GPU %d): %s (%s)",
              what, r->w->first_rank + l, r->w->dev[l], cudaGetErrorString(e),
              cudaGetErrorName(e));
}

/* The state of local rank l's communicator; a failing query is a failure
 * of its own, not "no error". */
static ncclResult_t
ring_async_state(struct ring *r, int l)
{
    ncclResult_t st = ncclSuccess;
    ncclResult_t res = ncclCommGetAsyncError(r->comm[l], &st);

    if (res != ncclSuccess)
        ring_nccl_fail(r, l, res, "ncclCommGetAsyncError");
    return st;
}

/*
 * A group call (ncclGroupEnd, or a call inside the group) failed with res.
 * NCCL's answer does not say which communicator failed, so ask each for its
 * own error and name the ranks that have one; when none has, the whole
 * group is named.
 */
static void ring_group_fail(struct ring *r, ncclResult_t res, const char *what)
    __attribute__((noreturn));

static void
ring_group_fail(struct ring *r, ncclResult_t res, const char *what)
{
    char ranks[96] = "", names[160] = "";
    int first = -1;

    for (int l = 0; l < r->w->nlocal; l++) {
        ncclResult_t st = ncclSuccess;
        size_t n = strlen(ranks), k = strlen(names);

        if (r->comm[l] == NULL ||
            ncclCommGetAsyncError(r->comm[l], &st) != ncclSuccess ||
            st == ncclSuccess || st == ncclInProgress)
            continue;
        if (first < 0)
            first = l;
        snprintf(ranks + n, sizeof(ranks) - n, "%s%d", n > 0 ? "," : "",
                 r->w->first_rank + l);
        snprintf(names + k, sizeof(names) - k, "%srank %d (GPU %d)",
                 k > 0 ? ", " : "", r->w->first_rank + l, r->w->dev[l]);
    }
    if (first < 0) {
        if (r->w->nlocal == 1)
            ring_nccl_fail(r, 0, res, what);
        ring_fail(r, RC_EXIT_NCCL, "",
                  "%s failed for the group of ranks %d-%d (no communicator "
                  "reports its own error): %s",
                  what, r->w->first_rank, r->w->first_rank + r->w->nlocal - 1,
                  ncclGetErrorString(res));
    }
    {
        const char *last = ncclGetLastError(r->comm[first]);

        ring_fail(r, RC_EXIT_NCCL, ranks, "%s failed on %s: %s%s%s", what,
                  names, ncclGetErrorString(res),
                  last != NULL && *last != '\0' ? ": " : "",
                  last != NULL ? last : "");
    }
}

/* Polls until no communicator is in progress (after init or a group). */
static void
ring_settle(struct ring *r, const char *what)
{
    int busy[WORKER_MAX_GPUS];
    int spins = 0;

    for (;;) {
        int any = 0;

        for (int l = 0; l < r->w->nlocal; l++) {
            ncclResult_t st = ring_async_state(r, l);

            if (st != ncclSuccess && st != ncclInProgress)
                ring_nccl_fail(r, l, st, what);
            busy[l] = st == ncclInProgress;
            any |= busy[l];
        }
        if (!any)
            return;
        if (abort_requested)
            ring_abort_requested(r, busy, what);
        poll_pause(&spins);
    }
}

/* Polls the streams (all local ranks, or only rank only >= 0) and the
 * communicators until the queued work is done. */
static void
ring_wait_some(struct ring *r, int only, const char *what)
{
    int busy[WORKER_MAX_GPUS];
    int spins = 0;

    for (;;) {
        int any = 0;

        for (int l = 0; l < r->w->nlocal; l++) {
            ncclResult_t st = ncclSuccess;
            cudaError_t e;

            busy[l] = 0;
            if (only >= 0 && l != only)
                continue;
            if (r->comm[l] != NULL) {
                st = ring_async_state(r, l);
                if (st != ncclSuccess && st != ncclInProgress)
                    ring_nccl_fail(r, l, st, what);
            }
            e = cudaStreamQuery(r->stream[l]);
            if (e != cudaSuccess && e != cudaErrorNotReady)
                ring_cuda_fail(r, l, e, what);
            busy[l] = e == cudaErrorNotReady || st == ncclInProgress;
            any |= busy[l];
        }
        if (!any)
            return;
        if (abort_requested)
            ring_abort_requested(r, busy, what);
        poll_pause(&spins);
    }
}

static void
ring_wait(struct ring *r, const char *what)
{
    ring_wait_some(r, -1, what);
}

static int
hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

static void
ring_get_id(struct ring *r, ncclUniqueId *id)
{
    const struct worker_ring *w = r->w;
    char line[PROTO_LINE_MAX];
    struct proto_msg m;
    size_t len = 0;

    if (w->first_rank == 0) {
        ncclResult_t res = ncclGetUniqueId(id);

        if (res != ncclSuccess)
            ring_nccl_fail(r, 0, res, "ncclGetUniqueId");
        /* Sent also when no other process needs it: the supervisor
         * checks the address it carries. */
        m = (struct proto_msg){.kind = 'U'};
        for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
            snprintf(m.u.uid.hex + 2 * i, 3, "%02x",
                     (unsigned char)id->internal[i]);
        ring_send(r, &m);
        return;
    }
    /* Ranks > 0 wait for rank 0's id, which the supervisor forwards. */
    while (len < sizeof(line) - 1) {
        ssize_t n = read(w->cmdfd, line + len, sizeof(line) - 1 - len);

        if (n < 0 && errno == EINTR) {
            if (abort_requested)
                ring_abort_requested(r, NULL, "waiting for the unique id");
            continue;
        }
        if (n <= 0)
            ring_fail(r, RC_EXIT_INTERNAL, "",
                      "lost the supervisor before the unique id arrived");
        len += (size_t)n;
        if (memchr(line, '\n', len) != NULL)
            break;
    }
    line[len] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (proto_parse(line, &m) != 0 || m.kind != 'U' ||
        strlen(m.u.uid.hex) != 2 * NCCL_UNIQUE_ID_BYTES)
        ring_fail(r, RC_EXIT_INTERNAL, "", "bad unique id from the supervisor");
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        id->internal[i] = (char)(hex_digit(m.u.uid.hex[2 * i]) * 16 +
                                 hex_digit(m.u.uid.hex[2 * i + 1]));
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
        ring_group_fail(r, res, "ncclGroupEnd (init)");
    ring_settle(r, "ncclCommInitRankConfig");
}

/* The sizes the correctness phase reduces, up to check_max_bytes. */
static const size_t check_sizes[] = {8, 4096, (size_t)1 << 20,
                                     WORKER_CHECK_MAX_BYTES};

static void
ring_alloc(struct ring *r)
{
    const struct worker_ring *w = r->w;
    size_t need = w->check_max_bytes;
    size_t gather = (size_t)WORKER_GATHER_BYTES * (size_t)w->nranks;
    cudaError_t e;

    if (need < ((size_t)1 << 20))
        need = (size_t)1 << 20;
    if (gather > need)
        need = gather;
    r->host_bytes = need;
    if (w->bw_bytes > need)
        need = w->bw_bytes;
    r->buf_bytes = need;
    /* Pinned, so that the copies are truly asynchronous. */
    e = cudaMallocHost(&r->host, r->host_bytes);
    if (e != cudaSuccess) {
        r->host = NULL;
        ring_cuda_fail(r, 0, e, "cudaMallocHost");
    }
    for (int l = 0; l < w->nlocal; l++) {
        e = cudaSetDevice(w->dev[l]);
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
    if (r->host != NULL)
        cudaFreeHost(r->host);
    r->host = NULL;
}

/* Copies the staging buffer to rank l's send buffer and fills its receive
 * buffer with 0xff, on its stream, and waits (abortable). */
static void
ring_upload(struct ring *r, int l, size_t bytes, size_t recv_bytes)
{
    const char *what = "cudaMemcpyAsync to the device";
    cudaError_t e = cudaSetDevice(r->w->dev[l]);

    if (e == cudaSuccess)
        e = cudaMemcpyAsync(r->dsend[l], r->host, bytes, cudaMemcpyHostToDevice,
                            r->stream[l]);
    if (e == cudaSuccess) {
        what = "cudaMemsetAsync";
        e = cudaMemsetAsync(r->drecv[l], 0xff, recv_bytes, r->stream[l]);
    }
    if (e != cudaSuccess)
        ring_cuda_fail(r, l, e, what);
    /* The staging buffer is reused for the next rank: wait for the copy. */
    ring_wait_some(r, l, "cudaMemcpyAsync to the device");
}

/* Copies bytes at offset off of rank l's receive buffer into staging. */
static void
ring_download(struct ring *r, int l, size_t off, size_t bytes)
{
    cudaError_t e = cudaSetDevice(r->w->dev[l]);

    if (e == cudaSuccess)
        e = cudaMemcpyAsync(r->host, (char *)r->drecv[l] + off, bytes,
                            cudaMemcpyDeviceToHost, r->stream[l]);
    if (e != cudaSuccess)
        ring_cuda_fail(r, l, e, "cudaMemcpyAsync from the device");
    ring_wait_some(r, l, "cudaMemcpyAsync from the device");
}

enum coll { COLL_ALLREDUCE, COLL_ALLGATHER, COLL_BROADCAST };

/* Issues `iters` collectives on every local rank in one group; does not
 * wait for them, only for the group's launch. */
static void
ring_issue(struct ring *r, enum coll kind, size_t count, ncclDataType_t type,
           int iters)
{
    ncclResult_t res = ncclGroupStart();

    if (res != ncclSuccess)
        ring_nccl_fail(r, 0, res, "ncclGroupStart");
    for (int it = 0; it < iters; it++)
        for (int l = 0; l < r->w->nlocal; l++) {
            const char *what = "ncclAllReduce";

            cudaSetDevice(r->w->dev[l]);
            if (kind == COLL_ALLREDUCE) {
                res = ncclAllReduce(r->dsend[l], r->drecv[l], count, type,
                                    ncclSum, r->comm[l], r->stream[l]);
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
        ring_group_fail(r, res, "ncclGroupEnd");
    if (res == ncclInProgress)
        ring_settle(r, "ncclGroupEnd");
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

static void
ring_send_result(struct ring *r, int l, const char *op, const char *type,
                 size_t bytes, int root, double us, long wrong, long long first)
{
    struct proto_msg m = {.kind = 'R'};

    m.u.result.rank = r->w->first_rank + l;
    snprintf(m.u.result.op, sizeof(m.u.result.op), "%s", op);
    snprintf(m.u.result.type, sizeof(m.u.result.type), "%s", type);
    m.u.result.bytes = bytes;
    m.u.result.count = bytes / 4;
    m.u.result.root = root;
    m.u.result.time_us = us;
    m.u.result.wrong = wrong;
    m.u.result.first = first;
    ring_send(r, &m);
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
    int32_t *h = r->host;
    double t0, us;

    for (int l = 0; l < w->nlocal; l++) {
        int rank = w->first_rank + l;

        for (size_t i = 0; i < count; i++)
            h[i] = kind == COLL_ALLREDUCE   ? rc_check_value(rank, i)
                   : kind == COLL_ALLGATHER ? pattern_gather(rank, i)
                   : rank == 0              ? pattern_bcast(i)
                                            : -1;
        ring_upload(r, l, bytes, out * 4);
    }
    t0 = now_s();
    ring_issue(r, kind, count, ncclInt32, 1);
    ring_wait(r, name);
    us = (now_s() - t0) * 1e6;
    for (int l = 0; l < w->nlocal; l++) {
        long wrong = 0;
        long long first = -1;

        ring_download(r, l, 0, out * 4);
        for (size_t i = 0; i < out; i++) {
            int32_t want;

            if (kind == COLL_ALLREDUCE)
                want = rc_check_sum(n, i);
            else if (kind == COLL_ALLGATHER)
                want = pattern_gather((int)(i / count), i % count);
            else
                want = pattern_bcast(i);
            if (h[i] != want) {
                if (first < 0)
                    first = (long long)i * 4;
                wrong++;
            }
        }
        ring_send_result(r, l, name, "int32", bytes,
                         kind == COLL_BROADCAST ? 0 : -1, us, wrong, first);
    }
}

/* The bandwidth phase's data (see pattern.h); uploaded once in blocks of
 * this many elements, then doubled on the device. */
#define BW_BLOCK ((size_t)RC_BW_PERIOD * 4096)

/* Fills rank l's send buffer with its pattern: one block from the host,
 * then doubling device-to-device copies, all on its stream. */
static void
ring_bw_fill(struct ring *r, int l, size_t count)
{
    float *h = r->host;
    size_t block = count < BW_BLOCK ? count : BW_BLOCK;
    size_t have;
    char *d = r->dsend[l];
    cudaError_t e = cudaSetDevice(r->w->dev[l]);

    if (block * 4 > r->host_bytes)
        block = r->host_bytes / 4 / RC_BW_PERIOD * RC_BW_PERIOD;
    for (size_t i = 0; i < block; i++)
        h[i] = rc_bw_value(r->w->first_rank + l, i);
    if (e == cudaSuccess)
        e = cudaMemcpyAsync(d, h, block * 4, cudaMemcpyHostToDevice,
                            r->stream[l]);
    /* Each copy doubles the filled prefix; its length stays a multiple of
     * RC_BW_PERIOD, so the pattern continues. */
    for (have = block; e == cudaSuccess && have < count;) {
        size_t n = have < count - have ? have : count - have;

        e = cudaMemcpyAsync(d + have * 4, d, n * 4, cudaMemcpyDeviceToDevice,
                            r->stream[l]);
        have += n;
    }
    if (e == cudaSuccess)
        e = cudaMemsetAsync(r->drecv[l], 0xff, count * 4, r->stream[l]);
    if (e != cudaSuccess)
        ring_cuda_fail(r, l, e, "cudaMemcpyAsync (bandwidth data)");
    ring_wait_some(r, l, "cudaMemcpyAsync (bandwidth data)");
}

/* Checks rank l's bandwidth result in staging-sized pieces. */
static long
ring_bw_verify(struct ring *r, int l, size_t count, long long *first)
{
    long long n = r->w->nranks;
    size_t per = r->host_bytes / 4;
    const float *h = r->host;
    long wrong = 0;

    *first = -1;
    for (size_t base = 0; base < count; base += per) {
        size_t m = count - base < per ? count - base : per;

        ring_download(r, l, base * 4, m * 4);
        for (size_t i = 0; i < m; i++) {
            float want = rc_bw_sum(n, base + i);

            if (h[i] != want) {
                if (*first < 0)
                    *first = (long long)(base + i) * 4;
                wrong++;
            }
        }
    }
    return wrong;
}

static void
ring_bandwidth(struct ring *r)
{
    const struct worker_ring *w = r->w;
    size_t count = w->bw_bytes / 4;
    double t0, us;

    for (int l = 0; l < w->nlocal; l++)
        ring_bw_fill(r, l, count);
    /* As nccl-tests: the warm-ups back to back, waited for, then the timed
     * iterations back to back and one wait (src/common.cu, TimeTest and
     * BenchTime). The iterations of each go in one group, as nccl-tests'
     * -a (agg_iters) puts them: in NCCL 2.28 every non-blocking
     * ncclGroupEnd starts a thread (src/group.cc), and one group per
     * iteration would time that thread at small sizes, not the ring. */
    ring_issue(r, COLL_ALLREDUCE, count, ncclFloat32, WORKER_BW_WARMUP);
    ring_wait(r, "ncclAllReduce (warm-up)");
    t0 = now_s();
    ring_issue(r, COLL_ALLREDUCE, count, ncclFloat32, WORKER_BW_ITERS);
    ring_wait(r, "ncclAllReduce (timed)");
    us = (now_s() - t0) * 1e6 / WORKER_BW_ITERS;
    for (int l = 0; l < w->nlocal; l++) {
        struct proto_msg m = {.kind = 'B'};

        m.u.bw.wrong = ring_bw_verify(r, l, count, &m.u.bw.first);
        m.u.bw.rank = w->first_rank + l;
        m.u.bw.bytes = w->bw_bytes;
        m.u.bw.iters = WORKER_BW_ITERS;
        m.u.bw.time_us = us;
        ring_send(r, &m);
    }
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
        char rk[16];

        r->comm[l] = NULL;
        rank_str(r, l, rk, sizeof(rk));
        if (res != ncclSuccess)
            ring_fail(r, RC_EXIT_NCCL, rk,
                      "ncclCommDestroy failed on rank %d (GPU %d): %s",
                      r->w->first_rank + l, r->w->dev[l],
                      ncclGetErrorString(res));
    }
    ring_free(r);
}

static void
ring_phase(struct ring *r, int begin, int phase)
{
    struct proto_msg m = {.kind = 'P'};

    r->phase = phase;
    m.u.phase.begin = begin;
    m.u.phase.phase = phase;
    ring_send(r, &m);
}

void
worker_ring_main(const struct worker_ring *w)
{
    static struct ring r;

    worker_signals_init();
    memset(&r, 0, sizeof(r));
    r.w = w;
    /* NCCL prints nothing unless asked; the supervisor needs its WARN
     * lines for the verdict (it sets INFO into a file where it can). */
    setenv("NCCL_DEBUG", "WARN", 0);
    /* NCCL_COMM_ID fixes the address of every unique id and makes rank 0
     * bind it (src/bootstrap.cc, src/init.cc): the check's own ids must
     * not all point at the pod that the variable names. The workload
     * still gets it (check.c warns). */
    unsetenv("NCCL_COMM_ID");

    ring_phase(&r, 1, 3);
    ring_init(&r);
    ring_phase(&r, 0, 3);

    ring_phase(&r, 1, 4);
    ring_alloc(&r);
    for (size_t i = 0; i < sizeof(check_sizes) / sizeof(check_sizes[0]); i++)
        if (i < 3 || check_sizes[i] <= w->check_max_bytes)
            ring_check(&r, COLL_ALLREDUCE, check_sizes[i]);
    ring_check(&r, COLL_ALLGATHER, WORKER_GATHER_BYTES);
    ring_check(&r, COLL_BROADCAST, WORKER_BCAST_BYTES);
    ring_phase(&r, 0, 4);

    if (w->bw_bytes > 0) {
        ring_phase(&r, 1, 5);
        ring_bandwidth(&r);
        ring_phase(&r, 0, 5);
    }

    ring_phase(&r, 1, 6);
    ring_teardown(&r);
    ring_phase(&r, 0, 6);
    send_or_exit(w->evfd, &(struct proto_msg){.kind = 'X'}, NULL, NULL);
    _exit(0);
}
