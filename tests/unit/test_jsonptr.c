/* Unit tests for base/jsonptr.c: RFC 6901 pointers. The cases marked
 * "was" are where admission/patch.c and cli/policytest.c used to read the
 * same pointer differently; the expected answer is RFC 6901's. */
#include "base/jsonptr.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

static const char doc_text[] =
    "{\"a/b\": {\"m~n\": [10, 20]}, \"x\": {\"\": 5}, \"\": \"empty\","
    " \"~1\": \"tilde-one\", \"~\": \"tilde\", \"/\": \"slash\","
    " \"arr\": [\"a0\", \"a1\", \"a2\", \"a3\", \"a4\", \"a5\", \"a6\","
    " \"a7\", \"a8\", \"a9\", \"a10\", \"a11\"], \"none\": [], \"s\": \"str\"}";

static void
test_get(void)
{
    static const struct {
        const char *ptr;
        const char *want; /* compact JSON, or NULL for "names nothing" */
    } cases[] = {
        {"", NULL}, /* the whole document: checked below */
        {"/a~1b/m~0n/1", "20"},
        {"/x/", "5"},
        {"/", "\"empty\""},
        {"/~01", "\"tilde-one\""}, /* ~0 then '1', not ~ then ~1 */
        {"/~0", "\"tilde\""},
        {"/~1", "\"slash\""},
        {"/arr/0", "\"a0\""},
        {"/arr/11", "\"a11\""},
        {"/arr/10", "\"a10\""},
        /* Bad escapes: was the literal '~' in policytest. */
        {"/~", NULL},
        {"/~2", NULL},
        {"/a~1b/m~n/0", NULL},
        /* Leading zeros and other non-indices: was arr[1] (strtoul) in
         * policytest for all of "01", "+1", " 1", "0x1". */
        {"/arr/01", NULL},
        {"/arr/00", NULL},
        {"/arr/+1", NULL},
        {"/arr/ 1", NULL},
        {"/arr/0x1", NULL},
        {"/arr/1e0", NULL},
        {"/arr/-1", NULL},
        {"/arr/", NULL},
        /* "-" names the end only for an append, never when resolving. */
        {"/arr/-", NULL},
        {"/none/0", NULL},
        {"/none/-", NULL},
        /* Out of range, including a number past SIZE_MAX. */
        {"/arr/12", NULL},
        {"/arr/99999999999999999999999999", NULL},
        /* Not a pointer at all: was the whole document in policytest. */
        {"arr", NULL},
        {"arr/0", NULL},
        /* Through a scalar, and empty tokens that name nothing. */
        {"/s/0", NULL},
        {"/x//", NULL},
        {"/missing", NULL},
    };
    json_t *doc = json_loads(doc_text, 0, NULL);

    CHECK(doc != NULL);
    CHECK(jsonptr_get(doc, "") == doc);
    CHECK(jsonptr_get(doc, NULL) == NULL);
    for (size_t i = 1; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *got = jsonptr_get(doc, cases[i].ptr);
        char *text = got != NULL
                         ? json_dumps(got, JSON_ENCODE_ANY | JSON_COMPACT)
                         : NULL;

        if (cases[i].want == NULL) {
            if (got != NULL)
                fprintf(stderr, "pointer \"%s\" gave %s\n", cases[i].ptr, text);
            CHECK(got == NULL);
        } else {
            if (text == NULL)
                fprintf(stderr, "pointer \"%s\" gave nothing\n", cases[i].ptr);
            CHECK_STR(text, cases[i].want);
        }
        free(text);
    }
    json_decref(doc);
}

/* Tokens at and past JSONPTR_MAX_TOKEN: a long key is refused whole, never
 * cut short into another key (policytest's 512-byte copy read the first
 * 511 bytes and then answered with the object it had reached). */
