/* Unit tests for base/buf.c: the capped growable buffer. */
#include "base/buf.h"

#include <malloc.h>
#include <stdarg.h>
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
    /* 4,000 bytes grew the block to 4,096, within the slack: kept. */
    CHECK(malloc_usable_size(s) >= 4096);
    free(s);
    /* 5,000 bytes in a block of 8,192: handed over cut to size. */
    for (int i = 0; i < 1250; i++)
        CHECK_INT(buf_addf(&b, "%03d,", i % 1000), 0);
    CHECK_INT((int)b.cap, 8192);
    s = buf_take(&b, &n);
    CHECK_INT((int)n, 5000);
    CHECK(s != NULL && strlen(s) == 5000 && strncmp(s + 4996, "249,", 4) == 0);
    CHECK(s != NULL && malloc_usable_size(s) < 8192 - 1024);
    free(s);
    /* A long formatted string goes through the second vsnprintf. */
    CHECK_INT(buf_addf(&b, "%0600d", 5), 0);
    CHECK_INT((int)b.len, 600);
    CHECK(b.p[599] == '5' && b.p[600] == '\0');
    buf_release(&b);
}

/* The growth a budget-keeping caller (the HTTP body) charges beforehand:
 * buf_reserve_size() says what buf_reserve() then allocates. */
static void
test_reserve_size(void)
{
    static const struct {
        size_t max, have, more, want;
    } cases[] = {
        {1 << 20, 0, 10, 256},      /* small: the first block */
        {1 << 20, 0, 1000, 1001},   /* one big reservation: exact */
        {1 << 20, 300, 1, 602},     /* then doubling */
        {1 << 20, 300, 5000, 5301}, /* doubling too little: exact */
        {1000, 0, 1000, 1001},      /* up to the cap, NUL included */
        {1000, 600, 300, 1001},     /* doubling stops at the cap */
        {1000, 600, 401, 0},        /* past the cap */
        {100, 0, 10, 101},          /* a cap below the first block */
        {1 << 20, 0, 0, 256},
    };
    struct buf b;
    char fill[5000];

    memset(fill, 'f', sizeof(fill));
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t want = cases[i].want;

        buf_init(&b, cases[i].max);
        CHECK_INT(buf_reserve(&b, cases[i].have), 0);
        CHECK_INT(buf_add(&b, fill, cases[i].have), 0);
        CHECK_INT(buf_reserve_size(&b, cases[i].more), want);
        CHECK_INT(buf_reserve(&b, cases[i].more), want == 0 ? -1 : 0);
        if (want != 0)
            CHECK_INT(b.cap, want);
        /* Nothing more to grow: the allocation stays. */
        if (want != 0)
            CHECK_INT(buf_reserve_size(&b, cases[i].more), want);
        buf_release(&b);
    }
}

/* buf_addvf() leaves the caller's va_list usable (it copies it). */
static int
addvf_twice(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    int rc;

    va_start(ap, fmt);
    rc = buf_addvf(b, fmt, ap);
    if (rc == 0)
        rc = buf_addvf(b, fmt, ap);
    va_end(ap);
    return rc;
}

static void
test_addvf(void)
{
    struct buf b;

    buf_init(&b, 2000);
    CHECK_INT(addvf_twice(&b, "%s=%d;", "k", 42), 0);
    CHECK_STR(b.p, "k=42;k=42;");
    buf_reset(&b);
    /* Longer than the first pass's stack buffer. */
    CHECK_INT(addvf_twice(&b, "%0300d|", 7), 0);
    CHECK_INT(b.len, 602);
    CHECK(b.p[300] == '|' && b.p[601] == '|' && b.p[600] == '7');
    CHECK_INT(addvf_twice(&b, "%01400d", 1), -1); /* past the cap */
    CHECK_INT(b.len, 602);
    buf_release(&b);
}

static void
test_base64(void)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"", ""},
        {"f", "Zg=="},
        {"fo", "Zm8="},
        {"foo", "Zm9v"},
        {"foob", "Zm9vYg=="},
        {"fooba", "Zm9vYmE="},
        {"foobar", "Zm9vYmFy"},
        {"\xff\xfe", "//4="},
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

/* Every length up to 300 of varied bytes (all 256 values occur) against a
 * plain six-bits-at-a-time encoder: covers the wide steps, the three-byte
 * steps and both paddings at every alignment. */
static void
test_base64_lengths(void)
{
    static const char tab[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    unsigned char in[300];
    char want[404];
    struct buf b;

    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(i * 167u + (i >> 3) * 29u);
    buf_init(&b, 1024);
    for (size_t n = 0; n <= sizeof(in); n++) {
        size_t bits = 0, k = 0;
        unsigned acc = 0;

        for (size_t i = 0; i < n; i++) {
            acc = (acc << 8 | in[i]) & 0xffffu;
            bits += 8;
            while (bits >= 6) {
                bits -= 6;
                want[k++] = tab[(acc >> bits) & 63];
            }
        }
        if (bits > 0)
            want[k++] = tab[(acc << (6 - bits)) & 63];
        while (k % 4 != 0)
            want[k++] = '=';
        want[k] = '\0';
        buf_reset(&b);
        CHECK_INT(buf_add_base64(&b, in, n), 0);
        CHECK_STR(b.p ? b.p : "", want);
    }
    buf_release(&b);
}

/* buf_reserve_exact() grows to just len + more + 1 where buf_reserve()
 * would double (the server's padding after a body reserved exactly), keeps
 * an allocation that is big enough, and refuses past the cap, leaving the
 * buffer as it was. */
static void
test_reserve_exact(void)
{
    struct buf b;
    char *p;

    buf_init(&b, 1100);
    CHECK_INT(buf_reserve(&b, 1000), 0);
    CHECK_INT(b.cap, 1001);
    memset(b.p, 'x', 1000);
    b.len = 1000;
    /* Doubling, capped at max + 1. */
    CHECK_INT(buf_reserve_size(&b, 80), 1101);
    CHECK_INT(buf_reserve_exact_size(&b, 80), 1081);
    CHECK_INT(buf_reserve_exact(&b, 80), 0);
    CHECK_INT(b.cap, 1081);
    CHECK(b.p[999] == 'x');
    CHECK_INT(buf_reserve_exact(&b, 10), 0);
    CHECK_INT(b.cap, 1081);
    p = b.p;
    CHECK_INT(buf_reserve_exact_size(&b, 101), 0);
    CHECK_INT(buf_reserve_exact(&b, 101), -1);
    CHECK(b.p == p && b.cap == 1081 && b.len == 1000);
    buf_release(&b);
}

int
main(void)
{
    test_cap();
    test_take();
    test_reserve_size();
    test_reserve_exact();
    test_addvf();
    test_base64();
    test_base64_lengths();
    return harness_finish();
}
