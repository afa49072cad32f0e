/* The policy loader: YAML -> immutable snapshot with line:column
 * validation (the settings, rules, match blocks and DRA templates), and the
 * snapshot's lifecycle. */
#include "policy/policy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/evp.h>

#include "base/file.h"
#include "base/text.h"
#include "contract/limits.h"
#include "contract/multinode_env.h"
#include "contract/ncclenv.h"
#include "contract/wdspec.h"
#include "policy/loader.h"
#include "policy/match.h"
#include "policy/quantity.h"
#include "policy/ytree.h"

/* Pattern comparisons the unreachable-rule check may spend. */
#define SHADOW_CHECK_BUDGET 2000000

#define API_VERSION "ncclguard.io/v1alpha1"

/* ---- allocation ---------------------------------------------------- */

void *
pl_alloc(struct policy *p, size_t n)
{
    void *b;

    if (p->n_blocks == p->cap_blocks) {
        size_t ncap = p->cap_blocks ? p->cap_blocks * 2 : 64;
        void **nb = realloc(p->blocks, ncap * sizeof(*nb));

        if (nb == NULL) {
            p->oom = true;
            return NULL;
        }
        p->blocks = nb;
        p->cap_blocks = ncap;
    }
    b = calloc(1, n ? n : 1);
    if (b == NULL) {
        p->oom = true;
        return NULL;
    }
    p->blocks[p->n_blocks++] = b;
    return b;
}

char *
pl_strdup(struct policy *p, const char *s)
{
    size_t n = strlen(s);
    char *c = pl_alloc(p, n + 1);

    if (c != NULL)
        memcpy(c, s, n);
    return c;
}

/* ---- the built-in defaults: policy/default.yaml with the same values;
 * test_default_yaml_is_builtin() in tests/unit/test_policy.c fails when
 * they differ ---- */

/* The watchdog's defaults are the agent's own (contract/wdspec.c), off. */
static void
settings_builtin_watchdog(struct settings *s)
{
    struct wd_spec d;

    wd_spec_defaults(&d);
    s->watchdog.enabled = false;
    s->watchdog.period_ms = d.period_ms;
    s->watchdog.idle_periods = d.idle_periods;
    s->watchdog.min_cpu_milli = d.min_cpu_milli;
    s->watchdog.restart = d.action == WD_ACTION_RESTART;
    s->watchdog.checkpoint_signal = d.checkpoint_signal;
    s->watchdog.checkpoint_file = NULL;
    s->watchdog.grace_ms = d.grace_ms;
}

/* The node agent's quarantine block: observe only, K 2 within 1h, a
 * validation pod after 30m (doubling on failure up to 8h), expiry 24h, and
 * a breaker at 10 % of the GPU nodes. */
static void
quarantine_builtin(struct policy_quarantine *q)
{
    q->mode = QUARANTINE_OBSERVE;
    q->threshold = 2;
    q->window_ms = 3600 * 1000LL;
    q->cooldown_ms = 1800 * 1000LL;
    q->cooldown_max_ms = 8 * 3600 * 1000LL;
    q->expiry_ms = 24 * 3600 * 1000LL;
    q->max_share_permille = 100;
}

/* The ring-check image of policies that name none; serve sets it from
 * --ringcheck-image before it loads a policy (see policy.h). */
static char builtin_ringcheck_image[POLICY_MAX_IMAGE + 1] =
    "ghcr.io/ncclguard/ncclguard-ringcheck:0.1.0";

int
policy_ringcheck_image_set_default(const char *image)
{
    size_t n = image != NULL ? strlen(image) : 0;

    if (n == 0 || n > POLICY_MAX_IMAGE)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (isspace((unsigned char)image[i]) ||
            !isprint((unsigned char)image[i]))
            return -1;
    memcpy(builtin_ringcheck_image, image, n + 1);
    return 0;
}

static int
settings_builtin(struct policy *p, struct settings *s)
{
    memset(s, 0, sizeof(*s));
    s->gpu_resources = pl_alloc(p, sizeof(char *));
    if (s->gpu_resources == NULL)
        return -1;
    s->gpu_resources[0] = pl_strdup(p, "nvidia.com/gpu");
    s->n_gpu_resources = 1;
    s->profile.enabled = true;
    s->profile.name = pl_strdup(p, "nccl-production-profile");
    s->profile.optional = true;
    s->shm.enabled = true;
    s->shm.per_gpu = 4LL << 30;
    s->shm.min = 1LL << 30;
    s->shm.max = 64LL << 30;
    s->shm.existing = SHM_EXISTING_KEEP;
    s->shm.memory_limit = SHM_MEMLIMIT_WARN;
    s->ipc.capabilities = NULL;
    s->ipc.n_capabilities = 0;
    s->ipc.host_ipc = false;
    s->ipc.warn_non_root = true;
    s->ringcheck.enabled = true;
    s->ringcheck.image = pl_strdup(p, builtin_ringcheck_image);
    s->ringcheck.timeout_seconds = 120;
    s->ringcheck.bandwidth_bytes = 256LL << 20;
    s->ringcheck.mode = RINGCHECK_MODE_PROCESS;
    s->ringcheck.on_failure = RINGCHECK_FALLBACK;
    s->ringcheck.min_busbw_gbps = 0;
    s->ringcheck.allow_opt_out = true;
    s->ringcheck.cpu_request = pl_strdup(p, "250m");
    s->ringcheck.memory_request = pl_strdup(p, "2Gi");
    s->ringcheck.cpu_limit = pl_strdup(p, "2");
    s->ringcheck.memory_limit = pl_strdup(p, "4Gi");
    s->ringcheck.min_gpus = 2;
    s->ringcheck.multi_node = RINGCHECK_MULTINODE_AUTO;
    s->ringcheck.rendezvous_port = MN_DEFAULT_PORT;
    s->ringcheck.multi_node_timeout = 300;
    s->ringcheck.on_missing = RINGCHECK_MISSING_WARN;
    s->ringcheck.leader_address = NULL;
    s->ringcheck.nodes = pl_strdup(p, "{annotation:ncclguard.io/nodes}");
    s->extra_env = NULL;
    s->n_extra_env = 0;
    s->debug.allow_annotation = true;
    s->debug.level = pl_strdup(p, "INFO");
    s->debug.subsys = pl_strdup(p, "INIT,COLL,ENV,NET");
    settings_builtin_watchdog(s);
    return p->oom ? -1 : 0;
}

/* ---- the loader ---------------------------------------------------- */

/* Where each key may appear, for "did you mean" across sections. */
static const char *const settings_keys[] = {
    "gpuResources", "profile", "shm",      "ipc", "ringCheck",
    "extraEnv",     "debug",   "watchdog", NULL};
static const char *const watchdog_keys[] = {"enabled", "period", "idlePeriods",
                                            "minCPU",  "action", "checkpoint",
                                            "grace",   NULL};
static const char *const checkpoint_keys[] = {"signal", "file", NULL};
/* Node-level keys: under defaults only, never in a rule's settings. */
static const char *const defaults_keys[] = {
    "gpuResources", "profile", "shm",      "ipc",        "ringCheck",
    "extraEnv",     "debug",   "watchdog", "quarantine", NULL};
