/* The cross-node phase of the ring check: node rank 0 gathers the job's
 * pods, runs rounds of one communicator over all their GPUs, diagnoses a
 * failure across nodes, and sends every pod the job-wide verdict. */
#include "ringcheck/multinode.h"

#include "contract/limits.h"
#include "ringcheck/netcheck.h"
#include "ringcheck/rendezvous.h"
#include "ringcheck/supervisor.h"
#include "ringcheck/worker.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

/* A connection that has not said HELLO within this long is dropped. Every
 * connection has its own budget (one frame, this long), and the leader
 * reads them all in one poll loop, so idle strangers cannot delay a real
 * node. */
#define MN_HELLO_TIMEOUT_S 2.0
/* Connections the leader reads HELLOs from at once; more wait in the
 * listen backlog until a slot frees. */
#define MN_MAX_PENDING 32
/* Short messages on an established connection. */
#define MN_SEND_TIMEOUT_S 2.0
/* The leader keeps this much of the job deadline for the verdicts. */
#define MN_VERDICT_RESERVE_S 0.5
/* A follower waits for the verdict this long past the job deadline (the
 * leader sends it by the deadline plus 0.2 s). */
#define MN_FOLLOWER_GRACE_S 0.5
/* Phases of one round (init, correctness, bandwidth, teardown): a round
 * never gets more than this many phase timeouts. */
#define MN_ROUND_PHASES 4
/* leader_round: the round lacked a participant. */
#define MN_VOID (-2)

/* The transport settings the diagnosis tries across nodes, in order. */
static const struct mn_setting {
    const char *setting, *transport, *why;
} mn_settings[] = {
    {"NCCL_IB_DISABLE=1", "NET/IB",
     "the InfiniBand/RoCE transport fails between the nodes; check the HCAs "
     "(ibstat), the subnet manager, the RDMA device plugin and the pods' "
     "memlock limit"},
    {"NCCL_NET_GDR_LEVEL=LOC", "GPUDirect RDMA",
     "GPUDirect RDMA fails; the usual cause is PCIe ACS or the IOMMU on a "
     "node, or a missing nvidia-peermem module"},
};

#define MN_NSETTINGS (sizeof(mn_settings) / sizeof(mn_settings[0]))

/* The cures a pod's own fallback can find (check.c's settings), and what
 * each turns off, for the fallback file's comment on the pods that did
 * not need it themselves. A HELLO's cure must be one of these: every node
 * runs with it, so a node may not choose any variable it likes. */
static const struct {
    const char *setting, *transport;
} mn_cure_transports[] = {
    {"NCCL_P2P_DISABLE=1", "P2P/IPC"},
    {"NCCL_SHM_DISABLE=1", "SHM"},
    {"NCCL_NVLS_ENABLE=0", "NVLS"},
    {"NCCL_CUMEM_ENABLE=0", "cuMem"},
};

struct mn_node {
    int joined;
    int gone;
    int fd; /* the leader's connection to it; -1 */
    struct rdv_hello h;
    char from[64]; /* the peer's address as seen by the leader */
    int offset;    /* first rank in the current round */
    int sent;      /* got the current round's RUN */
    int code;      /* its part of the current round */
    char what[RDV_TEXT_MAX];
};

struct mn {
    struct rc_report *rep;
    const struct rc_opts *o;
    struct mn_member m;
    double t0, deadline;
    struct mn_node node[RINGCHECK_MAX_NODES];
    int fd; /* a follower's connection to the leader; -1 */
    /* the current round's budget (both sides) */
    double round_deadline, round_phase_s;
    /* the setting a pod's own fallback needed, which every node uses */
    char base_cure[RDV_SETTING_MAX];
    /* a node that left during a round (-1 none), and the round */
    int left_node;
    unsigned left_round;
    /* the current round (leader) */
    unsigned round;
    int part[RINGCHECK_MAX_NODES];
    int npart;
    int world;
    int world1; /* ranks in the first round, the one that counts */
    const char *setting;
    /* outcome */
    int code;
    char status[RDV_WORD_MAX]; /* pass, fail, missing */
    char what[640];
    char missing[200];
    char cure[RDV_SETTING_MAX];
    char transport[RDV_WORD_MAX];
    char diag[400];
    char fix[400];
    double busbw;
    int diag_incomplete;
    struct rc_run run_buf;      /* the last run of this pod's workers */
    struct rc_report table_rep; /* round 1, for the nccl-tests table */
};

/* Appends to a fixed buffer; stops quietly when it is full. */
static void buf_add(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
buf_add(char *buf, size_t len, const char *fmt, ...)
{
    size_t n = strlen(buf);
    va_list ap;

    if (n + 1 >= len)
        return;
    va_start(ap, fmt);
    vsnprintf(buf + n, len - n, fmt, ap);
    va_end(ap);
}

static int
parse_count(const char *s, long lo, long hi, long *out)
{
    char *end;
    long l;

    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    l = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || l < lo || l > hi)
        return -1;
    *out = l;
    return 0;
}

int
mn_membership(struct mn_member *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof(*m));
    for (size_t i = 0; i < MN_VARS_COUNT; i++) {
        const struct mn_vars *v = &MN_VARS[i];
        const char *leader = getenv(v->leader);
        const char *nn = getenv(v->nnodes);
        const char *rk = getenv(v->rank);
        const char *job = getenv(MN_ENV_JOB_ID);
        const char *token = getenv(MN_ENV_JOB_TOKEN);
        long nnodes, rank;

        if (rk == NULL || nn == NULL)
            continue;
        if (parse_count(nn, 1, RINGCHECK_MAX_NODES, &nnodes) != 0) {
            snprintf(why, whylen,
                     "%s: %s=\"%s\" is not a node count from 1 to %d",
                     v->operator_name, v->nnodes, nn, RINGCHECK_MAX_NODES);
            return -1;
        }
        if (parse_count(rk, 0, nnodes - 1, &rank) != 0) {
            snprintf(why, whylen,
                     "%s: %s=\"%s\" is not a node rank from 0 to %ld",
                     v->operator_name, v->rank, rk, nnodes - 1);
            return -1;
        }
        if (nnodes > 1 && rank > 0 && (leader == NULL || *leader == '\0')) {
            snprintf(why, whylen,
                     "%s: %s is not set, so node rank %ld cannot "
                     "find node rank 0",
                     v->operator_name, v->leader, rank);
            return -1;
        }
        m->kind = v->kind;
        m->operator_name = v->operator_name;
        m->nnodes = (int)nnodes;
        m->node_rank = (int)rank;
        snprintf(m->leader, sizeof(m->leader), "%s",
                 leader != NULL ? leader : "");
        /* Without the webhook's job id, the leader's address and the node
         * count still keep apart two jobs that share a port. */
        if (job != NULL && *job != '\0')
            snprintf(m->job, sizeof(m->job), "%.128s", job);
        else
            snprintf(m->job, sizeof(m->job), "%.100s/%ld", m->leader, nnodes);
        if (token != NULL && *token != '\0') {
            if (!rdv_token_valid(token)) {
                snprintf(why, whylen,
                         "%s is set but is not %d lower-case hex digits",
                         MN_ENV_JOB_TOKEN, RDV_TOKEN_HEX);
                return -1;
            }
            snprintf(m->token, sizeof(m->token), "%s", token);
        }
        return 1;
    }
    snprintf(why, whylen,
             "no job operator's variables are set (LWS_*, PET_*, "
             "MASTER_ADDR/WORLD_SIZE/RANK, JOB_COMPLETION_INDEX or "
             "VC_TASK_INDEX with %s)",
             MN_ENV_NNODES);
    return 0;
}

int
mn_pick_interface(char *name, size_t namelen, char *addr, size_t addrlen,
                  char *have, size_t havelen)
{
    /* The one NCCL itself picks (netcheck_pick follows ncclFindInterfaces,
     * src/misc/socket.cc): running interfaces only, IPv6 as well as IPv4,
     * virbr last; NCCL_SOCKET_FAMILY narrows the family. */
    static struct netcheck_if ifs[NETCHECK_MAX_NAMES];
    const char *fam = getenv("NCCL_SOCKET_FAMILY");
    int family = fam == NULL                    ? 0
                 : strcmp(fam, "AF_INET") == 0  ? AF_INET
                 : strcmp(fam, "AF_INET6") == 0 ? AF_INET6
                                                : 0;
    int n = netcheck_if_list(ifs, NETCHECK_MAX_NAMES);
    int k = n > 0 ? netcheck_pick(ifs, n, getenv("NCCL_SOCKET_IFNAME"), family)
                  : -1;

    name[0] = addr[0] = have[0] = '\0';
    for (int i = 0; i < n; i++)
        if (i == 0 || strcmp(ifs[i].name, ifs[i - 1].name) != 0)
            buf_add(have, havelen, "%s%s", have[0] != '\0' ? ", " : "",
                    ifs[i].name);
    if (k < 0)
        return 0;
    snprintf(name, namelen, "%s", ifs[k].name);
    snprintf(addr, addrlen, "%s", ifs[k].addr);
    return 1;
}

