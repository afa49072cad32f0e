/* Unit tests for server/jparse.c: the same values as jansson, or the same
 * refusal, for a table of valid and broken JSON texts. */
#include "jparse.h"

#include <stdlib.h>

#include "harness.h"

/* Parses text (len bytes) with both parsers and compares. */
static void
same_as_jansson(const char *what, const char *text, size_t len)
{
    struct ng_error err;
    json_error_t jerr;
    json_t *ours, *ref;

    ng_error_clear(&err);
    ours = jparse_load(text, len, &err);
    ref = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if ((ours == NULL) != (ref == NULL) ||
        (ours != NULL && !json_equal(ours, ref))) {
        fprintf(stderr, "case %s: ours %s (%s), jansson %s (%s)\n", what,
                ours ? "ok" : "failed", err.msg, ref ? "ok" : "failed",
                jerr.text);
        CHECK(0);
    } else {
        CHECK(1);
    }
    if (ours == NULL) {
        CHECK(err.msg[0] != '\0');
        CHECK(err.line >= 1);
    }
    json_decref(ours);
    json_decref(ref);
}

static void
test_table(void)
{
    static const struct {
        const char *what, *text;
    } cases[] = {
        {"empty object", "{}"},
        {"empty array", " [ ] "},
        {"nested", "{\"a\":{\"b\":[1,2,{\"c\":null}]},\"d\":true,\"e\":false}"},
        {"whitespace", "\r\n\t{ \"a\" :\t1 ,\n\"b\" : [ ] }\n"},
        {"escapes", "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]"},
        {"unicode escape", "[\"caf\\u00e9 \\u20ac\"]"},
        {"surrogate pair", "[\"\\ud83d\\ude00\"]"},
        {"raw utf-8", "[\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"]"},
        {"escaped key", "{\"a\\u0062c\":1,\"a\\nb\":2}"},
        {"long key",
         "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaa\\u0062\":{\"x\\n\":\"y\\n\"}}"},
        {"duplicate key", "{\"a\":1,\"a\":2}"},
        {"duplicate escaped key", "{\"a\":1,\"\\u0061\":2}"},
        {"same key in two objects", "[{\"a\":1},{\"a\":2}]"},
        {"empty key", "{\"\":1}"},
        {"integers", "[0,-0,1,-1,9223372036854775807,-9223372036854775808]"},
        {"reals", "[0.5,-0.25,1e3,1E+2,2.5e-3,1e308,1e-400,0.0]"},
        {"integer too big", "[9223372036854775808]"},
        {"integer too small", "[-9223372036854775809]"},
        {"real overflow", "[1e309]"},
        {"leading zero", "[01]"},
        {"leading plus", "[+1]"},
        {"bare dot", "[.5]"},
        {"trailing dot", "[1.]"},
        {"bad exponent", "[1e]"},
        {"minus alone", "[-]"},
        {"hex", "[0x10]"},
        {"top-level scalar", "1"},
        {"top-level string", "\"x\""},
        {"empty", ""},
        {"only spaces", "   "},
        {"trailing garbage", "{} x"},
        {"two values", "{}{}"},
        {"trailing comma array", "[1,]"},
        {"trailing comma object", "{\"a\":1,}"},
        {"missing colon", "{\"a\" 1}"},
        {"unquoted key", "{a:1}"},
        {"single quotes", "['a']"},
        {"unterminated string", "[\"abc"},
        {"unterminated array", "[1,2"},
        {"unterminated object", "{\"a\":1"},
        {"raw newline in string", "[\"a\nb\"]"},
        {"raw tab in string", "[\"a\tb\"]"},
        {"bad escape", "[\"\\x\"]"},
        {"short unicode escape", "[\"\\u12\"]"},
        {"lone high surrogate", "[\"\\ud83d\"]"},
        {"lone low surrogate", "[\"\\ude00\"]"},
        {"nul escape", "[\"a\\u0000b\"]"},
        {"invalid utf-8", "[\"\xff\"]"},
        {"overlong utf-8", "[\"\xc0\xaf\"]"},
        {"utf-8 surrogate", "[\"\xed\xa0\x80\"]"},
        {"truncated utf-8", "[\"\xe2\x82\"]"},
        {"true prefix", "[tru]"},
        {"True", "[True]"},
        {"nan", "[NaN]"},
        {"comment", "[1 /* no */]"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        same_as_jansson(cases[i].what, cases[i].text, strlen(cases[i].text));
    /* Not NUL-terminated: only len bytes count. */
    same_as_jansson("length bound", "{\"a\":1}garbage", 7);
    same_as_jansson("cut short", "{\"a\":1}", 5);
    /* A NUL byte in the input. */
    same_as_jansson("nul byte", "[\"a\0b\"]", 7);
}

static void
test_positions_and_depth(void)
{
    struct ng_error err;
    json_t *v;
    char *deep;
    size_t n = 0;

    ng_error_clear(&err);
    v = jparse_load("{\n  \"a\": 1,\n  \"b\": x\n}", 22, &err);
    CHECK(v == NULL);
    CHECK_INT(err.line, 3);
    CHECK_INT(err.col, 8);
    CHECK(strstr(err.msg, "invalid token") != NULL);

    deep = malloc(2 * JPARSE_MAX_DEPTH + 10);
    for (int i = 0; i < JPARSE_MAX_DEPTH; i++)
        deep[n++] = '[';
    for (int i = 0; i < JPARSE_MAX_DEPTH; i++)
        deep[n++] = ']';
    v = jparse_load(deep, n, &err);
    CHECK(v != NULL); /* exactly the maximum */
    json_decref(v);
    memmove(deep + 1, deep, n);
    deep[0] = '[';
    deep[n + 1] = ']';
    ng_error_clear(&err);
    v = jparse_load(deep, n + 2, &err);
    CHECK(v == NULL);
    CHECK(strstr(err.msg, "nesting") != NULL);
    free(deep);
}

int
main(void)
{
    test_table();
    test_positions_and_depth();
    return harness_finish();
}