static const char *const node_level_keys[] = {"quarantine", NULL};
static const char *const quarantine_keys[] = {
    "mode",        "threshold", "window",          "cooldown",
    "cooldownMax", "expiry",    "maxSharePercent", NULL};
static const char *const profile_keys[] = {"enabled", "name", "optional", NULL};
static const char *const shm_keys[] = {"enabled",  "perGPU",      "min", "max",
                                       "existing", "memoryLimit", NULL};
static const char *const ipc_keys[] = {"capabilities", "hostIPC", "warnNonRoot",
                                       NULL};
static const char *const ringcheck_keys[] = {"enabled",
                                             "image",
                                             "timeoutSeconds",
                                             "bandwidthBytes",
                                             "mode",
                                             "onFailure",
                                             "onNoCure",
                                             "expectTransport",
                                             "minBusBandwidthGBps",
                                             "minNetBusBandwidthGBps",
                                             "allowOptOut",
                                             "resources",
                                             "minGPUs",
                                             "multiNode",
                                             "rendezvousPort",
                                             "multiNodeTimeout",
                                             "onMissing",
                                             "leaderAddress",
                                             "nodes",
                                             NULL};
static const char *const resources_keys[] = {"cpu", "memory", "cpuLimit",
                                             "memoryLimit", NULL};
static const char *const debug_keys[] = {"allowAnnotation", "level", "subsys",
                                         NULL};
static const char *const env_keys[] = {"name", "value", NULL};
static const char *const top_keys[] = {
    "apiVersion", "kind", "metadata", "defaults", "rules", "dra", NULL};
static const char *const rule_keys[] = {"name", "match", "skip", "settings",
                                        NULL};
static const char *const match_keys[] = {
    "namespaces",   "excludeNamespaces", "podLabels", "matchExpressions",
    "annotations",  "minGPUs",           "maxGPUs",   "resources",
    "nodeSelector", "tolerations",       NULL};
static const char *const expr_keys[] = {"key", "operator", "values", NULL};

static const struct {
    const char *section;
    const char *const *keys;
} key_sections[] = {
    {"settings", settings_keys},   {"shm", shm_keys},
    {"ringCheck", ringcheck_keys}, {"ipc", ipc_keys},
    {"profile", profile_keys},     {"debug", debug_keys},
    {"match", match_keys},         {"rule", rule_keys},
    {"watchdog", watchdog_keys},   {"watchdog.checkpoint", checkpoint_keys},
    {"defaults", node_level_keys}, {"quarantine", quarantine_keys},
};

/* Reports keys of map that are not in allowed. */
static void
check_keys(struct loader *L, const struct ynode *map,
           const char *const *allowed, const char *where)
{
    for (size_t i = 0; i < map->n; i++) {
        const struct ynode *k = map->keys[i];
        const char *hint;
        bool known = false;

        if (k->kind != YNODE_SCALAR) {
            pl_err(L, k, "%s keys must be plain strings", where);
            continue;
        }
        for (size_t j = 0; allowed[j] != NULL && !known; j++)
            known = strcmp(allowed[j], k->str) == 0;
        if (known)
            continue;
        hint = pl_closest(k->str, allowed);
        if (hint != NULL) {
            pl_err(L, k, "unknown key \"%.60s\" in %s; did you mean \"%s\"?",
                   k->str, where, hint);
            continue;
        }
        for (size_t s = 0; s < sizeof(key_sections) / sizeof(key_sections[0]);
             s++) {
            const char *const *ks = key_sections[s].keys;

            if (ks == allowed)
                continue;
            for (size_t j = 0; ks[j] != NULL; j++) {
                if (strcmp(ks[j], k->str) == 0) {
                    hint = key_sections[s].section;
                    break;
                }
            }
            if (hint != NULL)
                break;
        }
        if (hint != NULL)
            pl_err(L, k, "unknown key \"%.60s\" in %s; it belongs under %s",
                   k->str, where, hint);
        else
            pl_err(L, k,
                   "unknown key \"%.60s\" in %s (expected one of the "
                   "keys documented in policy/default.yaml)",
                   k->str, where);
    }
}

/* A limit below its request makes the apiserver refuse the pod
 * ("must be less than or equal to ... limit" in ValidateResourceRequirements,
 * pkg/apis/core/validation/validation.go). Where one resources map gives
 * both, that is an error; a rule that raises only a request gets a limit
 * raised to it when the pod is mutated (admission/mutate.c). */
