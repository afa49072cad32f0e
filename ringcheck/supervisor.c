/* Forks the ring check's workers, reads their events and output, enforces
 * the deadlines and stops stuck workers. */
#include "ringcheck/supervisor.h"

#include "ringcheck/netcheck.h"
#include "ringcheck/proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NPHASES 7

struct sv_worker {
    pid_t pid;
    int ev, log, cmd; /* our ends; -1 when closed */
    struct proto_buf evb;
    struct proto_buf logb;
    int first_rank, nlocal;
    int phase_cur;  /* last phase begun; -1 */
    int phase_done; /* last phase ended; -1 */
    int finished;   /* sent X */
    int aborted;    /* sent A */
    double abort_s; /* from the abort request to A */
    int escalated;  /* still alive when SIGTERM went out */
    int reaped;
    int unreaped;   /* given up on after SIGKILL */
    char state[96]; /* its /proc state then */
    int status;
    int stuck[WORKER_MAX_GPUS]; /* S events, by local rank */
    char stuck_what[WORKER_MAX_GPUS][64];
    int stuck_dev; /* devices worker: the GPU it waited for; -1 */
    char stuck_dev_what[64];
};

/* Everything one sv_run knows; passed to each step, never global. */
struct sv_state {
    const struct sv_spec *s;
    struct rc_run *out;
    struct sv_worker w[WORKER_MAX_GPUS];
    int nw;
    double phase_start[NPHASES];
    int stop_stage; /* 0 running, 1 abort asked, 2 SIGTERM, 3 SIGKILL,
                       4 given up */
    double stop_at;
    double abort_grace;
    double hard; /* give up on unreaped workers by then */
    int failed;
    char logdir[200]; /* NCCL_DEBUG_FILE folder of ring runs; "" none */
};

static volatile sig_atomic_t interrupted;

static void
on_interrupt(int sig)
{
    interrupted = sig;
}

double
sv_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double
sv_abort_grace(int ncomms)
{
    return SV_ABORT_BASE_S + SV_ABORT_PER_COMM_S * (ncomms > 0 ? ncomms : 1);
}

void
sv_init(void)
{
    struct sigaction sa;
    sigset_t set;

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
}

int
sv_interrupted(void)
{
    return interrupted != 0;
}

static void
ranks_append(char *buf, size_t len, int rank)
{
    size_t n = strlen(buf);

    if (n < len)
        snprintf(buf + n, len - n, "%s%d", n > 0 ? "," : "", rank);
}

static void
worker_ranks(const struct sv_worker *w, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int l = 0; l < w->nlocal; l++)
        ranks_append(buf, len, w->first_rank + l);
}

