/* A stand-in for one rank of a training job, for the watchdog's tests.
 * It spins or sleeps, may hold a TCP socket in CLOSE_WAIT, and logs each
 * signal it gets, with CLOCK_MONOTONIC milliseconds, to --log.
 *
 *   wd_job --log FILE [--spin] [--close-wait] [--catch-usr1 CKPT]
 *          [--ignore-term] [--exit-after MS] [--ready FILE]
 *          [--write FILE] [--churn MS] [--shm-fill PCT] [--shm-orphan]
 *          [--flight-recorder] [--listen N] [--trickle] [--shm-plain DIR]
 *
 * --catch-usr1 CKPT  on SIGUSR1 write CKPT (a checkpoint stand-in)
 * --ignore-term      log SIGTERM but keep running (SIGKILL must follow)
 * --ready FILE       written once the sockets are set up
 * --shm-plain DIR    in a mount namespace of its own, bind-mounts DIR (not
 *                    a tmpfs) on /dev/shm: a /dev/shm the agent must not
 *                    size
 * --trickle          holds a loopback connection whose one end it never
 *                    reads while the other sends 64 bytes every 50 ms: a
 *                    receive queue that grows (a peer still sending)
 * --listen N         holds N TCP sockets listening on 127.0.0.1 (each a
 *                    row of net/tcp: a rank of a large job holds thousands)
 * --open-null N      holds N more open files, /dev/null each (its soft
 *                    open-file limit raised to fit)
 * --write FILE       keeps writing FILE, 1 MiB at a time over the same
 *                    bytes (a checkpoint being written, a cache filled)
 * --churn MS         every MS ms forks a child that lives 20 ms (process
 *                    churn: workers, shell-outs)
 * --shm-fill PCT     in a mount namespace of its own, mounts a 1 MiB tmpfs
 *                    on /dev/shm (as the kubelet mounts a memory-backed
 *                    emptyDir) and fills PCT of it with a segment it maps,
 *                    as NCCL maps its nccl-* segments
 * --shm-orphan       also leaves a segment there that nothing maps, dated a
 *                    minute back (a process that died without cleaning),
 *                    and a sem.other file beside it, as old and unmapped
 * --flight-recorder  answers as PyTorch's ProcessGroupNCCL does (its
 *                    DumpPipe and heartbeat monitor): with
 *                    TORCH_NCCL_TRACE_BUFFER_SIZE > 0, makes the FIFO
 *                    $TORCH_NCCL_DEBUG_INFO_PIPE_FILE$RANK.pipe, opens it
 *                    O_RDONLY | O_NONBLOCK, looks at it every 100 ms, and
 *                    when something was written, writes its trace to
 *                    $TORCH_NCCL_DEBUG_INFO_TEMP_FILE$RANK (default
 *                    /tmp/nccl_trace_rank_) and logs FRDUMP: PyTorch before
 *                    the TORCH_FR_* names
 * --flight-recorder-new  as above, as PyTorch with the TORCH_FR_* names
 *                    does: the ring size is the first set of
 *                    TORCH_FR_BUFFER_SIZE, TORCH_NCCL_TRACE_BUFFER_SIZE
 *                    (default 2000), the dump prefix the first set of
 *                    TORCH_FR_DUMP_TEMP_FILE, TORCH_NCCL_DEBUG_INFO_TEMP_FILE
 *                    (default $XDG_CACHE_HOME/torch/comm_lib_trace_rank_,
 *                    else $HOME/.cache/torch/..., the folder made) */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;
static const char *ckpt;
static volatile sig_atomic_t term_exit;

static long long
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Async-signal-safe: one write of a preformatted line, "NAME T" with T
 * the monotonic time in ms it happened at. */
static void
log_sig_at(const char *name, long long t)
{
    char buf[64];
    char digits[24];
    int n = 0, d = 0;

    do {
        digits[d++] = (char)('0' + t % 10);
        t /= 10;
    } while (t > 0 && d < 23);
    for (const char *p = name; *p && n < 40; p++)
        buf[n++] = *p;
    buf[n++] = ' ';
    while (d > 0)
        buf[n++] = digits[--d];
    buf[n++] = '\n';
    if (write(log_fd, buf, (size_t)n) < 0)
        _exit(3);
}