static void
ringcheck_limits_check(struct loader *L, const struct ynode *r,
                       const struct settings *s)
{
    const char *const pair[2][3] = {
        {s->ringcheck.cpu_request, s->ringcheck.cpu_limit, "cpu"},
        {s->ringcheck.memory_request, s->ringcheck.memory_limit, "memory"}};
    static const char *const keys[2][2] = {{"cpu", "cpuLimit"},
                                           {"memory", "memoryLimit"}};

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

/* ---- settings ------------------------------------------------------ */

/* Where the shm bounds were written, for the min <= max check. */
struct shm_pos {
    const struct ynode *per_gpu, *min, *max, *block;
};

static void
parse_profile(struct loader *L, const struct ynode *n, struct settings *s)
{
    const struct ynode *v;

    if (!pl_want_map(L, n, "profile"))
        return;
    check_keys(L, n, profile_keys, "profile");
    if ((v = ynode_get(n, "enabled")) != NULL)
        pl_get_bool(L, v, "profile.enabled", &s->profile.enabled);
    if ((v = ynode_get(n, "name")) != NULL &&
        pl_want_text(L, v, "profile.name") &&
        pl_check_dns_name(L, v, "profile.name"))
        pl_get_string(L, v, "profile.name", &s->profile.name);
    if ((v = ynode_get(n, "optional")) != NULL)
        pl_get_bool(L, v, "profile.optional", &s->profile.optional);
}

static void
parse_shm(struct loader *L, const struct ynode *n, struct settings *s,
          struct shm_pos *pos)
{
    static const char *const existing[] = {"keep", "grow", NULL};
    static const char *const memlimit[] = {"warn", "raise", NULL};
    const struct ynode *v;
    int e;

    if (!pl_want_map(L, n, "shm"))
        return;
    pos->block = n;
    check_keys(L, n, shm_keys, "shm");
    if ((v = ynode_get(n, "enabled")) != NULL)
        pl_get_bool(L, v, "shm.enabled", &s->shm.enabled);
    if ((v = ynode_get(n, "perGPU")) != NULL &&
        pl_get_bytes(L, v, "shm.perGPU", &s->shm.per_gpu))
        pos->per_gpu = v;
    if ((v = ynode_get(n, "min")) != NULL &&
        pl_get_bytes(L, v, "shm.min", &s->shm.min))
        pos->min = v;
    if ((v = ynode_get(n, "max")) != NULL &&
        pl_get_bytes(L, v, "shm.max", &s->shm.max))
        pos->max = v;
    if ((v = ynode_get(n, "existing")) != NULL &&
        pl_get_enum(L, v, "shm.existing", existing, &e))
        s->shm.existing = (enum shm_existing)e;
    if ((v = ynode_get(n, "memoryLimit")) != NULL &&
        pl_get_enum(L, v, "shm.memoryLimit", memlimit, &e))
        s->shm.memory_limit = (enum shm_memory_limit)e;
}

static void
parse_ipc(struct loader *L, const struct ynode *n, struct settings *s)
{
    const struct ynode *v;

    if (!pl_want_map(L, n, "ipc"))
        return;
    check_keys(L, n, ipc_keys, "ipc");
    if ((v = ynode_get(n, "capabilities")) != NULL)
        pl_get_string_list(L, v, "ipc.capabilities", pl_check_capability,
                           &s->ipc.capabilities, &s->ipc.n_capabilities);
    if ((v = ynode_get(n, "warnNonRoot")) != NULL)
        pl_get_bool(L, v, "ipc.warnNonRoot", &s->ipc.warn_non_root);
    if ((v = ynode_get(n, "hostIPC")) != NULL &&
        pl_get_bool(L, v, "ipc.hostIPC", &s->ipc.host_ipc) && s->ipc.host_ipc)
        pl_warn(L, v,
                "ipc.hostIPC: true makes GPU pods fail Pod Security "
                "\"baseline\" in namespaces that enforce it");
}

/* The multi-node keys of ringCheck and minGPUs. */
static void
parse_ringcheck_multinode(struct loader *L, const struct ynode *n,
                          struct settings *s)
{
    static const char *const multi[] = {"auto", "off", NULL};
    static const char *const missing[] = {"warn", "fail", NULL};
    const struct ynode *v;
    int64_t i64;
    int e;

    if ((v = ynode_get(n, "minGPUs")) != NULL &&
        pl_get_int(L, v, "ringCheck.minGPUs", RINGCHECK_MIN_GPUS,
                   RINGCHECK_MAX_GPUS, &i64))
        s->ringcheck.min_gpus = (int)i64;
    if ((v = ynode_get(n, "multiNode")) != NULL &&
        pl_get_enum(L, v, "ringCheck.multiNode", multi, &e))
        s->ringcheck.multi_node = (enum ringcheck_multinode)e;
    if ((v = ynode_get(n, "rendezvousPort")) != NULL &&
        pl_get_int(L, v, "ringCheck.rendezvousPort", RINGCHECK_MIN_PORT,
                   RINGCHECK_MAX_PORT, &i64))
        s->ringcheck.rendezvous_port = (int)i64;
    if ((v = ynode_get(n, "multiNodeTimeout")) != NULL &&
        pl_get_int(L, v, "ringCheck.multiNodeTimeout",
                   RINGCHECK_MIN_MN_TIMEOUT_S, RINGCHECK_MAX_MN_TIMEOUT_S,
                   &i64))
        s->ringcheck.multi_node_timeout = (int)i64;
    if ((v = ynode_get(n, "onMissing")) != NULL &&
        pl_get_enum(L, v, "ringCheck.onMissing", missing, &e))
        s->ringcheck.on_missing = (enum ringcheck_on_missing)e;
    if ((v = ynode_get(n, "leaderAddress")) != NULL &&
        pl_check_template(L, v, "ringCheck.leaderAddress"))
        pl_get_string(L, v, "ringCheck.leaderAddress",
                      &s->ringcheck.leader_address);
    if ((v = ynode_get(n, "nodes")) != NULL &&
        pl_check_template(L, v, "ringCheck.nodes"))
        pl_get_string(L, v, "ringCheck.nodes", &s->ringcheck.nodes);
}

/*
 * ringCheck.expectTransport: {intra: WORD, inter: WORD}, the transport NCCL
 * must choose within the pod and across pods, given to the check as
 * --expect-transport (the same words; docs/ringcheck.md).
 */
static void
parse_expect_transport(struct loader *L, const struct ynode *n,
                       struct settings *s)
{
    static const char *const keys[] = {"intra", "inter", NULL};
    static const char *const intra[] = {"p2p", "nvlink", "shm", "net", NULL};
    static const char *const inter[] = {"ib-gdr", "ib", "socket", "net", NULL};
    const struct ynode *v;
    int e;

    if (!pl_want_map(L, n, "ringCheck.expectTransport"))
        return;
    check_keys(L, n, keys, "ringCheck.expectTransport");
    if ((v = ynode_get(n, "intra")) != NULL &&
        pl_get_enum(L, v, "ringCheck.expectTransport.intra", intra, &e))
        s->ringcheck.expect_intra = intra[e];
    if ((v = ynode_get(n, "inter")) != NULL &&
        pl_get_enum(L, v, "ringCheck.expectTransport.inter", inter, &e))
        s->ringcheck.expect_inter = inter[e];
}

static void
parse_ringcheck(struct loader *L, const struct ynode *n, struct settings *s)
{
    static const char *const modes[] = {"process", "group", NULL};
    static const char *const onfail[] = {"fail", "warn", "fallback", NULL};
    static const char *const nocure[] = {"fail", "warn", NULL};
    const struct ynode *v, *r;
    int64_t i64;
    int e;

    if (!pl_want_map(L, n, "ringCheck"))
        return;
    check_keys(L, n, ringcheck_keys, "ringCheck");
    if ((v = ynode_get(n, "enabled")) != NULL)
        pl_get_bool(L, v, "ringCheck.enabled", &s->ringcheck.enabled);
    if ((v = ynode_get(n, "image")) != NULL &&
        pl_want_text(L, v, "ringCheck.image") &&
        pl_check_image(L, v, "ringCheck.image"))
        pl_get_string(L, v, "ringCheck.image", &s->ringcheck.image);
    if ((v = ynode_get(n, "timeoutSeconds")) != NULL &&
        pl_get_int(L, v, "ringCheck.timeoutSeconds", 1, 3600, &i64))
        s->ringcheck.timeout_seconds = (int)i64;
    if ((v = ynode_get(n, "bandwidthBytes")) != NULL &&
        pl_get_bytes(L, v, "ringCheck.bandwidthBytes", &i64)) {
        if (i64 == 0 || i64 > (16LL << 30))
            pl_err(L, v,
                   "ringCheck.bandwidthBytes must be between 1 and "
                   "16Gi");
        else
            s->ringcheck.bandwidth_bytes = i64;
    }
    if ((v = ynode_get(n, "mode")) != NULL &&
        pl_get_enum(L, v, "ringCheck.mode", modes, &e))
        s->ringcheck.mode = (enum ringcheck_mode)e;
    if ((v = ynode_get(n, "onFailure")) != NULL &&
        pl_get_enum(L, v, "ringCheck.onFailure", onfail, &e))
        s->ringcheck.on_failure = (enum ringcheck_on_failure)e;
    /* The enum's first value is "not given": the names start at 1. */
    if ((v = ynode_get(n, "onNoCure")) != NULL &&
        pl_get_enum(L, v, "ringCheck.onNoCure", nocure, &e))
        s->ringcheck.on_no_cure = (enum ringcheck_on_no_cure)(e + 1);
    if ((v = ynode_get(n, "expectTransport")) != NULL)
        parse_expect_transport(L, v, s);
    if ((v = ynode_get(n, "minBusBandwidthGBps")) != NULL)
        pl_get_number(L, v, "ringCheck.minBusBandwidthGBps",
                      &s->ringcheck.min_busbw_gbps);
    if ((v = ynode_get(n, "minNetBusBandwidthGBps")) != NULL)
        pl_get_number(L, v, "ringCheck.minNetBusBandwidthGBps",
                      &s->ringcheck.min_net_busbw_gbps);
    if ((v = ynode_get(n, "allowOptOut")) != NULL)
        pl_get_bool(L, v, "ringCheck.allowOptOut", &s->ringcheck.allow_opt_out);
    parse_ringcheck_multinode(L, n, s);
    if ((r = ynode_get(n, "resources")) != NULL &&
        pl_want_map(L, r, "ringCheck.resources")) {
        check_keys(L, r, resources_keys, "ringCheck.resources");
        if ((v = ynode_get(r, "cpu")) != NULL &&
            pl_want_text(L, v, "ringCheck.resources.cpu") &&
            pl_check_cpu_quantity(L, v, "ringCheck.resources.cpu"))
            pl_get_string(L, v, "ringCheck.resources.cpu",
                          &s->ringcheck.cpu_request);
        if ((v = ynode_get(r, "memory")) != NULL) {
            int64_t b;

            if (pl_get_bytes(L, v, "ringCheck.resources.memory", &b))
                pl_get_string(L, v, "ringCheck.resources.memory",
                              &s->ringcheck.memory_request);
        }
        if ((v = ynode_get(r, "cpuLimit")) != NULL &&
            pl_want_text(L, v, "ringCheck.resources.cpuLimit") &&
            pl_check_cpu_quantity(L, v, "ringCheck.resources.cpuLimit"))
            pl_get_string(L, v, "ringCheck.resources.cpuLimit",
                          &s->ringcheck.cpu_limit);
        if ((v = ynode_get(r, "memoryLimit")) != NULL) {
            int64_t b;

            if (pl_get_bytes(L, v, "ringCheck.resources.memoryLimit", &b))
                pl_get_string(L, v, "ringCheck.resources.memoryLimit",
                              &s->ringcheck.memory_limit);
        }
        ringcheck_limits_check(L, r, s);
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

static void
parse_extra_env(struct loader *L, const struct ynode *n, struct settings *s)
{
    struct env_var *v;
    bool ok = true;

    if (n->kind == YNODE_SCALAR && n->null_tag) {
        s->extra_env = NULL;
        s->n_extra_env = 0;
        return;
    }
    if (n->kind != YNODE_SEQ) {
        pl_err(L, n, "extraEnv must be a list of {name, value}, got %s",
               ynode_type_name(n));
        return;
    }
    if (n->n > POLICY_MAX_LIST) {
        pl_err(L, n, "extraEnv has %zu entries, more than %d", n->n,
               POLICY_MAX_LIST);
        return;
    }
    v = pl_alloc(L->p, (n->n + 1) * sizeof(*v));
    if (v == NULL)
        return;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->items[i], *nm, *val;

        if (!pl_want_map(L, it, "extraEnv entry")) {
            ok = false;
            continue;
        }
        check_keys(L, it, env_keys, "extraEnv entry");
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
        return;
    s->extra_env = v;
    s->n_extra_env = n->n;
}

static void
parse_debug(struct loader *L, const struct ynode *n, struct settings *s)
{
    const struct ynode *v;

    if (!pl_want_map(L, n, "debug"))
        return;
    check_keys(L, n, debug_keys, "debug");
    if ((v = ynode_get(n, "allowAnnotation")) != NULL)
        pl_get_bool(L, v, "debug.allowAnnotation", &s->debug.allow_annotation);
    if ((v = ynode_get(n, "level")) != NULL &&
        pl_want_text(L, v, "debug.level") &&
        pl_check_nccl(L, v, "NCCL_DEBUG", v->str))
        pl_get_string(L, v, "debug.level", &s->debug.level);
    if ((v = ynode_get(n, "subsys")) != NULL &&
        pl_want_text(L, v, "debug.subsys") &&
        pl_check_nccl(L, v, "NCCL_DEBUG_SUBSYS", v->str))
        pl_get_string(L, v, "debug.subsys", &s->debug.subsys);
}

static void
parse_watchdog_checkpoint(struct loader *L, const struct ynode *n,
                          struct settings *s)
{
    const struct ynode *v;

    if (!pl_want_map(L, n, "watchdog.checkpoint"))
        return;
    check_keys(L, n, checkpoint_keys, "watchdog.checkpoint");
    if ((v = ynode_get(n, "signal")) != NULL &&
        pl_want_text(L, v, "watchdog.checkpoint.signal")) {
        int sig = strcmp(v->str, "none") == 0 ? 0 : wd_signal_from_name(v->str);
        const char *hint;

        if (sig != 0 || strcmp(v->str, "none") == 0) {
            s->watchdog.checkpoint_signal = sig;
        } else if (strcmp(v->str, "SIGTERM") == 0 ||
                   strcmp(v->str, "SIGKILL") == 0 ||
                   strcmp(v->str, "TERM") == 0 || strcmp(v->str, "KILL") == 0) {
            pl_err(L, v,
                   "watchdog.checkpoint.signal must not be %s: the restart "
                   "sends SIGTERM itself after the grace period; name a "
                   "signal the job catches to save its state, such as "
                   "SIGUSR1, or none",
                   v->str);
        } else if ((hint = pl_closest(v->str, wd_signal_names())) != NULL) {
            pl_err(L, v,
                   "watchdog.checkpoint.signal \"%.40s\" is not one of "
                   "none, SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGWINCH, "
                   "SIGURG, SIGCONT; did you mean \"%s\"?",
                   v->str, hint);
        } else {
            pl_err(L, v,
                   "watchdog.checkpoint.signal \"%.40s\" is not one of "
                   "none, SIGUSR1, SIGUSR2, SIGHUP, SIGINT, SIGWINCH, "
                   "SIGURG, SIGCONT",
                   v->str);
        }
    }
    if ((v = ynode_get(n, "file")) != NULL) {
        struct wd_spec tmp;
        struct ng_error e;
        char buf[WD_FILE_MAX + 8];

        if (v->kind == YNODE_SCALAR && (v->null_tag || v->len == 0)) {
            s->watchdog.checkpoint_file = NULL;
        } else if (pl_want_text(L, v, "watchdog.checkpoint.file")) {
            /* The agent's own parser decides what a valid path is. */
            snprintf(buf, sizeof(buf), "file=%.*s",
                     (int)(v->len > WD_FILE_MAX + 1 ? WD_FILE_MAX + 1 : v->len),
                     v->str);
            if (v->len > WD_FILE_MAX ||
                wd_spec_parse(buf, strlen(buf), &tmp, &e) != 0)
                pl_err(L, v, "watchdog.checkpoint.%s",
                       v->len > WD_FILE_MAX ? "file: the path is too long"
                                            : e.msg);
            else if (strcmp(v->str, "/") == 0 || v->str[v->len - 1] == '/')
                pl_err(L, v,
                       "watchdog.checkpoint.file must name a file, "
                       "not a folder");
            else
                pl_get_string(L, v, "watchdog.checkpoint.file",
                              &s->watchdog.checkpoint_file);
        }
    }
}

static void
parse_watchdog(struct loader *L, const struct ynode *n, struct settings *s)
{
    static const char *const actions[] = {"report", "restart", NULL};
    const struct ynode *v;
    int64_t i64;
    double d;
    int e;

    if (!pl_want_map(L, n, "watchdog"))
        return;
    check_keys(L, n, watchdog_keys, "watchdog");
    if ((v = ynode_get(n, "enabled")) != NULL)
        pl_get_bool(L, v, "watchdog.enabled", &s->watchdog.enabled);
    if ((v = ynode_get(n, "period")) != NULL &&
        pl_get_duration(L, v, "watchdog.period", WD_PERIOD_MIN_MS,
                        WD_PERIOD_MAX_MS, &i64)) {
        s->watchdog.period_ms = i64;
        if (i64 < 10000)
            pl_warn(L, v,
                    "watchdog.period %s is shorter than 10s: NVML averages "
                    "utilisation over up to a second, so short periods "
                    "only add load (fine for tests)",
                    v->str);
    }
    if ((v = ynode_get(n, "idlePeriods")) != NULL &&
        pl_get_int(L, v, "watchdog.idlePeriods", WD_IDLE_MIN, WD_IDLE_MAX,
                   &i64))
        s->watchdog.idle_periods = (int)i64;
    if ((v = ynode_get(n, "minCPU")) != NULL &&
        pl_get_number(L, v, "watchdog.minCPU", &d)) {
        if (d > WD_MIN_CPU_MAX_MILLI / 1000.0 ||
            fabs(d * 1000.0 - round(d * 1000.0)) > 1e-6)
            pl_err(L, v,
                   "watchdog.minCPU must be cores between 0 and %d with at "
                   "most three decimals, got %s",
                   WD_MIN_CPU_MAX_MILLI / 1000, v->str);
        else
            s->watchdog.min_cpu_milli = (int64_t)round(d * 1000.0);
    }
    if ((v = ynode_get(n, "action")) != NULL &&
        pl_get_enum(L, v, "watchdog.action", actions, &e))
        s->watchdog.restart = e == 1;
    if ((v = ynode_get(n, "checkpoint")) != NULL)
        parse_watchdog_checkpoint(L, v, s);
    if ((v = ynode_get(n, "grace")) != NULL &&
        pl_get_duration(L, v, "watchdog.grace", 0, WD_GRACE_MAX_MS, &i64))
        s->watchdog.grace_ms = i64;
}

/* ---- quarantine (node-level, defaults only) ------------------------ */

/* quarantine.maxSharePercent: a percentage with one decimal -> permille. */
static void
parse_max_share(struct loader *L, const struct ynode *v,
                struct policy_quarantine *q)
{
    double d;

    if (!pl_get_number(L, v, "quarantine.maxSharePercent", &d))
        return;
    if (d == 0)
        pl_err(L, v,
               "quarantine.maxSharePercent 0 would hold every taint; "
               "write mode: observe for no taint, or a share above 0");
    else if (d > 100 || fabs(d * 10.0 - round(d * 10.0)) > 1e-6)
        pl_err(L, v,
               "quarantine.maxSharePercent must be a percentage above 0 and "
               "at most 100 with at most one decimal, got %s",
               v->str);
    else
        q->max_share_permille = (int)round(d * 10.0);
}

/*
 * defaults.quarantine: what the node agent does with node-class ring-check
 * and hang verdicts (docs/policy.md, "Quarantine"). Node-level, so a rule
 * cannot set it.
 */
static void
parse_quarantine(struct loader *L, const struct ynode *n,
                 struct policy_quarantine *q)
{
    static const char *const modes[] = {"observe", "quarantine", NULL};
    const struct ynode *v, *cd, *cdmax, *exp;
    char a[32], b[32];
    int64_t i64;
    int e;

    if (!pl_want_map(L, n, "quarantine"))
        return;
    check_keys(L, n, quarantine_keys, "quarantine");
    if ((v = ynode_get(n, "mode")) != NULL &&
        pl_get_enum(L, v, "quarantine.mode", modes, &e))
        q->mode = (enum quarantine_mode)e;
    if ((v = ynode_get(n, "threshold")) != NULL &&
        pl_get_int(L, v, "quarantine.threshold", 1, 100, &i64)) {
        q->threshold = (int)i64;
        if (i64 == 1)
            pl_warn(L, v,
                    "quarantine.threshold 1 acts as 2: the verdicts must "
                    "come from at least two pods");
    }
    if ((v = ynode_get(n, "window")) != NULL)
        pl_get_duration_minutes(L, v, "quarantine.window", Q_MINUTE_MS,
                                7 * Q_DAY_MS, &q->window_ms);
    if ((cd = ynode_get(n, "cooldown")) != NULL &&
        !pl_get_duration_minutes(L, cd, "quarantine.cooldown", Q_MINUTE_MS,
                                 7 * Q_DAY_MS, &q->cooldown_ms))
        cd = NULL;
    if ((cdmax = ynode_get(n, "cooldownMax")) != NULL &&
        !pl_get_duration_minutes(L, cdmax, "quarantine.cooldownMax",
                                 Q_MINUTE_MS, 30 * Q_DAY_MS,
                                 &q->cooldown_max_ms))
        cdmax = NULL;
    if ((cd != NULL || cdmax != NULL) && q->cooldown_max_ms < q->cooldown_ms)
        pl_err(L, cdmax != NULL ? cdmax : cd,
               "quarantine.cooldownMax %s is shorter than cooldown %s; the "
               "cooldown doubles after each failed validation up to "
               "cooldownMax",
               pl_duration_text(q->cooldown_max_ms, a, sizeof(a)),
               pl_duration_text(q->cooldown_ms, b, sizeof(b)));
    if ((exp = ynode_get(n, "expiry")) != NULL) {
        if (exp->kind == YNODE_SCALAR && exp->plain &&
            strcmp(exp->str, "0") == 0)
            q->expiry_ms = 0;
        else if (!pl_get_duration(L, exp, "quarantine.expiry", 0, INT64_MAX,
                                  &i64))
            exp = NULL;
        else if (i64 != 0 && (i64 < Q_MINUTE_MS || i64 > 30 * Q_DAY_MS)) {
            pl_err(L, exp,
                   "quarantine.expiry must be 0 (never) or between 1m and "
                   "%s, got %s",
                   pl_duration_text(30 * Q_DAY_MS, a, sizeof(a)), exp->str);
            exp = NULL;
        } else
            q->expiry_ms = i64;
    }
    if ((exp != NULL || cd != NULL) && q->expiry_ms != 0 &&
        q->expiry_ms <= q->cooldown_ms)
        pl_warn(L, exp != NULL ? exp : cd,
                "quarantine.expiry %s is not longer than cooldown %s: the "
                "taint expires before a validation pod has run",
                pl_duration_text(q->expiry_ms, a, sizeof(a)),
                pl_duration_text(q->cooldown_ms, b, sizeof(b)));
    if ((v = ynode_get(n, "maxSharePercent")) != NULL)
        parse_max_share(L, v, q);
}

/*
 * The ring check is NCCL on CUDA: the webhook gives it only nvidia.com/
 * resources (admission/mutate.c, ringcheck_resource()), so pods of
 * another vendor's resource listed in gpuResources get the profile,
 * /dev/shm and IPC settings but no check. Lint says so where the list
 * names one and the check is on, so that nobody expects it.
 */
static void
gpu_resources_vendor_check(struct loader *L, const struct ynode *v,
                           const struct settings *s)
{
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

/*
 * Parses a settings block over *s (already holding the base values). q is
 * the policy's node-level block for defaults:, NULL for a rule's settings,
 * where a node-level key is an error.
 */
static void
parse_settings(struct loader *L, const struct ynode *n, struct settings *s,
               const char *what, struct shm_pos *pos,
               struct policy_quarantine *q)
{
    const struct ynode *v;

    if (n->kind == YNODE_SCALAR && n->null_tag)
        return;
    if (!pl_want_map(L, n, what))
        return;
    check_keys(L, n, defaults_keys, what);
    for (size_t i = 0; q == NULL && i < n->n; i++)
        if (n->keys[i]->kind == YNODE_SCALAR &&
            strcmp(n->keys[i]->str, "quarantine") == 0)
            pl_err(L, n->keys[i],
                   "quarantine is node-level: it belongs under defaults:, "
                   "not in a rule's settings");
    if (q != NULL && (v = ynode_get(n, "quarantine")) != NULL)
        parse_quarantine(L, v, q);
    if ((v = ynode_get(n, "gpuResources")) != NULL) {
        char **list;
        size_t count;

        if (pl_get_string_list(L, v, "gpuResources", pl_check_resource_name,
                               &list, &count)) {
            if (count == 0) {
                pl_err(L, v, "gpuResources must name at least one resource");
            } else {
                s->gpu_resources = list;
                s->n_gpu_resources = count;
            }
        }
    }
    if ((v = ynode_get(n, "profile")) != NULL)
        parse_profile(L, v, s);
    if ((v = ynode_get(n, "shm")) != NULL)
        parse_shm(L, v, s, pos);
    if ((v = ynode_get(n, "ipc")) != NULL)
        parse_ipc(L, v, s);
    if ((v = ynode_get(n, "ringCheck")) != NULL)
        parse_ringcheck(L, v, s);
    gpu_resources_vendor_check(L, ynode_get(n, "gpuResources"), s);
    if ((v = ynode_get(n, "extraEnv")) != NULL)
        parse_extra_env(L, v, s);
    if ((v = ynode_get(n, "debug")) != NULL)
        parse_debug(L, v, s);
    if ((v = ynode_get(n, "watchdog")) != NULL)
        parse_watchdog(L, v, s);
}

/* min <= perGPU-independent bounds; reports at the most specific place. */
static void
check_shm_bounds(struct loader *L, const struct settings *s,
                 const struct shm_pos *pos, const struct ynode *fallback,
                 const char *who)
{
    char a[32], b[32];
    const struct ynode *at;

    if (s->shm.min <= s->shm.max)
        return;
    at = pos->max ? pos->max : pos->min ? pos->min : fallback;
    quantity_format_binary(s->shm.min, a, sizeof(a));
    quantity_format_binary(s->shm.max, b, sizeof(b));
    pl_err(L, at, "%sshm.min %s is greater than shm.max %s", who, a, b);
}

/* ---- match --------------------------------------------------------- */

static bool
check_glob(struct loader *L, const struct ynode *n, const char *what)
{
    char why[160];

    if (match_glob_valid(n->str, why, sizeof(why)))
        return true;
    pl_err(L, n, "%s: bad glob \"%.60s\": %s", what, n->str, why);
    return false;
}

static bool
check_label_key(struct loader *L, const struct ynode *n, const char *what)
{
    const char *s = n->str;
    const char *slash = strchr(s, '/');
    const char *name = slash ? slash + 1 : s;

    if (n->len == 0 || strlen(name) == 0 || strlen(name) > 63 ||
        (slash &&
         (slash == s || slash - s > 253 || strchr(slash + 1, '/') != NULL))) {
        pl_err(L, n, "%s: \"%.60s\" is not a valid label or annotation key",
               what, s);
        return false;
    }
    for (const char *c = s; *c; c++) {
        if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '_' ||
              *c == '.' || *c == '/')) {
            pl_err(L, n,
                   "%s: \"%.60s\" is not a valid label or annotation "
                   "key",
                   what, s);
            return false;
        }
    }
    return true;
}

static void
parse_pairs(struct loader *L, const struct ynode *n, const char *what,
            char ***keys, char ***values, size_t *count)
{
    char **k, **v;

    if (!pl_want_map(L, n, what))
        return;
    if (n->n > POLICY_MAX_LIST) {
        pl_err(L, n, "%s has more than %d entries", what, POLICY_MAX_LIST);
        return;
    }
    k = pl_alloc(L->p, (n->n + 1) * sizeof(char *));
    v = pl_alloc(L->p, (n->n + 1) * sizeof(char *));
    if (k == NULL || v == NULL)
        return;
    for (size_t i = 0; i < n->n; i++) {
        if (!pl_want_text(L, n->keys[i], what) ||
            !check_label_key(L, n->keys[i], what))
            return;
        if (!pl_get_string(L, n->items[i], what, &v[i]))
            return;
        k[i] = pl_strdup(L->p, n->keys[i]->str);
    }
    *keys = k;
    *values = v;
    *count = n->n;
}

static void
parse_exprs(struct loader *L, const struct ynode *n, struct match *m)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist",
                                      NULL};
    struct label_req *r;

    if (n->kind != YNODE_SEQ) {
        pl_err(L, n, "matchExpressions must be a list, got %s",
               ynode_type_name(n));
        return;
    }
    if (n->n > POLICY_MAX_LIST) {
        pl_err(L, n, "matchExpressions has more than %d entries",
               POLICY_MAX_LIST);
        return;
    }
    r = pl_alloc(L->p, (n->n + 1) * sizeof(*r));
    if (r == NULL)
        return;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->items[i], *k, *op, *vals;
        int o;

        if (!pl_want_map(L, it, "matchExpressions entry"))
            return;
        check_keys(L, it, expr_keys, "matchExpressions entry");
        k = ynode_get(it, "key");
        op = ynode_get(it, "operator");
        vals = ynode_get(it, "values");
        if (k == NULL || op == NULL) {
            pl_err(L, it, "matchExpressions entry needs key and operator");
            return;
        }
        if (!pl_want_text(L, k, "matchExpressions key") ||
            !check_label_key(L, k, "matchExpressions key") ||
            !pl_get_enum(L, op, "matchExpressions operator", ops, &o))
            return;
        r[i].key = pl_strdup(L->p, k->str);
        r[i].op = (enum label_op)o;
        if (o == LABEL_IN || o == LABEL_NOT_IN) {
            if (vals == NULL || vals->kind != YNODE_SEQ || vals->n == 0) {
                pl_err(L, vals ? vals : it,
                       "matchExpressions operator %s needs a non-empty "
                       "values list",
                       op->str);
                return;
            }
            if (!pl_get_string_list(L, vals, "matchExpressions values", NULL,
                                    &r[i].values, &r[i].n_values))
                return;
        } else if (vals != NULL && !(vals->kind == YNODE_SEQ && vals->n == 0)) {
            pl_err(L, vals, "matchExpressions operator %s takes no values",
                   op->str);
            return;
        }
    }
    m->exprs = r;
    m->n_exprs = n->n;
}

