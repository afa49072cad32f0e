/* Reads NCCL's INFO log for the transports it chose, in the formats of
 * NCCL 2.28's sources (cited per line below). */
#include "ringcheck/nccllog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const class_names[NL_NCLASSES] = {
    "P2P", "SHM", "NET/IB/GDRDMA", "NET/IB", "NET/plugin", "NET/Socket"};
/* JSON keys of the same classes. */
static const char *const class_keys[NL_NCLASSES] = {
    "p2p", "shm", "ib_gdr", "ib", "net_plugin", "socket"};

void
nccllog_init(struct nccllog *l)
{
    memset(l, 0, sizeof(*l));
    for (int i = 0; i < NCCLLOG_MAX_LOCAL; i++)
        l->ring0_next[i] = -1;
}

const char *
nccllog_class_name(int cls)
{
    return cls >= 0 && cls < NL_NCLASSES ? class_names[cls] : "none";
}

/* Copies the word at s (up to a space, or a stop character) into out. */
static void
word(const char *s, const char *stops, char *out, size_t len)
{
    size_t n = strcspn(s, stops);

    if (n >= len)
        n = len - 1;
    memcpy(out, s, n);
    out[n] = '\0';
}

static int
is_local(int rank, int lo, int n)
{
    return rank >= lo && rank < lo + n && rank - lo < NCCLLOG_MAX_LOCAL;
}

/*
 * "via P2P/..." (src/transport/p2p.cc: "Channel %02d/%01d : %d[%d] ->
 * %d[%d] via P2P/CUMEM", "via P2P/IPC", "via P2P/direct pointer", "via
 * P2P/indirect/%d[%d]"), "via SHM/%s/%s" (shm.cc), "[send] via
 * NET/%s/%d%s%s%s" and "[receive] via NET/..." with "/GDRDMA" when GPU
 * Direct RDMA is used (net.cc). Returns the class or -1.
 */
static int
via_class(struct nccllog *l, const char *rest)
{
    const char *via = strstr(rest, "via ");
    char name[32];

    if (via == NULL)
        return -1;
    via += 4;
    if (strncmp(via, "P2P/", 4) == 0) {
        if (l->p2p_kind[0] == '\0') {
            /* "P2P/direct pointer" has a space; the others end at one. */
            if (strncmp(via, "P2P/direct pointer", 18) == 0)
                snprintf(l->p2p_kind, sizeof(l->p2p_kind),
                         "P2P/direct pointer");
            else
                word(via, " \n", l->p2p_kind, sizeof(l->p2p_kind));
        }
        return NL_P2P;
    }
    if (strncmp(via, "SHM/", 4) == 0)
        return NL_SHM;
    if (strncmp(via, "NET/", 4) != 0)
        return -1;
    word(via + 4, "/ \n", name, sizeof(name));
    if (l->net_name[0] == '\0')
        snprintf(l->net_name, sizeof(l->net_name), "%s", name);
    if (strcmp(name, "IB") == 0)
        return strstr(via, "/GDRDMA") != NULL ? NL_NET_IB_GDR : NL_NET_IB;
    if (strcmp(name, "Socket") == 0)
        return NL_NET_SOCKET;
    return NL_NET_OTHER;
}

static void
channel_line(struct nccllog *l, const char *msg, int lo, int n)
{
    int ch = -1, ci = 0, a = -1, da = 0, b = -1, db = 0, off = 0, cls;

    /* Two forms: "Channel %02d/%d : A[dev] -> B[dev] ..." (P2P, NET) and
     * "Channel %02d : A[dev] -> B[dev] ..." (SHM). rings.cc's "Channel
     * %02d/%02d : 0 1 2 ..." has no device and is not a connection. */
    if (sscanf(msg, "Channel %d/%d : %d[%d] -> %d[%d] %n", &ch, &ci, &a, &da,
               &b, &db, &off) != 6 ||
        off == 0) {
        off = 0;
        if (sscanf(msg, "Channel %d : %d[%d] -> %d[%d] %n", &ch, &a, &da, &b,
                   &db, &off) != 5 ||
            off == 0)
            return;
    }
    cls = via_class(l, msg + off);
    if (cls < 0 || ch < 0 || ch > 1024)
        return;
    if (ch + 1 > l->nchannels)
        l->nchannels = ch + 1;
    if (is_local(a, lo, n) && is_local(b, lo, n)) {
        l->intra[cls]++;
        l->pair[a - lo][b - lo] |= (unsigned char)(1u << cls);
        l->pair[b - lo][a - lo] |= (unsigned char)(1u << cls);
    } else {
        l->inter[cls]++;
    }
}

