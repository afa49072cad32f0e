/* The RAS client: one non-blocking conversation with a job's RAS thread,
 * bounded in time and size and cancellable, run on a thread of its own,
 * and the answer (JSON or text) reduced to the ranks that are missing or
 * behind and each rank's count of issued collectives. */
#include "watchdog/ras.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* NCCL_RAS_CLIENT_PROTOCOL in src/ras/ras_internal.h. */
#define RAS_PROTOCOL 2

static long long
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The query's cancel descriptor (-1: none), per thread. */
static _Thread_local int cancel_fd_ = -1;

/* Waits for ev on fd until deadline; 0 when ready, -1 on timeout or when
 * the query was cancelled. */
static int
wait_fd(int fd, short ev, long long deadline)
{
    for (;;) {
        struct pollfd pf[2] = {{fd, ev, 0}, {cancel_fd_, POLLIN, 0}};
        long long left = deadline - mono_ms();
        int r;

        if (left <= 0)
            return -1;
        r = poll(pf, cancel_fd_ >= 0 ? 2 : 1, (int)left);
        if (r > 0 && cancel_fd_ >= 0 && pf[1].revents != 0)
            return -1;
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

static int
send_all(int fd, const char *s, long long deadline)
{
    size_t len = strlen(s), off = 0;

    while (off < len) {
        ssize_t w;

        if (wait_fd(fd, POLLOUT, deadline) != 0)
            return -1;
        w = send(fd, s + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        if (w > 0)
            off += (size_t)w;
    }
    return 0;
}

/* Reads one line (up to '\n') into buf; -1 on EOF, error or timeout. */
static int
read_line(int fd, char *buf, size_t cap, long long deadline)
{
    size_t n = 0;

    while (n + 1 < cap) {
        ssize_t r;

        if (wait_fd(fd, POLLIN, deadline) != 0)
            return -1;
        r = recv(fd, buf + n, 1, MSG_DONTWAIT);
        if (r == 0)
            return -1;
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return -1;
        }
        if (buf[n++] == '\n')
            break;
    }
    buf[n] = '\0';
    return 0;
}

static void
copy_rank(json_t *r, struct wd_ras_rank *out)
{
    const char *host = json_string_value(json_object_get(r, "host"));
    json_t *st = json_object_get(r, "status");

    memset(out, 0, sizeof(*out));
    out->rank = (int)json_integer_value(json_object_get(r, "rank"));
    out->pid = (int)json_integer_value(json_object_get(r, "pid"));
    snprintf(out->host, sizeof(out->host), "%s", host ? host : "?");
    out->unresponsive = json_is_true(json_object_get(st, "unresponsive"));
    out->dead = json_is_true(json_object_get(st, "considered_dead"));
}

/* A rank's issued collectives: the sum of its collective_counts, which
 * client_support.cc fills from each function's seqNumber (raised when a
 * collective is launched; collectives in a CUDA graph are not counted). */
static unsigned long
done_count(json_t *r)
{
    json_t *c = json_object_get(r, "collective_counts"), *v;
    unsigned long sum = 0;
    const char *k;

    json_object_foreach(c, k, v)
    {
        if (json_is_integer(v) && json_integer_value(v) > 0)
            sum += (unsigned long)json_integer_value(v);
    }
    return sum;
}

/* FNV-1a of a communicator's hash text: a key to compare answers by. */
static uint64_t
key_of(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    for (; s != NULL && *s != '\0'; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static void
count_add(struct wd_ras_result *out, uint64_t comm, int64_t who, uint64_t value)
{
    if (out->n_counts >= WD_RAS_MAX_COUNTS)
        return;
    out->counts[out->n_counts].comm = comm;
    out->counts[out->n_counts].who = who;
    out->counts[out->n_counts].value = value;
    out->n_counts++;
}

static int
count_cmp(const void *x, const void *y)
{
    const struct wd_ras_count *a = x, *b = y;

    if (a->comm != b->comm)
        return a->comm < b->comm ? -1 : 1;
    if (a->who != b->who)
        return a->who < b->who ? -1 : 1;
    if (a->value != b->value)
        return a->value < b->value ? -1 : 1;
    return 0;
}

enum wd_ras_progress
wd_ras_compare(const struct wd_ras_result *a, const struct wd_ras_result *b)
{
    if (a->n_counts == 0 || b->n_counts == 0)
        return WD_RAS_NO_COUNTS;
    if (a->n_counts != b->n_counts)
        return WD_RAS_MOVED;
    for (size_t i = 0; i < a->n_counts; i++)
        if (count_cmp(&a->counts[i], &b->counts[i]) != 0)
            return WD_RAS_MOVED;
    return WD_RAS_STILL;
}

int
wd_ras_parse(const char *buf, size_t len, struct wd_ras_result *out)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, 0, &je), *comms, *c;
    const char *ver;
    size_t i;

    if (!json_is_object(root) ||
        !json_is_array(comms = json_object_get(root, "communicators"))) {
        json_decref(root);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    ver = json_string_value(json_object_get(root, "nccl_version"));
    snprintf(out->version, sizeof(out->version), "%s", ver ? ver : "");
    json_array_foreach(comms, i, c)
    {
        json_t *ranks = json_object_get(c, "ranks"), *r;
        json_t *miss = json_object_get(c, "missing_ranks");
        uint64_t comm = key_of(json_string_value(json_object_get(c, "hash")));
        unsigned long most = 0;
        size_t k;

        out->communicators++;
        json_array_foreach(miss, k, r)
        {
            if (out->n_missing < WD_RAS_MAX_RANKS)
                copy_rank(r, &out->missing[out->n_missing]);
            out->n_missing++;
        }
        json_array_foreach(ranks, k, r)
        {
            unsigned long d = done_count(r);

            count_add(out, comm,
                      (int64_t)json_integer_value(json_object_get(r, "rank")),
                      d);
            if (d > most)
                most = d;
        }
        json_array_foreach(ranks, k, r)
        {
            unsigned long d = done_count(r);

            if (d >= most)
                continue;
            if (out->n_behind < WD_RAS_MAX_RANKS) {
                struct wd_ras_rank *b = &out->behind[out->n_behind];

                copy_rank(r, b);
                b->done = d;
                b->most = most;
            }
            out->n_behind++;
        }
    }
    json_decref(root);
    qsort(out->counts, out->n_counts, sizeof(out->counts[0]), count_cmp);
    return 0;
}

/* ---- the text format ---------------------------------------------------
 * The lines read, as client_support.cc prints them at v2.24.3, v2.26.2 and
 * v2.28.3 (the same format strings at each):
 *   "NCCL version %s compiled with CUDA %d.%d"   the first line
 *   "  Process %d on node %s managing GPU%s %s"  a missing process, in the
 *        sections "The missing process(es):", "INCOMPLETE" and "DEAD"
 *        ("%d job process(es) considered dead")
 *   "#%d-%d (%016lx) MISMATCH"                   a communicator's block
 *   "  %d ranks have launched up to operation %ld"
 *   "  Rank %d has launched up to operation %ld -- GPU %s managed by
 *        process %d on node %s"
 *   "  Rank %d -- GPU %s managed by process %d on node %s" (an outlier of
 *        the group line above it)
 * Counts appear only in MISMATCH blocks: where a communicator's ranks all
 * issued the same count, the text shows none. */

/* The next line of buf at *pos into line (cut at cap); false at the end. */
static bool
next_line(const char *buf, size_t len, size_t *pos, char *line, size_t cap)
{
    size_t n = 0;

    if (*pos >= len)
        return false;
    while (*pos < len && buf[*pos] != '\n') {
        if (n + 1 < cap)
            line[n++] = buf[*pos];
        (*pos)++;
    }
    if (*pos < len)
        (*pos)++;
    line[n] = '\0';
    return true;
}

/* Adds a missing process once (it may be listed in several sections). */
static void
missing_add(struct wd_ras_result *out, int pid, const char *host, bool dead)
{
    int n =
        out->n_missing < WD_RAS_MAX_RANKS ? out->n_missing : WD_RAS_MAX_RANKS;

    for (int i = 0; i < n; i++) {
        struct wd_ras_rank *m = &out->missing[i];

        if (m->pid == pid && strcmp(m->host, host) == 0) {
            m->dead = m->dead || dead;
            return;
        }
    }
    if (out->n_missing < WD_RAS_MAX_RANKS) {
        struct wd_ras_rank *m = &out->missing[out->n_missing];

        memset(m, 0, sizeof(*m));
        m->rank = -1;
        m->pid = pid;
        snprintf(m->host, sizeof(m->host), "%s", host);
        m->dead = dead;
        m->unresponsive = !dead;
    }
    out->n_missing++;
}

/* A rank of a MISMATCH block, kept until the block ends. */
struct text_rank {
    int rank, pid;
    char host[64];
    uint64_t value;
};

/* Ends a MISMATCH block: the ranks below its highest count are behind. */
static void
block_end(struct wd_ras_result *out, const struct text_rank *tr, size_t n,
          uint64_t most)
{
    for (size_t i = 0; i < n; i++) {
        if (tr[i].value >= most)
            continue;
        if (out->n_behind < WD_RAS_MAX_RANKS) {
            struct wd_ras_rank *b = &out->behind[out->n_behind];

            memset(b, 0, sizeof(*b));
            b->rank = tr[i].rank;
            b->pid = tr[i].pid;
            snprintf(b->host, sizeof(b->host), "%s", tr[i].host);
            b->done = (unsigned long)tr[i].value;
            b->most = (unsigned long)most;
        }
        out->n_behind++;
    }
}

int
wd_ras_parse_text(const char *buf, size_t len, struct wd_ras_result *out)
{
    struct text_rank tr[WD_RAS_MAX_RANKS];
    char line[512], host[64];
    size_t pos = 0, ntr = 0;
    uint64_t comm = 0, most = 0, group = 0;
    bool in_block = false, dead = false;

    if (len < 13 || memcmp(buf, "NCCL version ", 13) != 0)
        return -1;
    memset(out, 0, sizeof(*out));
    out->text = true;
    while (next_line(buf, len, &pos, line, sizeof(line))) {
        unsigned long long u;
        long long v;
        int a, b, pid, rank;

        if (pos <= len && out->version[0] == '\0' &&
            sscanf(line, "NCCL version %31s", out->version) == 1)
            continue;
        if (line[0] != ' ' && line[0] != '\0') {
            /* A section or block heading: the last block ends here. */
            if (in_block)
                block_end(out, tr, ntr, most);
            in_block = false;
            dead = strcmp(line, "DEAD") == 0;
            if (sscanf(line, "#%d-%d (%llx) MISMATCH", &a, &b, &u) == 3) {
                in_block = true;
                comm = u;
                most = group = 0;
                ntr = 0;
                out->communicators++;
            }
            continue;
        }
        if (sscanf(line, "  Process %d on node %63s managing GPU", &pid,
                   host) == 2) {
            missing_add(out, pid, host, dead);
            continue;
        }
        if (!in_block)
            continue;
        if (sscanf(line, "  %d ranks have launched up to operation %lld", &a,
                   &v) == 2 &&
            v >= 0) {
            count_add(out, comm, -(int64_t)a, (uint64_t)v);
            group = (uint64_t)v;
            if (group > most)
                most = group;
            continue;
        }
        rank = -1;
        pid = 0;
        host[0] = '\0';
        if (sscanf(line, "  Rank %d has launched up to operation %lld", &rank,
                   &v) == 2 &&
            v >= 0) {
            const char *p = strstr(line, "managed by process ");

            if (p != NULL)
                (void)sscanf(p, "managed by process %d on node %63s", &pid,
                             host);
            count_add(out, comm, rank, (uint64_t)v);
            if ((uint64_t)v > most)
                most = (uint64_t)v;
        } else if (sscanf(line, "  Rank %d -- GPU", &rank) == 1) {
            const char *p = strstr(line, "managed by process ");

            if (p != NULL)
                (void)sscanf(p, "managed by process %d on node %63s", &pid,
                             host);
            v = (long long)group;
        } else {
            continue;
        }
        if (ntr < WD_RAS_MAX_RANKS) {
            tr[ntr].rank = rank;
            tr[ntr].pid = pid;
            snprintf(tr[ntr].host, sizeof(tr[ntr].host), "%s",
                     host[0] ? host : "?");
            tr[ntr].value = (uint64_t)v;
            ntr++;
        }
    }
    if (in_block)
        block_end(out, tr, ntr, most);
    qsort(out->counts, out->n_counts, sizeof(out->counts[0]), count_cmp);
    return 0;
}

static int
query(const struct sockaddr *addr, socklen_t len, long long deadline_ms,
      int ras_timeout_s, struct wd_ras_result *out, char *why, size_t wn)
{
    char line[512], *buf = NULL;
    size_t n = 0;
    int fd, rc = -1, err = 0;
    socklen_t el = sizeof(err);
    bool json;

    fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, wn, "socket: %s", strerror(errno));
        return -1;
    }
    if (connect(fd, addr, len) != 0 && errno != EINPROGRESS) {
        snprintf(why, wn, "connect: %s", strerror(errno));
        goto done;
    }
    if (wait_fd(fd, POLLOUT, deadline_ms) != 0) {
        snprintf(why, wn, "connect: timed out");
        goto done;
    }
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
        snprintf(why, wn, "connect: %s", strerror(err ? err : errno));
        goto done;
    }
    snprintf(line, sizeof(line), "CLIENT PROTOCOL %d\n", RAS_PROTOCOL);
    if (send_all(fd, line, deadline_ms) != 0 ||
        read_line(fd, line, sizeof(line), deadline_ms) != 0 ||
        strncmp(line, "SERVER PROTOCOL ", 16) != 0) {
        snprintf(why, wn, "no RAS handshake");
        goto done;
    }
    snprintf(line, sizeof(line), "TIMEOUT %d\n", ras_timeout_s);
    if (send_all(fd, line, deadline_ms) != 0 ||
        read_line(fd, line, sizeof(line), deadline_ms) != 0 ||
        strcmp(line, "OK\n") != 0) {
        snprintf(why, wn, "RAS refused TIMEOUT");
        goto done;
    }
    /* Before 2.28.7 RAS answers "ERROR: Unknown command set format json"
     * and keeps the connection: STATUS then comes in text. */
    if (send_all(fd, "SET FORMAT json\n", deadline_ms) != 0 ||
        read_line(fd, line, sizeof(line), deadline_ms) != 0) {
        snprintf(why, wn, "no answer to SET FORMAT");
        goto done;
    }
    json = strcmp(line, "OK\n") == 0;
    if (!json && strncmp(line, "ERROR", 5) != 0) {
        snprintf(why, wn, "unexpected answer to SET FORMAT");
        goto done;
    }
    if (send_all(fd, "STATUS\n", deadline_ms) != 0) {
        snprintf(why, wn, "cannot send STATUS");
        goto done;
    }
    buf = malloc(WD_RAS_ANSWER_MAX);
    if (buf == NULL) {
        snprintf(why, wn, "out of memory");
        goto done;
    }
    for (;;) {
        ssize_t r;

        if (n + 1 >= WD_RAS_ANSWER_MAX) {
            snprintf(why, wn, "RAS answer too large");
            goto done;
        }
        if (wait_fd(fd, POLLIN, deadline_ms) != 0) {
            snprintf(why, wn, "RAS answer: timed out");
            goto done;
        }
        r = recv(fd, buf + n, WD_RAS_ANSWER_MAX - 1 - n, MSG_DONTWAIT);
        if (r == 0)
            break;
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            snprintf(why, wn, "RAS answer: %s", strerror(errno));
            goto done;
        }
        n += (size_t)r;
    }
    if ((json ? wd_ras_parse(buf, n, out) : wd_ras_parse_text(buf, n, out)) !=
        0) {
        snprintf(why, wn, "RAS answer is not a STATUS %s",
                 json ? "document" : "report");
        goto done;
    }
    rc = 0;