static void
parse_match(struct loader *L, const struct ynode *n, struct match *m)
{
    const struct ynode *v, *minn = NULL, *maxn = NULL;

    m->min_gpus = 0;
    m->max_gpus = -1;
    if (n->kind == YNODE_SCALAR && n->null_tag)
        return;
    if (!pl_want_map(L, n, "match"))
        return;
    check_keys(L, n, match_keys, "match");
    if ((v = ynode_get(n, "namespaces")) != NULL)
        pl_get_string_list(L, v, "match.namespaces", check_glob, &m->namespaces,
                           &m->n_namespaces);
    if ((v = ynode_get(n, "excludeNamespaces")) != NULL)
        pl_get_string_list(L, v, "match.excludeNamespaces", check_glob,
                           &m->exclude, &m->n_exclude);
    if ((v = ynode_get(n, "podLabels")) != NULL)
        parse_pairs(L, v, "match.podLabels", &m->label_keys, &m->label_values,
                    &m->n_labels);
    if ((v = ynode_get(n, "matchExpressions")) != NULL)
        parse_exprs(L, v, m);
    if ((v = ynode_get(n, "annotations")) != NULL)
        parse_pairs(L, v, "match.annotations", &m->ann_keys, &m->ann_values,
                    &m->n_ann);
    if ((v = ynode_get(n, "resources")) != NULL)
        pl_get_string_list(L, v, "match.resources", pl_check_resource_name,
                           &m->resources, &m->n_resources);
    if ((v = ynode_get(n, "nodeSelector")) != NULL)
        parse_pairs(L, v, "match.nodeSelector", &m->node_keys, &m->node_values,
                    &m->n_node);
    if ((v = ynode_get(n, "tolerations")) != NULL)
        pl_get_string_list(L, v, "match.tolerations", NULL, &m->tolerations,
                           &m->n_tolerations);
    if ((v = ynode_get(n, "minGPUs")) != NULL &&
        pl_get_int(L, v, "match.minGPUs", 0, 1 << 20, &m->min_gpus))
        minn = v;
    if ((v = ynode_get(n, "maxGPUs")) != NULL &&
        pl_get_int(L, v, "match.maxGPUs", 0, 1 << 20, &m->max_gpus))
        maxn = v;
    if (minn != NULL && maxn != NULL && m->min_gpus > m->max_gpus)
        pl_err(L, maxn, "match.minGPUs %lld is greater than maxGPUs %lld",
               (long long)m->min_gpus, (long long)m->max_gpus);
}

