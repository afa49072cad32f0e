/* Unit tests for admission/patch.c: RFC 6901 pointers, RFC 6902 operations. */
#include "admission/patch.h"

#include <stdint.h>

#include "admission/jsonwrite.h"
#include "harness.h"
#include "server_fixtures.h"

static void
test_escape(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"ncclguard.io/mutated", "ncclguard.io~1mutated"},
        {"a~b", "a~0b"},
        {"~/", "~0~1"},
        {"/~1", "~1~01"},
        {"plain", "plain"},
        {"", ""},
    };
    char buf[64];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK_INT(patch_pointer_escape(cases[i].in, buf, sizeof(buf)), 0);
        CHECK_STR(buf, cases[i].out);
    }
    /* Too small: an error, and still a terminated string. */
    CHECK_INT(patch_pointer_escape("a/b/c", buf, 4), -1);
    CHECK(strlen(buf) < 4);
}

static void
test_pointer_get(void)
{
    json_t *doc = J("{'a/b':{'m~n':[10,20]}, 'x':{'':5}, 'arr':[{'k':1}]}");

    CHECK_INT(json_integer_value(patch_pointer_get(doc, "/a~1b/m~0n/1")), 20);
    CHECK_INT(json_integer_value(patch_pointer_get(doc, "/x/")), 5);
    CHECK(patch_pointer_get(doc, "") == doc);
    CHECK(patch_pointer_get(doc, "/arr/01") == NULL); /* leading zero */
    CHECK(patch_pointer_get(doc, "/arr/-") == NULL);
    CHECK(patch_pointer_get(doc, "/arr/1") == NULL);
    CHECK(patch_pointer_get(doc, "a") == NULL);     /* no leading / */
    CHECK(patch_pointer_get(doc, "/a~2b") == NULL); /* bad escape */
    CHECK(patch_pointer_get(doc, "/x//") == NULL);
    json_decref(doc);
}

/* Applies ops (JSON text) to doc (JSON text); compares with want, or
 * expects failure when want is NULL. */
static void
apply_case(const char *doc_text, const char *ops_text, const char *want_text,
           const char *why)
{
    json_t *doc = J(doc_text), *ops = J(ops_text);
    json_t *orig = json_deep_copy(doc), *ops_orig = json_deep_copy(ops);
    struct ng_error err;
    int rc;

    /* patch_check() agrees with patch_apply() and writes nothing. */
    ng_error_clear(&err);
    rc = patch_check(doc, ops, &err);
    CHECK_INT(rc, want_text == NULL ? -1 : 0);
    CHECK(json_equal(doc, orig));
    CHECK(json_equal(ops, ops_orig));
    if (rc != 0 && why != NULL)
        CHECK(strstr(err.msg, why) != NULL);
    json_decref(orig);
    json_decref(ops_orig);

    ng_error_clear(&err);
    rc = patch_apply(&doc, ops, &err);
    if (want_text == NULL) {
        CHECK_INT(rc, -1);
        if (why != NULL && strstr(err.msg, why) == NULL) {
            fprintf(stderr, "error '%s' lacks '%s'\n", err.msg, why);
            CHECK(0);
        }
    } else {
        json_t *want = J(want_text);

        CHECK_INT(rc, 0);
        if (!json_equal(doc, want)) {
            char *got = json_dumps(doc, JSON_COMPACT);

            fprintf(stderr, "apply %s to %s gave %s\n", ops_text, doc_text,
                    got);
            free(got);
            CHECK(0);
        } else {
            CHECK(1);
        }
        json_decref(want);
    }
    json_decref(doc);
    json_decref(ops);
}

