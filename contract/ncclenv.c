/* The NCCL environment catalog (contract/ncclenv.def) and the checks made
 * against it. Depends on libc and base/text only: the ring check links
 * the two alone. */
#include "contract/ncclenv.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/text.h"

#define NCCLENV_CATALOG_VERSION "2.28"

enum ncclenv_kind {
    NE_ANY,       /* free text */
    NE_BOOL,      /* 0 or 1 */
    NE_INT,       /* integer, may be negative (-1 often means auto) */
    NE_UINT,      /* non-negative integer */
    NE_BYTES,     /* non-negative integer count of bytes */
    NE_ENUM,      /* one word of a list, case-insensitive */
    NE_LEVEL_P2P, /* LOC NVL PIX PXB PHB SYS or an integer */
    NE_LEVEL_NET, /* LOC PIX PXB PHB SYS or an integer */
    NE_IFNAME,    /* [^][=]prefix[,prefix...] */
    NE_HCA,       /* [^][=]dev[:port][,dev[:port]...] */
    NE_SUBSYS,    /* [^]SUBSYS[,SUBSYS...] */
    NE_ALGO,      /* [^]algo[,algo] or func:list;func:list */
    NE_PROTO      /* [^]proto[,proto] or func:list;func:list */
};

struct ncclenv_entry {
    const char *name;
    enum ncclenv_kind kind;
    const char *values;
    const char *pinned;
};

static const struct ncclenv_entry catalog[] = {
#define NCCLENV(name, kind, values, pinned) {#name, kind, values, pinned},
#include "contract/ncclenv.def"
#undef NCCLENV
};

#define N_CATALOG (sizeof(catalog) / sizeof(catalog[0]))

/* Names that are not NCCL's, or no longer read by NCCL 2.28. */
struct ncclenv_moved {
    const char *name;
    const char *instead; /* NULL: nothing replaces it */
    enum ncclenv_severity severity;
    const char *why;
};

static const struct ncclenv_moved moved[] = {
    /* PyTorch's ProcessGroupNCCL settings, renamed TORCH_NCCL_* in
     * PyTorch 2.2; NCCL itself never read them. */
    {"NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
     NCCLENV_WARNING,
     "is PyTorch's, not NCCL's, and the old spelling is "
     "deprecated"},
    {"NCCL_BLOCKING_WAIT", "TORCH_NCCL_BLOCKING_WAIT", NCCLENV_WARNING,
     "is PyTorch's, not NCCL's, and the old spelling is deprecated"},
    {"NCCL_DESYNC_DEBUG", "TORCH_NCCL_DESYNC_DEBUG", NCCLENV_WARNING,
     "is PyTorch's, not NCCL's, and the old spelling is deprecated"},
    {"NCCL_ENABLE_TIMING", "TORCH_NCCL_ENABLE_TIMING", NCCLENV_WARNING,
     "is PyTorch's, not NCCL's, and the old spelling is deprecated"},
    {"NCCL_AVOID_RECORD_STREAMS", "TORCH_NCCL_AVOID_RECORD_STREAMS",
     NCCLENV_WARNING,
     "is PyTorch's, not NCCL's, and the old spelling is "
     "deprecated"},
    {"NCCL_USE_COMM_NONBLOCKING", "TORCH_NCCL_USE_COMM_NONBLOCKING",
     NCCLENV_WARNING,
     "is PyTorch's, not NCCL's, and the old spelling is "
     "deprecated"},
    {"NCCL_TIMEOUT", NULL, NCCLENV_ERROR,
     "does not exist: NCCL has no timeout variable; set the timeout in "
     "the framework (e.g. init_process_group(timeout=...))"},
    /* Renamed or removed inside NCCL. */
    {"NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", NCCLENV_WARNING, "is deprecated"},
    {"NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS", NCCLENV_WARNING, "is deprecated"},
    {"NCCL_MAX_NRINGS", "NCCL_MAX_CTAS", NCCLENV_WARNING, "is deprecated"},
    {"NCCL_MIN_NRINGS", "NCCL_MIN_CTAS", NCCLENV_WARNING, "is deprecated"},
    {"NCCL_IB_GDR_LEVEL", "NCCL_NET_GDR_LEVEL", NCCLENV_ERROR,
     "was renamed and NCCL 2.28 no longer reads it"},
    {"NCCL_IB_CUDA_SUPPORT", "NCCL_NET_GDR_LEVEL", NCCLENV_ERROR,
     "was replaced and NCCL 2.28 no longer reads it"},
    {"NCCL_CHECKS_DISABLE", "NCCL_CHECK_POINTERS", NCCLENV_ERROR,
     "was replaced and NCCL 2.28 no longer reads it"},
    {"NCCL_WORK_FIFO_DEPTH", "NCCL_WORK_FIFO_BYTES", NCCLENV_ERROR,
     "was replaced and NCCL 2.28 no longer reads it"},
    {"NCCL_LL_THRESHOLD", "NCCL_PROTO", NCCLENV_ERROR,
     "was removed; NCCL 2.28 no longer reads it"},
    {"NCCL_LL128_THRESHOLD", "NCCL_PROTO", NCCLENV_ERROR,
     "was removed; NCCL 2.28 no longer reads it"},
    {"NCCL_TREE_THRESHOLD", "NCCL_ALGO", NCCLENV_ERROR,
     "was removed; NCCL 2.28 no longer reads it"},
    {"NCCL_SINGLE_RING_THRESHOLD", "NCCL_PROTO", NCCLENV_ERROR,
     "was removed; NCCL 2.28 no longer reads it"},
    {"NCCL_RINGS", "NCCL_ALGO", NCCLENV_ERROR,
     "was removed; NCCL 2.28 no longer reads it"},
};