/* Appends to out->what, cut to fit. */
static void what_add(struct rc_run *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
what_add(struct rc_run *o, const char *fmt, ...)
{
    size_t n = strlen(o->what);
    va_list ap;

    if (n + 1 >= sizeof(o->what))
        return;
    va_start(ap, fmt);
    vsnprintf(o->what + n, sizeof(o->what) - n, fmt, ap);
    va_end(ap);
}

/* Records the run's failure; the first one wins. */
static void sv_fail(struct sv_state *st, int code, int phase, const char *ranks,
                    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
sv_fail(struct sv_state *st, int code, int phase, const char *ranks,
        const char *fmt, ...)
{
    va_list ap;

    if (st->failed)
        return;
    st->failed = 1;
    st->out->code = code;
    st->out->phase = phase;
    snprintf(st->out->ranks, sizeof(st->out->ranks), "%s", ranks);
    va_start(ap, fmt);
    vsnprintf(st->out->what, sizeof(st->out->what), fmt, ap);
    va_end(ap);
}

static void
sv_signal_all(struct sv_state *st, int sig)
{
    for (int i = 0; i < st->nw; i++)
        if (!st->w[i].reaped && st->w[i].pid > 0) {
            kill(st->w[i].pid, sig);
            if (sig == SIGTERM)
                st->w[i].escalated = 1;
        }
}

static void
sv_stop_begin(struct sv_state *st)
{
    if (st->stop_stage != 0)
        return;
    st->stop_stage = 1;
    st->stop_at = sv_now();
    sv_signal_all(st, SIGUSR1);
}

/* The state letter of /proc/PID/stat and its meaning ("D (disk sleep)"). */
static void
proc_state(pid_t pid, char *buf, size_t len)
{
    char path[64], stat[512];
    const char *rp, *word;
    FILE *f;
    size_t n;

    snprintf(buf, len, "unknown");
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "re");
    if (f == NULL)
        return;
    n = fread(stat, 1, sizeof(stat) - 1, f);
    fclose(f);
    stat[n] = '\0';
    /* The command name may hold ") "; the state follows the last ')'. */
    rp = strrchr(stat, ')');
    if (rp == NULL || rp[1] != ' ' || rp[2] == '\0')
        return;
    switch (rp[2]) {
    case 'D':
        word = "uninterruptible sleep, usually in a driver";
        break;
    case 'Z':
        word = "zombie, its exit not collectable";
        break;
    case 'T':
        word = "stopped";
        break;
    case 't':
        word = "tracing stop";
        break;
    case 'R':
        word = "running";
        break;
    case 'S':
        word = "sleeping";
        break;
    default:
        word = "other";
        break;
    }
    snprintf(buf, len, "%c (%s)", rp[2], word);
}

static int
sv_dev_of_rank(const struct sv_state *st, int rank)
{
    rank -= st->s->rank_offset;
    return rank >= 0 && rank < st->s->ndev ? st->s->dev[rank] : -1;
}

/* After SIGKILL and SV_KILL_WAIT_S: whoever is still not reaped cannot be
 * ended from here. Note their state and leave them. */
static void
sv_give_up(struct sv_state *st)
{
    st->stop_stage = 4;
    for (int i = 0; i < st->nw; i++) {
        struct sv_worker *w = &st->w[i];

        if (w->reaped || w->pid <= 0)
            continue;
        w->unreaped = 1;
        st->out->unreaped++;
        proc_state(w->pid, w->state, sizeof(w->state));
    }
}

/* Names the workers that could not be reaped, and where to look. */
static void
sv_describe_unreaped(struct sv_state *st)
{
    struct rc_run *o = st->out;

    for (int i = 0; i < st->nw; i++) {
        const struct sv_worker *w = &st->w[i];
        char who[96];

        if (!w->unreaped)
            continue;
        if (st->s->kind != SV_RING)
            snprintf(who, sizeof(who), "the %s worker (pid %d)",
                     st->s->kind == SV_PREFLIGHT ? "preflight" : "devices",
                     (int)w->pid);
        else if (w->nlocal == 1)
            snprintf(who, sizeof(who), "rank %d (GPU %d, pid %d)",
                     w->first_rank, sv_dev_of_rank(st, w->first_rank),
                     (int)w->pid);
        else
            snprintf(who, sizeof(who), "ranks %d-%d (one process, pid %d)",
                     w->first_rank, w->first_rank + w->nlocal - 1, (int)w->pid);
        what_add(o, "; %s was sent SIGKILL but is not reaped (state %s)", who,
                 w->state);
    }
    if (o->unreaped > 0)
        what_add(o, "; a process that SIGKILL cannot end is stuck in the "
                    "kernel, usually in the GPU driver: look for Xid errors "
                    "in the node's kernel log (dmesg)");
}

static void
sv_stop_step(struct sv_state *st, double now)
{
    if (st->stop_stage == 1 &&
        (now >= st->stop_at + st->abort_grace ||
         now >= st->hard - SV_TERM_GRACE_S - SV_KILL_WAIT_S)) {
        st->stop_stage = 2;
        st->stop_at = now;
        sv_signal_all(st, SIGTERM);
    } else if (st->stop_stage == 2 && (now >= st->stop_at + SV_TERM_GRACE_S ||
                                       now >= st->hard - SV_KILL_WAIT_S)) {
        st->stop_stage = 3;
        st->stop_at = now;
        sv_signal_all(st, SIGKILL);
    } else if (st->stop_stage == 3 &&
               (now >= st->stop_at + SV_KILL_WAIT_S || now >= st->hard)) {
        sv_give_up(st);
    }
}

/* The lowest phase some live worker has not finished. */
static int
sv_current_phase(const struct sv_state *st)
{
    int p = NPHASES;

    for (int i = 0; i < st->nw; i++) {
        const struct sv_worker *w = &st->w[i];
        int cur =
            w->phase_cur > w->phase_done ? w->phase_cur : w->phase_done + 1;

        if (!w->finished && cur < p)
            p = cur;
    }
    if (p >= NPHASES) {
        /* Not started yet: the kind's first phase. */
        p = st->s->kind == SV_PREFLIGHT ? 0 : st->s->kind == SV_DEVICES ? 1 : 3;
    }
    return p;
}

static void
sv_unfinished_ranks(const struct sv_state *st, int phase, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < st->nw; i++)
        if (st->w[i].phase_done < phase && !st->w[i].finished)
            for (int l = 0; l < st->w[i].nlocal; l++)
                ranks_append(buf, len, st->w[i].first_rank + l);
}

/* How long before the check's deadline the stop must begin so that its
 * last step ends by the deadline + SV_OVERRUN_S. */
static double
sv_stop_lead(const struct sv_state *st)
{
    double need = st->abort_grace + SV_TERM_GRACE_S + SV_KILL_WAIT_S;

    return need > SV_OVERRUN_S ? need - SV_OVERRUN_S : 0;
}

