/* A test double for NCCL (libnccl.so.2): collectives between simulated GPUs
 * through a shared file, with faults injected from the environment. */
#include "fake.h"
#include "fake_net.h"

#include <nccl.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/*
 * Faults (device indices are CUDA ordinals, the same in every process):
 *   FAKENCCL_HANG_INIT=D|all   init never completes on device D (or on all)
 *   FAKENCCL_HANG_COLL=D       the first collective never completes on D
 *   FAKENCCL_HANG_FINALIZE=D   ncclCommFinalize never completes on D (the
 *                              others' finalize then waits for it, as
 *                              NCCL's flush of every rank's work does;
 *                              on a non-blocking communicator it answers
 *                              ncclInProgress and ncclCommGetAsyncError
 *                              stays ncclInProgress: NCCL user guide,
 *                              api/comms.rst, ncclCommFinalize)
 *   FAKENCCL_WRONG=D[,float|all]  AllReduce results on D are off by one
 *                              (int32 ones by default; float ones, as the
 *                              bandwidth phase uses; or all)
 *   FAKENCCL_P2P_BROKEN=A,B[,error|hang|corrupt]
 *                              P2P between devices A and B fails (default
 *                              with an error); NCCL_P2P_DISABLE=1 cures it
 *   FAKENCCL_BUSBW_GBPS=X      collectives run at X GB/s bus bandwidth
 *   FAKENCCL_LATE_RANK=R:MS    rank R sees the end of each group of 10 or
 *                              more collectives MS ms late (its own time
 *                              for the batch is longer than the others')
 *   FAKENCCL_CRASH=D           the process driving D dies with SIGSEGV in
 *                              its first collective
 *   FAKENCCL_ABORT_HANG=1      ncclCommAbort never returns
 *   FAKENCCL_ABORT_S=X         ncclCommAbort takes X seconds per
 *                              communicator (default 0), signals or not
 *   FAKENCCL_CUDA_MISMATCH=1   NCCL was built for a newer CUDA than the
 *                              driver runs: init fails with NCCL's
 *                              CUDACHECK line "Cuda failure 35 'CUDA
 *                              driver version is insufficient for CUDA
 *                              runtime version'" (src/include/checks.h)
 *                              and ncclUnhandledCudaError
 *   FAKENCCL_TERM_S=X          the process takes X seconds to end after
 *                              SIGTERM (a CUDA process ends only once the
 *                              driver has torn down its contexts), then
 *                              ends on SIGTERM
 *   FAKENCCL_INIT_DELAY_MS=N   a communicator becomes ready N ms after all
 *                              ranks joined (default 5)
 *   FAKENCCL_LAUNCH_US=N       a non-blocking group's launch finishes N us
 *                              after ncclGroupEnd returned ncclInProgress
 *                              (default 20); until then the communicator
 *                              is in progress and refuses calls
 *   FAKENCCL_LAUNCH_FAIL=D     ncclGroupEnd fails launching work on D
 *   FAKENCCL_ASYNCERR_FAIL=D   ncclCommGetAsyncError itself fails on D
 *                              from its second ncclSuccess answer after
 *                              the first launch on (after the launch was
 *                              seen to finish)
 *   FAKENCCL_UNKILLABLE=D      the process driving D cannot be stopped: a
 *                              grandchild ptrace-seizes it, ignores signals
 *                              and holds its pipes; the abort signal stops
 *                              it, and after SIGKILL it stays a zombie that
 *                              its parent cannot reap (as a process in D
 *                              state stays), for FAKENCCL_UNKILLABLE_S
 *                              seconds (default 10)
 *   FAKENCCL_DIR=PATH          where the shared files live (default /dev/shm)
 *   FAKENCCL_NET=1             ranks exchange data over TCP (fake_net.c) on
 *                              the interface NCCL_SOCKET_IFNAME selects, so
 *                              a communicator can span network namespaces
 * NCCL's own variables that the double honours:
 *   NCCL_COMM_ID=HOST:PORT     every unique id carries this one address
 *                              (bootstrapGetUniqueId in src/bootstrap.cc,
 *                              NCCL 2.28), so all checks that see it share
 *                              one id; rank 0 then binds HOST:PORT for the
 *                              bootstrap root (ncclCommInitRankDev in
 *                              src/init.cc), which fails, as in NCCL, when
 *                              the address is not this host's or is taken
 *   NCCL_DEBUG=WARN|INFO, NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE
 *                              where and what the double logs, as
 *                              src/debug.cc reads them: WARN lines, and at
 *                              INFO the lines of NCCL 2.28 that say what it
 *                              chose (rings, trees, the transport of each
 *                              channel, NVLS); %h and %p in the file name
 *                              become the host name and the pid
 *   NCCL_P2P_DISABLE=1, NCCL_SHM_DISABLE=1, NCCL_CUMEM_ENABLE=0,
 *   NCCL_NVLS_ENABLE=0          the transports chosen, in NCCL's order
 *                              (P2P, then SHM, then the network)
 * What NCCL chooses (INFO lines only; the data path is the same):
 *   FAKENCCL_FALLBACK=shm|socket  P2P is silently unusable between the
 *                              GPUs (as when NCCL's P2P check finds no
 *                              peer access): NCCL takes SHM, or with
 *                              "socket" the network, without an error
 *   FAKENCCL_NET_TRANSPORT=socket|ib|ib-gdr  the network between nodes
 *                              (default socket)
 *   FAKENCCL_CHANNELS=N        channels (default 2)
 *   FAKECUDA_MULTICAST=1       the GPUs are on an NVSwitch with multicast:
 *                              NVLS is used unless NCCL_NVLS_ENABLE=0
 *   FAKENCCL_NVLS_HANG=1       with NVLS in use, the first collective
 *                              never completes (a broken NVSwitch fabric);
 *                              NCCL_P2P_DISABLE does not change that
 * Faults on communicators with more ranks than this process sees GPUs
 * (those that span pods):
 *   FAKENCCL_CROSS_HANG_INIT=1 init never completes
 *   FAKENCCL_CROSS_CRASH=1     the process dies (SIGKILL) half-way through
 *                              its first collective
 *   FAKENCCL_CROSS_FAIL_UNLESS=NAME=VALUE
 *                              the first collective fails with a network
 *                              error unless NAME=VALUE is set (a transport
 *                              that only works with that setting)
 */

#define CHUNK (256 * 1024)
#define MAXR 64
#define QLEN 64

struct shared {
    atomic_int joined;
    int nranks;
    int dev[MAXR];
    int pid[MAXR];
    atomic_ulong arrived[2];
    atomic_ulong done[2];
    /* then 2 slots x nranks x CHUNK bytes */
};

enum op_kind { OP_ALLREDUCE, OP_ALLGATHER, OP_BROADCAST, OP_FINALIZE };

struct op {
    enum op_kind kind;
    const void *send;
    void *recv;
    size_t count;
    ncclDataType_t type;
    int root;
    cudaStream_t stream;
    int late_ms; /* FAKENCCL_LATE_RANK: the stream sees the end this late */
};

struct ncclComm {
    int rank, nranks, dev, blocking;
    char path[200];
    struct shared *sh;
    size_t shlen;
    unsigned long seq;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct op q[QLEN];
    int qhead, qtail;
    atomic_int status; /* ncclResult_t; ncclInProgress while busy */
    atomic_int stop;
    atomic_int aborting;
    int ncoll;
    double ready_at; /* in progress until then (group launch) */
    char last_error[256];
    /* faults for this rank */
    int hang_init, hang_coll, hang_final, wrong, crash, p2p_mode;
    int wrong_type; /* 0 int32, 1 float, 2 all */
    int launch_fail, asyncerr_fail;
    atomic_int launched;  /* groups launched */
    atomic_int launching; /* non-blocking group launches still running */
    int ok_answers;       /* ncclSuccess answers since the first launch */
    double busbw;
    /* network mode */
    struct fakenet *net;
    unsigned char *netbuf; /* nranks * CHUNK */
    int cross;             /* spans pods: more ranks than local GPUs */
    int cross_crash, cross_fail;
    int root_fd; /* NCCL_COMM_ID: rank 0's bootstrap root socket */
};

/* The calling thread's open group (ncclGroupStart/End), as in NCCL. */
#define GROUP_MAX 256
struct group_item {
    ncclComm_t c;
    struct op op;
    int is_op; /* 0: an init inside the group */
};
static __thread int group_depth;
static __thread int group_n;
static __thread int group_overflow;
static __thread struct group_item group_q[GROUP_MAX];

static int
env_dev_match(const char *name, int dev)
{
    const char *v = getenv(name);
    char *end;
    long l;

    if (v == NULL || *v == '\0')
        return 0;
    if (strcmp(v, "all") == 0)
        return 1;
    l = strtol(v, &end, 10);
    return *end == '\0' && l == dev;
}

static double
env_double(const char *name, double dflt)
{
    const char *v = getenv(name);
    char *end;
    double d;

    if (v == NULL || *v == '\0')
        return dflt;
    d = strtod(v, &end);
    return *end == '\0' && d >= 0 ? d : dflt;
}

static double now_s(void);

/* Sleeps d seconds whatever signals arrive, as a driver call does. */
static void
sleep_through(double d)
{
    double end = now_s() + d;

    while (now_s() < end) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

/* The communicator's state as ncclCommGetAsyncError reports it. */
static ncclResult_t
comm_status(struct ncclComm *c)
{
    int st = atomic_load(&c->status);

    if (st == ncclSuccess && atomic_load(&c->launching) > 0)
        return ncclInProgress;

    if (st == ncclSuccess && now_s() < c->ready_at)
        return ncclInProgress;
    return (ncclResult_t)st;
}

/* FAKENCCL_UNKILLABLE: a grandchild seizes this process with ptrace and
 * never waits for it. Signals then stop the process instead of running its
 * handlers, and once SIGKILL ends it only the tracer may reap it: for its
 * parent it is sent SIGKILL and never reaped, like a process in D state. */
static void
make_unkillable(void)
{
    static int done;
    int sync[2];
    pid_t self = getpid(), child;
    char b = 'n';

    if (done)
        return;
    done = 1;
    if (pipe(sync) != 0)
        return;
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    child = fork();
    if (child == 0) {
        int hold = (int)env_double("FAKENCCL_UNKILLABLE_S", 10);

        close(sync[0]);
        signal(SIGTERM, SIG_IGN);
        signal(SIGINT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGUSR1, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        if (ptrace(PTRACE_SEIZE, self, NULL, NULL) == 0)
            b = 'y';
        if (write(sync[1], &b, 1) != 1)
            _exit(1);
        close(sync[1]);
        if (b != 'y')
            _exit(1);
        alarm(hold > 0 ? (unsigned)hold : 10);
        for (;;)
            pause();
    }
    close(sync[1]);
    if (child < 0 || read(sync[0], &b, 1) != 1 || b != 'y')
        fprintf(stderr, "fake: FAKENCCL_UNKILLABLE: cannot ptrace this "
                        "process; it stays killable\n");
    close(sync[0]);
}

/* NCCL's debug output (src/debug.cc): the level from NCCL_DEBUG, the
 * subsystems from NCCL_DEBUG_SUBSYS (default INIT, BOOTSTRAP and ENV; "^"
 * inverts; ALL), the file from NCCL_DEBUG_FILE, else stdout. */
enum { SUB_INIT = 1, SUB_GRAPH = 2, SUB_NET = 4, SUB_NVLS = 8, SUB_ENV = 16 };

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_file;

static int
log_level(void)
{
    const char *d = getenv("NCCL_DEBUG");

    if (d == NULL || strcasecmp(d, "VERSION") == 0 ||
        strcasecmp(d, "NONE") == 0)
        return 0;
    if (strcasecmp(d, "INFO") == 0 || strcasecmp(d, "TRACE") == 0)
        return 2;
    return 1;
}

static int
log_subsys_on(int mask)
{
    const char *v = getenv("NCCL_DEBUG_SUBSYS");
    static const struct {
        const char *name;
        int bit;
    } subs[] = {{"INIT", SUB_INIT}, {"GRAPH", SUB_GRAPH}, {"NET", SUB_NET},
                {"NVLS", SUB_NVLS}, {"ENV", SUB_ENV},     {"ALL", ~0}};
    int invert = 0, on = 0;
    char buf[256];

    if (v == NULL)
        return (mask & (SUB_INIT | SUB_ENV)) != 0;
    if (*v == '^') {
        invert = 1;
        v++;
    }
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save))
        for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
            if (strcasecmp(t, subs[i].name) == 0)
                on |= subs[i].bit;
    return invert ? (mask & ~on) != 0 : (mask & on) != 0;
}

/* The log stream, opened once per process; NULL when it cannot be. */
static FILE *
log_stream(void)
{
    const char *f = getenv("NCCL_DEBUG_FILE");
    char path[512], host[64] = "host";
    size_t k = 0;

    if (log_file != NULL)
        return log_file;
    if (f == NULL || *f == '\0')
        return log_file = stdout;
    gethostname(host, sizeof(host) - 1);
    for (; *f != '\0' && k + 1 < sizeof(path); f++) {
        if (f[0] == '%' && f[1] == 'h') {
            k += (size_t)snprintf(path + k, sizeof(path) - k, "%s", host);
            f++;
        } else if (f[0] == '%' && f[1] == 'p') {
            k += (size_t)snprintf(path + k, sizeof(path) - k, "%d",
                                  (int)getpid());
            f++;
        } else {
            path[k++] = *f;
        }
        if (k >= sizeof(path))
            k = sizeof(path) - 1;
    }
    path[k] = '\0';
    log_file = fopen(path, "we");
    if (log_file == NULL)
        log_file = stdout;
    return log_file;
}

static void
log_write(int dev, const char *level, const char *msg)
{
    char host[64] = "host";
    FILE *out;

    gethostname(host, sizeof(host) - 1);
    pthread_mutex_lock(&log_mu);
    out = log_stream();
    fprintf(out, "%s:%d:%d [%d] NCCL %s %s\n", host, (int)getpid(),
            (int)gettid(), dev, level, msg);
    fflush(out);
    pthread_mutex_unlock(&log_mu);
}

static void info_line(struct ncclComm *c, int sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
info_line(struct ncclComm *c, int sub, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (log_level() < 2 || !log_subsys_on(sub))
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    log_write(c->dev, "INFO", msg);
}

static void warn_line(struct ncclComm *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
warn_line(struct ncclComm *c, const char *fmt, ...)
{
    char msg[200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
    if (log_level() < 1)
        return;
    log_write(c->dev, "WARN", msg);
}

static void
nap(void)
{
    struct timespec ts = {0, 100000};

    nanosleep(&ts, NULL);
}

/* Waits until *v >= target or the comm aborts; 0 or -1 on abort. */
static int
wait_ge(struct ncclComm *c, atomic_ulong *v, unsigned long target)
{
    while (atomic_load(v) < target) {
        if (atomic_load(&c->aborting))
            return -1;
        nap();
    }
    return 0;
}

static int
wait_abort(struct ncclComm *c)
{
    while (!atomic_load(&c->aborting))
        nap();
    return -1;
}

static unsigned char *
slot_data(struct ncclComm *c, int slot, int rank)
{
    unsigned char *base = (unsigned char *)(c->sh + 1);

    return base + ((size_t)slot * (size_t)c->nranks + (size_t)rank) * CHUNK;
}

/* One step of the exchange: every rank puts len bytes of contrib (may be
 * NULL) in its slot; fn then reads all slots. */
static int
exchange(struct ncclComm *c, const void *contrib, size_t len,
         void (*fn)(struct ncclComm *, int slot, void *arg), void *arg)
{
    int slot = (int)(c->seq & 1);
    unsigned long gen = c->seq >> 1;
    unsigned long n = (unsigned long)c->nranks;

    if (c->net != NULL) {
        char err[200];

        if (fakenet_step(c->net, contrib, len, c->netbuf, c->cross_crash, err,
                         sizeof(err)) != 0) {
            if (!atomic_load(&c->aborting)) {
                warn_line(c, "%s", err);
                atomic_store(&c->status, ncclRemoteError);
            }
            return -1;
        }
        for (int r = 0; r < c->nranks; r++)
            memcpy(slot_data(c, slot, r), c->netbuf + (size_t)r * len, len);
        if (fn != NULL)
            fn(c, slot, arg);
        c->seq++;
        return 0;
    }
    if (wait_ge(c, &c->sh->done[slot], n * gen) != 0)
        return -1;
    if (contrib != NULL && len > 0)
        memcpy(slot_data(c, slot, c->rank), contrib, len);
    atomic_fetch_add(&c->sh->arrived[slot], 1);
    if (wait_ge(c, &c->sh->arrived[slot], n * (gen + 1)) != 0)
        return -1;
    if (fn != NULL)
        fn(c, slot, arg);
    atomic_fetch_add(&c->sh->done[slot], 1);
    c->seq++;
    return 0;
}

static size_t
type_size(ncclDataType_t t)
{
    switch (t) {
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
        return 8;
    case ncclInt8:
    case ncclUint8:
        return 1;
    default:
        return 0;
    }
}

struct step {
    const struct op *op;
    size_t off; /* byte offset of this chunk */
    size_t len; /* bytes in this chunk */
};

static void
sum_step(struct ncclComm *c, int slot, void *arg)
{
    struct step *s = arg;
    size_t n4 = s->len / 4;
    void *out = (unsigned char *)s->op->recv + s->off;

    if (s->op->type == ncclFloat32) {
        float *o = out;
        for (size_t i = 0; i < n4; i++) {
            float acc = 0;
            for (int r = 0; r < c->nranks; r++) {
                const float *in = (const void *)slot_data(c, slot, r);
                acc += in[i];
            }
            o[i] = acc;
        }
    } else {
        int32_t *o = out;
        for (size_t i = 0; i < n4; i++) {
            uint32_t acc = 0;
            for (int r = 0; r < c->nranks; r++) {
                const int32_t *in = (const void *)slot_data(c, slot, r);
                acc += (uint32_t)in[i];
            }
            o[i] = (int32_t)acc;
        }
    }
}

static void
gather_step(struct ncclComm *c, int slot, void *arg)
{
    struct step *s = arg;
    size_t total = s->op->count * type_size(s->op->type);

    for (int r = 0; r < c->nranks; r++)
        memcpy((unsigned char *)s->op->recv + (size_t)r * total + s->off,
               slot_data(c, slot, r), s->len);
}

static void
bcast_step(struct ncclComm *c, int slot, void *arg)
{
    struct step *s = arg;

    memcpy((unsigned char *)s->op->recv + s->off,
           slot_data(c, slot, s->op->root), s->len);
}

static double
now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
run_op(struct ncclComm *c, const struct op *op)
{
    size_t total = op->count * type_size(op->type);
    double t0 = now_s();
    struct step s = {op, 0, 0};

    if (op->kind == OP_FINALIZE)
        return c->hang_final ? wait_abort(c) : exchange(c, NULL, 0, NULL, NULL);
    c->ncoll++;
    if (c->hang_coll && c->ncoll == 1)
        return wait_abort(c);
    if (c->cross_fail) {
        warn_line(c, "NET/IB : Got completion from peer with error 12, opcode "
                     "0, len 0, vendor err 129 (transport retry counter "
                     "exceeded)");
        atomic_store(&c->status, ncclRemoteError);
        return -1;
    }
    if (c->p2p_mode == 2)
        return wait_abort(c);
    if (c->p2p_mode == 1) {
        warn_line(c,
                  "transport/p2p.cc:274 Cuda failure 'peer mapping "
                  "resources exhausted' on GPU %d (P2P to its peer)",
                  c->dev);
        atomic_store(&c->status, ncclUnhandledCudaError);
        return -1;
    }
    for (s.off = 0; s.off < total || (total == 0 && s.off == 0);
         s.off += CHUNK) {
        s.len = total - s.off < CHUNK ? total - s.off : CHUNK;
        if (op->kind == OP_ALLREDUCE) {
            if (exchange(c, (const unsigned char *)op->send + s.off, s.len,
                         sum_step, &s) != 0)
                return -1;
        } else if (op->kind == OP_ALLGATHER) {
            if (exchange(c, (const unsigned char *)op->send + s.off, s.len,
                         gather_step, &s) != 0)
                return -1;
        } else {
            const void *src = c->rank == op->root
                                  ? (const unsigned char *)op->send + s.off
                                  : NULL;
            if (exchange(c, src, s.len, bcast_step, &s) != 0)
                return -1;
        }
        if (total == 0)
            break;
    }
    if (op->kind == OP_ALLREDUCE && op->count > 0 && op->type == ncclInt32 &&
        ((c->wrong && c->wrong_type != 1) || c->p2p_mode == 3))
        ((int32_t *)op->recv)[op->count / 2] += 1;
    if (op->kind == OP_ALLREDUCE && op->count > 0 && op->type == ncclFloat32 &&
        c->wrong && c->wrong_type != 0)
        ((float *)op->recv)[op->count / 2] += 1.0f;
    if (c->busbw > 0 && c->nranks > 1) {
        double bus = (double)total * 2.0 * (c->nranks - 1) / c->nranks;
        double want = bus / (c->busbw * 1e9);
        while (now_s() - t0 < want && !atomic_load(&c->aborting))
            nap();
    }
    return 0;
}

static int
env_is_1(const char *name)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, "1") == 0;
}

/* Network mode: join over TCP; the slots are private to this rank. */
static int
do_init_net(struct ncclComm *c)
{
    char err[256];
    const char *unless = getenv("FAKENCCL_CROSS_FAIL_UNLESS");

    c->cross = c->nranks > fakecuda_device_count();
    c->cross_crash = c->cross && env_is_1("FAKENCCL_CROSS_CRASH");
    if (c->cross && unless != NULL && *unless != '\0') {
        char name[64];
        const char *eq = strchr(unless, '=');
        const char *have;

        snprintf(name, sizeof(name), "%.*s",
                 eq != NULL ? (int)(eq - unless) : (int)strlen(unless), unless);
        have = getenv(name);
        c->cross_fail = eq == NULL || have == NULL || strcmp(have, eq + 1) != 0;
    }
    c->shlen = sizeof(struct shared) + 2 * (size_t)c->nranks * CHUNK;
    c->sh = calloc(1, c->shlen);
    c->netbuf = malloc((size_t)c->nranks * CHUNK);
    if (c->sh == NULL || c->netbuf == NULL)
        return ncclSystemError;
    if (c->cross && env_is_1("FAKENCCL_CROSS_HANG_INIT")) {
        wait_abort(c);
        return ncclInternalError;
    }
    if (fakenet_join(c->path, c->rank, c->nranks, &c->aborting, &c->net, err,
                     sizeof(err)) != 0) {
        if (atomic_load(&c->aborting))
            return ncclInternalError;
        warn_line(c, "%s", err);
        return ncclRemoteError;
    }
    return ncclSuccess;
}

/*
 * NCCL_COMM_ID: rank 0 starts the bootstrap root on that address before it
 * bootstraps (src/init.cc, NCCL 2.28: bootstrapCreateRoot with idFromEnv).
 * The double binds and listens there as the root does; a host that is not
 * this machine's, or a port that is taken, fails the init with NCCL's
 * system error. 0, or -1 after the WARN line.
 */
static int
comm_id_root(struct ncclComm *c)
{
    const char *v = getenv("NCCL_COMM_ID");
    char host[128], port[16];
    const char *colon;
    struct addrinfo hints, *ai = NULL;
    int fd = -1, one = 1, rc;

    c->root_fd = -1;
    if (v == NULL || *v == '\0')
        return 0;
    colon = strrchr(v, ':');
    if (colon == NULL || colon == v || (size_t)(colon - v) >= sizeof(host)) {
        warn_line(c, "Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> "
                     "or [<ipv6>]:<port> or <hostname>:<port>");
        return -1;
    }
    snprintf(host, sizeof(host), "%.*s", (int)(colon - v), v);
    if (host[0] == '[' && host[strlen(host) - 1] == ']') {
        memmove(host, host + 1, strlen(host));
        host[strlen(host) - 1] = '\0';
    }
    snprintf(port, sizeof(port), "%s", colon + 1);
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc == 0)
        fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (rc != 0 || fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, 16) != 0) {
        warn_line(c,
                  "socket.cc: ncclSocketListen: bind failed for "
                  "NCCL_COMM_ID %s: %s",
                  v, rc != 0 ? gai_strerror(rc) : strerror(errno));
        if (fd >= 0)
            close(fd);
        if (ai != NULL)
            freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    c->root_fd = fd;
    return 0;
}

static int env_set_to(const char *name, const char *value);

static int
do_init(struct ncclComm *c)
{
    int fd;
    int p2p_off;
    const char *v;
    int a = -1, b = -1;
    char mode[16] = "error";

    if (env_set_to("FAKENCCL_CUDA_MISMATCH", "1")) {
        warn_line(c, "Cuda failure 35 'CUDA driver version is insufficient "
                     "for CUDA runtime version'");
        return ncclUnhandledCudaError;
    }
    if (fakenet_is_net_id(c->path))
        return do_init_net(c);
    if (c->rank == 0 && comm_id_root(c) != 0)
        return ncclSystemError;

    c->shlen = sizeof(struct shared) + 2 * (size_t)c->nranks * CHUNK;
    fd = open(c->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)c->shlen) != 0) {
        warn_line(c, "fake: cannot create %s: %s", c->path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return ncclSystemError;
    }
    c->sh = mmap(NULL, c->shlen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->sh == MAP_FAILED) {
        c->sh = NULL;
        return ncclSystemError;
    }
    c->sh->nranks = c->nranks;
    c->sh->dev[c->rank] = c->dev;
    c->sh->pid[c->rank] = (int)getpid();
    atomic_fetch_add(&c->sh->joined, 1);
    if (c->hang_init) {
        wait_abort(c);
        return ncclInternalError;
    }
    while (atomic_load(&c->sh->joined) < c->nranks) {
        if (atomic_load(&c->aborting))
            return ncclInternalError;
        nap();
    }
    /* Everyone has mapped it: the name is no longer needed. */
    if (exchange(c, NULL, 0, NULL, NULL) != 0)
        return ncclInternalError;
    if (c->rank == 0)
        unlink(c->path);
    v = getenv("FAKENCCL_P2P_BROKEN");
    p2p_off = getenv("NCCL_P2P_DISABLE") != NULL &&
              strcmp(getenv("NCCL_P2P_DISABLE"), "1") == 0;
    if (v != NULL && sscanf(v, "%d,%d,%15s", &a, &b, mode) >= 2 && !p2p_off &&
        (c->dev == a || c->dev == b)) {
        int has_a = 0, has_b = 0;
        for (int r = 0; r < c->nranks; r++) {
            has_a |= c->sh->dev[r] == a;
            has_b |= c->sh->dev[r] == b;
        }
        if (has_a && has_b)
            c->p2p_mode = strcmp(mode, "hang") == 0      ? 2
                          : strcmp(mode, "corrupt") == 0 ? 3
                                                         : 1;
    }
    return ncclSuccess;
}