/* PyTorch's TORCH_NCCL_* names we know the value syntax of. */
static const struct {
    const char *name;
    const char *values; /* '|'-separated, NULL = integer */
} torch_vars[] = {
    {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0|1|2|3"},
    {"TORCH_NCCL_BLOCKING_WAIT", "0|1"},
    {"TORCH_NCCL_DESYNC_DEBUG", "0|1"},
    {"TORCH_NCCL_ENABLE_TIMING", "0|1"},
    {"TORCH_NCCL_AVOID_RECORD_STREAMS", "0|1"},
    {"TORCH_NCCL_USE_COMM_NONBLOCKING", "0|1"},
    {"TORCH_NCCL_DUMP_ON_TIMEOUT", "0|1"},
    {"TORCH_NCCL_ENABLE_MONITORING", "0|1"},
    {"TORCH_NCCL_TRACE_BUFFER_SIZE", NULL},
    {"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", NULL},
};

static const char *const subsystems[] = {
    "INIT",      "COLL", "P2P",     "SHM",  "NET",   "GRAPH",
    "TUNING",    "ENV",  "ALLOC",   "CALL", "PROXY", "NVLS",
    "BOOTSTRAP", "REG",  "PROFILE", "RAS",  "ALL",   NULL};

static const char *const algos[] = {"Tree",         "Ring", "CollnetDirect",
                                    "CollnetChain", "NVLS", "NVLSTree",
                                    "PAT",          NULL};

static const char *const protos[] = {"LL", "LL128", "Simple", NULL};

static const char *const funcs[] = {"AllGather", "AllReduce",     "Broadcast",
                                    "Reduce",    "ReduceScatter", "SendRecv",
                                    NULL};

static enum ncclenv_severity finding(struct ncclenv_finding *out,
                                     enum ncclenv_severity sev, const char *fmt,
                                     ...) __attribute__((format(printf, 3, 4)));

static enum ncclenv_severity
finding(struct ncclenv_finding *out, enum ncclenv_severity sev, const char *fmt,
        ...)
{
    va_list ap;

    out->severity = sev;
    va_start(ap, fmt);
    vsnprintf(out->msg, sizeof(out->msg), fmt, ap);
    va_end(ap);
    return sev;
}

const char *
ncclenv_catalog_version(void)
{
    return NCCLENV_CATALOG_VERSION;
}

size_t
ncclenv_catalog_size(void)
{
    return N_CATALOG;
}

const char *
ncclenv_catalog_name(size_t i)
{
    return i < N_CATALOG ? catalog[i].name : NULL;
}

static const struct ncclenv_entry *
catalog_find(const char *name)
{
    for (size_t i = 0; i < N_CATALOG; i++)
        if (strcmp(catalog[i].name, name) == 0)
            return &catalog[i];
    return NULL;
}

static const char *
catalog_closest(const char *name, size_t *dist)
{
    const char *best = NULL;

    *dist = 99;
    for (size_t i = 0; i < N_CATALOG; i++) {
        size_t d = text_edit_distance(name, catalog[i].name);

        if (d < *dist) {
            *dist = d;
            best = catalog[i].name;
        }
    }
    return best;
}

/* A value shown in a message: printable, at most 40 characters. */
static const char *
shown(const char *v, char *buf, size_t n)
{
    size_t j = 0;

    for (size_t i = 0; v[i] != '\0' && j + 4 < n; i++) {
        unsigned char c = (unsigned char)v[i];

        buf[j++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
        if (i >= 39 && v[i + 1] != '\0') {
            memcpy(buf + j, "...", 3);
            j += 3;
            break;
        }
    }
    buf[j] = '\0';
    return buf;
}

/* Parses an integer the way NCCL does (strtoll, base 0, whole string). */
static int
nccl_int(const char *v, long long *out)
{
    char *end;

    if (*v == '\0' || isspace((unsigned char)*v))
        return -1;
    errno = 0;
    *out = strtoll(v, &end, 0);
    if (errno != 0 || *end != '\0')
        return -1;
    return 0;
}

/* Word in a '|'-separated list, case-insensitively? */
static int
word_in(const char *list, const char *w, size_t wlen)
{
    const char *p = list;

    while (*p != '\0') {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (len == wlen && strncasecmp(p, w, len) == 0)
            return 1;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return 0;
}

static int
word_in_array(const char *const *arr, const char *w, size_t wlen)
{
    for (size_t i = 0; arr[i] != NULL; i++)
        if (strlen(arr[i]) == wlen && strncasecmp(arr[i], w, wlen) == 0)
            return 1;
    return 0;
}

/* Checks a comma-separated list of words, with an optional leading ^. */
static enum ncclenv_severity
check_word_list(const char *name, const char *v, const char *const *words,
                const char *what, struct ncclenv_finding *out)
{
    const char *p = v;
    char buf[48];

    if (*p == '^')
        p++;
    if (*p == '\0')
        return finding(out, NCCLENV_ERROR, "%s=%s names no %s", name,
                       shown(v, buf, sizeof(buf)), what);
    while (*p != '\0') {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (len == 0 || !word_in_array(words, p, len)) {
            char w[48];

            snprintf(w, sizeof(w), "%.*s", (int)(len < 40 ? len : 40), p);
            return finding(out, NCCLENV_ERROR,
                           "%s: \"%s\" is not a %s NCCL knows", name, w, what);
        }
        if (e == NULL)
            break;
        p = e + 1;
        if (*p == '\0')
            return finding(out, NCCLENV_ERROR, "%s=%s ends with a comma", name,
                           shown(v, buf, sizeof(buf)));
    }
    return NCCLENV_OK;
}

/* NCCL_ALGO / NCCL_PROTO: a plain list, or "func:list;func:list". */
static enum ncclenv_severity
check_algo_proto(const char *name, const char *v, const char *const *words,
                 const char *what, struct ncclenv_finding *out)
{
    char part[256];
    const char *p = v;

    if (strchr(v, ':') == NULL)
        return check_word_list(name, v, words, what, out);
    while (*p != '\0') {
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        const char *colon;
        enum ncclenv_severity s;

        if (len == 0 || len >= sizeof(part))
            return finding(out, NCCLENV_ERROR,
                           "%s: empty or overlong section in \"%.40s\"", name,
                           v);
        memcpy(part, p, len);
        part[len] = '\0';
        colon = strchr(part, ':');
        if (colon == NULL)
            return finding(out, NCCLENV_ERROR,
                           "%s: section \"%.40s\" lacks \"function:\"", name,
                           part);
        if (!word_in_array(funcs, part, (size_t)(colon - part)))
            return finding(out, NCCLENV_ERROR,
                           "%s: \"%.*s\" is not a collective NCCL knows", name,
                           (int)(colon - part < 40 ? colon - part : 40), part);
        s = check_word_list(name, colon + 1, words, what, out);
        if (s != NCCLENV_OK)
            return s;
        if (e == NULL)
            break;
        p = e + 1;
    }
    return NCCLENV_OK;
}

/* NCCL_SOCKET_IFNAME and NCCL_IB_HCA: [^][=]item[,item...]. */
static enum ncclenv_severity
check_iflist(const char *name, const char *v, int hca,
             struct ncclenv_finding *out)
{
    const char *p = v;
    char buf[48];

    if (*p == '^')
        p++;
    if (*p == '=')
        p++;
    if (*p == '\0')
        return finding(out, NCCLENV_ERROR, "%s=%s names no %s; write e.g. %s",
                       name, shown(v, buf, sizeof(buf)),
                       hca ? "device" : "interface",
                       hca ? "mlx5_0:1,mlx5_1" : "eth0 or ^docker,lo");
    while (1) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        size_t port = 0;

        if (len == 0)
            return finding(out, NCCLENV_ERROR, "%s=%s has an empty entry", name,
                           shown(v, buf, sizeof(buf)));
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)p[i];

            if (hca && c == ':') {
                port = i;
                continue;
            }
            if (c == '^' || c == '=')
                return finding(out, NCCLENV_ERROR,
                               "%s=%s: '%c' is allowed only at the start "
                               "(^ excludes, = matches exactly)",
                               name, shown(v, buf, sizeof(buf)), c);
            if (isspace(c) || c == '/' || c < 0x21 || c > 0x7e)
                return finding(out, NCCLENV_ERROR,
                               "%s=%s: entries may not contain spaces, '/' "
                               "or control characters",
                               name, shown(v, buf, sizeof(buf)));
            if (hca && port != 0 && !isdigit(c))
                return finding(out, NCCLENV_ERROR,
                               "%s=%s: a port after ':' must be a number", name,
                               shown(v, buf, sizeof(buf)));
        }
        if (hca && port != 0 && port + 1 == len)
            return finding(out, NCCLENV_ERROR,
                           "%s=%s: a port after ':' must be a number", name,
                           shown(v, buf, sizeof(buf)));
        if (!hca && len > 15)
            return finding(out, NCCLENV_ERROR,
                           "%s=%s: \"%.*s\" is longer than an interface "
                           "name can be (15)",
                           name, shown(v, buf, sizeof(buf)), (int)len, p);
        if (e == NULL)
            break;
        p = e + 1;
    }
    return NCCLENV_OK;
}

