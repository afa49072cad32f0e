/* Matching pods against rules, and proving one rule shadows another. */
#include "policy/match.h"

#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

static const char *
json_str_at(const json_t *obj, const char *key)
{
    const json_t *v;

    if (obj == NULL || !json_is_object(obj))
        return NULL;
    v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool
glob_any(char *const *globs, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (fnmatch(globs[i], s, 0) == 0)
            return true;
    return false;
}

static bool
value_in(char *const *values, size_t n, const char *v)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(values[i], v) == 0)
            return true;
    return false;
}

static bool
req_holds(const struct label_req *r, const json_t *labels)
{
    const char *v = json_str_at(labels, r->key);

    switch (r->op) {
    case LABEL_IN:
        return v != NULL && value_in(r->values, r->n_values, v);
    case LABEL_NOT_IN:
        /* As in Kubernetes: a missing label satisfies NotIn. */
        return v == NULL || !value_in(r->values, r->n_values, v);
    case LABEL_EXISTS:
        return v != NULL;
    case LABEL_NOT_EXISTS:
        return v == NULL;
    }
    return false;
}

bool
match_pod(const struct match *m, const char *pod_ns, const json_t *labels,
          const json_t *annotations, int64_t gpus)
{
    const char *ns = pod_ns != NULL ? pod_ns : "";

    if (m->n_namespaces > 0 && !glob_any(m->namespaces, m->n_namespaces, ns))
        return false;
    if (glob_any(m->exclude, m->n_exclude, ns))
        return false;
    for (size_t i = 0; i < m->n_labels; i++) {
        const char *v = json_str_at(labels, m->label_keys[i]);

        if (v == NULL || strcmp(v, m->label_values[i]) != 0)
            return false;
    }
    for (size_t i = 0; i < m->n_exprs; i++)
        if (!req_holds(&m->exprs[i], labels))
            return false;
    for (size_t i = 0; i < m->n_ann; i++) {
        const char *v = json_str_at(annotations, m->ann_keys[i]);

        if (v == NULL || strcmp(v, m->ann_values[i]) != 0)
            return false;
    }
    if (gpus < m->min_gpus)
        return false;
    if (m->max_gpus >= 0 && gpus > m->max_gpus)
        return false;
    return true;
}

/* ---- node pools --------------------------------------------------- */

/* Whether a resources map (limits or requests) asks for name. */
static bool
resource_asked(const json_t *map, const char *name)
{
    const json_t *v = json_object_get(map, name);

    if (v == NULL || json_is_null(v))
        return false;
    if (json_is_integer(v))
        return json_integer_value(v) != 0;
    if (json_is_string(v))
        return strcmp(json_string_value(v), "0") != 0;
    return true;
}

static bool
spec_asks_for(const json_t *spec, const char *name)
{
    static const char *const lists[2] = {"containers", "initContainers"};

    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *c;

        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");

            if (resource_asked(json_object_get(res, "limits"), name) ||
                resource_asked(json_object_get(res, "requests"), name))
                return true;
        }
    }
    return false;
}

/* Whether a nodeSelectorTerm has key In [...value...]. */
static bool
term_targets(const json_t *term, const char *key, const char *value)
{
    size_t i, k;
    json_t *e, *v;

    json_array_foreach(json_object_get(term, "matchExpressions"), i, e)
    {
        if (json_str_at(e, "key") == NULL ||
            strcmp(json_str_at(e, "key"), key) != 0 ||
            json_str_at(e, "operator") == NULL ||
            strcmp(json_str_at(e, "operator"), "In") != 0)
            continue;
        json_array_foreach(json_object_get(e, "values"), k, v)
        {
            if (json_is_string(v) && strcmp(json_string_value(v), value) == 0)
                return true;
        }
    }
    return false;
}

