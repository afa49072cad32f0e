/* The settings schema: one row per key of a settings block, the code that
 * walks the rows (reading, defaults, docs), and the few readers and checks
 * that a type alone does not give. */
#include "policy/schema.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/limits.h"
#include "contract/multinode_env.h"
#include "contract/wdspec.h"
#include "policy/quantity.h"

/* ---- readers and checks of single keys ----------------------------- */

/* gpuResources: at least one extended resource name. */
static bool
read_gpu_resources(struct loader *L, const struct ynode *v, void *base)
{
    struct settings *s = base;
    char **list;
    size_t count;

    if (!pl_get_string_list(L, v, "gpuResources", pl_check_resource_name, &list,
                            &count))
        return false;
    if (count == 0) {
        pl_err(L, v, "gpuResources must name at least one resource");
        return false;
    }
    s->gpu_resources = list;
    s->n_gpu_resources = count;
    return true;
}

/*
 * The ring check is NCCL on CUDA: the webhook gives it only nvidia.com/
 * resources (admission/mutate.c, ringcheck_resource()), so pods of
 * another vendor's resource listed in gpuResources get the profile,
 * /dev/shm and IPC settings but no check. Lint says so where the list
 * names one and the check is on, so that nobody expects it.
 */
static void
gpu_resources_vendor_check(struct loader *L, const struct ynode *parent,
                           void *base)
{
    const struct settings *s = base;
    const struct ynode *v = ynode_get(parent, "gpuResources");

    if (v == NULL || v->kind != YNODE_SEQ || !s->ringcheck.enabled)
        return;
    for (size_t i = 0; i < v->n; i++) {
        const struct ynode *it = v->items[i];

        if (it->kind != YNODE_SCALAR ||
            strncmp(it->str, "nvidia.com/", strlen("nvidia.com/")) == 0)
            continue;
        pl_warn(L, it,
                "gpuResources: %s is not an NVIDIA resource; its pods get "
                "no ring check (NCCL on CUDA), only the profile, /dev/shm "
                "and IPC settings",
                it->str);
    }
}

static void
host_ipc_warn(struct loader *L, const struct ynode *v, void *base)
{
    const struct settings *s = base;

    if (s->ipc.host_ipc)
        pl_warn(L, v,
                "ipc.hostIPC: true makes GPU pods fail Pod Security "
                "\"baseline\" in namespaces that enforce it");
}

static bool
read_bandwidth_bytes(struct loader *L, const struct ynode *v, void *base)
{
    struct settings *s = base;
    int64_t i64;

    if (!pl_get_bytes(L, v, "ringCheck.bandwidthBytes", &i64))
        return false;
    if (i64 == 0 || i64 > (16LL << 30)) {
        pl_err(L, v, "ringCheck.bandwidthBytes must be between 1 and 16Gi");
        return false;
    }
    s->ringcheck.bandwidth_bytes = i64;
    return true;
}

/* A limit below its request makes the apiserver refuse the pod
 * ("must be less than or equal to ... limit" in ValidateResourceRequirements,
 * pkg/apis/core/validation/validation.go). Where one resources map gives
 * both, that is an error; a rule that raises only a request gets a limit
 * raised to it when the pod is mutated (admission/mutate.c). */
static void
ringcheck_limits_check(struct loader *L, const struct ynode *r, void *base,
                       const struct schema_ctx *ctx)
{
    const struct settings *s = base;
    const char *const pair[2][3] = {
        {s->ringcheck.cpu_request, s->ringcheck.cpu_limit, "cpu"},
        {s->ringcheck.memory_request, s->ringcheck.memory_limit, "memory"}};
    static const char *const keys[2][2] = {{"cpu", "cpuLimit"},
                                           {"memory", "memoryLimit"}};

    (void)ctx;
    for (int k = 0; k < 2; k++) {
        struct quantity qr, ql;

        if (ynode_get(r, keys[k][0]) == NULL ||
            ynode_get(r, keys[k][1]) == NULL || pair[k][0] == NULL ||
            pair[k][1] == NULL ||
            quantity_parse(pair[k][0], strlen(pair[k][0]), &qr, NULL) != 0 ||
            quantity_parse(pair[k][1], strlen(pair[k][1]), &ql, NULL) != 0)
            continue;
        if (ql.milli < qr.milli)
            pl_err(L, r,
                   "ringCheck.resources: the %s limit %s is below the %s "
                   "request %s; a limit must hold its request",
                   pair[k][2], pair[k][1], pair[k][2], pair[k][0]);
    }
}

/*
 * An environment value is a string in Kubernetes; YAML reads a bare 1,
 * 0.5 or true as a number or a boolean (0x10 and 1e3 even change their
 * text when a tool rewrites them). A warning asks for quotes, as policy
 * lint does for a profile's data; the text as written is used, so that a
 * policy that loaded before still loads.
 */
static void
env_value_quoted(struct loader *L, const struct ynode *nm,
                 const struct ynode *val)
{
    static const char *const bools[] = {"true", "false", "True", "False",
                                        "TRUE", "FALSE", NULL};
    char *end;
    bool number, boolean = false;

    if (!val->plain || val->len == 0)
        return;
    (void)strtod(val->str, &end);
    number = *end == '\0';
    for (size_t i = 0; bools[i] != NULL; i++)
        boolean = boolean || strcmp(val->str, bools[i]) == 0;
    if (!number && !boolean)
        return;
    pl_warn(L, val,
            "extraEnv value of %.60s is the %s %s in YAML, and environment "
            "values are strings: write \"%s\" in quotes",
            nm->str, number ? "number" : "boolean", val->str, val->str);
}