static void
test_long_token(void)
{
    size_t n = JSONPTR_MAX_TOKEN - 1;
    char *key = malloc(n + 2), *ptr = malloc(n + 4);
    json_t *doc = json_object();

    if (key == NULL || ptr == NULL || doc == NULL) {
        CHECK(0);
        goto out;
    }
    memset(key, 'k', n);
    key[n] = '\0';
    CHECK_INT(json_object_set_new(doc, key, json_integer(1)), 0);
    ptr[0] = '/';
    memcpy(ptr + 1, key, n + 1);
    CHECK_INT(json_integer_value(jsonptr_get(doc, ptr)), 1);
    /* One byte longer: too long, even though its prefix exists. */
    key[n] = 'k';
    key[n + 1] = '\0';
    CHECK_INT(json_object_set_new(doc, key, json_integer(2)), 0);
    memcpy(ptr + 1, key, n + 2);
    CHECK(jsonptr_get(doc, ptr) == NULL);
out:
    json_decref(doc);
    free(key);
    free(ptr);
}

static void
test_index(void)
{
    static const struct {
        const char *tok;
        size_t size;
        bool end_ok;
        int rc;
        size_t want;
    } cases[] = {
        {"0", 1, false, 0, 0},
        {"0", 0, false, -1, 0},
        {"0", 0, true, 0, 0},
        {"3", 3, false, -1, 0},
        {"3", 3, true, 0, 3},
        {"4", 3, true, -1, 0},
        {"-", 3, true, 0, 3},
        {"-", 3, false, -1, 0},
        {"-", 0, true, 0, 0},
        {"01", 5, true, -1, 0},
        {"", 5, true, -1, 0},
        {"1a", 5, true, -1, 0},
        {"-0", 5, true, -1, 0},
        {"--", 5, true, -1, 0},
        {"123", 200, false, 0, 123},
        {"18446744073709551616", (size_t)-1, true, -1, 0},
        {"99999999999999999999999999999999999999", (size_t)-1, true, -1, 0},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t got = 777;
        int rc =
            jsonptr_index(cases[i].tok, cases[i].size, cases[i].end_ok, &got);

        if (rc != cases[i].rc)
            fprintf(stderr, "index \"%s\" (size %zu, end_ok %d)\n",
                    cases[i].tok, cases[i].size, (int)cases[i].end_ok);
        CHECK_INT(rc, cases[i].rc);
        if (cases[i].rc == 0)
            CHECK_INT(got, cases[i].want);
        else
            CHECK_INT(got, 777); /* untouched */
    }
}

static void
test_escape(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "plain"},
        {"a/b", "a~1b"},
        {"m~n", "m~0n"},
        {"~1", "~01"},
        {"/~", "~1~0"},
        {"", ""},
        {"\xc3\xa9/", "\xc3\xa9~1"},
    };
    char buf[32], tok[32];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *p = buf + 1;

        buf[0] = '/';
        CHECK_INT(jsonptr_escape(cases[i].in, buf + 1, sizeof(buf) - 1), 0);
        CHECK_STR(buf + 1, cases[i].out);
        /* The round trip gives the key back. */
        p = buf;
        CHECK_INT(jsonptr_token_next(&p, tok, sizeof(tok)),
                  strlen(cases[i].in));
        CHECK_STR(tok, cases[i].in);
        CHECK(*p == '\0');
    }
    /* Too small: a prefix that ends on a whole escape. */
    CHECK_INT(jsonptr_escape("a/b/c", buf, 4), -1);
    CHECK_STR(buf, "a~1");
    CHECK_INT(jsonptr_escape("a/b/c", buf, 3), -1);
    CHECK_STR(buf, "a"); /* not "a~", half an escape */
    CHECK_INT(jsonptr_escape("ab", buf, 3), 0);
    CHECK_INT(jsonptr_escape("abc", buf, 3), -1);
    CHECK_STR(buf, "ab");
    CHECK_INT(jsonptr_escape("x", buf, 0), -1);
}

int
main(void)
{
    test_get();
    test_long_token();
    test_index();
    test_escape();
    return harness_finish();
}
