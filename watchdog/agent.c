/* The watchdog agent's loop: scan /proc for opted-in processes, sample each
 * pod once per period, apply the hang rule, and report or restart. */
#include "watchdog/agent.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "contract/nodeevent.h"
#include "contract/wdspec.h"
#include "watchdog/cgroup.h"
#include "watchdog/event.h"
#include "watchdog/mserver.h"
#include "watchdog/nvml.h"
#include "watchdog/procfs.h"
#include "watchdog/ras.h"
#include "watchdog/rule.h"

#define ENVIRON_MAX (256 * 1024)
#define MAX_SOCKETS 4096
#define MAX_TCP_ROWS 65536
#define TCP_TEXT_MAX (4 << 20)
/* A pod's work budget: processes watched per pod. A pod that forks more
 * gets its first POD_MAX_PROCS judged, and one line saying so. */
#define POD_MAX_PROCS 512
/* And open files looked at per pod per period (/proc/PID/fd entries of
 * every kind, not only sockets): twice the socket table, so that a rank
 * with a few thousand sockets is read whole, while a pod whose processes
 * hold a million files each costs no more than this. */
#define POD_MAX_FDS (2 * MAX_SOCKETS)
#define METRICS_MAX (1 << 17)

/* Where a pod stands after a hang. */
enum pod_state {
    POD_WATCH = 0, /* counting idle periods */
    POD_REPORTED,  /* hang reported; back to WATCH when it recovers */
    POD_GRACE,     /* checkpoint requested; SIGTERM at deadline */
    POD_TERM,      /* SIGTERM sent; SIGKILL at deadline */
    POD_DONE,      /* SIGKILL sent (or nothing left to signal) */
    POD_CONFIRM    /* hang found; asking RAS for a second signal */
};

static const char *const state_names[] = {"watch", "reported", "grace",
                                          "term",  "done",     "confirm"};

/* One watched process, identified by PID and start time. */
struct wproc {
    pid_t pid;
    uint64_t start;
    uint64_t prev_ticks;
    uint64_t prev_io; /* rchar + wchar at the last period */
    bool io_ok;       /* prev_io was read */
    size_t pod;
    char *fr_pipe; /* PyTorch's flight-recorder pipe, its dump; or NULL */
    char *fr_dump;
    char *fr_dump_alt; /* older PyTorch's default dump path, or NULL */
    unsigned gen; /* the scan that last saw it */
    bool alive;   /* seen in the latest scan or sample */
};

/* What a pod keeps for its UID's lifetime rather than its processes':
 * the Event deduplication and token bucket, and the log's token bucket. A
 * pod whose processes all exit is forgotten, and a pod that comes back
 * under the same UID (its container restarted) starts from these, not
 * from an empty dedup table and full buckets. */
struct podkeep {
    char ev_key[24]; /* the last Event's cause, and when */
    long long ev_ms;
    double ev_tokens; /* the pod's Event bucket */
    long long ev_tokens_ms;
    unsigned long long ev_dups;
    double log_tokens; /* the pod's log bucket */
    long long log_tokens_ms;
    unsigned long long log_dropped; /* lines not written since log_said_ms */
    long long log_said_ms;
    bool ident_tried; /* this UID had a pod list of its own */
};

/* A forgotten pod's podkeep, by UID, until UID_KEEP_MS after it was
 * saved (past the Event dedup window); at most UID_KEEP_MAX, the oldest
 * dropped first. */
#define UID_KEEP_MAX 1024
#define UID_KEEP_MS (15 * 60 * 1000LL)
struct uidkeep {
    char uid[37];
    long long at;
    struct podkeep k;
};

/* A socket queue seen last period, to tell stuck from moving. */
struct sockq {
    uint64_t inode;
    uint32_t tx, rx;
};

struct wpod {
    char uid[37];
    char container[65];
    char name[254];
    char ns[64];
    struct wd_spec spec;
    char spec_text[512];
    long long watch_ms; /* when the first process was found */
    long long last_ms;  /* start of the current period */
    long long next_ms;  /* end of the current period */
    struct wd_rule rule;
    enum pod_state state;
    long long deadline_ms;
    struct wd_period last;
    enum wd_verdict last_v;
    enum wd_verdict hang_v; /* the cause of the latest hang: its Event key */
    /* The GPU signals behind the latest verdict, for the hang message. */
    unsigned spin_util, spin_power, spin_mem;
    char lost_gpus[64];
    /* NVML's counters at the start of the current period, per GPU. */
    bool base_set;
    bool base_ok[WD_NVML_MAX_GPUS];
    struct wd_gpu_counters base[WD_NVML_MAX_GPUS];
    /* Events and log lines: dedup and buckets, kept for the UID. */
    struct podkeep keep;
    char ras_addr[128]; /* NCCL_RAS_ADDR of the pod's first process */
    /* A flight-recorder dump was asked for: the Event (ev_msg) and the
     * SIGTERM wait for the dumps until fr_deadline_ms. */
    bool fr_pending;
    long long fr_deadline_ms;
    time_t fr_since; /* when it was asked, the realtime clock */
    char *ev_msg;
    char ip[64]; /* status.podIP, from the API */
    /* An Event waiting for the pod list (post_event, ident_due). */
    char *evw_msg;
    const char *evw_reason; /* a string literal */
    char evw_key[24];
    long long evw_until_ms;
    /* /dev/shm of the pod, at the last period. */
    bool shm_known;
    uint64_t shm_size, shm_used;
    bool shm_reported; /* the 90 % Event went out; re-armed below 80 % */
    int shm_orphans;
    uint64_t shm_orphan_ino[32]; /* orphans already logged */
    size_t n_orphan_ino;
    size_t n_procs;     /* live watched processes */
    bool budget_logged; /* the work budget line was logged */
    bool fd_budget_logged; /* the open-file budget line was logged */
    struct sockq *q;
    size_t n_q;
    /* One of the pod's GPUs runs another pod's process or an MPS server's
     * clients (the latest period): its hangs are reported, never acted on. */
    bool shared;
    char shared_why[160];
    /* The second signal (POD_CONFIRM): two RAS answers a period apart.
     * ras_step 1: first query running; 2: waiting until ras_next_ms;
     * 3: second query running. */
    struct wd_ras_job *ras_job;
    int ras_step;
    long long ras_next_ms;
    struct wd_ras_result *ras1;
    char *hang_msg;
    bool used;
};

/* Processes that were looked at and are not opted in. */
/* A process looked at and left alone (not opted in, a bad spec, no pod),
 * by its PID, start time and command name: execve(2) keeps the first two
 * and changes the name, and a process is often first seen before it
 * execs its real program (a container's runtime forks, sets up, then
 * execs the entrypoint, whose environment only then carries the spec).
 * So a process that execs is looked at again. */
struct seen {
    pid_t pid;
    uint32_t comm;
    uint64_t start;
};

struct seenbuf {
    struct seen *v;
    size_t n, cap;
};

struct metrics {
    unsigned long long hangs;
    unsigned long long checkpoint_signal, checkpoint_file, sigterm, sigkill,
        pid_reused, events, event_errors, report_files, events_suppressed,
        log_dropped;
};

struct agent {
    const struct wd_options *o;
    long long t0_ms;
    struct wd_nvml *nvml;
    struct wd_gpus *gpus;
    bool nvml_logged_down;
    bool nvml_was_up;
    struct wproc *procs;
    size_t n_procs, cap_procs;
    uint32_t *pidx; /* open-addressing index of procs by PID: slot+1 */
    size_t pidx_cap;
    unsigned scan_gen;
    struct wpod *pods;
    size_t n_pods, cap_pods;
    struct seenbuf seen, seen_next;
    struct wd_tcp *tcp;
    uint64_t *inodes;
    char *envbuf;
    char *tcpbuf; /* TCP_TEXT_MAX bytes, for net/tcp and tcp6 */
    int listen_fd;
    struct wd_mserver *ms;
    char *mtext; /* METRICS_MAX bytes, rebuilt by the loop */
    struct metrics m;
    struct wd_event_cfg ev;
    double ev_tokens; /* the node's Event bucket */
    long long ev_tokens_ms;
    struct uidkeep *kept; /* forgotten pods' podkeep */
    size_t n_kept;
    long long ident_ms; /* the last pod list fetched from the API */
    long long clk_tck;
};

static volatile sig_atomic_t stop_requested;