/* Whether the pod can only land on nodes labelled key=value. */
static bool
spec_targets(const json_t *spec, const char *key, const char *value)
{
    const char *sel = json_str_at(json_object_get(spec, "nodeSelector"), key);
    const json_t *terms = json_object_get(
        json_object_get(
            json_object_get(json_object_get(spec, "affinity"), "nodeAffinity"),
            "requiredDuringSchedulingIgnoredDuringExecution"),
        "nodeSelectorTerms");
    size_t i;
    json_t *t;

    if (sel != NULL && strcmp(sel, value) == 0)
        return true;
    if (json_array_size(terms) == 0)
        return false;
    /* Terms are ORed: each one must lead to the pool. */
    json_array_foreach(terms, i, t)
    {
        if (!term_targets(t, key, value))
            return false;
    }
    return true;
}

static bool
spec_tolerates(const json_t *spec, const char *key)
{
    size_t i;
    json_t *t;

    json_array_foreach(json_object_get(spec, "tolerations"), i, t)
    {
        const char *k = json_str_at(t, "key");
        const char *op = json_str_at(t, "operator");

        if (k != NULL && strcmp(k, key) == 0)
            return true;
        if ((k == NULL || k[0] == '\0') && op != NULL &&
            strcmp(op, "Exists") == 0)
            return true;
    }
    return false;
}

bool
match_pod_spec(const struct match *m, const json_t *spec)
{
    bool any = m->n_resources == 0;

    for (size_t i = 0; i < m->n_resources && !any; i++)
        any = spec_asks_for(spec, m->resources[i]);
    if (!any)
        return false;
    for (size_t i = 0; i < m->n_node; i++)
        if (!spec_targets(spec, m->node_keys[i], m->node_values[i]))
            return false;
    for (size_t i = 0; i < m->n_tolerations; i++)
        if (!spec_tolerates(spec, m->tolerations[i]))
            return false;
    return true;
}

static bool
is_literal(const char *glob)
{
    return strpbrk(glob, "*?[\\") == NULL;
}

/* Every namespace b admits is admitted by a's namespaces list. */
static bool
ns_covers(const struct match *a, const struct match *b)
{
    if (a->n_namespaces == 0)
        return true;
    for (size_t i = 0; i < a->n_namespaces; i++)
        if (strcmp(a->namespaces[i], "*") == 0)
            return true;
    if (b->n_namespaces == 0)
        return false;
    for (size_t j = 0; j < b->n_namespaces; j++) {
        const char *p = b->namespaces[j];
        bool ok = false;

        for (size_t i = 0; i < a->n_namespaces && !ok; i++)
            ok = strcmp(a->namespaces[i], p) == 0 ||
                 (is_literal(p) && fnmatch(a->namespaces[i], p, 0) == 0);
        if (!ok)
            return false;
    }
    return true;
}

/* No namespace b admits is excluded by a. */
static bool
exclude_covers(const struct match *a, const struct match *b)
{
    for (size_t i = 0; i < a->n_exclude; i++) {
        const char *e = a->exclude[i];
        bool ok;

        if (value_in(b->exclude, b->n_exclude, e))
            continue;
        /* b must list only literal namespaces, none of them excluded. */
        ok = b->n_namespaces > 0;
        for (size_t j = 0; j < b->n_namespaces && ok; j++)
            ok = is_literal(b->namespaces[j]) &&
                 fnmatch(e, b->namespaces[j], 0) != 0;
        if (!ok)
            return false;
    }
    return true;
}

static bool
req_equal(const struct label_req *x, const struct label_req *y)
{
    if (x->op != y->op || strcmp(x->key, y->key) != 0 ||
        x->n_values != y->n_values)
        return false;
    for (size_t i = 0; i < x->n_values; i++)
        if (!value_in(y->values, y->n_values, x->values[i]))
            return false;
    return true;
}

