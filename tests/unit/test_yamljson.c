/* Unit tests for cli/yamljson.c: YAML streams to JSON and back. */
#include "cli/yamljson.h"

#include <stdlib.h>

#include "harness.h"
#include "server_fixtures.h"

static json_t *
load(const char *text, json_t **warnings, struct ng_error *err)
{
    ng_error_clear(err);
    return yamljson_load(text, strlen(text), "in.yaml", warnings, err);
}

/* Loads text, expects one document equal to want (JSON with '). */
static void
load_case(const char *text, const char *want_text)
{
    struct ng_error err;
    json_t *docs = load(text, NULL, &err), *want = J(want_text);

    CHECK(docs != NULL);
    if (docs != NULL && !json_equal(json_array_get(docs, 0), want)) {
        char *got = json_dumps(docs, JSON_COMPACT | JSON_ENCODE_ANY);

        fprintf(stderr, "yaml %s -> %s, expected %s\n", text, got, want_text);
        free(got);
        CHECK(0);
    } else {
        CHECK(docs != NULL && json_array_size(docs) == 1);
    }
    json_decref(docs);
    json_decref(want);
}

static void
test_scalars(void)
{
    static const struct {
        const char *yaml, *json;
    } cases[] = {
        {"a: 8", "{'a':8}"},
        {"a: '8'", "{'a':'8'}"},
        {"a: \"8\"", "{'a':'8'}"},
        {"a: -3", "{'a':-3}"},
        {"a: +3", "{'a':3}"},
        {"a: 0777", "{'a':511}"}, /* YAML 1.1 octal, as kubectl reads it */
        {"a: 0o17", "{'a':15}"},
        {"a: 0x1F", "{'a':31}"},
        {"a: 0b101", "{'a':5}"},
        {"a: 1_000", "{'a':1000}"},
        {"a: 1.5", "{'a':1.5}"},
        {"a: 1e3", "{'a':1000.0}"},
        {"a: .5", "{'a':0.5}"},
        {"a: 1.2.3", "{'a':'1.2.3'}"},
        {"a: .inf", "{'a':'.inf'}"},
        {"a: 16Gi", "{'a':'16Gi'}"},
        {"a: 100m", "{'a':'100m'}"},
        {"a: true", "{'a':true}"},
        {"a: yes", "{'a':true}"},
        {"a: On", "{'a':true}"},
        {"a: n", "{'a':false}"},
        {"a: off", "{'a':false}"},
        {"a: 'yes'", "{'a':'yes'}"},
        {"a: ~", "{'a':null}"},
        {"a: null", "{'a':null}"},
        {"a:", "{'a':null}"},
        {"a: !!str 123", "{'a':'123'}"},
        {"a: !!int 12", "{'a':12}"},
        {"a: !custom 12", "{'a':'12'}"},
        {"a: 9223372036854775807", "{'a':9223372036854775807}"},
        {"a: -9223372036854775808", "{'a':-9223372036854775808}"},
        {"a: 9223372036854775808", "{'a':9.223372036854775808e18}"},
        {"8: x", "{'8':'x'}"},
        {"true: x", "{'true':'x'}"},
        {"a: |\n  one\n  two\n", "{'a':'one\\ntwo\\n'}"},
        {"a: >\n  one\n  two\n", "{'a':'one two\\n'}"},
        {"a: {b: [1, 'x', {c: d}]}", "{'a':{'b':[1,'x',{'c':'d'}]}}"},
        {"a: {}\nb: []", "{'a':{},'b':[]}"},
        {"# comment\na: 1 # trailing\n", "{'a':1}"},
        {"- 1\n- two", "[1,'two']"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        load_case(cases[i].yaml, cases[i].json);
}

static void
test_streams(void)
{
    struct ng_error err;
    json_t *warnings = NULL;
    json_t *docs;

    /* Null and empty documents are dropped; comments are fine. */
    docs = load("# preamble\n---\na: 1\n---\n---\n~\n---\nb: 2\n---\n# end\n",
                &warnings, &err);
    CHECK(docs != NULL);
    CHECK_INT(json_array_size(docs), 2);
    CHECK_INT(json_integer_value(json_object_get(json_array_get(docs, 1), "b")),
              2);
    CHECK_INT(json_array_size(warnings), 0);
    json_decref(docs);
    json_decref(warnings);

    /* Only comments: no documents, no error. */
    docs = load("# nothing here\n", NULL, &err);
    CHECK(docs != NULL);
    CHECK_INT(json_array_size(docs), 0);
    json_decref(docs);

    /* A JSON stream of two objects, tabs and all. */
    docs = load("{\"a\":\t1}\n{\"b\": [true]}\n", NULL, &err);
    CHECK(docs != NULL);
    CHECK_INT(json_array_size(docs), 2);
    json_decref(docs);
}

static void
test_anchors(void)
{
    struct ng_error err;
    json_t *docs, *doc, *a, *b;

    docs = load("a: &spec\n  x: 1\n  list: [1]\nb: *spec\n"
                "base: &base {cpu: 1, mem: 2}\n"
                "merged:\n  <<: *base\n  mem: 3\n"
                "multi:\n  <<: [*base, {gpu: 4}]\n",
                NULL, &err);
    CHECK(docs != NULL);
    doc = json_array_get(docs, 0);
    a = json_object_get(doc, "a");
    b = json_object_get(doc, "b");
    CHECK(json_equal(a, b));
    /* An alias is a copy: changing one leaves the other alone. */
    CHECK(a != b);
    json_object_set_new(a, "x", json_integer(2));
    CHECK_INT(json_integer_value(json_object_get(b, "x")), 1);
    /* Merge keys: explicit keys win, later ones fill gaps. */
    CHECK_INT(json_integer_value(patch_pointer_get(doc, "/merged/mem")), 3);
    CHECK_INT(json_integer_value(patch_pointer_get(doc, "/merged/cpu")), 1);
    CHECK_INT(json_integer_value(patch_pointer_get(doc, "/multi/gpu")), 4);
    CHECK(patch_pointer_get(doc, "/merged/<<") == NULL);
    json_decref(docs);

    /* Unknown alias: an error with its place. */
    docs = load("a: 1\nb: *nope\n", NULL, &err);
    CHECK(docs == NULL);
    CHECK_INT(err.line, 2);
    CHECK_INT(err.col, 4);
    CHECK(strstr(err.msg, "nope") != NULL);
}

static void
test_duplicates(void)
{
    struct ng_error err;
    json_t *warnings = NULL;
    json_t *docs = load("spec:\n  resources:\n    requests: {cpu: 1}\n"
                        "  resources:\n    limits: {nvidia.com/gpu: 8}\n",
                        &warnings, &err);
    const char *w;

    CHECK(docs != NULL);
    /* The last value wins, as in Kubernetes' decoder. */
    CHECK(patch_pointer_get(json_array_get(docs, 0),
                            "/spec/resources/requests") == NULL);
    CHECK_INT(
        json_integer_value(patch_pointer_get(
            json_array_get(docs, 0), "/spec/resources/limits/nvidia.com~1gpu")),
        8);
    CHECK_INT(json_array_size(warnings), 1);
    w = json_string_value(json_array_get(warnings, 0));
    CHECK(w != NULL &&
          strncmp(w, "in.yaml:4:3: duplicate key \"resources\"", 38) == 0);
    json_decref(docs);
    json_decref(warnings);
}

static void
test_errors(void)
{
    static const struct {
        const char *yaml;
        int line, col;
        const char *msg;
    } cases[] = {
        {"a: [1, 2\n", 2, 1, "flow sequence"},
        {"a: b\n c: d\n", 2, 3, "mapping values"},
        /* A tab in the indentation is named as such at its column. */
        {"a:\n\t- b\n", 2, 1, "tabs cannot indent YAML; use spaces"},
        {"a:\n  b:\n  \tc: 1\n", 3, 3, "tabs cannot indent YAML; use spaces"},
        {"? [a, b]\n: c\n", 1, 3, "complex"},
        {"a: 'unterminated\n", 2, 1, "quoted scalar"},
    };
    struct ng_error err;
    json_t *docs;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *warnings = NULL;

        docs = load(cases[i].yaml, &warnings, &err);
        CHECK(docs == NULL);
        CHECK(warnings == NULL);
        if (err.line != cases[i].line || strstr(err.msg, cases[i].msg) == NULL)
            fprintf(stderr, "error case %zu: %d:%d: %s\n", i, err.line, err.col,
                    err.msg);
        CHECK_INT(err.line, cases[i].line);
        CHECK(err.col >= 1);
        CHECK(strstr(err.msg, cases[i].msg) != NULL);
    }

    /* Nesting is bounded. */
    {
        char deep[1200];
        size_t n = 0;

        for (int i = 0; i < 500; i++)
            deep[n++] = '[';
        deep[n] = '\0';
        docs = load(deep, NULL, &err);
        CHECK(docs == NULL);
        CHECK(strstr(err.msg, "nesting") != NULL);
    }
    /* Alias expansion is bounded ("billion laughs"). */
    {
        const char *bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
                           "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                           "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
                           "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
                           "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
                           "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
                           "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n";

        docs = load(bomb, NULL, &err);
        CHECK(docs == NULL);
        CHECK(strstr(err.msg, "nodes") != NULL);
        CHECK_INT(err.line, 7);
    }
}

/* emit(docs) loads back as docs, and the text contains each needle. */
static void
roundtrip_case(const char *json_text, const char *const *needles)
{
    json_t *docs = J(json_text), *again;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct ng_error err;

    CHECK_INT(yamljson_emit(docs, f), 0);
    fclose(f);
    ng_error_clear(&err);
    again = yamljson_load(text, len, "out.yaml", NULL, &err);
    if (again == NULL || !json_equal(again, docs)) {
        fprintf(stderr, "round trip of %s failed: %s\n%s\n", json_text, err.msg,
                text);
        CHECK(0);
    } else {
        CHECK(1);
    }
    for (; needles != NULL && *needles != NULL; needles++) {
        if (strstr(text, *needles) == NULL)
            fprintf(stderr, "emitted YAML lacks %s:\n%s\n", *needles, text);
        CHECK(strstr(text, *needles) != NULL);
    }
    json_decref(again);
    json_decref(docs);
    free(text);
}

static void
test_emit(void)
{
    static const char *const quoted[] = {
        "gpu: \"8\"",
        "b: \"true\"",
        "o: \"0777\"",
        "\"n\": \"null\"", /* the key "n" would read as false */
        "e: \"\"",
        "\"y\": \"y\"",
        "inf: \".inf\"",
        NULL};
    static const char *const plain[] = {"limit: 16Gi", "num: 8",  "f: 1.5",
                                        "t: true",     "z: null", "x: {}",
                                        "l: []",       NULL};
    static const char *const docs2[] = {"a: 1\n---\nb: 2", NULL};

    roundtrip_case("[{'gpu':'8','b':'true','o':'0777','n':'null','e':'',"
                   "'y':'y','inf':'.inf','merge':'<<','lead':' x',"
                   "'colon':'a: b','hash':'# c','multi':'line1\\nline2\\n',"
                   "'trail':'x  \\n','uni':'caf\\u00e9','tab':'a\\tb'}]",
                   quoted);
    roundtrip_case("[{'limit':'16Gi','num':8,'f':1.5,'t':true,'z':null,"
                   "'x':{},'l':[],'big':1e300,'neg':-0.25,'whole':2.0}]",
                   plain);
    roundtrip_case("[{'a':1},{'b':2}]", docs2);
    roundtrip_case("[[1,[2,[3]]],'scalar doc']", NULL);
    roundtrip_case("[]", NULL);
}

int
main(void)
{
    test_scalars();
    test_streams();
    test_anchors();
    test_duplicates();
    test_errors();
    test_emit();
    return harness_finish();
}