static void
on_stop(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static long long
now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
wd_options_defaults(struct wd_options *o)
{
    memset(o, 0, sizeof(*o));
    o->proc_root = "/proc";
    o->nvml_path = "libnvidia-ml.so.1";
    o->scan_ms = 5000;
    o->nvml_retry_ms = 60000;
    o->metrics_addr = "0.0.0.0";
    o->metrics_port = 9464;
    o->token_file = "/var/run/secrets/kubernetes.io/serviceaccount/token";
    o->ca_file = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt";
    o->termination_log = "/dev/termination-log";
}

/* ---- logging ------------------------------------------------------- */

/* Prints o as one JSON line with the time first, then frees it. The
 * monotonic clock (mono_ms) is the one tests compare with. */
static void
logj(struct agent *a, const char *event, json_t *o)
{
    struct timespec ts;
    struct tm tm;
    char when[80];
    char *s;

    if (o == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ",
             tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    json_object_set_new(o, "time", json_string(when));
    json_object_set_new(o, "mono_ms", json_integer(now_ms()));
    json_object_set_new(o, "event", json_string(event));
    (void)a;
    s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (s != NULL) {
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
    }
    json_decref(o);
}

/* Puts the pod's identity in front of the fields of o; returns o. */
static json_t *
podj(const struct wpod *p, json_t *o)
{
    json_t *r =
        json_pack("{s:s,s:s,s:s,s:s}", "namespace", p->ns[0] ? p->ns : "",
                  "pod", p->name, "pod_uid", p->uid, "container", p->container);

    if (r == NULL || o == NULL) {
        json_decref(r);
        return o;
    }
    json_object_update(r, o);
    json_decref(o);
    return r;
}

/* ---- signals and files, always after a start-time check -------------- */

static int
pidfd_open_(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/*
 * Sends sig to pid only if it is still the process that started at start
 * (field 22 of its stat). The pidfd is opened before the check, so the
 * signal cannot reach a process that took the PID after the check.
 * Returns 0 when sent, 1 when the PID is gone or reused (*why says which),
 * -1 on another error.
 */
static int
signal_checked(const char *root, pid_t pid, uint64_t start, int sig,
               const char **why)
{
    struct wd_stat st;
    int fd = pidfd_open_(pid), rc;

    if (fd < 0 && errno == ESRCH) {
        *why = "exited";
        return 1;
    }
    if (wd_proc_stat(root, pid, &st) != 0 || st.state == 'Z' ||
        st.state == 'X') {
        *why = "exited";
        rc = 1;
    } else if (st.start != start) {
        *why = "pid-reused";
        rc = 1;
    } else if (fd >= 0) {
        rc = (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
        *why = rc == 0 ? "sent" : strerror(errno);
        if (rc != 0)
            rc = errno == ESRCH ? 1 : -1;
    } else {
        rc = kill(pid, sig);
        *why = rc == 0 ? "sent" : strerror(errno);
        if (rc != 0)
            rc = errno == ESRCH ? 1 : -1;
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/* What the agent writes into a pod: at most this much, within this long. */
#define POD_WRITE_MAX 4096
#define POD_WRITE_MS 500

/* Exit codes of the writer child. */
enum {
    WR_OK = 0,
    WR_NOT_REGULAR = 1,
    WR_SHORT = 2,
    WR_NOT_FIFO = 3,
    WR_ERRNO = 10
};

/*
 * The writer child's work, with dfd the container's root: never opens for
 * writing anything but a regular file. An existing path is opened O_PATH
 * first (no open side effect: a FIFO does not block, a device is not
 * touched), checked with fstat, and reopened through its /proc/self/fd
 * link; a missing one is created with O_EXCL, so it is ours and regular.
 * Only system calls here: the parent has threads.
 */
static int
write_child(int dfd, const char *path, const char *data, size_t len, bool fifo)
{
    const unsigned long long res = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    struct open_how how;
    struct stat st;
    char link[64];
    int pfd, fd;
    size_t off = 0;

    memset(&how, 0, sizeof(how));
    how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = res;
    pfd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
    if (pfd >= 0) {
        if (fstat(pfd, &st) != 0)
            return WR_ERRNO + errno;
        if (fifo && !S_ISFIFO(st.st_mode))
            return WR_NOT_FIFO;
        if (!fifo && !S_ISREG(st.st_mode))
            return WR_NOT_REGULAR;
        /* The fd's own link names the same inode: no window for a swap. */
        if (snprintf(link, sizeof(link), "/proc/self/fd/%d", pfd) >=
            (int)sizeof(link))
            return WR_ERRNO + ENAMETOOLONG;
        /* A FIFO opened O_NONBLOCK for writing never waits: without a
         * reader it fails with ENXIO, and a full one fails the write. */
        fd = open(link, (fifo ? O_WRONLY : O_WRONLY | O_TRUNC) | O_NONBLOCK |
                            O_NOCTTY | O_CLOEXEC);
    } else if (errno == ENOENT && !fifo) {
        how.flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK |
                    O_NOCTTY | O_CLOEXEC;
        how.mode = 0644;
        fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
    } else {
        return WR_ERRNO + errno;
    }
    if (fd < 0)
        return WR_ERRNO + errno;
    if (fstat(fd, &st) != 0 ||
        (fifo ? !S_ISFIFO(st.st_mode) : !S_ISREG(st.st_mode)))
        return fifo ? WR_NOT_FIFO : WR_NOT_REGULAR;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && fifo && errno == EAGAIN)
            return WR_OK; /* full: a request is already waiting */
        if (w < 0)
            return WR_ERRNO + errno;
        if (w == 0)
            return WR_SHORT;
        off += (size_t)w;
    }
    return WR_OK;
}

/*
 * Writes data (at most POD_WRITE_MAX bytes) to path inside pid's root
 * filesystem. The path is resolved with RESOLVE_IN_ROOT, so ".." and
 * absolute symlinks stay inside the container, and the last component must
 * not be a symlink. The start time is checked after the root is opened.
 * Whatever the tenant put at that path (a FIFO, a device, a file on a FUSE
 * mount that never answers), the loop waits at most POD_WRITE_MS: the write
 * happens in a child process, killed when the time is up. Returns 0, or -1
 * with *why set.
 */
static int
write_in_root(const char *root, pid_t pid, uint64_t start, const char *path,
              const char *data, size_t len, bool fifo, const char **why)
{
    struct wd_stat st;
    struct pollfd pf;
    char rp[256];
    int dfd, pfd = -1, status = 0, rc = -1;
    pid_t child;

    if (len > POD_WRITE_MAX)
        len = POD_WRITE_MAX;
    snprintf(rp, sizeof(rp), "%s/%d/root", root, (int)pid);
    dfd = open(rp, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        *why = strerror(errno);
        return -1;
    }
    if (wd_proc_stat(root, pid, &st) != 0 || st.start != start) {
        *why = "pid-reused";
        close(dfd);
        return -1;
    }
    while (*path == '/')
        path++;
    child = fork();
    if (child < 0) {
        *why = strerror(errno);
        close(dfd);
        return -1;
    }
    if (child == 0)
        _exit(write_child(dfd, path, data, len, fifo));
    close(dfd);
    pfd = pidfd_open_(child);
    pf.fd = pfd;
    pf.events = POLLIN;
    if (pfd < 0 || poll(&pf, 1, POD_WRITE_MS) != 1) {
        /* Out of time: the child goes, the loop does not wait for it
         * (reap_children collects it). */
        kill(child, SIGKILL);
        *why = "timed out: the write took longer than 500 ms";
        goto done;
    }
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
        *why = "the writer died";
        goto done;
    }
    switch (WEXITSTATUS(status)) {
    case WR_OK:
        *why = "written";
        rc = 0;
        break;
    case WR_NOT_REGULAR:
        *why = "refused: not a regular file";
        break;
    case WR_SHORT:
        *why = "short write";
        break;
    case WR_NOT_FIFO:
        *why = "refused: not a FIFO";
        break;
    default:
        *why = WEXITSTATUS(status) >= WR_ERRNO
                   ? strerror(WEXITSTATUS(status) - WR_ERRNO)
                   : "failed";
    }
done:
    if (pfd >= 0)
        close(pfd);
    return rc;
}

/* Collects writer children that were killed for taking too long. */
static void
reap_children(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* ---- tables -------------------------------------------------------- */

static void *
grow(void *v, size_t *cap, size_t need, size_t size)
{
    size_t ncap;
    void *nv;

    if (need <= *cap)
        return v;
    ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    nv = realloc(v, ncap * size);
    if (nv == NULL)
        return NULL;
    memset((char *)nv + *cap * size, 0, (ncap - *cap) * size);
    *cap = ncap;
    return nv;
}

static size_t
pid_slot(pid_t pid, size_t cap)
{
    return ((uint32_t)pid * 2654435761u) & (cap - 1);
}

/* Rebuilds the PID index after the table moved or shrank: at least twice
 * as many slots as processes, so that lookups stay O(1). */
static int
pidx_rebuild(struct agent *a)
{
    size_t cap = 64;

    while (cap < a->n_procs * 2 + 2)
        cap *= 2;
    if (cap != a->pidx_cap) {
        uint32_t *n = realloc(a->pidx, cap * sizeof(*n));

        if (n == NULL)
            return -1;
        a->pidx = n;
        a->pidx_cap = cap;
    }
    memset(a->pidx, 0, a->pidx_cap * sizeof(*a->pidx));
    for (size_t i = 0; i < a->n_procs; i++) {
        size_t k = pid_slot(a->procs[i].pid, a->pidx_cap);

        while (a->pidx[k] != 0)
            k = (k + 1) & (a->pidx_cap - 1);
        a->pidx[k] = (uint32_t)(i + 1);
    }
    return 0;
}

/* The watched process with this PID and start time (start 0: any live
 * one with this PID), or NULL. */
static struct wproc *
proc_find(struct agent *a, pid_t pid, uint64_t start)
{
    if (a->pidx_cap == 0)
        return NULL;
    for (size_t k = pid_slot(pid, a->pidx_cap); a->pidx[k] != 0;
         k = (k + 1) & (a->pidx_cap - 1)) {
        struct wproc *w = &a->procs[a->pidx[k] - 1];

        if (w->pid == pid && (start == 0 ? w->alive : w->start == start))
            return w;
    }
    return NULL;
}

/* Drops dead processes and those of forgotten pods from the table, and
 * recounts each pod's live processes. */
static void
procs_compact(struct agent *a)
{
    size_t out = 0;

    for (size_t i = 0; i < a->n_pods; i++)
        a->pods[i].n_procs = 0;
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];

        if (!w->alive || w->pod >= a->n_pods || !a->pods[w->pod].used) {
            free(w->fr_pipe);
            free(w->fr_dump);
            free(w->fr_dump_alt);
            continue;
        }
        a->pods[w->pod].n_procs++;
        a->procs[out++] = *w;
    }
    a->n_procs = out;
    if (pidx_rebuild(a) != 0)
        a->pidx_cap = 0; /* out of memory: lookups find nothing */
}

static int
seen_cmp(const void *x, const void *y)
{
    const struct seen *a = x, *b = y;

    if (a->pid != b->pid)
        return a->pid < b->pid ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    return a->start < b->start ? -1 : a->start > b->start;
}

static bool
seen_has(const struct agent *a, pid_t pid, const struct wd_stat *st)
{
    struct seen k = {pid, st->comm_hash, st->start};

    return a->seen.n > 0 &&
           bsearch(&k, a->seen.v, a->seen.n, sizeof(k), seen_cmp) != NULL;
}

static int
seen_add(struct agent *a, pid_t pid, const struct wd_stat *st)
{
    struct seenbuf *b = &a->seen_next;
    struct seen *ns = grow(b->v, &b->cap, b->n + 1, sizeof(*ns));

    if (ns == NULL)
        return -1;
    b->v = ns;
    ns[b->n].pid = pid;
    ns[b->n].comm = st->comm_hash;
    ns[b->n].start = st->start;
    b->n++;
    return 0;
}

static ssize_t
pod_find(struct agent *a, const char *uid)
{
    for (size_t i = 0; i < a->n_pods; i++)
        if (a->pods[i].used && strcmp(a->pods[i].uid, uid) == 0)
            return (ssize_t)i;
    return -1;
}

static bool bucket_take(double *tokens, long long *at, double burst,
                        long long refill, long long t);

/* Drops kept entries that expired; with uid, that UID's entry too. */
static void
keep_prune(struct agent *a, const char *uid, long long t)
{
    for (size_t i = 0; i < a->n_kept;) {
        if (t - a->kept[i].at > UID_KEEP_MS ||
            (uid != NULL && strcmp(a->kept[i].uid, uid) == 0))
            a->kept[i] = a->kept[--a->n_kept];
        else
            i++;
    }
}

/* Keeps a forgotten pod's podkeep under its UID. */
static void
keep_save(struct agent *a, const struct wpod *pod, long long t)
{
    struct uidkeep *k;

    keep_prune(a, pod->uid, t);
    if (a->n_kept >= UID_KEEP_MAX) {
        size_t old = 0;

        for (size_t i = 1; i < a->n_kept; i++)
            if (a->kept[i].at < a->kept[old].at)
                old = i;
        a->kept[old] = a->kept[--a->n_kept];
    }
    if (a->kept == NULL) {
        a->kept = calloc(UID_KEEP_MAX, sizeof(*a->kept));
        if (a->kept == NULL)
            return;
    }
    k = &a->kept[a->n_kept++];
    snprintf(k->uid, sizeof(k->uid), "%s", pod->uid);
    k->at = t;
    k->k = pod->keep;
}

/* A new pod entry takes what its UID kept, if anything. */
static void
keep_restore(struct agent *a, struct wpod *pod, long long t)
{
    keep_prune(a, NULL, t);
    for (size_t i = 0; i < a->n_kept; i++) {
        if (strcmp(a->kept[i].uid, pod->uid) != 0)
            continue;
        pod->keep = a->kept[i].k;
        a->kept[i] = a->kept[--a->n_kept];
        return;
    }
}

/* The per-pod log limit, for the lines a pod's process churn makes
 * (watch, rewatch, exited, gone): LOG_POD_BURST lines, refilled one per
 * LOG_POD_REFILL_MS, kept for the UID's lifetime like the Event bucket.
 * What is dropped is counted, and said in one log-limited line per
 * LOG_POD_SAY_MS, so that one pod cannot push the other pods' lines out
 * of a rotated log. Hangs, decisions, actions and Events are never
 * dropped. */
#define LOG_POD_BURST 40.0
#define LOG_POD_REFILL_MS 1000LL
#define LOG_POD_SAY_MS 10000LL
static bool
pod_log_ok(struct agent *a, struct wpod *pod)
{
    long long t = now_ms();

    if (bucket_take(&pod->keep.log_tokens, &pod->keep.log_tokens_ms,
                    LOG_POD_BURST, LOG_POD_REFILL_MS, t))
        return true;
    pod->keep.log_dropped++;
    a->m.log_dropped++;
    if (pod->keep.log_said_ms == 0 ||
        t - pod->keep.log_said_ms >= LOG_POD_SAY_MS) {
        logj(a, "log-limited",
             podj(pod, json_pack("{s:I,s:s}", "dropped",
                                 (json_int_t)pod->keep.log_dropped, "why",
                                 "this pod's processes come and go faster "
                                 "than its log budget (watch, exited)")));
        pod->keep.log_said_ms = t;
        pod->keep.log_dropped = 0;
    }
    return false;
}

static void
copy_env(const char *env, size_t len, const char *name, char *out, size_t n)
{
    size_t vl;
    const char *v = wd_environ_find(env, len, name, &vl);

    out[0] = '\0';
    if (v == NULL)
        return;
    if (vl >= n)
        vl = n - 1;
    for (size_t i = 0; i < vl; i++)
        out[i] = isprint((unsigned char)v[i]) ? v[i] : '?';
    out[vl] = '\0';
}

/*
 * True when none of the pod's known processes is alive any more (checked
 * now, not at the last period), and drops them: a process that joins such
 * a pod belongs to a restarted container, not to the one being stopped.
 */
static bool
pod_restarted(struct agent *a, size_t pi)
{
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        struct wd_stat st;

        if (w->pod != pi || !w->alive)
            continue;
        if (wd_proc_stat(a->o->proc_root, w->pid, &st) == 0 &&
            st.start == w->start && st.state != 'Z' && st.state != 'X')
            return false;
    }
    for (size_t i = 0; i < a->n_procs; i++)
        if (a->procs[i].pod == pi)
            a->procs[i].alive = false;
    procs_compact(a);
    return true;
}

/* rchar + wchar of pid; -1 when unreadable. */
static int
proc_io(struct agent *a, pid_t pid, uint64_t *bytes)
{
    char buf[1024];
    ssize_t n = wd_proc_read(a->o->proc_root, pid, "io", buf, sizeof(buf));

    return n > 0 ? wd_io_parse(buf, (size_t)n, bytes) : -1;
}

/*
 * PyTorch's flight recorder, as ProcessGroupNCCL sets it up (its DumpPipe):
 * with TORCH_NCCL_TRACE_BUFFER_SIZE above 0 and
 * TORCH_NCCL_DEBUG_INFO_PIPE_FILE set, each rank makes a FIFO
 * <stem><rank>.pipe and dumps its trace to
 * <TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank> (default /tmp/nccl_trace_rank_)
 * when anything is written to it. The rank is the env's RANK.
 */
/* PyTorch's flight-recorder settings, each a list of names in PyTorch's
 * order. Its getCvarString and getCvarInt (c10d Utils.hpp) walk the list
 * from the end, so the first name that is set wins, even when set to "".
 * The lists are those of the c10d sources read: FlightRecorder's ring
 * ({"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}, default 2000;
 * releases before the TORCH_FR_* names read the second alone, default 0),
 * DebugInfoWriter::getWriter's dump prefix ({"TORCH_FR_DUMP_TEMP_FILE",
 * "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"}, default
 * $XDG_CACHE_HOME/torch/comm_lib_trace_rank_ or
 * $HOME/.cache/torch/comm_lib_trace_rank_ with HOME defaulting to /tmp;
 * before that, TORCH_NCCL_DEBUG_INFO_TEMP_FILE alone, default
 * /tmp/nccl_trace_rank_), and ProcessGroupNCCL's DumpPipe
 * (TORCH_NCCL_DEBUG_INFO_PIPE_FILE). */
static const char *const fr_buffer_names[] = {
    "TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE", NULL};
static const char *const fr_dump_names[] = {
    "TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE", NULL};
static const char *const fr_pipe_names[] = {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE",
                                            NULL};

/* The value of the first of names that the environment sets, into out;
 * false when none is set. */
static bool
env_first(struct agent *a, size_t envlen, const char *const *names,
          char *out, size_t n)
{
    for (; *names != NULL; names++) {
        size_t vl;

        if (wd_environ_find(a->envbuf, envlen, *names, &vl) != NULL) {
            copy_env(a->envbuf, envlen, *names, out, n);
            return true;
        }
    }
    out[0] = '\0';
    return false;
}

/*
 * The flight-recorder pipe of a process and where its dump will be: the
 * pipe is STEM<RANK>.pipe (DumpPipe names it after the process group's
 * global rank; RANK is that rank under torchrun, and where it is not, the
 * write finds no FIFO and the log says so). A ring size set to 0 or less
 * turns the recorder off; an unset one leaves it to the FIFO: PyTorch
 * makes the FIFO only when its recorder is on, and a write to a FIFO that
 * nobody opened fails at once. With the dump prefix unset, both PyTorch
 * defaults are watched (fr_dump_alt).
 */
static void
proc_flight_recorder(struct agent *a, size_t envlen, struct wproc *wp)
{
    char size[24], stem[200], rank[16], tmp[200], home[200], dyn[8];
    char *end;
    long long n;

    wp->fr_pipe = wp->fr_dump = wp->fr_dump_alt = NULL;
    if (!env_first(a, envlen, fr_pipe_names, stem, sizeof(stem)) ||
        stem[0] == '\0')
        return;
    if (env_first(a, envlen, fr_buffer_names, size, sizeof(size))) {
        errno = 0;
        n = strtoll(size, &end, 10);
        if (errno != 0 || end == size || *end != '\0' || n <= 0)
            return;
    }
    copy_env(a->envbuf, envlen, "RANK", rank, sizeof(rank));
    if (rank[0] == '\0' || strspn(rank, "0123456789") != strlen(rank))
        return;
    if (asprintf(&wp->fr_pipe, "%s%s.pipe", stem, rank) < 0)
        wp->fr_pipe = NULL;
    copy_env(a->envbuf, envlen, "TORCH_FR_DUMP_DYNAMIC_FILE_NAME", dyn,
             sizeof(dyn));
    if (env_first(a, envlen, fr_dump_names, tmp, sizeof(tmp))) {
        /* TORCH_FR_DUMP_DYNAMIC_FILE_NAME: the file is the prefix itself
         * (DebugInfoWriter::write). */
        bool whole = strcmp(dyn, "1") == 0 || strcasecmp(dyn, "true") == 0;

        if (asprintf(&wp->fr_dump, "%s%s", tmp, whole ? "" : rank) < 0)
            wp->fr_dump = NULL;
    } else {
        copy_env(a->envbuf, envlen, "XDG_CACHE_HOME", home, sizeof(home));
        if (home[0] == '\0') {
            if (!env_first(a, envlen, (const char *const[]){"HOME", NULL},
                           home, sizeof(home)))
                snprintf(home, sizeof(home), "/tmp");
            if (asprintf(&wp->fr_dump, "%s/.cache/torch/comm_lib_trace_rank_%s",
                         home, rank) < 0)
                wp->fr_dump = NULL;
        } else if (asprintf(&wp->fr_dump, "%s/torch/comm_lib_trace_rank_%s",
                            home, rank) < 0) {
            wp->fr_dump = NULL;
        }
        if (asprintf(&wp->fr_dump_alt, "/tmp/nccl_trace_rank_%s", rank) < 0)
            wp->fr_dump_alt = NULL;
    }
    if (wp->fr_pipe == NULL || wp->fr_dump == NULL) {
        free(wp->fr_pipe);
        free(wp->fr_dump);
        free(wp->fr_dump_alt);
        wp->fr_pipe = wp->fr_dump = wp->fr_dump_alt = NULL;
    }
}

/* A newly found process: opted in? which pod? */
static void
proc_consider(struct agent *a, pid_t pid, const struct wd_stat *st)
{
    const struct wd_options *o = a->o;
    struct wd_podref ref;
    struct ng_error err;
    struct wd_spec spec;
    struct wproc *wp;
    struct wpod *pod;
    char cg[4096];
    const char *v;
    size_t vl;
    ssize_t n, envlen, pi;
    long long t = now_ms();

    envlen = wd_proc_read(o->proc_root, pid, "environ", a->envbuf, ENVIRON_MAX);
    if (envlen < 0 || (v = wd_environ_find(a->envbuf, (size_t)envlen,
                                           WD_ENV_NAME, &vl)) == NULL) {
        seen_add(a, pid, st);
        return;
    }
    if (wd_spec_parse(v, vl, &spec, &err) != 0) {
        logj(a, "bad-spec",
             json_pack("{s:i,s:s#,s:s}", "pid", (int)pid, "value", v,
                       (int)(vl > 200 ? 200 : vl), "error", err.msg));
        seen_add(a, pid, st);
        return;
    }
    memset(&ref, 0, sizeof(ref));
    n = wd_proc_read(o->proc_root, pid, "cgroup", cg, sizeof(cg));
    if (n < 0 || wd_cgroup_parse(cg, (size_t)n, &ref) != 0) {
        char uid[64];

        copy_env(a->envbuf, (size_t)envlen, "NCCLGUARD_POD_UID", uid,
                 sizeof(uid));
        if (!o->pod_from_env || uid[0] == '\0' || strlen(uid) > 36) {
            logj(a, "not-a-pod",
                 json_pack("{s:i,s:s}", "pid", (int)pid, "why",
                           "opted in but its cgroup names no pod; ignored"));
            seen_add(a, pid, st);
            return;
        }
        snprintf(ref.pod_uid, sizeof(ref.pod_uid), "%.36s", uid);
    }
    pi = pod_find(a, ref.pod_uid);
    if (pi < 0) {
        /* Reuse the slot of a pod that is gone, else grow. */
        for (size_t i = 0; i < a->n_pods && pi < 0; i++)
            if (!a->pods[i].used)
                pi = (ssize_t)i;
        if (pi < 0) {
            struct wpod *np =
                grow(a->pods, &a->cap_pods, a->n_pods + 1, sizeof(*np));

            if (np == NULL)
                return;
            a->pods = np;
            pi = (ssize_t)a->n_pods++;
        }
        pod = &a->pods[pi];
        memset(pod, 0, sizeof(*pod));
        pod->used = true;
        snprintf(pod->uid, sizeof(pod->uid), "%s", ref.pod_uid);
        keep_restore(a, pod, t);
        snprintf(pod->container, sizeof(pod->container), "%s",
                 ref.container_id);
        /* The env is the tenant's: its name and namespace are believed
         * only under the test flag. On a node they come from the API,
         * looked up by the UID that the cgroup path gives. */
        if (o->pod_from_env) {
            copy_env(a->envbuf, (size_t)envlen, "NCCLGUARD_POD_NAME", pod->name,
                     sizeof(pod->name));
            copy_env(a->envbuf, (size_t)envlen, "NCCLGUARD_POD_NAMESPACE",
                     pod->ns, sizeof(pod->ns));
        }
        copy_env(a->envbuf, (size_t)envlen, "NCCL_RAS_ADDR", pod->ras_addr,
                 sizeof(pod->ras_addr));
        /* Under the test flag the pod's IP is its RAS address's host, as
         * the webhook sets NCCL_RAS_ADDR=$(NCCLGUARD_POD_IP):28028. */
        if (o->pod_from_env && strrchr(pod->ras_addr, ':') != NULL)
            snprintf(pod->ip, sizeof(pod->ip), "%.*s",
                     (int)(strrchr(pod->ras_addr, ':') - pod->ras_addr),
                     pod->ras_addr);
        pod->spec = spec;
        if (wd_spec_format(&spec, pod->spec_text, sizeof(pod->spec_text)) != 0)
            pod->spec_text[0] = '\0';
        pod->watch_ms = pod->last_ms = t;
        pod->next_ms = t + spec.period_ms;
    }
    pod = &a->pods[pi];
    if (pod->state != POD_WATCH && pod->state != POD_REPORTED &&
        pod_restarted(a, (size_t)pi)) {
        /* The restart worked: the kubelet started the container again in
         * the same pod. Watch it afresh. */
        pod->spec = spec;
        if (wd_spec_format(&spec, pod->spec_text, sizeof(pod->spec_text)) != 0)
            pod->spec_text[0] = '\0';
        pod->state = POD_WATCH;
        pod->rule.idle = 0;
        pod->watch_ms = pod->last_ms = t;
        pod->next_ms = t + spec.period_ms;
        free(pod->q);
        pod->q = NULL;
        pod->n_q = 0;
        if (pod_log_ok(a, pod))
            logj(a, "rewatch",
                 podj(pod, json_pack("{s:i}", "pid", (int)pid)));
    }
    if (pod->n_procs >= POD_MAX_PROCS) {
        /* The work budget: a pod that forks without end does not make
         * every scan and period cost more. */
        if (!pod->budget_logged)
            logj(a, "budget",
                 podj(pod, json_pack("{s:i,s:i,s:s}", "pid", (int)pid,
                                     "max_processes", POD_MAX_PROCS, "effect",
                                     "further processes of this pod are "
                                     "not watched")));
        pod->budget_logged = true;
        seen_add(a, pid, st);
        return;
    }
    wp = grow(a->procs, &a->cap_procs, a->n_procs + 1, sizeof(*wp));
    if (wp == NULL)
        return;
    a->procs = wp;
    wp = &a->procs[a->n_procs++];
    wp->pid = pid;
    wp->start = st->start;
    wp->prev_ticks = st->cpu_ticks;
    wp->io_ok = proc_io(a, pid, &wp->prev_io) == 0;
    proc_flight_recorder(a, (size_t)envlen, wp);
    wp->pod = (size_t)pi;
    wp->gen = a->scan_gen;
    wp->alive = true;
    pod->n_procs++;
    if (a->n_procs * 2 + 2 > a->pidx_cap) {
        if (pidx_rebuild(a) != 0)
            a->pidx_cap = 0;
    } else {
        size_t k = pid_slot(pid, a->pidx_cap);

        while (a->pidx[k] != 0)
            k = (k + 1) & (a->pidx_cap - 1);
        a->pidx[k] = (uint32_t)a->n_procs;
    }
    if (pod_log_ok(a, pod))
        logj(a, "watch",
             podj(pod,
                  json_pack("{s:i,s:I,s:s,s:s}", "pid", (int)pid, "start",
                            (json_int_t)st->start, "spec", pod->spec_text,
                            "state", state_names[pod->state])));
}

/* Walks /proc: new opted-in processes join their pod. */
static void
scan(struct agent *a)
{
    struct dirent *de;
    DIR *d = opendir(a->o->proc_root);

    if (d == NULL) {
        logj(a, "error",
             json_pack("{s:s,s:s}", "what", "cannot read /proc", "why",
                       strerror(errno)));
        return;
    }
    a->seen_next.n = 0;
    a->scan_gen++;
    while ((de = readdir(d)) != NULL) {
        struct wproc *w;
        struct wd_stat st;
        char *end;
        long pid;

        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        errno = 0;
        pid = strtol(de->d_name, &end, 10);
        if (errno != 0 || *end != '\0' || pid <= 0 || pid > INT32_MAX)
            continue;
        if (pid == (long)getpid())
            continue;
        if (wd_proc_stat(a->o->proc_root, (pid_t)pid, &st) != 0)
            continue;
        if ((w = proc_find(a, (pid_t)pid, st.start)) != NULL) {
            if (st.state != 'Z' && st.state != 'X')
                w->gen = a->scan_gen;
            continue;
        }
        if (seen_has(a, (pid_t)pid, &st)) {
            seen_add(a, (pid_t)pid, &st);
            continue;
        }
        proc_consider(a, (pid_t)pid, &st);
    }
    closedir(d);
    /* A watched process this walk did not find is gone: drop it now, so
     * that the table holds the live processes only, however many come
     * and go between two periods. */
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];

        if (w->alive && w->gen != a->scan_gen) {
            w->alive = false;
            if (pod_log_ok(a, &a->pods[w->pod]))
                logj(a, "exited", podj(&a->pods[w->pod],
                                       json_pack("{s:i}", "pid", (int)w->pid)));
        }
    }
    procs_compact(a);
    /* Keep only what still exists: the cache is rebuilt on every walk. */
    {
        struct seenbuf t = a->seen;

        a->seen = a->seen_next;
        a->seen_next = t;
    }
    /* An empty list may have no table (nothing seen, or out of memory):
     * qsort(3) takes no NULL base, whatever the count. */
    if (a->seen.n > 1)
        qsort(a->seen.v, a->seen.n, sizeof(*a->seen.v), seen_cmp);
}