/* ---- rules --------------------------------------------------------- */

static bool
check_rule_name(struct loader *L, const struct ynode *n)
{
    if (!pl_want_text(L, n, "rule name"))
        return false;
    if (n->len == 0 || n->len > 63) {
        pl_err(L, n, "rule name must be 1 to 63 characters");
        return false;
    }
    for (const char *c = n->str; *c; c++) {
        if (!(isalnum((unsigned char)*c) || *c == '-' || *c == '_' ||
              *c == '.')) {
            pl_err(L, n,
                   "rule name \"%.63s\" may use only letters, digits, "
                   "'-', '_' and '.'",
                   n->str);
            return false;
        }
    }
    if (strcmp(n->str, "default") == 0) {
        pl_err(L, n,
               "rule name \"default\" is reserved for pods no rule "
               "matches");
        return false;
    }
    return true;
}

static void
parse_rules(struct loader *L, const struct ynode *n)
{
    struct policy *p = L->p;
    size_t budget = 0;
    /* Rules whose match block had an error: left out of the
     * unreachable-rule check, so one mistake gives one error. */
    bool bad_match[POLICY_MAX_RULES] = {false};

    if (n->kind == YNODE_SCALAR && n->null_tag)
        return;
    if (n->kind != YNODE_SEQ) {
        pl_err(L, n, "rules must be a list, got %s", ynode_type_name(n));
        return;
    }
    if (n->n > POLICY_MAX_RULES) {
        pl_err(L, n, "%zu rules, more than the limit of %d", n->n,
               POLICY_MAX_RULES);
        return;
    }
    p->rules = pl_alloc(p, (n->n + 1) * sizeof(*p->rules));
    if (p->rules == NULL)
        return;
    for (size_t i = 0; i < n->n; i++) {
        const struct ynode *it = n->items[i], *v, *nm;
        struct rule *r = &p->rules[p->n_rules];
        struct shm_pos pos = {NULL, NULL, NULL, NULL};
        char who[100];

        if (!pl_want_map(L, it, "rule"))
            continue;
        check_keys(L, it, rule_keys, "rule");
        r->line = it->line;
        r->col = it->col;
        nm = ynode_get(it, "name");
        if (nm == NULL) {
            pl_err(L, it, "rule needs a name");
        } else if (check_rule_name(L, nm)) {
            r->name = pl_strdup(p, nm->str);
            for (size_t j = 0; j < p->n_rules; j++) {
                if (p->rules[j].name != NULL &&
                    strcmp(p->rules[j].name, nm->str) == 0)
                    pl_err(L, nm,
                           "duplicate rule name \"%s\" (first at "
                           "line %d)",
                           nm->str, p->rules[j].line);
            }
        }
        /* No match block: the rule matches every GPU pod. */
        r->match.max_gpus = -1;
        if ((v = ynode_get(it, "match")) != NULL) {
            size_t errors = L->d->n_errors;

            parse_match(L, v, &r->match);
            bad_match[p->n_rules] = L->d->n_errors > errors;
        }
        if ((v = ynode_get(it, "skip")) != NULL)
            pl_get_bool(L, v, "skip", &r->skip);
        r->settings = p->defaults;
        if ((v = ynode_get(it, "settings")) != NULL) {
            if (r->skip)
                pl_warn(L, v,
                        "settings are ignored: the rule says skip: "
                        "true");
            snprintf(who, sizeof(who),
                     "rule \"%.60s\": ", r->name ? r->name : "?");
            parse_settings(L, v, &r->settings, "settings", &pos, NULL);
            check_shm_bounds(L, &r->settings, &pos, v, who);
        }
        if (r->name == NULL)
            r->name = pl_strdup(p, "?");
        p->n_rules++;
    }
    /* A rule after one that catches all its pods can never match. The
     * comparison is quadratic in rules and in list sizes, so it runs on a
     * budget: a hostile file must not stall a reload. */
    for (size_t i = 1; i < p->n_rules; i++) {
        for (size_t j = 0; j < i; j++) {
            const struct match *a = &p->rules[j].match;
            const struct match *b = &p->rules[i].match;

            if (bad_match[i] || bad_match[j])
                continue;

            budget += (a->n_namespaces + a->n_exclude + 1) *
                          (b->n_namespaces + b->n_exclude + 1) +
                      (a->n_labels + a->n_exprs + a->n_ann + 1) *
                          (b->n_labels + b->n_exprs + b->n_ann + 1);
            if (budget > SHADOW_CHECK_BUDGET) {
                diags_add(L->d, DIAG_WARNING, p->rules[i].line, p->rules[i].col,
                          "rules from \"%s\" on were not checked for being "
                          "unreachable: the rule set is too large",
                          p->rules[i].name);
                return;
            }
            if (match_covers(a, b)) {
                diags_add(L->d, DIAG_ERROR, p->rules[i].line, p->rules[i].col,
                          "rule \"%s\" can never match: rule \"%s\" (line "
                          "%d) comes first and matches every pod it would",
                          p->rules[i].name, p->rules[j].name, p->rules[j].line);
                break;
            }
        }
    }
}