int
mn_is_bridge(const char *ifname)
{
    static const char *const prefixes[] = {
        "docker", "cni",   "flannel",     "cilium_", "virbr",
        "br-",    "weave", "kube-bridge", "cbr",     "vxlan"};

    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(ifname, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

static int
env_is(const char *name, const char *value)
{
    const char *v = getenv(name);

    return v != NULL && strcmp(v, value) == 0;
}

/* The network transport NCCL will use between nodes, from what it sees. */
static void
local_transport(char *buf, size_t len)
{
    DIR *d = env_is("NCCL_IB_DISABLE", "1") ? NULL
                                            : opendir("/sys/class/infiniband");
    int ib = 0;
    struct dirent *de;

    if (d != NULL) {
        while ((de = readdir(d)) != NULL)
            ib += de->d_name[0] != '.';
        closedir(d);
    }
    snprintf(buf, len, "%s%s", ib > 0 ? "NET/IB" : "NET/Socket",
             ib > 0 && env_is("NCCL_NET_GDR_LEVEL", "LOC") ? " (GDR off)" : "");
}

/* What setting turns off, or NULL when it is no known cure. */
static const char *
cure_transport(const char *setting)
{
    for (size_t i = 0;
         i < sizeof(mn_cure_transports) / sizeof(mn_cure_transports[0]); i++)
        if (strcmp(setting, mn_cure_transports[i].setting) == 0)
            return mn_cure_transports[i].transport;
    return NULL;
}

/* The single-pod check failed but its own fallback will cure it: the
 * fallback file gets r->cure and the pod exits 0 (check.c, finish). */
static int
local_cured(const struct rc_report *r)
{
    char name[RDV_SETTING_MAX];
    const char *eq = strchr(r->cure, '=');

    if (r->code == 0 || r->opts->on_failure != RC_FALLBACK || eq == NULL ||
        strlen(r->cure) >= RDV_SETTING_MAX)
        return 0;
    snprintf(name, sizeof(name), "%.*s", (int)(eq - r->cure), r->cure);
    return getenv(name) == NULL && cure_transport(r->cure) != NULL;
}

static void
local_hello(struct mn *mn, struct rdv_hello *h)
{
    const struct rc_report *r = mn->rep;
    char have[200];

    memset(h, 0, sizeof(*h));
    snprintf(h->job, sizeof(h->job), "%s", mn->m.job);
    h->node_rank = (uint32_t)mn->m.node_rank;
    h->ngpus = (uint32_t)r->ndev;
    /* The outcome after this pod's own fallback: a failure that its cure
     * fixes travels with the cure, so that the leader runs every node
     * with it instead of failing the healthy pods. */
    h->local_code = r->code;
    if (local_cured(r))
        snprintf(h->cure, sizeof(h->cure), "%s", r->cure);
    if (gethostname(h->host, sizeof(h->host) - 1) != 0)
        snprintf(h->host, sizeof(h->host), "unknown");
    for (char *c = h->host; *c != '\0'; c++)
        if (*c < 0x20 || *c > 0x7e)
            *c = '?';
    if (!mn_pick_interface(h->iface, sizeof(h->iface), h->addr, sizeof(h->addr),
                           have, sizeof(have))) {
        h->iface[0] = '\0';
        snprintf(h->addr, sizeof(h->addr), "%.47s", have);
    }
    local_transport(h->transport, sizeof(h->transport));
}

static void
print_node_view(struct mn *mn)
{
    report_log("cross-node: per-node view (node rank, host, GPUs, ranks, "
               "interface, transport)");
    for (int k = 0; k < mn->m.nnodes; k++) {
        const struct mn_node *n = &mn->node[k];
        char ranks[32];

        if (!n->joined)
            continue;
        if (n->h.ngpus > 0 && mn->m.node_rank == 0)
            snprintf(ranks, sizeof(ranks), "%d-%d", n->offset,
                     n->offset + (int)n->h.ngpus - 1);
        else
            snprintf(ranks, sizeof(ranks), "-");
        report_log("cross-node: node %d  %-20s  %2u GPUs  ranks %-7s  %s %s  "
                   "%s%s",
                   k, n->h.host, n->h.ngpus, ranks,
                   n->h.iface[0] != '\0' ? n->h.iface : "no interface; has",
                   n->h.addr, n->h.transport, n->gone ? "  (gone)" : "");
    }
}

static void set_outcome(struct mn *mn, int code, const char *status,
                        const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
set_outcome(struct mn *mn, int code, const char *status, const char *fmt, ...)
{
    va_list ap;

    mn->code = code;
    snprintf(mn->status, sizeof(mn->status), "%s", status);
    va_start(ap, fmt);
    vsnprintf(mn->what, sizeof(mn->what), fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------ rounds */

static void
hex_id(const unsigned char *id, char *line, size_t len)
{
    size_t n = (size_t)snprintf(line, len, "U ");

    for (int i = 0; i < RDV_ID_BYTES && n + 3 <= len; i++)
        n += (size_t)snprintf(line + n, len - n, "%02x", id[i]);
}

static int
unhex_id(const char *line, unsigned char *id)
{
    if (line[0] != 'U' || line[1] != ' ' || strlen(line + 2) < 2 * RDV_ID_BYTES)
        return -1;
    for (int i = 0; i < RDV_ID_BYTES; i++) {
        unsigned int b;

        if (sscanf(line + 2 + 2 * i, "%2x", &b) != 1)
            return -1;
        id[i] = (unsigned char)b;
    }
    return 0;
}

static void
node_gone(struct mn *mn, int k, const char *why)
{
    struct mn_node *n = &mn->node[k];

    if (n->gone)
        return;
    n->gone = 1;
    if (n->fd >= 0) {
        close(n->fd);
        n->fd = -1;
    }
    report_log("cross-node: node %d (%s) is gone: %s", k, n->h.host, why);
}

/* Leader: rank 0 made the round's unique id; send each participant its
 * RUN. */
static void
leader_on_id(void *ctx, const char *line)
{
    struct mn *mn = ctx;
    struct rdv_msg m;
    char err[200];

    memset(&m, 0, sizeof(m));
    m.type = RDV_RUN;
    m.u.run.round = mn->round;
    m.u.run.world = (uint32_t)mn->world;
    m.u.run.phase_ms = (uint32_t)(mn->round_phase_s * 1000);
    snprintf(m.u.run.setting, sizeof(m.u.run.setting), "%s",
             mn->setting != NULL ? mn->setting : "");
    if (unhex_id(line, m.u.run.id) != 0)
        return;
    for (int i = 0; i < mn->npart; i++) {
        struct mn_node *n = &mn->node[mn->part[i]];
        double d = rdv_now() + MN_SEND_TIMEOUT_S;

        double left = mn->round_deadline - rdv_now();

        if (mn->part[i] == 0 || n->gone || n->sent)
            continue;
        m.u.run.rank_offset = (uint32_t)n->offset;
        m.u.run.left_ms = left > 0 ? (uint32_t)(left * 1000) : 0;
        if (rdv_send(n->fd, &m, d < mn->deadline ? d : mn->deadline, err,
                     sizeof(err)) != RDV_OK)
            node_gone(mn, mn->part[i], err);
        else
            n->sent = 1;
    }
}

/*
 * What NCCL chose across nodes, from the INFO log of this pod's ranks
 * (offset..), held against --expect-transport inter=. NCCL tries its
 * network plugins in order, an external one, then IB, then Socket, and
 * skips one that fails to initialise without an error (src/plugin/net.cc;
 * "NET/IB : No device found." in src/transport/net_ib/init.cc when a pod
 * has no HCA): a ring that works but over NET/Socket is a failure of its
 * own (exit 10), which no bandwidth figure explains. Returns 0 or
 * RC_EXIT_TRANSPORT with what into what.
 */
static int
judge_transport(struct mn *mn, const struct rc_run *run, int offset, char *what,
                size_t whatlen)
{
    const char *inter = mn->o->expect.inter;
    char why[400];
    int w;

    if (inter[0] == '\0')
        return 0;
    w = run->nl_read ? nccllog_worst(&run->nl, 1) : -1;
    if (w < 0) {
        report_log("cross-node: warning: --expect-transport inter=%s: what "
                   "NCCL chose across nodes is unknown (%s)",
                   inter,
                   run->nl_note[0] != '\0' ? run->nl_note
                   : run->nl_read          ? "no channel to another node"
                                           : "NCCL wrote no INFO log");
        return 0;
    }
    if (nccllog_expect(&run->nl, "", inter, NULL, mn->rep->ndev, offset, why,
                       sizeof(why)) != 0) {
        snprintf(what, whatlen, "%s", why);
        return RC_EXIT_TRANSPORT;
    }
    report_log("cross-node: the transport across nodes is as expected: %s "
               "(--expect-transport inter=%s)",
               nccllog_class_name(w), inter);
    return 0;
}

/* The verdict on one run of this pod's workers (ranks offset..) in a
 * round. */
static int
judge_run(struct mn *mn, const struct rc_run *run, int world, int offset,
          double *busbw, long *wrong, char *what, size_t whatlen)
{
    *busbw = -1;
    *wrong = 0;
    for (int i = 0; i < run->nrows; i++) {
        const struct rc_row *row = &run->rows[i];

        *wrong += row->wrong;
        if (row->timed && row->time_us > 0) {
            double a = (double)row->bytes / row->time_us / 1e3;
            *busbw = world > 1 ? a * 2.0 * (world - 1) / world : a;
        }
    }
    if (run->code != 0) {
        snprintf(what, whatlen, "%.500s", run->what);
        return run->code;
    }
    if (*wrong > 0) {
        snprintf(what, whatlen, "wrong results: %ld values differ", *wrong);
        return RC_EXIT_WRONG;
    }
    /* The transport before the bandwidth: it explains a low figure. */
    if (judge_transport(mn, run, offset, what, whatlen) != 0)
        return RC_EXIT_TRANSPORT;
    /* Across nodes the network sets the pace: a node's NVLink figure
     * (--min-busbw) says nothing about it, so the cross-node rounds have
     * their own threshold. */
    if (mn->o->min_busbw_net > 0 && *busbw >= 0 &&
        *busbw < mn->o->min_busbw_net) {
        snprintf(what, whatlen,
                 "bus bandwidth %.2f GB/s across nodes is below "
                 "--min-busbw-net %.2f GB/s",
                 *busbw, mn->o->min_busbw_net);
        return RC_EXIT_BANDWIDTH;
    }
    what[0] = '\0';
    return 0;
}

/* Runs this pod's part of a round: ranks offset.. of world. */
static int
run_local_part(struct mn *mn, int world, int offset, const char *id_line,
               const char *setting, double phase_s, double deadline,
               double *busbw, long *wrong, char *what, size_t whatlen)
{
    const struct rc_report *r = mn->rep;
    struct sv_spec s;
    char name[RDV_SETTING_MAX], value[RDV_SETTING_MAX];

    memset(&s, 0, sizeof(s));
    s.kind = SV_RING;
    s.group = mn->o->group;
    s.ndev = r->ndev;
    memcpy(s.dev, r->dev, sizeof(s.dev));
    s.bw_bytes = r->bw_bytes;
    /* Across nodes the correctness phase stops at 1 MiB: every round costs
     * the whole job's time, and the bandwidth phase (--bw-bytes, results
     * checked) covers the large sizes and their protocols. */
    s.check_max_bytes = (size_t)1 << 20;
    s.phase_timeout_s = phase_s;
    s.deadline = deadline;
    s.label = "cross-node: ";
    s.world = world;
    s.rank_offset = offset;
    s.id_line = id_line;
    if (id_line == NULL)
        s.on_id = leader_on_id;
    s.on_id_ctx = mn;
    if (setting != NULL && setting[0] != '\0') {
        const char *eq = strchr(setting, '=');

        snprintf(name, sizeof(name), "%.*s",
                 eq != NULL ? (int)(eq - setting) : 0, setting);
        snprintf(value, sizeof(value), "%s", eq != NULL ? eq + 1 : "");
        s.env_name = name;
        s.env_value = value;
    }
    sv_run(&s, &mn->run_buf);
    return judge_run(mn, &mn->run_buf, world, offset, busbw, wrong, what,
                     whatlen);
}

/* A round's phase timeout: NCCL's bootstrap and its connection setup grow
 * with the number of nodes, so the phase timeout grows with them too. */
static double
round_phase_timeout(const struct mn *mn, int nnodes)
{
    return mn->o->phase_timeout_s * (1.0 + (nnodes - 1) / 8.0);
}

/*
 * Leader: one round over the nodes in parts[0..np-1] (node 0 first) with
 * setting (or NULL), as one of rounds_left rounds that share what is left
 * of the job deadline. Returns the round's code; -1 when no time is left;
 * MN_VOID when a participant left (before or during the round), with
 * *failed that node and what saying so. *failed is otherwise the first
 * failing node (-1 none).
 */
static int
leader_round(struct mn *mn, const int *parts, int np, const char *setting,
             int rounds_left, int *failed, char *what, size_t whatlen)
{
    char err[200], mywhat[RDV_TEXT_MAX];
    double busbw, left, budget, pt, wait;
    long wrong;
    int code, off = 0;

    *failed = -1;
    what[0] = '\0';
    for (int i = 0; i < np; i++)
        if (mn->node[parts[i]].gone) {
            *failed = parts[i];
            snprintf(what, whatlen, "node %d (%s) left the job before round %u",
                     parts[i], mn->node[parts[i]].h.host, mn->round + 1);
            return MN_VOID;
        }
    left = mn->deadline - MN_VERDICT_RESERVE_S - rdv_now();
    if (left < 1.0)
        return -1;
    /* The rounds still to come share what is left; none gets more than
     * its phases' timeouts. */
    pt = round_phase_timeout(mn, np);
    budget = left / (rounds_left > 0 ? rounds_left : 1);
    if (budget > MN_ROUND_PHASES * pt)
        budget = MN_ROUND_PHASES * pt;
    mn->round_deadline = rdv_now() + budget;
    mn->round_phase_s = pt < budget ? pt : budget;
    mn->round++;
    mn->npart = 0;
    for (int i = 0; i < np; i++) {
        struct mn_node *n = &mn->node[parts[i]];

        mn->part[mn->npart++] = parts[i];
        n->offset = off;
        n->sent = 0;
        n->code = -1;
        off += (int)n->h.ngpus;
    }
    mn->world = off;
    mn->setting = setting;
    code = run_local_part(mn, mn->world, 0, NULL, setting, mn->round_phase_s,
                          mn->round_deadline, &busbw, &wrong, mywhat,
                          sizeof(mywhat));
    if (mn->round == 1) {
        mn->busbw = busbw;
        memcpy(&mn->table_rep, mn->rep, sizeof(mn->table_rep));
        mn->table_rep.ring = mn->run_buf;
        mn->table_rep.ndev = mn->world;
        mn->world1 = mn->world;
    }
    mn->node[0].code = code;
    snprintf(mn->node[0].what, sizeof(mn->node[0].what), "%s", mywhat);
    /* The others end their part by the same round deadline, then report. */
    wait = mn->round_deadline + MN_SEND_TIMEOUT_S;
    if (wait > mn->deadline)
        wait = mn->deadline;
    for (int i = 1; i < mn->npart; i++) {
        struct mn_node *n = &mn->node[mn->part[i]];
        struct rdv_msg m;

        if (!n->sent || n->gone) {
            n->code = RC_EXIT_INTERNAL;
            snprintf(n->what, sizeof(n->what), "%s",
                     n->gone ? "the node went away"
                             : "the round did not start (no unique id)");
            continue;
        }
        for (;;) {
            int r = rdv_recv(n->fd, &m, wait, err, sizeof(err));

            if (r != RDV_OK) {
                if (r == RDV_EPEER)
                    node_gone(mn, mn->part[i], err);
                n->code = RC_EXIT_TIMEOUT;
                snprintf(n->what, sizeof(n->what), "no result from node %d: %s",
                         mn->part[i], err);
                break;
            }
            if (m.type == RDV_RESULT && m.u.result.round == mn->round) {
                n->code = m.u.result.code;
                snprintf(n->what, sizeof(n->what), "%s", m.u.result.what);
                break;
            }
        }
    }
    /* A round that lacks a participant proves nothing about the job: not
     * a pass, and not a failure that a setting could cure. */
    for (int i = 1; i < mn->npart; i++)
        if (mn->node[mn->part[i]].gone) {
            const struct mn_node *n = &mn->node[mn->part[i]];

            *failed = mn->part[i];
            snprintf(what, whatlen, "node %d (%s) left during round %u (%s)",
                     mn->part[i], n->h.host, mn->round, n->what);
            report_log("cross-node: round %u is void: %s", mn->round, what);
            return MN_VOID;
        }
    /* A node's failure echoes on the others: they time out, or see their
     * connections close. Name the node that failed first-hand: then one
     * that timed out; then any. */
    for (int pass = 0; pass < 3 && *failed < 0; pass++)
        for (int i = 0; i < mn->npart; i++) {
            const struct mn_node *n = &mn->node[mn->part[i]];
            int echo = strstr(n->what, "connection closed by remote") != NULL ||
                       strstr(n->what, "closed the connection") != NULL;

            if (n->code == 0 || *failed >= 0 ||
                (pass == 0 && (n->code == RC_EXIT_TIMEOUT || echo)) ||
                (pass == 1 && n->code != RC_EXIT_TIMEOUT))
                continue;
            *failed = mn->part[i];
            code = n->code;
            snprintf(what, whatlen, "node %d (%s): %s", mn->part[i], n->h.host,
                     n->what);
        }
    if (*failed < 0)
        code = 0;
    {
        char list[128] = "";

        for (int i = 0; i < mn->npart; i++)
            buf_add(list, sizeof(list), "%s%d", i > 0 ? "," : "", mn->part[i]);
        report_log("cross-node: round %u: nodes %s (%d ranks)%s%s: %s%s%s",
                   mn->round, list, mn->world, setting != NULL ? " with " : "",
                   setting != NULL ? setting : "",
                   code == 0 ? "pass" : report_code_name(code),
                   code != 0 ? ": " : "", code != 0 ? what : "");
    }
    return code;
}

/* A round was void: remember the node that left, and drop any cure. */
static void
note_left(struct mn *mn, int k, const char *what)
{
    if (mn->left_node < 0) {
        mn->left_node = k;
        mn->left_round = mn->round;
    }
    mn->cure[0] = mn->transport[0] = '\0';
    buf_add(mn->diag, sizeof(mn->diag), "%saborted: %s, so no cure is written",
            mn->diag[0] != '\0' ? "; " : "", what);
}

static void
leader_diagnose(struct mn *mn)
{
    char what[640];
    int failed;
    int n = mn->m.nnodes;
    const char *base = mn->base_cure[0] != '\0' ? mn->base_cure : NULL;
    int rounds_left = n > 2 ? n - 1 : 0, all[RINGCHECK_MAX_NODES];
    int stop = 0;

    report_log("cross-node: diagnosis: rerunning with other settings and "
               "node pairs");
    for (int j = 0; j < n; j++)
        all[j] = j;
    /* A pod's own cure is already on every node, and a round takes one
     * setting: the transport settings are not tried on top of it. */
    if (base != NULL)
        report_log("cross-node: diagnosis: every node runs with %s (a pod's "
                   "own fallback); other settings are not tried",
                   base);
    else
        rounds_left += (int)MN_NSETTINGS;
    for (size_t i = 0; i < MN_NSETTINGS && base == NULL && !stop; i++) {
        const struct mn_setting *s = &mn_settings[i];
        char name[40];
        const char *eq = strchr(s->setting, '=');
        int r;

        snprintf(name, sizeof(name), "%.*s", (int)(eq - s->setting),
                 s->setting);
        if (env_is(name, eq + 1)) {
            report_log("cross-node: diagnosis: %s is already set; skipped",
                       s->setting);
            rounds_left--;
            continue;
        }
        r = leader_round(mn, all, n, s->setting, rounds_left--, &failed, what,
                         sizeof(what));
        if (r == MN_VOID) {
            note_left(mn, failed, what);
            stop = 1;
        } else if (r < 0) {
            mn->diag_incomplete = 1;
            stop = 1;
        } else if (r == RC_EXIT_TRANSPORT) {
            /* It works with the setting, but over a transport the policy
             * does not allow (NCCL_IB_DISABLE=1 leaves sockets): no cure. */
            buf_add(mn->diag, sizeof(mn->diag),
                    "%s%s makes the ring work, but not over the expected "
                    "transport (--expect-transport inter=%s), so it is no "
                    "cure",
                    mn->diag[0] != '\0' ? "; " : "", s->setting,
                    mn->o->expect.inter);
        } else if (r == 0) {
            snprintf(mn->cure, sizeof(mn->cure), "%s", s->setting);
            snprintf(mn->transport, sizeof(mn->transport), "%s", s->transport);
            buf_add(mn->diag, sizeof(mn->diag), "passes with %s (%s)",
                    s->setting, s->transport);
            snprintf(mn->fix, sizeof(mn->fix),
                     "set %s on every node of this job (the fallback file "
                     "does that); %s",
                     s->setting, s->why);
            rounds_left -= (int)(MN_NSETTINGS - 1 - i);
            break;
        }
    }
    if (mn->cure[0] == '\0' && !stop && base == NULL)
        buf_add(mn->diag, sizeof(mn->diag),
                "neither NCCL_IB_DISABLE=1 nor NCCL_NET_GDR_LEVEL=LOC makes "
                "it pass");
    if (!stop && n > 2) {
        char bad[120] = "";

        for (int k = 1; k < n && !stop; k++) {
            int pair[2] = {0, k};
            int r = leader_round(mn, pair, 2, base, rounds_left--, &failed,
                                 what, sizeof(what));

            if (r == MN_VOID) {
                note_left(mn, failed, what);
                stop = 1;
            } else if (r < 0) {
                mn->diag_incomplete = 1;
                stop = 1;
            } else if (r != 0)
                buf_add(bad, sizeof(bad), "%snode 0 - node %d",
                        bad[0] != '\0' ? ", " : "", k);
        }
        if (bad[0] != '\0')
            buf_add(mn->diag, sizeof(mn->diag), "; failing pairs: %s", bad);
        else if (!stop)
            buf_add(mn->diag, sizeof(mn->diag),
                    "; every pair with node 0 passes alone");
    }
    if (mn->diag_incomplete)
        buf_add(mn->diag, sizeof(mn->diag),
                "%sincomplete: the cross-node deadline came first",
                mn->diag[0] != '\0' ? "; " : "");
    if (mn->left_node >= 0) {
        buf_add(mn->what, sizeof(mn->what),
                "; node %d (%s) left during diagnosis round %u, so the "
                "diagnosis was aborted and no cure is written",
                mn->left_node, mn->node[mn->left_node].h.host, mn->left_round);
        snprintf(mn->fix, sizeof(mn->fix),
                 "node %d's pod stopped in the middle of the check (OOM kill, "
                 "eviction, init-container restart): see its events and "
                 "logs; the whole job must check again",
                 mn->left_node);
    }
    report_log("cross-node: diagnosis: %s", mn->diag);
}

/* Leader: the interface names across nodes, before any round. */
static void
leader_interface_notes(struct mn *mn)
{
    const char *first = NULL;

    for (int k = 0; k < mn->m.nnodes; k++) {
        const struct mn_node *n = &mn->node[k];

        if (!n->joined)
            continue;
        if (n->h.iface[0] == '\0') {
            buf_add(mn->diag, sizeof(mn->diag),
                    "%snode %d (%s) has no interface NCCL can use (it has: "
                    "%s)",
                    mn->diag[0] != '\0' ? "; " : "", k, n->h.host, n->h.addr);
            continue;
        }
        if (mn_is_bridge(n->h.iface))
            buf_add(mn->diag, sizeof(mn->diag),
                    "%snode %d (%s) uses %s, a container bridge that other "
                    "nodes cannot reach; set NCCL_SOCKET_IFNAME to the fabric "
                    "interface",
                    mn->diag[0] != '\0' ? "; " : "", k, n->h.host, n->h.iface);
        if (first == NULL)
            first = n->h.iface;
        else if (strcmp(first, n->h.iface) != 0 &&
                 strstr(mn->diag, "interfaces differ") == NULL)
            buf_add(mn->diag, sizeof(mn->diag),
                    "%sinterfaces differ between nodes (%s on node 0, %s on "
                    "node %d)",
                    mn->diag[0] != '\0' ? "; " : "", first, n->h.iface, k);
    }
    if (mn->diag[0] != '\0')
        report_log("cross-node: warning: %s", mn->diag);
}

/* A connection that has not said HELLO yet. */
struct mn_pending {
    int fd;
    double deadline; /* its own time budget */
    char from[64];
    unsigned char nonce[RDV_NONCE_BYTES];
    struct rdv_reader rd; /* its own byte budget: one frame */
};

/* Leader: why the HELLO h from a connection that was sent nonce may not
 * join, into reason (left "" when it may). */
static void
judge_hello(const struct mn *mn, const struct rdv_msg *m,
            const unsigned char *nonce, char *reason, size_t len)
{
    const struct rdv_hello *h = &m->u.hello;
    long k = (long)h->node_rank;
    unsigned char want[RDV_PROOF_BYTES];

    reason[0] = '\0';
    if (m->type != RDV_HELLO)
        snprintf(reason, len, "expected HELLO, got %s", rdv_type_name(m->type));
    else if (h->job[0] == '\0')
        snprintf(reason, len, "the HELLO has an empty job id");
    else if (strcmp(h->job, mn->m.job) != 0) /* whole ids, not prefixes */
        snprintf(reason, len, "job id \"%.128s\" is not this job's", h->job);
    else if (k <= 0 || k >= mn->m.nnodes)
        snprintf(reason, len, "node rank %ld is outside 1..%d", k,
                 mn->m.nnodes - 1);
    else if (h->ngpus > RINGCHECK_MAX_GPUS ||
             (h->ngpus < RINGCHECK_MIN_GPUS &&
              (h->local_code == 0 || h->cure[0] != '\0')))
        /* A pod whose own check failed before it counted its GPUs says 0;
         * one that takes part in the rounds has 1 to the limit. */
        snprintf(reason, len,
                 "node rank %ld claims %u GPUs; a pod has %d to %d", k,
                 h->ngpus, RINGCHECK_MIN_GPUS, RINGCHECK_MAX_GPUS);
    else if (h->cure[0] != '\0' && cure_transport(h->cure) == NULL)
        snprintf(reason, len,
                 "node rank %ld sent \"%.48s\", which is no fallback cure", k,
                 h->cure);
    else if (mn->m.token[0] != '\0' &&
             (rdv_proof(mn->m.token, nonce, h->job, h->node_rank, want) != 0 ||
              !rdv_proof_equal(want, h->proof)))
        snprintf(reason, len,
                 "node rank %ld does not hold this job's token (%s): a pod "
                 "the webhook did not admit into this job",
                 k, MN_ENV_JOB_TOKEN);
}

/* Leader: a HELLO arrived on pending connection p. Returns 1 when its
 * node joined (the connection is then the node's), else 0 (closed). */
static int
leader_admit(struct mn *mn, struct mn_pending *p, const struct rdv_msg *m)
{
    struct rdv_msg rej;
    char err[200];
    int k = (int)m->u.hello.node_rank;
    struct mn_node *n;
    int was;

    memset(&rej, 0, sizeof(rej));
    rej.type = RDV_REJECT;
    judge_hello(mn, m, p->nonce, rej.u.reject.reason,
                sizeof(rej.u.reject.reason));
    if (rej.u.reject.reason[0] != '\0') {
        double d = rdv_now() + 0.5;

        report_log("cross-node: rejected %s: %s", p->from, rej.u.reject.reason);
        (void)!rdv_send(p->fd, &rej, d < mn->deadline ? d : mn->deadline, err,
                        sizeof(err));
        close(p->fd);
        return 0;
    }
    n = &mn->node[k];
    was = n->joined;
    if (was) {
        /* The kubelet restarts a failed init container: the newest process
         * for a rank is the live one (and it proved the job's token when
         * there is one). */
        report_log("cross-node: node %d rejoined from %s; its earlier "
                   "connection from %s is replaced",
                   k, p->from, n->from);
        if (n->fd >= 0)
            close(n->fd);
    }
    n->joined = 1;
    n->gone = 0;
    n->fd = p->fd;
    n->h = m->u.hello;
    snprintf(n->from, sizeof(n->from), "%s", p->from);
    report_log("cross-node: node %d joined from %s (%s, %u GPUs)%s%s", k,
               p->from, m->u.hello.host, m->u.hello.ngpus,
               m->u.hello.local_code == 0 ? ""
               : m->u.hello.cure[0] != '\0'
                   ? ", its own check passes only with "
                   : ", its own check failed",
               m->u.hello.local_code != 0 ? m->u.hello.cure : "");
    return !was;
}

/* Leader: accepts one connection into p and sends it its CHALLENGE.
 * Returns 1, 0 when there is none, -1 when it was dropped. */
static int
leader_accept(struct mn *mn, int lfd, struct mn_pending *p)
{
    struct sockaddr_storage sa;
    socklen_t sl = sizeof(sa);
    struct rdv_msg ch;
    char err[200];
    double left, d;
    int c =
        accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (c < 0)
        return 0;
    memset(p, 0, sizeof(*p));
    p->fd = c;
    snprintf(p->from, sizeof(p->from), "?");
    getnameinfo((struct sockaddr *)&sa, sl, p->from, sizeof(p->from), NULL, 0,
                NI_NUMERICHOST);
    if (strncmp(p->from, "::ffff:", 7) == 0)
        memmove(p->from, p->from + 7, strlen(p->from + 7) + 1);
    p->deadline = rdv_now() + MN_HELLO_TIMEOUT_S;
    memset(&ch, 0, sizeof(ch));
    ch.type = RDV_CHALLENGE;
    if (getrandom(p->nonce, sizeof(p->nonce), 0) != (ssize_t)sizeof(p->nonce)) {
        report_log("cross-node: dropped a connection from %s: no random "
                   "nonce: %s",
                   p->from, strerror(errno));
        close(c);
        return -1;
    }
    memcpy(ch.u.challenge.nonce, p->nonce, sizeof(p->nonce));
    /* The job's one deadline: every node ends by it, whenever it
     * started. */
    left = mn->deadline - rdv_now();
    ch.u.challenge.left_ms = left > 0 ? (uint32_t)(left * 1000) : 0;
    /* A fresh socket's buffer takes the small frame at once. */
    d = rdv_now() + 0.2;
    if (rdv_send(c, &ch, d, err, sizeof(err)) != RDV_OK) {
        report_log("cross-node: dropped a connection from %s: %s", p->from,
                   err);
        close(c);
        return -1;
    }
    return 1;
}

/*
 * Leader: gathers the nodes until all joined or the deadline. One poll
 * loop reads every connection at once, each within its own budget, and
 * watches the joined ones: a node whose connection closes before the
 * rounds may rejoin.
 */
static int
leader_gather(struct mn *mn, int lfd)
{
    struct mn_pending pend[MN_MAX_PENDING];
    int npend = 0, joined = 1;

    while (joined < mn->m.nnodes) {
        struct pollfd pfd[1 + MN_MAX_PENDING + RINGCHECK_MAX_NODES];
        int who[RINGCHECK_MAX_NODES];
        int nfd = 0, nwatch = 0, listening = npend < MN_MAX_PENDING;
        double now = rdv_now(), wake = mn->deadline;
        char err[200];

        if (now >= mn->deadline)
            break;
        if (listening)
            pfd[nfd++] = (struct pollfd){lfd, POLLIN, 0};
        for (int i = 0; i < npend; i++) {
            pfd[nfd++] = (struct pollfd){pend[i].fd, POLLIN, 0};
            if (pend[i].deadline < wake)
                wake = pend[i].deadline;
        }
        for (int k = 1; k < mn->m.nnodes; k++)
            if (mn->node[k].joined && mn->node[k].fd >= 0) {
                who[nwatch++] = k;
                pfd[nfd++] = (struct pollfd){mn->node[k].fd, POLLIN, 0};
            }
        if (poll(pfd, (nfds_t)nfd, (int)((wake - now) * 1000) + 1) < 0 &&
            errno != EINTR)
            break;
        now = rdv_now();
        /* A joined node says nothing until its first RUN: input on its
         * connection is its end (or garbage, the same). */
        for (int w = 0; w < nwatch; w++) {
            struct pollfd *q = &pfd[nfd - nwatch + w];
            struct mn_node *n = &mn->node[who[w]];

            if (q->revents == 0)
                continue;
            report_log("cross-node: node %d's connection from %s closed "
                       "before the rounds; waiting for it to rejoin",
                       who[w], n->from);
            close(n->fd);
            n->fd = -1;
            n->joined = 0;
            joined--;
        }
        for (int i = 0, base = listening; i < npend;) {
            struct pollfd *q = &pfd[base + i];
            struct rdv_msg m;
            int r = RDV_AGAIN;

            if (q->fd == pend[i].fd && q->revents != 0)
                r = rdv_reader_feed(&pend[i].rd, pend[i].fd, &m, err,
                                    sizeof(err));
            if (r == RDV_AGAIN && now < pend[i].deadline) {
                i++;
                continue;
            }
            if (r == RDV_OK)
                joined += leader_admit(mn, &pend[i], &m);
            else {
                report_log("cross-node: dropped a connection from %s: %s",
                           pend[i].from,
                           r == RDV_AGAIN ? "no HELLO within its time budget"
                                          : err);
                close(pend[i].fd);
            }
            /* Keep the poll slots in step: the last pending one moves
             * here, and so does its poll entry. */
            pend[i] = pend[npend - 1];
            pfd[base + i] = pfd[base + npend - 1];
            npend--;
        }
        while (listening && (pfd[0].revents & POLLIN) &&
               npend < MN_MAX_PENDING) {
            int r = leader_accept(mn, lfd, &pend[npend]);

            if (r == 0)
                break;
            if (r > 0)
                npend++;
        }
    }
    for (int i = 0; i < npend; i++) {
        report_log("cross-node: dropped a connection from %s: the gathering "
                   "ended",
                   pend[i].from);
        close(pend[i].fd);
    }
    return joined;
}

static void
leader_send_verdicts(struct mn *mn)
{
    struct rdv_msg m;
    char err[200];

    memset(&m, 0, sizeof(m));
    m.type = RDV_VERDICT;
    m.u.verdict.code = mn->code;
    snprintf(m.u.verdict.result, sizeof(m.u.verdict.result), "%s", mn->status);
    snprintf(m.u.verdict.cure, sizeof(m.u.verdict.cure), "%s", mn->cure);
    snprintf(m.u.verdict.transport, sizeof(m.u.verdict.transport), "%s",
             mn->transport);
    snprintf(m.u.verdict.what, sizeof(m.u.verdict.what), "%.*s",
             (int)sizeof(m.u.verdict.what) - 1, mn->what);
    for (int k = 1; k < mn->m.nnodes; k++) {
        struct mn_node *n = &mn->node[k];
        double d = rdv_now() + MN_SEND_TIMEOUT_S;

        if (!n->joined || n->gone)
            continue;
        /* The verdict is due by the deadline; a slow peer gets at most a
         * short grace after it. */
        if (d > mn->deadline + 0.2)
            d = mn->deadline + 0.2;
        if (rdv_send(n->fd, &m, d, err, sizeof(err)) != RDV_OK)
            node_gone(mn, k, err);
    }
}

static void
leader_main(struct mn *mn)
{
    char err[200];
    int lfd = rdv_listen(mn->o->rendezvous_port, err, sizeof(err));
    int joined, all[RINGCHECK_MAX_NODES], code, failed, cured = -1;
    const char *base;
    char what[640];

    mn->node[0].joined = 1;
    local_hello(mn, &mn->node[0].h);
    if (lfd < 0) {
        set_outcome(mn, RC_EXIT_ENV, "fail", "node rank 0 %s", err);
        snprintf(mn->fix, sizeof(mn->fix),
                 "free the port or choose another with --rendezvous-port "
                 "(policy ringCheck.rendezvousPort)");
        return;
    }
    report_log("cross-node: node rank 0 of %d (%s); listening on port %d for "
               "the others",
               mn->m.nnodes, mn->m.operator_name, mn->o->rendezvous_port);
    joined = leader_gather(mn, lfd);
    close(lfd);
    for (int k = 0, off = 0; k < mn->m.nnodes; k++)
        if (mn->node[k].joined) {
            mn->node[k].offset = off;
            off += (int)mn->node[k].h.ngpus;
        }
    print_node_view(mn);
    if (joined < mn->m.nnodes) {
        for (int k = 1; k < mn->m.nnodes; k++)
            if (!mn->node[k].joined)
                buf_add(mn->missing, sizeof(mn->missing), "%s%d",
                        mn->missing[0] != '\0' ? "," : "", k);
        set_outcome(mn, RC_EXIT_TIMEOUT, "missing",
                    "only %d of %d nodes joined by the cross-node deadline "
                    "(%.0f s); missing node ranks: %s",
                    joined, mn->m.nnodes, mn->o->multi_node_timeout_s,
                    mn->missing);
        snprintf(mn->fix, sizeof(mn->fix),
                 "the missing pods did not reach port %d of node rank 0 "
                 "in time: check that they were scheduled, that a "
                 "NetworkPolicy allows the port, and their own ring-check "
                 "logs",
                 mn->o->rendezvous_port);
        leader_send_verdicts(mn);
        return;
    }
    for (int k = 0; k < mn->m.nnodes; k++)
        if (mn->node[k].h.local_code != 0 && mn->node[k].h.cure[0] == '\0') {
            set_outcome(mn, mn->node[k].h.local_code, "fail",
                        "node %d (%s) failed its single-pod check (%s), so "
                        "the cross-node check did not run",
                        k, mn->node[k].h.host,
                        report_code_name(mn->node[k].h.local_code));
            snprintf(mn->fix, sizeof(mn->fix),
                     "see the ring-check log of node %d's pod", k);
            leader_send_verdicts(mn);
            return;
        }
    /* A pod whose own fallback cured it: every node runs with its cure,
     * and the job ends with it on every pod, or fails on every pod. */
    for (int k = 0; k < mn->m.nnodes; k++) {
        const struct rdv_hello *h = &mn->node[k].h;

        if (h->cure[0] == '\0')
            continue;
        if (mn->base_cure[0] == '\0') {
            snprintf(mn->base_cure, sizeof(mn->base_cure), "%s", h->cure);
            cured = k;
            report_log("cross-node: node %d (%s) passes its single-pod check "
                       "only with %s: every node runs the rounds with it",
                       k, h->host, h->cure);
        } else if (strcmp(mn->base_cure, h->cure) != 0) {
            set_outcome(mn, RC_EXIT_ENV, "fail",
                        "node %d passes its single-pod check only with %s and "
                        "node %d only with %s; the job's pods need one "
                        "setting",
                        cured, mn->base_cure, k, h->cure);
            snprintf(mn->fix, sizeof(mn->fix),
                     "set both on every node of the job, or drain the nodes "
                     "whose GPUs need them (see each pod's ring-check log)");
            leader_send_verdicts(mn);
            return;
        }
    }
    leader_interface_notes(mn);
    for (int k = 0; k < mn->m.nnodes; k++)
        all[k] = k;
    base = mn->base_cure[0] != '\0' ? mn->base_cure : NULL;
    code = leader_round(mn, all, mn->m.nnodes, base, 1, &failed, what,
                        sizeof(what));
    if (code == MN_VOID) {
        /* A node that drops out in round 1 fails the job: the ring never
         * ran over all of it. */
        note_left(mn, failed, what);
        set_outcome(mn, RC_EXIT_NCCL, "fail",
                    "the ring over %d nodes is void: %s; a ring without it "
                    "proves nothing",
                    mn->m.nnodes, what);
        snprintf(mn->fix, sizeof(mn->fix),
                 "node %d's pod stopped in the middle of the check (OOM kill, "
                 "eviction, init-container restart): see its events and "
                 "logs; the whole job must check again",
                 failed);
    } else if (code == 0 && base != NULL) {
        set_outcome(mn, mn->node[cured].h.local_code, "fallback",
                    "node %d (%s) passes only with %s; the ring over %d nodes "
                    "(%d ranks) passed with it on every node, so every pod "
                    "uses it",
                    cured, mn->node[cured].h.host, base, mn->m.nnodes,
                    mn->world1);
        snprintf(mn->cure, sizeof(mn->cure), "%s", base);
        snprintf(mn->transport, sizeof(mn->transport), "%s",
                 cure_transport(base));
        snprintf(mn->fix, sizeof(mn->fix),
                 "node %d's GPUs need %s (see its ring-check log); every pod "
                 "of the job writes it to its fallback file",
                 cured, base);
    } else if (code == 0) {
        set_outcome(mn, 0, "pass", "the ring over %d nodes (%d ranks) passed",
                    mn->m.nnodes, mn->world1);
    } else if (code == RC_EXIT_TRANSPORT) {
        /* The ring works: no setting that turns a transport off brings
         * the expected one back, so there is nothing to diagnose. */
        set_outcome(mn, code, "fail",
                    "the ring over %d nodes (%d ranks) works, but not over "
                    "the transport the policy expects: %s",
                    mn->m.nnodes, mn->world1, what);
        snprintf(mn->fix, sizeof(mn->fix),
                 "NCCL fell back to another network without an error: IB "
                 "needs the RDMA devices in every pod (/dev/infiniband/"
                 "uverbs*, the RDMA device plugin's resource), an "
                 "NCCL_IB_HCA that names them and no NCCL_IB_DISABLE=1; GPU "
                 "Direct RDMA needs nvidia-peermem or dma-buf on each node");
    } else {
        if (code < 0) {
            code = RC_EXIT_TIMEOUT;
            snprintf(what, sizeof(what),
                     "no time left for the cross-node ring");
        }
        set_outcome(mn, code, "fail",
                    "the ring over %d nodes (%d ranks) failed%s%s: %s",
                    mn->m.nnodes, mn->world1, base != NULL ? " with " : "",
                    base != NULL ? base : "", what);
        if (mn->o->diagnose || mn->o->on_failure == RC_FALLBACK)
            leader_diagnose(mn);
        if (mn->fix[0] == '\0')
            snprintf(mn->fix, sizeof(mn->fix),
                     "check the network between the nodes (NCCL_DEBUG=INFO "
                     "shows the interface and transport each rank uses), "
                     "the interface names, and the failing pair above");
    }
    leader_send_verdicts(mn);
}

/* ------------------------------------------------------------ followers */

static void
follower_main(struct mn *mn)
{
    char err[300];
    struct rdv_msg m;
    struct rdv_hello self;
    int attempts = 0;
    int last_code = 0;
    unsigned last_round = 0;
    char last_what[RDV_TEXT_MAX] = "";

    report_log("cross-node: node rank %d of %d (%s); joining node rank 0 at "
               "%s port %d",
               mn->m.node_rank, mn->m.nnodes, mn->m.operator_name, mn->m.leader,
               mn->o->rendezvous_port);
    local_hello(mn, &self);
    mn->node[mn->m.node_rank].joined = 1;
    mn->node[mn->m.node_rank].h = self;
    mn->fd = rdv_connect(mn->m.leader, mn->o->rendezvous_port, mn->deadline,
                         &attempts, err, sizeof(err));
    if (mn->fd < 0) {
        set_outcome(mn, RC_EXIT_TIMEOUT, "missing",
                    "could not reach node rank 0 by the cross-node deadline "
                    "(%.0f s, %d attempts): %s",
                    mn->o->multi_node_timeout_s, attempts, err);
        snprintf(mn->fix, sizeof(mn->fix), "%s",
                 strstr(err, "resolve") != NULL
                     ? "the leader's name does not resolve: its headless "
                       "Service must publish not-ready addresses "
                       "(publishNotReadyAddresses) while the pods initialise"
                     : "check that node rank 0's pod runs and that a "
                       "NetworkPolicy allows the rendezvous port");
        print_node_view(mn);
        return;
    }
    report_log("cross-node: joined node rank 0 after %d attempts", attempts);
    if (rdv_recv(mn->fd, &m, mn->deadline, err, sizeof(err)) != RDV_OK ||
        m.type != RDV_CHALLENGE) {
        set_outcome(mn, RC_EXIT_TIMEOUT, "missing",
                    "node rank 0 sent no CHALLENGE: %s",
                    m.type != RDV_CHALLENGE && err[0] == '\0' ? "another "
                                                                "message"
                                                              : err);
        return;
    }
    {
        /* The leader's deadline is the job's: adopt it, so that no node
         * leaves in the middle of a round because it started earlier. It
         * never stretches this pod's wait past its own timeout from now. */
        double left = m.u.challenge.left_ms / 1000.0;

        if (left > mn->o->multi_node_timeout_s)
            left = mn->o->multi_node_timeout_s;
        mn->deadline = rdv_now() + left;
        report_log("cross-node: the job's deadline from node rank 0: %.1f s "
                   "left",
                   left);
    }
    if (mn->m.token[0] != '\0' &&
        rdv_proof(mn->m.token, m.u.challenge.nonce, self.job, self.node_rank,
                  self.proof) != 0) {
        set_outcome(mn, RC_EXIT_INTERNAL, "fail",
                    "cannot compute the job token's proof (OpenSSL)");
        return;
    }
    memset(&m, 0, sizeof(m));
    m.type = RDV_HELLO;
    m.u.hello = self;
    if (rdv_send(mn->fd, &m, mn->deadline, err, sizeof(err)) != RDV_OK) {
        set_outcome(mn, RC_EXIT_TIMEOUT, "missing", "node rank 0 is gone: %s",
                    err);
        return;
    }
    print_node_view(mn);
    for (;;) {
        int r = rdv_recv(mn->fd, &m, mn->deadline + MN_FOLLOWER_GRACE_S, err,
                         sizeof(err));
        double phase_s, left_s;
        char line[2 * RDV_ID_BYTES + 8], what[RDV_TEXT_MAX];
        double busbw;
        long wrong;
        int code;
        struct rdv_msg res;

        if (r != RDV_OK && last_code != 0) {
            /* A round failed here: that is this pod's verdict, whatever
             * became of the leader's. */
            set_outcome(mn, last_code, "fail",
                        "round %u failed on this node (%s), and node rank 0 "
                        "%s",
                        last_round, last_what,
                        r == RDV_ETIME ? "gave no verdict by the deadline"
                                       : "went away before its verdict");
            return;
        }
        if (r == RDV_ETIME) {
            set_outcome(mn, RC_EXIT_TIMEOUT, "missing",
                        "node rank 0 gave no verdict by the cross-node "
                        "deadline (%.0f s)",
                        mn->o->multi_node_timeout_s);
            return;
        }
        if (r != RDV_OK) {
            set_outcome(mn, RC_EXIT_TIMEOUT, "missing",
                        "node rank 0 went away before its verdict (%s)", err);
            return;
        }
        if (m.type == RDV_REJECT) {
            set_outcome(mn, RC_EXIT_ENV, "fail", "node rank 0 rejected us: %s",
                        m.u.reject.reason);
            snprintf(mn->fix, sizeof(mn->fix),
                     "two jobs share the leader's address and port, or the "
                     "pods disagree about the job's size: check the "
                     "operator's variables");
            return;
        }
        if (m.type == RDV_VERDICT) {
            mn->code = m.u.verdict.code;
            snprintf(mn->status, sizeof(mn->status), "%s", m.u.verdict.result);
            snprintf(mn->what, sizeof(mn->what), "%s", m.u.verdict.what);
            snprintf(mn->cure, sizeof(mn->cure), "%s", m.u.verdict.cure);
            snprintf(mn->transport, sizeof(mn->transport), "%s",
                     m.u.verdict.transport);
            if (mn->cure[0] != '\0')
                snprintf(mn->fix, sizeof(mn->fix),
                         "node rank 0 found that %s makes the ring pass; "
                         "set it on every node of the job",
                         mn->cure);
            return;
        }
        if (m.type != RDV_RUN || m.u.run.world < (uint32_t)mn->rep->ndev ||
            m.u.run.world > RINGCHECK_MAX_WORLD ||
            m.u.run.rank_offset > m.u.run.world - (uint32_t)mn->rep->ndev) {
            set_outcome(mn, RC_EXIT_INTERNAL, "fail",
                        "node rank 0 sent an unexpected %s message",
                        rdv_type_name(m.type));
            return;
        }
        hex_id(m.u.run.id, line, sizeof(line));
        report_log("cross-node: round %u: ranks %u-%u of %u%s%s", m.u.run.round,
                   m.u.run.rank_offset,
                   m.u.run.rank_offset + (uint32_t)mn->rep->ndev - 1,
                   m.u.run.world, m.u.run.setting[0] != '\0' ? " with " : "",
                   m.u.run.setting);
        /* The leader's budget for this round, within the job's deadline. */
        left_s = m.u.run.left_ms / 1000.0;
        if (rdv_now() + left_s > mn->deadline)
            left_s = mn->deadline - rdv_now();
        phase_s = m.u.run.phase_ms / 1000.0;
        if (phase_s <= 0 || phase_s > mn->o->multi_node_timeout_s)
            phase_s = mn->o->phase_timeout_s;
        code =
            run_local_part(mn, (int)m.u.run.world, (int)m.u.run.rank_offset,
                           line, m.u.run.setting, phase_s, rdv_now() + left_s,
                           &busbw, &wrong, what, sizeof(what));
        if (m.u.run.round == 1) {
            mn->busbw = busbw;
            memcpy(&mn->table_rep, mn->rep, sizeof(mn->table_rep));
            mn->table_rep.ring = mn->run_buf;
            mn->table_rep.ndev = (int)m.u.run.world;
            mn->world1 = (int)m.u.run.world;
        }
        last_code = code;
        last_round = m.u.run.round;
        snprintf(last_what, sizeof(last_what), "%.300s", what);
        memset(&res, 0, sizeof(res));
        res.type = RDV_RESULT;
        res.u.result.round = m.u.run.round;
        res.u.result.code = code;
        res.u.result.busbw_mbps =
            busbw > 0 && busbw < 4e6 ? (uint32_t)(busbw * 1000) : 0;
        res.u.result.wrong = wrong > 0 ? (uint32_t)wrong : 0;
        for (char *c = what; *c != '\0'; c++)
            if (*c < 0x20 || *c > 0x7e)
                *c = ' ';
        snprintf(res.u.result.what, sizeof(res.u.result.what), "%s", what);
        if (rdv_send(mn->fd, &res, mn->deadline, err, sizeof(err)) != RDV_OK) {
            set_outcome(mn, RC_EXIT_TIMEOUT, "missing",
                        "node rank 0 went away during round %u (%s)",
                        m.u.run.round, err);
            return;
        }
    }
}

/* ------------------------------------------------------------ report */

static void
json_str(char *buf, size_t len, const char *s)
{
    buf_add(buf, len, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
        if (*p == '"' || *p == '\\')
            buf_add(buf, len, "\\%c", *p);
        else if (*p < 0x20)
            buf_add(buf, len, "\\u%04x", *p);
        else
            buf_add(buf, len, "%c", *p);
    }
    buf_add(buf, len, "\"");
}

static void
write_report(struct mn *mn)
{
    struct rc_report *r = mn->rep;
    char *j = r->mn_json;
    size_t jl = sizeof(r->mn_json);
    int leader = mn->m.node_rank == 0;

    j[0] = '\0';
    buf_add(j, jl, "{\"operator\":");
    json_str(j, jl, mn->m.operator_name);
    buf_add(j, jl, ",\"job\":");
    json_str(j, jl, mn->m.job);
    buf_add(j, jl,
            ",\"node_rank\":%d,\"nnodes\":%d,\"world\":%d,\"job_wide\":%s,"
            "\"status\":",
            mn->m.node_rank, mn->m.nnodes, mn->world1,
            leader ? "true" : "false");
    json_str(j, jl, mn->status);
    buf_add(j, jl, ",\"code\":%d,\"message\":", mn->code);
    json_str(j, jl, mn->what);
    buf_add(j, jl, ",\"missing\":[%s],\"left\":[", mn->missing);
    if (mn->left_node >= 0)
        buf_add(j, jl, "%d", mn->left_node);
    buf_add(j, jl, "],\"cure\":");
    if (mn->cure[0] != '\0')
        json_str(j, jl, mn->cure);
    else
        buf_add(j, jl, "null");
    buf_add(j, jl, ",\"diagnosis\":");
    json_str(j, jl, mn->diag);
    if (mn->busbw >= 0)
        buf_add(j, jl, ",\"busbw_gbps\":%.3f", mn->busbw);
    else
        buf_add(j, jl, ",\"busbw_gbps\":null");
    buf_add(j, jl, ",\"nodes\":[");
    for (int k = 0, first = 1; k < mn->m.nnodes; k++) {
        const struct mn_node *n = &mn->node[k];

        if (!n->joined)
            continue;
        buf_add(j, jl, "%s{\"node\":%d,\"host\":", first ? "" : ",", k);
        json_str(j, jl, n->h.host);
        buf_add(j, jl, ",\"gpus\":%u,\"interface\":", n->h.ngpus);
        json_str(j, jl, n->h.iface);
        buf_add(j, jl,
                n->h.iface[0] != '\0' ? ",\"address\":"
                                      : ",\"interfaces_present\":");
        json_str(j, jl, n->h.addr);
        buf_add(j, jl, ",\"transport\":");
        json_str(j, jl, n->h.transport);
        buf_add(j, jl, ",\"gone\":%s}", n->gone ? "true" : "false");
        first = 0;
    }
    buf_add(j, jl, "]}");

    r->mn_text[0] = '\0';
    buf_add(r->mn_text, sizeof(r->mn_text), "cross-node%s: %s: %s\n",
            leader ? " (job-wide verdict)" : "", mn->status, mn->what);
    if (leader)
        for (int k = 0; k < mn->m.nnodes; k++)
            if (mn->node[k].joined)
                buf_add(r->mn_text, sizeof(r->mn_text),
                        "node %d: %s, %u GPUs, %s %s, %s%s\n", k,
                        mn->node[k].h.host, mn->node[k].h.ngpus,
                        mn->node[k].h.iface[0] != '\0' ? mn->node[k].h.iface
                                                       : "no interface; has",
                        mn->node[k].h.addr, mn->node[k].h.transport,
                        mn->node[k].gone ? " (gone)" : "");
    if (mn->missing[0] != '\0')
        buf_add(r->mn_text, sizeof(r->mn_text), "missing node ranks: %s\n",
                mn->missing);
    if (mn->diag[0] != '\0')
        buf_add(r->mn_text, sizeof(r->mn_text), "cross-node diagnosis: %s\n",
                mn->diag);
    if (mn->code != 0 && mn->fix[0] != '\0')
        buf_add(r->mn_text, sizeof(r->mn_text), "cross-node fix: %s\n",
                mn->fix);
}

/* Folds the cross-node outcome into the pod's report. */
static void
apply_outcome(struct mn *mn)
{
    struct rc_report *r = mn->rep;

    if (mn->table_rep.opts != NULL) {
        report_log("cross-node: nccl-tests table over all %d ranks (this "
                   "node's view)",
                   mn->table_rep.ndev);
        report_table(&mn->table_rep);
    }
    write_report(mn);
    if (mn->code == 0)
        return;
    /* A local failure that its own fallback does not cure keeps its own
     * verdict; a cured one takes the job's, so that every pod ends the
     * same way and with the same settings. */
    if (r->code != 0 && !local_cured(r))
        return;
    if (strcmp(mn->status, "missing") == 0 &&
        mn->o->on_missing == RC_MISSING_WARN) {
        if (r->code != 0)
            return; /* its own fallback stands */
        r->mn_warn = 1;
        r->nwarnings++;
        report_log("cross-node: warning: %s; --on-missing warn: the pod "
                   "starts anyway",
                   mn->what);
        return;
    }
    r->code = mn->code;
    r->phase = 7;
    snprintf(r->what, sizeof(r->what), "%s", mn->what);
    snprintf(r->fix, sizeof(r->fix), "%s", mn->fix);
    snprintf(r->cure, sizeof(r->cure), "%.47s", mn->cure);
    snprintf(r->transport, sizeof(r->transport), "%.23s", mn->transport);
    if (mn->diag[0] != '\0')
        snprintf(r->diag_note, sizeof(r->diag_note), "%s", mn->diag);
    r->diag_ran = mn->diag[0] != '\0';
}

void
mn_check(struct rc_report *r)
{
    struct mn *mn;
    char why[300];
    int got;

    if (!r->opts->multi_node)
        return;
    mn = calloc(1, sizeof(*mn));
    if (mn == NULL) {
        report_log("cross-node: skipped: out of memory");
        r->nwarnings++;
        return;
    }
    mn->rep = r;
    mn->o = r->opts;
    mn->fd = -1;
    mn->busbw = -1;
    mn->left_node = -1;
    for (int k = 0; k < RINGCHECK_MAX_NODES; k++)
        mn->node[k].fd = -1;
    got = mn_membership(&mn->m, why, sizeof(why));
    if (got <= 0) {
        report_log("cross-node: %s: %s",
                   got == 0 ? "skipped, single pod" : "skipped", why);
        if (got < 0)
            r->nwarnings++;
        r->mn_json[0] = '\0';
        buf_add(r->mn_json, sizeof(r->mn_json),
                "{\"status\":\"skipped\","
                "\"message\":");
        json_str(r->mn_json, sizeof(r->mn_json), why);
        buf_add(r->mn_json, sizeof(r->mn_json), "}");
        goto out;
    }
    if (mn->m.nnodes == 1) {
        report_log("cross-node: skipped: %s says the job has one node",
                   mn->m.operator_name);
        snprintf(r->mn_json, sizeof(r->mn_json),
                 "{\"status\":\"skipped\",\"message\":\"one node\"}");
        goto out;
    }
    mn->t0 = rdv_now();
    mn->deadline = mn->t0 + mn->o->multi_node_timeout_s;
    report_log("cross-node: starting; deadline in %.1f s (--multi-node-"
               "timeout), job %s",
               mn->o->multi_node_timeout_s, mn->m.job);
    if (mn->m.node_rank == 0)
        leader_main(mn);
    else
        follower_main(mn);
    for (int k = 0; k < RINGCHECK_MAX_NODES; k++)
        if (mn->node[k].fd >= 0)
            close(mn->node[k].fd);
    if (mn->fd >= 0)
        close(mn->fd);
    report_log("cross-node: %s: %s", mn->status, mn->what);
    apply_outcome(mn);
out:
    free(mn);
}