/* ---- one period of one pod ------------------------------------------ */

static int
u64_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

    return a < b ? -1 : a > b;
}

static int
sockq_cmp(const void *x, const void *y)
{
    const struct sockq *a = x, *b = y;

    return a->inode < b->inode ? -1 : a->inode > b->inode;
}

/* Reads net/tcp and tcp6 of pid (its network namespace) into a->tcp. */
static size_t
tcp_table(struct agent *a, pid_t pid)
{
    static const char *const files[] = {"net/tcp", "net/tcp6"};
    size_t n = 0;

    for (int f = 0; f < 2; f++) {
        ssize_t len = wd_proc_read(a->o->proc_root, pid, files[f], a->tcpbuf,
                                   TCP_TEXT_MAX);

        if (len > 0)
            n += wd_tcp_parse(a->tcpbuf, (size_t)len, a->tcp + n,
                              MAX_TCP_ROWS - n, NULL);
    }
    return n;
}

/* Sockets of the pod's processes: counts, and the queues to compare with
 * the next period. */
static void
pod_sockets(struct agent *a, struct wpod *pod, size_t pi, struct wd_period *pr)
{
    size_t n_ino = 0, n_rows, n_q = 0, fds_left = POD_MAX_FDS;
    pid_t first = 0;
    struct sockq *q;

    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        ssize_t k;

        if (w->pod != pi || !w->alive)
            continue;
        if (first == 0)
            first = w->pid;
        k = wd_proc_socket_inodes(a->o->proc_root, w->pid, a->inodes + n_ino,
                                  MAX_SOCKETS - n_ino, &fds_left);
        if (k > 0)
            n_ino += (size_t)k;
    }
    pr->fds_read = (int)(POD_MAX_FDS - fds_left);
    if (fds_left == 0 && !pod->fd_budget_logged) {
        pod->fd_budget_logged = true;
        logj(a, "budget",
             podj(pod, json_pack("{s:i,s:s}", "max_open_files", POD_MAX_FDS,
                                 "effect",
                                 "open files past this are not looked at "
                                 "each period; sockets among them are not "
                                 "counted")));
    }
    qsort(a->inodes, n_ino, sizeof(*a->inodes), u64_cmp);
    n_rows = first ? tcp_table(a, first) : 0;
    q = calloc(n_ino ? n_ino : 1, sizeof(*q));
    if (q == NULL)
        return;
    for (size_t r = 0; r < n_rows; r++) {
        const struct wd_tcp *t = &a->tcp[r];
        struct sockq key, *old;

        if (t->inode == 0 || bsearch(&t->inode, a->inodes, n_ino,
                                     sizeof(*a->inodes), u64_cmp) == NULL)
            continue;
        pr->sockets++;
        if (t->state == WD_TCP_CLOSE_WAIT)
            pr->close_wait++;
        if (t->state != WD_TCP_ESTABLISHED ||
            (t->tx_queue == 0 && t->rx_queue == 0) || n_q >= n_ino)
            continue;
        key.inode = t->inode;
        old = pod->n_q ? bsearch(&key, pod->q, pod->n_q, sizeof(key), sockq_cmp)
                       : NULL;
        if (old != NULL && old->tx == t->tx_queue && old->rx == t->rx_queue)
            pr->stuck_queues++;
        q[n_q].inode = t->inode;
        q[n_q].tx = t->tx_queue;
        q[n_q].rx = t->rx_queue;
        n_q++;
    }
    qsort(q, n_q, sizeof(*q), sockq_cmp);
    free(pod->q);
    pod->q = q;
    pod->n_q = n_q;
}

/* Differences of NVML's counters between the start of the period (b; NULL
 * when unknown) and now (g). */
static void
gpu_period(const struct wd_gpu *g, const struct wd_gpu_counters *b,
           struct wd_gpu_period *gp)
{
    const struct wd_gpu_counters *c = &g->c;
    long long dt = b ? c->t_ms - b->t_ms : 0;

    memset(gp, 0, sizeof(*gp));
    gp->answer = g->state == WD_NVML_GPU_OK        ? WD_ANSWER_OK
                 : g->state == WD_NVML_GPU_LOST    ? WD_ANSWER_LOST
                 : g->state == WD_NVML_GPU_NO_UTIL ? WD_ANSWER_NO_UTIL
                                                   : WD_ANSWER_ERROR;
    if (b == NULL || dt <= 0)
        return;
    gp->util_n = c->util_n - b->util_n;
    gp->util_nonzero = c->util_nonzero - b->util_nonzero;
    if (gp->util_n > 0)
        gp->util_mean = (unsigned)((c->util_sum - b->util_sum) / gp->util_n);
    if (c->mem_n > b->mem_n) {
        gp->mem_known = true;
        gp->mem_mean =
            (unsigned)((c->mem_sum - b->mem_sum) / (c->mem_n - b->mem_n));
    }
    if (c->energy_ok && b->energy_ok && g->limit_mw > 0) {
        /* mJ per ms is W; times 1000 is mW. */
        uint64_t mw = (c->energy_mj - b->energy_mj) * 1000 / (uint64_t)dt;

        gp->power_known = true;
        gp->power_pct = (unsigned)(mw * 100 / g->limit_mw);
    }
    if (c->links_ok && b->links_ok) {
        gp->links_known = true;
        gp->link_bps =
            (int64_t)((c->link_bytes - b->link_bytes) * 1000 / (uint64_t)dt);
    }
}