static bool
read_extra_env(struct loader *L, const struct ynode *n, void *base)
{
    static const char *const env_keys[] = {"name", "value", NULL};
    struct settings *s = base;
    struct env_var *v;
    bool ok = true;

    if (n->kind == YNODE_SCALAR && n->null_tag) {
        s->extra_env = NULL;
        s->n_extra_env = 0;
        return true;
    }
    if (n->kind != YNODE_SEQ) {
        pl_err(L, n, "extraEnv must be a list of {name, value}, got %s",
               ynode_type_name(n));
        return false;
    }
    if (n->n > POLICY_MAX_LIST) {
        pl_err(L, n, "extraEnv has %zu entries, more than %d", n->n,
               POLICY_MAX_LIST);
        return false;
    }
    v = pl_alloc(L->p, (n->n + 1) * sizeof(*v));
    if (v == NULL)
        return false;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->items[i], *nm, *val;

        if (!pl_want_map(L, it, "extraEnv entry")) {
            ok = false;
            continue;
        }
        pl_check_keys(L, it, env_keys, "extraEnv entry");
        nm = ynode_get(it, "name");
        val = ynode_get(it, "value");
        if (nm == NULL) {
            pl_err(L, it, "extraEnv entry needs a name");
            ok = false;
            continue;
        }
        if (val == NULL) {
            pl_err(L, it, "extraEnv entry \"%.60s\" needs a value",
                   nm->kind == YNODE_SCALAR ? nm->str : "?");
            ok = false;
            continue;
        }
        if (!pl_want_text(L, nm, "extraEnv name") ||
            !pl_check_env_name(L, nm, "extraEnv name") ||
            !pl_want_text(L, val, "extraEnv value")) {
            ok = false;
            continue;
        }
        env_value_quoted(L, nm, val);
        for (size_t j = 0; j < i; j++) {
            if (v[j].name != NULL && strcmp(v[j].name, nm->str) == 0) {
                pl_err(L, nm, "extraEnv sets %.60s twice", nm->str);
                ok = false;
            }
        }
        if (!pl_check_nccl(L, nm, nm->str, val->str))
            ok = false;
        v[i].name = pl_strdup(L->p, nm->str);
        v[i].value = pl_strdup(L->p, val->str);
    }
    if (!ok)
        return false;
    s->extra_env = v;
    s->n_extra_env = n->n;
    return true;
}

static void
period_warn(struct loader *L, const struct ynode *v, void *base)
{
    const struct settings *s = base;

    if (s->watchdog.period_ms < 10000)
        pl_warn(L, v,
                "watchdog.period %s is shorter than 10s: NVML averages "
                "utilisation over up to a second, so short periods only "
                "add load (fine for tests)",
                v->str);
}

static bool
read_min_cpu(struct loader *L, const struct ynode *v, void *base)
{
    struct settings *s = base;
    double d;

    if (!pl_get_number(L, v, "watchdog.minCPU", &d))
        return false;
    if (d > WD_MIN_CPU_MAX_MILLI / 1000.0 ||
        fabs(d * 1000.0 - round(d * 1000.0)) > 1e-6) {
        pl_err(L, v,
               "watchdog.minCPU must be cores between 0 and %d with at most "
               "three decimals, got %s",
               WD_MIN_CPU_MAX_MILLI / 1000, v->str);
        return false;
    }
    s->watchdog.min_cpu_milli = (int64_t)round(d * 1000.0);
    return true;
}

static bool
read_checkpoint_signal(struct loader *L, const struct ynode *v, void *base)
{
    struct settings *s = base;
    int sig;
    const char *hint;

    if (!pl_want_text(L, v, "watchdog.checkpoint.signal"))
        return false;
    sig = strcmp(v->str, "none") == 0 ? 0 : wd_signal_from_name(v->str);
    if (sig != 0 || strcmp(v->str, "none") == 0) {
        s->watchdog.checkpoint_signal = sig;
        return true;
    }
    if (strcmp(v->str, "SIGTERM") == 0 || strcmp(v->str, "SIGKILL") == 0 ||
        strcmp(v->str, "TERM") == 0 || strcmp(v->str, "KILL") == 0)
        pl_err(L, v,
               "watchdog.checkpoint.signal must not be %s: the restart "
               "sends SIGTERM itself after the grace period; name a "
               "signal the job catches to save its state, such as "
               "SIGUSR1, or none",
               v->str);
    else if ((hint = pl_closest(v->str, wd_signal_names())) != NULL)
        pl_err(L, v,
               "watchdog.checkpoint.signal \"%.40s\" is not one of "
               "none, SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGWINCH, "
               "SIGURG, SIGCONT; did you mean \"%s\"?",
               v->str, hint);
    else
        pl_err(L, v,
               "watchdog.checkpoint.signal \"%.40s\" is not one of "
               "none, SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGWINCH, "
               "SIGURG, SIGCONT",
               v->str);
    return false;
}