static int
env_set_to(const char *name, const char *value)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, value) == 0;
}

/* The interface NCCL's socket transport would use: NCCL_SOCKET_IFNAME's
 * first match, else the first running interface that is not lo, docker or
 * virbr, else lo (src/misc/socket.cc, ncclFindInterfaces). */
static void
socket_if(char *name, size_t nlen, char *addr, size_t alen)
{
    const char *want = getenv("NCCL_SOCKET_IFNAME");
    struct ifaddrs *ifs, *i;

    snprintf(name, nlen, "lo");
    snprintf(addr, alen, "127.0.0.1");
    if (getifaddrs(&ifs) != 0)
        return;
    for (int pass = 0; pass < 2; pass++)
        for (i = ifs; i != NULL; i = i->ifa_next) {
            int skip;

            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                !(i->ifa_flags & IFF_RUNNING))
                continue;
            if (want != NULL && *want != '\0' && *want != '^')
                skip = strncmp(i->ifa_name, want + (*want == '='),
                               strcspn(want + (*want == '='), ",:")) != 0;
            else
                skip = pass == 0 && (strncmp(i->ifa_name, "lo", 2) == 0 ||
                                     strncmp(i->ifa_name, "docker", 6) == 0 ||
                                     strncmp(i->ifa_name, "virbr", 5) == 0);
            if (skip)
                continue;
            snprintf(name, nlen, "%s", i->ifa_name);
            inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                      addr, (socklen_t)alen);
            freeifaddrs(ifs);
            return;
        }
    freeifaddrs(ifs);
}