/* Marks the pod shared when GPU d also runs what is not the pod's: a
 * process of another watched pod, a live process the agent does not watch
 * (another pod that did not opt in, an MPS server), or MPS clients. NVML's
 * utilisation, power and memory are the GPU's, not a process's, so such a
 * GPU's signature says nothing certain about this pod. A PID that no
 * longer exists (NVML lists a process until its context is gone) is not
 * counted. */
static void
gpu_shared(struct agent *a, struct wpod *pod, size_t pi, size_t d,
           const struct wd_gpu *gd)
{
    if (gd->mps) {
        pod->shared = true;
        snprintf(pod->shared_why, sizeof(pod->shared_why),
                 "GPU %zu is shared through an MPS server", d);
        return;
    }
    for (size_t k = 0; k < gd->n_pids; k++) {
        struct wproc *w = proc_find(a, gd->pids[k], 0);
        struct wd_stat st;

        if (w != NULL && w->pod == pi)
            continue;
        if (w != NULL) {
            pod->shared = true;
            snprintf(pod->shared_why, sizeof(pod->shared_why),
                     "GPU %zu is shared with pod %s (pid %d)", d,
                     a->pods[w->pod].uid, (int)gd->pids[k]);
            return;
        }
        if (wd_proc_stat(a->o->proc_root, gd->pids[k], &st) == 0 &&
            st.state != 'Z' && st.state != 'X') {
            pod->shared = true;
            snprintf(pod->shared_why, sizeof(pod->shared_why),
                     "GPU %zu also runs pid %d, which is not this pod's "
                     "(another pod, or an MPS server)",
                     d, (int)gd->pids[k]);
            return;
        }
    }
}

/* The pod's GPUs over the period, each judged on its own; their lines go
 * into det (may be NULL). Moves every GPU's baseline to now. */
static void
pod_gpus(struct agent *a, struct wpod *pod, size_t pi, struct wd_period *pr,
         json_t *det)
{
    const struct wd_gpus *g = a->gpus;
    size_t lu = 0;

    pr->gpu_known = g->ok;
    if (!g->ok)
        return;
    pod->spin_util = 100;
    pod->spin_power = pod->spin_mem = 0;
    pod->lost_gpus[0] = '\0';
    pod->shared = false;
    pod->shared_why[0] = '\0';
    for (size_t d = 0; d < g->n; d++) {
        const struct wd_gpu *gd = &g->gpu[d];
        struct wd_gpu_period gp;
        struct wd_signals sig;
        enum wd_gpu_verdict v;
        bool mine = false;

        for (size_t k = 0; k < gd->n_pids && !mine; k++) {
            struct wproc *w = proc_find(a, gd->pids[k], 0);

            mine = w != NULL && w->pod == pi && w->alive;
        }
        if (mine && !pod->shared)
            gpu_shared(a, pod, pi, d, gd);
        if (mine) {
            gpu_period(gd, pod->base_ok[d] ? &pod->base[d] : NULL, &gp);
            v = wd_rule_gpu(&gp, &sig);
            pr->gpus++;
            switch (v) {
            case WD_GPU_WORKING:
                pr->gpus_busy++;
                break;
            case WD_GPU_IDLE:
                pr->gpus_idle++;
                break;
            case WD_GPU_SPINNING:
                pr->gpus_spinning++;
                if (gp.util_mean < pod->spin_util)
                    pod->spin_util = gp.util_mean;
                if (gp.power_pct > pod->spin_power)
                    pod->spin_power = gp.power_pct;
                if (gp.mem_mean > pod->spin_mem)
                    pod->spin_mem = gp.mem_mean;
                break;
            case WD_GPU_GONE:
                pr->gpus_lost++;
                if (lu + 8 < sizeof(pod->lost_gpus))
                    lu += (size_t)snprintf(pod->lost_gpus + lu,
                                           sizeof(pod->lost_gpus) - lu, "%s%zu",
                                           lu ? "," : "", d);
                break;
            case WD_GPU_UNJUDGED:
                pr->gpus_unjudged++;
                break;
            }
            if (det != NULL)
                json_array_append_new(
                    det,
                    json_pack(
                        "{s:i,s:s,s:s,s:I,s:I,s:s,s:I,s:s,s:I,s:s,s:I,"
                        "s:s}",
                        "gpu", (int)d, "verdict", wd_gpu_verdict_name(v),
                        "util", sig.util, "util_samples", (json_int_t)gp.util_n,
                        "util_mean", (json_int_t)gp.util_mean, "power",
                        sig.power, "power_pct_of_limit",
                        (json_int_t)gp.power_pct, "memory", sig.memory,
                        "mem_mean", (json_int_t)gp.mem_mean, "links", sig.links,
                        "link_bytes_per_s", (json_int_t)gp.link_bps, "nvml",
                        gd->state == WD_NVML_GPU_OK     ? "ok"
                        : gd->state == WD_NVML_GPU_LOST ? "GPU_IS_LOST"
                        : gd->state == WD_NVML_GPU_NO_UTIL
                            ? "NOT_SUPPORTED (MIG mode?)"
                            : gd->failed));
        }
        pod->base[d] = gd->c;
        pod->base_ok[d] = true;
    }
}

/* Sets every GPU's baseline of a new pod to NVML's latest reading. */
static void
pod_base(struct agent *a, struct wpod *pod)
{
    if (!a->gpus->ok)
        return;
    for (size_t d = 0; d < a->gpus->n; d++) {
        pod->base[d] = a->gpus->gpu[d].c;
        pod->base_ok[d] = true;
    }
    pod->base_set = true;
}

static void pod_hang(struct agent *a, struct wpod *pod, size_t pi);
static void pod_ras_drop(struct wpod *pod);
static void pod_finish(struct agent *a, struct wpod *pod, size_t pi, char *msg,
                       size_t n, bool act, const char *why_not);

/* Drops the pod's dead processes; returns how many are left. */
static size_t
pod_refresh(struct agent *a, size_t pi, uint64_t *ticks, uint64_t *io)
{
    size_t left = 0;

    *ticks = 0;
    *io = 0;
    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        struct wd_stat st;

        if (w->pod != pi || !w->alive)
            continue;
        if (wd_proc_stat(a->o->proc_root, w->pid, &st) != 0 ||
            st.start != w->start || st.state == 'Z' || st.state == 'X') {
            w->alive = false;
            if (pod_log_ok(a, &a->pods[pi]))
                logj(a, "exited", podj(&a->pods[pi], json_pack("{s:i}", "pid",
                                                               (int)w->pid)));
            continue;
        }
        if (st.cpu_ticks > w->prev_ticks)
            *ticks += st.cpu_ticks - w->prev_ticks;
        w->prev_ticks = st.cpu_ticks;
        {
            uint64_t b;

            if (proc_io(a, w->pid, &b) == 0) {
                if (w->io_ok && b > w->prev_io)
                    *io += b - w->prev_io;
                w->prev_io = b;
                w->io_ok = true;
            }
        }
        left++;
    }
    return left;
}

static void
pod_forget(struct agent *a, size_t pi)
{
    struct wpod *pod = &a->pods[pi];

    if (pod_log_ok(a, pod))
        logj(a, "gone",
             podj(pod, json_pack("{s:s}", "state", state_names[pod->state])));
    keep_save(a, pod, now_ms());
    free(pod->q);
    pod->q = NULL;
    pod->n_q = 0;
    free(pod->ev_msg);
    pod->ev_msg = NULL;
    free(pod->evw_msg);
    pod->evw_msg = NULL;
    pod->fr_pending = false;
    pod_ras_drop(pod);
    pod->used = false;
    procs_compact(a);
}

/* ---- /dev/shm ----------------------------------------------------------- */

static struct wproc *pod_first(struct agent *a, size_t pi);
static void post_event(struct agent *a, struct wpod *pod, const char *reason,
                       const char *msg, const char *key);

#define SHM_EVENT_PCT 90
#define SHM_REARM_PCT 80
#define MOUNTINFO_MAX (256 * 1024)
#define MAPS_MAX (1 << 20)
#define SHM_MAX_ENTRIES 1024
#define SHM_MAX_MAPPED 4096
#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

/* True when pid's mount table has a tmpfs at /dev/shm (the last mount
 * there wins, as the kernel stacks them). */