static bool
read_checkpoint_file(struct loader *L, const struct ynode *v, void *base)
{
    struct settings *s = base;
    struct wd_spec tmp;
    struct ng_error e;
    char buf[WD_FILE_MAX + 8];

    if (v->kind == YNODE_SCALAR && (v->null_tag || v->len == 0)) {
        s->watchdog.checkpoint_file = NULL;
        return true;
    }
    if (!pl_want_text(L, v, "watchdog.checkpoint.file"))
        return false;
    /* The agent's own parser decides what a valid path is. */
    snprintf(buf, sizeof(buf), "file=%.*s",
             (int)(v->len > WD_FILE_MAX + 1 ? WD_FILE_MAX + 1 : v->len),
             v->str);
    if (v->len > WD_FILE_MAX || wd_spec_parse(buf, strlen(buf), &tmp, &e) != 0)
        pl_err(L, v, "watchdog.checkpoint.%s",
               v->len > WD_FILE_MAX ? "file: the path is too long" : e.msg);
    else if (strcmp(v->str, "/") == 0 || v->str[v->len - 1] == '/')
        pl_err(L, v, "watchdog.checkpoint.file must name a file, not a folder");
    else
        return pl_get_string(L, v, "watchdog.checkpoint.file",
                             &s->watchdog.checkpoint_file);
    return false;
}

static void
threshold_warn(struct loader *L, const struct ynode *v, void *base)
{
    const struct policy_quarantine *q = base;

    if (q->threshold == 1)
        pl_warn(L, v,
                "quarantine.threshold 1 acts as 2: the verdicts must "
                "come from at least two pods");
}

/* quarantine.expiry: 0 (never), or a duration of 1m to 30 days. */
static bool
read_expiry(struct loader *L, const struct ynode *v, void *base)
{
    struct policy_quarantine *q = base;
    char a[32];
    int64_t i64;

    if (v->kind == YNODE_SCALAR && v->plain && strcmp(v->str, "0") == 0) {
        q->expiry_ms = 0;
        return true;
    }
    if (!pl_get_duration(L, v, "quarantine.expiry", 0, INT64_MAX, &i64))
        return false;
    if (i64 != 0 && (i64 < Q_MINUTE_MS || i64 > 30 * Q_DAY_MS)) {
        pl_err(L, v,
               "quarantine.expiry must be 0 (never) or between 1m and %s, "
               "got %s",
               pl_duration_text(30 * Q_DAY_MS, a, sizeof(a)), v->str);
        return false;
    }
    q->expiry_ms = i64;
    return true;
}

/* quarantine.maxSharePercent: a percentage with one decimal -> permille. */
static bool
read_max_share(struct loader *L, const struct ynode *v, void *base)
{
    struct policy_quarantine *q = base;
    double d;

    if (!pl_get_number(L, v, "quarantine.maxSharePercent", &d))
        return false;
    if (d == 0) {
        pl_err(L, v,
               "quarantine.maxSharePercent 0 would hold every taint; "
               "write mode: observe for no taint, or a share above 0");
        return false;
    }
    if (d > 100 || fabs(d * 10.0 - round(d * 10.0)) > 1e-6) {
        pl_err(L, v,
               "quarantine.maxSharePercent must be a percentage above 0 and "
               "at most 100 with at most one decimal, got %s",
               v->str);
        return false;
    }
    q->max_share_permille = (int)round(d * 10.0);
    return true;
}

/* The cooldown doubles up to cooldownMax; an expiry within the cooldown
 * lifts the taint before any validation pod ran. */
static void
quarantine_check(struct loader *L, const struct ynode *sec, void *base,
                 const struct schema_ctx *ctx)
{
    const struct policy_quarantine *q = base;
    const struct ynode *cd = schema_set_node(ctx, "quarantine.cooldown");
    const struct ynode *cdmax = schema_set_node(ctx, "quarantine.cooldownMax");
    const struct ynode *exp = schema_set_node(ctx, "quarantine.expiry");
    char a[32], b[32];

    (void)sec;
    if ((cd != NULL || cdmax != NULL) && q->cooldown_max_ms < q->cooldown_ms)
        pl_err(L, cdmax != NULL ? cdmax : cd,
               "quarantine.cooldownMax %s is shorter than cooldown %s; the "
               "cooldown doubles after each failed validation up to "
               "cooldownMax",
               pl_duration_text(q->cooldown_max_ms, a, sizeof(a)),
               pl_duration_text(q->cooldown_ms, b, sizeof(b)));
    if ((exp != NULL || cd != NULL) && q->expiry_ms != 0 &&
        q->expiry_ms <= q->cooldown_ms)
        pl_warn(L, exp != NULL ? exp : cd,
                "quarantine.expiry %s is not longer than cooldown %s: the "
                "taint expires before a validation pod has run",
                pl_duration_text(q->expiry_ms, a, sizeof(a)),
                pl_duration_text(q->cooldown_ms, b, sizeof(b)));
}

/* ---- the table ------------------------------------------------------ */

static const char *const shm_existing[] = {"keep", "grow", NULL};
static const char *const shm_memlimit[] = {"warn", "raise", NULL};
static const char *const rc_modes[] = {"process", "group", NULL};
static const char *const rc_onfail[] = {"fail", "warn", "fallback", NULL};
static const char *const rc_nocure[] = {"fail", "warn", NULL};
static const char *const rc_intra[] = {"p2p", "nvlink", "shm", "net", NULL};
static const char *const rc_inter[] = {"ib-gdr", "ib", "socket", "net", NULL};
static const char *const rc_multi[] = {"auto", "off", NULL};
static const char *const rc_missing[] = {"warn", "fail", NULL};
static const char *const wd_actions[] = {"report", "restart", NULL};
static const char *const q_modes[] = {"observe", "quarantine", NULL};

#define S(f) offsetof(struct settings, f)
#define Q(f) offsetof(struct policy_quarantine, f)
#define SECTION(p, d)                                                          \
    {                                                                          \
        .path = p, .type = SCHEMA_SECTION, .doc = d                            \
    }

