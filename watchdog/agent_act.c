/* The watchdog agent: signals and writes into pods, each after a
 * start-time check, the flight-recorder request, and the restart
 * sequence. */
#include "watchdog/agent_int.h"

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
void
wda_reap_children(void)
{
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
}

/* ---- actions -------------------------------------------------------- */

void
wda_duration_text(long long ms, char *buf, size_t n)
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
                wda_logj(
                    a, "action",
                    wda_podj(pod, json_pack("{s:s,s:i,s:s,s:s}", "action", what,
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
        wda_logj(a, "action",
                 wda_podj(pod, json_pack("{s:s,s:i,s:s,s:s}", "action", what,
                                         "pid", (int)w->pid, "signal",
                                         sig == SIGTERM   ? "SIGTERM"
                                         : sig == SIGKILL ? "SIGKILL"
                                                          : wd_signal_name(sig),
                                         "result", why)));
    }
    return sent;
}

/* The first live process of the pod, for writes into its container. */
struct wproc *
wda_pod_first(struct agent *a, size_t pi)
{
    for (size_t i = 0; i < a->n_procs; i++)
        if (a->procs[i].pod == pi && a->procs[i].alive)
            return &a->procs[i];
    return NULL;
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
        wda_logj(a, "action",
                 wda_podj(pod, json_pack("{s:s,s:i,s:s,s:s,s:s}", "action",
                                         "flight-recorder", "pid", (int)w->pid,
                                         "pipe", w->fr_pipe, "dump", w->fr_dump,
                                         "result", why)));
    }
    return asked;
}

/* Posts the hang's Event now, or, when a flight-recorder dump was asked
 * for, once the dumps are there (wda_fr_due). */
static void
pod_event_or_wait(struct agent *a, struct wpod *pod, size_t pi, const char *msg)
{
    time_t since = time(NULL);

    if (pod_fr_trigger(a, pod, pi) > 0 && (pod->ev_msg = strdup(msg))) {
        pod->fr_pending = true;
        pod->fr_since = since;
        pod->fr_deadline_ms = wda_now_ms() + FR_WAIT_MS;
        return;
    }
    wda_post_event(a, pod, "NCCLHang", msg, wd_verdict_name(pod->hang_v));
}

/* Pods waiting for flight-recorder dumps: once every asked rank's dump is
 * there, or at the deadline, the Event goes out saying where they are. */
void
wda_fr_due(struct agent *a, long long t)
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
        wda_logj(
            a, "action",
            wda_podj(pod, json_pack("{s:s,s:s,s:i}", "action",
                                    "flight-recorder-dump", "result",
                                    all ? "dumped" : "timed out", "dumps", n)));
        pod->fr_pending = false;
        wda_post_event(a, pod, "NCCLHang", msg, wd_verdict_name(pod->hang_v));
        free(pod->ev_msg);
        pod->ev_msg = NULL;
    }
}

/*
 * What follows a hang once it is judged: in report mode, or when no second
 * signal agreed (act false, why_not says why), the Event and nothing else;
 * otherwise the restart sequence. msg is the hang's message; it is
 * extended here.
 */
void
wda_pod_finish(struct agent *a, struct wpod *pod, size_t pi, char *msg,
               size_t n, bool act, const char *why_not)
{
    const struct wd_spec *s = &pod->spec;
    char grace[24], report[1800];
    struct wproc *first = wda_pod_first(a, pi);
    size_t used = strlen(msg);
    bool asked;

    wda_duration_text(s->grace_ms, grace, sizeof(grace));
    if (s->action == WD_ACTION_REPORT) {
        snprintf(msg + used, n - used, "; action: report only");
        pod->state = POD_REPORTED;
        wda_logj(
            a, "decision",
            wda_podj(pod, json_pack("{s:s,s:s}", "decision", "report", "why",
                                    "the policy's action is report")));
        pod_event_or_wait(a, pod, pi, msg);
        return;
    }
    if (!act) {
        snprintf(msg + used, n - used,
                 "; report only, no checkpoint signal or SIGTERM: %s", why_not);
        pod->state = POD_REPORTED;
        wda_logj(a, "decision",
                 wda_podj(pod, json_pack("{s:s,s:s}", "decision", "report-only",
                                         "why", why_not)));
        pod_event_or_wait(a, pod, pi, msg);
        return;
    }
    asked = s->checkpoint_signal != 0 || s->checkpoint_file[0] != '\0';
    if (asked)
        snprintf(msg + used, n - used, "; checkpoint requested; SIGTERM at +%s",
                 grace);
    else
        snprintf(msg + used, n - used,
                 "; no checkpoint configured; SIGTERM now");
    wda_logj(a, "decision",
             wda_podj(pod, json_pack("{s:s,s:s}", "decision", "restart", "why",
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
        wda_logj(
            a, "action",
            wda_podj(pod,
                     json_pack("{s:s,s:s,s:s}", "action", "hang-report", "path",
                               a->o->termination_log, "result", why)));
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
        wda_logj(a, "action",
                 wda_podj(pod, json_pack("{s:s,s:s,s:s}", "action",
                                         "checkpoint-file", "path",
                                         s->checkpoint_file, "result", why)));
    }
    if (s->checkpoint_signal != 0)
        a->m.checkpoint_signal += (unsigned long long)pod_signal(
            a, pi, s->checkpoint_signal,
            wd_signal_kills_by_default(s->checkpoint_signal),
            "checkpoint-signal");
    pod->state = POD_GRACE;
    pod->deadline_ms = wda_now_ms() + (asked ? s->grace_ms : 0);
    /* The Event last: its POST may take up to its timeout, and the
     * checkpoint request should not wait for the API server. */
    pod_event_or_wait(a, pod, pi, msg);
}

/* Moves pods in the restart sequence along when their deadline passed. */
void
wda_actions_due(struct agent *a, long long t)
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