static void
sv_check_deadlines(struct sv_state *st, double now)
{
    const struct sv_spec *s = st->s;
    char ranks[160];

    if (st->stop_stage != 0)
        return;
    if (interrupted) {
        int p = sv_current_phase(st);

        st->out->interrupted = 1;
        sv_unfinished_ranks(st, p, ranks, sizeof(ranks));
        sv_fail(st, RC_EXIT_TIMEOUT, p, ranks,
                "stopped by signal %d (%s) during phase %d (%s)",
                (int)interrupted,
                interrupted == SIGTERM ? "SIGTERM: the pod is being deleted"
                                       : "SIGINT",
                p, report_phase_name(p));
        sv_stop_begin(st);
        return;
    }
    if (now >= s->deadline - sv_stop_lead(st)) {
        int p = sv_current_phase(st);

        sv_unfinished_ranks(st, p, ranks, sizeof(ranks));
        st->out->overall_timeout = 1;
        sv_fail(st, RC_EXIT_TIMEOUT, p, ranks,
                "the check's deadline (--timeout) passed during phase %d "
                "(%s)",
                p, report_phase_name(p));
        sv_stop_begin(st);
        return;
    }
    for (int p = 0; p < NPHASES; p++) {
        int open = 0;

        if (st->phase_start[p] < 0 ||
            now < st->phase_start[p] + s->phase_timeout_s)
            continue;
        for (int i = 0; i < st->nw; i++)
            open |= st->w[i].phase_done < p && !st->w[i].finished;
        if (!open)
            continue;
        sv_unfinished_ranks(st, p, ranks, sizeof(ranks));
        sv_fail(st, RC_EXIT_TIMEOUT, p, ranks,
                "phase %d (%s) did not finish within %.1f s", p,
                report_phase_name(p), s->phase_timeout_s);
        sv_stop_begin(st);
        return;
    }
}

static struct rc_row *
sv_row(struct rc_run *o, const char *op, const char *type, size_t bytes,
       int timed)
{
    for (int i = 0; i < o->nrows; i++)
        if (strcmp(o->rows[i].op, op) == 0 && o->rows[i].bytes == bytes &&
            o->rows[i].timed == timed)
            return &o->rows[i];
    if (o->nrows == RC_MAX_ROWS)
        return NULL;
    memset(&o->rows[o->nrows], 0, sizeof(o->rows[0]));
    snprintf(o->rows[o->nrows].op, sizeof(o->rows[0].op), "%s", op);
    snprintf(o->rows[o->nrows].type, sizeof(o->rows[0].type), "%s", type);
    o->rows[o->nrows].bytes = bytes;
    o->rows[o->nrows].timed = timed;
    o->rows[o->nrows].bad_rank = -1;
    o->rows[o->nrows].bad_off = -1;
    return &o->rows[o->nrows++];
}

/* Adds one rank's wrong count to a row; the lowest bad rank is kept. */
static void
row_wrong(struct rc_row *row, int rank, long wrong, long long first)
{
    if (wrong <= 0)
        return;
    row->wrong += wrong;
    if (rank >= 0 && rank < 64)
        row->wrong_ranks |= 1ULL << rank;
    if (row->bad_rank < 0 || rank < row->bad_rank) {
        row->bad_rank = rank;
        row->bad_off = first;
    }
}

/* Adds one rank's time to a row: the row shows the average over the
 * ranks, as nccl-tests' default (-m average, "Allreduce(args, &deltaSec,
 * average)" in src/common.cu). */
static void
row_time(struct rc_row *row, double us)
{
    row->time_sum += us;
    row->ntimes++;
    row->time_us = row->time_sum / row->ntimes;
}

static void
sv_forward_id(struct sv_state *st, const struct sv_worker *from,
              const struct proto_msg *m)
{
    char line[PROTO_LINE_MAX];
    int n = proto_encode(m, line, sizeof(line));

    if (n < 0)
        return;
    for (int i = 0; i < st->nw; i++) {
        if (&st->w[i] == from || st->w[i].cmd < 0)
            continue;
        /* The pipe is empty and the line is far below PIPE_BUF, so one
         * write is atomic. A failed write means that worker is gone: its
         * exit is judged when it is reaped, so nothing to do here. */
        if (write(st->w[i].cmd, line, (size_t)n) != n)
            continue;
    }
}