static void
test_apply(void)
{
    /* RFC 6902 appendix A examples and the ops the webhook sends. */
    apply_case("{'foo':'bar'}", "[{'op':'add','path':'/baz','value':'qux'}]",
               "{'foo':'bar','baz':'qux'}", NULL);
    apply_case("{'foo':['bar','baz']}",
               "[{'op':'add','path':'/foo/1','value':'qux'}]",
               "{'foo':['bar','qux','baz']}", NULL);
    apply_case("{'a':[1]}", "[{'op':'add','path':'/a/0','value':0}]",
               "{'a':[0,1]}", NULL);
    apply_case("{'a':[1]}", "[{'op':'add','path':'/a/-','value':2}]",
               "{'a':[1,2]}", NULL);
    apply_case("{'a':[1]}", "[{'op':'add','path':'/a/1','value':2}]",
               "{'a':[1,2]}", NULL);
    apply_case("{'a':[1]}", "[{'op':'add','path':'/a/3','value':2}]", NULL,
               "out of range");
    apply_case("{'m':{}}",
               "[{'op':'add','path':'/m/ncclguard.io~1gpus','value':'8'}]",
               "{'m':{'ncclguard.io/gpus':'8'}}", NULL);
    apply_case("{'m':null}", "[{'op':'add','path':'/m/k','value':1}]", NULL,
               "parent");
    apply_case("{}", "[{'op':'add','path':'/a/b','value':1}]", NULL,
               "parent does not exist");
    apply_case("{'a':1,'b':2}", "[{'op':'remove','path':'/a'}]", "{'b':2}",
               NULL);
    apply_case("{'a':[1,2,3]}", "[{'op':'remove','path':'/a/1'}]",
               "{'a':[1,3]}", NULL);
    apply_case("{'a':1}", "[{'op':'remove','path':'/b'}]", NULL,
               "does not exist");
    apply_case("{'a':{'s':'1Gi'}}",
               "[{'op':'replace','path':'/a/s','value':'2Gi'}]",
               "{'a':{'s':'2Gi'}}", NULL);
    apply_case("{'a':{}}", "[{'op':'replace','path':'/a/s','value':'2Gi'}]",
               NULL, "does not exist");
    apply_case("{'a':[5]}", "[{'op':'replace','path':'/a/0','value':6}]",
               "{'a':[6]}", NULL);
    apply_case("{'a':1}", "[{'op':'test','path':'/a','value':1}]", "{'a':1}",
               NULL);
    apply_case("{'a':1}", "[{'op':'test','path':'/a','value':2}]", NULL,
               "test failed");
    apply_case("{'a':{'b':1}}", "[{'op':'move','from':'/a/b','path':'/c'}]",
               "{'a':{},'c':1}", NULL);
    apply_case("{'a':{'b':1}}", "[{'op':'move','from':'/a','path':'/a/b'}]",
               NULL, "children");
    apply_case("{'a':[1]}", "[{'op':'copy','from':'/a','path':'/b'}]",
               "{'a':[1],'b':[1]}", NULL);
    apply_case("{}", "[{'op':'add','path':'','value':[1]}]", "[1]", NULL);
    apply_case("{}", "[{'op':'frob','path':'/a'}]", NULL, "unknown");
    apply_case("{}", "[{'op':'add','path':'/a'}]", NULL, "value");
    apply_case("{}", "[{'op':'add','path':'a','value':1}]", NULL,
               "JSON pointer");
    apply_case("{}", "[1]", NULL, "operation 0");
    apply_case("{}", "{}", NULL, "not a JSON array");
    /* The second op fails: the error names it. */
    apply_case("{}",
               "[{'op':'add','path':'/a','value':1},"
               "{'op':'remove','path':'/zz'}]",
               NULL, "operation 1 (remove /zz)");
}

/* What patch_apply does as RFC 6902 says and patch_check refuses: an add
 * (or a copy or move) onto an existing object member. patch_apply
 * replaces the value; the check names the op and its path. */
static void
strict_case(const char *doc_text, const char *ops_text, const char *want_text,
            const char *msg)
{
    json_t *doc = J(doc_text), *ops = J(ops_text), *want = J(want_text);
    json_t *orig = json_deep_copy(doc);
    struct ng_error err;

    ng_error_clear(&err);
    CHECK_INT(patch_check(doc, ops, &err), -1);
    if (strcmp(err.msg, msg) != 0)
        fprintf(stderr, "check of %s on %s: '%s', want '%s'\n", ops_text,
                doc_text, err.msg, msg);
    CHECK_STR(err.msg, msg);
    CHECK(json_equal(doc, orig));
    ng_error_clear(&err);
    CHECK_INT(patch_apply(&doc, ops, &err), 0);
    CHECK(json_equal(doc, want));
    json_decref(doc);
    json_decref(ops);
    json_decref(want);
    json_decref(orig);
}

