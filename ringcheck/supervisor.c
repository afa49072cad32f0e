/* Forks the ring check's workers, reads their events and output, enforces
 * the deadlines and stops stuck workers. */
#include "supervisor.h"

#include "proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NPHASES 7

struct sv_worker {
    pid_t pid;
    int ev, log, cmd;     /* our ends; -1 when closed */
    struct proto_buf evb; /* large: these live in a static array */
    struct proto_buf logb;
    int first_rank, nlocal;
    int phase_cur;  /* last phase begun; -1 */
    int phase_done; /* last phase ended; -1 */
    int finished;   /* sent X */
    int aborted;    /* sent A */
    int reaped;
    int status;
    int stuck[WORKER_MAX_GPUS]; /* S events, by local rank */
};

struct sv_state {
    const struct sv_spec *s;
    struct rc_run *out;
    struct sv_worker w[WORKER_MAX_GPUS];
    int nw;
    double phase_start[NPHASES];
    int stop_stage; /* 0 running, 1 abort asked, 2 SIGTERM, 3 SIGKILL */
    double stop_at;
    int failed;
};

static struct sv_state st;

double
sv_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void
sv_init(void)
{
    sigset_t set;

    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
}

static void
ranks_append(char *buf, size_t len, int rank)
{
    size_t n = strlen(buf);

    snprintf(buf + n, len - n, "%s%d", n > 0 ? "," : "", rank);
}

static void
worker_ranks(const struct sv_worker *w, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int l = 0; l < w->nlocal; l++)
        ranks_append(buf, len, w->first_rank + l);
}

/* Records the run's failure; the first one wins. */
static void sv_fail(int code, int phase, const char *ranks, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));

static void
sv_fail(int code, int phase, const char *ranks, const char *fmt, ...)
{
    va_list ap;

    if (st.failed)
        return;
    st.failed = 1;
    st.out->code = code;
    st.out->phase = phase;
    snprintf(st.out->ranks, sizeof(st.out->ranks), "%s", ranks);
    va_start(ap, fmt);
    vsnprintf(st.out->what, sizeof(st.out->what), fmt, ap);
    va_end(ap);
}

static void
sv_signal_all(int sig)
{
    for (int i = 0; i < st.nw; i++)
        if (!st.w[i].reaped && st.w[i].pid > 0)
            kill(st.w[i].pid, sig);
}

static void
sv_stop_begin(void)
{
    if (st.stop_stage != 0)
        return;
    st.stop_stage = 1;
    st.stop_at = sv_now();
    sv_signal_all(SIGUSR1);
}

static void
sv_stop_step(double now)
{
    if (st.stop_stage == 1 && now >= st.stop_at + SV_ABORT_GRACE_S) {
        st.stop_stage = 2;
        st.stop_at = now;
        sv_signal_all(SIGTERM);
    } else if (st.stop_stage == 2 && now >= st.stop_at + SV_TERM_GRACE_S) {
        st.stop_stage = 3;
        st.stop_at = now;
        sv_signal_all(SIGKILL);
    }
}

/* The lowest phase some live worker has not finished. */
static int
sv_current_phase(void)
{
    int p = NPHASES;

    for (int i = 0; i < st.nw; i++) {
        const struct sv_worker *w = &st.w[i];
        int cur =
            w->phase_cur > w->phase_done ? w->phase_cur : w->phase_done + 1;

        if (!w->finished && cur < p)
            p = cur;
    }
    if (p >= NPHASES) {
        /* Not started yet: the kind's first phase. */
        p = st.s->kind == SV_PREFLIGHT ? 0 : st.s->kind == SV_DEVICES ? 1 : 3;
    }
    return p;
}

static void
sv_unfinished_ranks(int phase, char *buf, size_t len)
{
    buf[0] = '\0';
    for (int i = 0; i < st.nw; i++)
        if (st.w[i].phase_done < phase && !st.w[i].finished)
            for (int l = 0; l < st.w[i].nlocal; l++)
                ranks_append(buf, len, st.w[i].first_rank + l);
}