static enum ncclenv_severity
check_level(const char *name, const char *v, int p2p,
            struct ncclenv_finding *out)
{
    const char *levels =
        p2p ? "LOC|NVL|PIX|PXB|PHB|SYS" : "LOC|PIX|PXB|PHB|SYS";
    long long n;
    char buf[48];

    if (nccl_int(v, &n) == 0) {
        if (n < 0)
            return finding(out, NCCLENV_ERROR,
                           "%s=%lld: a level must not be negative", name, n);
        return NCCLENV_OK;
    }
    /* NCCL compares the words case-sensitively. */
    for (const char *p = levels; *p;) {
        const char *e = strchr(p, '|');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        if (strlen(v) == len && strncmp(p, v, len) == 0)
            return NCCLENV_OK;
        if (strlen(v) == len && strncasecmp(p, v, len) == 0)
            return finding(out, NCCLENV_ERROR,
                           "%s=%s: NCCL matches levels case-sensitively; "
                           "write %.*s",
                           name, shown(v, buf, sizeof(buf)), (int)len, p);
        if (e == NULL)
            break;
        p = e + 1;
    }
    return finding(out, NCCLENV_ERROR, "%s=%s: must be %s or an integer", name,
                   shown(v, buf, sizeof(buf)),
                   p2p ? "LOC, NVL, PIX, PXB, PHB, SYS"
                       : "LOC, PIX, PXB, PHB, SYS");
}