static const struct schema_key rows[] = {
    {.path = "gpuResources",
     .type = SCHEMA_CUSTOM,
     .parse = read_gpu_resources,
     .def = "[nvidia.com/gpu]",
     .bounds = "extended resource names (domain/name), at least one",
     .doc = "resources that count as GPUs, matched exactly"},

    SECTION("profile", "the platform's NCCL ConfigMap, first in envFrom"),
    {.path = "profile.enabled",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(profile.enabled),
     .def = "true",
     .doc = "inject the envFrom at all"},
    {.path = "profile.name",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(profile.name),
     .check = pl_check_dns_name,
     .def = "nccl-production-profile",
     .bounds = "a Kubernetes object name",
     .doc = "the ConfigMap's name"},
    {.path = "profile.optional",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(profile.optional),
     .def = "true",
     .doc = "configMapRef.optional: pods start where it is missing"},

    SECTION("shm", "/dev/shm: a memory emptyDir of perGPU x GPUs"),
    {.path = "shm.enabled",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(shm.enabled),
     .def = "true",
     .doc = "manage /dev/shm"},
    {.path = "shm.perGPU",
     .type = SCHEMA_BYTES,
     .field = SF_I64,
     .off = S(shm.per_gpu),
     .def = "4Gi",
     .doc = "size per GPU of the pod"},
    {.path = "shm.min",
     .type = SCHEMA_BYTES,
     .field = SF_I64,
     .off = S(shm.min),
     .def = "1Gi",
     .bounds = "whole bytes, at most max",
     .doc = "floor of the computed size"},
    {.path = "shm.max",
     .type = SCHEMA_BYTES,
     .field = SF_I64,
     .off = S(shm.max),
     .def = "64Gi",
     .doc = "ceiling; also the largest ncclguard.io/shm-size accepted"},
    {.path = "shm.existing",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(shm.existing),
     .names = shm_existing,
     .def = "keep",
     .doc = "a /dev/shm the pod mounts already: keep it, or grow its "
            "sizeLimit"},
    {.path = "shm.memoryLimit",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(shm.memory_limit),
     .names = shm_memlimit,
     .def = "warn",
     .doc = "shm above a container's memory limit: warn, or raise the "
            "limit"},

    SECTION("ipc", "IPC settings for GPU containers"),
    {.path = "ipc.capabilities",
     .type = SCHEMA_LIST,
     .field = SF_LIST,
     .off = S(ipc.capabilities),
     .off2 = S(ipc.n_capabilities),
     .check = pl_check_capability,
     .def = "[]",
     .bounds = "capability names without CAP_",
     .doc = "capabilities added to GPU containers, e.g. IPC_LOCK"},
    {.path = "ipc.hostIPC",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(ipc.host_ipc),
     .on_set = host_ipc_warn,
     .flags = SCHEMA_LATE,
     .def = "false",
     .doc = "hostIPC for GPU pods"},
    {.path = "ipc.warnNonRoot",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(ipc.warn_non_root),
     .def = "true",
     .doc = "warn that IPC_LOCK is moot for a non-root container"},

    {.path = "ringCheck",
     .type = SCHEMA_SECTION,
     .next = gpu_resources_vendor_check,
     .doc = "the ncclguard-ringcheck init container"},
    {.path = "ringCheck.enabled",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(ringcheck.enabled),
     .def = "true",
     .doc = "add the check"},
    {.path = "ringCheck.image",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(ringcheck.image),
     .check = pl_check_image,
     .bounds = "an image reference",
     .doc = "left out: the webhook's --ringcheck-image, else "
            "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0"},
    {.path = "ringCheck.timeoutSeconds",
     .type = SCHEMA_INT,
     .field = SF_INT,
     .off = S(ringcheck.timeout_seconds),
     .lo = 1,
     .hi = 3600,
     .def = "120",
     .doc = "deadline for the whole check"},
    {.path = "ringCheck.bandwidthBytes",
     .type = SCHEMA_CUSTOM,
     .parse = read_bandwidth_bytes,
     .def = "256Mi",
     .bounds = "1 to 16Gi",
     .doc = "message size of the bandwidth phase"},
    {.path = "ringCheck.mode",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(ringcheck.mode),
     .names = rc_modes,
     .def = "process",
     .doc = "one process per GPU, or one process with group init"},
    {.path = "ringCheck.onFailure",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(ringcheck.on_failure),
     .names = rc_onfail,
     .def = "fallback",
     .doc = "a failed check: fail the pod, warn, or fall back to a "
            "conservative NCCL config"},
    {.path = "ringCheck.onNoCure",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(ringcheck.on_no_cure),
     .names = rc_nocure,
     .base = 1,
     .doc = "fallback without a cure (--on-no-cure=); left out: the "
            "check's default, fail"},
    SECTION("ringCheck.expectTransport",
            "what NCCL must choose (--expect-transport=); left out: no "
            "expectation"),
    {.path = "ringCheck.expectTransport.intra",
     .type = SCHEMA_ENUM,
     .field = SF_CSTR,
     .off = S(ringcheck.expect_intra),
     .names = rc_intra,
     .doc = "within the pod"},
    {.path = "ringCheck.expectTransport.inter",
     .type = SCHEMA_ENUM,
     .field = SF_CSTR,
     .off = S(ringcheck.expect_inter),
     .names = rc_inter,
     .doc = "across pods"},
    {.path = "ringCheck.minBusBandwidthGBps",
     .type = SCHEMA_NUMBER,
     .field = SF_DBL,
     .off = S(ringcheck.min_busbw_gbps),
     .def = "0",
     .doc = "GB/s within the node; 0 = no threshold"},
    {.path = "ringCheck.minNetBusBandwidthGBps",
     .type = SCHEMA_NUMBER,
     .field = SF_DBL,
     .off = S(ringcheck.min_net_busbw_gbps),
     .def = "0",
     .doc = "GB/s across nodes (--min-busbw-net); 0 = no threshold"},
    {.path = "ringCheck.allowOptOut",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(ringcheck.allow_opt_out),
     .def = "true",
     .doc = "honour ncclguard.io/ring-check: \"false\""},
    {.path = "ringCheck.resources",
     .type = SCHEMA_SECTION,
     .after = ringcheck_limits_check,
     .flags = SCHEMA_LATE,
     .doc = "the init container's requests, and its limits outside "
            "Guaranteed pods"},
    {.path = "ringCheck.resources.cpu",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(ringcheck.cpu_request),
     .check = pl_check_cpu_quantity,
     .def = "250m",
     .bounds = "a CPU quantity",
     .doc = "CPU request"},
    {.path = "ringCheck.resources.memory",
     .type = SCHEMA_QBYTES,
     .field = SF_STR,
     .off = S(ringcheck.memory_request),
     .def = "2Gi",
     .doc = "memory request"},
    {.path = "ringCheck.resources.cpuLimit",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(ringcheck.cpu_limit),
     .check = pl_check_cpu_quantity,
     .def = "\"2\"",
     .bounds = "a CPU quantity, at least cpu",
     .doc = "CPU limit"},
    {.path = "ringCheck.resources.memoryLimit",
     .type = SCHEMA_QBYTES,
     .field = SF_STR,
     .off = S(ringcheck.memory_limit),
     .def = "4Gi",
     .bounds = "whole bytes, at least memory",
     .doc = "memory limit"},
    {.path = "ringCheck.minGPUs",
     .type = SCHEMA_INT,
     .field = SF_INT,
     .off = S(ringcheck.min_gpus),
     .lo = RINGCHECK_MIN_GPUS,
     .hi = RINGCHECK_MAX_GPUS,
     .def = "2",
     .doc = "no single-pod check below this many GPUs"},
    {.path = "ringCheck.multiNode",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(ringcheck.multi_node),
     .names = rc_multi,
     .def = "auto",
     .doc = "the job's pods check together when an operator is detected"},
    {.path = "ringCheck.rendezvousPort",
     .type = SCHEMA_INT,
     .field = SF_INT,
     .off = S(ringcheck.rendezvous_port),
     .lo = RINGCHECK_MIN_PORT,
     .hi = RINGCHECK_MAX_PORT,
     .def = "29450",
     .doc = "TCP, on node rank 0's pod"},
    {.path = "ringCheck.multiNodeTimeout",
     .type = SCHEMA_INT,
     .field = SF_INT,
     .off = S(ringcheck.multi_node_timeout),
     .lo = RINGCHECK_MIN_MN_TIMEOUT_S,
     .hi = RINGCHECK_MAX_MN_TIMEOUT_S,
     .def = "300",
     .doc = "seconds to wait for the job's other pods"},
    {.path = "ringCheck.onMissing",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = S(ringcheck.on_missing),
     .names = rc_missing,
     .def = "warn",
     .doc = "pods still missing at that deadline: warn, or fail"},
    {.path = "ringCheck.leaderAddress",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(ringcheck.leader_address),
     .check = pl_check_template,
     .bounds = "a template",
     .doc = "node rank 0's address; left out: its name under the job's "
            "headless Service"},
    {.path = "ringCheck.nodes",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(ringcheck.nodes),
     .check = pl_check_template,
     .def = "\"{annotation:ncclguard.io/nodes}\"",
     .bounds = "a template",
     .doc = "the job's node count"},

    {.path = "extraEnv",
     .type = SCHEMA_CUSTOM,
     .parse = read_extra_env,
     .def = "[]",
     .bounds = "a list of {name, value}, NCCL names checked",
     .doc = "variables for GPU containers; the container's own win"},

    SECTION("debug", "ncclguard.io/debug: \"true\" on a pod"),
    {.path = "debug.allowAnnotation",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(debug.allow_annotation),
     .def = "true",
     .doc = "honour the annotation"},
    {.path = "debug.level",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(debug.level),
     .nccl = "NCCL_DEBUG",
     .def = "INFO",
     .bounds = "an NCCL_DEBUG value",
     .doc = "NCCL_DEBUG it sets"},
    {.path = "debug.subsys",
     .type = SCHEMA_STRING,
     .field = SF_STR,
     .off = S(debug.subsys),
     .nccl = "NCCL_DEBUG_SUBSYS",
     .def = "INIT,COLL,ENV,NET",
     .bounds = "an NCCL_DEBUG_SUBSYS value",
     .doc = "NCCL_DEBUG_SUBSYS it sets"},

    SECTION("watchdog", "the ncclguard-watchdog opt-in (docs/watchdog.md)"),
    {.path = "watchdog.enabled",
     .type = SCHEMA_BOOL,
     .field = SF_BOOL,
     .off = S(watchdog.enabled),
     .def = "false",
     .doc = "NCCLGUARD_WATCHDOG in GPU containers"},
    {.path = "watchdog.period",
     .type = SCHEMA_DURATION,
     .field = SF_I64,
     .off = S(watchdog.period_ms),
     .lo = WD_PERIOD_MIN_MS,
     .hi = WD_PERIOD_MAX_MS,
     .on_set = period_warn,
     .def = "60s",
     .doc = "one observation period"},
    {.path = "watchdog.idlePeriods",
     .type = SCHEMA_INT,
     .field = SF_INT,
     .off = S(watchdog.idle_periods),
     .lo = WD_IDLE_MIN,
     .hi = WD_IDLE_MAX,
     .def = "5",
     .doc = "idle periods in a row that make a hang"},
    {.path = "watchdog.minCPU",
     .type = SCHEMA_CUSTOM,
     .parse = read_min_cpu,
     .def = "0.5",
     .bounds = "cores, 0 to 1024, three decimals",
     .doc = "CPU the pod still burns (NCCL spins)"},
    {.path = "watchdog.action",
     .type = SCHEMA_ENUM,
     .field = SF_BOOL,
     .off = S(watchdog.restart),
     .names = wd_actions,
     .def = "report",
     .doc = "report, or also restart the pod"},
    SECTION("watchdog.checkpoint", "what the restart asks of the job first"),
    {.path = "watchdog.checkpoint.signal",
     .type = SCHEMA_CUSTOM,
     .parse = read_checkpoint_signal,
     .def = "none",
     .bounds = "none, SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGWINCH, SIGURG, "
               "SIGCONT",
     .doc = "sent to processes that catch it"},
    {.path = "watchdog.checkpoint.file",
     .type = SCHEMA_CUSTOM,
     .parse = read_checkpoint_file,
     .def = "\"\"",
     .bounds = "an absolute path, \"\" = none",
     .doc = "written inside the container"},
    {.path = "watchdog.grace",
     .type = SCHEMA_DURATION,
     .field = SF_I64,
     .off = S(watchdog.grace_ms),
     .lo = 0,
     .hi = WD_GRACE_MAX_MS,
     .def = "120s",
     .doc = "checkpoint request to SIGTERM"},

    {.path = "quarantine",
     .type = SCHEMA_SECTION,
     .flags = SCHEMA_NODE,
     .after = quarantine_check,
     .doc = "node-level, defaults: only: what node-class verdicts do to "
            "the node"},
    {.path = "quarantine.mode",
     .type = SCHEMA_ENUM,
     .field = SF_ENUM,
     .off = Q(mode),
     .names = q_modes,
     .flags = SCHEMA_NODE,
     .def = "observe",
     .doc = "observe: condition and Events; quarantine: also the taint"},
    {.path = "quarantine.threshold",
     .type = SCHEMA_INT,
     .field = SF_INT,
     .off = Q(threshold),
     .lo = 1,
     .hi = 100,
     .on_set = threshold_warn,
     .flags = SCHEMA_NODE,
     .def = "2",
     .doc = "counted verdicts, from at least two pods"},
    {.path = "quarantine.window",
     .type = SCHEMA_MINUTES,
     .field = SF_I64,
     .off = Q(window_ms),
     .lo = Q_MINUTE_MS,
     .hi = 7 * Q_DAY_MS,
     .flags = SCHEMA_NODE,
     .def = "60m",
     .doc = "verdicts older than this are forgotten"},
    {.path = "quarantine.cooldown",
     .type = SCHEMA_MINUTES,
     .field = SF_I64,
     .off = Q(cooldown_ms),
     .lo = Q_MINUTE_MS,
     .hi = 7 * Q_DAY_MS,
     .flags = SCHEMA_NODE,
     .def = "30m",
     .doc = "taint to the first validation pod"},
    {.path = "quarantine.cooldownMax",
     .type = SCHEMA_MINUTES,
     .field = SF_I64,
     .off = Q(cooldown_max_ms),
     .lo = Q_MINUTE_MS,
     .hi = 30 * Q_DAY_MS,
     .flags = SCHEMA_NODE,
     .def = "480m",
     .doc = "each failed validation doubles the cooldown, up to this"},
    {.path = "quarantine.expiry",
     .type = SCHEMA_CUSTOM,
     .parse = read_expiry,
     .flags = SCHEMA_NODE,
     .def = "1440m",
     .bounds = "0 (never), or 1m to 43200m",
     .doc = "the taint goes after this anyway"},
    {.path = "quarantine.maxSharePercent",
     .type = SCHEMA_CUSTOM,
     .parse = read_max_share,
     .flags = SCHEMA_NODE,
     .def = "10",
     .bounds = "above 0, at most 100, one decimal",
     .doc = "breaker: the most GPU nodes under the taint"},
};