static void
test_check_strict(void)
{
    strict_case("{'a':1}", "[{'op':'add','path':'/a','value':2}]", "{'a':2}",
                "operation 0 (add /a): add onto existing key");
    /* A key whose value is null exists. */
    strict_case("{'m':{'k':null}}", "[{'op':'add','path':'/m/k','value':1}]",
                "{'m':{'k':1}}",
                "operation 0 (add /m/k): add onto existing key");
    /* The path as written, escapes and all. */
    strict_case("{'metadata':{'annotations':{'ncclguard.io/gpus':'4'}}}",
                "[{'op':'add','path':'/metadata/annotations/x','value':'y'},"
                "{'op':'add','path':'/metadata/annotations/ncclguard.io~1gpus',"
                "'value':'8'}]",
                "{'metadata':{'annotations':{'ncclguard.io/gpus':'8',"
                "'x':'y'}}}",
                "operation 1 (add /metadata/annotations/ncclguard.io~1gpus): "
                "add onto existing key");
    /* A key the patch itself put there. */
    strict_case("{'m':{}}",
                "[{'op':'add','path':'/m/k','value':1},"
                "{'op':'add','path':'/m/k','value':2}]",
                "{'m':{'k':2}}",
                "operation 1 (add /m/k): add onto existing key");
    strict_case("{'m':{'a':1,'b':2}}",
                "[{'op':'copy','from':'/m/a','path':'/m/b'}]",
                "{'m':{'a':1,'b':1}}",
                "operation 0 (copy /m/b): add onto existing key");
    strict_case("{'m':{'a':1,'b':2}}",
                "[{'op':'move','from':'/m/a','path':'/m/b'}]", "{'m':{'b':1}}",
                "operation 0 (move /m/b): add onto existing key");
    /* Passed: a replace there, a remove then an add, an array insert at an
     * existing index, the root. */
    apply_case("{'a':1}", "[{'op':'replace','path':'/a','value':2}]", "{'a':2}",
               NULL);
    apply_case("{'a':1}",
               "[{'op':'remove','path':'/a'},{'op':'add','path':'/a',"
               "'value':2}]",
               "{'a':2}", NULL);
    apply_case("{'a':[1]}", "[{'op':'add','path':'/a/0','value':0}]",
               "{'a':[0,1]}", NULL);
    apply_case("{'a':1}", "[{'op':'add','path':'','value':{'b':2}}]", "{'b':2}",
               NULL);
}

/* Later operations that change a value an earlier one added: the check
 * must leave both the document and the patch's values alone. */
static void
test_check_shares_nothing(void)
{
    json_t *doc = J("{'spec':{'containers':[{'name':'a'}]}}");
    json_t *orig = json_deep_copy(doc);
    json_t *ops = J("[{'op':'add','path':'/spec/volumes','value':[{'n':1}]},"
                    "{'op':'add','path':'/spec/volumes/-','value':{'n':2}},"
                    "{'op':'add','path':'/spec/volumes/0/x','value':3},"
                    "{'op':'add','path':'/spec/containers/0/env','value':[]},"
                    "{'op':'replace','path':'/spec/containers/0/name',"
                    "'value':'b'},"
                    "{'op':'test','path':'/spec/volumes','value':"
                    "[{'n':1,'x':3},{'n':2}]}]");
    json_t *ops_orig = json_deep_copy(ops);
    struct ng_error err;

    CHECK_INT(patch_check(doc, ops, &err), 0);
    CHECK(json_equal(doc, orig));
    CHECK(json_equal(ops, ops_orig));
    CHECK_INT(patch_apply(&doc, ops, &err), 0);
    CHECK_STR(str_at(doc, "/spec/containers/0/name"), "b");
    CHECK(json_equal(ops, ops_orig));
    /* A wrong test value fails in both. */
    json_object_set_new(json_array_get(ops, 5), "value", json_integer(1));
    CHECK_INT(patch_check(orig, ops, &err), -1);
    CHECK(strstr(err.msg, "operation 5") != NULL);
    json_decref(doc);
    json_decref(orig);
    json_decref(ops);
    json_decref(ops_orig);
}

static void
test_bounds(void)
{
    json_t *ops = json_array(), *doc = J("{'a':[]}");
    struct ng_error err;

    for (int i = 0; i <= PATCH_MAX_OPS; i++)
        CHECK_INT(patch_append(ops, "add", "/a/-", json_integer(i)), 0);
    CHECK_INT(json_array_size(ops), PATCH_MAX_OPS + 1);
    CHECK_INT(patch_apply(&doc, ops, &err), -1);
    CHECK(strstr(err.msg, "operations") != NULL);
    CHECK_INT(json_array_size(json_object_get(doc, "a")), 0);
    json_array_remove(ops, 0);
    CHECK_INT(patch_apply(&doc, ops, &err), 0);
    CHECK_INT(json_array_size(json_object_get(doc, "a")), PATCH_MAX_OPS);
    json_decref(ops);
    json_decref(doc);
}

