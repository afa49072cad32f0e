/* Unit tests for the review decoder's lazy arrays (admission/fastjson.h,
 * FASTJSON_LAZY): what is read off the tape is what the built value
 * holds, written to the same bytes; the document outlives later decodes
 * and is released from any thread. */
#include "admission/fastjson.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admission/jsonwrite.h"
#include "base/buf.h"
#include "base/file.h"
#include "harness.h"

static const struct fastjson_shape lazy = {.keep = FASTJSON_LAZY};
static const struct fastjson_field a_fields[] = {{"a", &lazy}, {NULL, NULL}};
static const struct fastjson_shape shape = {.keep = FASTJSON_FIELDS,
                                            .fields = a_fields};

static char *
text_of(const json_t *v)
{
    struct buf b;

    buf_init(&b, (size_t)-1);
    CHECK_INT(jsonwrite_value(&b, v), 0);
    return buf_take(&b, NULL);
}

static char *
text_of_ref(struct fastjson_ref r)
{
    struct buf b;

    buf_init(&b, (size_t)-1);
    CHECK_INT(fastjson_ref_write(&b, r), 0);
    return buf_take(&b, NULL);
}

/* r against the built v: type, bytes, size, string, and the members or
 * elements two levels down. */
static void
same_value(struct fastjson_ref r, const json_t *v, int depth)
{
    char *a = text_of_ref(r), *b = text_of(v);

    CHECK_INT(fastjson_ref_type(r), (int)json_typeof(v));
    CHECK(a != NULL && b != NULL && strcmp(a, b) == 0);
    if (a != NULL && b != NULL && strcmp(a, b) != 0)
        fprintf(stderr, "tape %.200s\nbuilt %.200s\n", a, b);
    free(a);
    free(b);
    if (json_is_string(v)) {
        CHECK(fastjson_ref_string(r) != NULL &&
              strcmp(fastjson_ref_string(r), json_string_value(v)) == 0);
    } else {
        CHECK(fastjson_ref_string(r) == NULL);
    }
    if (json_is_object(v)) {
        const char *k;
        json_t *m;

        CHECK_INT(fastjson_ref_size(r), json_object_size(v));
        json_object_foreach((json_t *)v, k, m)
        {
            if (depth < 2)
                same_value(fastjson_ref_member(r, k), m, depth + 1);
            else
                CHECK_INT(fastjson_ref_type(fastjson_ref_member(r, k)),
                          (int)json_typeof(m));
        }
        CHECK_INT(fastjson_ref_type(fastjson_ref_member(r, "no such key")), -1);
    } else {
        /* No members but an object's. */
        CHECK_INT(fastjson_ref_type(fastjson_ref_member(r, "name")), -1);
        CHECK_INT(fastjson_ref_size(r), json_array_size(v));
    }
}

/* {"a":[elements]} decoded whole and lazily: the same length, nulls in
 * the lazy view, each element read off the tape as built. */
static void
check_elements(const char *elements, size_t len)
{
    size_t n = len + 16;
    char *text = malloc(n);
    struct fastjson_error e1, e2;
    struct fastjson_doc *doc = NULL;
    json_t *whole, *view;

    n = (size_t)snprintf(text, n, "{\"a\":[%.*s]}", (int)len, elements);
    whole = fastjson_decode(text, n, &shape, &e1);
    view = fastjson_decode_doc(text, n, &shape, &doc, &e2);
    /* The elements are checked all the same: the same refusals. */
    CHECK((whole == NULL) == (view == NULL));
    CHECK((view == NULL) == (doc == NULL));
    if (whole == NULL || view == NULL) {
        CHECK_STR(e1.text, e2.text);
    } else {
        json_t *wa = json_object_get(whole, "a");
        json_t *la = json_object_get(view, "a");
        const size_t *at = NULL;
        size_t count = 0, i;
        json_t *x;

        CHECK(json_is_array(wa) && json_is_array(la));
        CHECK_INT(json_array_size(la), json_array_size(wa));
        json_array_foreach(la, i, x) CHECK(json_is_null(x));
        CHECK(fastjson_lazy_of(doc, la, &at, &count));
        CHECK_INT(count, json_array_size(wa));
        /* A built array is no lazy one, and no document has none. */
        CHECK(!fastjson_lazy_of(doc, wa, &at, &count));
        CHECK(!fastjson_lazy_of(NULL, la, &at, &count));
        CHECK(fastjson_lazy_of(doc, la, &at, &count));
        for (i = 0; i < count && i < json_array_size(wa); i++)
            same_value((struct fastjson_ref){doc, at[i]}, json_array_get(wa, i),
                       0);
    }
    json_decref(whole);
    json_decref(view);
    fastjson_doc_release(doc);
    free(text);
}