/* ---- top level ----------------------------------------------------- */

/* The Kubernetes object-name length limit (DNS subdomain). */
#define DRA_MAX_NAME 253

static const char *const dra_keys[] = {"claimTemplates", NULL};

/*
 * dra: {claimTemplates: {NAME: GPUS, ...}}: how many GPUs a
 * ResourceClaimTemplate of that name gives a pod, since a DRA claim's
 * device count is only known after the scheduler allocates it.
 */
static void
parse_dra(struct loader *L, const struct ynode *n)
{
    const struct ynode *t;

    if (!pl_want_map(L, n, "dra"))
        return;
    check_keys(L, n, dra_keys, "dra");
    t = ynode_get(n, "claimTemplates");
    if (t == NULL || !pl_want_map(L, t, "dra.claimTemplates"))
        return;
    L->p->dra.names = pl_alloc(L->p, (t->n + 1) * sizeof(char *));
    L->p->dra.gpus = pl_alloc(L->p, (t->n + 1) * sizeof(int64_t));
    if (L->p->dra.names == NULL || L->p->dra.gpus == NULL)
        return;
    for (size_t i = 0; i < t->n; i++) {
        const struct ynode *k = t->keys[i];
        int64_t g;

        if (k->len == 0 || k->len > DRA_MAX_NAME) {
            pl_err(L, k,
                   "dra.claimTemplates: \"%.60s\" is not a "
                   "ResourceClaimTemplate name (1 to %d characters)",
                   k->str, DRA_MAX_NAME);
            continue;
        }
        if (!pl_get_int(L, t->items[i], "dra.claimTemplates value", 1, 1024,
                        &g))
            continue;
        L->p->dra.names[L->p->dra.n] = pl_strdup(L->p, k->str);
        L->p->dra.gpus[L->p->dra.n++] = g;
    }
}