static bool
shm_is_tmpfs(struct agent *a, pid_t pid)
{
    ssize_t n = wd_proc_read(a->o->proc_root, pid, "mountinfo", a->tcpbuf,
                             MOUNTINFO_MAX);
    bool tmpfs = false;
    char *line, *save = NULL;

    if (n <= 0)
        return false;
    for (line = strtok_r(a->tcpbuf, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *f[5], *sep, *fs, *p = line;
        int k;

        for (k = 0; k < 5; k++) {
            f[k] = p;
            p = strchr(p, ' ');
            if (p == NULL)
                break;
            *p++ = '\0';
        }
        if (k < 5 || strcmp(f[4], "/dev/shm") != 0)
            continue;
        sep = strstr(p, " - ");
        if (sep == NULL)
            continue;
        fs = sep + 3;
        tmpfs = strncmp(fs, "tmpfs ", 6) == 0;
    }
    return tmpfs;
}

/* The inodes that the pod's live processes map from /dev/shm, from their
 * /proc/PID/maps ("... dev inode /dev/shm/NAME"), sorted. */
static size_t
shm_mapped(struct agent *a, size_t pi, uint64_t *ino, size_t cap)
{
    size_t n = 0;

    for (size_t i = 0; i < a->n_procs; i++) {
        const struct wproc *w = &a->procs[i];
        char *line, *save = NULL;
        ssize_t len;

        if (w->pod != pi || !w->alive)
            continue;
        len =
            wd_proc_read(a->o->proc_root, w->pid, "maps", a->tcpbuf, MAPS_MAX);
        if (len <= 0)
            continue;
        for (line = strtok_r(a->tcpbuf, "\n", &save); line != NULL && n < cap;
             line = strtok_r(NULL, "\n", &save)) {
            unsigned long long inode;
            char *path = strstr(line, " /dev/shm/");
            int fields = 0;
            char *p = line;

            if (path == NULL)
                continue;
            /* The inode is the fifth field. */
            while (fields < 4 && (p = strchr(p, ' ')) != NULL) {
                while (*p == ' ')
                    p++;
                fields++;
            }
            if (p == NULL || sscanf(p, "%llu", &inode) != 1)
                continue;
            ino[n++] = inode;
        }
    }
    qsort(ino, n, sizeof(*ino), u64_cmp);
    return n;
}

/*
 * The pod's /dev/shm: its size and use (statfs through the container's
 * root, only when the mount table says tmpfs, so that no tenant filesystem
 * is asked), one Event when it crosses SHM_EVENT_PCT, and NCCL segments
 * (nccl-*) that no live process of the pod maps any more and that are
 * older than a period: left behind by a process that died.
 */
static void
pod_shm(struct agent *a, struct wpod *pod, size_t pi)
{
    const unsigned long long res =
        RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS;
    struct wproc *first = pod_first(a, pi);
    struct open_how how;
    struct statfs sf;
    struct wd_stat st;
    char rp[256];
    int dfd = -1, sfd = -1, lfd = -1;
    DIR *d = NULL;
    struct dirent *de;
    uint64_t *mapped = NULL;
    size_t n_mapped = 0, seen = 0;
    bool looked = false;
    int orphans = 0;

    pod->shm_known = false;
    if (first == NULL || !shm_is_tmpfs(a, first->pid))
        return;
    snprintf(rp, sizeof(rp), "%s/%d/root", a->o->proc_root, (int)first->pid);
    dfd = open(rp, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || wd_proc_stat(a->o->proc_root, first->pid, &st) != 0 ||
        st.start != first->start)
        goto done;
    memset(&how, 0, sizeof(how));
    how.flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = res;
    sfd = (int)syscall(SYS_openat2, dfd, "dev/shm", &how, sizeof(how));
    if (sfd < 0 || fstatfs(sfd, &sf) != 0 ||
        (unsigned long)sf.f_type != (unsigned long)TMPFS_MAGIC)
        goto done;
    pod->shm_known = true;
    pod->shm_size = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
    pod->shm_used = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
    if (pod->shm_size > 0 &&
        pod->shm_used * 100 >= pod->shm_size * SHM_EVENT_PCT) {
        if (!pod->shm_reported) {
            char msg[300];

            pod->shm_reported = true;
            snprintf(msg, sizeof(msg),
                     "NCCLShmNearlyFull: /dev/shm %llu%% full (%llu of %llu "
                     "KiB); NCCL's shared-memory segments fail before the "
                     "kubelet evicts the pod at the volume's sizeLimit",
                     (unsigned long long)(pod->shm_used * 100 / pod->shm_size),
                     (unsigned long long)(pod->shm_used >> 10),
                     (unsigned long long)(pod->shm_size >> 10));
            logj(a, "shm",
                 podj(pod, json_pack("{s:s,s:I,s:I}", "message", msg,
                                     "used_bytes", (json_int_t)pod->shm_used,
                                     "size_bytes", (json_int_t)pod->shm_size)));
            post_event(a, pod, "NCCLShmNearlyFull", msg, "shm");
        }
    } else if (pod->shm_used * 100 < pod->shm_size * SHM_REARM_PCT) {
        pod->shm_reported = false;
    }
    /* Segments left behind: a directory of a tmpfs, read through the
     * O_PATH handle checked above. */
    lfd = openat(sfd, ".", O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
    if (lfd < 0 || (d = fdopendir(lfd)) == NULL)
        goto done;
    lfd = -1; /* owned by d */
    while ((de = readdir(d)) != NULL && seen++ < SHM_MAX_ENTRIES) {
        struct stat fs;
        struct timespec now;
        uint64_t ino;

        if (strncmp(de->d_name, "nccl-", 5) != 0 ||
            fstatat(dirfd(d), de->d_name, &fs, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(fs.st_mode))
            continue;
        clock_gettime(CLOCK_REALTIME, &now);
        if ((long long)(now.tv_sec - fs.st_mtime) * 1000 < pod->spec.period_ms)
            continue; /* being set up */
        if (!looked) {
            mapped = malloc(SHM_MAX_MAPPED * sizeof(*mapped));
            if (mapped == NULL)
                break;
            n_mapped = shm_mapped(a, pi, mapped, SHM_MAX_MAPPED);
            looked = true;
        }
        ino = (uint64_t)fs.st_ino;
        if (n_mapped > 0 &&
            bsearch(&ino, mapped, n_mapped, sizeof(*mapped), u64_cmp) != NULL)
            continue;
        orphans++;
        {
            bool logged = false;

            for (size_t k = 0; k < pod->n_orphan_ino && !logged; k++)
                logged = pod->shm_orphan_ino[k] == ino;
            if (logged)
                continue;
            if (pod->n_orphan_ino <
                sizeof(pod->shm_orphan_ino) / sizeof(pod->shm_orphan_ino[0]))
                pod->shm_orphan_ino[pod->n_orphan_ino++] = ino;
            logj(a, "shm-orphan",
                 podj(pod, json_pack("{s:s,s:I,s:s}", "segment", de->d_name,
                                     "bytes", (json_int_t)fs.st_size, "why",
                                     "no live process of the pod maps it: "
                                     "left by a process that died")));
        }
    }
done:
    pod->shm_orphans = orphans;
    free(mapped);
    if (d != NULL)
        closedir(d);
    if (lfd >= 0)
        close(lfd);
    if (sfd >= 0)
        close(sfd);
    if (dfd >= 0)
        close(dfd);
}

static void
pod_sample(struct agent *a, size_t pi, long long t)
{
    struct wpod *pod = &a->pods[pi];
    struct wd_period pr;
    enum wd_verdict v;
    uint64_t ticks, io;
    long long elapsed = t - pod->last_ms;
    json_t *det = a->o->verbose ? json_array() : NULL;
    bool fired;

    memset(&pr, 0, sizeof(pr));
    if (pod_refresh(a, pi, &ticks, &io) == 0) {
        json_decref(det);
        pod_forget(a, pi);
        return;
    }
    if (elapsed <= 0)
        elapsed = 1;
    pr.cpu_milli = (int64_t)((long double)ticks * 1000.0L * 1000.0L /
                             (long double)a->clk_tck / (long double)elapsed);
    pr.io_bps = (int64_t)(io * 1000 / (uint64_t)elapsed);
    pod_gpus(a, pod, pi, &pr, det);
    pod_sockets(a, pod, pi, &pr);
    v = wd_rule_judge(&pod->spec, &pr);
    fired = wd_rule_step(&pod->rule, &pod->spec, v);
    pod->last = pr;
    pod->last_v = v;
    pod->last_ms = t;
    while (pod->next_ms <= t)
        pod->next_ms += pod->spec.period_ms;
    if (a->o->verbose)
        logj(a, "period",
             podj(pod,
                  json_pack("{s:s,s:i,s:b,s:i,s:i,s:i,s:i,s:i,s:i,s:I,s:s,"
                            "s:I,s:s,s:i,s:i,s:i,s:i,s:s,s:o}",
                            "verdict", wd_verdict_name(v), "idle_periods",
                            pod->rule.idle, "gpu_known", pr.gpu_known, "gpus",
                            pr.gpus, "gpus_busy", pr.gpus_busy, "gpus_idle",
                            pr.gpus_idle, "gpus_spinning", pr.gpus_spinning,
                            "gpus_lost", pr.gpus_lost, "gpus_unjudged",
                            pr.gpus_unjudged, "cpu_milli",
                            (json_int_t)pr.cpu_milli, "cpu",
                            pr.cpu_milli >= pod->spec.min_cpu_milli ? "busy"
                                                                    : "idle",
                            "io_bytes_per_s", (json_int_t)pr.io_bps, "io",
                            pr.io_bps >= WD_IO_MOVING_BPS ? "moving" : "still",
                            "sockets", pr.sockets, "open_files_read",
                            pr.fds_read, "close_wait", pr.close_wait,
                            "stuck_queues", pr.stuck_queues, "state",
                            state_names[pod->state], "gpu",
                            det ? det : json_array())));
    if (pod->state == POD_CONFIRM &&
        (v == WD_BUSY || v == WD_IO_MOVING || v == WD_SOCKETS_OK)) {
        /* Working again before a second signal agreed: the hang is
         * reported, nothing else. A period that cannot be judged
         * (unknown) or whose CPU idles is no sign of work and leaves the
         * confirmation running. */
        char msg[1600];

        snprintf(msg, sizeof(msg), "%s", pod->hang_msg ? pod->hang_msg : "");
        pod_ras_drop(pod);
        pod_finish(a, pod, pi, msg, sizeof(msg), false,
                   "the pod worked again before a second signal agreed");
    }
    if (pod->state == POD_REPORTED && !wd_verdict_stalled(v)) {
        pod->state = POD_WATCH;
        logj(a, "recovered",
             podj(pod, json_pack("{s:s}", "verdict", wd_verdict_name(v))));
    }
    if (fired && pod->state == POD_WATCH)
        pod_hang(a, pod, pi);
    pod_shm(a, pod, pi);
}

/* ---- actions -------------------------------------------------------- */

static void
duration_text(long long ms, char *buf, size_t n)
{
    if (ms % 1000 == 0)
        snprintf(buf, n, "%llds", ms / 1000);
    else
        snprintf(buf, n, "%lldms", ms);
}

/* Signals every live process of the pod (start time checked first). */
static int
pod_signal(struct agent *a, size_t pi, int sig, bool only_catchers,
           const char *what)
{
    struct wpod *pod = &a->pods[pi];
    int sent = 0;

    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        const char *why = "";
        int rc;

        if (w->pod != pi || !w->alive)
            continue;
        if (only_catchers) {
            char st[4096];
            ssize_t n =
                wd_proc_read(a->o->proc_root, w->pid, "status", st, sizeof(st));

            if (n <= 0 || !wd_status_catches(st, (size_t)n, sig)) {
                logj(a, "action",
                     podj(pod, json_pack("{s:s,s:i,s:s,s:s}", "action", what,
                                         "pid", (int)w->pid, "signal",
                                         wd_signal_name(sig), "result",
                                         "not-sent: the process does not "
                                         "catch it")));
                continue;
            }
        }
        rc = signal_checked(a->o->proc_root, w->pid, w->start, sig, &why);
        if (rc == 0)
            sent++;
        if (rc == 1 && strcmp(why, "pid-reused") == 0)
            a->m.pid_reused++;
        if (rc != 0)
            w->alive = rc == 1 ? false : w->alive;
        logj(a, "action",
             podj(pod, json_pack("{s:s,s:i,s:s,s:s}", "action", what, "pid",
                                 (int)w->pid, "signal",
                                 sig == SIGTERM   ? "SIGTERM"
                                 : sig == SIGKILL ? "SIGKILL"
                                                  : wd_signal_name(sig),
                                 "result", why)));
    }
    return sent;
}

/* The first live process of the pod, for writes into its container. */
static struct wproc *
pod_first(struct agent *a, size_t pi)
{
    for (size_t i = 0; i < a->n_procs; i++)
        if (a->procs[i].pod == pi && a->procs[i].alive)
            return &a->procs[i];
    return NULL;
}

/* Events, as the kubelet's event recorder limits them
 * (client-go tools/record, events_cache.go: a spam filter of a token
 * bucket per object, and deduplication of repeats): per pod, the same
 * cause again within EV_DEDUP_MS is not posted, and at most EV_POD_BURST
 * Events, refilled one per EV_POD_REFILL_MS; per node, EV_NODE_BURST
 * refilled one per EV_NODE_REFILL_MS. */
#define EV_DEDUP_MS (10 * 60 * 1000LL)
#define EV_POD_BURST 5.0
#define EV_POD_REFILL_MS (5 * 60 * 1000LL)
#define EV_NODE_BURST 20.0
#define EV_NODE_REFILL_MS (10 * 1000LL)

/* Takes a token from a bucket; false when it is empty. */
static bool
bucket_take(double *tokens, long long *at, double burst, long long refill,
            long long t)
{
    if (*at == 0) {
        *tokens = burst;
    } else if (t > *at) {
        *tokens += (double)(t - *at) / (double)refill;
        if (*tokens > burst)
            *tokens = burst;
    }
    *at = t;
    if (*tokens < 1.0)
        return false;
    *tokens -= 1.0;
    return true;
}

/* Fills the name and namespace of every watched pod the API lists on this
 * node, matched by UID. At most one list per EV_IDENT_MS, except that a
 * pod (pod, may be NULL) whose UID never had a list of its own gets one
 * as soon as EV_IDENT_MIN_MS passed since the last: a pod whose processes
 * restart keeps its UID's ident_tried (podkeep), so it cannot hold the
 * lookup from the others. Returns true when a list was asked for now. */
#define EV_IDENT_MS 10000
#define EV_IDENT_MIN_MS 1000
#define POD_LIST_MAX (8 << 20)
static bool
pods_identify(struct agent *a, struct wpod *pod, long long t)
{
    char path[400], why[300];
    json_error_t je;
    json_t *root, *items, *it;
    char *body;
    size_t len, i;
    long code;

    if (a->ident_ms != 0 && t - a->ident_ms < EV_IDENT_MS) {
        if (pod == NULL || pod->keep.ident_tried ||
            t - a->ident_ms < EV_IDENT_MIN_MS)
            return false;
    }
    if (pod != NULL)
        pod->keep.ident_tried = true;
    a->ident_ms = t;
    if (a->o->node_name == NULL || a->o->node_name[0] == '\0') {
        logj(a, "identity",
             json_pack("{s:s}", "result",
                       "no --node-name: pods cannot be looked up"));
        return true;
    }
    snprintf(path, sizeof(path),
             "/api/v1/pods?fieldSelector=spec.nodeName%%3D%.200s",
             a->o->node_name);
    code =
        wd_api_get(&a->ev, path, POD_LIST_MAX, &body, &len, why, sizeof(why));
    if (code != 200) {
        logj(a, "identity", json_pack("{s:s}", "result", why));
        return true;
    }
    root = json_loadb(body, len, 0, &je);
    free(body);
    items = json_object_get(root, "items");
    json_array_foreach(items, i, it)
    {
        json_t *md = json_object_get(it, "metadata");
        const char *uid = json_string_value(json_object_get(md, "uid"));
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        const char *ip = json_string_value(
            json_object_get(json_object_get(it, "status"), "podIP"));
        ssize_t pi;

        if (uid == NULL || name == NULL || ns == NULL ||
            (pi = pod_find(a, uid)) < 0)
            continue;
        snprintf(a->pods[pi].name, sizeof(a->pods[pi].name), "%s", name);
        snprintf(a->pods[pi].ns, sizeof(a->pods[pi].ns), "%s", ns);
        snprintf(a->pods[pi].ip, sizeof(a->pods[pi].ip), "%s", ip ? ip : "");
    }
    json_decref(root);
    return true;
}

static void
post_event(struct agent *a, struct wpod *pod, const char *reason,
           const char *msg, const char *key)
{
    long long t0 = now_ms();
    char why[300], ts[40], name[300];
    struct timespec now;
    struct tm tm;
    json_t *ev;
    char *body;
    long code;

    if (a->ev.api_server == NULL || a->ev.api_server[0] == '\0')
        return;
    if ((pod->name[0] == '\0' || pod->ns[0] == '\0') && !a->o->pod_from_env &&
        !pods_identify(a, pod, t0)) {
        /* The list was fetched a moment ago for another pod: try again
         * once it may be fetched (ident_due), not give up. */
        free(pod->evw_msg);
        pod->evw_msg = strdup(msg);
        pod->evw_reason = reason;
        snprintf(pod->evw_key, sizeof(pod->evw_key), "%s", key);
        if (pod->evw_until_ms == 0)
            pod->evw_until_ms = t0 + 2 * EV_IDENT_MS;
        logj(a, "event",
             podj(pod, json_pack("{s:s}", "result",
                                 "deferred: the pod list was fetched less "
                                 "than a second ago")));
        return;
    }
    pod->evw_until_ms = 0;
    if (pod->name[0] == '\0' || pod->ns[0] == '\0') {
        logj(a, "event",
             podj(pod, json_pack("{s:s}", "result",
                                 a->o->pod_from_env
                                     ? "not-sent: the pod's name or namespace "
                                       "is unknown (no NCCLGUARD_POD_NAME or "
                                       "NCCLGUARD_POD_NAMESPACE)"
                                     : "not-sent: the API lists no pod with "
                                       "this UID on this node")));
        return;
    }
    if (strcmp(pod->keep.ev_key, key) == 0 &&
        t0 - pod->keep.ev_ms < EV_DEDUP_MS) {
        pod->keep.ev_dups++;
        a->m.events_suppressed++;
        logj(a, "event",
             podj(pod, json_pack("{s:s,s:I}", "result",
                                 "deduplicated: the same cause was posted "
                                 "less than 10 minutes ago",
                                 "repeats", (json_int_t)pod->keep.ev_dups)));
        return;
    }
    if (!bucket_take(&pod->keep.ev_tokens, &pod->keep.ev_tokens_ms,
                     EV_POD_BURST,
                     EV_POD_REFILL_MS, t0) ||
        !bucket_take(&a->ev_tokens, &a->ev_tokens_ms, EV_NODE_BURST,
                     EV_NODE_REFILL_MS, t0)) {
        a->m.events_suppressed++;
        logj(a, "event",
             podj(pod, json_pack("{s:s}", "result",
                                 "rate-limited: too many Events from this "
                                 "pod or node")));
        return;
    }
    snprintf(pod->keep.ev_key, sizeof(pod->keep.ev_key), "%s", key);
    pod->keep.ev_ms = t0;
    pod->keep.ev_dups = 0;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof(name), "%.200s.ncclhang-", pod->name);
    ev = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s,s:s},s:s,s:s,s:s,"
                   "s:{s:s,s:s},s:s,s:s,s:i,s:s,s:s}",
                   "apiVersion", "v1", "kind", "Event", "metadata",
                   "generateName", name, "namespace", pod->ns, "involvedObject",
                   "apiVersion", "v1", "kind", "Pod", "name", pod->name,
                   "namespace", pod->ns, "uid", pod->uid, "reason", reason,
                   "message", msg, "type", "Warning", "source", "component",
                   "ncclguard-watchdog", "host",
                   a->o->node_name ? a->o->node_name : "", "firstTimestamp", ts,
                   "lastTimestamp", ts, "count", 1, "reportingComponent",
                   "ncclguard-watchdog", "reportingInstance",
                   a->o->node_name ? a->o->node_name : "");
    body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (body == NULL)
        return;
    why[0] = '\0';
    code = wd_event_post(&a->ev, pod->ns, body, why, sizeof(why));
    free(body);
    if (code == 201)
        a->m.events++;
    else
        a->m.event_errors++;
    logj(a, "event",
         podj(pod, json_pack("{s:I,s:s}", "status", (json_int_t)code, "result",
                             code == 201 ? "created" : why)));
}

/* RAS: its own collective timeout (the client's TIMEOUT), and the time the
 * agent gives one query. STATUS runs two RAS collectives in turn (the RAS
 * network, then the communicators: "Gathering data about ..." in
 * client_support.cc), and RAS ends each one at most
 * RAS_COLLECTIVE_EXTRA_TIMEOUT_SEC (5 s) past the client's timeout, so an
 * answer may take twice timeout + 5 s. The query runs on a thread of its
 * own (wd_ras_job), never on the decision loop. */