#define ELEMENTS(s) check_elements(s, strlen(s))

static void
test_values(void)
{
    /* Every kind of value, escapes and the real formats included. */
    ELEMENTS("\"s\",\"\\u00e9\\n\\t\\\"\\\\\\/\\u2028\\ud83d\\ude00\\u001f\","
             "\"\",0,-1,9223372036854775807,-9223372036854775808,1.5,-0.0,"
             "1e300,0.1,2.5e-8,1E2,-1e-300,true,false,null,{},[],"
             "{\"k\":{\"x\":[1,{\"y\":null}]},\"\\u00e9\":\"v\",\"\":1},"
             "[[],[{}],[1,2,3]]");
    /* env entries as pods give them. */
    ELEMENTS("{\"name\":\"A\",\"value\":\"1\"},"
             "{\"name\":\"B\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":"
             "\"status.podIP\"}}},\"str\",7,{\"value\":\"x\"},"
             "{\"name\":\"C\",\"valueFrom\":{\"secretKeyRef\":{\"name\":\"s\","
             "\"key\":\"k\"}}}");
    ELEMENTS(""); /* empty */
    /* More keys than the pairwise check takes (the hash set's side). */
    ELEMENTS("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,"
             "\"i\":9,\"j\":10,\"k\":11,\"l\":12,\"m\":13,\"n\":14,\"o\":15,"
             "\"p\":16,\"q\":17}");
}

/* A buffer capped short of an element's text refuses the write at every
 * byte: each separator, key, value and closing bracket is checked, and
 * the writer never passes the cap. At the full length it succeeds. */
static void
test_capped(void)
{
    static const char text[] =
        "{\"a\":[{\"k\":{\"x\":[1,{\"y\":null}]},\"s\":\"v\\n\","
        "\"t\":true,\"f\":false,\"d\":1.5,\"e\":[],\"o\":{}},"
        "[[],[{}],[1,-2,3]],\"s\",7,-0.5,true,false,null,"
        /* A long key or last value that fails where a short closing
         * bracket after it would still fit. */
        "{\"a-long-key\":1},{\"k\":\"a long value\"},[\"xx\",true],"
        "{\"k\":[1,null]},[{\"k\":false}]]}";
    struct fastjson_error e;
    struct fastjson_doc *doc = NULL;
    json_t *view =
        fastjson_decode_doc(text, sizeof(text) - 1, &shape, &doc, &e);
    const size_t *at = NULL;
    size_t count = 0, i, cap;

    CHECK(view != NULL);
    CHECK(view != NULL &&
          fastjson_lazy_of(doc, json_object_get(view, "a"), &at, &count));
    CHECK_INT(count, 13);
    for (i = 0; i < count; i++) {
        struct fastjson_ref r = {doc, at[i]};
        char *full = text_of_ref(r);
        size_t len = full != NULL ? strlen(full) : 0;

        CHECK(len > 0);
        for (cap = 0; cap < len; cap++) {
            struct buf b;

            buf_init(&b, cap);
            CHECK_INT(fastjson_ref_write(&b, r), -1);
            CHECK(b.len <= cap);
            buf_release(&b);
        }
        {
            struct buf b;
            char *got;

            buf_init(&b, len);
            CHECK_INT(fastjson_ref_write(&b, r), 0);
            got = buf_take(&b, NULL);
            CHECK(got != NULL && full != NULL && strcmp(got, full) == 0);
            free(got);
        }
        free(full);
    }
    /* No value to write: a missing member, no document. */
    if (view != NULL) {
        struct buf b;

        buf_init(&b, 64);
        CHECK_INT(fastjson_ref_write(
                      &b, fastjson_ref_member((struct fastjson_ref){doc, at[0]},
                                              "no such key")),
                  -1);
        CHECK_INT(fastjson_ref_write(&b, (struct fastjson_ref){NULL, 0}), -1);
        CHECK_INT(b.len, 0);
        buf_release(&b);
    }
    json_decref(view);
    fastjson_doc_release(doc);
}