done:
    free(buf);
    close(fd);
    return rc;
}

int
wd_ras_query(const struct sockaddr *addr, socklen_t len, long long deadline_ms,
             int ras_timeout_s, int cancel_fd, struct wd_ras_result *out,
             char *why, size_t wn)
{
    int saved = cancel_fd_, rc;

    cancel_fd_ = cancel_fd;
    rc = query(addr, len, deadline_ms, ras_timeout_s, out, why, wn);
    cancel_fd_ = saved;
    return rc;
}

/* ---- a query on its own thread ------------------------------------------ */

struct wd_ras_job {
    pthread_t th;
    int cancel; /* eventfd */
    struct sockaddr_storage addr;
    socklen_t len;
    int ras_timeout_s;
    long long deadline_ms;
    atomic_bool done;
    int rc;
    char why[200];
    struct wd_ras_result res;
};

static void *
job_main(void *arg)
{
    struct wd_ras_job *j = arg;

    j->rc = wd_ras_query((struct sockaddr *)&j->addr, j->len, j->deadline_ms,
                         j->ras_timeout_s, j->cancel, &j->res, j->why,
                         sizeof(j->why));
    atomic_store(&j->done, true);
    return NULL;
}

struct wd_ras_job *
wd_ras_job_start(const struct sockaddr *addr, socklen_t len, int ras_timeout_s,
                 long long budget_ms)
{
    struct wd_ras_job *j = calloc(1, sizeof(*j));

    if (j == NULL || len > sizeof(j->addr)) {
        free(j);
        return NULL;
    }
    memcpy(&j->addr, addr, len);
    j->len = len;
    j->ras_timeout_s = ras_timeout_s;
    j->deadline_ms = mono_ms() + budget_ms;
    atomic_init(&j->done, false);
    j->cancel = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (j->cancel < 0) {
        free(j);
        return NULL;
    }
    if (pthread_create(&j->th, NULL, job_main, j) != 0) {
        close(j->cancel);
        free(j);
        return NULL;
    }
    return j;
}

bool
wd_ras_job_done(struct wd_ras_job *j)
{
    return atomic_load(&j->done);
}

int
wd_ras_job_result(struct wd_ras_job *j, struct wd_ras_result *out, char *why,
                  size_t wn)
{
    if (j->rc != 0) {
        snprintf(why, wn, "%s", j->why);
        return -1;
    }
    *out = j->res;
    return 0;
}

void
wd_ras_job_free(struct wd_ras_job *j)
{
    uint64_t one = 1;

    if (j == NULL)
        return;
    if (write(j->cancel, &one, sizeof(one)) < 0) {
        /* An eventfd write fails only on overflow: it is readable then. */
    }
    pthread_join(j->th, NULL);
    close(j->cancel);
    free(j);
}