static void
sv_check_deadlines(double now)
{
    const struct sv_spec *s = st.s;
    char ranks[160];

    if (st.stop_stage != 0)
        return;
    if (now >= s->deadline) {
        int p = sv_current_phase();

        sv_unfinished_ranks(p, ranks, sizeof(ranks));
        st.out->overall_timeout = 1;
        sv_fail(RC_EXIT_TIMEOUT, p, ranks,
                "the check's deadline (--timeout) passed during phase %d "
                "(%s)",
                p, report_phase_name(p));
        sv_stop_begin();
        return;
    }
    for (int p = 0; p < NPHASES; p++) {
        int open = 0;

        if (st.phase_start[p] < 0 ||
            now < st.phase_start[p] + s->phase_timeout_s)
            continue;
        for (int i = 0; i < st.nw; i++)
            open |= st.w[i].phase_done < p && !st.w[i].finished;
        if (!open)
            continue;
        sv_unfinished_ranks(p, ranks, sizeof(ranks));
        sv_fail(RC_EXIT_TIMEOUT, p, ranks,
                "phase %d (%s) did not finish within %.1f s", p,
                report_phase_name(p), s->phase_timeout_s);
        sv_stop_begin();
        return;
    }
}

static struct rc_row *
sv_row(const char *op, size_t bytes, int timed)
{
    struct rc_run *o = st.out;

    for (int i = 0; i < o->nrows; i++)
        if (strcmp(o->rows[i].op, op) == 0 && o->rows[i].bytes == bytes &&
            o->rows[i].timed == timed)
            return &o->rows[i];
    if (o->nrows == RC_MAX_ROWS)
        return NULL;
    memset(&o->rows[o->nrows], 0, sizeof(o->rows[0]));
    snprintf(o->rows[o->nrows].op, sizeof(o->rows[0].op), "%s", op);
    o->rows[o->nrows].bytes = bytes;
    o->rows[o->nrows].timed = timed;
    return &o->rows[o->nrows++];
}

static int
sv_dev_of_rank(int rank)
{
    rank -= st.s->rank_offset;
    return rank >= 0 && rank < st.s->ndev ? st.s->dev[rank] : -1;
}

static void
sv_forward_id(const struct sv_worker *from, const char *line)
{
    for (int i = 0; i < st.nw; i++) {
        size_t len = strlen(line);

        if (&st.w[i] == from || st.w[i].cmd < 0)
            continue;
        /* The pipe is empty and the line is far below PIPE_BUF, so one
         * write is atomic; a dead worker shows up as EPIPE here and as an
         * exit in the main loop. */
        if (write(st.w[i].cmd, line, len) != (ssize_t)len ||
            write(st.w[i].cmd, "\n", 1) != 1)
            continue;
    }
}