static void
test_refusals(void)
{
    static const char *const bad[] = {
        "{\"k\":1,\"k\":2}",    "1,{\"x\":[{\"k\":1,\"k\":2}]}",
        "\"a\\u0000b\"",        "{\"a\\u0000\":1}",
        "18446744073709551615", "[[1],{\"v\":18446744073709551615}]",
    };
    static const char *const where[] = {
        "duplicate object key \"k\" at /a/0",
        "duplicate object key \"k\" at /a/1/x/0",
        "\\u0000 in a string at /a/0",
        "\\u0000 in the key at /a/0",
        "integer too big for 64 bits at /a/0",
        "integer too big for 64 bits at /a/0/1/v",
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        struct fastjson_error err;
        struct fastjson_doc *doc = (struct fastjson_doc *)&err; /* set */
        json_t *v;
        int n = snprintf(text, sizeof(text), "{\"a\":[%s]}", bad[i]);

        v = fastjson_decode_doc(text, (size_t)n, &shape, &doc, &err);
        CHECK(v == NULL);
        CHECK(doc == NULL);
        CHECK_STR(err.text, where[i]);
        ELEMENTS(bad[i]); /* and the same as built whole */
    }
}

/* What is not an array is built whole, and fastjson_decode() builds the
 * lazy array whole. */
static void
test_not_lazy(void)
{
    static const char *const texts[] = {
        "{\"a\":{\"x\":[1,2]}}",
        "{\"a\":\"s\"}",
        "{\"a\":null}",
        "{\"a\":[{\"name\":\"n\"},2],\"b\":1}",
    };

    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        struct fastjson_error err;
        struct fastjson_doc *doc = NULL;
        json_t *full = json_loads(texts[i], 0, NULL);
        json_t *plain =
            fastjson_decode(texts[i], strlen(texts[i]), &shape, &err);
        json_t *view =
            fastjson_decode_doc(texts[i], strlen(texts[i]), &shape, &doc, &err);
        const size_t *at;
        size_t n;

        CHECK(full != NULL && plain != NULL && view != NULL && doc != NULL);
        /* Only the fields the shape names: "b" is not built. */
        json_object_del(full, "b");
        CHECK(json_equal(plain, full));
        if (i < 3) {
            CHECK(json_equal(view, full));
            CHECK(!fastjson_lazy_of(doc, json_object_get(view, "a"), &at, &n));
        } else {
            CHECK(!json_equal(view, full));
            CHECK(fastjson_lazy_of(doc, json_object_get(view, "a"), &at, &n));
            CHECK_INT(n, 2);
        }
        json_decref(full);
        json_decref(plain);
        json_decref(view);
        fastjson_doc_release(doc);
    }
}

static void *
release_thread(void *doc)
{
    fastjson_doc_release(doc);
    return NULL;
}

/* A document stays readable through later decodes on its thread (the
 * decoder's parser goes with it), also one over the size the thread
 * keeps, and is released from another thread. */