static void
test_append(void)
{
    json_t *ops = json_array();

    CHECK_INT(patch_append(ops, "add", "/x", json_string("v")), 0);
    CHECK_INT(patch_append(ops, "remove", "/y", NULL), 0);
    CHECK_STR(json_string_value(json_object_get(json_array_get(ops, 0), "op")),
              "add");
    CHECK_STR(
        json_string_value(json_object_get(json_array_get(ops, 0), "value")),
        "v");
    CHECK(json_object_get(json_array_get(ops, 1), "value") == NULL);
    json_decref(ops);
}

/*
 * Regression: the fast check must not answer for an op whose path goes
 * through a value an earlier op put there, at any depth: it covers the op
 * only when no earlier op wrote its parent or an ancestor of it. An
 * earlier replace two levels up (containers/0 := {}) takes env away, so
 * patch_apply() refuses the later op and patch_check() must too; the
 * neighbours show the check and the apply agreeing either way.
 */
static void
test_check_fast_ancestor(void)
{
    static const char doc[] =
        "{'spec':{'containers':[{'name':'c','env':[{'name':'A','value':"
        "'1'}]}]}}";

    /* Two levels up, then three: the earlier value has no env. */
    apply_case(doc,
               "[{'op':'replace','path':'/spec/containers/0','value':{}},"
               "{'op':'replace','path':'/spec/containers/0/env/0/name',"
               "'value':'B'}]",
               NULL, "operation 1");
    apply_case(doc,
               "[{'op':'replace','path':'/spec/containers/0','value':{}},"
               "{'op':'add','path':'/spec/containers/0/env/-','value':{}}]",
               NULL, "operation 1");
    apply_case(doc,
               "[{'op':'replace','path':'/spec','value':{'containers':[]}},"
               "{'op':'replace','path':'/spec/containers/0/env/0/value',"
               "'value':'2'}]",
               NULL, "operation 1");
    /* The exact parent, replaced by a value without the key. */
    apply_case(doc,
               "[{'op':'replace','path':'/spec/containers/0/env/0','value':"
               "{}},{'op':'replace','path':'/spec/containers/0/env/0/name',"
               "'value':'B'}]",
               NULL, "operation 1");
    /* An ancestor replaced by a value that has the path: both accept. */
    apply_case(doc,
               "[{'op':'replace','path':'/spec/containers/0','value':{"
               "'name':'c','env':[{'name':'A'}]}},{'op':'replace','path':"
               "'/spec/containers/0/env/0/name','value':'B'}]",
               "{'spec':{'containers':[{'name':'c','env':[{'name':'B'}]}]}}",
               NULL);
    /* A sibling of the replaced value is untouched: both accept. */
    apply_case(doc,
               "[{'op':'replace','path':'/spec/containers/0/name','value':"
               "'d'},{'op':'replace','path':'/spec/containers/0/env/0/name',"
               "'value':'B'}]",
               "{'spec':{'containers':[{'name':'d','env':[{'name':'B',"
               "'value':'1'}]}]}}",
               NULL);
}

/*
 * The full apply's refusals each give their own words, and the edge
 * cases of pointers and of move and copy: remove and replace at a bad
 * index or at the root, ops lacking a member, a move to a path that only
 * looks like a child of from, empty and badly escaped tokens.
 */