static void
sv_event(struct sv_state *st, struct sv_worker *w, const char *line)
{
    struct rc_run *o = st->out;
    struct proto_msg m;
    char ranks[160];
    struct rc_row *row;
    int a, b;

    if (proto_parse(line, &m) != 0) {
        report_log("%swarning: a worker sent a malformed event: %.200s",
                   st->s->label, line);
        return;
    }
    switch (m.kind) {
    case 'P':
        a = m.u.phase.phase;
        if (a < 0 || a >= NPHASES)
            break;
        if (m.u.phase.begin) {
            w->phase_cur = a;
            if (st->phase_start[a] < 0)
                st->phase_start[a] = sv_now();
        } else {
            w->phase_done = a;
            if (st->phase_start[a] >= 0 &&
                sv_now() - st->phase_start[a] > o->phase_s[a])
                o->phase_s[a] = sv_now() - st->phase_start[a];
        }
        break;
    case 'V':
        o->nccl_version = m.u.versions.nccl;
        o->cuda_runtime = m.u.versions.runtime;
        o->cuda_driver = m.u.versions.driver;
        break;
    case 'N':
        o->ngpus = m.u.ndev.count;
        break;
    case 'G':
        a = m.u.gpu.dev;
        if (a < 0 || a >= WORKER_MAX_GPUS)
            break;
        o->gpu[a].index = a;
        o->gpu[a].total_mib = m.u.gpu.total_mib;
        snprintf(o->gpu[a].busid, sizeof(o->gpu[a].busid), "%s", m.u.gpu.busid);
        snprintf(o->gpu[a].uuid, sizeof(o->gpu[a].uuid), "%s", m.u.gpu.uuid);
        snprintf(o->gpu[a].name, sizeof(o->gpu[a].name), "%s", m.u.gpu.name);
        break;
    case 'C':
        if (m.u.cc.dev >= 0 && m.u.cc.dev < WORKER_MAX_GPUS) {
            o->gpu[m.u.cc.dev].cc_major = m.u.cc.major;
            o->gpu[m.u.cc.dev].cc_minor = m.u.cc.minor;
        }
        break;
    case 'F':
        if (m.u.free.dev >= 0 && m.u.free.dev < WORKER_MAX_GPUS)
            o->gpu[m.u.free.dev].free_mib = m.u.free.free_mib;
        break;
    case 'T':
        a = m.u.topo.dev;
        b = m.u.topo.peer;
        if (a < 0 || b < 0 || a >= WORKER_MAX_GPUS || b >= WORKER_MAX_GPUS)
            break;
        o->access[a][b] = (signed char)m.u.topo.access;
        o->perf[a][b] =
            (signed char)(m.u.topo.perf > 100 ? 100 : m.u.topo.perf);
        o->atomics[a][b] = (signed char)m.u.topo.atomics;
        o->topo_done = 1;
        break;
    case 'U': {
        unsigned char id[PROTO_UID_HEX / 2];
        size_t n = strlen(m.u.uid.hex) / 2;

        for (size_t i = 0; i < n && i < sizeof(id); i++) {
            unsigned v = 0;

            if (sscanf(m.u.uid.hex + 2 * i, "%2x", &v) != 1)
                v = 0;
            id[i] = (unsigned char)v;
        }
        if (n > sizeof(id) ||
            netcheck_id_addr(id, n, o->id_addr, sizeof(o->id_addr)) != 0)
            o->id_addr[0] = '\0';
    }
        sv_forward_id(st, w, &m);
        if (st->s->on_id != NULL) {
            char idline[PROTO_LINE_MAX];
            int n = proto_encode(&m, idline, sizeof(idline));

            if (n > 0) {
                idline[n - 1] = '\0'; /* the '\n' */
                st->s->on_id(st->s->on_id_ctx, idline);
            }
        }
        break;
    case 'R':
        row = sv_row(o, m.u.result.op, m.u.result.type, m.u.result.bytes, 0);
        if (row == NULL)
            break;
        row->count = m.u.result.count;
        row->root = m.u.result.root;
        row_time(row, m.u.result.time_us);
        row_wrong(row, m.u.result.rank, m.u.result.wrong, m.u.result.first);
        break;
    case 'B':
        row = sv_row(o, "allreduce", "float", m.u.bw.bytes, 1);
        if (row == NULL)
            break;
        row->count = m.u.bw.bytes / 4;
        row->root = -1;
        row_time(row, m.u.bw.time_us);
        row_wrong(row, m.u.bw.rank, m.u.bw.wrong, m.u.bw.first);
        break;
    case 'S':
        a = m.u.stuck.rank;
        if (a < 0) {
            w->stuck_dev = m.u.stuck.dev;
            snprintf(w->stuck_dev_what, sizeof(w->stuck_dev_what), "%s",
                     m.u.stuck.what);
        } else if (a >= w->first_rank && a < w->first_rank + w->nlocal) {
            w->stuck[a - w->first_rank] = 1;
            snprintf(w->stuck_what[a - w->first_rank], sizeof(w->stuck_what[0]),
                     "%s", m.u.stuck.what);
        }
        break;
    case 'A':
        w->aborted = 1;
        if (st->stop_stage != 0)
            w->abort_s = sv_now() - st->stop_at;
        break;
    case 'E':
        if (m.u.error.ranks[0] != '\0')
            snprintf(ranks, sizeof(ranks), "%s", m.u.error.ranks);
        else
            worker_ranks(w, ranks, sizeof(ranks));
        sv_fail(st, m.u.error.code, m.u.error.phase, ranks, "%s",
                m.u.error.msg);
        sv_stop_begin(st);
        break;
    case 'I':
        report_log("%s%s", st->s->label, m.u.info.msg);
        break;
    case 'X':
        w->finished = 1;
        break;
    default:
        break;
    }
}

