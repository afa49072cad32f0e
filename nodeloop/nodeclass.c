/* Classifies node evidence: the ring check's termination message (the
 * lines report_verdict writes, ringcheck/report.c) and the node agent's own
 * findings, through one table of rules (docs/nodeloop.md). */
#include "nodeloop/nodeclass.h"

#include <stdio.h>
#include <string.h>

/* The termination message is at most 4096 bytes (report_verdict, and the
 * kubelet's own cap on terminationMessagePath); more is cut. */
#define NC_MSG_MAX 4096

const char *
nc_class_name(enum nc_class c)
{
    switch (c) {
    case NC_CLASS_NONE:
        return "none";
    case NC_CLASS_NODE:
        return "node";
    case NC_CLASS_PAIR:
        return "pair";
    case NC_CLASS_JOB:
        return "job";
    case NC_CLASS_UNKNOWN:
        break;
    }
    return "unknown";
}

const char *
nc_verdict_name(enum nc_verdict v)
{
    switch (v) {
    case NC_VERDICT_PASS:
        return "pass";
    case NC_VERDICT_FALLBACK:
        return "fallback";
    case NC_VERDICT_WARN:
        return "warn";
    case NC_VERDICT_FAIL:
        return "fail";
    case NC_VERDICT_HANG:
        return "hang";
    case NC_VERDICT_LOST_GPU:
        return "lost-gpu";
    case NC_VERDICT_CANNOT_RUN:
        break;
    }
    return "cannot-run";
}

/* A bounded view of the message. */
struct text {
    const char *p;
    size_t n;
};

static int
starts(struct text t, const char *prefix)
{
    size_t k = strlen(prefix);

    return t.n >= k && memcmp(t.p, prefix, k) == 0;
}

/* Whether needle occurs in t. */
static int
contains(struct text t, const char *needle)
{
    size_t k = strlen(needle);

    if (k == 0)
        return 1;
    for (size_t i = 0; i + k <= t.n; i++)
        if (t.p[i] == needle[0] && memcmp(t.p + i, needle, k) == 0)
            return 1;
    return 0;
}

/* The line of msg that starts with prefix, prefix cut off; {NULL, 0} when
 * none does. */
static struct text
line_after(struct text msg, const char *prefix)
{
    size_t i = 0;
    struct text none = {NULL, 0};

    while (i < msg.n) {
        size_t e = i;
        struct text line;

        while (e < msg.n && msg.p[e] != '\n')
            e++;
        line.p = msg.p + i;
        line.n = e - i;
        if (starts(line, prefix)) {
            size_t k = strlen(prefix);
            struct text v = {line.p + k, line.n - k};
            return v;
        }
        i = e + 1;
    }
    return none;
}

/* Reads a non-negative decimal at t (at most 4 digits). -1 when none. */
static int
number_at(struct text t, size_t off)
{
    int v = 0, digits = 0;

    while (off < t.n && t.p[off] >= '0' && t.p[off] <= '9' && digits < 4) {
        v = v * 10 + (t.p[off] - '0');
        off++;
        digits++;
    }
    return digits > 0 ? v : -1;
}

/* Finds " (exit N) in phase P" in the failure line. */
static void
code_phase(struct text line, int *code, int *phase)
{
    static const char ex[] = "(exit ", ph[] = ") in phase ";

    for (size_t i = 0; i + sizeof(ex) - 1 <= line.n; i++) {
        if (memcmp(line.p + i, ex, sizeof(ex) - 1) != 0)
            continue;
        *code = number_at(line, i + sizeof(ex) - 1);
        for (size_t j = i; j + sizeof(ph) - 1 <= line.n; j++)
            if (memcmp(line.p + j, ph, sizeof(ph) - 1) == 0) {
                *phase = number_at(line, j + sizeof(ph) - 1);
                return;
            }
        return;
    }
}

/* Which line of the message a rule looks into. */
enum field { F_ANY, F_WHAT, F_DIAG, F_XDIAG };

/*
 * One row per exit code and diagnosis result, first match wins. code -1
 * and phase_lo -1 match any. The rows are the table of docs/nodeloop.md,
 * in the same order; tests/nodeloop/run.sh checks one real message per row.
 */