/* Does b's label constraints imply requirement r? */
static bool
req_implied(const struct label_req *r, const struct match *b)
{
    for (size_t i = 0; i < b->n_exprs; i++) {
        const struct label_req *q = &b->exprs[i];

        if (req_equal(r, q))
            return true;
        if (strcmp(q->key, r->key) != 0)
            continue;
        /* In {x,y} implies Exists, and In {superset}. */
        if (q->op == LABEL_IN && r->op == LABEL_EXISTS)
            return true;
        if (q->op == LABEL_IN && r->op == LABEL_IN) {
            bool all = true;

            for (size_t k = 0; k < q->n_values && all; k++)
                all = value_in(r->values, r->n_values, q->values[k]);
            if (all)
                return true;
        }
        if (q->op == LABEL_NOT_EXISTS && r->op == LABEL_NOT_IN)
            return true;
    }
    for (size_t i = 0; i < b->n_labels; i++) {
        if (strcmp(b->label_keys[i], r->key) != 0)
            continue;
        if (r->op == LABEL_EXISTS)
            return true;
        if (r->op == LABEL_IN &&
            value_in(r->values, r->n_values, b->label_values[i]))
            return true;
        if (r->op == LABEL_NOT_IN &&
            !value_in(r->values, r->n_values, b->label_values[i]))
            return true;
    }
    return false;
}

static bool
pairs_subset(char *const *ak, char *const *av, size_t an, char *const *bk,
             char *const *bv, size_t bn)
{
    for (size_t i = 0; i < an; i++) {
        bool found = false;

        for (size_t j = 0; j < bn && !found; j++)
            found = strcmp(ak[i], bk[j]) == 0 && strcmp(av[i], bv[j]) == 0;
        if (!found)
            return false;
    }
    return true;
}

bool
match_covers(const struct match *a, const struct match *b)
{
    if (!ns_covers(a, b) || !exclude_covers(a, b))
        return false;
    for (size_t i = 0; i < a->n_labels; i++) {
        struct label_req r = {a->label_keys[i], LABEL_IN, &a->label_values[i],
                              1};

        if (!req_implied(&r, b))
            return false;
    }
    for (size_t i = 0; i < a->n_exprs; i++)
        if (!req_implied(&a->exprs[i], b))
            return false;
    if (!pairs_subset(a->ann_keys, a->ann_values, a->n_ann, b->ann_keys,
                      b->ann_values, b->n_ann))
        return false;
    /* Node pools: a's pool must contain b's (b asks for fewer resources,
     * targets at least a's node labels, tolerates at least a's taints). */
    if (a->n_resources > 0) {
        if (b->n_resources == 0)
            return false;
        for (size_t i = 0; i < b->n_resources; i++)
            if (!value_in(a->resources, a->n_resources, b->resources[i]))
                return false;
    }
    if (!pairs_subset(a->node_keys, a->node_values, a->n_node, b->node_keys,
                      b->node_values, b->n_node))
        return false;
    for (size_t i = 0; i < a->n_tolerations; i++)
        if (!value_in(b->tolerations, b->n_tolerations, a->tolerations[i]))
            return false;
    if (a->min_gpus > b->min_gpus)
        return false;
    if (a->max_gpus >= 0 && (b->max_gpus < 0 || b->max_gpus > a->max_gpus))
        return false;
    return true;
}

bool
match_glob_valid(const char *p, char *why, size_t n)
{
    size_t len = strlen(p);

    if (len == 0) {
        snprintf(why, n, "empty pattern matches no namespace");
        return false;
    }
    if (len > 253) {
        snprintf(why, n, "pattern longer than 253 characters");
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        char c = p[i];

        if (c == '[') {
            size_t j = i + 1;

            if (j < len && (p[j] == '!' || p[j] == '^'))
                j++;
            if (j < len && p[j] == ']')
                j++;
            while (j < len && p[j] != ']')
                j++;
            if (j >= len) {
                snprintf(why, n, "unclosed '[' at offset %zu", i);
                return false;
            }
            i = j;
            continue;
        }
        if (c == '\\') {
            snprintf(why, n,
                     "backslash escapes are not needed: namespace names "
                     "have no special characters");
            return false;
        }
        if (c == ']') {
            snprintf(why, n, "']' without a matching '['");
            return false;
        }
        if (!(c == '*' || c == '?' || c == '-' || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9'))) {
            if (c > 0x20 && c < 0x7f)
                snprintf(why, n,
                         "'%c' can never appear in a namespace name "
                         "(lower-case letters, digits and '-')",
                         c);
            else
                snprintf(why, n,
                         "character 0x%02x can never appear in a namespace "
                         "name (lower-case letters, digits and '-')",
                         (unsigned char)c);
            return false;
        }
    }
    return true;
}