static void
sv_worker_name(const struct sv_state *st, const struct sv_worker *w, char *buf,
               size_t len)
{
    if (st->s->kind == SV_PREFLIGHT)
        snprintf(buf, len, "preflight");
    else if (st->s->kind == SV_DEVICES)
        snprintf(buf, len, "devices");
    else if (w->nlocal > 1)
        snprintf(buf, len, "ranks %d-%d", w->first_rank,
                 w->first_rank + w->nlocal - 1);
    else
        snprintf(buf, len, "rank %d", w->first_rank);
}

static void
sv_log_line(struct sv_state *st, const struct sv_worker *w, const char *line)
{
    char name[32];
    const char *warn = strstr(line, "NCCL WARN");

    sv_worker_name(st, w, name, sizeof(name));
    report_log("%s[%s] %s", st->s->label, name, line);
    if (warn != NULL && st->out->warn[0] == '\0')
        snprintf(st->out->warn, sizeof(st->out->warn), "%s", warn);
}

static void
sv_drain(struct sv_state *st, struct sv_worker *w, int which)
{
    char line[PROTO_LINE_MAX];
    int *fd = which == 0 ? &w->ev : &w->log;
    struct proto_buf *b = which == 0 ? &w->evb : &w->logb;
    int r = proto_read(*fd, b);

    while (proto_next(b, r <= 0, line, sizeof(line)))
        if (which == 0)
            sv_event(st, w, line);
        else
            sv_log_line(st, w, line);
    if (r <= 0) {
        close(*fd);
        *fd = -1;
    }
}

static const char *
signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGABRT:
        return "SIGABRT";
    case SIGBUS:
        return "SIGBUS";
    case SIGILL:
        return "SIGILL";
    case SIGFPE:
        return "SIGFPE";
    case SIGKILL:
        return "SIGKILL";
    case SIGTERM:
        return "SIGTERM";
    default:
        return "a signal";
    }
}

static void
sv_reaped(struct sv_state *st, struct sv_worker *w)
{
    char ranks[160], name[32];
    int p = w->phase_cur > w->phase_done ? w->phase_cur : w->phase_done + 1;

    if (p >= NPHASES)
        p = NPHASES - 1;
    if (p < 0)
        p = sv_current_phase(st);
    worker_ranks(w, ranks, sizeof(ranks));
    sv_worker_name(st, w, name, sizeof(name));
    if (st->stop_stage != 0 || w->finished)
        return;
    if (WIFSIGNALED(w->status)) {
        int sig = WTERMSIG(w->status);
        int dev = sv_dev_of_rank(st, w->first_rank);

        if (st->s->kind == SV_RING && w->nlocal == 1)
            sv_fail(st, p <= 2 ? RC_EXIT_CUDA : RC_EXIT_NCCL, p, ranks,
                    "%s (GPU %d) crashed: killed by signal %d (%s) in phase "
                    "%d (%s)",
                    name, dev, sig, signal_name(sig), p, report_phase_name(p));
        else
            sv_fail(st, p <= 2 ? RC_EXIT_CUDA : RC_EXIT_NCCL, p, ranks,
                    "the %s worker crashed: killed by signal %d (%s) in "
                    "phase %d (%s)",
                    name, sig, signal_name(sig), p, report_phase_name(p));
    } else {
        int code = WEXITSTATUS(w->status);

        sv_fail(st, RC_EXIT_INTERNAL, p, ranks,
                "the %s worker exited with status %d without a report in "
                "phase %d (%s)",
                name, code, p, report_phase_name(p));
    }
    sv_stop_begin(st);
}

static void
sv_close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* Whether the pod asked to see NCCL's INFO lines itself. */
static int
sv_user_info(void)
{
    const char *d = getenv("NCCL_DEBUG");

    return d != NULL &&
           (strcasecmp(d, "INFO") == 0 || strcasecmp(d, "TRACE") == 0);
}

/*
 * A ring worker logs NCCL at INFO into a file of its own: the subsystems
 * whose lines say what NCCL chose (INIT: the channels' transports, NVLS,
 * CollNet, the network; GRAPH: the rings; NET: the interfaces), and WARN,
 * which NCCL writes to the same file (src/debug.cc). The pod's own
 * NCCL_DEBUG* apply to the workload, not to the check's workers; a pod
 * that asked for INFO sees the lines in the check's output.
 */
