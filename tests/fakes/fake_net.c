/* The NCCL double's network mode: a TCP hub in the process that made the
 * unique id, and ranks that join it from any network namespace. Real NCCL
 * likewise runs its bootstrap root in the process that called
 * ncclGetUniqueId (bootstrapGetUniqueId / bootstrapCreateRoot in
 * src/bootstrap.cc), and a peer that dies shows to the others as a closed
 * connection, reported as ncclRemoteError ("remote process exited or there
 * was a network error"). The hub's step relay itself is the double's own
 * stand-in for NCCL's data transports, not a model of them. */
#include "fake_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NET_MAXR 64
#define NET_MAGIC 0x464b4e54u /* "FKNT" */
#define NET_MAX_STEP (1u << 20)

struct fakenet {
    int fd;
    unsigned long steps; /* steps completed */
    int rank, nranks;
    atomic_int *aborting;
};

int
fakenet_enabled(void)
{
    const char *v = getenv("FAKENCCL_NET");

    return v != NULL && strcmp(v, "1") == 0;
}

int
fakenet_is_net_id(const char *id)
{
    return strncmp(id, "tcp:", 4) == 0;
}

static double
net_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* NCCL_SOCKET_IFNAME against an interface name: '^' excludes, then '='
 * makes the names exact; "name[:port]" items, comma separated. */
static int
if_match(const char *name, const char *list)
{
    char buf[256];
    int exclude = list[0] == '^';
    const char *p = list + exclude;
    int exact = p[0] == '=';
    int hit = 0;

    snprintf(buf, sizeof(buf), "%s", p + exact);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');

        if (colon != NULL)
            *colon = '\0';
        if (exact)
            hit |= strcmp(name, tok) == 0;
        else
            hit |= *tok != '\0' && strncmp(name, tok, strlen(tok)) == 0;
    }
    return exclude ? !hit : hit;
}

/*
 * The interface NCCL would pick, IPv4 only: NCCL_SOCKET_IFNAME when set;
 * otherwise ib* first, then anything but docker* and lo, then docker*,
 * then lo (NCCL's documented default order).
 */
static int
pick_if(char *name, size_t namelen, struct in_addr *addr)
{
    static const char *const order[] = {"ib", "^docker,lo", "docker", "lo"};
    const char *user = getenv("NCCL_SOCKET_IFNAME");
    struct ifaddrs *ifs;
    int found = 0;

    if (getifaddrs(&ifs) != 0)
        return 0;
    for (size_t k = 0; k < (user != NULL ? 1 : 4) && !found; k++) {
        const char *want = user != NULL ? user : order[k];

        for (struct ifaddrs *i = ifs; i != NULL && !found; i = i->ifa_next) {
            if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
                !(i->ifa_flags & IFF_UP) || !if_match(i->ifa_name, want))
                continue;
            snprintf(name, namelen, "%s", i->ifa_name);
            *addr = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            found = 1;
        }
    }
    freeifaddrs(ifs);
    return found;
}

static int
io_full(int fd, void *buf, size_t n, int out, atomic_int *aborting)
{
    size_t off = 0;

    errno = 0;
    while (off < n) {
        ssize_t r = out ? send(fd, (char *)buf + off, n - off, MSG_NOSIGNAL)
                        : recv(fd, (char *)buf + off, n - off, 0);
        struct pollfd p = {fd, out ? POLLOUT : POLLIN, 0};

        if (r > 0) {
            off += (size_t)r;
            continue;
        }
        if (r == 0 && !out)
            return -1;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        if (aborting != NULL && atomic_load(aborting))
            return -1;
        poll(&p, 1, 10);
    }
    return 0;
}

/* The hub: accepts nranks ranks, then relays every step to all. */
struct hub {
    int lfd;
};

