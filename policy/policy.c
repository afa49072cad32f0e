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

#include <gnutls/crypto.h>

#include "base/file.h"
#include "base/text.h"
#include "contract/limits.h"
#include "contract/multinode_env.h"
#include "contract/ncclenv.h"
#include "contract/wdspec.h"
#include "policy/loader.h"
#include "policy/match.h"
#include "policy/quantity.h"
#include "policy/schema.h"
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

/* ---- the built-in defaults: the schema's (policy/schema.c), which
 * policy/default.yaml spells out; test_default_yaml_is_builtin() in
 * tests/unit/test_policy.c fails when they differ ---- */

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

/* ---- the loader ---------------------------------------------------- */

static const char *const top_keys[] = {
    "apiVersion", "kind", "metadata", "defaults", "rules", "dra", NULL};
static const char *const rule_keys[] = {"name", "match", "skip", "settings",
                                        NULL};
static const char *const match_keys[] = {
    "namespaces",   "excludeNamespaces", "podLabels", "matchExpressions",
    "annotations",  "minGPUs",           "maxGPUs",   "resources",
    "nodeSelector", "tolerations",       NULL};
static const char *const expr_keys[] = {"key", "operator", "values", NULL};

/*
 * Where the did-you-mean looks, in this order, for a key that is in none
 * of the expected ones: "it belongs under SECTION". A section of the
 * settings schema (schema, with node: 0 its other keys, 1 its node-level
 * ones, -1 all), or a fixed list.
 */
static const struct {
    const char *section;
    const char *schema;
    int node;
    const char *const *keys;
} key_sections[] = {
    {"settings", "", 0, NULL},
    {"shm", "shm", -1, NULL},
    {"ringCheck", "ringCheck", -1, NULL},
    {"ipc", "ipc", -1, NULL},
    {"profile", "profile", -1, NULL},
    {"debug", "debug", -1, NULL},
    {"match", NULL, 0, match_keys},
    {"rule", NULL, 0, rule_keys},
    {"watchdog", "watchdog", -1, NULL},
    {"watchdog.checkpoint", "watchdog.checkpoint", -1, NULL},
    {"defaults", "", 1, NULL},
    {"quarantine", "quarantine", -1, NULL},
};

/* Reports keys of map that are not in allowed. */
void
pl_check_keys(struct loader *L, const struct ynode *map,
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
            const char *names[SCHEMA_MAX_ROWS + 1];
            const char *const *ks = key_sections[s].keys;

            if (key_sections[s].schema != NULL) {
                schema_children(key_sections[s].schema, key_sections[s].node,
                                names, SCHEMA_MAX_ROWS + 1);
                ks = names;
            }
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

/* min <= perGPU-independent bounds; reports at the most specific place. */
static void
check_shm_bounds(struct loader *L, const struct settings *s,
                 const struct schema_ctx *ctx, const struct ynode *fallback,
                 const char *who)
{
    const struct ynode *max = schema_set_node(ctx, "shm.max");
    const struct ynode *min = schema_set_node(ctx, "shm.min");
    char a[32], b[32];
    const struct ynode *at;

    if (s->shm.min <= s->shm.max)
        return;
    at = max ? max : min ? min : fallback;
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
        pl_check_keys(L, it, expr_keys, "matchExpressions entry");
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
    pl_check_keys(L, n, match_keys, "match");
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
        struct schema_ctx ctx;
        char who[100];

        if (!pl_want_map(L, it, "rule"))
            continue;
        pl_check_keys(L, it, rule_keys, "rule");
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
            schema_parse_settings(L, v, &r->settings, NULL, "settings", &ctx);
            check_shm_bounds(L, &r->settings, &ctx, v, who);
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
    pl_check_keys(L, n, dra_keys, "dra");
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
    struct schema_ctx ctx;

    if (root->kind != YNODE_MAP) {
        pl_err(L, root,
               "a policy must be a mapping with apiVersion: %s and "
               "kind: Policy, got %s",
               API_VERSION, ynode_type_name(root));
        return;
    }
    pl_check_keys(L, root, top_keys, "the policy");
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
        schema_parse_settings(L, v, &L->p->defaults, &L->p->quarantine,
                              "defaults", &ctx);
        check_shm_bounds(L, &L->p->defaults, &ctx, v, "defaults: ");
    }
    if ((v = ynode_get(root, "rules")) != NULL)
        parse_rules(L, v);
    if ((v = ynode_get(root, "dra")) != NULL)
        parse_dra(L, v);
}

static int
policy_hash_compute(struct policy *p, const char *buf, size_t len)
{
    /* SHA-256 through GnuTLS, as jobmember_token() (admission/jobmember.c)
     * says why: the server loads its policy without touching libcrypto. */
    unsigned char md[32];

    if (gnutls_hash_get_len(GNUTLS_DIG_SHA256) != sizeof(md) ||
        gnutls_hash_fast(GNUTLS_DIG_SHA256, buf, len, md) != 0)
        return -1;
    for (unsigned int i = 0; i < sizeof(md); i++)
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
    L.p = p;
    L.d = d;
    schema_builtin(&L, &p->defaults, &p->quarantine);
    p->defaults.ringcheck.image = pl_strdup(p, builtin_ringcheck_image);
    if (p->oom || policy_hash_compute(p, buf, len) != 0) {
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