/*
 * The INFO lines NCCL 2.28 writes once a communicator is set up, in its
 * formats: "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d
 * MNNVL %d" (src/init.cc), "NVLS multicast support is %savailable on dev
 * %d (NVLS_NCHANNELS %d)" and "NVLS comm %p headRank ..." (nvls.cc),
 * "Channel %02d/%02d : 0 1 ..." (graph/rings.cc, rank 0), "Ring %02d : %d
 * -> %d -> %d" and "Trees [c] d/d/d->rank->up" (init.cc), one channel line
 * per ring neighbour: "via P2P/direct pointer" in one process, "via
 * P2P/CUMEM" or "via P2P/IPC" across processes (p2p.cc), "via
 * SHM/direct/direct" (shm.cc), "[send] via NET/Socket/0" and "[receive]
 * ..." with "NET/IB/0/GDRDMA" for IB with GPU Direct RDMA (net.cc), after
 * "NET/Socket : Using [0]IF:ADDR<0>" (net_socket.cc) or "NET/IB : Using
 * [0]mlx5_0:1/IB ..." (net_ib.cc), then "Connected all rings ..." and
 * "Connected all trees" (transport/generic.cc). Also decides NVLS, which
 * FAKENCCL_NVLS_HANG makes hang.
 */
static void
log_choices(struct ncclComm *c)
{
    int n = c->nranks, r = c->rank;
    int g = fakecuda_device_count() > 0 ? fakecuda_device_count() : 1;
    int nnodes = c->cross ? (n + g - 1) / g : 1;
    int local = c->cross ? g : n;
    int nch = (int)env_double("FAKENCCL_CHANNELS", 2);
    int nvls = env_set_to("FAKECUDA_MULTICAST", "1") &&
               !env_set_to("NCCL_NVLS_ENABLE", "0") && local > 1;
    const char *fb = getenv("FAKENCCL_FALLBACK");
    const char *nt = getenv("FAKENCCL_NET_TRANSPORT");
    int p2p =
        !env_set_to("NCCL_P2P_DISABLE", "1") && (fb == NULL || *fb == '\0');
    int shm = !env_set_to("NCCL_SHM_DISABLE", "1") &&
              !(fb != NULL && strcmp(fb, "socket") == 0);
    /* NCCL's network: an external plugin, then IB, then Socket, the first
     * that initialises (src/plugin/net.cc). IB does not without an HCA in
     * the pod ("NET/IB : No device found.", src/transport/net_ib/init.cc)
     * or with NCCL_IB_DISABLE=1, and NCCL then goes on over sockets
     * without an error: FAKENCCL_NET_TRANSPORT=ib or ib-gdr asks for IB,
     * FAKENCCL_IB_NODEV=1 takes the HCA away. */
    int ib_nodev = env_set_to("FAKENCCL_IB_NODEV", "1");
    int ib = nt != NULL && strncmp(nt, "ib", 2) == 0 && !ib_nodev &&
             !env_set_to("NCCL_IB_DISABLE", "1");
    int gdr = ib && strcmp(nt, "ib-gdr") == 0;
    int net_said = 0, next = (r + 1) % n, prev = (r + n - 1) % n;
    char ifname[32], ifaddr[64], line[512];
    size_t k = 0;

    if (nch < 1 || nch > 32)
        nch = 2;
    if (nvls && env_set_to("FAKENCCL_NVLS_HANG", "1"))
        c->hang_coll = 1;
    info_line(c, SUB_INIT,
              "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d "
              "MNNVL 0",
              (void *)c, r, n, nnodes, local, c->cross ? r % g : r);
    info_line(c, SUB_INIT,
              "NVLS multicast support is %savailable on dev %d "
              "(NVLS_NCHANNELS %d)",
              nvls ? "" : "not ", c->dev, nvls ? 16 : 0);
    if (nvls)
        info_line(c, SUB_INIT | SUB_NVLS,
                  "NVLS comm %p headRank %d nHeads %d nvlsRanks %d buffSize "
                  "1048576 nvlsPerRankSize 201326592 nvlsTotalSize "
                  "1610612736",
                  (void *)c, r % local, local, local);
    for (int ch = 0; ch < nch && r == 0; ch++) {
        k = (size_t)snprintf(line, sizeof(line), "Channel %02d/%02d :", ch,
                             nch);
        for (int i = 0; i < n && k < sizeof(line); i++)
            k += (size_t)snprintf(line + k, sizeof(line) - k, " %d", i);
        info_line(c, SUB_GRAPH, "%s", line);
    }
    k = 0;
    line[0] = '\0';
    for (int ch = 0; ch < nch; ch++) {
        info_line(c, SUB_GRAPH, "Ring %02d : %d -> %d -> %d", ch, prev, r,
                  next);
        if (k < sizeof(line))
            k += (size_t)snprintf(line + k, sizeof(line) - k,
                                  " [%d] %d/-1/-1->%d->%d", ch,
                                  r + 1 < n ? r + 1 : -1, r, r - 1);
    }
    info_line(c, SUB_INIT, "Trees%s", line);
    for (int ch = 0; ch < nch && n > 1; ch++) {
        int same = c->cross ? r / g == next / g : 1;
        int pdev = c->sh != NULL && !c->cross && c->net == NULL
                       ? c->sh->dev[next]
                       : next % g;
        int sdev = c->sh != NULL && !c->cross && c->net == NULL
                       ? c->sh->dev[prev]
                       : prev % g;
        int same_pid = c->net == NULL && c->sh != NULL &&
                       c->sh->pid[next] == (int)getpid();

        if (same && p2p) {
            info_line(c, SUB_INIT, "Channel %02d/0 : %d[%d] -> %d[%d] via %s",
                      ch, r, c->dev, next, pdev,
                      same_pid ? "P2P/direct pointer"
                      : env_set_to("NCCL_CUMEM_ENABLE", "0") ? "P2P/IPC"
                                                             : "P2P/CUMEM");
            continue;
        }
        if (same && shm) {
            info_line(c, SUB_INIT,
                      "Channel %02d : %d[%d] -> %d[%d] via SHM/direct/direct",
                      ch, r, c->dev, next, pdev);
            continue;
        }
        if (!net_said) {
            int use_ib = ib && !same;

            socket_if(ifname, sizeof(ifname), ifaddr, sizeof(ifaddr));
            if (ib_nodev && !same) {
                info_line(c, SUB_INIT | SUB_NET, "NET/IB : No device found.");
                info_line(c, SUB_INIT | SUB_NET,
                          "Failed to initialize NET plugin IB");
            }
            if (use_ib)
                info_line(c, SUB_INIT | SUB_NET,
                          "NET/IB : Using [0]mlx5_0:1/IB ; OOB %s:%s<0>",
                          ifname, ifaddr);
            else
                info_line(c, SUB_INIT | SUB_NET,
                          "NET/Socket : Using [0]%s:%s<0>", ifname, ifaddr);
            info_line(c, SUB_INIT, "Using network %s",
                      use_ib ? "IB" : "Socket");
            net_said = 1;
        }
        info_line(c, SUB_INIT | SUB_NET,
                  "Channel %02d/0 : %d[%d] -> %d[%d] [send] via NET/%s/0%s", ch,
                  r, c->dev, next, pdev, ib && !same ? "IB" : "Socket",
                  gdr && !same ? "/GDRDMA" : "");
        info_line(c, SUB_INIT | SUB_NET,
                  "Channel %02d/0 : %d[%d] -> %d[%d] [receive] via NET/%s/0%s",
                  ch, prev, sdev, r, c->dev, ib && !same ? "IB" : "Socket",
                  gdr && !same ? "/GDRDMA" : "");
    }
    info_line(c, SUB_INIT, "Connected all rings, use ring PXN 0 GDR %d",
              gdr ? 1 : 0);
    info_line(c, SUB_INIT, "Connected all trees");
}