static enum ncclenv_severity
check_value(const struct ncclenv_entry *e, const char *v,
            struct ncclenv_finding *out)
{
    long long n;
    char buf[48];

    switch (e->kind) {
    case NE_ANY:
        return NCCLENV_OK;
    case NE_BOOL:
        if (nccl_int(v, &n) != 0)
            return finding(out, NCCLENV_ERROR,
                           "%s=%s: NCCL expects 0 or 1 and ignores anything "
                           "else",
                           e->name, shown(v, buf, sizeof(buf)));
        if (n != 0 && n != 1)
            return finding(out, NCCLENV_WARNING,
                           "%s=%lld: a switch; 0 or 1 expected", e->name, n);
        break;
    case NE_INT:
    case NE_UINT:
        if (nccl_int(v, &n) != 0)
            return finding(out, NCCLENV_ERROR,
                           "%s=%s: NCCL expects an integer and ignores "
                           "anything else",
                           e->name, shown(v, buf, sizeof(buf)));
        if (e->kind == NE_UINT && n < 0)
            return finding(out, NCCLENV_ERROR, "%s=%lld: must not be negative",
                           e->name, n);
        break;
    case NE_BYTES:
        if (nccl_int(v, &n) != 0) {
            long long mult = 0;
            char *end;
            long long base;

            /* "4M", "4Mi", "4MB": NCCL takes plain byte counts only. */
            errno = 0;
            base = strtoll(v, &end, 10);
            if (errno == 0 && end != v && base >= 0 && base < (1LL << 30)) {
                char u = (char)toupper((unsigned char)end[0]);
                const char *rest = end[0] ? end + 1 : end;

                if (u == 'K')
                    mult = 1LL << 10;
                else if (u == 'M')
                    mult = 1LL << 20;
                else if (u == 'G')
                    mult = 1LL << 30;
                if (mult != 0 &&
                    (strcmp(rest, "") == 0 || strcmp(rest, "i") == 0 ||
                     strcmp(rest, "B") == 0 || strcmp(rest, "iB") == 0 ||
                     strcmp(rest, "b") == 0))
                    return finding(out, NCCLENV_ERROR,
                                   "%s=%s: NCCL takes a plain number of "
                                   "bytes; did you mean %lld?",
                                   e->name, shown(v, buf, sizeof(buf)),
                                   base * mult);
            }
            return finding(out, NCCLENV_ERROR,
                           "%s=%s: NCCL expects a number of bytes and "
                           "ignores anything else",
                           e->name, shown(v, buf, sizeof(buf)));
        }
        if (n < 0)
            return finding(out, NCCLENV_ERROR,
                           "%s=%lld: a size must not be negative", e->name, n);
        if (v[0] == '0' && v[1] >= '0' && v[1] <= '9')
            return finding(out, NCCLENV_WARNING,
                           "%s=%s: NCCL reads a leading 0 as octal (%lld "
                           "bytes)",
                           e->name, shown(v, buf, sizeof(buf)), n);
        break;
    case NE_ENUM:
        if (!word_in(e->values, v, strlen(v))) {
            char list[160];
            size_t j = 0;

            for (const char *p = e->values; *p && j + 3 < sizeof(list); p++) {
                if (*p == '|') {
                    list[j++] = ',';
                    list[j++] = ' ';
                } else {
                    list[j++] = *p;
                }
            }
            list[j] = '\0';
            return finding(out, NCCLENV_ERROR, "%s=%s: must be one of %s",
                           e->name, shown(v, buf, sizeof(buf)), list);
        }
        break;
    case NE_LEVEL_P2P:
        return check_level(e->name, v, 1, out);
    case NE_LEVEL_NET:
        return check_level(e->name, v, 0, out);
    case NE_IFNAME:
        return check_iflist(e->name, v, 0, out);
    case NE_HCA:
        return check_iflist(e->name, v, 1, out);
    case NE_SUBSYS:
        return check_word_list(e->name, v, subsystems, "debug subsystem", out);
    case NE_ALGO:
        return check_algo_proto(e->name, v, algos, "algorithm", out);
    case NE_PROTO:
        return check_algo_proto(e->name, v, protos, "protocol", out);
    }
    if (e->pinned != NULL && strcmp(v, e->pinned) == 0)
        return finding(out, NCCLENV_WARNING,
                       "%s=%s only restates NCCL's default, and as an "
                       "environment variable it overrides NCCL_CONF_FILE, "
                       "so the ring check's fallback cannot change it; "
                       "remove it",
                       e->name, v);
    return NCCLENV_OK;
}