static void
sv_log_env(const struct sv_state *st, int first_rank)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/nccl.%d.log", st->logdir, first_rank);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,GRAPH,NET", 1);
    setenv("NCCL_DEBUG_FILE", path, 1);
}

/* A private folder for the NCCL logs: $TMPDIR, /dev/shm (the pod's
 * memory-backed volume, writable under a read-only root), /tmp. */
static void
sv_logdir_make(struct sv_state *st)
{
    const char *bases[] = {getenv("TMPDIR"), "/dev/shm", "/tmp"};

    st->logdir[0] = '\0';
    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        if (bases[i] == NULL || bases[i][0] == '\0')
            continue;
        snprintf(st->logdir, sizeof(st->logdir), "%s/ncclguard-nccl.XXXXXX",
                 bases[i]);
        if (mkdtemp(st->logdir) != NULL)
            return;
    }
    st->logdir[0] = '\0';
    snprintf(st->out->nl_note, sizeof(st->out->nl_note),
             "no folder for NCCL's log (TMPDIR, /dev/shm and /tmp are not "
             "writable)");
}

static void sv_log_line(struct sv_state *st, const struct sv_worker *w,
                        const char *line);

/* Reads what NCCL logged for worker w (bounded), forwards its WARN lines
 * (all lines when the pod asked for INFO) and parses the rest. */
static void
sv_log_read(struct sv_state *st, const struct sv_worker *w)
{
    char path[256], line[PROTO_LINE_MAX];
    long total = 0;
    int user = sv_user_info();
    FILE *f;

    snprintf(path, sizeof(path), "%s/nccl.%d.log", st->logdir, w->first_rank);
    f = fopen(path, "re");
    if (f == NULL)
        return;
    st->out->nl_read = 1;
    while (fgets(line, sizeof(line), f) != NULL && total < (8L << 20)) {
        total += (long)strlen(line);
        line[strcspn(line, "\n")] = '\0';
        if (strstr(line, "NCCL WARN") != NULL || user)
            sv_log_line(st, w, line);
        nccllog_line(&st->out->nl, line, st->s->rank_offset, st->s->ndev);
    }
    fclose(f);
    unlink(path);
}