static void *
progress(void *arg)
{
    struct ncclComm *c = arg;
    int r = do_init(c);

    if (r == ncclSuccess)
        log_choices(c);

    if (r == ncclSuccess)
        sleep_through(env_double("FAKENCCL_INIT_DELAY_MS", 5) / 1e3);
    atomic_store(&c->status, r);
    if (r != ncclSuccess)
        return NULL;
    for (;;) {
        struct op op;

        pthread_mutex_lock(&c->mu);
        while (c->qhead == c->qtail && !atomic_load(&c->stop) &&
               !atomic_load(&c->aborting))
            pthread_cond_wait(&c->cv, &c->mu);
        if (c->qhead == c->qtail || atomic_load(&c->aborting)) {
            pthread_mutex_unlock(&c->mu);
            return NULL;
        }
        op = c->q[c->qhead % QLEN];
        pthread_mutex_unlock(&c->mu);
        if (run_op(c, &op) != 0) {
            if (atomic_load(&c->status) == ncclSuccess ||
                atomic_load(&c->status) == ncclInProgress)
                atomic_store(&c->status, atomic_load(&c->aborting)
                                             ? ncclInternalError
                                             : ncclSystemError);
            /* The stream stays not ready, as after a failed kernel. */
            return NULL;
        }
        if (op.kind == OP_FINALIZE)
            atomic_store(&c->status, ncclSuccess);
        if (op.late_ms > 0)
            sleep_through(op.late_ms / 1e3);
        pthread_mutex_lock(&c->mu);
        c->qhead++;
        pthread_mutex_unlock(&c->mu);
        fakecuda_stream_end(op.stream, 0);
    }
}

