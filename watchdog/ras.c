/* The RAS client: one non-blocking conversation with a job's RAS thread,
 * bounded in time and size, and the JSON answer reduced to the ranks that
 * are missing or behind. */
#include "watchdog/ras.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Waits for ev on fd until deadline; 0 when ready, -1 on timeout. */
static int
wait_fd(int fd, short ev, long long deadline)
{
    for (;;) {
        struct pollfd pf = {fd, ev, 0};
        long long left = deadline - mono_ms();
        int r;

        if (left <= 0)
            return -1;
        r = poll(&pf, 1, (int)left);
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

int
wd_ras_parse(const char *buf, size_t len, struct wd_ras_result *out)
{
    json_error_t je;
    json_t *root = json_loadb(buf, len, 0, &je), *comms, *c;
    size_t i;

    if (!json_is_object(root) ||
        !json_is_array(comms = json_object_get(root, "communicators"))) {
        json_decref(root);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    json_array_foreach(comms, i, c)
    {
        json_t *ranks = json_object_get(c, "ranks"), *r;
        json_t *miss = json_object_get(c, "missing_ranks");
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
    return 0;
}

int
wd_ras_query(const struct sockaddr *addr, socklen_t len, long long deadline_ms,
             int ras_timeout_s, struct wd_ras_result *out, char *why, size_t wn)
{
    char line[512], *buf = NULL;
    size_t n = 0;
    int fd, rc = -1, err = 0;
    socklen_t el = sizeof(err);

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
    if (send_all(fd, "SET FORMAT json\n", deadline_ms) != 0 ||
        read_line(fd, line, sizeof(line), deadline_ms) != 0 ||
        strcmp(line, "OK\n") != 0) {
        snprintf(why, wn, "RAS has no JSON format (NCCL too old)");
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
    if (wd_ras_parse(buf, n, out) != 0) {
        snprintf(why, wn, "RAS answer is not a STATUS document");
        goto done;
    }
    rc = 0;
done:
    free(buf);
    close(fd);
    return rc;
}