static void
sv_logdir_done(struct sv_state *st)
{
    DIR *d;
    struct dirent *de;
    char path[512];

    if (st->logdir[0] == '\0')
        return;
    for (int i = 0; i < st->nw; i++)
        sv_log_read(st, &st->w[i]);
    /* Anything else there (a worker's own files) goes too. */
    d = opendir(st->logdir);
    if (d != NULL) {
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.') {
                snprintf(path, sizeof(path), "%s/%s", st->logdir, de->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(st->logdir);
    st->logdir[0] = '\0';
}

static int
sv_spawn(struct sv_state *st, int i, int first_rank, int nlocal)
{
    const struct sv_spec *s = st->s;
    struct sv_worker *w = &st->w[i];
    int ev[2] = {-1, -1}, lg[2] = {-1, -1}, cmd[2] = {-1, -1};
    pid_t parent = getpid();

    w->first_rank = first_rank;
    w->nlocal = nlocal;
    w->phase_cur = -1;
    w->phase_done = -1;
    w->stuck_dev = -1;
    w->ev = w->log = w->cmd = -1;
    if (pipe(ev) != 0 || pipe(lg) != 0 || pipe(cmd) != 0)
        goto fail;
    fflush(stdout);
    fflush(stderr);
    w->pid = fork();
    if (w->pid < 0)
        goto fail;
    if (w->pid == 0) {
        static struct worker_ring wr;

        /* A worker never outlives its supervisor. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(RC_EXIT_INTERNAL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        for (int j = 0; j < i; j++) {
            sv_close_fd(&st->w[j].ev);
            sv_close_fd(&st->w[j].log);
            sv_close_fd(&st->w[j].cmd);
        }
        close(ev[0]);
        close(lg[0]);
        close(cmd[1]);
        if (dup2(lg[1], STDOUT_FILENO) < 0 || dup2(lg[1], STDERR_FILENO) < 0)
            _exit(RC_EXIT_INTERNAL);
        close(lg[1]);
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (s->env_name != NULL)
            setenv(s->env_name, s->env_value, 1);
        if (s->kind == SV_RING && st->logdir[0] != '\0')
            sv_log_env(st, first_rank);
        if (s->kind == SV_PREFLIGHT)
            worker_preflight_main(ev[1]);
        if (s->kind == SV_DEVICES)
            worker_devices_main(ev[1], s->dev, s->ndev);
        memset(&wr, 0, sizeof(wr));
        wr.evfd = ev[1];
        wr.cmdfd = cmd[0];
        wr.nranks = s->world > 0 ? s->world : s->ndev;
        wr.first_rank = first_rank;
        wr.nlocal = nlocal;
        for (int l = 0; l < nlocal; l++)
            wr.dev[l] = s->dev[first_rank - s->rank_offset + l];
        wr.bw_bytes = s->bw_bytes;
        wr.check_max_bytes = s->check_max_bytes;
        worker_ring_main(&wr);
    }
    close(ev[1]);
    close(lg[1]);
    close(cmd[0]);
    w->ev = ev[0];
    w->log = lg[0];
    w->cmd = cmd[1];
    if (s->id_line != NULL) {
        /* The id came from another pod; the pipe is empty, so this short
         * write completes at once. A worker that died shows as EPIPE here
         * and as an exit when it is reaped. */
        size_t idlen = strlen(s->id_line);

        if (write(w->cmd, s->id_line, idlen) != (ssize_t)idlen ||
            write(w->cmd, "\n", 1) != 1)
            report_log("%scannot pass the unique id to a worker: %s", s->label,
                       strerror(errno));
    }
    fcntl(w->ev, F_SETFL, O_NONBLOCK);
    fcntl(w->log, F_SETFL, O_NONBLOCK);
    fcntl(w->ev, F_SETFD, FD_CLOEXEC);
    fcntl(w->log, F_SETFD, FD_CLOEXEC);
    fcntl(w->cmd, F_SETFD, FD_CLOEXEC);
    return 0;
fail:
    for (int k = 0; k < 2; k++) {
        sv_close_fd(&ev[k]);
        sv_close_fd(&lg[k]);
        sv_close_fd(&cmd[k]);
    }
    w->pid = -1;
    return -1;
}

/* After a stop: name the ranks that were stuck and in what, those that
 * aborted, and those that had to be killed. */
static void
sv_describe_stop(struct sv_state *st)
{
    struct rc_run *o = st->out;
    char stuck[160] = "", killed[160] = "", aborted[160] = "";
    char termed[160] = "";
    int nstuck = 0;
    double abort_max = 0;

    for (int i = 0; i < st->nw; i++) {
        const struct sv_worker *w = &st->w[i];

        for (int l = 0; l < w->nlocal; l++)
            if (w->stuck[l] || w->unreaped) {
                ranks_append(stuck, sizeof(stuck), w->first_rank + l);
                nstuck++;
            }
        /* Killed: still running when SIGTERM went out, without having
         * aborted, and ended by SIGTERM or SIGKILL. */
        if (w->escalated && !w->aborted && !w->finished && w->reaped &&
            WIFSIGNALED(w->status) &&
            (WTERMSIG(w->status) == SIGKILL || WTERMSIG(w->status) == SIGTERM))
            for (int l = 0; l < w->nlocal; l++)
                ranks_append(WTERMSIG(w->status) == SIGKILL ? killed : termed,
                             WTERMSIG(w->status) == SIGKILL ? sizeof(killed)
                                                            : sizeof(termed),
                             w->first_rank + l);
        if (w->aborted) {
            for (int l = 0; l < w->nlocal; l++)
                ranks_append(aborted, sizeof(aborted), w->first_rank + l);
            if (w->abort_s > abort_max)
                abort_max = w->abort_s;
        }
    }
    if (o->code == RC_EXIT_TIMEOUT && nstuck > 0)
        snprintf(o->ranks, sizeof(o->ranks), "%s", stuck);
    if (o->code == RC_EXIT_TIMEOUT && o->ranks[0] != '\0')
        what_add(o, "; stuck ranks: %s", o->ranks);
    sv_describe_unreaped(st);
    for (int i = 0; i < st->nw; i++) {
        const struct sv_worker *w = &st->w[i];

        for (int l = 0; l < w->nlocal; l++)
            if (w->stuck[l])
                what_add(o, "; rank %d (GPU %d) was waiting in %s",
                         w->first_rank + l,
                         sv_dev_of_rank(st, w->first_rank + l),
                         w->stuck_what[l]);
        if (w->stuck_dev >= 0)
            what_add(o, "; GPU %d was waiting in %s", w->stuck_dev,
                     w->stuck_dev_what);
    }
    if (aborted[0] != '\0' && st->s->kind == SV_RING)
        what_add(o,
                 "; ranks %s aborted their communicators (in %.2f s at most, "
                 "abort grace %.2f s)",
                 aborted, abort_max, st->abort_grace);
    if (termed[0] != '\0')
        what_add(o,
                 "; ranks %s did not abort in time and were killed (abort "
                 "grace %.2f s): they ended on SIGTERM",
                 termed, st->abort_grace);
    if (killed[0] != '\0')
        what_add(o,
                 "; ranks %s did not abort in time and were killed (abort "
                 "grace %.2f s): they needed SIGKILL",
                 killed, st->abort_grace);
}

/* Reaps every child that has exited: our workers, and orphans that PID 1
 * inherits. */
static void
sv_reap(struct sv_state *st)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < st->nw; i++) {
            struct sv_worker *w = &st->w[i];

            if (w->pid != pid || w->reaped)
                continue;
            w->status = status;
            /* Take what is left in its pipes first. */
            if (w->ev >= 0)
                sv_drain(st, w, 0);
            if (w->log >= 0)
                sv_drain(st, w, 1);
            sv_close_fd(&w->ev);
            sv_close_fd(&w->log);
            sv_close_fd(&w->cmd);
            w->reaped = 1;
            sv_reaped(st, w);
        }
    }
}