static void
test_apply_edges(void)
{
    apply_case("{'a':1}", "[{'op':'remove','path':''}]", NULL,
               "cannot remove the whole document");
    apply_case("{'a':[1]}", "[{'op':'remove','path':'/a/5'}]", NULL,
               "array index out of range");
    apply_case("{'a':[1]}", "[{'op':'replace','path':'/a/5','value':2}]", NULL,
               "path does not exist");
    apply_case("{'a':1}", "[{'op':'replace','path':'','value':{'b':2}}]",
               "{'b':2}", NULL);
    apply_case("{'a':1}", "[{'op':'replace','path':'/a'}]", NULL,
               "operation lacks \"value\"");
    apply_case("{'a':1}", "[{'op':'test','path':'/a'}]", NULL,
               "operation lacks \"value\"");
    apply_case("{'a':1}", "[{'path':'/a','value':1}]", NULL,
               "operation lacks \"op\" or \"path\"");
    apply_case("{'a':1}", "[{'op':'add','value':1}]", NULL,
               "operation lacks \"op\" or \"path\"");
    apply_case("{'a':1}", "[{'op':'move','path':'/b'}]", NULL,
               "operation lacks \"from\"");
    apply_case("{'a':1}", "[{'op':'move','from':'/x','path':'/b'}]", NULL,
               "path does not exist");
    apply_case("{'a':1}", "[{'op':'copy','from':'/x','path':'/b'}]", NULL,
               "\"from\" does not exist");
    apply_case("{'a':1}", "[1]", NULL, "operation 0 (? ?): bad operation");
    /* Not into a child of from: a '/' at from's length in another path,
     * and a path that from is a prefix of, but not a token-wise one. */
    apply_case("{'a':{'b':1},'c':{'d':{}}}",
               "[{'op':'move','from':'/a/b','path':'/c/d/e'}]",
               "{'a':{},'c':{'d':{'e':1}}}", NULL);
    apply_case("{'a':1}", "[{'op':'move','from':'/a','path':'/ab'}]",
               "{'ab':1}", NULL);
    /* The empty key is a key (RFC 6901), last or on the way. */
    apply_case("{'m':{}}", "[{'op':'add','path':'/m/','value':1}]",
               "{'m':{'':1}}", NULL);
    apply_case("{'m':{'':{}}}", "[{'op':'add','path':'/m//x','value':1}]",
               "{'m':{'':{'x':1}}}", NULL);
    strict_case("{'m':{'':1}}", "[{'op':'add','path':'/m/','value':2}]",
                "{'m':{'':2}}", "operation 0 (add /m/): add onto existing key");
    /* "~2" is no escape, last or on the way. */
    apply_case("{'m':{}}", "[{'op':'add','path':'/m/a~2','value':1}]", NULL,
               "parent does not exist");
    apply_case("{'m':{}}", "[{'op':'add','path':'/m~2/a','value':1}]", NULL,
               "parent does not exist");
    apply_case("{'m':{}}", "[{'op':'remove','path':'/m~2/a'}]", NULL,
               "path does not exist");
    /* A later op on the document an add at the root put there. */
    apply_case("{'x':0}",
               "[{'op':'add','path':'','value':{'a':1}},{'op':'replace',"
               "'path':'/a','value':2}]",
               "{'a':2}", NULL);
}

/* Counts jansson's allocations, and fails the one numbered fail_at. */
static long alloc_count, alloc_fail_at = -1;

static void *
counting_malloc(size_t n)
{
    if (alloc_count++ == alloc_fail_at)
        return NULL;
    return malloc(n);
}

/*
 * The fast check answers a patch of adds and replaces with nothing
 * copied: not one allocation, for each shape it covers (appends, inserts
 * into another array or at the same index, keys next to earlier keys,
 * replaced elements beside later ops, the 128-op bound). Past its bound
 * (129 ops) the copy-on-write check answers.
 */