ncclResult_t
ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

const char *
ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclUnhandledCudaError:
        return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
        return "internal error - please report this issue to the NCCL "
               "developers";
    case ncclInvalidArgument:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
        return "remote process exited or there was a network error";
    case ncclInProgress:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

const char *
ncclGetLastError(ncclComm_t comm)
{
    return comm != NULL ? comm->last_error : "";
}

/*
 * The id's first bytes are NCCL's ncclBootstrapHandle (src/include/
 * bootstrap.h): a 64-bit magic and the bootstrap root's address, the
 * interface ncclFindInterfaces picks (socket.cc) and a port. The double's
 * shared file name follows at ID_PATH_OFF.
 */
#define ID_MAGIC "fakeNCCL"
#define ID_PATH_OFF 40

static void
id_handle(ncclUniqueId *id)
{
    struct sockaddr_in sin;
    char ifname[32], addr[64];

    socket_if(ifname, sizeof(ifname), addr, sizeof(addr));
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)(40000 + getpid() % 20000));
    inet_pton(AF_INET, addr, &sin.sin_addr);
    memcpy(id->internal, ID_MAGIC, 8);
    memcpy(id->internal + 8, &sin, sizeof(sin));
}

ncclResult_t
ncclGetUniqueId(ncclUniqueId *id)
{
    static atomic_int counter;
    const char *dir = getenv("FAKENCCL_DIR");
    struct timespec ts;

    if (fakenet_enabled()) {
        char err[256];

        memset(id, 0, sizeof(*id));
        if (fakenet_make_id(id->internal, sizeof(id->internal), err,
                            sizeof(err)) == 0)
            return ncclSuccess;
        printf("fake:%d:%d [-] NCCL WARN %s\n", (int)getpid(), (int)gettid(),
               err);
        fflush(stdout);
        return ncclInvalidUsage;
    }

    memset(id, 0, sizeof(*id));
    if (getenv("NCCL_COMM_ID") != NULL && *getenv("NCCL_COMM_ID") != '\0') {
        /* Every id names the same address (bootstrap.cc): one shared
         * file for every check that sees this variable. */
        char name[64];
        size_t k = 0;

        for (const char *p = getenv("NCCL_COMM_ID"); *p && k + 1 < sizeof(name);
             p++)
            name[k++] =
                (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ? *p : '_';
        name[k] = '\0';
        snprintf(id->internal, sizeof(id->internal), "%s/fakenccl-commid-%s",
                 dir != NULL && *dir != '\0' ? dir : "/dev/shm", name);
        return ncclSuccess;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    id_handle(id);
    snprintf(id->internal + ID_PATH_OFF, sizeof(id->internal) - ID_PATH_OFF,
             "%s/fakenccl-%d-%d-%ld",
             dir != NULL && *dir != '\0' ? dir : "/dev/shm", (int)getpid(),
             atomic_fetch_add(&counter, 1), (long)ts.tv_nsec);
    return ncclSuccess;
}

static void
slow_term(int sig)
{
    struct timespec ts;
    double d = env_double("FAKENCCL_TERM_S", 0);

    ts.tv_sec = (time_t)d;
    ts.tv_nsec = (long)((d - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) != 0)
        ;
    signal(sig, SIG_DFL);
    raise(sig);
}

ncclResult_t
ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                       ncclConfig_t *config)
{
    struct ncclComm *c;
    const char *bw = getenv("FAKENCCL_BUSBW_GBPS");

    if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks ||
        id.internal[0] == '\0')
        return ncclInvalidArgument;
    c = calloc(1, sizeof(*c));
    if (c == NULL)
        return ncclSystemError;
    c->rank = rank;
    c->nranks = nranks;
    c->root_fd = -1;
    c->dev = fakecuda_current_device();
    c->blocking = config == NULL || config->blocking != 0;
    if (memcmp(id.internal, ID_MAGIC, 8) == 0)
        snprintf(c->path, sizeof(c->path), "%.*s",
                 (int)sizeof(id.internal) - ID_PATH_OFF,
                 id.internal + ID_PATH_OFF);
    else
        snprintf(c->path, sizeof(c->path), "%.*s", (int)sizeof(id.internal),
                 id.internal);
    c->hang_init = env_dev_match("FAKENCCL_HANG_INIT", c->dev);
    c->hang_coll = env_dev_match("FAKENCCL_HANG_COLL", c->dev);
    c->hang_final = env_dev_match("FAKENCCL_HANG_FINALIZE", c->dev);
    {
        const char *w = getenv("FAKENCCL_WRONG");
        char type[16] = "";
        int d;

        if (w != NULL && sscanf(w, "%d,%15s", &d, type) >= 1 && d == c->dev) {
            c->wrong = 1;
            c->wrong_type = strcmp(type, "float") == 0 ? 1
                            : strcmp(type, "all") == 0 ? 2
                                                       : 0;
        }
    }
    c->launch_fail = env_dev_match("FAKENCCL_LAUNCH_FAIL", c->dev);
    c->asyncerr_fail = env_dev_match("FAKENCCL_ASYNCERR_FAIL", c->dev);
    if (env_dev_match("FAKENCCL_UNKILLABLE", c->dev))
        make_unkillable();
    c->crash = env_dev_match("FAKENCCL_CRASH", c->dev);
    if (env_double("FAKENCCL_TERM_S", 0) > 0)
        signal(SIGTERM, slow_term);
    c->busbw = bw != NULL ? strtod(bw, NULL) : 0;
    atomic_store(&c->status, ncclInProgress);
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    if (pthread_create(&c->thread, NULL, progress, c) != 0) {
        free(c);
        return ncclSystemError;
    }
    *out = c;
    if (group_depth > 0) {
        if (group_n < GROUP_MAX)
            group_q[group_n++] = (struct group_item){c, {0}, 0};
        else
            group_overflow = 1;
    }
    if (c->blocking) {
        while (atomic_load(&c->status) == ncclInProgress)
            nap();
        return (ncclResult_t)atomic_load(&c->status);
    }
    return ncclInProgress;
}

