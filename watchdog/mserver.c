/* The metrics server thread: one poll() over the listening socket and at
 * most WD_MSERVER_MAX_CONN connections, each non-blocking with a deadline,
 * so that idle clients, slow clients and clients that never read cost a
 * slot for two seconds at most and never the decision loop's time. */
#include "watchdog/mserver.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define REQ_MAX 2048

struct conn {
    int fd;
    long long deadline;
    char req[REQ_MAX];
    size_t rlen;
    char *out; /* the whole response, once the request is in */
    size_t olen, off;
};

struct wd_mserver {
    pthread_t th;
    pthread_mutex_t mu;
    char *text; /* guarded by mu */
    size_t len;
    long long tick_ms; /* guarded by mu */
    int listen_fd;
    int wake[2]; /* a byte on wake[1] stops the thread */
    struct conn c[WD_MSERVER_MAX_CONN];
    size_t n;
};

static long long
mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
conn_close(struct wd_mserver *s, size_t i)
{
    close(s->c[i].fd);
    free(s->c[i].out);
    s->c[i] = s->c[--s->n];
}

/* Builds the response for a complete request in c. */
static void
respond(struct wd_mserver *s, struct conn *c)
{
    const char *status = "404 Not Found", *body = "";
    char head[200], *copy = NULL;
    size_t blen = 0;
    int hl;

    c->req[c->rlen < REQ_MAX ? c->rlen : REQ_MAX - 1] = '\0';
    pthread_mutex_lock(&s->mu);
    if (strncmp(c->req, "GET /metrics ", 13) == 0) {
        status = "200 OK";
        copy = s->text;
        blen = s->len;
    } else if (strncmp(c->req, "GET /healthz ", 13) == 0) {
        bool fresh = mono_ms() - s->tick_ms <= WD_MSERVER_STALE_MS;

        status = fresh ? "200 OK" : "503 Service Unavailable";
        body = fresh ? "ok\n" : "the decision loop is stalled\n";
        blen = strlen(body);
    }
    hl = snprintf(head, sizeof(head),
                  "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                  status, blen);
    c->out = malloc((size_t)hl + blen);
    if (c->out != NULL) {
        memcpy(c->out, head, (size_t)hl);
        if (blen > 0)
            memcpy(c->out + hl, copy != NULL ? copy : body, blen);
        c->olen = (size_t)hl + blen;
        c->off = 0;
    }
    pthread_mutex_unlock(&s->mu);
}

static void
on_accept(struct wd_mserver *s, long long now)
{
    for (int k = 0; k < 16; k++) {
        int fd =
            accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0)
            return;
        if (s->n == WD_MSERVER_MAX_CONN) {
            /* Full: the oldest connection still waiting for its request
             * makes room; else the newcomer is refused. */
            size_t old = WD_MSERVER_MAX_CONN;

            for (size_t i = 0; i < s->n; i++)
                if (s->c[i].out == NULL &&
                    (old == WD_MSERVER_MAX_CONN ||
                     s->c[i].deadline < s->c[old].deadline))
                    old = i;
            if (old == WD_MSERVER_MAX_CONN) {
                close(fd);
                continue;
            }
            conn_close(s, old);
        }
        memset(&s->c[s->n], 0, sizeof(s->c[s->n]));
        s->c[s->n].fd = fd;
        s->c[s->n].deadline = now + WD_MSERVER_DEADLINE_MS;
        s->n++;
    }
}

/* Reads or writes what the socket allows; false when the connection is
 * done (answered, closed by the peer, or failed). */