static void
test_lifetime(void)
{
    const char *t1 = "{\"a\":[{\"name\":\"first\",\"value\":\"1\"},[true]]}";
    const char *t2 = "{\"a\":[{\"name\":\"second\"}]}";
    struct fastjson_error err;
    struct fastjson_doc *d1 = NULL, *d2 = NULL, *big = NULL;
    json_t *v1 = fastjson_decode_doc(t1, strlen(t1), &shape, &d1, &err);
    json_t *v2, *v3, *vb;
    const size_t *at;
    size_t n;
    pthread_t th;
    struct fastjson_ref r;
    const size_t big_len = 300 * 1024;
    char *bt = malloc(big_len + 64);

    CHECK(v1 != NULL && d1 != NULL);
    v2 = fastjson_decode_doc(t2, strlen(t2), &shape, &d2, &err);
    v3 = fastjson_decode(t2, strlen(t2), NULL, &err);
    CHECK(v2 != NULL && d2 != NULL && v3 != NULL);
    /* The big one: its parser is not kept by the thread after. */
    n = (size_t)snprintf(bt, 64, "{\"a\":[\"");
    memset(bt + n, 'x', big_len);
    n += big_len;
    n += (size_t)snprintf(bt + n, 64, "\",{\"name\":\"big\"}]}");
    vb = fastjson_decode_doc(bt, n, &shape, &big, &err);
    CHECK(vb != NULL && big != NULL);
    json_decref(fastjson_decode(t1, strlen(t1), &shape, &err));

    CHECK(fastjson_lazy_of(d1, json_object_get(v1, "a"), &at, &n));
    CHECK_INT(n, 2);
    r = (struct fastjson_ref){d1, at[0]};
    CHECK_STR(fastjson_ref_string(fastjson_ref_member(r, "name")), "first");
    CHECK_STR(fastjson_ref_string(fastjson_ref_member(r, "value")), "1");
    /* One document's arrays are not another's. */
    CHECK(!fastjson_lazy_of(d2, json_object_get(v1, "a"), &at, &n));
    CHECK(fastjson_lazy_of(d2, json_object_get(v2, "a"), &at, &n));
    r = (struct fastjson_ref){d2, at[0]};
    CHECK_STR(fastjson_ref_string(fastjson_ref_member(r, "name")), "second");
    CHECK(fastjson_lazy_of(big, json_object_get(vb, "a"), &at, &n));
    CHECK_INT(n, 2);
    CHECK_INT(strlen(fastjson_ref_string((struct fastjson_ref){big, at[0]})),
              big_len);
    CHECK_STR(fastjson_ref_string(fastjson_ref_member(
                  (struct fastjson_ref){big, at[1]}, "name")),
              "big");

    CHECK_INT(pthread_create(&th, NULL, release_thread, d1), 0);
    CHECK_INT(pthread_join(th, NULL), 0);
    fastjson_doc_release(big);
    fastjson_doc_release(d2);
    fastjson_doc_release(NULL);
    json_decref(v1);
    json_decref(v2);
    json_decref(v3);
    json_decref(vb);
    free(bt);
    /* And the thread decodes on. */
    v1 = fastjson_decode_doc(t1, strlen(t1), &shape, &d1, &err);
    CHECK(v1 != NULL && d1 != NULL);
    json_decref(v1);
    fastjson_doc_release(d1);
}

/* Every review of the fuzz corpus, as an element: read off the tape as
 * built, or refused the same way. */
static void
test_corpus(void)
{
    const char *dir = "tests/fuzz/corpus/review";
    DIR *d = opendir(dir);
    struct dirent *de;
    int files = 0;

    CHECK(d != NULL);
    while (d != NULL && (de = readdir(d)) != NULL) {
        char path[512];
        char *text;
        size_t len;
        struct ng_error err;

        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        text = file_read(path, 16u << 20, &len, &err);
        CHECK(text != NULL);
        if (text == NULL)
            continue;
        check_elements(text, len);
        free(text);
        files++;
    }
    if (d != NULL)
        closedir(d);
    CHECK(files > 100);
}