static void
sv_event(struct sv_worker *w, char *line)
{
    struct rc_run *o = st.out;
    char ranks[160];
    int a, b, c, d;
    unsigned long ul;

    switch (line[0]) {
    case 'P': {
        char be;
        if (sscanf(line, "P %c %d", &be, &a) != 2 || a < 0 || a >= NPHASES)
            break;
        if (be == 'b') {
            w->phase_cur = a;
            if (st.phase_start[a] < 0)
                st.phase_start[a] = sv_now();
        } else {
            w->phase_done = a;
        }
        break;
    }
    case 'V':
        if (sscanf(line, "V %d %d %d", &a, &b, &c) == 3) {
            o->nccl_version = a;
            o->cuda_runtime = b;
            o->cuda_driver = c;
        }
        break;
    case 'N':
        if (sscanf(line, "N %d", &a) == 1)
            o->ngpus = a;
        break;
    case 'G': {
        char bus[32], uuid[40];
        int off = 0;
        if (sscanf(line, "G %d %lu %31s %39s %n", &a, &ul, bus, uuid, &off) <
                4 ||
            a < 0 || a >= WORKER_MAX_GPUS)
            break;
        o->gpu[a].index = a;
        o->gpu[a].total_mib = ul;
        snprintf(o->gpu[a].busid, sizeof(o->gpu[a].busid), "%s", bus);
        snprintf(o->gpu[a].uuid, sizeof(o->gpu[a].uuid), "%s", uuid);
        snprintf(o->gpu[a].name, sizeof(o->gpu[a].name), "%s",
                 off > 0 ? line + off : "");
        break;
    }
    case 'F':
        if (sscanf(line, "F %d %lu", &a, &ul) == 2 && a >= 0 &&
            a < WORKER_MAX_GPUS)
            o->gpu[a].free_mib = ul;
        break;
    case 'T':
        if (sscanf(line, "T %d %d %d %d", &a, &b, &c, &d) == 4 && a >= 0 &&
            b >= 0 && a < WORKER_MAX_GPUS && b < WORKER_MAX_GPUS) {
            o->access[a][b] = (signed char)c;
            o->perf[a][b] = (signed char)(d > 100 ? 100 : d);
            o->topo_done = 1;
        }
        break;
    case 'U':
        sv_forward_id(w, line);
        if (st.s->on_id != NULL)
            st.s->on_id(st.s->on_id_ctx, line);
        break;
    case 'R': {
        char op[16];
        size_t bytes, count;
        double us;
        long wrong;
        struct rc_row *row;
        if (sscanf(line, "R %d %15s %zu %zu %d %lf %ld", &a, op, &bytes, &count,
                   &b, &us, &wrong) != 7)
            break;
        row = sv_row(op, bytes, 0);
        if (row == NULL)
            break;
        row->count = count;
        row->root = b;
        if (us > row->time_us)
            row->time_us = us;
        row->wrong += wrong;
        if (wrong > 0 && a >= 0 && a < 64)
            row->wrong_ranks |= 1ULL << a;
        break;
    }
    case 'B': {
        size_t bytes;
        double us;
        struct rc_row *row;
        if (sscanf(line, "B %d %zu %d %lf", &a, &bytes, &b, &us) != 4)
            break;
        row = sv_row("allreduce", bytes, 1);
        if (row == NULL)
            break;
        row->count = bytes / 4;
        row->root = -1;
        if (us > row->time_us)
            row->time_us = us;
        break;
    }
    case 'S':
        if (sscanf(line, "S %d", &a) == 1 && a >= w->first_rank &&
            a < w->first_rank + w->nlocal)
            w->stuck[a - w->first_rank] = 1;
        break;
    case 'A':
        w->aborted = 1;
        break;
    case 'E': {
        int off = 0;
        if (sscanf(line, "E %d %d %n", &a, &b, &off) < 2 || off == 0)
            break;
        worker_ranks(w, ranks, sizeof(ranks));
        sv_fail(a, b, ranks, "%s", line + off);
        sv_stop_begin();
        break;
    }
    case 'I':
        report_log("%s%s", st.s->label, line + 2);
        break;
    case 'X':
        w->finished = 1;
        break;
    default:
        break;
    }
}

static void
sv_worker_name(const struct sv_worker *w, char *buf, size_t len)
{
    if (st.s->kind == SV_PREFLIGHT)
        snprintf(buf, len, "preflight");
    else if (st.s->kind == SV_DEVICES)
        snprintf(buf, len, "devices");
    else if (w->nlocal > 1)
        snprintf(buf, len, "ranks %d-%d", w->first_rank,
                 w->first_rank + w->nlocal - 1);
    else
        snprintf(buf, len, "rank %d", w->first_rank);
}