static bool
on_ready(struct wd_mserver *s, struct conn *c, short ev)
{
    if (c->out == NULL && (ev & (POLLIN | POLLHUP | POLLERR))) {
        ssize_t r = recv(c->fd, c->req + c->rlen, REQ_MAX - 1 - c->rlen, 0);

        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return false;
        if (r > 0)
            c->rlen += (size_t)r;
        c->req[c->rlen] = '\0';
        if (strstr(c->req, "\r\n\r\n") != NULL ||
            strstr(c->req, "\n\n") != NULL || c->rlen == REQ_MAX - 1) {
            respond(s, c);
            if (c->out == NULL)
                return false;
        }
    }
    if (c->out != NULL) {
        ssize_t w = send(c->fd, c->out + c->off, c->olen - c->off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (w > 0)
            c->off += (size_t)w;
        if (c->off == c->olen)
            return false;
    }
    return true;
}

static void *
serve(void *arg)
{
    struct wd_mserver *s = arg;
    struct pollfd pf[WD_MSERVER_MAX_CONN + 2];

    for (;;) {
        long long now = mono_ms(), wake = now + 1000;
        size_t n = s->n;
        int r;

        pf[0].fd = s->wake[0];
        pf[0].events = POLLIN;
        pf[1].fd = s->listen_fd;
        pf[1].events = POLLIN;
        for (size_t i = 0; i < n; i++) {
            pf[i + 2].fd = s->c[i].fd;
            pf[i + 2].events = s->c[i].out != NULL ? POLLOUT : POLLIN;
            if (s->c[i].deadline < wake)
                wake = s->c[i].deadline;
        }
        r = poll(pf, n + 2, wake > now ? (int)(wake - now) : 0);
        if (r < 0 && errno != EINTR)
            break;
        if (r > 0 && (pf[0].revents & POLLIN))
            break;
        now = mono_ms();
        /* Walk backwards: conn_close moves the last connection into the
         * closed one's slot, whose poll entry was already looked at. */
        for (size_t i = n; i-- > 0;) {
            bool keep = true;

            if (r > 0 && pf[i + 2].revents != 0)
                keep = on_ready(s, &s->c[i], pf[i + 2].revents);
            if (!keep || now >= s->c[i].deadline)
                conn_close(s, i);
        }
        if (r > 0 && (pf[1].revents & POLLIN))
            on_accept(s, now);
    }
    return NULL;
}

struct wd_mserver *
wd_mserver_start(int listen_fd)
{
    struct wd_mserver *s = calloc(1, sizeof(*s));
    sigset_t block, old;
    int fl;

    if (s == NULL) {
        close(listen_fd);
        return NULL;
    }
    s->listen_fd = listen_fd;
    s->tick_ms = mono_ms();
    fl = fcntl(listen_fd, F_GETFL);
    if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        goto fail;
    pthread_mutex_init(&s->mu, NULL);
    sigemptyset(&block);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    fl = pthread_create(&s->th, NULL, serve, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (fl != 0) {
        pthread_mutex_destroy(&s->mu);
        close(s->wake[0]);
        close(s->wake[1]);
        goto fail;
    }
    return s;
fail:
    close(listen_fd);
    free(s);
    return NULL;
}

void
wd_mserver_publish(struct wd_mserver *s, const char *text, size_t len)
{
    char *copy;

    if (s == NULL || (copy = malloc(len ? len : 1)) == NULL)
        return;
    memcpy(copy, text, len);
    pthread_mutex_lock(&s->mu);
    free(s->text);
    s->text = copy;
    s->len = len;
    pthread_mutex_unlock(&s->mu);
}

void
wd_mserver_tick(struct wd_mserver *s, long long now_ms)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->tick_ms = now_ms;
    pthread_mutex_unlock(&s->mu);
}

void
wd_mserver_stop(struct wd_mserver *s)
{
    if (s == NULL)
        return;
    if (write(s->wake[1], "x", 1) < 0) {
        /* The pipe is empty and non-blocking: a failed write means the
         * thread is already gone; joining is still right. */
    }
    pthread_join(s->th, NULL);
    while (s->n > 0)
        conn_close(s, s->n - 1);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    pthread_mutex_destroy(&s->mu);
    free(s->text);
    free(s);
}