/* ---- under allocation failure ---------------------------------------- */

/* Fails the allocation numbered oom_fail_at: jansson's through its
 * allocator, libc's malloc, calloc and realloc of ncclguard's own code
 * through link-time wraps (MUTATE_TEST_WRAP, admission/admission.mk). */
static long oom_count, oom_fail_at = -1;
static bool oom_on;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);

static bool
oom_now(void)
{
    return oom_on && oom_count++ == oom_fail_at;
}

void *
__wrap_malloc(size_t n)
{
    return oom_now() ? NULL : __real_malloc(n);
}

void *
__wrap_calloc(size_t n, size_t size)
{
    return oom_now() ? NULL : __real_calloc(n, size);
}

void *
__wrap_realloc(void *p, size_t n)
{
    return oom_now() ? NULL : __real_realloc(p, n);
}

static void *
oom_json_malloc(size_t n)
{
    return oom_now() ? NULL : __real_malloc(n);
}

static void
oom_json_free(void *p)
{
    free(p);
}

/* Each allocation of a decode with lazy arrays failed in turn: the decode
 * fails whole, saying so, or reads as it does with memory. */
static void
test_oom(void)
{
    struct buf t;
    char *text, *want = NULL;
    size_t len, failed = 0, k;
    json_malloc_t old_m;
    json_free_t old_f;

    /* Enough elements for the registry and the nulls to grow. */
    buf_init(&t, (size_t)-1);
    CHECK_INT(buf_adds(&t, "{\"a\":["), 0);
    for (int i = 0; i < 40; i++)
        CHECK_INT(buf_addf(&t, "%s{\"name\":\"N%d\",\"value\":%d.5}",
                           i ? "," : "", i, i),
                  0);
    CHECK_INT(buf_adds(&t, "],\"b\":1}"), 0);
    text = buf_take(&t, &len);
    json_get_alloc_funcs(&old_m, &old_f);
    for (k = 0; k < 100000; k++) {
        struct fastjson_error err;
        struct fastjson_doc *doc = NULL;
        json_t *v;
        const size_t *at;
        size_t n;
        struct buf b;

        /* A fresh thread state each round: its first allocations fail
         * too. */
        fastjson_thread_release();
        oom_count = 0;
        oom_fail_at = (long)k;
        oom_on = true;
        json_set_alloc_funcs(oom_json_malloc, oom_json_free);
        v = fastjson_decode_doc(text, len, &shape, &doc, &err);
        json_set_alloc_funcs(old_m, old_f);
        oom_on = false;
        if (v == NULL) {
            CHECK(err.oom);
            CHECK(doc == NULL);
            CHECK_STR(err.text, "out of memory");
            failed++;
            continue;
        }
        CHECK(doc != NULL);
        CHECK(fastjson_lazy_of(doc, json_object_get(v, "a"), &at, &n));
        CHECK_INT(n, 40);
        buf_init(&b, (size_t)-1);
        for (size_t i = 0; i < n; i++)
            CHECK_INT(fastjson_ref_write(&b, (struct fastjson_ref){doc, at[i]}),
                      0);
        if (want == NULL)
            want = buf_take(&b, NULL);
        else
            CHECK(b.p != NULL && strncmp(b.p, want, b.len) == 0 &&
                  strlen(want) == b.len);
        buf_release(&b);
        json_decref(v);
        fastjson_doc_release(doc);
        if (oom_count <= (long)k)
            break; /* every allocation was failed once */
    }
    CHECK(k < 100000);
    CHECK(failed > 5); /* allocations there were, and each one failed */
    CHECK(want != NULL &&
          strncmp(want, "{\"name\":\"N0\",\"value\":0.5}", 25) == 0);
    oom_fail_at = -1;
    free(want);
    free(text);
}

int
main(void)
{
    test_values();
    test_capped();
    test_refusals();
    test_not_lazy();
    test_lifetime();
    test_corpus();
    test_oom();
    return harness_finish();
}