static void
test_check_fast_no_copy(void)
{
    static const char doc_text[] =
        "{'metadata':{'name':'p','annotations':{'a':'1'}},'spec':{"
        "'containers':[{'name':'c0','env':[{'name':'X'}]},{'name':'c1'}],"
        "'initContainers':[{'name':'i0'}]},'x':{'':{}}}";
    static const char *const fast[] = {
        "[{'op':'add','path':'/spec/containers/0/envFrom','value':[]}]",
        "[{'op':'replace','path':'/spec/containers/0/env/0/name','value':'Y'},"
        "{'op':'add','path':'/spec/containers/0/env/-','value':{}},"
        "{'op':'add','path':'/spec/containers/0/env/-','value':{}}]",
        "[{'op':'add','path':'/spec/initContainers/0','value':{}},"
        "{'op':'replace','path':'/spec/containers/1/name','value':'d'}]",
        "[{'op':'add','path':'/spec/containers/0/env/0','value':{}},"
        "{'op':'add','path':'/spec/containers/0/env/0','value':{}}]",
        "[{'op':'add','path':'/spec/containers/0/x','value':1},"
        "{'op':'add','path':'/spec/containers/0/env/-','value':{}}]",
        "[{'op':'add','path':'/metadata/labelsX','value':{}},"
        "{'op':'add','path':'/metadata/labels','value':{}}]",
        "[{'op':'add','path':'/metadata/aa','value':1},"
        "{'op':'add','path':'/metadata/bb','value':1}]",
        "[{'op':'replace','path':'/spec/containers/0','value':{}},"
        "{'op':'replace','path':'/spec/containers/1/name','value':'d'}]",
        "[{'op':'add','path':'/spec/containers/-','value':{}},"
        "{'op':'add','path':'/spec/containers/0/y','value':1}]",
        "[{'op':'add','path':'/metadata/ann','value':{}},"
        "{'op':'add','path':'/metadata/annotations/z','value':'1'}]",
        "[{'op':'add','path':'/spec/initContainers/0','value':{}},"
        "{'op':'replace','path':'/spec/containers/0/env/0/name','value':'Z'}]",
        "[{'op':'add','path':'/metadata/annotations/','value':'e'}]",
        "[{'op':'add','path':'/x//k','value':1}]",
    };
    json_malloc_t old_m;
    json_free_t old_f;
    struct ng_error err;
    json_t *doc = J(doc_text), *orig = json_deep_copy(doc);
    json_t *many[2];

    many[0] = json_array();
    many[1] = json_array();
    for (int i = 0; i < 129; i++) {
        if (i < 128)
            CHECK_INT(patch_append(many[0], "add", "/spec/containers/0/env/-",
                                   json_integer(i)),
                      0);
        CHECK_INT(patch_append(many[1], "add", "/spec/containers/0/env/-",
                               json_integer(i)),
                  0);
    }
    json_get_alloc_funcs(&old_m, &old_f);
    for (size_t i = 0; i < sizeof(fast) / sizeof(fast[0]) + 1; i++) {
        json_t *ops = i < sizeof(fast) / sizeof(fast[0]) ? J(fast[i])
                                                         : json_incref(many[0]);
        int rc;

        alloc_count = 0;
        json_set_alloc_funcs(counting_malloc, free);
        rc = patch_check(doc, ops, &err);
        json_set_alloc_funcs(old_m, old_f);
        if (rc != 0 || alloc_count != 0)
            fprintf(stderr, "fast case %zu: rc %d, %ld allocations\n", i, rc,
                    alloc_count);
        CHECK_INT(rc, 0);
        CHECK_INT(alloc_count, 0);
        json_decref(ops);
    }
    alloc_count = 0;
    json_set_alloc_funcs(counting_malloc, free);
    CHECK_INT(patch_check(doc, many[1], &err), 0);
    json_set_alloc_funcs(old_m, old_f);
    CHECK(alloc_count > 0);
    CHECK(json_equal(doc, orig));
    json_decref(many[0]);
    json_decref(many[1]);
    json_decref(doc);
    json_decref(orig);
}

/*
 * Out of memory at each of jansson's allocations in turn: the check and
 * the apply either refuse, or succeed with exactly the patched document,
 * never half of it; the document given to the check is never changed.
 */
static void
test_out_of_memory(void)
{
    static const struct {
        const char *doc, *ops, *want;
    } cases[] = {
        {"{'a':{'b':[1,2]},'c':{}}",
         "[{'op':'remove','path':'/a/b/0'},{'op':'add','path':'/c/k','value':"
         "{'x':[1]}},{'op':'add','path':'/a/b/0','value':3},{'op':'move',"
         "'from':'/c/k','path':'/a/k'},{'op':'copy','from':'/a/k','path':"
         "'/c/j'},{'op':'test','path':'/a/b','value':[3,2]}]",
         "{'a':{'b':[3,2],'k':{'x':[1]}},'c':{'j':{'x':[1]}}}"},
        {"{'x':0}",
         "[{'op':'add','path':'','value':{'a':{'b':1}}},{'op':'replace',"
         "'path':'/a/b','value':2},{'op':'remove','path':'/a/b'}]",
         "{'a':{}}"},
        {"{'x':0}", "[{'op':'add','path':'','value':{'a':1}}]", "{'a':1}"},
        /* A full array grows to take the insert. */
        {"{'a':[1,2,3,4,5,6,7,8]}", "[{'op':'add','path':'/a/0','value':0}]",
         "{'a':[0,1,2,3,4,5,6,7,8]}"},
    };
    json_malloc_t old_m;
    json_free_t old_f;

    json_get_alloc_funcs(&old_m, &old_f);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *doc = J(cases[i].doc), *ops = J(cases[i].ops);
        json_t *want = J(cases[i].want), *orig = json_deep_copy(doc);
        bool done = false;

        for (long k = 0; !done && k < 10000; k++) {
            json_t *copy = json_deep_copy(doc);
            struct ng_error err;
            int rc_check, rc_apply;

            alloc_count = 0;
            alloc_fail_at = k;
            json_set_alloc_funcs(counting_malloc, free);
            rc_check = patch_check(doc, ops, &err);
            rc_apply = patch_apply(&copy, ops, &err);
            json_set_alloc_funcs(old_m, old_f);
            done = alloc_count <= k; /* nothing failed: the last round */
            alloc_fail_at = -1;
            CHECK(json_equal(doc, orig));
            CHECK(rc_check == 0 || rc_check == -1);
            if (done)
                CHECK_INT(rc_check, 0);
            CHECK(rc_apply == 0 || rc_apply == -1);
            if (rc_apply == 0 && !json_equal(copy, want)) {
                char *t = json_dumps(copy, JSON_COMPACT);

                fprintf(stderr,
                        "case %zu, allocation %ld failed: applied "
                        "as %s\n",
                        i, k, t ? t : "(null)");
                free(t);
                CHECK(0);
            }
            if (done)
                CHECK_INT(rc_apply, 0);
            json_decref(copy);
        }
        CHECK(done);
        json_decref(doc);
        json_decref(ops);
        json_decref(want);
        json_decref(orig);
    }
}