void
nccllog_line(struct nccllog *l, const char *line, int lo, int n)
{
    const char *msg = strstr(line, "NCCL INFO ");
    int ch, prev, rank, next;
    const char *p;

    if (msg == NULL)
        return;
    msg += 10;
    l->lines++;
    if (strncmp(msg, "Channel ", 8) == 0) {
        channel_line(l, msg, lo, n);
    } else if (sscanf(msg, "Ring %d : %d -> %d -> %d", &ch, &prev, &rank,
                      &next) == 4) {
        /* src/init.cc: "Ring %02d : %d -> %d -> %d" (prev, rank, next). */
        l->ring_lines++;
        if (ch == 0 && is_local(rank, lo, n))
            l->ring0_next[rank - lo] = next;
    } else if (strncmp(msg, "Trees", 5) == 0) {
        /* src/init.cc: "Trees [0] d0/d1/d2->rank->up ..." */
        l->tree_lines++;
        if (l->trees[0] == '\0')
            word(msg, "\n", l->trees, sizeof(l->trees));
    } else if (strncmp(msg, "NVLS multicast support is available", 35) == 0) {
        /* src/transport/nvls.cc: "NVLS multicast support is %savailable
         * on dev %d (NVLS_NCHANNELS %d)". */
        l->nvls_available = 1;
    } else if (strncmp(msg, "NVLS comm ", 10) == 0 ||
               strncmp(msg, "Connected NVLS", 14) == 0) {
        /* nvls.cc: "NVLS comm %p headRank %d ..." when its buffers are set
         * up; "Connected NVLS tree" across nodes. */
        l->nvls_used = 1;
    } else if ((strncmp(msg, "CollNet ", 8) == 0 &&
                strstr(msg, "via COLLNET/") != NULL) ||
               strstr(msg, "Connected CollNet") != NULL) {
        /* src/transport/coll_net.cc. */
        l->collnet = 1;
    } else if (strncmp(msg, "NET/Socket : Using", 18) == 0 &&
               (p = strstr(msg, "[0]")) != NULL) {
        /* src/transport/net_socket.cc: "NET/Socket : Using [0]eth0:ADDR". */
        if (l->socket_if[0] == '\0')
            word(p + 3, ": \n", l->socket_if, sizeof(l->socket_if));
    } else if (strncmp(msg, "NET/IB : Using", 14) == 0 &&
               (p = strstr(msg, "[0]")) != NULL) {
        /* src/transport/net_ib.cc: "NET/IB : Using [0]mlx5_0:1/IB ...". */
        if (l->ib_dev[0] == '\0')
            word(p + 3, ": \n", l->ib_dev, sizeof(l->ib_dev));
    } else if (strncmp(msg, "Using network ", 14) == 0) {
        /* src/init.cc: "Using network %s". */
        word(msg + 14, " \n", l->net_name, sizeof(l->net_name));
    }
}

int
nccllog_has_channels(const struct nccllog *l)
{
    for (int c = 0; c < NL_NCLASSES; c++)
        if (l->intra[c] > 0 || l->inter[c] > 0)
            return 1;
    return 0;
}

int
nccllog_worst(const struct nccllog *l, int inter)
{
    const int *v = inter ? l->inter : l->intra;

    for (int c = NL_NCLASSES - 1; c >= 0; c--)
        if (v[c] > 0)
            return c;
    return -1;
}

/* The class name with where it runs: "NET/Socket on eth0". */
static void
class_where(const struct nccllog *l, int cls, char *buf, size_t len)
{
    if (cls == NL_NET_SOCKET && l->socket_if[0] != '\0')
        snprintf(buf, len, "NET/Socket on %s", l->socket_if);
    else if ((cls == NL_NET_IB || cls == NL_NET_IB_GDR) && l->ib_dev[0])
        snprintf(buf, len, "%s on %s", class_names[cls], l->ib_dev);
    else if (cls == NL_NET_OTHER && l->net_name[0] != '\0')
        snprintf(buf, len, "NET/%s", l->net_name);
    else if (cls == NL_P2P && l->p2p_kind[0] != '\0')
        snprintf(buf, len, "%s", l->p2p_kind);
    else
        snprintf(buf, len, "%s", nccllog_class_name(cls));
}