#define RAS_TIMEOUT_S 1
#define RAS_QUERY_MS                                                           \
    ((2 * (RAS_TIMEOUT_S + WD_RAS_EXTRA_TIMEOUT_S) + 1) * 1000LL)

/*
 * The address of the pod's NCCL RAS service: the port of the pod's
 * NCCL_RAS_ADDR, at the pod's own IP from the API, so that a pod's env can
 * point the agent at nothing but the pod itself; only under --pod-from-env
 * is the env's host believed too. Returns 0 with *ss and *len, or -1 after
 * a "ras" log line saying why not.
 */
static int
pod_ras_addr(struct agent *a, struct wpod *pod, struct sockaddr_storage *ss,
             socklen_t *len, const char **why_not)
{
    char host[128];
    const char *colon, *h = NULL;
    long port;
    char *end;

    memset(ss, 0, sizeof(*ss));
    if (pod->ras_addr[0] == '\0') {
        *why_not = "not-queried: NCCL_RAS_ADDR is not set, so RAS listens "
                   "on the pod's loopback";
        logj(a, "ras", podj(pod, json_pack("{s:s}", "result", *why_not)));
        return -1;
    }
    colon = strrchr(pod->ras_addr, ':');
    errno = 0;
    port = strtol(colon ? colon + 1 : pod->ras_addr, &end, 10);
    if (errno != 0 || *end != '\0' || port <= 0 || port > 65535) {
        *why_not = "not-queried: bad NCCL_RAS_ADDR";
        logj(a, "ras",
             podj(pod, json_pack("{s:s,s:s}", "result", *why_not, "value",
                                 pod->ras_addr)));
        return -1;
    }
    snprintf(host, sizeof(host), "%.*s",
             colon ? (int)(colon - pod->ras_addr) : 0, pod->ras_addr);
    if (a->o->pod_from_env && host[0] != '\0') {
        h = host;
    } else {
        if (pod->ip[0] == '\0' && a->ev.api_server && a->ev.api_server[0])
            (void)pods_identify(a, pod, now_ms());
        h = pod->ip;
    }
    if (h[0] == '[') { /* [v6] */
        snprintf(host, sizeof(host), "%s", h + 1);
        if (strchr(host, ']') != NULL)
            *strchr(host, ']') = '\0';
        h = host;
    }
    {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

        if (inet_pton(AF_INET, h, &s4->sin_addr) == 1) {
            s4->sin_family = AF_INET;
            s4->sin_port = htons((uint16_t)port);
            *len = sizeof(*s4);
        } else if (inet_pton(AF_INET6, h, &s6->sin6_addr) == 1) {
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            *len = sizeof(*s6);
        } else {
            *why_not = "not-queried: the pod's IP is unknown";
            logj(a, "ras", podj(pod, json_pack("{s:s}", "result", *why_not)));
            return -1;
        }
    }
    return 0;
}

/* Where a host RAS names is: RAS prints an IP address (ncclSocketToHost:
 * inet_ntop), which is named after the watched pod that has it, or else
 * said to be an address. */
static void
ras_where(struct agent *a, const char *host, char *out, size_t n)
{
    for (size_t i = 0; i < a->n_pods; i++) {
        const struct wpod *p = &a->pods[i];

        if (p->used && p->ip[0] != '\0' && strcmp(p->ip, host) == 0 &&
            p->name[0] != '\0') {
            snprintf(out, n, "pod %.60s/%.60s on node %.60s", p->ns, p->name,
                     a->o->node_name ? a->o->node_name : "?");
            return;
        }
    }
    snprintf(out, n, "address %.45s", host);
}

/* A rank that RAS names behind or missing, whose pod runs on this node and
 * worked in its latest period (busy GPU, I/O, an idle CPU): the job waits
 * for that rank (a checkpoint, an evaluation), it is not stuck. Writes why
 * into out and returns true then. */
static bool
ras_named_pod_works(struct agent *a, const struct wd_ras_result *r,
                    char *out, size_t n)
{
    for (int k = 0; k < r->n_behind + r->n_missing; k++) {
        const struct wd_ras_rank *q =
            k < r->n_behind ? (k < WD_RAS_MAX_RANKS ? &r->behind[k] : NULL)
            : k - r->n_behind < WD_RAS_MAX_RANKS ? &r->missing[k - r->n_behind]
                                                 : NULL;

        if (q == NULL)
            continue;
        for (size_t i = 0; i < a->n_pods; i++) {
            const struct wpod *p = &a->pods[i];

            /* last_ms == watch_ms: no period judged yet. */
            if (!p->used || p->ip[0] == '\0' || strcmp(p->ip, q->host) != 0 ||
                p->last_ms == p->watch_ms || p->last_v == WD_UNKNOWN ||
                wd_verdict_stalled(p->last_v))
                continue;
            snprintf(out, n,
                     "RAS names a rank at %.45s, whose pod %.40s on this "
                     "node is not stalled (%s): the job waits for it",
                     q->host, p->uid, wd_verdict_name(p->last_v));
            return true;
        }
    }
    return false;
}

/* Appends what a RAS answer names to msg (used bytes of n). */
static void
ras_text(struct agent *a, const struct wd_ras_result *r, char *msg, size_t n)
{
    size_t u = strlen(msg);
    char where[200];

    if (r->n_missing == 0 && r->n_behind == 0 && u + 40 < n)
        u += (size_t)snprintf(msg + u, n - u,
                              "; RAS: no rank missing or behind");
    for (int i = 0; i < r->n_missing && i < 3 && u + 300 < n; i++) {
        const struct wd_ras_rank *k = &r->missing[i];
        const char *st = k->dead           ? "considered dead"
                         : k->unresponsive ? "unresponsive"
                                           : "no data";

        ras_where(a, k->host, where, sizeof(where));
        if (k->rank >= 0)
            u += (size_t)snprintf(msg + u, n - u,
                                  "; RAS: rank %d at %s (pid %d) missing (%s)",
                                  k->rank, where, k->pid, st);
        else
            u += (size_t)snprintf(msg + u, n - u,
                                  "; RAS: process %d at %s missing (%s)",
                                  k->pid, where, st);
    }
    for (int i = 0; i < r->n_behind && i < 3 && u + 300 < n; i++) {
        const struct wd_ras_rank *k = &r->behind[i];

        ras_where(a, k->host, where, sizeof(where));
        u += (size_t)snprintf(msg + u, n - u,
                              "; RAS: rank %d at %s (pid %d) behind (%lu of "
                              "%lu collectives issued)",
                              k->rank, where, k->pid, k->done, k->most);
    }
}

/* The flight recorder: how long the Event and the SIGTERM wait for the
 * dumps (ProcessGroupNCCL's monitor thread polls its pipe about once a
 * second, then writes the trace). */
#define FR_WAIT_MS 5000

/* True when path in pid's root is a regular, non-empty file modified at or
 * after since. Looked at through an O_PATH handle: never opened. */
static bool
dump_ready(const char *root, const struct wproc *w, const char *path,
           time_t since)
{
    struct open_how how;
    struct stat st;
    char rp[256];
    int dfd, fd;
    bool ok = false;

    snprintf(rp, sizeof(rp), "%s/%d/root", root, (int)w->pid);
    dfd = open(rp, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return false;
    memset(&how, 0, sizeof(how));
    how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    while (*path == '/')
        path++;
    fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
    if (fd >= 0) {
        ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
             st.st_mtime >= since;
        close(fd);
    }
    close(dfd);
    return ok;
}

/* Asks every rank of the pod that has a flight-recorder pipe to dump;
 * returns how many were asked. */
static int
pod_fr_trigger(struct agent *a, struct wpod *pod, size_t pi)
{
    int asked = 0;

    for (size_t i = 0; i < a->n_procs; i++) {
        struct wproc *w = &a->procs[i];
        const char *why;

        if (w->pod != pi || !w->alive || w->fr_pipe == NULL)
            continue;
        if (write_in_root(a->o->proc_root, w->pid, w->start, w->fr_pipe, "1\n",
                          2, true, &why) == 0)
            asked++;
        logj(a, "action",
             podj(pod,
                  json_pack("{s:s,s:i,s:s,s:s,s:s}", "action",
                            "flight-recorder", "pid", (int)w->pid, "pipe",
                            w->fr_pipe, "dump", w->fr_dump, "result", why)));
    }
    return asked;
}

/* Posts the hang's Event now, or, when a flight-recorder dump was asked
 * for, once the dumps are there (fr_due). */
static void
pod_event_or_wait(struct agent *a, struct wpod *pod, size_t pi, const char *msg)
{
    time_t since = time(NULL);

    if (pod_fr_trigger(a, pod, pi) > 0 && (pod->ev_msg = strdup(msg))) {
        pod->fr_pending = true;
        pod->fr_since = since;
        pod->fr_deadline_ms = now_ms() + FR_WAIT_MS;
        return;
    }
    post_event(a, pod, "NCCLHang", msg, wd_verdict_name(pod->hang_v));
}

/* Events waiting for the pod list: posted (or given up) once it can be
 * fetched, at most 2 x EV_IDENT_MS after the first try. */
static void
ident_due(struct agent *a, long long t)
{
    for (size_t pi = 0; pi < a->n_pods; pi++) {
        struct wpod *pod = &a->pods[pi];
        char key[24];
        char *msg;

        if (!pod->used || pod->evw_msg == NULL)
            continue;
        msg = pod->evw_msg;
        pod->evw_msg = NULL;
        snprintf(key, sizeof(key), "%s", pod->evw_key);
        if (t > pod->evw_until_ms) {
            pod->evw_until_ms = 0;
            logj(a, "event",
                 podj(pod, json_pack("{s:s}", "result",
                                     "not-sent: the pod list could not be "
                                     "fetched in time")));
        } else {
            post_event(a, pod, pod->evw_reason, msg, key);
        }
        free(msg);
    }
}

/* Pods waiting for flight-recorder dumps: once every asked rank's dump is
 * there, or at the deadline, the Event goes out saying where they are. */
static void
fr_due(struct agent *a, long long t)
{
    for (size_t pi = 0; pi < a->n_pods; pi++) {
        struct wpod *pod = &a->pods[pi];
        char msg[2000], list[700];
        size_t u = 0;
        bool all = true;
        int n = 0;

        if (!pod->used || !pod->fr_pending)
            continue;
        list[0] = '\0';
        for (size_t i = 0; i < a->n_procs; i++) {
            const struct wproc *w = &a->procs[i];
            const char *at = NULL;

            if (w->pod != pi || w->fr_dump == NULL)
                continue;
            if (dump_ready(a->o->proc_root, w, w->fr_dump, pod->fr_since))
                at = w->fr_dump;
            else if (w->fr_dump_alt != NULL &&
                     dump_ready(a->o->proc_root, w, w->fr_dump_alt,
                                pod->fr_since))
                at = w->fr_dump_alt;
            if (at == NULL) {
                all = false;
                continue;
            }
            n++;
            if (u + 4 < sizeof(list))
                u += (size_t)snprintf(list + u, sizeof(list) - u, "%s%s",
                                      u ? ", " : "", at);
        }
        if (!all && t < pod->fr_deadline_ms)
            continue;
        snprintf(msg, sizeof(msg), "%s; flight recorder: %s%s",
                 pod->ev_msg ? pod->ev_msg : "",
                 n > 0 ? "dumped to " : "no dump within 5 s",
                 n > 0 ? list : "");
        logj(a, "action",
             podj(pod, json_pack("{s:s,s:s,s:i}", "action",
                                 "flight-recorder-dump", "result",
                                 all ? "dumped" : "timed out", "dumps", n)));
        pod->fr_pending = false;
        post_event(a, pod, "NCCLHang", msg, wd_verdict_name(pod->hang_v));
        free(pod->ev_msg);
        pod->ev_msg = NULL;
    }
}

/* A lost GPU is this node's fault whatever the job did: besides the pod's
 * Event, one on the Node that the node loop counts as node-class evidence
 * (contract/nodeevent.h). Its name is the pod's, so a second hang of the
 * same pod answers 409 and the GPU counts once. */
static void
node_gpu_lost_event(struct agent *a, struct wpod *pod)
{
    const char *node = a->o->node_name;
    char why[700], ts[40], name[300], podref[340];
    struct timespec now;
    struct tm tm;
    json_t *ev, *evid;
    char *body, *evtext;
    long code;

    if (a->ev.api_server == NULL || a->ev.api_server[0] == '\0' ||
        node == NULL || node[0] == '\0' || pod->uid[0] == '\0')
        return;
    if ((pod->name[0] == '\0' || pod->ns[0] == '\0') && !a->o->pod_from_env)
        (void)pods_identify(a, pod, now_ms());
    if (pod->name[0] == '\0' || pod->ns[0] == '\0')
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(name, sizeof(name), "%.180s.ncclguard-gpulost.%.64s", node,
             pod->uid);
    snprintf(podref, sizeof(podref), "%s/%s", pod->ns, pod->name);
    snprintf(why, sizeof(why), "%s/gpu-lost", pod->uid);
    evid = json_pack("{s:s,s:s,s:s,s:s,s:I,s:s}", "key", why, "pod", podref,
                     "node", node, "reason", "GPULost", "at",
                     (json_int_t)now_ms(), "gpus", pod->lost_gpus);
    evtext = evid != NULL ? json_dumps(evid, JSON_COMPACT) : NULL;
    json_decref(evid);
    if (evtext == NULL)
        return;
    ev = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s,s:s,s:s},s:{s:s,s:s,s:s,s:s},"
        "s:s,s:s,s:s,s:{s:s,s:s},s:s,s:s,s:i,s:s,s:s}",
        "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
        "namespace", NG_NODE_EVENT_NS, "annotations", NG_EVIDENCE_ANN, evtext,
        "involvedObject", "apiVersion", "v1", "kind", "Node", "name", node,
        "related", "apiVersion", "v1", "kind", "Pod", "name", pod->name,
        "namespace", pod->ns, "reason", NG_EVENT_GPU_LOST, "message", "",
        "type", "Warning", "source", "component", "ncclguard-watchdog", "host",
        node, "firstTimestamp", ts, "lastTimestamp", ts, "count", 1,
        "reportingComponent", "ncclguard-watchdog", "reportingInstance", node);
    free(evtext);
    if (ev == NULL)
        return;
    snprintf(why, sizeof(why),
             "NVML reports GPU %s lost (NVML_ERROR_GPU_IS_LOST) under pod %s",
             pod->lost_gpus, podref);
    json_object_set_new(ev, "message", json_string(why));
    json_object_set_new(json_object_get(ev, "related"), "uid",
                        json_string(pod->uid));
    body = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (body == NULL)
        return;
    why[0] = '\0';
    code = wd_event_post(&a->ev, NG_NODE_EVENT_NS, body, why, sizeof(why));
    free(body);
    if (code == 201)
        a->m.events++;
    else if (code != 409)
        a->m.event_errors++;
    logj(a, "event",
         podj(pod, json_pack("{s:s,s:I,s:s}", "reason", NG_EVENT_GPU_LOST,
                             "status", (json_int_t)code, "result",
                             code == 201   ? "created"
                             : code == 409 ? "already posted"
                                           : why)));
}