enum ncclenv_severity
ncclenv_check(const char *name, const char *value, struct ncclenv_finding *out)
{
    const struct ncclenv_entry *e;
    const char *close;
    size_t dist;

    out->severity = NCCLENV_OK;
    out->msg[0] = '\0';
    if (strncmp(name, "TORCH_NCCL_", 11) == 0) {
        for (size_t i = 0; i < sizeof(torch_vars) / sizeof(torch_vars[0]);
             i++) {
            long long n;
            char buf[48];

            if (strcmp(torch_vars[i].name, name) != 0 || value == NULL)
                continue;
            if (torch_vars[i].values != NULL &&
                !word_in(torch_vars[i].values, value, strlen(value)))
                return finding(
                    out, NCCLENV_ERROR, "%s=%s: PyTorch expects one of %s",
                    name, shown(value, buf, sizeof(buf)), torch_vars[i].values);
            if (torch_vars[i].values == NULL && nccl_int(value, &n) != 0)
                return finding(out, NCCLENV_ERROR,
                               "%s=%s: PyTorch expects an integer", name,
                               shown(value, buf, sizeof(buf)));
        }
        return NCCLENV_OK;
    }
    if (strncmp(name, "NCCL_", 5) != 0)
        return NCCLENV_OK;

    for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
        if (strcmp(moved[i].name, name) != 0)
            continue;
        if (moved[i].instead != NULL)
            return finding(out, moved[i].severity, "%s %s; use %s", name,
                           moved[i].why, moved[i].instead);
        return finding(out, moved[i].severity, "%s %s", name, moved[i].why);
    }

    e = catalog_find(name);
    if (e == NULL) {
        close = catalog_closest(name, &dist);
        if (close != NULL && dist <= 2)
            return finding(out, NCCLENV_ERROR,
                           "NCCL %s has no %.80s; did you mean %s?",
                           NCCLENV_CATALOG_VERSION, name, close);
        return finding(out, NCCLENV_WARNING,
                       "NCCL %s does not read %.80s (a network or tuner "
                       "plugin might)",
                       NCCLENV_CATALOG_VERSION, name);
    }
    if (value == NULL)
        return NCCLENV_OK;
    return check_value(e, value, out);
}