/* The lowest local pair (a < b) that has class cls; 0 when none. */
static int
pair_with(const struct nccllog *l, int cls, int n, int *a, int *b)
{
    for (int i = 0; i < n && i < NCCLLOG_MAX_LOCAL; i++)
        for (int j = i + 1; j < n && j < NCCLLOG_MAX_LOCAL; j++)
            if (l->pair[i][j] & (1u << cls)) {
                *a = i;
                *b = j;
                return 1;
            }
    return 0;
}

int
nccllog_expect(const struct nccllog *l, const char *intra, const char *inter,
               const unsigned char (*nv)[NCCLLOG_MAX_LOCAL], int n, int lo,
               char *why, size_t len)
{
    int w, a = 0, b = 0;
    char where[64];

    why[0] = '\0';
    if (intra != NULL && intra[0] != '\0' && (w = nccllog_worst(l, 0)) >= 0) {
        int limit = strcmp(intra, "shm") == 0   ? NL_SHM
                    : strcmp(intra, "net") == 0 ? NL_NCLASSES
                                                : NL_P2P;

        if (w > limit) {
            class_where(l, w, where, sizeof(where));
            if (pair_with(l, w, n, &a, &b))
                snprintf(why, len,
                         "the ring works but over %s between ranks %d and "
                         "%d, not %s (--expect-transport intra=%s)",
                         where, lo + a, lo + b,
                         limit == NL_SHM ? "P2P or SHM" : "P2P", intra);
            else
                snprintf(why, len,
                         "the ring works but over %s, not %s "
                         "(--expect-transport intra=%s)",
                         where, limit == NL_SHM ? "P2P or SHM" : "P2P", intra);
            return -1;
        }
        if (strcmp(intra, "nvlink") == 0)
            for (int i = 0; i < n && i < NCCLLOG_MAX_LOCAL; i++)
                for (int j = i + 1; j < n && j < NCCLLOG_MAX_LOCAL; j++)
                    if ((l->pair[i][j] & (1u << NL_P2P)) &&
                        (nv == NULL || !nv[i][j])) {
                        snprintf(why, len,
                                 "the ring works but over P2P through PCIe "
                                 "between ranks %d and %d, not NVLink "
                                 "(--expect-transport intra=nvlink)",
                                 lo + i, lo + j);
                        return -1;
                    }
    }
    if (inter != NULL && inter[0] != '\0' && (w = nccllog_worst(l, 1)) >= 0) {
        int limit = strcmp(inter, "ib-gdr") == 0 ? NL_NET_IB_GDR
                    : strcmp(inter, "ib") == 0   ? NL_NET_IB
                                                 : NL_NCLASSES;

        if (w > limit) {
            class_where(l, w, where, sizeof(where));
            snprintf(why, len,
                     "the ring across pods works but over %s, not %s "
                     "(--expect-transport inter=%s)",
                     where,
                     limit == NL_NET_IB_GDR ? "NET/IB with GPU Direct RDMA"
                                            : "NET/IB",
                     inter);
            return -1;
        }
    }
    return 0;
}

