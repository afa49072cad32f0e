/* Unit tests for policy/schema.c: the table's shape, its defaults against
 * policy/default.yaml and the agent's own, and the reference table in
 * docs/policy.md. Run from the repository root, as make does. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "contract/multinode_env.h"
#include "contract/wdspec.h"
#include "harness.h"
#include "policy/policy.h"
#include "policy/schema.h"
#include "policy/ytree.h"

#define DOC_BEGIN "<!-- reference: generated from policy/schema.c -->\n"
#define DOC_END "<!-- end of reference -->\n"

/* Every row: a unique path under an earlier section row, a description,
 * names for an enum, a reader for a custom key. */
static void
test_shape(void)
{
    size_t n = schema_count();

    CHECK(n > 50 && n <= SCHEMA_MAX_ROWS);
    for (size_t i = 0; i < n; i++) {
        const struct schema_key *r = schema_row(i);
        const char *dot = strrchr(r->path, '.');

        CHECK(r->doc != NULL && r->doc[0] != '\0');
        CHECK_INT(schema_find(r->path), (long long)i);
        if (r->type == SCHEMA_ENUM)
            CHECK(r->names != NULL && r->names[0] != NULL);
        if (r->type == SCHEMA_CUSTOM)
            CHECK(r->parse != NULL);
        if (r->type == SCHEMA_SECTION)
            CHECK(r->def == NULL);
        if (dot != NULL) {
            char parent[128];
            int pi;

            snprintf(parent, sizeof(parent), "%.*s", (int)(dot - r->path),
                     r->path);
            pi = schema_find(parent);
            if (pi < 0 || (size_t)pi >= i)
                fprintf(stderr, "schema: %s comes before its section %s\n",
                        r->path, parent);
            CHECK(pi >= 0 && (size_t)pi < i);
            if (pi >= 0) {
                CHECK_INT(schema_row((size_t)pi)->type, SCHEMA_SECTION);
                /* A node-level section has node-level rows only. */
                CHECK_INT(r->flags & SCHEMA_NODE,
                          schema_row((size_t)pi)->flags & SCHEMA_NODE);
            }
        }
    }
    CHECK(schema_find("no.such.key") == -1);
}

/* The node of defaults.<path> in the tree, or NULL. */
static const struct ynode *
at_path(const struct ynode *n, const char *path)
{
    char key[64];

    while (n != NULL && *path != '\0') {
        size_t w = strcspn(path, ".");

        if (w >= sizeof(key))
            return NULL;
        memcpy(key, path, w);
        key[w] = '\0';
        n = n->kind == YNODE_MAP ? ynode_get(n, key) : NULL;
        path += w + (path[w] == '.');
    }
    return n;
}

/* Whether node v is written as the row's default text. */
static bool
written_as(const struct ynode *v, const char *def)
{
    size_t len = strlen(def);

    if (len >= 2 && def[0] == '"' && def[len - 1] == '"')
        return v->kind == YNODE_SCALAR && !v->plain && v->len == len - 2 &&
               memcmp(v->str, def + 1, len - 2) == 0;
    if (len >= 2 && def[0] == '[') {
        char buf[256] = "[";

        if (v->kind != YNODE_SEQ)
            return false;
        for (size_t i = 0; i < v->n; i++)
            snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "%s%s",
                     i ? ", " : "", v->items[i]->str);
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf), "]");
        return strcmp(buf, def) == 0;
    }
    return v->kind == YNODE_SCALAR && v->plain && strcmp(v->str, def) == 0;
}

/*
 * policy/default.yaml writes every key the table gives a default, with
 * that text, and no key the table leaves out (those are comments there).
 * With test_default_yaml_is_builtin() in test_policy.c, which compares the
 * loaded values, the file cannot drift from the built-in defaults.
 */
static void
test_default_yaml_rows(void)
{
    static const struct ytree_caps caps = {1 << 20, 32, 50000, 1};
    struct ng_error e;
    struct diags d = {0};
    size_t len;
    char *buf = file_read("policy/default.yaml", 1 << 20, &len, &e);
    struct ytree *t = buf ? ytree_parse(buf, len, &caps, &d) : NULL;
    const struct ynode *defaults;

    CHECK(t != NULL);
    if (t == NULL)
        goto out;
    defaults = ynode_get(ytree_doc(t, 0), "defaults");
    CHECK(defaults != NULL);
    for (size_t i = 0; defaults != NULL && i < schema_count(); i++) {
        const struct schema_key *r = schema_row(i);
        const struct ynode *v = at_path(defaults, r->path);

        if (r->type == SCHEMA_SECTION)
            continue;
        if (r->def == NULL) {
            if (v != NULL)
                fprintf(stderr,
                        "policy/default.yaml sets %s, which the schema "
                        "leaves out\n",
                        r->path);
            CHECK(v == NULL);
        } else if (v == NULL || !written_as(v, r->def)) {
            fprintf(stderr,
                    "policy/default.yaml: %s must be written %s, as its "
                    "default in policy/schema.c\n",
                    r->path, r->def);
            CHECK(false);
        } else {
            CHECK(true);
        }
    }
out:
    ytree_free(t);
    diags_release(&d);
    free(buf);
}

/* The watchdog's defaults are the agent's own (contract/wdspec.c), and the
 * rendezvous port the operators' env table's. */
static void
test_agent_defaults(void)
{
    struct ng_error e;
    struct policy *p;
    struct wd_spec w;
    const struct settings *s;
    static const char head[] = "apiVersion: ncclguard.io/v1alpha1\n"
                               "kind: Policy\n";

    ng_error_clear(&e);
    p = policy_load(head, strlen(head), "test.yaml", &e);
    CHECK(p != NULL);
    if (p == NULL)
        return;
    s = policy_defaults(p);
    wd_spec_defaults(&w);
    CHECK(!s->watchdog.enabled);
    CHECK_INT(s->watchdog.period_ms, w.period_ms);
    CHECK_INT(s->watchdog.idle_periods, w.idle_periods);
    CHECK_INT(s->watchdog.min_cpu_milli, w.min_cpu_milli);
    CHECK_INT(s->watchdog.restart, w.action == WD_ACTION_RESTART);
    CHECK_INT(s->watchdog.checkpoint_signal, w.checkpoint_signal);
    CHECK(s->watchdog.checkpoint_file == NULL);
    CHECK_INT(s->watchdog.grace_ms, w.grace_ms);
    CHECK_INT(s->ringcheck.rendezvous_port, MN_DEFAULT_PORT);
    policy_free(p);
}

/* docs/policy.md holds exactly the table schema_markdown() writes. */
static void
test_docs_reference(void)
{
    struct ng_error e;
    size_t len;
    char *doc = file_read("docs/policy.md", 1 << 20, &len, &e);
    char *want = schema_markdown();
    const char *b = doc ? strstr(doc, DOC_BEGIN) : NULL;
    const char *end = b ? strstr(b, DOC_END) : NULL;
    bool same;

    CHECK(want != NULL);
    CHECK(b != NULL && end != NULL);
    if (want == NULL || b == NULL || end == NULL)
        goto out;
    b += strlen(DOC_BEGIN);
    same =
        (size_t)(end - b) == strlen(want) && memcmp(b, want, strlen(want)) == 0;
    if (!same)
        fprintf(stderr,
                "docs/policy.md: the reference table differs from "
                "policy/schema.c; put this between the markers:\n%s",
                want);
    CHECK(same);
out:
    free(doc);
    free(want);
}

int
main(void)
{
    test_shape();
    test_default_yaml_rows();
    test_agent_defaults();
    test_docs_reference();
    return harness_finish();
}