struct rule {
    int code;
    int phase_lo, phase_hi;
    enum field field;
    const char *needle;
    enum nc_class cls;
    const char *reason;
};

static const struct rule rules[] = {
    /* The cross-node phase (ringcheck/multinode.c): a failing node pair
     * narrowed by the leader's pair rounds; anything else there is a peer
     * that never came, a name that does not resolve, a deadline. */
    {-1, 7, 7, F_XDIAG, "failing pairs: ", NC_CLASS_PAIR, "NodePairFails"},
    {-1, 7, 7, F_ANY, "", NC_CLASS_JOB, "CrossNodeIncomplete"},
    /* Preflight (phase 0). */
    {9, 0, 0, F_WHAT, "no usable GPU or driver", NC_CLASS_NODE,
     "NoGPUOrDriver"},
    {9, 0, 0, F_WHAT, "GPU count mismatch", NC_CLASS_NODE, "GPUCountMismatch"},
    {9, 0, 0, F_WHAT, "duplicate devices", NC_CLASS_NODE, "DuplicateGPUs"},
    {9, 0, 0, F_WHAT, "/dev/shm too small", NC_CLASS_JOB, "ShmTooSmall"},
    {3, 0, 0, F_WHAT, "NCCL_SOCKET_IFNAME", NC_CLASS_JOB,
     "SocketIfnameMissing"},
    {3, 0, 0, F_WHAT, "NCCL_IB_HCA", NC_CLASS_JOB, "IBHCAMissing"},
    /* The check was stopped (pod deleted): no evidence either way. */
    {4, -1, -1, F_WHAT, "stopped by signal", NC_CLASS_UNKNOWN,
     "CheckInterrupted"},
    /* A worker in D state: a wedged GPU or driver. */
    {4, -1, -1, F_WHAT, "not reaped", NC_CLASS_NODE, "GPUWorkerUnkillable"},
    /* The diagnosis named the node-local transport that breaks. */
    {-1, 3, 6, F_DIAG, "passes with NCCL_P2P_DISABLE=1", NC_CLASS_NODE,
     "P2PBroken"},
    {-1, 3, 6, F_DIAG, "passes with NCCL_SHM_DISABLE=1", NC_CLASS_NODE,
     "ShmBroken"},
    {-1, 3, 6, F_DIAG, "passes with NCCL_NVLS_ENABLE=0", NC_CLASS_NODE,
     "NVLSBroken"},
    {-1, 3, 6, F_DIAG, "passes with NCCL_CUMEM_ENABLE=0", NC_CLASS_NODE,
     "CuMemBroken"},
    /* The GPUs return wrong data (ECC, a bad GPU). */
    {7, 4, 5, F_ANY, "", NC_CLASS_NODE, "WrongResults"},
    /* Slow without a node-local cure: could be the policy's floor. */
    {8, 5, 5, F_ANY, "", NC_CLASS_UNKNOWN, "BandwidthLow"},
    /* No setting helps, but bisection kept failing on one GPU pair. */
    {-1, 3, 6, F_DIAG, "failing pair GPU ", NC_CLASS_NODE, "GPUPairFails"},
    /* Device set-up on the pod's own GPUs failed. */
    {2, 0, 2, F_ANY, "", NC_CLASS_NODE, "CUDAError"},
    {6, -1, -1, F_ANY, "", NC_CLASS_JOB, "UsageError"},
    {1, -1, -1, F_ANY, "", NC_CLASS_UNKNOWN, "InternalError"},
    {-1, -1, -1, F_ANY, "", NC_CLASS_UNKNOWN, "Unclassified"},
};

/* The longest prefix of t, at most max bytes, that does not end inside a
 * UTF-8 sequence: the summary and the cure go into Event and annotation
 * JSON, which a cut character would make the API client refuse. */
static size_t
utf8_prefix(struct text t, size_t max)
{
    size_t k = max;

    if (t.n <= max)
        return t.n;
    while (k > 0 && ((unsigned char)t.p[k] & 0xc0) == 0x80)
        k--;
    return k;
}