ncclResult_t
ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank)
{
    return ncclCommInitRankConfig(out, nranks, id, rank, NULL);
}

ncclResult_t
ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *err)
{
    if (comm == NULL)
        return ncclInvalidArgument;
    if (comm->asyncerr_fail && comm->launched > 0 && comm->ok_answers >= 1)
        return ncclInternalError;
    *err = comm_status(comm);
    if (*err == ncclSuccess && comm->launched > 0)
        comm->ok_answers++;
    return ncclSuccess;
}

/* Hands one operation to the progress thread, as the background launch of
 * a non-blocking group does; the communicator is in progress for
 * FAKENCCL_LAUNCH_US after it. */
static ncclResult_t
launch(ncclComm_t c, const struct op *op)
{
    if (c->launch_fail) {
        warn_line(c, "enqueue.cc:1412 Cuda failure 'launch failed' on GPU %d",
                  c->dev);
        atomic_store(&c->status, ncclUnhandledCudaError);
        return ncclUnhandledCudaError;
    }
    pthread_mutex_lock(&c->mu);
    if (c->qtail - c->qhead >= QLEN) {
        pthread_mutex_unlock(&c->mu);
        return ncclInvalidUsage;
    }
    fakecuda_stream_begin(op->stream);
    c->q[c->qtail % QLEN] = *op;
    c->qtail++;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    atomic_fetch_add(&c->launched, 1);
    if (!c->blocking)
        c->ready_at = now_s() + env_double("FAKENCCL_LAUNCH_US", 20) / 1e6;
    return ncclSuccess;
}