#define N_ROWS (sizeof(rows) / sizeof(rows[0]))
_Static_assert(N_ROWS <= SCHEMA_MAX_ROWS, "raise SCHEMA_MAX_ROWS");

size_t
schema_count(void)
{
    return N_ROWS;
}

const struct schema_key *
schema_row(size_t i)
{
    return i < N_ROWS ? &rows[i] : NULL;
}

int
schema_find(const char *path)
{
    for (size_t i = 0; i < N_ROWS; i++)
        if (strcmp(rows[i].path, path) == 0)
            return (int)i;
    return -1;
}

const struct ynode *
schema_set_node(const struct schema_ctx *ctx, const char *path)
{
    int i = schema_find(path);

    return i < 0 ? NULL : ctx->set[i];
}

/* The key of row r under the section at path (len plen), or NULL when r is
 * not a direct child of it. */
static const char *
child_key(const struct schema_key *r, const char *path, size_t plen)
{
    const char *k = r->path;

    if (plen > 0) {
        if (strncmp(k, path, plen) != 0 || k[plen] != '.')
            return NULL;
        k += plen + 1;
    }
    return strchr(k, '.') == NULL ? k : NULL;
}

size_t
schema_children(const char *path, int node_level, const char **names,
                size_t max)
{
    size_t plen = strlen(path), n = 0;

    for (size_t i = 0; i < N_ROWS && n + 1 < max; i++) {
        const char *k = child_key(&rows[i], path, plen);
        int node = (rows[i].flags & SCHEMA_NODE) != 0;

        if (k != NULL && (node_level < 0 || node_level == node))
            names[n++] = k;
    }
    names[n] = NULL;
    return n;
}