static int
sv_loop(struct sv_state *st)
{
    for (;;) {
        struct pollfd pfd[2 * WORKER_MAX_GPUS];
        struct sv_worker *owner[2 * WORKER_MAX_GPUS];
        int which[2 * WORKER_MAX_GPUS];
        int nfd = 0, live = 0;
        double now;

        sv_reap(st);
        now = sv_now();
        for (int i = 0; i < st->nw; i++) {
            struct sv_worker *w = &st->w[i];

            if (w->reaped || w->pid <= 0)
                continue;
            live++;
            if (w->ev >= 0) {
                pfd[nfd] = (struct pollfd){.fd = w->ev, .events = POLLIN};
                owner[nfd] = w;
                which[nfd++] = 0;
            }
            if (w->log >= 0) {
                pfd[nfd] = (struct pollfd){.fd = w->log, .events = POLLIN};
                owner[nfd] = w;
                which[nfd++] = 1;
            }
        }
        if (live == 0 || st->stop_stage == 4)
            return 0;
        sv_check_deadlines(st, now);
        sv_stop_step(st, now);
        if (st->stop_stage == 4)
            return 0;
        if (nfd == 0) {
            /* Pipes closed, process not yet gone. */
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (poll(pfd, (nfds_t)nfd, 20) < 0 && errno != EINTR)
            return -1;
        for (int k = 0; k < nfd; k++)
            if (pfd[k].revents != 0 &&
                (which[k] == 0 ? owner[k]->ev : owner[k]->log) >= 0)
                sv_drain(st, owner[k], which[k]);
    }
}

int
sv_run(const struct sv_spec *s, struct rc_run *out)
{
    struct sv_state *st = calloc(1, sizeof(*st));
    int maxlocal = 1;

    memset(out, 0, sizeof(*out));
    out->phase = -1;
    if (st == NULL) {
        out->code = RC_EXIT_INTERNAL;
        snprintf(out->what, sizeof(out->what),
                 "out of memory for the supervisor's state");
        return out->code;
    }
    st->s = s;
    st->out = out;
    for (int p = 0; p < NPHASES; p++)
        st->phase_start[p] = -1;
    if (s->kind == SV_RING && s->group)
        maxlocal = s->ndev;
    st->abort_grace = sv_abort_grace(maxlocal);
    st->hard = s->deadline + SV_OVERRUN_S;
    nccllog_init(&out->nl);
    if (s->kind == SV_RING)
        sv_logdir_make(st);
    if (s->kind == SV_RING && !s->group) {
        st->nw = s->ndev;
        for (int i = 0; i < s->ndev; i++)
            if (sv_spawn(st, i, s->rank_offset + i, 1) != 0)
                break;
    } else {
        st->nw = 1;
        sv_spawn(st, 0, s->rank_offset, s->kind == SV_RING ? s->ndev : 0);
    }
    for (int i = 0; i < st->nw; i++)
        if (st->w[i].pid <= 0) {
            /* Could not start them all: stop the others. */
            st->w[i].reaped = 1;
            sv_fail(st, RC_EXIT_INTERNAL, -1, "", "cannot start a worker: %s",
                    strerror(errno));
            sv_stop_begin(st);
        }
    if (sv_loop(st) != 0)
        sv_fail(st, RC_EXIT_INTERNAL, -1, "", "poll failed: %s",
                strerror(errno));
    for (int i = 0; i < st->nw; i++) {
        sv_close_fd(&st->w[i].ev);
        sv_close_fd(&st->w[i].log);
        sv_close_fd(&st->w[i].cmd);
    }
    if (!st->failed) {
        for (int i = 0; i < st->nw; i++)
            if (!st->w[i].finished) {
                /* Should not happen: every exit is judged in sv_reaped. */
                sv_fail(st, RC_EXIT_INTERNAL, -1, "", "a worker vanished");
            }
    }
    sv_logdir_done(st);
    if (st->stop_stage != 0)
        sv_describe_stop(st);
    free(st);
    return out->code;
}