/*
 * The cost follows the patch: the check copies a container the first time
 * a change goes through it and never again (20 removes from one env cost
 * what one does), and the apply, which changes the document itself,
 * copies nothing.
 */
static void
test_copies_once(void)
{
    json_t *doc = json_object(), *env = json_array();
    json_t *one = json_array(), *twenty = json_array();
    long count[2][2];
    json_malloc_t old_m;
    json_free_t old_f;
    struct ng_error err;

    for (int i = 0; i < 30; i++)
        json_array_append_new(env, json_pack("{s:i}", "v", i));
    json_object_set_new(
        doc, "spec",
        json_pack("{s:[{s:s,s:o}]}", "containers", "name", "c", "env", env));
    for (int i = 0; i < 20; i++) {
        if (i == 0)
            CHECK_INT(
                patch_append(one, "remove", "/spec/containers/0/env/0", NULL),
                0);
        CHECK_INT(
            patch_append(twenty, "remove", "/spec/containers/0/env/0", NULL),
            0);
    }
    json_get_alloc_funcs(&old_m, &old_f);
    for (int k = 0; k < 2; k++) {
        json_t *ops = k == 0 ? one : twenty, *copy = json_deep_copy(doc);

        alloc_count = 0;
        json_set_alloc_funcs(counting_malloc, free);
        CHECK_INT(patch_check(doc, ops, &err), 0);
        count[k][0] = alloc_count;
        alloc_count = 0;
        CHECK_INT(patch_apply(&copy, ops, &err), 0);
        count[k][1] = alloc_count;
        json_set_alloc_funcs(old_m, old_f);
        CHECK_INT(
            json_array_size(patch_pointer_get(copy, "/spec/containers/0/env")),
            k == 0 ? 29 : 10);
        json_decref(copy);
    }
    if (count[0][0] != count[1][0] || count[1][1] != 0)
        fprintf(stderr, "allocations: check %ld and %ld, apply %ld and %ld\n",
                count[0][0], count[1][0], count[0][1], count[1][1]);
    CHECK(count[0][0] > 0);
    CHECK_INT(count[1][0], count[0][0]);
    CHECK_INT(count[0][1], 0);
    CHECK_INT(count[1][1], 0);
    json_decref(one);
    json_decref(twenty);
    json_decref(doc);
}

/* patch_text_check() on a closed text of the ops in ops_text, against
 * patch_check() on the same ops as jansson values: the same answer and
 * the same words. */
static void
text_check_case(const json_t *doc, const char *ops_text, int want)
{
    json_t *ops = J(ops_text), *op;
    struct patch_text pt;
    struct ng_error e1, e2;
    size_t i;

    patch_text_init(&pt);
    json_array_foreach(ops, i, op)
    {
        CHECK_INT(
            patch_text_append(&pt, json_string_value(json_object_get(op, "op")),
                              json_string_value(json_object_get(op, "path")),
                              json_incref(json_object_get(op, "value"))),
            0);
    }
    CHECK_INT(patch_text_close(&pt), 0);
    ng_error_clear(&e1);
    ng_error_clear(&e2);
    CHECK_INT(patch_text_check(doc, &pt, &e1), want);
    CHECK_INT(patch_check(doc, ops, &e2), want);
    if (strcmp(e1.msg, e2.msg) != 0)
        fprintf(stderr, "text check of %.80s: '%s', jansson's '%s'\n", ops_text,
                e1.msg, e2.msg);
    CHECK_STR(e1.msg, e2.msg);
    patch_text_release(&pt);
    json_decref(ops);
}

/*
 * A patch written as text: the bytes jsonwrite_value() writes for the same
 * ops built with patch_append() (escapes in paths and values included),
 * each op's kind and raw path kept for the check, refused ops leaving the
 * text as it was, and patch_text_check() answering as patch_check(), on
 * the fast path and past it.
 */
