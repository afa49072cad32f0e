/* Unit tests for policy/match.c: pod matching, shadowing, glob checks. */
#include <string.h>

#include <jansson.h>

#include "harness.h"
#include "policy/match.h"

static char *ns_team[] = {"team-*", "ai-serving"};
static char *ns_star[] = {"*"};
static char *ns_team_a[] = {"team-a"};
static char *ns_team_glob_a[] = {"team-a*"};
static char *ex_sandbox[] = {"team-sandbox"};
static char *lk_app[] = {"app"};
static char *lv_vllm[] = {"vllm"};
static char *vals_ab[] = {"a", "b"};
static char *vals_a[] = {"a"};
static char *ak[] = {"example.com/tier"};
static char *av[] = {"gold"};

int
main(void)
{
    json_t *labels = json_pack("{s:s, s:s}", "app", "vllm", "team", "a");
    json_t *labels_b = json_pack("{s:s}", "team", "b");
    json_t *ann = json_pack("{s:s}", "example.com/tier", "gold");
    struct match any = {0};
    struct match m = {0};
    struct label_req in_ab = {"team", LABEL_IN, vals_ab, 2};
    struct label_req notin_a = {"team", LABEL_NOT_IN, vals_a, 1};
    struct label_req exists = {"team", LABEL_EXISTS, NULL, 0};
    struct label_req absent = {"gpu-debug", LABEL_NOT_EXISTS, NULL, 0};
    char why[160];

    any.max_gpus = -1;

    /* An empty match takes every pod, even with no namespace. */
    CHECK(match_pod(&any, NULL, NULL, NULL, 1));
    CHECK(match_pod(&any, "x", labels, ann, 0));

    /* Namespaces: globs, excludes. */
    m = any;
    m.namespaces = ns_team;
    m.n_namespaces = 2;
    m.exclude = ex_sandbox;
    m.n_exclude = 1;
    CHECK(match_pod(&m, "team-a", NULL, NULL, 1));
    CHECK(match_pod(&m, "ai-serving", NULL, NULL, 1));
    CHECK(!match_pod(&m, "team-sandbox", NULL, NULL, 1));
    CHECK(!match_pod(&m, "teams", NULL, NULL, 1));
    CHECK(!match_pod(&m, NULL, NULL, NULL, 1));
    CHECK(!match_pod(&m, "ai-serving-2", NULL, NULL, 1));

    /* podLabels: exact key and value. */
    m = any;
    m.label_keys = lk_app;
    m.label_values = lv_vllm;
    m.n_labels = 1;
    CHECK(match_pod(&m, "x", labels, NULL, 1));
    CHECK(!match_pod(&m, "x", labels_b, NULL, 1));
    CHECK(!match_pod(&m, "x", NULL, NULL, 1));

    /* matchExpressions, Kubernetes semantics. */
    m = any;
    m.exprs = &in_ab;
    m.n_exprs = 1;
    CHECK(match_pod(&m, "x", labels, NULL, 1));
    CHECK(match_pod(&m, "x", labels_b, NULL, 1));
    CHECK(!match_pod(&m, "x", NULL, NULL, 1));
    m.exprs = &notin_a;
    CHECK(!match_pod(&m, "x", labels, NULL, 1));
    CHECK(match_pod(&m, "x", labels_b, NULL, 1));
    CHECK(match_pod(&m, "x", NULL, NULL, 1)); /* missing label: NotIn holds */
    m.exprs = &exists;
    CHECK(match_pod(&m, "x", labels_b, NULL, 1));
    CHECK(!match_pod(&m, "x", NULL, NULL, 1));
    m.exprs = &absent;
    CHECK(match_pod(&m, "x", labels, NULL, 1));

    /* annotations and GPU bounds. */
    m = any;
    m.ann_keys = ak;
    m.ann_values = av;
    m.n_ann = 1;
    m.min_gpus = 2;
    m.max_gpus = 8;
    CHECK(match_pod(&m, "x", NULL, ann, 2));
    CHECK(match_pod(&m, "x", NULL, ann, 8));
    CHECK(!match_pod(&m, "x", NULL, ann, 1));
    CHECK(!match_pod(&m, "x", NULL, ann, 9));
    CHECK(!match_pod(&m, "x", NULL, NULL, 4));

    /* Shadowing: an empty match covers everything; "*" covers any list. */
    {
        struct match a = any, b = any;

        b.namespaces = ns_team_a;
        b.n_namespaces = 1;
        b.min_gpus = 2;
        CHECK(match_covers(&a, &b));
        CHECK(!match_covers(&b, &a));
        a.namespaces = ns_star;
        a.n_namespaces = 1;
        CHECK(match_covers(&a, &b));
        a.namespaces = ns_team;
        a.n_namespaces = 2;
        CHECK(match_covers(&a, &b)); /* team-* matches literal team-a */
        b.namespaces = ns_team_glob_a;
        CHECK(!match_covers(&a, &b)); /* glob vs glob: not proven */
        b.namespaces = ns_team_a;
        a.exclude = ex_sandbox;
        a.n_exclude = 1;
        CHECK(match_covers(&a, &b)); /* team-a is not the excluded one */
        a.min_gpus = 4;
        CHECK(!match_covers(&a, &b)); /* b takes 2-3 GPU pods a does not */
        a.min_gpus = 0;
        a.max_gpus = 8;
        CHECK(!match_covers(&a, &b)); /* b has no maximum */
        b.max_gpus = 4;
        CHECK(match_covers(&a, &b));
    }
    {
        struct match a = any, b = any;

        a.exprs = &exists;
        a.n_exprs = 1;
        b.exprs = &in_ab;
        b.n_exprs = 1;
        CHECK(match_covers(&a, &b)); /* In implies Exists */
        CHECK(!match_covers(&b, &a));
        a.exprs = &in_ab;
        b.label_keys = (char *[]){"team"};
        b.label_values = vals_a;
        b.n_labels = 1;
        b.exprs = NULL;
        b.n_exprs = 0;
        CHECK(match_covers(&a, &b)); /* team=a is In {a,b} */
        a.ann_keys = ak;
        a.ann_values = av;
        a.n_ann = 1;
        CHECK(!match_covers(&a, &b));
    }

    /* Glob validation. */
    CHECK(match_glob_valid("team-*", why, sizeof(why)));
    CHECK(match_glob_valid("team-[ab]?", why, sizeof(why)));
    CHECK(match_glob_valid("team-[!x]", why, sizeof(why)));
    CHECK(!match_glob_valid("team-[ab", why, sizeof(why)));
    CHECK(strstr(why, "unclosed") != NULL);
    CHECK(!match_glob_valid("Team", why, sizeof(why)));
    CHECK(strstr(why, "'T'") != NULL);
    CHECK(!match_glob_valid("", why, sizeof(why)));
    CHECK(!match_glob_valid("a]", why, sizeof(why)));
    CHECK(!match_glob_valid("a\\*", why, sizeof(why)));
    CHECK(!match_glob_valid("a\x01", why, sizeof(why)));
    CHECK(strstr(why, "0x01") != NULL);

    json_decref(labels);
    json_decref(labels_b);
    json_decref(ann);
    return harness_finish();
}