static ncclResult_t
enqueue(ncclComm_t c, const struct op *op)
{
    ncclResult_t st, r;

    if (c == NULL)
        return ncclInvalidArgument;
    st = comm_status(c);
    if (st != ncclSuccess)
        return st == ncclInProgress ? ncclInvalidUsage : st;
    if (op->kind != OP_FINALIZE && type_size(op->type) == 0)
        return ncclInvalidArgument;
    if (op->kind != OP_FINALIZE && c->crash) {
        /* A real crash: no sanitizer report, no handler. */
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    if (group_depth > 0) {
        if (group_n == GROUP_MAX) {
            group_overflow = 1;
            return ncclInvalidUsage;
        }
        group_q[group_n++] = (struct group_item){c, *op, 1};
        return ncclSuccess;
    }
    r = launch(c, op);
    if (r != ncclSuccess || c->blocking)
        return r;
    return ncclInProgress;
}

ncclResult_t
ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    struct op o = {OP_ALLREDUCE, send, recv, count, type, 0, stream, 0};

    if (op != ncclSum || (type != ncclInt32 && type != ncclFloat32))
        return ncclInvalidArgument;
    return enqueue(comm, &o);
}

ncclResult_t
ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type,
              ncclComm_t comm, cudaStream_t stream)
{
    struct op o = {OP_ALLGATHER, send, recv, count, type, 0, stream, 0};

    return enqueue(comm, &o);
}

ncclResult_t
ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
              int root, ncclComm_t comm, cudaStream_t stream)
{
    struct op o = {OP_BROADCAST, send, recv, count, type, root, stream, 0};

    if (comm == NULL || root < 0 || root >= comm->nranks)
        return ncclInvalidArgument;
    return enqueue(comm, &o);
}