static void
sv_log_line(const struct sv_worker *w, const char *line)
{
    char name[32];
    const char *warn = strstr(line, "NCCL WARN");

    sv_worker_name(w, name, sizeof(name));
    report_log("%s[%s] %s", st.s->label, name, line);
    if (warn != NULL && st.out->warn[0] == '\0')
        snprintf(st.out->warn, sizeof(st.out->warn), "%s", warn);
}

static void
sv_drain(struct sv_worker *w, int which)
{
    char line[PROTO_LINE_MAX];
    int *fd = which == 0 ? &w->ev : &w->log;
    struct proto_buf *b = which == 0 ? &w->evb : &w->logb;
    int r = proto_read(*fd, b);

    while (proto_next(b, r <= 0, line, sizeof(line)))
        if (which == 0)
            sv_event(w, line);
        else
            sv_log_line(w, line);
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
sv_reaped(struct sv_worker *w)
{
    char ranks[160], name[32];
    int p = w->phase_cur > w->phase_done ? w->phase_cur : w->phase_done + 1;

    if (p >= NPHASES)
        p = NPHASES - 1;
    if (p < 0)
        p = sv_current_phase();
    worker_ranks(w, ranks, sizeof(ranks));
    sv_worker_name(w, name, sizeof(name));
    if (st.stop_stage != 0 || w->finished)
        return;
    if (WIFSIGNALED(w->status)) {
        int sig = WTERMSIG(w->status);
        int dev = sv_dev_of_rank(w->first_rank);

        if (st.s->kind == SV_RING && w->nlocal == 1)
            sv_fail(p <= 2 ? RC_EXIT_CUDA : RC_EXIT_NCCL, p, ranks,
                    "%s (GPU %d) crashed: killed by signal %d (%s) in phase "
                    "%d (%s)",
                    name, dev, sig, signal_name(sig), p, report_phase_name(p));
        else
            sv_fail(p <= 2 ? RC_EXIT_CUDA : RC_EXIT_NCCL, p, ranks,
                    "the %s worker crashed: killed by signal %d (%s) in "
                    "phase %d (%s)",
                    name, sig, signal_name(sig), p, report_phase_name(p));
    } else {
        int code = WEXITSTATUS(w->status);

        sv_fail(RC_EXIT_INTERNAL, p, ranks,
                "the %s worker exited with status %d without a report in "
                "phase %d (%s)",
                name, code, p, report_phase_name(p));
    }
    sv_stop_begin();
}

static void
sv_close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

static int
sv_spawn(int i, int first_rank, int nlocal)
{
    const struct sv_spec *s = st.s;
    struct sv_worker *w = &st.w[i];
    int ev[2] = {-1, -1}, lg[2] = {-1, -1}, cmd[2] = {-1, -1};
    pid_t parent = getpid();

    w->first_rank = first_rank;
    w->nlocal = nlocal;
    w->phase_cur = -1;
    w->phase_done = -1;
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
        for (int j = 0; j < i; j++) {
            sv_close_fd(&st.w[j].ev);
            sv_close_fd(&st.w[j].log);
            sv_close_fd(&st.w[j].cmd);
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
         * and as an exit in the main loop. */
        size_t idlen = strlen(s->id_line);

        if (write(w->cmd, s->id_line, idlen) != (ssize_t)idlen ||
            write(w->cmd, "\n", 1) != 1)
            report_log("%scannot pass the unique id to a worker: %s",
                       s->label, strerror(errno));
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

/* After a timeout: name the ranks that were stuck and how they ended. */
static void
sv_describe_stop(void)
{
    struct rc_run *o = st.out;
    char stuck[160] = "", killed[160] = "";
    int nstuck = 0;
    size_t n;

    for (int i = 0; i < st.nw; i++) {
        const struct sv_worker *w = &st.w[i];

        for (int l = 0; l < w->nlocal; l++)
            if (w->stuck[l]) {
                ranks_append(stuck, sizeof(stuck), w->first_rank + l);
                nstuck++;
            }
        if (!w->aborted && !w->finished && WIFSIGNALED(w->status) &&
            (WTERMSIG(w->status) == SIGKILL || WTERMSIG(w->status) == SIGTERM))
            for (int l = 0; l < w->nlocal; l++)
                ranks_append(killed, sizeof(killed), w->first_rank + l);
    }
    if (o->code == RC_EXIT_TIMEOUT && nstuck > 0)
        snprintf(o->ranks, sizeof(o->ranks), "%s", stuck);
    n = strlen(o->what);
    if (o->code == RC_EXIT_TIMEOUT && o->ranks[0] != '\0')
        n += (size_t)snprintf(o->what + n, sizeof(o->what) - n,
                              "; stuck ranks: %s", o->ranks);
    if (killed[0] != '\0' && n < sizeof(o->what))
        snprintf(o->what + n, sizeof(o->what) - n,
                 "; ranks %s did not abort in time and were killed", killed);
}

int
sv_run(const struct sv_spec *s, struct rc_run *out)
{
    int live;

    memset(&st, 0, sizeof(st));
    memset(out, 0, sizeof(*out));
    st.s = s;
    st.out = out;
    out->phase = -1;
    for (int p = 0; p < NPHASES; p++)
        st.phase_start[p] = -1;
    if (s->kind == SV_RING && !s->group) {
        st.nw = s->ndev;
        for (int i = 0; i < s->ndev; i++)
            if (sv_spawn(i, s->rank_offset + i, 1) != 0)
                break;
    } else {
        st.nw = 1;
        sv_spawn(0, s->rank_offset, s->kind == SV_RING ? s->ndev : 0);
    }
    for (int i = 0; i < st.nw; i++)
        if (st.w[i].pid <= 0) {
            /* Could not start them all: stop the others. */
            st.w[i].reaped = 1;
            sv_fail(RC_EXIT_INTERNAL, -1, "", "cannot start a worker: %s",
                    strerror(errno));
            sv_stop_begin();
        }
    for (;;) {
        struct pollfd pfd[2 * WORKER_MAX_GPUS];
        struct sv_worker *owner[2 * WORKER_MAX_GPUS];
        int which[2 * WORKER_MAX_GPUS];
        int nfd = 0;
        double now = sv_now();
        double wake = now + 0.05;

        live = 0;
        for (int i = 0; i < st.nw; i++) {
            struct sv_worker *w = &st.w[i];

            if (w->reaped)
                continue;
            if (waitpid(w->pid, &w->status, WNOHANG) == w->pid) {
                /* Take what is left in its pipes first. */
                if (w->ev >= 0)
                    sv_drain(w, 0);
                if (w->log >= 0)
                    sv_drain(w, 1);
                sv_close_fd(&w->ev);
                sv_close_fd(&w->log);
                sv_close_fd(&w->cmd);
                w->reaped = 1;
                sv_reaped(w);
                continue;
            }
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
        if (live == 0)
            break;
        sv_check_deadlines(now);
        sv_stop_step(now);
        if (nfd == 0) {
            /* Pipes closed, process not yet gone. */
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
            continue;
        }
        if (poll(pfd, (nfds_t)nfd, (int)((wake - now) * 1000) + 1) < 0 &&
            errno != EINTR)
            break;
        for (int k = 0; k < nfd; k++)
            if (pfd[k].revents != 0)
                sv_drain(owner[k], which[k]);
    }
    for (int i = 0; i < st.nw; i++) {
        sv_close_fd(&st.w[i].ev);
        sv_close_fd(&st.w[i].log);
        sv_close_fd(&st.w[i].cmd);
    }
    if (!st.failed) {
        for (int i = 0; i < st.nw; i++)
            if (!st.w[i].finished) {
                /* Should not happen: every exit is judged in sv_reaped. */
                sv_fail(RC_EXIT_INTERNAL, -1, "", "a worker vanished");
            }
    }
    if (st.stop_stage != 0)
        sv_describe_stop();
    return out->code;
}