static void *
hub_main(void *arg)
{
    struct hub *h = arg;
    int fd[NET_MAXR];
    int nranks = 0, joined = 0;
    unsigned char *buf = NULL;
    const char *why = "";
    int bad = -1;
    unsigned long nsteps = 0;

    for (int i = 0; i < NET_MAXR; i++)
        fd[i] = -1;
    while (nranks == 0 || joined < nranks) {
        uint32_t hello[3];
        int c = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
        int fl;

        if (c < 0) {
            struct pollfd p = {h->lfd, POLLIN, 0};
            poll(&p, 1, 100);
            continue;
        }
        fl = fcntl(c, F_GETFL);
        fcntl(c, F_SETFL, fl | O_NONBLOCK);
        if (io_full(c, hello, sizeof(hello), 0, NULL) != 0 ||
            ntohl(hello[0]) != NET_MAGIC || ntohl(hello[2]) < 1 ||
            ntohl(hello[2]) > NET_MAXR || ntohl(hello[1]) >= ntohl(hello[2]) ||
            (nranks != 0 && (int)ntohl(hello[2]) != nranks) ||
            fd[ntohl(hello[1])] >= 0) {
            close(c);
            continue;
        }
        nranks = (int)ntohl(hello[2]);
        fd[ntohl(hello[1])] = c;
        joined++;
    }
    close(h->lfd);
    free(h);
    for (int r = 0; r < nranks; r++) {
        uint32_t ready = htonl((uint32_t)nranks);

        if (io_full(fd[r], &ready, sizeof(ready), 1, NULL) != 0)
            goto out;
    }
    for (unsigned long step = 0;; step++) {
        uint32_t len = 0;

        for (int r = 0; r < nranks; r++) {
            uint32_t l;

            if (io_full(fd[r], &l, sizeof(l), 0, NULL) != 0) {
                why = "closed its connection";
                bad = r;
                goto out;
            }
            l = ntohl(l);
            if (l > NET_MAX_STEP || (r > 0 && l != len)) {
                why = "sent a step of another size";
                bad = r;
                goto out;
            }
            if (r == 0) {
                len = l;
                free(buf);
                buf = malloc((size_t)nranks * len + 1);
                if (buf == NULL)
                    goto out;
            }
            if (io_full(fd[r], buf + (size_t)r * len, len, 0, NULL) != 0) {
                why = "closed its connection in the middle of a step";
                bad = r;
                goto out;
            }
        }
        /* The reply starts with its length, so that a step of 0 bytes
         * (finalize) is still a barrier: no rank leaves before all came.
         * Rank 0 gets it last: the hub runs in rank 0's process, which may
         * exit as soon as its own finalize returns, and the other replies
         * must be in the kernel's send buffers by then (closed at exit,
         * they are still delivered). */
        for (int r = nranks - 1; r >= 0; r--)
            if (io_full(fd[r], &(uint32_t){htonl((uint32_t)nranks * len)}, 4, 1,
                        NULL) != 0 ||
                io_full(fd[r], buf, (size_t)nranks * len, 1, NULL) != 0) {
                why = "stopped reading";
                bad = r;
                goto out;
            }
        nsteps = step + 1;
    }
out:
    /* Every rank closes after the last step; anything else is news. */
    if (bad >= 0 && (getenv("FAKENCCL_NET_DEBUG") != NULL ||
                     !(bad == 0 && nsteps > 0 &&
                       strcmp(why, "closed its connection") == 0)))
        fprintf(stderr, "fake: bootstrap hub: rank %d %s after %lu steps\n",
                bad, why, nsteps);
    /* A rank went away (or all finished): everyone else sees the
     * connection close, as peers of a dead NCCL rank do. */
    for (int r = 0; r < NET_MAXR; r++)
        if (fd[r] >= 0)
            close(fd[r]);
    free(buf);
    return NULL;
}