/* Appends to a bounded buffer. */
static void add(char *buf, size_t len, size_t *k, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
add(char *buf, size_t len, size_t *k, const char *fmt, ...)
{
    va_list ap;
    int r;

    if (*k >= len)
        return;
    va_start(ap, fmt);
    r = vsnprintf(buf + *k, len - *k, fmt, ap);
    va_end(ap);
    if (r > 0)
        *k += (size_t)r;
    if (*k >= len)
        *k = len;
}

static void
ring0(const struct nccllog *l, int lo, int n, char *buf, size_t len,
      const char *sep)
{
    size_t k = 0;
    int r = 0, steps = 0;

    buf[0] = '\0';
    if (n <= 0 || l->ring0_next[0] < 0)
        return;
    /* Follow next from local rank 0 while it stays in this pod. */
    while (steps < n && is_local(lo + r, lo, n)) {
        add(buf, len, &k, "%s%d", steps > 0 ? sep : "", lo + r);
        steps++;
        if (l->ring0_next[r] < 0 || !is_local(l->ring0_next[r], lo, n) ||
            l->ring0_next[r] == lo)
            break;
        r = l->ring0_next[r] - lo;
    }
}

void
nccllog_summary(const struct nccllog *l, int lo, int n, char *buf, size_t len)
{
    size_t k = 0;
    char where[64], ring[160];

    buf[0] = '\0';
    if (l->lines == 0) {
        add(buf, len, &k, "unknown (no NCCL INFO log)");
        return;
    }
    for (int inter = 0; inter < 2; inter++) {
        int w = nccllog_worst(l, inter);
        const int *v = inter ? l->inter : l->intra;
        int total = 0;

        for (int c = 0; c < NL_NCLASSES; c++)
            total += v[c];
        add(buf, len, &k, "%s", inter ? ", inter " : "intra ");
        if (w < 0) {
            add(buf, len, &k, "none");
            continue;
        }
        class_where(l, w, where, sizeof(where));
        add(buf, len, &k, "%s (%d channel lines", where, total);
        for (int c = 0; c < NL_NCLASSES; c++)
            if (v[c] > 0 && c != w)
                add(buf, len, &k, ", %d %s", v[c], class_names[c]);
        add(buf, len, &k, ")");
    }
    add(buf, len, &k, "; %d channels", l->nchannels);
    ring0(l, lo, n, ring, sizeof(ring), " ");
    if (ring[0] != '\0')
        add(buf, len, &k, "; ring 0: %s", ring);
    add(buf, len, &k, "; NVLS %s; CollNet %s",
        l->nvls_used        ? "yes"
        : l->nvls_available ? "available, unused"
                            : "no",
        l->collnet ? "yes" : "no");
}

/* The length of the well-formed UTF-8 sequence at s (RFC 3629 section 4:
 * no overlong forms, no surrogates, nothing above U+10FFFF), or 0. */
static int
utf8_seq(const unsigned char *s)
{
    unsigned char lo = 0x80, hi = 0xbf;
    int n;

    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        n = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        n = 3;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        n = 4;
    else
        return 0;
    if (s[0] == 0xe0)
        lo = 0xa0;
    else if (s[0] == 0xed)
        hi = 0x9f;
    else if (s[0] == 0xf0)
        lo = 0x90;
    else if (s[0] == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (int i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

/* A JSON string of s. What NCCL logged is bytes: a name cut to its field,
 * or not UTF-8 at all, would make the whole report invalid JSON, so each
 * byte that starts no whole UTF-8 sequence becomes U+FFFD. */
static void
json_str(char *buf, size_t len, size_t *k, const char *s)
{
    if (s == NULL || s[0] == '\0') {
        add(buf, len, k, "null");
        return;
    }
    add(buf, len, k, "\"");
    while (*s != '\0') {
        unsigned char c = (unsigned char)*s;
        int n;

        if (c == '"' || c == '\\')
            add(buf, len, k, "\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            add(buf, len, k, "\\u%04x", c);
        else if (c < 0x80)
            add(buf, len, k, "%c", c);
        else if ((n = utf8_seq((const unsigned char *)s)) > 0) {
            add(buf, len, k, "%.*s", n, s);
            s += n;
            continue;
        } else
            add(buf, len, k, "\\ufffd");
        s++;
    }
    add(buf, len, k, "\"");
}

void
nccllog_json(const struct nccllog *l, int lo, int n, char *buf, size_t len)
{
    size_t k = 0;
    char ring[160];

    buf[0] = '\0';
    if (l->lines == 0) {
        add(buf, len, &k, "null");
        return;
    }
    add(buf, len, &k, "{\"channels\":%d", l->nchannels);
    for (int inter = 0; inter < 2; inter++) {
        int w = nccllog_worst(l, inter);
        const int *v = inter ? l->inter : l->intra;

        add(buf, len, &k, ",\"%s\":", inter ? "inter" : "intra");
        json_str(buf, len, &k, w >= 0 ? class_names[w] : NULL);
        add(buf, len, &k, ",\"%s_counts\":{", inter ? "inter" : "intra");
        for (int c = 0; c < NL_NCLASSES; c++)
            add(buf, len, &k, "%s\"%s\":%d", c > 0 ? "," : "", class_keys[c],
                v[c]);
        add(buf, len, &k, "}");
    }
    add(buf, len, &k, ",\"p2p\":");
    json_str(buf, len, &k, l->p2p_kind);
    add(buf, len, &k, ",\"socket_if\":");
    json_str(buf, len, &k, l->socket_if);
    add(buf, len, &k, ",\"ib_dev\":");
    json_str(buf, len, &k, l->ib_dev);
    ring0(l, lo, n, ring, sizeof(ring), ",");
    add(buf, len, &k, ",\"ring0\":[%s],\"rings\":%d,\"trees\":", ring,
        l->ring_lines);
    json_str(buf, len, &k, l->trees);
    add(buf, len, &k, ",\"nvls_available\":%s,\"nvls\":%s,\"collnet\":%s}",
        l->nvls_available ? "true" : "false", l->nvls_used ? "true" : "false",
        l->collnet ? "true" : "false");
    if (k >= len && len > 0)
        snprintf(buf, len, "null");
}