/* ---- reading -------------------------------------------------------- */

static void *
field_at(void *base, size_t off)
{
    return (char *)base + off;
}

static void read_section(struct loader *L, const struct ynode *n, size_t idx,
                         struct settings *s, struct policy_quarantine *q,
                         struct schema_ctx *ctx);

/* Reads the value v of row i into its struct; true when it stored one. */
static bool
read_row(struct loader *L, const struct ynode *v, size_t i, void *base)
{
    const struct schema_key *r = &rows[i];
    void *f = field_at(base, r->off);
    int64_t i64;
    int e;

    switch (r->type) {
    case SCHEMA_BOOL:
        return pl_get_bool(L, v, r->path, f);
    case SCHEMA_INT:
        if (!pl_get_int(L, v, r->path, r->lo, r->hi, &i64))
            return false;
        if (r->field == SF_INT)
            *(int *)f = (int)i64;
        else
            *(int64_t *)f = i64;
        return true;
    case SCHEMA_NUMBER:
        return pl_get_number(L, v, r->path, f);
    case SCHEMA_BYTES:
        return pl_get_bytes(L, v, r->path, f);
    case SCHEMA_QBYTES:
        return pl_get_bytes(L, v, r->path, &i64) &&
               pl_get_string(L, v, r->path, f);
    case SCHEMA_STRING:
        if (!pl_want_text(L, v, r->path))
            return false;
        if (r->check != NULL && !r->check(L, v, r->path))
            return false;
        if (r->nccl != NULL && !pl_check_nccl(L, v, r->nccl, v->str))
            return false;
        return pl_get_string(L, v, r->path, f);
    case SCHEMA_ENUM:
        if (!pl_get_enum(L, v, r->path, r->names, &e))
            return false;
        if (r->field == SF_CSTR)
            *(const char **)f = r->names[e];
        else if (r->field == SF_BOOL)
            *(bool *)f = e != 0;
        else
            *(int *)f = r->base + e;
        return true;
    case SCHEMA_DURATION:
        return pl_get_duration(L, v, r->path, r->lo, r->hi, f);
    case SCHEMA_MINUTES:
        return pl_get_duration_minutes(L, v, r->path, r->lo, r->hi, f);
    case SCHEMA_LIST:
        return pl_get_string_list(L, v, r->path, r->check, f,
                                  field_at(base, r->off2));
    case SCHEMA_CUSTOM:
        return r->parse(L, v, base);
    case SCHEMA_SECTION:
        break;
    }
    return false;
}