int
fakenet_make_id(char *id, size_t len, char *err, size_t errlen)
{
    char ifname[IF_NAMESIZE + 1];
    struct in_addr a;
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    struct hub *h;
    pthread_t t;
    char as[INET_ADDRSTRLEN];
    int fd;

    if (!pick_if(ifname, sizeof(ifname), &a)) {
        const char *user = getenv("NCCL_SOCKET_IFNAME");

        snprintf(err, errlen, "Bootstrap : no socket interface found%s%s",
                 user != NULL ? " matching NCCL_SOCKET_IFNAME=" : "",
                 user != NULL ? user : "");
        return -1;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr = a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(fd, NET_MAXR) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        snprintf(err, errlen, "Bootstrap : cannot listen on %s: %s", ifname,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    h = malloc(sizeof(*h));
    if (h == NULL) {
        close(fd);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    h->lfd = fd;
    if (pthread_create(&t, NULL, hub_main, h) != 0) {
        close(fd);
        free(h);
        snprintf(err, errlen, "cannot start the bootstrap thread");
        return -1;
    }
    pthread_detach(t);
    inet_ntop(AF_INET, &a, as, sizeof(as));
    snprintf(id, len, "tcp:%s:%d:%s", as, ntohs(sa.sin_port), ifname);
    return 0;
}

int
fakenet_join(const char *id, int rank, int nranks, atomic_int *aborting,
             struct fakenet **out, char *err, size_t errlen)
{
    char host[64], ifname[IF_NAMESIZE + 1];
    int port = 0;
    struct sockaddr_in to, from;
    struct in_addr local;
    const char *rs = getenv("FAKENCCL_CONNECT_RETRY_S");
    double give_up = net_now() + (rs != NULL ? strtod(rs, NULL) : 5.0);
    uint32_t hello[3] = {htonl(NET_MAGIC), htonl((uint32_t)rank),
                         htonl((uint32_t)nranks)};
    uint32_t ready;
    int fd = -1;

    if (sscanf(id, "tcp:%63[^:]:%d", host, &port) != 2 ||
        inet_pton(AF_INET, host, &to.sin_addr) != 1) {
        snprintf(err, errlen, "invalid unique id");
        return -1;
    }
    if (!pick_if(ifname, sizeof(ifname), &local)) {
        const char *user = getenv("NCCL_SOCKET_IFNAME");

        snprintf(err, errlen, "Bootstrap : no socket interface found%s%s",
                 user != NULL ? " matching NCCL_SOCKET_IFNAME=" : "",
                 user != NULL ? user : "");
        return -1;
    }
    to.sin_family = AF_INET;
    to.sin_port = htons((uint16_t)port);
    memset(&from, 0, sizeof(from));
    from.sin_family = AF_INET;
    from.sin_addr = local;
    for (;;) {
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        struct pollfd p;
        double stop;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) != 0) {
            snprintf(err, errlen, "Bootstrap : cannot bind %s: %s", ifname,
                     strerror(errno));
            goto fail;
        }
        if (connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0)
            break;
        if (errno == EINPROGRESS) {
            stop = net_now() + 1.0;
            p = (struct pollfd){fd, POLLOUT, 0};
            while (poll(&p, 1, 10) == 0 && net_now() < stop &&
                   !atomic_load(aborting))
                ;
            if (atomic_load(aborting)) {
                snprintf(err, errlen, "aborted while connecting");
                goto fail;
            }
            if (p.revents != 0 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
                soerr == 0)
                break;
            errno = p.revents != 0 ? soerr : ETIMEDOUT;
        }
        if ((errno != ECONNREFUSED && errno != ETIMEDOUT) ||
            net_now() >= give_up) {
            snprintf(err, errlen,
                     "Bootstrap : Connect to %s<%d> from %s failed : %s", host,
                     port, ifname, strerror(errno));
            goto fail;
        }
        close(fd);
        fd = -1;
        usleep(100000);
    }
    {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    if (io_full(fd, hello, sizeof(hello), 1, aborting) != 0 ||
        io_full(fd, &ready, sizeof(ready), 0, aborting) != 0) {
        snprintf(err, errlen,
                 atomic_load(aborting)
                     ? "aborted while waiting for the other ranks"
                     : "Bootstrap : the root closed the connection");
        goto fail;
    }
    *out = calloc(1, sizeof(**out));
    if (*out == NULL) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    (*out)->fd = fd;
    (*out)->rank = rank;
    (*out)->nranks = nranks;
    (*out)->aborting = aborting;
    return 0;
fail:
    if (fd >= 0)
        close(fd);
    return -1;
}

int
fakenet_step(struct fakenet *n, const void *contrib, size_t len, void *all,
             int die_midway, char *err, size_t errlen)
{
    uint32_t l = htonl((uint32_t)len);
    static const unsigned char zeros[4096];

    if (len > NET_MAX_STEP) {
        snprintf(err, errlen, "step too large");
        return -1;
    }
    if (io_full(n->fd, &l, sizeof(l), 1, n->aborting) != 0)
        goto gone;
    if (die_midway && len > 0) {
        /* A peer that dies in the middle of a collective: half of its
         * data is on the wire. */
        if (contrib != NULL)
            (void)!send(n->fd, contrib, len / 2, MSG_NOSIGNAL);
        fflush(stdout);
        kill(getpid(), SIGKILL);
    }
    if (contrib != NULL) {
        if (io_full(n->fd, (void *)contrib, len, 1, n->aborting) != 0)
            goto gone;
    } else {
        for (size_t off = 0; off < len; off += sizeof(zeros)) {
            size_t k = len - off < sizeof(zeros) ? len - off : sizeof(zeros);
            if (io_full(n->fd, (void *)zeros, k, 1, n->aborting) != 0)
                goto gone;
        }
    }
    if (io_full(n->fd, &l, sizeof(l), 0, n->aborting) != 0)
        goto gone;
    if (ntohl(l) != (uint32_t)n->nranks * len) {
        snprintf(err, errlen,
                 "NET/Socket : message truncated: got %u bytes, "
                 "expected %zu",
                 ntohl(l), (size_t)n->nranks * len);
        return -1;
    }
    if (io_full(n->fd, all, (size_t)n->nranks * len, 0, n->aborting) != 0)
        goto gone;
    n->steps++;
    return 0;
gone:
    if (atomic_load(n->aborting))
        snprintf(err, errlen, "aborted");
    else
        snprintf(err, errlen,
                 "NET/Socket : connection closed by remote peer (a rank "
                 "exited or the network failed; %s in step %lu)",
                 errno != 0 ? strerror(errno) : "end of stream", n->steps);
    return -1;
}

void
fakenet_close(struct fakenet *n)
{
    if (n == NULL)
        return;
    close(n->fd);
    free(n);
}