static void
test_text(void)
{
    static const struct {
        const char *op, *path, *value;
    } in[] = {
        {"add", "/metadata/annotations/ncclguard.io~1mutated", "'envFrom'"},
        {"replace", "/spec/a\"b\\c\x01", "{'k':[1,true,null,'\\u00e9',2.5]}"},
        {"add", "/spec/containers/0/env/-", "{'name':'N','value':'v'}"},
    };
    json_t *ops = json_array(), *doc, *many;
    struct patch_text pt;
    struct buf want;
    size_t len;
    char path[32];

    patch_text_init(&pt);
    CHECK_INT(patch_text_close(&pt), 0);
    CHECK_STR(pt.text.p, "[]");
    patch_text_release(&pt);
    patch_text_init(&pt);
    for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++) {
        CHECK_INT(patch_text_append(&pt, in[i].op, in[i].path, J(in[i].value)),
                  0);
        CHECK_INT(patch_append(ops, in[i].op, in[i].path, J(in[i].value)), 0);
    }
    len = pt.text.len;
    CHECK_INT(patch_text_append(&pt, "remove", "/x", json_true()), -1);
    CHECK_INT(patch_text_append(&pt, "move", "/x", json_true()), -1);
    CHECK_INT(patch_text_append(&pt, "add", "x", json_true()), -1);
    CHECK_INT(patch_text_append(&pt, "add", "", json_true()), -1);
    CHECK_INT(patch_text_append(&pt, "add", "/x", NULL), -1);
    CHECK_INT(pt.text.len, len);
    CHECK_INT(pt.n_ops, 3);
    CHECK_INT(patch_text_close(&pt), 0);
    buf_init(&want, SIZE_MAX);
    CHECK_INT(jsonwrite_value(&want, ops), 0);
    CHECK_INT(pt.text.len, want.len);
    CHECK_STR(pt.text.p, want.p);
    for (size_t i = 0; i < 3; i++) {
        CHECK(pt.ops[i].add == (strcmp(in[i].op, "add") == 0));
        CHECK_STR(pt.paths.p + pt.ops[i].path_off, in[i].path);
        CHECK_INT(pt.ops[i].path_len, strlen(in[i].path));
    }
    buf_release(&want);
    patch_text_release(&pt);
    json_decref(ops);

    doc = J("{'metadata':{'name':'p'},'spec':{'containers':[{'name':'a'}]}}");
    /* The fast path decides. */
    text_check_case(doc,
                    "[{'op':'add','path':'/spec/containers/0/env','value':[]},"
                    "{'op':'replace','path':'/metadata/name','value':'q'}]",
                    0);
    text_check_case(doc,
                    "[{'op':'add','path':'/spec/containers/0/name','value':"
                    "'b'}]",
                    -1);
    text_check_case(
        doc, "[{'op':'replace','path':'/spec/hostIPC','value':true}]", -1);
    /* Through a value an earlier op put there: only the full check can
     * tell, and it allows the first and refuses the second. */
    text_check_case(doc,
                    "[{'op':'add','path':'/spec/volumes','value':[]},"
                    "{'op':'add','path':'/spec/volumes/-','value':{}}]",
                    0);
    text_check_case(doc,
                    "[{'op':'add','path':'/spec/volumes','value':[]},"
                    "{'op':'add','path':'/spec/volumes/1','value':{}}]",
                    -1);
    /* More ops than the fast check takes: the full check, both ways. */
    many = json_array();
    for (int i = 0; i < 130; i++) {
        snprintf(path, sizeof(path), "/metadata/k%d", i);
        CHECK_INT(patch_append(many, "add", path, json_integer(i)), 0);
    }
    {
        char *t = json_dumps(many, JSON_COMPACT);

        text_check_case(doc, t, 0);
        free(t);
        CHECK_INT(patch_append(many, "add", "/metadata/k3", json_true()), 0);
        t = json_dumps(many, JSON_COMPACT);
        text_check_case(doc, t, -1);
        free(t);
    }
    json_decref(many);
    json_decref(doc);
}

int
main(void)
{
    test_escape();
    test_pointer_get();
    test_apply();
    test_check_strict();
    test_check_fast_ancestor();
    test_apply_edges();
    test_check_fast_no_copy();
    test_out_of_memory();
    test_copies_once();
    test_check_shares_nothing();
    test_bounds();
    test_append();
    test_text();
    return harness_finish();
}