/* The rows directly under section idx (SIZE_MAX: the settings block) in
 * mapping n: those without SCHEMA_LATE first, then those with it. */
static void
read_children(struct loader *L, const struct ynode *n, size_t idx,
              struct settings *s, struct policy_quarantine *q,
              struct schema_ctx *ctx)
{
    const char *path = idx == SIZE_MAX ? "" : rows[idx].path;
    size_t plen = strlen(path);

    for (unsigned late = 0; late <= SCHEMA_LATE; late += SCHEMA_LATE) {
        for (size_t i = 0; i < N_ROWS; i++) {
            const struct schema_key *r = &rows[i];
            const char *k = child_key(r, path, plen);
            void *base = r->flags & SCHEMA_NODE ? (void *)q : (void *)s;
            const struct ynode *v;

            if (k == NULL || (r->flags & SCHEMA_LATE) != late)
                continue;
            if ((r->flags & SCHEMA_NODE) && q == NULL)
                continue;
            if ((v = ynode_get(n, k)) != NULL) {
                if (r->type == SCHEMA_SECTION) {
                    read_section(L, v, i, s, q, ctx);
                } else if (read_row(L, v, i, base)) {
                    ctx->set[i] = v;
                    if (r->on_set != NULL)
                        r->on_set(L, v, base);
                }
            }
            if (r->next != NULL)
                r->next(L, n, base);
        }
    }
}

static void
read_section(struct loader *L, const struct ynode *n, size_t idx,
             struct settings *s, struct policy_quarantine *q,
             struct schema_ctx *ctx)
{
    const struct schema_key *r = &rows[idx];
    const char *names[SCHEMA_MAX_ROWS + 1];

    if (!pl_want_map(L, n, r->path))
        return;
    schema_children(r->path, -1, names, SCHEMA_MAX_ROWS + 1);
    pl_check_keys(L, n, names, r->path);
    read_children(L, n, idx, s, q, ctx);
    if (r->after != NULL)
        r->after(L, n, r->flags & SCHEMA_NODE ? (void *)q : (void *)s, ctx);
}

void
schema_parse_settings(struct loader *L, const struct ynode *n,
                      struct settings *s, struct policy_quarantine *q,
                      const char *what, struct schema_ctx *ctx)
{
    const char *names[SCHEMA_MAX_ROWS + 1];

    memset(ctx, 0, sizeof(*ctx));
    if (n->kind == YNODE_SCALAR && n->null_tag)
        return;
    if (!pl_want_map(L, n, what))
        return;
    schema_children("", -1, names, SCHEMA_MAX_ROWS + 1);
    pl_check_keys(L, n, names, what);
    for (size_t i = 0; q == NULL && i < n->n; i++) {
        const struct ynode *k = n->keys[i];
        int r;

        if (k->kind != YNODE_SCALAR || (r = schema_find(k->str)) < 0 ||
            !(rows[r].flags & SCHEMA_NODE))
            continue;
        pl_err(L, k,
               "%s is node-level: it belongs under defaults:, not in a "
               "rule's settings",
               k->str);
    }
    read_children(L, n, SIZE_MAX, s, q, ctx);
}