/* nccl.h declares these two without (void), so they have no prototype. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
ncclResult_t
ncclGroupStart(void)
{
    if (group_depth == 0) {
        group_n = 0;
        group_overflow = 0;
    }
    group_depth++;
    return ncclSuccess;
}

/*
 * FAKENCCL_LATE_RANK=R:MS: rank R sees the end of every group of 10 or
 * more collectives MS ms late, as a rank whose host thread was off the CPU
 * when its batch finished. The ranks then time the same batch differently,
 * as nccl-tests' ranks do (each times its own loop; src/common.cu averages
 * the times over the ranks). Groups of fewer collectives (the warm-ups, a
 * single collective) are on time, so the ranks start the batch together.
 */
static void
mark_late(void)
{
    const char *v = getenv("FAKENCCL_LATE_RANK");
    int rank, ms, n = 0, last = -1;

    if (v == NULL || sscanf(v, "%d:%d", &rank, &ms) != 2 || ms <= 0)
        return;
    for (int i = 0; i < group_n; i++)
        if (group_q[i].is_op && group_q[i].c->rank == rank) {
            n++;
            last = i;
        }
    if (n >= 10)
        group_q[last].op.late_ms = ms;
}

/* A non-blocking group's launch, on a thread of its own. */
struct group_job {
    int n;
    struct group_item item[GROUP_MAX];
};

static void *
group_job_main(void *arg)
{
    struct group_job *job = arg;

    for (int i = 0; i < job->n; i++)
        if (job->item[i].is_op)
            launch(job->item[i].c, &job->item[i].op);
    for (int i = 0; i < job->n; i++)
        atomic_fetch_sub(&job->item[i].c->launching, 1);
    free(job);
    return NULL;
}

/*
 * NCCL 2.28 launches a non-blocking group on a new thread at every
 * ncclGroupEnd (pthread_create in ncclGroupEndInternal, src/group.cc) and
 * returns ncclInProgress; the communicators stay in progress until that
 * thread is done, and a launch error shows in ncclCommGetAsyncError. The
 * double does the same. 1 when the group went to a thread, 0 when it has
 * blocking communicators or nothing to launch, -1 when no thread could be
 * started (ncclSystemError).
 */
static int
group_launch_async(void)
{
    struct group_job *job;
    pthread_attr_t attr;
    pthread_t t;
    int ops = 0, rc;

    for (int i = 0; i < group_n; i++) {
        if (group_q[i].c->blocking)
            return 0;
        ops += group_q[i].is_op;
    }
    if (ops == 0)
        return 0;
    job = malloc(sizeof(*job));
    if (job == NULL)
        return -1;
    job->n = group_n;
    memcpy(job->item, group_q, sizeof(group_q[0]) * (size_t)group_n);
    for (int i = 0; i < group_n; i++)
        atomic_fetch_add(&group_q[i].c->launching, 1);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, group_job_main, job);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        for (int i = 0; i < group_n; i++)
            atomic_fetch_sub(&group_q[i].c->launching, 1);
        free(job);
        return -1;
    }
    return 1;
}

/* Launches the group's work. The first launch error is returned; with any
 * non-blocking communicator still in progress the answer is
 * ncclInProgress, as NCCL's background launch gives. */
ncclResult_t
ncclGroupEnd(void)
{
    ncclResult_t first = ncclSuccess;
    int inprogress = 0;

    if (group_depth == 0)
        return ncclInvalidUsage;
    if (--group_depth > 0)
        return ncclSuccess;
    if (group_overflow)
        first = ncclInvalidUsage;
    mark_late();
    if (first == ncclSuccess) {
        int r = group_launch_async();

        if (r != 0) {
            group_n = 0;
            return r > 0 ? ncclInProgress : ncclSystemError;
        }
    }
    for (int i = 0; i < group_n; i++) {
        if (group_q[i].is_op) {
            ncclResult_t r = launch(group_q[i].c, &group_q[i].op);

            if (r != ncclSuccess && first == ncclSuccess)
                first = r;
        }
    }
    for (int i = 0; i < group_n && first == ncclSuccess; i++) {
        ncclComm_t c = group_q[i].c;

        if (c->blocking)
            while (comm_status(c) == ncclInProgress)
                sched_yield();
        else if (comm_status(c) == ncclInProgress)
            inprogress = 1;
    }
    group_n = 0;
    if (first != ncclSuccess)
        return first;
    return inprogress ? ncclInProgress : ncclSuccess;
}
#pragma GCC diagnostic pop

ncclResult_t
ncclCommFinalize(ncclComm_t comm)
{
    struct op o = {OP_FINALIZE, NULL, NULL, 0, ncclInt32, 0, NULL, 0};

    if (comm == NULL)
        return ncclInvalidArgument;
    if (comm_status(comm) != ncclSuccess)
        return ncclInvalidUsage;
    pthread_mutex_lock(&comm->mu);
    /* In progress until every rank has flushed its work. */
    atomic_store(&comm->status, ncclInProgress);
    comm->q[comm->qtail % QLEN] = o;
    comm->qtail++;
    pthread_cond_signal(&comm->cv);
    pthread_mutex_unlock(&comm->mu);
    if (comm->blocking) {
        while (atomic_load(&comm->status) == ncclInProgress)
            nap();
        return (ncclResult_t)atomic_load(&comm->status);
    }
    return ncclInProgress;
}

static void
comm_free(ncclComm_t c)
{
    /* A group launch thread still holds c: let it finish (it never
     * blocks). */
    while (atomic_load(&c->launching) > 0)
        nap();
    pthread_join(c->thread, NULL);
    if (fakenet_is_net_id(c->path)) {
        fakenet_close(c->net);
        free(c->sh);
        free(c->netbuf);
    } else if (c->sh != NULL) {
        munmap(c->sh, c->shlen);
    }
    if (c->root_fd >= 0)
        close(c->root_fd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

ncclResult_t
ncclCommDestroy(ncclComm_t comm)
{
    if (comm == NULL)
        return ncclSuccess;
    pthread_mutex_lock(&comm->mu);
    atomic_store(&comm->stop, 1);
    pthread_cond_signal(&comm->cv);
    pthread_mutex_unlock(&comm->mu);
    comm_free(comm);
    return ncclSuccess;
}

ncclResult_t
ncclCommAbort(ncclComm_t comm)
{
    const char *h = getenv("FAKENCCL_ABORT_HANG");

    if (comm == NULL)
        return ncclSuccess;
    if (h != NULL && strcmp(h, "1") == 0)
        for (;;)
            pause();
    sleep_through(env_double("FAKENCCL_ABORT_S", 0));
    pthread_mutex_lock(&comm->mu);
    atomic_store(&comm->aborting, 1);
    pthread_cond_signal(&comm->cv);
    pthread_mutex_unlock(&comm->mu);
    comm_free(comm);
    return ncclSuccess;
}