int64_t
policy_claim_template_gpus(const struct policy *p, const char *name)
{
    if (p == NULL || name == NULL)
        return 0;
    for (size_t i = 0; i < p->dra.n; i++)
        if (strcmp(p->dra.names[i], name) == 0)
            return p->dra.gpus[i];
    return 0;
}

static void
parse_top(struct loader *L, const struct ynode *root)
{
    const struct ynode *v;
    struct shm_pos pos = {NULL, NULL, NULL, NULL};

    if (root->kind != YNODE_MAP) {
        pl_err(L, root,
               "a policy must be a mapping with apiVersion: %s and "
               "kind: Policy, got %s",
               API_VERSION, ynode_type_name(root));
        return;
    }
    check_keys(L, root, top_keys, "the policy");
    v = ynode_get(root, "apiVersion");
    if (v == NULL)
        pl_err(L, root, "missing apiVersion: %s", API_VERSION);
    else if (v->kind != YNODE_SCALAR || strcmp(v->str, API_VERSION) != 0)
        pl_err(L, v, "apiVersion must be %s, got \"%.60s\"", API_VERSION,
               v->kind == YNODE_SCALAR ? v->str : ynode_type_name(v));
    v = ynode_get(root, "kind");
    if (v == NULL)
        pl_err(L, root, "missing kind: Policy");
    else if (v->kind != YNODE_SCALAR || strcmp(v->str, "Policy") != 0)
        pl_err(L, v, "kind must be Policy, got \"%.60s\"",
               v->kind == YNODE_SCALAR ? v->str : ynode_type_name(v));
    if ((v = ynode_get(root, "metadata")) != NULL)
        pl_want_map(L, v, "metadata");
    if ((v = ynode_get(root, "defaults")) != NULL) {
        parse_settings(L, v, &L->p->defaults, "defaults", &pos,
                       &L->p->quarantine);
        check_shm_bounds(L, &L->p->defaults, &pos, v, "defaults: ");
    }
    if ((v = ynode_get(root, "rules")) != NULL)
        parse_rules(L, v);
    if ((v = ynode_get(root, "dra")) != NULL)
        parse_dra(L, v);
}