static void
set_summary(struct nc_result *out, struct text what)
{
    int n = snprintf(out->summary, sizeof(out->summary), "%s, %s class (%s)",
                     nc_verdict_name(out->verdict), nc_class_name(out->cls),
                     out->reason);

    if (out->cure[0] != '\0' && n > 0 && (size_t)n < sizeof(out->summary))
        n += snprintf(out->summary + n, sizeof(out->summary) - (size_t)n,
                      ", starts with %s", out->cure);
    if (what.n > 0 && n > 0 && (size_t)n < sizeof(out->summary))
        snprintf(out->summary + n, sizeof(out->summary) - (size_t)n, ": %.*s",
                 (int)utf8_prefix(what, 200), what.p);
}

static void
result_init(struct nc_result *out)
{
    memset(out, 0, sizeof(*out));
    out->phase = -1;
}

void
nc_classify_ringcheck(int exit_code, const char *msg, size_t len,
                      struct nc_result *out)
{
    struct text m = {msg != NULL ? msg : "", msg != NULL ? len : 0};
    struct text head, fail_line, what, diag, xdiag, cure;
    int code = -1, phase = -1;

    result_init(out);
    m.n = utf8_prefix(m, NC_MSG_MAX);
    head = m;
    if (starts(head, "ncclguard-ringcheck passed:") && exit_code == 0) {
        out->verdict = NC_VERDICT_PASS;
        out->cls = NC_CLASS_NONE;
        snprintf(out->reason, sizeof(out->reason), "Passed");
        set_summary(out, line_after(m, "ncclguard-ringcheck passed: "));
        return;
    }
    fail_line = line_after(m, "ncclguard-ringcheck FAILED: ");
    if (fail_line.p == NULL)
        fail_line = line_after(m, "ncclguard-ringcheck check failed: ");
    if (fail_line.p == NULL) {
        /* No verdict: usage error (stderr only), OOM kill, a crash of the
         * supervisor itself, a missing binary. */
        out->verdict = NC_VERDICT_CANNOT_RUN;
        out->code = exit_code == 6 ? 6 : 0;
        out->cls = exit_code == 6 ? NC_CLASS_JOB : NC_CLASS_UNKNOWN;
        snprintf(out->reason, sizeof(out->reason), "%s",
                 exit_code == 6 ? "UsageError" : "NoVerdict");
        set_summary(out, head);
        return;
    }
    code_phase(fail_line, &code, &phase);
    if (starts(head, "ncclguard-ringcheck: FALLBACK: the pod starts with ")) {
        static const char p[] = "ncclguard-ringcheck: FALLBACK: the pod "
                                "starts with ";
        size_t k = sizeof(p) - 1, e = k;

        out->verdict = NC_VERDICT_FALLBACK;
        while (e < head.n && head.p[e] != ' ' && head.p[e] != '\n')
            e++;
        cure.p = head.p + k;
        cure.n = e - k;
        snprintf(out->cure, sizeof(out->cure), "%.*s",
                 (int)utf8_prefix(cure, sizeof(out->cure) - 1), cure.p);
    } else if (starts(head, "ncclguard-ringcheck: WARNING")) {
        out->verdict = NC_VERDICT_WARN;
    } else {
        out->verdict = NC_VERDICT_FAIL;
    }
    out->code = code >= 0 ? code : exit_code;
    out->phase = phase;
    what = line_after(m, "what: ");
    diag = line_after(m, "diagnosis: ");
    xdiag = line_after(m, "cross-node diagnosis: ");
    for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
        const struct rule *r = &rules[i];
        struct text f;

        if (r->code >= 0 && r->code != out->code)
            continue;
        if (r->phase_lo >= 0 && (phase < r->phase_lo || phase > r->phase_hi))
            continue;
        f = r->field == F_WHAT    ? what
            : r->field == F_DIAG  ? diag
            : r->field == F_XDIAG ? xdiag
                                  : m;
        if (r->needle[0] != '\0' && (f.p == NULL || !contains(f, r->needle)))
            continue;
        out->cls = r->cls;
        snprintf(out->reason, sizeof(out->reason), "%s", r->reason);
        break;
    }
    set_summary(out, what);
}