static void
log_sig(const char *name)
{
    log_sig_at(name, mono_ms());
}

static void
on_usr1(int sig)
{
    int fd;

    (void)sig;
    log_sig("USR1");
    if (ckpt != NULL &&
        (fd = open(ckpt, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0) {
        if (write(fd, "saved\n", 6) < 0)
            _exit(3);
        close(fd);
    }
}

static void
on_term(int sig)
{
    (void)sig;
    log_sig("TERM");
    term_exit = 1;
}

static void
on_term_ignored(int sig)
{
    (void)sig;
    log_sig("TERM");
}

static int fr_fd = -1;
static char fr_dump[512];
static int fr_new; /* --flight-recorder-new */

/* The first of two names that is set, as c10d's getCvarString reads a
 * list: the first name wins. */
static const char *
env2(const char *first, const char *second)
{
    const char *v = getenv(first);

    return v != NULL ? v : getenv(second);
}

static int
fr_setup(void)
{
    const char *size =
        fr_new ? env2("TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE")
               : getenv("TORCH_NCCL_TRACE_BUFFER_SIZE");
    const char *stem = getenv("TORCH_NCCL_DEBUG_INFO_PIPE_FILE");
    const char *rank = getenv("RANK");
    const char *tmp = fr_new ? env2("TORCH_FR_DUMP_TEMP_FILE",
                                    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
                             : getenv("TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
    char pipe[512], dir[400];

    if ((size == NULL && !fr_new) || (size != NULL && atoi(size) <= 0) ||
        stem == NULL || rank == NULL)
        return -1;
    snprintf(pipe, sizeof(pipe), "%s%s.pipe", stem, rank);
    if (tmp == NULL && fr_new) {
        const char *xdg = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");

        if (xdg != NULL)
            snprintf(dir, sizeof(dir), "%s/torch", xdg);
        else
            snprintf(dir, sizeof(dir), "%s/.cache/torch", home ? home : "/tmp");
        {
            char part[400];

            /* create_directories: each level of the folder. */
            for (char *p = dir + 1; *p != '\0'; p++) {
                if (*p != '/')
                    continue;
                snprintf(part, sizeof(part), "%.*s", (int)(p - dir), dir);
                (void)mkdir(part, 0755);
            }
            (void)mkdir(dir, 0755);
        }
        snprintf(fr_dump, sizeof(fr_dump), "%s/comm_lib_trace_rank_%s", dir,
                 rank);
    } else {
        snprintf(fr_dump, sizeof(fr_dump), "%s%s",
                 tmp ? tmp : "/tmp/nccl_trace_rank_", rank);
    }
    if ((unlink(pipe) != 0 && errno != ENOENT) || mkfifo(pipe, 0666) != 0)
        return -1;
    fr_fd = open(pipe, O_RDONLY | O_NONBLOCK);
    return fr_fd >= 0 ? 0 : -1;
}

/* One look at the pipe; a dump when something was written. */
static void
fr_poll(void)
{
    char buf[128];
    long long t;
    int fd;

    if (fr_fd < 0 || read(fr_fd, buf, sizeof(buf)) <= 0)
        return;
    usleep(200000); /* the trace takes a while to write */
    /* FRDUMP is the time the new dump appears: the agent may see the file
     * as soon as it is closed, before this process logs the line. */
    t = mono_ms();
    fd = open(fr_dump, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "{\"entries\": []}\n", 16) != 16)
        _exit(3);
    close(fd);
    log_sig_at("FRDUMP", t);
}

/* The /dev/shm of a pod: a small tmpfs, filled to pct with a mapped
 * segment, and maybe one segment left behind. */
static int
shm_setup(int pct, int orphan)
{
    size_t size = (size_t)pct * (1 << 20) / 100;
    struct timespec ts[2];
    char *p;
    int fd;

    if (unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=1m") != 0)
        return -1;
    fd = open("/dev/shm/nccl-fill", O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
        return -1;
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    memset(p, 1, size); /* the pages count once touched */
    close(fd);
    if (!orphan)
        return 0;
    fd = open("/dev/shm/nccl-orphan", O_WRONLY | O_CREAT, 0600);
    if (fd < 0 || write(fd, p, 4096) != 4096)
        return -1;
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    ts[0].tv_sec -= 60;
    ts[1] = ts[0];
    if (futimens(fd, ts) != 0)
        return -1;
    close(fd);
    /* And a file of another program, as old and as unmapped: glibc keeps
     * a named semaphore in /dev/shm as sem.NAME (sem_overview(7)). It is
     * not NCCL's, so not an orphan segment. */
    fd = open("/dev/shm/sem.other", O_WRONLY | O_CREAT, 0600);
    if (fd < 0 || write(fd, p, 4096) != 4096 || futimens(fd, ts) != 0)
        return -1;
    close(fd);
    return 0;
}

/* /dev/shm, in a mount namespace of its own, is dir: not a tmpfs. */
static int
shm_plain(const char *dir)
{
    if (unshare(CLONE_NEWNS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        mount(dir, "/dev/shm", NULL, MS_BIND, NULL) != 0)
        return -1;
    return 0;
}

/* n sockets listening on loopback, each on a port of its own; 0 or -1. */
static int
listen_sockets(long n)
{
    struct sockaddr_in sa;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (long i = 0; i < n; i++) {
        int l = socket(AF_INET, SOCK_STREAM, 0);

        if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
            listen(l, 1) != 0)
            return -1;
    }
    return 0;
}

/* A loopback connection: *rd (never read) and *wr (the sender). */
static int
trickle_pair(int *rd, int *wr)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(l, 1) != 0 || getsockname(l, (struct sockaddr *)&sa, &sl) != 0)
        return -1;
    *wr = socket(AF_INET, SOCK_STREAM, 0);
    if (*wr < 0 || connect(*wr, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return -1;
    *rd = accept(l, NULL, NULL);
    close(l);
    return *rd < 0 ? -1 : 0;
}

/* A connected socket whose peer has closed: it sits in CLOSE_WAIT until we
 * close it, which we never do. */
static int
close_wait_socket(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int l = socket(AF_INET, SOCK_STREAM, 0), c, a;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(l, 1) != 0 || getsockname(l, (struct sockaddr *)&sa, &sl) != 0)
        return -1;
    c = socket(AF_INET, SOCK_STREAM, 0);
    if (c < 0 || connect(c, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return -1;
    a = accept(l, NULL, NULL);
    if (a < 0)
        return -1;
    close(a);
    close(l);
    return c;
}

int
main(int argc, char **argv)
{
    int spin = 0, cw = 0, ignore_term = 0, wfd = -1, shm_pct = -1, orphan = 0,
        fr = 0;
    long long last_fr = 0;
    long listeners = 0, nulls = 0;
    int trickle = 0, t_rd = -1, t_wr = -1;
    const char *plain = NULL;
    long long last_trickle = 0;
    long long exit_after = -1, t0 = mono_ms(), churn = -1, last_fork = 0;
    const char *ready = NULL;
    static char chunk[1 << 20];
    struct sigaction sa;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--log") == 0 && i + 1 < argc)
            log_fd = open(argv[++i], O_WRONLY | O_CREAT | O_APPEND, 0644);
        else if (strcmp(argv[i], "--spin") == 0)
            spin = 1;
        else if (strcmp(argv[i], "--close-wait") == 0)
            cw = 1;
        else if (strcmp(argv[i], "--catch-usr1") == 0 && i + 1 < argc)
            ckpt = argv[++i];
        else if (strcmp(argv[i], "--ignore-term") == 0)
            ignore_term = 1;
        else if (strcmp(argv[i], "--exit-after") == 0 && i + 1 < argc)
            exit_after = strtoll(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--ready") == 0 && i + 1 < argc)
            ready = argv[++i];
        else if (strcmp(argv[i], "--write") == 0 && i + 1 < argc)
            wfd = open(argv[++i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        else if (strcmp(argv[i], "--churn") == 0 && i + 1 < argc)
            churn = strtoll(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--shm-fill") == 0 && i + 1 < argc)
            shm_pct = (int)strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--shm-orphan") == 0)
            orphan = 1;
        else if (strcmp(argv[i], "--flight-recorder-new") == 0)
            fr = 1, fr_new = 1;
        else if (strcmp(argv[i], "--flight-recorder") == 0)
            fr = 1;
        else if (strcmp(argv[i], "--shm-plain") == 0 && i + 1 < argc)
            plain = argv[++i];
        else if (strcmp(argv[i], "--trickle") == 0)
            trickle = 1;
        else if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc)
            listeners = strtol(argv[++i], NULL, 10);
        else if (strcmp(argv[i], "--open-null") == 0 && i + 1 < argc)
            nulls = strtol(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "wd_job: bad argument %s\n", argv[i]);
            return 2;
        }
    }
    if (log_fd < 0) {
        fprintf(stderr, "wd_job: --log FILE is required\n");
        return 2;
    }
    memset(&sa, 0, sizeof(sa));
    if (ckpt != NULL) {
        sa.sa_handler = on_usr1;
        sigaction(SIGUSR1, &sa, NULL);
    }
    sa.sa_handler = ignore_term ? on_term_ignored : on_term;
    sigaction(SIGTERM, &sa, NULL);
    if (shm_pct >= 0 && shm_setup(shm_pct, orphan) != 0) {
        perror("wd_job: /dev/shm");
        return 1;
    }
    if (fr && fr_setup() != 0) {
        perror("wd_job: flight recorder");
        return 1;
    }
    if (cw && close_wait_socket() < 0) {
        perror("wd_job: close-wait socket");
        return 1;
    }
    if (plain != NULL && shm_plain(plain) != 0) {
        perror("wd_job: --shm-plain");
        return 1;
    }
    if (trickle && trickle_pair(&t_rd, &t_wr) != 0) {
        perror("wd_job: trickle connection");
        return 1;
    }
    if (nulls > 0) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
            rl.rlim_cur < (rlim_t)nulls + 64) {
            rl.rlim_cur = (rlim_t)nulls + 64 < rl.rlim_max ? (rlim_t)nulls + 64
                                                           : rl.rlim_max;
            (void)setrlimit(RLIMIT_NOFILE, &rl);
        }
        for (long k = 0; k < nulls; k++)
            if (open("/dev/null", O_RDONLY) < 0) {
                perror("wd_job: --open-null");
                return 2;
            }
    }
    if (listeners > 0 && listen_sockets(listeners) != 0) {
        perror("wd_job: listening sockets");
        return 1;
    }
    if (ready != NULL) {
        int fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0644);

        if (fd >= 0)
            close(fd);
    }
    while (!term_exit) {
        if (exit_after >= 0 && mono_ms() - t0 >= exit_after)
            return 0;
        if (wfd >= 0 && pwrite(wfd, chunk, sizeof(chunk), 0) < 0)
            return 3;
        if (fr && mono_ms() - last_fr >= 100) {
            fr_poll();
            last_fr = mono_ms();
        }
        if (churn >= 0) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            if (mono_ms() - last_fork >= churn) {
                pid_t c = fork();

                if (c == 0) {
                    usleep(20000);
                    _exit(0);
                }
                last_fork = mono_ms();
            }
        }
        if (t_wr >= 0 && mono_ms() - last_trickle >= 50) {
            static const char bytes[64];

            if (write(t_wr, bytes, sizeof(bytes)) < 0)
                return 3;
            last_trickle = mono_ms();
        }
        if (spin) {
            for (volatile long k = 0; k < 200000; k++)
                ;
        } else {
            usleep(20000);
        }
    }
    return 0;
}
