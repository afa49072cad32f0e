/* Unit tests for base/buf.c: the capped growable buffer. */
#include "base/buf.h"

#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void
test_cap(void)
{
    struct buf b;

    buf_init(&b, 8);
    CHECK_INT(buf_adds(&b, "12345678"), 0);
    CHECK_INT((int)b.len, 8);
    /* One byte past the cap fails and changes nothing. */
    CHECK_INT(buf_addc(&b, 'x'), -1);
    CHECK_INT(buf_addf(&b, "%d", 7), -1);
    CHECK_INT((int)b.len, 8);
    CHECK_STR(b.p, "12345678");
    buf_release(&b);
    CHECK(b.p == NULL);
    buf_release(&b); /* twice is fine */
}

static void
test_take(void)
{
    struct buf b;
    size_t n = 99;
    char *s;

    buf_init(&b, 1 << 20);
    s = buf_take(&b, &n); /* nothing appended: "" */
    CHECK(s != NULL && s[0] == '\0');
    CHECK_INT((int)n, 0);
    free(s);
    for (int i = 0; i < 1000; i++)
        CHECK_INT(buf_addf(&b, "%03d,", i), 0);
    CHECK_INT((int)b.len, 4000);
    s = buf_take(&b, &n);
    CHECK_INT((int)n, 4000);
    CHECK(strncmp(s + 3996, "999,", 4) == 0);
    CHECK(b.p == NULL && b.len == 0);
    free(s);
    /* A long formatted string goes through the second vsnprintf. */
    CHECK_INT(buf_addf(&b, "%0600d", 5), 0);
    CHECK_INT((int)b.len, 600);
    CHECK(b.p[599] == '5' && b.p[600] == '\0');
    buf_release(&b);
}

static void
test_json(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"plain", "\"plain\""},
        {"a\"b\\c", "\"a\\\"b\\\\c\""},
        {"\n\t\x01", "\"\\n\\t\\u0001\""},
        {"\xc3\xa9", "\"\xc3\xa9\""}, /* UTF-8 passes through */
        {"", "\"\""},
    };
    struct buf b;

    buf_init(&b, 4096);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        buf_reset(&b);
        CHECK_INT(buf_add_json_str(&b, cases[i].in, strlen(cases[i].in)), 0);
        CHECK_STR(b.p, cases[i].out);
    }
    buf_release(&b);
    /* A string that does not fit leaves nothing half-written. */
    buf_init(&b, 6);
    CHECK_INT(buf_adds(&b, "ab"), 0);
    CHECK_INT(buf_add_json_str(&b, "xyz", 3), -1);
    CHECK_STR(b.p, "ab");
    buf_release(&b);
}

static void
test_base64(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"", ""},         {"f", "Zg=="},         {"fo", "Zm8="},
        {"foo", "Zm9v"},  {"foob", "Zm9vYg=="},  {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"}, {"\xff\xfe", "//4="},
    };
    struct buf b;

    buf_init(&b, 1024);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        buf_reset(&b);
        CHECK_INT(buf_add_base64(&b, cases[i].in, strlen(cases[i].in)), 0);
        CHECK_STR(b.p ? b.p : "", cases[i].out);
    }
    buf_release(&b);
}

int
main(void)
{
    test_cap();
    test_take();
    test_json();
    test_base64();
    return harness_finish();
}