/* The host of "node K: HOST, ..." in msg; 0 and host filled, or -1. */
static int
host_of(struct text m, int k, char *host, size_t hn)
{
    char prefix[24];
    struct text line;
    size_t e = 0;

    snprintf(prefix, sizeof(prefix), "node %d: ", k);
    line = line_after(m, prefix);
    if (line.p == NULL)
        return -1;
    while (e < line.n && line.p[e] != ',' && line.p[e] != ' ')
        e++;
    if (e == 0 || e >= hn)
        return -1;
    memcpy(host, line.p, e);
    host[e] = '\0';
    return 0;
}

int
nc_pair_hosts(const char *msg, size_t len, char hosts[][NC_HOST_MAX], int max)
{
    static const char fp[] = "failing pairs: ";
    struct text m = {msg != NULL ? msg : "", msg != NULL ? len : 0};
    struct text x;
    int n = 0;
    size_t i;

    m.n = utf8_prefix(m, NC_MSG_MAX);
    x = line_after(m, "cross-node diagnosis: ");
    if (x.p == NULL)
        return 0;
    for (i = 0; i + sizeof(fp) - 1 <= x.n; i++)
        if (memcmp(x.p + i, fp, sizeof(fp) - 1) == 0)
            break;
    if (i + sizeof(fp) - 1 > x.n)
        return 0;
    /* "node A - node B, node A - node C" up to the next ';'. */
    for (i += sizeof(fp) - 1; i < x.n && x.p[i] != ';' && n < max; i++) {
        char host[NC_HOST_MAX];
        int k, dup = 0;

        if (i + 5 > x.n || memcmp(x.p + i, "node ", 5) != 0)
            continue;
        k = number_at(x, i + 5);
        if (k < 0 || host_of(m, k, host, sizeof(host)) != 0)
            continue;
        for (int j = 0; j < n && !dup; j++)
            dup = strcmp(hosts[j], host) == 0;
        if (!dup)
            memcpy(hosts[n++], host, strlen(host) + 1);
    }
    return n;
}

int
nc_classify_hang_report(const char *msg, size_t len, struct nc_result *out)
{
    struct text m = {msg, len}, line;
    static const char p[] = "ncclguard-watchdog: NCCLHang: ";

    if (msg == NULL || !starts(m, p))
        return -1;
    result_init(out);
    /* A silent hang says that a collective stopped, not where: a peer on
     * another node, the job's own code, or this node. It is shown, and
     * counted per class, but never held against the node on its own. */
    out->verdict = NC_VERDICT_HANG;
    out->cls = NC_CLASS_UNKNOWN;
    snprintf(out->reason, sizeof(out->reason), "NCCLHang");
    line.p = m.p + sizeof(p) - 1;
    line.n = 0;
    while (line.p + line.n < m.p + m.n && line.p[line.n] != '\n')
        line.n++;
    /* "GPU 0,3 lost 3x60s (NVML_ERROR_GPU_IS_LOST ...)" (pod_hang in
     * watchdog/agent.c). Shown as a lost GPU, but not counted from here:
     * a container can write its own termination message. What counts is
     * the agent's NCCLGPULost Event on the Node (nc_classify_lost_gpu). */
    if (starts(line, "GPU ") && contains(line, " lost ") &&
        contains(line, "GPU_IS_LOST")) {
        out->verdict = NC_VERDICT_LOST_GPU;
        snprintf(out->reason, sizeof(out->reason), "GPULost");
    }
    set_summary(out, line);
    return 0;
}

void
nc_classify_lost_gpu(const char *gpus, struct nc_result *out)
{
    char buf[96];
    struct text t;

    result_init(out);
    out->verdict = NC_VERDICT_LOST_GPU;
    out->cls = NC_CLASS_NODE;
    snprintf(out->reason, sizeof(out->reason), "GPULost");
    snprintf(buf, sizeof(buf), "NVML reports GPU %.40s lost (GPU_IS_LOST)",
             gpus != NULL ? gpus : "?");
    t.p = buf;
    t.n = strlen(buf);
    set_summary(out, t);
}