/* ---- the built-in defaults ------------------------------------------ */

/* Reads the text def of row i as a YAML scalar or a flow list of plain
 * strings would be read. */
static void
builtin_row(struct loader *L, size_t i, struct settings *s,
            struct policy_quarantine *q)
{
    const struct schema_key *r = &rows[i];
    char text[128];
    struct ynode item[8], *items[8], node;
    size_t len = strlen(r->def);

    memset(&node, 0, sizeof(node));
    node.kind = YNODE_SCALAR;
    node.plain = true;
    if (len >= sizeof(text)) {
        pl_err(L, NULL, "schema: the default of %s is too long", r->path);
        return;
    }
    memcpy(text, r->def, len + 1);
    if (len >= 2 && text[0] == '"' && text[len - 1] == '"') {
        text[len - 1] = '\0';
        node.str = text + 1;
        node.len = len - 2;
        node.plain = false;
    } else if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
        char *cur = text + 1;

        text[len - 1] = '\0';
        node.kind = YNODE_SEQ;
        node.items = items;
        while (*cur != '\0' && node.n < 8) {
            size_t w = strcspn(cur, ",");

            memset(&item[node.n], 0, sizeof(item[0]));
            item[node.n].kind = YNODE_SCALAR;
            item[node.n].plain = true;
            item[node.n].str = cur;
            item[node.n].len = w;
            items[node.n] = &item[node.n];
            node.n++;
            cur += w;
            if (*cur == ',') {
                *cur++ = '\0';
                cur += strspn(cur, " ");
            }
        }
    } else {
        node.str = text;
        node.len = len;
    }
    if (!read_row(L, &node, i, r->flags & SCHEMA_NODE ? (void *)q : (void *)s))
        pl_err(L, NULL, "schema: the default \"%s\" of %s does not load",
               r->def, r->path);
}

void
schema_builtin(struct loader *L, struct settings *s,
               struct policy_quarantine *q)
{
    memset(s, 0, sizeof(*s));
    memset(q, 0, sizeof(*q));
    for (size_t i = 0; i < N_ROWS; i++) {
        /* "[]" is the empty list, which a zeroed field already is. */
        if (rows[i].type == SCHEMA_SECTION || rows[i].def == NULL ||
            strcmp(rows[i].def, "[]") == 0)
            continue;
        builtin_row(L, i, s, q);
    }
}

/* ---- the reference table -------------------------------------------- */

struct mdbuf {
    char *s;
    size_t n, cap;
    bool oom;
};

static void md_add(struct mdbuf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
md_add(struct mdbuf *b, const char *fmt, ...)
{
    va_list ap;
    int w;

    if (b->oom)
        return;
    for (;;) {
        va_start(ap, fmt);
        w = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)w < b->cap - b->n) {
            b->n += (size_t)w;
            return;
        }
        {
            size_t ncap = (b->cap + (size_t)w + 1) * 2;
            char *ns = realloc(b->s, ncap);

            if (ns == NULL) {
                b->oom = true;
                return;
            }
            b->s = ns;
            b->cap = ncap;
        }
    }
}

/* What row r allows, from its type and bounds. */
static void
md_bounds(struct mdbuf *b, const struct schema_key *r)
{
    char lo[32], hi[32];

    if (r->bounds != NULL) {
        md_add(b, "%s", r->bounds);
        return;
    }
    switch (r->type) {
    case SCHEMA_BOOL:
        md_add(b, "true, false");
        break;
    case SCHEMA_INT:
        md_add(b, "%lld to %lld", (long long)r->lo, (long long)r->hi);
        break;
    case SCHEMA_NUMBER:
        md_add(b, "a number, 0 or more");
        break;
    case SCHEMA_BYTES:
    case SCHEMA_QBYTES:
        md_add(b, "whole bytes");
        break;
    case SCHEMA_ENUM:
        for (size_t i = 0; r->names[i] != NULL; i++)
            md_add(b, "%s%s", i ? ", " : "", r->names[i]);
        break;
    case SCHEMA_DURATION:
    case SCHEMA_MINUTES:
        md_add(b, "%s to %s", pl_duration_text(r->lo, lo, sizeof(lo)),
               pl_duration_text(r->hi, hi, sizeof(hi)));
        break;
    case SCHEMA_SECTION:
        md_add(b, "a mapping");
        break;
    case SCHEMA_STRING:
    case SCHEMA_LIST:
    case SCHEMA_CUSTOM:
        md_add(b, "text");
        break;
    }
}

char *
schema_markdown(void)
{
    struct mdbuf b = {NULL, 0, 0, false};

    md_add(&b, "| key | default | allowed | meaning |\n");
    md_add(&b, "| --- | --- | --- | --- |\n");
    for (size_t i = 0; i < N_ROWS; i++) {
        const struct schema_key *r = &rows[i];

        md_add(&b, "| `%s` |", r->path);
        /* A mapping's defaults are its rows'. */
        if (r->type != SCHEMA_SECTION && r->def != NULL)
            md_add(&b, " `%s`", r->def);
        else if (r->type != SCHEMA_SECTION)
            md_add(&b, " left out");
        md_add(&b, " | ");
        md_bounds(&b, r);
        md_add(&b, " | %s |\n", r->doc);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