/* Ends a RAS confirmation that is under way: cancels its query. */
static void
pod_ras_drop(struct wpod *pod)
{
    wd_ras_job_free(pod->ras_job);
    pod->ras_job = NULL;
    pod->ras_step = 0;
    free(pod->ras1);
    pod->ras1 = NULL;
    free(pod->hang_msg);
    pod->hang_msg = NULL;
}

/*
 * What follows a hang once it is judged: in report mode, or when no second
 * signal agreed (act false, why_not says why), the Event and nothing else;
 * otherwise the restart sequence. msg is the hang's message; it is
 * extended here.
 */
static void
pod_finish(struct agent *a, struct wpod *pod, size_t pi, char *msg, size_t n,
           bool act, const char *why_not)
{
    const struct wd_spec *s = &pod->spec;
    char grace[24], report[1800];
    struct wproc *first = pod_first(a, pi);
    size_t used = strlen(msg);
    bool asked;

    duration_text(s->grace_ms, grace, sizeof(grace));
    if (s->action == WD_ACTION_REPORT) {
        snprintf(msg + used, n - used, "; action: report only");
        pod->state = POD_REPORTED;
        logj(a, "decision",
             podj(pod, json_pack("{s:s,s:s}", "decision", "report",
                                 "why", "the policy's action is report")));
        pod_event_or_wait(a, pod, pi, msg);
        return;
    }
    if (!act) {
        snprintf(msg + used, n - used,
                 "; report only, no checkpoint signal or SIGTERM: %s",
                 why_not);
        pod->state = POD_REPORTED;
        logj(a, "decision",
             podj(pod, json_pack("{s:s,s:s}", "decision", "report-only",
                                 "why", why_not)));
        pod_event_or_wait(a, pod, pi, msg);
        return;
    }
    asked = s->checkpoint_signal != 0 || s->checkpoint_file[0] != '\0';
    if (asked)
        snprintf(msg + used, n - used,
                 "; checkpoint requested; SIGTERM at +%s", grace);
    else
        snprintf(msg + used, n - used, "; no checkpoint configured; SIGTERM now");
    logj(a, "decision",
         podj(pod, json_pack("{s:s,s:s}", "decision", "restart", "why",
                             why_not ? why_not : "")));
    if (first != NULL && a->o->termination_log != NULL &&
        a->o->termination_log[0] != '\0') {
        const char *why;
        int k = snprintf(report, sizeof(report),
                         "ncclguard-watchdog: %s\npod %s/%s uid %s\n"
                         "spec %s\n",
                         msg, pod->ns, pod->name, pod->uid, pod->spec_text);

        if (k > 0 &&
            write_in_root(a->o->proc_root, first->pid, first->start,
                          a->o->termination_log, report,
                          (size_t)k < sizeof(report) ? (size_t)k
                                                     : sizeof(report) - 1,
                          false, &why) == 0)
            a->m.report_files++;
        logj(
            a, "action",
            podj(pod, json_pack("{s:s,s:s,s:s}", "action", "hang-report",
                                "path", a->o->termination_log, "result", why)));
    }
    if (s->checkpoint_file[0] != '\0' && first != NULL) {
        const char *why;
        char body[200];
        int k = snprintf(body, sizeof(body), "hang detected; SIGTERM in %s\n",
                         grace);

        if (write_in_root(a->o->proc_root, first->pid, first->start,
                          s->checkpoint_file, body, (size_t)k, false,
                          &why) == 0)
            a->m.checkpoint_file++;
        logj(a, "action",
             podj(pod, json_pack("{s:s,s:s,s:s}", "action", "checkpoint-file",
                                 "path", s->checkpoint_file, "result", why)));
    }
    if (s->checkpoint_signal != 0)
        a->m.checkpoint_signal += (unsigned long long)pod_signal(
            a, pi, s->checkpoint_signal,
            wd_signal_kills_by_default(s->checkpoint_signal),
            "checkpoint-signal");
    pod->state = POD_GRACE;
    pod->deadline_ms = now_ms() + (asked ? s->grace_ms : 0);
    /* The Event last: its POST may take up to its timeout, and the
     * checkpoint request should not wait for the API server. */
    pod_event_or_wait(a, pod, pi, msg);
}

/* Starts the pod's next RAS query; false (after a log line) when no
 * thread could be started. */
static bool
pod_ras_start(struct agent *a, struct wpod *pod)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;
    const char *why_not;

    if (pod_ras_addr(a, pod, &ss, &len, &why_not) != 0)
        return false;
    pod->ras_job =
        wd_ras_job_start((struct sockaddr *)&ss, len, RAS_TIMEOUT_S,
                         RAS_QUERY_MS);
    if (pod->ras_job == NULL)
        logj(a, "ras",
             podj(pod, json_pack("{s:s}", "result",
                                 "not-queried: cannot start a thread")));
    return pod->ras_job != NULL;
}

/* True when an Event for key would be posted now: not a repeat within
 * the dedup window, and a token in the pod's and the node's buckets. Takes
 * nothing. */
static bool
event_would_post(const struct agent *a, const struct wpod *pod,
                 const char *key, long long t)
{
    const struct podkeep *k = &pod->keep;
    double pt = k->ev_tokens_ms == 0
                    ? EV_POD_BURST
                    : k->ev_tokens + (double)(t - k->ev_tokens_ms) /
                                         (double)EV_POD_REFILL_MS;
    double nt = a->ev_tokens_ms == 0
                    ? EV_NODE_BURST
                    : a->ev_tokens + (double)(t - a->ev_tokens_ms) /
                                         (double)EV_NODE_REFILL_MS;

    if (strcmp(k->ev_key, key) == 0 && t - k->ev_ms < EV_DEDUP_MS)
        return false;
    return pt >= 1.0 && nt >= 1.0;
}

static void
pod_hang(struct agent *a, struct wpod *pod, size_t pi)
{
    const struct wd_spec *s = &pod->spec;
    const struct wd_period *pr = &pod->last;
    char msg[1600], period[24];
    const char *why_not = NULL;

    a->m.hangs++;
    pod->hang_v = pod->last_v;
    if (pod->last_v == WD_GPU_LOST)
        node_gpu_lost_event(a, pod);
    duration_text(s->period_ms, period, sizeof(period));
    if (pod->last_v == WD_GPU_LOST)
        snprintf(msg, sizeof(msg),
                 "NCCLHang: GPU %s lost %dx%s (NVML_ERROR_GPU_IS_LOST: "
                 "fallen off the bus, an Xid-class fault; see the node's "
                 "kernel log)",
                 pod->lost_gpus, s->idle_periods, period);
    else if (pod->last_v == WD_SPINNING)
        snprintf(msg, sizeof(msg),
                 "NCCLHang: %d/%d GPUs spinning %dx%s (utilisation %u%%, "
                 "power %u%% of limit, memory %u%%, links still), CPU "
                 "%lld.%01lld cores, no I/O",
                 pr->gpus_spinning, pr->gpus, s->idle_periods, period,
                 pod->spin_util, pod->spin_power, pod->spin_mem,
                 (long long)(pr->cpu_milli / 1000),
                 (long long)(pr->cpu_milli % 1000 / 100));
    else
        snprintf(msg, sizeof(msg),
                 "NCCLHang: %d/%d GPUs idle %dx%s, CPU %lld.%01lld cores, %d "
                 "sockets CLOSE_WAIT, %d queues stuck",
                 pr->gpus, pr->gpus, s->idle_periods, period,
                 (long long)(pr->cpu_milli / 1000),
                 (long long)(pr->cpu_milli % 1000 / 100), pr->close_wait,
                 pr->stuck_queues);
    logj(a, "hang",
         podj(pod,
              json_pack(
                  "{s:s,s:s,s:i,s:i,s:i,s:I,s:i,s:i,s:s,s:b,s:s,s:I}",
                  "message", msg, "cause", wd_verdict_name(pod->last_v),
                  "idle_periods", pod->rule.idle, "gpus", pr->gpus,
                  "gpus_busy", pr->gpus_busy, "cpu_milli",
                  (json_int_t)pr->cpu_milli, "close_wait", pr->close_wait,
                  "stuck_queues", pr->stuck_queues, "action",
                  s->action == WD_ACTION_RESTART ? "restart" : "report",
                  "shared", pod->shared, "shared_why", pod->shared_why,
                  "since_watch_ms",
                  (json_int_t)(now_ms() - pod->watch_ms))));
    /* A lost GPU is a fault NVML reports of the device itself, not the
     * hang signature: the job cannot finish on it. */
    if (pod->last_v == WD_GPU_LOST) {
        pod_finish(a, pod, pi, msg, sizeof(msg), true,
                   "NVML reports the GPU lost");
        return;
    }
    if (pod->shared) {
        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                 "; %s, so the GPU's signals are not this pod's alone",
                 pod->shared_why);
        pod_finish(a, pod, pi, msg, sizeof(msg), false,
                   "the GPU is shared, judged for reports only");
        return;
    }
    /* In report mode RAS only adds to the Event: an Event that would be
     * deduplicated or rate-limited is not worth its queries. */
    if (s->action == WD_ACTION_REPORT &&
        !event_would_post(a, pod, wd_verdict_name(pod->hang_v), now_ms())) {
        pod_finish(a, pod, pi, msg, sizeof(msg), false,
                   "the Event is deduplicated or rate-limited");
        return;
    }
    /* The NVML signature alone is never enough to act: a second signal
     * must agree (RAS counts that do not move across two queries). */
    if (!pod_ras_start(a, pod)) {
        why_not = "no second signal (NCCL RAS not reachable), and the GPU "
                  "signature alone is never acted on";
        pod_finish(a, pod, pi, msg, sizeof(msg), false, why_not);
        return;
    }
    pod->hang_msg = strdup(msg);
    pod->ras_step = 1;
    pod->state = POD_CONFIRM;
    if (pod->hang_msg == NULL) {
        pod_ras_drop(pod);
        pod_finish(a, pod, pi, msg, sizeof(msg), false, "out of memory");
    }
}

/* Pods waiting for RAS: collects each answer, asks again a period after
 * the first, and decides once the second is in. */
static void
ras_due(struct agent *a, long long t)
{
    for (size_t pi = 0; pi < a->n_pods; pi++) {
        struct wpod *pod = &a->pods[pi];
        struct wd_ras_result r;
        char msg[1600], why[300], gap[24];
        int rc;

        if (!pod->used || pod->state != POD_CONFIRM)
            continue;
        if (pod->ras_step == 2) {
            if (t < pod->ras_next_ms)
                continue;
            if (!pod_ras_start(a, pod)) {
                snprintf(msg, sizeof(msg), "%s", pod->hang_msg);
                pod_ras_drop(pod);
                pod_finish(a, pod, pi, msg, sizeof(msg), false,
                           "RAS answered once and could not be asked again");
                continue;
            }
            pod->ras_step = 3;
            continue;
        }
        if (pod->ras_job == NULL || !wd_ras_job_done(pod->ras_job))
            continue;
        rc = wd_ras_job_result(pod->ras_job, &r, why, sizeof(why));
        wd_ras_job_free(pod->ras_job);
        pod->ras_job = NULL;
        logj(a, "ras",
             podj(pod, json_pack("{s:s,s:i,s:s,s:s,s:i,s:i,s:i,s:I}",
                                 "result", rc == 0 ? "answered" : why, "query",
                                 pod->ras_step == 1 ? 1 : 2, "format",
                                 rc != 0 ? "" : r.text ? "text" : "json",
                                 "nccl", rc == 0 ? r.version : "",
                                 "communicators", rc == 0 ? r.communicators : 0,
                                 "missing", rc == 0 ? r.n_missing : 0,
                                 "behind", rc == 0 ? r.n_behind : 0, "counts",
                                 (json_int_t)(rc == 0 ? r.n_counts : 0))));
        snprintf(msg, sizeof(msg), "%s", pod->hang_msg);
        if (rc != 0) {
            snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                     "; RAS: %s", why);
            pod_ras_drop(pod);
            pod_finish(a, pod, pi, msg, sizeof(msg), false,
                       "no second signal (NCCL RAS did not answer), and the "
                       "GPU signature alone is never acted on");
            continue;
        }
        if (pod->ras_step == 1) {
            pod->ras1 = malloc(sizeof(*pod->ras1));
            if (pod->ras1 == NULL) {
                pod_ras_drop(pod);
                pod_finish(a, pod, pi, msg, sizeof(msg), false,
                           "out of memory");
                continue;
            }
            *pod->ras1 = r;
            pod->ras_step = 2;
            pod->ras_next_ms = t + pod->spec.period_ms;
            continue;
        }
        ras_text(a, &r, msg, sizeof(msg));
        duration_text(pod->spec.period_ms, gap, sizeof(gap));
        switch (wd_ras_compare(pod->ras1, &r)) {
        case WD_RAS_STILL:
            snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                     "; RAS: no rank issued a collective in %s", gap);
            pod_ras_drop(pod);
            /* Counts that did not move are a stall only where the ranks
             * disagree (one is behind or missing: a collective entered by
             * some and never completed). Equal counts that do not move
             * are also what a pause between collectives looks like (a CPU
             * phase, evaluation, a checkpoint elsewhere). */
            if (ras_named_pod_works(a, &r, why, sizeof(why)))
                pod_finish(a, pod, pi, msg, sizeof(msg), false, why);
            else if (r.n_behind > 0 || r.n_missing > 0)
                pod_finish(a, pod, pi, msg, sizeof(msg), true,
                           "RAS: the counts of issued collectives did not "
                           "move, and a rank is behind or missing");
            else
                pod_finish(a, pod, pi, msg, sizeof(msg), false,
                           "RAS: no rank moved, but none is behind or "
                           "missing either, which a pause between "
                           "collectives looks like too");
            break;
        case WD_RAS_MOVED:
            snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg),
                     "; RAS: collectives were issued within %s, so the job "
                     "still progresses",
                     gap);
            pod_ras_drop(pod);
            pod_finish(a, pod, pi, msg, sizeof(msg), false,
                       "RAS shows collectives issued between two queries");
            break;
        case WD_RAS_NO_COUNTS:
            pod_ras_drop(pod);
            pod_finish(a, pod, pi, msg, sizeof(msg), false,
                       r.text ? "RAS answered in the text format of NCCL "
                                "before 2.28.7, which shows no counts where "
                                "all ranks agree: nothing to compare"
                              : "RAS answered with no collective counts: "
                                "nothing to compare");
            break;
        }
    }
}