static int
policy_hash_compute(struct policy *p, const char *buf, size_t len)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;

    if (!EVP_Digest(buf, len, md, &mdlen, EVP_sha256(), NULL))
        return -1;
    for (unsigned int i = 0; i < mdlen && i < 32; i++)
        snprintf(p->hash + 2 * i, 3, "%02x", md[i]);
    return 0;
}

static void
policy_destroy(struct policy *p)
{
    for (size_t i = 0; i < p->n_blocks; i++)
        free(p->blocks[i]);
    free(p->blocks);
    free(p);
}

struct policy *
policy_check(const char *buf, size_t len, struct diags *d)
{
    static const struct ytree_caps caps = {POLICY_MAX_BYTES, POLICY_MAX_DEPTH,
                                           POLICY_MAX_NODES, 1};
    struct policy *p;
    struct ytree *t;
    struct loader L;
    size_t errors_before = d->n_errors;

    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        diags_add(d, DIAG_ERROR, 0, 0, "out of memory");
        return NULL;
    }
    atomic_init(&p->refs, 1);
    quarantine_builtin(&p->quarantine);
    if (settings_builtin(p, &p->defaults) != 0 ||
        policy_hash_compute(p, buf, len) != 0) {
        diags_add(d, DIAG_ERROR, 0, 0, "out of memory");
        goto fail;
    }
    t = ytree_parse(buf, len, &caps, d);
    if (t == NULL)
        goto fail;
    if (ytree_ndocs(t) == 0) {
        diags_add(d, DIAG_ERROR, 1, 1,
                  "empty policy: expected apiVersion: %s and kind: Policy",
                  API_VERSION);
    } else {
        L.p = p;
        L.d = d;
        parse_top(&L, ytree_doc(t, 0));
    }
    ytree_free(t);
    if (p->oom)
        diags_add(d, DIAG_ERROR, 0, 0, "out of memory");
    diags_sort(d);
    if (d->n_errors != errors_before)
        goto fail;
    return p;
fail:
    diags_sort(d);
    policy_destroy(p);
    return NULL;
}

struct policy *
policy_load(const char *buf, size_t len, const char *name, struct ng_error *err)
{
    struct diags d = {0};
    struct policy *p;

    (void)name;
    p = policy_check(buf, len, &d);
    if (p == NULL) {
        for (size_t i = 0; i < d.n; i++) {
            if (d.v[i].severity == DIAG_ERROR) {
                ng_error_set(err, d.v[i].line, d.v[i].col, "%s", d.v[i].msg);
                break;
            }
        }
        if (d.n == 0)
            ng_error_set(err, 0, 0, "policy rejected");
    }
    diags_release(&d);
    return p;
}

struct policy *
policy_load_file(const char *path, struct ng_error *err)
{
    char *buf;
    size_t len;
    struct policy *p;

    buf = file_read(path, POLICY_MAX_BYTES, &len, err);
    if (buf == NULL)
        return NULL;
    p = policy_load(buf, len, path, err);
    free(buf);
    return p;
}

void
policy_free(struct policy *p)
{
    if (p == NULL)
        return;
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    policy_destroy(p);
}

struct policy *
policy_ref(struct policy *p)
{
    if (p != NULL)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

const struct settings *
policy_defaults(const struct policy *p)
{
    return &p->defaults;
}

const struct policy_quarantine *
policy_quarantine(const struct policy *p)
{
    return &p->quarantine;
}

const char *
policy_hash(const struct policy *p)
{
    return p->hash;
}

size_t
policy_rule_count(const struct policy *p)
{
    return p->n_rules;
}

const char *
policy_rule_name(const struct policy *p, size_t i)
{
    return i < p->n_rules ? p->rules[i].name : NULL;
}
