/* Unit tests for server/jsonenc: the output must equal jansson's
 * json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) byte for byte. */
#include "jsonenc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* Encodes v both ways and compares; consumes v. */
static void
same_as_jansson(json_t *v, const char *what)
{
    size_t len = 0;
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    char *got = jsonenc_dumps(v, &len);

    CHECK(want != NULL && got != NULL);
    if (want != NULL && got != NULL) {
        CHECK_INT(len, strlen(want));
        if (strcmp(want, got) != 0)
            fprintf(stderr, "%s:\n want %s\n got  %s\n", what, want, got);
        CHECK_STR(got, want);
    }
    free(want);
    free(got);
    json_decref(v);
}

static void
test_scalars(void)
{
    static const double reals[] = {0.0, -0.0, 1.0, 1.5, -2.25, 1e300, 1e-300,
                                   123456789012345678.0, 0.1, 1e21, 1e22,
                                   5e-324, 1.7976931348623157e308, 100.0};
    same_as_jansson(json_null(), "null");
    same_as_jansson(json_true(), "true");
    same_as_jansson(json_false(), "false");
    same_as_jansson(json_integer(0), "0");
    same_as_jansson(json_integer(-9223372036854775807LL - 1), "int64 min");
    same_as_jansson(json_integer(9223372036854775807LL), "int64 max");
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++)
        same_as_jansson(json_real(reals[i]), "real");
}

static void
test_strings(void)
{
    char all[128];

    for (int i = 0; i < 127; i++)
        all[i] = (char)(i + 1);
    all[127] = '\0';
    same_as_jansson(json_string(""), "empty");
    same_as_jansson(json_string(all), "every ASCII byte");
    same_as_jansson(json_string("quote \" backslash \\ slash / tab \t"),
                    "escapes");
    same_as_jansson(json_string("caf\xc3\xa9 \xe2\x80\xa8 \xf0\x9f\x9a\x80"),
                    "UTF-8 and U+2028");
    same_as_jansson(json_stringn("a\0b", 3), "embedded NUL");
    same_as_jansson(json_pack("{s:i}", "key \"with\"\n escapes", 1),
                    "escaped key");
}

static void
test_documents(void)
{
    static const char *docs[] = {
        "{}",
        "[]",
        "[[],{},[{}]]",
        "{\"b\":1,\"a\":[1,2.5,\"x\",null,true,false],\"c\":{\"d\":{}}}",
        "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\","
        "\"response\":{\"uid\":\"u\",\"allowed\":true,\"patchType\":"
        "\"JSONPatch\",\"patch\":\"W10=\",\"warnings\":[\"w\\u0001\"]}}",
    };

    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY, NULL);
        CHECK(v != NULL);
        if (v != NULL)
            same_as_jansson(v, docs[i]);
    }
}

static void
test_limits(void)
{
    json_t *deep = json_array(), *cur = deep;
    size_t len = 7;
    char *s;

    /* Deeper than the cap: refused, not a stack overflow. */
    for (int i = 0; i < 3000; i++) {
        json_t *next = json_array();
        json_array_append_new(cur, next);
        cur = next;
    }
    s = jsonenc_dumps(deep, &len);
    CHECK(s == NULL);
    CHECK_INT(len, 7); /* untouched on failure */
    free(s);
    json_decref(deep);
    CHECK(jsonenc_dumps(NULL, NULL) == NULL);
}

int
main(void)
{
    test_scalars();
    test_strings();
    test_documents();
    test_limits();
    printf("%d passed, %d failed\n", harness_passed, harness_failed);
    return harness_failed ? 1 : 0;
}