/* Moves pods in the restart sequence along when their deadline passed. */
static void
actions_due(struct agent *a, long long t)
{
    for (size_t pi = 0; pi < a->n_pods; pi++) {
        struct wpod *pod = &a->pods[pi];

        /* The SIGTERM waits for a flight-recorder dump (FR_WAIT_MS). */
        if (!pod->used || t < pod->deadline_ms || pod->fr_pending)
            continue;
        if (pod->state == POD_GRACE) {
            a->m.sigterm += (unsigned long long)pod_signal(a, pi, SIGTERM,
                                                           false, "sigterm");
            pod->state = POD_TERM;
            pod->deadline_ms = t + pod->spec.term_ms;
        } else if (pod->state == POD_TERM) {
            a->m.sigkill += (unsigned long long)pod_signal(a, pi, SIGKILL,
                                                           false, "sigkill");
            pod->state = POD_DONE;
        }
    }
}

/* ---- /metrics -------------------------------------------------------- */

static void
label(char *out, size_t n, const char *s)
{
    size_t o = 0;

    for (; *s != '\0' && o + 3 < n; s++) {
        if (*s == '"' || *s == '\\')
            out[o++] = '\\';
        out[o++] = *s == '\n' ? ' ' : *s;
    }
    out[o] = '\0';
}

static size_t
metrics_text(struct agent *a, char *buf, size_t n)
{
    size_t u = 0, watched = 0;
    const struct metrics *m = &a->m;

#define OUT(...)                                                               \
    do {                                                                       \
        int w_ = snprintf(buf + u, n - u, __VA_ARGS__);                        \
        if (w_ < 0 || (size_t)w_ >= n - u)                                     \
            return u;                                                          \
        u += (size_t)w_;                                                       \
    } while (0)
    for (size_t i = 0; i < a->n_pods; i++)
        watched += a->pods[i].used;
    OUT("# HELP ncclguard_watchdog_nvml_up Whether NVML answered the last "
        "read.\n# TYPE ncclguard_watchdog_nvml_up gauge\n"
        "ncclguard_watchdog_nvml_up %d\n",
        a->gpus->ok ? 1 : 0);
    OUT("# HELP ncclguard_watchdog_watched_pods Pods with opted-in "
        "processes.\n# TYPE ncclguard_watchdog_watched_pods gauge\n"
        "ncclguard_watchdog_watched_pods %zu\n",
        watched);
    OUT("# HELP ncclguard_watchdog_watched_processes Entries of the table "
        "of watched processes (live ones only).\n"
        "# TYPE ncclguard_watchdog_watched_processes gauge\n"
        "ncclguard_watchdog_watched_processes %zu\n",
        a->n_procs);
    OUT("# HELP ncclguard_watchdog_idle_periods Consecutive idle periods "
        "per pod.\n# TYPE ncclguard_watchdog_idle_periods gauge\n");
    for (size_t i = 0; i < a->n_pods; i++) {
        const struct wpod *p = &a->pods[i];
        char ns[140], name[520];

        if (!p->used)
            continue;
        label(ns, sizeof(ns), p->ns);
        label(name, sizeof(name), p->name);
        OUT("ncclguard_watchdog_idle_periods{namespace=\"%s\",pod=\"%s\","
            "pod_uid=\"%s\"} %d\n",
            ns, name, p->uid, p->rule.idle);
    }
    OUT("# HELP ncclguard_watchdog_shm_bytes /dev/shm of each watched pod: "
        "used and size (the tmpfs, as the kubelet sized it).\n"
        "# TYPE ncclguard_watchdog_shm_bytes gauge\n");
    for (size_t i = 0; i < a->n_pods; i++) {
        const struct wpod *p = &a->pods[i];
        char ns[140], name[520];

        if (!p->used || !p->shm_known)
            continue;
        label(ns, sizeof(ns), p->ns);
        label(name, sizeof(name), p->name);
        OUT("ncclguard_watchdog_shm_bytes{namespace=\"%s\",pod=\"%s\","
            "pod_uid=\"%s\",kind=\"used\"} %llu\n"
            "ncclguard_watchdog_shm_bytes{namespace=\"%s\",pod=\"%s\","
            "pod_uid=\"%s\",kind=\"size\"} %llu\n",
            ns, name, p->uid, (unsigned long long)p->shm_used, ns, name, p->uid,
            (unsigned long long)p->shm_size);
    }
    OUT("# HELP ncclguard_watchdog_shm_orphan_segments NCCL segments in a "
        "pod's /dev/shm that no live process of the pod maps.\n"
        "# TYPE ncclguard_watchdog_shm_orphan_segments gauge\n");
    for (size_t i = 0; i < a->n_pods; i++) {
        const struct wpod *p = &a->pods[i];
        char ns[140], name[520];

        if (!p->used || !p->shm_known)
            continue;
        label(ns, sizeof(ns), p->ns);
        label(name, sizeof(name), p->name);
        OUT("ncclguard_watchdog_shm_orphan_segments{namespace=\"%s\","
            "pod=\"%s\",pod_uid=\"%s\"} %d\n",
            ns, name, p->uid, p->shm_orphans);
    }
    OUT("# HELP ncclguard_watchdog_hangs_total Hangs detected.\n"
        "# TYPE ncclguard_watchdog_hangs_total counter\n"
        "ncclguard_watchdog_hangs_total %llu\n",
        m->hangs);
    OUT("# HELP ncclguard_watchdog_actions_total Actions taken, by kind.\n"
        "# TYPE ncclguard_watchdog_actions_total counter\n"
        "ncclguard_watchdog_actions_total{action=\"checkpoint_signal\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"checkpoint_file\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"sigterm\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"sigkill\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"event\"} %llu\n"
        "ncclguard_watchdog_actions_total{action=\"hang_report\"} %llu\n",
        m->checkpoint_signal, m->checkpoint_file, m->sigterm, m->sigkill,
        m->events, m->report_files);
    OUT("# HELP ncclguard_watchdog_event_errors_total Event POSTs that "
        "failed.\n# TYPE ncclguard_watchdog_event_errors_total counter\n"
        "ncclguard_watchdog_event_errors_total %llu\n",
        m->event_errors);
    OUT("# HELP ncclguard_watchdog_events_suppressed_total Events not "
        "posted: deduplicated or rate-limited.\n"
        "# TYPE ncclguard_watchdog_events_suppressed_total counter\n"
        "ncclguard_watchdog_events_suppressed_total %llu\n",
        m->events_suppressed);
    OUT("# HELP ncclguard_watchdog_log_lines_dropped_total Log lines not "
        "written: a pod's processes came and went past its log budget.\n"
        "# TYPE ncclguard_watchdog_log_lines_dropped_total counter\n"
        "ncclguard_watchdog_log_lines_dropped_total %llu\n",
        m->log_dropped);
    OUT("# HELP ncclguard_watchdog_pid_reused_total Signals not sent because "
        "the PID now names another process.\n"
        "# TYPE ncclguard_watchdog_pid_reused_total counter\n"
        "ncclguard_watchdog_pid_reused_total %llu\n",
        m->pid_reused);
#undef OUT
    return u;
}

static int
metrics_listen(struct agent *a)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int one = 1;

    a->listen_fd = -1;
    if (a->o->metrics_addr == NULL)
        return 0;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)a->o->metrics_port);
    if (inet_pton(AF_INET, a->o->metrics_addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "ncclguard-watchdog: bad --metrics-addr %s\n",
                a->o->metrics_addr);
        return -1;
    }
    a->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (a->listen_fd < 0)
        return -1;
    setsockopt(a->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(a->listen_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(a->listen_fd, 2 * WD_MSERVER_MAX_CONN) != 0 ||
        getsockname(a->listen_fd, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "ncclguard-watchdog: cannot listen on %s:%d: %s\n",
                a->o->metrics_addr, a->o->metrics_port, strerror(errno));
        return -1;
    }
    if (a->o->port_file != NULL) {
        FILE *f = fopen(a->o->port_file, "w");

        if (f != NULL) {
            fprintf(f, "%d\n", ntohs(sa.sin_port));
            fclose(f);
        }
    }
    return 0;
}

/* ---- the loop --------------------------------------------------------- */

static void
nvml_sample(struct agent *a, long long t)
{
    bool ok = wd_nvml_read(a->nvml, a->gpus, t, a->o->nvml_retry_ms);

    if (ok && !a->nvml_was_up)
        logj(a, "nvml",
             json_pack("{s:s,s:i}", "state", "up", "gpus", (int)a->gpus->n));
    if (!ok && (a->nvml_was_up || !a->nvml_logged_down)) {
        logj(a, "nvml",
             json_pack("{s:s,s:s,s:s}", "state", "down", "why", a->gpus->why,
                       "effect",
                       "no pod is judged until NVML answers; "
                       "retrying"));
        a->nvml_logged_down = true;
    }
    a->nvml_was_up = ok;
}

static void
agent_release(struct agent *a)
{
    for (size_t i = 0; i < a->n_pods; i++) {
        free(a->pods[i].q);
        free(a->pods[i].ev_msg);
        free(a->pods[i].evw_msg);
        pod_ras_drop(&a->pods[i]);
    }
    free(a->pods);
    free(a->kept);
    for (size_t i = 0; i < a->n_procs; i++) {
        free(a->procs[i].fr_pipe);
        free(a->procs[i].fr_dump);
        free(a->procs[i].fr_dump_alt);
    }
    free(a->procs);
    free(a->pidx);
    free(a->seen.v);
    free(a->seen_next.v);
    free(a->tcp);
    free(a->inodes);
    free(a->envbuf);
    free(a->tcpbuf);
    free(a->gpus);
    wd_nvml_free(a->nvml);
    wd_mserver_stop(a->ms);
    if (a->ms == NULL && a->listen_fd >= 0)
        close(a->listen_fd);
    free(a->mtext);
}

int
wd_agent_run(const struct wd_options *o)
{
    struct sigaction sa;
    struct agent a;
    long long next_scan, t;
    int rc = 1;

    memset(&a, 0, sizeof(a));
    a.o = o;
    a.listen_fd = -1;
    a.t0_ms = now_ms();
    a.clk_tck = sysconf(_SC_CLK_TCK);
    if (a.clk_tck <= 0)
        a.clk_tck = 100;
    a.ev.api_server = o->api_server;
    a.ev.token_file = o->token_file;
    a.ev.ca_file = o->ca_file;
    a.ev.timeout_ms = 3000;
    a.nvml = wd_nvml_new(o->nvml_path);
    a.gpus = calloc(1, sizeof(*a.gpus));
    a.tcp = calloc(MAX_TCP_ROWS, sizeof(*a.tcp));
    a.inodes = calloc(MAX_SOCKETS, sizeof(*a.inodes));
    a.envbuf = malloc(ENVIRON_MAX);
    a.tcpbuf = malloc(TCP_TEXT_MAX);
    if (!a.nvml || !a.gpus || !a.tcp || !a.inodes || !a.envbuf || !a.tcpbuf) {
        fprintf(stderr, "ncclguard-watchdog: out of memory\n");
        goto done;
    }
    a.mtext = malloc(METRICS_MAX);
    if (a.mtext == NULL || metrics_listen(&a) != 0)
        goto done;
    if (a.listen_fd >= 0) {
        a.ms = wd_mserver_start(a.listen_fd);
        if (a.ms == NULL) {
            a.listen_fd = -1;
            fprintf(stderr, "ncclguard-watchdog: cannot start the metrics "
                            "thread\n");
            goto done;
        }
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    logj(&a, "start",
         json_pack("{s:s,s:s,s:I,s:s}", "proc", o->proc_root, "nvml",
                   o->nvml_path, "scan_ms", (json_int_t)o->scan_ms, "events",
                   o->api_server && o->api_server[0] ? o->api_server : "off"));
    nvml_sample(&a, now_ms());
    next_scan = now_ms();
    while (!stop_requested) {
        long long wake;
        bool due = false;

        t = now_ms();
        if (o->run_ms > 0 && t - a.t0_ms >= o->run_ms)
            break;
        if (t >= next_scan) {
            bool any = false, fresh = false;

            scan(&a);
            next_scan = t + o->scan_ms;
            /* NVML's sample buffer holds seconds, not a period: read it
             * on every walk while pods are watched, and give new pods
             * their baseline. */
            for (size_t i = 0; i < a.n_pods; i++) {
                any |= a.pods[i].used;
                fresh |= a.pods[i].used && !a.pods[i].base_set;
            }
            if (any)
                nvml_sample(&a, now_ms());
            if (fresh)
                for (size_t i = 0; i < a.n_pods; i++)
                    if (a.pods[i].used && !a.pods[i].base_set)
                        pod_base(&a, &a.pods[i]);
        }
        t = now_ms();
        for (size_t i = 0; i < a.n_pods && !due; i++)
            due = a.pods[i].used && a.pods[i].next_ms <= t;
        if (due) {
            nvml_sample(&a, t);
            for (size_t i = 0; i < a.n_pods; i++)
                if (a.pods[i].used && a.pods[i].next_ms <= t)
                    pod_sample(&a, i, t);
        }
        ras_due(&a, now_ms());
        fr_due(&a, now_ms());
        ident_due(&a, now_ms());
        actions_due(&a, now_ms());
        reap_children();
        /* Sleep until the next period, deadline or scan. */
        wake = next_scan;
        for (size_t i = 0; i < a.n_pods; i++) {
            const struct wpod *p = &a.pods[i];

            if (!p->used)
                continue;
            if (p->next_ms < wake)
                wake = p->next_ms;
            if ((p->state == POD_GRACE || p->state == POD_TERM) &&
                p->deadline_ms < wake)
                wake = p->deadline_ms;
            if (p->fr_pending && now_ms() + 100 < wake)
                wake = now_ms() + 100; /* look for the dumps */
            if (p->state == POD_CONFIRM && now_ms() + 20 < wake)
                wake = now_ms() + 20; /* look for RAS's answer */
            if (p->evw_msg != NULL && now_ms() + 200 < wake)
                wake = now_ms() + 200; /* the pod list, again */
        }
        if (o->run_ms > 0 && a.t0_ms + o->run_ms < wake)
            wake = a.t0_ms + o->run_ms;
        t = now_ms();
        if (a.ms != NULL) {
            wd_mserver_publish(a.ms, a.mtext,
                               metrics_text(&a, a.mtext, METRICS_MAX));
            wd_mserver_tick(a.ms, t);
        }
        /* /metrics has its own thread: the loop only sleeps here. */
        (void)poll(NULL, 0, wake > t ? (int)(wake - t) : 0);
    }
    logj(&a, "stop", json_object());
    rc = 0;
done:
    agent_release(&a);
    return rc;
}
